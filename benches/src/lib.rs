//! Criterion benchmarks of the FTL hot paths live in `benches/` (`cargo bench -p ftl-benches`);
//! this library only holds what they share.

use ftl_core::anchor::ANCHOR_BLOCKS;
use nand_hal::{BlockId, ErrorKind, ErrorType, Geometry, NandFlash, PageId};

/// A bare NAND for measuring the FTL's own CPU cost: it stores only spare areas (and the data of
/// the anchor blocks, which the FTL reads back: `ftl_core::anchor::ANCHOR_BLOCKS`), checks nothing,
/// keeps no counters and no timing, and returns 0xFF data elsewhere. The emulator in metadata-only mode is
/// the honest device model; this is the floor under it, so the benchmark can report the FTL's
/// cost with the device's cost taken out.
pub struct SpareStore {
    geo: Geometry,
    spare: Vec<u8>,
    /// Data of the pages of the anchor blocks (the first `ANCHOR_BLOCKS` blocks).
    anchor_data: Vec<u8>,
}

impl SpareStore {
    /// An erased device.
    pub fn new(geo: Geometry) -> Self {
        let anchor_pages = (ANCHOR_BLOCKS * geo.pages_per_block) as usize;
        SpareStore {
            geo,
            spare: vec![0xFF; geo.total_pages() as usize * geo.spare_bytes as usize],
            anchor_data: vec![0xFF; anchor_pages * geo.data_bytes as usize],
        }
    }
    fn anchor_data_of(&mut self, page: PageId) -> Option<&mut [u8]> {
        let d = self.geo.data_bytes as usize;
        let o = page.0 as usize * d;
        self.anchor_data.get_mut(o..o + d)
    }
    fn spare_of(&mut self, page: PageId) -> Result<&mut [u8], ErrorKind> {
        let s = self.geo.spare_bytes as usize;
        let o = page.0 as usize * s;
        self.spare.get_mut(o..o + s).ok_or(ErrorKind::OutOfRange)
    }
}

impl ErrorType for SpareStore {
    type Error = ErrorKind;
}

impl NandFlash for SpareStore {
    fn geometry(&self) -> Geometry {
        self.geo
    }
    fn read_page(&mut self, page: PageId, data: &mut [u8], spare: &mut [u8]) -> Result<(), ErrorKind> {
        match self.anchor_data_of(page) {
            Some(stored) => data.copy_from_slice(&stored[..data.len()]),
            None => data.fill(0xFF),
        }
        let n = spare.len();
        spare.copy_from_slice(&self.spare_of(page)?[..n]);
        Ok(())
    }
    fn program_page(&mut self, page: PageId, data: &[u8], spare: &[u8]) -> Result<(), ErrorKind> {
        if let Some(stored) = self.anchor_data_of(page) {
            for (d, s) in stored.iter_mut().zip(data) {
                *d &= *s;
            }
        }
        let dst = self.spare_of(page)?;
        for (d, s) in dst.iter_mut().zip(spare) {
            *d &= *s;
        }
        Ok(())
    }
    fn erase_block(&mut self, block: BlockId) -> Result<(), ErrorKind> {
        let s = self.geo.spare_bytes as usize;
        let ppb = self.geo.pages_per_block as usize;
        let o = block.0 as usize * ppb * s;
        self.spare.get_mut(o..o + ppb * s).ok_or(ErrorKind::OutOfRange)?.fill(0xFF);
        let d = self.geo.data_bytes as usize;
        if let Some(stored) =
            self.anchor_data.get_mut(block.0 as usize * ppb * d..(block.0 as usize + 1) * ppb * d)
        {
            stored.fill(0xFF);
        }
        Ok(())
    }
    fn is_bad(&mut self, _block: BlockId) -> Result<bool, ErrorKind> {
        Ok(false)
    }
    fn mark_bad(&mut self, _block: BlockId) -> Result<(), ErrorKind> {
        Ok(())
    }
}
