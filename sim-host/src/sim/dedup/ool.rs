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
//! * **Sort runs on flash.** A run that fills the sort memory goes to flash as
//!   `ceil(records x 24 B / page)` pages (each record a 20-byte SHA-1 and a 4-byte little-endian
//!   logical page, packed from the page's start, the rest zero); the merge reads a run's pages
//!   back one by one as it reaches them; the last run is merged from memory. Two ways:
//!   - *Model* (default, `ool`): the records stay in host memory; the pages are only counted
//!     (`run_pages_written`, `run_pages_read`) and their time charged on the pass's clock, one
//!     program (transfer + tPROG) or read (tR + transfer) per page, planes in parallel (page
//!     time / planes). No erases, no GC, nothing in the NAND counters.
//!   - *Real* (`oolflash`, [`OolPass::on_flash`]): the pages are written with `Ftl::write` to a
//!     scratch range of logical pages just above the host's (`host_pages..`), with inline
//!     deduplication off for those writes (run pages are never shared nor indexed), and the
//!     merge decodes the records it uses from `Ftl::read` of each page (the in-memory copy is
//!     dropped once written). Their time is the emulator's (the pass's `done_at`/`start_at`),
//!     and they count in the run's programs, reads, GC and erasures. At the end of the pass the
//!     scratch range is trimmed. The scratch range is [`scratch_pages`] long (the worst case:
//!     every host page live and unshared, each run ending in a partial page); the simulator
//!     formats the FTL with `host + scratch` logical pages and keeps the host's address space
//!     at `host` (`sim::ftl_config`, the pipeline's page mapping), so the host never touches it.

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

/// Records of one sort-run page of `page_bytes`.
pub fn records_per_page(page_bytes: usize) -> usize {
    (page_bytes / RUN_RECORD_BYTES).max(1)
}

/// Scratch logical pages a pass with runs on flash may need on a device whose host uses
/// `host_pages` of `page_bytes`, sorting `memory` records at once: every host page scanned
/// (`ceil(host_pages / records per page)` full pages) plus one partial page per run.
pub fn scratch_pages(host_pages: u32, page_bytes: u32, memory: usize) -> u32 {
    let n = host_pages as usize;
    let memory = memory.max(2);
    (n.div_ceil(records_per_page(page_bytes as usize)) + n.div_ceil(memory)) as u32
}

/// Packs `records` into `page` (24 bytes each from the start, the rest zero).
fn encode(records: &[Record], page: &mut [u8]) {
    page.fill(0);
    for ((f, l), out) in records.iter().zip(page.chunks_exact_mut(RUN_RECORD_BYTES)) {
        out[..20].copy_from_slice(f);
        out[20..].copy_from_slice(&l.to_le_bytes());
    }
}

/// The first `n` records packed in `page`.
fn decode(page: &[u8], n: usize, out: &mut Vec<Record>) {
    out.clear();
    out.extend(page.chunks_exact(RUN_RECORD_BYTES).take(n).map(|c| {
        let mut f = [0u8; 20];
        f.copy_from_slice(&c[..20]);
        (f, u32::from_le_bytes([c[20], c[21], c[22], c[23]]))
    }));
}

/// One sorted run.
#[derive(Debug)]
enum Run {
    /// In host memory: the last run, or (`spilled`) a run of the model charged as on flash.
    Memory { records: Vec<Record>, spilled: bool },
    /// On flash: `len` records from logical page `start`; `page` holds the decoded records of
    /// its page `loaded` (the one the merge is in).
    Flash { start: u32, len: usize, loaded: Option<usize>, page: Vec<Record> },
}

/// An out-of-line pass in progress (see the module doc).
#[derive(Debug, Default)]
pub struct OolPass {
    memory: usize,
    next_lpn: u32,
    merging: bool,
    seen: HashSet<u32>,
    run: Vec<Record>,
    runs: Vec<Run>,
    /// Runs on flash: the host's logical pages (the scratch range starts there).
    flash: Option<u32>,
    /// The next scratch page to write.
    next_scratch: u32,
    /// Records of the full run in memory already written to flash.
    spilled: usize,
    /// Runs whose first record is in the merge heap.
    primed: usize,
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

    /// Sort runs really on flash: the host uses logical pages `0..host_pages`, the pass writes
    /// its runs from `host_pages` on (the FTL must have [`scratch_pages`] more; module doc).
    pub fn on_flash(mut self, host_pages: u32) -> Self {
        self.flash = Some(host_pages);
        self.next_scratch = host_pages;
        self
    }

    /// Whether the pass is merging (its scan and runs are done).
    pub fn merging(&self) -> bool {
        self.merging
    }

    /// Whether the pass must stop before its next unit of work (`done_at`: when the device
    /// finishes the pass's last operation).
    fn out_of_time(&mut self, budget: Option<Budget>, done_at: u64) -> bool {
        self.clock = self.clock.max(done_at);
        budget.is_some_and(|b| self.clock >= b.deadline)
    }

    /// Writes the next page of the full run to the scratch range (inline deduplication off).
    fn spill_page<N: NandFlash, P: PolicySet, M: MappingTable>(
        &mut self,
        ftl: &mut Ftl<'_, N, P, M>,
        per_page: usize,
        page: &mut [u8],
    ) -> Result<(), String> {
        if self.spilled == 0 {
            self.run.sort_unstable();
        }
        let lpn = self.next_scratch;
        if lpn >= ftl.capacity_pages() {
            return Err(format!("out-of-line scratch range full at logical page {lpn}"));
        }
        let end = (self.spilled + per_page).min(self.run.len());
        encode(&self.run[self.spilled..end], page);
        let inline = ftl.dedup_settings().inline;
        ftl.set_inline_dedup(false);
        let r = ftl.write(lpn, page);
        ftl.set_inline_dedup(inline);
        r.map_err(|e| format!("out-of-line run page {lpn}: {e}"))?;
        self.next_scratch += 1;
        self.rep.run_pages_written += 1;
        self.spilled = end;
        if end == self.run.len() {
            let len = self.run.len();
            let start = lpn + 1 - len.div_ceil(per_page) as u32;
            self.runs.push(Run::Flash { start, len, loaded: None, page: Vec::new() });
            self.run.clear();
            self.spilled = 0;
        }
        Ok(())
    }

    /// Record `i` of run `r` (None past its end); a run on flash reads the page holding it.
    fn record<N: NandFlash, P: PolicySet, M: MappingTable>(
        &mut self,
        ftl: &mut Ftl<'_, N, P, M>,
        r: usize,
        i: usize,
        per_page: usize,
        buf: &mut [u8],
    ) -> Result<Option<Record>, String> {
        match &mut self.runs[r] {
            Run::Memory { records, .. } => Ok(records.get(i).copied()),
            Run::Flash { start, len, loaded, page } => {
                if i >= *len {
                    return Ok(None);
                }
                let p = i / per_page;
                if *loaded != Some(p) {
                    let lpn = *start + p as u32;
                    ftl.read(lpn, buf).map_err(|e| format!("out-of-line run page {lpn}: {e}"))?;
                    decode(buf, (*len - p * per_page).min(per_page), page);
                    *loaded = Some(p);
                    self.rep.run_pages_read += 1;
                }
                Ok(page.get(i % per_page).copied())
            }
        }
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
        let per_page = records_per_page(pb);
        let scan_end = self.flash.unwrap_or(ftl.capacity_pages());
        let mut page = vec![0u8; pb];
        while !self.merging {
            if self.out_of_time(budget, done_at(ftl)) {
                return Ok(false);
            }
            if self.run.len() == self.memory {
                // Sort memory full: the run goes to flash.
                if self.flash.is_some() {
                    self.spill_page(ftl, per_page, &mut page)?;
                    continue;
                }
                self.run.sort_unstable();
                let pages = self.run.len().div_ceil(per_page) as u64;
                self.rep.run_pages_written += pages;
                if let Some(b) = budget {
                    self.clock += pages * b.write_page_ns;
                    start_at(ftl, self.clock);
                }
                self.runs.push(Run::Memory { records: std::mem::take(&mut self.run), spilled: true });
                continue;
            }
            let l = self.next_lpn;
            if l >= scan_end {
                if !self.run.is_empty() {
                    self.run.sort_unstable();
                    self.runs.push(Run::Memory { records: std::mem::take(&mut self.run), spilled: false });
                }
                self.rep.runs = self.runs.len() as u64;
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
            if self.primed < self.runs.len() {
                // Each run's first record enters the merge (a run on flash: its first page read).
                let r = self.primed;
                if let Some((f, l)) = self.record(ftl, r, 0, per_page, &mut page)? {
                    self.heap.push(std::cmp::Reverse((f, l, r, 0)));
                }
                self.primed += 1;
                continue;
            }
            let Some(std::cmp::Reverse((f, l, r, i))) = self.heap.pop() else { break };
            if matches!(self.runs[r], Run::Memory { spilled: true, .. }) && i % per_page == 0 {
                // The merge reaches the next page of a run on flash (model).
                self.rep.run_pages_read += 1;
                if let Some(b) = budget {
                    self.clock += b.read_page_ns;
                    start_at(ftl, self.clock);
                }
            }
            if let Some((nf, nl)) = self.record(ftl, r, i + 1, per_page, &mut page)? {
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
        if let Some(start) = self.flash {
            let used = self.next_scratch - start;
            ftl.trim(start, used).map_err(|e| format!("trim of the out-of-line scratch range: {e}"))?;
            self.next_scratch = start;
        }
        ftl.flush().map_err(|e| format!("flush after out-of-line deduplication: {e}"))?;
        self.rep.live_after = ftl.live_physical_pages();
        Ok(true)
    }
}

/// A whole out-of-line pass with no deadline (after the run); `flash`: runs on flash above that
/// many host pages ([`OolPass::on_flash`]), else the model.
pub fn out_of_line<N: NandFlash, P: PolicySet, M: MappingTable>(
    ftl: &mut Ftl<'_, N, P, M>,
    memory: usize,
    flash: Option<u32>,
) -> Result<OolReport, String> {
    let mut pass = OolPass::new(memory, ftl.live_physical_pages());
    if let Some(host) = flash {
        pass = pass.on_flash(host);
    }
    pass.advance(ftl, None, &|_| 0, &mut |_, _| {})?;
    Ok(pass.rep)
}
