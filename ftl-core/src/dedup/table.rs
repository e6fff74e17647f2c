//! A fixed-capacity hash table from `u32` keys to small values, in caller memory (open
//! addressing, linear probing, backward-shift deletion, no tombstones).
//!
//! Used by the secondary map (physical page -> virtual page, so GC and recovery find the virtual
//! entry of a shared page) and by fingerprint indexes (location -> fingerprint, so an index entry
//! can be moved or dropped when the FTL moves or frees its page).
//!
//! Guarantees: no allocation, no panics; `insert` fails (returns `false`) instead of growing; a
//! table whose slot count is a power of two at least one more than the keys it holds always
//! terminates its probes. Key `u32::MAX` is reserved (it marks an empty slot).

/// One slot: a key ([`EMPTY_KEY`] when free) and its value.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Slot<V> {
    /// The key, or [`EMPTY_KEY`].
    pub key: u32,
    /// The value (meaningless in an empty slot).
    pub value: V,
}

/// The key of an empty slot.
pub const EMPTY_KEY: u32 = u32::MAX;

/// A hash table over caller slots.
pub struct KeyTable<'a, V: Copy> {
    slots: &'a mut [Slot<V>],
    len: usize,
}

impl<'a, V: Copy> KeyTable<'a, V> {
    /// A table over `slots` (contents overwritten), or `None` unless their number is a power of
    /// two (zero slots is allowed: a table that holds nothing).
    pub fn new(slots: &'a mut [Slot<V>]) -> Option<Self> {
        if !slots.is_empty() && !slots.len().is_power_of_two() {
            return None;
        }
        let mut t = KeyTable { slots, len: 0 };
        t.clear();
        Some(t)
    }

    /// A table with no slots (holds nothing).
    pub fn empty() -> KeyTable<'static, V> {
        KeyTable { slots: &mut [], len: 0 }
    }

    /// Removes every key.
    pub fn clear(&mut self) {
        for s in self.slots.iter_mut() {
            s.key = EMPTY_KEY;
        }
        self.len = 0;
    }

    /// Keys held.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no key is held.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Most keys the table takes (one slot always stays free).
    pub fn capacity(&self) -> usize {
        self.slots.len().saturating_sub(1)
    }

    fn home(&self, key: u32) -> usize {
        let h = key.wrapping_mul(0x9E37_79B1) as usize;
        h & (self.slots.len() - 1)
    }

    fn find(&self, key: u32) -> Option<usize> {
        if self.slots.is_empty() || key == EMPTY_KEY {
            return None;
        }
        let mask = self.slots.len() - 1;
        let mut i = self.home(key);
        for _ in 0..self.slots.len() {
            let k = self.slots[i].key;
            if k == key {
                return Some(i);
            }
            if k == EMPTY_KEY {
                return None;
            }
            i = (i + 1) & mask;
        }
        None
    }

    /// The value of `key`.
    pub fn get(&self, key: u32) -> Option<V> {
        self.find(key).map(|i| self.slots[i].value)
    }

    /// Sets the value of `key` (inserting it); false if the table is full or the key reserved.
    pub fn insert(&mut self, key: u32, value: V) -> bool {
        if key == EMPTY_KEY || self.slots.is_empty() {
            return false;
        }
        if let Some(i) = self.find(key) {
            self.slots[i].value = value;
            return true;
        }
        if self.len >= self.capacity() {
            return false;
        }
        let mask = self.slots.len() - 1;
        let mut i = self.home(key);
        while self.slots[i].key != EMPTY_KEY {
            i = (i + 1) & mask;
        }
        self.slots[i] = Slot { key, value };
        self.len += 1;
        true
    }

    /// Removes `key` and returns its value.
    pub fn remove(&mut self, key: u32) -> Option<V> {
        let mut hole = self.find(key)?;
        let value = self.slots[hole].value;
        let mask = self.slots.len() - 1;
        let mut j = hole;
        loop {
            j = (j + 1) & mask;
            let k = self.slots[j].key;
            if k == EMPTY_KEY {
                break;
            }
            // Move the entry at j into the hole unless its home lies cyclically in (hole, j].
            let home = self.home(k);
            let stays = if hole <= j { hole < home && home <= j } else { hole < home || home <= j };
            if !stays {
                self.slots[hole] = self.slots[j];
                hole = j;
            }
        }
        self.slots[hole].key = EMPTY_KEY;
        self.len -= 1;
        Some(value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_a_model_under_churn() {
        let mut slots = [Slot { key: 0, value: 0u32 }; 64];
        let mut t = KeyTable::new(&mut slots).unwrap();
        let mut model: [Option<u32>; 200] = [None; 200];
        let mut x = 12345u32;
        for step in 0..20_000u32 {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            let key = x % 200;
            if x & 0x100 != 0 {
                let ok = t.insert(key, step);
                if model[key as usize].is_some() || model.iter().flatten().count() < 63 {
                    assert!(ok);
                    model[key as usize] = Some(step);
                } else {
                    assert!(!ok);
                }
            } else {
                assert_eq!(t.remove(key), model[key as usize].take());
            }
            for (k, m) in model.iter().enumerate() {
                assert_eq!(t.get(k as u32), *m, "key {k} at step {step}");
            }
            assert_eq!(t.len(), model.iter().flatten().count());
        }
        assert!(KeyTable::new(&mut [Slot { key: 0, value: 0u8 }; 3]).is_none());
        assert!(!KeyTable::<u8>::new(&mut []).unwrap().insert(1, 1));
    }
}
