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

use ftl_core::crc32c::{crc32c, crc32c_append};
use ftl_core::policy::{CodecError, PageCodec};
use nand_hal::Geometry;

use super::bch::{Bch, EccState};
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
#[derive(Clone)]
pub struct BchCodec<const FIELD: usize, const WORDS: usize> {
    bch: Bch<FIELD, WORDS>,
    cw_bytes: usize,
    page_bytes: usize,
    codewords: usize,
    mask_full: [u8; MAX_ECC_BYTES],
    mask_last: [u8; MAX_ECC_BYTES],
    crc_mask: u32,
}

impl<const FIELD: usize, const WORDS: usize> BchCodec<FIELD, WORDS> {
    /// An uninitialised codec, for a `static` to be set up with [`BchCodec::init`].
    pub const fn zeroed() -> Self {
        BchCodec {
            bch: Bch::zeroed(),
            cw_bytes: 0,
            page_bytes: 0,
            codewords: 0,
            mask_full: [0; MAX_ECC_BYTES],
            mask_last: [0; MAX_ECC_BYTES],
            crc_mask: 0,
        }
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
        let codewords = page_bytes.div_ceil(codeword_bytes);
        let last = page_bytes - (codewords - 1) * codeword_bytes;
        let max = self.bch.max_data_bytes();
        if codeword_bytes.min(page_bytes) > max || last + CRC_BYTES > max {
            return Err(BchError::TooLong);
        }
        self.cw_bytes = codeword_bytes;
        self.page_bytes = page_bytes;
        self.codewords = codewords;
        let eb = self.bch.ecc_bytes();
        ff_mask(&self.bch, codeword_bytes, &mut self.mask_full[..eb])?;
        ff_mask(&self.bch, last + CRC_BYTES, &mut self.mask_last[..eb])?;
        let ff = [0xFFu8; 64];
        let mut crc = 0u32;
        let mut left = page_bytes;
        while left > 0 {
            let k = left.min(ff.len());
            crc = crc32c_append(crc, &ff[..k]);
            left -= k;
        }
        self.crc_mask = !crc;
        Ok(())
    }

    /// The BCH code.
    pub fn bch(&self) -> &Bch<FIELD, WORDS> {
        &self.bch
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

impl<const FIELD: usize, const WORDS: usize> PageCodec for BchCodec<FIELD, WORDS> {
    fn spare_len(&self) -> usize {
        self.codewords * self.bch.ecc_bytes() + CRC_BYTES
    }

    fn encode(&mut self, data: &[u8], out: &mut [u8]) {
        let sl = self.spare_len();
        if data.len() != self.page_bytes || out.len() < sl || self.codewords == 0 {
            out.fill(0);
            return;
        }
        let eb = self.bch.ecc_bytes();
        let crc = (crc32c(data) ^ self.crc_mask).to_le_bytes();
        let mut ecc = [0u8; MAX_ECC_BYTES];
        for i in 0..self.codewords {
            let (s, e) = self.chunk(i);
            let mut st = EccState::new();
            self.bch.update(&mut st, &data[s..e]);
            let mask = if i + 1 == self.codewords {
                self.bch.update(&mut st, &crc);
                &self.mask_last
            } else {
                &self.mask_full
            };
            if self.bch.finish(&st, &mut ecc[..eb]).is_err() {
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
        let eb = self.bch.ecc_bytes();
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
            self.bch.update(&mut st, &data[s..e]);
            let mut msg_len = e - s;
            if last {
                self.bch.update(&mut st, &crc);
                msg_len += CRC_BYTES;
            }
            let locs =
                self.bch.decode_state(msg_len, &st, &recv[..eb]).map_err(|_| CodecError::Uncorrectable)?;
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
