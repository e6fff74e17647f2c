//! When each page program completes: a [`SimNand`] wrapper that, while logging is on, records
//! every page a program (single or multi-plane) writes with the emulator's completion time of
//! that program, and the completion of every other operation (reads, erases, copy-backs) in
//! issue order. The run loop's batching of queued writes (`--batch`, see `pipeline`) uses it
//! to complete each request of one `Ftl::write_many` when its own pages are programmed. Off
//! (the default), it only forwards.

use nand_hal::copy_back::{CopyBackAction, CopyBackCaps, CopyBackError, CopyBackOp};
use nand_hal::{BlockId, ErrorType, Geometry, NandFlash, PageId, ProgramOp, ReadOp};

use super::ecc_model::GcMoveStats;
use super::nand::SimNand;
use crate::emulator::Emulator;

/// A device whose page programs can be logged (see the module doc).
pub struct ProgramLog<N> {
    inner: N,
    /// (page programmed or `None` for another operation, completion ns) of the operations
    /// since logging started, in issue order; `None`: not logging.
    log: Option<Vec<(Option<PageId>, u64)>>,
}

impl<N: SimNand> ProgramLog<N> {
    /// `inner`, not logging.
    pub fn new(inner: N) -> Self {
        ProgramLog { inner, log: None }
    }

    /// Starts logging afresh (an empty log).
    pub fn start(&mut self) {
        let mut v = self.log.take().unwrap_or_default();
        v.clear();
        self.log = Some(v);
    }

    /// Stops logging and returns what was logged.
    pub fn stop(&mut self) -> Vec<(Option<PageId>, u64)> {
        self.log.take().unwrap_or_default()
    }

    fn note(&mut self, pages: impl Iterator<Item = PageId>) {
        if let Some(log) = self.log.as_mut() {
            let t = self.inner.emu().last_op_completion_ns();
            log.extend(pages.map(|p| (Some(p), t)));
        }
    }

    fn note_other(&mut self) {
        if let Some(log) = self.log.as_mut() {
            log.push((None, self.inner.emu().last_op_completion_ns()));
        }
    }
}

impl<N: ErrorType> ErrorType for ProgramLog<N> {
    type Error = N::Error;
}

impl<N: SimNand> NandFlash for ProgramLog<N> {
    fn geometry(&self) -> Geometry {
        self.inner.geometry()
    }
    fn read_page(&mut self, page: PageId, data: &mut [u8], spare: &mut [u8]) -> Result<(), Self::Error> {
        let r = self.inner.read_page(page, data, spare);
        self.note_other();
        r
    }
    fn program_page(&mut self, page: PageId, data: &[u8], spare: &[u8]) -> Result<(), Self::Error> {
        let r = self.inner.program_page(page, data, spare);
        if r.is_ok() {
            self.note(core::iter::once(page));
        }
        r
    }
    fn erase_block(&mut self, block: BlockId) -> Result<(), Self::Error> {
        let r = self.inner.erase_block(block);
        self.note_other();
        r
    }
    fn is_bad(&mut self, block: BlockId) -> Result<bool, Self::Error> {
        self.inner.is_bad(block)
    }
    fn mark_bad(&mut self, block: BlockId) -> Result<(), Self::Error> {
        self.inner.mark_bad(block)
    }
    fn read_spare(&mut self, page: PageId, spare: &mut [u8]) -> Result<(), Self::Error> {
        let r = self.inner.read_spare(page, spare);
        self.note_other();
        r
    }
    fn read_multi(&mut self, ops: &mut [ReadOp<'_>]) -> Result<(), (usize, Self::Error)> {
        let r = self.inner.read_multi(ops);
        self.note_other();
        r
    }
    fn program_multi(&mut self, ops: &[ProgramOp<'_>]) -> Result<(), (usize, Self::Error)> {
        let r = self.inner.program_multi(ops);
        let done = match &r {
            Ok(()) => ops.len(),
            Err((i, _)) => *i,
        };
        self.note(ops[..done.min(ops.len())].iter().map(|o| o.page));
        r
    }
    fn erase_multi(&mut self, blocks: &[BlockId]) -> Result<(), (usize, Self::Error)> {
        let r = self.inner.erase_multi(blocks);
        self.note_other();
        r
    }
    fn copy_back_caps(&self) -> CopyBackCaps {
        self.inner.copy_back_caps()
    }
    fn copy_back(
        &mut self,
        op: CopyBackOp<'_>,
        check: &mut dyn FnMut(&mut [u8], &mut [u8]) -> CopyBackAction,
    ) -> Result<CopyBackAction, CopyBackError<Self::Error>> {
        let r = self.inner.copy_back(op, check);
        self.note_other();
        r
    }
}

impl<N: SimNand> SimNand for ProgramLog<N> {
    fn emu(&self) -> &Emulator {
        self.inner.emu()
    }
    fn emu_mut(&mut self) -> &mut Emulator {
        self.inner.emu_mut()
    }
    fn set_track_moves(&mut self, on: bool) {
        self.inner.set_track_moves(on)
    }
    fn take_chained_decode_ns(&mut self) -> u64 {
        self.inner.take_chained_decode_ns()
    }
    fn move_stats(&self) -> GcMoveStats {
        self.inner.move_stats()
    }
}
