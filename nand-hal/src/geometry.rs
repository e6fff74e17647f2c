//! The shape of a NAND device and the address arithmetic that follows from it.
//!
//! All sizes are integers; [`Geometry::validate`] rejects shapes the rest of the stack cannot
//! address (zero sizes, more than [`crate::MAX_PLANES`] planes, totals that overflow `u32`).

use crate::{BlockId, LunId, PageId, PlaneId, MAX_PLANES};

/// Error-correction strength a device requires: `bits` correctable bits per `codeword_bytes`
/// bytes of data (ONFI parameter page bytes 112-113).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct EccRequirement {
    /// Correctable bits per codeword.
    pub bits: u8,
    /// Data bytes per codeword.
    pub codeword_bytes: u16,
}

/// The shape and rules of a NAND device.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Geometry {
    /// Data bytes per page (e.g. 2048).
    pub data_bytes: u32,
    /// Spare (out-of-band) bytes per page (e.g. 64).
    pub spare_bytes: u32,
    /// Pages per block (e.g. 64).
    pub pages_per_block: u32,
    /// Blocks per plane.
    pub blocks_per_plane: u32,
    /// Planes per LUN (1, 2 or 4).
    pub planes_per_lun: u32,
    /// LUNs (dies) in the device.
    pub luns: u32,
    /// Partial programs allowed per page between erases (NOP). 1 forbids reprogramming.
    pub nop: u8,
    /// Whether pages in a block must be programmed in ascending order.
    pub sequential_program: bool,
    /// Required ECC strength.
    pub ecc: EccRequirement,
    /// Rated program/erase cycles per block.
    pub endurance: u32,
}

/// Why a geometry was rejected.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum GeometryError {
    /// A size is zero.
    Zero,
    /// More planes per LUN than [`MAX_PLANES`].
    TooManyPlanes,
    /// The total number of pages or raw page bytes does not fit in `u32`.
    TooLarge,
}

impl Geometry {
    /// Micron MT29F4G08ABADA: 4 Gbit SLC, 2048 + 64 byte pages, 64 pages per block, 4096 blocks in
    /// two planes, NOP 4, in-order programming, 4-bit ECC per 512 bytes, 100,000 cycles.
    pub const MT29F4G08: Geometry = Geometry {
        data_bytes: 2048,
        spare_bytes: 64,
        pages_per_block: 64,
        blocks_per_plane: 2048,
        planes_per_lun: 2,
        luns: 1,
        nop: 4,
        sequential_program: true,
        ecc: EccRequirement { bits: 4, codeword_bytes: 512 },
        endurance: 100_000,
    };

    /// Checks that the geometry is addressable.
    pub const fn validate(&self) -> Result<(), GeometryError> {
        if self.data_bytes == 0
            || self.pages_per_block == 0
            || self.blocks_per_plane == 0
            || self.planes_per_lun == 0
            || self.luns == 0
            || self.nop == 0
        {
            return Err(GeometryError::Zero);
        }
        if self.planes_per_lun as usize > MAX_PLANES {
            return Err(GeometryError::TooManyPlanes);
        }
        // Checked: the product of four u32 fields can pass 2^64 (a parameter page can claim it).
        let blocks =
            (self.blocks_per_plane as u64).checked_mul(self.planes_per_lun as u64 * self.luns as u64);
        let pages = match blocks {
            Some(b) => b.checked_mul(self.pages_per_block as u64),
            None => None,
        };
        match pages {
            Some(p) if p <= u32::MAX as u64 => {}
            _ => return Err(GeometryError::TooLarge),
        }
        if self.data_bytes as u64 + self.spare_bytes as u64 > u32::MAX as u64 {
            return Err(GeometryError::TooLarge);
        }
        Ok(())
    }

    /// Bytes of a whole raw page: data plus spare.
    pub const fn raw_page_bytes(&self) -> u32 {
        self.data_bytes + self.spare_bytes
    }

    /// Blocks per LUN.
    pub const fn blocks_per_lun(&self) -> u32 {
        self.blocks_per_plane * self.planes_per_lun
    }

    /// Blocks in the device.
    pub const fn total_blocks(&self) -> u32 {
        self.blocks_per_lun() * self.luns
    }

    /// Pages in the device.
    pub const fn total_pages(&self) -> u32 {
        self.total_blocks() * self.pages_per_block
    }

    /// Planes in the device (all LUNs).
    pub const fn total_planes(&self) -> u32 {
        self.planes_per_lun * self.luns
    }

    /// Data bytes in the device.
    pub const fn data_capacity_bytes(&self) -> u64 {
        self.total_pages() as u64 * self.data_bytes as u64
    }

    /// Whether `block` exists.
    pub const fn contains_block(&self, block: BlockId) -> bool {
        block.0 < self.total_blocks()
    }

    /// Whether `page` exists.
    pub const fn contains_page(&self, page: PageId) -> bool {
        page.0 < self.total_pages()
    }

    /// The block holding `page`.
    pub const fn block_of(&self, page: PageId) -> BlockId {
        BlockId(page.0 / self.pages_per_block)
    }

    /// The index of `page` within its block.
    pub const fn page_in_block(&self, page: PageId) -> u32 {
        page.0 % self.pages_per_block
    }

    /// The page at index `page_in_block` of `block`.
    pub const fn page(&self, block: BlockId, page_in_block: u32) -> PageId {
        PageId(block.0 * self.pages_per_block + page_in_block)
    }

    /// The LUN of `block`.
    pub const fn lun_of(&self, block: BlockId) -> LunId {
        LunId((block.0 / self.blocks_per_lun()) as u8)
    }

    /// The plane of `block` within its LUN (low-order block address bits, as ONFI selects planes).
    pub const fn plane_of(&self, block: BlockId) -> PlaneId {
        PlaneId(((block.0 % self.blocks_per_lun()) % self.planes_per_lun) as u8)
    }

    /// A device-wide plane index: `lun * planes_per_lun + plane`.
    pub const fn plane_index(&self, block: BlockId) -> u32 {
        self.lun_of(block).0 as u32 * self.planes_per_lun + self.plane_of(block).0 as u32
    }

    /// The `n`-th block (0-based) of the device-wide plane `plane_index`.
    pub const fn block_in_plane(&self, plane_index: u32, n: u32) -> BlockId {
        let lun = plane_index / self.planes_per_lun;
        let plane = plane_index % self.planes_per_lun;
        BlockId(lun * self.blocks_per_lun() + n * self.planes_per_lun + plane)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mt29f4g08_shape() {
        let g = Geometry::MT29F4G08;
        assert_eq!(g.validate(), Ok(()));
        assert_eq!(g.total_blocks(), 4096);
        assert_eq!(g.total_pages(), 262_144);
        assert_eq!(g.data_capacity_bytes(), 512 * 1024 * 1024);
    }

    #[test]
    fn plane_and_block_arithmetic_are_inverse() {
        let g = Geometry { luns: 2, ..Geometry::MT29F4G08 };
        for plane_index in 0..g.total_planes() {
            for n in [0, 1, 7, g.blocks_per_plane - 1] {
                let b = g.block_in_plane(plane_index, n);
                assert!(g.contains_block(b));
                assert_eq!(g.plane_index(b), plane_index);
            }
        }
        let p = g.page(BlockId(5), 3);
        assert_eq!(g.block_of(p), BlockId(5));
        assert_eq!(g.page_in_block(p), 3);
    }

    #[test]
    fn shapes_past_2_pow_64_pages_are_too_large_not_an_overflow() {
        // Found by the onfi_param_page fuzz target: blocks x planes x LUNs x pages per block
        // overflowed u64 (a panic with overflow checks, a wrapped product that could pass
        // without them).
        let g = Geometry {
            blocks_per_plane: u32::MAX,
            planes_per_lun: MAX_PLANES as u32,
            luns: u32::MAX,
            pages_per_block: 1 << 31,
            ..Geometry::MT29F4G08
        };
        assert_eq!(g.validate(), Err(GeometryError::TooLarge));
        // 2^31 x 2 x 2^31 blocks of 2 pages: 2^64 pages, which wrapped to 0 and was accepted.
        let g =
            Geometry { blocks_per_plane: 1 << 31, planes_per_lun: 2, luns: 1 << 31, pages_per_block: 2, ..g };
        assert_eq!(g.validate(), Err(GeometryError::TooLarge));
    }

    #[test]
    fn rejects_unaddressable_shapes() {
        let g = Geometry { pages_per_block: 0, ..Geometry::MT29F4G08 };
        assert_eq!(g.validate(), Err(GeometryError::Zero));
        let g = Geometry { planes_per_lun: 8, ..Geometry::MT29F4G08 };
        assert_eq!(g.validate(), Err(GeometryError::TooManyPlanes));
        let g = Geometry { blocks_per_plane: u32::MAX / 2, ..Geometry::MT29F4G08 };
        assert_eq!(g.validate(), Err(GeometryError::TooLarge));
    }
}
