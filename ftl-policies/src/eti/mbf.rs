//! [`Mbf`]: Park and Du's multiple Bloom filters (MSST 2011), as the ETI paper describes and
//! configures it (section 2 and Table 2): `V` = 4 Bloom filters of 2048 bits over trailing
//! windows of 4096 page writes, two CRC hash functions, recency weights stepping by 0.5, hot at 4.
//!
//! This module owns the filters and the per-page update. The filters form a ring: the *current*
//! one records the current window; the one before it the window before, and so on, so the filter
//! of rank `r` (0 = current) covers the writes of `r` windows ago. Per page written:
//!
//! 1. the page number is hashed by the two functions ([`CrcPoly`], default CRC-32C and CRC-32) to
//!    two bit positions (`hash % bits`); a filter contains the page when both bits are set;
//! 2. **frequency**: the page is set in the current filter; if the current filter already contains
//!    it, in the next older filter that does not, and so on (when all contain it, nothing
//!    changes). This is the ETI paper's description, "an LBA is marked in filter f_i if either
//!    one or more writes to that LBA occurred in the period i or at least i writes to that LBA
//!    occurred in periods 1, 2, ..., i-1": a page written k times recently is in about k filters;
//! 3. **recency**: the filter of rank `r` weighs `(V - r)` weight steps: with the defaults 2, 1.5,
//!    1 and 0.5 ("BF weight difference 0.5" in Table 2; the current window weighs most). The page
//!    is hot when the weights of the filters containing it sum to at least `hot_threshold` (4),
//!    after this write is recorded. With the defaults that means three writes within the current
//!    and recent windows, e.g. three in the current window (2 + 1.5 + 1), or one in each of the
//!    last three;
//! 4. after `decay_period` pages, after that page's decision, the oldest filter is cleared and
//!    becomes the current one (every other filter moves one rank older).
//!
//! Weights are kept as integers in units of the weight step: the test is
//! `sum(V - r) * step_num >= hot_threshold * step_den`, with no floating point.
//!
//! Implementations of MBF differ on which filter receives a write (some rotate the receiving
//! filter on every write); this module follows the ETI paper's description above: the current
//! window's filter first, then the older ones in order.
//!
//! MBF decides per page: `classify_page` does the work; `classify_request` records nothing and
//! answers cold.
//!
//! Memory: `Mbf<V, WORDS>` has `V` filters of `64 * WORDS` bits, `V * WORDS * 8` bytes
//! ([`Mbf::TABLE_BYTES`]): 1 KiB for the default `Mbf<4, 32>`.
//!
//! Guarantees: `no_std`, no `alloc`, no floating point, no panics; O(V) per page, O(WORDS) per
//! window change.

use ftl_core::policy::{Classifier, Temperature, WriteRequest};

use super::hash::{bucket_pair, CrcPoly};
use super::ConfigError;

/// MBF's parameters (the number and size of the filters are the const generics of [`Mbf`]).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct MbfConfig {
    /// Page writes per window (default 4096).
    pub decay_period: u32,
    /// Hot when the weights of the filters containing the page sum to at least this (default 4).
    pub hot_threshold: u32,
    /// Numerator of the weight step (default 1).
    pub weight_step_num: u32,
    /// Denominator of the weight step (default 2: a step of 0.5).
    pub weight_step_den: u32,
    /// The two hash functions (default CRC-32C and CRC-32); they must differ.
    pub hashes: [CrcPoly; 2],
}

impl MbfConfig {
    /// The paper's Table 2.
    pub const PAPER: MbfConfig = MbfConfig {
        decay_period: 4096,
        hot_threshold: 4,
        weight_step_num: 1,
        weight_step_den: 2,
        hashes: [CrcPoly::Castagnoli, CrcPoly::Ieee],
    };
}

impl Default for MbfConfig {
    fn default() -> Self {
        MbfConfig::PAPER
    }
}

/// Multiple Bloom filters: `V` filters (default 4) of `64 * WORDS` bits (default 2048).
#[derive(Clone, Debug)]
pub struct Mbf<const V: usize = 4, const WORDS: usize = 32> {
    filters: [[u64; WORDS]; V],
    current: usize,
    since_decay: u32,
    cfg: MbfConfig,
}

impl<const V: usize, const WORDS: usize> Default for Mbf<V, WORDS> {
    fn default() -> Self {
        Self::build(MbfConfig::PAPER)
    }
}

impl<const V: usize, const WORDS: usize> Mbf<V, WORDS> {
    /// Bits per filter.
    pub const BITS: usize = 64 * WORDS;
    /// Bytes of the filters.
    pub const TABLE_BYTES: usize = 8 * WORDS * V;
    /// Bytes of the whole classifier.
    pub const MEMORY_BYTES: usize = core::mem::size_of::<Self>();
    /// The largest possible weight sum, in weight steps: `V + (V-1) + ... + 1`.
    pub const MAX_STEPS: u64 = (V as u64) * (V as u64 + 1) / 2;

    /// A classifier with parameters `cfg`, or the first field out of range.
    pub const fn new(cfg: MbfConfig) -> Result<Self, ConfigError> {
        if cfg.decay_period == 0 {
            return Err(ConfigError::DecayPeriod);
        }
        if cfg.weight_step_num == 0 || cfg.weight_step_den == 0 {
            return Err(ConfigError::WeightStep);
        }
        if cfg.hot_threshold == 0
            || Self::MAX_STEPS * (cfg.weight_step_num as u64)
                < cfg.hot_threshold as u64 * cfg.weight_step_den as u64
        {
            return Err(ConfigError::HotThreshold);
        }
        if cfg.hashes[0] as u8 == cfg.hashes[1] as u8 {
            return Err(ConfigError::Hashes);
        }
        Ok(Self::build(cfg))
    }

    const fn build(cfg: MbfConfig) -> Self {
        const { assert!(V >= 1 && WORDS >= 1, "MBF needs at least one filter of at least one word") };
        Mbf { filters: [[0; WORDS]; V], current: 0, since_decay: 0, cfg }
    }

    /// The parameters.
    pub fn config(&self) -> &MbfConfig {
        &self.cfg
    }

    /// The bit positions page `lpn` hashes to.
    pub fn buckets(&self, lpn: u32) -> [usize; 2] {
        bucket_pair(self.cfg.hashes, lpn, Self::BITS)
    }

    /// The filter of rank `r` (0 = current window, `V - 1` = oldest).
    #[inline]
    fn filter_of_rank(&self, r: usize) -> usize {
        (self.current + V - r % V) % V
    }

    #[inline]
    fn contains(&self, f: usize, [p1, p2]: [usize; 2]) -> bool {
        let bit = |p: usize| (self.filters[f][p / 64] >> (p % 64)) & 1 != 0;
        bit(p1) && bit(p2)
    }

    /// Whether the filter of rank `r` contains page `lpn`.
    pub fn contains_at_rank(&self, r: usize, lpn: u32) -> bool {
        r < V && self.contains(self.filter_of_rank(r), self.buckets(lpn))
    }

    /// Page `lpn`'s weight sum in weight steps: `V - r` for each rank `r` whose filter contains it.
    pub fn weight_steps(&self, lpn: u32) -> u64 {
        let ps = self.buckets(lpn);
        (0..V).filter(|&r| self.contains(self.filter_of_rank(r), ps)).map(|r| (V - r) as u64).sum()
    }

    /// The temperature of page `lpn` now, without recording anything.
    pub fn temperature_of(&self, lpn: u32) -> Temperature {
        let steps = self.weight_steps(lpn);
        if steps * self.cfg.weight_step_num as u64
            >= self.cfg.hot_threshold as u64 * self.cfg.weight_step_den as u64
        {
            Temperature::Hot
        } else {
            Temperature::Cold
        }
    }

    /// Records a write of page `lpn` and returns its temperature. `classify_page` calls this.
    pub fn record(&mut self, lpn: u32) -> Temperature {
        let ps = self.buckets(lpn);
        for r in 0..V {
            let f = self.filter_of_rank(r);
            if !self.contains(f, ps) {
                for p in ps {
                    self.filters[f][p / 64] |= 1 << (p % 64);
                }
                break;
            }
        }
        let t = self.temperature_of(lpn);
        self.since_decay += 1;
        if self.since_decay >= self.cfg.decay_period {
            self.since_decay = 0;
            self.decay();
        }
        t
    }

    /// Ends the current window: the oldest filter is cleared and becomes the current one. Runs by
    /// itself after every `decay_period` pages; public so that tools and tests can force one.
    pub fn decay(&mut self) {
        self.current = (self.current + 1) % V;
        self.filters[self.current] = [0; WORDS];
    }
}

impl<const V: usize, const WORDS: usize> Classifier for Mbf<V, WORDS> {
    /// Records nothing; MBF decides per page.
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

    fn small(period: u32) -> Mbf {
        Mbf::new(MbfConfig { decay_period: period, ..MbfConfig::PAPER }).unwrap()
    }

    #[test]
    fn default_is_table_2() {
        assert_eq!(Mbf::<4, 32>::BITS, 2048);
        assert_eq!(Mbf::<4, 32>::TABLE_BYTES, 1024);
        assert_eq!(Mbf::<4, 32>::MAX_STEPS, 10);
        const { assert!(Mbf::<4, 32>::MEMORY_BYTES < 1100) };
        assert_eq!(*Mbf::<4, 32>::default().config(), MbfConfig::PAPER);
    }

    #[test]
    fn third_write_in_a_window_is_hot() {
        let mut m = Mbf::<4, 32>::default();
        assert!(!hot(m.classify_page(5, Temperature::Hot)));
        assert_eq!(m.weight_steps(5), 4); // 2.0
        assert!(!hot(m.record(5)));
        assert_eq!(m.weight_steps(5), 7); // 2.0 + 1.5
        assert!(hot(m.record(5)));
        assert_eq!(m.weight_steps(5), 9); // + 1.0
        assert!(hot(m.record(5)));
        assert_eq!(m.weight_steps(5), 10);
        // Saturated: every filter has it; more writes change nothing.
        assert!(hot(m.record(5)));
        assert_eq!(m.weight_steps(5), 10);
        assert!((0..4).all(|r| m.contains_at_rank(r, 5)));
        let req = WriteRequest { lpn: 6, pages: 1, page_bytes: 4096 };
        assert_eq!(m.classify_request(&req), Temperature::Cold);
        assert_eq!(m.weight_steps(6), 0, "classify_request records nothing");
    }

    #[test]
    fn hot_page_cools_as_windows_pass() {
        let mut m = small(8);
        for _ in 0..3 {
            m.record(1);
        }
        assert!(hot(m.temperature_of(1)));
        // Five other pages end the window (8 writes).
        for l in 100..105 {
            m.record(l);
        }
        // Now in ranks 1, 2, 3: 1.5 + 1 + 0.5 = 3.
        assert_eq!(m.weight_steps(1), 6);
        assert!(!hot(m.temperature_of(1)));
        for _ in 0..3 {
            m.decay();
        }
        assert_eq!(m.weight_steps(1), 0, "its windows have all been cleared");
    }

    #[test]
    fn once_per_window_for_three_windows_is_hot() {
        let mut m = small(4);
        let mut temps = [Temperature::Cold; 3];
        for t in &mut temps {
            *t = m.record(9);
            for l in 200..203 {
                m.record(l);
            }
        }
        // After 1 window: 2.0; after 2: 2.0 + 1.5; after 3: 2.0 + 1.5 + 1.0.
        assert_eq!(temps, [Temperature::Cold, Temperature::Cold, Temperature::Hot]);
    }

    #[test]
    fn window_change_clears_only_the_oldest() {
        let mut m = small(1000);
        m.record(3);
        m.decay();
        m.record(4);
        assert!(m.contains_at_rank(1, 3) && !m.contains_at_rank(0, 3));
        assert!(m.contains_at_rank(0, 4));
        m.decay();
        m.decay();
        assert!(m.contains_at_rank(3, 3));
        m.decay();
        assert!((0..4).all(|r| !m.contains_at_rank(r, 3)));
        assert!(m.contains_at_rank(3, 4));
    }

    #[test]
    fn bad_configs_are_rejected() {
        let p = MbfConfig::PAPER;
        let new = |c| Mbf::<4, 32>::new(c).err();
        assert_eq!(new(MbfConfig { decay_period: 0, ..p }), Some(ConfigError::DecayPeriod));
        assert_eq!(new(MbfConfig { weight_step_den: 0, ..p }), Some(ConfigError::WeightStep));
        assert_eq!(new(MbfConfig { weight_step_num: 0, ..p }), Some(ConfigError::WeightStep));
        assert_eq!(new(MbfConfig { hot_threshold: 0, ..p }), Some(ConfigError::HotThreshold));
        assert_eq!(new(MbfConfig { hot_threshold: 5, ..p }), None, "5 = 2 + 1.5 + 1 + 0.5");
        assert_eq!(new(MbfConfig { hot_threshold: 6, ..p }), Some(ConfigError::HotThreshold));
        assert_eq!(new(MbfConfig { hashes: [CrcPoly::CdRom; 2], ..p }), Some(ConfigError::Hashes));
    }
}
