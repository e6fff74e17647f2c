//! Inline deduplication in the core (CAFTL, FAST'11): two-level mapping, the deduplicating write
//! path, the share journal, GC of shared pages, and the seam a content index plugs into.
//!
//! Compiled in by the `dedup` feature, switched on at run time by formatting or mounting with
//! [`Ftl::format_with`] / [`Ftl::mount_with`] with [`crate::Extensions::dedup`]; an FTL built by `format`/`mount` behaves exactly
//! as the baseline (no dedup state, no hooks taken).
//!
//! * Two-level mapping ([`vmap`]): a primary-map word is a physical page, or a virtual page with
//!   the most significant bit set; a virtual entry holds the physical page and the exact count of
//!   logical pages referencing it. A shared physical page is reclaimed only when the count reaches
//!   zero; GC relocates it by changing one virtual entry (found from the physical page through the
//!   reverse index), writing the copy as a data page tagged with the page it moved from and the
//!   aux word [`shares::SHARED_MOVE`]; like a journal page, its block is not erased before the
//!   next checkpoint (replay follows chains of moves). Overwrites and trims count references down.
//! * Write path: per sampling unit (optional), the content index is probed (CRC-32 pre-hash, SHA-1
//!   on a CRC hit: the index's business); on a hit the location is checked (a physical page must
//!   be valid and directly mapped by the logical page its spare names, a virtual page allocated;
//!   with `full_compare` the page is read back and compared byte for byte) and the logical page is
//!   mapped to the shared content without writing a data page; otherwise the page is written and
//!   its fingerprint inserted. A fingerprint match therefore maps a logical page only to a live
//!   page holding the same fingerprint (SHA-1 equality; with `full_compare`, byte equality).
//! * The index is kept exact: the FTL tells it when a located page moves ([`ContentIndex::moved`])
//!   or dies ([`ContentIndex::invalidated`]), so it never holds a stale location.
//! * Persistence ([`shares`], `mount`): deduplicated writes are journaled as share records;
//!   checkpoints store a shared logical page as its physical page with the flag bit; mount
//!   regroups them under fresh virtual numbers and replays records, relocation pages, data pages
//!   and trims in sequence order, counting references as it goes. The fingerprint index starts
//!   empty at every mount (and format): content written before is found again only when written
//!   again, or by out-of-line deduplication ([`Ftl::coalesce`]).
//! * [`Ftl::coalesce`] is the primitive of out-of-line deduplication: it maps one logical page to
//!   another's content after reading both and comparing them byte for byte.
//!
//! RAM (caller's, [`DedupMemory`]): `8 V` bytes of virtual entries + `8 S` of reverse-index
//! slots (S a power of two > V) + `12 R` of pending share records (R records, at most one journal
//! page's worth: `(page_bytes - 4) / 12`), plus whatever the index needs.
//!
//! An image written with dedup must be mounted with dedup (a mount without reports
//! [`Error::Corrupt`] when shared pages exist). Size the secondary map at one entry per logical
//! page: then it never fills, at run time or during a replay (every live virtual page has a
//! logical page of its own). A smaller map works at run time (a share that finds no free entry
//! writes the page instead), but replay after a cut applies some reference drops in another
//! order than the run did and may need more entries than the run had: mount then reports
//! [`Error::Memory`] (nothing is lost; mount again with a larger map). Known limitation.

pub mod shares;
pub mod table;
pub mod vmap;

mod mount;
mod rebuild;
mod stripe;

use nand_hal::{NandFlash, PageId};

use crate::blocks::FLAG_LIVE_JOURNAL;
use crate::frontier::Source;
use crate::map::{MappingTable, UNMAPPED};
use crate::meta::{PageKind, PageMeta, SpareState, META_LEN};
use crate::multiplane::RequestTemp;
use crate::policy::{Classifier, PageCodec, PolicySet, Stream, Temperature, WriteRequest};
use crate::{Error, Ftl};

pub use rebuild::RebuildProgress;
use shares::{PendingShares, ShareRecord, NO_OWNER, SHARED_MOVE, SHARED_MOVE_LOST, SHARE_JOURNAL};
use table::Slot;
use vmap::{VirtualEntry, VirtualMap, VIRTUAL_FLAG};

/// What an index knows of a page's content.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Default)]
pub struct ContentKey {
    /// SHA-1 of the content (meaningful only when `hashed`).
    pub fingerprint: [u8; 20],
    /// CRC-32 of the content (0 when the index keeps no pre-hash table).
    pub crc: u32,
    /// Whether `fingerprint` was computed (false after a pre-hash miss).
    pub hashed: bool,
}

/// The answer of [`ContentIndex::probe`].
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum ContentProbe {
    /// No resident entry has this content.
    Miss(ContentKey),
    /// A resident entry has this fingerprint, at `location` (a physical page number, or a virtual
    /// page number with [`VIRTUAL_FLAG`]).
    Hit {
        /// The page's key.
        key: ContentKey,
        /// Where the resident content is.
        location: u32,
    },
}

/// The seam between the core and a fingerprint index (ftl-policies' CAFTL fingerprint store
/// implements it). Locations are raw `u32`s: a physical page, or a virtual page with
/// [`VIRTUAL_FLAG`].
pub trait ContentIndex: Send {
    /// Looks a page's content up (pre-hash first if the index has one).
    fn probe(&mut self, page: &[u8]) -> ContentProbe;
    /// Computes the full key of a page (its SHA-1 and CRC).
    fn fingerprint(&mut self, page: &[u8]) -> ContentKey;
    /// The page of a sampling unit (`unit` holds whole pages of `page_bytes`) to probe first.
    fn sample(&self, unit: &[u8], page_bytes: usize) -> usize;
    /// Makes `key` resident at `location` if the index's budget allows.
    fn insert(&mut self, key: &ContentKey, location: u32);
    /// Drops `key` (its location turned out not to hold it).
    fn forget(&mut self, key: &ContentKey);
    /// The content at `from` is now at `to`.
    fn moved(&mut self, from: u32, to: u32);
    /// The content at `location` is gone.
    fn invalidated(&mut self, location: u32);
    /// Drops everything (format and mount).
    fn clear(&mut self);
    /// Hashing work so far: (CRC-32s, SHA-1s) computed, for cost models.
    fn hashing(&self) -> (u64, u64) {
        (0, 0)
    }
}

/// Runtime settings of deduplication.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct DedupSettings {
    /// Inline deduplication on (off: pages are written without a probe; see the dynamic switch).
    pub inline: bool,
    /// Pages per sampling unit; 0 or 1 turns sampling off (every page probed).
    pub sampling_unit: u32,
    /// Read the shared page back and compare it byte for byte before sharing.
    pub full_compare: bool,
    /// After a pre-hash miss, fingerprint the page once it is written and insert it (the SHA-1 is
    /// then off the critical path); off, such pages stay unfingerprinted (out-of-line work).
    pub fingerprint_misses: bool,
}

impl Default for DedupSettings {
    /// Inline on, 32-page sampling units (the paper's), no full compare, misses fingerprinted.
    fn default() -> Self {
        DedupSettings { inline: true, sampling_unit: 32, full_compare: false, fingerprint_misses: true }
    }
}

/// Counters of deduplication work.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct DedupStats {
    /// Pages probed in the index.
    pub probes: u64,
    /// Host pages written without a probe (inline off, or skipped by sampling).
    pub unprobed: u64,
    /// Probes that hit.
    pub hits: u64,
    /// Hits whose location no longer held the content (never expected: the index is kept exact).
    pub stale_hits: u64,
    /// Hits whose page differed byte for byte (full compare only).
    pub compare_mismatches: u64,
    /// Host pages that wrote no data page (inline deduplication).
    pub deduplicated: u64,
    /// Hits not shared because the secondary map was full.
    pub vmap_full: u64,
    /// Unique pages that became shared (a virtual entry allocated).
    pub conversions: u64,
    /// Shared pages relocated by GC.
    pub shared_moves: u64,
    /// Share-journal pages written.
    pub journal_pages: u64,
    /// Logical pages coalesced out of line.
    pub coalesced: u64,
    /// Pages fingerprinted after their write (pre-hash misses).
    pub fingerprinted_after_write: u64,
    /// Shares refused because FlexECC wrote the content's page detect-only and the new
    /// reference's data is dirty (it must stay correctable).
    pub format_refusals: u64,
    /// Contents `dedup_rebuild_index` inserted into the index.
    pub rebuilt: u64,
}

/// The caller memory of deduplication (see the module documentation for sizes).
pub struct DedupMemory<'m> {
    /// Virtual entries: the most contents shared at once.
    pub virtual_entries: &'m mut [VirtualEntry],
    /// Reverse-index slots: a power of two greater than `virtual_entries.len()`.
    pub reverse_slots: &'m mut [Slot<u32>],
    /// Pending share records (at least 1).
    pub pending: &'m mut [ShareRecord],
}

/// Everything deduplication needs to attach to an FTL.
pub struct Dedup<'m> {
    /// Caller memory.
    pub memory: DedupMemory<'m>,
    /// The content index (emptied at format and mount).
    pub index: &'m mut dyn ContentIndex,
    /// Runtime settings.
    pub settings: DedupSettings,
}

/// The FTL's deduplication state (empty unless attached).
pub(crate) struct DedupState<'m> {
    pub(crate) index: Option<&'m mut dyn ContentIndex>,
    pub(crate) vmap: VirtualMap<'m>,
    pub(crate) pending: PendingShares<'m>,
    pub(crate) settings: DedupSettings,
    pub(crate) stats: DedupStats,
    /// The next physical page `dedup_rebuild_index` visits (0 after every mount).
    pub(crate) rebuild_next: u32,
}

impl Default for DedupState<'_> {
    fn default() -> Self {
        Self::detached()
    }
}

impl<'m> DedupState<'m> {
    /// Not attached.
    pub(crate) fn detached() -> DedupState<'m> {
        DedupState {
            index: None,
            vmap: VirtualMap::none(),
            pending: PendingShares::none(),
            settings: DedupSettings::default(),
            stats: DedupStats::default(),
            rebuild_next: 0,
        }
    }
}

/// Where a hit's content is, checked.
#[derive(Copy, Clone, Debug)]
enum Target {
    /// Already shared through this virtual page.
    Virtual(u32),
    /// A unique page, directly mapped by `owner`.
    Physical { page: PageId, owner: u32 },
}

/// Whether a primary-map value names a virtual page.
pub(crate) fn is_virtual(p: PageId) -> bool {
    p.0 != UNMAPPED && p.0 & VIRTUAL_FLAG != 0
}

impl<'m, N: NandFlash, P: PolicySet, M: MappingTable> Ftl<'m, N, P, M> {
    /// Attaches the deduplication `ext` asks for (at format and mount; the index starts empty).
    pub(crate) fn attach_dedup(&mut self, ext: &mut crate::ext::Extensions<'m>) -> Result<(), Error> {
        let Some(dedup) = ext.dedup.take() else { return Ok(()) };
        let Dedup { memory, index, settings } = dedup;
        if self.geo.total_pages() >= VIRTUAL_FLAG - 1 || memory.pending.is_empty() {
            return Err(Error::Memory);
        }
        let vmap = VirtualMap::new(memory.virtual_entries, memory.reverse_slots).ok_or(Error::Memory)?;
        index.clear();
        self.ext.dedup = DedupState {
            index: Some(index),
            vmap,
            pending: PendingShares::new(memory.pending, self.geo.data_bytes),
            settings,
            stats: DedupStats::default(),
            rebuild_next: 0,
        };
        Ok(())
    }

    /// Whether deduplication is attached.
    pub fn dedup_attached(&self) -> bool {
        self.ext.dedup.index.is_some()
    }

    /// Whether deduplication is attached (the name the hooks share).
    pub(crate) fn dedup_on(&self) -> bool {
        self.dedup_attached()
    }

    /// Write hook: with deduplication attached, its write path writes the request (true).
    pub(crate) fn dedup_write_hook(&mut self, lpn: u32, data: &[u8], n: u32) -> Result<bool, Error> {
        if !self.dedup_on() {
            return Ok(false);
        }
        self.write_dedup(lpn, data, n)?;
        Ok(true)
    }

    /// `write_many` hook (multi-plane programs on): with deduplication attached, its write path
    /// writes the batch, the misses in stripes (true).
    pub(crate) fn dedup_write_many_hook(&mut self, pages: &[(u32, &[u8])]) -> Result<bool, Error> {
        if !self.dedup_on() {
            return Ok(false);
        }
        self.write_many_dedup(pages)?;
        Ok(true)
    }

    /// GC hook: moves `page` if it is shared (true).
    pub(crate) fn dedup_relocate_hook(&mut self, page: PageId, plane: u32) -> Result<bool, Error> {
        let Some(v) = self.ext.dedup.vmap.find(page.0) else { return Ok(false) };
        self.relocate_shared(page, v, plane)?;
        Ok(true)
    }

    /// Checkpoint hook: the checkpoint holds every share record pending in RAM.
    pub(crate) fn dedup_checkpointed(&mut self) {
        self.ext.dedup.pending.clear();
    }

    /// Replay: whether a data page with aux word `aux` is a shared page's relocation copy.
    pub(crate) fn dedup_is_move(&self, aux: u32) -> bool {
        aux == shares::SHARED_MOVE || aux == shares::SHARED_MOVE_LOST
    }

    /// Replay: applies a journal page if it is a share journal (`Some(complete)`).
    pub(crate) fn dedup_apply_journal(
        &mut self,
        page: PageId,
        count: u32,
        aux: u32,
    ) -> Result<Option<bool>, Error> {
        if aux != shares::SHARE_JOURNAL {
            return Ok(None);
        }
        self.apply_share_journal(page, count).map(Some)
    }

    /// Rebuild: whether mapped page `p` is counted by deduplication's own pass (shared pages,
    /// once each) rather than per logical page.
    pub(crate) fn dedup_counted_apart(&self, p: PageId) -> bool {
        self.dedup_on() && is_virtual(p)
    }

    /// The deduplication settings in force.
    pub fn dedup_settings(&self) -> DedupSettings {
        self.ext.dedup.settings
    }

    /// Changes the deduplication settings (no effect unless attached).
    pub fn set_dedup_settings(&mut self, settings: DedupSettings) {
        self.ext.dedup.settings = settings;
    }

    /// Turns inline deduplication on or off (the dynamic switch).
    pub fn set_inline_dedup(&mut self, on: bool) {
        self.ext.dedup.settings.inline = on;
    }

    /// Deduplication counters.
    pub fn dedup_stats(&self) -> DedupStats {
        self.ext.dedup.stats
    }

    /// The index's hashing work so far: (CRC-32s, SHA-1s); zeros when not attached.
    pub fn dedup_hashing(&self) -> (u64, u64) {
        self.ext.dedup.index.as_deref().map_or((0, 0), |ix| ix.hashing())
    }

    /// Virtual pages in use (contents shared by two or more logical pages, or once shared).
    pub fn shared_contents(&self) -> usize {
        self.ext.dedup.vmap.in_use()
    }

    /// Physical pages holding live data (every logical page's content counted once).
    pub fn live_physical_pages(&self) -> u64 {
        self.valid.iter().map(|w| w.count_ones() as u64).sum()
    }

    /// The reference count of `lpn`'s content: 0 if unmapped, 1 if unique, else the count of its
    /// virtual page.
    pub fn content_refs(&self, lpn: u32) -> u32 {
        match self.map.get(lpn) {
            None => 0,
            Some(p) if is_virtual(p) => self.ext.dedup.vmap.get(p.0 & !VIRTUAL_FLAG).map_or(0, |e| e.refs),
            Some(_) => 1,
        }
    }

    /// Whether physical page `page` is valid (holds live data), for tests and tools.
    pub fn physical_page_is_valid(&self, page: u32) -> bool {
        self.is_valid_page(PageId(page))
    }

    /// The physical page holding `lpn`'s content, if mapped (for tests and tools).
    pub fn physical_page_of(&self, lpn: u32) -> Option<u32> {
        let p = self.map.get(lpn)?;
        Some(self.dedup_resolve(p).0 .0)
    }

    /// The physical page behind a primary-map value, and whether it is shared.
    pub(crate) fn dedup_resolve(&self, p: PageId) -> (PageId, bool) {
        if is_virtual(p) {
            match self.ext.dedup.vmap.page(p.0 & !VIRTUAL_FLAG) {
                Some(q) => (PageId(q), true),
                None => (PageId(UNMAPPED), true),
            }
        } else {
            (p, false)
        }
    }

    /// Drops one reference held by a primary-map value; returns the physical page to invalidate
    /// (a direct page, or a shared one whose count reached zero).
    pub(crate) fn dedup_unref(&mut self, old: PageId) -> Option<PageId> {
        if !is_virtual(old) {
            return Some(old);
        }
        let v = old.0 & !VIRTUAL_FLAG;
        if self.ext.dedup.vmap.release(v) > 0 {
            return None;
        }
        let page = self.ext.dedup.vmap.page(v);
        self.ext.dedup.vmap.free(v);
        if let Some(ix) = self.ext.dedup.index.as_deref_mut() {
            ix.invalidated(old.0);
        }
        page.map(PageId)
    }

    /// A physical page lost its valid bit.
    pub(crate) fn dedup_page_invalidated(&mut self, p: PageId) {
        if let Some(ix) = self.ext.dedup.index.as_deref_mut() {
            ix.invalidated(p.0);
        }
    }

    /// GC moved a unique page.
    pub(crate) fn dedup_moved(&mut self, from: PageId, to: PageId) {
        if let Some(ix) = self.ext.dedup.index.as_deref_mut() {
            ix.moved(from.0, to.0);
        }
    }

    /// Checkpoint export: virtual words become their physical page with the flag.
    pub(crate) fn dedup_export(&self, words: &mut [u32]) {
        for w in words.iter_mut() {
            if *w != UNMAPPED && *w & VIRTUAL_FLAG != 0 {
                // Every referenced virtual page is allocated; an unallocated one cannot be named.
                *w = self.ext.dedup.vmap.page(*w & !VIRTUAL_FLAG).map_or(UNMAPPED, |p| p | VIRTUAL_FLAG);
            }
        }
    }

    /// Writes the pending share records as one journal page (on the GC stream). Outside GC
    /// (`may_gc`), GC first restores the plane's free reserve if a block must be opened: a run of
    /// deduplicated writes opens no host block, so nothing else would collect the blocks the
    /// journal fills.
    pub(crate) fn write_share_journal(&mut self, may_gc: bool) -> Result<(), Error> {
        let d = self.geo.data_bytes as usize;
        if self.checkpoint_due() {
            // A checkpoint is due: it holds the records (and, written before the plane is chosen,
            // cannot take the free block the journal page was to go to).
            return self.write_checkpoint();
        }
        let plane = self.gc_plane(self.next_plane);
        if may_gc && self.frontiers[Self::frontier_index(plane, Stream::Gc)].block == u32::MAX {
            self.ensure_free(plane)?;
        }
        // Pending trims go first (they touch other logical pages): a trim may have freed the
        // virtual entry a later record reuses, so replay must not see the record without it.
        if !self.trims.is_empty() {
            self.write_journal()?;
        }
        let plane = self.ensure_gc_frontier(plane)?;
        if self.ext.dedup.pending.is_empty() {
            // A checkpoint written by ensure_frontier holds them already.
            return Ok(());
        }
        let count = self.ext.dedup.pending.serialize(&mut self.buf[..d]);
        let page = self.append(
            plane,
            Stream::Gc,
            PageKind::Journal,
            count,
            SHARE_JOURNAL,
            Source::Buffer { encode: true },
        )?;
        self.blocks.set_flags(self.geo.block_of(page), FLAG_LIVE_JOURNAL, true);
        self.ext.dedup.pending.clear();
        self.counters.journal_pages += 1;
        self.ext.dedup.stats.journal_pages += 1;
        Ok(())
    }

    /// Writes pending share records if any touch `lpn..lpn + count` (before a data write or trim
    /// of those pages, so replay applies them in order).
    pub(crate) fn dedup_order_before(&mut self, lpn: u32, count: u32) -> Result<(), Error> {
        if self.ext.dedup.pending.overlaps(lpn, count) {
            self.write_share_journal(true)?;
        }
        Ok(())
    }

    /// At the start of a host operation: GC restores the free reserve of every plane below it.
    /// Journal pages (trims, share records) go to the GC stream, which never collects; without
    /// dedup the host stream's block openings keep the reserve, but a run of deduplicated writes
    /// opens none, and GC itself needs the reserve (its copies, the journal pages written before
    /// it, the checkpoint before erasing a block with a journal page or a moved shared page).
    /// Collecting earlier than the baseline would costs some copies (see docs/eval/dedup).
    pub(crate) fn dedup_keep_reserve(&mut self) -> Result<(), Error> {
        if !self.dedup_attached() {
            return Ok(());
        }
        for plane in 0..self.geo.total_planes() {
            if self.blocks.free_count(plane) < self.cfg.gc_free_threshold {
                // Paced GC keeps planes just under the reserve and collects on demand itself
                // when a plane runs out (or a checkpoint needs blocks); a paced step here keeps
                // it going through runs of deduplicated writes, which place no host page.
                if self.pacing_on() {
                    self.gc_pace(plane)?;
                } else {
                    self.ensure_free(plane)?;
                }
            }
        }
        Ok(())
    }

    /// Writes pending share records if there are any: before GC copies or erases anything
    /// (`may_gc` false), and at `flush`.
    pub(crate) fn dedup_flush_pending(&mut self, may_gc: bool) -> Result<(), Error> {
        if !self.ext.dedup.pending.is_empty() {
            self.write_share_journal(may_gc)?;
        }
        Ok(())
    }

    /// Makes room for one more share record. Called before a hit is checked, since the journal
    /// page may run GC, which may move the page the hit found.
    fn dedup_room_for_share(&mut self) -> Result<(), Error> {
        if self.ext.dedup.pending.is_full() {
            self.write_share_journal(true)?;
        }
        Ok(())
    }

    /// The write path with deduplication attached (`n` pages, range checked, trims ordered).
    /// With multi-plane programs on, the unique pages go out in stripes (`stripe.rs`).
    fn write_dedup(&mut self, lpn: u32, data: &[u8], n: u32) -> Result<(), Error> {
        self.dedup_order_before(lpn, n)?;
        let pb = self.geo.data_bytes as usize;
        let req = WriteRequest { lpn, pages: n, page_bytes: self.geo.data_bytes };
        let temp = self.policies.classifier().classify_request(&req);
        let s = self.ext.dedup.settings;
        let inline = s.inline;
        let unit = if s.sampling_unit >= 2 { s.sampling_unit } else { 1 };
        let striped = n > 1 && self.multi_program_on();
        let mut held = stripe::StripePages::new();
        let (src, rt) = (stripe::PagesIn::Request(data), RequestTemp::Whole(temp));
        let mut first = 0u32;
        while first < n {
            let k = unit.min(n - first);
            let chunk = &data[first as usize * pb..(first + k) as usize * pb];
            // With sampling, the sample page is probed first and decides for the unit.
            let mut sample: Option<(u32, ContentProbe)> = None;
            if inline && k >= 2 {
                let at = self.ext.dedup.index.as_deref().map(|ix| (ix.sample(chunk, pb) as u32).min(k - 1));
                if let Some(i) = at {
                    let page = &chunk[i as usize * pb..(i as usize + 1) * pb];
                    let probe = if striped {
                        self.dedup_probe_in_order(&mut held, page, src, rt)?
                    } else {
                        self.ext.dedup.index.as_deref_mut().map(|ix| ix.probe(page))
                    };
                    sample = probe.map(|p| (i, p));
                    self.ext.dedup.stats.probes += 1;
                }
            }
            let probe_rest = inline && sample.is_none_or(|(_, p)| matches!(p, ContentProbe::Hit { .. }));
            // The sample page goes first: its probe must not outlive writes that could free the
            // page it found.
            let si = sample.map_or(0, |(si, _)| si);
            for j in 0..k {
                let i = match j {
                    0 => si,
                    j if j <= si => j - 1,
                    j => j,
                };
                let page = &chunk[i as usize * pb..(i as usize + 1) * pb];
                let probe = match sample {
                    Some((si, p)) if si == i => Some(p),
                    _ if probe_rest && striped => {
                        self.ext.dedup.stats.probes += 1;
                        self.dedup_probe_in_order(&mut held, page, src, rt)?
                    }
                    _ if probe_rest => match self.ext.dedup.index.as_deref_mut() {
                        Some(ix) => {
                            self.ext.dedup.stats.probes += 1;
                            Some(ix.probe(page))
                        }
                        None => None,
                    },
                    _ => None,
                };
                if striped && !matches!(probe, Some(ContentProbe::Hit { .. })) {
                    if probe.is_none() {
                        self.ext.dedup.stats.unprobed += 1;
                    }
                    let h = stripe::HeldPage { lpn: lpn + first + i, index: first + i, probe };
                    self.dedup_hold(&mut held, h, n - first - j, src, rt)?;
                    continue;
                }
                let programs_before = self.counters.nand_programs;
                self.write_one_dedup(lpn + first + i, page, temp, probe)?;
                self.note_write_programs(programs_before);
            }
            first += k;
        }
        self.dedup_program_held(&mut held, src, rt)?;
        self.maintenance()
    }

    /// [`Ftl::write_many`] with deduplication attached and multi-plane programs on (pages range
    /// checked): each page written as `write` of it alone writes it (its own request, probed
    /// unless inline deduplication is off), but the misses are held for stripes across the batch
    /// as a request's are (`stripe.rs`). A batch that names a logical page again is cut there,
    /// the part before it written first: each part names each logical page once, as a request
    /// does.
    fn write_many_dedup(&mut self, pages: &[(u32, &[u8])]) -> Result<(), Error> {
        let mut start = 0;
        while start < pages.len() {
            let mut end = start + 1;
            while end < pages.len() && pages[start..end].iter().all(|p| p.0 != pages[end].0) {
                end += 1;
            }
            self.write_batch_dedup(&pages[start..end])?;
            start = end;
        }
        Ok(())
    }

    /// One part of [`Self::write_many_dedup`] (each logical page once).
    fn write_batch_dedup(&mut self, pages: &[(u32, &[u8])]) -> Result<(), Error> {
        let inline = self.ext.dedup.settings.inline;
        let (src, rt) = (stripe::PagesIn::Batch(pages), RequestTemp::PerPage);
        let mut held = stripe::StripePages::new();
        for (i, &(lpn, page)) in pages.iter().enumerate() {
            // What `write` of the page does before its write path (GC may run with pages held,
            // as it may within a request).
            self.dedup_keep_reserve()?;
            if self.trims.overlaps(lpn, 1) {
                self.write_journal()?;
            }
            self.flex_note_write(lpn, 1);
            self.dedup_order_before(lpn, 1)?;
            let probe = if inline && self.ext.dedup.index.is_some() {
                self.ext.dedup.stats.probes += 1;
                self.dedup_probe_in_order(&mut held, page, src, rt)?
            } else {
                None
            };
            if !matches!(probe, Some(ContentProbe::Hit { .. })) {
                if probe.is_none() {
                    self.ext.dedup.stats.unprobed += 1;
                }
                let h = stripe::HeldPage { lpn, index: i as u32, probe };
                self.dedup_hold(&mut held, h, (pages.len() - i) as u32, src, rt)?;
                continue;
            }
            let req = WriteRequest { lpn, pages: 1, page_bytes: self.geo.data_bytes };
            let temp = self.policies.classifier().classify_request(&req);
            let programs_before = self.counters.nand_programs;
            self.write_one_dedup(lpn, page, temp, probe)?;
            self.note_write_programs(programs_before);
        }
        self.dedup_program_held(&mut held, src, rt)?;
        self.maintenance()
    }

    fn write_one_dedup(
        &mut self,
        lpn: u32,
        page: &[u8],
        temp: Temperature,
        probe: Option<ContentProbe>,
    ) -> Result<(), Error> {
        let mut probe = probe;
        if let Some(ContentProbe::Hit { key, location }) = probe {
            self.ext.dedup.stats.hits += 1;
            self.dedup_room_for_share()?;
            let target = self.dedup_target(location, page)?;
            let target = match target {
                Some(t) if self.flex_refuses_share(self.target_page(t))? => {
                    self.ext.dedup.stats.format_refusals += 1;
                    None
                }
                t => t,
            };
            if let Some(target) = target {
                if self.share(lpn, target)? {
                    self.counters.host_write_pages += 1;
                    self.ext.dedup.stats.deduplicated += 1;
                    // No page was programmed: the NV cache's copy takes a sequence number of its
                    // own, newer than every flash copy of `lpn` (see `cdm::cooperate`).
                    let seq = self.seq;
                    self.seq += 1;
                    return self.nv_after_write(lpn, page, seq);
                }
            } else if let Some(ix) = self.ext.dedup.index.as_deref_mut() {
                // Stale, or refused for its format: the page written instead takes the key.
                ix.forget(&key);
            }
            probe = Some(ContentProbe::Miss(key));
        }
        if probe.is_none() {
            self.ext.dedup.stats.unprobed += 1;
        }
        let t = self.policies.classifier().classify_page(lpn, temp);
        // Second writes take the hot pages they can place; those are not indexed (a fingerprint
        // names a first write, the only kind a share may map to).
        if self.reuse_second_write_hook(lpn, page, t)? {
            return Ok(());
        }
        let written = self.first_write(lpn, t, page)?;
        if let Some(ContentProbe::Miss(key)) = probe {
            self.dedup_index_written(&key, page, written.0);
        }
        Ok(())
    }

    /// Checks a hit: the location must hold live content (and, with full compare, `data`).
    fn dedup_target(&mut self, location: u32, data: &[u8]) -> Result<Option<Target>, Error> {
        let full = self.ext.dedup.settings.full_compare;
        let target = if location & VIRTUAL_FLAG != 0 {
            let v = location & !VIRTUAL_FLAG;
            match self.ext.dedup.vmap.get(v) {
                Some(e) if e.refs > 0 => Some((Target::Virtual(v), PageId(e.page))),
                _ => None,
            }
        } else {
            let p = PageId(location);
            if !self.geo.contains_page(p) || !self.is_valid_page(p) {
                None
            } else if let Some(v) = self.ext.dedup.vmap.find(p.0) {
                // Shared since the index learned it; the index follows.
                if let Some(ix) = self.ext.dedup.index.as_deref_mut() {
                    ix.moved(p.0, v | VIRTUAL_FLAG);
                }
                Some((Target::Virtual(v), p))
            } else {
                self.direct_owner(p)?.map(|owner| (Target::Physical { page: p, owner }, p))
            }
        };
        let Some((target, page)) = target else {
            self.ext.dedup.stats.stale_hits += 1;
            return Ok(None);
        };
        if full && !self.same_content(page, data)? {
            self.ext.dedup.stats.compare_mismatches += 1;
            return Ok(None);
        }
        Ok(Some(target))
    }

    /// The physical page holding a target's content (`UNMAPPED` for a virtual page without one).
    fn target_page(&self, t: Target) -> PageId {
        match t {
            Target::Virtual(v) => PageId(self.ext.dedup.vmap.page(v).unwrap_or(UNMAPPED)),
            Target::Physical { page, .. } => page,
        }
    }

    /// The logical page that maps unshared page `p` directly, as its spare names it and the map
    /// confirms (one spare read); `None` if `p` is not such a page.
    pub(crate) fn direct_owner(&mut self, p: PageId) -> Result<Option<u32>, Error> {
        let d = self.geo.data_bytes as usize;
        self.counters.nand_reads += 1;
        self.nand.read_spare(p, &mut self.buf[d..d + META_LEN])?;
        Ok(match PageMeta::decode(&self.buf[d..d + META_LEN]) {
            SpareState::Valid(m)
                if m.kind == PageKind::Data
                    && !self.dedup_is_move(m.aux)
                    && m.tag < self.cfg.logical_pages
                    && self.map.get(m.tag) == Some(p) =>
            {
                Some(m.tag)
            }
            _ => None,
        })
    }

    /// Reads `page` into the page buffer and compares its (decoded) data with `data`.
    fn same_content(&mut self, page: PageId, data: &[u8]) -> Result<bool, Error> {
        let d = self.geo.data_bytes as usize;
        let spare_len = META_LEN + self.codec_len;
        self.counters.nand_reads += 1;
        let (area, spare) = self.buf.split_at_mut(d);
        self.nand.read_page(page, area, &mut spare[..spare_len])?;
        if !matches!(PageMeta::decode(&spare[..spare_len]), SpareState::Valid(m) if m.kind == PageKind::Data)
        {
            return Ok(false);
        }
        if self.policies.codec().decode(area, &spare[META_LEN..spare_len]).is_err() {
            return Ok(false);
        }
        // Second writes store first writes scrambled.
        if self.reuse_unscramble_buf().is_none() {
            return Ok(false);
        }
        Ok(self.buf[..d] == data[..d])
    }

    /// Maps `lpn` to the content of `target` and records it; false if the secondary map is full.
    fn share(&mut self, lpn: u32, target: Target) -> Result<bool, Error> {
        // Rewriting a page with its own content changes nothing.
        match target {
            Target::Physical { owner, .. } if owner == lpn => return Ok(true),
            Target::Virtual(v) if self.map.get(lpn) == Some(PageId(v | VIRTUAL_FLAG)) => return Ok(true),
            _ => {}
        }
        if self.ext.dedup.pending.is_full() {
            // The caller made room; if it could not, the page is written instead.
            return Ok(false);
        }
        let (v, page, owner) = match target {
            Target::Virtual(v) => match self.ext.dedup.vmap.page(v) {
                Some(p) => (v, p, NO_OWNER),
                None => return Ok(false),
            },
            Target::Physical { page, owner } => {
                let Some(v) = self.ext.dedup.vmap.alloc(page.0) else {
                    self.ext.dedup.stats.vmap_full += 1;
                    return Ok(false);
                };
                self.map.set(owner, Some(PageId(v | VIRTUAL_FLAG)));
                self.ext.dedup.vmap.acquire(v);
                if let Some(ix) = self.ext.dedup.index.as_deref_mut() {
                    ix.moved(page.0, v | VIRTUAL_FLAG);
                }
                self.ext.dedup.stats.conversions += 1;
                (v, page.0, owner)
            }
        };
        self.ext.dedup.vmap.acquire(v);
        let old = self.map.set(lpn, Some(PageId(v | VIRTUAL_FLAG)));
        if let Some(o) = old.and_then(|o| self.dedup_unref(o)) {
            self.set_valid_bit(o, false);
            // A second write's plane-1 half goes with it (as in `Ftl::remap`).
            self.reuse_invalidate(o);
        }
        self.ext.dedup.pending.push(ShareRecord { lpn, page, owner });
        self.dirty = true;
        Ok(true)
    }

    /// GC: moves shared page `page` (virtual page `v`) to the GC stream of `plane`.
    fn relocate_shared(&mut self, page: PageId, v: u32, plane: u32) -> Result<(), Error> {
        let d = self.geo.data_bytes as usize;
        let spare_len = META_LEN + self.codec_len;
        let plane = self.ensure_gc_frontier(plane)?;
        self.counters.nand_reads += 1;
        {
            let (data, spare) = self.buf.split_at_mut(d);
            self.nand.read_page(page, data, &mut spare[..spare_len])?;
        }
        // Replay rebuilds a share made since the checkpoint from the shared page's own data page
        // (the owner's write) when that page is newer than the checkpoint: its block is then kept
        // until the next checkpoint too (GC writes one before erasing it).
        let newer = match PageMeta::decode(&self.buf[d..d + spare_len]) {
            SpareState::Valid(m) => m.seq > self.ckpt.seq,
            _ => true,
        };
        if newer {
            self.blocks.set_flags(self.geo.block_of(page), FLAG_LIVE_JOURNAL, true);
        }
        let encode = {
            let (data, spare) = self.buf.split_at_mut(d);
            matches!(self.policies.codec().decode(data, &spare[META_LEN..spare_len]), Ok(n) if n > 0)
        };
        // With second writes the copy holds the content unscrambled (its tag is a physical page,
        // no key): re-encoded, or, if the source's scrambler flags are lost, as stored and marked
        // so that reads report it uncorrectable.
        let (aux, encode) = match self.reuse_unscramble_buf() {
            Some(unscrambled) => {
                let lost = matches!(PageMeta::decode(&self.buf[d..d + META_LEN]),
                    SpareState::Valid(m) if m.aux == SHARED_MOVE_LOST);
                (if lost { SHARED_MOVE_LOST } else { SHARED_MOVE }, encode || unscrambled)
            }
            None => (SHARED_MOVE_LOST, encode),
        };
        let new = self.append(plane, Stream::Gc, PageKind::Data, page.0, aux, Source::Buffer { encode })?;
        // The copy names the page it came from, so replay needs every move since the checkpoint:
        // its block is kept (like a journal page's) until the next checkpoint.
        self.blocks.set_flags(self.geo.block_of(new), FLAG_LIVE_JOURNAL, true);
        self.ext.dedup.vmap.set_page(v, new.0);
        self.set_valid_bit(page, false);
        self.set_valid_bit(new, true);
        self.dirty = true;
        self.counters.gc_page_copies += 1;
        self.ext.dedup.stats.shared_moves += 1;
        Ok(())
    }

    /// Out-of-line deduplication: maps `dup` to the content of `keep` if both are mapped and
    /// their contents are equal byte for byte (read and compared here, so a wrong fingerprint
    /// can never merge different contents). `scratch` is one page. Returns whether `dup` now
    /// shares `keep`'s content.
    pub fn coalesce(&mut self, keep: u32, dup: u32, scratch: &mut [u8]) -> Result<bool, Error> {
        let d = self.geo.data_bytes as usize;
        if keep >= self.cfg.logical_pages || dup >= self.cfg.logical_pages {
            return Err(Error::OutOfRange);
        }
        if scratch.len() != d {
            return Err(Error::BufferSize);
        }
        if !self.dedup_attached() || keep == dup {
            return Ok(false);
        }
        if self.trims.overlaps(dup, 1) {
            self.write_journal()?;
        }
        self.dedup_room_for_share()?;
        let (Some(kp), Some(dp)) = (self.map.get(keep), self.map.get(dup)) else { return Ok(false) };
        if kp == dp {
            return Ok(true);
        }
        self.read_one(keep, scratch)?;
        let (dphys, _) = self.dedup_resolve(dp);
        if !self.same_content(dphys, scratch)? {
            return Ok(false);
        }
        // With FlexECC, `dup`'s data stays correctable if its page is (see `flex_refuses_share`).
        let (kphys, _) = self.dedup_resolve(kp);
        if self.flex_page_is_correcting(dphys)? && !self.flex_page_is_correcting(kphys)? {
            self.ext.dedup.stats.format_refusals += 1;
            return Ok(false);
        }
        let target = if is_virtual(kp) {
            Target::Virtual(kp.0 & !VIRTUAL_FLAG)
        } else {
            Target::Physical { page: kp, owner: keep }
        };
        let shared = self.share(dup, target)?;
        if shared {
            self.ext.dedup.stats.coalesced += 1;
        }
        self.maintenance()?;
        Ok(shared)
    }
}
