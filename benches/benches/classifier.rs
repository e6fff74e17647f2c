//! Cost of the hot/cold classifiers of issue 9 (feature `eti`): ETI per write request with 2048
//! extents, MHF and MBF per page, each with the paper's defaults (Table 2), under three streams
//! over a 2^24-page (64 GiB at 4 KiB) logical space:
//!
//! * sequential: 64-page requests one after the other, wrapping at the end;
//! * random: uniform start, 1..=16 pages;
//! * skewed: 65 536 fixed requests (uniform start, 1..=16 pages), drawn Zipf(1.0)-distributed, so
//!   a few requests recur often (hot) and most rarely.
//!
//! Each stream is 2^16 requests generated up front (MHF and MBF get its pages, one LPN each), the
//! classifier is first run over the whole stream twice to reach its steady state (a full extent
//! table, several decays), then each timed iteration classifies the next request (ETI) or page
//! (MHF, MBF) of the looping stream: the figures include the amortised decay and the table's
//! splits and merges. The ETI target is <= 100 ns per request. `double_split_near_full` times
//! ETI's most expensive case alone (see there).
//! Run: `cargo bench -p ftl-benches --bench classifier`.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use ftl_core::policy::{Classifier, Temperature, WriteRequest};
use ftl_policies::eti::{Eti, EtiConfig, Mbf, Mhf};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

const SPACE: u32 = 1 << 24;
const STREAM: usize = 1 << 16;

fn req(lpn: u32, pages: u32) -> WriteRequest {
    WriteRequest { lpn, pages, page_bytes: 4096 }
}

fn sequential() -> Vec<WriteRequest> {
    (0..STREAM as u32).map(|k| req((k * 64) % SPACE, 64)).collect()
}

fn random(rng: &mut ChaCha8Rng) -> Vec<WriteRequest> {
    (0..STREAM).map(|_| req(rng.random_range(0..SPACE - 16), rng.random_range(1..=16))).collect()
}

fn skewed(rng: &mut ChaCha8Rng) -> Vec<WriteRequest> {
    let slots: Vec<WriteRequest> =
        (0..65_536).map(|_| req(rng.random_range(0..SPACE - 16), rng.random_range(1..=16))).collect();
    // Zipf(1.0) over the slots by inverse CDF (floating point is fine here, on the host).
    let mut cdf = Vec::with_capacity(slots.len());
    let mut sum = 0.0f64;
    for k in 1..=slots.len() {
        sum += 1.0 / k as f64;
        cdf.push(sum);
    }
    (0..STREAM)
        .map(|_| {
            let u = rng.random::<f64>() * sum;
            slots[cdf.partition_point(|&c| c < u).min(slots.len() - 1)]
        })
        .collect()
}

fn streams() -> Vec<(&'static str, Vec<WriteRequest>)> {
    let mut rng = ChaCha8Rng::seed_from_u64(9);
    vec![("sequential", sequential()), ("random", random(&mut rng)), ("skewed", skewed(&mut rng))]
}

fn eti(c: &mut Criterion) {
    let mut g = c.benchmark_group("eti_2048_per_request");
    g.throughput(Throughput::Elements(1));
    for (name, stream) in streams() {
        let mut e: Eti<2048> = Eti::new(EtiConfig::with_address_pages(SPACE as u64)).expect("valid config");
        let mut hot = 0usize;
        for r in stream.iter().chain(&stream) {
            hot += (e.classify_request(r) == Temperature::Hot) as usize;
        }
        eprintln!(
            "eti {name}: {} extents after warm-up, {:.1}% of warm-up requests hot, {:?}",
            e.extent_count(),
            100.0 * hot as f64 / (2 * stream.len()) as f64,
            e.stats()
        );
        let mut i = 0;
        g.bench_function(name, |b| {
            b.iter(|| {
                let t = e.classify_request(black_box(&stream[i]));
                i = if i + 1 == stream.len() { 0 } else { i + 1 };
                black_box(t)
            })
        });
    }
    // The costliest request: a split at both ends in the middle of a table 2 short of full
    // (moving on average half of its 10 KiB), timed on a fresh copy of that table each time.
    // Criterion prepares the copies in batches, so the table is not in the L1 cache when timed:
    // an upper bound; in the streams above the table stays cached.
    let mut rng = ChaCha8Rng::seed_from_u64(10);
    let cfg = EtiConfig { decay_period: u32::MAX, ..EtiConfig::with_address_pages(SPACE as u64) };
    let mut base: Eti<2048> = Eti::new(cfg).expect("valid config");
    while base.extent_count() < 2046 {
        base.record(rng.random_range(0..SPACE - 16), rng.random_range(1..=16));
    }
    let probes = random(&mut rng);
    let mut i = 0;
    g.bench_function("double_split_near_full", |b| {
        b.iter_batched_ref(
            || base.clone(),
            |e| {
                let t = e.classify_request(black_box(&probes[i]));
                i = if i + 1 == probes.len() { 0 } else { i + 1 };
                black_box(t)
            },
            BatchSize::SmallInput,
        )
    });
    g.finish();
}

fn per_page<C: Classifier + Default>(c: &mut Criterion, group: &str) {
    let mut g = c.benchmark_group(group);
    g.throughput(Throughput::Elements(1));
    for (name, stream) in streams() {
        let pages: Vec<u32> = stream.iter().flat_map(|r| r.lpn..r.lpn + r.pages).collect();
        let mut k = C::default();
        let mut hot = 0usize;
        for &l in pages.iter().chain(&pages) {
            hot += (k.classify_page(l, Temperature::Cold) == Temperature::Hot) as usize;
        }
        eprintln!(
            "{group} {name}: {} pages, {:.1}% of warm-up pages hot",
            pages.len(),
            100.0 * hot as f64 / (2 * pages.len()) as f64
        );
        let mut i = 0;
        g.bench_function(name, |b| {
            b.iter(|| {
                let t = k.classify_page(black_box(pages[i]), Temperature::Cold);
                i = if i + 1 == pages.len() { 0 } else { i + 1 };
                black_box(t)
            })
        });
    }
    g.finish();
}

fn mhf(c: &mut Criterion) {
    per_page::<Mhf>(c, "mhf_2048_per_page");
}

fn mbf(c: &mut Criterion) {
    per_page::<Mbf>(c, "mbf_4x2048_per_page");
}

criterion_group!(benches, eti, mhf, mbf);
criterion_main!(benches);
