//! Mount with deduplication: regrouping shared pages loaded from the checkpoint under fresh
//! virtual numbers, replaying share records and relocations of shared pages, counting references
//! as replay overwrites and trims map entries, and marking shared pages valid in the rebuild.
//!
//! Replay applies, in global sequence order, exactly what the run did: a share record maps its
//! logical page to the virtual page of its physical page (allocating one and converting the owner
//! if the page was still unique at that point), a shared relocation page moves the virtual page
//! whose physical page it names (after checking the copy is whole), and every replaced map entry
//! drops its reference. Virtual pages whose count is zero at the end are freed.

use nand_hal::{NandFlash, PageId};

use super::is_virtual;
use super::shares::{self, NO_OWNER};
use super::vmap::VIRTUAL_FLAG;
use crate::map::MappingTable;
use crate::policy::PolicySet;
use crate::{Error, Ftl};

impl<N: NandFlash, P: PolicySet, M: MappingTable> Ftl<'_, N, P, M> {
    /// Mount step 2b: turns the checkpoint's flagged physical pages into virtual pages.
    pub(crate) fn dedup_load_checkpoint(&mut self) -> Result<(), Error> {
        self.ext.dedup.vmap.clear();
        self.ext.dedup.pending.clear();
        if let Some(ix) = self.ext.dedup.index.as_deref_mut() {
            ix.clear();
        }
        if self.ext.dedup.index.is_none() {
            // Flagged words stay as they are; the rebuild refuses them.
            return Ok(());
        }
        for lpn in 0..self.map.len() {
            let Some(p) = self.map.get(lpn) else { continue };
            if !is_virtual(p) {
                continue;
            }
            let v = self.dedup_virtual_of(p.0 & !VIRTUAL_FLAG)?;
            self.ext.dedup.vmap.acquire(v);
            self.map.set(lpn, Some(PageId(v | VIRTUAL_FLAG)));
        }
        Ok(())
    }

    fn dedup_virtual_of(&mut self, page: u32) -> Result<u32, Error> {
        if !self.geo.contains_page(PageId(page)) {
            return Err(Error::Corrupt);
        }
        if let Some(v) = self.ext.dedup.vmap.find(page) {
            return Ok(v);
        }
        if let Some(v) = self.ext.dedup.vmap.alloc(page) {
            return Ok(v);
        }
        // Replay keeps unreferenced entries until its end; make room. (Only share records
        // allocate during replay, and a share-journal page ends the newest-page rollback window,
        // so no rollback can need an entry freed here.)
        self.ext.dedup.vmap.free_unreferenced();
        // Still full: the image shares more contents than this secondary map holds.
        self.ext.dedup.vmap.alloc(page).ok_or(Error::Memory)
    }

    /// Replay replaced a map entry.
    pub(crate) fn dedup_replay_unref(&mut self, prev: Option<PageId>) {
        if let Some(p) = prev.filter(|&p| is_virtual(p)) {
            self.ext.dedup.vmap.release(p.0 & !VIRTUAL_FLAG);
        }
    }

    /// Replay restored a map entry.
    pub(crate) fn dedup_replay_ref(&mut self, prev: Option<PageId>) {
        if let Some(p) = prev.filter(|&p| is_virtual(p)) {
            self.ext.dedup.vmap.acquire(p.0 & !VIRTUAL_FLAG);
        }
    }

    /// Replay met a newly written page: a virtual page still naming it (with no references left:
    /// its content was dropped, its block erased and the page written again) is freed, so the
    /// physical page names one content at a time.
    pub(crate) fn dedup_replay_new_page(&mut self, page: PageId) {
        if let Some(v) = self.ext.dedup.vmap.find(page.0) {
            if self.ext.dedup.vmap.get(v).is_some_and(|e| e.refs == 0) {
                self.ext.dedup.vmap.free(v);
            }
        }
    }

    /// Replays a relocation of shared content from physical page `from` to `page`.
    pub(crate) fn dedup_replay_move(&mut self, from: u32, page: PageId) -> Result<(), Error> {
        let Some(v) = self.ext.dedup.vmap.find(from) else {
            // Not shared at this point: the move's sharing was never made durable, and the
            // content still lives at `from`.
            return Ok(());
        };
        if self.page_is_whole(page)? {
            self.dedup_replay_new_page(page);
            self.ext.dedup.vmap.set_page(v, page.0);
        }
        Ok(())
    }

    /// Reads a share-journal page and applies its records; false if the page does not check out.
    pub(crate) fn apply_share_journal(&mut self, page: PageId, count: u32) -> Result<bool, Error> {
        if !self.page_is_whole(page)? || count as usize > shares::page_capacity(self.geo.data_bytes) {
            return Ok(false);
        }
        if self.ext.dedup.index.is_none() {
            // Records without a secondary map: this image needs dedup to mount.
            return if count == 0 { Ok(true) } else { Err(Error::Corrupt) };
        }
        let d = self.geo.data_bytes as usize;
        let logical = self.cfg.logical_pages;
        for k in 0..count as usize {
            let Some(r) = shares::record_at(&self.buf[..d], k) else { return Err(Error::Corrupt) };
            if r.lpn >= logical || (r.owner != NO_OWNER && r.owner >= logical) || r.lpn == r.owner {
                return Err(Error::Corrupt);
            }
            let v = match self.ext.dedup.vmap.find(r.page) {
                Some(v) => v,
                None => {
                    let v = self.dedup_virtual_of(r.page)?;
                    if r.owner != NO_OWNER && self.map.get(r.owner) == Some(PageId(r.page)) {
                        self.map.set(r.owner, Some(PageId(v | VIRTUAL_FLAG)));
                        self.ext.dedup.vmap.acquire(v);
                    }
                    v
                }
            };
            self.ext.dedup.vmap.acquire(v);
            let prev = self.map.set(r.lpn, Some(PageId(v | VIRTUAL_FLAG)));
            self.dedup_replay_unref(prev);
        }
        Ok(true)
    }

    /// After replay: frees the virtual pages nobody references.
    pub(crate) fn dedup_finish_replay(&mut self) {
        self.ext.dedup.vmap.free_unreferenced();
    }

    /// Rebuild: marks every shared physical page valid (once), with the rebuild's checks.
    pub(crate) fn dedup_rebuild_valid(&mut self) -> Result<(), Error> {
        for i in 0..self.ext.dedup.vmap.capacity() as u32 {
            let Some(e) = self.ext.dedup.vmap.get(i) else { continue };
            let p = PageId(e.page);
            if !self.geo.contains_page(p) {
                return Err(Error::Corrupt);
            }
            let b = self.geo.block_of(p);
            // (With second writes a recycled block keeps its valid pages and is `Open`.)
            let state = self.blocks.state(b);
            let open_ok = self.reuse_on() && state == crate::blocks::BlockState::Open;
            if state != crate::blocks::BlockState::Used && !open_ok {
                return Err(Error::Corrupt);
            }
            let w = &mut self.valid[p.0 as usize / 32];
            let bit = 1u32 << (p.0 % 32);
            if *w & bit != 0 {
                return Err(Error::Corrupt);
            }
            *w |= bit;
            let v = self.blocks.get(b).valid();
            self.blocks.raw_set_valid(b, v + 1);
        }
        Ok(())
    }
}
