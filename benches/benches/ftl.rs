//! Hot paths of the FTL: map lookup and update, and the CPU cost of a host page write at steady
//! state with GC running at 90% fill (metadata-only emulator, so the emulator's data copy is not
//! counted), and the flat vs the cached map (16 KiB) with an emulator that stores data (the
//! cached map reads its map pages back; both then include the data copies).
//! Run: `cargo bench -p ftl-benches --bench ftl`.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use ftl_benches::SpareStore;
use ftl_core::policy::{Crc32cCodec, Greedy, Policies, RequestSizeClassifier, SingleHostStream};
use ftl_core::{Config, FlatMap, Ftl, MappingTable};
use nand_hal::{NandFlash, PageId};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use sim_host::emulator::{Emulator, EmulatorConfig};
use sim_host::memory::{FtlMemory, MapChoice};
use sim_host::steady_state::{MetadataOnlyPolicies, SteadyState};

fn map(c: &mut Criterion) {
    let n = 1u32 << 20;
    let mut entries = vec![0u32; n as usize];
    let mut m = FlatMap::new(&mut entries);
    m.clear();
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let idx: Vec<u32> = (0..4096).map(|_| rng.random_range(0..n)).collect();
    let mut g = c.benchmark_group("map");
    g.throughput(Throughput::Elements(idx.len() as u64));
    g.bench_function("update_1M_entries", |b| {
        b.iter(|| {
            for (k, &l) in idx.iter().enumerate() {
                black_box(m.set(l, Some(PageId(k as u32))));
            }
        })
    });
    g.bench_function("lookup_1M_entries", |b| {
        b.iter(|| {
            for &l in &idx {
                black_box(m.get(l));
            }
        })
    });
    g.finish();
}

fn write_at_90<P: ftl_core::policy::PolicySet + Default, N: NandFlash>(
    c: &mut Criterion,
    name: &str,
    emu: N,
) {
    write_at_90_with::<P, N>(c, name, emu, MapChoice::Flat)
}

fn write_at_90_with<P: ftl_core::policy::PolicySet + Default, N: NandFlash>(
    c: &mut Criterion,
    name: &str,
    mut emu: N,
    map: MapChoice,
) {
    let geo = SteadyState::ANCHOR_GEOMETRY;
    let cfg = Config::for_utilization(&geo, 900);
    let mut mem = FtlMemory::with_map(&geo, &cfg, map);
    let (m, memory) = mem.parts();
    let mut ftl = Ftl::format(&mut emu, P::default(), m, memory, cfg).expect("format");
    let page = vec![0u8; geo.data_bytes as usize];
    let n = cfg.logical_pages;
    for l in 0..n {
        ftl.write(l, &page).expect("fill");
    }
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    for _ in 0..2 * n {
        ftl.write(rng.random_range(0..n), &page).expect("warm up");
    }
    ftl.reset_counters();
    let mut g = c.benchmark_group("ftl_write_steady_90pct");
    g.throughput(Throughput::Elements(1));
    g.bench_function(name, |b| {
        b.iter(|| {
            ftl.write(rng.random_range(0..n), black_box(&page)).expect("write");
        })
    });
    g.finish();
    let cnt = ftl.counters();
    eprintln!(
        "{name}: measured WAF (all programs / host writes) {:.2} over {} writes",
        cnt.nand_programs as f64 / cnt.host_write_pages.max(1) as f64,
        cnt.host_write_pages
    );
}

fn emulator() -> Emulator {
    let mut ec = EmulatorConfig::new(SteadyState::ANCHOR_GEOMETRY);
    ec.store_data = false;
    // The FTL's anchor records must read back (they are verified when written).
    ec.stored_blocks = ftl_core::anchor::ANCHOR_BLOCKS;
    Emulator::new(ec).expect("emulator")
}

fn ftl_write(c: &mut Criterion) {
    type CrcPolicies = Policies<Crc32cCodec, RequestSizeClassifier, Greedy, SingleHostStream>;
    write_at_90::<MetadataOnlyPolicies, _>(
        c,
        "null_codec_spare_store",
        SpareStore::new(SteadyState::ANCHOR_GEOMETRY),
    );
    write_at_90::<MetadataOnlyPolicies, _>(c, "null_codec_emulator", emulator());
    write_at_90::<CrcPolicies, _>(c, "crc32c_codec_emulator", emulator());
    // The cached map reads its map pages back, so the emulator stores data for both of these.
    write_at_90::<MetadataOnlyPolicies, _>(c, "flat_map_emulator_with_data", emulator_with_data());
    write_at_90_with::<MetadataOnlyPolicies, _>(
        c,
        "cached_map_16k_emulator_with_data",
        emulator_with_data(),
        MapChoice::Cached { cache_bytes: 16 * 1024 },
    );
}

fn emulator_with_data() -> Emulator {
    Emulator::new(EmulatorConfig::new(SteadyState::ANCHOR_GEOMETRY)).expect("emulator")
}

criterion_group!(benches, map, ftl_write);
criterion_main!(benches);
