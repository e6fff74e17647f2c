//! The anchor and the fast mount (ftl-core/src/anchor.rs, recovery.rs `mount_fast`): a mount
//! after a clean unmount reads the anchor and the checkpoint only, and rebuilds the same block
//! table as the survey; whatever damages the anchor makes mount fall back (other copy, survey),
//! never lose data nor panic.

use ftl_core::anchor::{ANCHOR_BLOCKS, WALK_BACK};
use ftl_core::blocks::BlockState;
use ftl_core::meta::{PageKind, PageMeta, SpareState, META_LEN};
use ftl_core::Config;
use ftl_testkit::{FtlMemory, MapChoice};
use ftl_tests::{
    fill_page, format, geometry, is_power_loss, mount, settle_all, sized_map, verify_all, Model, Rng, CACHED,
};
use nand_emu::{Emulator, EmulatorConfig};
use nand_hal::{BlockId, Geometry, NandFlash, PageId};

fn setup() -> (Geometry, Config) {
    let geo = geometry(32, 64, 2);
    let mut cfg = Config::for_utilization(&geo, 800);
    cfg.mount_pool_blocks = ftl_core::RECOMMENDED_MOUNT_POOL_BLOCKS;
    (geo, cfg)
}

/// Random overwrites (about twice the capacity, so GC runs) through `ftl`, recorded in `model`.
fn churn<N: NandFlash>(ftl: &mut ftl_tests::TestFtl<'_, N>, model: &mut Model, seed: u64, writes: u32) {
    let pb = ftl.page_bytes() as usize;
    let mut buf = vec![0u8; pb];
    let mut x = seed | 1;
    for _ in 0..writes {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let lpn = (x % model.len() as u64) as u32;
        let id = model.write(lpn, 1)[0];
        fill_page(lpn, id, &mut buf);
        ftl.write(lpn, &buf).unwrap();
    }
    ftl.flush().unwrap();
    model.flush();
}

/// (state holds data, valid count) of every block, from the block table `mem` holds.
fn table(mem: &mut FtlMemory) -> Vec<(BlockState, u16)> {
    let (_, m) = mem.parts();
    m.blocks.iter().map(|i| (i.state(), i.valid())).collect()
}

fn holds_data(s: BlockState) -> bool {
    matches!(s, BlockState::Used | BlockState::Open)
}

/// Reads the fast mount may take: the anchor (per copy: page 0, the binary search, the walk back,
/// the erased check), the record again, one spare read per checkpoint block, the checkpoint,
/// one read per frontier.
fn fast_mount_bound(geo: &Geometry, ckpt_pages: u32) -> u64 {
    let search = 32 - geo.pages_per_block.leading_zeros();
    let per_copy = 1 + search + WALK_BACK + 1 + 1;
    (ANCHOR_BLOCKS * per_copy + 1 + ckpt_pages.div_ceil(geo.pages_per_block) + ckpt_pages) as u64
        + 3 * geo.total_planes() as u64
}

fn clean_mount_case(choice: MapChoice) {
    let (geo, cfg) = setup();
    let map = sized_map(choice, &cfg);
    let mut emu = Emulator::new(EmulatorConfig::new(geo)).unwrap();
    let mut mem = FtlMemory::with_map(&geo, &cfg, map);
    let mut model = Model::new(cfg.logical_pages);
    let ckpt_pages;
    {
        let mut f = format(&mut emu, &mut mem, cfg).unwrap();
        churn(&mut f, &mut model, 11, 2 * cfg.logical_pages);
        ckpt_pages = f.checkpoint_pages();
        f.unmount().unwrap();
    }
    // Fast mount: the data is there, and it reads far less than a survey.
    let fast = {
        let mut f = mount(&mut emu, &mut mem, cfg).unwrap();
        let reads = f.counters().mount_reads;
        verify_all(&mut f, &model).unwrap().unwrap();
        assert!(
            reads <= fast_mount_bound(&geo, ckpt_pages) && reads < geo.total_blocks() as u64 / 2,
            "fast mount read {reads} pages (bound {}, {} blocks)",
            fast_mount_bound(&geo, ckpt_pages),
            geo.total_blocks()
        );
        let _ = f.into_nand();
        table(&mut mem)
    };
    // The power went after the fast mount: the record is bounded (it lists the mount pool), so
    // this mount reads the checkpoint and the pool's first pages; nothing was written since the
    // checkpoint, so it must rebuild the fast mount's table.
    let pooled = {
        let mut f = mount(&mut emu, &mut mem, cfg).unwrap();
        let c = *f.counters();
        let pool_max = ftl_core::anchor::max_listed_blocks(geo.data_bytes) as u64;
        assert!(
            c.mount_surveyed_blocks <= pool_max
                && c.mount_reads <= fast_mount_bound(&geo, ckpt_pages) + pool_max,
            "a mount from the pool read {} pages, {} blocks' first pages",
            c.mount_reads,
            c.mount_surveyed_blocks
        );
        verify_all(&mut f, &model).unwrap().unwrap();
        let _ = f.into_nand();
        table(&mut mem)
    };
    // Without the anchor, a mount surveys every block and rebuilds the counts from the map (its
    // map pages, for the cached map): an independent check of the checkpoint's block table.
    for b in 0..ANCHOR_BLOCKS {
        emu.erase_block(BlockId(b)).unwrap();
    }
    let survey = {
        let mut f = mount(&mut emu, &mut mem, cfg).unwrap();
        assert!(f.counters().mount_reads >= geo.total_blocks() as u64 - ANCHOR_BLOCKS as u64);
        verify_all(&mut f, &model).unwrap().unwrap();
        f.unmount().unwrap();
        table(&mut mem)
    };
    for (b, ((x, y), z)) in fast.iter().zip(&survey).zip(&pooled).enumerate() {
        assert_eq!(holds_data(x.0), holds_data(y.0), "block {b}: fast {x:?}, survey {y:?}");
        assert_eq!(holds_data(z.0), holds_data(y.0), "block {b}: pool {z:?}, survey {y:?}");
        if holds_data(x.0) {
            assert_eq!(x.1, y.1, "block {b}: valid count fast {x:?}, survey {y:?}");
            assert_eq!(z.1, y.1, "block {b}: valid count pool {z:?}, survey {y:?}");
        }
    }
    // Writes after a fast mount survive a cut (the record stopped saying clean first).
    {
        let f = mount(&mut emu, &mut mem, cfg).unwrap();
        f.unmount().unwrap();
        let mut f = mount(&mut emu, &mut mem, cfg).unwrap();
        assert!(f.counters().mount_reads <= fast_mount_bound(&geo, ckpt_pages));
        churn(&mut f, &mut model, 12, cfg.logical_pages / 2);
        let _ = f.into_nand();
        let mut f = mount(&mut emu, &mut mem, cfg).unwrap();
        verify_all(&mut f, &model).unwrap().unwrap();
        f.unmount().unwrap();
    }
}

#[test]
fn clean_mount_reads_the_anchor_and_the_checkpoint_flat_map() {
    clean_mount_case(MapChoice::Flat);
}

#[test]
fn clean_mount_reads_the_anchor_and_the_checkpoint_cached_map() {
    clean_mount_case(CACHED);
}

/// The anchor pages of block `b`, newest last.
fn anchor_pages(emu: &Emulator, geo: &Geometry, b: u32) -> Vec<PageId> {
    (0..geo.pages_per_block)
        .map(|p| geo.page(BlockId(b), p))
        .filter(|&p| {
            emu.peek_page(p).is_some_and(
                |(_, s)| matches!(PageMeta::decode(&s[..META_LEN]), SpareState::Valid(m) if m.kind == PageKind::Anchor),
            )
        })
        .collect()
}

/// Damaged anchors: the newest record of one copy unreadable, then of both, then both copies
/// erased: every mount still finds the data (from the other copy, an older record, or the survey).
#[test]
fn a_damaged_anchor_falls_back() {
    let (geo, cfg) = setup();
    for choice in [MapChoice::Flat, CACHED] {
        let map = sized_map(choice, &cfg);
        let mut emu = Emulator::new(EmulatorConfig::new(geo)).unwrap();
        let mut mem = FtlMemory::with_map(&geo, &cfg, map);
        let mut model = Model::new(cfg.logical_pages);
        {
            let mut f = format(&mut emu, &mut mem, cfg).unwrap();
            churn(&mut f, &mut model, 5, cfg.logical_pages);
            f.unmount().unwrap();
        }
        let clean_reads = {
            let f = mount(&mut emu, &mut mem, cfg).unwrap();
            let r = f.counters().mount_reads;
            f.unmount().unwrap();
            r
        };
        for (case, blocks) in [("copy 0's newest record", vec![0u32]), ("both newest records", vec![0, 1])] {
            let mut e = emu.clone();
            for &b in &blocks {
                let newest = *anchor_pages(&e, &geo, b).last().expect("an anchor record");
                // Zero bits in the record's data (a NAND program only clears bits): the codec
                // (a CRC) rejects it.
                e.program_page(newest, &vec![0u8; geo.data_bytes as usize], &[]).ok();
            }
            let mut f = mount(&mut e, &mut mem, cfg).unwrap_or_else(|err| panic!("{case}: {err:?}"));
            verify_all(&mut f, &model).unwrap().unwrap();
            let reads = f.counters().mount_reads;
            if blocks.len() == 1 {
                // The other copy still says clean.
                assert!(reads <= clean_reads + 2, "{case}: {reads} reads, clean mount {clean_reads}");
            }
            f.unmount().unwrap();
        }
        // Both copies gone: the survey.
        let mut e = emu.clone();
        for b in 0..ANCHOR_BLOCKS {
            e.erase_block(BlockId(b)).unwrap();
        }
        let mut f = mount(&mut e, &mut mem, cfg).unwrap();
        assert!(f.counters().mount_reads >= geo.total_blocks() as u64 - ANCHOR_BLOCKS as u64);
        verify_all(&mut f, &model).unwrap().unwrap();
        // The next clean unmount writes a clean record again, and the mount after it is fast.
        f.unmount().unwrap();
        let f = mount(&mut e, &mut mem, cfg).unwrap();
        assert!(f.counters().mount_reads <= clean_reads + 2, "{} reads", f.counters().mount_reads);
    }
}

/// Many remounts fill and rotate the anchor blocks (each copy erased when full): every mount
/// after a clean unmount stays fast, and the data stays.
#[test]
fn anchor_blocks_rotate() {
    let (geo, cfg) = setup();
    let mut emu = Emulator::new(EmulatorConfig::new(geo)).unwrap();
    let mut mem = FtlMemory::with_map(&geo, &cfg, MapChoice::Flat);
    let mut model = Model::new(cfg.logical_pages);
    {
        let mut f = format(&mut emu, &mut mem, cfg).unwrap();
        churn(&mut f, &mut model, 3, cfg.logical_pages / 4);
        f.unmount().unwrap();
    }
    let before = emu.erase_count(BlockId(0)).unwrap();
    // Two records per cycle per copy (not clean at mount, clean at unmount).
    for i in 0..geo.pages_per_block + 3 {
        let mut f = mount(&mut emu, &mut mem, cfg).unwrap();
        assert!(
            f.counters().mount_reads < geo.total_blocks() as u64 / 2,
            "cycle {i}: {}",
            f.counters().mount_reads
        );
        if i % 5 == 0 {
            churn(&mut f, &mut model, 100 + i as u64, 8);
        }
        f.unmount().unwrap();
    }
    assert!(emu.erase_count(BlockId(0)).unwrap() > before, "copy 0 was never erased");
    let mut f = mount(&mut emu, &mut mem, cfg).unwrap();
    verify_all(&mut f, &model).unwrap().unwrap();
}

/// A mount after a power cut reads the anchor, the checkpoint, the first page of each block in
/// the mount pool and the pages written since the checkpoint: on a 1,024-block device, under the
/// issue's bound of 256 reads plus the replayed pages (plus the checkpoint's pages; a survey
/// reads every block), with every acknowledged write there, for both maps, cut after cut.
fn cut_mount_case(choice: MapChoice) {
    let geo = geometry(64, 512, 2);
    let mut cfg = Config::for_utilization(&geo, 850);
    cfg.mount_pool_blocks = ftl_core::RECOMMENDED_MOUNT_POOL_BLOCKS;
    let map = sized_map(choice, &cfg);
    let mut emu = Emulator::new(EmulatorConfig::new(geo)).unwrap();
    let mut mem = FtlMemory::with_map(&geo, &cfg, map);
    let mut model = Model::new(cfg.logical_pages);
    {
        let mut f = format(&mut emu, &mut mem, cfg).unwrap();
        churn(&mut f, &mut model, 21, cfg.logical_pages + cfg.logical_pages / 2);
        let _ = f.into_nand();
    }
    for round in 0..6u64 {
        // The truth to compare with: the same image, surveyed (the anchor wiped in a copy).
        let truth = {
            let mut copy = emu.clone();
            for b in 0..ANCHOR_BLOCKS {
                copy.erase_block(BlockId(b)).unwrap();
            }
            let mut m2 = FtlMemory::with_map(&geo, &cfg, sized_map(choice, &cfg));
            let f = mount(&mut copy, &mut m2, cfg).unwrap();
            let _ = f.into_nand();
            table(&mut m2)
        };
        let mut f = mount(&mut emu, &mut mem, cfg).unwrap();
        let c = *f.counters();
        // (The checkpoint's pages on top: a flat map's grows with the device, 435 pages here. A
        // flash-resident map replays in two passes, map pages first, and reads the map page of
        // each replayed data page it applies: up to three reads per replayed page.)
        let ckpt = f.checkpoint_pages() as u64;
        let per_page = if choice == MapChoice::Flat { 1 } else { 3 };
        assert!(c.mount_surveyed_blocks < geo.total_blocks() as u64 / 4, "round {round}: {c:?}");
        assert!(
            c.mount_reads <= 256 + ckpt + per_page * c.mount_replayed_pages,
            "round {round}: mount after a cut read {} pages, replayed {}, checkpoint {ckpt}, surveyed {}",
            c.mount_reads,
            c.mount_replayed_pages,
            c.mount_surveyed_blocks
        );
        verify_all(&mut f, &model).unwrap().unwrap();
        let _ = f.into_nand();
        // The pool's valid counts are upper bounds of the survey's (GC relies on never counting
        // fewer), and both find data in the same blocks.
        for (b, (p, t)) in table(&mut mem).iter().zip(&truth).enumerate() {
            if holds_data(t.0) {
                assert!(holds_data(p.0) && p.1 >= t.1, "round {round}, block {b}: pool {p:?}, survey {t:?}");
            }
        }
        let mut f = mount(&mut emu, &mut mem, cfg).unwrap();
        // A varying amount of work before the next cut, so cuts land anywhere in the interval.
        churn(&mut f, &mut model, 100 + round, 1_000 + 2_357 * round as u32);
        let _ = f.into_nand();
    }
    // The survey agrees (the anchor wiped): nothing the pool mounts did was lost.
    for b in 0..ANCHOR_BLOCKS {
        emu.erase_block(BlockId(b)).unwrap();
    }
    let mut f = mount(&mut emu, &mut mem, cfg).unwrap();
    assert!(f.counters().mount_reads >= geo.total_blocks() as u64 - ANCHOR_BLOCKS as u64);
    verify_all(&mut f, &model).unwrap().unwrap();
}

#[test]
fn mount_after_a_cut_reads_the_pool_flat_map() {
    cut_mount_case(MapChoice::Flat);
}

#[test]
fn mount_after_a_cut_reads_the_pool_cached_map() {
    cut_mount_case(CACHED);
}

/// Writes, trims and flushes drawn from `rng` (about 1 in 8 each) through `f`, recorded in
/// `model` before each call; false if power was lost.
fn work<N: NandFlash>(f: &mut ftl_tests::TestFtl<'_, N>, model: &mut Model, rng: &mut Rng, ops: u32) -> bool {
    let mut buf = vec![0u8; f.page_bytes() as usize];
    for _ in 0..ops {
        let lpn = rng.below(model.len() as u64) as u32;
        let r = match rng.below(8) {
            0 => {
                model.trim(lpn, 1);
                f.trim(lpn, 1)
            }
            1 => f.flush().inspect(|_| model.flush()),
            _ => {
                let id = model.write(lpn, 1)[0];
                fill_page(lpn, id, &mut buf);
                f.write(lpn, &buf)
            }
        };
        match r {
            Ok(()) => {}
            Err(e) if is_power_loss(&e) => return false,
            Err(e) => panic!("{e:?}"),
        }
    }
    true
}

/// The metadata state of the last page of anchor block `b` (programmed pages form a prefix).
fn last_anchor_page(emu: &Emulator, geo: &Geometry, b: u32) -> SpareState {
    let p = geo.page(BlockId(b), geo.pages_per_block - 1);
    PageMeta::decode(&emu.peek_page(p).expect("a page").1[..META_LEN])
}

/// A cut that tears one copy's record leaves the copies holding different newest records. No
/// later record may erase the copy holding the newest while the other holds an older one: a cut
/// in that erase would leave the older record newest, naming a checkpoint and a pool no longer
/// true (found by the geometries proptest with the pool on: copy 1's record torn on its last
/// page, copy 0 erased for the next record and cut, the mount took the record before, and a
/// flushed trim was lost). Here, on 4-page blocks: each cut that tears copy 1's last page with
/// copy 0's whole, then a cut at every operation of the mount and the work after it; each mount
/// after that finds every flushed write and trim.
#[test]
fn a_copy_holding_the_newest_record_is_not_erased_first() {
    let geo = geometry(4, 64, 2);
    let mut cfg = Config::for_utilization(&geo, 700);
    cfg.mount_pool_blocks = ftl_core::RECOMMENDED_MOUNT_POOL_BLOCKS;
    cfg.checkpoint_interval_blocks = 12;
    assert_eq!(cfg.validate(&geo, 4), Ok(()));
    let mut mem = FtlMemory::with_map(&geo, &cfg, MapChoice::Flat);
    let mut base = Emulator::new(EmulatorConfig::new(geo)).unwrap();
    let mut model = Model::new(cfg.logical_pages);
    {
        let mut f = format(&mut base, &mut mem, cfg).unwrap();
        assert!(work(&mut f, &mut model, &mut Rng::new(1), 600));
        f.flush().unwrap();
        model.flush();
        let _ = f.into_nand();
    }
    let (mut cases, mut second_cuts) = (0, 0);
    for k1 in 0..20_000u64 {
        if cases == 3 {
            break;
        }
        let mut e = base.clone();
        let mut m = model.clone();
        e.schedule_power_cut(k1);
        let cut = match mount(&mut e, &mut mem, cfg) {
            Ok(mut f) => !work(&mut f, &mut m, &mut Rng::new(2), 900),
            Err(err) => {
                assert!(is_power_loss(&err), "{err:?}");
                true
            }
        };
        assert!(cut, "no qualifying cut in the work: {cases} cases");
        e.restore_power();
        let torn = !matches!(last_anchor_page(&e, &geo, 1), SpareState::Valid(_) | SpareState::Erased);
        if !(torn && matches!(last_anchor_page(&e, &geo, 0), SpareState::Valid(_))) {
            continue;
        }
        cases += 1;
        for k2 in 0.. {
            let mut e2 = e.clone();
            let mut m2 = m.clone();
            e2.schedule_power_cut(k2);
            let finished = match mount(&mut e2, &mut mem, cfg) {
                Ok(mut f) => match settle_all(&mut f, &mut m2, true) {
                    Ok(Ok(_)) => work(&mut f, &mut m2, &mut Rng::new(3 + k1), 150),
                    Ok(Err(_)) => false,
                    Err(msg) => panic!("cut {k1}, mount: {msg}"),
                },
                Err(err) => {
                    assert!(is_power_loss(&err), "{err:?}");
                    false
                }
            };
            if finished {
                break;
            }
            second_cuts += 1;
            e2.restore_power();
            let mut f = mount(&mut e2, &mut mem, cfg).unwrap();
            if let Err(msg) = settle_all(&mut f, &mut m2, true) {
                panic!("cuts at {k1} then {k2}: {msg}");
            }
        }
    }
    assert!(cases == 3 && second_cuts > 300, "{cases} cases, {second_cuts} second cuts");
}
