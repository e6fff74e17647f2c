//! The [`NandFlash`] trait: what every raw NAND device offers the FTL.
//!
//! Contract shared by every implementation:
//! - A read returns `data.len()` bytes from the start of the page's data area and `spare.len()`
//!   bytes from the start of its spare area; either may be empty (a spare-only read). It is one
//!   array read (tR) whatever the lengths.
//! - A program writes `data` from the start of the data area and `spare` from the start of the
//!   spare area; bytes not supplied are left as they are (the page register holds 0xFF there).
//!   Programming can only clear bits. Each program of a page, however small, counts against the
//!   geometry's NOP; where the geometry requires it, pages of a block are programmed in order.
//! - An erase sets every bit of the block to 1.
//! - A multi-plane operation takes at most one operation per plane, all in one LUN, at the same
//!   page offset. On error it returns the index of the failing operation: operations before it
//!   completed; the state of the failing one and of those after it is unknown (treat their pages
//!   as consumed). The default methods issue single-plane operations one after another.
//! - A copy-back ([`NandFlash::copy_back`]) moves a page within one plane; its rules, and the
//!   rule that the caller must still check the data, are in [`crate::copy_back`]. The default
//!   method is a read followed by a program.

use crate::copy_back::{copy_back_fallback, CopyBackAction, CopyBackCaps, CopyBackError, CopyBackOp};
use crate::{BlockId, ErrorType, Geometry, PageId};

/// Most planes per LUN any device may have.
pub const MAX_PLANES: usize = 4;

/// One page read of a multi-plane read.
#[derive(Debug)]
pub struct ReadOp<'a> {
    /// The page to read.
    pub page: PageId,
    /// Receives the start of the data area.
    pub data: &'a mut [u8],
    /// Receives the start of the spare area.
    pub spare: &'a mut [u8],
}

/// One page program of a multi-plane program.
#[derive(Copy, Clone, Debug)]
pub struct ProgramOp<'a> {
    /// The page to program.
    pub page: PageId,
    /// Bytes for the start of the data area.
    pub data: &'a [u8],
    /// Bytes for the start of the spare area.
    pub spare: &'a [u8],
}

/// A raw NAND flash device.
pub trait NandFlash: ErrorType {
    /// The device's geometry.
    fn geometry(&self) -> Geometry;

    /// Reads the start of a page's data area into `data` and the start of its spare area into
    /// `spare` (one array read).
    fn read_page(&mut self, page: PageId, data: &mut [u8], spare: &mut [u8]) -> Result<(), Self::Error>;

    /// Programs the start of a page's data area with `data` and the start of its spare area with
    /// `spare`.
    fn program_page(&mut self, page: PageId, data: &[u8], spare: &[u8]) -> Result<(), Self::Error>;

    /// Erases a block.
    fn erase_block(&mut self, block: BlockId) -> Result<(), Self::Error>;

    /// Whether the block carries a bad-block marker (factory or grown): a non-0xFF first spare
    /// byte in its first or second page, as on real parts.
    fn is_bad(&mut self, block: BlockId) -> Result<bool, Self::Error>;

    /// Marks a block bad, so that [`NandFlash::is_bad`] reports it from now on.
    fn mark_bad(&mut self, block: BlockId) -> Result<(), Self::Error>;

    /// Reads only the start of a page's spare area.
    fn read_spare(&mut self, page: PageId, spare: &mut [u8]) -> Result<(), Self::Error> {
        self.read_page(page, &mut [], spare)
    }

    /// Multi-plane read. Default: one single-plane read after another.
    fn read_multi(&mut self, ops: &mut [ReadOp<'_>]) -> Result<(), (usize, Self::Error)> {
        for (i, op) in ops.iter_mut().enumerate() {
            self.read_page(op.page, op.data, op.spare).map_err(|e| (i, e))?;
        }
        Ok(())
    }

    /// Multi-plane program. Default: one single-plane program after another.
    fn program_multi(&mut self, ops: &[ProgramOp<'_>]) -> Result<(), (usize, Self::Error)> {
        for (i, op) in ops.iter().enumerate() {
            self.program_page(op.page, op.data, op.spare).map_err(|e| (i, e))?;
        }
        Ok(())
    }

    /// Multi-plane erase. Default: one single-plane erase after another.
    fn erase_multi(&mut self, blocks: &[BlockId]) -> Result<(), (usize, Self::Error)> {
        for (i, b) in blocks.iter().enumerate() {
            self.erase_block(*b).map_err(|e| (i, e))?;
        }
        Ok(())
    }

    /// What the device offers for [`NandFlash::copy_back`]. Default:
    /// [`CopyBackCaps::FALLBACK`] (read + program).
    fn copy_back_caps(&self) -> CopyBackCaps {
        CopyBackCaps::FALLBACK
    }

    /// Copies `op.src` to `op.dst` through the page register (see [`crate::copy_back`]): the
    /// read, the read-out `op.read` names, `check` on the buffers (it must decode the data, or
    /// the caller must bound unread copies: see the module's check rule), then, unless `check`
    /// answers [`CopyBackAction::Abort`], the program. Returns the action taken.
    ///
    /// Default ([`copy_back_fallback`]): the pair rules ([`crate::copy_back::check_copy_back`]), [`NandFlash::read_page`] of the whole
    /// page into the buffers, `check`, [`NandFlash::program_page`] of the buffers.
    fn copy_back(
        &mut self,
        op: CopyBackOp<'_>,
        check: &mut dyn FnMut(&mut [u8], &mut [u8]) -> CopyBackAction,
    ) -> Result<CopyBackAction, CopyBackError<Self::Error>> {
        let caps = self.copy_back_caps();
        copy_back_fallback(self, caps, op, check)
    }
}

impl<T: NandFlash + ?Sized> NandFlash for &mut T {
    fn geometry(&self) -> Geometry {
        T::geometry(self)
    }
    fn read_page(&mut self, page: PageId, data: &mut [u8], spare: &mut [u8]) -> Result<(), Self::Error> {
        T::read_page(self, page, data, spare)
    }
    fn program_page(&mut self, page: PageId, data: &[u8], spare: &[u8]) -> Result<(), Self::Error> {
        T::program_page(self, page, data, spare)
    }
    fn erase_block(&mut self, block: BlockId) -> Result<(), Self::Error> {
        T::erase_block(self, block)
    }
    fn is_bad(&mut self, block: BlockId) -> Result<bool, Self::Error> {
        T::is_bad(self, block)
    }
    fn mark_bad(&mut self, block: BlockId) -> Result<(), Self::Error> {
        T::mark_bad(self, block)
    }
    fn read_spare(&mut self, page: PageId, spare: &mut [u8]) -> Result<(), Self::Error> {
        T::read_spare(self, page, spare)
    }
    fn read_multi(&mut self, ops: &mut [ReadOp<'_>]) -> Result<(), (usize, Self::Error)> {
        T::read_multi(self, ops)
    }
    fn program_multi(&mut self, ops: &[ProgramOp<'_>]) -> Result<(), (usize, Self::Error)> {
        T::program_multi(self, ops)
    }
    fn erase_multi(&mut self, blocks: &[BlockId]) -> Result<(), (usize, Self::Error)> {
        T::erase_multi(self, blocks)
    }
    fn copy_back_caps(&self) -> CopyBackCaps {
        T::copy_back_caps(self)
    }
    fn copy_back(
        &mut self,
        op: CopyBackOp<'_>,
        check: &mut dyn FnMut(&mut [u8], &mut [u8]) -> CopyBackAction,
    ) -> Result<CopyBackAction, CopyBackError<Self::Error>> {
        T::copy_back(self, op, check)
    }
}
