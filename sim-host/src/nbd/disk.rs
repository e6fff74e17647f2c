//! Byte-addressed access to the FTL with `std`: [`BlockDisk`] wraps the `no_std` adapter
//! [`ftl_block::SectorDisk`] (which turns the FTL's whole-page `read` / `write` / `trim` into
//! reads and writes at any byte offset and length, with read-modify-write for the partial pages
//! at either end, through one owned page buffer) and implements `std::io::{Read, Write, Seek}`
//! over it (for filesystem crates such as `fatfs`), with errors convertible to `io::Error`.
//!
//! - Every access is bounds-checked against the logical capacity before the FTL sees it; an
//!   access past the end is [`DiskError::OutOfRange`] and changes nothing.
//! - A partial page is read, patched and written back whole: each logical page changes
//!   atomically (the FTL's unit), so after a power cut a page holds either its old or its new
//!   content; a write spanning several pages can be cut between them (the per-sector statement
//!   is in `ftl_block::disk`).
//! - A trim discards only the whole pages inside the range (they read as zeros from then on); the
//!   partial pages at its ends keep their content, which the NBD protocol allows.
//! - `io::Write::flush` is the FTL's `flush`.

use std::io::{self, Read, Seek, SeekFrom, Write};

use ftl_block::SectorDisk;
use ftl_core::policy::{DefaultPolicies, PolicySet};
use ftl_core::{AnyMap, Ftl, MappingTable};
use nand_hal::NandFlash;

/// Why a byte access failed.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum DiskError {
    /// The range reaches past the end of the device (or overflows).
    OutOfRange,
    /// The FTL refused or failed.
    Ftl(ftl_core::Error),
    /// The adapter refused the FTL (its page size is not a multiple of 512 bytes).
    Adapter(ftl_block::Error),
}

impl std::fmt::Display for DiskError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DiskError::OutOfRange => f.write_str("access past the end of the device"),
            DiskError::Ftl(e) => write!(f, "FTL: {e}"),
            DiskError::Adapter(e) => write!(f, "block adapter: {e}"),
        }
    }
}

impl std::error::Error for DiskError {}

impl From<ftl_core::Error> for DiskError {
    fn from(e: ftl_core::Error) -> Self {
        DiskError::Ftl(e)
    }
}

impl From<ftl_block::Error> for DiskError {
    fn from(e: ftl_block::Error) -> Self {
        match e {
            ftl_block::Error::OutOfRange => DiskError::OutOfRange,
            ftl_block::Error::Ftl(e) => DiskError::Ftl(e),
            e => DiskError::Adapter(e),
        }
    }
}

impl From<DiskError> for io::Error {
    fn from(e: DiskError) -> Self {
        let kind = match e {
            DiskError::OutOfRange => io::ErrorKind::InvalidInput,
            DiskError::Ftl(ftl_core::Error::NoSpace) => io::ErrorKind::StorageFull,
            DiskError::Ftl(_) | DiskError::Adapter(_) => io::ErrorKind::Other,
        };
        io::Error::new(kind, e)
    }
}

/// The FTL as a byte-addressed disk (see the module documentation).
pub struct BlockDisk<'m, N: NandFlash, P: PolicySet = DefaultPolicies, M: MappingTable = AnyMap<'m>> {
    disk: SectorDisk<Ftl<'m, N, P, M>, Vec<u8>>,
    pos: u64,
}

impl<'m, N: NandFlash, P: PolicySet, M: MappingTable> BlockDisk<'m, N, P, M> {
    /// Wraps a mounted (or freshly formatted) FTL; its page size must be a multiple of 512.
    pub fn new(ftl: Ftl<'m, N, P, M>) -> Result<Self, DiskError> {
        let page = ftl.page_bytes() as usize;
        Ok(BlockDisk { disk: SectorDisk::new(ftl, vec![0; page])?, pos: 0 })
    }

    /// Capacity in bytes.
    pub fn size(&self) -> u64 {
        self.disk.size_bytes()
    }

    /// Bytes per logical page.
    pub fn page_bytes(&self) -> usize {
        self.disk.page_bytes()
    }

    /// The FTL.
    pub fn ftl(&self) -> &Ftl<'m, N, P, M> {
        self.disk.store()
    }

    /// The FTL, mutably.
    pub fn ftl_mut(&mut self) -> &mut Ftl<'m, N, P, M> {
        self.disk.store_mut()
    }

    /// Gives the FTL back.
    pub fn into_ftl(self) -> Ftl<'m, N, P, M> {
        self.disk.into_parts().0
    }

    /// Reads `buf.len()` bytes at `offset`.
    pub fn read_at(&mut self, offset: u64, buf: &mut [u8]) -> Result<(), DiskError> {
        Ok(self.disk.read_bytes(offset, buf)?)
    }

    /// Writes `data` at `offset` (read-modify-write for partial pages).
    pub fn write_at(&mut self, offset: u64, data: &[u8]) -> Result<(), DiskError> {
        Ok(self.disk.write_bytes(offset, data)?)
    }

    /// Trims the whole pages inside `offset .. offset + len`; returns how many.
    pub fn trim(&mut self, offset: u64, len: u64) -> Result<u64, DiskError> {
        Ok(self.disk.trim_bytes(offset, len)? / self.disk.page_bytes() as u64)
    }

    /// The FTL's `flush`: every completed write and trim becomes durable.
    pub fn flush(&mut self) -> Result<(), DiskError> {
        Ok(self.disk.flush()?)
    }
}

impl<N: NandFlash, P: PolicySet, M: MappingTable> Read for BlockDisk<'_, N, P, M> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = (self.size().saturating_sub(self.pos)).min(buf.len() as u64) as usize;
        self.read_at(self.pos, &mut buf[..n])?;
        self.pos += n as u64;
        Ok(n)
    }
}

impl<N: NandFlash, P: PolicySet, M: MappingTable> Write for BlockDisk<'_, N, P, M> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        let n = (self.size().saturating_sub(self.pos)).min(buf.len() as u64) as usize;
        if n == 0 {
            return Err(io::Error::new(io::ErrorKind::StorageFull, "write past the end of the device"));
        }
        self.write_at(self.pos, &buf[..n])?;
        self.pos += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        BlockDisk::flush(self)?;
        Ok(())
    }
}

impl<N: NandFlash, P: PolicySet, M: MappingTable> Seek for BlockDisk<'_, N, P, M> {
    fn seek(&mut self, to: SeekFrom) -> io::Result<u64> {
        let target = match to {
            SeekFrom::Start(p) => Some(p),
            SeekFrom::End(d) => self.size().checked_add_signed(d),
            SeekFrom::Current(d) => self.pos.checked_add_signed(d),
        };
        let target =
            target.ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "seek out of range"))?;
        self.pos = target;
        Ok(target)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::emulator::{Emulator, EmulatorConfig};
    use crate::memory::FtlMemory;
    use ftl_core::Config;
    use nand_hal::Geometry;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    fn geometry() -> Geometry {
        Geometry { blocks_per_plane: 64, pages_per_block: 32, ..Geometry::MT29F4G08 }
    }

    #[test]
    fn unaligned_reads_and_writes_match_a_byte_model() {
        let g = geometry();
        let cfg = Config::for_over_provisioning(&g, 25);
        let mut emu = Emulator::new(EmulatorConfig::new(g)).unwrap();
        let mut mem = FtlMemory::new(&g, &cfg);
        let (map, m) = mem.parts();
        let ftl = Ftl::format(&mut emu, DefaultPolicies::default(), map, m, cfg).unwrap();
        let mut disk = BlockDisk::new(ftl).unwrap();
        let size = disk.size() as usize;
        assert_eq!(size, cfg.logical_pages as usize * 2048);
        let mut model = vec![0u8; size];
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let mut buf = vec![0u8; 3 * 2048 + 700];
        for round in 0..3000 {
            let len = rng.random_range(1..buf.len());
            let off = rng.random_range(0..=size - len);
            match round % 3 {
                0 | 1 => {
                    rng.fill(&mut buf[..len]);
                    disk.write_at(off as u64, &buf[..len]).unwrap();
                    model[off..off + len].copy_from_slice(&buf[..len]);
                }
                _ => {
                    let t = disk.trim(off as u64, len as u64).unwrap() as usize;
                    let first = off.div_ceil(2048);
                    model[first * 2048..(first + t) * 2048].fill(0);
                }
            }
            let (len, off) = (rng.random_range(0..buf.len()), rng.random_range(0..size - buf.len()));
            disk.read_at(off as u64, &mut buf[..len]).unwrap();
            assert_eq!(&buf[..len], &model[off..off + len], "round {round}");
        }
        let mut all = vec![0u8; size];
        disk.read_at(0, &mut all).unwrap();
        assert!(all == model);
        assert!(disk.ftl().counters().gc_blocks > 0, "the workload ran GC");
        // Out of range and overflowing accesses are refused and change nothing.
        for (off, len) in [(size as u64, 1u64), (size as u64 - 1, 2), (u64::MAX, 2)] {
            let mut b = vec![0u8; len as usize];
            assert_eq!(disk.read_at(off, &mut b), Err(DiskError::OutOfRange));
            assert_eq!(disk.write_at(off, &b), Err(DiskError::OutOfRange));
            assert_eq!(disk.trim(off, len), Err(DiskError::OutOfRange));
        }
        disk.read_at(0, &mut all).unwrap();
        assert!(all == model);
    }

    #[test]
    fn io_traits_behave_like_a_file_of_fixed_size() {
        let g = geometry();
        let cfg = Config::for_over_provisioning(&g, 25);
        let mut emu = Emulator::new(EmulatorConfig::new(g)).unwrap();
        let mut mem = FtlMemory::new(&g, &cfg);
        let (map, m) = mem.parts();
        let mut disk =
            BlockDisk::new(Ftl::format(&mut emu, DefaultPolicies::default(), map, m, cfg).unwrap()).unwrap();
        let size = disk.size();
        disk.seek(SeekFrom::Start(1000)).unwrap();
        disk.write_all(b"0123456789").unwrap();
        assert_eq!(disk.stream_position().unwrap(), 1010);
        disk.seek(SeekFrom::Current(-6)).unwrap();
        let mut b = [0u8; 4];
        disk.read_exact(&mut b).unwrap();
        assert_eq!(&b, b"4567");
        disk.seek(SeekFrom::End(-3)).unwrap();
        assert_eq!(disk.write(b"abcdef").unwrap(), 3);
        assert_eq!(disk.write(b"x").unwrap_err().kind(), io::ErrorKind::StorageFull);
        let mut tail = Vec::new();
        disk.seek(SeekFrom::End(-5)).unwrap();
        disk.read_to_end(&mut tail).unwrap();
        assert_eq!(tail, b"\0\0abc");
        assert!(disk.seek(SeekFrom::Current(-(size as i64) - 1)).is_err());
        disk.flush().unwrap();
        assert_eq!(disk.ftl().counters().host_flushes, 1);
    }
}
