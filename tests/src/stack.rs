//! The stack for this build (issue #17): what the model, torture and bit-error suites attach to
//! every FTL they open, through the one entry point `Ftl::format_with` / `Ftl::mount_with`.
//!
//! Each feature the build enables is attached ([`ATTACHED`], [`ETI`]):
//! - `wom`: second writes with the polar WOM code (N = 2^16, 2 attempts) on a chip that takes
//!   them ([`geometry`]: 4 KiB + 368-byte spare, pages programmed in any order), BCH t = 4 per
//!   512 bytes on first writes and on the second writes' message (the first stack,
//!   wom + BCH + eti, in the `wom,eti` build; bit_errors.rs runs it with raw bit errors), in
//!   the layout `FTL_WOM_LAYOUT` names ([`wom_layout`]; default two planes);
//! - `dedup`: inline deduplication (CAFTL index that pre-hashes, no sampling); the workloads then
//!   write contents shared by several logical pages too (`Op::Dup`), and the model expects
//!   exactly the same data as without it;
//! - `cdm`: the NV cache (CDM, write-through, a quarter of the logical pages) on an NV memory
//!   that keeps its content across the NAND's power cuts (cuts of the NV memory itself: cdm.rs);
//! - `flex-ecc`: FlexECC with its codec over BCH t = 4 per 512 bytes ([`geometry`]: a 64-byte
//!   spare); host writes are dirty, so pages are written correcting;
//! - `eti`: the ETI classifier with two host streams (`SeparateByTemperature`).
//!
//! Second writes are left off when FlexECC (the core refuses the pair: `ftl_core::ext::refusal`)
//! or the NV cache (tested with them in cdm.rs) is on. `dedup,flex-ecc,cdm,eti` attaches the
//! issue's second stack, `wom,eti` second writes with BCH and ETI (the first stack), and
//! `wom,dedup,eti` second writes with deduplication.
//!
//! Long random-cut runs with the NV cache and deduplication found an ftl-core bug (torture.rs
//! `random_cuts`: `--features dedup,flex-ecc,cdm,eti` seeds 29, 41 and 153, `dedup,cdm,eti`
//! seed 115, `dedup,flex-ecc,cdm` seed 163; rerun one with `FTL_TORTURE_SEED=<seed>
//! FTL_TORTURE_CUTS=1`): mount's reconciliation judged a slot stale by a shared page's sequence
//! number, so a mapping replay restored from an older share record (after an unjournaled CDM
//! drop) won over the slot's newer data. Fixed in `cdm/cooperate.rs` (`nv_judge`). The workspace
//! run (every feature, `sim` included) attached dedup + flex-ecc + eti without the NV cache for
//! a while: with all four, bit_errors.rs `model_with_bch_and_rber` (BCH, raw bit errors, the
//! small device) found a host write failing with `NoSpace`. The cause was in ftl-core, every
//! build: host pages went to the planes in turn and GC copies within a plane, so valid pages
//! piled up in one plane until its GC had nothing to gain (20 valid pages against 12). A plane
//! in that state now moves its GC copies to another plane (ftl-core's `emigration.rs`), and
//! every build attaches what it enables. Second writes with the NV cache are tested in cdm.rs. Of the techniques only FlexECC
//! runs on the cached map (the others are refused), so cached-map cases attach FlexECC alone if
//! the build has it, and keep the build's policies; second writes
//! need two planes and pages programmed in any order, so other chips (bit_errors.rs's) run
//! without them.
//!
//! `#[cfg(feature)]` sits on items only: each technique's parts are a type with a constructor
//! and an `attach` method when its feature is on, and an empty enum (no value, `for_build` gives
//! `None`) when it is off.

use ftl_core::ext::Stack;
use ftl_core::policy::{Greedy, Policies};
use ftl_core::{Config, Extensions};
use nand_hal::{EccRequirement, Geometry};

pub use crate::WomParts;

/// The techniques this build attaches (see the module docs); the core accepts them.
pub const ATTACHED: Stack = Stack {
    wom: cfg!(feature = "wom") && !cfg!(any(feature = "cdm", feature = "flex-ecc")),
    dedup: cfg!(feature = "dedup"),
    nv_cache: cfg!(feature = "cdm"),
    flex_ecc: cfg!(feature = "flex-ecc"),
};

const _: () = assert!(ftl_core::ext::refusal(ATTACHED, false).is_none());

/// Whether this build runs the ETI classifier with two host streams.
pub const ETI: bool = cfg!(feature = "eti");

/// [`crate::geometry`] on a chip the attached techniques run on: with second writes 4 KiB pages
/// with a 368-byte spare (9 %, the paper's), ECC t = 4 per 512 bytes, programmed in any order;
/// with FlexECC a 64-byte spare (room for BCH's parity).
pub fn geometry(pages_per_block: u32, blocks_per_plane: u32, planes: u32) -> Geometry {
    let g = crate::geometry(pages_per_block, blocks_per_plane, planes);
    if ATTACHED.wom {
        Geometry {
            data_bytes: 4096,
            spare_bytes: 368,
            sequential_program: false,
            ecc: EccRequirement { bits: 4, codeword_bytes: 512 },
            ..g
        }
    } else if ATTACHED.flex_ecc {
        Geometry { spare_bytes: 64, ..g }
    } else {
        g
    }
}

/// The policies of this build: its page codec ([`BuildCodec`]), classifier and placement.
pub type BuildPolicies = Policies<BuildCodec, BuildClassifier, Greedy, BuildPlacement>;

/// The policies of this build for an FTL on `geo` with `cfg`.
pub fn policies(geo: &Geometry, cfg: &Config) -> BuildPolicies {
    Policies { codec: codec(geo), classifier: classifier(cfg), victim: Greedy, placement: Default::default() }
}

/// FlexECC's codec over BCH t = 4 per 512 bytes.
#[cfg(feature = "flex-ecc")]
pub type BuildCodec = ftl_policies::flex_ecc::FlexCodec<8192, 1>;

#[cfg(feature = "flex-ecc")]
fn codec(geo: &Geometry) -> BuildCodec {
    use ftl_policies::flex_ecc::{BchCodec, FlexCodec};
    FlexCodec::new(BchCodec::new(13, 4, 512, geo.data_bytes as usize).expect("BCH"))
}

/// With second writes attached: BCH t = 4 per 512 bytes (`BchCodec::for_geometry`).
#[cfg(all(feature = "wom", not(any(feature = "dedup", feature = "cdm", feature = "flex-ecc"))))]
pub type BuildCodec = ftl_testkit::reuse::WomBch;

#[cfg(all(feature = "wom", not(any(feature = "dedup", feature = "cdm", feature = "flex-ecc"))))]
fn codec(geo: &Geometry) -> BuildCodec {
    BuildCodec::for_geometry(geo).expect("BCH for the chip")
}

/// The baseline codec (CRC-32C).
#[cfg(not(any(feature = "flex-ecc", all(feature = "wom", not(any(feature = "dedup", feature = "cdm"))))))]
pub type BuildCodec = ftl_core::policy::Crc32cCodec;

#[cfg(not(any(feature = "flex-ecc", all(feature = "wom", not(any(feature = "dedup", feature = "cdm"))))))]
fn codec(_geo: &Geometry) -> BuildCodec {
    BuildCodec::default()
}

/// The ETI classifier.
#[cfg(feature = "eti")]
pub type BuildClassifier = ftl_policies::eti::Eti<64>;

#[cfg(feature = "eti")]
fn classifier(cfg: &Config) -> BuildClassifier {
    use ftl_policies::eti::EtiConfig;
    BuildClassifier::new(EtiConfig::with_address_pages(cfg.logical_pages as u64)).expect("ETI")
}

/// Two host streams, by temperature.
#[cfg(feature = "eti")]
pub type BuildPlacement = ftl_core::policy::SeparateByTemperature;

/// The baseline classifier (by request size).
#[cfg(not(feature = "eti"))]
pub type BuildClassifier = ftl_core::policy::RequestSizeClassifier;

#[cfg(not(feature = "eti"))]
fn classifier(_cfg: &Config) -> BuildClassifier {
    BuildClassifier::default()
}

/// One host stream.
#[cfg(not(feature = "eti"))]
pub type BuildPlacement = ftl_core::policy::SingleHostStream;

/// BCH t = 8 per 512 bytes (bit_errors.rs's codec).
pub type Bch8 = ftl_policies::flex_ecc::BchCodec<8192, 2>;

/// This build's policies around the BCH codec `bch` (FlexECC's codec over it when FlexECC is
/// attached).
pub fn bch_policies(bch: Bch8, cfg: &Config) -> BchPolicies {
    Policies {
        codec: wrap_bch(bch),
        classifier: classifier(cfg),
        victim: Greedy,
        placement: Default::default(),
    }
}

/// This build's policies around BCH t = 8.
pub type BchPolicies = Policies<BchFor, BuildClassifier, Greedy, BuildPlacement>;

/// FlexECC's codec over BCH t = 8.
#[cfg(feature = "flex-ecc")]
pub type BchFor = ftl_policies::flex_ecc::FlexCodec<8192, 2>;

#[cfg(feature = "flex-ecc")]
fn wrap_bch(bch: Bch8) -> BchFor {
    BchFor::new(bch)
}

/// BCH t = 8.
#[cfg(not(feature = "flex-ecc"))]
pub type BchFor = Bch8;

#[cfg(not(feature = "flex-ecc"))]
fn wrap_bch(bch: Bch8) -> BchFor {
    bch
}

/// The owned parts of the techniques an FTL runs with, lent to every format and mount.
#[derive(Default)]
pub struct ExtParts {
    /// Second writes.
    pub wom: Option<WomParts>,
    /// Deduplication.
    pub dedup: Option<DedupParts>,
    /// The NV cache.
    pub cache: Option<CacheParts>,
    /// FlexECC.
    pub flex: Option<FlexParts>,
}

impl ExtParts {
    /// No technique.
    pub fn none() -> Self {
        Self::default()
    }

    /// The techniques of [`ATTACHED`] for an FTL on `geo` with `cfg` (on the flat map).
    pub fn for_build(geo: &Geometry, cfg: &Config) -> Self {
        ExtParts {
            wom: WomParts::for_build(geo, cfg),
            dedup: DedupParts::for_build(geo, cfg),
            cache: CacheParts::for_build(geo, cfg),
            flex: FlexParts::for_build(geo, cfg),
        }
    }

    /// Which techniques these parts attach.
    pub fn stack(&self) -> Stack {
        Stack {
            wom: self.wom.is_some(),
            dedup: self.dedup.is_some(),
            nv_cache: self.cache.is_some(),
            flex_ecc: self.flex.is_some(),
        }
    }

    /// Whether no technique is attached.
    pub fn is_empty(&self) -> bool {
        self.stack() == Stack::default()
    }

    /// The extensions for one FTL instance, in the core's stacking order.
    pub fn extensions(&mut self) -> Extensions<'_> {
        let ExtParts { wom, dedup, cache, flex } = self;
        let ext = Extensions::none();
        let ext = match wom {
            Some(p) => p.attach(ext),
            None => ext,
        };
        let ext = match dedup {
            Some(p) => p.attach(ext),
            None => ext,
        };
        let ext = match cache {
            Some(p) => p.attach(ext),
            None => ext,
        };
        match flex {
            Some(p) => p.attach(ext),
            None => ext,
        }
    }
}

#[cfg(feature = "wom")]
impl WomParts {
    /// The polar WOM code with the paper's settings, if this build attaches second writes and
    /// the chip has a plane pair.
    pub fn for_build(geo: &Geometry, cfg: &Config) -> Option<Self> {
        if !ATTACHED.wom || geo.total_planes() < 2 || geo.sequential_program {
            return None;
        }
        let codec = ftl_testkit::reuse::polar_wom_bch(geo).expect("polar WOM code with BCH");
        let mut config = ftl_core::reuse::ReuseConfig::paper(geo, cfg);
        // GC keeps two thirds of a plane's blocks clean or recycled (as wom.rs's small device),
        // so recycled blocks and second writes come within a few hundred ops on small devices.
        config.gc_threshold = config.gc_threshold.max(geo.blocks_per_plane * 2 / 3);
        // The small devices keep little over-provisioning beyond the FTL's own reserve (the
        // paper's 2R is 0 on the model's device): half the paper's R may be recycled at once.
        let half_r = ftl_core::reuse::ReuseConfig::paper_r_blocks(geo, cfg) / 2;
        config.cap_blocks = config.cap_blocks.max(half_r);
        config.layout = wom_layout();
        Some(WomParts { codec, buffers: ftl_testkit::ReuseBuffers::new(geo), config, slots: false })
    }
}

/// The layout of the second writes the stack attaches: `FTL_WOM_LAYOUT` = `two-planes` (the
/// default), `same-plane` or `same-block` (scripts/test.sh runs the `wom` configuration with
/// `same-block`, `wom,eti` with the default).
#[cfg(feature = "wom")]
pub fn wom_layout() -> ftl_core::reuse::PairLayout {
    use ftl_core::reuse::PairLayout;
    match std::env::var("FTL_WOM_LAYOUT").as_deref() {
        Err(_) | Ok("two-planes") => PairLayout::TwoPlanes,
        Ok("same-plane") => PairLayout::SamePlane,
        Ok("same-block") => PairLayout::SameBlock,
        Ok(v) => panic!("FTL_WOM_LAYOUT={v}: expected two-planes, same-plane or same-block"),
    }
}

#[cfg(not(feature = "wom"))]
impl WomParts {
    /// Without feature `wom`: none.
    pub fn for_build(_geo: &Geometry, _cfg: &Config) -> Option<Self> {
        None
    }
}

/// Deduplication: its buffers and index (8 entries per bucket) and settings.
#[cfg(feature = "dedup")]
pub struct DedupParts {
    buffers: ftl_testkit::dedup::DedupBuffers<8>,
    /// The settings.
    pub settings: ftl_core::dedup::DedupSettings,
}

#[cfg(feature = "dedup")]
impl DedupParts {
    /// An index of 16 buckets in 4 segments, a secondary map of one entry per logical page,
    /// every page fingerprinted.
    pub fn for_build(geo: &Geometry, cfg: &Config) -> Option<Self> {
        use ftl_testkit::dedup::{DedupBuffers, DedupSizes};
        let sizes = DedupSizes {
            virtual_pages: cfg.logical_pages as usize,
            buckets: 16,
            segments: 4,
            page_bytes: geo.data_bytes,
        };
        let settings = ftl_core::dedup::DedupSettings { sampling_unit: 0, ..Default::default() };
        Some(DedupParts { buffers: DedupBuffers::new(sizes), settings })
    }

    /// Attaches deduplication (the index value is leaked: a few dozen bytes per mount).
    fn attach<'a>(&'a mut self, ext: Extensions<'a>) -> Extensions<'a> {
        let (index, memory) = self.buffers.parts(true, ftl_policies::dedup::Accel::ALL);
        let index: &'a mut dyn ftl_core::dedup::ContentIndex = Box::leak(Box::new(index));
        ext.dedup(ftl_core::dedup::Dedup { memory, index, settings: self.settings })
    }
}

/// Without feature `dedup`: no value.
#[cfg(not(feature = "dedup"))]
pub enum DedupParts {}

#[cfg(not(feature = "dedup"))]
impl DedupParts {
    /// None.
    pub fn for_build(_geo: &Geometry, _cfg: &Config) -> Option<Self> {
        None
    }
    fn attach<'a>(&'a mut self, _ext: Extensions<'a>) -> Extensions<'a> {
        match *self {}
    }
}

/// The NV cache: its NV memory (kept across power cuts) and RAM.
#[cfg(feature = "cdm")]
pub struct CacheParts {
    nvm: VecNvm,
    slots: Vec<ftl_core::cdm::Slot>,
    index: Vec<u32>,
    /// The settings.
    pub config: ftl_core::cdm::NvCacheConfig,
}

/// NV memory in a vector (the NAND's power cuts leave it whole).
#[cfg(feature = "cdm")]
struct VecNvm(Vec<u8>);

#[cfg(feature = "cdm")]
impl ftl_core::cdm::Nvm for VecNvm {
    fn len(&self) -> u32 {
        self.0.len() as u32
    }
    fn read(&mut self, offset: u32, buf: &mut [u8]) -> Result<(), nand_hal::ErrorKind> {
        ftl_core::cdm::SliceNvm::new(&mut self.0).read(offset, buf)
    }
    fn write(&mut self, offset: u32, data: &[u8]) -> Result<(), nand_hal::ErrorKind> {
        ftl_core::cdm::SliceNvm::new(&mut self.0).write(offset, data)
    }
}

#[cfg(feature = "cdm")]
impl CacheParts {
    /// A CDM write-through cache of a quarter of the logical pages, if this build attaches it.
    pub fn for_build(geo: &Geometry, cfg: &Config) -> Option<Self> {
        use ftl_core::cdm::{NvCacheConfig, NvCacheLayout, NvPolicy, Slot};
        let lay = NvCacheLayout::new((cfg.logical_pages / 4).max(1));
        ATTACHED.nv_cache.then(|| CacheParts {
            nvm: VecNvm(vec![0; lay.nvm_bytes(geo.data_bytes) as usize]),
            slots: vec![Slot::EMPTY; lay.slots],
            index: vec![0; lay.index_words],
            config: NvCacheConfig::new(NvPolicy::Cdm),
        })
    }

    fn attach<'a>(&'a mut self, ext: Extensions<'a>) -> Extensions<'a> {
        let cache = ftl_core::cdm::NvCache::new(&mut self.nvm, &mut self.slots, &mut self.index, self.config)
            .expect("NV cache memory");
        ext.cache(cache)
    }
}

/// Without feature `cdm`: no value.
#[cfg(not(feature = "cdm"))]
pub enum CacheParts {}

#[cfg(not(feature = "cdm"))]
impl CacheParts {
    /// None.
    pub fn for_build(_geo: &Geometry, _cfg: &Config) -> Option<Self> {
        None
    }
    fn attach<'a>(&'a mut self, _ext: Extensions<'a>) -> Extensions<'a> {
        match *self {}
    }
}

/// FlexECC: its RAM marks and settings.
#[cfg(feature = "flex-ecc")]
pub struct FlexParts {
    marks: Vec<u32>,
    /// The settings.
    pub config: ftl_core::intent::FlexConfig,
}

#[cfg(feature = "flex-ecc")]
impl FlexParts {
    /// Marks for `cfg`'s logical pages, refreshing off.
    pub fn for_build(_geo: &Geometry, cfg: &Config) -> Option<Self> {
        let marks = vec![0; ftl_core::intent::flex_mark_words(cfg.logical_pages)];
        Some(FlexParts { marks, config: Default::default() })
    }

    fn attach<'a>(&'a mut self, ext: Extensions<'a>) -> Extensions<'a> {
        ext.flex(&mut self.marks, self.config)
    }
}

/// Without feature `flex-ecc`: no value.
#[cfg(not(feature = "flex-ecc"))]
pub enum FlexParts {}

#[cfg(not(feature = "flex-ecc"))]
impl FlexParts {
    /// None.
    pub fn for_build(_geo: &Geometry, _cfg: &Config) -> Option<Self> {
        None
    }
    fn attach<'a>(&'a mut self, _ext: Extensions<'a>) -> Extensions<'a> {
        match *self {}
    }
}
