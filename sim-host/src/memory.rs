//! Owned buffers for the FTL on the host: the `Vec`s behind the slices `ftl_core::Memory` and
//! `ftl_core::FlatMap` borrow, sized by `ftl_core::RamLayout`.

use ftl_core::{BlockInfo, Config, FlatMap, Memory, RamLayout};
use nand_hal::Geometry;

/// Every buffer an FTL needs, owned.
#[derive(Clone, Debug)]
pub struct FtlMemory {
    map: Vec<u32>,
    valid: Vec<u32>,
    blocks: Vec<BlockInfo>,
    heads: Vec<u32>,
    page: Vec<u8>,
}

impl FtlMemory {
    /// Buffers for `geometry` and `config`.
    pub fn new(geometry: &Geometry, config: &Config) -> Self {
        let lay = RamLayout::new(geometry, config);
        FtlMemory {
            map: vec![0; lay.map_words],
            valid: vec![0; lay.valid_words],
            blocks: vec![BlockInfo::EMPTY; lay.blocks],
            heads: vec![0; lay.list_heads],
            page: vec![0; lay.page_buf],
        }
    }

    /// The flat map and the rest, borrowed for one FTL instance.
    pub fn parts(&mut self) -> (FlatMap<'_>, Memory<'_>) {
        (
            FlatMap::new(&mut self.map),
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
            + self.valid.len() * 4
            + self.blocks.len() * core::mem::size_of::<BlockInfo>()
            + self.heads.len() * 4
            + self.page.len()
    }
}
