//! Mount with second writes: what `recovery` calls when second writes are on.
//!
//! 1. The survey reads the whole spare of page 0 of every block (still one read each): a whole
//!    activation marker there makes the block a pair's plane-0 half ([`Ftl::reuse_survey`]).
//! 2. [`Ftl::reuse_scan`]: for each marked block still holding data, the spare of every other
//!    page is read; a plane-0 half whose metadata checks out and whose partner
//!    half (read too) names it back with the same sequence number and logical page is a second
//!    write: both halves get their bit and the block map its pair. A same-block half
//!    (`SW_SAME_BLOCK`) names its partner's offset in the block, above its own; the block is its
//!    own partner, and a pair that would interleave with one taken before is not taken (the FTL
//!    never writes one; `halves` pairs a block's second-write pages up in offset order). Plane-0 blocks with second
//!    writes newer than the checkpoint are replayed ([`Ftl::reuse_load_head`] walks them in
//!    offset order, which is their sequence order) in the k-way merge with the other pages.
//! 3. The newest replayed item, if a second write, is verified by decoding it; a torn one is
//!    rolled back and its metadata voided in both halves ([`Ftl::reuse_second_whole`],
//!    [`Ftl::reuse_rollback`]).
//! 4. [`Ftl::reuse_rebuild_valid`]: the plane-1 half of every mapped second write gets its
//!    valid bit and counts in its block.
//! 5. [`Ftl::reuse_after_mount`]: blocks with any second-write cells programmed are reused
//!    (GC erases them); other recycled blocks are used blocks again. No pair is active.
//!
//! Cost: `pages_per_block` spare reads per marked block (at most the recycled + reused cap),
//! plus one per second write found, plus the replay.

use nand_hal::{BlockId, NandFlash, PageId};

use super::{
    pair_of, ReuseState, SwMeta, SwState, A_SIDE, HALF_MARKER, M_MARKED, M_REPLAY, M_TOUCHED, STATE_MASK,
    SW_META_LEN, SW_META_READS,
};
use crate::blocks::BlockState;
use crate::map::MappingTable;
use crate::policy::PolicySet;
use crate::{Error, Ftl};

impl<N: NandFlash, P: PolicySet, M: MappingTable> Ftl<'_, N, P, M> {
    /// Forgets every reuse state (start of mount).
    pub(crate) fn reuse_reset(&mut self) {
        if let Some(r) = self.ext.reuse.as_mut() {
            r.reset();
        }
    }

    fn mount_bits(&mut self, b: BlockId, bits: u8, on: bool) {
        if let Some(x) = self.ext.reuse.as_mut().and_then(|r| r.mem.state.get_mut(b.0 as usize)) {
            if on {
                *x |= bits;
            } else {
                *x &= !bits;
            }
        }
    }

    fn has_mount_bits(&self, b: BlockId, bits: u8) -> bool {
        self.ext.reuse.as_ref().and_then(|r| r.mem.state.get(b.0 as usize)).is_some_and(|x| x & bits != 0)
    }

    /// Step 1: the survey read page 0's whole spare of `b` into the page buffer. Metadata that
    /// does not check out is read again (up to [`SW_META_READS`] reads: raw bit errors beyond
    /// what its code corrects are drawn anew per read).
    pub(crate) fn reuse_survey(&mut self, b: BlockId) -> Result<(), Error> {
        if self.ext.reuse.is_none() {
            return Ok(());
        }
        let d = self.geo.data_bytes as usize;
        let sp = self.geo.spare_bytes as usize;
        let mut state = SwMeta::decode(&self.buf[d + sp - SW_META_LEN..d + sp]);
        for _ in 1..SW_META_READS {
            if state != SwState::Invalid {
                break;
            }
            self.counters.nand_reads += 1;
            self.nand.read_spare(self.geo.page(b, 0), &mut self.buf[d..d + sp])?;
            state = SwMeta::decode(&self.buf[d + sp - SW_META_LEN..d + sp]);
        }
        match state {
            SwState::Erased => {}
            SwState::Valid(m) if m.half == HALF_MARKER => self.mount_bits(b, M_MARKED | M_TOUCHED, true),
            _ => self.mount_bits(b, M_TOUCHED, true),
        }
        Ok(())
    }

    /// The second-write metadata of `page`, read again while it does not check out (up to
    /// [`SW_META_READS`] reads).
    fn read_sw_meta(&mut self, page: PageId) -> Result<SwState, Error> {
        let d = self.geo.data_bytes as usize;
        let sp = self.geo.spare_bytes as usize;
        let mut state = SwState::Invalid;
        for _ in 0..SW_META_READS {
            self.counters.nand_reads += 1;
            self.nand.read_spare(page, &mut self.buf[d..d + sp])?;
            state = SwMeta::decode(&self.buf[d + sp - SW_META_LEN..d + sp]);
            if state != SwState::Invalid {
                break;
            }
        }
        Ok(state)
    }

    /// Step 2: finds the second writes in the blocks the checkpoint recorded.
    pub(crate) fn reuse_scan(&mut self, ckpt_seq: u64) -> Result<(), Error> {
        if self.ext.reuse.is_none() {
            return Ok(());
        }
        let ppb = self.geo.pages_per_block;
        for b in 0..self.geo.total_blocks() {
            let b = BlockId(b);
            if !self.has_mount_bits(b, M_MARKED) || self.blocks.state(b) != BlockState::Used {
                continue;
            }
            let plane = self.geo.plane_index(b);
            // Same-block pairs never interleave: the higher offset of the last one taken.
            let mut last_b = 0;
            for i in 1..ppb {
                let m = match self.read_sw_meta(self.geo.page(b, i))? {
                    SwState::Erased => continue,
                    SwState::Invalid => {
                        self.mount_bits(b, M_TOUCHED, true);
                        continue;
                    }
                    SwState::Valid(m) => m,
                };
                self.mount_bits(b, M_TOUCHED, true);
                if m.same_block {
                    // Both halves here: the other at offset `partner`, above this one.
                    let j = m.partner;
                    if m.half != 0 || i <= last_b || j <= i || j >= ppb {
                        continue;
                    }
                    let whole = match self.read_sw_meta(self.geo.page(b, j))? {
                        SwState::Valid(x) => {
                            x.half == 1 && x.same_block && x.seq == m.seq && x.lpn == m.lpn && x.partner == i
                        }
                        _ => false,
                    };
                    if !whole {
                        continue;
                    }
                    last_b = j;
                    if m.seq > ckpt_seq {
                        self.mount_bits(b, M_REPLAY, true);
                    }
                    if let Some(r) = self.ext.reuse.as_mut() {
                        r.set_second(self.geo.page(b, i), true);
                        r.set_second(self.geo.page(b, j), true);
                        r.mem.pair[b.0 as usize] = b.0;
                    }
                    continue;
                }
                let pb = BlockId(m.partner);
                // The partner: the next plane of the pair, or (same-plane pairs) this plane.
                if m.half != 0
                    || !self.geo.contains_block(pb)
                    || pb == b
                    || !((self.geo.plane_index(pb) == plane + 1 && pair_of(plane).1)
                        || self.geo.plane_index(pb) == plane)
                {
                    continue;
                }
                let whole = match self.read_sw_meta(self.geo.page(pb, i))? {
                    SwState::Valid(x) => {
                        x.half == 1 && !x.same_block && x.seq == m.seq && x.lpn == m.lpn && x.partner == b.0
                    }
                    _ => false,
                };
                if !whole {
                    continue;
                }
                self.mount_bits(pb, M_TOUCHED, true);
                if m.seq > ckpt_seq {
                    self.mount_bits(b, M_REPLAY, true);
                }
                self.mount_bits(b, A_SIDE, true);
                if let Some(r) = self.ext.reuse.as_mut() {
                    r.set_second(self.geo.page(b, i), true);
                    r.set_second(self.geo.page(pb, i), true);
                    r.mem.pair[b.0 as usize] = pb.0;
                    r.mem.pair[pb.0 as usize] = b.0;
                }
            }
        }
        Ok(())
    }

    /// Whether block `b` has second writes newer than the checkpoint to replay.
    pub(crate) fn reuse_replays(&self, b: BlockId) -> bool {
        self.has_mount_bits(b, M_REPLAY)
    }

    /// The next second write newer than the checkpoint in block `block` from offset `page`:
    /// (offset, sequence number, logical page).
    pub(crate) fn reuse_load_head(
        &mut self,
        block: u32,
        page: u32,
        ckpt_seq: u64,
    ) -> Result<Option<(u32, u64, u32)>, Error> {
        for o in page..self.geo.pages_per_block {
            let p = self.geo.page(BlockId(block), o);
            if !self.reuse_is_second(p) {
                continue;
            }
            if let SwState::Valid(m) = self.read_sw_meta(p)? {
                if m.half == 0 && m.seq > ckpt_seq {
                    return Ok(Some((o, m.seq, m.lpn)));
                }
            }
        }
        Ok(None)
    }

    /// Bytes of page 0's spare the survey reads: with second writes, the whole spare (page 0 may
    /// carry a pair's activation marker).
    pub(crate) fn reuse_survey_len(&self) -> usize {
        if self.reuse_on() {
            self.geo.spare_bytes as usize
        } else {
            crate::meta::META_LEN
        }
    }

    /// Step 4's check of a replayed page, if it is a second write: `Some(Some(0))` if it decodes.
    pub(crate) fn reuse_newest_check(&mut self, page: PageId) -> Result<Option<Option<u32>>, Error> {
        if !self.reuse_is_second(page) {
            return Ok(None);
        }
        Ok(Some(self.reuse_second_whole(page)?.then_some(0)))
    }

    /// Step 4's roll-back of a torn replayed page, if it is a second write (`Some(complete)`).
    pub(crate) fn reuse_void_newest(&mut self, page: PageId) -> Option<bool> {
        self.reuse_is_second(page).then(|| self.reuse_rollback(page))
    }

    /// Step 3: whether the second write at `page` decodes.
    fn reuse_second_whole(&mut self, page: PageId) -> Result<bool, Error> {
        let d = self.geo.data_bytes as usize;
        let tmp = core::mem::take(&mut self.buf);
        let r = self.read_second(page, None, &mut tmp[..d], false);
        self.buf = tmp;
        match r {
            Ok(_) => Ok(true),
            Err(Error::Uncorrectable { .. }) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Step 3: rolls the torn second write at `page` back (its metadata voided in both halves).
    /// False if a void did not complete (mount then checkpoints, which makes it moot).
    fn reuse_rollback(&mut self, page: PageId) -> bool {
        match self.halves(page) {
            Some((a, b)) => self.void_second(a, b),
            None => true,
        }
    }

    /// Step 4: valid bits and counts of the plane-1 halves of mapped second writes.
    pub(crate) fn reuse_rebuild_valid(&mut self) -> Result<(), Error> {
        if self.ext.reuse.is_none() {
            return Ok(());
        }
        for l in 0..self.map.len() {
            let Some(p) = self.map.get(l) else { continue };
            if !self.reuse_is_second(p) {
                continue;
            }
            let Some((a, b)) = self.halves(p) else { return Err(Error::Corrupt) };
            let bb = self.geo.block_of(b);
            if a != p || self.blocks.state(bb) != BlockState::Used {
                return Err(Error::Corrupt);
            }
            let w = &mut self.valid[b.0 as usize / 32];
            let bit = 1u32 << (b.0 % 32);
            if *w & bit != 0 {
                return Err(Error::Corrupt);
            }
            *w |= bit;
            let v = self.blocks.get(bb).valid();
            self.blocks.raw_set_valid(bb, v + 1);
        }
        Ok(())
    }

    /// Step 5: reuse states from what the scan found.
    pub(crate) fn reuse_after_mount(&mut self) {
        let geo = self.geo;
        for b in 0..geo.total_blocks() {
            let b = BlockId(b);
            let touched = self.has_mount_bits(b, M_TOUCHED);
            self.mount_bits(b, !(STATE_MASK | A_SIDE), false);
            if touched && self.blocks.state(b) == BlockState::Used {
                if let Some(r) = self.ext.reuse.as_mut() {
                    r.set_state(&geo, b, ReuseState::Reused);
                }
            }
        }
    }
}
