//! Share records: the journal of deduplicated writes, which write no data page.
//!
//! When a logical page is mapped to content that is already on flash, the change is remembered
//! as a pending [`ShareRecord`] and made durable like a trim (see `crate::journal`): `flush`, a
//! full pending list, GC about to collect a block, a host write or trim of a logical page with a
//! pending record, or a checkpoint (which holds the whole map and so ends the records' life) write
//! the pending records as one journal page (`PageKind::Journal`, aux word [`SHARE_JOURNAL`]) in
//! the sequence space of data pages. Mount replays them in order with data pages, trims and the
//! relocation pages of shared content.
//!
//! A record names content by its physical page, never by a virtual number (those are RAM-only):
//! `(lpn, page, owner)` = "logical page `lpn` now references the content of physical page `page`;
//! `owner` is the logical page that mapped `page` directly when it became shared, or
//! [`NO_OWNER`]". Page data: `count: u32`, then `count` records of three `u32`s.

pub use crate::ext::claims::{SHARED_MOVE, SHARED_MOVE_LOST, SHARE_JOURNAL};
/// The owner of a record whose content was already shared.
pub const NO_OWNER: u32 = u32::MAX;
/// Bytes per record on flash.
pub const RECORD_BYTES: usize = 12;

/// One deduplicated write.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct ShareRecord {
    /// The logical page written.
    pub lpn: u32,
    /// The physical page holding its content.
    pub page: u32,
    /// The logical page that mapped `page` directly until now, or [`NO_OWNER`].
    pub owner: u32,
}

impl ShareRecord {
    /// A record as the caller's memory may start.
    pub const EMPTY: ShareRecord = ShareRecord { lpn: 0, page: 0, owner: 0 };
}

/// Records a journal page of `data_bytes` holds.
pub const fn page_capacity(data_bytes: u32) -> usize {
    (data_bytes as usize).saturating_sub(4) / RECORD_BYTES
}

/// Records not yet on flash, in caller memory.
pub struct PendingShares<'m> {
    records: &'m mut [ShareRecord],
    limit: usize,
    len: usize,
}

impl<'m> PendingShares<'m> {
    /// A list over `records`, holding at most `min(records.len(), page_capacity(data_bytes))`.
    pub fn new(records: &'m mut [ShareRecord], data_bytes: u32) -> Self {
        let limit = records.len().min(page_capacity(data_bytes));
        PendingShares { records, limit, len: 0 }
    }

    /// No records, no room.
    pub fn none() -> PendingShares<'static> {
        PendingShares { records: &mut [], limit: 0, len: 0 }
    }

    /// Pending records.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether none is pending.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether one more record does not fit.
    pub fn is_full(&self) -> bool {
        self.len >= self.limit
    }

    /// Most records held.
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// Appends a record (the caller makes room first); false if full.
    pub fn push(&mut self, r: ShareRecord) -> bool {
        if self.is_full() {
            return false;
        }
        self.records[self.len] = r;
        self.len += 1;
        true
    }

    /// Forgets every record.
    pub fn clear(&mut self) {
        self.len = 0;
    }

    /// Whether a record's logical page is in `lpn..lpn + count`.
    pub fn overlaps(&self, lpn: u32, count: u32) -> bool {
        let end = lpn as u64 + count as u64;
        self.records[..self.len].iter().any(|r| r.lpn >= lpn && (r.lpn as u64) < end)
    }

    /// Writes the records as journal page data into `out` (which is at least as long as the
    /// page capacity used at construction); returns the count.
    pub fn serialize(&self, out: &mut [u8]) -> u32 {
        out.fill(0);
        out[0..4].copy_from_slice(&(self.len as u32).to_le_bytes());
        for (i, r) in self.records[..self.len].iter().enumerate() {
            let o = 4 + RECORD_BYTES * i;
            out[o..o + 4].copy_from_slice(&r.lpn.to_le_bytes());
            out[o + 4..o + 8].copy_from_slice(&r.page.to_le_bytes());
            out[o + 8..o + 12].copy_from_slice(&r.owner.to_le_bytes());
        }
        self.len as u32
    }
}

/// The `k`-th record of journal page data (bounds checked by the caller against the count).
pub fn record_at(data: &[u8], k: usize) -> Option<ShareRecord> {
    let o = 4 + RECORD_BYTES * k;
    let b = data.get(o..o + RECORD_BYTES)?;
    let w = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
    Some(ShareRecord { lpn: w(0), page: w(4), owner: w(8) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_and_overlap() {
        let mut mem = [ShareRecord::EMPTY; 64];
        let mut p = PendingShares::new(&mut mem, 64);
        assert_eq!(p.limit(), 5);
        for i in 0..5 {
            assert!(p.push(ShareRecord {
                lpn: 10 + i,
                page: 100 + i,
                owner: if i == 0 { 7 } else { NO_OWNER }
            }));
        }
        assert!(p.is_full() && !p.push(ShareRecord::EMPTY));
        assert!(p.overlaps(14, 1) && p.overlaps(0, 11) && !p.overlaps(15, 100) && !p.overlaps(0, 10));
        let mut page = [0xAAu8; 64];
        assert_eq!(p.serialize(&mut page), 5);
        assert_eq!(record_at(&page, 0), Some(ShareRecord { lpn: 10, page: 100, owner: 7 }));
        assert_eq!(record_at(&page, 4), Some(ShareRecord { lpn: 14, page: 104, owner: NO_OWNER }));
        assert_eq!(record_at(&page, 5), None);
    }
}
