//! # ftl-testkit: host-side buffers for FTL instances
//!
//! The std owners of what an FTL instance borrows, shared by the simulator (`sim-host`, which
//! re-exports them at their old paths) and the tests (`ftl-tests`, `ftl-core`'s own tests):
//!
//! - [`memory`]: the `ftl_core::Memory` tables and the map, flat or flash-resident with a cache
//!   ([`FtlMemory`], [`MapChoice`]);
//! - [`reuse`] (feature `wom`): the buffers of second writes ([`ReuseBuffers`]) and the polar
//!   WOM codec ([`reuse::polar_wom`]);
//! - [`dedup`] (feature `dedup`): the buffers of deduplication and the CAFTL index
//!   ([`dedup::DedupBuffers`]).
//!
//! It depends on nothing but the core (and ftl-policies for `wom` and `dedup`), so a test built with `--no-default-features` runs the
//! FTL exactly as the firmware configures it; each feature forwards to ftl-core's.

#[cfg(feature = "dedup")]
pub mod dedup;
pub mod memory;
#[cfg(feature = "wom")]
pub mod reuse;

pub use memory::{FtlMemory, MapChoice};
#[cfg(feature = "wom")]
pub use reuse::ReuseBuffers;
