//! Deduplication (CAFTL) in the simulator: the options of `--features dedup[:OPT...]`, page
//! contents from the trace's fingerprints, the reference rates, the hashing-time model, the
//! dynamic switch, out-of-line deduplication, and the report object.
//!
//! * Contents: a written page's data is its content fingerprint (the FIU trace's per-4 KiB MD5
//!   prefix, a synthetic workload's per-page content) repeated over the page, so equal
//!   fingerprints give equal pages and the FTL hashes real data. Requests without content get
//!   unique contents.
//! * Rates: n = host pages written, m = pages the host writes put on flash; dedup rate
//!   (n - m) / n (the paper's). References: *offline* = (n - distinct contents of the whole run)
//!   / n (the paper's "offline" optimum); *live oracle* = the pages whose content was live
//!   (mapped by some logical page) when written, which is what an unbounded index without
//!   sampling could find inline (content that died and comes back is not on flash anymore).
//! * Hashing time: the paper's cycle counts (CRC-32 4,120, SHA-1 47,548 cycles per 4 KiB) at
//!   `mhz` (934 by default, the paper's), added to the response time of the write that hashed.
//! * Dynamic switch (`switch`): the write buffer is the device's outstanding writes, in pages
//!   (`buffer=PAGES`, default 4096 = 16 MB of 4 KiB pages, the paper's); when it reaches 95% of
//!   the buffer inline deduplication is turned off, at 50% on again.
//! * Out-of-line (`ool`): after the run (the idle time of the paper), one logical page per live
//!   physical page is read and fingerprinted, the (fingerprint, page) records are sorted in runs of
//!   `oolmem=RECORDS` (default 65536) and merged (the paper's external merge sort), and each group of equal fingerprints is
//!   coalesced through `Ftl::coalesce`, which reads and compares the pages before merging them
//!   ([`ool`]: runs that fill the sort memory are charged as flash pages written and read back).
//!   With `oolflash` (implies `ool`) those runs are really written through the FTL to a scratch
//!   range above the host's logical pages, read back by the merge and trimmed after the pass
//!   ([`ool`]'s module doc; the FTL gets [`ool::scratch_pages`] more logical pages, the host's
//!   space is unchanged). Run pages are not host pages: the report's host writes and
//!   `unprobed_pages` leave them out; their programs, GC and erases count as the device's.
//!
//!   With `idle=MS` a pass also runs in every idle gap of at least MS ms of an open-loop trace
//!   (from the device's last completion) once pages were written without a probe; it stops when
//!   the next request arrives and resumes in the next such gap ([`ool`]).
//!
//! * Idle-time reorganisation (`reorg=sorted|hotness`): after every idle gap of at least
//!   `reorgidle=MS` (default 100) that followed writes, the fingerprint store is reorganised
//!   ([`TimedIndex`]); the report's `fingerprint_store` gives lookups, comparisons and the
//!   reorganisations run.
//! * With the write buffer model (`--write-buffer-mib`, [`super::write_buffer`]) hashing is on
//!   the emulator's clock page by page ([`TimedIndex`]) instead of added to the completion.
//!
//! Options: `nosample` | `sample=PAGES` (default 32), `noprehash`, `compare` (full compare),
//! `store=ENTRIES` (fingerprint store budget, default: the logical pages), `segments=N`,
//! `switch`, `buffer=PAGES`, `mhz=MHZ`, `ool`, `oolflash`, `oolmem=RECORDS`, `idle=MS`,
//! `reorg=sorted|hotness`, `reorgidle=MS`.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use ftl_core::dedup::{ContentIndex, ContentKey, ContentProbe, DedupSettings, DedupStats};
use ftl_core::map::MappingTable;
use ftl_core::policy::PolicySet;
use ftl_core::Ftl;
use nand_hal::NandFlash;

use crate::dedup_memory::DedupSizes;

pub mod ool;
use ftl_policies::dedup::{CaftlIndex, Layout, StoreStats};
pub use ool::{out_of_line, scratch_pages, Budget, OolPass, OolReport};

/// CRC-32 of a 4 KiB page, cycles (the paper's Table 2).
pub const CRC_CYCLES: u64 = 4_120;
/// SHA-1 of a 4 KiB page, cycles (the paper's Table 2).
pub const SHA1_CYCLES: u64 = 47_548;
/// Entries per fingerprint-store bucket (a 4 KiB bucket, as in the paper).
pub const BUCKET_ENTRIES: usize = ftl_policies::dedup::ENTRIES_4K;

/// Hashing time in ns of `crcs` CRC-32s and `sha1s` SHA-1s of `page_bytes` pages at `mhz` (the
/// paper's cycles per 4 KiB, scaled to the page size).
pub fn hash_ns(crcs: u64, sha1s: u64, mhz: u64, page_bytes: u64) -> u64 {
    (crcs * CRC_CYCLES + sha1s * SHA1_CYCLES) * 1000 / mhz.max(1) * page_bytes / 4096
}

/// What the simulator and the index share while the FTL holds the index: a reorganisation the
/// simulator asked for in idle time, and the store's counters.
#[derive(Debug, Default)]
pub struct IndexShared {
    /// Reorganisation to run before the index's next use (set in an idle gap).
    pub reorganize: Option<Layout>,
    /// Reorganisations run.
    pub reorganizations: u64,
    /// The fingerprint store's counters after the index's latest use.
    pub stats: StoreStats,
}

/// The CAFTL index as the simulator runs it. Hashing on the clock (runs with the write buffer
/// model): each probe's hashing time is added to `delay`, which the emulator adds to "now" for the
/// NAND operations issued after it (`Emulator::set_delay_source`), so a write's pages are hashed
/// one after the other on one processor while the flash programs the pages already hashed.
/// Fingerprints taken after a page is written (pre-hash misses) are off the critical path and
/// cost no delay. Idle-time reorganisation: a [`Layout`] the simulator puts in `shared` in an idle
/// gap is applied to the store before the index's next use (nothing uses the store in between,
/// so this is the same as running it in the gap; it is not charged any time).
pub struct TimedIndex<'i, 'b, const K: usize> {
    inner: &'i mut CaftlIndex<'b, K>,
    delay: Arc<AtomicU64>,
    mhz: u64,
    page_bytes: u64,
    shared: Arc<Mutex<IndexShared>>,
}

impl<'i, 'b, const K: usize> TimedIndex<'i, 'b, K> {
    /// Wraps `inner`; hashing at `mhz` on pages of `page_bytes` is added to `delay`.
    pub fn new(
        inner: &'i mut CaftlIndex<'b, K>,
        delay: Arc<AtomicU64>,
        mhz: u64,
        page_bytes: u64,
        shared: Arc<Mutex<IndexShared>>,
    ) -> Self {
        TimedIndex { inner, delay, mhz, page_bytes, shared }
    }

    /// Runs a pending reorganisation, then `f`, then publishes the store's counters.
    fn with<T>(&mut self, f: impl FnOnce(&mut CaftlIndex<'b, K>) -> T) -> T {
        let mut sh = self.shared.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(layout) = sh.reorganize.take() {
            self.inner.store_mut().reorganize(layout);
            sh.reorganizations += 1;
        }
        let r = f(self.inner);
        sh.stats = self.inner.store().stats();
        r
    }
}

impl<const K: usize> ContentIndex for TimedIndex<'_, '_, K> {
    fn probe(&mut self, page: &[u8]) -> ContentProbe {
        let (c0, s0) = self.inner.hashing();
        let p = self.with(|ix| ix.probe(page));
        let (c1, s1) = self.inner.hashing();
        self.delay.fetch_add(hash_ns(c1 - c0, s1 - s0, self.mhz, self.page_bytes), Ordering::Relaxed);
        p
    }
    fn fingerprint(&mut self, page: &[u8]) -> ContentKey {
        self.inner.fingerprint(page)
    }
    fn sample(&self, unit: &[u8], page_bytes: usize) -> usize {
        self.inner.sample(unit, page_bytes)
    }
    fn insert(&mut self, key: &ContentKey, location: u32) {
        self.with(|ix| ix.insert(key, location))
    }
    fn forget(&mut self, key: &ContentKey) {
        self.with(|ix| ix.forget(key))
    }
    fn moved(&mut self, from: u32, to: u32) {
        self.with(|ix| ix.moved(from, to))
    }
    fn invalidated(&mut self, location: u32) {
        self.with(|ix| ix.invalidated(location))
    }
    fn clear(&mut self) {
        self.inner.clear()
    }
    fn hashing(&self) -> (u64, u64) {
        self.inner.hashing()
    }
}

/// Options of `--features dedup[:OPT...]`.
#[derive(Copy, Clone, Debug, PartialEq)]
pub struct DedupOptions {
    /// Sampling unit in pages (0: no sampling).
    pub sampling_unit: u32,
    /// CRC-32 pre-hashing.
    pub prehash: bool,
    /// Full compare before sharing.
    pub full_compare: bool,
    /// Fingerprint-store entries (None: the logical pages).
    pub store_entries: Option<usize>,
    /// The dynamic switch.
    pub dynamic_switch: bool,
    /// Write-buffer size in pages.
    pub buffer_pages: u64,
    /// Processor clock for hashing time.
    pub mhz: u64,
    /// Out-of-line deduplication after the run.
    pub out_of_line: bool,
    /// Records sorted in memory at once by out-of-line deduplication.
    pub ool_memory_records: usize,
    /// Out-of-line sort runs really on flash (`oolflash`; else the model, see [`ool`]).
    pub ool_on_flash: bool,
    /// With `out_of_line`: also run a pass in every idle gap of at least this many ms (between
    /// the device's last completion and the next arrival) once unprobed pages were written since
    /// the last pass (0: only after the run).
    pub idle_ms: u64,
    /// Reorganise the fingerprint store in idle gaps (`reorg=sorted|hotness`).
    pub reorganize: Option<Layout>,
    /// Idle gap (ms) that triggers a reorganisation (`reorgidle=MS`, default 100), when pages
    /// were written since the last one.
    pub reorg_idle_ms: u64,
    /// Fingerprint-store segments (`segments=N`; default: one per bucket, at most 1024).
    pub segments: Option<usize>,
}

impl Default for DedupOptions {
    fn default() -> Self {
        DedupOptions {
            sampling_unit: 32,
            prehash: true,
            full_compare: false,
            store_entries: None,
            dynamic_switch: false,
            buffer_pages: 4096,
            mhz: 934,
            out_of_line: false,
            ool_memory_records: 65536,
            ool_on_flash: false,
            idle_ms: 0,
            reorganize: None,
            reorg_idle_ms: 100,
            segments: None,
        }
    }
}

impl DedupOptions {
    /// Parses the options after `dedup` (`""` or `:opt:opt...`).
    pub fn parse(rest: &str) -> Result<Self, String> {
        let mut o = DedupOptions::default();
        for opt in rest.split(':').map(str::trim).filter(|s| !s.is_empty()) {
            let (k, v) = opt.split_once('=').map_or((opt, None), |(k, v)| (k, Some(v)));
            let num = |v: Option<&str>| -> Result<u64, String> {
                v.and_then(|v| v.parse::<u64>().ok())
                    .ok_or_else(|| format!("dedup option '{opt}' needs a whole number (e.g. {k}=32)"))
            };
            match k {
                "nosample" => o.sampling_unit = 0,
                "sample" => o.sampling_unit = num(v)? as u32,
                "noprehash" => o.prehash = false,
                "compare" => o.full_compare = true,
                "store" => o.store_entries = Some(num(v)?.max(1) as usize),
                "switch" => o.dynamic_switch = true,
                "buffer" => o.buffer_pages = num(v)?.max(1),
                "mhz" => o.mhz = num(v)?.max(1),
                "ool" => o.out_of_line = true,
                "oolflash" => {
                    o.out_of_line = true;
                    o.ool_on_flash = true;
                }
                "oolmem" => o.ool_memory_records = num(v)?.max(2) as usize,
                "idle" => {
                    o.idle_ms = num(v)?;
                    o.out_of_line = true;
                }
                "reorg" => {
                    o.reorganize = Some(match v {
                        Some("sorted") => Layout::Sorted,
                        Some("hotness") => Layout::Hotness,
                        _ => {
                            return Err(format!(
                                "dedup option '{opt}': expected reorg=sorted or reorg=hotness"
                            ))
                        }
                    })
                }
                "reorgidle" => o.reorg_idle_ms = num(v)?,
                "segments" => o.segments = Some(num(v)?.max(1) as usize),
                _ => {
                    return Err(format!(
                        "unknown dedup option '{opt}' (expected nosample, sample=N, noprehash, compare, \
                         store=N, switch, buffer=N, mhz=N, ool, oolflash, oolmem=N, idle=MS, reorg=sorted|hotness, \
                         reorgidle=MS, segments=N)"
                    ))
                }
            }
        }
        Ok(o)
    }

    /// The options named in a `--features` list, if it names dedup.
    pub fn from_features(features: &str) -> Result<Option<Self>, String> {
        for name in features.split(['+', ',']).map(str::trim) {
            if name == "dedup" {
                return Ok(Some(DedupOptions::default()));
            }
            if let Some(rest) = name.strip_prefix("dedup:") {
                return Ok(Some(DedupOptions::parse(rest)?));
            }
        }
        Ok(None)
    }

    /// The FTL's runtime settings.
    pub fn settings(&self) -> DedupSettings {
        DedupSettings {
            inline: true,
            sampling_unit: self.sampling_unit,
            full_compare: self.full_compare,
            fingerprint_misses: true,
        }
    }

    /// Scratch logical pages the FTL needs above the host's `host_pages` for out-of-line sort
    /// runs on flash (0 unless `oolflash`).
    pub fn scratch_pages(&self, host_pages: u32, page_bytes: u32) -> u32 {
        if self.out_of_line && self.ool_on_flash {
            ool::scratch_pages(host_pages, page_bytes, self.ool_memory_records)
        } else {
            0
        }
    }

    /// Buffer sizes for a device of `logical_pages` of `page_bytes`.
    pub fn sizes(&self, logical_pages: u32, page_bytes: u32) -> DedupSizes {
        let entries = self.store_entries.unwrap_or(logical_pages as usize).max(1);
        let buckets = entries.div_ceil(BUCKET_ENTRIES);
        DedupSizes {
            virtual_pages: logical_pages as usize,
            buckets,
            segments: self.segments.unwrap_or(1024).clamp(1, buckets.max(1)),
            page_bytes,
        }
    }
}

/// Fills `page` with content id `c` (its big-endian bytes, repeated): equal ids, equal pages.
pub fn fill_content(c: u64, page: &mut [u8]) {
    let b = c.to_be_bytes();
    for chunk in page.chunks_mut(8) {
        chunk.copy_from_slice(&b[..chunk.len()]);
    }
}

/// The simulator's deduplication state for one run.
pub struct DedupSim {
    opts: DedupOptions,
    page_bytes: usize,
    /// Next unique content for requests without content.
    next_unique: u64,
    written: u64,
    contents: HashSet<u64>,
    live: HashMap<u64, u32>,
    lpn_content: Vec<Option<u64>>,
    live_duplicates: u64,
    outstanding: VecDeque<(u64, u64)>,
    outstanding_pages: u64,
    inline_on: bool,
    switch_offs: u64,
    switched_off_pages: u64,
    hashing: (u64, u64),
    hashing_base: (u64, u64),
    after_write_sha1s: u64,
    hash_ns: u64,
    hash_ns_background: u64,
    stats_base: DedupStats,
    ool: Option<OolReport>,
    /// An idle-time pass stopped at a request's arrival, resumed in the next gap.
    pending: Option<OolPass>,
    ool_aborts: u64,
    /// Aborts that stopped a pass in its merge.
    ool_merge_aborts: u64,
    /// Host pages (the FTL may have more: the out-of-line scratch range).
    host_pages: u32,
    /// Unprobed FTL writes that were out-of-line run pages (not the host's).
    run_unprobed: u64,
    last_done: u64,
    unprobed_at_pass: u64,
    index_shared: Option<Arc<Mutex<IndexShared>>>,
    store_base: StoreStats,
    reorgs_base: u64,
    written_at_reorg: u64,
}

/// The clock of a device the simulator can run idle-time work on.
pub trait IdleClock {
    /// Starts a window of work at `t` ns (operations still start no earlier than their plane is
    /// free).
    fn start_idle_work(&mut self, t: u64);
    /// When the work issued since the window started completes (ns).
    fn idle_work_done(&self) -> u64;
    /// Time to write and to read one page of a sort run, ns, with the device's planes working
    /// in parallel (one page's program or read time over the number of planes; see [`ool`]).
    fn run_page_ns(&self) -> (u64, u64);
}

impl DedupSim {
    /// State for a device of `logical_pages` pages of `page_bytes`.
    pub fn new(opts: DedupOptions, logical_pages: u32, page_bytes: u32) -> Self {
        DedupSim {
            opts,
            page_bytes: page_bytes as usize,
            next_unique: 1 << 63,
            written: 0,
            contents: HashSet::new(),
            live: HashMap::new(),
            lpn_content: vec![None; logical_pages as usize],
            live_duplicates: 0,
            outstanding: VecDeque::new(),
            outstanding_pages: 0,
            inline_on: true,
            switch_offs: 0,
            switched_off_pages: 0,
            hashing: (0, 0),
            hashing_base: (0, 0),
            after_write_sha1s: 0,
            hash_ns: 0,
            hash_ns_background: 0,
            stats_base: DedupStats::default(),
            ool: None,
            pending: None,
            ool_aborts: 0,
            ool_merge_aborts: 0,
            host_pages: logical_pages,
            run_unprobed: 0,
            last_done: 0,
            unprobed_at_pass: 0,
            index_shared: None,
            store_base: StoreStats::default(),
            reorgs_base: 0,
            written_at_reorg: 0,
        }
    }

    /// The state shared with the run's index (reorganisation requests, store counters).
    pub fn set_index_shared(&mut self, shared: Arc<Mutex<IndexShared>>) {
        self.index_shared = Some(shared);
    }

    fn shared(&self) -> Option<std::sync::MutexGuard<'_, IndexShared>> {
        self.index_shared.as_ref().map(|s| s.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// The options.
    pub fn options(&self) -> &DedupOptions {
        &self.opts
    }

    /// Starts the measured part (after preconditioning): counters from here.
    pub fn start_measuring<N: NandFlash, P: PolicySet, M: MappingTable>(&mut self, ftl: &Ftl<'_, N, P, M>) {
        self.stats_base = ftl.dedup_stats();
        self.hashing = ftl.dedup_hashing();
        self.hashing_base = self.hashing;
        self.after_write_sha1s = self.stats_base.fingerprinted_after_write;
        self.written = 0;
        self.contents.clear();
        self.live_duplicates = 0;
        self.hash_ns = 0;
        self.hash_ns_background = 0;
        if let Some((stats, reorgs)) = self.shared().map(|s| (s.stats, s.reorganizations)) {
            (self.store_base, self.reorgs_base) = (stats, reorgs);
        }
        self.written_at_reorg = 0;
    }

    /// Fills `page` with content `c`; counts the write against the references (`lpn` written).
    pub fn fill_and_count(&mut self, lpn: u32, content: Option<u64>, page: &mut [u8]) {
        let c = content.unwrap_or_else(|| {
            self.next_unique += 1;
            self.next_unique
        });
        fill_content(c, page);
        self.written += 1;
        self.contents.insert(c);
        if self.live.get(&c).is_some_and(|&r| r > 0) {
            self.live_duplicates += 1;
        }
        if let Some(old) = self.lpn_content.get_mut(lpn as usize).and_then(|s| s.replace(c)) {
            if let Some(r) = self.live.get_mut(&old) {
                *r = r.saturating_sub(1);
            }
        }
        *self.live.entry(c).or_insert(0) += 1;
    }

    /// A request completed at `done` (ns).
    pub fn note_done(&mut self, done: u64) {
        self.last_done = self.last_done.max(done);
    }

    /// Before a request arriving at `now` (ns): out-of-line work if the device has been idle long
    /// enough: the pass stopped in an earlier gap, else a new one if pages were written without
    /// a probe since the last pass started. The work starts when the device went idle and stops
    /// at `now` (see [`ool`]: the request waits at most for the unit of work in flight).
    pub fn idle_time<N: NandFlash + IdleClock, P: PolicySet, M: MappingTable>(
        &mut self,
        ftl: &mut Ftl<'_, N, P, M>,
        now: u64,
    ) -> Result<(), String> {
        // Idle-time reorganisation of the fingerprint store, if pages were written since the last.
        let reorg_ns = self.opts.reorg_idle_ms.saturating_mul(1_000_000);
        if let Some(layout) = self.opts.reorganize {
            if self.last_done > 0
                && now >= self.last_done.saturating_add(reorg_ns)
                && self.written > self.written_at_reorg
            {
                self.written_at_reorg = self.written;
                if let Some(mut sh) = self.shared() {
                    sh.reorganize = Some(layout);
                }
            }
        }
        let idle_ns = self.opts.idle_ms.saturating_mul(1_000_000);
        if !self.opts.out_of_line
            || idle_ns == 0
            || self.last_done == 0
            || now < self.last_done.saturating_add(idle_ns)
        {
            return Ok(());
        }
        let mut pass = match self.pending.take() {
            Some(p) => p,
            None => {
                let unprobed = ftl.dedup_stats().unprobed;
                if unprobed - self.run_unprobed == self.unprobed_at_pass {
                    return Ok(());
                }
                self.unprobed_at_pass = unprobed - self.run_unprobed;
                self.new_pass(ftl)
            }
        };
        pass.clock = pass.clock.max(self.last_done);
        ftl.nand_mut().start_idle_work(pass.clock);
        let (write_page_ns, read_page_ns) = ftl.nand().run_page_ns();
        let budget = Budget { deadline: now, write_page_ns, read_page_ns };
        let inline = ftl.dedup_settings().inline;
        let unprobed = ftl.dedup_stats().unprobed;
        let done = pass.advance(ftl, Some(budget), &|f| f.nand().idle_work_done(), &mut |f, t| {
            f.nand_mut().start_idle_work(t)
        });
        self.run_unprobed += ftl.dedup_stats().unprobed - unprobed;
        ftl.set_inline_dedup(inline);
        if done? {
            self.record_pass(&pass.rep);
        } else {
            self.ool_aborts += 1;
            self.ool_merge_aborts += u64::from(pass.merging());
            self.pending = Some(pass);
        }
        Ok(())
    }

    /// A new out-of-line pass (runs on flash with `oolflash`).
    fn new_pass<N: NandFlash, P: PolicySet, M: MappingTable>(&self, ftl: &Ftl<'_, N, P, M>) -> OolPass {
        let pass = OolPass::new(self.opts.ool_memory_records, ftl.live_physical_pages());
        if self.opts.ool_on_flash {
            pass.on_flash(self.host_pages)
        } else {
            pass
        }
    }

    /// Sort-run pages the out-of-line passes wrote through the FTL (with `oolflash`; the FTL
    /// counts them as host writes, the simulator's report does not).
    pub fn run_pages_on_flash(&self) -> u64 {
        match (&self.ool, self.opts.ool_on_flash) {
            (Some(o), true) => o.run_pages_written,
            _ => 0,
        }
    }

    /// Adds an out-of-line pass to the run's totals (live pages before: the first pass's; after:
    /// the last one's).
    fn record_pass(&mut self, pass: &OolReport) {
        let r = self
            .ool
            .get_or_insert_with(|| OolReport { live_before: pass.live_before, ..OolReport::default() });
        r.passes += 1;
        r.pages_scanned += pass.pages_scanned;
        r.runs += pass.runs;
        r.run_pages_written += pass.run_pages_written;
        r.run_pages_read += pass.run_pages_read;
        r.duplicate_groups += pass.duplicate_groups;
        r.coalesced += pass.coalesced;
        r.refused += pass.refused;
        r.live_after = pass.live_after;
    }

    /// Before a write request arriving at `now` (ns): the dynamic switch's decision, from the
    /// write buffer's (occupied, capacity) pages when the run models one, else from the device's
    /// outstanding writes against `buffer=PAGES`.
    pub fn before_write<N: NandFlash, P: PolicySet, M: MappingTable>(
        &mut self,
        ftl: &mut Ftl<'_, N, P, M>,
        now: u64,
        pages: u64,
        buffer: Option<(u64, u64)>,
    ) {
        while self.outstanding.front().is_some_and(|&(done, _)| done <= now) {
            if let Some((_, p)) = self.outstanding.pop_front() {
                self.outstanding_pages -= p;
            }
        }
        if self.opts.dynamic_switch {
            let (used, b) = buffer.unwrap_or((self.outstanding_pages, self.opts.buffer_pages));
            if self.inline_on && used * 100 >= b * 95 {
                self.inline_on = false;
                self.switch_offs += 1;
            } else if !self.inline_on && used * 100 <= b * 50 {
                self.inline_on = true;
            }
            ftl.set_inline_dedup(self.inline_on);
            if !self.inline_on {
                self.switched_off_pages += pages;
            }
        }
    }

    /// After a write request: the hashing time on its critical path (ns), and its pages stay in
    /// the buffer until `done` plus that time. SHA-1s of pages fingerprinted after their write
    /// (pre-hash misses) are off the critical path (the paper leaves them to idle time) and only
    /// counted.
    pub fn after_write<N: NandFlash, P: PolicySet, M: MappingTable>(
        &mut self,
        ftl: &Ftl<'_, N, P, M>,
        done: u64,
        pages: u64,
    ) -> u64 {
        let (crcs, sha1s) = ftl.dedup_hashing();
        let after = ftl.dedup_stats().fingerprinted_after_write;
        let background = after - self.after_write_sha1s;
        let critical_sha1s = (sha1s - self.hashing.1).saturating_sub(background);
        let pb = self.page_bytes as u64;
        let ns = hash_ns(crcs - self.hashing.0, critical_sha1s, self.opts.mhz, pb);
        self.hashing = (crcs, sha1s);
        self.after_write_sha1s = after;
        self.hash_ns += ns;
        self.hash_ns_background += hash_ns(0, background, self.opts.mhz, pb);
        let done = done + ns;
        let at = self.outstanding.partition_point(|&(d, _)| d <= done);
        self.outstanding.insert(at, (done, pages));
        self.outstanding_pages += pages;
        ns
    }

    /// After the run: the idle-time pass in progress completed, then a whole out-of-line pass if
    /// asked for.
    pub fn finish<N: NandFlash, P: PolicySet, M: MappingTable>(
        &mut self,
        ftl: &mut Ftl<'_, N, P, M>,
    ) -> Result<(), String> {
        let unprobed = ftl.dedup_stats().unprobed;
        if let Some(mut pass) = self.pending.take() {
            ftl.set_inline_dedup(true);
            pass.advance(ftl, None, &|_| 0, &mut |_, _| {})?;
            self.record_pass(&pass.rep);
        }
        if self.opts.out_of_line {
            ftl.set_inline_dedup(true);
            let mut pass = self.new_pass(ftl);
            pass.advance(ftl, None, &|_| 0, &mut |_, _| {})?;
            self.record_pass(&pass.rep);
        }
        self.run_unprobed += ftl.dedup_stats().unprobed - unprobed;
        Ok(())
    }

    /// The report object.
    pub fn report<N: NandFlash, P: PolicySet, M: MappingTable>(
        &self,
        ftl: &Ftl<'_, N, P, M>,
    ) -> serde_json::Value {
        let s = ftl.dedup_stats();
        let d = |a: u64, b: u64| a.saturating_sub(b);
        let deduplicated = d(s.deduplicated, self.stats_base.deduplicated);
        let n = self.written;
        let m = n.saturating_sub(deduplicated);
        let rate = |x: u64| if n == 0 { 0.0 } else { x as f64 / n as f64 };
        let offline = n.saturating_sub(self.contents.len() as u64);
        let mapped = (0..self.host_pages).filter(|&l| ftl.physical_page_of(l).is_some()).count() as u64;
        let live = ftl.live_physical_pages();
        let store = self.shared().map(|sh| {
            let (s, b) = (sh.stats, self.store_base);
            let lookups = s.lookups - b.lookups;
            let comparisons = s.comparisons - b.comparisons;
            serde_json::json!({
                "lookups": lookups,
                "comparisons": comparisons,
                "comparisons_per_lookup": if lookups == 0 { 0.0 } else { comparisons as f64 / lookups as f64 },
                "buckets_searched": s.buckets_searched - b.buckets_searched,
                "buckets_skipped": s.buckets_skipped - b.buckets_skipped,
                "reorganizations": sh.reorganizations - self.reorgs_base,
            })
        });
        serde_json::json!({
            "fingerprint_store": store,
            "options": format!("{:?}", self.opts),
            "pages_written_n": n,
            "pages_to_flash_m": m,
            "dedup_rate": rate(n - m),
            "offline_rate": rate(offline),
            "found_of_offline": if offline == 0 { 0.0 } else { (n - m) as f64 / offline as f64 },
            "live_oracle_rate": rate(self.live_duplicates),
            "found_of_live_oracle": if self.live_duplicates == 0 { 0.0 } else { (n - m) as f64 / self.live_duplicates as f64 },
            "probes": d(s.probes, self.stats_base.probes),
            "hits": d(s.hits, self.stats_base.hits),
            "stale_hits": d(s.stale_hits, self.stats_base.stale_hits),
            "compare_mismatches": d(s.compare_mismatches, self.stats_base.compare_mismatches),
            "unprobed_pages": d(s.unprobed, self.stats_base.unprobed).saturating_sub(self.run_unprobed),
            "vmap_full": d(s.vmap_full, self.stats_base.vmap_full),
            "shared_moves": d(s.shared_moves, self.stats_base.shared_moves),
            "share_journal_pages": d(s.journal_pages, self.stats_base.journal_pages),
            "crc32s": self.hashing.0 - self.hashing_base.0,
            "sha1s": self.hashing.1 - self.hashing_base.1,
            "hash_ms_critical_path": self.hash_ns as f64 / 1e6,
            "hash_ms_after_write": self.hash_ns_background as f64 / 1e6,
            "switch_offs": self.switch_offs,
            "pages_with_inline_off": self.switched_off_pages,
            "shared_contents": ftl.shared_contents(),
            "mapped_logical_pages": mapped,
            "live_physical_pages": live,
            "space_saved": if mapped == 0 { 0.0 } else { 1.0 - live as f64 / mapped as f64 },
            "out_of_line": self.ool.as_ref().map(|o| serde_json::json!({
                "passes": o.passes,
                "aborts": self.ool_aborts,
                "aborts_in_merge": self.ool_merge_aborts,
                "pages_scanned": o.pages_scanned,
                "runs": o.runs,
                "run_pages_written": o.run_pages_written,
                "run_pages_read": o.run_pages_read,
                "duplicate_groups": o.duplicate_groups,
                "coalesced": o.coalesced,
                "refused": o.refused,
                "live_before": o.live_before,
                "live_after": o.live_after,
            })),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_parse() {
        assert_eq!(DedupOptions::from_features("eti"), Ok(None));
        assert_eq!(DedupOptions::from_features("dedup"), Ok(Some(DedupOptions::default())));
        let o = DedupOptions::from_features("eti+dedup:nosample:noprehash:switch:buffer=64:ool:oolmem=100")
            .unwrap()
            .unwrap();
        assert_eq!((o.sampling_unit, o.prehash, o.dynamic_switch), (0, false, true));
        assert_eq!((o.buffer_pages, o.out_of_line, o.ool_memory_records), (64, true, 100));
        let fl = DedupOptions::parse("oolflash").unwrap();
        assert_eq!((fl.out_of_line, fl.ool_on_flash), (true, true));
        assert!(!DedupOptions::parse("ool").unwrap().ool_on_flash);
        // 1000 host pages of 2 KiB (85 records a page), 100 records a run: 12 full pages + 10 runs.
        assert_eq!(fl.scratch_pages(1000, 2048), ool::scratch_pages(1000, 2048, 65536));
        assert_eq!(ool::scratch_pages(1000, 2048, 100), 12 + 10);
        assert_eq!(DedupOptions::parse("ool").unwrap().scratch_pages(1000, 2048), 0);
        let i = DedupOptions::parse("idle=100").unwrap();
        assert_eq!((i.idle_ms, i.out_of_line), (100, true));
        let r = DedupOptions::parse("reorg=hotness:reorgidle=5:segments=4").unwrap();
        assert_eq!((r.reorganize, r.reorg_idle_ms, r.segments), (Some(Layout::Hotness), 5, Some(4)));
        assert!(DedupOptions::parse("reorg=bogus").unwrap_err().contains("reorg=sorted"));
        assert!(DedupOptions::parse("sample=x").unwrap_err().contains("whole number"));
        assert!(DedupOptions::parse("bogus").unwrap_err().contains("unknown dedup option"));
    }
}
