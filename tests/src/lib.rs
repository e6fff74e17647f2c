//! Shared harness of the FTL's integration tests (`tests/tests/*.rs`).
//!
//! - [`Model`]: the independent expectation. For every logical page it keeps the content reads
//!   must return now and the set of contents acceptable after a power cut: the content at the last
//!   flush plus every content written or trimmed since (guarantees 1 and 2 of `ftl_core::Ftl`).
//! - Page contents are derived from a unique id per written page ([`fill_page`]), so a read
//!   identifies exactly which write (if any) it returns ([`identify`]).
//! - [`Env`] runs a list of [`Op`]s against an FTL over an [`Emulator`], with power cuts,
//!   recovery (optionally cut during mount as well), clean remounts and checks after every step.
//! - [`session`] runs ops against an FTL over any device implementing [`CutControl`] (the
//!   fault-injecting wrappers of the other tests use it directly).
//! - [`Forward`]: the pass-through device those wrappers are built on (module [`forward`]).
//!
//! Debugging aid: with `FTL_TESTS_SAVE_BEFORE_RECOVERY=<path>`, [`Env`] saves the emulator image
//! (`Emulator::save`) before every recovery mount, so the image a failing mount saw can be loaded
//! and mounted again by hand; failure messages end with the FTL's block table per plane.

use std::fmt::Write as _;

use ftl_core::blocks::BlockState;
use ftl_core::policy::{DefaultPolicies, PolicySet};
#[cfg(feature = "wom")]
use ftl_core::reuse::{ReuseConfig, SecondWriteCodec};
use ftl_core::{AnyMap, Config, Counters, Error, Extensions, Ftl};
#[cfg(feature = "wom")]
use ftl_testkit::ReuseBuffers;
use ftl_testkit::{FtlMemory, MapChoice};
use nand_emu::{Emulator, EmulatorConfig};
use nand_hal::{BlockId, EccRequirement, ErrorKind, Geometry, NandFlash};

pub mod forward;
pub mod stack;
pub use forward::{CutHook, EmuResult, Forward, Hook};
pub use stack::ExtParts;

/// The FTL type the tests use: the baseline policies unless given others (e.g. a BCH codec).
pub type TestFtl<'a, N, P = DefaultPolicies> = Ftl<'a, N, P, AnyMap<'a>>;

/// The cached map's cache in tests: an eighth of the map's lines (at least one line, a
/// multiple of 4 from 4 on), so that lines are evicted and map pages written back all the time.
pub fn small_map_cache(config: &Config) -> MapChoice {
    let lines = (config.logical_pages as usize).div_ceil(16) / 8;
    let lines = if lines >= 4 { lines / 4 * 4 } else { lines.max(1) };
    MapChoice::Cached { cache_bytes: lines * core::mem::size_of::<ftl_core::MapLine>() }
}

/// Marks the choice of the cached map with [`small_map_cache`] (sized when used).
pub const CACHED: MapChoice = MapChoice::Cached { cache_bytes: 0 };

/// The map a test runs with unless it picks one: flat, or the cached map with
/// [`small_map_cache`] when `FTL_TEST_MAP=cached` (to run a whole suite on it).
pub fn default_map() -> MapChoice {
    match std::env::var("FTL_TEST_MAP").as_deref() {
        Ok("cached") => CACHED,
        _ => MapChoice::Flat,
    }
}

/// The map `choice` names for `config` ([`CACHED`] sized by [`small_map_cache`]).
pub fn sized_map(choice: MapChoice, config: &Config) -> MapChoice {
    if choice == CACHED {
        small_map_cache(config)
    } else {
        choice
    }
}

/// Buffers for one instance with [`default_map`].
pub fn test_memory(geometry: &Geometry, config: &Config) -> FtlMemory {
    FtlMemory::with_map(geometry, config, sized_map(default_map(), config))
}

/// 512 + 32 byte pages (room for the 28 metadata bytes and the 4-byte CRC codec), NOP 4, in-order
/// programming, with the given shape.
pub fn geometry(pages_per_block: u32, blocks_per_plane: u32, planes: u32) -> Geometry {
    Geometry {
        data_bytes: 512,
        spare_bytes: 32,
        pages_per_block,
        blocks_per_plane,
        planes_per_lun: planes,
        luns: 1,
        nop: 4,
        sequential_program: true,
        ecc: EccRequirement { bits: 4, codeword_bytes: 512 },
        endurance: 100_000,
    }
}

/// Formats `nand` with memory from `mem`.
pub fn format<N: NandFlash>(nand: N, mem: &mut FtlMemory, cfg: Config) -> Result<TestFtl<'_, N>, Error> {
    let (map, m) = mem.parts();
    Ftl::format(nand, DefaultPolicies::default(), map, m, cfg)
}

/// Mounts `nand` with memory from `mem`.
pub fn mount<N: NandFlash>(nand: N, mem: &mut FtlMemory, cfg: Config) -> Result<TestFtl<'_, N>, Error> {
    let (map, m) = mem.parts();
    Ftl::mount(nand, DefaultPolicies::default(), map, m, cfg)
}

/// Formats `nand` with memory from `mem` and the given policies.
pub fn format_with<N: NandFlash, P: PolicySet>(
    nand: N,
    mem: &mut FtlMemory,
    cfg: Config,
    policies: P,
) -> Result<TestFtl<'_, N, P>, Error> {
    let (map, m) = mem.parts();
    Ftl::format(nand, policies, map, m, cfg)
}

/// Mounts `nand` with memory from `mem` and the given policies.
pub fn mount_with<N: NandFlash, P: PolicySet>(
    nand: N,
    mem: &mut FtlMemory,
    cfg: Config,
    policies: P,
) -> Result<TestFtl<'_, N, P>, Error> {
    let (map, m) = mem.parts();
    Ftl::mount(nand, policies, map, m, cfg)
}

/// What an FTL with second writes (feature `wom`) needs besides its memory: the codec, the
/// reuse buffers and the settings. [`Env`] lends them to every format and mount.
#[cfg(feature = "wom")]
pub struct WomParts {
    /// The second-write codec.
    pub codec: Box<dyn SecondWriteCodec + Send>,
    /// The reuse buffers.
    pub buffers: ReuseBuffers,
    /// The settings.
    pub config: ReuseConfig,
    /// A prefetch slot per plane pair ([`ftl_core::reuse::Reuse::with_prefetch_slots`]).
    pub slots: bool,
}

#[cfg(feature = "wom")]
impl WomParts {
    /// `ext` with these second writes stacked.
    pub fn attach<'a>(&'a mut self, ext: Extensions<'a>) -> Extensions<'a> {
        ext.reuse(self.buffers.reuse(&mut *self.codec, self.config, self.slots))
    }

    /// The extensions of an FTL with these second writes alone.
    pub fn extensions(&mut self) -> Extensions<'_> {
        self.attach(Extensions::none())
    }
}

/// Without feature `wom` there are no second writes: no value of this type exists, so
/// [`ExtParts::wom`] is always `None`.
#[cfg(not(feature = "wom"))]
pub enum WomParts {}

#[cfg(not(feature = "wom"))]
impl WomParts {
    /// Never called (no value).
    pub fn attach<'a>(&'a mut self, _ext: Extensions<'a>) -> Extensions<'a> {
        match *self {}
    }
}

/// Formats (`format`) or mounts `nand` with memory from `mem` and the techniques of `ext`
/// stacked (`Extensions::none()`: the baseline FTL).
pub fn open<'a, N: NandFlash, P: PolicySet>(
    nand: N,
    mem: &'a mut FtlMemory,
    ext: Extensions<'a>,
    cfg: Config,
    policies: P,
    format: bool,
) -> Result<TestFtl<'a, N, P>, Error> {
    let (map, m) = mem.parts();
    if format {
        Ftl::format_with(nand, policies, map, m, cfg, ext)
    } else {
        Ftl::mount_with(nand, policies, map, m, cfg, ext)
    }
}

/// The block table a survey of a copy of `emu` (its anchor wiped) rebuilds: (state, valid count)
/// per block, or `None` if that mount fails.
fn survey_table<P: PolicySet>(
    emu: &Emulator,
    cfg: &Config,
    map: MapChoice,
    policies: P,
) -> Option<Vec<(BlockState, u16)>> {
    let mut copy = emu.clone();
    for b in 0..ftl_core::anchor::ANCHOR_BLOCKS {
        let _ = copy.erase_block(BlockId(b));
    }
    let mut mem = FtlMemory::with_map(&copy.geometry(), cfg, map);
    let (m, parts) = mem.parts();
    let f = Ftl::mount(&mut copy, policies, m, parts, *cfg).ok()?;
    Some(f.block_infos().map(|(_, i)| (i.state(), i.valid())).collect())
}

/// Whether an error is the emulator reporting a power cut.
pub fn is_power_loss(e: &Error) -> bool {
    *e == Error::Device(ErrorKind::PowerLoss)
}

// ---------------------------------------------------------------------------------------------
// Page contents

/// What a logical page holds: `None` reads as zeros (never written or trimmed), `Some(id)` is
/// the page written with id `id`.
pub type Content = Option<u64>;

fn splitmix(x: &mut u64) -> u64 {
    *x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *x;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Ids with this bit name content that does not depend on the logical page: the same id written
/// to several pages gives equal pages (duplicates, for the deduplication tests).
pub const SHARED_CONTENT: u64 = 1 << 63;

/// How many distinct shared contents [`Op::Dup`] writes.
pub const DUP_POOL: u32 = 6;

/// The content of the write with id `id` (>= 1) to `lpn`: the id, the lpn, then pseudo-random
/// bytes derived from both (from the id alone, and lpn 0 in place of the lpn, for ids with
/// [`SHARED_CONTENT`]).
pub fn fill_page(lpn: u32, id: u64, out: &mut [u8]) {
    let lpn = if id & SHARED_CONTENT != 0 { 0 } else { lpn };
    out[..8].copy_from_slice(&id.to_le_bytes());
    out[8..12].copy_from_slice(&lpn.to_le_bytes());
    let mut x = id ^ ((lpn as u64) << 40) ^ 0xA5A5_5A5A;
    for chunk in out[12..].chunks_mut(8) {
        let v = splitmix(&mut x).to_le_bytes();
        chunk.copy_from_slice(&v[..chunk.len()]);
    }
}

/// What a page read back turned out to be.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Found {
    /// One of the test's writes, or zeros (`None`).
    Content(Content),
    /// Anything else.
    Garbage,
}

/// Identifies the content of a page read from `lpn`.
pub fn identify(lpn: u32, page: &[u8]) -> Found {
    if page.iter().all(|&b| b == 0) {
        return Found::Content(None);
    }
    let id = u64::from_le_bytes(page[..8].try_into().unwrap());
    if id == 0 {
        return Found::Garbage;
    }
    let mut want = vec![0u8; page.len()];
    fill_page(lpn, id, &mut want);
    if want == page {
        Found::Content(Some(id))
    } else {
        Found::Garbage
    }
}

// ---------------------------------------------------------------------------------------------
// The model

/// The expected state of the logical device.
#[derive(Clone, Debug)]
pub struct Model {
    /// What every logical page reads as now.
    pub cur: Vec<Content>,
    /// Per logical page, what it may read as after a power cut: the content at the last flush
    /// (or the last recovery) and every content written or trimmed since. Always holds `cur`.
    pub acceptable: Vec<Vec<Content>>,
    /// The next write id.
    pub next_id: u64,
    /// Per id (index `id - 1`): the lpn and the step that wrote it, for messages.
    pub origin: Vec<(u32, usize)>,
    /// The current step, stamped on new ids.
    pub step: usize,
}

impl Model {
    /// An empty device of `logical_pages` pages.
    pub fn new(logical_pages: u32) -> Self {
        Model {
            cur: vec![None; logical_pages as usize],
            acceptable: vec![vec![None]; logical_pages as usize],
            next_id: 1,
            origin: Vec::new(),
            step: 0,
        }
    }

    /// Logical pages.
    pub fn len(&self) -> u32 {
        self.cur.len() as u32
    }

    /// Whether the device has no pages.
    pub fn is_empty(&self) -> bool {
        self.cur.is_empty()
    }

    /// Records a write of `pages` pages at `lpn` and returns their ids.
    pub fn write(&mut self, lpn: u32, pages: u32) -> Vec<u64> {
        (lpn..lpn + pages)
            .map(|l| {
                let id = self.next_id;
                self.next_id += 1;
                self.origin.push((l, self.step));
                self.set(l, Some(id));
                id
            })
            .collect()
    }

    /// Records a write of `pages` pages at `lpn` with contents `content, content + 1, ...` of
    /// the [`DUP_POOL`] shared contents ([`SHARED_CONTENT`] ids) and returns their ids.
    pub fn write_shared(&mut self, lpn: u32, pages: u32, content: u32) -> Vec<u64> {
        (0..pages)
            .map(|i| {
                let id = SHARED_CONTENT | (1 + ((content + i) % DUP_POOL) as u64);
                self.set(lpn + i, Some(id));
                id
            })
            .collect()
    }

    /// Records a trim.
    pub fn trim(&mut self, lpn: u32, pages: u32) {
        for l in lpn..lpn + pages {
            self.set(l, None);
        }
    }

    fn set(&mut self, lpn: u32, c: Content) {
        self.cur[lpn as usize] = c;
        let acc = &mut self.acceptable[lpn as usize];
        if !acc.contains(&c) {
            acc.push(c);
        }
    }

    /// Records a successful flush: everything current is durable.
    pub fn flush(&mut self) {
        for (acc, c) in self.acceptable.iter_mut().zip(&self.cur) {
            acc.clear();
            acc.push(*c);
        }
    }

    /// Records what `lpn` turned out to hold after an uncertain event; with `durable` (after a
    /// recovery) it also becomes the only acceptable content until the next write.
    pub fn settle(&mut self, lpn: u32, c: Content, durable: bool) {
        self.cur[lpn as usize] = c;
        let acc = &mut self.acceptable[lpn as usize];
        if durable {
            acc.clear();
            acc.push(c);
        } else if !acc.contains(&c) {
            acc.push(c);
        }
    }

    /// Describes a content for messages.
    pub fn describe(&self, c: Content) -> String {
        match c {
            None => "zeros".into(),
            Some(id) if id & SHARED_CONTENT != 0 => format!("shared content {}", id & !SHARED_CONTENT),
            Some(id) => match self.origin.get(id as usize - 1) {
                Some((l, s)) => format!("id {id} (lpn {l}, step {s})"),
                None => format!("id {id} (unknown)"),
            },
        }
    }

    fn describe_set(&self, set: &[Content]) -> String {
        let v: Vec<String> = set.iter().map(|&c| self.describe(c)).collect();
        format!("{{{}}}", v.join(", "))
    }
}

// ---------------------------------------------------------------------------------------------
// Operations and sessions

/// One step of a workload.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Op {
    /// Writes `pages` pages (clamped to the capacity) from `lpn`.
    Write { lpn: u32, pages: u32 },
    /// Writes `pages` pages (clamped) from `lpn` with shared contents `content, content + 1, ...`
    /// (of [`DUP_POOL`], the same bytes whatever the logical page: duplicates).
    Dup { lpn: u32, pages: u32, content: u32 },
    /// Reads `pages` pages (clamped) from `lpn` and compares them with the model.
    Read { lpn: u32, pages: u32 },
    /// Trims `pages` pages (clamped) from `lpn`.
    Trim { lpn: u32, pages: u32 },
    /// Flushes.
    Flush,
    /// Schedules a power cut `after` device operations from now (replacing a pending one); when
    /// it fires, the recovery mount is cut too after `mount_after` operations, if given.
    Cut { after: u32, mount_after: Option<u32> },
    /// Unmounts cleanly and mounts again.
    Remount,
    /// Cuts power at the device operation `after` operations from now (replacing a pending cut)
    /// and restores it as soon as the FTL call it hit returns: the host goes on with the same
    /// FTL instance, no remount (a brown-out the device survives).
    Blip { after: u32 },
    /// Fails the device operation `after` operations from now with a timeout, after doing it
    /// (`performed`) or without doing it; the host goes on with the same FTL instance.
    Transient { after: u32, performed: bool },
}

/// Parses ops written compactly, separated by whitespace: `W<lpn>+<pages>` (write),
/// `D<lpn>+<pages>` (shared contents from 0), `R<lpn>+<pages>` (read), `T<lpn>+<pages>` (trim), `F` (flush), `C<after>` or
/// `C<after>/<mount_after>` (cut), `M` (clean remount), `B<after>` (power blip), `X<after>` and
/// `Y<after>` (timeout without and after doing the operation). For regression tests.
pub fn parse_ops(s: &str) -> Vec<Op> {
    let range = |t: &str| -> (u32, u32) {
        let (a, b) = t.split_once('+').unwrap_or_else(|| panic!("bad op range {t:?}"));
        (a.parse().unwrap(), b.parse().unwrap())
    };
    s.split_whitespace()
        .map(|t| {
            let (k, rest) = t.split_at(1);
            match k {
                "W" => {
                    let (lpn, pages) = range(rest);
                    Op::Write { lpn, pages }
                }
                "D" => {
                    let (lpn, pages) = range(rest);
                    Op::Dup { lpn, pages, content: 0 }
                }
                "R" => {
                    let (lpn, pages) = range(rest);
                    Op::Read { lpn, pages }
                }
                "T" => {
                    let (lpn, pages) = range(rest);
                    Op::Trim { lpn, pages }
                }
                "F" => Op::Flush,
                "M" => Op::Remount,
                "B" => Op::Blip { after: rest.parse().unwrap() },
                "X" => Op::Transient { after: rest.parse().unwrap(), performed: false },
                "Y" => Op::Transient { after: rest.parse().unwrap(), performed: true },
                "C" => match rest.split_once('/') {
                    Some((a, m)) => {
                        Op::Cut { after: a.parse().unwrap(), mount_after: Some(m.parse().unwrap()) }
                    }
                    None => Op::Cut { after: rest.parse().unwrap(), mount_after: None },
                },
                _ => panic!("bad op {t:?}"),
            }
        })
        .collect()
}

/// A device whose power can be cut.
pub trait CutControl: NandFlash {
    /// Schedules a cut `after` operations from now.
    fn schedule_cut(&mut self, after: u64);

    /// Schedules a cut that the host survives without a remount ([`Op::Blip`]). Devices that
    /// cannot restore power by themselves treat it as a cut.
    fn schedule_blip(&mut self, after: u64) {
        self.schedule_cut(after);
    }

    /// Schedules a transient failure ([`Op::Transient`]). Devices without them ignore it.
    fn schedule_transient(&mut self, _after: u64, _performed: bool) {}

    /// Whether a survivable fault (a blip or a transient failure) fired since the last call;
    /// restores the power a blip took. The session then goes on with the same FTL.
    fn take_survived_fault(&mut self) -> bool {
        false
    }

    /// Drops every scheduled blip and transient failure (a session ended).
    fn clear_survivable_faults(&mut self) {}
}

impl CutControl for &mut Emulator {
    fn schedule_cut(&mut self, after: u64) {
        self.schedule_power_cut(after);
    }
}

/// Survivable faults scheduled on a [`Faulty`] device, kept across FTL instances by [`Env`].
#[derive(Clone, Debug, Default)]
pub struct FaultPlan {
    /// The emulator operation index that fails with a timeout, and whether it is done first.
    transient: Option<(u64, bool)>,
    /// A scheduled power cut is a blip.
    blip: bool,
    /// A transient failure fired since the session last asked.
    fired: bool,
    /// Transient failures fired in all (never reset).
    pub transients_fired: u32,
    /// Power cuts that hit a copy-back, during its read and during its program (never reset).
    pub copy_back_cuts: [u32; 2],
    /// Power cuts that hit a multi-plane program (never reset).
    pub multi_program_cuts: u32,
    /// Of those, the cuts that hit a second write's program: every page of the call carries
    /// whole second-write metadata (never reset; feature `wom`).
    pub second_write_cuts: u32,
    /// The device operation index of the first page of every second write's multi-plane program
    /// issued (never reset; feature `wom`): a workload's cut points inside second writes.
    pub second_write_ops: Vec<u64>,
    /// The device operation index of the first page of every multi-plane program issued, and
    /// its pages (never reset; second writes' included).
    pub multi_program_ops: Vec<(u64, usize)>,
}

/// Whether a program's `spare` carries whole second-write metadata (a half of a second write,
/// not an activation marker); false without feature `wom`.
pub fn is_second_write_spare(spare: &[u8]) -> bool {
    #[cfg(feature = "wom")]
    {
        use ftl_core::reuse::{SwMeta, SwState, SW_META_LEN};
        let tail = &spare[spare.len().saturating_sub(SW_META_LEN)..];
        matches!(SwMeta::decode(tail), SwState::Valid(m) if m.half < 2)
    }
    #[cfg(not(feature = "wom"))]
    {
        let _ = spare;
        false
    }
}

/// The emulator with survivable faults: blips (power cut, restored when the FTL call returns)
/// and transient timeouts, before or after the operation is done. Without a fault planned every
/// call goes straight to the emulator.
pub struct Faulty<'a> {
    /// The device.
    pub emu: &'a mut Emulator,
    /// What is scheduled.
    pub plan: &'a mut FaultPlan,
}

impl Faulty<'_> {
    fn op<T>(
        &mut self,
        f: impl FnOnce(&mut Emulator) -> Result<T, nand_emu::EmuError>,
    ) -> Result<T, ErrorKind> {
        if let Some((at, performed)) = self.plan.transient {
            if self.emu.ops_issued() == at && self.emu.is_powered() {
                self.plan.transient = None;
                self.plan.fired = true;
                self.plan.transients_fired += 1;
                if performed {
                    let _ = f(self.emu);
                }
                return Err(ErrorKind::Timeout);
            }
        }
        f(self.emu).map_err(|e| nand_hal::Error::kind(&e))
    }
}

impl nand_hal::ErrorType for Faulty<'_> {
    type Error = ErrorKind;
}

impl NandFlash for Faulty<'_> {
    fn geometry(&self) -> Geometry {
        self.emu.geometry()
    }
    fn read_page(
        &mut self,
        page: nand_hal::PageId,
        data: &mut [u8],
        spare: &mut [u8],
    ) -> Result<(), ErrorKind> {
        self.op(|e| e.read_page(page, data, spare))
    }
    fn program_page(&mut self, page: nand_hal::PageId, data: &[u8], spare: &[u8]) -> Result<(), ErrorKind> {
        self.op(|e| e.program_page(page, data, spare))
    }
    fn erase_block(&mut self, block: nand_hal::BlockId) -> Result<(), ErrorKind> {
        self.op(|e| e.erase_block(block))
    }
    fn is_bad(&mut self, block: nand_hal::BlockId) -> Result<bool, ErrorKind> {
        self.op(|e| e.is_bad(block))
    }
    fn mark_bad(&mut self, block: nand_hal::BlockId) -> Result<(), ErrorKind> {
        self.op(|e| e.mark_bad(block))
    }
    // Multi-plane calls keep the emulator's own semantics unless a transient failure is planned
    // (then they run one operation at a time, so it can hit any of them).
    fn read_multi(&mut self, ops: &mut [nand_hal::ReadOp<'_>]) -> Result<(), (usize, ErrorKind)> {
        if self.plan.transient.is_some() {
            for (i, op) in ops.iter_mut().enumerate() {
                self.read_page(op.page, op.data, op.spare).map_err(|e| (i, e))?;
            }
            return Ok(());
        }
        self.emu.read_multi(ops).map_err(|(i, e)| (i, nand_hal::Error::kind(&e)))
    }
    fn program_multi(&mut self, ops: &[nand_hal::ProgramOp<'_>]) -> Result<(), (usize, ErrorKind)> {
        if self.plan.transient.is_some() {
            for (i, op) in ops.iter().enumerate() {
                self.program_page(op.page, op.data, op.spare).map_err(|e| (i, e))?;
            }
            return Ok(());
        }
        let (powered, at) = (self.emu.is_powered(), self.emu.ops_issued());
        let second = !ops.is_empty() && ops.iter().all(|o| is_second_write_spare(o.spare));
        if powered {
            self.plan.multi_program_ops.push((at, ops.len()));
            if second {
                self.plan.second_write_ops.push(at);
            }
        }
        let r = self.emu.program_multi(ops);
        if r.is_err() && powered && !self.emu.is_powered() {
            self.plan.multi_program_cuts += 1;
            self.plan.second_write_cuts += second as u32;
        }
        r.map_err(|(i, e)| (i, nand_hal::Error::kind(&e)))
    }
    fn erase_multi(&mut self, blocks: &[nand_hal::BlockId]) -> Result<(), (usize, ErrorKind)> {
        if self.plan.transient.is_some() {
            for (i, b) in blocks.iter().enumerate() {
                self.erase_block(*b).map_err(|e| (i, e))?;
            }
            return Ok(());
        }
        self.emu.erase_multi(blocks).map_err(|(i, e)| (i, nand_hal::Error::kind(&e)))
    }
    fn copy_back_caps(&self) -> nand_hal::CopyBackCaps {
        self.emu.copy_back_caps()
    }
    // The emulator's copy-back (two operations: read, program) unless a transient failure is
    // planned (then the read + program fallback through this wrapper, so it can hit either).
    fn copy_back(
        &mut self,
        op: nand_hal::CopyBackOp<'_>,
        check: &mut dyn FnMut(&mut [u8], &mut [u8]) -> nand_hal::CopyBackAction,
    ) -> Result<nand_hal::CopyBackAction, nand_hal::CopyBackError<ErrorKind>> {
        use nand_hal::CopyBackError as E;
        if self.plan.transient.is_some() {
            let caps = self.copy_back_caps();
            return nand_hal::copy_back::copy_back_fallback(self, caps, op, check);
        }
        let r = self.emu.copy_back(op, check);
        let cut = !self.emu.is_powered();
        r.map_err(|e| match e {
            E::Refused(r) => E::Refused(r),
            E::Read(e) => {
                self.plan.copy_back_cuts[0] += cut as u32;
                E::Read(nand_hal::Error::kind(&e))
            }
            E::Program(e) => {
                self.plan.copy_back_cuts[1] += cut as u32;
                E::Program(nand_hal::Error::kind(&e))
            }
        })
    }
}

impl CutControl for Faulty<'_> {
    fn schedule_cut(&mut self, after: u64) {
        self.plan.blip = false;
        self.emu.schedule_power_cut(after);
    }
    fn schedule_blip(&mut self, after: u64) {
        self.plan.blip = true;
        self.emu.schedule_power_cut(after);
    }
    fn schedule_transient(&mut self, after: u64, performed: bool) {
        self.plan.transient = Some((self.emu.ops_issued().saturating_add(after), performed));
    }
    fn take_survived_fault(&mut self) -> bool {
        let mut survived = std::mem::take(&mut self.plan.fired);
        if self.plan.blip && !self.emu.is_powered() {
            self.plan.blip = false;
            self.emu.restore_power();
            survived = true;
        }
        survived
    }
    fn clear_survivable_faults(&mut self) {
        if self.plan.blip {
            self.emu.cancel_power_cut();
        }
        *self.plan = FaultPlan {
            transients_fired: self.plan.transients_fired,
            copy_back_cuts: self.plan.copy_back_cuts,
            multi_program_cuts: self.plan.multi_program_cuts,
            second_write_cuts: self.plan.second_write_cuts,
            second_write_ops: std::mem::take(&mut self.plan.second_write_ops),
            multi_program_ops: std::mem::take(&mut self.plan.multi_program_ops),
            ..FaultPlan::default()
        };
    }
}

/// How a [`session`] ended.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Every op ran.
    End,
    /// An op asked for a clean remount.
    Remount,
    /// A power cut fired.
    Cut,
    /// A device error other than a power cut (only with [`Ctx::stop_on_device_error`]).
    DeviceError(Error),
}

/// How much a session reads back after each op.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Verify {
    /// Every logical page after every op.
    All,
    /// The pages the op touched.
    Touched,
}

/// The mutable context of a session.
pub struct Ctx<'a> {
    /// The expectation.
    pub model: &'a mut Model,
    /// Recent events, for failure messages.
    pub log: &'a mut Log,
    /// Read-back policy.
    pub verify: Verify,
    /// The recovery-mount cut of the last `Op::Cut`.
    pub mount_cut: &'a mut Option<u32>,
    /// Whether a device error other than a power cut stops the session (instead of failing it).
    pub stop_on_device_error: bool,
    /// FlexECC intents ([`Env::flex_intents`]).
    pub flex_intents: bool,
}

impl<'a> Ctx<'a> {
    /// Reads back the touched pages; a device error other than a power cut fails the session.
    pub fn touched(model: &'a mut Model, log: &'a mut Log, mount_cut: &'a mut Option<u32>) -> Self {
        Ctx {
            model,
            log,
            verify: Verify::Touched,
            mount_cut,
            stop_on_device_error: false,
            flex_intents: false,
        }
    }
}

/// A bounded log of recent events.
#[derive(Default, Debug)]
pub struct Log {
    lines: std::collections::VecDeque<String>,
}

impl Log {
    /// Adds a line (keeps the last 60).
    pub fn push(&mut self, s: String) {
        if self.lines.len() == 60 {
            self.lines.pop_front();
        }
        self.lines.push_back(s);
    }

    /// The recent lines, one per line.
    pub fn dump(&self) -> String {
        let mut out = String::new();
        for l in &self.lines {
            let _ = writeln!(out, "  {l}");
        }
        out
    }
}

fn clamp(model: &Model, lpn: u32, pages: u32) -> (u32, u32) {
    let lpn = lpn % model.len();
    (lpn, pages.clamp(1, model.len() - lpn))
}

/// An FTL error in a session: a power cut stops the session, anything else fails the test.
fn check<T>(r: Result<T, Error>, what: &str) -> Result<Result<T, Outcome>, String> {
    match r {
        Ok(v) => Ok(Ok(v)),
        Err(e) if is_power_loss(&e) => Ok(Err(Outcome::Cut)),
        Err(e) => Err(format!("{what} failed: {e:?}")),
    }
}

/// As [`check`], and device errors stop the session when `stop` is set.
fn check_dev<T>(r: Result<T, Error>, what: &str, stop: bool) -> Result<Result<T, Outcome>, String> {
    match r {
        Err(Error::Device(k)) if stop && k != ErrorKind::PowerLoss => {
            Ok(Err(Outcome::DeviceError(Error::Device(k))))
        }
        r => check(r, what),
    }
}

/// Reads `pages` pages from `lpn` and compares them with the model's current contents.
pub fn verify_range<N: NandFlash, P: PolicySet>(
    ftl: &mut TestFtl<'_, N, P>,
    model: &Model,
    lpn: u32,
    pages: u32,
) -> Result<Result<(), Outcome>, String> {
    verify_range_stop(ftl, model, lpn, pages, false)
}

fn verify_range_stop<N: NandFlash, P: PolicySet>(
    ftl: &mut TestFtl<'_, N, P>,
    model: &Model,
    lpn: u32,
    pages: u32,
    stop: bool,
) -> Result<Result<(), Outcome>, String> {
    let pb = ftl.page_bytes() as usize;
    let mut buf = vec![0u8; pages as usize * pb];
    if let Err(o) = check_dev(ftl.read(lpn, &mut buf), &format!("read of lpn {lpn}+{pages}"), stop)? {
        return Ok(Err(o));
    }
    for (i, page) in buf.chunks_exact(pb).enumerate() {
        let l = lpn + i as u32;
        let want = model.cur[l as usize];
        let got = identify(l, page);
        if got != Found::Content(want) {
            return Err(format!(
                "lpn {l} reads {} but the model says {}",
                match got {
                    Found::Content(c) => model.describe(c),
                    Found::Garbage => "garbage".into(),
                },
                model.describe(want)
            ));
        }
    }
    Ok(Ok(()))
}

/// Writes `data` from `lpn`: `clean` (FlexECC's [`ftl_core::intent::Intent::Clean`], the
/// detecting format) or a plain write (dirty).
#[cfg(feature = "flex-ecc")]
fn write_intent<N: NandFlash, P: PolicySet>(
    ftl: &mut TestFtl<'_, N, P>,
    lpn: u32,
    data: &[u8],
    clean: bool,
) -> Result<(), Error> {
    if clean {
        ftl.write_with(lpn, data, ftl_core::intent::Intent::Clean)
    } else {
        ftl.write(lpn, data)
    }
}

/// Without feature `flex-ecc`: a plain write.
#[cfg(not(feature = "flex-ecc"))]
fn write_intent<N: NandFlash, P: PolicySet>(
    ftl: &mut TestFtl<'_, N, P>,
    lpn: u32,
    data: &[u8],
    _clean: bool,
) -> Result<(), Error> {
    ftl.write(lpn, data)
}

/// FlexECC's flush-reads of `pages` pages from `lpn`, one at a time (each good correcting page
/// marked for GC to drop to the detecting format), each compared with the model.
#[cfg(feature = "flex-ecc")]
fn flush_read_range<N: NandFlash, P: PolicySet>(
    ftl: &mut TestFtl<'_, N, P>,
    model: &Model,
    lpn: u32,
    pages: u32,
    stop: bool,
) -> Result<Result<(), Outcome>, String> {
    use ftl_core::intent::PageRead;
    let mut buf = vec![0u8; ftl.page_bytes() as usize];
    for l in lpn..lpn + pages {
        let r = match check_dev(ftl.flush_read(l, &mut buf), &format!("flush-read of lpn {l}"), stop)? {
            Ok(r) => r,
            Err(o) => return Ok(Err(o)),
        };
        if let PageRead::Corrupt { .. } = r {
            return Err(format!("flush-read of lpn {l}: {r:?}"));
        }
        let (want, got) = (model.cur[l as usize], identify(l, &buf));
        if got != Found::Content(want) {
            return Err(format!("flush-read of lpn {l}: {got:?}, the model says {}", model.describe(want)));
        }
    }
    Ok(Ok(()))
}

/// Without feature `flex-ecc`: plain reads.
#[cfg(not(feature = "flex-ecc"))]
fn flush_read_range<N: NandFlash, P: PolicySet>(
    ftl: &mut TestFtl<'_, N, P>,
    model: &Model,
    lpn: u32,
    pages: u32,
    stop: bool,
) -> Result<Result<(), Outcome>, String> {
    verify_range_stop(ftl, model, lpn, pages, stop)
}

/// Reads every logical page and compares it with the model.
pub fn verify_all<N: NandFlash, P: PolicySet>(
    ftl: &mut TestFtl<'_, N, P>,
    model: &Model,
) -> Result<Result<(), Outcome>, String> {
    verify_all_stop(ftl, model, false)
}

fn verify_all_stop<N: NandFlash, P: PolicySet>(
    ftl: &mut TestFtl<'_, N, P>,
    model: &Model,
    stop: bool,
) -> Result<Result<(), Outcome>, String> {
    let n = model.len();
    let chunk = 8;
    let mut l = 0;
    while l < n {
        let k = chunk.min(n - l);
        if let Err(o) = verify_range_stop(ftl, model, l, k, stop)? {
            return Ok(Err(o));
        }
        l += k;
    }
    Ok(Ok(()))
}

/// After an uncertain event (a power cut and recovery, a device error): every logical page must
/// read as one of its acceptable contents; the model then takes what was read. `durable` after a
/// recovery (see [`Model::settle`]). Returns how many pages did not read as their current content.
pub fn settle_all<N: NandFlash, P: PolicySet>(
    ftl: &mut TestFtl<'_, N, P>,
    model: &mut Model,
    durable: bool,
) -> Result<Result<u32, Outcome>, String> {
    let pb = ftl.page_bytes() as usize;
    let mut buf = vec![0u8; pb];
    let mut seen = Vec::with_capacity(model.len() as usize);
    for l in 0..model.len() {
        if let Err(o) = check(ftl.read(l, &mut buf), &format!("read of lpn {l} after recovery"))? {
            return Ok(Err(o));
        }
        let acc = &model.acceptable[l as usize];
        match identify(l, &buf) {
            Found::Content(c) if acc.contains(&c) => seen.push(c),
            got => {
                return Err(format!(
                    "lpn {l} reads {} but only {} are acceptable (current {})",
                    match got {
                        Found::Content(c) => model.describe(c),
                        Found::Garbage => "garbage".into(),
                    },
                    model.describe_set(acc),
                    model.describe(model.cur[l as usize]),
                ))
            }
        }
    }
    let mut changed = 0;
    for (l, c) in seen.into_iter().enumerate() {
        if model.cur[l] != c {
            changed += 1;
        }
        model.settle(l as u32, c, durable);
    }
    Ok(Ok(changed))
}

/// Runs `ops[*next..]` on `ftl` until the end, a `Remount` op or a power cut. `*next` is left at
/// the op after the last one run. Model updates happen before the FTL call, so a call cut short
/// leaves its contents among the acceptable ones.
pub fn session<N: CutControl, P: PolicySet>(
    ftl: &mut TestFtl<'_, N, P>,
    ctx: &mut Ctx<'_>,
    ops: &[Op],
    next: &mut usize,
) -> Result<Outcome, String> {
    let pb = ftl.page_bytes() as usize;
    let mut buf = Vec::new();
    while *next < ops.len() {
        let op = ops[*next];
        let step = *next;
        *next += 1;
        ctx.model.step = step;
        ctx.log.push(format!("step {step}: {op:?}"));
        ftl.nand_mut().take_survived_fault();
        let r = session_step(ftl, ctx, op, step, pb, &mut buf);
        if ftl.nand_mut().take_survived_fault() {
            // A blip or a transient failure hit this step: the FTL must have kept a consistent
            // state. Every page reads as an acceptable content (the one before or any written
            // since the last flush); the session goes on with the same instance.
            ctx.log.push(format!("step {step}: survivable fault ({r:?}), checking every page"));
            // The other scheduled one (a blip and a timeout can both be pending) would hit the
            // check itself: it is dropped.
            ftl.nand_mut().clear_survivable_faults();
            match settle_all(ftl, ctx.model, false)
                .map_err(|e| format!("after a fault in step {step}: {e}"))?
            {
                Ok(_) => continue,
                Err(o) => return Ok(o),
            }
        }
        match r? {
            Ok(()) => {}
            Err(o) => return Ok(o),
        }
    }
    Ok(Outcome::End)
}

/// One op of [`session`] and the read-back after it.
fn session_step<N: CutControl, P: PolicySet>(
    ftl: &mut TestFtl<'_, N, P>,
    ctx: &mut Ctx<'_>,
    op: Op,
    step: usize,
    pb: usize,
    buf: &mut Vec<u8>,
) -> Result<Result<(), Outcome>, String> {
    let touched = match op {
        Op::Write { lpn, pages } | Op::Dup { lpn, pages, .. } => {
            let (lpn, pages) = clamp(ctx.model, lpn, pages);
            let ids = match op {
                Op::Dup { content, .. } => ctx.model.write_shared(lpn, pages, content),
                _ => ctx.model.write(lpn, pages),
            };
            buf.resize(pages as usize * pb, 0);
            for (i, id) in ids.iter().enumerate() {
                fill_page(lpn + i as u32, *id, &mut buf[i * pb..(i + 1) * pb]);
            }
            let clean = ctx.flex_intents && step % 3 == 1;
            if let Err(o) = check_dev(
                write_intent(ftl, lpn, buf, clean),
                &format!("step {step}: write"),
                ctx.stop_on_device_error,
            )? {
                return Ok(Err(o));
            }
            Some((lpn, pages))
        }
        Op::Read { lpn, pages } => {
            let (lpn, pages) = clamp(ctx.model, lpn, pages);
            let r = if ctx.flex_intents && step.is_multiple_of(2) {
                flush_read_range(ftl, ctx.model, lpn, pages, ctx.stop_on_device_error)
            } else {
                verify_range_stop(ftl, ctx.model, lpn, pages, ctx.stop_on_device_error)
            };
            if let Err(o) = r.map_err(|e| format!("step {step}: {e}"))? {
                return Ok(Err(o));
            }
            None
        }
        Op::Trim { lpn, pages } => {
            let (lpn, pages) = clamp(ctx.model, lpn, pages);
            ctx.model.trim(lpn, pages);
            if let Err(o) =
                check_dev(ftl.trim(lpn, pages), &format!("step {step}: trim"), ctx.stop_on_device_error)?
            {
                return Ok(Err(o));
            }
            Some((lpn, pages))
        }
        Op::Flush => {
            if let Err(o) = check_dev(ftl.flush(), &format!("step {step}: flush"), ctx.stop_on_device_error)?
            {
                return Ok(Err(o));
            }
            ctx.model.flush();
            None
        }
        Op::Cut { after, mount_after } => {
            ftl.nand_mut().schedule_cut(after as u64);
            *ctx.mount_cut = mount_after;
            None
        }
        Op::Blip { after } => {
            ftl.nand_mut().schedule_blip(after as u64);
            None
        }
        Op::Transient { after, performed } => {
            ftl.nand_mut().schedule_transient(after as u64, performed);
            None
        }
        Op::Remount => return Ok(Err(Outcome::Remount)),
    };
    let r = match (ctx.verify, touched) {
        (Verify::All, _) => verify_all_stop(ftl, ctx.model, ctx.stop_on_device_error),
        (Verify::Touched, Some((lpn, pages))) => {
            verify_range_stop(ftl, ctx.model, lpn, pages, ctx.stop_on_device_error)
        }
        (Verify::Touched, None) => Ok(Ok(())),
    };
    r.map_err(|e| format!("after step {step}: {e}"))
}

// ---------------------------------------------------------------------------------------------
// The environment: emulator, memory, model, and the driver of cuts and remounts

/// Sums of the counters of every FTL instance of a run.
#[derive(Copy, Clone, Debug, Default)]
pub struct Totals {
    /// GC blocks.
    pub gc_blocks: u64,
    /// GC page copies.
    pub gc_page_copies: u64,
    /// NAND programs.
    pub nand_programs: u64,
    /// Checkpoints.
    pub checkpoints: u64,
    /// Journal pages.
    pub journal_pages: u64,
    /// Blocks retired.
    pub blocks_retired: u64,
    /// Program failures.
    pub program_failures: u64,
    /// Erase failures.
    pub erase_failures: u64,
    /// Host pages written.
    pub host_write_pages: u64,
    /// Wear-leveling moves.
    pub wear_level_moves: u64,
    /// Second writes (feature `wom`).
    pub second_writes: u64,
    /// GC rewrites of second writes (feature `wom`).
    pub second_write_gc_rewrites: u64,
    /// Pages deduplicated (feature `dedup`).
    pub deduplicated: u64,
    /// Pages the NV cache took on writes (feature `cdm`).
    pub nv_write_inserts: u64,
    /// Host reads the NV cache served (feature `cdm`).
    pub nv_read_hits: u64,
    /// Pages FlexECC wrote as dirty (correcting; feature `flex-ecc`).
    pub flex_dirty_writes: u64,
    /// Correcting pages GC moved as such (feature `flex-ecc`).
    pub flex_correcting_moved: u64,
    /// Pages FlexECC wrote as clean (detecting; feature `flex-ecc`).
    pub flex_clean_writes: u64,
    /// Flush-reads that marked a page (feature `flex-ecc`).
    pub flex_marked: u64,
    /// Marked pages GC rewrote in the detecting format (feature `flex-ecc`).
    pub flex_converted: u64,
    /// Detecting pages GC moved as such (feature `flex-ecc`).
    pub flex_detecting_moved: u64,
    /// Map pages read (cached map).
    pub map_page_reads: u64,
    /// Map pages written (cached map).
    pub map_page_writes: u64,
    /// GC moves by copy-back.
    pub gc_copy_backs: u64,
    /// Copy-backs whose check aborted (the page moved the plain way).
    pub gc_copy_back_aborts: u64,
    /// Multi-plane programs (`ftl_core::multiplane`).
    pub multi_plane_programs: u64,
    /// Multi-plane erases.
    pub multi_plane_erases: u64,
    /// Multi-plane reads.
    pub multi_plane_reads: u64,
    /// Pages voided to realign the planes (`ftl_core::multiplane`).
    pub realign_pads: u64,
    /// GC stripes (`ftl_core::gc_stripe`).
    pub gc_stripes: u64,
    /// Index probes of deduplication's write path (feature `dedup`).
    pub dedup_probes: u64,
    /// Shared pages GC moved (feature `dedup`).
    pub shared_moves: u64,
}

impl Totals {
    /// Adds one instance's counters.
    pub fn add(&mut self, c: &Counters) {
        self.gc_blocks += c.gc_blocks;
        self.checkpoints += c.checkpoints;
        self.map_page_reads += c.map_page_reads;
        self.map_page_writes += c.map_page_writes;
        self.journal_pages += c.journal_pages;
        self.blocks_retired += c.blocks_retired;
        self.program_failures += c.program_failures;
        self.erase_failures += c.erase_failures;
        self.host_write_pages += c.host_write_pages;
        self.wear_level_moves += c.wear_level_moves;
        self.gc_copy_backs += c.gc_copy_backs;
        self.gc_copy_back_aborts += c.gc_copy_back_aborts;
        self.multi_plane_programs += c.multi_plane_programs;
        self.multi_plane_erases += c.multi_plane_erases;
        self.multi_plane_reads += c.multi_plane_reads;
        self.realign_pads += c.realign_pads;
        self.gc_stripes += c.gc_stripes;
        self.gc_page_copies += c.gc_page_copies;
        self.nand_programs += c.nand_programs;
    }

    /// Adds one instance's counters and, if it had second writes on, their counts.
    pub fn add_ftl<N: NandFlash, P: PolicySet>(&mut self, ftl: &TestFtl<'_, N, P>) {
        self.add(ftl.counters());
        self.add_reuse(ftl);
        self.add_dedup(ftl);
        self.add_nv(ftl);
        self.add_flex(ftl);
    }

    #[cfg(feature = "dedup")]
    fn add_dedup<N: NandFlash, P: PolicySet>(&mut self, ftl: &TestFtl<'_, N, P>) {
        let d = ftl.dedup_stats();
        self.deduplicated += d.deduplicated;
        self.dedup_probes += d.probes;
        self.shared_moves += d.shared_moves;
    }

    /// Without feature `dedup` nothing is deduplicated.
    #[cfg(not(feature = "dedup"))]
    fn add_dedup<N: NandFlash, P: PolicySet>(&mut self, _ftl: &TestFtl<'_, N, P>) {}

    #[cfg(feature = "cdm")]
    fn add_nv<N: NandFlash, P: PolicySet>(&mut self, ftl: &TestFtl<'_, N, P>) {
        if let Some(c) = ftl.nv_counters() {
            self.nv_write_inserts += c.write_inserts;
            self.nv_read_hits += c.read_hits;
        }
    }

    /// Without feature `cdm` there is no NV cache.
    #[cfg(not(feature = "cdm"))]
    fn add_nv<N: NandFlash, P: PolicySet>(&mut self, _ftl: &TestFtl<'_, N, P>) {}

    #[cfg(feature = "flex-ecc")]
    fn add_flex<N: NandFlash, P: PolicySet>(&mut self, ftl: &TestFtl<'_, N, P>) {
        let c = ftl.flex_counters();
        self.flex_dirty_writes += c.dirty_writes;
        self.flex_correcting_moved += c.correcting_moved;
        self.flex_clean_writes += c.clean_writes;
        self.flex_marked += c.marked;
        self.flex_converted += c.converted;
        self.flex_detecting_moved += c.detecting_moved;
    }

    /// Without feature `flex-ecc` there is no FlexECC.
    #[cfg(not(feature = "flex-ecc"))]
    fn add_flex<N: NandFlash, P: PolicySet>(&mut self, _ftl: &TestFtl<'_, N, P>) {}

    #[cfg(feature = "wom")]
    fn add_reuse<N: NandFlash, P: PolicySet>(&mut self, ftl: &TestFtl<'_, N, P>) {
        if let Some(s) = ftl.reuse_stats() {
            self.second_writes += s.second_writes;
            self.second_write_gc_rewrites += s.gc_rewrites;
        }
    }

    /// Without feature `wom` no instance makes second writes.
    #[cfg(not(feature = "wom"))]
    fn add_reuse<N: NandFlash, P: PolicySet>(&mut self, _ftl: &TestFtl<'_, N, P>) {}
}

/// How a run ended.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct RunStats {
    /// Power cuts that fired during the workload.
    pub cuts: u32,
    /// Cuts that fired during a recovery mount.
    pub mount_cuts: u32,
    /// Clean remounts.
    pub remounts: u32,
    /// Whether the cut hit the format (the run stopped there).
    pub format_cut: bool,
    /// Device operations issued when the workload ended (before the final checks).
    pub ops_at_end: u64,
    /// Pages that recovered to something other than their current content.
    pub rolled_back: u32,
}

/// Where a run starts.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Start {
    /// Formats the device first (a cut there ends the run after checking the aftermath).
    Format,
    /// Mounts a cleanly unmounted device.
    Mount,
}

/// An emulator, the FTL's memory and the model, and the driver that runs workloads on them.
pub struct Env<P = DefaultPolicies> {
    /// The device.
    pub emu: Emulator,
    /// The FTL's memory (reused by every mount).
    pub mem: FtlMemory,
    /// The FTL configuration.
    pub cfg: Config,
    /// The expectation.
    pub model: Model,
    /// Recent events.
    pub log: Log,
    /// Read-back policy.
    pub verify: Verify,
    /// After a cut, run at most this many more ops before ending (None: all of them).
    pub ops_after_cut: Option<usize>,
    /// Counter sums.
    pub totals: Totals,
    /// Run statistics.
    pub stats: RunStats,
    /// Cut the next recovery mount after this many device operations (set by `Op::Cut`).
    pub mount_cut: Option<u32>,
    /// Keep a power cut scheduled at all times, at random offsets.
    pub random_cuts: Option<RandomCuts>,
    /// The policies every format and mount gets (a clone each).
    pub policies: P,
    /// The techniques stacked on every format and mount ([`stack`]; none unless given).
    pub ext: ExtParts,
    /// Blips and transient failures scheduled by [`Op::Blip`] and [`Op::Transient`].
    pub faults: FaultPlan,
    /// Paced GC on every instance (`Ftl::set_gc_pacing`; on by default, as in the FTL).
    pub gc_pacing: bool,
    /// Multi-plane operations on every instance (`Ftl::set_multi_plane`; on by default, as in
    /// the FTL; `FTL_MULTI_PLANE=0` turns them off in every harness run).
    pub multi_plane: bool,
    /// FlexECC intents (feature `flex-ecc`, with FlexECC attached; off by default): every third
    /// write op is clean (`write_with(Intent::Clean)`: the detecting format), every other read op
    /// flush-reads its pages one by one (GC then drops them to the detecting format); the model
    /// is the same (the content does not depend on the format). Without the feature: plain
    /// writes and reads.
    pub flex_intents: bool,
}

/// Power cuts at random offsets, rescheduled whenever none is pending.
#[derive(Clone, Debug)]
pub struct RandomCuts {
    /// The generator of offsets.
    pub rng: Rng,
    /// Offsets are below this many device operations.
    pub max_after: u64,
    /// Chance (in 1/100) that the recovery mount after a cut is cut too.
    pub mount_cut_percent: u64,
    /// Mount cuts are below this many device operations.
    pub max_mount_after: u64,
}

impl RandomCuts {
    /// The second-write and bit-error suites' cuts: within 600 operations, a quarter of the
    /// recovery mounts cut too (within 300), offsets drawn from `seed`.
    pub fn within_600(seed: u64) -> Self {
        RandomCuts { rng: Rng::new(seed), max_after: 600, mount_cut_percent: 25, max_mount_after: 300 }
    }
}

impl Env {
    /// A new environment over `emu` (nothing done to it yet), with the baseline policies.
    pub fn new(emu: Emulator, cfg: Config) -> Self {
        Env::with_policies(emu, cfg, DefaultPolicies::default())
    }

    /// A new environment over a fault-free emulator of `geo`.
    pub fn with_geometry(geo: Geometry, cfg: Config) -> Self {
        Self::new(Emulator::new(EmulatorConfig::new(geo)).expect("emulator"), cfg)
    }
}

impl<P> Env<P> {
    /// Runs the FTL with `map` (before the first op: memory is reused by every mount). Of the
    /// techniques only FlexECC runs on the cached map (`ftl_core::ext::Refusal::FlashResidentMap`):
    /// with it the others are dropped.
    pub fn use_map(&mut self, map: MapChoice) {
        self.mem = FtlMemory::with_map(&self.emu.geometry(), &self.cfg, sized_map(map, &self.cfg));
        self.mem.lend_gc_stripes(lends_gc_stripes());
        if map != MapChoice::Flat {
            self.ext = ExtParts { flex: self.ext.flex.take(), ..ExtParts::none() };
        }
    }
}

impl Env<stack::BuildPolicies> {
    /// A new environment over `emu` whose FTLs run with what this build enables: its policies
    /// and its techniques stacked ([`stack`]).
    pub fn for_build(emu: Emulator, cfg: Config) -> Self {
        let geo = emu.geometry();
        let mut env = Env::with_policies(emu, cfg, stack::policies(&geo, &cfg));
        env.ext = ExtParts::for_build(&geo, &env.cfg);
        env
    }
}

/// Whether the harness lends GC stripes' page buffers (`ftl_core::gc_stripe`: a raw page per
/// plane of a LUN): yes, as a caller that wants them would; `FTL_TEST_GC_STRIPES=0` turns them
/// off in every harness run (GC then copies page by page, as before they existed).
pub fn lends_gc_stripes() -> bool {
    std::env::var("FTL_TEST_GC_STRIPES").as_deref() != Ok("0")
}

/// The flat map, or the cached map with [`small_map_cache`].
pub fn map_choice(cached: bool) -> MapChoice {
    if cached {
        CACHED
    } else {
        MapChoice::Flat
    }
}

impl<P: PolicySet + Clone> Env<P> {
    /// A new environment over `emu` (nothing done to it yet) whose FTLs run with `policies`.
    pub fn with_policies(emu: Emulator, cfg: Config, policies: P) -> Self {
        let geo = emu.geometry();
        // The mount pool is on as in the library's default (the model and geometries proptests
        // turn it off in half their cases); `FTL_TEST_POOL=0` turns it off in every harness run,
        // `FTL_TEST_POOL=1` on in every one (see docs/design.md, "The mount pool").
        let mut cfg = cfg;
        match std::env::var("FTL_TEST_POOL").as_deref() {
            Ok("0") => cfg.mount_pool_blocks = 0,
            Ok("1") if cfg.mount_pool_blocks == 0 => {
                cfg.mount_pool_blocks = ftl_core::RECOMMENDED_MOUNT_POOL_BLOCKS;
            }
            _ => {}
        }
        // Copy-back GC is on, as in the library's default (GC's reads then read whole pages,
        // which changes the emulator's raw-bit-error draws and so each seeded run's course);
        // `FTL_TEST_COPY_BACK=0` turns it off in every harness run, to rerun a seed on the course
        // it had before (see docs/design.md, "Copy-back").
        cfg.gc_copy_back = std::env::var("FTL_TEST_COPY_BACK").as_deref() != Ok("0");
        let mut mem = test_memory(&geo, &cfg);
        mem.lend_gc_stripes(lends_gc_stripes());
        Env {
            mem,
            emu,
            cfg,
            model: Model::new(cfg.logical_pages),
            log: Log::default(),
            verify: Verify::All,
            ops_after_cut: None,
            totals: Totals::default(),
            stats: RunStats::default(),
            mount_cut: None,
            random_cuts: None,
            policies,
            ext: ExtParts::none(),
            faults: FaultPlan::default(),
            gc_pacing: true,
            multi_plane: !std::env::var("FTL_MULTI_PLANE").is_ok_and(|v| v == "0"),
            flex_intents: false,
        }
    }

    /// A failure message with the recent log and the block table the FTL left.
    pub fn fail(&mut self, msg: String) -> String {
        let geo = self.emu.geometry();
        format!("{msg}\nrecent events:\n{}{}", self.log.dump(), block_summary(&mut self.mem, &geo))
    }

    /// Runs `ops` from `start`, recovering from every power cut, and ends with a full check, a
    /// clean unmount, a mount and another full check.
    pub fn run(&mut self, ops: &[Op], start: Start) -> Result<RunStats, String> {
        self.run_inner(ops, start).map_err(|e| self.fail(e))
    }

    fn run_inner(&mut self, ops: &[Op], start: Start) -> Result<RunStats, String> {
        #[derive(PartialEq)]
        enum Next {
            Format,
            Mount,
            Recover,
        }
        let mut next_op = 0usize;
        let mut limit = ops.len();
        let mut next = match start {
            Start::Format => Next::Format,
            Start::Mount => Next::Mount,
        };
        loop {
            let mut ftl = match next {
                Next::Format => {
                    match open(
                        Faulty { emu: &mut self.emu, plan: &mut self.faults },
                        &mut self.mem,
                        self.ext.extensions(),
                        self.cfg,
                        self.policies.clone(),
                        true,
                    ) {
                        Ok(f) => f,
                        Err(e) if is_power_loss(&e) => {
                            self.log.push("cut during format".into());
                            self.stats.format_cut = true;
                            after_format_cut(
                                &mut self.emu,
                                &mut self.mem,
                                &mut self.ext,
                                self.cfg,
                                &self.model,
                                &self.policies,
                            )?;
                            return Ok(self.stats);
                        }
                        Err(e) => return Err(format!("format failed: {e:?}")),
                    }
                }
                Next::Mount => {
                    match open(
                        Faulty { emu: &mut self.emu, plan: &mut self.faults },
                        &mut self.mem,
                        self.ext.extensions(),
                        self.cfg,
                        self.policies.clone(),
                        false,
                    ) {
                        Ok(mut f) => {
                            self.log.push("mounted".into());
                            match verify_all(&mut f, &self.model)
                                .map_err(|e| format!("after clean remount: {e}"))?
                            {
                                Ok(()) => f,
                                Err(_) => {
                                    self.totals.add_ftl(&f);
                                    next = Next::Recover;
                                    continue;
                                }
                            }
                        }
                        Err(e) if is_power_loss(&e) => {
                            next = Next::Recover;
                            continue;
                        }
                        Err(e) => return Err(format!("clean mount failed: {e:?}")),
                    }
                }
                Next::Recover => {
                    self.stats.cuts += 1;
                    if let Ok(path) = std::env::var("FTL_TESTS_SAVE_BEFORE_RECOVERY") {
                        let mut copy = self.emu.clone();
                        copy.restore_power();
                        copy.save(&path).map_err(|e| format!("saving {path}: {e}"))?;
                    }
                    if let Some(m) = self.mount_cut.take() {
                        self.emu.restore_power();
                        self.emu.schedule_power_cut(m as u64);
                        let r = open(
                            Faulty { emu: &mut self.emu, plan: &mut self.faults },
                            &mut self.mem,
                            self.ext.extensions(),
                            self.cfg,
                            self.policies.clone(),
                            false,
                        )
                        .map(drop);
                        self.emu.cancel_power_cut();
                        match r {
                            Ok(()) => self.log.push(format!("mount cut at {m} did not fire")),
                            Err(e) if is_power_loss(&e) => {
                                self.stats.mount_cuts += 1;
                                self.log.push(format!("cut during recovery mount at op {m}"));
                            }
                            Err(e) => {
                                return Err(format!("mount after a cut (cut again at {m}) failed: {e:?}"))
                            }
                        }
                    }
                    self.emu.restore_power();
                    let truth = if std::env::var("FTL_TESTS_CHECK_POOL").is_ok() && self.ext.is_empty() {
                        survey_table(&self.emu, &self.cfg, self.mem.map_choice(), self.policies.clone())
                    } else {
                        None
                    };
                    let mut f = open(
                        Faulty { emu: &mut self.emu, plan: &mut self.faults },
                        &mut self.mem,
                        self.ext.extensions(),
                        self.cfg,
                        self.policies.clone(),
                        false,
                    )
                    .map_err(|e| format!("mount after a power cut failed: {e:?}"))?;
                    if let Some(t) = truth {
                        for ((b, i), (s, v)) in f.block_infos().zip(t) {
                            let data = |s: BlockState| matches!(s, BlockState::Used | BlockState::Open);
                            if data(s) && !(data(i.state()) && i.valid() >= v) {
                                return Err(format!(
                                    "block {}: mount {:?}/{}, survey {s:?}/{v} ({} surveyed)",
                                    b.0,
                                    i.state(),
                                    i.valid(),
                                    f.counters().mount_surveyed_blocks
                                ));
                            }
                        }
                    }
                    let replayed = f.counters().mount_replayed_pages;
                    let surveyed = f.counters().mount_surveyed_blocks;
                    match settle_all(&mut f, &mut self.model, true)? {
                        Ok(changed) => {
                            self.stats.rolled_back += changed;
                            self.log.push(format!(
                                "recovered: {replayed} pages replayed, {changed} rolled back, {surveyed} blocks surveyed"
                            ));
                        }
                        Err(_) => return Err("power cut during post-recovery check (none scheduled)".into()),
                    }
                    if let Some(n) = self.ops_after_cut {
                        limit = limit.min(next_op + n);
                    }
                    f
                }
            };
            ftl.set_gc_pacing(self.gc_pacing).map_err(|e| format!("set_gc_pacing: {e:?}"))?;
            ftl.set_multi_plane(self.multi_plane);
            if let Some(rc) = &mut self.random_cuts {
                if ftl.nand().emu.pending_power_cut().is_none() {
                    let after = rc.rng.below(rc.max_after);
                    ftl.nand_mut().emu.schedule_power_cut(after);
                    self.mount_cut = rc
                        .rng
                        .chance(rc.mount_cut_percent, 100)
                        .then(|| rc.rng.below(rc.max_mount_after) as u32);
                    self.log.push(format!("cut scheduled in {after} ops, mount cut {:?}", self.mount_cut));
                }
            }
            let mut ctx = Ctx {
                model: &mut self.model,
                log: &mut self.log,
                verify: self.verify,
                mount_cut: &mut self.mount_cut,
                stop_on_device_error: false,
                flex_intents: self.flex_intents,
            };
            let outcome = session(&mut ftl, &mut ctx, &ops[..limit], &mut next_op);
            ftl.nand_mut().clear_survivable_faults();
            let outcome = outcome?;
            self.totals.add_ftl(&ftl);
            match outcome {
                Outcome::Cut => {
                    self.log.push("power cut".into());
                    next = Next::Recover;
                }
                Outcome::Remount => match ftl.unmount() {
                    Ok(_) => {
                        self.model.flush();
                        self.stats.remounts += 1;
                        next = Next::Mount;
                    }
                    Err(e) if is_power_loss(&e) => {
                        self.log.push("power cut during unmount".into());
                        next = Next::Recover;
                    }
                    Err(e) => return Err(format!("unmount failed: {e:?}")),
                },
                Outcome::DeviceError(e) => return Err(format!("device error {e:?}")),
                Outcome::End => {
                    self.stats.ops_at_end = ftl.nand().emu.ops_issued();
                    ftl.nand_mut().emu.cancel_power_cut();
                    verify_all(&mut ftl, &self.model)?.map_err(|_| "cut in final check".to_string())?;
                    ftl.unmount().map_err(|e| format!("final unmount failed: {e:?}"))?;
                    self.model.flush();
                    let mut f = open(
                        Faulty { emu: &mut self.emu, plan: &mut self.faults },
                        &mut self.mem,
                        self.ext.extensions(),
                        self.cfg,
                        self.policies.clone(),
                        false,
                    )
                    .map_err(|e| format!("mount after the final unmount failed: {e:?}"))?;
                    verify_all(&mut f, &self.model)
                        .map_err(|e| format!("after the final remount: {e}"))?
                        .map_err(|_| "cut in final check".to_string())?;
                    if f.counters().mount_replayed_pages != 0 {
                        return Err(format!(
                            "mount after a clean unmount replayed {} pages",
                            f.counters().mount_replayed_pages
                        ));
                    }
                    return Ok(self.stats);
                }
            }
        }
    }
}

/// Per plane, how many blocks the FTL's block table (as the last FTL instance left it in `mem`)
/// has in each state, for failure messages.
pub fn block_summary(mem: &mut FtlMemory, geo: &Geometry) -> String {
    let (_, m) = mem.parts();
    let mut out = String::from("block table by plane (state: count):\n");
    for plane in 0..geo.total_planes() {
        let mut counts = std::collections::BTreeMap::new();
        let mut valid = 0u32;
        for (b, info) in m.blocks.iter().enumerate() {
            if geo.plane_index(nand_hal::BlockId(b as u32)) == plane {
                *counts.entry(format!("{:?}", info.state())).or_insert(0u32) += 1;
                valid += info.valid() as u32;
            }
        }
        let _ = writeln!(out, "  plane {plane}: {counts:?}, {valid} valid pages");
    }
    out
}

/// After a cut during format: mount may fail with NotFormatted or Corrupt (format was never
/// acknowledged) or succeed with an empty device; a new format must then work.
fn after_format_cut<P: PolicySet + Clone>(
    emu: &mut Emulator,
    mem: &mut FtlMemory,
    ext: &mut ExtParts,
    cfg: Config,
    model: &Model,
    policies: &P,
) -> Result<(), String> {
    emu.restore_power();
    match open(&mut *emu, &mut *mem, ext.extensions(), cfg, policies.clone(), false) {
        Ok(mut f) => {
            let empty = Model::new(model.len());
            verify_all(&mut f, &empty)
                .map_err(|e| format!("mount after a cut during format: {e}"))?
                .map_err(|_| "unexpected cut".to_string())?;
        }
        Err(Error::NotFormatted | Error::Corrupt) => {}
        Err(e) => return Err(format!("mount after a cut during format returned {e:?}")),
    }
    let mut f = open(&mut *emu, &mut *mem, ext.extensions(), cfg, policies.clone(), true)
        .map_err(|e| format!("format after a cut during format: {e:?}"))?;
    f.write(0, &{
        let mut p = vec![0u8; f.page_bytes() as usize];
        fill_page(0, 1, &mut p);
        p
    })
    .map_err(|e| format!("write after reformat: {e:?}"))?;
    f.unmount().map_err(|e| format!("unmount after reformat: {e:?}"))?;
    let mut f = open(emu, mem, ext.extensions(), cfg, policies.clone(), false)
        .map_err(|e| format!("mount after reformat: {e:?}"))?;
    let mut p = vec![0u8; f.page_bytes() as usize];
    f.read(0, &mut p).map_err(|e| format!("read after reformat: {e:?}"))?;
    if identify(0, &p) != Found::Content(Some(1)) {
        return Err("reformatted device lost its write".into());
    }
    Ok(())
}

/// The case count of a property test: `PROPTEST_CASES` if set, else `default`.
pub fn proptest_cases(default: u32) -> u32 {
    match std::env::var("PROPTEST_CASES") {
        Ok(v) => v.parse().unwrap_or_else(|_| panic!("PROPTEST_CASES={v} is not a number")),
        Err(_) => default,
    }
}

// ---------------------------------------------------------------------------------------------
// Deterministic pseudo-random numbers for workload generators

/// A small seeded generator (splitmix64) for building workloads.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// A generator from a seed.
    pub fn new(seed: u64) -> Self {
        Rng(seed ^ 0x5DEE_CE66_D1CE_4E5B)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        splitmix(&mut self.0)
    }

    /// A number in `0..n` (`n` > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        ((self.next_u64() as u128 * n as u128) >> 64) as u64
    }

    /// True with probability `num / den`.
    pub fn chance(&mut self, num: u64, den: u64) -> bool {
        self.below(den) < num
    }
}

/// A random workload of `len` ops over `logical_pages` pages: mostly writes (a hot tenth of the
/// space takes half of them), some reads, trims and flushes; no cuts or remounts.
pub fn random_workload(rng: &mut Rng, logical_pages: u32, len: usize) -> Vec<Op> {
    let l = logical_pages as u64;
    let mut ops = Vec::with_capacity(len);
    for _ in 0..len {
        let lpn = if rng.chance(1, 2) { rng.below((l / 10).max(1)) } else { rng.below(l) } as u32;
        let r = rng.below(100);
        ops.push(match r {
            0..=69 => Op::Write { lpn, pages: 1 + rng.below(4) as u32 },
            70..=79 => Op::Read { lpn, pages: 1 + rng.below(4) as u32 },
            80..=91 => Op::Trim { lpn, pages: 1 + rng.below(6) as u32 },
            _ => Op::Flush,
        });
    }
    ops
}

/// Turns every fourth write of `ops` into a write of shared contents ([`Op::Dup`]), so that
/// deduplication, when attached, finds duplicates (the model expects the same data either way).
pub fn with_duplicates(ops: &mut [Op]) {
    let writes = ops.iter_mut().filter(|op| matches!(op, Op::Write { .. }));
    for (i, op) in writes.enumerate() {
        if let (0, Op::Write { lpn, pages }) = (i % 4, *op) {
            *op = Op::Dup { lpn, pages, content: lpn % DUP_POOL };
        }
    }
}
