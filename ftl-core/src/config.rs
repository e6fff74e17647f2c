//! FTL configuration and the RAM it needs, as a function of the geometry.
//!
//! All tunables of the baseline live in [`Config`]; [`RamLayout::new`] turns a geometry and a
//! configuration into the exact sizes of the buffers the caller lends the FTL.

use nand_hal::Geometry;

use crate::{blocks::BlockInfo, meta::META_LEN, Error};

/// Most device-wide planes (`planes_per_lun * luns`) the FTL drives.
pub const MAX_TOTAL_PLANES: usize = 16;

/// Tunables of the FTL. Build one with [`Config::for_utilization`] or
/// [`Config::for_over_provisioning`] and adjust fields as needed.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Config {
    /// Logical pages exported to the host.
    pub logical_pages: u32,
    /// GC runs in a plane while that plane has fewer free blocks than this.
    pub gc_free_threshold: u32,
    /// Static wear leveling moves the coldest block's data when the erase-count spread between the
    /// most and the least worn good blocks exceeds this.
    pub wear_spread_limit: u32,
    /// Static wear leveling checks the spread once every this many erases.
    pub wear_check_interval: u32,
    /// A checkpoint is written after this many data blocks have been opened since the last one.
    /// It bounds the work of mount after a power cut (at most this many blocks are scanned).
    pub checkpoint_interval_blocks: u32,
    /// Most blocks the mount pool lists (see `pool.rs`): a mount after a power cut reads the
    /// first page of each instead of every block's. A pool that outgrows it makes a checkpoint
    /// due. At most what one anchor record lists (`data_bytes / 4 - 10` with the checkpoint's
    /// blocks). Default [`RECOMMENDED_MOUNT_POOL_BLOCKS`]; 0 turns the pool off: every mount
    /// after a cut surveys every block (and no pool records are written).
    pub mount_pool_blocks: u32,
    /// GC moves a valid page with the chip's copy-back (read for internal data move + program)
    /// where the device has it natively ([`nand_hal::CopyBackCaps::native`]) and the page
    /// qualifies (same plane as its destination, page parity; see `gc_copy_back.rs`); the page
    /// is still read out and checked by the codec, so the result on flash is the plain read +
    /// program's, minus the page's transfer in. Default `true`: the move is as safe as a read +
    /// program and cheaper (-13% per move on the MT29F4G08's timings); `false` for a part whose
    /// copy-back one distrusts, or to compare against the plain path (the simulator's default).
    pub gc_copy_back: bool,
    /// The order host pages visit the planes in (see [`StripeOrder`]). Default
    /// [`StripeOrder::PlaneFirst`].
    pub stripe_order: StripeOrder,
}

/// The order consecutive host pages visit the device-wide planes in (`ftl.rs`, `plane_at`).
/// Host pages take rotation slots `0, 1, 2, ...` (modulo the device's planes); a slot's plane:
#[derive(Copy, Clone, Debug, PartialEq, Eq, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[repr(u8)]
pub enum StripeOrder {
    /// Slot `i` is plane `i` (`lun * planes_per_lun + plane`): the planes of LUN 0, then LUN 1,
    /// ... Consecutive pages fill a LUN's planes together (one multi-plane program).
    #[default]
    PlaneFirst,
    /// Slot `i` is plane `(i % luns) * planes_per_lun + (i / luns) % planes_per_lun`: one page
    /// on each LUN (and so, LUN `l` being on channel `l % channels`, on each channel) before the
    /// next plane of any (MQSim's CWDP order). With multi-plane programs on, the pages of one
    /// request (or batch) that land on one LUN within one round are programmed together
    /// (`multiplane.rs`).
    ChannelFirst,
}

impl StripeOrder {
    /// The device-wide plane (`lun * planes_per_lun + plane`) of rotation slot `slot`
    /// (`< geometry.total_planes()`).
    #[inline]
    pub const fn plane(self, geometry: &Geometry, slot: u32) -> u32 {
        match self {
            StripeOrder::PlaneFirst => slot,
            StripeOrder::ChannelFirst => {
                let luns = if geometry.luns == 0 { 1 } else { geometry.luns };
                let ppl = if geometry.planes_per_lun == 0 { 1 } else { geometry.planes_per_lun };
                (slot % luns) * ppl + (slot / luns) % ppl
            }
        }
    }
}

impl Config {
    /// Most blocks a mount replays after the checkpoint (bounds `checkpoint_interval_blocks`).
    pub const MAX_REPLAY_BLOCKS: u32 = crate::recovery::MAX_REPLAY_BLOCKS as u32;

    /// A configuration exporting `permille` thousandths of the raw pages (600 = 60% of raw
    /// capacity in use when the device is full), with defaults for everything else.
    pub const fn for_utilization(geometry: &Geometry, permille: u32) -> Config {
        let logical = (geometry.total_pages() as u64 * permille as u64 / 1000) as u32;
        Self::with_logical_pages(geometry, logical)
    }

    /// A configuration with `percent` over-provisioning in the SSD sense: physical pages =
    /// logical pages * (1 + percent / 100).
    pub const fn for_over_provisioning(geometry: &Geometry, percent: u32) -> Config {
        let logical = (geometry.total_pages() as u64 * 100 / (100 + percent as u64)) as u32;
        Self::with_logical_pages(geometry, logical)
    }

    /// Defaults around an explicit logical capacity. The checkpoint interval is 64 blocks, or the
    /// most [`Config::max_checkpoint_interval`] allows for the geometry's planes if that is less.
    pub const fn with_logical_pages(geometry: &Geometry, logical_pages: u32) -> Config {
        let planes = geometry.planes_per_lun.saturating_mul(geometry.luns);
        let ckpt_blocks = checkpoint_blocks(geometry, logical_pages);
        let max_interval = Self::max_checkpoint_interval(planes);
        Config {
            logical_pages,
            gc_free_threshold: 2 + ckpt_blocks.div_ceil(if planes == 0 { 1 } else { planes }),
            wear_spread_limit: 256,
            wear_check_interval: 64,
            checkpoint_interval_blocks: if max_interval < 64 { max_interval } else { 64 },
            mount_pool_blocks: RECOMMENDED_MOUNT_POOL_BLOCKS,
            gc_copy_back: true,
            stripe_order: StripeOrder::PlaneFirst,
        }
    }

    /// Blocks a mount may have to replay beyond the checkpoint interval with `planes` device-wide
    /// planes: the frontiers the checkpoint recorded plus the blocks opened after a checkpoint
    /// fell due and before it was written (retries, spills), `4 * STREAMS` per plane.
    pub const fn replay_slack(planes: u32) -> u32 {
        (4 * crate::frontier::STREAMS as u32).saturating_mul(planes)
    }

    /// The largest `checkpoint_interval_blocks` the replay cursors allow for `planes` planes
    /// (0: none, the geometry has too many planes).
    pub const fn max_checkpoint_interval(planes: u32) -> u32 {
        Self::MAX_REPLAY_BLOCKS.saturating_sub(Self::replay_slack(planes))
    }

    /// Checks the configuration against the geometry and the FTL's limits.
    pub fn validate(&self, geometry: &Geometry, codec_spare: usize) -> Result<(), Error> {
        geometry.validate().map_err(|_| Error::Config)?;
        let planes = geometry.total_planes();
        if planes as usize > MAX_TOTAL_PLANES
            || geometry.pages_per_block < 2
            // Voiding a torn or failed page programs it a second time (see `recovery`).
            || geometry.nop < 2
            || geometry.pages_per_block > u16::MAX as u32
            || geometry.total_blocks() > crate::blocks::MAX_BLOCKS
            || (geometry.spare_bytes as usize) < META_LEN + codec_spare
            || geometry.data_bytes < crate::checkpoint::HEADER_LEN as u32
            || self.logical_pages == 0
            || self.gc_free_threshold < 2
            || self.checkpoint_interval_blocks == 0
            || self.checkpoint_interval_blocks > Self::max_checkpoint_interval(planes)
            || self.wear_check_interval == 0
        {
            return Err(Error::Config);
        }
        // Physical room: every plane keeps its free reserve and one open block per stream, the
        // checkpoint needs two generations, and a block's worth of slack per plane lets greedy GC
        // always find a victim with an invalid page.
        let ckpt = checkpoint_blocks(geometry, self.logical_pages) as u64;
        let reserve_blocks =
            planes as u64 * (self.gc_free_threshold as u64 + crate::frontier::STREAMS as u64 + 1) + 2 * ckpt;
        let total = geometry.total_blocks() as u64;
        if reserve_blocks >= total {
            return Err(Error::Config);
        }
        let usable_pages = (total - reserve_blocks) * geometry.pages_per_block as u64;
        if self.logical_pages as u64 > usable_pages {
            return Err(Error::Config);
        }
        Ok(())
    }
}

/// The default [`Config::mount_pool_blocks`]: with the anchor's reads and a cached map's
/// checkpoint, a mount after a cut reads under 256 pages plus what it replays.
pub const RECOMMENDED_MOUNT_POOL_BLOCKS: u32 = 160;

/// Blocks one checkpoint occupies.
pub const fn checkpoint_blocks(geometry: &Geometry, logical_pages: u32) -> u32 {
    let pages = crate::checkpoint::checkpoint_pages(geometry, logical_pages);
    pages.div_ceil(if geometry.pages_per_block == 0 { 1 } else { geometry.pages_per_block })
}

/// The sizes of the buffers the caller lends the FTL (see [`crate::Memory`]).
///
/// RAM in bytes = `4 * logical_pages` (flat map) + `4 * ceil(total_pages / 32)` (valid bitmap) +
/// `size_of::<BlockInfo>() * total_blocks` (12 bytes each: erase count, valid count, state,
/// flags, `u16` list links) + `4 * (total_planes * (pages_per_block + 2) + 1)` (list heads) + `data_bytes +
/// spare_bytes` (one page buffer) + the `Ftl` struct itself (a few hundred bytes). Optionally
/// [`RamLayout::gc_stripe_buf`] more bytes of page buffer for GC stripes (`gc_stripe.rs`; not in
/// [`RamLayout::total_bytes`]).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct RamLayout {
    /// `u32` words of the flat map (`FlatMap`).
    pub map_words: usize,
    /// `u32` words of the valid-page bitmap.
    pub valid_words: usize,
    /// Entries of the block table.
    pub blocks: usize,
    /// `u32` list heads.
    pub list_heads: usize,
    /// Bytes of the page buffer.
    pub page_buf: usize,
    /// Optional: bytes the caller may add to the page buffer ([`crate::Memory::page_buf`] then
    /// `page_buf + gc_stripe_buf` bytes) so that GC copies go out as multi-plane programs
    /// (`gc_stripe.rs`): one raw page per plane of a LUN after the first (`planes_per_lun - 1`,
    /// at most `MAX_PLANES - 1`), 0 on a one-plane LUN. 2,112 bytes per extra plane on the 2 KiB
    /// board part (2,112 on its 2-plane LUNs).
    pub gc_stripe_buf: usize,
}

/// [`RamLayout::gc_stripe_buf`] for `geometry`.
const fn gc_stripe_buf_bytes(geometry: &Geometry) -> usize {
    let planes = if geometry.planes_per_lun as usize > nand_hal::MAX_PLANES {
        nand_hal::MAX_PLANES
    } else {
        geometry.planes_per_lun as usize
    };
    planes.saturating_sub(1) * geometry.raw_page_bytes() as usize
}

impl RamLayout {
    /// The layout for a geometry and configuration.
    pub const fn new(geometry: &Geometry, config: &Config) -> RamLayout {
        RamLayout {
            map_words: config.logical_pages as usize,
            valid_words: (geometry.total_pages() as usize).div_ceil(32),
            blocks: geometry.total_blocks() as usize,
            list_heads: crate::blocks::list_heads(geometry),
            page_buf: geometry.raw_page_bytes() as usize,
            gc_stripe_buf: gc_stripe_buf_bytes(geometry),
        }
    }

    /// Total bytes, map included.
    pub const fn total_bytes(&self) -> usize {
        self.map_words * 4
            + self.valid_words * 4
            + self.blocks * core::mem::size_of::<BlockInfo>()
            + self.list_heads * 4
            + self.page_buf
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validation_rejects_what_the_ftl_cannot_run_on() {
        let g = Geometry::MT29F4G08;
        let c = Config::for_utilization(&g, 900);
        assert_eq!(c.validate(&g, 4), Ok(()));
        // Voiding a page needs a second partial program.
        assert_eq!(c.validate(&Geometry { nop: 1, ..g }, 4), Err(Error::Config));
        // Metadata plus codec must fit the spare.
        assert_eq!(c.validate(&Geometry { spare_bytes: 31, ..g }, 4), Err(Error::Config));
        // No room left for GC.
        assert_eq!(Config { logical_pages: g.total_pages(), ..c }.validate(&g, 4), Err(Error::Config));
        assert_eq!(Config { gc_free_threshold: 1, ..c }.validate(&g, 4), Err(Error::Config));
    }

    /// The rotation's planes, written out by hand. 2 LUNs x 2 planes (device planes L0P0 = 0,
    /// L0P1 = 1, L1P0 = 2, L1P1 = 3): plane first visits 0 1 2 3; channel first alternates the
    /// LUNs, plane 0 of each then plane 1 of each: 0 2 1 3.
    #[test]
    fn stripe_orders_visit_the_planes_in_the_documented_order() {
        let g = Geometry { planes_per_lun: 2, luns: 2, ..Geometry::MT29F4G08 };
        fn seq<const N: usize>(o: StripeOrder, g: &Geometry) -> [u32; N] {
            assert_eq!(g.total_planes() as usize, N);
            core::array::from_fn(|i| o.plane(g, i as u32))
        }
        assert_eq!(seq::<4>(StripeOrder::PlaneFirst, &g), [0, 1, 2, 3]);
        assert_eq!(seq::<4>(StripeOrder::ChannelFirst, &g), [0, 2, 1, 3]);
        // 4 LUNs x 2 planes: LUN l's planes are 2l and 2l + 1.
        let g4 = Geometry { luns: 4, ..g };
        assert_eq!(seq::<8>(StripeOrder::ChannelFirst, &g4), [0, 2, 4, 6, 1, 3, 5, 7]);
        // 2 LUNs x 4 planes: each LUN's planes in order, the LUNs alternating.
        let g24 = Geometry { planes_per_lun: 4, ..g };
        assert_eq!(seq::<8>(StripeOrder::ChannelFirst, &g24), [0, 4, 1, 5, 2, 6, 3, 7]);
        // One LUN: both orders are the plane order.
        let g1 = Geometry { luns: 1, ..g24 };
        assert_eq!(seq::<4>(StripeOrder::ChannelFirst, &g1), [0, 1, 2, 3]);
        // Every order is a permutation of the planes (each visited once a round).
        let mut v = seq::<16>(StripeOrder::ChannelFirst, &Geometry { luns: 8, ..g });
        v.sort_unstable();
        assert_eq!(v, core::array::from_fn::<u32, 16, _>(|i| i as u32));
    }

    /// Regression (audit F2): for every plane count the FTL drives, the default interval is one
    /// that `validate` accepts, and an interval above what the replay cursors hold is refused
    /// (the bound was computed in wrapping u32 arithmetic and underflowed from 11 planes).
    #[test]
    fn default_interval_validates_for_every_plane_count() {
        for planes in 1..=MAX_TOTAL_PLANES as u32 {
            let g = Geometry { planes_per_lun: 1, luns: planes, blocks_per_plane: 64, ..Geometry::MT29F4G08 };
            let c = Config::for_utilization(&g, 700);
            assert_eq!(c.validate(&g, 4), Ok(()), "{planes} planes");
            let max = Config::max_checkpoint_interval(planes);
            assert!(max >= 1 && c.checkpoint_interval_blocks <= max);
            // Replay must hold the interval, the recorded frontiers and the slack.
            assert!(
                max as usize + 4 * crate::frontier::STREAMS * planes as usize
                    <= Config::MAX_REPLAY_BLOCKS as usize
            );
            let over = Config { checkpoint_interval_blocks: max + 1, ..c };
            assert_eq!(over.validate(&g, 4), Err(Error::Config), "{planes} planes");
        }
        let g = Geometry { planes_per_lun: 1, luns: 17, blocks_per_plane: 64, ..Geometry::MT29F4G08 };
        assert_eq!(Config::for_utilization(&g, 700).validate(&g, 4), Err(Error::Config));
    }
}
