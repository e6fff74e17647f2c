//! The firmware's calls into the FTL and the ONFI driver. Each is a function the compiler may
//! not inline, so that whatever it inlines from ftl-core, ftl-policies and nand-hal lands in a
//! symbol of this module: `size-report.py` counts this module as "FTL core + HAL + ONFI driver"
//! (with the symbols of those crates that stay out of line). The cost is one call per
//! operation.

use ftl_core::{Config, Error as FtlError, Ftl, Memory};
use nand_hal::onfi::{OnfiBus, OnfiError, OnfiNand};

pub use crate::bundle::{AppMap, AppPolicies, Attach};
use crate::meter::{TimedBus, TimedNand};

/// The ONFI driver over the metered bus.
pub type Driver<B> = OnfiNand<TimedBus<B>>;

/// The NAND the FTL sees: the metered driver.
pub type Nand<B> = TimedNand<Driver<B>>;

/// The FTL over a lent NAND (lent, so that a failed mount does not drop the device).
pub type AppFtl<'a, B> = Ftl<'a, &'a mut Nand<B>, AppPolicies, AppMap<'a>>;

/// RESET, READ ID, READ PARAMETER PAGE.
#[inline(never)]
pub fn identify<B: OnfiBus>(bus: TimedBus<B>) -> Result<Driver<B>, OnfiError<B::Error>> {
    OnfiNand::new(bus)
}

/// Mounts.
#[inline(never)]
pub fn mount<'a, B: OnfiBus>(
    nand: &'a mut Nand<B>,
    policies: AppPolicies,
    map: AppMap<'a>,
    mem: Memory<'a>,
    cfg: Config,
    attach: Attach<'a>,
) -> Result<AppFtl<'a, B>, FtlError> {
    Ftl::mount_with(nand, policies, map, mem, cfg, crate::bundle::extensions(attach))
}

/// Formats.
#[inline(never)]
pub fn format<'a, B: OnfiBus>(
    nand: &'a mut Nand<B>,
    policies: AppPolicies,
    map: AppMap<'a>,
    mem: Memory<'a>,
    cfg: Config,
    attach: Attach<'a>,
) -> Result<AppFtl<'a, B>, FtlError> {
    Ftl::format_with(nand, policies, map, mem, cfg, crate::bundle::extensions(attach))
}

/// Flushes, checkpoints, gives the device back.
#[inline(never)]
pub fn unmount<B: OnfiBus>(ftl: AppFtl<'_, B>) -> Result<(), FtlError> {
    ftl.unmount().map(|_| ())
}

/// Writes whole pages.
#[inline(never)]
pub fn write<B: OnfiBus>(ftl: &mut AppFtl<'_, B>, lpn: u32, data: &[u8]) -> Result<(), FtlError> {
    ftl.write(lpn, data)
}

/// Reads whole pages.
#[inline(never)]
pub fn read<B: OnfiBus>(ftl: &mut AppFtl<'_, B>, lpn: u32, buf: &mut [u8]) -> Result<(), FtlError> {
    ftl.read(lpn, buf)
}

/// Trims pages.
#[inline(never)]
pub fn trim<B: OnfiBus>(ftl: &mut AppFtl<'_, B>, lpn: u32, count: u32) -> Result<(), FtlError> {
    ftl.trim(lpn, count)
}

/// Makes writes and trims durable.
#[inline(never)]
pub fn flush<B: OnfiBus>(ftl: &mut AppFtl<'_, B>) -> Result<(), FtlError> {
    ftl.flush()
}

/// The mounted FTL as ftl-block's page store (the FAT round trip's and the USB disk's
/// `SectorDisk`), through this module's calls, so that the FTL's code stays in this module's
/// symbols (see the module documentation). It borrows the FTL: the caller unmounts it.
pub struct Store<'s, 'a, B: OnfiBus>(pub &'s mut AppFtl<'a, B>);

impl<B: OnfiBus> ftl_block::PageStore for Store<'_, '_, B> {
    fn page_bytes(&self) -> usize {
        Ftl::page_bytes(self.0) as usize
    }
    fn pages(&self) -> u32 {
        Ftl::capacity_pages(self.0)
    }
    fn read_pages(&mut self, page: u32, buf: &mut [u8]) -> Result<(), FtlError> {
        read(self.0, page, buf)
    }
    fn write_pages(&mut self, page: u32, data: &[u8]) -> Result<(), FtlError> {
        write(self.0, page, data)
    }
    fn trim_pages(&mut self, page: u32, count: u32) -> Result<(), FtlError> {
        trim(self.0, page, count)
    }
    fn flush(&mut self) -> Result<(), FtlError> {
        flush(self.0)
    }
}
