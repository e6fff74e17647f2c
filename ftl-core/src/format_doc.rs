//! Keeps `docs/format.md` true (tests only).
//!
//! The doc states its numbers in marker lines `<!-- check: NAME = VALUE -->`. Every marker must
//! name a check registered here, every registered check must have its marker, and each check
//! holds the doc's value against the code: a constant is compared; a layout (an offset, a word
//! index, a bit position) is checked by encoding with the code and reading at the doc's place, or
//! by building bytes at the doc's places and decoding them with the code. So changing a constant
//! or a layout without changing the doc fails here. Checks of a technique run only when its
//! feature is on (`cargo test -p ftl-core --all-features` runs them all); without it the marker
//! must still be present.
#![cfg(test)]

extern crate std;

use std::format;
use std::string::String;
use std::vec;
use std::vec::Vec;

use nand_hal::{BlockId, Geometry};

use crate::blocks::{list_heads, BlockInfo, BlockState, BlockTable};
use crate::checkpoint::{self, block_word, checkpoint_pages, checkpoint_words};
use crate::crc32c::crc32c;
use crate::map::{FlatMap, MappingTable};
use crate::meta::{self, ecc, PageKind, PageMeta, SpareState};
use crate::policy::PageCodec;

const DOC: &str = include_str!("../../docs/format.md");

type Res = Result<(), String>;
type Check = fn(&Doc, u64) -> Res;

/// The doc's markers, in order.
struct Doc(Vec<(String, u64)>);

impl Doc {
    fn parse(text: &str) -> Doc {
        let mut out = Vec::new();
        for (n, line) in text.lines().enumerate() {
            // A marker is a line of its own (the doc's prose may quote the syntax).
            let Some(rest) = line.trim_start().strip_prefix("<!-- check:") else { continue };
            let body = rest.split("-->").next().unwrap_or("");
            let (name, value) = body
                .split_once('=')
                .unwrap_or_else(|| panic!("format.md line {}: no '=' in a marker", n + 1));
            let value = value.trim().replace('_', "");
            let v = match value.strip_prefix("0x") {
                Some(h) => u64::from_str_radix(h, 16),
                None => value.parse(),
            }
            .unwrap_or_else(|_| panic!("format.md line {}: bad value {value:?}", n + 1));
            out.push((String::from(name.trim()), v));
        }
        Doc(out)
    }

    /// The value of marker `name` (a check that needs another marker's value).
    fn get(&self, name: &str) -> u64 {
        self.0
            .iter()
            .find(|(n, _)| n == name)
            .map(|&(_, v)| v)
            .unwrap_or_else(|| panic!("marker {name} missing"))
    }
}

fn eq(doc: u64, code: u64) -> Res {
    if doc == code {
        Ok(())
    } else {
        Err(format!("doc says {doc:#x}, code has {code:#x}"))
    }
}

fn ensure(ok: bool, what: &str) -> Res {
    if ok {
        Ok(())
    } else {
        Err(String::from(what))
    }
}

/// Little-endian value of `len` bytes at `at` (`None` past the end).
fn le(b: &[u8], at: u64, len: usize) -> Option<u64> {
    let s = b.get(at as usize..at as usize + len)?;
    Some(s.iter().rev().fold(0u64, |acc, &x| acc << 8 | x as u64))
}

fn le_is(b: &[u8], at: u64, len: usize, want: u64) -> Res {
    match le(b, at, len) {
        Some(v) if v == want => Ok(()),
        Some(v) => Err(format!("the {len} bytes at {at} hold {v:#x}, expected {want:#x}")),
        None => Err(format!("byte {at} is outside the encoded bytes")),
    }
}

/// `(name, Some(check))`.
macro_rules! ck {
    ($name:expr, $check:expr) => {{
        let c: Check = $check;
        ($name, Some(c))
    }};
}

/// `(name, check)` comparing the doc's value with a constant.
macro_rules! same {
    ($name:expr, $value:expr) => {
        ck!($name, |_, v| eq(v, $value as u64))
    };
}

/// `(name, check)` for a check that needs feature `$feat` (`None`, not checked, without it).
macro_rules! gated {
    ($feat:tt, $name:expr, $check:expr) => {{
        #[cfg(feature = $feat)]
        let c: Option<Check> = Some($check);
        #[cfg(not(feature = $feat))]
        let c: Option<Check> = None;
        ($name, c)
    }};
}

// ---- page metadata ----------------------------------------------------------------------------

const SAMPLE: PageMeta = PageMeta {
    kind: PageKind::Journal,
    tag: 0x1122_3344,
    seq: 0xA1A2_A3A4_A5A6,
    erase_count: 0x00B1_B2B3,
    aux: 0xC1C2_C3C4,
};

fn sample_spare() -> [u8; meta::META_LEN] {
    let mut s = [0xFFu8; meta::META_LEN];
    SAMPLE.encode(&mut s);
    s
}

fn meta_crc(d: &Doc, v: u64) -> Res {
    let s = sample_spare();
    let k = d.get("meta.kind.offset") as usize;
    let mut m = vec![meta::FORMAT_VERSION];
    m.extend_from_slice(s.get(k..k + 18).ok_or("message outside the metadata")?);
    le_is(&s, v, 4, crc32c(&m) as u64)
}

fn meta_parity(d: &Doc, v: u64) -> Res {
    let s = sample_spare();
    let k = d.get("meta.kind.offset") as usize;
    let mut msg = [0u8; ecc::MSG_BYTES];
    msg.copy_from_slice(s.get(k..k + ecc::MSG_BYTES).ok_or("message outside the metadata")?);
    let p = ecc::encode(&msg);
    ensure(
        s.get(v as usize..v as usize + ecc::PARITY_BYTES) == Some(&p[..]),
        "parity not at the doc's offset",
    )
}

fn bad_block_marker(_: &Doc, v: u64) -> Res {
    for b in 0..=255u8 {
        if meta::is_bad_block_marker(b) != (b.count_zeros() as u64 >= v) {
            return Err(format!("marker byte {b:#04x}: is_bad_block_marker disagrees with {v} zero bits"));
        }
    }
    Ok(())
}

// ---- checkpoint -------------------------------------------------------------------------------

const GEO: Geometry = Geometry {
    data_bytes: 2048,
    spare_bytes: 64,
    pages_per_block: 32,
    blocks_per_plane: 100,
    ..Geometry::MT29F4G08
};
const LOGICAL: u32 = 5000;
const CKPT_SEQ: u64 = 0x0000_0007_1234_5678;
const NEXT_SEQ: u64 = 0x0000_0009_8765_4321;
const HEADER_FIELDS: [&str; 16] = [
    "magic",
    "version",
    "data_bytes",
    "spare_bytes",
    "pages_per_block",
    "total_blocks",
    "logical_pages",
    "pages",
    "ckpt_seq_lo",
    "ckpt_seq_hi",
    "next_seq_lo",
    "next_seq_hi",
    "frontier_words",
    "map_kind",
    "reserved_a",
    "reserved_b",
];

/// What header field `field` holds for the sample (`GEO`, a flat map of `LOGICAL` pages).
fn header_expect(field: &str, map: &impl MappingTable) -> u32 {
    match field {
        "magic" => checkpoint::MAGIC,
        "version" => checkpoint::VERSION,
        "data_bytes" => GEO.data_bytes,
        "spare_bytes" => GEO.spare_bytes,
        "pages_per_block" => GEO.pages_per_block,
        "total_blocks" => GEO.total_blocks(),
        "logical_pages" => LOGICAL,
        "pages" => checkpoint_pages(&GEO, map.section_words()),
        "ckpt_seq_lo" => CKPT_SEQ as u32,
        "ckpt_seq_hi" => (CKPT_SEQ >> 32) as u32,
        "next_seq_lo" => NEXT_SEQ as u32,
        "next_seq_hi" => (NEXT_SEQ >> 32) as u32,
        "frontier_words" => checkpoint::FRONTIER_WORDS,
        "map_kind" => map.on_flash() as u32,
        _ => 0,
    }
}

/// The header the code writes for the sample. (The one call into the checkpoint writer's
/// internals: adapt here if its signature changes.)
fn sample_header(map: &impl MappingTable) -> [u32; 16] {
    checkpoint::Header::new(&GEO, LOGICAL, map, CKPT_SEQ, NEXT_SEQ).to_words()
}

/// Header field `field` is at the doc's word, and the header markers name every header word
/// once (so two fields holding the same value cannot swap unnoticed).
fn header_field(d: &Doc, field: &str) -> Res {
    let mut seen = [false; checkpoint::HEADER_WORDS as usize];
    for f in HEADER_FIELDS {
        let i = d.get(&format!("checkpoint.header.{f}")) as usize;
        ensure(i < seen.len() && !seen[i], "header markers are not a permutation of the header words")?;
        seen[i] = true;
    }
    let v = d.get(&format!("checkpoint.header.{field}"));
    if field == "map_kind" {
        eq(v, checkpoint::MAP_KIND_WORD as u64)?;
    }
    let mut entries = vec![0u32; LOGICAL as usize];
    let map = FlatMap::new(&mut entries);
    let h = sample_header(&map);
    let got = *h.get(v as usize).ok_or("word index past the header")?;
    eq(got as u64, header_expect(field, &map) as u64).map_err(|e| format!("header word {v} ({field}): {e}"))
}

/// Block words of a block in `state` with erase count `ec` and `valid` pages.
fn sample_block_word(state: BlockState, ec: u32, valid: u16) -> u32 {
    let mut info = vec![BlockInfo::EMPTY; GEO.total_blocks() as usize];
    let mut heads = vec![0u32; list_heads(&GEO)];
    let mut t = BlockTable::new(GEO, &mut info, &mut heads);
    t.raw_set(BlockId(3), state, ec, valid);
    block_word(t.get(BlockId(3)))
}

fn block_word_valid(_: &Doc, v: u64) -> Res {
    let w = sample_block_word(BlockState::Used, 0x1_2345, 7);
    eq((w >> v) as u64 & checkpoint::MAX_PACKED_VALID as u64, 7)?;
    eq((w & checkpoint::EC_MASK) as u64, 0x1_2345)
}

fn block_word_state(_: &Doc, v: u64) -> Res {
    let state = |s, valid| (sample_block_word(s, 9, valid) >> v) as u64 & 3;
    eq(state(BlockState::Free, 0), checkpoint::WORD_ERASED as u64)?;
    eq(state(BlockState::Dirty, 0), checkpoint::WORD_DIRTY as u64)?;
    eq(state(BlockState::Used, 5), checkpoint::WORD_DATA as u64)?;
    eq(state(BlockState::CheckpointNew, 0), checkpoint::WORD_THIS as u64)?;
    let bad = sample_block_word(BlockState::Bad, 9, 0);
    ensure(bad & checkpoint::BAD_BIT != 0, "a bad block's word lacks BAD_BIT")
}

fn crc_words(_: &Doc, v: u64) -> Res {
    let section = 1234;
    let fixed =
        checkpoint::HEADER_WORDS as u64 + checkpoint::FRONTIER_WORDS as u64 + GEO.total_blocks() as u64;
    eq(fixed + section as u64 + v, checkpoint_words(&GEO, section))
}

// ---- anchor -----------------------------------------------------------------------------------

/// Builds a record at the doc's places and parses it with the code, for both flags.
fn anchor_record(d: &Doc, _: u64) -> Res {
    let data_bytes = 512u32;
    let fixed = d.get("anchor::FIXED_WORDS") as usize;
    let listed = crate::anchor::max_listed_blocks(data_bytes);
    eq((data_bytes as usize / 4 - fixed - 1) as u64, listed as u64)
        .map_err(|e| format!("max_listed_blocks: {e}"))?;
    let (seq, ckpt) = (0x0000_0003_0000_0011u64, 0x0000_0005_0000_0022u64);
    let lists = [7u32, 9, 40, 41, 42];
    for (flag, clean, bounded) in
        [(d.get("anchor::FLAG_CLEAN"), true, false), (d.get("anchor::FLAG_BOUNDED"), false, true)]
    {
        let mut w = vec![0u32; data_bytes as usize / 4];
        w[0] = d.get("anchor::MAGIC") as u32;
        w[1] = d.get("anchor::VERSION") as u32;
        let s = d.get("anchor.seq_word") as usize;
        w[s] = seq as u32;
        w[s + 1] = (seq >> 32) as u32;
        w[d.get("anchor.flags_word") as usize] = flag as u32;
        let c = d.get("anchor.ckpt_seq_word") as usize;
        w[c] = ckpt as u32;
        w[c + 1] = (ckpt >> 32) as u32;
        w[d.get("anchor.n_word") as usize] = 2;
        w[d.get("anchor.m_word") as usize] = 3;
        w[fixed..fixed + lists.len()].copy_from_slice(&lists);
        let bytes: Vec<u8> = w.iter().flat_map(|x| x.to_le_bytes()).collect();
        let body = fixed + lists.len();
        let mut bytes = bytes;
        let crc = crc32c(&bytes[..body * 4]);
        bytes[body * 4..body * 4 + 4].copy_from_slice(&crc.to_le_bytes());
        let r =
            crate::anchor::parse(&bytes).ok_or("the code does not parse a record built as the doc says")?;
        ensure(
            (r.seq, r.clean, r.bounded, r.ckpt_seq, r.blocks, r.pool) == (seq, clean, bounded, ckpt, 2, 3),
            "a record built as the doc says parses to other fields",
        )?;
        for (i, &b) in lists.iter().enumerate() {
            eq(crate::anchor::listed_block(&bytes, i) as u64, b as u64)?;
        }
    }
    Ok(())
}

// ---- journal ----------------------------------------------------------------------------------

fn journal_layout(d: &Doc, _: u64) -> Res {
    let (h, e) = (d.get("journal.header_bytes") as usize, d.get("journal.entry_bytes") as usize);
    for db in [64u32, 100, 512, 2048, 2052, 4096] {
        let code = crate::journal::journal_capacity(db) as u64;
        eq(((db as usize - h) / e) as u64, code).map_err(|m| format!("capacity of {db}-byte pages: {m}"))?;
    }
    let ranges = [(10u32, 3u32), (0x0102_0304, 0x0A0B_0C0D), (77, 1)];
    let mut page = vec![0u8; 512];
    page[..4].copy_from_slice(&(ranges.len() as u32).to_le_bytes());
    for (i, (a, n)) in ranges.iter().enumerate() {
        let o = h + e * i;
        page[o..o + 4].copy_from_slice(&a.to_le_bytes());
        page[o + 4..o + 8].copy_from_slice(&n.to_le_bytes());
    }
    let got: Vec<(u32, u32)> = crate::journal::journal_entries(&page, ranges.len() as u32).collect();
    ensure(got == ranges, "a journal page built as the doc says reads back other ranges")
}

// ---- second writes (wom) ----------------------------------------------------------------------

#[cfg(feature = "wom")]
const SW_SAMPLE: crate::reuse::SwMeta = crate::reuse::SwMeta {
    half: 1,
    same_block: false,
    lpn: 0x1122_3344,
    seq: 0xA1A2_A3A4_A5A6,
    partner: 0x5566_7788,
};

#[cfg(feature = "wom")]
fn sw_bytes() -> [u8; crate::reuse::SW_META_LEN] {
    let mut s = [0xFFu8; crate::reuse::SW_META_LEN];
    SW_SAMPLE.encode(&mut s);
    s
}

#[cfg(feature = "wom")]
fn sw_void(_: &Doc, v: u64) -> Res {
    use crate::reuse::{SwMeta, SwState};
    let mut s = sw_bytes();
    ensure(SwMeta::decode(&s) == SwState::Valid(SW_SAMPLE), "sample does not decode")?;
    ensure(s.get(v as usize) == Some(&0xFF), "void flag not 0xFF after encode")?;
    s[v as usize] = 0;
    ensure(SwMeta::decode(&s) == SwState::Invalid, "a zeroed void flag at the doc's offset does not void")
}

#[cfg(feature = "wom")]
fn sw_parity(d: &Doc, v: u64) -> Res {
    let s = sw_bytes();
    let crc = d.get("reuse.sw.crc_offset") as usize;
    let mut m = [0xFFu8; ecc::MSG_BYTES];
    let stored = crc + 4 - 1;
    m[ecc::MSG_BYTES - stored..].copy_from_slice(&s[1..1 + stored]);
    let p = ecc::encode(&m);
    ensure(
        s.get(v as usize..v as usize + ecc::PARITY_BYTES) == Some(&p[..]),
        "parity not at the doc's offset",
    )
}

// ---- dedup ------------------------------------------------------------------------------------

#[cfg(feature = "dedup")]
fn share_records(_: &Doc, v: u64) -> Res {
    use crate::dedup::shares::{record_at, PendingShares, ShareRecord, RECORD_BYTES};
    eq(v, RECORD_BYTES as u64)?;
    let recs = [
        ShareRecord { lpn: 5, page: 0x0102_0304, owner: 9 },
        ShareRecord { lpn: 6, page: 8, owner: u32::MAX },
    ];
    let mut mem = [ShareRecord::EMPTY; 4];
    let mut p = PendingShares::new(&mut mem, 2048);
    for r in recs {
        p.push(r);
    }
    let mut page = vec![0u8; 2048];
    eq(p.serialize(&mut page) as u64, 2)?;
    le_is(&page, 0, 4, 2)?;
    for (i, r) in recs.iter().enumerate() {
        let o = 4 + v * i as u64;
        le_is(&page, o, 4, r.lpn as u64)?;
        le_is(&page, o + 4, 4, r.page as u64)?;
        le_is(&page, o + 8, 4, r.owner as u64)?;
        ensure(record_at(&page, i) == Some(*r), "record_at disagrees")?;
    }
    Ok(())
}

// ---- NV cache (cdm) ---------------------------------------------------------------------------

/// The NVM image after formatting a 2-slot cache of 64-byte pages and storing slot 1.
#[cfg(feature = "cdm")]
fn nv_image() -> (Vec<u8>, u64) {
    use crate::cdm::{NvCache, NvCacheConfig, NvCacheLayout, NvPolicy, SliceNvm, Slot};
    let lay = NvCacheLayout::new(2);
    let mut bytes = vec![0x5Au8; 4096];
    {
        let mut nvm = SliceNvm::new(&mut bytes);
        let mut slots = [Slot::EMPTY; 2];
        let mut index = vec![0u32; lay.index_words];
        let mut c =
            NvCache::new(&mut nvm, &mut slots, &mut index, NvCacheConfig::new(NvPolicy::Cdm)).unwrap();
        c.bind(64).unwrap();
        c.format().unwrap();
        c.store(1, NV_LPN, NV_SEQ, &[0xAB; 64]).unwrap();
    }
    (bytes, lay.data_offset())
}
#[cfg(feature = "cdm")]
const NV_LPN: u32 = 0x0000_1234;
#[cfg(feature = "cdm")]
const NV_SEQ: u64 = 0x0000_0005_0000_0009;

#[cfg(feature = "cdm")]
fn nv_header(d: &Doc, _: u64) -> Res {
    let (b, data_offset) = nv_image();
    let crc = d.get("cdm.crc_offset");
    le_is(&b, 0, 4, d.get("cdm.header_magic"))?;
    le_is(&b, 4, 4, d.get("cdm::VERSION"))?;
    le_is(&b, 8, 4, 2)?;
    le_is(&b, 12, 4, 64)?;
    le_is(&b, 16, 4, data_offset)?;
    le_is(&b, crc, 4, crc32c(&b[..crc as usize]) as u64)?;
    eq(d.get("cdm::HEADER_LEN"), crate::cdm::HEADER_LEN as u64)
}

#[cfg(feature = "cdm")]
fn nv_entry(d: &Doc, _: u64) -> Res {
    let (b, data_offset) = nv_image();
    eq(d.get("cdm::ENTRY_LEN"), crate::cdm::ENTRY_LEN as u64)?;
    let e = crate::cdm::HEADER_LEN as u64 + crate::cdm::ENTRY_LEN as u64;
    let crc = d.get("cdm.crc_offset");
    le_is(&b, e, 4, d.get("cdm.entry_magic"))?;
    le_is(&b, e + d.get("cdm.entry.lpn_offset"), 4, NV_LPN as u64)?;
    le_is(&b, e + d.get("cdm.entry.seq_offset"), 8, NV_SEQ)?;
    le_is(&b, e + d.get("cdm.entry.data_crc_offset"), 4, crc32c(&[0xAB; 64]) as u64)?;
    le_is(&b, e + crc, 4, crc32c(&b[e as usize..(e + crc) as usize]) as u64)?;
    let a = d.get("cdm.data_align");
    eq(data_offset, (crate::cdm::HEADER_LEN as u64 + 2 * crate::cdm::ENTRY_LEN as u64).div_ceil(a) * a)?;
    let o = data_offset as usize + 64;
    ensure(b[o..o + 64].iter().all(|&x| x == 0xAB), "slot 1's data is not at data offset + page bytes")
}

// ---- the registry -----------------------------------------------------------------------------

fn checks() -> Vec<(&'static str, Option<Check>)> {
    vec![
        same!("meta::FORMAT_VERSION", meta::FORMAT_VERSION),
        same!("checkpoint::VERSION", checkpoint::VERSION),
        ck!("anchor::VERSION", anchor_record),
        same!("anchor::ANCHOR_BLOCKS", crate::anchor::ANCHOR_BLOCKS),
        ck!("meta.bad_block_marker_min_zeros", bad_block_marker),
        same!("meta::META_LEN", meta::META_LEN),
        ck!("meta::VOID_OFFSET", |_, v| {
            eq(v, meta::VOID_OFFSET as u64)?;
            let mut s = sample_spare();
            s[v as usize..v as usize + 2].fill(0);
            ensure(PageMeta::decode(&s) == SpareState::Invalid, "zeroing the doc's void mark does not void")
        }),
        same!("meta::VOID_LEN", meta::VOID_LEN),
        same!("meta::VOID_MIN_ZEROS", meta::VOID_MIN_ZEROS),
        same!("meta::VOID_STRONG_ZEROS", meta::VOID_STRONG_ZEROS),
        same!("meta::VOID_CLEAR_MAX_ZEROS", meta::VOID_CLEAR_MAX_ZEROS),
        same!("meta::META_ECC_BITS", meta::META_ECC_BITS),
        ck!("meta.parity.offset", meta_parity),
        ck!("meta.kind.offset", |_, v| le_is(&sample_spare(), v, 1, SAMPLE.kind as u64)),
        ck!("meta.tag.offset", |_, v| le_is(&sample_spare(), v, 4, SAMPLE.tag as u64)),
        ck!("meta.seq.offset", |_, v| le_is(&sample_spare(), v, 6, SAMPLE.seq)),
        ck!("meta.erase_count.offset", |_, v| le_is(&sample_spare(), v, 3, SAMPLE.erase_count as u64)),
        ck!("meta.aux.offset", |_, v| le_is(&sample_spare(), v, 4, SAMPLE.aux as u64)),
        ck!("meta.crc.offset", meta_crc),
        same!("meta::MAX_SEQ", meta::MAX_SEQ),
        same!("meta::MAX_ERASE_COUNT", meta::MAX_ERASE_COUNT),
        same!("meta::PageKind::Data", PageKind::Data),
        same!("meta::PageKind::Journal", PageKind::Journal),
        same!("meta::PageKind::Checkpoint", PageKind::Checkpoint),
        same!("meta::PageKind::Map", PageKind::Map),
        same!("meta::PageKind::Anchor", PageKind::Anchor),
        ck!("policy::Crc32cCodec.spare_len", |_, v| eq(v, crate::policy::Crc32cCodec.spare_len() as u64)),
        same!("journal::MAX_PENDING_TRIMS", crate::journal::MAX_PENDING_TRIMS),
        ck!("journal.header_bytes", journal_layout),
        ck!("journal.entry_bytes", journal_layout),
        same!("map::UNMAPPED", crate::map::UNMAPPED),
        same!("checkpoint::HEADER_WORDS", checkpoint::HEADER_WORDS),
        same!("checkpoint::FRONTIER_WORDS", checkpoint::FRONTIER_WORDS),
        same!("config::MAX_TOTAL_PLANES", crate::MAX_TOTAL_PLANES),
        same!("frontier::STREAMS", crate::frontier::STREAMS),
        ck!("checkpoint.crc_words", crc_words),
        same!("checkpoint::MAGIC", checkpoint::MAGIC),
        same!("checkpoint::MAP_KIND_WORD", checkpoint::MAP_KIND_WORD),
        same!("checkpoint::EC_MASK", checkpoint::EC_MASK),
        same!("checkpoint::MAX_PACKED_VALID", checkpoint::MAX_PACKED_VALID),
        same!("checkpoint::BAD_BIT", checkpoint::BAD_BIT),
        same!("checkpoint::WORD_ERASED", checkpoint::WORD_ERASED),
        same!("checkpoint::WORD_DIRTY", checkpoint::WORD_DIRTY),
        same!("checkpoint::WORD_DATA", checkpoint::WORD_DATA),
        same!("checkpoint::WORD_THIS", checkpoint::WORD_THIS),
        ck!("checkpoint.block_word.valid_shift", block_word_valid),
        ck!("checkpoint.block_word.state_shift", block_word_state),
        ck!("anchor::MAGIC", anchor_record),
        ck!("anchor::FIXED_WORDS", anchor_record),
        ck!("anchor::FLAG_CLEAN", anchor_record),
        ck!("anchor::FLAG_BOUNDED", anchor_record),
        ck!("anchor.seq_word", anchor_record),
        ck!("anchor.flags_word", anchor_record),
        ck!("anchor.ckpt_seq_word", anchor_record),
        ck!("anchor.n_word", anchor_record),
        ck!("anchor.m_word", anchor_record),
        same!("anchor::WALK_BACK", crate::anchor::WALK_BACK),
        gated!("wom", "reuse::AUX_SCRAMBLED", |_, v| eq(v, crate::reuse::AUX_SCRAMBLED as u64)),
        gated!("wom", "reuse::AUX_COMPLEMENTED", |_, v| eq(v, crate::reuse::AUX_COMPLEMENTED as u64)),
        gated!("wom", "reuse::AUX_FLAGS_LOST", |_, v| eq(v, crate::reuse::AUX_FLAGS_LOST as u64)),
        gated!("wom", "reuse::SW_META_LEN", |_, v| eq(v, crate::reuse::SW_META_LEN as u64)),
        gated!("wom", "reuse::HALF_MARKER", |_, v| eq(v, crate::reuse::HALF_MARKER as u64)),
        gated!("wom", "reuse::SW_SAME_BLOCK", |_, v| {
            let m = crate::reuse::SwMeta { same_block: true, ..SW_SAMPLE };
            let mut s = [0xFFu8; crate::reuse::SW_META_LEN];
            m.encode(&mut s);
            le_is(&s, 2, 1, SW_SAMPLE.half as u64 + v)
        }),
        gated!("wom", "reuse.sw.void_offset", sw_void),
        gated!("wom", "reuse.sw.magic", |_, v| le_is(&sw_bytes(), 1, 1, v)),
        gated!("wom", "reuse.sw.half_offset", |_, v| le_is(&sw_bytes(), v, 1, SW_SAMPLE.half as u64)),
        gated!("wom", "reuse.sw.lpn_offset", |_, v| le_is(&sw_bytes(), v, 4, SW_SAMPLE.lpn as u64)),
        gated!("wom", "reuse.sw.seq_offset", |_, v| le_is(&sw_bytes(), v, 6, SW_SAMPLE.seq)),
        gated!("wom", "reuse.sw.partner_offset", |_, v| le_is(&sw_bytes(), v, 4, SW_SAMPLE.partner as u64)),
        gated!("wom", "reuse.sw.crc_offset", |_, v| {
            let s = sw_bytes();
            le_is(&s, v, 4, crc32c(&s[1..v as usize]) as u64)
        }),
        gated!("wom", "reuse.sw.parity_offset", sw_parity),
        gated!("dedup", "dedup::SHARED_MOVE", |_, v| eq(v, crate::dedup::shares::SHARED_MOVE as u64)),
        gated!("dedup", "dedup::SHARED_MOVE_LOST", |_, v| eq(
            v,
            crate::dedup::shares::SHARED_MOVE_LOST as u64
        )),
        gated!("dedup", "dedup::SHARE_JOURNAL", |_, v| eq(v, crate::dedup::shares::SHARE_JOURNAL as u64)),
        gated!("dedup", "dedup::RECORD_BYTES", share_records),
        gated!("dedup", "dedup::NO_OWNER", |_, v| eq(v, crate::dedup::shares::NO_OWNER as u64)),
        gated!("dedup", "dedup::VIRTUAL_FLAG", |_, v| eq(v, crate::dedup::vmap::VIRTUAL_FLAG as u64)),
        gated!("cdm", "cdm::VERSION", nv_header),
        gated!("cdm", "cdm::HEADER_LEN", nv_header),
        gated!("cdm", "cdm::ENTRY_LEN", nv_entry),
        gated!("cdm", "cdm.header_magic", nv_header),
        gated!("cdm", "cdm.entry_magic", nv_entry),
        gated!("cdm", "cdm.entry.lpn_offset", nv_entry),
        gated!("cdm", "cdm.entry.seq_offset", nv_entry),
        gated!("cdm", "cdm.entry.data_crc_offset", nv_entry),
        gated!("cdm", "cdm.crc_offset", nv_header),
        gated!("cdm", "cdm.data_align", nv_entry),
        ck!("checkpoint.header.magic", |d, _| header_field(d, "magic")),
        ck!("checkpoint.header.version", |d, _| header_field(d, "version")),
        ck!("checkpoint.header.data_bytes", |d, _| header_field(d, "data_bytes")),
        ck!("checkpoint.header.spare_bytes", |d, _| header_field(d, "spare_bytes")),
        ck!("checkpoint.header.pages_per_block", |d, _| header_field(d, "pages_per_block")),
        ck!("checkpoint.header.total_blocks", |d, _| header_field(d, "total_blocks")),
        ck!("checkpoint.header.logical_pages", |d, _| header_field(d, "logical_pages")),
        ck!("checkpoint.header.pages", |d, _| header_field(d, "pages")),
        ck!("checkpoint.header.ckpt_seq_lo", |d, _| header_field(d, "ckpt_seq_lo")),
        ck!("checkpoint.header.ckpt_seq_hi", |d, _| header_field(d, "ckpt_seq_hi")),
        ck!("checkpoint.header.next_seq_lo", |d, _| header_field(d, "next_seq_lo")),
        ck!("checkpoint.header.next_seq_hi", |d, _| header_field(d, "next_seq_hi")),
        ck!("checkpoint.header.frontier_words", |d, _| header_field(d, "frontier_words")),
        ck!("checkpoint.header.map_kind", |d, _| header_field(d, "map_kind")),
        ck!("checkpoint.header.reserved_a", |d, _| header_field(d, "reserved_a")),
        ck!("checkpoint.header.reserved_b", |d, _| header_field(d, "reserved_b")),
    ]
}

#[test]
fn format_doc_matches_the_code() {
    let doc = Doc::parse(DOC);
    let checks = checks();
    let mut failures = Vec::new();
    for (i, (name, _)) in doc.0.iter().enumerate() {
        if doc.0[..i].iter().any(|(n, _)| n == name) {
            failures.push(format!("{name}: marker twice in format.md"));
        }
        if !checks.iter().any(|(c, _)| c == name) {
            failures.push(format!("{name}: marker in format.md that no check knows"));
        }
    }
    for (name, check) in &checks {
        match doc.0.iter().find(|(n, _)| n == name) {
            None => failures.push(format!("{name}: no marker in format.md")),
            Some(&(_, v)) => {
                if let Some(Err(e)) = check.map(|c| c(&doc, v)) {
                    failures.push(format!("{name} = {v:#x}: {e}"));
                }
            }
        }
    }
    assert!(failures.is_empty(), "docs/format.md disagrees with the code:\n{}", failures.join("\n"));
}

/// The checks can fail: each rejects its marker's value plus one (as a doc left behind by a
/// changed constant or layout would state).
#[test]
fn every_check_rejects_a_wrong_value() {
    let doc = Doc::parse(DOC);
    for (name, check) in checks() {
        let Some(check) = check else { continue };
        let v = doc.get(name);
        let mut wrong = Doc(doc.0.clone());
        for (n, x) in wrong.0.iter_mut() {
            if n == name {
                *x = v.wrapping_add(1);
            }
        }
        assert!(
            check(&wrong, v.wrapping_add(1)).is_err(),
            "{name}: the check also accepts {:#x}",
            v.wrapping_add(1)
        );
    }
}
