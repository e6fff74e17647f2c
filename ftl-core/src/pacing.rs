//! Paced garbage collection: GC work spread over host writes, so that no single write pays for
//! a burst of collections.
//!
//! On-demand GC collects, when a host stream opens a block in a plane below its free reserve
//! (`gc_free_threshold`), whole victims until the reserve is back. At 90% fill a victim frees
//! about 9 of its 64 pages, so that one write pays for about seven victims (hundreds of copies).
//! Paced GC does the same work, with the same greedy victim choice, a few pages at a time, before
//! each host page goes to a plane:
//! - a plane below its reserve with no victim in progress chooses one (greedy) once the work
//!   left (estimate: the copies that bring the plane back to its reserve,
//!   `deficit x P x v / (P - v)` for victims of `v` of `P` pages valid) would need
//!   `PACE_FACTOR` times the base rate [`copy_budget`]`(v) = ceil(v / (P - v))` to be done
//!   before its host block fills up. Starting late keeps the plane's free space where on-demand
//!   GC keeps it (no block freed long before it is needed, no victim half collected for long),
//!   so the write amplification stays that of on-demand GC;
//! - each host page then copies `ceil(work left / host pages left)` pages of the victim, at least
//!   the base rate and at most [`step_cap`] (`2 x PACE_FACTOR x base`, at most a block); a victim
//!   with no valid page left is erased through the same end of collection as on-demand GC;
//! - a checkpoint is written alone, by the host write that finds it due (or about to fall due
//!   when the write also opens a host block, or due within the last `1/CHECKPOINT_EARLY_DIV` of
//!   its interval while the plane has its whole reserve, so that it takes blocks from a pool with
//!   a choice); a paced step stops once a checkpoint falls due.
//!
//! On-demand GC stays as the fallback (it first finishes the paced victim); the counter
//! `gc_blocks_on_demand` says how often it ran. It also runs before a host page when the plane
//! has no free block left, and before a due checkpoint when the free blocks do not cover the
//! checkpoint plus one block for GC (journal pages and GC blocks take free blocks while
//! pacing waits to start; without this, a checkpoint could find none: the seed-329 `NoSpace`).
//! Checkpoint blocks come from the planes that held the previous checkpoint when free counts tie,
//! so a checkpoint creates no sudden deficit.
//!
//! Bound on the NAND programs of one host page write (pacing keeping up, no program failure):
//! `1 + max(C, step_cap) + J + L`, where `C` is the checkpoint's pages, `J` at most one journal
//! page (pending trims journaled before an erase), and `L` a static wear-leveling move or a
//! retirement at the end of the request (at most `P` copies, rare). Measured in
//! `docs/results.md`.
//!
//! Guarantees: the greedy victim choice and everything [`crate::gc`] guarantees on power loss are
//! unchanged (a paced victim is a victim whose collection is interrupted by host writes: it is
//! out of the GC lists in state `Victim`, its pages are copied and remapped one by one, and it is
//! erased only through the same end of collection, after pending trims are journaled and a live
//! journal page forced a checkpoint). After an error it goes back to the lists. A cut leaves it a
//! used block with some pages superseded by newer copies, as an interrupted collection always
//! did; mount knows nothing of pacing. RAM: 16 bytes per plane in the `Ftl` struct (the
//! victim, its valid count when chosen, and a cursor per part of it, `gc_stripe.rs`).
//!
//! With GC stripes (`gc_stripe.rs`) a paced step's unit is a stripe of `k` copies, counted as
//! `k` against its budget; a stripe is not split, so a step may copy up to `k - 1` pages more
//! than its budget (the next steps' budgets follow the victim's remaining pages).
//!
//! Pacing is off (on-demand GC only) while second writes are attached: their GC path collects
//! whole victims (recycle or erase). With deduplication, each paced step first makes pending
//! share records durable (as `collect` does before a whole victim: a record may have made pages
//! of the victim invalid, and a shared page's move must come after the record that shared it).
//! With an NV cache, the removable pages of a victim are dropped when it is chosen.
//! Pacing is on by default; [`Ftl::set_gc_pacing`] turns it off (the simulator's
//! `--gc-pacing off`).

use nand_hal::{BlockId, NandFlash, MAX_PLANES};

use crate::blocks::BlockState;
use crate::gc::Finish;
use crate::gc_stripe::VictimCursor;
use crate::map::MappingTable;
use crate::policy::{PolicySet, Stream, VictimAction, VictimPolicy};
use crate::{Error, Ftl};

const NIL: u32 = u32::MAX;
/// A checkpoint due within the last `1 / CHECKPOINT_EARLY_DIV` of its interval is written early,
/// at a moment the plane has its whole free reserve.
const CHECKPOINT_EARLY_DIV: u32 = 16;
/// How much faster than the base budget a paced victim is collected once GC starts (late).
pub const PACE_FACTOR: u32 = 4;

/// GC copies allowed per host page written to a plane whose current victim had `valid` of
/// `pages_per_block` pages valid when chosen: `ceil(valid / (pages_per_block - valid))`, at least
/// 1, and the whole block when no page of it is invalid.
pub const fn copy_budget(valid: u32, pages_per_block: u32) -> u32 {
    if valid >= pages_per_block {
        return if pages_per_block == 0 { 1 } else { pages_per_block };
    }
    let b = valid.div_ceil(pages_per_block - valid);
    if b == 0 {
        1
    } else {
        b
    }
}

/// Most copies one paced step makes, for a base budget `base` (see [`copy_budget`]):
/// `2 x PACE_FACTOR x base`, at most a block (`pages_per_block`), at least `base`.
pub const fn step_cap(base: u32, pages_per_block: u32) -> u32 {
    let c = base.saturating_mul(2 * PACE_FACTOR);
    let c = if c > pages_per_block { pages_per_block } else { c };
    if c < base {
        base
    } else {
        c
    }
}

/// The victim paced GC is collecting in one plane.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) struct PacedVictim {
    /// The block, or `u32::MAX` for none.
    block: u32,
    /// How far the collection has looked (`gc_stripe.rs`).
    cursor: VictimCursor,
    /// Its valid count when chosen.
    valid: u32,
}

impl PacedVictim {
    /// No victim.
    pub(crate) const NONE: PacedVictim =
        PacedVictim { block: NIL, cursor: VictimCursor { next: [0; MAX_PLANES] }, valid: 0 };
}

impl<N: NandFlash, P: PolicySet, M: MappingTable> Ftl<'_, N, P, M> {
    /// Whether GC is paced (see the module doc for when it is not: second writes collect
    /// victims their own way).
    pub(crate) fn pacing_on(&self) -> bool {
        self.gc_pacing && !self.reuse_on()
    }

    /// Turns paced GC on (the default) or off (whole victims on demand only).
    /// A victim being paced is finished first when pacing is turned off.
    pub fn set_gc_pacing(&mut self, on: bool) -> Result<(), Error> {
        if !on {
            for plane in 0..self.geo.total_planes() {
                if self.paced_victim(plane).is_some() {
                    self.pace_advance(plane, u32::MAX)?;
                }
            }
        }
        self.gc_pacing = on;
        Ok(())
    }

    /// The block paced GC is collecting in `plane`, if any.
    pub(crate) fn paced_victim(&self, plane: u32) -> Option<BlockId> {
        self.paced.get(plane as usize).filter(|p| p.block != NIL).map(|p| BlockId(p.block))
    }

    /// Paced GC before a host page goes to `plane` (called where the page buffer holds nothing).
    pub(crate) fn gc_pace(&mut self, plane: u32) -> Result<(), Error> {
        if !self.pacing_on() || plane as usize >= self.paced.len() {
            return Ok(());
        }
        let threshold = self.free_threshold();
        let free = self.blocks.free_count(plane);
        let left = self.host_pages_left(plane);
        // A due checkpoint is this write's work, alone (it would otherwise come with the copies
        // of the next block GC opens). So is one that the blocks this step may open (two at most)
        // would make due when this write also opens a host block (whose opening writes a due
        // checkpoint). And one due within the last 1/CHECKPOINT_EARLY_DIV of the interval is
        // written as soon as the plane has its whole free reserve: paced GC keeps planes just
        // under it, and a checkpoint taken from a pool of one or two blocks would take the same
        // hot blocks (those wear leveling leaves in the pool) every other time.
        // (Early only for intervals of `CHECKPOINT_EARLY_DIV` blocks or more, where it changes the
        // checkpoint rate by a few percent at most.)
        let interval = self.cfg.checkpoint_interval_blocks;
        let due_in = interval.saturating_sub(self.ckpt.blocks_since);
        let early = interval >= CHECKPOINT_EARLY_DIV
            && ((left == 0 && due_in <= 2)
                || (free >= threshold && due_in <= interval / CHECKPOINT_EARLY_DIV));
        if self.checkpoint_due() || early {
            // The checkpoint needs its blocks and GC one more (the old checkpoint's come back
            // after). Journal pages and GC blocks may have taken free blocks while pacing waited
            // to start: if what is left falls short, this plane collects on demand first, just
            // enough victims to cover it.
            let need = self.checkpoint_need();
            self.collect_until(plane, |f| f.blocks.total_free() >= need && f.blocks.free_count(plane) > 0)?;
            return self.write_checkpoint();
        }
        if free == 0 {
            // No block for GC to copy into once the GC block fills: collect on demand now.
            self.collect_until(plane, |f| f.blocks.free_count(plane) > 0)?;
            return Ok(());
        }
        let current = self.paced_victim(plane);
        if current.is_none() && free >= threshold {
            return Ok(());
        }
        // The victim's valid count when chosen (or the greedy candidate's) and what is left of it.
        let (valid, remaining) = match current {
            Some(b) => (self.paced[plane as usize].valid, self.blocks.get(b).valid() as u32),
            None => match self.blocks.min_valid(plane) {
                Some(c) => (self.blocks.get(c).valid() as u32, 0),
                None => return Ok(()),
            },
        };
        let base = copy_budget(valid, self.geo.pages_per_block);
        let work = self.pace_work(threshold.saturating_sub(free), valid, remaining, current.is_some());
        if current.is_none() {
            // Start late, at `PACE_FACTOR` times the base rate: until then no space is held by a
            // half-collected victim or by blocks freed long before they are needed.
            if left > 0 && work < left as u64 * (base * PACE_FACTOR) as u64 {
                return Ok(());
            }
            if !self.pace_choose(plane) {
                return Ok(());
            }
        }
        // Spread what is left over the host pages left, within [base, cap].
        let cap = step_cap(base, self.geo.pages_per_block);
        let budget = work.div_ceil(left.max(1) as u64).clamp(base as u64, cap as u64) as u32;
        self.pace_advance(plane, budget).map(|_| ())
    }

    /// GC copies still needed in a plane `deficit` blocks below its free reserve, with victims of
    /// `valid` valid pages, `remaining` of them left in the current victim (if `current`): the
    /// current victim's pages, then enough victims for the net gain (each frees one block and
    /// fills `valid` pages of GC blocks).
    fn pace_work(&self, deficit: u32, valid: u32, remaining: u32, current: bool) -> u64 {
        let ppb = self.geo.pages_per_block as u64;
        let v = valid as u64;
        if v >= ppb {
            return ppb * deficit.max(1) as u64;
        }
        // Pages of net gain still needed after the current victim (which gains ppb - remaining).
        let need = if current {
            (deficit as u64 * ppb).saturating_sub(ppb - remaining as u64)
        } else {
            deficit as u64 * ppb
        };
        remaining as u64 + (need * v).div_ceil(ppb - v)
    }

    /// Host pages `plane` can still take before one of its open host-side blocks (host and cold
    /// streams) opens a block (0 when none is open): for each open block, its pages left divided
    /// by its stream's recent share of the host pages (a cold block written by one page in ten
    /// lasts ten times its pages), the soonest of them. (The plain minimum of pages left let a
    /// slowly filled cold block make every paced step start early, on fuller victims: measured
    /// with ETI on the Heimdall 1370 cut, see docs/eval/eti.)
    pub(crate) fn host_pages_left(&self, plane: u32) -> u32 {
        let total: u64 = self.host_stream_pages.iter().map(|&c| c as u64).sum();
        [Stream::Host, Stream::Cold]
            .into_iter()
            .map(|s| (s, self.frontiers[Self::frontier_index(plane, s)]))
            .filter(|(_, f)| f.block != u32::MAX)
            .map(|(s, f)| {
                let left = self.geo.pages_per_block.saturating_sub(f.next_page) as u64;
                let mine = self.host_stream_pages[s as usize] as u64;
                if total == 0 || mine == total {
                    left
                } else {
                    // A stream with no recent page lasts indefinitely.
                    (left * total).checked_div(mine).unwrap_or(u32::MAX as u64)
                }
            })
            .min()
            .map_or(0, |h| h.min(u32::MAX as u64) as u32)
    }

    /// Counts a host page on `stream` for [`Ftl::host_pages_left`]'s shares (both counts halved
    /// past 2^16, so the shares follow the recent mix).
    pub(crate) fn note_host_stream(&mut self, stream: Stream) {
        if let Some(c) = self.host_stream_pages.get_mut(stream as usize) {
            *c += 1;
            if *c > 1 << 16 {
                for c in self.host_stream_pages.iter_mut() {
                    *c /= 2;
                }
            }
        }
    }

    /// Chooses the next victim of `plane` (greedy); false if there is none.
    fn pace_choose(&mut self, plane: u32) -> bool {
        let view = self.blocks.view(plane);
        let Some(victim) = self.policies.victim().select(&view) else {
            return false;
        };
        let VictimAction::Erase = self.policies.victim().action(&view, victim);
        let victim = self.victim_within_room(plane, victim);
        if !self.geo.contains_block(victim)
            || self.geo.plane_index(victim) != plane
            || self.blocks.state(victim) != BlockState::Used
        {
            return false;
        }
        self.blocks.set_state(victim, BlockState::Victim);
        self.victim_taken(victim);
        let valid = self.blocks.get(victim).valid() as u32;
        self.paced[plane as usize] = PacedVictim { block: victim.0, cursor: self.victim_cursor(), valid };
        true
    }

    /// Copies at most `limit` valid pages of the paced victim of `plane`; erases it once no valid
    /// page is left. True when the victim was finished. On error the victim goes back to the GC
    /// lists (its remaining valid pages are where they were).
    pub(crate) fn pace_advance(&mut self, plane: u32, limit: u32) -> Result<bool, Error> {
        let Some(b) = self.paced_victim(plane) else {
            return Ok(false);
        };
        // Share records first (deduplication; see the module documentation).
        if let Err(e) = self.dedup_flush_pending(false) {
            self.paced[plane as usize] = PacedVictim::NONE;
            self.blocks.set_state(b, BlockState::Used);
            return Err(e);
        }
        let mut copies = 0u32;
        let mut cur = self.paced[plane as usize].cursor;
        let mut scanned = false;
        // A checkpoint that falls due on the way (a GC block opened) ends a paced step: the next
        // host write writes it alone.
        while copies < limit
            && self.blocks.get(b).valid() > 0
            && (limit == u32::MAX || !self.checkpoint_due())
        {
            // One page, or one GC stripe (`gc_stripe.rs`: it counts its `k` copies); 0: every
            // page looked at.
            match self.gc_step(b, plane, &mut cur) {
                Ok(0) => {
                    scanned = true;
                    break;
                }
                Ok(n) => copies += n,
                Err(e) => {
                    self.paced[plane as usize] = PacedVictim::NONE;
                    self.blocks.set_state(b, BlockState::Used);
                    return Err(e);
                }
            }
            self.paced[plane as usize].cursor = cur;
        }
        if self.blocks.get(b).valid() > 0 && !scanned {
            return Ok(false);
        }
        self.paced[plane as usize] = PacedVictim::NONE;
        if self.blocks.get(b).valid() > 0 {
            // Pages the scan had passed became valid again: impossible (a victim takes no new
            // pages), but never erase valid data; the block goes back to GC's lists.
            self.blocks.set_state(b, BlockState::Used);
            return Ok(false);
        }
        self.finish_collect(b, Finish::Erase, BlockState::Used)?;
        self.counters.gc_blocks += 1;
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::copy_budget;

    #[test]
    fn budget_frees_at_least_one_page_per_host_page() {
        for ppb in [8u32, 64, 128] {
            for v in 0..ppb {
                let b = copy_budget(v, ppb);
                // b copies free b * (ppb - v) / v pages of a victim with v valid: at least one.
                assert!(b as u64 * (ppb - v) as u64 >= v as u64, "ppb {ppb} v {v} b {b}");
                // And b is the smallest such integer (or 1).
                assert!(b == 1 || ((b - 1) as u64 * (ppb - v) as u64) < v as u64);
            }
            assert_eq!(copy_budget(ppb, ppb), ppb);
        }
        // 90% fill on 64-page blocks: victims hold about 55 valid pages.
        assert_eq!(copy_budget(55, 64), 7);
    }
}
