//! Helpers shared by the integration tests.

use nand_hal::{EccRequirement, Geometry};

/// 512 + 16 byte pages, 8 pages per block, 16 blocks in each of 2 planes, NOP 4, in order.
pub fn small() -> Geometry {
    Geometry {
        data_bytes: 512,
        spare_bytes: 16,
        pages_per_block: 8,
        blocks_per_plane: 16,
        planes_per_lun: 2,
        luns: 1,
        nop: 4,
        sequential_program: true,
        ecc: EccRequirement { bits: 4, codeword_bytes: 512 },
        endurance: 1000,
    }
}
