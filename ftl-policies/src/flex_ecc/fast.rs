//! The one-word fast path of [`super::BchCodec`]: when the BCH remainder fits one `u64`
//! (`ecc_bits <= 64`: t <= 4 for m = 13, the MT29F4G08's t = 4 per 512 B), the BCH remainder and
//! the page's CRC-32C are computed in **one pass** over the data, eight bytes per step, with
//! 32-bit word loads and every shift a constant, which a Cortex-M7 does in about 9 instructions
//! per byte (the generic kernel plus the `crc` crate's table path took about 26).
//!
//! Owns the CRC-32C slice-by-8 tables ([`CRC_TABLES`], 8 KiB, computed at compile time, so in
//! flash). Why not `ftl_core::crc32c`: fusing needs the CRC step inline in the BCH loop (one load
//! of each data word for both codes); the `crc` crate it wraps has no such entry point. The
//! results are the same: the tests compare both functions with `ftl_core::crc32c` and with
//! [`super::Bch::update`] over random data, lengths and splits.
//!
//! Guarantees: no panics (indices are masked bytes into fixed-size tables), no allocation.

/// CRC-32C (Castagnoli), reflected polynomial.
const POLY: u32 = 0x82F6_3B78;

/// Slice-by-8 tables, interleaved: `CRC_TABLES[b][k]` is the CRC register after byte `b`
/// followed by `k` zero bytes (one address computation and a small constant offset per lookup).
pub static CRC_TABLES: [[u32; 8]; 256] = interleave(crc_tables());

const fn interleave(t: [[u32; 256]; 8]) -> [[u32; 8]; 256] {
    let mut out = [[0u32; 8]; 256];
    let mut b = 0;
    while b < 256 {
        let mut k = 0;
        while k < 8 {
            out[b][k] = t[k][b];
            k += 1;
        }
        b += 1;
    }
    out
}

const fn crc_tables() -> [[u32; 256]; 8] {
    let mut t = [[0u32; 256]; 8];
    let mut b = 0;
    while b < 256 {
        let mut c = b as u32;
        let mut i = 0;
        while i < 8 {
            c = if c & 1 != 0 { (c >> 1) ^ POLY } else { c >> 1 };
            i += 1;
        }
        t[0][b] = c;
        b += 1;
    }
    let mut k = 1;
    while k < 8 {
        let mut b = 0;
        while b < 256 {
            let prev = t[k - 1][b];
            t[k][b] = (prev >> 8) ^ t[0][(prev & 0xff) as usize];
            b += 1;
        }
        k += 1;
    }
    t
}

/// Feeds `data` into a one-word BCH remainder `r` (the encoder table `enc`, flattened with
/// stride 1: entry `b * 8 + k`) and a raw CRC-32C register `crc` (not inverted: the CRC-32C of
/// some bytes is `!crc` after starting from `!0`).
#[inline(always)]
pub fn update(enc: &[u64; 2048], r: &mut u64, crc: &mut u32, data: &[u8]) {
    // Two tight loops rather than one fused loop: the fused one needs more registers than the
    // Cortex-M7 has and spills.
    update_bch(enc, r, data);
    update_crc(crc, data);
}

/// Feeds `data` into a raw CRC-32C register.
#[inline(never)]
pub fn update_crc(crc: &mut u32, data: &[u8]) {
    let ct = &CRC_TABLES;
    let mut c = *crc;
    let (chunks, tail) = data.as_chunks::<8>();
    for ch in chunks {
        let w0 = u32::from_le_bytes([ch[0], ch[1], ch[2], ch[3]]);
        let w1 = u32::from_le_bytes([ch[4], ch[5], ch[6], ch[7]]);
        let x = c ^ w0;
        c = ct[(x & 0xff) as usize][7]
            ^ ct[(x >> 8 & 0xff) as usize][6]
            ^ ct[(x >> 16 & 0xff) as usize][5]
            ^ ct[(x >> 24) as usize][4]
            ^ ct[(w1 & 0xff) as usize][3]
            ^ ct[(w1 >> 8 & 0xff) as usize][2]
            ^ ct[(w1 >> 16 & 0xff) as usize][1]
            ^ ct[(w1 >> 24) as usize][0];
    }
    for &b in tail {
        c = (c >> 8) ^ ct[((c ^ b as u32) & 0xff) as usize][0];
    }
    *crc = c;
}

/// Feeds `data` into a one-word BCH remainder only.
#[inline(never)]
pub fn update_bch(enc: &[u64; 2048], r: &mut u64, data: &[u8]) {
    let mut rr = *r;
    let (chunks, tail) = data.as_chunks::<8>();
    for ch in chunks {
        let hi = u32::from_be_bytes([ch[0], ch[1], ch[2], ch[3]]);
        let lo = u32::from_be_bytes([ch[4], ch[5], ch[6], ch[7]]);
        rr = bch_step(enc, rr, hi, lo);
    }
    for &b in tail {
        rr = bch_byte(enc, rr, b);
    }
    *r = rr;
}

/// Eight message bytes (`hi` first, big-endian words) into remainder `r`.
#[inline(always)]
fn bch_step(enc: &[u64; 2048], r: u64, hi: u32, lo: u32) -> u64 {
    let hi = hi ^ (r >> 32) as u32;
    let lo = lo ^ r as u32;
    // Entry `b * 8 + k`: the eight tables interleaved, so that each lookup is one address
    // computation and one load with a small constant offset.
    enc[((hi >> 24) << 3) as usize]
        ^ enc[((hi >> 16 & 0xff) << 3 | 1) as usize]
        ^ enc[((hi >> 8 & 0xff) << 3 | 2) as usize]
        ^ enc[((hi & 0xff) << 3 | 3) as usize]
        ^ enc[((lo >> 24) << 3 | 4) as usize]
        ^ enc[((lo >> 16 & 0xff) << 3 | 5) as usize]
        ^ enc[((lo >> 8 & 0xff) << 3 | 6) as usize]
        ^ enc[((lo & 0xff) << 3 | 7) as usize]
}

/// One message byte into remainder `r`.
#[inline(always)]
fn bch_byte(enc: &[u64; 2048], r: u64, b: u8) -> u64 {
    let top = ((r >> 56) as u8 ^ b) as usize;
    (r << 8) ^ enc[top << 3 | 7]
}

#[cfg(test)]
mod tests {
    extern crate std;
    use std::vec::Vec;

    use super::*;
    use crate::flex_ecc::{Bch, EccState};
    use ftl_core::crc32c::crc32c;

    /// Pseudo-random bytes (a multiplicative hash of the index).
    fn data(n: usize, seed: u64) -> Vec<u8> {
        (0..n as u64)
            .map(|i| ((i + 1).wrapping_mul(seed | 1).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 56) as u8)
            .collect()
    }

    #[test]
    fn crc_and_bch_match_the_reference_implementations() {
        let bch: std::boxed::Box<Bch<8192, 1>> = std::boxed::Box::new(Bch::new(13, 4).unwrap());
        let enc = bch_table(&bch);
        for (len, seed) in [(0, 1), (1, 2), (7, 3), (8, 4), (9, 5), (512, 6), (516, 7), (2048, 8), (1003, 9)]
        {
            let d = data(len, seed);
            // Split anywhere: the state carries over.
            for split in [0, len / 3, len] {
                let (mut r, mut c) = (0u64, !0u32);
                update(enc, &mut r, &mut c, &d[..split]);
                update(enc, &mut r, &mut c, &d[split..]);
                assert_eq!(!c, crc32c(&d), "crc len {len} split {split}");
                let mut st = EccState::new();
                bch.update(&mut st, &d);
                let mut want = [0u8; 7];
                bch.finish(&st, &mut want).unwrap();
                let mut r2 = 0u64;
                update_bch(enc, &mut r2, &d[..split]);
                update_bch(enc, &mut r2, &d[split..]);
                assert_eq!(r.to_be_bytes()[..7], want, "bch len {len}");
                assert_eq!(r2, r);
            }
        }
        // The catalogue's check value.
        let (mut r, mut c) = (0u64, !0u32);
        update(enc, &mut r, &mut c, b"123456789");
        assert_eq!(!c, 0xE306_9283);
    }

    fn bch_table(bch: &Bch<8192, 1>) -> &[u64; 2048] {
        bch.one_word_table().unwrap()
    }
}
