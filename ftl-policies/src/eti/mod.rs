//! Hot/cold classifiers of the ETI paper (Shafaei, Desnoyers, Fitzpatrick, "Write Amplification
//! Reduction in Flash-Based SSDs Through Extent-Based Temperature Identification"): ETI itself and
//! the two schemes it was measured against, each an implementation of the core's
//! [`Classifier`](ftl_core::policy::Classifier) seam.
//!
//! This module owns:
//! * [`extent`]: [`Eti`], extent-based temperature identification. Decides once per write
//!   request (`classify_request` does the work; `classify_page` returns the request's answer);
//! * [`mhf`]: [`Mhf`], Hsieh et al.'s multiple hash functions (a counting Bloom filter of 4-bit
//!   saturating counters with periodic halving). Decides per page;
//! * [`mbf`]: [`Mbf`], Park and Du's multiple Bloom filters (filters over trailing windows with
//!   recency weights). Decides per page;
//! * [`hash`]: [`CrcPoly`], the CRC hash functions MHF and MBF use;
//! * [`guard`]: [`Guarded`], a wrapper around one or more of them that separates hot from cold only
//!   while a miniature simulation of the choices says separation lowers write amplification, by
//!   the classifier it measures best;
//! * [`ConfigError`], the one error their constructors return.
//!
//! Every configuration type's `Default` (and its `PAPER` constant) is the paper's Table 2:
//!
//! | | ETI | MHF | MBF |
//! |---|---|---|---|
//! | size | at most 2048 extents | 2048 counters | 4 filters x 2048 bits |
//! | counter | 4 bits | 4 bits | (one bit per filter) |
//! | decay period | 4096 write requests | 4096 pages | 4096 pages |
//! | hot threshold | counter >= 4 | both counters >= 4 | weight >= 4 |
//! | other | alpha 100%, beta 4 | 2 CRC hashes | 2 CRC hashes, weight step 0.5 |
//!
//! Guarantees, for all three: `no_std`, no `alloc`, no floating point, no panics; memory is fixed
//! by const generics and lives inside the value (each type states its size as a constant). Every
//! request or page is handled in bounded time: MHF and MBF in O(1), ETI in O(log N) plus the
//! extents a request covers plus, when it splits, one move of the table's tail; the periodic decay
//! is O(table).

pub mod extent;
pub mod guard;
pub mod hash;
pub mod mbf;
pub mod mhf;

#[cfg(test)]
mod tests;

pub use extent::{Eti, EtiConfig, EtiStats, Extent};
pub use guard::{Candidates, GuardConfig, GuardStats, Guarded, Pair};
pub use hash::CrcPoly;
pub use mbf::{Mbf, MbfConfig};
pub use mhf::{Mhf, MhfConfig};

/// A configuration value outside its documented range.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum ConfigError {
    /// ETI's address space must be 1 ..= 2^32 pages.
    AddressPages,
    /// Counter width out of range (ETI: 1..=8 bits; MHF: 1..=4 bits).
    CounterBits,
    /// The decay period must be at least 1.
    DecayPeriod,
    /// The hot threshold must be reachable: 1 ..= the counter maximum (ETI, MHF), or at least
    /// one weight step and at most the sum of all weights (MBF).
    HotThreshold,
    /// ETI's alpha must be 1..=100 percent.
    Alpha,
    /// The two hash functions must use different polynomials.
    Hashes,
    /// MBF's weight step must have a non-zero numerator and denominator.
    WeightStep,
    /// The guard's lanes (1..=8), reserve (>= 2) or window (>= 1) out of range, or no sampling
    /// shift fits its ghosts.
    Guard,
}
