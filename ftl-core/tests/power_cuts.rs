//! The FTL in the configuration this build gives ftl-core, on the emulator (crate `nand-emu`, no
//! FTL features of its own): `cargo test -p ftl-core` runs it with no features, the firmware's
//! configuration, which the workspace's test command (every feature on, through sim-host)
//! never builds; scripts/test.sh also runs it with each feature alone and the two stacks.
//!
//! Random writes, trims, flushes, reads and clean remounts, with power cut at random device
//! operations (programs torn, erases left partial by the emulator), some during the recovery
//! mount, for the flat and the cached map. After each recovery every logical page must read as
//! something it held since the last flush (or the last recovery), a flushed write or trim as
//! itself; after a clean remount, as the model says. The larger suites (model proptest,
//! exhaustive cuts, bit errors, bad blocks) are in tests/ (`ftl-tests`); scripts/test.sh runs
//! model, torture and bit errors in the same configurations (README, "Configurations").

use ftl_core::policy::DefaultPolicies;
use ftl_core::{AnyMap, Config, Error, Ftl};
use ftl_testkit::{FtlMemory, MapChoice};
use nand_emu::{Emulator, EmulatorConfig, FaultConfig};
use nand_hal::{EccRequirement, ErrorKind, Geometry};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

const GEO: Geometry = Geometry {
    data_bytes: 512,
    spare_bytes: 32,
    pages_per_block: 16,
    blocks_per_plane: 40,
    planes_per_lun: 2,
    luns: 1,
    nop: 4,
    sequential_program: true,
    ecc: EccRequirement { bits: 4, codeword_bytes: 512 },
    endurance: 100_000,
};

/// The FTL's memory for either map; the cached map's cache holds 4 map pages: evictions all
/// the time.
fn memory(cfg: &Config, cached: bool) -> FtlMemory {
    let map =
        if cached { MapChoice::Cached { cache_bytes: 4 * GEO.data_bytes as usize } } else { MapChoice::Flat };
    FtlMemory::with_map(&GEO, cfg, map)
}

type TestFtl<'a> = Ftl<'a, &'a mut Emulator, DefaultPolicies, AnyMap<'a>>;

/// What each logical page may read as: `cur` now, `acc` after a power cut (its content at the
/// last flush or recovery and everything written or trimmed since). Content: a write's id, or
/// `None` (zeros: never written or trimmed).
struct Model {
    cur: Vec<Option<u64>>,
    acc: Vec<Vec<Option<u64>>>,
    next: u64,
}

impl Model {
    fn set(&mut self, lpn: u32, c: Option<u64>) {
        self.cur[lpn as usize] = c;
        if !self.acc[lpn as usize].contains(&c) {
            self.acc[lpn as usize].push(c);
        }
    }

    fn flush(&mut self) {
        for (a, c) in self.acc.iter_mut().zip(&self.cur) {
            *a = vec![*c];
        }
    }
}

fn fill(lpn: u32, id: u64, out: &mut [u8]) {
    out.fill((id as u8) ^ 0x5A);
    out[..4].copy_from_slice(&lpn.to_le_bytes());
    out[4..12].copy_from_slice(&id.to_le_bytes());
}

/// The content a page read as: `Some(None)` zeros, `Some(Some(id))` a write, `None` garbage.
fn identify(lpn: u32, page: &[u8]) -> Option<Option<u64>> {
    if page.iter().all(|&b| b == 0) {
        return Some(None);
    }
    let id = u64::from_le_bytes(page[4..12].try_into().unwrap());
    let mut want = vec![0u8; page.len()];
    fill(lpn, id, &mut want);
    (want == page).then_some(Some(id))
}

fn power_lost(e: &Error) -> bool {
    *e == Error::Device(ErrorKind::PowerLoss)
}

/// After a recovery: every page reads as one of its acceptable contents, which becomes the only
/// one.
fn settle(ftl: &mut TestFtl<'_>, model: &mut Model, what: &str) {
    let mut buf = vec![0u8; GEO.data_bytes as usize];
    for lpn in 0..model.cur.len() as u32 {
        ftl.read(lpn, &mut buf).unwrap_or_else(|e| panic!("{what}: read {lpn}: {e:?}"));
        let got = identify(lpn, &buf).unwrap_or_else(|| panic!("{what}: lpn {lpn} reads garbage"));
        assert!(
            model.acc[lpn as usize].contains(&got),
            "{what}: lpn {lpn} reads {got:?}, acceptable {:?}",
            model.acc[lpn as usize]
        );
        model.cur[lpn as usize] = got;
        model.acc[lpn as usize] = vec![got];
    }
}

fn run(seed: u64, cached: bool) -> (u32, u32) {
    let mut cfg = Config::for_utilization(&GEO, 650);
    cfg.checkpoint_interval_blocks = 4;
    assert_eq!(cfg.validate(&GEO, 4), Ok(()));
    let faults = FaultConfig { torn_fraction: 0.9, partial_erase_fraction: 0.5, ..FaultConfig::default() };
    let mut emu = Emulator::new(EmulatorConfig { seed, faults, ..EmulatorConfig::new(GEO) }).unwrap();
    let mut mem = memory(&cfg, cached);
    let n = cfg.logical_pages;
    let mut model = Model { cur: vec![None; n as usize], acc: vec![vec![None]; n as usize], next: 1 };
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let what = |op: usize| format!("seed {seed}, cached {cached}, op {op}");
    let (mut cuts, mut remounts) = (0, 0);
    {
        let (map, m) = mem.parts();
        Ftl::format(&mut emu, DefaultPolicies::default(), map, m, cfg).unwrap().unmount().unwrap();
    }
    let mut op = 0usize;
    while op < 1_500 {
        // One session: a mount (after a cut, a recovery), then operations until a cut, a clean
        // remount or the end. `None`: the mount itself was cut.
        let cut = {
            let (map, m) = mem.parts();
            match Ftl::mount(&mut emu, DefaultPolicies::default(), map, m, cfg) {
                Err(e) if power_lost(&e) => None,
                Err(e) => panic!("{}: mount: {e:?}", what(op)),
                Ok(mut ftl) => {
                    ftl.nand_mut().cancel_power_cut();
                    settle(&mut ftl, &mut model, &what(op));
                    // A cut somewhere in the next operations.
                    ftl.nand_mut().schedule_power_cut(rng.random_range(0..800));
                    Some(session(ftl, &mut model, &mut rng, &mut op, &mut remounts, &what))
                }
            }
        };
        if cut != Some(false) {
            cuts += u32::from(cut.is_some());
            emu.restore_power();
            if cut.is_some() && rng.random_range(0..5) == 0 {
                // The recovery mount cut too.
                emu.schedule_power_cut(rng.random_range(0..200));
            }
        }
    }
    emu.cancel_power_cut();
    emu.restore_power();
    let (map, m) = mem.parts();
    let mut ftl = Ftl::mount(&mut emu, DefaultPolicies::default(), map, m, cfg).unwrap();
    settle(&mut ftl, &mut model, &what(op));
    ftl.unmount().unwrap();
    (cuts, remounts)
}

/// Operations until a power cut (true), a clean remount or the end (false).
fn session(
    mut ftl: TestFtl<'_>,
    model: &mut Model,
    rng: &mut ChaCha8Rng,
    op: &mut usize,
    remounts: &mut u32,
    what: &dyn Fn(usize) -> String,
) -> bool {
    let n = model.cur.len() as u32;
    let mut buf = vec![0u8; GEO.data_bytes as usize];
    loop {
        *op += 1;
        if *op >= 1_500 {
            return false;
        }
        let lpn = rng.random_range(0..n);
        let r = match rng.random_range(0..20) {
            0..=11 => {
                let id = model.next;
                model.next += 1;
                model.set(lpn, Some(id));
                fill(lpn, id, &mut buf);
                ftl.write(lpn, &buf)
            }
            12..=13 => {
                let count = rng.random_range(1..=4).min(n - lpn);
                for l in lpn..lpn + count {
                    model.set(l, None);
                }
                ftl.trim(lpn, count)
            }
            14..=15 => ftl.flush().inspect(|_| model.flush()),
            16..=18 => ftl.read(lpn, &mut buf).map(|_| {
                let got = identify(lpn, &buf);
                assert_eq!(got, Some(model.cur[lpn as usize]), "{}: read of lpn {lpn}", what(*op));
            }),
            _ => {
                // A clean remount: the next mount finds everything as the model says.
                return match ftl.unmount() {
                    Ok(_) => {
                        model.flush();
                        *remounts += 1;
                        false
                    }
                    Err(e) if power_lost(&e) => true,
                    Err(e) => panic!("{}: unmount: {e:?}", what(*op)),
                };
            }
        };
        match r {
            Ok(()) => {}
            Err(e) if power_lost(&e) => return true,
            Err(e) => panic!("{}: {e:?}", what(*op)),
        }
    }
}

fn runs(cached: bool) {
    let seeds = std::env::var("FTL_CORE_CUT_SEEDS").ok().and_then(|s| s.parse().ok()).unwrap_or(12u64);
    let (mut cuts, mut remounts) = (0, 0);
    for seed in 0..seeds {
        let (c, r) = run(seed, cached);
        cuts += c;
        remounts += r;
    }
    // The runs reach what they are about.
    assert!(cuts >= seeds as u32 && remounts >= seeds as u32, "{cuts} cuts, {remounts} remounts");
}

#[test]
fn power_cuts_flat_map() {
    runs(false);
}

#[test]
fn power_cuts_cached_map() {
    runs(true);
}
