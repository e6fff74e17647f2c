//! GF(2^m) arithmetic for the BCH codec, m = 5..=15.
//!
//! Owns the log/antilog tables of the field and the small helpers the decoder needs: trace,
//! square root, a table-driven solver of `y^2 + y = c`, and a GF(2) linear solver (used for the
//! affine polynomials of the degree-3 and degree-4 root finders).
//!
//! Guarantees:
//! * Elements are in the polynomial basis: bit `i` of a `u16` is the coefficient of `alpha^i`, and
//!   `alpha` is a root of the primitive polynomial (by default the one Linux `lib/bch.c` uses for
//!   the same m, see [`DEFAULT_PRIM_POLYS`]), so the field is bit-identical to the kernel's.
//! * The tables are sized by the const generic `FIELD` (a power of two, at least `2^m`): two
//!   arrays of `FIELD` `u16` entries, `4 * FIELD` bytes (32 KiB for m = 13, 64 KiB for m = 14,
//!   128 KiB for m = 15). Every table index is masked with `FIELD - 1`, so lookups never go out of
//!   bounds whatever the arguments (and the compiler drops the bounds checks).
//! * [`Gf::init`] rejects an m outside 5..=15, a table too small for m, and a polynomial that is
//!   not primitive; nothing here panics on any input.

use super::BchError;

/// Smallest supported m.
pub const MIN_M: u32 = 5;
/// Largest supported m (Linux `BCH_MAX_M`).
pub const MAX_M: u32 = 15;

/// Linux `lib/bch.c` default primitive polynomials for m = 5..=15 (index `m - 5`).
pub const DEFAULT_PRIM_POLYS: [u32; 11] =
    [0x25, 0x43, 0x83, 0x11d, 0x211, 0x409, 0x805, 0x1053, 0x201b, 0x402b, 0x8003];

/// The Linux default primitive polynomial for `m`, or `None` if m is outside 5..=15.
pub const fn default_prim_poly(m: u32) -> Option<u32> {
    if m < MIN_M || m > MAX_M {
        None
    } else {
        Some(DEFAULT_PRIM_POLYS[(m - MIN_M) as usize])
    }
}

/// Number of table entries GF(2^m) needs (`2^m`): the smallest valid `FIELD` for that m.
pub const fn field_size(m: u32) -> usize {
    1usize << m
}

/// The result of [`solve_gf2`]: one solution and a basis of the kernel.
#[derive(Copy, Clone, Debug)]
pub(crate) struct Gf2Solution {
    /// A particular solution.
    pub x: u16,
    /// Kernel basis vectors (`dim` of them).
    pub kernel: [u16; 16],
    /// Kernel dimension.
    pub dim: usize,
}

/// Solves `XOR_{i in x} cols[i] == rhs` over GF(2) (`cols[i]` is the image of basis vector `i`,
/// at most 16 columns). `None` if there is no solution.
pub(crate) const fn solve_gf2(cols: &[u16], rhs: u16) -> Option<Gf2Solution> {
    // basis[b] holds (value, combination) with the value's highest set bit at b.
    // (`while` loops: a `const fn`, so that the codec's tables can be built at compile time.)
    let mut val = [0u16; 16];
    let mut comb = [0u16; 16];
    let mut sol = Gf2Solution { x: 0, kernel: [0; 16], dim: 0 };
    let mut i = 0;
    while i < cols.len() && i < 16 {
        let mut v = cols[i];
        let mut k = 1u16 << i;
        while v != 0 {
            let b = (15 - v.leading_zeros()) as usize & 15;
            if val[b] == 0 {
                val[b] = v;
                comb[b] = k;
                break;
            }
            v ^= val[b];
            k ^= comb[b];
        }
        if v == 0 {
            sol.kernel[sol.dim & 15] = k;
            sol.dim += 1;
        }
        i += 1;
    }
    let mut v = rhs;
    while v != 0 {
        let b = (15 - v.leading_zeros()) as usize & 15;
        if val[b] == 0 {
            return None;
        }
        v ^= val[b];
        sol.x ^= comb[b];
    }
    Some(sol)
}

/// GF(2^m) with log/antilog tables of `FIELD` entries each.
#[derive(Clone)]
pub struct Gf<const FIELD: usize> {
    m: u32,
    n: u32,
    poly: u32,
    /// `pow[i] = alpha^i` for `i < n`; `pow[n] = 1`.
    pow: [u16; FIELD],
    /// `log[x]` for `x != 0`; `log[0]` is unused (0).
    log: [u16; FIELD],
    /// Bit i set iff Tr(alpha^i) = 1.
    tr_mask: u16,
    /// `quad[i]`: a y with `y^2 + y = alpha^i (+ w if Tr(alpha^i) = 1)`, w a fixed trace-1 basis
    /// element; XOR-ing them over the bits of a trace-0 c gives a root of `y^2 + y = c`.
    quad: [u16; 16],
}

impl<const FIELD: usize> Gf<FIELD> {
    /// An uninitialised (all-zero) field, for placement in a `static` before [`Gf::init`].
    pub const fn zeroed() -> Self {
        Gf { m: 0, n: 0, poly: 0, pow: [0; FIELD], log: [0; FIELD], tr_mask: 0, quad: [0; 16] }
    }

    /// Builds the tables of GF(2^m) for primitive polynomial `poly` (`None`: the Linux default).
    /// A `const fn`: a `static` field can be built at compile time (tables in flash).
    pub const fn init(&mut self, m: u32, poly: Option<u32>) -> Result<(), BchError> {
        if m < MIN_M || m > MAX_M {
            return Err(BchError::UnsupportedField);
        }
        if !FIELD.is_power_of_two() || FIELD < field_size(m) {
            return Err(BchError::TablesTooSmall);
        }
        let poly = match poly {
            Some(p) => p,
            None => match default_prim_poly(m) {
                Some(p) => p,
                None => return Err(BchError::UnsupportedField),
            },
        };
        if poly >> m != 1 {
            return Err(BchError::NotPrimitive);
        }
        let n = (1u32 << m) - 1;
        self.m = m;
        self.n = n;
        self.poly = poly;
        let mut i = 0;
        while i < FIELD {
            self.pow[i] = 0;
            self.log[i] = 0;
            i += 1;
        }
        let mut x: u32 = 1;
        let mut i = 0;
        while i < n {
            if i > 0 && x == 1 {
                return Err(BchError::NotPrimitive);
            }
            self.pow[i as usize & (FIELD - 1)] = x as u16;
            self.log[x as usize & (FIELD - 1)] = i as u16;
            x <<= 1;
            if x & (1 << m) != 0 {
                x ^= poly;
            }
            i += 1;
        }
        if x != 1 {
            return Err(BchError::NotPrimitive);
        }
        self.pow[n as usize & (FIELD - 1)] = 1;

        // Trace of each basis element alpha^i: sum of its m conjugates.
        self.tr_mask = 0;
        let mut i = 0;
        while i < m {
            let mut e = self.pow(i);
            let mut tr = 0u16;
            let mut k = 0;
            while k < m {
                tr ^= e;
                e = self.sqr(e);
                k += 1;
            }
            // tr is 0 or 1.
            if tr & 1 != 0 {
                self.tr_mask |= 1 << i;
            }
            i += 1;
        }
        // Quadratic solver table: solve y^2 + y = target_i through the linear map y -> y^2 + y.
        let w = if self.tr_mask == 0 { 0 } else { 1u16 << self.tr_mask.trailing_zeros() };
        let mut cols = [0u16; 16];
        let mut i = 0;
        while i < m as usize {
            let e = 1u16 << i;
            cols[i] = self.sqr(e) ^ e;
            i += 1;
        }
        let (cols, _) = cols.split_at(m as usize);
        self.quad = [0; 16];
        let mut i = 0;
        while i < m as usize {
            let e = 1u16 << i;
            let target = if self.tr_mask & e != 0 { e ^ w } else { e };
            match solve_gf2(cols, target) {
                Some(s) => self.quad[i] = s.x,
                None => return Err(BchError::NotPrimitive),
            }
            i += 1;
        }
        Ok(())
    }

    /// m.
    #[inline]
    pub const fn m(&self) -> u32 {
        self.m
    }

    /// n = 2^m - 1, the multiplicative order of alpha.
    #[inline]
    pub const fn n(&self) -> u32 {
        self.n
    }

    /// The primitive polynomial.
    #[inline]
    pub const fn prim_poly(&self) -> u32 {
        self.poly
    }

    /// `alpha^e` for `0 <= e <= n`.
    #[inline(always)]
    pub const fn pow(&self, e: u32) -> u16 {
        self.pow[e as usize & (FIELD - 1)]
    }

    /// `log_alpha(x)` for `x != 0` (in `0..n`); 0 for `x == 0`.
    #[inline(always)]
    pub const fn log(&self, x: u16) -> u32 {
        self.log[x as usize & (FIELD - 1)] as u32
    }

    /// `(a + b) mod n` for `a, b < n` (also correct for `a + b < 2n`).
    #[inline(always)]
    pub const fn add_mod(&self, a: u32, b: u32) -> u32 {
        let s = a + b;
        if s >= self.n {
            s - self.n
        } else {
            s
        }
    }

    /// `alpha^(a + b)` for `a, b < n`.
    #[inline(always)]
    pub const fn pow_sum(&self, a: u32, b: u32) -> u16 {
        self.pow(self.add_mod(a, b))
    }

    /// `e mod n` for any `e`.
    #[inline]
    pub const fn modn(&self, e: u32) -> u32 {
        if self.n == 0 {
            0
        } else {
            e % self.n
        }
    }

    /// `a * b`.
    #[inline(always)]
    pub const fn mul(&self, a: u16, b: u16) -> u16 {
        if a == 0 || b == 0 {
            0
        } else {
            self.pow_sum(self.log(a), self.log(b))
        }
    }

    /// `a * alpha^lb` (`lb < n`).
    #[inline(always)]
    pub const fn mul_log(&self, a: u16, lb: u32) -> u16 {
        if a == 0 {
            0
        } else {
            self.pow_sum(self.log(a), lb)
        }
    }

    /// `a / b` for `b != 0` (0 if `b == 0`; callers check).
    #[inline(always)]
    pub const fn div(&self, a: u16, b: u16) -> u16 {
        if a == 0 || b == 0 {
            0
        } else {
            self.pow_sum(self.log(a), self.n - self.log(b))
        }
    }

    /// `1 / a` for `a != 0` (0 for 0).
    #[inline(always)]
    pub const fn inv(&self, a: u16) -> u16 {
        if a == 0 {
            0
        } else {
            self.pow(self.n - self.log(a))
        }
    }

    /// `a^2`.
    #[inline(always)]
    pub const fn sqr(&self, a: u16) -> u16 {
        if a == 0 {
            0
        } else {
            self.pow_sum(self.log(a), self.log(a))
        }
    }

    /// The square root of `a` (unique in characteristic 2).
    #[inline]
    pub const fn sqrt(&self, a: u16) -> u16 {
        if a == 0 {
            return 0;
        }
        let l = self.log(a);
        // n is odd, so exactly one of l, l + n is even.
        let h = if l & 1 == 0 { l / 2 } else { (l + self.n) / 2 };
        self.pow(h)
    }

    /// The absolute trace Tr(a) in {0, 1}.
    #[inline]
    pub const fn trace(&self, a: u16) -> u16 {
        ((a & self.tr_mask).count_ones() & 1) as u16
    }

    /// A root y of `y^2 + y = c` (the other is `y + 1`), or `None` if Tr(c) = 1.
    #[inline]
    pub fn solve_quadratic(&self, c: u16) -> Option<u16> {
        if self.trace(c) != 0 {
            return None;
        }
        let mut y = 0u16;
        let mut bits = c;
        while bits != 0 {
            let i = bits.trailing_zeros() as usize;
            y ^= self.quad[i & 15];
            bits &= bits - 1;
        }
        Some(y)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    extern crate std;
    use std::boxed::Box;

    #[test]
    fn field_axioms_hold_for_every_m() {
        for m in MIN_M..=MAX_M {
            let mut gf: Box<Gf<32768>> = Box::new(Gf::zeroed());
            gf.init(m, None).unwrap();
            let n = gf.n();
            // Every nonzero element appears exactly once in pow.
            let mut seen = std::vec![false; n as usize + 1];
            for i in 0..n {
                let x = gf.pow(i) as usize;
                assert!(x != 0 && !seen[x]);
                seen[x] = true;
                assert_eq!(gf.log(x as u16), i);
            }
            let mut rng = 0x1234_5678_9abc_def0u64 ^ m as u64;
            for _ in 0..2000 {
                rng = rng.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                let a = ((rng >> 33) as u32 % (n + 1)) as u16;
                let b = ((rng >> 13) as u32 % (n + 1)) as u16;
                assert_eq!(gf.mul(a, b), gf.mul(b, a));
                if b != 0 {
                    assert_eq!(gf.mul(gf.div(a, b), b), a);
                }
                assert_eq!(gf.sqr(gf.sqrt(a)), a);
                let tr = {
                    let (mut e, mut s) = (a, 0u16);
                    for _ in 0..m {
                        s ^= e;
                        e = gf.sqr(e);
                    }
                    s
                };
                assert_eq!(tr, gf.trace(a));
                match gf.solve_quadratic(a) {
                    Some(y) => assert_eq!(gf.sqr(y) ^ y, a),
                    None => assert_eq!(gf.trace(a), 1),
                }
            }
        }
    }

    #[test]
    fn rejects_bad_parameters() {
        let mut gf: Box<Gf<8192>> = Box::new(Gf::zeroed());
        assert_eq!(gf.init(4, None), Err(BchError::UnsupportedField));
        assert_eq!(gf.init(14, None), Err(BchError::TablesTooSmall));
        // x^13 + 1 is not primitive.
        assert_eq!(gf.init(13, Some(0x2001)), Err(BchError::NotPrimitive));
        assert_eq!(gf.init(13, Some(0x201b)), Ok(()));
    }

    #[test]
    fn gf2_solver_finds_kernel_and_solution() {
        // Columns: e0 -> 0b011, e1 -> 0b011, e2 -> 0b100: kernel {e0 + e1}.
        let s = solve_gf2(&[0b011, 0b011, 0b100], 0b111).unwrap();
        assert_eq!(s.dim, 1);
        assert_eq!(s.kernel[0], 0b011);
        let img = |x: u16| {
            [0b011u16, 0b011, 0b100]
                .iter()
                .enumerate()
                .filter(|(i, _)| x >> i & 1 != 0)
                .fold(0, |a, (_, c)| a ^ c)
        };
        assert_eq!(img(s.x), 0b111);
        assert!(solve_gf2(&[0b011, 0b011, 0b100], 0b001).is_none());
    }
}
