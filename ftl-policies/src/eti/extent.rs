//! [`Eti`]: extent-based temperature identification, the paper's section 4.
//!
//! This module owns the extent table and its three operations: the per-request update (match,
//! split, or increment by overlap), the periodic decay (halve, then merge), and the lookup that
//! starts from the last matched extent.
//!
//! # State and invariants
//!
//! The logical address space `0 .. address_pages` is cut into between 1 and `N` extents, kept in
//! address order in two fixed arrays: the first page of each extent (`u32`) and its counter (one
//! byte holding a `counter_bits`-bit value, 4 by default). Extent `k` is `start[k] .. start[k+1]`
//! (the last one ends at `address_pages`). At every moment, which the tests check after every
//! operation: `start[0] == 0`, starts strictly increase (the extents cover the space exactly,
//! without gaps or overlaps, none empty), there are at most `N` of them, and every counter is at
//! most `2^counter_bits - 1`. The table begins as one extent with counter 0.
//!
//! # Per write request `(A, L)` (section 4)
//!
//! Let `E = A + L`, clamped to the address space (pages past its end are ignored; a request with
//! no pages or starting past the end is ignored and is cold).
//!
//! 1. An extent equal to `A .. E`: its counter is incremented (saturating).
//! 2. Otherwise, while the table has fewer than `N` extents, the extent containing `A` is split at
//!    `A` and the one containing `E - 1` at `E` (at `A` first; with one free slot only that split
//!    happens). The pieces inherit the counter of the extent they come from. Then every extent
//!    overlapping `A .. E` whose overlap is at least `alpha` percent of the extent's own length
//!    is incremented. After successful splits every such extent lies inside `A .. E` (100%
//!    overlap), so all of them are incremented: the paper's cases B to D, where the request is
//!    matched by the new extent(s) and any it covers whole. With a full table this is the paper's
//!    third rule ("increment every extent overlapped by more than alpha"; read as "at least", since
//!    more than the default 100% is impossible).
//!
//! Because an increment only ever happens to an extent the request covers (at alpha = 100%,
//! entirely), a counter approximates how many times each page of its extent was written.
//!
//! **The request's temperature**, decided once per request after the update: a page of the
//! request is hot when its extent's counter is at least `hot_threshold` (4); the request is hot
//! when strictly more than half of its pages are hot (a tie is cold). With one extent covering the
//! request, the usual case once the request has been seen before, this is that extent's counter
//! against the threshold. The paper classifies per write operation but does not say how to combine
//! several extents; the page majority weighs each extent by how much of the request it holds, and
//! the tie goes to cold because cold data wrongly sent to the hot frontier is what garbage
//! collection then copies again and again.
//!
//! # Decay
//!
//! Every `decay_period` (4096) requests, after the request that completes the period: every
//! counter is halved, then each maximal run of adjacent extents that either all have counters
//! below `beta` (4) ("cold") or all have the same counter of at least `beta` ("hot with equal
//! counters") becomes one extent. A merged hot run keeps its common counter; a merged cold run
//! gets the page-weighted mean of its counters, rounded down (the paper does not say; with counters
//! as per-page write counts, this is the mean count of the run's pages, and it stays below beta).
//!
//! # Lookup
//!
//! The extent containing an address is found by an exponential (galloping) search that starts at
//! the last extent the previous request touched, as the paper suggests for spatial locality: a
//! sequential stream finds its extent in one or two probes, a random one in O(log N). The
//! starting index is a hint only: any value gives the correct answer. This replaces the paper's
//! Algorithm 1, which keeps a "latest found extent" consistent across splits and merges in a
//! structure the paper does not describe; here splits move the hint to the request's last extent
//! and decay maps it to the merged extent that contains it.
//!
//! # Memory
//!
//! `N * 5` bytes of table ([`Eti::TABLE_BYTES`]: 10 KiB for 2048 extents, the paper's "roughly 10
//! KB") plus a few words of state ([`Eti::MEMORY_BYTES`] is the whole value: 10 328 bytes for
//! 2048 extents on a 64-bit host). Splitting moves the tail of the table (on average half of it)
//! by one or two entries; with 2048 entries that is about 5 KiB of `memmove`, inside the L1
//! cache.

use ftl_core::policy::{Classifier, Temperature, WriteRequest};

use super::ConfigError;

/// The paper's maximum number of extents.
pub const DEFAULT_EXTENTS: usize = 2048;

/// ETI's parameters (all but the table size `N`, which is the const generic of [`Eti`]).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct EtiConfig {
    /// Logical pages tracked, `1 ..= 2^32`; set it to the device's logical page count. Default
    /// `2^32`, the whole LPN space (which only matters for a write reaching the device's end:
    /// the last extent then extends past it and is not covered whole).
    pub address_pages: u64,
    /// Counter width in bits, 1..=8 (default 4: counters saturate at 15).
    pub counter_bits: u8,
    /// Write requests between decays (default 4096).
    pub decay_period: u32,
    /// An extent is hot when its counter is at least this (default 4), 1 ..= counter maximum.
    pub hot_threshold: u8,
    /// Splitting threshold alpha, in percent of an extent's length (default 100): with a full
    /// table, an extent is incremented when a request covers at least this share of it.
    pub alpha_percent: u8,
    /// Merging threshold beta (default 4): at decay, adjacent extents with counters below it
    /// merge. 0 disables cold merging.
    pub beta: u8,
}

impl EtiConfig {
    /// The paper's Table 2 over the whole 32-bit LPN space.
    pub const PAPER: EtiConfig = EtiConfig {
        address_pages: 1 << 32,
        counter_bits: 4,
        decay_period: 4096,
        hot_threshold: 4,
        alpha_percent: 100,
        beta: 4,
    };

    /// The paper's parameters over an address space of `pages` logical pages.
    pub const fn with_address_pages(pages: u64) -> EtiConfig {
        EtiConfig { address_pages: pages, ..EtiConfig::PAPER }
    }

    /// The largest counter value, `2^counter_bits - 1` (0 if `counter_bits` is out of range).
    pub const fn counter_max(&self) -> u8 {
        if self.counter_bits == 0 || self.counter_bits > 8 {
            0
        } else {
            ((1u16 << self.counter_bits) - 1) as u8
        }
    }

    /// Checks every field against its documented range.
    pub const fn validate(&self) -> Result<(), ConfigError> {
        if self.address_pages == 0 || self.address_pages > 1 << 32 {
            return Err(ConfigError::AddressPages);
        }
        if self.counter_bits == 0 || self.counter_bits > 8 {
            return Err(ConfigError::CounterBits);
        }
        if self.decay_period == 0 {
            return Err(ConfigError::DecayPeriod);
        }
        if self.hot_threshold == 0 || self.hot_threshold > self.counter_max() {
            return Err(ConfigError::HotThreshold);
        }
        if self.alpha_percent == 0 || self.alpha_percent > 100 {
            return Err(ConfigError::Alpha);
        }
        Ok(())
    }
}

impl Default for EtiConfig {
    fn default() -> Self {
        EtiConfig::PAPER
    }
}

/// One extent of the table.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Extent {
    /// First logical page.
    pub start: u32,
    /// One past the last logical page (up to `2^32`).
    pub end: u64,
    /// Its counter.
    pub counter: u8,
}

/// Event counts, for evaluation.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct EtiStats {
    /// Requests handled (not counting ignored empty or out-of-range ones).
    pub requests: u64,
    /// Requests that matched an extent exactly.
    pub exact_matches: u64,
    /// Extents created by splitting.
    pub splits: u64,
    /// Requests that needed a split the full table could not make.
    pub table_full: u64,
    /// Decays run.
    pub decays: u64,
    /// Extents removed by merging.
    pub merges: u64,
}

/// Extent-based temperature identification with at most `N` extents (default 2048).
///
/// Build it with [`Eti::new`] or take the paper's defaults with `Default`. `N` must be at least
/// 1 (checked at compile time). The extents are two parallel arrays and a length, not a
/// `heapless::Vec` of pairs: splits and merges shift both arrays with `copy_within`, and the
/// starts are binary-searched on their own.
#[derive(Clone, Debug)]
pub struct Eti<const N: usize = DEFAULT_EXTENTS> {
    starts: [u32; N],
    counts: [u8; N],
    len: usize,
    hint: usize,
    since_decay: u32,
    max: u8,
    cfg: EtiConfig,
    stats: EtiStats,
}

impl<const N: usize> Default for Eti<N> {
    fn default() -> Self {
        Self::build(EtiConfig::PAPER)
    }
}

#[inline]
fn temperature(hot: bool) -> Temperature {
    if hot {
        Temperature::Hot
    } else {
        Temperature::Cold
    }
}

impl<const N: usize> Eti<N> {
    /// Bytes of the extent table: a `u32` start and a one-byte counter per extent.
    pub const TABLE_BYTES: usize = N * (core::mem::size_of::<u32>() + core::mem::size_of::<u8>());
    /// Bytes of the whole classifier (table and state).
    pub const MEMORY_BYTES: usize = core::mem::size_of::<Self>();

    /// A classifier with parameters `cfg`, or the first field out of range.
    pub const fn new(cfg: EtiConfig) -> Result<Self, ConfigError> {
        match cfg.validate() {
            Ok(()) => Ok(Self::build(cfg)),
            Err(e) => Err(e),
        }
    }

    const fn build(cfg: EtiConfig) -> Self {
        const { assert!(N >= 1, "ETI needs room for at least one extent") };
        Eti {
            starts: [0; N],
            counts: [0; N],
            len: 1,
            hint: 0,
            since_decay: 0,
            max: cfg.counter_max(),
            cfg,
            stats: EtiStats { requests: 0, exact_matches: 0, splits: 0, table_full: 0, decays: 0, merges: 0 },
        }
    }

    /// The parameters.
    pub fn config(&self) -> &EtiConfig {
        &self.cfg
    }

    /// Event counts so far.
    pub fn stats(&self) -> &EtiStats {
        &self.stats
    }

    /// Extents in use (1 ..= N).
    pub fn extent_count(&self) -> usize {
        self.len
    }

    /// The extents in address order.
    pub fn extents(&self) -> impl Iterator<Item = Extent> + '_ {
        (0..self.len).map(move |k| Extent {
            start: self.starts[k],
            end: self.end(k),
            counter: self.counts[k],
        })
    }

    /// The extent containing `lpn` (the last one for `lpn` past the address space).
    pub fn extent_of(&self, lpn: u32) -> Extent {
        let k = self.find(lpn);
        Extent { start: self.starts[k], end: self.end(k), counter: self.counts[k] }
    }

    /// The temperature of page `lpn` now, without recording anything.
    pub fn temperature_of(&self, lpn: u32) -> Temperature {
        temperature(self.extent_of(lpn).counter >= self.cfg.hot_threshold)
    }

    /// Records a write of `pages` pages at `lpn` and returns the request's temperature (see the
    /// module documentation). `classify_request` calls this.
    pub fn record(&mut self, lpn: u32, pages: u32) -> Temperature {
        let space = self.cfg.address_pages;
        let a = lpn as u64;
        if pages == 0 || a >= space {
            return Temperature::Cold;
        }
        let e = (a + pages as u64).min(space);
        self.stats.requests += 1;
        let i = self.find(lpn);
        let hot = if self.starts[i] as u64 == a && self.end(i) == e {
            self.stats.exact_matches += 1;
            self.hint = i;
            self.increment(i) >= self.cfg.hot_threshold
        } else {
            self.split_and_count(i, a, e)
        };
        self.since_decay += 1;
        if self.since_decay >= self.cfg.decay_period {
            self.since_decay = 0;
            self.decay();
        }
        temperature(hot)
    }

    /// End (exclusive) of extent `k < len`.
    #[inline]
    fn end(&self, k: usize) -> u64 {
        if k + 1 < self.len {
            self.starts[k + 1] as u64
        } else {
            self.cfg.address_pages
        }
    }

    #[inline]
    fn increment(&mut self, k: usize) -> u8 {
        let c = &mut self.counts[k];
        if *c < self.max {
            *c += 1;
        }
        *c
    }

    /// Index of the extent containing `addr`: the last `k` with `start[k] <= addr`. Galloping
    /// search from the hint.
    fn find(&self, addr: u32) -> usize {
        let starts = &self.starts[..self.len];
        let n = starts.len();
        let h = if self.hint < n { self.hint } else { n - 1 };
        // Bracket the answer in lo ..= hi - 1 with starts[lo] <= addr and (hi == n or
        // starts[hi] > addr), doubling the step away from the hint.
        let (lo, hi) = if starts[h] <= addr {
            let mut lo = h;
            let mut step = 1;
            loop {
                let probe = lo + step;
                if probe >= n {
                    break (lo, n);
                }
                if starts[probe] > addr {
                    break (lo, probe);
                }
                lo = probe;
                step *= 2;
            }
        } else {
            // starts[0] == 0 <= addr, so h > 0 here.
            let mut hi = h;
            let mut step = 1;
            loop {
                if step >= hi {
                    break (0, hi);
                }
                let probe = hi - step;
                if starts[probe] <= addr {
                    break (probe, hi);
                }
                hi = probe;
                step *= 2;
            }
        };
        lo + starts[lo + 1..hi].partition_point(|&s| s <= addr)
    }

    /// The non-exact case: extent `i` contains `a`; split where possible, increment by overlap,
    /// and return whether the request is hot.
    fn split_and_count(&mut self, i: usize, a: u64, e: u64) -> bool {
        // Extent containing e - 1: search onward from i.
        let j = if e <= self.end(i) {
            i
        } else {
            self.hint = i;
            self.find((e - 1) as u32)
        };
        let want_a = self.starts[i] as u64 != a;
        let want_e = self.end(j) != e;
        let split_a = want_a && self.len < N;
        let split_e = want_e && self.len + usize::from(split_a) < N;
        if (want_a && !split_a) || (want_e && !split_e) {
            self.stats.table_full += 1;
        }
        // Both split points are inside an extent, so below the address space end (<= 2^32).
        self.split(i, j, split_a.then_some(a as u32), split_e.then_some(e as u32));
        let (first, last) = if split_a { (i + 1, j + 1) } else { (i, j) };

        let alpha = self.cfg.alpha_percent as u64;
        let mut hot_pages = 0u64;
        for k in first..=last {
            let s = self.starts[k] as u64;
            let t = self.end(k);
            let overlap = t.min(e) - s.max(a);
            let c = if overlap * 100 >= alpha * (t - s) { self.increment(k) } else { self.counts[k] };
            if c >= self.cfg.hot_threshold {
                hot_pages += overlap;
            }
        }
        self.hint = last;
        2 * hot_pages > e - a
    }

    /// Inserts a boundary at `a` inside extent `i` and/or at `e` inside extent `j >= i`, the
    /// caller having checked there is room. New pieces inherit their parent's counter. One pass
    /// over the tail: entries after `j` move by the number of splits, those in `i+1 ..= j` by one.
    fn split(&mut self, i: usize, j: usize, a: Option<u32>, e: Option<u32>) {
        let n = self.len;
        let (ci, cj) = (self.counts[i], self.counts[j]);
        match (a, e) {
            (None, None) => return,
            (Some(a), None) => self.insert(i + 1, a, ci),
            (None, Some(e)) => self.insert(j + 1, e, cj),
            (Some(a), Some(e)) => {
                self.starts.copy_within(j + 1..n, j + 3);
                self.counts.copy_within(j + 1..n, j + 3);
                self.starts.copy_within(i + 1..j + 1, i + 2);
                self.counts.copy_within(i + 1..j + 1, i + 2);
                self.starts[i + 1] = a;
                self.counts[i + 1] = ci;
                self.starts[j + 2] = e;
                self.counts[j + 2] = cj;
                self.len = n + 2;
            }
        }
        self.stats.splits += (a.is_some() as u64) + (e.is_some() as u64);
    }

    fn insert(&mut self, pos: usize, start: u32, counter: u8) {
        let n = self.len;
        self.starts.copy_within(pos..n, pos + 1);
        self.counts.copy_within(pos..n, pos + 1);
        self.starts[pos] = start;
        self.counts[pos] = counter;
        self.len = n + 1;
    }

    /// Halves every counter, then merges runs of cold extents and runs of equal hot ones. Runs by
    /// itself after every `decay_period` requests; public so that tools and tests can force one.
    pub fn decay(&mut self) {
        let n = self.len;
        for c in &mut self.counts[..n] {
            *c >>= 1;
        }
        let beta = self.cfg.beta;
        let old_hint = self.hint;
        let mut out = 0;
        let mut k = 0;
        while k < n {
            let start = self.starts[k];
            let c = self.counts[k];
            let mut m = k + 1;
            let merged = if c < beta {
                let mut weighted = c as u64 * (self.end(k) - start as u64);
                while m < n && self.counts[m] < beta {
                    weighted += self.counts[m] as u64 * (self.end(m) - self.starts[m] as u64);
                    m += 1;
                }
                // The run's length is at least 1 and the mean is at most its largest counter.
                (weighted / (self.end(m - 1) - start as u64)) as u8
            } else {
                while m < n && self.counts[m] == c {
                    m += 1;
                }
                c
            };
            if (k..m).contains(&old_hint) {
                self.hint = out;
            }
            // out <= k: this never overwrites an entry not yet read.
            self.starts[out] = start;
            self.counts[out] = merged;
            out += 1;
            k = m;
        }
        self.stats.merges += (n - out) as u64;
        self.stats.decays += 1;
        self.len = out;
    }
}

#[cfg(test)]
impl<const N: usize> Eti<N> {
    /// `find` with the search starting at `hint` (any value).
    pub(super) fn find_from(&mut self, hint: usize, addr: u32) -> usize {
        self.hint = hint;
        self.find(addr)
    }
}

impl<const N: usize> Classifier for Eti<N> {
    /// Records the request and decides its temperature (the module documentation says how).
    fn classify_request(&mut self, req: &WriteRequest) -> Temperature {
        self.record(req.lpn, req.pages)
    }

    /// The request's temperature: ETI decides once per request.
    fn classify_page(&mut self, _lpn: u32, request: Temperature) -> Temperature {
        request
    }
}
