//! Shared by the adapter's tests: a small emulated NAND with 2 KiB pages (4 sectors per page)
//! and the FTL + adapter on it.
#![allow(dead_code)]

use ftl_block::SectorDisk;
use ftl_core::policy::DefaultPolicies;
use ftl_core::{AnyMap, Config, Error as FtlError, Ftl};
use nand_hal::{ErrorKind, Geometry};
use sim_host::emulator::{Emulator, EmulatorConfig, FaultConfig};
use sim_host::memory::FtlMemory;

/// The FTL on a borrowed emulator.
pub type TestFtl<'a> = Ftl<'a, &'a mut Emulator, DefaultPolicies, AnyMap<'a>>;
/// The adapter over it, with an owned page buffer.
pub type Disk<'a> = SectorDisk<TestFtl<'a>, Vec<u8>>;

/// 2048 + 64 byte pages, 4 pages per block, `blocks` blocks per plane, two planes.
pub fn geometry(blocks: u32) -> Geometry {
    Geometry { pages_per_block: 4, blocks_per_plane: blocks, planes_per_lun: 2, ..Geometry::MT29F4G08 }
}

/// An emulator whose power cuts tear pages and erases with the given completeness.
pub fn emulator(geo: Geometry, torn: f64, erase: f64) -> Emulator {
    let faults = FaultConfig { torn_fraction: torn, partial_erase_fraction: erase, ..FaultConfig::default() };
    Emulator::new(EmulatorConfig { faults, ..EmulatorConfig::new(geo) }).unwrap()
}

/// Formats (or mounts) the FTL and wraps it in the adapter.
pub fn open<'a>(
    emu: &'a mut Emulator,
    mem: &'a mut FtlMemory,
    cfg: Config,
    format: bool,
) -> Result<Disk<'a>, FtlError> {
    let (map, m) = mem.parts();
    let ftl = if format {
        Ftl::format(emu, DefaultPolicies::default(), map, m, cfg)?
    } else {
        Ftl::mount(emu, DefaultPolicies::default(), map, m, cfg)?
    };
    let page = ftl.page_bytes() as usize;
    Ok(SectorDisk::new(ftl, vec![0; page]).unwrap())
}

/// Whether an adapter error is the emulator's power cut.
pub fn is_cut(e: &ftl_block::Error) -> bool {
    *e == ftl_block::Error::Ftl(FtlError::Device(ErrorKind::PowerLoss))
}
