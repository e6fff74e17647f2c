//! Garbage collection: moving a block's valid pages to the GC stream of its plane (of another
//! plane when its own has neither an open GC block nor a free block) and erasing (or, for a
//! failing block, retiring) it. After blocks were retired, GC restores every plane's free reserve
//! (see [`Ftl::retire_pending`]), so that failures cannot leave GC without a block to copy into.
//!
//! Victims come from the [`crate::policy::VictimPolicy`] (greedy by default). A victim is taken
//! out of the lists while it is collected and put back if an error stops the collection, so a
//! failure in the middle of a copy (program failure on the destination, power loss) never loses
//! data: the victim keeps every page not yet copied, and each copy is mapped only once programmed.
//! Before an erase or a retirement, pending trims are journaled (the trimmed pages were not
//! copied) and a block with a live journal page triggers a checkpoint first. When the free blocks
//! do not cover that checkpoint (and one block for GC), such a block is passed over for a victim
//! without a live journal page, and one already collected waits in the lists, unerased, until
//! they do; a checkpoint due when GC opens a block waits likewise (`frontier.rs`). Without this,
//! a device whose mounts after cuts had used up its free blocks failed with `NoSpace`.

use nand_hal::{BlockId, NandFlash, PageId};

use crate::blocks::{BlockState, FLAG_LIVE_JOURNAL};
use crate::frontier::Source;
use crate::gc_copy_back::CopyBack;
use crate::map::MappingTable;
use crate::meta::{PageKind, PageMeta, SpareState, META_LEN};
use crate::policy::{CodecError, PageCodec, PageFormat, PolicySet, Stream, VictimAction, VictimPolicy};
use crate::{Error, Ftl};

/// How GC writes its copy of a data page, decided from the page as read before anything is
/// programmed (FlexECC's move hook, `ExtState::flex_move_plan`; without FlexECC the page's
/// own protection, re-encoded if the codec corrected it). The plain move and a copy-back
/// (`gc_copy_back.rs`) take the same plan for the same page.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) struct MovePlan {
    /// The copy's format.
    pub(crate) format: PageFormat,
    /// Whether the codec bytes are computed anew (corrected data, or a format change); else
    /// they are copied as read.
    pub(crate) encode: bool,
    /// What the hook records once the copy is issued (`Ftl::flex_begin_move`).
    pub(crate) note: MoveNote,
}

/// FlexECC's record of a move (its counters and RAM marks; nothing without FlexECC).
#[cfg_attr(not(feature = "flex-ecc"), allow(dead_code))] // FlexECC's notes
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) enum MoveNote {
    /// Nothing to record (no FlexECC, or a stored format nobody can read).
    Nothing,
    /// A flush-read correcting page dropped to the detecting format.
    Converted,
    /// A detecting page kept detecting.
    DetectingKept,
    /// A correcting page kept correcting.
    CorrectingKept,
}

/// What a plain GC move copies ([`Ftl::relocate_plan`]): the copy's logical page and auxiliary
/// word, whether its codec bytes are computed anew (the codec corrected the data), and whether
/// the data decoded (FlexECC's move hook asks).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) struct CopyPlan {
    pub(crate) lpn: u32,
    pub(crate) aux: u32,
    pub(crate) encode: bool,
    pub(crate) decoded_ok: bool,
}

/// What happens to a collected block.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) enum Finish {
    /// Erase it and free it.
    Erase,
    /// Mark it bad.
    Retire,
}

impl<N: NandFlash, P: PolicySet, M: MappingTable> Ftl<'_, N, P, M> {
    /// Collects one victim in `plane`; false if the plane has none.
    pub(crate) fn gc_one(&mut self, plane: u32) -> Result<bool, Error> {
        // A victim paced GC started in this plane is finished first (it is out of the lists).
        if self.paced_victim(plane).is_some() {
            self.pace_advance(plane, u32::MAX)?;
            return Ok(true);
        }
        let view = self.blocks.view(plane);
        let Some(victim) = self.policies.victim().select(&view) else {
            // Second writes may still recycle or erase one of their blocks.
            if self.reuse_gc_hook(plane, None)? == Some(true) {
                return Ok(true);
            }
            // A plane that GC cannot gain room in moves full blocks away (`emigration.rs`).
            let Some(full) = self.emigration_victim(plane) else { return Ok(false) };
            self.collect(full, Finish::Erase)?;
            self.counters.gc_blocks += 1;
            return Ok(true);
        };
        let VictimAction::Erase = self.policies.victim().action(&view, victim);
        let victim = self.victim_within_room(plane, victim);
        if !self.geo.contains_block(victim)
            || self.geo.plane_index(victim) != plane
            || self.blocks.state(victim) != BlockState::Used
        {
            return Ok(false);
        }
        // Second writes decide recycle or erase for the victim.
        if let Some(collected) = self.reuse_gc_hook(plane, Some(victim))? {
            return Ok(collected);
        }
        self.collect(victim, Finish::Erase)?;
        self.counters.gc_blocks += 1;
        Ok(true)
    }

    /// Whether erasing `b` now would force a checkpoint (it holds a live journal page) that the
    /// free blocks do not cover (`checkpoint_need`: its blocks and one for GC).
    fn erase_waits_for_room(&self, b: BlockId) -> bool {
        self.blocks.get(b).flags() & FLAG_LIVE_JOURNAL != 0
            && self.blocks.total_free() < self.checkpoint_need()
    }

    /// The victim policy's choice `victim`, or, when its erase would wait for room
    /// ([`Self::erase_waits_for_room`]), the used block of `plane` with the fewest valid pages
    /// that holds no live journal page, if there is one: collecting it needs no checkpoint and
    /// brings the free blocks back.
    pub(crate) fn victim_within_room(&self, plane: u32, victim: BlockId) -> BlockId {
        if !self.geo.contains_block(victim) || !self.erase_waits_for_room(victim) {
            return victim;
        }
        self.blocks.min_valid_without(plane, FLAG_LIVE_JOURNAL).unwrap_or(victim)
    }

    /// Moves the valid pages of `b` away, then erases or retires it.
    pub(crate) fn collect(&mut self, b: BlockId, finish: Finish) -> Result<(), Error> {
        // Share records first: the pages they made invalid may be in this block.
        self.dedup_flush_pending(false)?;
        let before = self.blocks.state(b);
        self.blocks.set_state(b, BlockState::Victim);
        if let Err(e) = self.move_valid_pages(b) {
            self.blocks.set_state(b, before);
            return Err(e);
        }
        self.finish_collect(b, finish, before)
    }

    /// The end of a collection, once `b` holds no valid page: erase or retire it.
    pub(crate) fn finish_collect(
        &mut self,
        b: BlockId,
        finish: Finish,
        before: BlockState,
    ) -> Result<(), Error> {
        // A victim whose erase needs a checkpoint the free blocks cannot hold goes back to the
        // lists with no valid page (every page superseded: what a cut during its collection
        // leaves); it is erased, with its checkpoint, once GC brought the free blocks back (the
        // victim choice passes over it until then). Found by random cuts on a 32-block device
        // whose mounts after cuts had left no free block (tests/tests/copy_back.rs).
        if finish == Finish::Erase && self.erase_waits_for_room(b) {
            self.blocks.set_state(b, before);
            return Ok(());
        }
        // Erasing the block or marking it bad both take its pages out of every later replay:
        // first journal pending trims (the trimmed pages were not copied, and an older copy
        // elsewhere would come back) and, if it holds a live journal page, write a checkpoint.
        let prepared = if !self.trims.is_empty() { self.write_journal() } else { Ok(()) };
        let prepared = prepared.and_then(|_| {
            if self.blocks.get(b).flags() & FLAG_LIVE_JOURNAL != 0 {
                self.write_checkpoint()
            } else {
                Ok(())
            }
        });
        if let Err(e) = prepared {
            self.blocks.set_state(b, before);
            return Err(e);
        }
        // A victim outside the mount pool joins it before its erase (so a mount after a cut reads
        // it and finds it erased or reused, never trusts the checkpoint's count for it).
        if finish == Finish::Erase {
            if let Err(e) = self.pool_add_victim(b) {
                self.blocks.set_state(b, before);
                return Err(e);
            }
        }
        match finish {
            Finish::Erase => {
                self.blocks.set_state(b, BlockState::Dirty);
                // With multi-plane erases the allocator erases it, with its siblings' next
                // blocks (see `multiplane.rs`, **Erase**; not while a mount from the pool would
                // keep a flash-resident map's valid counts as upper bounds: it would take an
                // unerased victim for a used block, `Ftl::pool_keeps_counts`).
                if self.multi_io_on() {
                    return Ok(());
                }
                self.erase_free_block(b)
            }
            Finish::Retire => {
                self.retire_now(b);
                Ok(())
            }
        }
    }

    /// What a technique does when GC takes block `b` as a victim, before its pages move: with an
    /// NV cache (feature `cdm`), cached valid pages are dropped instead of copied.
    pub(crate) fn victim_taken(&mut self, b: BlockId) {
        self.nv_drop_removable(b);
    }

    fn move_valid_pages(&mut self, b: BlockId) -> Result<(), Error> {
        self.victim_taken(b);
        let plane = self.geo.plane_index(b);
        // One page, or one GC stripe (`gc_stripe.rs`), at a time.
        let mut cur = self.victim_cursor();
        while self.blocks.get(b).valid() > 0 {
            if self.gc_step(b, plane, &mut cur)? == 0 {
                break;
            }
        }
        Ok(())
    }

    /// Copies one valid page to the GC stream of `plane` and remaps it: by copy-back where it
    /// qualifies (`gc_copy_back.rs`), else (or when its check aborts) by a read and a program.
    pub(crate) fn relocate(&mut self, page: PageId, plane: u32) -> Result<(), Error> {
        // A second write or a shared page moves its own way (see `ext`).
        if self.reuse_relocate_hook(page, plane)? || self.dedup_relocate_hook(page, plane)? {
            return Ok(());
        }
        let plane = self.ensure_gc_frontier(plane)?;
        self.counters.nand_reads += 1;
        let (lpn, new) = match self.try_copy_back(page, plane)? {
            CopyBack::Moved { lpn, new } => (lpn, new),
            CopyBack::Aborted { decoded } => match self.relocate_read(page, plane, decoded)? {
                Some(moved) => moved,
                None => return Ok(()),
            },
            CopyBack::NotTried => {
                let d = self.geo.data_bytes as usize;
                let (data, spare) = self.buf.split_at_mut(d);
                self.nand.read_page(page, data, &mut spare[..META_LEN + self.codec_len])?;
                match self.relocate_read(page, plane, None)? {
                    Some(moved) => moved,
                    None => return Ok(()),
                }
            }
        };
        self.dedup_moved(page, new);
        self.remap(lpn, Some(new))?;
        self.counters.gc_page_copies += 1;
        Ok(())
    }

    /// The plain move of `page`, read into the page buffer (`decoded`: the codec's answer if a
    /// copy-back's check already decoded it): programs its copy on the GC stream of `plane` and
    /// returns (logical page, new page); `None` if nothing was to move (a map page is written
    /// again by the map, a page mapped nowhere is dropped).
    fn relocate_read(
        &mut self,
        page: PageId,
        plane: u32,
        decoded: Option<Result<u32, CodecError>>,
    ) -> Result<Option<(u32, PageId)>, Error> {
        let Some(plan) = self.relocate_plan(page, 0, decoded)? else { return Ok(None) };
        // FlexECC: keep the page's format, or drop a flush-read page to the detecting format.
        let (encode, saved) = self.flex_before_move(plan.lpn, plan.decoded_ok, plan.encode);
        let new =
            self.append(plane, Stream::Gc, PageKind::Data, plan.lpn, plan.aux, Source::Buffer { encode });
        self.flex_after_move(saved);
        Ok(Some((plan.lpn, new?)))
    }

    /// The decision part of a plain move (shared by [`Self::relocate_read`] and GC stripes,
    /// `gc_stripe.rs`): `page` was read into page buffer `slot` (0: the page buffer; `j > 0`: GC
    /// stripes' `j`-th extra page, [`crate::gc_stripe::slot_mut`]). Decides which logical page
    /// the copy is of (its metadata, checked against the map; a map search when the metadata
    /// cannot be trusted), corrects the data in the buffer where the codec can, and says whether
    /// the codec bytes are to be computed anew. `None`: nothing to copy (a map page, written
    /// again by the map here; a page mapped nowhere, dropped).
    pub(crate) fn relocate_plan(
        &mut self,
        page: PageId,
        slot: usize,
        decoded: Option<Result<u32, CodecError>>,
    ) -> Result<Option<CopyPlan>, Error> {
        let d = self.geo.data_bytes as usize;
        let raw = self.buf.len();
        let spare_len = META_LEN + self.codec_len;
        // The auxiliary word (e.g. the first-write scrambler's flags) travels with the data.
        // The entry is faulted in before the copy is programmed (see `map_io.rs`); the map's
        // I/O leaves the page buffers alone.
        let meta = {
            let b = crate::gc_stripe::slot_mut(self.buf, self.gc_extra, raw, slot).ok_or(Error::Memory)?;
            PageMeta::decode(&b[d..d + spare_len])
        };
        let (lpn, aux) = match meta {
            SpareState::Valid(m) if m.kind == PageKind::Map => {
                self.relocate_map_page(page, m.tag)?;
                return Ok(None);
            }
            SpareState::Valid(m)
                if m.kind == PageKind::Data
                    && m.tag < self.cfg.logical_pages
                    && self.map_get_for_write(m.tag)? == Some(page) =>
            {
                (Some(m.tag), m.aux)
            }
            _ => (self.find_lpn(page)?, self.aux_of_lost_meta()),
        };
        let Some(lpn) = lpn else {
            // Not mapped after all: nothing to move (without a bitmap it was never counted).
            if !self.valid.is_empty() {
                self.set_valid_bit(page, false);
            }
            return Ok(None);
        };
        // Correct what the codec can before copying; data it cannot correct is copied raw, so
        // reads keep reporting it as uncorrectable instead of returning wrong data.
        let decoded = match decoded {
            Some(r) => r,
            None => {
                let b =
                    crate::gc_stripe::slot_mut(self.buf, self.gc_extra, raw, slot).ok_or(Error::Memory)?;
                let (data, spare) = b.split_at_mut(d);
                self.policies.codec().decode(data, &spare[META_LEN..spare_len])
            }
        };
        let encode = matches!(decoded, Ok(n) if n > 0);
        Ok(Some(CopyPlan { lpn, aux, encode, decoded_ok: decoded.is_ok() }))
    }

    /// The logical page mapped to `page`, by searching the map (used only when the spare cannot be
    /// trusted).
    fn find_lpn(&mut self, page: PageId) -> Result<Option<u32>, Error> {
        for l in 0..self.map.len() {
            if self.map_get(l)? == Some(page) {
                return Ok(Some(l));
            }
        }
        Ok(None)
    }

    /// Retires every block a program failed on (moves its data, then marks it bad), then, if
    /// blocks were retired since the last time, restores every plane's free reserve.
    ///
    /// Failures take free blocks without GC: a failed program's retry opens a block, the
    /// retirement's copies open GC blocks, a failed erase loses a free block. Host writes top up
    /// only the plane whose host block they open, so without this a second failure can find both
    /// planes without a free block, and GC, which needs one to free any, could not run again.
    pub(crate) fn retire_pending(&mut self) -> Result<(), Error> {
        while let Some(b) = self.blocks.next_retiring() {
            self.collect(b, Finish::Retire)?;
        }
        if self.reserve_spent {
            for plane in 0..self.geo.total_planes() {
                self.ensure_free(plane)?;
            }
            self.reserve_spent = false;
        }
        Ok(())
    }
}
