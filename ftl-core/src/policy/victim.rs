//! The GC victim seam: which block of a plane GC cleans next, and whether the victim is erased
//! or (with `wom`) recycled. The baseline is greedy: the used block with the fewest valid pages.

use nand_hal::BlockId;

use crate::blocks::VictimView;

/// What GC does with a victim once its valid pages are moved.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum VictimAction {
    /// Erase it and return it to the free pool.
    Erase,
}

/// Chooses GC victims.
pub trait VictimPolicy {
    /// The block GC cleans next in the view's plane, or `None` if no used block exists.
    fn select(&mut self, view: &VictimView<'_>) -> Option<BlockId> {
        view.min_valid()
    }
    /// What to do with the victim after its valid pages moved.
    fn action(&mut self, _view: &VictimView<'_>, _victim: BlockId) -> VictimAction {
        VictimAction::Erase
    }
}

/// Greedy: fewest valid pages first (ties: the block that entered its valid-count bucket last).
#[derive(Copy, Clone, Debug, Default)]
pub struct Greedy;

impl VictimPolicy for Greedy {}
