//! Out-of-line deduplication passes (CAFTL's idle-time deduplication): what a pass owns is its
//! progress (scan cursor, sorted runs, merge state) and its report; it guarantees that no two
//! different contents are merged (every merge goes through `Ftl::coalesce`, which reads and
//! compares the pages) and that a pass given a deadline starts no unit of work at or after it.
//!
//! A pass fingerprints one logical page per live physical page (a shared page stands for all its
//! logical pages), sorts the (fingerprint, logical page) records in runs of `memory` records and
//! merges the runs (the paper's external merge sort), coalescing each group of equal
//! fingerprints.
//!
//! * **Aborted at a request's arrival, resumable.** In an idle gap a pass works until the next
//!   request arrives: before each unit of work (a page read and hashed, a run written, a merge
//!   step) it checks its clock against the arrival and stops there, keeping its progress; the
//!   next idle gap resumes it where it stopped (the end of the run completes it). A request
//!   waits at most for the one unit in flight when it arrives. Pages written between two gaps
//!   are not rescanned by the pass in progress (the next pass finds them); records of pages
//!   rewritten meanwhile are harmless, since `coalesce` compares the current contents.
//! * **Sort runs on flash: an explicit model of the paper's run I/O.** A run that fills the sort
//!   memory is written to flash as `ceil(records x 24 B / page)` pages (20-byte SHA-1 and 4-byte
//!   logical page) and read back page by page as the merge reaches it; the last run is merged from
//!   memory. The run pages are counted (`run_pages_written`, `run_pages_read`) and their time is
//!   charged on the pass's clock, one program (transfer + tPROG) or read (tR + transfer) per page
//!   with the device's planes working in parallel (page time / planes). They are not placed on the
//!   emulator's planes or in the FTL's blocks (the simulator keeps the records in host memory),
//!   so they cost no erases or GC and do not appear in the run's NAND counters.

use std::collections::{BinaryHeap, HashSet};

use ftl_core::map::MappingTable;
use ftl_core::policy::PolicySet;
use ftl_core::Ftl;
use nand_hal::NandFlash;

/// Bytes of one sort-run record: a SHA-1 fingerprint and a logical page number.
pub const RUN_RECORD_BYTES: usize = 24;

/// What out-of-line deduplication did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OolReport {
    /// Passes completed (idle gaps and the end of the run).
    pub passes: u64,
    /// Times a pass stopped at a request's arrival (it resumed in a later gap).
    pub aborts: u64,
    /// Logical pages read and fingerprinted.
    pub pages_scanned: u64,
    /// Sorted runs.
    pub runs: u64,
    /// Sort-run pages written to flash (model, see the module doc).
    pub run_pages_written: u64,
    /// Sort-run pages read back by the merge (model).
    pub run_pages_read: u64,
    /// Groups of two or more equal fingerprints.
    pub duplicate_groups: u64,
    /// Logical pages coalesced.
    pub coalesced: u64,
    /// Coalesces refused after comparing the pages.
    pub refused: u64,
    /// Live physical pages before.
    pub live_before: u64,
    /// Live physical pages after.
    pub live_after: u64,
}

/// The time a pass may use: it starts no unit of work once its clock reaches `deadline`.
#[derive(Copy, Clone, Debug)]
pub struct Budget {
    /// The next request's arrival (ns).
    pub deadline: u64,
    /// One run page written, ns of the pass's clock (planes in parallel).
    pub write_page_ns: u64,
    /// One run page read, ns.
    pub read_page_ns: u64,
}

/// When the device finishes the operations issued so far (ns).
pub type DoneAt<N, P, M> = dyn for<'f> Fn(&Ftl<'f, N, P, M>) -> u64;
/// Moves the device's "now" (ns) and starts a new window of work there.
pub type StartAt<N, P, M> = dyn for<'f> FnMut(&mut Ftl<'f, N, P, M>, u64);

type Record = ([u8; 20], u32);
/// (fingerprint, logical page, run, index in the run), smallest first.
type Head = std::cmp::Reverse<([u8; 20], u32, usize, usize)>;

/// An out-of-line pass in progress (see the module doc).
#[derive(Debug, Default)]
pub struct OolPass {
    memory: usize,
    next_lpn: u32,
    merging: bool,
    seen: HashSet<u32>,
    run: Vec<Record>,
    /// Sorted runs and whether each was written to flash.
    runs: Vec<(Vec<Record>, bool)>,
    heap: BinaryHeap<Head>,
    group: Option<([u8; 20], u32, bool)>,
    /// The pass's own report (no `passes` or `aborts`: the caller counts those).
    pub rep: OolReport,
    /// The pass's clock (ns): the end of its latest work.
    pub clock: u64,
}

impl OolPass {
    /// A pass sorting `memory` records at once, on a device with `live` live physical pages.
    pub fn new(memory: usize, live: u64) -> Self {
        OolPass {
            memory: memory.max(2),
            rep: OolReport { live_before: live, ..OolReport::default() },
            ..OolPass::default()
        }
    }

    fn records_per_page(pb: usize) -> usize {
        (pb / RUN_RECORD_BYTES).max(1)
    }

    /// Whether the pass must stop before its next unit of work (`done_at`: when the device
    /// finishes the pass's last operation).
    fn out_of_time(&mut self, budget: Option<Budget>, done_at: u64) -> bool {
        self.clock = self.clock.max(done_at);
        budget.is_some_and(|b| self.clock >= b.deadline)
    }

    /// Works on the pass until it is complete (true) or `budget`'s deadline (false). `done_at`
    /// gives when the device finishes the operations issued so far (the pass's FTL reads and
    /// coalesces); `start_at` moves the device's "now" to the pass's clock after run I/O.
    pub fn advance<N: NandFlash, P: PolicySet, M: MappingTable>(
        &mut self,
        ftl: &mut Ftl<'_, N, P, M>,
        budget: Option<Budget>,
        done_at: &DoneAt<N, P, M>,
        start_at: &mut StartAt<N, P, M>,
    ) -> Result<bool, String> {
        let pb = ftl.page_bytes() as usize;
        let per_page = Self::records_per_page(pb);
        let mut page = vec![0u8; pb];
        while !self.merging {
            if self.out_of_time(budget, done_at(ftl)) {
                return Ok(false);
            }
            if self.run.len() == self.memory {
                // Sort memory full: the run goes to flash.
                self.run.sort_unstable();
                let pages = self.run.len().div_ceil(per_page) as u64;
                self.rep.run_pages_written += pages;
                if let Some(b) = budget {
                    self.clock += pages * b.write_page_ns;
                    start_at(ftl, self.clock);
                }
                self.runs.push((std::mem::take(&mut self.run), true));
                continue;
            }
            let l = self.next_lpn;
            if l >= ftl.capacity_pages() {
                if !self.run.is_empty() {
                    self.run.sort_unstable();
                    self.runs.push((std::mem::take(&mut self.run), false));
                }
                self.rep.runs = self.runs.len() as u64;
                for (r, (v, _)) in self.runs.iter().enumerate() {
                    if let Some(&(f, l)) = v.first() {
                        self.heap.push(std::cmp::Reverse((f, l, r, 0)));
                    }
                }
                self.merging = true;
                break;
            }
            self.next_lpn += 1;
            // One record per physical page: a shared page stands for all its logical pages.
            match ftl.physical_page_of(l) {
                Some(p) if self.seen.insert(p) => {}
                _ => continue,
            }
            ftl.read(l, &mut page).map_err(|e| format!("out-of-line read of page {l}: {e}"))?;
            self.run.push((ftl_policies::dedup::sha1_page(&page).0, l));
            self.rep.pages_scanned += 1;
        }
        loop {
            if self.out_of_time(budget, done_at(ftl)) {
                return Ok(false);
            }
            let Some(std::cmp::Reverse((f, l, r, i))) = self.heap.pop() else { break };
            let (run, spilled) = &self.runs[r];
            if *spilled && i % per_page == 0 {
                // The merge reaches the next page of a run on flash.
                self.rep.run_pages_read += 1;
                if let Some(b) = budget {
                    self.clock += b.read_page_ns;
                    start_at(ftl, self.clock);
                }
            }
            if let Some(&(nf, nl)) = run.get(i + 1) {
                self.heap.push(std::cmp::Reverse((nf, nl, r, i + 1)));
            }
            match self.group {
                Some((gf, keep, counted)) if gf == f => {
                    if !counted {
                        self.rep.duplicate_groups += 1;
                        self.group = Some((gf, keep, true));
                    }
                    if ftl.coalesce(keep, l, &mut page).map_err(|e| format!("coalesce({keep}, {l}): {e}"))? {
                        self.rep.coalesced += 1;
                    } else {
                        self.rep.refused += 1;
                    }
                }
                _ => self.group = Some((f, l, false)),
            }
        }
        ftl.flush().map_err(|e| format!("flush after out-of-line deduplication: {e}"))?;
        self.rep.live_after = ftl.live_physical_pages();
        Ok(true)
    }
}

/// A whole out-of-line pass with no deadline (after the run).
pub fn out_of_line<N: NandFlash, P: PolicySet, M: MappingTable>(
    ftl: &mut Ftl<'_, N, P, M>,
    memory: usize,
) -> Result<OolReport, String> {
    let mut pass = OolPass::new(memory, ftl.live_physical_pages());
    pass.advance(ftl, None, &|_| 0, &mut |_, _| {})?;
    Ok(pass.rep)
}
