//! End to end through the ONFI stack: `ftl_core::Ftl` formatted on `OnfiNand<OnfiChipModel>`
//! (the driver identifying the model from its parameter page, every page operation going through
//! command, address and data cycles), with a factory-bad block and a block whose programs fail,
//! written several times over its capacity so that GC runs, then unmounted, re-identified and
//! remounted, and finally cut off without unmounting and remounted again. Runs with R/B# and
//! with READ STATUS polling.

use ftl_core::policy::DefaultPolicies;
use ftl_core::{Config, Ftl};
use nand_hal::onfi::{ModelConfig, OnfiChipModel, OnfiNand};
use nand_hal::{BlockId, EccRequirement, Geometry, NandFlash};

/// 512 + 32 byte pages (room for the FTL's metadata and CRC), 16 pages per block, 32 blocks in
/// each of 2 planes, NOP 4, in-order programming.
const GEO: Geometry = Geometry {
    data_bytes: 512,
    spare_bytes: 32,
    pages_per_block: 16,
    blocks_per_plane: 32,
    planes_per_lun: 2,
    luns: 1,
    nop: 4,
    sequential_program: true,
    ecc: EccRequirement { bits: 4, codeword_bytes: 512 },
    endurance: 100_000,
};

fn content(lpn: u32, generation: u32, out: &mut [u8]) {
    let mut x = (lpn as u64) << 32 | generation as u64 | 1;
    for chunk in out.chunks_mut(8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let b = x.to_le_bytes();
        chunk.copy_from_slice(&b[..chunk.len()]);
    }
    out[..4].copy_from_slice(&lpn.to_le_bytes());
    out[4..8].copy_from_slice(&generation.to_le_bytes());
}

type Nand = OnfiNand<OnfiChipModel<Vec<u8>>>;
type TestFtl<'a> = Ftl<'a, Nand, DefaultPolicies, ftl_core::AnyMap<'a>>;

fn verify(ftl: &mut TestFtl<'_>, generations: &[u32]) {
    let mut got = vec![0u8; GEO.data_bytes as usize];
    let mut want = vec![0u8; GEO.data_bytes as usize];
    for (lpn, &g) in generations.iter().enumerate() {
        ftl.read(lpn as u32, &mut got).unwrap();
        if g == 0 {
            assert!(got.iter().all(|&b| b == 0), "lpn {lpn} never written");
        } else {
            content(lpn as u32, g, &mut want);
            assert!(got == want, "lpn {lpn} generation {g}");
        }
    }
}

#[test]
fn ftl_runs_on_the_onfi_driver_and_chip_model() {
    for ready_line in [true, false] {
        let cfg = ModelConfig { ready_line, ..ModelConfig::for_geometry(&GEO).unwrap() };
        let size = OnfiChipModel::<Vec<u8>>::storage_bytes(&cfg).unwrap();
        let mut chip = OnfiChipModel::new(cfg, vec![0u8; size]).unwrap();
        chip.mark_factory_bad(BlockId(5)).unwrap();
        chip.set_block_faults(BlockId(40), true, false).unwrap();
        let nand = OnfiNand::new(chip).unwrap();
        assert_eq!(nand.geometry(), GEO);

        let fcfg = Config::for_utilization(&GEO, 600);
        let mut mem = ftl_tests::test_memory(&GEO, &fcfg);
        let (map, m) = mem.parts();
        let mut ftl: TestFtl<'_> = Ftl::format(nand, DefaultPolicies::default(), map, m, fcfg).unwrap();
        let n = ftl.capacity_pages();
        let mut generations = vec![0u32; n as usize];
        let mut page = vec![0u8; GEO.data_bytes as usize];
        let mut x: u32 = 0x1234_5678;
        for i in 0..5 * n {
            // Sequential fill first, then random overwrites.
            let lpn = if i < n {
                i
            } else {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                x % n
            };
            generations[lpn as usize] += 1;
            content(lpn, generations[lpn as usize], &mut page);
            ftl.write(lpn, &page).unwrap();
        }
        verify(&mut ftl, &generations);
        let counters = *ftl.counters();
        assert!(counters.gc_blocks > 0, "GC never ran: {counters:?}");
        assert!(counters.program_failures > 0 && counters.blocks_retired > 0, "{counters:?}");

        // Clean unmount, a new driver identifying the same chip, mount.
        let chip = ftl.unmount().unwrap().release();
        let model_counters = *chip.counters();
        assert!(model_counters.page_programs > 5 * n as u64);
        assert!(model_counters.program_failures > 0, "the failing block was never programmed");
        let nand = OnfiNand::new(chip).unwrap();
        assert!(nand.info().multi_plane_program_erase());
        let (map, m) = mem.parts();
        let mut ftl: TestFtl<'_> = Ftl::mount(nand, DefaultPolicies::default(), map, m, fcfg).unwrap();
        verify(&mut ftl, &generations);
        for lpn in 0..n / 4 {
            generations[lpn as usize] += 1;
            content(lpn, generations[lpn as usize], &mut page);
            ftl.write(lpn, &page).unwrap();
        }
        ftl.flush().unwrap();

        // Power cut after the flush: no unmount, mount again.
        let mut nand = ftl.into_nand();
        nand.reset().unwrap();
        assert!(nand.is_bad(BlockId(5)).unwrap());
        assert!(nand.is_bad(BlockId(40)).unwrap());
        let (map, m) = mem.parts();
        let mut ftl: TestFtl<'_> = Ftl::mount(nand, DefaultPolicies::default(), map, m, fcfg).unwrap();
        verify(&mut ftl, &generations);
        println!(
            "ready line {ready_line}: {} logical pages, {} host writes; model: {:?}",
            n,
            6 * n + n / 4,
            model_counters
        );
    }
}
