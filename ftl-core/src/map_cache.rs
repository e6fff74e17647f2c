//! [`CachedMap`]: the map on flash, in map pages, with a bounded cache of it in RAM.
//!
//! Map page `m` holds the entries of logical pages `[m E, (m + 1) E)`, `E = data_bytes / 4`
//! little-endian words ([`crate::map::UNMAPPED`] for none), written like data (page kind
//! `Map`, tag `m`, a sequence number, the codec's protection) to the GC stream. RAM holds:
//! - the directory: where each map page is on flash, one word per map page
//!   (`4 ceil(L / E)` bytes), two bits per map page that mount uses while it replays, and a
//!   16-bit count per map page of its entries in the dirty-entry buffer;
//! - the dirty-entry buffer: (logical page, physical page) pairs changed since their map page
//!   was last written, in an open-addressing table (8 bytes a slot, filled to 3/4 at most).
//!   Writing map page `m` back takes every buffered entry of `m` at once (DFTL's batch update),
//!   and the page written back is the one with the most buffered entries, so under random
//!   updates a map program carries many entries instead of one;
//! - read lines: [`MapLine`]s of [`LINE_ENTRIES`] consecutive entries as on flash, 4-way set
//!   associative (one set of 1 to 3 ways for a cache that small; line `t` = logical pages
//!   `[16 t, 16 t + 16)` lives in set `t mod sets`), LRU within a set. A line is clean: it
//!   equals its map page, and the buffer's entries stand over it. (A line is marked dirty only
//!   if an update finds the buffer full, which the FTL's `need_write` protocol prevents; such a
//!   line is written back like buffered entries.)
//! - one raw-page I/O buffer for map pages, so map I/O never touches the FTL's page buffer.
//!
//! RAM: [`CachedMapLayout::total_bytes`] = `76 x lines + 8 x slots + 4 (M + 2 ceil(M / 32) +
//! ceil(M / 2)) + data_bytes + spare_bytes` with `M = ceil(L / E)` map pages; no term grows with
//! the chip's pages except the directory (one word per 512 logical pages on 2 KiB pages).
//!
//! The map is sans-I/O (see [`crate::map`]); the FTL's side is `map_io.rs`. Guarantee: an entry
//! in RAM is never older than its map page on flash, and every entry changed since its map page
//! was written is in the buffer (or a dirty line) until the page is written again.

use nand_hal::{Geometry, PageId};

use crate::map::{MapNeed, MappingTable, UNMAPPED};
use crate::Error;

/// Entries per cache line.
pub const LINE_ENTRIES: usize = 16;
/// Lines per set (fewer when the whole cache has fewer lines: then it is one set).
pub const WAYS: usize = 4;
const NO_TAG: u32 = u32::MAX;

/// One read line: 16 consecutive map entries, 76 bytes.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[repr(C)]
pub struct MapLine {
    tag: u32,
    stamp: u32,
    dirty: u32,
    entries: [u32; LINE_ENTRIES],
}

impl MapLine {
    /// A free line.
    pub const EMPTY: MapLine = MapLine { tag: NO_TAG, stamp: 0, dirty: 0, entries: [UNMAPPED; LINE_ENTRIES] };
}

/// One slot of the dirty-entry buffer: (logical page, physical page), `[u32::MAX; 2]` when empty.
pub type DirtyEntry = [u32; 2];

/// An empty dirty-entry slot.
pub const NO_ENTRY: DirtyEntry = [NO_TAG, UNMAPPED];

/// The sizes of what a [`CachedMap`] borrows.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct CachedMapLayout {
    /// Read lines (a multiple of [`WAYS`], or 1 to 3: one set).
    pub lines: usize,
    /// Slots of the dirty-entry buffer (a power of two, at least 4; filled to 3/4 at most).
    pub dirty_slots: usize,
    /// Directory words: one per map page, two bitmaps of the map pages for mount, and a 16-bit
    /// count per map page of its buffered entries.
    pub dir_words: usize,
    /// Bytes of the I/O buffer (one raw page).
    pub io_bytes: usize,
}

impl CachedMapLayout {
    /// The layout for `logical_pages` on `geometry` with about `cache_bytes` of cache: half for
    /// the dirty-entry buffer, the rest for read lines (at least 4 slots and one line).
    pub const fn new(geometry: &Geometry, logical_pages: u32, cache_bytes: usize) -> Self {
        let per_page = geometry.data_bytes / 4;
        let half = cache_bytes / 2 / core::mem::size_of::<DirtyEntry>();
        let mut slots = 4;
        while slots * 2 <= half {
            slots *= 2;
        }
        let rest = cache_bytes.saturating_sub(slots * core::mem::size_of::<DirtyEntry>());
        let lines = rest / core::mem::size_of::<MapLine>();
        let lines = if lines < WAYS { lines } else { lines / WAYS * WAYS };
        let pages = if per_page == 0 { 0 } else { logical_pages.div_ceil(per_page) as usize };
        CachedMapLayout {
            lines: if lines == 0 { 1 } else { lines },
            dirty_slots: slots,
            dir_words: pages + 2 * pages.div_ceil(32) + pages.div_ceil(2),
            io_bytes: geometry.raw_page_bytes() as usize,
        }
    }

    /// Bytes in all.
    pub const fn total_bytes(&self) -> usize {
        self.lines * core::mem::size_of::<MapLine>()
            + self.dirty_slots * core::mem::size_of::<DirtyEntry>()
            + self.dir_words * 4
            + self.io_bytes
    }
}

/// A flash-resident map with a RAM cache (see the module doc).
pub struct CachedMap<'m> {
    lines: &'m mut [MapLine],
    dirty: &'m mut [DirtyEntry],
    dir: &'m mut [u32],
    io: &'m mut [u8],
    logical_pages: u32,
    per_page: u32,
    /// Map pages (the directory is `dir[..pages]`; the replay bitmaps and the counts follow).
    pages: u32,
    sets: u32,
    ways: usize,
    clock: u32,
    /// Entries in the dirty-entry buffer, and the most it takes.
    buffered: u32,
    buffer_max: u32,
    /// `log2` of the buffer's slots.
    slot_bits: u32,
}

impl<'m> CachedMap<'m> {
    /// A map of `logical_pages` on `geometry` over caller memory sized by
    /// [`CachedMapLayout::new`]; `Error::Memory` if the sizes do not match, `Error::Config` if a
    /// map page does not hold whole lines (`data_bytes` a multiple of 64).
    pub fn new(
        lines: &'m mut [MapLine],
        dirty: &'m mut [DirtyEntry],
        dir: &'m mut [u32],
        io: &'m mut [u8],
        geometry: &Geometry,
        logical_pages: u32,
    ) -> Result<Self, Error> {
        let per_page = geometry.data_bytes / 4;
        if per_page == 0 || !(per_page as usize).is_multiple_of(LINE_ENTRIES) {
            return Err(Error::Config);
        }
        let lay = CachedMapLayout::new(geometry, logical_pages, 0);
        let ways = lines.len().min(WAYS);
        if ways == 0
            || !lines.len().is_multiple_of(ways)
            || lines.len() / ways > u32::MAX as usize
            || dirty.len() < 4
            || !dirty.len().is_power_of_two()
            || dirty.len() > u32::MAX as usize
            || dir.len() != lay.dir_words
            || io.len() != lay.io_bytes
        {
            return Err(Error::Memory);
        }
        let sets = (lines.len() / ways) as u32;
        let pages = logical_pages.div_ceil(per_page);
        let buffer_max = (dirty.len() / 4 * 3) as u32;
        let slot_bits = dirty.len().trailing_zeros();
        let mut m = CachedMap {
            lines,
            dirty,
            dir,
            io,
            logical_pages,
            per_page,
            pages,
            sets,
            ways,
            clock: 0,
            buffered: 0,
            buffer_max,
            slot_bits,
        };
        m.clear();
        Ok(m)
    }

    /// Read lines.
    pub fn lines(&self) -> usize {
        self.lines.len()
    }

    fn set_range(&self, tag: u32) -> core::ops::Range<usize> {
        let s = (tag % self.sets) as usize * self.ways;
        s..s + self.ways
    }

    fn find(&self, tag: u32) -> Option<usize> {
        self.set_range(tag).find(|&i| self.lines[i].tag == tag)
    }

    fn touch(&mut self, i: usize) {
        self.clock = self.clock.wrapping_add(1);
        self.lines[i].stamp = self.clock;
    }

    /// The way a new line of `tag` would take: a free one, else the least recently used clean
    /// one, else (`Err`) the least recently used dirty one.
    fn victim(&self, tag: u32) -> Result<usize, usize> {
        let r = self.set_range(tag);
        if let Some(i) = r.clone().find(|&i| self.lines[i].tag == NO_TAG) {
            return Ok(i);
        }
        let age = |i: &usize| self.clock.wrapping_sub(self.lines[*i].stamp);
        match r.clone().filter(|&i| self.lines[i].dirty == 0).max_by_key(age) {
            Some(i) => Ok(i),
            None => Err(r.max_by_key(age).unwrap_or(0)),
        }
    }

    fn map_page_of_tag(&self, tag: u32) -> u32 {
        (tag as u64 * LINE_ENTRIES as u64 / self.per_page as u64) as u32
    }

    /// The line tags of map page `m`.
    fn tags_of(&self, m: u32) -> core::ops::Range<u32> {
        let per = self.per_page / LINE_ENTRIES as u32;
        let first = m.saturating_mul(per);
        let last_lpn = self.logical_pages.saturating_sub(1);
        let end = (last_lpn / LINE_ENTRIES as u32 + 1).min(first.saturating_add(per));
        first..end.max(first)
    }

    /// Replay bitmap `which` (0: newer version found, 1: reached) of map page `m`.
    fn replay_bit(&self, which: u32, m: u32) -> bool {
        let w = (self.pages + which * self.pages.div_ceil(32) + m / 32) as usize;
        self.dir.get(w).is_some_and(|&x| x & (1 << (m % 32)) != 0)
    }

    fn set_replay_bit(&mut self, which: u32, m: u32) {
        let w = (self.pages + which * self.pages.div_ceil(32) + m / 32) as usize;
        if let Some(x) = self.dir.get_mut(w) {
            *x |= 1 << (m % 32);
        }
    }

    /// Where the buffered-entry counts start in `dir`.
    fn counts_base(&self) -> usize {
        (self.pages + 2 * self.pages.div_ceil(32)) as usize
    }

    /// Buffered entries of map page `m`.
    fn count(&self, m: u32) -> u32 {
        let w = self.dir.get(self.counts_base() + m as usize / 2).copied().unwrap_or(0);
        (w >> (16 * (m % 2))) & 0xFFFF
    }

    fn set_count(&mut self, m: u32, c: u32) {
        let i = self.counts_base() + m as usize / 2;
        if let Some(w) = self.dir.get_mut(i) {
            let shift = 16 * (m % 2);
            *w = (*w & !(0xFFFF << shift)) | ((c.min(0xFFFF)) << shift);
        }
    }

    fn home(&self, lpn: u32) -> usize {
        (lpn.wrapping_mul(0x9E37_79B1) >> (32 - self.slot_bits)) as usize
    }

    /// The buffer slot holding `lpn`, if any.
    fn buffered_slot(&self, lpn: u32) -> Option<usize> {
        let mask = self.dirty.len() - 1;
        let mut i = self.home(lpn);
        for _ in 0..self.dirty.len() {
            match self.dirty[i][0] {
                NO_TAG => return None,
                l if l == lpn => return Some(i),
                _ => i = (i + 1) & mask,
            }
        }
        None
    }

    /// Buffers `lpn -> raw`; false if the buffer is full and `lpn` not in it.
    fn buffer(&mut self, lpn: u32, raw: u32) -> bool {
        if let Some(i) = self.buffered_slot(lpn) {
            self.dirty[i][1] = raw;
            return true;
        }
        if self.buffered >= self.buffer_max {
            return false;
        }
        let mask = self.dirty.len() - 1;
        let mut i = self.home(lpn);
        while self.dirty[i][0] != NO_TAG {
            i = (i + 1) & mask;
        }
        self.dirty[i] = [lpn, raw];
        self.buffered += 1;
        let m = lpn / self.per_page;
        self.set_count(m, self.count(m) + 1);
        true
    }

    /// Removes the entry in slot `i` (backward-shift deletion keeps every probe chain whole).
    fn unbuffer_at(&mut self, i: usize) {
        let mask = self.dirty.len() - 1;
        let lpn = self.dirty[i][0];
        let m = lpn / self.per_page;
        self.set_count(m, self.count(m).saturating_sub(1));
        self.buffered = self.buffered.saturating_sub(1);
        let mut hole = i;
        let mut j = i;
        loop {
            j = (j + 1) & mask;
            let e = self.dirty[j];
            if e[0] == NO_TAG {
                break;
            }
            let h = self.home(e[0]);
            // `e` may fill the hole unless its home lies cyclically in (hole, j].
            let between = if hole <= j { h > hole && h <= j } else { h > hole || h <= j };
            if !between {
                self.dirty[hole] = e;
                hole = j;
            }
        }
        self.dirty[hole] = NO_ENTRY;
    }

    /// The map page with the most buffered entries (ties: the lowest).
    fn fullest_page(&self) -> Option<u32> {
        let mut best: Option<(u32, u32)> = None;
        for m in 0..self.pages {
            let c = self.count(m);
            if c > 0 && best.is_none_or(|(_, b)| c > b) {
                best = Some((m, c));
            }
        }
        best.map(|(m, _)| m)
    }

    /// The entries of line `tag` (of map page `m`) as the I/O buffer's data area holds them.
    fn line_from_io(&self, tag: u32, m: u32) -> [u32; LINE_ENTRIES] {
        let first = (tag * LINE_ENTRIES as u32 - m * self.per_page) as usize;
        let mut entries = [UNMAPPED; LINE_ENTRIES];
        for (k, e) in entries.iter_mut().enumerate() {
            let o = (first + k) * 4;
            if let Some(b) = self.io.get(o..o + 4) {
                *e = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
            }
        }
        entries
    }

    /// Copies cached lines of `m` (all, or only dirty ones) into the I/O buffer's data area.
    fn copy_lines_out(&mut self, m: u32, dirty_only: bool) {
        for tag in self.tags_of(m) {
            let Some(i) = self.find(tag) else { continue };
            if dirty_only && self.lines[i].dirty == 0 {
                continue;
            }
            let first = (tag * LINE_ENTRIES as u32 - m * self.per_page) as usize;
            for (k, e) in self.lines[i].entries.iter().enumerate() {
                let o = (first + k) * 4;
                if let Some(dst) = self.io.get_mut(o..o + 4) {
                    dst.copy_from_slice(&e.to_le_bytes());
                }
            }
        }
    }

    /// Copies the buffered entries of `m` into the I/O buffer's data area.
    fn copy_buffered_out(&mut self, m: u32) {
        if self.count(m) == 0 {
            return;
        }
        for i in 0..self.dirty.len() {
            let [lpn, raw] = self.dirty[i];
            if lpn != NO_TAG && lpn / self.per_page == m {
                let o = (lpn % self.per_page) as usize * 4;
                if let Some(dst) = self.io.get_mut(o..o + 4) {
                    dst.copy_from_slice(&raw.to_le_bytes());
                }
            }
        }
    }
}

impl MappingTable for CachedMap<'_> {
    fn len(&self) -> u32 {
        self.logical_pages
    }

    #[inline]
    fn get(&self, lpn: u32) -> Option<PageId> {
        let e = match self.buffered_slot(lpn) {
            Some(i) => self.dirty[i][1],
            None => {
                let i = self.find(lpn / LINE_ENTRIES as u32)?;
                self.lines[i].entries[lpn as usize % LINE_ENTRIES]
            }
        };
        (e != UNMAPPED).then_some(PageId(e))
    }

    fn set(&mut self, lpn: u32, page: Option<PageId>) -> Option<PageId> {
        let old = self.get(lpn);
        let new = page.map_or(UNMAPPED, |p| p.0);
        if old.map_or(UNMAPPED, |p| p.0) == new && self.buffered_slot(lpn).is_none() {
            // Unchanged and equal to the map page: nothing to remember.
            return old;
        }
        if !self.buffer(lpn, new) {
            // Buffer full (the FTL asks `need_write` first, so this does not happen): the
            // entry goes into its line, which is written back like buffered entries.
            if let Some(i) = self.find(lpn / LINE_ENTRIES as u32) {
                self.lines[i].entries[lpn as usize % LINE_ENTRIES] = new;
                self.lines[i].dirty = 1;
                self.touch(i);
            }
        }
        old
    }

    fn clear(&mut self) {
        self.lines.fill(MapLine::EMPTY);
        self.dirty.fill(NO_ENTRY);
        self.buffered = 0;
        let p = self.pages as usize;
        self.dir[..p].fill(UNMAPPED);
        self.dir[p..].fill(0);
    }

    fn section_words(&self) -> u32 {
        self.pages
    }

    fn export_section(&self, first: u32, out: &mut [u32]) {
        let f = first as usize;
        match self.dir[..self.pages as usize].get(f..f + out.len()) {
            Some(src) => out.copy_from_slice(src),
            None => out.fill(UNMAPPED),
        }
    }

    fn import_section(&mut self, i: u32, w: u32) {
        if i < self.pages {
            self.dir[i as usize] = w;
        }
    }

    fn on_flash(&self) -> bool {
        true
    }

    fn fits(&self, geometry: &Geometry) -> bool {
        self.per_page == geometry.data_bytes / 4 && self.io.len() == geometry.raw_page_bytes() as usize
    }

    fn ram_bytes(&self) -> usize {
        core::mem::size_of_val(&*self.lines)
            + core::mem::size_of_val(&*self.dirty)
            + self.dir.len() * 4
            + self.io.len()
    }

    fn need(&mut self, lpn: u32) -> MapNeed {
        if lpn >= self.logical_pages || self.buffered_slot(lpn).is_some() {
            return MapNeed::Ready;
        }
        let tag = lpn / LINE_ENTRIES as u32;
        if let Some(i) = self.find(tag) {
            self.touch(i);
            return MapNeed::Ready;
        }
        match self.victim(tag) {
            Ok(_) => {
                let m = lpn / self.per_page;
                MapNeed::Load { map_page: m, at: self.dir(m) }
            }
            Err(i) => MapNeed::WriteBack { map_page: self.map_page_of_tag(self.lines[i].tag) },
        }
    }

    fn need_write(&mut self, lpn: u32) -> MapNeed {
        let n = self.need(lpn);
        if n != MapNeed::Ready || lpn >= self.logical_pages {
            return n;
        }
        if self.buffered < self.buffer_max || self.buffered_slot(lpn).is_some() {
            return MapNeed::Ready;
        }
        match self.fullest_page() {
            Some(m) => MapNeed::WriteBack { map_page: m },
            None => MapNeed::Ready,
        }
    }

    fn need_group(&mut self, lpns: &[u32]) -> Option<MapNeed> {
        // Each entry buffered or in its line; the buffer with room for those not buffered.
        let mut unbuffered = 0u32;
        for &lpn in lpns {
            if lpn >= self.logical_pages || self.buffered_slot(lpn).is_some() {
                continue;
            }
            self.find(lpn / LINE_ENTRIES as u32)?;
            unbuffered += 1;
        }
        if self.buffered + unbuffered <= self.buffer_max {
            return Some(MapNeed::Ready);
        }
        // Writing back the fullest map page frees at least one slot, and evicts no line.
        self.fullest_page().map(|m| MapNeed::WriteBack { map_page: m })
    }

    fn map_pages(&self) -> u32 {
        self.pages
    }

    fn dir(&self, m: u32) -> Option<PageId> {
        if m >= self.pages {
            return None;
        }
        Some(self.dir[m as usize]).filter(|&d| d != UNMAPPED).map(PageId)
    }

    fn io_buf(&mut self) -> &mut [u8] {
        self.io
    }

    fn load(&mut self, lpn: u32) {
        let tag = lpn / LINE_ENTRIES as u32;
        if lpn >= self.logical_pages || self.find(tag).is_some() {
            return;
        }
        let Ok(i) = self.victim(tag) else { return };
        let entries = self.line_from_io(tag, lpn / self.per_page);
        self.lines[i] = MapLine { tag, stamp: 0, dirty: 0, entries };
        self.touch(i);
    }

    fn merge_dirty(&mut self, m: u32) {
        self.copy_lines_out(m, true);
        self.copy_buffered_out(m);
    }

    fn written(&mut self, m: u32, at: PageId) {
        if m < self.pages {
            self.dir[m as usize] = at.0;
        }
        // The buffered entries of `m` are in the page now.
        if self.count(m) > 0 {
            let mut i = 0;
            while i < self.dirty.len() {
                let lpn = self.dirty[i][0];
                if lpn != NO_TAG && lpn / self.per_page == m {
                    self.unbuffer_at(i);
                } else {
                    i += 1;
                }
            }
        }
        // Lines of `m` take the page as written (the I/O buffer still holds it).
        for tag in self.tags_of(m) {
            if let Some(i) = self.find(tag) {
                self.lines[i].entries = self.line_from_io(tag, m);
                self.lines[i].dirty = 0;
            }
        }
    }

    fn replay_begin(&mut self) {
        let p = self.pages as usize;
        let end = self.counts_base();
        self.dir[p..end].fill(0);
    }

    fn replay_newer(&mut self, m: u32, at: PageId) {
        if m < self.pages {
            self.dir[m as usize] = at.0;
            self.set_replay_bit(0, m);
        }
    }

    fn replay_pass(&mut self, m: u32, at: PageId) {
        if self.dir(m) == Some(at) {
            self.set_replay_bit(1, m);
        }
    }

    fn replay_skips(&self, lpn: u32) -> bool {
        let m = lpn / self.per_page;
        self.replay_bit(0, m) && !self.replay_bit(1, m)
    }

    fn any_dirty(&self) -> Option<u32> {
        self.fullest_page().or_else(|| {
            self.lines.iter().find(|l| l.tag != NO_TAG && l.dirty != 0).map(|l| self.map_page_of_tag(l.tag))
        })
    }

    fn overlay(&mut self, m: u32) {
        self.copy_lines_out(m, false);
        self.copy_buffered_out(m);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn geo() -> Geometry {
        // 64-byte pages: 16 entries per map page, one line each.
        Geometry { data_bytes: 128, spare_bytes: 16, ..Geometry::MT29F4G08 }
    }

    /// Writes map page `mp` back to a model of flash (`flash[m]`, None for never written).
    fn write_back(m: &mut CachedMap, flash: &mut [Option<[u32; 32]>], mp: u32) {
        let words = flash[mp as usize].unwrap_or([UNMAPPED; 32]);
        for (k, w) in words.iter().enumerate() {
            m.io_buf()[k * 4..k * 4 + 4].copy_from_slice(&w.to_le_bytes());
        }
        m.merge_dirty(mp);
        let mut out = [0u32; 32];
        for (k, o) in out.iter_mut().enumerate() {
            let b = &m.io_buf()[k * 4..k * 4 + 4];
            *o = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
        }
        flash[mp as usize] = Some(out);
        m.written(mp, PageId(1000 + mp));
    }

    /// Loads `lpn`'s map page from a model of flash (`flash[m]`, None for never written).
    fn fault_in(m: &mut CachedMap, flash: &mut [Option<[u32; 32]>], lpn: u32) {
        loop {
            match m.need_write(lpn) {
                MapNeed::Ready => return,
                MapNeed::Load { map_page, at } => {
                    assert_eq!(at.is_some(), flash[map_page as usize].is_some());
                    let words = flash[map_page as usize].unwrap_or([UNMAPPED; 32]);
                    for (k, w) in words.iter().enumerate() {
                        m.io_buf()[k * 4..k * 4 + 4].copy_from_slice(&w.to_le_bytes());
                    }
                    m.load(lpn);
                }
                MapNeed::WriteBack { map_page } => write_back(m, flash, map_page),
            }
        }
    }

    #[test]
    fn a_small_cache_behaves_like_an_array() {
        let g = geo();
        let logical = 700u32;
        // 4 lines (44 in the map) and 32 buffer slots (24 entries at most).
        let lay = CachedMapLayout::new(&g, logical, 736);
        assert_eq!((lay.lines, lay.dirty_slots), (4, 32));
        let mut lines = [MapLine::EMPTY; 4];
        let mut dirty = [NO_ENTRY; 32];
        let mut dir = [0u32; 22 + 2 + 11];
        let mut io = [0u8; 144];
        let mut m = CachedMap::new(&mut lines, &mut dirty, &mut dir, &mut io, &g, logical).unwrap();
        let mut flash = [None; 22];
        let mut model = [UNMAPPED; 700];
        let mut x = 12345u64;
        for step in 0..20_000u32 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let lpn = (x % logical as u64) as u32;
            fault_in(&mut m, &mut flash, lpn);
            let want = (model[lpn as usize] != UNMAPPED).then_some(PageId(model[lpn as usize]));
            assert_eq!(m.get(lpn), want, "step {step} lpn {lpn}");
            if !x.is_multiple_of(3) {
                let new = if x.is_multiple_of(7) { UNMAPPED } else { step };
                assert_eq!(m.set(lpn, (new != UNMAPPED).then_some(PageId(new))), want);
                model[lpn as usize] = new;
            }
        }
        // Write everything back: flash alone then holds the model.
        while let Some(mp) = m.any_dirty() {
            write_back(&mut m, &mut flash, mp);
        }
        for (l, &want) in model.iter().enumerate() {
            let got = flash[l / 32].map_or(UNMAPPED, |p| p[l % 32]);
            assert_eq!(got, want, "lpn {l}");
        }
    }

    /// `need_group`: ready when every entry is in RAM with a slot for each change; a write-back
    /// when the buffer is short; `None` when an entry's line was evicted by another's or the
    /// buffer can never take them all.
    #[test]
    fn a_group_of_changes_needs_every_entry_and_a_slot_each() {
        let g = geo();
        let logical = 64u32;
        let mut lines = [MapLine::EMPTY; 1];
        let mut dirty = [NO_ENTRY; 8];
        let mut dir = [0u32; 2 + 2 + 1];
        let mut io = [0u8; 144];
        let mut m = CachedMap::new(&mut lines, &mut dirty, &mut dir, &mut io, &g, logical).unwrap();
        let mut flash = [None; 2];
        fault_in(&mut m, &mut flash, 0);
        fault_in(&mut m, &mut flash, 1);
        assert_eq!(m.need_group(&[0, 1]), Some(MapNeed::Ready));
        // Five of the six changes the buffer takes: one slot left for two changes.
        for l in 0..5 {
            fault_in(&mut m, &mut flash, l);
            m.set(l, Some(PageId(100 + l)));
        }
        fault_in(&mut m, &mut flash, 5);
        fault_in(&mut m, &mut flash, 6);
        assert_eq!(m.need_group(&[5, 6]), Some(MapNeed::WriteBack { map_page: 0 }));
        // A buffered entry needs no new slot.
        assert_eq!(m.need_group(&[4, 5]), Some(MapNeed::Ready));
        write_back(&mut m, &mut flash, 0);
        assert_eq!(m.need_group(&[5, 6]), Some(MapNeed::Ready));
        // Lines 0 and 1 (lpns 15 and 16) cannot both be in the one line.
        fault_in(&mut m, &mut flash, 15);
        fault_in(&mut m, &mut flash, 16);
        assert_eq!(m.need_group(&[15, 16]), None);
        // Four slots take three changes: never four, whatever is written back.
        let mut lines = [MapLine::EMPTY; 1];
        let mut dirty = [NO_ENTRY; 4];
        let mut m = CachedMap::new(&mut lines, &mut dirty, &mut dir, &mut io, &g, logical).unwrap();
        let mut flash = [None; 2];
        fault_in(&mut m, &mut flash, 0);
        assert_eq!(m.need_group(&[0, 1, 2]), Some(MapNeed::Ready));
        assert_eq!(m.need_group(&[0, 1, 2, 3]), None);
    }

    #[test]
    fn layout_and_memory_checks() {
        let g = Geometry::MT29F4G08;
        let lay = CachedMapLayout::new(&g, 243_712, 16 * 1024);
        assert_eq!(core::mem::size_of::<MapLine>(), 76);
        // 8 KiB of buffer (1,024 slots), the other 8 KiB in lines.
        assert_eq!((lay.dirty_slots, lay.lines), (1024, 104));
        assert_eq!(lay.dir_words, 476 + 2 * 15 + 238);
        assert!(lay.total_bytes() <= 16 * 1024 + 4 * 744 + 2112);
        let mut lines = [MapLine::EMPTY; 6];
        let mut dirty = [NO_ENTRY; 4];
        let mut dir = [0u32; 744];
        let mut io = [0u8; 2112];
        assert!(matches!(
            CachedMap::new(&mut lines, &mut dirty, &mut dir, &mut io, &g, 243_712),
            Err(Error::Memory)
        ));
        let mut lines = [MapLine::EMPTY; 4];
        let mut dirty = [NO_ENTRY; 6];
        assert!(matches!(
            CachedMap::new(&mut lines, &mut dirty, &mut dir, &mut io, &g, 243_712),
            Err(Error::Memory)
        ));
        let odd = Geometry { data_bytes: 96, ..g };
        let mut io2 = [0u8; 2112];
        let mut lines2 = [MapLine::EMPTY; 4];
        let mut dirty2 = [NO_ENTRY; 4];
        assert!(matches!(
            CachedMap::new(&mut lines2, &mut dirty2, &mut dir, &mut io2, &odd, 10),
            Err(Error::Config)
        ));
    }
}
