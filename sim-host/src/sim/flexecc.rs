//! FlexECC's front end of the simulator's run loop (`--features flex-ecc`, [`FlexFront`]): a
//! write-back LRU cache manager over the simulated SSD, a model disk behind it, modelled bit
//! errors and decode costs, and the idle-time scrubber. The same run with `--ecc all-bch` is the paper's BCH-SSD: the same cache manager and
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
//! Stacked techniques (issue #17): the SSD's FTL takes whatever the run stacks (dedup, the NV
//! cache, any classifier; wom is refused by the FTL). The cache manager's reads go through the
//! FTL's stacking order (a page the NV cache holds is served from it, `nv_cache_reads`). With
//! dedup, page contents are tracked: a dirty write carries the request's content (or a fresh
//! one), a clean fill and a scrubber's prefetch the disk page's last written content, and each
//! write's hashing time is added to its completion. Out-of-line dedup passes run only at the end
//! of the run here (the front end has no idle-time hook for them).
//!
//! Reported (the `flex_ecc` object of the JSON report): the host read and write response times
//! (misses include the disk), the device's response time per interface and over all device
//! requests (the paper's metric), the cache's hits and misses, reads per format, GC and scrubber
//! work, disk accesses, and the GC time: for each moved page, tR + the bus transfers it was
//! charged (two page transfers without copy-back) + its decode + tPROG, plus collected blocks x
//! tBERS.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};

use ftl_core::intent::{Intent, PageRead};
use ftl_core::policy::{PageFormat, PolicySet};
use ftl_core::{Ftl, MappingTable};
use ftl_policies::flex_ecc::{ScrubConfig, ScrubStats, Scrubber};
use serde::Serialize;

use super::backing::{DiskAt, ModelDisk};
use super::cache_manager::{Access, CacheManager};
use super::dedup::DedupSim;
use super::ecc_model::{CopyBack, DecodeTiming, ErrorRates, GcMoveStats, SharedModel};
use super::metrics::{Latencies, LatencySummary};
use super::nand::SimNand;
use super::SimConfig;
use crate::trace::{Op, PageSpan, Request};

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
    /// Host reads the NV cache served (CDM stacked; no flash page read).
    pub nv_cache_reads: u64,
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

/// Device-operation latencies by interface.
#[derive(Default)]
struct DevLat {
    all: Latencies,
    read: Latencies,
    dirty: Latencies,
    clean: Latencies,
    flush: Latencies,
}

/// FlexECC's front end of a run (see the module documentation): the cache manager, the model
/// disk, the scrubber and the periodic flushes, turning each host request into device
/// operations on the run's FTL. The run loop ([`super::pipeline`]) owns the FTL and the other
/// techniques' state and hands them in.
pub(super) struct FlexFront {
    fx: FlexSimConfig,
    model: SharedModel,
    cache: CacheManager,
    cache_pages: u32,
    disk: ModelDisk,
    scrubber: Scrubber<4096>,
    buf: Vec<u8>,
    lat: DevLat,
    r: FlexReport,
    /// Writes of data fetched from the disk, due when the fetch completes: (time, slot, dirty,
    /// disk page); an entry counts only while `pending_slots` maps its slot to its time.
    pending: BinaryHeap<Reverse<(u64, u32, bool, u64)>>,
    pending_slots: HashMap<u32, u64>,
    next_flush: u64,
    flush_queue: VecDeque<u32>,
    flush_at: u64,
    /// The latest completion of a request or a background flush-read.
    last_done: u64,
    base: Baseline,
    scrub_base: ScrubStats,
    /// With deduplication (page contents matter): each disk page's current content and each
    /// slot's, and the next unique content for requests that carry none.
    contents: Option<Contents>,
}

/// Page contents of a FlexECC run with deduplication.
#[derive(Default)]
struct Contents {
    disk: HashMap<u64, u64>,
    slot: HashMap<u32, u64>,
    next_unique: u64,
}

impl Contents {
    /// The content of disk page `page`: the last written, else one unique to the page.
    fn of(&self, page: u64) -> u64 {
        self.disk.get(&page).copied().unwrap_or(page | 1 << 62)
    }
}

/// The FTL a FlexECC front end drives (any NAND the simulator runs on, any policies and map).
type RunFtl<'f, 'm, N, P, M> = &'f mut Ftl<'m, N, P, M>;

impl FlexFront {
    /// The front end of `cfg`'s run on a device of `logical_pages` whose pages' bit errors and
    /// decodes `model` draws; `dedup`: page contents are tracked (deduplication stacked).
    pub(super) fn new(
        cfg: &SimConfig,
        logical_pages: u32,
        model: SharedModel,
        dedup: bool,
    ) -> Result<Self, String> {
        let fx = cfg.flex.clone();
        let n = logical_pages;
        let cache_pages = fx.cache_pages_for(n);
        if cache_pages == 0 || cache_pages > n {
            return Err(format!(
                "--cache-pages {cache_pages} must be between 1 and the device's {n} logical pages"
            ));
        }
        let page_bytes = cfg.device.geometry.data_bytes as u64;
        let tp = cfg.device.timing;
        let scrubber = Scrubber::<4096>::new(ScrubConfig {
            m: fx.scrub_m,
            t_crc_ns: fx.timing.t_crc_ns,
            t_disk_ns: fx.disk_ns,
            t_verify_ns: tp.t_r_ns + tp.xfer_ns(page_bytes) + fx.timing.t_crc_ns,
            t_write_ns: tp.xfer_ns(page_bytes) + tp.t_prog_ns,
            max_verify: 256,
            scan_correcting: false,
        });
        Ok(FlexFront {
            model,
            cache: CacheManager::new(cache_pages),
            cache_pages,
            disk: if fx.disk_queue { ModelDisk::new(fx.disk_ns) } else { ModelDisk::unqueued(fx.disk_ns) },
            scrub_base: *scrubber.stats(),
            scrubber,
            buf: vec![0u8; page_bytes as usize],
            lat: DevLat::default(),
            r: FlexReport::default(),
            pending: BinaryHeap::new(),
            pending_slots: HashMap::new(),
            next_flush: 0,
            flush_queue: VecDeque::new(),
            flush_at: 0,
            last_done: 0,
            base: Baseline::default(),
            contents: dedup.then(|| Contents { next_unique: 1 << 61, ..Contents::default() }),
            fx,
        })
    }

    /// Time starts at `origin` (the device idle after formatting and preconditioning).
    pub(super) fn start(&mut self, origin: u64) {
        self.next_flush = origin + self.fx.flush_interval_ns;
        self.flush_at = origin;
        self.last_done = origin;
    }

    /// The latest completion of a request or background flush: a closed-loop host's next
    /// request waits for it.
    pub(super) fn busy_until(&self) -> u64 {
        self.last_done
    }

    /// Starts the measured part: the front end's counters from here.
    pub(super) fn start_measuring<N: SimNand, P: PolicySet, M: MappingTable>(
        &mut self,
        ftl: &Ftl<'_, N, P, M>,
    ) {
        self.lat = DevLat::default();
        self.r = FlexReport::default();
        self.base = Baseline::take(self, ftl);
        self.scrub_base = *self.scrubber.stats();
    }

    /// Queues the cache write of data fetched from the disk at `t` (issued in time order with the
    /// other device operations, so that it does not hold up requests that arrive before `t`).
    fn defer_write(&mut self, t: u64, slot: u32, dirty: bool, page: u64) {
        self.pending.push(Reverse((t, slot, dirty, page)));
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
    pub(super) fn issue_due<N: SimNand, P: PolicySet, M: MappingTable>(
        &mut self,
        ftl: RunFtl<'_, '_, N, P, M>,
        dsim: &mut Option<DedupSim>,
        t: u64,
    ) -> Result<(), String> {
        while let Some(&Reverse((at, slot, dirty, page))) = self.pending.peek() {
            if at > t {
                break;
            }
            self.pending.pop();
            if self.pending_slots.get(&slot) == Some(&at) {
                self.pending_slots.remove(&slot);
                let content = self.contents.as_ref().map(|c| c.of(page));
                let intent = if dirty { Intent::Dirty } else { Intent::Clean };
                self.write(ftl, dsim, at, slot, intent, content)?;
            }
        }
        Ok(())
    }

    /// Runs `f` on the FTL from time `t`; returns its value, when it completes (flash work, then
    /// the decode time it caused) and that decode time.
    fn op<T, N: SimNand, P: PolicySet, M: MappingTable>(
        &mut self,
        ftl: RunFtl<'_, '_, N, P, M>,
        t: u64,
        f: impl FnOnce(RunFtl<'_, '_, N, P, M>, &mut [u8]) -> Result<T, String>,
    ) -> Result<(T, u64, u64), String> {
        let emu = ftl.nand_mut().emu_mut();
        emu.set_now_ns(t);
        emu.open_window();
        let _ = self.model.borrow_mut().take_pending_ns();
        let _ = ftl.nand_mut().take_chained_decode_ns();
        let v = f(&mut *ftl, &mut self.buf)?;
        let done = ftl.nand().emu().window_completion_ns();
        // Decode of moved pages is on the timeline already (their programs wait for it).
        let chained = ftl.nand_mut().take_chained_decode_ns();
        let decode = self.model.borrow_mut().take_pending_ns().saturating_sub(chained);
        Ok((v, done.max(t) + decode, decode))
    }

    /// [`Self::op`] with GC moves tracked (an FTL call that may garbage collect or refresh).
    fn moving_op<T, N: SimNand, P: PolicySet, M: MappingTable>(
        &mut self,
        ftl: RunFtl<'_, '_, N, P, M>,
        t: u64,
        f: impl FnOnce(RunFtl<'_, '_, N, P, M>, &mut [u8]) -> Result<T, String>,
    ) -> Result<(T, u64, u64), String> {
        ftl.nand_mut().set_track_moves(true);
        let r = self.op(&mut *ftl, t, f);
        ftl.nand_mut().set_track_moves(false);
        r
    }

    fn intent(&self, i: Intent) -> Intent {
        if self.fx.mode == EccMode::Flex {
            i
        } else {
            Intent::Dirty
        }
    }

    /// A write of `slot` from `t` (the interface `intent`), with `content` when page contents
    /// are tracked (deduplication: the write's hashing is charged after it); returns its
    /// completion.
    fn write<N: SimNand, P: PolicySet, M: MappingTable>(
        &mut self,
        ftl: RunFtl<'_, '_, N, P, M>,
        dsim: &mut Option<DedupSim>,
        t: u64,
        slot: u32,
        intent: Intent,
        content: Option<u64>,
    ) -> Result<u64, String> {
        let on_device = self.intent(intent);
        if let (Some(d), Some(c)) = (dsim.as_mut(), content) {
            d.before_write(&mut *ftl, t, 1, None);
            d.fill_and_count(slot, Some(c), &mut self.buf);
            if let Some(cs) = self.contents.as_mut() {
                cs.slot.insert(slot, c);
            }
        }
        let ((), mut done, _) = self.moving_op(&mut *ftl, t, |ftl, buf| {
            ftl.write_with(slot, buf, on_device).map_err(|e| format!("write of cache slot {slot}: {e}"))
        })?;
        if let Some(d) = dsim.as_mut() {
            done += d.after_write(&*ftl, done, 1);
            d.note_done(done);
        }
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
    fn flush<N: SimNand, P: PolicySet, M: MappingTable>(
        &mut self,
        ftl: RunFtl<'_, '_, N, P, M>,
        t: u64,
        slot: u32,
        periodic: bool,
    ) -> Result<u64, String> {
        let flex = self.fx.mode == EccMode::Flex;
        let (r, done, _) = self.op(ftl, t, |ftl, buf| {
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

    /// A host read of a cached `slot` (disk page `page`) from `t`; returns its completion.
    fn host_read<N: SimNand, P: PolicySet, M: MappingTable>(
        &mut self,
        ftl: RunFtl<'_, '_, N, P, M>,
        t: u64,
        slot: u32,
        page: u64,
    ) -> Result<u64, String> {
        let (r, done, _) = self.op(&mut *ftl, t, |ftl, buf| {
            ftl.read_with(slot, buf).map_err(|e| format!("read of cache slot {slot}: {e}"))
        })?;
        self.lat.all.push(done - t);
        self.lat.read.push(done - t);
        match r {
            PageRead::Good { format, corrected } => {
                match format {
                    Some(PageFormat::Detecting) => self.r.crc_reads += 1,
                    Some(PageFormat::Correcting) => self.r.bch_reads += 1,
                    // Served by the NV cache (CDM stacked): no flash page read.
                    None => self.r.nv_cache_reads += 1,
                }
                if format == Some(PageFormat::Correcting) && ftl.needs_refresh(corrected) {
                    let ((), d2, _) = self.moving_op(ftl, done, |ftl, _| {
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
                self.defer_write(fetched, slot, dirty, page);
                Ok(fetched)
            }
        }
    }

    /// Background work due before a request arriving at `arrival`: the deferred cache writes,
    /// the periodic flushes (at each boundary the dirty pages are queued, then flush-read one
    /// after another, one write-back outstanding, as a cache manager's cleaner runs, in time
    /// order with the requests), and the scrubber in the idle gap before the request.
    pub(super) fn before_request<N: SimNand, P: PolicySet, M: MappingTable>(
        &mut self,
        ftl: RunFtl<'_, '_, N, P, M>,
        dsim: &mut Option<DedupSim>,
        arrival: u64,
    ) -> Result<(), String> {
        self.issue_due(&mut *ftl, dsim, arrival)?;
        let interval = self.fx.flush_interval_ns;
        loop {
            let boundary = (interval > 0).then_some(self.next_flush);
            match (self.flush_queue.front().copied(), boundary) {
                (Some(slot), b) if self.flush_at <= arrival && b.is_none_or(|b| self.flush_at <= b) => {
                    self.flush_queue.pop_front();
                    self.issue_due(&mut *ftl, dsim, self.flush_at)?;
                    if self.cache.is_dirty(slot) && self.pending_at(slot).is_none() {
                        self.flush_at = self.flush(&mut *ftl, self.flush_at, slot, true)?;
                        self.last_done = self.last_done.max(self.flush_at);
                    }
                }
                (_, Some(b)) if b <= arrival => {
                    self.flush_queue = self.cache.dirty_slots().into();
                    self.flush_at = self.flush_at.max(b);
                    self.next_flush += interval;
                }
                _ => break,
            }
        }
        let idle_from = ftl.nand().emu().idle_at_ns().max(self.last_done);
        if self.fx.scrub && self.fx.mode == EccMode::Flex && arrival > idle_from {
            let gap = arrival - idle_from;
            ftl.nand_mut().emu_mut().set_now_ns(idle_from);
            let slot_contents = self.contents.as_ref().map(|c| &c.slot);
            let mut store = DiskAt {
                disk: &mut self.disk,
                at: idle_from,
                done: idle_from,
                fetches: 0,
                contents: slot_contents,
            };
            self.scrubber.idle(ftl, gap, &mut store, &mut self.buf).map_err(|e| format!("scrubber: {e}"))?;
            let _ = self.model.borrow_mut().take_pending_ns();
        }
        Ok(())
    }

    /// A host request's pages through the cache manager, all issued at its `arrival` (a
    /// controller splits a request into page transactions); each page's own operations (flush
    /// of a dirty victim, then the write) follow one another. Returns the completion of its last
    /// page.
    pub(super) fn serve<N: SimNand, P: PolicySet, M: MappingTable>(
        &mut self,
        ftl: RunFtl<'_, '_, N, P, M>,
        dsim: &mut Option<DedupSim>,
        req: &Request,
        span: PageSpan,
        arrival: u64,
    ) -> Result<u64, String> {
        let mut req_done = arrival;
        let write = req.op == Op::Write;
        for (j, p) in (span.first_page..span.first_page + span.pages).enumerate() {
            let mut t = arrival;
            // The page's new content (tracked with deduplication).
            let content = match self.contents.as_mut() {
                Some(cs) if write => {
                    let c =
                        req.content.as_ref().and_then(|c| c.get(j.min(c.len().saturating_sub(1)))).copied();
                    let c = c.unwrap_or_else(|| {
                        cs.next_unique += 1;
                        cs.next_unique
                    });
                    cs.disk.insert(p, c);
                    Some(c)
                }
                Some(cs) => Some(cs.of(p)),
                None => None,
            };
            let done;
            match self.cache.access(p, write) {
                Access::Hit { slot } => match (self.pending_at(slot), write) {
                    // The data is still on its way from the disk: a read waits for it, a write
                    // replaces it.
                    (Some(at), false) => {
                        self.r.read_inflight += 1;
                        done = at.max(t);
                    }
                    (Some(_), true) => {
                        self.cancel(slot);
                        done = self.write(&mut *ftl, dsim, t, slot, Intent::Dirty, content)?;
                    }
                    (None, true) => done = self.write(&mut *ftl, dsim, t, slot, Intent::Dirty, content)?,
                    (None, false) => done = self.host_read(&mut *ftl, t, slot, p)?,
                },
                Access::Miss { slot, evicted } => {
                    if self.pending_at(slot).is_some() {
                        // Evicted before its data was written to the cache.
                        self.cancel(slot);
                    } else if evicted.is_some_and(|e| e.dirty) {
                        t = self.flush(&mut *ftl, t, slot, false)?;
                    }
                    done = if write {
                        self.write(&mut *ftl, dsim, t, slot, Intent::Dirty, content)?
                    } else {
                        let fetched = self.disk.read_at(t);
                        self.defer_write(fetched, slot, false, p);
                        fetched
                    };
                }
            }
            req_done = req_done.max(done);
        }
        self.last_done = self.last_done.max(req_done);
        Ok(req_done)
    }

    /// Host pages read and written in the measured part (the cache manager's, not the FTL's).
    pub(super) fn host_pages(&self) -> (u64, u64) {
        let st = self.cache.stats();
        let b = &self.base.cache;
        (
            st.read_hits + st.read_misses - b.read_hits - b.read_misses,
            st.write_hits + st.write_misses - b.write_hits - b.write_misses,
        )
    }

    /// The `flex_ecc` report object of the measured part from `t0` to `end` (ns).
    pub(super) fn report<N: SimNand, P: PolicySet, M: MappingTable>(
        &mut self,
        cfg: &SimConfig,
        ftl: &Ftl<'_, N, P, M>,
        t0: u64,
        end: u64,
    ) -> FlexReport {
        let fx = &self.fx;
        let geo = cfg.device.geometry;
        let base = &self.base;
        let c = *ftl.counters();
        let fc = *ftl.flex_counters();
        let st = self.cache.stats();
        let mc = self.model.borrow().counters();
        let sc = self.scrubber.stats();
        let tp = cfg.device.timing;
        let mut r = std::mem::take(&mut self.r);
        r.mode = match fx.mode {
            EccMode::Flex => "flex".into(),
            EccMode::AllBch => "all-bch".into(),
        };
        r.cache_pages = self.cache_pages;
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
        r.scrub_verified = sc.verified - self.scrub_base.verified;
        r.scrub_corrupt_found = sc.corrupt_found - self.scrub_base.corrupt_found;
        r.scrub_prefetched = sc.prefetched - self.scrub_base.prefetched;
        r.disk_reads = self.disk.reads - base.disk_reads;
        r.disk_writes = self.disk.writes - base.disk_writes;
        r.raw_bit_errors = mc.raw_bit_errors - base.model.raw_bit_errors;
        r.decode_ms = (mc.decode_ns - base.model.decode_ns) as f64 / 1e6;
        let mv = ftl.nand().move_stats();
        let (moves, move_ns, gc_decode) = (
            mv.moves - base.moves.moves,
            mv.move_ns - base.moves.move_ns,
            mv.decode_ns - base.moves.decode_ns,
        );
        r.gc_decode_ms = gc_decode as f64 / 1e6;
        r.copy_back = fx.copy_back.name().into();
        r.decode_model = if fx.decode_holds_lun { "lun" } else { "controller" }.into();
        r.gc_moves = moves;
        r.gc_copy_backs = mv.copy_backs - base.moves.copy_backs;
        r.gc_unread_copy_backs = mv.unread - base.moves.unread;
        r.gc_time_ms = (move_ns + c.gc_blocks * tp.t_bers_ns) as f64 / 1e6;
        let emu = ftl.nand().emu();
        let busy = emu.total_array_busy_ns() - base.array_busy_ns;
        // Array time is summed over planes; a LUN runs one command at a time with LUN queues.
        let planes =
            if tp.scheduling == crate::emulator::Scheduling::LunQueues { 1 } else { geo.planes_per_lun };
        let span = end.saturating_sub(t0).max(1) as f64 * (geo.luns * planes) as f64;
        r.lun_utilization = busy as f64 / span;
        r.lun_busy = (emu.total_op_busy_ns() - base.op_busy_ns) as f64 / (span / planes as f64);
        r.device_latency_us = self.lat.all.summary();
        r.device_read_latency_us = self.lat.read.summary();
        r.device_dirty_write_latency_us = self.lat.dirty.summary();
        r.device_clean_write_latency_us = self.lat.clean.summary();
        r.device_flush_read_latency_us = self.lat.flush.summary();
        r
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
    fn take<N: SimNand, P: PolicySet, M: MappingTable>(front: &FlexFront, ftl: &Ftl<'_, N, P, M>) -> Self {
        Baseline {
            cache: front.cache.stats(),
            disk_reads: front.disk.reads,
            disk_writes: front.disk.writes,
            model: front.model.borrow().counters(),
            moves: ftl.nand().move_stats(),
            array_busy_ns: ftl.nand().emu().total_array_busy_ns(),
            op_busy_ns: ftl.nand().emu().total_op_busy_ns(),
        }
    }
}
