//! The policy bundle the firmware runs, chosen by cargo features in this one place: the page
//! codec, the hot/cold classifier with its placement, and the mapping table type.
//!
//! | feature | effect |
//! |---|---|
//! | (default) | BCH t = 4 per 512 B + CRC-32C ([`Codec`]), tables in flash; request-size classifier, one host stream |
//! | `flex-ecc` | FlexECC's codec (a format tag, then the same BCH + CRC, or CRC only for pages the FTL marks clean; the firmware has no backing store, so its pages are all written correcting) |
//! | `eti` | the ETI extent classifier (hot/cold by write frequency per extent, [`ETI_EXTENTS`] extents) with hot and cold data on separate frontiers |
//! | `wom` | refused on the board: the MT29F4G08 requires in-order programming, which second writes break; under QEMU, Reusable SSD's second writes with the polar WOM code (N = 2^16, BCH t = 4 over each half's second-write bytes) on a chip model without the in-order rule |
//! | `cdm` | cooperative data management with an NV page cache in [`NV_BYTES`] of non-volatile RAM (the STM32H743's backup SRAM on the board, battery-backed where VBAT is fitted; a RAM region under QEMU): [`NV_SLOTS`] page slot(s) |
//! | `dedup` | inline deduplication (CAFTL): SHA-1 fingerprints of every written page in a fingerprint store sized to the RAM the platform leaves ([`dedup_sizes`], `platform::DEDUP_RAM`), shared contents through virtual pages |
//! | `crc-codec`, `null-codec` | measurement builds: CRC-32C only, or no codec |
//! | `flat-map` | measurement build: the flat map instead of the cached map (no map misses) |
//!
//! The map: [`AppMap`], ftl-core's cached map (the map on flash behind a RAM cache whose size the
//! platform picks) by default and with `eti` or `flex-ecc`; the flat map with `cdm`, `dedup` or
//! `wom`, which ftl-core refuses on the cached map, and with the `flat-map` measurement build
//! (build.rs sets `cfg(flat_map)`).

use core::mem::size_of;

use ftl_core::policy::{Greedy, Policies};
#[cfg(flat_map)]
use ftl_core::FlatMap;
use ftl_core::{CachedMapLayout, Config, DirtyEntry, MapLine, RamLayout};
use nand_hal::Geometry;

use crate::meter::TimedCodec;

#[cfg(all(feature = "wom", feature = "board"))]
compile_error!(
    "feature `wom` cannot run on the board: the MT29F4G08ABADA requires in-order programming \
     within a block (ONFI parameter page: no non-sequential programming) and WOM second writes \
     reprogram pages out of order. Build it for QEMU (`--no-default-features --features qemu,wom`), \
     whose chip model can drop the rule."
);

#[cfg(any(
    all(feature = "cdm", feature = "dedup"),
    all(feature = "cdm", feature = "wom"),
    all(feature = "dedup", feature = "wom")
))]
compile_error!(
    "the firmware bundles one of `cdm`, `dedup` and `wom` (ftl-core refuses wom with either, see \
     ftl_core::Refusal; cdm with dedup runs in the library and the simulator, not yet in this bundle)"
);

/// What the FTL attaches besides its map and memory: the NV cache with `cdm`, the deduplication
/// index and memory with `dedup`, nothing otherwise.
#[cfg(feature = "cdm")]
pub type Attach<'a> = ftl_core::cdm::NvCache<'a>;
/// What the FTL attaches besides its map and memory (see the `cdm` variant).
#[cfg(feature = "dedup")]
pub type Attach<'a> = ftl_core::dedup::Dedup<'a>;
/// What the FTL attaches besides its map and memory (see the `cdm` variant).
#[cfg(feature = "wom")]
pub type Attach<'a> = ftl_core::reuse::Reuse<'a>;
/// What the FTL attaches besides its map and memory (see the `cdm` variant).
#[cfg(not(any(feature = "cdm", feature = "dedup", feature = "wom")))]
pub type Attach<'a> = ();

/// The FTL's stacked extensions for this build, from what it attaches.
#[cfg(feature = "cdm")]
pub fn extensions(attach: Attach<'_>) -> ftl_core::Extensions<'_> {
    ftl_core::Extensions::none().cache(attach)
}
/// The FTL's stacked extensions for this build (see the `cdm` variant).
#[cfg(feature = "dedup")]
pub fn extensions(attach: Attach<'_>) -> ftl_core::Extensions<'_> {
    ftl_core::Extensions::none().dedup(attach)
}
/// The FTL's stacked extensions for this build (see the `cdm` variant).
#[cfg(feature = "wom")]
pub fn extensions(attach: Attach<'_>) -> ftl_core::Extensions<'_> {
    ftl_core::Extensions::none().reuse(attach)
}
/// The FTL's stacked extensions for this build (see the `cdm` variant).
#[cfg(not(any(feature = "cdm", feature = "dedup", feature = "wom")))]
pub fn extensions<'a>(_attach: Attach<'a>) -> ftl_core::Extensions<'a> {
    ftl_core::Extensions::none()
}

/// Words of the polar WOM code's blocks (N up to 2^16).
#[cfg(feature = "wom")]
pub const POLAR_W: usize = 1024;

/// The second-write codec: the polar WOM page codec, BCH t = 4 (the flash tables) over each
/// half's second-write bytes, its 64 KiB scratch and two raw pages in static buffers.
#[cfg(feature = "wom")]
pub type SecondWrite = ftl_policies::wom::WomSecondWrite<
    POLAR_W,
    0,
    BchPageCodec,
    &'static mut ftl_policies::wom::WomScratch<POLAR_W, 0>,
    &'static mut [u8],
>;

/// The second-write codec for `geo`, whose first writes use `first_spare` spare bytes (metadata
/// and page codec): the lowest-rate polar code at N = 2^16 with two attempts that fits the spare
/// left, its BCH sized to what the code protects. Call once, from start-up.
#[cfg(feature = "wom")]
fn second_write(geo: &Geometry, first_spare: usize) -> Option<SecondWrite> {
    use ftl_core::policy::PageCodec;
    use ftl_policies::wom::{fitted_codec, ftl_layout, WomScratch, WomSecondWrite};
    const PAGE: usize = crate::platform::GEO.raw_page_bytes() as usize;
    let layout = ftl_layout(geo, first_spare)?;
    let cw = geo.ecc.codeword_bytes as usize;
    // The ECC's length depends on the bytes it protects, which depend on the fitted code.
    let mut ecc_len = 0;
    for _ in 0..4 {
        let codec = fitted_codec::<POLAR_W>(layout, 16, 2, 1, ecc_len).ok()?;
        let ecc = BchPageCodec::with_tables(&BCH, cw, codec.plan().protected_len).ok()?;
        if ecc.spare_len() != ecc_len {
            ecc_len = ecc.spare_len();
            continue;
        }
        let scratch = &mut static_slice_of!(WomScratch<POLAR_W, 0>; 1; 1; WomScratch::new())[0];
        let a = static_slice!(u8; PAGE; PAGE; 0);
        let b = static_slice!(u8; PAGE; PAGE; 0);
        return WomSecondWrite::new(codec, ecc, scratch, a, b).ok();
    }
    None
}

/// Entries per fingerprint-store bucket (4 KiB buckets).
#[cfg(feature = "dedup")]
pub const DEDUP_K: usize = ftl_policies::dedup::ENTRIES_4K;

/// How the deduplication memory is split.
#[cfg(feature = "dedup")]
#[derive(Copy, Clone, Debug)]
pub struct DedupSizes {
    /// 4 KiB buckets of the fingerprint store (`DEDUP_K` entries each).
    pub buckets: usize,
    /// Segments of the store.
    pub segments: usize,
    /// Slots of the fingerprint-location table (a power of two above the entry capacity).
    pub locations: usize,
    /// Virtual pages (contents shared at once): one per store entry.
    pub virtual_pages: usize,
    /// Slots of the virtual map's reverse table.
    pub reverse: usize,
    /// Pending share records (one page of them).
    pub pending: usize,
}

#[cfg(feature = "dedup")]
impl DedupSizes {
    /// Bytes of RAM these sizes take.
    pub const fn bytes(&self) -> usize {
        self.buckets * (size_of::<ftl_policies::dedup::Bucket<DEDUP_K>>() + 4)
            + self.segments * size_of::<ftl_policies::dedup::Segment>()
            + self.locations * size_of::<ftl_core::dedup::table::Slot<ftl_policies::dedup::Fingerprint>>()
            + self.virtual_pages * size_of::<ftl_core::dedup::vmap::VirtualEntry>()
            + self.reverse * size_of::<ftl_core::dedup::table::Slot<u32>>()
            + self.pending * size_of::<ftl_core::dedup::shares::ShareRecord>()
    }
}

/// The largest deduplication memory (in whole buckets) that fits `budget` bytes for pages of
/// `page_bytes`; at least one bucket (a platform whose budget is smaller fails to build: see
/// [`DEDUP`]). No pre-hash table: every written page is fingerprinted with SHA-1.
#[cfg(feature = "dedup")]
pub const fn dedup_sizes(budget: usize, page_bytes: u32) -> DedupSizes {
    let mut b = 1;
    loop {
        let next = dedup_sizes_for(b + 1, page_bytes);
        if next.bytes() > budget {
            return dedup_sizes_for(b, page_bytes);
        }
        b += 1;
    }
}

#[cfg(feature = "dedup")]
const fn dedup_sizes_for(buckets: usize, page_bytes: u32) -> DedupSizes {
    let entries = buckets * DEDUP_K;
    // A power of two above twice the entries (short probes).
    let table = (2 * entries + 1).next_power_of_two();
    DedupSizes {
        buckets,
        segments: if buckets < 1024 { buckets } else { 1024 },
        locations: table,
        virtual_pages: entries,
        reverse: table,
        pending: ftl_core::dedup::shares::page_capacity(page_bytes),
    }
}

/// The deduplication memory of this platform (`platform::DEDUP_RAM` bytes, 2 KiB pages).
#[cfg(feature = "dedup")]
pub const DEDUP: DedupSizes = {
    let s = dedup_sizes(crate::platform::DEDUP_RAM, 2048);
    assert!(
        s.bytes() <= crate::platform::DEDUP_RAM,
        "DEDUP_RAM holds less than one 4 KiB bucket and its tables"
    );
    s
};

/// The platform's deduplication buffers (made by [`dedup_parts!`] in the platform's start-up,
/// in the RAM section it chooses).
#[cfg(feature = "dedup")]
pub struct DedupParts {
    /// See [`DedupSizes`].
    pub buckets: &'static mut [ftl_policies::dedup::Bucket<DEDUP_K>],
    /// One per bucket.
    pub bucket_list: &'static mut [u32],
    /// See [`DedupSizes`].
    pub segments: &'static mut [ftl_policies::dedup::Segment],
    /// See [`DedupSizes`].
    pub locations: &'static mut [ftl_core::dedup::table::Slot<ftl_policies::dedup::Fingerprint>],
    /// See [`DedupSizes`].
    pub virtual_entries: &'static mut [ftl_core::dedup::vmap::VirtualEntry],
    /// See [`DedupSizes`].
    pub reverse: &'static mut [ftl_core::dedup::table::Slot<u32>],
    /// See [`DedupSizes`].
    pub pending: &'static mut [ftl_core::dedup::shares::ShareRecord],
}

/// `dedup_parts!(#[link_section = ...])`: the [`DedupParts`] of [`DEDUP`], in static buffers
/// (in the given section). Expand once, in start-up.
#[cfg(feature = "dedup")]
macro_rules! dedup_parts {
    ($(#[$attr:meta])*) => {{
        use ftl_core::dedup::{shares::ShareRecord, table::Slot, vmap::VirtualEntry};
        use ftl_policies::dedup::{Bucket, Fingerprint, Segment};
        const S: $crate::bundle::DedupSizes = $crate::bundle::DEDUP;
        $crate::bundle::DedupParts {
            buckets: static_slice_of!(
                $(#[$attr])* Bucket<{ $crate::bundle::DEDUP_K }>; S.buckets; S.buckets; Bucket::EMPTY
            ),
            bucket_list: static_slice!($(#[$attr])* u32; S.buckets; S.buckets; 0),
            segments: static_slice!($(#[$attr])* Segment; S.segments; S.segments; Segment::EMPTY),
            locations: static_slice!(
                $(#[$attr])* Slot<Fingerprint>; S.locations; S.locations;
                Slot { key: 0, value: Fingerprint([0; 20]) }
            ),
            virtual_entries: static_slice!(
                $(#[$attr])* VirtualEntry; S.virtual_pages; S.virtual_pages; VirtualEntry::EMPTY
            ),
            reverse: static_slice!($(#[$attr])* Slot<u32>; S.reverse; S.reverse; Slot { key: 0, value: 0 }),
            pending: static_slice!($(#[$attr])* ShareRecord; S.pending; S.pending; ShareRecord::EMPTY),
        }
    }};
}

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

/// The memory of the attachments (the NV cache's region and its RAM index with `cdm`; the
/// content index and the virtual map with `dedup`).
pub struct AttachBuffers {
    #[cfg(feature = "dedup")]
    index: ftl_policies::dedup::CaftlIndex<'static, DEDUP_K>,
    #[cfg(feature = "dedup")]
    virtual_entries: &'static mut [ftl_core::dedup::vmap::VirtualEntry],
    #[cfg(feature = "dedup")]
    reverse: &'static mut [ftl_core::dedup::table::Slot<u32>],
    #[cfg(feature = "dedup")]
    pending: &'static mut [ftl_core::dedup::shares::ShareRecord],
    #[cfg(feature = "wom")]
    wom: SecondWrite,
    #[cfg(feature = "wom")]
    reuse: WomMemory,
    #[cfg(feature = "cdm")]
    nvm: ftl_core::cdm::SliceNvm<'static>,
    #[cfg(feature = "cdm")]
    slots: &'static mut [ftl_core::cdm::Slot],
    #[cfg(feature = "cdm")]
    index: &'static mut [u32],
}

/// The second writes' own memory.
#[cfg(feature = "wom")]
struct WomMemory {
    second: &'static mut [u32],
    pair: &'static mut [u32],
    state: &'static mut [u8],
    page_a: &'static mut [u8],
    page_b: &'static mut [u8],
    page_c: &'static mut [u8],
    cfg: ftl_core::reuse::ReuseConfig,
}

impl AttachBuffers {
    /// Second writes on the platform's chip (`crate::platform::GEO`) with FTL configuration
    /// `cfg`; `None` if no polar code fits its spare. Call once, from start-up.
    #[cfg(feature = "wom")]
    pub fn new(cfg: &ftl_core::Config) -> Option<Self> {
        use ftl_core::policy::PageCodec;
        const GEO: Geometry = crate::platform::GEO;
        const LAY: ftl_core::reuse::ReuseLayout = ftl_core::reuse::ReuseLayout::new(&GEO);
        let first_spare = ftl_core::meta::META_LEN + codec(&GEO)?.spare_len();
        Some(AttachBuffers {
            wom: second_write(&GEO, first_spare)?,
            reuse: WomMemory {
                second: static_slice!(u32; LAY.second_words; LAY.second_words; 0),
                pair: static_slice!(u32; LAY.blocks; LAY.blocks; u32::MAX),
                state: static_slice!(u8; LAY.blocks; LAY.blocks; 0),
                page_a: static_slice!(u8; LAY.page_buf; LAY.page_buf; 0),
                page_b: static_slice!(u8; LAY.page_buf; LAY.page_buf; 0),
                page_c: static_slice!(u8; LAY.page_buf; LAY.page_buf; 0),
                cfg: ftl_core::reuse::ReuseConfig::paper(&GEO, cfg),
            },
        })
    }

    /// No attachment.
    #[cfg(not(any(feature = "cdm", feature = "dedup", feature = "wom")))]
    pub fn new() -> Self {
        AttachBuffers {}
    }

    /// The deduplication index over `p` (no pre-hash: every page gets a SHA-1); `None` if the
    /// store refuses the sizes.
    #[cfg(feature = "dedup")]
    pub fn new(p: DedupParts) -> Option<Self> {
        use ftl_policies::dedup::{Accel, CaftlIndex, FingerprintStore, StoreMemory};
        let store = FingerprintStore::new(
            StoreMemory {
                buckets: p.buckets,
                bucket_list: p.bucket_list,
                segments: p.segments,
                crc_slots: &mut [],
            },
            Accel::ALL,
        )
        .ok()?;
        let index = CaftlIndex::new(store, false, p.locations).ok()?;
        Some(AttachBuffers {
            index,
            virtual_entries: p.virtual_entries,
            reverse: p.reverse,
            pending: p.pending,
        })
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
        #[cfg(feature = "dedup")]
        {
            use ftl_core::dedup::{Dedup, DedupMemory, DedupSettings};
            Some(Dedup {
                memory: DedupMemory {
                    virtual_entries: &mut *self.virtual_entries,
                    reverse_slots: &mut *self.reverse,
                    pending: &mut *self.pending,
                },
                index: &mut self.index,
                settings: DedupSettings::default(),
            })
        }
        #[cfg(feature = "wom")]
        {
            use ftl_core::reuse::{Reuse, ReuseMemory};
            let m = &mut self.reuse;
            Some(Reuse::new(
                &mut self.wom,
                ReuseMemory {
                    second: &mut *m.second,
                    pair: &mut *m.pair,
                    state: &mut *m.state,
                    page_a: &mut *m.page_a,
                    page_b: &mut *m.page_b,
                    page_c: &mut *m.page_c,
                },
                m.cfg,
            ))
        }
        #[cfg(not(any(feature = "cdm", feature = "dedup", feature = "wom")))]
        Some(())
    }
}

/// The mapping table: ftl-core's cached map (the map in map pages on flash behind a RAM cache of
/// the size the platform picks, no valid-page bitmap), the default.
#[cfg(not(flat_map))]
pub type AppMap<'a> = ftl_core::CachedMap<'a>;
/// The mapping table with `cdm`, `dedup`, `wom` or `flat-map`: the flat map (4 bytes per logical
/// page in RAM, and the valid-page bitmap). ftl-core refuses those techniques on the cached map
/// (`Error::Unsupported`), so their builds keep this one; `eti` and `flex-ecc` run on the cached
/// map.
#[cfg(flat_map)]
pub type AppMap<'a> = FlatMap<'a>;

/// Name of the map, for the log.
pub const MAP_NAME: &str = if cfg!(flat_map) {
    "flat (4 bytes per logical page in RAM)"
} else {
    "cached (map pages on flash, RAM cache)"
};

/// The sizes of the buffers the map borrows, and of the valid-page bitmap (which only the flat
/// map needs: the cached map decides validity at GC from the spare and the map).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct MapLayout {
    /// Words of the flat map (0 with the cached map).
    pub flat_words: usize,
    /// The cached map's buffers (all 0 with the flat map).
    pub cached: CachedMapLayout,
    /// Words of the valid-page bitmap (0 with the cached map).
    pub valid_words: usize,
}

impl MapLayout {
    /// The layout of [`AppMap`] for `cfg` on `geo`, with about `cache_bytes` of cache for the
    /// cached map (read lines and dirty-entry buffer; ignored by the flat map).
    pub const fn new(geo: &Geometry, cfg: &Config, cache_bytes: usize) -> Self {
        let lay = RamLayout::new(geo, cfg);
        if cfg!(flat_map) {
            MapLayout {
                flat_words: lay.map_words,
                cached: CachedMapLayout { lines: 0, dirty_slots: 0, dir_words: 0, io_bytes: 0 },
                valid_words: lay.valid_words,
            }
        } else {
            MapLayout {
                flat_words: 0,
                cached: CachedMapLayout::new(geo, cfg.logical_pages, cache_bytes),
                valid_words: 0,
            }
        }
    }

    /// Bytes of the cache proper: read lines and dirty-entry buffer (0 with the flat map).
    pub const fn cache_bytes(&self) -> usize {
        self.cached.lines * size_of::<MapLine>() + self.cached.dirty_slots * size_of::<DirtyEntry>()
    }

    /// Bytes of everything the map borrows (and the bitmap).
    pub const fn bytes(&self) -> usize {
        4 * self.flat_words + self.cached.total_bytes() + 4 * self.valid_words
    }
}

/// The map's buffers (made by [`map_buffers!`] in the platform's start-up); those the map in use
/// does not need are empty.
pub struct MapBuffers {
    /// The flat map's entries.
    pub flat: &'static mut [u32],
    /// The cached map's read lines.
    pub lines: &'static mut [MapLine],
    /// The cached map's dirty-entry buffer.
    pub dirty: &'static mut [DirtyEntry],
    /// The cached map's directory.
    pub dir: &'static mut [u32],
    /// The cached map's I/O buffer (one raw page).
    pub io: &'static mut [u8],
}

impl MapBuffers {
    /// Whether the buffers hold `lay`.
    pub fn fits(&self, lay: &MapLayout) -> bool {
        let c = &lay.cached;
        self.flat.len() >= lay.flat_words
            && self.lines.len() >= c.lines
            && self.dirty.len() >= c.dirty_slots
            && self.dir.len() >= c.dir_words
            && self.io.len() >= c.io_bytes
    }

    /// The map of `logical_pages` on `geo` over the prefixes `lay` names (call only after
    /// [`Self::fits`]); `None` if the map refuses them.
    pub fn map(&mut self, lay: &MapLayout, geo: &Geometry, logical_pages: u32) -> Option<AppMap<'_>> {
        #[cfg(flat_map)]
        {
            let _ = (geo, logical_pages);
            Some(FlatMap::new(&mut self.flat[..lay.flat_words]))
        }
        #[cfg(not(flat_map))]
        {
            let c = &lay.cached;
            ftl_core::CachedMap::new(
                &mut self.lines[..c.lines],
                &mut self.dirty[..c.dirty_slots],
                &mut self.dir[..c.dir_words],
                &mut self.io[..c.io_bytes],
                geo,
                logical_pages,
            )
            .ok()
        }
    }
}

/// `map_buffers!(LAYOUT; flat: #[attr]*; cached: #[attr]*)`: the [`MapBuffers`] of the const
/// [`MapLayout`] `LAYOUT` in static buffers, the flat map's in the sections of the first
/// attributes, the cached map's in those of the second. Expand once, in start-up.
macro_rules! map_buffers {
    ($lay:expr; flat: $(#[$flat:meta])*; cached: $(#[$cached:meta])*) => {{
        use ftl_core::{MapLine, NO_ENTRY};
        const L: $crate::bundle::MapLayout = $lay;
        $crate::bundle::MapBuffers {
            flat: static_slice!($(#[$flat])* u32; L.flat_words; L.flat_words; 0),
            lines: static_slice!($(#[$cached])* MapLine; L.cached.lines; L.cached.lines; MapLine::EMPTY),
            dirty: static_slice!(
                $(#[$cached])* ftl_core::DirtyEntry; L.cached.dirty_slots; L.cached.dirty_slots; NO_ENTRY
            ),
            dir: static_slice!($(#[$cached])* u32; L.cached.dir_words; L.cached.dir_words; 0),
            io: static_slice!($(#[$cached])* u8; L.cached.io_bytes; L.cached.io_bytes; 0),
        }
    }};
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
    ("wom", cfg!(feature = "wom"), true),
    ("dedup", cfg!(feature = "dedup"), true),
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
