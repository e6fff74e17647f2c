//! Shared randomness of the WOM code: the SplitMix64 generator, the seeds derived from a physical
//! address, the per-codeword dither and retry permutation, and the first-write scrambler.
//!
//! * [`SplitMix64`] is the generator of the reference vectors (`coding-notes.md` 1.7): bit `j` of
//!   a stream is bit `j % 64` of output word `j / 64`, and a request for `n` bits takes
//!   `ceil(n / 64)` fresh words.
//! * [`codeword_seed`] keys a codeword's dither and permutation by (address, codeword, attempt),
//!   so the decoder regenerates them from the address it reads from; nothing random is stored.
//! * The retry permutation ([`WordPermutation`]) permutes the codeword's 64-cell words (a
//!   Fisher-Yates shuffle) and rotates each word by its own amount. A dither-only retry sees the
//!   same erasure pattern as the failed attempt (conditional success 0.33-0.48 in the notes'
//!   model); changing the cell-to-position map makes the retry nearly independent. The
//!   word-granular map is what keeps a retry cheap: applying it costs one pass over `N / 64`
//!   words instead of a gather of `N` single bits (measured in the tests: see `mod.rs`). The
//!   reference bit-level Fisher-Yates of the vectors (`j = next() % (i + 1)`) is
//!   [`fisher_yates_reference`]; the word shuffle is the same algorithm with a multiply-shift
//!   range reduction instead of the division (`(next() >> 32) * (i + 1) >> 32`), which is cheap
//!   on a Cortex-M.
//! * The first-write scrambler ([`scramble_first_write`]) XORs a page with a keystream seeded by
//!   its address and complements the result when more than half of its cells would be
//!   programmed (NAND bit 0), returning the flag the FTL stores with the page. This bounds the
//!   first-write density by 1/2 and makes structured data (0x0F, 0x55, ASCII) look i.i.d. to
//!   the second write's encoder, which otherwise fails on it almost always.
//!
//! `no_std`, no `alloc`, no floating point; no panics on any input (length mismatches are
//! errors).

use super::WomError;

/// SplitMix64 (Steele, Lea, Flood): the generator of the reference vectors.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    /// A generator whose first output is `mix64(seed + 0x9E3779B97F4A7C15)`.
    pub const fn new(seed: u64) -> Self {
        SplitMix64 { state: seed }
    }

    /// The next 64-bit output.
    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        mix64(self.state)
    }

    /// Fills `out` with consecutive outputs (the stream's bits, 64 per word).
    #[inline]
    pub fn fill(&mut self, out: &mut [u64]) {
        for w in out {
            *w = self.next_u64();
        }
    }
}

/// The SplitMix64 output function (a strong 64-bit mixer, a bijection).
#[inline]
pub const fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Domain separators, so that the dither, the permutation and the scrambler of one address
/// draw independent streams.
const DITHER_DOMAIN: u64 = 0x5749_4F4D_4449_5448; // "WOMDITH"
const PERM_DOMAIN: u64 = 0x5749_4F4D_5045_524D; // "WOMPERM"
const SCRAMBLE_DOMAIN: u64 = 0x5749_4F4D_5343_524D; // "WOMSCRM"

/// The seed of codeword `codeword`'s attempt `attempt` of the second write at `address`: the base
/// of its dither ([`dither_seed`]) and permutation ([`permutation_seed`]).
#[inline]
pub const fn codeword_seed(address: u64, codeword: u32, attempt: u32) -> u64 {
    mix64(mix64(address) ^ (((codeword as u64) << 32) | attempt as u64))
}

/// Seed of the dither stream of a codeword attempt.
#[inline]
pub const fn dither_seed(seed: u64) -> u64 {
    mix64(seed ^ DITHER_DOMAIN)
}

/// Seed of the permutation of a codeword attempt.
#[inline]
pub const fn permutation_seed(seed: u64) -> u64 {
    mix64(seed ^ PERM_DOMAIN)
}

/// Fills `out` with a dither stream (`64 * out.len()` bits) from `seed`.
#[inline]
pub fn dither(seed: u64, out: &mut [u64]) {
    SplitMix64::new(seed).fill(out);
}

/// The reference Fisher-Yates shuffle of the vectors: `out` = 0..len, then for `i` from `len-1`
/// down to 1 swap `out[i]` with `out[next() % (i + 1)]`. (Seed 1, 16 elements:
/// `[2, 11, 10, 6, 7, 13, 14, 0, 12, 5, 15, 9, 3, 8, 4, 1]`.)
pub fn fisher_yates_reference(seed: u64, out: &mut [u32]) {
    for (i, o) in out.iter_mut().enumerate() {
        *o = i as u32;
    }
    let mut r = SplitMix64::new(seed);
    for i in (1..out.len()).rev() {
        let j = (r.next_u64() % (i as u64 + 1)) as usize;
        out.swap(i, j);
    }
}

/// A permutation of a codeword's cells at word granularity: position word `j` of the codeword
/// takes cell word `source(j)` rotated left by `rotation(j)`. Stored as one `u64` per word
/// (`source | rotation << 32`) in a caller buffer of `N / 64` words.
pub struct WordPermutation<'a> {
    entries: &'a mut [u64],
}

impl<'a> WordPermutation<'a> {
    /// Builds the permutation of `entries.len()` words from `seed` into `entries`: a Fisher-Yates
    /// shuffle of the word indices (multiply-shift range reduction) and a uniform rotation in
    /// 0..64 per word.
    pub fn generate(seed: u64, entries: &'a mut [u64]) -> Self {
        for (i, e) in entries.iter_mut().enumerate() {
            *e = i as u64;
        }
        let mut r = SplitMix64::new(seed);
        for i in (1..entries.len()).rev() {
            let j = (((r.next_u64() >> 32) * (i as u64 + 1)) >> 32) as usize;
            entries.swap(i, j);
        }
        let mut bits = 0u64;
        let mut left = 0u32;
        for e in entries.iter_mut() {
            if left < 6 {
                bits = r.next_u64();
                left = 64;
            }
            *e |= (bits & 63) << 32;
            bits >>= 6;
            left -= 6;
        }
        WordPermutation { entries }
    }

    /// Gathers `cells` (the codeword's cells in storage order) into `out` (codeword positions).
    /// Both slices have the permutation's length; shorter ones are processed up to the shortest.
    #[inline]
    pub fn gather(&self, cells: &[u64], out: &mut [u64]) {
        for (o, &e) in out.iter_mut().zip(self.entries.iter()) {
            let src = (e & 0xFFFF_FFFF) as usize;
            let rot = (e >> 32) as u32;
            *o = cells.get(src).copied().unwrap_or(0).rotate_left(rot);
        }
    }

    /// The inverse of [`WordPermutation::gather`]: scatters codeword positions `pos` back to
    /// storage order `cells`.
    #[inline]
    pub fn scatter(&self, pos: &[u64], cells: &mut [u64]) {
        for (&p, &e) in pos.iter().zip(self.entries.iter()) {
            let dst = (e & 0xFFFF_FFFF) as usize;
            let rot = (e >> 32) as u32;
            if let Some(c) = cells.get_mut(dst) {
                *c = p.rotate_right(rot);
            }
        }
    }
}

/// Keystream seed of the first-write scrambler at `address`.
#[inline]
const fn scramble_seed(address: u64) -> u64 {
    mix64(address ^ SCRAMBLE_DOMAIN)
}

/// XORs `data` with the scrambler keystream of `address` (8 bytes per generator output,
/// little-endian) into `out`. An involution.
fn keystream_xor(address: u64, data: &[u8], out: &mut [u8], complement: bool) {
    let mut r = SplitMix64::new(scramble_seed(address));
    let inv = if complement { 0xFF } else { 0 };
    let mut dc = data.chunks_exact(8);
    let mut oc = out.chunks_exact_mut(8);
    for (d, o) in (&mut dc).zip(&mut oc) {
        let mut w = [0u8; 8];
        w.copy_from_slice(d);
        let x = u64::from_le_bytes(w) ^ r.next_u64() ^ if complement { !0 } else { 0 };
        o.copy_from_slice(&x.to_le_bytes());
    }
    let ks = r.next_u64().to_le_bytes();
    for ((o, &d), &k) in oc.into_remainder().iter_mut().zip(dc.remainder()).zip(ks.iter()) {
        *o = d ^ k ^ inv;
    }
}

/// Scrambles a first write: `out = data XOR keystream(address)`, complemented when more than half
/// of the page's cells would be programmed (NAND bit 0). Returns the complement flag, which the
/// FTL stores with the page (e.g. in its metadata) and passes to [`descramble_first_write`].
/// `out` must have `data`'s length.
pub fn scramble_first_write(address: u64, data: &[u8], out: &mut [u8]) -> Result<bool, WomError> {
    if out.len() != data.len() {
        return Err(WomError::BadLength);
    }
    keystream_xor(address, data, out, false);
    let ones: usize = out.iter().map(|b| b.count_ones() as usize).sum();
    let zeros = 8 * out.len() - ones;
    let complement = 2 * zeros > 8 * out.len();
    if complement {
        for b in out.iter_mut() {
            *b = !*b;
        }
    }
    Ok(complement)
}

/// Undoes [`scramble_first_write`]: `out = stored XOR keystream(address)`, complemented first if
/// `complemented`. `out` must have `stored`'s length.
pub fn descramble_first_write(
    address: u64,
    stored: &[u8],
    complemented: bool,
    out: &mut [u8],
) -> Result<(), WomError> {
    if out.len() != stored.len() {
        return Err(WomError::BadLength);
    }
    keystream_xor(address, stored, out, complemented);
    Ok(())
}
