//! The block table: per-block state, erase count and valid-page count, and the intrusive lists
//! that make the hot operations O(1) or O(pages per block):
//! - per plane, a free list (erased blocks, and blocks waiting to be erased before use);
//! - per plane, one bucket list per valid count of used blocks, so greedy GC finds the block with
//!   the fewest valid pages by scanning at most `pages_per_block + 1` list heads;
//! - one retire list of blocks whose program failed: GC moves their data and marks them bad.
//!
//! Guarantee: every block is in exactly the list its state and valid count name (or in none, for
//! open, checkpoint, victim and bad blocks), and a plane's free count equals its free list length.

use nand_hal::{BlockId, Geometry};

use crate::config::MAX_TOTAL_PLANES;

const NIL: u32 = u32::MAX;
/// "No block" in a packed list link.
const NIL16: u16 = u16::MAX;
/// Largest erase count the table holds (20 bits); larger counts saturate, far beyond any NAND's
/// endurance.
pub const MAX_TABLE_ERASE_COUNT: u32 = (1 << 20) - 1;
/// Most blocks the table can link (`u16` list links, `u16::MAX` meaning none).
pub const MAX_BLOCKS: u32 = u16::MAX as u32;

/// The state of a block.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[repr(u8)]
pub enum BlockState {
    /// Erased and ready.
    Free = 0,
    /// Holds no live data but must be erased before use.
    Dirty = 1,
    /// A write frontier's open block.
    Open = 2,
    /// Closed, holding data.
    Used = 3,
    /// Holds the current checkpoint.
    Checkpoint = 4,
    /// Holds a checkpoint being written.
    CheckpointNew = 5,
    /// A program failed here: GC moves its data, then it is marked bad.
    Retiring = 6,
    /// Bad (factory or grown); never used.
    Bad = 7,
    /// Being collected by GC.
    Victim = 8,
    /// Holds the anchor (see [`crate::anchor`]): never allocated, never collected.
    Anchor = 9,
}

/// How worn a free block is for the allocator's picks when GC leaves its victims `Dirty`
/// (`dirty_wear`, multi-plane erases): its erase count once it is erased (a `Dirty` block's
/// count plus the erase it still needs), and whether it still needs it (on equal wear an erased
/// block goes first: one a multi-plane erase prepared, see `multiplane.rs`). Without it a block GC
/// left `Dirty` would look one erase cooler than it is and be handed out again and again
/// (measured: the static wear-leveling test's spread 123 instead of 48). Otherwise the plain
/// erase count (the baseline's rule, whose `Dirty` blocks are only released checkpoint blocks and
/// blocks a mount found empty).
#[inline]
pub fn wear_key(i: &BlockInfo, dirty_wear: bool) -> (u32, bool) {
    let dirty = dirty_wear && i.state() == BlockState::Dirty;
    (i.erase_count().saturating_add(dirty as u32), dirty)
}

/// Which free block an allocation takes (dynamic wear leveling, see `wear.rs`).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Pick {
    /// The least worn: for data expected to be rewritten soon (host data, checkpoints, map pages).
    Coolest,
    /// The most worn within [`WORN_PICK_MARGIN`] erases of the least worn: for data that has
    /// already outlived a block (GC and wear-leveling moves).
    Worn,
}

/// How far above a plane's least worn free block [`Pick::Worn`] may go. Without a cap, GC data
/// that dies young (hot pages still valid in a victim) returned the most worn block to the free
/// list again and again: on the shared traces with hot/cold separation the erase-count spread
/// rose by 35% (sum over 40 runs: 2,820 against 2,087 with every stream on the least worn);
/// with 8 by 5% (2,183), 16 by 10%, while 8 keeps the fix it is for (MT29F4G08 uniform at 93%:
/// most worn block 21 erases at a mean of 16, against 341 with every stream on the least worn; 4
/// gives 128, 2 gives 288).
pub const WORN_PICK_MARGIN: u32 = 8;

/// Flag: the block holds a journal page newer than the current checkpoint, so it must not be
/// erased before the next checkpoint.
pub const FLAG_LIVE_JOURNAL: u8 = 1;
/// Flag: the block is in the mount pool, the blocks a mount after a power cut reads (see
/// [`crate::pool`]).
pub const FLAG_POOL: u8 = 2;
/// Flag: the block was in the mount pool the newest record on flash lists, while a record for a
/// changed pool is being written.
pub const FLAG_POOL_OLD: u8 = 4;

/// One block-table entry: 12 bytes, 2-byte aligned, so the table costs `12 x blocks` bytes.
///
/// Packed as six `u16` words: `w[0..2]` hold the erase count (20 bits, saturating at
/// [`MAX_TABLE_ERASE_COUNT`]), the state (4 bits) and the flags (8 bits); `w[2]` the valid count;
/// `w[3]`, `w[4]` the list links (previous, next; `u16::MAX` for none, so at most
/// [`MAX_BLOCKS`] blocks, checked by `Config::validate`); `w[5]` is spare. During mount the links
/// and the spare word hold a 48-bit scratch value (a block's newest sequence number) while the
/// valid word holds a checkpoint page index.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[repr(C)]
pub struct BlockInfo {
    w: [u16; 6],
}

impl BlockInfo {
    /// An entry for a free block in no list, erase count 0.
    pub const EMPTY: BlockInfo = BlockInfo { w: [0, 0, 0, NIL16, NIL16, 0] };

    fn word0(&self) -> u32 {
        self.w[0] as u32 | (self.w[1] as u32) << 16
    }

    fn set_word0(&mut self, v: u32) {
        self.w[0] = v as u16;
        self.w[1] = (v >> 16) as u16;
    }

    /// Erases this block has seen (saturating at [`MAX_TABLE_ERASE_COUNT`]).
    #[inline]
    pub fn erase_count(&self) -> u32 {
        self.word0() & MAX_TABLE_ERASE_COUNT
    }

    fn set_erase_count(&mut self, ec: u32) {
        let w = self.word0() & !MAX_TABLE_ERASE_COUNT;
        self.set_word0(w | ec.min(MAX_TABLE_ERASE_COUNT));
    }

    /// Valid data pages in the block.
    #[inline]
    pub fn valid(&self) -> u16 {
        self.w[2]
    }

    /// `FLAG_*` bits.
    #[inline]
    pub fn flags(&self) -> u8 {
        (self.word0() >> 24) as u8
    }

    fn set_flag_bits(&mut self, f: u8) {
        let w = self.word0() & 0x00FF_FFFF;
        self.set_word0(w | (f as u32) << 24);
    }

    fn set_state_raw(&mut self, s: BlockState) {
        let w = self.word0() & !(0xF << 20);
        self.set_word0(w | (s as u32) << 20);
    }

    fn prev(&self) -> u32 {
        link32(self.w[3])
    }

    fn next(&self) -> u32 {
        link32(self.w[4])
    }

    fn set_prev(&mut self, b: u32) {
        self.w[3] = link16(b);
    }

    fn set_next(&mut self, b: u32) {
        self.w[4] = link16(b);
    }

    /// The block's state.
    pub fn state(&self) -> BlockState {
        match (self.word0() >> 20) & 0xF {
            0 => BlockState::Free,
            1 => BlockState::Dirty,
            2 => BlockState::Open,
            3 => BlockState::Used,
            4 => BlockState::Checkpoint,
            5 => BlockState::CheckpointNew,
            6 => BlockState::Retiring,
            7 => BlockState::Bad,
            8 => BlockState::Victim,
            _ => BlockState::Anchor,
        }
    }
}

fn link32(l: u16) -> u32 {
    if l == NIL16 {
        NIL
    } else {
        l as u32
    }
}

fn link16(b: u32) -> u16 {
    if b >= MAX_BLOCKS {
        NIL16
    } else {
        b as u16
    }
}

/// `u32` list heads the block table needs for a geometry.
pub const fn list_heads(geometry: &Geometry) -> usize {
    (geometry.planes_per_lun * geometry.luns * (geometry.pages_per_block + 2) + 1) as usize
}

/// The block table over caller memory.
pub struct BlockTable<'m> {
    info: &'m mut [BlockInfo],
    heads: &'m mut [u32],
    geo: Geometry,
    free: [u32; MAX_TOTAL_PLANES],
    /// Free blocks with `FLAG_POOL`, per plane (recounted by `relink_all` after a mount).
    pool_free: [u32; MAX_TOTAL_PLANES],
    /// Rank `Dirty` free blocks by their erase count after their erase ([`wear_key`]): on while
    /// GC leaves its victims `Dirty` (multi-plane erases, see `multiplane.rs`).
    pub(crate) dirty_wear: bool,
}

impl<'m> BlockTable<'m> {
    /// A table over `info` (one per block) and `heads` ([`list_heads`] entries), all blocks
    /// `Bad` and in no list until the caller sets them up.
    pub fn new(geo: Geometry, info: &'m mut [BlockInfo], heads: &'m mut [u32]) -> Self {
        let mut t = BlockTable {
            info,
            heads,
            geo,
            free: [0; MAX_TOTAL_PLANES],
            pool_free: [0; MAX_TOTAL_PLANES],
            dirty_wear: false,
        };
        t.reset();
        t
    }

    /// Forgets everything: all blocks bad with erase count 0, all lists empty.
    pub fn reset(&mut self) {
        for i in self.info.iter_mut() {
            *i = BlockInfo::EMPTY;
            i.set_state_raw(BlockState::Bad);
        }
        self.heads.fill(NIL);
        self.free = [0; MAX_TOTAL_PLANES];
        self.pool_free = [0; MAX_TOTAL_PLANES];
    }

    /// Blocks in the table.
    pub fn len(&self) -> u32 {
        self.info.len() as u32
    }

    /// Whether the table is empty.
    pub fn is_empty(&self) -> bool {
        self.info.is_empty()
    }

    /// The entry of block `b`.
    #[inline]
    pub fn get(&self, b: BlockId) -> &BlockInfo {
        &self.info[b.0 as usize]
    }

    /// The state of block `b`.
    #[inline]
    pub fn state(&self, b: BlockId) -> BlockState {
        self.info[b.0 as usize].state()
    }

    /// Sets the erase count of `b`.
    pub fn set_erase_count(&mut self, b: BlockId, ec: u32) {
        self.info[b.0 as usize].set_erase_count(ec);
    }

    /// Counts one more erase of `b`.
    pub fn count_erase(&mut self, b: BlockId) {
        let i = &mut self.info[b.0 as usize];
        i.set_erase_count(i.erase_count().saturating_add(1));
    }

    /// Sets or clears flag bits of `b`.
    pub fn set_flags(&mut self, b: BlockId, flags: u8, on: bool) {
        let i = &mut self.info[b.0 as usize];
        let before = i.flags();
        let f = if on { before | flags } else { before & !flags };
        i.set_flag_bits(f);
        if (before ^ f) & FLAG_POOL != 0 && matches!(i.state(), BlockState::Free | BlockState::Dirty) {
            let p = self.plane(b) as usize;
            self.pool_free[p] = if on { self.pool_free[p] + 1 } else { self.pool_free[p].saturating_sub(1) };
        }
    }

    /// Clears `flags` on every block.
    pub fn clear_flags_everywhere(&mut self, flags: u8) {
        for i in self.info.iter_mut() {
            i.set_flag_bits(i.flags() & !flags);
        }
        if flags & FLAG_POOL != 0 {
            self.pool_free = [0; MAX_TOTAL_PLANES];
        }
    }

    /// Sets `flag` on up to `n` used blocks of `plane` that do not have it, fewest valid pages
    /// first; returns how many. O(blocks visited).
    pub fn flag_next_fewest_valid(&mut self, plane: u32, n: u32, flag: u8) -> u32 {
        let mut added = 0;
        for v in 0..=self.geo.pages_per_block {
            let mut cur = self.heads[self.bucket_head(plane, v)];
            while cur != NIL && added < n {
                let i = &mut self.info[cur as usize];
                if i.flags() & flag == 0 {
                    i.set_flag_bits(i.flags() | flag);
                    added += 1;
                }
                cur = i.next();
            }
            if added == n {
                break;
            }
        }
        added
    }

    /// Sets flag `to` on exactly the blocks that have flag `from` (`to` must not be `FLAG_POOL`).
    pub fn copy_flag(&mut self, from: u8, to: u8) {
        for i in self.info.iter_mut() {
            let f = if i.flags() & from != 0 { i.flags() | to } else { i.flags() & !to };
            i.set_flag_bits(f);
        }
    }

    /// Free blocks with `FLAG_POOL` in plane `plane` (O(1)).
    #[inline]
    pub fn pool_free_count(&self, plane: u32) -> u32 {
        self.pool_free[plane as usize]
    }

    /// Free blocks (free and dirty) in device-wide plane `plane`.
    #[inline]
    pub fn free_count(&self, plane: u32) -> u32 {
        self.free[plane as usize]
    }

    /// Free blocks in the whole device.
    pub fn total_free(&self) -> u32 {
        self.free.iter().sum()
    }

    fn plane(&self, b: BlockId) -> u32 {
        self.geo.plane_index(b)
    }

    fn bucket_head(&self, plane: u32, valid: u32) -> usize {
        (plane * (self.geo.pages_per_block + 2) + valid) as usize
    }

    fn free_head(&self, plane: u32) -> usize {
        (plane * (self.geo.pages_per_block + 2) + self.geo.pages_per_block + 1) as usize
    }

    fn retire_head(&self) -> usize {
        self.heads.len() - 1
    }

    /// The list head `b` belongs to in its current state, if any.
    fn list_of(&self, b: BlockId) -> Option<usize> {
        let i = &self.info[b.0 as usize];
        match i.state() {
            BlockState::Free | BlockState::Dirty => Some(self.free_head(self.plane(b))),
            // (A count above a block's pages can only come from a damaged checkpoint: clamped so
            // that it names this plane's fullest bucket, never another list.)
            BlockState::Used => {
                Some(self.bucket_head(self.plane(b), (i.valid() as u32).min(self.geo.pages_per_block)))
            }
            BlockState::Retiring => Some(self.retire_head()),
            _ => None,
        }
    }

    fn unlink(&mut self, b: BlockId) {
        if let Some(h) = self.list_of(b) {
            let (prev, next) = {
                let i = &self.info[b.0 as usize];
                (i.prev(), i.next())
            };
            if prev == NIL {
                self.heads[h] = next;
            } else {
                self.info[prev as usize].set_next(next);
            }
            if next != NIL {
                self.info[next as usize].set_prev(prev);
            }
            let i = &mut self.info[b.0 as usize];
            i.set_prev(NIL);
            i.set_next(NIL);
            if matches!(i.state(), BlockState::Free | BlockState::Dirty) {
                let pooled = i.flags() & FLAG_POOL != 0;
                let p = self.plane(b) as usize;
                self.free[p] -= 1;
                if pooled {
                    self.pool_free[p] = self.pool_free[p].saturating_sub(1);
                }
            }
        }
    }

    fn link(&mut self, b: BlockId) {
        if let Some(h) = self.list_of(b) {
            let old = self.heads[h];
            if old != NIL {
                self.info[old as usize].set_prev(b.0);
            }
            let i = &mut self.info[b.0 as usize];
            i.set_prev(NIL);
            i.set_next(old);
            self.heads[h] = b.0;
            if matches!(i.state(), BlockState::Free | BlockState::Dirty) {
                let pooled = i.flags() & FLAG_POOL != 0;
                let p = self.plane(b) as usize;
                self.free[p] += 1;
                if pooled {
                    self.pool_free[p] += 1;
                }
            }
        }
    }

    /// Moves `b` to `state`, keeping the lists right.
    pub fn set_state(&mut self, b: BlockId, state: BlockState) {
        self.unlink(b);
        self.info[b.0 as usize].set_state_raw(state);
        self.link(b);
    }

    /// Sets the valid count of `b`.
    pub fn set_valid(&mut self, b: BlockId, valid: u16) {
        self.unlink(b);
        self.info[b.0 as usize].w[2] = valid;
        self.link(b);
    }

    /// One more valid page in `b`.
    #[inline]
    pub fn inc_valid(&mut self, b: BlockId) {
        let v = self.info[b.0 as usize].valid().saturating_add(1);
        self.set_valid(b, v);
    }

    /// One valid page fewer in `b`.
    #[inline]
    pub fn dec_valid(&mut self, b: BlockId) {
        let v = self.info[b.0 as usize].valid().saturating_sub(1);
        self.set_valid(b, v);
    }

    /// The used block with the fewest valid pages (but fewer than a full block) in `plane`.
    pub fn min_valid(&self, plane: u32) -> Option<BlockId> {
        self.view(plane).min_valid()
    }

    /// The used block of `plane` with the fewest valid pages (fewer than a full block) among
    /// those without `flag`. O(blocks visited).
    pub fn min_valid_without(&self, plane: u32, flag: u8) -> Option<BlockId> {
        for v in 0..self.geo.pages_per_block {
            let mut cur = self.heads[self.bucket_head(plane, v)];
            while cur != NIL {
                let i = &self.info[cur as usize];
                if i.flags() & flag == 0 {
                    return Some(BlockId(cur));
                }
                cur = i.next();
            }
        }
        None
    }

    /// A used block of `plane` whose pages are all valid, if any.
    pub fn full_block(&self, plane: u32) -> Option<BlockId> {
        let h = self.heads[self.bucket_head(plane, self.geo.pages_per_block)];
        (h != NIL).then_some(BlockId(h))
    }

    /// A read-only view of one plane, for victim policies.
    pub fn view(&self, plane: u32) -> VictimView<'_> {
        VictimView {
            info: &*self.info,
            heads: &*self.heads,
            geo: self.geo,
            free: self.free[plane as usize],
            plane,
        }
    }

    /// The free block with the lowest erase count in `plane` (dynamic wear leveling).
    pub fn coolest_free(&self, plane: u32) -> Option<BlockId> {
        self.coolest_free_with(plane, 0, 0)
    }

    /// The free block with the highest erase count in `plane`, among those whose flags masked by
    /// `mask` equal `want` and at most [`WORN_PICK_MARGIN`] erases above the least worn of them.
    /// Counts are [`wear_key`]s (a `Dirty` block's after its erase; erased blocks first on ties).
    /// O(free blocks of the plane).
    pub fn worn_free_with(&self, plane: u32, mask: u8, want: u8) -> Option<BlockId> {
        let coolest =
            self.coolest_free_with(plane, mask, want).map(|b| wear_key(self.get(b), self.dirty_wear).0)?;
        let limit = coolest.saturating_add(WORN_PICK_MARGIN);
        let mut best: Option<(u32, (u32, bool))> = None;
        self.each_free(plane, |b, i| {
            let (ec, dirty) = wear_key(i, self.dirty_wear);
            let key = (ec, !dirty);
            if i.flags() & mask == want && ec <= limit && best.is_none_or(|(_, k)| key > k) {
                best = Some((b, key));
            }
        });
        best.map(|(b, _)| BlockId(b))
    }

    /// The free block with the lowest erase count in `plane` among those whose flags masked by
    /// `mask` equal `want` (`mask` 0: every free block), by [`wear_key`]. O(free blocks of the
    /// plane).
    pub fn coolest_free_with(&self, plane: u32, mask: u8, want: u8) -> Option<BlockId> {
        let mut best: Option<(u32, (u32, bool))> = None;
        self.each_free(plane, |b, i| {
            let key = wear_key(i, self.dirty_wear);
            if i.flags() & mask == want && best.is_none_or(|(_, k)| key < k) {
                best = Some((b, key));
            }
        });
        best.map(|(b, _)| BlockId(b))
    }

    fn each_free(&self, plane: u32, mut f: impl FnMut(u32, &BlockInfo)) {
        let mut cur = self.heads[self.free_head(plane)];
        while cur != NIL {
            let i = &self.info[cur as usize];
            f(cur, i);
            cur = i.next();
        }
    }

    /// Sets `flag` on up to `k` used blocks of `plane`, fewest valid pages first (the order
    /// greedy GC takes them in); returns how many did not have it. O(k + pages per block).
    pub fn flag_fewest_valid(&mut self, plane: u32, k: u32, flag: u8) -> u32 {
        let (mut left, mut added) = (k, 0);
        for v in 0..=self.geo.pages_per_block {
            let mut cur = self.heads[self.bucket_head(plane, v)];
            while cur != NIL && left > 0 {
                let i = &mut self.info[cur as usize];
                if i.flags() & flag == 0 {
                    i.set_flag_bits(i.flags() | flag);
                    added += 1;
                }
                left -= 1;
                cur = i.next();
            }
            if left == 0 {
                break;
            }
        }
        added
    }

    /// A block waiting to be retired, if any.
    pub fn next_retiring(&self) -> Option<BlockId> {
        let h = self.heads[self.retire_head()];
        (h != NIL).then_some(BlockId(h))
    }

    /// Mount-time: sets a block's state, erase count and valid count without touching the lists
    /// (call [`BlockTable::relink_all`] when done). The list links hold a 64-bit scratch value
    /// meanwhile ([`BlockTable::raw_scratch`]).
    pub(crate) fn raw_set(&mut self, b: BlockId, state: BlockState, erase_count: u32, valid: u16) {
        let i = &mut self.info[b.0 as usize];
        i.set_state_raw(state);
        i.set_erase_count(erase_count);
        i.w[2] = valid;
    }

    /// Mount-time: the block's state byte only.
    pub(crate) fn raw_set_state(&mut self, b: BlockId, state: BlockState) {
        self.info[b.0 as usize].set_state_raw(state);
    }

    /// Mount-time: stores a 48-bit scratch value (a sequence number; higher bits are dropped)
    /// in the list links and the spare word.
    pub(crate) fn raw_set_scratch(&mut self, b: BlockId, v: u64) {
        let i = &mut self.info[b.0 as usize];
        i.w[3] = v as u16;
        i.w[4] = (v >> 16) as u16;
        i.w[5] = (v >> 32) as u16;
    }

    /// Mount-time: the scratch value.
    pub(crate) fn raw_scratch(&self, b: BlockId) -> u64 {
        let i = &self.info[b.0 as usize];
        i.w[3] as u64 | (i.w[4] as u64) << 16 | (i.w[5] as u64) << 32
    }

    /// Mount-time: sets the valid count without touching the lists.
    pub(crate) fn raw_set_valid(&mut self, b: BlockId, valid: u16) {
        self.info[b.0 as usize].w[2] = valid;
    }

    /// Rebuilds every list from the blocks' states and valid counts.
    pub(crate) fn relink_all(&mut self) {
        self.heads.fill(NIL);
        self.free = [0; MAX_TOTAL_PLANES];
        self.pool_free = [0; MAX_TOTAL_PLANES];
        for i in self.info.iter_mut() {
            i.set_prev(NIL);
            i.set_next(NIL);
            i.w[5] = 0;
        }
        for b in 0..self.info.len() as u32 {
            self.link(BlockId(b));
        }
    }

    /// Every block's entry, in block order.
    pub fn iter(&self) -> impl Iterator<Item = (BlockId, &BlockInfo)> + '_ {
        self.info.iter().enumerate().map(|(i, e)| (BlockId(i as u32), e))
    }
}

/// What a victim policy may look at: one plane of the block table.
pub struct VictimView<'a> {
    info: &'a [BlockInfo],
    heads: &'a [u32],
    geo: Geometry,
    free: u32,
    plane: u32,
}

impl VictimView<'_> {
    /// The device-wide plane index GC is cleaning.
    pub fn plane(&self) -> u32 {
        self.plane
    }

    /// The greedy choice: the used block with the fewest valid pages (fewer than a full block) in
    /// this plane.
    pub fn min_valid(&self) -> Option<BlockId> {
        let base = self.plane * (self.geo.pages_per_block + 2);
        (0..self.geo.pages_per_block).find_map(|v| {
            let h = self.heads[(base + v) as usize];
            (h != NIL).then_some(BlockId(h))
        })
    }

    /// The entry of a block.
    pub fn block(&self, b: BlockId) -> Option<&BlockInfo> {
        self.info.get(b.0 as usize)
    }

    /// Free blocks in this plane.
    pub fn free_blocks(&self) -> u32 {
        self.free
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn geo() -> Geometry {
        Geometry { pages_per_block: 4, blocks_per_plane: 4, planes_per_lun: 2, ..Geometry::MT29F4G08 }
    }

    #[test]
    fn packed_fields_are_independent_and_erase_counts_saturate() {
        assert_eq!(core::mem::size_of::<BlockInfo>(), 12);
        let g = Geometry { blocks_per_plane: 4, planes_per_lun: 1, ..geo() };
        let mut info = [BlockInfo::EMPTY; 4];
        let mut heads = [0u32; 1 + 6];
        let mut t = BlockTable::new(g, &mut info, &mut heads);
        let b = BlockId(2);
        t.raw_set(b, BlockState::Victim, MAX_TABLE_ERASE_COUNT + 5, 0xBEEF);
        t.set_flags(b, 0x81, true);
        t.raw_set_scratch(b, 0xABCD_1234_5678);
        let i = *t.get(b);
        assert_eq!(
            (i.state(), i.erase_count(), i.valid(), i.flags()),
            (BlockState::Victim, MAX_TABLE_ERASE_COUNT, 0xBEEF, 0x81)
        );
        assert_eq!(t.raw_scratch(b), 0xABCD_1234_5678);
        t.set_flags(b, 0x80, false);
        t.set_erase_count(b, 7);
        t.count_erase(b);
        let i = *t.get(b);
        assert_eq!((i.state(), i.erase_count(), i.flags()), (BlockState::Victim, 8, 0x01));
        // Every state survives the 4-bit field.
        for s in [BlockState::Free, BlockState::Dirty, BlockState::Open, BlockState::Used, BlockState::Bad] {
            t.raw_set_state(b, s);
            assert_eq!(t.state(b), s);
            assert_eq!(t.get(b).erase_count(), 8);
        }
    }

    #[test]
    fn lists_follow_state_and_valid_count() {
        let g = geo();
        let mut info = [BlockInfo::EMPTY; 8];
        let mut heads = [0u32; 1 + 2 * 6];
        let mut t = BlockTable::new(g, &mut info, &mut heads);
        for b in 0..8 {
            t.set_erase_count(BlockId(b), 10 - b);
            t.set_state(BlockId(b), BlockState::Free);
        }
        assert_eq!(t.free_count(0), 4);
        assert_eq!(t.free_count(1), 4);
        // Plane 0 holds even blocks; block 6 has the lowest erase count there.
        assert_eq!(t.coolest_free(0), Some(BlockId(6)));
        t.set_state(BlockId(6), BlockState::Open);
        assert_eq!(t.free_count(0), 3);
        for _ in 0..3 {
            t.inc_valid(BlockId(6));
        }
        t.set_state(BlockId(6), BlockState::Used);
        t.set_state(BlockId(4), BlockState::Used);
        t.set_valid(BlockId(4), 4);
        // A full block is never a victim; it is the plane's full block (for emigration).
        assert_eq!(t.min_valid(0), Some(BlockId(6)));
        assert_eq!((t.full_block(0), t.full_block(1)), (Some(BlockId(4)), None));
        t.dec_valid(BlockId(4));
        assert_eq!(t.full_block(0), None);
        t.dec_valid(BlockId(4));
        assert_eq!(t.min_valid(0), Some(BlockId(4)));
        assert_eq!(t.min_valid(1), None);
        t.set_state(BlockId(4), BlockState::Retiring);
        assert_eq!(t.next_retiring(), Some(BlockId(4)));
        assert_eq!(t.min_valid(0), Some(BlockId(6)));
        t.set_state(BlockId(4), BlockState::Bad);
        assert_eq!(t.next_retiring(), None);
        assert_eq!(t.total_free(), 6);
    }
}
