//! Polar WOM codec for second writes (Reusable SSD, FAST'15): a logical page is written a second
//! time onto two invalid physical pages without erasing them, programming only cells that are
//! still erased.
//!
//! The implementable specification is `shared/design/coding-notes.md` sections 0-4. In short:
//! for the last write the WOM test channel is exactly a BEC(`1 - beta`), so the message set comes
//! from the exact Bhattacharyya recursion ([`frozen`], shipped as tables), the successive-
//! cancellation encoder is bit-packed with two bit-planes and Rate-0/Rate-1 (and REP/SPC) pruning
//! ([`polar`]), decoding is one polar transform, and encoding fails exactly when a determined
//! message index disagrees with the message. A failed codeword is retried with a new cell
//! permutation and dither ([`scramble`]); an optional list encoder ([`list`]) closes part of
//! the gap to ML encoding.
//!
//! Layers:
//! * [`WomCodec`]: one code (N, K, attempts, list size) and its message set; codeword-level
//!   [`WomCodec::encode_codeword`] / [`WomCodec::decode_codeword`] in the **paper convention**
//!   (1 = programmed, a write only sets bits), keyed by (address, codeword, attempt).
//! * [`page::WomPageCodec`]: a logical page over two physical pages in **NAND terms** (erased =
//!   1, a program only clears bits): codewords over the two data areas, raw overflow bits,
//!   attempt indices and a CRC-32C in the spare cells the first write left erased, protected
//!   with the caller's [`PageCodec`](ftl_core::policy::PageCodec) (e.g. BCH); plus the capacity
//!   calculation ([`page::PagePlan`]).
//! * [`scramble::scramble_first_write`] / [`scramble::descramble_first_write`]: the first-write
//!   scrambler (keyed by address) with the complement flag, which makes the second write's
//!   success rate hold for structured data.
//!
//! Memory is fixed by const generics: `WomCodec<W>` holds the message-set bitmap (`W` words,
//! `W >= N/64`: `WomCodec<1024>` is 8 KiB and serves every N up to 2^16), and the encoder's
//! work space is a caller-provided [`WomScratch<W, LW>`] (`8 W` words, 64 KiB at W = 1024, plus
//! `LW` words for the list encoder, see [`list::scratch_words`]). Both can be `static`s built by
//! `zeroed()` + `init`. The stack use is small (a few hundred bytes; about 10 KiB with a list of
//! 32).
//!
//! `no_std`, no `alloc`, no floating point on any encode/decode path (the `f64` recursion is in
//! the tests only), no panics on any input: lengths and configurations are checked and give
//! [`WomError`]s.
//!
//! Measured (x86-64, `tests.rs`; i.i.d. first-write state at density 1/2; `WOM_HEAVY=1` runs
//! every row of the notes' tables in about 10 s of `--release`):
//! * single-attempt SC success: N = 1024/K = 369: 0.965 (band 0.95-0.98); 8192/3201: 0.996
//!   (>= 0.985); 65536/28815: 0.955 (0.92-0.98), 2000 trials each; the 26 rows of the notes'
//!   table 2.2 agree within sampling error;
//! * a retry with a new permutation + dither succeeds 0.80-0.96 of the time after a failure
//!   (dither only: 0.45-0.51), as the notes' full-permutation model (0.81-0.93);
//! * structured first writes (0x0F, 0x55, 0x00FF, ASCII), N = 8192, K = 3359: 0/300 without
//!   scrambling, 285-292/300 with it (300/300 with one retry);
//! * at 210 % (29491 WOM bits per 4 KiB page), SC succeeds 0.70 per page at N = 2^16 and the
//!   list encoder 0.83 / 0.96 / 0.99 / 0.996 with L = 2 / 4 / 8 / 16 (1000 trials; with one
//!   permuted retry, L = 4: 0.998, L = 8: 1.000); at N = 2^13 (8 codewords) 0.11 per codeword
//!   for SC and 0.83 / 0.92 / 0.94 for L = 8 / 16 / 32.
//!
//! Speed (criterion, `benches/benches/wom.rs`): one 4 KiB page, N = 2^16: encode about 26 us,
//! decode about 8 us; 8 x 2^13: encode about 40 us, decode about 9 us (the list encoder with
//! L = 8 costs about 10x the SC encoder).

pub mod frozen;
pub mod list;
pub mod page;
pub mod polar;
pub mod scramble;
pub mod second_write;
#[cfg(test)]
mod tests;

pub use page::{PagePlan, SecondWriteLayout, WomDecoded, WomEncoded, WomPageCodec};
pub use scramble::{descramble_first_write, scramble_first_write};
pub use second_write::{fitted_codec, ftl_layout, WomSecondWrite};

use list::{ListEncoder, MAX_LIST};
use polar::{extract_message, low_mask, transform, transform_word, BitWriter, ScEncoder, ScFail};
use scramble::{codeword_seed, dither_seed, permutation_seed, SplitMix64, WordPermutation};

/// Smallest supported block length (log2).
pub const MIN_N_LOG2: u32 = 1;
/// Largest supported block length (log2): N = 65536.
pub const MAX_N_LOG2: u32 = 16;
/// Most encoding attempts per codeword (4 attempt bits).
pub const MAX_ATTEMPTS: u8 = 16;

/// Why the WOM codec could not do what was asked.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum WomError {
    /// Every attempt of this codeword failed: the page must be written as a first write
    /// elsewhere (Reusable SSD's fallback).
    EncodeFailed {
        /// The codeword that could not be encoded.
        codeword: u16,
    },
    /// A configuration is invalid: N, K, attempts or list size out of range, a message set of
    /// the wrong weight, or a page layout the code does not fit.
    BadConfig,
    /// A buffer does not have the length the configuration needs.
    BadLength,
    /// The scratch space's const generics are too small for the configuration.
    ScratchTooSmall,
    /// A spare cell the second write needs erased (raw bits or parity) is already programmed.
    SpareNotErased,
    /// The page's error-correcting code could not correct the read.
    Uncorrectable,
    /// The stored attempt index is out of range (corrupt spare).
    BadAttempt,
    /// The decoded page does not match its CRC-32C.
    CrcMismatch,
}

/// Configuration of one polar WOM code.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct WomConfig {
    /// log2 of the block length N ([`MIN_N_LOG2`]..=[`MAX_N_LOG2`]; the shipped message sets
    /// cover 10..=16).
    pub n_log2: u32,
    /// Message bits per codeword (K; the shipped sets cover N/4..=N/2).
    pub k: usize,
    /// Encoding attempts per codeword (1..=[`MAX_ATTEMPTS`]); attempt 0 uses the identity
    /// cell map, later ones a new permutation and dither each.
    pub attempts: u8,
    /// List size of the encoder: 1 = plain SC, up to [`list::MAX_LIST`].
    pub list_size: u8,
    /// Run the canonical plain SC of the reference vectors (no node pruning; slower,
    /// same success statistics). Ignored by the list encoder.
    pub canonical: bool,
}

impl WomConfig {
    /// Plain pruned SC with `attempts` attempts.
    pub const fn new(n_log2: u32, k: usize, attempts: u8) -> Self {
        WomConfig { n_log2, k, attempts, list_size: 1, canonical: false }
    }

    /// Block length N.
    pub const fn n(&self) -> usize {
        1 << self.n_log2
    }

    /// Words of a codeword vector: `max(1, N/64)`.
    pub const fn words(&self) -> usize {
        if self.n_log2 > 6 {
            1 << (self.n_log2 - 6)
        } else {
            1
        }
    }

    /// Bits needed to store an attempt index: `ceil(log2(attempts))`.
    pub const fn attempt_bits(&self) -> u32 {
        if self.attempts <= 1 {
            0
        } else {
            32 - (self.attempts as u32 - 1).leading_zeros()
        }
    }

    pub(crate) fn validate(&self) -> Result<(), WomError> {
        if self.n_log2 < MIN_N_LOG2
            || self.n_log2 > MAX_N_LOG2
            || self.k > self.n()
            || self.attempts == 0
            || self.attempts > MAX_ATTEMPTS
            || self.list_size == 0
            || self.list_size as usize > MAX_LIST
        {
            return Err(WomError::BadConfig);
        }
        Ok(())
    }
}

/// Work space of the encoder and decoder: `8 W` words for plain SC plus `LW` words for the list
/// encoder ([`list::scratch_words`]`(n_log2, list_size)`; 0 when the list is not used).
/// 64 KiB at `W = 1024`. Build it with [`WomScratch::new`] (or in a `static`).
#[derive(Clone)]
pub struct WomScratch<const W: usize, const LW: usize = 0> {
    cells: [u64; W],
    k: [u64; W],
    v: [u64; W],
    lk: [u64; W],
    lv: [u64; W],
    x: [u64; W],
    msg: [u64; W],
    perm: [u64; W],
    list: [u64; LW],
}

impl<const W: usize, const LW: usize> WomScratch<W, LW> {
    /// A zeroed work space.
    pub const fn new() -> Self {
        WomScratch {
            cells: [0; W],
            k: [0; W],
            v: [0; W],
            lk: [0; W],
            lv: [0; W],
            x: [0; W],
            msg: [0; W],
            perm: [0; W],
            list: [0; LW],
        }
    }
}

impl<const W: usize, const LW: usize> Default for WomScratch<W, LW> {
    fn default() -> Self {
        Self::new()
    }
}

/// Buffers of one encode (disjoint borrows of a [`WomScratch`]).
pub(crate) struct Work<'s> {
    pub k: &'s mut [u64],
    pub v: &'s mut [u64],
    pub lk: &'s mut [u64],
    pub lv: &'s mut [u64],
    pub x: &'s mut [u64],
    pub perm: &'s mut [u64],
    pub list: &'s mut [u64],
}

impl<const W: usize, const LW: usize> WomScratch<W, LW> {
    /// Splits into the cell buffer, the message buffer and the encoder's buffers.
    pub(crate) fn split(&mut self) -> (&mut [u64; W], &mut [u64; W], Work<'_>) {
        (
            &mut self.cells,
            &mut self.msg,
            Work {
                k: &mut self.k,
                v: &mut self.v,
                lk: &mut self.lk,
                lv: &mut self.lv,
                x: &mut self.x,
                perm: &mut self.perm,
                list: &mut self.list,
            },
        )
    }
}

/// One polar WOM code: configuration and message set (`W >= N/64` words of bitmap).
#[derive(Clone)]
pub struct WomCodec<const W: usize> {
    cfg: WomConfig,
    mset: [u64; W],
}

impl<const W: usize> WomCodec<W> {
    /// An unconfigured codec, for a `static` to be set up with [`WomCodec::init`].
    pub const fn zeroed() -> Self {
        WomCodec { cfg: WomConfig::new(MIN_N_LOG2, 0, 1), mset: [0; W] }
    }

    /// A codec whose message set comes from the shipped tables (`n_log2` in 10..=16, `k` in
    /// N/4..=N/2).
    pub fn new(cfg: WomConfig) -> Result<Self, WomError> {
        let mut c = Self::zeroed();
        c.init(cfg)?;
        Ok(c)
    }

    /// [`WomCodec::new`] in place.
    pub fn init(&mut self, cfg: WomConfig) -> Result<(), WomError> {
        cfg.validate()?;
        if cfg.words() > W || cfg.n_log2 < 6 {
            return Err(WomError::BadConfig);
        }
        frozen::message_set(cfg.n_log2, cfg.k, &mut self.mset)?;
        self.cfg = cfg;
        Ok(())
    }

    /// A codec with a caller-given message set (`bitmap`: bit `i` of word `i/64` set for the
    /// message indices; exactly `k` of the first N bits, none after). Any `n_log2` in
    /// 1..=16, e.g. the N = 16 reference code.
    pub fn with_message_set(cfg: WomConfig, bitmap: &[u64]) -> Result<Self, WomError> {
        cfg.validate()?;
        let words = cfg.words();
        if words > W || bitmap.len() < words {
            return Err(WomError::BadConfig);
        }
        let mut mset = [0u64; W];
        mset[..words].copy_from_slice(&bitmap[..words]);
        if cfg.n_log2 < 6 && mset[0] & !low_mask(cfg.n() as u32) != 0 {
            return Err(WomError::BadConfig);
        }
        if bitmap[words..].iter().any(|&w| w != 0) {
            return Err(WomError::BadConfig);
        }
        let weight: usize = mset.iter().map(|w| w.count_ones() as usize).sum();
        if weight != cfg.k {
            return Err(WomError::BadConfig);
        }
        Ok(WomCodec { cfg, mset })
    }

    /// The configuration.
    pub fn config(&self) -> &WomConfig {
        &self.cfg
    }

    /// The message-set bitmap (`max(1, N/64)` words).
    pub fn message_set(&self) -> &[u64] {
        &self.mset[..self.cfg.words()]
    }

    /// Checks the scratch's list space for the configured list size.
    fn check_list<const LW: usize>(&self) -> Result<(), WomError> {
        if self.cfg.list_size > 1 && LW < list::scratch_words(self.cfg.n_log2, self.cfg.list_size as usize) {
            return Err(WomError::ScratchTooSmall);
        }
        Ok(())
    }

    /// Encodes one codeword (paper convention: 1 = programmed). `state` holds the codeword's
    /// current cells (N bits, `max(1, N/64)` words) and receives the new cells, which only
    /// *set* bits; `msg` holds the K message bits. Tries the configured attempts, keyed by
    /// (`address`, `codeword`, attempt); returns the attempt that succeeded (to be stored for
    /// the decoder) or [`WomError::EncodeFailed`], in which case `state` is unchanged.
    pub fn encode_codeword<const LW: usize>(
        &self,
        address: u64,
        codeword: u32,
        state: &mut [u64],
        msg: &[u64],
        scratch: &mut WomScratch<W, LW>,
    ) -> Result<u8, WomError> {
        self.check_list::<LW>()?;
        let words = self.cfg.words();
        if state.len() < words || msg.len() < self.cfg.k.div_ceil(64) {
            return Err(WomError::BadLength);
        }
        let (_, _, mut work) = scratch.split();
        self.encode_attempts(address, codeword, &mut state[..words], msg, &mut work)
    }

    /// Like [`WomCodec::encode_codeword`] with a single given attempt (no retry): the building
    /// block of the retry experiments. `Err(EncodeFailed)` if it fails.
    pub fn encode_attempt<const LW: usize>(
        &self,
        address: u64,
        codeword: u32,
        attempt: u8,
        state: &mut [u64],
        msg: &[u64],
        scratch: &mut WomScratch<W, LW>,
    ) -> Result<(), WomError> {
        self.check_list::<LW>()?;
        let words = self.cfg.words();
        if state.len() < words || msg.len() < self.cfg.k.div_ceil(64) {
            return Err(WomError::BadLength);
        }
        let (_, _, mut work) = scratch.split();
        let seed = codeword_seed(address, codeword, u32::from(attempt));
        if self.try_encode(seed, attempt > 0, &mut state[..words], msg, &mut work)? {
            Ok(())
        } else {
            Err(WomError::EncodeFailed { codeword: codeword as u16 })
        }
    }

    /// The reference-convention entry point (`coding-notes.md` 1.4, the vectors): encodes with
    /// an explicit dither `g` and the identity cell map. `state` (paper convention, N bits)
    /// receives the new cells on success; `Ok(false)` on an encoding failure (state unchanged).
    pub fn encode_raw<const LW: usize>(
        &self,
        state: &mut [u64],
        dither: &[u64],
        msg: &[u64],
        scratch: &mut WomScratch<W, LW>,
    ) -> Result<bool, WomError> {
        self.check_list::<LW>()?;
        let words = self.cfg.words();
        if state.len() < words || dither.len() < words || msg.len() < self.cfg.k.div_ceil(64) {
            return Err(WomError::BadLength);
        }
        let (_, _, mut work) = scratch.split();
        for (v, &g) in work.v[..words].iter_mut().zip(dither) {
            *v = !g;
        }
        self.encode_core(&mut state[..words], msg, &mut work, None)
    }

    /// Decodes a codeword written by [`WomCodec::encode_raw`] with dither `g`: message bits into
    /// `msg` (bit-packed bytes, at least `ceil(K/8)`).
    pub fn decode_raw<const LW: usize>(
        &self,
        state: &[u64],
        dither: &[u64],
        msg: &mut [u8],
        scratch: &mut WomScratch<W, LW>,
    ) -> Result<(), WomError> {
        let words = self.cfg.words();
        if state.len() < words || dither.len() < words || msg.len() < self.cfg.k.div_ceil(8) {
            return Err(WomError::BadLength);
        }
        let (_, _, work) = scratch.split();
        let x = &mut work.x[..words];
        for ((o, &s), &g) in x.iter_mut().zip(state).zip(dither) {
            *o = s ^ g;
        }
        let mut wr = BitWriter::new(msg, 0);
        self.finish_decode(x, &mut wr);
        wr.finish();
        Ok(())
    }

    fn finish_decode(&self, x: &mut [u64], out: &mut BitWriter<'_>) {
        if self.cfg.n_log2 < 6 {
            x[0] = transform_word(x[0] & low_mask(self.cfg.n() as u32), self.cfg.n() as u32);
        } else {
            transform(x);
        }
        extract_message(x, self.message_set(), out);
    }

    pub(crate) fn encode_attempts(
        &self,
        address: u64,
        codeword: u32,
        state: &mut [u64],
        msg: &[u64],
        work: &mut Work<'_>,
    ) -> Result<u8, WomError> {
        for a in 0..self.cfg.attempts {
            let seed = codeword_seed(address, codeword, u32::from(a));
            if self.try_encode(seed, a > 0, state, msg, work)? {
                return Ok(a);
            }
        }
        Err(WomError::EncodeFailed { codeword: codeword.min(u32::from(u16::MAX)) as u16 })
    }

    /// One attempt with the attempt seed `seed`, permuted or not. `Ok(true)` on success (state
    /// updated), `Ok(false)` on an encoding failure (state unchanged).
    fn try_encode(
        &self,
        seed: u64,
        permute: bool,
        state: &mut [u64],
        msg: &[u64],
        w: &mut Work<'_>,
    ) -> Result<bool, WomError> {
        // V = !g: a programmed cell needs x = 1 ^ g.
        let mut r = SplitMix64::new(dither_seed(seed));
        for v in w.v[..state.len()].iter_mut() {
            *v = !r.next_u64();
        }
        self.encode_core(state, msg, w, if permute { Some(permutation_seed(seed)) } else { None })
    }

    /// Encodes with `w.v` = !dither already filled; `perm`: the permutation seed, if any.
    fn encode_core(
        &self,
        state: &mut [u64],
        msg: &[u64],
        w: &mut Work<'_>,
        perm: Option<u64>,
    ) -> Result<bool, WomError> {
        let words = state.len();
        let nmask = low_mask(self.cfg.n().min(64) as u32);
        let perm = match perm {
            Some(ps) if self.cfg.n_log2 >= 6 => {
                let p = WordPermutation::generate(ps, &mut w.perm[..words]);
                p.gather(state, &mut w.k[..words]);
                Some(p)
            }
            _ => {
                w.k[..words].copy_from_slice(state);
                None
            }
        };
        if words == 1 {
            w.k[0] &= nmask;
            w.v[0] &= nmask;
        }
        let res = if self.cfg.list_size > 1 {
            let seed = w.v.first().copied().unwrap_or(0) ^ w.k.first().copied().unwrap_or(0);
            ListEncoder::new(
                self.message_set(),
                msg,
                self.cfg.list_size as usize,
                self.cfg.n_log2,
                w.list,
                seed,
            )
            .and_then(|mut e| e.encode(self.cfg.n_log2, &w.k[..words], &w.v[..words], &mut w.x[..words]))
        } else {
            ScEncoder::new(self.message_set(), msg, !self.cfg.canonical).encode(
                self.cfg.n_log2,
                &w.k[..words],
                &w.v[..words],
                &mut w.x[..words],
                w.lk,
                w.lv,
            )
        };
        match res {
            Ok(()) => {}
            Err(ScFail::Conflict) => return Ok(false),
            Err(ScFail::BadLength) => return Err(WomError::ScratchTooSmall),
        }
        // New cells s' = x ^ g = !(x ^ V); they must cover the old ones (s <= s').
        let mut viol = 0;
        for i in 0..words {
            let s_new = !(w.x[i] ^ w.v[i]) & if words == 1 { nmask } else { !0 };
            viol |= w.k[i] & !s_new;
            w.x[i] = s_new;
        }
        if viol != 0 {
            return Ok(false);
        }
        match perm {
            Some(p) => p.scatter(&w.x[..words], state),
            None => state.copy_from_slice(&w.x[..words]),
        }
        Ok(true)
    }

    /// Decodes one codeword written with `attempt` at (`address`, `codeword`): `state` is the
    /// codeword's cells (paper convention), the K message bits are appended to `out`. `x`, `perm`:
    /// work buffers of `max(1, N/64)` words.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn decode_into(
        &self,
        address: u64,
        codeword: u32,
        attempt: u8,
        state: &[u64],
        x: &mut [u64],
        perm: &mut [u64],
        out: &mut BitWriter<'_>,
    ) -> Result<(), WomError> {
        let words = self.cfg.words();
        if state.len() < words || x.len() < words || perm.len() < words {
            return Err(WomError::BadLength);
        }
        if attempt >= self.cfg.attempts {
            return Err(WomError::BadAttempt);
        }
        let seed = codeword_seed(address, codeword, u32::from(attempt));
        let x = &mut x[..words];
        let mut r = SplitMix64::new(dither_seed(seed));
        if attempt > 0 && self.cfg.n_log2 >= 6 {
            WordPermutation::generate(permutation_seed(seed), &mut perm[..words]).gather(&state[..words], x);
            for w in x.iter_mut() {
                *w ^= r.next_u64();
            }
        } else {
            for (w, &s) in x.iter_mut().zip(state) {
                *w = s ^ r.next_u64();
            }
        }
        self.finish_decode(x, out);
        Ok(())
    }

    /// Decodes one codeword (paper convention): `state` holds its cells, the K message bits go
    /// to `msg` (bit-packed bytes, LSB first; at least `ceil(K/8)` bytes).
    pub fn decode_codeword<const LW: usize>(
        &self,
        address: u64,
        codeword: u32,
        attempt: u8,
        state: &[u64],
        msg: &mut [u8],
        scratch: &mut WomScratch<W, LW>,
    ) -> Result<(), WomError> {
        if msg.len() < self.cfg.k.div_ceil(8) {
            return Err(WomError::BadLength);
        }
        let (_, _, work) = scratch.split();
        let mut wr = BitWriter::new(msg, 0);
        self.decode_into(address, codeword, attempt, state, work.x, work.perm, &mut wr)?;
        wr.finish();
        Ok(())
    }
}
