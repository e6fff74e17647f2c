//! The FTL: a logical block device of whole NAND pages over a [`NandFlash`].
//!
//! This module owns the public API (`format`, `mount`, `read`, `write`, `trim`, `flush`,
//! `unmount`) and the bookkeeping every path shares: map updates with the valid-page bitmap and
//! the block table's valid counts. The other concepts live in their own modules as `impl` blocks
//! on [`Ftl`]: `frontier` (allocation and appending pages), `gc`, `wear`, `journal` (trims),
//! `checkpoint`, `recovery` (mount).
//!
//! Guarantees (tested in `tests/`):
//! 1. After `flush` returns Ok, every acknowledged write and trim survives any later power cut.
//! 2. A page written (or trimmed) after the last flush reads back after a cut and remount as
//!    either its old or its new content, never anything else; mount after a cut never fails
//!    because of the cut.
//! 3. Nothing the outside world can cause panics: errors come back as [`Error`] and leave the
//!    state consistent.

use nand_hal::{BlockId, Geometry, NandFlash, PageId};

use crate::blocks::{BlockInfo, BlockState, BlockTable};
use crate::checkpoint::CheckpointState;
use crate::config::{Config, RamLayout, StripeOrder, MAX_TOTAL_PLANES};
use crate::frontier::{Frontier, STREAMS};
use crate::journal::PendingTrims;
use crate::map::{FlatMap, MappingTable};
use crate::meta::{PageKind, PageMeta, SpareState, META_LEN};
use crate::pacing::PacedVictim;
use crate::policy::{
    Classifier, DefaultPolicies, Destination, PageCodec, Placement, PolicySet, Temperature, WriteRequest,
};
use crate::wear::WearState;
use crate::{Counters, Error};

/// Memory the caller lends the FTL (sizes from [`RamLayout`]); the map is passed separately.
pub struct Memory<'m> {
    /// Valid-page bitmap, [`RamLayout::valid_words`] words.
    pub valid: &'m mut [u32],
    /// Block table, [`RamLayout::blocks`] entries.
    pub blocks: &'m mut [BlockInfo],
    /// List heads, [`RamLayout::list_heads`] words.
    pub list_heads: &'m mut [u32],
    /// One raw page (data + spare), [`RamLayout::page_buf`] bytes; or, to let GC program its
    /// copies as multi-plane stripes (`gc_stripe.rs`), [`RamLayout::page_buf`] +
    /// [`RamLayout::gc_stripe_buf`] bytes (one raw page per plane of a LUN).
    pub page_buf: &'m mut [u8],
}

/// A page-mapping FTL over a NAND device `N`, with policies `P` and mapping table `M`.
pub struct Ftl<'m, N: NandFlash, P: PolicySet = DefaultPolicies, M: MappingTable = FlatMap<'m>> {
    pub(crate) nand: N,
    pub(crate) policies: P,
    pub(crate) map: M,
    pub(crate) geo: Geometry,
    pub(crate) cfg: Config,
    pub(crate) blocks: BlockTable<'m>,
    pub(crate) valid: &'m mut [u32],
    pub(crate) buf: &'m mut [u8],
    /// The page buffers of GC stripes' pages after the first (`planes_per_lun - 1` raw pages,
    /// the rest of [`Memory::page_buf`]), empty when the caller lent one page (`gc_stripe.rs`).
    pub(crate) gc_extra: &'m mut [u8],
    /// GC stripes on (`Ftl::set_gc_stripes`; they also need `gc_extra`).
    pub(crate) gc_stripes: bool,
    pub(crate) frontiers: [Frontier; MAX_TOTAL_PLANES * STREAMS],
    pub(crate) trims: PendingTrims,
    /// The next sequence number to give a page.
    pub(crate) seq: u64,
    pub(crate) ckpt: CheckpointState,
    /// Pages failed programs left unvoided, settled before the next program.
    pub(crate) torn: crate::frontier::TornPages,
    /// Frontiers (bit per frontier index) whose block mount resumed: their pages are checked
    /// erased before they are programmed (see `frontier::take_page`).
    pub(crate) resumed: u64,
    /// The page of a resumed frontier `ensure_frontier` last checked erased (`u32::MAX`: none):
    /// `take_page` does not read it again.
    pub(crate) resume_checked: u32,
    pub(crate) wear: WearState,
    /// The next host page's rotation slot (`0..total_planes`); its plane is
    /// [`Ftl::plane_at`]`(next_plane)`, the slot itself in [`StripeOrder::PlaneFirst`] order.
    pub(crate) next_plane: u32,
    pub(crate) counters: Counters,
    pub(crate) codec_len: usize,
    /// Whether anything changed since the last checkpoint (for `unmount`).
    pub(crate) dirty: bool,
    /// A block was retired since the free reserves were last restored (see `retire_pending`).
    pub(crate) reserve_spent: bool,
    /// Paced GC on (see [`crate::pacing`]).
    pub(crate) gc_pacing: bool,
    /// Planes whose GC copies go to another plane, a bit each (see `emigration.rs`).
    pub(crate) emigrating: u32,
    /// Multi-plane operations on (see [`crate::multiplane`]).
    pub(crate) multi_plane: bool,
    /// Striped requests in a row that started one page off their LUN's lined-up planes (see
    /// `multiplane.rs`, **Realignment**).
    pub(crate) stripe_misses: u8,
    /// Where the anchor's copies are and what its newest record says.
    pub(crate) anchor: crate::anchor::AnchorState,
    /// The mount pool (see `pool.rs`).
    pub(crate) pool: crate::pool::PoolState,
    /// The victim paced GC is collecting in each plane.
    pub(crate) paced: [PacedVictim; MAX_TOTAL_PLANES],
    /// Recent host pages on the host and cold streams (pacing's estimate of when a host-side
    /// block opens, see `pacing.rs`).
    pub(crate) host_stream_pages: [u32; 2],
    /// The stacked techniques (see [`crate::ext`]; empty in a build without them).
    #[cfg_attr(
        not(any(feature = "wom", feature = "dedup", feature = "cdm", feature = "flex-ecc")),
        allow(dead_code)
    )]
    pub(crate) ext: crate::ext::ExtState<'m>,
}

impl<'m, N: NandFlash, P: PolicySet, M: MappingTable> Ftl<'m, N, P, M> {
    pub(crate) fn new(nand: N, policies: P, map: M, mem: Memory<'m>, cfg: Config) -> Result<Self, Error> {
        let geo = nand.geometry();
        let codec_len = policies.codec_ref().spare_len();
        cfg.validate(&geo, codec_len)?;
        let lay = RamLayout::new(&geo, &cfg);
        // A flash-resident map may run without the bitmap (validity decided at GC).
        if (mem.valid.len() != lay.valid_words && !(mem.valid.is_empty() && map.on_flash()))
            || mem.blocks.len() != lay.blocks
            || mem.list_heads.len() != lay.list_heads
            || (mem.page_buf.len() != lay.page_buf
                && (lay.gc_stripe_buf == 0 || mem.page_buf.len() != lay.page_buf + lay.gc_stripe_buf))
            || map.len() != cfg.logical_pages
            || !map.fits(&geo)
            || !geo.data_bytes.is_multiple_of(4)
        {
            return Err(Error::Memory);
        }
        // The first raw page is the page buffer every path uses; the rest, if lent, GC stripes'.
        let (buf, gc_extra) = mem.page_buf.split_at_mut(lay.page_buf);
        Ok(Ftl {
            nand,
            policies,
            map,
            geo,
            cfg,
            blocks: BlockTable::new(geo, mem.blocks, mem.list_heads),
            valid: mem.valid,
            buf,
            gc_extra,
            gc_stripes: true,
            frontiers: [Frontier::NONE; MAX_TOTAL_PLANES * STREAMS],
            trims: PendingTrims::new(geo.data_bytes),
            seq: 1,
            ckpt: CheckpointState::default(),
            torn: crate::frontier::TornPages::NONE,
            resumed: 0,
            resume_checked: u32::MAX,
            wear: WearState::default(),
            next_plane: 0,
            counters: Counters::default(),
            codec_len,
            dirty: false,
            reserve_spent: false,
            gc_pacing: true,
            emigrating: 0,
            multi_plane: true,
            stripe_misses: 0,
            anchor: crate::anchor::AnchorState::NONE,
            pool: crate::pool::PoolState { bounded: false, listed: 0, renew_due: false, uncertain: false },
            paced: [PacedVictim::NONE; MAX_TOTAL_PLANES],
            host_stream_pages: [0; 2],
            ext: crate::ext::ExtState::default(),
        })
    }

    /// Formats the device (erasing every good block, skipping factory bad ones, keeping the erase
    /// counts an earlier format left in the blocks) and returns it mounted and empty.
    /// No technique is stacked: see [`Ftl::format_with`].
    pub fn format(nand: N, policies: P, map: M, mem: Memory<'m>, cfg: Config) -> Result<Self, Error> {
        Self::format_with(nand, policies, map, mem, cfg, crate::ext::Extensions::none())
    }

    /// Mounts a formatted device: loads the newest checkpoint and replays what was written since.
    ///
    /// The device is taken by value and dropped on error; pass `&mut device` (every `&mut N` is a
    /// `NandFlash` too) to keep it, e.g. to format after `Error::NotFormatted`.
    /// No technique is stacked: see [`Ftl::mount_with`].
    pub fn mount(nand: N, policies: P, map: M, mem: Memory<'m>, cfg: Config) -> Result<Self, Error> {
        Self::mount_with(nand, policies, map, mem, cfg, crate::ext::Extensions::none())
    }

    /// Flushes, writes a checkpoint and a clean anchor record (so the next mount reads the anchor
    /// and the checkpoint only) and returns the device.
    pub fn unmount(mut self) -> Result<N, Error> {
        self.flush()?;
        if self.dirty {
            self.write_checkpoint()?;
        }
        self.write_anchor(true)?;
        Ok(self.nand)
    }

    /// Gives the device back without writing anything, as a power cut would.
    pub fn into_nand(self) -> N {
        self.nand
    }

    /// The device.
    pub fn nand(&self) -> &N {
        &self.nand
    }

    /// The device, mutably (for test harnesses that inject faults).
    pub fn nand_mut(&mut self) -> &mut N {
        &mut self.nand
    }

    /// The policies.
    pub fn policies_mut(&mut self) -> &mut P {
        &mut self.policies
    }

    /// Logical pages exported.
    pub fn capacity_pages(&self) -> u32 {
        self.cfg.logical_pages
    }

    /// Bytes per logical page.
    pub fn page_bytes(&self) -> u32 {
        self.geo.data_bytes
    }

    /// The configuration in force.
    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// The device geometry.
    pub fn geometry(&self) -> &Geometry {
        &self.geo
    }

    /// The physical page logical page `lpn` is mapped to, as far as the map has it in RAM (the
    /// flat map always; a flash-resident map answers `None` for an entry it has not cached), or
    /// `None` if unmapped or out of range. For tools and the simulator's timing of requests.
    pub fn mapped_page(&self, lpn: u32) -> Option<PageId> {
        if lpn >= self.cfg.logical_pages {
            return None;
        }
        self.map.get(lpn)
    }

    /// Operation counters.
    pub fn counters(&self) -> &Counters {
        &self.counters
    }

    /// Zeroes the operation counters.
    pub fn reset_counters(&mut self) {
        let mount_reads = self.counters.mount_reads;
        self.counters = Counters { mount_reads, ..Counters::default() };
    }

    /// Erase count of every block, in block order (bad blocks included).
    pub fn erase_counts(&self) -> impl Iterator<Item = (BlockId, u32, bool)> + '_ {
        self.blocks.iter().map(|(b, i)| (b, i.erase_count(), i.state() == BlockState::Bad))
    }

    /// Every block's table entry (state, erase count, valid pages), in block order: for tools and
    /// tests that check what a mount rebuilt.
    pub fn block_infos(&self) -> impl Iterator<Item = (BlockId, &crate::blocks::BlockInfo)> + '_ {
        self.blocks.iter()
    }

    /// Erase count of every block wear leveling covers: good blocks outside the anchor (whose
    /// blocks are erased once per `pages_per_block` records, see [`crate::anchor`]).
    pub fn leveled_erase_counts(&self) -> impl Iterator<Item = (BlockId, u32)> + '_ {
        self.blocks
            .iter()
            .filter(|(_, i)| !matches!(i.state(), BlockState::Bad | BlockState::Anchor))
            .map(|(b, i)| (b, i.erase_count()))
    }

    /// Pages one checkpoint of this FTL takes (its map's section: a flat map's every entry, a
    /// cached map's directory).
    pub fn checkpoint_pages(&self) -> u32 {
        crate::checkpoint::checkpoint_pages(&self.geo, self.map.section_words())
    }

    /// Bytes of RAM this FTL uses in caller memory plus its own struct.
    pub fn ram_bytes(&self) -> usize {
        let lay = RamLayout::new(&self.geo, &self.cfg);
        lay.total_bytes() - lay.map_words * 4 - lay.valid_words * 4
            + self.valid.len() * 4
            + self.map.ram_bytes()
            + self.gc_extra.len()
            + core::mem::size_of::<Self>()
    }

    pub(crate) fn check_range(&self, lpn: u32, bytes: usize) -> Result<u32, Error> {
        let pb = self.geo.data_bytes as usize;
        if bytes == 0 || !bytes.is_multiple_of(pb) {
            return Err(Error::BufferSize);
        }
        let n = (bytes / pb) as u64;
        if lpn as u64 + n > self.cfg.logical_pages as u64 {
            return Err(Error::OutOfRange);
        }
        Ok(n as u32)
    }

    /// Reads whole logical pages starting at `lpn` into `buf` (a multiple of the page size).
    /// Pages never written or trimmed read as zeros.
    pub fn read(&mut self, lpn: u32, buf: &mut [u8]) -> Result<(), Error> {
        let n = self.check_range(lpn, buf.len())?;
        let pb = self.geo.data_bytes as usize;
        let reads_before = self.counters.nand_reads;
        let mut r = Ok(());
        // With the NV cache, pages are read in the host's order (the cache sees them as a
        // single-page read would), so channel-first rounds are not reordered.
        if n > 1 && self.multi_rw_on() && self.cfg.stripe_order == StripeOrder::ChannelFirst && !self.nv_on()
        {
            r = self.read_rounds(lpn, buf);
        } else if n > 1 && self.multi_rw_on() {
            // Multi-plane reads where the pages allow (see `multiplane.rs`), a stripe at a time.
            let ppl = nand_hal::MAX_PLANES;
            let mut chunks = buf.chunks_exact_mut(pb).enumerate();
            loop {
                let mut items: [(u32, &mut [u8]); nand_hal::MAX_PLANES] =
                    core::array::from_fn(|_| (0, &mut [][..]));
                let mut k = 0;
                for (i, chunk) in chunks.by_ref().take(ppl) {
                    items[k] = (lpn + i as u32, chunk);
                    k += 1;
                }
                if k == 0 {
                    break;
                }
                r = self.read_grouped(&mut items[..k]);
                if r.is_err() {
                    break;
                }
            }
        } else {
            for (i, chunk) in buf.chunks_exact_mut(pb).enumerate().take(n as usize) {
                r = self.read_one(lpn + i as u32, chunk);
                if r.is_err() {
                    break;
                }
            }
        }
        self.counters.host_read_nand_reads += self.counters.nand_reads - reads_before;
        r?;
        self.counters.host_read_pages += n as u64;
        Ok(())
    }

    pub(crate) fn read_one(&mut self, lpn: u32, out: &mut [u8]) -> Result<(), Error> {
        // The stacking order (see `ext`): the NV cache, second writes, deduplication.
        if self.nv_read_hit(lpn, out)? {
            return Ok(());
        }
        self.read_flash(lpn, out)
    }

    /// [`Ftl::read_one`] of a page the NV cache does not hold (asked already): from flash, then
    /// the NV cache's copy.
    pub(crate) fn read_flash(&mut self, lpn: u32, out: &mut [u8]) -> Result<(), Error> {
        let Some(page) = self.map_get(lpn)? else {
            out.fill(0);
            return Ok(());
        };
        // A shared page's spare names its first owner (or where it moved from), not `lpn`.
        let (page, shared) = self.dedup_resolve(page);
        if let Some(seq) = self.reuse_read_hook(lpn, page, shared, out)? {
            return self.nv_fill(lpn, out, seq);
        }
        let d = self.geo.data_bytes as usize;
        let spare_len = META_LEN + self.codec_len;
        self.counters.nand_reads += 1;
        self.nand.read_page(page, out, &mut self.buf[d..d + spare_len])?;
        let seq = match PageMeta::decode(&self.buf[d..d + spare_len]) {
            SpareState::Valid(m) if m.kind == PageKind::Data && (m.tag == lpn || shared) => m.seq,
            _ => return Err(Error::Uncorrectable { lpn }),
        };
        let stored = &self.buf[d + META_LEN..d + spare_len];
        self.policies.codec().decode(out, stored).map_err(|_| Error::Uncorrectable { lpn })?;
        self.nv_fill(lpn, out, seq)
    }

    /// Writes whole logical pages starting at `lpn` from `data` (a multiple of the page size).
    /// Each page is on flash when this returns; it survives a power cut once `flush` returns.
    pub fn write(&mut self, lpn: u32, data: &[u8]) -> Result<(), Error> {
        let n = self.check_range(lpn, data.len())?;
        // A request shorter than a stripe ends a run of striped requests (`multiplane.rs`,
        // **Realignment**): it moves the rotation, so the planes' drift is not a steady state.
        if n < self.geo.planes_per_lun {
            self.stripe_misses = 0;
        }
        self.dedup_keep_reserve()?;
        if self.trims.overlaps(lpn, n) {
            self.write_journal()?;
        }
        // FlexECC's RAM hints follow the new data whichever path writes it.
        self.flex_note_write(lpn, n);
        // The stacking order (see `ext`): deduplication's write path, else second writes for
        // the pages they take, else the core's first write; the NV cache after each page.
        if self.dedup_write_hook(lpn, data, n)? {
            return Ok(());
        }
        let pb = self.geo.data_bytes as usize;
        let req = WriteRequest { lpn, pages: n, page_bytes: self.geo.data_bytes };
        let temp = self.policies.classifier().classify_request(&req);
        if n > 1 && self.multi_program_on() {
            // Striped over the planes with multi-plane programs (see `multiplane.rs`; not with
            // a write-back NV cache, which takes each page instead, below).
            let page = |i: usize| (lpn + i as u32, &data[i * pb..(i + 1) * pb]);
            self.write_striped(n as usize, page, crate::multiplane::RequestTemp::Whole(temp))?;
            return self.finish_write();
        }
        for (i, chunk) in data.chunks_exact(pb).enumerate() {
            let l = lpn + i as u32;
            let programs_before = self.counters.nand_programs;
            let t = self.policies.classifier().classify_page(l, temp);
            // A write-back NV cache takes the page (it reaches flash when evicted).
            if self.nv_write_hook(l, chunk)? {
                self.note_write_programs(programs_before);
                continue;
            }
            // Second writes take the hot pages they can place (a first write is scrambled
            // when they are on).
            if !self.reuse_second_write_hook(l, chunk, t)? {
                self.first_write(l, t, chunk)?;
            }
            self.note_write_programs(programs_before);
        }
        self.finish_write()
    }

    /// End-of-operation work of a write, counted against the request's last page.
    pub(crate) fn finish_write(&mut self) -> Result<(), Error> {
        let programs_before = self.counters.nand_programs;
        let r = self.maintenance();
        if self.counters.nand_programs > programs_before {
            self.counters.last_write_programs += self.counters.nand_programs - programs_before;
            self.counters.worst_host_write_programs =
                self.counters.worst_host_write_programs.max(self.counters.last_write_programs);
        }
        r
    }

    /// The first write of one host page, the one sequence every write path shares: placement by
    /// temperature, the next plane in rotation, paced GC, the frontier, the map entry faulted in
    /// (before the program: a write-back this causes comes before the page, see `map_io.rs`), the
    /// program (scrambled first when second writes are on), the remap, and the NV cache's copy.
    pub(crate) fn first_write(&mut self, lpn: u32, t: Temperature, data: &[u8]) -> Result<PageId, Error> {
        let Destination::FirstWrite(stream) = self.policies.placement().place(lpn, t);
        let plane = self.take_next_plane();
        self.gc_pace(plane)?;
        let plane = self.ensure_frontier(plane, stream)?;
        self.map_fault_in_for_write(lpn)?;
        let page = if self.reuse_on() {
            let aux = self.scramble_into_buf(lpn, data);
            self.append(
                plane,
                stream,
                PageKind::Data,
                lpn,
                aux,
                crate::frontier::Source::Buffer { encode: true },
            )?
        } else {
            self.append_host(plane, stream, lpn, data)?
        };
        self.remap(lpn, Some(page))?;
        self.counters.host_write_pages += 1;
        // `append` gave the page the sequence number just before `self.seq`.
        self.nv_after_write(lpn, data, self.seq - 1)?;
        Ok(page)
    }

    /// The device-wide plane of rotation slot `slot` (`< total_planes`) in the configured
    /// [`StripeOrder`].
    #[inline]
    pub(crate) fn plane_at(&self, slot: u32) -> u32 {
        self.cfg.stripe_order.plane(&self.geo, slot)
    }

    /// The plane of the next rotation slot, and the rotation moves on by one.
    #[inline]
    pub(crate) fn take_next_plane(&mut self) -> u32 {
        let plane = self.plane_at(self.next_plane);
        self.next_plane = (self.next_plane + 1) % self.geo.total_planes();
        plane
    }

    /// Records the programs one host page write caused (its own, GC's, checkpoints', journals').
    pub(crate) fn note_write_programs(&mut self, before: u64) {
        let c = &mut self.counters;
        c.last_write_programs = c.nand_programs - before;
        c.worst_host_write_programs = c.worst_host_write_programs.max(c.last_write_programs);
    }

    /// Trims `count` logical pages from `lpn`: they read as zeros from now on (durably after the
    /// next `flush`).
    pub fn trim(&mut self, lpn: u32, count: u32) -> Result<(), Error> {
        if count == 0 {
            return Ok(());
        }
        if lpn as u64 + count as u64 > self.cfg.logical_pages as u64 {
            return Err(Error::OutOfRange);
        }
        self.dedup_keep_reserve()?;
        if self.trims.is_full() {
            self.write_journal()?;
        }
        self.dedup_order_before(lpn, count)?;
        for l in lpn..lpn + count {
            // With a flash-resident map a remap can fail (a map page read or write-back): the
            // pages already unmapped are journaled like a whole trim, so that a flush keeps them.
            if let Err(e) = self.remap(l, None) {
                if l > lpn {
                    self.trims.push(lpn, l - lpn);
                    self.dirty = true;
                }
                return Err(e);
            }
        }
        self.trims.push(lpn, count);
        self.counters.host_trim_pages += count as u64;
        self.dirty = true;
        self.nv_trim(lpn, count)?;
        self.maintenance()
    }

    /// Makes every acknowledged write and trim durable.
    pub fn flush(&mut self) -> Result<(), Error> {
        self.counters.host_flushes += 1;
        // A page a failed program left unvoided may hold a whole newer version of a page the host
        // has since read back as old: void it (or checkpoint) before acknowledging the flush.
        self.settle_torn()?;
        self.dedup_keep_reserve()?;
        if !self.trims.is_empty() {
            self.write_journal()?;
        }
        self.dedup_flush_pending(true)?;
        // An anchor record failed: a mount may take the record before it, whose checkpoint does
        // not hold what the last one made durable (trims): a new checkpoint and record first.
        if self.pool.uncertain {
            self.write_checkpoint()?;
        }
        self.maintenance()
    }

    /// Work deferred to the end of a host operation: retiring failed blocks, static wear leveling.
    pub(crate) fn maintenance(&mut self) -> Result<(), Error> {
        self.retire_pending()?;
        self.wear_level_pending()
    }

    /// Points `lpn` at `page` (or unmaps it), keeping the valid bitmap and counts right.
    pub(crate) fn remap(&mut self, lpn: u32, page: Option<PageId>) -> Result<(), Error> {
        self.map_fault_in_for_write(lpn)?;
        let old = self.map.set(lpn, page);
        // A shared page loses one reference; it is invalid only when none is left.
        let old = old.and_then(|o| self.dedup_unref(o));
        if let Some(o) = old {
            self.set_valid_bit(o, false);
            self.reuse_invalidate(o);
        }
        if let Some(p) = page {
            self.set_valid_bit(p, true);
        }
        self.dirty = true;
        Ok(())
    }

    pub(crate) fn is_valid_page(&self, p: PageId) -> bool {
        self.valid.get(p.0 as usize / 32).is_some_and(|w| w & (1 << (p.0 % 32)) != 0)
    }

    /// Whether GC must move `p`: its bit in the valid-page bitmap, or, with a flash-resident map
    /// whose caller lent no bitmap, what its spare says checked against the map (a data page is
    /// valid if its logical page maps to it, a map page if the directory points at it).
    pub(crate) fn page_is_valid(&mut self, p: PageId) -> Result<bool, Error> {
        if !self.valid.is_empty() {
            return Ok(self.is_valid_page(p));
        }
        let mut meta = [0u8; META_LEN];
        self.counters.nand_reads += 1;
        self.nand.read_spare(p, &mut meta)?;
        Ok(match PageMeta::decode(&meta) {
            SpareState::Valid(m) if m.kind == PageKind::Data && m.tag < self.cfg.logical_pages => {
                self.map_get(m.tag)? == Some(p)
            }
            SpareState::Valid(m) if m.kind == PageKind::Map => self.map.dir(m.tag) == Some(p),
            _ => false,
        })
    }

    /// Counts `p` valid (`on`) or invalid in its block. With the bitmap, only a change of its
    /// bit counts; without one (a flash-resident map), every call is a transition.
    pub(crate) fn set_valid_bit(&mut self, p: PageId, on: bool) {
        if self.valid.is_empty() {
            if !self.geo.contains_page(p) {
                return;
            }
            let b = self.geo.block_of(p);
            if on {
                self.blocks.inc_valid(b);
            } else {
                self.blocks.dec_valid(b);
            }
            return;
        }
        let Some(w) = self.valid.get_mut(p.0 as usize / 32) else {
            return;
        };
        let bit = 1u32 << (p.0 % 32);
        let was = *w & bit != 0;
        if was == on {
            return;
        }
        if on {
            *w |= bit;
            self.blocks.inc_valid(self.geo.block_of(p));
        } else {
            *w &= !bit;
            self.blocks.dec_valid(self.geo.block_of(p));
            self.dedup_page_invalidated(p);
        }
    }

    /// Format: erase all good blocks, write the first checkpoint.
    pub(crate) fn format_device(&mut self) -> Result<(), Error> {
        self.blocks.reset();
        self.map.clear();
        self.valid.fill(0);
        let d = self.geo.data_bytes as usize;
        // Sibling blocks (one per plane of a LUN) are consecutive: a stripe at a time, erased
        // with one multi-plane erase when that is on (see `multiplane.rs`).
        let ppl = self.geo.planes_per_lun.min(nand_hal::MAX_PLANES as u32);
        for first in (0..self.geo.total_blocks()).step_by(ppl as usize) {
            let mut stripe = [BlockId(0); nand_hal::MAX_PLANES];
            let mut n = 0;
            for b in first..first + ppl {
                let b = BlockId(b);
                self.counters.nand_reads += 2;
                if self.nand.is_bad(b)? {
                    continue;
                }
                // Keep the wear an earlier format recorded.
                self.counters.nand_reads += 1;
                self.nand.read_spare(self.geo.page(b, 0), &mut self.buf[d..d + META_LEN])?;
                let ec = match PageMeta::decode(&self.buf[d..d + META_LEN]) {
                    SpareState::Valid(m) => m.erase_count,
                    _ => 0,
                };
                self.blocks.set_erase_count(b, ec);
                self.blocks.set_state(b, BlockState::Dirty);
                stripe[n] = b;
                n += 1;
            }
            self.erase_stripe(&stripe[..n])?;
        }
        self.seq = 1;
        self.anchor_format();
        self.write_checkpoint()
    }

    /// Erases a block that holds nothing live; on erase failure it is marked bad. Leaves it Free
    /// (or Bad).
    pub(crate) fn erase_free_block(&mut self, b: BlockId) -> Result<(), Error> {
        self.reuse_erased(b);
        self.counters.nand_erases += 1;
        match self.nand.erase_block(b) {
            Ok(()) => {
                // (`erased` forgets a torn page this block held, found by the blip runs: a paced
                // victim with nothing valid but an unsettled torn page was erased and reused.)
                self.erased(b);
                Ok(())
            }
            Err(e) if nand_hal::Error::kind(&e) == nand_hal::ErrorKind::EraseFailed => {
                self.counters.erase_failures += 1;
                self.retire_now(b);
                Ok(())
            }
            Err(e) => {
                self.blocks.set_state(b, BlockState::Dirty);
                Err(e.into())
            }
        }
    }

    /// Marks a block bad on flash (best effort) and in the table.
    pub(crate) fn retire_now(&mut self, b: BlockId) {
        crate::fmt::warn!("retiring block {}", b.0);
        self.reuse_erased(b);
        // A device that cannot even take the marker still has the block out of use in RAM; the
        // checkpoint records it as bad.
        self.counters.nand_programs += 1;
        let _ = self.nand.mark_bad(b);
        self.blocks.set_state(b, BlockState::Bad);
        self.counters.blocks_retired += 1;
        self.reserve_spent = true;
        self.dirty = true;
    }
}
