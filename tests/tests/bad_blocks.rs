//! Bad blocks: 2 % factory bad blocks plus grown program and erase failures (a small random
//! program-failure rate, and failures injected on programs and erases while garbage collection
//! runs) over a workload that overwrites the logical capacity several times.
//!
//! Checked: no data loss (every read equals the model, after every op and after a remount), the
//! FTL's counters show the failures and the retirements, and the FTL never programs, erases or
//! marks a factory-bad block (a spy between the FTL and the emulator records every operation on
//! one) and reports every factory-bad block as bad.

use ftl_core::Config;
use ftl_tests::{
    format, geometry, mount, random_workload, session, verify_all, Ctx, CutControl, Log, Model, Outcome, Rng,
    Totals, Verify,
};
use nand_hal::{BlockId, ErrorType, Geometry, NandFlash, PageId};
use sim_host::emulator::{EmuError, Emulator, EmulatorConfig, FaultConfig};
use sim_host::memory::FtlMemory;

/// Passes every operation to the emulator and records those that touch a factory-bad block
/// other than to read it.
struct Spy<'a> {
    emu: &'a mut Emulator,
    violations: Vec<String>,
}

impl Spy<'_> {
    fn check(&mut self, what: &str, b: BlockId) {
        if self.emu.is_factory_bad(b) == Some(true) {
            self.violations.push(format!("{what} of factory-bad block {}", b.0));
        }
    }
}

impl ErrorType for Spy<'_> {
    type Error = EmuError;
}

impl NandFlash for Spy<'_> {
    fn geometry(&self) -> Geometry {
        self.emu.geometry()
    }
    fn read_page(&mut self, page: PageId, data: &mut [u8], spare: &mut [u8]) -> Result<(), EmuError> {
        self.emu.read_page(page, data, spare)
    }
    fn program_page(&mut self, page: PageId, data: &[u8], spare: &[u8]) -> Result<(), EmuError> {
        let b = self.emu.geometry().block_of(page);
        self.check("program", b);
        self.emu.program_page(page, data, spare)
    }
    fn erase_block(&mut self, block: BlockId) -> Result<(), EmuError> {
        self.check("erase", block);
        self.emu.erase_block(block)
    }
    fn is_bad(&mut self, block: BlockId) -> Result<bool, EmuError> {
        self.emu.is_bad(block)
    }
    fn mark_bad(&mut self, block: BlockId) -> Result<(), EmuError> {
        self.check("mark_bad", block);
        self.emu.mark_bad(block)
    }
}

impl CutControl for Spy<'_> {
    fn schedule_cut(&mut self, after: u64) {
        self.emu.schedule_power_cut(after);
    }
}

fn run(seed: u64) -> Totals {
    let geo = geometry(16, 128, 2);
    let cfg = Config::for_utilization(&geo, 600);
    let faults = FaultConfig { factory_bad_permille: 20, program_fail_base: 2e-4, ..FaultConfig::default() };
    let mut emu = Emulator::new(EmulatorConfig { faults, seed, ..EmulatorConfig::new(geo) }).unwrap();
    let factory: Vec<BlockId> = emu.factory_bad_blocks().collect();
    assert!(!factory.is_empty(), "seed {seed}: no factory-bad block drawn");
    let mut mem = FtlMemory::new(&geo, &cfg);
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
        let spy = Spy { emu: &mut emu, violations: Vec::new() };
        let mut ftl = if round == 0 { format(spy, &mut mem, cfg) } else { mount(spy, &mut mem, cfg) }
            .unwrap_or_else(|e| panic!("seed {seed}: format/mount failed: {e:?}"));
        let half = ops.len() / 2;
        let mine = if round == 0 { &ops[..half] } else { &ops[half..] };
        let mut next = 0;
        while next < mine.len() {
            // Grown failures while GC is busy: once the device is full every host write runs GC,
            // so the next few programs and erases are mostly GC's copies and victim erases.
            // About 25 grown bad blocks per run (8 % of the device) besides the random ones.
            let emu = &mut ftl.nand_mut().emu;
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
            let mut ctx = Ctx {
                model: &mut model,
                log: &mut log,
                verify: Verify::Touched,
                mount_cut: &mut mount_cut,
                stop_on_device_error: false,
            };
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
        ftl.nand_mut().emu.clear_injected_failures();
        let mut spy = ftl.unmount().unwrap_or_else(|e| panic!("seed {seed}: unmount failed: {e:?}"));
        model.flush();
        violations.append(&mut spy.violations);
    }
    let spy = Spy { emu: &mut emu, violations: Vec::new() };
    let mut ftl = mount(spy, &mut mem, cfg).unwrap();
    verify_all(&mut ftl, &model).unwrap().unwrap();
    violations.append(&mut ftl.into_nand().violations);
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
