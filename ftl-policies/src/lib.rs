//! # ftl-policies: the research techniques, each behind its cargo feature
//!
//! Each technique implements one or more of the policy seams that `ftl-core` defines
//! (`PageCodec`, `Classifier`, `VictimPolicy`, `Placement`) and lives in its own module tree:
//!
//! | feature | module | technique |
//! |---|---|---|
//! | `wom` | `wom` | polar-WOM second writes (Reusable SSD) |
//! | `dedup` | `dedup` | CAFTL inline deduplication |
//! | `flex-ecc` | `flex_ecc` | FlexECC: BCH for dirty data, CRC for clean |
//! | `eti` | `eti` | extent-based temperature identification, MHF, MBF |
//! | `cdm` | `cdm` | NV-cache cooperative data management |
//!
//! Where a technique needs mechanism in the core (WOM's recycled/reused block states, dedup's
//! secondary map), that mechanism lives in `ftl-core` behind the same feature name, which this
//! crate's feature forwards. The techniques land with their own issues; with no feature enabled
//! this crate re-exports the core's default policies only.
//!
//! `#![no_std]`, no `alloc`.
#![no_std]
#![deny(missing_docs)]

pub use ftl_core::policy;

#[cfg(feature = "bch")]
pub mod flex_ecc;

#[cfg(feature = "eti")]
pub mod eti;

#[cfg(feature = "dedup")]
pub mod dedup;

#[cfg(feature = "wom")]
pub mod wom;
