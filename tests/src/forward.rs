//! Pass-through devices for fault-injecting and spying test wrappers.
//!
//! [`Forward`] is a [`NandFlash`] that passes every call to an inner device through a [`Hook`],
//! whose methods all have defaults: a test implements only the calls it changes or records
//! (a torn program, dropped corrections, bit flips, a record of the operations on some block)
//! and keeps its own state in the hook.
//!
//! What it guarantees, so that a wrapper behaves as if it implemented [`NandFlash`] by hand with
//! only those methods:
//! - the five required calls (`read_page`, `program_page`, `erase_block`, `is_bad`,
//!   `mark_bad`) go to the device unless hooked; `geometry` always does;
//! - the provided calls (`read_spare`, the multi-plane calls, `copy_back_caps`, `copy_back`) are,
//!   unless hooked, the trait's own defaults run through the hooks: one page (block) at a time
//!   through `read_page` / `program_page` / `erase_block`, no copy-back capability and a
//!   copy-back that reads and programs through the hooks. So a hook on `program_page` sees every
//!   program, and the device's own multi-plane or copy-back semantics are used only where a
//!   hook forwards them (`dev.program_multi(ops)`).
//!
//! [`CutHook`] adds [`CutControl`] (power cuts scheduled by [`crate::session`]).

use std::borrow::BorrowMut;

use nand_hal::{
    BlockId, CopyBackAction, CopyBackCaps, CopyBackError, CopyBackOp, ErrorType, Geometry, NandFlash, PageId,
    ProgramOp, ReadOp,
};

use crate::CutControl;

/// What a hook over the emulator returns (keeps the hooks' signatures on one line).
pub type EmuResult<T = ()> = Result<T, nand_emu::EmuError>;

/// The error type of a hook's device.
type Err<H> = <<H as Hook>::Dev as ErrorType>::Error;

/// What a [`Forward`] does on each call; every method defaults to the plain pass-through (see
/// the module doc for the provided calls).
pub trait Hook {
    /// The device the calls go to.
    type Dev: NandFlash + ?Sized;

    /// [`NandFlash::read_page`].
    fn read_page(
        &mut self,
        dev: &mut Self::Dev,
        page: PageId,
        data: &mut [u8],
        spare: &mut [u8],
    ) -> Result<(), Err<Self>> {
        dev.read_page(page, data, spare)
    }
    /// [`NandFlash::program_page`].
    fn program_page(
        &mut self,
        dev: &mut Self::Dev,
        page: PageId,
        data: &[u8],
        spare: &[u8],
    ) -> Result<(), Err<Self>> {
        dev.program_page(page, data, spare)
    }
    /// [`NandFlash::erase_block`].
    fn erase_block(&mut self, dev: &mut Self::Dev, block: BlockId) -> Result<(), Err<Self>> {
        dev.erase_block(block)
    }
    /// [`NandFlash::is_bad`].
    fn is_bad(&mut self, dev: &mut Self::Dev, block: BlockId) -> Result<bool, Err<Self>> {
        dev.is_bad(block)
    }
    /// [`NandFlash::mark_bad`].
    fn mark_bad(&mut self, dev: &mut Self::Dev, block: BlockId) -> Result<(), Err<Self>> {
        dev.mark_bad(block)
    }
    /// [`NandFlash::read_spare`]; default: [`Hook::read_page`] with no data.
    fn read_spare(&mut self, dev: &mut Self::Dev, page: PageId, spare: &mut [u8]) -> Result<(), Err<Self>> {
        self.read_page(dev, page, &mut [], spare)
    }
    /// [`NandFlash::read_multi`]; default: [`Hook::read_page`] one page at a time.
    fn read_multi(&mut self, dev: &mut Self::Dev, ops: &mut [ReadOp<'_>]) -> Result<(), (usize, Err<Self>)> {
        one_at_a_time(ops.iter_mut(), |op| self.read_page(dev, op.page, op.data, op.spare))
    }
    /// [`NandFlash::program_multi`]; default: [`Hook::program_page`] one page at a time.
    fn program_multi(
        &mut self,
        dev: &mut Self::Dev,
        ops: &[ProgramOp<'_>],
    ) -> Result<(), (usize, Err<Self>)> {
        one_at_a_time(ops.iter(), |op| self.program_page(dev, op.page, op.data, op.spare))
    }
    /// [`NandFlash::erase_multi`]; default: [`Hook::erase_block`] one block at a time.
    fn erase_multi(&mut self, dev: &mut Self::Dev, blocks: &[BlockId]) -> Result<(), (usize, Err<Self>)> {
        one_at_a_time(blocks.iter(), |&b| self.erase_block(dev, b))
    }
    /// [`NandFlash::copy_back_caps`]; default: [`CopyBackCaps::FALLBACK`] (the trait's default,
    /// not the device's capabilities).
    fn copy_back_caps(&self, dev: &Self::Dev) -> CopyBackCaps {
        let _ = dev;
        CopyBackCaps::FALLBACK
    }
    /// [`NandFlash::copy_back`]; default: `nand_hal::copy_back::copy_back_fallback` through the
    /// hooks (the pair rules with [`Hook::copy_back_caps`], [`Hook::read_page`], `check`,
    /// [`Hook::program_page`] unless `check` aborts).
    fn copy_back(
        &mut self,
        dev: &mut Self::Dev,
        op: CopyBackOp<'_>,
        check: &mut dyn FnMut(&mut [u8], &mut [u8]) -> CopyBackAction,
    ) -> Result<CopyBackAction, CopyBackError<Err<Self>>> {
        op.check(&dev.geometry(), self.copy_back_caps(dev)).map_err(CopyBackError::Refused)?;
        self.read_page(dev, op.src, op.data, op.spare).map_err(CopyBackError::Read)?;
        let action = check(op.data, op.spare);
        if action != CopyBackAction::Abort {
            self.program_page(dev, op.dst, op.data, op.spare).map_err(CopyBackError::Program)?;
        }
        Ok(action)
    }
}

/// Power cuts on a [`Forward`] device ([`CutControl`]).
pub trait CutHook: Hook {
    /// [`CutControl::schedule_cut`].
    fn schedule_cut(&mut self, dev: &mut Self::Dev, after: u64);
}

/// Runs `f` on each item in order, stopping at the first error with its index (the trait's
/// default multi-plane calls).
fn one_at_a_time<T, E>(
    items: impl Iterator<Item = T>,
    mut f: impl FnMut(T) -> Result<(), E>,
) -> Result<(), (usize, E)> {
    for (i, item) in items.enumerate() {
        f(item).map_err(|e| (i, e))?;
    }
    Ok(())
}

/// A device (`D`, owned or `&mut`) whose calls pass through `hook`.
pub struct Forward<D, H> {
    /// The device.
    pub dev: D,
    /// What the wrapper changes or records, and its state.
    pub hook: H,
}

impl<D, H> Forward<D, H> {
    /// `dev` behind `hook`.
    pub fn new(dev: D, hook: H) -> Self {
        Forward { dev, hook }
    }
}

impl<D: BorrowMut<H::Dev>, H: Hook> ErrorType for Forward<D, H> {
    type Error = Err<H>;
}

impl<D: BorrowMut<H::Dev>, H: Hook> NandFlash for Forward<D, H> {
    fn geometry(&self) -> Geometry {
        self.dev.borrow().geometry()
    }
    fn read_page(&mut self, page: PageId, data: &mut [u8], spare: &mut [u8]) -> Result<(), Self::Error> {
        self.hook.read_page(self.dev.borrow_mut(), page, data, spare)
    }
    fn program_page(&mut self, page: PageId, data: &[u8], spare: &[u8]) -> Result<(), Self::Error> {
        self.hook.program_page(self.dev.borrow_mut(), page, data, spare)
    }
    fn erase_block(&mut self, block: BlockId) -> Result<(), Self::Error> {
        self.hook.erase_block(self.dev.borrow_mut(), block)
    }
    fn is_bad(&mut self, block: BlockId) -> Result<bool, Self::Error> {
        self.hook.is_bad(self.dev.borrow_mut(), block)
    }
    fn mark_bad(&mut self, block: BlockId) -> Result<(), Self::Error> {
        self.hook.mark_bad(self.dev.borrow_mut(), block)
    }
    fn read_spare(&mut self, page: PageId, spare: &mut [u8]) -> Result<(), Self::Error> {
        self.hook.read_spare(self.dev.borrow_mut(), page, spare)
    }
    fn read_multi(&mut self, ops: &mut [ReadOp<'_>]) -> Result<(), (usize, Self::Error)> {
        self.hook.read_multi(self.dev.borrow_mut(), ops)
    }
    fn program_multi(&mut self, ops: &[ProgramOp<'_>]) -> Result<(), (usize, Self::Error)> {
        self.hook.program_multi(self.dev.borrow_mut(), ops)
    }
    fn erase_multi(&mut self, blocks: &[BlockId]) -> Result<(), (usize, Self::Error)> {
        self.hook.erase_multi(self.dev.borrow_mut(), blocks)
    }
    fn copy_back_caps(&self) -> CopyBackCaps {
        self.hook.copy_back_caps(self.dev.borrow())
    }
    fn copy_back(
        &mut self,
        op: CopyBackOp<'_>,
        check: &mut dyn FnMut(&mut [u8], &mut [u8]) -> CopyBackAction,
    ) -> Result<CopyBackAction, CopyBackError<Self::Error>> {
        self.hook.copy_back(self.dev.borrow_mut(), op, check)
    }
}

impl<D: BorrowMut<H::Dev>, H: CutHook> CutControl for Forward<D, H> {
    fn schedule_cut(&mut self, after: u64) {
        self.hook.schedule_cut(self.dev.borrow_mut(), after);
    }
}
