//! The anchor: a small, power-safe record at a fixed place that says where the newest checkpoint
//! is and whether nothing was written after it, so that a mount after a clean unmount reads the
//! anchor and the checkpoint instead of every block (in the spirit of UBI fastmap's anchor).
//!
//! Where: the first [`ANCHOR_BLOCKS`] blocks of the device (the region). Good region blocks are
//! never allocated nor collected ([`BlockState::Anchor`]); each holds one copy of the anchor log.
//! A record is one page (`PageKind::Anchor`, protected by the codec and a CRC-32C): words `magic,
//! version, seq (2 words), flags (bit 0: clean, bit 1: bounded), checkpoint sequence (2 words),
//! n, m, n checkpoint block numbers (in block order), m pool block numbers, CRC`. Each record is
//! appended to both copies, the one whose newest whole record is older first, and read back (a
//! page that does not read back is passed over); a full copy, or one whose next page the chip
//! refuses, is erased before its next record. A copy is never erased while the other holds an
//! older whole record than it (that one is erased first): a cut during the erase must leave the
//! newest record, or none (then mount surveys), never an older one, which may name a checkpoint
//! and a pool that are no longer true. (A cut that tears one copy's record leaves the copies
//! holding different records; before this rule, copy 0 erased for the next record with copy 1
//! holding the one before the torn one lost a flushed trim, found with the pool on.) A copy
//! whose program or erase fails is marked bad and dropped; with no good copy left every mount
//! surveys the device as before.
//!
//! Finding the newest record: per region block one spare read of page 0 (and a read of the whole
//! page if its metadata reads erased), a binary search for the last page that is not fully
//! erased (`log2(pages_per_block)` reads; a record is never written to a page that is not fully
//! erased, so those pages form a prefix even where a cut tore a program before its metadata),
//! then the newest whole record at or just before it (a torn record is skipped; at most
//! [`WALK_BACK`] pages back). About 16 reads for two copies of 64 pages.
//!
//! Contract (power loss): a *clean* record is written last by `unmount`, after its checkpoint;
//! every mount that finds a clean record newest writes a *not clean* record before anything else
//! is programmed or erased. A *bounded* record (not clean) names the current checkpoint and the
//! mount pool (see `pool.rs`): every block holding a page written after that checkpoint which a
//! mount must replay is in its pool, so a mount after a cut reads the pool instead of every block.
//! A record that is neither makes the next mount survey every block. So a clean record is newest only if nothing changed on flash after its
//! checkpoint, and mount may then take that checkpoint's block table as the truth (see
//! `recovery.rs`, the fast path). A cut while writing a record leaves it torn (skipped: the record
//! before it is newest, which was true when it was written, since nothing else happened in
//! between) or whole. A cut while erasing a copy leaves the other copy's record, which is the newest or
//! (if the other copy holds none) no record at all. Anything
//! else (no copy, a damaged record, a damaged checkpoint) makes mount fall back to the survey.

use nand_hal::{BlockId, ErrorKind, NandFlash, PageId};

use crate::blocks::{BlockState, FLAG_POOL};
use crate::crc32c::crc32c_append;
use crate::map::MappingTable;
use crate::meta::{is_bad_block_marker, PageKind, PageMeta, SpareState, META_LEN};
use crate::policy::{PageCodec, PolicySet};
use crate::{Error, Ftl};

/// Blocks at the start of the device reserved for the anchor (two copies).
pub const ANCHOR_BLOCKS: u32 = 2;
/// "ANCR".
const MAGIC: u32 = 0x5243_4E41;
const VERSION: u32 = 2;
/// Words before the block lists.
const FIXED_WORDS: usize = 9;
/// Flag bits of a record.
const FLAG_CLEAN: u32 = 1;
const FLAG_BOUNDED: u32 = 2;
/// Pages before the last programmed one searched for a whole record.
pub const WALK_BACK: u32 = 4;
const NIL: u32 = u32::MAX;
/// Pages one record is tried on per copy before the copy is given up for this record (a page
/// that reads back wrong, then a refused one and the fresh erase's page 0).
const ANCHOR_ATTEMPTS: u32 = 4;

/// One copy of the anchor log: its block and the next page to program.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct AnchorCopy {
    /// The block, or `u32::MAX` for none.
    pub block: u32,
    /// The next page to program (`pages_per_block`: erase first).
    pub next_page: u32,
    /// Sequence number of the newest whole record the copy holds (0: none). A copy is never
    /// erased while the other holds an older whole record (see `anchor_erase_copy`).
    pub holds: u64,
}

impl AnchorCopy {
    const NONE: AnchorCopy = AnchorCopy { block: NIL, next_page: 0, holds: 0 };
}

/// The anchor's RAM state: 48 bytes.
#[derive(Copy, Clone, Debug)]
pub struct AnchorState {
    /// Sequence number of the newest record.
    pub seq: u64,
    /// The two copies.
    pub copies: [AnchorCopy; 2],
    /// Whether the newest record on flash says clean (the next change must be preceded by a
    /// not-clean record).
    pub clean_on_flash: bool,
    /// Whether the newest record on flash is bounded (names a pool a mount after a cut trusts).
    pub bounded_on_flash: bool,
}

impl AnchorState {
    /// No copy known.
    pub const NONE: AnchorState =
        AnchorState { seq: 0, copies: [AnchorCopy::NONE; 2], clean_on_flash: false, bounded_on_flash: false };
}

/// The newest record mount found.
#[derive(Copy, Clone, Debug)]
pub(crate) struct Found {
    /// Where it is.
    pub page: PageId,
    /// Nothing was written after its checkpoint.
    pub clean: bool,
    /// It lists the mount pool.
    pub bounded: bool,
    /// The checkpoint it names.
    pub ckpt_seq: u64,
}

/// A record's fixed fields, parsed.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) struct Record {
    pub seq: u64,
    pub clean: bool,
    pub bounded: bool,
    pub ckpt_seq: u64,
    /// Checkpoint blocks listed.
    pub blocks: usize,
    /// Pool blocks listed (after the checkpoint blocks).
    pub pool: usize,
}

fn word(buf: &[u8], i: usize) -> u32 {
    let o = i * 4;
    u32::from_le_bytes([buf[o], buf[o + 1], buf[o + 2], buf[o + 3]])
}

fn put(buf: &mut [u8], i: usize, w: u32) {
    buf[i * 4..i * 4 + 4].copy_from_slice(&w.to_le_bytes());
}

/// Most blocks (checkpoint and pool together) one record lists for pages of `data_bytes`.
pub const fn max_listed_blocks(data_bytes: u32) -> usize {
    (data_bytes as usize / 4).saturating_sub(FIXED_WORDS + 1)
}

/// Parses a record in `data`, if whole.
pub(crate) fn parse(data: &[u8]) -> Option<Record> {
    if data.len() < (FIXED_WORDS + 1) * 4 || word(data, 0) != MAGIC || word(data, 1) != VERSION {
        return None;
    }
    let (n, m) = (word(data, 7) as usize, word(data, 8) as usize);
    if n.saturating_add(m) > max_listed_blocks(data.len() as u32) {
        return None;
    }
    let body = FIXED_WORDS + n + m;
    if crc32c_append(0, &data[..body * 4]) != word(data, body) {
        return None;
    }
    let flags = word(data, 4);
    Some(Record {
        seq: word(data, 2) as u64 | (word(data, 3) as u64) << 32,
        clean: flags & FLAG_CLEAN != 0,
        bounded: flags & FLAG_BOUNDED != 0,
        ckpt_seq: word(data, 5) as u64 | (word(data, 6) as u64) << 32,
        blocks: n,
        pool: m,
    })
}

/// Entry `i` of the lists of a record parsed from `data` (checkpoint blocks first, then the pool).
pub(crate) fn listed_block(data: &[u8], i: usize) -> u32 {
    word(data, FIXED_WORDS + i)
}

impl<N: NandFlash, P: PolicySet, M: MappingTable> Ftl<'_, N, P, M> {
    /// The anchor's region: its first `ANCHOR_BLOCKS` blocks.
    fn anchor_region(&self) -> impl Iterator<Item = BlockId> {
        (0..ANCHOR_BLOCKS.min(self.geo.total_blocks())).map(BlockId)
    }

    /// Reads the metadata of `page` into a stack buffer (one read).
    pub(crate) fn anchor_meta(&mut self, page: PageId) -> Result<(u8, SpareState), Error> {
        let mut sp = [0u8; META_LEN];
        self.counters.nand_reads += 1;
        self.nand.read_spare(page, &mut sp)?;
        Ok((sp[0], PageMeta::decode(&sp)))
    }

    /// Finds the copies and the newest whole record; sets `self.anchor` and marks region blocks
    /// `Anchor` or `Bad` in the block table.
    pub(crate) fn anchor_find(&mut self) -> Result<Option<Found>, Error> {
        let ppb = self.geo.pages_per_block;
        self.anchor = AnchorState::NONE;
        let mut best: Option<(u64, Found)> = None;
        let mut slot = 0;
        for b in self.anchor_region() {
            let (marker, first) = self.anchor_meta(self.geo.page(b, 0))?;
            if is_bad_block_marker(marker) {
                self.blocks.raw_set(b, BlockState::Bad, 0, 0);
                continue;
            }
            self.blocks.raw_set(b, BlockState::Anchor, 0, 0);
            let mut copy = AnchorCopy { block: b.0, next_page: 0, holds: 0 };
            if first != SpareState::Erased {
                // Records are appended in order and each is read back: a page whose program was
                // cut before its metadata (metadata erased, data not) gets the next record
                // programmed over it, which reads back wrong and moves on, leaving metadata that
                // no longer reads erased. So the pages whose metadata does not read erased form a
                // prefix: binary search for its end.
                let (mut lo, mut hi) = (0u32, ppb);
                while hi - lo > 1 {
                    let mid = lo + (hi - lo) / 2;
                    if self.anchor_page_erased(self.geo.page(b, mid))? {
                        hi = mid;
                    } else {
                        lo = mid;
                    }
                }
                copy.next_page = lo + 1;
                let mut whole = false;
                for p in (lo.saturating_sub(WALK_BACK)..=lo).rev() {
                    let page = self.geo.page(b, p);
                    if let Some(r) = self.anchor_read(page)? {
                        if let SpareState::Valid(m) = first {
                            self.blocks.set_erase_count(b, m.erase_count);
                        }
                        whole = true;
                        copy.holds = r.seq;
                        if best.is_none_or(|(s, _)| r.seq > s) {
                            let found =
                                Found { page, clean: r.clean, bounded: r.bounded, ckpt_seq: r.ckpt_seq };
                            best = Some((r.seq, found));
                        }
                        break;
                    }
                }
                if !whole {
                    // Nothing readable: erase before the next record.
                    copy.next_page = ppb;
                }
            }
            if let Some(c) = self.anchor.copies.get_mut(slot) {
                *c = copy;
                slot += 1;
            }
        }
        if let Some((seq, f)) = best {
            self.anchor.seq = seq;
            self.anchor.clean_on_flash = f.clean;
            self.anchor.bounded_on_flash = f.bounded;
            return Ok(Some(f));
        }
        Ok(None)
    }

    /// Whether `page`'s metadata reads erased (one spare read; its ECC absorbs raw bit errors).
    fn anchor_page_erased(&mut self, page: PageId) -> Result<bool, Error> {
        Ok(self.anchor_meta(page)?.1 == SpareState::Erased)
    }

    /// Reads the record at `page` into the page buffer; its fields if its metadata, codec and CRC
    /// check out.
    pub(crate) fn anchor_read(&mut self, page: PageId) -> Result<Option<Record>, Error> {
        let d = self.geo.data_bytes as usize;
        let spare_len = META_LEN + self.codec_len;
        self.counters.nand_reads += 1;
        let (data, spare) = self.buf.split_at_mut(d);
        self.nand.read_page(page, data, &mut spare[..spare_len])?;
        if !matches!(PageMeta::decode(&spare[..spare_len]), SpareState::Valid(m) if m.kind == PageKind::Anchor)
            || self.policies.codec().decode(data, &spare[META_LEN..spare_len]).is_err()
        {
            return Ok(None);
        }
        Ok(parse(data))
    }

    /// Format: every good region block becomes an (erased) anchor copy.
    pub(crate) fn anchor_format(&mut self) {
        self.anchor = AnchorState::NONE;
        let mut slot = 0;
        for b in self.anchor_region() {
            if self.blocks.state(b) == BlockState::Free {
                self.blocks.set_state(b, BlockState::Anchor);
                if let Some(c) = self.anchor.copies.get_mut(slot) {
                    *c = AnchorCopy { block: b.0, next_page: 0, holds: 0 };
                    slot += 1;
                }
            }
        }
    }

    /// Appends a record naming the current checkpoint to every copy: clean (`clean`, written by
    /// `unmount`), else bounded while the mount pool is kept (`self.pool.bounded`), else neither.
    /// A clean or bounded record is written only when its lists fit in one record and no
    /// technique keeps state the fast mount does not rebuild; one that is neither is written only
    /// when the newest record on flash is clean or bounded (it must stop being trusted). Returns
    /// whether the newest record on flash is now bounded.
    pub(crate) fn write_anchor(&mut self, clean: bool) -> Result<bool, Error> {
        let ckpt = self.blocks.iter().filter(|(_, i)| i.state() == BlockState::Checkpoint).count();
        let pool = self.pool.listed as usize;
        let max = max_listed_blocks(self.geo.data_bytes);
        let allowed = self.anchor_fast_allowed() && self.anchor_has_copy();
        let clean = clean && allowed && ckpt <= max;
        let bounded = !clean && allowed && self.pool.bounded && ckpt + pool <= max;
        if !clean && !bounded && !self.anchor.clean_on_flash && !self.anchor.bounded_on_flash {
            return Ok(false);
        }
        let seq = self.anchor.seq + 1;
        let mut written = 0;
        // The copy holding the older newest record first: once it holds this one, the other may
        // be erased for it (a cut while a copy holding the newest record is erased must leave
        // that record in the other copy, or mount would take an older one).
        let first = usize::from(self.anchor.copies[1].holds < self.anchor.copies[0].holds);
        for i in [first, 1 - first] {
            written += self.anchor_program_copy(i, seq, clean, bounded)? as u32;
        }
        self.anchor.seq = seq;
        if written > 0 {
            self.anchor.clean_on_flash = clean;
            self.anchor.bounded_on_flash = bounded;
        } else if self.anchor.clean_on_flash || self.anchor.bounded_on_flash {
            // No copy took the record: a clean or bounded one may still be on flash, naming a
            // state that is no longer true. Every region block goes, so no mount can take it.
            for b in self.anchor_region() {
                if self.blocks.state(b) == BlockState::Anchor {
                    self.counters.nand_erases += 1;
                    self.counters.anchor_erases += 1;
                    if self.nand.erase_block(b).is_err() {
                        self.retire_now(b);
                    }
                }
            }
            self.anchor.copies = [AnchorCopy::NONE; 2];
            self.anchor.clean_on_flash = false;
            self.anchor.bounded_on_flash = false;
        }
        Ok(self.anchor.bounded_on_flash)
    }

    /// Builds record `seq` in the page buffer (a clean or bounded one lists the checkpoint's
    /// blocks, a bounded one the pool's after them; `write_anchor` checked they fit).
    fn anchor_fill(&mut self, seq: u64, clean: bool, bounded: bool) {
        let d = self.geo.data_bytes as usize;
        let max = max_listed_blocks(self.geo.data_bytes);
        let (mut n, mut m) = (0usize, 0usize);
        let ckpt = self.ckpt.seq;
        self.buf[..d].fill(0);
        if clean || bounded {
            for b in 0..self.geo.total_blocks() {
                if self.blocks.state(BlockId(b)) == BlockState::Checkpoint && n < max {
                    put(self.buf, FIXED_WORDS + n, b);
                    n += 1;
                }
            }
        }
        if bounded {
            for b in 0..self.geo.total_blocks() {
                if self.blocks.get(BlockId(b)).flags() & FLAG_POOL != 0 && n + m < max {
                    put(self.buf, FIXED_WORDS + n + m, b);
                    m += 1;
                }
            }
        }
        let flags = if clean { FLAG_CLEAN } else { 0 } | if bounded { FLAG_BOUNDED } else { 0 };
        let fixed = [
            MAGIC,
            VERSION,
            seq as u32,
            (seq >> 32) as u32,
            flags,
            ckpt as u32,
            (ckpt >> 32) as u32,
            n as u32,
            m as u32,
        ];
        for (i, w) in fixed.into_iter().enumerate() {
            put(self.buf, i, w);
        }
        let crc = crc32c_append(0, &self.buf[..(FIXED_WORDS + n + m) * 4]);
        put(self.buf, FIXED_WORDS + n + m, crc);
    }

    /// Programs record `seq` to copy `i` and reads it back; a page that does not read back (a
    /// program cut before its metadata left it not quite erased) is passed over. `Ok(false)` if
    /// the copy is gone (or went bad now).
    fn anchor_program_copy(&mut self, i: usize, seq: u64, clean: bool, bounded: bool) -> Result<bool, Error> {
        let d = self.geo.data_bytes as usize;
        let ppb = self.geo.pages_per_block;
        let spare_len = META_LEN + self.codec_len;
        for _ in 0..ANCHOR_ATTEMPTS {
            let c = self.anchor.copies[i];
            if c.block == NIL {
                return Ok(false);
            }
            let b = BlockId(c.block);
            let mut next = c.next_page;
            if next >= ppb {
                if !self.anchor_erase_copy(i)? {
                    return Ok(false);
                }
                next = 0;
            }
            self.anchor.copies[i].next_page = next + 1;
            self.anchor_fill(seq, clean, bounded);
            let meta = PageMeta {
                kind: PageKind::Anchor,
                tag: next,
                seq: seq & crate::meta::MAX_SEQ,
                erase_count: self.blocks.get(b).erase_count(),
                aux: 0,
            };
            {
                let (data, spare) = self.buf.split_at_mut(d);
                meta.encode(&mut spare[..META_LEN]);
                self.policies.codec().encode(data, &mut spare[META_LEN..spare_len]);
            }
            self.counters.nand_programs += 1;
            self.counters.anchor_pages += 1;
            let page = self.geo.page(b, next);
            match self.nand.program_page(page, &self.buf[..d], &self.buf[d..d + spare_len]) {
                Ok(()) => {
                    if matches!(self.anchor_read(page)?, Some(r) if r.seq == seq) {
                        self.anchor.copies[i].holds = seq;
                        return Ok(true);
                    }
                }
                Err(e) if nand_hal::Error::kind(&e) == ErrorKind::ProgramFailed => {
                    self.counters.program_failures += 1;
                    self.anchor_drop(i);
                    return Ok(false);
                }
                // The chip refuses the page (cuts spent its NOP, or an earlier program it does not
                // show): the copy starts over in a fresh erase rather than leave a page whose
                // metadata may read erased before later records (the binary search needs none).
                Err(e)
                    if matches!(
                        nand_hal::Error::kind(&e),
                        ErrorKind::NopExceeded | ErrorKind::ProgramOrder
                    ) =>
                {
                    self.anchor.copies[i].next_page = ppb;
                }
                Err(e) => return Err(e.into()),
            }
        }
        Ok(false)
    }

    /// Erases copy `i` for its next record; `Ok(false)` if the erase failed (the copy is dropped).
    /// If the other copy holds an older whole record than this one, it is erased first: a cut
    /// during this erase must not leave that older record the newest on flash (it may name a
    /// checkpoint and pool that are no longer true; with no record, mount surveys).
    fn anchor_erase_copy(&mut self, i: usize) -> Result<bool, Error> {
        let j = 1 - i;
        let other = self.anchor.copies[j];
        if other.block != NIL && other.holds != 0 && other.holds < self.anchor.copies[i].holds {
            self.anchor_erase_block(j)?;
        }
        self.anchor_erase_block(i)
    }

    /// Erases copy `i`'s block: it holds nothing and starts at page 0. `Ok(false)` if the erase
    /// failed (the copy is dropped).
    fn anchor_erase_block(&mut self, i: usize) -> Result<bool, Error> {
        let b = BlockId(self.anchor.copies[i].block);
        self.counters.nand_erases += 1;
        self.counters.anchor_erases += 1;
        match self.nand.erase_block(b) {
            Ok(()) => {
                self.blocks.count_erase(b);
                self.anchor.copies[i].holds = 0;
                self.anchor.copies[i].next_page = 0;
                Ok(true)
            }
            Err(e) if nand_hal::Error::kind(&e) == ErrorKind::EraseFailed => {
                self.counters.erase_failures += 1;
                self.anchor_drop(i);
                Ok(false)
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Copy `i` went bad: marked bad, dropped.
    fn anchor_drop(&mut self, i: usize) {
        let b = BlockId(self.anchor.copies[i].block);
        self.retire_now(b);
        self.anchor.copies[i] = AnchorCopy::NONE;
    }

    /// Whether a technique that keeps its own state across mounts is attached (the fast mount
    /// does not rebuild it: such a mount surveys).
    fn anchor_techniques_attached(&self) -> bool {
        self.reuse_on() || self.dedup_on() || self.nv_on()
    }

    /// Whether a copy of the anchor is left to write records to.
    pub(crate) fn anchor_has_copy(&self) -> bool {
        self.anchor.copies.iter().any(|c| c.block != NIL)
    }

    /// Whether the fast mount may use a clean record (and `unmount` write one).
    pub(crate) fn anchor_fast_allowed(&self) -> bool {
        !self.anchor_techniques_attached() && self.geo.pages_per_block <= crate::checkpoint::MAX_PACKED_VALID
    }
}
