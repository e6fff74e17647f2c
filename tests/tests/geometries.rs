//! Property test over the whole range of geometries and configurations: whatever
//! `Config::validate` accepts must work, whatever cannot work it must refuse.
//!
//! Each case draws a geometry (1 to 16 device-wide planes: 1, 2 or 4 per LUN, 1 to 4 LUNs; 64- to 4096-byte
//! pages, 2 to 128 pages per block, NOP 2 or 4, in-order programming or not) and a configuration
//! (logical capacity, GC reserve, checkpoint interval up to past the largest the replay allows,
//! wear-leveling settings). If `validate` refuses it, format must refuse it too with
//! `Error::Config`. If it accepts, a short random workload runs with power cuts at random
//! operations (some cutting the recovery mount as well) against the model of `ftl_tests`: no
//! panic (overflow checks are on in the test profile), no failed or `Corrupt` mount, guarantees
//! 1 and 2 after every cut, everything read back after a final clean remount.
//!
//! Half the cases run with the mount pool (`Config::mount_pool_blocks`).
//!
//! `PROPTEST_CASES` sets the case count (default 400).

use ftl_core::{Config, Error};
use ftl_tests::{random_workload, Env, RandomCuts, Rng, Start, Verify};
use nand_emu::{Emulator, EmulatorConfig, FaultConfig};
use nand_hal::{EccRequirement, Geometry};
use proptest::prelude::*;

/// Largest device a case builds, in pages (keeps a case within tens of milliseconds).
const MAX_PAGES: u32 = 6_144;

#[derive(Clone, Debug)]
struct Case {
    geo: Geometry,
    cfg: Config,
    seed: u64,
    ops: usize,
}

fn case() -> impl Strategy<Value = Case> {
    (
        (
            prop_oneof![Just(1u32), Just(2), Just(4)],
            1..=4u32,
            prop_oneof![Just(64u32), Just(128), Just(256), Just(512), Just(2048), Just(4096)],
        ),
        (
            prop_oneof![Just(32u32), Just(40), Just(64), Just(128)],
            prop_oneof![Just(2u32), Just(3), Just(4), Just(8), Just(16), Just(64), Just(128)],
        ),
        (0..40u32, prop_oneof![Just(2u8), Just(4)], any::<bool>(), any::<bool>()),
        (50..=950u32, 2..=6u32, 1..=140u32, 1..=128u32, 1..=512u32),
        (any::<u64>(), 50..400usize),
    )
        .prop_map(
            |((ppl, luns, data), (spare, ppb), (extra_blocks, nop, sequential, pool), c, (seed, ops))| {
                let (permille, gc, interval, wear_check, wear_spread) = c;
                let planes = ppl * luns;
                // Enough blocks per plane for the reserves most of the time, within MAX_PAGES.
                let want = gc + 6 + extra_blocks;
                let cap = (MAX_PAGES / (ppb * planes)).max(2);
                let geo = Geometry {
                    data_bytes: data,
                    spare_bytes: spare,
                    pages_per_block: ppb,
                    blocks_per_plane: want.min(cap),
                    planes_per_lun: ppl,
                    luns,
                    nop,
                    sequential_program: sequential,
                    ecc: EccRequirement { bits: 4, codeword_bytes: 512 },
                    endurance: 100_000,
                };
                let mut cfg = Config::for_utilization(&geo, permille);
                cfg.gc_free_threshold = gc.max(cfg.gc_free_threshold);
                cfg.checkpoint_interval_blocks = interval;
                cfg.wear_check_interval = wear_check;
                cfg.wear_spread_limit = wear_spread;
                // Half the cases with the mount pool (opt-in in the library).
                cfg.mount_pool_blocks = if pool { ftl_core::RECOMMENDED_MOUNT_POOL_BLOCKS } else { 0 };
                Case { geo, cfg, seed, ops }
            },
        )
}

fn run(c: &Case) -> Result<(), String> {
    let emu = Emulator::new(EmulatorConfig {
        seed: c.seed,
        faults: FaultConfig { torn_fraction: 0.9, partial_erase_fraction: 0.5, ..FaultConfig::default() },
        ..EmulatorConfig::new(c.geo)
    })
    .map_err(|e| format!("emulator refused {:?}: {e:?}", c.geo))?;
    if let Err(e) = c.cfg.validate(&c.geo, 4) {
        if e != Error::Config {
            return Err(format!("validate returned {e:?}"));
        }
        // Refused: format must refuse it too, and say so the same way.
        let mut emu = emu;
        let mut mem = ftl_tests::test_memory(&c.geo, &c.cfg);
        return match ftl_tests::format(&mut emu, &mut mem, c.cfg) {
            Err(Error::Config) => Ok(()),
            Err(e) => Err(format!("format of a refused configuration returned {e:?}")),
            Ok(_) => Err("format accepted a configuration validate refused".into()),
        };
    }
    let mut rng = Rng::new(c.seed);
    let ops = random_workload(&mut rng, c.cfg.logical_pages, c.ops);
    let mut env = Env::new(emu, c.cfg);
    env.verify = Verify::Touched;
    env.random_cuts = Some(RandomCuts {
        rng: Rng::new(c.seed ^ 1),
        max_after: 400,
        mount_cut_percent: 20,
        max_mount_after: 200,
    });
    env.run(&ops, Start::Format).map(drop)
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: ftl_tests::proptest_cases(400),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn every_accepted_configuration_works(c in case()) {
        run(&c).map_err(|e| TestCaseError::fail(format!("{:?}\n{:?}\n{e}", c.geo, c.cfg)))?;
    }
}

/// The generator reaches both sides of `validate`, and accepted cases span the plane counts
/// whose replay bound was wrong (audit F2: 6 to 16 device-wide planes).
#[test]
fn generator_covers_accepted_and_refused_configurations() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let mut runner = TestRunner::deterministic();
    let (mut accepted, mut refused, mut many_planes) = (0, 0, 0);
    for _ in 0..500 {
        let c = case().new_tree(&mut runner).unwrap().current();
        if c.cfg.validate(&c.geo, 4).is_ok() {
            accepted += 1;
            many_planes += u32::from(c.geo.total_planes() >= 11);
        } else {
            refused += 1;
        }
    }
    assert!(accepted >= 150 && refused >= 50 && many_planes >= 10, "{accepted} {refused} {many_planes}");
}

/// Regression (audit F1): 32 separate one-page trims and a flush on 64-, 128- and 256-byte pages
/// (a journal page of 32 ranges needs 260 bytes) panicked in the trim journal's serializer.
#[test]
fn many_trims_on_small_pages() {
    for data in [64u32, 128, 256] {
        let geo = Geometry { data_bytes: data, ..ftl_tests::geometry(32, 16, 2) };
        let cfg = Config::for_utilization(&geo, 300);
        assert_eq!(cfg.validate(&geo, 4), Ok(()), "{data}-byte pages");
        let mut ops = vec![ftl_tests::Op::Write { lpn: 0, pages: 64 }, ftl_tests::Op::Flush];
        ops.extend((0..32).map(|i| ftl_tests::Op::Trim { lpn: 2 * i, pages: 1 }));
        ops.push(ftl_tests::Op::Flush);
        ops.push(ftl_tests::Op::Cut { after: 0, mount_after: None });
        ops.push(ftl_tests::Op::Read { lpn: 0, pages: 64 });
        let mut env = Env::with_geometry(geo, cfg);
        let stats = env.run(&ops, Start::Format).unwrap_or_else(|e| panic!("{data}-byte pages: {e}"));
        assert_eq!(stats.cuts, 1);
    }
}

/// Regression (audit F2): 16 device-wide planes with the largest interval `validate` accepts, a
/// flush, a clean cut and a mount, over several seeds. Before the fix `validate` wrapped and
/// accepted any interval; with 120, mount returned `Corrupt` once 102 blocks opened since the
/// checkpoint and the open frontiers exceeded the replay cursors.
#[test]
fn sixteen_planes_at_the_largest_interval() {
    let geo = Geometry { planes_per_lun: 4, luns: 4, ..ftl_tests::geometry(4, 24, 1) };
    let mut cfg = Config::for_utilization(&geo, 500);
    cfg.checkpoint_interval_blocks = Config::max_checkpoint_interval(16);
    assert_eq!(cfg.validate(&geo, 4), Ok(()));
    assert_eq!(Config { checkpoint_interval_blocks: 120, ..cfg }.validate(&geo, 4), Err(Error::Config));
    for seed in 0..10 {
        let mut rng = Rng::new(seed);
        let mut ops = random_workload(&mut rng, cfg.logical_pages, 600);
        ops.push(ftl_tests::Op::Flush);
        ops.push(ftl_tests::Op::Cut { after: 0, mount_after: None });
        ops.push(ftl_tests::Op::Read { lpn: 0, pages: 8 });
        let mut env = Env::with_geometry(geo, cfg);
        env.verify = Verify::Touched;
        env.run(&ops, Start::Format).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
    }
}
