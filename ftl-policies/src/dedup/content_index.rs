//! [`CaftlIndex`]: the CAFTL fingerprint store behind the core's
//! [`ContentIndex`](ftl_core::dedup::ContentIndex) seam, which the FTL's deduplicating write path,
//! GC and mount call.
//!
//! It combines the [`FingerprintStore`] (fingerprints and the CRC pre-hash table), a
//! [`Fingerprinter`] (CRC-32 first, SHA-1 only on a CRC hit, when pre-hashing is on) and a
//! location table (location -> fingerprint) so the FTL can name an entry by its location when it
//! moves a page (GC, a unique page becoming shared) or frees one: the store never holds a location
//! that does not hold its content. An entry the location table cannot take is not kept.
//!
//! Hotness: a probe that finds a duplicate counts one reference on the entry (the paper's 8-bit
//! reference counter, which decides what the store keeps when full); references are not counted
//! down (the FTL's secondary map has the exact counts).
//!
//! RAM: the store's memory plus `24 * S` bytes of location slots (S a power of two greater than
//! the store's entry capacity).

use ftl_core::dedup::table::{KeyTable, Slot};
use ftl_core::dedup::{ContentIndex, ContentKey, ContentProbe};

use super::fingerprint::{crc32_page, Fingerprint, FingerprintStats, Fingerprinter, Probe};
use super::index::{DedupIndex, Entry, InsertOutcome, Location};
use super::sampling::sample_index;
use super::store::{FingerprintStore, ENTRIES_4K};

/// Why [`CaftlIndex::new`] refused its location table.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct LocationSlotsError;

/// The CAFTL fingerprint store as the FTL's content index.
pub struct CaftlIndex<'a, const K: usize = ENTRIES_4K> {
    store: FingerprintStore<'a, K>,
    fingerprinter: Fingerprinter,
    locations: KeyTable<'a, Fingerprint>,
}

impl<'a, const K: usize> CaftlIndex<'a, K> {
    /// An index over `store`, pre-hashing if `prehash` (and the store has a pre-hash table),
    /// with `slots` for the location table: a power of two greater than the store's capacity.
    pub fn new(
        store: FingerprintStore<'a, K>,
        prehash: bool,
        slots: &'a mut [Slot<Fingerprint>],
    ) -> Result<Self, LocationSlotsError> {
        if slots.len() <= store.capacity() {
            return Err(LocationSlotsError);
        }
        let locations = KeyTable::new(slots).ok_or(LocationSlotsError)?;
        let mut ix = CaftlIndex { store, fingerprinter: Fingerprinter::new(prehash), locations };
        ix.clear();
        Ok(ix)
    }

    /// The fingerprint store.
    pub fn store(&self) -> &FingerprintStore<'a, K> {
        &self.store
    }

    /// The fingerprint store, mutably (e.g. for idle-time reorganisation).
    pub fn store_mut(&mut self) -> &mut FingerprintStore<'a, K> {
        &mut self.store
    }

    /// Hashing work counters.
    pub fn fingerprint_stats(&self) -> FingerprintStats {
        self.fingerprinter.stats()
    }

    /// Turns pre-hashing on or off.
    pub fn set_prehash(&mut self, on: bool) {
        self.fingerprinter.set_prehash(on);
    }

    /// Entries resident.
    pub fn len(&self) -> usize {
        self.store.len()
    }

    /// Whether no entry is resident.
    pub fn is_empty(&self) -> bool {
        self.store.is_empty()
    }

    fn drop_entry(&mut self, e: &Entry) {
        self.locations.remove(e.location.raw());
    }
}

fn key(fingerprint: Fingerprint, crc: u32) -> ContentKey {
    ContentKey { fingerprint: fingerprint.0, crc, hashed: true }
}

impl<const K: usize> ContentIndex for CaftlIndex<'_, K> {
    fn probe(&mut self, page: &[u8]) -> ContentProbe {
        match self.fingerprinter.probe(&mut self.store, page) {
            Probe::CrcMiss { crc } => {
                ContentProbe::Miss(ContentKey { fingerprint: [0; 20], crc, hashed: false })
            }
            Probe::Unique { fingerprint, crc } => ContentProbe::Miss(key(fingerprint, crc)),
            Probe::Duplicate { fingerprint, crc, location, .. } => {
                self.store.add_ref(&fingerprint);
                ContentProbe::Hit { key: key(fingerprint, crc), location: location.raw() }
            }
        }
    }

    fn fingerprint(&mut self, page: &[u8]) -> ContentKey {
        let crc = if self.store.prehash_enabled() { crc32_page(page) } else { 0 };
        key(self.fingerprinter.fingerprint(page), crc)
    }

    fn sample(&self, unit: &[u8], page_bytes: usize) -> usize {
        if page_bytes == 0 {
            return 0;
        }
        sample_index(unit.chunks_exact(page_bytes)).unwrap_or(0)
    }

    fn insert(&mut self, k: &ContentKey, location: u32) {
        if !k.hashed {
            return;
        }
        let fingerprint = Fingerprint(k.fingerprint);
        // A location holds one content: whatever the table says is there is gone.
        self.invalidated(location);
        let entry = Entry { fingerprint, crc: k.crc, location: Location::from_raw(location), hotness: 1 };
        match self.store.insert(entry) {
            InsertOutcome::Inserted => {}
            InsertOutcome::Replaced(old) => self.drop_entry(&old),
            _ => return,
        }
        if !self.locations.insert(location, fingerprint) {
            self.store.remove(&fingerprint);
        }
    }

    fn forget(&mut self, k: &ContentKey) {
        if let Some(e) = self.store.remove(&Fingerprint(k.fingerprint)) {
            self.drop_entry(&e);
        }
    }

    fn moved(&mut self, from: u32, to: u32) {
        if let Some(fp) = self.locations.remove(from) {
            self.invalidated(to);
            if self.store.update_location(&fp, Location::from_raw(to)) && !self.locations.insert(to, fp) {
                self.store.remove(&fp);
            }
        }
    }

    fn invalidated(&mut self, location: u32) {
        if let Some(fp) = self.locations.remove(location) {
            self.store.remove(&fp);
        }
    }

    fn clear(&mut self) {
        self.store.clear();
        self.locations.clear();
    }

    fn hashing(&self) -> (u64, u64) {
        let s = self.fingerprinter.stats();
        (s.crcs, s.sha1s)
    }
}
