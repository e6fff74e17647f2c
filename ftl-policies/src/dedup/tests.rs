//! Tests of the dedup components: known-answer vectors for SHA-1 and CRC-32, the fingerprint store
//! against a reference model, the search strategies against each other, the CRC pre-hash's
//! no-false-miss property, reference-count saturation, and the sampling helper.
//!
//! The model (`Model`) is a second, deliberately naive implementation of the store's rules from
//! `store.rs`'s documentation: `Vec`s of segments of buckets of entries, the segment by long
//! division of the fingerprint's bytes, lookups by linear scan of every entry, the same
//! fill-then-round-robin insertion and coldest-entry replacement, reorganisation by collecting,
//! sorting with the standard library and re-chunking. Property tests drive the model and four
//! stores (every combination of the two search strategies) with random operation sequences and
//! compare every answer, the whole bucket structure and the pre-hash counts after each step.

extern crate std;

use std::collections::BTreeMap;
use std::format;
use std::string::String;
use std::vec;
use std::vec::Vec;

use proptest::prelude::*;

use super::*;

// ---------------------------------------------------------------------------------------------
// Helpers.

/// SplitMix64, 8 bytes per output little-endian (the vectors' `splitmix64(seed)`).
fn splitmix_bytes(seed: u64, len: usize) -> Vec<u8> {
    let mut s = seed;
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        s = s.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = s;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        out.extend_from_slice(&z.to_le_bytes());
    }
    out.truncate(len);
    out
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn vectors(name: &str) -> serde_json::Value {
    let path = format!("{}/../testdata/vectors/{name}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_json::from_str(&text).unwrap()
}

/// Caller memory for a store with `K` entries per bucket.
struct Mem<const K: usize> {
    buckets: Vec<Bucket<K>>,
    list: Vec<u32>,
    segs: Vec<Segment>,
    slots: Vec<CrcSlot>,
}

impl<const K: usize> Mem<K> {
    /// `nb` buckets, `ns` segments, a pre-hash table of the smallest power of two above twice
    /// the capacity (or none).
    fn new(nb: usize, ns: usize, prehash: bool) -> Self {
        let slots = if prehash { (2 * nb * K + 1).next_power_of_two() } else { 0 };
        Mem {
            buckets: (0..nb).map(|_| Bucket::EMPTY).collect(),
            list: vec![0; nb],
            segs: vec![Segment::EMPTY; ns],
            slots: vec![CrcSlot::EMPTY; slots],
        }
    }

    fn store(&mut self, accel: Accel) -> FingerprintStore<'_, K> {
        FingerprintStore::new(
            StoreMemory {
                buckets: &mut self.buckets,
                bucket_list: &mut self.list,
                segments: &mut self.segs,
                crc_slots: &mut self.slots,
            },
            accel,
        )
        .unwrap()
    }
}

/// A fingerprint for pool index `f`: mostly SHA-1s, but every fourth shares its first 8 bytes
/// with the others of its kind (so comparisons must go past the first word) and every eighth also
/// the next 8.
fn pool_fp(f: u16) -> Fingerprint {
    let mut b = sha1_page(&f.to_le_bytes()).0;
    if f.is_multiple_of(4) {
        b[..8].copy_from_slice(&[0x80, 0, 0, 0, 0, 0, 0, 0x11]);
    }
    if f.is_multiple_of(8) {
        b[8..16].copy_from_slice(&[0x42; 8]);
    }
    Fingerprint(b)
}

/// The CRC carried by pool entry `f`: eleven values, 0 among them, so CRCs collide.
fn pool_crc(f: u16) -> u32 {
    (f as u32 % 11).wrapping_mul(0x9E37_79B9)
}

fn entry(f: u16, loc: u32, hot: u8) -> Entry {
    Entry { fingerprint: pool_fp(f), crc: pool_crc(f), location: Location::from_raw(loc), hotness: hot }
}

/// The big-endian value of `fp` modulo `n`, by long division one byte at a time.
fn naive_mod(fp: &Fingerprint, n: usize) -> usize {
    fp.0.iter().fold(0u64, |r, &b| (r * 256 + b as u64) % n as u64) as usize
}

// ---------------------------------------------------------------------------------------------
// Known-answer vectors.

#[test]
fn splitmix_matches_the_notes() {
    assert_eq!(hex(&splitmix_bytes(1, 16)), "c15c0289ec2d0a9167ec8e65a18debbe");
}

#[test]
fn sha1_known_answers() {
    // FIPS 180-2 appendix A (one block, two blocks, a million 'a') and the empty message.
    let cases: [(&[u8], &str); 4] = [
        (b"abc", "a9993e364706816aba3e25717850c26c9cd0d89d"),
        (b"", "da39a3ee5e6b4b0d3255bfef95601890afd80709"),
        (
            concat!("abcdbcdecdefdefgefghfghighijhijkijkljklmklm", "nlmnomnopnopq").as_bytes(),
            "84983e441c3bd26ebaae4aa1f95129e5e54670f1",
        ),
        (
            concat!(
                "abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmn",
                "hijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu"
            )
            .as_bytes(),
            "a49b2446a02c645bf419f995b67091253a04a259",
        ),
    ];
    for (msg, want) in cases {
        assert_eq!(hex(sha1_page(msg).as_bytes()), want, "{:?}", String::from_utf8_lossy(msg));
    }
    assert_eq!(hex(&sha1_page(&vec![b'a'; 1_000_000]).0), "34aa973cd4c4daa4f61eeb2bdbad27316534016f");
    // 4 KiB pages (values from Python's hashlib).
    assert_eq!(hex(&sha1_page(&splitmix_bytes(1, 4096)).0), "da5e9a2800e0db6594ca8de1507f5243296bae4e");
    assert_eq!(hex(&sha1_page(&[0xFF; 4096]).0), "e0c66649d1434eca3435033a32634cb90cef0f31");
    assert_eq!(hex(&sha1_page(&[0x00; 4096]).0), "1ceaf73df40e531df3bfb26b4fb7cd95fb7bff1d");
}

#[test]
fn crc32_check_values() {
    let v = vectors("crc_vectors.json");
    let table = v["CRC-32 (IEEE/ISO-HDLC)"].as_object().unwrap();
    let mut checked = 0;
    for (input, want) in table {
        let data: Vec<u8> = match input.as_str() {
            "\"123456789\"" => b"123456789".to_vec(),
            "4096 x 0xFF" => vec![0xFF; 4096],
            "4096 x 0x00" => vec![0x00; 4096],
            "splitmix64(seed=1) 4096B" => splitmix_bytes(1, 4096),
            other => panic!("unknown input {other}"),
        };
        let want = u32::from_str_radix(want.as_str().unwrap().trim_start_matches("0x"), 16).unwrap();
        assert_eq!(crc32_page(&data), want, "{input}");
        checked += 1;
    }
    assert_eq!(checked, 4);
}

#[test]
fn fingerprint_order_is_the_big_endian_number() {
    let a = Fingerprint([0; 20]);
    let mut b = [0; 20];
    b[19] = 1;
    let mut c = [0; 20];
    c[0] = 1;
    assert!(a < Fingerprint(b) && Fingerprint(b) < Fingerprint(c));
    let w = Fingerprint(c).words();
    assert_eq!(w, [0x0100_0000, 0, 0, 0, 0]);
}

#[test]
fn segment_is_fingerprint_mod_n() {
    for n in [1usize, 2, 3, 7, 10, 64, 100, 256, 255, 1000, 4099, 65535, 65536] {
        let mut m = Mem::<2>::new(1, n, false);
        let st = m.store(Accel::NONE);
        for f in 0..200u16 {
            let fp = pool_fp(f);
            assert_eq!(st.segment_of(&fp), naive_mod(&fp, n), "n={n} f={f}");
        }
        let max = Fingerprint([0xFF; 20]);
        assert_eq!(st.segment_of(&max), naive_mod(&max, n), "n={n}");
    }
}

#[test]
fn location_encoding() {
    let p = Location::physical(12345).unwrap();
    assert!(!p.is_virtual());
    assert_eq!(p.target(), Target::Physical(12345));
    let v = Location::shared(7).unwrap();
    assert!(v.is_virtual());
    assert_eq!(v.raw(), 0x8000_0007);
    assert_eq!(v.address(), 7);
    assert_eq!(v.target(), Target::Virtual(7));
    assert_eq!(Location::physical(1 << 31), None);
    assert_eq!(Location::shared(u32::MAX), None);
    assert_eq!(Location::from_raw(0x8000_0007), v);
}

#[test]
fn default_bucket_is_4_kib() {
    assert_eq!(core::mem::size_of::<Bucket>(), BUCKET_BYTES);
    assert_eq!(Bucket::<ENTRIES_4K>::CAPACITY, 141);
    // One more entry would not fit.
    assert!(core::mem::size_of::<Bucket<{ ENTRIES_4K + 1 }>>() > BUCKET_BYTES);
}

// ---------------------------------------------------------------------------------------------
// Store: unit tests.

#[test]
fn rejects_bad_memory() {
    let err = |nb: usize, list: usize, ns: usize, slots: usize| {
        let mut b: Vec<Bucket<4>> = (0..nb).map(|_| Bucket::EMPTY).collect();
        let mut l = vec![0; list];
        let mut s = vec![Segment::EMPTY; ns];
        let mut c = vec![CrcSlot::EMPTY; slots];
        FingerprintStore::new(
            StoreMemory { buckets: &mut b, bucket_list: &mut l, segments: &mut s, crc_slots: &mut c },
            Accel::NONE,
        )
        .err()
    };
    assert_eq!(err(0, 0, 1, 0), Some(StoreError::Buckets));
    assert_eq!(err(2, 1, 1, 0), Some(StoreError::BucketList));
    assert_eq!(err(2, 2, 0, 0), Some(StoreError::Segments));
    assert_eq!(err(2, 2, MAX_SEGMENTS + 1, 0), Some(StoreError::Segments));
    assert_eq!(err(2, 2, 1, 8), Some(StoreError::CrcSlots)); // capacity 8: needs > 8
    assert_eq!(err(2, 2, 1, 12), Some(StoreError::CrcSlots)); // not a power of two
    assert_eq!(err(2, 2, 1, 16), None);
    assert_eq!(err(2, 2, 1, 0), None);
    let mut b: Vec<Bucket<0>> = vec![Bucket::EMPTY];
    let (mut l, mut s) = ([0u32], [Segment::EMPTY]);
    let r = FingerprintStore::new(
        StoreMemory { buckets: &mut b, bucket_list: &mut l, segments: &mut s, crc_slots: &mut [] },
        Accel::NONE,
    );
    assert_eq!(r.err().map(|e| e == StoreError::BucketSize), Some(true));
}

#[test]
fn insert_lookup_update_remove() {
    let mut m = Mem::<4>::new(8, 3, true);
    let mut st = m.store(Accel::ALL);
    assert!(st.is_empty());
    assert_eq!(st.capacity(), 32);
    for f in 0..20u16 {
        assert_eq!(st.insert(entry(f, f as u32, 1)), InsertOutcome::Inserted);
    }
    assert_eq!(st.len(), 20);
    assert_eq!(st.insert(entry(3, 99, 1)), InsertOutcome::AlreadyPresent(Location::from_raw(3)));
    for f in 0..20u16 {
        assert_eq!(st.lookup(&pool_fp(f)), Some(Hit { location: Location::from_raw(f as u32), hotness: 1 }));
        assert!(st.may_contain_crc(pool_crc(f)));
    }
    assert_eq!(st.lookup(&pool_fp(20)), None);
    let shared = Location::shared(5).unwrap();
    assert!(st.update_location(&pool_fp(7), shared));
    assert!(!st.update_location(&pool_fp(21), shared));
    assert_eq!(st.lookup(&pool_fp(7)).map(|h| h.location), Some(shared));
    let e = st.remove(&pool_fp(7)).unwrap();
    assert_eq!((e.fingerprint, e.location, e.crc), (pool_fp(7), shared, pool_crc(7)));
    assert_eq!(st.remove(&pool_fp(7)), None);
    assert_eq!(st.lookup(&pool_fp(7)), None);
    assert_eq!(st.len(), 19);
    // Remove everything: the pre-hash table empties with the store.
    for f in 0..20u16 {
        st.remove(&pool_fp(f));
    }
    assert!(st.is_empty());
    for c in 0..11u16 {
        assert!(!st.may_contain_crc(pool_crc(c)));
    }
    assert_eq!(st.crc_index().distinct(), 0);
    let s = st.stats();
    assert_eq!((s.inserted, s.removed), (20, 20));
}

#[test]
fn replacement_takes_the_coldest_of_the_round_robin_bucket() {
    // One segment, two buckets of 4: fill, then watch the round-robin replacement.
    let mut m = Mem::<4>::new(2, 1, true);
    let mut st = m.store(Accel::NONE);
    let hots = [5u8, 2, 9, 3, 7, 7, 1, 4];
    for (f, &h) in hots.iter().enumerate() {
        assert_eq!(st.insert(entry(f as u16 + 100, f as u32, h)), InsertOutcome::Inserted);
    }
    assert_eq!(st.buckets_in_use(), 2);
    // Bucket 0 holds entries 100..104 (hot 5,2,9,3): its coldest is 101 (hot 2).
    match st.insert(entry(200, 50, 2)) {
        InsertOutcome::Replaced(e) => assert_eq!(e.fingerprint, pool_fp(101)),
        o => panic!("{o:?}"),
    }
    // Bucket 1 (hot 7,7,1,4): its coldest has 1; a new entry of hot 0 is colder: declined.
    assert_eq!(st.insert(entry(201, 51, 0)), InsertOutcome::TooCold);
    // Bucket 0 again (5,9,3 and the newcomer's 2): hot 2 ties the coldest and replaces it.
    match st.insert(entry(202, 52, 2)) {
        InsertOutcome::Replaced(e) => assert_eq!(e.fingerprint, pool_fp(200)),
        o => panic!("{o:?}"),
    }
    // A removal frees a slot, which the round-robin choice fills when its bucket comes up.
    st.remove(&pool_fp(106));
    assert_eq!(st.insert(entry(203, 53, 1)), InsertOutcome::Inserted);
    assert_eq!(st.len(), 8);
    let s = st.stats();
    assert_eq!((s.replaced, s.declined), (2, 1));
}

#[test]
fn segment_without_bucket_declines_once_the_pool_is_gone() {
    // Two segments, one bucket: the first fingerprint's segment takes it.
    let mut m = Mem::<4>::new(1, 2, false);
    let mut st = m.store(Accel::NONE);
    let f0 = (0..100u16).find(|&f| st.segment_of(&pool_fp(f)) == 0).unwrap();
    let f1 = (0..100u16).find(|&f| st.segment_of(&pool_fp(f)) == 1).unwrap();
    assert_eq!(st.insert(entry(f0, 0, 1)), InsertOutcome::Inserted);
    assert_eq!(st.insert(entry(f1, 1, 1)), InsertOutcome::NoBucket);
    assert!(!st.prehash_enabled());
    assert!(st.may_contain_crc(12345), "without a table every CRC may be resident");
}

#[test]
fn reference_counts_saturate_at_8_bits() {
    let mut m = Mem::<4>::new(2, 1, true);
    let mut st = m.store(Accel::ALL);
    st.insert(entry(1, 1, 1));
    for i in 0..300u32 {
        let h = st.add_ref(&pool_fp(1)).unwrap();
        assert_eq!(h as u32, (i + 2).min(255));
    }
    // Saturated: no longer counts down.
    assert_eq!(st.drop_ref(&pool_fp(1)), Some(255));
    assert_eq!(st.lookup(&pool_fp(1)).unwrap().hotness, 255);
    assert!(st.set_hotness(&pool_fp(1), 2));
    assert_eq!(st.drop_ref(&pool_fp(1)), Some(1));
    assert_eq!(st.drop_ref(&pool_fp(1)), Some(0));
    assert_eq!(st.drop_ref(&pool_fp(1)), Some(0));
    assert_eq!(st.lookup(&pool_fp(1)).unwrap().hotness, 0, "still resident at 0");
    assert_eq!(st.add_ref(&pool_fp(2)), None);
    assert_eq!(st.drop_ref(&pool_fp(2)), None);
    assert!(!st.set_hotness(&pool_fp(2), 1));
    // An entry inserted at 255 stays at 255 too.
    st.insert(entry(3, 3, 255));
    assert_eq!(st.add_ref(&pool_fp(3)), Some(255));
    assert_eq!(st.drop_ref(&pool_fp(3)), Some(255));
}

/// Fills one segment of `nb` buckets of 8 with `n` entries whose hotness is high for every
/// tenth.
fn filled(m: &mut Mem<8>, n: u16) -> FingerprintStore<'_, 8> {
    let mut st = m.store(Accel::NONE);
    for f in 0..n {
        let hot = if f.is_multiple_of(10) { 200 } else { 1 };
        assert!(st.insert(entry(f, f as u32, hot)).stored());
    }
    st
}

#[test]
fn bucket_search_needs_and_uses_the_sorted_layout() {
    let mut m = Mem::<8>::new(32, 1, true);
    let mut st = filled(&mut m, 250);
    assert!(!st.segment_info(0).unwrap().sorted, "random inserts leave it unsorted");
    let lookups = |st: &mut FingerprintStore<'_, 8>, accel: Accel| {
        st.set_accel(accel);
        st.reset_stats();
        for f in 0..500u16 {
            assert_eq!(st.lookup(&pool_fp(f)).is_some(), f < 250);
        }
        st.stats().comparisons
    };
    let base = lookups(&mut st, Accel::NONE);
    let rc = lookups(&mut st, Accel { range_check: true, bucket_search: false });
    let bs = lookups(&mut st, Accel::ALL);
    assert_eq!(bs, rc, "bucket search on an unsorted segment falls back to the scan");
    st.reorganize(Layout::Sorted);
    let info = st.segment_info(0).unwrap();
    assert!(info.sorted && info.entries == 250 && info.buckets == 32);
    let sorted_base = lookups(&mut st, Accel::NONE);
    let sorted_rc = lookups(&mut st, Accel { range_check: true, bucket_search: false });
    let sorted_bs = lookups(&mut st, Accel { range_check: false, bucket_search: true });
    let sorted_all = lookups(&mut st, Accel::ALL);
    assert!(base > 0 && rc > 0);
    assert!(sorted_rc < sorted_base, "{sorted_rc} vs {sorted_base}");
    assert!(sorted_bs < sorted_rc && sorted_all <= sorted_bs + 500, "{sorted_bs} {sorted_rc} {sorted_all}");
    // The layout: compacted (250 entries fill 31 buckets of 8 and 2 slots of the 32nd) and sorted
    // across.
    let mut prev: Option<Fingerprint> = None;
    for p in 0..32 {
        let es: Vec<Entry> = st.bucket_entries(0, p).unwrap().collect();
        assert_eq!(es.len(), if p < 31 { 8 } else { 2 });
        for e in es {
            assert!(prev.is_none_or(|q| q < e.fingerprint));
            prev = Some(e.fingerprint);
        }
    }
    // A removal keeps it sorted; an out-of-order insert ends it.
    st.remove(&pool_fp(17));
    assert!(st.segment_info(0).unwrap().sorted);
    // Inserts go to the last bucket (it has room): a fingerprint above all others keeps the
    // order, one below all others does not.
    let largest = prev.unwrap();
    let smallest = st.bucket_entries(0, 0).unwrap().next().unwrap().fingerprint;
    let big = (250..1000u16).find(|&f| pool_fp(f) > largest).unwrap();
    let small = (250..1000u16).find(|&f| pool_fp(f) < smallest).unwrap();
    assert_eq!(st.insert(entry(big, 0, 1)), InsertOutcome::Inserted);
    assert!(st.segment_info(0).unwrap().sorted);
    assert_eq!(st.insert(entry(small, 0, 1)), InsertOutcome::Inserted);
    assert!(!st.segment_info(0).unwrap().sorted);
    assert!(st.lookup(&pool_fp(big)).is_some() && st.lookup(&pool_fp(small)).is_some());
}

#[test]
fn hotness_layout_puts_hot_entries_first() {
    let mut m = Mem::<8>::new(32, 1, true);
    let mut st = filled(&mut m, 250);
    st.reorganize(Layout::Hotness);
    assert!(!st.segment_info(0).unwrap().sorted);
    // The 25 hot entries fill buckets 0..3 and the first slot of bucket 3.
    for p in 0..3 {
        assert!(st.bucket_entries(0, p).unwrap().all(|e| e.hotness == 200));
    }
    let b3: Vec<u8> = st.bucket_entries(0, 3).unwrap().map(|e| e.hotness).collect();
    assert_eq!(b3.iter().filter(|&&h| h == 200).count(), 1);
    for p in 0..32 {
        let es: Vec<Entry> = st.bucket_entries(0, p).unwrap().collect();
        assert!(es.windows(2).all(|w| w[0].fingerprint < w[1].fingerprint), "each bucket sorted");
    }
    // Hot hits stop within the first four buckets.
    st.reset_stats();
    for f in (0..250u16).step_by(10) {
        assert!(st.lookup(&pool_fp(f)).is_some());
    }
    assert!(st.stats().buckets_searched <= 25 * 4);
    for f in 0..250u16 {
        assert_eq!(st.lookup(&pool_fp(f)).unwrap().location, Location::from_raw(f as u32));
    }
}

#[test]
fn default_buckets_against_the_model() {
    // One long deterministic run at the real bucket size: 3 segments, 24 buckets of 141.
    let mut m = Mem::<ENTRIES_4K>::new(24, 3, true);
    let mut stores = [m.store(Accel::ALL)];
    let mut model = Model::new(ENTRIES_4K, 24, 3);
    let mut x = 0x1234_5678_9ABC_DEF0u64;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for step in 0..30_000u32 {
        let r = next();
        let f = (r >> 8) as u16 % 6000;
        let op = match r % 100 {
            0..=59 => Op::Insert { f, loc: step, hot: (r >> 40) as u8 % 4 },
            60..=74 => Op::Lookup(f),
            75..=84 => Op::Remove(f),
            85..=92 => Op::AddRef(f),
            93..=96 => Op::DropRef(f),
            97 => Op::Update(f, step),
            _ => Op::Reorg((r >> 50) as u8 % 4, r & (1 << 60) != 0),
        };
        apply(&mut model, &mut stores, &op);
        if step % 1000 == 0 {
            check_structure(&model, &stores[0]);
        }
    }
    check_structure(&model, &stores[0]);
    assert!(stores[0].stats().replaced > 0 && stores[0].stats().declined > 0);
}

// ---------------------------------------------------------------------------------------------
// The model.

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct ME {
    fp: Fingerprint,
    crc: u32,
    loc: u32,
    hot: u8,
}

impl ME {
    fn entry(&self) -> Entry {
        Entry {
            fingerprint: self.fp,
            crc: self.crc,
            location: Location::from_raw(self.loc),
            hotness: self.hot,
        }
    }
}

struct MSeg {
    buckets: Vec<Vec<ME>>,
    rr: usize,
}

struct Model {
    k: usize,
    pool: usize,
    used: usize,
    segs: Vec<MSeg>,
}

impl Model {
    fn new(k: usize, pool: usize, n: usize) -> Model {
        Model { k, pool, used: 0, segs: (0..n).map(|_| MSeg { buckets: Vec::new(), rr: 0 }).collect() }
    }

    fn seg(&self, fp: &Fingerprint) -> usize {
        naive_mod(fp, self.segs.len())
    }

    fn len(&self) -> usize {
        self.segs.iter().flat_map(|s| &s.buckets).map(|b| b.len()).sum()
    }

    fn find(&self, fp: &Fingerprint) -> Option<(usize, usize, usize)> {
        for (s, g) in self.segs.iter().enumerate() {
            for (p, b) in g.buckets.iter().enumerate() {
                for (i, e) in b.iter().enumerate() {
                    if e.fp == *fp {
                        return Some((s, p, i));
                    }
                }
            }
        }
        None
    }

    fn get(&mut self, fp: &Fingerprint) -> Option<&mut ME> {
        let (s, p, i) = self.find(fp)?;
        Some(&mut self.segs[s].buckets[p][i])
    }

    fn crc_count(&self, crc: u32) -> u32 {
        self.segs.iter().flat_map(|s| &s.buckets).flatten().filter(|e| e.crc == crc).count() as u32
    }

    fn insert(&mut self, e: ME) -> InsertOutcome {
        if let Some((s, p, i)) = self.find(&e.fp) {
            return InsertOutcome::AlreadyPresent(Location::from_raw(self.segs[s].buckets[p][i].loc));
        }
        let s = self.seg(&e.fp);
        let k = self.k;
        let pool_left = self.used < self.pool;
        let g = &mut self.segs[s];
        let mut out = InsertOutcome::Inserted;
        let p = if g.buckets.last().is_some_and(|b| b.len() < k) {
            g.buckets.len() - 1
        } else if pool_left {
            g.buckets.push(Vec::new());
            self.used += 1;
            g.buckets.len() - 1
        } else {
            if g.buckets.is_empty() {
                return InsertOutcome::NoBucket;
            }
            let p = g.rr;
            g.rr = (g.rr + 1) % g.buckets.len();
            let b = &mut g.buckets[p];
            if b.len() == k {
                let min = b.iter().map(|x| x.hot).min().unwrap();
                if e.hot < min {
                    return InsertOutcome::TooCold;
                }
                let victim =
                    b.iter().enumerate().filter(|(_, x)| x.hot == min).min_by_key(|(_, x)| x.fp).unwrap().0;
                out = InsertOutcome::Replaced(b.remove(victim).entry());
            }
            p
        };
        let b = &mut g.buckets[p];
        b.push(e);
        b.sort_by_key(|x| x.fp);
        out
    }

    fn remove(&mut self, fp: &Fingerprint) -> Option<Entry> {
        let (s, p, i) = self.find(fp)?;
        Some(self.segs[s].buckets[p].remove(i).entry())
    }

    fn reorganize(&mut self, s: usize, layout: Layout) {
        let k = self.k;
        let g = &mut self.segs[s];
        let mut all: Vec<ME> = g.buckets.iter().flatten().copied().collect();
        match layout {
            Layout::Sorted => all.sort_by_key(|e| e.fp),
            Layout::Hotness => all.sort_by_key(|e| (core::cmp::Reverse(e.hot), e.fp)),
        }
        let n = g.buckets.len();
        let mut chunks = all.chunks(k);
        for b in g.buckets.iter_mut().take(n) {
            *b = chunks.next().map(|c| c.to_vec()).unwrap_or_default();
            b.sort_by_key(|e| e.fp);
        }
    }
}

#[derive(Clone, Debug)]
enum Op {
    Insert {
        f: u16,
        loc: u32,
        hot: u8,
    },
    Lookup(u16),
    Remove(u16),
    Update(u16, u32),
    AddRef(u16),
    DropRef(u16),
    SetHot(u16, u8),
    /// Reorganise segment (`u8` modulo N, or all segments if >= N) sorted (`true`) or by
    /// hotness.
    Reorg(u8, bool),
}

/// Applies `op` to the model and every store, comparing every answer.
fn apply<const K: usize>(model: &mut Model, stores: &mut [FingerprintStore<'_, K>], op: &Op) {
    match *op {
        Op::Insert { f, loc, hot } => {
            let e = ME { fp: pool_fp(f), crc: pool_crc(f), loc, hot };
            let want = model.insert(e);
            for st in stores.iter_mut() {
                assert_eq!(st.insert(e.entry()), want, "{op:?}");
            }
        }
        Op::Lookup(f) => {
            let fp = pool_fp(f);
            let want = model.find(&fp).map(|(s, p, i)| {
                let e = &model.segs[s].buckets[p][i];
                Hit { location: Location::from_raw(e.loc), hotness: e.hot }
            });
            for st in stores.iter_mut() {
                assert_eq!(st.lookup(&fp), want, "{op:?} accel {:?}", st.accel());
            }
        }
        Op::Remove(f) => {
            let want = model.remove(&pool_fp(f));
            for st in stores.iter_mut() {
                assert_eq!(st.remove(&pool_fp(f)), want, "{op:?}");
            }
        }
        Op::Update(f, loc) => {
            let want = model.get(&pool_fp(f)).map(|e| e.loc = loc).is_some();
            for st in stores.iter_mut() {
                assert_eq!(st.update_location(&pool_fp(f), Location::from_raw(loc)), want, "{op:?}");
            }
        }
        Op::AddRef(f) => {
            let want = model.get(&pool_fp(f)).map(|e| {
                e.hot = e.hot.saturating_add(1);
                e.hot
            });
            for st in stores.iter_mut() {
                assert_eq!(st.add_ref(&pool_fp(f)), want, "{op:?}");
            }
        }
        Op::DropRef(f) => {
            let want = model.get(&pool_fp(f)).map(|e| {
                if e.hot != 255 {
                    e.hot = e.hot.saturating_sub(1);
                }
                e.hot
            });
            for st in stores.iter_mut() {
                assert_eq!(st.drop_ref(&pool_fp(f)), want, "{op:?}");
            }
        }
        Op::SetHot(f, h) => {
            let want = model.get(&pool_fp(f)).map(|e| e.hot = h).is_some();
            for st in stores.iter_mut() {
                assert_eq!(st.set_hotness(&pool_fp(f), h), want, "{op:?}");
            }
        }
        Op::Reorg(s, sorted) => {
            let layout = if sorted { Layout::Sorted } else { Layout::Hotness };
            let n = model.segs.len();
            let which: Vec<usize> = if (s as usize) < n { vec![s as usize] } else { (0..n).collect() };
            for &s in &which {
                model.reorganize(s, layout);
            }
            for st in stores.iter_mut() {
                if which.len() == 1 {
                    assert!(st.reorganize_segment(which[0], layout));
                } else {
                    st.reorganize(layout);
                }
            }
        }
    }
}

/// The store holds exactly the model's buckets, in the model's order; the pre-hash counts match;
/// the sorted-across state, where claimed, holds.
fn check_structure<const K: usize>(model: &Model, st: &FingerprintStore<'_, K>) {
    assert_eq!(st.len(), model.len());
    for (s, g) in model.segs.iter().enumerate() {
        let info = st.segment_info(s).unwrap();
        assert_eq!(info.buckets, g.buckets.len(), "segment {s}");
        assert_eq!(info.entries, g.buckets.iter().map(|b| b.len()).sum::<usize>());
        for (p, b) in g.buckets.iter().enumerate() {
            let got: Vec<Entry> = st.bucket_entries(s, p).unwrap().collect();
            let want: Vec<Entry> = b.iter().map(|e| e.entry()).collect();
            assert_eq!(got, want, "segment {s} bucket {p}");
        }
        if info.sorted {
            let mut seen_empty = false;
            let mut prev: Option<Fingerprint> = None;
            for b in &g.buckets {
                if b.is_empty() {
                    seen_empty = true;
                    continue;
                }
                assert!(!seen_empty, "segment {s} claims sorted with a gap");
                for e in b {
                    assert!(prev.is_none_or(|q| q < e.fp), "segment {s} claims sorted");
                    prev = Some(e.fp);
                }
            }
        }
    }
    assert_eq!(st.buckets_in_use(), model.used);
    for c in 0..11u16 {
        let crc = pool_crc(c);
        assert_eq!(st.crc_index().count(crc), model.crc_count(crc), "crc {crc:#x}");
        assert_eq!(st.may_contain_crc(crc), model.crc_count(crc) > 0);
    }
    assert!(!st.may_contain_crc(0xDEAD_BEEF));
}

fn op_strategy(pool: u16) -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => (0..pool, any::<u32>(), 0u8..4).prop_map(|(f, loc, hot)| Op::Insert { f, loc, hot }),
        4 => (0..pool).prop_map(Op::Lookup),
        3 => (0..pool).prop_map(Op::Remove),
        1 => (0..pool, any::<u32>()).prop_map(|(f, l)| Op::Update(f, l)),
        2 => (0..pool).prop_map(Op::AddRef),
        1 => (0..pool).prop_map(Op::DropRef),
        1 => (0..pool, prop_oneof![Just(0u8), Just(1), Just(3), Just(254), Just(255)])
            .prop_map(|(f, h)| Op::SetHot(f, h)),
        1 => (0u8..8, any::<bool>()).prop_map(|(s, b)| Op::Reorg(s, b)),
    ]
}

/// Runs `ops` on the model and on four stores (every search-strategy combination) over the same
/// geometry, checking every answer and, after each step, the structure of every store.
fn run_against_model<const K: usize>(nb: usize, ns: usize, pool: u16, ops: &[Op]) {
    let mut mems: Vec<Mem<K>> = (0..4).map(|_| Mem::new(nb, ns, true)).collect();
    let accels = [
        Accel::NONE,
        Accel { range_check: true, bucket_search: false },
        Accel { range_check: false, bucket_search: true },
        Accel::ALL,
    ];
    let mut stores: Vec<FingerprintStore<'_, K>> =
        mems.iter_mut().zip(accels).map(|(m, a)| m.store(a)).collect();
    let mut model = Model::new(K, nb, ns);
    for op in ops {
        apply(&mut model, &mut stores, op);
        for st in &stores {
            check_structure(&model, st);
        }
    }
    // Every fingerprint of the pool, every strategy, the same answer as the model.
    for f in 0..pool {
        apply(&mut model, &mut stores, &Op::Lookup(f));
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// Small buckets (3 entries), 1..=10 buckets, 1..=4 segments: the store is the model, under
    /// every combination of the search strategies.
    #[test]
    fn store_matches_model_k3(
        nb in 1usize..=10,
        ns in 1usize..=4,
        ops in proptest::collection::vec(op_strategy(48), 1..250),
    ) {
        run_against_model::<3>(nb, ns, 48, &ops);
    }

    /// Single-entry buckets (every insert links or replaces a whole bucket).
    #[test]
    fn store_matches_model_k1(
        nb in 1usize..=6,
        ns in 1usize..=3,
        ops in proptest::collection::vec(op_strategy(16), 1..150),
    ) {
        run_against_model::<1>(nb, ns, 16, &ops);
    }

    /// Larger buckets and pool, fewer segments: longer bucket lists per segment.
    #[test]
    fn store_matches_model_k8(
        nb in 4usize..=24,
        ns in 1usize..=3,
        ops in proptest::collection::vec(op_strategy(200), 50..400),
    ) {
        run_against_model::<8>(nb, ns, 200, &ops);
    }

    /// Reorganising never changes what a lookup finds: the same state in three layouts answers
    /// every fingerprint identically, under every search strategy.
    #[test]
    fn reorganisation_preserves_answers(
        ops in proptest::collection::vec(op_strategy(120), 1..300),
    ) {
        let mut base = Mem::<4>::new(12, 2, true);
        let mut hot = Mem::<4>::new(12, 2, true);
        let mut sorted = Mem::<4>::new(12, 2, true);
        let mut stores = [base.store(Accel::NONE), hot.store(Accel::NONE), sorted.store(Accel::NONE)];
        let mut model = Model::new(4, 12, 2);
        // Same operations (no reorganisations), then two of the three reorganise.
        for op in ops.iter().filter(|o| !matches!(o, Op::Reorg(..))) {
            apply(&mut model, &mut stores, op);
        }
        stores[1].reorganize(Layout::Hotness);
        stores[2].reorganize(Layout::Sorted);
        for accel in [Accel::NONE, Accel::ALL, Accel { range_check: true, bucket_search: false }] {
            for st in stores.iter_mut() {
                st.set_accel(accel);
            }
            for f in 0..120u16 {
                let want = stores[0].lookup(&pool_fp(f));
                prop_assert_eq!(stores[1].lookup(&pool_fp(f)), want);
                prop_assert_eq!(stores[2].lookup(&pool_fp(f)), want);
            }
        }
        for st in &stores {
            prop_assert_eq!(st.len(), model.len());
            for c in 0..11u16 {
                prop_assert_eq!(st.crc_index().count(pool_crc(c)), model.crc_count(pool_crc(c)));
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The pre-hash index on its own.

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// The counting table against a map, with keys crowded into a small table (long clusters,
    /// wrap-around, backward-shift deletion).
    #[test]
    fn crc_index_matches_a_map(
        ops in proptest::collection::vec((any::<bool>(), prop_oneof![0u32..40, any::<u32>()]), 1..400),
    ) {
        let mut slots = vec![CrcSlot::EMPTY; 64];
        let mut idx = CrcIndex::new(&mut slots).unwrap();
        let mut map: BTreeMap<u32, u32> = BTreeMap::new();
        for (add, crc) in ops {
            // 40 recurring keys (0 among them) and random ones, in 64 slots: the table runs full.
            let crc = if crc < 40 { crc * 64 } else { crc };
            if add {
                let nonzero = map.keys().filter(|&&k| k != 0).count();
                let ok = idx.add(crc);
                prop_assert_eq!(ok, crc == 0 || map.contains_key(&crc) || nonzero + 1 < 64);
                if ok {
                    *map.entry(crc).or_default() += 1;
                }
            } else {
                let had = map.get(&crc).copied().unwrap_or(0);
                prop_assert_eq!(idx.remove(crc), had > 0);
                if had > 1 {
                    map.insert(crc, had - 1);
                } else {
                    map.remove(&crc);
                }
            }
            for (&k, &v) in &map {
                prop_assert_eq!(idx.count(k), v);
                prop_assert!(idx.contains(k));
            }
            for probe in (0..40u32).map(|c| c * 64).chain([1, 0xFFFF_FFFF]) {
                prop_assert_eq!(idx.contains(probe), map.contains_key(&probe));
            }
            prop_assert_eq!(idx.distinct(), map.keys().filter(|&&k| k != 0).count());
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The Fingerprinter and the pre-hash over page contents.

/// A pool of 4 KiB pages: half random, half built as `m || crc32(m)` (little-endian), all of
/// which share one CRC-32 with different contents, so the pre-hash hits without a duplicate.
fn page_pool(n: usize) -> Vec<Vec<u8>> {
    (0..n)
        .map(|i| {
            if i.is_multiple_of(2) {
                splitmix_bytes(1000 + i as u64, 4096)
            } else {
                let mut p = splitmix_bytes(5000 + i as u64, 4092);
                let c = crc32_page(&p);
                p.extend_from_slice(&c.to_le_bytes());
                p
            }
        })
        .collect()
}

#[test]
fn colliding_pages_share_a_crc() {
    let pool = page_pool(8);
    let c = crc32_page(&pool[1]);
    assert!((3..8).step_by(2).all(|i| crc32_page(&pool[i]) == c));
    assert_ne!(sha1_page(&pool[1]), sha1_page(&pool[3]));
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    /// Writes and frees pages of a 24-page content pool through a Fingerprinter with the
    /// pre-hash, into a store small enough to replace entries, and checks that a CRC miss never
    /// hides resident content: after every step, probing each content answers `Duplicate`
    /// exactly for the resident ones (and `CrcMiss` only for contents whose CRC no resident
    /// entry has). A second Fingerprinter without the pre-hash gives the same verdicts.
    #[test]
    fn prehash_never_misses_a_duplicate(
        ops in proptest::collection::vec((any::<bool>(), 0usize..24), 1..80),
    ) {
        let pool = page_pool(24);
        let fps: Vec<Fingerprint> = pool.iter().map(|p| sha1_page(p)).collect();
        let mut m = Mem::<2>::new(4, 2, true);
        let mut st = m.store(Accel::ALL);
        let mut with = Fingerprinter::new(true);
        let mut without = Fingerprinter::new(false);
        let mut extra_sha1s = 0u64;
        for (step, (write, c)) in ops.into_iter().enumerate() {
            if write {
                match with.probe(&mut st, &pool[c]) {
                    Probe::Duplicate { fingerprint, .. } => {
                        prop_assert_eq!(fingerprint, fps[c]);
                        st.add_ref(&fingerprint);
                    }
                    Probe::CrcMiss { crc } => {
                        prop_assert_eq!(crc, crc32_page(&pool[c]));
                        // Fingerprinted after the write, then inserted.
                        let fingerprint = with.fingerprint(&pool[c]);
                        extra_sha1s += 1;
                        let location = Location::from_raw(step as u32);
                        let e = Entry { fingerprint, crc, location, hotness: 1 };
                        st.insert(e);
                    }
                    u @ Probe::Unique { .. } => {
                        if let Some(e) = u.entry_at(Location::from_raw(step as u32)) {
                            st.insert(e);
                        }
                    }
                }
            } else {
                st.remove(&fps[c]);
            }
            for (i, page) in pool.iter().enumerate() {
                let resident = st.lookup(&fps[i]).is_some();
                let p = with.probe(&mut st, page);
                let q = without.probe(&mut st, page);
                prop_assert_eq!(p.is_duplicate(), resident, "content {}", i);
                prop_assert_eq!(q.is_duplicate(), resident);
                if let Probe::CrcMiss { crc } = p {
                    let mut any = false;
                    st.for_each_entry(|e| any |= e.crc == crc);
                    prop_assert!(!any, "CRC miss with an entry of that CRC resident");
                }
            }
        }
        // A probe computes a SHA-1 exactly when it does not stop at the pre-hash.
        let s = with.stats();
        prop_assert_eq!(s.sha1s, s.probes - s.crc_misses + extra_sha1s);
        prop_assert_eq!(without.stats().crc_misses, 0);
        prop_assert_eq!(without.stats().sha1s, without.stats().probes);
    }
}

#[test]
fn fingerprinter_skips_sha1_on_crc_miss() {
    let mut m = Mem::<4>::new(4, 1, true);
    let mut st = m.store(Accel::ALL);
    let mut fp = Fingerprinter::default();
    let page = splitmix_bytes(7, 4096);
    let other = splitmix_bytes(8, 4096);
    assert_eq!(fp.probe(&mut st, &page), Probe::CrcMiss { crc: crc32_page(&page) });
    assert_eq!(fp.stats().sha1s, 0);
    let e = Entry {
        fingerprint: sha1_page(&page),
        crc: crc32_page(&page),
        location: Location::physical(9).unwrap(),
        hotness: 1,
    };
    assert_eq!(st.insert(e), InsertOutcome::Inserted);
    match fp.probe(&mut st, &page) {
        Probe::Duplicate { location, hotness, fingerprint, crc } => {
            assert_eq!((location, hotness, fingerprint, crc), (e.location, 1, e.fingerprint, e.crc));
        }
        p => panic!("{p:?}"),
    }
    assert!(matches!(fp.probe(&mut st, &other), Probe::CrcMiss { .. }));
    let s = fp.stats();
    assert_eq!((s.probes, s.crcs, s.sha1s, s.crc_misses, s.duplicates), (3, 3, 1, 2, 1));
    // Without the pre-hash: SHA-1 every time, the CRC still computed for the entry.
    fp.set_prehash(false);
    fp.reset_stats();
    match fp.probe(&mut st, &other) {
        Probe::Unique { fingerprint, crc } => {
            assert_eq!((fingerprint, crc), (sha1_page(&other), crc32_page(&other)));
        }
        p => panic!("{p:?}"),
    }
    assert_eq!(fp.stats().sha1s, 1);
    // An index without a pre-hash table: no CRC computed at all.
    let mut m2 = Mem::<4>::new(4, 1, false);
    let mut st2 = m2.store(Accel::ALL);
    let mut fp2 = Fingerprinter::new(true);
    assert_eq!(fp2.probe(&mut st2, &page), Probe::Unique { fingerprint: sha1_page(&page), crc: 0 });
    assert_eq!(fp2.stats().crcs, 0);
}

// ---------------------------------------------------------------------------------------------
// Sampling.

fn page_with(first: [u8; 4], fill: u8) -> Vec<u8> {
    let mut p = vec![fill; 4096];
    p[..4].copy_from_slice(&first);
    p
}

#[test]
fn sample_value_is_the_first_four_bytes_big_endian() {
    assert_eq!(sample_value(&[0x12, 0x34, 0x56, 0x78, 0xFF]), 0x1234_5678);
    assert_eq!(sample_value(&[0xAB]), 0xAB00_0000);
    assert_eq!(sample_value(&[]), 0);
}

#[test]
fn sample_is_the_largest_first_four_bytes() {
    // The largest value wins whatever the rest of the page holds.
    let unit = [
        page_with([0, 0, 0, 9], 0xFF),
        page_with([0, 1, 0, 0], 0x00),
        page_with([0, 0, 0xFF, 0xFF], 0xEE),
        page_with([0, 0, 0, 0], 0xFF),
    ];
    assert_eq!(sample_index(&unit), Some(1));
    // Ties: the earliest.
    let tie = [page_with([5, 0, 0, 0], 1), page_with([7, 0, 0, 0], 2), page_with([7, 0, 0, 0], 3)];
    assert_eq!(sample_index(&tie), Some(1));
    // All equal (e.g. zero pages): the first.
    let zeros = [vec![0u8; 4096], vec![0u8; 4096]];
    assert_eq!(sample_index(&zeros), Some(0));
    // The maximum value at the end.
    let last = [page_with([1, 2, 3, 4], 0), page_with([0xFF; 4], 0)];
    assert_eq!(sample_index(&last), Some(1));
    assert_eq!(sample_index::<&[u8], _>([]), None);
    // The same unit shifted by one page moves the sample with it.
    let mut shifted = vec![page_with([0xFE, 0, 0, 0], 0)];
    shifted.extend(unit.iter().cloned());
    assert_eq!(sample_index(&shifted), Some(0));
    assert_eq!(sample_of_values([3, 1, 4, 1, 5, 9, 2, 6]), Some(5));
}

#[test]
fn units_split_requests() {
    let s = Sampler::default();
    assert_eq!(s.unit_pages(), 32);
    assert!(s.is_sampling());
    let u: Vec<_> = s.units(70).collect();
    assert_eq!(u, vec![0..32, 32..64, 64..70]);
    assert_eq!(s.units(0).count(), 0);
    assert_eq!(s.units(32).collect::<Vec<_>>(), vec![0..32]);
    let one = Sampler::new(1).unwrap();
    assert!(!one.is_sampling());
    assert_eq!(one.units(3).collect::<Vec<_>>(), vec![0..1, 1..2, 2..3]);
    assert_eq!(Sampler::new(0), None);
    let four = Sampler::new(4).unwrap();
    assert_eq!(four.units(9).map(|r| r.len()).collect::<Vec<_>>(), vec![4, 4, 1]);
}

#[test]
fn unit_plan_decides_the_rest() {
    let unit: Vec<Vec<u8>> =
        [[0u8, 0, 0, 3], [0, 0, 0, 8], [0, 0, 0, 1], [0, 0, 0, 8]].iter().map(|f| page_with(*f, 0)).collect();
    let mut plan = Sampler::plan(&unit);
    assert_eq!((plan.len(), plan.sample(), plan.decision()), (4, Some(1), None));
    assert_eq!(plan.rest().count(), 0, "nothing before a decision");
    assert_eq!(plan.decide(true), UnitDecision::FingerprintRest);
    assert_eq!(plan.rest().collect::<Vec<_>>(), vec![0, 2, 3]);
    assert_eq!(plan.decide(false), UnitDecision::SkipRest);
    assert_eq!(plan.rest().count(), 0);
    let empty = Sampler::plan::<&[u8], _>([]);
    assert!(empty.is_empty() && empty.sample().is_none());
    let p = Sampler::plan_values([9, 9, 10]);
    assert_eq!(p.sample(), Some(2));
}

/// The write path's use of sampling end to end: a request of 40 pages whose first unit repeats
/// stored content and whose second does not; only the duplicate unit is fingerprinted beyond its
/// sample, and a pre-hash miss of a sample counts as "not a duplicate".
#[test]
fn sampling_drives_the_write_path() {
    let stored: Vec<Vec<u8>> = (0..32).map(|i| splitmix_bytes(300 + i, 4096)).collect();
    let fresh: Vec<Vec<u8>> = (0..8).map(|i| splitmix_bytes(900 + i, 4096)).collect();
    let mut m = Mem::<ENTRIES_4K>::new(2, 1, true);
    let mut st = m.store(Accel::ALL);
    for (i, p) in stored.iter().enumerate() {
        let e = Entry {
            fingerprint: sha1_page(p),
            crc: crc32_page(p),
            location: Location::physical(i as u32).unwrap(),
            hotness: 1,
        };
        st.insert(e);
    }
    let request: Vec<&Vec<u8>> = stored.iter().chain(&fresh).collect();
    let sampler = Sampler::default();
    let mut fpr = Fingerprinter::new(true);
    let mut duplicates = 0;
    let mut hashed_rest = 0;
    for unit in sampler.units(request.len()) {
        let pages = &request[unit.clone()];
        let mut plan = Sampler::plan(pages.iter().map(|p| p.as_slice()));
        let sample = plan.sample().unwrap();
        let probe = fpr.probe(&mut st, pages[sample]);
        duplicates += usize::from(probe.is_duplicate());
        if plan.decide(probe.is_duplicate()) == UnitDecision::FingerprintRest {
            for i in plan.rest() {
                hashed_rest += 1;
                duplicates += usize::from(fpr.probe(&mut st, pages[i]).is_duplicate());
            }
        }
    }
    assert_eq!(duplicates, 32);
    assert_eq!(hashed_rest, 31);
    // Two samples plus 31 pages probed; the fresh unit's sample stopped at the pre-hash.
    let s = fpr.stats();
    assert_eq!((s.probes, s.crc_misses, s.sha1s), (33, 1, 32));
}
