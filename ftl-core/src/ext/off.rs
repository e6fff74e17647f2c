//! The hooks of techniques whose feature is off: each does nothing, or what the core does alone.
//! They keep `#[cfg]` on items (these `impl` blocks) so the core's function bodies call every
//! hook unconditionally. The hooks of a technique that is on live in its own module, next to
//! its state; their contracts are documented there.

#[cfg(not(all(feature = "wom", feature = "cdm")))]
use nand_hal::BlockId;
#[cfg(not(all(feature = "wom", feature = "dedup", feature = "cdm", feature = "flex-ecc")))]
use nand_hal::NandFlash;
#[cfg(not(all(feature = "wom", feature = "dedup", feature = "cdm", feature = "flex-ecc")))]
use nand_hal::PageId;

#[cfg(not(all(feature = "wom", feature = "dedup", feature = "cdm", feature = "flex-ecc")))]
use super::Extensions;
#[cfg(not(all(feature = "wom", feature = "dedup", feature = "cdm", feature = "flex-ecc")))]
use crate::{map::MappingTable, policy::PolicySet, Error, Ftl};

#[cfg(not(feature = "wom"))]
impl Extensions<'_> {
    pub(crate) fn has_reuse(&self) -> bool {
        false
    }
}

#[cfg(not(feature = "wom"))]
impl<'m, N: NandFlash, P: PolicySet, M: MappingTable> Ftl<'m, N, P, M> {
    pub(crate) fn attach_reuse(&mut self, _ext: &mut Extensions<'m>) -> Result<(), Error> {
        Ok(())
    }
    pub(crate) fn reuse_on(&self) -> bool {
        false
    }
    pub(crate) fn reuse_read_hook(
        &mut self,
        _lpn: u32,
        _page: PageId,
        _shared: bool,
        _out: &mut [u8],
    ) -> Result<Option<u64>, Error> {
        Ok(None)
    }
    pub(crate) fn reuse_second_write_hook(
        &mut self,
        _lpn: u32,
        _data: &[u8],
        _t: crate::policy::Temperature,
    ) -> Result<bool, Error> {
        Ok(false)
    }
    #[cfg(feature = "dedup")]
    pub(crate) fn reuse_unscramble_buf(&mut self) -> Option<bool> {
        Some(false)
    }
    pub(crate) fn reuse_invalidate(&mut self, _old: PageId) {}
    pub(crate) fn reuse_erased(&mut self, _b: BlockId) {}
    pub(crate) fn reuse_gc_hook(
        &mut self,
        _plane: u32,
        _victim: Option<BlockId>,
    ) -> Result<Option<bool>, Error> {
        Ok(None)
    }
    pub(crate) fn reuse_relocate_hook(&mut self, _page: PageId, _plane: u32) -> Result<bool, Error> {
        Ok(false)
    }
    pub(crate) fn aux_of_lost_meta(&self) -> u32 {
        0
    }
    pub(crate) fn scramble_into_buf(&mut self, _lpn: u32, _data: &[u8]) -> u32 {
        0
    }
    pub(crate) fn reuse_top_up(&mut self, _plane: u32) -> Result<(), Error> {
        Ok(())
    }
    pub(crate) fn reuse_reset(&mut self) {}
    #[cfg(feature = "cdm")]
    pub(crate) fn reuse_is_second(&self, _page: PageId) -> bool {
        false
    }
    #[cfg(feature = "cdm")]
    pub(crate) fn reuse_flash_copy(
        &mut self,
        _lpn: u32,
        _page: PageId,
    ) -> Result<Option<Option<u64>>, Error> {
        Ok(None)
    }
    pub(crate) fn reuse_survey_len(&self) -> usize {
        crate::meta::META_LEN
    }
    pub(crate) fn reuse_survey(&mut self, _b: BlockId) -> Result<(), Error> {
        Ok(())
    }
    pub(crate) fn reuse_scan(&mut self, _ckpt_seq: u64) -> Result<(), Error> {
        Ok(())
    }
    pub(crate) fn reuse_replays(&self, _b: BlockId) -> bool {
        false
    }
    pub(crate) fn reuse_load_head(
        &mut self,
        _block: u32,
        _page: u32,
        _ckpt_seq: u64,
    ) -> Result<Option<(u32, u64, u32)>, Error> {
        Ok(None)
    }
    pub(crate) fn reuse_newest_check(&mut self, _page: PageId) -> Result<Option<Option<u32>>, Error> {
        Ok(None)
    }
    pub(crate) fn reuse_void_newest(&mut self, _page: PageId) -> Option<bool> {
        None
    }
    pub(crate) fn reuse_rebuild_valid(&mut self) -> Result<(), Error> {
        Ok(())
    }
    pub(crate) fn reuse_after_mount(&mut self) {}
}

#[cfg(not(feature = "dedup"))]
impl Extensions<'_> {
    pub(crate) fn has_dedup(&self) -> bool {
        false
    }
}

#[cfg(not(feature = "dedup"))]
impl<'m, N: NandFlash, P: PolicySet, M: MappingTable> Ftl<'m, N, P, M> {
    pub(crate) fn attach_dedup(&mut self, _ext: &mut Extensions<'m>) -> Result<(), Error> {
        Ok(())
    }
    pub(crate) fn dedup_on(&self) -> bool {
        false
    }
    pub(crate) fn dedup_keep_reserve(&mut self) -> Result<(), Error> {
        Ok(())
    }
    pub(crate) fn dedup_write_hook(&mut self, _lpn: u32, _data: &[u8], _n: u32) -> Result<bool, Error> {
        Ok(false)
    }
    pub(crate) fn dedup_write_many_hook(&mut self, _pages: &[(u32, &[u8])]) -> Result<bool, Error> {
        Ok(false)
    }
    pub(crate) fn dedup_order_before(&mut self, _lpn: u32, _count: u32) -> Result<(), Error> {
        Ok(())
    }
    pub(crate) fn dedup_flush_pending(&mut self, _may_gc: bool) -> Result<(), Error> {
        Ok(())
    }
    pub(crate) fn dedup_resolve(&self, p: PageId) -> (PageId, bool) {
        (p, false)
    }
    pub(crate) fn dedup_unref(&mut self, old: PageId) -> Option<PageId> {
        Some(old)
    }
    pub(crate) fn dedup_page_invalidated(&mut self, _p: PageId) {}
    pub(crate) fn dedup_relocate_hook(&mut self, _page: PageId, _plane: u32) -> Result<bool, Error> {
        Ok(false)
    }
    pub(crate) fn dedup_moved(&mut self, _from: PageId, _to: PageId) {}
    pub(crate) fn dedup_export(&self, _words: &mut [u32]) {}
    pub(crate) fn dedup_checkpointed(&mut self) {}
    pub(crate) fn dedup_load_checkpoint(&mut self) -> Result<(), Error> {
        Ok(())
    }
    pub(crate) fn dedup_is_move(&self, _aux: u32) -> bool {
        false
    }
    pub(crate) fn dedup_replay_move(&mut self, _from: u32, _page: PageId) -> Result<(), Error> {
        Ok(())
    }
    pub(crate) fn dedup_replay_unref(&mut self, _prev: Option<PageId>) {}
    pub(crate) fn dedup_replay_ref(&mut self, _prev: Option<PageId>) {}
    pub(crate) fn dedup_replay_new_page(&mut self, _page: PageId) {}
    pub(crate) fn dedup_apply_journal(
        &mut self,
        _page: PageId,
        _count: u32,
        _aux: u32,
    ) -> Result<Option<bool>, Error> {
        Ok(None)
    }
    pub(crate) fn dedup_finish_replay(&mut self) {}
    pub(crate) fn dedup_counted_apart(&self, _p: PageId) -> bool {
        false
    }
    pub(crate) fn dedup_rebuild_valid(&mut self) -> Result<(), Error> {
        Ok(())
    }
}

#[cfg(not(feature = "cdm"))]
impl Extensions<'_> {
    pub(crate) fn has_cache(&self) -> bool {
        false
    }
}

#[cfg(not(feature = "cdm"))]
impl<'m, N: NandFlash, P: PolicySet, M: MappingTable> Ftl<'m, N, P, M> {
    pub(crate) fn attach_cache(
        &mut self,
        _ext: &mut Extensions<'m>,
        _open: super::Open,
    ) -> Result<(), Error> {
        Ok(())
    }
    pub(crate) fn nv_on(&self) -> bool {
        false
    }
    pub(crate) fn nv_after_mount(&mut self) {}
    pub(crate) fn nv_holds(&self, _lpn: u32) -> bool {
        false
    }
    pub(crate) fn nv_takes_writes(&self) -> bool {
        false
    }
    pub(crate) fn nv_may_write_back(&self, _k: usize) -> bool {
        false
    }
    pub(crate) fn nv_read_hit(&mut self, _lpn: u32, _out: &mut [u8]) -> Result<bool, Error> {
        Ok(false)
    }
    pub(crate) fn nv_fill(&mut self, _lpn: u32, _data: &[u8], _seq: u64) -> Result<(), Error> {
        Ok(())
    }
    pub(crate) fn nv_after_write(&mut self, _lpn: u32, _data: &[u8], _seq: u64) -> Result<(), Error> {
        Ok(())
    }
    pub(crate) fn nv_write_hook(&mut self, _lpn: u32, _data: &[u8]) -> Result<bool, Error> {
        Ok(false)
    }
    pub(crate) fn nv_trim(&mut self, _lpn: u32, _count: u32) -> Result<(), Error> {
        Ok(())
    }
    pub(crate) fn nv_drop_removable(&mut self, _b: BlockId) {}
    pub(crate) fn nv_reconcile(&mut self) -> Result<(), Error> {
        Ok(())
    }
}

#[cfg(not(feature = "flex-ecc"))]
impl Extensions<'_> {
    pub(crate) fn has_flex(&self) -> bool {
        false
    }
}

#[cfg(not(feature = "flex-ecc"))]
impl super::ExtState<'_> {
    /// Every copy is correcting (the codec's single format), re-encoded if it was corrected.
    pub(crate) fn flex_move_plan(
        &self,
        _lpn: u32,
        _stored: Option<crate::policy::PageFormat>,
        _decoded_ok: bool,
        encode: bool,
    ) -> crate::gc::MovePlan {
        crate::gc::MovePlan {
            format: crate::policy::PageFormat::Correcting,
            encode,
            note: crate::gc::MoveNote::Nothing,
        }
    }
}

#[cfg(not(feature = "flex-ecc"))]
impl<'m, N: NandFlash, P: PolicySet, M: MappingTable> Ftl<'m, N, P, M> {
    pub(crate) fn attach_flex(&mut self, _ext: &mut Extensions<'m>) -> Result<(), Error> {
        Ok(())
    }
    pub(crate) fn flex_on(&self) -> bool {
        false
    }
    pub(crate) fn flex_note_write(&mut self, _lpn: u32, _n: u32) {}
    pub(crate) fn flex_page_format(
        &self,
        _kind: crate::meta::PageKind,
        _host: bool,
    ) -> crate::policy::PageFormat {
        crate::policy::PageFormat::Correcting
    }
    pub(crate) fn flex_before_move(
        &mut self,
        _lpn: u32,
        _decoded_ok: bool,
        encode: bool,
    ) -> (bool, crate::policy::PageFormat) {
        (encode, crate::policy::PageFormat::Correcting)
    }
    pub(crate) fn flex_begin_move(
        &mut self,
        _lpn: u32,
        _plan: crate::gc::MovePlan,
    ) -> crate::policy::PageFormat {
        crate::policy::PageFormat::Correcting
    }
    pub(crate) fn flex_after_move(&mut self, _saved: crate::policy::PageFormat) {}
    #[cfg_attr(not(feature = "dedup"), allow(dead_code))] // used by deduplication only
    pub(crate) fn flex_refuses_share(&mut self, _page: PageId) -> Result<bool, Error> {
        Ok(false)
    }
    #[cfg_attr(not(feature = "dedup"), allow(dead_code))] // used by deduplication only
    pub(crate) fn flex_page_is_correcting(&mut self, _page: PageId) -> Result<bool, Error> {
        Ok(true)
    }
}
