//! List successive-cancellation (SC-list) encoder: the option that recovers part of the gap
//! between SC and ML encoding (`coding-notes.md` 2.6).
//!
//! On the BEC every path that is still consistent with the state is equally likely, so there is
//! no path metric: paths *branch* at erased free leaves (both values are consistent) and *die*
//! at determined message leaves that disagree with the message. The encoder fails only when
//! every path has died. With `L = 1` it is plain SC (with [`ListEncoder::with_sc_decisions`],
//! the very codewords of the canonical SC, which the tests check).
//!
//! Tie-break when the list is full: all paths being equally likely, the list keeps the
//! decisions it is already exploring and does not branch at new erased leaves, branching again
//! as soon as conflicts have killed paths. (The surviving paths form an affine family, so their
//! number is a power of two and a full list of `L = 2^j` paths spans `j` open decisions.) The
//! opposite tie-break (branch every erased leaf, drop the children of the last paths, i.e. fix
//! the oldest decisions) did much worse: 0.81 .. 0.89 at N = 2^16, K = 29491 for L = 2 .. 32
//! (400 trials, SC decisions in Rate-1 nodes), against 0.86 .. 0.99 for this one.
//!
//! Diversity: once the list is full, a Rate-1 node (no message index) is taken whole, and each
//! path sets the node's erased cells *at random* (any value is consistent there). Paths that
//! agree on those cells die together at later conflicts; random, path-specific values make
//! their fates nearly independent. Measured against taking SC's decision there (the
//! `WOM_HEAVY=1` test; N = 2^16, K = 29491: 1000 trials random, 250 SC decisions; N = 2^13,
//! K = 3686: 4000 and 1000):
//!
//! | L | 2^16 random | 2^16 SC decisions | 2^13 random | 2^13 SC decisions |
//! |---|---|---|---|---|
//! | 1 | 0.70 | 0.67 | 0.11 | 0.12 |
//! | 2 | 0.83 | 0.83 | 0.28 | 0.28 |
//! | 4 | 0.955 | 0.90 | 0.61 | 0.48 |
//! | 8 | 0.990 | 0.93 | 0.83 | 0.63 |
//! | 16 | 0.996 | 0.96 | 0.92 | 0.77 |
//! | 32 | 0.996 | 0.98 | 0.94 | 0.83 |
//!
//! (Setting those cells to `V & K`, i.e. 0, as the pruned SC encoder does, was worse than
//! both: 0.92 and 0.59 at L = 8.) The random source is a SplitMix64 keyed by the caller.
//!
//! Pruning: Rate-0 nodes are exact for a list (no free choice: `x = T(m_v)`, each path
//! survives iff it agrees on its known cells); Rate-1 nodes with every cell known have no
//! choice either (`x = V`). While the list has room, a Rate-1 node with erasures is descended,
//! because its free bits are what the list branches on; once it is full, the node is taken
//! whole with random free cells (above). REP and SPC nodes are always descended: paths that die
//! at their message leaves make room for branching at their free leaves.
//!
//! Erasure patterns (`K` planes) do not depend on decisions, so they are shared by all paths;
//! each path has its own `V` planes and codeword. Memory: [`scratch_words`] `u64` words of
//! caller buffer (`max(1, N/64) * (1 + 4 L)`: 264 KiB at N = 2^16, L = 8) plus about
//! `1.2 KiB * (log2 N + 1)` of stack for `L <= 32` ([`MAX_LIST`]).
//!
//! No allocation, no floating point, no panics on any input: the buffer sizes are validated
//! when the encoder is built (a buffer too small is an error), which keeps every index in
//! bounds.

use super::polar::{kind_bits, kind_words, low_mask, read_bits, transform, transform_word, Kind, ScFail};
use super::scramble::SplitMix64;

/// Largest supported list size.
pub const MAX_LIST: usize = 32;

/// Caller buffer (in `u64` words) the list encoder needs for `N = 2^n_log2` and list size `l`.
pub const fn scratch_words(n_log2: u32, l: usize) -> usize {
    let nw = if n_log2 > 6 { 1usize << (n_log2 - 6) } else { 1 };
    // K planes (shared) + per path: V levels (2 nw), codeword (nw), gather row (nw).
    nw + l * 4 * nw
}

type Vals = [u64; MAX_LIST];
type Map = [u8; MAX_LIST];

/// SC-list encoder over one codeword.
pub struct ListEncoder<'a> {
    rng: SplitMix64,
    randomize: bool,
    mset: &'a [u64],
    msg: &'a [u64],
    mpos: usize,
    l: usize,
    nw0: usize,
    lk: &'a mut [u64],
    lv: &'a mut [u64],
    xs: &'a mut [u64],
    tmp: &'a mut [u64],
}

impl<'a> ListEncoder<'a> {
    /// An encoder for message set `mset`, message `msg`, list size `l` (1..=[`MAX_LIST`]), block
    /// length `2^n_log2`, in `buf` ([`scratch_words`] words). `seed` keys the encoder's own
    /// random choices (free cells of Rate-1 nodes once the list is full); the decoder does not
    /// need it.
    pub fn new(
        mset: &'a [u64],
        msg: &'a [u64],
        l: usize,
        n_log2: u32,
        buf: &'a mut [u64],
        seed: u64,
    ) -> Result<Self, ScFail> {
        if l == 0 || l > MAX_LIST || buf.len() < scratch_words(n_log2, l) {
            return Err(ScFail::BadLength);
        }
        let nw0 = if n_log2 > 6 { 1usize << (n_log2 - 6) } else { 1 };
        let (lk, rest) = buf.split_at_mut(nw0);
        let (lv, rest) = rest.split_at_mut(2 * nw0 * l);
        let (xs, rest) = rest.split_at_mut(nw0 * l);
        let (tmp, _) = rest.split_at_mut(nw0 * l);
        Ok(ListEncoder {
            rng: SplitMix64::new(seed),
            randomize: true,
            mset,
            msg,
            mpos: 0,
            l,
            nw0,
            lk,
            lv,
            xs,
            tmp,
        })
    }

    /// Takes SC's decisions (erased free leaf -> 0) instead of random values in Rate-1 nodes
    /// once the list is full: slower and weaker, but with `L = 1` it reproduces the canonical
    /// plain SC codeword exactly (a test of the list machinery).
    pub fn with_sc_decisions(mut self) -> Self {
        self.randomize = false;
        self
    }

    #[inline(always)]
    fn take_msg(&mut self, n: u32) -> u64 {
        let m = read_bits(self.msg, self.mpos, n);
        self.mpos += n as usize;
        m
    }

    /// Encodes: channel planes `k`, `v` (`max(1, N/64)` words), codeword of a surviving path
    /// into `x`. `Err(Conflict)` when every path died.
    pub fn encode(&mut self, n_log2: u32, k: &[u64], v: &[u64], x: &mut [u64]) -> Result<(), ScFail> {
        self.mpos = 0;
        let nw0 = self.nw0;
        if n_log2 > 6 {
            if k.len() < nw0 || v.len() < nw0 || x.len() < nw0 {
                return Err(ScFail::BadLength);
            }
            // The root's input planes: path 0's level-0 V; K in a local copy of the shared plane.
            self.lv[..nw0].copy_from_slice(&v[..nw0]);
            let mut map = [0u8; MAX_LIST];
            let n = self.node_words(k, usize::MAX, 1, 0, nw0, &mut map, Side::Root)?;
            if n == 0 {
                return Err(ScFail::Conflict);
            }
            x[..nw0].copy_from_slice(&self.xs[..nw0]);
            Ok(())
        } else {
            let n = 1u32 << n_log2;
            let m = low_mask(n);
            let (Some(&k0), Some(&v0), Some(x0)) = (k.first(), v.first(), x.first_mut()) else {
                return Err(ScFail::BadLength);
            };
            let mut vals = [0u64; MAX_LIST];
            vals[0] = v0 & m;
            let mut xo = [0u64; MAX_LIST];
            let mut map = [0u8; MAX_LIST];
            let cnt = self.node_word(k0 & m, &vals[..1], n, 0, &mut xo, &mut map);
            if cnt == 0 {
                return Err(ScFail::Conflict);
            }
            *x0 = xo[0];
            Ok(())
        }
    }

    /// Offset of path `p`'s V plane at level offset `voff`.
    #[inline(always)]
    fn vbase(&self, p: usize, voff: usize) -> usize {
        p * 2 * self.nw0 + voff
    }

    /// A node of `nw >= 2` words at word offset `w0`, whose input V planes are at level offset
    /// `voff` of the first `lin` paths, and whose K plane is `kin` (the root's: the channel) or
    /// the shared level plane at `koff`. Writes the surviving paths' codewords at `w0` of their
    /// `xs` rows and their parents (input path indices) into `map`; returns their count.
    #[allow(clippy::too_many_arguments, clippy::needless_range_loop)]
    fn node_words(
        &mut self,
        kin: &[u64],
        koff: usize,
        lin: usize,
        voff: usize,
        nw: usize,
        map: &mut Map,
        side: Side,
    ) -> Result<usize, ScFail> {
        let w0 = side.w0();
        let nw0 = self.nw0;
        // The node's K plane: the channel at the root, else the shared level buffer.
        let kplane = |s: &Self, i: usize| -> u64 {
            if koff == usize::MAX {
                kin.get(i).copied().unwrap_or(0)
            } else {
                s.lk.get(koff + i).copied().unwrap_or(0)
            }
        };
        match kind_words(self.mset, w0, nw) {
            Kind::Rate0 => {
                // Common codeword T(m_v) in path 0's gather row.
                for i in 0..nw {
                    let m = self.take_msg(64);
                    self.tmp[i] = m;
                }
                transform(&mut self.tmp[..nw]);
                let mut r = 0;
                for p in 0..lin {
                    let mut bad = 0;
                    for i in 0..nw {
                        bad |= kplane(self, i) & (self.lv[self.vbase(p, voff) + i] ^ self.tmp[i]);
                    }
                    if bad == 0 {
                        map[r] = p as u8;
                        r += 1;
                    }
                }
                for q in 0..r {
                    for i in 0..nw {
                        self.xs[q * nw0 + w0 + i] = self.tmp[i];
                    }
                }
                return Ok(r);
            }
            Kind::Rate1 if (self.randomize && lin >= self.l) || (0..nw).all(|i| kplane(self, i) == !0) => {
                for p in 0..lin {
                    for i in 0..nw {
                        let kk = kplane(self, i);
                        let rnd = if kk == !0 { 0 } else { self.rng.next_u64() };
                        self.xs[p * nw0 + w0 + i] = (kk & self.lv[self.vbase(p, voff) + i]) | (rnd & !kk);
                    }
                    map[p] = p as u8;
                }
                return Ok(lin);
            }
            _ => {}
        }
        let h = nw / 2;
        // The shared child K plane lives right after this node's (the root's K is the channel).
        let ck = if koff == usize::MAX { 0 } else { koff + nw };
        let cv = voff + nw;
        let mut mapa = [0u8; MAX_LIST];
        let mut mapb = [0u8; MAX_LIST];
        // Left child: f.
        for i in 0..h {
            let (k1, k2) = (kplane(self, i), kplane(self, h + i));
            self.lk[ck + i] = k1 & k2;
        }
        for p in 0..lin {
            let b = self.vbase(p, voff);
            let c = self.vbase(p, cv);
            for i in 0..h {
                self.lv[c + i] = self.lv[b + i] ^ self.lv[b + h + i];
            }
        }
        let la = if h == 1 {
            self.word_child(ck, cv, lin, w0, &mut mapa)
        } else {
            self.node_words(kin, ck, lin, cv, h, &mut mapa, Side::At(w0))?
        };
        if la == 0 {
            return Ok(0);
        }
        // Right child: g, each surviving path q from its parent mapa[q].
        for i in 0..h {
            let (k1, k2) = (kplane(self, i), kplane(self, h + i));
            self.lk[ck + i] = k1 | k2;
        }
        for q in 0..la {
            let p = mapa[q] as usize;
            let b = self.vbase(p, voff);
            let c = self.vbase(q, cv);
            for i in 0..h {
                let k2 = kplane(self, h + i);
                let xa = self.xs[q * nw0 + w0 + i];
                self.lv[c + i] = (k2 & self.lv[b + h + i]) | (!k2 & (self.lv[b + i] ^ xa));
            }
        }
        let lb = if h == 1 {
            self.word_child(ck, cv, la, w0 + 1, &mut mapb)
        } else {
            self.node_words(kin, ck, la, cv, h, &mut mapb, Side::At(w0 + h))?
        };
        if lb == 0 {
            return Ok(0);
        }
        // Combine: x = [x_a(parent) ^ x_b, x_b].
        let th = nw0;
        for r in 0..lb {
            let q = mapb[r] as usize;
            for i in 0..h {
                self.tmp[r * th + i] = self.xs[q * nw0 + w0 + i];
            }
        }
        for r in 0..lb {
            for i in 0..h {
                self.xs[r * nw0 + w0 + i] = self.tmp[r * th + i] ^ self.xs[r * nw0 + w0 + h + i];
            }
            map[r] = mapa[mapb[r] as usize];
        }
        Ok(lb)
    }

    /// A 64-bit node whose planes are in the buffers; writes its paths' words at `w`.
    fn word_child(&mut self, ck: usize, cv: usize, lin: usize, w: usize, map: &mut Map) -> usize {
        let k = self.lk[ck];
        let mut vals = [0u64; MAX_LIST];
        for (p, v) in vals.iter_mut().enumerate().take(lin) {
            *v = self.lv[self.vbase(p, cv)];
        }
        let mut xo = [0u64; MAX_LIST];
        let cnt = self.node_word(k, &vals[..lin], 64, w * 64, &mut xo, map);
        for (r, &x) in xo.iter().enumerate().take(cnt) {
            self.xs[r * self.nw0 + w] = x;
        }
        cnt
    }

    /// A node of `n <= 64` bits at bit offset `off`; `k` and the paths' `v` in the low `n` bits.
    /// Writes the survivors' codeword bits to `xo` and parents to `map`; returns their count.
    #[allow(clippy::needless_range_loop)]
    fn node_word(&mut self, k: u64, v: &[u64], n: u32, off: usize, xo: &mut Vals, map: &mut Map) -> usize {
        let lin = v.len();
        let full = low_mask(n);
        match kind_bits(self.mset, off, n) {
            Kind::Rate0 => {
                let x = transform_word(self.take_msg(n), n);
                let mut r = 0;
                for (p, &vp) in v.iter().enumerate() {
                    if k & (vp ^ x) == 0 {
                        xo[r] = x;
                        map[r] = p as u8;
                        r += 1;
                    }
                }
                return r;
            }
            // Rate-1 node: fully known, or the list is full (no new decision can be explored):
            // taken whole, each path's erased cells set at random (see the module docs).
            Kind::Rate1 if k == full || (self.randomize && lin >= self.l) => {
                for (p, &vp) in v.iter().enumerate() {
                    let rnd = if k == full { 0 } else { self.rng.next_u64() };
                    xo[p] = (vp & k) | (rnd & !k & full);
                    map[p] = p as u8;
                }
                return lin;
            }
            Kind::Rate1 if n == 1 => {
                // Erased free leaf: both values are consistent. Branch the first paths while the
                // list has room; the others (all of them once the list is full) take the SC
                // decision 0, so the list keeps exploring its older open decisions.
                let branching = self.l.saturating_sub(lin);
                let mut r = 0;
                for p in 0..lin {
                    xo[r] = 0;
                    map[r] = p as u8;
                    r += 1;
                    if p < branching {
                        xo[r] = 1;
                        map[r] = p as u8;
                        r += 1;
                    }
                }
                return r;
            }
            _ => {}
        }
        let h = n / 2;
        let m = low_mask(h);
        let (k1, k2) = (k & m, (k >> h) & m);
        let mut vl = [0u64; MAX_LIST];
        for (o, &vp) in vl.iter_mut().zip(v.iter()) {
            *o = (vp & m) ^ ((vp >> h) & m);
        }
        let mut xa = [0u64; MAX_LIST];
        let mut mapa = [0u8; MAX_LIST];
        let la = self.node_word(k1 & k2, &vl[..lin], h, off, &mut xa, &mut mapa);
        if la == 0 {
            return 0;
        }
        let mut vr = [0u64; MAX_LIST];
        for q in 0..la {
            let vp = v[mapa[q] as usize];
            let (v1, v2) = (vp & m, (vp >> h) & m);
            vr[q] = ((k2 & v2) | (!k2 & (v1 ^ xa[q]))) & m;
        }
        let mut xb = [0u64; MAX_LIST];
        let mut mapb = [0u8; MAX_LIST];
        let lb = self.node_word(k1 | k2, &vr[..la], h, off + h as usize, &mut xb, &mut mapb);
        for r in 0..lb {
            let q = mapb[r] as usize;
            xo[r] = (xa[q] ^ xb[r]) | (xb[r] << h);
            map[r] = mapa[q];
        }
        lb
    }
}

/// Where a multi-word node sits (its first word).
#[derive(Copy, Clone)]
enum Side {
    Root,
    At(usize),
}

impl Side {
    fn w0(self) -> usize {
        match self {
            Side::Root => 0,
            Side::At(w) => w,
        }
    }
}
