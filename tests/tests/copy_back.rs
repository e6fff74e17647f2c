//! Copy-back GC (issue #20; `ftl-core/src/gc_copy_back.rs`, `Config::gc_copy_back`).
//!
//! - `copy_back_gc_stores_what_read_and_program_store`: two identical emulators run the same
//!   workload (GC, static wear leveling, trims, flushes, a remount), one FTL with copy-back GC
//!   and one without; every page of the two devices holds the same data and spare bytes
//!   afterwards, with the flat and with the cached map; the copy-back run moved pages by
//!   copy-back (FTL and emulator counters) and transferred fewer bytes in.
//! - `aborted_check_moves_the_page_like_a_failed_read`: a logical page whose data the codec
//!   reports uncorrectable (a test codec) is aborted by the check on every move and then moved
//!   the plain way: same pages on flash as the run without copy-back, its reads report
//!   `Uncorrectable` in both, every other page is exact.
//! - `checked_copies_stay_exact_under_raw_bit_errors`: with raw bit errors (BCH t = 8), cold
//!   pages moved by copy-back for dozens of generations read back exact; the same run through a
//!   device that drops the corrected data the check writes back (the raw read's errors are
//!   programmed, as an unchecked copy-back would) loses cold pages: the check is what keeps them.
//! - `random_cuts_during_copy_back_gc`: the torture harness (`Env`, random power cuts always
//!   pending, a quarter of the recovery mounts cut, flat and cached maps) with copy-back GC;
//!   cuts land in copy-backs' reads and programs (counted by the harness's device) and no
//!   acknowledged data is lost. It runs in every build configuration, the no-feature
//!   (firmware) one included (scripts/test.sh lists this suite).
//!   `random_cuts_during_copy_back_gc_with_flex_ecc` (feature `flex-ecc`): the same with
//!   FlexECC attached and its codec, so GC's copy-backs take FlexECC's move plan.

use ftl_core::policy::{
    CodecError, Crc32cCodec, DefaultPolicies, Greedy, PageCodec, Policies, PolicySet, RequestSizeClassifier,
    SingleHostStream,
};
use ftl_core::{Config, Counters, Error};
use ftl_policies::flex_ecc::BchCodec;
use ftl_testkit::FtlMemory;
use ftl_tests::{
    fill_page, format_with, geometry, identify, mount_with, random_workload, Env, Forward, Found, Hook,
    RandomCuts, Rng, Start, Verify,
};
use nand_emu::{EmuError, Emulator, EmulatorConfig, FaultConfig};
use nand_hal::{
    BlockId, CopyBackAction, CopyBackCaps, CopyBackError, CopyBackOp, EccRequirement, Geometry, NandFlash,
    PageId,
};

type PoliciesWith<C> = Policies<C, RequestSizeClassifier, Greedy, SingleHostStream>;

fn policies_with<C>(codec: C) -> PoliciesWith<C> {
    let d = DefaultPolicies::default();
    Policies { codec, classifier: d.classifier, victim: d.victim, placement: d.placement }
}

/// Every page of `emu`: (data, spare) as stored.
fn image(emu: &Emulator) -> Vec<Option<(Vec<u8>, Vec<u8>)>> {
    let g = emu.geometry();
    (0..g.total_pages()).map(|p| emu.peek_page(PageId(p)).map(|(d, s)| (d.to_vec(), s.to_vec()))).collect()
}

/// The CRC-32C codec, except that data written for logical page `poisoned` never decodes (as
/// if its page had more bit errors than any codec corrects).
#[derive(Clone)]
struct Poisoned {
    poisoned: Option<u32>,
}

impl PageCodec for Poisoned {
    fn spare_len(&self) -> usize {
        Crc32cCodec.spare_len()
    }
    fn encode(&mut self, data: &[u8], out: &mut [u8]) {
        Crc32cCodec.encode(data, out)
    }
    fn decode(&mut self, data: &mut [u8], stored: &[u8]) -> Result<u32, CodecError> {
        if self.poisoned.is_some_and(|l| data[8..12] == l.to_le_bytes()) {
            return Err(CodecError::Uncorrectable);
        }
        Crc32cCodec.decode(data, stored)
    }
}

/// What one deterministic run left.
struct Run {
    image: Vec<Option<(Vec<u8>, Vec<u8>)>>,
    erase_counts: Vec<u32>,
    ftl: Counters,
    bytes_in: u64,
    emu_copy_backs: u64,
    /// Per logical page: what a read returned at the end (`None`: `Uncorrectable`).
    reads: Vec<Option<Found>>,
}

/// Writes every page, then a seeded random workload with overwrites, trims, flushes and a clean
/// remount, on a two-plane device (static wear leveling tight, so cold data moves too).
fn workload_run(copy_back: bool, cached: bool, poisoned: Option<u32>) -> Run {
    let geo = geometry(8, 32, 2);
    let mut cfg = Config::for_utilization(&geo, 600);
    cfg.gc_copy_back = copy_back;
    cfg.wear_spread_limit = 4;
    cfg.wear_check_interval = 4;
    let mut emu = Emulator::new(EmulatorConfig::new(geo)).unwrap();
    let mut mem = FtlMemory::with_map(&geo, &cfg, ftl_tests::sized_map(ftl_tests::map_choice(cached), &cfg));
    let policies = policies_with(Poisoned { poisoned });
    let mut rng = Rng::new(7);
    let mut page = vec![0u8; 512];
    let mut id = 1u64;
    let mut write = |f: &mut ftl_tests::TestFtl<'_, &mut Emulator, _>, lpn: u32, id: &mut u64| {
        fill_page(lpn, *id, &mut page);
        *id += 1;
        f.write(lpn, &page).unwrap();
    };
    let mut ftl_counters = Counters::default();
    for round in 0..2 {
        let mut f = if round == 0 {
            format_with(&mut emu, &mut mem, cfg, policies.clone()).unwrap()
        } else {
            mount_with(&mut emu, &mut mem, cfg, policies.clone()).unwrap()
        };
        if round == 0 {
            for lpn in 0..cfg.logical_pages {
                write(&mut f, lpn, &mut id);
            }
        }
        for op in random_workload(&mut rng, cfg.logical_pages, 1500) {
            match op {
                ftl_tests::Op::Write { lpn, pages } => {
                    for l in lpn..(lpn + pages).min(cfg.logical_pages) {
                        // The poisoned page keeps its first write (it moves only by GC).
                        if Some(l) != poisoned {
                            write(&mut f, l, &mut id);
                        }
                    }
                }
                ftl_tests::Op::Trim { lpn, pages } => {
                    let end = (lpn + pages).min(cfg.logical_pages);
                    if !poisoned.is_some_and(|p| (lpn..end).contains(&p)) {
                        f.trim(lpn, end - lpn).unwrap();
                    }
                }
                ftl_tests::Op::Flush => f.flush().unwrap(),
                _ => {}
            }
        }
        add(&mut ftl_counters, f.counters());
        f.unmount().unwrap();
    }
    let mut f = mount_with(&mut emu, &mut mem, cfg, policies).unwrap();
    let reads = (0..cfg.logical_pages)
        .map(|lpn| match f.read(lpn, &mut page) {
            Ok(()) => Some(identify(lpn, &page)),
            Err(Error::Uncorrectable { lpn: l }) if l == lpn => None,
            Err(e) => panic!("read {lpn}: {e:?}"),
        })
        .collect();
    drop(f);
    let g = emu.geometry();
    Run {
        image: image(&emu),
        erase_counts: (0..g.total_blocks()).map(|b| emu.erase_count(BlockId(b)).unwrap()).collect(),
        ftl: ftl_counters,
        bytes_in: emu.counters().bytes_in,
        emu_copy_backs: emu.counters().copy_backs,
        reads,
    }
}

fn add(sum: &mut Counters, c: &Counters) {
    sum.gc_page_copies += c.gc_page_copies;
    sum.gc_copy_backs += c.gc_copy_backs;
    sum.gc_copy_back_corrected += c.gc_copy_back_corrected;
    sum.gc_copy_back_aborts += c.gc_copy_back_aborts;
    sum.wear_level_moves += c.wear_level_moves;
    sum.nand_programs += c.nand_programs;
    sum.nand_reads += c.nand_reads;
}

#[test]
fn copy_back_gc_stores_what_read_and_program_store() {
    for cached in [false, true] {
        let plain = workload_run(false, cached, None);
        let cb = workload_run(true, cached, None);
        let map = if cached { "cached" } else { "flat" };
        assert!(plain.ftl.gc_page_copies > 500, "{map}: {:?}", plain.ftl);
        assert!(plain.ftl.wear_level_moves > 0, "{map}: {:?}", plain.ftl);
        assert_eq!((plain.ftl.gc_copy_backs, plain.emu_copy_backs), (0, 0), "{map}");
        // Same operations, same pages, byte for byte.
        assert_eq!(cb.ftl.gc_page_copies, plain.ftl.gc_page_copies, "{map}");
        assert_eq!(
            (cb.ftl.nand_programs, cb.ftl.nand_reads),
            (plain.ftl.nand_programs, plain.ftl.nand_reads)
        );
        assert_eq!(cb.erase_counts, plain.erase_counts, "{map}");
        let differ = cb.image.iter().zip(&plain.image).filter(|(a, b)| a != b).count();
        assert_eq!(differ, 0, "{map}: {differ} pages differ");
        let programmed = |i: &[Option<(Vec<u8>, Vec<u8>)>]| {
            i.iter().flatten().filter(|(_, s)| s.iter().any(|&b| b != 0xFF)).count()
        };
        assert!(programmed(&cb.image) > cb.image.len() / 2, "{map}: compared pages hold data");
        assert_eq!(cb.reads, plain.reads, "{map}");
        assert!(cb.reads.iter().all(|r| matches!(r, Some(Found::Content(_)))), "{map}");
        // Copy-backs did the moving: counted by the FTL and by the chip, and each saved the
        // data area's transfer in (the spare is written back).
        assert_eq!(cb.ftl.gc_copy_backs, cb.emu_copy_backs, "{map}");
        assert_eq!(cb.ftl.gc_copy_back_corrected, 0, "{map}");
        if cached {
            // A map entry not in RAM cannot be faulted in inside the check: those pages abort.
            assert!(cb.ftl.gc_copy_backs > 0 && cb.ftl.gc_copy_back_aborts > 0, "{map}: {:?}", cb.ftl);
        } else {
            assert_eq!(cb.ftl.gc_copy_back_aborts, 0, "{map}");
            assert!(cb.ftl.gc_copy_backs * 10 >= cb.ftl.gc_page_copies * 9, "{map}: {:?}", cb.ftl);
        }
        assert_eq!(plain.bytes_in - cb.bytes_in, cb.emu_copy_backs * 512, "{map}");
    }
}

#[test]
fn aborted_check_moves_the_page_like_a_failed_read() {
    let poisoned = Some(3);
    let plain = workload_run(false, false, poisoned);
    let cb = workload_run(true, false, poisoned);
    // The poisoned page moved (by GC or wear leveling) and every move's check aborted.
    assert!(cb.ftl.gc_copy_back_aborts > 0, "{:?}", cb.ftl);
    assert!(cb.ftl.gc_copy_backs > 0);
    let differ = cb.image.iter().zip(&plain.image).filter(|(a, b)| a != b).count();
    assert_eq!(differ, 0, "{differ} pages differ");
    assert_eq!(cb.reads, plain.reads);
    for (lpn, r) in cb.reads.iter().enumerate() {
        if Some(lpn as u32) == poisoned {
            assert_eq!(*r, None, "the poisoned page reads uncorrectable");
        } else {
            assert!(matches!(r, Some(Found::Content(_))), "lpn {lpn}: {r:?}");
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Raw bit errors

/// BCH(m = 13, t = 8) over 512-byte codewords.
type Bch8 = BchCodec<8192, 2>;

/// The emulator behind a copy-back check that corrects data but whose corrected bytes are not
/// written back: the register is programmed with the raw read's data (its bit errors
/// included), as a copy-back without the check's `write_data` would.
struct DropCorrections;

impl Hook for DropCorrections {
    type Dev = Emulator;
    fn copy_back_caps(&self, emu: &Emulator) -> CopyBackCaps {
        emu.copy_back_caps()
    }
    fn copy_back(
        &mut self,
        emu: &mut Emulator,
        op: CopyBackOp<'_>,
        check: &mut dyn FnMut(&mut [u8], &mut [u8]) -> CopyBackAction,
    ) -> Result<CopyBackAction, CopyBackError<EmuError>> {
        emu.copy_back(op, &mut |data, spare| match check(data, spare) {
            CopyBackAction::Program { write_spare, .. } => {
                CopyBackAction::Program { write_data: false, write_spare }
            }
            a => a,
        })
    }
}

/// Cold pages written once, then hot pages overwritten so that GC and static wear leveling move
/// the cold ones again and again, at RBER `1.4e-4`: 0.6 raw errors per 4232-bit codeword read
/// (P(> 8) ~ 1.5e-8 per read), metadata P(>= 4 of 200 bits) ~ 2.5e-8 per read. Stored unchecked,
/// errors add up by 0.6 per generation and pass t = 8 after about 13 generations on average.
/// Returns (cold pages exact, cold pages lost, the FTL's counters).
fn bit_error_run(drop_corrections: bool) -> (u32, u32, Counters) {
    let geo = Geometry {
        spare_bytes: 64,
        ecc: EccRequirement { bits: 8, codeword_bytes: 512 },
        ..geometry(8, 24, 1)
    };
    let mut cfg = Config::for_utilization(&geo, 600);
    cfg.wear_spread_limit = 2;
    cfg.wear_check_interval = 1;
    let faults = FaultConfig { rber: 1.4e-4, ..FaultConfig::default() };
    let mut emu = Emulator::new(EmulatorConfig { faults, seed: 5, ..EmulatorConfig::new(geo) }).unwrap();
    let mut mem = FtlMemory::new(&geo, &cfg);
    let policies = policies_with(Bch8::for_geometry(&geo).unwrap());
    let cold = cfg.logical_pages / 2;
    let mut page = vec![0u8; 512];
    let mut sum = Counters::default();
    let (exact, lost) = if drop_corrections {
        let mut f = format_with(Forward::new(&mut emu, DropCorrections), &mut mem, cfg, policies).unwrap();
        let r = cold_and_hot(&mut f, &cfg, cold, &mut page);
        add(&mut sum, f.counters());
        r
    } else {
        let mut f = format_with(&mut emu, &mut mem, cfg, policies).unwrap();
        let r = cold_and_hot(&mut f, &cfg, cold, &mut page);
        add(&mut sum, f.counters());
        r
    };
    (exact, lost, sum)
}

/// Writes every page once, overwrites the hot half (from `cold` on) 40 times its size over,
/// then reads the cold half back: (exact, uncorrectable).
fn cold_and_hot<N: NandFlash, P: PolicySet>(
    f: &mut ftl_tests::TestFtl<'_, N, P>,
    cfg: &Config,
    cold: u32,
    page: &mut [u8],
) -> (u32, u32) {
    for lpn in 0..cfg.logical_pages {
        fill_page(lpn, lpn as u64 + 1, page);
        f.write(lpn, page).unwrap();
    }
    let mut rng = Rng::new(3);
    let first = cfg.logical_pages as u64 + 1;
    for id in first..first + 40 * cfg.logical_pages as u64 {
        let lpn = cold + rng.below((cfg.logical_pages - cold) as u64) as u32;
        fill_page(lpn, id, page);
        f.write(lpn, page).unwrap();
    }
    let (mut exact, mut lost) = (0, 0);
    for lpn in 0..cold {
        match f.read(lpn, page) {
            Ok(()) if identify(lpn, page) == Found::Content(Some(lpn as u64 + 1)) => exact += 1,
            Ok(()) => panic!("lpn {lpn}: wrong data returned"),
            Err(Error::Uncorrectable { .. }) => lost += 1,
            Err(e) => panic!("lpn {lpn}: {e:?}"),
        }
    }
    (exact, lost)
}

#[test]
fn checked_copies_stay_exact_under_raw_bit_errors() {
    let (exact, lost, c) = bit_error_run(false);
    eprintln!("checked: {exact} exact, {lost} lost, {c:?}");
    assert_eq!(lost, 0);
    // Every move was a copy-back (flat map, CRC inside BCH decodes) and the share that needed a
    // correction is P(>= 1 error in 4232 bits) = 1 - exp(-0.59) = 0.45.
    assert_eq!((c.gc_copy_backs, c.gc_copy_back_aborts), (c.gc_page_copies, 0), "{c:?}");
    let corrected = c.gc_copy_back_corrected as f64 / c.gc_copy_backs as f64;
    assert!((0.38..0.52).contains(&corrected), "{corrected} of copies corrected: {c:?}");
    // Many generations: static wear leveling moved blocks (of cold data, mostly) hundreds of
    // times, so every cold page dozens of times.
    assert!(c.wear_level_moves * 8 >= 30 * exact as u64, "{c:?}");
    let (exact_u, lost_u, cu) = bit_error_run(true);
    eprintln!("corrections dropped: {exact_u} exact, {lost_u} lost, {cu:?}");
    assert_eq!(exact_u + lost_u, exact);
    assert!(lost_u > exact / 4, "dropping the corrected data must lose pages: {lost_u} of {exact}");
}

// ---------------------------------------------------------------------------------------------
// Power cuts

#[test]
fn random_cuts_during_copy_back_gc() {
    copy_back_cuts(|_| DefaultPolicies::default(), false);
}

/// Seeds 22 and 72 of the run above (reached with `FTL_COPY_BACK_CUTS=12000`; with copy-back on
/// or off): on the 32-block device, cuts during recovery mounts left one free block or none.
/// Seed 22: the first GC block opened afterwards found a checkpoint due and wrote it first,
/// with no block left for it (`NoSpace`); the checkpoint now waits for the free blocks GC brings
/// back (`frontier.rs`, `ensure_frontier`). Seed 72: paced GC finished a victim holding a live
/// journal page, whose erase forces a checkpoint, with no free block; such a victim now goes
/// back to the lists unerased and GC takes a victim without one first (`gc.rs`,
/// `erase_waits_for_room`).
#[test]
fn gc_finds_room_after_cuts_during_mounts() {
    copy_back_cuts_from(22, 1, |_| DefaultPolicies::default(), false);
    copy_back_cuts_from(72, 1, |_| DefaultPolicies::default(), false);
}

/// The same with FlexECC attached (its codec, BCH t = 4 per 512 bytes, in the correcting format:
/// the harness writes dirty data), on a 64-byte spare: GC's copies of FlexECC pages are
/// copy-backs too, and cuts land in them (conversions under cuts: flex_ecc.rs).
#[cfg(feature = "flex-ecc")]
#[test]
fn random_cuts_during_copy_back_gc_with_flex_ecc() {
    use ftl_policies::flex_ecc::FlexCodec;
    let codec = |geo: &Geometry| {
        FlexCodec::<8192, 1>::new(BchCodec::new(13, 4, 512, geo.data_bytes as usize).unwrap())
    };
    copy_back_cuts(|geo| policies_with(codec(geo)), true);
}

/// Random cuts (see the module doc) until `FTL_COPY_BACK_CUTS` (default 400) fired and some
/// landed in copy-backs' reads and in their programs; FlexECC attached if `flex`.
fn copy_back_cuts<P: PolicySet + Clone>(policies: impl Fn(&Geometry) -> P, flex: bool) {
    let target = std::env::var("FTL_COPY_BACK_CUTS").ok().and_then(|v| v.parse().ok()).unwrap_or(400u64);
    copy_back_cuts_from(1, target, policies, flex);
}

/// As [`copy_back_cuts`], from seed `first` until `target` cuts fired.
fn copy_back_cuts_from<P: PolicySet + Clone>(
    first: u64,
    target: u64,
    policies: impl Fn(&Geometry) -> P,
    flex: bool,
) {
    let (mut cuts, mut in_copy_back, mut copy_backs) = (0u64, [0u32; 2], 0u64);
    let mut seed = first;
    while cuts < target || in_copy_back.contains(&0) {
        assert!(seed < first + 200, "{cuts} cuts, {in_copy_back:?} in copy-backs after {seed} seeds");
        let mut rng = Rng::new(seed);
        let geo = [(8, 24, 2), (8, 32, 1)][rng.below(2) as usize];
        let mut geo = geometry(geo.0, geo.1, geo.2);
        if flex {
            geo.spare_bytes = 64;
        }
        let mut cfg = Config::for_utilization(&geo, 650);
        cfg.checkpoint_interval_blocks = 8;
        assert!(cfg.gc_copy_back, "on by default");
        let faults =
            FaultConfig { torn_fraction: 0.5, partial_erase_fraction: 0.5, ..FaultConfig::default() };
        let emu = Emulator::new(EmulatorConfig { faults, seed, ..EmulatorConfig::new(geo) }).unwrap();
        let mut ops = Vec::new();
        for _ in 0..4 {
            ops.extend(random_workload(&mut rng, cfg.logical_pages, 400));
            ops.push(ftl_tests::Op::Remount);
        }
        let mut env = Env::with_policies(emu, cfg, policies(&geo));
        env.cfg.gc_copy_back = true; // the harness default, kept also under `FTL_TEST_COPY_BACK=0`
        #[cfg(feature = "flex-ecc")]
        if flex {
            env.ext.flex = ftl_tests::stack::FlexParts::for_build(&geo, &env.cfg);
        }
        env.use_map(ftl_tests::map_choice(seed.is_multiple_of(2)));
        env.verify = Verify::Touched;
        env.random_cuts = Some(RandomCuts::within_600(seed ^ 0xC0B));
        let s = env.run(&ops, Start::Format).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        cuts += s.cuts as u64;
        in_copy_back[0] += env.faults.copy_back_cuts[0];
        in_copy_back[1] += env.faults.copy_back_cuts[1];
        copy_backs += env.totals.gc_copy_backs;
        seed += 1;
    }
    eprintln!(
        "flex {flex}: {cuts} cuts over {} seeds, {in_copy_back:?} in copy-back reads/programs, {copy_backs} copy-backs",
        seed - 1
    );
}
