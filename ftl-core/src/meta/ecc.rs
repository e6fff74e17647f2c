//! The error-correcting code of the page metadata: a binary BCH code over GF(2^8) correcting
//! [`T`] = 3 bit errors, shortened to [`MSG_BYTES`] message bytes and [`PARITY_BYTES`] parity
//! bytes (200 bits; designed distance 7). The second-write metadata of feature `wom`
//! (`reuse/meta.rs`) uses the same code, shortened further by two implicit 0xFF bytes.
//!
//! - Field: GF(2^8) with the primitive polynomial x^8 + x^4 + x^3 + x^2 + 1 (0x11D); the generator
//!   polynomial is the product of the minimal polynomials of alpha, alpha^3 and alpha^5 (degree
//!   24). Tables (field exp/log, six remainder tables for slice-by-6 encoding) are computed at
//!   compile time: 6.8 KiB of flash, no RAM.
//! - Bit order: the codeword is the message bytes then the parity bytes, most significant bit
//!   first; its first bit is the coefficient of x^199, its last the coefficient of x^0.
//!   Systematic encoding: parity = message(x) * x^24 mod g(x), computed six bytes at a time.
//! - Erased convention (as Linux' NAND BCH): the stored parity is the parity XOR the complement of
//!   the parity of an all-0xFF message, so an erased area (all 0xFF) is a codeword.
//! - [`decode`] corrects up to 3 flipped bits anywhere in the 200 bits (message or parity) and
//!   reports more as [`Uncorrectable`] when the decoder sees it (locator degree and root count
//!   disagree, a root outside the shortened code); a pattern of 4 or more errors may also land
//!   within distance 3 of another codeword and be "corrected" to it, which is why the metadata
//!   carries a CRC-32C inside the message (see `meta.rs`).
//!
//! Cost: [`encode`] is one table-driven remainder over 22 bytes (slice-by-6: 5 dependent steps);
//! [`decode`] of a clean word the same and a compare (`meta.rs` skips it when the message's CRC
//! matches); a word with errors adds six syndromes of the 24-bit remainder difference,
//! Berlekamp-Massey and a Chien search over the 200 positions (about 1 us on x86-64). No
//! allocation, no floating point.

/// Message bytes.
pub const MSG_BYTES: usize = 22;
/// Parity bytes (24 bits: 3 minimal polynomials of degree 8).
pub const PARITY_BYTES: usize = 3;
/// Bits of a codeword.
pub const CODE_BITS: usize = 8 * (MSG_BYTES + PARITY_BYTES);
/// Bit errors corrected.
pub const T: usize = 3;

/// The decoder found more errors than it can correct.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Uncorrectable;

const PRIM: u32 = 0x11D;

struct Field {
    exp: [u8; 512],
    log: [u8; 256],
}

const fn field() -> Field {
    let mut exp = [0u8; 512];
    let mut log = [0u8; 256];
    let mut x: u32 = 1;
    let mut i = 0;
    while i < 255 {
        exp[i] = x as u8;
        exp[i + 255] = x as u8;
        log[x as usize] = i as u8;
        x <<= 1;
        if x & 0x100 != 0 {
            x ^= PRIM;
        }
        i += 1;
    }
    exp[510] = exp[0];
    exp[511] = exp[1];
    Field { exp, log }
}

// Tables are computed at compile time (the `const`s) and read at run time from `static`s: a
// `const` array indexed at run time may be copied to the stack at every use.
const GF_TABLES: Field = field();
static GF: Field = GF_TABLES;

const fn mul_in(f: &Field, a: u8, b: u8) -> u8 {
    if a == 0 || b == 0 {
        0
    } else {
        f.exp[f.log[a as usize] as usize + f.log[b as usize] as usize]
    }
}

fn mul(a: u8, b: u8) -> u8 {
    mul_in(&GF, a, b)
}

/// alpha^e for any e >= 0.
fn pow(e: usize) -> u8 {
    GF.exp[e % 255]
}

fn inv(a: u8) -> u8 {
    GF.exp[255 - GF.log[a as usize] as usize]
}

/// The generator polynomial as a bit mask (bit i = coefficient of x^i; bit 24 set).
const fn generator() -> u32 {
    // g(x) = product of (x + alpha^r) over the cyclotomic cosets of 1, 3 and 5.
    let mut g = [0u8; 25];
    g[0] = 1;
    let mut deg = 0usize;
    let mut c = 0;
    let cosets = [1usize, 3, 5];
    while c < 3 {
        let mut r = cosets[c];
        let mut k = 0;
        while k < 8 {
            // g *= (x + alpha^r)
            let a = GF_TABLES.exp[r % 255];
            let mut i = deg + 1;
            while i > 0 {
                g[i] = g[i - 1] ^ mul_in(&GF_TABLES, g[i], a);
                i -= 1;
            }
            g[0] = mul_in(&GF_TABLES, g[0], a);
            deg += 1;
            r = (r * 2) % 255;
            k += 1;
        }
        c += 1;
    }
    let mut bits = 0u32;
    let mut i = 0;
    while i <= 24 {
        // The coefficients of a product of minimal polynomials are 0 or 1.
        bits |= (g[i] as u32 & 1) << i;
        i += 1;
    }
    bits
}

const GEN: u32 = generator();

const fn remainder_table() -> [u32; 256] {
    let mut t = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        let mut r = (i as u32) << 16;
        let mut k = 0;
        while k < 8 {
            r = if r & 0x80_0000 != 0 { (r << 1) ^ GEN } else { r << 1 };
            k += 1;
        }
        t[i] = r & 0xFF_FFFF;
        i += 1;
    }
    t
}

const REMAINDERS: [u32; 256] = remainder_table();

/// Slice-by-6 tables: `[k][v]` = v(x) * x^(24 + 8k) mod g(x), so six message bytes (the first
/// three XORed with the 24-bit register) are reduced by six independent lookups.
const fn slice_tables() -> [[u32; 256]; 6] {
    let mut t = [[0u32; 256]; 6];
    let mut v = 0;
    while v < 256 {
        t[0][v] = REMAINDERS[v];
        let mut k = 1;
        while k < 6 {
            // v * x^(24 + 8k) = (v * x^(24 + 8(k-1))) * x^8: shift the previous remainder a byte.
            let r = t[k - 1][v];
            t[k][v] = ((r << 8) & 0xFF_FFFF) ^ REMAINDERS[(r >> 16) as usize];
            k += 1;
        }
        v += 1;
    }
    t
}

static SLICES: [[u32; 256]; 6] = slice_tables();

/// message(x) * x^24 mod g(x), as a 24-bit value (bit i = coefficient of x^i).
const fn remainder_in(table: &[u32; 256], msg: &[u8; MSG_BYTES]) -> u32 {
    let mut r = 0u32;
    let mut i = 0;
    while i < MSG_BYTES {
        let idx = ((r >> 16) as u8 ^ msg[i]) as usize;
        r = ((r << 8) & 0xFF_FFFF) ^ table[idx];
        i += 1;
    }
    r
}

/// [`remainder_in`] six bytes at a time (22 = 1 + 3 + 3 * 6): 5 dependent steps.
fn remainder(msg: &[u8; MSG_BYTES]) -> u32 {
    let t = &SLICES;
    let mut r = t[0][msg[0] as usize];
    let x = r ^ ((msg[1] as u32) << 16 | (msg[2] as u32) << 8 | msg[3] as u32);
    r = t[2][(x >> 16) as usize] ^ t[1][(x >> 8 & 0xFF) as usize] ^ t[0][(x & 0xFF) as usize];
    for c in msg[4..].chunks_exact(6) {
        let x = r ^ ((c[0] as u32) << 16 | (c[1] as u32) << 8 | c[2] as u32);
        r = t[5][(x >> 16) as usize]
            ^ t[4][(x >> 8 & 0xFF) as usize]
            ^ t[3][(x & 0xFF) as usize]
            ^ t[2][c[3] as usize]
            ^ t[1][c[4] as usize]
            ^ t[0][c[5] as usize];
    }
    r
}
const _: () = assert!(MSG_BYTES == 1 + 3 + 3 * 6);

/// The complement of the parity of an all-0xFF message (XORed into the stored parity).
const MASK: u32 = !remainder_in(&REMAINDERS, &[0xFF; MSG_BYTES]) & 0xFF_FFFF;

/// The stored parity bytes of `msg`.
pub fn encode(msg: &[u8; MSG_BYTES]) -> [u8; PARITY_BYTES] {
    let p = remainder(msg) ^ MASK;
    [(p >> 16) as u8, (p >> 8) as u8, p as u8]
}

/// Corrects `msg` against the stored `parity`; returns the number of bits corrected (in the
/// message or the parity), or [`Uncorrectable`] (then `msg` is unchanged).
pub fn decode(msg: &mut [u8; MSG_BYTES], parity: &[u8; PARITY_BYTES]) -> Result<u32, Uncorrectable> {
    let stored = ((parity[0] as u32) << 16 | (parity[1] as u32) << 8 | parity[2] as u32) ^ MASK;
    let diff = stored ^ remainder(msg);
    if diff == 0 {
        return Ok(0);
    }
    // The received word minus the codeword (msg, remainder(msg)) is (0, diff): its syndromes are
    // those of the received word.
    let mut s = [0u8; 2 * T + 1];
    for (k, sk) in s.iter_mut().enumerate().skip(1) {
        let mut acc = 0u8;
        for i in 0..24 {
            if diff >> i & 1 != 0 {
                acc ^= pow(k * i);
            }
        }
        *sk = acc;
    }
    let (lambda, l) = berlekamp_massey(&s)?;
    // Chien search over the shortened code's positions (degree i = CODE_BITS - 1 - bit index).
    let mut roots = [0usize; T];
    let mut found = 0;
    for i in 0..CODE_BITS {
        // lambda(alpha^-i)
        let mut v = 0u8;
        for (k, &c) in lambda.iter().enumerate().take(l + 1) {
            v ^= mul(c, pow((255 - i % 255) * k));
        }
        if v == 0 {
            if found == T {
                return Err(Uncorrectable);
            }
            roots[found] = i;
            found += 1;
        }
    }
    if found != l {
        return Err(Uncorrectable);
    }
    for &i in &roots[..found] {
        let bit = CODE_BITS - 1 - i;
        if bit < 8 * MSG_BYTES {
            msg[bit / 8] ^= 0x80 >> (bit % 8);
        }
    }
    Ok(found as u32)
}

/// Binary Berlekamp-Massey over the syndromes `s[1..=2T]`: the error locator (coefficients,
/// lowest first) and its degree, or `Uncorrectable` if the degree exceeds T.
fn berlekamp_massey(s: &[u8; 2 * T + 1]) -> Result<([u8; 2 * T + 1], usize), Uncorrectable> {
    let mut lambda = [0u8; 2 * T + 1];
    let mut b = [0u8; 2 * T + 1];
    lambda[0] = 1;
    b[0] = 1;
    let mut l = 0usize;
    let mut m = 1usize;
    let mut bd = 1u8;
    for n in 0..2 * T {
        let mut d = s[n + 1];
        for i in 1..=l {
            d ^= mul(lambda[i], s[n + 1 - i]);
        }
        if d == 0 {
            m += 1;
            continue;
        }
        let coef = mul(d, inv(bd));
        let prev = lambda;
        for i in 0..=2 * T {
            if i >= m {
                lambda[i] ^= mul(coef, b[i - m]);
            }
        }
        if 2 * l <= n {
            l = n + 1 - l;
            b = prev;
            bd = d;
            m = 1;
        } else {
            m += 1;
        }
    }
    if l > T || lambda[T + 1..].iter().any(|&c| c != 0) {
        return Err(Uncorrectable);
    }
    Ok((lambda, l))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flip(word: &mut [u8; MSG_BYTES + PARITY_BYTES], bit: usize) {
        word[bit / 8] ^= 0x80 >> (bit % 8);
    }

    fn split(word: &[u8; MSG_BYTES + PARITY_BYTES]) -> ([u8; MSG_BYTES], [u8; PARITY_BYTES]) {
        let mut m = [0u8; MSG_BYTES];
        let mut p = [0u8; PARITY_BYTES];
        m.copy_from_slice(&word[..MSG_BYTES]);
        p.copy_from_slice(&word[MSG_BYTES..]);
        (m, p)
    }

    fn codeword(seed: u64) -> [u8; MSG_BYTES + PARITY_BYTES] {
        let mut w = [0u8; MSG_BYTES + PARITY_BYTES];
        let mut x = seed;
        for b in w[..MSG_BYTES].iter_mut() {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            *b = (x >> 56) as u8;
        }
        let (m, _) = split(&w);
        w[MSG_BYTES..].copy_from_slice(&encode(&m));
        w
    }

    #[test]
    fn generator_has_the_minimal_polynomials_roots() {
        assert_eq!(GEN >> 24, 1);
        for r in [1usize, 2, 3, 5, 6, 10] {
            let mut v = 0u8;
            for i in 0..=24 {
                if GEN >> i & 1 != 0 {
                    v ^= pow(r * i);
                }
            }
            assert_eq!(v, 0, "alpha^{r}");
        }
    }

    #[test]
    fn sliced_remainder_matches_the_bytewise_one() {
        for seed in 0..2000 {
            let (m, _) = split(&codeword(seed));
            assert_eq!(remainder(&m), remainder_in(&REMAINDERS, &m));
        }
    }

    #[test]
    fn erased_is_a_codeword() {
        let (mut m, p) = ([0xFF; MSG_BYTES], [0xFF; PARITY_BYTES]);
        assert_eq!(encode(&m), p);
        assert_eq!(decode(&mut m, &p), Ok(0));
    }

    #[test]
    fn every_one_and_two_bit_error_is_corrected() {
        for seed in 0..3 {
            let w = codeword(seed);
            let (want, _) = split(&w);
            for a in 0..CODE_BITS {
                let mut e = w;
                flip(&mut e, a);
                let (mut m, p) = split(&e);
                assert_eq!(decode(&mut m, &p), Ok(1), "bit {a}");
                assert_eq!(m, want);
                for b in a + 1..CODE_BITS {
                    let mut e2 = e;
                    flip(&mut e2, b);
                    let (mut m, p) = split(&e2);
                    assert_eq!(decode(&mut m, &p), Ok(2), "bits {a} {b}");
                    assert_eq!(m, want);
                }
            }
        }
    }
}
