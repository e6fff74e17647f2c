//! CAFTL's fingerprint index across a clean remount (issue #21): the index is RAM only and starts
//! empty at every mount; `Ftl::dedup_rebuild_index` refills it from flash.
//!
//! The FIU mail sample (`testdata/traces`, the repository's copy: 1,102 written pages) is written
//! once, page by page with its recorded contents; then the dedup rate of the next 10,000 page
//! writes (the sample replayed from its start, cyclically) is measured three ways: without a
//! remount in between, with a clean remount and the rebuild run to the end, and with a clean
//! remount and no rebuild. Target: the rebuilt run
//! within 1% (absolute) of the run without the remount. The figures go to stderr (docs/eval/dedup
//! quotes them); the rebuild's cost is one read per valid page plus one spare read per unique one.

use std::collections::HashMap;
use std::path::Path;

use ftl_core::dedup::{Dedup, DedupSettings};
use ftl_core::policy::DefaultPolicies;
use ftl_core::{Config, Extensions, Ftl};
use ftl_policies::dedup::Accel;
use nand_hal::{EccRequirement, Geometry};
use sim_host::dedup_memory::{DedupBuffers, DedupSizes};
use sim_host::emulator::{Emulator, EmulatorConfig};
use sim_host::memory::FtlMemory;
use sim_host::trace::{read_trace, Format, ParseOptions};

const PAGE: u32 = 4096;
const WINDOW: usize = 10_000;

/// The sample's written pages in order: (compact logical page, content).
fn fiu_pages() -> Vec<(u32, u64)> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../testdata/traces/fiu_mail_sample/fiu_mail_cheetah_sample.blkparse");
    let trace = read_trace(&path, Format::Fiu, &ParseOptions::default()).expect("FIU sample");
    let mut compact: HashMap<u64, u32> = HashMap::new();
    let mut out = Vec::new();
    for r in trace.requests.iter().filter(|r| r.is_write()) {
        let Some(contents) = &r.content else { continue };
        for (i, &c) in contents.iter().enumerate() {
            let page = r.offset / PAGE as u64 + i as u64;
            let n = compact.len() as u32;
            out.push((*compact.entry(page).or_insert(n), c));
        }
    }
    out
}

fn fill(content: u64, page: &mut [u8]) {
    let b = content.to_be_bytes();
    for chunk in page.chunks_mut(8) {
        chunk.copy_from_slice(&b[..chunk.len()]);
    }
}

#[derive(Copy, Clone, Debug, PartialEq)]
enum Between {
    Nothing,
    Remount,
    RemountAndRebuild,
}

struct Outcome {
    rate: f64,
    rebuild_reads: u64,
    rebuilt: u64,
}

fn run(pages: &[(u32, u64)], between: Between) -> Outcome {
    let footprint = pages.iter().map(|&(l, _)| l).max().unwrap_or(0) + 1;
    let ppb = 64;
    // Twice the footprint of physical space (the dedup tables are sized to the logical pages).
    let blocks_per_plane = (2 * footprint).div_ceil(2 * ppb) + 8;
    let geo = Geometry {
        data_bytes: PAGE,
        spare_bytes: 128,
        pages_per_block: ppb,
        blocks_per_plane,
        planes_per_lun: 2,
        luns: 1,
        nop: 4,
        sequential_program: true,
        ecc: EccRequirement { bits: 4, codeword_bytes: 512 },
        endurance: 100_000,
    };
    let cfg = Config::with_logical_pages(&geo, footprint.max(64));
    let mut emu = Emulator::new(EmulatorConfig::new(geo)).unwrap();
    let sizes =
        DedupSizes { virtual_pages: cfg.logical_pages as usize, buckets: 64, segments: 16, page_bytes: PAGE };
    let settings = DedupSettings { sampling_unit: 0, ..DedupSettings::default() };
    let mut buf = vec![0u8; PAGE as usize];
    let mut mem = FtlMemory::new(&geo, &cfg);
    let mut bufs = DedupBuffers::<{ ftl_policies::dedup::ENTRIES_4K }>::new(sizes);
    let (mut index, memory) = bufs.parts(true, Accel::ALL);
    let (map, m) = mem.parts();
    let ext = Extensions::none().dedup(Dedup { memory, index: &mut index, settings });
    let mut ftl = Ftl::format_with(&mut emu, DefaultPolicies::default(), map, m, cfg, ext).unwrap();
    for &(l, c) in pages {
        fill(c, &mut buf);
        ftl.write(l, &buf).unwrap();
    }
    let mut outcome = Outcome { rate: 0.0, rebuild_reads: 0, rebuilt: 0 };
    let measure = |ftl: &mut Ftl<'_, &mut Emulator, DefaultPolicies, ftl_core::AnyMap<'_>>,
                   buf: &mut [u8]| {
        let before = ftl.dedup_stats().deduplicated;
        for &(l, c) in pages.iter().cycle().take(WINDOW) {
            fill(c, buf);
            ftl.write(l, buf).unwrap();
        }
        (ftl.dedup_stats().deduplicated - before) as f64 / WINDOW as f64
    };
    if between == Between::Nothing {
        outcome.rate = measure(&mut ftl, &mut buf);
        return outcome;
    }
    ftl.unmount().unwrap();
    let mut mem = FtlMemory::new(&geo, &cfg);
    let mut bufs = DedupBuffers::<{ ftl_policies::dedup::ENTRIES_4K }>::new(sizes);
    let (mut index, memory) = bufs.parts(true, Accel::ALL);
    let (map, m) = mem.parts();
    let ext = Extensions::none().dedup(Dedup { memory, index: &mut index, settings });
    let mut ftl = Ftl::mount_with(&mut emu, DefaultPolicies::default(), map, m, cfg, ext).unwrap();
    if between == Between::RemountAndRebuild {
        let reads = ftl.counters().nand_reads;
        while !ftl.dedup_rebuild_index(1024).unwrap().done {}
        outcome.rebuild_reads = ftl.counters().nand_reads - reads;
        outcome.rebuilt = ftl.dedup_stats().rebuilt;
    }
    outcome.rate = measure(&mut ftl, &mut buf);
    outcome
}

#[test]
fn rebuilt_index_deduplicates_like_no_remount_on_the_fiu_sample() {
    let pages = fiu_pages();
    assert!(pages.len() > 1_000, "{} written pages", pages.len());
    let plain = run(&pages, Between::Nothing);
    let rebuilt = run(&pages, Between::RemountAndRebuild);
    let empty = run(&pages, Between::Remount);
    eprintln!(
        "FIU mail sample, {} written pages, then {} page writes (the sample again, cyclically) deduplicated: \
         no remount {:.2}%, remount + rebuild {:.2}% ({} contents, {} reads), remount without \
         rebuild {:.2}%",
        pages.len(),
        WINDOW,
        100.0 * plain.rate,
        100.0 * rebuilt.rate,
        rebuilt.rebuilt,
        rebuilt.rebuild_reads,
        100.0 * empty.rate
    );
    assert!((rebuilt.rate - plain.rate).abs() <= 0.01, "rebuilt {} vs {}", rebuilt.rate, plain.rate);
    // The remount without a rebuild loses what the index knew (the target would fail).
    assert!(empty.rate + 0.05 < plain.rate, "empty index {} vs {}", empty.rate, plain.rate);
}
