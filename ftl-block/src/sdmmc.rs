//! [`SdmmcDisk`]: embedded-sdmmc's `BlockDevice` over the [`SectorDisk`], so that
//! embedded-sdmmc's FAT16/FAT32 volume manager runs on the FTL (feature `sdmmc`).
//!
//! `BlockDevice` takes `&self`; the adapter sits in a `RefCell` (a re-entrant call, impossible
//! through embedded-sdmmc, would be [`Error::Busy`], not a panic). Runs of 512-byte `Block`s are
//! moved page by page through the adapter's page buffer ([`SectorDisk::read_with`] /
//! [`SectorDisk::write_with`]): one FTL page program per page touched, read-modify-write only for
//! pages the run covers in part.
//!
//! `BlockDevice` has no flush. By default every `write` ends with the FTL's flush
//! ([`WriteCache::WriteThrough`]; without pending trims the flush programs nothing), so what
//! embedded-sdmmc has written survives a power cut; with `WriteBack` call [`SdmmcDisk::flush`]
//! (e.g. after closing files). `BlockDevice` is also implemented for `&SdmmcDisk`, so the
//! firmware can lend the disk to a `VolumeManager` and keep it for `flush` or to get at the FTL.
//! Power loss per sector: as [`crate::disk`] states.

use core::cell::RefCell;

use embedded_sdmmc::{Block, BlockCount, BlockDevice, BlockIdx};

use crate::disk::SectorDisk;
use crate::error::Error;
use crate::scsi::WriteCache;
use crate::store::PageStore;

/// The adapter as an embedded-sdmmc block device.
pub struct SdmmcDisk<S: PageStore, B: AsMut<[u8]>> {
    disk: RefCell<SectorDisk<S, B>>,
    cache: WriteCache,
}

impl<S: PageStore, B: AsMut<[u8]>> SdmmcDisk<S, B> {
    /// Wraps the adapter, write-through.
    pub fn new(disk: SectorDisk<S, B>) -> Self {
        SdmmcDisk { disk: RefCell::new(disk), cache: WriteCache::WriteThrough }
    }

    /// Sets when writes are flushed.
    pub fn with_write_cache(mut self, cache: WriteCache) -> Self {
        self.cache = cache;
        self
    }

    /// The FTL's flush.
    pub fn flush(&self) -> Result<(), Error> {
        self.disk.try_borrow_mut().map_err(|_| Error::Busy)?.flush()
    }

    /// Gives the adapter back.
    pub fn into_inner(self) -> SectorDisk<S, B> {
        self.disk.into_inner()
    }

    /// Runs `f` on the adapter.
    pub fn with_disk<T>(&self, f: impl FnOnce(&mut SectorDisk<S, B>) -> T) -> Result<T, Error> {
        Ok(f(&mut *self.disk.try_borrow_mut().map_err(|_| Error::Busy)?))
    }

    fn read_blocks(&self, blocks: &mut [Block], start: BlockIdx) -> Result<(), Error> {
        let mut disk = self.disk.try_borrow_mut().map_err(|_| Error::Busy)?;
        disk.read_with(start.0 as u64, blocks.len() as u64, |i, s| {
            blocks[i as usize].contents.copy_from_slice(s);
        })
    }

    fn write_blocks(&self, blocks: &[Block], start: BlockIdx) -> Result<(), Error> {
        let mut disk = self.disk.try_borrow_mut().map_err(|_| Error::Busy)?;
        disk.write_with(start.0 as u64, blocks.len() as u64, |i, s| {
            s.copy_from_slice(&blocks[i as usize].contents);
        })?;
        match self.cache {
            WriteCache::WriteThrough => disk.flush(),
            WriteCache::WriteBack => Ok(()),
        }
    }

    fn block_count(&self) -> Result<BlockCount, Error> {
        let disk = self.disk.try_borrow().map_err(|_| Error::Busy)?;
        Ok(BlockCount(disk.sectors().min(u32::MAX as u64) as u32))
    }
}

impl<S: PageStore, B: AsMut<[u8]>> BlockDevice for SdmmcDisk<S, B> {
    type Error = Error;
    fn read(&self, blocks: &mut [Block], start: BlockIdx) -> Result<(), Error> {
        self.read_blocks(blocks, start)
    }
    fn write(&self, blocks: &[Block], start: BlockIdx) -> Result<(), Error> {
        self.write_blocks(blocks, start)
    }
    fn num_blocks(&self) -> Result<BlockCount, Error> {
        self.block_count()
    }
}

impl<S: PageStore, B: AsMut<[u8]>> BlockDevice for &SdmmcDisk<S, B> {
    type Error = Error;
    fn read(&self, blocks: &mut [Block], start: BlockIdx) -> Result<(), Error> {
        self.read_blocks(blocks, start)
    }
    fn write(&self, blocks: &[Block], start: BlockIdx) -> Result<(), Error> {
        self.write_blocks(blocks, start)
    }
    fn num_blocks(&self) -> Result<BlockCount, Error> {
        self.block_count()
    }
}
