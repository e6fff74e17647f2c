//! The simulator's model of page protection for FlexECC runs: which reads see bit errors, what the
//! codec makes of them, and what decoding costs.
//!
//! The simulator runs the emulator in metadata-only mode (no data stored), so the real codecs
//! cannot run; instead:
//! * [`NoisyNand`] wraps the emulator and, on every page read with data, draws the raw bit errors
//!   of each codeword from the page's effective bit-error rate (the emulator's own model: base
//!   rate grown with the block's wear and the page's age, plus read disturb; see
//!   `emulator::faults`), `Binomial(codeword bits, p)` per codeword. Errors are **persistent** by
//!   default (the FlexECC paper's assumption, and what retention and wear errors are): the
//!   uniform behind each codeword's draw is a hash of (seed, page, block erase count, codeword),
//!   so a programmed page shows the same errors on every read, more as its rate grows (the
//!   inverse CDF is monotone in p), and new ones only after it is rewritten elsewhere.
//!   **Transient** errors (`ErrorRates::persistent = false`, the emulator's read noise) draw
//!   afresh on every read. The emulator's own bit errors stay off, so the spare metadata reads
//!   clean (its protection is not what is measured here).
//! * [`ModelCodec`] is the page codec: it writes FlexECC's real format tag (one spare byte, the
//!   same tags as `FlexCodec`) and decides the outcome from the drawn errors exactly as the real
//!   codecs would: a CRC page with any error fails its check; a BCH page is corrected when every
//!   codeword has at most t errors, and is uncorrectable otherwise.
//! * [`DecodeTiming`] charges each decode: the CRC check `T_crc`; BCH `t x T_crc` on a clean page
//!   and `2t x T_crc` with errors (the FlexECC paper's analysis, section 2.2). The default is the
//!   paper's preset: 10 us for a t = 6 hardware BCH decoder, so `T_crc` = 10 us / 6.
//!
//! The codec and the wrapper share one [`EccModel`] (the errors of the last read, the decode time
//! spent, counters) through an `Rc<RefCell<_>>`; the simulator is single-threaded.

use std::cell::RefCell;
use std::rc::Rc;

use ftl_core::policy::{CodecError, PageCodec, PageFormat};
use ftl_policies::flex_ecc::{tag_format, TAG_CORRECTING, TAG_DETECTING};
use nand_hal::{
    BlockId, CopyBackAction, CopyBackCaps, CopyBackError, CopyBackOp, ErrorType, Geometry, NandFlash, PageId,
};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::emulator::{EmuError, Emulator};

/// Decode cost model.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct DecodeTiming {
    /// One CRC check of a page, ns.
    pub t_crc_ns: u64,
    /// The BCH code's correction capability t (per codeword), which also scales its cost.
    pub t: u32,
}

impl DecodeTiming {
    /// The FlexECC paper's preset: a hardware BCH decoder with t = 6 takes 10 us per page.
    pub const PAPER: DecodeTiming = DecodeTiming { t_crc_ns: 10_000 / 6, t: 6 };

    /// Cost of decoding one page in `format` that had `errors` raw bit errors.
    pub fn cost_ns(&self, format: PageFormat, errors: u32) -> u64 {
        match format {
            PageFormat::Detecting => self.t_crc_ns,
            PageFormat::Correcting if errors == 0 => self.t as u64 * self.t_crc_ns,
            PageFormat::Correcting => 2 * self.t as u64 * self.t_crc_ns,
        }
    }
}

/// Raw bit-error settings (the emulator's model, applied by [`NoisyNand`]).
#[derive(Copy, Clone, Debug, PartialEq)]
pub struct ErrorRates {
    /// Base raw bit-error rate.
    pub rber: f64,
    /// Growth with wear: `x (1 + wear_factor * ec / endurance)`.
    pub wear_factor: f64,
    /// Growth with retention: `x (1 + retention_factor * age_s / retention_scale_s)`.
    pub retention_factor: f64,
    /// Retention time scale, seconds.
    pub retention_scale_s: f64,
    /// Read disturb: added rate per read of the block since its erase.
    pub read_disturb: f64,
    /// Errors stay with the programmed page (true) or are drawn afresh on every read.
    pub persistent: bool,
}

impl Default for ErrorRates {
    fn default() -> Self {
        ErrorRates {
            rber: 0.0,
            wear_factor: 0.0,
            retention_factor: 0.0,
            retention_scale_s: 86_400.0,
            read_disturb: 0.0,
            persistent: true,
        }
    }
}

/// What the model counted.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct EccModelCounters {
    /// Pages decoded.
    pub decodes: u64,
    /// Raw bit errors drawn over all reads.
    pub raw_bit_errors: u64,
    /// Reads that saw at least one error.
    pub erroneous_reads: u64,
    /// Decode time, ns.
    pub decode_ns: u64,
}

/// State shared by [`NoisyNand`] and [`ModelCodec`].
#[derive(Debug)]
pub struct EccModel {
    rates: ErrorRates,
    timing: DecodeTiming,
    codeword_bits: u64,
    codewords: usize,
    seed: u64,
    rng: ChaCha8Rng,
    /// Errors per codeword of the last page read.
    last: Vec<u32>,
    /// Decode time not yet charged to a request, ns.
    pending_ns: u64,
    counters: EccModelCounters,
    /// The next decode is of a page copied back unread ([`CopyBack::CrcDirect`]): it costs no
    /// time (the controller does not see the page; the outcome still follows its errors).
    skip_next_cost: bool,
}

/// The shared handle.
pub type SharedModel = Rc<RefCell<EccModel>>;

impl EccModel {
    /// A model for pages of `geometry` (codewords of `geometry.ecc.codeword_bytes`, or the whole
    /// page), with `t`-bit BCH parity of `m = 14` bits per error.
    pub fn new(geometry: &Geometry, rates: ErrorRates, timing: DecodeTiming, seed: u64) -> SharedModel {
        let cw = (geometry.ecc.codeword_bytes as usize).clamp(1, geometry.data_bytes as usize);
        let codewords = (geometry.data_bytes as usize).div_ceil(cw);
        Rc::new(RefCell::new(EccModel {
            rates,
            timing,
            codeword_bits: 8 * cw as u64 + 14 * timing.t as u64,
            codewords,
            seed,
            rng: ChaCha8Rng::seed_from_u64(seed ^ 0xECC0_5EED),
            last: vec![0; codewords],
            pending_ns: 0,
            counters: EccModelCounters::default(),
            skip_next_cost: false,
        }))
    }

    /// Decode time spent since the last call, ns (the simulator charges it to a request).
    pub fn take_pending_ns(&mut self) -> u64 {
        std::mem::take(&mut self.pending_ns)
    }

    /// Counters.
    pub fn counters(&self) -> EccModelCounters {
        self.counters
    }

    /// The timing model.
    pub fn timing(&self) -> DecodeTiming {
        self.timing
    }

    fn effective(&self, ec: u32, endurance: u32, age_s: u32, block_reads: u32) -> f64 {
        let r = &self.rates;
        let wear = 1.0 + r.wear_factor * f64::from(ec) / f64::from(endurance.max(1));
        let retention = 1.0 + r.retention_factor * f64::from(age_s) / r.retention_scale_s;
        let p = r.rber * wear * retention + r.read_disturb * f64::from(block_reads);
        if p.is_nan() {
            0.0
        } else {
            p.clamp(0.0, 1.0)
        }
    }

    /// Draws the errors of one read of the page programmed as `instance` (page, erase count),
    /// at rate `p`.
    fn draw(&mut self, p: f64, instance: (u32, u32)) {
        let n = self.codeword_bits;
        let mut total = 0u32;
        for i in 0..self.codewords {
            let u = if self.rates.persistent {
                let mut x = self.seed ^ ((instance.0 as u64) << 32) ^ ((instance.1 as u64) << 8) ^ i as u64;
                unit(splitmix(&mut x))
            } else {
                self.rng.random::<f64>()
            };
            let k = binomial_inv(u, n, p, &mut self.rng);
            self.last[i] = k;
            total += k;
        }
        self.counters.raw_bit_errors += total as u64;
        if total > 0 {
            self.counters.erroneous_reads += 1;
        }
    }
}

fn splitmix(x: &mut u64) -> u64 {
    *x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *x;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A uniform in [0, 1) from 64 random bits.
fn unit(x: u64) -> f64 {
    (x >> 11) as f64 / (1u64 << 53) as f64
}

/// A `Binomial(n, p)` draw by inversion of the CDF at the uniform `u` (exact for the small means
/// of bit-error counts, monotone in `p` for a fixed `u`); above a mean of 50, a normal
/// approximation whose second uniform comes from `rng`.
fn binomial_inv(u: f64, n: u64, p: f64, rng: &mut ChaCha8Rng) -> u32 {
    if p <= 0.0 || n == 0 {
        return 0;
    }
    if p >= 1.0 {
        return n as u32;
    }
    let mean = n as f64 * p;
    if mean > 50.0 {
        let sd = (mean * (1.0 - p)).sqrt();
        // Box-Muller.
        let (u1, u2): (f64, f64) = (u.max(1e-300), rng.random());
        let z = (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos();
        return (mean + sd * z).round().clamp(0.0, n as f64) as u32;
    }
    let q = p / (1.0 - p);
    let mut pk = (1.0 - p).powf(n as f64);
    let mut cdf = pk;
    let mut k = 0u64;
    while u > cdf && k < n {
        pk *= (n - k) as f64 / (k + 1) as f64 * q;
        k += 1;
        cdf += pk;
        if pk < 1e-18 && cdf > 1.0 - 1e-12 {
            break;
        }
    }
    k as u32
}

/// How GC moves a page (`ftl-sim --copy-back`; see [`NoisyNand`]).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub enum CopyBack {
    /// A plain read (tR, page out over the bus) and program (page in, tPROG).
    #[default]
    Off,
    /// Copy-back with the data checked: the FTL's own copy-back (`Config::gc_copy_back`, issued
    /// through [`NoisyNand`]'s `copy_back`): the page is read into the page register (tR) and
    /// out to the controller (transfer out), decoded by the FTL's check (corrected if BCH; the
    /// copy's format chosen as the plain path chooses it, re-encoded CRC if it drops to CRC),
    /// and programmed from the register after the spare (new metadata and codec bytes) and, for
    /// a corrected page, the data are written back in (ONFI copy-back read + program with data
    /// input): the page transfer in of a clean page is saved, the transfer out and the decode
    /// are not.
    Checked,
    /// [`CopyBack::Checked`] for BCH pages; CRC (clean) pages are charged as copied back unread:
    /// tR + tPROG, no transfer, no decode (a what-if of the model: the FTL still reads and
    /// checks them, uncharged). Their CRC travels with them unchanged and is checked at the next
    /// host read or scrubber pass; a clean page's data is also in the backing store, so an error
    /// copied unseen costs a disk read, never data.
    CrcDirect,
}

impl CopyBack {
    /// The CLI name.
    pub const fn name(self) -> &'static str {
        match self {
            CopyBack::Off => "off",
            CopyBack::Checked => "checked",
            CopyBack::CrcDirect => "crc-direct",
        }
    }
}

impl std::str::FromStr for CopyBack {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "off" => Ok(CopyBack::Off),
            "checked" => Ok(CopyBack::Checked),
            "crc-direct" => Ok(CopyBack::CrcDirect),
            _ => Err(format!("unknown --copy-back '{s}' (expected off, checked or crc-direct)")),
        }
    }
}

/// What GC moves cost, as charged by [`NoisyNand`].
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct GcMoveStats {
    /// Pages moved (a read followed by its program while GC moves are tracked).
    pub moves: u64,
    /// Of which copy-backs (same plane, copy-back on).
    pub copy_backs: u64,
    /// Of which CRC pages copied back unread ([`CopyBack::CrcDirect`]).
    pub unread: u64,
    /// Time of the moves: tR + bus transfers charged + decode + tPROG each, ns.
    pub move_ns: u64,
    /// Decode time inside the moves, ns.
    pub decode_ns: u64,
}

/// A GC read waiting for its program.
#[derive(Copy, Clone, Debug)]
struct MoveRead {
    plane: u32,
    /// When the read's data is in the controller (or, unread, in the page register).
    ready_ns: u64,
    /// The model's decode counter before the page's decode.
    decode_mark: u64,
    /// Bytes the read moved over the bus.
    out_bytes: u64,
    /// Whether it stayed in the page register (an unread CRC copy-back).
    unread: bool,
    /// Decode time the read held its LUN for (in `ready_ns` already).
    held: u64,
    /// The read of one of the FTL's copy-backs (not aborted by its check): the program is a
    /// copy-back.
    copy_back: bool,
    /// The copy-back's check wrote the (corrected) data back in.
    data_in: bool,
}

/// The emulator with modelled bit errors on data reads (see the module documentation).
///
/// GC moves: while [`NoisyNand::track_moves`] is on (the simulator sets it around the FTL calls
/// that garbage collect: host and clean writes, refreshes), a data read followed directly by a
/// program is a page move. Its program starts no earlier than the read's data is in the
/// controller plus the page's decode time (the copy needs the checked data). With copy-back on
/// ([`CopyBack`]) the device has the emulator's copy-back capabilities, so the FTL issues its
/// own checked copy-backs (same plane, its check decoding each page), and exactly those are
/// charged as copy-backs (the whole spare in, the data too if the check corrected it); every
/// other move (to another plane, a frontier a mount resumed, a copy-back its check aborted) is
/// a plain read and program (an unread CRC page whose check aborted pays its transfer out at
/// the program).
pub struct NoisyNand<'a> {
    /// The device.
    pub emu: &'a mut Emulator,
    model: SharedModel,
    /// Track GC moves (see above).
    pub track_moves: bool,
    /// How moves are charged.
    pub copy_back: CopyBack,
    /// The decode of a data read holds its LUN ([`Emulator::hold_next_read`]): the error-free
    /// decode cost of the page's stored format is part of the read's service time (a decode
    /// with errors adds the rest after it). Off: the controller decodes after the transfer
    /// while the LUN serves its next command.
    pub decode_holds_lun: bool,
    pending_move: Option<MoveRead>,
    /// Inside [`NandFlash::copy_back`]: the read is a copy-back's.
    in_copy_back: bool,
    /// Decode time held on LUNs (already in read completions), not yet taken.
    held_decode_ns: u64,
    /// Decode time already placed on the device's timeline by chained moves, not yet taken.
    chained_decode_ns: u64,
    stats: GcMoveStats,
}

impl<'a> NoisyNand<'a> {
    /// Wraps `emu`; errors are drawn into `model`.
    pub fn new(emu: &'a mut Emulator, model: SharedModel) -> Self {
        NoisyNand {
            emu,
            model,
            track_moves: false,
            copy_back: CopyBack::Off,
            decode_holds_lun: false,
            pending_move: None,
            in_copy_back: false,
            held_decode_ns: 0,
            chained_decode_ns: 0,
            stats: GcMoveStats::default(),
        }
    }

    /// GC move counters.
    pub fn move_stats(&self) -> GcMoveStats {
        self.stats
    }

    /// Decode time since the last call that is on the device's timeline already (chained moves'
    /// decodes, decodes held on LUNs), so a request's completion must not add it again.
    pub fn take_chained_decode_ns(&mut self) -> u64 {
        std::mem::take(&mut self.chained_decode_ns) + std::mem::take(&mut self.held_decode_ns)
    }

    /// Before a data read of `page` (not an unread copy-back): with `decode_holds_lun`, makes
    /// the read hold its LUN for the page's error-free decode; returns that time.
    fn hold_decode(&mut self, page: PageId) -> u64 {
        if !self.decode_holds_lun {
            return 0;
        }
        let format = self.stored_format(page).unwrap_or(PageFormat::Correcting);
        let hold = self.model.borrow().timing.cost_ns(format, 0);
        self.emu.hold_next_read(hold);
        hold
    }

    /// The codec format tag of a stored page's spare, if it is a FlexECC data page.
    fn stored_format(&self, page: PageId) -> Option<PageFormat> {
        let (_, spare) = self.emu.peek_page(page)?;
        spare.get(ftl_core::meta::META_LEN).and_then(|&t| tag_format(t))
    }

    fn read_tracked(&mut self, page: PageId, data: &mut [u8], spare: &mut [u8]) -> Result<(), EmuError> {
        let g = self.emu.geometry();
        let plane = g.plane_index(g.block_of(page));
        let unread = self.in_copy_back
            && self.copy_back == CopyBack::CrcDirect
            && self.stored_format(page) == Some(PageFormat::Detecting);
        let full = (data.len() + spare.len()) as u64;
        let out_bytes = if unread { 0 } else { full };
        self.emu.shape_next_op(Some(out_bytes), 0);
        let held = if unread { 0 } else { self.hold_decode(page) };
        let r = self.emu.read_page(page, data, spare);
        self.emu.shape_next_op(None, 0);
        self.emu.hold_next_read(0);
        r?;
        self.held_decode_ns += held;
        if unread {
            self.model.borrow_mut().skip_next_cost = true;
        }
        self.pending_move = Some(MoveRead {
            plane,
            ready_ns: self.emu.last_op_completion_ns(),
            decode_mark: self.model.borrow().counters.decode_ns,
            out_bytes,
            unread,
            held,
            copy_back: self.in_copy_back,
            data_in: false,
        });
        Ok(())
    }

    fn program_move(
        &mut self,
        mv: MoveRead,
        page: PageId,
        data: &[u8],
        spare: &[u8],
    ) -> Result<(), EmuError> {
        let g = self.emu.geometry();
        let tp = self.emu.timing_params();
        let decode = self.model.borrow().counters.decode_ns - mv.decode_mark;
        let same_plane = g.plane_index(g.block_of(page)) == mv.plane;
        let full = (data.len() + spare.len()) as u64;
        let copy_back = mv.copy_back && same_plane;
        let in_bytes = match (copy_back, mv.unread) {
            (true, true) => 0,
            (true, false) => spare.len() as u64 + if mv.data_in { data.len() as u64 } else { 0 },
            // A plain program; an unread page also has to come out first.
            (false, true) => 2 * full,
            (false, false) => full,
        };
        // The decode not already held on the LUN (in `ready_ns`) delays the program.
        let rest = decode.saturating_sub(mv.held);
        self.emu.shape_next_op(Some(in_bytes), mv.ready_ns + rest);
        let r = self.emu.program_page(page, data, spare);
        self.emu.shape_next_op(None, 0);
        self.chained_decode_ns += rest;
        let s = &mut self.stats;
        s.moves += 1;
        s.copy_backs += copy_back as u64;
        s.unread += (copy_back && mv.unread) as u64;
        s.decode_ns += decode;
        s.move_ns += tp.t_r_ns + tp.xfer_ns(mv.out_bytes) + decode + tp.xfer_ns(in_bytes) + tp.t_prog_ns;
        r
    }
}

impl ErrorType for NoisyNand<'_> {
    type Error = <Emulator as ErrorType>::Error;
}

impl NandFlash for NoisyNand<'_> {
    fn geometry(&self) -> Geometry {
        self.emu.geometry()
    }
    fn read_page(&mut self, page: PageId, data: &mut [u8], spare: &mut [u8]) -> Result<(), Self::Error> {
        self.pending_move = None;
        self.model.borrow_mut().skip_next_cost = false;
        if self.track_moves && !data.is_empty() {
            self.read_tracked(page, data, spare)?;
        } else if !data.is_empty() {
            let held = self.hold_decode(page);
            let r = self.emu.read_page(page, data, spare);
            self.emu.hold_next_read(0);
            r?;
            self.held_decode_ns += held;
        } else {
            self.emu.read_page(page, data, spare)?;
        }
        if !data.is_empty() {
            let g = self.emu.geometry();
            let b = g.block_of(page);
            let ec = self.emu.erase_count(b).unwrap_or(0);
            let age = self.emu.page_age_s(page).unwrap_or(0);
            let reads = self.emu.block_reads_since_erase(b).unwrap_or(1).saturating_sub(1);
            let mut m = self.model.borrow_mut();
            let p = m.effective(ec, g.endurance, age, reads);
            m.draw(p, (page.0, ec));
        }
        Ok(())
    }
    fn program_page(&mut self, page: PageId, data: &[u8], spare: &[u8]) -> Result<(), Self::Error> {
        match self.pending_move.take() {
            Some(mv) if self.track_moves => self.program_move(mv, page, data, spare),
            _ => self.emu.program_page(page, data, spare),
        }
    }
    fn erase_block(&mut self, block: BlockId) -> Result<(), Self::Error> {
        self.pending_move = None;
        self.emu.erase_block(block)
    }
    fn is_bad(&mut self, block: BlockId) -> Result<bool, Self::Error> {
        self.pending_move = None;
        self.emu.is_bad(block)
    }
    fn mark_bad(&mut self, block: BlockId) -> Result<(), Self::Error> {
        self.pending_move = None;
        self.emu.mark_bad(block)
    }
    /// The emulator's capabilities while copy-back is on, so that the FTL issues its own checked
    /// copy-backs (`Config::gc_copy_back`, `ftl-core/src/gc_copy_back.rs`); none while it is off.
    fn copy_back_caps(&self) -> CopyBackCaps {
        if self.copy_back == CopyBack::Off {
            CopyBackCaps::FALLBACK
        } else {
            self.emu.copy_back_caps()
        }
    }
    /// The FTL's copy-back, charged as a move (see above): the read through [`Self::read_page`]
    /// (errors drawn, the page out), the FTL's check (decode, format), and, unless it aborts,
    /// the program through [`Self::program_page`] (a copy-back: only the spare in). After an
    /// abort the FTL programs the page the plain way, charged as a plain program.
    fn copy_back(
        &mut self,
        op: CopyBackOp<'_>,
        check: &mut dyn FnMut(&mut [u8], &mut [u8]) -> CopyBackAction,
    ) -> Result<CopyBackAction, CopyBackError<Self::Error>> {
        op.check(&self.emu.geometry(), self.copy_back_caps()).map_err(CopyBackError::Refused)?;
        self.in_copy_back = true;
        let read = self.read_page(op.src, op.data, op.spare);
        self.in_copy_back = false;
        read.map_err(CopyBackError::Read)?;
        let action = check(op.data, op.spare);
        if let Some(mv) = self.pending_move.as_mut() {
            match action {
                CopyBackAction::Abort => mv.copy_back = false,
                CopyBackAction::Program { write_data, .. } => mv.data_in = write_data,
            }
        }
        if action != CopyBackAction::Abort {
            self.program_page(op.dst, op.data, op.spare).map_err(CopyBackError::Program)?;
        }
        Ok(action)
    }
}

/// FlexECC's two formats, modelled (see the module documentation). One spare byte: the tag.
pub struct ModelCodec {
    model: SharedModel,
}

impl ModelCodec {
    /// A codec deciding from `model`'s drawn errors.
    pub fn new(model: SharedModel) -> Self {
        ModelCodec { model }
    }
}

impl PageCodec for ModelCodec {
    fn spare_len(&self) -> usize {
        1
    }
    fn encode(&mut self, data: &[u8], out: &mut [u8]) {
        self.encode_as(data, out, PageFormat::Correcting);
    }
    fn encode_as(&mut self, _data: &[u8], out: &mut [u8], format: PageFormat) {
        if let Some(tag) = out.first_mut() {
            *tag = match format {
                PageFormat::Correcting => TAG_CORRECTING,
                PageFormat::Detecting => TAG_DETECTING,
            };
        }
    }
    fn decode(&mut self, _data: &mut [u8], stored: &[u8]) -> Result<u32, CodecError> {
        let mut m = self.model.borrow_mut();
        let format = stored.first().and_then(|&t| tag_format(t)).unwrap_or(PageFormat::Correcting);
        let errors: u32 = m.last.iter().sum();
        let cost = if std::mem::take(&mut m.skip_next_cost) { 0 } else { m.timing.cost_ns(format, errors) };
        m.pending_ns += cost;
        m.counters.decode_ns += cost;
        m.counters.decodes += 1;
        let t = m.timing.t;
        let worst = m.last.iter().copied().max().unwrap_or(0);
        m.last.fill(0);
        match format {
            PageFormat::Detecting if errors > 0 => Err(CodecError::Uncorrectable),
            PageFormat::Detecting => Ok(0),
            PageFormat::Correcting if worst > t => Err(CodecError::Uncorrectable),
            PageFormat::Correcting => Ok(errors),
        }
    }
    fn format_of(&self, stored: &[u8]) -> Option<PageFormat> {
        stored.first().and_then(|&t| tag_format(t))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binomial_mean_matches_and_is_monotone_in_p() {
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let (n, p) = (4096u64 * 8, 1e-4);
        let draws = 20_000;
        let sum: u64 = (0..draws).map(|_| binomial_inv(rng.random(), n, p, &mut rng) as u64).sum();
        let mean = sum as f64 / draws as f64;
        assert!((mean - n as f64 * p).abs() < 0.05 * n as f64 * p, "{mean}");
        assert_eq!(binomial_inv(0.5, n, 0.0, &mut rng), 0);
        for _ in 0..1000 {
            let u: f64 = rng.random();
            assert!(binomial_inv(u, n, 1e-5, &mut rng) <= binomial_inv(u, n, 1e-4, &mut rng));
        }
    }

    #[test]
    fn persistent_errors_repeat_on_every_read() {
        let g = nand_hal::Geometry::MT29F4G08;
        let rates = ErrorRates { rber: 2e-4, ..ErrorRates::default() };
        let model = EccModel::new(&g, rates, DecodeTiming::PAPER, 9);
        let mut seen = Vec::new();
        for _ in 0..3 {
            let mut m = model.borrow_mut();
            m.draw(2e-4, (77, 3));
            seen.push(m.last.clone());
        }
        assert!(seen.iter().all(|s| *s == seen[0]));
        let mut m = model.borrow_mut();
        let mut differs = false;
        for page in 0..50 {
            m.draw(2e-4, (page, 3));
            differs |= m.last != seen[0];
        }
        assert!(differs);
    }

    #[test]
    fn decode_cost_follows_the_paper() {
        let t = DecodeTiming::PAPER;
        assert_eq!(t.cost_ns(PageFormat::Correcting, 0), 6 * 1666);
        assert_eq!(t.cost_ns(PageFormat::Correcting, 2), 12 * 1666);
        assert_eq!(t.cost_ns(PageFormat::Detecting, 3), 1666);
    }

    #[test]
    fn codec_outcomes_follow_the_drawn_errors() {
        let g = nand_hal::Geometry::MT29F4G08;
        let model = EccModel::new(&g, ErrorRates::default(), DecodeTiming::PAPER, 1);
        let mut c = ModelCodec::new(model.clone());
        let mut spare = [0u8; 1];
        let mut d = [0u8; 4];
        for (format, errs, want) in [
            (PageFormat::Detecting, vec![0, 0, 0, 0], Ok(0)),
            (PageFormat::Detecting, vec![0, 1, 0, 0], Err(CodecError::Uncorrectable)),
            (PageFormat::Correcting, vec![6, 1, 0, 0], Ok(7)),
            (PageFormat::Correcting, vec![7, 0, 0, 0], Err(CodecError::Uncorrectable)),
        ] {
            c.encode_as(&d, &mut spare, format);
            assert_eq!(c.format_of(&spare), Some(format));
            model.borrow_mut().last.copy_from_slice(&errs);
            assert_eq!(c.decode(&mut d, &spare), want, "{format:?} {errs:?}");
        }
        assert_eq!(model.borrow().counters().decodes, 4);
    }

    /// A GC move on a one-LUN emulator with the flexecc preset's timing and LUN queues: the
    /// program's completion, from an idle device at 0, against the costs each mode charges.
    /// Within a plane with copy-back on, the move is issued as the FTL issues it (a copy-back
    /// whose check decodes the page, the whole spare written back); otherwise as a read of the
    /// metadata and codec bytes and a program.
    fn move_completion(mode: CopyBack, format: PageFormat, same_plane: bool) -> (u64, GcMoveStats) {
        use crate::emulator::{EmulatorConfig, Scheduling, TimingParams};
        let g = nand_hal::Geometry {
            blocks_per_plane: 8,
            luns: 1,
            ..crate::sim::device::Preset::FlexEcc.device().geometry
        };
        let mut ec = EmulatorConfig::new(g);
        ec.store_data = false;
        ec.timing = TimingParams {
            t_xfer_ps_per_byte: 1_250,
            scheduling: Scheduling::LunQueues,
            ..TimingParams::CAFTL_PAPER
        };
        let mut emu = Emulator::new(ec).unwrap();
        let model = EccModel::new(&g, ErrorRates::default(), DecodeTiming::PAPER, 1);
        let mut codec = ModelCodec::new(model.clone());
        let meta = ftl_core::meta::META_LEN;
        let mut spare = vec![0xFFu8; g.spare_bytes as usize];
        codec.encode_as(&[], &mut spare[meta..meta + 1], format);
        let data = vec![0u8; 4096];
        emu.program_page(PageId(0), &data, &spare[..meta + 1]).unwrap();
        let idle = emu.idle_at_ns();
        emu.set_now_ns(idle);
        let mut nand = NoisyNand::new(&mut emu, model.clone());
        nand.copy_back = mode;
        nand.track_moves = true;
        // The destination: the next page of the block's plane, or a block of the other plane.
        let dest = if same_plane { PageId(1) } else { PageId(g.pages_per_block) };
        assert_ne!(g.plane_index(g.block_of(dest)) == g.plane_index(g.block_of(PageId(0))), !same_plane);
        let mut d = vec![0u8; 4096];
        if mode != CopyBack::Off && same_plane {
            assert!(nand.copy_back_caps().native);
            let mut sp = vec![0u8; g.spare_bytes as usize];
            let op = CopyBackOp {
                src: PageId(0),
                dst: dest,
                read: nand_hal::CopyBackRead::Page,
                data: &mut d,
                spare: &mut sp,
            };
            let action = nand
                .copy_back(op, &mut |d, sp| {
                    codec.decode(d, &sp[meta..meta + 1]).unwrap();
                    CopyBackAction::Program { write_data: false, write_spare: true }
                })
                .unwrap();
            assert_ne!(action, CopyBackAction::Abort);
        } else {
            let mut sp = vec![0u8; meta + 1];
            nand.read_page(PageId(0), &mut d, &mut sp).unwrap();
            codec.decode(&mut d, &sp[meta..]).unwrap();
            nand.program_page(dest, &data, &sp).unwrap();
        }
        let done = nand.emu.last_op_completion_ns() - idle;
        (done, nand.move_stats())
    }

    #[test]
    fn gc_moves_are_charged_as_copy_backs() {
        let (t_r, t_prog, ns_per_b) = (25_000u64, 200_000u64, 1.25);
        let spare = crate::sim::device::Preset::FlexEcc.device().geometry.spare_bytes as usize;
        let xfer = |bytes: usize| (bytes as f64 * ns_per_b).ceil() as u64;
        let page = xfer(4096 + ftl_core::meta::META_LEN + 1);
        // A copy-back's read and program move the whole spare (the HAL's buffers).
        let (page_out, spare_in) = (xfer(4096 + spare), xfer(spare));
        let (bch, crc) = (10_000 - 4, 1666);
        for (mode, format, same, want, unread) in [
            // Plain move: read out, decode, page in, program.
            (CopyBack::Off, PageFormat::Correcting, true, t_r + page + bch + page + t_prog, 0),
            // Checked copy-back: read out and decode, only the spare back in.
            (CopyBack::Checked, PageFormat::Correcting, true, t_r + page_out + bch + spare_in + t_prog, 0),
            (CopyBack::Checked, PageFormat::Detecting, true, t_r + page_out + crc + spare_in + t_prog, 0),
            // CRC pages copied back unread; BCH pages still checked.
            (CopyBack::CrcDirect, PageFormat::Detecting, true, t_r + t_prog, 1),
            (CopyBack::CrcDirect, PageFormat::Correcting, true, t_r + page_out + bch + spare_in + t_prog, 0),
            // Another plane: no copy-back (the FTL reads and programs).
            (CopyBack::CrcDirect, PageFormat::Detecting, false, t_r + page + crc + page + t_prog, 0),
        ] {
            let (done, st) = move_completion(mode, format, same);
            assert_eq!(done, want, "{mode:?} {format:?} same plane {same}");
            assert_eq!(
                (st.moves, st.copy_backs, st.unread),
                (1, (mode != CopyBack::Off && same) as u64, unread)
            );
            assert_eq!(st.move_ns, want, "{mode:?} {format:?}: GC time charged = the timeline's");
        }
        assert!("bogus".parse::<CopyBack>().unwrap_err().contains("checked"));
    }

    #[test]
    fn decode_held_on_the_lun_delays_the_next_read() {
        use crate::emulator::{EmulatorConfig, Scheduling, TimingParams};
        let g = nand_hal::Geometry {
            blocks_per_plane: 8,
            luns: 1,
            ..crate::sim::device::Preset::FlexEcc.device().geometry
        };
        let meta = ftl_core::meta::META_LEN;
        let page = ((4096 + meta + 1) as f64 * 1.25).ceil() as u64;
        for (hold, format, decode) in [
            (false, PageFormat::Correcting, 0),
            (true, PageFormat::Correcting, 9996),
            (true, PageFormat::Detecting, 1666),
        ] {
            let mut ec = EmulatorConfig::new(g);
            ec.store_data = false;
            ec.timing = TimingParams {
                t_xfer_ps_per_byte: 1_250,
                scheduling: Scheduling::LunQueues,
                ..TimingParams::CAFTL_PAPER
            };
            let mut emu = Emulator::new(ec).unwrap();
            let model = EccModel::new(&g, ErrorRates::default(), DecodeTiming::PAPER, 1);
            let mut codec = ModelCodec::new(model.clone());
            let mut spare = vec![0u8; meta + 1];
            codec.encode_as(&[], &mut spare[meta..], format);
            emu.program_page(PageId(0), &[0u8; 4096], &spare).unwrap();
            let idle = emu.idle_at_ns();
            emu.set_now_ns(idle);
            let mut nand = NoisyNand::new(&mut emu, model.clone());
            nand.decode_holds_lun = hold;
            let (mut d, mut sp) = (vec![0u8; 4096], vec![0u8; meta + 1]);
            // Two reads issued at once on one LUN: the second waits for the first's decode too.
            nand.read_page(PageId(0), &mut d, &mut sp).unwrap();
            nand.read_page(PageId(0), &mut d, &mut sp).unwrap();
            let done = nand.emu.last_op_completion_ns() - idle;
            assert_eq!(done, 2 * (25_000 + page + decode), "hold {hold} {format:?}");
            assert_eq!(nand.take_chained_decode_ns(), 2 * decode);
        }
    }
}
