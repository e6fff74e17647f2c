//! # ONFI: a strict driver for raw ONFI NAND, and a chip model to test it against
//!
//! - [`bus`]: [`OnfiBus`], the interface of one target: command, address and data cycles,
//!   R/B# and a delay, with a wait-until-ready that has a timeout. Blocking.
//! - [`timing`]: [`BusTiming`], the interface timings of ONFI timing modes 0-5, and the choice of
//!   the mode both the part and the bus support.
//! - [`param_page`]: the parameter page, its CRC-16 (poly 0x8005, init 0x4F4E), the choice
//!   among its copies with a bitwise majority vote as the last resort, and what follows from it:
//!   [`crate::Geometry`], [`AddressLayout`], timing mode, capabilities.
//! - [`driver`]: [`OnfiNand`], which identifies the target (RESET, READ ID with the ONFI
//!   signature, READ PARAMETER PAGE) and implements [`crate::NandFlash`] with PAGE READ,
//!   CHANGE READ COLUMN, PAGE PROGRAM, BLOCK ERASE, READ STATUS (ENHANCED), multi-plane
//!   operations and copy-back (READ / PROGRAM FOR INTERNAL DATA MOVE) when advertised, and the
//!   factory bad-block marker.
//! - [`gpio`]: [`gpio::GpioBus`], an [`OnfiBus`] over embedded-hal 1.0 pins, a delay and an 8-bit
//!   data port, for microcontrollers without a NAND controller; it keeps the interface timings
//!   the driver selects.
//! - [`model`]: [`OnfiChipModel`], a cycle-level ONFI target in caller-provided memory behind the
//!   same bus trait, enforcing the emulator's chip rules, with fault hooks. It lets the driver be
//!   tested on the host and gives a firmware without a chip (QEMU) something to run on.
//!
//! Everything here is `no_std`, allocation-free and free of floating point.
//!
//! ```
//! use nand_hal::onfi::{ModelConfig, OnfiChipModel, OnfiNand};
//! use nand_hal::{Geometry, NandFlash};
//!
//! let geometry = Geometry { blocks_per_plane: 8, ..Geometry::MT29F4G08 };
//! let config = ModelConfig::for_geometry(&geometry)?;
//! let mut storage = vec![0u8; OnfiChipModel::<&mut [u8]>::storage_bytes(&config)?];
//! let chip = OnfiChipModel::new(config, &mut storage[..])?;
//! let mut nand = OnfiNand::new(chip)?;
//! assert_eq!(nand.geometry(), geometry);
//! let page = geometry.page(nand_hal::BlockId(3), 0);
//! nand.program_page(page, &[0x5A; 16], &[0x00, 0x11])?;
//! let (mut data, mut spare) = ([0u8; 16], [0u8; 2]);
//! nand.read_page(page, &mut data, &mut spare)?;
//! assert_eq!((data, spare), ([0x5A; 16], [0x00, 0x11]));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod bus;
pub mod driver;
pub mod gpio;
pub mod model;
pub mod param_page;
pub mod timing;

pub use bus::{OnfiBus, ReadyLine, Wait};
pub use driver::{ChipInfo, OnfiError, OnfiNand, Timeouts};
pub use model::{ModelConfig, ModelCounters, ModelError, ModelFaults, ModelTiming, OnfiChipModel};
pub use param_page::{AddressLayout, ParamError, ParamPage, ParamSource};
pub use timing::{common_mode, BusTiming};

/// ONFI command opcodes used by the driver and understood by the model.
pub mod cmd {
    /// PAGE READ, first cycle; also returns to data output after READ STATUS.
    pub const READ: u8 = 0x00;
    /// PAGE READ, second cycle.
    pub const READ_CONFIRM: u8 = 0x30;
    /// Multi-plane PAGE READ, second cycle of every plane but the last.
    pub const READ_MULTI_PLANE: u8 = 0x32;
    /// CHANGE READ COLUMN, first cycle.
    pub const CHANGE_READ_COLUMN: u8 = 0x05;
    /// CHANGE READ COLUMN ENHANCED (selects the plane too), first cycle.
    pub const CHANGE_READ_COLUMN_ENHANCED: u8 = 0x06;
    /// CHANGE READ COLUMN (ENHANCED), second cycle.
    pub const CHANGE_READ_COLUMN_CONFIRM: u8 = 0xE0;
    /// PAGE PROGRAM, first cycle.
    pub const PROGRAM: u8 = 0x80;
    /// CHANGE WRITE COLUMN (column cycles only, inside a program).
    pub const CHANGE_WRITE_COLUMN: u8 = 0x85;
    /// READ FOR INTERNAL DATA MOVE (copy-back read), second cycle after 00h and the address.
    pub const READ_INTERNAL_MOVE: u8 = 0x35;
    /// PROGRAM FOR INTERNAL DATA MOVE (copy-back program), first cycle, then the destination's
    /// column and row; the same opcode as [`CHANGE_WRITE_COLUMN`], told apart by its place.
    pub const PROGRAM_INTERNAL_MOVE: u8 = 0x85;
    /// PAGE PROGRAM, second cycle.
    pub const PROGRAM_CONFIRM: u8 = 0x10;
    /// Multi-plane PAGE PROGRAM, second cycle of every plane but the last.
    pub const PROGRAM_MULTI_PLANE: u8 = 0x11;
    /// BLOCK ERASE, first cycle.
    pub const ERASE: u8 = 0x60;
    /// BLOCK ERASE, second cycle.
    pub const ERASE_CONFIRM: u8 = 0xD0;
    /// Multi-plane BLOCK ERASE, second cycle of every plane but the last.
    pub const ERASE_MULTI_PLANE: u8 = 0xD1;
    /// READ STATUS.
    pub const READ_STATUS: u8 = 0x70;
    /// READ STATUS ENHANCED (status of the LUN and plane a row address selects).
    pub const READ_STATUS_ENHANCED: u8 = 0x78;
    /// READ ID.
    pub const READ_ID: u8 = 0x90;
    /// READ PARAMETER PAGE.
    pub const READ_PARAMETER_PAGE: u8 = 0xEC;
    /// SET FEATURES (address, then four parameter bytes P1..P4).
    pub const SET_FEATURES: u8 = 0xEF;
    /// GET FEATURES (address, then four parameter bytes out).
    pub const GET_FEATURES: u8 = 0xEE;
    /// RESET.
    pub const RESET: u8 = 0xFF;
}

/// GET / SET FEATURES addresses and bits the driver uses.
pub mod feature {
    /// Timing mode (P1 bits 0-3 = the asynchronous mode).
    pub const TIMING_MODE: u8 = 0x01;
    /// Micron: array operation mode; P1 bit 3 = on-die ECC enabled.
    pub const ARRAY_MODE: u8 = 0x90;
    /// The on-die ECC bit of [`ARRAY_MODE`]'s P1.
    pub const ECC_ON: u8 = 0x08;
    /// JEDEC manufacturer ID of Micron (READ ID byte 0), whose parts have [`ARRAY_MODE`].
    pub const MICRON: u8 = 0x2C;
}

/// Status register bits.
pub mod status {
    /// The last program or erase failed.
    pub const FAIL: u8 = 1 << 0;
    /// The operation before the last failed (cache operations).
    pub const FAILC: u8 = 1 << 1;
    /// The array is ready (no operation in progress).
    pub const ARDY: u8 = 1 << 5;
    /// The target is ready for another command.
    pub const RDY: u8 = 1 << 6;
    /// Write protect: 1 = not protected.
    pub const WP_N: u8 = 1 << 7;
}
