//! [`PageStore`]: what the adapter needs from below, whole logical pages. `ftl_core::Ftl`
//! implements it with its public `read` / `write` / `trim` / `flush`; a test can implement it
//! over RAM.

use ftl_core::policy::PolicySet;
use ftl_core::{Ftl, MappingTable};
use nand_hal::NandFlash;

/// A device of whole logical pages, each written atomically (after a power cut a page reads as
/// its content at the last `flush` or as a content written since, never a mix).
pub trait PageStore {
    /// Bytes per page.
    fn page_bytes(&self) -> usize;
    /// Number of logical pages.
    fn pages(&self) -> u32;
    /// Reads whole pages from `page` into `buf` (a multiple of the page size).
    fn read_pages(&mut self, page: u32, buf: &mut [u8]) -> Result<(), ftl_core::Error>;
    /// Writes whole pages from `page`.
    fn write_pages(&mut self, page: u32, data: &[u8]) -> Result<(), ftl_core::Error>;
    /// Discards `count` pages from `page`: they read as zeros.
    fn trim_pages(&mut self, page: u32, count: u32) -> Result<(), ftl_core::Error>;
    /// Makes every completed write and trim durable.
    fn flush(&mut self) -> Result<(), ftl_core::Error>;
}

impl<N: NandFlash, P: PolicySet, M: MappingTable> PageStore for Ftl<'_, N, P, M> {
    fn page_bytes(&self) -> usize {
        Ftl::page_bytes(self) as usize
    }
    fn pages(&self) -> u32 {
        self.capacity_pages()
    }
    fn read_pages(&mut self, page: u32, buf: &mut [u8]) -> Result<(), ftl_core::Error> {
        self.read(page, buf)
    }
    fn write_pages(&mut self, page: u32, data: &[u8]) -> Result<(), ftl_core::Error> {
        self.write(page, data)
    }
    fn trim_pages(&mut self, page: u32, count: u32) -> Result<(), ftl_core::Error> {
        self.trim(page, count)
    }
    fn flush(&mut self) -> Result<(), ftl_core::Error> {
        Ftl::flush(self)
    }
}

impl<S: PageStore + ?Sized> PageStore for &mut S {
    fn page_bytes(&self) -> usize {
        (**self).page_bytes()
    }
    fn pages(&self) -> u32 {
        (**self).pages()
    }
    fn read_pages(&mut self, page: u32, buf: &mut [u8]) -> Result<(), ftl_core::Error> {
        (**self).read_pages(page, buf)
    }
    fn write_pages(&mut self, page: u32, data: &[u8]) -> Result<(), ftl_core::Error> {
        (**self).write_pages(page, data)
    }
    fn trim_pages(&mut self, page: u32, count: u32) -> Result<(), ftl_core::Error> {
        (**self).trim_pages(page, count)
    }
    fn flush(&mut self) -> Result<(), ftl_core::Error> {
        (**self).flush()
    }
}
