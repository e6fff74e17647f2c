//! Host-side owner of the buffers an FTL instance borrows: the `ftl_core::Memory` tables and the
//! map (flat, or a flash-resident map with a cache of a chosen size), sized by
//! `ftl_core::RamLayout` and `ftl_core::CachedMapLayout`.

use ftl_core::{
    AnyMap, BlockInfo, CachedMap, CachedMapLayout, Config, DirtyEntry, FlatMap, MapLine, Memory, RamLayout,
    NO_ENTRY,
};
use nand_hal::Geometry;

/// Which map an instance uses.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum MapChoice {
    /// One word per logical page in RAM.
    Flat,
    /// The map on flash behind a cache of about this many bytes of lines.
    Cached {
        /// Bytes of cache lines.
        cache_bytes: usize,
    },
}

/// Buffers for one FTL instance (reused across remounts).
#[derive(Clone)]
pub struct FtlMemory {
    choice: MapChoice,
    geometry: Geometry,
    logical_pages: u32,
    map: Vec<u32>,
    lines: Vec<MapLine>,
    dirty: Vec<DirtyEntry>,
    io: Vec<u8>,
    valid: Vec<u32>,
    blocks: Vec<BlockInfo>,
    heads: Vec<u32>,
    page: Vec<u8>,
}

impl FtlMemory {
    /// Buffers for `geometry` and `config` with a flat map.
    pub fn new(geometry: &Geometry, config: &Config) -> Self {
        Self::with_map(geometry, config, MapChoice::Flat)
    }

    /// Buffers for `geometry` and `config` with the map `choice` names.
    pub fn with_map(geometry: &Geometry, config: &Config, choice: MapChoice) -> Self {
        let lay = RamLayout::new(geometry, config);
        let (map, lines, dirty, io) = match choice {
            MapChoice::Flat => (vec![0; lay.map_words], Vec::new(), Vec::new(), Vec::new()),
            MapChoice::Cached { cache_bytes } => {
                let c = CachedMapLayout::new(geometry, config.logical_pages, cache_bytes);
                (
                    vec![0; c.dir_words],
                    vec![MapLine::EMPTY; c.lines],
                    vec![NO_ENTRY; c.dirty_slots],
                    vec![0; c.io_bytes],
                )
            }
        };
        FtlMemory {
            choice,
            geometry: *geometry,
            logical_pages: config.logical_pages,
            map,
            lines,
            dirty,
            io,
            // The cached map runs without the valid-page bitmap (validity decided at GC).
            valid: if choice == MapChoice::Flat { vec![0; lay.valid_words] } else { Vec::new() },
            blocks: vec![BlockInfo::EMPTY; lay.blocks],
            heads: vec![0; lay.list_heads],
            page: vec![0; lay.page_buf],
        }
    }

    /// Lends (or stops lending) the extra page buffers of GC stripes
    /// (`ftl_core::RamLayout::gc_stripe_buf`): the page buffer is then `planes_per_lun` raw
    /// pages (one on a one-plane LUN).
    pub fn lend_gc_stripes(&mut self, on: bool) {
        let lay = RamLayout::new(&self.geometry, &self.config());
        let len = if on { lay.page_buf + lay.gc_stripe_buf } else { lay.page_buf };
        self.page.resize(len, 0);
    }

    /// Lends the extra page buffers of GC stripes ([`Self::lend_gc_stripes`]).
    pub fn with_gc_stripes(mut self, on: bool) -> Self {
        self.lend_gc_stripes(on);
        self
    }

    /// A configuration with this memory's logical pages (for its layout's page buffer sizes,
    /// which do not depend on anything else of it).
    fn config(&self) -> Config {
        Config { logical_pages: self.logical_pages, ..Config::for_utilization(&self.geometry, 500) }
    }

    /// The map this memory holds.
    pub fn map_choice(&self) -> MapChoice {
        self.choice
    }

    /// The map and the rest, borrowed for one FTL instance. A cached map whose sizes the
    /// geometry does not allow (pages not a multiple of 64 bytes) comes back as a flat map over
    /// no entries, which the FTL refuses with `Error::Memory`.
    pub fn parts(&mut self) -> (AnyMap<'_>, Memory<'_>) {
        let map = match self.choice {
            MapChoice::Flat => AnyMap::Flat(FlatMap::new(&mut self.map)),
            MapChoice::Cached { .. } => {
                match CachedMap::new(
                    &mut self.lines,
                    &mut self.dirty,
                    &mut self.map,
                    &mut self.io,
                    &self.geometry,
                    self.logical_pages,
                ) {
                    Ok(m) => AnyMap::Cached(m),
                    Err(_) => AnyMap::Flat(FlatMap::new(&mut [])),
                }
            }
        };
        (
            map,
            Memory {
                valid: &mut self.valid,
                blocks: &mut self.blocks,
                list_heads: &mut self.heads,
                page_buf: &mut self.page,
            },
        )
    }

    /// Bytes held.
    pub fn bytes(&self) -> usize {
        self.map.len() * 4
            + self.lines.len() * core::mem::size_of::<MapLine>()
            + self.dirty.len() * core::mem::size_of::<DirtyEntry>()
            + self.io.len()
            + self.valid.len() * 4
            + self.blocks.len() * core::mem::size_of::<BlockInfo>()
            + self.heads.len() * 4
            + self.page.len()
    }
}
