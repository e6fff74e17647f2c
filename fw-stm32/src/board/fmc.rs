//! The ONFI bus over the STM32H743's FMC NAND bank (bank 3, NCE on PG9), 8 bits wide.
//!
//! The FMC drives the cycles: a byte written to 0x8001_0000 (A16 = CLE high) is a command
//! cycle, to 0x8002_0000 (A17 = ALE high) an address cycle, to or from 0x8000_0000 a data cycle.
//! The window is mapped as Device memory by the MPU (see `super::configure_mpu`), so every access
//! happens once, in program order, uncached and never speculatively.
//!
//! Why not the `stm32-fmc` crate's NAND support: it fixes 5 address cycles, reads 115 bytes of
//! the parameter page without checking its CRC and carries its own command sequences; here the
//! command sequences are nand-hal's ONFI driver's, and this module is only the bus underneath
//! (cycles, gaps, R/B#), configured from the reference manual's FMC_PCR / FMC_PMEM / FMC_PATT.
//!
//! Timing: the FMC kernel clock is HCLK3 = 200 MHz (5 ns). The bus starts in ONFI asynchronous
//! timing mode 0 (every part's power-on mode); the driver then picks the fastest mode both the
//! part and this bus support ([`OnfiBus::timing_modes`]: modes 0-3; modes 4 and 5 need tREA of
//! 20 and 16 ns, too close to one 5 ns kernel clock plus unmeasured board delays to claim before
//! bring-up), sets it on the part with SET FEATURES and hands it here ([`OnfiBus::set_timing`]):
//! [`fmc_timing`] turns its nanoseconds into FMC_PMEM / FMC_PATT / TCLR / TAR clocks (each
//! minimum rounded up), and the gaps the FMC does not enforce between cycles of different kinds
//! (tADL, tCCS, tWHR, tRHW) and the wait before R/B# may be sampled (tWB) are made in software,
//! after the FMC's write FIFO is disabled (BCR1.WFDIS) and found empty (SR.FEMPT), so that the gap
//! is on the pins. The NAND window is strongly-ordered memory (`super::configure_mpu`): every
//! access completes before the next instruction, so a command write cannot still be on its way
//! when R/B# is sampled.
//!
//! R/B#: any embedded-hal 1.0 [`InputPin`] (on the Apollo a GPIO input with pull-up on PD6, the
//! FMC_NWAIT pin, which the board wires to the NAND's R/B#; `super::ReadyPin` adapts the HAL's
//! pin), polled with a timeout measured by the DWT cycle counter. A pin that reports an error
//! fails the bus call with [`FmcError::ReadyPin`]. The FMC's own wait
//! feature (PWAITEN) is off. The driver waits for R/B# to go busy, then ready, then confirms with
//! READ STATUS (see nand-hal's driver).

use core::ptr::{read_volatile, write_volatile};

use cortex_m::peripheral::DWT;
use embedded_hal::digital::{Error as _, InputPin};
use nand_hal::onfi::{BusTiming, OnfiBus, ReadyLine, Wait};
use nand_hal::ErrorKind;
use stm32h7xx_hal::pac;

use super::CPU_HZ;

/// Data cycles.
const DATA: *mut u8 = 0x8000_0000 as *mut u8;
/// Command cycles (A16 = CLE).
const CMD: *mut u8 = 0x8001_0000 as *mut u8;
/// Address cycles (A17 = ALE).
const ADDR: *mut u8 = 0x8002_0000 as *mut u8;

/// FMC kernel clock the timings are computed for.
pub const FMC_KERNEL_HZ: u32 = 200_000_000;

/// Nanoseconds per FMC kernel clock.
const CLK_NS: u32 = 1_000_000_000 / FMC_KERNEL_HZ;

/// FMC clock counts for one set of interface timings.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct FmcTiming {
    /// FMC_PMEM / FMC_PATT fields: set-up before NWE/NOE falls is MEMSET + 1 clocks, NWE/NOE low
    /// MEMWAIT + 1, hold after it rises MEMHOLD, data bus driven from MEMHIZ.
    pub memset: u32,
    /// See `memset`.
    pub memwait: u32,
    /// See `memset`.
    pub memhold: u32,
    /// See `memset`.
    pub memhiz: u32,
    /// CLE to RE# and ALE to RE#: (TCLR + MEMSET + 2) and (TAR + MEMSET + 2) clocks.
    pub tclr: u32,
    /// See `tclr`.
    pub tar: u32,
}

fn clocks(ns: u32) -> u32 {
    ns.div_ceil(CLK_NS)
}

/// The FMC clocks that meet `t` (every minimum rounded up to whole 5 ns clocks; tREA plus one
/// clock of margin for the data to settle before NOE rises).
pub fn fmc_timing(t: &BusTiming) -> FmcTiming {
    let low = clocks((t.t_wp.max(t.t_rp).max(t.t_rea + CLK_NS as u16)) as u32).max(1);
    let hold = clocks(t.t_wh.max(t.t_reh).max(t.t_dh).max(t.t_clh) as u32).max(1);
    // Set-up: CLE/ALE and data set-up before NWE rises, and the whole cycle at least tWC / tRC.
    let setup_ns = (t.t_cls.max(t.t_ds) as u32).saturating_sub(low * CLK_NS);
    let cycle_ns = (t.t_wc.max(t.t_rc) as u32).saturating_sub((low + hold) * CLK_NS);
    let setup = clocks(setup_ns.max(cycle_ns)).max(1);
    let memset = setup - 1;
    let to_re = |ns: u16| clocks(ns as u32).saturating_sub(memset + 2).min(15);
    FmcTiming {
        memset,
        memwait: low - 1,
        memhold: hold,
        memhiz: memset,
        tclr: to_re(t.t_clr),
        tar: to_re(t.t_ar),
    }
}

const PCR_PBKEN: u32 = 1 << 2;
const PCR_PTYP_NAND: u32 = 1 << 3;
const BCR1_WFDIS: u32 = 1 << 21;
const BCR1_FMCEN: u32 = 1 << 31;
const SR_FEMPT: u32 = 1 << 6;

/// What the bus itself can fail with: only the R/B# pin (the FMC cycles cannot fail; timeouts
/// are reported as [`Wait::TimedOut`] and become the driver's `OnfiError::Timeout`).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum FmcError {
    /// Reading the R/B# input failed (never, for an on-chip GPIO; an I/O expander pin may).
    ReadyPin(embedded_hal::digital::ErrorKind),
}

impl nand_hal::Error for FmcError {
    fn kind(&self) -> ErrorKind {
        match self {
            FmcError::ReadyPin(_) => ErrorKind::Other,
        }
    }
}

impl defmt::Format for FmcError {
    fn format(&self, f: defmt::Formatter<'_>) {
        match self {
            // embedded-hal's digital ErrorKind has only `Other` (non-exhaustive): no core::fmt here.
            FmcError::ReadyPin(_) => defmt::write!(f, "R/B# pin error"),
        }
    }
}

/// What the last cycle was, to insert the gaps the FMC does not.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Last {
    Idle,
    CmdAddr,
    DataIn,
    DataOut,
}

/// The NAND on FMC bank 3, R/B# on `RB` (see the module documentation).
pub struct FmcNand<RB: InputPin> {
    fmc: pac::FMC,
    rb: RB,
    last: Last,
    /// The interface timings in force (mode 0 until the driver sets another).
    timing: BusTiming,
}

fn delay_cycles(cycles: u32) {
    let start = DWT::cycle_count();
    while DWT::cycle_count().wrapping_sub(start) < cycles {}
}

fn delay_ns(ns: u32) {
    delay_cycles(ns.div_ceil(1_000_000_000 / CPU_HZ).max(1));
}

impl<RB: InputPin> FmcNand<RB> {
    /// Configures the FMC's NAND bank (the FMC clock must be enabled, its kernel clock at
    /// [`FMC_KERNEL_HZ`], the pins in their FMC alternate function) and takes R/B# on `rb` (an
    /// input whose high level means ready; keep the pull-up: R/B# is open drain).
    pub fn new(fmc: pac::FMC, rb: RB) -> Self {
        let mut bus = FmcNand { fmc, rb, last: Last::Idle, timing: BusTiming::MODE_0 };
        bus.program(&BusTiming::MODE_0);
        bus
    }

    /// The interface timings in force.
    pub fn timing(&self) -> &BusTiming {
        &self.timing
    }

    /// Writes the bank's registers for `t` (the bank is disabled while they change).
    fn program(&mut self, t: &BusTiming) {
        let f = fmc_timing(t);
        let pmem = f.memset | (f.memwait << 8) | (f.memhold << 16) | (f.memhiz << 24);
        let fmc = &self.fmc;
        // SAFETY: raw register values as RM0433 describes them (FMC_PCR: PTYP = NAND, PWID =
        // 8 bits, no ECC, no wait feature; FMC_PMEM/PATT timings; FMC_BCR1: FMC enable, write
        // FIFO off). Bank 1's own settings in BCR1 are kept; it is never accessed.
        unsafe {
            fmc.pcr.write(|w| w.bits(PCR_PTYP_NAND | (f.tclr << 9) | (f.tar << 13)));
            fmc.pmem.write(|w| w.bits(pmem));
            fmc.patt.write(|w| w.bits(pmem));
            fmc.pcr.modify(|r, w| w.bits(r.bits() | PCR_PBKEN));
            fmc.bcr1.modify(|r, w| w.bits(r.bits() | BCR1_WFDIS | BCR1_FMCEN));
        }
        cortex_m::asm::dsb();
        self.timing = *t;
    }

    /// Waits until the writes issued so far have left the FMC (bounded, in case FEMPT never
    /// sets with the FIFO disabled).
    fn drain(&self) {
        cortex_m::asm::dsb();
        let start = DWT::cycle_count();
        while self.fmc.sr.read().bits() & SR_FEMPT == 0 && DWT::cycle_count().wrapping_sub(start) < 4_000 {}
    }

    /// Before a command or address cycle: tRHW after data output.
    fn before_write(&mut self) {
        if self.last == Last::DataOut {
            delay_ns(self.timing.t_rhw as u32);
        }
    }

    /// After a command or address cycle that may start an array operation: tWB.
    fn before_sampling_rb(&mut self) {
        if self.last == Last::CmdAddr {
            self.drain();
            delay_ns(self.timing.t_wb as u32);
        }
        self.last = Last::Idle;
    }

    /// R/B# high: ready.
    fn ready(&mut self) -> Result<bool, FmcError> {
        self.rb.is_high().map_err(|e| FmcError::ReadyPin(e.kind()))
    }
}

impl<RB: InputPin> OnfiBus for FmcNand<RB> {
    type Error = FmcError;

    fn command(&mut self, cmd: u8) -> Result<(), FmcError> {
        self.before_write();
        // SAFETY: the command latch of the FMC NAND bank, mapped as Device memory.
        unsafe { write_volatile(CMD, cmd) };
        self.last = Last::CmdAddr;
        Ok(())
    }

    fn address(&mut self, cycles: &[u8]) -> Result<(), FmcError> {
        self.before_write();
        for &a in cycles {
            // SAFETY: the address latch of the FMC NAND bank, mapped as Device memory.
            unsafe { write_volatile(ADDR, a) };
        }
        self.last = Last::CmdAddr;
        Ok(())
    }

    fn write_data(&mut self, data: &[u8]) -> Result<(), FmcError> {
        match self.last {
            // tADL after the address, tCCS after CHANGE WRITE COLUMN.
            Last::CmdAddr => {
                self.drain();
                delay_ns(self.timing.t_adl.max(self.timing.t_ccs) as u32);
            }
            Last::DataOut => delay_ns(self.timing.t_rhw as u32),
            Last::Idle | Last::DataIn => {}
        }
        for &b in data {
            // SAFETY: the data port of the FMC NAND bank, mapped as Device memory.
            unsafe { write_volatile(DATA, b) };
        }
        self.last = Last::DataIn;
        Ok(())
    }

    fn read_data(&mut self, buf: &mut [u8]) -> Result<(), FmcError> {
        // tWHR after a command or address (READ STATUS, READ ID), tCCS after E0h.
        if matches!(self.last, Last::CmdAddr | Last::DataIn) {
            self.drain();
            delay_ns(self.timing.t_whr.max(self.timing.t_ccs) as u32);
        }
        for b in buf.iter_mut() {
            // SAFETY: the data port of the FMC NAND bank, mapped as Device memory.
            *b = unsafe { read_volatile(DATA) };
        }
        self.last = Last::DataOut;
        Ok(())
    }

    fn ready_line(&mut self) -> Result<ReadyLine, FmcError> {
        self.before_sampling_rb();
        Ok(if self.ready()? { ReadyLine::Ready } else { ReadyLine::Busy })
    }

    fn timing_modes(&self) -> u16 {
        0b1111
    }

    fn set_timing(&mut self, timing: &BusTiming) -> Result<(), FmcError> {
        self.drain();
        self.program(timing);
        Ok(())
    }

    fn delay_us(&mut self, us: u32) {
        let per_us = CPU_HZ / 1_000_000;
        let mut left = us;
        while left > 0 {
            let step = left.min(1_000_000);
            delay_cycles(step * per_us);
            left -= step;
        }
    }

    fn wait_ready(&mut self, timeout_us: u32) -> Result<Wait, FmcError> {
        self.before_sampling_rb();
        let limit = timeout_us as u64 * (CPU_HZ / 1_000_000) as u64;
        let start = super::now();
        loop {
            if self.ready()? {
                return Ok(Wait::Ready);
            }
            if super::now() - start > limit {
                return Ok(Wait::TimedOut);
            }
        }
    }
}
