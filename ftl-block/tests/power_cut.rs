//! The adapter against a byte-array model, with power cuts (the FTL's guarantees carried to
//! sectors, as `ftl_block::disk` states them):
//! - reads always equal the model's bytes; refused calls (bad range, bad length) change nothing;
//! - after a cut and remount, every FTL page reads as one of its versions since the last flush
//!   (the flushed one or one written or trimmed after it): each sector is old or new, all the
//!   sectors of one page agree, and everything flushed survives;
//! - a final clean remount reads everything back.
//!
//! Cuts tear pages and erases (the emulator's `torn_fraction` / `partial_erase_fraction`).
//! `PROPTEST_CASES` sets the case count (default 1000). A second test cuts power at every NAND
//! operation of a partial-page rewrite in turn.

mod common;

use common::{emulator, geometry, is_cut, open};
use ftl_block::{Error, SECTOR_SIZE};
use ftl_core::Config;
use proptest::prelude::*;
use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;
use sim_host::emulator::Emulator;
use sim_host::memory::FtlMemory;

const BLOCKS: u32 = 12;
const LOGICAL_PAGES: u32 = 32;
const SPP: u64 = 4;
const SECTORS: u64 = LOGICAL_PAGES as u64 * SPP;
const PAGE: usize = SPP as usize * SECTOR_SIZE;

fn config() -> Config {
    let mut cfg = Config::with_logical_pages(&geometry(BLOCKS), LOGICAL_PAGES);
    cfg.checkpoint_interval_blocks = 4;
    cfg
}

#[derive(Clone, Debug)]
enum Op {
    /// Writes `n` sectors at `lba` (through `write_with` if `gather`).
    Write {
        lba: u64,
        n: u64,
        seed: u64,
        gather: bool,
    },
    /// Reads `n` sectors at `lba` (through `read_with` if `gather`).
    Read {
        lba: u64,
        n: u64,
        gather: bool,
    },
    Trim {
        lba: u64,
        n: u64,
    },
    Flush,
    /// Power cut after `after` more NAND operations.
    Cut {
        after: u64,
    },
    /// A call the adapter must refuse: 0 write past the end, 1 read past the end, 2 trim past the
    /// end, 3 write of a partial sector, 4 read at an overflowing LBA.
    Bad {
        kind: u8,
        lba: u64,
    },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => (0..SECTORS, 1..=12u64, any::<u64>(), any::<bool>())
            .prop_map(|(lba, n, seed, gather)| Op::Write { lba, n: n.min(SECTORS - lba), seed, gather }),
        3 => (0..SECTORS, 1..=12u64, any::<bool>())
            .prop_map(|(lba, n, gather)| Op::Read { lba, n: n.min(SECTORS - lba), gather }),
        2 => (0..SECTORS, 1..=16u64).prop_map(|(lba, n)| Op::Trim { lba, n: n.min(SECTORS - lba) }),
        1 => Just(Op::Flush),
        1 => (0..120u64).prop_map(|after| Op::Cut { after }),
        1 => (0..5u8, 0..SECTORS).prop_map(|(kind, lba)| Op::Bad { kind, lba }),
    ]
}

/// The expectation: the bytes reads return now and, per FTL page, the contents it may hold after
/// a cut (the last flushed one first, then every one written or trimmed since).
struct Model {
    bytes: Vec<u8>,
    versions: Vec<Vec<Vec<u8>>>,
}

impl Model {
    fn new() -> Self {
        Model {
            bytes: vec![0; SECTORS as usize * SECTOR_SIZE],
            versions: vec![vec![vec![0; PAGE]]; LOGICAL_PAGES as usize],
        }
    }
    fn page(&self, p: usize) -> &[u8] {
        &self.bytes[p * PAGE..(p + 1) * PAGE]
    }
    /// Applies a change of bytes `at..at + data.len()`, recording the new version of each page.
    fn set(&mut self, at: usize, data: &[u8]) {
        self.bytes[at..at + data.len()].copy_from_slice(data);
        for p in at / PAGE..(at + data.len()).div_ceil(PAGE) {
            let v = self.page(p).to_vec();
            self.versions[p].push(v);
        }
    }
    fn flush(&mut self) {
        for p in 0..LOGICAL_PAGES as usize {
            self.versions[p] = vec![self.page(p).to_vec()];
        }
    }
}

fn data(seed: u64, len: usize) -> Vec<u8> {
    let mut v = vec![0u8; len];
    ChaCha8Rng::seed_from_u64(seed).fill_bytes(&mut v);
    v
}

/// After a cut: mounts, checks every page against its versions, and settles the model.
fn recover(emu: &mut Emulator, mem: &mut FtlMemory, model: &mut Model, log: &[String]) -> Result<(), String> {
    emu.restore_power();
    let mut disk = open(emu, mem, config(), false).map_err(|e| format!("mount after a cut failed: {e:?}"))?;
    let mut page = vec![0u8; PAGE];
    for p in 0..LOGICAL_PAGES as usize {
        disk.read(p as u64 * SPP, &mut page).map_err(|e| format!("read after recovery: {e:?}"))?;
        let Some(i) = model.versions[p].iter().position(|v| *v == page) else {
            let sectors: Vec<String> = (0..SPP as usize)
                .map(|s| {
                    let got = &page[s * SECTOR_SIZE..(s + 1) * SECTOR_SIZE];
                    let from: Vec<usize> = model.versions[p]
                        .iter()
                        .enumerate()
                        .filter(|(_, v)| &v[s * SECTOR_SIZE..(s + 1) * SECTOR_SIZE] == got)
                        .map(|(i, _)| i)
                        .collect();
                    format!("sector {s} matches versions {from:?}")
                })
                .collect();
            return Err(format!(
                "page {p} after a cut is none of its {} versions since the last flush ({})\nops: {log:?}",
                model.versions[p].len(),
                sectors.join(", ")
            ));
        };
        let v = model.versions[p][i].clone();
        model.bytes[p * PAGE..(p + 1) * PAGE].copy_from_slice(&v);
        model.versions[p] = vec![v];
    }
    Ok(())
}

/// What a run went through.
#[derive(Default, Debug)]
struct Stats {
    cuts: u32,
    gc_blocks: u64,
    rmw_cuts: u32,
}

fn run(ops: &[Op], torn: f64, erase: f64) -> Result<Stats, String> {
    let mut stats = Stats::default();
    let mut emu = emulator(geometry(BLOCKS), torn, erase);
    let mut mem = FtlMemory::new(&geometry(BLOCKS), &config());
    let mut model = Model::new();
    let mut log = Vec::new();
    let mut next = 0;
    let mut format = true;
    'session: loop {
        let mut disk = open(&mut emu, &mut mem, config(), format).map_err(|e| format!("open: {e:?}"))?;
        format = false;
        while next < ops.len() {
            let op = ops[next].clone();
            next += 1;
            log.push(format!("{op:?}"));
            let r: Result<(), Error> = match op {
                Op::Write { lba, n, seed, gather } => {
                    let d = data(seed, n as usize * SECTOR_SIZE);
                    model.set(lba as usize * SECTOR_SIZE, &d);
                    if gather {
                        disk.write_with(lba, n, |i, s| {
                            s.copy_from_slice(&d[i as usize * SECTOR_SIZE..(i as usize + 1) * SECTOR_SIZE])
                        })
                    } else {
                        disk.write(lba, &d)
                    }
                }
                Op::Read { lba, n, gather } => {
                    let mut b = vec![0u8; n as usize * SECTOR_SIZE];
                    let r = if gather {
                        disk.read_with(lba, n, |i, s| {
                            b[i as usize * SECTOR_SIZE..(i as usize + 1) * SECTOR_SIZE].copy_from_slice(s)
                        })
                    } else {
                        disk.read(lba, &mut b)
                    };
                    let at = lba as usize * SECTOR_SIZE;
                    if r.is_ok() && b[..] != model.bytes[at..at + b.len()] {
                        return Err(format!(
                            "read of {n} sectors at {lba} differs from the model\nops: {log:?}"
                        ));
                    }
                    r
                }
                Op::Trim { lba, n } => {
                    // Whole pages inside the range become zeros; partial pages are left alone.
                    let first = lba.div_ceil(SPP);
                    let end = (lba + n) / SPP;
                    for p in first..end.max(first) {
                        model.set(p as usize * PAGE, &[0u8; PAGE]);
                    }
                    match disk.trim(lba, n) {
                        Ok(t) if t == end.saturating_sub(first) * SPP => Ok(()),
                        Ok(t) => return Err(format!("trim of {n} at {lba} reported {t} sectors")),
                        Err(e) => Err(e),
                    }
                }
                Op::Flush => {
                    let r = disk.flush();
                    if r.is_ok() {
                        model.flush();
                    }
                    r
                }
                Op::Cut { after } => {
                    disk.store_mut().nand_mut().schedule_power_cut(after);
                    Ok(())
                }
                Op::Bad { kind, lba } => {
                    let mut b = vec![0u8; 3 * SECTOR_SIZE];
                    let (r, want) = match kind {
                        0 => (disk.write(SECTORS - 2 + lba % 3, &b), Error::OutOfRange),
                        1 => (disk.read(SECTORS - 1 + lba % 3, &mut b[..2 * SECTOR_SIZE]), Error::OutOfRange),
                        2 => (disk.trim(lba, SECTORS - lba + 1).map(drop), Error::OutOfRange),
                        3 => (disk.write(lba, &b[..SECTOR_SIZE + 1 + lba as usize % 500]), Error::Length),
                        _ => (disk.read(u64::MAX - lba % 2, &mut b[..SECTOR_SIZE]), Error::OutOfRange),
                    };
                    if r != Err(want) {
                        return Err(format!("bad call {kind} at {lba} gave {r:?}, not {want:?}"));
                    }
                    Ok(())
                }
            };
            match r {
                Ok(()) => {}
                Err(e) if is_cut(&e) => {
                    log.push("  cut fired".into());
                    stats.cuts += 1;
                    if let Op::Write { lba, n, .. } = ops[next - 1] {
                        stats.rmw_cuts += (lba % SPP != 0 || n % SPP != 0) as u32;
                    }
                    stats.gc_blocks += disk.store().counters().gc_blocks;
                    drop(disk);
                    recover(&mut emu, &mut mem, &mut model, &log)?;
                    continue 'session;
                }
                Err(e) => return Err(format!("{:?} failed: {e:?}\nops: {log:?}", ops[next - 1])),
            }
        }
        // The end: no cut pending; everything reads back now and after a clean remount.
        disk.store_mut().nand_mut().cancel_power_cut();
        let mut all = vec![0u8; model.bytes.len()];
        disk.read(0, &mut all).map_err(|e| format!("final read: {e:?}"))?;
        if all != model.bytes {
            return Err(format!("final read differs from the model\nops: {log:?}"));
        }
        stats.gc_blocks += disk.store().counters().gc_blocks;
        disk.into_parts().0.unmount().map_err(|e| format!("unmount: {e:?}"))?;
        break;
    }
    let mut disk = open(&mut emu, &mut mem, config(), false).map_err(|e| format!("remount: {e:?}"))?;
    let mut all = vec![0u8; model.bytes.len()];
    disk.read(0, &mut all).map_err(|e| format!("read after remount: {e:?}"))?;
    if all != model.bytes {
        return Err(format!("after a clean remount the device differs from the model\nops: {log:?}"));
    }
    Ok(stats)
}

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES").ok().and_then(|s| s.parse().ok()).unwrap_or(1000)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn sectors_match_model_across_power_cuts(
        ops in proptest::collection::vec(op(), 1..150),
        torn in prop_oneof![Just(0.5), Just(0.999), Just(0.01)],
        erase in prop_oneof![Just(0.5), Just(0.01)],
    ) {
        run(&ops, torn, erase).map_err(TestCaseError::fail)?;
    }
}

/// The generated workloads reach what the property is about: cuts (also in the middle of
/// partial-page writes) and garbage collection.
#[test]
fn workloads_reach_cuts_and_gc() {
    use proptest::strategy::ValueTree;
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let mut total = Stats::default();
    for _ in 0..40 {
        let ops = proptest::collection::vec(op(), 100..150).new_tree(&mut runner).unwrap().current();
        let s = run(&ops, 0.5, 0.5).unwrap();
        total.cuts += s.cuts;
        total.rmw_cuts += s.rmw_cuts;
        total.gc_blocks += s.gc_blocks;
    }
    assert!(total.cuts > 40 && total.rmw_cuts > 5 && total.gc_blocks > 100, "{total:?}");
}

/// A cut at every NAND operation of a one-sector rewrite inside a flushed page (a
/// read-modify-write): the page reads back whole-old or whole-new, never a mix, and the other
/// sectors of the page are intact either way.
#[test]
fn cut_during_partial_page_rewrite_leaves_old_or_new_page() {
    let old = data(1, PAGE);
    let mut new = old.clone();
    new[2 * SECTOR_SIZE..3 * SECTOR_SIZE].copy_from_slice(&data(2, SECTOR_SIZE));
    let (mut saw_old, mut saw_new) = (0, 0);
    for after in 0.. {
        let mut emu = emulator(geometry(BLOCKS), 0.5, 0.5);
        let mut mem = FtlMemory::new(&geometry(BLOCKS), &config());
        {
            let mut disk = open(&mut emu, &mut mem, config(), true).unwrap();
            // Some history first, so the rewrite lands among other pages.
            for p in 0..LOGICAL_PAGES as u64 {
                disk.write(p * SPP, &data(100 + p, PAGE)).unwrap();
            }
            disk.write(5 * SPP, &old).unwrap();
            disk.flush().unwrap();
            disk.store_mut().nand_mut().schedule_power_cut(after);
            match disk.write(5 * SPP + 2, &new[2 * SECTOR_SIZE..3 * SECTOR_SIZE]) {
                Ok(()) => {
                    // The cut did not fire within the rewrite: every cut point was covered.
                    assert!(saw_old > 0 && saw_new + saw_old == after as usize, "{saw_old} {saw_new}");
                    return;
                }
                Err(e) => assert!(is_cut(&e), "{e:?}"),
            }
        }
        emu.restore_power();
        let mut disk = open(&mut emu, &mut mem, config(), false).unwrap();
        let mut page = vec![0u8; PAGE];
        disk.read(5 * SPP, &mut page).unwrap();
        if page == old {
            saw_old += 1;
        } else if page == new {
            saw_new += 1;
        } else {
            panic!("cut after {after} operations left a page that is neither old nor new");
        }
        for p in (0..LOGICAL_PAGES as u64).filter(|&p| p != 5) {
            disk.read(p * SPP, &mut page).unwrap();
            assert_eq!(page, data(100 + p, PAGE), "page {p} after a cut at {after}");
        }
    }
}
