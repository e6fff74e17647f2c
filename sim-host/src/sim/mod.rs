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
//! overlap wherever they use different planes, LUNs and channels. Partial
//! pages of a write are read first (read-modify-write) and counted.
//!
//! `--features flex-ecc` runs take another run loop ([`flexecc`]): a write-back cache manager
//! ([`cache_manager`]) over the device and a model disk ([`backing`]), with modelled bit errors
//! and decode costs ([`ecc_model`]). Both loops build their emulator, FTL configuration and FTL
//! through the same three functions (`emulator`, `ftl_config`, `open_ftl`, the one place an FTL is
//! formatted), and [`refusal`] decides, for both, which combinations run.

pub mod backing;
pub mod cache_manager;
pub mod cdm;
pub mod dedup;
pub mod device;
pub mod ecc_model;
pub mod flexecc;
pub mod metrics;
pub mod plot;
pub mod report;
pub mod wom;
pub mod write_buffer;

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use ftl_core::policy::Classifier;
use ftl_core::policy::{
    Greedy, NullCodec, Policies, PolicySet, RequestSizeClassifier, SeparateByTemperature, SingleHostStream,
};
use ftl_core::{Config, Ftl, MappingTable, Memory};
use ftl_policies::eti::guard::{Candidates, Pair};
use ftl_policies::eti::{CrcPoly, Eti, EtiConfig, GuardConfig, Guarded, Mbf, MbfConfig, Mhf, MhfConfig};
use nand_hal::NandFlash;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::emulator::{Emulator, EmulatorConfig};
use crate::memory::{FtlMemory, MapChoice};
use crate::trace::{page_span, Compactor, Op, Request};
use device::Device;
use metrics::Latencies;
use report::{Report, RunStats};

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
            n if n == "dedup" || n.starts_with("dedup:") => Feature::Dedup,
            "flex-ecc" => Feature::FlexEcc,
            "eti" => Feature::Eti,
            "cdm" => Feature::Cdm,
            _ => {
                return Err(format!(
                    "unknown feature '{name}' (expected wom, wom-noprefetch, wom-sameplane, dedup, flex-ecc, eti or cdm)"
                ))
            }
        };
        out.push(f);
    }
    let wom = |f: &&Feature| matches!(f, Feature::Wom | Feature::WomNoPrefetch | Feature::WomSamePlane);
    if out.iter().filter(wom).count() > 1 {
        return Err("give one of wom, wom-noprefetch and wom-sameplane".into());
    }
    Ok(out)
}

/// Why the simulator does not run `cfg`'s combination of techniques, classifier, NV cache and map,
/// or `None` when it does: the one place these refusals live, one message each. What the FTL
/// stacks is [`ftl_core::ext::refusal`]'s decision (asked here, its reason passed on); the rest
/// are the simulator's own. `simulate` returns the message as its error; `ftl-sim compare` prints
/// it in the configuration's row.
pub fn refusal(cfg: &SimConfig) -> Option<String> {
    let flex = cfg.features.contains(&Feature::FlexEcc);
    let stack = ftl_core::Stack {
        wom: wom::enabled(cfg).is_some(),
        dedup: cfg.features.contains(&Feature::Dedup),
        nv_cache: cfg.nv_cache.is_some(),
        flex_ecc: flex,
    };
    if let Some(r) = ftl_core::ext::refusal(stack, matches!(cfg.map, MapChoice::Cached { .. })) {
        return Some(r.reason().to_string());
    }
    // The FTL stacks FlexECC with dedup, the NV cache and every classifier; the simulator's
    // FlexECC run loop (a host cache manager over the device, a model disk, modelled bit errors
    // and decodes, `flexecc.rs`) does not take them yet.
    if flex && (cfg.features.len() > 1 || cfg.classifier != ClassifierKind::None || stack.nv_cache) {
        return Some(
            "flex-ecc runs alone in the simulator (no other feature, classifier or NV cache): its run loop \
             with a host cache manager and a model disk does not take the others yet"
                .into(),
        );
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

/// The simulator's policy bundle: no data codec (metadata-only), greedy GC.
fn policies<K, L>(classifier: K, placement: L) -> Policies<NullCodec, K, Greedy, L> {
    Policies { codec: NullCodec, classifier, victim: Greedy, placement }
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
    if cfg.features.contains(&Feature::FlexEcc) {
        return flexecc::simulate_flex(cfg, requests, progress);
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
            return simulate_with(cfg, policies(size, SingleHostStream), requests, progress);
        }
    }
    let o = cfg.classifier_opts;
    match classifier {
        // One stream: nothing to guard (`--guard` applies to the configurations with a classifier).
        ClassifierKind::None => simulate_with(cfg, policies(size, SingleHostStream), requests, progress),
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
        return simulate_with(cfg, policies(classifier, SeparateByTemperature), requests, progress);
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
            simulate_with(cfg, policies(guarded, SeparateByTemperature), requests, progress)
        }
        Some(ClassifierKind::Mhf) => {
            let mhf = Mhf::<128>::new(MhfConfig { hashes: o.hash_pair()?, ..MhfConfig::PAPER })
                .map_err(|e| format!("MHF configuration: {e:?}"))?;
            let guarded = Guarded::<_, 32768, 1024, 2>::new(Pair(classifier, mhf), gcfg).map_err(e)?;
            simulate_with(cfg, policies(guarded, SeparateByTemperature), requests, progress)
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
    Emulator::new(ec).map_err(|e| e.to_string())
}

/// A run's FTL configuration: `cfg`'s logical pages and mount pool. Static wear leveling checks a
/// spread of 256 erases every 64 erases: 0.26 % of a 100k-cycle endurance. A device rated for a
/// few hundred cycles (the lifetime runs' `--endurance`) gets a spread limit of 10 % of it,
/// checked every endurance / 12 erases (every 8 at 100 cycles: the paper's "all blocks age
/// together" within about 30 %).
fn ftl_config(cfg: &SimConfig) -> Config {
    let geo = cfg.device.geometry;
    let mut fcfg = Config::with_logical_pages(&geo, cfg.logical_pages());
    fcfg.mount_pool_blocks = cfg.mount_pool_blocks;
    fcfg.wear_spread_limit = fcfg.wear_spread_limit.min((geo.endurance / 10).max(4));
    fcfg.wear_check_interval = fcfg.wear_check_interval.min((geo.endurance / 12).max(1));
    fcfg
}

/// Formats the FTL with the techniques `ext` stacks and sets `cfg`'s GC pacing: the one place
/// the simulator opens an FTL (both run loops come through here).
fn open_ftl<'m, N: NandFlash, P: PolicySet, M: MappingTable>(
    cfg: &SimConfig,
    nand: N,
    policies: P,
    map: M,
    mem: Memory<'m>,
    fcfg: Config,
    ext: ftl_core::Extensions<'m>,
) -> Result<Ftl<'m, N, P, M>, String> {
    let mut ftl = Ftl::format_with(nand, policies, map, mem, fcfg, ext)
        .map_err(|e| format!("cannot format the device at {}% over-provisioning: {e}", cfg.op_percent))?;
    ftl.set_gc_pacing(cfg.gc_pacing).map_err(|e| format!("gc pacing: {e}"))?;
    Ok(ftl)
}

fn simulate_with<P: PolicySet>(
    cfg: &SimConfig,
    policies: P,
    requests: impl Iterator<Item = Request>,
    progress: &mut dyn FnMut(u64),
) -> Result<SimOutput, String>
where
    P::Classifier: Observed,
{
    let geo = cfg.device.geometry;
    let page_bytes = geo.data_bytes as u64;
    let dedup_on = cfg.features.contains(&Feature::Dedup);
    // Deduplication hashes, compares and coalesces real page data; a cached map reads its map
    // pages back.
    let cached = matches!(cfg.map, MapChoice::Cached { .. });
    let mut emu = emulator(cfg, dedup_on || cached)?;
    let fcfg = ftl_config(cfg);
    let mut mem = FtlMemory::with_map(&geo, &fcfg, cfg.map);
    let (map, m) = mem.parts();
    let mut reuse_buffers = wom::ReuseBuffers::new(&geo);
    let mut wom_codec = wom::SimulatedWom::new(&geo, 0, cfg.wom.success_permille, cfg.wom.attempts, cfg.seed)
        .with_compute_ns(cfg.wom.encode_ns, cfg.wom.decode_ns);
    let wom_cfg = wom::enabled(cfg).map(|(prefetch, same_plane)| ftl_core::reuse::ReuseConfig {
        prefetch,
        same_plane,
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
    let mut dsim = dedup_on.then(|| dedup::DedupSim::new(cfg.dedup, fcfg.logical_pages, geo.data_bytes));
    let mut wbuf = cfg.write_buffer_bytes.map(|b| write_buffer::WriteBuffer::new(b / page_bytes));
    // With the write buffer, hashing is on the clock page by page (dedup::TimedIndex); without
    // it, a write's hashing time is added to its completion (the model of docs/eval/dedup).
    let hash_delay = Arc::new(AtomicU64::new(0));
    let index_shared = Arc::new(Mutex::new(dedup::IndexShared::default()));
    let mut timed = dindex.as_mut().map(|i| {
        dedup::TimedIndex::new(i, hash_delay.clone(), cfg.dedup.mhz, page_bytes, index_shared.clone())
    });
    let index = timed.as_mut().map(|t| t as &mut dyn ftl_core::dedup::ContentIndex);
    if let Some(d) = dsim.as_mut() {
        d.set_index_shared(index_shared.clone());
    }
    let mut nv_mem = cfg.nv_cache.map(|s| cdm::SimNvCache::new(s, geo.data_bytes)).transpose()?;
    // The techniques this run stacks (ftl_core::ext decides what combines).
    let mut ext = ftl_core::Extensions::none();
    if let Some(rc) = wom_cfg {
        emu.set_compute_source(Some(wom_codec.compute_source()));
        let slots = rc.prefetch && cfg.wom.prefetch_slots;
        ext = ext.reuse(reuse_buffers.reuse(&mut wom_codec, rc, slots));
    }
    if let Some(c) = nv_mem.as_mut() {
        ext = ext.cache(c.cache()?);
    }
    if let (Some(index), Some(memory)) = (index, dmem) {
        ext = ext.dedup(ftl_core::dedup::Dedup { memory, index, settings: cfg.dedup.settings() });
    }
    let mut ftl = open_ftl(cfg, &mut emu, policies, map, m, fcfg, ext)?;
    let mut nv_run = cdm::NvRun::default();
    let n = fcfg.logical_pages;
    let mut buf = vec![0u8; page_bytes as usize * 64];

    // Preconditioning (unmeasured).
    if cfg.precondition != Precondition::None {
        let chunk = 64u32;
        let mut lpn = 0;
        while lpn < n {
            let k = chunk.min(n - lpn);
            // With deduplication, every preconditioned page gets unique content (a full drive
            // of distinct data), not one all-zero content shared by the whole device.
            if let Some(d) = dsim.as_mut() {
                for (i, page) in
                    buf[..(k as u64 * page_bytes) as usize].chunks_exact_mut(page_bytes as usize).enumerate()
                {
                    d.fill_and_count(lpn + i as u32, None, page);
                }
            }
            ftl.write(lpn, &buf[..(k as u64 * page_bytes) as usize])
                .map_err(|e| format!("precondition: {e}"))?;
            lpn += k;
        }
        if let Precondition::SequentialRandom { passes } = cfg.precondition {
            let mut rng = ChaCha8Rng::seed_from_u64(cfg.seed);
            for _ in 0..(passes * n as f64) as u64 {
                let l = rng.random_range(0..n);
                if let Some(d) = dsim.as_mut() {
                    d.fill_and_count(l, None, &mut buf[..page_bytes as usize]);
                }
                ftl.write(l, &buf[..page_bytes as usize]).map_err(|e| format!("precondition: {e}"))?;
            }
        }
    }
    ftl.reset_counters();
    ftl.reset_nv_counters();
    if let Some(d) = dsim.as_mut() {
        d.start_measuring(&ftl);
    }
    if wbuf.is_some() && dedup_on {
        ftl.nand_mut().set_delay_source(Some(hash_delay.clone()));
    }
    let erase_base: Vec<u32> = ftl.nand().erase_counts().to_vec();
    // The lifetime run's end: every block's rated endurance spent on average.
    let worn_at =
        cfg.until_worn_permille.map(|p| geo.endurance as u64 * geo.total_blocks() as u64 * p as u64 / 1000);
    let erased_before: u64 = erase_base.iter().map(|&e| e as u64).sum();
    let t0 = ftl.nand().idle_at_ns();

    let mut read_latency = Latencies::default();
    let mut write_latency = Latencies::default();
    let mut compactor = Compactor::new();
    let qd = cfg.queue_depth.max(1) as usize;
    // Completion times of the requests in flight, earliest first.
    let mut inflight: BinaryHeap<Reverse<u64>> = BinaryHeap::with_capacity(qd);
    let mut first_time: Option<u64> = None;
    let mut lpns: Vec<u32> = Vec::new();
    let mut requests_done = 0u64;
    let mut rmw_pages = 0u64;
    let sample_every = (n as u64 / 50).max(1);
    let mut next_sample = sample_every;
    let mut samples: Vec<(u64, u64)> = Vec::new();
    let mut classifier_series: Vec<(f64, u64)> = Vec::new();
    let mut last_time = t0;
    let wall = Instant::now();

    for req in requests {
        if cfg.write_limit_pages.is_some_and(|l| ftl.counters().host_write_pages >= l) {
            break;
        }
        if worn_at.is_some_and(|w| erased_before + ftl.counters().nand_erases >= w) {
            break;
        }
        let Some(span) = page_span(req.offset, req.len, page_bytes) else {
            continue;
        };
        lpns.clear();
        for p in span.first_page..span.first_page + span.pages {
            let l = match cfg.address {
                AddressMode::Strict => p,
                AddressMode::Wrap => p % n as u64,
                AddressMode::Compact => compactor.map(p),
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
            lpns.push(l as u32);
        }
        let arrival = match (cfg.open_loop, req.time_ns) {
            (true, Some(t)) => {
                let base = *first_time.get_or_insert(t);
                t0 + t.saturating_sub(base)
            }
            _ => {
                if inflight.len() == qd {
                    inflight.pop().map_or(last_time, |Reverse(t)| t)
                } else {
                    last_time.max(t0)
                }
            }
        };
        let nv_before = ftl.nv_counters();
        if let Some(d) = dsim.as_mut() {
            d.idle_time(&mut ftl, arrival)?;
        }
        // With the write buffer: reads of buffered pages are served from it; the request enters
        // the buffer when its pages fit, and its flash work starts then (a write's once the hash
        // processor is free too).
        let (mut admitted, mut issue_at, mut buffer_view) = (arrival, arrival, None);
        if let Some(wb) = wbuf.as_mut() {
            if req.op == Op::Read {
                lpns.retain(|&l| !wb.holds(l, arrival));
            }
            admitted = wb.admit(arrival, lpns.len() as u64);
            buffer_view = Some((wb.occupied_at(admitted), wb.capacity()));
            issue_at = if req.op == Op::Write { wb.issue_at(admitted) } else { admitted };
        }
        if let (Some(d), Op::Write) = (dsim.as_mut(), req.op) {
            d.before_write(&mut ftl, arrival, lpns.len() as u64, buffer_view);
        }
        hash_delay.store(0, Ordering::Relaxed);
        let emu = ftl.nand_mut();
        emu.set_now_ns(issue_at);
        emu.open_window();
        let mut run_start = 0;
        while run_start < lpns.len() {
            let mut run_end = run_start + 1;
            while run_end < lpns.len() && lpns[run_end] == lpns[run_end - 1] + 1 {
                run_end += 1;
            }
            let k = run_end - run_start;
            if buf.len() < k * page_bytes as usize {
                buf.resize(k * page_bytes as usize, 0);
            }
            let data = &mut buf[..k * page_bytes as usize];
            let first = lpns[run_start];
            match req.op {
                Op::Read => ftl.read(first, data).map_err(|e| format!("read of page {first}: {e}"))?,
                Op::Write => {
                    if let Some(d) = dsim.as_mut() {
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
                            rmw_pages += 1;
                            ftl.read(l, &mut data[..page_bytes as usize])
                                .map_err(|e| format!("read-modify-write of page {l}: {e}"))?;
                        }
                    }
                    ftl.write(first, data).map_err(|e| format!("write of page {first}: {e}"))?;
                }
            }
            run_start = run_end;
        }
        let nv_ns =
            nv_run.request(nv_before, ftl.nv_counters(), ftl.nv_cache().map_or(0, |c| c.only_copies()));
        let mut done = ftl.nand().window_completion_ns() + nv_ns;
        // Decoding after the request's last read (a host read of a second write).
        let compute = ftl.nand_mut().take_compute_ns();
        if compute > 0 {
            done = done.max(ftl.nand().last_op_completion_ns() + compute);
        }
        let mut hash_ns = 0;
        if let (Some(d), Op::Write) = (dsim.as_mut(), req.op) {
            hash_ns = d.after_write(&ftl, done, lpns.len() as u64);
            if wbuf.is_some() {
                // The hashing delayed the operations issued after it; a request hashed but not
                // written (all duplicates) is done when its hashing is.
                // Later work (idle-time passes, the next request) starts from a zero delay.
                hash_ns = hash_delay.swap(0, Ordering::Relaxed);
                done = done.max(issue_at + hash_ns);
            } else {
                done += hash_ns;
            }
        }
        if let Some(d) = dsim.as_mut() {
            d.note_done(done);
        }
        // The host sees a buffered write complete when it was admitted; the device is busy with
        // it (and its pages stay buffered) until `done`.
        let host_done = match (wbuf.as_mut(), req.op) {
            (Some(wb), Op::Write) => {
                wb.hold(done, lpns.len() as u64, &lpns, Some(issue_at + hash_ns));
                admitted
            }
            (Some(wb), Op::Read) => {
                wb.hold(done, lpns.len() as u64, &[], None);
                done
            }
            (None, _) => done,
        };
        let latency = host_done - arrival;
        // Background work after the request: the prefetch of the next pair of invalid pages
        // (its reads queue on the planes and delay only requests that arrive meanwhile).
        if wom_cfg.is_some_and(|c| c.prefetch) {
            ftl.prefetch_second_write().map_err(|e| format!("prefetch: {e}"))?;
        }
        match req.op {
            Op::Read => read_latency.push(latency),
            Op::Write => write_latency.push(latency),
        }
        inflight.push(Reverse(host_done));
        last_time = last_time.max(arrival);
        requests_done += 1;
        if requests_done.is_multiple_of(4096) {
            progress(requests_done);
        }
        let c = ftl.counters();
        if c.host_write_pages >= next_sample {
            let hw = c.host_write_pages;
            samples.push((hw, c.nand_programs));
            next_sample += sample_every;
            if let Some(v) = ftl.policies_mut().classifier().series_value() {
                classifier_series.push((hw as f64 / n as f64, v));
            }
        }
    }
    let mut dedup_report = None;
    if let Some(d) = dsim.as_mut() {
        d.finish(&mut ftl)?;
        dedup_report = Some(d.report(&ftl));
    }
    let wall_s = wall.elapsed().as_secs_f64();
    let waf_series = waf_series(&samples, n, 200);
    let end_time = ftl.nand().idle_at_ns().max(last_time);
    let c = *ftl.counters();
    let erase_counts =
        report::erases_since(ftl.leveled_erase_counts(), ftl.nand().erase_counts(), &erase_base);
    let features = ftl
        .policies_mut()
        .classifier()
        .feature_report()
        .into_iter()
        .chain(ftl.reuse_stats().map(|s| ("wom".to_string(), wom::report(&s, &wom_cfg, &cfg.wom, wom_r))))
        .chain(dedup_report.map(|r| ("dedup".to_string(), r)))
        .collect();
    let mut report = Report::from_run(RunStats {
        cfg,
        logical_pages: n,
        requests: requests_done,
        host_read_pages: c.host_read_pages,
        host_write_pages: c.host_write_pages,
        rmw_pages,
        counters: c,
        erase_counts: &erase_counts,
        read_latency: &mut read_latency,
        write_latency: &mut write_latency,
        simulated_ns: end_time.saturating_sub(t0),
        wall_seconds: wall_s,
        ftl_ram_bytes: ftl.ram_bytes(),
        features,
    });
    if let (Some(spec), Some(c), Some(nv)) = (cfg.nv_cache, ftl.nv_counters(), ftl.nv_cache()) {
        let (k, v) = nv_run.report(&spec, geo.data_bytes, &c, nv.only_copies());
        report.features.insert(k, v);
    }
    let step = classifier_series.len().div_ceil(200).max(1);
    let classifier_series: Vec<(f64, u64)> = classifier_series.into_iter().step_by(step).collect();
    Ok(SimOutput { report, erase_counts, waf_series, classifier_series, read_latency, write_latency })
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
        assert_eq!(parse_features("wom,dedup"), Ok(vec![Feature::Wom, Feature::Dedup]));
        assert_eq!(parse_features("dedup:nosample+eti"), Ok(vec![Feature::Dedup, Feature::Eti]));
        assert_eq!(parse_features("flex-ecc"), Ok(vec![Feature::FlexEcc]));
        assert!(parse_features("bogus").unwrap_err().contains("unknown feature"));
    }
}
