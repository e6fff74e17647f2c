//! Read priority ([`super::super::Emulator::set_read_priority`]): reads served before queued
//! programs and erases, as the CAFTL paper's SSD does ("incoming read requests are given a
//! higher priority than writes", Section 4.3) and as MQSim's transaction scheduler does.
//!
//! What it owns: with the option on, every operation's resolved constraints (earliest start,
//! pending computation, held decode) and its current place in time, per channel, until it is
//! *committed*; the resources' state as of the committed operations alone.
//!
//! What it guarantees:
//!
//! * A priority read (one issued while [`super::super::Emulator::prioritize_reads`] is on: the
//!   simulator's host reads) issued at `t` goes before every program, erase and non-priority
//!   read on its channel (its planes, LUNs and bus) that has not begun by `t`: those are placed
//!   again after it, in their order, each at the earliest time its own constraints and the
//!   resources allow. It goes after every operation that has begun by `t` (a program or erase
//!   in progress is not suspended: the paper's reads are "blocked by an in-progress flash write
//!   operation") and after the priority reads queued before it (reads are served in order).
//!   "Begun": a read's or erase's array phase, a program's transfer in.
//! * Operations that have begun by `t` are committed as placed and no longer move; so are the
//!   oldest beyond [`MAX_PENDING`] per channel.
//! * Operations moved later keep their issue's constraints; a moved operation of the current
//!   completion window (the current request) moves the window's completion with it. Completion
//!   times already reported for earlier windows are not revised by the emulator; a caller that
//!   needs them follows them in [`WindowEnds`] ([`super::super::Emulator::window_ends`]: the
//!   simulator's write buffer holds a write's pages until its programs really end).
//! * Only timing changes. The array (the data a read returns, the program order and NOP rules) is
//!   updated at the call, in issue order: a read returns the data of every operation issued
//!   before it, including a program it overtakes in time. That is what a device with a write
//!   buffer returns: the host wrote the data before it read it, and a read of a page whose
//!   program is still queued is served from the data waiting to be programmed; an erase it
//!   overtakes is of a block the FTL no longer maps (it was erased before the read was issued).
//! * With the option off (the default) nothing here runs and no figure moves; with it on, the
//!   idle-time filling before delayed operations (`backfill_read`) is not used: a priority read
//!   goes before such operations anyway.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use super::{Bus, TimingState};

/// Operations kept movable per channel; older ones are committed as placed.
pub const MAX_PENDING: usize = 4096;

/// Windows [`WindowEnds`] remembers; older ones are forgotten.
pub const MAX_WINDOWS: usize = 1 << 16;

/// The completion of each recent completion window (`Emulator::open_window`) as its operations
/// are placed now: with read priority they move later when reads go before them.
#[derive(Clone, Debug)]
pub struct WindowEnds {
    /// The id of `ends[0]`.
    base: u64,
    ends: VecDeque<u64>,
}

impl Default for WindowEnds {
    fn default() -> Self {
        Self::new()
    }
}

impl WindowEnds {
    /// Window 0 open at time 0.
    pub fn new() -> Self {
        WindowEnds { base: 0, ends: VecDeque::from([0]) }
    }

    /// The id of the window open now.
    pub fn current(&self) -> u64 {
        self.base + self.ends.len() as u64 - 1
    }

    /// Opens the next window at `start` (its completion if it has no operation).
    pub fn open(&mut self, start: u64) {
        self.ends.push_back(start);
        if self.ends.len() > MAX_WINDOWS {
            self.ends.pop_front();
            self.base += 1;
        }
    }

    /// An operation of window `w` now ends at `end`.
    pub fn note(&mut self, w: u64, end: u64) {
        if let Some(e) = w.checked_sub(self.base).and_then(|i| self.ends.get_mut(i as usize)) {
            *e = (*e).max(end);
        }
    }

    /// The latest end of window `w`'s operations as placed now; `None` if forgotten.
    pub fn end_of(&self, w: u64) -> Option<u64> {
        w.checked_sub(self.base).and_then(|i| self.ends.get(i as usize)).copied()
    }
}

/// The kind of a placed operation.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Read,
    Program,
    Erase,
}

/// One operation with the option on: its constraints and its current place.
#[derive(Clone, Debug)]
pub(super) struct Placed {
    kind: Kind,
    /// A priority read.
    prio: bool,
    lun: usize,
    /// (device-wide plane, bytes over the bus).
    ops: Vec<(usize, u64)>,
    /// Earliest start ("now" plus delay at issue, or a shaped not-before).
    ready: u64,
    /// Computation run once the planes are free, before the operation.
    compute: u64,
    /// Time a read keeps its planes after its transfer.
    hold: u64,
    /// The completion window it was issued in.
    window: u64,
    /// When it begins (see the module doc).
    began: u64,
    /// Per entry of `ops`: when its plane is free again.
    ends: Vec<u64>,
    /// Its completion.
    end: u64,
    /// Its completion when first placed (what the caller was told).
    first_end: u64,
    /// Its transfer's reservation on the bus, `[a, b)` (empty for an erase).
    bus: (u64, u64),
    /// Start to end, as `total_op_busy` counts it.
    busy: u64,
}

/// The option's state.
#[derive(Clone, Debug)]
pub(super) struct ReadPriority {
    /// Reads issued now have priority.
    pub(super) reads: bool,
    committed_plane: Vec<u64>,
    committed_lun: Vec<u64>,
    committed_bus: Vec<Bus>,
    /// Per channel, in queue order.
    pending: Vec<VecDeque<Placed>>,
    /// The current completion window.
    window: u64,
    /// Every window's completion as placed now (shared with the caller).
    pub(super) windows: Arc<Mutex<WindowEnds>>,
    /// Priority reads that went ahead of at least one queued operation.
    pub(super) prioritized: u64,
    /// Operations placed again behind a priority read.
    pub(super) overtaken: u64,
    /// Committed operations that end later than first placed, and the sum of those delays (ns).
    moved: (u64, u64),
}

impl ReadPriority {
    /// Starts from the resources' state in `t` (everything placed so far is committed).
    pub(super) fn new(t: &TimingState) -> Self {
        ReadPriority {
            reads: false,
            committed_plane: t.plane_busy.clone(),
            committed_lun: t.lun_busy.clone(),
            committed_bus: t.buses.clone(),
            pending: vec![VecDeque::new(); t.buses.len()],
            window: 0,
            windows: Arc::new(Mutex::new(WindowEnds::new())),
            prioritized: 0,
            overtaken: 0,
            moved: (0, 0),
        }
    }

    /// Operations that end later than first placed, and the sum of those delays (ns): those
    /// committed and those still movable, as placed now.
    pub(super) fn moved(&self) -> (u64, u64) {
        let pending = self.pending.iter().flatten().filter(|op| op.end > op.first_end);
        pending.fold(self.moved, |(n, ns), op| (n + 1, ns.saturating_add(op.end - op.first_end)))
    }

    pub(super) fn open_window(&mut self, start: u64) {
        self.window += 1;
        if let Ok(mut w) = self.windows.lock() {
            w.open(start);
        }
    }

    /// `op` is placed: its window's completion follows.
    fn note(&self, op: &Placed) {
        if let Ok(mut w) = self.windows.lock() {
            w.note(op.window, op.end);
        }
    }

    /// Makes `op`'s placement final.
    fn commit(&mut self, op: Placed, lun_queues: bool, channel: usize) {
        if op.end > op.first_end {
            self.moved.0 += 1;
            self.moved.1 = self.moved.1.saturating_add(op.end - op.first_end);
        }
        for (&(p, _), &e) in op.ops.iter().zip(&op.ends) {
            self.committed_plane[p] = self.committed_plane[p].max(e);
        }
        let l = &mut self.committed_lun[op.lun];
        *l = (*l).max(op.end);
        let (a, b) = op.bus;
        if b > a {
            let bus = &mut self.committed_bus[channel];
            if lun_queues {
                // Free there: every placement so far is consistent with the committed ones.
                let at = bus.reserve_gap(a, b - a);
                debug_assert_eq!(at, a);
            } else {
                bus.floor = bus.floor.max(b);
            }
        }
    }
}

impl TimingState {
    /// Issues an operation with read priority on (see the module doc).
    pub(super) fn issue_prioritized(&mut self, kind: Kind, lun: usize, ops: &[(usize, u64)]) {
        let ready = self.now.saturating_add(self.delay_now()).max(self.next_not_before);
        let compute = self.take_compute();
        let hold = if kind == Kind::Read { std::mem::take(&mut self.next_hold) } else { 0 };
        let array = match kind {
            Kind::Read => self.params.t_r_ns,
            Kind::Program => self.params.t_prog_ns,
            Kind::Erase => self.params.t_bers_ns,
        };
        self.charge_array(array, ops.len());
        let Some(mut rp) = self.read_priority.take() else { return };
        let op = Placed {
            kind,
            prio: kind == Kind::Read && rp.reads,
            lun,
            ops: ops.to_vec(),
            ready,
            compute,
            hold,
            window: rp.window,
            began: 0,
            ends: vec![0; ops.len()],
            end: 0,
            first_end: 0,
            bus: (0, 0),
            busy: 0,
        };
        let ch = self.channel(lun);
        if op.prio {
            self.place_first(&mut rp, ch, op);
        } else {
            let mut op = op;
            self.place(&mut op);
            op.first_end = op.end;
            rp.note(&op);
            self.total_op_busy = self.total_op_busy.saturating_add(op.busy);
            self.complete(op.end);
            rp.pending[ch].push_back(op);
        }
        let lq = self.lun_queues();
        while rp.pending[ch].len() > MAX_PENDING {
            if let Some(old) = rp.pending[ch].pop_front() {
                rp.commit(old, lq, ch);
            }
        }
        self.read_priority = Some(rp);
    }

    /// Places the priority read `new` on channel `ch` ahead of what has not begun by its
    /// earliest start, and those operations again behind it.
    fn place_first(&mut self, rp: &mut ReadPriority, ch: usize, new: Placed) {
        let t = new.ready;
        let lq = self.lun_queues();
        let (mut reads, mut others) = (Vec::new(), Vec::new());
        for op in std::mem::take(&mut rp.pending[ch]) {
            if op.began <= t {
                rp.commit(op, lq, ch);
            } else if op.prio {
                reads.push(op);
            } else {
                others.push(op);
            }
        }
        // The channel's resources as of the committed operations.
        let (luns, channels) = (self.lun_busy.len(), self.buses.len());
        let per_lun = self.plane_busy.len() / luns.max(1);
        for lun in (ch..luns).step_by(channels) {
            self.lun_busy[lun] = rp.committed_lun[lun];
            for p in lun * per_lun..(lun + 1) * per_lun {
                self.plane_busy[p] = rp.committed_plane[p];
            }
        }
        self.buses[ch] = rp.committed_bus[ch].clone();
        if !others.is_empty() {
            rp.prioritized += 1;
            rp.overtaken += others.len() as u64;
        }
        let n_reads = reads.len();
        for (i, mut op) in reads.into_iter().chain(std::iter::once(new)).chain(others).enumerate() {
            // Not begun by `t`: it cannot begin before `t` either.
            op.ready = op.ready.max(t);
            let old_busy = op.busy;
            let fresh = i == n_reads;
            self.place(&mut op);
            if fresh {
                op.first_end = op.end;
            }
            rp.note(&op);
            self.total_op_busy = self.total_op_busy.saturating_sub(old_busy).saturating_add(op.busy);
            if fresh {
                self.complete(op.end);
            } else if op.window == rp.window {
                self.window_end = self.window_end.max(op.end);
            }
            rp.pending[ch].push_back(op);
        }
    }

    /// Places `op` at the earliest time its constraints and the resources allow (the phases of
    /// the module doc of `timing.rs`, without idle-time filling).
    fn place(&mut self, op: &mut Placed) {
        let mut start = op
            .ops
            .iter()
            .map(|&(p, _)| self.plane_busy[p])
            .fold(op.ready, u64::max)
            .saturating_add(op.compute);
        if self.lun_queues() {
            start = start.max(self.lun_busy.get(op.lun).copied().unwrap_or(0));
        }
        let len = self.xfer_total(&op.ops);
        match op.kind {
            Kind::Read => {
                let array_end = start.saturating_add(self.params.t_r_ns);
                let b = self.reserve_bus(op.lun, array_end, len);
                let mut t = b;
                for (i, &(_, bytes)) in op.ops.iter().enumerate() {
                    t = t.saturating_add(self.params.xfer_ns(bytes));
                    op.ends[i] = t;
                }
                op.bus = (b, t);
                if op.hold > 0 {
                    t = t.saturating_add(op.hold);
                    op.ends.iter_mut().for_each(|e| *e = t);
                }
                op.began = start;
                op.end = t;
                op.busy = t - start;
            }
            Kind::Program => {
                let b = self.reserve_bus(op.lun, start, len);
                let end = b.saturating_add(len).saturating_add(self.params.t_prog_ns);
                op.ends.iter_mut().for_each(|e| *e = end);
                op.bus = (b, b.saturating_add(len));
                op.began = b;
                op.end = end;
                op.busy = end - start;
            }
            Kind::Erase => {
                let end = start.saturating_add(self.params.t_bers_ns);
                op.ends.iter_mut().for_each(|e| *e = end);
                op.bus = (start, start);
                op.began = start;
                op.end = end;
                op.busy = self.params.t_bers_ns;
            }
        }
        for (&(p, _), &e) in op.ops.iter().zip(&op.ends) {
            self.plane_busy[p] = e;
        }
        self.set_lun_busy(op.lun, op.end);
    }
}

#[cfg(test)]
mod tests {
    use super::super::super::{Emulator, EmulatorConfig};
    use super::super::{Scheduling, TimingParams};
    use nand_hal::{BlockId, NandFlash};

    /// tR 25 us, tPROG 200 us, tBERS 700 us, 20 ns per byte.
    const P: TimingParams = TimingParams::MT29F4G08;
    /// A 2048 + 64 byte page over the bus: 42.24 us.
    const X: u64 = 2112 * 20;
    /// One program: its transfer in, then tPROG.
    const PROG: u64 = X + 200_000;
    /// One read: tR, then its transfer out.
    const READ: u64 = 25_000 + X;

    /// One LUN of two planes (even blocks on plane 0), data stored, `scheduling`.
    fn emu(scheduling: Scheduling) -> Emulator {
        let timing = TimingParams { scheduling, ..P };
        Emulator::new(EmulatorConfig {
            timing,
            ..EmulatorConfig::new(super::super::tests::small_geometry(1))
        })
        .unwrap()
    }

    /// Page `k`'s contents: every byte `0x10 + k`.
    fn data(k: u8) -> Vec<u8> {
        vec![0x10 + k; 2048]
    }

    /// Four programs of block 0 (plane 0) issued at 0 occupy the plane for `PROG` each, back to
    /// back: program k transfers from k PROG and ends at (k + 1) PROG. A read of page 1 issued at
    /// 100 us, while program 0 runs and programs 1-3 are queued:
    /// - priority off: after all four, [4 PROG, 4 PROG + READ];
    /// - priority on: after program 0 (in progress, not suspended), [PROG, PROG + READ]; programs
    ///   1-3 follow it (transfer from PROG + READ), the last ending at 4 PROG + READ;
    /// - priority on but the read not a priority read (a GC read): as with priority off.
    ///
    /// In every case the read returns program 1's data: it was issued after program 1, and
    /// priority moves only its time.
    #[test]
    fn a_read_goes_before_queued_programs_only_with_priority() {
        let (mut rd, mut rs) = (vec![0u8; 2048], vec![0u8; 64]);
        for (priority, host_read) in [(false, false), (true, true), (true, false)] {
            let mut e = emu(Scheduling::PlaneQueues);
            let g = e.geometry();
            e.set_read_priority(priority);
            e.prioritize_reads(host_read);
            assert_eq!(e.read_priority(), priority);
            for k in 0..4u8 {
                e.program_page(g.page(BlockId(0), k as u32), &data(k), &[k; 64]).unwrap();
                assert_eq!(e.last_op_completion_ns(), (k as u64 + 1) * PROG);
            }
            e.set_now_ns(100_000);
            e.open_window();
            e.read_page(g.page(BlockId(0), 1), &mut rd, &mut rs).unwrap();
            let first = priority && host_read;
            let read_end = if first { PROG + READ } else { 4 * PROG + READ };
            assert_eq!(e.last_op_completion_ns(), read_end, "priority {priority}, host read {host_read}");
            assert_eq!(e.window_completion_ns(), read_end);
            // The data as of issue order: program 1's, although it now runs after the read.
            assert_eq!((rd[0], rd[2047], rs[0]), (0x11, 0x11, 1));
            // The programs moved behind the read; the plane is free at the same time either way.
            assert_eq!(e.plane_busy_until(0), Some(4 * PROG + READ));
            assert_eq!(e.read_priority_counts(), if first { (1, 3) } else { (0, 0) });
            // The programs' window (0) now ends later than it was reported; the read's is 1.
            assert_eq!(e.window_ends().is_some(), priority);
            if let Some(w) = e.window_ends() {
                let w = w.lock().unwrap();
                assert_eq!(w.current(), 1);
                assert_eq!(w.end_of(0), Some(if first { 4 * PROG + READ } else { 4 * PROG }));
                assert_eq!(w.end_of(1), Some(read_end));
            }
            // A program issued now (at 100 us) queues behind everything.
            e.program_page(g.page(BlockId(2), 0), &data(9), &[9; 64]).unwrap();
            assert_eq!(e.last_op_completion_ns(), 5 * PROG + READ);
            // A second read issued at the same time: with priority it follows the first read
            // (reads in order) and goes before programs 1-3 and the new one again.
            e.read_page(g.page(BlockId(0), 3), &mut rd, &mut rs).unwrap();
            let second_end = if first { PROG + 2 * READ } else { 5 * PROG + 2 * READ };
            assert_eq!(e.last_op_completion_ns(), second_end);
            assert_eq!((rd[0], rs[0]), (0x13, 3));
            assert_eq!(e.plane_busy_until(0), Some(5 * PROG + 2 * READ));
            assert_eq!(e.read_priority_counts(), if first { (2, 7) } else { (0, 0) });
        }
    }

    /// An erase in progress is not suspended; a program queued behind it (issued in the same
    /// window as the read) is moved behind the read, and the window's completion moves with it.
    /// Erase block 1 at 0 on plane 1: [0, 700 us]; program block 3 page 0 (plane 1) queued:
    /// transfer from 700 us, end 700 us + PROG; read of block 1 page 0 issued at 100 us:
    /// - off: [700 us + PROG, 700 us + PROG + READ];
    /// - on: [700 us, 700 us + READ], the program then ends at 700 us + READ + PROG.
    ///
    /// With LUN queues (one command at a time per LUN) the same holds: nothing else is queued.
    #[test]
    fn an_erase_in_progress_is_not_suspended_and_moved_work_moves_its_window() {
        let (mut rd, mut rs) = (vec![0u8; 2048], vec![0u8; 64]);
        for scheduling in [Scheduling::PlaneQueues, Scheduling::LunQueues] {
            for priority in [false, true] {
                let mut e = emu(scheduling);
                let g = e.geometry();
                e.set_read_priority(priority);
                e.prioritize_reads(true);
                e.erase_block(BlockId(1)).unwrap();
                e.open_window();
                e.program_page(g.page(BlockId(3), 0), &data(0), &[0; 64]).unwrap();
                assert_eq!(e.window_completion_ns(), 700_000 + PROG);
                e.set_now_ns(100_000);
                e.read_page(g.page(BlockId(1), 0), &mut rd, &mut rs).unwrap();
                // An erased page reads as 0xFF whatever the order in time.
                assert_eq!((rd[0], rs[0]), (0xFF, 0xFF));
                let (read_end, prog_end) = if priority {
                    (700_000 + READ, 700_000 + READ + PROG)
                } else {
                    (700_000 + PROG + READ, 700_000 + PROG)
                };
                assert_eq!(e.last_op_completion_ns(), read_end, "{scheduling:?} priority {priority}");
                assert_eq!(e.window_completion_ns(), read_end.max(prog_end));
                assert_eq!(e.plane_busy_until(1), Some(read_end.max(prog_end)));
                assert_eq!(e.total_op_busy_ns(), 700_000 + PROG + READ);
            }
        }
    }

    /// A read on plane 0 goes before a program queued on plane 1 only where they share a
    /// resource: with plane queues the planes are independent but the bus is shared, so the
    /// read's transfer goes before the queued program's transfer; a program already
    /// transferring is not interrupted.
    #[test]
    fn priority_covers_the_bus_shared_by_sibling_planes() {
        let (mut rd, mut rs) = (vec![0u8; 2048], vec![0u8; 64]);
        let mut e = emu(Scheduling::PlaneQueues);
        let g = e.geometry();
        e.set_read_priority(true);
        e.prioritize_reads(true);
        // Plane 1: program A [0, PROG], program B queued: transfer [PROG, PROG + X].
        e.program_page(g.page(BlockId(1), 0), &data(0), &[0; 64]).unwrap();
        e.program_page(g.page(BlockId(1), 1), &data(1), &[1; 64]).unwrap();
        assert_eq!(e.last_op_completion_ns(), 2 * PROG);
        // Plane 0 idle; a read issued at PROG - 25 us + 1 ns: its tR ends 1 ns after B's
        // transfer was to start. B has not begun, so the read's transfer goes first:
        // tR [PROG - 25 us + 1, PROG + 1], transfer [PROG + 1, PROG + 1 + X]; B's transfer then
        // [PROG + 1 + X, PROG + 1 + 2X], B ends at PROG + 1 + X + PROG.
        let t = PROG - 25_000 + 1;
        e.set_now_ns(t);
        e.read_page(g.page(BlockId(0), 0), &mut rd, &mut rs).unwrap();
        assert_eq!(e.last_op_completion_ns(), t + READ);
        assert_eq!(e.plane_busy_until(1), Some(2 * PROG + 1 + X));
        assert_eq!(e.bus_busy_until(0), Some(PROG + 1 + 2 * X));
        // A read issued as B's transfer begins: B is not interrupted, so the read's tR
        // [t2, t2 + 25 us] ends before B's transfer [t2, t2 + X] and its transfer waits:
        // [t2 + X, t2 + 2X].
        let t2 = PROG + 1 + X;
        e.set_now_ns(t2);
        e.read_page(g.page(BlockId(0), 1), &mut rd, &mut rs).unwrap();
        assert_eq!(e.last_op_completion_ns(), t2 + 2 * X);
        assert_eq!(e.read_priority_counts(), (1, 1));
    }
}
