//! The secondary map of two-level mapping: virtual page -> {physical page, reference count}, in
//! caller memory, with a reverse index physical page -> virtual page.
//!
//! A logical page that shares its content with others maps (in the primary map) to a virtual page
//! number with the most significant bit set ([`VIRTUAL_FLAG`]); the virtual entry holds the
//! physical page and the exact number of logical pages that reference it. GC relocates a shared
//! page by changing one virtual entry; the reverse index lets GC and recovery find that entry from
//! the physical page. A virtual entry is freed, and its physical page reclaimed, only when its
//! count reaches zero (the FTL's business: [`VirtualMap::release`] says when).
//!
//! Virtual page numbers are RAM-only identities: on flash (checkpoint, journal, relocation pages)
//! shared content is always named by its physical page, and mount assigns fresh virtual numbers.
//!
//! RAM: `8 * V` bytes of entries plus `8 * S` bytes of reverse-index slots, S a power of two
//! greater than V (2 V recommended), for at most V shared contents at once.

use super::table::{KeyTable, Slot};

/// The flag (most significant bit) of a primary-map word that names a virtual page.
pub const VIRTUAL_FLAG: u32 = 1 << 31;

/// Reference count of a free entry.
const FREE: u32 = u32::MAX;
const NIL: u32 = u32::MAX;

/// One virtual page: its physical page and the logical pages referencing it.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct VirtualEntry {
    /// Physical page (or, while free, the next free entry).
    pub page: u32,
    /// Referencing logical pages (`u32::MAX` while free).
    pub refs: u32,
}

impl VirtualEntry {
    /// An entry as the caller's memory may start (contents are overwritten).
    pub const EMPTY: VirtualEntry = VirtualEntry { page: 0, refs: 0 };
}

/// The secondary map.
pub struct VirtualMap<'m> {
    entries: &'m mut [VirtualEntry],
    rev: KeyTable<'m, u32>,
    free_head: u32,
    in_use: usize,
}

impl<'m> VirtualMap<'m> {
    /// A map of no entries (dedup not attached).
    pub fn none() -> VirtualMap<'static> {
        VirtualMap { entries: &mut [], rev: KeyTable::empty(), free_head: NIL, in_use: 0 }
    }

    /// A map over `entries` with reverse-index `slots`; `None` unless `slots.len()` is a power of
    /// two greater than `entries.len()` and the entries are fewer than 2^31 - 1.
    pub fn new(entries: &'m mut [VirtualEntry], slots: &'m mut [Slot<u32>]) -> Option<Self> {
        if slots.len() <= entries.len() || entries.len() >= (VIRTUAL_FLAG - 1) as usize {
            return None;
        }
        let rev = KeyTable::new(slots)?;
        let mut m = VirtualMap { entries, rev, free_head: NIL, in_use: 0 };
        m.clear();
        Some(m)
    }

    /// Frees every entry.
    pub fn clear(&mut self) {
        let n = self.entries.len() as u32;
        for (i, e) in self.entries.iter_mut().enumerate() {
            *e = VirtualEntry { page: if i as u32 + 1 < n { i as u32 + 1 } else { NIL }, refs: FREE };
        }
        self.free_head = if n == 0 { NIL } else { 0 };
        self.rev.clear();
        self.in_use = 0;
    }

    /// Entries (the most shared contents at once).
    pub fn capacity(&self) -> usize {
        self.entries.len()
    }

    /// Entries in use.
    pub fn in_use(&self) -> usize {
        self.in_use
    }

    /// The entry of `v`, if allocated.
    pub fn get(&self, v: u32) -> Option<VirtualEntry> {
        self.entries.get(v as usize).copied().filter(|e| e.refs != FREE)
    }

    /// The physical page of `v`, if allocated.
    pub fn page(&self, v: u32) -> Option<u32> {
        self.get(v).map(|e| e.page)
    }

    /// The virtual page whose physical page is `page`.
    pub fn find(&self, page: u32) -> Option<u32> {
        self.rev.get(page)
    }

    /// Allocates an entry for `page` with no references; `None` when every entry is in use.
    pub fn alloc(&mut self, page: u32) -> Option<u32> {
        let v = self.free_head;
        let e = self.entries.get_mut(v as usize)?;
        if !self.rev.insert(page, v) {
            return None;
        }
        self.free_head = e.page;
        *e = VirtualEntry { page, refs: 0 };
        self.in_use += 1;
        Some(v)
    }

    /// Frees `v` (its page leaves the reverse index).
    pub fn free(&mut self, v: u32) {
        let head = self.free_head;
        let Some(e) = self.entries.get_mut(v as usize).filter(|e| e.refs != FREE) else { return };
        let page = e.page;
        *e = VirtualEntry { page: head, refs: FREE };
        self.free_head = v;
        self.in_use -= 1;
        if self.rev.get(page) == Some(v) {
            self.rev.remove(page);
        }
    }

    /// Moves `v` to physical page `page`.
    pub fn set_page(&mut self, v: u32, page: u32) {
        let Some(e) = self.entries.get_mut(v as usize).filter(|e| e.refs != FREE) else { return };
        let old = core::mem::replace(&mut e.page, page);
        if self.rev.get(old) == Some(v) {
            self.rev.remove(old);
        }
        // Cannot fail: the slot of `old` was just released (or `page` is present already).
        self.rev.insert(page, v);
    }

    /// Counts one more reference to `v`; returns the new count.
    pub fn acquire(&mut self, v: u32) -> u32 {
        match self.entries.get_mut(v as usize).filter(|e| e.refs != FREE) {
            Some(e) => {
                e.refs = e.refs.saturating_add(1).min(FREE - 1);
                e.refs
            }
            None => 0,
        }
    }

    /// Counts one reference fewer to `v` (the entry stays allocated at zero); returns the new
    /// count.
    pub fn release(&mut self, v: u32) -> u32 {
        match self.entries.get_mut(v as usize).filter(|e| e.refs != FREE) {
            Some(e) => {
                e.refs = e.refs.saturating_sub(1);
                e.refs
            }
            None => 0,
        }
    }

    /// Every allocated entry, as (virtual page, entry).
    pub fn iter(&self) -> impl Iterator<Item = (u32, VirtualEntry)> + '_ {
        self.entries.iter().enumerate().filter(|(_, e)| e.refs != FREE).map(|(i, e)| (i as u32, *e))
    }

    /// Frees every allocated entry with no references.
    pub fn free_unreferenced(&mut self) {
        for v in 0..self.entries.len() as u32 {
            if self.entries[v as usize].refs == 0 {
                self.free(v);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alloc_find_move_free() {
        let mut e = [VirtualEntry::EMPTY; 3];
        let mut s = [Slot { key: 0, value: 0 }; 8];
        let mut m = VirtualMap::new(&mut e, &mut s).unwrap();
        let a = m.alloc(100).unwrap();
        let b = m.alloc(200).unwrap();
        let c = m.alloc(300).unwrap();
        assert_eq!(m.alloc(400), None);
        assert_eq!((m.find(100), m.find(200), m.find(300)), (Some(a), Some(b), Some(c)));
        assert_eq!(m.acquire(b), 1);
        assert_eq!(m.acquire(b), 2);
        m.set_page(b, 250);
        assert_eq!((m.find(200), m.find(250), m.page(b)), (None, Some(b), Some(250)));
        assert_eq!(m.release(b), 1);
        m.free_unreferenced();
        assert_eq!((m.get(a), m.get(c), m.in_use()), (None, None, 1));
        assert_eq!(m.find(100), None);
        let d = m.alloc(500).unwrap();
        assert!(d == a || d == c);
        assert_eq!(m.get(b), Some(VirtualEntry { page: 250, refs: 1 }));
        m.free(b);
        assert_eq!((m.find(250), m.get(b), m.in_use()), (None, None, 1));
    }
}
