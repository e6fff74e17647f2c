//! [`Scrubber`]: FlexECC's idle-time scrubber (`no_std`, fixed memory).
//!
//! In an idle gap between requests (the caller measures it):
//! 1. when the gap exceeds `T_disk`, it **prefetches** up to `floor(gap / T_disk)` queued corrupt
//!    pages from the backing store and rewrites them clean (after checking they are still
//!    corrupt: a host write may have replaced them meanwhile);
//! 2. when the gap exceeds `m x T_crc` (m = 10 by default), it **verifies** pages in the flash
//!    time the prefetches left: detecting (CRC) pages from a round-robin cursor, and with
//!    [`ScrubConfig::scan_correcting`] every mapped page; at most `max_verify` pages and one pass
//!    over the pages per gap. A detecting page that fails its CRC is queued as corrupt; a
//!    correcting page whose corrected-bit count reaches the FTL's refresh threshold is refreshed
//!    (moved and re-encoded) before it becomes uncorrectable.
//!
//! These are the paper's rules (FlexECC, section 3.4); the paper leaves open how much work fits in
//! a gap: here each verification counts `t_verify` (a flash page read plus the CRC) and each
//! rewrite `t_verify + t_write`, and the work stops when the gap's flash time is used. The queue
//! holds `Q` pages; when it is full, verification pauses until prefetching drains it. The
//! scrubber's own flash and disk time is the caller's to account (the simulator places it on the
//! device's clock, so work that overruns a gap delays the next request). Memory:
//! `size_of::<Scrubber<Q>>()`, the queue's `4 * Q` bytes (a `heapless::Deque`) plus about 120 of
//! settings, cursor and counters (4 * Q + 128 on a 64-bit host).

use ftl_core::intent::{BackingStore, Intent, PageRead};
use ftl_core::map::MappingTable;
use ftl_core::policy::{PageFormat, PolicySet};
use ftl_core::{Error, Ftl};
use nand_hal::NandFlash;

/// Scrubber settings (the paper's defaults).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct ScrubConfig {
    /// The multiple m of `T_crc` a gap must exceed before pages are verified (10).
    pub m: u64,
    /// Time of one CRC check, ns (the paper: the CRC encoding latency; 10 us / 6 = 1667 ns for
    /// its t = 6 hardware BCH).
    pub t_crc_ns: u64,
    /// Time of one backing-store access, ns (1.5 ms).
    pub t_disk_ns: u64,
    /// Time of one verification (flash page read + CRC), ns, to size the work to the gap.
    pub t_verify_ns: u64,
    /// Time of one page write (transfer + program), ns, to size the work to the gap.
    pub t_write_ns: u64,
    /// Most pages verified in one gap.
    pub max_verify: u32,
    /// Verify correcting pages too (for refreshing), not only detecting ones.
    pub scan_correcting: bool,
}

impl Default for ScrubConfig {
    fn default() -> Self {
        ScrubConfig {
            m: 10,
            t_crc_ns: 1_667,
            t_disk_ns: 1_500_000,
            t_verify_ns: 50_000,
            t_write_ns: 300_000,
            max_verify: 64,
            scan_correcting: false,
        }
    }
}

/// What one idle gap's scrubbing did.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct IdleWork {
    /// Pages verified.
    pub verified: u32,
    /// Detecting pages found corrupt (queued).
    pub corrupt_found: u32,
    /// Correcting pages refreshed.
    pub refreshed: u32,
    /// Corrupt pages fetched from the backing store and rewritten clean.
    pub prefetched: u32,
}

/// Totals over the scrubber's life.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct ScrubStats {
    /// Gaps long enough to verify.
    pub verify_gaps: u64,
    /// Gaps long enough to prefetch.
    pub prefetch_gaps: u64,
    /// Pages verified.
    pub verified: u64,
    /// Detecting pages found corrupt.
    pub corrupt_found: u64,
    /// Correcting pages refreshed.
    pub refreshed: u64,
    /// Pages prefetched.
    pub prefetched: u64,
}

/// The idle-time scrubber with a queue of `Q` corrupt pages.
#[derive(Clone, Debug)]
pub struct Scrubber<const Q: usize> {
    cfg: ScrubConfig,
    cursor: u32,
    /// The corrupt pages waiting for a prefetch, oldest first.
    queue: heapless::Deque<u32, Q>,
    stats: ScrubStats,
}

impl<const Q: usize> Scrubber<Q> {
    /// A scrubber with an empty queue, its cursor at logical page 0.
    pub const fn new(cfg: ScrubConfig) -> Self {
        Scrubber {
            cfg,
            cursor: 0,
            queue: heapless::Deque::new(),
            stats: ScrubStats {
                verify_gaps: 0,
                prefetch_gaps: 0,
                verified: 0,
                corrupt_found: 0,
                refreshed: 0,
                prefetched: 0,
            },
        }
    }

    /// The settings.
    pub fn config(&self) -> &ScrubConfig {
        &self.cfg
    }

    /// Totals so far.
    pub fn stats(&self) -> &ScrubStats {
        &self.stats
    }

    /// Corrupt pages waiting for a prefetch.
    pub fn queued(&self) -> usize {
        self.queue.len()
    }

    /// Queues `lpn`; false if it was queued already or the queue is full.
    fn push(&mut self, lpn: u32) -> bool {
        !self.queue.iter().any(|&l| l == lpn) && self.queue.push_back(lpn).is_ok()
    }

    fn pop(&mut self) -> Option<u32> {
        self.queue.pop_front()
    }

    /// The next logical page to verify, advancing the cursor.
    fn next_page<N: NandFlash, P: PolicySet, M: MappingTable>(
        &mut self,
        ftl: &Ftl<'_, N, P, M>,
    ) -> Option<u32> {
        let n = ftl.capacity_pages();
        if n == 0 {
            return None;
        }
        let l = if self.cfg.scan_correcting { self.cursor % n } else { ftl.next_detecting(self.cursor)? };
        self.cursor = (l + 1) % n;
        Some(l)
    }

    /// Uses an idle gap of `gap_ns` (see the module documentation). `buf` is one page of scratch.
    pub fn idle<N: NandFlash, P: PolicySet, M: MappingTable, B: BackingStore>(
        &mut self,
        ftl: &mut Ftl<'_, N, P, M>,
        gap_ns: u64,
        store: &mut B,
        buf: &mut [u8],
    ) -> Result<IdleWork, Error> {
        let mut w = IdleWork::default();
        // Flash time the gap's work takes, to keep it within the gap.
        let mut used = 0u64;
        let t_move = self.cfg.t_verify_ns.saturating_add(self.cfg.t_write_ns);
        if gap_ns > self.cfg.t_disk_ns && !self.queue.is_empty() {
            self.stats.prefetch_gaps += 1;
            let k = gap_ns / self.cfg.t_disk_ns.max(1);
            for _ in 0..k {
                let Some(lpn) = self.pop() else { break };
                used = used.saturating_add(self.cfg.t_verify_ns);
                if ftl.verify(lpn)? != (PageRead::Corrupt { format: Some(PageFormat::Detecting) }) {
                    continue;
                }
                if store.fetch(lpn, buf).is_err() {
                    continue;
                }
                ftl.write_with(lpn, buf, Intent::Clean)?;
                used = used.saturating_add(self.cfg.t_write_ns);
                w.prefetched += 1;
            }
        }
        if gap_ns > self.cfg.m.saturating_mul(self.cfg.t_crc_ns) && gap_ns > used {
            self.stats.verify_gaps += 1;
            let mut left = gap_ns - used;
            let budget = (left / self.cfg.t_verify_ns.max(1)).min(self.cfg.max_verify as u64) as u32;
            // Unmapped pages cost no flash time; bound the walk over them too.
            let mut steps = budget.saturating_mul(4).max(budget);
            let mut first = None;
            while w.verified < budget && steps > 0 && !self.queue.is_full() && left >= self.cfg.t_verify_ns {
                steps -= 1;
                let Some(lpn) = self.next_page(ftl) else { break };
                // At most one pass over the pages per gap.
                match first {
                    None => first = Some(lpn),
                    Some(f) if f == lpn => {
                        self.cursor = lpn;
                        break;
                    }
                    Some(_) => {}
                }
                let r = ftl.verify(lpn)?;
                if r == PageRead::Unmapped {
                    continue;
                }
                w.verified += 1;
                left = left.saturating_sub(self.cfg.t_verify_ns);
                match r {
                    PageRead::Corrupt { format: Some(PageFormat::Detecting) } if self.push(lpn) => {
                        w.corrupt_found += 1;
                    }
                    PageRead::Good { format: Some(PageFormat::Correcting), corrected }
                        if ftl.needs_refresh(corrected) =>
                    {
                        ftl.refresh(lpn)?;
                        left = left.saturating_sub(t_move);
                        w.refreshed += 1;
                    }
                    _ => {}
                }
            }
        }
        self.stats.verified += w.verified as u64;
        self.stats.corrupt_found += w.corrupt_found as u64;
        self.stats.refreshed += w.refreshed as u64;
        self.stats.prefetched += w.prefetched as u64;
        Ok(w)
    }
}
