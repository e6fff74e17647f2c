//! GC stripes (`ftl_core::gc_stripe`, issue #20): GC's copies programmed as multi-plane programs
//! over the planes of the victim's LUN, when the caller lends a page buffer per plane
//! (`FtlMemory::lend_gc_stripes`). The workloads write one page per request, so host writes are
//! never striped: every multi-plane program of these runs is a GC stripe (each run checks that
//! `multi_plane_programs == gc_stripes`), and the emulator's count of cuts that tore a whole
//! multi-plane call counts cuts inside GC stripes.
//! - `same_contents_with_gc_stripes_on_and_off`: a GC-heavy random workload on 2 and 4 planes,
//!   flat and cached map, with and without the extra buffers: every page reads back as the model
//!   says in both (so the same contents); on the flat map GC stripes are issued only when lent
//!   (hundreds), with about as many GC copies; on the cached map none (the first version leaves
//!   it out, see `ftl_core::gc_stripe`).
//! - `exhaustive_cuts_in_gc_stripes`: a GC-heavy workload cut at every device operation
//!   (`FTL_TORTURE_STRIDE` = s: every s-th), the recovery mount cut too, on 2 and 4 planes,
//!   under both emulator semantics of a cut multi-plane call; every read checked against the
//!   model (acknowledged writes read back, unacknowledged ones old or new); the cuts must land
//!   inside GC stripes.

use ftl_core::Config;
use ftl_testkit::MapChoice;
use ftl_tests::{geometry, Env, Op, Rng, Start, Verify};
use nand_emu::{Emulator, EmulatorConfig, FaultConfig, MultiPlaneCut};
use nand_hal::Geometry;

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// `n` scaled down by `FTL_TORTURE_STRIDE`.
fn per_stride(n: u64) -> u64 {
    n / env_u64("FTL_TORTURE_STRIDE", 1).max(1)
}

fn emulator(geo: Geometry, torn: f64, seed: u64, cut: MultiPlaneCut) -> Emulator {
    let faults = FaultConfig { torn_fraction: torn, partial_erase_fraction: 0.5, ..FaultConfig::default() };
    Emulator::new(EmulatorConfig { faults, seed, multi_plane_cut: cut, ..EmulatorConfig::new(geo) }).unwrap()
}

/// One-page writes: the whole capacity in order, then overwrites (half of them to a hot tenth if
/// `hot`, else uniform), some reads, trims and flushes, a remount, and more of the same.
fn gc_workload(logical: u32, rng: &mut Rng, len: usize, hot: bool) -> Vec<Op> {
    let mut ops: Vec<Op> = (0..logical).map(|lpn| Op::Write { lpn, pages: 1 }).collect();
    let l = logical as u64;
    let mut random = |ops: &mut Vec<Op>, n: usize| {
        for _ in 0..n {
            let lpn = if hot && rng.chance(1, 2) { rng.below((l / 10).max(1)) } else { rng.below(l) } as u32;
            ops.push(match rng.below(100) {
                0..=84 => Op::Write { lpn, pages: 1 },
                85..=92 => Op::Read { lpn, pages: 1 },
                93..=96 => Op::Trim { lpn, pages: 1 },
                _ => Op::Flush,
            });
        }
    };
    random(&mut ops, len / 2);
    ops.push(Op::Flush);
    ops.push(Op::Remount);
    random(&mut ops, len - len / 2);
    ops.push(Op::Flush);
    ops
}

/// An environment over `emu` on `map` (flat, or the harness's small cache with room for a
/// 4-plane stripe's changes), the extra page buffers lent if `lend`.
fn env(emu: Emulator, cfg: Config, map: MapChoice, lend: bool) -> Env {
    let mut env = Env::new(emu, cfg);
    let map = match (map, ftl_tests::small_map_cache(&cfg)) {
        (MapChoice::Flat, _) => MapChoice::Flat,
        (_, MapChoice::Cached { cache_bytes }) => MapChoice::Cached { cache_bytes: cache_bytes.max(160) },
        (_, flat) => flat,
    };
    env.use_map(map);
    env.mem.lend_gc_stripes(lend);
    env
}

fn map_name(map: MapChoice) -> &'static str {
    if map == MapChoice::Flat {
        "flat map"
    } else {
        "cached map"
    }
}

#[test]
fn same_contents_with_gc_stripes_on_and_off() {
    for map in [MapChoice::Flat, ftl_tests::CACHED] {
        for planes in [2u32, 4] {
            let geo = geometry(16, 32, planes);
            let mut cfg = Config::with_logical_pages(&geo, 380 * planes);
            cfg.checkpoint_interval_blocks = 8;
            let ops = gc_workload(cfg.logical_pages, &mut Rng::new(7 + planes as u64), 4000, true);
            let mut totals = vec![];
            for lend in [false, true] {
                let mut e = env(emulator(geo, 0.5, 3, MultiPlaneCut::CutOpOnly), cfg, map, lend);
                e.verify = Verify::All;
                e.run(&ops, Start::Format).unwrap_or_else(|err| {
                    panic!("{planes} planes, {}, stripes lent {lend}: {err}", map_name(map))
                });
                totals.push(e.totals);
            }
            let (off, on) = (totals[0], totals[1]);
            eprintln!(
                "{planes} planes, {}: GC copies {} -> {}, GC stripes {}, programs {} -> {}",
                map_name(map),
                off.gc_page_copies,
                on.gc_page_copies,
                on.gc_stripes,
                off.nand_programs,
                on.nand_programs
            );
            assert_eq!(off.gc_stripes, 0, "{planes} planes, {}: {off:?}", map_name(map));
            assert_eq!(off.multi_plane_programs, 0, "one-page writes: no host stripe: {off:?}");
            if map != MapChoice::Flat {
                assert_eq!(on.gc_stripes, 0, "{planes} planes, cached map: no GC stripe: {on:?}");
                continue;
            }
            assert!(
                on.gc_stripes > 200 && on.multi_plane_programs == on.gc_stripes,
                "{planes} planes, {}: GC copies must go out as stripes: {on:?}",
                map_name(map)
            );
            // Stripes change where copies go, not how many there are (a few percent).
            let (a, b) = (off.gc_page_copies as f64, on.gc_page_copies as f64);
            assert!((b - a).abs() <= 0.1 * a, "{planes} planes, {}: copies {a} -> {b}", map_name(map));
        }
    }
}

/// Cut runs' sums.
#[derive(Default, Debug)]
struct CutRuns {
    cuts: u64,
    whole_programs: u64,
    gc_stripes: u64,
}

/// A cut test's device and workload: `per_plane` logical pages per plane, `len` random ops
/// (`hot`: half of them to a hot tenth), cut at every `stride`-th operation (times
/// `FTL_TORTURE_STRIDE`).
struct Setup {
    geo: Geometry,
    per_plane: u32,
    len: usize,
    hot: bool,
    stride: u64,
}

/// [`gc_workload`] cut at every `stride`-th device operation, the recovery mount cut too and
/// 12 more ops after the cut, each read checked against the model.
fn exhaustive_cuts(s: &Setup, cut: MultiPlaneCut) -> CutRuns {
    let geo = s.geo;
    let mut cfg = Config::with_logical_pages(&geo, s.per_plane * geo.planes_per_lun);
    cfg.checkpoint_interval_blocks = 4;
    let ops = gc_workload(cfg.logical_pages, &mut Rng::new(11), s.len, s.hot);
    let mut dry = env(emulator(geo, 0.5, 1, cut), cfg, MapChoice::Flat, true);
    dry.verify = Verify::Touched;
    let n = dry.run(&ops, Start::Format).unwrap().ops_at_end;
    let t = dry.totals;
    assert!(
        t.gc_stripes > 20 && t.multi_plane_programs == t.gc_stripes,
        "the workload must reach GC stripes (and no host stripe): {t:?}"
    );
    let stride = (s.stride * env_u64("FTL_TORTURE_STRIDE", 1)).max(1) as usize;
    let mut runs = CutRuns::default();
    for k in (0..n).step_by(stride) {
        let mut e =
            env(emulator(geo, [0.5, 0.999, 0.01][k as usize % 3], k, cut), cfg, MapChoice::Flat, true);
        e.verify = Verify::Touched;
        e.ops_after_cut = Some(12);
        e.mount_cut = Some(((k * 0x9E37_79B9) % 400) as u32);
        e.emu.schedule_power_cut(k);
        let r = e.run(&ops, Start::Format).unwrap_or_else(|err| {
            panic!("{} planes, {cut:?}: cut at device op {k} of {n}: {err}", geo.planes_per_lun)
        });
        assert!(r.format_cut || r.cuts >= 1, "cut at op {k} of {n} never fired");
        assert_eq!(e.totals.multi_plane_programs, e.totals.gc_stripes, "no host stripe");
        runs.cuts += 1;
        runs.whole_programs += e.emu.counters().whole_call_cut_programs;
        runs.gc_stripes += e.totals.gc_stripes;
    }
    eprintln!(
        "{} planes, {cut:?}: {} cut points of {n}; {runs:?}; dry run {t:?}",
        geo.planes_per_lun, runs.cuts
    );
    runs
}

/// 2 planes: every operation of a 2,600-operation run (8-page blocks, uniform overwrites).
#[test]
fn exhaustive_cuts_in_gc_stripes() {
    let s = Setup { geo: geometry(8, 16, 2), per_plane: 64, len: 600, hot: false, stride: 1 };
    for cut in [MultiPlaneCut::CutOpOnly, MultiPlaneCut::WholeCall] {
        let r = exhaustive_cuts(&s, cut);
        if cut == MultiPlaneCut::WholeCall {
            // Every multi-plane program is a GC stripe: these cuts tore one.
            assert!(r.whole_programs > per_stride(50), "cuts must land in GC stripes: {r:?}");
        }
    }
}

/// 4 planes: a larger device (16-page blocks, stripes need 4 valid pages of a victim), every
/// 5th operation.
#[test]
fn cuts_in_gc_stripes_on_four_planes() {
    let s = Setup {
        geo: geometry(16, 32, 4),
        per_plane: env_u64("GCS_LP", 380) as u32,
        len: env_u64("GCS_LEN", 1500) as usize,
        hot: true,
        stride: env_u64("GCS_STRIDE", 5),
    };
    for cut in [MultiPlaneCut::CutOpOnly, MultiPlaneCut::WholeCall] {
        let r = exhaustive_cuts(&s, cut);
        if cut == MultiPlaneCut::WholeCall {
            assert!(r.whole_programs > per_stride(10), "cuts must land in GC stripes: {r:?}");
        }
    }
}
