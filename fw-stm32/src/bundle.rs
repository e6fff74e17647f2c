//! The policy bundle the firmware runs, chosen by cargo features in this one place: the page
//! codec, the hot/cold classifier with its placement, and the mapping table type.
//!
//! | feature | effect |
//! |---|---|
//! | (default) | BCH t = 4 per 512 B + CRC-32C ([`Codec`]), tables in flash; request-size classifier, one host stream |
//! | `flex-ecc` | FlexECC's codec (a format tag, then the same BCH + CRC, or CRC only for pages the FTL marks clean; the firmware has no backing store, so its pages are all written correcting) |
//! | `eti` | the ETI extent classifier (hot/cold by write frequency per extent, [`ETI_EXTENTS`] extents) with hot and cold data on separate frontiers |
//! | `wom` | refused on the board: the MT29F4G08 requires in-order programming, which second writes break |
//! | `cdm` | cooperative data management with an NV page cache in [`NV_BYTES`] of non-volatile RAM (the STM32H743's backup SRAM on the board, battery-backed where VBAT is fitted; a RAM region under QEMU): [`NV_SLOTS`] page slot(s) |
//! | `dedup` | compiled (sizes) but not in the bundle yet: the firmware logs so |
//! | `crc-codec`, `null-codec` | measurement builds: CRC-32C only, or no codec |
//!
//! The map: [`AppMap`] (the flat map today). ftl-core's bounded-RAM map will replace it here.

use ftl_core::policy::{Greedy, Policies};
use ftl_core::FlatMap;
use nand_hal::Geometry;

use crate::meter::TimedCodec;

#[cfg(all(feature = "wom", feature = "board"))]
compile_error!(
    "feature `wom` cannot run on the board: the MT29F4G08ABADA requires in-order programming \
     within a block (ONFI parameter page: no non-sequential programming) and WOM second writes \
     reprogram pages out of order. Build it for QEMU (`--no-default-features --features qemu,wom`), \
     whose chip model can drop the rule."
);

/// What the FTL attaches besides its map and memory: the NV cache with `cdm`, nothing otherwise.
#[cfg(feature = "cdm")]
pub type Attach<'a> = ftl_core::cdm::NvCache<'a>;
/// What the FTL attaches besides its map and memory: the NV cache with `cdm`, nothing otherwise.
#[cfg(not(feature = "cdm"))]
pub type Attach<'a> = ();

/// Bytes of non-volatile RAM for the NV cache (the STM32H743's backup SRAM).
#[cfg(feature = "cdm")]
pub const NV_BYTES: usize = 4096;
/// Page size the NV cache is sized for (the MT29F4G08's).
#[cfg(feature = "cdm")]
const NV_PAGE_BYTES: u32 = 2048;
/// Page slots that fit in [`NV_BYTES`] next to the cache's header and directory.
#[cfg(feature = "cdm")]
pub const NV_SLOTS: u32 = {
    let mut n = 1u32;
    while ftl_core::cdm::NvCacheLayout::new(n + 1).nvm_bytes(NV_PAGE_BYTES) <= NV_BYTES as u64 {
        n += 1;
    }
    assert!(ftl_core::cdm::NvCacheLayout::new(n).nvm_bytes(NV_PAGE_BYTES) <= NV_BYTES as u64);
    n
};

/// The memory of the attachments (the NV cache's region and its RAM index with `cdm`).
pub struct AttachBuffers {
    #[cfg(feature = "cdm")]
    nvm: ftl_core::cdm::SliceNvm<'static>,
    #[cfg(feature = "cdm")]
    slots: &'static mut [ftl_core::cdm::Slot],
    #[cfg(feature = "cdm")]
    index: &'static mut [u32],
}

impl AttachBuffers {
    /// No attachment.
    #[cfg(not(feature = "cdm"))]
    pub fn new() -> Self {
        AttachBuffers {}
    }

    /// The NV cache over `nv` (non-volatile RAM, [`NV_BYTES`]; its content is kept). Call once,
    /// from start-up.
    #[cfg(feature = "cdm")]
    pub fn new(nv: &'static mut [u8]) -> Self {
        const LAY: ftl_core::cdm::NvCacheLayout = ftl_core::cdm::NvCacheLayout::new(NV_SLOTS);
        AttachBuffers {
            nvm: ftl_core::cdm::SliceNvm::new(nv),
            slots: static_slice!(ftl_core::cdm::Slot; LAY.slots; LAY.slots; ftl_core::cdm::Slot::EMPTY),
            index: static_slice!(u32; LAY.index_words; LAY.index_words; 0),
        }
    }

    /// The attachment for one FTL instance; `None` if its memory is refused.
    pub fn parts(&mut self) -> Option<Attach<'_>> {
        #[cfg(feature = "cdm")]
        {
            use ftl_core::cdm::{NvCache, NvCacheConfig, NvPolicy};
            NvCache::new(&mut self.nvm, self.slots, self.index, NvCacheConfig::new(NvPolicy::Cdm)).ok()
        }
        #[cfg(not(feature = "cdm"))]
        Some(())
    }
}

/// The mapping table type (one place: ftl-core's bounded-RAM map replaces the flat map here).
pub type AppMap<'a> = FlatMap<'a>;

/// The mapping table over `words` (sized by `ftl_core::RamLayout::map_words`).
pub fn map(words: &mut [u32]) -> AppMap<'_> {
    FlatMap::new(words)
}

/// Whether the default BCH codec (or FlexECC's) is compiled in.
const BCH_ON: bool = !cfg!(any(feature = "crc-codec", feature = "null-codec"));

/// Field-table entries of the BCH code (2^13: m = 13).
pub const BCH_FIELD: usize = 8192;
/// Remainder words of the BCH code (52 parity bits: one `u64`).
pub const BCH_WORDS: usize = 1;
/// The BCH code's correction per codeword (the MT29F4G08ABADA requires 4 bits per 512 bytes).
pub const BCH_T: u32 = 4;

/// The BCH tables.
pub type BchTables = ftl_policies::flex_ecc::Bch<BCH_FIELD, BCH_WORDS>;

/// BCH(m = 13, t = 4): tables computed by the compiler (`Bch::new_const` in a `static`
/// initializer), so they live in flash (`.rodata`, 48 KiB), not RAM; a bad (m, t) is a build
/// error.
pub static BCH: BchTables = match BchTables::new_const(13, BCH_T) {
    Ok(b) => b,
    Err(_) => panic!("BCH(13, 4) tables"),
};

/// BCH + CRC-32C over the tables in flash: on a 2048 + 64 page, 4 x 7 parity bytes + 4 CRC
/// bytes = 32 spare bytes next to the FTL's 28 metadata bytes (60 of 64).
pub type BchPageCodec = ftl_policies::flex_ecc::BchCodec<BCH_FIELD, BCH_WORDS, &'static BchTables>;

/// The page codec (default): [`BchPageCodec`].
#[cfg(not(any(feature = "crc-codec", feature = "null-codec", feature = "flex-ecc")))]
pub type Codec = BchPageCodec;
/// The page codec with `flex-ecc`: FlexECC's tag byte + [`BchPageCodec`] (33 spare bytes).
#[cfg(all(feature = "flex-ecc", not(any(feature = "crc-codec", feature = "null-codec"))))]
pub type Codec = ftl_policies::flex_ecc::FlexCodec<BCH_FIELD, BCH_WORDS, &'static BchTables>;
/// The page codec with `crc-codec`: CRC-32C only (detects, corrects nothing; for comparison).
#[cfg(all(feature = "crc-codec", not(feature = "null-codec")))]
pub type Codec = ftl_policies::policy::Crc32cCodec;
/// The page codec with `null-codec`: none (to measure the FTL without a codec).
#[cfg(feature = "null-codec")]
pub type Codec = ftl_policies::policy::NullCodec;

/// Bit errors per codeword the page codec corrects (0: none).
pub const CODEC_T: u32 = if BCH_ON { BCH_T } else { 0 };

/// Name of the page codec, for the log.
pub const CODEC_NAME: &str = if cfg!(feature = "null-codec") {
    "none (null-codec)"
} else if cfg!(feature = "crc-codec") {
    "CRC-32C only (crc-codec)"
} else if cfg!(feature = "flex-ecc") {
    "FlexECC (tag + BCH t=4 per 512 B + CRC-32C, tables in flash)"
} else {
    "BCH t=4 per 512 B + CRC-32C, tables in flash"
};

/// The codec for a chip of shape `geo`; `None` if the compiled code is weaker than the chip's
/// ECC requirement (or does not fit its page).
pub fn codec(geo: &Geometry) -> Option<Codec> {
    #[cfg(not(any(feature = "crc-codec", feature = "null-codec")))]
    {
        let bch = BchPageCodec::with_tables_for_geometry(&BCH, geo).ok()?;
        #[cfg(feature = "flex-ecc")]
        let bch = ftl_policies::flex_ecc::FlexCodec::new(bch);
        Some(bch)
    }
    #[cfg(any(feature = "crc-codec", feature = "null-codec"))]
    {
        let _ = geo;
        Some(Codec::default())
    }
}

/// Extents of the ETI classifier (5 bytes each).
#[cfg(feature = "eti")]
pub const ETI_EXTENTS: usize = 2048;

/// The classifier: ETI with `eti`.
#[cfg(feature = "eti")]
pub type Classifier = ftl_policies::eti::Eti<ETI_EXTENTS>;
/// The placement: hot and cold on separate frontiers with `eti`.
#[cfg(feature = "eti")]
pub type Placement = ftl_core::policy::SeparateByTemperature;
/// The classifier (default): by request size.
#[cfg(not(feature = "eti"))]
pub type Classifier = ftl_core::policy::RequestSizeClassifier;
/// The placement (default): one host stream.
#[cfg(not(feature = "eti"))]
pub type Placement = ftl_core::policy::SingleHostStream;

/// The classifier for `logical_pages`; `None` if its configuration is refused.
fn classifier(logical_pages: u32) -> Option<Classifier> {
    #[cfg(feature = "eti")]
    {
        Classifier::new(ftl_policies::eti::EtiConfig::with_address_pages(logical_pages as u64)).ok()
    }
    #[cfg(not(feature = "eti"))]
    {
        let _ = logical_pages;
        Some(Classifier::default())
    }
}

/// Name of the classifier and placement, for the log.
pub const CLASSIFIER_NAME: &str = if cfg!(feature = "eti") {
    "ETI extent classifier, hot and cold on separate frontiers"
} else {
    "request-size classifier, single host stream"
};

/// The techniques in the bundle, and those compiled but not wired, for the log.
pub const TECHNIQUES: [(&str, bool, bool); 5] = [
    ("flex-ecc", cfg!(feature = "flex-ecc"), true),
    ("eti", cfg!(feature = "eti"), true),
    ("wom", cfg!(feature = "wom"), false),
    ("dedup", cfg!(feature = "dedup"), false),
    ("cdm", cfg!(feature = "cdm"), true),
];

/// The policy bundle the firmware runs.
pub type AppPolicies = Policies<TimedCodec<Codec>, Classifier, Greedy, Placement>;

/// The policy bundle for a chip of shape `geo` and `logical_pages` (`None`: see [`codec`]).
pub fn policies(geo: &Geometry, logical_pages: u32) -> Option<AppPolicies> {
    Some(Policies {
        codec: TimedCodec::new(codec(geo)?),
        classifier: classifier(logical_pages)?,
        victim: Greedy,
        placement: Placement::default(),
    })
}
