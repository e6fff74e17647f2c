//! Tests of the polar WOM codec.
//!
//! * Shared reference cases (`testdata/vectors/wom_vectors.json`, `messageset_N*_K*.hex`):
//!   SplitMix64 and the permutation check, the N = 16 Bhattacharyya values and message set, the
//!   shipped tables regenerated from the `f64` recursion, the six message-set bitmaps, the 39
//!   N = 16 vectors and the N = 1024 count (964/1000) and first-success hash with the canonical
//!   plain SC; pruned SC and the list encoder with L = 1 by properties and statistics.
//! * Properties (proptest): every encoded codeword/page only programs cells (paper: sets bits;
//!   NAND: clears bits) and decodes to its message, with ECC correcting injected bit errors.
//! * Statistics with the acceptance bands of `coding-notes.md` 4 (2000 trials each), the retry
//!   (permutation + dither vs dither only), the scrambler on structured data, and the list
//!   encoder beating SC at 210 %.
//!
//! `WOM_HEAVY=1` adds the long runs (every row of the notes' tables 2.2, 2.4, 2.5 and the list
//! encoder at 210 % for L up to 32, with and without a retry), printing their figures; about
//! 10 s in `--release`.

extern crate std;

use std::boxed::Box;
use std::format;
use std::println;
use std::string::String;
use std::vec;
use std::vec::Vec;

use ftl_core::policy::{NullCodec, PageCodec};
use proptest::prelude::*;

use super::frozen::{self, reference};
use super::list::{self, MAX_LIST};
use super::page::{PagePlan, SecondWriteLayout, WomPageCodec};
use super::scramble::{self, fisher_yates_reference, SplitMix64};
use super::*;
use crate::flex_ecc::BchCodec;

const W: usize = 1024;
type Codec = WomCodec<W>;
type Scratch = WomScratch<W>;
/// List work space for up to N = 2^16 and L = 32.
const LIST_WORDS: usize = list::scratch_words(16, MAX_LIST);
type ListScratch = WomScratch<W, LIST_WORDS>;

fn heavy() -> bool {
    std::env::var("WOM_HEAVY").is_ok_and(|v| v == "1")
}

fn vector_path(name: &str) -> String {
    format!("{}/../testdata/vectors/{}", env!("CARGO_MANIFEST_DIR"), name)
}

fn vectors() -> serde_json::Value {
    let text = std::fs::read_to_string(vector_path("wom_vectors.json")).expect("wom_vectors.json");
    serde_json::from_str(&text).expect("valid JSON")
}

/// A zeroed work space on the heap (they are 64 KiB to 2.4 MiB).
fn zeroed_scratch<const WW: usize, const LW: usize>() -> Box<WomScratch<WW, LW>> {
    let mut b: Box<core::mem::MaybeUninit<WomScratch<WW, LW>>> = Box::new_uninit();
    // SAFETY: `WomScratch` is arrays of `u64`; all-zero is a valid value.
    unsafe {
        core::ptr::write_bytes(b.as_mut_ptr(), 0, 1);
        b.assume_init()
    }
}

fn scratch() -> Box<Scratch> {
    zeroed_scratch::<W, 0>()
}

fn list_scratch() -> Box<ListScratch> {
    zeroed_scratch::<W, LIST_WORDS>()
}

fn codec(n_log2: u32, k: usize, attempts: u8) -> Box<Codec> {
    Box::new(Codec::new(WomConfig::new(n_log2, k, attempts)).expect("valid config"))
}

fn hex_bytes(s: &str) -> Vec<u8> {
    (0..s.len() / 2).map(|i| u8::from_str_radix(&s[2 * i..2 * i + 2], 16).expect("hex")).collect()
}

fn words_to_bytes(w: &[u64]) -> Vec<u8> {
    w.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn bitstring(s: &str) -> u64 {
    s.bytes().enumerate().fold(0, |acc, (i, c)| acc | (u64::from(c == b'1') << i))
}

/// Minimal SHA-256 (FIPS 180-4) for the vectors' hashes.
fn sha256(data: &[u8]) -> [u8; 32] {
    const K: [u32; 64] = [
        0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
        0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
        0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
        0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
        0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
        0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
        0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
        0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
    ];
    let mut h: [u32; 8] =
        [0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19];
    let mut msg = data.to_vec();
    msg.push(0x80);
    while msg.len() % 64 != 56 {
        msg.push(0);
    }
    msg.extend_from_slice(&((data.len() as u64) * 8).to_be_bytes());
    for block in msg.chunks_exact(64) {
        let mut w = [0u32; 64];
        for i in 0..16 {
            w[i] = u32::from_be_bytes([block[4 * i], block[4 * i + 1], block[4 * i + 2], block[4 * i + 3]]);
        }
        for i in 16..64 {
            let s0 = w[i - 15].rotate_right(7) ^ w[i - 15].rotate_right(18) ^ (w[i - 15] >> 3);
            let s1 = w[i - 2].rotate_right(17) ^ w[i - 2].rotate_right(19) ^ (w[i - 2] >> 10);
            w[i] = w[i - 16].wrapping_add(s0).wrapping_add(w[i - 7]).wrapping_add(s1);
        }
        let mut v = h;
        for i in 0..64 {
            let s1 = v[4].rotate_right(6) ^ v[4].rotate_right(11) ^ v[4].rotate_right(25);
            let ch = (v[4] & v[5]) ^ (!v[4] & v[6]);
            let t1 = v[7].wrapping_add(s1).wrapping_add(ch).wrapping_add(K[i]).wrapping_add(w[i]);
            let s0 = v[0].rotate_right(2) ^ v[0].rotate_right(13) ^ v[0].rotate_right(22);
            let maj = (v[0] & v[1]) ^ (v[0] & v[2]) ^ (v[1] & v[2]);
            let t2 = s0.wrapping_add(maj);
            v = [t1.wrapping_add(t2), v[0], v[1], v[2], v[3].wrapping_add(t1), v[4], v[5], v[6]];
        }
        for (a, b) in h.iter_mut().zip(v) {
            *a = a.wrapping_add(b);
        }
    }
    let mut out = [0u8; 32];
    for (o, x) in out.chunks_exact_mut(4).zip(h) {
        o.copy_from_slice(&x.to_be_bytes());
    }
    out
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// `words` words of i.i.d. Bernoulli(`beta_permille / 1000`) bits.
fn random_state(r: &mut SplitMix64, words: usize, beta_permille: u32) -> Vec<u64> {
    if beta_permille == 500 {
        return (0..words).map(|_| r.next_u64()).collect();
    }
    let thr = (u64::from(beta_permille) << 16) / 1000;
    (0..words)
        .map(|_| {
            let mut w = 0u64;
            for chunk in 0..16 {
                let x = r.next_u64();
                for j in 0..4 {
                    if (x >> (16 * j)) & 0xFFFF < thr {
                        w |= 1 << (4 * chunk + j);
                    }
                }
            }
            w
        })
        .collect()
}

fn random_words(r: &mut SplitMix64, words: usize) -> Vec<u64> {
    (0..words).map(|_| r.next_u64()).collect()
}

/// Asserts `new` only adds programmed cells to `old` (paper convention) and returns the count.
fn assert_wom(old: &[u64], new: &[u64]) {
    for (o, n) in old.iter().zip(new) {
        assert_eq!(o & !n, 0, "a programmed cell was asked to be erased");
    }
}

fn msg_bytes(msg: &[u64], k: usize) -> Vec<u8> {
    let mut b = words_to_bytes(msg);
    b.truncate(k.div_ceil(8));
    if !k.is_multiple_of(8) {
        let last = b.len() - 1;
        b[last] &= (1u8 << (k % 8)) - 1;
    }
    b
}

// ---------------------------------------------------------------------------------------------
// Reference vectors.

#[test]
fn splitmix_and_permutation_vectors() {
    let v = vectors();
    let mut r = SplitMix64::new(0);
    for want in v["splitmix64_seed0_first3"].as_array().expect("array") {
        let want =
            u64::from_str_radix(want.as_str().expect("str").trim_start_matches("0x"), 16).expect("hex");
        assert_eq!(r.next_u64(), want);
    }
    let mut p = [0u32; 16];
    fisher_yates_reference(1, &mut p);
    let want: Vec<u32> = v["perm16_seed1"]
        .as_array()
        .expect("array")
        .iter()
        .map(|x| x.as_u64().expect("int") as u32)
        .collect();
    assert_eq!(&p[..], &want[..]);
}

#[test]
fn word_permutation_is_a_bijection_and_inverts() {
    let mut r = SplitMix64::new(7);
    for words in [1usize, 2, 16, 128, 1024] {
        let mut entries = vec![0u64; words];
        let cells = random_words(&mut r, words);
        let p = scramble::WordPermutation::generate(r.next_u64(), &mut entries);
        let mut pos = vec![0u64; words];
        p.gather(&cells, &mut pos);
        let mut back = vec![0u64; words];
        p.scatter(&pos, &mut back);
        assert_eq!(back, cells);
        let ones: u32 = cells.iter().map(|w| w.count_ones()).sum();
        assert_eq!(pos.iter().map(|w| w.count_ones()).sum::<u32>(), ones);
    }
}

#[test]
fn n16_bhattacharyya_and_message_set() {
    let v = vectors();
    let z = reference::bhattacharyya(4, 0.5);
    // (serde_json's float parsing may be off by one ulp.)
    for (a, b) in z.iter().zip(v["N16_Z"].as_array().expect("array")) {
        assert!((a - b.as_f64().expect("float")).abs() <= 1e-15, "{a} vs {b}");
    }
    let ord = reference::order(4);
    let mut set: Vec<u32> = ord[..6].to_vec();
    set.sort();
    let want: Vec<u32> = v["N16_K6_messageset_indices"]
        .as_array()
        .expect("array")
        .iter()
        .map(|x| x.as_u64().expect("int") as u32)
        .collect();
    assert_eq!(set, want);
}

#[test]
fn shipped_tables_regenerate_from_the_recursion() {
    for n_log2 in 10..=16 {
        let t = frozen::rank_table(n_log2).expect("table");
        let want = reference::table_bytes(n_log2);
        if std::env::var("WOM_REGEN").is_ok_and(|v| v == "1") {
            let path =
                format!("{}/src/wom/tables/rank_n{}.bin", env!("CARGO_MANIFEST_DIR"), 1usize << n_log2);
            std::fs::write(path, &want).expect("write table");
            continue;
        }
        assert!(t.bytes == &want[..], "table for N = 2^{n_log2} differs from the f64 recursion");
    }
}

#[test]
fn message_sets_match_the_hex_vectors() {
    let v = vectors();
    for (n, k) in [(1024, 369), (4096, 1638), (8192, 3201), (16384, 6719), (32768, 13969), (65536, 28815)] {
        let n_log2 = (n as u64).trailing_zeros();
        let file =
            std::fs::read_to_string(vector_path(&format!("messageset_N{n}_K{k}.hex"))).expect("hex file");
        let want = hex_bytes(file.trim());
        let mut bm = vec![0u64; n / 64];
        frozen::message_set(n_log2, k, &mut bm).expect("in range");
        let got = words_to_bytes(&bm);
        assert_eq!(got, want, "message set N={n} K={k}");
        assert_eq!(bm.iter().map(|w| w.count_ones() as usize).sum::<usize>(), k);
        let sha = v[format!("bitmap_sha256_N{n}_K{k}")].as_str().expect("sha");
        assert_eq!(hex(&sha256(&got)), sha);
    }
    let bm = hex_bytes(v["N1024_K369_bitmap_hex"].as_str().expect("hex"));
    let mut got = vec![0u64; 16];
    frozen::message_set(10, 369, &mut got).expect("in range");
    assert_eq!(words_to_bytes(&got), bm);
    // Nested sets; the bounds of the tables.
    let mut a = vec![0u64; 128];
    let mut b = vec![0u64; 128];
    frozen::message_set(13, 3000, &mut a).expect("in range");
    frozen::message_set(13, 3001, &mut b).expect("in range");
    assert!(a.iter().zip(&b).all(|(x, y)| x & !y == 0));
    assert_eq!(frozen::message_set(13, 2047, &mut a), Err(WomError::BadConfig));
    assert_eq!(frozen::message_set(13, 4097, &mut a), Err(WomError::BadConfig));
    assert_eq!(frozen::message_set(9, 200, &mut a), Err(WomError::BadConfig));
    assert!(frozen::message_set(16, 28815, &mut a).is_err(), "buffer too short");
}

/// The N = 16, K = 6 code of the vectors.
fn n16_codec(canonical: bool, list_size: u8) -> Box<Codec> {
    let cfg = WomConfig { n_log2: 4, k: 6, attempts: 1, list_size, canonical };
    let set = [0b1_0001_1111u64];
    Box::new(Codec::with_message_set(cfg, &set).expect("valid set"))
}

#[test]
fn n16_vectors_with_canonical_sc() {
    let v = vectors();
    let mut sc = list_scratch();
    let canonical = n16_codec(true, 1);
    let pruned = n16_codec(false, 1);
    let list1 = n16_codec(false, 1);
    let list4 = n16_codec(false, 4);
    let mut ok_count = 0;
    for case in v["N16_vectors"].as_array().expect("array") {
        let seed = case["seed"].as_u64().expect("seed");
        let mut r = SplitMix64::new(seed);
        let s = r.next_u64() & 0xFFFF;
        let g = r.next_u64() & 0xFFFF;
        let m = r.next_u64() & 0x3F;
        assert_eq!(s, bitstring(case["s"].as_str().expect("s")));
        assert_eq!(g, bitstring(case["g"].as_str().expect("g")));
        assert_eq!(m, bitstring(case["m"].as_str().expect("m")));
        let want_ok = case["ok"].as_bool().expect("ok");
        let mut st = [s];
        let ok = canonical.encode_raw(&mut st, &[g], &[m], &mut *sc).expect("encode");
        assert_eq!(ok, want_ok, "seed {seed}");
        if ok {
            ok_count += 1;
            assert_eq!(st[0], bitstring(case["s_new"].as_str().expect("s_new")), "seed {seed}");
            let mut out = [0u8; 1];
            canonical.decode_raw(&st, &[g], &mut out, &mut *sc).expect("decode");
            assert_eq!(u64::from(out[0]), m);
        }
        // Pruned SC and the list encoder: same success (N = 16: the pruned nodes are exact
        // here), valid codewords; a list never does worse.
        for (c, exact) in [(&pruned, true), (&list1, true), (&list4, false)] {
            let mut st2 = [s];
            let ok2 = c.encode_raw(&mut st2, &[g], &[m], &mut *sc).expect("encode");
            if exact {
                assert_eq!(ok2, want_ok, "seed {seed}");
            } else {
                assert!(ok2 || !want_ok);
            }
            if ok2 {
                assert_wom(&[s], &st2);
                let mut out = [0u8; 1];
                c.decode_raw(&st2, &[g], &mut out, &mut *sc).expect("decode");
                assert_eq!(u64::from(out[0]), m);
            }
        }
    }
    assert_eq!(ok_count, 35, "seeds 1..39: 35 succeed");
}

/// The N = 1024 reference run: seeds 0x5EED0000 + i, i < 1000.
fn n1024_run(c: &Codec, sc: &mut ListScratch) -> (u32, Option<(u64, Vec<u64>)>) {
    let mut count = 0;
    let mut first = None;
    for i in 0..1000u64 {
        let seed = 0x5EED_0000 + i;
        let mut r = SplitMix64::new(seed);
        let s = random_words(&mut r, 16);
        let g = random_words(&mut r, 16);
        let m = random_words(&mut r, 6);
        let mut st = s.clone();
        if c.encode_raw(&mut st, &g, &m, sc).expect("encode") {
            count += 1;
            assert_wom(&s, &st);
            let mut out = vec![0u8; 47];
            c.decode_raw(&st, &g, &mut out, sc).expect("decode");
            assert_eq!(out, msg_bytes(&m, 369), "seed {seed}");
            if first.is_none() {
                first = Some((seed, st));
            }
        }
    }
    (count, first)
}

#[test]
fn n1024_reference_count_and_first_success() {
    let v = vectors();
    let mut sc = list_scratch();
    let mut cfg = WomConfig::new(10, 369, 1);
    cfg.canonical = true;
    let canonical = Box::new(Codec::new(cfg).expect("config"));
    let (count, first) = n1024_run(&canonical, &mut sc);
    assert_eq!(count, v["N1024_K369_success_count_of_1000"].as_u64().expect("count") as u32);
    let (seed, st) = first.expect("a success");
    let fs = &v["N1024_K369_first_success"];
    assert_eq!(seed, fs["seed"].as_u64().expect("seed"));
    assert_eq!(hex(&sha256(&words_to_bytes(&st))), fs["s_new_sha256"].as_str().expect("sha"));
    assert_eq!(st[0], bitstring(fs["s_new_prefix64"].as_str().expect("prefix")));

    // The list encoder with L = 1 and SC decisions is the canonical SC exactly (same
    // codewords). (A codec with `list_size = 1` runs the pruned single-path encoder, so the list
    // code is driven directly.)
    let mut count_l1 = 0;
    for i in 0..1000u64 {
        let mut r = SplitMix64::new(0x5EED_0000 + i);
        let s = random_words(&mut r, 16);
        let g = random_words(&mut r, 16);
        let m = random_words(&mut r, 6);
        let v: Vec<u64> = g.iter().map(|x| !x).collect();
        let mut x = vec![0u64; 16];
        let mut buf = vec![0u64; list::scratch_words(10, 1)];
        let mut e = list::ListEncoder::new(canonical.message_set(), &m, 1, 10, &mut buf, 0)
            .expect("buffers")
            .with_sc_decisions();
        let ok = e.encode(10, &s, &v, &mut x).is_ok();
        let mut st = s.clone();
        let ok_c = canonical.encode_raw(&mut st, &g, &m, &mut *sc).expect("encode");
        assert_eq!(ok, ok_c, "case {i}");
        if ok {
            count_l1 += 1;
            let s_new: Vec<u64> = x.iter().zip(&g).map(|(a, b)| a ^ b).collect();
            assert_eq!(s_new, st, "case {i}");
        }
    }
    assert_eq!(count_l1, count);

    // Pruned SC: same statistics (not the same codewords).
    let pruned = codec(10, 369, 1);
    let (count_p, _) = n1024_run(&pruned, &mut sc);
    println!("N=1024 K=369: canonical {count}/1000, pruned {count_p}/1000");
    assert!((940..=985).contains(&count_p), "pruned SC {count_p}/1000");
}

// ---------------------------------------------------------------------------------------------
// Codeword properties.

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn codeword_round_trip_and_wom_constraint(
        n_log2 in 10u32..=14,
        rate_permille in 250usize..=460,
        beta in 200u32..=520,
        seed in any::<u64>(),
        list_size in prop_oneof![Just(1u8), Just(4u8)],
    ) {
        let n = 1usize << n_log2;
        let k = (n * rate_permille / 1000).clamp(n / 4, n / 2);
        let mut cfg = WomConfig::new(n_log2, k, 3);
        cfg.list_size = list_size;
        let c = Box::new(Codec::new(cfg).expect("config"));
        let mut sc = list_scratch();
        let mut r = SplitMix64::new(seed);
        let s = random_state(&mut r, n / 64, beta);
        let m = random_words(&mut r, k.div_ceil(64));
        let mut st = s.clone();
        match c.encode_codeword(seed, 3, &mut st, &m, &mut *sc) {
            Ok(a) => {
                assert_wom(&s, &st);
                let mut out = vec![0u8; k.div_ceil(8)];
                c.decode_codeword(seed, 3, a, &st, &mut out, &mut *sc).expect("decode");
                prop_assert_eq!(out, msg_bytes(&m, k));
            }
            Err(e) => {
                prop_assert_eq!(e, WomError::EncodeFailed { codeword: 3 });
                prop_assert_eq!(st, s, "state untouched on failure");
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Statistics (coding-notes.md 4: acceptance bands, 2000 trials, i.i.d. state at beta = 0.5).

/// Single-attempt successes of `trials` i.i.d. trials (random dither, identity map), checking
/// every success.
fn success_count(c: &Codec, trials: u32, beta: u32, seed: u64, sc: &mut ListScratch) -> u32 {
    let cfg = *c.config();
    let words = cfg.words();
    let mut r = SplitMix64::new(seed);
    let mut ok = 0;
    let mut out = vec![0u8; cfg.k.div_ceil(8)];
    for t in 0..trials {
        let s = random_state(&mut r, words, beta);
        let g = random_words(&mut r, words);
        let m = random_words(&mut r, cfg.k.div_ceil(64));
        let mut st = s.clone();
        if c.encode_raw(&mut st, &g, &m, sc).expect("encode") {
            ok += 1;
            if t < 200 {
                assert_wom(&s, &st);
                c.decode_raw(&st, &g, &mut out, sc).expect("decode");
                assert_eq!(out, msg_bytes(&m, cfg.k));
            }
        }
    }
    ok
}

#[test]
fn success_rates_in_the_acceptance_bands() {
    let mut sc = list_scratch();
    for (n_log2, k, lo, hi) in [(10, 369, 0.95, 0.98), (13, 3201, 0.985, 1.0), (16, 28815, 0.92, 0.98)] {
        let c = codec(n_log2, k, 1);
        let ok = success_count(&c, 2000, 500, 0xACCE_0000 + u64::from(n_log2), &mut sc);
        let p = f64::from(ok) / 2000.0;
        println!("N=2^{n_log2} K={k}: P_succ = {p:.4} (band {lo}..{hi})");
        assert!((lo..=hi).contains(&p), "N=2^{n_log2} K={k}: {p}");
    }
}

#[test]
fn success_is_monotone_in_density() {
    // coding-notes.md 2.3: a code designed for beta = 0.5 works better at lower density.
    let mut sc = list_scratch();
    let c = codec(13, 3686, 1);
    let mut p = |beta| success_count(&c, 300, beta, 0xBE7A, &mut sc);
    let (p40, p45, p50) = (p(400), p(450), p(500));
    println!("N=8192 K=3686: beta 0.40 {p40}/300, 0.45 {p45}/300, 0.50 {p50}/300");
    assert!(p40 >= 290 && p45 >= 270 && p50 <= 80 && p40 >= p45 && p45 > p50);
}

/// Retry statistics: first attempts, and among their failures the successes of a second
/// attempt with a new permutation + dither and with a new dither only.
fn retry_stats(n_log2: u32, k: usize, trials: u32, sc: &mut ListScratch) -> (u32, u32, u32, u32) {
    let c = codec(n_log2, k, 2);
    let words = c.config().words();
    let mut r = SplitMix64::new(0x2E72 + u64::from(n_log2));
    let (mut first, mut fails, mut perm_ok, mut dither_ok) = (0, 0, 0, 0);
    for t in 0..trials {
        let s = random_state(&mut r, words, 500);
        let m = random_words(&mut r, k.div_ceil(64));
        let addr = r.next_u64();
        let mut st = s.clone();
        if c.encode_attempt(addr, t, 0, &mut st, &m, sc).is_ok() {
            first += 1;
            continue;
        }
        fails += 1;
        let mut st = s.clone();
        if c.encode_attempt(addr, t, 1, &mut st, &m, sc).is_ok() {
            perm_ok += 1;
            assert_wom(&s, &st);
            let mut out = vec![0u8; k.div_ceil(8)];
            c.decode_codeword(addr, t, 1, &st, &mut out, sc).expect("decode");
            assert_eq!(out, msg_bytes(&m, k));
        }
        let g = random_words(&mut r, words);
        let mut st = s.clone();
        if c.encode_raw(&mut st, &g, &m, sc).expect("encode") {
            dither_ok += 1;
        }
    }
    (first, fails, perm_ok, dither_ok)
}

#[test]
fn retry_with_a_new_permutation_is_nearly_independent() {
    // coding-notes.md 2.5: P(2nd ok | 1st failed) = 0.81-0.93 with permutation + dither,
    // 0.33-0.48 with the dither only. N = 8192, K = 3441: P1 = 0.846.
    let mut sc = list_scratch();
    let (first, fails, perm_ok, dither_ok) = retry_stats(13, 3441, 1500, &mut sc);
    let p1 = f64::from(first) / 1500.0;
    let cp = f64::from(perm_ok) / f64::from(fails);
    let cd = f64::from(dither_ok) / f64::from(fails);
    println!("N=8192 K=3441: P1 {p1:.3}; P(2nd|fail): permutation+dither {cp:.3}, dither only {cd:.3}");
    assert!((0.80..=0.89).contains(&p1));
    assert!(cp >= 0.72, "permutation retry {cp}");
    assert!(cd <= 0.58, "dither-only retry {cd}");
    assert!(cp > cd + 0.25);
}

/// The cells (NAND image) of a codeword's worth of `pattern`, written unscrambled (with the
/// complement trick) or scrambled at `address`.
fn first_write_image(pattern: &[u8], bytes: usize, scrambled: bool, address: u64) -> Vec<u8> {
    let data: Vec<u8> = pattern.iter().copied().cycle().take(bytes).collect();
    if scrambled {
        let mut out = vec![0u8; bytes];
        let flag = scramble::scramble_first_write(address, &data, &mut out).expect("lengths");
        let zeros: usize = out.iter().map(|b| b.count_zeros() as usize).sum();
        assert!(2 * zeros <= 8 * bytes, "density at most 1/2");
        let mut back = vec![0u8; bytes];
        scramble::descramble_first_write(address, &out, flag, &mut back).expect("lengths");
        assert_eq!(back, data);
        out
    } else {
        let zeros: usize = data.iter().map(|b| b.count_zeros() as usize).sum();
        if 2 * zeros > 8 * bytes {
            data.iter().map(|b| !b).collect()
        } else {
            data
        }
    }
}

const ASCII: &[u8] =
    b"NAND flash, used in modern SSDs, is a write-once medium, where each memory cell must be \
erased prior to writing. The lifetime of an SSD is limited by the number of erasures allowed on each cell. \
Thus, minimizing erasures is a key objective in SSD design. ";

/// First-attempt successes over `trials` pages of `pattern` (N = 8192, K = 3359).
fn structured_successes(pattern: &[u8], scrambled: bool, trials: u32, sc: &mut ListScratch) -> (u32, u32) {
    let c = codec(13, 3359, 2);
    let mut r = SplitMix64::new(0x5C2A);
    let (mut ok0, mut ok01) = (0, 0);
    for t in 0..trials {
        let addr = r.next_u64();
        let img = first_write_image(pattern, 1024, scrambled, addr);
        let s: Vec<u64> =
            img.chunks_exact(8).map(|b| !u64::from_le_bytes(b.try_into().expect("8"))).collect();
        let m = random_words(&mut r, 3359usize.div_ceil(64));
        let mut st = s.clone();
        if c.encode_attempt(addr, t, 0, &mut st, &m, sc).is_ok() {
            ok0 += 1;
            ok01 += 1;
        } else if c.encode_attempt(addr, t, 1, &mut st, &m, sc).is_ok() {
            ok01 += 1;
        }
    }
    (ok0, ok01)
}

#[test]
fn scrambling_makes_structured_data_work() {
    // coding-notes.md 2.5: 0 % with the identity map on raw structured data, about 96 % once
    // the first write is scrambled (N = 8192, K = 3359).
    let mut sc = list_scratch();
    let trials = 300;
    for (name, pat) in [
        ("0x0F", &[0x0Fu8][..]),
        ("0x55", &[0x55u8][..]),
        ("00FF words", &[0, 0, 0xFF, 0xFF][..]),
        ("ASCII", ASCII),
    ] {
        let (raw0, raw01) = structured_successes(pat, false, trials, &mut sc);
        let (scr0, scr01) = structured_successes(pat, true, trials, &mut sc);
        println!(
            "{name}: unscrambled {raw0}/{trials} (with a permuted retry {raw01}), scrambled {scr0}/{trials} \
             (with a retry {scr01})"
        );
        assert!(raw0 <= 3, "{name}: unscrambled first attempt {raw0}");
        assert!(scr0 >= 270, "{name}: scrambled {scr0}");
        assert!(scr01 >= 295, "{name}: scrambled with retry {scr01}");
    }
}

// ---------------------------------------------------------------------------------------------
// List encoder.

/// Codeword successes with list size `l` over `trials` i.i.d. trials (same trials for every l).
fn list_successes(n_log2: u32, k: usize, l: u8, trials: u32, seed: u64, sc: &mut ListScratch) -> u32 {
    let mut cfg = WomConfig::new(n_log2, k, 1);
    cfg.list_size = l;
    let c = Box::new(Codec::new(cfg).expect("config"));
    success_count(&c, trials, 500, seed, sc)
}

#[test]
fn list_encoder_beats_sc_at_210_percent() {
    // 210 % of a 4 KiB page: 29491 WOM bits. At N = 2^13 that is 8 codewords of K = 3686
    // (R = 0.45), where SC succeeds 11.8 % per codeword; at N = 2^16 one codeword of
    // K = 29491, where SC succeeds 70 %.
    let mut sc = list_scratch();
    let sc1 = list_successes(13, 3686, 1, 200, 0x2101, &mut sc);
    let l8 = list_successes(13, 3686, 8, 200, 0x2101, &mut sc);
    let big = list_successes(16, 29491, 8, 60, 0x2102, &mut sc);
    println!("N=8192 K=3686: SC {sc1}/200, list 8 {l8}/200; N=65536 K=29491: list 8 {big}/60");
    assert!((10..=45).contains(&sc1));
    assert!(l8 >= 140, "list 8 {l8}/200");
    assert!(big >= 54, "list 8 at N = 2^16: {big}/60");
}

/// Codeword successes of the list encoder taking SC's decisions instead of random values in
/// Rate-1 nodes (the ablation of `list.rs`), `trials` i.i.d. trials.
fn list_sc_decision_successes(n_log2: u32, k: usize, l: usize, trials: u32, seed: u64) -> u32 {
    let words = 1usize << (n_log2 - 6);
    let mut set = vec![0u64; words];
    frozen::message_set(n_log2, k, &mut set).expect("set");
    let mut buf = vec![0u64; list::scratch_words(n_log2, l)];
    let mut r = SplitMix64::new(seed);
    let mut ok = 0;
    for _ in 0..trials {
        let s = random_state(&mut r, words, 500);
        let g = random_words(&mut r, words);
        let m = random_words(&mut r, k.div_ceil(64));
        let v: Vec<u64> = g.iter().map(|x| !x).collect();
        let mut x = vec![0u64; words];
        let mut e =
            list::ListEncoder::new(&set, &m, l, n_log2, &mut buf, 1).expect("buffers").with_sc_decisions();
        if e.encode(n_log2, &s, &v, &mut x).is_ok() {
            let s_new: Vec<u64> = x.iter().zip(&g).map(|(a, b)| a ^ b).collect();
            assert_wom(&s, &s_new);
            ok += 1;
        }
    }
    ok
}

// ---------------------------------------------------------------------------------------------
// Pages.

/// A 4 KiB page with a 1 KiB spare: region A 64 bytes, region B 896 bytes, 64 left for the FTL.
const LAYOUT: SecondWriteLayout =
    SecondWriteLayout { data_bytes: 4096, spare_bytes: 1024, raw_offset: 64, raw_len: 896 };

/// A first-written page: scrambled data (`address`), region A random, the rest erased.
fn first_page(r: &mut SplitMix64, address: u64) -> Vec<u8> {
    let data: Vec<u8> = (0..4096).map(|_| r.next_u64() as u8).collect();
    let mut page = vec![0xFFu8; LAYOUT.page_len()];
    scramble::scramble_first_write(address, &data, &mut page[..4096]).expect("lengths");
    for b in page[4096..4096 + 64].iter_mut() {
        *b = r.next_u64() as u8;
    }
    page
}

type Bch = BchCodec<8192, 2>;

fn bch_for(plan: &PagePlan) -> Box<Bch> {
    let mut b: Box<core::mem::MaybeUninit<Bch>> = Box::new_uninit();
    // SAFETY: `BchCodec` is integers and arrays of integers; all-zero is a valid value.
    let mut b = unsafe {
        core::ptr::write_bytes(b.as_mut_ptr(), 0, 1);
        b.assume_init()
    };
    b.init(13, 8, 512, plan.protected_len).expect("BCH(13, 8)");
    b
}

fn page_codec(n_log2: u32, k: usize, attempts: u8, ecc_len: usize) -> Box<WomPageCodec<W>> {
    let c = Codec::new(WomConfig::new(n_log2, k, attempts)).expect("config");
    Box::new(WomPageCodec::new(c, LAYOUT, ecc_len).expect("fits"))
}

/// A page codec with BCH(13, 8) per 512 bytes.
fn page_codec_bch(n_log2: u32, k: usize, attempts: u8) -> (Box<WomPageCodec<W>>, Box<Bch>) {
    // The ECC length depends on the protected length, which depends on the plan.
    let probe = PagePlan::new(LAYOUT, &WomConfig::new(n_log2, k, attempts), 0).expect("fits");
    let bch = bch_for(&probe);
    let pc = page_codec(n_log2, k, attempts, bch.spare_len());
    assert_eq!(pc.plan().protected_len, probe.protected_len);
    (pc, bch)
}

#[test]
fn page_plan_and_capacity() {
    // N = 2^16, K = 28815 (coding-notes 2.4: 212.1 % without ECC): P = 250 bytes per page.
    let p = PagePlan::new(LAYOUT, &WomConfig::new(16, 28815, 2), 0).expect("fits");
    assert_eq!((p.codewords, p.attempt_bits, p.overflow_bits, p.payload_bytes), (1, 1, 3953, 250));
    assert_eq!(p.protected_len, 4096 + 64 + 250);
    assert_eq!(p.overhead_basis_points(), 21_220);
    // N = 2^13 x 8, K = 3201: 221.9 %.
    let p = PagePlan::new(LAYOUT, &WomConfig::new(13, 3201, 2), 0).expect("fits");
    assert_eq!((p.codewords, p.overflow_bits, p.payload_bytes), (8, 7160, 450));
    // The paper's 210 %: 2 x (4096 + 205) bytes.
    let paper = SecondWriteLayout { data_bytes: 4096, spare_bytes: 205, raw_offset: 0, raw_len: 205 };
    let k = PagePlan::min_k(paper, 16, 1, 0).expect("fits");
    assert_eq!(k, 32_768 + 32 - 16 * 205, "3280 raw bits, less the CRC: R = 0.4505");
    assert!(PagePlan::new(paper, &WomConfig::new(16, k - 1, 1), 0).is_err());
    assert_eq!(PagePlan::capacity_bytes(paper, 16, k, 1, 0), 4096);
    assert!(PagePlan::capacity_bytes(paper, 16, 28815, 1, 0) < 4096);
    // MT29F4G08 (2 KiB + 64) with 4 spare bytes free: a code "fits" only at R = 0.499, where
    // it never succeeds (the caller checks the rate against the success tables); with none
    // free, nothing fits.
    let small = SecondWriteLayout::from_geometry(&nand_hal::Geometry::MT29F4G08, 60, 4);
    assert_eq!(small, SecondWriteLayout { data_bytes: 2048, spare_bytes: 64, raw_offset: 60, raw_len: 4 });
    assert_eq!(PagePlan::min_k(small, 13, 2, 0), Some(4089));
    let none = SecondWriteLayout { raw_len: 0, ..small };
    assert_eq!(PagePlan::min_k(none, 13, 2, 0), None);
    // Geometry errors.
    assert!(PagePlan::new(LAYOUT, &WomConfig::new(13, 4097, 2), 0).is_err());
    let bad = SecondWriteLayout { raw_len: 2000, ..LAYOUT };
    assert!(PagePlan::new(bad, &WomConfig::new(13, 3201, 2), 0).is_err());
}

#[test]
fn page_round_trip_with_bch_and_bit_errors() {
    let mut r = SplitMix64::new(0xF00D);
    let mut sc = scratch();
    for (n_log2, k) in [(16, 28815), (13, 3201), (10, 369)] {
        let (pc, mut bch) = page_codec_bch(n_log2, k, 2);
        let mut done = 0;
        for trial in 0..6u64 {
            let addr = 1000 + trial;
            let a = first_page(&mut r, addr);
            let b = first_page(&mut r, addr + 1);
            let msg: Vec<u8> = (0..4096).map(|_| r.next_u64() as u8).collect();
            let mut oa = vec![0u8; a.len()];
            let mut ob = vec![0u8; b.len()];
            match pc.encode_second_write(&mut *bch, addr, &msg, &a, &b, &mut oa, &mut ob, &mut *sc) {
                Ok(_) => {}
                Err(WomError::EncodeFailed { .. }) => continue,
                Err(e) => panic!("{e:?}"),
            }
            done += 1;
            for (o, f) in oa.iter().zip(&a).chain(ob.iter().zip(&b)) {
                assert_eq!(o & !f, 0, "a second write may only clear bits");
            }
            assert_eq!(&oa[4096..4096 + 64], &a[4096..4096 + 64], "region A untouched");
            assert!(oa[4096 + 64 + 896..].iter().all(|&x| x == 0xFF), "FTL reserve untouched");
            let mut out = vec![0u8; 4096];
            let d =
                pc.decode_second_write(&mut *bch, addr, &mut oa.clone(), &mut ob.clone(), &mut out, &mut *sc);
            assert_eq!(d.expect("decode").corrected_bits, 0);
            assert_eq!(out, msg);
            // Up to 8 flipped bits per page (at most t = 8 per BCH codeword) are corrected.
            let prot = pc.plan().protected_len;
            let (mut ea, mut eb) = (oa.clone(), ob.clone());
            for e in [&mut ea, &mut eb] {
                for _ in 0..8 {
                    let bit = (r.next_u64() % (8 * prot as u64)) as usize;
                    e[bit / 8] ^= 1 << (bit % 8);
                }
            }
            let mut out2 = vec![0u8; 4096];
            let res = pc.decode_second_write(&mut *bch, addr, &mut ea, &mut eb, &mut out2, &mut *sc);
            assert!(res.expect("corrected").corrected_bits <= 16);
            assert_eq!(out2, msg);
            // The wrong address decodes to garbage, which the CRC rejects.
            let mut out3 = vec![0u8; 4096];
            let res = pc.decode_second_write(
                &mut *bch,
                addr + 7,
                &mut oa.clone(),
                &mut ob.clone(),
                &mut out3,
                &mut *sc,
            );
            assert_eq!(res, Err(WomError::CrcMismatch));
        }
        assert!(done >= 4, "N=2^{n_log2}: only {done}/6 pages encoded");
    }
}

#[test]
fn page_errors_are_reported() {
    let mut r = SplitMix64::new(0xBAD);
    let mut sc = scratch();
    let pc = page_codec(13, 3201, 2, 0);
    let a = first_page(&mut r, 1);
    let b = first_page(&mut r, 2);
    let msg = vec![0x5Au8; 4096];
    let mut oa = vec![0u8; a.len()];
    let mut ob = vec![0u8; b.len()];
    let mut null = NullCodec;
    assert_eq!(
        pc.encode_second_write(&mut null, 1, &msg[..100], &a, &b, &mut oa, &mut ob, &mut *sc),
        Err(WomError::BadLength)
    );
    assert_eq!(
        pc.encode_second_write(&mut null, 1, &msg, &a[..10], &b, &mut oa, &mut ob, &mut *sc),
        Err(WomError::BadLength)
    );
    // A programmed raw cell where the payload needs a 1.
    let mut a2 = a.clone();
    for x in a2[4096 + 64..4096 + 64 + 450].iter_mut() {
        *x = 0;
    }
    assert_eq!(
        pc.encode_second_write(&mut null, 1, &msg, &a2, &b, &mut oa, &mut ob, &mut *sc),
        Err(WomError::SpareNotErased)
    );
    // An ECC whose length differs from the plan's.
    let mut bch = bch_for(pc.plan());
    assert_eq!(
        pc.encode_second_write(&mut *bch, 1, &msg, &a, &b, &mut oa, &mut ob, &mut *sc),
        Err(WomError::BadConfig)
    );
    // A page whose first write is too dense for the rate fails every attempt.
    let full = vec![0u8; a.len()];
    assert_eq!(
        pc.encode_second_write(&mut null, 1, &msg, &full, &b, &mut oa, &mut ob, &mut *sc),
        Err(WomError::EncodeFailed { codeword: 0 })
    );
    // Corrupt attempt field / payload.
    pc.encode_second_write(&mut null, 1, &msg, &a, &b, &mut oa, &mut ob, &mut *sc).expect("encodes");
    let mut out = vec![0u8; 4096];
    let mut ca = oa.clone();
    ca[4096 + 64 + 5] ^= 0x10;
    assert_eq!(
        pc.decode_second_write(&mut null, 1, &mut ca, &mut ob.clone(), &mut out, &mut *sc),
        Err(WomError::CrcMismatch)
    );
    // A list size the scratch has no room for.
    let mut cfg = WomConfig::new(13, 3201, 2);
    cfg.list_size = 4;
    let lc = WomPageCodec::new(Codec::new(cfg).expect("config"), LAYOUT, 0).expect("fits");
    assert_eq!(
        lc.encode_second_write(&mut null, 1, &msg, &a, &b, &mut oa, &mut ob, &mut *sc),
        Err(WomError::ScratchTooSmall)
    );
    // Configuration errors.
    assert_eq!(Codec::new(WomConfig::new(17, 100, 1)).err(), Some(WomError::BadConfig));
    assert_eq!(Codec::new(WomConfig::new(13, 3201, 0)).err(), Some(WomError::BadConfig));
    assert_eq!(WomCodec::<16>::new(WomConfig::new(13, 3201, 1)).err(), Some(WomError::BadConfig));
    let mut cfg = WomConfig::new(13, 3201, 1);
    cfg.list_size = 33;
    assert_eq!(Codec::new(cfg).err(), Some(WomError::BadConfig));
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn page_only_clears_bits_and_round_trips(
        n_log2 in prop_oneof![Just(13u32), Just(14u32), Just(16u32)],
        seed in any::<u64>(),
        msg_kind in 0u8..3,
    ) {
        let k = match n_log2 { 13 => 3201, 14 => 6719, _ => 28815 };
        let pc = page_codec(n_log2, k, 2, 0);
        let mut r = SplitMix64::new(seed);
        let mut sc = scratch();
        let addr = seed >> 8;
        let a = first_page(&mut r, addr);
        let b = first_page(&mut r, addr ^ 1);
        let msg: Vec<u8> = match msg_kind {
            0 => (0..4096).map(|_| r.next_u64() as u8).collect(),
            1 => vec![0u8; 4096],
            _ => ASCII.iter().copied().cycle().take(4096).collect(),
        };
        let mut oa = vec![0u8; a.len()];
        let mut ob = vec![0u8; b.len()];
        let mut null = NullCodec;
        match pc.encode_second_write(&mut null, addr, &msg, &a, &b, &mut oa, &mut ob, &mut *sc) {
            Ok(_) => {
                for (o, f) in oa.iter().zip(&a).chain(ob.iter().zip(&b)) {
                    prop_assert_eq!(o & !f, 0);
                }
                let mut out = vec![0u8; 4096];
                pc.decode_second_write(&mut null, addr, &mut oa, &mut ob, &mut out, &mut *sc).expect("decode");
                prop_assert_eq!(out, msg);
            }
            Err(e) => {
                let failed = matches!(e, WomError::EncodeFailed { .. });
                prop_assert!(failed, "unexpected error {:?}", e);
            }
        }
    }

    #[test]
    fn scrambler_round_trips_and_bounds_density(seed in any::<u64>(), len in 1usize..600, fill in any::<u8>()) {
        let mut r = SplitMix64::new(seed);
        let data: Vec<u8> = (0..len).map(|i| if i % 3 == 0 { fill } else { r.next_u64() as u8 }).collect();
        let mut out = vec![0u8; len];
        let flag = scramble::scramble_first_write(seed, &data, &mut out).expect("lengths");
        let zeros: usize = out.iter().map(|b| b.count_zeros() as usize).sum();
        prop_assert!(2 * zeros <= 8 * len);
        let mut back = vec![0u8; len];
        scramble::descramble_first_write(seed, &out, flag, &mut back).expect("lengths");
        prop_assert_eq!(back, data);
    }
}

// ---------------------------------------------------------------------------------------------
// Heavy runs (WOM_HEAVY=1): the notes' tables and the list encoder at 210 %.

#[test]
fn heavy_single_attempt_table() {
    if !heavy() {
        return;
    }
    // coding-notes.md 2.2 (beta = 0.5, 2000 trials).
    let rows: &[(u32, usize, f64)] = &[
        (10, 307, 0.9996),
        (10, 348, 0.9898),
        (10, 369, 0.9677),
        (10, 410, 0.7348),
        (10, 461, 0.1396),
        (12, 1556, 0.9871),
        (12, 1638, 0.9199),
        (12, 1720, 0.6886),
        (12, 1843, 0.1015),
        (13, 3113, 0.9982),
        (13, 3277, 0.9832),
        (13, 3359, 0.9430),
        (13, 3441, 0.8455),
        (13, 3686, 0.1183),
        (14, 6554, 0.9982),
        (14, 6881, 0.9447),
        (14, 7045, 0.8247),
        (14, 7373, 0.2023),
        (15, 13763, 0.9950),
        (15, 14090, 0.9520),
        (15, 14418, 0.8060),
        (15, 14746, 0.4017),
        (16, 28180, 0.9945),
        (16, 28836, 0.9480),
        (16, 29491, 0.7015),
        (16, 30147, 0.1560),
    ];
    let mut sc = list_scratch();
    println!("| N | K | R | P_succ (this codec, 2000) | notes |");
    for &(n_log2, k, want) in rows {
        let c = codec(n_log2, k, 1);
        let ok = success_count(&c, 2000, 500, 0x7AB1E + u64::from(n_log2) * 7919 + k as u64, &mut sc);
        let p = f64::from(ok) / 2000.0;
        let sigma = (want * (1.0 - want) / 2000.0).sqrt();
        println!(
            "| {} | {k} | {:.3} | {p:.4} | {want:.4} |",
            1u32 << n_log2,
            k as f64 / f64::from(1u32 << n_log2)
        );
        assert!((p - want).abs() <= 5.0 * sigma + 0.015, "N=2^{n_log2} K={k}: {p} vs {want}");
    }
}

#[test]
fn heavy_page_level_and_retry_tables() {
    if !heavy() {
        return;
    }
    let mut sc = list_scratch();
    // coding-notes.md 2.4: page success with a permutation + dither retry (2000 pages at
    // 2^13..2^15, 1000 at 2^16), through the codeword API with i.i.d. states.
    println!("| N | M | K | p_cw | p_cw(<=2) | P_page 1st | P_page <=2 | notes 1st / <=2 |");
    for &(n_log2, k, w1, w2) in &[
        (13u32, 3201usize, 0.9504, 1.0),
        (14, 6719, 0.9558, 0.9990),
        (15, 13969, 0.9448, 0.9993),
        (16, 28815, 0.9580, 0.9970),
        (13, 3686, 4e-8, 4e-6),
        (16, 29491, 0.707, 0.905),
    ] {
        let c = codec(n_log2, k, 2);
        let words = c.config().words();
        let m_cw = 65536 >> n_log2;
        let pages = if n_log2 == 16 { 1000 } else { 2000 / m_cw.max(1) * 4 };
        let mut r = SplitMix64::new(0x9A6E + u64::from(n_log2));
        let (mut cw1, mut cw2, mut p1, mut p2, mut total) = (0u32, 0u32, 0u32, 0u32, 0u32);
        for page in 0..pages {
            let addr = r.next_u64();
            let (mut all1, mut all2) = (true, true);
            for cw in 0..m_cw as u32 {
                total += 1;
                let s = random_state(&mut r, words, 500);
                let m = random_words(&mut r, k.div_ceil(64));
                let mut st = s.clone();
                match c.encode_codeword(addr, cw, &mut st, &m, &mut *sc) {
                    Ok(0) => {
                        cw1 += 1;
                        cw2 += 1;
                    }
                    Ok(_) => {
                        cw2 += 1;
                        all1 = false;
                    }
                    Err(_) => {
                        all1 = false;
                        all2 = false;
                    }
                }
            }
            let _ = page;
            p1 += u32::from(all1);
            p2 += u32::from(all2);
        }
        let f = |a: u32, b: u32| f64::from(a) / f64::from(b);
        println!(
            "| {} | {m_cw} | {k} | {:.4} | {:.4} | {:.4} | {:.4} | {w1} / {w2} |",
            1u32 << n_log2,
            f(cw1, total),
            f(cw2, total),
            f(p1, pages as u32),
            f(p2, pages as u32)
        );
    }
    // coding-notes.md 2.5 retry table.
    println!("| config | P1 | P(2nd|fail) perm+dither | dither only | notes |");
    for &(n_log2, k, trials, note) in &[
        (13u32, 3359usize, 3000u32, "0.9389 / 0.926 / 0.462"),
        (13, 3441, 3000, "0.8462 / 0.812 / 0.404"),
        (10, 369, 6000, "0.9645 / 0.925 / 0.482"),
        (16, 28836, 2000, "0.9340 / 0.924 / 0.333"),
    ] {
        let (first, fails, perm_ok, dither_ok) = retry_stats(n_log2, k, trials, &mut sc);
        println!(
            "| N={} K={k} | {:.4} | {:.3} | {:.3} | {note} |",
            1u32 << n_log2,
            f64::from(first) / f64::from(trials),
            f64::from(perm_ok) / f64::from(fails),
            f64::from(dither_ok) / f64::from(fails)
        );
    }
}

#[test]
fn heavy_list_encoder_at_210_percent() {
    if !heavy() {
        return;
    }
    let mut sc = list_scratch();
    // 210 % of a 4 KiB page: 29491 WOM bits. N = 2^16: one codeword of K = 29491; N = 2^13:
    // 8 codewords of K = 3686 or 3687 (29491 = 3 x 3686 + 5 x 3687; K = 3686 measured).
    println!("| N | K | L | codeword success | page success (1st try) | SC decisions in Rate-1 | trials |");
    for &(n_log2, k, trials) in &[(16u32, 29491usize, 1000u32), (13, 3686, 4000)] {
        for l in [1u8, 2, 4, 8, 16, 32] {
            let ok = list_successes(n_log2, k, l, trials, 0x2100 + u64::from(n_log2), &mut sc);
            let p = f64::from(ok) / f64::from(trials);
            let abl_trials = trials / 4;
            let abl =
                list_sc_decision_successes(n_log2, k, l as usize, abl_trials, 0x2200 + u64::from(n_log2));
            let m = 65536 >> n_log2;
            println!(
                "| 2^{n_log2} | {k} | {l} | {p:.4} | {:.4} | {:.3} ({abl_trials}) | {trials} |",
                p.powi(m),
                f64::from(abl) / f64::from(abl_trials)
            );
        }
    }
    // With one permuted retry (attempts = 2), through the codeword API.
    println!("| N | K | L | codeword success with <= 2 attempts | page success | trials |");
    for &(n_log2, k, l, trials) in
        &[(16u32, 29491usize, 1u8, 1000u32), (16, 29491, 4, 1000), (16, 29491, 8, 1000), (13, 3686, 32, 2000)]
    {
        let mut cfg = WomConfig::new(n_log2, k, 2);
        cfg.list_size = l;
        let c = Box::new(Codec::new(cfg).expect("config"));
        let mut r = SplitMix64::new(0x2300);
        let mut ok = 0u32;
        for t in 0..trials {
            let s = random_state(&mut r, cfg.words(), 500);
            let m = random_words(&mut r, k.div_ceil(64));
            let mut st = s.clone();
            if c.encode_codeword(r.next_u64(), t, &mut st, &m, &mut *sc).is_ok() {
                assert_wom(&s, &st);
                ok += 1;
            }
        }
        let p = f64::from(ok) / f64::from(trials);
        println!("| 2^{n_log2} | {k} | {l} | {p:.4} | {:.4} | {trials} |", p.powi(65536 >> n_log2));
    }
}
