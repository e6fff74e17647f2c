//! Write frontiers and block allocation.
//!
//! Each plane has one open block per [`Stream`] (host, cold, GC). Pages of an open block are
//! taken in order; a full block becomes `Used`. Before a host stream opens a block, GC runs until
//! the plane has its free reserve (GC's own stream never triggers GC, so GC cannot recurse), and a
//! checkpoint is written when enough blocks were opened since the last one (see
//! [`Ftl::ensure_frontier`]; for the GC stream the checkpoint comes before its plane is chosen,
//! so it cannot take the block GC was to open). A new block is the free block with the lowest
//! erase count (dynamic wear leveling), erased first if it is dirty.
//!
//! Failures spend free blocks outside this accounting (a retry's block, a retirement's copies, a
//! failed erase). When a plane has no free block left, its pages go to the same stream of another
//! plane (an open frontier there, else the plane with the most free blocks), so `Error::NoSpace`
//! means that no plane has a free block; `gc::retire_pending` then restores the reserves. GC
//! itself, which needs a block to copy into before it frees one, then takes over an open
//! host-side block as its frontier (`gc_take_host_block`).
//!
//! A block a mount resumed has each page checked erased before it is programmed (garbage there
//! closes the block); the check runs where the page buffer is free, so that the block opened
//! instead goes through GC, and reads a page up to three times, so that a raw bit error does not
//! close a good block (see docs/design.md, "GC's block to copy into").
//!
//! [`Ftl::append`] programs one page with its metadata and codec bytes. A program failure voids
//! the page, sends the block to retirement, and retries on a fresh block with a new sequence
//! number, so a failed program never loses the data being written nor anything already mapped.
//! A void programs the page's void mark and reads it back (see `meta.rs` for the mark and
//! `recovery.rs` for what mount does with voids a cut or a failure left incomplete).

use nand_hal::{BlockId, ErrorKind, NandFlash, PageId};

use crate::blocks::{BlockState, Pick};
use crate::emigration::GcLoop;
use crate::map::MappingTable;
use crate::meta::{void_zeros, PageKind, PageMeta, META_LEN, VOID_PROGRAM, VOID_STRONG_ZEROS};
use crate::policy::{PageCodec, PolicySet, Stream};
use crate::{Error, Ftl};

/// Streams (open blocks) per plane.
pub const STREAMS: usize = 3;
// `Ftl::resumed` holds one bit per frontier.
const _: () = assert!(crate::config::MAX_TOTAL_PLANES * STREAMS <= 64);
const NIL: u32 = u32::MAX;
/// Programs tried for one page before giving up.
pub(crate) const MAX_PROGRAM_ATTEMPTS: u32 = 8;
/// Programs of a void mark tried before giving up (each counts against the page's NOP).
const VOID_ATTEMPTS: u32 = 2;
/// Reads of a resumed frontier's next page before it counts as programmed (see
/// [`Ftl::resumed_page_erased`]): at the raw bit error rate of bit_errors' tests (2e-5 over the
/// 224 bits), an erased area shows a zero bit in one read of 220 and in three in 1e7.
const RESUME_READS: u32 = 3;

/// The open block of one stream in one plane.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Frontier {
    /// The open block, or `u32::MAX`.
    pub block: u32,
    /// The next page to program in it.
    pub next_page: u32,
}

impl Frontier {
    /// No open block.
    pub const NONE: Frontier = Frontier { block: NIL, next_page: 0 };
}

/// Pages a failed program left that may read as valid and could not be voided yet, and whether
/// a checkpoint must come before the next program anyway (see [`Ftl::settle_torn`]).
/// Hand-written (an array and a length) rather than a `heapless::Vec`: it is `Copy` (taken
/// whole by `settle_torn` and restored on error) and a full list turns into `must_checkpoint`.
#[derive(Copy, Clone, Debug)]
pub(crate) struct TornPages {
    pages: [u32; MAX_PROGRAM_ATTEMPTS as usize],
    len: usize,
    /// Set when a page could not be recorded (list full) or a caller asked for a checkpoint.
    pub(crate) must_checkpoint: bool,
}

impl TornPages {
    pub(crate) const NONE: TornPages =
        TornPages { pages: [0; MAX_PROGRAM_ATTEMPTS as usize], len: 0, must_checkpoint: false };

    #[inline]
    fn is_clear(&self) -> bool {
        self.len == 0 && !self.must_checkpoint
    }

    pub(crate) fn push(&mut self, page: PageId) {
        match self.pages.get_mut(self.len) {
            Some(slot) => {
                *slot = page.0;
                self.len += 1;
            }
            None => self.must_checkpoint = true,
        }
    }

    /// Forgets the pages of a block that was just erased: they are gone, and voiding their
    /// addresses later would damage whatever the block holds by then.
    pub(crate) fn forget_block(&mut self, geo: &nand_hal::Geometry, block: BlockId) {
        let mut kept = 0;
        for i in 0..self.len {
            let p = self.pages[i];
            if geo.block_of(PageId(p)) != block {
                self.pages[kept] = p;
                kept += 1;
            }
        }
        self.len = kept;
    }

    pub(crate) fn append(&mut self, other: &TornPages) {
        for &p in &other.pages[..other.len] {
            self.push(PageId(p));
        }
        self.must_checkpoint |= other.must_checkpoint;
    }
}

/// Where the data of a page being appended is.
pub(crate) enum Source<'a> {
    /// In the caller's slice; the codec bytes are computed.
    Host(&'a [u8]),
    /// In the page buffer's data area; `encode` says whether to compute the codec bytes (false:
    /// they are already in the buffer's spare area, copied raw from another page).
    Buffer { encode: bool },
    /// A map page in the map's I/O buffer (data area; the codec bytes are computed into its
    /// spare area, the FTL's page buffer is untouched).
    Map,
}

impl<N: NandFlash, P: PolicySet, M: MappingTable> Ftl<'_, N, P, M> {
    pub(crate) fn frontier_index(plane: u32, stream: Stream) -> usize {
        plane as usize * STREAMS + stream as usize
    }

    /// Appends a host data page on `stream` of `plane`.
    pub(crate) fn append_host(
        &mut self,
        plane: u32,
        stream: Stream,
        lpn: u32,
        data: &[u8],
    ) -> Result<PageId, Error> {
        self.note_host_stream(stream);
        self.append(plane, stream, PageKind::Data, lpn, 0, Source::Host(data))
    }

    /// Programs one page on the frontier of (`plane`, `stream`).
    pub(crate) fn append(
        &mut self,
        plane: u32,
        stream: Stream,
        kind: PageKind,
        tag: u32,
        aux: u32,
        src: Source<'_>,
    ) -> Result<PageId, Error> {
        let d = self.geo.data_bytes as usize;
        let spare_len = META_LEN + self.codec_len;
        let mut encoded = false;
        // Host data pages and GC's copies take the format FlexECC asks for; every other page
        // (a technique's own copies and write-backs, journals, checkpoints) corrects.
        let format = self.flex_page_format(kind, matches!(src, Source::Host(_)));
        // Failed pages of this append whose void did not complete: superseded if a retry lands,
        // left for `settle_torn` if the append gives up.
        let mut unvoided = TornPages::NONE;
        let mut plane = plane;
        for attempt in 0..MAX_PROGRAM_ATTEMPTS {
            if attempt > 0 {
                plane = self.spill_plane(plane, stream);
            }
            let page = self.take_page(plane, stream)?;
            let block = self.geo.block_of(page);
            let meta =
                PageMeta { kind, tag, seq: self.seq, erase_count: self.blocks.get(block).erase_count(), aux };
            self.seq += 1;
            // A map page is assembled in the map's own buffer, everything else in the page buffer.
            let buf: &mut [u8] = match src {
                Source::Map => self.map.io_buf(),
                _ => self.buf,
            };
            if buf.len() < d + spare_len {
                return Err(Error::Memory);
            }
            meta.encode(&mut buf[d..d + META_LEN]);
            if !encoded {
                let (data_area, spare_area) = buf.split_at_mut(d);
                let codec_out = &mut spare_area[META_LEN..spare_len];
                match src {
                    Source::Host(data) => self.policies.codec().encode_as(data, codec_out, format),
                    Source::Buffer { encode: true } | Source::Map => {
                        self.policies.codec().encode_as(data_area, codec_out, format)
                    }
                    Source::Buffer { encode: false } => {}
                }
                encoded = true;
            }
            let data: &[u8] = match src {
                Source::Host(data) => data,
                Source::Buffer { .. } | Source::Map => &buf[..d],
            };
            self.counters.nand_programs += 1;
            self.dirty = true;
            match self.nand.program_page(page, data, &buf[d..d + spare_len]) {
                Ok(()) => return Ok(page),
                Err(e) => self.program_failed(page, e, &mut unvoided)?,
            }
        }
        self.torn.append(&unvoided);
        Err(Error::Device(ErrorKind::ProgramFailed))
    }

    /// After the program of `page` failed with `e` (in [`Self::append`], or GC's copy-back):
    /// Ok if the page may be retried elsewhere (status FAIL: the block goes to retirement; NOP
    /// exceeded: the block is closed), else the error, with `unvoided` and the page (if it
    /// could not be voided) left for [`Self::settle_torn`].
    pub(crate) fn program_failed(
        &mut self,
        page: PageId,
        e: N::Error,
        unvoided: &mut TornPages,
    ) -> Result<(), Error> {
        let block = self.geo.block_of(page);
        match nand_hal::Error::kind(&e) {
            ErrorKind::ProgramFailed => {
                self.counters.program_failures += 1;
                // A failed page that stays unvoided is superseded by the retry (a larger
                // sequence number for the same tag, in a block opened later).
                if !self.void_page(page) {
                    unvoided.push(page);
                }
                self.start_retiring(block);
                Ok(())
            }
            ErrorKind::NopExceeded => {
                // The page reads erased but was programmed before (a torn program whose voids
                // cuts interrupted until its NOP ran out); the chip changed nothing. Replay
                // stops at a page that reads erased, so nothing more goes into this block.
                self.close_block(block);
                Ok(())
            }
            _ => {
                // Power loss, a timeout, ...: the page may hold anything, valid metadata of
                // this write included. If it cannot be voided now, the next program voids it
                // first or writes a checkpoint (`settle_torn`).
                if !self.void_page(page) {
                    unvoided.push(page);
                }
                self.torn.append(unvoided);
                self.close_block(block);
                Err(e.into())
            }
        }
    }

    /// Makes the pages a failed program left unvoided harmless before anything else is programmed:
    /// voids them, or, if a void does not complete (or `checkpoint_soon` asked for it), writes a
    /// checkpoint, after which no mount replays them. Called at the top of
    /// [`Self::ensure_frontier`] and [`Self::ensure_gc_frontier`], which every program path
    /// passes before it programs (the page buffer is free there).
    ///
    /// Why: mount checks only the newest replayed page for a torn program (`recovery.rs`, step
    /// 4). A page torn with its metadata whole, followed by newer pages, would replay as the
    /// newest version of its logical page (audit F3: a cut, power restored, more writes and a
    /// flush on the same instance, then a remount). With this rule, a torn page is either still
    /// the newest program at the next mount, voided, or older than the checkpoint.
    #[inline]
    pub(crate) fn settle_torn(&mut self) -> Result<(), Error> {
        if self.torn.is_clear() {
            return Ok(());
        }
        self.settle_torn_now()
    }

    /// Whether no failed program left a page to settle.
    #[inline]
    pub(crate) fn torn_is_clear(&self) -> bool {
        self.torn.is_clear()
    }

    /// Records pages a failed program left unvoided (settled before the next program).
    pub(crate) fn torn_append(&mut self, pages: &TornPages) {
        self.torn.append(pages);
    }

    /// The rare path of [`Self::settle_torn`]: only after a failed program.
    #[cold]
    #[inline(never)]
    fn settle_torn_now(&mut self) -> Result<(), Error> {
        // Taken first: the checkpoint below writes map pages back (a flash-resident map), and
        // each write-back settles torn pages before it programs.
        let torn = core::mem::replace(&mut self.torn, TornPages::NONE);
        let mut voided = !torn.must_checkpoint;
        for i in 0..torn.len {
            voided &= self.void_page(PageId(torn.pages[i]));
        }
        if !voided {
            if let Err(e) = self.write_checkpoint() {
                let mut again = torn;
                again.append(&self.torn);
                self.torn = again;
                return Err(e);
            }
        }
        Ok(())
    }

    pub(crate) fn close_block(&mut self, block: BlockId) {
        for f in self.frontiers.iter_mut() {
            if f.block == block.0 {
                *f = Frontier::NONE;
            }
        }
        if self.blocks.state(block) == BlockState::Open {
            self.blocks.set_state(block, BlockState::Used);
        }
    }

    /// Voids `page` (a failed or torn program) so that no mount takes it: programs its void mark
    /// and reads the mark back, twice at most. True once the mark reads as fully voided (at least
    /// `VOID_STRONG_ZEROS` of its bits at 0, so raw bit errors cannot make it read as clear);
    /// false if the chip refused or failed the program (NOP, order, power) or the mark stayed weak.
    /// Leaves the page buffer alone. See `recovery.rs` for what a false costs.
    pub(crate) fn void_page(&mut self, page: PageId) -> bool {
        let mut back = [0u8; META_LEN];
        for _ in 0..VOID_ATTEMPTS {
            self.counters.nand_programs += 1;
            let programmed = self.nand.program_page(page, &[], &VOID_PROGRAM);
            self.counters.nand_reads += 1;
            if self.nand.read_spare(page, &mut back).is_err() {
                return false;
            }
            if void_zeros(&back) >= VOID_STRONG_ZEROS {
                return true;
            }
            match programmed {
                // Read back weak (raw bit errors in this read) or a failed program that cleared
                // only some bits: one more try.
                Ok(()) => {}
                Err(e) if nand_hal::Error::kind(&e) == ErrorKind::ProgramFailed => {}
                Err(_) => return false,
            }
        }
        false
    }

    /// After a failed program whose page could not be voided and that no retry supersedes (it may
    /// read as valid metadata with torn data): a checkpoint comes before the next program (see
    /// [`Self::settle_torn`]), after which no mount replays that page.
    #[cfg(feature = "wom")]
    pub(crate) fn checkpoint_soon(&mut self) {
        self.torn.must_checkpoint = true;
    }

    /// Sends a block whose program failed to retirement: GC moves its data, then marks it bad.
    pub(crate) fn start_retiring(&mut self, block: BlockId) {
        for f in self.frontiers.iter_mut() {
            if f.block == block.0 {
                *f = Frontier::NONE;
            }
        }
        if !matches!(self.blocks.state(block), BlockState::Bad | BlockState::Retiring) {
            self.blocks.set_state(block, BlockState::Retiring);
        }
    }

    /// The next page of a frontier, opening a block if it has none. When `plane` cannot supply a
    /// block (no free block left, or erase failures retired the last ones), the page comes from
    /// the same stream in another plane (see [`Self::spill_target`]).
    ///
    /// In a block mount resumed, each page's metadata area is checked erased first (see
    /// [`Self::resumed_page_erased`]; once only where [`Self::ensure_frontier`] checked it): a
    /// page there that is not erased (a damaged or foreign image; cuts cannot leave one after an
    /// erased page) closes the block instead of being programmed over, which would garble what is
    /// written (the chip ANDs the new bits into the old) and lose a write acknowledged as flushed.
    pub(crate) fn take_page(&mut self, plane: u32, stream: Stream) -> Result<PageId, Error> {
        let (plane, i) = loop {
            let plane = self.open_somewhere(plane, stream)?;
            let i = Self::frontier_index(plane, stream);
            if self.resumed_next_page_ok(i, true)? {
                break (plane, i);
            }
        };
        let _ = plane;
        let f = &mut self.frontiers[i];
        let block = BlockId(f.block);
        let page = self.geo.page(block, f.next_page);
        f.next_page += 1;
        if f.next_page == self.geo.pages_per_block {
            *f = Frontier::NONE;
            self.blocks.set_state(block, BlockState::Used);
        }
        Ok(page)
    }

    /// Whether the metadata area of `page` (the next page of a resumed frontier) is erased: the
    /// bitwise OR of up to [`RESUME_READS`] reads of it is all 0xFF. A raw bit error shows in one
    /// read and not the next, a programmed bit stays 0 in every read: taking one read's zero bit
    /// for a programmed page closed a good block after most mounts at the chip's raw bit error
    /// rate, and the block opened for the page instead took the plane's last free block without
    /// GC, the one GC needed to copy into (issue #17: `NoSpace` in bit_errors'
    /// `random_cuts_with_bch_and_rber`).
    pub(crate) fn resumed_page_erased(&mut self, page: PageId) -> Result<bool, Error> {
        let mut seen = [0u8; META_LEN];
        for _ in 0..RESUME_READS {
            let mut meta = [0u8; META_LEN];
            self.counters.nand_reads += 1;
            self.nand.read_spare(page, &mut meta)?;
            for (s, m) in seen.iter_mut().zip(meta) {
                *s |= m;
            }
            if seen.iter().all(|&b| b == 0xFF) {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Where the page buffer is free, before a page of frontier `i` is taken: if a mount resumed
    /// it, checks its next page erased now (and `take_page` does not read it again), or closes
    /// the block, so that the block opened instead goes through [`Self::ensure_frontier`]'s GC
    /// (a host stream's block only once the plane has its free reserve) rather than through
    /// `take_page`, which cannot run GC.
    fn check_resumed(&mut self, i: usize) -> Result<(), Error> {
        self.resumed_next_page_ok(i, false).map(|_| ())
    }

    /// Whether the next page of frontier `i` may be programmed: true unless a mount resumed its
    /// block and that page is not erased, in which case the block is closed (false). A check
    /// passed where the page buffer was free is recorded (`resume_checked`) so that `take_page`,
    /// which programs the page (`take`), does not read it again; `take` consumes the record.
    fn resumed_next_page_ok(&mut self, i: usize, take: bool) -> Result<bool, Error> {
        let f = self.frontiers[i];
        if self.resumed & (1 << i) == 0 || f.block == NIL {
            return Ok(true);
        }
        let page = self.geo.page(BlockId(f.block), f.next_page);
        let recorded =
            if take { core::mem::replace(&mut self.resume_checked, NIL) } else { self.resume_checked };
        if recorded == page.0 || self.resumed_page_erased(page)? {
            if !take {
                self.resume_checked = page.0;
            }
            return Ok(true);
        }
        self.resumed &= !(1 << i);
        self.close_block(BlockId(f.block));
        Ok(false)
    }

    /// GC's last resort when no plane has a GC block or a free block to open (host-side blocks
    /// took the last ones: a program failure's retry, a block closed at a bad page after a
    /// mount): the open host-side block with the most pages left (in `plane` if it has one)
    /// becomes the GC frontier of its plane. A page's stream is not on flash (replay follows
    /// sequence numbers), so nothing else changes; the host stream opens its next block through
    /// [`Self::ensure_frontier`], after GC restored the plane's reserve. Returns the plane, or
    /// `None` if no host-side block is open either.
    fn gc_take_host_block(&mut self, plane: u32) -> Option<u32> {
        let ppb = self.geo.pages_per_block;
        let (p, s) = (0..self.geo.total_planes())
            .flat_map(|p| [Stream::Host, Stream::Cold].map(|s| (p, s)))
            .filter(|&(p, s)| self.frontiers[Self::frontier_index(p, s)].block != NIL)
            .max_by_key(|&(p, s)| {
                let f = self.frontiers[Self::frontier_index(p, s)];
                (p == plane, ppb - f.next_page, core::cmp::Reverse(p))
            })?;
        let (from, to) = (Self::frontier_index(p, s), Self::frontier_index(p, Stream::Gc));
        self.frontiers[to] = core::mem::replace(&mut self.frontiers[from], Frontier::NONE);
        let resumed = self.resumed & (1 << from) != 0;
        self.resumed &= !(1 << from);
        if resumed {
            self.resumed |= 1 << to;
        }
        self.counters.gc_host_blocks_taken += 1;
        Some(p)
    }

    /// Makes sure the frontier of (`plane`, `stream`) has an open block, or, if `plane` cannot
    /// supply one, the frontier of `stream` in the plane [`Self::spill_target`] names; returns the
    /// plane whose frontier is open. `Error::NoSpace` only when no plane has an open frontier of
    /// `stream` or a free block. (No GC, no checkpoint: safe with data in the buffer.)
    fn open_somewhere(&mut self, plane: u32, stream: Stream) -> Result<u32, Error> {
        let mut plane = plane;
        // Each `NoSpace` leaves `plane` without a free block and nothing here frees one, so the
        // loop ends after at most one round per plane.
        while self.frontiers[Self::frontier_index(plane, stream)].block == NIL {
            match self.open_block(plane, stream) {
                Ok(()) => {}
                Err(Error::NoSpace) => match self.spill_target(plane, stream) {
                    Some(p) => plane = p,
                    None if stream == Stream::Gc => {
                        return self.gc_take_host_block(plane).ok_or(Error::NoSpace)
                    }
                    None => return Err(Error::NoSpace),
                },
                Err(e) => return Err(e),
            }
        }
        Ok(plane)
    }

    /// Another plane that can take a page of `stream` when `plane` cannot: one whose frontier of
    /// `stream` is open, else the one with the most blocks the allocator may open, if it has any.
    fn spill_target(&self, plane: u32, stream: Stream) -> Option<u32> {
        let open = |p: u32| self.frontiers[Self::frontier_index(p, stream)].block != NIL;
        let others = (0..self.geo.total_planes()).filter(|&p| p != plane);
        others.clone().find(|&p| open(p)).or_else(|| {
            others
                .map(|p| (p, self.allocatable(p)))
                .filter(|&(_, n)| n > 0)
                .max_by_key(|&(_, n)| n)
                .map(|(p, _)| p)
        })
    }

    /// Where a page of `stream` meant for `plane` goes: `plane` if its frontier is open or it has
    /// a free block, else [`Self::spill_target`] (if any). A program failure retires the
    /// frontier's block and the plane's free reserve may already be spent: `ensure_frontier` only
    /// tops it up before opening a host block, and no GC can run with data in the page buffer.
    fn spill_plane(&self, plane: u32, stream: Stream) -> u32 {
        let open = self.frontiers[Self::frontier_index(plane, stream)].block != NIL;
        if open || self.allocatable(plane) > 0 {
            return plane;
        }
        self.spill_target(plane, stream).unwrap_or(plane)
    }

    /// The plane whose GC stream takes data collected in `plane`: another plane while `plane`
    /// is emigrating (see `emigration.rs`), else `plane` or where it spills (see
    /// [`Self::spill_plane`]).
    pub(crate) fn gc_plane(&self, plane: u32) -> u32 {
        if self.emigrating(plane) {
            if let Some(q) = self.emigration_target(plane) {
                return q;
            }
        }
        self.spill_plane(plane, Stream::Gc)
    }

    /// Makes sure a GC frontier can take data collected in `plane` and returns its plane. Where a
    /// block must be opened, a due checkpoint is written first and the plane chosen after it: the
    /// checkpoint takes blocks from the plane with the most free ones, which may be the last free
    /// block of the plane chosen before. Called only where the page buffer holds nothing.
    pub(crate) fn ensure_gc_frontier(&mut self, plane: u32) -> Result<u32, Error> {
        self.settle_torn()?;
        // Blocks are opened from the mount pool's flagged ones (see `pool.rs`): keep some, also
        // for the openings with data in the buffer (map write-backs, retries), and before the
        // plane is chosen (a plane whose free blocks are not flagged yet is not full).
        self.pool_top_up()?;
        let target = self.gc_plane(plane);
        self.check_resumed(Self::frontier_index(target, Stream::Gc))?;
        if self.frontiers[Self::frontier_index(target, Stream::Gc)].block != NIL {
            return Ok(target);
        }
        // The due checkpoint waits while it would take the blocks GC needs to free any (it
        // comes with the next block opened once GC has made room).
        if self.blocks.total_free() > self.checkpoint_need() {
            self.checkpoint_if_due()?;
        }
        let target = self.gc_plane(plane);
        self.ensure_frontier(target, Stream::Gc)
    }

    /// Makes sure the frontier of (`plane`, `stream`) has an open block (or, when `plane` cannot
    /// supply one, the same stream's frontier in another plane: see [`Self::open_somewhere`]) and
    /// returns the plane whose frontier is open. Apart from the end-of-operation maintenance
    /// (retirement, wear leveling), this is the only place that runs GC (for host streams, when
    /// the plane is below its free reserve) and writes periodic checkpoints; both use the page
    /// buffer, so it is called only where the buffer holds nothing: before a host page is
    /// appended, before GC reads a page to move it, before a journal page is assembled.
    pub(crate) fn ensure_frontier(&mut self, plane: u32, stream: Stream) -> Result<u32, Error> {
        self.settle_torn()?;
        let i = Self::frontier_index(plane, stream);
        self.check_resumed(i)?;
        if self.frontiers[i].block != NIL {
            // Blocks opened with data in the buffer come from the pool's flagged ones: keep some.
            self.pool_top_up()?;
            return Ok(plane);
        }
        if stream != Stream::Gc {
            self.ensure_free(plane)?;
        }
        // A due checkpoint waits while GC opens a block with fewer free blocks than it takes:
        // GC is what brings them back, and the checkpoint falls due again at the next opening.
        // (Written here, it failed with `NoSpace` where repeated cuts during mounts had left a
        // 32-block device one free block: tests/tests/copy_back.rs, seed 22.)
        if stream != Stream::Gc || self.blocks.total_free() >= self.checkpoint_need() {
            self.checkpoint_if_due()?;
        }
        // The block about to open must be in the mount pool (see `pool.rs`).
        self.pool_top_up()?;
        self.open_somewhere(plane, stream)
    }

    /// Opens a fresh block on a frontier (no GC, no checkpoint: safe with data in the buffer).
    fn open_block(&mut self, plane: u32, stream: Stream) -> Result<(), Error> {
        // Dynamic wear leveling (see `wear.rs`): data GC moves has outlived a block once and
        // goes to a worn free block ([`Pick::Worn`]); everything else to the least worn.
        let pick = if stream == Stream::Gc { Pick::Worn } else { Pick::Coolest };
        let b = self.alloc_block_for(plane, pick)?;
        self.blocks.set_state(b, BlockState::Open);
        let i = Self::frontier_index(plane, stream);
        self.frontiers[i] = Frontier { block: b.0, next_page: 0 };
        self.resumed &= !(1 << i);
        self.ckpt.blocks_since += 1;
        Ok(())
    }

    /// Takes the coolest free block of `plane` the allocator may open (one in the mount pool
    /// while it is bounded: see `pool.rs`), erased.
    pub(crate) fn alloc_block(&mut self, plane: u32) -> Result<BlockId, Error> {
        self.alloc_block_for(plane, Pick::Coolest)
    }

    /// As [`Self::alloc_block`], taking the free block `pick` says.
    pub(crate) fn alloc_block_for(&mut self, plane: u32, pick: Pick) -> Result<BlockId, Error> {
        self.blocks.dirty_wear = self.multi_io_on();
        loop {
            let mask = self.pool_mask();
            let b = match pick {
                Pick::Coolest => self.blocks.coolest_free_with(plane, mask, mask),
                Pick::Worn => self.blocks.worn_free_with(plane, mask, mask),
            }
            .ok_or(Error::NoSpace)?;
            if self.blocks.state(b) == BlockState::Dirty {
                self.erase_picked(b, pick, mask)?;
                if self.blocks.state(b) == BlockState::Bad {
                    continue;
                }
            }
            return Ok(b);
        }
    }

    /// Runs GC in `plane` until it has its free reserve (moving its pages to another plane if
    /// collecting it into itself gains nothing: see `emigration.rs`).
    pub(crate) fn ensure_free(&mut self, plane: u32) -> Result<(), Error> {
        let threshold = self.free_threshold();
        if self.collect_until(plane, |f| f.blocks.free_count(plane) >= threshold)? == GcLoop::GaveUp {
            return Err(Error::NoSpace);
        }
        self.reuse_top_up(plane)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use std::vec;
    use std::vec::Vec;

    use nand_emu::{Emulator, EmulatorConfig};
    use nand_hal::{BlockId, Geometry};

    use super::NIL;
    use crate::blocks::{BlockInfo, BlockState};
    use crate::policy::{DefaultPolicies, Stream};
    use crate::{Config, FlatMap, Ftl, Memory, RamLayout};

    /// One plane of 32 blocks of 8 pages.
    const GEO: Geometry = Geometry {
        data_bytes: 512,
        spare_bytes: 32,
        pages_per_block: 8,
        blocks_per_plane: 32,
        planes_per_lun: 1,
        luns: 1,
        ..Geometry::MT29F4G08
    };

    fn page(lpn: u32, version: u32) -> Vec<u8> {
        let mut p = vec![(version as u8) ^ 0x5A; GEO.data_bytes as usize];
        p[..4].copy_from_slice(&lpn.to_le_bytes());
        p[4..8].copy_from_slice(&version.to_le_bytes());
        p
    }

    /// Regression (issue #17): when host-side openings outside GC (a program failure's retry, a
    /// resumed block closed at a page that is not erased) have taken a plane's last free block
    /// and GC has no block open, GC still has somewhere to copy: the open host block. Without it
    /// the next write's GC failed with `NoSpace` although most pages of the victims were invalid.
    #[test]
    fn gc_copies_into_the_open_host_block_when_no_block_is_free() {
        let cfg = Config::for_utilization(&GEO, 500);
        let lay = RamLayout::new(&GEO, &cfg);
        let mut entries = vec![0u32; lay.map_words];
        let mut valid = vec![0u32; lay.valid_words];
        let mut blocks = vec![BlockInfo::EMPTY; lay.blocks];
        let mut heads = vec![0u32; lay.list_heads];
        let mut buf = vec![0u8; lay.page_buf];
        let mem =
            Memory { valid: &mut valid, blocks: &mut blocks, list_heads: &mut heads, page_buf: &mut buf };
        let mut emu = Emulator::new(EmulatorConfig::new(GEO)).unwrap();
        let mut ftl =
            Ftl::format(&mut emu, DefaultPolicies::default(), FlatMap::new(&mut entries), mem, cfg).unwrap();
        let n = cfg.logical_pages;
        let mut version = vec![0u32; n as usize];
        let mut write = |ftl: &mut Ftl<'_, _, _, _>, lpn: u32| {
            version[lpn as usize] += 1;
            ftl.write(lpn, &page(lpn, version[lpn as usize]))
        };
        // Every logical page, then the even ones again: blocks half valid.
        for lpn in (0..n).chain((0..n).step_by(2)) {
            write(&mut ftl, lpn).unwrap();
        }
        // The state those openings leave: the GC block closed, a host block open with room, and
        // no free block (the others retired here, as erase failures would).
        let (gc, host) = (
            Ftl::<&mut Emulator>::frontier_index(0, Stream::Gc),
            Ftl::<&mut Emulator>::frontier_index(0, Stream::Host),
        );
        if ftl.frontiers[gc].block != NIL {
            ftl.close_block(BlockId(ftl.frontiers[gc].block));
        }
        if ftl.frontiers[host].block == NIL || ftl.frontiers[host].next_page > GEO.pages_per_block / 2 {
            if ftl.frontiers[host].block != NIL {
                ftl.close_block(BlockId(ftl.frontiers[host].block));
            }
            ftl.open_somewhere(0, Stream::Host).unwrap();
        }
        for b in 0..GEO.total_blocks() {
            if matches!(ftl.blocks.state(BlockId(b)), BlockState::Free | BlockState::Dirty) {
                ftl.blocks.set_state(BlockId(b), BlockState::Bad);
            }
        }
        assert_eq!(ftl.blocks.free_count(0), 0);
        // Host writes: GC runs first (no free block), into the host block.
        for lpn in (1..n).step_by(2).take(GEO.pages_per_block as usize) {
            write(&mut ftl, lpn).unwrap_or_else(|e| panic!("write of {lpn}: {e:?}"));
        }
        assert_eq!(ftl.counters.gc_host_blocks_taken, 1);
        assert!(ftl.blocks.free_count(0) > 0);
        let mut out = vec![0u8; GEO.data_bytes as usize];
        for lpn in 0..n {
            ftl.read(lpn, &mut out).unwrap();
            assert!(out == page(lpn, version[lpn as usize]), "lpn {lpn} reads other data");
        }
    }
}
