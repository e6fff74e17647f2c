//! FlexECC through the FTL (feature `flex-ecc`): write intents choose the page format, reads
//! report it, flush-reads let GC drop pages to the CRC format, corrupt CRC pages are served from
//! the backing store and rewritten clean, BCH pages are corrected and refreshed, and the idle-time
//! scrubber verifies and prefetches. Checked against a model of every page's content and
//! expected format, with bit errors injected into the data area of chosen physical pages (read
//! noise that a GC copy bakes in, as on a real device). The metadata is kept error-free here: its
//! own protection is another mechanism's job.
//!
//! Multi-plane operations with FlexECC (issue #20; power cuts: tests/tests/multiplane.rs):
//! `multi_plane_with_flex_ecc_matches_single_plane` runs the same workloads with them on and off
//! (flat and cached map, 2 and 4 planes) against a model;
//! `multi_plane_groups_fit_flex_codec_bytes_in_the_page_buffer` checks the page buffer's room
//! for a group's spare areas with FlexECC's codec bytes.

// FlexECC (feature `flex-ecc`).
#![cfg(feature = "flex-ecc")]

use std::collections::HashMap;

use ftl_core::intent::{flex_mark_words, BackingError, BackingStore, FlexConfig, Intent, PageRead, Served};
use ftl_core::meta::{PageKind, PageMeta, SpareState, META_LEN};
use ftl_core::policy::{Greedy, PageCodec, PageFormat, Policies, RequestSizeClassifier, SingleHostStream};
use ftl_core::{Config, Counters, Error, Extensions, Ftl};
use ftl_policies::flex_ecc::{tag_format, BchCodec, FlexCodec, ScrubConfig, Scrubber};
use ftl_testkit::FtlMemory;
use ftl_tests::{fill_page, geometry, identify, map_choice, sized_map, EmuResult, Forward, Found, Hook, Rng};
use nand_emu::{Emulator, EmulatorConfig};
use nand_hal::{
    BlockId, CopyBackAction, CopyBackCaps, CopyBackError, CopyBackOp, Geometry, NandFlash, PageId,
};

/// BCH t = 4 over the whole 512-byte page (m = 13).
type Codec = FlexCodec<8192, 1>;
type Pol = Policies<Codec, RequestSizeClassifier, Greedy, SingleHostStream>;
const T: u32 = 4;
const PAGE: usize = 512;

fn geo() -> Geometry {
    Geometry { spare_bytes: 64, ..geometry(8, 16, 2) }
}

fn policies() -> Pol {
    let bch = BchCodec::new(13, T, 512, PAGE).unwrap();
    Policies {
        codec: FlexCodec::new(bch),
        classifier: RequestSizeClassifier::default(),
        victim: Greedy,
        placement: SingleHostStream,
    }
}

/// Bit errors injected into the data area of chosen physical pages, and a record of where each
/// logical page's newest copy was programmed and how many copies of it were (a page address is
/// reused once its block is erased, so only the count tells whether a copy moved since).
struct Noise {
    flips: HashMap<u32, Vec<usize>>,
    latest: HashMap<u32, PageId>,
    copies: HashMap<u32, u64>,
    rng: Rng,
    /// The device has the emulator's native copy-back (else the trait's fallback only, which
    /// the FTL never uses): its reads take the flips too, its programs are recorded.
    copy_back: bool,
    /// Copy-backs that programmed a page read in the correcting format in the detecting one.
    converted_by_copy_back: u64,
    /// Power cuts that landed in a copy-back's read, in its program.
    copy_back_cuts: [u32; 2],
}

/// The emulator behind [`Noise`].
type Noisy = Forward<Emulator, Noise>;

fn noisy(geo: Geometry) -> Noisy {
    noisy_with(geo, false)
}

/// [`noisy`], with the emulator's native copy-back if `copy_back`.
fn noisy_with(geo: Geometry, copy_back: bool) -> Noisy {
    let noise = Noise {
        flips: HashMap::new(),
        latest: HashMap::new(),
        copies: HashMap::new(),
        rng: Rng::new(7),
        copy_back,
        converted_by_copy_back: 0,
        copy_back_cuts: [0; 2],
    };
    Forward::new(Emulator::new(EmulatorConfig::new(geo)).unwrap(), noise)
}

impl Noise {
    /// Records a data page programmed at `page` with `spare`.
    fn programmed(&mut self, page: PageId, spare: &[u8]) {
        if let SpareState::Valid(m) = PageMeta::decode(spare) {
            if m.kind == PageKind::Data {
                self.latest.insert(m.tag, page);
                *self.copies.entry(m.tag).or_default() += 1;
            }
        }
    }

    /// Injects `k` distinct bit errors into the data of the newest copy of `lpn`.
    fn corrupt(&mut self, lpn: u32, k: usize) -> PageId {
        let page = self.latest[&lpn];
        let bits = self.flips.entry(page.0).or_default();
        while bits.len() < k {
            let b = self.rng.below(PAGE as u64 * 8) as usize;
            if !bits.contains(&b) {
                bits.push(b);
            }
        }
        page
    }
}

impl Hook for Noise {
    type Dev = Emulator;
    fn read_page(&mut self, emu: &mut Emulator, page: PageId, data: &mut [u8], sp: &mut [u8]) -> EmuResult {
        emu.read_page(page, data, sp)?;
        if let Some(bits) = self.flips.get(&page.0) {
            for &b in bits {
                if b / 8 < data.len() {
                    data[b / 8] ^= 1 << (b % 8);
                }
            }
        }
        Ok(())
    }
    fn program_page(&mut self, emu: &mut Emulator, page: PageId, data: &[u8], spare: &[u8]) -> EmuResult {
        emu.program_page(page, data, spare)?;
        self.programmed(page, spare);
        Ok(())
    }
    fn copy_back_caps(&self, emu: &Emulator) -> CopyBackCaps {
        if self.copy_back {
            emu.copy_back_caps()
        } else {
            CopyBackCaps::FALLBACK
        }
    }
    /// The emulator's copy-back; the data read out carries the source's flips (the register
    /// holds the page as stored: a check that corrects writes the corrected data back).
    fn copy_back(
        &mut self,
        emu: &mut Emulator,
        op: CopyBackOp<'_>,
        check: &mut dyn FnMut(&mut [u8], &mut [u8]) -> CopyBackAction,
    ) -> Result<CopyBackAction, CopyBackError<nand_emu::EmuError>> {
        let (src, dst) = (op.src, op.dst);
        let flips = self.flips.get(&src.0).cloned().unwrap_or_default();
        let tag_at = META_LEN;
        let mut from_correcting = false;
        let mut programmed = None;
        let r = emu.copy_back(op, &mut |data, spare| {
            for &b in &flips {
                data[b / 8] ^= 1 << (b % 8);
            }
            from_correcting = tag_format(spare[tag_at]) == Some(PageFormat::Correcting);
            let a = check(data, spare);
            if a != CopyBackAction::Abort {
                programmed = Some(spare.to_vec());
            }
            a
        });
        if let (Ok(CopyBackAction::Program { .. }), Some(spare)) = (&r, &programmed) {
            self.programmed(dst, spare);
            if from_correcting && tag_format(spare[tag_at]) == Some(PageFormat::Detecting) {
                self.converted_by_copy_back += 1;
            }
        }
        if !emu.is_powered() {
            match &r {
                Err(CopyBackError::Read(_)) => self.copy_back_cuts[0] += 1,
                Err(CopyBackError::Program(_)) => self.copy_back_cuts[1] += 1,
                _ => {}
            }
        }
        r
    }
    fn erase_block(&mut self, emu: &mut Emulator, block: BlockId) -> EmuResult {
        emu.erase_block(block)?;
        let ppb = emu.geometry().pages_per_block;
        self.flips.retain(|&p, _| p / ppb != block.0);
        Ok(())
    }
}

/// The backing store: the copy of every clean page, and a count of fetches.
#[derive(Default)]
struct Disk {
    pages: HashMap<u32, u64>,
    fetches: u64,
}

impl BackingStore for Disk {
    fn fetch(&mut self, lpn: u32, out: &mut [u8]) -> Result<(), BackingError> {
        let id = *self.pages.get(&lpn).ok_or(BackingError)?;
        fill_page(lpn, id, out);
        self.fetches += 1;
        Ok(())
    }
}

fn page(lpn: u32, id: u64) -> Vec<u8> {
    let mut p = vec![0u8; PAGE];
    fill_page(lpn, id, &mut p);
    p
}

fn cfg(geo: &Geometry) -> Config {
    cfg_pages(geo, 96)
}

fn cfg_pages(geo: &Geometry, pages: u32) -> Config {
    let mut c = Config::with_logical_pages(geo, pages);
    c.checkpoint_interval_blocks = 8;
    c
}

/// Logical pages of the fuller device the GC-move tests use.
const FULL: u32 = 124;

#[test]
fn intents_choose_the_format_and_reads_report_it() {
    let g = geo();
    let c = cfg(&g);
    let mut noise = noisy(g);
    let mut mem = FtlMemory::new(&g, &c);
    let mut marks = vec![0u32; flex_mark_words(c.logical_pages)];
    let mut short = [0u32; 1];
    let mut buf = vec![0u8; PAGE];
    {
        let (map, m) = mem.parts();
        let mut ftl = Ftl::format(&mut noise, policies(), map, m, c).unwrap();
        // Without FlexECC, every intent gives a BCH page (the all-BCH device).
        ftl.write_with(0, &page(0, 1), Intent::Clean).unwrap();
        assert_eq!(
            ftl.read_with(0, &mut buf).unwrap(),
            PageRead::Good { format: Some(PageFormat::Correcting), corrected: 0 }
        );
        ftl.unmount().unwrap();
    }
    let mut mem = FtlMemory::new(&g, &c);
    {
        let (map, m) = mem.parts();
        let short = Extensions::none().flex(&mut short, FlexConfig::default());
        assert!(matches!(Ftl::mount_with(&mut noise, policies(), map, m, c, short), Err(Error::Memory)));
    }
    let mut mem = FtlMemory::new(&g, &c);
    let (map, m) = mem.parts();
    let mut ftl = Ftl::mount_with(
        &mut noise,
        policies(),
        map,
        m,
        c,
        Extensions::none().flex(&mut marks, FlexConfig::default()),
    )
    .unwrap();
    ftl.write_with(1, &page(1, 2), Intent::Clean).unwrap();
    ftl.write_with(2, &page(2, 3), Intent::Dirty).unwrap();
    ftl.write(3, &page(3, 4)).unwrap();
    for (lpn, id, f) in
        [(1, 2, PageFormat::Detecting), (2, 3, PageFormat::Correcting), (3, 4, PageFormat::Correcting)]
    {
        assert_eq!(
            ftl.read_with(lpn, &mut buf).unwrap(),
            PageRead::Good { format: Some(f), corrected: 0 },
            "lpn {lpn}"
        );
        assert_eq!(identify(lpn, &buf), Found::Content(Some(id)));
    }
    assert_eq!(ftl.read_with(50, &mut buf).unwrap(), PageRead::Unmapped);
    assert!(buf.iter().all(|&b| b == 0));
    assert_eq!(ftl.read_with(96, &mut buf), Err(Error::OutOfRange));
    assert_eq!(ftl.read_with(1, &mut buf[..100]), Err(Error::BufferSize));
    assert!(ftl.flex_is_detecting(1) && !ftl.flex_is_detecting(2));
    let fc = *ftl.flex_counters();
    assert_eq!((fc.clean_writes, fc.dirty_writes), (1, 1 + 1));
}

#[test]
fn corrupt_crc_page_is_served_from_backing_store_and_bch_page_is_corrected() {
    let g = geo();
    let c = cfg(&g);
    let mut noise = noisy(g);
    let mut mem = FtlMemory::new(&g, &c);
    let mut marks = vec![0u32; flex_mark_words(c.logical_pages)];
    let (map, m) = mem.parts();
    let mut ftl = Ftl::format_with(
        &mut noise,
        policies(),
        map,
        m,
        c,
        Extensions::none().flex(&mut marks, FlexConfig::default()),
    )
    .unwrap();
    let mut disk = Disk::default();
    let mut buf = vec![0u8; PAGE];
    disk.pages.insert(5, 10);
    ftl.write_with(5, &page(5, 10), Intent::Clean).unwrap();
    ftl.write_with(6, &page(6, 11), Intent::Dirty).unwrap();
    // One flipped bit condemns a CRC page: never returned as data.
    let old = ftl.nand_mut().hook.corrupt(5, 1);
    assert_eq!(
        ftl.read_with(5, &mut buf).unwrap(),
        PageRead::Corrupt { format: Some(PageFormat::Detecting) }
    );
    assert_eq!(ftl.read_or_fetch(5, &mut buf, &mut disk).unwrap(), Served::Backing);
    assert_eq!(identify(5, &buf), Found::Content(Some(10)));
    assert_eq!(disk.fetches, 1);
    // Repopulated as a new clean page.
    assert_ne!(ftl.nand_mut().hook.latest[&5], old);
    assert_eq!(
        ftl.read_or_fetch(5, &mut buf, &mut disk).unwrap(),
        Served::Flash(PageRead::Good { format: Some(PageFormat::Detecting), corrected: 0 })
    );
    assert_eq!(disk.fetches, 1);
    // Up to t errors in a BCH page are corrected and counted; more are uncorrectable.
    for k in 1..=T as usize {
        ftl.nand_mut().hook.flips.clear();
        ftl.nand_mut().hook.corrupt(6, k);
        assert_eq!(
            ftl.read_or_fetch(6, &mut buf, &mut disk).unwrap(),
            Served::Flash(PageRead::Good { format: Some(PageFormat::Correcting), corrected: k as u32 })
        );
        assert_eq!(identify(6, &buf), Found::Content(Some(11)));
    }
    ftl.nand_mut().hook.corrupt(6, 2 * T as usize);
    assert_eq!(ftl.read_or_fetch(6, &mut buf, &mut disk), Err(Error::Uncorrectable { lpn: 6 }));
    // A dirty page has no backing copy and is never fetched.
    assert_eq!(disk.fetches, 1);
    let fc = *ftl.flex_counters();
    assert_eq!(fc.served_from_backing, 1);
    assert!(fc.detecting_corrupt >= 1 && fc.correcting_uncorrectable == 1);
}

/// What the model expects of a logical page.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum State {
    /// Written dirty (BCH), not flush-read since.
    Dirty,
    /// Flush-read while dirty (its copy is in the backing store): BCH until GC moves it, then CRC.
    /// (The number of copies of the page programmed when it was flush-read: see [`Noise`].)
    Marked(u64),
    /// Written clean (CRC).
    Clean,
}

/// Random intents, host reads, flush-reads and injected errors against a model; GC runs often on
/// this small device. Every read returns the model's content (from flash or the backing store)
/// in the format the model expects. Odd seeds run the flat map, even ones the cached map (with
/// a cache of a few map pages, so that map pages are written back and read in all the time).
#[test]
fn random_intents_flush_reads_and_gc_conversion_match_the_model() {
    for seed in 1..=6u64 {
        let g = geo();
        let c = cfg(&g);
        let mut noise = noisy(g);
        let cached = seed.is_multiple_of(2);
        let mut mem = FtlMemory::with_map(&g, &c, sized_map(map_choice(cached), &c));
        let mut marks = vec![0u32; flex_mark_words(c.logical_pages)];
        let (map, m) = mem.parts();
        let mut ftl = Ftl::format_with(
            &mut noise,
            policies(),
            map,
            m,
            c,
            Extensions::none().flex(&mut marks, FlexConfig::default()),
        )
        .unwrap();
        let mut disk = Disk::default();
        let mut rng = Rng::new(seed);
        let mut model: HashMap<u32, (u64, State)> = HashMap::new();
        let mut next_id = 1u64;
        let mut buf = vec![0u8; PAGE];
        let mut converted_seen = 0u64;
        for step in 0..3000 {
            let lpn = rng.below(c.logical_pages as u64) as u32;
            match rng.below(10) {
                0..=3 => {
                    let id = next_id;
                    next_id += 1;
                    ftl.write_with(lpn, &page(lpn, id), Intent::Dirty).unwrap();
                    model.insert(lpn, (id, State::Dirty));
                }
                4..=5 => {
                    // A read miss: the cache manager fetched it from the disk and writes it clean.
                    let id = next_id;
                    next_id += 1;
                    disk.pages.insert(lpn, id);
                    ftl.write_with(lpn, &page(lpn, id), Intent::Clean).unwrap();
                    model.insert(lpn, (id, State::Clean));
                }
                6 => {
                    // The cache manager flush-reads dirty pages only.
                    let cur = ftl.nand_mut().hook.copies.get(&lpn).copied();
                    if !matches!(model.get(&lpn), None | Some((_, State::Dirty)))
                        && !matches!(model.get(&lpn), Some((_, State::Marked(p))) if Some(*p) == cur)
                    {
                        continue;
                    }
                    let r = ftl.flush_read(lpn, &mut buf).unwrap();
                    match model.get(&lpn).copied() {
                        None => assert_eq!(r, PageRead::Unmapped),
                        Some((id, st)) => {
                            assert!(matches!(r, PageRead::Good { .. }), "seed {seed} step {step}: {r:?}");
                            assert_eq!(identify(lpn, &buf), Found::Content(Some(id)));
                            if st == State::Dirty {
                                disk.pages.insert(lpn, id);
                                model.insert(lpn, (id, State::Marked(ftl.nand_mut().hook.copies[&lpn])));
                            }
                        }
                    }
                }
                7 => {
                    // Errors: up to t in a BCH page, 1..2t in a CRC page.
                    if let Some(&(_, st)) = model.get(&lpn) {
                        let detecting = match st {
                            State::Clean => true,
                            State::Marked(p) => ftl.nand_mut().hook.copies[&lpn] != p,
                            State::Dirty => false,
                        };
                        let k = if detecting { 1 + rng.below(2 * T as u64) } else { 1 + rng.below(T as u64) };
                        let cur = ftl.nand_mut().hook.latest[&lpn];
                        ftl.nand_mut().hook.flips.remove(&cur.0);
                        ftl.nand_mut().hook.corrupt(lpn, k as usize);
                    }
                }
                _ => {
                    let cur = ftl.nand_mut().hook.copies.get(&lpn).copied();
                    let r = ftl.read_or_fetch(lpn, &mut buf, &mut disk).unwrap();
                    match model.get(&lpn).copied() {
                        None => assert_eq!(r, Served::Flash(PageRead::Unmapped)),
                        Some((id, st)) => {
                            assert_eq!(
                                identify(lpn, &buf),
                                Found::Content(Some(id)),
                                "seed {seed} step {step}"
                            );
                            let moved = |p: u64| cur != Some(p);
                            let want = match st {
                                State::Dirty => PageFormat::Correcting,
                                State::Clean => PageFormat::Detecting,
                                State::Marked(p) if moved(p) => PageFormat::Detecting,
                                State::Marked(_) => PageFormat::Correcting,
                            };
                            match r {
                                Served::Flash(PageRead::Good { format, .. }) => {
                                    assert_eq!(
                                        format,
                                        Some(want),
                                        "seed {seed} step {step} lpn {lpn} {st:?}"
                                    );
                                }
                                Served::Backing => {
                                    assert_eq!(want, PageFormat::Detecting, "seed {seed} step {step}");
                                    model.insert(lpn, (id, State::Clean));
                                }
                                other => panic!("seed {seed} step {step}: {other:?}"),
                            }
                            if let State::Marked(p) = st {
                                if moved(p) {
                                    converted_seen += 1;
                                    model.insert(lpn, (id, State::Clean));
                                }
                            }
                        }
                    }
                }
            }
        }
        let fc = *ftl.flex_counters();
        assert!(fc.converted > 0 && converted_seen > 0, "seed {seed}: GC never converted a page: {fc:?}");
        if cached {
            assert!(ftl.counters().map_page_writes > 0 && ftl.counters().map_page_reads > 0, "seed {seed}");
        }
        assert!(fc.served_from_backing > 0, "seed {seed}: {fc:?}");
        assert!(ftl.counters().gc_blocks > 0);
    }
}

#[test]
fn format_survives_remount_and_lost_marks_keep_pages_bch() {
    let g = geo();
    let c = cfg_pages(&g, FULL);
    let mut noise = noisy(g);
    let mut buf = vec![0u8; PAGE];
    {
        let mut mem = FtlMemory::new(&g, &c);
        let mut marks = vec![0u32; flex_mark_words(c.logical_pages)];
        let (map, m) = mem.parts();
        let mut ftl = Ftl::format_with(
            &mut noise,
            policies(),
            map,
            m,
            c,
            Extensions::none().flex(&mut marks, FlexConfig::default()),
        )
        .unwrap();
        // Interleaved with pages that are rewritten later, so that GC moves these.
        for l in 0..40 {
            let intent = if l % 2 == 0 { Intent::Clean } else { Intent::Dirty };
            ftl.write_with(l, &page(l, l as u64 + 1), intent).unwrap();
            // Two pages each: the planes alternate, so cold and hot pages share blocks.
            ftl.write(40 + 2 * l, &page(40 + 2 * l, 1)).unwrap();
            ftl.write(41 + 2 * l, &page(41 + 2 * l, 1)).unwrap();
        }
        for l in (1..40).step_by(2) {
            ftl.flush_read(l, &mut buf).unwrap();
            assert!(ftl.flex_is_marked(l));
        }
        ftl.unmount().unwrap();
    }
    let mut mem = FtlMemory::new(&g, &c);
    let mut marks = vec![0u32; flex_mark_words(c.logical_pages)];
    let (map, m) = mem.parts();
    let mut ftl = Ftl::mount_with(
        &mut noise,
        policies(),
        map,
        m,
        c,
        Extensions::none().flex(&mut marks, FlexConfig::default()),
    )
    .unwrap();
    // Rewrite the rest of the space until GC has moved most of the first 40 pages.
    let before: Vec<PageId> = (0..40).map(|l| ftl.nand_mut().hook.latest[&l]).collect();
    let mut id = 1000;
    let mut rng = Rng::new(3);
    let moved = |ftl: &mut Ftl<'_, &mut Noisy, Pol, ftl_core::AnyMap<'_>>| {
        (0..40u32).filter(|&l| ftl.nand_mut().hook.latest[&l] != before[l as usize]).count()
    };
    for _ in 0..200 {
        if moved(&mut ftl) >= 30 {
            break;
        }
        for _ in 40..FULL {
            let l = 40 + rng.below((FULL - 40) as u64) as u32;
            id += 1;
            ftl.write(l, &page(l, id)).unwrap();
        }
    }
    assert!(moved(&mut ftl) >= 30, "GC moved only {} of the pages", moved(&mut ftl));
    for l in 0..40 {
        let f = if l % 2 == 0 { PageFormat::Detecting } else { PageFormat::Correcting };
        assert_eq!(
            ftl.read_with(l, &mut buf).unwrap(),
            PageRead::Good { format: Some(f), corrected: 0 },
            "lpn {l}"
        );
        assert_eq!(identify(l, &buf), Found::Content(Some(l as u64 + 1)));
    }
    assert_eq!(ftl.flex_counters().converted, 0);
}

#[test]
fn a_write_after_a_flush_read_keeps_the_new_data_bch() {
    let g = geo();
    let c = cfg_pages(&g, FULL);
    let mut noise = noisy(g);
    let mut mem = FtlMemory::new(&g, &c);
    let mut marks = vec![0u32; flex_mark_words(c.logical_pages)];
    let (map, m) = mem.parts();
    let mut ftl = Ftl::format_with(
        &mut noise,
        policies(),
        map,
        m,
        c,
        Extensions::none().flex(&mut marks, FlexConfig::default()),
    )
    .unwrap();
    let mut buf = vec![0u8; PAGE];
    ftl.write(7, &page(7, 1)).unwrap();
    ftl.flush_read(7, &mut buf).unwrap();
    assert!(ftl.flex_is_marked(7));
    ftl.write(7, &page(7, 2)).unwrap();
    assert!(!ftl.flex_is_marked(7));
    let before = ftl.nand_mut().hook.latest[&7];
    let mut id = 100;
    let mut rng = Rng::new(4);
    for _ in 0..200 {
        if ftl.nand_mut().hook.latest[&7] != before {
            break;
        }
        for _ in 20..FULL {
            let l = 20 + rng.below((FULL - 20) as u64) as u32;
            id += 1;
            ftl.write(l, &page(l, id)).unwrap();
        }
    }
    assert_ne!(ftl.nand_mut().hook.latest[&7], before, "GC never moved the page");
    assert_eq!(
        ftl.read_with(7, &mut buf).unwrap(),
        PageRead::Good { format: Some(PageFormat::Correcting), corrected: 0 }
    );
    assert_eq!(identify(7, &buf), Found::Content(Some(2)));
}

#[test]
fn scrubber_verifies_in_gaps_prefetches_in_long_gaps_and_refreshes_bch_pages() {
    let g = geo();
    let c = cfg(&g);
    let mut noise = noisy(g);
    let mut mem = FtlMemory::new(&g, &c);
    let mut marks = vec![0u32; flex_mark_words(c.logical_pages)];
    let (map, m) = mem.parts();
    let mut ftl = Ftl::format_with(
        &mut noise,
        policies(),
        map,
        m,
        c,
        Extensions::none().flex(&mut marks, FlexConfig { refresh_threshold: 3 }),
    )
    .unwrap();
    let mut disk = Disk::default();
    let mut buf = vec![0u8; PAGE];
    for l in 0..20 {
        disk.pages.insert(l, l as u64 + 1);
        ftl.write_with(l, &page(l, l as u64 + 1), Intent::Clean).unwrap();
    }
    for l in 20..30 {
        ftl.write_with(l, &page(l, l as u64 + 1), Intent::Dirty).unwrap();
    }
    let bad = [2u32, 9, 15, 17];
    for &l in &bad {
        ftl.nand_mut().hook.corrupt(l, 1);
    }
    let sc = ScrubConfig { t_verify_ns: 10_000, max_verify: 1000, ..ScrubConfig::default() };
    let mut s = Scrubber::<16>::new(sc);
    // A gap below m x T_crc does nothing.
    let w = s.idle(&mut ftl, 10 * sc.t_crc_ns, &mut disk, &mut buf).unwrap();
    assert_eq!(w.verified, 0);
    // A gap above it but below T_disk verifies (20 CRC pages fit) and queues, prefetches nothing.
    let w = s.idle(&mut ftl, 200_000, &mut disk, &mut buf).unwrap();
    assert_eq!((w.verified, w.corrupt_found, w.prefetched), (20, 4, 0));
    assert_eq!(s.queued(), 4);
    assert_eq!(disk.fetches, 0);
    // A gap of 3 x T_disk prefetches 3 of them, the next gap the last.
    let w = s.idle(&mut ftl, 3 * sc.t_disk_ns + 1, &mut disk, &mut buf).unwrap();
    assert_eq!(w.prefetched, 3);
    let w = s.idle(&mut ftl, 3 * sc.t_disk_ns + 1, &mut disk, &mut buf).unwrap();
    assert_eq!(w.prefetched, 1);
    assert_eq!(disk.fetches, 4);
    // Host reads of the prefetched pages now come from flash.
    for &l in &bad {
        assert_eq!(
            ftl.read_or_fetch(l, &mut buf, &mut disk).unwrap(),
            Served::Flash(PageRead::Good { format: Some(PageFormat::Detecting), corrected: 0 })
        );
        assert_eq!(identify(l, &buf), Found::Content(Some(l as u64 + 1)));
    }
    assert_eq!(disk.fetches, 4);
    // BCH pages: with scan_correcting, one at the threshold is refreshed (moved, clean again),
    // one below it is left alone.
    ftl.nand_mut().hook.corrupt(22, 3);
    let keep = ftl.nand_mut().hook.corrupt(23, 2);
    let moved_from = ftl.nand_mut().hook.latest[&22];
    let mut s2 = Scrubber::<16>::new(ScrubConfig { scan_correcting: true, ..sc });
    let w = s2.idle(&mut ftl, 400_000, &mut disk, &mut buf).unwrap();
    assert_eq!(w.refreshed, 1);
    assert_ne!(ftl.nand_mut().hook.latest[&22], moved_from);
    assert_eq!(ftl.nand_mut().hook.latest[&23], keep);
    assert_eq!(
        ftl.read_with(22, &mut buf).unwrap(),
        PageRead::Good { format: Some(PageFormat::Correcting), corrected: 0 }
    );
    assert_eq!(identify(22, &buf), Found::Content(Some(23)));
    assert_eq!(ftl.flex_counters().refreshed, 1);
    // A refresh on the read path too.
    ftl.nand_mut().hook.corrupt(24, 3);
    let from = ftl.nand_mut().hook.latest[&24];
    ftl.read_or_fetch(24, &mut buf, &mut disk).unwrap();
    assert_ne!(ftl.nand_mut().hook.latest[&24], from);
}

/// Power cuts at many points while GC converts flush-read pages to CRC: after the remount every
/// page that was flushed before (and not rewritten) reads back good, with its content, in a
/// format it may have (a converted page CRC, an unconverted or clean-written one as written).
/// Every other cut runs (and mounts) the cached map. The cuts are made on a device without
/// copy-back (GC reads and programs), then, more densely, on one with the emulator's native
/// copy-back (GC converts and copies by copy-back): cuts land in copy-backs' reads and programs.
#[test]
fn power_cuts_during_gc_conversion_lose_nothing() {
    for copy_back in [false, true] {
        let (cuts_fired, converted_seen, hook) = cuts_during_gc_conversion(copy_back);
        eprintln!(
            "copy-back {copy_back}: {cuts_fired} cuts, {converted_seen} converted pages read after them, \
             {} conversions by copy-back, {:?} cuts in copy-back reads/programs",
            hook.0, hook.1
        );
        assert!(cuts_fired > 10, "copy-back {copy_back}: only {cuts_fired} cuts fired");
        assert!(converted_seen > 0, "copy-back {copy_back}: no cut came after a conversion");
        if copy_back {
            assert!(hook.0 > 0, "no conversion by copy-back");
            assert!(hook.1.iter().all(|&n| n > 0), "cuts in copy-back reads/programs: {:?}", hook.1);
        }
    }
}

/// The cuts of [`power_cuts_during_gc_conversion_lose_nothing`] on a device with copy-back or
/// without: (cuts fired, converted pages read after the remounts, (conversions by copy-back,
/// cuts in copy-back reads and programs)).
fn cuts_during_gc_conversion(copy_back: bool) -> (u32, u32, (u64, [u32; 2])) {
    let g = geo();
    let c = cfg_pages(&g, FULL);
    let mut cuts_fired = 0;
    let mut converted_seen = 0;
    let (mut converted_by_copy_back, mut copy_back_cuts) = (0, [0u32; 2]);
    let step = if copy_back { 7 } else { 23 };
    for (i, k) in (5..600).step_by(step).enumerate() {
        // Every other cut on the cached map (written and mounted with it).
        let choice = map_choice(i % 2 == 1);
        let mut noise = noisy_with(g, copy_back);
        let mut buf = vec![0u8; PAGE];
        {
            let mut mem = FtlMemory::with_map(&g, &c, sized_map(choice, &c));
            let mut marks = vec![0u32; flex_mark_words(c.logical_pages)];
            let (map, m) = mem.parts();
            let mut ftl = Ftl::format_with(
                &mut noise,
                policies(),
                map,
                m,
                c,
                Extensions::none().flex(&mut marks, FlexConfig::default()),
            )
            .unwrap();
            for l in 0..40 {
                let intent = if l % 4 == 0 { Intent::Clean } else { Intent::Dirty };
                ftl.write_with(l, &page(l, l as u64 + 1), intent).unwrap();
                ftl.write(40 + 2 * l, &page(40 + 2 * l, 1)).unwrap();
                ftl.write(41 + 2 * l, &page(41 + 2 * l, 1)).unwrap();
            }
            ftl.flush().unwrap();
            for l in 0..40 {
                ftl.flush_read(l, &mut buf).unwrap();
            }
            ftl.nand_mut().dev.schedule_power_cut(k);
            let mut rng = Rng::new(k);
            let mut id = 100;
            for _ in 0..400 {
                let l = 40 + rng.below((FULL - 40) as u64) as u32;
                id += 1;
                match ftl.write(l, &page(l, id)) {
                    Ok(()) => {}
                    Err(Error::Device(nand_hal::ErrorKind::PowerLoss)) => {
                        cuts_fired += 1;
                        break;
                    }
                    Err(e) => panic!("copy-back {copy_back} cut {k}: {e:?}"),
                }
            }
        }
        noise.dev.restore_power();
        noise.dev.cancel_power_cut();
        let mut mem = FtlMemory::with_map(&g, &c, sized_map(choice, &c));
        let (map, m) = mem.parts();
        let mut ftl = Ftl::mount(&mut noise, policies(), map, m, c).unwrap();
        for l in 0..40 {
            let r = ftl.read_with(l, &mut buf).unwrap();
            let PageRead::Good { format: Some(f), corrected: 0 } = r else {
                panic!("copy-back {copy_back} cut {k}: lpn {l}: {r:?}");
            };
            if l % 4 == 0 {
                assert_eq!(f, PageFormat::Detecting, "copy-back {copy_back} cut {k}: lpn {l}");
            } else if f == PageFormat::Detecting {
                converted_seen += 1;
            }
            assert_eq!(
                identify(l, &buf),
                Found::Content(Some(l as u64 + 1)),
                "copy-back {copy_back} cut {k}: lpn {l}"
            );
        }
        drop(ftl);
        converted_by_copy_back += noise.hook.converted_by_copy_back;
        copy_back_cuts[0] += noise.hook.copy_back_cuts[0];
        copy_back_cuts[1] += noise.hook.copy_back_cuts[1];
    }
    (cuts_fired, converted_seen, (converted_by_copy_back, copy_back_cuts))
}

/// What one run of [`copy_back_run`] left.
struct CopyBackRun {
    /// Every physical page as stored (data, spare).
    image: Vec<Option<(Vec<u8>, Vec<u8>)>>,
    ftl: Counters,
    flex: ftl_core::intent::FlexCounters,
    /// Per logical page: (RAM detecting bit, flush-read mark, what `read_with` reported and
    /// the content it returned).
    pages: Vec<(bool, bool, PageRead, Found)>,
    bytes_in: u64,
    emu_copy_backs: u64,
    converted_by_copy_back: u64,
}

/// A seeded FlexECC workload on a device with native copy-back: dirty and clean writes,
/// flush-reads (GC then converts), bit errors (up to t, so BCH pages correct and CRC pages
/// fail), reads served from the backing store; GC copies with copy-back if `copy_back`
/// (`Config::gc_copy_back`), else read + program. Checks every read against the model.
fn copy_back_run(copy_back: bool, cached: bool) -> CopyBackRun {
    let g = geo();
    let mut c = cfg_pages(&g, FULL);
    c.gc_copy_back = copy_back;
    let mut noise = noisy_with(g, true);
    let mut mem = FtlMemory::with_map(&g, &c, sized_map(map_choice(cached), &c));
    let mut marks = vec![0u32; flex_mark_words(c.logical_pages)];
    let (map, m) = mem.parts();
    let flex = Extensions::none().flex(&mut marks, FlexConfig::default());
    let mut ftl = Ftl::format_with(&mut noise, policies(), map, m, c, flex).unwrap();
    let mut disk = Disk::default();
    let mut rng = Rng::new(11);
    let mut model: HashMap<u32, u64> = HashMap::new();
    let mut buf = vec![0u8; PAGE];
    for id in 1..4000u64 {
        let lpn = rng.below(c.logical_pages as u64) as u32;
        match rng.below(10) {
            0..=3 => {
                ftl.write_with(lpn, &page(lpn, id), Intent::Dirty).unwrap();
                model.insert(lpn, id);
            }
            4 => {
                disk.pages.insert(lpn, id);
                ftl.write_with(lpn, &page(lpn, id), Intent::Clean).unwrap();
                model.insert(lpn, id);
            }
            5..=6 => {
                if let PageRead::Good { .. } = ftl.flush_read(lpn, &mut buf).unwrap() {
                    disk.pages.insert(lpn, model[&lpn]);
                }
            }
            7 if model.contains_key(&lpn) => {
                let k = 1 + rng.below(T as u64) as usize;
                ftl.nand_mut().hook.corrupt(lpn, k);
            }
            _ => {
                let r = ftl.read_or_fetch(lpn, &mut buf, &mut disk).unwrap();
                match model.get(&lpn) {
                    Some(&want) => {
                        assert_eq!(identify(lpn, &buf), Found::Content(Some(want)), "id {id}: {r:?}")
                    }
                    None => assert_eq!(r, Served::Flash(PageRead::Unmapped), "id {id} lpn {lpn}"),
                }
            }
        }
    }
    let pages = (0..c.logical_pages)
        .map(|l| {
            let r = ftl.read_with(l, &mut buf).unwrap();
            (ftl.flex_is_detecting(l), ftl.flex_is_marked(l), r, identify(l, &buf))
        })
        .collect();
    // Every page still reads its data (a CRC page with errors from the backing store).
    for l in 0..c.logical_pages {
        let r = ftl.read_or_fetch(l, &mut buf, &mut disk).unwrap();
        match model.get(&l) {
            Some(&want) => assert_eq!(identify(l, &buf), Found::Content(Some(want)), "lpn {l}: {r:?}"),
            None => assert_eq!(r, Served::Flash(PageRead::Unmapped), "lpn {l}"),
        }
    }
    let (ftl_counters, flex) = (*ftl.counters(), *ftl.flex_counters());
    drop(ftl);
    let emu = &noise.dev;
    let image = (0..g.total_pages())
        .map(|p| emu.peek_page(PageId(p)).map(|(d, s)| (d.to_vec(), s.to_vec())))
        .collect();
    CopyBackRun {
        image,
        ftl: ftl_counters,
        flex,
        pages,
        bytes_in: emu.counters().bytes_in,
        emu_copy_backs: emu.counters().copy_backs,
        converted_by_copy_back: noise.hook.converted_by_copy_back,
    }
}

/// Copy-back GC with FlexECC attached (issue #20): the same seeded workload with and without
/// `Config::gc_copy_back` leaves every physical page byte for byte the same (data, metadata,
/// format tag and codec bytes), the same RAM marks, every read the same (format, corrected
/// bits, content), and the same counters apart from the copy-back ones, while the copy-back run
/// moved pages by copy-back (conversions to CRC and BCH corrections among them) and transferred
/// a data area less per clean copy-back. Flat and cached map.
#[test]
fn copy_back_gc_with_flex_ecc_makes_the_plain_moves() {
    for cached in [false, true] {
        let map = if cached { "cached" } else { "flat" };
        let plain = copy_back_run(false, cached);
        let cb = copy_back_run(true, cached);
        assert_eq!((plain.ftl.gc_copy_backs, plain.emu_copy_backs), (0, 0), "{map}");
        assert!(plain.ftl.gc_page_copies > 300, "{map}: {:?}", plain.ftl);
        assert!(
            plain.flex.converted > 20 && plain.flex.detecting_moved > 20 && plain.flex.correcting_moved > 20,
            "{map}: {:?}",
            plain.flex
        );
        let differ = cb.image.iter().zip(&plain.image).filter(|(a, b)| a != b).count();
        assert_eq!(differ, 0, "{map}: {differ} pages differ");
        assert_eq!(cb.pages, plain.pages, "{map}");
        assert_eq!(cb.flex, plain.flex, "{map}");
        let mut without = cb.ftl;
        (without.gc_copy_backs, without.gc_copy_back_corrected, without.gc_copy_back_aborts) = (0, 0, 0);
        assert_eq!(without, plain.ftl, "{map}");
        // Copy-backs did most moves, conversions and corrections included; CRC pages with bit
        // errors (and, on the cached map, entries not in RAM) aborted to the plain path.
        assert_eq!(cb.ftl.gc_copy_backs, cb.emu_copy_backs, "{map}");
        assert!(cb.ftl.gc_copy_backs * 2 > cb.ftl.gc_page_copies, "{map}: {:?}", cb.ftl);
        assert!(cb.converted_by_copy_back > 10, "{map}: {}", cb.converted_by_copy_back);
        assert!(cb.ftl.gc_copy_back_corrected > 0 && cb.ftl.gc_copy_back_aborts > 0, "{map}: {:?}", cb.ftl);
        // A program takes the data and the spare bytes the FTL writes (metadata and codec
        // bytes) in, a copy-back the whole spare and, if the check corrected it, the data.
        let program = (PAGE + META_LEN + policies().codec.spare_len()) as i64;
        let spare = geo().spare_bytes as i64;
        let (copy_backs, corrected) = (cb.ftl.gc_copy_backs as i64, cb.ftl.gc_copy_back_corrected as i64);
        let saved = copy_backs * (program - spare) - corrected * PAGE as i64;
        assert_eq!(plain.bytes_in as i64 - cb.bytes_in as i64, saved, "{map}");
        assert!(saved > copy_backs * PAGE as i64 * 3 / 4, "{map}");
    }
}

/// How the model's copy of a logical page was written (for [`multi_plane_run`]).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Written {
    /// Clean: the detecting format.
    Clean,
    /// Dirty: the correcting format.
    Dirty,
    /// Dirty, then flush-read: marked, or converted to the detecting format by GC since.
    Flushed,
}

/// What one run of [`multi_plane_run`] left.
struct MultiPlaneRun {
    /// What every read of the workload returned, in order.
    reads: Vec<Found>,
    flex: ftl_core::intent::FlexCounters,
    ftl: Counters,
}

/// A seeded FlexECC workload of multi-page requests on `planes` planes: dirty and clean
/// multi-page writes (`write_with`), `write_many` batches, multi-page reads (`read`) and
/// `read_many` batches, flush-reads (GC then converts), bit errors up to t in correcting pages
/// (which BCH corrects on every read path), trims and flushes, with multi-plane operations on or
/// off (`Ftl::set_multi_plane`). Checked against a model as it goes: every read returns the
/// model's content, every flush-read the format the page's writes and flush-reads allow; at the
/// end every page's format, RAM detecting bit and flush-read mark are what the model allows
/// (a page dirty-written then flush-read: correcting and marked, or converted by GC: detecting
/// and unmarked), and FlexECC's counters of writes by intent, marks and formatted reads are the
/// model's counts.
fn multi_plane_run(multi: bool, cached: bool, planes: u32) -> MultiPlaneRun {
    let (_, c, mut noise, mut mem, mut marks) = multi_plane_device(cached, planes);
    let (map, m) = mem.parts();
    let flex = Extensions::none().flex(&mut marks, FlexConfig::default());
    let mut ftl = Ftl::format_with(&mut noise, policies(), map, m, c, flex).unwrap();
    ftl.set_multi_plane(multi);
    ftl.reset_counters();
    let mut rng = Rng::new(23 + planes as u64);
    let mut model: HashMap<u32, (u64, Written)> = HashMap::new();
    // The model's counts: pages written clean, dirty; flush-reads that mark; reads that report
    // a format.
    let (mut clean_writes, mut dirty_writes, mut marked, mut formatted) = (0u64, 0u64, 0u64, 0u64);
    let mut reads = Vec::new();
    let n_pages = c.logical_pages;
    let mut id = 0u64;
    let what = format!("multi-plane {multi}, cached map {cached}, {planes} planes");
    for step in 0..5000 {
        let lpn = rng.below(n_pages as u64) as u32;
        let n = (1 + rng.below(8) as u32).min(n_pages - lpn);
        let content =
            |model: &HashMap<u32, (u64, Written)>, l: u32| Found::Content(model.get(&l).map(|m| m.0));
        match rng.below(12) {
            0..=3 => {
                let clean = rng.chance(1, 3);
                let w = if clean { Written::Clean } else { Written::Dirty };
                let mut data = vec![0u8; n as usize * PAGE];
                for (j, p) in data.chunks_mut(PAGE).enumerate() {
                    id += 1;
                    fill_page(lpn + j as u32, id, p);
                    model.insert(lpn + j as u32, (id, w));
                }
                *(if clean { &mut clean_writes } else { &mut dirty_writes }) += n as u64;
                let intent = if clean { Intent::Clean } else { Intent::Dirty };
                ftl.write_with(lpn, &data, intent).unwrap();
            }
            4 => {
                // Distinct pages, in a random order (a batch naming a page twice goes page by page).
                let mut lpns: Vec<u32> = (0..n).map(|_| rng.below(n_pages as u64) as u32).collect();
                lpns.sort_unstable();
                lpns.dedup();
                if rng.chance(1, 2) {
                    lpns.reverse();
                }
                let datas: Vec<Vec<u8>> = lpns
                    .iter()
                    .map(|&l| {
                        id += 1;
                        model.insert(l, (id, Written::Dirty));
                        page(l, id)
                    })
                    .collect();
                dirty_writes += lpns.len() as u64;
                let pairs: Vec<(u32, &[u8])> = lpns.iter().zip(&datas).map(|(&l, d)| (l, &d[..])).collect();
                ftl.write_many(&pairs).unwrap();
            }
            5 | 6 => {
                let mut buf = vec![0u8; PAGE];
                let r = ftl.flush_read(lpn, &mut buf).unwrap();
                // The format the page's writes and flush-reads allow (a flush-read page may have
                // been converted by GC since).
                let d = PageFormat::Detecting;
                let ok = match (r, model.get(&lpn).map(|m| m.1)) {
                    (PageRead::Unmapped, None) => true,
                    (PageRead::Good { format: Some(f), corrected }, Some(w)) => match w {
                        Written::Clean => (f, corrected) == (d, 0),
                        Written::Dirty => f == PageFormat::Correcting && corrected <= T,
                        Written::Flushed => f != d && corrected <= T || (f, corrected) == (d, 0),
                    },
                    _ => false,
                };
                assert!(ok, "{what}, step {step}: flush-read of lpn {lpn} ({:?}): {r:?}", model.get(&lpn));
                if let Some(m) = model.get_mut(&lpn) {
                    formatted += 1;
                    if m.1 == Written::Dirty {
                        m.1 = Written::Flushed;
                        marked += 1;
                    }
                }
                let got = identify(lpn, &buf);
                assert_eq!(got, content(&model, lpn), "{what}, step {step}: flush-read of lpn {lpn}");
                reads.push(got);
            }
            7 => {
                let k = 1 + rng.below(T as u64) as usize;
                if model.get(&lpn).is_some_and(|m| m.1 == Written::Dirty) {
                    ftl.nand_mut().hook.corrupt(lpn, k);
                }
            }
            8 | 9 => {
                let mut buf = vec![0u8; n as usize * PAGE];
                ftl.read(lpn, &mut buf).unwrap();
                for (j, p) in buf.chunks(PAGE).enumerate() {
                    let l = lpn + j as u32;
                    let got = identify(l, p);
                    assert_eq!(got, content(&model, l), "{what}, step {step}: read of lpn {l}");
                    reads.push(got);
                }
            }
            10 => {
                let lpns: Vec<u32> = (0..n).map(|_| rng.below(n_pages as u64) as u32).collect();
                let mut bufs = vec![vec![0u8; PAGE]; lpns.len()];
                let mut items: Vec<(u32, &mut [u8])> =
                    lpns.iter().zip(bufs.iter_mut()).map(|(&l, b)| (l, &mut b[..])).collect();
                ftl.read_many(&mut items).unwrap();
                for (&l, b) in lpns.iter().zip(&bufs) {
                    let got = identify(l, b);
                    assert_eq!(got, content(&model, l), "{what}, step {step}: read_many of lpn {l}");
                    reads.push(got);
                }
            }
            _ => {
                if rng.chance(1, 2) {
                    ftl.flush().unwrap();
                } else {
                    let k = n.min(3);
                    ftl.trim(lpn, k).unwrap();
                    for l in lpn..lpn + k {
                        model.remove(&l);
                    }
                }
            }
        }
    }
    // Every mapped page's format, RAM bit and mark as the model allows.
    let mut buf = vec![0u8; PAGE];
    for l in 0..n_pages {
        let Some(&(want, w)) = model.get(&l) else {
            assert_eq!(ftl.read_with(l, &mut buf).unwrap(), PageRead::Unmapped, "{what}: lpn {l}");
            continue;
        };
        let (detecting, marked) = (ftl.flex_is_detecting(l), ftl.flex_is_marked(l));
        let r = ftl.read_with(l, &mut buf).unwrap();
        formatted += 1;
        assert_eq!(identify(l, &buf), Found::Content(Some(want)), "{what}: lpn {l}");
        let PageRead::Good { format: Some(f), .. } = r else { panic!("{what}: lpn {l}: {r:?}") };
        let ok = match w {
            Written::Clean => (f, detecting, marked) == (PageFormat::Detecting, true, false),
            Written::Dirty => (f, detecting, marked) == (PageFormat::Correcting, false, false),
            Written::Flushed => {
                (f, detecting, marked) == (PageFormat::Correcting, false, true)
                    || (f, detecting, marked) == (PageFormat::Detecting, true, false)
            }
        };
        assert!(ok, "{what}: lpn {l} ({w:?}): {r:?}, detecting bit {detecting}, marked {marked}");
    }
    let fc = *ftl.flex_counters();
    assert_eq!(
        (fc.clean_writes, fc.dirty_writes, fc.marked, fc.correcting_reads + fc.detecting_reads),
        (clean_writes, dirty_writes, marked, formatted),
        "{what}: writes by intent, marks, formatted reads: {fc:?}"
    );
    assert_eq!(
        (fc.detecting_corrupt, fc.correcting_uncorrectable, fc.served_from_backing, fc.refreshed),
        (0, 0, 0, 0),
        "{what}: {fc:?}"
    );
    MultiPlaneRun { reads, flex: fc, ftl: *ftl.counters() }
}

/// The data pages as programmed: (aux word, data, codec bytes: format tag and parity or CRC),
/// by logical page.
type DataPages = std::collections::BTreeMap<u32, (u32, Vec<u8>, Vec<u8>)>;

/// The device of the multi-plane on/off runs: `planes` planes of 8 pages x 16 blocks, 64 spare
/// bytes, half the pages logical; its geometry, config, the noisy chip, the memory for `cached` (or the
/// flat map) and FlexECC's marks.
fn multi_plane_device(cached: bool, planes: u32) -> (Geometry, Config, Noisy, FtlMemory, Vec<u32>) {
    let g = Geometry { spare_bytes: 64, ..geometry(8, 16, planes) };
    let c = cfg_pages(&g, FULL * planes / 2);
    let mem = FtlMemory::with_map(&g, &c, sized_map(map_choice(cached), &c));
    let marks = vec![0u32; flex_mark_words(c.logical_pages)];
    (g, c, noisy(g), mem, marks)
}

/// The data pages on a fresh device after each logical page was written once, in multi-page
/// requests and `write_many` batches with FlexECC's intents (no GC yet), and what reading every
/// page back reported, with multi-plane operations on or off (for
/// [`multi_plane_with_flex_ecc_matches_single_plane`]; by logical page, not address or
/// sequence number: with the flat map the allocator ranks blocks by their wear after a pending
/// erase when multi-plane erases are on, so a checkpoint may take another block, and with the
/// cached map a stripe may write a map page back a few changes early).
fn fresh_image(multi: bool, cached: bool, planes: u32) -> (DataPages, Vec<PageRead>, Counters) {
    let (g, c, mut noise, mut mem, mut marks) = multi_plane_device(cached, planes);
    let (map, m) = mem.parts();
    let flex = Extensions::none().flex(&mut marks, FlexConfig::default());
    let mut ftl = Ftl::format_with(&mut noise, policies(), map, m, c, flex).unwrap();
    ftl.set_multi_plane(multi);
    ftl.reset_counters();
    let mut lpn = 0;
    let mut k = 0;
    while lpn < c.logical_pages {
        let n = (1 + k % 7).min(c.logical_pages - lpn);
        if k % 5 == 4 {
            // A batch, in reverse order.
            let datas: Vec<(u32, Vec<u8>)> = (lpn..lpn + n).rev().map(|l| (l, page(l, 1))).collect();
            let pairs: Vec<(u32, &[u8])> = datas.iter().map(|(l, d)| (*l, &d[..])).collect();
            ftl.write_many(&pairs).unwrap();
        } else {
            let data: Vec<u8> = (lpn..lpn + n).flat_map(|l| page(l, 1)).collect();
            let intent = if k % 3 == 1 { Intent::Clean } else { Intent::Dirty };
            ftl.write_with(lpn, &data, intent).unwrap();
        }
        lpn += n;
        k += 1;
    }
    let mut all = vec![0u8; c.logical_pages as usize * PAGE];
    ftl.read(0, &mut all).unwrap();
    for (l, p) in all.chunks(PAGE).enumerate() {
        assert_eq!(identify(l as u32, p), Found::Content(Some(1)), "lpn {l}");
    }
    let mut buf = vec![0u8; PAGE];
    let reads = (0..c.logical_pages).map(|l| ftl.read_with(l, &mut buf).unwrap()).collect();
    let counters = *ftl.counters();
    drop(ftl);
    let codec_len = policies().codec.spare_len();
    let mut image = DataPages::new();
    for p in 0..g.total_pages() {
        let Some((d, s)) = noise.dev.peek_page(PageId(p)) else { continue };
        if let SpareState::Valid(m) = PageMeta::decode(s) {
            if m.kind == PageKind::Data {
                let codec = s[META_LEN..META_LEN + codec_len].to_vec();
                assert!(image.insert(m.tag, (m.aux, d.to_vec(), codec)).is_none(), "lpn {}", m.tag);
            }
        }
    }
    (image, reads, counters)
}

/// Issue #20: multi-plane programs, reads and erases with FlexECC attached, on and off.
/// On a fresh device ([`fresh_image`], no GC) the stripes' multi-plane programs leave every data
/// page byte for byte as the single-page programs do (data, aux word, format tag and codec
/// bytes) and every page reads back the same, in its intent's format. The seeded workload
/// ([`multi_plane_run`], checked against its model in both runs) returns the same data on every
/// read and the same FlexECC counts of writes by intent, marks and formatted reads; on, it
/// issued multi-plane programs (of clean and dirty stripes and `write_many` batches), reads and
/// (flat map: GC's deferred victims) erases, off none. Flat and cached map, 2 and 4 planes.
/// (GC's own counters, and so how many marked pages it converted before they were rewritten,
/// differ a little between the two: a stripe's planes each run their paced GC before its
/// multi-plane program, not each before its own page, and (flat map) GC's victims wait for the
/// allocator's paired erase; both runs convert pages, and the model checks each run's formats
/// and marks.)
#[test]
fn multi_plane_with_flex_ecc_matches_single_plane() {
    for planes in [2, 4] {
        for cached in [false, true] {
            let what = format!("{planes} planes, cached map {cached}");
            // A fresh device, no GC: the stripes' multi-plane programs leave every page byte for
            // byte as the single-page programs do (metadata, format tag, codec bytes).
            let (image_off, reads_off, c_off) = fresh_image(false, cached, planes);
            let (image_on, reads_on, c_on) = fresh_image(true, cached, planes);
            assert_eq!(
                (c_off.multi_plane_programs, c_off.gc_page_copies, c_on.gc_page_copies),
                (0, 0, 0),
                "{what}"
            );
            assert!(
                c_on.multi_plane_programs * 4 > c_on.host_write_pages / planes as u64,
                "{what}: {c_on:?}"
            );
            assert!(c_on.multi_plane_reads * 2 > c_on.host_write_pages / planes as u64, "{what}: {c_on:?}");
            assert_eq!(image_on.len(), (FULL * planes / 2) as usize, "{what}: one copy of every page");
            assert_eq!(image_on, image_off, "{what}");
            assert_eq!(reads_on, reads_off, "{what}");
            let detecting = reads_on
                .iter()
                .filter(|r| matches!(r, PageRead::Good { format: Some(PageFormat::Detecting), .. }))
                .count();
            assert!(detecting > 10 && detecting < reads_on.len() / 2, "{what}: {detecting} clean pages");
            // The seeded workload, GC included.
            let off = multi_plane_run(false, cached, planes);
            let on = multi_plane_run(true, cached, planes);
            let (c_on, c_off) = (on.ftl, off.ftl);
            eprintln!(
                "{what}: multi-plane programs {}, reads {}, erases {}; flex on {:?}, off {:?}",
                c_on.multi_plane_programs, c_on.multi_plane_reads, c_on.multi_plane_erases, on.flex, off.flex
            );
            assert_eq!(
                (c_off.multi_plane_programs, c_off.multi_plane_reads, c_off.multi_plane_erases),
                (0, 0, 0),
                "{what}"
            );
            assert!(c_on.multi_plane_programs > 300 && c_on.multi_plane_reads > 100, "{what}: {c_on:?}");
            if !cached {
                assert!(c_on.multi_plane_erases > 50, "{what}: {c_on:?}");
            }
            for (run, f, c) in [("on", &on.flex, &c_on), ("off", &off.flex, &c_off)] {
                assert!(
                    f.clean_writes > 500 && f.marked > 50 && f.converted > 5 && f.bits_corrected > 0,
                    "{what}, {run}: {f:?}"
                );
                assert!(c.gc_page_copies > 500, "{what}, {run}: {c:?}");
            }
            assert_eq!(on.reads.len(), off.reads.len(), "{what}");
            let first = on.reads.iter().zip(&off.reads).position(|(a, b)| a != b);
            assert_eq!(first, None, "{what}: first read that differs");
            let (f_on, f_off) = (on.flex, off.flex);
            let host = |f: ftl_core::intent::FlexCounters| {
                (f.clean_writes, f.dirty_writes, f.marked, f.correcting_reads + f.detecting_reads)
            };
            assert_eq!(host(f_on), host(f_off), "{what}");
            assert_eq!(
                (c_on.host_write_pages, c_on.host_read_pages),
                (c_off.host_write_pages, c_off.host_read_pages)
            );
        }
    }
}

/// Issue #20, the room rule of a multi-plane group (`multiplane.rs`: the spare areas of a
/// group's pages are assembled in the page buffer, `planes x (META_LEN + codec bytes) <= data +
/// spare bytes`) with FlexECC's codec bytes (a tag byte, the BCH parity, a CRC-32C), on a chip
/// of 4 planes of 128 + 128-byte pages (a 256-byte page buffer). BCH t = 16 over the 128 bytes
/// (m = 11: 22 parity bytes, 27 codec bytes): 4 x (28 + 27) = 220 bytes fit, stripes of 4 go out
/// as multi-plane programs and read back 4 at a time. t = 24 (33 parity bytes, 38 codec bytes):
/// 4 x 66 = 264 bytes do not fit, every page is programmed on its own, and reads group at most 3
/// pages (3 x 66 = 198). Either way every page reads back, in the format its intent asked for.
#[test]
fn multi_plane_groups_fit_flex_codec_bytes_in_the_page_buffer() {
    type Big = FlexCodec<2048, 5>;
    for (t, fits) in [(16u32, true), (24, false)] {
        let g = Geometry {
            data_bytes: 128,
            spare_bytes: 128,
            ecc: nand_hal::EccRequirement { bits: t as u8, codeword_bytes: 128 },
            ..geometry(8, 16, 4)
        };
        let c = cfg_pages(&g, 96);
        let codec: Big = FlexCodec::new(BchCodec::new(11, t, 128, 128).unwrap());
        let codec_len = codec.spare_len();
        assert_eq!(4 * (META_LEN + codec_len) <= g.raw_page_bytes() as usize, fits, "t = {t}");
        let pol = Policies {
            codec,
            classifier: RequestSizeClassifier::default(),
            victim: Greedy,
            placement: SingleHostStream,
        };
        let mut emu = Emulator::new(EmulatorConfig::new(g)).unwrap();
        let mut mem = FtlMemory::new(&g, &c);
        let mut marks = vec![0u32; flex_mark_words(c.logical_pages)];
        let (map, m) = mem.parts();
        let flex = Extensions::none().flex(&mut marks, FlexConfig::default());
        let mut ftl = Ftl::format_with(&mut emu, pol, map, m, c, flex).unwrap();
        ftl.reset_counters();
        let pb = g.data_bytes as usize;
        let fill = |l: u32, out: &mut [u8]| fill_page(l, 5, out);
        for (w, lpn) in (0..32u32).step_by(8).enumerate() {
            let mut data = vec![0u8; 8 * pb];
            for (j, p) in data.chunks_mut(pb).enumerate() {
                fill(lpn + j as u32, p);
            }
            let intent = if w % 2 == 1 { Intent::Clean } else { Intent::Dirty };
            ftl.write_with(lpn, &data, intent).unwrap();
        }
        let c1 = *ftl.counters();
        assert_eq!(c1.host_write_pages, 32, "t = {t}: {c1:?}");
        assert_eq!(c1.multi_plane_programs, if fits { 8 } else { 0 }, "t = {t}: {c1:?}");
        let mut all = vec![0u8; 32 * pb];
        ftl.read(0, &mut all).unwrap();
        for (l, p) in all.chunks(pb).enumerate() {
            assert_eq!(identify(l as u32, p), Found::Content(Some(5)), "t = {t}: lpn {l}");
        }
        // 32 pages, 4 per page offset: one group of 4 per offset, or (3 x 66 bytes the most that
        // fit) a group of 3 and a single read: 8 multi-plane reads either way.
        let reads = ftl.counters().multi_plane_reads;
        assert_eq!(reads, 8, "t = {t}");
        let mut buf = vec![0u8; pb];
        for l in 0..32u32 {
            let want = if (l / 8) % 2 == 1 { PageFormat::Detecting } else { PageFormat::Correcting };
            let r = ftl.read_with(l, &mut buf).unwrap();
            assert_eq!(r, PageRead::Good { format: Some(want), corrected: 0 }, "t = {t}: lpn {l}");
        }
    }
}
