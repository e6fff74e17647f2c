//! Root finding for the BCH error-locator polynomial: all roots of a monic polynomial of degree
//! d <= 64 over GF(2^m), or a refusal.
//!
//! Owns the algorithm only (no tables of its own; scratch is on the stack: about 8 KiB for
//! degree >= 5, whatever the degree, since the arrays are sized for 64; a few hundred bytes below).
//! Method, written from the textbook descriptions (not from Linux' source):
//! * degree 1: the constant term;
//! * degree 2: `y^2 + y = c` through the field's precomputed solution basis ([`Gf::solve_quadratic`]);
//! * degree 3 and 4: reduction to an affine polynomial `x^4 + b x^2 + c x + d` (GF(2)-linear plus a
//!   constant), solved as an m x m linear system over GF(2);
//! * degree >= 5: Berlekamp's trace algorithm. `x^(2^i) mod f` is computed once for i < m; then
//!   `gcd(g, Tr(alpha^k x) mod g)` splits a factor g into the roots with trace 0 and 1, trying
//!   k = 0, 1, .. m-1 (a basis, so distinct roots always end up separated), down to degree <= 4.
//!
//! Guarantee: [`find_roots`] returns `Some(d)` only with d distinct nonzero roots, each verified
//! by construction; otherwise `None` (repeated roots, roots outside GF(2^m), zero root). For
//! degree >= 5 it first checks `x^(2^m) = x mod f`, which holds exactly when f splits into
//! distinct linear factors, so an uncorrectable word is usually refused before any factoring.

use super::gf::{solve_gf2, Gf};
use super::MAX_T;

/// Sentinel "log of zero" in `u16` tables (logs are below 2^15 - 1).
const Z16: u16 = u16::MAX;
/// Coefficient capacity of a polynomial of degree <= MAX_T.
const PC: usize = MAX_T + 1;

/// Finds the roots of the monic polynomial `f` (`f[i]` is the coefficient of `x^i`,
/// `f.len() - 1 = d` in 1..=64, `f[d] = 1`). Writes them to `roots[..d]`.
pub(crate) fn find_roots<const F: usize>(gf: &Gf<F>, f: &[u16], roots: &mut [u16; MAX_T]) -> Option<usize> {
    let d = f.len().checked_sub(1)?;
    if d == 0 || d > MAX_T || f[d] != 1 || f[0] == 0 {
        return None;
    }
    if d <= 4 {
        let mut cnt = 0;
        small_roots(gf, f, roots, &mut cnt)?;
        return (cnt == d).then_some(d);
    }
    bta(gf, f, roots)
}

/// Roots of a monic polynomial of degree 1..=4, appended at `out[*cnt..]`; `None` unless it has
/// exactly `deg` distinct nonzero roots.
fn small_roots<const F: usize>(gf: &Gf<F>, f: &[u16], out: &mut [u16; MAX_T], cnt: &mut usize) -> Option<()> {
    let d = f.len().checked_sub(1)?;
    if *cnt + d > MAX_T || f[0] == 0 {
        return None;
    }
    match d {
        1 => {
            out[*cnt] = f[0];
            *cnt += 1;
        }
        2 => {
            // x^2 + a x + b, x = a y: y^2 + y = b / a^2.
            let (a, b) = (f[1], f[0]);
            if a == 0 {
                return None;
            }
            let y = gf.solve_quadratic(gf.div(b, gf.sqr(a)))?;
            let r = gf.mul(a, y);
            out[*cnt] = r;
            out[*cnt + 1] = r ^ a;
            *cnt += 2;
        }
        3 => {
            // (x + a)(x^3 + a x^2 + b x + c) = x^4 + (a^2 + b) x^2 + (a b + c) x + a c.
            let (a, b, c) = (f[2], f[1], f[0]);
            let r = affine4(gf, gf.sqr(a) ^ b, gf.mul(a, b) ^ c, gf.mul(a, c))?;
            let mut found_a = false;
            for x in r {
                if x == a && !found_a {
                    found_a = true;
                } else {
                    out[*cnt] = x;
                    *cnt += 1;
                }
            }
            if !found_a {
                return None;
            }
        }
        4 => {
            let (a, b, c, e0) = (f[3], f[2], f[1], f[0]);
            if a == 0 {
                let r = affine4(gf, b, c, e0)?;
                out[*cnt..*cnt + 4].copy_from_slice(&r);
            } else {
                // x = y + e with e^2 = c / a removes the linear term:
                // y^4 + a y^3 + (a e + b) y^2 + f(e); then z = 1/y gives an affine polynomial.
                let e = gf.sqrt(gf.div(c, a));
                let fe = eval(gf, f, e);
                if fe == 0 {
                    return None; // y = 0 would be a double root
                }
                let b2 = gf.mul(a, e) ^ b;
                let r = affine4(gf, gf.div(b2, fe), gf.div(a, fe), gf.inv(fe))?;
                for (o, z) in out[*cnt..*cnt + 4].iter_mut().zip(r) {
                    *o = gf.inv(z) ^ e;
                }
            }
            *cnt += 4;
        }
        _ => return None,
    }
    Some(())
}

/// The four distinct roots of `x^4 + b x^2 + c x + d`, or `None`.
fn affine4<const F: usize>(gf: &Gf<F>, b: u16, c: u16, d: u16) -> Option<[u16; 4]> {
    let m = gf.m();
    let mut cols = [0u16; 16];
    for (i, col) in cols.iter_mut().enumerate().take(m as usize) {
        let i = i as u32;
        // alpha^i is basis vector i.
        *col = gf.pow(gf.modn(4 * i)) ^ gf.mul_log(b, gf.modn(2 * i)) ^ gf.mul_log(c, i);
    }
    let s = solve_gf2(&cols[..m as usize], d)?;
    if s.dim != 2 {
        return None;
    }
    let (k0, k1) = (s.kernel[0], s.kernel[1]);
    // Zero is a root only when d = 0 (the degree-3 reduction with a = 0); callers handle it.
    Some([s.x, s.x ^ k0, s.x ^ k1, s.x ^ k0 ^ k1])
}

/// `f(x)`.
fn eval<const F: usize>(gf: &Gf<F>, f: &[u16], x: u16) -> u16 {
    let mut acc = 0u16;
    for &c in f.iter().rev() {
        acc = gf.mul(acc, x) ^ c;
    }
    acc
}

/// Highest index with a nonzero coefficient, `None` for the zero polynomial.
fn degree(p: &[u16]) -> Option<usize> {
    p.iter().rposition(|&c| c != 0)
}

/// `a <- a mod b` (b of degree `db` with nonzero leading coefficient), a of degree <= `da`.
fn rem_in_place<const F: usize>(gf: &Gf<F>, a: &mut [u16], da: usize, b: &[u16], db: usize) {
    if da < db || db >= b.len() || da >= a.len() {
        return;
    }
    let n = gf.n();
    let inv_lead = n - gf.log(b[db]);
    let mut lb = [Z16; PC];
    for (l, &c) in lb.iter_mut().zip(&b[..db]) {
        if c != 0 {
            *l = gf.log(c) as u16;
        }
    }
    for i in (db..=da).rev() {
        let c = a[i];
        if c == 0 {
            continue;
        }
        let q = gf.add_mod(gf.log(c), inv_lead);
        let base = i - db;
        for (ac, &l) in a[base..i].iter_mut().zip(&lb[..db]) {
            if l != Z16 {
                *ac ^= gf.pow_sum(q, l as u32);
            }
        }
        a[i] = 0;
    }
}

/// The monic gcd of `a` (degree `da`) and `b` (nonzero, degree `db <= da`), written to `out`;
/// returns its degree. Destroys `a` and `b`.
fn gcd_monic<const F: usize>(
    gf: &Gf<F>,
    a: &mut [u16; PC],
    da: usize,
    b: &mut [u16; PC],
    db: usize,
    out: &mut [u16; PC],
) -> usize {
    let (mut x, mut y) = (a, b);
    let (mut dx, mut dy) = (da, db);
    loop {
        rem_in_place(gf, &mut x[..], dx, &y[..], dy);
        match degree(&x[..dy]) {
            Some(dr) => {
                core::mem::swap(&mut x, &mut y);
                dx = dy;
                dy = dr;
            }
            None => {
                let inv = gf.inv(y[dy]);
                for (o, &c) in out.iter_mut().zip(&y[..=dy]) {
                    *o = gf.mul(c, inv);
                }
                return dy;
            }
        }
    }
}

/// `q = a / b` for b monic dividing a exactly (degrees `da`, `db`); returns the degree of q.
fn div_exact<const F: usize>(
    gf: &Gf<F>,
    a: &[u16],
    da: usize,
    b: &[u16],
    db: usize,
    q: &mut [u16; PC],
) -> usize {
    let mut r = [0u16; PC];
    r[..=da].copy_from_slice(&a[..=da]);
    let mut lb = [Z16; PC];
    for (l, &c) in lb.iter_mut().zip(&b[..db]) {
        if c != 0 {
            *l = gf.log(c) as u16;
        }
    }
    q.fill(0);
    for i in (db..=da).rev() {
        let c = r[i];
        q[i - db] = c;
        if c == 0 {
            continue;
        }
        let lc = gf.log(c);
        for (rc, &l) in r[i - db..i].iter_mut().zip(&lb[..db]) {
            if l != Z16 {
                *rc ^= gf.pow_sum(lc, l as u32);
            }
        }
        r[i] = 0;
    }
    da - db
}

/// Berlekamp trace algorithm for degree >= 5. Not inlined, so that its 8 KiB of scratch is on
/// the stack only when more than 4 errors are being located.
#[inline(never)]
fn bta<const F: usize>(gf: &Gf<F>, f: &[u16], roots: &mut [u16; MAX_T]) -> Option<usize> {
    let d = f.len() - 1;
    let m = gf.m() as usize;
    // Logs of f's low coefficients (Z16 for zero ones).
    let mut flog = [Z16; MAX_T];
    for (l, &c) in flog.iter_mut().zip(&f[..d]) {
        if c != 0 {
            *l = gf.log(c) as u16;
        }
    }
    // Squaring mod f is semilinear: z^2 mod f = sum_j z_j^2 (x^(2j) mod f). For 2j < d that is
    // x^(2j) itself; the rows q[j - h] = x^(2j) mod f, j = h..d-1, are precomputed (log form,
    // stride d). This needs (d-2) d multiplications once and (d/2) d per squaring, and unlike a
    // long division the products are independent of each other.
    let h = d.div_ceil(2);
    let mut qlog = [Z16; (MAX_T / 2) * MAX_T];
    let mut r = [0u16; MAX_T];
    r[..d].copy_from_slice(&f[..d]);
    for e in d..=2 * d - 2 {
        if e % 2 == 0 {
            let row = (e / 2 - h) * d;
            for (q, &c) in qlog[row..row + d].iter_mut().zip(&r[..d]) {
                *q = if c == 0 { Z16 } else { gf.log(c) as u16 };
            }
        }
        // r <- x r mod f.
        let c = r[d - 1];
        r.copy_within(0..d - 1, 1);
        r[0] = 0;
        if c != 0 {
            let lc = gf.log(c);
            for (rc, &l) in r[..d].iter_mut().zip(&flog[..d]) {
                if l != Z16 {
                    *rc ^= gf.pow_sum(lc, l as u32);
                }
            }
        }
    }

    // plog[i*d..][..d] = x^(2^i) mod f, in log form.
    let mut plog = [Z16; 15 * MAX_T];
    let mut z = [0u16; MAX_T];
    z[1] = 1;
    for i in 0..m {
        for (l, &c) in plog[i * d..(i + 1) * d].iter_mut().zip(&z[..d]) {
            *l = if c == 0 { Z16 } else { gf.log(c) as u16 };
        }
        // z <- z^2 mod f.
        let mut out = [0u16; MAX_T];
        for j in 0..h {
            out[2 * j] = gf.sqr(z[j]);
        }
        for (j, &c) in z.iter().enumerate().take(d).skip(h) {
            if c == 0 {
                continue;
            }
            let lz = gf.add_mod(gf.log(c), gf.log(c));
            let row = (j - h) * d;
            for (o, &l) in out[..d].iter_mut().zip(&qlog[row..row + d]) {
                if l != Z16 {
                    *o ^= gf.pow_sum(lz, l as u32);
                }
            }
        }
        z = out;
    }
    // Now z = x^(2^m) mod f, which equals x iff f splits into distinct linear factors.
    if z[1] != 1 || z[0] != 0 || z[2..d].iter().any(|&c| c != 0) {
        return None;
    }

    // Pending factors: coefficients in `pool` (stack discipline), (start, degree, next k).
    let mut pool = [0u16; 2 * MAX_T + 2];
    let mut stack = [(0u16, 0u8, 0u8); MAX_T];
    let mut sp = 0;
    pool[..=d].copy_from_slice(f);
    stack[0] = (0, d as u8, 0);
    sp += 1;
    let mut cnt = 0usize;

    while sp > 0 {
        sp -= 1;
        let (start, dg, k0) = stack[sp];
        let (start, dg, k0) = (start as usize, dg as usize, k0 as u32);
        if dg <= 4 {
            small_roots(gf, &pool[start..=start + dg], roots, &mut cnt)?;
            continue;
        }
        let mut g = [0u16; PC];
        g[..=dg].copy_from_slice(&pool[start..=start + dg]);
        let mut split = None;
        for k in k0..gf.m() {
            // t = Tr(alpha^k x) mod f = sum_i alpha^(k 2^i) p_i, then reduced mod g.
            let mut t = [0u16; PC];
            let mut e = gf.modn(k);
            for row in plog[..m * d].chunks_exact(d) {
                for (tc, &l) in t[..d].iter_mut().zip(row) {
                    if l != Z16 {
                        *tc ^= gf.pow_sum(e, l as u32);
                    }
                }
                e = gf.add_mod(e, e);
            }
            if dg < d {
                if let Some(dt) = degree(&t[..d]) {
                    rem_in_place(gf, &mut t, dt, &g, dg);
                }
            }
            let dt = match degree(&t[..dg]) {
                Some(dt) if dt > 0 => dt,
                _ => continue, // trace constant on all roots of g: no split with this k
            };
            let mut a = g;
            let mut h = [0u16; PC];
            let dh = gcd_monic(gf, &mut a, dg, &mut t, dt, &mut h);
            if dh == 0 || dh >= dg {
                continue;
            }
            let mut q = [0u16; PC];
            let dq = div_exact(gf, &g, dg, &h, dh, &mut q);
            split = Some((h, dh, q, dq, k + 1));
            break;
        }
        let (h, dh, q, dq, k1) = split?;
        if sp + 2 > MAX_T || start + dh + dq + 2 > pool.len() {
            return None;
        }
        pool[start..=start + dh].copy_from_slice(&h[..=dh]);
        let s2 = start + dh + 1;
        pool[s2..=s2 + dq].copy_from_slice(&q[..=dq]);
        stack[sp] = (start as u16, dh as u8, k1 as u8);
        stack[sp + 1] = (s2 as u16, dq as u8, k1 as u8);
        sp += 2;
    }
    (cnt == d).then_some(d)
}

#[cfg(test)]
mod tests {
    use super::*;
    extern crate std;
    use std::boxed::Box;
    use std::vec::Vec;

    fn poly_from_roots<const F: usize>(gf: &Gf<F>, rs: &[u16]) -> Vec<u16> {
        let mut p = std::vec![1u16];
        for &r in rs {
            let mut q = std::vec![0u16; p.len() + 1];
            for (i, &c) in p.iter().enumerate() {
                q[i + 1] ^= c;
                q[i] ^= gf.mul(c, r);
            }
            p = q;
        }
        p
    }

    #[test]
    fn finds_all_roots_of_split_polynomials() {
        for m in [5u32, 8, 13, 14, 15] {
            let mut gf: Box<Gf<32768>> = Box::new(Gf::zeroed());
            gf.init(m, None).unwrap();
            let n = gf.n();
            let mut rng = 0x9e37_79b9_7f4a_7c15u64 ^ m as u64;
            for d in 1..=(MAX_T.min(n as usize / 2)) {
                for _ in 0..3 {
                    let mut rs = Vec::new();
                    while rs.len() < d {
                        rng = rng.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                        let r = (1 + (rng >> 33) % n as u64) as u16;
                        if !rs.contains(&r) {
                            rs.push(r);
                        }
                    }
                    let f = poly_from_roots(&gf, &rs);
                    let mut out = [0u16; MAX_T];
                    let got = find_roots(&gf, &f, &mut out);
                    assert_eq!(got, Some(d), "m={m} d={d}");
                    let mut a = out[..d].to_vec();
                    a.sort();
                    rs.sort();
                    assert_eq!(a, rs, "m={m} d={d}");
                }
            }
        }
    }

    #[test]
    fn refuses_repeated_roots_and_irreducible_factors() {
        let mut gf: Box<Gf<8192>> = Box::new(Gf::zeroed());
        gf.init(13, None).unwrap();
        let mut out = [0u16; MAX_T];
        for d in 2..=12usize {
            // Repeated root.
            let mut rs: Vec<u16> = (1..=d as u16).map(|i| gf.pow(i as u32 * 37)).collect();
            rs[d - 1] = rs[0];
            let f = poly_from_roots(&gf, &rs);
            assert_eq!(find_roots(&gf, &f, &mut out), None, "d={d}");
            // An irreducible quadratic factor: x^2 + x + c with Tr(c) = 1.
            let c = (1..=gf.n()).map(|e| gf.pow(e)).find(|&c| gf.trace(c) == 1).unwrap();
            let mut g = poly_from_roots(&gf, &rs[1..d - 1]);
            let mut q = std::vec![0u16; g.len() + 2];
            for (i, &a) in g.iter().enumerate() {
                q[i] ^= gf.mul(a, c);
                q[i + 1] ^= a;
                q[i + 2] ^= a;
            }
            g = q;
            assert_eq!(find_roots(&gf, &g, &mut out), None, "d={d}");
        }
    }
}
