//! [`Guarded`]: hot/cold separation that pays for itself. A wrapper around one or more
//! [`Classifier`]s (ETI, MHF, MBF, ...), its *candidates*, that sends every host page to one
//! stream unless separating by a candidate's answer is measured to lower write amplification, and
//! then separates by the candidate measured best.
//!
//! # Why
//!
//! Two host frontiers (hot and cold) only help when the pages labelled hot die clearly younger
//! than those labelled cold. On the repository's traces they often do not (docs/eval/eti): a
//! mislabelled page in the hot frontier's blocks, or hot data that is only lukewarm, leaves the
//! hot blocks as full as the cold ones at GC time, and the second frontier's open blocks (one
//! per plane) are spare space taken from GC. Then separation raises WAF above one stream's.
//! And where one classifier's labels do not pay, another's may: on the Heimdall 1006 cut (scattered
//! single pages) ETI's extents are too coarse and its separation loses, MHF's per-page counters
//! gain 5%; falling back to one stream there leaves ETI 5% above MHF. With several candidates
//! (`Guarded<Pair<Eti, Mhf>, _, _, 2>`, the simulator's `eti:guard:alt=mhf`) the guard follows
//! whichever labelling its ghosts measure best, window by window.
//!
//! # How: a miniature simulation of both choices
//!
//! The wrapper measures the invalidation behaviour of each choice directly, on a spatial sample
//! of the logical pages (the idea of miniature simulations, Waldspurger et al., ATC'17). The
//! logical space is cut into groups of `2^s` consecutive pages and one page of each group, chosen
//! by a CRC-32C hash of the group number, is sampled; `s` is the smallest shift for which the
//! sampled space fits the ghosts (below). Every write of a sampled page is replayed into `1 + K`
//! *ghost FTLs*, page maps of the sampled space on a scaled-down flash:
//!
//! * `one`: every host page on one host frontier (plus the GC frontier);
//! * `sep[k]`, one per candidate: hot pages (by candidate `k`'s answer) on the hot frontier, cold
//!   pages on the cold frontier (plus the GC frontier).
//!
//! Both ghosts have the device's over-provisioning and, up to `BLOCKS`, its number of blocks
//! (`address_pages x (1 + op) / pages_per_block`; the ghost's blocks are smaller by the
//! sampling ratio), so that open blocks and GC reserves take the same share of the spare space as
//! on the device: a ghost with fewer, larger blocks overstated the cost of the third frontier and
//! refused separation where it paid. They have `lanes` (the device's planes) blocks open
//! per frontier with writes dealt round robin over the lanes, and per-lane greedy GC (fewest valid
//! pages) that keeps `reserve` free blocks per lane, as the FTL does per plane. Each counts its
//! programs (host pages and GC copies). Every `window` sampled writes the wrapper compares the
//! ghosts' programs over the recent past (counts halved after each comparison, so each
//! window weighs twice the one before it), takes the candidate whose ghost programmed fewest
//! pages (the first on ties) and follows it for the next window only if it programmed at least
//! `margin_permille` per mille fewer pages than `one`; otherwise one stream. Switching from one
//! candidate to another costs nothing on the device (the same two frontiers), so candidates are
//! compared without a margin. Until the ghosts have GC'd at all, all count one program per host
//! page and the wrapper stays on one stream.
//!
//! When following candidate `k`, a page gets `k`'s answer. When not separating, it is answered
//! [`Temperature::Hot`] (the host stream of `SeparateByTemperature`, the same stream as one-stream
//! placement), except while a cold open block is left partly written by an earlier separation:
//! such a block would hold its free pages out of GC's reach for the rest of the run (on the
//! small trace-sized devices, two 64-page blocks are a tenth of the spare space, which measured
//! +1..5% WAF after a few separated windows). The FTL deals host pages to planes round robin, so
//! the wrapper follows the plane of each page and the fill of the cold block in each plane
//! (`lanes` planes, `pages_per_block` pages) and sends pages to the cold frontier until those
//! blocks are full, then to the host frontier only. Every candidate sees every request and page
//! whichever is followed, so each one's state is the same as without the wrapper. The FTL sees
//! the first candidate's request answer (and hands it back with each page); the others' are kept
//! in the wrapper for the request's pages.
//!
//! What this guarantees and what it does not: the decision is the measured best of the `1 + K`
//! choices on the sample, so a separation is kept only where it paid on the sample, and the cost
//! of trying is bounded by one window of a worse choice. It is an estimate: the sample's WAF differs from the
//! device's (smaller blocks, sampling noise, no checkpoint or wear-leveling writes), so the
//! device can still be a little worse than one stream where the two are within noise of each
//! other; `margin_permille` trades that against missed gains. The ghosts collect whole victims on
//! demand; they do not model the FTL's paced GC, under which separation can cost where on-demand
//! GC gains (docs/eval/eti/README.md, Heimdall 1370: with `--gc-pacing off` the guard, with or
//! without MHF as a second candidate, is 3% below one stream there; with paced GC 3-5% above).
//! Two attempts to close that gap from the guard's side were measured and left out (5 seeds,
//! Heimdall 1370 stayed at 1.03-1.04 x one stream): requiring 2-4 consecutive windows in favour
//! before separating, and giving the ghosts the device's effective spare (anchor and checkpoint
//! blocks out, 5.7% instead of 7%) and its GC reserve of 3 blocks per plane. Three more were
//! measured and left out (docs/eval/eti/README.md, "What was tried on the guard's side"): ghosts
//! running paced GC's rules (they lose MSR hm_0's gain), a ghost of the guard's own answers, and
//! weighing each candidate by the device's measured programs per ghost program while following
//! it (Heimdall 1370 with MHF as alternative 1.004-1.016 x one stream, but Zipf 2 and MSR hm_0
//! lose). The measured cause is paced GC's victim timing around cold-block openings it does not
//! anticipate (same README).
//!
//! The ghost FTL is written here rather than taken from a crate: it is a few hundred lines tied
//! to this FTL's frontier and plane rules, and no `no_std` crate offers a greedy FTL model.
//!
//! # Memory
//!
//! `Guarded<C, PAGES, BLOCKS, K>` holds the `K` candidates (`1 ..= MAX_CANDIDATES`, default 1)
//! and `1 + K` ghosts of at most `PAGES` flash pages in at most `BLOCKS` blocks (`PAGES < 65535`,
//! `PAGES >= 2 * BLOCKS`), each ghost `4 * PAGES + 3 * BLOCKS` bytes plus a few words: the default
//! `Guarded<C, 8192, 512>` is about 68 KiB beyond the inner classifier, each further candidate
//! about 34 KiB more ([`Guarded::MEMORY_BYTES`]); the simulator runs `Guarded<C, 32768, 1024>`
//! (about 260 KiB, the whole of the small trace-sized devices unsampled) and `Guarded<Pair<Eti,
//! Mhf>, 32768, 1024, 2>` (about 400 KiB). Fewer ghost pages mean a sparser sample and a noisier
//! decision.
//!
//! Guarantees: `no_std`, no `alloc`, no floating point, no panics. Per page: the inner
//! candidates' cost, plus for a sampled page `1 + K` ghost writes, each O(1) except when it opens a
//! block or runs GC, which scan the lane's blocks (O(BLOCKS)).

use ftl_core::policy::{Classifier, Temperature, WriteRequest};

use super::hash::CrcPoly;
use super::ConfigError;

const NONE: u16 = u16::MAX;
const FREE: u8 = 0;
const OPEN: u8 = 1;
const CLOSED: u8 = 2;
/// Frontiers of a ghost: host (hot), cold, GC.
const STREAMS: usize = 3;
const HOST: usize = 0;
const COLD: usize = 1;
const GC: usize = 2;
/// The most lanes (planes) a ghost models.
pub const MAX_LANES: usize = 8;

/// The guard's parameters.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct GuardConfig {
    /// Logical pages of the device, `1 ..= 2^32`.
    pub address_pages: u64,
    /// The device's over-provisioning in per mille (physical = logical x (1 + op / 1000));
    /// default 70 (the ETI paper's 7%).
    pub op_permille: u32,
    /// Open blocks per frontier and GC domains: the device's planes, `1 ..= MAX_LANES` (default 2).
    pub lanes: u8,
    /// Free blocks GC keeps per lane, at least 2 (default 2).
    pub reserve: u8,
    /// Sampled writes between decisions, at least 1 (default 512).
    pub window: u32,
    /// Separation is used when its ghost programs at least this many per mille fewer pages than
    /// one stream's (default 20: 2%).
    pub margin_permille: u32,
    /// The device's pages per block, for draining the cold frontier after separation ends (see
    /// the module documentation); 0 turns draining off (default 64).
    pub pages_per_block: u32,
}

impl GuardConfig {
    /// The defaults over `pages` logical pages.
    pub const fn with_address_pages(pages: u64) -> GuardConfig {
        GuardConfig {
            address_pages: pages,
            op_permille: 70,
            lanes: 2,
            reserve: 2,
            window: 512,
            margin_permille: 20,
            pages_per_block: 64,
        }
    }
}

/// What the guard did, for evaluation.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct GuardStats {
    /// Pages classified.
    pub pages: u64,
    /// Of them, sampled into the ghosts.
    pub sampled: u64,
    /// Decisions taken (windows ended).
    pub decisions: u64,
    /// Decisions that chose separation.
    pub separate_decisions: u64,
    /// Pages answered with the followed candidate's temperature (separating).
    pub separated_pages: u64,
    /// Pages sent to the cold frontier while not separating, to fill its open blocks.
    pub drained_pages: u64,
    /// Ghost programs (host and GC), one stream, over the whole run.
    pub one_programs: u64,
    /// Ghost programs, separated by the first candidate, over the whole run.
    pub sep_programs: u64,
    /// Ghost programs of each candidate's separation, over the whole run (unused slots 0).
    pub candidate_programs: [u64; MAX_CANDIDATES],
    /// Decisions that chose each candidate.
    pub candidate_decisions: [u64; MAX_CANDIDATES],
    /// Sampled host writes over the whole run.
    pub ghost_host: u64,
    /// Sampling shift: one page in `2^shift` is sampled.
    pub shift: u8,
    /// Blocks of each ghost in use.
    pub ghost_blocks: u32,
    /// Logical pages of each ghost.
    pub ghost_pages: u32,
}

/// A scaled-down page-mapped FTL: per-lane greedy GC, `lanes` open blocks per frontier.
#[derive(Clone, Debug)]
struct Ghost<const PAGES: usize, const BLOCKS: usize> {
    /// Logical page -> flash page (`NONE` if never written).
    map: [u16; PAGES],
    /// Flash page -> the logical page programmed there (valid iff `map` points back).
    rev: [u16; PAGES],
    valid: [u16; BLOCKS],
    state: [u8; BLOCKS],
    open: [[u16; MAX_LANES]; STREAMS],
    fill: [[u16; MAX_LANES]; STREAMS],
    free: [u16; MAX_LANES],
    next_lane: usize,
    programs: u64,
    /// The frontier GC copies go to (the GC frontier; tests set another to model an FTL without
    /// one).
    gc_dest: usize,
}

/// The shape a ghost runs with (shared by both ghosts).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
struct Shape {
    ppb: u16,
    blocks: u16,
    lanes: u16,
    reserve: u16,
}

impl<const PAGES: usize, const BLOCKS: usize> Ghost<PAGES, BLOCKS> {
    const fn new() -> Self {
        Ghost {
            map: [NONE; PAGES],
            rev: [NONE; PAGES],
            valid: [0; BLOCKS],
            state: [FREE; BLOCKS],
            open: [[NONE; MAX_LANES]; STREAMS],
            fill: [[0; MAX_LANES]; STREAMS],
            free: [0; MAX_LANES],
            next_lane: 0,
            programs: 0,
            gc_dest: GC,
        }
    }

    fn start(&mut self, sh: Shape) {
        for b in 0..sh.blocks as usize {
            self.free[b % sh.lanes as usize] += 1;
        }
    }

    /// A host write of logical page `lpn` on frontier `stream`.
    fn write(&mut self, sh: Shape, lpn: u16, stream: usize) {
        let Some(&old) = self.map.get(lpn as usize) else { return };
        if old != NONE {
            if let Some(v) = self.valid.get_mut((old / sh.ppb) as usize) {
                *v = v.saturating_sub(1);
            }
            self.map[lpn as usize] = NONE;
        }
        let lane = self.next_lane;
        self.next_lane = (lane + 1) % sh.lanes as usize;
        self.collect(sh, lane);
        self.program(sh, lpn, stream, lane);
    }

    /// Programs `lpn` on `stream`'s open block in `lane`, opening one if needed. False if the
    /// lane has no free block (the shape check makes that unreachable).
    fn program(&mut self, sh: Shape, lpn: u16, stream: usize, lane: usize) -> bool {
        let mut b = self.open[stream][lane];
        if b == NONE || self.fill[stream][lane] >= sh.ppb {
            if b != NONE {
                self.state[b as usize] = CLOSED;
            }
            let Some(nb) =
                (lane..sh.blocks as usize).step_by(sh.lanes as usize).find(|&k| self.state[k] == FREE)
            else {
                self.open[stream][lane] = NONE;
                return false;
            };
            self.state[nb] = OPEN;
            self.free[lane] = self.free[lane].saturating_sub(1);
            b = nb as u16;
            self.open[stream][lane] = b;
            self.fill[stream][lane] = 0;
        }
        let p = b * sh.ppb + self.fill[stream][lane];
        self.fill[stream][lane] += 1;
        self.map[lpn as usize] = p;
        self.rev[p as usize] = lpn;
        self.valid[b as usize] += 1;
        self.programs += 1;
        true
    }

    /// Greedy GC in `lane` until it has `reserve` free blocks or no victim frees anything.
    fn collect(&mut self, sh: Shape, lane: usize) {
        while self.free[lane] < sh.reserve {
            let victim = (lane..sh.blocks as usize)
                .step_by(sh.lanes as usize)
                .filter(|&k| self.state[k] == CLOSED)
                .min_by_key(|&k| self.valid[k]);
            let Some(v) = victim else { return };
            if self.valid[v] >= sh.ppb {
                return;
            }
            let first = v * sh.ppb as usize;
            for p in first..first + sh.ppb as usize {
                let l = self.rev[p];
                if l != NONE && self.map[l as usize] as usize == p {
                    self.valid[v] = self.valid[v].saturating_sub(1);
                    if !self.program(sh, l, self.gc_dest, lane) {
                        return;
                    }
                }
            }
            self.state[v] = FREE;
            self.valid[v] = 0;
            self.free[lane] += 1;
        }
    }
}

/// The most candidate classifiers one guard chooses among.
pub const MAX_CANDIDATES: usize = 3;

/// The hot/cold labellings a guard chooses among: `K` classifiers, each answering every request
/// and page. Any [`Classifier`] is one candidate; [`Pair`] makes two.
pub trait Candidates<const K: usize> {
    /// Each candidate's answer for a whole request.
    fn answer_request(&mut self, req: &WriteRequest) -> [Temperature; K];
    /// Each candidate's answer for one page of the request, given its request answers.
    fn answer_page(&mut self, lpn: u32, request: &[Temperature; K]) -> [Temperature; K];
}

impl<C: Classifier> Candidates<1> for C {
    fn answer_request(&mut self, req: &WriteRequest) -> [Temperature; 1] {
        [Classifier::classify_request(self, req)]
    }
    fn answer_page(&mut self, lpn: u32, request: &[Temperature; 1]) -> [Temperature; 1] {
        [Classifier::classify_page(self, lpn, request[0])]
    }
}

/// Two candidate classifiers: the first is the primary (its request answer is the one the FTL
/// sees), the second an alternative the guard may follow instead (e.g. ETI and MHF).
#[derive(Clone, Debug, Default)]
pub struct Pair<A, B>(pub A, pub B);

impl<A: Classifier, B: Classifier> Candidates<2> for Pair<A, B> {
    fn answer_request(&mut self, req: &WriteRequest) -> [Temperature; 2] {
        [self.0.classify_request(req), self.1.classify_request(req)]
    }
    fn answer_page(&mut self, lpn: u32, request: &[Temperature; 2]) -> [Temperature; 2] {
        [self.0.classify_page(lpn, request[0]), self.1.classify_page(lpn, request[1])]
    }
}

/// A classifier whose hot/cold answer is used only while separation measurably lowers WAF (see
/// the module documentation): the answer of the best of `K` candidate classifiers `C` (one by
/// default), or one stream. At most `PAGES` flash pages in at most `BLOCKS` blocks per ghost
/// (default 8192 and 512), `1 + K` ghosts.
#[derive(Clone, Debug)]
pub struct Guarded<C, const PAGES: usize = 8192, const BLOCKS: usize = 512, const K: usize = 1> {
    inner: C,
    one: Ghost<PAGES, BLOCKS>,
    sep: [Ghost<PAGES, BLOCKS>; K],
    shape: Shape,
    cfg: GuardConfig,
    shift: u8,
    ghost_pages: u32,
    /// The candidate followed for the current window, `None` for one stream.
    follow: Option<usize>,
    since: u32,
    /// Decayed counts since the last halving: one stream's ghost's programs, and each candidate
    /// ghost's.
    recent_one: u64,
    recent_sep: [u64; K],
    /// The candidates' answers for the current request.
    request: [Temperature; K],
    /// The plane the FTL puts the next host page on (it deals pages round robin).
    lane: usize,
    /// Pages on the cold frontier's open block of each plane (mod `pages_per_block`).
    cold_fill: [u32; MAX_LANES],
    stats: GuardStats,
}

impl<C: Candidates<K>, const PAGES: usize, const BLOCKS: usize, const K: usize> Guarded<C, PAGES, BLOCKS, K> {
    /// Bytes of the whole wrapper, inner classifiers included.
    pub const MEMORY_BYTES: usize = core::mem::size_of::<Self>();

    /// Wraps `inner`, or the first parameter out of range.
    pub fn new(inner: C, cfg: GuardConfig) -> Result<Self, ConfigError> {
        const {
            assert!(BLOCKS >= 8 && PAGES < NONE as usize && PAGES >= 2 * BLOCKS);
            assert!(K >= 1 && K <= MAX_CANDIDATES);
        };
        if cfg.address_pages == 0 || cfg.address_pages > 1 << 32 {
            return Err(ConfigError::AddressPages);
        }
        if cfg.lanes == 0 || cfg.lanes as usize > MAX_LANES || cfg.reserve < 2 || cfg.window == 0 {
            return Err(ConfigError::Guard);
        }
        let lanes = cfg.lanes as u64;
        // Blocks needed besides the data: the open blocks of three frontiers and the reserve,
        // per lane, and one block's worth of invalid pages for GC to work with.
        let overhead = lanes * (STREAMS as u64 + cfg.reserve as u64) + 1;
        let op = 1000 + cfg.op_permille as u64;
        // The ghosts keep the device's number of blocks where they can (BLOCKS at most), so that
        // open blocks and reserves take the same share of the spare space as on the device;
        // sampling shrinks the blocks instead.
        let dev_ppb =
            if cfg.pages_per_block >= 2 { cfg.pages_per_block as u64 } else { (PAGES / BLOCKS) as u64 };
        let max_blocks = (BLOCKS as u64 / lanes) * lanes;
        let want = ((cfg.address_pages * op).div_ceil(1000).div_ceil(dev_ppb).div_ceil(lanes) * lanes)
            .clamp(lanes, max_blocks);
        let mut shift = 0u8;
        let (pages, blocks, ppb) = loop {
            let g = cfg.address_pages.div_ceil(1 << shift);
            let raw = (g * op).div_ceil(1000);
            let ppb = raw.div_ceil(want).max(2);
            let blocks = raw.div_ceil(ppb).max(g.div_ceil(ppb) + overhead).div_ceil(lanes) * lanes;
            if blocks <= max_blocks && blocks * ppb <= PAGES as u64 {
                break (g, blocks, ppb);
            }
            shift += 1;
            if shift > 32 {
                return Err(ConfigError::Guard);
            }
        };
        let shape = Shape {
            ppb: ppb as u16,
            blocks: blocks as u16,
            lanes: lanes as u16,
            reserve: cfg.reserve as u16,
        };
        let mut one = Ghost::new();
        one.start(shape);
        let sep = core::array::from_fn(|_| one.clone());
        let stats = GuardStats {
            shift,
            ghost_blocks: blocks as u32,
            ghost_pages: pages as u32,
            ..GuardStats::default()
        };
        Ok(Guarded {
            inner,
            one,
            sep,
            shape,
            cfg,
            shift,
            ghost_pages: pages as u32,
            follow: None,
            since: 0,
            recent_one: 0,
            recent_sep: [0; K],
            request: [Temperature::Hot; K],
            lane: 0,
            cold_fill: [0; MAX_LANES],
            stats,
        })
    }

    /// The wrapped classifiers.
    pub fn inner(&self) -> &C {
        &self.inner
    }

    /// The parameters.
    pub fn config(&self) -> &GuardConfig {
        &self.cfg
    }

    /// What it did so far.
    pub fn stats(&self) -> &GuardStats {
        &self.stats
    }

    /// Whether pages are separated now.
    pub fn separating(&self) -> bool {
        self.follow.is_some()
    }

    /// The candidate whose answers pages get now, `None` for one stream.
    pub fn following(&self) -> Option<usize> {
        self.follow
    }

    /// The ghost page of `lpn`, if `lpn` is sampled.
    pub fn sample(&self, lpn: u32) -> Option<u16> {
        let group = lpn >> self.shift;
        let mask = (1u32 << self.shift) - 1;
        let pick = CrcPoly::Castagnoli.hash(group) & mask;
        (lpn & mask == pick && group < self.ghost_pages).then_some(group as u16)
    }

    fn observe(&mut self, g: u16, t: &[Temperature; K]) {
        let p1 = self.one.programs;
        self.one.write(self.shape, g, HOST);
        let d1 = self.one.programs - p1;
        self.recent_one += d1;
        self.stats.one_programs += d1;
        for (k, (ghost, &t)) in self.sep.iter_mut().zip(t).enumerate() {
            let p = ghost.programs;
            ghost.write(self.shape, g, if t == Temperature::Hot { HOST } else { COLD });
            let d = ghost.programs - p;
            self.recent_sep[k] += d;
            if let Some(c) = self.stats.candidate_programs.get_mut(k) {
                *c += d;
            }
        }
        self.stats.sep_programs = self.stats.candidate_programs[0];
        self.stats.sampled += 1;
        self.stats.ghost_host += 1;
        self.since += 1;
        if self.since >= self.cfg.window {
            self.since = 0;
            self.decide();
        }
    }

    /// Ends a window: follows the candidate whose ghost programmed fewest pages (the first on
    /// ties) if that is at least `margin_permille` fewer than one stream's, else one stream.
    fn decide(&mut self) {
        let one = self.recent_one;
        let mut best = 0;
        for k in 1..K {
            if self.recent_sep[k] < self.recent_sep[best] {
                best = k;
            }
        }
        let sep = self.recent_sep[best];
        let m = self.cfg.margin_permille.min(1000) as u64;
        self.follow = (sep * 1000 <= one * (1000 - m) && sep < one).then_some(best);
        self.stats.decisions += 1;
        if let Some(k) = self.follow {
            self.stats.separate_decisions += 1;
            if let Some(c) = self.stats.candidate_decisions.get_mut(k) {
                *c += 1;
            }
        }
        self.recent_one /= 2;
        for r in &mut self.recent_sep {
            *r /= 2;
        }
    }
}

impl<C: Candidates<K>, const PAGES: usize, const BLOCKS: usize, const K: usize> Classifier
    for Guarded<C, PAGES, BLOCKS, K>
{
    /// The first candidate's request answer (it is handed back to `classify_page`); every
    /// candidate's is kept for the request's pages.
    fn classify_request(&mut self, req: &WriteRequest) -> Temperature {
        self.request = self.inner.answer_request(req);
        self.request[0]
    }

    /// The followed candidate's page answer while separating, else hot (one stream) except to
    /// finish a cold block left open; sampled pages are replayed into the ghosts, each
    /// candidate's with its answer.
    fn classify_page(&mut self, lpn: u32, request: Temperature) -> Temperature {
        self.request[0] = request;
        let t = self.inner.answer_page(lpn, &self.request);
        self.stats.pages += 1;
        if let Some(g) = self.sample(lpn) {
            self.observe(g, &t);
        }
        let lane = self.lane;
        self.lane = (lane + 1) % self.cfg.lanes as usize;
        let out = if let Some(k) = self.follow {
            self.stats.separated_pages += 1;
            t.get(k).copied().unwrap_or(Temperature::Hot)
        } else if self.cold_fill[lane] != 0 {
            self.stats.drained_pages += 1;
            Temperature::Cold
        } else {
            Temperature::Hot
        };
        if out == Temperature::Cold && self.cfg.pages_per_block != 0 {
            self.cold_fill[lane] = (self.cold_fill[lane] + 1) % self.cfg.pages_per_block;
        }
        out
    }
}

#[cfg(test)]
mod tests;
