//! Mount: rebuilding the RAM state from flash after a clean shutdown or a power cut.
//!
//! 0. Anchor (see `anchor.rs`): find the newest anchor record. If it says clean (the last thing
//!    written was `unmount`'s checkpoint and record) and no technique is attached, the fast mount
//!    loads that checkpoint with its block table and stops there: anchor reads + one spare read
//!    per checkpoint block + the checkpoint's pages (+ one read per frontier at its first
//!    program). A not-clean record listing a fresh pool is written before anything else changes.
//!    If it is bounded (see `pool.rs`), the checkpoint's block table is loaded and step 1 reads
//!    only the pool's blocks; steps 3-7 follow. Otherwise (or if anything does not check out)
//!    steps 1-7 run over every block, after a record that stops a clean or bounded one from being
//!    trusted.
//! 1. Survey: read the spare of the first page of every block (one read per block): bad-block
//!    marker, erased, garbage, or the kind, sequence number and erase count of its first page.
//!    A first page that reads invalid with its void mark clear (torn) is read up to 4 times and
//!    voided if no read decodes, as in step 3.
//! 2. Load the newest checkpoint whose every page and CRC check out (older ones are the fallback
//!    when a cut tore the newest; `checkpoint/reader.rs`).
//! 3. Replay, in global sequence order, every page written after the checkpoint: the blocks opened
//!    since (first-page sequence above the checkpoint's) and the frontier blocks the checkpoint
//!    recorded, from their recorded next page. A k-way merge over the blocks (each written in
//!    sequence order) gives the global order; a block's replay skips invalid (torn, voided) pages
//!    and stops at its first erased page. A page whose metadata reads invalid but whose void
//!    mark is clear (a torn program) is read up to 4 times; if no read decodes it is voided, so
//!    a later mount whose read happens to decode its marginal cells cannot replay it. Data
//!    pages set the map; journal pages that check out apply trims.
//! 4. The newest replayed data page is read whole and checked by the codec: a cut in the middle of
//!    its program may have left metadata intact but data torn; if so (or if its void mark is not
//!    clear: an earlier mount's void of it was cut) the previous mapping stands and the page is
//!    voided, so later mounts skip it. If the previous mapping is itself a page this replay
//!    applied (a torn retry or refresh of a page torn before), it is checked the same way. A page
//!    that needed corrections is read a second time and kept only if that read decodes too (a
//!    cut can leave cells marginal: one lucky read is not enough). With multi-plane programs
//!    (`multiplane.rs`) a cut may tear every page of the program it interrupts (up to
//!    `planes_per_lun` pages, the newest on flash), so the newest `planes_per_lun` replayed data
//!    pages (at most `MAX_PLANES` = 4) are each checked so, newest first, but for one a newer
//!    page of its logical page supersedes (none of a program's pages share one): each torn one
//!    rolled back and voided, each walk back as above. None of them was acknowledged (a
//!    multi-plane write returns after its whole program), so rolling any back loses nothing.
//! 5. Valid counts, the bitmap and the lists are rebuilt from the map. Blocks without live data
//!    (and no live journal page) become dirty (erased before use, since a cut may have left them
//!    half-erased); in each plane the GC and host frontiers resume on the replayed blocks with the
//!    most erased pages left, so a cut does not strand the free reserve GC needs. A resumed page
//!    whose metadata reads erased but whose bytes are not all 0xFF (a program torn before its
//!    metadata) is voided and skipped; if that void does not complete the block is not resumed
//!    (a later replay would stop at that page). A program the chip refuses for its NOP (a page
//!    that reads erased after voids cut until its NOP ran out) closes the block and retries in
//!    another.
//! 6. If any void this mount needed did not complete, a checkpoint is written: no later mount
//!    replays a page older than it.
//! 7. Each page step 4 kept that passed only with corrections (a cut may have left it a few bits
//!    short: readable now, not after one more raw bit error) is copied to the GC stream, oldest
//!    first: a cut during these copies leaves the copies made as the newest data pages, and the
//!    next mount's step 4 still checks every page not copied yet (in its window, or reached from
//!    its torn copy by the walk back).
//!
//! Voiding contract (raw bit errors, cuts during voiding; marks and thresholds in `meta.rs`):
//! a void programs the page's void mark and reads it back, done at 14 or more zero bits of 16.
//! Every page replay reads whose mark is voided but weak (8..13 zeros) is voided again. A cut
//! during a void leaves the page voided (strengthened by the next mount) or not voided; then it
//! is still the newest program (mount writes nothing before its voids) and the next mount finds
//! it torn again. Repeated cuts can exhaust the page's NOP, which step 6 covers.
//!
//! Cost of steps 1-7: the anchor's reads + `total_blocks` spare reads + the checkpoint's pages + the replayed pages (at most
//! `checkpoint_interval_blocks` + open frontiers blocks, invalid pages included) + step 4's 1
//! or 2 reads per page checked (one page, or with multi-plane programs `planes_per_lun`, at most
//! 4: so at most 8 reads there instead of 2; up to 12 pages in all when it walks back) + one read
//! per resumed frontier + 3 more reads per torn page (steps 1 and 3); a void adds a program and
//! a read, a refresh up to 4 reads and a program (at most one refresh per page checked).

use nand_hal::{BlockId, NandFlash, PageId, MAX_PLANES};

use crate::anchor::{Found, ANCHOR_BLOCKS};
use crate::blocks::{BlockState, FLAG_LIVE_JOURNAL, FLAG_POOL};
use crate::checkpoint::CheckpointState;
use crate::frontier::{Frontier, Source};
use crate::journal::{journal_capacity, journal_entries};
use crate::map::MappingTable;
use crate::meta::{
    is_bad_block_marker, void_zeros, PageKind, PageMeta, SpareState, MAX_SEQ, META_LEN, VOID_CLEAR_MAX_ZEROS,
    VOID_MIN_ZEROS, VOID_STRONG_ZEROS,
};
use crate::policy::{PageCodec, PolicySet, Stream};
use crate::{Error, Ftl};

/// Most blocks one mount replays (bounds `checkpoint_interval_blocks`; the merge's cursors live
/// on the stack, 24 bytes each). Room for an interval of 64 blocks next to the replay slack of
/// the most planes the FTL drives (`Config::replay_slack(MAX_TOTAL_PLANES)` = 192).
pub const MAX_REPLAY_BLOCKS: usize = 64 + 4 * crate::frontier::STREAMS * crate::config::MAX_TOTAL_PLANES;

/// Reads step 7 tries before leaving a page that needed correction as it is.
const REFRESH_READS: u32 = 4;

/// Reads of a replayed page's metadata before a page that reads invalid (and not voided) is
/// taken as torn and voided.
const META_READS: u32 = 4;

/// Data pages step 4 keeps: the newest `torn_window` (at most `MAX_PLANES`) and as many more as
/// one write's program attempts, which a walk back from them may reach.
const HISTORY: usize = crate::frontier::MAX_PROGRAM_ATTEMPTS as usize + MAX_PLANES;
const _: () = assert!(HISTORY <= 32, "step 4 marks the history entries it checked in a u32");

/// Block-table flag used only during mount: the loaded checkpoint says the block is bad.
pub(crate) const FLAG_CKPT_BAD: u8 = 0x80;
/// Block-table flag used only during a mount from the pool: a frontier block the checkpoint
/// recorded.
const FLAG_CKPT_FRONTIER: u8 = 0x40;

const EMPTY_CURSOR: Cursor =
    Cursor { block: 0, page: 0, seq: u64::MAX, kind: PageKind::Data, tag: 0, aux: 0, second: false };

#[derive(Copy, Clone)]
struct Cursor {
    block: u32,
    page: u32,
    /// Sequence number of the head page; `u64::MAX` when the block is done.
    seq: u64,
    kind: PageKind,
    tag: u32,
    /// A cursor over the second writes of a plane-0 block (feature `wom`).
    second: bool,
    /// Aux word of the head page (dedup tells its journal and relocation pages by it).
    aux: u32,
}

impl<N: NandFlash, P: PolicySet, M: MappingTable> Ftl<'_, N, P, M> {
    /// Rebuilds the RAM state from flash.
    pub(crate) fn recover(&mut self) -> Result<(), Error> {
        let reads_before = self.counters.nand_reads;
        self.counters.mount_surveyed_blocks = 0;
        self.blocks.reset();
        self.map.clear();
        self.valid.fill(0);
        self.frontiers = [Frontier::NONE; crate::config::MAX_TOTAL_PLANES * crate::frontier::STREAMS];
        self.trims.clear();
        self.torn = crate::frontier::TornPages::NONE;
        self.resumed = 0;
        self.resume_checked = u32::MAX;
        self.reuse_reset();

        // Step 0: the anchor. A clean record newest: nothing changed after its checkpoint. A
        // bounded one: every block written since its checkpoint is in the pool it lists.
        self.pool_drop();
        let mut survey_voids = true;
        let mut from_pool = None;
        if let Some(found) = self.anchor_find()? {
            let mut taken = false;
            if found.clean && self.anchor_fast_allowed() {
                if self.mount_fast(found)? {
                    self.counters.mount_replayed_pages = 0;
                    self.counters.mount_reads = self.counters.nand_reads - reads_before;
                    // Before anything else changes on flash, the record stops saying clean (and
                    // lists a fresh pool).
                    self.pool_renew()?;
                    crate::fmt::info!("mounted from the anchor: {} reads", self.counters.mount_reads);
                    return Ok(());
                }
            } else if found.bounded && self.anchor_fast_allowed() {
                from_pool = self.pool_survey(found, &mut survey_voids)?;
                taken = from_pool.is_some();
            }
            if !taken {
                // Something did not check out (or nothing to take): forget what it loaded and
                // survey.
                self.blocks.reset();
                self.map.clear();
                self.frontiers = [Frontier::NONE; crate::config::MAX_TOTAL_PLANES * crate::frontier::STREAMS];
                self.pool_drop();
                survey_voids = true;
                self.counters.mount_surveyed_blocks = 0;
                self.anchor_find()?;
            }
        }
        let (max_seen, ckpt_seq, next_seq) = match from_pool {
            Some((max_seen, ckpt_seq, next_seq)) => {
                // The record stays: it names this checkpoint and the pool this mount read.
                let listed = self.blocks.iter().filter(|(_, i)| i.flags() & FLAG_POOL != 0).count();
                self.pool_adopt(listed as u32);
                (max_seen, ckpt_seq, next_seq)
            }
            None => {
                // A clean or bounded record that is not taken stops being trusted before the
                // survey's voids.
                self.write_anchor(false)?;
                let max_seen = self.survey(&mut survey_voids)?;
                let (ckpt_seq, next_seq) = self.load_newest_checkpoint()?;
                self.dedup_load_checkpoint()?;
                (max_seen, ckpt_seq, next_seq)
            }
        };
        let rebuild_mode = if from_pool.is_some() { Rebuild::Pool } else { Rebuild::Survey };

        // Checkpoint blocks: the current one's stay, the others are dirty.
        for b in 0..self.geo.total_blocks() {
            let b = BlockId(b);
            let info = *self.blocks.get(b);
            if info.flags() & FLAG_CKPT_BAD != 0 {
                self.blocks.raw_set_state(b, BlockState::Bad);
            } else if info.state() == BlockState::CheckpointNew {
                let s = if self.blocks.raw_scratch(b) == ckpt_seq {
                    BlockState::Checkpoint
                } else {
                    BlockState::Dirty
                };
                self.blocks.raw_set(b, s, info.erase_count(), 0);
            }
            self.blocks.set_flags(b, FLAG_CKPT_BAD, false);
        }

        self.reuse_scan(ckpt_seq)?;
        let replayed = self.replay(ckpt_seq)?;
        self.nv_reconcile()?;
        self.rebuild(rebuild_mode)?;

        let newest = max_seen.max(next_seq).max(replayed.max_seq);
        if newest >= MAX_SEQ / 2 {
            return Err(Error::Corrupt);
        }
        let mut voids_complete = replayed.voids_complete && survey_voids;
        self.seq = newest + 1;
        self.ckpt = CheckpointState { seq: ckpt_seq, blocks_since: replayed.blocks };
        self.frontiers = [Frontier::NONE; crate::config::MAX_TOTAL_PLANES * crate::frontier::STREAMS];
        for plane in 0..self.geo.total_planes() {
            for (slot, stream) in [Stream::Gc, Stream::Host].into_iter().enumerate() {
                if let Some((b, p)) = replayed.resume[plane as usize][slot] {
                    voids_complete &= self.resume_frontier(plane, stream, BlockId(b), p)?;
                }
            }
        }
        self.reuse_after_mount();
        // The flash may differ from the checkpoint even when nothing replayed (a torn page
        // rolled back and voided, a frontier resumed past it): the next `unmount` writes a
        // checkpoint before its clean anchor record, which says nothing changed since it.
        self.dirty = true;
        if !voids_complete {
            // Step 6: a void this mount needed did not complete; a checkpoint makes it moot.
            self.write_checkpoint()?;
        }
        for page in replayed.refresh.into_iter().flatten() {
            // Step 7: rewrite each page step 4 checked that needed correction, since a cut may
            // have left it a few bits short: such a page reads now but may not after more raw bit
            // errors. (Best effort: without room for the copy the page stays as it is.)
            if let Err(Error::Device(k)) = self.refresh_newest(page) {
                return Err(Error::Device(k));
            }
        }
        self.counters.mount_replayed_pages = replayed.pages;
        self.counters.mount_reads = self.counters.nand_reads - reads_before;
        crate::fmt::info!("mounted: {} reads, {} pages replayed", self.counters.mount_reads, replayed.pages);
        Ok(())
    }

    /// The anchor's fast mount from a clean record: its checkpoint's blocks (listed in the
    /// record, each checked by its first page's metadata), then the checkpoint with its block
    /// table, the frontiers it recorded, and the lists. Nothing is replayed: the record is clean
    /// only if nothing was written after the checkpoint (see `anchor.rs`). `Ok(false)` when
    /// anything does not check out (the caller surveys).
    ///
    /// Cost: the anchor's reads + one spare read per checkpoint block + the checkpoint's pages +
    /// one read per open frontier (checked erased before its first program).
    fn mount_fast(&mut self, found: Found) -> Result<bool, Error> {
        let ppb = self.geo.pages_per_block;
        let ckpt_seq = found.ckpt_seq;
        let n = match self.anchor_read(found.page)? {
            Some(r) if r.clean && r.ckpt_seq == ckpt_seq => r.blocks,
            _ => return Ok(false),
        };
        if !self.listed_checkpoint_blocks(n, ckpt_seq)? {
            return Ok(false);
        }
        let Some(next_seq) = self.load_checkpoint(ckpt_seq, true)? else {
            return Ok(false);
        };
        for b in 0..self.geo.total_blocks() {
            if self.blocks.state(BlockId(b)) == BlockState::CheckpointNew {
                self.blocks.raw_set_state(BlockId(b), BlockState::Checkpoint);
            }
        }
        self.rebuild(Rebuild::Fast)?;
        // The frontiers resume where the checkpoint left them.
        for i in 0..self.frontiers.len() {
            let f = self.frontiers[i];
            let plane = (i / crate::frontier::STREAMS) as u32;
            let ok = f.block != u32::MAX
                && self.geo.contains_block(BlockId(f.block))
                && plane < self.geo.total_planes()
                && self.geo.plane_index(BlockId(f.block)) == plane
                && f.next_page < ppb
                && self.blocks.state(BlockId(f.block)) == BlockState::Used;
            if ok {
                self.blocks.set_state(BlockId(f.block), BlockState::Open);
                self.resumed |= 1 << i;
            } else {
                self.frontiers[i] = Frontier::NONE;
            }
        }
        if next_seq >= MAX_SEQ / 2 {
            return Err(Error::Corrupt);
        }
        self.seq = next_seq;
        self.ckpt = CheckpointState { seq: ckpt_seq, blocks_since: 0 };
        self.dirty = false;
        Ok(true)
    }

    /// The `n` checkpoint blocks a record in the page buffer lists: each checked by its first
    /// page's metadata (read into the stack, so the record stays in the buffer) and set up for
    /// `load_checkpoint`. False if one does not check out.
    fn listed_checkpoint_blocks(&mut self, n: usize, ckpt_seq: u64) -> Result<bool, Error> {
        let d = self.geo.data_bytes as usize;
        let ppb = self.geo.pages_per_block;
        if n == 0 {
            return Ok(false);
        }
        for i in 0..n {
            let b = crate::anchor::listed_block(&self.buf[..d], i);
            if b < ANCHOR_BLOCKS || !self.geo.contains_block(BlockId(b)) {
                return Ok(false);
            }
            let b = BlockId(b);
            match self.anchor_meta(self.geo.page(b, 0))?.1 {
                SpareState::Valid(m)
                    if m.kind == PageKind::Checkpoint && m.seq == ckpt_seq && m.tag % ppb == 0 =>
                {
                    let index = (m.tag / ppb).min(u16::MAX as u32) as u16;
                    self.blocks.raw_set(b, BlockState::CheckpointNew, m.erase_count, index);
                    self.blocks.raw_set_scratch(b, ckpt_seq);
                }
                _ => return Ok(false),
            }
        }
        Ok(true)
    }

    /// Step 0 after a cut, from a bounded record: the pool's flags and the checkpoint's blocks
    /// from the record, the checkpoint with its block table (the state at the checkpoint), then
    /// the first page of every pool block and of every frontier block the checkpoint recorded:
    /// erased, torn (to be erased), a checkpoint's, opened since the checkpoint (replayed, valid
    /// count from zero) or unchanged (the checkpoint's state stands). Blocks outside the pool are as the checkpoint left them, but for blocks GC
    /// erased since (counts too high: a flash-resident map's GC decides validity page by page)
    /// and free blocks (erased again before use). `Ok(Some((largest sequence seen, checkpoint
    /// sequence, next sequence it recorded)))`, `Ok(None)` if anything does not check out.
    ///
    /// Cost: the anchor's reads + one spare read per checkpoint, pool and recorded frontier block
    /// + the checkpoint's pages (+ 3 more reads per torn first page).
    fn pool_survey(
        &mut self,
        found: Found,
        voids_complete: &mut bool,
    ) -> Result<Option<(u64, u64, u64)>, Error> {
        let d = self.geo.data_bytes as usize;
        let ppb = self.geo.pages_per_block;
        let ckpt_seq = found.ckpt_seq;
        let rec = match self.anchor_read(found.page)? {
            Some(r) if r.bounded && !r.clean && r.ckpt_seq == ckpt_seq => r,
            _ => return Ok(None),
        };
        // The pool's flags while the record is in the page buffer.
        for j in 0..rec.pool {
            let b = crate::anchor::listed_block(&self.buf[..d], rec.blocks + j);
            if b < ANCHOR_BLOCKS || !self.geo.contains_block(BlockId(b)) {
                return Ok(None);
            }
            self.blocks.set_flags(BlockId(b), FLAG_POOL, true);
        }
        if !self.listed_checkpoint_blocks(rec.blocks, ckpt_seq)? {
            return Ok(None);
        }
        let Some(next_seq) = self.load_checkpoint(ckpt_seq, true)? else {
            return Ok(None);
        };
        // The frontier blocks the checkpoint recorded are read too: GC may have erased one since
        // (it filled up, then lost its valid pages), and the frontier must not resume on it.
        for i in 0..self.frontiers.len() {
            let f = self.frontiers[i].block;
            if self.geo.contains_block(BlockId(f)) {
                self.blocks.set_flags(BlockId(f), FLAG_CKPT_FRONTIER, true);
            }
        }
        let mut max_seq = 0;
        for b in 0..self.geo.total_blocks() {
            let b = BlockId(b);
            let info = *self.blocks.get(b);
            self.blocks.set_flags(b, FLAG_CKPT_FRONTIER, false);
            if matches!(info.state(), BlockState::CheckpointNew | BlockState::Anchor) {
                continue;
            }
            // Written before the checkpoint, unless the pool's read below says otherwise.
            self.blocks.raw_set_scratch(b, 0);
            if info.flags() & (FLAG_POOL | FLAG_CKPT_FRONTIER) == 0 {
                continue;
            }
            let page = self.geo.page(b, 0);
            self.counters.nand_reads += 1;
            self.counters.mount_surveyed_blocks += 1;
            self.nand.read_spare(page, &mut self.buf[d..d + META_LEN])?;
            let ec = info.erase_count();
            if is_bad_block_marker(self.buf[d]) {
                self.blocks.raw_set(b, BlockState::Bad, ec, 0);
                continue;
            }
            match self.torn_meta_check(page, voids_complete)? {
                SpareState::Erased => self.blocks.raw_set(b, BlockState::Free, ec, 0),
                SpareState::Invalid => self.blocks.raw_set(b, BlockState::Dirty, ec, 0),
                SpareState::Valid(m) => {
                    max_seq = max_seq.max(m.seq);
                    let ec = ec.max(m.erase_count);
                    if m.kind == PageKind::Checkpoint {
                        // A later checkpoint the record does not name (torn, or cut before its
                        // record): dirty once the checkpoint blocks are sorted out.
                        let index = (m.tag / ppb).min(u16::MAX as u32) as u16;
                        self.blocks.raw_set(b, BlockState::CheckpointNew, ec, index);
                    } else if m.seq > ckpt_seq {
                        self.blocks.raw_set(b, BlockState::Used, ec, 0);
                    } else if info.state() == BlockState::Free {
                        // Old pages in a block the checkpoint says is erased: erase before use.
                        self.blocks.raw_set(b, BlockState::Dirty, ec, 0);
                    }
                    self.blocks.raw_set_scratch(b, m.seq);
                }
            }
        }
        Ok(Some((max_seq, ckpt_seq, next_seq)))
    }

    /// Step 1. Returns the largest sequence number seen; `voids_complete` turns false if a void
    /// of a torn first page did not complete.
    fn survey(&mut self, voids_complete: &mut bool) -> Result<u64, Error> {
        let d = self.geo.data_bytes as usize;
        let ppb = self.geo.pages_per_block;
        let mut max_seq = 0;
        let survey_len = self.reuse_survey_len();
        // The anchor region was read by `anchor_find`.
        for b in ANCHOR_BLOCKS.min(self.geo.total_blocks())..self.geo.total_blocks() {
            let b = BlockId(b);
            self.counters.nand_reads += 1;
            self.counters.mount_surveyed_blocks += 1;
            self.nand.read_spare(self.geo.page(b, 0), &mut self.buf[d..d + survey_len])?;
            if is_bad_block_marker(self.buf[d]) {
                self.blocks.raw_set(b, BlockState::Bad, 0, 0);
                continue;
            }
            self.reuse_survey(b)?;
            match self.torn_meta_check(self.geo.page(b, 0), voids_complete)? {
                SpareState::Erased => self.blocks.raw_set(b, BlockState::Free, 0, 0),
                SpareState::Invalid => self.blocks.raw_set(b, BlockState::Dirty, 0, 0),
                SpareState::Valid(m) => {
                    max_seq = max_seq.max(m.seq);
                    if m.kind == PageKind::Checkpoint {
                        let index = (m.tag / ppb).min(u16::MAX as u32) as u16;
                        self.blocks.raw_set(b, BlockState::CheckpointNew, m.erase_count, index);
                    } else {
                        self.blocks.raw_set(b, BlockState::Used, m.erase_count, 0);
                    }
                    self.blocks.raw_set_scratch(b, m.seq);
                }
            }
        }
        Ok(max_seq)
    }

    /// Step 3's cursors: the blocks opened since the checkpoint, the frontier blocks it
    /// recorded (from their recorded next page) and, with second writes, the blocks holding
    /// second writes. Heads not loaded yet.
    fn replay_cursors(
        &self,
        ckpt_seq: u64,
        cursors: &mut [Cursor; MAX_REPLAY_BLOCKS],
    ) -> Result<usize, Error> {
        let ppb = self.geo.pages_per_block;
        let mut n = 0usize;
        fn add(cursors: &mut [Cursor], n: &mut usize, c: Cursor) -> Result<(), Error> {
            let slot = cursors.get_mut(*n).ok_or(Error::Corrupt)?;
            *slot = c;
            *n += 1;
            Ok(())
        }
        for b in 0..self.geo.total_blocks() {
            let bid = BlockId(b);
            if self.blocks.state(bid) == BlockState::Used && self.blocks.raw_scratch(bid) > ckpt_seq {
                add(cursors, &mut n, Cursor { block: b, page: 0, ..EMPTY_CURSOR })?;
            }
        }
        for f in self.frontiers {
            let bid = BlockId(f.block);
            if f.block != u32::MAX
                && self.geo.contains_block(bid)
                && f.next_page < ppb
                && self.blocks.state(bid) == BlockState::Used
                && self.blocks.raw_scratch(bid) < ckpt_seq
                && !cursors[..n].iter().any(|c| c.block == f.block)
            {
                add(cursors, &mut n, Cursor { block: f.block, page: f.next_page, ..EMPTY_CURSOR })?;
            }
        }
        for b in 0..self.geo.total_blocks() {
            if self.reuse_replays(BlockId(b)) {
                add(cursors, &mut n, Cursor { block: b, page: 0, second: true, ..EMPTY_CURSOR })?;
            }
        }
        Ok(n)
    }

    /// Step 3's first pass, with a flash-resident map only: in sequence order, every map page
    /// written since the checkpoint that reads whole becomes the directory's version of its map
    /// page (torn ones are voided). The second pass then skips every data page and trim older
    /// than the newest version of its map page (that version holds it), so the entries replay
    /// keeps in RAM are those that were dirty in the cache when the power went: they fit in it.
    /// (Replaying every update in order would need more room: a superseded map page's block may
    /// have been erased since, and with it a write-back that cleaned lines.) Loads read the
    /// newest version, so no older one is needed: a superseded map page's block may be erased
    /// at once, even the version the checkpoint's directory names.
    fn replay_map_pages(
        &mut self,
        cursors: &mut [Cursor],
        ckpt_seq: u64,
        voids_complete: &mut bool,
    ) -> Result<(), Error> {
        for c in cursors.iter_mut() {
            self.load_head(c, ckpt_seq, voids_complete)?;
        }
        while let Some(k) =
            (0..cursors.len()).filter(|&k| cursors[k].seq != u64::MAX).min_by_key(|&k| cursors[k].seq)
        {
            let c = cursors[k];
            if c.kind == PageKind::Map {
                if c.tag >= self.map.map_pages() {
                    return Err(Error::Corrupt);
                }
                let page = self.geo.page(BlockId(c.block), c.page);
                if self.map_page_whole(page)? {
                    // The version it supersedes no longer counts in its block.
                    let old = self.map.dir(c.tag);
                    self.uncount(old, ckpt_seq);
                    self.map.replay_newer(c.tag, page);
                } else {
                    *voids_complete &= self.void_page(page);
                }
            }
            cursors[k].page += 1;
            self.load_head(&mut cursors[k], ckpt_seq, voids_complete)?;
        }
        Ok(())
    }

    /// Step 3 and 4.
    fn replay(&mut self, ckpt_seq: u64) -> Result<Replayed, Error> {
        let ppb = self.geo.pages_per_block;
        let mut cursors = [EMPTY_CURSOR; MAX_REPLAY_BLOCKS];
        let mut map_voids = true;
        self.map.replay_begin();
        if self.map.on_flash() {
            let n = self.replay_cursors(ckpt_seq, &mut cursors)?;
            self.replay_map_pages(&mut cursors[..n], ckpt_seq, &mut map_voids)?;
        }
        let n = self.replay_cursors(ckpt_seq, &mut cursors)?;
        let mut out = Replayed {
            blocks: n as u32,
            pages: 0,
            max_seq: 0,
            resume: [[None; 2]; crate::config::MAX_TOTAL_PLANES],
            voids_complete: map_voids,
            refresh: [None; MAX_PLANES],
        };
        let done = &mut out.voids_complete;
        for c in cursors[..n].iter_mut() {
            self.load_head(c, ckpt_seq, done)?;
        }
        // The last data pages applied (a ring), each with the mapping it replaced; `applied`
        // counts them since the last complete journal page.
        let mut history = [(0u32, None::<PageId>, PageId(0)); HISTORY];
        let mut applied = 0usize;
        while let Some(k) = (0..n).filter(|&k| cursors[k].seq != u64::MAX).min_by_key(|&k| cursors[k].seq) {
            let c = cursors[k];
            let page = self.geo.page(BlockId(c.block), c.page);
            match c.kind {
                PageKind::Data if self.dedup_is_move(c.aux) => {
                    self.dedup_replay_move(c.tag, page)?;
                    self.blocks.set_flags(BlockId(c.block), FLAG_LIVE_JOURNAL, true);
                    applied = 0;
                }
                PageKind::Data => {
                    if c.tag >= self.cfg.logical_pages {
                        return Err(Error::Corrupt);
                    }
                    if self.map.replay_skips(c.tag) {
                        // Already in a newer map page (see `replay_map_pages`).
                        self.count_replayed(BlockId(c.block));
                        out.pages += 1;
                        out.max_seq = out.max_seq.max(c.seq);
                        cursors[k].page += 1;
                        self.load_head(&mut cursors[k], ckpt_seq, done)?;
                        continue;
                    }
                    let prev = self.replay_map_set(c.tag, Some(page))?;
                    self.uncount(prev, ckpt_seq);
                    history[applied % HISTORY] = (c.tag, prev, page);
                    applied += 1;
                    self.dedup_replay_unref(prev);
                    self.dedup_replay_new_page(page);
                }
                PageKind::Journal => {
                    let complete = match self.dedup_apply_journal(page, c.tag, c.aux)? {
                        Some(complete) => complete,
                        None => self.apply_journal(page, c.tag, ckpt_seq)?,
                    };
                    if !complete {
                        cursors[k].page += 1;
                        self.load_head(&mut cursors[k], ckpt_seq, done)?;
                        continue;
                    }
                    self.blocks.set_flags(BlockId(c.block), FLAG_LIVE_JOURNAL, true);
                    // Pages before a complete journal page are complete too.
                    applied = 0;
                }
                PageKind::Map => {
                    // From here on, updates of this map page's entries are newer than it.
                    if !self.map.on_flash() {
                        return Err(Error::Corrupt);
                    }
                    self.map.replay_pass(c.tag, page);
                }
                PageKind::Checkpoint | PageKind::Anchor => {}
            }
            self.count_replayed(BlockId(c.block));
            out.pages += 1;
            out.max_seq = out.max_seq.max(c.seq);
            cursors[k].page += 1;
            self.load_head(&mut cursors[k], ckpt_seq, done)?;
        }
        // Step 4: the newest data pages (one, or as many as one multi-plane program writes: see
        // `Self::torn_window`), newest first, each unless a newer one of its logical page
        // supersedes it, and while one is torn the one it replaced if this replay applied that
        // one too (a torn retry or refresh of a page a cut had torn before).
        let oldest = applied.saturating_sub(HISTORY);
        // Bit `i - oldest`: history entry `i` checked.
        let mut checked = 0u32;
        // Whole pages that needed correction, with their history index (one per chain at most).
        let mut refresh = [(0usize, PageId(0)); MAX_PLANES];
        let mut refreshes = 0;
        for top in (applied.saturating_sub(self.torn_window()).max(oldest)..applied).rev() {
            let top_lpn = history[top % HISTORY].0;
            if (top + 1..applied).any(|j| history[j % HISTORY].0 == top_lpn) {
                continue;
            }
            let mut candidate = Some(top);
            while let Some(i) = candidate {
                if checked & (1 << (i - oldest)) != 0 {
                    break;
                }
                checked |= 1 << (i - oldest);
                let (lpn, prev, page) = history[i % HISTORY];
                if let Some(corrected) = self.newest_check(page)? {
                    // Whole. Corrected bits may be bits a cut left unprogrammed: rewrite it.
                    if let Some(slot) = refresh.get_mut(refreshes).filter(|_| corrected > 0) {
                        *slot = (i, page);
                        refreshes += 1;
                    }
                    break;
                }
                self.replay_map_set(lpn, prev)?;
                self.uncount(Some(page), ckpt_seq);
                if let Some(b) = prev.and_then(|p| self.counted_since(p, ckpt_seq)) {
                    self.count_replayed(b);
                }
                self.dedup_replay_ref(prev);
                out.voids_complete &= self.void_newest(page);
                candidate = prev.and_then(|p| {
                    (oldest..i).rev().find(|&j| {
                        let (l, _, q) = history[j % HISTORY];
                        l == lpn && q == p
                    })
                });
            }
        }
        // Step 7 rewrites them oldest first: a cut during it leaves the copies made the newest
        // data pages, and the next mount's window (copies, then the newest originals) still
        // holds every original not copied yet, or reaches it from its torn copy.
        refresh[..refreshes].sort_unstable_by_key(|&(i, _)| i);
        for (slot, &(_, page)) in out.refresh.iter_mut().zip(&refresh[..refreshes]) {
            *slot = Some(page);
        }
        for c in &cursors[..n] {
            if c.page < ppb {
                let slots = &mut out.resume[self.geo.plane_index(BlockId(c.block)) as usize];
                let i = match *slots {
                    [None, _] => 0,
                    [_, None] => 1,
                    [Some((_, a)), Some((_, b))] => usize::from(a < b),
                };
                if slots[i].is_none_or(|(_, p)| c.page < p) {
                    slots[i] = Some((c.block, c.page));
                }
            }
        }
        Ok(out)
    }

    /// Counts a replayed page in its block's valid count, and [`Self::uncount`] the page an
    /// update replaced: what a mount from the pool keeps with a flash-resident map (a survey, or
    /// a flat map, recounts from the map). An upper bound, never below the true count: a
    /// replayed page already in a newer version of its map page (`replay_skips`) is counted
    /// without the one it replaced being uncounted (that one is not known without reading older
    /// map pages), and blocks reopened since the checkpoint are never uncounted; GC decides
    /// validity page by page.
    fn count_replayed(&mut self, b: BlockId) {
        let v = self.blocks.get(b).valid();
        self.blocks.raw_set_valid(b, (v + 1).min(self.geo.pages_per_block as u16));
    }

    /// One valid page fewer in the block of `p` (a page a replayed update or trim replaced), if
    /// its count includes `p` (see [`Self::counted_since`]).
    fn uncount(&mut self, p: Option<PageId>, ckpt_seq: u64) {
        if let Some(b) = p.and_then(|p| self.counted_since(p, ckpt_seq)) {
            let v = self.blocks.get(b).valid();
            self.blocks.raw_set_valid(b, v.saturating_sub(1));
        }
    }

    /// The block of `p`, if its count may include `p`: a used block not erased and reopened
    /// since the checkpoint (the first page's sequence, in the scratch word, is older). A
    /// reopened block counts only the pages replay found in it, and the map may still name a page
    /// of its former life (the update that replaced it is replayed after, or is in a newer map
    /// page): such a page is not in its count.
    fn counted_since(&self, p: PageId, ckpt_seq: u64) -> Option<BlockId> {
        if !self.geo.contains_page(p) {
            return None;
        }
        let b = self.geo.block_of(p);
        (self.blocks.state(b) == BlockState::Used && self.blocks.raw_scratch(b) < ckpt_seq).then_some(b)
    }

    /// Resumes a frontier at the first page of `b` a replay found erased; a page that reads
    /// erased metadata but is not all 0xFF (a program torn before its metadata) is voided and
    /// skipped. `Ok(false)` if that void did not complete.
    fn resume_frontier(&mut self, plane: u32, stream: Stream, b: BlockId, first: u32) -> Result<bool, Error> {
        if self.blocks.state(b) != BlockState::Used {
            return Ok(true);
        }
        let d = self.geo.data_bytes as usize;
        let page = self.geo.page(b, first);
        self.counters.nand_reads += 1;
        {
            let (data, spare) = self.buf.split_at_mut(d);
            self.nand.read_page(page, data, spare)?;
        }
        let mut next = first;
        let mut voided = true;
        if self.buf.iter().any(|&x| x != 0xFF) {
            voided = self.void_page(page);
            next += 1;
        }
        // A page whose void did not complete may read erased to a later mount, whose replay of
        // this block would stop there: pages written after it would be lost. The block stays
        // closed.
        if voided && next < self.geo.pages_per_block {
            self.blocks.set_state(b, BlockState::Open);
            let i = Self::frontier_index(plane, stream);
            self.frontiers[i] = Frontier { block: b.0, next_page: next };
            self.resumed |= 1 << i;
        }
        Ok(voided)
    }

    /// How many of the newest replayed data pages step 4 checks: those a cut may have torn
    /// together. With multi-plane programs (`multiplane.rs`) a chip may tear every page of the
    /// program a cut interrupts, and a program covers at most `planes_per_lun` pages (at most
    /// `MAX_PLANES`); its pages are the newest on flash (consecutive sequence numbers, nothing
    /// programmed after them), so the newest that many replayed data pages hold every one of
    /// them that replay applied. Otherwise one: the page being programmed.
    fn torn_window(&self) -> usize {
        if self.multi_program_possible() {
            (self.geo.planes_per_lun as usize).clamp(1, MAX_PLANES)
        } else {
            1
        }
    }

    /// Step 4's check of a replayed data page (a second write: whether it decodes).
    fn newest_check(&mut self, page: PageId) -> Result<Option<u32>, Error> {
        if let Some(whole) = self.reuse_newest_check(page)? {
            return Ok(whole);
        }
        self.newest_page_check(page)
    }

    /// Voids a torn replayed data page after its roll-back (a second write: the second-write
    /// metadata of both halves). False if the void did not complete.
    fn void_newest(&mut self, page: PageId) -> bool {
        if let Some(complete) = self.reuse_void_newest(page) {
            return complete;
        }
        self.void_page(page)
    }

    /// Reads the metadata of a cursor's page; marks the cursor done at the end of what was written.
    /// A page whose void a cut left weak (voided, but fewer than `VOID_STRONG_ZEROS` zero bits)
    /// is voided again; `voids_complete` turns false if that does not complete.
    fn load_head(&mut self, c: &mut Cursor, ckpt_seq: u64, voids_complete: &mut bool) -> Result<(), Error> {
        let d = self.geo.data_bytes as usize;
        c.seq = u64::MAX;
        if c.second {
            match self.reuse_load_head(c.block, c.page, ckpt_seq)? {
                Some((page, seq, tag)) => {
                    c.page = page;
                    c.seq = seq;
                    c.kind = PageKind::Data;
                    c.tag = tag;
                }
                None => c.page = self.geo.pages_per_block,
            }
            return Ok(());
        }
        while c.page < self.geo.pages_per_block {
            self.counters.nand_reads += 1;
            let page = self.geo.page(BlockId(c.block), c.page);
            self.nand.read_spare(page, &mut self.buf[d..d + META_LEN])?;
            if (VOID_MIN_ZEROS..VOID_STRONG_ZEROS).contains(&void_zeros(&self.buf[d..d + META_LEN])) {
                *voids_complete &= self.void_page(page);
            }
            match self.torn_meta_check(page, voids_complete)? {
                SpareState::Erased => return Ok(()),
                SpareState::Valid(m) if m.seq > ckpt_seq && m.kind != PageKind::Checkpoint => {
                    c.seq = m.seq;
                    c.kind = m.kind;
                    c.tag = m.tag;
                    c.aux = m.aux;
                    return Ok(());
                }
                _ => c.page += 1,
            }
        }
        Ok(())
    }

    /// Decodes the metadata just read into the buffer's spare. A page that reads invalid but
    /// whose void mark is clear is a torn program whose marginal cells another read (of this
    /// mount or a later one) may decode: it is read again (up to `META_READS` reads in all) and,
    /// if no read decodes, voided, so that no later mount takes what this one skipped
    /// (`voids_complete` turns false if that void does not complete).
    fn torn_meta_check(&mut self, page: PageId, voids_complete: &mut bool) -> Result<SpareState, Error> {
        let d = self.geo.data_bytes as usize;
        let state = PageMeta::decode(&self.buf[d..d + META_LEN]);
        if !matches!(state, SpareState::Invalid) || void_zeros(&self.buf[d..d + META_LEN]) >= VOID_MIN_ZEROS {
            return Ok(state);
        }
        for _ in 1..META_READS {
            self.counters.nand_reads += 1;
            self.nand.read_spare(page, &mut self.buf[d..d + META_LEN])?;
            let state = PageMeta::decode(&self.buf[d..d + META_LEN]);
            // A page that read invalid once is not erased, whatever a later read says.
            if matches!(state, SpareState::Valid(_)) {
                return Ok(state);
            }
        }
        *voids_complete &= self.void_page(page);
        Ok(SpareState::Invalid)
    }

    /// Reads a journal page and applies its trims; false if the page does not check out.
    fn apply_journal(&mut self, page: PageId, count: u32, ckpt_seq: u64) -> Result<bool, Error> {
        if !self.page_is_whole(page)? || count > journal_capacity(self.geo.data_bytes) {
            return Ok(false);
        }
        let d = self.geo.data_bytes as usize;
        let logical = self.cfg.logical_pages as u64;
        for k in 0..count as usize {
            let (a, n) = journal_entries(&self.buf[..d], count).nth(k).unwrap_or((0, 0));
            if a as u64 + n as u64 > logical {
                return Err(Error::Corrupt);
            }
            for l in a..a + n {
                if self.map.replay_skips(l) {
                    continue;
                }
                let prev = self.replay_map_set(l, None)?;
                self.uncount(prev, ckpt_seq);
                self.dedup_replay_unref(prev);
            }
        }
        Ok(true)
    }

    /// Step 4's check of the newest data page: `Some(bits the codec corrected)` if it is whole,
    /// `None` if it is torn: metadata or codec fail, or its void mark is not clear (a void a cut
    /// interrupted: the page was found torn before, whatever its data reads like now).
    fn newest_page_check(&mut self, page: PageId) -> Result<Option<u32>, Error> {
        let d = self.geo.data_bytes as usize;
        let spare_len = META_LEN + self.codec_len;
        self.counters.nand_reads += 1;
        let (data, spare) = self.buf.split_at_mut(d);
        self.nand.read_page(page, data, &mut spare[..spare_len])?;
        if !matches!(PageMeta::decode(&spare[..spare_len]), SpareState::Valid(_))
            || void_zeros(&spare[..META_LEN]) > VOID_CLEAR_MAX_ZEROS
        {
            return Ok(None);
        }
        match self.policies.codec().decode(data, &spare[META_LEN..spare_len]) {
            // Corrected bits may be cells a cut left marginal: one read can decode and the next
            // not. Such a page is kept only if a second read decodes too.
            Ok(n) if n > 0 => {
                self.counters.nand_reads += 1;
                self.nand.read_page(page, data, &mut spare[..spare_len])?;
                Ok(self.policies.codec().decode(data, &spare[META_LEN..spare_len]).ok().map(|m| m.max(n)))
            }
            r => Ok(r.ok()),
        }
    }

    /// Step 7: copies the data page `page` (mapped) to the GC stream once a read of it corrects
    /// cleanly (up to `REFRESH_READS` reads: each read draws its own raw bit errors), and maps
    /// the copy. Never copies uncorrected data; if no read corrects, the page stays.
    fn refresh_newest(&mut self, page: PageId) -> Result<(), Error> {
        let d = self.geo.data_bytes as usize;
        let spare_len = META_LEN + self.codec_len;
        let plane = self.ensure_gc_frontier(self.geo.plane_index(self.geo.block_of(page)))?;
        for _ in 0..REFRESH_READS {
            self.counters.nand_reads += 1;
            let (data, spare) = self.buf.split_at_mut(d);
            self.nand.read_page(page, data, &mut spare[..spare_len])?;
            // The auxiliary word (e.g. the first-write scrambler's flags) travels with the data.
            let (lpn, aux) = match PageMeta::decode(&spare[..spare_len]) {
                SpareState::Valid(m) if m.kind == PageKind::Data && m.tag < self.cfg.logical_pages => {
                    (m.tag, m.aux)
                }
                _ => continue,
            };
            // The entry is faulted in before the copy (see `map_io.rs`); the map's I/O leaves
            // the page buffer alone.
            if self.map_get_for_write(lpn)? != Some(page) {
                continue;
            }
            let (data, spare) = self.buf.split_at_mut(d);
            if self.policies.codec().decode(data, &spare[META_LEN..spare_len]).is_err() {
                continue;
            }
            let new =
                self.append(plane, Stream::Gc, PageKind::Data, lpn, aux, Source::Buffer { encode: true })?;
            self.remap(lpn, Some(new))?;
            return Ok(());
        }
        Ok(())
    }

    /// Reads a page whole into the buffer; true if its metadata and codec check out.
    pub(crate) fn page_is_whole(&mut self, page: PageId) -> Result<bool, Error> {
        let d = self.geo.data_bytes as usize;
        let spare_len = META_LEN + self.codec_len;
        self.counters.nand_reads += 1;
        let (data, spare) = self.buf.split_at_mut(d);
        self.nand.read_page(page, data, &mut spare[..spare_len])?;
        if !matches!(PageMeta::decode(&spare[..spare_len]), SpareState::Valid(_)) {
            return Ok(false);
        }
        Ok(self.policies.codec().decode(data, &spare[META_LEN..spare_len]).is_ok())
    }

    /// Step 5, one mapped page (a logical page's or a map page): valid in the bitmap, counted in
    /// its block.
    fn count_valid_at_mount(&mut self, p: PageId) -> Result<(), Error> {
        if !self.geo.contains_page(p) {
            return Err(Error::Corrupt);
        }
        let b = self.geo.block_of(p);
        if self.blocks.state(b) != BlockState::Used {
            return Err(Error::Corrupt);
        }
        // (Without a bitmap, a flash-resident map's caller lent none, two entries naming one
        // page go uncounted here; GC decides such a page's validity from its spare.)
        if let Some(w) = self.valid.get_mut(p.0 as usize / 32) {
            let bit = 1u32 << (p.0 % 32);
            if *w & bit != 0 {
                // Two logical pages on one physical page: not something this FTL writes.
                return Err(Error::Corrupt);
            }
            *w |= bit;
        }
        let v = self.blocks.get(b).valid();
        self.blocks.raw_set_valid(b, v + 1);
        Ok(())
    }

    /// A replayed map page, read whole: its metadata and codec check out (a page that needed
    /// corrections is read a second time and kept only if that read decodes too: a cut can leave
    /// cells marginal).
    fn map_page_whole(&mut self, page: PageId) -> Result<bool, Error> {
        match self.newest_page_check(page)? {
            Some(_) => {
                let d = self.geo.data_bytes as usize;
                Ok(matches!(PageMeta::decode(&self.buf[d..d + META_LEN + self.codec_len]),
                    SpareState::Valid(m) if m.kind == PageKind::Map))
            }
            None => Ok(false),
        }
    }

    /// Step 5: valid bitmap, counts, states and lists from the map. After the anchor's fast
    /// mount or a mount from the pool, a flash-resident map keeps the checkpoint's counts (plus
    /// the replayed pages: no map page is read); after the fast mount, blocks the checkpoint says
    /// are erased stay free.
    fn rebuild(&mut self, mode: Rebuild) -> Result<(), Error> {
        self.dedup_finish_replay();
        let fast = mode == Rebuild::Fast;
        // After a mount from the pool, a flash-resident map of no more map pages than the pool's
        // budget is recounted from its map pages (as many reads as the pool survey at most);
        // a larger one keeps the checkpoint's counts with replay's adjustments (upper bounds).
        let keep_counts = self.map.on_flash()
            && match mode {
                Rebuild::Survey => false,
                Rebuild::Fast => true,
                // (The pool is adopted, so bounded: GC's deferred erase reads the same test.)
                Rebuild::Pool => self.pool_keeps_counts(),
            };
        for b in 0..self.geo.total_blocks() {
            if self.blocks.state(BlockId(b)) == BlockState::Used && !keep_counts {
                self.blocks.raw_set_valid(BlockId(b), 0);
            }
        }
        if self.map.on_flash() && !keep_counts {
            self.for_each_mapping_on_flash(Self::count_valid_at_mount)?;
        }
        for l in 0..self.map.len() {
            if self.map.on_flash() {
                break;
            }
            let Some(p) = self.map.get(l) else { continue };
            // Shared pages are counted once each, below.
            if self.dedup_counted_apart(p) {
                continue;
            }
            self.count_valid_at_mount(p)?;
        }
        self.reuse_rebuild_valid()?;
        self.dedup_rebuild_valid()?;
        for b in 0..self.geo.total_blocks() {
            let b = BlockId(b);
            let info = *self.blocks.get(b);
            match info.state() {
                BlockState::Used if info.valid() > 0 || info.flags() & FLAG_LIVE_JOURNAL != 0 => {}
                BlockState::Free if fast => {}
                BlockState::Used | BlockState::Free => {
                    self.blocks.raw_set(b, BlockState::Dirty, info.erase_count(), 0)
                }
                _ => {}
            }
        }
        self.blocks.relink_all();
        Ok(())
    }
}

/// Where a mount's block table came from (see [`Ftl::rebuild`]).
#[derive(Copy, Clone, PartialEq, Eq)]
enum Rebuild {
    /// Every block's first page and the newest checkpoint.
    Survey,
    /// A clean record's checkpoint, nothing replayed.
    Fast,
    /// A bounded record's checkpoint and pool, replayed.
    Pool,
}

struct Replayed {
    blocks: u32,
    pages: u64,
    max_seq: u64,
    resume: [[Option<(u32, u32)>; 2]; crate::config::MAX_TOTAL_PLANES],
    /// Every void this replay needed was confirmed.
    voids_complete: bool,
    /// The pages step 4 found whole whose data needed correction (at most one per page of the
    /// torn window).
    refresh: [Option<PageId>; MAX_PLANES],
}
