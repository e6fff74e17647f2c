//! The logical-to-physical map, behind the [`MappingTable`] trait so that a cached,
//! flash-resident map can replace the flat one.
//!
//! [`FlatMap`] keeps one `u32` per logical page in caller memory (`4 * logical_pages` bytes);
//! [`UNMAPPED`] marks a page that was never written or was trimmed.

use nand_hal::PageId;

/// The map entry of a logical page with no physical page.
pub const UNMAPPED: u32 = u32::MAX;

/// Logical page -> physical page.
pub trait MappingTable {
    /// Logical pages covered.
    fn len(&self) -> u32;
    /// Whether the map covers no page.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The physical page of `lpn` (which must be `< len()`), if mapped.
    fn get(&self, lpn: u32) -> Option<PageId>;
    /// Sets the physical page of `lpn` (which must be `< len()`) and returns the previous one.
    fn set(&mut self, lpn: u32, page: Option<PageId>) -> Option<PageId>;
    /// Unmaps every logical page.
    fn clear(&mut self);
    /// Copies the raw entries (`UNMAPPED` for none) of `out.len()` logical pages from `first`,
    /// for checkpoints. The default goes through [`MappingTable::get`].
    fn export(&self, first: u32, out: &mut [u32]) {
        for (i, o) in out.iter_mut().enumerate() {
            *o = self.get(first + i as u32).map_or(UNMAPPED, |p| p.0);
        }
    }
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
    }
}
