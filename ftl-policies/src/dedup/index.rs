//! The interface between the FTL's write path and a fingerprint index: [`DedupIndex`], and the
//! values it trades in ([`Location`], [`Entry`], [`Hit`], [`InsertOutcome`]).
//!
//! The FTL will hold one `DedupIndex` (in practice a
//! [`FingerprintStore`](super::store::FingerprintStore)) and call it in this order for a
//! buffered page (see [`Fingerprinter::probe`](super::fingerprint::Fingerprinter::probe), which
//! performs the first three steps):
//!
//! 1. [`DedupIndex::may_contain_crc`] with the page's CRC-32 (pre-hash). `false` means no
//!    resident entry has that content, so the SHA-1 is skipped and the page is written;
//! 2. [`DedupIndex::lookup`] with the SHA-1 fingerprint;
//! 3. on a hit, the FTL maps the logical page to the hit's [`Location`] (turning a physical page
//!    into a shared, virtual one the first time: [`DedupIndex::update_location`]) and counts the
//!    new reference ([`DedupIndex::add_ref`]); on a miss it writes the page and
//!    [`DedupIndex::insert`]s its fingerprint with the new physical location;
//! 4. when GC relocates a unique page it calls [`DedupIndex::update_location`]; a relocated
//!    shared page keeps its virtual location (only the virtual entry changes), so nothing is
//!    called; when a logical page stops referencing content it calls [`DedupIndex::drop_ref`],
//!    and when the physical page is reclaimed (its exact reference count, kept by the FTL's
//!    secondary map, reached zero) [`DedupIndex::remove`].
//!
//! The index is a cache of the most referenced fingerprints, not a complete record: an insert may
//! be declined or may evict another entry, and a miss only means "not resident". The 8-bit
//! hotness it keeps per entry is the paper's reference counter, used to decide what stays; the
//! exact reference count belongs to the FTL's secondary map.
//!
//! Guarantees: plain data and a trait; no allocation, no panics, no floating point.

use super::fingerprint::Fingerprint;

/// Where the content of a fingerprint lives: a physical page, or a virtual page (an entry of the
/// FTL's secondary map, itself pointing at the physical page and holding the exact reference
/// count), flagged by the most significant bit of the 32-bit value as in the paper.
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Location(u32);

/// A decoded [`Location`].
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Target {
    /// A physical page number (31 bits).
    Physical(u32),
    /// A virtual page number, the index of a secondary-map entry (31 bits).
    Virtual(u32),
}

impl Location {
    /// The flag (most significant bit) of a virtual location.
    pub const VIRTUAL_FLAG: u32 = 1 << 31;
    /// The largest physical or virtual page number a location can hold.
    pub const MAX_ADDRESS: u32 = Self::VIRTUAL_FLAG - 1;

    /// A physical page, or `None` if `page` uses the flag bit.
    pub const fn physical(page: u32) -> Option<Self> {
        if page & Self::VIRTUAL_FLAG == 0 {
            Some(Location(page))
        } else {
            None
        }
    }

    /// A virtual page (secondary-map index), or `None` if `vpn` uses the flag bit.
    pub const fn shared(vpn: u32) -> Option<Self> {
        if vpn & Self::VIRTUAL_FLAG == 0 {
            Some(Location(vpn | Self::VIRTUAL_FLAG))
        } else {
            None
        }
    }

    /// The location whose 32-bit encoding is `raw` (every value is valid).
    pub const fn from_raw(raw: u32) -> Self {
        Location(raw)
    }

    /// The 32-bit encoding: the address, with the most significant bit set if virtual.
    pub const fn raw(self) -> u32 {
        self.0
    }

    /// Whether this is a virtual (shared) location.
    pub const fn is_virtual(self) -> bool {
        self.0 & Self::VIRTUAL_FLAG != 0
    }

    /// The page number without the flag.
    pub const fn address(self) -> u32 {
        self.0 & Self::MAX_ADDRESS
    }

    /// The decoded location.
    pub const fn target(self) -> Target {
        if self.is_virtual() {
            Target::Virtual(self.address())
        } else {
            Target::Physical(self.address())
        }
    }
}

/// One fingerprint-store entry: the paper's `{fingerprint, (location, reference)}` plus the
/// content's CRC-32, which the pre-hash index needs (the paper: "an extra 32-bit CRC32 hash value
/// for each fingerprint").
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Entry {
    /// SHA-1 of the page content.
    pub fingerprint: Fingerprint,
    /// CRC-32 (IEEE) of the same content; ignored by an index without a pre-hash table.
    pub crc: u32,
    /// Where the content lives.
    pub location: Location,
    /// The 8-bit reference counter (hotness): referencing logical pages, saturating at 255.
    pub hotness: u8,
}

/// A successful lookup.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Hit {
    /// Where the content lives.
    pub location: Location,
    /// The entry's reference counter.
    pub hotness: u8,
}

/// What [`DedupIndex::insert`] did.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum InsertOutcome {
    /// Stored in free space.
    Inserted,
    /// Stored in place of the coldest entry of the chosen bucket, which is returned (it is no
    /// longer resident; its page is unaffected).
    Replaced(Entry),
    /// Not stored: the memory budget is used up and the new entry is colder than every entry of
    /// the bucket whose turn it was.
    TooCold,
    /// Not stored: the memory budget is used up and the fingerprint's segment owns no bucket.
    NoBucket,
    /// Not stored: the fingerprint is already resident, at this location (unchanged).
    AlreadyPresent(Location),
}

impl InsertOutcome {
    /// Whether the entry is now resident (inserted or replaced another).
    pub const fn stored(&self) -> bool {
        matches!(self, InsertOutcome::Inserted | InsertOutcome::Replaced(_))
    }
}

/// A fingerprint index of bounded size: what the FTL calls on its write, GC and trim paths (see
/// the module documentation for the order of calls).
///
/// Contract, which [`FingerprintStore`](super::store::FingerprintStore) keeps and its tests check:
/// * a fingerprint is resident at most once;
/// * `lookup` finds exactly the resident entries;
/// * `may_contain_crc(c)` is `true` whenever some resident entry has CRC `c` (it may also be
///   `true` otherwise, e.g. when there is no pre-hash table), so skipping the SHA-1 on `false`
///   never misses a duplicate of resident content.
pub trait DedupIndex {
    /// Whether the index keeps a CRC pre-hash table, i.e. whether
    /// [`may_contain_crc`](Self::may_contain_crc) can ever answer `false`. When it does not,
    /// entries' `crc` fields are ignored and callers need not compute them.
    fn prehash_enabled(&self) -> bool;

    /// Pre-hash query: `false` if no resident entry has content with CRC-32 `crc`.
    fn may_contain_crc(&self, crc: u32) -> bool;

    /// The resident entry with this fingerprint, if any.
    fn lookup(&mut self, fingerprint: &Fingerprint) -> Option<Hit>;

    /// Makes `entry` resident if the memory budget and replacement rule allow (see
    /// [`InsertOutcome`]).
    fn insert(&mut self, entry: Entry) -> InsertOutcome;

    /// Removes the entry with this fingerprint and returns it, if it was resident.
    fn remove(&mut self, fingerprint: &Fingerprint) -> Option<Entry>;

    /// Points the entry at a new location (GC moved a unique page, or the page became shared and
    /// is now reached through a virtual page). Returns whether the entry was resident.
    fn update_location(&mut self, fingerprint: &Fingerprint, location: Location) -> bool;

    /// Counts one more reference (saturating at 255). Returns the new counter, if resident.
    fn add_ref(&mut self, fingerprint: &Fingerprint) -> Option<u8>;

    /// Counts one reference fewer (saturating at 0; a counter at 255 stays there, since the
    /// saturated count no longer knows how many references it stands for). Returns the new
    /// counter, if resident. The entry stays resident at 0: removal is the FTL's decision.
    fn drop_ref(&mut self, fingerprint: &Fingerprint) -> Option<u8>;

    /// Sets the counter (e.g. from the FTL's exact count, clamped to 255 by the caller). Returns
    /// whether the entry was resident.
    fn set_hotness(&mut self, fingerprint: &Fingerprint, hotness: u8) -> bool;

    /// Resident entries.
    fn len(&self) -> usize;

    /// Whether no entry is resident.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Most entries that can be resident at once.
    fn capacity(&self) -> usize;
}
