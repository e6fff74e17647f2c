//! Faults: factory bad blocks, grown (wear-driven and injected) program/erase failures, and raw
//! bit errors on read.
//!
//! Guarantees:
//! - Factory bad blocks are fixed at construction from `factory_bad` plus a seeded random draw of
//!   `factory_bad_permille` of the blocks (block 0 is never drawn, as datasheets guarantee it
//!   good; it can still be listed explicitly). They carry the real-part marker: spare byte 0 of
//!   pages 0 and 1 is 0x00, everything else erased. Program and erase of them always report
//!   FAIL and change nothing.
//! - A program (erase) that reaches the array fails with probability
//!   `p(ec) = base + slope * max(0, ec - endurance) / endurance`, `ec` being the block's erase count
//!   before the operation; and deterministically when injected with
//!   [`Emulator::inject_program_failure`], [`Emulator::fail_program_after`] and their erase
//!   counterparts. A failed program clears a random subset of the bits it was clearing (each
//!   with probability `torn_fraction`) and counts against NOP; a failed erase sets each 0 bit of
//!   the block to 1 with probability `partial_erase_fraction`, counts as an erase cycle and resets
//!   the block's NOP and order state.
//! - Raw bit errors flip bits of the returned copy only (never the stored array), over data and
//!   spare, each bit independently with the effective rate (`effective_rber`)
//!
//!   ```text
//!   p = rber * (1 + rber_wear_factor * ec / endurance)
//!            * (1 + rber_retention_factor * age_s / rber_retention_scale_s)
//!     + read_disturb_factor * block_reads
//!   ```
//!
//!   clamped to `[0, 1]`, where `ec` is the block's erase count, `age_s` the whole seconds of the
//!   simulated clock ([`Emulator::now_ns`]) since the page was last programmed or its block
//!   erased, and `block_reads` the page reads of its block since the block's last erase, before
//!   this one (read disturb). Bookkeeping: one `u32` program time per page (whole seconds of the
//!   retention clock, [`Emulator::retention_clock_s`]; 4 bytes per page, next to the per-page
//!   program count, instead of a per-block stamp that would age a block's later pages from its
//!   first program) and one `u32` read counter per block. Read disturb counts the reads of the
//!   whole block, the page's own included (a documented simplification of "reads of the other
//!   pages": with `pages_per_block` pages read evenly, the difference is one part in
//!   `pages_per_block`); `is_bad` (not a data read, and not subject to bit errors) does not count.
//!   Disturb and retention errors are read noise like the base rate: the stored array stays as
//!   programmed, and an erase resets both the page ages and the read counter.
//! - With every probability at zero (the default) and nothing injected, no random number is drawn
//!   on the read, program or erase paths: runs are deterministic and cost nothing extra (the
//!   program time is one `u32` store per program, the read counter one increment per read; the
//!   effective rate is computed only when `rber` or `read_disturb_factor` is non-zero).
//!
//! Random streams: each source of randomness has its own ChaCha8 stream derived from the seed,
//! so enabling RBER does not change which bits a power cut tears, and vice versa.

use nand_hal::BlockId;
use rand::{Rng, RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::{EmuError, Emulator};

/// Stream of the construction-time draw of factory bad blocks.
pub(crate) const STREAM_FACTORY: u64 = 0;
/// Stream of grown-failure decisions and the bits of failed operations.
pub(crate) const STREAM_FAULTS: u64 = 1;
/// Stream of raw bit errors.
pub(crate) const STREAM_RBER: u64 = 2;
/// Stream of power-cut tearing and random cut points.
pub(crate) const STREAM_POWER: u64 = 3;

/// A ChaCha8 generator for one stream of `seed`.
pub(crate) fn stream_rng(seed: u64, stream: u64) -> ChaCha8Rng {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    rng.set_stream(stream);
    rng
}

/// Fault settings. The default injects nothing: no bad blocks, no failures, no bit errors.
#[derive(Clone, Debug, PartialEq)]
pub struct FaultConfig {
    /// Blocks per thousand drawn (with the seed) as factory bad at construction.
    pub factory_bad_permille: u32,
    /// Blocks that are factory bad in any case.
    pub factory_bad: Vec<u32>,
    /// Base raw bit-error rate on read (probability per bit), in `[0, 1]`.
    pub rber: f64,
    /// Growth of the bit-error rate with wear: `rber * (1 + rber_wear_factor * ec / endurance)`.
    pub rber_wear_factor: f64,
    /// Growth of the bit-error rate with retention time: the base rate is multiplied by
    /// `1 + rber_retention_factor * age_s / rber_retention_scale_s`, `age_s` being the seconds
    /// since the page was programmed (simulated clock). 0 (the default) turns it off.
    pub rber_retention_factor: f64,
    /// The retention time scale, seconds (> 0; default one day, 86 400 s).
    pub rber_retention_scale_s: f64,
    /// Read disturb: each page read of a block since its erase adds this much to the bit-error
    /// rate of the block's pages (absolute, not scaled by `rber`). 0 (the default) turns it off.
    pub read_disturb_factor: f64,
    /// Probability that a program fails, at any wear.
    pub program_fail_base: f64,
    /// Added program-failure probability per rated endurance of erases beyond the rating.
    pub program_fail_slope: f64,
    /// Probability that an erase fails, at any wear.
    pub erase_fail_base: f64,
    /// Added erase-failure probability per rated endurance of erases beyond the rating.
    pub erase_fail_slope: f64,
    /// Probability that each bit an interrupted or failed program was clearing ends up cleared.
    pub torn_fraction: f64,
    /// Probability that each 0 bit of a block an interrupted or failed erase was erasing ends up 1.
    pub partial_erase_fraction: f64,
}

impl Default for FaultConfig {
    fn default() -> Self {
        FaultConfig {
            factory_bad_permille: 0,
            factory_bad: Vec::new(),
            rber: 0.0,
            rber_wear_factor: 0.0,
            rber_retention_factor: 0.0,
            rber_retention_scale_s: 86_400.0,
            read_disturb_factor: 0.0,
            program_fail_base: 0.0,
            program_fail_slope: 0.0,
            erase_fail_base: 0.0,
            erase_fail_slope: 0.0,
            torn_fraction: 0.5,
            partial_erase_fraction: 0.5,
        }
    }
}

impl FaultConfig {
    /// Checks ranges: probabilities and fractions in `[0, 1]`, factors finite and non-negative.
    pub fn validate(&self, total_blocks: u32) -> Result<(), EmuError> {
        let unit = |x: f64| (0.0..=1.0).contains(&x);
        let nonneg = |x: f64| x.is_finite() && x >= 0.0;
        if self.factory_bad_permille > 1000 {
            return Err(EmuError::InvalidConfig("factory_bad_permille above 1000"));
        }
        if self.factory_bad.iter().any(|&b| b >= total_blocks) {
            return Err(EmuError::InvalidConfig("factory_bad lists a block outside the geometry"));
        }
        if !unit(self.rber) || !unit(self.torn_fraction) || !unit(self.partial_erase_fraction) {
            return Err(EmuError::InvalidConfig("rber and the torn fractions must lie in [0, 1]"));
        }
        if !(self.rber_retention_scale_s.is_finite() && self.rber_retention_scale_s > 0.0) {
            return Err(EmuError::InvalidConfig("rber_retention_scale_s must be finite and positive"));
        }
        if ![
            self.rber_wear_factor,
            self.rber_retention_factor,
            self.read_disturb_factor,
            self.program_fail_base,
            self.program_fail_slope,
            self.erase_fail_base,
            self.erase_fail_slope,
        ]
        .into_iter()
        .all(nonneg)
        {
            return Err(EmuError::InvalidConfig("fault rates must be finite and non-negative"));
        }
        Ok(())
    }
}

/// Failure probability at erase count `ec`: `base + slope * max(0, ec - endurance) / endurance`.
pub(crate) fn wear_probability(base: f64, slope: f64, ec: u32, endurance: u32) -> f64 {
    let endurance = endurance.max(1);
    base + slope * f64::from(ec.saturating_sub(endurance)) / f64::from(endurance)
}

/// Where a page stands for the bit-error model.
#[derive(Copy, Clone, Debug, Default, PartialEq)]
pub(crate) struct PageWear {
    /// Erase count of the block.
    pub(crate) ec: u32,
    /// Seconds since the page was programmed (or its block erased).
    pub(crate) age_s: u32,
    /// Page reads of the block since its erase, before this one.
    pub(crate) block_reads: u32,
}

/// Effective raw bit-error rate of a page (see the module documentation), clamped to `[0, 1]`.
pub(crate) fn effective_rber(cfg: &FaultConfig, w: PageWear, endurance: u32) -> f64 {
    let wear = 1.0 + cfg.rber_wear_factor * f64::from(w.ec) / f64::from(endurance.max(1));
    let retention = 1.0 + cfg.rber_retention_factor * f64::from(w.age_s) / cfg.rber_retention_scale_s;
    let p = cfg.rber * wear * retention + cfg.read_disturb_factor * f64::from(w.block_reads);
    if p.is_nan() {
        return 0.0;
    }
    p.clamp(0.0, 1.0)
}

/// A byte whose bits are each 1 with probability `p`.
fn random_mask(rng: &mut ChaCha8Rng, p: f64) -> u8 {
    if p >= 1.0 {
        0xFF
    } else if p <= 0.0 {
        0
    } else if p == 0.5 {
        rng.next_u32() as u8
    } else {
        (0..8).fold(0u8, |m, bit| if rng.random::<f64>() < p { m | (1 << bit) } else { m })
    }
}

/// An interrupted program of `src` over `dst`: each bit the program was clearing (1 in `dst`,
/// 0 in `src`) is cleared with probability `p`. Draws only for bytes with such bits.
pub(crate) fn partial_program(dst: &mut [u8], src: &[u8], rng: &mut ChaCha8Rng, p: f64) {
    for (d, s) in dst.iter_mut().zip(src) {
        let clearing = *d & !*s;
        if clearing != 0 {
            *d &= !(clearing & random_mask(rng, p));
        }
    }
}

/// An interrupted erase: each 0 bit of `bytes` is set with probability `p`.
pub(crate) fn partial_erase(bytes: &mut [u8], rng: &mut ChaCha8Rng, p: f64) {
    for b in bytes.iter_mut() {
        let zeros = !*b;
        if zeros != 0 {
            *b |= zeros & random_mask(rng, p);
        }
    }
}

/// Flips each bit of `data` then `spare` with probability `p`, by drawing geometric gaps between
/// flips (one draw per flip, not per bit). Returns the number of flips.
pub(crate) fn flip_bits(rng: &mut ChaCha8Rng, p: f64, data: &mut [u8], spare: &mut [u8]) -> u64 {
    let data_bits = data.len() as u64 * 8;
    let total_bits = data_bits + spare.len() as u64 * 8;
    if p <= 0.0 || total_bits == 0 {
        return 0;
    }
    let mut flip = |bit: u64| {
        let (buf, bit) = if bit < data_bits { (&mut *data, bit) } else { (&mut *spare, bit - data_bits) };
        buf[(bit / 8) as usize] ^= 1 << (bit % 8);
    };
    if p >= 1.0 {
        (0..total_bits).for_each(&mut flip);
        return total_bits;
    }
    let ln_q = (-p).ln_1p();
    let mut pos = 0u64;
    let mut flips = 0;
    loop {
        // P(gap >= k) = (1 - p)^k.
        let u: f64 = rng.random();
        let gap = ((-u).ln_1p() / ln_q).floor();
        if gap.is_nan() || gap >= (total_bits - pos) as f64 {
            return flips;
        }
        pos += gap as u64;
        flip(pos);
        flips += 1;
        pos += 1;
        if pos >= total_bits {
            return flips;
        }
    }
}

/// Sets the factory-bad flag of the listed blocks and of a seeded draw of `permille` of the
/// others (block 0 excluded from the draw).
pub(crate) fn draw_factory_bad(cfg: &FaultConfig, bad: &mut [bool], seed: u64) {
    if cfg.factory_bad_permille > 0 {
        let mut rng = stream_rng(seed, STREAM_FACTORY);
        for flag in bad.iter_mut().skip(1) {
            *flag = rng.random_range(0..1000) < cfg.factory_bad_permille;
        }
    }
    for &b in &cfg.factory_bad {
        if let Some(flag) = bad.get_mut(b as usize) {
            *flag = true;
        }
    }
}

/// Run-time fault state: random streams and pending injections.
#[derive(Clone, Debug)]
pub(crate) struct FaultState {
    /// Grown-failure decisions and the bits of failed operations.
    pub(crate) rng: ChaCha8Rng,
    /// Raw bit errors.
    pub(crate) rber_rng: ChaCha8Rng,
    /// Whether any wear-driven failure probability is non-zero.
    pub(crate) wear_faults: bool,
    /// Whether `rber` or `read_disturb_factor` is non-zero.
    pub(crate) rber_on: bool,
    injected_program: Vec<u32>,
    injected_erase: Vec<u32>,
    program_countdown: Option<u64>,
    erase_countdown: Option<u64>,
}

impl FaultState {
    pub(crate) fn new(cfg: &FaultConfig, seed: u64) -> Self {
        let mut s = FaultState {
            rng: stream_rng(seed, STREAM_FAULTS),
            rber_rng: stream_rng(seed, STREAM_RBER),
            wear_faults: false,
            rber_on: false,
            injected_program: Vec::new(),
            injected_erase: Vec::new(),
            program_countdown: None,
            erase_countdown: None,
        };
        s.configure(cfg);
        s
    }

    pub(crate) fn configure(&mut self, cfg: &FaultConfig) {
        self.wear_faults = cfg.program_fail_base > 0.0
            || cfg.program_fail_slope > 0.0
            || cfg.erase_fail_base > 0.0
            || cfg.erase_fail_slope > 0.0;
        self.rber_on = cfg.rber > 0.0 || cfg.read_disturb_factor > 0.0;
    }

    /// Whether this program (of `block`, erase count `ec`), which reaches the array, fails.
    /// Consumes an injection or advances the countdown.
    pub(crate) fn program_fails(&mut self, cfg: &FaultConfig, block: u32, ec: u32, endurance: u32) -> bool {
        let mut fail = take_injection(&mut self.injected_program, block);
        fail |= tick(&mut self.program_countdown);
        if !fail && self.wear_faults {
            let p = wear_probability(cfg.program_fail_base, cfg.program_fail_slope, ec, endurance);
            fail = p > 0.0 && self.rng.random::<f64>() < p;
        }
        fail
    }

    /// Whether this erase (of `block`, erase count `ec`), which reaches the array, fails.
    pub(crate) fn erase_fails(&mut self, cfg: &FaultConfig, block: u32, ec: u32, endurance: u32) -> bool {
        let mut fail = take_injection(&mut self.injected_erase, block);
        fail |= tick(&mut self.erase_countdown);
        if !fail && self.wear_faults {
            let p = wear_probability(cfg.erase_fail_base, cfg.erase_fail_slope, ec, endurance);
            fail = p > 0.0 && self.rng.random::<f64>() < p;
        }
        fail
    }

    pub(crate) fn clear_injections(&mut self) {
        self.injected_program.clear();
        self.injected_erase.clear();
        self.program_countdown = None;
        self.erase_countdown = None;
    }
}

fn take_injection(list: &mut Vec<u32>, block: u32) -> bool {
    if list.is_empty() {
        return false;
    }
    match list.iter().position(|&b| b == block) {
        Some(i) => {
            list.swap_remove(i);
            true
        }
        None => false,
    }
}

/// Advances a countdown; true when it fires.
fn tick(countdown: &mut Option<u64>) -> bool {
    match countdown {
        None => false,
        Some(0) => {
            *countdown = None;
            true
        }
        Some(n) => {
            *n -= 1;
            false
        }
    }
}

impl Emulator {
    /// The next program of `block` that reaches the array reports FAIL, leaving the page partly
    /// programmed. Several injections of one block fail that many programs.
    pub fn inject_program_failure(&mut self, block: BlockId) -> Result<(), EmuError> {
        self.check_block(block)?;
        self.faults.injected_program.push(block.0);
        Ok(())
    }

    /// The next erase of `block` that reaches the array reports FAIL, leaving it partly erased.
    pub fn inject_erase_failure(&mut self, block: BlockId) -> Result<(), EmuError> {
        self.check_block(block)?;
        self.faults.injected_erase.push(block.0);
        Ok(())
    }

    /// Of the programs that reach the array from now on (any block; refused ones and
    /// [`nand_hal::NandFlash::mark_bad`] do not count), the one with index `n` fails (0 = the
    /// next). Replaces an earlier countdown.
    pub fn fail_program_after(&mut self, n: u64) {
        self.faults.program_countdown = Some(n);
    }

    /// Of the erases that reach the array from now on, the one with index `n` fails (0 = the
    /// next). Replaces an earlier countdown.
    pub fn fail_erase_after(&mut self, n: u64) {
        self.faults.erase_countdown = Some(n);
    }

    /// Drops every pending injected failure and countdown.
    pub fn clear_injected_failures(&mut self) {
        self.faults.clear_injections();
    }

    /// Replaces the fault settings from now on. The factory-bad fields are ignored (factory bad
    /// blocks were drawn at construction); the random streams continue.
    pub fn set_fault_config(&mut self, mut faults: FaultConfig) -> Result<(), EmuError> {
        faults.factory_bad = self.config.faults.factory_bad.clone();
        faults.factory_bad_permille = self.config.faults.factory_bad_permille;
        faults.validate(self.geo.total_blocks())?;
        self.faults.configure(&faults);
        self.config.faults = faults;
        Ok(())
    }

    /// Whether `block` was bad from the factory (`None` if it does not exist). Unlike
    /// [`nand_hal::NandFlash::is_bad`], this is not a device operation.
    pub fn is_factory_bad(&self, block: BlockId) -> Option<bool> {
        self.factory_bad.get(block.0 as usize).copied()
    }

    /// The factory bad blocks, ascending.
    pub fn factory_bad_blocks(&self) -> impl Iterator<Item = BlockId> + '_ {
        self.factory_bad.iter().enumerate().filter(|(_, &bad)| bad).map(|(b, _)| BlockId(b as u32))
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{small_config, small_geometry};
    use super::super::{Emulator, EmulatorConfig};
    use super::*;
    use nand_hal::{Error as _, ErrorKind, Geometry, NandFlash, PageId};

    fn emu_with(faults: FaultConfig) -> Emulator {
        Emulator::new(EmulatorConfig { faults, ..small_config() }).unwrap()
    }

    #[test]
    fn factory_bad_blocks_carry_the_marker() {
        let mut e = emu_with(FaultConfig { factory_bad: vec![3, 5], ..FaultConfig::default() });
        let g = e.geometry();
        assert_eq!(e.factory_bad_blocks().collect::<Vec<_>>(), [BlockId(3), BlockId(5)]);
        for p in 0..g.pages_per_block {
            let (data, spare) = e.peek_page(g.page(BlockId(3), p)).unwrap();
            assert!(data.iter().all(|&b| b == 0xFF));
            let marker = if p < 2 { 0x00 } else { 0xFF };
            assert_eq!(spare[0], marker, "page {p}");
            assert!(spare[1..].iter().all(|&b| b == 0xFF));
        }
        let before = *e.counters();
        assert!(e.is_bad(BlockId(3)).unwrap());
        assert!(e.is_bad(BlockId(5)).unwrap());
        assert!(!e.is_bad(BlockId(4)).unwrap());
        assert!(!e.is_bad(BlockId(0)).unwrap());
        let c = e.counters();
        assert_eq!(c.reads - before.reads, 8);
        assert_eq!(c.spare_reads - before.spare_reads, 8);
        assert_eq!(c.bytes_out - before.bytes_out, 8);
        assert_eq!(e.ops_issued(), 4);
        assert_eq!(e.is_bad(BlockId(99)).unwrap_err().kind(), ErrorKind::OutOfRange);
        // Any non-0xFF first spare byte of page 0 or of page 1 reads as a marker.
        e.program_page(g.page(BlockId(7), 0), &[], &[0x00]).unwrap();
        e.program_page(g.page(BlockId(8), 1), &[], &[0x7F]).unwrap();
        e.program_page(g.page(BlockId(10), 2), &[], &[0x00]).unwrap();
        assert!(e.is_bad(BlockId(7)).unwrap());
        assert!(e.is_bad(BlockId(8)).unwrap());
        assert!(!e.is_bad(BlockId(10)).unwrap(), "page 2 carries no marker");
    }

    #[test]
    fn factory_bad_blocks_refuse_program_and_erase() {
        let mut e = emu_with(FaultConfig { factory_bad: vec![2], ..FaultConfig::default() });
        let p = e.geometry().page(BlockId(2), 4);
        assert_eq!(e.program_page(p, &[0; 16], &[0; 4]).unwrap_err().kind(), ErrorKind::ProgramFailed);
        assert_eq!(e.erase_block(BlockId(2)).unwrap_err().kind(), ErrorKind::EraseFailed);
        assert_eq!(e.erase_block(BlockId(2)).unwrap_err(), EmuError::EraseFailed(BlockId(2)));
        // Nothing changed: the page is erased, the marker is still there, no erase cycle counted.
        let (data, _) = e.peek_page(p).unwrap();
        assert!(data.iter().all(|&b| b == 0xFF));
        assert!(e.is_bad(BlockId(2)).unwrap());
        assert_eq!(e.erase_count(BlockId(2)), Some(0));
        assert_eq!(e.counters().program_failures, 1);
        assert_eq!(e.counters().erase_failures, 2);
    }

    #[test]
    fn factory_bad_draw_is_seeded_and_spares_block_zero() {
        let geometry = Geometry { blocks_per_plane: 2000, ..small_geometry() };
        let cfg = |seed| EmulatorConfig {
            seed,
            store_data: false,
            faults: FaultConfig { factory_bad_permille: 20, ..FaultConfig::default() },
            ..EmulatorConfig::new(geometry)
        };
        let a: Vec<_> = Emulator::new(cfg(1)).unwrap().factory_bad_blocks().collect();
        let b: Vec<_> = Emulator::new(cfg(1)).unwrap().factory_bad_blocks().collect();
        let c: Vec<_> = Emulator::new(cfg(2)).unwrap().factory_bad_blocks().collect();
        assert_eq!(a, b);
        assert_ne!(a, c);
        // 4000 blocks at 2 %: 80 expected, sd ~ 8.9.
        assert!((50..=110).contains(&a.len()), "{}", a.len());
        assert!(!a.contains(&BlockId(0)));
    }

    #[test]
    fn mark_bad_ignores_nop_and_order() {
        let mut e = Emulator::new(small_config()).unwrap();
        let g = e.geometry();
        // Use up NOP on page 0 and move the order past pages 0 and 1.
        for _ in 0..g.nop {
            e.program_page(g.page(BlockId(1), 0), &[], &[0xFF, 0x12]).unwrap();
        }
        e.program_page(g.page(BlockId(1), 5), &[0], &[]).unwrap();
        assert!(!e.is_bad(BlockId(1)).unwrap());
        e.mark_bad(BlockId(1)).unwrap();
        assert!(e.is_bad(BlockId(1)).unwrap());
        assert_eq!(e.peek_page(g.page(BlockId(1), 0)).unwrap().1[..2], [0x00, 0x12]);
        assert_eq!(e.peek_page(g.page(BlockId(1), 1)).unwrap().1[0], 0x00);
        assert_eq!(e.program_count(g.page(BlockId(1), 1)), Some(0));
        // An erase removes a grown marker, as on real parts.
        e.erase_block(BlockId(1)).unwrap();
        assert!(!e.is_bad(BlockId(1)).unwrap());
    }

    #[test]
    fn injected_program_failure_tears_the_page_and_counts_nop() {
        let mut e = Emulator::new(EmulatorConfig { seed: 11, ..small_config() }).unwrap();
        let g = e.geometry();
        e.inject_program_failure(BlockId(2)).unwrap();
        // Another block is unaffected.
        e.program_page(g.page(BlockId(1), 0), &[0x00; 8], &[]).unwrap();
        let p = g.page(BlockId(2), 0);
        let pattern = [0x0F; 64];
        let err = e.program_page(p, &pattern, &[0x00; 8]).unwrap_err();
        assert_eq!(err, EmuError::ProgramFailed(p));
        let (data, spare) = e.peek_page(p).unwrap();
        // Only bits the program was clearing (the high nibbles) can be cleared ...
        assert!(data[..64].iter().all(|&b| b & 0x0F == 0x0F));
        assert!(data[64..].iter().all(|&b| b == 0xFF));
        // ... and with p = 1/2 over 256 + 64 bits, some but not all were.
        let cleared: u32 = data[..64].iter().map(|b| (!b).count_ones()).sum::<u32>()
            + spare[..8].iter().map(|b| (!b).count_ones()).sum::<u32>();
        assert!((60..260).contains(&cleared), "{cleared}");
        assert_eq!(e.program_count(p), Some(1));
        assert_eq!(e.counters().program_failures, 1);
        // The injection is consumed.
        e.program_page(g.page(BlockId(2), 1), &[0x00], &[]).unwrap();
    }

    #[test]
    fn failed_program_pattern_is_deterministic_with_the_seed() {
        let torn = |seed| {
            let mut e = Emulator::new(EmulatorConfig { seed, ..small_config() }).unwrap();
            e.fail_program_after(0);
            let p = e.geometry().page(BlockId(0), 0);
            assert!(e.program_page(p, &[0x00; 32], &[]).is_err());
            e.peek_page(p).unwrap().0[..32].to_vec()
        };
        assert_eq!(torn(5), torn(5));
        assert_ne!(torn(5), torn(6));
    }

    #[test]
    fn fail_program_after_counts_programs_that_reach_the_array() {
        let mut e = Emulator::new(small_config()).unwrap();
        let g = e.geometry();
        e.fail_program_after(2);
        e.program_page(g.page(BlockId(0), 0), &[0], &[]).unwrap();
        // Refused (out of order): does not count.
        assert!(e.program_page(g.page(BlockId(0), 3), &[0], &[]).is_ok());
        assert_eq!(
            e.program_page(g.page(BlockId(0), 1), &[0], &[]).unwrap_err().kind(),
            ErrorKind::ProgramOrder
        );
        let p = g.page(BlockId(0), 4);
        assert_eq!(e.program_page(p, &[0], &[]).unwrap_err(), EmuError::ProgramFailed(p));
        e.program_page(g.page(BlockId(0), 5), &[0], &[]).unwrap();
    }

    #[test]
    fn injected_erase_failure_leaves_the_block_partly_erased() {
        let mut e = Emulator::new(small_config()).unwrap();
        let g = e.geometry();
        let zeros = vec![0u8; g.data_bytes as usize];
        for p in 0..g.pages_per_block {
            e.program_page(g.page(BlockId(3), p), &zeros, &[0; 16]).unwrap();
        }
        e.inject_erase_failure(BlockId(3)).unwrap();
        assert_eq!(e.erase_block(BlockId(3)).unwrap_err(), EmuError::EraseFailed(BlockId(3)));
        let mut ones = 0u64;
        let mut total = 0u64;
        for p in 0..g.pages_per_block {
            let (data, _) = e.peek_page(g.page(BlockId(3), p)).unwrap();
            ones += data.iter().map(|b| u64::from(b.count_ones())).sum::<u64>();
            total += data.len() as u64 * 8;
            assert_eq!(e.program_count(g.page(BlockId(3), p)), Some(0));
        }
        assert!(ones > total / 3 && ones < total * 2 / 3, "{ones} of {total}");
        assert_eq!(e.erase_count(BlockId(3)), Some(1));
        assert_eq!(e.counters().erase_failures, 1);
        e.fail_erase_after(1);
        e.erase_block(BlockId(3)).unwrap();
        assert!(e.peek_page(g.page(BlockId(3), 0)).unwrap().0.iter().all(|&b| b == 0xFF));
        assert!(e.erase_block(BlockId(3)).is_err());
        e.erase_block(BlockId(3)).unwrap();
    }

    #[test]
    fn wear_probability_formula() {
        assert_eq!(wear_probability(0.01, 0.5, 500, 1000), 0.01);
        assert_eq!(wear_probability(0.01, 0.5, 1000, 1000), 0.01);
        assert!((wear_probability(0.01, 0.5, 1500, 1000) - 0.26).abs() < 1e-12);
        let wear = |rber, rber_wear_factor| FaultConfig { rber, rber_wear_factor, ..FaultConfig::default() };
        let at = |ec| PageWear { ec, ..PageWear::default() };
        assert!((effective_rber(&wear(1e-4, 2.0), at(500), 1000) - 2e-4).abs() < 1e-15);
        assert_eq!(effective_rber(&wear(0.6, 10.0), at(1000), 1000), 1.0);
        let all = FaultConfig {
            rber: 1e-4,
            rber_wear_factor: 1.0,
            rber_retention_factor: 2.0,
            rber_retention_scale_s: 1000.0,
            read_disturb_factor: 1e-7,
            ..FaultConfig::default()
        };
        // 1e-4 * (1 + 0.5) * (1 + 2 * 0.25) + 1e-7 * 100
        let p = effective_rber(&all, PageWear { ec: 500, age_s: 250, block_reads: 100 }, 1000);
        assert!((p - (2.25e-4 + 1e-5)).abs() < 1e-15, "{p}");
    }

    #[test]
    fn wear_driven_erase_failures_start_past_endurance() {
        let geometry = Geometry { endurance: 10, ..small_geometry() };
        let faults = FaultConfig { erase_fail_slope: 1.0, ..FaultConfig::default() };
        let mut e = Emulator::new(EmulatorConfig { faults, ..EmulatorConfig::new(geometry) }).unwrap();
        // Within the rating: p = 0.
        for _ in 0..10 {
            e.erase_block(BlockId(0)).unwrap();
        }
        // From ec = 10 the probability grows by 0.1 per erase: it must fail within 10 more.
        let mut failed_at = None;
        for i in 0..11 {
            if e.erase_block(BlockId(0)).is_err() {
                failed_at = Some(i);
                break;
            }
        }
        let at = failed_at.unwrap();
        assert!(at >= 1, "p was 0 at ec = 10");
        assert_eq!(e.counters().erase_failures, 1);
    }

    #[test]
    fn program_fail_base_applies_at_any_wear() {
        let faults = FaultConfig { program_fail_base: 0.25, ..FaultConfig::default() };
        let mut e = Emulator::new(EmulatorConfig { faults, seed: 3, ..small_config() }).unwrap();
        let g = e.geometry();
        let mut failures = 0;
        for b in 0..g.total_blocks() {
            for p in 0..g.pages_per_block {
                if e.program_page(g.page(BlockId(b), p), &[0], &[]).is_err() {
                    failures += 1;
                }
            }
        }
        let n = g.total_pages(); // 256 programs, 64 expected failures, sd ~ 6.9
        assert_eq!(n, 256);
        assert!((40..=90).contains(&failures), "{failures}");
        assert_eq!(e.counters().program_failures, failures);
    }

    #[test]
    fn rber_flips_about_the_expected_number_of_bits() {
        let rber = 1e-3;
        let faults = FaultConfig { rber, ..FaultConfig::default() };
        let mut e = Emulator::new(EmulatorConfig { faults, seed: 9, ..small_config() }).unwrap();
        let g = e.geometry();
        let p = g.page(BlockId(0), 0);
        let pattern: Vec<u8> = (0..g.data_bytes).map(|i| (i * 7) as u8).collect();
        e.program_page(p, &pattern, &[0x5A; 16]).unwrap();
        let (mut data, mut spare) = (vec![0u8; g.data_bytes as usize], vec![0u8; g.spare_bytes as usize]);
        let reads = 2000u64;
        let mut differing = 0u64;
        for _ in 0..reads {
            e.read_page(p, &mut data, &mut spare).unwrap();
            differing += data.iter().zip(&pattern).map(|(a, b)| u64::from((a ^ b).count_ones())).sum::<u64>();
            differing += spare[..16].iter().map(|a| u64::from((a ^ 0x5A).count_ones())).sum::<u64>();
            differing += spare[16..].iter().map(|a| u64::from((a ^ 0xFF).count_ones())).sum::<u64>();
        }
        let bits = reads * u64::from(g.raw_page_bytes()) * 8;
        let expected = bits as f64 * rber; // 8448, sd ~ 92
        assert!((differing as f64 - expected).abs() < 0.05 * expected, "{differing} vs {expected}");
        assert_eq!(e.counters().bit_flips, differing);
        // The stored page is untouched.
        assert_eq!(e.peek_page(p).unwrap().0, &pattern[..]);
    }

    #[test]
    fn rber_grows_with_wear() {
        let geometry = Geometry { endurance: 4, ..small_geometry() };
        let faults = FaultConfig { rber: 1e-3, rber_wear_factor: 1.0, ..FaultConfig::default() };
        let mut e = Emulator::new(EmulatorConfig { faults, ..EmulatorConfig::new(geometry) }).unwrap();
        for _ in 0..4 {
            e.erase_block(BlockId(1)).unwrap();
        }
        let g = e.geometry();
        let mut buf = vec![0u8; g.data_bytes as usize];
        let flips = |e: &mut Emulator, b: u32, buf: &mut [u8]| {
            let before = e.counters().bit_flips;
            for _ in 0..2000 {
                e.read_page(g.page(BlockId(b), 0), buf, &mut []).unwrap();
            }
            e.counters().bit_flips - before
        };
        let fresh = flips(&mut e, 0, &mut buf) as f64; // expected 8192
        let worn = flips(&mut e, 1, &mut buf) as f64; // expected 16384
        assert!((worn / fresh - 2.0).abs() < 0.15, "{fresh} {worn}");
    }

    /// Flips over `reads` full reads (data and spare) of `page`.
    fn flips_over(e: &mut Emulator, page: PageId, reads: u32) -> u64 {
        let g = e.geometry();
        let (mut d, mut s) = (vec![0u8; g.data_bytes as usize], vec![0u8; g.spare_bytes as usize]);
        let before = e.counters().bit_flips;
        for _ in 0..reads {
            e.read_page(page, &mut d, &mut s).unwrap();
        }
        e.counters().bit_flips - before
    }

    /// `got` is within 5 standard deviations of a binomial mean over `bits` trials at `p`.
    fn assert_binomial(got: u64, bits: u64, p: f64) {
        let mean = bits as f64 * p;
        let sd = (mean * (1.0 - p)).sqrt();
        assert!((got as f64 - mean).abs() < 5.0 * sd, "{got} flips, expected {mean} +- {sd}");
    }

    #[test]
    fn rber_grows_with_retention_time() {
        let faults = FaultConfig {
            rber: 1e-4,
            rber_retention_factor: 3.0,
            rber_retention_scale_s: 3600.0,
            ..FaultConfig::default()
        };
        let mut e = Emulator::new(EmulatorConfig { faults, seed: 4, ..small_config() }).unwrap();
        let g = e.geometry();
        let bits = u64::from(g.raw_page_bytes()) * 8 * 4000;
        let fresh = g.page(BlockId(2), 0);
        e.program_page(fresh, &[0x00; 512], &[]).unwrap();
        assert_binomial(flips_over(&mut e, fresh, 4000), bits, 1e-4);
        // Two hours later: 1e-4 * (1 + 3 * 2) = 7e-4; a page programmed now is fresh again.
        e.set_now_ns(7200 * 1_000_000_000);
        assert_eq!(e.page_age_s(fresh), Some(7200));
        assert_binomial(flips_over(&mut e, fresh, 4000), bits, 7e-4);
        let young = g.page(BlockId(2), 1);
        e.program_page(young, &[0x00; 512], &[]).unwrap();
        assert_eq!(e.page_age_s(young), Some(0));
        assert_binomial(flips_over(&mut e, young, 4000), bits, 1e-4);
        // An erase makes the block's pages young.
        e.erase_block(BlockId(2)).unwrap();
        assert_eq!(e.page_age_s(fresh), Some(0));
        assert_binomial(flips_over(&mut e, fresh, 4000), bits, 1e-4);
    }

    #[test]
    fn read_disturb_adds_per_read_of_the_block() {
        let d = 1e-7;
        let faults = FaultConfig { read_disturb_factor: d, ..FaultConfig::default() };
        let mut e = Emulator::new(EmulatorConfig { faults, seed: 5, ..small_config() }).unwrap();
        let g = e.geometry();
        let raw_bits = u64::from(g.raw_page_bytes()) * 8;
        // Reads k = 0..n of the block see rates d * k: over n reads, sum = d * n (n - 1) / 2.
        let n = 3000u32;
        let flips = flips_over(&mut e, g.page(BlockId(3), 1), n);
        let mean_p = d * f64::from(n - 1) / 2.0;
        assert_binomial(flips, raw_bits * u64::from(n), mean_p);
        assert_eq!(e.block_reads_since_erase(BlockId(3)), Some(n));
        // Another page of the block sees the block's reads; another block sees none.
        let other = flips_over(&mut e, g.page(BlockId(3), 6), 1000);
        assert_binomial(other, raw_bits * 1000, d * (f64::from(n) + 499.5));
        assert_eq!(flips_over(&mut e, g.page(BlockId(4), 0), 1), 0, "the first read of a block is clean");
        assert_eq!(e.block_reads_since_erase(BlockId(4)), Some(1));
        // An erase resets the counter.
        e.erase_block(BlockId(3)).unwrap();
        assert_eq!(e.block_reads_since_erase(BlockId(3)), Some(0));
        assert_eq!(flips_over(&mut e, g.page(BlockId(3), 1), 1), 0);
    }

    #[test]
    fn wear_retention_and_disturb_combine() {
        let geometry = Geometry { endurance: 10, ..small_geometry() };
        let faults = FaultConfig {
            rber: 1e-4,
            rber_wear_factor: 1.0,
            rber_retention_factor: 1.0,
            rber_retention_scale_s: 10.0,
            read_disturb_factor: 1e-8,
            ..FaultConfig::default()
        };
        let mut e =
            Emulator::new(EmulatorConfig { faults, seed: 6, ..EmulatorConfig::new(geometry) }).unwrap();
        let g = e.geometry();
        for _ in 0..10 {
            e.erase_block(BlockId(5)).unwrap();
        }
        let page = g.page(BlockId(5), 0);
        e.program_page(page, &[0x00; 512], &[]).unwrap();
        e.set_now_ns(10_000_000_000);
        // 1e-4 * 2 * 2 + 1e-8 * mean(0..2000)
        let n = 2000u32;
        let flips = flips_over(&mut e, page, n);
        let p = 4e-4 + 1e-8 * f64::from(n - 1) / 2.0;
        assert_binomial(flips, u64::from(g.raw_page_bytes()) * 8 * u64::from(n), p);
    }

    #[test]
    fn factors_without_a_rate_draw_nothing() {
        let faults = FaultConfig {
            rber_wear_factor: 5.0,
            rber_retention_factor: 100.0,
            rber_retention_scale_s: 1.0,
            ..FaultConfig::default()
        };
        let mut e = Emulator::new(EmulatorConfig { faults, ..small_config() }).unwrap();
        let g = e.geometry();
        e.program_page(g.page(BlockId(0), 0), &[0x00; 16], &[]).unwrap();
        e.set_now_ns(1_000_000_000_000);
        let before = e.faults.rber_rng.get_word_pos();
        assert_eq!(flips_over(&mut e, g.page(BlockId(0), 0), 500), 0);
        assert_eq!(e.faults.rber_rng.get_word_pos(), before);
        assert_eq!(e.counters().bit_flips, 0);
        assert!(!e.faults.rber_on);
        // Read disturb alone turns the model on.
        let mut cfg = e.config().faults.clone();
        cfg.read_disturb_factor = 1e-6;
        e.set_fault_config(cfg).unwrap();
        assert!(flips_over(&mut e, g.page(BlockId(0), 0), 200) > 0);
    }

    #[test]
    fn zero_rates_draw_no_random_numbers() {
        let mut e = Emulator::new(small_config()).unwrap();
        let g = e.geometry();
        let before = (e.faults.rng.get_word_pos(), e.faults.rber_rng.get_word_pos());
        let mut buf = vec![0u8; g.data_bytes as usize];
        for i in 0..50 {
            e.program_page(g.page(BlockId(0), i % g.pages_per_block), &[0xAA; 8], &[]).ok();
            e.read_page(g.page(BlockId(0), 0), &mut buf, &mut []).unwrap();
            e.erase_block(BlockId(1)).unwrap();
        }
        assert_eq!(before, (e.faults.rng.get_word_pos(), e.faults.rber_rng.get_word_pos()));
        assert_eq!(e.counters().bit_flips, 0);
    }

    #[test]
    fn flip_bits_spans_data_and_spare() {
        let mut rng = stream_rng(1, 9);
        let (mut d, mut s) = ([0u8; 2], [0u8; 1]);
        assert_eq!(flip_bits(&mut rng, 1.0, &mut d, &mut s), 24);
        assert_eq!((d, s), ([0xFF; 2], [0xFF]));
        assert_eq!(flip_bits(&mut rng, 0.0, &mut d, &mut s), 0);
        let (mut d, mut s) = ([0u8; 0], [0u8; 1000]);
        let n = flip_bits(&mut rng, 0.5, &mut d, &mut s);
        let ones: u64 = s.iter().map(|b| u64::from(b.count_ones())).sum();
        assert_eq!(n, ones);
        assert!((3700..4300).contains(&n), "{n}");
    }

    #[test]
    fn invalid_fault_configs_are_rejected() {
        for faults in [
            FaultConfig { rber: 1.5, ..FaultConfig::default() },
            FaultConfig { torn_fraction: -0.1, ..FaultConfig::default() },
            FaultConfig { program_fail_slope: f64::NAN, ..FaultConfig::default() },
            FaultConfig { factory_bad: vec![1000], ..FaultConfig::default() },
            FaultConfig { factory_bad_permille: 1001, ..FaultConfig::default() },
            FaultConfig { rber_retention_scale_s: 0.0, ..FaultConfig::default() },
            FaultConfig { read_disturb_factor: -1.0, ..FaultConfig::default() },
            FaultConfig { rber_retention_factor: f64::INFINITY, ..FaultConfig::default() },
        ] {
            let err = Emulator::new(EmulatorConfig { faults, ..small_config() }).unwrap_err();
            assert_eq!(err.kind(), ErrorKind::Other);
        }
        let mut e = Emulator::new(small_config()).unwrap();
        assert!(e.set_fault_config(FaultConfig { rber: 2.0, ..FaultConfig::default() }).is_err());
        e.set_fault_config(FaultConfig { rber: 0.5, ..FaultConfig::default() }).unwrap();
        let mut buf = [0u8; 64];
        e.read_page(PageId(0), &mut buf, &mut []).unwrap();
        assert!(e.counters().bit_flips > 0);
    }
}
