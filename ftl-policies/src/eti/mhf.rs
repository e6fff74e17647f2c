//! [`Mhf`]: Hsieh, Kuo and Chang's multiple hash functions (ACM TOS 2006), as the ETI paper
//! configured it (Table 2): a counting Bloom filter of 2048 four-bit saturating counters, two CRC
//! hash functions, all counters halved every 4096 page writes, hot at 4.
//!
//! This module owns the counter table and the per-page update. For each page written:
//!
//! 1. the page number is hashed by the two functions ([`CrcPoly`], default CRC-32C and CRC-32)
//!    to two counters (`hash % counters`);
//! 2. each of those counters is incremented, saturating at `2^counter_bits - 1` (when both hashes
//!    land on the same counter it is incremented once: a page's own write is counted once);
//! 3. the page is hot when both counters are at least `hot_threshold` (the smaller of the two is
//!    the estimate of the page's write count, as in any counting Bloom filter). Hsieh's "the H
//!    most significant bits of every counter are not all zero" is this test with threshold
//!    `2^(bits-H)`: 4 for 4-bit counters and H = 2;
//! 4. after `decay_period` pages, after that page's decision, every counter is halved (Hsieh's
//!    aging, exponential decay by two).
//!
//! MHF decides per page: `classify_page` does the work; `classify_request` records nothing and
//! answers cold (the FTL places each page by its page answer).
//!
//! Memory: the counters are packed sixteen to a `u64`, so `Mhf<WORDS>` has `16 * WORDS` counters in
//! `8 * WORDS` bytes: the default `Mhf<128>` has 2048 counters in 1 KiB ([`Mhf::TABLE_BYTES`]).
//! Halving is one shift and mask per word.
//!
//! Guarantees: `no_std`, no `alloc`, no floating point, no panics; O(1) per page, O(WORDS) per
//! decay.

use ftl_core::policy::{Classifier, Temperature, WriteRequest};

use super::hash::{bucket_pair, CrcPoly};
use super::ConfigError;

/// MHF's parameters (the table size is the const generic of [`Mhf`]).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct MhfConfig {
    /// Counter width in bits, 1..=4 (default 4).
    pub counter_bits: u8,
    /// Page writes between halvings (default 4096).
    pub decay_period: u32,
    /// A page is hot when both its counters are at least this (default 4), 1 ..= counter maximum.
    pub hot_threshold: u8,
    /// The two hash functions (default CRC-32C and CRC-32); they must differ.
    pub hashes: [CrcPoly; 2],
}

impl MhfConfig {
    /// The paper's Table 2.
    pub const PAPER: MhfConfig = MhfConfig {
        counter_bits: 4,
        decay_period: 4096,
        hot_threshold: 4,
        hashes: [CrcPoly::Castagnoli, CrcPoly::Ieee],
    };

    /// Checks every field against its documented range.
    pub const fn validate(&self) -> Result<(), ConfigError> {
        if self.counter_bits == 0 || self.counter_bits > 4 {
            return Err(ConfigError::CounterBits);
        }
        if self.decay_period == 0 {
            return Err(ConfigError::DecayPeriod);
        }
        if self.hot_threshold == 0 || self.hot_threshold as u32 >= 1 << self.counter_bits {
            return Err(ConfigError::HotThreshold);
        }
        if self.hashes[0] as u8 == self.hashes[1] as u8 {
            return Err(ConfigError::Hashes);
        }
        Ok(())
    }
}

impl Default for MhfConfig {
    fn default() -> Self {
        MhfConfig::PAPER
    }
}

/// Multiple hash functions over `16 * WORDS` four-bit counters (default 2048).
#[derive(Clone, Debug)]
pub struct Mhf<const WORDS: usize = 128> {
    words: [u64; WORDS],
    since_decay: u32,
    max: u8,
    cfg: MhfConfig,
}

impl<const WORDS: usize> Default for Mhf<WORDS> {
    fn default() -> Self {
        Self::build(MhfConfig::PAPER)
    }
}

impl<const WORDS: usize> Mhf<WORDS> {
    /// Number of counters.
    pub const COUNTERS: usize = 16 * WORDS;
    /// Bytes of the counter table.
    pub const TABLE_BYTES: usize = 8 * WORDS;
    /// Bytes of the whole classifier.
    pub const MEMORY_BYTES: usize = core::mem::size_of::<Self>();

    /// A classifier with parameters `cfg`, or the first field out of range.
    pub const fn new(cfg: MhfConfig) -> Result<Self, ConfigError> {
        match cfg.validate() {
            Ok(()) => Ok(Self::build(cfg)),
            Err(e) => Err(e),
        }
    }

    const fn build(cfg: MhfConfig) -> Self {
        const { assert!(WORDS >= 1, "MHF needs at least one word of counters") };
        Mhf { words: [0; WORDS], since_decay: 0, max: ((1u16 << cfg.counter_bits) - 1) as u8, cfg }
    }

    /// The parameters.
    pub fn config(&self) -> &MhfConfig {
        &self.cfg
    }

    /// Counter `i` (0 for `i` out of range).
    pub fn counter(&self, i: usize) -> u8 {
        match self.words.get(i / 16) {
            Some(w) => ((w >> ((i % 16) * 4)) & 0xF) as u8,
            None => 0,
        }
    }

    /// The counters page `lpn` hashes to.
    pub fn buckets(&self, lpn: u32) -> [usize; 2] {
        bucket_pair(self.cfg.hashes, lpn, Self::COUNTERS)
    }

    /// The estimated write count of page `lpn`: the smaller of its two counters.
    pub fn estimate(&self, lpn: u32) -> u8 {
        let [h1, h2] = self.buckets(lpn);
        self.counter(h1).min(self.counter(h2))
    }

    /// The temperature of page `lpn` now, without recording anything.
    pub fn temperature_of(&self, lpn: u32) -> Temperature {
        if self.estimate(lpn) >= self.cfg.hot_threshold {
            Temperature::Hot
        } else {
            Temperature::Cold
        }
    }

    #[inline]
    fn increment(&mut self, i: usize) {
        if self.counter(i) < self.max {
            if let Some(w) = self.words.get_mut(i / 16) {
                *w += 1 << ((i % 16) * 4);
            }
        }
    }

    /// Records a write of page `lpn` and returns its temperature. `classify_page` calls this.
    pub fn record(&mut self, lpn: u32) -> Temperature {
        let [h1, h2] = self.buckets(lpn);
        self.increment(h1);
        if h2 != h1 {
            self.increment(h2);
        }
        let t = self.temperature_of(lpn);
        self.since_decay += 1;
        if self.since_decay >= self.cfg.decay_period {
            self.since_decay = 0;
            self.decay();
        }
        t
    }

    /// Halves every counter. Runs by itself after every `decay_period` pages; public so that
    /// tools and tests can force one.
    pub fn decay(&mut self) {
        for w in &mut self.words {
            *w = (*w >> 1) & 0x7777_7777_7777_7777;
        }
    }
}

impl<const WORDS: usize> Classifier for Mhf<WORDS> {
    /// Records nothing; MHF decides per page.
    fn classify_request(&mut self, _req: &WriteRequest) -> Temperature {
        Temperature::Cold
    }

    /// Records the page and decides its temperature.
    fn classify_page(&mut self, lpn: u32, _request: Temperature) -> Temperature {
        self.record(lpn)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hot(t: Temperature) -> bool {
        t == Temperature::Hot
    }

    #[test]
    fn default_is_table_2() {
        let m = Mhf::<128>::default();
        assert_eq!(Mhf::<128>::COUNTERS, 2048);
        assert_eq!(Mhf::<128>::TABLE_BYTES, 1024);
        assert_eq!(*m.config(), MhfConfig::PAPER);
        const { assert!(Mhf::<128>::MEMORY_BYTES < 1100) };
    }

    #[test]
    fn fourth_write_is_hot() {
        let mut m = Mhf::<128>::default();
        for _ in 0..3 {
            assert!(!hot(m.classify_page(42, Temperature::Hot)));
        }
        assert!(hot(m.classify_page(42, Temperature::Cold)));
        assert_eq!(m.estimate(42), 4);
        assert_eq!(
            m.classify_request(&WriteRequest { lpn: 42, pages: 1, page_bytes: 4096 }),
            Temperature::Cold
        );
        assert_eq!(m.estimate(42), 4, "classify_request records nothing");
    }

    #[test]
    fn counters_saturate_at_15_without_touching_neighbours() {
        let mut m = Mhf::<128>::default();
        for _ in 0..100 {
            m.record(7);
        }
        let [h1, h2] = m.buckets(7);
        assert_eq!(m.counter(h1), 15);
        assert_eq!(m.counter(h2), 15);
        let others: u32 = (0..2048).filter(|&i| i != h1 && i != h2).map(|i| m.counter(i) as u32).sum();
        assert_eq!(others, 0);
    }

    #[test]
    fn narrower_counters_saturate_lower() {
        let cfg = MhfConfig { counter_bits: 2, hot_threshold: 3, ..MhfConfig::PAPER };
        let mut m = Mhf::<128>::new(cfg).unwrap();
        for _ in 0..10 {
            m.record(9);
        }
        assert_eq!(m.estimate(9), 3);
        assert!(hot(m.temperature_of(9)));
    }

    #[test]
    fn decay_halves_every_counter_once_per_period() {
        let cfg = MhfConfig { decay_period: 10, ..MhfConfig::PAPER };
        let mut m = Mhf::<128>::new(cfg).unwrap();
        for _ in 0..9 {
            m.record(1);
        }
        assert_eq!(m.estimate(1), 9);
        m.record(2); // the 10th page: decided, then everything halves
        assert_eq!(m.estimate(1), 4);
        assert_eq!(m.estimate(2), 0);
        assert!(hot(m.temperature_of(1)));
        for lpn in 100..110 {
            m.record(lpn);
        }
        assert_eq!(m.estimate(1), 2, "second halving cools the idle page");
        assert!(!hot(m.temperature_of(1)));
    }

    #[test]
    fn one_pass_over_many_pages_stays_cold() {
        let mut m = Mhf::<128>::default();
        // 1024 distinct pages written once: about one hit per counter, and a page needs both of
        // its counters at 4 to be hot.
        let hot_count = (0..1024u32).filter(|&l| hot(m.record(l * 7919))).count();
        assert!(hot_count <= 10, "{hot_count}");
    }

    #[test]
    fn bad_configs_are_rejected() {
        let p = MhfConfig::PAPER;
        assert_eq!(Mhf::<128>::new(MhfConfig { counter_bits: 5, ..p }).err(), Some(ConfigError::CounterBits));
        assert_eq!(Mhf::<128>::new(MhfConfig { counter_bits: 0, ..p }).err(), Some(ConfigError::CounterBits));
        assert_eq!(Mhf::<128>::new(MhfConfig { decay_period: 0, ..p }).err(), Some(ConfigError::DecayPeriod));
        assert_eq!(
            Mhf::<128>::new(MhfConfig { hot_threshold: 16, ..p }).err(),
            Some(ConfigError::HotThreshold)
        );
        assert_eq!(
            Mhf::<128>::new(MhfConfig { hot_threshold: 0, ..p }).err(),
            Some(ConfigError::HotThreshold)
        );
        assert_eq!(
            Mhf::<128>::new(MhfConfig { hashes: [CrcPoly::Ieee, CrcPoly::Ieee], ..p }).err(),
            Some(ConfigError::Hashes)
        );
        assert!(Mhf::<128>::new(MhfConfig { hashes: [CrcPoly::CdRom, CrcPoly::Ieee], ..p }).is_ok());
    }
}
