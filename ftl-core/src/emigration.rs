//! Room in a full plane: GC that moves a plane's pages to another plane when collecting the
//! plane into itself gains nothing.
//!
//! GC normally collects a plane into its own GC frontier, and host pages go to the planes in
//! rotation. A workload that overwrites only the pages landing in one plane (or ETI's two host
//! streams on a small device, at random) piles the other valid pages into one plane until its GC
//! has nothing to gain: no block with an invalid page, or victims whose copies (with the map
//! pages they dirty) fill as much as each one frees. Host writes then failed with
//! `Error::NoSpace` while the device as a whole had room (`tests/plane_room.rs`; issue #17).
//!
//! The rule: a GC loop (on-demand GC, the collections before a checkpoint) that finds no victim
//! in a plane below its free reserve, or collects `pages_per_block + 1` victims there without the
//! plane's free count rising, marks the plane *emigrating*. While it is marked, its GC copies go
//! to the GC frontier of the plane with the most free blocks ([`Ftl::gc_plane`]), and when it has
//! no block with an invalid page, GC takes one of its full blocks (every copy then frees room in
//! the plane). The mark goes once a GC loop brings the plane back to its free reserve.
//!
//! Guarantees: host placement never changes (ETI's guard and its ghosts see the rotation they
//! model), and nothing changes while every plane's GC gains room (the evaluations never mark a
//! plane: their figures are unchanged). A copy to another plane is an ordinary GC copy (read,
//! program, remap; copy-back is skipped, it needs the same plane), so the power-loss contract of
//! `gc.rs` holds as for the existing spill of GC data to another plane. The mark is RAM only
//! (one bit per plane, in `Ftl`): after a mount a stuck plane is found again the same way.

use nand_hal::{BlockId, NandFlash};

use crate::map::MappingTable;
use crate::policy::{PolicySet, Stream};
use crate::{Error, Ftl};

/// How a GC loop ended.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) enum GcLoop {
    /// What the caller asked for was reached.
    Enough,
    /// The plane has nothing left to collect.
    NoVictim,
    /// The loop gave up after collecting as many victims as the device has blocks.
    GaveUp,
}

impl<N: NandFlash, P: PolicySet, M: MappingTable> Ftl<'_, N, P, M> {
    /// Whether `plane`'s GC copies go to another plane (see the module doc).
    pub(crate) fn emigrating(&self, plane: u32) -> bool {
        plane < 32 && self.emigrating & (1 << plane) != 0
    }

    /// The plane taking `plane`'s GC copies while it is emigrating: of the other planes not
    /// emigrating themselves, the one with the most blocks the allocator may open, if it has
    /// one or an open GC block.
    pub(crate) fn emigration_target(&self, plane: u32) -> Option<u32> {
        (0..self.geo.total_planes())
            .filter(|&q| q != plane && !self.emigrating(q))
            .filter(|&q| {
                self.allocatable(q) > 0
                    || self.frontiers[Self::frontier_index(q, Stream::Gc)].block != u32::MAX
            })
            .max_by_key(|&q| (self.allocatable(q), core::cmp::Reverse(q)))
    }

    /// A victim for an emigrating plane with no block holding an invalid page: one of its full
    /// used blocks.
    pub(crate) fn emigration_victim(&self, plane: u32) -> Option<BlockId> {
        if self.emigrating(plane) {
            self.blocks.full_block(plane)
        } else {
            None
        }
    }

    /// Collects victims in `plane` until `enough` holds; marks the plane emigrating when its GC
    /// stops gaining room (see the module doc) and unmarks it once it has its free reserve.
    pub(crate) fn collect_until(
        &mut self,
        plane: u32,
        enough: impl Fn(&Self) -> bool,
    ) -> Result<GcLoop, Error> {
        let threshold = self.free_threshold();
        let mut best = self.blocks.free_count(plane);
        let mut stalled = 0u32;
        let mut rounds = 0u32;
        let end = loop {
            if enough(self) {
                break GcLoop::Enough;
            }
            if rounds > self.geo.total_blocks() {
                break GcLoop::GaveUp;
            }
            if !self.gc_one(plane)? {
                if self.blocks.free_count(plane) < threshold && self.start_emigrating(plane) {
                    continue;
                }
                break GcLoop::NoVictim;
            }
            self.counters.gc_blocks_on_demand += 1;
            rounds += 1;
            let free = self.blocks.free_count(plane);
            if free > best {
                best = free;
                stalled = 0;
            } else {
                stalled += 1;
                if stalled > self.geo.pages_per_block {
                    self.start_emigrating(plane);
                }
            }
        };
        if self.blocks.free_count(plane) >= threshold && plane < 32 {
            self.emigrating &= !(1 << plane);
        }
        Ok(end)
    }

    /// Marks `plane` emigrating if it is not yet and another plane can take its copies; true if
    /// it was newly marked.
    fn start_emigrating(&mut self, plane: u32) -> bool {
        if plane >= 32 || self.emigrating(plane) || self.emigration_target(plane).is_none() {
            return false;
        }
        self.emigrating |= 1 << plane;
        self.counters.gc_emigrations += 1;
        true
    }
}
