//! The byte-addressable persistent memory behind the NV cache.
//!
//! [`Nvm`] is the seam a board implements over FRAM, MRAM or battery-backed SRAM (the emulator's
//! `sim_host::emulator::NvRam` implements it too, with power cuts). It is deliberately small:
//! read and write bytes at an offset.
//!
//! Contract the NV cache relies on (and nothing more):
//! - a `write` that returned `Ok` is persistent: it survives any later power loss;
//! - a `write` interrupted by power loss may leave *any* content in the bytes it was writing
//!   (real parts tear at their word or line size; the emulator tears at 8-byte words), and
//!   changes no byte outside them;
//! - `read` returns what was last persistently written (or left by a torn write).
//!
//! No atomicity is assumed: every record the cache writes carries a CRC and is written only over
//! space that holds nothing live (see [`super::cache`]).

use nand_hal::ErrorKind;

/// A byte-addressable persistent region.
pub trait Nvm {
    /// Size of the region in bytes.
    fn len(&self) -> u32;
    /// Whether the region has no bytes.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Reads `buf.len()` bytes at `offset`.
    fn read(&mut self, offset: u32, buf: &mut [u8]) -> Result<(), ErrorKind>;
    /// Writes `data` at `offset`; persistent when it returns `Ok`.
    fn write(&mut self, offset: u32, data: &[u8]) -> Result<(), ErrorKind>;
}

impl<T: Nvm + ?Sized> Nvm for &mut T {
    fn len(&self) -> u32 {
        (**self).len()
    }
    fn read(&mut self, offset: u32, buf: &mut [u8]) -> Result<(), ErrorKind> {
        (**self).read(offset, buf)
    }
    fn write(&mut self, offset: u32, data: &[u8]) -> Result<(), ErrorKind> {
        (**self).write(offset, data)
    }
}

/// An [`Nvm`] over a byte slice: memory-mapped FRAM/MRAM or battery-backed SRAM on a board (the
/// slice is the mapped region), or plain RAM in tests.
pub struct SliceNvm<'a> {
    bytes: &'a mut [u8],
}

impl<'a> SliceNvm<'a> {
    /// The region `bytes` (at most `u32::MAX` bytes are used).
    pub fn new(bytes: &'a mut [u8]) -> Self {
        SliceNvm { bytes }
    }
}

impl Nvm for SliceNvm<'_> {
    fn len(&self) -> u32 {
        self.bytes.len().min(u32::MAX as usize) as u32
    }
    fn read(&mut self, offset: u32, buf: &mut [u8]) -> Result<(), ErrorKind> {
        let o = offset as usize;
        let src = self.bytes.get(o..o + buf.len()).ok_or(ErrorKind::OutOfRange)?;
        buf.copy_from_slice(src);
        Ok(())
    }
    fn write(&mut self, offset: u32, data: &[u8]) -> Result<(), ErrorKind> {
        let o = offset as usize;
        let dst = self.bytes.get_mut(o..o + data.len()).ok_or(ErrorKind::OutOfRange)?;
        dst.copy_from_slice(data);
        Ok(())
    }
}
