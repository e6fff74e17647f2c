//! A write-back SSD cache manager (the FlexECC paper's FlashCache set-up) that turns a plain block
//! trace into the four interfaces the device sees.
//!
//! The cache holds `capacity` pages; slot `i` is the device's logical page `i`. LRU replacement,
//! write-allocate, write-back:
//! * a host read that hits is a **host read** of its slot;
//! * a host read that misses fetches the block from the disk and **clean-writes** it into a slot;
//! * a host write is a **dirty write** into its slot (allocated on a miss, without a disk read:
//!   pages are written whole);
//! * a victim that is dirty is **flush-read** and written to the disk before its slot is reused;
//!   every flush interval, all dirty pages are flush-read and written back (periodic flushing).
//!
//! This module only keeps the cache's state (the map from disk block to slot, LRU order, dirty
//! bits); the simulator issues the device and disk operations it asks for. Memory: a hash map
//! entry per cached block plus 21 bytes per slot.

use std::collections::HashMap;

const NIL: u32 = u32::MAX;

/// What an access found.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Access {
    /// The block is cached in `slot`.
    Hit {
        /// The slot.
        slot: u32,
    },
    /// The block was not cached; it now has `slot`, which held `evicted` before.
    Miss {
        /// The slot.
        slot: u32,
        /// The block evicted from the slot, if any.
        evicted: Option<Evicted>,
    },
}

/// A block evicted to make room.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Evicted {
    /// Its disk block.
    pub block: u64,
    /// Whether it was dirty (it must be flush-read and written back first).
    pub dirty: bool,
}

/// Counters of the cache manager.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Read hits.
    pub read_hits: u64,
    /// Read misses.
    pub read_misses: u64,
    /// Write hits.
    pub write_hits: u64,
    /// Write misses.
    pub write_misses: u64,
    /// Evictions of dirty blocks.
    pub dirty_evictions: u64,
    /// Evictions of clean blocks.
    pub clean_evictions: u64,
}

/// The LRU write-back cache's state.
#[derive(Clone, Debug)]
pub struct CacheManager {
    capacity: u32,
    map: HashMap<u64, u32>,
    block: Vec<u64>,
    dirty: Vec<bool>,
    prev: Vec<u32>,
    next: Vec<u32>,
    /// Most recently used.
    head: u32,
    /// Least recently used.
    tail: u32,
    used: u32,
    dirty_count: u32,
    stats: CacheStats,
}

impl CacheManager {
    /// An empty cache of `capacity` (> 0) pages.
    pub fn new(capacity: u32) -> Self {
        let n = capacity as usize;
        CacheManager {
            capacity,
            map: HashMap::new(),
            block: vec![0; n],
            dirty: vec![false; n],
            prev: vec![NIL; n],
            next: vec![NIL; n],
            head: NIL,
            tail: NIL,
            used: 0,
            dirty_count: 0,
            stats: CacheStats::default(),
        }
    }

    /// Slots.
    pub fn capacity(&self) -> u32 {
        self.capacity
    }

    /// Dirty pages now.
    pub fn dirty_pages(&self) -> u32 {
        self.dirty_count
    }

    /// Counters.
    pub fn stats(&self) -> CacheStats {
        self.stats
    }

    /// Whether the page in `slot` is dirty.
    pub fn is_dirty(&self, slot: u32) -> bool {
        self.dirty.get(slot as usize).copied().unwrap_or(false)
    }

    fn unlink(&mut self, s: u32) {
        let (p, n) = (self.prev[s as usize], self.next[s as usize]);
        if p != NIL {
            self.next[p as usize] = n;
        } else {
            self.head = n;
        }
        if n != NIL {
            self.prev[n as usize] = p;
        } else {
            self.tail = p;
        }
    }

    fn push_front(&mut self, s: u32) {
        self.prev[s as usize] = NIL;
        self.next[s as usize] = self.head;
        if self.head != NIL {
            self.prev[self.head as usize] = s;
        }
        self.head = s;
        if self.tail == NIL {
            self.tail = s;
        }
    }

    fn set_dirty(&mut self, s: u32, d: bool) {
        let cur = &mut self.dirty[s as usize];
        if *cur != d {
            *cur = d;
            if d {
                self.dirty_count += 1;
            } else {
                self.dirty_count -= 1;
            }
        }
    }

    /// A host access to disk block `block` (`write`: a write). Makes it most recently used and,
    /// for a write, dirty.
    pub fn access(&mut self, block: u64, write: bool) -> Access {
        if let Some(&s) = self.map.get(&block) {
            self.unlink(s);
            self.push_front(s);
            if write {
                self.stats.write_hits += 1;
                self.set_dirty(s, true);
            } else {
                self.stats.read_hits += 1;
            }
            return Access::Hit { slot: s };
        }
        if write {
            self.stats.write_misses += 1;
        } else {
            self.stats.read_misses += 1;
        }
        let (slot, evicted) = if self.used < self.capacity {
            self.used += 1;
            (self.used - 1, None)
        } else {
            let s = self.tail;
            self.unlink(s);
            let old = self.block[s as usize];
            self.map.remove(&old);
            let dirty = self.dirty[s as usize];
            if dirty {
                self.stats.dirty_evictions += 1;
            } else {
                self.stats.clean_evictions += 1;
            }
            (s, Some(Evicted { block: old, dirty }))
        };
        self.block[slot as usize] = block;
        self.map.insert(block, slot);
        self.set_dirty(slot, write);
        self.push_front(slot);
        Access::Miss { slot, evicted }
    }

    /// The dirty slots, least recently used first, for a periodic flush.
    pub fn dirty_slots(&self) -> Vec<u32> {
        let mut out = Vec::with_capacity(self.dirty_count as usize);
        let mut s = self.tail;
        while s != NIL {
            if self.dirty[s as usize] {
                out.push(s);
            }
            s = self.prev[s as usize];
        }
        out
    }

    /// Marks `slot` clean (its data was written back).
    pub fn mark_clean(&mut self, slot: u32) {
        if (slot as usize) < self.dirty.len() {
            self.set_dirty(slot, false);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lru_write_back_against_a_simple_model() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(5);
        let cap = 8u32;
        let mut c = CacheManager::new(cap);
        // Model: a vector of (block, dirty), most recent first.
        let mut m: Vec<(u64, bool)> = Vec::new();
        let mut slot_of: HashMap<u64, u32> = HashMap::new();
        for _ in 0..5000 {
            let b = rng.random_range(0..20u64);
            let w = rng.random_bool(0.3);
            if rng.random_bool(0.02) {
                for s in c.dirty_slots() {
                    c.mark_clean(s);
                }
                m.iter_mut().for_each(|e| e.1 = false);
                continue;
            }
            let r = c.access(b, w);
            if let Some(i) = m.iter().position(|e| e.0 == b) {
                let (_, d) = m.remove(i);
                m.insert(0, (b, d || w));
                assert_eq!(r, Access::Hit { slot: slot_of[&b] });
            } else {
                let ev = if m.len() as u32 == cap { m.pop() } else { None };
                m.insert(0, (b, w));
                match r {
                    Access::Miss { slot, evicted } => {
                        assert_eq!(evicted.map(|e| (e.block, e.dirty)), ev);
                        if let Some((old, _)) = ev {
                            assert_eq!(slot_of.remove(&old), Some(slot));
                        }
                        slot_of.insert(b, slot);
                    }
                    other => panic!("{other:?}"),
                }
            }
            assert_eq!(c.dirty_pages() as usize, m.iter().filter(|e| e.1).count());
            let mut want: Vec<u32> = m.iter().rev().filter(|e| e.1).map(|e| slot_of[&e.0]).collect();
            let mut got = c.dirty_slots();
            assert_eq!(got, want);
            got.sort();
            want.sort();
            assert!(got.iter().all(|&s| c.is_dirty(s)));
        }
    }
}
