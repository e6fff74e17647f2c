//! Bad blocks: 2 % factory bad blocks plus grown program and erase failures (a small random
//! program-failure rate, and failures injected on programs and erases while garbage collection
//! runs) over a workload that overwrites the logical capacity several times.
//!
//! Checked: no data loss (every read equals the model, after every op and after a remount), the
//! FTL's counters show the failures and the retirements, and the FTL never programs, erases or
//! marks a factory-bad block (a spy between the FTL and the emulator records every operation on
//! one) and reports every factory-bad block as bad.
//!
//! Then failures placed deterministically on a tight two-plane device, at every position in a
//! range: two or three program failures, and failed erases of every free block of one plane.
//! None wears the device out, so every op must succeed (no `NoSpace` while a plane still has a
//! free block) and every read must equal the model, also after a remount.

use ftl_core::blocks::BlockState;
use ftl_core::Config;
use ftl_tests::{
    format, geometry, mount, random_workload, session, verify_all, Ctx, CutHook, EmuResult, Forward, Hook,
    Log, Model, Outcome, Rng, Totals,
};
use nand_emu::{Emulator, EmulatorConfig, FaultConfig};
use nand_hal::{BlockId, Geometry, NandFlash, PageId};

/// Passes every operation to the emulator and records those that touch a factory-bad block
/// other than to read it.
#[derive(Default)]
struct Spy {
    violations: Vec<String>,
}

impl Spy {
    fn check(&mut self, emu: &Emulator, what: &str, b: BlockId) {
        if emu.is_factory_bad(b) == Some(true) {
            self.violations.push(format!("{what} of factory-bad block {}", b.0));
        }
    }
}

impl Hook for Spy {
    type Dev = Emulator;
    fn program_page(&mut self, emu: &mut Emulator, page: PageId, data: &[u8], spare: &[u8]) -> EmuResult {
        let b = emu.geometry().block_of(page);
        self.check(emu, "program", b);
        emu.program_page(page, data, spare)
    }
    fn erase_block(&mut self, emu: &mut Emulator, block: BlockId) -> EmuResult {
        self.check(emu, "erase", block);
        emu.erase_block(block)
    }
    fn mark_bad(&mut self, emu: &mut Emulator, block: BlockId) -> EmuResult {
        self.check(emu, "mark_bad", block);
        emu.mark_bad(block)
    }
}

impl CutHook for Spy {
    fn schedule_cut(&mut self, emu: &mut Emulator, after: u64) {
        emu.schedule_power_cut(after);
    }
}

fn run(seed: u64) -> Totals {
    let geo = geometry(16, 128, 2);
    let cfg = Config::for_utilization(&geo, 600);
    let faults = FaultConfig { factory_bad_permille: 20, program_fail_base: 2e-4, ..FaultConfig::default() };
    let mut emu = Emulator::new(EmulatorConfig { faults, seed, ..EmulatorConfig::new(geo) }).unwrap();
    let factory: Vec<BlockId> = emu.factory_bad_blocks().collect();
    assert!(!factory.is_empty(), "seed {seed}: no factory-bad block drawn");
    // Even seeds run the cached map (an eighth of the map cached).
    let map = ftl_tests::sized_map(ftl_tests::map_choice(seed.is_multiple_of(2)), &cfg);
    let mut mem = ftl_testkit::FtlMemory::with_map(&geo, &cfg, map);
    let mut model = Model::new(cfg.logical_pages);
    let mut log = Log::default();
    let mut mount_cut = None;
    let mut rng = Rng::new(seed);
    let mut totals = Totals::default();
    // Fill the device once, then about four more times its capacity in random overwrites.
    let mut ops: Vec<_> =
        (0..cfg.logical_pages).step_by(4).map(|lpn| ftl_tests::Op::Write { lpn, pages: 4 }).collect();
    ops.extend(random_workload(&mut rng, cfg.logical_pages, 6000));
    let mut violations = Vec::new();
    for round in 0..2 {
        let spy = Forward::new(&mut emu, Spy::default());
        let mut ftl = if round == 0 { format(spy, &mut mem, cfg) } else { mount(spy, &mut mem, cfg) }
            .unwrap_or_else(|e| panic!("seed {seed}: format/mount failed: {e:?}"));
        let half = ops.len() / 2;
        let mine = if round == 0 { &ops[..half] } else { &ops[half..] };
        let mut next = 0;
        while next < mine.len() {
            // Grown failures while GC is busy: once the device is full every host write runs GC,
            // so the next few programs and erases are mostly GC's copies and victim erases.
            // About 25 grown bad blocks per run (8 % of the device) besides the random ones.
            let emu = &mut ftl.nand_mut().dev;
            if rng.chance(1, 3) {
                emu.fail_program_after(rng.below(40));
            }
            if rng.chance(1, 3) {
                emu.inject_erase_failure(BlockId(rng.below(geo.total_blocks() as u64) as u32)).unwrap();
            }
            if rng.chance(1, 6) {
                emu.inject_program_failure(BlockId(rng.below(geo.total_blocks() as u64) as u32)).unwrap();
            }
            let end = (next + 200).min(mine.len());
            let mut ctx = Ctx::touched(&mut model, &mut log, &mut mount_cut);
            let outcome = session(&mut ftl, &mut ctx, &mine[..end], &mut next).unwrap_or_else(|e| {
                panic!(
                    "seed {seed}, round {round}: {e}\ncounters {:?}\nrecent events:\n{}",
                    ftl.counters(),
                    log.dump()
                )
            });
            assert_eq!(outcome, Outcome::End);
        }
        verify_all(&mut ftl, &model).unwrap().unwrap();
        for (b, _, bad) in ftl.erase_counts() {
            if factory.contains(&b) {
                assert!(bad, "seed {seed}: factory-bad block {} not reported bad", b.0);
            }
        }
        totals.add(ftl.counters());
        ftl.nand_mut().dev.clear_injected_failures();
        let mut spy = ftl.unmount().unwrap_or_else(|e| panic!("seed {seed}: unmount failed: {e:?}"));
        model.flush();
        violations.append(&mut spy.hook.violations);
    }
    let spy = Forward::new(&mut emu, Spy::default());
    let mut ftl = mount(spy, &mut mem, cfg).unwrap();
    verify_all(&mut ftl, &model).unwrap().unwrap();
    violations.append(&mut ftl.into_nand().hook.violations);
    assert!(violations.is_empty(), "seed {seed}: {violations:?}");
    assert!(totals.program_failures > 0 && totals.erase_failures > 0, "seed {seed}: {totals:?}");
    assert!(totals.blocks_retired >= totals.erase_failures, "seed {seed}: {totals:?}");
    assert!(
        totals.gc_blocks > 0 && totals.host_write_pages > 4 * cfg.logical_pages as u64,
        "seed {seed}: {totals:?}"
    );
    totals
}

#[test]
fn factory_and_grown_bad_blocks_lose_nothing() {
    for seed in 1..=4 {
        let t = run(seed);
        eprintln!("seed {seed}: {t:?}");
    }
}

// ---------------------------------------------------------------------------------------------
// Deterministic failure placements on a tight two-plane device

/// A small two-plane device (8 pages per block, 20 blocks per plane, 40% of the raw pages
/// exported, a checkpoint every 2 opened blocks) formatted, filled and overwritten with no
/// failures, then unmounted: the starting point of every case, and the workload each case runs.
struct Tight {
    geo: Geometry,
    cfg: Config,
    emu: Emulator,
    mem: ftl_testkit::FtlMemory,
    model: Model,
    window: Vec<ftl_tests::Op>,
    /// The free blocks of each plane as a mount of the device leaves them (all dirty: mount
    /// erases none, so the first allocations erase them).
    free: Vec<Vec<BlockId>>,
    /// Paced GC (the default) or whole victims on demand only.
    pacing: bool,
}

fn tight(seed: u64) -> Tight {
    tight_with(seed, true)
}

/// [`tight`] with paced GC on or off (in the preparation as in the cases).
fn tight_with(seed: u64, pacing: bool) -> Tight {
    let geo = geometry(8, 20, 2);
    let mut cfg = Config::for_utilization(&geo, 400);
    cfg.checkpoint_interval_blocks = 2;
    let mut emu = Emulator::new(EmulatorConfig { seed, ..EmulatorConfig::new(geo) }).unwrap();
    let mut mem = ftl_tests::test_memory(&geo, &cfg);
    let mut model = Model::new(cfg.logical_pages);
    let mut rng = Rng::new(seed);
    let mut ops: Vec<_> =
        (0..cfg.logical_pages).step_by(4).map(|lpn| ftl_tests::Op::Write { lpn, pages: 4 }).collect();
    ops.extend(random_workload(&mut rng, cfg.logical_pages, 400));
    let mut ftl = format(&mut emu, &mut mem, cfg).unwrap();
    ftl.set_gc_pacing(pacing).unwrap();
    let (mut log, mut mount_cut) = (Log::default(), None);
    let mut ctx = Ctx::touched(&mut model, &mut log, &mut mount_cut);
    assert_eq!(session(&mut ftl, &mut ctx, &ops, &mut 0).unwrap(), Outcome::End);
    ftl.unmount().unwrap();
    model.flush();
    let window = random_workload(&mut rng, cfg.logical_pages, 150);
    // The image's last mount is cut (its anchor's newest record says not clean), so every mount
    // of a copy surveys, and a survey has every free block erased before its first use: the
    // erase-failure cases rely on that (after a clean unmount free blocks are known erased).
    mount(&mut emu, &mut mem, cfg).unwrap().into_nand();
    let (mut e, mut m) = (emu.clone(), mem.clone());
    mount(&mut e, &mut m, cfg).unwrap().into_nand();
    let mut free = vec![Vec::new(); geo.total_planes() as usize];
    for (b, info) in m.parts().1.blocks.iter().enumerate() {
        let b = BlockId(b as u32);
        if matches!(info.state(), BlockState::Free | BlockState::Dirty) {
            free[geo.plane_index(b) as usize].push(b);
        }
    }
    Tight { geo, cfg, emu, mem, model, window, free, pacing }
}

/// Mounts a copy of `t`'s device and runs its window one op at a time, calling `arm` before each
/// op with the emulator, the op's index and the FTL's program and erase failures so far; then
/// reads everything back, unmounts, mounts again and reads everything back. Every op must
/// succeed and every read must equal the model. Returns the FTL's counters.
fn run_case(
    t: &Tight,
    mut arm: impl FnMut(&mut Emulator, usize, &ftl_core::Counters),
) -> Result<ftl_core::Counters, String> {
    let (mut emu, mut mem, mut model) = (t.emu.clone(), t.mem.clone(), t.model.clone());
    let (mut log, mut mount_cut) = (Log::default(), None);
    let counters;
    {
        let mut ftl = mount(&mut emu, &mut mem, t.cfg).map_err(|e| format!("mount: {e:?}"))?;
        ftl.set_gc_pacing(t.pacing).map_err(|e| format!("pacing: {e:?}"))?;
        for i in 0..t.window.len() {
            let c = *ftl.counters();
            arm(ftl.nand_mut(), i, &c);
            let mut ctx = Ctx::touched(&mut model, &mut log, &mut mount_cut);
            let mut next = i;
            session(&mut ftl, &mut ctx, &t.window[..i + 1], &mut next)?;
        }
        verify_all(&mut ftl, &model)?.map_err(|o| format!("{o:?}"))?;
        counters = *ftl.counters();
        ftl.nand_mut().clear_injected_failures();
        ftl.unmount().map_err(|e| format!("unmount: {e:?}"))?;
    }
    model.flush();
    let mut ftl = mount(&mut emu, &mut mem, t.cfg).map_err(|e| format!("remount: {e:?}"))?;
    verify_all(&mut ftl, &model)?.map_err(|o| format!("{o:?}"))?;
    Ok(counters)
}

/// Runs `t`'s window with program failures: the first `gaps[0]` programs into the window, each
/// next one `gaps[k]` programs after the op that saw the one before.
fn with_program_failures(t: &Tight, gaps: &[u64]) -> Result<ftl_core::Counters, String> {
    let mut armed = 0;
    let c = run_case(t, |emu, i, c| {
        if armed < gaps.len() && (i == 0 || c.program_failures >= armed as u64) {
            emu.fail_program_after(gaps[armed]);
            armed += 1;
        }
    })?;
    if c.program_failures < gaps.len() as u64 {
        return Err(format!("{} program failures, not {}", c.program_failures, gaps.len()));
    }
    Ok(c)
}

/// Two program failures at every pair of positions. A failure retires a block, and its retry and
/// the retirement's copies take free blocks without GC, so a plane's reserve runs low while a
/// checkpoint is due; the checkpoint must not take the last free block of the plane GC is about
/// to open a block in. Two retired blocks never wear this device out: every op must succeed.
#[test]
fn two_program_failures_never_end_in_no_space() {
    eprintln!("{} cases", program_failures_everywhere(2, 48));
}

/// Runs `count` program failures at every combination of gaps in `0..range` on both tight
/// devices; panics on the first case that does not hold. Returns the number of cases.
fn program_failures_everywhere(count: u32, range: u64) -> u64 {
    let mut cases = 0;
    for seed in 1..=2 {
        let t = tight(seed);
        for n in 0..range.pow(count) {
            let gaps: Vec<u64> = (0..count).map(|k| n / range.pow(count - 1 - k) % range).collect();
            with_program_failures(&t, &gaps)
                .unwrap_or_else(|e| panic!("seed {seed}, failures at {gaps:?}: {e}"));
            cases += 1;
        }
    }
    cases
}

/// Three program failures close together, at every position in a range: each retirement spends
/// free blocks in both planes (the retry's block, GC blocks for the copies), and host writes top a
/// plane up only when they open a block there, so without restoring the reserves after a
/// retirement the third one finds no free block in either plane and GC can no longer run. Three
/// retired blocks never wear this device out: every op must succeed.
#[test]
fn three_program_failures_never_end_in_no_space() {
    eprintln!("{} cases", program_failures_everywhere(3, 16));
}

/// Every free block of one plane fails its next erase, so the plane's first allocations retire
/// them all and it has no free block left while the other plane has its reserve: blocks come from
/// the other plane (host and GC frontiers, checkpoints) until GC restores the emptied plane's
/// reserve. A handful of retired blocks never wears this device out: every op must succeed.
/// GC runs on demand here: paced GC keeps feeding the plane with victims it has just erased, so
/// the injected blocks are often never allocated and the plane is not emptied (the other tests
/// of this file run with pacing).
#[test]
fn erase_failures_emptying_a_plane_spill_into_the_other() {
    let (mut cases, mut emptied, mut retired) = (0, 0, 0);
    for seed in 1..=24 {
        let t = tight_with(seed, false);
        for plane in 0..t.geo.total_planes() {
            let blocks = &t.free[plane as usize];
            assert!(!blocks.is_empty(), "seed {seed}: plane {plane} has no free block");
            let c = run_case(&t, |emu, i, _| {
                if i == 0 {
                    for &b in blocks {
                        emu.inject_erase_failure(b).unwrap();
                    }
                }
            })
            .unwrap_or_else(|e| panic!("seed {seed}, plane {plane} ({blocks:?}): {e}"));
            assert!(c.erase_failures >= 1, "seed {seed}, plane {plane}: {c:?}");
            assert!(c.blocks_retired >= c.erase_failures, "seed {seed}, plane {plane}: {c:?}");
            // The plane was emptied when every block injected failed (the FTL may instead reuse a
            // block GC just erased before it reaches the last ones).
            emptied += u32::from(c.erase_failures >= blocks.len() as u64);
            retired += c.blocks_retired;
            cases += 1;
        }
    }
    eprintln!("{cases} cases, {emptied} planes emptied, {retired} blocks retired");
    assert!(emptied * 4 >= cases * 3, "{emptied} of {cases} planes emptied");
}
