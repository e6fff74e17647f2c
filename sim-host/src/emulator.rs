//! The NAND emulator (crate `nand-emu`, re-exported here under its old path) and the NV-RAM
//! emulator of the NV cache (`nvram.rs`, which needs ftl-core's `cdm` feature).

pub use nand_emu::*;

pub use crate::nvram::NvRam;

/// The NV-RAM emulator (kept at its old path).
pub mod nvram {
    pub use crate::nvram::*;
}
