//! Trims, made durable by journal pages.
//!
//! A trim takes effect in RAM at once and is remembered as a pending range. `flush`, a full
//! pending list, or GC about to erase a block (whose trimmed pages it did not copy) writes the
//! pending ranges as one journal page in the sequence space of data pages, so mount replays trims
//! and writes in the order they happened. A block holding a journal page newer than the current
//! checkpoint is flagged and is never erased before the next checkpoint, which makes the journal
//! page obsolete.
//!
//! Journal page data: `count: u32`, then `count` pairs `(first_lpn: u32, pages: u32)`.

use nand_hal::NandFlash;

use crate::blocks::FLAG_LIVE_JOURNAL;
use crate::frontier::Source;
use crate::map::MappingTable;
use crate::meta::PageKind;
use crate::policy::{PolicySet, Stream};
use crate::{Error, Ftl};

/// Most pending trim ranges held in RAM before a journal page is written (needs 4 + 8 * this
/// bytes of page data; pages too small for that hold fewer: see [`PendingTrims::new`]).
pub const MAX_PENDING_TRIMS: usize = 32;

/// Trim ranges not yet on flash, in a `heapless::Vec` of [`MAX_PENDING_TRIMS`] (RAM: 8 bytes a
/// range plus the length and the page's capacity). Holds at most as many ranges as one journal
/// page of the device can carry, so serializing them always fits the page.
#[derive(Clone, Debug)]
pub struct PendingTrims {
    ranges: heapless::Vec<(u32, u32), MAX_PENDING_TRIMS>,
    /// `min(MAX_PENDING_TRIMS, journal_capacity(data_bytes))`.
    cap: usize,
}

impl PendingTrims {
    /// An empty list for pages of `data_bytes` bytes of data.
    pub(crate) const fn new(data_bytes: u32) -> Self {
        let fit = journal_capacity(data_bytes) as usize;
        let cap = if fit < MAX_PENDING_TRIMS { fit } else { MAX_PENDING_TRIMS };
        PendingTrims { ranges: heapless::Vec::new(), cap }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    pub(crate) fn is_full(&self) -> bool {
        self.ranges.len() >= self.cap
    }

    /// Adds a range, merging it into the last one when they touch. The caller makes room first
    /// (a range that does not fit is dropped).
    pub(crate) fn push(&mut self, lpn: u32, count: u32) {
        if let Some(last) = self.ranges.last_mut() {
            if last.0 as u64 + last.1 as u64 == lpn as u64 {
                last.1 += count;
                return;
            }
        }
        if !self.is_full() {
            // Cannot fail: `cap <= MAX_PENDING_TRIMS`.
            let _ = self.ranges.push((lpn, count));
        }
    }

    pub(crate) fn clear(&mut self) {
        self.ranges.clear();
    }

    pub(crate) fn overlaps(&self, lpn: u32, count: u32) -> bool {
        let end = lpn as u64 + count as u64;
        self.ranges.iter().any(|&(a, n)| (a as u64) < end && (lpn as u64) < a as u64 + n as u64)
    }

    /// Writes the count and the ranges into `out` (a page's data area, at least as large as the
    /// one the list was made for).
    /// Returns the count written: `len`, unless `out` is smaller than the page the list was
    /// made for (never, in the FTL).
    fn serialize(&self, out: &mut [u8]) -> u32 {
        out.fill(0);
        let n = self.ranges.len().min(journal_capacity(out.len() as u32) as usize);
        if n > 0 {
            out[0..4].copy_from_slice(&(n as u32).to_le_bytes());
        }
        for (i, (a, c)) in self.ranges[..n].iter().enumerate() {
            let o = 4 + 8 * i;
            out[o..o + 4].copy_from_slice(&a.to_le_bytes());
            out[o + 4..o + 8].copy_from_slice(&c.to_le_bytes());
        }
        n as u32
    }
}

/// The ranges of a journal page's data holding `count` entries (count already bounded).
pub(crate) fn journal_entries(data: &[u8], count: u32) -> impl Iterator<Item = (u32, u32)> + '_ {
    let w = |o: usize| u32::from_le_bytes([data[o], data[o + 1], data[o + 2], data[o + 3]]);
    (0..count as usize).map(move |i| (w(4 + 8 * i), w(8 + 8 * i)))
}

/// Most entries a journal page of `data_bytes` can hold.
pub(crate) const fn journal_capacity(data_bytes: u32) -> u32 {
    data_bytes.saturating_sub(4) / 8
}

impl<N: NandFlash, P: PolicySet, M: MappingTable> Ftl<'_, N, P, M> {
    /// Writes the pending trims as one journal page (on the GC stream, so it never triggers GC).
    pub(crate) fn write_journal(&mut self) -> Result<(), Error> {
        let d = self.geo.data_bytes as usize;
        let plane = self.ensure_gc_frontier(self.next_plane)?;
        if self.trims.is_empty() {
            // The checkpoint that ensure_frontier may have written made them durable already.
            return Ok(());
        }
        let count = self.trims.serialize(&mut self.buf[..d]);
        let page =
            self.append(plane, Stream::Gc, PageKind::Journal, count, 0, Source::Buffer { encode: true })?;
        self.blocks.set_flags(self.geo.block_of(page), FLAG_LIVE_JOURNAL, true);
        self.trims.clear();
        self.counters.journal_pages += 1;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_merge_and_serialize() {
        let mut t = PendingTrims::new(512);
        t.push(10, 5);
        t.push(15, 2);
        t.push(3, 1);
        assert_eq!(t.ranges.len(), 2);
        let mut page = [0xAAu8; 64];
        t.serialize(&mut page);
        let got: [(u32, u32); 2] = {
            let mut it = journal_entries(&page, 2);
            [it.next().unwrap(), it.next().unwrap()]
        };
        assert_eq!(got, [(10, 7), (3, 1)]);
        assert_eq!(u32::from_le_bytes([page[0], page[1], page[2], page[3]]), 2);
        assert!(journal_capacity(512) as usize >= MAX_PENDING_TRIMS);
    }

    /// Regression (audit F1): on pages too small for `MAX_PENDING_TRIMS` ranges the list fills at
    /// what one journal page holds, and serializing a full list fits the page.
    #[test]
    fn small_pages_hold_fewer_ranges() {
        for data_bytes in [64u32, 128, 256, 260, 512] {
            let mut t = PendingTrims::new(data_bytes);
            let mut pushed = 0;
            while !t.is_full() {
                t.push(pushed * 2, 1);
                pushed += 1;
            }
            let fit = (data_bytes as usize - 4) / 8;
            assert_eq!(pushed as usize, fit.min(MAX_PENDING_TRIMS), "{data_bytes}-byte pages");
            let mut page = [0xAAu8; 512];
            let page = &mut page[..data_bytes as usize];
            assert_eq!(t.serialize(page), pushed);
            assert!(journal_entries(page, pushed).eq((0..pushed).map(|i| (i * 2, 1))));
        }
    }
}
