//! GC stripes: GC's copies programmed as multi-plane programs, one page on the GC frontier of
//! each plane of the victim's LUN at one page offset (issue #20; host stripes are in
//! `multiplane.rs`).
//!
//! RAM, explicit and caller-provided: [`crate::Memory::page_buf`] may be one raw page (as
//! before: no GC stripes) or `planes_per_lun` raw pages ([`crate::RamLayout::page_buf`] +
//! [`crate::RamLayout::gc_stripe_buf`]: +2,112 bytes per extra plane on the 2 KiB board part,
//! 2,112 on its 2-plane LUNs). The FTL splits it at construction: the page buffer every path
//! uses stays one raw page, the rest (`Ftl::gc_extra`) holds a stripe's pages after the first.
//! Any other length is refused (`Error::Memory`). Besides: the paced victims' cursors grew from
//! one `u32` to `MAX_PLANES` `u16` (+4 bytes per plane in the `Ftl` struct).
//!
//! When ([`Ftl::gc_stripe_width`]): the extra buffer is lent, [`Ftl::set_gc_stripes`] is on (the
//! default), multi-plane programs are on (`Ftl::multi_program_on`), the map is the flat map, the
//! victim's plane is not emigrating, and no technique is attached. Left out of this first
//! version: second writes and deduplication (their pages move through their own hooks), the NV
//! cache (a copy's eviction may write back or run GC between a program and its remaps),
//! FlexECC (a format per copy), and the cached map: its stripes worked (cut at every operation)
//! but, with the harness's small map cache at 75% utilization, made 30-40% more GC copies and
//! map writes than page-by-page GC (more victims; the cause was not found: interleaving two
//! regions of the victim and the group fault-in's early write-backs were ruled out). With any
//! of them GC copies one page at a time as before.
//!
//! Which pages ([`VictimCursor`], [`Ftl::gc_step`], the unit of work of whole-victim GC,
//! `gc.rs`, and of paced GC, `pacing.rs`): a victim's pages are split by page offset into as
//! many parts as the LUN has planes; a stripe takes the next valid page of each part (slot `r`
//! to plane `r` of the LUN), so pages that were neighbours in the victim (a multi-page host
//! request's, invalidated together) stay neighbours in one plane's GC block. (Striping
//! consecutive valid pages instead split every request over the planes: the blocks' valid
//! counts spread less, greedy GC found fuller victims, and the simulator's WAF rose from 3.51
//! to 3.76 with 8-page requests; with parts it is 3.51 to 3.54, and 3.390 to 3.389 over 20,000
//! requests.) A slot whose part is done takes the next valid page of another part (a victim's
//! last pages). Without stripes the parts are taken in order, the victim's page order, and no
//! page ahead is looked at (without a bitmap a look reads a spare and may fault a map entry in:
//! page-by-page GC does exactly what it did before, on either map).
//!
//! How: GC first looks at the GC frontiers of the LUN's planes. Drifted (different page
//! offsets: a map page, a single copy, a spill, a retry), the next valid page goes as a single
//! copy (copy-back where it qualifies, `gc_copy_back.rs`) to the frontier furthest behind the
//! offset they reach with the fewest pages (the drift rule of host stripes), taken from the
//! part that plane receives; so they line up again without voiding a page. Lined up, the next
//! stripe's pages: every sibling's GC frontier opened ([`Ftl::ensure_gc_frontier`]; a spill to
//! another plane: single copies), the pages read one by one into the page buffers, each decided
//! exactly as a single plain copy is (`Ftl::relocate_plan`, shared with `relocate_read`:
//! metadata checked against the map, data corrected where the codec can; a map page is written
//! again by the map, a page mapped nowhere dropped), every entry in RAM with room for its
//! change (`Ftl::map_fault_in_group`, as host stripes), the frontiers checked lined up again
//! with no torn page pending, then one `program_multi` of the `k` copies (consecutive sequence
//! numbers, plane order), each remapped after it. A stripe that does not go out (a page not to
//! be copied, frontiers no longer lined up) is programmed page by page from the buffers to the
//! planes the drift rule names. The victim's last pages, fewer than a stripe, go singly (the
//! first to its part's plane, which the next victim's first singles make up). A sibling whose
//! GC frontier is closed and that has no free block, or whose frontier a mount resumed (its
//! next page is checked erased first), makes the step a single copy to the victim's plane.
//! Copies may land in a sibling plane (legal: see "emigration" in docs/design.md), so stripes
//! do not use copy-back (same plane only); single copies still do. Paced GC counts a stripe as
//! `k` copies against its step's budget (a stripe is not split: a step may copy up to `k - 1`
//! pages more than its budget; later steps' budgets follow the victim's remaining pages).
//!
//! Failures: as a host stripe's (`Ftl::stripe_program_failed`, shared with `program_stripe`):
//! the pages before the failing one are remapped; it and those after it are voided (or recorded
//! torn), their blocks closed, a failed block sent to retirement, and those pages written again
//! one by one from the buffers (power loss and other errors: returned, the victim goes back to
//! the lists with its pages not yet remapped, as after any failed copy).
//!
//! Power loss: the victim keeps every page until all its copies are remapped and it is erased
//! through the usual end of collection (`gc.rs`), so a cut in a stripe loses nothing; mount's
//! torn window (`recovery.rs` `torn_window`) checks the newest `planes_per_lun` data pages
//! whenever `multi_program_possible` holds, which GC stripes require: a GC stripe's pages are
//! data pages with the newest sequence numbers, and a torn one is rolled back to the victim's
//! page it was copied from (tests/tests/gc_stripes.rs cuts at every operation, both emulator
//! semantics of a cut multi-plane call).

use nand_hal::{BlockId, NandFlash, PageId, ProgramOp, MAX_PLANES};

use crate::gc::CopyPlan;
use crate::map::MappingTable;
use crate::meta::{PageKind, PageMeta, META_LEN};
use crate::policy::{PageCodec, PolicySet, Stream};
use crate::{Error, Ftl};

const NIL: u32 = u32::MAX;

/// Page buffer `slot` of raw size `raw`: 0 is the page buffer, `j > 0` the `j`-th raw page of
/// GC stripes' extra buffer (`None` past its end).
pub(crate) fn slot_mut<'a>(
    buf: &'a mut [u8],
    extra: &'a mut [u8],
    raw: usize,
    slot: usize,
) -> Option<&'a mut [u8]> {
    if slot == 0 {
        return Some(buf);
    }
    extra.get_mut((slot - 1) * raw..slot * raw)
}

/// How far GC has looked through a victim: the victim's pages are split by page offset into
/// as many parts as a LUN has planes (at most `MAX_PLANES`; one part on a one-plane LUN), and
/// `next[r]` is the next page of part `r` to look at. A GC stripe takes the next valid page of
/// each part, so the pages that were neighbours in the victim (a host request's pages) stay
/// neighbours in one plane's GC block (see the module doc); without stripes the parts are
/// taken in order, which is the victim's page order.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) struct VictimCursor {
    pub(crate) next: [u16; MAX_PLANES],
}

/// Where the GC frontiers of a victim's LUN stand.
enum Lineup {
    /// At one page offset: a stripe may go.
    Aligned,
    /// Drifted: the next single copy goes to this plane, the one furthest behind.
    Behind(u32),
    /// No stripe now (a sibling resumed by a mount, emigrating, or without its reserve and
    /// without an open GC block): single copies to the victim's plane.
    Unusable,
}

impl<N: NandFlash, P: PolicySet, M: MappingTable> Ftl<'_, N, P, M> {
    /// Turns GC stripes on (the default; they also need the extra page buffers, see the module
    /// doc) or off (GC copies one page at a time).
    pub fn set_gc_stripes(&mut self, on: bool) {
        self.gc_stripes = on;
    }

    /// Pages of a GC stripe for a victim in `plane` (its LUN's planes), or 0 when GC copies one
    /// page at a time (see the module doc, **When**).
    pub(crate) fn gc_stripe_width(&self, plane: u32) -> usize {
        let k = (self.geo.planes_per_lun as usize).min(MAX_PLANES);
        let s = self.stack();
        if !self.gc_stripes
            || k < 2
            || self.gc_extra.len() < (k - 1) * self.buf.len()
            || !self.multi_program_on()
            || s.wom
            || s.dedup
            || s.nv_cache
            || s.flex_ecc
            || self.emigrating(plane)
            || self.map.on_flash()
            || k * (META_LEN + self.codec_len) > self.buf.len()
        {
            return 0;
        }
        k
    }

    /// The cursor of a victim of `pages_per_block` pages: each part at its first page.
    pub(crate) fn victim_cursor(&self) -> VictimCursor {
        let parts = self.victim_parts();
        let mut next = [0u16; MAX_PLANES];
        for (r, n) in next.iter_mut().enumerate().take(parts) {
            *n = self.part_start(r, parts) as u16;
        }
        VictimCursor { next }
    }

    /// Parts a victim is split in: the planes of a LUN (at most `MAX_PLANES`), 1 if the block
    /// has fewer pages.
    fn victim_parts(&self) -> usize {
        let k = (self.geo.planes_per_lun as usize).clamp(1, MAX_PLANES);
        if (self.geo.pages_per_block as usize) < k || self.geo.pages_per_block > u16::MAX as u32 {
            1
        } else {
            k
        }
    }

    /// The first page of part `r` of `parts` (`parts`: the end).
    fn part_start(&self, r: usize, parts: usize) -> u32 {
        (r as u64 * self.geo.pages_per_block as u64 / parts as u64) as u32
    }

    /// The first valid page of victim `b` from page `from` up to `end`.
    fn next_valid(&mut self, b: BlockId, from: u32, end: u32) -> Result<Option<u32>, Error> {
        for i in from..end {
            if self.page_is_valid(self.geo.page(b, i))? {
                return Ok(Some(i));
            }
        }
        Ok(None)
    }

    /// Moves the next valid page(s) of victim `b` (collected in `plane`) at `cur`: one GC stripe
    /// (the next valid page of each part) or one page (see the module doc). Returns the pages
    /// copied, 0 when the victim holds no valid page past the cursor.
    pub(crate) fn gc_step(&mut self, b: BlockId, plane: u32, cur: &mut VictimCursor) -> Result<u32, Error> {
        let parts = self.victim_parts();
        let k = self.gc_stripe_width(plane);
        if k < 2 || (parts != 1 && k != parts) {
            // Page by page, in the victim's page order (the parts in turn), looking at no page
            // ahead (without a bitmap each look reads a spare and may fault a map entry in).
            for r in 0..parts {
                let end = self.part_start(r + 1, parts);
                let found = self.next_valid(b, cur.next[r] as u32, end)?;
                cur.next[r] = found.map_or(end, |i| i + 1) as u16;
                if let Some(i) = found {
                    self.relocate(self.geo.page(b, i), plane)?;
                    return Ok(1);
                }
            }
            return Ok(0);
        }
        // Each part's next valid page (its cursor moved to it).
        let mut found = [None; MAX_PLANES];
        for (r, f) in found.iter_mut().enumerate().take(parts) {
            let end = self.part_start(r + 1, parts);
            *f = self.next_valid(b, cur.next[r] as u32, end)?;
            cur.next[r] = f.unwrap_or(end) as u16;
        }
        let Some(first) = found[..parts].iter().position(Option::is_some) else { return Ok(0) };
        let base = plane - plane % k as u32;
        let q = match self.gc_lineup(plane, k) {
            Lineup::Aligned => {
                if let Some(pages) = self.stripe_pages(b, cur, &found[..parts], k)? {
                    self.gc_stripe(&pages[..k], plane)?;
                    return Ok(k as u32);
                }
                // The victim's last pages (fewer than a stripe): the first part's next, to
                // its plane.
                base + first as u32
            }
            Lineup::Behind(q) => q,
            Lineup::Unusable => plane,
        };
        // A single copy to plane `q`: of the part that plane takes if it has a page left.
        let r = (q - base) as usize;
        let part = if found.get(r).is_some_and(Option::is_some) { r } else { first };
        self.gc_step_single(b, cur, &found[..parts], part, q)
    }

    /// The pages of the next stripe of victim `b`: slot `r` takes part `r`'s next valid page
    /// (`found`), a slot whose part has none left the next valid page of the first part with
    /// one more (a victim's last pages); `None` if the victim has fewer than a stripe's worth
    /// left. Moves the cursors past the pages taken (each part's are its next valid ones).
    fn stripe_pages(
        &mut self,
        b: BlockId,
        cur: &mut VictimCursor,
        found: &[Option<u32>],
        k: usize,
    ) -> Result<Option<[PageId; MAX_PLANES]>, Error> {
        let parts = found.len();
        // Per part, one past the last page taken (or where its scan stands).
        let mut upto = [0u32; MAX_PLANES];
        let mut slot = [None; MAX_PLANES];
        for r in 0..parts {
            upto[r] = cur.next[r] as u32;
            if let Some(i) = found[r] {
                slot[r] = Some(i);
                upto[r] = i + 1;
            }
        }
        for s in slot.iter_mut().take(k) {
            if s.is_some() {
                continue;
            }
            for (r, up) in upto.iter_mut().enumerate().take(parts) {
                if found[r].is_none() {
                    continue;
                }
                let end = self.part_start(r + 1, parts);
                if let Some(i) = self.next_valid(b, *up, end)? {
                    *s = Some(i);
                    *up = i + 1;
                    break;
                }
                *up = end;
            }
            if s.is_none() {
                return Ok(None);
            }
        }
        let mut pages = [PageId(0); MAX_PLANES];
        for (p, s) in pages.iter_mut().zip(&slot).take(k) {
            *p = self.geo.page(b, s.unwrap_or(0));
        }
        for (n, &up) in cur.next.iter_mut().zip(&upto).take(parts) {
            *n = up as u16;
        }
        Ok(Some(pages))
    }

    /// One single copy in [`Self::gc_step`]: the next valid page of part `r` (`found`), to the
    /// GC stream of `q` (the victim's plane on the plain path).
    fn gc_step_single(
        &mut self,
        b: BlockId,
        cur: &mut VictimCursor,
        found: &[Option<u32>],
        r: usize,
        q: u32,
    ) -> Result<u32, Error> {
        let Some(i) = found[r] else { return Ok(0) };
        cur.next[r] = i as u16 + 1;
        self.relocate(self.geo.page(b, i), q)?;
        Ok(1)
    }

    /// The GC frontiers of the LUN of `plane` (`k` planes): lined up, or the plane furthest
    /// behind the offset they reach with the fewest pages (a closed frontier opens at 0).
    fn gc_lineup(&self, plane: u32, k: usize) -> Lineup {
        let ppb = self.geo.pages_per_block;
        let base = plane - plane % k as u32;
        let mut offset = [0u32; MAX_PLANES];
        for (j, o) in offset.iter_mut().enumerate().take(k) {
            let q = base + j as u32;
            let i = Self::frontier_index(q, Stream::Gc);
            let f = self.frontiers[i];
            if self.resumed & (1 << i) != 0 || (q != plane && self.emigrating(q)) {
                return Lineup::Unusable;
            }
            if f.block == NIL {
                // Copies of another plane's victim open no block in a plane without a free one
                // (`ensure_gc_frontier` would send them to another LUN's plane).
                if q != plane && self.blocks.free_count(q) == 0 {
                    return Lineup::Unusable;
                }
                *o = 0;
            } else {
                *o = f.next_page;
            }
        }
        let lag = |t: u32, o: u32| (t + ppb - o) % ppb;
        let offs = &offset[..k];
        let target =
            offs.iter().copied().min_by_key(|&t| offs.iter().map(|&o| lag(t, o)).sum::<u32>()).unwrap_or(0);
        // The plane furthest behind (ties: the victim's own plane, then the first).
        let own = (plane - base) as usize;
        let mut best = own;
        for j in 0..k {
            if lag(target, offs[j]) > lag(target, offs[best]) {
                best = j;
            }
        }
        if lag(target, offs[best]) == 0 {
            Lineup::Aligned
        } else {
            Lineup::Behind(base + best as u32)
        }
    }

    /// Whether the GC frontiers of planes `base..base + k` are open at one page offset, none a
    /// mount resumed, and no failed program's page is pending (the program's condition).
    fn gc_aligned(&self, base: u32, k: usize) -> bool {
        let first = self.frontiers[Self::frontier_index(base, Stream::Gc)];
        (0..k as u32).all(|j| {
            let i = Self::frontier_index(base + j, Stream::Gc);
            let f = self.frontiers[i];
            f.block != NIL && f.next_page == first.next_page && self.resumed & (1 << i) == 0
        }) && self.torn_is_clear()
    }

    /// Copies the valid pages `pages` (one per plane of the LUN of `plane`) as one GC stripe, or
    /// one by one where it cannot go out (see the module doc).
    fn gc_stripe(&mut self, pages: &[PageId], plane: u32) -> Result<(), Error> {
        let k = pages.len();
        let base = plane - plane % k as u32;
        for j in 0..k as u32 {
            if self.ensure_gc_frontier(base + j)? != base + j {
                return self.gc_singles(pages, plane);
            }
        }
        if !self.gc_aligned(base, k) {
            return self.gc_singles(pages, plane);
        }
        let d = self.geo.data_bytes as usize;
        let raw = self.buf.len();
        let sl = META_LEN + self.codec_len;
        for (j, &page) in pages.iter().enumerate() {
            self.counters.nand_reads += 1;
            let b = slot_mut(self.buf, self.gc_extra, raw, j).ok_or(Error::Memory)?;
            let (data, spare) = b.split_at_mut(d);
            self.nand.read_page(page, data, &mut spare[..sl])?;
        }
        let mut plans: [Option<CopyPlan>; MAX_PLANES] = [None; MAX_PLANES];
        for (j, &page) in pages.iter().enumerate() {
            plans[j] = self.relocate_plan(page, j, None)?;
        }
        let mut lpns = [0u32; MAX_PLANES];
        let mut all = true;
        for (l, p) in lpns.iter_mut().zip(&plans[..k]) {
            match p {
                Some(p) => *l = p.lpn,
                None => all = false,
            }
        }
        if all && self.map_fault_in_group(&lpns[..k])? && self.gc_aligned(base, k) {
            return self.program_gc_stripe(base, &plans[..k]);
        }
        self.gc_singles_from_buffers(&plans[..k], plane)
    }

    /// The single copies of `pages` (not read yet), each to the plane the lineup names.
    fn gc_singles(&mut self, pages: &[PageId], plane: u32) -> Result<(), Error> {
        for &page in pages {
            let q = self.gc_single_plane(plane);
            self.relocate(page, q)?;
        }
        Ok(())
    }

    /// Where a single GC copy of a page of `plane` goes while stripes are on: the sibling
    /// plane furthest behind, or `plane`.
    fn gc_single_plane(&self, plane: u32) -> u32 {
        let k = self.gc_stripe_width(plane);
        if k < 2 {
            return plane;
        }
        match self.gc_lineup(plane, k) {
            Lineup::Behind(q) => q,
            _ => plane,
        }
    }

    /// Programs the pages of the buffers as planned one by one (the page buffer's first,
    /// then each extra buffer's copied into it), each to the plane [`Self::gc_single_plane`]
    /// names (no block opened there runs GC or a checkpoint: the buffers hold data), and remaps
    /// each.
    fn gc_singles_from_buffers(&mut self, plans: &[Option<CopyPlan>], plane: u32) -> Result<(), Error> {
        let raw = self.buf.len();
        for (j, plan) in plans.iter().enumerate() {
            let Some(plan) = *plan else { continue };
            if j > 0 {
                let src = self.gc_extra.get((j - 1) * raw..j * raw).ok_or(Error::Memory)?;
                self.buf.copy_from_slice(src);
            }
            self.map_fault_in_for_write(plan.lpn)?;
            let q = self.gc_single_plane(plane);
            let new = self.append(
                q,
                Stream::Gc,
                PageKind::Data,
                plan.lpn,
                plan.aux,
                crate::frontier::Source::Buffer { encode: plan.encode },
            )?;
            self.gc_copied(plan.lpn, new)?;
        }
        Ok(())
    }

    /// The end of one GC copy of `lpn`, programmed at `new`: remapped and counted.
    fn gc_copied(&mut self, lpn: u32, new: PageId) -> Result<(), Error> {
        self.remap(lpn, Some(new))?;
        self.counters.gc_page_copies += 1;
        Ok(())
    }

    /// One multi-plane program of the planned copies in the buffers (one each), to the lined-up
    /// GC frontiers of planes `base..`; then each remapped (see the module doc for failures).
    fn program_gc_stripe(&mut self, base: u32, plans: &[Option<CopyPlan>]) -> Result<(), Error> {
        let k = plans.len();
        let d = self.geo.data_bytes as usize;
        let raw = self.buf.len();
        let sl = META_LEN + self.codec_len;
        let format = self.flex_page_format(PageKind::Data, false);
        let mut dst = [PageId(0); MAX_PLANES];
        let mut plan = [CopyPlan { lpn: 0, aux: 0, encode: false, decoded_ok: true }; MAX_PLANES];
        for j in 0..k {
            plan[j] = plans[j].ok_or(Error::Corrupt)?;
            dst[j] = self.take_page(base + j as u32, Stream::Gc)?;
            let meta = PageMeta {
                kind: PageKind::Data,
                tag: plan[j].lpn,
                seq: self.seq,
                erase_count: self.blocks.get(self.geo.block_of(dst[j])).erase_count(),
                aux: plan[j].aux,
            };
            self.seq += 1;
            let b = slot_mut(self.buf, self.gc_extra, raw, j).ok_or(Error::Memory)?;
            let (data, spare) = b.split_at_mut(d);
            meta.encode(&mut spare[..META_LEN]);
            if plan[j].encode {
                self.policies.codec().encode_as(data, &mut spare[META_LEN..sl], format);
            }
        }
        self.counters.multi_plane_programs += 1;
        self.counters.gc_stripes += 1;
        self.dirty = true;
        let result = {
            let mut ops = [ProgramOp { page: PageId(0), data: &[], spare: &[] }; MAX_PLANES];
            for (j, op) in ops.iter_mut().enumerate().take(k) {
                let b: &[u8] = if j == 0 { self.buf } else { &self.gc_extra[(j - 1) * raw..j * raw] };
                *op = ProgramOp { page: dst[j], data: &b[..d], spare: &b[d..d + sl] };
            }
            self.nand.program_multi(&ops[..k])
        };
        let (done, err) = match result {
            Ok(()) => (k, None),
            Err((i, e)) => (i.min(k - 1), Some(e)),
        };
        self.counters.nand_programs += (done + usize::from(err.is_some())) as u64;
        for j in 0..done {
            self.gc_copied(plan[j].lpn, dst[j])?;
        }
        let Some(e) = err else { return Ok(()) };
        self.stripe_program_failed(&dst[done..k], e)?;
        // Written again one by one from the buffers (each `append` retries on its own), to the
        // planes they were for.
        for (j, p) in plan.iter().enumerate().take(k).skip(done) {
            if j > 0 {
                let src = self.gc_extra.get((j - 1) * raw..j * raw).ok_or(Error::Memory)?;
                self.buf.copy_from_slice(src);
            }
            let new = self.append(
                base + j as u32,
                Stream::Gc,
                PageKind::Data,
                p.lpn,
                p.aux,
                crate::frontier::Source::Buffer { encode: p.encode },
            )?;
            self.gc_copied(p.lpn, new)?;
        }
        Ok(())
    }
}
