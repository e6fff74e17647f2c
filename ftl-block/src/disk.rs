//! [`SectorDisk`]: 512-byte logical sectors (and arbitrary byte ranges) on the FTL's whole
//! logical pages.
//!
//! It owns the page store and one page buffer lent by the caller; it never allocates and never
//! panics on its inputs.
//!
//! - Sector `s` is bytes `s * 512 .. (s + 1) * 512` of the device; logical page `p` holds sectors
//!   `p * k .. (p + 1) * k` with `k = page_bytes / 512` (the page size must be a multiple of 512).
//! - Every access is checked before the FTL sees it: a range past the end (or overflowing) is
//!   [`Error::OutOfRange`], a sector buffer that is not a whole number of sectors is
//!   [`Error::Length`]; a refused call changes nothing.
//! - The aligned middle of a request goes to the FTL as whole pages, straight from or into the
//!   caller's buffer. A page only partly covered (the ends of an unaligned request) is read into
//!   the page buffer, patched and written back whole: read-modify-write.
//! - Trim discards the whole pages inside the range (they read as zeros from then on). The
//!   sectors of a page only partly inside the range are **left as they are** (not zeroed): no
//!   write is spent on a discard, which SCSI UNMAP (with LBPRZ = 0), NBD TRIM and ATA TRIM all
//!   allow. The call returns how many sectors were discarded.
//! - `flush` is the FTL's flush.
//!
//! ## Power loss, per sector
//!
//! The FTL changes a logical page atomically: after a cut and remount a page reads as its content
//! at the last completed `flush` or as one of the contents written (or trimmed) since, never as a
//! mix. Carried to sectors:
//!
//! 1. After `flush` returns Ok, every sector written or trimmed before it reads back as written
//!    (trimmed whole pages as zeros; the partial pages a trim left alone keep their content).
//! 2. A sector written after the last flush reads, after a cut, as its old content (the last
//!    flushed one or one written since) or its new one, never anything else.
//! 3. The sectors of one page move together: after a cut they all show the same version of the
//!    page. A cut during the read-modify-write of a partial page therefore leaves either the whole
//!    old page (none of the new sectors) or the whole new page (all of them, with the untouched
//!    sectors of the page as they were); the untouched sectors are never damaged. If those untouched
//!    sectors had themselves been written since the last flush, they may roll back with the page
//!    (to any version the page had since that flush), as they would without the patch.
//! 4. A request spanning several pages is not atomic: each page is old or new on its own.
//! 5. An error from the FTL in the middle of a request (a device error, a full device) leaves the
//!    pages before it written and the rest untouched.

use crate::error::Error;
use crate::store::PageStore;
use crate::SECTOR_SIZE;

/// The FTL (any [`PageStore`]) as a device of 512-byte sectors, with a lent page buffer `B`.
pub struct SectorDisk<S: PageStore, B: AsMut<[u8]>> {
    store: S,
    buf: B,
    page: usize,
    bytes: u64,
}

impl<S: PageStore, B: AsMut<[u8]>> SectorDisk<S, B> {
    /// Wraps a mounted (or freshly formatted) store. `buf` must hold at least one page; the page
    /// size must be a non-zero multiple of 512, else [`Error::Buffer`].
    pub fn new(store: S, mut buf: B) -> Result<Self, Error> {
        let page = store.page_bytes();
        if page == 0 || !page.is_multiple_of(SECTOR_SIZE) || buf.as_mut().len() < page {
            return Err(Error::Buffer);
        }
        let bytes = store.pages() as u64 * page as u64;
        Ok(SectorDisk { store, buf, page, bytes })
    }

    /// Number of 512-byte sectors.
    pub fn sectors(&self) -> u64 {
        self.bytes / SECTOR_SIZE as u64
    }

    /// Capacity in bytes.
    pub fn size_bytes(&self) -> u64 {
        self.bytes
    }

    /// Bytes per FTL page.
    pub fn page_bytes(&self) -> usize {
        self.page
    }

    /// Sectors per FTL page (the unit that changes atomically).
    pub fn sectors_per_page(&self) -> u32 {
        (self.page / SECTOR_SIZE) as u32
    }

    /// The page store.
    pub fn store(&self) -> &S {
        &self.store
    }

    /// The page store, mutably.
    pub fn store_mut(&mut self) -> &mut S {
        &mut self.store
    }

    /// Gives the store and the page buffer back.
    pub fn into_parts(self) -> (S, B) {
        (self.store, self.buf)
    }

    fn sector_range(&self, lba: u64, len: usize) -> Result<u64, Error> {
        if !len.is_multiple_of(SECTOR_SIZE) {
            return Err(Error::Length);
        }
        let offset = lba.checked_mul(SECTOR_SIZE as u64).ok_or(Error::OutOfRange)?;
        self.check(offset, len as u64)?;
        Ok(offset)
    }

    fn check(&self, offset: u64, len: u64) -> Result<(), Error> {
        match offset.checked_add(len) {
            Some(end) if end <= self.bytes => Ok(()),
            _ => Err(Error::OutOfRange),
        }
    }

    /// Reads `buf.len() / 512` sectors from sector `lba`.
    pub fn read(&mut self, lba: u64, buf: &mut [u8]) -> Result<(), Error> {
        let offset = self.sector_range(lba, buf.len())?;
        self.read_at(offset, buf)
    }

    /// Writes `data.len() / 512` sectors at sector `lba` (read-modify-write for partial pages).
    pub fn write(&mut self, lba: u64, data: &[u8]) -> Result<(), Error> {
        let offset = self.sector_range(lba, data.len())?;
        self.write_at(offset, data)
    }

    /// Discards `count` sectors from `lba`: the whole pages inside read as zeros from then on,
    /// partial pages at the ends are left as they are. Returns the number of sectors discarded.
    pub fn trim(&mut self, lba: u64, count: u64) -> Result<u64, Error> {
        let offset = lba.checked_mul(SECTOR_SIZE as u64).ok_or(Error::OutOfRange)?;
        let len = count.checked_mul(SECTOR_SIZE as u64).ok_or(Error::OutOfRange)?;
        Ok(self.trim_bytes(offset, len)? / SECTOR_SIZE as u64)
    }

    /// The FTL's flush: every completed write and trim becomes durable.
    pub fn flush(&mut self) -> Result<(), Error> {
        self.store.flush()?;
        Ok(())
    }

    /// Reads `buf.len()` bytes at byte `offset` (any alignment).
    pub fn read_bytes(&mut self, offset: u64, buf: &mut [u8]) -> Result<(), Error> {
        self.check(offset, buf.len() as u64)?;
        self.read_at(offset, buf)
    }

    /// Writes `data` at byte `offset` (any alignment; read-modify-write for partial pages).
    pub fn write_bytes(&mut self, offset: u64, data: &[u8]) -> Result<(), Error> {
        self.check(offset, data.len() as u64)?;
        self.write_at(offset, data)
    }

    /// Discards the whole pages inside bytes `offset .. offset + len`; returns the bytes
    /// discarded (a multiple of the page size).
    pub fn trim_bytes(&mut self, offset: u64, len: u64) -> Result<u64, Error> {
        self.check(offset, len)?;
        let pb = self.page as u64;
        let first = offset.div_ceil(pb);
        let end = (offset + len) / pb;
        if end <= first {
            return Ok(0);
        }
        // Both fit in u32: the capacity in pages does.
        self.store.trim_pages(first as u32, (end - first) as u32)?;
        Ok((end - first) * pb)
    }

    /// Reads `count` sectors from `lba`, handing each to `sink(i, sector)` in order (`i` counts
    /// from 0), one FTL page read per page touched, through the page buffer. For callers whose
    /// sectors are not one contiguous slice (embedded-sdmmc's `[Block]`).
    pub fn read_with(&mut self, lba: u64, count: u64, mut sink: impl FnMut(u64, &[u8])) -> Result<(), Error> {
        let (first, end) = self.sector_span(lba, count)?;
        let spp = self.sectors_per_page() as u64;
        let mut s = first;
        while s < end {
            let lpn = s / spp;
            let stop = ((lpn + 1) * spp).min(end);
            let page = &mut self.buf.as_mut()[..self.page];
            self.store.read_pages(lpn as u32, page)?;
            for t in s..stop {
                let at = (t % spp) as usize * SECTOR_SIZE;
                sink(t - first, &page[at..at + SECTOR_SIZE]);
            }
            s = stop;
        }
        Ok(())
    }

    /// Writes `count` sectors at `lba`, taking each from `source(i, sector)` in order, one FTL
    /// page program per page touched (read-modify-write for partial pages), through the page
    /// buffer.
    pub fn write_with(
        &mut self,
        lba: u64,
        count: u64,
        mut source: impl FnMut(u64, &mut [u8]),
    ) -> Result<(), Error> {
        let (first, end) = self.sector_span(lba, count)?;
        let spp = self.sectors_per_page() as u64;
        let mut s = first;
        while s < end {
            let lpn = s / spp;
            let stop = ((lpn + 1) * spp).min(end);
            let page = &mut self.buf.as_mut()[..self.page];
            if stop - s < spp {
                self.store.read_pages(lpn as u32, page)?;
            }
            for t in s..stop {
                let at = (t % spp) as usize * SECTOR_SIZE;
                source(t - first, &mut page[at..at + SECTOR_SIZE]);
            }
            self.store.write_pages(lpn as u32, page)?;
            s = stop;
        }
        Ok(())
    }

    fn sector_span(&self, lba: u64, count: u64) -> Result<(u64, u64), Error> {
        match lba.checked_add(count) {
            Some(end) if end <= self.sectors() => Ok((lba, end)),
            _ => Err(Error::OutOfRange),
        }
    }

    // Bounds already checked: every page index below fits in u32.
    fn read_at(&mut self, offset: u64, buf: &mut [u8]) -> Result<(), Error> {
        for s in spans(offset, buf.len(), self.page) {
            let out = &mut buf[s.done..s.done + s.len];
            if s.whole {
                self.store.read_pages(s.lpn, out)?;
            } else {
                let page = &mut self.buf.as_mut()[..self.page];
                self.store.read_pages(s.lpn, page)?;
                out.copy_from_slice(&page[s.in_page..s.in_page + s.len]);
            }
        }
        Ok(())
    }

    fn write_at(&mut self, offset: u64, data: &[u8]) -> Result<(), Error> {
        for s in spans(offset, data.len(), self.page) {
            let src = &data[s.done..s.done + s.len];
            if s.whole {
                self.store.write_pages(s.lpn, src)?;
            } else {
                // Read-modify-write of a partial page.
                let page = &mut self.buf.as_mut()[..self.page];
                self.store.read_pages(s.lpn, page)?;
                page[s.in_page..s.in_page + s.len].copy_from_slice(src);
                self.store.write_pages(s.lpn, page)?;
            }
        }
        Ok(())
    }
}

/// One piece of a byte range split at page boundaries: a run of whole pages, or part of one page.
struct Span {
    /// First logical page.
    lpn: u32,
    /// Offset in that page (0 for whole pages).
    in_page: usize,
    /// Bytes of the range before this piece.
    done: usize,
    /// Bytes in this piece.
    len: usize,
    /// Whole pages (`len` a multiple of the page size), no read-modify-write needed.
    whole: bool,
}

/// The pieces of `len` bytes from byte `offset` with pages of `pb` bytes (bounds checked by the
/// caller: every page index fits in u32).
fn spans(offset: u64, len: usize, pb: usize) -> impl Iterator<Item = Span> {
    let mut done = 0usize;
    core::iter::from_fn(move || {
        if done >= len {
            return None;
        }
        let at = offset + done as u64;
        let lpn = (at / pb as u64) as u32;
        let in_page = (at % pb as u64) as usize;
        let left = len - done;
        let whole = in_page == 0 && left >= pb;
        let n = if whole { left / pb * pb } else { (pb - in_page).min(left) };
        let s = Span { lpn, in_page, done, len: n, whole };
        done += n;
        Some(s)
    })
}
