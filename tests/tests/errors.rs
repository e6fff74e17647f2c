//! Guarantee 3: nothing the outside world can cause panics; errors come back as the right
//! [`Error`] and leave the state consistent.
//!
//! - Bad arguments (out-of-range pages, `lpn + len` overflowing, empty or unaligned buffers,
//!   trims out of range) return `OutOfRange` / `BufferSize`, issue no device operation and change
//!   nothing.
//! - Mounting a blank device is `NotFormatted`; mounting with another logical capacity is
//!   `Corrupt`; memory of the wrong size is `Memory`; an invalid configuration or geometry is
//!   `Config` (from format and mount, before any device operation).
//! - Device errors come back as `Device(kind)`: with the power off every call that needs the
//!   device fails with `Device(PowerLoss)`, and after power returns the same FTL keeps working.
//!   A transient error (a timeout, injected at every device operation of a workload in turn,
//!   once with the operation skipped and once with it performed) leaves every page at an
//!   acceptable content, the workload continues on the same FTL, and after a flush everything
//!   survives a power cut.
//! - A device that runs out of good blocks makes writes fail with `NoSpace`, and what was flushed
//!   before survives.
//! - Corrupt images (random bytes programmed into pages, bytes flipped in what the device
//!   returns, pages forged with valid metadata and codec bytes but nonsense fields, checkpoints
//!   re-signed after a word was changed, blocks erased or marked bad): mount returns an error or
//!   mounts, and whatever follows returns errors or works, but nothing panics.

use std::collections::HashMap;

use ftl_core::checkpoint::{checkpoint_pages, checkpoint_words, FRONTIER_WORDS, HEADER_WORDS};
use ftl_core::crc32c::{crc32c, crc32c_append};
use ftl_core::meta::{PageKind, PageMeta, SpareState, META_LEN};
use ftl_core::policy::DefaultPolicies;
use ftl_core::{BlockInfo, Config, Error, FlatMap, Ftl, Memory, RamLayout};
use ftl_testkit::MapChoice;
use ftl_tests::{
    fill_page, format, geometry, identify, mount, random_workload, session, settle_all, verify_all, Ctx,
    CutControl, EmuResult, FaultPlan, Faulty, Forward, Found, Hook, Log, Model, Op, Outcome, Rng, Verify,
};
use nand_emu::{Emulator, EmulatorConfig, FaultConfig};
use nand_hal::{BlockId, ErrorKind, Geometry, NandFlash, PageId};
use proptest::prelude::*;

fn small() -> (Geometry, Config) {
    let geo = geometry(8, 16, 2);
    let mut cfg = Config::with_logical_pages(&geo, 64);
    cfg.checkpoint_interval_blocks = 4;
    (geo, cfg)
}

fn page(lpn: u32, id: u64) -> Vec<u8> {
    let mut p = vec![0u8; 512];
    fill_page(lpn, id, &mut p);
    p
}

/// A formatted device holding a workload's data (flushed and cleanly unmounted), and its model.
fn populated(seed: u64) -> (Emulator, Model) {
    populated_with(seed, ftl_tests::default_map())
}

fn populated_with(seed: u64, map: MapChoice) -> (Emulator, Model) {
    let (geo, cfg) = small();
    let mut env = ftl_tests::Env::with_geometry(geo, cfg);
    env.use_map(map);
    // Single-plane operations: GC then erases each victim at once, so the image keeps erased
    // blocks, which the forged-page tests write into (with multi-plane operations GC leaves its
    // victims to be erased at allocation: `ftl_core::multiplane`).
    env.multi_plane = false;
    let mut rng = Rng::new(seed);
    let mut ops = random_workload(&mut rng, cfg.logical_pages, 300);
    ops.push(Op::Trim { lpn: 10, pages: 3 });
    env.run(&ops, ftl_tests::Start::Format).unwrap();
    (env.emu, env.model)
}

// ---------------------------------------------------------------------------------------------
// Arguments

#[test]
fn bad_arguments_return_errors_and_change_nothing() {
    let (geo, cfg) = small();
    let (mut emu, model) = populated(1);
    let mut mem = ftl_tests::test_memory(&geo, &cfg);
    let mut f = mount(&mut emu, &mut mem, cfg).unwrap();
    let l = cfg.logical_pages;
    let before = (f.nand().ops_issued(), *f.counters());
    let mut one = vec![0u8; 512];
    let mut two = vec![0u8; 1024];
    let data = page(0, 999);
    let cases: Vec<(&str, Result<(), Error>, Error)> = vec![
        ("read at capacity", f.read(l, &mut one), Error::OutOfRange),
        ("read past capacity", f.read(l - 1, &mut two), Error::OutOfRange),
        ("read at u32::MAX", f.read(u32::MAX, &mut one), Error::OutOfRange),
        ("read overflowing", f.read(u32::MAX, &mut two), Error::OutOfRange),
        ("read empty", f.read(0, &mut []), Error::BufferSize),
        ("read unaligned", f.read(0, &mut [0u8; 513]), Error::BufferSize),
        ("read short", f.read(0, &mut [0u8; 511]), Error::BufferSize),
        ("write at capacity", f.write(l, &data), Error::OutOfRange),
        ("write past capacity", f.write(l - 1, &two), Error::OutOfRange),
        ("write overflowing", f.write(u32::MAX, &two), Error::OutOfRange),
        ("write empty", f.write(0, &[]), Error::BufferSize),
        ("write unaligned", f.write(0, &data[..100]), Error::BufferSize),
        ("write unaligned long", f.write(0, &[0u8; 600]), Error::BufferSize),
        ("trim at capacity", f.trim(l, 1), Error::OutOfRange),
        ("trim past capacity", f.trim(l - 2, 3), Error::OutOfRange),
        ("trim overflowing", f.trim(u32::MAX, 2), Error::OutOfRange),
        ("trim huge count", f.trim(1, u32::MAX), Error::OutOfRange),
    ];
    for (what, got, want) in cases {
        assert_eq!(got, Err(want), "{what}");
    }
    assert_eq!(f.trim(5, 0), Ok(()), "an empty trim is a no-op");
    assert_eq!(f.trim(l, 0), Ok(()), "an empty trim at the end is a no-op");
    let after = (f.nand().ops_issued(), *f.counters());
    assert_eq!(before.0, after.0, "rejected calls issued device operations");
    assert_eq!(before.1.host_write_pages, after.1.host_write_pages);
    assert_eq!(before.1.host_trim_pages, after.1.host_trim_pages);
    verify_all(&mut f, &model).unwrap().unwrap();
    f.unmount().unwrap();
    let mut f = mount(&mut emu, &mut mem, cfg).unwrap();
    verify_all(&mut f, &model).unwrap().unwrap();
}

// ---------------------------------------------------------------------------------------------
// Images, memory and configuration

#[test]
fn blank_device_is_not_formatted() {
    let (geo, cfg) = small();
    let mut emu = Emulator::new(EmulatorConfig::new(geo)).unwrap();
    let mut mem = ftl_tests::test_memory(&geo, &cfg);
    assert_eq!(mount(&mut emu, &mut mem, cfg).err(), Some(Error::NotFormatted));
    // With factory bad blocks too.
    let faults = FaultConfig { factory_bad: vec![3, 17], ..FaultConfig::default() };
    let mut emu = Emulator::new(EmulatorConfig { faults, ..EmulatorConfig::new(geo) }).unwrap();
    assert_eq!(mount(&mut emu, &mut mem, cfg).err(), Some(Error::NotFormatted));
}

#[test]
fn other_configuration_is_corrupt() {
    let (geo, cfg) = small();
    let (mut emu, model) = populated(2);
    for other_pages in [cfg.logical_pages - 1, cfg.logical_pages + 1, 8] {
        let other = Config { logical_pages: other_pages, ..cfg };
        let mut mem = ftl_tests::test_memory(&geo, &other);
        assert_eq!(mount(&mut emu, &mut mem, other).err(), Some(Error::Corrupt), "{other_pages} pages");
    }
    // Other tunables do not change the image: it mounts.
    let other = Config { gc_free_threshold: cfg.gc_free_threshold + 1, wear_spread_limit: 5, ..cfg };
    let mut mem = ftl_tests::test_memory(&geo, &other);
    let mut f = mount(&mut emu, &mut mem, other).unwrap();
    verify_all(&mut f, &model).unwrap().unwrap();
}

#[test]
fn memory_of_the_wrong_size_is_a_memory_error() {
    let (geo, cfg) = small();
    let (mut emu, _) = populated(3);
    let lay = RamLayout::new(&geo, &cfg);
    // Each buffer one element short and one too long, the map included.
    for which in 0..5 {
        for delta in [-1i64, 1] {
            let size = |n: usize, i: usize| if i == which { (n as i64 + delta) as usize } else { n };
            let mut map = vec![0u32; size(lay.map_words, 0)];
            let mut valid = vec![0u32; size(lay.valid_words, 1)];
            let mut blocks = vec![BlockInfo::EMPTY; size(lay.blocks, 2)];
            let mut heads = vec![0u32; size(lay.list_heads, 3)];
            let mut buf = vec![0u8; size(lay.page_buf, 4)];
            let before = emu.ops_issued();
            for fmt in [false, true] {
                let (map, mem) = (
                    FlatMap::new(&mut map),
                    Memory {
                        valid: &mut valid,
                        blocks: &mut blocks,
                        list_heads: &mut heads,
                        page_buf: &mut buf,
                    },
                );
                let r = if fmt {
                    Ftl::format(&mut emu, DefaultPolicies::default(), map, mem, cfg).map(drop)
                } else {
                    Ftl::mount(&mut emu, DefaultPolicies::default(), map, mem, cfg).map(drop)
                };
                assert_eq!(r, Err(Error::Memory), "format {fmt}, buffer {which} off by {delta}");
            }
            assert_eq!(emu.ops_issued(), before);
        }
    }
    // Memory laid out for another capacity.
    let other = Config { logical_pages: cfg.logical_pages / 2, ..cfg };
    let mut mem = ftl_tests::test_memory(&geo, &other);
    assert_eq!(mount(&mut emu, &mut mem, cfg).err(), Some(Error::Memory));
}

#[test]
fn invalid_configuration_is_a_config_error() {
    let (geo, cfg) = small();
    let bad_cfgs = [
        Config { logical_pages: 0, ..cfg },
        Config { logical_pages: geo.total_pages(), ..cfg },
        Config { logical_pages: u32::MAX, ..cfg },
        Config { gc_free_threshold: 1, ..cfg },
        Config { gc_free_threshold: 0, ..cfg },
        Config { gc_free_threshold: u32::MAX, ..cfg },
        Config { checkpoint_interval_blocks: 0, ..cfg },
        Config { checkpoint_interval_blocks: Config::MAX_REPLAY_BLOCKS, ..cfg },
        Config { checkpoint_interval_blocks: u32::MAX, ..cfg },
        Config { wear_check_interval: 0, ..cfg },
    ];
    let bad_geos = [
        (Geometry { spare_bytes: 16, ..geo }, "spare too small for metadata and codec"),
        (Geometry { data_bytes: 32, ..geo }, "page smaller than a checkpoint header"),
        (Geometry { pages_per_block: 1, ..geo }, "one page per block"),
        (
            Geometry { planes_per_lun: 4, luns: 8, blocks_per_plane: 2, ..geo },
            "more planes than the FTL drives",
        ),
    ];
    let mut emu = Emulator::new(EmulatorConfig::new(geo)).unwrap();
    for c in bad_cfgs {
        let lay = RamLayout::new(&geo, &c);
        if lay.map_words > 1 << 24 {
            // Too large to allocate; checked without memory of the right size below.
            let mut mem = ftl_tests::test_memory(&geo, &cfg);
            assert!(matches!(format(&mut emu, &mut mem, c).err(), Some(Error::Config)), "{c:?}");
            continue;
        }
        let mut mem = ftl_tests::test_memory(&geo, &c);
        assert_eq!(format(&mut emu, &mut mem, c).err(), Some(Error::Config), "format {c:?}");
        assert_eq!(mount(&mut emu, &mut mem, c).err(), Some(Error::Config), "mount {c:?}");
    }
    for (g, why) in bad_geos {
        let Ok(mut e) = Emulator::new(EmulatorConfig::new(g)) else { continue };
        let c = Config { logical_pages: 16, ..Config::with_logical_pages(&g, 16) };
        let mut mem = ftl_tests::test_memory(&g, &c);
        assert_eq!(format(&mut e, &mut mem, c).err(), Some(Error::Config), "{why}");
        assert_eq!(mount(&mut e, &mut mem, c).err(), Some(Error::Config), "{why}");
        assert_eq!(e.ops_issued(), 0, "{why}");
    }
    assert_eq!(emu.ops_issued(), 0);
}

// ---------------------------------------------------------------------------------------------
// Device errors

#[test]
fn power_off_is_a_device_error_and_the_ftl_recovers_when_it_returns() {
    let (geo, cfg) = small();
    let (mut emu, mut model) = populated(4);
    // The flat map: a trim needs no device until it is journaled (with the cached map it may
    // have to read a map page first).
    let mut mem = ftl_testkit::FtlMemory::new(&geo, &cfg);
    emu.power_cut_now();
    assert_eq!(mount(&mut emu, &mut mem, cfg).err(), Some(Error::Device(ErrorKind::PowerLoss)));
    {
        let mut scratch = Emulator::new(EmulatorConfig::new(geo)).unwrap();
        scratch.power_cut_now();
        assert_eq!(format(&mut scratch, &mut mem, cfg).err(), Some(Error::Device(ErrorKind::PowerLoss)));
    }
    emu.restore_power();
    let mut f = mount(&mut emu, &mut mem, cfg).unwrap();
    let mapped = (0..cfg.logical_pages).find(|&l| model.cur[l as usize].is_some()).unwrap();
    f.nand_mut().power_cut_now();
    let mut buf = vec![0u8; 512];
    let power_loss = Err(Error::Device(ErrorKind::PowerLoss));
    assert_eq!(f.read(mapped, &mut buf), power_loss);
    let ids = model.write(0, 2);
    let two: Vec<u8> = ids.iter().enumerate().flat_map(|(i, &id)| page(i as u32, id)).collect();
    assert_eq!(f.write(0, &two), power_loss);
    // A trim needs no device until it is journaled; the flush that journals it fails.
    model.trim(20, 2);
    assert_eq!(f.trim(20, 2), Ok(()));
    assert_eq!(f.flush(), power_loss);
    f.nand_mut().restore_power();
    // The same FTL keeps working: every page reads as an acceptable content, then as written.
    settle_all(&mut f, &mut model, false).unwrap().unwrap();
    let ids = model.write(0, 2);
    let two: Vec<u8> = ids.iter().enumerate().flat_map(|(i, &id)| page(i as u32, id)).collect();
    f.write(0, &two).unwrap();
    f.flush().unwrap();
    model.flush();
    verify_all(&mut f, &model).unwrap().unwrap();
    f.nand_mut().power_cut_now();
    assert_eq!(f.unmount().err(), Some(Error::Device(ErrorKind::PowerLoss)));
    emu.restore_power();
    let mut f = mount(&mut emu, &mut mem, cfg).unwrap();
    verify_all(&mut f, &model).unwrap().unwrap();
}

/// Runs the transient-error workload with the error at device operation `k` (of the mount and
/// the workload). Returns the number of device operations when nothing failed.
fn transient_run(k: u64, performed: bool) -> Result<u64, String> {
    let (geo, cfg) = small();
    let (mut emu, mut model) = populated(5);
    let mut rng = Rng::new(6);
    let mut ops = random_workload(&mut rng, cfg.logical_pages, 150);
    ops.push(Op::Flush);
    let mut mem = ftl_tests::test_memory(&geo, &cfg);
    let mut log = Log::default();
    let mut mount_cut = None;
    let mut errors = 0;
    let start = emu.ops_issued();
    let mut plan = FaultPlan::default();
    let count = {
        let mut dev = Faulty { emu: &mut emu, plan: &mut plan };
        dev.schedule_transient(k, performed);
        let mut f = match mount(dev, &mut mem, cfg) {
            Ok(f) => f,
            Err(Error::Device(ErrorKind::Timeout)) => {
                errors += 1;
                mount(Faulty { emu: &mut emu, plan: &mut plan }, &mut mem, cfg)
                    .map_err(|e| format!("mount after a failed mount: {e:?}"))?
            }
            Err(e) => return Err(format!("mount: {e:?}")),
        };
        let mut next = 0;
        loop {
            let mut ctx = Ctx {
                model: &mut model,
                log: &mut log,
                verify: Verify::Touched,
                mount_cut: &mut mount_cut,
                stop_on_device_error: true,
                flex_intents: false,
            };
            match session(&mut f, &mut ctx, &ops, &mut next)? {
                Outcome::End => break,
                Outcome::DeviceError(e) => {
                    errors += 1;
                    log.push(format!("device error {e:?}"));
                    if errors > 1 {
                        return Err(format!("a second device error: {e:?}"));
                    }
                    settle_all(&mut f, &mut model, false)?.map_err(|o| format!("{o:?} while settling"))?;
                }
                o => return Err(format!("unexpected {o:?}")),
            }
        }
        let count = f.nand().emu.ops_issued() - start;
        f.nand_mut().clear_survivable_faults();
        verify_all(&mut f, &model)?.map_err(|o| format!("{o:?}"))?;
        count
    };
    // Everything was flushed by the last op: it all survives a cut.
    emu.power_cut_now();
    emu.restore_power();
    let mut f = mount(&mut emu, &mut mem, cfg).map_err(|e| format!("mount after the cut: {e:?}"))?;
    verify_all(&mut f, &model).map_err(|e| format!("after the cut: {e}"))?.map_err(|o| format!("{o:?}"))?;
    if k < count && errors == 0 && plan.transients_fired == 0 {
        return Err(format!("the error at op {k} of {count} never surfaced"));
    }
    let _ = log;
    Ok(count)
}

fn transient_errors(performed: bool) {
    let n = transient_run(u64::MAX, performed).unwrap();
    let mut failures = Vec::new();
    for k in 0..n {
        if let Err(e) = transient_run(k, performed) {
            failures.push(format!("timeout at device op {k} of {n} (performed: {performed}): {e}"));
        }
    }
    assert!(failures.is_empty(), "{} of {n} failed; first: {}", failures.len(), failures[0]);
}

#[test]
fn transient_device_error_at_every_operation_not_performed() {
    transient_errors(false);
}

#[test]
fn transient_device_error_at_every_operation_performed() {
    transient_errors(true);
}

#[test]
fn running_out_of_good_blocks_is_no_space() {
    let (geo, cfg) = small();
    let (mut emu, mut model) = populated(7);
    let mut mem = ftl_tests::test_memory(&geo, &cfg);
    let mut f = mount(&mut emu, &mut mem, cfg).unwrap();
    // From now on every erase fails: blocks retire one after another until none is left.
    let faults = FaultConfig { erase_fail_base: 1.0, ..FaultConfig::default() };
    f.nand_mut().set_fault_config(faults).unwrap();
    let mut result = Ok(());
    for i in 0..100_000u32 {
        let lpn = i % cfg.logical_pages;
        let ids = model.write(lpn, 1);
        result = f.write(lpn, &page(lpn, ids[0]));
        if result.is_err() {
            break;
        }
    }
    assert_eq!(result, Err(Error::NoSpace), "{:?} {:?}", f.counters(), f.nand().counters());
    assert!(f.counters().blocks_retired > 0);
    // Acknowledged writes still read back (the failed one as old or new).
    settle_all(&mut f, &mut model, false).unwrap().unwrap();
    // More writes: each fails with NoSpace or (where an open block still has room) succeeds.
    let mut failures = 0;
    for lpn in 0..20 {
        let ids = model.write(lpn, 1);
        match f.write(lpn, &page(lpn, ids[0])) {
            Ok(()) => {}
            Err(Error::NoSpace) => failures += 1,
            Err(e) => panic!("write after NoSpace: {e:?}"),
        }
    }
    assert!(failures > 0);
    settle_all(&mut f, &mut model, false).unwrap().unwrap();
    let flushed = f.flush();
    assert!(matches!(flushed, Ok(()) | Err(Error::NoSpace)), "{flushed:?}");
    let unmounted = f.unmount().map(drop);
    assert!(matches!(unmounted, Ok(()) | Err(Error::NoSpace)), "{unmounted:?}");
    // Whatever the device still holds mounts and reads as acceptable contents.
    emu.power_cut_now();
    emu.restore_power();
    let mut f = mount(&mut emu, &mut mem, cfg).unwrap();
    settle_all(&mut f, &mut model, true).unwrap().unwrap();
}

// ---------------------------------------------------------------------------------------------
// Corrupt images

/// Returns chosen pages with replaced or flipped contents, as if the array held them.
#[derive(Default)]
struct Overlay {
    pages: HashMap<u32, (Vec<u8>, Vec<u8>)>,
}

/// The emulator behind an [`Overlay`].
type Overlaid<'a> = Forward<&'a mut Emulator, Overlay>;

impl Hook for Overlay {
    type Dev = Emulator;
    fn read_page(&mut self, emu: &mut Emulator, page: PageId, data: &mut [u8], sp: &mut [u8]) -> EmuResult {
        emu.read_page(page, data, sp)?;
        if let Some((d, s)) = self.pages.get(&page.0) {
            data.copy_from_slice(&d[..data.len()]);
            sp.copy_from_slice(&s[..sp.len()]);
        }
        Ok(())
    }
    fn program_page(&mut self, emu: &mut Emulator, page: PageId, data: &[u8], spare: &[u8]) -> EmuResult {
        self.pages.remove(&page.0);
        emu.program_page(page, data, spare)
    }
    fn erase_block(&mut self, emu: &mut Emulator, block: BlockId) -> EmuResult {
        let ppb = emu.geometry().pages_per_block;
        for p in block.0 * ppb..(block.0 + 1) * ppb {
            self.pages.remove(&p);
        }
        emu.erase_block(block)
    }
}

#[derive(Clone, Debug)]
enum Corruption {
    /// Programs bytes at an offset of a page's data or spare area (rules permitting).
    Program { page: u32, spare: bool, offset: u16, bytes: Vec<u8> },
    /// XORs a byte of what reads of a page return.
    Flip { page: u32, spare: bool, offset: u16, mask: u8 },
    /// Makes a page read as a page this FTL could have written: valid metadata and codec bytes
    /// around nonsense (random data, any kind, tag, sequence number and aux word).
    Forge { page: u32, kind: u8, tag: u32, seq: u64, aux: u32, erase_count: u32, data_seed: u64 },
    /// Changes one word of the newest checkpoint and re-signs it (stream CRC and codec bytes).
    CheckpointWord { index: u32, value: u32 },
    /// Erases a block.
    Erase { block: u32 },
    /// Marks a block bad.
    MarkBad { block: u32 },
}

fn interesting_u32() -> impl Strategy<Value = u32> {
    prop_oneof![
        Just(0u32),
        Just(1),
        Just(7),
        Just(63),
        Just(64),
        Just(65),
        Just(255),
        Just(u32::MAX),
        Just(u32::MAX - 1),
        any::<u32>()
    ]
}

fn interesting_u64() -> impl Strategy<Value = u64> {
    prop_oneof![
        Just(0u64),
        Just(1),
        1..2000u64,
        Just(u64::MAX),
        Just(u64::MAX - 1),
        Just(u64::MAX / 2),
        any::<u64>()
    ]
}

fn corruption(pages: u32, blocks: u32) -> impl Strategy<Value = Corruption> {
    prop_oneof![
        (0..pages, any::<bool>(), 0..560u16, proptest::collection::vec(any::<u8>(), 1..64))
            .prop_map(|(page, spare, offset, bytes)| Corruption::Program { page, spare, offset, bytes }),
        (0..pages, any::<bool>(), 0..512u16, 1..=255u8)
            .prop_map(|(page, spare, offset, mask)| Corruption::Flip { page, spare, offset, mask }),
        (
            0..pages,
            0..5u8,
            interesting_u32(),
            interesting_u64(),
            interesting_u32(),
            interesting_u32(),
            any::<u64>()
        )
            .prop_map(|(page, kind, tag, seq, aux, erase_count, data_seed)| Corruption::Forge {
                page,
                kind,
                tag,
                seq,
                aux,
                erase_count,
                data_seed
            }),
        (0..400u32, interesting_u32()).prop_map(|(index, value)| Corruption::CheckpointWord { index, value }),
        (0..blocks).prop_map(|block| Corruption::Erase { block }),
        (0..blocks).prop_map(|block| Corruption::MarkBad { block }),
    ]
}

/// Pages of the newest checkpoint, in order.
fn newest_checkpoint(emu: &Emulator) -> Vec<PageId> {
    let g = emu.geometry();
    let mut found: Vec<(u64, u32, PageId)> = (0..g.total_pages())
        .map(PageId)
        .filter_map(|p| match PageMeta::decode(emu.peek_page(p).unwrap().1) {
            SpareState::Valid(m) if m.kind == PageKind::Checkpoint => Some((m.seq, m.tag, p)),
            _ => None,
        })
        .collect();
    let newest = found.iter().map(|f| f.0).max().unwrap_or(0);
    found.retain(|f| f.0 == newest);
    found.sort();
    found.into_iter().map(|f| f.2).collect()
}

fn apply(c: &Corruption, dev: &mut Overlaid<'_>, cfg: &Config) {
    let g = dev.dev.geometry();
    let (d, s) = (g.data_bytes as usize, g.spare_bytes as usize);
    let current = |dev: &Overlaid<'_>, p: u32| -> (Vec<u8>, Vec<u8>) {
        dev.hook.pages.get(&p).cloned().unwrap_or_else(|| {
            let (a, b) = dev.dev.peek_page(PageId(p)).unwrap();
            (a.to_vec(), b.to_vec())
        })
    };
    match c {
        Corruption::Program { page, spare, offset, bytes } => {
            let (len, off) = if *spare { (s, *offset as usize % s) } else { (d, *offset as usize % d) };
            let mut buf = vec![0xFFu8; (off + bytes.len()).min(len)];
            let n = buf.len() - off;
            buf[off..].copy_from_slice(&bytes[..n]);
            // Refused programs (NOP, order) are part of the fuzzing: ignore them.
            let _ = if *spare {
                dev.dev.program_page(PageId(*page), &[], &buf)
            } else {
                dev.dev.program_page(PageId(*page), &buf, &[])
            };
            dev.hook.pages.remove(page);
        }
        Corruption::Flip { page, spare, offset, mask } => {
            let (mut data, mut sp) = current(dev, *page);
            if *spare {
                sp[*offset as usize % s] ^= mask;
            } else {
                data[*offset as usize % d] ^= mask;
            }
            dev.hook.pages.insert(*page, (data, sp));
        }
        Corruption::Forge { page, kind, tag, seq, aux, erase_count, data_seed } => {
            let mut data = vec![0u8; d];
            fill_page(*tag, data_seed | 1, &mut data);
            if *kind == 2 {
                // A journal page: a count and (lpn, pages) pairs drawn from the seed.
                data[..4].copy_from_slice(&(data_seed % 70).to_le_bytes()[..4]);
            }
            let mut sp = vec![0xFFu8; s];
            let kind = match kind {
                1 => PageKind::Data,
                2 => PageKind::Journal,
                _ => PageKind::Checkpoint,
            };
            PageMeta { kind, tag: *tag, seq: *seq, erase_count: *erase_count, aux: *aux }.encode(&mut sp);
            sp[META_LEN..META_LEN + 4].copy_from_slice(&crc32c(&data).to_le_bytes());
            dev.hook.pages.insert(*page, (data, sp));
        }
        Corruption::CheckpointWord { index, value } => {
            let pages = newest_checkpoint(dev.dev);
            let total = checkpoint_words(&g, cfg.logical_pages) as usize;
            if pages.len() != checkpoint_pages(&g, cfg.logical_pages) as usize {
                return;
            }
            let per_page = d / 4;
            let mut contents: Vec<(Vec<u8>, Vec<u8>)> = pages.iter().map(|p| current(dev, p.0)).collect();
            let mut words: Vec<u32> = contents
                .iter()
                .flat_map(|(data, _)| data.chunks_exact(4).map(|w| u32::from_le_bytes(w.try_into().unwrap())))
                .collect();
            // Aim at the interesting parts: header, frontiers, block words, map.
            let i = (*index as usize) % (total - 1);
            words[i] = *value;
            let body: Vec<u8> = words[..total - 1].iter().flat_map(|w| w.to_le_bytes()).collect();
            words[total - 1] = crc32c_append(0, &body);
            for (k, (data, sp)) in contents.iter_mut().enumerate() {
                for (j, w) in words[k * per_page..(k + 1) * per_page].iter().enumerate() {
                    data[j * 4..j * 4 + 4].copy_from_slice(&w.to_le_bytes());
                }
                sp[META_LEN..META_LEN + 4].copy_from_slice(&crc32c(data).to_le_bytes());
            }
            for (p, c) in pages.iter().zip(contents) {
                dev.hook.pages.insert(p.0, c);
            }
            let _ = (HEADER_WORDS, FRONTIER_WORDS);
        }
        Corruption::Erase { block } => {
            let _ = dev.erase_block(BlockId(*block));
        }
        Corruption::MarkBad { block } => {
            let _ = dev.dev.mark_bad(BlockId(*block));
        }
    }
}

/// Mounts a corrupted image and, if that works, uses it; returns what happened. Panics are the
/// failure the property looks for.
fn exercise(emu: &mut Emulator, corruptions: &[Corruption], cut: bool) -> String {
    exercise_with(emu, corruptions, cut, ftl_tests::default_map())
}

fn exercise_with(emu: &mut Emulator, corruptions: &[Corruption], cut: bool, map: MapChoice) -> String {
    let (geo, cfg) = small();
    if cut {
        emu.power_cut_now();
        emu.restore_power();
    }
    let mut dev = Forward::new(emu, Overlay::default());
    for c in corruptions {
        apply(c, &mut dev, &cfg);
    }
    let mut mem = ftl_testkit::FtlMemory::with_map(&geo, &cfg, ftl_tests::sized_map(map, &cfg));
    let mut f = match mount(dev, &mut mem, cfg) {
        Ok(f) => f,
        Err(e) => return format!("mount: {e:?}"),
    };
    let mut buf = vec![0u8; 512 * 4];
    let mut outcome = String::from("mounted");
    for l in (0..cfg.logical_pages).step_by(4) {
        if let Err(e) = f.read(l, &mut buf) {
            outcome += &format!(", read {l}: {e:?}");
        }
    }
    for i in 0..200u32 {
        let lpn = (i * 7) % cfg.logical_pages;
        if let Err(e) = f.write(lpn, &page(lpn, 10_000 + i as u64)) {
            outcome += &format!(", write {lpn}: {e:?}");
            break;
        }
        if i % 50 == 0 {
            let _ = f.trim((i * 3) % cfg.logical_pages, 2);
            let _ = f.flush();
        }
    }
    for l in 0..cfg.logical_pages {
        let _ = f.read(l, &mut buf[..512]);
    }
    let r = f.unmount().map(drop);
    outcome + &format!(", unmount: {r:?}")
}

fn base_image() -> &'static (Emulator, Emulator) {
    static BASE: std::sync::OnceLock<(Emulator, Emulator)> = std::sync::OnceLock::new();
    BASE.get_or_init(|| base_image_with(ftl_tests::default_map()))
}

/// The same images written with the cached map (map pages on flash to corrupt).
fn base_image_cached() -> &'static (Emulator, Emulator) {
    static BASE: std::sync::OnceLock<(Emulator, Emulator)> = std::sync::OnceLock::new();
    BASE.get_or_init(|| base_image_with(ftl_tests::CACHED))
}

fn base_image_with(map: MapChoice) -> (Emulator, Emulator) {
    {
        // A cleanly unmounted image, and one cut in the middle of a workload (so mount replays).
        let (clean, _) = populated_with(8, map);
        let (geo, cfg) = small();
        let mut env = ftl_tests::Env::with_geometry(geo, cfg);
        env.use_map(map);
        let mut rng = Rng::new(9);
        let mut ops = random_workload(&mut rng, cfg.logical_pages, 200);
        ops.push(Op::Cut { after: 0, mount_after: None });
        ops.push(Op::Read { lpn: 0, pages: 1 });
        env.ops_after_cut = Some(0);
        env.run(&ops, ftl_tests::Start::Format).unwrap();
        (clean, env.emu)
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: ftl_tests::proptest_cases(2000),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn corrupt_images_never_panic(
        corruptions in proptest::collection::vec(corruption(small().0.total_pages(), small().0.total_blocks()), 1..6),
        replaying in any::<bool>(),
    ) {
        let (clean, cut) = base_image();
        let mut emu = if replaying { cut.clone() } else { clean.clone() };
        let outcome = exercise(&mut emu, &corruptions, false);
        prop_assert!(!outcome.is_empty());
    }

    /// The same on images written with the cached map: corrupted, forged or erased map pages
    /// give typed errors (or harmless outcomes), never a panic.
    #[test]
    fn corrupt_cached_map_images_never_panic(
        corruptions in proptest::collection::vec(corruption(small().0.total_pages(), small().0.total_blocks()), 1..6),
        replaying in any::<bool>(),
    ) {
        let (clean, cut) = base_image_cached();
        let mut emu = if replaying { cut.clone() } else { clean.clone() };
        let outcome = exercise_with(&mut emu, &corruptions, false, ftl_tests::CACHED);
        prop_assert!(!outcome.is_empty());
    }
}

/// A map page whose data no longer decodes: the reads through it are uncorrectable (typed), the
/// others read back; nothing panics.
#[test]
fn a_damaged_map_page_makes_its_pages_uncorrectable() {
    let (clean, _) = base_image_cached();
    let (geo, cfg) = small();
    // Find a current map page: the newest page of kind Map for map page 0.
    let mut newest: Option<(u64, u32)> = None;
    for p in 0..geo.total_pages() {
        let mut spare = vec![0u8; geo.spare_bytes as usize];
        let mut data = vec![0u8; geo.data_bytes as usize];
        let mut e = clean.clone();
        if e.read_page(PageId(p), &mut data, &mut spare).is_err() {
            continue;
        }
        if let SpareState::Valid(m) = PageMeta::decode(&spare[..META_LEN]) {
            if m.kind == PageKind::Map && m.tag == 0 && newest.is_none_or(|(s, _)| m.seq > s) {
                newest = Some((m.seq, p));
            }
        }
    }
    let (_, page) = newest.expect("the cached image has a map page 0");
    let mut emu = clean.clone();
    // Flip bits in 8 places of its data: more than the CRC codec can correct (it corrects none).
    let flips: Vec<Corruption> =
        (0..8u16).map(|k| Corruption::Flip { page, spare: false, offset: k * 37, mask: 0x5A }).collect();
    let o = exercise_with(&mut emu, &flips, false, ftl_tests::CACHED);
    assert!(o.contains("Uncorrectable") || o.starts_with("mount: "), "{o}");
    let _ = cfg;
}

/// The corruption fuzzing reaches past mount: sanity checks on what a few fixed corruptions do.
#[test]
fn corruptions_are_detected_or_harmless() {
    let (clean, _) = base_image();
    let (_, cfg) = small();
    // The header's logical-page count changed and re-signed: a foreign image.
    let mut emu = clean.clone();
    let o =
        exercise(&mut emu, &[Corruption::CheckpointWord { index: 6, value: cfg.logical_pages + 1 }], false);
    assert!(o.starts_with("mount: Corrupt"), "{o}");
    // A map entry pointing outside the device, re-signed: corrupt.
    let mut emu = clean.clone();
    let map_start = HEADER_WORDS + FRONTIER_WORDS + small().0.total_blocks();
    let o = exercise(&mut emu, &[Corruption::CheckpointWord { index: map_start + 3, value: 1 << 30 }], false);
    assert!(o.starts_with("mount: Corrupt"), "{o}");
    // A flipped bit in a data page's data: mounts, and that page reads as uncorrectable.
    let mut emu = clean.clone();
    let mut dev = Forward::new(&mut emu, Overlay::default());
    let (geo, cfg) = small();
    let mut mem = ftl_tests::test_memory(&geo, &cfg);
    let target = {
        mount(&mut *dev.dev, &mut mem, cfg).unwrap();
        let (map, _) = mem.parts();
        let l =
            (0..cfg.logical_pages).find(|&l| ftl_core::map::MappingTable::get(&map, l).is_some()).unwrap();
        (l, ftl_core::map::MappingTable::get(&map, l).unwrap())
    };
    apply(&Corruption::Flip { page: target.1 .0, spare: false, offset: 100, mask: 1 }, &mut dev, &cfg);
    let mut f = mount(dev, &mut mem, cfg).unwrap();
    let mut buf = vec![0u8; 512];
    assert_eq!(f.read(target.0, &mut buf), Err(Error::Uncorrectable { lpn: target.0 }));
    // Other pages still read.
    let other = (target.0 + 1) % cfg.logical_pages;
    f.read(other, &mut buf).unwrap();
    assert!(matches!(identify(other, &buf), Found::Content(_)));
}

/// Regression (found by `corrupt_images_never_panic` in a debug build): a forged page with a
/// sequence number near `u64::MAX` made mount overflow computing the next sequence number (a
/// panic with overflow checks, a wrap to 0 without). Such an image is corrupt.
#[test]
fn sequence_numbers_near_the_limit_are_corrupt() {
    let (clean, _) = base_image();
    let (geo, cfg) = small();
    for seq in [u64::MAX, u64::MAX - 1, 1 << 63] {
        for kind in [1u8, 2] {
            let mut emu = clean.clone();
            let first_of_erased_block = (0..geo.total_blocks())
                .rev()
                .map(|b| geo.page(BlockId(b), 0))
                .find(|&p| emu.peek_page(p).unwrap().1.iter().all(|&b| b == 0xFF))
                .unwrap();
            let mut dev = Forward::new(&mut emu, Overlay::default());
            let forged = Corruption::Forge {
                page: first_of_erased_block.0,
                kind,
                tag: 3,
                seq,
                aux: 1,
                erase_count: 1,
                data_seed: 4,
            };
            apply(&forged, &mut dev, &cfg);
            let mut mem = ftl_tests::test_memory(&geo, &cfg);
            assert_eq!(mount(dev, &mut mem, cfg).err(), Some(Error::Corrupt), "seq {seq}, kind {kind}");
        }
    }
}

/// Regression (found by the `mount` fuzz target, `fuzz/artifacts-known/`): mount resumes an open
/// block at its first erased page. A later page of that block holding garbage (a damaged or
/// foreign image: power cuts cannot leave one, and this device allows any program order, so the
/// chip does not refuse) was programmed over, which garbled the new page: the next mount failed
/// with `Corrupt` or returned an older version of a flushed write (here: a flushed trim's
/// journal page is garbled, and the trimmed page comes back). Now the block is closed when its
/// next page's metadata area is not erased, and every flushed write and trim survives.
#[test]
fn garbage_past_a_resumed_frontier_is_not_programmed_over() {
    let geo = Geometry { sequential_program: false, ..geometry(8, 16, 2) };
    let cfg = Config::with_logical_pages(&geo, 64);
    let mut emu = Emulator::new(EmulatorConfig::new(geo)).unwrap();
    let mut mem = ftl_tests::test_memory(&geo, &cfg);
    let mut model = Model::new(cfg.logical_pages);
    let write = |f: &mut ftl_tests::TestFtl<'_, &mut Emulator>, model: &mut Model, lpn: u32| {
        let id = model.write(lpn, 1)[0];
        f.write(lpn, &page(lpn, id)).unwrap();
    };
    {
        let mut f = format(&mut emu, &mut mem, cfg).unwrap();
        for lpn in 0..5 {
            write(&mut f, &mut model, lpn);
        }
        f.flush().unwrap();
        model.flush();
    } // dropped: a cut between operations
      // Garbage metadata two pages past the first erased page of every partly written block.
    let ppb = geo.pages_per_block;
    let mut planted = 0;
    for b in 0..geo.total_blocks() {
        let programmed =
            (0..ppb).filter(|&p| emu.program_count(geo.page(BlockId(b), p)) != Some(0)).count() as u32;
        if programmed > 0 && programmed + 2 < ppb {
            emu.program_page(geo.page(BlockId(b), programmed + 2), &[], &[0x5A; META_LEN]).unwrap();
            planted += 1;
        }
    }
    assert!(planted > 0);
    {
        // Mount resumes the partly written blocks as GC frontiers, where journal pages go: each
        // trim made durable by its own flush lands on the next page of a resumed block.
        let mut f = mount(&mut emu, &mut mem, cfg).unwrap();
        for lpn in 0..5 {
            model.trim(lpn, 1);
            f.trim(lpn, 1).unwrap();
            f.flush().unwrap();
            model.flush();
            write(&mut f, &mut model, 10 + lpn);
        }
        f.flush().unwrap();
        model.flush();
    } // another cut between operations
    let mut f = mount(&mut emu, &mut mem, cfg).unwrap();
    verify_all(&mut f, &model).unwrap().unwrap();
}
