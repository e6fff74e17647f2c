//! Measuring where the time goes: [`Meter`] accumulates timer ticks spent inside calls;
//! [`TimedNand`] meters every call of a [`NandFlash`] (the ONFI driver and what is below it),
//! [`TimedBus`] every cycle-level call of an [`OnfiBus`] (on QEMU that is the chip model, i.e.
//! the simulated NAND; on the board, the FMC transfers and the waits on R/B#) and [`TimedCodec`]
//! every encode and decode of a [`PageCodec`] (CRC-32C, later ECC). The driver's cost is the
//! NAND's time less the bus's, and the FTL's own cost is what remains of a host operation.
//!
//! A metered call costs a few timer reads; [`calibrate`] measures that cost, split into the part
//! that lands inside the metered interval and the part that lands outside (in the caller's time),
//! and the application removes both ([`Overhead::inside_ticks`], [`Overhead::outside_ticks`])
//! from the shares they would inflate.
//!
//! The wrappers' methods are not inlined, so that the bus's code (the chip model, the FMC
//! accesses) and the codec's stay in symbols of their own for `size-report.py`.

use ftl_core::policy::{CodecError, PageCodec, PageFormat};
use nand_hal::onfi::{OnfiBus, ReadyLine, Wait};
use nand_hal::{BlockId, ErrorType, Geometry, NandFlash, PageId, ProgramOp, ReadOp};

use crate::platform::now;

/// Ticks and calls accumulated inside metered calls.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct Meter {
    /// Timer ticks spent inside.
    pub ticks: u64,
    /// Calls metered.
    pub calls: u64,
}

impl Meter {
    /// Runs `f`, adding its duration and one call.
    #[inline(always)]
    pub fn time<R>(&mut self, f: impl FnOnce() -> R) -> R {
        let t0 = now();
        let r = f();
        self.ticks += now().wrapping_sub(t0);
        self.calls += 1;
        r
    }

    /// What accumulated since `earlier`.
    pub fn since(&self, earlier: &Meter) -> Meter {
        Meter { ticks: self.ticks - earlier.ticks, calls: self.calls - earlier.calls }
    }
}

/// The cost of metering one call, in thousandths of a tick.
#[derive(Copy, Clone, Debug, Default)]
pub struct Overhead {
    /// Counted inside the metered interval (so in the callee's share).
    pub inside_milli: u64,
    /// Counted outside it (so in the caller's share).
    pub outside_milli: u64,
}

impl Overhead {
    /// Ticks `calls` metered calls added to their caller's time.
    pub fn outside_ticks(&self, calls: u64) -> u64 {
        calls * self.outside_milli / 1000
    }

    /// Ticks `calls` metered calls added to their own time.
    pub fn inside_ticks(&self, calls: u64) -> u64 {
        calls * self.inside_milli / 1000
    }
}

/// Measures [`Overhead`] with metered calls of an empty function.
#[inline(never)]
pub fn calibrate() -> Overhead {
    const N: u64 = 1024;
    let mut m = Meter::default();
    let t0 = now();
    for i in 0..N {
        m.time(|| core::hint::black_box(i));
    }
    let total = now() - t0;
    let inside_milli = m.ticks * 1000 / N;
    let outside_milli = (total * 1000 / N).saturating_sub(inside_milli);
    Overhead { inside_milli, outside_milli }
}

/// An [`OnfiBus`] whose every call is metered.
#[derive(Debug)]
pub struct TimedBus<B> {
    inner: B,
    /// Time inside the bus.
    pub meter: Meter,
}

impl<B> TimedBus<B> {
    /// Meters `inner`.
    pub fn new(inner: B) -> Self {
        TimedBus { inner, meter: Meter::default() }
    }

    /// The bus.
    pub fn inner(&self) -> &B {
        &self.inner
    }
}

impl<B: OnfiBus> OnfiBus for TimedBus<B> {
    type Error = B::Error;

    #[inline(never)]
    fn command(&mut self, cmd: u8) -> Result<(), Self::Error> {
        let inner = &mut self.inner;
        self.meter.time(|| inner.command(cmd))
    }
    #[inline(never)]
    fn address(&mut self, cycles: &[u8]) -> Result<(), Self::Error> {
        let inner = &mut self.inner;
        self.meter.time(|| inner.address(cycles))
    }
    #[inline(never)]
    fn write_data(&mut self, data: &[u8]) -> Result<(), Self::Error> {
        let inner = &mut self.inner;
        self.meter.time(|| inner.write_data(data))
    }
    #[inline(never)]
    fn read_data(&mut self, buf: &mut [u8]) -> Result<(), Self::Error> {
        let inner = &mut self.inner;
        self.meter.time(|| inner.read_data(buf))
    }
    #[inline(never)]
    fn ready_line(&mut self) -> Result<ReadyLine, Self::Error> {
        let inner = &mut self.inner;
        self.meter.time(|| inner.ready_line())
    }
    #[inline(never)]
    fn delay_us(&mut self, us: u32) {
        let inner = &mut self.inner;
        self.meter.time(|| inner.delay_us(us))
    }
    #[inline(never)]
    fn wait_ready(&mut self, timeout_us: u32) -> Result<Wait, Self::Error> {
        let inner = &mut self.inner;
        self.meter.time(|| inner.wait_ready(timeout_us))
    }
}

/// A [`NandFlash`] whose every operation is metered.
#[derive(Debug)]
pub struct TimedNand<N> {
    inner: N,
    /// Time inside the device.
    pub meter: Meter,
}

impl<N> TimedNand<N> {
    /// Meters `inner`.
    pub fn new(inner: N) -> Self {
        TimedNand { inner, meter: Meter::default() }
    }

    /// The device.
    pub fn inner(&self) -> &N {
        &self.inner
    }

    /// The device back.
    pub fn into_inner(self) -> N {
        self.inner
    }
}

impl<N: NandFlash> ErrorType for TimedNand<N> {
    type Error = N::Error;
}

impl<N: NandFlash> NandFlash for TimedNand<N> {
    fn geometry(&self) -> Geometry {
        self.inner.geometry()
    }
    #[inline(never)]
    fn read_page(&mut self, page: PageId, data: &mut [u8], spare: &mut [u8]) -> Result<(), Self::Error> {
        let inner = &mut self.inner;
        self.meter.time(|| inner.read_page(page, data, spare))
    }
    #[inline(never)]
    fn program_page(&mut self, page: PageId, data: &[u8], spare: &[u8]) -> Result<(), Self::Error> {
        let inner = &mut self.inner;
        self.meter.time(|| inner.program_page(page, data, spare))
    }
    #[inline(never)]
    fn erase_block(&mut self, block: BlockId) -> Result<(), Self::Error> {
        let inner = &mut self.inner;
        self.meter.time(|| inner.erase_block(block))
    }
    #[inline(never)]
    fn is_bad(&mut self, block: BlockId) -> Result<bool, Self::Error> {
        let inner = &mut self.inner;
        self.meter.time(|| inner.is_bad(block))
    }
    #[inline(never)]
    fn mark_bad(&mut self, block: BlockId) -> Result<(), Self::Error> {
        let inner = &mut self.inner;
        self.meter.time(|| inner.mark_bad(block))
    }
    #[inline(never)]
    fn read_spare(&mut self, page: PageId, spare: &mut [u8]) -> Result<(), Self::Error> {
        let inner = &mut self.inner;
        self.meter.time(|| inner.read_spare(page, spare))
    }
    #[inline(never)]
    fn read_multi(&mut self, ops: &mut [ReadOp<'_>]) -> Result<(), (usize, Self::Error)> {
        let inner = &mut self.inner;
        self.meter.time(|| inner.read_multi(ops))
    }
    #[inline(never)]
    fn program_multi(&mut self, ops: &[ProgramOp<'_>]) -> Result<(), (usize, Self::Error)> {
        let inner = &mut self.inner;
        self.meter.time(|| inner.program_multi(ops))
    }
    #[inline(never)]
    fn erase_multi(&mut self, blocks: &[BlockId]) -> Result<(), (usize, Self::Error)> {
        let inner = &mut self.inner;
        self.meter.time(|| inner.erase_multi(blocks))
    }
}

/// A [`PageCodec`] whose encodes and decodes are metered.
#[derive(Clone, Debug, Default)]
pub struct TimedCodec<C> {
    inner: C,
    /// Time inside the codec.
    pub meter: Meter,
}

impl<C> TimedCodec<C> {
    /// Meters `inner`.
    pub fn new(inner: C) -> Self {
        TimedCodec { inner, meter: Meter::default() }
    }
}

impl<C: PageCodec> PageCodec for TimedCodec<C> {
    fn spare_len(&self) -> usize {
        self.inner.spare_len()
    }
    #[inline(never)]
    fn encode(&mut self, data: &[u8], out: &mut [u8]) {
        let inner = &mut self.inner;
        self.meter.time(|| inner.encode(data, out))
    }
    #[inline(never)]
    fn decode(&mut self, data: &mut [u8], stored: &[u8]) -> Result<u32, CodecError> {
        let inner = &mut self.inner;
        self.meter.time(|| inner.decode(data, stored))
    }
    #[inline(never)]
    fn encode_as(&mut self, data: &[u8], out: &mut [u8], format: PageFormat) {
        let inner = &mut self.inner;
        self.meter.time(|| inner.encode_as(data, out, format))
    }
    fn format_of(&self, stored: &[u8]) -> Option<PageFormat> {
        self.inner.format_of(stored)
    }
}
