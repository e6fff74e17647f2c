//! The timing model ([`TimingParams`], the simulated clock) and the operation counters
//! ([`EmuCounters`]).
//!
//! # Timing model
//!
//! Time is a simulated clock in nanoseconds; nothing here sleeps. The caller moves "now" with
//! [`super::Emulator::set_now_ns`]; an operation never starts before now. The resources are the
//! device-wide planes, the LUNs (dies) and the channels: each channel's data bus is shared by the
//! LUNs on it (LUN `l` sits on channel `l % channels`; by default every LUN has a channel of its
//! own, [`super::EmulatorConfig::channels`]). Operations are placed greedily in issue order, each
//! at the earliest time its resources allow, with these phases:
//!
//! - **read**: the array read (tR) starts when its plane (or LUN) is free; the data transfer out
//!   (`bytes * t_xfer`) follows on the channel's bus once tR has ended and the bus is free.
//!   The plane stays busy until its page register has been transferred out.
//! - **program**: the transfer in starts when the plane (or LUN) and the bus are free; the array
//!   program (tPROG) follows. The bus is released at the end of the transfer.
//! - **erase**: tBERS, starting when the plane (or LUN) is free; no bus time (command cycles
//!   are not modelled).
//! - **multi-plane**: the planes' array phases run in parallel: a multi-plane read starts one tR
//!   when all its planes are free, then transfers each page out in turn; a multi-plane program
//!   transfers each page in turn, then runs one tPROG on all planes; a multi-plane erase runs
//!   one tBERS on all planes.
//!
//! [`TimingParams::scheduling`] says what "free" means ([`Scheduling`]):
//!
//! - [`Scheduling::PlaneQueues`] (the default, the model of every figure before issue #20): each
//!   plane queues its own operations, so single-plane operations on sibling planes of one LUN
//!   overlap; a channel's bus is taken in issue order (a transfer never starts before the end of
//!   one issued earlier on that channel, even if the bus is idle in between).
//! - [`Scheduling::LunQueues`] (MQSim's die model): a LUN runs one command at a time in issue
//!   order, a multi-plane command on its planes together; a transfer takes the earliest gap of
//!   its length on its channel's bus at or after its data is ready, so a LUN that is free does
//!   not wait behind transfers reserved later in time for LUNs with a queue (the bus is shared
//!   the way an event-driven controller shares it). Gaps are kept for the last 1024
//!   reservations per channel (merged when they touch); before those the bus counts as busy.
//!
//! **Delayed operations** ([`super::Emulator::set_delay_source`], the hash processor of a
//! deduplicating write): an operation issued at "now" plus a delay is placed when the caller
//! issues it, before operations the caller issues afterwards at an earlier "now" (the simulator
//! runs requests one after the other). With plane queues, the idle time such an operation leaves
//! on its planes and its channel's bus before it (a plane waiting for the hash processor) is kept
//! (the last [`MAX_HOLES`] intervals per plane and bus), and a single-plane read issued with no
//! delay pending whose tR and transfer fit in that idle time at or after "now" takes it instead
//! of queueing behind the delayed operation: an operation issued earlier is not held up by one
//! issued later. A read that does not fit queues as before (it would delay the later operation,
//! whose time is already placed).
//!
//! **Read priority** ([`super::Emulator::set_read_priority`], off by default; `read_priority.rs`):
//! the CAFTL paper's SSD and MQSim's scheduler serve reads before queued writes. With it on, a
//! read issued while [`super::Emulator::prioritize_reads`] is on (the simulator's host reads) is
//! placed before every operation on its channel that has not begun at its issue, and those are
//! placed again behind it; operations in progress are not suspended. Without it, everything
//! above holds unchanged (operations in issue order); with it, idle-time filling is not used.
//!
//! A caller may shape the next operation once ([`super::Emulator::shape_next_op`],
//! [`super::Emulator::hold_next_read`]): move another number of bytes over the bus (a copy-back
//! moves none or only the spare), start no earlier than a given time (a copy's program waits for
//! its checked data), or keep a read's plane and LUN busy after its transfer (a decode charged
//! as part of the read's service time). `sim::ecc_model::NoisyNand` uses them for FlexECC runs.
//!
//! Planes of different LUNs overlap freely except for the shared bus of their channel. With the
//! simulator's closed loop ([`crate::sim`]) the requests in flight each issue their operations
//! at their arrival, so independent requests overlap on different LUNs, channels (and, with
//! plane queues, planes) while requests to one LUN queue behind each other there.
//! Operations refused by the rules (range, NOP, order, ...) or cut by a power loss take no time;
//! operations that report status FAIL take their full time. `total_array_busy_ns` sums array time
//! (tR, tPROG, tBERS) over planes.
//!
//! Counters are plain `u64`s updated on every operation; they cost a few additions.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

mod read_priority;

pub use read_priority::WindowEnds;
use read_priority::{Kind, ReadPriority};

/// How the planes of a LUN and the buses of the channels are scheduled (see the module doc).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub enum Scheduling {
    /// Every plane has its own queue and runs single-plane operations independently of its
    /// sibling planes; each channel's bus is taken in issue order (a transfer never goes before
    /// one issued earlier). DiskSim's SSD extension with "parallel execution of commands in
    /// separate planes" (the Reusable SSD paper's setup); the model of every preset before
    /// issue #20, kept as the default so their figures hold.
    #[default]
    PlaneQueues,
    /// A LUN (die) runs one command at a time, FIFO: a single-plane operation occupies the
    /// whole LUN, a multi-plane one runs on its planes together (ONFI: the LUN is busy for the
    /// whole command; MQSim's die). A transfer takes the earliest gap on its channel's bus at
    /// or after the moment its data is ready, so an idle LUN's transfer does not wait behind one
    /// reserved later for a LUN with a queue (what an event-driven controller does).
    LunQueues,
}

impl Scheduling {
    /// The CLI name: `planes` or `luns`.
    pub const fn name(self) -> &'static str {
        match self {
            Scheduling::PlaneQueues => "planes",
            Scheduling::LunQueues => "luns",
        }
    }
}

impl std::str::FromStr for Scheduling {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "planes" => Ok(Scheduling::PlaneQueues),
            "luns" => Ok(Scheduling::LunQueues),
            _ => Err(format!("unknown scheduling '{s}' (expected planes or luns)")),
        }
    }
}

/// Operation latencies of a device, and how its planes and buses are scheduled.
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
    /// Plane and bus scheduling.
    pub scheduling: Scheduling,
}

impl TimingParams {
    /// Micron MT29F4G08ABADA datasheet: tR 25 us (max), tPROG 200 us (typical), tBERS 700 us
    /// (typical), ONFI asynchronous timing mode 5 (tRC/tWC 20 ns): 20 ns per byte.
    pub const MT29F4G08: TimingParams = TimingParams {
        t_r_ns: 25_000,
        t_prog_ns: 200_000,
        t_bers_ns: 700_000,
        t_xfer_ps_per_byte: 20_000,
        scheduling: Scheduling::PlaneQueues,
    };

    /// The flash parameters of the CAFTL paper's SSD simulation (Chen, Luo, Zhang: "CAFTL: A
    /// Content-Aware Flash Translation Layer Enhancing the Lifespan of Flash Memory based Solid
    /// State Drives", FAST 2011), used to compare with its results: tR 25 us, tPROG 200 us,
    /// tBERS 1.5 ms, 20 ns per byte of bus transfer.
    pub const CAFTL_PAPER: TimingParams = TimingParams {
        t_r_ns: 25_000,
        t_prog_ns: 200_000,
        t_bers_ns: 1_500_000,
        t_xfer_ps_per_byte: 20_000,
        scheduling: Scheduling::PlaneQueues,
    };

    /// Every operation takes no time.
    pub const ZERO: TimingParams = TimingParams {
        t_r_ns: 0,
        t_prog_ns: 0,
        t_bers_ns: 0,
        t_xfer_ps_per_byte: 0,
        scheduling: Scheduling::PlaneQueues,
    };

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
    /// Copy-backs on the emulated chip whose program reached the array (each also one of
    /// `reads` and one of `programs`).
    pub copy_backs: u64,
    /// Bits flipped by the raw bit-error model in returned read data.
    pub bit_flips: u64,
    /// Programs that reported status FAIL (not counting [`super::EmuError::SetBits`]).
    pub program_failures: u64,
    /// Erases that reported status FAIL.
    pub erase_failures: u64,
    /// Power cuts (scheduled or immediate).
    pub power_cuts: u64,
    /// Of `power_cuts`, those that tore a multi-plane program as a whole
    /// ([`super::MultiPlaneCut::WholeCall`]).
    pub whole_call_cut_programs: u64,
    /// Of `power_cuts`, those that partly erased every block of a multi-plane erase
    /// ([`super::MultiPlaneCut::WholeCall`]).
    pub whole_call_cut_erases: u64,
    /// Operations refused by a rule (NOP, program order, set bits) without reaching the array.
    pub rejected: u64,
}

/// Idle intervals kept per plane and per bus before delayed operations (see the module doc);
/// older ones are dropped (a read then queues as it would without them).
pub const MAX_HOLES: usize = 64;

/// Records the idle interval `[a, b)` in `q` (nothing if empty), dropping the oldest past
/// [`MAX_HOLES`].
fn push_hole(q: &mut VecDeque<(u64, u64)>, a: u64, b: u64) {
    if b > a {
        q.push_back((a, b));
        if q.len() > MAX_HOLES {
            q.pop_front();
        }
    }
}

/// Reservations a channel's bus keeps for gap filling; older ones fold into its floor.
const MAX_BUS_INTERVALS: usize = 1024;

/// One channel's data bus.
#[derive(Clone, Debug, Default)]
struct Bus {
    /// The bus counts as busy before this time. In issue order ([`Scheduling::PlaneQueues`]) it
    /// is the end of the latest reservation and `reserved` stays empty.
    floor: u64,
    /// Reservations `[start, end)` after `floor`, sorted, disjoint and not touching
    /// ([`Scheduling::LunQueues`]).
    reserved: VecDeque<(u64, u64)>,
}

impl Bus {
    /// When the last reservation ends.
    fn until(&self) -> u64 {
        self.reserved.back().map_or(self.floor, |&(_, end)| end.max(self.floor))
    }

    /// Reserves `len` ns after every earlier reservation and no earlier than `ready`; returns
    /// the start.
    fn reserve_in_order(&mut self, ready: u64, len: u64) -> u64 {
        let start = ready.max(self.floor);
        self.floor = start.saturating_add(len);
        start
    }

    /// Reserves `len` ns in the earliest gap that starts at or after `ready`; returns the start.
    /// "Now" may move backwards, so reservations are not dropped when they are over, only when
    /// more than [`MAX_BUS_INTERVALS`] are kept (the oldest then becomes the floor).
    fn reserve_gap(&mut self, ready: u64, len: u64) -> u64 {
        let mut start = ready.max(self.floor);
        if len == 0 {
            return start;
        }
        // The first reservation that ends after `start`; the ones before cannot be in the way.
        let mut i = self.reserved.partition_point(|&(_, end)| end <= start);
        while let Some(&(a, b)) = self.reserved.get(i) {
            if start.saturating_add(len) <= a {
                break;
            }
            start = start.max(b);
            i += 1;
        }
        let end = start.saturating_add(len);
        // Every reservation before `i` ends at or before `start`; the one at `i` starts at or
        // after `end`. Merge with those that touch.
        let joins_prev = i > 0 && self.reserved[i - 1].1 == start;
        let joins_next = self.reserved.get(i).is_some_and(|&(a, _)| a == end);
        match (joins_prev, joins_next) {
            (true, true) => {
                self.reserved[i - 1].1 = self.reserved[i].1;
                self.reserved.remove(i);
            }
            (true, false) => self.reserved[i - 1].1 = end,
            (false, true) => self.reserved[i].0 = start,
            (false, false) => self.reserved.insert(i, (start, end)),
        }
        if self.reserved.len() > MAX_BUS_INTERVALS {
            if let Some((_, oldest_end)) = self.reserved.pop_front() {
                self.floor = self.floor.max(oldest_end);
            }
        }
        start
    }
}

/// Simulated clock and per-resource busy times.
#[derive(Clone, Debug)]
pub(crate) struct TimingState {
    pub(crate) params: TimingParams,
    now: u64,
    plane_busy: Vec<u64>,
    /// Per LUN, used by [`Scheduling::LunQueues`].
    lun_busy: Vec<u64>,
    buses: Vec<Bus>,
    last_completion: u64,
    /// Latest completion of the operations issued since the window was opened.
    window_end: u64,
    total_array_busy: u64,
    /// Work outside the NAND that delays the operations issued after it (the hash processor of
    /// a deduplicating write, `sim::dedup::TimedIndex`): ns added to "now".
    delay: Option<Arc<AtomicU64>>,
    /// One-shot override of the bytes the next single-page read or program moves over the bus
    /// ([`super::Emulator::shape_next_op`]).
    next_bytes: Option<u64>,
    /// One-shot earliest start of the next operation that takes time.
    next_not_before: u64,
    /// One-shot time the next read keeps its plane (and LUN) after its transfer.
    next_hold: u64,
    /// Sum over operations of start to end (array, waits for the bus, transfers, holds): with
    /// LUN queues, the LUNs' busy time.
    total_op_busy: u64,
    /// Controller computation on the data of the operations issued so far (WOM encoding and
    /// decoding, `sim::wom::SimulatedWom`): ns the next operation waits after its planes are
    /// free, taken (reset to zero) by that operation.
    compute: Option<Arc<AtomicU64>>,
    /// Per plane: idle intervals left before delayed operations (see the module doc).
    plane_holes: Vec<VecDeque<(u64, u64)>>,
    /// Per channel: idle bus intervals left before delayed operations' transfers.
    bus_holes: Vec<VecDeque<(u64, u64)>>,
    /// Reads placed in such an interval.
    pub(crate) backfilled_reads: u64,
    /// Read priority, when on (`read_priority.rs`; `None`: off, the default).
    read_priority: Option<ReadPriority>,
}

impl TimingState {
    /// `planes` device-wide planes on `luns` LUNs sharing `channels` buses (at least one).
    pub(crate) fn new(params: TimingParams, planes: usize, luns: usize, channels: usize) -> Self {
        TimingState {
            params,
            now: 0,
            plane_busy: vec![0; planes],
            lun_busy: vec![0; luns.max(1)],
            buses: vec![Bus::default(); channels.max(1)],
            last_completion: 0,
            window_end: 0,
            total_array_busy: 0,
            delay: None,
            next_bytes: None,
            next_not_before: 0,
            next_hold: 0,
            total_op_busy: 0,
            compute: None,
            plane_holes: vec![VecDeque::new(); planes],
            bus_holes: vec![VecDeque::new(); channels.max(1)],
            backfilled_reads: 0,
            read_priority: None,
        }
    }

    /// The delay source's value now (0 without one).
    fn delay_now(&self) -> u64 {
        self.delay.as_ref().map_or(0, |d| d.load(Ordering::Relaxed))
    }

    /// Before a delayed operation starting at `start` takes `planes`: the idle time it leaves on
    /// them (plane queues only).
    fn note_plane_holes(&mut self, planes: &[(usize, u64)], start: u64) {
        if self.lun_queues() || self.delay_now() == 0 {
            return;
        }
        for &(p, _) in planes {
            let free = self.plane_busy[p].max(self.now);
            push_hole(&mut self.plane_holes[p], free, start);
        }
    }

    /// A delayed operation's transfer reserved at `start` on `lun`'s channel, whose bus was
    /// free from `floor`: the idle time it leaves there.
    fn note_bus_hole(&mut self, lun: usize, floor: u64, start: u64) {
        if self.lun_queues() || self.delay_now() == 0 {
            return;
        }
        let ch = self.channel(lun);
        let free = floor.max(self.now);
        push_hole(&mut self.bus_holes[ch], free, start);
    }

    /// A single-plane read issued at "now" with no delay pending placed in idle time left
    /// before delayed operations, if its tR and transfer fit there; false (nothing done) if not.
    fn backfill_read(&mut self, lun: usize, ops: &[(usize, u64)]) -> bool {
        let &[(p, bytes)] = ops else { return false };
        let compute_pending = self.compute.as_ref().is_some_and(|c| c.load(Ordering::Relaxed) > 0);
        if self.lun_queues() || self.delay_now() > 0 || self.next_hold > 0 || compute_pending {
            return false;
        }
        let ch = self.channel(lun);
        let t0 = self.now.max(self.next_not_before);
        let (t_r, xfer) = (self.params.t_r_ns, self.params.xfer_ns(bytes));
        for hi in 0..self.plane_holes[p].len() {
            let (a, b) = self.plane_holes[p][hi];
            let start = a.max(t0);
            let array_end = start.saturating_add(t_r);
            for bi in 0..self.bus_holes[ch].len() {
                let (c, d) = self.bus_holes[ch][bi];
                let xfer_start = array_end.max(c);
                let end = xfer_start.saturating_add(xfer);
                if end <= d && end <= b {
                    self.plane_holes[p][hi] = (end, b);
                    push_hole(&mut self.plane_holes[p], a, start);
                    self.bus_holes[ch][bi] = (end, d);
                    push_hole(&mut self.bus_holes[ch], c, xfer_start);
                    self.complete(end);
                    self.total_op_busy = self.total_op_busy.saturating_add(end - start);
                    self.charge_array(t_r, 1);
                    self.backfilled_reads += 1;
                    return true;
                }
            }
        }
        false
    }

    /// Takes the pending computation time (see `compute`).
    fn take_compute(&mut self) -> u64 {
        self.compute.as_ref().map_or(0, |c| c.swap(0, Ordering::Relaxed))
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
        if let Some(rp) = self.read_priority.as_mut() {
            rp.open_window(self.now);
        }
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
        self.buses.get(self.channel(lun)).map(Bus::until)
    }

    fn channel(&self, lun: usize) -> usize {
        lun % self.buses.len()
    }

    fn lun_queues(&self) -> bool {
        self.params.scheduling == Scheduling::LunQueues
    }

    pub(crate) fn idle_at(&self) -> u64 {
        let planes = self.plane_busy.iter().copied().max().unwrap_or(0);
        let luns = self.lun_busy.iter().copied().max().unwrap_or(0);
        let buses = self.buses.iter().map(Bus::until).max().unwrap_or(0);
        planes.max(luns).max(buses)
    }

    pub(crate) fn total_array_busy(&self) -> u64 {
        self.total_array_busy
    }

    /// When the planes of `ops` (and, with LUN queues, LUN `lun`) are all free, not before now
    /// plus the delay source's value (work outside the NAND, see `set_delay_source`).
    /// Pending computation (`compute`) runs once the planes are free (their data is in).
    fn start_at(&mut self, lun: usize, planes: &[(usize, u64)]) -> u64 {
        let now = self.now.saturating_add(self.delay.as_ref().map_or(0, |d| d.load(Ordering::Relaxed)));
        let now = now.max(self.next_not_before);
        let t = planes.iter().map(|&(p, _)| self.plane_busy[p]).fold(now, u64::max);
        let t = t.saturating_add(self.take_compute());
        if self.lun_queues() {
            t.max(self.lun_busy.get(lun).copied().unwrap_or(0))
        } else {
            t
        }
    }

    /// Reserves `len` ns of `lun`'s channel's bus from `ready` on; returns the start.
    fn reserve_bus(&mut self, lun: usize, ready: u64, len: u64) -> u64 {
        let (lq, ch) = (self.lun_queues(), self.channel(lun));
        let bus = &mut self.buses[ch];
        if lq {
            bus.reserve_gap(ready, len)
        } else {
            bus.reserve_in_order(ready, len)
        }
    }

    fn set_lun_busy(&mut self, lun: usize, t: u64) {
        if let Some(b) = self.lun_busy.get_mut(lun) {
            *b = t;
        }
    }

    fn xfer_total(&self, ops: &[(usize, u64)]) -> u64 {
        ops.iter().map(|&(_, bytes)| self.params.xfer_ns(bytes)).fold(0, u64::saturating_add)
    }

    /// Reads of `ops` = (device-wide plane, bytes out) on LUN `lun`, their tR in parallel, then
    /// their transfers out one after the other.
    pub(crate) fn read(&mut self, lun: usize, ops: &[(usize, u64)]) {
        if self.read_priority.is_some() {
            return self.issue_prioritized(Kind::Read, lun, ops);
        }
        if self.backfill_read(lun, ops) {
            return;
        }
        let start = self.start_at(lun, ops);
        self.note_plane_holes(ops, start);
        let array_end = start.saturating_add(self.params.t_r_ns);
        let floor = self.buses[self.channel(lun)].until();
        let mut t = self.reserve_bus(lun, array_end, self.xfer_total(ops));
        self.note_bus_hole(lun, floor, t);
        for &(p, bytes) in ops {
            t = t.saturating_add(self.params.xfer_ns(bytes));
            self.plane_busy[p] = t;
        }
        let hold = std::mem::take(&mut self.next_hold);
        if hold > 0 {
            t = t.saturating_add(hold);
            for &(p, _) in ops {
                self.plane_busy[p] = t;
            }
        }
        self.set_lun_busy(lun, t);
        self.complete(t);
        self.total_op_busy = self.total_op_busy.saturating_add(t - start);
        self.charge_array(self.params.t_r_ns, ops.len());
    }

    /// Programs of `ops` = (device-wide plane, bytes in) on LUN `lun`: their transfers in one
    /// after the other, then their tPROG in parallel.
    pub(crate) fn program(&mut self, lun: usize, ops: &[(usize, u64)]) {
        if self.read_priority.is_some() {
            return self.issue_prioritized(Kind::Program, lun, ops);
        }
        let len = self.xfer_total(ops);
        let ready = self.start_at(lun, ops);
        self.note_plane_holes(ops, ready);
        let floor = self.buses[self.channel(lun)].until();
        let start = self.reserve_bus(lun, ready, len);
        self.note_bus_hole(lun, floor, start);
        let end = start.saturating_add(len).saturating_add(self.params.t_prog_ns);
        self.total_op_busy = self.total_op_busy.saturating_add(end - ready);
        for &(p, _) in ops {
            self.plane_busy[p] = end;
        }
        self.set_lun_busy(lun, end);
        self.complete(end);
        self.charge_array(self.params.t_prog_ns, ops.len());
    }

    /// Erases on LUN `lun`'s planes of `ops` (the byte counts are ignored), in parallel.
    pub(crate) fn erase(&mut self, lun: usize, ops: &[(usize, u64)]) {
        if self.read_priority.is_some() {
            return self.issue_prioritized(Kind::Erase, lun, ops);
        }
        let start = self.start_at(lun, ops);
        self.note_plane_holes(ops, start);
        let end = start.saturating_add(self.params.t_bers_ns);
        self.total_op_busy = self.total_op_busy.saturating_add(self.params.t_bers_ns);
        for &(p, _) in ops {
            self.plane_busy[p] = end;
        }
        self.set_lun_busy(lun, end);
        self.complete(end);
        self.charge_array(self.params.t_bers_ns, ops.len());
    }

    /// The bytes a single-page operation moves: `bytes`, or the one-shot override.
    pub(crate) fn take_bytes(&mut self, bytes: u64) -> u64 {
        self.next_bytes.take().unwrap_or(bytes)
    }

    fn charge_array(&mut self, t: u64, planes: usize) {
        self.next_not_before = 0;
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
    /// An operation issued earlier is not held up by one the delay pushed later where it fits in
    /// the idle time before it (see the module doc: single-plane reads, plane queues).
    pub fn set_delay_source(&mut self, delay: Option<Arc<AtomicU64>>) {
        self.timing.delay = delay;
    }

    /// Reads placed in idle time left before delayed operations (see [`Self::set_delay_source`]).
    pub fn backfilled_reads(&self) -> u64 {
        self.timing.backfilled_reads
    }

    /// Turns read priority on or off (off by default; see the module doc and
    /// `timing/read_priority.rs`). With it on, a read issued while [`Self::prioritize_reads`] is
    /// on goes before every program, erase and other read on its channel that has not begun at
    /// its issue, and those move behind it; an operation in progress is not suspended. Only
    /// timing changes: the data a read returns is the data as of its issue order. Turning it on
    /// starts from the operations placed so far (they do not move); turning it off keeps every
    /// placement.
    pub fn set_read_priority(&mut self, on: bool) {
        let t = &mut self.timing;
        t.read_priority = match (on, t.read_priority.take()) {
            (true, Some(rp)) => Some(rp),
            (true, None) => Some(ReadPriority::new(t)),
            (false, _) => None,
        };
    }

    /// With read priority on: the completion of each window ([`Self::open_window`]) as its
    /// operations are placed now, shared (they move later when reads go before them, after
    /// [`Self::window_completion_ns`] reported them); `None` without read priority.
    pub fn window_ends(&self) -> Option<Arc<std::sync::Mutex<WindowEnds>>> {
        self.timing.read_priority.as_ref().map(|rp| rp.windows.clone())
    }

    /// Whether read priority is on ([`Self::set_read_priority`]).
    pub fn read_priority(&self) -> bool {
        self.timing.read_priority.is_some()
    }

    /// With read priority on: whether reads issued from now on have priority (the simulator's
    /// host reads) or are queued in order with programs and erases (GC, read-modify-write).
    /// Without read priority it has no effect.
    pub fn prioritize_reads(&mut self, on: bool) {
        if let Some(rp) = self.timing.read_priority.as_mut() {
            rp.reads = on;
        }
    }

    /// With read priority on: (priority reads that went ahead of at least one queued operation,
    /// operations they went ahead of, counted once per read); (0, 0) without it.
    pub fn read_priority_counts(&self) -> (u64, u64) {
        self.timing.read_priority.as_ref().map_or((0, 0), |rp| (rp.prioritized, rp.overtaken))
    }

    /// With read priority on: operations that end later than when first placed (as placed now)
    /// and the sum of those delays in ns: how late completions reported to the caller were
    /// (see `timing/read_priority.rs`); (0, 0) without it.
    pub fn read_priority_moved(&self) -> (u64, u64) {
        self.timing.read_priority.as_ref().map_or((0, 0), |rp| rp.moved())
    }

    /// Controller computation on data already read (or before data is programmed): the value
    /// of `compute` (ns, added by the computing code) delays the next operation's start past
    /// the moment its planes are free, and is then reset to zero. Whatever is left after a
    /// request's last operation is the caller's to add to its completion
    /// ([`Self::take_compute_ns`]).
    pub fn set_compute_source(&mut self, compute: Option<Arc<AtomicU64>>) {
        self.timing.compute = compute;
    }

    /// Takes the computation time no operation has waited for yet (see
    /// [`Self::set_compute_source`]).
    pub fn take_compute_ns(&mut self) -> u64 {
        self.timing.take_compute()
    }

    /// When the most recently issued operation that took time completed (its last plane or
    /// transfer), nanoseconds; 0 before any.
    pub fn last_op_completion_ns(&self) -> u64 {
        self.timing.last_completion()
    }

    /// When the device-wide plane `plane_index` (`lun * planes_per_lun + plane`, as
    /// [`nand_hal::Geometry::plane_index`]) is next free of its own operations (with
    /// [`Scheduling::LunQueues`] it also waits for its LUN's); `None` if it does not exist.
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

    /// Time from start to end of every operation so far (array time, waits for the bus,
    /// transfers, held decodes), summed: with [`Scheduling::LunQueues`], the LUNs' busy time.
    pub fn total_op_busy_ns(&self) -> u64 {
        self.timing.total_op_busy
    }

    /// Shapes the next single-page read or program (a copy-back, `sim::ecc_model`): it moves
    /// `bytes` over the bus instead of its data and spare (`None`: unchanged), and the next
    /// operation that takes time starts no earlier than `not_before` (its data is ready then).
    /// Both apply once.
    pub fn shape_next_op(&mut self, bytes: Option<u64>, not_before: u64) {
        self.timing.next_bytes = bytes;
        self.timing.next_not_before = not_before;
    }

    /// The next read keeps its plane (and, with LUN queues, its LUN) busy for `ns` after its
    /// transfer, and completes that much later: a check of the page (ECC decode) charged as part
    /// of the read's service time, as a simulator with one read latency per page format does
    /// (`sim::ecc_model`, `--decode-model lun`). Applies once.
    pub fn hold_next_read(&mut self, ns: u64) {
        self.timing.next_hold = ns;
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

    /// `luns` LUNs of two planes of 4 blocks of 4 pages of 2048 + 64 bytes (even blocks on plane
    /// 0): the timing tests' chip (here and in `read_priority`).
    pub(super) fn small_geometry(luns: u32) -> Geometry {
        Geometry {
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
        }
    }

    fn emu(luns: u32) -> Emulator {
        Emulator::new(EmulatorConfig { timing: P, ..EmulatorConfig::new(small_geometry(luns)) }).unwrap()
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
        // Busy time adds the transfers (nothing waited here).
        assert_eq!(e.total_op_busy_ns(), e.last_op_completion_ns());
        assert_eq!(e.total_op_busy_ns(), 200_000 + XFER_PAGE + 25_000 + XFER_PAGE + 25_000 + 80 + 700_000);
        assert_eq!(e.plane_busy_until(0), Some(e.last_op_completion_ns()));
        assert_eq!(e.plane_busy_until(1), Some(0));
        assert_eq!(e.plane_busy_until(2), None);
        // Shaped operations: a read that moves 0 bytes and holds its plane 7 us, then a program
        // that starts no earlier than 1 ms later and moves 10 bytes.
        let t3 = e.last_op_completion_ns();
        e.set_now_ns(t3);
        e.shape_next_op(Some(0), 0);
        e.hold_next_read(7_000);
        e.read_page(e.geometry().page(BlockId(1), 0), &mut rd, &mut rs).unwrap();
        assert_eq!(e.last_op_completion_ns(), t3 + 25_000 + 7_000);
        let p1 = e.geometry().plane_index(BlockId(1));
        assert_eq!(e.plane_busy_until(p1), Some(t3 + 32_000));
        e.shape_next_op(Some(10), t3 + 1_000_000);
        e.program_page(e.geometry().page(BlockId(0), 0), &d, &s).unwrap();
        assert_eq!(e.last_op_completion_ns(), t3 + 1_000_000 + 200 + 200_000);
    }

    /// Computation (WOM encoding) between a read and the program that needs its result: the
    /// program starts that long after its plane is free; what is left after the last operation
    /// (decoding) is handed to the caller once, and taken by no operation.
    #[test]
    fn computation_delays_the_next_operation_once() {
        let mut e = emu(1);
        let g = e.geometry();
        let compute = Arc::new(AtomicU64::new(0));
        e.set_compute_source(Some(compute.clone()));
        let (mut d, mut s) = (vec![0u8; 2048], vec![0u8; 64]);
        e.read_page(g.page(BlockId(0), 0), &mut d, &mut s).unwrap();
        let read_end = P.t_r_ns + XFER_PAGE;
        compute.fetch_add(12_500, Ordering::Relaxed);
        e.program_page(g.page(BlockId(0), 1), &d, &s).unwrap();
        let prog_end = read_end + 12_500 + XFER_PAGE + P.t_prog_ns;
        assert_eq!(e.last_op_completion_ns(), prog_end);
        // Consumed: the next operation on the plane follows right after.
        e.read_page(g.page(BlockId(0), 1), &mut d, &mut s).unwrap();
        assert_eq!(e.last_op_completion_ns(), prog_end + P.t_r_ns + XFER_PAGE);
        compute.fetch_add(7_000, Ordering::Relaxed);
        assert_eq!((e.take_compute_ns(), e.take_compute_ns()), (7_000, 0));
    }

    /// A program the delay source pushed 1 ms later leaves its plane and bus idle before it: a
    /// read issued meanwhile with no delay that fits there completes at once; one that does not
    /// fit, and any read without the delay source, queues behind the program.
    #[test]
    fn a_read_issued_before_a_delayed_program_uses_the_idle_time_before_it() {
        let (d, s) = (vec![0u8; 2048], vec![0u8; 64]);
        let (mut rd, mut rs) = (vec![0u8; 2048], vec![0u8; 64]);
        let read = P.t_r_ns + XFER_PAGE;
        let prog_end = 1_000_000 + XFER_PAGE + P.t_prog_ns;
        for with_delay_source in [true, false] {
            let mut e = emu(1);
            let g = e.geometry();
            let delay = Arc::new(AtomicU64::new(0));
            // Without the source, the program is issued at 1 ms itself (same placement).
            if with_delay_source {
                e.set_delay_source(Some(delay.clone()));
                delay.store(1_000_000, Ordering::Relaxed);
            } else {
                e.set_now_ns(1_000_000);
            }
            e.program_page(g.page(BlockId(0), 0), &d, &s).unwrap();
            assert_eq!(e.last_op_completion_ns(), prog_end);
            delay.store(0, Ordering::Relaxed);
            // Issued at 0.1 ms on the same plane: fits before 1 ms.
            e.set_now_ns(100_000);
            e.read_page(g.page(BlockId(0), 1), &mut rd, &mut rs).unwrap();
            let expect = if with_delay_source { 100_000 + read } else { prog_end + read };
            assert_eq!(e.last_op_completion_ns(), expect, "delay source {with_delay_source}");
            if with_delay_source {
                // A second one follows it in the same idle time; one at 0.99 ms does not fit.
                e.read_page(g.page(BlockId(0), 2), &mut rd, &mut rs).unwrap();
                assert_eq!(e.last_op_completion_ns(), 100_000 + 2 * read);
                e.set_now_ns(990_000);
                e.read_page(g.page(BlockId(0), 3), &mut rd, &mut rs).unwrap();
                assert_eq!(e.last_op_completion_ns(), prog_end + read);
                assert_eq!(e.backfilled_reads(), 2);
            }
            // The program's place is unchanged.
            assert!(e.plane_busy_until(0).unwrap() >= prog_end);
        }
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

    /// Four LUNs of two planes on two channels (LUNs 0 and 2 on channel 0, LUNs 1 and 3 on
    /// channel 1) with `scheduling`, tR 50 us so that a transfer (42.24 us) fits in the bus gap
    /// a queued read leaves.
    fn two_by_two(scheduling: Scheduling) -> Emulator {
        let e = emu(4);
        let timing = TimingParams { t_r_ns: 50_000, scheduling, ..P };
        Emulator::new(EmulatorConfig { channels: 2, timing, ..e.config().clone() }).unwrap()
    }

    #[test]
    fn lun_queues_schedule_by_hand() {
        let mut e = two_by_two(Scheduling::LunQueues);
        let g = e.geometry();
        let (mut d, mut s) = ([0u8; 2048], [0u8; 64]);
        // Block `2 * k + p` of LUN `l` is on its plane `p`.
        let block = |l: u32, p: u32, k: u32| BlockId(l * g.blocks_per_lun() + 2 * k + p);
        let x = XFER_PAGE;
        // Everything is issued at now = 0. The schedule, worked out by hand:
        // 1. read LUN 0 plane 0: tR [0, 50], bus 0 [50, 50 + x].
        e.read_page(g.page(block(0, 0, 0), 0), &mut d, &mut s).unwrap();
        assert_eq!(e.last_op_completion_ns(), 50_000 + x);
        // 2. read LUN 0 plane 1: the LUN runs one command at a time, so tR waits for the first
        //    read's transfer: tR [50 + x, 100 + x], bus 0 [100 + x, 100 + 2x].
        e.read_page(g.page(block(0, 1, 0), 0), &mut d, &mut s).unwrap();
        assert_eq!(e.last_op_completion_ns(), 100_000 + 2 * x);
        // 3. read LUN 2 (channel 0, idle): tR [0, 50]; the bus is taken until 50 + x, then free
        //    until 100 + x: its transfer fills that gap.
        e.read_page(g.page(block(2, 0, 0), 0), &mut d, &mut s).unwrap();
        assert_eq!(e.last_op_completion_ns(), 50_000 + 2 * x);
        // 4. read LUN 1 (channel 1): overlaps everything on channel 0.
        e.read_page(g.page(block(1, 0, 0), 0), &mut d, &mut s).unwrap();
        assert_eq!(e.last_op_completion_ns(), 50_000 + x);
        // 5. read LUN 3 (channel 1): tR in parallel, its transfer after LUN 1's on the bus.
        e.read_page(g.page(block(3, 0, 0), 0), &mut d, &mut s).unwrap();
        assert_eq!(e.last_op_completion_ns(), 50_000 + 2 * x);
        // 6. program LUN 1 plane 1: LUN 1 is free at 50 + x, channel 1's bus at 50 + 2x; the
        //    transfer in, then tPROG.
        let (pd, ps) = ([0u8; 2048], [0u8; 64]);
        e.program_page(g.page(block(1, 1, 0), 0), &pd, &ps).unwrap();
        assert_eq!(e.last_op_completion_ns(), 50_000 + 3 * x + 200_000);
        // 7. erase on LUN 3 plane 1: after LUN 3's read, no bus.
        e.erase_block(block(3, 1, 1)).unwrap();
        assert_eq!(e.last_op_completion_ns(), 50_000 + 2 * x + 700_000);
        assert_eq!(e.bus_busy_until(0), Some(100_000 + 2 * x));
        assert_eq!(e.bus_busy_until(1), Some(50_000 + 3 * x));
        assert_eq!(e.idle_at_ns(), 50_000 + 2 * x + 700_000);

        // The same operations with plane queues: read 2 overlaps read 1's tR on the sibling
        // plane and every transfer on a channel waits for the one issued before it.
        let mut p = two_by_two(Scheduling::PlaneQueues);
        p.read_page(g.page(block(0, 0, 0), 0), &mut d, &mut s).unwrap();
        p.read_page(g.page(block(0, 1, 0), 0), &mut d, &mut s).unwrap();
        assert_eq!(p.last_op_completion_ns(), 50_000 + 2 * x);
        p.read_page(g.page(block(2, 0, 0), 0), &mut d, &mut s).unwrap();
        assert_eq!(p.last_op_completion_ns(), 50_000 + 3 * x);
    }

    #[test]
    fn lun_queues_multi_plane_program_holds_the_lun_once() {
        let mut e = two_by_two(Scheduling::LunQueues);
        let g = e.geometry();
        let (d, s) = ([0u8; 2048], [0u8; 64]);
        let ops = [
            ProgramOp { page: g.page(BlockId(0), 0), data: &d, spare: &s },
            ProgramOp { page: g.page(BlockId(1), 0), data: &d, spare: &s },
        ];
        e.program_multi(&ops).unwrap();
        // Both transfers, one tPROG on both planes.
        assert_eq!(e.last_op_completion_ns(), 2 * XFER_PAGE + 200_000);
        // Two single-plane programs on the two planes serialise on the LUN.
        let mut f = two_by_two(Scheduling::LunQueues);
        f.program_page(g.page(BlockId(0), 0), &d, &s).unwrap();
        f.program_page(g.page(BlockId(1), 0), &d, &s).unwrap();
        assert_eq!(f.last_op_completion_ns(), 2 * (XFER_PAGE + 200_000));
    }

    #[test]
    fn bus_gap_filling_matches_a_slot_by_slot_model() {
        // Reservations on a bus against a model that marks every nanosecond: the earliest start
        // at or after `ready` whose `len` nanoseconds are all free.
        let mut rng = 0x2545_f491_4f6c_dd1du64;
        let mut next = |n: u64| {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng % n
        };
        let mut bus = Bus::default();
        let mut taken = vec![false; 4096];
        for _ in 0..40 {
            let (ready, len) = (next(1500), next(60));
            let expected = (ready..).find(|&t| (t..t + len).all(|u| !taken[u as usize])).unwrap();
            assert_eq!(bus.reserve_gap(ready, len), expected);
            for u in expected..expected + len {
                taken[u as usize] = true;
            }
        }
        let r: Vec<_> = bus.reserved.iter().copied().collect();
        assert!(r.windows(2).all(|w| w[0].1 < w[1].0), "{r:?}");
        let last = taken.iter().rposition(|&b| b).map_or(0, |u| u as u64 + 1);
        assert_eq!(bus.until(), last);
        // Past the cap, the oldest reservation becomes the floor: nothing fits before its end.
        let mut bus = Bus::default();
        for k in 0..=MAX_BUS_INTERVALS as u64 {
            assert_eq!(bus.reserve_gap(10 * k, 5), 10 * k);
        }
        assert_eq!((bus.reserved.len(), bus.floor), (MAX_BUS_INTERVALS, 5));
        assert_eq!(bus.reserve_gap(0, 5), 5);
        assert_eq!(bus.reserve_gap(0, 6), 10 * MAX_BUS_INTERVALS as u64 + 5);
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
