//! [`BchCodec`]: the `PageCodec` that protects a page with BCH per codeword plus a CRC-32C over
//! the whole page.
//!
//! Layout of the codec's spare bytes (`spare_len() = codewords * ecc_bytes + 4`):
//!
//! ```text
//! [ ecc(cw 0) | ecc(cw 1) | ... | ecc(cw k-1) | crc (4 bytes, little-endian) ]
//! ```
//!
//! * The page data is split into `k = ceil(page_bytes / codeword_bytes)` codewords; the last one
//!   may be shorter.
//! * The CRC protects the data against what BCH cannot guarantee: more than t errors in a
//!   codeword can decode to a *different* codeword, which the CRC then rejects
//!   (undetected-error probability about 2^-32 per such event).
//! * The CRC's own bytes are part of the **last codeword's message** (`last chunk || crc`), so a
//!   bit error in them is corrected like any data bit instead of condemning a good page, and the
//!   "up to t errors per codeword are corrected" guarantee covers every stored bit: data, CRC and
//!   parity. (Protecting the CRC outside BCH would either leave it unprotected, turning one flipped
//!   CRC bit into an uncorrectable read, or cost a separate codeword's parity.)
//! * Erased pages: as the Linux NAND stack, each stored ECC is `bch(msg) XOR eccmask` with
//!   `eccmask = !bch(0xFF...)` for that message length, and likewise the stored CRC is
//!   `crc32c(data) XOR !crc32c(0xFF * page_bytes)`. An erased page (all 0xFF data and spare) is
//!   therefore a valid codeword with a matching CRC: it decodes clean, and a few bit flips in it
//!   are corrected like in any page. The masks are bijections, so they change no detection or
//!   correction property.
//!
//! `decode` corrects the data in place and returns the number of bits corrected (data, CRC and
//! parity bits; the count a scrubber compares against its refresh threshold). It returns
//! `Err(Uncorrectable)` when any codeword fails to decode, when the CRC mismatches after
//! correction, or when the buffers do not have the configured lengths. After an `Err` the data
//! buffer may be partly corrected; it must not be used. `encode` with wrong lengths writes zeros
//! (a spare that will not decode) rather than panic.

use core::borrow::Borrow;

use ftl_core::crc32c::{crc32c, crc32c_append};
use ftl_core::policy::{CodecError, PageCodec};
use nand_hal::Geometry;

use super::bch::{Bch, EccState};
use super::fast;
use super::{BchError, MAX_ECC_BYTES};

/// Bytes of the CRC-32C the codec stores.
pub const CRC_BYTES: usize = 4;

/// The smallest m (Linux' choice, `fls(1 + 8 * bytes)`, raised if needed) for which a codeword of
/// `codeword_bytes` data bytes plus the 4 CRC bytes plus `m*t` parity bits fits in `2^m - 1`
/// bits, with `m*t < 2^m - 1`; `None` if no m in 5..=15 does.
pub const fn codec_m(codeword_bytes: usize, t: u32) -> Option<u32> {
    let msg_bits = 8 * (codeword_bytes + CRC_BYTES);
    let mut m = 5u32;
    while m <= 15 {
        let n = (1usize << m) - 1;
        let p = (m * t) as usize;
        if p < n && msg_bits + p <= n {
            return Some(m);
        }
        m += 1;
    }
    None
}

/// BCH + CRC-32C page codec. `FIELD` and `WORDS` size the tables (see [`Bch`]); e.g.
/// `BchCodec<8192, 1>` for m = 13, t = 4 (the MT29F4G08's requirement: 48 KiB of tables),
/// `BchCodec<16384, 4>` for m = 14 up to t = 18.
///
/// `S` is where the tables are: inside the codec (`Bch<FIELD, WORDS>`, the default, built at run
/// time by [`BchCodec::init`]), or a reference to a `Bch` built elsewhere, e.g.
/// `&'static Bch<8192, 1>` for a `static` built at compile time by [`Bch::new_const`], which
/// keeps the tables in flash ([`BchCodec::with_tables`]; the codec itself is then about 260
/// bytes).
#[derive(Clone)]
pub struct BchCodec<const FIELD: usize, const WORDS: usize, S = Bch<FIELD, WORDS>> {
    bch: S,
    cw_bytes: usize,
    page_bytes: usize,
    codewords: usize,
    mask_full: [u8; MAX_ECC_BYTES],
    mask_last: [u8; MAX_ECC_BYTES],
    crc_mask: u32,
    /// The `ecc_bits` used bits of a one-word remainder (left-justified).
    word_mask: u64,
}

impl<const FIELD: usize, const WORDS: usize> BchCodec<FIELD, WORDS> {
    /// An uninitialised codec, for a `static` to be set up with [`BchCodec::init`].
    pub const fn zeroed() -> Self {
        Self::unlaid(Bch::zeroed())
    }

    /// A codec for BCH(m, t) over codewords of `codeword_bytes` data bytes, pages of
    /// `page_bytes` data bytes.
    pub fn new(m: u32, t: u32, codeword_bytes: usize, page_bytes: usize) -> Result<Self, BchError> {
        let mut c = Self::zeroed();
        c.init(m, t, codeword_bytes, page_bytes)?;
        Ok(c)
    }

    /// A codec with the strength the device requires: `geometry.ecc.bits` per
    /// `geometry.ecc.codeword_bytes`, m from [`codec_m`].
    pub fn for_geometry(geometry: &Geometry) -> Result<Self, BchError> {
        let mut c = Self::zeroed();
        c.init_for_geometry(geometry)?;
        Ok(c)
    }

    /// [`BchCodec::for_geometry`] in place.
    pub fn init_for_geometry(&mut self, geometry: &Geometry) -> Result<(), BchError> {
        let t = geometry.ecc.bits as u32;
        let cw = geometry.ecc.codeword_bytes as usize;
        if t == 0 {
            return Err(BchError::UnsupportedStrength);
        }
        let m = codec_m(cw, t).ok_or(BchError::UnsupportedStrength)?;
        self.init(m, t, cw, geometry.data_bytes as usize)
    }

    /// [`BchCodec::new`] in place.
    pub fn init(&mut self, m: u32, t: u32, codeword_bytes: usize, page_bytes: usize) -> Result<(), BchError> {
        if codeword_bytes == 0 || page_bytes == 0 {
            return Err(BchError::BadLength);
        }
        self.bch.init(m, t, None)?;
        self.set_layout(codeword_bytes, page_bytes)
    }
}

impl<'a, const FIELD: usize, const WORDS: usize> BchCodec<FIELD, WORDS, &'a Bch<FIELD, WORDS>> {
    /// A codec over tables built elsewhere (e.g. a `static` from [`Bch::new_const`], in flash),
    /// for codewords of `codeword_bytes` data bytes and pages of `page_bytes` data bytes.
    pub fn with_tables(
        bch: &'a Bch<FIELD, WORDS>,
        codeword_bytes: usize,
        page_bytes: usize,
    ) -> Result<Self, BchError> {
        let mut c = Self::unlaid(bch);
        c.set_layout(codeword_bytes, page_bytes)?;
        Ok(c)
    }

    /// [`BchCodec::with_tables`] for a device: the tables' t must be at least the device's
    /// requirement (`geometry.ecc.bits` per `geometry.ecc.codeword_bytes`), else
    /// [`BchError::UnsupportedStrength`].
    pub fn with_tables_for_geometry(
        bch: &'a Bch<FIELD, WORDS>,
        geometry: &Geometry,
    ) -> Result<Self, BchError> {
        if bch.t() == 0 || bch.t() < geometry.ecc.bits as u32 {
            return Err(BchError::UnsupportedStrength);
        }
        Self::with_tables(bch, geometry.ecc.codeword_bytes as usize, geometry.data_bytes as usize)
    }
}

impl<const FIELD: usize, const WORDS: usize, S> BchCodec<FIELD, WORDS, S> {
    /// The tables `bch` with no page layout yet.
    const fn unlaid(bch: S) -> Self {
        BchCodec {
            bch,
            cw_bytes: 0,
            page_bytes: 0,
            codewords: 0,
            mask_full: [0; MAX_ECC_BYTES],
            mask_last: [0; MAX_ECC_BYTES],
            crc_mask: 0,
            word_mask: 0,
        }
    }
}

impl<const FIELD: usize, const WORDS: usize, S: Borrow<Bch<FIELD, WORDS>>> BchCodec<FIELD, WORDS, S> {
    /// Sets the page layout (codeword and page sizes, erased-page masks) for the code in `bch`.
    fn set_layout(&mut self, codeword_bytes: usize, page_bytes: usize) -> Result<(), BchError> {
        if codeword_bytes == 0 || page_bytes == 0 {
            return Err(BchError::BadLength);
        }
        let bch = self.bch.borrow();
        if bch.t() == 0 {
            return Err(BchError::UnsupportedStrength);
        }
        let codewords = page_bytes.div_ceil(codeword_bytes);
        let last = page_bytes - (codewords - 1) * codeword_bytes;
        let max = bch.max_data_bytes();
        if codeword_bytes.min(page_bytes) > max || last + CRC_BYTES > max {
            return Err(BchError::TooLong);
        }
        let eb = bch.ecc_bytes();
        ff_mask(bch, codeword_bytes, &mut self.mask_full[..eb])?;
        ff_mask(bch, last + CRC_BYTES, &mut self.mask_last[..eb])?;
        self.cw_bytes = codeword_bytes;
        self.page_bytes = page_bytes;
        self.codewords = codewords;
        let ff = [0xFFu8; 64];
        let mut crc = 0u32;
        let mut left = page_bytes;
        while left > 0 {
            let k = left.min(ff.len());
            crc = crc32c_append(crc, &ff[..k]);
            left -= k;
        }
        self.crc_mask = !crc;
        let bits = bch.ecc_bits().min(64);
        self.word_mask = if bits == 0 { 0 } else { !0u64 << (64 - bits) };
        Ok(())
    }

    /// The BCH code.
    pub fn bch(&self) -> &Bch<FIELD, WORDS> {
        self.bch.borrow()
    }

    /// Codewords per page.
    pub fn codewords(&self) -> usize {
        self.codewords
    }

    /// Data bytes per codeword (the last may be shorter).
    pub fn codeword_bytes(&self) -> usize {
        self.cw_bytes
    }

    /// Page data bytes the codec is configured for.
    pub fn page_bytes(&self) -> usize {
        self.page_bytes
    }

    /// [`PageCodec::encode`] on the one-word fast path (`out` checked by the caller): the
    /// remainders straight from registers, no [`EccState`].
    fn encode_fast(&self, enc: &[u64; 2048], data: &[u8], out: &mut [u8]) {
        let eb = self.bch.borrow().ecc_bytes();
        let k = self.codewords;
        let mut c = !0u32;
        for i in 0..k {
            let (s, e) = self.chunk(i);
            let mut r = 0u64;
            fast::update(enc, &mut r, &mut c, &data[s..e]);
            let mask = if i + 1 == k {
                let crc = (!c ^ self.crc_mask).to_le_bytes();
                fast::update_bch(enc, &mut r, &crc);
                out[k * eb..k * eb + CRC_BYTES].copy_from_slice(&crc);
                &self.mask_last
            } else {
                &self.mask_full
            };
            for ((o, &p), &m) in out[i * eb..(i + 1) * eb].iter_mut().zip(&r.to_be_bytes()).zip(&mask[..eb]) {
                *o = p ^ m;
            }
        }
    }

    /// [`PageCodec::decode`] on the one-word fast path (lengths checked by the caller): a
    /// codeword whose remainder matches its stored parity costs no syndrome; the page CRC comes
    /// from the BCH pass unless a data bit was corrected.
    fn decode_fast(&self, enc: &[u64; 2048], data: &mut [u8], stored: &[u8]) -> Result<u32, CodecError> {
        let bch = self.bch.borrow();
        let eb = bch.ecc_bytes();
        let k = self.codewords;
        let mut crc = [0u8; CRC_BYTES];
        crc.copy_from_slice(&stored[k * eb..k * eb + CRC_BYTES]);
        let mut total = 0u32;
        let mut c = !0u32;
        let mut data_fixed = false;
        for i in 0..k {
            let (s, e) = self.chunk(i);
            let last = i + 1 == k;
            let mask = if last { &self.mask_last } else { &self.mask_full };
            let mut recv = [0u8; 8];
            let mut want = 0u64;
            for (j, ((r, &b), &m)) in
                recv.iter_mut().zip(&stored[i * eb..(i + 1) * eb]).zip(&mask[..eb]).enumerate()
            {
                *r = b ^ m;
                want |= (*r as u64) << (56 - 8 * j);
            }
            let mut r = 0u64;
            fast::update(enc, &mut r, &mut c, &data[s..e]);
            let mut msg_len = e - s;
            if last {
                fast::update_bch(enc, &mut r, &crc);
                msg_len += CRC_BYTES;
            }
            if (r ^ want) & self.word_mask == 0 {
                continue;
            }
            let locs = bch
                .decode_state(msg_len, &EccState::from_word(r), &recv[..eb])
                .map_err(|_| CodecError::Uncorrectable)?;
            let dbits = 8 * (e - s);
            for &p in locs.as_slice() {
                let p = p as usize;
                if p < dbits {
                    data[s + p / 8] ^= 1 << (p % 8);
                    data_fixed = true;
                } else if last && p < dbits + 8 * CRC_BYTES {
                    let q = p - dbits;
                    crc[q / 8] ^= 1 << (q % 8);
                }
            }
            total += locs.len() as u32;
        }
        let page_crc = if data_fixed {
            let mut c2 = !0u32;
            fast::update_crc(&mut c2, data);
            !c2
        } else {
            !c
        };
        if page_crc ^ self.crc_mask != u32::from_le_bytes(crc) {
            return Err(CodecError::Uncorrectable);
        }
        Ok(total)
    }

    /// The one-word encoder table when the fast path applies (remainder in one `u64`, parity in
    /// at most 8 bytes).
    fn fast_table(&self) -> Option<&[u64; 2048]> {
        let bch = self.bch.borrow();
        if bch.ecc_bytes() <= 8 {
            bch.one_word_table()
        } else {
            None
        }
    }

    fn chunk(&self, i: usize) -> (usize, usize) {
        let start = i * self.cw_bytes;
        (start, (start + self.cw_bytes).min(self.page_bytes))
    }
}

/// `out = !parity(0xFF * len)`.
fn ff_mask<const F: usize, const W: usize>(
    bch: &Bch<F, W>,
    len: usize,
    out: &mut [u8],
) -> Result<(), BchError> {
    let ff = [0xFFu8; 64];
    let mut st = EccState::new();
    let mut left = len;
    while left > 0 {
        let k = left.min(ff.len());
        bch.update(&mut st, &ff[..k]);
        left -= k;
    }
    bch.finish(&st, out)?;
    for b in out.iter_mut() {
        *b = !*b;
    }
    Ok(())
}

impl<const FIELD: usize, const WORDS: usize, S: Borrow<Bch<FIELD, WORDS>>> PageCodec
    for BchCodec<FIELD, WORDS, S>
{
    fn spare_len(&self) -> usize {
        self.codewords * self.bch().ecc_bytes() + CRC_BYTES
    }

    fn encode(&mut self, data: &[u8], out: &mut [u8]) {
        let sl = self.spare_len();
        if data.len() != self.page_bytes || out.len() < sl || self.codewords == 0 {
            out.fill(0);
            return;
        }
        if let Some(enc) = self.fast_table() {
            self.encode_fast(enc, data, out);
            return;
        }
        let bch = self.bch.borrow();
        let eb = bch.ecc_bytes();
        let crc = (crc32c(data) ^ self.crc_mask).to_le_bytes();
        let mut ecc = [0u8; MAX_ECC_BYTES];
        for i in 0..self.codewords {
            let (s, e) = self.chunk(i);
            let mut st = EccState::new();
            bch.update(&mut st, &data[s..e]);
            let mask = if i + 1 == self.codewords {
                bch.update(&mut st, &crc);
                &self.mask_last
            } else {
                &self.mask_full
            };
            if bch.finish(&st, &mut ecc[..eb]).is_err() {
                out.fill(0);
                return;
            }
            for ((o, &p), &k) in out[i * eb..(i + 1) * eb].iter_mut().zip(&ecc[..eb]).zip(&mask[..eb]) {
                *o = p ^ k;
            }
        }
        out[self.codewords * eb..sl].copy_from_slice(&crc);
    }

    fn decode(&mut self, data: &mut [u8], stored: &[u8]) -> Result<u32, CodecError> {
        let sl = self.spare_len();
        if data.len() != self.page_bytes || stored.len() < sl || self.codewords == 0 {
            return Err(CodecError::Uncorrectable);
        }
        if let Some(enc) = self.fast_table() {
            return self.decode_fast(enc, data, stored);
        }
        let bch = self.bch.borrow();
        let eb = bch.ecc_bytes();
        let k = self.codewords;
        let mut crc = [0u8; CRC_BYTES];
        crc.copy_from_slice(&stored[k * eb..sl]);
        let mut recv = [0u8; MAX_ECC_BYTES];
        let mut total = 0u32;
        for i in 0..k {
            let (s, e) = self.chunk(i);
            let last = i + 1 == k;
            let mask = if last { &self.mask_last } else { &self.mask_full };
            for ((r, &b), &m) in recv[..eb].iter_mut().zip(&stored[i * eb..(i + 1) * eb]).zip(&mask[..eb]) {
                *r = b ^ m;
            }
            let mut st = EccState::new();
            bch.update(&mut st, &data[s..e]);
            let mut msg_len = e - s;
            if last {
                bch.update(&mut st, &crc);
                msg_len += CRC_BYTES;
            }
            // Zero remainder difference: a clean codeword, no syndromes computed.
            let locs = bch.decode_state(msg_len, &st, &recv[..eb]).map_err(|_| CodecError::Uncorrectable)?;
            let dbits = 8 * (e - s);
            for &p in locs.as_slice() {
                let p = p as usize;
                if p < dbits {
                    data[s + p / 8] ^= 1 << (p % 8);
                } else if last && p < dbits + 8 * CRC_BYTES {
                    let q = p - dbits;
                    crc[q / 8] ^= 1 << (q % 8);
                }
                // Otherwise a parity bit: nothing to fix in the caller's buffers.
            }
            total += locs.len() as u32;
        }
        if crc32c(data) ^ self.crc_mask != u32::from_le_bytes(crc) {
            return Err(CodecError::Uncorrectable);
        }
        Ok(total)
    }
}
