//! The NAND a simulated FTL sits on: the emulator itself, or the emulator behind FlexECC's
//! bit-error and decode model ([`NoisyNand`]). The run loop ([`super::pipeline`]) reaches the
//! emulator's clock and counters through [`SimNand`], whichever it is, and FlexECC's GC-move
//! accounting through the trait's hooks (no-ops on the bare emulator).

use nand_hal::NandFlash;

use super::dedup::IdleClock;
use super::ecc_model::{GcMoveStats, NoisyNand};
use crate::emulator::Emulator;

/// A device a simulation runs its FTL on.
pub trait SimNand: NandFlash {
    /// The emulator underneath (clock, timing, erase counts).
    fn emu(&self) -> &Emulator;
    /// The emulator underneath, mutable.
    fn emu_mut(&mut self) -> &mut Emulator;
    /// Tracks GC moves (reads followed by their programs) from now (`true`) or stops.
    fn set_track_moves(&mut self, _on: bool) {}
    /// Decode time already on the device's timeline since the last call (see
    /// [`NoisyNand::take_chained_decode_ns`]).
    fn take_chained_decode_ns(&mut self) -> u64 {
        0
    }
    /// GC moves charged so far.
    fn move_stats(&self) -> GcMoveStats {
        GcMoveStats::default()
    }
}

impl SimNand for &mut Emulator {
    fn emu(&self) -> &Emulator {
        self
    }
    fn emu_mut(&mut self) -> &mut Emulator {
        self
    }
}

/// Idle-time work (deduplication's out-of-line passes) runs on the emulator underneath.
impl<T: SimNand> IdleClock for T {
    fn start_idle_work(&mut self, t: u64) {
        let emu = self.emu_mut();
        emu.set_now_ns(t);
        emu.open_window();
    }
    fn idle_work_done(&self) -> u64 {
        self.emu().window_completion_ns()
    }
    fn run_page_ns(&self) -> (u64, u64) {
        let emu = self.emu();
        let (t, g) = (emu.timing_params(), emu.geometry());
        let planes = (g.total_planes() as u64).max(1);
        let xfer = t.xfer_ns(g.data_bytes as u64);
        ((t.t_prog_ns + xfer).div_ceil(planes), (t.t_r_ns + xfer).div_ceil(planes))
    }
}

impl SimNand for NoisyNand<'_> {
    fn emu(&self) -> &Emulator {
        self.emu
    }
    fn emu_mut(&mut self) -> &mut Emulator {
        self.emu
    }
    fn set_track_moves(&mut self, on: bool) {
        self.track_moves = on;
    }
    fn take_chained_decode_ns(&mut self) -> u64 {
        NoisyNand::take_chained_decode_ns(self)
    }
    fn move_stats(&self) -> GcMoveStats {
        NoisyNand::move_stats(self)
    }
}
