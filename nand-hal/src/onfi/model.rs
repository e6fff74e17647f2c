//! [`OnfiChipModel`]: a cycle-level ONFI target in caller-provided memory, behind [`OnfiBus`].
//!
//! It answers the command sequences the driver issues, cycle by cycle: RESET, READ ID (00h and
//! 20h), READ PARAMETER PAGE (three copies, repeated), PAGE READ (00h-30h, multi-plane 00h-32h),
//! CHANGE READ COLUMN (05h-E0h) and its enhanced form (06h-E0h), PAGE PROGRAM (80h-10h,
//! multi-plane 80h-11h), CHANGE WRITE COLUMN (85h), copy-back (READ FOR INTERNAL DATA MOVE
//! 00h-35h, then PROGRAM FOR INTERNAL DATA MOVE 85h with the destination's column and row,
//! optional data input and 85h column changes, 10h), BLOCK ERASE (60h-D0h, multi-plane 60h-D1h),
//! READ STATUS (70h), READ STATUS ENHANCED (78h), GET and SET FEATURES (EEh, EFh: timing mode
//! 01h and Micron's array operation mode 90h, whose on-die ECC bit makes programs write the
//! chip's own parity into the spare, [`ModelConfig::on_die_ecc`]). After READ STATUS, 00h without address cycles
//! returns to the data output that was in progress. Commands the parameter page does not
//! advertise are refused.
//!
//! Its parameter page is a real one ([`ModelConfig::param`], e.g.
//! [`ParamPage::MT29F4G08ABADA`] or [`ParamPage::for_geometry`]); the geometry and address
//! cycles come from that page exactly as the driver derives them.
//!
//! Chip rules, as the `sim-host` emulator enforces them:
//! - erased bytes read 0xFF; a program ANDs the page register into the array (80h fills the
//!   register with 0xFF first, so bytes not supplied are left as they are);
//! - each program of a page counts against NOP until its block is erased; with in-order
//!   programming (page feature bit 2 clear), programming a page below the highest programmed
//!   page of its block is refused (skipping forward and reprogramming the highest page are
//!   allowed); with [`ModelConfig::reject_set_bits`], a program turning a 0 bit into 1 is refused.
//!   A refused program changes nothing and is reported as a bus error at the confirm cycle
//!   ([`ModelError::NopExceeded`], [`ModelError::ProgramOrder`], [`ModelError::SetBits`], with the
//!   matching [`ErrorKind`]): a real chip would not notice, the model is also a rule checker;
//! - a block can be factory bad ([`OnfiChipModel::mark_factory_bad`]): spare byte 0 of its first
//!   and second page is 00h and its programs and erases report status FAIL without effect;
//! - multi-plane operations take distinct planes of one LUN at one page offset (and one
//!   block-in-plane index when the page restricts block addresses);
//! - copy-back programs the register a 35h read filled (read noise included: nothing corrects
//!   it), with whatever data input changed in it; the destination must be in the source's
//!   plane and LUN and, unless the page advertises odd-to-even copy-back, of the same page
//!   parity (a [`ModelError::Protocol`] otherwise); 85h with a full address is only accepted
//!   after a 35h read whose register no other array operation has replaced since, and one
//!   copy-back program consumes it. Multi-plane copy-back is not modelled.
//!
//! Protocol rules (a driver bug becomes a [`ModelError::Protocol`] bus error, and the sequence in
//! progress is abandoned): only READ STATUS (ENHANCED) and RESET while busy; data output only
//! when something is to be output and, except status, not while busy; data input only after
//! 80h and its address; exact address cycle counts; no column beyond the raw page.
//!
//! Time is virtual: an array operation makes the target busy for its [`ModelTiming`] duration,
//! and only [`OnfiBus::delay_us`] and [`OnfiBus::wait_ready`] advance time. With
//! [`ModelConfig::ready_line`] off the bus reports no R/B# line and the driver polls status.
//!
//! Fault hooks ([`ModelFaults`] and methods): parameter-page copies can be corrupted
//! ([`OnfiChipModel::param_copy_mut`]), READ ID at 20h can answer another signature, the target
//! can hang busy (timeouts), programs and erases can report FAIL (the next ones, or always on a
//! block; a failed program sets only the bits at even byte offsets, a failed erase erases only
//! the even pages of the block), and WP# can be held low.
//!
//! Memory: the array, per-page program counts, per-block state and the plane page registers live
//! in one caller-provided byte store `S` (a `&mut [u8]`, a `[u8; N]`, a `Vec<u8>`...), sized by
//! [`OnfiChipModel::storage_bytes`]; the model itself allocates nothing.

use super::bus::{OnfiBus, ReadyLine, Wait};
use super::param_page::{
    AddressLayout, ParamError, ParamPage, MAX_ADDRESS_CYCLES, ONFI_SIGNATURE, PARAM_PAGE_BYTES,
    PARAM_PAGE_COPIES,
};
use super::{cmd, status};
use crate::{BlockId, ErrorKind, Geometry, PageId, MAX_PLANES};

/// Busy times of the model, microseconds (virtual time).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct ModelTiming {
    /// PAGE READ and READ PARAMETER PAGE.
    pub t_r_us: u32,
    /// PAGE PROGRAM.
    pub t_prog_us: u32,
    /// BLOCK ERASE.
    pub t_bers_us: u32,
    /// RESET.
    pub t_rst_us: u32,
    /// The short busy after a multi-plane second cycle (32h, 11h, D1h).
    pub t_dbsy_us: u32,
}

impl ModelTiming {
    /// Typical MT29F4G08ABADA times: tR 25 us, tPROG 200 us, tBERS 700 us, tRST 5 us,
    /// tDBSY 1 us.
    pub const MT29F4G08: ModelTiming =
        ModelTiming { t_r_us: 25, t_prog_us: 200, t_bers_us: 700, t_rst_us: 5, t_dbsy_us: 1 };
}

/// What the model is.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct ModelConfig {
    /// The parameter page it serves (three identical copies); its shape is the model's shape.
    pub param: ParamPage,
    /// READ ID at 00h.
    pub id: [u8; 5],
    /// Busy times.
    pub timing: ModelTiming,
    /// Whether the bus has an R/B# line; without it the driver polls READ STATUS.
    pub ready_line: bool,
    /// Whether a program turning a 0 bit into 1 is refused (strict check for WOM codes).
    pub reject_set_bits: bool,
    /// Whether the part powers up with its on-die ECC on (Micron feature 90h, bit 3). While it
    /// is on, every program writes the chip's own parity over bytes 8..16 of each 16-byte
    /// quarter of the spare (the MT29F4G08ABADA's internal-ECC layout), whatever the host
    /// supplied there.
    pub on_die_ecc: bool,
}

use super::feature::{
    ARRAY_MODE as FEATURE_ARRAY_MODE, ECC_ON as FEATURE_ECC_ON, TIMING_MODE as FEATURE_TIMING_MODE,
};

/// Busy time of GET and SET FEATURES (tFEAT, 1 us).
const T_FEAT_US: u32 = 1;

/// What the chip's own ECC does to the page register at program time, in the model: a parity
/// byte pattern over bytes 8..16 of each 16-byte quarter of the spare (the host's bytes there are
/// lost, which is the hazard the driver's feature check removes).
fn on_die_parity(page: &mut [u8], data_bytes: usize) {
    let spare_len = page.len().saturating_sub(data_bytes);
    let quarters = spare_len / 16;
    let sector = data_bytes / quarters.max(1);
    for q in 0..quarters {
        let sum = page[q * sector..(q + 1) * sector].iter().fold(0u8, |a, &b| a.rotate_left(1) ^ b);
        for (i, b) in page[data_bytes + q * 16 + 8..data_bytes + q * 16 + 16].iter_mut().enumerate() {
            *b = sum.wrapping_add(i as u8);
        }
    }
}

/// READ ID bytes of the MT29F4G08ABADA.
pub const MT29F4G08ABADA_ID: [u8; 5] = [0x2C, 0xDC, 0x90, 0x95, 0x56];

impl ModelConfig {
    /// The MT29F4G08ABADA: its parameter page and ID, typical times, R/B# connected. Its
    /// storage is over 500 MiB; [`Self::for_geometry`] makes smaller parts.
    pub fn mt29f4g08abada() -> Self {
        ModelConfig {
            param: ParamPage::MT29F4G08ABADA,
            id: MT29F4G08ABADA_ID,
            timing: ModelTiming::MT29F4G08,
            ready_line: true,
            reject_set_bits: false,
            on_die_ecc: false,
        }
    }

    /// A part of geometry `g` ([`ParamPage::for_geometry`]), MT29F4G08ABADA ID and times, R/B#
    /// connected.
    pub fn for_geometry(g: &Geometry) -> Result<Self, ModelError> {
        Ok(ModelConfig {
            param: ParamPage::for_geometry(g).map_err(ModelError::Param)?,
            ..ModelConfig::mt29f4g08abada()
        })
    }
}

/// Injected faults; change them through [`OnfiChipModel::faults_mut`].
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct ModelFaults {
    /// READ ID at 20h answers these bytes instead of "ONFI".
    pub signature: Option<[u8; 4]>,
    /// While set, the target never leaves busy (the busy time in progress, or the next one,
    /// stops counting down).
    pub stuck_busy: bool,
    /// The next this many page programs report FAIL (one per plane of a multi-plane program).
    pub fail_next_programs: u32,
    /// The next this many block erases report FAIL (one per plane of a multi-plane erase).
    pub fail_next_erases: u32,
    /// WP# held low: programs and erases are ignored and status bit 7 reads 0.
    pub write_protect: bool,
    /// Read noise: each page read (into the page register; the array keeps its bits) flips this
    /// many bits in every ECC codeword span of the data area (`ecc.codeword_bytes`, 512 if 0)
    /// and, when non-zero, one bit of the spare outside its first two bytes (the bad-block
    /// marks). Positions come from a xorshift PRNG seeded by [`ModelFaults::noise_seed`].
    pub read_bit_errors: u8,
    /// State of the read-noise PRNG (any non-zero value; 0 is replaced by 1).
    pub noise_seed: u32,
    /// SET FEATURES is accepted (cycles, busy time) but changes nothing, as on a part that
    /// ignores a feature: the driver's read-back must notice.
    pub ignore_set_features: bool,
}

/// Operation counters.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct ModelCounters {
    /// Command cycles.
    pub commands: u64,
    /// Address cycles.
    pub address_cycles: u64,
    /// Data input bytes.
    pub bytes_in: u64,
    /// Data output bytes.
    pub bytes_out: u64,
    /// Pages read into a register (parameter page reads included).
    pub page_reads: u64,
    /// Pages programmed, failed ones included.
    pub page_programs: u64,
    /// Blocks erased, failed ones included.
    pub block_erases: u64,
    /// Multi-plane operations (two or more planes).
    pub multi_plane_ops: u64,
    /// Copy-back programs (each also counted in `page_reads` and `page_programs`).
    pub copy_backs: u64,
    /// Programs that reported FAIL.
    pub program_failures: u64,
    /// Erases that reported FAIL.
    pub erase_failures: u64,
}

/// An error of the chip model (as a bus error, or at construction).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum ModelError {
    /// The cycles broke the ONFI protocol ([`ErrorKind::Other`]).
    Protocol(&'static str),
    /// A row address outside the shape ([`ErrorKind::OutOfRange`]).
    AddressOutOfRange,
    /// The page was already programmed NOP times since its block was erased
    /// ([`ErrorKind::NopExceeded`]). Nothing was changed.
    NopExceeded(PageId),
    /// In-order programming is required and a higher page of the block is programmed
    /// ([`ErrorKind::ProgramOrder`]). Nothing was changed.
    ProgramOrder {
        /// The page that was to be programmed.
        page: PageId,
        /// Index (within the block) of the highest page programmed so far.
        highest: u32,
    },
    /// `reject_set_bits` is on and the program would turn a 0 bit into 1
    /// ([`ErrorKind::ProgramFailed`]). Nothing was changed.
    SetBits(PageId),
    /// The configured parameter page is unusable ([`ErrorKind::Other`]).
    Param(ParamError),
    /// The store is smaller than [`OnfiChipModel::storage_bytes`] ([`ErrorKind::Other`]).
    StorageTooSmall {
        /// Bytes needed.
        needed: usize,
        /// Bytes given.
        got: usize,
    },
    /// A configuration the model cannot honour ([`ErrorKind::Other`]).
    Config(&'static str),
}

impl crate::Error for ModelError {
    fn kind(&self) -> ErrorKind {
        match self {
            ModelError::AddressOutOfRange => ErrorKind::OutOfRange,
            ModelError::NopExceeded(_) => ErrorKind::NopExceeded,
            ModelError::ProgramOrder { .. } => ErrorKind::ProgramOrder,
            ModelError::SetBits(_) => ErrorKind::ProgramFailed,
            ModelError::Protocol(_)
            | ModelError::Param(_)
            | ModelError::StorageTooSmall { .. }
            | ModelError::Config(_) => ErrorKind::Other,
        }
    }
}

impl core::fmt::Display for ModelError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            ModelError::Protocol(what) => write!(f, "ONFI protocol violation: {what}"),
            ModelError::AddressOutOfRange => f.write_str("row address out of range"),
            ModelError::NopExceeded(p) => write!(f, "page {} programmed more than NOP times", p.0),
            ModelError::ProgramOrder { page, highest } => {
                write!(f, "page {} programmed after page {highest} of its block", page.0)
            }
            ModelError::SetBits(p) => write!(f, "program of page {} would set bits", p.0),
            ModelError::Param(e) => write!(f, "parameter page: {e}"),
            ModelError::StorageTooSmall { needed, got } => {
                write!(f, "storage of {got} bytes, {needed} needed")
            }
            ModelError::Config(what) => write!(f, "model configuration: {what}"),
        }
    }
}

impl core::error::Error for ModelError {}

/// Offsets in the store.
#[derive(Copy, Clone, Debug)]
struct Layout {
    /// Raw page bytes (data + spare).
    raw: usize,
    /// Start of the per-page program counts (the array starts at 0).
    nop_off: usize,
    /// Start of the per-block state, [`META_BYTES`] each.
    meta_off: usize,
    /// Start of the plane page registers.
    reg_off: usize,
    total: usize,
}

/// Per-block state: highest programmed page + 1 (u16 LE), flags, reserved.
const META_BYTES: usize = 4;
const FLAG_FACTORY_BAD: u8 = 1 << 0;
const FLAG_FAIL_PROGRAM: u8 = 1 << 1;
const FLAG_FAIL_ERASE: u8 = 1 << 2;

/// Where the command sequence is.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum State {
    Idle,
    /// 90h: one address cycle.
    ReadId,
    /// ECh: one address cycle.
    ParamAddr,
    /// 00h: column and row, then 30h or 32h (or, with no cycles, data output to resume).
    ReadAddr,
    /// After 32h: the next plane's 00h.
    ReadQueued,
    /// 05h: column, then E0h.
    ColAddr,
    /// 06h: column and row, then E0h.
    ColEnhAddr,
    /// 80h: column and row.
    ProgAddr,
    /// Data input, 85h, 10h or 11h.
    ProgData,
    /// 85h: column.
    ProgCol,
    /// 85h after a 35h read: the destination's column and row.
    CopyBackAddr,
    /// After 11h: the next plane's 80h.
    ProgQueued,
    /// 60h: row, then D0h or D1h.
    EraseAddr,
    /// After D1h: the next plane's 60h.
    EraseQueued,
    /// 78h: row.
    StatusEnhAddr,
    /// EFh: one address cycle.
    SetFeatAddr,
    /// EFh: four parameter bytes.
    SetFeatData,
    /// EEh: one address cycle.
    GetFeatAddr,
}

/// What data output returns.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Output {
    None,
    Id { bytes: [u8; 5], len: u8, pos: u8 },
    Param(usize),
    Feature { bytes: [u8; 4], pos: u8 },
    Register { plane: usize, col: usize },
    Status,
    StatusEnhanced { fail: bool },
}

/// A cycle-level ONFI target over the byte store `S` (see the module documentation).
pub struct OnfiChipModel<S> {
    store: S,
    config: ModelConfig,
    geo: Geometry,
    addr: AddressLayout,
    lay: Layout,
    copies: [[u8; PARAM_PAGE_BYTES]; PARAM_PAGE_COPIES],
    faults: ModelFaults,
    counters: ModelCounters,
    time_us: u64,
    busy_us: u32,
    state: State,
    /// The address cycles of the sequence in progress, `ncycles` of them so far. Kept as a
    /// plain register rather than a `heapless::Vec`: it is read by position (column bytes, row
    /// bytes) once complete, and the fixed array keeps those reads in bounds whatever arrives.
    cycles: [u8; MAX_ADDRESS_CYCLES],
    ncycles: usize,
    output: Output,
    saved: Output,
    resume: bool,
    /// Status FAIL of the last program or erase, and per plane (of `fail_lun`) for 78h.
    fail: bool,
    plane_fail: [bool; MAX_PLANES],
    fail_lun: u32,
    /// The row each plane register was last loaded from by a read.
    reg_row: [Option<u32>; MAX_PLANES],
    /// Data input: plane register, column, row of the current 80h.
    prog_plane: usize,
    prog_col: usize,
    cur_row: u32,
    /// The source row of a 35h read whose register still holds it, for a copy-back program.
    copy_src: Option<u32>,
    /// Whether the program in progress is a copy-back program.
    copy_program: bool,
    /// Rows queued by 32h, 11h or D1h (fewer than the planes of a LUN).
    queue: heapless::Vec<u32, MAX_PLANES>,
    /// Feature parameters: timing mode (01h) and array operation mode (90h), P1..P4.
    feat_timing: [u8; 4],
    feat_array: [u8; 4],
    /// SET FEATURES in progress: its address and the bytes received.
    feat_addr: u8,
    /// A plain array (P1..P4, `feat_n` received), not a `heapless::Vec`: it is copied whole
    /// into the feature registers.
    feat_data: [u8; 4],
    feat_n: usize,
}

impl<S> core::fmt::Debug for OnfiChipModel<S> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("OnfiChipModel")
            .field("config", &self.config)
            .field("faults", &self.faults)
            .field("counters", &self.counters)
            .field("time_us", &self.time_us)
            .field("busy_us", &self.busy_us)
            .finish_non_exhaustive()
    }
}

fn layout(config: &ModelConfig) -> Result<(Geometry, AddressLayout, Layout), ModelError> {
    let p = &config.param;
    let raw_page = p.to_bytes();
    p.check(&raw_page).map_err(ModelError::Param)?;
    let geo = p.geometry().map_err(ModelError::Param)?;
    let addr = AddressLayout::new(p, &geo).map_err(ModelError::Param)?;
    if geo.pages_per_block > u16::MAX as u32 {
        return Err(ModelError::Config("more than 65535 pages per block"));
    }
    let too_big = ModelError::Config("storage size overflows usize");
    let raw = geo.raw_page_bytes() as usize;
    let pages = geo.total_pages() as usize;
    let blocks = geo.total_blocks() as usize;
    let planes = geo.planes_per_lun as usize;
    let nop_off = pages.checked_mul(raw).ok_or(too_big)?;
    let meta_off = nop_off.checked_add(pages).ok_or(too_big)?;
    let reg_off = blocks.checked_mul(META_BYTES).and_then(|m| m.checked_add(meta_off)).ok_or(too_big)?;
    let total = planes.checked_mul(raw).and_then(|r| r.checked_add(reg_off)).ok_or(too_big)?;
    Ok((geo, addr, Layout { raw, nop_off, meta_off, reg_off, total }))
}

impl<S: AsRef<[u8]> + AsMut<[u8]>> OnfiChipModel<S> {
    /// Bytes of store a model of `config` needs.
    pub fn storage_bytes(config: &ModelConfig) -> Result<usize, ModelError> {
        layout(config).map(|(_, _, l)| l.total)
    }

    /// A freshly erased part in `store` (which must hold [`Self::storage_bytes`]; more is left
    /// unused), ready, with no faults.
    pub fn new(config: ModelConfig, mut store: S) -> Result<Self, ModelError> {
        let (geo, addr, lay) = layout(&config)?;
        let mem = store.as_mut();
        if mem.len() < lay.total {
            return Err(ModelError::StorageTooSmall { needed: lay.total, got: mem.len() });
        }
        mem[..lay.nop_off].fill(0xFF);
        mem[lay.nop_off..lay.reg_off].fill(0);
        mem[lay.reg_off..lay.total].fill(0xFF);
        let page = config.param.to_bytes();
        Ok(OnfiChipModel {
            store,
            config,
            geo,
            addr,
            lay,
            copies: [page; PARAM_PAGE_COPIES],
            faults: ModelFaults::default(),
            counters: ModelCounters::default(),
            time_us: 0,
            busy_us: 0,
            state: State::Idle,
            cycles: [0; MAX_ADDRESS_CYCLES],
            ncycles: 0,
            output: Output::None,
            saved: Output::None,
            resume: false,
            fail: false,
            plane_fail: [false; MAX_PLANES],
            fail_lun: 0,
            reg_row: [None; MAX_PLANES],
            prog_plane: 0,
            prog_col: 0,
            cur_row: 0,
            copy_src: None,
            copy_program: false,
            queue: heapless::Vec::new(),
            feat_timing: [0; 4],
            feat_array: [if config.on_die_ecc { FEATURE_ECC_ON } else { 0 }, 0, 0, 0],
            feat_addr: 0,
            feat_data: [0; 4],
            feat_n: 0,
        })
    }

    /// The configuration.
    pub fn config(&self) -> &ModelConfig {
        &self.config
    }

    /// The shape, as the parameter page describes it.
    pub fn geometry(&self) -> Geometry {
        self.geo
    }

    /// The injected faults.
    pub fn faults(&self) -> &ModelFaults {
        &self.faults
    }

    /// The injected faults, to change.
    pub fn faults_mut(&mut self) -> &mut ModelFaults {
        &mut self.faults
    }

    /// Copy `i` (0-based, below [`PARAM_PAGE_COPIES`]) of the parameter page as served, to
    /// corrupt.
    pub fn param_copy_mut(&mut self, i: usize) -> Option<&mut [u8; PARAM_PAGE_BYTES]> {
        self.copies.get_mut(i)
    }

    /// Operation counters.
    pub fn counters(&self) -> &ModelCounters {
        &self.counters
    }

    /// Zeroes the counters.
    pub fn reset_counters(&mut self) {
        self.counters = ModelCounters::default();
    }

    /// Virtual time elapsed, microseconds.
    pub fn elapsed_us(&self) -> u64 {
        self.time_us
    }

    /// Whether the target is busy now.
    pub fn is_busy(&self) -> bool {
        self.busy_us > 0
    }

    /// The store back.
    pub fn into_storage(self) -> S {
        self.store
    }

    /// The data and spare areas of `page`, without a bus cycle.
    pub fn page(&self, page: PageId) -> Option<(&[u8], &[u8])> {
        if !self.geo.contains_page(page) {
            return None;
        }
        let start = page.0 as usize * self.lay.raw;
        let raw = self.store.as_ref().get(start..start + self.lay.raw)?;
        Some(raw.split_at(self.geo.data_bytes as usize))
    }

    /// Programs of `page` since its block was erased.
    pub fn program_count(&self, page: PageId) -> Option<u8> {
        if !self.geo.contains_page(page) {
            return None;
        }
        self.store.as_ref().get(self.lay.nop_off + page.0 as usize).copied()
    }

    /// Makes `block` factory bad: marker 00h in spare byte 0 of its first and second page, and
    /// every program or erase of it reports FAIL without effect.
    pub fn mark_factory_bad(&mut self, block: BlockId) -> Result<(), ModelError> {
        self.set_flag(block, FLAG_FACTORY_BAD, true)?;
        let (lay, geo) = (self.lay, self.geo);
        let mem = self.mem()?;
        for i in 0..geo.pages_per_block.min(2) {
            let p = geo.page(block, i).0 as usize;
            mem[p * lay.raw + geo.data_bytes as usize] = 0x00;
        }
        Ok(())
    }

    /// Makes every program (`fail_program`) and every erase (`fail_erase`) of `block` report
    /// FAIL, or stops doing so.
    pub fn set_block_faults(
        &mut self,
        block: BlockId,
        fail_program: bool,
        fail_erase: bool,
    ) -> Result<(), ModelError> {
        self.set_flag(block, FLAG_FAIL_PROGRAM, fail_program)?;
        self.set_flag(block, FLAG_FAIL_ERASE, fail_erase)
    }

    // ---- store access ----

    /// The store, checked to be as large as the layout (so indexing inside it cannot fail).
    fn mem(&mut self) -> Result<&mut [u8], ModelError> {
        let total = self.lay.total;
        let mem = self.store.as_mut();
        if mem.len() < total {
            return Err(ModelError::Config("store shrank"));
        }
        Ok(mem)
    }

    fn set_flag(&mut self, block: BlockId, flag: u8, on: bool) -> Result<(), ModelError> {
        if !self.geo.contains_block(block) {
            return Err(ModelError::AddressOutOfRange);
        }
        let at = self.lay.meta_off + block.0 as usize * META_BYTES + 2;
        let mem = self.mem()?;
        if on {
            mem[at] |= flag;
        } else {
            mem[at] &= !flag;
        }
        Ok(())
    }

    // ---- time ----

    fn advance(&mut self, us: u32) {
        self.time_us += us as u64;
        if !self.faults.stuck_busy {
            self.busy_us = self.busy_us.saturating_sub(us);
        }
    }

    fn go_busy(&mut self, us: u32) {
        self.busy_us = us.max(1);
    }

    fn status_byte(&self, fail: bool) -> u8 {
        let mut s = 0;
        if self.busy_us == 0 {
            s |= status::RDY | status::ARDY;
            if fail {
                s |= status::FAIL;
            }
        }
        if !self.faults.write_protect {
            s |= status::WP_N;
        }
        s
    }

    // ---- addresses ----

    fn expected_cycles(&self) -> Option<usize> {
        let (c, r) = (self.addr.column_cycles() as usize, self.addr.row_cycles() as usize);
        match self.state {
            State::ReadId | State::ParamAddr | State::SetFeatAddr | State::GetFeatAddr => Some(1),
            State::ReadAddr | State::ProgAddr | State::ColEnhAddr | State::CopyBackAddr => Some(c + r),
            State::ColAddr | State::ProgCol => Some(c),
            State::EraseAddr | State::StatusEnhAddr => Some(r),
            _ => None,
        }
    }

    fn address_complete(&self) -> bool {
        self.expected_cycles() == Some(self.ncycles)
    }

    fn column(&self) -> usize {
        let c = self.addr.column_cycles() as usize;
        let mut b = [0u8; 4];
        b[..c].copy_from_slice(&self.cycles[..c]);
        u32::from_le_bytes(b) as usize
    }

    /// The row of the collected cycles, after `skip` column cycles.
    fn row(&self, skip: usize) -> u32 {
        let r = self.addr.row_cycles() as usize;
        let mut b = [0u8; 4];
        b[..r].copy_from_slice(&self.cycles[skip..skip + r]);
        u32::from_le_bytes(b)
    }

    /// (LUN, block in LUN, page in block) of a row.
    fn decode(&self, row: u32) -> Result<(u32, u32, u32), ModelError> {
        self.addr.decode_row(row).ok_or(ModelError::AddressOutOfRange)
    }

    fn plane_of_row(&self, row: u32) -> Result<usize, ModelError> {
        let (_, block, _) = self.decode(row)?;
        Ok((block % self.geo.planes_per_lun) as usize)
    }

    /// Device-wide (block, page) of a row.
    fn page_of_row(&self, row: u32) -> Result<(u32, u32), ModelError> {
        let (lun, block, page) = self.decode(row)?;
        let b = lun * self.geo.blocks_per_lun() + block;
        Ok((b, b * self.geo.pages_per_block + page))
    }

    /// Multi-plane legality of the rows of one operation.
    fn check_set(&self, rows: &[u32], same_page: bool) -> Result<(), ModelError> {
        let mut seen = [false; MAX_PLANES];
        let mut first = None;
        for &row in rows {
            let (lun, block, page) = self.decode(row)?;
            let planes = self.geo.planes_per_lun;
            let (plane, index) = ((block % planes) as usize, block / planes);
            match first {
                None => first = Some((lun, page, index)),
                Some((l, p, i)) => {
                    if l != lun {
                        return Err(ModelError::Protocol("multi-plane operation across LUNs"));
                    }
                    if same_page && p != page {
                        return Err(ModelError::Protocol("multi-plane operation at different pages"));
                    }
                    if i != index && self.config.param.multi_plane_block_restricted() {
                        return Err(ModelError::Protocol("multi-plane block address restriction"));
                    }
                }
            }
            if seen[plane] {
                return Err(ModelError::Protocol("two operations on one plane"));
            }
            seen[plane] = true;
        }
        Ok(())
    }

    fn enqueue(&mut self, row: u32) -> Result<(), ModelError> {
        const TOO_MANY: ModelError = ModelError::Protocol("more multi-plane operations than planes");
        if self.queue.len() + 1 >= self.geo.planes_per_lun as usize {
            return Err(TOO_MANY);
        }
        self.queue.push(row).map_err(|_| TOO_MANY)
    }

    /// The queued rows and `row`.
    fn set_with(&self, row: u32) -> Result<heapless::Vec<u32, MAX_PLANES>, ModelError> {
        let mut rows = self.queue.clone();
        rows.push(row).map_err(|_| ModelError::Protocol("more multi-plane operations than planes"))?;
        Ok(rows)
    }

    // ---- block state ----

    fn flags(mem: &[u8], lay: &Layout, block: u32) -> u8 {
        mem[lay.meta_off + block as usize * META_BYTES + 2]
    }

    fn highest(mem: &[u8], lay: &Layout, block: u32) -> u32 {
        let at = lay.meta_off + block as usize * META_BYTES;
        u16::from_le_bytes([mem[at], mem[at + 1]]) as u32
    }

    fn set_highest(mem: &mut [u8], lay: &Layout, block: u32, v: u32) {
        let at = lay.meta_off + block as usize * META_BYTES;
        mem[at..at + 2].copy_from_slice(&(v as u16).to_le_bytes());
    }

    // ---- operations ----

    fn reset(&mut self) {
        self.state = State::Idle;
        self.ncycles = 0;
        self.queue.clear();
        self.output = Output::None;
        self.saved = Output::None;
        self.resume = false;
        self.fail = false;
        self.plane_fail = [false; MAX_PLANES];
        self.reg_row = [None; MAX_PLANES];
        self.copy_src = None;
        self.copy_program = false;
        self.go_busy(self.config.timing.t_rst_us);
    }

    fn exec_read(&mut self, multi: bool) -> Result<(), ModelError> {
        self.copy_src = None;
        let col = self.column();
        let row = self.row(self.addr.column_cycles() as usize);
        self.decode(row)?;
        if col > self.lay.raw {
            return Err(ModelError::Protocol("column beyond the page"));
        }
        if multi {
            if !self.config.param.multi_plane_read() {
                return Err(ModelError::Protocol("multi-plane read not advertised"));
            }
            let rows = self.set_with(row)?;
            let n = rows.len();
            self.check_set(&rows[..n], true)?;
            self.enqueue(row)?;
            self.state = State::ReadQueued;
            self.output = Output::None;
            self.go_busy(self.config.timing.t_dbsy_us);
            return Ok(());
        }
        let rows = self.set_with(row)?;
        let n = rows.len();
        self.check_set(&rows[..n], true)?;
        let lay = self.lay;
        for &r in &rows[..n] {
            let plane = self.plane_of_row(r)?;
            let (_, page) = self.page_of_row(r)?;
            let mem = self.mem()?;
            let src = page as usize * lay.raw;
            let dst = lay.reg_off + plane * lay.raw;
            mem.copy_within(src..src + lay.raw, dst);
            self.reg_row[plane] = Some(r);
            self.add_read_noise(dst)?;
        }
        self.counters.page_reads += n as u64;
        self.counters.multi_plane_ops += u64::from(n > 1);
        self.queue.clear();
        self.state = State::Idle;
        self.fail = false;
        self.output = Output::Register { plane: self.plane_of_row(row)?, col };
        self.go_busy(self.config.timing.t_r_us);
        Ok(())
    }

    /// NOP, order and set-bit rules for a program of `page` from plane register `plane`.
    fn check_program(&mut self, page: u32, block: u32, plane: usize) -> Result<(), ModelError> {
        let (lay, geo, reject) = (self.lay, self.geo, self.config.reject_set_bits);
        let mem = self.mem()?;
        if Self::flags(mem, &lay, block) & FLAG_FACTORY_BAD != 0 {
            return Ok(());
        }
        if mem[lay.nop_off + page as usize] >= geo.nop {
            return Err(ModelError::NopExceeded(PageId(page)));
        }
        let highest = Self::highest(mem, &lay, block);
        if geo.sequential_program && page % geo.pages_per_block + 1 < highest {
            return Err(ModelError::ProgramOrder { page: PageId(page), highest: highest - 1 });
        }
        if reject {
            let (array, regs) = mem.split_at(lay.reg_off);
            let old = &array[page as usize * lay.raw..][..lay.raw];
            let new = &regs[plane * lay.raw..][..lay.raw];
            if old.iter().zip(new).any(|(o, n)| !o & n != 0) {
                return Err(ModelError::SetBits(PageId(page)));
            }
        }
        Ok(())
    }

    fn exec_program(&mut self, multi: bool) -> Result<(), ModelError> {
        let copy = core::mem::take(&mut self.copy_program);
        if copy {
            self.copy_src = None;
            self.need(!multi, "multi-plane copy-back is not modelled")?;
            self.counters.copy_backs += 1;
        }
        let row = self.cur_row;
        let rows = self.set_with(row)?;
        let n = rows.len();
        self.check_set(&rows[..n], true)?;
        if multi {
            if !self.config.param.multi_plane_program_erase() {
                return Err(ModelError::Protocol("multi-plane program not advertised"));
            }
            self.enqueue(row)?;
            self.state = State::ProgQueued;
            self.go_busy(self.config.timing.t_dbsy_us);
            return Ok(());
        }
        self.queue.clear();
        self.state = State::Idle;
        self.output = Output::None;
        if self.faults.write_protect {
            self.fail = false;
            self.go_busy(self.config.timing.t_dbsy_us);
            return Ok(());
        }
        for &r in &rows[..n] {
            let (block, page) = self.page_of_row(r)?;
            self.check_program(page, block, self.plane_of_row(r)?)?;
        }
        self.go_busy(self.config.timing.t_prog_us);
        let (lay, geo) = (self.lay, self.geo);
        let ecc_on = self.feat_array[0] & FEATURE_ECC_ON != 0;
        self.fail = false;
        self.plane_fail = [false; MAX_PLANES];
        self.fail_lun = self.decode(row)?.0;
        for &r in &rows[..n] {
            let plane = self.plane_of_row(r)?;
            let (block, page) = self.page_of_row(r)?;
            let take = self.faults.fail_next_programs > 0;
            if take {
                self.faults.fail_next_programs -= 1;
            }
            let mem = self.mem()?;
            let flags = Self::flags(mem, &lay, block);
            let failed = take || flags & (FLAG_FACTORY_BAD | FLAG_FAIL_PROGRAM) != 0;
            if flags & FLAG_FACTORY_BAD == 0 {
                let (array, regs) = mem.split_at_mut(lay.reg_off);
                let dst = &mut array[page as usize * lay.raw..][..lay.raw];
                let src = &mut regs[plane * lay.raw..][..lay.raw];
                if ecc_on {
                    on_die_parity(src, geo.data_bytes as usize);
                }
                for (i, (d, s)) in dst.iter_mut().zip(src).enumerate() {
                    if !failed || i.is_multiple_of(2) {
                        *d &= *s;
                    }
                }
                let count = &mut mem[lay.nop_off + page as usize];
                *count = count.saturating_add(1);
                let next = page % geo.pages_per_block + 1;
                if Self::highest(mem, &lay, block) < next {
                    Self::set_highest(mem, &lay, block, next);
                }
            }
            self.plane_fail[plane] = failed;
            self.fail |= failed;
            self.counters.page_programs += 1;
            self.counters.program_failures += u64::from(failed);
        }
        self.counters.multi_plane_ops += u64::from(n > 1);
        Ok(())
    }

    fn exec_erase(&mut self, multi: bool) -> Result<(), ModelError> {
        self.copy_src = None;
        let row = self.row(0);
        let rows = self.set_with(row)?;
        let n = rows.len();
        self.check_set(&rows[..n], false)?;
        if multi {
            if !self.config.param.multi_plane_program_erase() {
                return Err(ModelError::Protocol("multi-plane erase not advertised"));
            }
            self.enqueue(row)?;
            self.state = State::EraseQueued;
            self.go_busy(self.config.timing.t_dbsy_us);
            return Ok(());
        }
        self.queue.clear();
        self.state = State::Idle;
        self.output = Output::None;
        if self.faults.write_protect {
            self.fail = false;
            self.go_busy(self.config.timing.t_dbsy_us);
            return Ok(());
        }
        self.go_busy(self.config.timing.t_bers_us);
        let (lay, geo) = (self.lay, self.geo);
        let ppb = geo.pages_per_block as usize;
        self.fail = false;
        self.plane_fail = [false; MAX_PLANES];
        self.fail_lun = self.decode(row)?.0;
        for &r in &rows[..n] {
            let plane = self.plane_of_row(r)?;
            let (block, _) = self.page_of_row(r)?;
            let take = self.faults.fail_next_erases > 0;
            if take {
                self.faults.fail_next_erases -= 1;
            }
            let mem = self.mem()?;
            let flags = Self::flags(mem, &lay, block);
            let failed = take || flags & (FLAG_FACTORY_BAD | FLAG_FAIL_ERASE) != 0;
            if flags & FLAG_FACTORY_BAD == 0 {
                let first = block as usize * ppb;
                for p in first..first + ppb {
                    if !failed || (p - first).is_multiple_of(2) {
                        mem[p * lay.raw..(p + 1) * lay.raw].fill(0xFF);
                    }
                }
                mem[lay.nop_off + first..lay.nop_off + first + ppb].fill(0);
                Self::set_highest(mem, &lay, block, 0);
            }
            self.plane_fail[plane] = failed;
            self.fail |= failed;
            self.counters.block_erases += 1;
            self.counters.erase_failures += u64::from(failed);
        }
        self.counters.multi_plane_ops += u64::from(n > 1);
        Ok(())
    }

    /// Whether a new command sequence may start (nothing half issued).
    fn idle(&self) -> bool {
        self.state == State::Idle
    }

    fn need(&self, ok: bool, what: &'static str) -> Result<(), ModelError> {
        if ok {
            Ok(())
        } else {
            Err(ModelError::Protocol(what))
        }
    }

    fn start(&mut self, state: State) {
        if matches!(self.state, State::Idle) {
            self.queue.clear();
        }
        self.state = state;
        self.ncycles = 0;
    }

    fn save_output(&mut self) {
        if !matches!(self.output, Output::Status | Output::StatusEnhanced { .. }) {
            self.saved = self.output;
        }
    }

    fn on_command(&mut self, c: u8) -> Result<(), ModelError> {
        if self.state == State::ReadAddr && self.ncycles == 0 && self.resume {
            // The 00h only returned the target to read mode; nothing was read out.
            self.output = self.saved;
            self.state = State::Idle;
        }
        let busy = self.busy_us > 0;
        if busy && !matches!(c, cmd::RESET | cmd::READ_STATUS | cmd::READ_STATUS_ENHANCED) {
            return Err(ModelError::Protocol("command while busy"));
        }
        let opt = self.config.param.optional_commands;
        match c {
            cmd::RESET => self.reset(),
            cmd::READ_STATUS => {
                self.need(
                    matches!(
                        self.state,
                        State::Idle | State::ReadQueued | State::ProgQueued | State::EraseQueued
                    ),
                    "READ STATUS inside a command sequence",
                )?;
                self.save_output();
                self.output = Output::Status;
            }
            cmd::READ_STATUS_ENHANCED => {
                self.need(self.config.param.read_status_enhanced(), "READ STATUS ENHANCED not advertised")?;
                self.need(self.idle(), "READ STATUS ENHANCED inside a command sequence")?;
                self.save_output();
                self.start(State::StatusEnhAddr);
            }
            cmd::READ_ID => {
                self.need(self.idle(), "READ ID inside a command sequence")?;
                self.start(State::ReadId);
            }
            cmd::SET_FEATURES | cmd::GET_FEATURES => {
                self.need(
                    opt & super::param_page::optional_commands::GET_SET_FEATURES != 0,
                    "GET/SET FEATURES not advertised",
                )?;
                self.need(self.idle(), "GET/SET FEATURES inside a command sequence")?;
                self.start(if c == cmd::SET_FEATURES { State::SetFeatAddr } else { State::GetFeatAddr });
            }
            cmd::READ_PARAMETER_PAGE => {
                self.need(self.idle(), "READ PARAMETER PAGE inside a command sequence")?;
                self.start(State::ParamAddr);
            }
            cmd::READ => {
                self.need(
                    matches!(self.state, State::Idle | State::ReadQueued),
                    "00h inside a command sequence",
                )?;
                self.resume = matches!(self.output, Output::Status) && self.state == State::Idle;
                self.start(State::ReadAddr);
            }
            cmd::READ_CONFIRM | cmd::READ_MULTI_PLANE => {
                self.need(
                    self.state == State::ReadAddr && self.address_complete(),
                    "30h without 00h and address",
                )?;
                self.exec_read(c == cmd::READ_MULTI_PLANE)?;
            }
            cmd::READ_INTERNAL_MOVE => {
                self.need(self.config.param.copy_back(), "copy-back not advertised")?;
                self.need(
                    self.state == State::ReadAddr && self.address_complete(),
                    "35h without 00h and address",
                )?;
                self.need(self.queue.is_empty(), "multi-plane copy-back is not modelled")?;
                self.exec_read(false)?;
                self.copy_src = Some(self.row(self.addr.column_cycles() as usize));
            }
            cmd::CHANGE_READ_COLUMN => {
                self.need(
                    self.idle() && matches!(self.saved_or_output(), Output::Register { .. }),
                    "05h without a page read",
                )?;
                self.start(State::ColAddr);
            }
            cmd::CHANGE_READ_COLUMN_ENHANCED => {
                self.need(
                    opt & super::param_page::optional_commands::CHANGE_READ_COLUMN_ENHANCED != 0,
                    "06h not advertised",
                )?;
                self.need(self.idle(), "06h inside a command sequence")?;
                self.start(State::ColEnhAddr);
            }
            cmd::CHANGE_READ_COLUMN_CONFIRM => self.exec_change_column()?,
            cmd::PROGRAM => {
                self.need(
                    matches!(self.state, State::Idle | State::ProgQueued),
                    "80h inside a command sequence",
                )?;
                self.start(State::ProgAddr);
            }
            cmd::CHANGE_WRITE_COLUMN if self.state == State::ProgData => {
                self.state = State::ProgCol;
                self.ncycles = 0;
            }
            cmd::PROGRAM_INTERNAL_MOVE => {
                self.need(
                    self.idle() && self.copy_src.is_some(),
                    "85h outside a program and without a copy-back read",
                )?;
                self.start(State::CopyBackAddr);
            }
            cmd::PROGRAM_CONFIRM | cmd::PROGRAM_MULTI_PLANE => {
                self.need(self.state == State::ProgData, "10h without 80h and address")?;
                self.exec_program(c == cmd::PROGRAM_MULTI_PLANE)?;
            }
            cmd::ERASE => {
                self.need(
                    matches!(self.state, State::Idle | State::EraseQueued),
                    "60h inside a command sequence",
                )?;
                self.start(State::EraseAddr);
            }
            cmd::ERASE_CONFIRM | cmd::ERASE_MULTI_PLANE => {
                self.need(
                    self.state == State::EraseAddr && self.address_complete(),
                    "D0h without 60h and row",
                )?;
                self.exec_erase(c == cmd::ERASE_MULTI_PLANE)?;
            }
            _ => return Err(ModelError::Protocol("command not implemented by the model")),
        }
        Ok(())
    }

    /// The output a 05h applies to: the one in progress, or the one READ STATUS interrupted.
    fn saved_or_output(&self) -> Output {
        match self.output {
            Output::Status | Output::StatusEnhanced { .. } => self.saved,
            o => o,
        }
    }

    fn exec_change_column(&mut self) -> Result<(), ModelError> {
        self.need(
            matches!(self.state, State::ColAddr | State::ColEnhAddr) && self.address_complete(),
            "E0h without 05h or 06h and address",
        )?;
        let col = self.column();
        if col > self.lay.raw {
            return Err(ModelError::Protocol("column beyond the page"));
        }
        let plane = if self.state == State::ColEnhAddr {
            let row = self.row(self.addr.column_cycles() as usize);
            let plane = self.plane_of_row(row)?;
            if self.reg_row[plane] != Some(row) {
                return Err(ModelError::Protocol("06h names a page its plane has not read"));
            }
            plane
        } else {
            match self.saved_or_output() {
                Output::Register { plane, .. } => plane,
                _ => return Err(ModelError::Protocol("05h without a page read")),
            }
        };
        self.output = Output::Register { plane, col };
        self.state = State::Idle;
        Ok(())
    }

    /// 85h's destination is complete: the rules of a copy-back pair, then data input (if any)
    /// goes into the register the 35h read filled.
    fn start_copy_back_program(&mut self) -> Result<(), ModelError> {
        let col = self.column();
        let dst = self.row(self.addr.column_cycles() as usize);
        let src = self.copy_src.ok_or(ModelError::Protocol("85h without a copy-back read"))?;
        let (src_lun, src_block, src_page) = self.decode(src)?;
        let (dst_lun, dst_block, dst_page) = self.decode(dst)?;
        let planes = self.geo.planes_per_lun;
        self.need(src_lun == dst_lun, "copy-back across LUNs")?;
        self.need(src_block % planes == dst_block % planes, "copy-back across planes")?;
        self.need(
            self.config.param.odd_to_even_copy_back() || (src_page ^ dst_page) & 1 == 0,
            "copy-back between odd and even pages not advertised",
        )?;
        self.need(col <= self.lay.raw, "column beyond the page")?;
        let plane = (dst_block % planes) as usize;
        self.reg_row[plane] = None;
        self.prog_plane = plane;
        self.prog_col = col;
        self.cur_row = dst;
        self.copy_program = true;
        self.state = State::ProgData;
        Ok(())
    }

    /// Flips the read-noise bits ([`ModelFaults::read_bit_errors`]) in the register at `reg`.
    fn add_read_noise(&mut self, reg: usize) -> Result<(), ModelError> {
        let k = self.faults.read_bit_errors as usize;
        if k == 0 {
            return Ok(());
        }
        let (data, spare) = (self.geo.data_bytes as usize, self.geo.spare_bytes as usize);
        let span = match self.geo.ecc.codeword_bytes as usize {
            0 => 512,
            n => n,
        };
        let mut x = self.faults.noise_seed.max(1);
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x
        };
        let mem = self.mem()?;
        let mut start = 0;
        while start < data {
            let len = span.min(data - start);
            // k distinct bits: k equal slices of the span, one bit in each.
            let slice = (8 * len / k).max(1);
            for j in 0..k.min(8 * len) {
                let bit = j * slice + next() as usize % slice;
                mem[reg + start + bit / 8] ^= 1 << (bit % 8);
            }
            start += len;
        }
        if spare > 2 {
            let bit = 16 + next() as usize % (8 * (spare - 2));
            mem[reg + data + bit / 8] ^= 1 << (bit % 8);
        }
        self.faults.noise_seed = next();
        Ok(())
    }

    fn on_address_complete(&mut self) -> Result<(), ModelError> {
        match self.state {
            State::ReadId => {
                let out = match self.cycles[0] {
                    0x00 => Output::Id { bytes: self.config.id, len: 5, pos: 0 },
                    0x20 => {
                        let s = self.faults.signature.unwrap_or(ONFI_SIGNATURE);
                        Output::Id { bytes: [s[0], s[1], s[2], s[3], 0], len: 4, pos: 0 }
                    }
                    _ => return Err(ModelError::Protocol("READ ID address other than 00h or 20h")),
                };
                self.output = out;
                self.state = State::Idle;
            }
            State::ParamAddr => {
                self.need(self.cycles[0] == 0, "READ PARAMETER PAGE address other than 00h")?;
                self.output = Output::Param(0);
                self.state = State::Idle;
                self.counters.page_reads += 1;
                self.go_busy(self.config.timing.t_r_us);
            }
            State::ProgAddr => {
                let col = self.column();
                let row = self.row(self.addr.column_cycles() as usize);
                let plane = self.plane_of_row(row)?;
                if col > self.lay.raw {
                    return Err(ModelError::Protocol("column beyond the page"));
                }
                let lay = self.lay;
                let mem = self.mem()?;
                mem[lay.reg_off + plane * lay.raw..][..lay.raw].fill(0xFF);
                self.reg_row[plane] = None;
                self.copy_src = None;
                self.copy_program = false;
                self.prog_plane = plane;
                self.prog_col = col;
                self.cur_row = row;
                self.state = State::ProgData;
            }
            State::CopyBackAddr => self.start_copy_back_program()?,
            State::ProgCol => {
                let col = self.column();
                if col > self.lay.raw {
                    return Err(ModelError::Protocol("column beyond the page"));
                }
                self.prog_col = col;
                self.state = State::ProgData;
            }
            State::SetFeatAddr => {
                self.feat_addr = self.cycles[0];
                self.feat_n = 0;
                self.state = State::SetFeatData;
            }
            State::GetFeatAddr => {
                let bytes = match self.cycles[0] {
                    FEATURE_TIMING_MODE => self.feat_timing,
                    FEATURE_ARRAY_MODE => self.feat_array,
                    _ => [0; 4],
                };
                self.output = Output::Feature { bytes, pos: 0 };
                self.state = State::Idle;
                self.go_busy(T_FEAT_US);
            }
            State::StatusEnhAddr => {
                let row = self.row(0);
                let (lun, block, _) = self.decode(row)?;
                let plane = (block % self.geo.planes_per_lun) as usize;
                self.output = Output::StatusEnhanced { fail: self.fail_lun == lun && self.plane_fail[plane] };
                self.state = State::Idle;
            }
            _ => {}
        }
        Ok(())
    }

    fn on_address(&mut self, cycles: &[u8]) -> Result<(), ModelError> {
        for &a in cycles {
            if self.busy_us > 0 && self.state != State::StatusEnhAddr {
                return Err(ModelError::Protocol("address cycle while busy"));
            }
            let expected =
                self.expected_cycles().ok_or(ModelError::Protocol("address cycle not expected"))?;
            if self.ncycles >= expected {
                return Err(ModelError::Protocol("too many address cycles"));
            }
            self.cycles[self.ncycles] = a;
            self.ncycles += 1;
            self.counters.address_cycles += 1;
            if self.ncycles == expected {
                self.on_address_complete()?;
            }
        }
        Ok(())
    }

    fn on_read_data(&mut self, buf: &mut [u8]) -> Result<(), ModelError> {
        if self.state == State::ReadAddr && self.ncycles == 0 && self.resume {
            self.output = self.saved;
            self.state = State::Idle;
        }
        match self.output {
            Output::Status => {
                let s = self.status_byte(self.fail);
                buf.fill(s);
                self.counters.bytes_out += buf.len() as u64;
                return Ok(());
            }
            Output::StatusEnhanced { fail } => {
                let s = self.status_byte(fail);
                buf.fill(s);
                self.counters.bytes_out += buf.len() as u64;
                return Ok(());
            }
            _ => {}
        }
        self.need(self.busy_us == 0, "data output while busy")?;
        self.need(self.idle(), "data output inside a command sequence")?;
        match &mut self.output {
            Output::None | Output::Status | Output::StatusEnhanced { .. } => {
                return Err(ModelError::Protocol("no data to output"));
            }
            Output::Id { bytes, len, pos } => {
                for b in buf.iter_mut() {
                    *b = if *pos < *len { bytes[*pos as usize] } else { 0 };
                    *pos = pos.saturating_add(1);
                }
            }
            Output::Feature { bytes, pos } => {
                for b in buf.iter_mut() {
                    *b = bytes.get(*pos as usize).copied().unwrap_or(0);
                    *pos = pos.saturating_add(1);
                }
            }
            Output::Param(pos) => {
                for b in buf.iter_mut() {
                    let copy = (*pos / PARAM_PAGE_BYTES) % PARAM_PAGE_COPIES;
                    *b = self.copies[copy][*pos % PARAM_PAGE_BYTES];
                    *pos += 1;
                }
            }
            Output::Register { plane, col } => {
                let (plane, start) = (*plane, *col);
                if start + buf.len() > self.lay.raw {
                    return Err(ModelError::Protocol("data output past the page end"));
                }
                *col += buf.len();
                let at = self.lay.reg_off + plane * self.lay.raw + start;
                let mem = self.mem()?;
                buf.copy_from_slice(&mem[at..at + buf.len()]);
            }
        }
        self.counters.bytes_out += buf.len() as u64;
        Ok(())
    }

    fn on_write_data(&mut self, data: &[u8]) -> Result<(), ModelError> {
        self.need(self.busy_us == 0, "data input while busy")?;
        if self.state == State::SetFeatData {
            for &b in data {
                self.need(self.feat_n < 4, "more than four SET FEATURES parameters")?;
                self.feat_data[self.feat_n] = b;
                self.feat_n += 1;
            }
            self.counters.bytes_in += data.len() as u64;
            if self.feat_n == 4 {
                if !self.faults.ignore_set_features {
                    match self.feat_addr {
                        FEATURE_TIMING_MODE => self.feat_timing = self.feat_data,
                        FEATURE_ARRAY_MODE => self.feat_array = self.feat_data,
                        _ => {}
                    }
                }
                self.state = State::Idle;
                self.output = Output::None;
                self.go_busy(T_FEAT_US);
            }
            return Ok(());
        }
        self.need(self.state == State::ProgData, "data input outside a program")?;
        let (start, lay) = (self.prog_col, self.lay);
        if start + data.len() > lay.raw {
            return Err(ModelError::Protocol("data input past the page end"));
        }
        let at = lay.reg_off + self.prog_plane * lay.raw + start;
        let mem = self.mem()?;
        mem[at..at + data.len()].copy_from_slice(data);
        self.prog_col += data.len();
        self.counters.bytes_in += data.len() as u64;
        Ok(())
    }

    /// A failed cycle abandons the sequence in progress.
    fn abandon<T>(&mut self, r: Result<T, ModelError>) -> Result<T, ModelError> {
        if r.is_err() {
            self.state = State::Idle;
            self.ncycles = 0;
            self.queue.clear();
            if core::mem::take(&mut self.copy_program) {
                // Data input may have changed the register: it no longer holds the source.
                self.copy_src = None;
            }
        }
        r
    }
}

impl<S: AsRef<[u8]> + AsMut<[u8]>> OnfiBus for OnfiChipModel<S> {
    type Error = ModelError;

    fn command(&mut self, c: u8) -> Result<(), ModelError> {
        self.counters.commands += 1;
        let r = self.on_command(c);
        self.abandon(r)
    }

    fn address(&mut self, cycles: &[u8]) -> Result<(), ModelError> {
        let r = self.on_address(cycles);
        self.abandon(r)
    }

    fn write_data(&mut self, data: &[u8]) -> Result<(), ModelError> {
        let r = self.on_write_data(data);
        self.abandon(r)
    }

    fn read_data(&mut self, buf: &mut [u8]) -> Result<(), ModelError> {
        let r = self.on_read_data(buf);
        self.abandon(r)
    }

    fn ready_line(&mut self) -> Result<ReadyLine, ModelError> {
        Ok(if !self.config.ready_line {
            ReadyLine::Absent
        } else if self.busy_us > 0 {
            ReadyLine::Busy
        } else {
            ReadyLine::Ready
        })
    }

    fn delay_us(&mut self, us: u32) {
        self.advance(us);
    }

    fn wait_ready(&mut self, timeout_us: u32) -> Result<Wait, ModelError> {
        if !self.config.ready_line {
            return Ok(Wait::NoReadyLine);
        }
        if self.busy_us == 0 {
            return Ok(Wait::Ready);
        }
        if self.faults.stuck_busy || self.busy_us > timeout_us {
            self.advance(timeout_us);
            return Ok(Wait::TimedOut);
        }
        self.advance(self.busy_us);
        Ok(Wait::Ready)
    }
}
