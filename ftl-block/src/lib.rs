//! # ftl-block: the FTL as a block device
//!
//! `#![no_std]`, no `alloc`: every buffer is lent by the caller, and nothing the host or a
//! filesystem can send panics (bad addresses and lengths come back as typed errors or SCSI sense
//! data).
//!
//! ```text
//!  USB host (SCSI over bulk-only)        FAT on the MCU            NBD server (sim-host)
//!        |                                     |                           |
//!  scsi::ScsiDisk (commands, sense,    sdmmc: embedded-sdmmc's       byte offsets
//!   state machine over a DataPhase)     BlockDevice (feature)          |
//!  usb: usbd-storage glue (feature)            |                           |
//!        +------------------+------------------+---------------------------+
//!                           |
//!                 disk::SectorDisk: 512-byte sectors (and bytes) on FTL pages,
//!                 read-modify-write of partial pages with one lent page buffer
//!                           |
//!                 store::PageStore (implemented by ftl_core::Ftl)
//! ```
//!
//! - [`disk`]: the adapter, with its power-loss behaviour per sector.
//! - [`mkfs`]: formats the disk as one FAT16 volume behind an MBR (embedded-sdmmc cannot).
//! - [`scsi`]: a SCSI block command handler (SPC/SBC subset a USB mass-storage host uses).
//! - `sdmmc` (feature `sdmmc`): `embedded_sdmmc::BlockDevice` for the adapter.
//! - `usb` (feature `usbd-storage`): drives the handler from `usbd-storage`'s SCSI class.
//!
//! RAM: the adapter holds one page buffer (the FTL's page size, e.g. 2 KiB); the SCSI handler
//! holds one transfer buffer (at least 512 bytes; a whole page or more so that aligned writes
//! need no read-modify-write). Both are lent, as `&mut [u8]`, arrays or any `AsMut<[u8]>`.
#![no_std]
#![deny(missing_docs)]

pub mod disk;
pub mod error;
pub mod mkfs;
pub mod scsi;
#[cfg(feature = "sdmmc")]
pub mod sdmmc;
pub mod store;
#[cfg(feature = "usbd-storage")]
pub mod usb;

pub use disk::SectorDisk;
pub use error::Error;
pub use store::PageStore;

/// Bytes per logical sector (the block size the adapter exposes).
pub const SECTOR_SIZE: usize = 512;
