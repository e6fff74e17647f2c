//! Model-based property test: random sequences of writes, reads, trims, flushes, power cuts at
//! random device-operation offsets (sometimes cutting the recovery mount too) and clean remounts,
//! checked against an in-memory model after every step:
//! - reads always equal the model's current contents;
//! - after a cut and remount, every logical page reads as its content at the last flush or a
//!   content written or trimmed after it (guarantee 2), so everything flushed survives
//!   (guarantee 1), and mount never fails because of the cut;
//! - operations after a remount keep matching the model, and a final clean unmount and mount
//!   reads everything back.
//!
//! Cuts tear pages and erases with varying completeness (the emulator's `torn_fraction` and
//! `partial_erase_fraction`), so torn pages with whole metadata and half-erased blocks with
//! readable old pages occur too. `PROPTEST_CASES` sets the case count (default 2000).

use ftl_core::Config;
use ftl_tests::{geometry, Env, Op, Start, Verify};
use proptest::prelude::*;
use sim_host::emulator::{Emulator, EmulatorConfig, FaultConfig};

const PPB: u32 = 4;
const BLOCKS_PER_PLANE: u32 = 12;
const PLANES: u32 = 2;

fn config() -> Config {
    let geo = geometry(PPB, BLOCKS_PER_PLANE, PLANES);
    let mut cfg = Config::with_logical_pages(&geo, 32);
    cfg.checkpoint_interval_blocks = 4;
    cfg
}

fn op(logical: u32) -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => (0..logical, 1..=4u32).prop_map(|(lpn, pages)| Op::Write { lpn, pages }),
        2 => (0..logical, 1..=4u32).prop_map(|(lpn, pages)| Op::Read { lpn, pages }),
        2 => (0..logical, 1..=8u32).prop_map(|(lpn, pages)| Op::Trim { lpn, pages }),
        1 => Just(Op::Flush),
        1 => (0..400u32, proptest::option::weighted(0.3, 0..80u32))
            .prop_map(|(after, mount_after)| Op::Cut { after, mount_after }),
        1 => Just(Op::Remount),
    ]
}

fn run(ops: &[Op], torn: f64, erase: f64) -> Result<(), String> {
    let cfg = config();
    let faults = FaultConfig { torn_fraction: torn, partial_erase_fraction: erase, ..FaultConfig::default() };
    let emu = Emulator::new(EmulatorConfig {
        faults,
        ..EmulatorConfig::new(geometry(PPB, BLOCKS_PER_PLANE, PLANES))
    })
    .unwrap();
    let mut env = Env::new(emu, cfg);
    env.verify = Verify::All;
    env.run(ops, Start::Format).map(drop)
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: ftl_tests::proptest_cases(2000),
        max_shrink_iters: 4096,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn ftl_matches_model(
        ops in proptest::collection::vec(op(config().logical_pages), 1..300),
        torn in prop_oneof![Just(0.5), Just(0.99), Just(0.999), Just(1.0), Just(0.01)],
        erase in prop_oneof![Just(0.5), Just(0.01), Just(0.999)],
    ) {
        run(&ops, torn, erase).map_err(TestCaseError::fail)?;
    }
}

/// The configuration exercises what the property is about: GC, checkpoints and journal pages
/// all happen within one generated sequence's reach.
#[test]
fn config_reaches_gc_and_checkpoints() {
    let cfg = config();
    let mut env = Env::with_geometry(geometry(PPB, BLOCKS_PER_PLANE, PLANES), cfg);
    let mut ops = Vec::new();
    for i in 0..100u32 {
        ops.push(Op::Write { lpn: (i * 7) % 64, pages: 3 });
        if i % 10 == 0 {
            ops.push(Op::Trim { lpn: i % 64, pages: 2 });
            ops.push(Op::Flush);
        }
    }
    env.run(&ops, Start::Format).unwrap();
    let t = env.totals;
    assert!(t.gc_blocks > 0 && t.checkpoints > 2 && t.journal_pages > 0, "{t:?}");
}

/// Regression (found by `ftl_matches_model`): a write to a page with a trim still pending in RAM
/// was lost after flush and a power cut, because the flush journaled the older trim with a newer
/// sequence number than the write, so mount replayed the trim after the write.
#[test]
fn write_after_pending_trim_survives_flush_and_cut() {
    let geo = geometry(PPB, BLOCKS_PER_PLANE, PLANES);
    let cfg = config();
    let mut env = Env::with_geometry(geo, cfg);
    let ops = [
        Op::Write { lpn: 5, pages: 1 },
        Op::Flush,
        Op::Trim { lpn: 5, pages: 1 },
        Op::Write { lpn: 5, pages: 1 },
        Op::Flush,
        // A cut at the next device operation: the reads that check the flush.
        Op::Cut { after: 0, mount_after: None },
        Op::Read { lpn: 5, pages: 1 },
    ];
    let stats = env.run(&ops, Start::Format).unwrap();
    assert_eq!(stats.cuts, 1);
}
