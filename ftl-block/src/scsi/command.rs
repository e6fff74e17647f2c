//! [`Command`]: the SCSI commands the handler knows, decoded from a command descriptor block
//! (CDB). Decoding never panics: a CDB too short for its opcode is [`Command::Invalid`], an opcode
//! outside the list is [`Command::Unknown`].

/// Opcodes (SPC-4 / SBC-3).
pub mod opcode {
    /// TEST UNIT READY
    pub const TEST_UNIT_READY: u8 = 0x00;
    /// REQUEST SENSE
    pub const REQUEST_SENSE: u8 = 0x03;
    /// READ(6)
    pub const READ_6: u8 = 0x08;
    /// WRITE(6)
    pub const WRITE_6: u8 = 0x0A;
    /// INQUIRY
    pub const INQUIRY: u8 = 0x12;
    /// MODE SENSE(6)
    pub const MODE_SENSE_6: u8 = 0x1A;
    /// START STOP UNIT
    pub const START_STOP_UNIT: u8 = 0x1B;
    /// PREVENT ALLOW MEDIUM REMOVAL
    pub const PREVENT_ALLOW_MEDIUM_REMOVAL: u8 = 0x1E;
    /// READ FORMAT CAPACITIES (MMC; Windows asks it of USB disks)
    pub const READ_FORMAT_CAPACITIES: u8 = 0x23;
    /// READ CAPACITY(10)
    pub const READ_CAPACITY_10: u8 = 0x25;
    /// READ(10)
    pub const READ_10: u8 = 0x28;
    /// WRITE(10)
    pub const WRITE_10: u8 = 0x2A;
    /// SYNCHRONIZE CACHE(10)
    pub const SYNCHRONIZE_CACHE_10: u8 = 0x35;
    /// UNMAP
    pub const UNMAP: u8 = 0x42;
    /// MODE SENSE(10)
    pub const MODE_SENSE_10: u8 = 0x5A;
    /// READ(16)
    pub const READ_16: u8 = 0x88;
    /// WRITE(16)
    pub const WRITE_16: u8 = 0x8A;
    /// SYNCHRONIZE CACHE(16)
    pub const SYNCHRONIZE_CACHE_16: u8 = 0x91;
    /// SERVICE ACTION IN(16); service action 0x10 is READ CAPACITY(16)
    pub const SERVICE_ACTION_IN_16: u8 = 0x9E;
    /// The READ CAPACITY(16) service action of SERVICE ACTION IN(16).
    pub const SA_READ_CAPACITY_16: u8 = 0x10;
}

/// A decoded SCSI command.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Command {
    /// TEST UNIT READY: always ready.
    TestUnitReady,
    /// REQUEST SENSE: the sense data of the last command (fixed format only).
    RequestSense {
        /// Descriptor-format sense asked for (not supported: INVALID FIELD IN CDB).
        desc: bool,
        /// Allocation length.
        alloc_len: u16,
    },
    /// INQUIRY: standard data or a vital product data page.
    Inquiry {
        /// A VPD page is asked for.
        evpd: bool,
        /// The VPD page.
        page_code: u8,
        /// Allocation length.
        alloc_len: u16,
    },
    /// MODE SENSE(6) or (10).
    ModeSense {
        /// The 10-byte form (8-byte header).
        ten: bool,
        /// Page control: 0 current, 1 changeable, 2 default, 3 saved.
        page_control: u8,
        /// Page code (0x3F: all pages).
        page_code: u8,
        /// Subpage code.
        subpage_code: u8,
        /// Allocation length.
        alloc_len: u16,
    },
    /// READ CAPACITY(10).
    ReadCapacity10,
    /// READ CAPACITY(16).
    ReadCapacity16 {
        /// Allocation length.
        alloc_len: u32,
    },
    /// READ FORMAT CAPACITIES.
    ReadFormatCapacities {
        /// Allocation length.
        alloc_len: u16,
    },
    /// READ(6/10/16): `len` sectors from `lba`.
    Read {
        /// First sector.
        lba: u64,
        /// Sectors.
        len: u32,
    },
    /// WRITE(6/10/16): `len` sectors at `lba`.
    Write {
        /// First sector.
        lba: u64,
        /// Sectors.
        len: u32,
    },
    /// SYNCHRONIZE CACHE(10/16): the FTL's flush (of the whole device, whatever the range).
    SynchronizeCache,
    /// UNMAP: discard the ranges of the parameter list.
    Unmap {
        /// The ANCHOR bit (not supported: INVALID FIELD IN CDB).
        anchor: bool,
        /// The parameter list length from the CDB; `None` when only the opcode is known (the
        /// usbd-storage glue): the list's own header gives its length then.
        param_len: Option<u16>,
    },
    /// START STOP UNIT: flushes; the medium is not removable.
    StartStopUnit,
    /// PREVENT ALLOW MEDIUM REMOVAL: accepted, nothing to do.
    PreventAllowMediumRemoval,
    /// A known opcode whose CDB is too short or has an unsupported service action.
    Invalid {
        /// The opcode.
        opcode: u8,
    },
    /// An opcode the handler does not implement.
    Unknown {
        /// The opcode.
        opcode: u8,
    },
}

fn be16(b: &[u8]) -> u16 {
    u16::from_be_bytes([b[0], b[1]])
}

fn be32(b: &[u8]) -> u32 {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}

fn be64(b: &[u8]) -> u64 {
    u64::from_be_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]])
}

impl Command {
    /// Decodes a CDB.
    pub fn parse(cdb: &[u8]) -> Command {
        use opcode::*;
        let Some(&op) = cdb.first() else {
            return Command::Invalid { opcode: 0 };
        };
        // The length each opcode's fields need.
        let need = match op {
            TEST_UNIT_READY | START_STOP_UNIT | PREVENT_ALLOW_MEDIUM_REMOVAL => 1,
            REQUEST_SENSE | INQUIRY | MODE_SENSE_6 | READ_6 | WRITE_6 => 6,
            READ_CAPACITY_10 | SYNCHRONIZE_CACHE_10 => 1,
            READ_10 | WRITE_10 | UNMAP | MODE_SENSE_10 | READ_FORMAT_CAPACITIES => 10,
            SYNCHRONIZE_CACHE_16 => 1,
            READ_16 | WRITE_16 | SERVICE_ACTION_IN_16 => 16,
            _ => return Command::Unknown { opcode: op },
        };
        if cdb.len() < need {
            return Command::Invalid { opcode: op };
        }
        match op {
            TEST_UNIT_READY => Command::TestUnitReady,
            REQUEST_SENSE => Command::RequestSense { desc: cdb[1] & 1 != 0, alloc_len: cdb[4] as u16 },
            INQUIRY => {
                Command::Inquiry { evpd: cdb[1] & 1 != 0, page_code: cdb[2], alloc_len: be16(&cdb[3..]) }
            }
            MODE_SENSE_6 | MODE_SENSE_10 => Command::ModeSense {
                ten: op == MODE_SENSE_10,
                page_control: cdb[2] >> 6,
                page_code: cdb[2] & 0x3F,
                subpage_code: cdb[3],
                alloc_len: if op == MODE_SENSE_10 { be16(&cdb[7..]) } else { cdb[4] as u16 },
            },
            START_STOP_UNIT => Command::StartStopUnit,
            PREVENT_ALLOW_MEDIUM_REMOVAL => Command::PreventAllowMediumRemoval,
            READ_FORMAT_CAPACITIES => Command::ReadFormatCapacities { alloc_len: be16(&cdb[7..]) },
            READ_CAPACITY_10 => Command::ReadCapacity10,
            SERVICE_ACTION_IN_16 if cdb[1] & 0x1F == SA_READ_CAPACITY_16 => {
                Command::ReadCapacity16 { alloc_len: be32(&cdb[10..]) }
            }
            SERVICE_ACTION_IN_16 => Command::Invalid { opcode: op },
            READ_6 | WRITE_6 => {
                let lba = (u32::from_be_bytes([0, cdb[1], cdb[2], cdb[3]]) & 0x1F_FFFF) as u64;
                // A transfer length of 0 means 256 sectors in the 6-byte commands.
                let len = if cdb[4] == 0 { 256 } else { cdb[4] as u32 };
                if op == READ_6 {
                    Command::Read { lba, len }
                } else {
                    Command::Write { lba, len }
                }
            }
            READ_10 => Command::Read { lba: be32(&cdb[2..]) as u64, len: be16(&cdb[7..]) as u32 },
            WRITE_10 => Command::Write { lba: be32(&cdb[2..]) as u64, len: be16(&cdb[7..]) as u32 },
            READ_16 => Command::Read { lba: be64(&cdb[2..]), len: be32(&cdb[10..]) },
            WRITE_16 => Command::Write { lba: be64(&cdb[2..]), len: be32(&cdb[10..]) },
            SYNCHRONIZE_CACHE_10 | SYNCHRONIZE_CACHE_16 => Command::SynchronizeCache,
            UNMAP => Command::Unmap { anchor: cdb[1] & 1 != 0, param_len: Some(be16(&cdb[7..])) },
            _ => Command::Unknown { opcode: op },
        }
    }
}
