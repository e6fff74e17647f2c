//! # sim-host: the host side of the FTL
//!
//! - [`emulator`]: a [`nand_hal::NandFlash`] that behaves like a real SLC chip: program-only-clears,
//!   NOP and program-order rules, factory and grown bad blocks, raw bit errors, power cuts that
//!   tear pages and half-erase blocks, persistence to a file, operation counters and a timing model.
//! - [`memory`]: owned buffers for the FTL on the host (crate `ftl-testkit`, re-exported;
//!   [`dedup_memory`]: for deduplication).
//!
//! The trace-driven simulator (`ftl-sim`) builds on these.

pub mod dedup_memory;
pub mod emulator;
pub mod filebench;
/// The FTL's buffers on the host (crate `ftl-testkit`, kept at this path).
pub use ftl_testkit::memory;
pub mod mount_cost;
pub mod nbd;
mod nvram;
pub mod sim;
pub mod steady_state;
pub mod trace;
pub mod workload;
