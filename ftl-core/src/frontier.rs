//! Write frontiers and block allocation.
//!
//! Each plane has one open block per [`Stream`] (host, cold, GC). Pages of an open block are
//! taken in order; a full block becomes `Used`. Before a host stream opens a block, GC runs until
//! the plane has its free reserve (GC's own stream never triggers GC, so GC cannot recurse), and a
//! checkpoint is written when enough blocks were opened since the last one (see
//! [`Ftl::ensure_frontier`]). A new block is the free block with the lowest erase count (dynamic
//! wear leveling), erased first if it is dirty.
//!
//! [`Ftl::append`] programs one page with its metadata and codec bytes. A program failure voids
//! the page, sends the block to retirement, and retries on a fresh block with a new sequence
//! number, so a failed program never loses the data being written nor anything already mapped.

use nand_hal::{BlockId, ErrorKind, NandFlash, PageId};

use crate::blocks::BlockState;
use crate::map::MappingTable;
use crate::meta::{PageKind, PageMeta, META_LEN, VOID_OFFSET};
use crate::policy::{PageCodec, PageFormat, PolicySet, Stream};
use crate::{Error, Ftl};

/// Streams (open blocks) per plane.
pub const STREAMS: usize = 3;
const NIL: u32 = u32::MAX;
/// Programs tried for one page before giving up.
const MAX_PROGRAM_ATTEMPTS: u32 = 8;

/// The open block of one stream in one plane.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Frontier {
    /// The open block, or `u32::MAX`.
    pub block: u32,
    /// The next page to program in it.
    pub next_page: u32,
}

impl Frontier {
    /// No open block.
    pub const NONE: Frontier = Frontier { block: NIL, next_page: 0 };
}

/// Where the data of a page being appended is.
pub(crate) enum Source<'a> {
    /// In the caller's slice; the codec bytes are computed.
    Host(&'a [u8]),
    /// In the page buffer's data area; `encode` says whether to compute the codec bytes (false:
    /// they are already in the buffer's spare area, copied raw from another page).
    Buffer { encode: bool },
}

impl<N: NandFlash, P: PolicySet, M: MappingTable> Ftl<'_, N, P, M> {
    pub(crate) fn frontier_index(plane: u32, stream: Stream) -> usize {
        plane as usize * STREAMS + stream as usize
    }

    /// Appends a host data page on `stream` of `plane`.
    pub(crate) fn append_host(
        &mut self,
        plane: u32,
        stream: Stream,
        lpn: u32,
        data: &[u8],
    ) -> Result<PageId, Error> {
        self.append(plane, stream, PageKind::Data, lpn, 0, Source::Host(data))
    }

    /// Programs one page on the frontier of (`plane`, `stream`).
    pub(crate) fn append(
        &mut self,
        plane: u32,
        stream: Stream,
        kind: PageKind,
        tag: u32,
        aux: u32,
        src: Source<'_>,
    ) -> Result<PageId, Error> {
        let d = self.geo.data_bytes as usize;
        let spare_len = META_LEN + self.codec_len;
        let mut encoded = false;
        // Data pages take the format FlexECC asks for; journal and checkpoint pages always correct.
        #[cfg(feature = "flex-ecc")]
        let format = if kind == PageKind::Data { self.flex.write_format } else { PageFormat::Correcting };
        #[cfg(not(feature = "flex-ecc"))]
        let format = PageFormat::Correcting;
        for _ in 0..MAX_PROGRAM_ATTEMPTS {
            let page = self.take_page(plane, stream)?;
            let block = self.geo.block_of(page);
            let meta =
                PageMeta { kind, tag, seq: self.seq, erase_count: self.blocks.get(block).erase_count, aux };
            self.seq += 1;
            meta.encode(&mut self.buf[d..d + META_LEN]);
            if !encoded {
                let (data_area, spare_area) = self.buf.split_at_mut(d);
                let codec_out = &mut spare_area[META_LEN..spare_len];
                match src {
                    Source::Host(data) => self.policies.codec().encode_as(data, codec_out, format),
                    Source::Buffer { encode: true } => {
                        self.policies.codec().encode_as(data_area, codec_out, format)
                    }
                    Source::Buffer { encode: false } => {}
                }
                encoded = true;
            }
            let data: &[u8] = match src {
                Source::Host(data) => data,
                Source::Buffer { .. } => &self.buf[..d],
            };
            self.counters.nand_programs += 1;
            self.dirty = true;
            match self.nand.program_page(page, data, &self.buf[d..d + spare_len]) {
                Ok(()) => return Ok(page),
                Err(e) if nand_hal::Error::kind(&e) == ErrorKind::ProgramFailed => {
                    self.counters.program_failures += 1;
                    self.void_page(page);
                    self.start_retiring(block);
                }
                Err(e) => {
                    self.void_page(page);
                    self.close_block(block);
                    return Err(e.into());
                }
            }
        }
        Err(Error::Device(ErrorKind::ProgramFailed))
    }

    fn close_block(&mut self, block: BlockId) {
        for f in self.frontiers.iter_mut() {
            if f.block == block.0 {
                *f = Frontier::NONE;
            }
        }
        if self.blocks.state(block) == BlockState::Open {
            self.blocks.set_state(block, BlockState::Used);
        }
    }

    /// Best effort: clears the void byte of a page whose program failed, so mount never takes it.
    pub(crate) fn void_page(&mut self, page: PageId) {
        let mut mark = [0xFFu8; VOID_OFFSET + 1];
        mark[VOID_OFFSET] = 0;
        self.counters.nand_programs += 1;
        let _ = self.nand.program_page(page, &[], &mark);
    }

    /// Sends a block whose program failed to retirement: GC moves its data, then marks it bad.
    pub(crate) fn start_retiring(&mut self, block: BlockId) {
        for f in self.frontiers.iter_mut() {
            if f.block == block.0 {
                *f = Frontier::NONE;
            }
        }
        if !matches!(self.blocks.state(block), BlockState::Bad | BlockState::Retiring) {
            self.blocks.set_state(block, BlockState::Retiring);
        }
    }

    /// The next page of a frontier, opening a block if it has none.
    fn take_page(&mut self, plane: u32, stream: Stream) -> Result<PageId, Error> {
        let i = Self::frontier_index(plane, stream);
        if self.frontiers[i].block == NIL {
            self.open_block(plane, stream)?;
        }
        let f = &mut self.frontiers[i];
        let block = BlockId(f.block);
        let page = self.geo.page(block, f.next_page);
        f.next_page += 1;
        if f.next_page == self.geo.pages_per_block {
            *f = Frontier::NONE;
            self.blocks.set_state(block, BlockState::Used);
        }
        Ok(page)
    }

    pub(crate) fn gc_plane(&self, plane: u32) -> u32 {
        let open = |p: u32| self.frontiers[Self::frontier_index(p, Stream::Gc)].block != NIL;
        if open(plane) || self.blocks.free_count(plane) > 0 {
            return plane;
        }
        let planes = 0..self.geo.total_planes();
        planes
            .clone()
            .find(|&p| open(p))
            .or_else(|| planes.max_by_key(|&p| self.blocks.free_count(p)))
            .unwrap_or(plane)
    }

    /// Makes sure the frontier of (`plane`, `stream`) has an open block. This is the only place
    /// that runs GC (for host streams, when the plane is below its free reserve) and writes
    /// periodic checkpoints; both use the page buffer, so it is called only where the buffer holds
    /// nothing: before a host page is appended, before GC reads a page to move it, before a
    /// journal page is assembled.
    pub(crate) fn ensure_frontier(&mut self, plane: u32, stream: Stream) -> Result<(), Error> {
        let i = Self::frontier_index(plane, stream);
        if self.frontiers[i].block != NIL {
            return Ok(());
        }
        if stream != Stream::Gc {
            self.ensure_free(plane)?;
        }
        if self.ckpt.blocks_since >= self.cfg.checkpoint_interval_blocks {
            self.write_checkpoint()?;
        }
        if self.frontiers[i].block == NIL {
            self.open_block(plane, stream)?;
        }
        Ok(())
    }

    /// Opens a fresh block on a frontier (no GC, no checkpoint: safe with data in the buffer).
    fn open_block(&mut self, plane: u32, stream: Stream) -> Result<(), Error> {
        let b = self.alloc_block(plane)?;
        self.blocks.set_state(b, BlockState::Open);
        self.frontiers[Self::frontier_index(plane, stream)] = Frontier { block: b.0, next_page: 0 };
        self.ckpt.blocks_since += 1;
        Ok(())
    }

    /// Takes the coolest free block of `plane`, erased.
    pub(crate) fn alloc_block(&mut self, plane: u32) -> Result<BlockId, Error> {
        loop {
            let b = self.blocks.coolest_free(plane).ok_or(Error::NoSpace)?;
            if self.blocks.state(b) == BlockState::Dirty {
                self.erase_free_block(b)?;
                if self.blocks.state(b) == BlockState::Bad {
                    continue;
                }
            }
            return Ok(b);
        }
    }

    /// Runs GC in `plane` until it has its free reserve.
    pub(crate) fn ensure_free(&mut self, plane: u32) -> Result<(), Error> {
        let mut rounds = 0u32;
        while self.blocks.free_count(plane) < self.cfg.gc_free_threshold {
            if !self.gc_one(plane)? {
                break;
            }
            rounds += 1;
            if rounds > self.geo.total_blocks() {
                return Err(Error::NoSpace);
            }
        }
        Ok(())
    }
}
