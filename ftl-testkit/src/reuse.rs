//! Owned buffers behind [`ftl_core::reuse::ReuseMemory`] (second writes, feature `wom`), sized by
//! [`ftl_core::reuse::ReuseLayout`].

use ftl_core::reuse::{Reuse, ReuseConfig, ReuseLayout, ReuseMemory, SecondWriteCodec};
use nand_hal::Geometry;

/// Owned buffers behind [`ReuseMemory`].
#[derive(Clone, Debug)]
pub struct ReuseBuffers {
    second: Vec<u32>,
    pair: Vec<u32>,
    state: Vec<u8>,
    page_a: Vec<u8>,
    page_b: Vec<u8>,
    page_c: Vec<u8>,
    slots: Vec<u8>,
}

impl ReuseBuffers {
    /// Buffers for `geometry`.
    pub fn new(geometry: &Geometry) -> Self {
        let l = ReuseLayout::new(geometry);
        ReuseBuffers {
            second: vec![0; l.second_words],
            pair: vec![0; l.blocks],
            state: vec![0; l.blocks],
            page_a: vec![0; l.page_buf],
            page_b: vec![0; l.page_buf],
            page_c: vec![0; l.page_buf],
            slots: vec![0; l.slot_bytes(geometry)],
        }
    }

    /// Second writes over these buffers, with a prefetch slot per plane pair if `slots`
    /// ([`Reuse::with_prefetch_slots`]).
    pub fn reuse<'a>(
        &'a mut self,
        codec: &'a mut (dyn SecondWriteCodec + Send),
        cfg: ReuseConfig,
        slots: bool,
    ) -> Reuse<'a> {
        let ReuseBuffers { second, pair, state, page_a, page_b, page_c, slots: s } = self;
        let mem = ReuseMemory { second, pair, state, page_a, page_b, page_c };
        let r = Reuse::new(codec, mem, cfg);
        if slots {
            r.with_prefetch_slots(s)
        } else {
            r
        }
    }

    /// The memory, borrowed for one FTL instance.
    pub fn memory(&mut self) -> ReuseMemory<'_> {
        ReuseMemory {
            second: &mut self.second,
            pair: &mut self.pair,
            state: &mut self.state,
            page_a: &mut self.page_a,
            page_b: &mut self.page_b,
            page_c: &mut self.page_c,
        }
    }
}
