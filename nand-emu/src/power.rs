//! Power-cut injection.
//!
//! Every device operation that passes the host-side argument checks (address range, buffer
//! sizes, multi-plane shape) gets the next index of a monotonically increasing counter,
//! [`Emulator::ops_issued`]: read, program, erase, `is_bad` and `mark_bad` count one each, a
//! multi-plane call one per page or block, whether the operation then succeeds or not and
//! whether or not the device has power. Tests enumerate cut points by running a workload once,
//! reading the counter, and replaying it with [`Emulator::schedule_power_cut`] at each index.
//!
//! Guarantees:
//! - The operation whose index was scheduled is interrupted and returns
//!   [`EmuError::PowerLoss`]: a program that the rules would have accepted leaves a torn page
//!   (each bit it was clearing cleared with probability `torn_fraction`) and counts against the
//!   page's NOP and the block's program order; an erase leaves the block partly erased (each 0
//!   bit set with probability `partial_erase_fraction`), counts as an erase cycle and resets the
//!   block's NOP and order state; a read, `is_bad` or `mark_bad` changes nothing. A factory-bad
//!   block is never changed.
//! - From then on every operation returns [`EmuError::PowerLoss`] and changes nothing until
//!   [`Emulator::restore_power`].
//! - A multi-plane call stops at its first failing operation (a cut one included): the
//!   operations before it complete, those after it are neither issued nor counted. That is
//!   [`MultiPlaneCut::CutOpOnly`], the default. With [`MultiPlaneCut::WholeCall`]
//!   (`EmulatorConfig::multi_plane_cut`) a cut on any operation of a multi-plane program or
//!   erase tears *every* operation of the call (each page torn, each block partly erased, as a
//!   cut single operation is; those the rules would refuse and factory-bad blocks unchanged), as
//!   on a chip that programs or erases the planes at once: the call returns
//!   `(0, PowerLoss)`. Its operations are numbered as with the default up to the cut one (so a
//!   workload's cut points are the same under both), the ones after it are not numbered.
//!   Multi-plane reads are the same under both.
//! - Tearing draws from its own seeded stream: the same seed and operations give the same torn
//!   bits.

use rand::Rng;
use rand_chacha::ChaCha8Rng;

use super::faults::{stream_rng, STREAM_POWER};
use super::{EmuError, Emulator};

/// No cut scheduled.
const NO_CUT: u64 = u64::MAX;

/// What a power cut during a multi-plane program or erase leaves (see the module doc).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub enum MultiPlaneCut {
    /// The operations before the cut one complete, the cut one is torn (partly erased), the
    /// rest are not issued: a chip that works the planes of a call one after another.
    #[default]
    CutOpOnly,
    /// Every operation of the call is torn (partly erased), wherever in the call the cut falls:
    /// a chip that programs (erases) the planes of a call at once.
    WholeCall,
}

/// Power state and the operation counter.
#[derive(Clone, Debug)]
pub(crate) struct PowerState {
    pub(crate) powered: bool,
    /// Index of the operation to interrupt, or [`NO_CUT`].
    cut_at: u64,
    pub(crate) ops_issued: u64,
    pub(crate) rng: ChaCha8Rng,
}

impl PowerState {
    pub(crate) fn new(seed: u64) -> Self {
        PowerState { powered: true, cut_at: NO_CUT, ops_issued: 0, rng: stream_rng(seed, STREAM_POWER) }
    }
}

impl Emulator {
    /// Numbers a device operation. `Ok(true)`: this operation is the scheduled cut (power is now
    /// off and the caller must interrupt it); `Ok(false)`: proceed; `Err`: no power.
    pub(super) fn begin_op(&mut self) -> Result<bool, EmuError> {
        let index = self.power.ops_issued;
        self.power.ops_issued += 1;
        let cut = index == self.power.cut_at;
        if cut {
            self.power.cut_at = NO_CUT;
        }
        if !self.power.powered {
            // A cut scheduled on a device that is already off changes nothing.
            return Err(EmuError::PowerLoss);
        }
        if cut {
            self.power.powered = false;
            self.counters.power_cuts += 1;
            return Ok(true);
        }
        Ok(false)
    }

    /// Whether a multi-plane program or erase of `n` operations (argument checks passed) is cut
    /// as a whole ([`MultiPlaneCut::WholeCall`] and the scheduled cut on one of its operations).
    /// If so, numbers its operations up to the cut one and cuts the power; the caller then tears
    /// every operation of the call and returns `(0, PowerLoss)`.
    pub(super) fn whole_call_cut(&mut self, n: usize) -> bool {
        let p = &self.power;
        if self.config.multi_plane_cut != MultiPlaneCut::WholeCall || !p.powered || p.cut_at == NO_CUT {
            return false;
        }
        let Some(at) = p.cut_at.checked_sub(p.ops_issued).filter(|&at| at < n as u64) else {
            return false;
        };
        for _ in 0..at {
            // Powered and not the cut one: numbered, nothing else.
            let _ = self.begin_op();
        }
        // The cut one.
        matches!(self.begin_op(), Ok(true))
    }

    /// Interrupts the operation with index `ops_issued() + after_ops` (0 = the very next one).
    /// Replaces an earlier schedule. An index that would pass `u64::MAX - 1` is never reached.
    pub fn schedule_power_cut(&mut self, after_ops: u64) {
        self.power.cut_at = self.power.ops_issued.saturating_add(after_ops);
    }

    /// Schedules a cut at a random one of the next `max_ops` operations (`max_ops` 0 counts as 1)
    /// and returns its offset, as [`Emulator::schedule_power_cut`] would take it.
    pub fn schedule_random_power_cut(&mut self, max_ops: u64) -> u64 {
        let after = self.power.rng.random_range(0..max_ops.max(1));
        self.schedule_power_cut(after);
        after
    }

    /// Cancels a scheduled cut.
    pub fn cancel_power_cut(&mut self) {
        self.power.cut_at = NO_CUT;
    }

    /// The scheduled cut as an offset from now, if any.
    pub fn pending_power_cut(&self) -> Option<u64> {
        (self.power.cut_at != NO_CUT).then(|| self.power.cut_at.saturating_sub(self.power.ops_issued))
    }

    /// Cuts power now, between operations: nothing is torn. Cancels a scheduled cut.
    pub fn power_cut_now(&mut self) {
        if self.power.powered {
            self.counters.power_cuts += 1;
        }
        self.power.powered = false;
        self.power.cut_at = NO_CUT;
    }

    /// Powers the device up again. The array keeps whatever the cut left.
    pub fn restore_power(&mut self) {
        self.power.powered = true;
    }

    /// Whether the device has power.
    pub fn is_powered(&self) -> bool {
        self.power.powered
    }

    /// Device operations issued so far (see the module documentation).
    pub fn ops_issued(&self) -> u64 {
        self.power.ops_issued
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::small_config;
    use super::super::{EmulatorConfig, FaultConfig};
    use super::*;
    use nand_hal::{BlockId, Error as _, ErrorKind, NandFlash, ProgramOp, ReadOp};

    fn ones(bytes: &[u8]) -> u32 {
        bytes.iter().map(|b| b.count_ones()).sum()
    }

    /// Programs 0x00 over 256 erased data bytes with a cut on that program; returns the page.
    fn torn(seed: u64, torn_fraction: f64) -> Vec<u8> {
        let faults = FaultConfig { torn_fraction, ..FaultConfig::default() };
        let mut e = Emulator::new(EmulatorConfig { seed, faults, ..small_config() }).unwrap();
        let p = e.geometry().page(BlockId(1), 0);
        e.schedule_power_cut(0);
        assert_eq!(e.program_page(p, &[0x00; 256], &[]).unwrap_err(), EmuError::PowerLoss);
        assert!(!e.is_powered());
        assert_eq!(e.program_count(p), Some(1));
        e.peek_page(p).unwrap().0.to_vec()
    }

    #[test]
    fn cut_program_leaves_a_torn_page_deterministically() {
        let page = torn(1, 0.5);
        let set = ones(&page[..256]);
        // 2048 bits each cleared with p = 1/2: about 1024 remain set, sd ~ 23.
        assert!((900..1150).contains(&set), "{set}");
        assert!(page[256..].iter().all(|&b| b == 0xFF), "bytes not supplied are untouched");
        assert_eq!(torn(1, 0.5), page);
        assert_ne!(torn(2, 0.5), page);
        assert_eq!(ones(&torn(1, 1.0)[..256]), 0);
        assert_eq!(ones(&torn(1, 0.0)[..256]), 2048);
        let mostly = ones(&torn(1, 0.9)[..256]);
        assert!((120..300).contains(&mostly), "{mostly}");
    }

    #[test]
    fn torn_page_only_clears_bits_the_program_was_clearing() {
        let mut e = Emulator::new(small_config()).unwrap();
        let g = e.geometry();
        let p = g.page(BlockId(0), 0);
        e.program_page(p, &[0xF0; 64], &[]).unwrap();
        e.schedule_power_cut(0);
        assert!(e.program_page(p, &[0x3C; 64], &[]).is_err());
        let data = &e.peek_page(p).unwrap().0[..64];
        // Old 0xF0, new 0x3C: bits 0x30 stay, 0x0F stay 0, only 0xC0 may be cleared.
        assert!(data.iter().all(|&b| b & 0x3F == 0x30));
        let cleared = 128 - data.iter().map(|b| (b & 0xC0).count_ones()).sum::<u32>();
        assert!(cleared > 20 && cleared < 108, "{cleared}");
        assert_eq!(e.program_count(p), Some(2));
    }

    #[test]
    fn cut_erase_leaves_the_block_partly_erased() {
        let mut e = Emulator::new(EmulatorConfig { seed: 4, ..small_config() }).unwrap();
        let g = e.geometry();
        let zeros = vec![0u8; g.data_bytes as usize];
        for p in 0..g.pages_per_block {
            e.program_page(g.page(BlockId(2), p), &zeros, &[0; 4]).unwrap();
        }
        e.schedule_power_cut(0);
        assert_eq!(e.erase_block(BlockId(2)).unwrap_err().kind(), ErrorKind::PowerLoss);
        let mut set = 0u64;
        for p in 0..g.pages_per_block {
            let (data, spare) = e.peek_page(g.page(BlockId(2), p)).unwrap();
            set += u64::from(ones(data));
            assert_eq!(spare[4..].iter().filter(|&&b| b != 0xFF).count(), 0);
            assert_eq!(e.program_count(g.page(BlockId(2), p)), Some(0));
        }
        let total = u64::from(g.data_bytes * g.pages_per_block * 8);
        assert!(set > total * 2 / 5 && set < total * 3 / 5, "{set} of {total}");
        assert_eq!(e.erase_count(BlockId(2)), Some(1));
    }

    #[test]
    fn every_operation_is_refused_until_restore() {
        let mut e = Emulator::new(small_config()).unwrap();
        let g = e.geometry();
        let p = g.page(BlockId(0), 0);
        e.program_page(p, &[0x11], &[]).unwrap();
        e.schedule_power_cut(1);
        assert_eq!(e.pending_power_cut(), Some(1));
        let mut buf = [0u8; 1];
        e.read_page(p, &mut buf, &mut []).unwrap();
        assert_eq!(buf, [0x11]);
        // The cut read changes nothing and returns PowerLoss.
        buf = [0xAB];
        assert_eq!(e.read_page(p, &mut buf, &mut []).unwrap_err(), EmuError::PowerLoss);
        let counters = *e.counters();
        let loss = Some(ErrorKind::PowerLoss);
        assert_eq!(e.read_page(p, &mut buf, &mut []).err().map(|e| e.kind()), loss);
        assert_eq!(e.program_page(g.page(BlockId(0), 1), &[0], &[]).err().map(|e| e.kind()), loss);
        assert_eq!(e.erase_block(BlockId(0)).err().map(|e| e.kind()), loss);
        assert_eq!(e.is_bad(BlockId(0)).err().map(|e| e.kind()), loss);
        assert_eq!(e.mark_bad(BlockId(0)).err().map(|e| e.kind()), loss);
        assert_eq!(e.erase_multi(&[BlockId(0), BlockId(1)]).unwrap_err(), (0, EmuError::PowerLoss));
        assert_eq!(e.counters().reads, counters.reads);
        assert_eq!(e.peek_page(p).unwrap().0[..2], [0x11, 0xFF]);
        assert_eq!(e.program_count(g.page(BlockId(0), 1)), Some(0));
        assert_eq!(e.counters().power_cuts, 1);
        assert_eq!(e.ops_issued(), 9, "the refused multi-plane call stopped at its first op");
        e.restore_power();
        assert!(e.is_powered());
        e.read_page(p, &mut buf, &mut []).unwrap();
        assert_eq!(buf, [0x11]);
        assert!(!e.is_bad(BlockId(0)).unwrap());
    }

    #[test]
    fn multi_plane_operations_count_one_op_per_page() {
        let mut e = Emulator::new(small_config()).unwrap();
        let g = e.geometry();
        let (a, b) = (g.page(BlockId(0), 0), g.page(BlockId(1), 0));
        let ops = [
            ProgramOp { page: a, data: &[0x00; 8], spare: &[] },
            ProgramOp { page: b, data: &[0x00; 8], spare: &[] },
        ];
        e.schedule_power_cut(1);
        assert_eq!(e.program_multi(&ops).unwrap_err(), (1, EmuError::PowerLoss));
        assert_eq!(e.ops_issued(), 2);
        assert_eq!(e.peek_page(a).unwrap().0[..8], [0; 8], "the first op completed");
        assert_eq!(e.program_count(b), Some(1), "the second was interrupted");
        e.restore_power();
        let (mut da, mut db) = ([0u8; 8], [0u8; 8]);
        let mut reads = [
            ReadOp { page: a, data: &mut da, spare: &mut [] },
            ReadOp { page: b, data: &mut db, spare: &mut [] },
        ];
        e.read_multi(&mut reads).unwrap();
        assert_eq!(e.ops_issued(), 4);
        // An op that fails argument checks is not issued.
        assert!(e.read_page(nand_hal::PageId(u32::MAX), &mut [], &mut []).is_err());
        assert_eq!(e.ops_issued(), 4);
    }

    /// One multi-plane program of 0x00 over 256 data and 4 spare bytes at page 1 of blocks 0 and
    /// 1 (planes 0 and 1; page 2 of block 1 already programmed when `refused`, so the order rule
    /// refuses that op), cut on its operation `at`. Returns the call's result, the emulator and
    /// the set data bits of each page.
    fn cut_pair(
        mode: MultiPlaneCut,
        at: u64,
        refused: bool,
    ) -> (Result<(), (usize, EmuError)>, Emulator, [u32; 2]) {
        let mut e =
            Emulator::new(EmulatorConfig { multi_plane_cut: mode, seed: 3, ..small_config() }).unwrap();
        let g = e.geometry();
        let pages = [g.page(BlockId(0), 1), g.page(BlockId(1), 1)];
        if refused {
            e.program_page(g.page(BlockId(1), 2), &[0x55; 4], &[]).unwrap();
        }
        let ops = pages.map(|page| ProgramOp { page, data: &[0x00; 256], spare: &[0x00; 4] });
        e.schedule_power_cut(at);
        let r = e.program_multi(&ops);
        let set = pages.map(|p| ones(&e.peek_page(p).unwrap().0[..256]));
        (r, e, set)
    }

    /// 2048 bits each cleared with p = 1/2: about 1024 remain set (sd ~ 23).
    fn half(set: u32) -> bool {
        (900..1150).contains(&set)
    }

    #[test]
    fn whole_call_cut_tears_every_page_of_a_multi_plane_program() {
        for at in 0..2 {
            let (r, e, set) = cut_pair(MultiPlaneCut::WholeCall, at, false);
            assert_eq!(r, Err((0, EmuError::PowerLoss)), "cut on op {at}");
            assert!(!e.is_powered());
            assert_eq!(e.ops_issued(), at + 1, "numbered up to the cut op");
            assert_eq!((e.counters().power_cuts, e.counters().whole_call_cut_programs), (1, 1));
            assert!(set.iter().all(|&s| half(s)), "cut on op {at}: {set:?}");
            let g = e.geometry();
            for b in 0..2 {
                let p = g.page(BlockId(b), 1);
                assert_eq!(e.program_count(p), Some(1), "each torn page counts against NOP");
                let spare = ones(&e.peek_page(p).unwrap().1[..4]);
                assert!(spare > 0 && spare < 32, "the spare is torn too: {spare}");
            }
            // Deterministic: the same seed and operations tear the same bits.
            assert_eq!(cut_pair(MultiPlaneCut::WholeCall, at, false).2, set);
        }
        // The default: the op before the cut one completed, the ones after it untouched.
        let (r, e, set) = cut_pair(MultiPlaneCut::CutOpOnly, 1, false);
        assert_eq!(r, Err((1, EmuError::PowerLoss)));
        assert!(set[0] == 0 && half(set[1]), "{set:?}");
        assert_eq!(e.ops_issued(), 2);
        assert_eq!(e.counters().whole_call_cut_programs, 0);
        let (r, e, set) = cut_pair(MultiPlaneCut::CutOpOnly, 0, false);
        assert_eq!(r, Err((0, EmuError::PowerLoss)));
        assert!(half(set[0]) && set[1] == 2048, "{set:?}");
        assert_eq!(e.program_count(e.geometry().page(BlockId(1), 1)), Some(0));
        // A cut after the call: it completes under both.
        for mode in [MultiPlaneCut::WholeCall, MultiPlaneCut::CutOpOnly] {
            let (r, mut e, set) = cut_pair(mode, 2, false);
            assert_eq!((r, set), (Ok(()), [0, 0]));
            assert!(e.is_powered());
            assert_eq!(e.erase_block(BlockId(3)).unwrap_err(), EmuError::PowerLoss, "the next op is cut");
        }
    }

    #[test]
    fn whole_call_cut_leaves_refused_ops_and_unpowered_calls_alone() {
        // The order rule refuses block 1's op: only block 0's page is torn.
        let (r, e, set) = cut_pair(MultiPlaneCut::WholeCall, 1, true);
        assert_eq!(r, Err((0, EmuError::PowerLoss)));
        assert!(half(set[0]) && set[1] == 2048, "{set:?}");
        assert_eq!(e.program_count(e.geometry().page(BlockId(1), 1)), Some(0));
        // No power: the call changes nothing.
        let mut e =
            Emulator::new(EmulatorConfig { multi_plane_cut: MultiPlaneCut::WholeCall, ..small_config() })
                .unwrap();
        let g = e.geometry();
        e.power_cut_now();
        e.schedule_power_cut(0);
        let ops = [0, 1].map(|b| ProgramOp { page: g.page(BlockId(b), 0), data: &[0x00; 8], spare: &[] });
        assert_eq!(e.program_multi(&ops).unwrap_err(), (0, EmuError::PowerLoss));
        assert!((0..2).all(|b| e.program_count(g.page(BlockId(b), 0)) == Some(0)));
        assert_eq!(e.counters().power_cuts, 1);
    }

    #[test]
    fn whole_call_cut_partly_erases_every_block_of_a_multi_plane_erase() {
        for (mode, at) in
            [(MultiPlaneCut::WholeCall, 0), (MultiPlaneCut::WholeCall, 1), (MultiPlaneCut::CutOpOnly, 1)]
        {
            let mut e =
                Emulator::new(EmulatorConfig { multi_plane_cut: mode, seed: 4, ..small_config() }).unwrap();
            let g = e.geometry();
            let zeros = vec![0u8; g.data_bytes as usize];
            for b in 0..2 {
                for p in 0..g.pages_per_block {
                    e.program_page(g.page(BlockId(b), p), &zeros, &[0; 4]).unwrap();
                }
            }
            e.schedule_power_cut(at);
            let r = e.erase_multi(&[BlockId(0), BlockId(1)]);
            let total = u64::from(g.data_bytes * g.pages_per_block * 8);
            let set: Vec<u64> = (0..2)
                .map(|b| {
                    (0..g.pages_per_block)
                        .map(|p| u64::from(ones(e.peek_page(g.page(BlockId(b), p)).unwrap().0)))
                        .sum()
                })
                .collect();
            let partly = |s: u64| s > total * 2 / 5 && s < total * 3 / 5;
            if mode == MultiPlaneCut::WholeCall {
                assert_eq!(r, Err((0, EmuError::PowerLoss)));
                assert!(set.iter().all(|&s| partly(s)), "{set:?} of {total}");
                assert_eq!((e.erase_count(BlockId(0)), e.erase_count(BlockId(1))), (Some(1), Some(1)));
                assert_eq!(e.ops_issued(), 2 * g.pages_per_block as u64 + at + 1);
                assert_eq!(e.counters().whole_call_cut_erases, 1);
            } else {
                assert_eq!(r, Err((1, EmuError::PowerLoss)));
                assert!(set[0] == total && partly(set[1]), "{set:?} of {total}");
            }
        }
    }

    #[test]
    fn scheduled_index_and_cuts_replay() {
        // Run a workload once, then cut at every index: the op with that index is interrupted.
        fn workload(e: &mut Emulator) -> Vec<Option<ErrorKind>> {
            let g = e.geometry();
            let mut out = Vec::new();
            for i in 0..3 {
                out.push(e.program_page(g.page(BlockId(0), i), &[0; 4], &[]).err().map(|e| e.kind()));
            }
            out.push(e.erase_block(BlockId(1)).err().map(|e| e.kind()));
            out.push(e.is_bad(BlockId(1)).err().map(|e| e.kind()));
            out
        }
        let mut clean = Emulator::new(small_config()).unwrap();
        assert!(workload(&mut clean).iter().all(Option::is_none));
        let n = clean.ops_issued();
        assert_eq!(n, 5);
        for cut in 0..n {
            let mut e = Emulator::new(small_config()).unwrap();
            e.schedule_power_cut(cut);
            let res = workload(&mut e);
            for (i, r) in res.iter().enumerate() {
                let expect = if (i as u64) < cut { None } else { Some(ErrorKind::PowerLoss) };
                assert_eq!(*r, expect, "cut {cut} op {i}");
            }
        }
    }

    #[test]
    fn random_cut_and_immediate_cut() {
        let mut e = Emulator::new(small_config()).unwrap();
        let at = e.schedule_random_power_cut(10);
        assert!(at < 10);
        assert_eq!(e.pending_power_cut(), Some(at));
        let mut f = Emulator::new(small_config()).unwrap();
        assert_eq!(f.schedule_random_power_cut(10), at, "seeded");
        for _ in 0..at {
            e.erase_block(BlockId(0)).unwrap();
        }
        assert!(e.erase_block(BlockId(0)).is_err());
        assert!(!e.is_powered());
        e.restore_power();
        e.cancel_power_cut();
        e.schedule_power_cut(5);
        e.cancel_power_cut();
        assert_eq!(e.pending_power_cut(), None);
        for _ in 0..10 {
            e.erase_block(BlockId(0)).unwrap();
        }
        e.power_cut_now();
        assert!(!e.is_powered());
        assert_eq!(e.erase_block(BlockId(0)).unwrap_err(), EmuError::PowerLoss);
        assert_eq!(e.counters().power_cuts, 2);
    }

    #[test]
    fn a_cut_scheduled_while_off_expires_harmlessly() {
        let mut e = Emulator::new(small_config()).unwrap();
        e.power_cut_now();
        e.schedule_power_cut(0);
        assert_eq!(e.erase_block(BlockId(0)).unwrap_err(), EmuError::PowerLoss);
        assert_eq!(e.pending_power_cut(), None);
        e.restore_power();
        e.erase_block(BlockId(0)).unwrap();
        assert_eq!(e.counters().power_cuts, 1);
        // Far-away and saturating schedules.
        e.schedule_power_cut(u64::MAX);
        assert_eq!(e.pending_power_cut(), None, "u64::MAX is never reached");
        e.set_now_ns(u64::MAX - 5);
        e.erase_block(BlockId(0)).unwrap();
        assert_eq!(e.last_op_completion_ns(), u64::MAX, "the clock saturates");
    }

    #[test]
    fn interrupted_program_that_breaks_a_rule_changes_nothing() {
        let mut e = Emulator::new(small_config()).unwrap();
        let g = e.geometry();
        e.program_page(g.page(BlockId(0), 3), &[0], &[]).unwrap();
        e.schedule_power_cut(0);
        let early = g.page(BlockId(0), 1);
        assert_eq!(e.program_page(early, &[0; 16], &[]).unwrap_err(), EmuError::PowerLoss);
        assert_eq!(e.program_count(early), Some(0));
        assert!(e.peek_page(early).unwrap().0.iter().all(|&b| b == 0xFF));
    }
}
