//! Content-based sampling (the paper's "sampling for hashing"): which pages of a write request to
//! fingerprint first, and whether to fingerprint the rest.
//!
//! A write request's pages are divided into sampling units of [`Sampler::unit_pages`]
//! consecutive pages (default [`DEFAULT_UNIT_PAGES`] = 32, the paper's 128 KiB; the last unit of
//! a request may be shorter). In each unit the *sample page* is the one whose first four bytes,
//! read as a big-endian 32-bit number (the paper: "we concatenate the four bytes into a 32-bit
//! numeric value"), are the largest; the earliest such page on a tie. The FTL fingerprints the
//! sample page first; if it duplicates resident content, the whole unit probably does and the
//! other pages are fingerprinted too; if not, the unit is assumed unique and the rest of it is
//! written without fingerprints ([`UnitDecision`]).
//!
//! Choices where the paper is silent: a page shorter than four bytes is read as if padded with
//! zero bytes; a unit size of 1 disables sampling (every page is its own sample); the decision
//! after the sample takes one bit (duplicate or not), so a pre-hash miss of the sample counts as
//! "not a duplicate".
//!
//! Use from the write path:
//!
//! ```
//! use ftl_policies::dedup::{Sampler, UnitDecision};
//! let pages: [[u8; 8]; 3] = [[0, 0, 0, 1, 9, 9, 9, 9], [0, 0, 1, 0, 0, 0, 0, 0], [0, 0, 0, 7, 0, 0, 0, 0]];
//! let sampler = Sampler::default();
//! for unit in sampler.units(pages.len()) {
//!     let mut plan = Sampler::plan(pages[unit.clone()].iter());
//!     let sample = unit.start + plan.sample().unwrap_or(0);
//!     assert_eq!(sample, 1); // 0x00000100 is the largest sample value
//!     let duplicate = false; // fingerprint pages[sample] and look it up
//!     assert_eq!(plan.decide(duplicate), UnitDecision::SkipRest);
//!     assert_eq!(plan.rest().count(), 0); // nothing else to fingerprint
//! }
//! ```
//!
//! Guarantees: no allocation, no panics, no floating point; O(unit) work per unit.

use core::ops::Range;

/// The paper's sampling unit: 32 pages (128 KiB of 4 KiB pages).
pub const DEFAULT_UNIT_PAGES: u16 = 32;

/// The sample value of a page: its first four bytes as a big-endian number (missing bytes read
/// as zero).
pub fn sample_value(page: &[u8]) -> u32 {
    let mut b = [0u8; 4];
    for (d, s) in b.iter_mut().zip(page) {
        *d = *s;
    }
    u32::from_be_bytes(b)
}

/// The index of the sample page among `pages`: the largest [`sample_value`], the earliest on a
/// tie. `None` for no pages.
pub fn sample_index<P: AsRef<[u8]>, I: IntoIterator<Item = P>>(pages: I) -> Option<usize> {
    sample_of_values(pages.into_iter().map(|p| sample_value(p.as_ref())))
}

/// As [`sample_index`], given the sample values themselves.
pub fn sample_of_values<I: IntoIterator<Item = u32>>(values: I) -> Option<usize> {
    let mut best: Option<(usize, u32)> = None;
    for (i, v) in values.into_iter().enumerate() {
        match best {
            Some((_, b)) if v <= b => {}
            _ => best = Some((i, v)),
        }
    }
    best.map(|(i, _)| i)
}

/// A sampling configuration.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Sampler {
    unit_pages: u16,
}

impl Default for Sampler {
    /// Units of [`DEFAULT_UNIT_PAGES`].
    fn default() -> Self {
        Sampler { unit_pages: DEFAULT_UNIT_PAGES }
    }
}

impl Sampler {
    /// Units of `unit_pages` pages; `None` for 0. 1 disables sampling.
    pub const fn new(unit_pages: u16) -> Option<Self> {
        if unit_pages == 0 {
            None
        } else {
            Some(Sampler { unit_pages })
        }
    }

    /// Pages per sampling unit.
    pub const fn unit_pages(&self) -> u16 {
        self.unit_pages
    }

    /// Whether sampling does anything (units of more than one page).
    pub const fn is_sampling(&self) -> bool {
        self.unit_pages > 1
    }

    /// The sampling units of a request of `request_pages` pages, as ranges of page indices
    /// within the request, in order.
    pub fn units(&self, request_pages: usize) -> Units {
        Units { next: 0, end: request_pages, unit: self.unit_pages as usize }
    }

    /// The plan for one unit, from its pages.
    pub fn plan<P: AsRef<[u8]>, I: IntoIterator<Item = P>>(unit: I) -> UnitPlan {
        let mut len = 0usize;
        let sample = sample_of_values(unit.into_iter().map(|p| {
            len += 1;
            sample_value(p.as_ref())
        }));
        UnitPlan { len, sample, decision: None }
    }

    /// The plan for one unit, from its pages' sample values.
    pub fn plan_values<I: IntoIterator<Item = u32>>(values: I) -> UnitPlan {
        let mut len = 0usize;
        let sample = sample_of_values(values.into_iter().inspect(|_| len += 1));
        UnitPlan { len, sample, decision: None }
    }
}

/// The sampling units of a request (see [`Sampler::units`]).
#[derive(Clone, Debug)]
pub struct Units {
    next: usize,
    end: usize,
    unit: usize,
}

impl Iterator for Units {
    type Item = Range<usize>;

    fn next(&mut self) -> Option<Range<usize>> {
        if self.next >= self.end {
            return None;
        }
        let start = self.next;
        self.next = start.saturating_add(self.unit).min(self.end);
        Some(start..self.next)
    }
}

/// What to do with the rest of a unit once its sample page has been looked up.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum UnitDecision {
    /// The sample was a duplicate: fingerprint the other pages of the unit.
    FingerprintRest,
    /// The sample was not: write the other pages without fingerprinting them.
    SkipRest,
}

/// The sampling decision for one unit: the sample page first, then the decision, then the other
/// pages to fingerprint.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct UnitPlan {
    len: usize,
    sample: Option<usize>,
    decision: Option<UnitDecision>,
}

impl UnitPlan {
    /// Pages in the unit.
    pub const fn len(&self) -> usize {
        self.len
    }

    /// Whether the unit has no pages.
    pub const fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The index (within the unit) of the page to fingerprint first; `None` for an empty unit.
    pub const fn sample(&self) -> Option<usize> {
        self.sample
    }

    /// Records whether the sample page duplicated resident content and returns what to do with
    /// the rest of the unit.
    pub fn decide(&mut self, sample_is_duplicate: bool) -> UnitDecision {
        let d = if sample_is_duplicate { UnitDecision::FingerprintRest } else { UnitDecision::SkipRest };
        self.decision = Some(d);
        d
    }

    /// The decision recorded by [`decide`](Self::decide), if any.
    pub const fn decision(&self) -> Option<UnitDecision> {
        self.decision
    }

    /// The other pages of the unit to fingerprint, in order: all but the sample after
    /// [`UnitDecision::FingerprintRest`], none otherwise (also before a decision).
    pub fn rest(&self) -> impl Iterator<Item = usize> {
        let n = match self.decision {
            Some(UnitDecision::FingerprintRest) => self.len,
            _ => 0,
        };
        let sample = self.sample;
        (0..n).filter(move |&i| Some(i) != sample)
    }
}
