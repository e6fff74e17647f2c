//! [`OnfiNand`]: a strict ONFI driver over any [`OnfiBus`], implementing [`NandFlash`].
//!
//! Identification ([`OnfiNand::new`]): RESET (FFh); READ ID (90h) at 20h must answer "ONFI", and
//! at 00h gives the manufacturer and device bytes; READ PARAMETER PAGE (ECh) reads the copies one
//! after another until one has a matching CRC, else takes their bitwise majority (see
//! [`super::param_page`]); the page must then pass [`ParamPage::check`]. Geometry, NOP, program
//! order, ECC requirement, endurance, address cycles, timing mode, timeouts and multi-plane
//! capability all come from the page ([`ChipInfo`]). Then, on a part with GET/SET FEATURES: on a
//! Micron part the on-die ECC is switched off (feature 90h, P1 bit 3) and read back off, since
//! it would write its own parity into the spare over the FTL's metadata; the fastest timing mode
//! both the part and the bus support ([`super::timing::common_mode`]) is set (feature 01h) and
//! read back; the bus gets that mode's timings with the page's tCCS
//! ([`OnfiBus::set_timing`]). A feature that does not read back is [`OnfiError::Feature`].
//!
//! Operations, with addresses of `column_cycles` column and `row_cycles` row cycles (byte 101):
//! - read: 00h, address, 30h, wait tR, data output; the spare area after a shorter data buffer is
//!   reached with CHANGE READ COLUMN (05h, column, E0h); a spare-only read addresses the spare
//!   column directly.
//! - program: 80h, address, data input, CHANGE WRITE COLUMN (85h) to the spare area when needed,
//!   10h, wait tPROG, READ STATUS (70h): WP# low is [`OnfiError::WriteProtected`], FAIL is
//!   [`OnfiError::ProgramFailed`].
//! - erase: 60h, row, D0h, wait tBERS, 70h: FAIL is [`OnfiError::EraseFailed`].
//! - multi-plane, when the page advertises it and the operations qualify (distinct planes of one
//!   LUN, one page offset, and the same block-in-plane index if the part restricts block
//!   addresses): program 80h..11h per plane and 80h..10h for the last; erase 60h..D1h and
//!   60h..D0h; read 00h..32h and 00h..30h, then CHANGE READ COLUMN ENHANCED (06h, column, row,
//!   E0h) per plane. A FAIL is attributed to its operation with READ STATUS ENHANCED (78h) when
//!   the part has it, else to operation 0. Operations that break the contract's shape rules
//!   (more than the planes of a LUN, two LUNs, two on one plane, different page offsets) fail as
//!   a whole with [`OnfiError::MultiPlane`] before anything is issued; operations that qualify
//!   only for single-plane commands are issued one after another.
//! - copy-back, when the page advertises COPYBACK ([`ChipInfo::copy_back_caps`]): READ FOR
//!   INTERNAL DATA MOVE (00h, source address at column 0, or at the spare for a spare-only
//!   read-out, 35h, wait tR), data output of what [`CopyBackRead`] names (00h after READ
//!   STATUS), the caller's check, then PROGRAM FOR INTERNAL DATA MOVE (85h, destination
//!   address at column 0, or at the spare when only the spare is written back, data input of
//!   the buffers written back, 10h, wait tPROG, 70h). A pair in two planes or LUNs, or of
//!   different page parity on a part without odd-to-even copy-back, is refused with
//!   [`CopyBackError::Refused`] before any cycle; a part without COPYBACK gets the read +
//!   program fallback. A failure before 85h is [`CopyBackError::Read`], from 85h on
//!   [`CopyBackError::Program`].
//! - bad blocks: [`NandFlash::is_bad`] reads spare byte 0 of the first and second page of the
//!   block; [`NandFlash::mark_bad`] erases the block (as Linux does before writing a marker, so
//!   the marker programs respect NOP and page order), programs 00h there in both pages, and
//!   succeeds if the marker then reads back.
//! - every wait has a timeout derived from the page's maximum times ([`Timeouts`]); running out
//!   is [`OnfiError::Timeout`] and leaves the target as it is (call [`OnfiNand::reset`]). A wait
//!   first gives R/B# up to [`BUSY_EDGE_US`] to go low (it reads high for tWB after the command,
//!   longer if the write is still on its way), then waits for it high, then confirms with READ
//!   STATUS, polling while RDY is clear, and re-issues 00h before reading data: an R/B# sampled
//!   too early cannot make the driver read or command a busy target. On a bus without R/B# the
//!   driver polls READ STATUS every `poll_interval_us`.
//!
//! Address and buffer-length errors are found before any cycle is issued, as in the emulator.
//! Rule violations a checking bus reports (the chip model's NOP, order and set-bit checks) come
//! back as [`OnfiError::Bus`] with their own [`ErrorKind`].

use super::bus::{OnfiBus, ReadyLine, Wait};
use super::feature;
use super::param_page::optional_commands;
use super::param_page::{
    crc_matches, select_copy, AddressLayout, ParamError, ParamPage, ParamSource, MAX_ADDRESS_CYCLES,
    ONFI_SIGNATURE, PARAM_PAGE_BYTES, PARAM_PAGE_COPIES,
};
use super::timing::{common_mode, BusTiming};
use super::{cmd, status};
use crate::copy_back::{
    copy_back_fallback, CopyBackAction, CopyBackCaps, CopyBackError, CopyBackOp, CopyBackRead,
};
use crate::{BlockId, ErrorKind, ErrorType, Geometry, NandFlash, PageId, ProgramOp, ReadOp, MAX_PLANES};

/// An error of the ONFI driver over a bus with error type `E`.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum OnfiError<E> {
    /// The bus reported an error (its own kind).
    Bus(E),
    /// The target stayed busy past the timeout ([`ErrorKind::Timeout`]).
    Timeout,
    /// Status FAIL after a program ([`ErrorKind::ProgramFailed`]).
    ProgramFailed(PageId),
    /// Status FAIL after an erase ([`ErrorKind::EraseFailed`]).
    EraseFailed(BlockId),
    /// The bad-block marker did not read back after marking ([`ErrorKind::ProgramFailed`]).
    MarkFailed(BlockId),
    /// Status WP# low: the target is write protected ([`ErrorKind::Other`]).
    WriteProtected,
    /// READ ID at 20h did not answer "ONFI"; the bytes it gave ([`ErrorKind::Other`]).
    NotOnfi([u8; 4]),
    /// The parameter page is unusable ([`ErrorKind::Other`]).
    ParamPage(ParamError),
    /// The part does not advertise a command the call needs ([`ErrorKind::Other`]).
    Unsupported(&'static str),
    /// A page outside the geometry ([`ErrorKind::OutOfRange`]).
    PageOutOfRange(PageId),
    /// A block outside the geometry ([`ErrorKind::OutOfRange`]).
    BlockOutOfRange(BlockId),
    /// A data buffer longer than the data area ([`ErrorKind::BufferSize`]).
    DataTooLong {
        /// Length supplied.
        len: usize,
        /// Data bytes per page.
        max: u32,
    },
    /// A spare buffer longer than the spare area ([`ErrorKind::BufferSize`]).
    SpareTooLong {
        /// Length supplied.
        len: usize,
        /// Spare bytes per page.
        max: u32,
    },
    /// A multi-plane call that breaks the shape rules ([`ErrorKind::Other`]).
    MultiPlane(&'static str),
    /// A feature did not read back as set ([`ErrorKind::Other`]): on-die ECC that stays on, or a
    /// timing mode the part did not take.
    Feature {
        /// Feature address.
        addr: u8,
        /// P1 written.
        wrote: u8,
        /// P1 read back.
        read: u8,
    },
}

impl<E: crate::Error> crate::Error for OnfiError<E> {
    fn kind(&self) -> ErrorKind {
        match self {
            OnfiError::Bus(e) => e.kind(),
            OnfiError::Timeout => ErrorKind::Timeout,
            OnfiError::ProgramFailed(_) | OnfiError::MarkFailed(_) => ErrorKind::ProgramFailed,
            OnfiError::EraseFailed(_) => ErrorKind::EraseFailed,
            OnfiError::PageOutOfRange(_) | OnfiError::BlockOutOfRange(_) => ErrorKind::OutOfRange,
            OnfiError::DataTooLong { .. } | OnfiError::SpareTooLong { .. } => ErrorKind::BufferSize,
            OnfiError::WriteProtected
            | OnfiError::NotOnfi(_)
            | OnfiError::ParamPage(_)
            | OnfiError::Unsupported(_)
            | OnfiError::MultiPlane(_)
            | OnfiError::Feature { .. } => ErrorKind::Other,
        }
    }
}

impl<E: core::fmt::Debug> core::fmt::Display for OnfiError<E> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            OnfiError::Bus(e) => write!(f, "bus error: {e:?}"),
            OnfiError::Timeout => f.write_str("target did not become ready in time"),
            OnfiError::ProgramFailed(p) => write!(f, "program of page {} failed", p.0),
            OnfiError::EraseFailed(b) => write!(f, "erase of block {} failed", b.0),
            OnfiError::MarkFailed(b) => write!(f, "bad-block marker of block {} did not stick", b.0),
            OnfiError::WriteProtected => f.write_str("target is write protected"),
            OnfiError::NotOnfi(s) => write!(f, "no ONFI signature (read {s:02x?})"),
            OnfiError::ParamPage(e) => write!(f, "parameter page: {e}"),
            OnfiError::Unsupported(what) => write!(f, "not supported by the part: {what}"),
            OnfiError::PageOutOfRange(p) => write!(f, "page {} out of range", p.0),
            OnfiError::BlockOutOfRange(b) => write!(f, "block {} out of range", b.0),
            OnfiError::DataTooLong { len, max } => write!(f, "data buffer of {len} bytes, page has {max}"),
            OnfiError::SpareTooLong { len, max } => write!(f, "spare buffer of {len} bytes, page has {max}"),
            OnfiError::MultiPlane(why) => write!(f, "multi-plane rules: {why}"),
            OnfiError::Feature { addr, wrote, read } => {
                write!(f, "feature {addr:02x}h: wrote {wrote:02x}h, read back {read:02x}h")
            }
        }
    }
}

impl<E: core::fmt::Debug> core::error::Error for OnfiError<E> {}

impl<E> From<ParamError> for OnfiError<E> {
    fn from(e: ParamError) -> Self {
        OnfiError::ParamPage(e)
    }
}

/// Longest waits, in microseconds.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Timeouts {
    /// RESET (tRST; up to a millisecond when it interrupts an erase or follows power-on).
    pub reset_us: u32,
    /// PAGE READ and READ PARAMETER PAGE (tR), and the short busy after a multi-plane second
    /// cycle (tDBSY).
    pub read_us: u32,
    /// PAGE PROGRAM (tPROG).
    pub program_us: u32,
    /// BLOCK ERASE (tBERS).
    pub erase_us: u32,
}

impl Timeouts {
    /// Before the parameter page is known.
    pub const IDENTIFY: Timeouts =
        Timeouts { reset_us: 2_000, read_us: 1_000, program_us: 10_000, erase_us: 100_000 };

    /// Twice the page's maximum times plus 100 us; a zero time keeps the [`Self::IDENTIFY`]
    /// value.
    pub fn from_param(p: &ParamPage) -> Timeouts {
        let scale = |max: u16, default: u32| {
            if max == 0 {
                default
            } else {
                (max as u32) * 2 + 100
            }
        };
        let d = Timeouts::IDENTIFY;
        Timeouts {
            reset_us: d.reset_us,
            read_us: scale(p.t_r_us, d.read_us),
            program_us: scale(p.t_prog_us, d.program_us),
            erase_us: scale(p.t_bers_us, d.erase_us),
        }
    }
}

/// What identification found.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct ChipInfo {
    /// READ ID at 00h: manufacturer, device, then three vendor bytes.
    pub id: [u8; 5],
    /// The parameter page in use.
    pub param: ParamPage,
    /// Which copy it came from.
    pub param_source: ParamSource,
    /// The device shape.
    pub geometry: Geometry,
    /// Address cycles and row fields.
    pub address: AddressLayout,
    /// The interface timings in use: the fastest mode both the part and the bus support, set on
    /// the part with SET FEATURES and read back (mode 0 on a part without GET/SET FEATURES).
    pub interface: BusTiming,
    /// Whether the part's on-die ECC was switched off and read back off (Micron parts, feature
    /// 90h); `false` when the part has no such feature.
    pub on_die_ecc_off: bool,
}

impl ChipInfo {
    /// Highest ONFI version the part claims, as (major, minor).
    pub fn onfi_version(&self) -> (u8, u8) {
        self.param.onfi_version().unwrap_or((0, 0))
    }

    /// Fastest asynchronous timing mode (0-5) the part supports; the bus may be configured for it.
    pub fn timing_mode(&self) -> u8 {
        self.param.timing_mode()
    }

    /// Whether program and erase use the multi-plane commands.
    pub fn multi_plane_program_erase(&self) -> bool {
        self.param.multi_plane_program_erase() && self.geometry.planes_per_lun > 1
    }

    /// Whether reads use the multi-plane commands.
    pub fn multi_plane_read(&self) -> bool {
        self.param.multi_plane_read() && self.geometry.planes_per_lun > 1
    }

    /// Copy-back as the page advertises it: on chip with COPYBACK (odd-to-even as byte 6 bit 4
    /// says), else the read + program fallback.
    pub fn copy_back_caps(&self) -> CopyBackCaps {
        if self.param.copy_back() {
            CopyBackCaps { native: true, odd_to_even: self.param.odd_to_even_copy_back() }
        } else {
            CopyBackCaps::FALLBACK
        }
    }
}

/// Default status polling interval on a bus without R/B#, microseconds.
pub const DEFAULT_POLL_US: u32 = 5;

/// An ONFI NAND target behind the bus `B` (see the module documentation).
#[derive(Debug)]
pub struct OnfiNand<B: OnfiBus> {
    bus: B,
    info: ChipInfo,
    timeouts: Timeouts,
    poll_us: u32,
}

type Res<T, B> = Result<T, OnfiError<<B as OnfiBus>::Error>>;

/// How long the driver looks for R/B# going low after a command that starts an operation before
/// it takes the operation to be over already, microseconds. R/B# reads high for up to tWB
/// (200 ns) after the command, and longer if the write is still on its way to the pins.
pub const BUSY_EDGE_US: u32 = 2;

/// Waits for ready, robustly: first for R/B# to go busy (at most [`BUSY_EDGE_US`]), then for it
/// to be ready again (at most `timeout_us`), then confirms with READ STATUS (polling while it says
/// busy); without R/B#, by READ STATUS alone. After READ STATUS, `resume_read` re-issues 00h so
/// that data output continues.
fn wait_on<B: OnfiBus>(bus: &mut B, poll_us: u32, timeout_us: u32, resume_read: bool) -> Res<(), B> {
    let mut waited = 0u32;
    loop {
        match bus.ready_line().map_err(OnfiError::Bus)? {
            ReadyLine::Absent => return poll_status(bus, poll_us, timeout_us, resume_read),
            ReadyLine::Busy => break,
            ReadyLine::Ready if waited >= BUSY_EDGE_US => break,
            ReadyLine::Ready => {
                bus.delay_us(1);
                waited += 1;
            }
        }
    }
    match bus.wait_ready(timeout_us).map_err(OnfiError::Bus)? {
        Wait::Ready | Wait::NoReadyLine => poll_status(bus, poll_us, timeout_us, resume_read),
        Wait::TimedOut => Err(OnfiError::Timeout),
    }
}

/// Polls READ STATUS until RDY (at most `timeout_us`), then 00h if `resume_read`.
fn poll_status<B: OnfiBus>(bus: &mut B, poll_us: u32, timeout_us: u32, resume_read: bool) -> Res<(), B> {
    let mut waited = 0u32;
    while status_on(bus)? & status::RDY == 0 {
        if waited >= timeout_us {
            return Err(OnfiError::Timeout);
        }
        bus.delay_us(poll_us);
        waited = waited.saturating_add(poll_us);
    }
    if resume_read {
        bus.command(cmd::READ).map_err(OnfiError::Bus)?;
    }
    Ok(())
}

/// Wait for GET / SET FEATURES (tFEAT is 1 us; generous).
const FEATURE_TIMEOUT_US: u32 = 100;

/// SET FEATURES: EFh, address, P1..P4, wait tFEAT.
fn set_features_on<B: OnfiBus>(bus: &mut B, poll_us: u32, addr: u8, p: [u8; 4]) -> Res<(), B> {
    bus.command(cmd::SET_FEATURES).map_err(OnfiError::Bus)?;
    bus.address(&[addr]).map_err(OnfiError::Bus)?;
    bus.write_data(&p).map_err(OnfiError::Bus)?;
    wait_on(bus, poll_us, FEATURE_TIMEOUT_US, false)
}

/// GET FEATURES: EEh, address, wait tFEAT, P1..P4.
fn get_features_on<B: OnfiBus>(bus: &mut B, poll_us: u32, addr: u8) -> Res<[u8; 4], B> {
    bus.command(cmd::GET_FEATURES).map_err(OnfiError::Bus)?;
    bus.address(&[addr]).map_err(OnfiError::Bus)?;
    wait_on(bus, poll_us, FEATURE_TIMEOUT_US, true)?;
    let mut p = [0u8; 4];
    bus.read_data(&mut p).map_err(OnfiError::Bus)?;
    Ok(p)
}

/// SET FEATURES of P1 = `value` (other parameters 0), then GET FEATURES: P1 must read back
/// `value` in the bits of `mask`.
fn set_checked<B: OnfiBus>(bus: &mut B, poll_us: u32, addr: u8, value: u8, mask: u8) -> Res<(), B> {
    set_features_on(bus, poll_us, addr, [value, 0, 0, 0])?;
    let got = get_features_on(bus, poll_us, addr)?;
    if got[0] & mask != value & mask {
        return Err(OnfiError::Feature { addr, wrote: value, read: got[0] });
    }
    Ok(())
}

/// After identification: on-die ECC off (Micron, read back), the fastest common timing mode set
/// and read back, and the bus given its timings.
fn configure<B: OnfiBus>(
    bus: &mut B,
    poll_us: u32,
    param: &ParamPage,
    id: &[u8; 5],
) -> Res<(BusTiming, bool), B> {
    let features = param.optional_commands & optional_commands::GET_SET_FEATURES != 0;
    let mut ecc_off = false;
    if features && id[0] == feature::MICRON {
        // On-die ECC would write its own parity into the spare, over the FTL's metadata.
        set_checked(bus, poll_us, feature::ARRAY_MODE, 0, feature::ECC_ON)?;
        ecc_off = true;
    }
    let mode = if features { common_mode(param.async_timing_modes, bus.timing_modes()) } else { 0 };
    if features {
        set_checked(bus, poll_us, feature::TIMING_MODE, mode, 0x0F)?;
    }
    let timing = BusTiming::for_mode(mode, param.t_ccs_ns);
    bus.set_timing(&timing).map_err(OnfiError::Bus)?;
    Ok((timing, ecc_off))
}

/// READ STATUS: one command, one byte.
fn status_on<B: OnfiBus>(bus: &mut B) -> Res<u8, B> {
    let mut s = [0u8];
    bus.command(cmd::READ_STATUS).map_err(OnfiError::Bus)?;
    bus.read_data(&mut s).map_err(OnfiError::Bus)?;
    Ok(s[0])
}

/// RESET, READ ID, READ PARAMETER PAGE, and the checks on the page.
fn identify<B: OnfiBus>(bus: &mut B, poll_us: u32) -> Res<ChipInfo, B> {
    let t = Timeouts::IDENTIFY;
    bus.command(cmd::RESET).map_err(OnfiError::Bus)?;
    wait_on(bus, poll_us, t.reset_us, false)?;

    let mut signature = [0u8; 4];
    bus.command(cmd::READ_ID).map_err(OnfiError::Bus)?;
    bus.address(&[0x20]).map_err(OnfiError::Bus)?;
    bus.read_data(&mut signature).map_err(OnfiError::Bus)?;
    if signature != ONFI_SIGNATURE {
        return Err(OnfiError::NotOnfi(signature));
    }
    let mut id = [0u8; 5];
    bus.command(cmd::READ_ID).map_err(OnfiError::Bus)?;
    bus.address(&[0x00]).map_err(OnfiError::Bus)?;
    bus.read_data(&mut id).map_err(OnfiError::Bus)?;

    bus.command(cmd::READ_PARAMETER_PAGE).map_err(OnfiError::Bus)?;
    bus.address(&[0x00]).map_err(OnfiError::Bus)?;
    wait_on(bus, poll_us, t.read_us, true)?;
    let mut copies = [[0u8; PARAM_PAGE_BYTES]; PARAM_PAGE_COPIES];
    let mut read = 0;
    for copy in copies.iter_mut() {
        bus.read_data(copy).map_err(OnfiError::Bus)?;
        read += 1;
        if crc_matches(copy) {
            break;
        }
    }
    let (raw, param_source) = select_copy(&copies[..read])?;
    let param = ParamPage::parse(&raw);
    param.check(&raw)?;
    let geometry = param.geometry()?;
    let address = AddressLayout::new(&param, &geometry)?;
    let (interface, on_die_ecc_off) = configure(bus, poll_us, &param, &id)?;
    Ok(ChipInfo { id, param, param_source, geometry, address, interface, on_die_ecc_off })
}

impl<B: OnfiBus> OnfiNand<B> {
    /// Identifies the target behind `bus` (see the module documentation). On failure the bus is
    /// dropped; pass `&mut bus` to keep it.
    pub fn new(bus: B) -> Res<Self, B> {
        Self::with_poll_interval(bus, DEFAULT_POLL_US)
    }

    /// As [`Self::new`], polling READ STATUS every `poll_us` microseconds (at least 1) on a bus
    /// without R/B#.
    pub fn with_poll_interval(mut bus: B, poll_us: u32) -> Res<Self, B> {
        let poll_us = poll_us.max(1);
        let info = identify(&mut bus, poll_us)?;
        Ok(OnfiNand { bus, timeouts: Timeouts::from_param(&info.param), info, poll_us })
    }

    /// What identification found.
    pub fn info(&self) -> &ChipInfo {
        &self.info
    }

    /// The waits' limits.
    pub fn timeouts(&self) -> Timeouts {
        self.timeouts
    }

    /// Replaces the waits' limits.
    pub fn set_timeouts(&mut self, timeouts: Timeouts) {
        self.timeouts = timeouts;
    }

    /// The bus.
    pub fn bus(&self) -> &B {
        &self.bus
    }

    /// The bus, mutably (issuing cycles through it bypasses the driver's state: none is kept
    /// between operations, so this is safe between calls).
    pub fn bus_mut(&mut self) -> &mut B {
        &mut self.bus
    }

    /// Gives the bus back.
    pub fn release(self) -> B {
        self.bus
    }

    /// RESET: aborts any operation and waits for the target.
    pub fn reset(&mut self) -> Res<(), B> {
        self.cmd(cmd::RESET)?;
        self.wait(self.timeouts.reset_us, false)
    }

    /// SET FEATURES at `addr` (the part must advertise GET/SET FEATURES).
    pub fn set_features(&mut self, addr: u8, params: [u8; 4]) -> Res<(), B> {
        self.need_features()?;
        set_features_on(&mut self.bus, self.poll_us, addr, params)
    }

    /// GET FEATURES at `addr` (the part must advertise GET/SET FEATURES).
    pub fn get_features(&mut self, addr: u8) -> Res<[u8; 4], B> {
        self.need_features()?;
        get_features_on(&mut self.bus, self.poll_us, addr)
    }

    fn need_features(&self) -> Res<(), B> {
        if self.info.param.optional_commands & optional_commands::GET_SET_FEATURES == 0 {
            return Err(OnfiError::Unsupported("GET/SET FEATURES"));
        }
        Ok(())
    }

    /// READ STATUS.
    pub fn read_status(&mut self) -> Res<u8, B> {
        status_on(&mut self.bus)
    }

    /// READ STATUS ENHANCED for the LUN and plane of `block`.
    pub fn read_status_enhanced(&mut self, block: BlockId) -> Res<u8, B> {
        self.check_block(block)?;
        if !self.info.param.read_status_enhanced() {
            return Err(OnfiError::Unsupported("READ STATUS ENHANCED"));
        }
        self.status_enhanced(self.info.address.block_row(block))
    }

    /// READ ID at `address` (00h: manufacturer and device; 20h: "ONFI"), `buf.len()` bytes.
    pub fn read_id(&mut self, address: u8, buf: &mut [u8]) -> Res<(), B> {
        self.cmd(cmd::READ_ID)?;
        self.bus.address(&[address]).map_err(OnfiError::Bus)?;
        self.bus.read_data(buf).map_err(OnfiError::Bus)
    }

    // ---- cycles ----

    fn cmd(&mut self, c: u8) -> Res<(), B> {
        self.bus.command(c).map_err(OnfiError::Bus)
    }

    fn wait(&mut self, timeout_us: u32, resume_read: bool) -> Res<(), B> {
        wait_on(&mut self.bus, self.poll_us, timeout_us, resume_read)
    }

    fn send_address(&mut self, column: u32, row: u32) -> Res<(), B> {
        let mut a = [0u8; MAX_ADDRESS_CYCLES];
        let n = self.info.address.encode(column, row, &mut a);
        self.bus.address(&a[..n]).map_err(OnfiError::Bus)
    }

    fn send_column(&mut self, column: u32) -> Res<(), B> {
        let mut a = [0u8; MAX_ADDRESS_CYCLES];
        let n = self.info.address.encode_column(column, &mut a);
        self.bus.address(&a[..n]).map_err(OnfiError::Bus)
    }

    fn send_row(&mut self, row: u32) -> Res<(), B> {
        let mut a = [0u8; MAX_ADDRESS_CYCLES];
        let n = self.info.address.encode_row(row, &mut a);
        self.bus.address(&a[..n]).map_err(OnfiError::Bus)
    }

    fn status_enhanced(&mut self, row: u32) -> Res<u8, B> {
        let mut s = [0u8];
        self.cmd(cmd::READ_STATUS_ENHANCED)?;
        self.send_row(row)?;
        self.bus.read_data(&mut s).map_err(OnfiError::Bus)?;
        Ok(s[0])
    }

    /// Status after a program or erase: WP# then FAIL.
    fn check_status(&mut self, fail: OnfiError<B::Error>) -> Res<(), B> {
        let s = self.read_status()?;
        if s & status::WP_N == 0 {
            Err(OnfiError::WriteProtected)
        } else if s & status::FAIL != 0 {
            Err(fail)
        } else {
            Ok(())
        }
    }

    // ---- argument checks ----

    fn check_page(&self, page: PageId) -> Res<(), B> {
        if self.info.geometry.contains_page(page) {
            Ok(())
        } else {
            Err(OnfiError::PageOutOfRange(page))
        }
    }

    fn check_block(&self, block: BlockId) -> Res<(), B> {
        if self.info.geometry.contains_block(block) {
            Ok(())
        } else {
            Err(OnfiError::BlockOutOfRange(block))
        }
    }

    fn check_lengths(&self, data: usize, spare: usize) -> Res<(), B> {
        let g = &self.info.geometry;
        if data > g.data_bytes as usize {
            return Err(OnfiError::DataTooLong { len: data, max: g.data_bytes });
        }
        if spare > g.spare_bytes as usize {
            return Err(OnfiError::SpareTooLong { len: spare, max: g.spare_bytes });
        }
        Ok(())
    }

    fn check_op(&self, page: PageId, data: usize, spare: usize) -> Res<(), B> {
        self.check_page(page)?;
        self.check_lengths(data, spare)
    }

    /// Where a transfer starts: the spare area for a spare-only transfer, else column 0.
    fn first_column(&self, data: usize, spare: usize) -> u32 {
        if data == 0 && spare > 0 {
            self.info.geometry.data_bytes
        } else {
            0
        }
    }

    /// Whether the spare area must be reached with a column change after `data` bytes.
    fn needs_column_change(&self, data: usize, spare: usize) -> bool {
        data > 0 && spare > 0 && data < self.info.geometry.data_bytes as usize
    }

    /// The contract's multi-plane shape rules over (block, page in block). Returns whether the
    /// operations also qualify for the part's multi-plane commands (block-address restriction).
    fn multi_shape(&self, n: usize, items: impl Iterator<Item = (u32, u32)>) -> Result<bool, usize> {
        let g = &self.info.geometry;
        if n > g.planes_per_lun as usize {
            return Err(0);
        }
        let mut seen = [false; MAX_PLANES];
        let mut first: Option<(u32, u32, u32)> = None;
        let mut same_index = true;
        for (block, offset) in items {
            let lun = block / g.blocks_per_lun();
            let in_lun = block % g.blocks_per_lun();
            let plane = (in_lun % g.planes_per_lun) as usize;
            let index = in_lun / g.planes_per_lun;
            match first {
                None => first = Some((lun, offset, index)),
                Some((l, o, i)) => {
                    if l != lun || o != offset {
                        return Err(0);
                    }
                    same_index &= i == index;
                }
            }
            if seen.get(plane).copied().unwrap_or(true) {
                return Err(0);
            }
            seen[plane] = true;
        }
        Ok(same_index || !self.info.param.multi_plane_block_restricted())
    }

    /// Checks each page operation `(page, data bytes, spare bytes)` of a multi-plane call, then
    /// their shape; `Ok(true)` when the chip can run them as one multi-plane operation.
    fn check_multi_pages(
        &self,
        ops: impl Iterator<Item = (PageId, usize, usize)> + Clone,
    ) -> Result<bool, (usize, OnfiError<B::Error>)> {
        let mut n = 0;
        for (i, (page, data, spare)) in ops.clone().enumerate() {
            self.check_op(page, data, spare).map_err(|e| (i, e))?;
            n += 1;
        }
        let ppb = self.info.geometry.pages_per_block;
        let items = ops.map(|(page, _, _)| (page.0 / ppb, page.0 % ppb));
        self.multi_shape(n, items.clone()).map_err(|i| (i, self.multi_error(n, items)))
    }

    fn multi_error(&self, n: usize, items: impl Iterator<Item = (u32, u32)> + Clone) -> OnfiError<B::Error> {
        let g = &self.info.geometry;
        if n > g.planes_per_lun as usize {
            return OnfiError::MultiPlane("more operations than planes per LUN");
        }
        let luns = items.clone().map(|(b, _)| b / g.blocks_per_lun());
        let offsets = items.clone().map(|(_, o)| o);
        if !all_equal(luns) {
            OnfiError::MultiPlane("operations on different LUNs")
        } else if !all_equal(offsets) {
            OnfiError::MultiPlane("operations at different page offsets")
        } else {
            OnfiError::MultiPlane("two operations on one plane")
        }
    }

    /// The index of the first operation whose plane reports FAIL through READ STATUS ENHANCED;
    /// 0 when the part has no such command or no plane owns the failure.
    fn failing_index(&mut self, rows: &[u32]) -> Result<usize, (usize, OnfiError<B::Error>)> {
        if !self.info.param.read_status_enhanced() {
            return Ok(0);
        }
        for (i, &row) in rows.iter().enumerate() {
            if self.status_enhanced(row).map_err(|e| (0, e))? & status::FAIL != 0 {
                return Ok(i);
            }
        }
        Ok(0)
    }

    // ---- single-plane operations ----

    /// Data output after the array read: data, then the spare (after a column change through
    /// 05h, or 06h with `row` for multi-plane reads).
    fn read_out(&mut self, data: &mut [u8], spare: &mut [u8], row: Option<u32>) -> Res<(), B> {
        if !data.is_empty() {
            self.bus.read_data(data).map_err(OnfiError::Bus)?;
        }
        if !spare.is_empty() {
            if self.needs_column_change(data.len(), spare.len()) {
                self.change_read_column(self.info.geometry.data_bytes, row)?;
            }
            self.bus.read_data(spare).map_err(OnfiError::Bus)?;
        }
        Ok(())
    }

    fn change_read_column(&mut self, column: u32, row: Option<u32>) -> Res<(), B> {
        match row {
            None => {
                self.cmd(cmd::CHANGE_READ_COLUMN)?;
                self.send_column(column)?;
            }
            Some(row) => {
                self.cmd(cmd::CHANGE_READ_COLUMN_ENHANCED)?;
                self.send_address(column, row)?;
            }
        }
        self.cmd(cmd::CHANGE_READ_COLUMN_CONFIRM)
    }

    fn read_one(&mut self, page: PageId, data: &mut [u8], spare: &mut [u8]) -> Res<(), B> {
        let column = self.first_column(data.len(), spare.len());
        self.cmd(cmd::READ)?;
        self.send_address(column, self.info.address.page_row(page))?;
        self.cmd(cmd::READ_CONFIRM)?;
        self.wait(self.timeouts.read_us, true)?;
        self.read_out(data, spare, None)
    }

    /// 80h, address, data (and spare), then `confirm`.
    fn program_cycles(&mut self, page: PageId, data: &[u8], spare: &[u8], confirm: u8) -> Res<(), B> {
        let column = self.first_column(data.len(), spare.len());
        self.cmd(cmd::PROGRAM)?;
        self.send_address(column, self.info.address.page_row(page))?;
        if !data.is_empty() {
            self.bus.write_data(data).map_err(OnfiError::Bus)?;
        }
        if !spare.is_empty() {
            if self.needs_column_change(data.len(), spare.len()) {
                self.cmd(cmd::CHANGE_WRITE_COLUMN)?;
                self.send_column(self.info.geometry.data_bytes)?;
            }
            self.bus.write_data(spare).map_err(OnfiError::Bus)?;
        }
        self.cmd(confirm)
    }

    fn program_one(&mut self, page: PageId, data: &[u8], spare: &[u8]) -> Res<(), B> {
        self.program_cycles(page, data, spare, cmd::PROGRAM_CONFIRM)?;
        self.wait(self.timeouts.program_us, false)?;
        self.check_status(OnfiError::ProgramFailed(page))
    }

    fn erase_one(&mut self, block: BlockId) -> Res<(), B> {
        self.cmd(cmd::ERASE)?;
        self.send_row(self.info.address.block_row(block))?;
        self.cmd(cmd::ERASE_CONFIRM)?;
        self.wait(self.timeouts.erase_us, false)?;
        self.check_status(OnfiError::EraseFailed(block))
    }

    /// The pages carrying the bad-block marker: the first and the second of the block.
    fn marker_pages(&self, block: BlockId) -> impl Iterator<Item = PageId> {
        let g = self.info.geometry;
        (0..g.pages_per_block.min(2)).map(move |i| g.page(block, i))
    }

    // ---- copy-back ----

    /// 00h, source, 35h, wait, and the read-out `read` names.
    fn copy_back_read(
        &mut self,
        src: PageId,
        read: CopyBackRead,
        data: &mut [u8],
        spare: &mut [u8],
    ) -> Res<(), B> {
        let column = if read == CopyBackRead::Spare { self.info.geometry.data_bytes } else { 0 };
        self.cmd(cmd::READ)?;
        self.send_address(column, self.info.address.page_row(src))?;
        self.cmd(cmd::READ_INTERNAL_MOVE)?;
        self.wait(self.timeouts.read_us, read != CopyBackRead::Nothing)?;
        match read {
            CopyBackRead::Nothing => Ok(()),
            CopyBackRead::Spare => self.bus.read_data(spare).map_err(OnfiError::Bus),
            CopyBackRead::Page => self.read_out(data, spare, None),
        }
    }

    /// 85h, destination, the buffers written back, 10h, wait, status.
    fn copy_back_program(&mut self, dst: PageId, data: Option<&[u8]>, spare: Option<&[u8]>) -> Res<(), B> {
        let column = if data.is_none() && spare.is_some() { self.info.geometry.data_bytes } else { 0 };
        self.cmd(cmd::PROGRAM_INTERNAL_MOVE)?;
        self.send_address(column, self.info.address.page_row(dst))?;
        // Data then spare: the column runs on from the data's end into the spare.
        for bytes in [data, spare].into_iter().flatten() {
            self.bus.write_data(bytes).map_err(OnfiError::Bus)?;
        }
        self.cmd(cmd::PROGRAM_CONFIRM)?;
        self.wait(self.timeouts.program_us, false)?;
        self.check_status(OnfiError::ProgramFailed(dst))
    }

    // ---- multi-plane operations on qualifying operations ----

    fn read_multi_hw(&mut self, ops: &mut [ReadOp<'_>]) -> Result<(), (usize, OnfiError<B::Error>)> {
        let last = ops.len() - 1;
        for (i, op) in ops.iter().enumerate() {
            let row = self.info.address.page_row(op.page);
            let confirm = if i == last { cmd::READ_CONFIRM } else { cmd::READ_MULTI_PLANE };
            self.cmd(cmd::READ).map_err(|e| (0, e))?;
            self.send_address(0, row).map_err(|e| (0, e))?;
            self.cmd(confirm).map_err(|e| (0, e))?;
            self.wait(self.timeouts.read_us, false).map_err(|e| (0, e))?;
        }
        for (i, op) in ops.iter_mut().enumerate() {
            let row = self.info.address.page_row(op.page);
            let column = self.first_column(op.data.len(), op.spare.len());
            self.change_read_column(column, Some(row))
                .and_then(|()| self.read_out(op.data, op.spare, Some(row)))
                .map_err(|e| (i, e))?;
        }
        Ok(())
    }

    fn program_multi_hw(&mut self, ops: &[ProgramOp<'_>]) -> Result<(), (usize, OnfiError<B::Error>)> {
        let last = ops.len() - 1;
        let mut rows = [0u32; MAX_PLANES];
        for (i, op) in ops.iter().enumerate() {
            rows[i] = self.info.address.page_row(op.page);
            if i == last {
                self.program_cycles(op.page, op.data, op.spare, cmd::PROGRAM_CONFIRM).map_err(|e| (0, e))?;
                self.wait(self.timeouts.program_us, false).map_err(|e| (0, e))?;
            } else {
                self.program_cycles(op.page, op.data, op.spare, cmd::PROGRAM_MULTI_PLANE)
                    .map_err(|e| (0, e))?;
                self.wait(self.timeouts.read_us, false).map_err(|e| (0, e))?;
            }
        }
        let s = self.read_status().map_err(|e| (0, e))?;
        if s & status::WP_N == 0 {
            return Err((0, OnfiError::WriteProtected));
        }
        if s & status::FAIL != 0 {
            let i = self.failing_index(&rows[..ops.len()])?;
            return Err((i, OnfiError::ProgramFailed(ops[i].page)));
        }
        Ok(())
    }

    fn erase_multi_hw(&mut self, blocks: &[BlockId]) -> Result<(), (usize, OnfiError<B::Error>)> {
        let last = blocks.len() - 1;
        let mut rows = [0u32; MAX_PLANES];
        for (i, &b) in blocks.iter().enumerate() {
            rows[i] = self.info.address.block_row(b);
            let (confirm, timeout) = if i == last {
                (cmd::ERASE_CONFIRM, self.timeouts.erase_us)
            } else {
                (cmd::ERASE_MULTI_PLANE, self.timeouts.read_us)
            };
            self.cmd(cmd::ERASE)
                .and_then(|()| self.send_row(rows[i]))
                .and_then(|()| self.cmd(confirm))
                .and_then(|()| self.wait(timeout, false))
                .map_err(|e| (0, e))?;
        }
        let s = self.read_status().map_err(|e| (0, e))?;
        if s & status::WP_N == 0 {
            return Err((0, OnfiError::WriteProtected));
        }
        if s & status::FAIL != 0 {
            let i = self.failing_index(&rows[..blocks.len()])?;
            return Err((i, OnfiError::EraseFailed(blocks[i])));
        }
        Ok(())
    }
}

fn all_equal<T: PartialEq>(mut it: impl Iterator<Item = T>) -> bool {
    match it.next() {
        None => true,
        Some(first) => it.all(|x| x == first),
    }
}

impl<B: OnfiBus> ErrorType for OnfiNand<B> {
    type Error = OnfiError<B::Error>;
}

impl<B: OnfiBus> NandFlash for OnfiNand<B> {
    fn geometry(&self) -> Geometry {
        self.info.geometry
    }

    fn read_page(&mut self, page: PageId, data: &mut [u8], spare: &mut [u8]) -> Result<(), Self::Error> {
        self.check_op(page, data.len(), spare.len())?;
        self.read_one(page, data, spare)
    }

    fn program_page(&mut self, page: PageId, data: &[u8], spare: &[u8]) -> Result<(), Self::Error> {
        self.check_op(page, data.len(), spare.len())?;
        self.program_one(page, data, spare)
    }

    fn erase_block(&mut self, block: BlockId) -> Result<(), Self::Error> {
        self.check_block(block)?;
        self.erase_one(block)
    }

    fn is_bad(&mut self, block: BlockId) -> Result<bool, Self::Error> {
        self.check_block(block)?;
        let mut bad = false;
        for page in self.marker_pages(block) {
            let mut marker = [0xFFu8];
            self.read_one(page, &mut [], &mut marker)?;
            bad |= marker[0] != 0xFF;
        }
        Ok(bad)
    }

    fn mark_bad(&mut self, block: BlockId) -> Result<(), Self::Error> {
        self.check_block(block)?;
        match self.erase_one(block) {
            Ok(()) | Err(OnfiError::EraseFailed(_)) => {}
            Err(e) => return Err(e),
        }
        for page in self.marker_pages(block) {
            match self.program_one(page, &[], &[0x00]) {
                Ok(()) | Err(OnfiError::ProgramFailed(_)) => {}
                Err(e) => return Err(e),
            }
        }
        if self.is_bad(block)? {
            Ok(())
        } else {
            Err(OnfiError::MarkFailed(block))
        }
    }

    fn read_spare(&mut self, page: PageId, spare: &mut [u8]) -> Result<(), Self::Error> {
        self.read_page(page, &mut [], spare)
    }

    fn read_multi(&mut self, ops: &mut [ReadOp<'_>]) -> Result<(), (usize, Self::Error)> {
        let hw = self.check_multi_pages(ops.iter().map(|op| (op.page, op.data.len(), op.spare.len())))?;
        if hw && ops.len() > 1 && self.info.multi_plane_read() {
            return self.read_multi_hw(ops);
        }
        for (i, op) in ops.iter_mut().enumerate() {
            self.read_one(op.page, op.data, op.spare).map_err(|e| (i, e))?;
        }
        Ok(())
    }

    fn program_multi(&mut self, ops: &[ProgramOp<'_>]) -> Result<(), (usize, Self::Error)> {
        let hw = self.check_multi_pages(ops.iter().map(|op| (op.page, op.data.len(), op.spare.len())))?;
        if hw && ops.len() > 1 && self.info.multi_plane_program_erase() {
            return self.program_multi_hw(ops);
        }
        for (i, op) in ops.iter().enumerate() {
            self.program_one(op.page, op.data, op.spare).map_err(|e| (i, e))?;
        }
        Ok(())
    }

    fn erase_multi(&mut self, blocks: &[BlockId]) -> Result<(), (usize, Self::Error)> {
        for (i, &b) in blocks.iter().enumerate() {
            self.check_block(b).map_err(|e| (i, e))?;
        }
        let items = blocks.iter().map(|b| (b.0, 0));
        let hw = match self.multi_shape(blocks.len(), items.clone()) {
            Ok(hw) => hw,
            Err(i) => return Err((i, self.multi_error(blocks.len(), items))),
        };
        if hw && blocks.len() > 1 && self.info.multi_plane_program_erase() {
            return self.erase_multi_hw(blocks);
        }
        for (i, &b) in blocks.iter().enumerate() {
            self.erase_one(b).map_err(|e| (i, e))?;
        }
        Ok(())
    }

    fn copy_back_caps(&self) -> CopyBackCaps {
        self.info.copy_back_caps()
    }

    fn copy_back(
        &mut self,
        op: CopyBackOp<'_>,
        check: &mut dyn FnMut(&mut [u8], &mut [u8]) -> CopyBackAction,
    ) -> Result<CopyBackAction, CopyBackError<Self::Error>> {
        let caps = self.info.copy_back_caps();
        if !caps.native {
            return copy_back_fallback(self, caps, op, check);
        }
        op.check(&self.info.geometry, caps).map_err(CopyBackError::Refused)?;
        self.copy_back_read(op.src, op.read, op.data, op.spare).map_err(CopyBackError::Read)?;
        let action = check(op.data, op.spare);
        if let CopyBackAction::Program { write_data, write_spare } = action {
            let data = write_data.then_some(&*op.data);
            let spare = write_spare.then_some(&*op.spare);
            self.copy_back_program(op.dst, data, spare).map_err(CopyBackError::Program)?;
        }
        Ok(action)
    }
}
