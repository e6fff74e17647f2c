//! [`OnfiBus`]: the asynchronous ONFI interface of one target (chip enable), 8 bits wide, as the
//! driver sees it. A board implements it over its memory controller (for the STM32 FMC: writes
//! to the command and address latch addresses, reads and writes of the data address, R/B# on a
//! pin); the chip model implements it in RAM.
//!
//! The trait carries only cycles and waiting; the command sequences are the driver's. Timing
//! inside a cycle (tWC, tRC, tWHR, tADL, tCCS, tWB) is the implementation's: in particular it must
//! not sample R/B# before tWB has passed after the command that starts an array operation.
//!
//! Waiting has two forms, and the driver picks one at each wait:
//! - [`OnfiBus::wait_ready`] with a timeout. The default polls [`OnfiBus::ready_line`] every
//!   [`POLL_STEP_US`] microseconds with [`OnfiBus::delay_us`]; an implementation with an
//!   interrupt or a hardware wait on R/B# overrides it.
//! - When the bus has no R/B# line ([`ReadyLine::Absent`], so `wait_ready` answers
//!   [`Wait::NoReadyLine`]), the driver polls READ STATUS (70h) itself, and after a page or
//!   parameter-page read re-issues 00h to return the target to data output, as ONFI requires.
//!
//! The driver makes each wait robust against an R/B# that has not gone low yet (tWB after the
//! command, or longer where writes to the bus are posted): it first waits a short window for
//! R/B# to go busy, then for ready with the timeout, then confirms with READ STATUS.
//!
//! Timing: [`OnfiBus::timing_modes`] says which ONFI timing modes the bus can run; the driver
//! picks the fastest the part supports too, sets it on the part and hands the bus its
//! [`BusTiming`] ([`OnfiBus::set_timing`]).
//!
//! Everything is blocking; errors are the implementation's own type, mapped to an
//! [`crate::ErrorKind`] like every device error.

use super::timing::BusTiming;

/// The state of the R/B# (ready/busy) line.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum ReadyLine {
    /// R/B# is high: the target is ready.
    Ready,
    /// R/B# is low: the target is busy.
    Busy,
    /// The bus has no R/B# line; readiness comes from READ STATUS.
    Absent,
}

/// How a wait ended.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Wait {
    /// The target became ready.
    Ready,
    /// The timeout passed with the target still busy.
    TimedOut,
    /// The bus cannot tell; the caller polls READ STATUS.
    NoReadyLine,
}

/// Step of the default [`OnfiBus::wait_ready`], in microseconds.
pub const POLL_STEP_US: u32 = 1;

/// One ONFI target on an 8-bit asynchronous bus.
pub trait OnfiBus {
    /// The bus's error type.
    type Error: crate::Error;

    /// One command cycle (CLE high).
    fn command(&mut self, cmd: u8) -> Result<(), Self::Error>;

    /// One address cycle (ALE high) per byte of `cycles`, in order.
    fn address(&mut self, cycles: &[u8]) -> Result<(), Self::Error>;

    /// Data input cycles: `data` from the host to the target.
    fn write_data(&mut self, data: &[u8]) -> Result<(), Self::Error>;

    /// Data output cycles: fills `buf` from the target.
    fn read_data(&mut self, buf: &mut [u8]) -> Result<(), Self::Error>;

    /// The R/B# line now.
    fn ready_line(&mut self) -> Result<ReadyLine, Self::Error>;

    /// Waits at least `us` microseconds.
    fn delay_us(&mut self, us: u32);

    /// The asynchronous timing modes the bus (controller, board, wiring) can run, one bit each
    /// (bit m = mode m). The driver runs the part in the fastest mode both support. Default:
    /// mode 0 only.
    fn timing_modes(&self) -> u16 {
        1
    }

    /// Applies the interface timings of the mode the driver selected (after identification, and
    /// after the part accepted the mode). Default: nothing (a bus fixed at mode 0).
    fn set_timing(&mut self, timing: &BusTiming) -> Result<(), Self::Error> {
        let _ = timing;
        Ok(())
    }

    /// Waits until R/B# is high, at most about `timeout_us` microseconds. Returns
    /// [`Wait::NoReadyLine`] at once when there is no R/B# line.
    fn wait_ready(&mut self, timeout_us: u32) -> Result<Wait, Self::Error> {
        let mut waited = 0u32;
        loop {
            match self.ready_line()? {
                ReadyLine::Ready => return Ok(Wait::Ready),
                ReadyLine::Absent => return Ok(Wait::NoReadyLine),
                ReadyLine::Busy => {}
            }
            if waited >= timeout_us {
                return Ok(Wait::TimedOut);
            }
            self.delay_us(POLL_STEP_US);
            waited = waited.saturating_add(POLL_STEP_US);
        }
    }
}

impl<B: OnfiBus + ?Sized> OnfiBus for &mut B {
    type Error = B::Error;

    fn command(&mut self, cmd: u8) -> Result<(), Self::Error> {
        B::command(self, cmd)
    }
    fn address(&mut self, cycles: &[u8]) -> Result<(), Self::Error> {
        B::address(self, cycles)
    }
    fn write_data(&mut self, data: &[u8]) -> Result<(), Self::Error> {
        B::write_data(self, data)
    }
    fn read_data(&mut self, buf: &mut [u8]) -> Result<(), Self::Error> {
        B::read_data(self, buf)
    }
    fn ready_line(&mut self) -> Result<ReadyLine, Self::Error> {
        B::ready_line(self)
    }
    fn delay_us(&mut self, us: u32) {
        B::delay_us(self, us)
    }
    fn timing_modes(&self) -> u16 {
        B::timing_modes(self)
    }
    fn set_timing(&mut self, timing: &BusTiming) -> Result<(), Self::Error> {
        B::set_timing(self, timing)
    }
    fn wait_ready(&mut self, timeout_us: u32) -> Result<Wait, Self::Error> {
        B::wait_ready(self, timeout_us)
    }
}
