//! Reusable SSD (feature `wom`): second writes of hot logical pages onto pairs of invalid
//! pages of garbage-collected blocks, with a write-once-memory code ([`SecondWriteCodec`]).
//!
//! **Block states** (one byte per block, [`ReuseMemory::state`]), on top of the block table:
//! `clean` and `used` are the baseline's free and used blocks; GC *recycles* a victim instead
//! of erasing it (no page moves: it becomes `Recycled`, out of GC's lists, block state `Open`);
//! a pair of recycled blocks (one in each plane of a plane pair of one LUN, same offsets) is
//! `Active` while the offset counter walks it; when no offset is invalid in both, both become
//! `Reused` (used blocks again, GC victims by valid count, always erased). Erasing any of them
//! makes it clean. Activating a pair first programs an activation marker into the
//! second-write metadata cells of page 0 of its plane-0 block (offset 0 is then never
//! second-written); that marker is how mount finds the blocks that may hold second writes.
//!
//! **Second write**: the logical page goes to the two pages at the offset counter of the
//! active pair of a plane pair (that of the plane the next first write would take, so first and
//! second writes share one rotation over planes and LUNs; a second write moves it past its pair;
//! both invalid first writes, not voided, never second-written; a page that was never programmed,
//! in a block closed early after a failed program, ends the pair), encoded over
//! their current contents, with [`SwMeta`] at the end of both spares; the map points at
//! the plane-0 half; a bitmap marks second-write pages and the block map
//! ([`ReuseMemory::pair`]) names each half's partner; both halves carry a valid bit, so both
//! blocks' valid counts include the page. Only hot pages (the classifier) are second-written,
//! only when both planes have a recycled block and the blocks are within
//! [`ReuseConfig::life_permille`] of their rated life; encode failure falls back to a first
//! write, or with [`ReuseConfig::retry_new_pair`] after one more encoding on the next pair of
//! invalid pages. First writes are scrambled by logical page and complemented when more than half of
//! the cells would be programmed (flags in the metadata's `aux` word), so that second writes
//! succeed on structured data.
//!
//! **GC** (per plane): runs while clean < the baseline reserve (then victims are erased) and,
//! on top, while clean + recycled < [`ReuseConfig::gc_threshold`] (then used victims are
//! recycled and reused ones erased; a used victim that would be erased ends it, so with no
//! second writes GC does exactly what the baseline does). The victim (fewest valid pages) is
//! erased if it is reused, if the plane is below its clean reserve, if recycled + reused
//! blocks, plus the recycled blocks still missing for every recycled block to have its pair
//! (one in the sibling plane; with `SamePlane` a second one in the plane), would exceed
//! [`ReuseConfig::cap_blocks`] (2R), if it is past its life share or (off by default) holds
//! more valid pages than [`ReuseConfig::recycle_max_valid_permille`]; otherwise it is
//! recycled. So the cap never fills with recycled blocks of one plane that no pair can take
//! (with a cap of one pair, the plane that lacks one can always recycle it). When only the cap
//! stops the top-up from recycling its victim, a reused block holding no valid page (any
//! plane) is erased first, which gives the cap's room back; a recycled block no pair can take (worn, or the cap over-full after a failed
//! activation marker, with no active pair in its plane pair) is erased by the top-up. With no
//! used or reused victim, the recycled block with the fewest valid pages is erased, so
//! recycled blocks never starve a plane. Valid second-write pages of an erased victim are
//! decoded and rewritten as first writes on the GC stream. (Found by a cap of one pair, which
//! both planes' recycling had filled in one plane, after a mount and without one:
//! `tests/tests/wom.rs`, `second_writes_*_cap_full`, `second_writes_keep_up_at_the_cap`.)
//! These are erases and recycles of the kinds GC did before, so the power-loss guarantees below
//! are unchanged.
//!
//! **Prefetch** ([`Ftl::prefetch_second_write`], when [`ReuseConfig::prefetch`]): background
//! work between host requests reads the next pair of invalid pages into the pair buffers, so
//! the next second write programs without reading first (host reads of second writes use a
//! third buffer and leave the prefetched pair alone). With [`Reuse::with_prefetch_slots`] every
//! plane pair has its own slot of two raw pages and the prefetch fills all of them (the paper's
//! one page per plane); a slot is dropped when its pair ends or a block of it is erased.
//!
//! **Layouts** ([`ReuseConfig::layout`], [`PairLayout`]; default two planes as above).
//! `SamePlane`: both halves in two blocks of one plane at the same offset, programmed and read
//! one after the other; a flag per block says which block is the mapped (first) half.
//! `SameBlock` (the paper's sequential variant): both halves in *one* recycled block, the first
//! usable offset from its counter and the next usable offset after it, programmed and read one
//! after the other; the block is its own partner in the block map, the pair's first page (lower
//! offset) is the mapped one, and [`SwMeta`] flags the halves ([`SW_SAME_BLOCK`]) and names the
//! other half's offset. A plane pair has one active block at a time, its planes alternating
//! per activation (the paper keeps one per plane; one per pair keeps the pair's prefetch slot).
//! Both halves carry valid bits and count in the block; GC moves the pair when it meets its
//! first page; mount finds the pair by the flag.
//!
//! **Disabling**: a block takes no more second writes (GC erases it rather than recycling it)
//! past [`ReuseConfig::life_permille`] of its rated endurance, or once a host read of one of
//! its first writes needed more than [`ReuseConfig::max_corrected_bits`] bits corrected (until
//! it is erased; a mount forgets it until the next such read).
//!
//! **Power loss**: a second write only reprograms pages that held no live data (pending trims
//! are journaled first, so a trimmed page's old content is not needed either), and the map
//! changes only after both halves are programmed, so a cut leaves the old mapping. Mount (see
//! `mount.rs`) finds the marked blocks in its survey, scans their spares for second writes,
//! replays those newer than the checkpoint in sequence order with the other pages, verifies the
//! newest by decoding it, and rolls it back (voiding its metadata) if it was torn. Pair
//! activations count as opened blocks for the checkpoint interval, which bounds the replay.
//! Every program the FTL issues with second writes on carries the bytes the cells hold where it
//! does not mean to clear them (a live page 0 under an activation marker: its metadata and codec
//! bytes decoded and encoded again, so raw read errors are not programmed into it), so chips
//! that refuse 0 -> 1 requests accept them. Second-write metadata carries the first write's
//! metadata code (3 bits corrected) and a CRC; it is read up to `SW_META_READS` (4) times
//! before being taken as torn.
//!
//! RAM ([`ReuseLayout`]): `ceil(total_pages / 32)` words of second-write bitmap, 5 bytes per
//! block (partner, state) and three raw pages, plus the codec's own memory; optionally two raw
//! pages per plane pair of prefetch slots ([`ReuseLayout::slot_bytes`]).

mod codec;
mod meta;
mod mount;

pub use codec::{SecondWriteCodec, SecondWriteError};
pub use meta::{SwMeta, SwState, HALF_MARKER, SW_META_LEN, SW_SAME_BLOCK};

use nand_hal::{BlockId, ErrorKind, Geometry, NandFlash, PageId, ProgramOp, ReadOp};

use crate::blocks::BlockState;
use crate::config::MAX_TOTAL_PLANES;
use crate::frontier::Source;
use crate::map::MappingTable;
use crate::meta::{PageKind, PageMeta, SpareState, META_LEN, VOID_OFFSET};
use crate::policy::{PageCodec, PolicySet, Temperature};
use crate::{Config, Error, Ftl};

const NIL: u32 = u32::MAX;
/// Reads of a second write's metadata (or of the whole second write) before taking it as torn
/// or lost: raw bit errors beyond what the codes correct are drawn anew by every read.
pub(crate) const SW_META_READS: u32 = 4;
use crate::ext::claims::SHARED_MOVE_LOST;
pub use crate::ext::claims::{AUX_COMPLEMENTED, AUX_FLAGS_LOST, AUX_SCRAMBLED};

/// Reuse state of a block (low nibble of its state byte).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[repr(u8)]
pub enum ReuseState {
    /// Clean or used: the baseline's states.
    None = 0,
    /// Recycled: its invalid pages may take second writes.
    Recycled = 2,
    /// One half of the active pair of its plane pair.
    Active = 3,
    /// Second writes done; a used block that GC erases.
    Reused = 4,
}

const STATE_MASK: u8 = 0x07;
/// The block is the plane-0 (first, mapped) half of its pair.
const A_SIDE: u8 = 0x08;
/// The block's first writes read back with more bit errors than second writes allow (RAM only:
/// a mount forgets it until the next such read).
const WORN: u8 = 0x80;
/// Mount only: page 0 carries a whole activation marker (the block is a pair's plane-0 half).
pub(crate) const M_MARKED: u8 = 0x40;
/// Mount only: the block holds second writes newer than the checkpoint (plane-0 halves).
pub(crate) const M_REPLAY: u8 = 0x20;
/// Mount only: some page's second-write metadata cells are not erased.
pub(crate) const M_TOUCHED: u8 = 0x10;

/// Where the two halves of a second write go.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum PairLayout {
    /// One page in each plane of a plane pair, at the same offset of two blocks: one
    /// multi-plane program and one multi-plane read (the paper's parallel design).
    #[default]
    TwoPlanes,
    /// Two blocks of one plane, same offset: programmed and read one after the other (the cost
    /// model of the paper's sequential variant, in two blocks).
    SamePlane,
    /// Two invalid pages of *one* recycled block, programmed and read one after the other (the
    /// paper's sequential variant, "a pair of contiguous invalid pages on the same block"):
    /// the first usable offset from the block's counter and the next usable offset after it,
    /// contiguous among the block's usable pages (a live or second-written page between them is
    /// stepped over rather than ending the pair, so no isolated invalid page is left unused).
    SameBlock,
}

/// Runtime settings of second writes.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct ReuseConfig {
    /// Most blocks recycled or reused at once, device-wide (the paper's 2R, R = physical minus
    /// logical blocks).
    pub cap_blocks: u32,
    /// Per plane: GC also runs while clean + recycled blocks are fewer than this (the paper's
    /// threshold, 1 % of the blocks there; at least the baseline's free reserve + 2 here).
    pub gc_threshold: u32,
    /// Second writes only on blocks whose erase count is below this share (per mille) of the
    /// rated endurance (the paper: 30 %).
    pub life_permille: u32,
    /// Second writes only on blocks none of whose first-write pages needed more than this many
    /// bits corrected when the host read them (what the reduced first-write ECC left after the
    /// second write took part of the spare can still correct; `u32::MAX`: no limit).
    pub max_corrected_bits: u32,
    /// GC recycles a victim only if at most this share (per mille) of its pages is valid, else
    /// erases it (not in the paper, whose victims held few valid pages; 1000: no limit).
    pub recycle_max_valid_permille: u32,
    /// Where the two halves of a second write go ([`PairLayout`]; default: one in each plane
    /// of a plane pair).
    pub layout: PairLayout,
    /// Read the next pair of invalid pages ahead ([`Ftl::prefetch_second_write`]).
    pub prefetch: bool,
    /// After an encoding failure (every attempt of the codec on the pair failed), read the
    /// next pair of invalid pages and encode once more there before falling back to a first
    /// write (the paper's general retry, section 5.6 and figure 12(c); off by default: the
    /// polar code retries on the same pages).
    pub retry_new_pair: bool,
}

impl ReuseConfig {
    /// The paper's settings for `geometry` and `config`: 2R, 1 % threshold, 30 % of life,
    /// prefetch on. R is the over-provisioning GC can use: physical minus logical blocks, less
    /// what this FTL keeps aside anyway (per plane its free reserve and one open block per
    /// stream plus one, and two checkpoints).
    pub const fn paper(geometry: &Geometry, config: &Config) -> Self {
        let r = Self::paper_r_blocks(geometry, config).saturating_sub(Self::reserve_blocks(geometry, config));
        let pct = geometry.blocks_per_plane / 100;
        let floor = config.gc_free_threshold + 2;
        ReuseConfig {
            cap_blocks: 2 * r,
            gc_threshold: if pct > floor { pct } else { floor },
            life_permille: 300,
            max_corrected_bits: u32::MAX,
            recycle_max_valid_permille: 1000,
            layout: PairLayout::TwoPlanes,
            prefetch: true,
            retry_new_pair: false,
        }
    }

    /// The paper's R = T - U: physical minus logical capacity, in blocks.
    pub const fn paper_r_blocks(geometry: &Geometry, config: &Config) -> u32 {
        let ppb = if geometry.pages_per_block == 0 { 1 } else { geometry.pages_per_block };
        geometry.total_pages().saturating_sub(config.logical_pages) / ppb
    }

    /// Blocks of over-provisioning this FTL keeps aside whatever second writes do (so R here is
    /// [`Self::paper_r_blocks`] less this): per plane its free reserve and one open block per
    /// stream plus one, and two checkpoints.
    pub const fn reserve_blocks(geometry: &Geometry, config: &Config) -> u32 {
        geometry.total_planes() * (config.gc_free_threshold + crate::frontier::STREAMS as u32 + 1)
            + 2 * crate::config::checkpoint_blocks(geometry, config.logical_pages)
    }
}

/// What second writes did (since the FTL was created).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct ReuseStats {
    /// Logical pages written as second writes.
    pub second_writes: u64,
    /// Hot pages that went to a first write because every encoding attempt failed.
    pub encode_failures: u64,
    /// Encoding retries over all second writes.
    pub retries: u64,
    /// Hot pages written as first writes because no recycled pair was available.
    pub no_pair: u64,
    /// Blocks recycled by GC.
    pub recycled: u64,
    /// Pairs activated.
    pub pairs: u64,
    /// Second-write pages read by the host.
    pub second_reads: u64,
    /// Valid second-write pages GC decoded and rewrote.
    pub gc_rewrites: u64,
    /// Pair reads served by a prefetch.
    pub prefetch_hits: u64,
    /// Pair reads issued by the write itself.
    pub prefetch_misses: u64,
    /// Offsets skipped because a half was voided or already carried second-write cells.
    pub skipped_pages: u64,
    /// Encodings retried on a new pair after a failure ([`ReuseConfig::retry_new_pair`]).
    pub pair_retries: u64,
    /// Pair reads served by a plane pair's own prefetch slot ([`Reuse::with_prefetch_slots`];
    /// also counted in `prefetch_hits`).
    pub slot_hits: u64,
}

/// Buffer sizes second writes need (see [`ReuseMemory`]).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct ReuseLayout {
    /// `u32` words of the second-write bitmap.
    pub second_words: usize,
    /// Blocks (entries of `pair` and `state`).
    pub blocks: usize,
    /// Bytes of each of the three raw page buffers.
    pub page_buf: usize,
}

impl ReuseLayout {
    /// The layout for a geometry.
    pub const fn new(geometry: &Geometry) -> Self {
        ReuseLayout {
            second_words: (geometry.total_pages() as usize).div_ceil(32),
            blocks: geometry.total_blocks() as usize,
            page_buf: geometry.raw_page_bytes() as usize,
        }
    }

    /// Total bytes.
    pub const fn total_bytes(&self) -> usize {
        self.second_words * 4 + self.blocks * 5 + 3 * self.page_buf
    }

    /// Bytes of the optional per-plane-pair prefetch slots ([`Reuse::with_prefetch_slots`]):
    /// two raw pages per plane pair.
    pub const fn slot_bytes(&self, geometry: &Geometry) -> usize {
        (geometry.total_planes() / 2) as usize * 2 * self.page_buf
    }
}

/// Memory the caller lends for second writes (sizes from [`ReuseLayout`]).
pub struct ReuseMemory<'m> {
    /// Bitmap of pages holding (a half of) a second write.
    pub second: &'m mut [u32],
    /// Block map: each reused block's partner in the other plane of its pair (`u32::MAX`: none).
    pub pair: &'m mut [u32],
    /// Reuse state byte per block.
    pub state: &'m mut [u8],
    /// Raw page buffer of the plane-0 half.
    pub page_a: &'m mut [u8],
    /// Raw page buffer of the plane-1 half.
    pub page_b: &'m mut [u8],
    /// Raw page buffer for host reads of second writes (which leave a prefetched pair alone) and
    /// the scratch of descrambling a first write.
    pub page_c: &'m mut [u8],
}

#[derive(Copy, Clone, Debug)]
struct ActivePair {
    a: u32,
    b: u32,
    offset: u32,
}

const NO_PAIR: ActivePair = ActivePair { a: NIL, b: NIL, offset: 0 };

/// Second writes: the codec, the memory, the settings and the running state.
pub struct Reuse<'m> {
    codec: &'m mut (dyn SecondWriteCodec + Send),
    mem: ReuseMemory<'m>,
    cfg: ReuseConfig,
    active: [ActivePair; MAX_TOTAL_PLANES / 2],
    /// Blocks recycled (any stage) or reused, device-wide.
    in_reuse: u32,
    /// Per plane: recycled + active blocks.
    recycled: [u32; MAX_TOTAL_PLANES],
    /// The pages whose raw images are in the buffers, if a prefetch read them.
    prefetched: Option<(PageId, PageId)>,
    /// Per plane pair, two raw pages read ahead for its next second write (empty: none).
    slots: &'m mut [u8],
    /// The pages whose raw images are in each plane pair's slot.
    slotted: [Option<(PageId, PageId)>; MAX_TOTAL_PLANES / 2],
    stats: ReuseStats,
}

impl<'m> Reuse<'m> {
    /// Second writes with `codec` over `mem`, configured by `cfg`.
    pub fn new(codec: &'m mut (dyn SecondWriteCodec + Send), mem: ReuseMemory<'m>, cfg: ReuseConfig) -> Self {
        Reuse {
            codec,
            mem,
            cfg,
            active: [NO_PAIR; MAX_TOTAL_PLANES / 2],
            in_reuse: 0,
            recycled: [0; MAX_TOTAL_PLANES],
            prefetched: None,
            slots: &mut [],
            slotted: [None; MAX_TOTAL_PLANES / 2],
            stats: ReuseStats::default(),
        }
    }

    /// Gives every plane pair its own prefetch buffer (`slots`: [`ReuseLayout::slot_bytes`]
    /// bytes), the paper's "one page must be prefetched for each plane": the prefetch then
    /// reads ahead the next pair of every plane pair with an active pair, not only of the one
    /// the next second write goes to. A slot is copied into the pair buffers when its pair is
    /// written. A length that does not fit the geometry is refused when the FTL is built.
    pub fn with_prefetch_slots(mut self, slots: &'m mut [u8]) -> Self {
        self.slots = slots;
        self
    }

    fn check(&self, geo: &Geometry, spare_used: usize) -> Result<(), Error> {
        let lay = ReuseLayout::new(geo);
        let m = &self.mem;
        if m.second.len() != lay.second_words
            || m.pair.len() != lay.blocks
            || m.state.len() != lay.blocks
            || m.page_a.len() != lay.page_buf
            || m.page_b.len() != lay.page_buf
            || m.page_c.len() != lay.page_buf
            || !(self.slots.is_empty() || self.slots.len() == lay.slot_bytes(geo))
        {
            return Err(Error::Memory);
        }
        let (off, len) = self.codec.region();
        let spare = geo.spare_bytes as usize;
        // Two planes per pair, one partial program for the second write and one to void it on
        // top of the first write, and pages reprogrammed out of order.
        if geo.planes_per_lun < 2
            || !geo.planes_per_lun.is_multiple_of(2)
            || geo.nop < 3
            || geo.sequential_program
            || off < spare_used
            || off.checked_add(len).is_none_or(|e| e + SW_META_LEN > spare)
            || self.cfg.gc_threshold == 0
        {
            return Err(Error::Config);
        }
        Ok(())
    }

    fn reset(&mut self) {
        self.mem.second.fill(0);
        self.mem.pair.fill(NIL);
        self.mem.state.fill(0);
        self.active = [NO_PAIR; MAX_TOTAL_PLANES / 2];
        self.in_reuse = 0;
        self.recycled = [0; MAX_TOTAL_PLANES];
        self.prefetched = None;
        self.slotted = [None; MAX_TOTAL_PLANES / 2];
    }

    /// Recycled blocks still missing for every recycled block to have its pair (the layout's:
    /// one in the sibling plane, a second one in the same plane, none for same-block pairs),
    /// over `planes` planes, with one more recycled block in `plus` if given. GC keeps
    /// `in_reuse + unmatched` within the cap, so the plane that lacks one can always recycle it
    /// and a pair can always form.
    fn unmatched(&self, planes: u32, plus: Option<u32>) -> u32 {
        let n = |p: u32| self.recycled.get(p as usize).copied().unwrap_or(0) + u32::from(plus == Some(p));
        match self.cfg.layout {
            PairLayout::TwoPlanes => (0..planes / 2).map(|q| n(2 * q).abs_diff(n(2 * q + 1))).sum(),
            PairLayout::SamePlane => (0..planes).map(|p| n(p) % 2).sum(),
            PairLayout::SameBlock => 0,
        }
    }

    fn state(&self, b: BlockId) -> ReuseState {
        match self.mem.state.get(b.0 as usize).map_or(0, |s| s & STATE_MASK) {
            2 => ReuseState::Recycled,
            3 => ReuseState::Active,
            4 => ReuseState::Reused,
            _ => ReuseState::None,
        }
    }

    fn set_state(&mut self, geo: &Geometry, b: BlockId, s: ReuseState) {
        let old = self.state(b);
        let plane = geo.plane_index(b) as usize;
        let recycling = |s: ReuseState| matches!(s, ReuseState::Recycled | ReuseState::Active);
        if recycling(old) {
            self.recycled[plane] -= 1;
        }
        if recycling(s) {
            self.recycled[plane] += 1;
        }
        if old != ReuseState::None {
            self.in_reuse -= 1;
        }
        if s != ReuseState::None {
            self.in_reuse += 1;
        }
        if let Some(x) = self.mem.state.get_mut(b.0 as usize) {
            *x = (*x & !STATE_MASK) | s as u8;
        }
    }

    fn is_second(&self, p: PageId) -> bool {
        self.mem.second.get(p.0 as usize / 32).is_some_and(|w| w & (1 << (p.0 % 32)) != 0)
    }

    fn set_second(&mut self, p: PageId, on: bool) {
        if let Some(w) = self.mem.second.get_mut(p.0 as usize / 32) {
            if on {
                *w |= 1 << (p.0 % 32);
            } else {
                *w &= !(1 << (p.0 % 32));
            }
        }
    }

    fn partner(&self, b: BlockId) -> Option<BlockId> {
        self.mem.pair.get(b.0 as usize).copied().filter(|&p| p != NIL).map(BlockId)
    }

    /// Undoes the first-write scrambler on a page's `data` in place: keyed by `key` (the logical
    /// page its metadata names; a shared page's first owner), complemented if `aux` says so.
    /// False (`data` untouched) if `aux` says it was written unscrambled. The host-read raw
    /// buffer is the scratch, so a prefetched pair stays.
    fn unscramble(&mut self, key: u32, aux: u32, data: &mut [u8]) -> bool {
        if aux & AUX_SCRAMBLED == 0 {
            return false;
        }
        let Some(stored) = self.mem.page_c.get_mut(..data.len()) else { return false };
        stored.copy_from_slice(data);
        self.codec.descramble(key as u64, stored, aux & AUX_COMPLEMENTED != 0, data);
        true
    }
}

/// Which plane pair a plane belongs to, and whether it is the pair's plane 0.
fn pair_of(plane: u32) -> (usize, bool) {
    ((plane / 2) as usize, plane.is_multiple_of(2))
}

/// Reads the raw images of `a` and `b`: one multi-plane read, or two reads when they share a
/// plane.
fn read_pair<N: NandFlash>(
    nand: &mut N,
    geo: &Geometry,
    a: PageId,
    b: PageId,
    ra: &mut [u8],
    rb: &mut [u8],
) -> Result<(), Error> {
    let d = geo.data_bytes as usize;
    let (da, sa) = ra.split_at_mut(d);
    let (db, sb) = rb.split_at_mut(d);
    if geo.plane_index(geo.block_of(a)) == geo.plane_index(geo.block_of(b)) {
        nand.read_page(a, da, sa)?;
        nand.read_page(b, db, sb)?;
        return Ok(());
    }
    let mut ops = [ReadOp { page: a, data: da, spare: sa }, ReadOp { page: b, data: db, spare: sb }];
    nand.read_multi(&mut ops).map_err(|(_, e)| Error::from(e))
}

impl<'m, N: NandFlash, P: PolicySet, M: MappingTable> Ftl<'m, N, P, M> {
    /// Attaches the second writes `ext` asks for (at format and mount).
    pub(crate) fn attach_reuse(&mut self, ext: &mut crate::ext::Extensions<'m>) -> Result<(), Error> {
        let Some(mut reuse) = ext.reuse.take() else { return Ok(()) };
        reuse.check(&self.geo, META_LEN + self.codec_len)?;
        reuse.reset();
        self.ext.reuse = Some(reuse);
        Ok(())
    }

    /// Whether second writes are on.
    pub(crate) fn reuse_on(&self) -> bool {
        self.ext.reuse.is_some()
    }

    /// Read hook: with second writes on, they read every mapped page (`Some(seq)`: `out` is
    /// filled with the data of the write with sequence number `seq`). `page` is physical
    /// (deduplication resolved a shared page, `shared`).
    pub(crate) fn reuse_read_hook(
        &mut self,
        lpn: u32,
        page: PageId,
        shared: bool,
        out: &mut [u8],
    ) -> Result<Option<u64>, Error> {
        if !self.reuse_on() {
            return Ok(None);
        }
        self.reuse_read_page(lpn, page, shared, out).map(Some)
    }

    /// GC hook: with second writes on, they decide what happens to `victim` (recycle or erase),
    /// or with no victim, erase a recycled block (`Some(collected)`); `None` when off.
    pub(crate) fn reuse_gc_hook(
        &mut self,
        plane: u32,
        victim: Option<BlockId>,
    ) -> Result<Option<bool>, Error> {
        if !self.reuse_on() {
            return Ok(None);
        }
        match victim {
            Some(v) => self.reuse_collect(v).map(Some),
            None => self.reuse_gc_fallback(plane).map(Some),
        }
    }

    /// GC hook: moves `page` if it is a second write (true).
    pub(crate) fn reuse_relocate_hook(&mut self, page: PageId, plane: u32) -> Result<bool, Error> {
        if !self.reuse_is_second(page) {
            return Ok(false);
        }
        self.relocate_second(page, plane)?;
        Ok(true)
    }

    /// The aux word of a page GC moves without its metadata (which no longer decodes): with second
    /// writes attached, `AUX_FLAGS_LOST`, since its scrambler flags went with the metadata (a read
    /// then reports it uncorrectable instead of returning data that may still be scrambled).
    pub(crate) fn aux_of_lost_meta(&self) -> u32 {
        if self.reuse_on() {
            AUX_FLAGS_LOST
        } else {
            0
        }
    }

    /// What second writes did, if they are on.
    pub fn reuse_stats(&self) -> Option<ReuseStats> {
        self.ext.reuse.as_ref().map(|r| r.stats)
    }

    /// Reuse state of a block, if second writes are on.
    pub fn reuse_state(&self, b: BlockId) -> Option<ReuseState> {
        self.ext.reuse.as_ref().map(|r| r.state(b))
    }

    /// Blocks recycled or reused, device-wide.
    pub fn reuse_blocks(&self) -> u32 {
        self.ext.reuse.as_ref().map_or(0, |r| r.in_reuse)
    }

    /// Whether `page` holds a half of a second write.
    pub(crate) fn reuse_is_second(&self, page: PageId) -> bool {
        self.ext.reuse.as_ref().is_some_and(|r| r.is_second(page))
    }

    fn sw_offset(&self) -> usize {
        (self.geo.data_bytes + self.geo.spare_bytes) as usize - SW_META_LEN
    }

    // -----------------------------------------------------------------------------------------
    // Host writes and reads

    /// A second write of host page `lpn` if it is hot and a pair takes it (true: written, mapped
    /// and counted); false: the caller writes it as a first write.
    pub(crate) fn reuse_second_write_hook(
        &mut self,
        lpn: u32,
        data: &[u8],
        t: Temperature,
    ) -> Result<bool, Error> {
        if t != Temperature::Hot || !self.reuse_on() {
            return Ok(false);
        }
        let Some((_, seq)) = self.try_second_write(lpn, data)? else { return Ok(false) };
        self.counters.host_write_pages += 1;
        // The NV cache's copy, as after a first write.
        self.nv_after_write(lpn, data, seq)?;
        Ok(true)
    }

    /// Scrambles `data` (keyed by `lpn`) into the page buffer's data area; returns the `aux`
    /// flags.
    pub(crate) fn scramble_into_buf(&mut self, lpn: u32, data: &[u8]) -> u32 {
        let d = self.geo.data_bytes as usize;
        let Some(r) = self.ext.reuse.as_mut() else {
            self.buf[..d].copy_from_slice(data);
            return 0;
        };
        let complemented = r.codec.scramble(lpn as u64, data, &mut self.buf[..d]);
        AUX_SCRAMBLED | if complemented { AUX_COMPLEMENTED } else { 0 }
    }

    /// Reads a logical page mapped to `page` with second writes on; returns the write's sequence
    /// number (a second write's own, from its second-write metadata). A `shared` page
    /// (deduplication) is a first write of its first owner, whose logical page keys the
    /// scrambler, or a relocation copy GC wrote unscrambled.
    pub(crate) fn reuse_read_page(
        &mut self,
        lpn: u32,
        page: PageId,
        shared: bool,
        out: &mut [u8],
    ) -> Result<u64, Error> {
        if self.reuse_is_second(page) {
            let (_, seq) = self.read_second(page, Some(lpn), out, true)?;
            if let Some(r) = self.ext.reuse.as_mut() {
                r.stats.second_reads += 1;
            }
            return Ok(seq);
        }
        let d = self.geo.data_bytes as usize;
        let spare_len = META_LEN + self.codec_len;
        self.counters.nand_reads += 1;
        self.nand.read_page(page, out, &mut self.buf[d..d + spare_len])?;
        let (key, aux, seq) = match PageMeta::decode(&self.buf[d..d + spare_len]) {
            SpareState::Valid(m) if m.kind == PageKind::Data && (m.tag == lpn || shared) => {
                (m.tag, m.aux, m.seq)
            }
            _ => return Err(Error::Uncorrectable { lpn }),
        };
        // A shared page's relocation copy holds its content unscrambled (`dedup_move_copy`).
        let moved = shared && self.dedup_is_move(aux);
        if (aux & AUX_FLAGS_LOST != 0 && !moved) || aux == SHARED_MOVE_LOST {
            return Err(Error::Uncorrectable { lpn });
        }
        let stored = &self.buf[d + META_LEN..d + spare_len];
        let corrected =
            self.policies.codec().decode(out, stored).map_err(|_| Error::Uncorrectable { lpn })?;
        if let Some(r) = self.ext.reuse.as_mut() {
            if corrected > r.cfg.max_corrected_bits {
                if let Some(s) = r.mem.state.get_mut(self.geo.block_of(page).0 as usize) {
                    *s |= WORN;
                }
            }
        }
        if !moved {
            if let Some(r) = self.ext.reuse.as_mut() {
                r.unscramble(key, aux, out);
            }
        }
        Ok(seq)
    }

    /// The NV cache's mount reconciliation (`cdm`): reads `lpn`'s flash copy at `page` as a host
    /// read does (a second write decoded, a first write unscrambled) into the page buffer's data
    /// area. `Some(Some(seq))`: it read back, with its sequence number (the second-write
    /// metadata's for a second write); `Some(None)`: it does not read back; `None`: second writes
    /// are off (the caller reads the page itself). Uses the first pair buffer (a prefetched pair
    /// is dropped).
    #[cfg(feature = "cdm")]
    pub(crate) fn reuse_flash_copy(&mut self, lpn: u32, page: PageId) -> Result<Option<Option<u64>>, Error> {
        let d = self.geo.data_bytes as usize;
        let Some(r) = self.ext.reuse.as_mut() else { return Ok(None) };
        r.prefetched = None;
        let out = core::mem::take(&mut r.mem.page_a);
        let (page, shared) = self.dedup_resolve(page);
        let read = self.reuse_read_page(lpn, page, shared, &mut out[..d]);
        if read.is_ok() {
            self.buf[..d].copy_from_slice(&out[..d]);
        }
        if let Some(r) = self.ext.reuse.as_mut() {
            r.mem.page_a = out;
        }
        match read {
            Ok(seq) => Ok(Some(Some(seq))),
            Err(Error::Uncorrectable { .. }) => Ok(Some(None)),
            Err(e) => Err(e),
        }
    }

    /// Undoes the first-write scrambler on the data page in the page buffer (its data decoded,
    /// its metadata in the spare as read), keyed by the logical page the metadata names (a
    /// shared page's first owner). `Some(true)`: the data area now holds the content;
    /// `Some(false)`: it held it already (second writes off, or a page written unscrambled);
    /// `None`: unknown (metadata that does not decode, or flags GC lost). Uses the host-read raw
    /// buffer, so a prefetched pair stays.
    #[cfg(feature = "dedup")]
    pub(crate) fn reuse_unscramble_buf(&mut self) -> Option<bool> {
        if !self.reuse_on() {
            return Some(false);
        }
        let d = self.geo.data_bytes as usize;
        let SpareState::Valid(m) = PageMeta::decode(&self.buf[d..d + META_LEN]) else { return None };
        if m.kind == PageKind::Data && m.aux == SHARED_MOVE_LOST {
            return None;
        }
        if m.kind != PageKind::Data || self.dedup_is_move(m.aux) {
            return Some(false);
        }
        if m.aux & AUX_FLAGS_LOST != 0 {
            return None;
        }
        let r = self.ext.reuse.as_mut()?;
        Some(r.unscramble(m.tag, m.aux, &mut self.buf[..d]))
    }

    /// The (plane-0, plane-1) pages of the second write one of whose halves is `page` (in a
    /// same-block pair: the lower and the higher offset).
    ///
    /// A same-block pair's block is its own partner in the block map. Its second-write pages
    /// pair up in offset order (first with second, third with fourth...): pairs take
    /// increasing offsets and never interleave, and their bits are set and cleared two by two
    /// (`try_second_write`, `void_second`, mount's scan), so no per-page partner is kept in
    /// RAM; this walks the block's bits (`pages_per_block` bit tests).
    fn halves(&self, page: PageId) -> Option<(PageId, PageId)> {
        let r = self.ext.reuse.as_ref()?;
        let b = self.geo.block_of(page);
        let o = self.geo.page_in_block(page);
        let partner = r.partner(b)?;
        if partner == b {
            let mut first = None;
            for p in (0..self.geo.pages_per_block).map(|i| self.geo.page(b, i)).filter(|&p| r.is_second(p)) {
                match first.take() {
                    None => first = Some(p),
                    Some(a) if a == page || p == page => return Some((a, p)),
                    Some(_) => {}
                }
            }
            return None;
        }
        let other = self.geo.page(partner, o);
        let a_side = r.mem.state.get(b.0 as usize).is_some_and(|s| s & A_SIDE != 0);
        Some(if a_side { (page, other) } else { (other, page) })
    }

    /// Reads both halves of the second write at `page` into the reuse buffers and decodes it
    /// into `out`. `lpn`, if given, must match the metadata. Returns the logical page and the
    /// second write's sequence number.
    /// Host reads (`host`) go through the page buffer and the third reuse buffer, so a
    /// prefetched pair stays; GC and mount use the pair buffers.
    fn read_second(
        &mut self,
        page: PageId,
        lpn: Option<u32>,
        out: &mut [u8],
        host: bool,
    ) -> Result<(u32, u64), Error> {
        let bad = Error::Uncorrectable { lpn: lpn.unwrap_or(0) };
        let (a, b) = self.halves(page).ok_or(bad)?;
        let so = self.sw_offset();
        let Some(r) = self.ext.reuse.as_mut() else { return Err(bad) };
        let (ra, rb): (&mut [u8], &mut [u8]) = if host {
            (&mut *self.buf, &mut *r.mem.page_c)
        } else {
            r.prefetched = None;
            (&mut *r.mem.page_a, &mut *r.mem.page_b)
        };
        let mut lost = bad;
        for _ in 0..SW_META_READS {
            self.counters.nand_reads += 2;
            read_pair(&mut self.nand, &self.geo, a, b, ra, rb)?;
            let meta = match SwMeta::decode(&ra[so..]) {
                SwState::Valid(m) if m.half == 0 && lpn.is_none_or(|l| l == m.lpn) => m,
                _ => continue,
            };
            match r.codec.decode(a.0 as u64, ra, rb, out) {
                Ok(()) => return Ok((meta.lpn, meta.seq)),
                Err(_) => lost = Error::Uncorrectable { lpn: meta.lpn },
            }
        }
        Err(lost)
    }

    // -----------------------------------------------------------------------------------------
    // Second writes

    /// Tries a second write of `lpn`; `Ok(None)` when it must be a first write instead.
    /// Returns the plane-0 half and the write's sequence number.
    fn try_second_write(&mut self, lpn: u32, data: &[u8]) -> Result<Option<(PageId, u64)>, Error> {
        if self.ext.reuse.is_none() {
            return Ok(None);
        }
        // The plane pair of the plane the next first write would take: second and first writes
        // share one rotation over the planes (and so over the LUNs), which a second write
        // advances past its pair.
        let q = self.next_pair_index();
        // A page an earlier failed program left unvoided must not be followed by newer programs.
        self.settle_torn()?;
        // A trimmed page's old content is still what mount would find until the trim is
        // journaled: journal before reprogramming any invalid page.
        if !self.trims.is_empty() {
            self.write_journal()?;
        }
        let d = self.geo.data_bytes as usize;
        let so = self.sw_offset();
        let mut new_pair_left = self.ext.reuse.as_ref().is_some_and(|r| r.cfg.retry_new_pair);
        let (a, b, retries) = loop {
            let Some((a, b)) = self.next_pair_pages(q)? else {
                if let Some(r) = self.ext.reuse.as_mut() {
                    r.stats.no_pair += 1;
                }
                return Ok(None);
            };
            self.load_pair(a, b, true)?;
            let Some(r) = self.ext.reuse.as_mut() else { return Ok(None) };
            r.prefetched = None;
            // Only pages a first write completed: a page whose first-write metadata reads
            // erased was never programmed (a block closed early after a failed program), and
            // neither was anything after it in its block. Mount takes such a page for the end
            // of what its block holds (a program torn before its metadata is voided there and
            // the frontier resumes on it), so a second write must not go there: the pair ends.
            let unwritten = |p: &[u8]| matches!(PageMeta::decode(&p[d..d + META_LEN]), SpareState::Erased);
            if unwritten(r.mem.page_a) || unwritten(r.mem.page_b) {
                r.stats.skipped_pages += 1;
                self.end_pair(q);
                return Ok(None);
            }
            // The pages must not have been voided by the first write nor carry second-write cells.
            // Nor hold more programmed cells than a second write can live with (pages written
            // unscrambled, e.g. journal pages): more than 5/8 of the data cells programmed.
            let fresh = |p: &[u8]| {
                let programmed: u32 = p[..d].iter().map(|x| x.count_zeros()).sum();
                p[d + VOID_OFFSET] == 0xFF
                    && p[so..].iter().all(|&x| x == 0xFF)
                    && programmed as usize * 8 <= d * 8 * 5
            };
            // The code is computed over the cells as they are: correct the raw read errors of the
            // first writes' data first (a cell read as erased but programmed would break the
            // codeword for good). A first write that does not decode (torn) is not used.
            let cl = META_LEN + self.codec_len;
            let codec = self.policies.codec();
            let mut corrected = |p: &mut [u8]| {
                let (data, spare) = p.split_at_mut(d);
                codec.decode(data, &spare[META_LEN..cl]).is_ok()
            };
            if !fresh(r.mem.page_a)
                || !fresh(r.mem.page_b)
                || !corrected(r.mem.page_a)
                || !corrected(r.mem.page_b)
            {
                // Not usable (voided, torn, a second write started here before a cut, or too dense).
                r.active[q].offset = self.geo.page_in_block(a) + 1;
                r.stats.skipped_pages += 1;
                return Ok(None);
            }
            match r.codec.encode(a.0 as u64, data, r.mem.page_a, r.mem.page_b) {
                Ok(n) => break (a, b, n),
                Err(_) => {
                    // Move on: another pair may suit this data, and this one other data.
                    r.active[q].offset = self.geo.page_in_block(a) + 1;
                    if !core::mem::take(&mut new_pair_left) {
                        r.stats.encode_failures += 1;
                        return Ok(None);
                    }
                    r.stats.pair_retries += 1;
                }
            }
        };
        // The same for the pages share records (deduplication) made invalid: their records
        // first, once a pair takes the page (a flush at every attempt wrote a share-journal page
        // per hot write when no pair was ready: 6x the journal pages on TPC-C).
        self.dedup_flush_pending(false)?;
        let Some(r) = self.ext.reuse.as_mut() else { return Ok(None) };
        r.stats.retries += retries as u64;
        let seq = self.seq;
        self.seq += 1;
        let (ba, bb) = (self.geo.block_of(a), self.geo.block_of(b));
        // Each half names the other: its block, or in a same-block pair its offset.
        let same_block = ba == bb;
        let (oa, ob) = (self.geo.page_in_block(a), self.geo.page_in_block(b));
        let (to_b, to_a) = if same_block { (ob, oa) } else { (bb.0, ba.0) };
        SwMeta { half: 0, same_block, lpn, seq, partner: to_b }.encode(&mut r.mem.page_a[so..]);
        SwMeta { half: 1, same_block, lpn, seq, partner: to_a }.encode(&mut r.mem.page_b[so..]);
        self.counters.nand_programs += 2;
        self.dirty = true;
        let ops = [
            ProgramOp { page: a, data: &r.mem.page_a[..d], spare: &r.mem.page_a[d..] },
            ProgramOp { page: b, data: &r.mem.page_b[..d], spare: &r.mem.page_b[d..] },
        ];
        // Past both pages, whatever the program does (a same-block pair's pages never
        // interleave with another's, which is how `halves` pairs them up).
        r.active[q].offset = ob + 1;
        let programmed = if self.geo.plane_index(ba) == self.geo.plane_index(bb) {
            // Same plane: one program after the other.
            ops.iter()
                .enumerate()
                .try_for_each(|(i, o)| self.nand.program_page(o.page, o.data, o.spare).map_err(|e| (i, e)))
        } else {
            self.nand.program_multi(&ops)
        };
        match programmed {
            Ok(()) => {}
            Err((i, e)) if nand_hal::Error::kind(&e) == ErrorKind::ProgramFailed => {
                // Nothing live was on either page; void the metadata so mount never takes it,
                // stop second writes on the pair and let GC retire the block.
                self.counters.program_failures += 1;
                if !self.void_second(a, b) {
                    // Mount could take it (newer than the checkpoint): a checkpoint makes it moot.
                    self.checkpoint_soon();
                }
                self.end_pair(q);
                // Its live second writes move with the rest of its data when GC retires it
                // (`retire_now` then forgets its reuse state).
                let failed = if i == 0 { ba } else { bb };
                self.start_retiring(failed);
                return Ok(None);
            }
            Err((_, e)) => {
                // Power loss or a timeout: a torn second write may read as valid; no later
                // program before it is voided or checkpointed (`settle_torn`).
                self.checkpoint_soon();
                return Err(e.into());
            }
        }
        self.remap(lpn, Some(a))?;
        self.next_plane = (2 * q as u32 + 2) % self.geo.total_planes();
        if let Some(r) = self.ext.reuse.as_mut() {
            r.set_second(a, true);
            r.set_second(b, true);
            r.mem.pair[ba.0 as usize] = bb.0;
            r.mem.pair[bb.0 as usize] = ba.0;
            r.stats.second_writes += 1;
        }
        self.set_valid_bit(b, true);
        Ok(Some((a, seq)))
    }

    /// Voids the second-write metadata of both halves (through the page buffer; each program
    /// carries the spare as read up to the void byte, so it only clears that byte) and reads it
    /// back. True if both halves now read as no whole second write.
    pub(crate) fn void_second(&mut self, a: PageId, b: PageId) -> bool {
        let d = self.geo.data_bytes as usize;
        let sp = self.geo.spare_bytes as usize;
        let at = sp - SW_META_LEN + meta::SW_VOID_OFFSET;
        let mut done = true;
        for p in [a, b] {
            self.counters.nand_reads += 1;
            if self.nand.read_spare(p, &mut self.buf[d..d + sp]).is_err() {
                done = false;
                continue;
            }
            if !matches!(SwMeta::decode(&self.buf[d + sp - SW_META_LEN..d + sp]), SwState::Valid(_)) {
                continue;
            }
            self.buf[d + at] = 0;
            self.counters.nand_programs += 1;
            let _ = self.nand.program_page(p, &[], &self.buf[d..d + at + 1]);
            self.counters.nand_reads += 1;
            let back = self.nand.read_spare(p, &mut self.buf[d..d + sp]);
            done &= back.is_ok()
                && !matches!(SwMeta::decode(&self.buf[d + sp - SW_META_LEN..d + sp]), SwState::Valid(_));
        }
        if let Some(r) = self.ext.reuse.as_mut() {
            r.set_second(a, false);
            r.set_second(b, false);
        }
        done
    }

    /// Reads the raw images of `a` and `b` into the reuse buffers unless a prefetch holds them
    /// (in the buffers, or in their plane pair's slot, which is then copied over and emptied).
    fn load_pair(&mut self, a: PageId, b: PageId, on_demand: bool) -> Result<(), Error> {
        let (q, _) = pair_of(self.geo.plane_index(self.geo.block_of(a)));
        let Some(r) = self.ext.reuse.as_mut() else { return Ok(()) };
        if r.prefetched == Some((a, b)) {
            r.stats.prefetch_hits += 1;
            return Ok(());
        }
        if r.slotted.get(q).copied().flatten() == Some((a, b)) {
            let n = r.mem.page_a.len();
            let slot = &r.slots[2 * q * n..2 * (q + 1) * n];
            r.mem.page_a.copy_from_slice(&slot[..n]);
            r.mem.page_b.copy_from_slice(&slot[n..]);
            r.slotted[q] = None;
            r.prefetched = Some((a, b));
            r.stats.prefetch_hits += 1;
            r.stats.slot_hits += 1;
            return Ok(());
        }
        if on_demand {
            r.stats.prefetch_misses += 1;
        }
        r.prefetched = None;
        self.counters.nand_reads += 2;
        read_pair(&mut self.nand, &self.geo, a, b, r.mem.page_a, r.mem.page_b)?;
        r.prefetched = Some((a, b));
        Ok(())
    }

    /// Background work between host requests: reads the next pair of invalid pages ahead of
    /// the next second write (the paper's prefetch), when prefetching is on: the pair the next
    /// second write goes to, into the pair buffers, or with prefetch slots
    /// ([`Reuse::with_prefetch_slots`]) the next pair of every plane pair with an active pair
    /// and an empty slot. Returns whether it read anything.
    pub fn prefetch_second_write(&mut self) -> Result<bool, Error> {
        let Some(r) = self.ext.reuse.as_ref() else { return Ok(false) };
        if !r.cfg.prefetch {
            return Ok(false);
        }
        if !r.slots.is_empty() {
            return self.prefetch_slots();
        }
        if r.prefetched.is_some() {
            return Ok(false);
        }
        let q = self.next_pair_index();
        let pair = r.active[q];
        if pair.a == NIL {
            return Ok(false);
        }
        let Some((a, b)) = self.next_pages(pair) else { return Ok(false) };
        self.load_pair(a, b, false)?;
        Ok(true)
    }

    /// The plane pair the next second write goes to: that of the next first write's plane.
    fn next_pair_index(&self) -> usize {
        let pairs = (self.geo.total_planes() / 2).max(1);
        ((self.next_plane / 2) % pairs) as usize
    }

    /// Fills the empty prefetch slots of the plane pairs with an active pair.
    fn prefetch_slots(&mut self) -> Result<bool, Error> {
        let mut any = false;
        for q in 0..(self.geo.total_planes() / 2) as usize {
            let Some(r) = self.ext.reuse.as_ref() else { return Ok(any) };
            let pair = r.active[q];
            if pair.a == NIL || r.slotted[q].is_some() {
                continue;
            }
            let Some((a, b)) = self.next_pages(pair) else { continue };
            if r.prefetched == Some((a, b)) {
                continue;
            }
            let Some(r) = self.ext.reuse.as_mut() else { return Ok(any) };
            let n = r.mem.page_a.len();
            let (sa, sb) = r.slots[2 * q * n..2 * (q + 1) * n].split_at_mut(n);
            self.counters.nand_reads += 2;
            read_pair(&mut self.nand, &self.geo, a, b, sa, sb)?;
            r.slotted[q] = Some((a, b));
            any = true;
        }
        Ok(any)
    }

    /// The next two pages of the pair from its counter that are free (invalid, no second write):
    /// the lowest offset free in both blocks, or in a same-block pair (`a == b`) the lowest free
    /// offset and the next free offset after it.
    fn next_pages(&self, pair: ActivePair) -> Option<(PageId, PageId)> {
        let r = self.ext.reuse.as_ref()?;
        let free = |p: PageId| !self.is_valid_page(p) && !r.is_second(p);
        let (ba, bb) = (BlockId(pair.a), BlockId(pair.b));
        let offsets = pair.offset..self.geo.pages_per_block;
        if ba == bb {
            let mut pages = offsets.map(|o| self.geo.page(ba, o)).filter(|&p| free(p));
            return Some((pages.next()?, pages.next()?));
        }
        offsets.map(|o| (self.geo.page(ba, o), self.geo.page(bb, o))).find(|&(a, b)| free(a) && free(b))
    }

    /// The next pair of pages of plane pair `q`, activating recycled blocks as needed.
    fn next_pair_pages(&mut self, q: usize) -> Result<Option<(PageId, PageId)>, Error> {
        loop {
            let Some(r) = self.ext.reuse.as_ref() else { return Ok(None) };
            let pair = r.active[q];
            if pair.a != NIL {
                if let Some(pages) = self.next_pages(pair) {
                    return Ok(Some(pages));
                }
                self.end_pair(q);
                continue;
            }
            if !self.activate_pair(q)? {
                return Ok(None);
            }
        }
    }

    /// Ends the active pair of `q`: both blocks become reused (used blocks GC erases).
    fn end_pair(&mut self, q: usize) {
        let geo = self.geo;
        let Some(r) = self.ext.reuse.as_mut() else { return };
        let pair = core::mem::replace(&mut r.active[q], NO_PAIR);
        r.prefetched = None;
        if let Some(s) = r.slotted.get_mut(q) {
            *s = None;
        }
        for b in [pair.a, pair.b] {
            if b == NIL {
                continue;
            }
            let b = BlockId(b);
            if r.state(b) == ReuseState::Active {
                r.set_state(&geo, b, ReuseState::Reused);
                if self.blocks.state(b) == BlockState::Open {
                    self.blocks.set_state(b, BlockState::Used);
                }
            }
        }
    }

    /// Activates a recycled block in each plane of pair `q` (with [`PairLayout::SamePlane`] two
    /// in one plane, with [`PairLayout::SameBlock`] one block, `a == b`, the planes alternating
    /// per activation); false if there are not enough.
    fn activate_pair(&mut self, q: usize) -> Result<bool, Error> {
        let p0 = 2 * q as u32;
        let Some((layout, pairs)) = self.ext.reuse.as_ref().map(|r| (r.cfg.layout, r.stats.pairs)) else {
            return Ok(false);
        };
        // Alternate the pair's planes when the halves share one.
        let p = p0 + (pairs % 2) as u32;
        let picked = match layout {
            PairLayout::TwoPlanes => self.pick_recycled(p0, None).zip(self.pick_recycled(p0 + 1, None)),
            PairLayout::SamePlane => {
                self.pick_recycled(p, None).and_then(|a| Some((a, self.pick_recycled(p, Some(a))?)))
            }
            PairLayout::SameBlock => self.pick_recycled(p, None).map(|a| (a, a)),
        };
        let Some((a, b)) = picked else {
            return Ok(false);
        };
        // Replayed blocks are bounded by the checkpoint interval: a pair counts as one.
        self.settle_torn()?;
        self.checkpoint_if_due()?;
        self.ckpt.blocks_since += 1;
        let geo = self.geo;
        // The activation marker (page 0's second-write metadata cells, which page 0 then never
        // uses for a second write) is what tells mount to look for second writes here.
        let marked = match self.marker_spare(geo.page(a, 0))? {
            true => {
                let seq = self.seq;
                self.seq += 1;
                let (d, sp) = (geo.data_bytes as usize, geo.spare_bytes as usize);
                SwMeta { half: meta::HALF_MARKER, same_block: false, lpn: NIL, seq, partner: b.0 }
                    .encode(&mut self.buf[d + sp - SW_META_LEN..d + sp]);
                self.counters.nand_programs += 1;
                self.dirty = true;
                self.nand.program_page(geo.page(a, 0), &[], &self.buf[d..d + sp]).map_err(Some)
            }
            false => Err(None),
        };
        let Some(r) = self.ext.reuse.as_mut() else { return Ok(false) };
        match marked {
            Ok(()) => {}
            Err(e) if e.as_ref().is_none_or(|e| nand_hal::Error::kind(e) == ErrorKind::ProgramFailed) => {
                // Never second-write this one; GC erases it as a reused block.
                self.counters.program_failures += u64::from(e.is_some());
                r.set_state(&geo, a, ReuseState::Reused);
                self.blocks.set_state(a, BlockState::Used);
                return Ok(true);
            }
            Err(e) => return Err(e.map_or(Error::Corrupt, Error::from)),
        }
        r.set_state(&geo, a, ReuseState::Active);
        r.set_state(&geo, b, ReuseState::Active);
        if a != b {
            r.mem.state[a.0 as usize] |= A_SIDE;
        }
        r.mem.pair[a.0 as usize] = b.0;
        r.mem.pair[b.0 as usize] = a.0;
        r.active[q] = ActivePair { a: a.0, b: b.0, offset: 1 };
        r.stats.pairs += 1;
        Ok(true)
    }

    /// Whether second writes may still use `b`: within its life share and not worn.
    fn within_life(&self, b: BlockId) -> bool {
        let Some(r) = self.ext.reuse.as_ref() else { return false };
        r.mem.state.get(b.0 as usize).is_some_and(|s| s & WORN == 0)
            && (self.blocks.get(b).erase_count() as u64) * 1000
                < self.geo.endurance as u64 * r.cfg.life_permille as u64
    }

    /// Prepares in the page buffer's spare area what the activation marker's program of `page`
    /// (page 0 of the plane-0 block) sends besides the marker: the bytes its cells hold, so that
    /// a chip refusing 0 -> 1 requests accepts it and nothing but the marker changes. A live
    /// first write's metadata and codec bytes are sent as *corrected* (decoded and encoded again,
    /// which gives back exactly what was programmed), so raw read errors are not programmed into
    /// them; a dead page's are sent as read (nothing needs them); the rest is erased (page 0 never
    /// takes a second write). False if the page cannot take a marker (its spare is not erased
    /// there, or a live page does not decode).
    fn marker_spare(&mut self, page: PageId) -> Result<bool, Error> {
        let d = self.geo.data_bytes as usize;
        let sp = self.geo.spare_bytes as usize;
        let cl = META_LEN + self.codec_len;
        self.counters.nand_reads += 1;
        {
            let (data, spare) = self.buf.split_at_mut(d);
            self.nand.read_page(page, data, &mut spare[..sp])?;
        }
        if self.buf[d + sp - SW_META_LEN..d + sp].iter().any(|&x| x != 0xFF) {
            return Ok(false);
        }
        if self.is_valid_page(page) {
            let SpareState::Valid(m) = PageMeta::decode(&self.buf[d..d + cl]) else { return Ok(false) };
            let (data, spare) = self.buf.split_at_mut(d);
            let codec = self.policies.codec();
            if codec.decode(data, &spare[META_LEN..cl]).is_err() {
                return Ok(false);
            }
            m.encode(&mut spare[..META_LEN]);
            codec.encode(data, &mut spare[META_LEN..cl]);
        }
        self.buf[d + cl..d + sp].fill(0xFF);
        Ok(true)
    }

    /// The recycled block of `plane` (other than `not`) with the fewest valid pages.
    fn pick_recycled(&self, plane: u32, not: Option<BlockId>) -> Option<BlockId> {
        let r = self.ext.reuse.as_ref()?;
        if r.recycled[plane as usize] == 0 {
            return None;
        }
        (0..self.geo.blocks_per_plane)
            .map(|n| self.geo.block_in_plane(plane, n))
            .filter(|&b| {
                Some(b) != not
                    && r.state(b) == ReuseState::Recycled
                    && self.blocks.state(b) == BlockState::Open
                    && self.within_life(b)
            })
            .min_by_key(|&b| self.blocks.get(b).valid())
    }

    // -----------------------------------------------------------------------------------------
    // GC, erase, map and checkpoint hooks

    /// Whether GC erases `victim` (else it recycles it): reused, the plane below its clean
    /// reserve, no room under the recycled + reused cap for it and for the blocks that would
    /// then still be missing for its pair ([`Reuse::unmatched`]), or the block past its life
    /// share.
    fn erases(&self, victim: BlockId) -> bool {
        self.erases_under_cap(victim) || self.over_cap(victim)
    }

    /// Whether recycling `victim` would take the cap's room (see [`Ftl::erases`]).
    fn over_cap(&self, victim: BlockId) -> bool {
        let plane = self.geo.plane_index(victim);
        self.ext.reuse.as_ref().is_none_or(|r| {
            r.in_reuse + 1 + r.unmatched(self.geo.total_planes(), Some(plane)) > r.cfg.cap_blocks
        })
    }

    /// [`Ftl::erases`] but for the cap.
    fn erases_under_cap(&self, victim: BlockId) -> bool {
        let plane = self.geo.plane_index(victim);
        let Some(r) = self.ext.reuse.as_ref() else { return true };
        r.state(victim) != ReuseState::None
            || self.blocks.free_count(plane) < self.cfg.gc_free_threshold
            || !self.within_life(victim)
            || (self.blocks.get(victim).valid() as u64) * 1000
                > self.geo.pages_per_block as u64 * r.cfg.recycle_max_valid_permille as u64
    }

    /// GC's decision on a victim with second writes on: recycle or erase (collect).
    pub(crate) fn reuse_collect(&mut self, victim: BlockId) -> Result<bool, Error> {
        if self.erases(victim) {
            self.collect(victim, crate::gc::Finish::Erase)?;
        } else {
            // Its invalid pages may be second-written from now on: pages replay still needs
            // (a journal page, a share journal, a shared page's relocation copy or the owner's
            // write a share newer than the checkpoint rests on) are kept until the next
            // checkpoint, as `finish_collect` keeps them from an erase.
            if self.blocks.get(victim).flags() & crate::blocks::FLAG_LIVE_JOURNAL != 0 {
                self.write_checkpoint()?;
            }
            let geo = self.geo;
            self.blocks.set_state(victim, BlockState::Open);
            if let Some(r) = self.ext.reuse.as_mut() {
                r.set_state(&geo, victim, ReuseState::Recycled);
                r.stats.recycled += 1;
            }
        }
        self.counters.gc_blocks += 1;
        Ok(true)
    }

    /// GC found no used victim in `plane`: erase the recycled (non-active first) block with the
    /// fewest valid pages, so recycled blocks never starve the plane.
    pub(crate) fn reuse_gc_fallback(&mut self, plane: u32) -> Result<bool, Error> {
        let Some(r) = self.ext.reuse.as_ref() else { return Ok(false) };
        let pick = |active: bool| {
            (0..self.geo.blocks_per_plane)
                .map(|n| self.geo.block_in_plane(plane, n))
                .filter(|&b| {
                    self.blocks.state(b) == BlockState::Open
                        && match r.state(b) {
                            ReuseState::Recycled => !active,
                            ReuseState::Active => active,
                            _ => false,
                        }
                })
                .min_by_key(|&b| self.blocks.get(b).valid())
        };
        let Some(victim) = pick(false).or_else(|| pick(true)) else { return Ok(false) };
        if r.state(victim) == ReuseState::Active {
            let (q, _) = pair_of(plane);
            self.end_pair(q);
        }
        self.collect(victim, crate::gc::Finish::Erase)?;
        self.counters.gc_blocks += 1;
        Ok(true)
    }

    /// A recycled block of `plane` that can never take a second write, which GC erases: one
    /// past its life share or worn (no pair picks it), or, with no active pair in its plane
    /// pair, one the cap leaves without a partner (`in_reuse + unmatched` over the cap, as after
    /// a failed activation marker, and this plane holds the surplus), the one with the fewest
    /// valid pages.
    fn stranded(&self, plane: u32) -> Option<BlockId> {
        let r = self.ext.reuse.as_ref()?;
        let recycled = || {
            (0..self.geo.blocks_per_plane)
                .map(|n| self.geo.block_in_plane(plane, n))
                .filter(|&b| r.state(b) == ReuseState::Recycled && self.blocks.state(b) == BlockState::Open)
        };
        if r.recycled.get(plane as usize).is_none_or(|&n| n == 0) {
            return None;
        }
        if let Some(b) = recycled().find(|&b| !self.within_life(b)) {
            return Some(b);
        }
        let (q, _) = pair_of(plane);
        let n = |p: u32| r.recycled.get(p as usize).copied().unwrap_or(0);
        let surplus = match r.cfg.layout {
            PairLayout::TwoPlanes => n(plane) > n(plane ^ 1),
            PairLayout::SamePlane => n(plane) % 2 == 1,
            PairLayout::SameBlock => false,
        };
        let over = r.in_reuse + r.unmatched(self.geo.total_planes(), None) > r.cfg.cap_blocks;
        if !surplus || !over || r.active.get(q).is_none_or(|a| a.a != NIL) {
            return None;
        }
        recycled().min_by_key(|&b| self.blocks.get(b).valid())
    }

    /// When the cap alone keeps `victim` from being recycled: a reused used block holding no
    /// valid page (GC erases it first, which costs no copy and gives the cap's room back; one
    /// holding live second writes waits to be a victim by its valid count, since erasing it
    /// early rewrites them: fiu-mail at 7 % OP, 2.5 times the GC rewrites and +6 % erasures).
    fn cap_holder(&self, victim: BlockId) -> Option<BlockId> {
        if self.erases_under_cap(victim) || !self.over_cap(victim) {
            return None;
        }
        let r = self.ext.reuse.as_ref()?;
        (0..self.geo.total_blocks()).map(BlockId).find(|&b| {
            r.state(b) == ReuseState::Reused
                && self.blocks.state(b) == BlockState::Used
                && self.blocks.get(b).valid() == 0
        })
    }

    /// After the baseline's reserve GC: while clean + recycled blocks are below the reuse
    /// threshold, recycle used victims and erase reused ones (bounded; stops at a used victim GC
    /// would erase, so with no second writes it collects exactly what the baseline would).
    pub(crate) fn reuse_top_up(&mut self, plane: u32) -> Result<(), Error> {
        let Some(r) = self.ext.reuse.as_ref() else { return Ok(()) };
        let want = r.cfg.gc_threshold;
        if let Some(b) = self.stranded(plane) {
            self.collect(b, crate::gc::Finish::Erase)?;
            self.counters.gc_blocks += 1;
        }
        for _ in 0..want {
            let Some(r) = self.ext.reuse.as_ref() else { return Ok(()) };
            if self.blocks.free_count(plane) + r.recycled[plane as usize] >= want {
                break;
            }
            let view = self.blocks.view(plane);
            let Some(victim) = crate::policy::VictimPolicy::select(self.policies.victim(), &view) else {
                break;
            };
            // A reused victim is erased (the paper's rule); any other victim GC would erase
            // ends the top-up.
            let reused = self.ext.reuse.as_ref().is_some_and(|r| r.state(victim) == ReuseState::Reused);
            if self.blocks.state(victim) != BlockState::Used || self.geo.plane_index(victim) != plane {
                break;
            }
            if !reused && self.erases(victim) {
                // Only the cap stops its recycling: an emptied reused block (any plane) gives
                // its room back first, else the cap could keep it for good.
                match self.cap_holder(victim) {
                    Some(b) => {
                        self.collect(b, crate::gc::Finish::Erase)?;
                        self.counters.gc_blocks += 1;
                        continue;
                    }
                    None => break,
                }
            }
            self.reuse_collect(victim)?;
        }
        Ok(())
    }

    /// Relocates a valid second write one of whose halves is `page` (GC): decoded and written
    /// as a first write on the GC stream.
    pub(crate) fn relocate_second(&mut self, page: PageId, plane: u32) -> Result<(), Error> {
        let plane = self.ensure_gc_frontier(plane)?;
        let Some((a, b)) = self.halves(page) else {
            self.set_valid_bit(page, false);
            return Ok(());
        };
        let d = self.geo.data_bytes as usize;
        // Decode into the page buffer's data area (the reuse buffers hold the raw pages).
        let tmp = core::mem::take(&mut self.buf);
        let res = self.read_second(a, None, &mut tmp[..d], false);
        self.buf = tmp;
        let lpn = match res.map(|(l, _)| l) {
            Ok(l) if self.map.get(l) == Some(a) => l,
            Ok(_) => {
                self.set_valid_bit(a, false);
                self.set_valid_bit(b, false);
                return Ok(());
            }
            Err(Error::Uncorrectable { .. }) => {
                // Unreadable: keep reporting it. Copy page A raw with its first-write codec
                // bytes, which do not match, so reads of it stay uncorrectable.
                let lpn = match self
                    .ext
                    .reuse
                    .as_ref()
                    .map(|r| SwMeta::decode(&r.mem.page_a[self.sw_offset()..]))
                {
                    Some(SwState::Valid(m)) if self.map.get(m.lpn) == Some(a) => m.lpn,
                    _ => match (0..self.map.len()).find(|&l| self.map.get(l) == Some(a)) {
                        Some(l) => l,
                        None => {
                            self.set_valid_bit(a, false);
                            self.set_valid_bit(b, false);
                            return Ok(());
                        }
                    },
                };
                let spare_len = META_LEN + self.codec_len;
                if let Some(r) = self.ext.reuse.as_ref() {
                    self.buf[..d + spare_len].copy_from_slice(&r.mem.page_a[..d + spare_len]);
                }
                let new = self.append(
                    plane,
                    crate::policy::Stream::Gc,
                    PageKind::Data,
                    lpn,
                    0,
                    Source::Buffer { encode: false },
                )?;
                self.remap(lpn, Some(new))?;
                self.counters.gc_page_copies += 1;
                return Ok(());
            }
            Err(e) => return Err(e),
        };
        // Scramble the decoded page into place, through the plane-0 raw buffer.
        let aux = {
            let Some(r) = self.ext.reuse.as_mut() else { return Ok(()) };
            r.prefetched = None;
            let complemented = r.codec.scramble(lpn as u64, &self.buf[..d], &mut r.mem.page_a[..d]);
            self.buf[..d].copy_from_slice(&r.mem.page_a[..d]);
            AUX_SCRAMBLED | if complemented { AUX_COMPLEMENTED } else { 0 }
        };
        let new = self.append(
            plane,
            crate::policy::Stream::Gc,
            PageKind::Data,
            lpn,
            aux,
            Source::Buffer { encode: true },
        )?;
        self.remap(lpn, Some(new))?;
        self.counters.gc_page_copies += 1;
        if let Some(r) = self.ext.reuse.as_mut() {
            r.stats.gc_rewrites += 1;
        }
        Ok(())
    }

    /// The map dropped `old`: if it was a second write, its plane-1 half is no longer live.
    pub(crate) fn reuse_invalidate(&mut self, old: PageId) {
        if !self.reuse_is_second(old) {
            return;
        }
        if let Some((a, b)) = self.halves(old) {
            if a == old {
                self.set_valid_bit(b, false);
            }
        }
    }

    /// A block was erased: it is clean, its pages hold no second writes, it has no partner.
    pub(crate) fn reuse_erased(&mut self, b: BlockId) {
        let geo = self.geo;
        let Some(r) = self.ext.reuse.as_mut() else { return };
        r.set_state(&geo, b, ReuseState::None);
        if let Some(s) = r.mem.state.get_mut(b.0 as usize) {
            *s &= !(WORN | A_SIDE);
        }
        r.mem.pair[b.0 as usize] = NIL;
        for i in 0..geo.pages_per_block {
            r.set_second(geo.page(b, i), false);
        }
        let holds = |p: Option<(PageId, PageId)>| {
            p.is_some_and(|(x, y)| geo.block_of(x) == b || geo.block_of(y) == b)
        };
        if holds(r.prefetched) {
            r.prefetched = None;
        }
        for s in r.slotted.iter_mut() {
            if holds(*s) {
                *s = None;
            }
        }
    }
}
