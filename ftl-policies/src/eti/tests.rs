//! Tests of ETI against a reference model, and of MHF and MBF by properties.
//!
//! The model (`Model`) is a second, deliberately naive implementation of the rules in
//! `extent.rs`'s documentation: a `Vec` of extents scanned linearly, split with `Vec::insert`,
//! merged by rebuilding. Property tests drive both with random request streams and compare the
//! whole table and every answer after each request, and check the invariants (exact cover of the
//! address space, at most N extents, counters within their width) on the real one.

extern crate std;

use std::vec::Vec;

use ftl_core::policy::{Classifier, Temperature, WriteRequest};
use proptest::prelude::*;

use super::*;

fn hot(t: Temperature) -> bool {
    t == Temperature::Hot
}

fn req(lpn: u32, pages: u32) -> WriteRequest {
    WriteRequest { lpn, pages, page_bytes: 4096 }
}

fn cfg(space: u64) -> EtiConfig {
    EtiConfig::with_address_pages(space)
}

/// The invariants of `extent.rs`: exact ordered cover of `0..space`, 1..=N extents, counters
/// within `counter_bits`.
fn check_invariants<const N: usize>(e: &Eti<N>) {
    let xs: Vec<Extent> = e.extents().collect();
    assert!(!xs.is_empty() && xs.len() <= N, "{} extents", xs.len());
    assert_eq!(xs.len(), e.extent_count());
    assert_eq!(xs[0].start, 0);
    for w in xs.windows(2) {
        assert_eq!(w[0].end, w[1].start as u64, "gap or overlap");
    }
    for x in &xs {
        assert!((x.start as u64) < x.end, "empty extent {x:?}");
        assert!(x.counter <= e.config().counter_max());
    }
    assert_eq!(xs[xs.len() - 1].end, e.config().address_pages);
}

#[derive(Clone, Debug, PartialEq)]
struct M {
    start: u64,
    end: u64,
    c: u8,
}

/// The naive model of ETI.
struct Model {
    cap: usize,
    cfg: EtiConfig,
    xs: Vec<M>,
    since: u32,
}

impl Model {
    fn new(cap: usize, cfg: EtiConfig) -> Self {
        Model { cap, cfg, xs: std::vec![M { start: 0, end: cfg.address_pages, c: 0 }], since: 0 }
    }

    fn inc(&mut self, k: usize) {
        self.xs[k].c = (self.xs[k].c + 1).min(self.cfg.counter_max());
    }

    fn split_at(&mut self, p: u64) {
        if self.xs.len() >= self.cap || self.xs.iter().any(|x| x.start == p || x.end == p) {
            return;
        }
        let k = self.xs.iter().position(|x| x.start < p && p < x.end).unwrap();
        let right = M { start: p, end: self.xs[k].end, c: self.xs[k].c };
        self.xs[k].end = p;
        self.xs.insert(k + 1, right);
    }

    fn record(&mut self, lpn: u32, pages: u32) -> Temperature {
        let a = lpn as u64;
        if pages == 0 || a >= self.cfg.address_pages {
            return Temperature::Cold;
        }
        let e = (a + pages as u64).min(self.cfg.address_pages);
        let thr = self.cfg.hot_threshold;
        let hot = if let Some(k) = self.xs.iter().position(|x| x.start == a && x.end == e) {
            self.inc(k);
            self.xs[k].c >= thr
        } else {
            self.split_at(a);
            self.split_at(e);
            let mut hot_pages = 0;
            for k in 0..self.xs.len() {
                let (s, t) = (self.xs[k].start, self.xs[k].end);
                if t <= a || s >= e {
                    continue;
                }
                let overlap = t.min(e) - s.max(a);
                if overlap * 100 >= self.cfg.alpha_percent as u64 * (t - s) {
                    self.inc(k);
                }
                if self.xs[k].c >= thr {
                    hot_pages += overlap;
                }
            }
            2 * hot_pages > e - a
        };
        self.since += 1;
        if self.since == self.cfg.decay_period {
            self.since = 0;
            self.decay();
        }
        if hot {
            Temperature::Hot
        } else {
            Temperature::Cold
        }
    }

    fn decay(&mut self) {
        for x in &mut self.xs {
            x.c /= 2;
        }
        let beta = self.cfg.beta;
        let mut out: Vec<(M, u64)> = Vec::new(); // extent, sum of counter * pages
        for x in self.xs.drain(..) {
            let w = x.c as u64 * (x.end - x.start);
            match out.last_mut() {
                Some((m, sum)) if m.c < beta && x.c < beta => {
                    m.end = x.end;
                    *sum += w;
                }
                Some((m, _)) if m.c >= beta && x.c == m.c => m.end = x.end,
                _ => out.push((x, w)),
            }
        }
        self.xs = out
            .into_iter()
            .map(|(mut m, sum)| {
                if m.c < beta {
                    m.c = (sum / (m.end - m.start)) as u8;
                }
                m
            })
            .collect();
    }

    fn matches<const N: usize>(&self, e: &Eti<N>) -> bool {
        let got: Vec<M> =
            e.extents().map(|x| M { start: x.start as u64, end: x.end, c: x.counter }).collect();
        got == self.xs
    }
}

// ---------------------------------------------------------------------------------------------
// Crafted streams

#[test]
fn defaults_are_table_2_and_memory_is_about_10_kb() {
    let e = Eti::<2048>::default();
    assert_eq!(*e.config(), EtiConfig::PAPER);
    assert_eq!(e.extent_count(), 1);
    assert_eq!(Eti::<2048>::TABLE_BYTES, 10 * 1024);
    const { assert!(Eti::<2048>::MEMORY_BYTES >= 10 * 1024 && Eti::<2048>::MEMORY_BYTES < 10 * 1024 + 128) };
    let e: Eti = Eti::new(EtiConfig::default()).unwrap();
    assert_eq!(e.extents().next(), Some(Extent { start: 0, end: 1 << 32, counter: 0 }));
}

#[test]
fn repeatedly_written_small_range_becomes_hot() {
    let mut e = Eti::<2048>::new(cfg(1 << 20)).unwrap();
    let temps: Vec<bool> = (0..5).map(|_| hot(e.classify_request(&req(1000, 8)))).collect();
    assert_eq!(temps, [false, false, false, true, true], "hot from the 4th write (threshold 4)");
    assert_eq!(e.extent_of(1003), Extent { start: 1000, end: 1008, counter: 5 });
    assert_eq!(e.extent_count(), 3);
    assert_eq!(e.stats().exact_matches, 4);
    assert!(hot(e.temperature_of(1007)) && !hot(e.temperature_of(1008)) && !hot(e.temperature_of(999)));
    // classify_page passes the request's answer through.
    assert_eq!(e.classify_page(1000, Temperature::Hot), Temperature::Hot);
    assert_eq!(e.classify_page(1000, Temperature::Cold), Temperature::Cold);
}

#[test]
fn one_off_large_sequential_write_stays_cold() {
    let mut e = Eti::<2048>::new(cfg(1 << 20)).unwrap();
    assert!(!hot(e.classify_request(&req(0, 1 << 19))));
    // A sequential stream of 256-page requests over the rest, once.
    for k in 0..2048 {
        assert!(!hot(e.classify_request(&req((1 << 19) + k * 256, 256))));
    }
    assert!(e.extents().all(|x| x.counter <= 1));
}

#[test]
fn counters_saturate_at_4_bits() {
    let mut e = Eti::<16>::new(cfg(1000)).unwrap();
    for _ in 0..100 {
        e.record(10, 5);
    }
    assert_eq!(e.extent_of(12).counter, 15);
    let mut e = Eti::<16>::new(EtiConfig { counter_bits: 3, ..cfg(1000) }).unwrap();
    for _ in 0..100 {
        e.record(10, 5);
    }
    assert_eq!(e.extent_of(12).counter, 7);
}

#[test]
fn decay_cools_idle_ranges() {
    let mut e = Eti::<64>::new(EtiConfig { decay_period: 16, ..cfg(10_000) }).unwrap();
    for _ in 0..4 {
        e.record(100, 4); // counter 4: hot
    }
    assert!(hot(e.temperature_of(100)));
    for _ in 0..15 {
        e.record(200, 4);
    }
    assert_eq!(e.stats().decays, 1, "the 16th request ran the first decay");
    // The first decay ran after request 16 (the 12th write to 200): 4 -> 2, 12 -> 6, then 9.
    assert!(!hot(e.temperature_of(100)), "idle hot range cooled by one halving");
    assert_eq!(e.extent_of(200).counter, 9);
    for k in 0..13 {
        e.record(5000 + 10 * k, 1); // idle for 200; the 32nd request decays: 9 -> 4
    }
    assert_eq!(e.stats().decays, 2);
    assert_eq!(e.extent_of(200).counter, 4);
    assert!(hot(e.temperature_of(200)));
    for k in 0..16 {
        e.record(6000 + 10 * k, 1);
    }
    // 4 -> 2: cold, so merged with its cold neighbours; the page-weighted mean of the whole
    // space, 8 / 10_000, rounds down to 0.
    assert!(!hot(e.temperature_of(200)));
    assert_eq!(e.extent_count(), 1, "all cold: merged back into one extent");
    assert_eq!(e.extent_of(200), Extent { start: 0, end: 10_000, counter: 0 });
    check_invariants(&e);
}

#[test]
fn split_cases() {
    let space = 1000;
    // Inside one extent (B): three pieces, the middle one counted.
    let mut e = Eti::<16>::new(cfg(space)).unwrap();
    e.record(100, 50);
    let xs: Vec<Extent> = e.extents().collect();
    assert_eq!(
        xs,
        [
            Extent { start: 0, end: 100, counter: 0 },
            Extent { start: 100, end: 150, counter: 1 },
            Extent { start: 150, end: 1000, counter: 0 },
        ]
    );
    // Aligned at the start: one split at A + L only.
    e.record(100, 20);
    assert_eq!(e.extent_count(), 4);
    assert_eq!(e.extent_of(110), Extent { start: 100, end: 120, counter: 2 });
    assert_eq!(e.extent_of(130), Extent { start: 120, end: 150, counter: 1 });
    // Straddling a boundary (C): split at both ends, both pieces counted.
    e.record(140, 20);
    let xs: Vec<(u32, u64, u8)> = e.extents().map(|x| (x.start, x.end, x.counter)).collect();
    assert_eq!(xs, [(0, 100, 0), (100, 120, 2), (120, 140, 1), (140, 150, 2), (150, 160, 1), (160, 1000, 0)]);
    // Covering several extents (D): all counted, no new boundaries inside.
    assert!(!hot(e.record(100, 60)));
    let xs: Vec<(u32, u64, u8)> = e.extents().map(|x| (x.start, x.end, x.counter)).collect();
    assert_eq!(xs, [(0, 100, 0), (100, 120, 3), (120, 140, 2), (140, 150, 3), (150, 160, 2), (160, 1000, 0)]);
    // The request's temperature is its page majority: next, [100,120) and [140,150) reach 4, 30
    // hot pages of 60, a tie: cold. The write after makes every piece at least 4: hot.
    assert!(!hot(e.record(100, 60)));
    assert!(hot(e.record(100, 60)), "every piece now >= 4");
    check_invariants(&e);
}

#[test]
fn request_temperature_is_the_page_majority() {
    let mut e = Eti::<16>::new(cfg(1000)).unwrap();
    for _ in 0..4 {
        e.record(0, 30); // [0,30) hot
    }
    // [0, 50): 30 hot pages of 50: hot.
    assert!(hot(e.record(0, 50)));
    // [20, 100): [20,30) at 6, [30,50) at 2 after this write, [50,100) at 1: 10 of 80, cold.
    assert!(!hot(e.record(20, 80)));
}

#[test]
fn full_table_increments_only_extents_covered_beyond_alpha() {
    let space = 1000;
    let mut e = Eti::<4>::new(cfg(space)).unwrap();
    e.record(100, 100); // 3 extents
    e.record(500, 100); // 4th extent by splitting at 500 only (table then full)
    let xs: Vec<(u32, u64, u8)> = e.extents().map(|x| (x.start, x.end, x.counter)).collect();
    assert_eq!(xs, [(0, 100, 0), (100, 200, 1), (200, 500, 0), (500, 1000, 0)]);
    assert_eq!(e.stats().table_full, 1);
    // Partly covering [500, 1000) with alpha = 100%: nothing counted, no split.
    e.record(500, 100);
    assert_eq!(e.extent_of(500).counter, 0);
    assert_eq!(e.extent_count(), 4);
    assert_eq!(e.stats().table_full, 2);
    // Covering parts of [100, 200) and [200, 500): nothing counts.
    e.record(150, 300);
    assert_eq!(e.extent_of(150).counter, 1);
    // Covering [100, 200) whole and [200, 500) in part: only the former counts.
    e.record(100, 350);
    assert_eq!((e.extent_of(150).counter, e.extent_of(300).counter), (2, 0));

    // alpha = 50%: half of an extent is enough.
    let mut e = Eti::<2>::new(EtiConfig { alpha_percent: 50, ..cfg(space) }).unwrap();
    e.record(0, 400); // splits at 400: full
    e.record(400, 300); // 300 of 600 pages of [400, 1000): counted
    e.record(0, 199); // 199 of 400 pages of [0, 400): not counted
    let xs: Vec<(u32, u64, u8)> = e.extents().map(|x| (x.start, x.end, x.counter)).collect();
    assert_eq!(xs, [(0, 400, 1), (400, 1000, 1)]);
}

#[test]
fn decay_merges_equal_hot_and_all_cold_neighbours() {
    let mut e = Eti::<64>::new(EtiConfig { decay_period: 1000, ..cfg(1000) }).unwrap();
    for _ in 0..8 {
        e.record(0, 10);
        e.record(10, 10);
    }
    for _ in 0..10 {
        e.record(20, 10); // counter 10 -> 5 after halving: hot, differs from its neighbours
    }
    e.record(30, 10); // cold pieces with different counters
    e.record(50, 5);
    e.record(50, 5);
    e.record(60, 7);
    e.decay();
    let xs: Vec<(u32, u64, u8)> = e.extents().map(|x| (x.start, x.end, x.counter)).collect();
    // [0,10) and [10,20): 8 -> 4 each, equal and hot: merged. [20,30): 5. The rest: counters
    // 0, 1 (from 2) and 0 over [30, 1000): one cold extent with the page-weighted mean, 0.
    assert_eq!(xs, [(0, 20, 4), (20, 30, 5), (30, 1000, 0)]);
    assert_eq!(e.stats().merges, 9 - 3);
    check_invariants(&e);

    // The cold mean: [0,10) at 3 (from 7) next to [10,20) at 1 (from 2): 40 / 20 = 2.
    let mut e = Eti::<64>::new(EtiConfig { decay_period: 1000, ..cfg(20) }).unwrap();
    for _ in 0..7 {
        e.record(0, 10);
    }
    e.record(10, 10);
    e.record(10, 10);
    e.decay();
    assert_eq!(e.extents().collect::<Vec<_>>(), [Extent { start: 0, end: 20, counter: 2 }]);
}

#[test]
fn requests_past_the_end_are_clamped_or_ignored() {
    let mut e = Eti::<16>::new(cfg(100)).unwrap();
    assert!(!hot(e.record(100, 5)));
    assert!(!hot(e.record(3, 0)));
    assert_eq!(e.stats().requests, 0);
    e.record(90, 50); // becomes [90, 100)
    assert_eq!(e.extent_of(95), Extent { start: 90, end: 100, counter: 1 });
    // Whole-space default: no overflow at the top of the LPN space.
    let mut e = Eti::<16>::default();
    for _ in 0..4 {
        e.record(u32::MAX - 3, 100);
    }
    assert!(hot(e.temperature_of(u32::MAX)));
    assert_eq!(e.extent_of(u32::MAX), Extent { start: u32::MAX - 3, end: 1 << 32, counter: 4 });
    check_invariants(&e);
}

#[test]
fn single_extent_table() {
    let mut e = Eti::<1>::new(cfg(10)).unwrap();
    e.record(2, 3);
    assert_eq!(e.extent_count(), 1);
    assert_eq!(e.extent_of(0).counter, 0);
    e.record(0, 10);
    assert_eq!(e.extent_of(0).counter, 1);
}

#[test]
fn bad_configs_are_rejected() {
    let p = EtiConfig::PAPER;
    let new = |c| Eti::<8>::new(c).err();
    assert_eq!(new(EtiConfig { address_pages: 0, ..p }), Some(ConfigError::AddressPages));
    assert_eq!(new(EtiConfig { address_pages: (1 << 32) + 1, ..p }), Some(ConfigError::AddressPages));
    assert_eq!(new(EtiConfig { counter_bits: 9, ..p }), Some(ConfigError::CounterBits));
    assert_eq!(new(EtiConfig { counter_bits: 0, ..p }), Some(ConfigError::CounterBits));
    assert_eq!(new(EtiConfig { decay_period: 0, ..p }), Some(ConfigError::DecayPeriod));
    assert_eq!(new(EtiConfig { hot_threshold: 16, ..p }), Some(ConfigError::HotThreshold));
    assert_eq!(new(EtiConfig { hot_threshold: 0, ..p }), Some(ConfigError::HotThreshold));
    assert_eq!(new(EtiConfig { alpha_percent: 0, ..p }), Some(ConfigError::Alpha));
    assert_eq!(new(EtiConfig { alpha_percent: 101, ..p }), Some(ConfigError::Alpha));
    assert_eq!(new(EtiConfig { counter_bits: 8, hot_threshold: 255, ..p }), None);
}

// ---------------------------------------------------------------------------------------------
// Property tests

fn eti_config(space: u64) -> impl Strategy<Value = EtiConfig> {
    (1u8..=8, 1u32..=40, 1u8..=100, 0u8..=8).prop_flat_map(move |(bits, period, alpha, beta)| {
        let max = ((1u16 << bits) - 1) as u8;
        (1u8..=max.min(6)).prop_map(move |thr| EtiConfig {
            address_pages: space,
            counter_bits: bits,
            decay_period: period,
            hot_threshold: thr,
            alpha_percent: alpha,
            beta,
        })
    })
}

/// Requests over `0 .. space + 8`, mostly short, some repeating earlier ones (to make extents
/// match and get hot).
fn requests(space: u64) -> impl Strategy<Value = Vec<(u32, u32)>> {
    let one = (0..space as u32 + 8, prop_oneof![4 => 0u32..8, 1 => 0u32..(space as u32 + 8)]);
    proptest::collection::vec((one, any::<prop::sample::Index>(), any::<bool>()), 0..300).prop_map(|v| {
        let mut out: Vec<(u32, u32)> = Vec::new();
        for ((a, l), i, repeat) in v {
            if repeat && !out.is_empty() {
                out.push(out[i.index(out.len())]);
            } else {
                out.push((a, l));
            }
        }
        out
    })
}

fn run_against_model<const N: usize>(cfg: EtiConfig, reqs: &[(u32, u32)]) -> Result<(), TestCaseError> {
    let mut e = Eti::<N>::new(cfg).unwrap();
    let mut m = Model::new(N, cfg);
    for (i, &(a, l)) in reqs.iter().enumerate() {
        let got = e.classify_request(&req(a, l));
        let want = m.record(a, l);
        check_invariants(&e);
        prop_assert!(m.matches(&e), "request {i} ({a}, {l}): table differs from the model");
        prop_assert_eq!(got, want, "request {} ({}, {})", i, a, l);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    /// A small table (often full) against the model: splitting, the alpha rule, decay, merging.
    #[test]
    fn small_table_matches_model((cfg, reqs) in (1u64..300).prop_flat_map(|s| (eti_config(s), requests(s)))) {
        run_against_model::<6>(cfg, &reqs)?;
    }

    /// A table that rarely fills, against the model.
    #[test]
    fn large_table_matches_model((cfg, reqs) in (1u64..300).prop_flat_map(|s| (eti_config(s), requests(s)))) {
        run_against_model::<64>(cfg, &reqs)?;
    }

    /// Without decay and with room for every split, each page's counter is exactly the number of
    /// requests that wrote it, saturated at 4 bits.
    #[test]
    fn counters_are_per_page_write_counts(reqs in requests(200)) {
        let mut e = Eti::<1024>::new(EtiConfig { decay_period: u32::MAX, ..cfg(200) }).unwrap();
        let mut pages = [0u32; 200];
        for &(a, l) in &reqs {
            e.record(a, l);
            for p in (a as usize..a as usize + l as usize).filter(|&p| p < 200) {
                pages[p] += 1;
            }
        }
        check_invariants(&e);
        for (p, &n) in pages.iter().enumerate() {
            prop_assert_eq!(e.extent_of(p as u32).counter as u32, n.min(15), "page {}", p);
        }
        prop_assert_eq!(e.stats().table_full, 0);
    }

    /// The lookup is correct from any starting extent.
    #[test]
    fn lookup_is_correct_from_any_hint(reqs in requests(500), hint in 0usize..80, addr in 0u32..500) {
        let mut e = Eti::<64>::new(EtiConfig { decay_period: 7, ..cfg(500) }).unwrap();
        for &(a, l) in &reqs {
            e.record(a, l);
        }
        let want = e.extents().position(|x| x.start <= addr && (addr as u64) < x.end).unwrap();
        prop_assert_eq!(e.find_from(hint, addr), want);
    }

    /// MHF never underestimates a page's writes (before any decay), and saturates at 15.
    #[test]
    fn mhf_never_underestimates(lpns in proptest::collection::vec(0u32..300, 0..2000)) {
        let mut m = Mhf::<8>::new(MhfConfig { decay_period: u32::MAX, ..MhfConfig::PAPER }).unwrap();
        let mut count = [0u32; 300];
        for &l in &lpns {
            let t = m.record(l);
            count[l as usize] += 1;
            prop_assert!(m.estimate(l) as u32 >= count[l as usize].min(15));
            prop_assert_eq!(t, m.temperature_of(l));
            prop_assert_eq!(hot(t), m.estimate(l) >= 4);
        }
        prop_assert!((0..Mhf::<8>::COUNTERS).all(|i| m.counter(i) <= 15));
    }

    /// MBF (before any window change) holds a page in at least min(writes, V) filters, and its
    /// answer is the weight test.
    #[test]
    fn mbf_counts_frequency(lpns in proptest::collection::vec(0u32..300, 0..1000)) {
        let mut m = Mbf::<4, 2>::new(MbfConfig { decay_period: u32::MAX, ..MbfConfig::PAPER }).unwrap();
        let mut count = [0u32; 300];
        for &l in &lpns {
            let t = m.record(l);
            count[l as usize] += 1;
            let in_filters = (0..4).filter(|&r| m.contains_at_rank(r, l)).count() as u32;
            prop_assert!(in_filters >= count[l as usize].min(4));
            // Filled from the current window backwards: the ranks holding it are a prefix
            // (up to false positives, which only add ranks).
            prop_assert!(m.contains_at_rank(0, l));
            prop_assert_eq!(hot(t), m.weight_steps(l) >= 8);
        }
    }
}
