//! The simulator's one run loop: every configuration, whatever techniques it stacks, runs here.
//!
//! A run is a device, an FTL with its stacked extensions (opened by `super::open_ftl`), the
//! simulator's side of those techniques (deduplication's hashing model and out-of-line passes,
//! the NV cache's timing, second writes' prefetch) and a *front end* that turns host requests
//! into FTL calls:
//! - [`DirectFront`]: the host's pages are the FTL's logical pages (address mode, write buffer,
//!   read-modify-write of partial pages).
//! - [`FlexFront`] (`--features flex-ecc`): the FTL is a cache in front of a model disk
//!   (FlexECC's setting, see [`super::flexecc`]); host pages go through its cache manager, which
//!   writes cache slots with a dirty or clean intent.
//!
//! The loop owns what the two share: preconditioning, arrivals (trace times scaled and shifted,
//! exponential gaps, or a closed loop at the queue depth), the warm-up and the start of
//! measuring, the stop conditions (pages written, wear), latencies, the WAF series, and the
//! report. FlexECC needs its NAND model ([`super::ecc_model::NoisyNand`]) and page codec; the
//! caller picks them ([`super::simulate`]), the loop is generic over both ([`SimNand`]).

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use ftl_core::intent::{flex_mark_words, FlexConfig};
use ftl_core::policy::PolicySet;
use ftl_core::{Ftl, MappingTable};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::cdm::{self, NvRun};
use super::dedup::{self, DedupSim};
use super::ecc_model::SharedModel;
use super::flexecc::FlexFront;
use super::metrics::Latencies;
use super::nand::SimNand;
use super::program_log::ProgramLog;
use super::report::{self, Report, RunStats};
use super::{ftl_config, open_ftl, waf_series, wom, write_buffer, AddressMode, Feature, Observed};
use super::{Precondition, SimConfig, SimOutput};
use crate::memory::FtlMemory;
use crate::trace::{page_span, Compactor, Op, PageSpan, Request};

/// How host requests reach the FTL.
enum Front {
    Direct(Box<DirectFront>),
    Cache(Box<FlexFront>),
}

impl Front {
    /// Host pages (read, written) so far.
    fn host_pages<N: SimNand, P: PolicySet, M: MappingTable>(&self, ftl: &Ftl<'_, N, P, M>) -> (u64, u64) {
        match self {
            Front::Direct(_) => (ftl.counters().host_read_pages, ftl.counters().host_write_pages),
            Front::Cache(f) => f.host_pages(),
        }
    }

    /// The latest completion of work a closed-loop host waits for besides its requests (FlexECC's
    /// background flushes); 0 for none.
    fn busy_until(&self) -> u64 {
        match self {
            Front::Direct(_) => 0,
            Front::Cache(f) => f.busy_until(),
        }
    }
}

/// The simulator's side of the stacked techniques.
struct Techniques {
    dsim: Option<DedupSim>,
    nv_run: NvRun,
    /// Prefetch of second writes' next pair after each request.
    prefetch: bool,
}

/// Runs `requests` through `cfg`'s device: `policies` over `nand` (with `model`, FlexECC's bit
/// errors and decodes: the FlexECC front end). See the module documentation.
pub(super) fn run<P: PolicySet, N: SimNand>(
    cfg: &SimConfig,
    policies: P,
    mut nand: N,
    model: Option<SharedModel>,
    requests: impl Iterator<Item = Request>,
    progress: &mut dyn FnMut(u64),
) -> Result<SimOutput, String>
where
    P::Classifier: Observed,
{
    let geo = cfg.device.geometry;
    let page_bytes = geo.data_bytes as u64;
    let dedup_on = cfg.features.contains(&Feature::Dedup);
    if (cfg.batch || cfg.check_data)
        && (model.is_some()
            || !cfg.features.is_empty()
            || cfg.nv_cache.is_some()
            || cfg.write_buffer_bytes.is_some()
            || cfg.open_loop
            || cfg.address == AddressMode::Compact)
    {
        return Err("--batch on (and the data check) needs the plain FTL (no technique, no NV cache, no \
                    write buffer), a closed loop and strict or wrapped addresses"
            .into());
    }
    let fcfg = ftl_config(cfg);
    // The host's pages (the FTL may have more: dedup's out-of-line scratch range, see ftl_config).
    let n = cfg.logical_pages();
    let mut mem =
        FtlMemory::with_map(&geo, &fcfg, cfg.map).with_gc_stripes(cfg.multi_plane && cfg.gc_stripes);
    let (map, m) = mem.parts();
    let mut reuse_buffers = wom::ReuseBuffers::new(&geo);
    let mut wom_codec = wom::SimulatedWom::new(&geo, 0, cfg.wom.success_permille, cfg.wom.attempts, cfg.seed)
        .with_compute_ns(cfg.wom.encode_ns, cfg.wom.decode_ns)
        .keep_data(super::stores_data(cfg));
    let wom_cfg = wom::enabled(cfg).map(|(prefetch, layout)| ftl_core::reuse::ReuseConfig {
        prefetch,
        layout,
        recycle_max_valid_permille: cfg.wom.recycle_max_valid_permille,
        retry_new_pair: cfg.wom.retry_new_pair,
        ..ftl_core::reuse::ReuseConfig::paper(&geo, &fcfg)
    });
    let wom_r = (
        ftl_core::reuse::ReuseConfig::paper_r_blocks(&geo, &fcfg),
        ftl_core::reuse::ReuseConfig::reserve_blocks(&geo, &fcfg),
    );
    let mut dbufs = dedup_on.then(|| {
        crate::dedup_memory::DedupBuffers::<{ dedup::BUCKET_ENTRIES }>::new(
            cfg.dedup.sizes(fcfg.logical_pages, geo.data_bytes),
        )
    });
    let (mut dindex, dmem) = match dbufs.as_mut() {
        Some(b) => {
            let (i, m) = b.parts(cfg.dedup.prehash, ftl_policies::dedup::Accel::ALL);
            (Some(i), Some(m))
        }
        None => (None, None),
    };
    let mut tech = Techniques {
        dsim: dedup_on.then(|| DedupSim::new(cfg.dedup, n, geo.data_bytes)),
        nv_run: NvRun::default(),
        prefetch: wom_cfg.is_some_and(|c| c.prefetch),
    };
    // With the write buffer, hashing is on the clock page by page (dedup::TimedIndex); without
    // it, a write's hashing time is added to its completion (the model of docs/eval/dedup).
    let hash_delay = Arc::new(AtomicU64::new(0));
    let index_shared = Arc::new(Mutex::new(dedup::IndexShared::default()));
    let mut timed = dindex.as_mut().map(|i| {
        dedup::TimedIndex::new(i, hash_delay.clone(), cfg.dedup.mhz, page_bytes, index_shared.clone())
    });
    let index = timed.as_mut().map(|t| t as &mut dyn ftl_core::dedup::ContentIndex);
    if let Some(d) = tech.dsim.as_mut() {
        d.set_index_shared(index_shared.clone());
    }
    let mut nv_mem = cfg.nv_cache.map(|s| cdm::SimNvCache::new(s, geo.data_bytes)).transpose()?;
    let mut flex_marks = vec![0u32; if model.is_some() { flex_mark_words(n) } else { 0 }];
    let mut front = match model {
        Some(model) => Front::Cache(Box::new(FlexFront::new(cfg, n, model, dedup_on)?)),
        None => Front::Direct(Box::new(DirectFront::new(cfg, page_bytes, hash_delay.clone()))),
    };
    // The techniques this run stacks (ftl_core::ext decides what combines).
    let mut ext = ftl_core::Extensions::none();
    if let Some(rc) = wom_cfg {
        nand.emu_mut().set_compute_source(Some(wom_codec.compute_source()));
        let slots = rc.prefetch && cfg.wom.prefetch_slots;
        ext = ext.reuse(reuse_buffers.reuse(&mut wom_codec, rc, slots));
    }
    if let Some(c) = nv_mem.as_mut() {
        ext = ext.cache(c.cache()?);
    }
    if let (Some(index), Some(memory)) = (index, dmem) {
        ext = ext.dedup(ftl_core::dedup::Dedup { memory, index, settings: cfg.dedup.settings() });
    }
    if matches!(front, Front::Cache(_)) {
        ext = ext.flex(&mut flex_marks, FlexConfig { refresh_threshold: cfg.flex.refresh_threshold });
    }
    let mut ftl = open_ftl(cfg, ProgramLog::new(nand), policies, map, m, fcfg, ext)?;
    // With read priority, programs move later after their request saw its completion: the write
    // buffer follows the emulator's window completions.
    if let (Front::Direct(d), Some(w)) = (&mut front, ftl.nand().emu().window_ends()) {
        if let Some(wb) = d.wbuf.as_mut() {
            wb.follow(w);
        }
    }

    precondition(cfg, &mut ftl, &mut tech.dsim)?;
    let origin = ftl.nand().emu().idle_at_ns();
    if let Front::Cache(f) = &mut front {
        f.start(origin);
    }
    let mut meas = Measuring::start(&mut ftl, &mut tech, &mut front);
    if dedup_on && matches!(&front, Front::Direct(d) if d.wbuf.is_some()) {
        ftl.nand_mut().emu_mut().set_delay_source(Some(hash_delay.clone()));
    }
    // The lifetime run's end: every block's rated endurance spent on average.
    let worn_at =
        cfg.until_worn_permille.map(|p| geo.endurance as u64 * geo.total_blocks() as u64 * p as u64 / 1000);

    let warmup = if matches!(front, Front::Cache(_)) { cfg.flex.warmup_requests } else { 0 };
    let mut arrivals = Arrivals::new(cfg, matches!(front, Front::Cache(_)), origin);
    let mut requests_done = 0u64;
    let sample_every = (n as u64 / 50).max(1);
    let mut next_sample = sample_every;
    // Batching (`cfg.batch`): the writes queued with the current one, and each request's
    // (operation, completion).
    let mut batch: Vec<(Request, PageSpan)> = Vec::new();
    let mut completions: Vec<(Op, u64)> = Vec::new();
    let mut batches = (0u64, 0u64);
    let mut requests = requests.peekable();

    while let Some(req) = requests.next() {
        if warmup > 0 && requests_done == warmup {
            meas = Measuring::start(&mut ftl, &mut tech, &mut front);
            next_sample = sample_every;
        }
        let host_written = front.host_pages(&ftl).1;
        if cfg.write_limit_pages.is_some_and(|l| host_written >= l) {
            break;
        }
        if worn_at.is_some_and(|w| meas.erased_before + ftl.counters().nand_erases >= w) {
            break;
        }
        let Some(span) = page_span(req.offset, req.len, page_bytes) else {
            continue;
        };
        let mut arrival = arrivals.next(&req, front.busy_until());
        if requests_done == warmup {
            // The measured part starts on an idle device: the warm-up fills the cache with
            // misses (programs) and would leave their backlog to the first measured requests.
            let idle = ftl.nand().emu().idle_at_ns().max(front.busy_until());
            if warmup > 0 && arrival < idle {
                arrivals.shift += idle - arrival;
                arrival = idle;
            }
            meas.t0 = arrival;
        }
        // Writes queued at this instant too (closed loop: a free slot of the queue, or a request
        // that completed now) join this one, up to the queue depth, while they are whole pages of
        // logical pages no other member writes and the write limit allows.
        batch.clear();
        if cfg.batch && req.op == Op::Write && batchable(span, n) {
            let mut pages = span.pages;
            let mut ranges = vec![lpn_range(span, n)];
            while batch.len() + 1 < arrivals.queue_depth {
                let Some(next) = requests.peek() else {
                    break;
                };
                let Some(ns) = page_span(next.offset, next.len, page_bytes) else {
                    break;
                };
                let r = lpn_range(ns, n);
                let fits = next.op == Op::Write
                    && batchable(ns, n)
                    && ranges.iter().all(|q| r.end <= q.start || q.end <= r.start)
                    && cfg.write_limit_pages.is_none_or(|l| host_written + pages < l);
                if !fits || !arrivals.also_at(arrival, batch.len() + 1) {
                    break;
                }
                pages += ns.pages;
                ranges.push(r);
                let next = requests.next().ok_or("batch: request vanished")?;
                batch.push((next, ns));
            }
        }
        completions.clear();
        // With read priority (`--read-priority on`), the reads a host read issues go before
        // queued programs and erases; every other read (GC, read-modify-write, background
        // work) queues in order.
        let host_read = req.op == Op::Read;
        match &mut front {
            Front::Direct(d) if !batch.is_empty() => {
                d.serve_batch(cfg, &mut ftl, (&req, span), &batch, arrival, &mut completions)?;
                batches.0 += 1;
                batches.1 += batch.len() as u64 + 1;
            }
            Front::Direct(d) => {
                ftl.nand_mut().emu_mut().prioritize_reads(host_read);
                let done = d.serve(cfg, &mut ftl, &mut tech, &req, span, arrival);
                ftl.nand_mut().emu_mut().prioritize_reads(false);
                completions.push((req.op, done?));
            }
            Front::Cache(f) => {
                let nv_before = ftl.nv_counters();
                f.before_request(&mut ftl, &mut tech.dsim, arrival)?;
                ftl.nand_mut().emu_mut().prioritize_reads(host_read);
                let done = f.serve(&mut ftl, &mut tech.dsim, &req, span, arrival);
                ftl.nand_mut().emu_mut().prioritize_reads(false);
                let done = done?;
                let only = ftl.nv_cache().map_or(0, |c| c.only_copies());
                completions.push((req.op, done + tech.nv_run.request(nv_before, ftl.nv_counters(), only)));
            }
        }
        // Background work after the request: the prefetch of the next pair of invalid pages
        // (its reads queue on the planes and delay only requests that arrive meanwhile).
        if tech.prefetch {
            ftl.prefetch_second_write().map_err(|e| format!("prefetch: {e}"))?;
        }
        for &(op, host_done) in &completions {
            let latency = host_done - arrival;
            match op {
                Op::Read => meas.read_latency.push(latency),
                Op::Write => meas.write_latency.push(latency),
            }
            arrivals.done(arrival, host_done);
            requests_done += 1;
            if requests_done > warmup {
                meas.requests += 1;
            }
            if requests_done.is_multiple_of(4096) {
                progress(requests_done);
            }
        }
        let hw = front.host_pages(&ftl).1;
        if hw >= next_sample {
            meas.samples.push((hw, ftl.counters().nand_programs));
            next_sample += sample_every;
            if let Some(v) = ftl.policies_mut().classifier().series_value() {
                meas.classifier_series.push((hw as f64 / n as f64, v));
            }
        }
    }
    if let Front::Cache(f) = &mut front {
        f.issue_due(&mut ftl, &mut tech.dsim, u64::MAX)?;
        if requests_done <= warmup {
            return Err(format!(
                "the input has {requests_done} requests, no more than the {warmup} of --warmup"
            ));
        }
    }
    let mut dedup_report = None;
    if let Some(d) = tech.dsim.as_mut() {
        d.finish(&mut ftl)?;
        dedup_report = Some(d.report(&ftl));
    }
    let wall_s = meas.wall.elapsed().as_secs_f64();
    let end_time = ftl.nand().emu().idle_at_ns().max(arrivals.last_arrival).max(front.busy_until());
    let c = *ftl.counters();
    let erase_counts =
        report::erases_since(ftl.leveled_erase_counts(), ftl.nand().emu().erase_counts(), &meas.erase_base);
    let (host_read_pages, host_write_pages) = front.host_pages(&ftl);
    // Out-of-line sort-run pages on flash are the device's own writes, not the host's.
    let host_write_pages = host_write_pages - tech.dsim.as_ref().map_or(0, |d| d.run_pages_on_flash());
    let flex_report = match &mut front {
        Front::Cache(f) => Some(f.report(cfg, &ftl, meas.t0, end_time)),
        Front::Direct(_) => None,
    };
    let features = ftl
        .policies_mut()
        .classifier()
        .feature_report()
        .into_iter()
        .chain(ftl.reuse_stats().map(|s| ("wom".to_string(), wom::report(&s, &wom_cfg, &cfg.wom, wom_r))))
        .chain(dedup_report.map(|r| ("dedup".to_string(), r)))
        .chain(flex_report.map(|r| ("flex_ecc".to_string(), serde_json::to_value(&r).unwrap_or_default())))
        .chain(cfg.device.read_priority.then(|| {
            let (reads, overtaken) = ftl.nand().emu().read_priority_counts();
            let (moved, moved_ns) = ftl.nand().emu().read_priority_moved();
            let (r0, o0, m0, n0) = meas.read_priority_base;
            let v = serde_json::json!({
                "prioritized_reads": reads - r0,
                "operations_overtaken": overtaken - o0,
                "operations_moved_later": moved - m0,
                "mean_move_us": (moved_ns - n0) as f64 / 1000.0 / (moved - m0).max(1) as f64,
            });
            ("read_priority".to_string(), v)
        }))
        .collect();
    let mut report = Report::from_run(RunStats {
        cfg,
        logical_pages: n,
        requests: meas.requests,
        host_read_pages,
        host_write_pages,
        rmw_pages: match &front {
            Front::Direct(d) => d.rmw_pages,
            Front::Cache(_) => 0,
        },
        counters: c,
        erase_counts: &erase_counts,
        read_latency: &mut meas.read_latency,
        write_latency: &mut meas.write_latency,
        simulated_ns: end_time.saturating_sub(meas.t0),
        wall_seconds: wall_s,
        ftl_ram_bytes: ftl.ram_bytes(),
        features,
        batches,
    });
    if cfg.check_data {
        if let Front::Direct(d) = &front {
            d.check_data(&mut ftl)?;
        }
    }
    if let (Some(spec), Some(c), Some(nv)) = (cfg.nv_cache, ftl.nv_counters(), ftl.nv_cache()) {
        let (k, v) = tech.nv_run.report(&spec, geo.data_bytes, &c, nv.only_copies());
        report.features.insert(k, v);
    }
    let waf_series = waf_series(&meas.samples, n, 200);
    let step = meas.classifier_series.len().div_ceil(200).max(1);
    let classifier_series: Vec<(f64, u64)> = meas.classifier_series.into_iter().step_by(step).collect();
    Ok(SimOutput {
        report,
        erase_counts,
        waf_series,
        classifier_series,
        read_latency: meas.read_latency,
        write_latency: meas.write_latency,
    })
}

/// Writes before the measured part (unmeasured): the logical space once in order, then random
/// single pages if `cfg` asks for them. With deduplication, every page gets unique content (a
/// full drive of distinct data), not one all-zero content shared by the whole device.
fn precondition<N: SimNand, P: PolicySet, M: MappingTable>(
    cfg: &SimConfig,
    ftl: &mut Ftl<'_, N, P, M>,
    dsim: &mut Option<DedupSim>,
) -> Result<(), String> {
    if cfg.precondition == Precondition::None {
        return Ok(());
    }
    let n = cfg.logical_pages();
    let pb = ftl.page_bytes() as usize;
    let mut buf = vec![0u8; pb * 64];
    let chunk = 64u32;
    let mut lpn = 0;
    while lpn < n {
        let k = chunk.min(n - lpn);
        let data = &mut buf[..k as usize * pb];
        if let Some(d) = dsim.as_mut() {
            for (i, page) in data.chunks_exact_mut(pb).enumerate() {
                d.fill_and_count(lpn + i as u32, None, page);
            }
        }
        ftl.write(lpn, data).map_err(|e| format!("precondition: {e}"))?;
        lpn += k;
    }
    if let Precondition::SequentialRandom { passes } = cfg.precondition {
        let mut rng = ChaCha8Rng::seed_from_u64(cfg.seed);
        for _ in 0..(passes * n as f64) as u64 {
            let l = rng.random_range(0..n);
            if let Some(d) = dsim.as_mut() {
                d.fill_and_count(l, None, &mut buf[..pb]);
            }
            ftl.write(l, &buf[..pb]).map_err(|e| format!("precondition: {e}"))?;
        }
    }
    Ok(())
}

/// What the measured part collects.
struct Measuring {
    erase_base: Vec<u32>,
    erased_before: u64,
    /// Start of the measured part (its first request's arrival), ns.
    t0: u64,
    wall: Instant,
    requests: u64,
    read_latency: Latencies,
    write_latency: Latencies,
    /// Cumulative (host pages written, NAND programs).
    samples: Vec<(u64, u64)>,
    classifier_series: Vec<(f64, u64)>,
    /// The emulator's read-priority counts at the start (reads, overtaken, moved, moved ns).
    read_priority_base: (u64, u64, u64, u64),
}

impl Measuring {
    /// Starts measuring: the FTL's, the techniques' and the front end's counters from here.
    fn start<N: SimNand, P: PolicySet, M: MappingTable>(
        ftl: &mut Ftl<'_, N, P, M>,
        tech: &mut Techniques,
        front: &mut Front,
    ) -> Self {
        ftl.reset_counters();
        ftl.reset_nv_counters();
        ftl.reset_flex_counters();
        if let Some(d) = tech.dsim.as_mut() {
            d.start_measuring(ftl);
        }
        if let Front::Cache(f) = front {
            f.start_measuring(ftl);
        }
        let erase_base: Vec<u32> = ftl.nand().emu().erase_counts().to_vec();
        Measuring {
            erased_before: erase_base.iter().map(|&e| e as u64).sum(),
            erase_base,
            t0: ftl.nand().emu().idle_at_ns(),
            wall: Instant::now(),
            requests: 0,
            read_latency: Latencies::default(),
            write_latency: Latencies::default(),
            samples: Vec::new(),
            classifier_series: Vec::new(),
            read_priority_base: {
                let ((r, o), (m, n)) =
                    (ftl.nand().emu().read_priority_counts(), ftl.nand().emu().read_priority_moved());
                (r, o, m, n)
            },
        }
    }
}

/// When requests arrive: at their trace times (open loop; FlexECC's front end scales them by
/// `--ioscale` and keeps them in order), with exponential gaps (FlexECC's `--interarrival`),
/// or when one of the `queue_depth` requests in flight completes (closed loop).
struct Arrivals {
    open_loop: bool,
    queue_depth: usize,
    origin: u64,
    /// Added to trace times after a warm-up (the measured part starts on an idle device).
    shift: u64,
    time_scale: f64,
    interarrival_ns: u64,
    /// Arrivals never go back in time (the cache front end issues its work in time order).
    in_order: bool,
    rng: ChaCha8Rng,
    first_time: Option<u64>,
    last_arrival: u64,
    /// Completion times of the requests in flight, earliest first.
    inflight: BinaryHeap<Reverse<u64>>,
}

impl Arrivals {
    fn new(cfg: &SimConfig, cache_front: bool, origin: u64) -> Self {
        let (time_scale, interarrival_ns) =
            if cache_front { (cfg.flex.time_scale, cfg.flex.interarrival_ns) } else { (1.0, 0) };
        let queue_depth = cfg.queue_depth.max(1) as usize;
        Arrivals {
            open_loop: cfg.open_loop,
            queue_depth,
            origin,
            shift: 0,
            time_scale,
            interarrival_ns,
            in_order: cache_front,
            rng: ChaCha8Rng::seed_from_u64(cfg.seed ^ 0xA11_7157),
            first_time: None,
            last_arrival: origin,
            inflight: BinaryHeap::with_capacity(queue_depth),
        }
    }

    /// The arrival of `req`; `busy_until`: background work a closed-loop host also waits for.
    fn next(&mut self, req: &Request, busy_until: u64) -> u64 {
        match (self.open_loop, req.time_ns) {
            (true, Some(t)) => {
                let base = *self.first_time.get_or_insert(t);
                let dt = t.saturating_sub(base);
                let dt = if self.time_scale == 1.0 { dt } else { (dt as f64 * self.time_scale) as u64 };
                let at = self.origin + self.shift + dt;
                if self.in_order {
                    at.max(self.last_arrival)
                } else {
                    at
                }
            }
            _ if self.interarrival_ns > 0 => {
                let u: f64 = self.rng.random::<f64>().max(1e-12);
                self.last_arrival + (-(u.ln()) * self.interarrival_ns as f64) as u64
            }
            _ => {
                let free = if self.inflight.len() == self.queue_depth {
                    self.inflight.pop().map_or(self.last_arrival, |Reverse(t)| t)
                } else {
                    self.last_arrival.max(self.origin)
                };
                free.max(busy_until)
            }
        }
    }

    /// Closed loop: whether the next request arrives at `t` too, `pending` requests having
    /// arrived at `t` and not been `done` yet (they complete later than `t`): it does if a slot
    /// of the queue is free, or an in-flight request completed at `t` (its slot is taken here).
    fn also_at(&mut self, t: u64, pending: usize) -> bool {
        if self.open_loop || self.interarrival_ns > 0 || t < self.last_arrival {
            return false;
        }
        if self.inflight.len() + pending < self.queue_depth {
            return true;
        }
        if self.inflight.peek() == Some(&Reverse(t)) {
            self.inflight.pop();
            return true;
        }
        false
    }

    /// A request that arrived at `arrival` completes (for the host) at `done`.
    fn done(&mut self, arrival: u64, done: u64) {
        self.inflight.push(Reverse(done));
        self.last_arrival = self.last_arrival.max(arrival);
    }
}

/// Whether a write of `span` can join a batch: whole pages, one run of logical pages (no wrap).
fn batchable(span: PageSpan, n: u32) -> bool {
    !span.partial_head && !span.partial_tail && span.first_page % n as u64 + span.pages <= n as u64
}

/// The logical pages of a [`batchable`] span (strict or wrapped addresses).
fn lpn_range(span: PageSpan, n: u32) -> std::ops::Range<u64> {
    let first = span.first_page % n as u64;
    first..first + span.pages
}

/// The first 8 bytes of a page `check_data` writes: the request's index (from 1) and the
/// logical page.
fn stamp(request: u64, lpn: u32) -> u64 {
    request << 32 | lpn as u64
}

/// The host's pages are the FTL's logical pages.
struct DirectFront {
    /// The on-device write buffer, if modelled.
    wbuf: Option<write_buffer::WriteBuffer>,
    /// Hashing delay of the current request (deduplication with the write buffer).
    hash_delay: Arc<AtomicU64>,
    compactor: Compactor,
    lpns: Vec<u32>,
    buf: Vec<u8>,
    /// Partial pages read for read-modify-write.
    rmw_pages: u64,
    /// Requests served so far (the stamp of `SimConfig::check_data`).
    served: u64,
    /// With `check_data`: each logical page's expected stamp (0: zeros).
    expect: Vec<u64>,
}

impl DirectFront {
    fn new(cfg: &SimConfig, page_bytes: u64, hash_delay: Arc<AtomicU64>) -> Self {
        DirectFront {
            wbuf: cfg.write_buffer_bytes.map(|b| write_buffer::WriteBuffer::new(b / page_bytes)),
            hash_delay,
            compactor: Compactor::new(),
            lpns: Vec::new(),
            buf: vec![0u8; page_bytes as usize * 64],
            rmw_pages: 0,
            served: 0,
            expect: if cfg.check_data { vec![0; cfg.logical_pages() as usize] } else { Vec::new() },
        }
    }

    /// Stamps the pages of `data` (logical pages `lpns`) for `check_data` as the current request.
    fn stamp_pages(&mut self, lpns: &[u32], data: &mut [u8], page_bytes: usize) {
        if self.expect.is_empty() {
            return;
        }
        for (&l, page) in lpns.iter().zip(data.chunks_exact_mut(page_bytes)) {
            let s = stamp(self.served, l);
            page[..8].copy_from_slice(&s.to_le_bytes());
            self.expect[l as usize] = s;
        }
    }

    /// `SimConfig::check_data`: every logical page reads back as the last request that wrote it
    /// wrote it (zeros if none did since the precondition).
    fn check_data<N: SimNand, P: PolicySet, M: MappingTable>(
        &self,
        ftl: &mut Ftl<'_, N, P, M>,
    ) -> Result<(), String> {
        let mut page = vec![0u8; ftl.page_bytes() as usize];
        let mut bad = 0u64;
        let mut first = None;
        for (l, &want) in self.expect.iter().enumerate() {
            ftl.read(l as u32, &mut page).map_err(|e| format!("data check: read of {l}: {e}"))?;
            let got = u64::from_le_bytes(page[..8].try_into().unwrap_or([0; 8]));
            if got != want {
                bad += 1;
                first.get_or_insert((l, got, want));
            }
        }
        match first {
            None => Ok(()),
            Some((l, got, want)) => Err(format!(
                "data check: {bad} of {} logical pages differ; page {l} holds {got:#x}, expected {want:#x}",
                self.expect.len()
            )),
        }
    }

    /// Serves the writes `first` and `rest` (whole pages of distinct logical pages, see
    /// [`batchable`]) queued at `arrival` as one `Ftl::write_many`, and pushes each request's
    /// completion: when its own pages' programs complete (its pages may share multi-plane
    /// programs with the other requests' pages); the work the FTL does after the last of the
    /// batch's pages (`finish_write`: a checkpoint, wear leveling) counts against the request
    /// that page belongs to, as it would against the last request without batching.
    fn serve_batch<N: SimNand, P: PolicySet, M: MappingTable>(
        &mut self,
        cfg: &SimConfig,
        ftl: &mut Ftl<'_, ProgramLog<N>, P, M>,
        first: (&Request, PageSpan),
        rest: &[(Request, PageSpan)],
        arrival: u64,
        completions: &mut Vec<(Op, u64)>,
    ) -> Result<(), String> {
        let pb = ftl.page_bytes() as usize;
        let n = cfg.logical_pages();
        // Each request's logical pages, in order, and where they start in `all`.
        let mut all: Vec<u32> = Vec::new();
        let mut starts = Vec::with_capacity(rest.len() + 2);
        for (req, span) in std::iter::once(first).chain(rest.iter().map(|(r, s)| (r, *s))) {
            self.map_pages(cfg, req, span, n)?;
            starts.push(all.len());
            all.extend_from_slice(&self.lpns);
        }
        starts.push(all.len());
        if self.buf.len() < all.len() * pb {
            self.buf.resize(all.len() * pb, 0);
        }
        let mut data = std::mem::take(&mut self.buf);
        for w in starts.windows(2) {
            self.served += 1;
            let lpns = &all[w[0]..w[1]];
            self.stamp_pages(lpns, &mut data[w[0] * pb..w[1] * pb], pb);
        }
        let pairs: Vec<(u32, &[u8])> = all.iter().zip(data.chunks_exact(pb)).map(|(&l, d)| (l, d)).collect();
        let emu = ftl.nand_mut().emu_mut();
        emu.set_now_ns(arrival);
        emu.open_window();
        ftl.nand_mut().start();
        let r = ftl.write_many(&pairs);
        let log = ftl.nand_mut().stop();
        drop(pairs);
        self.buf = data;
        r.map_err(|e| format!("batched write of {} pages from page {}: {e}", all.len(), all[0]))?;
        let window = ftl.nand().emu().window_completion_ns();
        // Where each page is in the log (the latest program of its physical page).
        let at = |l: u32| {
            let p = ftl.mapped_page(l)?;
            log.iter().rposition(|&(q, _)| q == Some(p))
        };
        let mut last = (0usize, 0usize); // (log index of the latest page, its request)
        for (i, w) in starts.windows(2).enumerate() {
            let mut done = arrival;
            for &l in &all[w[0]..w[1]] {
                match at(l) {
                    Some(k) => {
                        done = done.max(log[k].1);
                        if k >= last.0 {
                            last = (k, i);
                        }
                    }
                    // Not a page this batch programmed (cannot happen without techniques): the
                    // whole batch's completion.
                    None => done = done.max(window),
                }
            }
            completions.push((Op::Write, done));
        }
        let trailing = log[last.0.min(log.len())..].iter().map(|&(_, t)| t).max().unwrap_or(0);
        if let Some(c) = completions.get_mut(last.1) {
            c.1 = c.1.max(trailing);
        }
        let compute = ftl.nand_mut().emu_mut().take_compute_ns();
        if compute > 0 {
            let end = ftl.nand().emu().last_op_completion_ns() + compute;
            for c in completions.iter_mut() {
                c.1 = c.1.max(end);
            }
        }
        Ok(())
    }

    /// The logical pages of `span` under `cfg`'s address mode (into `self.lpns`).
    fn map_pages(&mut self, cfg: &SimConfig, req: &Request, span: PageSpan, n: u32) -> Result<(), String> {
        self.lpns.clear();
        for p in span.first_page..span.first_page + span.pages {
            let l = match cfg.address {
                AddressMode::Strict => p,
                AddressMode::Wrap => p % n as u64,
                AddressMode::Compact => self.compactor.map(p),
            };
            if l >= n as u64 {
                return Err(match cfg.address {
                    AddressMode::Compact => format!(
                        "the trace touches more than the device's {n} logical pages; use a larger device or --wrap"
                    ),
                    _ => format!(
                        "request at byte offset {} (page {p}) is beyond the device's {n} logical pages; \
                         use --compact or --wrap",
                        req.offset
                    ),
                });
            }
            self.lpns.push(l as u32);
        }
        Ok(())
    }

    /// Serves `req` arriving at `arrival`; returns when the host sees it complete.
    fn serve<N: SimNand, P: PolicySet, M: MappingTable>(
        &mut self,
        cfg: &SimConfig,
        ftl: &mut Ftl<'_, N, P, M>,
        tech: &mut Techniques,
        req: &Request,
        span: PageSpan,
        arrival: u64,
    ) -> Result<u64, String> {
        let page_bytes = ftl.page_bytes() as u64;
        self.map_pages(cfg, req, span, cfg.logical_pages())?;
        let nv_before = ftl.nv_counters();
        if let Some(d) = tech.dsim.as_mut() {
            d.idle_time(ftl, arrival)?;
        }
        // With the write buffer: reads of buffered pages are served from it; the request enters
        // the buffer when its pages fit, and its flash work starts then (a write's once the hash
        // processor is free too).
        let (mut admitted, mut issue_at, mut buffer_view) = (arrival, arrival, None);
        if let Some(wb) = self.wbuf.as_mut() {
            if req.op == Op::Read {
                self.lpns.retain(|&l| !wb.holds(l, arrival));
            }
            admitted = wb.admit(arrival, self.lpns.len() as u64);
            buffer_view = Some((wb.occupied_at(admitted), wb.capacity()));
            issue_at = if req.op == Op::Write { wb.issue_at(admitted) } else { admitted };
        }
        if let (Some(d), Op::Write) = (tech.dsim.as_mut(), req.op) {
            d.before_write(ftl, arrival, self.lpns.len() as u64, buffer_view);
        }
        self.hash_delay.store(0, Ordering::Relaxed);
        let emu = ftl.nand_mut().emu_mut();
        emu.set_now_ns(issue_at);
        emu.open_window();
        self.issue(ftl, tech, req, span, page_bytes)?;
        self.served += 1;
        let nv_ns =
            tech.nv_run.request(nv_before, ftl.nv_counters(), ftl.nv_cache().map_or(0, |c| c.only_copies()));
        let mut done = ftl.nand().emu().window_completion_ns() + nv_ns;
        // Decoding after the request's last read (a host read of a second write).
        let compute = ftl.nand_mut().emu_mut().take_compute_ns();
        if compute > 0 {
            done = done.max(ftl.nand().emu().last_op_completion_ns() + compute);
        }
        let mut hash_ns = 0;
        if let (Some(d), Op::Write) = (tech.dsim.as_mut(), req.op) {
            hash_ns = d.after_write(ftl, done, self.lpns.len() as u64);
            if self.wbuf.is_some() {
                // The hashing delayed the operations issued after it; a request hashed but not
                // written (all duplicates) is done when its hashing is.
                // Later work (idle-time passes, the next request) starts from a zero delay.
                hash_ns = self.hash_delay.swap(0, Ordering::Relaxed);
                done = done.max(issue_at + hash_ns);
            } else {
                done += hash_ns;
            }
        }
        if let Some(d) = tech.dsim.as_mut() {
            d.note_done(done);
        }
        // The host sees a buffered write complete when it was admitted; the device is busy with
        // it (and its pages stay buffered) until `done`.
        Ok(match (self.wbuf.as_mut(), req.op) {
            (Some(wb), Op::Write) => {
                wb.hold(done, self.lpns.len() as u64, &self.lpns, Some(issue_at + hash_ns));
                admitted
            }
            (Some(wb), Op::Read) => {
                wb.hold(done, self.lpns.len() as u64, &[], None);
                done
            }
            (None, _) => done,
        })
    }

    /// The request's FTL calls: one per run of consecutive logical pages; partial pages of a
    /// write are read first (read-modify-write).
    fn issue<N: SimNand, P: PolicySet, M: MappingTable>(
        &mut self,
        ftl: &mut Ftl<'_, N, P, M>,
        tech: &mut Techniques,
        req: &Request,
        span: PageSpan,
        page_bytes: u64,
    ) -> Result<(), String> {
        let lpns = &self.lpns;
        let mut run_start = 0;
        while run_start < lpns.len() {
            let mut run_end = run_start + 1;
            while run_end < lpns.len() && lpns[run_end] == lpns[run_end - 1] + 1 {
                run_end += 1;
            }
            let k = run_end - run_start;
            if self.buf.len() < k * page_bytes as usize {
                self.buf.resize(k * page_bytes as usize, 0);
            }
            let data = &mut self.buf[..k * page_bytes as usize];
            let first = lpns[run_start];
            match req.op {
                Op::Read => ftl.read(first, data).map_err(|e| format!("read of page {first}: {e}"))?,
                Op::Write => {
                    if let Some(d) = tech.dsim.as_mut() {
                        for (i, page) in data.chunks_exact_mut(page_bytes as usize).enumerate() {
                            let j = run_start + i;
                            let c =
                                req.content.as_ref().and_then(|c| c.get(j.min(c.len().saturating_sub(1))));
                            d.fill_and_count(lpns[j], c.copied(), page);
                        }
                    }
                    let head = span.partial_head && run_start == 0;
                    let tail = span.partial_tail && run_end == lpns.len();
                    for (partial, l) in [(head, first), (tail && !(head && k == 1), lpns[run_end - 1])] {
                        if partial {
                            self.rmw_pages += 1;
                            ftl.read(l, &mut data[..page_bytes as usize])
                                .map_err(|e| format!("read-modify-write of page {l}: {e}"))?;
                        }
                    }
                    if !self.expect.is_empty() {
                        for (i, page) in data.chunks_exact_mut(page_bytes as usize).enumerate() {
                            let s = stamp(self.served + 1, lpns[run_start + i]);
                            page[..8].copy_from_slice(&s.to_le_bytes());
                            self.expect[lpns[run_start + i] as usize] = s;
                        }
                    }
                    ftl.write(first, data).map_err(|e| format!("write of page {first}: {e}"))?;
                }
            }
            run_start = run_end;
        }
        Ok(())
    }
}
