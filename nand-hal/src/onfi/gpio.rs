//! [`GpioBus`]: an [`OnfiBus`] over plain GPIO pins, for microcontrollers without a NAND memory
//! controller (no FMC / EMC / SMC), written against embedded-hal 1.0.
//!
//! It owns six [`OutputPin`]s (CLE, ALE, WE#, RE#, CE#, WP#), an [`InputPin`] for R/B#, a
//! [`DelayNs`] and an 8-bit bidirectional [`DataPort`] (embedded-hal 1.0 has no parallel or
//! direction-switching pin trait, so the port is this module's own, small trait: a board
//! implements it over its GPIO port register, e.g. the low byte of one port's output and input
//! data registers).
//!
//! What it guarantees: every cycle respects the asynchronous (SDR) interface timings the driver
//! hands over ([`OnfiBus::set_timing`], [`BusTiming`]) as minimums, by waiting with
//! [`DelayNs::delay_ns`] and never by counting on the speed of the pins:
//! - a write cycle (command, address, data input) sets CLE / ALE and the data, holds WE# low
//!   `max(tWP, tCLS, tDS)` and then high `max(tWH, tWC - low, tCLH, tDH)` before anything
//!   changes;
//! - a read cycle (data output) holds RE# low `max(tRP, tREA)`, samples the port at the end of
//!   that pulse, then holds RE# high `max(tREH, tRC - low)`;
//! - between cycles of different kinds: tWHR from a command or address to the first data output
//!   (READ STATUS, READ ID; `max(tWHR, tCCS)` after E0h), tADL from an address to the first data
//!   input (after 80h, EFh; `max(tADL, tCCS)` after 85h), tRHW from data output to the next
//!   write cycle;
//! - R/B# is never sampled sooner than tWB after the last write cycle (before tWB it still reads
//!   ready for an operation that has just started);
//! - the data port is an input whenever RE# may be low (no bus contention), and an output only
//!   for write cycles.
//!
//! CE# is held low (the target selected) from [`GpioBus::new`] until [`GpioBus::release`]; WP#
//! is driven high (writes allowed) unless [`GpioBus::set_write_protect`] says otherwise.
//! Waiting for ready is the trait's default: R/B# polled every [`super::bus::POLL_STEP_US`] with
//! the delay, bounded by the driver's timeout, so a target that never becomes ready gives
//! [`super::OnfiError::Timeout`], never a hang.
//!
//! Errors: a pin error becomes [`GpioError::Pin`] (which pin, and embedded-hal's
//! [`digital::ErrorKind`]), a port error [`GpioError::Port`]; both are [`ErrorKind::Other`] to the
//! FTL. With infallible pins and port, the bus cannot fail.
//!
//! The delay must wait at least what it is asked (embedded-hal's contract for [`DelayNs`]); a
//! coarse one only makes the bus slower.
//!
//! RAM: the pins, the port, the delay, one [`BusTiming`] and a few bytes of state; no buffers.
//!
//! ```
//! use core::convert::Infallible;
//! use nand_hal::onfi::gpio::{DataPort, GpioBus, GpioPins};
//! # use embedded_hal::digital::{ErrorType, InputPin, OutputPin};
//! # struct Pin;
//! # impl ErrorType for Pin { type Error = Infallible; }
//! # impl OutputPin for Pin {
//! #     fn set_low(&mut self) -> Result<(), Infallible> { Ok(()) }
//! #     fn set_high(&mut self) -> Result<(), Infallible> { Ok(()) }
//! # }
//! # impl InputPin for Pin {
//! #     fn is_high(&mut self) -> Result<bool, Infallible> { Ok(true) }
//! #     fn is_low(&mut self) -> Result<bool, Infallible> { Ok(false) }
//! # }
//! # struct Delay;
//! # impl embedded_hal::delay::DelayNs for Delay { fn delay_ns(&mut self, _: u32) {} }
//!
//! /// D0..D7 on bits 0..7 of one GPIO port (here: a stand-in for its registers).
//! struct PortA { moder_out: bool, odr: u8, idr: u8 }
//!
//! impl DataPort for PortA {
//!     type Error = Infallible;
//!     fn set_output(&mut self) -> Result<(), Infallible> { self.moder_out = true; Ok(()) }
//!     fn set_input(&mut self) -> Result<(), Infallible> { self.moder_out = false; Ok(()) }
//!     fn write(&mut self, byte: u8) -> Result<(), Infallible> { self.odr = byte; Ok(()) }
//!     fn read(&mut self) -> Result<u8, Infallible> { Ok(self.idr) }
//! }
//!
//! let pins = GpioPins { cle: Pin, ale: Pin, we: Pin, re: Pin, ce: Pin, wp: Pin, rb: Pin };
//! let port = PortA { moder_out: false, odr: 0, idr: 0xFF };
//! let bus = GpioBus::new(pins, port, Delay)?;
//! // let nand = nand_hal::onfi::OnfiNand::new(bus)?; // identifies the part, sets its timing mode
//! # let _ = bus;
//! # Ok::<(), nand_hal::onfi::gpio::GpioError<Infallible>>(())
//! ```

use embedded_hal::delay::DelayNs;
use embedded_hal::digital::{self, InputPin, OutputPin};

use super::bus::{OnfiBus, ReadyLine};
use super::cmd;
use super::timing::BusTiming;
use crate::ErrorKind;

/// An 8-bit bidirectional data port (the NAND's I/O0..7).
///
/// `write` sets the levels the port drives while it is an output; `read` samples the pins while
/// it is an input. The bus switches direction only between cycles, never while RE# is low.
pub trait DataPort {
    /// The port's error type.
    type Error: core::fmt::Debug;

    /// Makes the port drive its pins (host to NAND).
    fn set_output(&mut self) -> Result<(), Self::Error>;

    /// Releases the pins (NAND to host).
    fn set_input(&mut self) -> Result<(), Self::Error>;

    /// Sets the levels the port drives.
    fn write(&mut self, byte: u8) -> Result<(), Self::Error>;

    /// Samples the pins.
    fn read(&mut self) -> Result<u8, Self::Error>;
}

impl<P: DataPort + ?Sized> DataPort for &mut P {
    type Error = P::Error;

    fn set_output(&mut self) -> Result<(), Self::Error> {
        P::set_output(self)
    }
    fn set_input(&mut self) -> Result<(), Self::Error> {
        P::set_input(self)
    }
    fn write(&mut self, byte: u8) -> Result<(), Self::Error> {
        P::write(self, byte)
    }
    fn read(&mut self) -> Result<u8, Self::Error> {
        P::read(self)
    }
}

/// The control pins of one NAND target. Pin errors are told apart by [`PinName`].
#[derive(Debug)]
pub struct GpioPins<CLE, ALE, WE, RE, CE, WP, RB> {
    /// Command latch enable (active high).
    pub cle: CLE,
    /// Address latch enable (active high).
    pub ale: ALE,
    /// Write enable (WE#, active low): data, commands and addresses latch on its rising edge.
    pub we: WE,
    /// Read enable (RE#, active low): the target drives the data while it is low.
    pub re: RE,
    /// Chip enable (CE#, active low).
    pub ce: CE,
    /// Write protect (WP#, active low).
    pub wp: WP,
    /// Ready / busy (R/B#, low while busy; open drain, needs its pull-up).
    pub rb: RB,
}

/// Which pin failed.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum PinName {
    /// CLE.
    Cle,
    /// ALE.
    Ale,
    /// WE#.
    We,
    /// RE#.
    Re,
    /// CE#.
    Ce,
    /// WP#.
    Wp,
    /// R/B#.
    Rb,
}

/// An error of [`GpioBus`] whose data port has error type `E`.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum GpioError<E> {
    /// A pin refused a level or a read.
    Pin {
        /// The pin.
        pin: PinName,
        /// What its HAL said.
        kind: digital::ErrorKind,
    },
    /// The data port failed.
    Port(E),
}

impl<E: core::fmt::Debug> crate::Error for GpioError<E> {
    fn kind(&self) -> ErrorKind {
        ErrorKind::Other
    }
}

impl<E: core::fmt::Debug> core::fmt::Display for GpioError<E> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            GpioError::Pin { pin, kind } => write!(f, "NAND pin {pin:?}: {kind}"),
            GpioError::Port(e) => write!(f, "NAND data port: {e:?}"),
        }
    }
}

impl<E: core::fmt::Debug> core::error::Error for GpioError<E> {}

/// By hand: embedded-hal's `digital::ErrorKind` has no `defmt::Format` without its defmt 0.3
/// feature (and only `Other` to tell).
#[cfg(feature = "defmt")]
impl<E: defmt::Format> defmt::Format for GpioError<E> {
    fn format(&self, f: defmt::Formatter<'_>) {
        match self {
            GpioError::Pin { pin, .. } => defmt::write!(f, "NAND pin {} failed", pin),
            GpioError::Port(e) => defmt::write!(f, "NAND data port: {}", e),
        }
    }
}

/// What the last cycle was, for the gaps between cycles of different kinds.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Last {
    /// Nothing since the last R/B# sample or delay-free start.
    Idle,
    /// A command or address cycle.
    CmdAddr,
    /// A data input cycle.
    DataIn,
    /// A data output cycle.
    DataOut,
}

/// Whether a write cycle is a command, an address or data.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Latch {
    Command,
    Address,
    Data,
}

/// An ONFI target on GPIO pins (see the module documentation).
#[derive(Debug)]
pub struct GpioBus<CLE, ALE, WE, RE, CE, WP, RB, D, T> {
    pins: GpioPins<CLE, ALE, WE, RE, CE, WP, RB>,
    data: D,
    delay: T,
    timing: BusTiming,
    modes: u16,
    last: Last,
    /// The last command byte (tCCS after E0h and 85h).
    last_cmd: u8,
    /// Whether the port is an output.
    driving: bool,
    /// A write cycle since the last R/B# sample: wait tWB before the next one.
    wb_pending: bool,
}

/// Maps a pin result to [`GpioError::Pin`].
fn pin<T, E: digital::Error, P>(r: Result<T, E>, name: PinName) -> Result<T, GpioError<P>> {
    r.map_err(|e| GpioError::Pin { pin: name, kind: e.kind() })
}

impl<CLE, ALE, WE, RE, CE, WP, RB, D, T> GpioBus<CLE, ALE, WE, RE, CE, WP, RB, D, T>
where
    CLE: OutputPin,
    ALE: OutputPin,
    WE: OutputPin,
    RE: OutputPin,
    CE: OutputPin,
    WP: OutputPin,
    RB: InputPin,
    D: DataPort,
    T: DelayNs,
{
    /// Takes the pins to their idle levels (CLE, ALE low; WE#, RE# high; WP# high; the port an
    /// input), then selects the target (CE# low). Timing mode 0 until the driver sets another;
    /// all six asynchronous modes offered ([`Self::with_timing_modes`] restricts them).
    pub fn new(
        mut pins: GpioPins<CLE, ALE, WE, RE, CE, WP, RB>,
        mut data: D,
        delay: T,
    ) -> Result<Self, GpioError<D::Error>> {
        data.set_input().map_err(GpioError::Port)?;
        pin(pins.cle.set_low(), PinName::Cle)?;
        pin(pins.ale.set_low(), PinName::Ale)?;
        pin(pins.we.set_high(), PinName::We)?;
        pin(pins.re.set_high(), PinName::Re)?;
        pin(pins.wp.set_high(), PinName::Wp)?;
        pin(pins.ce.set_low(), PinName::Ce)?;
        Ok(GpioBus {
            pins,
            data,
            delay,
            timing: BusTiming::MODE_0,
            modes: 0x3F,
            last: Last::Idle,
            last_cmd: 0,
            driving: false,
            wb_pending: false,
        })
    }

    /// Offers only the asynchronous timing modes in `mask` (bit m = mode m; mode 0 is always
    /// kept) to the driver, e.g. when the wiring or the level shifters are slow.
    pub fn with_timing_modes(mut self, mask: u16) -> Self {
        self.modes = (mask & 0x3F) | 1;
        self
    }

    /// The interface timings in force.
    pub fn timing(&self) -> &BusTiming {
        &self.timing
    }

    /// Drives WP# low (`true`: programs and erases are ignored by the target) or high.
    pub fn set_write_protect(&mut self, protect: bool) -> Result<(), GpioError<D::Error>> {
        pin(if protect { self.pins.wp.set_low() } else { self.pins.wp.set_high() }, PinName::Wp)
    }

    /// Deselects the target (CE# high, the port an input) and gives the parts back.
    #[allow(clippy::type_complexity)]
    pub fn release(mut self) -> Result<(GpioPins<CLE, ALE, WE, RE, CE, WP, RB>, D, T), GpioError<D::Error>> {
        self.data.set_input().map_err(GpioError::Port)?;
        pin(self.pins.ce.set_high(), PinName::Ce)?;
        Ok((self.pins, self.data, self.delay))
    }

    fn wait_ns(&mut self, ns: u16) {
        if ns > 0 {
            self.delay.delay_ns(ns as u32);
        }
    }

    /// One write cycle of `byte` with CLE or ALE as `latch` says. On an error, CLE, ALE and WE#
    /// are taken back to idle as far as the pins allow, so the next sequence starts clean.
    fn write_cycle(&mut self, latch: Latch, byte: u8) -> Result<(), GpioError<D::Error>> {
        let r = self.try_write_cycle(latch, byte);
        if r.is_err() {
            let _ = self.pins.we.set_high();
            let _ = self.pins.cle.set_low();
            let _ = self.pins.ale.set_low();
        }
        r
    }

    fn try_write_cycle(&mut self, latch: Latch, byte: u8) -> Result<(), GpioError<D::Error>> {
        let t = self.timing;
        match latch {
            Latch::Command => pin(self.pins.cle.set_high(), PinName::Cle)?,
            Latch::Address => pin(self.pins.ale.set_high(), PinName::Ale)?,
            Latch::Data => {}
        }
        if !self.driving {
            self.data.set_output().map_err(GpioError::Port)?;
            self.driving = true;
        }
        self.data.write(byte).map_err(GpioError::Port)?;
        let low = t.t_wp.max(t.t_cls).max(t.t_ds);
        pin(self.pins.we.set_low(), PinName::We)?;
        self.wait_ns(low);
        pin(self.pins.we.set_high(), PinName::We)?;
        self.wait_ns(t.t_wh.max(t.t_wc.saturating_sub(low)).max(t.t_clh).max(t.t_dh));
        match latch {
            Latch::Command => pin(self.pins.cle.set_low(), PinName::Cle)?,
            Latch::Address => pin(self.pins.ale.set_low(), PinName::Ale)?,
            Latch::Data => {}
        }
        self.wb_pending = true;
        Ok(())
    }

    /// Before a command or address cycle.
    fn before_cmd_addr(&mut self) {
        if self.last == Last::DataOut {
            self.wait_ns(self.timing.t_rhw);
        }
    }
}

impl<CLE, ALE, WE, RE, CE, WP, RB, D, T> OnfiBus for GpioBus<CLE, ALE, WE, RE, CE, WP, RB, D, T>
where
    CLE: OutputPin,
    ALE: OutputPin,
    WE: OutputPin,
    RE: OutputPin,
    CE: OutputPin,
    WP: OutputPin,
    RB: InputPin,
    D: DataPort,
    T: DelayNs,
{
    type Error = GpioError<D::Error>;

    fn command(&mut self, c: u8) -> Result<(), Self::Error> {
        self.before_cmd_addr();
        self.write_cycle(Latch::Command, c)?;
        self.last = Last::CmdAddr;
        self.last_cmd = c;
        Ok(())
    }

    fn address(&mut self, cycles: &[u8]) -> Result<(), Self::Error> {
        self.before_cmd_addr();
        for &a in cycles {
            self.write_cycle(Latch::Address, a)?;
            self.last = Last::CmdAddr;
        }
        Ok(())
    }

    fn write_data(&mut self, data: &[u8]) -> Result<(), Self::Error> {
        if data.is_empty() {
            return Ok(());
        }
        let t = self.timing;
        match self.last {
            // tADL after the address; tCCS after CHANGE WRITE COLUMN's address.
            Last::CmdAddr if self.last_cmd == cmd::CHANGE_WRITE_COLUMN => self.wait_ns(t.t_adl.max(t.t_ccs)),
            Last::CmdAddr => self.wait_ns(t.t_adl),
            Last::DataOut => self.wait_ns(t.t_rhw),
            Last::Idle | Last::DataIn => {}
        }
        for &b in data {
            self.write_cycle(Latch::Data, b)?;
            self.last = Last::DataIn;
        }
        Ok(())
    }

    fn read_data(&mut self, buf: &mut [u8]) -> Result<(), Self::Error> {
        if buf.is_empty() {
            return Ok(());
        }
        let t = self.timing;
        if matches!(self.last, Last::CmdAddr | Last::DataIn) {
            // tWHR after a command or address (also covers tCLR, tAR); tCCS after E0h.
            if self.last_cmd == cmd::CHANGE_READ_COLUMN_CONFIRM {
                self.wait_ns(t.t_whr.max(t.t_ccs));
            } else {
                self.wait_ns(t.t_whr);
            }
        }
        if self.driving {
            self.data.set_input().map_err(GpioError::Port)?;
            self.driving = false;
        }
        let low = t.t_rp.max(t.t_rea);
        let high = t.t_reh.max(t.t_rc.saturating_sub(low));
        for b in buf.iter_mut() {
            pin(self.pins.re.set_low(), PinName::Re)?;
            self.wait_ns(low);
            let sampled = self.data.read();
            let released = pin(self.pins.re.set_high(), PinName::Re);
            *b = sampled.map_err(GpioError::Port)?;
            released?;
            self.wait_ns(high);
        }
        self.last = Last::DataOut;
        Ok(())
    }

    fn ready_line(&mut self) -> Result<ReadyLine, Self::Error> {
        if self.wb_pending {
            self.wait_ns(self.timing.t_wb);
            self.wb_pending = false;
        }
        Ok(if pin(self.pins.rb.is_high(), PinName::Rb)? { ReadyLine::Ready } else { ReadyLine::Busy })
    }

    fn delay_us(&mut self, us: u32) {
        self.delay.delay_us(us);
        // tWB is at most 200 ns: any whole microsecond covers it.
        if us > 0 {
            self.wb_pending = false;
        }
    }

    fn timing_modes(&self) -> u16 {
        self.modes
    }

    fn set_timing(&mut self, timing: &BusTiming) -> Result<(), Self::Error> {
        self.timing = *timing;
        Ok(())
    }
}
