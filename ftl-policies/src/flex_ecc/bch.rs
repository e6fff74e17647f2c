//! Binary BCH code over GF(2^m), bit-exact with Linux `lib/bch.c` (without `swap_bits`).
//!
//! Owns the code's parameters, its generator polynomial, the encoder's remainder tables and the
//! decoder (syndromes, Berlekamp-Massey; root finding is in the private `roots` module).
//!
//! Conventions (the kernel's, see `shared/design/coding-notes.md` section 5):
//! * The message is a byte string; the MSB of byte 0 is its highest-degree coefficient. The
//!   parity is `msg(x) * x^ecc_bits mod g(x)`, written MSB first and left-justified into
//!   `ecc_bytes = ceil(m*t/8)` bytes (unused low bits of the last byte are 0).
//! * An error location `p` names bit `p % 8` (counted from the LSB) of byte `p / 8` of the stream
//!   `msg || ecc`: `p < 8*len` is in the message, `p >= 8*len` in the parity bytes.
//! * Decoding reports at most t errors; anything else is [`BchError::Uncorrectable`]: when the
//!   error-locator degree exceeds t, when its roots are not distinct elements of GF(2^m), or when
//!   a root points beyond the (shortened) codeword. More than t errors may still decode to a wrong
//!   codeword (that is what a bounded-distance decoder does); [`super::BchCodec`] adds a CRC to
//!   catch that. Such miscorrections match the kernel's bit for bit. The one deliberate
//!   difference: lib/bch.c occasionally (28 of about 35,000 random words with more than t
//!   errors, in a cross-check against bchlib 2.1.3) reports locations whose correction is not a
//!   codeword, sometimes the same location twice; this decoder verifies its roots and reports
//!   those words as uncorrectable.
//!
//! Decoding: the syndromes S_1..S_2t are evaluated on the parity difference only (received XOR
//! recomputed parity, at most `ecc_bits` bits, as the kernel does), odd ones directly and even
//! ones as squares; the error locator comes from binary Berlekamp-Massey (t steps); its roots from
//! the closed-form/trace-algorithm root finder.
//!
//! Encoding is table driven, 64 message bits per step: eight tables of 256 remainders, each
//! `words = ceil(ecc_bits/64)` `u64`s (`T_k[b] = b(x) x^(8(7-k)+ecc_bits) mod g`), interleaved
//! (entry `b * 8 + k`, so a lookup is one address computation plus a small constant offset), so
//! one step is eight lookups and `8*words` XORs. One-word remainders (`ecc_bits <= 64`, e.g.
//! m = 13, t = 4) take the hand-unrolled kernel of the private `fast` module. The step is monomorphised for each `words` in 1..=15 (the
//! kernel's `CONFIG_BCH_CONST_PARAMS` effect without fixing m and t at build time).
//!
//! Memory (all inside [`Bch`], sized by its const generics; nothing is allocated):
//! * field tables: `4 * FIELD` bytes ([`super::gf`]);
//! * encoder tables: `2048 * WORDS * 8` bytes (16 KiB per word: m=13 t=8 needs 2 words, 32 KiB;
//!   m=14 t=16 needs 4, 64 KiB; m=14 t=40 needs 9, 144 KiB; m=15 t=64 needs 15, 240 KiB);
//! * decoder scratch on the stack: about 4 KiB, plus about 8 KiB in the root finder while
//!   locating more than 4 errors (fixed sizes, set by t <= 64, not by the code's t).
//!
//! The tables are built by [`Bch::init`], a `const fn`: at run time (0.02 ms for m=13 t=4 to
//! 0.3 ms for m=15 t=64 on the development host; in place, so that a `static` built with
//! [`Bch::zeroed`] never travels through the stack), or by the compiler with [`Bch::new_const`]
//! in a `static` initializer, which puts them in flash (`.rodata`) on a microcontroller.

use super::gf::{field_size, Gf};
use super::roots::find_roots;
use super::{BchError, MAX_ECC_WORDS, MAX_T};

/// Upper bound on the `u64` words of a remainder for (m, t): `ceil(m*t/64)`. A valid `WORDS`.
pub const fn ecc_words(m: u32, t: u32) -> usize {
    ((m * t) as usize).div_ceil(64)
}

/// Parity bytes of a BCH(m, t) codeword: `ceil(m*t/8)` (as Linux).
pub const fn ecc_bytes(m: u32, t: u32) -> usize {
    ((m * t) as usize).div_ceil(8)
}

/// A running parity computation (the remainder register): start with [`EccState::new`], feed the
/// message with [`Bch::update`], read the parity with [`Bch::finish`].
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct EccState {
    w: [u64; MAX_ECC_WORDS],
}

impl EccState {
    /// The state before any message byte (all zero, as Linux' `ecc` in/out argument).
    pub const fn new() -> Self {
        EccState { w: [0; MAX_ECC_WORDS] }
    }
}

impl EccState {
    /// The state of a one-word remainder (`ecc_bits <= 64`), left-justified.
    pub(crate) const fn from_word(r: u64) -> Self {
        let mut w = [0; MAX_ECC_WORDS];
        w[0] = r;
        EccState { w }
    }
}

impl Default for EccState {
    fn default() -> Self {
        Self::new()
    }
}

/// The error locations found by a decode, ascending, in the Linux `errloc` convention: at most
/// [`MAX_T`] of them, in a `heapless::Vec` (RAM: `4 * MAX_T` bytes and a length).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ErrorLocations {
    loc: heapless::Vec<u32, MAX_T>,
}

impl ErrorLocations {
    const EMPTY: ErrorLocations = ErrorLocations { loc: heapless::Vec::new() };

    /// The locations (bit `p % 8`, LSB first, of byte `p / 8` of `msg || ecc`).
    pub fn as_slice(&self) -> &[u32] {
        &self.loc
    }

    /// Number of bit errors found (message and parity).
    pub fn len(&self) -> usize {
        self.loc.len()
    }

    /// No error found.
    pub fn is_empty(&self) -> bool {
        self.loc.is_empty()
    }
}

/// A BCH(m, t) code with its tables: `FIELD >= 2^m` field-table entries and `WORDS >=
/// ceil(ecc_bits/64)` words per encoder-table entry (see the module docs for the sizes).
#[derive(Clone)]
pub struct Bch<const FIELD: usize, const WORDS: usize> {
    gf: Gf<FIELD>,
    t: u32,
    ecc_bits: u32,
    ecc_bytes: usize,
    words: usize,
    /// Generator polynomial, bit i = coefficient of x^i (degree `ecc_bits` <= 960).
    genpoly: [u64; 16],
    /// Encoder tables, flattened with stride `words` (not `WORDS`): entry `k*256 + b`.
    enc: [[u64; WORDS]; 2048],
}

impl<const FIELD: usize, const WORDS: usize> Bch<FIELD, WORDS> {
    /// RAM (or flash, for a `static`) the tables take: the size of `Self`.
    pub const TABLE_BYTES: usize = core::mem::size_of::<Self>();

    /// An uninitialised code, for a `static` to be set up with [`Bch::init`].
    pub const fn zeroed() -> Self {
        Bch {
            gf: Gf::zeroed(),
            t: 0,
            ecc_bits: 0,
            ecc_bytes: 0,
            words: 0,
            genpoly: [0; 16],
            enc: [[0; WORDS]; 2048],
        }
    }

    /// A BCH(m, t) code with the Linux default primitive polynomial for m.
    pub fn new(m: u32, t: u32) -> Result<Self, BchError> {
        let mut b = Self::zeroed();
        b.init(m, t, None)?;
        Ok(b)
    }

    /// Builds the code in place: m in 5..=15, t in 1..=64 with `m*t < 2^m - 1`, `prim_poly`
    /// (`None`: Linux' default for m). A `const fn`: see [`Bch::new_const`].
    pub const fn init(&mut self, m: u32, t: u32, prim_poly: Option<u32>) -> Result<(), BchError> {
        if m < super::gf::MIN_M || m > super::gf::MAX_M {
            return Err(BchError::UnsupportedField);
        }
        if t == 0 || t as usize > MAX_T || m * t >= (1 << m) - 1 {
            return Err(BchError::UnsupportedStrength);
        }
        if FIELD < field_size(m) {
            return Err(BchError::TablesTooSmall);
        }
        if let Err(e) = self.gf.init(m, prim_poly) {
            return Err(e);
        }

        // g(x) = product of the minimal polynomials of alpha^j, j odd < 2t, each coset once.
        let mut g = [0u64; 16];
        g[0] = 1;
        let mut deg = 0u32;
        let mut j = 1;
        while j < 2 * t {
            // Include the coset of j only if j is its smallest element.
            let mut e = j;
            let mut minimal = true;
            let mut size = 0usize;
            let mut coset = [0u32; 16];
            loop {
                if e < j {
                    minimal = false;
                    break;
                }
                coset[size & 15] = e;
                size += 1;
                e = self.gf.modn(2 * e);
                if e == j || size > 15 {
                    break;
                }
            }
            if !minimal {
                j += 2;
                continue;
            }
            // Minimal polynomial prod (x - alpha^e) over the coset; coefficients are 0 or 1.
            let mut mp = [0u16; 17];
            mp[0] = 1;
            let mut k = 0;
            while k < size {
                let r = self.gf.pow(coset[k]);
                let mut i = k + 1;
                loop {
                    let lower = if i > 0 { mp[i - 1] } else { 0 };
                    mp[i] = self.gf.mul(mp[i], r) ^ lower;
                    if i == 0 {
                        break;
                    }
                    i -= 1;
                }
                k += 1;
            }
            let mut mbits = 0u32;
            let mut i = 0;
            while i <= size {
                match mp[i] {
                    0 => {}
                    1 => mbits |= 1 << i,
                    _ => return Err(BchError::NotPrimitive),
                }
                i += 1;
            }
            // g <- g * mp over GF(2).
            let mut prod = [0u64; 16];
            let mut s = 0;
            while s <= size {
                if mbits >> s & 1 != 0 {
                    shl_xor(&mut prod, &g, s);
                }
                s += 1;
            }
            g = prod;
            deg += size as u32;
            j += 2;
        }
        if deg == 0 || deg > m * t || (g[deg as usize / 64] >> (deg % 64)) & 1 == 0 {
            return Err(BchError::NotPrimitive);
        }
        let words = (deg as usize).div_ceil(64);
        if words > WORDS || words > MAX_ECC_WORDS {
            return Err(BchError::TablesTooSmall);
        }
        self.t = t;
        self.ecc_bits = deg;
        self.ecc_bytes = ecc_bytes(m, t);
        self.words = words;
        self.genpoly = g;

        // basis[s] = x^(deg + s) mod g, left-justified in `words` words.
        let mut glow = [0u64; MAX_ECC_WORDS];
        let mut i = 0;
        while i < deg {
            if g[i as usize / 64] >> (i % 64) & 1 != 0 {
                let q = (deg - 1 - i) as usize;
                glow[q / 64] |= 1u64 << (63 - q % 64);
            }
            i += 1;
        }
        let mut basis = [[0u64; MAX_ECC_WORDS]; 64];
        let mut r = glow;
        let mut b = 0;
        while b < 64 {
            basis[b] = r;
            let carry = r[0] >> 63;
            let mut j = 0;
            while j < words {
                let next = if j + 1 < words { r[j + 1] >> 63 } else { 0 };
                r[j] = (r[j] << 1) | next;
                j += 1;
            }
            if carry != 0 {
                let mut j = 0;
                while j < words {
                    r[j] ^= glow[j];
                    j += 1;
                }
            }
            b += 1;
        }
        // Flattened with stride `words`: flat index f is enc[f / WORDS][f % WORDS].
        let mut f = 0;
        while f < 2048 {
            self.enc[f] = [0; WORDS];
            f += 1;
        }
        let mut k = 0usize;
        while k < 8 {
            let mut byte = 1usize;
            while byte < 256 {
                let low = byte.trailing_zeros() as usize;
                let prev = byte & (byte - 1);
                let src = (prev * 8 + k) * words;
                let dst = (byte * 8 + k) * words;
                let mut j = 0;
                while j < words {
                    let v = self.enc[(src + j) / WORDS][(src + j) % WORDS] ^ basis[8 * (7 - k) + low][j];
                    self.enc[(dst + j) / WORDS][(dst + j) % WORDS] = v;
                    j += 1;
                }
                byte += 1;
            }
            k += 1;
        }
        Ok(())
    }

    /// A BCH(m, t) code with the Linux default primitive polynomial, built by a `const fn`: in a
    /// `static` initializer the tables are computed by the compiler and land in flash
    /// (`.rodata`), not RAM, e.g.
    /// `static BCH: Bch<8192, 1> = match Bch::new_const(13, 4) { Ok(b) => b, Err(_) => panic!() };`
    /// (a bad (m, t) is then a build error).
    pub const fn new_const(m: u32, t: u32) -> Result<Self, BchError> {
        let mut b = Self::zeroed();
        match b.init(m, t, None) {
            Ok(()) => Ok(b),
            Err(e) => Err(e),
        }
    }

    /// m.
    pub fn m(&self) -> u32 {
        self.gf.m()
    }

    /// t, the number of correctable bit errors.
    pub fn t(&self) -> u32 {
        self.t
    }

    /// n = 2^m - 1, the full code length in bits.
    pub fn n(&self) -> u32 {
        self.gf.n()
    }

    /// The primitive polynomial of the field.
    pub fn prim_poly(&self) -> u32 {
        self.gf.prim_poly()
    }

    /// Degree of the generator polynomial: parity bits actually used (<= m*t).
    pub fn ecc_bits(&self) -> u32 {
        self.ecc_bits
    }

    /// Parity bytes per codeword, `ceil(m*t/8)`.
    pub fn ecc_bytes(&self) -> usize {
        self.ecc_bytes
    }

    /// Longest message in bytes: `(n - ecc_bits) / 8`.
    pub fn max_data_bytes(&self) -> usize {
        (self.gf.n().saturating_sub(self.ecc_bits) / 8) as usize
    }

    /// Coefficient `i` (0 or 1) of the generator polynomial.
    pub fn generator_coeff(&self, i: u32) -> u8 {
        if i > self.ecc_bits {
            return 0;
        }
        (self.genpoly[(i / 64) as usize & 15] >> (i % 64)) as u8 & 1
    }

    /// The field.
    pub fn field(&self) -> &Gf<FIELD> {
        &self.gf
    }

    /// The encoder table as one flat array when the remainder is one word (`ecc_bits <= 64`):
    /// entry `b * 8 + k` (see the module docs).
    pub fn one_word_table(&self) -> Option<&[u64; 2048]> {
        if self.words != 1 {
            return None;
        }
        self.enc.as_flattened().first_chunk::<2048>()
    }

    /// Feeds message bytes into a running parity computation (any split of the message gives
    /// the same result).
    pub fn update(&self, st: &mut EccState, data: &[u8]) {
        let flat = self.enc.as_flattened();
        match self.words {
            1 => match self.one_word_table() {
                Some(enc) => super::fast::update_bch(enc, &mut st.w[0], data),
                None => kernel::<1>(flat, &mut st.w, data),
            },
            2 => kernel::<2>(flat, &mut st.w, data),
            3 => kernel::<3>(flat, &mut st.w, data),
            4 => kernel::<4>(flat, &mut st.w, data),
            5 => kernel::<5>(flat, &mut st.w, data),
            6 => kernel::<6>(flat, &mut st.w, data),
            7 => kernel::<7>(flat, &mut st.w, data),
            8 => kernel::<8>(flat, &mut st.w, data),
            9 => kernel::<9>(flat, &mut st.w, data),
            10 => kernel::<10>(flat, &mut st.w, data),
            11 => kernel::<11>(flat, &mut st.w, data),
            12 => kernel::<12>(flat, &mut st.w, data),
            13 => kernel::<13>(flat, &mut st.w, data),
            14 => kernel::<14>(flat, &mut st.w, data),
            15 => kernel::<15>(flat, &mut st.w, data),
            _ => {}
        }
    }

    /// Writes the parity of the message fed so far to `ecc[..ecc_bytes]`.
    pub fn finish(&self, st: &EccState, ecc: &mut [u8]) -> Result<(), BchError> {
        let out = ecc.get_mut(..self.ecc_bytes).ok_or(BchError::BadLength)?;
        let used = 8 * self.words;
        for (i, o) in out.iter_mut().enumerate() {
            *o = if i < used { (st.w[(i / 8) % MAX_ECC_WORDS] >> (56 - 8 * (i % 8))) as u8 } else { 0 };
        }
        Ok(())
    }

    /// `ecc[..ecc_bytes]` = parity of `data` (Linux `bch_encode` with a zeroed `ecc`).
    pub fn encode(&self, data: &[u8], ecc: &mut [u8]) -> Result<(), BchError> {
        if data.len() > self.max_data_bytes() {
            return Err(BchError::TooLong);
        }
        let mut st = EccState::new();
        self.update(&mut st, data);
        self.finish(&st, ecc)
    }

    /// Finds the bit errors of `data || recv_ecc` (Linux `bch_decode(data, len, recv_ecc, NULL,
    /// NULL, errloc)`); changes nothing.
    pub fn decode(&self, data: &[u8], recv_ecc: &[u8]) -> Result<ErrorLocations, BchError> {
        if data.len() > self.max_data_bytes() {
            return Err(BchError::TooLong);
        }
        let mut st = EccState::new();
        self.update(&mut st, data);
        self.decode_state(data.len(), &st, recv_ecc)
    }

    /// As [`Bch::decode`], with the parity of the received message already computed (`calc`,
    /// over `msg_len` bytes): for messages that are not one contiguous slice.
    pub fn decode_state(
        &self,
        msg_len: usize,
        calc: &EccState,
        recv_ecc: &[u8],
    ) -> Result<ErrorLocations, BchError> {
        if msg_len > self.max_data_bytes() {
            return Err(BchError::TooLong);
        }
        let recv = recv_ecc.get(..self.ecc_bytes).ok_or(BchError::BadLength)?;
        let words = self.words;
        let mut diff = [0u64; MAX_ECC_WORDS];
        for (i, &b) in recv.iter().enumerate().take(8 * words) {
            diff[i / 8] |= (b as u64) << (56 - 8 * (i % 8));
        }
        let mut any = 0u64;
        for (d, &c) in diff[..words].iter_mut().zip(&calc.w[..words]) {
            *d ^= c;
        }
        let tail = self.ecc_bits % 64;
        if tail != 0 {
            diff[words - 1] &= !0u64 << (64 - tail);
        }
        for &d in &diff[..words] {
            any |= d;
        }
        if any == 0 {
            return Ok(ErrorLocations::EMPTY);
        }
        self.locate(&diff[..words], 8 * msg_len as u32 + self.ecc_bits)
    }

    /// Decodes and corrects `data` and `ecc` in place; returns the number of bits corrected.
    pub fn decode_in_place(&self, data: &mut [u8], ecc: &mut [u8]) -> Result<usize, BchError> {
        let locs = self.decode(data, ecc)?;
        correct(data, ecc, locs.as_slice());
        Ok(locs.len())
    }

    /// Syndromes, Berlekamp-Massey and root finding over the remainder difference `diff`.
    fn locate(&self, diff: &[u64], nbits: u32) -> Result<ErrorLocations, BchError> {
        let gf = &self.gf;
        let t = self.t as usize;
        let deg = self.ecc_bits;
        // S_j = diff(alpha^j): odd j by direct evaluation, even j as squares.
        // Exponents of the set bits (the bit at left-justified position q is the coefficient of
        // x^(deg - 1 - q)).
        let mut ex = [0u16; 64 * MAX_ECC_WORDS];
        let mut nb = 0;
        for (w, &word) in diff.iter().enumerate() {
            let mut bits = word;
            while bits != 0 {
                let lz = bits.leading_zeros();
                bits ^= 1u64 << (63 - lz);
                if let Some(x) = ex.get_mut(nb) {
                    *x = (deg - 1 - (64 * w as u32 + lz)) as u16;
                    nb += 1;
                }
            }
        }
        let mut syn = [0u16; 2 * MAX_T];
        // Four bits at a time: four independent exponent chains e_b = i_b * j mod n.
        for quad in ex[..nb].chunks(4) {
            let mut e = [0u32; 4];
            let mut st = [0u32; 4];
            let mut live = [false; 4];
            for (k, &i) in quad.iter().enumerate() {
                let i = i as u32;
                e[k] = i;
                st[k] = gf.add_mod(i, i);
                live[k] = true;
            }
            for s in syn.iter_mut().step_by(2).take(t) {
                let mut acc = 0u16;
                for k in 0..4 {
                    if live[k] {
                        acc ^= gf.pow(e[k]);
                    }
                    e[k] = gf.add_mod(e[k], st[k]);
                }
                *s ^= acc;
            }
        }
        for j in 0..t {
            syn[2 * j + 1] = gf.sqr(syn[j]);
        }

        let mut c = [0u16; BMC];
        let l = berlekamp_massey(gf, &syn[..2 * t], t, &mut c).ok_or(BchError::Uncorrectable)?;
        if l == 0 || l > t || c[l] == 0 || c[l + 1..].iter().any(|&x| x != 0) {
            return Err(BchError::Uncorrectable);
        }
        // Reversed locator: monic, roots alpha^i for the error exponents i.
        let mut f = [0u16; MAX_T + 1];
        for i in 0..=l {
            f[i] = c[l - i];
        }
        let mut roots = [0u16; MAX_T];
        let nr = find_roots(gf, &f[..=l], &mut roots).ok_or(BchError::Uncorrectable)?;
        if nr != l {
            return Err(BchError::Uncorrectable);
        }
        let mut out = ErrorLocations::EMPTY;
        for &r in &roots[..nr] {
            let i = gf.log(r);
            if i >= nbits {
                return Err(BchError::Uncorrectable);
            }
            let q = nbits - 1 - i;
            // nr <= MAX_T: always room.
            out.loc.push((q & !7) | (7 - (q & 7))).map_err(|_| BchError::Uncorrectable)?;
        }
        out.loc.sort_unstable();
        Ok(out)
    }
}

/// Applies Linux-convention error locations to `data || ecc` (locations outside both are
/// ignored).
pub fn correct(data: &mut [u8], ecc: &mut [u8], errloc: &[u32]) {
    let dbits = 8 * data.len();
    for &p in errloc {
        let p = p as usize;
        let (buf, q) = if p < dbits { (&mut *data, p) } else { (&mut *ecc, p - dbits) };
        if let Some(b) = buf.get_mut(q / 8) {
            *b ^= 1 << (q % 8);
        }
    }
}

/// `dst ^= src << s` over 16-word little-endian bit arrays (bits shifted out are dropped).
const fn shl_xor(dst: &mut [u64; 16], src: &[u64; 16], s: usize) {
    let (ws, bs) = (s / 64, s % 64);
    let mut i = 16;
    while i > ws {
        i -= 1;
        let mut v = src[i - ws] << bs;
        if bs != 0 && i > ws {
            v |= src[i - ws - 1] >> (64 - bs);
        }
        dst[i] ^= v;
    }
}

/// The encoder's inner loop for `L`-word remainders.
#[inline(always)]
fn kernel<const L: usize>(flat: &[u64], st: &mut [u64; MAX_ECC_WORDS], data: &[u8]) {
    let Some(flat) = flat.get(..2048 * L) else {
        return;
    };
    let Ok(tab) = <&[[u64; L]; 2048]>::try_from(flat.as_chunks::<L>().0) else {
        return;
    };
    let mut r = [0u64; L];
    r.copy_from_slice(&st[..L]);
    let (chunks, tail) = data.as_chunks::<8>();
    for ch in chunks {
        let v = u64::from_be_bytes(*ch) ^ r[0];
        let mut nr = [0u64; L];
        nr[..L - 1].copy_from_slice(&r[1..]);
        for k in 0..8 {
            let row = &tab[((((v >> (56 - 8 * k)) & 0xff) as usize) << 3) | k];
            for j in 0..L {
                nr[j] ^= row[j];
            }
        }
        r = nr;
    }
    for &b in tail {
        let top = ((r[0] >> 56) as u8 ^ b) as usize;
        for j in 0..L - 1 {
            r[j] = (r[j] << 8) | (r[j + 1] >> 56);
        }
        r[L - 1] <<= 8;
        let row = &tab[(top << 3) | 7];
        for j in 0..L {
            r[j] ^= row[j];
        }
    }
    st[..L].copy_from_slice(&r);
}

/// Capacity of the Berlekamp-Massey polynomials (degree bound 3t).
const BMC: usize = 3 * MAX_T + 2;

/// Binary Berlekamp-Massey over `syn` = S_1..S_2t (S_j at index j-1), skipping the even steps,
/// whose discrepancy is always zero for a binary code. Writes the error-locator polynomial
/// C(x) (C_0 = 1) to `c` and returns its length L, or `None` once L exceeds t.
fn berlekamp_massey<const F: usize>(gf: &Gf<F>, syn: &[u16], t: usize, c: &mut [u16; BMC]) -> Option<usize> {
    let n = gf.n();
    c.fill(0);
    c[0] = 1;
    let mut b = [0u16; BMC];
    b[0] = 1;
    let mut tmp = [0u16; BMC];
    let (mut l, mut dc, mut db) = (0usize, 0usize, 0usize);
    let mut shift = 1usize;
    let mut log_bd = 0u32;
    for k in 0..t {
        let nn = 2 * k;
        let mut d = *syn.get(nn)?;
        for i in 1..=l.min(nn) {
            let (ci, s) = (c[i], syn[nn - i]);
            if ci != 0 && s != 0 {
                d ^= gf.pow_sum(gf.log(ci), gf.log(s));
            }
        }
        if d != 0 {
            let coef = gf.add_mod(gf.log(d), n - log_bd);
            let nd = shift + db;
            if nd >= BMC {
                return None;
            }
            let grow = 2 * l <= nn;
            if grow {
                tmp[..=dc].copy_from_slice(&c[..=dc]);
            }
            for i in 0..=db {
                if b[i] != 0 {
                    c[i + shift] ^= gf.pow_sum(coef, gf.log(b[i]));
                }
            }
            if grow {
                l = nn + 1 - l;
                b[..=db].fill(0);
                b[..=dc].copy_from_slice(&tmp[..=dc]);
                db = dc;
                log_bd = gf.log(d);
                shift = 1;
            } else {
                shift += 1;
            }
            dc = dc.max(nd);
            if l > t {
                return None;
            }
        } else {
            shift += 1;
        }
        // The skipped odd step (zero discrepancy).
        shift += 1;
    }
    Some(l)
}
