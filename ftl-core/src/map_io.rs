//! The FTL's side of a flash-resident map ([`crate::CachedMap`]): the I/O the sans-I/O map asks
//! for, in the map's own buffer (never the FTL's page buffer, so map I/O can happen between a
//! page read and its copy).
//!
//! - [`Ftl::map_fault_in`] brings a logical page's entry into RAM (the map page read);
//!   [`Ftl::map_fault_in_for_write`] also makes room to change it (the map page with the most
//!   buffered changes written back first if the buffer is full). Every host write and every GC
//!   copy faults its entry in for write *before* programming its page, so that a write-back it
//!   causes has a smaller sequence number than the page: mount replays both in sequence order
//!   and the cache then never needs more room than it had when the pages were written (see
//!   `replay_map_set`).
//! - [`Ftl::map_write_back`] writes one map page: its current version read, every dirty entry of
//!   it merged, programmed to the GC stream (page kind `Map`, tag = map page), then the
//!   directory moves and the old version is invalid. A failed program leaves the lines dirty and
//!   the old version current; a torn map page is skipped by mount (its entries are still in the
//!   data pages mount replays, see `recovery.rs`).
//! - [`Ftl::map_flush`] writes every dirty map page back (before each checkpoint, which then
//!   stores the directory instead of the map).
//!
//! With a flat map every call here is a no-op check (`MapNeed::Ready`).

use nand_hal::{NandFlash, PageId};

use crate::map::{MapNeed, MappingTable, UNMAPPED};
use crate::meta::{PageKind, PageMeta, SpareState, META_LEN};
use crate::policy::{PageCodec, PolicySet, Stream};
use crate::{Error, Ftl};

/// `need_write` answers at most: write back a dirty line, load, write back buffered entries,
/// ready (and a retry of each).
const FAULT_STEPS: u32 = 8;

impl<N: NandFlash, P: PolicySet, M: MappingTable> Ftl<'_, N, P, M> {
    /// Brings the map entry of `lpn` into RAM, writing back and reading map pages as the map
    /// asks (reads).
    #[inline]
    pub(crate) fn map_fault_in(&mut self, lpn: u32) -> Result<(), Error> {
        self.map_fault(lpn, false)
    }

    /// Brings the map entry of `lpn` into RAM with room to change it: called before the page
    /// the change is about is programmed (see the module doc).
    #[inline]
    pub(crate) fn map_fault_in_for_write(&mut self, lpn: u32) -> Result<(), Error> {
        self.map_fault(lpn, true)
    }

    /// Brings the entries of all of `lpns` (the pages of one multi-plane program, distinct) into
    /// RAM together, with room to change each, before the program (see
    /// [`MappingTable::need_group`]): each faulted in for write, then map pages written back
    /// until the buffer has room for every change. False if they cannot all be in RAM at once
    /// (the caller programs the pages one by one, each faulting its own entry in). Every map
    /// I/O this does comes before the program, as a single page's fault-in does.
    pub(crate) fn map_fault_in_group(&mut self, lpns: &[u32]) -> Result<bool, Error> {
        for _ in 0..FAULT_STEPS {
            for &lpn in lpns {
                self.map_fault_in_for_write(lpn)?;
            }
            match self.map.need_group(lpns) {
                Some(MapNeed::Ready) => return Ok(true),
                Some(MapNeed::WriteBack { map_page }) => self.map_write_back(map_page)?,
                _ => return Ok(false),
            }
        }
        Ok(false)
    }

    fn map_fault(&mut self, lpn: u32, write: bool) -> Result<(), Error> {
        for _ in 0..FAULT_STEPS {
            let need = if write { self.map.need_write(lpn) } else { self.map.need(lpn) };
            match need {
                MapNeed::Ready => return Ok(()),
                MapNeed::Load { map_page, at } => {
                    // A map page that does not decode makes `lpn` unreadable.
                    self.map_read(map_page, at).map_err(|e| match e {
                        Error::Uncorrectable { .. } => Error::Uncorrectable { lpn },
                        e => e,
                    })?;
                    self.map.load(lpn);
                }
                MapNeed::WriteBack { map_page } => self.map_write_back(map_page)?,
            }
        }
        Err(Error::Corrupt)
    }

    /// The physical page of `lpn`, faulting its entry in.
    #[inline]
    pub(crate) fn map_get(&mut self, lpn: u32) -> Result<Option<PageId>, Error> {
        self.map_fault_in(lpn)?;
        Ok(self.map.get(lpn))
    }

    /// The physical page of `lpn`, faulting its entry in with room to change it.
    #[inline]
    pub(crate) fn map_get_for_write(&mut self, lpn: u32) -> Result<Option<PageId>, Error> {
        self.map_fault_in_for_write(lpn)?;
        Ok(self.map.get(lpn))
    }

    /// Reads map page `m` (at `at`; all unmapped if `None`) into the map's I/O buffer, checked:
    /// metadata that is not map page `m`'s is `Error::Corrupt`, data the codec cannot correct
    /// `Error::Uncorrectable`.
    pub(crate) fn map_read(&mut self, m: u32, at: Option<PageId>) -> Result<(), Error> {
        let d = self.geo.data_bytes as usize;
        let spare_len = META_LEN + self.codec_len;
        let Some(at) = at else {
            self.map.io_buf()[..d].fill(0xFF);
            return Ok(());
        };
        if !self.geo.contains_page(at) {
            return Err(Error::Corrupt);
        }
        self.counters.nand_reads += 1;
        self.counters.map_page_reads += 1;
        let io = self.map.io_buf();
        if io.len() < d + spare_len {
            return Err(Error::Memory);
        }
        let (data, spare) = io.split_at_mut(d);
        self.nand.read_page(at, data, &mut spare[..spare_len])?;
        // Entries the codec cannot correct exist nowhere else: the first logical page of the map
        // page is reported uncorrectable (and every read through it will be).
        let first = m.saturating_mul(self.geo.data_bytes / 4);
        match PageMeta::decode(&spare[..spare_len]) {
            SpareState::Valid(meta) if meta.kind == PageKind::Map && meta.tag == m => {}
            SpareState::Valid(_) => return Err(Error::Corrupt),
            _ => return Err(Error::Uncorrectable { lpn: first }),
        }
        self.policies
            .codec()
            .decode(data, &spare[META_LEN..spare_len])
            .map_err(|_| Error::Uncorrectable { lpn: first })?;
        Ok(())
    }

    /// Writes map page `m` back: its current version with every cached entry of it merged, to
    /// the GC stream; then the directory points at the new page.
    pub(crate) fn map_write_back(&mut self, m: u32) -> Result<(), Error> {
        // Like every program path: pages a failed program left unvoided are settled first (their
        // blocks must not be reused, nor newer pages written after them, before that).
        self.settle_torn()?;
        let at = self.map.dir(m);
        self.map_read(m, at)?;
        self.map.merge_dirty(m);
        let planes = self.geo.total_planes().max(1);
        let plane = self.gc_plane(m % planes);
        let new = self.append(plane, Stream::Gc, PageKind::Map, m, 0, crate::frontier::Source::Map)?;
        self.counters.map_page_writes += 1;
        self.set_valid_bit(new, true);
        if let Some(old) = at {
            self.set_valid_bit(old, false);
        }
        self.map.written(m, new);
        Ok(())
    }

    /// Writes every dirty map page back (called where the page buffer is free: its blocks come
    /// from the mount pool, topped up as it goes).
    pub(crate) fn map_flush(&mut self) -> Result<(), Error> {
        for _ in 0..=self.map.map_pages() {
            let Some(m) = self.map.any_dirty() else { return Ok(()) };
            self.pool_top_up()?;
            self.map_write_back(m)?;
        }
        Err(Error::Corrupt)
    }

    /// GC: map page `page` (tag `m`) in a victim. If it is current, it is written again (which
    /// also takes the dirty entries of `m`); a stale one is only marked invalid.
    pub(crate) fn relocate_map_page(&mut self, page: PageId, m: u32) -> Result<(), Error> {
        if m < self.map.map_pages() && self.map.dir(m) == Some(page) {
            return self.map_write_back(m);
        }
        // Stale: with the bitmap, clear its bit (without one it was counted invalid already).
        if !self.valid.is_empty() {
            self.set_valid_bit(page, false);
        }
        Ok(())
    }

    /// Mount: sets the entry of `lpn` as a replayed page or trim says and returns the previous
    /// one, loading map pages but never writing one (mount programs nothing before its voids).
    ///
    /// Replay keeps only the changes newer than their map page's newest version (see
    /// `recovery.rs`, `replay_map_pages`), and each host write and GC copy made room for its
    /// change before its page was programmed, so a replayed change always finds room: the
    /// changes replay holds were all buffered at once when the power went. If the buffer is full
    /// anyway, the map page on flash must already hold the change, which is checked (a trim's
    /// journal page can come after the trim's own write-back). Anything else is a damaged image:
    /// `Error::Corrupt`.
    pub(crate) fn replay_map_set(&mut self, lpn: u32, page: Option<PageId>) -> Result<Option<PageId>, Error> {
        for _ in 0..FAULT_STEPS {
            match self.map.need_write(lpn) {
                MapNeed::Ready => return Ok(self.map.set(lpn, page)),
                MapNeed::Load { map_page, at } => {
                    self.map_read(map_page, at)?;
                    self.map.load(lpn);
                }
                MapNeed::WriteBack { .. } => {
                    let per = self.geo.data_bytes / 4;
                    let m = lpn / per;
                    self.map_read(m, self.map.dir(m))?;
                    let cur = io_word(self.map.io_buf(), (lpn % per) as usize);
                    if cur == page.map_or(UNMAPPED, |p| p.0) {
                        return Ok(page);
                    }
                    return Err(Error::Corrupt);
                }
            }
        }
        Err(Error::Corrupt)
    }

    /// Mount: calls `count` with every mapped physical page of a flash-resident map (its map
    /// pages' entries with the cache's over them) and with each map page itself.
    pub(crate) fn for_each_mapping_on_flash(
        &mut self,
        mut count: impl FnMut(&mut Self, PageId) -> Result<(), Error>,
    ) -> Result<(), Error> {
        let per = self.geo.data_bytes / 4;
        let logical = self.map.len();
        for m in 0..self.map.map_pages() {
            let at = self.map.dir(m);
            if let Some(p) = at {
                count(self, p)?;
            }
            self.map_read(m, at)?;
            self.map.overlay(m);
            for k in 0..per {
                if m as u64 * per as u64 + k as u64 >= logical as u64 {
                    break;
                }
                let w = io_word(self.map.io_buf(), k as usize);
                if w != UNMAPPED {
                    count(self, PageId(w))?;
                }
            }
        }
        Ok(())
    }

    /// Free blocks GC keeps in each plane: the configured reserve, one more with a
    /// flash-resident map (map write-backs take GC-stream pages of their own, GC's included).
    pub(crate) fn free_threshold(&self) -> u32 {
        self.cfg.gc_free_threshold + u32::from(self.map.on_flash())
    }

    /// Free blocks a checkpoint needs now, plus one for GC to copy into.
    pub(crate) fn checkpoint_need(&self) -> u32 {
        crate::config::checkpoint_blocks(&self.geo, self.map.section_words()) + 1
    }
}

/// Word `k` (little-endian) of a map page's data in `buf`; unmapped past its end.
fn io_word(buf: &[u8], k: usize) -> u32 {
    match buf.get(k * 4..k * 4 + 4) {
        Some(b) => u32::from_le_bytes([b[0], b[1], b[2], b[3]]),
        None => UNMAPPED,
    }
}
