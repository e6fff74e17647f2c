//! Page fingerprints: SHA-1 (160 bits, the paper's fingerprint), CRC-32 (the paper's light-weight
//! pre-hash) and [`Fingerprinter`], which computes the CRC first and the SHA-1 only when the CRC
//! hits the index.
//!
//! * [`Fingerprint`]: the 20 bytes of a SHA-1 digest. Its order ([`Ord`]) is that of the
//!   big-endian 160-bit number, which is the order the fingerprint store sorts by and the number
//!   whose remainder modulo N selects a segment;
//! * [`sha1_page`], SHA-1 by the RustCrypto `sha1` crate (without default features: no `alloc`).
//!   On x86 and AArch64 hosts the crate detects SHA extensions at run time and uses them; on the
//!   Cortex-M target it is the portable implementation;
//! * [`crc32_page`], CRC-32 (IEEE 802.3 / ISO-HDLC, the CRC32 of zlib, check value `0xCBF43926`)
//!   by the `crc` crate, slice-by-16 (a 16 KiB table of read-only data);
//! * [`Fingerprinter`]: the paper's light-weight pre-hashing over any [`DedupIndex`],
//!   with counters of the work done and avoided.
//!
//! On a CRC miss the Fingerprinter reports [`Probe::CrcMiss`] and computes no fingerprint, as
//! the paper does ("we abort the high-cost SHA-1 fingerprinting immediately and perform the write
//! to flash"). Such a page can only become an index entry once somebody fingerprints it: the FTL
//! either calls [`Fingerprinter::fingerprint`] off the critical path (after issuing the program)
//! or leaves it to out-of-line fingerprinting in idle time (the paper's choice). That choice is
//! the FTL's, not this module's.
//!
//! A caution the paper predates: SHA-1 collisions can now be constructed (SHAttered, 2017), so a
//! malicious host could make two different pages share a fingerprint. Deduplicating on
//! fingerprint equality alone is sound against accidental collisions only; the FTL's
//! full-compare option (issue 7) covers the rest.
//!
//! Guarantees: no allocation, no panics, no floating point; every function is pure except the
//! Fingerprinter's counters.

use sha1::{Digest, Sha1};

use super::index::{DedupIndex, Entry, Location};

/// A SHA-1 digest: the 160-bit fingerprint of a page.
#[derive(Copy, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Fingerprint(pub [u8; 20]);

impl Fingerprint {
    /// Bytes of a fingerprint.
    pub const BYTES: usize = 20;

    /// The fingerprint with these digest bytes.
    pub const fn from_bytes(bytes: [u8; 20]) -> Self {
        Fingerprint(bytes)
    }

    /// The digest bytes.
    pub const fn as_bytes(&self) -> &[u8; 20] {
        &self.0
    }

    /// The fingerprint as five big-endian 32-bit words, most significant first.
    pub const fn words(&self) -> [u32; 5] {
        let b = &self.0;
        let mut w = [0u32; 5];
        let mut i = 0;
        while i < 5 {
            w[i] = u32::from_be_bytes([b[4 * i], b[4 * i + 1], b[4 * i + 2], b[4 * i + 3]]);
            i += 1;
        }
        w
    }
}

/// The CRC-32 the pre-hash uses (IEEE / ISO-HDLC), slice-by-16.
const CRC32: crc::Crc<u32, crc::Table<16>> = crc::Crc::<u32, crc::Table<16>>::new(&crc::CRC_32_ISO_HDLC);

/// SHA-1 of `page`.
pub fn sha1_page(page: &[u8]) -> Fingerprint {
    Fingerprint(Sha1::digest(page).into())
}

/// CRC-32 (IEEE 802.3 / ISO-HDLC) of `page`.
pub fn crc32_page(page: &[u8]) -> u32 {
    CRC32.checksum(page)
}

/// What [`Fingerprinter::probe`] found out about a page.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Probe {
    /// The pre-hash found no resident entry with this CRC, so no resident content equals the
    /// page; the SHA-1 was not computed.
    CrcMiss {
        /// The page's CRC-32.
        crc: u32,
    },
    /// Fingerprinted; not resident.
    Unique {
        /// The page's SHA-1.
        fingerprint: Fingerprint,
        /// The page's CRC-32 (0 if the index keeps no pre-hash table and pre-hashing is off).
        crc: u32,
    },
    /// Fingerprinted and resident: the content is already stored at `location`.
    Duplicate {
        /// The page's SHA-1.
        fingerprint: Fingerprint,
        /// The page's CRC-32 (0 if the index keeps no pre-hash table and pre-hashing is off).
        crc: u32,
        /// Where the same content lives.
        location: Location,
        /// The resident entry's reference counter.
        hotness: u8,
    },
}

impl Probe {
    /// Whether the page duplicates resident content.
    pub const fn is_duplicate(&self) -> bool {
        matches!(self, Probe::Duplicate { .. })
    }

    /// The index entry to insert for a [`Probe::Unique`] page once it is written at `location`
    /// (with one reference); `None` for the other outcomes.
    pub const fn entry_at(&self, location: Location) -> Option<Entry> {
        match *self {
            Probe::Unique { fingerprint, crc } => Some(Entry { fingerprint, crc, location, hotness: 1 }),
            _ => None,
        }
    }
}

/// Work counters of a [`Fingerprinter`].
#[derive(Copy, Clone, PartialEq, Eq, Debug, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct FingerprintStats {
    /// Pages probed.
    pub probes: u64,
    /// CRC-32s computed.
    pub crcs: u64,
    /// SHA-1s computed (by probes and by [`Fingerprinter::fingerprint`]).
    pub sha1s: u64,
    /// Probes that ended at the pre-hash (SHA-1 avoided).
    pub crc_misses: u64,
    /// Probes that found a duplicate.
    pub duplicates: u64,
}

/// Fingerprints pages against an index, with or without CRC pre-hashing.
#[derive(Clone, Debug)]
pub struct Fingerprinter {
    prehash: bool,
    stats: FingerprintStats,
}

impl Default for Fingerprinter {
    /// Pre-hashing on, as in the paper's accelerated configuration.
    fn default() -> Self {
        Fingerprinter::new(true)
    }
}

impl Fingerprinter {
    /// A fingerprinter; `prehash` turns the CRC-32 pre-hash on.
    pub const fn new(prehash: bool) -> Self {
        Fingerprinter {
            prehash,
            stats: FingerprintStats { probes: 0, crcs: 0, sha1s: 0, crc_misses: 0, duplicates: 0 },
        }
    }

    /// Whether pre-hashing is on.
    pub const fn prehash(&self) -> bool {
        self.prehash
    }

    /// Turns pre-hashing on or off.
    pub fn set_prehash(&mut self, on: bool) {
        self.prehash = on;
    }

    /// The counters so far.
    pub const fn stats(&self) -> FingerprintStats {
        self.stats
    }

    /// Zeroes the counters.
    pub fn reset_stats(&mut self) {
        self.stats = FingerprintStats::default();
    }

    /// Looks `page` up in `index`.
    ///
    /// With pre-hashing on and a pre-hash table in the index: the CRC-32 first; if the index
    /// holds no entry with that CRC, [`Probe::CrcMiss`] without computing the SHA-1. Otherwise
    /// (and always with pre-hashing off) the SHA-1 and a lookup. The CRC is also computed with
    /// pre-hashing off when the index keeps a pre-hash table, because the entry inserted for the
    /// page must carry it.
    pub fn probe<I: DedupIndex + ?Sized>(&mut self, index: &mut I, page: &[u8]) -> Probe {
        self.stats.probes += 1;
        let crc = if index.prehash_enabled() {
            self.stats.crcs += 1;
            crc32_page(page)
        } else {
            0
        };
        if self.prehash && !index.may_contain_crc(crc) {
            self.stats.crc_misses += 1;
            return Probe::CrcMiss { crc };
        }
        let fingerprint = self.fingerprint(page);
        match index.lookup(&fingerprint) {
            Some(hit) => {
                self.stats.duplicates += 1;
                Probe::Duplicate { fingerprint, crc, location: hit.location, hotness: hit.hotness }
            }
            None => Probe::Unique { fingerprint, crc },
        }
    }

    /// The SHA-1 of `page` (counted), e.g. to fingerprint a [`Probe::CrcMiss`] page after it
    /// has been written.
    pub fn fingerprint(&mut self, page: &[u8]) -> Fingerprint {
        self.stats.sha1s += 1;
        sha1_page(page)
    }
}
