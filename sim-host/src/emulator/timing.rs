//! The timing model ([`TimingParams`], the simulated clock) and the operation counters
//! ([`EmuCounters`]).
//!
//! # Timing model
//!
//! Time is a simulated clock in nanoseconds; nothing here sleeps. The caller moves "now" with
//! [`super::Emulator::set_now_ns`]; an operation never starts before now. Each device-wide plane
//! has a busy-until time, and so has each channel's data bus, shared by the planes of the LUNs on
//! that channel (LUN `l` sits on channel `l % channels`; by default every LUN has a channel of
//! its own, [`super::EmulatorConfig::channels`]). Operations are placed greedily in issue order
//! (no gap filling), with these phases:
//!
//! - **read**: the array read (tR) starts when the plane is free; the data transfer out
//!   (`bytes * t_xfer`) follows on the channel's bus as soon as both tR has ended and the bus is
//!   free.
//!   The plane stays busy until its page register has been transferred out.
//! - **program**: the transfer in starts when the plane and the bus are free; the array program
//!   (tPROG) follows on the plane. The bus is released at the end of the transfer.
//! - **erase**: tBERS on the plane, starting when the plane is free; no bus time (command cycles
//!   are not modelled).
//! - **multi-plane**: the planes' array phases run in parallel: a multi-plane read starts one tR
//!   when all its planes are free, then transfers each page out in turn; a multi-plane program
//!   transfers each page in turn, then runs one tPROG on all planes; a multi-plane erase runs
//!   one tBERS on all planes.
//!
//! Planes of different LUNs, and single-plane operations on different planes of one LUN, overlap
//! freely except for the shared bus of their channel. Operations refused by the rules (range, NOP, order, ...) or
//! cut by a power loss take no time; operations that report status FAIL take their full time.
//! `total_array_busy_ns` sums array time (tR, tPROG, tBERS) over planes.
//!
//! Counters are plain `u64`s updated on every operation; they cost a few additions.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Operation latencies of a device.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct TimingParams {
    /// Array read time (tR), nanoseconds.
    pub t_r_ns: u64,
    /// Array program time (tPROG), nanoseconds.
    pub t_prog_ns: u64,
    /// Block erase time (tBERS), nanoseconds.
    pub t_bers_ns: u64,
    /// Bus transfer time per byte, picoseconds.
    pub t_xfer_ps_per_byte: u64,
}

impl TimingParams {
    /// Micron MT29F4G08ABADA datasheet: tR 25 us (max), tPROG 200 us (typical), tBERS 700 us
    /// (typical), ONFI asynchronous timing mode 5 (tRC/tWC 20 ns): 20 ns per byte.
    pub const MT29F4G08: TimingParams =
        TimingParams { t_r_ns: 25_000, t_prog_ns: 200_000, t_bers_ns: 700_000, t_xfer_ps_per_byte: 20_000 };

    /// The flash parameters of the CAFTL paper's SSD simulation (Chen, Luo, Zhang: "CAFTL: A
    /// Content-Aware Flash Translation Layer Enhancing the Lifespan of Flash Memory based Solid
    /// State Drives", FAST 2011), used to compare with its results: tR 25 us, tPROG 200 us,
    /// tBERS 1.5 ms, 20 ns per byte of bus transfer.
    pub const CAFTL_PAPER: TimingParams =
        TimingParams { t_r_ns: 25_000, t_prog_ns: 200_000, t_bers_ns: 1_500_000, t_xfer_ps_per_byte: 20_000 };

    /// Every operation takes no time.
    pub const ZERO: TimingParams =
        TimingParams { t_r_ns: 0, t_prog_ns: 0, t_bers_ns: 0, t_xfer_ps_per_byte: 0 };

    /// Bus time for `bytes` bytes, nanoseconds (rounded up).
    pub const fn xfer_ns(&self, bytes: u64) -> u64 {
        (bytes.saturating_mul(self.t_xfer_ps_per_byte)).div_ceil(1000)
    }
}

impl Default for TimingParams {
    /// [`TimingParams::MT29F4G08`].
    fn default() -> Self {
        TimingParams::MT29F4G08
    }
}

/// What the emulator has done since construction or [`super::Emulator::reset_counters`].
///
/// `reads`, `programs` and `erases` count operations that reached the array, including those
/// that reported status FAIL; operations refused by the rules are counted in `rejected` only,
/// and operations refused for lack of power are not counted (apart from the cut in
/// `power_cuts`).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct EmuCounters {
    /// Page reads, spare-only reads included; [`nand_hal::NandFlash::is_bad`] counts two.
    pub reads: u64,
    /// Reads that asked for no data bytes (spare-only), a subset of `reads`.
    pub spare_reads: u64,
    /// Page programs; [`nand_hal::NandFlash::mark_bad`] counts two.
    pub programs: u64,
    /// Block erases.
    pub erases: u64,
    /// Bytes sent to the device (program data and spare).
    pub bytes_in: u64,
    /// Bytes returned by the device (read data and spare).
    pub bytes_out: u64,
    /// Multi-plane calls of two or more operations of which at least one reached the array.
    pub multi_plane_ops: u64,
    /// Bits flipped by the raw bit-error model in returned read data.
    pub bit_flips: u64,
    /// Programs that reported status FAIL (not counting [`super::EmuError::SetBits`]).
    pub program_failures: u64,
    /// Erases that reported status FAIL.
    pub erase_failures: u64,
    /// Power cuts (scheduled or immediate).
    pub power_cuts: u64,
    /// Operations refused by a rule (NOP, program order, set bits) without reaching the array.
    pub rejected: u64,
}

/// Simulated clock and per-resource busy times.
#[derive(Clone, Debug)]
pub(crate) struct TimingState {
    pub(crate) params: TimingParams,
    now: u64,
    plane_busy: Vec<u64>,
    bus_busy: Vec<u64>,
    last_completion: u64,
    /// Latest completion of the operations issued since the window was opened.
    window_end: u64,
    total_array_busy: u64,
    /// Work outside the NAND that delays the operations issued after it (the hash processor of
    /// a deduplicating write, `sim::dedup::TimedIndex`): ns added to "now".
    delay: Option<Arc<AtomicU64>>,
}

impl TimingState {
    /// `channels` buses (at least one) shared by `luns` LUNs.
    pub(crate) fn new(params: TimingParams, planes: usize, channels: usize) -> Self {
        TimingState {
            params,
            now: 0,
            plane_busy: vec![0; planes],
            bus_busy: vec![0; channels.max(1)],
            last_completion: 0,
            window_end: 0,
            total_array_busy: 0,
            delay: None,
        }
    }

    pub(crate) fn now(&self) -> u64 {
        self.now
    }

    pub(crate) fn set_now(&mut self, t: u64) {
        self.now = t;
    }

    pub(crate) fn last_completion(&self) -> u64 {
        self.last_completion
    }

    pub(crate) fn open_window(&mut self) {
        self.window_end = self.now;
    }

    pub(crate) fn window_end(&self) -> u64 {
        self.window_end
    }

    fn complete(&mut self, t: u64) {
        self.last_completion = t;
        self.window_end = self.window_end.max(t);
    }

    pub(crate) fn plane_busy_until(&self, plane_index: usize) -> Option<u64> {
        self.plane_busy.get(plane_index).copied()
    }

    /// The bus of `lun`'s channel.
    pub(crate) fn bus_busy_until(&self, lun: usize) -> Option<u64> {
        self.bus_busy.get(lun % self.bus_busy.len()).copied()
    }

    fn channel(&self, lun: usize) -> usize {
        lun % self.bus_busy.len()
    }

    pub(crate) fn idle_at(&self) -> u64 {
        let planes = self.plane_busy.iter().copied().max().unwrap_or(0);
        let buses = self.bus_busy.iter().copied().max().unwrap_or(0);
        planes.max(buses)
    }

    pub(crate) fn total_array_busy(&self) -> u64 {
        self.total_array_busy
    }

    fn planes_free(&self, planes: &[(usize, u64)]) -> u64 {
        let now = self.now.saturating_add(self.delay.as_ref().map_or(0, |d| d.load(Ordering::Relaxed)));
        planes.iter().map(|&(p, _)| self.plane_busy[p]).fold(now, u64::max)
    }

    /// Reads of `ops` = (device-wide plane, bytes out) on LUN `lun`, their tR in parallel.
    pub(crate) fn read(&mut self, lun: usize, ops: &[(usize, u64)]) {
        let ch = self.channel(lun);
        let start = self.planes_free(ops);
        let array_end = start.saturating_add(self.params.t_r_ns);
        let mut t = array_end.max(self.bus_busy[ch]);
        for &(p, bytes) in ops {
            t = t.saturating_add(self.params.xfer_ns(bytes));
            self.plane_busy[p] = t;
        }
        self.bus_busy[ch] = t;
        self.complete(t);
        self.charge_array(self.params.t_r_ns, ops.len());
    }

    /// Programs of `ops` = (device-wide plane, bytes in) on LUN `lun`, their tPROG in parallel.
    pub(crate) fn program(&mut self, lun: usize, ops: &[(usize, u64)]) {
        let ch = self.channel(lun);
        let mut t = self.planes_free(ops).max(self.bus_busy[ch]);
        for &(_, bytes) in ops {
            t = t.saturating_add(self.params.xfer_ns(bytes));
        }
        self.bus_busy[ch] = t;
        let end = t.saturating_add(self.params.t_prog_ns);
        for &(p, _) in ops {
            self.plane_busy[p] = end;
        }
        self.complete(end);
        self.charge_array(self.params.t_prog_ns, ops.len());
    }

    /// Erases on the device-wide planes of `ops` (the byte counts are ignored), in parallel.
    pub(crate) fn erase(&mut self, ops: &[(usize, u64)]) {
        let end = self.planes_free(ops).saturating_add(self.params.t_bers_ns);
        for &(p, _) in ops {
            self.plane_busy[p] = end;
        }
        self.complete(end);
        self.charge_array(self.params.t_bers_ns, ops.len());
    }

    fn charge_array(&mut self, t: u64, planes: usize) {
        self.total_array_busy = self.total_array_busy.saturating_add(t.saturating_mul(planes as u64));
    }
}

impl super::Emulator {
    /// The simulated "now", nanoseconds.
    pub fn now_ns(&self) -> u64 {
        self.timing.now()
    }

    /// Moves the simulated "now" (forwards or backwards); later operations start no earlier.
    pub fn set_now_ns(&mut self, t: u64) {
        self.timing.set_now(t);
    }

    /// Operations start no earlier than "now" plus the value of `delay` at their issue (work of
    /// the controller between them, e.g. hashing); `None` (the default) turns it off.
    pub fn set_delay_source(&mut self, delay: Option<Arc<AtomicU64>>) {
        self.timing.delay = delay;
    }

    /// When the most recently issued operation that took time completed (its last plane or
    /// transfer), nanoseconds; 0 before any.
    pub fn last_op_completion_ns(&self) -> u64 {
        self.timing.last_completion()
    }

    /// When the device-wide plane `plane_index` (`lun * planes_per_lun + plane`, as
    /// [`nand_hal::Geometry::plane_index`]) is next free; `None` if it does not exist.
    pub fn plane_busy_until(&self, plane_index: u32) -> Option<u64> {
        self.timing.plane_busy_until(plane_index as usize)
    }

    /// When the data bus of `lun`'s channel is next free; `None` if the LUN does not exist.
    pub fn bus_busy_until(&self, lun: u32) -> Option<u64> {
        self.timing.bus_busy_until(lun as usize)
    }

    /// Starts a completion window at "now": [`Self::window_completion_ns`] then reports when the
    /// last of the operations issued since completes (the simulator's response time of a request).
    pub fn open_window(&mut self) {
        self.timing.open_window();
    }

    /// The latest completion of the operations issued since [`Self::open_window`] (now, if none
    /// took time).
    pub fn window_completion_ns(&self) -> u64 {
        self.timing.window_end()
    }

    /// When every plane and bus is free.
    pub fn idle_at_ns(&self) -> u64 {
        self.timing.idle_at()
    }

    /// Array time (tR, tPROG, tBERS) charged so far, summed over planes.
    pub fn total_array_busy_ns(&self) -> u64 {
        self.timing.total_array_busy()
    }

    /// The latencies in use.
    pub fn timing_params(&self) -> TimingParams {
        self.timing.params
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Emulator, EmulatorConfig};
    use super::*;
    use nand_hal::{BlockId, EccRequirement, Geometry, NandFlash, ProgramOp, ReadOp};

    const P: TimingParams = TimingParams::MT29F4G08;
    const XFER_PAGE: u64 = 2112 * 20; // ns for a 2048 + 64 byte page

    fn emu(luns: u32) -> Emulator {
        let geometry = Geometry {
            data_bytes: 2048,
            spare_bytes: 64,
            pages_per_block: 4,
            blocks_per_plane: 4,
            planes_per_lun: 2,
            luns,
            nop: 4,
            sequential_program: true,
            ecc: EccRequirement { bits: 4, codeword_bytes: 512 },
            endurance: 1000,
        };
        Emulator::new(EmulatorConfig { timing: P, ..EmulatorConfig::new(geometry) }).unwrap()
    }

    #[test]
    fn window_reports_the_latest_completion_of_its_operations() {
        let mut e = emu(1);
        let g = e.geometry();
        // Plane 1 is busy with a long erase issued before the window.
        e.erase_block(BlockId(1)).unwrap();
        e.open_window();
        assert_eq!(e.window_completion_ns(), 0);
        // A read on plane 0 inside the window ends long before that erase.
        let (mut d, mut s) = ([0u8; 2048], [0u8; 64]);
        e.read_page(g.page(BlockId(0), 0), &mut d, &mut s).unwrap();
        assert_eq!(e.window_completion_ns(), P.t_r_ns + XFER_PAGE);
        assert_eq!(e.idle_at_ns(), P.t_bers_ns);
        // A later window opened at a later "now" starts there.
        e.set_now_ns(5_000_000);
        e.open_window();
        assert_eq!(e.window_completion_ns(), 5_000_000);
        e.erase_block(BlockId(0)).unwrap();
        assert_eq!(e.window_completion_ns(), 5_000_000 + P.t_bers_ns);
    }

    #[test]
    fn presets() {
        assert_eq!(P.xfer_ns(2112), 42_240);
        assert_eq!(TimingParams::CAFTL_PAPER.t_bers_ns, 1_500_000);
        assert_eq!(TimingParams::default(), P);
        assert_eq!(TimingParams { t_xfer_ps_per_byte: 1, ..P }.xfer_ns(1), 1); // rounds up
    }

    #[test]
    fn single_operations_take_array_plus_transfer_time() {
        let mut e = emu(1);
        let (d, s) = (vec![0u8; 2048], vec![0u8; 64]);
        e.program_page(e.geometry().page(BlockId(0), 0), &d, &s).unwrap();
        assert_eq!(e.last_op_completion_ns(), XFER_PAGE + 200_000);
        let t0 = e.last_op_completion_ns();
        let (mut rd, mut rs) = (vec![0u8; 2048], vec![0u8; 64]);
        e.read_page(e.geometry().page(BlockId(0), 0), &mut rd, &mut rs).unwrap();
        assert_eq!(e.last_op_completion_ns(), t0 + 25_000 + XFER_PAGE);
        // A spare-only read transfers only the spare bytes.
        let t1 = e.last_op_completion_ns();
        e.read_spare(e.geometry().page(BlockId(0), 0), &mut rs[..4]).unwrap();
        assert_eq!(e.last_op_completion_ns(), t1 + 25_000 + 80);
        let t2 = e.last_op_completion_ns();
        e.erase_block(BlockId(0)).unwrap();
        assert_eq!(e.last_op_completion_ns(), t2 + 700_000);
        assert_eq!(e.total_array_busy_ns(), 200_000 + 25_000 * 2 + 700_000);
        assert_eq!(e.plane_busy_until(0), Some(e.last_op_completion_ns()));
        assert_eq!(e.plane_busy_until(1), Some(0));
        assert_eq!(e.plane_busy_until(2), None);
    }

    #[test]
    fn operations_never_start_before_now() {
        let mut e = emu(1);
        e.set_now_ns(1_000_000);
        e.erase_block(BlockId(1)).unwrap();
        assert_eq!(e.last_op_completion_ns(), 1_700_000);
        assert_eq!(e.now_ns(), 1_000_000);
        // The plane is busy until 1.7 ms: a later-issued erase on it queues behind.
        e.set_now_ns(1_100_000);
        e.erase_block(BlockId(3)).unwrap();
        assert_eq!(e.last_op_completion_ns(), 2_400_000);
    }

    #[test]
    fn planes_overlap_array_time_but_share_the_bus() {
        let (d, s) = (vec![0u8; 2048], vec![0u8; 64]);
        // Two programs on the same plane (blocks 0 and 2) serialize completely.
        let mut same = emu(1);
        same.program_page(same.geometry().page(BlockId(0), 0), &d, &s).unwrap();
        same.program_page(same.geometry().page(BlockId(2), 0), &d, &s).unwrap();
        assert_eq!(same.last_op_completion_ns(), 2 * (XFER_PAGE + 200_000));
        // On two planes (blocks 0 and 1) the second transfer waits only for the bus.
        let mut two = emu(1);
        two.program_page(two.geometry().page(BlockId(0), 0), &d, &s).unwrap();
        two.program_page(two.geometry().page(BlockId(1), 0), &d, &s).unwrap();
        assert_eq!(two.last_op_completion_ns(), 2 * XFER_PAGE + 200_000);
        assert_eq!(two.idle_at_ns(), 2 * XFER_PAGE + 200_000);
        // A multi-plane program: both transfers, then one tPROG on both planes.
        let mut multi = emu(1);
        let g = multi.geometry();
        let ops = [
            ProgramOp { page: g.page(BlockId(0), 0), data: &d, spare: &s },
            ProgramOp { page: g.page(BlockId(1), 0), data: &d, spare: &s },
        ];
        multi.program_multi(&ops).unwrap();
        assert_eq!(multi.last_op_completion_ns(), 2 * XFER_PAGE + 200_000);
        assert_eq!(multi.plane_busy_until(0), multi.plane_busy_until(1));
        assert_eq!(multi.total_array_busy_ns(), 400_000);
    }

    #[test]
    fn multi_plane_read_and_erase_run_array_phases_in_parallel() {
        let mut e = emu(1);
        let g = e.geometry();
        e.erase_multi(&[BlockId(0), BlockId(1)]).unwrap();
        assert_eq!(e.last_op_completion_ns(), 700_000);
        let (mut a, mut b) = (vec![0u8; 2048], vec![0u8; 2048]);
        let (mut sa, mut sb) = (vec![0u8; 64], vec![0u8; 64]);
        let mut ops = [
            ReadOp { page: g.page(BlockId(0), 0), data: &mut a, spare: &mut sa },
            ReadOp { page: g.page(BlockId(1), 0), data: &mut b, spare: &mut sb },
        ];
        e.read_multi(&mut ops).unwrap();
        assert_eq!(e.last_op_completion_ns(), 700_000 + 25_000 + 2 * XFER_PAGE);
        assert_eq!(e.plane_busy_until(0), Some(700_000 + 25_000 + XFER_PAGE));
        assert_eq!(e.counters().multi_plane_ops, 2);
    }

    #[test]
    fn luns_are_fully_parallel() {
        let mut e = emu(2);
        let (d, s) = (vec![0u8; 2048], vec![0u8; 64]);
        let other_lun = BlockId(e.geometry().blocks_per_lun());
        e.program_page(e.geometry().page(BlockId(0), 0), &d, &s).unwrap();
        e.program_page(e.geometry().page(other_lun, 0), &d, &s).unwrap();
        assert_eq!(e.last_op_completion_ns(), XFER_PAGE + 200_000);
        assert_eq!(e.bus_busy_until(0), Some(XFER_PAGE));
        assert_eq!(e.bus_busy_until(1), Some(XFER_PAGE));
    }

    #[test]
    fn luns_on_one_channel_share_its_bus() {
        // Four LUNs on two channels: LUNs 0 and 2 share channel 0, 1 and 3 channel 1.
        let mut e = emu(4);
        e = Emulator::new(EmulatorConfig { channels: 2, ..e.config().clone() }).unwrap();
        let g = e.geometry();
        let (mut d, mut s) = ([0u8; 2048], [0u8; 64]);
        let lun = |l: u32| BlockId(l * g.blocks_per_lun());
        for l in 0..4 {
            e.read_page(g.page(lun(l), 0), &mut d, &mut s).unwrap();
        }
        // The array reads overlap; each channel moves its two pages out one after the other.
        assert_eq!(e.bus_busy_until(0), Some(P.t_r_ns + 2 * XFER_PAGE));
        assert_eq!(e.bus_busy_until(2), Some(P.t_r_ns + 2 * XFER_PAGE));
        assert_eq!(e.bus_busy_until(1), Some(P.t_r_ns + 2 * XFER_PAGE));
        assert_eq!(e.plane_busy_until(0), Some(P.t_r_ns + XFER_PAGE));
        assert_eq!(e.plane_busy_until(2 * g.planes_per_lun), Some(P.t_r_ns + 2 * XFER_PAGE));
        // One channel per LUN (the default): all four transfers overlap.
        let mut e = emu(4);
        for l in 0..4 {
            e.read_page(g.page(lun(l), 0), &mut d, &mut s).unwrap();
        }
        assert_eq!(e.last_op_completion_ns(), P.t_r_ns + XFER_PAGE);
        // More channels than LUNs is refused.
        assert!(Emulator::new(EmulatorConfig { channels: 5, ..e.config().clone() }).is_err());
    }

    #[test]
    fn refused_operations_take_no_time() {
        let mut e = emu(1);
        let p = e.geometry().page(BlockId(0), 3);
        e.program_page(p, &[0], &[]).unwrap();
        let t = e.last_op_completion_ns();
        // Out of order: refused, no time.
        assert!(e.program_page(e.geometry().page(BlockId(0), 1), &[0], &[]).is_err());
        assert_eq!(e.last_op_completion_ns(), t);
        assert_eq!(e.total_array_busy_ns(), 200_000);
        assert_eq!(e.counters().rejected, 1);
    }
}
