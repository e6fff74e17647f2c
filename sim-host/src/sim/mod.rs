//! The trace-driven simulator: requests (from a trace or a synthetic workload) through the FTL on
//! the emulator in metadata-only mode, with the emulator's timing model, collecting the metrics of
//! the JSON report and the series the plots draw.
//!
//! Timing: each request arrives at its trace time (open loop) or, for traces without times and
//! synthetic workloads, as soon as one of the `queue_depth` requests outstanding completes (closed
//! loop: a host keeping `queue_depth` requests in flight; completions may come out of order).
//! The simulated clock is set to the arrival; every NAND operation the FTL issues for the request
//! (GC and checkpoint work included, so GC is charged to the requests it delays) starts when its
//! plane (or, with `--scheduling luns`, its LUN) and its channel's bus are free (the timing model
//! in `emulator/timing.rs`); the request completes when the last of them does. Requests in flight
//! overlap wherever they use different planes, LUNs and channels. With `--read-priority on` the
//! NAND reads of a host read request go before the operations queued on their channel that have
//! not begun at the arrival (`Emulator::set_read_priority`; off by default). Partial
//! pages of a write are read first (read-modify-write) and counted.
//!
//! Every configuration runs through one loop ([`pipeline`]); what differs is its front end: the
//! host's pages straight to the FTL's logical pages, or, with `--features flex-ecc`, FlexECC's
//! setting ([`flexecc`]): a write-back cache manager ([`cache_manager`]) in front of a model disk
//! ([`backing`]), the FTL holding the cache, with modelled bit errors and decode costs
//! ([`ecc_model`]). Either front end drives the same FTL with whatever techniques it stacks; the
//! FTL is opened in one place (`open_ftl`), and [`refusal`] decides which combinations run.

pub mod backing;
pub mod cache_manager;
pub mod cdm;
pub mod dedup;
pub mod device;
pub mod ecc_model;
pub mod flexecc;
pub mod metrics;
pub mod nand;
mod pipeline;
pub mod plot;
pub mod program_log;
pub mod report;
pub mod wom;
pub mod write_buffer;

use ftl_core::policy::{
    Classifier, Greedy, NullCodec, Placement, Policies, PolicySet, RequestSizeClassifier,
    SeparateByTemperature, SingleHostStream,
};
use ftl_core::{Config, Ftl, MappingTable, Memory};
use ftl_policies::eti::guard::{Candidates, Pair};
use ftl_policies::eti::{CrcPoly, Eti, EtiConfig, GuardConfig, Guarded, Mbf, MbfConfig, Mhf, MhfConfig};
use nand_hal::NandFlash;

use crate::emulator::{Emulator, EmulatorConfig};
use crate::memory::MapChoice;
use crate::trace::Request;
use device::Device;
use metrics::Latencies;
use report::Report;

/// What the simulator reads from a classifier: a value sampled over time (ETI's extents in use) and
/// its counters for the report's `features` object.
pub trait Observed {
    /// The value plotted over time, if the classifier has one.
    fn series_value(&self) -> Option<u64> {
        None
    }
    /// The classifier's entry in the report's `features` object.
    fn feature_report(&self) -> Option<(String, serde_json::Value)> {
        None
    }
}

impl Observed for RequestSizeClassifier {}

impl<const N: usize> Observed for Eti<N> {
    fn series_value(&self) -> Option<u64> {
        Some(self.extent_count() as u64)
    }
    fn feature_report(&self) -> Option<(String, serde_json::Value)> {
        let s = self.stats();
        Some((
            "eti".into(),
            serde_json::json!({
                "extents_in_use": self.extent_count(),
                "extents_max": N,
                "requests": s.requests,
                "exact_matches": s.exact_matches,
                "splits": s.splits,
                "table_full": s.table_full,
                "decays": s.decays,
                "merges": s.merges,
                "memory_bytes": Self::MEMORY_BYTES,
            }),
        ))
    }
}

impl<const W: usize> Observed for Mhf<W> {
    fn feature_report(&self) -> Option<(String, serde_json::Value)> {
        Some(("mhf".into(), serde_json::json!({ "memory_bytes": core::mem::size_of::<Self>() })))
    }
}

impl<const V: usize, const W: usize> Observed for Mbf<V, W> {
    fn feature_report(&self) -> Option<(String, serde_json::Value)> {
        Some(("mbf".into(), serde_json::json!({ "memory_bytes": core::mem::size_of::<Self>() })))
    }
}

/// A guard's candidate pair reports as its first classifier, with the second's report under "alt".
impl<A: Observed, B: Observed> Observed for Pair<A, B> {
    fn series_value(&self) -> Option<u64> {
        self.0.series_value()
    }
    fn feature_report(&self) -> Option<(String, serde_json::Value)> {
        let (name, mut first) = self.0.feature_report()?;
        if let (Some(o), Some((alt, v))) = (first.as_object_mut(), self.1.feature_report()) {
            o.insert("alt".into(), serde_json::json!({ "name": alt, "report": v }));
        }
        Some((name, first))
    }
}

impl<C: Observed + Candidates<K>, const P: usize, const B: usize, const K: usize> Observed
    for Guarded<C, P, B, K>
{
    fn series_value(&self) -> Option<u64> {
        self.inner().series_value()
    }
    fn feature_report(&self) -> Option<(String, serde_json::Value)> {
        let s = self.stats();
        let guard = serde_json::json!({
            "pages": s.pages,
            "sampled": s.sampled,
            "decisions": s.decisions,
            "separate_decisions": s.separate_decisions,
            "candidate_decisions": &s.candidate_decisions[..K],
            "separated_pages": s.separated_pages,
            "drained_pages": s.drained_pages,
            "ghost_waf_one": s.one_programs as f64 / s.ghost_host.max(1) as f64,
            "ghost_waf_separated": s.sep_programs as f64 / s.ghost_host.max(1) as f64,
            "sample_shift": s.shift,
            "ghost_pages": s.ghost_pages,
            "ghost_blocks": s.ghost_blocks,
            "memory_bytes": Self::MEMORY_BYTES,
        });
        let (name, mut inner) =
            self.inner().feature_report().unwrap_or(("size".into(), serde_json::json!({})));
        if let Some(o) = inner.as_object_mut() {
            o.insert("guard".into(), guard);
        }
        Some((name, inner))
    }
}

/// Parameters of the classifiers, from `--eti-*`, `--hashes`, `--mbf-size` and `--guard*` or a
/// classifier name's `:` options (`eti:alpha=90:beta=2`, `mhf:h2`, `mbf:x4:h3`, `eti:guard`).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct ClassifierOpts {
    /// ETI's alpha in percent (the paper's 100).
    pub eti_alpha: u8,
    /// ETI's beta (the paper's 4).
    pub eti_beta: u8,
    /// ETI's decay period in requests (the paper's 4096).
    pub eti_decay: u32,
    /// MHF's and MBF's hash pair: 1 = CRC-32C + CRC-32 (default), 2 = CRC-32 + CD-ROM, 3 =
    /// CD-ROM + CRC-32C (the paper's three variants).
    pub hashes: u8,
    /// MBF's filter size as a multiple of the paper's 2048 bits: 1, 2 or 4.
    pub mbf_scale: u8,
    /// Wrap the classifier in `ftl_policies::eti::Guarded` (separate only while a miniature
    /// simulation says it lowers WAF).
    pub guard: bool,
    /// The guard's margin in per mille.
    pub guard_margin_permille: u32,
    /// The guard's window in sampled writes.
    pub guard_window: u32,
    /// A second classifier the guard may follow instead of the first (`:alt=mhf`).
    pub guard_alt: Option<ClassifierKind>,
}

impl Default for ClassifierOpts {
    fn default() -> Self {
        let g = GuardConfig::with_address_pages(1);
        ClassifierOpts {
            eti_alpha: 100,
            eti_beta: 4,
            eti_decay: 4096,
            hashes: 1,
            mbf_scale: 1,
            guard: false,
            guard_margin_permille: g.margin_permille,
            guard_window: g.window,
            guard_alt: None,
        }
    }
}

impl ClassifierOpts {
    /// The hash pair of variant `hashes`.
    pub fn hash_pair(&self) -> Result<[CrcPoly; 2], String> {
        match self.hashes {
            1 => Ok([CrcPoly::Castagnoli, CrcPoly::Ieee]),
            2 => Ok([CrcPoly::Ieee, CrcPoly::CdRom]),
            3 => Ok([CrcPoly::CdRom, CrcPoly::Castagnoli]),
            h => Err(format!("hash variant {h}: expected 1, 2 or 3")),
        }
    }

    /// Applies a classifier name's options (`alpha=N`, `beta=N`, `decay=N`, `hN`, `xN`,
    /// `guard`, `margin=N`, `window=N`, `alt=mhf`).
    pub fn apply(&mut self, options: &str) -> Result<(), String> {
        for o in options.split(':').filter(|o| !o.is_empty()) {
            let num =
                |v: &str| v.parse::<u32>().map_err(|_| format!("classifier option '{o}': not a number"));
            let byte = |v: &str| {
                num(v)
                    .and_then(|n| u8::try_from(n).map_err(|_| format!("classifier option '{o}': too large")))
            };
            match o.split_once('=') {
                Some(("alpha", v)) => self.eti_alpha = byte(v)?,
                Some(("beta", v)) => self.eti_beta = byte(v)?,
                Some(("decay", v)) => self.eti_decay = num(v)?,
                Some(("margin", v)) => self.guard_margin_permille = num(v)?,
                Some(("window", v)) => self.guard_window = num(v)?,
                Some(("alt", v)) => self.guard_alt = Some(v.parse()?),
                None if o == "guard" => self.guard = true,
                None if o.starts_with('h') => self.hashes = byte(&o[1..])?,
                None if o.starts_with('x') => self.mbf_scale = byte(&o[1..])?,
                _ => return Err(format!("unknown classifier option '{o}' (alpha=, beta=, decay=, hN, xN, guard, margin=, window=, alt=)")),
            }
        }
        self.hash_pair()?;
        if ![1, 2, 4].contains(&self.mbf_scale) {
            return Err(format!("MBF size x{}: expected x1, x2 or x4", self.mbf_scale));
        }
        Ok(())
    }
}

/// Parses a classifier name with its options (`mbf:x2:h3`): the kind, and `base` updated.
pub fn parse_classifier(s: &str, base: ClassifierOpts) -> Result<(ClassifierKind, ClassifierOpts), String> {
    let (kind, options) = s.split_once(':').unwrap_or((s, ""));
    let mut opts = base;
    opts.apply(options)?;
    Ok((kind.parse()?, opts))
}

/// Hot/cold classifier choice.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum ClassifierKind {
    /// No separation: every host write on one stream.
    None,
    /// The request-size rule (< 64 KiB hot) with hot and cold streams.
    Size,
    /// Extent-based temperature identification (2048 extents), hot and cold streams.
    Eti,
    /// Multiple hash functions (counting Bloom filter), hot and cold streams.
    Mhf,
    /// Multiple Bloom filters, hot and cold streams.
    Mbf,
}

impl std::str::FromStr for ClassifierKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "none" => Ok(ClassifierKind::None),
            "size" => Ok(ClassifierKind::Size),
            "eti" => Ok(ClassifierKind::Eti),
            "mhf" => Ok(ClassifierKind::Mhf),
            "mbf" => Ok(ClassifierKind::Mbf),
            _ => Err(format!("unknown classifier '{s}' (expected none, size, mhf, mbf or eti)")),
        }
    }
}

/// A technique named by `--features`.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Feature {
    /// Polar-WOM second writes (Reusable SSD), with prefetching of the next pair of invalid pages.
    Wom,
    /// Second writes without prefetching (`wom-noprefetch`).
    WomNoPrefetch,
    /// Second writes with both halves in one plane (`wom-sameplane`, prefetching on): the cost
    /// model of the paper's sequential variant.
    WomSamePlane,
    /// Second writes with both halves in one block (`wom-sameblock`, prefetching on): the
    /// paper's sequential variant (`PairLayout::SameBlock`).
    WomSameBlock,
    /// Inline deduplication.
    Dedup,
    /// Flexible ECC.
    FlexEcc,
    /// Extent-based temperature identification.
    Eti,
    /// NV-cache cooperative data management.
    Cdm,
}

/// Parses a `--features` list ("" or "baseline" for none). Whether the simulator runs the
/// combination is [`refusal`]'s to say.
pub fn parse_features(s: &str) -> Result<Vec<Feature>, String> {
    let mut out = Vec::new();
    for name in s.split(['+', ',']).map(str::trim).filter(|n| !n.is_empty() && *n != "baseline") {
        let f = match name {
            "wom" => Feature::Wom,
            "wom-noprefetch" => Feature::WomNoPrefetch,
            "wom-sameplane" => Feature::WomSamePlane,
            "wom-sameblock" => Feature::WomSameBlock,
            n if n == "dedup" || n.starts_with("dedup:") => Feature::Dedup,
            "flex-ecc" => Feature::FlexEcc,
            "eti" => Feature::Eti,
            "cdm" => Feature::Cdm,
            _ => {
                return Err(format!(
                    "unknown feature '{name}' (expected wom, wom-noprefetch, wom-sameplane, wom-sameblock, dedup, flex-ecc, eti or cdm)"
                ))
            }
        };
        out.push(f);
    }
    let wom = |f: &&Feature| {
        matches!(f, Feature::Wom | Feature::WomNoPrefetch | Feature::WomSamePlane | Feature::WomSameBlock)
    };
    if out.iter().filter(wom).count() > 1 {
        return Err("give one of wom, wom-noprefetch, wom-sameplane and wom-sameblock".into());
    }
    Ok(out)
}

/// Why the simulator does not run `cfg`'s combination of techniques, classifier, NV cache and map,
/// or `None` when it does: the one place these refusals live, one message each. What the FTL
/// stacks is [`ftl_core::ext::refusal`]'s decision (asked here, its reason passed on word for
/// word); the simulator runs every stack the FTL accepts and adds no refusal of its own.
/// `simulate` returns the message as its error; `ftl-sim compare` prints it in the
/// configuration's row.
pub fn refusal(cfg: &SimConfig) -> Option<String> {
    let stack = ftl_core::Stack {
        wom: wom::enabled(cfg).is_some(),
        dedup: cfg.features.contains(&Feature::Dedup),
        nv_cache: cfg.nv_cache.is_some(),
        flex_ecc: cfg.features.contains(&Feature::FlexEcc),
    };
    if let Some(r) = ftl_core::ext::refusal(stack, matches!(cfg.map, MapChoice::Cached { .. })) {
        return Some(r.reason().to_string());
    }
    None
}

/// Writes before the measured part.
#[derive(Copy, Clone, Debug, PartialEq)]
pub enum Precondition {
    /// Start from an empty device.
    None,
    /// Write the logical space once sequentially.
    Sequential,
    /// Sequentially once, then `passes` times the logical space in uniformly random single pages
    /// (the ETI paper's preconditioning, with 2 passes).
    SequentialRandom {
        /// Random passes.
        passes: f64,
    },
}

impl std::str::FromStr for Precondition {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "none" => Ok(Precondition::None),
            "seq" | "sequential" => Ok(Precondition::Sequential),
            "eti" => Ok(Precondition::SequentialRandom { passes: 2.0 }),
            _ => {
                let passes = s
                    .strip_prefix("seq+random:")
                    .or_else(|| s.strip_prefix("seq+random").map(|r| if r.is_empty() { "1" } else { r }))
                    .and_then(|p| p.parse::<f64>().ok())
                    .filter(|p| p.is_finite() && *p >= 0.0)
                    .ok_or_else(|| {
                        format!("unknown precondition '{s}' (expected none, seq, seq+random:PASSES or eti)")
                    })?;
                Ok(Precondition::SequentialRandom { passes })
            }
        }
    }
}

/// How logical pages beyond the device are handled.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum AddressMode {
    /// They are an error.
    Strict,
    /// Distinct pages are remapped onto a dense range in first-touch order.
    Compact,
    /// They are folded in by modulo.
    Wrap,
}

/// One simulation's settings.
#[derive(Clone, Debug)]
pub struct SimConfig {
    /// Name in reports and plots.
    pub label: String,
    /// Device.
    pub device: Device,
    /// Over-provisioning in percent.
    pub op_percent: f64,
    /// Classifier.
    pub classifier: ClassifierKind,
    /// Techniques (ETI and FlexECC so far).
    pub features: Vec<Feature>,
    /// Writes before measuring.
    pub precondition: Precondition,
    /// Addresses beyond capacity.
    pub address: AddressMode,
    /// Outstanding requests in closed-loop replay.
    pub queue_depth: u32,
    /// Use trace times when the requests carry them (else closed loop).
    pub open_loop: bool,
    /// Seed of the preconditioning's random writes.
    pub seed: u64,
    /// Stop the measured part once the host has written this many pages.
    pub write_limit_pages: Option<u64>,
    /// The NV cache (CDM or NVM-basic), if any.
    pub nv_cache: Option<cdm::NvCacheSpec>,
    /// Deduplication options (used when `features` has dedup).
    pub dedup: dedup::DedupOptions,
    /// Settings of a FlexECC run (used with [`Feature::FlexEcc`]).
    pub flex: flexecc::FlexSimConfig,
    /// Second writes' settings (used when `features` has a wom variant).
    pub wom: wom::WomOptions,
    /// Stop the measured part once the device's blocks have on average spent this share (per
    /// mille) of their rated endurance (the lifetime run: host pages written until then).
    pub until_worn_permille: Option<u32>,
    /// Paced GC (a copy budget per host write, `ftl_core::pacing`) or whole victims on demand.
    pub gc_pacing: bool,
    /// Multi-plane erases, programs and reads (`ftl_core::multiplane`; on by default).
    pub multi_plane: bool,
    /// GC copies as multi-plane programs (`ftl_core::gc_stripe`; with `multi_plane`, the extra
    /// page buffers are lent).
    pub gc_stripes: bool,
    /// The order host pages visit the planes in (`ftl_core::Config::stripe_order`).
    pub stripe_order: ftl_core::StripeOrder,
    /// Batching of queued writes (see `pipeline`, `DirectFront::serve_batch`): writes that are
    /// queued together (arrive at one instant in the closed loop) go to the FTL as one
    /// `Ftl::write_many`. Off by default.
    pub batch: bool,
    /// Tests: every written page carries (its logical page, the request's index), and at the end
    /// every logical page is read back and checked against the last request that wrote it (the
    /// emulator then keeps page data). The run fails on a mismatch.
    pub check_data: bool,
    /// The map: flat, or on flash behind a cache of a given size.
    pub map: MapChoice,
    /// The classifiers' parameters.
    pub classifier_opts: ClassifierOpts,
    /// The on-device write buffer in bytes ([`write_buffer`]; None: requests go straight to the
    /// flash, write-through).
    pub write_buffer_bytes: Option<u64>,
    /// The mount pool's budget (`ftl_core::Config::mount_pool_blocks`; 0: no pool, every mount
    /// after a cut surveys, and no pool records are written).
    pub mount_pool_blocks: u32,
}

/// What one simulation produced.
#[derive(Clone, Debug)]
pub struct SimOutput {
    /// The JSON report.
    pub report: Report,
    /// Erases of each good block during the measured part.
    pub erase_counts: Vec<u32>,
    /// (host writes so far in device capacities, WAF of the last interval, cumulative WAF).
    pub waf_series: Vec<(f64, f64, f64)>,
    /// (host writes in device capacities, the classifier's state size), e.g. ETI's extents in use.
    pub classifier_series: Vec<(f64, u64)>,
    /// Read response times.
    pub read_latency: Latencies,
    /// Write response times.
    pub write_latency: Latencies,
}

impl SimConfig {
    /// Logical pages the device exports at this over-provisioning.
    pub fn logical_pages(&self) -> u32 {
        let raw = self.device.geometry.total_pages() as f64;
        (raw / (1.0 + self.op_percent / 100.0)).floor() as u32
    }
}

/// Cumulative (host writes, programs) samples thinned to at most `points` points of (host writes in
/// device capacities, WAF since the previous point, cumulative WAF).
fn waf_series(samples: &[(u64, u64)], logical_pages: u32, points: usize) -> Vec<(f64, f64, f64)> {
    let step = samples.len().div_ceil(points.max(1)).max(1);
    let mut prev = (0u64, 0u64);
    let mut out = Vec::new();
    for (i, &(h, p)) in samples.iter().enumerate() {
        if (i + 1) % step != 0 && i + 1 != samples.len() {
            continue;
        }
        let dh = h.saturating_sub(prev.0).max(1);
        out.push((
            h as f64 / logical_pages as f64,
            p.saturating_sub(prev.1) as f64 / dh as f64,
            p as f64 / h.max(1) as f64,
        ));
        prev = (h, p);
    }
    out
}

/// Whether the emulator keeps page data: where something reads it back (deduplication compares
/// contents; a cached map reads its map pages; `check_data` reads every page at the end).
pub(crate) fn stores_data(cfg: &SimConfig) -> bool {
    cfg.features.contains(&Feature::Dedup) || matches!(cfg.map, MapChoice::Cached { .. }) || cfg.check_data
}

/// Runs `cfg` with `classifier` and `placement` (greedy GC) through the one run loop
/// ([`pipeline`]), on the device and page codec the techniques need: the emulator and no data
/// codec (metadata only), or with FlexECC its bit-error and decode model ([`ecc_model`]) in front
/// of the emulator and its two-format codec. The emulator keeps page data where something reads
/// it back ([`stores_data`]).
fn run_with<K: Classifier + Observed, L: Placement>(
    cfg: &SimConfig,
    classifier: K,
    placement: L,
    requests: impl Iterator<Item = Request>,
    progress: &mut dyn FnMut(u64),
) -> Result<SimOutput, String> {
    let mut emu = emulator(cfg, stores_data(cfg))?;
    if !cfg.features.contains(&Feature::FlexEcc) {
        let policies = Policies { codec: NullCodec, classifier, victim: Greedy, placement };
        return pipeline::run(cfg, policies, &mut emu, None, requests, progress);
    }
    let fx = &cfg.flex;
    let model = ecc_model::EccModel::new(&cfg.device.geometry, fx.rates, fx.timing, cfg.seed);
    let mut nand = ecc_model::NoisyNand::new(&mut emu, model.clone());
    nand.copy_back = fx.copy_back;
    nand.decode_holds_lun = fx.decode_holds_lun;
    let policies =
        Policies { codec: ecc_model::ModelCodec::new(model.clone()), classifier, victim: Greedy, placement };
    pipeline::run(cfg, policies, nand, Some(model), requests, progress)
}

/// Runs `requests` through a fresh device. `progress` is called every 4096 requests with the
/// number done.
pub fn simulate(
    cfg: &SimConfig,
    requests: impl Iterator<Item = Request>,
    progress: &mut dyn FnMut(u64),
) -> Result<SimOutput, String> {
    let classifier = if cfg.classifier == ClassifierKind::None && cfg.features.contains(&Feature::Eti) {
        ClassifierKind::Eti
    } else {
        cfg.classifier
    };
    if let Some(r) = refusal(cfg) {
        return Err(r);
    }
    let size = RequestSizeClassifier::default();
    if wom::enabled(cfg).is_some() {
        let size = RequestSizeClassifier { threshold_bytes: cfg.wom.hot_threshold_bytes };
        wom::check_device(&cfg.device.geometry)?;
        // Reusable SSD: hot (< 64 KiB requests) may become second writes; every first write
        // goes to one host stream (the paper's CleanActive), GC to its own. Another classifier
        // (the paper: "can be replaced by a better one") decides hot instead, with hot and cold
        // host streams (below).
        if matches!(classifier, ClassifierKind::None | ClassifierKind::Size) {
            return run_with(cfg, size, SingleHostStream, requests, progress);
        }
    }
    let o = cfg.classifier_opts;
    match classifier {
        // One stream: nothing to guard (`--guard` applies to the configurations with a classifier).
        ClassifierKind::None => run_with(cfg, size, SingleHostStream, requests, progress),
        ClassifierKind::Size => separated(cfg, size, requests, progress),
        ClassifierKind::Eti => {
            let ecfg = EtiConfig {
                alpha_percent: o.eti_alpha,
                beta: o.eti_beta,
                decay_period: o.eti_decay,
                ..EtiConfig::with_address_pages(cfg.logical_pages() as u64)
            };
            let eti = Eti::<2048>::new(ecfg).map_err(|e| format!("ETI configuration: {e:?}"))?;
            separated(cfg, eti, requests, progress)
        }
        ClassifierKind::Mhf => {
            let mhf = Mhf::<128>::new(MhfConfig { hashes: o.hash_pair()?, ..MhfConfig::PAPER })
                .map_err(|e| format!("MHF configuration: {e:?}"))?;
            separated(cfg, mhf, requests, progress)
        }
        ClassifierKind::Mbf => {
            let mcfg = MbfConfig { hashes: o.hash_pair()?, ..MbfConfig::PAPER };
            let e = |e| format!("MBF configuration: {e:?}");
            match o.mbf_scale {
                1 => separated(cfg, Mbf::<4, 32>::new(mcfg).map_err(e)?, requests, progress),
                2 => separated(cfg, Mbf::<4, 64>::new(mcfg).map_err(e)?, requests, progress),
                4 => separated(cfg, Mbf::<4, 128>::new(mcfg).map_err(e)?, requests, progress),
                x => Err(format!("MBF size x{x}: expected x1, x2 or x4")),
            }
        }
    }
}

/// Hot and cold host streams by `classifier`, behind the guard when the options ask for it.
fn separated<K: Classifier + Observed>(
    cfg: &SimConfig,
    classifier: K,
    requests: impl Iterator<Item = Request>,
    progress: &mut dyn FnMut(u64),
) -> Result<SimOutput, String> {
    let o = cfg.classifier_opts;
    if !o.guard {
        return run_with(cfg, classifier, SeparateByTemperature, requests, progress);
    }
    let geo = cfg.device.geometry;
    let gcfg = GuardConfig {
        op_permille: (cfg.op_percent * 10.0).round() as u32,
        lanes: (geo.planes_per_lun * geo.luns).clamp(1, ftl_policies::eti::guard::MAX_LANES as u32) as u8,
        window: o.guard_window,
        margin_permille: o.guard_margin_permille,
        pages_per_block: geo.pages_per_block,
        ..GuardConfig::with_address_pages(cfg.logical_pages() as u64)
    };
    let e = |e| format!("guard configuration: {e:?}");
    match o.guard_alt {
        None => {
            let guarded = Guarded::<K, 32768, 1024>::new(classifier, gcfg).map_err(e)?;
            run_with(cfg, guarded, SeparateByTemperature, requests, progress)
        }
        Some(ClassifierKind::Mhf) => {
            let mhf = Mhf::<128>::new(MhfConfig { hashes: o.hash_pair()?, ..MhfConfig::PAPER })
                .map_err(|e| format!("MHF configuration: {e:?}"))?;
            let guarded = Guarded::<_, 32768, 1024, 2>::new(Pair(classifier, mhf), gcfg).map_err(e)?;
            run_with(cfg, guarded, SeparateByTemperature, requests, progress)
        }
        Some(k) => Err(format!("guard alternative {k:?}: only mhf")),
    }
}

/// A run's emulator: `cfg`'s geometry, timing and channels, keeping page data only if
/// `store_data` (metadata-only otherwise; the FTL's anchor blocks always keep theirs, their
/// records are verified when written).
fn emulator(cfg: &SimConfig, store_data: bool) -> Result<Emulator, String> {
    let mut ec = EmulatorConfig::new(cfg.device.geometry);
    ec.store_data = store_data;
    ec.stored_blocks = ftl_core::anchor::ANCHOR_BLOCKS;
    ec.timing = cfg.device.timing;
    ec.channels = cfg.device.channels;
    let mut emu = Emulator::new(ec).map_err(|e| e.to_string())?;
    emu.set_read_priority(cfg.device.read_priority);
    Ok(emu)
}

/// A run's FTL configuration: `cfg`'s logical pages and mount pool. Static wear leveling checks a
/// spread of 256 erases every 64 erases: 0.26 % of a 100k-cycle endurance. A device rated for a
/// few hundred cycles (the lifetime runs' `--endurance`) gets a spread limit of 10 % of it,
/// checked every endurance / 12 erases (every 8 at 100 cycles: the paper's "all blocks age
/// together" within about 30 %).
fn ftl_config(cfg: &SimConfig) -> Config {
    let geo = cfg.device.geometry;
    // Out-of-line sort runs on flash (`dedup:oolflash`) get a scratch range above the host's
    // logical pages (sim::dedup::ool); the host's space stays `cfg.logical_pages()`.
    let host = cfg.logical_pages();
    let scratch = if cfg.features.contains(&Feature::Dedup) {
        cfg.dedup.scratch_pages(host, geo.data_bytes)
    } else {
        0
    };
    let mut fcfg = Config::with_logical_pages(&geo, host + scratch);
    fcfg.mount_pool_blocks = cfg.mount_pool_blocks;
    fcfg.wear_spread_limit = fcfg.wear_spread_limit.min((geo.endurance / 10).max(4));
    fcfg.wear_check_interval = fcfg.wear_check_interval.min((geo.endurance / 12).max(1));
    // Copy-back GC only when asked (`--copy-back`): off, every figure is the plain read +
    // program's. The FTL's real (checked) copy-backs run on the emulator, which charges them
    // (tR, the page out, only the spare in, tPROG); with FlexECC through its bit-error model
    // ([`ecc_model::NoisyNand`], which charges them the same way, and CRC pages unread under
    // `crc-direct`).
    fcfg.gc_copy_back = cfg.flex.copy_back != ecc_model::CopyBack::Off;
    fcfg.stripe_order = cfg.stripe_order;
    fcfg
}

/// Formats the FTL with the techniques `ext` stacks and sets `cfg`'s GC pacing: the one place
/// the simulator opens an FTL.
fn open_ftl<'m, N: NandFlash, P: PolicySet, M: MappingTable>(
    cfg: &SimConfig,
    nand: N,
    policies: P,
    map: M,
    mem: Memory<'m>,
    fcfg: Config,
    ext: ftl_core::Extensions<'m>,
) -> Result<Ftl<'m, N, P, M>, String> {
    let scratch = fcfg.logical_pages.saturating_sub(cfg.logical_pages());
    let mut ftl = Ftl::format_with(nand, policies, map, mem, fcfg, ext).map_err(|e| {
        let why = if scratch > 0 {
            format!(" (with {scratch} scratch pages for dedup:oolflash)")
        } else {
            String::new()
        };
        format!("cannot format the device at {}% over-provisioning{why}: {e}", cfg.op_percent)
    })?;
    ftl.set_gc_pacing(cfg.gc_pacing).map_err(|e| format!("gc pacing: {e}"))?;
    ftl.set_multi_plane(cfg.multi_plane);
    ftl.set_gc_stripes(cfg.gc_stripes);
    Ok(ftl)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waf_series_thins_and_keeps_intervals_exact() {
        let samples: Vec<(u64, u64)> =
            (1..=1000).map(|i| (i * 10, i * 10 * if i <= 500 { 2 } else { 4 })).collect();
        let s = waf_series(&samples, 100, 100);
        assert_eq!(s.len(), 100);
        assert_eq!(s.last().map(|p| p.0), Some(100.0));
        assert_eq!(s[0].1, 2.0);
        // An interval wholly after the switch has the later WAF.
        assert!(s[99].1 > 3.9 && s[99].1 < 4.1, "{:?}", s[99]);
        assert!((s[99].2 - samples[999].1 as f64 / samples[999].0 as f64).abs() < 1e-12);
    }

    #[test]
    fn classifier_options_parse() {
        let d = ClassifierOpts::default();
        let (k, o) = parse_classifier("mbf:x2:h3", d).unwrap();
        assert_eq!((k, o.mbf_scale, o.hashes, o.guard), (ClassifierKind::Mbf, 2, 3, false));
        assert_eq!(o.hash_pair(), Ok([CrcPoly::CdRom, CrcPoly::Castagnoli]));
        let (k, o) = parse_classifier("eti:alpha=90:beta=2:decay=1000:guard:margin=5:window=64", d).unwrap();
        assert_eq!(k, ClassifierKind::Eti);
        assert_eq!((o.eti_alpha, o.eti_beta, o.eti_decay), (90, 2, 1000));
        assert_eq!((o.guard, o.guard_margin_permille, o.guard_window), (true, 5, 64));
        assert_eq!((o.guard_alt, d.guard_alt), (None, None));
        let (_, o) = parse_classifier("eti:guard:alt=mhf", d).unwrap();
        assert_eq!((o.guard, o.guard_alt), (true, Some(ClassifierKind::Mhf)));
        assert!(parse_classifier("eti:guard:alt=lru", d).is_err());
        // Options start from the given base (the command-line flags).
        let base = ClassifierOpts { hashes: 2, ..d };
        assert_eq!(parse_classifier("mhf", base).unwrap().1.hashes, 2);
        assert!(parse_classifier("mhf:h4", d).unwrap_err().contains("1, 2 or 3"));
        assert!(parse_classifier("mbf:x3", d).unwrap_err().contains("x1, x2 or x4"));
        assert!(parse_classifier("eti:alpha=300", d).unwrap_err().contains("too large"));
        assert!(parse_classifier("eti:bogus", d).unwrap_err().contains("unknown classifier option"));
        assert!(parse_classifier("lru", d).is_err());
    }

    #[test]
    fn preconditions_and_classifiers_parse() {
        assert_eq!("eti".parse::<Precondition>(), Ok(Precondition::SequentialRandom { passes: 2.0 }));
        assert_eq!(
            "seq+random:1.5".parse::<Precondition>(),
            Ok(Precondition::SequentialRandom { passes: 1.5 })
        );
        assert!("seq+random:-1".parse::<Precondition>().is_err());
        assert_eq!("size".parse::<ClassifierKind>(), Ok(ClassifierKind::Size));
        assert_eq!("eti".parse::<ClassifierKind>(), Ok(ClassifierKind::Eti));
        assert_eq!(parse_features("eti"), Ok(vec![Feature::Eti]));
        assert_eq!(parse_features("baseline"), Ok(vec![]));
        assert_eq!(parse_features("wom"), Ok(vec![Feature::Wom]));
        assert_eq!(parse_features("wom-noprefetch"), Ok(vec![Feature::WomNoPrefetch]));
        assert!(parse_features("wom,wom-noprefetch").is_err());
        assert_eq!(parse_features("wom-sameplane"), Ok(vec![Feature::WomSamePlane]));
        assert_eq!(parse_features("wom-sameblock"), Ok(vec![Feature::WomSameBlock]));
        assert!(parse_features("wom-sameplane,wom-sameblock").is_err());
        assert_eq!(parse_features("wom,dedup"), Ok(vec![Feature::Wom, Feature::Dedup]));
        assert_eq!(parse_features("dedup:nosample+eti"), Ok(vec![Feature::Dedup, Feature::Eti]));
        assert_eq!(parse_features("flex-ecc"), Ok(vec![Feature::FlexEcc]));
        assert!(parse_features("bogus").unwrap_err().contains("unknown feature"));
    }
}
