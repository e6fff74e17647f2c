//! The CRC pre-hash index: CRC-32 -> number of resident fingerprint-store entries with that CRC.
//!
//! Why it exists. For the paper's light-weight pre-hashing, "we maintain an extra 32-bit CRC32
//! hash value for each fingerprint in the fingerprint store. For a page, we first compute a
//! CRC32 hash value and query the fingerprint store"; only on a match is the SHA-1 computed.
//! The store is organised by SHA-1 (segment = fingerprint mod N, buckets sorted by
//! fingerprint), so it cannot be searched by CRC: without a CRC-keyed structure the query would
//! scan every entry. The paper does not say how the query is answered; this module is our
//! answer. It rejects a Bloom filter for the same reasons the paper gives (several hash
//! functions, no deletion) and keeps an exact count instead, so removal and replacement are
//! supported and a miss is certain: `contains(c) == false` exactly when no resident entry has
//! CRC `c`. Nothing is stored per CRC but the count, so a hit only says "maybe": the SHA-1 and
//! the store lookup decide.
//!
//! Structure. Open addressing with linear probing over caller memory ([`CrcSlot`], 8 bytes):
//! key 0 marks an empty slot (the count of CRC 0 is kept apart), removal shifts the following
//! cluster back (no tombstones, so probe lengths do not degrade over time). The table needs a
//! power-of-two number of slots greater than the number of distinct CRCs it will hold (the store
//! requires more than its entry capacity); at most half full, a miss probes about 2.5 slots on
//! average. Memory: 8 bytes x slots, e.g. 16 MiB for 2^21 slots, enough for a million entries.
//! The home slot is a multiplicative hash of the CRC, so adversarially chosen CRCs cost probe
//! length, never correctness.
//!
//! Guarantees: no allocation, no panics, no floating point; every operation's probe sequence is
//! bounded by the table size.

/// One slot of a [`CrcIndex`]; initialise caller memory with [`CrcSlot::EMPTY`].
#[derive(Copy, Clone, PartialEq, Eq, Debug, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct CrcSlot {
    key: u32,
    count: u32,
}

impl CrcSlot {
    /// An empty slot.
    pub const EMPTY: CrcSlot = CrcSlot { key: 0, count: 0 };
}

/// Counts of resident entries per CRC-32, in caller memory (see the module documentation).
pub struct CrcIndex<'a> {
    slots: &'a mut [CrcSlot],
    mask: usize,
    zero: u32,
    used: usize,
}

impl<'a> CrcIndex<'a> {
    /// An empty index over `slots`, which must be empty (no index: [`contains`](Self::contains)
    /// always answers `true`) or a power of two long; `None` otherwise.
    pub fn new(slots: &'a mut [CrcSlot]) -> Option<Self> {
        if !slots.is_empty() && !slots.len().is_power_of_two() {
            return None;
        }
        slots.fill(CrcSlot::EMPTY);
        let mask = slots.len().wrapping_sub(1);
        Some(CrcIndex { slots, mask, zero: 0, used: 0 })
    }

    /// Whether the index has a table (it can answer `false`).
    pub fn is_enabled(&self) -> bool {
        !self.slots.is_empty()
    }

    /// Slots in the table.
    pub fn slots(&self) -> usize {
        self.slots.len()
    }

    /// Distinct non-zero CRCs held (occupied slots).
    pub fn distinct(&self) -> usize {
        self.used
    }

    /// Empties the index.
    pub fn clear(&mut self) {
        self.slots.fill(CrcSlot::EMPTY);
        self.zero = 0;
        self.used = 0;
    }

    #[inline]
    fn home(&self, crc: u32) -> usize {
        let h = crc.wrapping_mul(0x9E37_79B1);
        (h ^ (h >> 15)) as usize & self.mask
    }

    /// The slot holding `crc` (non-zero), or the empty slot where it would go.
    #[inline]
    fn probe(&self, crc: u32) -> Result<usize, Option<usize>> {
        let mut i = self.home(crc);
        for _ in 0..self.slots.len() {
            match self.slots.get(i) {
                Some(s) if s.key == crc => return Ok(i),
                Some(s) if s.key == 0 => return Err(Some(i)),
                Some(_) => i = (i + 1) & self.mask,
                None => return Err(None),
            }
        }
        Err(None)
    }

    /// `false` only if no resident entry has CRC `crc`; always `true` without a table.
    #[inline]
    pub fn contains(&self, crc: u32) -> bool {
        if !self.is_enabled() {
            return true;
        }
        if crc == 0 {
            return self.zero > 0;
        }
        self.probe(crc).is_ok()
    }

    /// Resident entries with CRC `crc` (0 without a table).
    pub fn count(&self, crc: u32) -> u32 {
        if crc == 0 {
            return self.zero;
        }
        match self.probe(crc) {
            Ok(i) => self.slots.get(i).map_or(0, |s| s.count),
            Err(_) => 0,
        }
    }

    /// Counts one more entry with CRC `crc`. Returns `false` (and changes nothing) if the table
    /// would have no empty slot left, or the count would overflow; `true` without a table.
    pub fn add(&mut self, crc: u32) -> bool {
        if !self.is_enabled() {
            return true;
        }
        if crc == 0 {
            return match self.zero.checked_add(1) {
                Some(z) => {
                    self.zero = z;
                    true
                }
                None => false,
            };
        }
        match self.probe(crc) {
            Ok(i) => match self.slots.get_mut(i) {
                Some(s) if s.count < u32::MAX => {
                    s.count += 1;
                    true
                }
                _ => false,
            },
            Err(Some(i)) if self.used + 1 < self.slots.len() => match self.slots.get_mut(i) {
                Some(s) => {
                    *s = CrcSlot { key: crc, count: 1 };
                    self.used += 1;
                    true
                }
                None => false,
            },
            Err(_) => false,
        }
    }

    /// Counts one entry with CRC `crc` fewer. Returns `false` if none was counted.
    pub fn remove(&mut self, crc: u32) -> bool {
        if !self.is_enabled() {
            return true;
        }
        if crc == 0 {
            if self.zero == 0 {
                return false;
            }
            self.zero -= 1;
            return true;
        }
        let Ok(i) = self.probe(crc) else { return false };
        let Some(s) = self.slots.get_mut(i) else { return false };
        s.count -= 1;
        if s.count == 0 {
            self.delete_slot(i);
        }
        true
    }

    /// Empties slot `hole` and shifts the rest of its cluster back so every key stays reachable
    /// from its home slot.
    fn delete_slot(&mut self, mut hole: usize) {
        let mut j = hole;
        for _ in 0..self.slots.len() {
            j = (j + 1) & self.mask;
            let Some(&s) = self.slots.get(j) else { break };
            if s.key == 0 {
                break;
            }
            let h = self.home(s.key);
            // The key at j may fill the hole unless its home lies cyclically in (hole, j].
            let stays = if hole <= j { hole < h && h <= j } else { hole < h || h <= j };
            if !stays {
                if let Some(d) = self.slots.get_mut(hole) {
                    *d = s;
                }
                hole = j;
            }
        }
        if let Some(d) = self.slots.get_mut(hole) {
            *d = CrcSlot::EMPTY;
        }
        self.used -= 1;
    }
}
