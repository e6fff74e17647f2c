//! The checkpoint stream's format, defined once: the writer (`mod.rs`) and the reader
//! (`reader.rs`) both go through [`part`], [`Header`] and [`BlockWord`], so a field cannot be
//! written at one place and read at another.
//!
//! The stream is little-endian `u32` words over whole pages (layout in docs/format.md):
//!
//! | words | part |
//! |---|---|
//! | `0..HEADER_WORDS` | the header, fields in [`field`] (64-bit values low word first) |
//! | next `FRONTIER_WORDS` | per frontier slot (plane-major, `STREAMS` per plane): block, next page |
//! | next `total_blocks` | one [`BlockWord`] per block |
//! | next `section_words` | the map's section (a flat map's entries, a flash-resident map's directory) |
//! | last | CRC-32C of every word before it |

use nand_hal::Geometry;

use crate::blocks::{BlockInfo, BlockState};
use crate::config::MAX_TOTAL_PLANES;
use crate::frontier::STREAMS;
use crate::map::MappingTable;

/// Header words.
pub const HEADER_WORDS: u32 = 16;
/// Header bytes.
pub const HEADER_LEN: usize = HEADER_WORDS as usize * 4;
/// "FLCK".
pub const MAGIC: u32 = 0x4B43_4C46;
/// Checkpoint format version.
pub const VERSION: u32 = 2;
/// Frontier words.
pub const FRONTIER_WORDS: u32 = (2 * MAX_TOTAL_PLANES * STREAMS) as u32;
/// Header word saying which map wrote the checkpoint (0: flat, 1: flash-resident).
pub const MAP_KIND_WORD: usize = field::MAP_KIND.start;
/// Bit 31 of a block word: the block is bad.
pub const BAD_BIT: u32 = 1 << 31;
/// Erase-count bits of a block word (bits 0..20).
pub const EC_MASK: u32 = crate::blocks::MAX_TABLE_ERASE_COUNT;
/// First bit of a block word's valid count (9 bits).
pub const VALID_SHIFT: u32 = 20;
/// First bit of a block word's state (2 bits).
pub const STATE_SHIFT: u32 = 29;
/// Largest valid count a block word holds (9 bits): the fast mount needs
/// `pages_per_block <= MAX_PACKED_VALID`.
pub const MAX_PACKED_VALID: u32 = 511;
/// Block-word states (bits 29..31): erased.
pub const WORD_ERASED: u32 = 0;
/// To be erased before use.
pub const WORD_DIRTY: u32 = 1;
/// Holding data (closed, open, a victim or retiring).
pub const WORD_DATA: u32 = 2;
/// A block of this checkpoint.
pub const WORD_THIS: u32 = 3;

/// The header's fields: word ranges within the header.
pub mod field {
    use core::ops::Range;

    /// [`super::MAGIC`].
    pub const MAGIC: Range<usize> = 0..1;
    /// [`super::VERSION`].
    pub const VERSION: Range<usize> = 1..2;
    /// The geometry's data bytes per page.
    pub const DATA_BYTES: Range<usize> = 2..3;
    /// The geometry's spare bytes per page.
    pub const SPARE_BYTES: Range<usize> = 3..4;
    /// The geometry's pages per block.
    pub const PAGES_PER_BLOCK: Range<usize> = 4..5;
    /// The geometry's blocks.
    pub const TOTAL_BLOCKS: Range<usize> = 5..6;
    /// `Config::logical_pages`.
    pub const LOGICAL_PAGES: Range<usize> = 6..7;
    /// Pages of this checkpoint.
    pub const PAGES: Range<usize> = 7..8;
    /// The checkpoint's sequence number (every page written after it has a larger one).
    pub const CHECKPOINT_SEQ: Range<usize> = 8..10;
    /// The sequence number the FTL continues from.
    pub const NEXT_SEQ: Range<usize> = 10..12;
    /// [`super::FRONTIER_WORDS`].
    pub const FRONTIER_WORDS: Range<usize> = 12..13;
    /// Which map wrote it: 0 flat, 1 flash-resident.
    pub const MAP_KIND: Range<usize> = 13..14;
    /// Zero.
    pub const RESERVED: Range<usize> = 14..16;
}

/// A checkpoint header.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) struct Header {
    pub version: u32,
    pub data_bytes: u32,
    pub spare_bytes: u32,
    pub pages_per_block: u32,
    pub total_blocks: u32,
    pub logical_pages: u32,
    pub pages: u32,
    pub ckpt_seq: u64,
    pub next_seq: u64,
    pub frontier_words: u32,
    pub map_kind: u32,
    pub reserved: [u32; 2],
}

impl Header {
    /// The header a checkpoint of this FTL and map carries.
    pub(crate) fn new(
        geo: &Geometry,
        logical_pages: u32,
        map: &impl MappingTable,
        ckpt_seq: u64,
        next_seq: u64,
    ) -> Self {
        Header {
            version: VERSION,
            data_bytes: geo.data_bytes,
            spare_bytes: geo.spare_bytes,
            pages_per_block: geo.pages_per_block,
            total_blocks: geo.total_blocks(),
            logical_pages,
            pages: checkpoint_pages(geo, map.section_words()),
            ckpt_seq,
            next_seq,
            frontier_words: FRONTIER_WORDS,
            map_kind: map.on_flash() as u32,
            reserved: [0; 2],
        }
    }

    /// The header's words.
    pub(crate) fn to_words(self) -> [u32; HEADER_WORDS as usize] {
        let mut w = [0u32; HEADER_WORDS as usize];
        w[field::MAGIC.start] = MAGIC;
        w[field::VERSION.start] = self.version;
        w[field::DATA_BYTES.start] = self.data_bytes;
        w[field::SPARE_BYTES.start] = self.spare_bytes;
        w[field::PAGES_PER_BLOCK.start] = self.pages_per_block;
        w[field::TOTAL_BLOCKS.start] = self.total_blocks;
        w[field::LOGICAL_PAGES.start] = self.logical_pages;
        w[field::PAGES.start] = self.pages;
        put_u64(&mut w, field::CHECKPOINT_SEQ, self.ckpt_seq);
        put_u64(&mut w, field::NEXT_SEQ, self.next_seq);
        w[field::FRONTIER_WORDS.start] = self.frontier_words;
        w[field::MAP_KIND.start] = self.map_kind;
        w[field::RESERVED].copy_from_slice(&self.reserved);
        w
    }

    /// Parses header words; `None` if the magic is not a checkpoint's (every other field is
    /// taken as it is: the reader compares the whole header with the one it expects).
    pub(crate) fn parse(w: &[u32; HEADER_WORDS as usize]) -> Option<Self> {
        if w[field::MAGIC.start] != MAGIC {
            return None;
        }
        Some(Header {
            version: w[field::VERSION.start],
            data_bytes: w[field::DATA_BYTES.start],
            spare_bytes: w[field::SPARE_BYTES.start],
            pages_per_block: w[field::PAGES_PER_BLOCK.start],
            total_blocks: w[field::TOTAL_BLOCKS.start],
            logical_pages: w[field::LOGICAL_PAGES.start],
            pages: w[field::PAGES.start],
            ckpt_seq: get_u64(w, field::CHECKPOINT_SEQ),
            next_seq: get_u64(w, field::NEXT_SEQ),
            frontier_words: w[field::FRONTIER_WORDS.start],
            map_kind: w[field::MAP_KIND.start],
            reserved: [w[field::RESERVED.start], w[field::RESERVED.start + 1]],
        })
    }
}

fn put_u64(w: &mut [u32], r: core::ops::Range<usize>, v: u64) {
    w[r.start] = v as u32;
    w[r.start + 1] = (v >> 32) as u32;
}

fn get_u64(w: &[u32], r: core::ops::Range<usize>) -> u64 {
    w[r.start] as u64 | (w[r.start + 1] as u64) << 32
}

/// Which part of the stream a word belongs to (the CRC excluded).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) enum Part {
    /// Header word `i`.
    Header(usize),
    /// Frontier slot `slot`: its block (`next_page` false) or its next page.
    Frontier { slot: usize, next_page: bool },
    /// The word of block `b`.
    Block(u32),
    /// Word `i` of the map's section.
    Section(u32),
}

/// The part word `i` of the stream belongs to, for a device of `total_blocks` blocks.
pub(crate) fn part(total_blocks: u32, i: u64) -> Part {
    let mut i = i;
    if i < HEADER_WORDS as u64 {
        return Part::Header(i as usize);
    }
    i -= HEADER_WORDS as u64;
    if i < FRONTIER_WORDS as u64 {
        return Part::Frontier { slot: (i / 2) as usize, next_page: i % 2 == 1 };
    }
    i -= FRONTIER_WORDS as u64;
    if i < total_blocks as u64 {
        return Part::Block(i as u32);
    }
    Part::Section((i - total_blocks as u64) as u32)
}

/// The first word of the map's section.
pub(crate) const fn section_start(total_blocks: u32) -> u64 {
    HEADER_WORDS as u64 + FRONTIER_WORDS as u64 + total_blocks as u64
}

/// Words in a checkpoint stream, CRC included, for a map section of `section_words` (a flat
/// map's: the logical pages, the largest section).
pub const fn checkpoint_words(geometry: &Geometry, section_words: u32) -> u64 {
    section_start(geometry.total_blocks()) + section_words as u64 + 1
}

/// Pages one checkpoint occupies, for a map section of `section_words`.
pub const fn checkpoint_pages(geometry: &Geometry, section_words: u32) -> u32 {
    let per_page = geometry.data_bytes as u64 / 4;
    if per_page == 0 {
        return u32::MAX;
    }
    checkpoint_words(geometry, section_words).div_ceil(per_page) as u32
}

/// A block-table entry as its checkpoint word: bits 0..20 erase count, 20..29 valid pages,
/// 29..31 state (`WORD_*`), bit 31 bad (what the anchor's fast mount takes as the block table).
pub fn block_word(info: &BlockInfo) -> u32 {
    let (state, valid) = match info.state() {
        BlockState::Free => (WORD_ERASED, 0),
        BlockState::Open | BlockState::Used | BlockState::Victim | BlockState::Retiring => {
            (WORD_DATA, (info.valid() as u32).min(MAX_PACKED_VALID))
        }
        BlockState::CheckpointNew => (WORD_THIS, 0),
        BlockState::Dirty | BlockState::Checkpoint | BlockState::Anchor | BlockState::Bad => (WORD_DIRTY, 0),
    };
    let bad = if info.state() == BlockState::Bad { BAD_BIT } else { 0 };
    (info.erase_count() & EC_MASK) | valid << VALID_SHIFT | state << STATE_SHIFT | bad
}

/// A block word, parsed.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) struct BlockWord {
    pub erase_count: u32,
    pub valid: u32,
    /// `WORD_*`.
    pub state: u32,
    pub bad: bool,
}

impl BlockWord {
    pub(crate) fn parse(w: u32) -> Self {
        BlockWord {
            erase_count: w & EC_MASK,
            valid: (w >> VALID_SHIFT) & MAX_PACKED_VALID,
            state: (w >> STATE_SHIFT) & 3,
            bad: w & BAD_BIT != 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_fields_tile_the_header() {
        let fields = [
            field::MAGIC,
            field::VERSION,
            field::DATA_BYTES,
            field::SPARE_BYTES,
            field::PAGES_PER_BLOCK,
            field::TOTAL_BLOCKS,
            field::LOGICAL_PAGES,
            field::PAGES,
            field::CHECKPOINT_SEQ,
            field::NEXT_SEQ,
            field::FRONTIER_WORDS,
            field::MAP_KIND,
            field::RESERVED,
        ];
        let mut next = 0;
        for f in fields {
            assert_eq!(f.start, next, "{f:?}");
            next = f.end;
        }
        assert_eq!(next, HEADER_WORDS as usize);
    }

    #[test]
    fn header_round_trips_and_keeps_the_v2_word_positions() {
        let h = Header {
            version: VERSION,
            data_bytes: 2048,
            spare_bytes: 64,
            pages_per_block: 64,
            total_blocks: 4096,
            logical_pages: 240_000,
            pages: 12,
            ckpt_seq: 0x1_2345_6789,
            next_seq: 0x2_0000_0001,
            frontier_words: FRONTIER_WORDS,
            map_kind: 1,
            reserved: [0; 2],
        };
        let w = h.to_words();
        assert_eq!(Header::parse(&w), Some(h));
        // Version 2's positions (images written before the named fields read the same).
        assert_eq!((w[0], w[1], w[2], w[5], w[7]), (MAGIC, 2, 2048, 4096, 12));
        assert_eq!((w[8], w[9], w[10], w[11], w[13]), (0x2345_6789, 1, 1, 2, 1));
        let mut bad = w;
        bad[0] ^= 1;
        assert_eq!(Header::parse(&bad), None);
    }

    #[test]
    fn parts_follow_each_other() {
        let blocks = 10;
        assert_eq!(part(blocks, 0), Part::Header(0));
        assert_eq!(part(blocks, HEADER_WORDS as u64), Part::Frontier { slot: 0, next_page: false });
        assert_eq!(part(blocks, HEADER_WORDS as u64 + 3), Part::Frontier { slot: 1, next_page: true });
        let b0 = (HEADER_WORDS + FRONTIER_WORDS) as u64;
        assert_eq!(part(blocks, b0), Part::Block(0));
        assert_eq!(part(blocks, b0 + 9), Part::Block(9));
        assert_eq!(part(blocks, section_start(blocks)), Part::Section(0));
    }

    #[test]
    fn block_words_round_trip() {
        let w = 1234 | 17 << VALID_SHIFT | WORD_DATA << STATE_SHIFT | BAD_BIT;
        assert_eq!(
            BlockWord::parse(w),
            BlockWord { erase_count: 1234, valid: 17, state: WORD_DATA, bad: true }
        );
    }
}
