//! Copy-back: moving a page inside the chip, and the rule that its data must still be checked.
//!
//! ONFI's READ FOR INTERNAL DATA MOVE (00h, source address, 35h) reads a page into its plane's
//! page register; PROGRAM FOR INTERNAL DATA MOVE (85h, destination address, 10h) programs the
//! register into another page. Nothing has to cross the bus, which saves the page's transfer in
//! (and, if the data is not read out, its transfer out too). [`crate::NandFlash::copy_back`]
//! offers it; this module owns its argument types, its capability record ([`CopyBackCaps`]) and
//! its rules ([`check_copy_back`]). What it guarantees, for every implementation:
//!
//! - **Same plane.** Source and destination lie in the same plane of the same LUN (the register
//!   is the plane's). Anything else is refused before a cycle is issued
//!   ([`CopyBackRule::NotSamePlane`]), also by the default implementation, so that an FTL
//!   tested on one device behaves the same on another.
//! - **Odd to even.** When the part does not advertise odd-to-even copy-back (ONFI parameter
//!   page byte 6 bit 4, [`CopyBackCaps::odd_to_even`]) source and destination page addresses
//!   must both be odd or both even ([`CopyBackRule::OddToEven`]).
//! - **The destination is an ordinary program.** NOP, in-order programming, bad blocks, status
//!   FAIL and power cuts apply to it as to [`crate::NandFlash::program_page`]; the source is only
//!   read (a cut during the copy never changes it).
//! - **Read-out and modification.** Between the read and the program the caller may transfer
//!   the register out ([`CopyBackRead`]) and decide, in its `check` callback, to program
//!   ([`CopyBackAction::Program`], optionally writing its whole data and/or spare buffer back
//!   into the register first: CHANGE WRITE COLUMN and data input after 85h) or to program
//!   nothing ([`CopyBackAction::Abort`]).
//! - **Errors say which half failed** ([`CopyBackError`]): a refusal changed nothing, a failed
//!   read left the destination untouched, a failed program left the destination in an unknown
//!   state (treat it as consumed, as after a failed program).
//! - **Default = read + program.** The default method reads the whole page into the caller's
//!   buffers, calls `check` and programs the buffers: the same result as the on-chip move, at the
//!   cost of both transfers. [`CopyBackCaps::native`] says which one a device runs.
//!
//! # The check rule: the data must be read and checked
//!
//! A copy-back programs the register exactly as it was read: raw bit errors of that read (a
//! copy-back read is as noisy as any other) are written into the destination uncorrected, and
//! the destination's own errors come on top at its next read. Copied unread generation after
//! generation, a page accumulates one read's worth of errors per copy until it no longer
//! decodes. So an FTL using copy-back must, for every copy:
//!
//! 1. check the pair first ([`check_copy_back`] with [`crate::NandFlash::copy_back_caps`]), and
//!    use a plain read + program for pairs that do not qualify;
//! 2. read the page out ([`CopyBackRead::Page`]) and decode it with its page codec inside
//!    `check` (and the spare metadata with its own code): clean, program it with the new
//!    metadata in the spare (`write_spare`); corrected, also write the corrected data back
//!    (`write_data`); uncorrectable, [`CopyBackAction::Abort`] and handle the page as a failed
//!    GC read. This saves the transfer in, not the transfer out;
//! 3. or, to also save the transfer out ([`CopyBackRead::Spare`] or [`CopyBackRead::Nothing`]),
//!    bound the unread generations: count them in the page's metadata and read + check the page
//!    at the latest every `k`-th copy, `k` chosen so that `k` reads' raw errors stay well inside
//!    the codec's correction (with a detect-only codec such as CRC-32C, `k` = 1: every copy is
//!    read out). A spare-only read checks the spare's own code, never the data.
//!
//! The emulator (`sim-host`) copies the source's raw bit errors into the destination, so an FTL
//! that skips the check fails its tests; `nand-emu` (the emulator) has the test that shows the
//! accumulation.

use crate::{Geometry, PageId};

/// How much of the register a copy-back transfers out before its program.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum CopyBackRead {
    /// Nothing: the data crosses no bus (the page is copied unchecked; see the module doc).
    Nothing,
    /// The spare area only (its metadata can be checked, the data cannot).
    Spare,
    /// The whole page, data and spare (the data can be decoded and corrected).
    Page,
}

/// What a copy-back does after its read-out (the `check` callback's answer).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum CopyBackAction {
    /// Program the destination from the register, after writing the caller's whole data buffer
    /// (`write_data`) and/or whole spare buffer (`write_spare`) into it. A buffer not named
    /// must be left as the read filled it (the default implementation programs the buffers).
    Program {
        /// Replace the register's data area with the data buffer (corrected data).
        write_data: bool,
        /// Replace the register's spare area with the spare buffer (new metadata).
        write_spare: bool,
    },
    /// Program nothing: the destination is left as it is.
    Abort,
}

impl CopyBackAction {
    /// Program from the register as read, nothing written back.
    pub const AS_READ: CopyBackAction = CopyBackAction::Program { write_data: false, write_spare: false };
}

/// One copy-back: the pages and the caller's page-sized buffers.
#[derive(Debug)]
pub struct CopyBackOp<'a> {
    /// The page read.
    pub src: PageId,
    /// The page programmed.
    pub dst: PageId,
    /// What is transferred out to the buffers before `check` runs.
    pub read: CopyBackRead,
    /// Exactly `data_bytes` long. Holds the source's data as read (raw, uncorrected) when
    /// `read` is [`CopyBackRead::Page`]; otherwise unspecified (the default implementation
    /// reads the whole page). Written into the register on `write_data`.
    pub data: &'a mut [u8],
    /// Exactly `spare_bytes` long. Holds the source's spare as read unless `read` is
    /// [`CopyBackRead::Nothing`]. Written into the register on `write_spare`.
    pub spare: &'a mut [u8],
}

/// What a device offers for copy-back.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct CopyBackCaps {
    /// Whether the chip moves the page itself (ONFI optional command COPYBACK); `false`: the
    /// default read + program.
    pub native: bool,
    /// Whether source and destination may differ in page-address parity (ONFI "odd-to-even page
    /// copyback"); when `false` both must be odd or both even.
    pub odd_to_even: bool,
}

impl CopyBackCaps {
    /// The default implementation: read + program, no parity restriction.
    pub const FALLBACK: CopyBackCaps = CopyBackCaps { native: false, odd_to_even: true };
}

/// Why a copy-back was refused before anything was issued.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum CopyBackRule {
    /// A page outside the geometry.
    OutOfRange,
    /// A buffer that is not exactly the page's data or spare size.
    BufferSize,
    /// Source and destination are not in the same plane of one LUN.
    NotSamePlane,
    /// Page addresses of different parity on a part without odd-to-even copy-back.
    OddToEven,
}

/// A failed copy-back.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum CopyBackError<E> {
    /// Refused before anything was issued; nothing changed.
    Refused(CopyBackRule),
    /// The read for internal data move failed (power loss, timeout...): nothing was programmed.
    Read(E),
    /// The program failed (status FAIL, a rule on the destination, power loss...): the
    /// destination's state is as after that failed program.
    Program(E),
}

impl<E: crate::Error> crate::Error for CopyBackError<E> {
    fn kind(&self) -> crate::ErrorKind {
        use crate::ErrorKind;
        match self {
            CopyBackError::Refused(CopyBackRule::OutOfRange) => ErrorKind::OutOfRange,
            CopyBackError::Refused(CopyBackRule::BufferSize) => ErrorKind::BufferSize,
            CopyBackError::Refused(_) => ErrorKind::Other,
            CopyBackError::Read(e) | CopyBackError::Program(e) => e.kind(),
        }
    }
}

impl<E: core::fmt::Debug> core::fmt::Display for CopyBackError<E> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            CopyBackError::Refused(CopyBackRule::OutOfRange) => f.write_str("copy-back page out of range"),
            CopyBackError::Refused(CopyBackRule::BufferSize) => {
                f.write_str("copy-back buffers must be exactly the page's data and spare")
            }
            CopyBackError::Refused(CopyBackRule::NotSamePlane) => {
                f.write_str("copy-back source and destination are not in one plane")
            }
            CopyBackError::Refused(CopyBackRule::OddToEven) => {
                f.write_str("copy-back between odd and even pages is not supported by the part")
            }
            CopyBackError::Read(e) => write!(f, "copy-back read failed: {e:?}"),
            CopyBackError::Program(e) => write!(f, "copy-back program failed: {e:?}"),
        }
    }
}

impl<E: core::fmt::Debug> core::error::Error for CopyBackError<E> {}

/// Checks a copy-back of `src` to `dst` with buffers of `data_len` and `spare_len` bytes
/// against the geometry and the device's capabilities (see the module documentation).
pub fn check_copy_back(
    g: &Geometry,
    caps: CopyBackCaps,
    src: PageId,
    dst: PageId,
    data_len: usize,
    spare_len: usize,
) -> Result<(), CopyBackRule> {
    if !g.contains_page(src) || !g.contains_page(dst) {
        return Err(CopyBackRule::OutOfRange);
    }
    if data_len != g.data_bytes as usize || spare_len != g.spare_bytes as usize {
        return Err(CopyBackRule::BufferSize);
    }
    if g.plane_index(g.block_of(src)) != g.plane_index(g.block_of(dst)) {
        return Err(CopyBackRule::NotSamePlane);
    }
    if !caps.odd_to_even && (g.page_in_block(src) ^ g.page_in_block(dst)) & 1 != 0 {
        return Err(CopyBackRule::OddToEven);
    }
    Ok(())
}

impl CopyBackOp<'_> {
    /// [`check_copy_back`] of this operation.
    pub fn check(&self, g: &Geometry, caps: CopyBackCaps) -> Result<(), CopyBackRule> {
        check_copy_back(g, caps, self.src, self.dst, self.data.len(), self.spare.len())
    }
}

/// The default [`crate::NandFlash::copy_back`]: the pair rules with `caps`, a whole-page read
/// into the buffers, `check`, and a program of the buffers. Devices whose chip lacks copy-back
/// call it from their own implementation.
pub fn copy_back_fallback<N: crate::NandFlash + ?Sized>(
    nand: &mut N,
    caps: CopyBackCaps,
    op: CopyBackOp<'_>,
    check: &mut dyn FnMut(&mut [u8], &mut [u8]) -> CopyBackAction,
) -> Result<CopyBackAction, CopyBackError<N::Error>> {
    op.check(&nand.geometry(), caps).map_err(CopyBackError::Refused)?;
    nand.read_page(op.src, op.data, op.spare).map_err(CopyBackError::Read)?;
    let action = check(op.data, op.spare);
    if action != CopyBackAction::Abort {
        nand.program_page(op.dst, op.data, op.spare).map_err(CopyBackError::Program)?;
    }
    Ok(action)
}
