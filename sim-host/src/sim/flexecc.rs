//! FlexECC runs of the simulator (`--features flex-ecc`): a write-back LRU cache manager over the
//! simulated SSD, a model disk behind it, modelled bit errors and decode costs, and the idle-time
//! scrubber. The same run with `--ecc all-bch` is the paper's BCH-SSD: the same cache manager and
//! errors, but every page is written BCH (clean writes and flush-reads carry no intent).
//!
//! Per host request, each page goes through the cache manager ([`super::cache_manager`]); the
//! device operations it implies run one after another from the request's arrival: host read
//! (hit), disk read + clean write (miss), flush-read + disk write of a dirty victim, dirty write.
//! A host read that finds a corrupt CRC page fetches it from the disk and rewrites it clean; a
//! BCH page whose corrected bits reach the refresh threshold is refreshed. Each device operation
//! completes when its flash work does (the emulator's timing model) plus the decode time the
//! codec model charged to it ([`super::ecc_model`]; with `--decode-model lun` the error-free
//! decode is part of the read's service time on its LUN instead); a request completes when its
//! last operation (or disk access) does. The pages of a request are issued together at its
//! arrival (each page's own operations in order). Every flush interval, all dirty pages are
//! queued and flush-read one after another in the background (one outstanding at a time,
//! interleaved with the requests in time order) and written back. In a gap before a request (the
//! device idle), the scrubber runs with the gap's length. With a warm-up, measuring starts on an
//! idle device: arrivals after it are shifted past the warm-up's backlog. GC moves (inside
//! writes and refreshes) are tracked by [`NoisyNand`]: each program waits for its read and
//! decode, and `--copy-back` charges them as copy-backs ([`super::ecc_model::CopyBack`]). The
//! disk queues its reads unless `--disk-queue off` (the paper's trace-driven view).
//!
//! Reported (the `flex_ecc` object of the JSON report): the host read and write response times
//! (misses include the disk), the device's response time per interface and over all device
//! requests (the paper's metric), the cache's hits and misses, reads per format, GC and scrubber
//! work, disk accesses, and the GC time: for each moved page, tR + the bus transfers it was
//! charged (two page transfers without copy-back) + its decode + tPROG, plus collected blocks x
//! tBERS.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::time::Instant;

use ftl_core::intent::{flex_mark_words, FlexConfig, Intent, PageRead};
use ftl_core::policy::{Greedy, PageFormat, Policies, RequestSizeClassifier, SingleHostStream};
use ftl_core::{AnyMap, Ftl};
use ftl_policies::flex_ecc::{ScrubConfig, Scrubber};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;

use super::backing::{DiskAt, ModelDisk};
use super::cache_manager::{Access, CacheManager};
use super::ecc_model::{
    CopyBack, DecodeTiming, EccModel, ErrorRates, GcMoveStats, ModelCodec, NoisyNand, SharedModel,
};
use super::metrics::{Latencies, LatencySummary};
use super::report::{Report, RunStats};
use super::{SimConfig, SimOutput};
use crate::memory::FtlMemory;
use crate::trace::{page_span, Op, Request};

/// Which device the cache runs on.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize)]
pub enum EccMode {
    /// FlexECC: BCH for dirty pages, CRC for clean ones.
    Flex,
    /// Every page BCH (the paper's BCH-SSD).
    AllBch,
}

impl std::str::FromStr for EccMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "flex" => Ok(EccMode::Flex),
            "all-bch" => Ok(EccMode::AllBch),
            _ => Err(format!("unknown --ecc '{s}' (expected flex or all-bch)")),
        }
    }
}

/// Settings of a FlexECC run.
#[derive(Clone, Debug, PartialEq)]
pub struct FlexSimConfig {
    /// FlexECC or all-BCH.
    pub mode: EccMode,
    /// Cache pages (device logical pages used); `None`: half the device's logical pages (the
    /// paper's 30 GB cache on a 60 GB SSD).
    pub cache_pages: Option<u32>,
    /// Periodic flush interval, ns (0: only evictions flush).
    pub flush_interval_ns: u64,
    /// Disk access time, ns (the scrubber's T_disk too).
    pub disk_ns: u64,
    /// Decode cost model (and the BCH t).
    pub timing: DecodeTiming,
    /// Raw bit errors.
    pub rates: ErrorRates,
    /// The scrubber's m (a gap must exceed m x T_crc before it verifies).
    pub scrub_m: u64,
    /// Whether the scrubber runs.
    pub scrub: bool,
    /// Refresh BCH pages with at least this many corrected bits (0: never).
    pub refresh_threshold: u32,
    /// Mean gap between requests that carry no time (synthetic workloads), ns, exponentially
    /// distributed; 0: back to back (closed loop, queue depth 1).
    pub interarrival_ns: u64,
    /// Requests replayed before measuring (cache warm-up).
    pub warmup_requests: u64,
    /// Trace times are multiplied by this (the paper's `ioscale`: slowing down a trace recorded
    /// on a faster system).
    pub time_scale: f64,
    /// Disk pages synthetic workloads address; `None`: 12 cache sizes (the paper's 360 GB working
    /// set over a 30 GB cache).
    pub workload_pages: Option<u64>,
    /// How GC moves pages (copy-back; see [`CopyBack`]).
    pub copy_back: CopyBack,
    /// The disk serves one access at a time (else every access takes `disk_ns`, unqueued).
    pub disk_queue: bool,
    /// A read's decode holds its LUN (part of the read's service time, as in a simulator with
    /// one read latency per format) instead of running in the controller after the transfer.
    pub decode_holds_lun: bool,
}

impl Default for FlexSimConfig {
    fn default() -> Self {
        FlexSimConfig {
            mode: EccMode::Flex,
            cache_pages: None,
            flush_interval_ns: 5_000_000_000,
            disk_ns: 1_500_000,
            timing: DecodeTiming::PAPER,
            rates: ErrorRates::default(),
            scrub_m: 10,
            scrub: true,
            refresh_threshold: 5,
            interarrival_ns: 0,
            warmup_requests: 0,
            time_scale: 1.0,
            workload_pages: None,
            copy_back: CopyBack::Off,
            disk_queue: true,
            decode_holds_lun: false,
        }
    }
}

/// The `flex_ecc` object of the report.
#[derive(Clone, Debug, Default, Serialize)]
pub struct FlexReport {
    /// "flex" or "all-bch".
    pub mode: String,
    /// Cache pages.
    pub cache_pages: u32,
    /// BCH correction capability t per codeword.
    pub bch_t: u32,
    /// CRC check time, ns.
    pub t_crc_ns: u64,
    /// Base raw bit-error rate.
    pub rber: f64,
    /// Host read pages that hit the cache.
    pub read_hits: u64,
    /// Host read pages that missed.
    pub read_misses: u64,
    /// Host read pages that hit a page still on its way from the disk (served from RAM when it
    /// arrives).
    pub read_inflight: u64,
    /// Host write pages that hit.
    pub write_hits: u64,
    /// Host write pages that missed.
    pub write_misses: u64,
    /// Dirty writes issued (pages).
    pub dirty_writes: u64,
    /// Clean writes issued (pages; misses, corrupt CRC pages, prefetches).
    pub clean_writes: u64,
    /// Flush-reads issued (pages; evictions and periodic flushes).
    pub flush_reads: u64,
    /// Host reads that found a BCH page (the paper's BCH READ).
    pub bch_reads: u64,
    /// Host reads that found a CRC page (CRC READ).
    pub crc_reads: u64,
    /// Host reads of a corrupt CRC page, served from the disk on the request's path.
    pub crc_corrupt_served_from_disk: u64,
    /// Host reads of an uncorrectable BCH page whose data was clean (served from the disk).
    pub bch_uncorrectable_clean: u64,
    /// Host reads of an uncorrectable BCH page holding dirty data (data loss).
    pub bch_uncorrectable_dirty: u64,
    /// Pages GC converted from BCH to CRC (BCH2CRC).
    pub gc_bch_to_crc: u64,
    /// CRC pages moved by GC (CRC MOVED).
    pub gc_crc_moved: u64,
    /// BCH pages moved by GC.
    pub gc_bch_moved: u64,
    /// BCH pages refreshed (read path and scrubber).
    pub refreshed: u64,
    /// Pages the scrubber verified.
    pub scrub_verified: u64,
    /// Corrupt CRC pages the scrubber found.
    pub scrub_corrupt_found: u64,
    /// Corrupt CRC pages the scrubber prefetched from the disk.
    pub scrub_prefetched: u64,
    /// Disk reads (misses, corrupt pages, prefetches).
    pub disk_reads: u64,
    /// Disk writes (write-backs).
    pub disk_writes: u64,
    /// Raw bit errors drawn on reads.
    pub raw_bit_errors: u64,
    /// Total decode time, ms.
    pub decode_ms: f64,
    /// GC time (see the module documentation), ms.
    pub gc_time_ms: f64,
    /// Decode time inside GC (and refresh) moves, ms.
    pub gc_decode_ms: f64,
    /// How GC moved pages: off, checked or crc-direct.
    pub copy_back: String,
    /// Where decode time goes: "controller" (after the transfer) or "lun" (held on the LUN).
    pub decode_model: String,
    /// Pages GC (and refreshes) moved.
    pub gc_moves: u64,
    /// Of which copy-backs.
    pub gc_copy_backs: u64,
    /// Of which CRC pages copied back unread (crc-direct).
    pub gc_unread_copy_backs: u64,
    /// Array time (tR, tPROG, tBERS) over the measured part / (its length x LUNs).
    pub lun_utilization: f64,
    /// Busy time of the LUNs (array, bus waits and transfers, held decodes; LUN queues) over the
    /// measured part / (its length x LUNs): how loaded the dies were.
    pub lun_busy: f64,
    /// Response time over all device requests (host reads, dirty and clean writes, flush-reads).
    pub device_latency_us: LatencySummary,
    /// Device response time of host reads (hits).
    pub device_read_latency_us: LatencySummary,
    /// Device response time of dirty writes.
    pub device_dirty_write_latency_us: LatencySummary,
    /// Device response time of clean writes.
    pub device_clean_write_latency_us: LatencySummary,
    /// Device response time of flush-reads.
    pub device_flush_read_latency_us: LatencySummary,
}

type SimFtl<'a> =
    Ftl<'a, NoisyNand<'a>, Policies<ModelCodec, RequestSizeClassifier, Greedy, SingleHostStream>, AnyMap<'a>>;

/// Device-operation latencies by interface.
#[derive(Default)]
struct DevLat {
    all: Latencies,
    read: Latencies,
    dirty: Latencies,
    clean: Latencies,
    flush: Latencies,
}

/// The run's moving parts.
struct Run<'a> {
    ftl: SimFtl<'a>,
    model: SharedModel,
    cache: CacheManager,
    disk: ModelDisk,
    mode: EccMode,
    buf: Vec<u8>,
    lat: DevLat,
    r: FlexReport,
    /// Writes of data fetched from the disk, due when the fetch completes: (time, slot, dirty);
    /// an entry counts only while `pending_slots` maps its slot to its time.
    pending: BinaryHeap<Reverse<(u64, u32, bool)>>,
    pending_slots: HashMap<u32, u64>,
}

impl Run<'_> {
    /// Queues the cache write of data fetched from the disk at `t` (issued in time order with the
    /// other device operations, so that it does not hold up requests that arrive before `t`).
    fn defer_write(&mut self, t: u64, slot: u32, dirty: bool) {
        self.pending.push(Reverse((t, slot, dirty)));
        self.pending_slots.insert(slot, t);
    }

    /// When the data of `slot` arrives from the disk, if its cache write is still pending.
    fn pending_at(&self, slot: u32) -> Option<u64> {
        self.pending_slots.get(&slot).copied()
    }

    /// Drops the pending cache write of `slot` (overwritten or evicted before it was issued).
    fn cancel(&mut self, slot: u32) {
        self.pending_slots.remove(&slot);
    }

    /// Issues the deferred writes due by `t` (all of them with `u64::MAX`).
    fn issue_due(&mut self, t: u64) -> Result<(), String> {
        while let Some(&Reverse((at, slot, dirty))) = self.pending.peek() {
            if at > t {
                break;
            }
            self.pending.pop();
            if self.pending_slots.get(&slot) == Some(&at) {
                self.pending_slots.remove(&slot);
                self.write(at, slot, if dirty { Intent::Dirty } else { Intent::Clean })?;
            }
        }
        Ok(())
    }

    /// Runs `f` on the FTL from time `t`; returns its value, when it completes (flash work, then
    /// the decode time it caused) and that decode time.
    fn op<T>(
        &mut self,
        t: u64,
        f: impl FnOnce(&mut SimFtl<'_>, &mut [u8]) -> Result<T, String>,
    ) -> Result<(T, u64, u64), String> {
        let emu = &mut *self.ftl.nand_mut().emu;
        emu.set_now_ns(t);
        emu.open_window();
        let _ = self.model.borrow_mut().take_pending_ns();
        let _ = self.ftl.nand_mut().take_chained_decode_ns();
        let v = f(&mut self.ftl, &mut self.buf)?;
        let done = self.ftl.nand().emu.window_completion_ns();
        // Decode of moved pages is on the timeline already (their programs wait for it).
        let chained = self.ftl.nand_mut().take_chained_decode_ns();
        let decode = self.model.borrow_mut().take_pending_ns().saturating_sub(chained);
        Ok((v, done.max(t) + decode, decode))
    }

    /// [`Self::op`] with GC moves tracked (an FTL call that may garbage collect or refresh).
    fn moving_op<T>(
        &mut self,
        t: u64,
        f: impl FnOnce(&mut SimFtl<'_>, &mut [u8]) -> Result<T, String>,
    ) -> Result<(T, u64, u64), String> {
        self.ftl.nand_mut().track_moves = true;
        let r = self.op(t, f);
        self.ftl.nand_mut().track_moves = false;
        r
    }

    fn intent(&self, i: Intent) -> Intent {
        if self.mode == EccMode::Flex {
            i
        } else {
            Intent::Dirty
        }
    }

    /// A write of `slot` from `t` (the interface `intent`); returns its completion.
    fn write(&mut self, t: u64, slot: u32, intent: Intent) -> Result<u64, String> {
        let on_device = self.intent(intent);
        let ((), done, _) = self.moving_op(t, |ftl, buf| {
            ftl.write_with(slot, buf, on_device).map_err(|e| format!("write of cache slot {slot}: {e}"))
        })?;
        let lat = done - t;
        self.lat.all.push(lat);
        match intent {
            Intent::Dirty => {
                self.r.dirty_writes += 1;
                self.lat.dirty.push(lat);
            }
            Intent::Clean => {
                self.r.clean_writes += 1;
                self.lat.clean.push(lat);
            }
        }
        Ok(done)
    }

    /// A flush-read of `slot` and the write-back of its data, from `t`; returns when the read
    /// completes (the disk write proceeds in the background). `periodic`: the page stays cached
    /// and becomes clean (else it is an evicted victim whose slot is being reused).
    fn flush(&mut self, t: u64, slot: u32, periodic: bool) -> Result<u64, String> {
        let flex = self.mode == EccMode::Flex;
        let (r, done, _) = self.op(t, |ftl, buf| {
            let r = if flex { ftl.flush_read(slot, buf) } else { ftl.read_with(slot, buf) };
            r.map_err(|e| format!("flush-read of cache slot {slot}: {e}"))
        })?;
        if let PageRead::Corrupt { format } = r {
            // Dirty data the device cannot return: lost.
            if format != Some(PageFormat::Detecting) {
                self.r.bch_uncorrectable_dirty += 1;
            }
        }
        self.r.flush_reads += 1;
        self.lat.all.push(done - t);
        self.lat.flush.push(done - t);
        self.disk.write_at(done);
        if periodic {
            self.cache.mark_clean(slot);
        }
        Ok(done)
    }

    /// A host read of a cached `slot` from `t`; returns its completion.
    fn host_read(&mut self, t: u64, slot: u32) -> Result<u64, String> {
        let (r, done, _) = self.op(t, |ftl, buf| {
            ftl.read_with(slot, buf).map_err(|e| format!("read of cache slot {slot}: {e}"))
        })?;
        self.lat.all.push(done - t);
        self.lat.read.push(done - t);
        match r {
            PageRead::Good { format, corrected } => {
                match format {
                    Some(PageFormat::Detecting) => self.r.crc_reads += 1,
                    _ => self.r.bch_reads += 1,
                }
                if format == Some(PageFormat::Correcting) && self.ftl.needs_refresh(corrected) {
                    let ((), d2, _) = self.moving_op(done, |ftl, _| {
                        ftl.refresh(slot)
                            .map(|_| ())
                            .map_err(|e| format!("refresh of cache slot {slot}: {e}"))
                    })?;
                    return Ok(d2.max(done));
                }
                Ok(done)
            }
            PageRead::Unmapped => Ok(done),
            PageRead::Corrupt { format } => {
                match format {
                    Some(PageFormat::Detecting) => {
                        self.r.crc_reads += 1;
                        self.r.crc_corrupt_served_from_disk += 1;
                    }
                    _ => {
                        self.r.bch_reads += 1;
                        if self.cache.is_dirty(slot) {
                            // Dirty data lost; the simulation carries on with the disk's old copy.
                            self.r.bch_uncorrectable_dirty += 1;
                        } else {
                            self.r.bch_uncorrectable_clean += 1;
                        }
                    }
                }
                let fetched = self.disk.read_at(done);
                let dirty = self.cache.is_dirty(slot);
                self.defer_write(fetched, slot, dirty);
                Ok(fetched)
            }
        }
    }
}

impl FlexSimConfig {
    /// Cache pages on a device of `logical_pages`.
    pub fn cache_pages_for(&self, logical_pages: u32) -> u32 {
        self.cache_pages.unwrap_or((logical_pages / 2).max(1))
    }

    /// Disk pages a synthetic workload addresses on a device of `logical_pages`.
    pub fn workload_pages_for(&self, logical_pages: u32) -> u64 {
        self.workload_pages.unwrap_or(12 * self.cache_pages_for(logical_pages) as u64)
    }
}

/// Runs `requests` through the cache manager and the device (see the module documentation).
pub fn simulate_flex(
    cfg: &SimConfig,
    requests: impl Iterator<Item = Request>,
    progress: &mut dyn FnMut(u64),
) -> Result<SimOutput, String> {
    let fx = &cfg.flex;
    let geo = cfg.device.geometry;
    let page_bytes = geo.data_bytes as u64;
    let mut emu = super::emulator(cfg, false)?;
    let fcfg = super::ftl_config(cfg);
    let n = fcfg.logical_pages;
    let cache_pages = fx.cache_pages_for(n);
    if cache_pages == 0 || cache_pages > n {
        return Err(format!(
            "--cache-pages {cache_pages} must be between 1 and the device's {n} logical pages"
        ));
    }
    let model = EccModel::new(&geo, fx.rates, fx.timing, cfg.seed);
    let mut mem = FtlMemory::new(&geo, &fcfg);
    let mut marks = vec![0u32; flex_mark_words(n)];
    let (map, m) = mem.parts();
    let policies = Policies {
        codec: ModelCodec::new(model.clone()),
        classifier: RequestSizeClassifier::default(),
        victim: Greedy,
        placement: SingleHostStream,
    };
    let mut nand = NoisyNand::new(&mut emu, model.clone());
    nand.copy_back = fx.copy_back;
    nand.decode_holds_lun = fx.decode_holds_lun;
    let ext =
        ftl_core::Extensions::none().flex(&mut marks, FlexConfig { refresh_threshold: fx.refresh_threshold });
    let ftl = super::open_ftl(cfg, nand, policies, map, m, fcfg, ext)?;
    let t_verify = cfg.device.timing.t_r_ns + cfg.device.timing.xfer_ns(page_bytes) + fx.timing.t_crc_ns;
    let mut scrubber = Scrubber::<4096>::new(ScrubConfig {
        m: fx.scrub_m,
        t_crc_ns: fx.timing.t_crc_ns,
        t_disk_ns: fx.disk_ns,
        t_verify_ns: t_verify,
        t_write_ns: cfg.device.timing.xfer_ns(page_bytes) + cfg.device.timing.t_prog_ns,
        max_verify: 256,
        scan_correcting: false,
    });
    let mut run = Run {
        ftl,
        model: model.clone(),
        cache: CacheManager::new(cache_pages),
        disk: if fx.disk_queue { ModelDisk::new(fx.disk_ns) } else { ModelDisk::unqueued(fx.disk_ns) },
        mode: fx.mode,
        buf: vec![0u8; page_bytes as usize],
        lat: DevLat::default(),
        r: FlexReport::default(),
        pending: BinaryHeap::new(),
        pending_slots: HashMap::new(),
    };
    let mut rng = ChaCha8Rng::seed_from_u64(cfg.seed ^ 0xA11_7157);
    let mut read_latency = Latencies::default();
    let mut write_latency = Latencies::default();
    let mut first_time: Option<u64> = None;
    // Time starts when the format's erases are done.
    let origin = run.ftl.nand().emu.idle_at_ns();
    let mut last_arrival = origin;
    let mut last_done = origin;
    let mut next_flush = origin + fx.flush_interval_ns;
    let mut flush_queue = std::collections::VecDeque::<u32>::new();
    let mut flush_at = origin;
    let mut requests_done = 0u64;
    let mut measured = 0u64;
    let mut t0 = 0u64;
    // Added to timed arrivals after the warm-up (see below).
    let mut shift = 0u64;
    let mut base = Baseline::default();
    let mut erase_base: Vec<u32> = Vec::new();
    let mut scrub_base = *scrubber.stats();
    let mut wall = Instant::now();
    for req in requests {
        if requests_done == fx.warmup_requests {
            // Start measuring.
            run.lat = DevLat::default();
            run.r = FlexReport::default();
            read_latency = Latencies::default();
            write_latency = Latencies::default();
            run.ftl.reset_counters();
            run.ftl.reset_flex_counters();
            base = Baseline::take(&run);
            erase_base = run.ftl.nand().emu.erase_counts().to_vec();
            scrub_base = *scrubber.stats();
            wall = Instant::now();
        }
        let Some(span) = page_span(req.offset, req.len, page_bytes) else {
            continue;
        };
        let mut arrival = match (cfg.open_loop, req.time_ns) {
            (true, Some(t)) => {
                let b = *first_time.get_or_insert(t);
                (origin + shift + (t.saturating_sub(b) as f64 * fx.time_scale) as u64).max(last_arrival)
            }
            _ if fx.interarrival_ns > 0 => {
                let u: f64 = rng.random::<f64>().max(1e-12);
                last_arrival + (-(u.ln()) * fx.interarrival_ns as f64) as u64
            }
            _ => last_done.max(last_arrival),
        };
        if requests_done == fx.warmup_requests {
            // The measured part starts on an idle device: the warm-up fills the cache with
            // misses (programs) and would leave their backlog to the first measured requests.
            let idle = run.ftl.nand().emu.idle_at_ns().max(last_done);
            if fx.warmup_requests > 0 && arrival < idle {
                shift += idle - arrival;
                arrival = idle;
            }
            t0 = arrival;
        }
        run.issue_due(arrival)?;
        // Periodic flushes, in the background: at each boundary the dirty pages are queued, then
        // flush-read one after another (one write-back outstanding, as a cache manager's cleaner
        // runs), in time order with the requests.
        loop {
            let boundary = (fx.flush_interval_ns > 0).then_some(next_flush);
            match (flush_queue.front().copied(), boundary) {
                (Some(slot), b) if flush_at <= arrival && b.is_none_or(|b| flush_at <= b) => {
                    flush_queue.pop_front();
                    run.issue_due(flush_at)?;
                    if run.cache.is_dirty(slot) && run.pending_at(slot).is_none() {
                        flush_at = run.flush(flush_at, slot, true)?;
                        last_done = last_done.max(flush_at);
                    }
                }
                (_, Some(b)) if b <= arrival => {
                    flush_queue = run.cache.dirty_slots().into();
                    flush_at = flush_at.max(b);
                    next_flush += fx.flush_interval_ns;
                }
                _ => break,
            }
        }
        // Idle time before the request: the scrubber's.
        let idle_from = run.ftl.nand().emu.idle_at_ns().max(last_done);
        if fx.scrub && fx.mode == EccMode::Flex && arrival > idle_from {
            let gap = arrival - idle_from;
            run.ftl.nand_mut().emu.set_now_ns(idle_from);
            let mut store = DiskAt { disk: &mut run.disk, at: idle_from, done: idle_from, fetches: 0 };
            scrubber
                .idle(&mut run.ftl, gap, &mut store, &mut run.buf)
                .map_err(|e| format!("scrubber: {e}"))?;
            let _ = run.model.borrow_mut().take_pending_ns();
        }
        // The request's pages, all issued at its arrival (a controller splits a request into page
        // transactions); each page's own operations (flush of a dirty victim, then the write)
        // follow one another. The request completes with its last page.
        let mut req_done = arrival;
        for p in span.first_page..span.first_page + span.pages {
            let mut t = arrival;
            let done;
            let write = req.op == Op::Write;
            let access = run.cache.access(p, write);
            match access {
                Access::Hit { slot } => match (run.pending_at(slot), write) {
                    // The data is still on its way from the disk: a read waits for it, a write
                    // replaces it.
                    (Some(at), false) => {
                        run.r.read_inflight += 1;
                        done = at.max(t);
                    }
                    (Some(_), true) => {
                        run.cancel(slot);
                        done = run.write(t, slot, Intent::Dirty)?;
                    }
                    (None, true) => done = run.write(t, slot, Intent::Dirty)?,
                    (None, false) => done = run.host_read(t, slot)?,
                },
                Access::Miss { slot, evicted } => {
                    if run.pending_at(slot).is_some() {
                        // Evicted before its data was written to the cache.
                        run.cancel(slot);
                    } else if evicted.is_some_and(|e| e.dirty) {
                        t = run.flush(t, slot, false)?;
                    }
                    done = if write {
                        run.write(t, slot, Intent::Dirty)?
                    } else {
                        let fetched = run.disk.read_at(t);
                        run.defer_write(fetched, slot, false);
                        fetched
                    };
                }
            }
            req_done = req_done.max(done);
        }
        let done = req_done;
        let latency = done - arrival;
        match req.op {
            Op::Read => read_latency.push(latency),
            Op::Write => write_latency.push(latency),
        }
        last_arrival = arrival;
        last_done = last_done.max(done);
        requests_done += 1;
        if requests_done > fx.warmup_requests {
            measured += 1;
        }
        if requests_done.is_multiple_of(4096) {
            progress(requests_done);
        }
    }
    run.issue_due(u64::MAX)?;
    if requests_done <= fx.warmup_requests {
        return Err(format!(
            "the input has {requests_done} requests, no more than the {} of --warmup",
            fx.warmup_requests
        ));
    }
    let wall_s = wall.elapsed().as_secs_f64();
    let end = run.ftl.nand().emu.idle_at_ns().max(last_done);
    let c = *run.ftl.counters();
    let fc = *run.ftl.flex_counters();
    let st = run.cache.stats();
    let mc = run.model.borrow().counters();
    let sc = scrubber.stats();
    let tp = cfg.device.timing;
    let mut r = std::mem::take(&mut run.r);
    r.mode = match fx.mode {
        EccMode::Flex => "flex".into(),
        EccMode::AllBch => "all-bch".into(),
    };
    r.cache_pages = cache_pages;
    r.bch_t = fx.timing.t;
    r.t_crc_ns = fx.timing.t_crc_ns;
    r.rber = fx.rates.rber;
    r.read_hits = st.read_hits - base.cache.read_hits;
    r.read_misses = st.read_misses - base.cache.read_misses;
    r.write_hits = st.write_hits - base.cache.write_hits;
    r.write_misses = st.write_misses - base.cache.write_misses;
    r.gc_bch_to_crc = fc.converted;
    r.gc_crc_moved = fc.detecting_moved;
    r.gc_bch_moved = fc.correcting_moved;
    r.refreshed = fc.refreshed;
    r.scrub_verified = sc.verified - scrub_base.verified;
    r.scrub_corrupt_found = sc.corrupt_found - scrub_base.corrupt_found;
    r.scrub_prefetched = sc.prefetched - scrub_base.prefetched;
    r.disk_reads = run.disk.reads - base.disk_reads;
    r.disk_writes = run.disk.writes - base.disk_writes;
    r.raw_bit_errors = mc.raw_bit_errors - base.model.raw_bit_errors;
    r.decode_ms = (mc.decode_ns - base.model.decode_ns) as f64 / 1e6;
    let mv = run.ftl.nand().move_stats();
    let (moves, move_ns, gc_decode) =
        (mv.moves - base.moves.moves, mv.move_ns - base.moves.move_ns, mv.decode_ns - base.moves.decode_ns);
    r.gc_decode_ms = gc_decode as f64 / 1e6;
    r.copy_back = fx.copy_back.name().into();
    r.decode_model = if fx.decode_holds_lun { "lun" } else { "controller" }.into();
    r.gc_moves = moves;
    r.gc_copy_backs = mv.copy_backs - base.moves.copy_backs;
    r.gc_unread_copy_backs = mv.unread - base.moves.unread;
    r.gc_time_ms = (move_ns + c.gc_blocks * tp.t_bers_ns) as f64 / 1e6;
    let busy = run.ftl.nand().emu.total_array_busy_ns() - base.array_busy_ns;
    // Array time is summed over planes; a LUN runs one command at a time with LUN queues.
    let planes = if tp.scheduling == crate::emulator::Scheduling::LunQueues { 1 } else { geo.planes_per_lun };
    let span = end.saturating_sub(t0).max(1) as f64 * (geo.luns * planes) as f64;
    r.lun_utilization = busy as f64 / span;
    r.lun_busy = (run.ftl.nand().emu.total_op_busy_ns() - base.op_busy_ns) as f64 / (span / planes as f64);
    r.device_latency_us = run.lat.all.summary();
    r.device_read_latency_us = run.lat.read.summary();
    r.device_dirty_write_latency_us = run.lat.dirty.summary();
    r.device_clean_write_latency_us = run.lat.clean.summary();
    r.device_flush_read_latency_us = run.lat.flush.summary();
    let erase_counts = super::report::erases_since(
        run.ftl.leveled_erase_counts(),
        run.ftl.nand().emu.erase_counts(),
        &erase_base,
    );
    let report = Report::from_run(RunStats {
        cfg,
        logical_pages: n,
        requests: measured,
        host_read_pages: r.read_hits + r.read_misses,
        host_write_pages: r.write_hits + r.write_misses,
        rmw_pages: 0,
        counters: c,
        erase_counts: &erase_counts,
        read_latency: &mut read_latency,
        write_latency: &mut write_latency,
        simulated_ns: end.saturating_sub(t0),
        wall_seconds: wall_s,
        ftl_ram_bytes: run.ftl.ram_bytes(),
        features: [("flex_ecc".to_string(), serde_json::to_value(&r).map_err(|e| e.to_string())?)]
            .into_iter()
            .collect(),
    });
    Ok(SimOutput {
        report,
        erase_counts,
        waf_series: Vec::new(),
        classifier_series: Vec::new(),
        read_latency,
        write_latency,
    })
}

/// Counters at the start of the measured part.
#[derive(Default)]
struct Baseline {
    cache: super::cache_manager::CacheStats,
    disk_reads: u64,
    disk_writes: u64,
    model: super::ecc_model::EccModelCounters,
    moves: GcMoveStats,
    array_busy_ns: u64,
    op_busy_ns: u64,
}

impl Baseline {
    fn take(run: &Run<'_>) -> Self {
        Baseline {
            cache: run.cache.stats(),
            disk_reads: run.disk.reads,
            disk_writes: run.disk.writes,
            model: run.model.borrow().counters(),
            moves: run.ftl.nand().move_stats(),
            array_busy_ns: run.ftl.nand().emu.total_array_busy_ns(),
            op_busy_ns: run.ftl.nand().emu.total_op_busy_ns(),
        }
    }
}
