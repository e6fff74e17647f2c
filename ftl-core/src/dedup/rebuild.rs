//! Refilling the content index after a mount (issue #21). The index is RAM only and starts
//! empty at every mount; [`Ftl::dedup_rebuild_index`] walks the device in physical page order,
//! reads every live data page (a unique page its logical page maps to, or a shared page), checks
//! it with the page codec and inserts its fingerprint at its location (the physical page, or the
//! virtual page of shared content). Work is bounded per call (`budget` pages visited), so a
//! caller spreads it over idle time or runs it to the end right after mount; the cursor restarts
//! at every mount. Pages written since the mount are indexed by the write path already; a page
//! the walk reaches after it moved is found at its new place or skipped, never inserted at a
//! location that does not hold it (the checks below run at the moment of insertion).
//!
//! Cost: one spare read per valid page that is not shared, one page read and one fingerprint
//! (SHA-1) per live content; no program, no erase. RAM: one `u32` cursor.

use nand_hal::{NandFlash, PageId};

use super::vmap::VIRTUAL_FLAG;
use crate::map::MappingTable;
use crate::meta::META_LEN;
use crate::policy::{PageCodec, PolicySet};
use crate::{Error, Ftl};

/// How far a rebuild got.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct RebuildProgress {
    /// Physical pages visited by this call.
    pub visited: u32,
    /// Contents inserted by this call.
    pub inserted: u32,
    /// Whether the walk reached the end of the device (nothing left to do until the next mount).
    pub done: bool,
}

impl<N: NandFlash, P: PolicySet, M: MappingTable> Ftl<'_, N, P, M> {
    /// Visits up to `budget` physical pages from where the last call stopped, inserting the
    /// fingerprint of every live content among them (see the module documentation). Without
    /// deduplication attached, reports done at once.
    pub fn dedup_rebuild_index(&mut self, budget: u32) -> Result<RebuildProgress, Error> {
        let mut progress = RebuildProgress::default();
        let total = self.geo.total_pages();
        if !self.dedup_on() || self.valid.is_empty() {
            progress.done = true;
            return Ok(progress);
        }
        let d = self.geo.data_bytes as usize;
        let spare_len = META_LEN + self.codec_len;
        while progress.visited < budget && self.ext.dedup.rebuild_next < total {
            let p = PageId(self.ext.dedup.rebuild_next);
            self.ext.dedup.rebuild_next += 1;
            progress.visited += 1;
            if !self.is_valid_page(p) {
                continue;
            }
            let shared = self.ext.dedup.vmap.find(p.0);
            // A unique page counts only if its logical page maps to it.
            if shared.is_none() && self.direct_owner(p)?.is_none() {
                continue;
            }
            self.counters.nand_reads += 1;
            {
                let (data, spare) = self.buf.split_at_mut(d);
                self.nand.read_page(p, data, &mut spare[..spare_len])?;
                if self.policies.codec().decode(data, &spare[META_LEN..spare_len]).is_err() {
                    continue;
                }
            }
            // Second writes store first writes scrambled.
            if self.reuse_unscramble_buf().is_none() {
                continue;
            }
            let location = shared.map_or(p.0, |v| v | VIRTUAL_FLAG);
            if let Some(ix) = self.ext.dedup.index.as_deref_mut() {
                let key = ix.fingerprint(&self.buf[..d]);
                ix.insert(&key, location);
                progress.inserted += 1;
            }
        }
        self.ext.dedup.stats.rebuilt += progress.inserted as u64;
        progress.done = self.ext.dedup.rebuild_next >= total;
        Ok(progress)
    }
}
