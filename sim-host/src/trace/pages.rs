//! # Requests as pages, and trace addresses on the device
//!
//! - [`page_span`]: for a page size `P`, a request of `len > 0` bytes at byte `offset` covers the
//!   pages `offset / P ..= (offset + len - 1) / P`. Its first page is *partial* when `offset` is
//!   not a multiple of `P` ([`PageSpan::partial_head`]), its last page when `offset + len` is not
//!   ([`PageSpan::partial_tail`]). A partial page of a write is a read-modify-write for the FTL.
//!   For a one-page request both flags refer to the same page: count partial pages with
//!   [`PageSpan::partial_pages`], which never counts a page twice.
//! - Real traces touch few pages of a huge address space. [`Compactor`] (`--compact`) numbers the
//!   distinct pages densely in first-touch order; [`AddressMode::Wrap`] (`--wrap`) folds pages
//!   beyond the capacity by modulo; otherwise a page beyond the capacity is an error for the
//!   simulator to report. [`AddressMapper`] applies the chosen mode.
//! - [`footprint_pages`]: the number of distinct pages a trace touches (reads and writes), to
//!   size a device to a trace.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::ops::RangeInclusive;

use super::Trace;

/// The pages one request covers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PageSpan {
    /// First page covered.
    pub first_page: u64,
    /// Number of pages covered (at least 1).
    pub pages: u64,
    /// The first page is not covered from its start (`offset % P != 0`).
    pub partial_head: bool,
    /// The last page is not covered to its end (`(offset + len) % P != 0`).
    pub partial_tail: bool,
}

impl PageSpan {
    /// Last page covered.
    pub fn last_page(&self) -> u64 {
        self.first_page + (self.pages - 1)
    }

    /// The pages covered.
    pub fn range(&self) -> RangeInclusive<u64> {
        self.first_page..=self.last_page()
    }

    /// Number of distinct pages not wholly covered: 0, 1 or 2 (a one-page request that is
    /// partial at both ends counts once).
    pub fn partial_pages(&self) -> u64 {
        if self.pages == 1 {
            u64::from(self.partial_head || self.partial_tail)
        } else {
            u64::from(self.partial_head) + u64::from(self.partial_tail)
        }
    }

    /// Number of pages wholly covered.
    pub fn full_pages(&self) -> u64 {
        self.pages - self.partial_pages()
    }
}

/// The pages of `page_bytes` bytes covered by `len` bytes at byte `offset`. `None` when `len` is
/// 0, `page_bytes` is 0, or `offset + len` overflows `u64`.
pub fn page_span(offset: u64, len: u64, page_bytes: u64) -> Option<PageSpan> {
    if len == 0 || page_bytes == 0 {
        return None;
    }
    let end = offset.checked_add(len)?; // exclusive
    let first_page = offset / page_bytes;
    let last_page = (end - 1) / page_bytes;
    Some(PageSpan {
        first_page,
        pages: last_page - first_page + 1,
        partial_head: !offset.is_multiple_of(page_bytes),
        partial_tail: !end.is_multiple_of(page_bytes),
    })
}

/// Distinct pages of `page_bytes` bytes touched by the trace's requests, reads and writes (0 when
/// `page_bytes` is 0). Works on page ranges, so huge requests cost no more than small ones.
pub fn footprint_pages(trace: &Trace, page_bytes: u64) -> u64 {
    let mut spans: Vec<(u64, u64)> = trace
        .requests
        .iter()
        .filter_map(|r| page_span(r.offset, r.len, page_bytes))
        .map(|s| (s.first_page, s.last_page()))
        .collect();
    spans.sort_unstable();
    let mut total = 0u64;
    let mut current: Option<(u64, u64)> = None;
    for (first, last) in spans {
        match current {
            Some((cf, cl)) if first <= cl.saturating_add(1) => current = Some((cf, cl.max(last))),
            Some((cf, cl)) => {
                total = total.saturating_add(cl - cf + 1);
                current = Some((first, last));
            }
            None => current = Some((first, last)),
        }
    }
    if let Some((cf, cl)) = current {
        total = total.saturating_add(cl - cf + 1);
    }
    total
}

/// A fast hasher for page numbers (the multiply-rotate hash of rustc's `FxHasher`): the
/// compactor sits on the simulator's per-page path, where SipHash costs too much.
#[derive(Clone, Copy, Default)]
pub struct PageHasher(u64);

impl Hasher for PageHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut b = [0u8; 8];
            b[..chunk.len()].copy_from_slice(chunk);
            self.write_u64(u64::from_le_bytes(b));
        }
    }

    fn write_u64(&mut self, i: u64) {
        self.0 = (self.0.rotate_left(5) ^ i).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

/// Hash maps keyed by page number.
pub type PageMap<V> = HashMap<u64, V, BuildHasherDefault<PageHasher>>;

/// Dense first-touch renumbering of pages (`--compact`): the first distinct page seen becomes
/// 0, the next 1, and so on. Memory is proportional to the distinct pages.
#[derive(Clone, Debug, Default)]
pub struct Compactor {
    map: PageMap<u64>,
}

impl Compactor {
    /// An empty map.
    pub fn new() -> Self {
        Compactor { map: PageMap::default() }
    }

    /// The dense number of `page`, giving it the next one on first touch.
    pub fn map(&mut self, page: u64) -> u64 {
        let next = self.map.len() as u64;
        *self.map.entry(page).or_insert(next)
    }

    /// The dense number of `page` if it has been touched.
    pub fn get(&self, page: u64) -> Option<u64> {
        self.map.get(&page).copied()
    }

    /// Distinct pages seen so far.
    pub fn distinct(&self) -> u64 {
        self.map.len() as u64
    }
}

/// How trace pages are placed on a device of `capacity` logical pages.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AddressMode {
    /// As they are: a page `>= capacity` is an error.
    Direct,
    /// Dense first-touch numbering ([`Compactor`]): an error once more than `capacity` distinct
    /// pages are touched.
    Compact,
    /// `page % capacity` (`--wrap`).
    Wrap,
    /// Dense numbering, then `% capacity` (`--compact --wrap`).
    CompactWrap,
}

impl AddressMode {
    /// The mode for the `--compact` and `--wrap` flags.
    pub fn from_flags(compact: bool, wrap: bool) -> Self {
        match (compact, wrap) {
            (false, false) => AddressMode::Direct,
            (true, false) => AddressMode::Compact,
            (false, true) => AddressMode::Wrap,
            (true, true) => AddressMode::CompactWrap,
        }
    }
}

/// Maps trace pages to device logical pages in an [`AddressMode`].
#[derive(Clone, Debug)]
pub struct AddressMapper {
    mode: AddressMode,
    capacity: u64,
    compactor: Compactor,
}

impl AddressMapper {
    /// A mapper onto `capacity` logical pages.
    pub fn new(mode: AddressMode, capacity: u64) -> Self {
        AddressMapper { mode, capacity, compactor: Compactor::new() }
    }

    /// The device page of trace page `page`, or `None` when it is beyond the capacity (the
    /// simulator reports that as an error). A capacity of 0 maps nothing.
    pub fn map(&mut self, page: u64) -> Option<u64> {
        if self.capacity == 0 {
            return None;
        }
        match self.mode {
            AddressMode::Direct => (page < self.capacity).then_some(page),
            AddressMode::Wrap => Some(page % self.capacity),
            AddressMode::Compact => {
                let p = self.compactor.map(page);
                (p < self.capacity).then_some(p)
            }
            AddressMode::CompactWrap => Some(self.compactor.map(page) % self.capacity),
        }
    }

    /// The mode.
    pub fn mode(&self) -> AddressMode {
        self.mode
    }

    /// Distinct trace pages seen by a compacting mode (0 otherwise).
    pub fn distinct(&self) -> u64 {
        self.compactor.distinct()
    }
}
