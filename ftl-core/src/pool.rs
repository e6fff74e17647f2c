//! The mount pool: the blocks a mount after a power cut reads instead of every block (UBI
//! fastmap's pool, adapted to a page-mapping FTL).
//!
//! What it owns: the `FLAG_POOL` flag of the block table and [`PoolState`]. What it guarantees,
//! while `bounded` is set: every block that holds a data, journal, map or checkpoint page written
//! after the current checkpoint (other than the checkpoint's own recorded frontier blocks, which
//! mount replays from the page the checkpoint recorded) is flagged, and the newest anchor record
//! is *bounded*: it names that checkpoint and lists exactly the flagged blocks. So a mount that
//! finds a bounded record newest loads the checkpoint's block table, reads the first page of each
//! listed block (to find those opened since) and replays them, instead of reading every block.
//!
//! How the invariant is kept:
//! - The allocator opens only flagged free blocks (`alloc_block`), for frontiers and checkpoints.
//! - After each checkpoint commits, the pool is renewed: the flags are cleared and set again on,
//!   per plane, a few of the coolest free blocks (the allocator's next picks) and the used blocks
//!   with the fewest valid pages (greedy GC's next victims, which return to the free list flagged);
//!   a bounded record naming the new checkpoint and the pool is written before anything else
//!   changes on flash. Until that record is on flash the previous record stands, whose pool holds
//!   every block written since the previous checkpoint, the new checkpoint's included.
//! - Before a block is opened where the page buffer is free (`ensure_frontier`, a checkpoint's
//!   start, a map flush), a plane left with fewer than [`POOL_LOW`] flagged free blocks flags
//!   more (an *extension*) and a bounded record listing them is written first. A GC victim
//!   outside the pool joins it the same way before its erase, so a mount never trusts the
//!   checkpoint's valid count for a block erased since. Openings with data in the
//!   page buffer (a program failure's retry, a map page) take flagged blocks only, spilling to
//!   another plane; with none anywhere they fail with `Error::NoSpace` (the extension before them
//!   makes that as rare as running out of free blocks).
//! - When the pool outgrows `Config::mount_pool_blocks` (or a record cannot list it), the next
//!   safe point writes a checkpoint, which renews it; a record that cannot be written leaves the
//!   pool unbounded (the allocator takes any block, every mount surveys) until then.
//!
//! Cost: a bounded record per checkpoint and per extension (two anchor programs each); a mount
//! after a cut reads at most `mount_pool_blocks` first pages plus the record's extensions.

use nand_hal::{BlockId, NandFlash};

use crate::anchor::max_listed_blocks;
use crate::blocks::{FLAG_POOL, FLAG_POOL_OLD};
use crate::checkpoint::checkpoint_pages;
use crate::map::MappingTable;
use crate::policy::PolicySet;
use crate::{Error, Ftl};

/// A plane with fewer flagged free blocks than this is topped up at the next point where the page
/// buffer is free (room for the openings that may come before: a map write-back's block, a
/// program failure's retry).
pub const POOL_LOW: u32 = 3;

/// Victims outside the pool a GC victim's extension record brings in with it.
pub const VICTIM_BATCH: u32 = 4;

/// The pool's RAM state.
#[derive(Copy, Clone, Debug, Default)]
pub struct PoolState {
    /// The newest anchor record is bounded and lists the flagged blocks; the allocator opens only
    /// flagged blocks.
    pub bounded: bool,
    /// Blocks flagged.
    pub listed: u32,
    /// A checkpoint is due to renew the pool.
    pub renew_due: bool,
    /// A record failed to write (a device error, power lost): which of it and the one before a
    /// mount will find is not known; `flush` writes a checkpoint (and a record) before it
    /// acknowledges.
    pub uncertain: bool,
}

impl<N: NandFlash, P: PolicySet, M: MappingTable> Ftl<'_, N, P, M> {
    /// The flags a block must carry for the allocator to open it.
    pub(crate) fn pool_mask(&self) -> u8 {
        if self.pool.bounded {
            FLAG_POOL
        } else {
            0
        }
    }

    /// Whether a mount from the newest record would keep the checkpoint's valid counts (with
    /// replay's adjustments: upper bounds) instead of recounting them: a flash-resident map of
    /// more map pages than `mount_pool_blocks` (recounting reads every map page) while the pool
    /// is bounded (`recovery.rs`, `rebuild`, decides with the same test, assuming the mount
    /// runs with the same `mount_pool_blocks`). Such a mount takes a block GC emptied since the
    /// checkpoint but did not erase for a used block (its first page still old, its count kept),
    /// so GC then erases its victims at once (`multiplane.rs`, **Erase**).
    pub(crate) fn pool_keeps_counts(&self) -> bool {
        self.pool.bounded && self.map.on_flash() && self.map.map_pages() > self.cfg.mount_pool_blocks
    }

    /// Free blocks of `plane` the allocator may open.
    pub(crate) fn allocatable(&self, plane: u32) -> u32 {
        if self.pool.bounded {
            self.blocks.pool_free_count(plane)
        } else {
            self.blocks.free_count(plane)
        }
    }

    /// Per plane, the blocks a renewed pool takes: two thirds of the budget shared by the planes
    /// (the last third is room for extensions).
    fn pool_share(&self) -> u32 {
        (self.pool_budget() * 2 / 3) / self.geo.total_planes().max(1)
    }

    /// Most blocks the pool lists: `mount_pool_blocks`, or what a record holds next to the
    /// checkpoint's blocks if that is less.
    fn pool_budget(&self) -> u32 {
        let ckpt = checkpoint_pages(&self.geo, self.map.section_words()).div_ceil(self.geo.pages_per_block);
        let room = (max_listed_blocks(self.geo.data_bytes) as u32).saturating_sub(ckpt);
        self.cfg.mount_pool_blocks.min(room)
    }

    fn pool_flag(&mut self, b: BlockId) {
        if self.blocks.get(b).flags() & FLAG_POOL == 0 {
            self.blocks.set_flags(b, FLAG_POOL, true);
            self.pool.listed += 1;
        }
    }

    /// Flags up to `n` of the coolest unflagged free blocks of `plane`; returns how many.
    fn pool_flag_free(&mut self, plane: u32, n: u32) -> u32 {
        let mut added = 0;
        while added < n {
            let Some(b) = self.blocks.coolest_free_with(plane, FLAG_POOL, 0) else { break };
            self.pool_flag(b);
            added += 1;
        }
        added
    }

    /// Takes the pool the current checkpoint's record lists (mount: the flags are already set).
    pub(crate) fn pool_adopt(&mut self, listed: u32) {
        self.pool = PoolState { bounded: true, listed, renew_due: false, uncertain: false };
    }

    /// Forgets the pool: no block is flagged and the allocator takes any block.
    pub(crate) fn pool_drop(&mut self) {
        self.blocks.clear_flags_everywhere(FLAG_POOL);
        self.pool = PoolState::default();
    }

    /// After a checkpoint committed (or a fast mount): chooses a fresh pool and writes a bounded
    /// record naming the current checkpoint and it (or, where the anchor cannot hold one, a record
    /// that stops a bounded one on flash from being trusted). Called with the page buffer free.
    pub(crate) fn pool_renew(&mut self) -> Result<(), Error> {
        let before = self.pool_change();
        self.blocks.clear_flags_everywhere(FLAG_POOL);
        self.pool.listed = 0;
        self.pool.bounded = false;
        if self.anchor_fast_allowed() && self.cfg.mount_pool_blocks > 0 && self.anchor_has_copy() {
            // Per plane: the free blocks, coolest first (the allocator's next picks), then the
            // used blocks with the fewest valid pages (greedy GC's next victims, which come back
            // to the free list flagged). Nearly empty device: only free blocks; nearly full: its
            // few free blocks and many victims.
            let share = self.pool_share();
            for plane in 0..self.geo.total_planes() {
                let free = self.pool_flag_free(plane, share);
                self.pool.listed += self.blocks.flag_fewest_valid(plane, share - free, FLAG_POOL);
            }
            self.pool.bounded = true;
        }
        self.pool.renew_due = false;
        self.pool_record(before)
    }

    /// Before the pool changes: keeps the pool the newest record lists under `FLAG_POOL_OLD`
    /// and returns whether that record is bounded (see [`Self::pool_record`]).
    fn pool_change(&mut self) -> bool {
        self.blocks.copy_flag(FLAG_POOL, FLAG_POOL_OLD);
        self.pool.bounded
    }

    /// Writes the record for a changed pool (`bounded_before`: whether the record before it lists
    /// a pool, kept under `FLAG_POOL_OLD`). Written: the new pool is in force (or, if the record
    /// could not list it, none: any block may be opened, every mount surveys, until the next
    /// checkpoint renews it). Failed (a device error): a mount may find either record, so only
    /// blocks both pools hold may be opened from now on, a checkpoint falls due and the error
    /// is returned.
    fn pool_record(&mut self, bounded_before: bool) -> Result<(), Error> {
        let wanted = self.pool.bounded;
        match self.write_anchor(false) {
            Ok(bounded) => {
                self.blocks.clear_flags_everywhere(FLAG_POOL_OLD);
                self.pool.uncertain = false;
                self.pool.bounded = bounded;
                if !bounded {
                    // Unlisted although wanted: a renewal (a smaller pool) may fit, unless the
                    // anchor lost its last copy.
                    if wanted && self.anchor_has_copy() {
                        self.counters.pool_unbounded += 1;
                        self.pool.renew_due = true;
                    }
                    self.blocks.clear_flags_everywhere(FLAG_POOL);
                    self.pool.listed = 0;
                }
                Ok(())
            }
            Err(e) => {
                if bounded_before && wanted {
                    for b in 0..self.geo.total_blocks() {
                        let f = self.blocks.get(BlockId(b)).flags();
                        if f & FLAG_POOL != 0 && f & FLAG_POOL_OLD == 0 {
                            self.blocks.set_flags(BlockId(b), FLAG_POOL, false);
                            self.pool.listed -= 1;
                        }
                    }
                } else if bounded_before {
                    // The new record would have listed none: the old pool stays.
                    for b in 0..self.geo.total_blocks() {
                        if self.blocks.get(BlockId(b)).flags() & FLAG_POOL_OLD != 0 {
                            self.blocks.set_flags(BlockId(b), FLAG_POOL, true);
                            self.pool.listed += 1;
                        }
                    }
                }
                self.blocks.clear_flags_everywhere(FLAG_POOL_OLD);
                self.pool.bounded = bounded_before || wanted;
                self.pool.uncertain = true;
                self.pool.renew_due = true;
                self.dirty = true;
                Err(e)
            }
        }
    }

    /// With the page buffer free, before a block may be opened: each plane left with fewer than
    /// [`POOL_LOW`] flagged free blocks flags more (half the budget's room left, shared by the
    /// planes, at least `POOL_LOW`) and one record listing them is written. O(planes) when
    /// nothing is needed.
    pub(crate) fn pool_top_up(&mut self) -> Result<(), Error> {
        if !self.pool.bounded {
            return Ok(());
        }
        let planes = self.geo.total_planes();
        if (0..planes).all(|p| self.blocks.pool_free_count(p) >= POOL_LOW) {
            return Ok(());
        }
        let room = self.pool_budget().saturating_sub(self.pool.listed);
        let batch = (room / (2 * planes.max(1))).max(POOL_LOW);
        // Only a plane short of pool blocks that has unflagged free blocks to give: otherwise the
        // record would flag nothing (two anchor programs for no change).
        let short = |f: &Self, p: u32| {
            let pooled = f.blocks.pool_free_count(p);
            pooled < POOL_LOW && pooled < f.blocks.free_count(p)
        };
        if !(0..planes).any(|p| short(self, p)) {
            return Ok(());
        }
        let before = self.pool_change();
        for plane in 0..planes {
            if short(self, plane) {
                self.pool_flag_free(plane, batch);
            }
        }
        self.pool_extended(before)
    }

    /// Before GC erases victim `b` (with the page buffer free): a victim outside the pool joins it,
    /// with a record listing it, so that no block the checkpoint says holds data is erased
    /// unlisted (a mount after a cut would otherwise trust the checkpoint's valid count for an
    /// erased block, and hide its space from GC).
    pub(crate) fn pool_add_victim(&mut self, b: BlockId) -> Result<(), Error> {
        if !self.pool.bounded || self.blocks.get(b).flags() & FLAG_POOL != 0 {
            return Ok(());
        }
        let before = self.pool_change();
        self.pool_flag(b);
        // The same record brings the plane's next few victims in (the used blocks outside the
        // pool with the fewest valid pages now), so that the next collections need no record of
        // their own, without growing the pool by more than a few blocks per record (a pool past
        // its budget costs a checkpoint).
        let plane = self.geo.plane_index(b);
        self.pool.listed += self.blocks.flag_next_fewest_valid(plane, VICTIM_BATCH, FLAG_POOL);
        self.pool_extended(before)
    }

    /// Before a checkpoint of `need` blocks, with the page buffer free: flags free blocks until
    /// `need` flagged ones exist (where the planes have them), writing a record if it flagged any.
    pub(crate) fn pool_reserve(&mut self, need: u32) -> Result<(), Error> {
        if !self.pool.bounded {
            return Ok(());
        }
        let planes = self.geo.total_planes();
        let mut have: u32 = (0..planes).map(|p| self.allocatable(p)).sum();
        if have >= need || (0..planes).all(|p| self.blocks.free_count(p) == self.allocatable(p)) {
            return Ok(());
        }
        let before = self.pool_change();
        while have < need {
            let Some(plane) = (0..planes)
                .filter(|&p| self.blocks.free_count(p) > self.allocatable(p))
                .max_by_key(|&p| self.blocks.free_count(p) - self.allocatable(p))
            else {
                break;
            };
            self.pool_flag_free(plane, 1);
            have += 1;
        }
        self.pool_extended(before)
    }

    /// Writes the record an extension needs; past the budget a checkpoint falls due to renew it.
    fn pool_extended(&mut self, bounded_before: bool) -> Result<(), Error> {
        self.counters.pool_extensions += 1;
        if self.pool.listed > self.pool_budget() {
            self.pool.renew_due = true;
        }
        self.pool_record(bounded_before)
    }
}
