//! Multi-plane operations: erases, programs and reads of sibling planes issued as one
//! [`NandFlash::erase_multi`] / [`NandFlash::program_multi`] / [`NandFlash::read_multi`].
//!
//! What it owns: the grouping of operations into multi-plane calls, the striping of host writes
//! over the planes of a LUN (in either [`StripeOrder`]), and the handling of a multi-plane call that fails part way. It adds
//! no RAM but a `bool` and a `u8` in [`Ftl`] (`multi_plane`, `stripe_misses`): the spare areas of a group's pages are
//! assembled in the data area of the FTL's page buffer (host data comes from the caller), so a
//! group needs `planes x (META_LEN + codec bytes) <= data_bytes + spare_bytes` (always true on
//! real geometries; a group that does not fit is written page by page).
//!
//! When: on by default ([`Ftl::set_multi_plane`]) with more than one plane per LUN, with either
//! map, with no technique attached, and with FlexECC, deduplication and the NV cache in any
//! stack (`multi_plane_allowed`); with deduplication stacked with the NV cache, or a write-back
//! NV cache, multi-plane reads and erases but single-plane programs (`multi_program_allowed`,
//! `Ftl::multi_program_on`; below; deduplication alone holds a request's unique pages for a
//! stripe, **Deduplication**); second writes keep the single-plane operations. GC's deferred
//! erase (below) with the flat map (with or without FlexECC, deduplication or the NV cache), and
//! with the cached map unless a mount from the pool would keep its valid counts
//! (`Ftl::pool_keeps_counts`: more map pages than `mount_pool_blocks` while the pool is bounded,
//! as on the firmware board, 256 > 160).
//!
//! **Deduplication** (feature `dedup`, flat map only). Reads: a multi-plane read resolves each
//! logical page as [`Ftl::read_one`] does (a shared page to the physical page of its content,
//! whose spare names its first owner or where it moved from, so a shared page's tag is not
//! checked against the logical page), and groups by that physical page; two logical pages
//! sharing one page are never in one call (one plane each). Stacked with the NV cache, each
//! page asks the cache first and a group holds uncached pages only (**The NV cache**, Read,
//! below; a shared page's re-read check compares the physical page it resolved to). Erases: the deferred erase touches
//! nothing deduplication keeps: GC journals pending share records before it copies anything
//! (`collect`), so every record that invalidated a page of the victim is on flash before the
//! victim goes `Dirty`; the index is told of each moved or dead page as GC moves it, and the
//! reference counts live in the virtual entries, not in the block; a victim holding a share
//! journal page or a shared page's relocation copy gets its checkpoint before it goes `Dirty`
//! (`FLAG_LIVE_JOURNAL`, as a trim journal's block). A victim left `Dirty` is the state a cut
//! before today's erase leaves, which mount (`dedup/mount.rs`) already replays: a relocation
//! whose source is still unerased reads as before. Programs (`dedup/stripe.rs`): the write path
//! probes a request's pages in order, shares a hit at once (its record pending, as before), and
//! holds each miss or unprobed page until a stripe's worth is held (or the request ends); the held
//! pages then go to [`Self::write_striped`] (one multi-plane program per aligned stripe, each page
//! remapped in order after it), and each probed one is inserted in the index at its final location
//! after that. Before the first page a request holds, the planes are realigned if requests keep
//! starting off them (**Realignment**). The held pages are programmed first when a page's data
//! equals a held page's (one content twice in a stripe: the second becomes a share of the first,
//! after its program) or its probe hits what a held page's logical page maps (probed again after
//! the program), so that every page is shared or written as page by page (the same contents,
//! references and counters, tests/tests/multiplane.rs). Share records:
//! the records pending before a request that name its pages are journaled first
//! (`dedup_order_before`) and a request names each logical page once, so no record is due
//! inside a stripe. Power loss: as for host stripes (below), mount checks the newest
//! `planes_per_lun` replayed data pages (`recovery.rs` `torn_window`); a share taken before the
//! program whose record was in RAM is lost with the unacknowledged request.
//! [`Ftl::write_many`] with deduplication runs the write path on each page as a one-page request
//! of its own (classified, ordered after pending records and trims, probed), but holds the
//! misses across the batch as a request's (`dedup/mod.rs` `write_many_dedup`): a batch that
//! names a logical page again is cut before it, so that each part, as a request, names each
//! logical page once (the rules above hold per part).
//!
//! **FlexECC** (feature `flex-ecc`) does the same per page on either path: `write` and
//! `write_many` note each page's RAM hints and counters before any program
//! (`Ftl::flex_note_write`: drop mark cleared, detecting bit set as the intent says); each page
//! of a stripe is encoded in the format the write's intent asks for
//! (`Ftl::flex_page_format`, as `append` does for a host page, the format tag in its codec
//! bytes), and a page the stripe writes again one by one after a failure the same; a
//! multi-plane read checks each page as [`Ftl::read`] of one page does (the codec decodes the
//! format its tag names; FlexECC's reporting reads, flush-reads and verifies are single-page
//! calls and stay single-plane). Erases touch nothing of FlexECC, so the deferred erase runs
//! too: its marks are per logical page, and a victim left `Dirty` holds only superseded pages
//! (GC converted or kept each moved page's format before). Its codec bytes (a tag byte, the BCH
//! parity and a CRC-32C) count in the room rule above (BCH t = 8 over a 2 KiB page with 64
//! spare bytes: 4 x (28 + 57) = 340 bytes of 2112).
//!
//! **The NV cache** (feature `cdm`; flat map only, it is refused on the other). Its per-page
//! hooks run on the multi-plane paths as on the single-page ones, in the host's page order:
//! - Program: a write-through cache copies each page of a stripe after the stripe's program and
//!   that page's remap (`nv_after_write`). A copy may evict the least recently used slot, and
//!   evicting an only copy (a page GC dropped) writes it to flash, which may run GC: between a
//!   stripe's program and its last page's remap that would program a later page's old data (its
//!   only copy written back, or its old page moved by GC) with a larger sequence number than the
//!   new page, which replay would then take. So a stripe goes out as one multi-plane program only
//!   if none of the `k` least recently used slots holds an only copy (its `k` copies evict at
//!   most those), checked right before the program; otherwise page by page. A write-back cache
//!   (`cdm-wb`) takes every host page (`Ftl::multi_program_on` is off with it: [`Ftl::write`]
//!   and [`Ftl::write_many`] do not stripe), so its power-loss contract meets no stripe; mount
//!   still checks `planes_per_lun` pages for tearing (`multi_program_possible`): the write-back
//!   setting is the mount's, and the life before the cut may have striped write-through. Its destage (an evicted only copy written
//!   back, or `nv_write_back_all`) stays single-page: a multi-plane program needs every page's
//!   data in RAM at once, and a slot's data is read out of the NV memory into the FTL's one page
//!   buffer (`Nvm` is read by copy, not addressed), so striping it needs a page buffer per extra
//!   plane (2 KiB each on the board); eviction frees one slot at a time, and the pages must become
//!   clean slots, not new cache entries as host stripes' pages do.
//! - Read: each page asks the cache first, as a single read does (a hit is served from it); a
//!   multi-plane group holds only pages not cached, and after its read each page, in order, asks
//!   the cache (a miss) and is copied into it with its sequence number (`nv_fill`); a page whose
//!   mapping moved since the read (a copy's eviction wrote an only copy back, and GC ran) is read
//!   again alone (the physical page compared, a shared page's as deduplication resolves it: its
//!   map entry is virtual). [`StripeOrder::ChannelFirst`] reads are not reordered by LUN with the cache (it
//!   sees the host's order), so they group neighbouring pages only.
//! - Erase: GC drops a victim's cached pages before moving the rest, as before, and leaves the
//!   victim `Dirty` for the allocator's multi-plane erase (**Erase**, below): a dropped page is
//!   superseded by its slot, whose NV directory entry tells mount what it needs whether the
//!   victim is erased or not (a cut before a single-plane GC's erase leaves that state too).
//!
//! **A flash-resident map** ([`crate::CachedMap`]). A single page's write faults its entry in
//! with room for its change (`map_io.rs`) before its program, so that map write-backs precede the
//! page and mount's replay never needs more room than the buffer had. A multi-plane program of
//! `k` pages needs that for all `k` at once: the rule (`Ftl::map_fault_in_group`,
//! [`MappingTable::need_group`]) is that before the program every page's entry is in RAM
//! (buffered, or its read line cached) *and* the dirty-entry buffer has a free slot for each
//! entry not buffered yet (map pages written back, the fullest first, until it has); the `k`
//! remaps after the program then do no map I/O (no line is loaded between them, so none is
//! evicted, and each finds its slot), and a cut during the program leaves at most a full buffer's
//! worth of changes to replay. A stripe whose entries cannot all be in RAM at once (their lines
//! in one set of fewer ways than lines, or a buffer of fewer slots than `k`: only tiny caches) is
//! programmed page by page, each page faulting its own entry in. A multi-plane read faults the
//! entries of its group in first (read fault-ins; an entry evicted by another's fault-in ends
//! the group there, and its page is read alone). RAM cost: none, nothing is pinned (the
//! `k <= MAX_PLANES` entries are checked resident right before the program, and their `k` free
//! slots are made by writing a map page back early where needed). Map I/O: the same map reads as
//! single-page writes; a map page may be written back up to `k - 1` changes earlier (measured:
//! within 1.2% of the map I/O with multi-plane off, docs/eval/multiplane/README.md). Code: on
//! the firmware board (cached map) the multi-plane paths were compiled out before; they add
//! 13.3 KB of `.text`.
//!
//! **Erase.** GC no longer erases its victim as it finishes it: the victim becomes `Dirty` (free,
//! to be erased before use, as checkpoint blocks and blocks a mount found stale already were).
//! With a flash-resident map it still erases at once while a mount from the pool would keep that
//! map's valid counts (`Ftl::pool_keeps_counts`; `recovery.rs` `rebuild` decides with the same
//! test): such a mount takes the checkpoint's count (less replay's adjustments, an upper bound)
//! for a block whose first page is older than the checkpoint, so an emptied victim not erased yet
//! would come back `Used`, holding nothing, until GC took it again (measured: 1 to 7 such blocks
//! per cut, until writes failed with `NoSpace`; tests/tests/multiplane.rs
//! `cached_map_pool_mount_takes_no_unerased_victim_for_a_used_block`). Otherwise a mount needs
//! nothing new: one that recounts (a survey, a pool mount of a map of at most `mount_pool_blocks`
//! map pages) counts the victim empty, a checkpoint records it `Dirty`, and a record is bounded
//! (the test reads the pool state) only after a checkpoint, which recorded every victim left
//! `Dirty` while it was not. Making the kept counts safe would need each deferred victim known
//! to the mount: a record per victim (anchor wear), a marker page per victim (a program, about
//! what pairing saves), or a mount that recounts (every map page read). Format's stripes and
//! `Dirty` blocks the allocator picks are erased with their siblings on either map.
//! The allocator erases a `Dirty` block it picks together with the block each sibling plane of
//! the same LUN would pick next, if that one is `Dirty` too (the same pick rule and pool mask, so
//! a bounded mount pool still covers every erased block); the allocator ranks a `Dirty` block by
//! its erase count after its erase and takes an erased block first on equal wear
//! (`blocks::wear_key`), so the sibling's next allocation takes the block prepared for it. Format erases the
//! sibling blocks of each stripe together. A block whose erase fails (index returned) is retired
//! exactly as after a single erase; the blocks after it in the call are in an unknown state and
//! are erased again (the HAL contract). Power loss: the blocks before the cut one are erased,
//! the cut one partly erased, the rest untouched (the emulator's default semantics,
//! `nand-emu/power.rs`), or every block of the call partly erased (`MultiPlaneCut::WholeCall`);
//! all were `Dirty` (nothing live), so a mount finds each erased, garbage or stale, which it
//! already handles for a cut single erase. Leaving a victim `Dirty` until its erase is the state
//! a cut just before today's erase leaves, only kept longer: every page in it is superseded by a
//! newer page, a journaled trim (journaled before the victim is released) or a checkpoint.
//!
//! **Program (striping).** Host pages go round robin over the planes as before; the pages of one
//! request ([`Ftl::write`] of several pages, or [`Ftl::write_many`]) that land on the planes of
//! one LUN on the same stream are a *stripe*. In [`StripeOrder::PlaneFirst`] order (the default)
//! those are consecutive pages. In [`StripeOrder::ChannelFirst`] order consecutive pages go to
//! different LUNs: the pages of one call, a round's worth (`total_planes`) at a time, go to each
//! LUN in rotation order, each taking as many consecutive pages as it has slots among them,
//! on those planes of it: a *stripe*. A request of `luns` pages or fewer is one
//! single-plane program on each of that many LUNs (and channels); a longer one (or a batch of
//! requests, [`Ftl::write_many`]) fills each LUN's planes with one multi-plane program, so the
//! multi-plane programs stay while the LUNs work in parallel. A stripe whose frontiers had
//! drifted writes the pages that line them up again, and the pages it did not take go to the
//! next LUN, and what no LUN took to the first LUN of the round's worth: a drifted LUN then
//! takes an odd number of pages once, which lines its planes up (were every LUN always given
//! the same even count, a drift of one page could never be made up), and two drifted LUNs leave
//! a whole stripe for the first. A batch that names one logical page
//! twice in a round is written page by page, in order. Nothing is
//! acknowledged before the call returns, so the power-loss contract below is unchanged.
//! [`Ftl::read`] in that order reads up to one round of pages at a time, grouped by LUN and
//! page offset, so a stripe still reads back with one multi-plane read.
//!
//! When the host frontiers of a stripe's planes are at the same page offset, the stripe is programmed by one `program_multi` (each page with its own
//! sequence number, in plane order); otherwise its pages are programmed one by one, the first
//! ones to the plane(s) lagging behind, so that the frontiers line up again (drift comes from a
//! program failure's retry, a spill to another plane, or a classifier sending pages of one stripe
//! to different streams; GC has its own stream and does not move host frontiers).
//!
//! **Realignment.** An odd number of single-page writes leaves a LUN's first planes one page
//! ahead of the rest, with the rotation on the first plane behind: the state one page less
//! than a stripe leaves. Requests of exactly one stripe's pages (2 on a 2-plane LUN: 8 KiB
//! database writes on 4 KiB pages) then never line up: each writes its first pages to the
//! planes behind and its last to the first planes, which are ahead again, so on 2 planes none
//! is one multi-plane program, and only an odd-sized request would end it (measured: 0
//! multi-plane programs in 20,000 2-page writes after a sequential precondition). So when
//! `REALIGN_AFTER_MISSES` (8) striped requests in a row start in that state (`stripe_misses`,
//! reset by any striped request that starts on a LUN's first plane and by any [`Ftl::write`]
//! of fewer pages than a stripe, which moves the rotation: the drift is then no steady state),
//! the FTL voids the next
//! page of each plane behind (the void mark a failed program's page gets: mount skips it, GC
//! finds nothing live in it), which lines the planes up, and the request starts a stripe on
//! the LUN's first plane. Cost: `planes - 1` pages and programs once, where a run of such
//! requests would otherwise never stripe; mixed sizes keep moving the rotation and never
//! realign (tests/tests/multiplane.rs). A void that does not complete is settled as a failed
//! program's page is (`settle_torn`: voided again or a checkpoint before the next program); a
//! cut during it leaves a torn void mark, which mount voids as any torn page (it is the newest
//! program). Plane-first order only; resumed frontiers (after a mount) are left alone.
//! Deduplication's held pages (**Deduplication**) realign the same way: a request starts where
//! it holds its first page for a stripe (that page classified as it is held, the request's
//! pages from it on its size); a request whose pages are all shared holds none and neither
//! counts nor resets the run; one that holds an odd number of pages puts the rotation off
//! again, as a single page does. Without it, a run of even requests after an odd page held each
//! request's pages as one page, whole stripes and one page (ftl-sim's 8-page dedup run after a
//! sequential fill: 3 multi-plane programs a request where no technique makes 4).
//!
//! **Power-loss contract of a batch.** A write or `write_many` call is acknowledged when it
//! returns; until then none of its pages is, and a multi-plane program returns only after all
//! its pages are programmed. A cut during a multi-plane program leaves, with the emulator's
//! default semantics, the pages before the cut one programmed, the cut one torn and the rest
//! erased; a chip that programs the planes at once may leave *every* page of the program torn
//! (partly programmed: a page may read whole, need corrections, fail to decode, or have
//! unreadable metadata), which the emulator models with `MultiPlaneCut::WholeCall` (the HAL
//! allows either: the pages from the failing index on are in an unknown state, and they are
//! voided or recorded torn, as one failed program's page is). Recovery (`recovery.rs` step 4)
//! therefore checks the newest `planes_per_lun` replayed data pages, not only the newest: the
//! cut program's pages carry the largest sequence numbers on flash (consecutive, nothing
//! programmed after them), so every one that replay applied is among them. Each torn one is
//! rolled back to its previous mapping and voided; each that decodes only with corrections is
//! kept and rewritten (step 7). Cost: up to `planes_per_lun` (at most 4) whole-page reads per
//! mount after a cut instead of one, twice for a page that needed corrections. Each page of an
//! unacknowledged batch then reads, after the mount, as its old or its new content, never
//! anything else, under both semantics (tests/tests/multiplane.rs). On a failure other than
//! power loss the pages before the failing one are mapped, the failing one is retired as after
//! a single program failure, and it and the pages after it are written again one by one.
//!
//! **Read.** [`Ftl::read`] of several pages and [`Ftl::read_many`] read the pages mapped to
//! sibling planes of one LUN at one page offset with one `read_multi` (a stripe written by one
//! multi-plane program reads back that way), every page checked as a single read checks it.

use nand_hal::{BlockId, ErrorKind, NandFlash, PageId, ProgramOp, ReadOp, MAX_PLANES};

use crate::blocks::{BlockState, Pick};
use crate::config::{StripeOrder, MAX_TOTAL_PLANES};
use crate::frontier::TornPages;
use crate::map::MappingTable;
use crate::meta::{PageKind, PageMeta, SpareState, META_LEN};
use crate::policy::{
    Classifier, Destination, PageCodec, Placement, PolicySet, Stream, Temperature, WriteRequest,
};
use crate::{Error, Ftl, Stack};

/// Striped requests in a row that start one page off their LUN's lined-up planes before
/// [`Ftl::realign_planes`] voids the pages that line them up (module doc, **Realignment**).
const REALIGN_AFTER_MISSES: u8 = 8;

/// How the pages of a write are classified: as one request, or each as a request of its own.
#[derive(Copy, Clone)]
pub(crate) enum RequestTemp {
    /// One request (`Ftl::write`): its temperature.
    Whole(Temperature),
    /// Independent pages (`Ftl::write_many`).
    PerPage,
}

/// Whether the techniques of `stack` run with multi-plane erases and reads (the module doc,
/// **When**): FlexECC does (it only picks the format of the pages written, the same on either
/// path), the NV cache does (its per-page hooks run on the multi-plane paths), and
/// deduplication does (its reads resolve a shared page first; its GC leaves nothing to erase
/// before its records are on flash), stacked in any way (the cache asked first per page, the
/// pages it misses resolved as deduplication resolves them); second writes do not (their own
/// write, read and GC paths issue single-plane operations).
pub(crate) const fn multi_plane_allowed(stack: Stack) -> bool {
    !stack.wom
}

/// Whether the techniques of `stack` run with multi-plane programs too: those of
/// [`multi_plane_allowed`] but deduplication stacked with the NV cache (the module doc,
/// **When**; deduplication alone stripes a request's unique pages, `dedup/stripe.rs`).
pub(crate) const fn multi_program_allowed(stack: Stack) -> bool {
    multi_plane_allowed(stack) && !(stack.dedup && stack.nv_cache)
}

impl<N: NandFlash, P: PolicySet, M: MappingTable> Ftl<'_, N, P, M> {
    /// Turns multi-plane operations on (the default) or off (every operation single-plane, GC
    /// erasing each victim as it finishes it: the FTL before multi-plane support).
    pub fn set_multi_plane(&mut self, on: bool) {
        self.multi_plane = on;
    }

    /// Whether multi-plane erases (and GC's deferred erase) are on: see the module doc.
    #[inline]
    pub(crate) fn multi_erase_on(&self) -> bool {
        self.multi_plane && self.geo.planes_per_lun > 1 && multi_plane_allowed(self.stack())
    }

    /// Whether multi-plane reads are on (either map: see the module doc).
    #[inline]
    pub(crate) fn multi_rw_on(&self) -> bool {
        self.multi_erase_on()
    }

    /// Whether multi-plane programs (host stripes, [`Ftl::write_many`] batches, deduplication's
    /// held unique pages) are on: as [`Self::multi_rw_on`], but not with deduplication stacked
    /// with the NV cache ([`multi_program_allowed`]) nor with a write-back NV cache (it takes
    /// every host page; its destage is single-page).
    #[inline]
    pub(crate) fn multi_program_on(&self) -> bool {
        self.multi_program_possible() && !self.nv_takes_writes()
    }

    /// Whether the device may hold a multi-plane program cut part way, for mount's torn window
    /// (`recovery.rs`): [`Self::multi_program_on`] but for the write-back setting, which is the
    /// mount's (`NvCacheConfig::write_back`, not in the NV memory): the life before the cut may
    /// have run the cache write-through, striping host pages.
    #[inline]
    pub(crate) fn multi_program_possible(&self) -> bool {
        self.multi_rw_on() && multi_program_allowed(self.stack())
    }

    /// Whether GC leaves its victims `Dirty` for the allocator's multi-plane erases (and the
    /// allocator ranks `Dirty` blocks by their wear after erase): unless a mount from the newest
    /// pool record would keep a flash-resident map's valid counts (`Ftl::pool_keeps_counts`; see
    /// the module doc, **Erase**). The name is from before programs and reads ran on the cached
    /// map (`gc.rs` and `frontier.rs` call it).
    #[inline]
    pub(crate) fn multi_io_on(&self) -> bool {
        self.multi_erase_on() && !self.pool_keeps_counts()
    }

    // ---- erase ----

    /// Erases `blocks` (each holding nothing live, in distinct planes of one LUN) with one
    /// multi-plane erase; each ends `Free`, or `Bad` if its erase failed. Power loss and other
    /// errors leave the blocks not known erased `Dirty`.
    pub(crate) fn erase_blocks(&mut self, blocks: &[BlockId]) -> Result<(), Error> {
        let mut rest = blocks;
        while !rest.is_empty() {
            if rest.len() == 1 {
                return self.erase_free_block(rest[0]);
            }
            for &b in rest {
                self.reuse_erased(b);
            }
            self.counters.multi_plane_erases += 1;
            match self.nand.erase_multi(rest) {
                Ok(()) => {
                    self.counters.nand_erases += rest.len() as u64;
                    for &b in rest {
                        self.erased(b);
                    }
                    return Ok(());
                }
                Err((i, e)) => {
                    let i = i.min(rest.len() - 1);
                    self.counters.nand_erases += i as u64 + 1;
                    for &b in &rest[..i] {
                        self.erased(b);
                    }
                    if nand_hal::Error::kind(&e) != ErrorKind::EraseFailed {
                        for &b in &rest[i..] {
                            self.blocks.set_state(b, BlockState::Dirty);
                        }
                        return Err(e.into());
                    }
                    self.counters.erase_failures += 1;
                    self.retire_now(rest[i]);
                    // The blocks after the failing one: state unknown, erased again.
                    rest = &rest[i + 1..];
                }
            }
        }
        Ok(())
    }

    /// The block table's side of a completed erase of `b`.
    pub(crate) fn erased(&mut self, b: BlockId) {
        // A torn page this block held is gone: its entry must not void the next page programmed
        // at that address.
        self.torn.forget_block(&self.geo, b);
        self.blocks.count_erase(b);
        self.blocks.set_state(b, BlockState::Free);
        self.note_erase(b);
    }

    /// Erases the `Dirty` block `b` the allocator picked in its plane, with the `Dirty` block each
    /// sibling plane of its LUN would pick next (`pick`, pool mask `mask`).
    pub(crate) fn erase_picked(&mut self, b: BlockId, pick: Pick, mask: u8) -> Result<(), Error> {
        if !self.multi_erase_on() {
            return self.erase_free_block(b);
        }
        let mut group = [b; MAX_PLANES];
        let mut n = 1;
        let plane = self.geo.plane_index(b);
        let ppl = self.geo.planes_per_lun;
        let first = plane - plane % ppl;
        for q in first..first + ppl.min(MAX_PLANES as u32) {
            if q == plane {
                continue;
            }
            let sib = match pick {
                Pick::Coolest => self.blocks.coolest_free_with(q, mask, mask),
                Pick::Worn => self.blocks.worn_free_with(q, mask, mask),
            };
            if let Some(s) = sib.filter(|&s| self.blocks.state(s) == BlockState::Dirty) {
                group[n] = s;
                n += 1;
            }
        }
        self.erase_blocks(&group[..n])
    }

    /// Format's erase of every good block of the stripe `blocks` (sibling blocks of one LUN,
    /// already `Dirty`): one multi-plane erase, or one erase each.
    pub(crate) fn erase_stripe(&mut self, blocks: &[BlockId]) -> Result<(), Error> {
        if self.multi_erase_on() {
            return self.erase_blocks(blocks);
        }
        for &b in blocks {
            self.erase_free_block(b)?;
        }
        Ok(())
    }

    // ---- program ----

    /// Writes independent whole pages `(lpn, data)` as one batch: checks them all first
    /// (`BufferSize`, `OutOfRange`), then writes them in order, striping them over the planes with
    /// multi-plane programs where the frontiers allow (see the module doc for the power-loss
    /// contract). Each page is classified as a one-page request. Without multi-plane programs
    /// this is [`Ftl::write`] of each page in turn; with deduplication, its write path of each
    /// page with the misses held for stripes across the batch (module doc, **Deduplication**).
    pub fn write_many(&mut self, pages: &[(u32, &[u8])]) -> Result<(), Error> {
        for &(lpn, data) in pages {
            if self.check_range(lpn, data.len())? != 1 {
                return Err(Error::BufferSize);
            }
        }
        if !self.multi_program_on() {
            for &(lpn, data) in pages {
                self.write(lpn, data)?;
            }
            return Ok(());
        }
        if self.dedup_write_many_hook(pages)? {
            return Ok(());
        }
        if pages.iter().any(|&(lpn, _)| self.trims.overlaps(lpn, 1)) {
            self.write_journal()?;
        }
        // FlexECC's RAM hints and counters, as `write` of each page notes them.
        for &(lpn, _) in pages {
            self.flex_note_write(lpn, 1);
        }
        self.write_striped(pages.len(), |i| pages[i], RequestTemp::PerPage)?;
        self.finish_write()
    }

    /// The core's first write of `n` pages (`page(i)` gives the i-th), striped: see the module
    /// doc. Only with [`Self::multi_program_on`] and no write-back NV cache (the one hook it
    /// calls per page is the write-through NV cache's, after the page's remap; FlexECC's notes
    /// are taken by the caller, its page format by the program). Each page is
    /// classified once, in order (a stripe that realigns the frontiers takes only some of the
    /// pages it classified; the rest start the next stripe).
    pub(crate) fn write_striped<'d>(
        &mut self,
        n: usize,
        page: impl Fn(usize) -> (u32, &'d [u8]),
        temp: RequestTemp,
    ) -> Result<(), Error> {
        if self.cfg.stripe_order == StripeOrder::ChannelFirst {
            let mut i = 0;
            while i < n {
                i += self.write_round_channel_first(i, n, &page, temp)?;
            }
            return Ok(());
        }
        let mut first = None;
        if n >= 2 {
            let stream = self.stripe_stream(page(0).0, temp);
            self.realign_planes(n, stream)?;
            first = Some(stream);
        }
        self.write_plane_first(n, page, temp, first)
    }

    /// [`StripeOrder::PlaneFirst`] striping of `n` pages (see [`Self::write_striped`]):
    /// `first`, page 0's stream if the caller classified it (and decided the request's
    /// realignment, [`Self::realign_planes`]: deduplication's held pages, `dedup/stripe.rs`);
    /// the other pages are classified here, in order.
    pub(crate) fn write_plane_first<'d>(
        &mut self,
        n: usize,
        page: impl Fn(usize) -> (u32, &'d [u8]),
        temp: RequestTemp,
        first: Option<Stream>,
    ) -> Result<(), Error> {
        let ppl = (self.geo.planes_per_lun as usize).min(MAX_PLANES);
        // Streams of pages classified, by index mod MAX_PLANES (a window never spans more).
        let mut classified = [Stream::Host; MAX_PLANES];
        let mut upto = 0;
        if let Some(stream) = first {
            classified[0] = stream;
            upto = 1;
        }
        let mut i = 0;
        while i < n {
            let k = (ppl - self.next_plane as usize % ppl).min(n - i);
            let mut lpns = [0u32; MAX_PLANES];
            let mut streams = [Stream::Host; MAX_PLANES];
            for j in 0..k {
                let lpn = page(i + j).0;
                if i + j >= upto {
                    classified[(i + j) % MAX_PLANES] = self.stripe_stream(lpn, temp);
                    upto = i + j + 1;
                }
                lpns[j] = lpn;
                streams[j] = classified[(i + j) % MAX_PLANES];
            }
            let programs_before = self.counters.nand_programs;
            let datas = |j: usize| page(i + j).1;
            let done = self.write_stripe(self.next_plane, &lpns[..k], &streams[..k], datas)?;
            self.note_write_programs(programs_before);
            i += done.max(1);
        }
        Ok(())
    }

    /// Lines the planes of the LUN of the rotation's next slot up again if striped requests keep
    /// starting one page off them (see the module doc, **Realignment**): called at the start of
    /// a plane-first striped request of `n` pages whose first page goes to `stream` (with
    /// deduplication, before the first page the request holds for a stripe, `n` the request's
    /// pages from it on: `dedup/stripe.rs`).
    pub(crate) fn realign_planes(&mut self, n: usize, stream: Stream) -> Result<(), Error> {
        let ppl = self.geo.planes_per_lun.clamp(1, MAX_PLANES as u32);
        let slot = self.next_plane;
        let base = slot - slot % ppl;
        if slot == base {
            self.stripe_misses = 0;
            return Ok(());
        }
        if n < ppl as usize || !self.torn_is_clear() {
            return Ok(());
        }
        // The state an odd number of single pages leaves: the planes before the slot one page
        // ahead of the slot's plane and those after it, all open and not resumed.
        let lead = slot % ppl;
        let behind = self.frontiers[Self::frontier_index(slot, stream)].next_page;
        for q in 0..ppl {
            let i = Self::frontier_index(base + q, stream);
            let f = self.frontiers[i];
            let offset = if q < lead { behind + 1 } else { behind };
            if f.block == u32::MAX || self.resumed & (1 << i) != 0 || f.next_page != offset {
                return Ok(());
            }
        }
        self.stripe_misses = self.stripe_misses.saturating_add(1);
        if self.stripe_misses < REALIGN_AFTER_MISSES {
            return Ok(());
        }
        self.stripe_misses = 0;
        for q in lead..ppl {
            let page = self.take_page(base + q, stream)?;
            self.dirty = true;
            self.counters.realign_pads += 1;
            // A void that does not complete is settled before the next program
            // (`settle_torn`), as a failed program's page is.
            if !self.void_page(page) {
                self.torn.push(page);
            }
        }
        self.next_plane = base;
        Ok(())
    }

    /// The stream page `lpn` of a striped write goes to.
    pub(crate) fn stripe_stream(&mut self, lpn: u32, temp: RequestTemp) -> Stream {
        let t = match temp {
            RequestTemp::Whole(t) => t,
            RequestTemp::PerPage => {
                let req = WriteRequest { lpn, pages: 1, page_bytes: self.geo.data_bytes };
                self.policies.classifier().classify_request(&req)
            }
        };
        let t = self.policies.classifier().classify_page(lpn, t);
        let Destination::FirstWrite(s) = self.policies.placement().place(lpn, t);
        s
    }

    /// [`StripeOrder::ChannelFirst`] striping of pages `i..n` (see the module doc): they take
    /// the rotation slots from `next_plane` on, at most one round's worth (`total_planes`
    /// slots, each plane once, wrapping past the round's end); each LUN of the window, in slot
    /// order, takes as many of the pages, in page order, as it has slots in the window: one
    /// stripe over those planes of it (two if they wrap past its last plane and do not cover
    /// all of them). A stripe whose frontiers had drifted writes only the pages that line them
    /// up again (`write_stripe`); the pages it left go to the next LUN, and what no LUN of the
    /// window took goes to the window's first LUN (so a drifted LUN takes an odd number of pages
    /// once and lines up, and two of them leave a whole stripe). Returns how many pages it wrote
    /// (all of the window).
    fn write_round_channel_first<'d>(
        &mut self,
        i: usize,
        n: usize,
        page: &impl Fn(usize) -> (u32, &'d [u8]),
        temp: RequestTemp,
    ) -> Result<usize, Error> {
        let total = self.geo.total_planes().max(1);
        let luns = self.geo.luns.max(1);
        let ppl = self.geo.planes_per_lun.max(1);
        let s = self.next_plane;
        let w = (total as usize).min(n - i).min(MAX_TOTAL_PLANES);
        // Classified in page order, as the plane-first path does.
        let mut streams = [Stream::Host; MAX_TOTAL_PLANES];
        for (j, st) in streams.iter_mut().enumerate().take(w) {
            *st = self.stripe_stream(page(i + j).0, temp);
        }
        if (1..w).any(|j| (0..j).any(|q| page(i + q).0 == page(i + j).0)) {
            // A logical page twice in the window (`write_many`): in order, one page at a time,
            // so that the later copy wins.
            for (j, &st) in streams.iter().enumerate().take(w) {
                let before = self.counters.nand_programs;
                let plane = self.plane_at((s + j as u32) % total);
                self.first_write_to(page(i + j).0, st, plane, page(i + j).1)?;
                self.note_write_programs(before);
            }
            self.next_plane = (s + w as u32) % total;
            return Ok(w);
        }
        let mut used = 0;
        for l in 0..(w as u32).min(luns) {
            // The LUN of slot `s + l` has the window's slots `s + l, s + l + luns, ...`: its
            // planes from row `r0` on, wrapping past its last plane.
            let slot = (s + l) % total;
            let (lun, r0) = (slot % luns, slot / luns % ppl);
            let cnt = (w as u32 - l).div_ceil(luns).min(ppl);
            let k = cnt.min((w - used) as u32);
            if k == 0 {
                break;
            }
            // (first plane, pages) of the stripe(s): one run of rows, or the LUN's every plane.
            let parts = if r0 + k <= ppl {
                [(r0, k), (0, 0)]
            } else if k == ppl {
                [(0, k), (0, 0)]
            } else {
                [(r0, ppl - r0), (0, r0 + k - ppl)]
            };
            for (row, m) in parts {
                let m = m as usize;
                if m == 0 {
                    continue;
                }
                let mut lpns = [0u32; MAX_PLANES];
                for (q, lpn) in lpns.iter_mut().enumerate().take(m) {
                    *lpn = page(i + used + q).0;
                }
                let before = self.counters.nand_programs;
                let off = used;
                let data = |q: usize| page(i + off + q).1;
                let done = self.write_stripe(lun * ppl + row, &lpns[..m], &streams[off..off + m], data)?;
                self.note_write_programs(before);
                used += done;
                if done < m {
                    // Drifted: the rest goes to the next LUN.
                    break;
                }
            }
        }
        // Pages the drifted stripes left: to the window's first LUN, whole stripes of its planes
        // where there are enough (two drifted LUNs lined up and its planes still in line).
        let first = (s % total) % luns;
        while used < w {
            let m = (ppl as usize).min(w - used);
            let mut lpns = [0u32; MAX_PLANES];
            for (q, lpn) in lpns.iter_mut().enumerate().take(m) {
                *lpn = page(i + used + q).0;
            }
            let before = self.counters.nand_programs;
            let off = used;
            let data = |q: usize| page(i + off + q).1;
            used += self.write_stripe(first * ppl, &lpns[..m], &streams[off..off + m], data)?.max(1);
            self.note_write_programs(before);
        }
        self.next_plane = (s + w as u32) % total;
        Ok(w)
    }

    /// Writes one stripe: `lpns[j]` (stream `streams[j]`, data `data(j)`) for the plane
    /// `p0 + j`, all in one LUN. Returns how many of the pages it wrote (from the first): all,
    /// unless the frontiers had drifted and it wrote only the pages that line them up again
    /// (then `next_plane` is `p0`, so that the next stripe covers the same planes; the
    /// channel-first caller sets the rotation itself).
    fn write_stripe<'d>(
        &mut self,
        p0: u32,
        lpns: &[u32],
        streams: &[Stream],
        data: impl Fn(usize) -> &'d [u8],
    ) -> Result<usize, Error> {
        let k = lpns.len();
        let stream = streams[0];
        let groupable = k >= 2
            && streams.iter().all(|&s| s == stream)
            && (1..k).all(|j| !lpns[..j].contains(&lpns[j]))
            && k * (META_LEN + self.codec_len) <= self.buf.len();
        if !groupable {
            for (j, (&lpn, &s)) in lpns.iter().zip(streams).enumerate() {
                self.first_write_to(lpn, s, p0 + j as u32, data(j))?;
            }
            return Ok(k);
        }
        let ppb = self.geo.pages_per_block;
        // Where each plane's frontier of `stream` will program next (a closed one opens at 0).
        let mut offset = [0u32; MAX_PLANES];
        for (j, o) in offset.iter_mut().enumerate().take(k) {
            let f = self.frontiers[Self::frontier_index(p0 + j as u32, stream)];
            *o = if f.block == u32::MAX { 0 } else { f.next_page };
        }
        if offset[..k].iter().any(|&o| o != offset[0]) {
            // Drifted: the offset the planes reach with the fewest pages; this stripe's first
            // pages go to the planes short of it, one by one.
            let lag = |t: u32, o: u32| (t + ppb - o) % ppb;
            let target = offset[..k]
                .iter()
                .copied()
                .min_by_key(|&t| offset[..k].iter().map(|&o| lag(t, o)).sum::<u32>())
                .unwrap_or(0);
            let mut done = 0;
            for (q, &o) in offset.iter().enumerate().take(k) {
                for _ in 0..lag(target, o) {
                    if done == k {
                        return Ok(done);
                    }
                    self.first_write_to(lpns[done], stream, p0 + q as u32, data(done))?;
                    done += 1;
                }
            }
            self.next_plane = p0;
            return Ok(done);
        }
        self.next_plane = (p0 + k as u32) % self.geo.total_planes();
        // Paced GC and an open frontier for every plane first (both may use the page buffer).
        let mut planes = [0u32; MAX_PLANES];
        for (j, plane) in planes.iter_mut().enumerate().take(k) {
            self.gc_pace(p0 + j as u32)?;
            *plane = self.ensure_frontier(p0 + j as u32, stream)?;
        }
        // Every page's map entry in RAM with room for its change, all at once (a flash-resident
        // map: see the module doc), else one by one.
        let resident = self.map_fault_in_group(lpns)?;
        // Still lined up (GC or a checkpoint in between may have moved a frontier, a plane
        // without a free block spilled to another)? And no only copy the NV cache might write
        // back between the program and the last page's remap (see the module doc)?
        let first = self.frontiers[Self::frontier_index(planes[0], stream)];
        let aligned = resident
            && !self.nv_may_write_back(k)
            && (0..k).all(|j| {
                let i = Self::frontier_index(planes[j], stream);
                let f = self.frontiers[i];
                planes[j] == p0 + j as u32
                    && f.block != u32::MAX
                    && f.next_page == first.next_page
                    && self.resumed & (1 << i) == 0
            })
            && self.torn_is_clear();
        if !aligned {
            for (j, (&lpn, &plane)) in lpns.iter().zip(&planes).enumerate() {
                self.map_fault_in_for_write(lpn)?;
                let page = self.append_host(plane, stream, lpn, data(j))?;
                self.after_first_write(lpn, page, data(j))?;
            }
            return Ok(k);
        }
        self.program_stripe(&planes[..k], stream, lpns, data)?;
        Ok(k)
    }

    /// One host page to (`plane`, `stream`): [`Ftl::first_write`] without the plane rotation.
    fn first_write_to(&mut self, lpn: u32, stream: Stream, plane: u32, data: &[u8]) -> Result<(), Error> {
        self.next_plane = (plane + 1) % self.geo.total_planes();
        self.gc_pace(plane)?;
        let plane = self.ensure_frontier(plane, stream)?;
        self.map_fault_in_for_write(lpn)?;
        let page = self.append_host(plane, stream, lpn, data)?;
        self.after_first_write(lpn, page, data)
    }

    /// What follows the program of a host page: the remap and the counters.
    fn after_first_write(&mut self, lpn: u32, page: PageId, data: &[u8]) -> Result<(), Error> {
        self.remap(lpn, Some(page))?;
        self.counters.host_write_pages += 1;
        self.nv_after_write(lpn, data, self.seq - 1)
    }

    /// Programs one page on each of `planes` (aligned frontiers of `stream`) with one multi-plane
    /// program; see the module doc for failures.
    fn program_stripe<'d>(
        &mut self,
        planes: &[u32],
        stream: Stream,
        lpns: &[u32],
        data: impl Fn(usize) -> &'d [u8],
    ) -> Result<(), Error> {
        let k = planes.len();
        let sl = META_LEN + self.codec_len;
        let format = self.flex_page_format(PageKind::Data, true);
        let mut pages = [PageId(0); MAX_PLANES];
        for j in 0..k {
            pages[j] = self.take_page(planes[j], stream)?;
            let block = self.geo.block_of(pages[j]);
            let meta = PageMeta {
                kind: PageKind::Data,
                tag: lpns[j],
                seq: self.seq,
                erase_count: self.blocks.get(block).erase_count(),
                aux: 0,
            };
            self.seq += 1;
            let spare = &mut self.buf[j * sl..(j + 1) * sl];
            meta.encode(&mut spare[..META_LEN]);
            self.policies.codec().encode_as(data(j), &mut spare[META_LEN..], format);
            self.note_host_stream(stream);
        }
        let mut ops = [ProgramOp { page: PageId(0), data: &[], spare: &[] }; MAX_PLANES];
        for j in 0..k {
            ops[j] = ProgramOp { page: pages[j], data: data(j), spare: &self.buf[j * sl..(j + 1) * sl] };
        }
        self.counters.multi_plane_programs += 1;
        self.dirty = true;
        let (done, err) = match self.nand.program_multi(&ops[..k]) {
            Ok(()) => (k, None),
            Err((i, e)) => (i.min(k - 1), Some(e)),
        };
        self.counters.nand_programs += (done + usize::from(err.is_some())) as u64;
        for j in 0..done {
            self.after_first_write(lpns[j], pages[j], data(j))?;
        }
        let Some(e) = err else {
            return Ok(());
        };
        self.stripe_program_failed(&pages[done..k], e)?;
        // Written again one by one (each `append` retries on its own).
        for j in done..k {
            let page = self.append_host(planes[j], stream, lpns[j], data(j))?;
            self.after_first_write(lpns[j], page, data(j))?;
        }
        Ok(())
    }

    /// A multi-plane program (host or GC stripe, `gc_stripe.rs`) failed with `e` at the first of
    /// `pages` (those after it: state unknown). Ok if they may be written again one by one.
    pub(crate) fn stripe_program_failed(&mut self, pages: &[PageId], e: N::Error) -> Result<(), Error> {
        // The failing page, and those after it: voided where possible, recorded torn where not
        // (settled before the next program), and their blocks closed (a block whose first page
        // is void would read as garbage to a mount, so nothing more may go after such a page; a
        // failed program's block is retired as after a single one).
        let Some(&failed) = pages.first() else { return Err(e.into()) };
        let mut unvoided = TornPages::NONE;
        for &page in pages {
            if !self.void_page(page) {
                unvoided.push(page);
            }
            self.close_block(self.geo.block_of(page));
        }
        self.torn_append(&unvoided);
        match nand_hal::Error::kind(&e) {
            ErrorKind::ProgramFailed => {
                self.counters.program_failures += 1;
                self.start_retiring(self.geo.block_of(failed));
                Ok(())
            }
            ErrorKind::NopExceeded => Ok(()),
            _ => Err(e.into()),
        }
    }

    // ---- read ----

    /// Reads independent whole pages `(lpn, buffer)`, with multi-plane reads where pages that
    /// follow each other in `pages` are on sibling planes of one LUN at one page offset.
    pub fn read_many(&mut self, pages: &mut [(u32, &mut [u8])]) -> Result<(), Error> {
        for (lpn, out) in pages.iter() {
            if self.check_range(*lpn, out.len())? != 1 {
                return Err(Error::BufferSize);
            }
        }
        let reads_before = self.counters.nand_reads;
        let r = self.read_grouped(pages);
        self.counters.host_read_nand_reads += self.counters.nand_reads - reads_before;
        r?;
        self.counters.host_read_pages += pages.len() as u64;
        Ok(())
    }

    /// [`Ftl::read`]'s multi-plane path in [`StripeOrder::ChannelFirst`] order: a round of the
    /// rotation's worth of pages (`total_planes`, at most 16) at a time, ordered by LUN, page
    /// offset and plane (stably) so that the pages one multi-plane program wrote are neighbours,
    /// then read grouped. Stack: the round's `(lpn, buffer)` items, 16 x 24 bytes on a 64-bit
    /// host (16 x 12 on a Cortex-M).
    pub(crate) fn read_rounds(&mut self, lpn: u32, buf: &mut [u8]) -> Result<(), Error> {
        let pb = self.geo.data_bytes as usize;
        let round = (self.geo.total_planes() as usize).clamp(1, MAX_TOTAL_PLANES);
        let mut chunks = buf.chunks_exact_mut(pb).enumerate();
        loop {
            let mut items: [(u32, &mut [u8]); MAX_TOTAL_PLANES] = core::array::from_fn(|_| (0, &mut [][..]));
            let mut keys = [u64::MAX; MAX_TOTAL_PLANES];
            let mut k = 0;
            for (i, chunk) in chunks.by_ref().take(round) {
                let l = lpn + i as u32;
                self.map_fault_in(l)?;
                // A shared page (deduplication) is read where its content is.
                if let Some(p) = self.read_target(l) {
                    let b = self.geo.block_of(p);
                    keys[k] = (self.geo.lun_of(b).0 as u64) << 40
                        | (self.geo.page_in_block(p) as u64) << 8
                        | self.geo.plane_of(b).0 as u64;
                }
                items[k] = (l, chunk);
                k += 1;
            }
            if k == 0 {
                return Ok(());
            }
            // Insertion sort (stable) by key.
            for j in 1..k {
                let mut q = j;
                while q > 0 && keys[q - 1] > keys[q] {
                    keys.swap(q - 1, q);
                    items.swap(q - 1, q);
                    q -= 1;
                }
            }
            self.read_grouped(&mut items[..k])?;
        }
    }

    /// Reads `items` (one page each), grouping neighbours into multi-plane reads.
    pub(crate) fn read_grouped(&mut self, items: &mut [(u32, &mut [u8])]) -> Result<(), Error> {
        if !self.multi_rw_on() {
            for (lpn, out) in items.iter_mut() {
                self.read_one(*lpn, out)?;
            }
            return Ok(());
        }
        let mut i = 0;
        while i < items.len() {
            // The NV cache first, as a single read asks it.
            let (lpn, out) = &mut items[i];
            if self.nv_read_hit(*lpn, out)? {
                i += 1;
                continue;
            }
            let n = self.read_group_len(items, i)?;
            if n < 2 {
                let (lpn, out) = &mut items[i];
                self.read_flash(*lpn, out)?;
                i += 1;
                continue;
            }
            self.read_multi_group(&mut items[i..i + n])?;
            i += n;
        }
        Ok(())
    }

    /// How many items from `i` on are mapped to sibling planes of one LUN at one page offset
    /// (those after the first not in the NV cache).
    fn read_group_len(&mut self, items: &[(u32, &mut [u8])], i: usize) -> Result<usize, Error> {
        let sl = META_LEN + self.codec_len;
        let max = (self.geo.planes_per_lun as usize).min(MAX_PLANES).min(self.buf.len() / sl);
        if self.map.on_flash() {
            // The group's entries into RAM (below, an entry not in RAM, evicted by another's
            // fault-in, ends the group: its page is read on its own).
            for (lpn, _) in items[i..].iter().take(max) {
                self.map_fault_in(*lpn)?;
            }
        }
        let Some(first) = self.read_target(items[i].0) else {
            return Ok(1);
        };
        let fb = self.geo.block_of(first);
        let mut planes = 1u32 << self.geo.plane_of(fb).0;
        let mut n = 1;
        while n < max && i + n < items.len() {
            let Some(p) = self.read_target(items[i + n].0) else {
                break;
            };
            if self.nv_holds(items[i + n].0) {
                break;
            }
            let b = self.geo.block_of(p);
            let bit = 1u32 << self.geo.plane_of(b).0;
            if self.geo.lun_of(b) != self.geo.lun_of(fb)
                || self.geo.page_in_block(p) != self.geo.page_in_block(first)
                || planes & bit != 0
            {
                break;
            }
            planes |= bit;
            n += 1;
        }
        Ok(n)
    }

    /// The physical page a read of `lpn` reads (its entry in RAM): its mapped page, or the
    /// physical page of its shared content (deduplication); `None` if unmapped, or shared content
    /// with no page (never: read on its own, [`Ftl::read_one`] reports it).
    fn read_target(&self, lpn: u32) -> Option<PageId> {
        let (p, _) = self.dedup_resolve(self.map.get(lpn)?);
        self.geo.contains_page(p).then_some(p)
    }

    /// One multi-plane read of `items` (mapped, shaped by [`Self::read_group_len`]; the first
    /// one's NV cache miss counted), each page checked as [`Ftl::read_one`] checks it (its spare
    /// names the logical page read, or, shared content (deduplication), its first owner or where
    /// it moved from), then, in order, what a single read does for each: the NV cache asked
    /// (every page after the first) and its copy made.
    fn read_multi_group(&mut self, items: &mut [(u32, &mut [u8])]) -> Result<(), Error> {
        let k = items.len();
        let sl = META_LEN + self.codec_len;
        let mut pages = [PageId(0); MAX_PLANES];
        let mut shared = [false; MAX_PLANES];
        for (j, (lpn, _)) in items.iter().enumerate() {
            let mapped = self.map.get(*lpn).ok_or(Error::Corrupt)?;
            (pages[j], shared[j]) = self.dedup_resolve(mapped);
        }
        {
            let mut spares = self.buf[..k * sl].chunks_exact_mut(sl);
            let mut ops: [ReadOp<'_>; MAX_PLANES] =
                core::array::from_fn(|_| ReadOp { page: PageId(0), data: &mut [], spare: &mut [] });
            for (j, (_, out)) in items.iter_mut().enumerate() {
                let spare = spares.next().ok_or(Error::Memory)?;
                ops[j] = ReadOp { page: pages[j], data: out, spare };
            }
            self.counters.nand_reads += k as u64;
            self.counters.multi_plane_reads += 1;
            self.nand.read_multi(&mut ops[..k]).map_err(|(_, e)| Error::from(e))?;
        }
        // Every page checked first (the spares are in the page buffer, which an NV cache
        // eviction's write-back below uses): `bad`, the first that does not check.
        let mut seqs = [0u64; MAX_PLANES];
        let mut bad = k;
        for (j, (lpn, out)) in items.iter_mut().enumerate() {
            let spare = &self.buf[j * sl..(j + 1) * sl];
            let ok = match PageMeta::decode(&spare[..META_LEN]) {
                SpareState::Valid(m) if m.kind == PageKind::Data && (m.tag == *lpn || shared[j]) => {
                    seqs[j] = m.seq;
                    self.policies.codec().decode(out, &spare[META_LEN..]).is_ok()
                }
                _ => false,
            };
            if !ok {
                bad = j;
                break;
            }
        }
        for (j, (lpn, out)) in items.iter_mut().enumerate() {
            if j > 0 && self.nv_on() {
                // Where a single read of this page asks the NV cache: a miss (no page of the
                // group was cached, and copies of other pages since put none there); and an
                // eviction's write-back since the read may have run GC, which moved the page
                // (same data, newer sequence number): then it is read again, alone. Compared
                // as read: the physical page, a shared page's too (its map entry is virtual).
                if self.nv_read_hit(*lpn, out)? {
                    continue;
                }
                if self.read_target(*lpn) != Some(pages[j]) {
                    self.read_flash(*lpn, out)?;
                    continue;
                }
            }
            if j == bad {
                return Err(Error::Uncorrectable { lpn: *lpn });
            }
            if j > bad {
                // Not checked (only after `bad` was read again, above): read alone.
                self.read_flash(*lpn, out)?;
                continue;
            }
            self.nv_fill(*lpn, out, seqs[j])?;
        }
        Ok(())
    }
}
