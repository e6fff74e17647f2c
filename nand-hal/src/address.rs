//! Address newtypes. A block is numbered device-wide (`0..geometry.total_blocks()`); a page is
//! numbered device-wide as `block * pages_per_block + page_in_block`. Plane and LUN follow the
//! ONFI convention: within a LUN the plane is selected by the low-order bits of the block
//! address, so block `b` lies in LUN `b / blocks_per_lun` and plane `b % planes_per_lun`.
//! The mapping functions live on [`crate::Geometry`].

/// A block, numbered device-wide.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct BlockId(pub u32);

/// A page, numbered device-wide: `block * pages_per_block + page_in_block`.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct PageId(pub u32);

/// A plane within a LUN.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct PlaneId(pub u8);

/// A LUN (die) of the device.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct LunId(pub u8);
