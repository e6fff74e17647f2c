//! Cost of CAFTL's fingerprinting and fingerprint store (issue 7, feature `dedup`):
//!
//! * `hash_4k`: SHA-1 (the fingerprint) and CRC-32 (the pre-hash) of one 4 KiB page, reported
//!   as throughput. The `sha1` crate uses the x86 SHA extensions when the CPU has them (detected
//!   at run time); this bench prints whether `/proc/cpuinfo` lists `sha_ni`. Target: SHA-1 at
//!   >= 900 MiB/s where the CPU has SHA extensions.
//! * `store_1e5`, `store_1e6`: one fingerprint-store lookup with 10^5 and 10^6 resident
//!   entries, 256 segments (the paper's configuration) of 4 KiB buckets (141 entries), the pool
//!   sized so every entry fits (entries / 141 + one partial bucket per segment), a pre-hash table
//!   of the power of two at or above twice the capacity. Fingerprints and CRCs are random; one
//!   entry in ten has a hotness of 2..=255 (geometric), the rest 1. Each group times:
//!   - `miss_prehash`: a page whose CRC no entry has, through the pre-hash (`may_contain_crc`,
//!     and the SHA-1 lookup only if it said "maybe"): the target is <= 100 ns;
//!   - `hit/...` and `miss/...`: `lookup` of a resident fingerprint (drawn with probability
//!     proportional to its hotness: content referenced r times is taken as r times as likely to
//!     be written again) and of an absent one, under each layout and search strategy:
//!     `insertion` (as filled), `hotness` (after `reorganize(Layout::Hotness)`), `sorted` (after
//!     `reorganize(Layout::Sorted)`), each with `none`, `range` (range check), and for `sorted`
//!     also `bsearch` (bucket-level binary search) and `bsearch+range`.
//!
//! Before timing, each configuration's average fingerprint comparisons per lookup (the paper's
//! Figure 12 metric) is printed.
//!
//! Lookups cycle through 2^16 prepared keys, so most touch memory outside the caches at 10^6
//! entries (30 MiB of buckets, 16 MiB of pre-hash table); consecutive lookups are independent, so
//! the CPU overlaps some of their misses. The machine is shared: read criterion's estimates with
//! that in mind.
//! Run: `cargo bench -p ftl-benches --bench dedup`.

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use ftl_policies::dedup::{
    crc32_page, sha1_page, Accel, Bucket, CrcSlot, DedupIndex, Entry, Fingerprint, FingerprintStore, Layout,
    Location, Segment, StoreMemory, ENTRIES_4K,
};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

const SEGMENTS: usize = 256;
const KEYS: usize = 1 << 16;

fn has_sha_ni() -> bool {
    std::fs::read_to_string("/proc/cpuinfo")
        .map(|s| s.split_whitespace().any(|w| w == "sha_ni"))
        .unwrap_or(false)
}

fn hashes(c: &mut Criterion) {
    eprintln!("/proc/cpuinfo lists sha_ni: {}", has_sha_ni());
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let page: Vec<u8> = (0..4096).map(|_| rng.random()).collect();
    let mut g = c.benchmark_group("hash_4k");
    g.throughput(Throughput::Bytes(4096));
    g.bench_function("sha1", |b| b.iter(|| sha1_page(black_box(&page))));
    g.bench_function("crc32", |b| b.iter(|| crc32_page(black_box(&page))));
    g.finish();
}

/// The caller memory of one store.
struct Mem {
    buckets: Vec<Bucket>,
    list: Vec<u32>,
    segs: Vec<Segment>,
    slots: Vec<CrcSlot>,
}

fn random_fp(rng: &mut ChaCha8Rng) -> Fingerprint {
    let mut b = [0u8; 20];
    rng.fill(&mut b);
    Fingerprint(b)
}

/// A layout (`None`: as filled) and the search strategies timed on it, with their names.
type Config = (&'static str, Option<Layout>, &'static [(&'static str, Accel)]);

fn store_group(c: &mut Criterion, entries: usize, name: &str) {
    let nb = entries / ENTRIES_4K + SEGMENTS;
    let slots = (2 * nb * ENTRIES_4K).next_power_of_two();
    let mut mem = Mem {
        buckets: (0..nb).map(|_| Bucket::new()).collect(),
        list: vec![0; nb],
        segs: vec![Segment::EMPTY; SEGMENTS],
        slots: vec![CrcSlot::EMPTY; slots],
    };
    let mut st = FingerprintStore::new(
        StoreMemory {
            buckets: &mut mem.buckets,
            bucket_list: &mut mem.list,
            segments: &mut mem.segs,
            crc_slots: &mut mem.slots,
        },
        Accel::NONE,
    )
    .expect("valid store memory");

    let mut rng = ChaCha8Rng::seed_from_u64(entries as u64);
    let mut resident: Vec<(Fingerprint, u8)> = Vec::with_capacity(entries);
    for i in 0..entries {
        let fp = random_fp(&mut rng);
        let hot = if rng.random_range(0..10) == 0 {
            // Geometric over 2..=255: each further reference with probability 1/2.
            let mut h = 2u8;
            while h < 255 && rng.random_bool(0.5) {
                h += 1;
            }
            h
        } else {
            1
        };
        let e = Entry {
            fingerprint: fp,
            crc: rng.random(),
            location: Location::from_raw(i as u32),
            hotness: hot,
        };
        assert!(st.insert(e).stored());
        resident.push((fp, hot));
    }
    assert_eq!(st.len(), entries);
    // Hit keys drawn with probability proportional to hotness.
    let mut cum = Vec::with_capacity(entries);
    let mut total = 0u64;
    for &(_, h) in &resident {
        total += h as u64;
        cum.push(total);
    }
    let hits: Vec<Fingerprint> = (0..KEYS)
        .map(|_| {
            let x = rng.random_range(0..total);
            resident[cum.partition_point(|&c| c <= x)].0
        })
        .collect();
    let misses: Vec<Fingerprint> = (0..KEYS).map(|_| random_fp(&mut rng)).collect();
    let absent_crcs: Vec<u32> = (0..KEYS)
        .map(|_| loop {
            let c: u32 = rng.random();
            if !st.may_contain_crc(c) {
                break c;
            }
        })
        .collect();
    eprintln!(
        "{name}: {} entries in {} of {} buckets, {} pre-hash slots ({} distinct CRCs)",
        st.len(),
        st.buckets_in_use(),
        st.buckets(),
        st.crc_index().slots(),
        st.crc_index().distinct()
    );

    let mut g = c.benchmark_group(name);
    g.throughput(Throughput::Elements(1));
    let mut i = 0usize;
    g.bench_function("miss_prehash", |b| {
        b.iter(|| {
            let k = i;
            i = (i + 1) & (KEYS - 1);
            if st.may_contain_crc(black_box(absent_crcs[k])) {
                st.lookup(&misses[k])
            } else {
                None
            }
        })
    });

    let layouts: [Config; 3] = [
        (
            "insertion",
            None,
            &[("none", Accel::NONE), ("range", Accel { range_check: true, bucket_search: false })],
        ),
        (
            "hotness",
            Some(Layout::Hotness),
            &[("none", Accel::NONE), ("range", Accel { range_check: true, bucket_search: false })],
        ),
        (
            "sorted",
            Some(Layout::Sorted),
            &[
                ("none", Accel::NONE),
                ("range", Accel { range_check: true, bucket_search: false }),
                ("bsearch", Accel { range_check: false, bucket_search: true }),
                ("bsearch+range", Accel::ALL),
            ],
        ),
    ];
    for (lname, layout, accels) in layouts {
        if let Some(l) = layout {
            st.reorganize(l);
        }
        for &(aname, accel) in accels {
            st.set_accel(accel);
            for (kind, keys) in [("hit", &hits), ("miss", &misses)] {
                st.reset_stats();
                for k in keys.iter() {
                    let found = st.lookup(k).is_some();
                    assert_eq!(found, kind == "hit");
                }
                let s = st.stats();
                eprintln!(
                    "{name} {kind}/{lname}/{aname}: {:.1} comparisons, {:.2} buckets searched per lookup",
                    s.comparisons as f64 / s.lookups as f64,
                    s.buckets_searched as f64 / s.lookups as f64
                );
                let mut i = 0usize;
                g.bench_function(format!("{kind}/{lname}/{aname}"), |b| {
                    b.iter(|| {
                        let k = &keys[i];
                        i = (i + 1) & (KEYS - 1);
                        st.lookup(black_box(k))
                    })
                });
            }
        }
    }
    g.finish();
}

fn stores(c: &mut Criterion) {
    store_group(c, 100_000, "store_1e5");
    store_group(c, 1_000_000, "store_1e6");
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    targets = hashes, stores
}
criterion_main!(benches);
