//! Loading a checkpoint at mount: the newest complete one (or, from the anchor, the one a record
//! names), word by word through the same layout the writer uses (`format.rs`). A page that does
//! not check out (metadata, codec, CRC over the stream) makes the checkpoint incomplete
//! (`Ok(None)`: the caller tries an older one or surveys); a header of another map kind is
//! `Error::Config`, one that disagrees with the FTL's geometry or configuration `Error::Corrupt`.
//!
//! Cost: one page read per checkpoint page.

use nand_hal::{BlockId, NandFlash};

use super::checkpoint_words;
use super::format::{part, BlockWord, Header, Part, HEADER_WORDS, WORD_DATA, WORD_ERASED};
use crate::anchor::ANCHOR_BLOCKS;
use crate::blocks::BlockState;
use crate::crc32c::crc32c_append;
use crate::frontier::Frontier;
use crate::map::MappingTable;
use crate::meta::{PageKind, PageMeta, SpareState, META_LEN};
use crate::policy::{PageCodec, PolicySet};
use crate::recovery::FLAG_CKPT_BAD;
use crate::{Error, Ftl};

impl<N: NandFlash, P: PolicySet, M: MappingTable> Ftl<'_, N, P, M> {
    /// Mount step 2 after a survey (see `recovery.rs`): the newest checkpoint whose pages all
    /// check out, older ones in turn when a cut tore the newest. Returns (checkpoint sequence,
    /// next sequence it recorded).
    pub(crate) fn load_newest_checkpoint(&mut self) -> Result<(u64, u64), Error> {
        let mut below = u64::MAX;
        let mut any_valid = false;
        loop {
            let mut best: Option<u64> = None;
            for (b, info) in self.blocks.iter() {
                if info.state() == BlockState::CheckpointNew {
                    let s = self.blocks.raw_scratch(b);
                    if s < below && best.is_none_or(|x| s > x) {
                        best = Some(s);
                    }
                }
                if info.state() == BlockState::Used || info.state() == BlockState::CheckpointNew {
                    any_valid = true;
                }
            }
            let Some(seq) = best else {
                return Err(if any_valid { Error::Corrupt } else { Error::NotFormatted });
            };
            if let Some(next) = self.load_checkpoint(seq, false)? {
                return Ok((seq, next));
            }
            // Torn or damaged: undo what it loaded and try the one before.
            self.map.clear();
            for b in 0..self.geo.total_blocks() {
                self.blocks.set_flags(BlockId(b), FLAG_CKPT_BAD, false);
            }
            self.frontiers = [Frontier::NONE; crate::config::MAX_TOTAL_PLANES * crate::frontier::STREAMS];
            below = seq;
        }
    }

    /// Loads checkpoint `seq` from the blocks the block table marks `CheckpointNew` with that
    /// sequence (in their index order); `Ok(None)` if it is incomplete or damaged, else the next
    /// sequence it recorded. `fast`: the block words set the block table (states and valid
    /// counts), as the anchor's fast mount and the mount from the pool need; otherwise only
    /// erase counts and bad flags.
    pub(crate) fn load_checkpoint(&mut self, seq: u64, fast: bool) -> Result<Option<u64>, Error> {
        let d = self.geo.data_bytes as usize;
        let ppb = self.geo.pages_per_block;
        let spare_len = META_LEN + self.codec_len;
        let total_words = checkpoint_words(&self.geo, self.map.section_words());
        let per_page = (d / 4) as u64;
        let mut crc = 0u32;
        let mut total_pages = u32::MAX;
        let mut next_seq = 0;
        let mut block: Option<BlockId> = None;
        let mut p = 0u32;
        while p < total_pages {
            if p.is_multiple_of(ppb) {
                let want = (p / ppb) as u16;
                block = self.blocks.iter().find_map(|(b, i)| {
                    (i.state() == BlockState::CheckpointNew
                        && i.valid() == want
                        && self.blocks.raw_scratch(b) == seq)
                        .then_some(b)
                });
            }
            let Some(b) = block else { return Ok(None) };
            let page = self.geo.page(b, p % ppb);
            self.counters.nand_reads += 1;
            {
                let (data, spare) = self.buf.split_at_mut(d);
                self.nand.read_page(page, data, &mut spare[..spare_len])?;
            }
            let meta = match PageMeta::decode(&self.buf[d..d + spare_len]) {
                SpareState::Valid(m) if m.kind == PageKind::Checkpoint && m.seq == seq && m.tag == p => m,
                _ => return Ok(None),
            };
            {
                let (data, spare) = self.buf.split_at_mut(d);
                if self.policies.codec().decode(data, &spare[META_LEN..spare_len]).is_err() {
                    return Ok(None);
                }
            }
            if p == 0 {
                total_pages = meta.aux;
                let mut words = [0u32; HEADER_WORDS as usize];
                for (i, w) in words.iter_mut().enumerate() {
                    *w = self.checkpoint_buf_word(i);
                }
                let Some(header) = Header::parse(&words) else { return Ok(None) };
                next_seq = header.next_seq;
                let want = Header::new(&self.geo, self.cfg.logical_pages, &self.map, seq, next_seq);
                if header.map_kind != want.map_kind {
                    // Formatted with the other kind of map.
                    return Err(Error::Config);
                }
                if header != want {
                    return Err(Error::Corrupt);
                }
            }
            let first = p as u64 * per_page;
            let body = (total_words - 1).saturating_sub(first).min(per_page) as usize;
            crc = crc32c_append(crc, &self.buf[..body * 4]);
            for j in 0..body {
                let w = self.checkpoint_buf_word(j);
                self.apply_checkpoint_word(first + j as u64, w, fast);
            }
            if body < per_page as usize {
                let stored = self.checkpoint_buf_word(body);
                return Ok((crc == stored && p + 1 == total_pages).then_some(next_seq));
            }
            p += 1;
        }
        Ok(None)
    }

    /// Word `j` of the page in the page buffer.
    fn checkpoint_buf_word(&self, j: usize) -> u32 {
        let o = j * 4;
        u32::from_le_bytes([self.buf[o], self.buf[o + 1], self.buf[o + 2], self.buf[o + 3]])
    }

    /// Takes word `i` of the stream into the RAM state.
    fn apply_checkpoint_word(&mut self, i: u64, w: u32, fast: bool) {
        match part(self.geo.total_blocks(), i) {
            Part::Header(_) => {}
            Part::Frontier { slot, next_page } => {
                let f = &mut self.frontiers[slot];
                if next_page {
                    f.next_page = w;
                } else {
                    f.block = w;
                }
            }
            Part::Block(b) => {
                let b = BlockId(b);
                let word = BlockWord::parse(w);
                let ec = word.erase_count.max(self.blocks.get(b).erase_count());
                self.blocks.set_erase_count(b, ec);
                if fast {
                    self.apply_block_word(b, word, ec);
                } else if word.bad {
                    self.blocks.set_flags(b, FLAG_CKPT_BAD, true);
                }
            }
            Part::Section(k) => {
                if k < self.map.section_words() {
                    self.map.import_section(k, w);
                }
            }
        }
    }

    /// A block word of the checkpoint the fast mount loads: the block's state and valid count
    /// (the checkpoint's own blocks, set from the anchor's list, and the anchor region stay).
    fn apply_block_word(&mut self, b: BlockId, word: BlockWord, ec: u32) {
        let state = self.blocks.state(b);
        if b.0 < ANCHOR_BLOCKS || state == BlockState::CheckpointNew {
            return;
        }
        if word.bad {
            self.blocks.raw_set(b, BlockState::Bad, ec, 0);
            return;
        }
        let valid = word.valid.min(self.geo.pages_per_block) as u16;
        match word.state {
            WORD_ERASED => self.blocks.raw_set(b, BlockState::Free, ec, 0),
            WORD_DATA => self.blocks.raw_set(b, BlockState::Used, ec, valid),
            // A block of this checkpoint the record does not list (`WORD_THIS`), or one to be
            // erased.
            _ => self.blocks.raw_set(b, BlockState::Dirty, ec, 0),
        }
    }
}
