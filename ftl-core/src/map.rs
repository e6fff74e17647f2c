//! The logical-to-physical map, behind the [`MappingTable`] trait so that a cached,
//! flash-resident map can replace the flat one.
//!
//! [`FlatMap`] keeps one `u32` per logical page in caller memory (`4 * logical_pages` bytes);
//! [`UNMAPPED`] marks a page that was never written or was trimmed. [`crate::CachedMap`] keeps
//! the map in map pages on flash and a bounded cache of it in RAM.
//!
//! The trait is sans-I/O: a map never touches the NAND. Before it reads or changes the entry of
//! a logical page, the FTL asks [`MappingTable::need`] what I/O must happen first (load a map
//! page into the map's I/O buffer, or write a map page back to free a cache line) and does it
//! (`map_io.rs`); [`MappingTable::get`] and [`MappingTable::set`] then answer from RAM. A flat
//! map answers every `need` with [`MapNeed::Ready`] and costs nothing more than an array.
//! [`AnyMap`] picks one of the two at run time (hosts, tests, the simulator).

use nand_hal::{Geometry, PageId};

use crate::map_cache::CachedMap;

/// The map entry of a logical page with no physical page.
pub const UNMAPPED: u32 = u32::MAX;

/// What the FTL must do before the entry of a logical page is in RAM.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum MapNeed {
    /// The entry is in RAM: `get` and `set` answer now.
    Ready,
    /// Read map page `map_page` (at `at` on flash, or all [`UNMAPPED`] if `None`) into the I/O
    /// buffer and call [`MappingTable::load`].
    Load {
        /// The map page holding the entry.
        map_page: u32,
        /// Where it is on flash.
        at: Option<PageId>,
    },
    /// Buffered changes must go first to make room: write map page `map_page` back (read the
    /// current version into the I/O buffer, [`MappingTable::merge_dirty`], program it,
    /// [`MappingTable::written`]).
    WriteBack {
        /// The map page to write.
        map_page: u32,
    },
}

/// Logical page -> physical page.
pub trait MappingTable {
    /// Logical pages covered.
    fn len(&self) -> u32;
    /// Whether the map covers no page.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The physical page of `lpn` (which must be `< len()`), if mapped. A flash-resident map
    /// answers `None` for an entry that is not in RAM: ask [`MappingTable::need`] first.
    fn get(&self, lpn: u32) -> Option<PageId>;
    /// Sets the physical page of `lpn` (which must be `< len()`) and returns the previous one.
    /// A flash-resident map ignores an entry that is not in RAM: ask [`MappingTable::need`] first.
    fn set(&mut self, lpn: u32, page: Option<PageId>) -> Option<PageId>;
    /// Unmaps every logical page.
    fn clear(&mut self);
    /// Copies the raw entries (`UNMAPPED` for none) of `out.len()` logical pages from `first`.
    /// The default goes through [`MappingTable::get`].
    fn export(&self, first: u32, out: &mut [u32]) {
        for (i, o) in out.iter_mut().enumerate() {
            *o = self.get(first + i as u32).map_or(UNMAPPED, |p| p.0);
        }
    }

    // ---- checkpoint section: what a checkpoint stores of the map ----

    /// Words the map stores in a checkpoint (a flat map: every entry; a flash-resident map: its
    /// directory, all its map pages written back first).
    fn section_words(&self) -> u32 {
        self.len()
    }
    /// Copies `out.len()` words of the checkpoint section from word `first`.
    fn export_section(&self, first: u32, out: &mut [u32]) {
        self.export(first, out)
    }
    /// Restores word `i` of the checkpoint section.
    fn import_section(&mut self, i: u32, w: u32) {
        if i < self.len() {
            self.set(i, (w != UNMAPPED).then_some(PageId(w)));
        }
    }

    // ---- flash-resident maps (a flat map keeps the defaults) ----

    /// Whether the map lives in map pages on flash (and answers [`MappingTable::need`]).
    fn on_flash(&self) -> bool {
        false
    }
    /// Whether the map fits `geometry` (map pages of `data_bytes / 4` entries, an I/O buffer of
    /// one raw page).
    fn fits(&self, _geometry: &Geometry) -> bool {
        true
    }
    /// Bytes of RAM the map holds.
    fn ram_bytes(&self) -> usize {
        self.len() as usize * 4
    }
    /// What must happen before the entry of `lpn` is in RAM (marks it recently used if it is).
    fn need(&mut self, _lpn: u32) -> MapNeed {
        MapNeed::Ready
    }
    /// What must happen before the entry of `lpn` is in RAM *and* [`MappingTable::set`] of it
    /// has room to remember a change (a flash-resident map may first have to write a map page
    /// back). The FTL asks this before it programs the page the change is about.
    fn need_write(&mut self, lpn: u32) -> MapNeed {
        self.need(lpn)
    }
    /// Multi-plane programs (`multiplane.rs`): whether the entries of all of `lpns` (distinct,
    /// each brought into RAM just before) are in RAM *together*, with room in
    /// [`MappingTable::set`] for a change of each, so that the FTL can change them one after the
    /// other with no map I/O in between. `Some(Ready)`: they are; `Some(WriteBack { .. })`:
    /// write that map page back (it makes room) and ask again; `None`: they cannot be (an entry
    /// is not in RAM, its line evicted by another's, or the changes can never all fit), and the
    /// FTL programs the pages one by one. A map that never needs I/O: always `Some(Ready)`; a
    /// flash-resident map that does not say: `None`.
    fn need_group(&mut self, _lpns: &[u32]) -> Option<MapNeed> {
        (!self.on_flash()).then_some(MapNeed::Ready)
    }
    /// Map pages (0 for a flat map).
    fn map_pages(&self) -> u32 {
        0
    }
    /// Where map page `m` is on flash.
    fn dir(&self, _m: u32) -> Option<PageId> {
        None
    }
    /// The map's own raw-page I/O buffer (data then spare).
    fn io_buf(&mut self) -> &mut [u8] {
        &mut []
    }
    /// Takes the map page of `lpn`, now in the I/O buffer's data area, into the cache (replacing
    /// a clean or free line).
    fn load(&mut self, _lpn: u32) {}
    /// Writes every cached entry of map page `m` into the I/O buffer's data area (which holds the
    /// page's current version).
    fn merge_dirty(&mut self, _m: u32) {}
    /// Map page `m` (merged by [`MappingTable::merge_dirty`]) is now at `at`: its lines are clean.
    fn written(&mut self, _m: u32, _at: PageId) {}
    /// Mount, before replay: forgets which map pages replay found.
    fn replay_begin(&mut self) {}
    /// Mount, first pass (sequence order): map page `m` was written at `at` after the
    /// checkpoint; the directory points at the newest such version.
    fn replay_newer(&mut self, _m: u32, _at: PageId) {}
    /// Mount, second pass (sequence order): replay reached map page `m`'s version at `at`.
    fn replay_pass(&mut self, _m: u32, _at: PageId) {}
    /// Mount, second pass: whether the update of `lpn` replay is at is already in the newest
    /// version of its map page (written later, not reached yet), so replay skips it.
    fn replay_skips(&self, _lpn: u32) -> bool {
        false
    }
    /// A map page with dirty lines, if any.
    fn any_dirty(&self) -> Option<u32> {
        None
    }
    /// Writes the cached entries of map page `m` (dirty or clean) over the I/O buffer's data
    /// area, without changing the cache (mount counts valid pages this way).
    fn overlay(&mut self, _m: u32) {}
}

/// A flat array map in caller memory.
pub struct FlatMap<'m> {
    entries: &'m mut [u32],
}

impl<'m> FlatMap<'m> {
    /// A map over `entries` (one per logical page); its contents are overwritten by format/mount.
    pub fn new(entries: &'m mut [u32]) -> Self {
        FlatMap { entries }
    }
}

impl MappingTable for FlatMap<'_> {
    fn len(&self) -> u32 {
        self.entries.len() as u32
    }

    #[inline]
    fn get(&self, lpn: u32) -> Option<PageId> {
        match self.entries.get(lpn as usize) {
            Some(&p) if p != UNMAPPED => Some(PageId(p)),
            _ => None,
        }
    }

    #[inline]
    fn set(&mut self, lpn: u32, page: Option<PageId>) -> Option<PageId> {
        let new = page.map_or(UNMAPPED, |p| p.0);
        match self.entries.get_mut(lpn as usize) {
            Some(e) => {
                let old = core::mem::replace(e, new);
                (old != UNMAPPED).then_some(PageId(old))
            }
            None => None,
        }
    }

    fn clear(&mut self) {
        self.entries.fill(UNMAPPED);
    }

    fn export(&self, first: u32, out: &mut [u32]) {
        let f = first as usize;
        match self.entries.get(f..f + out.len()) {
            Some(src) => out.copy_from_slice(src),
            None => out.fill(UNMAPPED),
        }
    }
}

/// A flat or a cached map, chosen at run time (hosts and tests; firmware names its map type).
pub enum AnyMap<'m> {
    /// One word per logical page in RAM.
    Flat(FlatMap<'m>),
    /// Map pages on flash behind a RAM cache.
    Cached(CachedMap<'m>),
}

macro_rules! any_map {
    ($self:expr, $m:ident => $e:expr) => {
        match $self {
            AnyMap::Flat($m) => $e,
            AnyMap::Cached($m) => $e,
        }
    };
}

impl MappingTable for AnyMap<'_> {
    fn len(&self) -> u32 {
        any_map!(self, m => m.len())
    }
    fn get(&self, lpn: u32) -> Option<PageId> {
        any_map!(self, m => m.get(lpn))
    }
    fn set(&mut self, lpn: u32, page: Option<PageId>) -> Option<PageId> {
        any_map!(self, m => m.set(lpn, page))
    }
    fn clear(&mut self) {
        any_map!(self, m => m.clear())
    }
    fn export(&self, first: u32, out: &mut [u32]) {
        any_map!(self, m => m.export(first, out))
    }
    fn section_words(&self) -> u32 {
        any_map!(self, m => m.section_words())
    }
    fn export_section(&self, first: u32, out: &mut [u32]) {
        any_map!(self, m => m.export_section(first, out))
    }
    fn import_section(&mut self, i: u32, w: u32) {
        any_map!(self, m => m.import_section(i, w))
    }
    fn on_flash(&self) -> bool {
        any_map!(self, m => m.on_flash())
    }
    fn fits(&self, geometry: &Geometry) -> bool {
        any_map!(self, m => m.fits(geometry))
    }
    fn ram_bytes(&self) -> usize {
        any_map!(self, m => m.ram_bytes())
    }
    fn need(&mut self, lpn: u32) -> MapNeed {
        any_map!(self, m => m.need(lpn))
    }
    fn need_write(&mut self, lpn: u32) -> MapNeed {
        any_map!(self, m => m.need_write(lpn))
    }
    fn need_group(&mut self, lpns: &[u32]) -> Option<MapNeed> {
        any_map!(self, m => m.need_group(lpns))
    }
    fn map_pages(&self) -> u32 {
        any_map!(self, m => m.map_pages())
    }
    fn dir(&self, i: u32) -> Option<PageId> {
        any_map!(self, m => m.dir(i))
    }
    fn io_buf(&mut self) -> &mut [u8] {
        any_map!(self, m => m.io_buf())
    }
    fn load(&mut self, lpn: u32) {
        any_map!(self, m => m.load(lpn))
    }
    fn merge_dirty(&mut self, i: u32) {
        any_map!(self, m => m.merge_dirty(i))
    }
    fn written(&mut self, i: u32, at: PageId) {
        any_map!(self, m => m.written(i, at))
    }
    fn replay_begin(&mut self) {
        any_map!(self, m => m.replay_begin())
    }
    fn replay_newer(&mut self, i: u32, at: PageId) {
        any_map!(self, m => m.replay_newer(i, at))
    }
    fn replay_pass(&mut self, i: u32, at: PageId) {
        any_map!(self, m => m.replay_pass(i, at))
    }
    fn replay_skips(&self, lpn: u32) -> bool {
        any_map!(self, m => m.replay_skips(lpn))
    }
    fn any_dirty(&self) -> Option<u32> {
        any_map!(self, m => m.any_dirty())
    }
    fn overlay(&mut self, i: u32) {
        any_map!(self, m => m.overlay(i))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_returns_previous_and_clear_unmaps() {
        let mut mem = [0u32; 8];
        let mut m = FlatMap::new(&mut mem);
        m.clear();
        assert_eq!(m.get(3), None);
        assert_eq!(m.set(3, Some(PageId(10))), None);
        assert_eq!(m.set(3, Some(PageId(11))), Some(PageId(10)));
        assert_eq!(m.get(3), Some(PageId(11)));
        assert_eq!(m.set(3, None), Some(PageId(11)));
        assert_eq!(m.get(3), None);
        assert_eq!(m.get(100), None);
        assert_eq!(m.need(3), MapNeed::Ready);
    }
}
