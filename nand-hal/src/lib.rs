//! # nand-hal: raw NAND flash, as the rest of the stack sees it
//!
//! This crate knows chips, not mapping. It owns:
//! - [`Geometry`]: the shape of a device (page, spare, block, plane, LUN sizes), its partial-program
//!   limit (NOP), its program-order rule, its ECC requirement and rated endurance;
//! - the address newtypes [`BlockId`], [`PageId`], [`PlaneId`], [`LunId`] and how they relate;
//! - [`NandFlash`], the one trait every device implements (the emulator in `sim-host`, the ONFI
//!   driver, a board driver), with multi-plane operations that fall back to single-plane ones
//!   and a copy-back that falls back to read + program;
//! - [`copy_back`]: the copy-back rules (same plane, odd-to-even) and the rule that the FTL must
//!   still check the data of every copy (read it out and decode it, or bound unread copies);
//! - the error-kind pattern of embedded-hal: each device has its own error type, and every error
//!   maps to a portable [`ErrorKind`];
//! - [`onfi`]: a strict ONFI driver ([`onfi::OnfiNand`]) over a small bus trait
//!   ([`onfi::OnfiBus`]), and a cycle-level ONFI chip model ([`onfi::OnfiChipModel`]) behind the
//!   same trait, so the driver is tested on the host and a firmware can run on a chip in RAM;
//!   [`onfi::gpio::GpioBus`] implements that bus over embedded-hal 1.0 pins for microcontrollers
//!   without a NAND controller.
//!
//! `#![no_std]`, no `alloc`, no floating point.
#![no_std]
#![deny(missing_docs)]

mod address;
pub mod copy_back;
mod error;
mod flash;
mod geometry;
pub mod onfi;

pub use address::{BlockId, LunId, PageId, PlaneId};
pub use copy_back::{CopyBackAction, CopyBackCaps, CopyBackError, CopyBackOp, CopyBackRead, CopyBackRule};
pub use error::{Error, ErrorKind, ErrorType};
pub use flash::{NandFlash, ProgramOp, ReadOp, MAX_PLANES};
pub use geometry::{EccRequirement, Geometry, GeometryError};
