//! The NV cache: page slots in an [`Nvm`] with a persistent directory, and its RAM index.
//!
//! # NVM layout
//!
//! | offset | size | content |
//! |---|---|---|
//! | 0 | 32 | header: magic "NVC1", version, slots, page bytes, data offset, 0, 0, CRC-32C |
//! | 32 | 32 x slots | directory: one entry per slot |
//! | data offset (64-aligned) | page bytes x slots | slot data |
//!
//! A directory entry is `{magic, lpn, sequence (u64), CRC-32C of the slot's data, 0, 0, CRC-32C
//! of the entry}`. An entry is live only if its magic and both CRCs check out; anything else
//! (zeros, a torn write) is a free slot.
//!
//! # Write protocol (power-loss safety without atomic NVM writes)
//! - A slot is filled only while free: its data first, then its entry. A cut in either write
//!   leaves an entry that fails its CRC (the slot stays free); the data of live slots is never
//!   written over.
//! - A slot is freed by zeroing its magic; a torn free leaves a bad CRC, i.e. free too.
//! - The sequence number of an entry is the FTL sequence number of the flash page holding the same
//!   data (the page written with it, or read into it), so mount can tell which of a slot and the
//!   flash mapping is newer (see `cooperate`).
//!
//! # RAM
//! Caller-provided: one [`Slot`] (16 bytes) per slot and a hash index of
//! [`NvCacheLayout::index_words`] `u32` words (the power of two at least twice the slot count,
//! linear probing): `16 * slots + 4 * index_words` bytes, about 24-32 bytes per slot, plus the
//! [`NvCache`] struct itself. Replacement is LRU over a doubly linked list threaded through the
//! slots; the free list reuses the links.

use super::nvm::Nvm;
use crate::crc32c::crc32c;
use crate::Error;

/// Header bytes.
pub const HEADER_LEN: u32 = 32;
/// Directory entry bytes.
pub const ENTRY_LEN: u32 = 32;
const HEADER_MAGIC: u32 = 0x3143_564E; // "NVC1"
const ENTRY_MAGIC: u32 = 0x5452_4E45; // "ENRT"
const VERSION: u32 = 1;
const NIL: u32 = u32::MAX;
const F_LIVE: u32 = 1;
const F_DIRTY: u32 = 2;

/// How the FTL treats the cache.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum NvPolicy {
    /// Cooperative data management: a valid flash page whose data is in the cache is removable,
    /// and GC drops it instead of copying it.
    Cdm,
    /// The talk's NVM-basic: the same cache managed like a volatile LRU cache (GC copies every
    /// valid page).
    Basic,
}

/// What a read miss does with the page it read from flash.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum ReadFill {
    /// Nothing: only writes fill the cache.
    Off,
    /// Cache it, evicting the least recently used slot (the talk's "cache data on access, LRU");
    /// evicting an only copy writes it to flash, so such a read waits for a program.
    Lru,
    /// Cache it only if a slot is free or the least recently used slot is not an only copy:
    /// reads never program flash (only copies are written back by the writes that evict them).
    Clean,
}

/// Runtime settings of the cache (its capacity is the slot count of the memory it is given).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct NvCacheConfig {
    /// CDM or basic.
    pub policy: NvPolicy,
    /// Read misses; default [`ReadFill::Lru`].
    pub read_fill: ReadFill,
    /// Write-back (the talk's second variant; default off = write-through): a host write goes
    /// to the cache only, as the only copy of its page, and reaches flash when it is evicted.
    pub write_back: bool,
}

impl NvCacheConfig {
    /// The defaults for a policy.
    pub const fn new(policy: NvPolicy) -> Self {
        NvCacheConfig { policy, read_fill: ReadFill::Lru, write_back: false }
    }
}

/// RAM state of one slot (16 bytes).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Slot {
    lpn: u32,
    prev: u32,
    next: u32,
    flags: u32,
}

impl Slot {
    /// An unused slot (initial value of the caller's buffer; the cache overwrites it).
    pub const EMPTY: Slot = Slot { lpn: 0, prev: NIL, next: NIL, flags: 0 };
}

/// Sizes of the RAM and NVM a cache of `slots` pages needs.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct NvCacheLayout {
    /// [`Slot`] entries.
    pub slots: usize,
    /// `u32` words of the hash index.
    pub index_words: usize,
}

impl NvCacheLayout {
    /// The layout of a cache of `slots` pages.
    pub const fn new(slots: u32) -> Self {
        let want = if slots == 0 { 2 } else { 2 * slots as usize };
        NvCacheLayout { slots: slots as usize, index_words: want.next_power_of_two() }
    }

    /// RAM in the caller's buffers.
    pub const fn ram_bytes(&self) -> usize {
        self.slots * core::mem::size_of::<Slot>() + self.index_words * 4
    }

    /// Offset of the first slot's data in the NVM.
    pub const fn data_offset(&self) -> u64 {
        let dir = HEADER_LEN as u64 + ENTRY_LEN as u64 * self.slots as u64;
        dir.div_ceil(64) * 64
    }

    /// Bytes of NVM needed for pages of `page_bytes`.
    pub const fn nvm_bytes(&self, page_bytes: u32) -> u64 {
        self.data_offset() + self.slots as u64 * page_bytes as u64
    }
}

/// What the cache did.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct NvCounters {
    /// Host page reads served from the cache.
    pub read_hits: u64,
    /// Host page reads of mapped pages not in the cache.
    pub read_misses: u64,
    /// Host page writes to a page that was cached.
    pub write_hits: u64,
    /// Pages put in the cache by host writes.
    pub write_inserts: u64,
    /// Pages put in the cache on a read miss.
    pub read_fills: u64,
    /// Slots evicted by replacement.
    pub evictions: u64,
    /// Evicted pages whose only copy was in the cache, written to flash first.
    pub write_backs: u64,
    /// Removable valid pages GC dropped instead of copying (CDM only).
    pub gc_drops: u64,
    /// NVM read accesses.
    pub nvm_reads: u64,
    /// NVM bytes read.
    pub nvm_read_bytes: u64,
    /// NVM write accesses.
    pub nvm_writes: u64,
    /// NVM bytes written.
    pub nvm_write_bytes: u64,
    /// Slots the last mount kept.
    pub mount_restored: u64,
    /// Of those, slots holding the only copy of their page.
    pub mount_only_copy: u64,
    /// Slots the last mount found older than flash (freed).
    pub mount_stale: u64,
}

/// A directory entry.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) struct Entry {
    pub lpn: u32,
    pub seq: u64,
    pub data_crc: u32,
}

/// The NV cache: an [`Nvm`], the caller's RAM for its index, and its settings.
pub struct NvCache<'m> {
    nvm: &'m mut (dyn Nvm + Send),
    slots: &'m mut [Slot],
    index: &'m mut [u32],
    cfg: NvCacheConfig,
    page_bytes: u32,
    mru: u32,
    lru: u32,
    free: u32,
    used: u32,
    dirty: u32,
    pub(crate) max_seq: u64,
    pub(crate) counters: NvCounters,
}

fn w32(b: &[u8], i: usize) -> u32 {
    u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]])
}

impl<'m> NvCache<'m> {
    /// A cache over `nvm` with `slots.len()` pages; `index` must have
    /// [`NvCacheLayout::index_words`] words. Nothing is read or written until the FTL formats or
    /// mounts with it.
    pub fn new(
        nvm: &'m mut (dyn Nvm + Send),
        slots: &'m mut [Slot],
        index: &'m mut [u32],
        cfg: NvCacheConfig,
    ) -> Result<Self, Error> {
        let n = slots.len();
        if n == 0 || n >= NIL as usize || index.len() != NvCacheLayout::new(n as u32).index_words {
            return Err(Error::Memory);
        }
        let mut c = NvCache {
            nvm,
            slots,
            index,
            cfg,
            page_bytes: 0,
            mru: NIL,
            lru: NIL,
            free: NIL,
            used: 0,
            dirty: 0,
            max_seq: 0,
            counters: NvCounters::default(),
        };
        c.reset_ram();
        Ok(c)
    }

    /// The settings.
    pub fn config(&self) -> &NvCacheConfig {
        &self.cfg
    }

    /// Capacity in pages.
    pub fn capacity(&self) -> u32 {
        self.slots.len() as u32
    }

    /// Pages cached.
    pub fn len(&self) -> u32 {
        self.used
    }

    /// Whether nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.used == 0
    }

    /// Cached pages whose only copy is in the cache (GC dropped their flash copy).
    pub fn only_copies(&self) -> u32 {
        self.dirty
    }

    /// The counters.
    pub fn counters(&self) -> &NvCounters {
        &self.counters
    }

    /// Zeroes the counters.
    pub fn reset_counters(&mut self) {
        self.counters = NvCounters::default();
    }

    /// Whether `lpn` is cached.
    pub fn contains(&self, lpn: u32) -> bool {
        self.lookup(lpn).is_some()
    }

    fn layout(&self) -> NvCacheLayout {
        NvCacheLayout::new(self.slots.len() as u32)
    }

    /// Fixes the page size and checks the NVM is large enough.
    pub(crate) fn bind(&mut self, page_bytes: u32) -> Result<(), Error> {
        if page_bytes == 0 || self.layout().nvm_bytes(page_bytes) > self.nvm.len() as u64 {
            return Err(Error::Config);
        }
        self.page_bytes = page_bytes;
        Ok(())
    }

    pub(crate) fn slot_count(&self) -> u32 {
        self.slots.len() as u32
    }

    // --- NVM access ------------------------------------------------------------------------

    fn nv_read(&mut self, offset: u64, buf: &mut [u8]) -> Result<(), Error> {
        self.counters.nvm_reads += 1;
        self.counters.nvm_read_bytes += buf.len() as u64;
        self.nvm.read(offset as u32, buf).map_err(Error::Device)
    }

    fn nv_write(&mut self, offset: u64, data: &[u8]) -> Result<(), Error> {
        self.counters.nvm_writes += 1;
        self.counters.nvm_write_bytes += data.len() as u64;
        self.nvm.write(offset as u32, data).map_err(Error::Device)
    }

    fn entry_offset(s: u32) -> u64 {
        HEADER_LEN as u64 + ENTRY_LEN as u64 * s as u64
    }

    fn data_offset_of(&self, s: u32) -> u64 {
        self.layout().data_offset() + self.page_bytes as u64 * s as u64
    }

    fn header(&self) -> [u8; HEADER_LEN as usize] {
        let mut h = [0u8; HEADER_LEN as usize];
        let words = [
            HEADER_MAGIC,
            VERSION,
            self.slots.len() as u32,
            self.page_bytes,
            self.layout().data_offset() as u32,
            0,
            0,
        ];
        for (i, w) in words.iter().enumerate() {
            h[i * 4..i * 4 + 4].copy_from_slice(&w.to_le_bytes());
        }
        let crc = crc32c(&h[..28]);
        h[28..32].copy_from_slice(&crc.to_le_bytes());
        h
    }

    /// Erases the directory (header invalidated first, written last) and empties the RAM state.
    pub(crate) fn format(&mut self) -> Result<(), Error> {
        let zeros = [0u8; 256];
        self.nv_write(0, &zeros[..HEADER_LEN as usize])?;
        let end = Self::entry_offset(self.slots.len() as u32);
        let mut o = HEADER_LEN as u64;
        while o < end {
            let k = (end - o).min(zeros.len() as u64) as usize;
            self.nv_write(o, &zeros[..k])?;
            o += k as u64;
        }
        let h = self.header();
        self.nv_write(0, &h)?;
        self.reset_ram();
        Ok(())
    }

    /// Checks the header: `Ok(false)` if the NVM holds no cache of this shape.
    pub(crate) fn header_ok(&mut self) -> Result<bool, Error> {
        let mut h = [0u8; HEADER_LEN as usize];
        self.nv_read(0, &mut h)?;
        Ok(h == self.header())
    }

    /// Reads slot `s`'s directory entry; `None` if it is not live.
    pub(crate) fn read_entry(&mut self, s: u32) -> Result<Option<Entry>, Error> {
        let mut e = [0u8; ENTRY_LEN as usize];
        self.nv_read(Self::entry_offset(s), &mut e)?;
        if w32(&e, 0) != ENTRY_MAGIC || w32(&e, 28) != crc32c(&e[..28]) {
            return Ok(None);
        }
        Ok(Some(Entry {
            lpn: w32(&e, 4),
            seq: w32(&e, 8) as u64 | (w32(&e, 12) as u64) << 32,
            data_crc: w32(&e, 16),
        }))
    }

    /// Reads slot `s`'s data (`out` is one page).
    pub(crate) fn read_data(&mut self, s: u32, out: &mut [u8]) -> Result<(), Error> {
        let o = self.data_offset_of(s);
        self.nv_read(o, out)
    }

    /// Reads `out.len()` bytes of slot `s`'s data from byte `at`.
    pub(crate) fn read_data_at(&mut self, s: u32, at: u32, out: &mut [u8]) -> Result<(), Error> {
        let o = self.data_offset_of(s) + at as u64;
        self.nv_read(o, out)
    }

    /// Marks slot `s` free in the NVM.
    fn clear_entry(&mut self, s: u32) -> Result<(), Error> {
        self.nv_write(Self::entry_offset(s), &[0u8; 4])
    }

    // --- RAM state ----------------------------------------------------------------------------

    /// Every slot free, index empty.
    pub(crate) fn reset_ram(&mut self) {
        let n = self.slots.len() as u32;
        for (i, s) in self.slots.iter_mut().enumerate() {
            *s =
                Slot { lpn: 0, prev: NIL, next: if i as u32 + 1 < n { i as u32 + 1 } else { NIL }, flags: 0 };
        }
        self.index.fill(NIL);
        self.free = 0;
        self.mru = NIL;
        self.lru = NIL;
        self.used = 0;
        self.dirty = 0;
        self.max_seq = 0;
    }

    fn bucket(&self, lpn: u32) -> usize {
        let bits = self.index.len().trailing_zeros();
        (lpn.wrapping_mul(0x9E37_79B1) as u64 >> (32 - bits)) as usize
    }

    /// The slot holding `lpn`.
    pub(crate) fn lookup(&self, lpn: u32) -> Option<u32> {
        let mask = self.index.len() - 1;
        let mut i = self.bucket(lpn);
        loop {
            let s = self.index[i];
            if s == NIL {
                return None;
            }
            if self.slots[s as usize].lpn == lpn {
                return Some(s);
            }
            i = (i + 1) & mask;
        }
    }

    fn index_insert(&mut self, lpn: u32, s: u32) {
        let mask = self.index.len() - 1;
        let mut i = self.bucket(lpn);
        while self.index[i] != NIL {
            i = (i + 1) & mask;
        }
        self.index[i] = s;
    }

    fn index_remove(&mut self, lpn: u32) {
        let mask = self.index.len() - 1;
        let mut i = self.bucket(lpn);
        loop {
            let s = self.index[i];
            if s == NIL {
                return;
            }
            if self.slots[s as usize].lpn == lpn {
                break;
            }
            i = (i + 1) & mask;
        }
        // Backward-shift deletion keeps every probe chain unbroken.
        let mut j = i;
        loop {
            j = (j + 1) & mask;
            let s = self.index[j];
            if s == NIL {
                break;
            }
            let k = self.bucket(self.slots[s as usize].lpn);
            let between = if i <= j { i < k && k <= j } else { i < k || k <= j };
            if !between {
                self.index[i] = s;
                i = j;
            }
        }
        self.index[i] = NIL;
    }

    fn unlink(&mut self, s: u32) {
        let Slot { prev, next, .. } = self.slots[s as usize];
        if prev == NIL {
            self.mru = next;
        } else {
            self.slots[prev as usize].next = next;
        }
        if next == NIL {
            self.lru = prev;
        } else {
            self.slots[next as usize].prev = prev;
        }
    }

    fn link_mru(&mut self, s: u32) {
        self.slots[s as usize].prev = NIL;
        self.slots[s as usize].next = self.mru;
        if self.mru != NIL {
            self.slots[self.mru as usize].prev = s;
        } else {
            self.lru = s;
        }
        self.mru = s;
    }

    /// Marks slot `s` most recently used.
    pub(crate) fn touch(&mut self, s: u32) {
        if self.mru != s {
            self.unlink(s);
            self.link_mru(s);
        }
    }

    /// Takes a free slot.
    pub(crate) fn take_free(&mut self) -> Option<u32> {
        let s = self.free;
        if s == NIL {
            return None;
        }
        self.free = self.slots[s as usize].next;
        self.slots[s as usize] = Slot::EMPTY;
        Some(s)
    }

    fn give_free(&mut self, s: u32) {
        self.slots[s as usize] = Slot { lpn: 0, prev: NIL, next: self.free, flags: 0 };
        self.free = s;
    }

    /// Whether a slot is free.
    pub(crate) fn has_free(&self) -> bool {
        self.free != NIL
    }

    /// The least recently used slot.
    pub(crate) fn lru(&self) -> Option<u32> {
        (self.lru != NIL).then_some(self.lru)
    }

    /// Whether one of the `k` least recently used slots holds the only copy of its page.
    pub(crate) fn dirty_among_lru(&self, k: usize) -> bool {
        if self.dirty == 0 {
            return false;
        }
        let mut s = self.lru;
        for _ in 0..k {
            if s == NIL {
                return false;
            }
            if self.is_dirty(s) {
                return true;
            }
            s = self.slots[s as usize].prev;
        }
        false
    }

    /// Whether slot `s` holds a page.
    pub(crate) fn is_live(&self, s: u32) -> bool {
        self.slots[s as usize].flags & F_LIVE != 0
    }

    /// Whether slot `s` holds the only copy of its page.
    pub(crate) fn is_dirty(&self, s: u32) -> bool {
        self.slots[s as usize].flags & F_DIRTY != 0
    }

    /// The logical page of slot `s`.
    pub(crate) fn lpn_of(&self, s: u32) -> u32 {
        self.slots[s as usize].lpn
    }

    /// Sets whether slot `s` holds the only copy of its page.
    pub(crate) fn set_dirty(&mut self, s: u32, on: bool) {
        let f = &mut self.slots[s as usize].flags;
        if (*f & F_DIRTY != 0) != on {
            *f ^= F_DIRTY;
            if on {
                self.dirty += 1;
            } else {
                self.dirty -= 1;
            }
        }
    }

    fn adopt(&mut self, s: u32, lpn: u32) {
        self.slots[s as usize] = Slot { lpn, prev: NIL, next: NIL, flags: F_LIVE };
        self.index_insert(lpn, s);
        self.link_mru(s);
        self.used += 1;
    }

    /// Fills the free slot `s` (from [`NvCache::take_free`]) with `lpn`'s `data`: data first,
    /// then the entry. On error the slot goes back to the free list (its entry is not live).
    pub(crate) fn store(&mut self, s: u32, lpn: u32, seq: u64, data: &[u8]) -> Result<(), Error> {
        let r = self.try_store(s, lpn, seq, data);
        match r {
            Ok(()) => self.adopt(s, lpn),
            Err(_) => self.give_free(s),
        }
        r
    }

    fn try_store(&mut self, s: u32, lpn: u32, seq: u64, data: &[u8]) -> Result<(), Error> {
        if data.len() != self.page_bytes as usize {
            return Err(Error::BufferSize);
        }
        let o = self.data_offset_of(s);
        self.nv_write(o, data)?;
        let mut e = [0u8; ENTRY_LEN as usize];
        let words = [ENTRY_MAGIC, lpn, seq as u32, (seq >> 32) as u32, crc32c(data), 0, 0];
        for (i, w) in words.iter().enumerate() {
            e[i * 4..i * 4 + 4].copy_from_slice(&w.to_le_bytes());
        }
        let crc = crc32c(&e[..28]);
        e[28..32].copy_from_slice(&crc.to_le_bytes());
        self.nv_write(Self::entry_offset(s), &e)?;
        self.max_seq = self.max_seq.max(seq);
        Ok(())
    }

    /// Fills the free slot `s` with `lpn`'s `data` as its only copy, replacing `old` (a live slot
    /// of the same page, if any): the new entry is written to the NVM before the old one is
    /// cleared, so a cut in between leaves both, and mount keeps the newer (larger sequence).
    /// On error storing, the slot goes back to the free list and `old` stays.
    pub(crate) fn replace(
        &mut self,
        s: u32,
        old: Option<u32>,
        lpn: u32,
        seq: u64,
        data: &[u8],
    ) -> Result<(), Error> {
        if let Err(e) = self.try_store(s, lpn, seq, data) {
            self.give_free(s);
            return Err(e);
        }
        let cleared = match old {
            Some(o) => self.remove(o),
            None => Ok(()),
        };
        self.adopt(s, lpn);
        self.set_dirty(s, true);
        cleared
    }

    /// Takes a live slot found at mount into the RAM state.
    pub(crate) fn adopt_loaded(&mut self, s: u32, lpn: u32, seq: u64) {
        // Unlink from the free list (it is singly linked: rebuild it at the end of loading).
        self.adopt(s, lpn);
        self.max_seq = self.max_seq.max(seq);
    }

    /// After loading: the free list is every slot not live.
    pub(crate) fn rebuild_free_list(&mut self) {
        self.free = NIL;
        for s in (0..self.slots.len() as u32).rev() {
            if !self.is_live(s) {
                self.slots[s as usize] = Slot { lpn: 0, prev: NIL, next: self.free, flags: 0 };
                self.free = s;
            }
        }
    }

    /// Prepares the RAM state for loading: nothing live, no free list.
    pub(crate) fn begin_load(&mut self) {
        self.reset_ram();
        self.free = NIL;
        for s in self.slots.iter_mut() {
            *s = Slot::EMPTY;
        }
    }

    /// Frees slot `s`: out of the RAM state first (so the cache never serves it again), then out
    /// of the NVM.
    pub(crate) fn remove(&mut self, s: u32) -> Result<(), Error> {
        if self.is_live(s) {
            let lpn = self.slots[s as usize].lpn;
            self.set_dirty(s, false);
            self.index_remove(lpn);
            self.unlink(s);
            self.used -= 1;
            self.give_free(s);
        }
        self.clear_entry(s)
    }

    /// Frees a slot found at mount that is not in the RAM state (a stale duplicate).
    pub(crate) fn discard_loaded(&mut self, s: u32) -> Result<(), Error> {
        self.clear_entry(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cdm::nvm::SliceNvm;

    #[test]
    fn index_survives_inserts_and_removals_in_any_order() {
        let mut bytes = [0u8; 8192];
        let mut nvm = SliceNvm::new(&mut bytes);
        let mut slots = [Slot::EMPTY; 16];
        let mut index = [0u32; 32];
        let mut c =
            NvCache::new(&mut nvm, &mut slots, &mut index, NvCacheConfig::new(NvPolicy::Cdm)).unwrap();
        c.bind(256).unwrap();
        c.format().unwrap();
        let page = [7u8; 256];
        // Keys chosen to collide in a 32-bucket table.
        let keys: [u32; 16] = [0, 32, 64, 96, 1, 33, 5, 1000, 77, 78, 79, 4096, 8192, 3, 35, 67];
        for (i, &k) in keys.iter().enumerate() {
            let s = c.take_free().unwrap();
            c.store(s, k, i as u64, &page).unwrap();
        }
        assert!(c.take_free().is_none());
        for (i, &k) in keys.iter().enumerate() {
            if i % 3 == 0 {
                let s = c.lookup(k).unwrap();
                c.remove(s).unwrap();
            }
        }
        for (i, &k) in keys.iter().enumerate() {
            assert_eq!(c.lookup(k).is_some(), i % 3 != 0, "key {k}");
        }
        assert_eq!(c.len(), 10);
        // LRU order is insertion order among the survivors.
        let lru = c.lru().unwrap();
        assert_eq!(c.lpn_of(lru), keys[1]);
        c.touch(lru);
        assert_eq!(c.lpn_of(c.lru().unwrap()), keys[2]);
    }

    #[test]
    fn entries_round_trip_and_torn_ones_are_free() {
        let mut bytes = [0u8; 8192];
        let mut nvm = SliceNvm::new(&mut bytes);
        let mut slots = [Slot::EMPTY; 4];
        let mut index = [0u32; 8];
        let mut c =
            NvCache::new(&mut nvm, &mut slots, &mut index, NvCacheConfig::new(NvPolicy::Basic)).unwrap();
        c.bind(512).unwrap();
        c.format().unwrap();
        assert!(c.header_ok().unwrap());
        let page = [3u8; 512];
        let s = c.take_free().unwrap();
        c.store(s, 9, 1234, &page).unwrap();
        let e = c.read_entry(s).unwrap().unwrap();
        assert_eq!((e.lpn, e.seq, e.data_crc), (9, 1234, crc32c(&page)));
        // Corrupt one byte of the entry: not live any more.
        let o = NvCache::entry_offset(s) as u32 + 9;
        c.nvm.write(o, &[0xAA]).unwrap();
        assert_eq!(c.read_entry(s).unwrap(), None);
        assert!(c.read_entry(s + 1).unwrap().is_none());
    }

    #[test]
    fn memory_and_nvm_sizes_are_checked() {
        let mut bytes = [0u8; 1024];
        let mut nvm = SliceNvm::new(&mut bytes);
        let mut slots = [Slot::EMPTY; 4];
        let mut index = [0u32; 4];
        let cfg = NvCacheConfig::new(NvPolicy::Cdm);
        assert_eq!(NvCache::new(&mut nvm, &mut slots, &mut index, cfg).err(), Some(Error::Memory));
        let mut index = [0u32; 8];
        let mut c = NvCache::new(&mut nvm, &mut slots, &mut index, cfg).unwrap();
        assert_eq!(c.bind(512), Err(Error::Config));
        assert_eq!(NvCacheLayout::new(4).nvm_bytes(512), 192 + 2048);
    }
}
