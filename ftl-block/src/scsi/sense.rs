//! [`Sense`]: the sense key and additional sense code reported (REQUEST SENSE, fixed format)
//! after a command fails, and the mapping of adapter errors to them.

use crate::error::Error;

/// A sense key with its additional sense code and qualifier.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Sense {
    /// Sense key.
    pub key: u8,
    /// Additional sense code.
    pub asc: u8,
    /// Additional sense code qualifier.
    pub ascq: u8,
}

impl Sense {
    /// NO SENSE: the last command succeeded.
    pub const NONE: Sense = Sense { key: 0x00, asc: 0x00, ascq: 0x00 };
    /// ILLEGAL REQUEST, LOGICAL BLOCK ADDRESS OUT OF RANGE.
    pub const LBA_OUT_OF_RANGE: Sense = Sense { key: 0x05, asc: 0x21, ascq: 0x00 };
    /// ILLEGAL REQUEST, INVALID COMMAND OPERATION CODE.
    pub const INVALID_OPCODE: Sense = Sense { key: 0x05, asc: 0x20, ascq: 0x00 };
    /// ILLEGAL REQUEST, INVALID FIELD IN CDB.
    pub const INVALID_FIELD_IN_CDB: Sense = Sense { key: 0x05, asc: 0x24, ascq: 0x00 };
    /// ILLEGAL REQUEST, INVALID FIELD IN PARAMETER LIST.
    pub const INVALID_FIELD_IN_PARAMETER_LIST: Sense = Sense { key: 0x05, asc: 0x26, ascq: 0x00 };
    /// ILLEGAL REQUEST, PARAMETER LIST LENGTH ERROR.
    pub const PARAMETER_LIST_LENGTH_ERROR: Sense = Sense { key: 0x05, asc: 0x1A, ascq: 0x00 };
    /// ILLEGAL REQUEST, SAVING PARAMETERS NOT SUPPORTED.
    pub const SAVING_PARAMETERS_NOT_SUPPORTED: Sense = Sense { key: 0x05, asc: 0x39, ascq: 0x00 };
    /// MEDIUM ERROR, UNRECOVERED READ ERROR.
    pub const UNRECOVERED_READ_ERROR: Sense = Sense { key: 0x03, asc: 0x11, ascq: 0x00 };
    /// MEDIUM ERROR, WRITE ERROR.
    pub const WRITE_ERROR: Sense = Sense { key: 0x03, asc: 0x0C, ascq: 0x00 };
    /// DATA PROTECT, SPACE ALLOCATION FAILED WRITE PROTECT (the FTL has no free space left).
    pub const SPACE_ALLOCATION_FAILED: Sense = Sense { key: 0x07, asc: 0x27, ascq: 0x07 };
    /// HARDWARE ERROR, INTERNAL TARGET FAILURE.
    pub const INTERNAL_TARGET_FAILURE: Sense = Sense { key: 0x04, asc: 0x44, ascq: 0x00 };

    /// The sense for an adapter error, during a write (or flush, or unmap) or a read.
    pub fn for_error(e: Error, writing: bool) -> Sense {
        use ftl_core::Error as F;
        match e {
            Error::OutOfRange => Sense::LBA_OUT_OF_RANGE,
            Error::Ftl(F::Uncorrectable { .. }) => Sense::UNRECOVERED_READ_ERROR,
            Error::Ftl(F::NoSpace) => Sense::SPACE_ALLOCATION_FAILED,
            Error::Ftl(F::Device(_)) if writing => Sense::WRITE_ERROR,
            Error::Ftl(F::Device(_)) => Sense::UNRECOVERED_READ_ERROR,
            Error::Length | Error::Buffer | Error::Busy | Error::Size | Error::Ftl(_) => {
                Sense::INTERNAL_TARGET_FAILURE
            }
        }
    }

    /// Fixed-format sense data (18 bytes) into `out[..18]`; returns 18.
    pub(crate) fn fixed(&self, out: &mut [u8]) -> usize {
        out[..18].fill(0);
        out[0] = 0x70; // current error, fixed format
        out[2] = self.key & 0x0F;
        out[7] = 10; // additional sense length
        out[12] = self.asc;
        out[13] = self.ascq;
        18
    }
}
