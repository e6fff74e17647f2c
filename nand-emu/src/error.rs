//! [`EmuError`], the emulator's error type.
//!
//! Every variant maps to one portable [`ErrorKind`] through [`nand_hal::Error::kind`], which is all
//! an FTL should look at; the variants themselves carry the address involved, for test messages
//! and debugging. The type is `Copy` and allocation-free.

use core::fmt;

use nand_hal::{BlockId, ErrorKind, PageId};

/// An error reported by the [`super::Emulator`].
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum EmuError {
    /// A page outside the geometry ([`ErrorKind::OutOfRange`]).
    PageOutOfRange(PageId),
    /// A block outside the geometry ([`ErrorKind::OutOfRange`]).
    BlockOutOfRange(BlockId),
    /// A data buffer longer than the data area ([`ErrorKind::BufferSize`]).
    DataTooLong {
        /// Length supplied.
        len: usize,
        /// Data bytes per page.
        max: u32,
    },
    /// A spare buffer longer than the spare area ([`ErrorKind::BufferSize`]).
    SpareTooLong {
        /// Length supplied.
        len: usize,
        /// Spare bytes per page.
        max: u32,
    },
    /// The page has already been programmed `nop` times since its block was erased
    /// ([`ErrorKind::NopExceeded`]). Nothing was changed.
    NopExceeded(PageId),
    /// In-order programming is required and a higher page of the block is already programmed
    /// ([`ErrorKind::ProgramOrder`]). Nothing was changed.
    ProgramOrder {
        /// The page that was to be programmed.
        page: PageId,
        /// Index (within the block) of the highest page programmed so far.
        highest: u32,
    },
    /// `reject_set_bits` is on and the program asked to turn a 0 bit back into 1
    /// ([`ErrorKind::ProgramFailed`]). Nothing was changed.
    SetBits(PageId),
    /// The program reported status FAIL: factory-bad block, injected or wear-driven failure
    /// ([`ErrorKind::ProgramFailed`]). The page may be partially programmed.
    ProgramFailed(PageId),
    /// The erase reported status FAIL: factory-bad block, injected or wear-driven failure
    /// ([`ErrorKind::EraseFailed`]). The block may be partly erased.
    EraseFailed(BlockId),
    /// The device has no power ([`ErrorKind::PowerLoss`]).
    PowerLoss,
    /// A multi-plane call that breaks the multi-plane rules ([`ErrorKind::Other`]).
    MultiPlane(&'static str),
    /// An [`super::EmulatorConfig`] the emulator cannot honour ([`ErrorKind::Other`]).
    InvalidConfig(&'static str),
}

impl nand_hal::Error for EmuError {
    fn kind(&self) -> ErrorKind {
        match self {
            EmuError::PageOutOfRange(_) | EmuError::BlockOutOfRange(_) => ErrorKind::OutOfRange,
            EmuError::DataTooLong { .. } | EmuError::SpareTooLong { .. } => ErrorKind::BufferSize,
            EmuError::NopExceeded(_) => ErrorKind::NopExceeded,
            EmuError::ProgramOrder { .. } => ErrorKind::ProgramOrder,
            EmuError::SetBits(_) | EmuError::ProgramFailed(_) => ErrorKind::ProgramFailed,
            EmuError::EraseFailed(_) => ErrorKind::EraseFailed,
            EmuError::PowerLoss => ErrorKind::PowerLoss,
            EmuError::MultiPlane(_) | EmuError::InvalidConfig(_) => ErrorKind::Other,
        }
    }
}

impl fmt::Display for EmuError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EmuError::PageOutOfRange(p) => write!(f, "page {} out of range", p.0),
            EmuError::BlockOutOfRange(b) => write!(f, "block {} out of range", b.0),
            EmuError::DataTooLong { len, max } => {
                write!(f, "data buffer of {len} bytes exceeds the {max}-byte data area")
            }
            EmuError::SpareTooLong { len, max } => {
                write!(f, "spare buffer of {len} bytes exceeds the {max}-byte spare area")
            }
            EmuError::NopExceeded(p) => write!(f, "page {}: partial-program limit (NOP) exceeded", p.0),
            EmuError::ProgramOrder { page, highest } => write!(
                f,
                "page {} programmed out of order (page {highest} of its block is already programmed)",
                page.0
            ),
            EmuError::SetBits(p) => write!(f, "page {}: program would turn 0 bits back into 1", p.0),
            EmuError::ProgramFailed(p) => write!(f, "page {}: program failed", p.0),
            EmuError::EraseFailed(b) => write!(f, "block {}: erase failed", b.0),
            EmuError::PowerLoss => f.write_str("device has no power"),
            EmuError::MultiPlane(why) => write!(f, "invalid multi-plane operation: {why}"),
            EmuError::InvalidConfig(why) => write!(f, "invalid emulator configuration: {why}"),
        }
    }
}

impl std::error::Error for EmuError {}

#[cfg(test)]
mod tests {
    use super::*;
    use nand_hal::Error as _;

    #[test]
    fn kinds_and_messages() {
        let cases = [
            (EmuError::PageOutOfRange(PageId(9)), ErrorKind::OutOfRange, "page 9"),
            (EmuError::DataTooLong { len: 5, max: 4 }, ErrorKind::BufferSize, "5 bytes"),
            (EmuError::NopExceeded(PageId(1)), ErrorKind::NopExceeded, "NOP"),
            (EmuError::ProgramOrder { page: PageId(2), highest: 4 }, ErrorKind::ProgramOrder, "page 4"),
            (EmuError::SetBits(PageId(3)), ErrorKind::ProgramFailed, "0 bits"),
            (EmuError::EraseFailed(BlockId(7)), ErrorKind::EraseFailed, "block 7"),
            (EmuError::PowerLoss, ErrorKind::PowerLoss, "power"),
            (EmuError::MultiPlane("x"), ErrorKind::Other, "multi-plane"),
        ];
        for (e, kind, text) in cases {
            assert_eq!(e.kind(), kind);
            assert!(e.to_string().contains(text), "{e}");
        }
        let boxed: Box<dyn std::error::Error> = Box::new(EmuError::PowerLoss);
        assert_eq!(boxed.to_string(), "device has no power");
    }
}
