//! Checkpoints: the map's section, the block table's erase counts and bad flags, and the open
//! write frontiers, written to dedicated blocks so that mount reads them instead of every page.
//!
//! A checkpoint is a stream of little-endian `u32` words over whole pages:
//! header (16 words: magic, version, geometry, logical pages, page count, checkpoint sequence,
//! next sequence, frontier words, map kind), frontiers (`2 * MAX_TOTAL_PLANES * STREAMS` words:
//! block, next page), one word per block (bits 0..20 erase count, 20..29 valid pages, 29..31
//! state: 0 erased, 1 to be erased, 2 holding data, 3 this checkpoint; bit 31 bad: what the
//! anchor's fast mount takes as the block table), the map's section (a flat
//! map: one word per logical page; a flash-resident map: its directory, one word per map page,
//! every dirty map page written back first), and a CRC-32C of all words before it. Each page carries `PageKind::Checkpoint` metadata with the checkpoint's
//! sequence number, its page index and the page count, and the codec's protection.
//!
//! Where: `format.rs` defines the stream once (header fields, parts, block words); this file
//! writes checkpoints (when, where, how); `reader.rs` loads them at mount.
//!
//! Power-loss contract: the previous checkpoint's blocks are released only after the last page of
//! the new one is programmed, so at every instant one complete checkpoint exists. Every page
//! written after a checkpoint has a larger sequence number than it; every page before, a smaller.
//! Writing a checkpoint also makes pending trims durable (the map already holds them) and ends the
//! life of every journal page.

mod format;
mod reader;

pub use format::{
    block_word, checkpoint_pages, checkpoint_words, field, BAD_BIT, EC_MASK, FRONTIER_WORDS, HEADER_LEN,
    HEADER_WORDS, MAGIC, MAP_KIND_WORD, MAX_PACKED_VALID, STATE_SHIFT, VALID_SHIFT, VERSION, WORD_DATA,
    WORD_DIRTY, WORD_ERASED, WORD_THIS,
};

use nand_hal::{BlockId, ErrorKind, NandFlash};

use crate::blocks::{BlockState, FLAG_LIVE_JOURNAL};
use crate::config::MAX_TOTAL_PLANES;
use crate::crc32c::crc32c_append;
use crate::map::{MappingTable, UNMAPPED};
use crate::meta::{PageKind, PageMeta, META_LEN};
use crate::policy::{PageCodec, PolicySet};
use crate::{Error, Ftl};
pub(crate) use format::Header;
use format::{part, section_start, Part};

/// Program attempts of one checkpoint (a failed program retires its block and starts over).
const ATTEMPTS: u32 = 4;

/// Which checkpoint is current and how far the log has grown since.
#[derive(Copy, Clone, Debug, Default)]
pub struct CheckpointState {
    /// Sequence number of the current checkpoint.
    pub seq: u64,
    /// Data blocks opened since it (bounds the replay of a mount).
    pub blocks_since: u32,
}

impl<N: NandFlash, P: PolicySet, M: MappingTable> Ftl<'_, N, P, M> {
    /// The `i`-th word of the checkpoint stream (CRC excluded).
    fn checkpoint_word(&self, i: u64, header: &[u32; HEADER_WORDS as usize]) -> u32 {
        match part(self.geo.total_blocks(), i) {
            Part::Header(k) => header[k],
            Part::Frontier { slot, next_page } => {
                let f = &self.frontiers[slot];
                if next_page {
                    f.next_page
                } else {
                    f.block
                }
            }
            Part::Block(b) => block_word(self.blocks.get(BlockId(b))),
            Part::Section(k) => {
                let mut w = [UNMAPPED];
                self.map.export_section(k, &mut w);
                w[0]
            }
        }
    }

    /// Serializes `count` words of the stream from word `first` into the page buffer (the map
    /// section in bulk).
    fn fill_checkpoint_words(&mut self, first: u64, count: usize, header: &[u32; HEADER_WORDS as usize]) {
        let map_start = section_start(self.geo.total_blocks());
        let mut j = 0;
        while j < count && first + (j as u64) < map_start {
            let w = self.checkpoint_word(first + j as u64, header);
            self.buf[j * 4..j * 4 + 4].copy_from_slice(&w.to_le_bytes());
            j += 1;
        }
        let mut words = [0u32; 64];
        while j < count {
            let n = (count - j).min(words.len());
            let lpn = (first + j as u64 - map_start) as u32;
            self.map.export_section(lpn, &mut words[..n]);
            self.dedup_export(&mut words[..n]);
            for (k, w) in words[..n].iter().enumerate() {
                let o = (j + k) * 4;
                self.buf[o..o + 4].copy_from_slice(&w.to_le_bytes());
            }
            j += n;
        }
    }

    /// Whether a periodic checkpoint is due (`checkpoint_interval_blocks` opened since the last,
    /// or the mount pool asks to be renewed).
    pub(crate) fn checkpoint_due(&self) -> bool {
        self.ckpt.blocks_since >= self.cfg.checkpoint_interval_blocks || self.pool.renew_due
    }

    /// Writes the periodic checkpoint if it is due.
    pub(crate) fn checkpoint_if_due(&mut self) -> Result<(), Error> {
        if self.checkpoint_due() {
            self.write_checkpoint()?;
        }
        Ok(())
    }

    /// Writes a checkpoint of the current state and makes it current.
    pub(crate) fn write_checkpoint(&mut self) -> Result<(), Error> {
        // The checkpoint's blocks (and a block for the map's write-back) come from the mount pool.
        let need = checkpoint_pages(&self.geo, self.map.section_words()).div_ceil(self.geo.pages_per_block);
        self.pool_reserve(need + 1)?;
        // A flash-resident map's checkpoint stores only the directory: every entry goes to its
        // map page first (each with a sequence number below the checkpoint's).
        self.map_flush()?;
        let mut last_err = Error::Device(ErrorKind::ProgramFailed);
        for _ in 0..ATTEMPTS {
            match self.try_write_checkpoint() {
                Ok(true) => return Ok(()),
                Ok(false) => continue,
                Err(e) => {
                    last_err = e;
                    break;
                }
            }
        }
        self.release_blocks(BlockState::CheckpointNew);
        Err(last_err)
    }

    /// One attempt; `Ok(false)` when a program failed (the block is retired, try again).
    fn try_write_checkpoint(&mut self) -> Result<bool, Error> {
        let d = self.geo.data_bytes as usize;
        let ppb = self.geo.pages_per_block;
        let spare_len = META_LEN + self.codec_len;
        let ckpt_seq = self.seq;
        self.seq += 1;
        let header = Header::new(&self.geo, self.cfg.logical_pages, &self.map, ckpt_seq, self.seq).to_words();
        let total_words = checkpoint_words(&self.geo, self.map.section_words());
        let total_pages = checkpoint_pages(&self.geo, self.map.section_words());
        let per_page = (d / 4) as u64;
        let mut crc = 0u32;
        let mut block = BlockId(0);
        for p in 0..total_pages {
            // Words of the stream on this page (the CRC word excluded), then the CRC over them.
            let first = p as u64 * per_page;
            let body = (total_words - 1).saturating_sub(first).min(per_page) as usize;
            self.fill_checkpoint_words(first, body, &header);
            crc = crc32c_append(crc, &self.buf[..body * 4]);
            self.buf[body * 4..d].fill(0);
            if body < per_page as usize {
                let c = crc;
                self.buf[body * 4..body * 4 + 4].copy_from_slice(&c.to_le_bytes());
            }
            if p % ppb == 0 {
                block = match self.alloc_checkpoint_block() {
                    Ok(b) => b,
                    Err(e) => {
                        self.release_blocks(BlockState::CheckpointNew);
                        return Err(e);
                    }
                };
                self.blocks.set_state(block, BlockState::CheckpointNew);
            }
            let page = self.geo.page(block, p % ppb);
            let meta = PageMeta {
                kind: PageKind::Checkpoint,
                tag: p,
                seq: ckpt_seq,
                erase_count: self.blocks.get(block).erase_count(),
                aux: total_pages,
            };
            let (data, spare) = self.buf.split_at_mut(d);
            meta.encode(&mut spare[..META_LEN]);
            self.policies.codec().encode(data, &mut spare[META_LEN..spare_len]);
            self.counters.nand_programs += 1;
            self.counters.checkpoint_pages += 1;
            match self.nand.program_page(page, &self.buf[..d], &self.buf[d..d + spare_len]) {
                Ok(()) => {}
                Err(e) if nand_hal::Error::kind(&e) == ErrorKind::ProgramFailed => {
                    self.counters.program_failures += 1;
                    self.retire_now(block);
                    self.release_blocks(BlockState::CheckpointNew);
                    return Ok(false);
                }
                Err(e) => {
                    self.release_blocks(BlockState::CheckpointNew);
                    return Err(e.into());
                }
            }
        }
        // Commit: the new checkpoint is complete on flash; the old one may go.
        self.release_blocks(BlockState::Checkpoint);
        for b in 0..self.geo.total_blocks() {
            if self.blocks.state(BlockId(b)) == BlockState::CheckpointNew {
                self.blocks.set_state(BlockId(b), BlockState::Checkpoint);
            }
        }
        self.ckpt = crate::checkpoint::CheckpointState { seq: ckpt_seq, blocks_since: 0 };
        // Pages failed programs left unvoided are older than this checkpoint: no mount replays them.
        self.torn = crate::frontier::TornPages::NONE;
        self.blocks.clear_flags_everywhere(FLAG_LIVE_JOURNAL);
        self.trims.clear();
        self.dedup_checkpointed();
        self.counters.checkpoints += 1;
        self.dirty = false;
        // Before anything else changes on flash: the record naming this checkpoint and a fresh
        // mount pool (see `pool.rs`).
        self.pool_renew()?;
        Ok(true)
    }

    /// A free block for the checkpoint, from the plane with the most free blocks; if erase
    /// failures empty that plane, from the next one. `Error::NoSpace` only when no plane has a
    /// free block left.
    fn alloc_checkpoint_block(&mut self) -> Result<BlockId, Error> {
        loop {
            let plane = self.checkpoint_plane();
            if self.allocatable(plane) == 0 {
                return Err(Error::NoSpace);
            }
            // `NoSpace` here: every free block of the plane failed its erase and is now bad.
            match self.alloc_block(plane) {
                Err(Error::NoSpace) => continue,
                r => return r,
            }
        }
    }

    /// The plane the next checkpoint block comes from: the one with the most free blocks, and
    /// among those one holding more blocks of the current checkpoint than of the new one (so
    /// that, once the old one is released, the checkpoint changed no plane's free count: paced
    /// GC then has no sudden deficit to make up).
    fn checkpoint_plane(&self) -> u32 {
        let mut old = [0u32; MAX_TOTAL_PLANES];
        let mut new = [0u32; MAX_TOTAL_PLANES];
        for (b, info) in self.blocks.iter() {
            let pl = self.geo.plane_index(b) as usize;
            match info.state() {
                BlockState::Checkpoint => old[pl % MAX_TOTAL_PLANES] += 1,
                BlockState::CheckpointNew => new[pl % MAX_TOTAL_PLANES] += 1,
                _ => {}
            }
        }
        (0..self.geo.total_planes())
            .max_by_key(|&pl| {
                let i = pl as usize % MAX_TOTAL_PLANES;
                // (Free blocks decide, as without the mount pool; a plane must have one the
                // allocator may open.)
                (self.allocatable(pl) > 0, self.blocks.free_count(pl), old[i] > new[i])
            })
            .unwrap_or(0)
    }

    /// Every block in `state` becomes dirty (free, erased before its next use).
    fn release_blocks(&mut self, state: BlockState) {
        for b in 0..self.geo.total_blocks() {
            if self.blocks.state(BlockId(b)) == state {
                self.blocks.set_state(BlockId(b), BlockState::Dirty);
            }
        }
    }
}
