//! CAFTL inline deduplication (Chen, Luo, Zhang, "CAFTL: A Content-Aware Flash Translation Layer
//! Enhancing the Lifespan of Flash Memory based Solid State Drives", FAST'11): the fingerprinting
//! and fingerprint-store components, for the FTL's write path to call.
//!
//! This module owns:
//! * [`fingerprint`]: [`Fingerprint`] (SHA-1, 160 bits), [`sha1_page`], [`crc32_page`] and
//!   [`Fingerprinter`], which pre-hashes with CRC-32 and computes the SHA-1 only when the CRC hits
//!   the index (the paper's "light-weight pre-hashing");
//! * [`sampling`], content-based sampling (the paper's "sampling for hashing") as a decision
//!   helper: [`Sampler`] splits a request into sampling units (default 32 pages), [`UnitPlan`]
//!   names the sample page (largest first four bytes) and says whether to fingerprint the rest of
//!   the unit;
//! * [`store`]: [`FingerprintStore`] (the paper's "fingerprint store"), a fixed budget of
//!   fixed-size buckets in caller memory: N segments by fingerprint mod N, buckets of sorted
//!   entries, round-robin insertion, coldest-entry replacement, and the three lookup
//!   accelerations (range check, hotness-based reorganisation, bucket-level binary search),
//!   switchable so their effect can be measured;
//! * [`prehash`]: [`CrcIndex`], the CRC-32 -> count table that lets the store answer the
//!   pre-hash query (the paper does not say how; see there);
//! * [`index`]: [`DedupIndex`], the interface the FTL will call (lookup, insert, remove, location
//!   and reference updates, the pre-hash query), and its value types ([`Location`] with the
//!   paper's MSB flag for virtual pages, [`Entry`], [`Hit`], [`InsertOutcome`]).
//!
//! * [`content_index`]: [`CaftlIndex`], the store behind the core's `ContentIndex` seam, which
//!   the FTL's deduplicating write path, GC and mount call (`ftl_core::dedup` holds the two-level
//!   mapping, its persistence and the write path).
//!
//! Choices where the paper is silent, each documented at its place:
//! * the pre-hash query is answered by an exact counting table of CRCs ([`prehash`]), so a CRC
//!   miss is certain and removal/replacement keep it exact;
//! * the fingerprint's order and its "mod N" treat the 20 digest bytes as a big-endian number;
//!   N is at most 65536;
//! * a segment fills its last bucket and links a new one from the pool when that is full (the
//!   paper's allocation order); only when the pool has none left does it choose a bucket
//!   round-robin; the coldest entry's ties go to the smallest fingerprint; a new entry replaces
//!   the coldest when at least as hot ("unless its reference counter is smaller");
//! * hotness saturates at 255 and a saturated counter does not count down (it no longer knows
//!   how many references it stands for); the exact count is the secondary map's;
//! * hotness reorganisation and the merge sort for bucket-level binary search are explicit,
//!   idle-time operations ([`FingerprintStore::reorganize`]); range check and bucket-level binary
//!   search are search strategies ([`Accel`]) that never change a result;
//! * sampling reads the first four bytes big-endian, picks the earliest page on a tie, and treats
//!   a pre-hash miss of the sample as "not a duplicate".
//!
//! Guarantees: `no_std`, no `alloc`, no floating point, no panics; all memory is the caller's
//! (the store) or fixed inside small values (the rest).

pub mod content_index;
pub mod fingerprint;
pub mod index;
pub mod prehash;
pub mod sampling;
pub mod store;

#[cfg(test)]
mod tests;

pub use content_index::{CaftlIndex, LocationSlotsError};
pub use fingerprint::{crc32_page, sha1_page, Fingerprint, FingerprintStats, Fingerprinter, Probe};
pub use index::{DedupIndex, Entry, Hit, InsertOutcome, Location, Target};
pub use prehash::{CrcIndex, CrcSlot};
pub use sampling::{
    sample_index, sample_of_values, sample_value, Sampler, UnitDecision, UnitPlan, Units, DEFAULT_UNIT_PAGES,
};
pub use store::{
    Accel, Bucket, FingerprintStore, Layout, Segment, SegmentInfo, StoreError, StoreMemory, StoreStats,
    BUCKET_BYTES, ENTRIES_4K, MAX_SEGMENTS,
};
