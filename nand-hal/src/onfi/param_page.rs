//! The ONFI parameter page: its CRC-16, the choice among its redundant copies, parsing, and what
//! follows from it (geometry, address layout, timing mode, capabilities).
//!
//! - [`onfi_crc16`]: CRC-16 with polynomial 0x8005, initial value 0x4F4E, not reflected, no final
//!   xor (Linux `onfi_crc16`, `ONFI_CRC_BASE`), over bytes 0..=253; the page stores it
//!   little-endian in bytes 254..=255. Check value of `"123456789"`: 0x2771.
//! - [`select_copy`]: as Linux `nand_onfi_detect` does, the first copy whose CRC matches is used;
//!   when none does, a bitwise majority vote over the copies ([`bitwise_majority`], Linux
//!   `nand_bit_wise_majority`) is tried and accepted only if its CRC then matches.
//! - [`ParamPage`]: the fields this crate uses (ONFI 1.0 to 4.0 layout, `struct nand_onfi_params`),
//!   parsed from and encoded to the 256 raw bytes; [`ParamPage::MT29F4G08ABADA`] is the page of
//!   the Micron part the board carries, [`ParamPage::for_geometry`] builds one for any
//!   [`Geometry`] (the chip model uses both).
//! - [`ParamPage::geometry`] and [`AddressLayout`]: the device shape and the column and row
//!   address cycles (byte 101) the driver and the model share. Rows are
//!   `lun | block-in-LUN | page-in-block`, each field `ceil(log2(count))` bits wide, so the plane
//!   is the low-order block bits as the rest of the crate assumes.
//!
//! Parsing is strict: anything the driver cannot honour (a 16-bit bus, an ECC requirement only in
//! the extended parameter page, a shape that does not fit the address cycles) is an error rather
//! than a guess. No allocation, no floating point, no panics on any input.

use crc::{Algorithm, Crc, NoTable};

use crate::{BlockId, EccRequirement, Geometry, PageId, MAX_PLANES};

/// Bytes in one copy of the parameter page.
pub const PARAM_PAGE_BYTES: usize = 256;

/// Redundant copies the driver reads (ONFI requires at least three; Linux `ONFI_PARAM_PAGES`).
pub const PARAM_PAGE_COPIES: usize = 3;

/// The ONFI signature, bytes 0..=3 of the parameter page and the answer to READ ID at 20h.
pub const ONFI_SIGNATURE: [u8; 4] = *b"ONFI";

/// The ONFI CRC-16 as a `crc` crate algorithm.
pub const ONFI_CRC16: Algorithm<u16> = Algorithm {
    width: 16,
    poly: 0x8005,
    init: 0x4F4E,
    refin: false,
    refout: false,
    xorout: 0x0000,
    check: 0x2771,
    residue: 0x0000,
};

/// Bitwise implementation: three pages at identification do not justify a 512-byte table.
const CRC: Crc<u16, NoTable> = Crc::<u16, NoTable>::new(&ONFI_CRC16);

/// The ONFI CRC-16 of `bytes`.
pub fn onfi_crc16(bytes: &[u8]) -> u16 {
    CRC.checksum(bytes)
}

/// Whether the CRC stored in bytes 254..=255 (little-endian) matches bytes 0..=253.
pub fn crc_matches(page: &[u8; PARAM_PAGE_BYTES]) -> bool {
    onfi_crc16(&page[..254]) == u16::from_le_bytes([page[254], page[255]])
}

/// Writes the CRC of bytes 0..=253 into bytes 254..=255.
pub fn seal(page: &mut [u8; PARAM_PAGE_BYTES]) {
    let crc = onfi_crc16(&page[..254]).to_le_bytes();
    page[254..].copy_from_slice(&crc);
}

/// Bitwise majority of `copies` into `out`: a bit is set when it is set in more than half of the
/// copies (Linux `nand_bit_wise_majority`). With no copies `out` becomes all zeros.
pub fn bitwise_majority(copies: &[[u8; PARAM_PAGE_BYTES]], out: &mut [u8; PARAM_PAGE_BYTES]) {
    let half = copies.len() / 2;
    for (i, o) in out.iter_mut().enumerate() {
        let mut v = 0u8;
        for bit in 0..8 {
            let ones = copies.iter().filter(|c| c[i] & (1 << bit) != 0).count();
            if ones > half {
                v |= 1 << bit;
            }
        }
        *o = v;
    }
}

/// Which bytes the driver trusted.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum ParamSource {
    /// The copy with this index (0-based) had a matching CRC.
    Copy(u8),
    /// No copy had a matching CRC; their bitwise majority has.
    MajorityVote,
}

/// The first copy with a matching CRC, else the bitwise majority of all of them if its CRC
/// matches, else [`ParamError::Crc`].
pub fn select_copy(
    copies: &[[u8; PARAM_PAGE_BYTES]],
) -> Result<([u8; PARAM_PAGE_BYTES], ParamSource), ParamError> {
    for (i, c) in copies.iter().enumerate() {
        if crc_matches(c) {
            return Ok((*c, ParamSource::Copy(i as u8)));
        }
    }
    let mut voted = [0u8; PARAM_PAGE_BYTES];
    bitwise_majority(copies, &mut voted);
    if copies.is_empty() || !crc_matches(&voted) {
        return Err(ParamError::Crc);
    }
    Ok((voted, ParamSource::MajorityVote))
}

/// Why a parameter page was rejected.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum ParamError {
    /// No copy has a matching CRC and the majority vote does not either.
    Crc,
    /// Bytes 0..=3 are not "ONFI".
    Signature,
    /// The revision field names no ONFI version this driver knows (1.0 to 4.0).
    Revision,
    /// The part has a 16-bit data bus; the bus trait is 8 bits wide.
    BusWidth16,
    /// The ECC requirement is only in the extended parameter page (byte 112 = 0xFF).
    EccInExtendedPage,
    /// The address cycles (byte 101) are zero, too many, or too few for the shape.
    AddressCycles,
    /// A shape the stack cannot address; the text names the field.
    Geometry(&'static str),
}

impl core::fmt::Display for ParamError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            ParamError::Crc => f.write_str("no parameter page copy with a valid CRC, majority vote failed"),
            ParamError::Signature => f.write_str("parameter page signature is not ONFI"),
            ParamError::Revision => f.write_str("unsupported ONFI revision"),
            ParamError::BusWidth16 => f.write_str("16-bit data bus not supported"),
            ParamError::EccInExtendedPage => {
                f.write_str("ECC requirement in the extended parameter page is not supported")
            }
            ParamError::AddressCycles => f.write_str("address cycles do not fit the shape"),
            ParamError::Geometry(what) => write!(f, "unusable geometry: {what}"),
        }
    }
}

impl core::error::Error for ParamError {}

/// Feature bits (bytes 6-7).
pub mod features {
    /// 16-bit data bus.
    pub const BUS_16: u16 = 1 << 0;
    /// Multiple LUN operations.
    pub const MULTI_LUN: u16 = 1 << 1;
    /// Pages of a block may be programmed in any order.
    pub const NON_SEQUENTIAL_PROGRAM: u16 = 1 << 2;
    /// Multi-plane (interleaved) program and erase.
    pub const MULTI_PLANE_PROGRAM_ERASE: u16 = 1 << 3;
    /// Odd-to-even page copyback.
    pub const ODD_TO_EVEN_COPYBACK: u16 = 1 << 4;
    /// Source-synchronous (NV-DDR) interface.
    pub const SYNCHRONOUS: u16 = 1 << 5;
    /// Multi-plane (interleaved) read.
    pub const MULTI_PLANE_READ: u16 = 1 << 6;
    /// Extended parameter page.
    pub const EXTENDED_PARAM_PAGE: u16 = 1 << 7;
}

/// Optional-command bits (bytes 8-9).
pub mod optional_commands {
    /// PAGE CACHE PROGRAM (15h).
    pub const PAGE_CACHE_PROGRAM: u16 = 1 << 0;
    /// READ CACHE (31h, 3Fh).
    pub const READ_CACHE: u16 = 1 << 1;
    /// GET and SET FEATURES (EEh, EFh).
    pub const GET_SET_FEATURES: u16 = 1 << 2;
    /// READ STATUS ENHANCED (78h).
    pub const READ_STATUS_ENHANCED: u16 = 1 << 3;
    /// COPYBACK.
    pub const COPYBACK: u16 = 1 << 4;
    /// READ UNIQUE ID (EDh).
    pub const READ_UNIQUE_ID: u16 = 1 << 5;
    /// CHANGE READ COLUMN ENHANCED (06h-E0h).
    pub const CHANGE_READ_COLUMN_ENHANCED: u16 = 1 << 6;
}

/// Multi-plane attribute bits (byte 114).
pub mod multi_plane_attributes {
    /// Overlapped (rather than concurrent) multi-plane operations.
    pub const OVERLAPPED: u8 = 1 << 0;
    /// No block address restrictions: the blocks of a multi-plane operation need not share their
    /// block-in-plane index.
    pub const NO_BLOCK_RESTRICTIONS: u8 = 1 << 1;
    /// Program cache supported in multi-plane operations.
    pub const PROGRAM_CACHE: u8 = 1 << 2;
}

/// The fields of an ONFI parameter page this crate uses; everything else encodes as zero.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct ParamPage {
    /// Supported ONFI versions, one bit each (bytes 4-5; bit 1 = 1.0 ... bit 9 = 4.0).
    pub revision: u16,
    /// Feature bits (bytes 6-7, see [`features`]).
    pub features: u16,
    /// Optional commands (bytes 8-9, see [`optional_commands`]).
    pub optional_commands: u16,
    /// Manufacturer, ASCII padded with spaces (bytes 32-43).
    pub manufacturer: [u8; 12],
    /// Device model, ASCII padded with spaces (bytes 44-63).
    pub model: [u8; 20],
    /// JEDEC manufacturer ID (byte 64).
    pub jedec_id: u8,
    /// Data bytes per page (bytes 80-83).
    pub data_bytes_per_page: u32,
    /// Spare bytes per page (bytes 84-85).
    pub spare_bytes_per_page: u16,
    /// Data bytes per partial page (bytes 86-89).
    pub data_bytes_per_partial_page: u32,
    /// Spare bytes per partial page (bytes 90-91).
    pub spare_bytes_per_partial_page: u16,
    /// Pages per block (bytes 92-95).
    pub pages_per_block: u32,
    /// Blocks per LUN (bytes 96-99).
    pub blocks_per_lun: u32,
    /// LUNs per chip enable (byte 100).
    pub lun_count: u8,
    /// Address cycles: column in bits 7-4, row in bits 3-0 (byte 101).
    pub address_cycles: u8,
    /// Bits per cell (byte 102).
    pub bits_per_cell: u8,
    /// Most bad blocks per LUN (bytes 103-104).
    pub max_bad_blocks_per_lun: u16,
    /// Block endurance mantissa (byte 105): cycles = mantissa * 10^exponent.
    pub endurance_mantissa: u8,
    /// Block endurance exponent (byte 106).
    pub endurance_exponent: u8,
    /// Blocks at the start of the device guaranteed good (byte 107).
    pub guaranteed_good_blocks: u8,
    /// Programs per page, NOP (byte 110).
    pub programs_per_page: u8,
    /// Correctable bits per 512 bytes required; 0xFF: see the extended page (byte 112).
    pub ecc_bits: u8,
    /// Plane (interleaved) address bits, low nibble (byte 113).
    pub plane_address_bits: u8,
    /// Multi-plane attributes (byte 114, see [`multi_plane_attributes`]).
    pub multi_plane_attributes: u8,
    /// Supported asynchronous timing modes, one bit each (bytes 129-130).
    pub async_timing_modes: u16,
    /// Most time a page program takes, microseconds (bytes 133-134).
    pub t_prog_us: u16,
    /// Most time a block erase takes, microseconds (bytes 135-136).
    pub t_bers_us: u16,
    /// Most time a page read takes, microseconds (bytes 137-138).
    pub t_r_us: u16,
    /// Change-column setup time, nanoseconds (bytes 139-140).
    pub t_ccs_ns: u16,
}

fn le16(b: &[u8; PARAM_PAGE_BYTES], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}

fn le32(b: &[u8; PARAM_PAGE_BYTES], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// Bits needed to number `n` things (0 for one thing).
pub(crate) const fn bits_for(n: u32) -> u32 {
    if n <= 1 {
        0
    } else {
        32 - (n - 1).leading_zeros()
    }
}

/// `s` padded with spaces (or cut) to `N` bytes.
const fn padded<const N: usize>(s: &[u8]) -> [u8; N] {
    let mut out = [b' '; N];
    let mut i = 0;
    while i < N && i < s.len() {
        out[i] = s[i];
        i += 1;
    }
    out
}

impl ParamPage {
    /// The page of a Micron MT29F4G08ABADA (4 Gbit, x8, 2048 + 64 bytes, 64 pages per block,
    /// 4096 blocks in 2 planes, NOP 4, 4 bits of ECC per 512 bytes, 100,000 cycles, timing modes
    /// 0-5, 3 row and 2 column address cycles, multi-plane program and erase, READ STATUS
    /// ENHANCED). Its geometry is [`Geometry::MT29F4G08`].
    pub const MT29F4G08ABADA: ParamPage = ParamPage {
        revision: 1 << 1,
        features: features::MULTI_PLANE_PROGRAM_ERASE | features::ODD_TO_EVEN_COPYBACK,
        optional_commands: 0x003F,
        manufacturer: padded(b"MICRON"),
        model: padded(b"MT29F4G08ABADAWP"),
        jedec_id: 0x2C,
        data_bytes_per_page: 2048,
        spare_bytes_per_page: 64,
        data_bytes_per_partial_page: 512,
        spare_bytes_per_partial_page: 16,
        pages_per_block: 64,
        blocks_per_lun: 4096,
        lun_count: 1,
        address_cycles: 0x23,
        bits_per_cell: 1,
        max_bad_blocks_per_lun: 80,
        endurance_mantissa: 1,
        endurance_exponent: 5,
        guaranteed_good_blocks: 1,
        programs_per_page: 4,
        ecc_bits: 4,
        plane_address_bits: 1,
        multi_plane_attributes: 0x0E,
        async_timing_modes: 0x003F,
        t_prog_us: 600,
        t_bers_us: 3000,
        t_r_us: 25,
        t_ccs_ns: 100,
    };

    /// A page describing `g` in the style of [`Self::MT29F4G08ABADA`]: ONFI 2.0, 2 column and
    /// 3 row address cycles (4 if the rows need more than 24 bits), copy-back with odd-to-even
    /// pages, multi-plane program, erase
    /// and read with CHANGE READ COLUMN ENHANCED when `g` has more than one plane, non-sequential
    /// programming when `g` allows it. `g.ecc.bits` is taken as per 512 bytes. The block
    /// endurance is rounded down to two significant decimal digits when it has more. Fails when
    /// `g` cannot be described (fields too large for the page, planes not a power of two).
    pub fn for_geometry(g: &Geometry) -> Result<ParamPage, ParamError> {
        if g.validate().is_err() {
            return Err(ParamError::Geometry("geometry is not addressable"));
        }
        if !g.planes_per_lun.is_power_of_two() {
            return Err(ParamError::Geometry("planes per LUN is not a power of two"));
        }
        let spare = u16::try_from(g.spare_bytes).map_err(|_| ParamError::Geometry("spare bytes"))?;
        let luns = u8::try_from(g.luns).map_err(|_| ParamError::Geometry("LUN count"))?;
        let blocks_per_lun = g.blocks_per_lun();
        let row_bits = bits_for(g.pages_per_block) + bits_for(blocks_per_lun) + bits_for(g.luns);
        let row_cycles = if row_bits <= 24 { 3 } else { 4 };
        if row_bits > 32 {
            return Err(ParamError::AddressCycles);
        }
        let col_cycles = if g.raw_page_bytes() <= 1 << 16 { 2 } else { 3 };
        let (mut mantissa, mut exponent) = (g.endurance, 0u8);
        while mantissa > 255 {
            mantissa /= 10;
            exponent += 1;
        }
        let multi = g.planes_per_lun > 1;
        let mut feats = features::ODD_TO_EVEN_COPYBACK;
        let mut opt = optional_commands::GET_SET_FEATURES
            | optional_commands::READ_STATUS_ENHANCED
            | optional_commands::COPYBACK;
        if multi {
            feats |= features::MULTI_PLANE_PROGRAM_ERASE | features::MULTI_PLANE_READ;
            opt |= optional_commands::CHANGE_READ_COLUMN_ENHANCED;
        }
        if !g.sequential_program {
            feats |= features::NON_SEQUENTIAL_PROGRAM;
        }
        if luns > 1 {
            feats |= features::MULTI_LUN;
        }
        Ok(ParamPage {
            revision: (1 << 1) | (1 << 2),
            features: feats,
            optional_commands: opt,
            manufacturer: padded(b"ONFI-MODEL"),
            model: padded(b"SLC-NAND"),
            jedec_id: 0x2C,
            data_bytes_per_page: g.data_bytes,
            spare_bytes_per_page: spare,
            data_bytes_per_partial_page: g.data_bytes.min(512),
            spare_bytes_per_partial_page: spare.min(16),
            pages_per_block: g.pages_per_block,
            blocks_per_lun,
            lun_count: luns,
            address_cycles: (col_cycles << 4) | row_cycles,
            bits_per_cell: 1,
            max_bad_blocks_per_lun: (blocks_per_lun / 50).min(u16::MAX as u32) as u16,
            endurance_mantissa: mantissa as u8,
            endurance_exponent: exponent,
            guaranteed_good_blocks: 1,
            programs_per_page: g.nop,
            ecc_bits: g.ecc.bits,
            plane_address_bits: bits_for(g.planes_per_lun) as u8,
            multi_plane_attributes: multi_plane_attributes::NO_BLOCK_RESTRICTIONS,
            async_timing_modes: 0x003F,
            t_prog_us: 600,
            t_bers_us: 3000,
            t_r_us: 25,
            t_ccs_ns: 100,
        })
    }

    /// Parses the fields (the CRC and the signature are not checked here; see [`select_copy`]
    /// and [`Self::check`]).
    pub fn parse(b: &[u8; PARAM_PAGE_BYTES]) -> ParamPage {
        let mut manufacturer = [0u8; 12];
        manufacturer.copy_from_slice(&b[32..44]);
        let mut model = [0u8; 20];
        model.copy_from_slice(&b[44..64]);
        ParamPage {
            revision: le16(b, 4),
            features: le16(b, 6),
            optional_commands: le16(b, 8),
            manufacturer,
            model,
            jedec_id: b[64],
            data_bytes_per_page: le32(b, 80),
            spare_bytes_per_page: le16(b, 84),
            data_bytes_per_partial_page: le32(b, 86),
            spare_bytes_per_partial_page: le16(b, 90),
            pages_per_block: le32(b, 92),
            blocks_per_lun: le32(b, 96),
            lun_count: b[100],
            address_cycles: b[101],
            bits_per_cell: b[102],
            max_bad_blocks_per_lun: le16(b, 103),
            endurance_mantissa: b[105],
            endurance_exponent: b[106],
            guaranteed_good_blocks: b[107],
            programs_per_page: b[110],
            ecc_bits: b[112],
            plane_address_bits: b[113] & 0x0F,
            multi_plane_attributes: b[114],
            async_timing_modes: le16(b, 129),
            t_prog_us: le16(b, 133),
            t_bers_us: le16(b, 135),
            t_r_us: le16(b, 137),
            t_ccs_ns: le16(b, 139),
        }
    }

    /// The 256 bytes of this page: signature, fields, zeros elsewhere, CRC.
    pub fn to_bytes(&self) -> [u8; PARAM_PAGE_BYTES] {
        let mut b = [0u8; PARAM_PAGE_BYTES];
        let mut put = |at: usize, bytes: &[u8]| b[at..at + bytes.len()].copy_from_slice(bytes);
        put(0, &ONFI_SIGNATURE);
        put(4, &self.revision.to_le_bytes());
        put(6, &self.features.to_le_bytes());
        put(8, &self.optional_commands.to_le_bytes());
        put(14, &[1]); // parameter pages beyond the required three: none
        put(32, &self.manufacturer);
        put(44, &self.model);
        put(64, &[self.jedec_id]);
        put(80, &self.data_bytes_per_page.to_le_bytes());
        put(84, &self.spare_bytes_per_page.to_le_bytes());
        put(86, &self.data_bytes_per_partial_page.to_le_bytes());
        put(90, &self.spare_bytes_per_partial_page.to_le_bytes());
        put(92, &self.pages_per_block.to_le_bytes());
        put(96, &self.blocks_per_lun.to_le_bytes());
        put(100, &[self.lun_count, self.address_cycles, self.bits_per_cell]);
        put(103, &self.max_bad_blocks_per_lun.to_le_bytes());
        put(105, &[self.endurance_mantissa, self.endurance_exponent]);
        put(107, &[self.guaranteed_good_blocks]);
        put(110, &[self.programs_per_page]);
        put(112, &[self.ecc_bits, self.plane_address_bits, self.multi_plane_attributes]);
        put(128, &[10]); // I/O pin capacitance, pF
        put(129, &self.async_timing_modes.to_le_bytes());
        put(131, &self.async_timing_modes.to_le_bytes()); // program cache timing modes
        put(133, &self.t_prog_us.to_le_bytes());
        put(135, &self.t_bers_us.to_le_bytes());
        put(137, &self.t_r_us.to_le_bytes());
        put(139, &self.t_ccs_ns.to_le_bytes());
        put(164, &1u16.to_le_bytes()); // vendor revision
        seal(&mut b);
        b
    }

    /// The highest ONFI version the revision field names, as (major, minor).
    pub fn onfi_version(&self) -> Option<(u8, u8)> {
        const VERSIONS: [(u8, u8); 9] =
            [(1, 0), (2, 0), (2, 1), (2, 2), (2, 3), (3, 0), (3, 1), (3, 2), (4, 0)];
        (0..VERSIONS.len()).rev().find(|&i| self.revision & (1 << (i + 1)) != 0).map(|i| VERSIONS[i])
    }

    /// The fastest asynchronous timing mode supported (0 to 5; mode 0 is always supported).
    pub fn timing_mode(&self) -> u8 {
        (0..6u8).rev().find(|&m| self.async_timing_modes & (1 << m) != 0).unwrap_or(0)
    }

    /// Rated program/erase cycles per block, saturating at `u32::MAX`.
    pub fn endurance(&self) -> u32 {
        let mut v = self.endurance_mantissa as u32;
        for _ in 0..self.endurance_exponent {
            v = v.saturating_mul(10);
        }
        v
    }

    /// Whether multi-plane program and erase are advertised.
    pub fn multi_plane_program_erase(&self) -> bool {
        self.features & features::MULTI_PLANE_PROGRAM_ERASE != 0 && self.plane_address_bits > 0
    }

    /// Whether multi-plane read is usable: advertised, together with CHANGE READ COLUMN
    /// ENHANCED to select the plane whose register is read out.
    pub fn multi_plane_read(&self) -> bool {
        self.features & features::MULTI_PLANE_READ != 0
            && self.optional_commands & optional_commands::CHANGE_READ_COLUMN_ENHANCED != 0
            && self.plane_address_bits > 0
    }

    /// Whether copy-back (READ / PROGRAM FOR INTERNAL DATA MOVE, 00h-35h and 85h-10h) is
    /// advertised.
    pub fn copy_back(&self) -> bool {
        self.optional_commands & optional_commands::COPYBACK != 0
    }

    /// Whether copy-back may go from an odd to an even page (and back); when not, source and
    /// destination must both be odd or both even.
    pub fn odd_to_even_copy_back(&self) -> bool {
        self.features & features::ODD_TO_EVEN_COPYBACK != 0
    }

    /// Whether READ STATUS ENHANCED (78h) is advertised.
    pub fn read_status_enhanced(&self) -> bool {
        self.optional_commands & optional_commands::READ_STATUS_ENHANCED != 0
    }

    /// Whether blocks of one multi-plane operation must share their block-in-plane index.
    pub fn multi_plane_block_restricted(&self) -> bool {
        self.multi_plane_attributes & multi_plane_attributes::NO_BLOCK_RESTRICTIONS == 0
    }

    /// Planes per LUN: `2^plane_address_bits` when multi-plane operations are advertised, else
    /// one (the driver then treats the LUN as a single plane).
    pub fn planes_per_lun(&self) -> u32 {
        if self.features & (features::MULTI_PLANE_PROGRAM_ERASE | features::MULTI_PLANE_READ) != 0 {
            1u32.checked_shl(self.plane_address_bits as u32).unwrap_or(0)
        } else {
            1
        }
    }

    /// Checks that this is an ONFI page the driver can use: the raw signature, a known revision,
    /// an 8-bit bus and an ECC requirement in this page.
    pub fn check(&self, raw: &[u8; PARAM_PAGE_BYTES]) -> Result<(), ParamError> {
        if raw[..4] != ONFI_SIGNATURE {
            return Err(ParamError::Signature);
        }
        if self.onfi_version().is_none() {
            return Err(ParamError::Revision);
        }
        if self.features & features::BUS_16 != 0 {
            return Err(ParamError::BusWidth16);
        }
        if self.ecc_bits == 0xFF {
            return Err(ParamError::EccInExtendedPage);
        }
        Ok(())
    }

    /// The device shape. Needs positive sizes and NOP, a spare area (the bad-block marker lives
    /// there), planes dividing the blocks of a LUN and at most [`MAX_PLANES`] of them.
    pub fn geometry(&self) -> Result<Geometry, ParamError> {
        if self.spare_bytes_per_page == 0 {
            return Err(ParamError::Geometry("no spare area"));
        }
        if self.programs_per_page == 0 {
            return Err(ParamError::Geometry("zero programs per page"));
        }
        let planes = self.planes_per_lun();
        if planes == 0 || planes as usize > MAX_PLANES {
            return Err(ParamError::Geometry("planes per LUN"));
        }
        if !self.blocks_per_lun.is_multiple_of(planes) {
            return Err(ParamError::Geometry("blocks per LUN not a multiple of the planes"));
        }
        let g = Geometry {
            data_bytes: self.data_bytes_per_page,
            spare_bytes: self.spare_bytes_per_page as u32,
            pages_per_block: self.pages_per_block,
            blocks_per_plane: self.blocks_per_lun / planes,
            planes_per_lun: planes,
            luns: self.lun_count as u32,
            nop: self.programs_per_page,
            sequential_program: self.features & features::NON_SEQUENTIAL_PROGRAM == 0,
            ecc: EccRequirement { bits: self.ecc_bits, codeword_bytes: 512 },
            endurance: self.endurance(),
        };
        if g.validate().is_err() {
            return Err(ParamError::Geometry("not addressable"));
        }
        Ok(g)
    }
}

/// How addresses are sent: the cycle counts of byte 101 and the widths of the row fields.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct AddressLayout {
    column_cycles: u8,
    row_cycles: u8,
    page_bits: u8,
    block_bits: u8,
    lun_bits: u8,
    pages_per_block: u32,
    blocks_per_lun: u32,
    luns: u32,
}

/// Most address cycles of one column-and-row address.
pub const MAX_ADDRESS_CYCLES: usize = 8;

impl AddressLayout {
    /// The layout of `p` (whose [`ParamPage::geometry`] is `g`). Fails when a cycle count is
    /// zero or above 4, or when the columns of a raw page or the row fields do not fit.
    pub fn new(p: &ParamPage, g: &Geometry) -> Result<AddressLayout, ParamError> {
        let (col, row) = (p.address_cycles >> 4, p.address_cycles & 0x0F);
        if !(1..=4).contains(&col) || !(1..=4).contains(&row) {
            return Err(ParamError::AddressCycles);
        }
        let page_bits = bits_for(g.pages_per_block);
        let block_bits = bits_for(g.blocks_per_lun());
        let lun_bits = bits_for(g.luns);
        let col_bits = bits_for(g.raw_page_bytes());
        if col_bits > 8 * col as u32 || page_bits + block_bits + lun_bits > 8 * row as u32 {
            return Err(ParamError::AddressCycles);
        }
        Ok(AddressLayout {
            column_cycles: col,
            row_cycles: row,
            page_bits: page_bits as u8,
            block_bits: block_bits as u8,
            lun_bits: lun_bits as u8,
            pages_per_block: g.pages_per_block,
            blocks_per_lun: g.blocks_per_lun(),
            luns: g.luns,
        })
    }

    /// Column address cycles (1 to 4).
    pub fn column_cycles(&self) -> u8 {
        self.column_cycles
    }

    /// Row address cycles (1 to 4).
    pub fn row_cycles(&self) -> u8 {
        self.row_cycles
    }

    /// Row bits of the page-in-block field.
    pub fn page_bits(&self) -> u8 {
        self.page_bits
    }

    /// Row bits of the block-in-LUN field (the plane is its low-order bits).
    pub fn block_bits(&self) -> u8 {
        self.block_bits
    }

    /// Row bits of the LUN field.
    pub fn lun_bits(&self) -> u8 {
        self.lun_bits
    }

    /// The row address of a device-wide page.
    pub fn page_row(&self, page: PageId) -> u32 {
        let block = page.0 / self.pages_per_block;
        let lun = (block / self.blocks_per_lun) as u64;
        let in_lun = (block % self.blocks_per_lun) as u64;
        let in_block = (page.0 % self.pages_per_block) as u64;
        let row = (lun << (self.block_bits + self.page_bits)) | (in_lun << self.page_bits) | in_block;
        row as u32
    }

    /// The row address of a block's first page.
    pub fn block_row(&self, block: BlockId) -> u32 {
        self.page_row(PageId(block.0.wrapping_mul(self.pages_per_block)))
    }

    /// Splits a row address into (LUN, block in LUN, page in block), `None` when a field is
    /// outside the shape.
    pub fn decode_row(&self, row: u32) -> Option<(u32, u32, u32)> {
        let row = row as u64;
        let page = (row & ((1u64 << self.page_bits) - 1)) as u32;
        let block = ((row >> self.page_bits) & ((1u64 << self.block_bits) - 1)) as u32;
        let lun = (row >> (self.page_bits + self.block_bits)) as u32;
        if page >= self.pages_per_block || block >= self.blocks_per_lun || lun >= self.luns {
            return None;
        }
        Some((lun, block, page))
    }

    /// Writes the column then the row cycles (each little-endian) into `out`; returns how many.
    pub fn encode(&self, column: u32, row: u32, out: &mut [u8; MAX_ADDRESS_CYCLES]) -> usize {
        let c = self.column_cycles as usize;
        let r = self.row_cycles as usize;
        out[..c].copy_from_slice(&column.to_le_bytes()[..c]);
        out[c..c + r].copy_from_slice(&row.to_le_bytes()[..r]);
        c + r
    }

    /// Writes the column cycles into `out`; returns how many.
    pub fn encode_column(&self, column: u32, out: &mut [u8; MAX_ADDRESS_CYCLES]) -> usize {
        let c = self.column_cycles as usize;
        out[..c].copy_from_slice(&column.to_le_bytes()[..c]);
        c
    }

    /// Writes the row cycles into `out`; returns how many.
    pub fn encode_row(&self, row: u32, out: &mut [u8; MAX_ADDRESS_CYCLES]) -> usize {
        let r = self.row_cycles as usize;
        out[..r].copy_from_slice(&row.to_le_bytes()[..r]);
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc_check_value() {
        assert_eq!(onfi_crc16(b"123456789"), 0x2771);
        assert_eq!(onfi_crc16(b"123456789"), ONFI_CRC16.check);
        // Synthetic page of the design notes: "ONFI" then zeros.
        let mut p = [0u8; PARAM_PAGE_BYTES];
        p[..4].copy_from_slice(b"ONFI");
        seal(&mut p);
        assert_eq!(&p[254..], &[0x17, 0x69]);
        assert!(crc_matches(&p));
        // Notes' table: 0xFF and 0x00 runs of 4096 bytes.
        assert_eq!(onfi_crc16(&[0xFF; 4096]), 0x9E9A);
        assert_eq!(onfi_crc16(&[0x00; 4096]), 0x9E9C);
    }

    /// The bit-serial definition of the notes, to cross-check the crate's algorithm.
    fn crc_by_hand(bytes: &[u8]) -> u16 {
        let mut crc: u16 = 0x4F4E;
        for &b in bytes {
            crc ^= (b as u16) << 8;
            for _ in 0..8 {
                crc = (crc << 1) ^ if crc & 0x8000 != 0 { 0x8005 } else { 0 };
            }
        }
        crc
    }

    #[test]
    fn crc_matches_the_linux_definition() {
        let page = ParamPage::MT29F4G08ABADA.to_bytes();
        assert_eq!(onfi_crc16(&page[..254]), crc_by_hand(&page[..254]));
        assert_eq!(onfi_crc16(b""), crc_by_hand(b""));
    }

    #[test]
    fn mt29f4g08_page_round_trips_and_gives_its_geometry() {
        let raw = ParamPage::MT29F4G08ABADA.to_bytes();
        assert!(crc_matches(&raw));
        let p = ParamPage::parse(&raw);
        assert_eq!(p, ParamPage::MT29F4G08ABADA);
        assert_eq!(p.check(&raw), Ok(()));
        assert_eq!(p.geometry(), Ok(Geometry::MT29F4G08));
        assert_eq!(p.onfi_version(), Some((1, 0)));
        assert_eq!(p.timing_mode(), 5);
        assert!(p.multi_plane_program_erase());
        assert!(!p.multi_plane_read());
        let l = AddressLayout::new(&p, &Geometry::MT29F4G08).unwrap();
        assert_eq!((l.column_cycles(), l.row_cycles()), (2, 3));
        assert_eq!((l.page_bits(), l.block_bits(), l.lun_bits()), (6, 12, 0));
        let page = PageId(4095 * 64 + 63);
        assert_eq!(l.page_row(page), 0x3FFFF);
        assert_eq!(l.decode_row(0x3FFFF), Some((0, 4095, 63)));
        assert_eq!(l.decode_row(0x40000), None);
        let mut out = [0u8; MAX_ADDRESS_CYCLES];
        let n = l.encode(2048, l.page_row(PageId(65)), &mut out);
        assert_eq!(&out[..n], &[0x00, 0x08, 0x41, 0x00, 0x00]);
    }

    #[test]
    fn for_geometry_describes_the_geometry() {
        let g = Geometry {
            data_bytes: 512,
            spare_bytes: 16,
            pages_per_block: 8,
            blocks_per_plane: 16,
            planes_per_lun: 2,
            luns: 2,
            nop: 2,
            sequential_program: false,
            ecc: EccRequirement { bits: 8, codeword_bytes: 512 },
            endurance: 3000,
        };
        let p = ParamPage::for_geometry(&g).unwrap();
        let raw = p.to_bytes();
        assert_eq!(ParamPage::parse(&raw), p);
        assert_eq!(p.check(&raw), Ok(()));
        assert_eq!(p.geometry(), Ok(g));
        assert!(p.multi_plane_read() && p.multi_plane_program_erase() && p.read_status_enhanced());
        let l = AddressLayout::new(&p, &g).unwrap();
        let last = PageId(g.total_pages() - 1);
        assert_eq!(l.decode_row(l.page_row(last)), Some((1, 31, 7)));
        assert_eq!(l.decode_row(l.block_row(BlockId(33))), Some((1, 1, 0)));
    }

    #[test]
    fn majority_vote_and_copy_selection() {
        let good = ParamPage::MT29F4G08ABADA.to_bytes();
        let mut copies = [good; 3];
        assert_eq!(select_copy(&copies), Ok((good, ParamSource::Copy(0))));
        copies[0][80] ^= 1;
        assert_eq!(select_copy(&copies), Ok((good, ParamSource::Copy(1))));
        copies[1][100] ^= 0x10;
        copies[2][200] ^= 0x80;
        assert_eq!(select_copy(&copies), Ok((good, ParamSource::MajorityVote)));
        copies[1][80] ^= 1; // the same bit now wrong in two copies
        assert_eq!(select_copy(&copies), Err(ParamError::Crc));
        assert_eq!(select_copy(&[]), Err(ParamError::Crc));
    }

    #[test]
    fn strict_checks() {
        let mut p = ParamPage::MT29F4G08ABADA;
        let raw = p.to_bytes();
        let mut bad_sig = raw;
        bad_sig[0] = b'X';
        assert_eq!(p.check(&bad_sig), Err(ParamError::Signature));
        p.revision = 0;
        assert_eq!(p.check(&raw), Err(ParamError::Revision));
        p = ParamPage::MT29F4G08ABADA;
        p.features |= features::BUS_16;
        assert_eq!(p.check(&raw), Err(ParamError::BusWidth16));
        p = ParamPage::MT29F4G08ABADA;
        p.ecc_bits = 0xFF;
        assert_eq!(p.check(&raw), Err(ParamError::EccInExtendedPage));
        p = ParamPage::MT29F4G08ABADA;
        p.address_cycles = 0x22; // 18 row bits do not fit 2 row cycles
        let g = p.geometry().unwrap();
        assert_eq!(AddressLayout::new(&p, &g), Err(ParamError::AddressCycles));
        p.address_cycles = 0x03;
        assert_eq!(AddressLayout::new(&p, &g), Err(ParamError::AddressCycles));
        p = ParamPage::MT29F4G08ABADA;
        p.plane_address_bits = 3;
        assert_eq!(p.geometry(), Err(ParamError::Geometry("planes per LUN")));
        p = ParamPage::MT29F4G08ABADA;
        p.programs_per_page = 0;
        assert!(p.geometry().is_err());
        p = ParamPage::MT29F4G08ABADA;
        p.endurance_exponent = 40;
        assert_eq!(p.endurance(), u32::MAX);
    }
}
