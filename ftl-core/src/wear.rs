//! Wear leveling.
//!
//! Dynamic: host data, checkpoints and map pages take the free block with the lowest erase
//! count, the GC stream (pages GC and static leveling move: data that outlived a block once) the
//! one with the highest within `WORN_PICK_MARGIN` (8) erases of the lowest (see `frontier`,
//! [`crate::blocks::Pick`]). Measured (uniform random at 90% fill, anchor geometry, twelve
//! capacities of writes): erase-count spread 10 where the least worn for every stream gave 17,
//! and 11 instead of 52 with the mount pool, whose released checkpoint blocks were otherwise
//! the only free blocks left at each checkpoint and took it again and again (MT29F4G08 at 93%:
//! most worn block 21 erases instead of 341). The cost, on skewed workloads: the static test's
//! spread 48 with 745 moves instead of 45 with 682, trace runs with hot/cold separation +5%.
//! Static: every `wear_check_interval` erases, the spread between the most worn good block and the
//! least worn used block is checked; past `wear_spread_limit`, that cold block is collected (its
//! data moves to the GC stream) so its low-wear block returns to the free pool, where dynamic
//! leveling hands it out next. This bounds the spread to about the limit plus the wear a block
//! takes between checks.

use nand_hal::{BlockId, NandFlash};

use crate::blocks::BlockState;
use crate::gc::Finish;
use crate::map::MappingTable;
use crate::policy::PolicySet;
use crate::{Error, Ftl};

/// Static wear-leveling bookkeeping.
#[derive(Copy, Clone, Debug, Default)]
pub struct WearState {
    erases_since_check: u32,
    pending: Option<BlockId>,
}

impl<N: NandFlash, P: PolicySet, M: MappingTable> Ftl<'_, N, P, M> {
    /// Called after every successful erase.
    pub(crate) fn note_erase(&mut self, _b: BlockId) {
        self.wear.erases_since_check += 1;
        if self.wear.erases_since_check < self.cfg.wear_check_interval {
            return;
        }
        self.wear.erases_since_check = 0;
        let mut max = 0;
        let mut coldest: Option<(BlockId, u32)> = None;
        for (b, info) in self.blocks.iter() {
            match info.state() {
                // The anchor's blocks wear with its records, outside wear leveling.
                BlockState::Bad | BlockState::Anchor => continue,
                BlockState::Used if coldest.is_none_or(|(_, ec)| info.erase_count() < ec) => {
                    coldest = Some((b, info.erase_count()));
                }
                _ => {}
            }
            max = max.max(info.erase_count());
        }
        if let Some((b, ec)) = coldest {
            if max - ec > self.cfg.wear_spread_limit {
                self.wear.pending = Some(b);
            }
        }
    }

    /// Runs a pending static wear-leveling move.
    pub(crate) fn wear_level_pending(&mut self) -> Result<(), Error> {
        if let Some(b) = self.wear.pending.take() {
            if self.blocks.state(b) == BlockState::Used {
                self.collect(b, Finish::Erase)?;
                self.counters.wear_level_moves += 1;
            }
        }
        Ok(())
    }
}
