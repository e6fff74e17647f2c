//! Regression (issue #17: a host write within the capacity never fails with `Error::NoSpace`):
//! a raw bit error in a read of an erased page must not close a block a mount resumed.
//!
//! Mount resumes the partly written blocks as write frontiers, and each of their pages is
//! checked erased before it is programmed (a page that is not is garbage: the block is closed).
//! The check took one read's zero bit for a programmed page. At bit_errors' raw bit error rate
//! (2e-5 over the 224 metadata bits) that happens in one read of 220, so with up to a block of
//! checks per resumed frontier most mounts closed a good block, and the block opened instead
//! took the plane's last free block without GC: in `random_cuts_with_bch_and_rber` (seed 1, one
//! plane, copy-back on) GC then had nowhere to copy and the next write failed with `NoSpace`.
//!
//! Here every erased page's first metadata read after the mount comes back with one bit flipped
//! (a device wrapper, deterministic): the resumed blocks must be written to their end (no used
//! block is left with erased pages), and everything reads back.

use std::collections::HashSet;

use ftl_core::blocks::BlockState;
use ftl_core::policy::DefaultPolicies;
use ftl_core::{AnyMap, Config, Ftl};
use ftl_testkit::{FtlMemory, MapChoice};
use nand_emu::{EmuError, Emulator, EmulatorConfig};
use nand_hal::{BlockId, ErrorType, Geometry, NandFlash, PageId};

/// One plane of 32 blocks of 8 pages.
const GEO: Geometry = Geometry {
    data_bytes: 512,
    spare_bytes: 32,
    pages_per_block: 8,
    blocks_per_plane: 32,
    planes_per_lun: 1,
    luns: 1,
    ..Geometry::MT29F4G08
};

/// The emulator, with one bit flipped in the first spare read of each erased page once `on`.
struct FirstReadFlips<'a> {
    emu: &'a mut Emulator,
    on: bool,
    flipped: HashSet<PageId>,
}

impl ErrorType for FirstReadFlips<'_> {
    type Error = EmuError;
}

impl NandFlash for FirstReadFlips<'_> {
    fn geometry(&self) -> Geometry {
        self.emu.geometry()
    }
    fn read_page(&mut self, page: PageId, data: &mut [u8], spare: &mut [u8]) -> Result<(), EmuError> {
        self.emu.read_page(page, data, spare)
    }
    fn program_page(&mut self, page: PageId, data: &[u8], spare: &[u8]) -> Result<(), EmuError> {
        self.emu.program_page(page, data, spare)
    }
    fn erase_block(&mut self, block: BlockId) -> Result<(), EmuError> {
        self.emu.erase_block(block)
    }
    fn is_bad(&mut self, block: BlockId) -> Result<bool, EmuError> {
        self.emu.is_bad(block)
    }
    fn mark_bad(&mut self, block: BlockId) -> Result<(), EmuError> {
        self.emu.mark_bad(block)
    }
    fn read_spare(&mut self, page: PageId, spare: &mut [u8]) -> Result<(), EmuError> {
        self.emu.read_spare(page, spare)?;
        if self.on && self.emu.program_count(page) == Some(0) && self.flipped.insert(page) {
            // A bit of the metadata's message (bytes 3..25): a read error, not a stored one.
            spare[10] ^= 0x04;
        }
        Ok(())
    }
}

fn page(lpn: u32, version: u32) -> Vec<u8> {
    let mut p = vec![(version as u8) ^ 0xA5; GEO.data_bytes as usize];
    p[..4].copy_from_slice(&lpn.to_le_bytes());
    p[4..8].copy_from_slice(&version.to_le_bytes());
    p
}

/// Blocks holding both programmed and erased pages.
fn partly_written(emu: &Emulator) -> Vec<u32> {
    let ppb = GEO.pages_per_block;
    (0..GEO.total_blocks())
        .filter(|&b| {
            let n =
                (0..ppb).filter(|&p| emu.program_count(GEO.page(BlockId(b), p)) != Some(0)).count() as u32;
            n > 0 && n < ppb
        })
        .collect()
}

#[test]
fn a_read_error_on_an_erased_page_does_not_close_a_resumed_block() {
    let cfg = Config::for_utilization(&GEO, 500);
    let mut mem = FtlMemory::with_map(&GEO, &cfg, MapChoice::Flat);
    let mut emu = Emulator::new(EmulatorConfig::new(GEO)).unwrap();
    let n = cfg.logical_pages;
    let mut version = vec![0u32; n as usize];
    {
        let (m, mm) = mem.parts();
        let mut ftl: Ftl<'_, _, _, AnyMap<'_>> =
            Ftl::format(&mut emu, DefaultPolicies::default(), m, mm, cfg).unwrap();
        // Every logical page, then overwrites of the even ones (GC at work), ending mid-block.
        for i in 0..n + n / 2 + 3 {
            let lpn = if i < n { i } else { (2 * (i - n)) % n };
            version[lpn as usize] += 1;
            ftl.write(lpn, &page(lpn, version[lpn as usize])).unwrap();
        }
        ftl.flush().unwrap();
    } // dropped: a cut between operations
    assert!(!partly_written(&emu).is_empty(), "the workload leaves a block partly written");

    let dev = FirstReadFlips { emu: &mut emu, on: false, flipped: HashSet::new() };
    let (m, mm) = mem.parts();
    let mut ftl: Ftl<'_, _, _, AnyMap<'_>> = Ftl::mount(dev, DefaultPolicies::default(), m, mm, cfg).unwrap();
    ftl.nand_mut().on = true;
    // As many overwrites as logical pages, scattered: GC copies, and the resumed block (mount
    // resumes the one partly written block on the GC stream) fills up. After each write, no
    // block the FTL closed holds erased pages (a resumed block closed at a read error would,
    // until GC collects it).
    for i in 0..n {
        let lpn = (i * 7 + 3) % n;
        version[lpn as usize] += 1;
        ftl.write(lpn, &page(lpn, version[lpn as usize])).unwrap();
        for (b, info) in ftl.block_infos() {
            if info.state() == BlockState::Used {
                let erased = (0..GEO.pages_per_block)
                    .filter(|&p| ftl.nand().emu.program_count(GEO.page(b, p)) == Some(0))
                    .count();
                assert_eq!(erased, 0, "write {i}: block {} closed with {erased} erased pages", b.0);
            }
        }
    }
    assert!(!ftl.nand().flipped.is_empty(), "no erased page was read");
    let mut buf = vec![0u8; GEO.data_bytes as usize];
    for lpn in 0..n {
        ftl.read(lpn, &mut buf).unwrap();
        assert!(buf == page(lpn, version[lpn as usize]), "lpn {lpn} reads other data");
    }
    ftl.unmount().unwrap();
}
