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
//! Timing: the FMC kernel clock is HCLK3 = 200 MHz (5 ns). The cycle timings below meet ONFI
//! asynchronous timing mode 0 (the slowest, which every part supports): a read or write cycle
//! takes 25 clocks = 125 ns (tWC, tRC >= 100 ns). The gaps the FMC does not enforce between
//! cycles of different kinds (tWHR, tADL, tCCS, tRHW: at most 200 ns in mode 0) and the wait
//! before R/B# may be sampled (tWB, 100 ns) are made in software, after the FMC's write FIFO is
//! disabled (BCR1.WFDIS) and found empty (SR.FEMPT), so that the gap is on the pins.
//!
//! R/B#: on a GPIO input with pull-up (PD6, the FMC_NWAIT pin, which the Apollo board wires to
//! the NAND's R/B#), polled with a timeout measured by the DWT cycle counter. The FMC's own wait
//! feature (PWAITEN) is off.

use core::ptr::{read_volatile, write_volatile};

use cortex_m::peripheral::DWT;
use nand_hal::onfi::{OnfiBus, ReadyLine, Wait};
use nand_hal::ErrorKind;
use stm32h7xx_hal::gpio::{ErasedPin, Input};
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

/// FMC_PMEM / FMC_PATT, in kernel clocks (5 ns): set-up before NWE/NOE falls (MEMSET + 1 = 25 ns),
/// NWE/NOE low (MEMWAIT + 1 = 60 ns >= tWP, tRP 50 ns and tREA 40 ns), hold after it rises
/// (MEMHOLD = 40 ns >= tWH, tREH 30 ns, tDH, tCLH, tALH 20 ns), data bus driven from MEMHIZ.
const MEMSET: u32 = 4;
const MEMWAIT: u32 = 11;
const MEMHOLD: u32 = 8;
const MEMHIZ: u32 = 4;
/// CLE to RE# and ALE to RE# delays: (T + MEMSET + 2) clocks = 50 ns >= tCLR 20 ns, tAR 25 ns.
const TCLR: u32 = 4;
const TAR: u32 = 4;

const PCR_PBKEN: u32 = 1 << 2;
const PCR_PTYP_NAND: u32 = 1 << 3;
const BCR1_WFDIS: u32 = 1 << 21;
const BCR1_FMCEN: u32 = 1 << 31;
const SR_FEMPT: u32 = 1 << 6;

/// Software gap between cycles of different kinds (tWHR, tADL, tCCS, tRHW of mode 0 are at
/// most 200 ns).
const GAP_NS: u32 = 300;
/// Wait after a command or address cycle before R/B# means anything (tWB is 100 ns).
const T_WB_NS: u32 = 200;

/// The bus never fails by itself: timeouts are reported as [`Wait::TimedOut`] and become the
/// driver's `OnfiError::Timeout`.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum FmcError {}

impl nand_hal::Error for FmcError {
    fn kind(&self) -> ErrorKind {
        match *self {}
    }
}

impl defmt::Format for FmcError {
    fn format(&self, _: defmt::Formatter<'_>) {
        match *self {}
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

/// The NAND on FMC bank 3 (see the module documentation).
pub struct FmcNand {
    fmc: pac::FMC,
    rb: ErasedPin<Input>,
    last: Last,
}

fn delay_cycles(cycles: u32) {
    let start = DWT::cycle_count();
    while DWT::cycle_count().wrapping_sub(start) < cycles {}
}

fn delay_ns(ns: u32) {
    delay_cycles(ns.div_ceil(1_000_000_000 / CPU_HZ).max(1));
}

impl FmcNand {
    /// Configures the FMC's NAND bank (the FMC clock must be enabled, its kernel clock at
    /// [`FMC_KERNEL_HZ`], the pins in their FMC alternate function) and takes R/B# on `rb`.
    pub fn new(fmc: pac::FMC, rb: ErasedPin<Input>) -> Self {
        let pmem = MEMSET | (MEMWAIT << 8) | (MEMHOLD << 16) | (MEMHIZ << 24);
        // SAFETY: raw register values as RM0433 describes them (FMC_PCR: PTYP = NAND, PWID =
        // 8 bits, no ECC, no wait feature; FMC_PMEM/PATT timings; FMC_BCR1: FMC enable, write
        // FIFO off). Bank 1's own settings in BCR1 are kept; it is never accessed.
        unsafe {
            fmc.pcr.write(|w| w.bits(PCR_PTYP_NAND | (TCLR << 9) | (TAR << 13)));
            fmc.pmem.write(|w| w.bits(pmem));
            fmc.patt.write(|w| w.bits(pmem));
            fmc.pcr.modify(|r, w| w.bits(r.bits() | PCR_PBKEN));
            fmc.bcr1.modify(|r, w| w.bits(r.bits() | BCR1_WFDIS | BCR1_FMCEN));
        }
        cortex_m::asm::dsb();
        FmcNand { fmc, rb, last: Last::Idle }
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
            delay_ns(GAP_NS);
        }
    }

    /// After a command or address cycle that may start an array operation: tWB.
    fn before_sampling_rb(&mut self) {
        if self.last == Last::CmdAddr {
            self.drain();
            delay_ns(T_WB_NS);
        }
        self.last = Last::Idle;
    }
}

impl OnfiBus for FmcNand {
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
                delay_ns(GAP_NS);
            }
            Last::DataOut => delay_ns(GAP_NS),
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
            delay_ns(GAP_NS);
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
        Ok(if self.rb.is_high() { ReadyLine::Ready } else { ReadyLine::Busy })
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
            if self.rb.is_high() {
                return Ok(Wait::Ready);
            }
            if super::now() - start > limit {
                return Ok(Wait::TimedOut);
            }
        }
    }
}
