//! FlexECC's side of the FTL (feature `flex-ecc`): write intents, reads that report the page
//! format, flush-reads, GC conversion of flush-read pages, serving corrupt clean pages from a
//! backing store, and the per-page operations a scrubber needs.
//!
//! A cache manager above the device knows whether the data it writes has a copy in the next tier:
//! a **dirty** write (new data, the only copy) is stored in the codec's correcting format (BCH),
//! a **clean** write (data fetched from the backing store) in its detecting format (CRC only). A
//! **flush-read** (the cache manager reads dirty data to write it back) marks the page "may drop
//! to detecting"; GC then rewrites a marked page in the detecting format instead of copying it as
//! BCH. The format is recorded by the codec in the page's spare bytes
//! ([`crate::policy::PageCodec::format_of`]), so mount and GC always decode a page right.
//!
//! RAM: [`crate::Extensions::flex`] lends a slice of [`flex_mark_words`] words: two bits per logical page,
//! *detecting* (the current copy is CRC-only, as far as RAM knows: a hint for the scrubber) and
//! *drop* (flush-read since its last write). They are lost on a power cut or unmount. Losing a
//! drop mark only means the page stays BCH (safe: more protection than needed); losing the
//! detecting bit only means the scrubber does not visit that page until a read or GC move sees its
//! format again. Every write clears the drop mark of the pages it writes (the new data is dirty
//! unless written clean), so a GC move never drops the protection of data written after its
//! flush-read.
//!
//! Without [`crate::Extensions::flex`] every data page is written in the correcting format whatever the
//! intent (the all-BCH device), and the default codecs, which have one format, ignore it anyway:
//! the baseline behaviour is unchanged.
//!
//! Guarantees: a page is written detecting only by a clean write or by GC after a flush-read with
//! no write since; a detecting page that fails its check is never returned as data (the read
//! reports [`PageRead::Corrupt`], and [`Ftl::read_or_fetch`] serves it from the backing store and
//! rewrites it clean); a correcting page that cannot be corrected is an
//! [`Error::Uncorrectable`] as before.

use nand_hal::{NandFlash, PageId};

use crate::gc::{MoveNote, MovePlan};
use crate::map::MappingTable;
use crate::meta::{PageKind, PageMeta, SpareState, META_LEN};
use crate::policy::{PageCodec, PageFormat, PolicySet};
use crate::{Error, Ftl};

/// Why the cache manager writes a page.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Intent {
    /// New data with no copy in the backing store: correcting format (BCH).
    Dirty,
    /// Data with a consistent copy in the backing store: detecting format (CRC).
    Clean,
}

impl Intent {
    /// The page format this intent asks for.
    pub fn format(self) -> PageFormat {
        match self {
            Intent::Dirty => PageFormat::Correcting,
            Intent::Clean => PageFormat::Detecting,
        }
    }
}

/// What reading one logical page found.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum PageRead {
    /// Never written or trimmed: the data reads as zeros.
    Unmapped,
    /// Good data, in `format` (`None` for a codec with one format), after correcting
    /// `corrected` bits.
    Good {
        /// The format the page was stored in.
        format: Option<PageFormat>,
        /// Bits the codec corrected.
        corrected: u32,
    },
    /// The data failed its check (or its metadata did); the buffer holds nothing usable.
    Corrupt {
        /// The format the page was stored in, if its spare says.
        format: Option<PageFormat>,
    },
}

/// Where [`Ftl::read_or_fetch`] got the data from.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Served {
    /// From flash (or zeros for an unmapped page).
    Flash(PageRead),
    /// From the backing store, after the flash copy (detecting format) failed its check; the page
    /// has been rewritten clean.
    Backing,
}

/// The backing store could not deliver a page.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct BackingError;

/// The next storage tier, which holds a copy of every clean page (a disk behind an SSD cache).
pub trait BackingStore {
    /// Reads the copy of logical page `lpn` into `out` (one page).
    fn fetch(&mut self, lpn: u32, out: &mut [u8]) -> Result<(), BackingError>;
}

/// FlexECC settings (default: refreshing off).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct FlexConfig {
    /// A correcting page read with at least this many corrected bits is refreshed (moved and
    /// re-encoded) before it becomes uncorrectable; 0 turns refreshing off.
    pub refresh_threshold: u32,
}

/// What FlexECC did (all zero while it is not enabled, apart from the read counts).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct FlexCounters {
    /// Pages read (host, flush and scrub reads) that were in the correcting format.
    pub correcting_reads: u64,
    /// Pages read that were in the detecting format.
    pub detecting_reads: u64,
    /// Detecting pages that failed their check.
    pub detecting_corrupt: u64,
    /// Correcting pages that could not be corrected.
    pub correcting_uncorrectable: u64,
    /// Bits corrected in correcting pages.
    pub bits_corrected: u64,
    /// Pages served from the backing store.
    pub served_from_backing: u64,
    /// Pages written clean (detecting).
    pub clean_writes: u64,
    /// Pages written dirty (correcting).
    pub dirty_writes: u64,
    /// Flush-reads that marked a correcting page.
    pub marked: u64,
    /// Marked pages GC rewrote in the detecting format (the paper's BCH2CRC).
    pub converted: u64,
    /// Detecting pages moved by GC (the paper's CRC MOVED).
    pub detecting_moved: u64,
    /// Correcting pages moved by GC.
    pub correcting_moved: u64,
    /// Correcting pages refreshed because of their corrected-bit count.
    pub refreshed: u64,
}

/// FlexECC's state inside the FTL.
pub(crate) struct FlexState<'m> {
    /// Two bitmaps of `words` words each: detecting, then drop.
    marks: &'m mut [u32],
    words: usize,
    enabled: bool,
    cfg: FlexConfig,
    /// The format the next data page is written in.
    pub(crate) write_format: PageFormat,
    /// GC is copying a data page in the format `flex_before_move` chose.
    pub(crate) moving: bool,
    pub(crate) counters: FlexCounters,
}

impl Default for FlexState<'_> {
    fn default() -> Self {
        Self::new()
    }
}

impl FlexState<'_> {
    pub(crate) fn new() -> Self {
        FlexState {
            marks: &mut [],
            words: 0,
            enabled: false,
            cfg: FlexConfig::default(),
            write_format: PageFormat::Correcting,
            moving: false,
            counters: FlexCounters::default(),
        }
    }

    fn bit(&self, map: usize, lpn: u32) -> bool {
        let i = map * self.words + lpn as usize / 32;
        self.marks.get(i).is_some_and(|w| w & (1 << (lpn % 32)) != 0)
    }

    fn set(&mut self, map: usize, lpn: u32, on: bool) {
        let i = map * self.words + lpn as usize / 32;
        if let Some(w) = self.marks.get_mut(i) {
            if on {
                *w |= 1 << (lpn % 32);
            } else {
                *w &= !(1 << (lpn % 32));
            }
        }
    }
}

const DETECTING: usize = 0;
const DROP: usize = 1;

impl crate::ext::ExtState<'_> {
    /// FlexECC's plan for GC's copy of the data page of `lpn` (`stored`: the format its codec
    /// bytes name; `decoded_ok`: its data decoded; `encode`: the codec corrected it). The copy
    /// keeps the stored format (correcting if the tag names none), except that a correcting page
    /// that decoded and carries a flush-read mark drops to detecting (re-encoded). Reads only:
    /// [`Ftl::flex_begin_move`] records it once the copy is issued, so the plain move and a
    /// copy-back's check (which runs while the device is busy) make the same decision.
    pub(crate) fn flex_move_plan(
        &self,
        lpn: u32,
        stored: Option<PageFormat>,
        decoded_ok: bool,
        encode: bool,
    ) -> MovePlan {
        let flex = &self.flex;
        let format = stored.unwrap_or(PageFormat::Correcting);
        match stored {
            Some(PageFormat::Correcting) if decoded_ok && flex.enabled && flex.bit(DROP, lpn) => {
                MovePlan { format: PageFormat::Detecting, encode: true, note: MoveNote::Converted }
            }
            Some(PageFormat::Detecting) => MovePlan { format, encode, note: MoveNote::DetectingKept },
            Some(PageFormat::Correcting) => MovePlan { format, encode, note: MoveNote::CorrectingKept },
            None => MovePlan { format, encode, note: MoveNote::Nothing },
        }
    }
}

/// Words of RAM [`crate::Extensions::flex`] needs for `logical_pages`: two bits per logical page.
pub const fn flex_mark_words(logical_pages: u32) -> usize {
    2 * (logical_pages as usize).div_ceil(32)
}

impl<'m, N: NandFlash, P: PolicySet, M: MappingTable> Ftl<'m, N, P, M> {
    /// Attaches the FlexECC `ext` asks for (see [`crate::ext::Extensions::flex`]).
    pub(crate) fn attach_flex(&mut self, ext: &mut crate::ext::Extensions<'m>) -> Result<(), Error> {
        let Some((marks, cfg)) = ext.flex.take() else { return Ok(()) };
        let words = (self.cfg.logical_pages as usize).div_ceil(32);
        if marks.len() != 2 * words {
            return Err(Error::Memory);
        }
        marks.fill(0);
        self.ext.flex.marks = marks;
        self.ext.flex.words = words;
        self.ext.flex.enabled = true;
        self.ext.flex.cfg = cfg;
        Ok(())
    }

    /// Whether FlexECC is on.
    pub(crate) fn flex_on(&self) -> bool {
        self.ext.flex.enabled
    }

    /// The format a page of `kind` is written in: a host data page (`host`) in the format its
    /// write asked for, GC's copy of a data page in the one [`Ftl::flex_before_move`] chose;
    /// every other page correcting (with techniques stacked: an NV cache's write-back or a
    /// shared page's move during a clean write must not drop to the detecting format).
    pub(crate) fn flex_page_format(&self, kind: crate::meta::PageKind, host: bool) -> PageFormat {
        if kind == crate::meta::PageKind::Data && (host || self.ext.flex.moving) {
            self.ext.flex.write_format
        } else {
            PageFormat::Correcting
        }
    }

    /// Deduplication hook: whether the page being written may not share `page`'s content: its
    /// data is dirty (the write is correcting) and `page` was written detect-only, so a bit error
    /// there could be repaired from the backing store for the clean owner but not for this one.
    #[cfg_attr(not(feature = "dedup"), allow(dead_code))] // used by deduplication only
    pub(crate) fn flex_refuses_share(&mut self, page: PageId) -> Result<bool, Error> {
        if !self.flex_on() || self.ext.flex.write_format != PageFormat::Correcting {
            return Ok(false);
        }
        Ok(!self.flex_page_is_correcting(page)?)
    }

    /// Whether `page` was written in the correcting format, as its codec bytes say (one spare
    /// read; true without FlexECC or for a page outside the device).
    #[cfg_attr(not(feature = "dedup"), allow(dead_code))] // used by deduplication only
    pub(crate) fn flex_page_is_correcting(&mut self, page: PageId) -> Result<bool, Error> {
        if !self.flex_on() || !self.geo.contains_page(page) {
            return Ok(true);
        }
        let d = self.geo.data_bytes as usize;
        let spare_len = META_LEN + self.codec_len;
        self.counters.nand_reads += 1;
        self.nand.read_spare(page, &mut self.buf[d..d + spare_len])?;
        let stored = &self.buf[d + META_LEN..d + spare_len];
        Ok(self.policies.codec_ref().format_of(stored) != Some(PageFormat::Detecting))
    }

    /// After GC's copy: the write format in force before [`Ftl::flex_before_move`].
    pub(crate) fn flex_after_move(&mut self, saved: PageFormat) {
        self.ext.flex.write_format = saved;
        self.ext.flex.moving = false;
    }

    /// Whether FlexECC is on (the FTL was opened with [`crate::ext::Extensions::flex`]).
    pub fn flex_enabled(&self) -> bool {
        self.ext.flex.enabled
    }

    /// FlexECC's counters.
    pub fn flex_counters(&self) -> &FlexCounters {
        &self.ext.flex.counters
    }

    /// Zeroes FlexECC's counters.
    pub fn reset_flex_counters(&mut self) {
        self.ext.flex.counters = FlexCounters::default();
    }

    /// Whether RAM believes the current copy of `lpn` is in the detecting format (a hint: see the
    /// module documentation).
    pub fn flex_is_detecting(&self, lpn: u32) -> bool {
        self.ext.flex.bit(DETECTING, lpn)
    }

    /// Whether `lpn` carries a flush-read mark (GC will drop it to the detecting format).
    pub fn flex_is_marked(&self, lpn: u32) -> bool {
        self.ext.flex.bit(DROP, lpn)
    }

    /// Writes whole logical pages like [`Ftl::write`], in the format `intent` asks for (always
    /// correcting while FlexECC is not enabled).
    pub fn write_with(&mut self, lpn: u32, data: &[u8], intent: Intent) -> Result<(), Error> {
        let saved = self.ext.flex.write_format;
        self.ext.flex.write_format =
            if self.ext.flex.enabled { intent.format() } else { PageFormat::Correcting };
        let r = self.write(lpn, data);
        self.ext.flex.write_format = saved;
        r
    }

    /// Called by `write` before it writes `n` pages from `lpn`: the RAM bits follow the new data.
    pub(crate) fn flex_note_write(&mut self, lpn: u32, n: u32) {
        let detecting = self.ext.flex.write_format == PageFormat::Detecting;
        for l in lpn..lpn.saturating_add(n) {
            self.ext.flex.set(DROP, l, false);
            self.ext.flex.set(DETECTING, l, detecting);
        }
        if detecting {
            self.ext.flex.counters.clean_writes += n as u64;
        } else {
            self.ext.flex.counters.dirty_writes += n as u64;
        }
    }

    /// Called by GC before it moves the page of `lpn` now in the page buffer (`decoded_ok`: its
    /// data decoded; `encode`: the codec bytes must be recomputed). Sets the write format of the
    /// copy and returns (whether to encode, the write format to restore afterwards).
    pub(crate) fn flex_before_move(
        &mut self,
        lpn: u32,
        decoded_ok: bool,
        encode: bool,
    ) -> (bool, PageFormat) {
        let d = self.geo.data_bytes as usize;
        let spare_len = META_LEN + self.codec_len;
        let stored = self.policies.codec_ref().format_of(&self.buf[d + META_LEN..d + spare_len]);
        let plan = self.ext.flex_move_plan(lpn, stored, decoded_ok, encode);
        (plan.encode, self.flex_begin_move(lpn, plan))
    }

    /// Records the move `plan` (from [`crate::ext::ExtState::flex_move_plan`]) of `lpn` once GC
    /// issues its copy (the plain move's program, or a copy-back's): RAM marks and counters, and
    /// the copy's write format for a program that follows. Returns the write format to restore
    /// with [`Ftl::flex_after_move`].
    pub(crate) fn flex_begin_move(&mut self, lpn: u32, plan: MovePlan) -> PageFormat {
        let flex = &mut self.ext.flex;
        match plan.note {
            MoveNote::Converted => {
                flex.set(DROP, lpn, false);
                flex.set(DETECTING, lpn, true);
                flex.counters.converted += 1;
            }
            MoveNote::DetectingKept => flex.counters.detecting_moved += 1,
            MoveNote::CorrectingKept => flex.counters.correcting_moved += 1,
            MoveNote::Nothing => {}
        }
        let saved = flex.write_format;
        flex.write_format = plan.format;
        flex.moving = true;
        saved
    }

    /// Reads one logical page into `out` (one page long) and reports its format and the bits
    /// corrected; a page failing its check is reported, not an error. Errors: range, buffer size,
    /// device.
    pub fn read_with(&mut self, lpn: u32, out: &mut [u8]) -> Result<PageRead, Error> {
        self.check_one(lpn, out.len())?;
        self.counters.host_read_pages += 1;
        self.read_page_report(lpn, Some(out))
    }

    /// A flush-read: reads `lpn` like [`Ftl::read_with`] (the cache manager writes the data back
    /// to the backing store) and, when FlexECC is enabled and the page is good and correcting,
    /// marks it so that GC rewrites it in the detecting format.
    pub fn flush_read(&mut self, lpn: u32, out: &mut [u8]) -> Result<PageRead, Error> {
        let r = self.read_with(lpn, out)?;
        if self.ext.flex.enabled {
            if let PageRead::Good { format: Some(PageFormat::Correcting), .. } = r {
                if !self.ext.flex.bit(DROP, lpn) {
                    self.ext.flex.counters.marked += 1;
                }
                self.ext.flex.set(DROP, lpn, true);
            }
        }
        Ok(r)
    }

    /// A host read of one page that never fails for a detecting page: a detecting page that fails
    /// its check is fetched from `store` and rewritten clean. A correcting page with at least the
    /// refresh threshold of corrected bits is refreshed. A correcting page that cannot be
    /// corrected (or a page whose metadata is unreadable) is [`Error::Uncorrectable`].
    pub fn read_or_fetch<B: BackingStore>(
        &mut self,
        lpn: u32,
        out: &mut [u8],
        store: &mut B,
    ) -> Result<Served, Error> {
        let r = self.read_with(lpn, out)?;
        match r {
            PageRead::Corrupt { format: Some(PageFormat::Detecting) } => {
                store.fetch(lpn, out).map_err(|_| Error::Uncorrectable { lpn })?;
                self.ext.flex.counters.served_from_backing += 1;
                self.write_with(lpn, out, Intent::Clean)?;
                Ok(Served::Backing)
            }
            PageRead::Corrupt { .. } => Err(Error::Uncorrectable { lpn }),
            PageRead::Good { format: Some(PageFormat::Correcting), corrected } => {
                if self.needs_refresh(corrected) {
                    self.refresh(lpn)?;
                }
                Ok(Served::Flash(r))
            }
            _ => Ok(Served::Flash(r)),
        }
    }

    /// Whether a correcting page with `corrected` bits corrected should be refreshed.
    pub fn needs_refresh(&self, corrected: u32) -> bool {
        self.ext.flex.cfg.refresh_threshold > 0 && corrected >= self.ext.flex.cfg.refresh_threshold
    }

    /// Checks the page of `lpn` without returning its data (a scrubber's verify step; uses the
    /// FTL's page buffer). Counts as a NAND read, not as a host read.
    pub fn verify(&mut self, lpn: u32) -> Result<PageRead, Error> {
        if lpn >= self.cfg.logical_pages {
            return Err(Error::OutOfRange);
        }
        self.read_page_report(lpn, None)
    }

    /// Moves the page of `lpn` to a fresh page, corrected and re-encoded in its format (a refresh
    /// before its errors outgrow the code); false if `lpn` is unmapped.
    pub fn refresh(&mut self, lpn: u32) -> Result<bool, Error> {
        if lpn >= self.cfg.logical_pages {
            return Err(Error::OutOfRange);
        }
        let Some(mapped) = self.map_get(lpn)? else {
            return Ok(false);
        };
        // A deduplicated page is moved where it is shared (its owners follow it).
        let (page, _) = self.dedup_resolve(mapped);
        if page.0 == crate::map::UNMAPPED {
            return Ok(false);
        }
        let plane = self.geo.plane_index(self.geo.block_of(page));
        let c = self.counters;
        self.relocate(page, plane)?;
        // A refresh is not GC work (it may still be a copy-back: the chip's counter has it).
        self.counters.gc_page_copies = c.gc_page_copies;
        self.counters.gc_copy_backs = c.gc_copy_backs;
        self.counters.gc_copy_back_corrected = c.gc_copy_back_corrected;
        self.counters.gc_copy_back_aborts = c.gc_copy_back_aborts;
        self.ext.flex.counters.refreshed += 1;
        Ok(true)
    }

    /// Logical pages after `from` (wrapping) that RAM believes are detecting, for a scrubber's
    /// cursor: the first such page, if any.
    pub fn next_detecting(&self, from: u32) -> Option<u32> {
        let n = self.cfg.logical_pages;
        if n == 0 || !self.ext.flex.enabled {
            return None;
        }
        let start = from % n;
        let words = self.ext.flex.words;
        // Word-wise scan from `start`, wrapping once.
        let mut l = start;
        for _ in 0..=words {
            let w = self.ext.flex.marks[l as usize / 32] >> (l % 32);
            if w != 0 {
                let c = l + w.trailing_zeros();
                if c < n {
                    return Some(c);
                }
            }
            l = (l / 32 + 1) * 32;
            if l >= n {
                l = 0;
            }
        }
        None
    }

    fn check_one(&self, lpn: u32, len: usize) -> Result<(), Error> {
        if len != self.geo.data_bytes as usize {
            return Err(Error::BufferSize);
        }
        if lpn >= self.cfg.logical_pages {
            return Err(Error::OutOfRange);
        }
        Ok(())
    }

    /// Reads and decodes the page of `lpn` into `out` (or the page buffer's data area), in the
    /// stacking order of a host read (see `ext`): a page the NV cache holds is served from it
    /// (reported good, with no format: no flash page was read; a verify skips it, since the
    /// flash may hold an older copy), and a deduplicated page from its shared physical page.
    /// Second writes never stack with FlexECC (`ext::refusal`), so their path is not taken here.
    /// A good host read fills the NV cache like [`Ftl::read`].
    fn read_page_report(&mut self, lpn: u32, mut out: Option<&mut [u8]>) -> Result<PageRead, Error> {
        let cached = match out.as_deref_mut() {
            Some(o) => self.nv_read_hit(lpn, o)?,
            None => self.nv_holds(lpn),
        };
        if cached {
            return Ok(PageRead::Good { format: None, corrected: 0 });
        }
        let Some(page) = self.map_get(lpn)? else {
            if let Some(o) = out {
                o.fill(0);
            }
            return Ok(PageRead::Unmapped);
        };
        // A shared page's spare names its first owner (or where it moved from), not `lpn`.
        let (page, shared) = self.dedup_resolve(page);
        let d = self.geo.data_bytes as usize;
        let spare_len = META_LEN + self.codec_len;
        self.counters.nand_reads += 1;
        let (bdata, bspare) = self.buf.split_at_mut(d);
        let data: &mut [u8] = match out.as_deref_mut() {
            Some(o) => o,
            None => bdata,
        };
        self.nand.read_page(page, data, &mut bspare[..spare_len])?;
        let seq = match PageMeta::decode(&bspare[..spare_len]) {
            SpareState::Valid(m) if m.kind == PageKind::Data && (m.tag == lpn || shared) => Some(m.seq),
            _ => None,
        };
        let stored = &bspare[META_LEN..spare_len];
        let format = self.policies.codec_ref().format_of(stored);
        let Some(seq) = seq else {
            return Ok(PageRead::Corrupt { format: None });
        };
        let res = self.policies.codec().decode(data, stored);
        let c = &mut self.ext.flex.counters;
        match format {
            Some(PageFormat::Correcting) => c.correcting_reads += 1,
            Some(PageFormat::Detecting) => c.detecting_reads += 1,
            None => {}
        }
        if let Some(f) = format {
            self.ext.flex.set(DETECTING, lpn, f == PageFormat::Detecting);
        }
        let c = &mut self.ext.flex.counters;
        match res {
            Ok(corrected) => {
                c.bits_corrected += corrected as u64;
                if let Some(o) = out {
                    self.nv_fill(lpn, o, seq)?;
                }
                Ok(PageRead::Good { format, corrected })
            }
            Err(_) => {
                match format {
                    Some(PageFormat::Detecting) => c.detecting_corrupt += 1,
                    _ => c.correcting_uncorrectable += 1,
                }
                Ok(PageRead::Corrupt { format })
            }
        }
    }
}
