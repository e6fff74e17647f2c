//! A NAND flash emulator that behaves like a real SLC chip (crate `nand-emu`: no FTL features, so
//! the FTL's no-feature build is tested on it; sim-host re-exports it as `sim_host::emulator`).
//!
//! [`Emulator`] implements [`nand_hal::NandFlash`] (and, through nand-hal's blanket impl, so does
//! `&mut Emulator`). It is configured per test with an [`EmulatorConfig`]: the [`Geometry`], a
//! [`FaultConfig`], [`TimingParams`], a `seed` for every random decision, `store_data` and
//! `reject_set_bits`.
//!
//! This file owns the array and the chip rules:
//! - an erased page reads as 0xFF; a program can only clear bits (stored = old AND new); bytes a
//!   program does not supply (buffers shorter than the page) are left as they are;
//! - each program of a page counts against `geometry.nop` until its block is erased; one more is
//!   refused with [`EmuError::NopExceeded`] and changes nothing;
//! - with `geometry.sequential_program`, programming a page below the highest page programmed in
//!   its block is refused with [`EmuError::ProgramOrder`] (skipping forward is allowed, and so is
//!   reprogramming the highest page within NOP);
//! - with `reject_set_bits`, a program asking to turn a 0 bit back into 1 is refused with
//!   [`EmuError::SetBits`] (kind `ProgramFailed`) and changes nothing;
//! - an address outside the geometry is `OutOfRange`; a buffer longer than the data or spare
//!   area is `BufferSize`. These argument checks happen before the operation is issued to the
//!   device: such an operation is not counted, cannot be a power-cut point and takes no time;
//! - a multi-plane call takes at most `planes_per_lun` operations, all in one LUN, on distinct
//!   planes, at one page offset (reads and programs), otherwise it fails as a whole with
//!   `(0, EmuError::MultiPlane)` (kind `Other`) before doing anything; argument errors of its
//!   operations are reported with their index, also before doing anything. A valid call runs its
//!   operations in order and stops at the first failure; their array phases overlap in time. A
//!   power cut during a multi-plane program or erase tears the cut operation only, or, with
//!   `multi_plane_cut: MultiPlaneCut::WholeCall`, every operation of the call (`power.rs`).
//! - `is_bad` reads spare byte 0 of pages 0 and 1 (two spare reads, one device operation) and
//!   reports a non-0xFF byte; it is not subject to raw bit errors. `mark_bad` forces those two
//!   bytes to 0x00 whatever the pages' NOP and order state, and does not consume NOP (two
//!   programs in counters and time, one device operation).
//! - `store_data: false` (metadata-only mode): data areas are not stored; data reads return 0xFF
//!   and data programs are checked by every rule but not stored (`reject_set_bits` then checks
//!   the spare area only). Spare areas are always stored.
//!
//! - copy-back ([`NandFlash::copy_back`]) runs on the emulated chip with its rules (same plane,
//!   the destination an ordinary program, raw bit errors copied uncorrected): `copy_back.rs`.
//!
//! Faults ([`FaultConfig`]) live in `faults.rs`, power cuts in `power.rs`, persistence in
//! `persist.rs`, the timing model ([`TimingParams`]) and counters ([`EmuCounters`]) in
//! `timing.rs`, the error type in `error.rs`; each file documents what it owns and guarantees.
//!
//! ```
//! use nand_hal::{BlockId, Geometry, NandFlash};
//! use nand_emu::{Emulator, EmulatorConfig};
//!
//! let geometry = Geometry { blocks_per_plane: 16, ..Geometry::MT29F4G08 };
//! let mut flash = Emulator::new(EmulatorConfig { seed: 1, ..EmulatorConfig::new(geometry) })?;
//! let page = geometry.page(BlockId(3), 0);
//! flash.program_page(page, &[0xF0; 4], &[0x00])?;
//! flash.program_page(page, &[0x3C; 4], &[])?;
//! let (mut data, mut spare) = ([0u8; 5], [0u8; 2]);
//! flash.read_page(page, &mut data, &mut spare)?;
//! assert_eq!((data, spare), ([0x30, 0x30, 0x30, 0x30, 0xFF], [0x00, 0xFF]));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod copy_back;
mod error;
mod faults;
mod persist;
mod power;
mod timing;

use core::fmt;

use nand_hal::{
    BlockId, CopyBackAction, CopyBackCaps, CopyBackError, CopyBackOp, ErrorType, Geometry, NandFlash, PageId,
    ProgramOp, ReadOp, MAX_PLANES,
};

pub use copy_back::NATIVE_COPY_BACK;

pub use error::EmuError;
pub use faults::FaultConfig;
pub use power::MultiPlaneCut;
pub use timing::{EmuCounters, Scheduling, TimingParams, WindowEnds};

use faults::FaultState;
use power::PowerState;
use timing::TimingState;

/// Everything that shapes an [`Emulator`].
#[derive(Clone, Debug, PartialEq)]
pub struct EmulatorConfig {
    /// Shape and rules of the device.
    pub geometry: Geometry,
    /// Bad blocks, failures and bit errors.
    pub faults: FaultConfig,
    /// Operation latencies.
    pub timing: TimingParams,
    /// Seed of every random decision (factory bad blocks, failures, bit errors, power cuts).
    pub seed: u64,
    /// Whether data areas are stored; `false` is the fast metadata-only mode.
    pub store_data: bool,
    /// In metadata-only mode, the first this many blocks still store their data areas (an FTL's
    /// own records there, e.g. its anchor, must read back). Not saved by `persist`.
    pub stored_blocks: u32,
    /// Whether a program that would turn a 0 bit into 1 is refused (strict check for WOM codes).
    pub reject_set_bits: bool,
    /// Channels (data buses) the LUNs share, LUN `l` on channel `l % channels`; 0 gives every LUN
    /// a channel of its own (the default). See the timing model in `timing.rs`.
    pub channels: u32,
    /// Copy-back: on the emulated chip ([`NATIVE_COPY_BACK`], the default) or the read + program
    /// fallback ([`CopyBackCaps::FALLBACK`]); `odd_to_even: false` adds the parity rule. Not
    /// saved by `persist`.
    pub copy_back: CopyBackCaps,
    /// What a power cut during a multi-plane program or erase leaves (see `power.rs`): only the
    /// cut operation torn ([`MultiPlaneCut::CutOpOnly`], the default) or every operation of the
    /// call ([`MultiPlaneCut::WholeCall`]). Not saved by `persist`.
    pub multi_plane_cut: MultiPlaneCut,
}

impl EmulatorConfig {
    /// `geometry` with no faults, [`TimingParams::MT29F4G08`], seed 0, data stored, set bits
    /// ignored (AND semantics).
    pub fn new(geometry: Geometry) -> Self {
        EmulatorConfig {
            geometry,
            faults: FaultConfig::default(),
            timing: TimingParams::MT29F4G08,
            seed: 0,
            store_data: true,
            stored_blocks: 0,
            reject_set_bits: false,
            channels: 0,
            copy_back: NATIVE_COPY_BACK,
            multi_plane_cut: MultiPlaneCut::CutOpOnly,
        }
    }

    /// Pages whose data areas are stored: every page, or the first `stored_blocks` blocks'.
    fn stored_pages(&self) -> usize {
        if self.store_data {
            self.geometry.total_pages() as usize
        } else {
            (self.stored_blocks.min(self.geometry.total_blocks()) * self.geometry.pages_per_block) as usize
        }
    }

    /// Channels in use: `channels`, or one per LUN when 0.
    pub fn channel_count(&self) -> u32 {
        if self.channels == 0 {
            self.geometry.luns
        } else {
            self.channels
        }
    }

    /// Checks that the emulator can honour this configuration.
    pub fn validate(&self) -> Result<(), EmuError> {
        let g = &self.geometry;
        if g.validate().is_err() {
            return Err(EmuError::InvalidConfig("geometry is not addressable"));
        }
        if g.spare_bytes == 0 {
            return Err(EmuError::InvalidConfig("bad-block markers need a spare area"));
        }
        let pages = g.total_pages() as usize;
        let data = if self.store_data { g.data_bytes as usize } else { 0 };
        if pages.checked_mul(data + g.spare_bytes as usize).is_none() {
            return Err(EmuError::InvalidConfig("array does not fit in memory"));
        }
        if self.channels > g.luns {
            return Err(EmuError::InvalidConfig("more channels than LUNs"));
        }
        self.faults.validate(g.total_blocks())
    }
}

/// An emulated SLC NAND device (see the module documentation).
#[derive(Clone)]
pub struct Emulator {
    config: EmulatorConfig,
    geo: Geometry,
    data_bytes: usize,
    spare_bytes: usize,
    /// Data areas, page after page, of the first `stored_pages` pages (every page, or in
    /// metadata-only mode those of the first `stored_blocks` blocks).
    data: Vec<u8>,
    stored_pages: usize,
    /// Spare areas, page after page.
    spare: Vec<u8>,
    /// One erased data area, returned by `peek_page` in metadata-only mode.
    erased_data: Vec<u8>,
    /// Programs of each page since its block was erased.
    prog_count: Vec<u8>,
    /// Per block: 1 + the highest page index programmed since erase, 0 if none.
    highest: Vec<u32>,
    erase_count: Vec<u32>,
    /// Per page: the retention clock (whole seconds) when it was last programmed or its block
    /// erased.
    prog_time: Vec<u32>,
    /// Per block: page reads since its last erase (read disturb).
    block_reads: Vec<u32>,
    /// Seconds added to the simulated clock to form the retention clock (a loaded image continues
    /// at the retention time it was saved at).
    clock_base_s: u64,
    factory_bad: Vec<bool>,
    /// The page register of a copy-back (data then spare), kept to reuse its allocation.
    register: Vec<u8>,
    faults: FaultState,
    power: PowerState,
    timing: TimingState,
    counters: EmuCounters,
}

impl fmt::Debug for Emulator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Emulator")
            .field("config", &self.config)
            .field("powered", &self.power.powered)
            .field("ops_issued", &self.power.ops_issued)
            .field("counters", &self.counters)
            .finish_non_exhaustive()
    }
}

impl Emulator {
    /// A freshly erased device (erase counts 0) with its factory bad blocks marked. Fails on an
    /// invalid configuration or when the array cannot be allocated.
    pub fn new(config: EmulatorConfig) -> Result<Self, EmuError> {
        config.validate()?;
        let g = config.geometry;
        let (blocks, pages) = (g.total_blocks() as usize, g.total_pages() as usize);
        let mut factory_bad = try_vec(blocks, false)?;
        faults::draw_factory_bad(&config.faults, &mut factory_bad, config.seed);
        let data = try_vec(config.stored_pages() * g.data_bytes as usize, 0xFF)?;
        let spare = try_vec(pages * g.spare_bytes as usize, 0xFF)?;
        let prog_count = try_vec(pages, 0)?;
        let erase_count = try_vec(blocks, 0)?;
        let wear =
            WearState { prog_time: try_vec(pages, 0)?, block_reads: try_vec(blocks, 0)?, clock_base_s: 0 };
        let mut e = Emulator::from_parts(config, factory_bad, data, spare, prog_count, erase_count, wear)?;
        for b in 0..g.total_blocks() {
            if e.factory_bad[b as usize] {
                e.write_marker(b);
            }
        }
        Ok(e)
    }

    /// A device holding the given arrays (of the sizes the validated `config` implies), with the
    /// order state derived from `prog_count`, powered, counters zero, at time 0.
    fn from_parts(
        config: EmulatorConfig,
        factory_bad: Vec<bool>,
        data: Vec<u8>,
        spare: Vec<u8>,
        prog_count: Vec<u8>,
        erase_count: Vec<u32>,
        wear: WearState,
    ) -> Result<Self, EmuError> {
        let g = config.geometry;
        let (data_bytes, spare_bytes) = (g.data_bytes as usize, g.spare_bytes as usize);
        let erased_data = try_vec(if config.store_data { 0 } else { data_bytes }, 0xFF)?;
        let stored_pages = config.stored_pages();
        let mut highest = try_vec(g.total_blocks() as usize, 0u32)?;
        for (counts, h) in prog_count.chunks_exact(g.pages_per_block as usize).zip(highest.iter_mut()) {
            *h = counts.iter().rposition(|&c| c > 0).map_or(0, |i| i as u32 + 1);
        }
        Ok(Emulator {
            geo: g,
            data_bytes,
            spare_bytes,
            data,
            stored_pages,
            spare,
            erased_data,
            prog_count,
            highest,
            erase_count,
            prog_time: wear.prog_time,
            block_reads: wear.block_reads,
            clock_base_s: wear.clock_base_s,
            factory_bad,
            register: Vec::new(),
            faults: FaultState::new(&config.faults, config.seed),
            power: PowerState::new(config.seed),
            timing: TimingState::new(
                config.timing,
                g.total_planes() as usize,
                g.luns as usize,
                config.channel_count() as usize,
            ),
            counters: EmuCounters::default(),
            config,
        })
    }

    /// The configuration (fault settings as last set).
    pub fn config(&self) -> &EmulatorConfig {
        &self.config
    }

    /// Turns the strict set-bit check on or off from now on.
    pub fn set_reject_set_bits(&mut self, reject: bool) {
        self.config.reject_set_bits = reject;
    }

    /// The stored data and spare areas of `page`, without a device operation (no counters, no
    /// time, no bit errors). In metadata-only mode the data area reads as erased.
    pub fn peek_page(&self, page: PageId) -> Option<(&[u8], &[u8])> {
        if !self.geo.contains_page(page) {
            return None;
        }
        let p = page.0 as usize;
        let spare = &self.spare[p * self.spare_bytes..(p + 1) * self.spare_bytes];
        let data = if p < self.stored_pages {
            &self.data[p * self.data_bytes..(p + 1) * self.data_bytes]
        } else {
            &self.erased_data[..]
        };
        Some((data, spare))
    }

    /// Programs of `page` since its block was last erased (`None` if it does not exist).
    pub fn program_count(&self, page: PageId) -> Option<u8> {
        self.prog_count.get(page.0 as usize).copied()
    }

    /// Erase cycles of `block`, failed and interrupted erases included (`None` if it does not
    /// exist).
    pub fn erase_count(&self, block: BlockId) -> Option<u32> {
        self.erase_count.get(block.0 as usize).copied()
    }

    /// Erase cycles of every block, indexed by block number.
    pub fn erase_counts(&self) -> &[u32] {
        &self.erase_count
    }

    /// The retention clock, whole seconds: the simulated clock ([`Emulator::now_ns`]) plus, for a
    /// loaded image, the retention clock at which it was saved (saturating at `u32::MAX`, 136
    /// years).
    pub fn retention_clock_s(&self) -> u32 {
        let s = self.clock_base_s.saturating_add(self.timing.now() / 1_000_000_000);
        u32::try_from(s).unwrap_or(u32::MAX)
    }

    /// Seconds of the retention clock since `page` was last programmed or its block erased
    /// (`None` if it does not exist); 0 if the clock was moved backwards since.
    pub fn page_age_s(&self, page: PageId) -> Option<u32> {
        let t = *self.prog_time.get(page.0 as usize)?;
        Some(self.retention_clock_s().saturating_sub(t))
    }

    /// Page reads of `block` since its last erase (`None` if it does not exist).
    pub fn block_reads_since_erase(&self, block: BlockId) -> Option<u32> {
        self.block_reads.get(block.0 as usize).copied()
    }

    /// Operation counters since construction, load or the last reset.
    pub fn counters(&self) -> &EmuCounters {
        &self.counters
    }

    /// Zeroes the counters.
    pub fn reset_counters(&mut self) {
        self.counters = EmuCounters::default();
    }

    // ---- argument checks (host side, before an operation is issued) ----

    fn check_page(&self, page: PageId) -> Result<(), EmuError> {
        if self.geo.contains_page(page) {
            Ok(())
        } else {
            Err(EmuError::PageOutOfRange(page))
        }
    }

    fn check_block(&self, block: BlockId) -> Result<(), EmuError> {
        if self.geo.contains_block(block) {
            Ok(())
        } else {
            Err(EmuError::BlockOutOfRange(block))
        }
    }

    fn check_lengths(&self, data: usize, spare: usize) -> Result<(), EmuError> {
        if data > self.data_bytes {
            return Err(EmuError::DataTooLong { len: data, max: self.geo.data_bytes });
        }
        if spare > self.spare_bytes {
            return Err(EmuError::SpareTooLong { len: spare, max: self.geo.spare_bytes });
        }
        Ok(())
    }

    /// (LUN, device-wide plane index) of `block`.
    fn lun_plane(&self, block: u32) -> (usize, usize) {
        let lun = block / self.geo.blocks_per_lun();
        let plane = block % self.geo.planes_per_lun;
        (lun as usize, (lun * self.geo.planes_per_lun + plane) as usize)
    }

    /// Multi-plane shape rules over (block, page in block); returns the LUN.
    fn multi_shape(&self, items: impl Iterator<Item = (u32, u32)>) -> Result<usize, (usize, EmuError)> {
        let mut seen = [false; MAX_PLANES];
        let mut first: Option<(usize, u32)> = None;
        for (block, offset) in items {
            let (lun, plane) = self.lun_plane(block);
            let plane = plane % self.geo.planes_per_lun as usize;
            match first {
                None => first = Some((lun, offset)),
                Some((l, _)) if l != lun => {
                    return Err((0, EmuError::MultiPlane("operations on different LUNs")))
                }
                Some((_, o)) if o != offset => {
                    return Err((0, EmuError::MultiPlane("operations at different page offsets")))
                }
                Some(_) => {}
            }
            if seen[plane] {
                return Err((0, EmuError::MultiPlane("two operations on one plane")));
            }
            seen[plane] = true;
        }
        Ok(first.map_or(0, |(lun, _)| lun))
    }

    /// Checks the page operations `(page, data bytes, spare bytes)` of a multi-plane call: their
    /// count, each address and length, then their shape; returns the LUN they run on.
    fn check_multi_pages(
        &self,
        ops: impl Iterator<Item = (PageId, usize, usize)> + Clone,
    ) -> Result<usize, (usize, EmuError)> {
        self.check_multi_len(ops.clone().count())?;
        for (i, (page, data, spare)) in ops.clone().enumerate() {
            self.check_page(page).and_then(|()| self.check_lengths(data, spare)).map_err(|e| (i, e))?;
        }
        let ppb = self.geo.pages_per_block;
        self.multi_shape(ops.map(|(page, _, _)| (page.0 / ppb, page.0 % ppb)))
    }

    fn check_multi_len(&self, n: usize) -> Result<(), (usize, EmuError)> {
        if n > self.geo.planes_per_lun as usize {
            Err((0, EmuError::MultiPlane("more operations than planes per LUN")))
        } else {
            Ok(())
        }
    }

    // ---- array operations (issued; `interrupted` = this op is the power-cut point) ----

    fn marker_pages(&self) -> impl Iterator<Item = u32> {
        0..self.geo.pages_per_block.min(2)
    }

    /// Forces the bad-block marker of `block`.
    fn write_marker(&mut self, block: u32) {
        for pib in self.marker_pages() {
            let p = (block * self.geo.pages_per_block + pib) as usize;
            self.spare[p * self.spare_bytes] = 0x00;
        }
    }

    /// Copies a page out. Only an interruption can make it fail; then nothing is done.
    fn read_exec(
        &mut self,
        page: PageId,
        data: &mut [u8],
        spare: &mut [u8],
        interrupted: bool,
    ) -> Result<(), EmuError> {
        if interrupted {
            return Err(EmuError::PowerLoss);
        }
        let p = page.0 as usize;
        if p < self.stored_pages {
            let base = p * self.data_bytes;
            copy_bytes(data, &self.data[base..base + data.len()]);
        } else {
            fill_ff(data);
        }
        let base = p * self.spare_bytes;
        copy_bytes(spare, &self.spare[base..base + spare.len()]);
        let c = &mut self.counters;
        c.reads += 1;
        c.spare_reads += u64::from(data.is_empty());
        c.bytes_out += (data.len() + spare.len()) as u64;
        let block = (page.0 / self.geo.pages_per_block) as usize;
        let block_reads = self.block_reads[block];
        self.block_reads[block] = block_reads.saturating_add(1);
        if self.faults.rber_on {
            let wear = faults::PageWear {
                ec: self.erase_count[block],
                age_s: self.retention_clock_s().saturating_sub(self.prog_time[p]),
                block_reads,
            };
            let p = faults::effective_rber(&self.config.faults, wear, self.geo.endurance);
            self.counters.bit_flips += faults::flip_bits(&mut self.faults.rber_rng, p, data, spare);
        }
        Ok(())
    }

    /// The NOP, order and set-bit rules for a program of `page`.
    fn check_program_rules(&self, page: PageId, data: &[u8], spare: &[u8]) -> Result<(), EmuError> {
        let p = page.0 as usize;
        if self.prog_count[p] >= self.geo.nop {
            return Err(EmuError::NopExceeded(page));
        }
        if self.geo.sequential_program {
            let highest = self.highest[(page.0 / self.geo.pages_per_block) as usize];
            if page.0 % self.geo.pages_per_block + 1 < highest {
                return Err(EmuError::ProgramOrder { page, highest: highest - 1 });
            }
        }
        if self.config.reject_set_bits {
            let sets =
                |old: &[u8], new: &[u8]| old.iter().zip(new).fold(0u8, |acc, (o, n)| acc | (!o & n)) != 0;
            let sb = p * self.spare_bytes;
            let mut bad = sets(&self.spare[sb..sb + spare.len()], spare);
            if p < self.stored_pages {
                let db = p * self.data_bytes;
                bad |= sets(&self.data[db..db + data.len()], data);
            }
            if bad {
                return Err(EmuError::SetBits(page));
            }
        }
        Ok(())
    }

    /// Counts a program of `page` against NOP and the order rule.
    fn record_program(&mut self, page: PageId) {
        let p = page.0 as usize;
        self.prog_count[p] += 1;
        self.prog_time[p] = self.retention_clock_s();
        let block = (page.0 / self.geo.pages_per_block) as usize;
        let next = page.0 % self.geo.pages_per_block + 1;
        if self.highest[block] < next {
            self.highest[block] = next;
        }
    }

    /// A program that clears only some of the bits it should (power cut or status FAIL).
    fn tear_program(&mut self, page: PageId, data: &[u8], spare: &[u8], power_cut: bool) {
        let p = page.0 as usize;
        let fraction = self.config.faults.torn_fraction;
        let rng = if power_cut { &mut self.power.rng } else { &mut self.faults.rng };
        if p < self.stored_pages {
            let base = p * self.data_bytes;
            faults::partial_program(&mut self.data[base..base + data.len()], data, rng, fraction);
        }
        let base = p * self.spare_bytes;
        faults::partial_program(&mut self.spare[base..base + spare.len()], spare, rng, fraction);
    }

    /// A program the power cut interrupts: torn, if the rules would have accepted it (a
    /// factory-bad block is never changed).
    fn cut_program(&mut self, page: PageId, data: &[u8], spare: &[u8]) {
        let block = page.0 / self.geo.pages_per_block;
        if !self.factory_bad[block as usize] && self.check_program_rules(page, data, spare).is_ok() {
            self.tear_program(page, data, spare, true);
            self.record_program(page);
        }
    }

    /// Runs an issued program. Returns its result and whether it reached the array (takes time).
    fn program_exec(
        &mut self,
        page: PageId,
        data: &[u8],
        spare: &[u8],
        interrupted: bool,
    ) -> (Result<(), EmuError>, bool) {
        let block = page.0 / self.geo.pages_per_block;
        if interrupted {
            self.cut_program(page, data, spare);
            return (Err(EmuError::PowerLoss), false);
        }
        if self.factory_bad[block as usize] {
            self.counters.programs += 1;
            self.counters.program_failures += 1;
            self.counters.bytes_in += (data.len() + spare.len()) as u64;
            return (Err(EmuError::ProgramFailed(page)), true);
        }
        if let Err(e) = self.check_program_rules(page, data, spare) {
            self.counters.rejected += 1;
            return (Err(e), false);
        }
        self.counters.programs += 1;
        self.counters.bytes_in += (data.len() + spare.len()) as u64;
        let ec = self.erase_count[block as usize];
        if self.faults.program_fails(&self.config.faults, block, ec, self.geo.endurance) {
            self.tear_program(page, data, spare, false);
            self.record_program(page);
            self.counters.program_failures += 1;
            return (Err(EmuError::ProgramFailed(page)), true);
        }
        let p = page.0 as usize;
        if p < self.stored_pages {
            let base = p * self.data_bytes;
            and_into(&mut self.data[base..base + data.len()], data);
        }
        let base = p * self.spare_bytes;
        and_into(&mut self.spare[base..base + spare.len()], spare);
        self.record_program(page);
        (Ok(()), true)
    }

    /// Byte ranges of `block` in the data and spare arrays.
    fn block_ranges(&self, block: u32) -> (core::ops::Range<usize>, core::ops::Range<usize>) {
        let first = (block * self.geo.pages_per_block) as usize;
        let pages = self.geo.pages_per_block as usize;
        let data = if first < self.stored_pages {
            first * self.data_bytes..(first + pages) * self.data_bytes
        } else {
            0..0
        };
        (data, first * self.spare_bytes..(first + pages) * self.spare_bytes)
    }

    /// After an erase cycle, complete or not: NOP and order state reset, one more cycle.
    fn reset_block_state(&mut self, block: u32) {
        let first = (block * self.geo.pages_per_block) as usize;
        let pages = first..first + self.geo.pages_per_block as usize;
        self.prog_count[pages.clone()].fill(0);
        let now = self.retention_clock_s();
        self.prog_time[pages].fill(now);
        self.block_reads[block as usize] = 0;
        self.highest[block as usize] = 0;
        let ec = &mut self.erase_count[block as usize];
        *ec = ec.saturating_add(1);
    }

    /// An erase that sets only some of the 0 bits (power cut or status FAIL).
    fn tear_erase(&mut self, block: u32, power_cut: bool) {
        let (data, spare) = self.block_ranges(block);
        let fraction = self.config.faults.partial_erase_fraction;
        let rng = if power_cut { &mut self.power.rng } else { &mut self.faults.rng };
        faults::partial_erase(&mut self.data[data], rng, fraction);
        faults::partial_erase(&mut self.spare[spare], rng, fraction);
        self.reset_block_state(block);
    }

    /// An erase the power cut interrupts: the block partly erased (a factory-bad one is never
    /// changed).
    fn cut_erase(&mut self, block: u32) {
        if !self.factory_bad[block as usize] {
            self.tear_erase(block, true);
        }
    }

    /// Runs an issued erase. Returns its result and whether it reached the array.
    fn erase_exec(&mut self, block: BlockId, interrupted: bool) -> (Result<(), EmuError>, bool) {
        let b = block.0;
        if interrupted {
            self.cut_erase(b);
            return (Err(EmuError::PowerLoss), false);
        }
        self.counters.erases += 1;
        if self.factory_bad[b as usize] {
            self.counters.erase_failures += 1;
            return (Err(EmuError::EraseFailed(block)), true);
        }
        let ec = self.erase_count[b as usize];
        if self.faults.erase_fails(&self.config.faults, b, ec, self.geo.endurance) {
            self.tear_erase(b, false);
            self.counters.erase_failures += 1;
            return (Err(EmuError::EraseFailed(block)), true);
        }
        let (data, spare) = self.block_ranges(b);
        fill_ff(&mut self.data[data]);
        fill_ff(&mut self.spare[spare]);
        self.reset_block_state(b);
        (Ok(()), true)
    }
}

/// The bit-error model's per-page and per-block state (see `faults.rs`).
pub(crate) struct WearState {
    pub(crate) prog_time: Vec<u32>,
    pub(crate) block_reads: Vec<u32>,
    pub(crate) clock_base_s: u64,
}

/// `vec![value; n]`, or an error instead of an abort when memory is short.
fn try_vec<T: Clone>(n: usize, value: T) -> Result<Vec<T>, EmuError> {
    let mut v = Vec::new();
    v.try_reserve_exact(n).map_err(|_| EmuError::InvalidConfig("not enough memory for the array"))?;
    v.resize(n, value);
    Ok(v)
}

// Empty slices are skipped explicitly: for a zero length, glibc's AVX-512 memset/memcpy still
// issue a masked store to the slice's (dangling, unmapped) pointer, and on the AMD EPYC build host
// the fault suppression costs ~130 ns per call, several times a whole metadata-only operation.

/// `dst.fill(0xFF)`, nothing for an empty slice.
fn fill_ff(dst: &mut [u8]) {
    if !dst.is_empty() {
        dst.fill(0xFF);
    }
}

/// `dst.copy_from_slice(src)` for slices of equal length, nothing when empty.
fn copy_bytes(dst: &mut [u8], src: &[u8]) {
    if !dst.is_empty() {
        dst.copy_from_slice(src);
    }
}

/// `dst &= src`, byte by byte.
fn and_into(dst: &mut [u8], src: &[u8]) {
    for (d, s) in dst.iter_mut().zip(src) {
        *d &= *s;
    }
}

impl ErrorType for Emulator {
    type Error = EmuError;
}

impl NandFlash for Emulator {
    fn geometry(&self) -> Geometry {
        self.geo
    }

    fn read_page(&mut self, page: PageId, data: &mut [u8], spare: &mut [u8]) -> Result<(), EmuError> {
        self.check_page(page)?;
        self.check_lengths(data.len(), spare.len())?;
        let interrupted = self.begin_op()?;
        self.read_exec(page, data, spare, interrupted)?;
        let (lun, plane) = self.lun_plane(page.0 / self.geo.pages_per_block);
        let bytes = self.timing.take_bytes((data.len() + spare.len()) as u64);
        self.timing.read(lun, &[(plane, bytes)]);
        Ok(())
    }

    fn program_page(&mut self, page: PageId, data: &[u8], spare: &[u8]) -> Result<(), EmuError> {
        self.check_page(page)?;
        self.check_lengths(data.len(), spare.len())?;
        let interrupted = self.begin_op()?;
        let (result, reached) = self.program_exec(page, data, spare, interrupted);
        let bytes = self.timing.take_bytes((data.len() + spare.len()) as u64);
        if reached {
            let (lun, plane) = self.lun_plane(page.0 / self.geo.pages_per_block);
            self.timing.program(lun, &[(plane, bytes)]);
        }
        result
    }

    fn erase_block(&mut self, block: BlockId) -> Result<(), EmuError> {
        self.check_block(block)?;
        let interrupted = self.begin_op()?;
        let (result, reached) = self.erase_exec(block, interrupted);
        if reached {
            let (lun, plane) = self.lun_plane(block.0);
            self.timing.erase(lun, &[(plane, 0)]);
        }
        result
    }

    fn is_bad(&mut self, block: BlockId) -> Result<bool, EmuError> {
        self.check_block(block)?;
        if self.begin_op()? {
            return Err(EmuError::PowerLoss);
        }
        let (lun, plane) = self.lun_plane(block.0);
        let mut bad = false;
        for pib in self.marker_pages() {
            let p = (block.0 * self.geo.pages_per_block + pib) as usize;
            bad |= self.spare[p * self.spare_bytes] != 0xFF;
            self.counters.reads += 1;
            self.counters.spare_reads += 1;
            self.counters.bytes_out += 1;
            self.timing.read(lun, &[(plane, 1)]);
        }
        Ok(bad)
    }

    fn mark_bad(&mut self, block: BlockId) -> Result<(), EmuError> {
        self.check_block(block)?;
        if self.begin_op()? {
            return Err(EmuError::PowerLoss);
        }
        self.write_marker(block.0);
        let (lun, plane) = self.lun_plane(block.0);
        for _ in self.marker_pages() {
            self.counters.programs += 1;
            self.counters.bytes_in += 1;
            self.timing.program(lun, &[(plane, 1)]);
        }
        Ok(())
    }

    fn read_multi(&mut self, ops: &mut [ReadOp<'_>]) -> Result<(), (usize, EmuError)> {
        let lun = self.check_multi_pages(ops.iter().map(|op| (op.page, op.data.len(), op.spare.len())))?;
        let ppb = self.geo.pages_per_block;
        let mut charged = [(0usize, 0u64); MAX_PLANES];
        let mut n = 0;
        let mut result = Ok(());
        for (i, op) in ops.iter_mut().enumerate() {
            let step = self.begin_op().and_then(|cut| self.read_exec(op.page, op.data, op.spare, cut));
            if let Err(e) = step {
                result = Err((i, e));
                break;
            }
            charged[n] = (self.lun_plane(op.page.0 / ppb).1, (op.data.len() + op.spare.len()) as u64);
            n += 1;
        }
        self.finish_multi(ops.len(), n);
        if n > 0 {
            self.timing.read(lun, &charged[..n]);
        }
        result
    }

    fn program_multi(&mut self, ops: &[ProgramOp<'_>]) -> Result<(), (usize, EmuError)> {
        let lun = self.check_multi_pages(ops.iter().map(|op| (op.page, op.data.len(), op.spare.len())))?;
        if self.whole_call_cut(ops.len()) {
            self.counters.whole_call_cut_programs += 1;
            for op in ops {
                self.cut_program(op.page, op.data, op.spare);
            }
            return Err((0, EmuError::PowerLoss));
        }
        let ppb = self.geo.pages_per_block;
        let mut charged = [(0usize, 0u64); MAX_PLANES];
        let mut n = 0;
        let mut result = Ok(());
        for (i, op) in ops.iter().enumerate() {
            let (step, reached) = match self.begin_op() {
                Ok(cut) => self.program_exec(op.page, op.data, op.spare, cut),
                Err(e) => (Err(e), false),
            };
            if reached {
                charged[n] = (self.lun_plane(op.page.0 / ppb).1, (op.data.len() + op.spare.len()) as u64);
                n += 1;
            }
            if let Err(e) = step {
                result = Err((i, e));
                break;
            }
        }
        self.finish_multi(ops.len(), n);
        if n > 0 {
            self.timing.program(lun, &charged[..n]);
        }
        result
    }

    fn copy_back_caps(&self) -> CopyBackCaps {
        self.config.copy_back
    }

    fn copy_back(
        &mut self,
        op: CopyBackOp<'_>,
        check: &mut dyn FnMut(&mut [u8], &mut [u8]) -> CopyBackAction,
    ) -> Result<CopyBackAction, CopyBackError<EmuError>> {
        self.copy_back_op(op, check)
    }

    fn erase_multi(&mut self, blocks: &[BlockId]) -> Result<(), (usize, EmuError)> {
        self.check_multi_len(blocks.len())?;
        for (i, b) in blocks.iter().enumerate() {
            self.check_block(*b).map_err(|e| (i, e))?;
        }
        let lun = self.multi_shape(blocks.iter().map(|b| (b.0, 0)))?;
        if self.whole_call_cut(blocks.len()) {
            self.counters.whole_call_cut_erases += 1;
            for b in blocks {
                self.cut_erase(b.0);
            }
            return Err((0, EmuError::PowerLoss));
        }
        let mut charged = [(0usize, 0u64); MAX_PLANES];
        let mut n = 0;
        let mut result = Ok(());
        for (i, &b) in blocks.iter().enumerate() {
            let (step, reached) = match self.begin_op() {
                Ok(cut) => self.erase_exec(b, cut),
                Err(e) => (Err(e), false),
            };
            if reached {
                charged[n] = (self.lun_plane(b.0).1, 0);
                n += 1;
            }
            if let Err(e) = step {
                result = Err((i, e));
                break;
            }
        }
        self.finish_multi(blocks.len(), n);
        if n > 0 {
            self.timing.erase(lun, &charged[..n]);
        }
        result
    }
}

impl Emulator {
    /// Counts a multi-plane call of `len` operations, `reached` of which reached the array.
    fn finish_multi(&mut self, len: usize, reached: usize) {
        if len >= 2 && reached > 0 {
            self.counters.multi_plane_ops += 1;
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use nand_hal::{EccRequirement, Error as _, ErrorKind};

    /// 512 + 16 byte pages, 8 pages per block, 32 blocks in 2 planes, NOP 4, in-order.
    pub(crate) fn small_geometry() -> Geometry {
        Geometry {
            data_bytes: 512,
            spare_bytes: 16,
            pages_per_block: 8,
            blocks_per_plane: 16,
            planes_per_lun: 2,
            luns: 1,
            nop: 4,
            sequential_program: true,
            ecc: EccRequirement { bits: 4, codeword_bytes: 512 },
            endurance: 1000,
        }
    }

    pub(crate) fn small_config() -> EmulatorConfig {
        EmulatorConfig::new(small_geometry())
    }

    fn emu() -> Emulator {
        Emulator::new(small_config()).unwrap()
    }

    fn read(e: &mut Emulator, page: PageId, n: usize, s: usize) -> (Vec<u8>, Vec<u8>) {
        let (mut data, mut spare) = (vec![0u8; n], vec![0u8; s]);
        e.read_page(page, &mut data, &mut spare).unwrap();
        (data, spare)
    }

    #[test]
    fn erased_pages_read_as_ff() {
        let mut e = emu();
        let (d, s) = read(&mut e, PageId(77), 512, 16);
        assert!(d.iter().chain(&s).all(|&b| b == 0xFF));
        assert_eq!(e.counters().reads, 1);
        assert_eq!(e.counters().bytes_out, 528);
    }

    #[test]
    fn programs_only_clear_bits_and_leave_unsupplied_bytes() {
        let mut e = emu();
        let p = PageId(8);
        e.program_page(p, &[0xF0, 0x0F, 0xAA], &[0x5A]).unwrap();
        e.program_page(p, &[0x3C, 0xFF], &[0xFF, 0x00]).unwrap();
        let (d, s) = read(&mut e, p, 4, 3);
        assert_eq!(d, [0x30, 0x0F, 0xAA, 0xFF]);
        assert_eq!(s, [0x5A, 0x00, 0xFF]);
        assert_eq!(e.program_count(p), Some(2));
        assert_eq!(e.counters().programs, 2);
        assert_eq!(e.counters().bytes_in, 8);
        // Reads may be shorter than the page and spare-only.
        let mut spare = [0u8; 2];
        e.read_spare(p, &mut spare).unwrap();
        assert_eq!(spare, [0x5A, 0x00]);
        assert_eq!(e.counters().spare_reads, 1);
    }

    #[test]
    fn nop_limit() {
        let mut e = emu();
        let p = PageId(3);
        for i in 0..4u8 {
            e.program_page(p, &[!(1 << i)], &[]).unwrap();
        }
        assert_eq!(e.program_page(p, &[0x00], &[]).unwrap_err(), EmuError::NopExceeded(p));
        assert_eq!(e.program_page(p, &[], &[]).unwrap_err().kind(), ErrorKind::NopExceeded);
        assert_eq!(read(&mut e, p, 1, 0).0, [0xF0]);
        assert_eq!(e.program_count(p), Some(4));
        assert_eq!(e.counters().rejected, 2);
        // An erase restores the budget.
        e.erase_block(BlockId(0)).unwrap();
        assert_eq!(e.program_count(p), Some(0));
        e.program_page(p, &[0x00], &[]).unwrap();
        assert_eq!(e.erase_count(BlockId(0)), Some(1));
        assert_eq!(e.erase_counts().iter().sum::<u32>(), 1);
    }

    #[test]
    fn nop_one_forbids_reprogramming() {
        let geometry = Geometry { nop: 1, ..small_geometry() };
        let mut e = Emulator::new(EmulatorConfig::new(geometry)).unwrap();
        e.program_page(PageId(0), &[], &[0xF0]).unwrap();
        assert_eq!(e.program_page(PageId(0), &[], &[0xFF]).unwrap_err().kind(), ErrorKind::NopExceeded);
    }

    #[test]
    fn program_order() {
        let mut e = emu();
        let g = e.geometry();
        let page = |i| g.page(BlockId(4), i);
        e.program_page(page(0), &[0], &[]).unwrap();
        e.program_page(page(3), &[0], &[]).unwrap(); // skipping forward is fine
        e.program_page(page(3), &[0], &[]).unwrap(); // the highest again, within NOP
        assert_eq!(
            e.program_page(page(2), &[0], &[]).unwrap_err(),
            EmuError::ProgramOrder { page: page(2), highest: 3 }
        );
        assert_eq!(e.program_page(page(0), &[0], &[]).unwrap_err().kind(), ErrorKind::ProgramOrder);
        assert_eq!(e.program_count(page(2)), Some(0));
        // Other blocks have their own order; an erase resets it.
        e.program_page(g.page(BlockId(5), 1), &[0], &[]).unwrap();
        e.erase_block(BlockId(4)).unwrap();
        e.program_page(page(1), &[0], &[]).unwrap();
        // Without the rule any order is accepted.
        let geometry = Geometry { sequential_program: false, ..small_geometry() };
        let mut free = Emulator::new(EmulatorConfig::new(geometry)).unwrap();
        free.program_page(PageId(5), &[0], &[]).unwrap();
        free.program_page(PageId(1), &[0], &[]).unwrap();
    }

    #[test]
    fn out_of_range_and_buffer_sizes() {
        let mut e = emu();
        let g = e.geometry();
        let last = PageId(g.total_pages() - 1);
        e.program_page(last, &[0; 512], &[0; 16]).unwrap();
        let beyond = PageId(g.total_pages());
        assert_eq!(e.program_page(beyond, &[0], &[]).unwrap_err(), EmuError::PageOutOfRange(beyond));
        assert_eq!(e.read_page(beyond, &mut [0], &mut []).unwrap_err().kind(), ErrorKind::OutOfRange);
        let nb = BlockId(g.total_blocks());
        assert_eq!(e.erase_block(nb).unwrap_err(), EmuError::BlockOutOfRange(nb));
        assert_eq!(e.is_bad(nb).unwrap_err().kind(), ErrorKind::OutOfRange);
        assert_eq!(e.mark_bad(nb).unwrap_err().kind(), ErrorKind::OutOfRange);
        assert_eq!(e.inject_erase_failure(nb).unwrap_err().kind(), ErrorKind::OutOfRange);
        assert_eq!(
            e.program_page(PageId(0), &[0; 513], &[]).unwrap_err(),
            EmuError::DataTooLong { len: 513, max: 512 }
        );
        assert_eq!(e.program_page(PageId(0), &[], &[0; 17]).unwrap_err().kind(), ErrorKind::BufferSize);
        assert_eq!(e.read_page(PageId(0), &mut [0; 513], &mut []).unwrap_err().kind(), ErrorKind::BufferSize);
        assert_eq!(e.read_spare(PageId(0), &mut [0; 17]).unwrap_err().kind(), ErrorKind::BufferSize);
        assert_eq!(e.program_count(PageId(0)), Some(0));
        assert_eq!(e.peek_page(beyond), None);
        assert_eq!(e.erase_count(nb), None);
        assert_eq!(e.ops_issued(), 1, "argument errors are not issued");
    }

    #[test]
    fn reject_set_bits_is_strict() {
        let mut e = Emulator::new(EmulatorConfig { reject_set_bits: true, ..small_config() }).unwrap();
        let p = PageId(0);
        e.program_page(p, &[0xF0, 0xFF], &[0x0F]).unwrap();
        // Clearing more bits and repeating 0 bits is fine.
        e.program_page(p, &[0xC0], &[0x0F]).unwrap();
        assert_eq!(e.program_page(p, &[0xC0, 0x00], &[0x1F]).unwrap_err(), EmuError::SetBits(p));
        assert_eq!(e.program_page(p, &[0xE0], &[]).unwrap_err().kind(), ErrorKind::ProgramFailed);
        assert_eq!(read(&mut e, p, 2, 1), (vec![0xC0, 0xFF], vec![0x0F]));
        assert_eq!(e.program_count(p), Some(2));
        assert_eq!(e.counters().program_failures, 0);
        // The default is AND semantics.
        e.set_reject_set_bits(false);
        e.program_page(p, &[0xE0], &[0xFF]).unwrap();
        assert_eq!(read(&mut e, p, 1, 1), (vec![0xC0], vec![0x0F]));
    }

    #[test]
    fn multi_plane_rules() {
        let mut e = emu();
        let g = e.geometry();
        let d = [0u8; 4];
        let op = |b, i| ProgramOp { page: g.page(BlockId(b), i), data: &d, spare: &[] };
        let bad_calls: [&[ProgramOp]; 3] = [
            &[op(0, 0), op(1, 0), op(2, 0)], // more than two planes
            &[op(0, 0), op(2, 0)],           // blocks 0 and 2 are both on plane 0
            &[op(0, 0), op(1, 1)],           // different offsets
        ];
        for ops in bad_calls {
            let (i, err) = e.program_multi(ops).unwrap_err();
            assert_eq!((i, err.kind()), (0, ErrorKind::Other), "{err}");
        }
        assert_eq!(e.erase_multi(&[BlockId(0), BlockId(2)]).unwrap_err().1.kind(), ErrorKind::Other);
        let beyond = ProgramOp { page: PageId(g.total_pages()), data: &d, spare: &[] };
        assert_eq!(e.program_multi(&[op(0, 0), beyond]).unwrap_err().0, 1);
        assert_eq!(e.ops_issued(), 0);
        assert!(e.peek_page(g.page(BlockId(0), 0)).unwrap().0.iter().all(|&b| b == 0xFF));
        e.program_multi(&[op(0, 2), op(1, 2)]).unwrap();
        assert_eq!(e.program_count(g.page(BlockId(1), 2)), Some(1));
        assert_eq!(e.counters().multi_plane_ops, 1);
        assert_eq!(e.counters().programs, 2);
        // A failing op stops the call; earlier ones completed.
        e.inject_program_failure(BlockId(1)).unwrap();
        let (i, err) = e.program_multi(&[op(0, 3), op(1, 3)]).unwrap_err();
        assert_eq!((i, err), (1, EmuError::ProgramFailed(g.page(BlockId(1), 3))));
        assert_eq!(e.peek_page(g.page(BlockId(0), 3)).unwrap().0[..4], [0; 4]);
        e.program_multi(&[]).unwrap();
        // Reads return each op's data.
        e.program_page(g.page(BlockId(1), 6), &[0x11; 4], &[]).unwrap();
        let (mut a, mut b) = ([0u8; 4], [1u8; 4]);
        let mut reads = [
            ReadOp { page: g.page(BlockId(1), 6), data: &mut a, spare: &mut [] },
            ReadOp { page: g.page(BlockId(0), 6), data: &mut b, spare: &mut [] },
        ];
        e.read_multi(&mut reads).unwrap();
        assert_eq!((a, b), ([0x11; 4], [0xFF; 4]));
        // Two LUNs cannot share one call.
        let two = Geometry { luns: 2, ..small_geometry() };
        let mut e2 = Emulator::new(EmulatorConfig::new(two)).unwrap();
        let other = BlockId(two.blocks_per_lun() + 1);
        assert_eq!(e2.erase_multi(&[BlockId(0), other]).unwrap_err().1.kind(), ErrorKind::Other);
        e2.erase_multi(&[BlockId(0), BlockId(1)]).unwrap();
        assert_eq!(e2.erase_counts()[..2], [1, 1]);
    }

    #[test]
    fn metadata_only_mode() {
        let mut e = Emulator::new(EmulatorConfig { store_data: false, ..small_config() }).unwrap();
        let p = PageId(9);
        e.program_page(p, &[0x00; 512], &[0x12, 0x34]).unwrap();
        let (d, s) = read(&mut e, p, 512, 4);
        assert!(d.iter().all(|&b| b == 0xFF));
        assert_eq!(s, [0x12, 0x34, 0xFF, 0xFF]);
        assert_eq!(e.peek_page(p).unwrap().0.len(), 512);
        // Rules are still checked.
        for _ in 0..3 {
            e.program_page(p, &[0x00; 512], &[]).unwrap();
        }
        assert_eq!(e.program_page(p, &[0x00], &[]).unwrap_err().kind(), ErrorKind::NopExceeded);
        assert_eq!(e.program_page(PageId(8), &[0], &[]).unwrap_err().kind(), ErrorKind::ProgramOrder);
        assert_eq!(e.program_page(p, &[0; 600], &[]).unwrap_err().kind(), ErrorKind::BufferSize);
        e.erase_block(BlockId(1)).unwrap();
        assert_eq!(read(&mut e, p, 0, 2).1, [0xFF, 0xFF]);
        assert_eq!(e.counters().bytes_in, 512 * 4 + 2);
    }

    #[test]
    fn works_through_a_mutable_reference() {
        fn use_flash<F: NandFlash>(mut f: F) -> Result<bool, F::Error> {
            f.program_page(PageId(0), &[0x0F], &[])?;
            f.mark_bad(BlockId(2))?;
            f.is_bad(BlockId(2))
        }
        let mut e = emu();
        assert!(use_flash(&mut e).unwrap());
        assert_eq!(e.peek_page(PageId(0)).unwrap().0[0], 0x0F);
    }

    #[test]
    fn invalid_geometry_is_rejected() {
        for geometry in [
            Geometry { pages_per_block: 0, ..small_geometry() },
            Geometry { spare_bytes: 0, ..small_geometry() },
        ] {
            let err = Emulator::new(EmulatorConfig::new(geometry)).unwrap_err();
            assert_eq!(err.kind(), ErrorKind::Other);
        }
        let one_page = Geometry { pages_per_block: 1, ..small_geometry() };
        let mut e = Emulator::new(EmulatorConfig {
            faults: FaultConfig { factory_bad: vec![1], ..FaultConfig::default() },
            ..EmulatorConfig::new(one_page)
        })
        .unwrap();
        assert!(e.is_bad(BlockId(1)).unwrap());
        assert_eq!(e.counters().reads, 1, "one marker page when blocks have one page");
    }
}
