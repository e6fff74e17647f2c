//! Bit-packed polar transform, successive-cancellation (SC) encoder and message extraction.
//!
//! Conventions (`coding-notes.md` 1.1, 1.4): natural order, `x = u F^{(x)n}` with
//! `F = [[1,0],[1,1]]`, i.e. `x = [T(u_a) ^ T(u_b), T(u_b)]`; the index's most significant bit is
//! the outermost split, 0 the check ("minus", f) branch. Bits are packed 64 per `u64`, bit `i`
//! of a vector in bit `i % 64` of word `i / 64`.
//!
//! **Encoder.** On the last write the WOM test channel is a BEC, so every LLR is ternary and the
//! SC encoder keeps two bit-planes per vector: `K` (known) and `V` (value, meaningful where
//! known). The channel is `K = s` (cells programmed by the first write, paper convention) and
//! `V = !g` (a programmed cell needs `x = 1 ^ g`); free cells are erasures.
//! * f: `K = K1 & K2`, `V = V1 ^ V2`; g: `K = K1 | K2`, `V = K2 ? V2 : V1 ^ x_a`;
//! * free leaf: `u = K & V` (erased -> 0); message leaf: `u = m`, failure if known and different;
//! * Rate-0 node (all message): `x = T(m_v)`, failure iff `K & (V ^ x) != 0`; Rate-1 node (no
//!   message): `x = V & K`; repetition node (all message but the last index):
//!   `x = T(m') ^ c 1` with `c` the value that fits the known cells, failure if neither does;
//!   single-parity-check node (only the first index): `x = V & K` with one erased cell flipped
//!   if the parity disagrees with `m_0`, failure iff every cell is known and the parity
//!   disagrees. Each is exact for this channel: the node fails iff SC would fail in it (for
//!   REP and SPC the free indices come after all message indices, or there is a single
//!   message index first, so SC's choices inside cannot cause a later conflict), so success
//!   statistics equal plain SC's; the codeword may differ. `prune = false` gives the canonical
//!   plain SC of the vectors.
//!
//! Nodes of 128 cells or more work on word slices (their planes live in caller buffers, one level
//! below another, `< N/64` words per plane in all); nodes of 64 cells or fewer work inside one
//! `u64` with shifts. The codeword `x` is built in place in the output buffer
//! (`x = [x_a ^ x_b, x_b]`), so the whole encoder needs `4 * N / 64` words of planes plus the
//! output. The message is consumed in index order: message bit `k` is `u` at the `k`-th smallest
//! message index.
//!
//! **Decoder.** `u = T(x)`, then the message bits are read out of `u` run by run of the message
//! bitmap (a word with 64 message bits is copied whole).
//!
//! No allocation, no floating point, no panics: all slice accesses are bounds-checked or done
//! with `get`, and inconsistent lengths give an error before any work.

/// `n` low bits set (`n <= 64`).
#[inline(always)]
pub const fn low_mask(n: u32) -> u64 {
    if n >= 64 {
        !0
    } else {
        (1u64 << n) - 1
    }
}

const STAGE: [u64; 6] = [
    0x5555_5555_5555_5555,
    0x3333_3333_3333_3333,
    0x0F0F_0F0F_0F0F_0F0F,
    0x00FF_00FF_00FF_00FF,
    0x0000_FFFF_0000_FFFF,
    0x0000_0000_FFFF_FFFF,
];

/// Polar transform of the low `n` bits of `x` (`n` a power of two, at most 64; the bits above
/// `n` must be zero).
#[inline(always)]
pub fn transform_word(mut x: u64, n: u32) -> u64 {
    let mut s = 0;
    let mut h = 1;
    while h < n && s < 6 {
        x ^= (x >> h) & STAGE[s];
        h <<= 1;
        s += 1;
    }
    x
}

#[inline(always)]
fn transform64(mut x: u64) -> u64 {
    x ^= (x >> 1) & STAGE[0];
    x ^= (x >> 2) & STAGE[1];
    x ^= (x >> 4) & STAGE[2];
    x ^= (x >> 8) & STAGE[3];
    x ^= (x >> 16) & STAGE[4];
    x ^= (x >> 32) & STAGE[5];
    x
}

/// In-place polar transform of `words.len() * 64` bits (`words.len()` a power of two). An
/// involution: it maps `u` to `x` and `x` back to `u`.
pub fn transform(words: &mut [u64]) {
    let n = words.len();
    for w in words.iter_mut() {
        *w = transform64(*w);
    }
    let mut h = 1;
    if n >= 4 {
        // The first two cross-word stages in one pass over 4-word blocks.
        for c in words.chunks_exact_mut(4) {
            let (a1, c1) = (c[0] ^ c[1], c[2] ^ c[3]);
            c[0] = a1 ^ c1;
            c[1] ^= c[3];
            c[2] = c1;
        }
        h = 4;
    }
    while h < n {
        for block in words.chunks_exact_mut(2 * h) {
            let (a, b) = block.split_at_mut(h);
            for (x, y) in a.iter_mut().zip(b.iter()) {
                *x ^= *y;
            }
        }
        h <<= 1;
    }
}

/// Reads `n <= 64` bits starting at bit `pos` of a packed vector (zeros past its end).
#[inline(always)]
pub fn read_bits(v: &[u64], pos: usize, n: u32) -> u64 {
    let w = pos / 64;
    let b = (pos % 64) as u32;
    let lo = v.get(w).copied().unwrap_or(0) >> b;
    let hi = if b != 0 && b + n > 64 { v.get(w + 1).copied().unwrap_or(0) << (64 - b) } else { 0 };
    (lo | hi) & low_mask(n)
}

/// Why the SC encoder stopped.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum ScFail {
    /// A determined message index disagreed with the message: no codeword of the message's
    /// coset is reachable by SC from this state (the WOM encoding failure).
    Conflict,
    /// Inconsistent buffer lengths.
    BadLength,
}

/// Node classes of the pruned tree.
#[derive(Copy, Clone, PartialEq, Eq)]
pub(crate) enum Kind {
    /// Every index carries message.
    Rate0,
    /// No index carries message.
    Rate1,
    /// Every index but the last carries message (repetition node).
    Rep,
    /// Only the first index carries message (single parity check node).
    Spc,
    Mixed,
}

/// Class of the `nw`-word node at word `w0` of the message bitmap.
#[inline]
pub(crate) fn kind_words(mset: &[u64], w0: usize, nw: usize) -> Kind {
    let Some(s) = mset.get(w0..w0 + nw) else { return Kind::Mixed };
    let (first, last) = (s[0], s[nw - 1]);
    let (inner, tail) = s.split_at(nw - 1);
    if first == 0 {
        if s.iter().all(|&w| w == 0) {
            return Kind::Rate1;
        }
    } else if first == !0 && inner.iter().all(|&w| w == !0) {
        if last == !0 {
            return Kind::Rate0;
        }
        if last == !0 >> 1 {
            return Kind::Rep;
        }
    } else if first == 1 && tail.iter().chain(inner[1..].iter()).all(|&w| w == 0) {
        return Kind::Spc;
    }
    Kind::Mixed
}

/// Class of the `n`-bit (n <= 64) node at bit `off` of the message bitmap.
#[inline(always)]
pub(crate) fn kind_bits(mset: &[u64], off: usize, n: u32) -> Kind {
    let m = read_bits(mset, off, n);
    if m == 0 {
        Kind::Rate1
    } else if m == low_mask(n) {
        Kind::Rate0
    } else if m == low_mask(n - 1) {
        Kind::Rep
    } else if m == 1 {
        Kind::Spc
    } else {
        Kind::Mixed
    }
}

/// Single-path SC encoder over one codeword.
pub struct ScEncoder<'a> {
    mset: &'a [u64],
    msg: &'a [u64],
    mpos: usize,
    prune: bool,
}

impl<'a> ScEncoder<'a> {
    /// An encoder for the message set `mset` (bitmap) and the packed message `msg`. `prune`
    /// enables node pruning (Rate-0, Rate-1, REP, SPC); without it the encoder is the canonical
    /// plain SC.
    pub fn new(mset: &'a [u64], msg: &'a [u64], prune: bool) -> Self {
        ScEncoder { mset, msg, mpos: 0, prune }
    }

    #[inline(always)]
    fn take_msg(&mut self, n: u32) -> u64 {
        let m = read_bits(self.msg, self.mpos, n);
        self.mpos += n as usize;
        m
    }

    /// Encodes a codeword of `2^n_log2` bits: channel planes `k`, `v` (`max(1, N/64)` words,
    /// bits past N ignored), codeword into `x` (same length); `lk`, `lv`: level buffers of at
    /// least `N/64` words each (unused below N = 256).
    pub fn encode(
        &mut self,
        n_log2: u32,
        k: &[u64],
        v: &[u64],
        x: &mut [u64],
        lk: &mut [u64],
        lv: &mut [u64],
    ) -> Result<(), ScFail> {
        self.mpos = 0;
        if n_log2 > 6 {
            let nw = 1usize << (n_log2 - 6);
            if k.len() < nw || v.len() < nw || x.len() < nw || lk.len() < nw / 2 || lv.len() < nw / 2 {
                return Err(ScFail::BadLength);
            }
            self.node_words(&k[..nw], &v[..nw], 0, &mut x[..nw], lk, lv)
        } else {
            let n = 1u32 << n_log2;
            let m = low_mask(n);
            let (Some(&k0), Some(&v0), Some(x0)) = (k.first(), v.first(), x.first_mut()) else {
                return Err(ScFail::BadLength);
            };
            *x0 = self.node_word(k0 & m, v0 & m, n, 0)?;
            Ok(())
        }
    }

    /// A node of `k.len() >= 2` words at word offset `w0`.
    fn node_words(
        &mut self,
        k: &[u64],
        v: &[u64],
        w0: usize,
        x: &mut [u64],
        lk: &mut [u64],
        lv: &mut [u64],
    ) -> Result<(), ScFail> {
        let nw = k.len();
        if self.prune {
            match kind_words(self.mset, w0, nw) {
                Kind::Rate1 => {
                    for ((xo, &kk), &vv) in x.iter_mut().zip(k).zip(v) {
                        *xo = kk & vv;
                    }
                    return Ok(());
                }
                Kind::Rate0 => {
                    for xo in x.iter_mut() {
                        *xo = self.take_msg(64);
                    }
                    transform(x);
                    let mut bad = 0;
                    for ((&xo, &kk), &vv) in x.iter().zip(k).zip(v) {
                        bad |= kk & (vv ^ xo);
                    }
                    return if bad == 0 { Ok(()) } else { Err(ScFail::Conflict) };
                }
                Kind::Rep => {
                    // u = [m_0 .. m_{n-2}, c]: x = T(m') ^ c * 1; c = 0 or 1 must fit all known
                    // cells.
                    for xo in x[..nw - 1].iter_mut() {
                        *xo = self.take_msg(64);
                    }
                    x[nw - 1] = self.take_msg(63);
                    transform(x);
                    let (mut any, mut all) = (0u64, !0u64);
                    for ((&xo, &kk), &vv) in x.iter().zip(k).zip(v) {
                        let d = kk & (vv ^ xo);
                        any |= d;
                        all &= !(d ^ kk);
                    }
                    if any == 0 {
                        return Ok(());
                    }
                    if all != !0 {
                        return Err(ScFail::Conflict);
                    }
                    for xo in x.iter_mut() {
                        *xo = !*xo;
                    }
                    return Ok(());
                }
                Kind::Spc => {
                    // u_0 = parity(x) = m_0, the rest free: x = V & K, fixed up on an erased
                    // cell if the parity is wrong; failure iff every cell is known and disagrees.
                    let m0 = self.take_msg(1);
                    let mut par = 0u32;
                    let mut known = !0u64;
                    for ((xo, &kk), &vv) in x.iter_mut().zip(k).zip(v) {
                        *xo = kk & vv;
                        par ^= xo.count_ones();
                        known &= kk;
                    }
                    if u64::from(par & 1) == m0 {
                        return Ok(());
                    }
                    if known == !0 {
                        return Err(ScFail::Conflict);
                    }
                    for (xo, &kk) in x.iter_mut().zip(k) {
                        if kk != !0 {
                            let e = !kk;
                            *xo ^= e & e.wrapping_neg();
                            break;
                        }
                    }
                    return Ok(());
                }
                Kind::Mixed => {}
            }
        }
        let h = nw / 2;
        let (k1, k2) = k.split_at(h);
        let (v1, v2) = v.split_at(h);
        let (xa, xb) = x.split_at_mut(h);
        if h == 1 {
            let (k1, k2, v1, v2) = (k1[0], k2[0], v1[0], v2[0]);
            let a = self.node64(k1 & k2, v1 ^ v2, w0 * 64)?;
            let b = self.node64(k1 | k2, (k2 & v2) | (!k2 & (v1 ^ a)), w0 * 64 + 64)?;
            xa[0] = a ^ b;
            xb[0] = b;
            return Ok(());
        }
        if lk.len() < h || lv.len() < h {
            return Err(ScFail::BadLength);
        }
        let (ck, rk) = lk.split_at_mut(h);
        let (cv, rv) = lv.split_at_mut(h);
        for i in 0..h {
            ck[i] = k1[i] & k2[i];
            cv[i] = v1[i] ^ v2[i];
        }
        self.node_words(ck, cv, w0, xa, rk, rv)?;
        for i in 0..h {
            let kk2 = k2[i];
            ck[i] = k1[i] | kk2;
            cv[i] = (kk2 & v2[i]) | (!kk2 & (v1[i] ^ xa[i]));
        }
        self.node_words(ck, cv, w0 + h, xb, rk, rv)?;
        for (a, &b) in xa.iter_mut().zip(xb.iter()) {
            *a ^= b;
        }
        Ok(())
    }

    /// The special (pruned) node classes of an `n`-bit node (n <= 64) at `off`: `Some(x)` when
    /// the node was handled whole, `None` when it must be split.
    #[inline(always)]
    fn special_word(&mut self, k: u64, v: u64, n: u32, off: usize) -> Result<Option<u64>, ScFail> {
        match kind_bits(self.mset, off, n) {
            Kind::Rate1 => Ok(Some(k & v)),
            Kind::Rate0 => {
                let x = transform_word(self.take_msg(n), n);
                if k & (v ^ x) == 0 {
                    Ok(Some(x))
                } else {
                    Err(ScFail::Conflict)
                }
            }
            Kind::Rep => {
                let x = transform_word(self.take_msg(n - 1), n);
                let d = k & (v ^ x);
                if d == 0 {
                    Ok(Some(x))
                } else if d == k {
                    Ok(Some(x ^ low_mask(n)))
                } else {
                    Err(ScFail::Conflict)
                }
            }
            Kind::Spc => {
                let m0 = self.take_msg(1);
                let x = k & v;
                if u64::from(x.count_ones() & 1) == m0 {
                    return Ok(Some(x));
                }
                let e = !k & low_mask(n);
                if e == 0 {
                    Err(ScFail::Conflict)
                } else {
                    Ok(Some(x ^ (e & e.wrapping_neg())))
                }
            }
            Kind::Mixed => Ok(None),
        }
    }

    /// A leaf at index `off`: a message leaf takes the next message bit (failure if the leaf
    /// is known and differs), a free leaf is `K & V` (erased -> 0).
    #[inline(always)]
    fn node1(&mut self, k: u64, v: u64, off: usize) -> Result<u64, ScFail> {
        if read_bits(self.mset, off, 1) == 0 {
            Ok(k & v)
        } else {
            let m = self.take_msg(1);
            if k & (v ^ m) == 0 {
                Ok(m)
            } else {
                Err(ScFail::Conflict)
            }
        }
    }
}

/// In-word nodes, one function per size so that masks, shifts and the transform are constants:
/// `k`, `v` hold the node's planes in the low `n` bits (higher bits zero), the result is its
/// codeword bits.
macro_rules! word_node {
    ($name:ident, $n:expr, $child:ident) => {
        impl ScEncoder<'_> {
            fn $name(&mut self, k: u64, v: u64, off: usize) -> Result<u64, ScFail> {
                const N: u32 = $n;
                const H: u32 = N / 2;
                const M: u64 = low_mask(H);
                if self.prune {
                    if let Some(x) = self.special_word(k, v, N, off)? {
                        return Ok(x);
                    }
                }
                let (k1, k2, v1, v2) = (k & M, (k >> H) & M, v & M, (v >> H) & M);
                let a = self.$child(k1 & k2, v1 ^ v2, off)?;
                let b = self.$child(k1 | k2, ((k2 & v2) | (!k2 & (v1 ^ a))) & M, off + H as usize)?;
                Ok((a ^ b) | (b << H))
            }
        }
    };
}

word_node!(node2, 2, node1);
word_node!(node4, 4, node2);
word_node!(node8, 8, node4);
word_node!(node16, 16, node8);
word_node!(node32, 32, node16);
word_node!(node64, 64, node32);

impl ScEncoder<'_> {
    /// A node of `n <= 64` bits at `off` (dispatch on `n`).
    fn node_word(&mut self, k: u64, v: u64, n: u32, off: usize) -> Result<u64, ScFail> {
        match n {
            64 => self.node64(k, v, off),
            32 => self.node32(k, v, off),
            16 => self.node16(k, v, off),
            8 => self.node8(k, v, off),
            4 => self.node4(k, v, off),
            2 => self.node2(k, v, off),
            _ => self.node1(k, v, off),
        }
    }
}

/// Sequential bit writer into a byte slice, starting at any bit position. Bits are LSB-first in
/// each byte. Bits already in the first partial byte below the start are kept; the bytes after
/// the end of the stream, up to 8, may be overwritten with zeros.
pub struct BitWriter<'a> {
    out: &'a mut [u8],
    byte: usize,
    acc: u64,
    nacc: u32,
}

impl<'a> BitWriter<'a> {
    /// A writer at bit `pos` of `out`.
    pub fn new(out: &'a mut [u8], pos: usize) -> Self {
        let byte = pos / 8;
        let nacc = (pos % 8) as u32;
        let acc = out.get(byte).map(|&b| u64::from(b) & low_mask(nacc)).unwrap_or(0);
        BitWriter { out, byte, acc, nacc }
    }

    #[inline(always)]
    fn store(&mut self, w: u64) {
        if let Some(dst) = self.out.get_mut(self.byte..self.byte + 8) {
            dst.copy_from_slice(&w.to_le_bytes());
        } else {
            for (d, s) in self.out.iter_mut().skip(self.byte).zip(w.to_le_bytes()) {
                *d = s;
            }
        }
    }

    /// Appends the low `n <= 64` bits of `bits` (higher bits must be zero). Branch-free: the
    /// current word is stored every time (so bytes of `out` past the stream's end may be
    /// zeroed).
    #[inline(always)]
    pub fn push(&mut self, bits: u64, n: u32) {
        let wide = u128::from(self.acc) | (u128::from(bits) << self.nacc);
        let total = self.nacc + n;
        self.store(wide as u64);
        let adv = total >> 6;
        self.byte += 8 * adv as usize;
        self.acc = (wide >> (64 * adv)) as u64;
        self.nacc = total & 63;
    }

    /// Writes the pending bits (up to the last partial byte).
    pub fn finish(self) {
        let nbytes = self.nacc.div_ceil(8) as usize;
        let bytes = self.acc.to_le_bytes();
        for (d, &s) in self.out.iter_mut().skip(self.byte).zip(bytes[..nbytes].iter()) {
            *d = s;
        }
    }
}

/// The little-endian `u64` at byte `at` of `src` (bytes past the end read as `fill`).
#[inline(always)]
pub fn load_u64(src: &[u8], at: usize, fill: u8) -> u64 {
    if let Some(s) = src.get(at..at + 8) {
        let mut b = [0u8; 8];
        b.copy_from_slice(s);
        u64::from_le_bytes(b)
    } else {
        let mut b = [fill; 8];
        for (d, s) in b.iter_mut().zip(src.iter().skip(at)) {
            *d = *s;
        }
        u64::from_le_bytes(b)
    }
}

/// Reads `n <= 64` bits at bit `pos` of a byte slice (LSB first, zeros past the end).
#[inline(always)]
pub fn read_bits_bytes(src: &[u8], pos: usize, n: u32) -> u64 {
    let at = pos / 8;
    let sh = (pos % 8) as u32;
    let lo = load_u64(src, at, 0) >> sh;
    let hi = if sh != 0 && sh + n > 64 {
        u64::from(src.get(at + 8).copied().unwrap_or(0)) << (64 - sh)
    } else {
        0
    };
    (lo | hi) & low_mask(n)
}

/// Reads `n` bits starting at bit `pos` of a byte slice (LSB-first) into packed words `out`
/// (`ceil(n/64)` words are written; bits past the slice read as zero).
pub fn bytes_to_words(src: &[u8], pos: usize, n: usize, out: &mut [u64]) {
    let words = n.div_ceil(64);
    for (i, o) in out.iter_mut().take(words).enumerate() {
        let rem = n - 64 * i;
        *o = read_bits_bytes(src, pos + 64 * i, rem.min(64) as u32);
    }
}

/// Appends the message bits of `u` (the bits at the message set `mset` in index order) to `w`.
/// `u` and `mset` cover the same `max(1, N/64)` words; for N < 64 `mset` must be masked to N.
/// Each word's bits are gathered run by run in a register and appended with one push.
#[inline]
pub fn extract_message(u: &[u64], mset: &[u64], w: &mut BitWriter<'_>) {
    for (&uu, &mm) in u.iter().zip(mset.iter()) {
        if mm == 0 {
            continue;
        }
        if mm == !0 {
            w.push(uu, 64);
            continue;
        }
        let mut m = mm;
        let mut base = 0u32;
        let mut acc = 0u64;
        let mut filled = 0u32;
        while m != 0 {
            let tz = m.trailing_zeros();
            m >>= tz;
            base += tz;
            // m != !0 here, so the run is shorter than 64 and the shifts below are in range.
            let run = (!m).trailing_zeros();
            acc |= ((uu >> base) & low_mask(run)) << filled;
            filled += run;
            m >>= run;
            base += run;
        }
        w.push(acc, filled);
    }
}
