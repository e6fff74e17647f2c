//! The message ("frozen", in Burshtein's terms) set of the polar WOM code: which `K` of the `N`
//! synthetic channels carry the message.
//!
//! For the last write the test channel is exactly a BEC with erasure probability
//! `e = 1 - beta`, designed at `beta = 0.5` (`coding-notes.md` 1.3). The Bhattacharyya
//! parameters follow the exact recursion `Z- = 2Z - Z^2`, `Z+ = Z^2` from `Z = e`, the newest
//! operation being the index's least significant bit (`z'[2i] = 2z[i] - z[i]^2`,
//! `z'[2i+1] = z[i]^2`), and the message set is the `K` indices with the *largest* Z, ties to
//! the lower index, computed in `f64` with exactly these expressions.
//!
//! No floating point runs on the target: the orderings are shipped. For every supported
//! `N = 2^10 .. 2^16`, `tables/rank_n{N}.bin` holds
//!
//! ```text
//! [ bitmap of the N/4 indices with the largest Z : N/8 bytes, bit i in byte i/8, LSB first ]
//! [ the indices of ranks N/4 .. N/2, in decreasing-Z order : N/4 x u16 little-endian ]
//! ```
//!
//! so any `K` in `N/4 ..= N/2` (rates 0.25 to 0.5, the whole useful range of a last write at
//! density 1/2) is the bitmap plus the first `K - N/4` listed indices. The sets are nested.
//! Each table is its own `static` ([`RANK_TABLES`] references all of them, 81 KiB; a firmware
//! that names one table links only that one). The tests regenerate every table from the `f64`
//! recursion and check the six shared bitmaps (`testdata/vectors/messageset_N*_K*.hex`, which
//! equal these for their K) and the N = 16 vector.

use super::WomError;

/// One shipped ordering: the top-`N/4` bitmap and the ranks `N/4 .. N/2`.
#[derive(Copy, Clone, Debug)]
pub struct RankTable {
    /// log2 N.
    pub n_log2: u32,
    /// The raw table (layout in the module docs).
    pub bytes: &'static [u8],
}

impl RankTable {
    /// Block length N.
    pub const fn n(&self) -> usize {
        1 << self.n_log2
    }

    /// Smallest message size the table supports (N/4).
    pub const fn k_min(&self) -> usize {
        self.n() / 4
    }

    /// Largest message size the table supports (N/2).
    pub const fn k_max(&self) -> usize {
        self.n() / 2
    }

    /// Writes the message set of size `k` as a bitmap into `out` (`N/64` words, bit `i` of word
    /// `i/64`). Errors if `k` is outside `k_min() ..= k_max()`, `out` is too short or the table
    /// is malformed.
    pub fn message_set(&self, k: usize, out: &mut [u64]) -> Result<(), WomError> {
        let n = self.n();
        if k < self.k_min() || k > self.k_max() {
            return Err(WomError::BadConfig);
        }
        let words = n / 64;
        if out.len() < words || self.bytes.len() != n / 8 + 2 * (n / 2 - n / 4) {
            return Err(WomError::BadConfig);
        }
        let (bitmap, order) = self.bytes.split_at(n / 8);
        for (w, chunk) in out.iter_mut().zip(bitmap.chunks_exact(8)) {
            let mut b = [0u8; 8];
            b.copy_from_slice(chunk);
            *w = u64::from_le_bytes(b);
        }
        for pair in order.chunks_exact(2).take(k - self.k_min()) {
            let i = u16::from_le_bytes([pair[0], pair[1]]) as usize;
            if let Some(w) = out.get_mut(i / 64) {
                *w |= 1 << (i % 64);
            }
        }
        for w in out[words..].iter_mut() {
            *w = 0;
        }
        Ok(())
    }
}

/// N = 1024.
pub static RANK_N1024: RankTable = RankTable { n_log2: 10, bytes: include_bytes!("tables/rank_n1024.bin") };
/// N = 2048.
pub static RANK_N2048: RankTable = RankTable { n_log2: 11, bytes: include_bytes!("tables/rank_n2048.bin") };
/// N = 4096.
pub static RANK_N4096: RankTable = RankTable { n_log2: 12, bytes: include_bytes!("tables/rank_n4096.bin") };
/// N = 8192.
pub static RANK_N8192: RankTable = RankTable { n_log2: 13, bytes: include_bytes!("tables/rank_n8192.bin") };
/// N = 16384.
pub static RANK_N16384: RankTable = RankTable { n_log2: 14, bytes: include_bytes!("tables/rank_n16384.bin") };
/// N = 32768.
pub static RANK_N32768: RankTable = RankTable { n_log2: 15, bytes: include_bytes!("tables/rank_n32768.bin") };
/// N = 65536.
pub static RANK_N65536: RankTable = RankTable { n_log2: 16, bytes: include_bytes!("tables/rank_n65536.bin") };

/// Every shipped table, by `n_log2 - 10`.
pub static RANK_TABLES: [&RankTable; 7] =
    [&RANK_N1024, &RANK_N2048, &RANK_N4096, &RANK_N8192, &RANK_N16384, &RANK_N32768, &RANK_N65536];

/// The shipped table for `N = 2^n_log2`, if any (n_log2 in 10..=16).
pub fn rank_table(n_log2: u32) -> Option<&'static RankTable> {
    n_log2.checked_sub(10).and_then(|i| RANK_TABLES.get(i as usize)).copied()
}

/// Writes the message set of `(N = 2^n_log2, k)` from the shipped tables into `out`.
pub fn message_set(n_log2: u32, k: usize, out: &mut [u64]) -> Result<(), WomError> {
    rank_table(n_log2).ok_or(WomError::BadConfig)?.message_set(k, out)
}

#[cfg(test)]
pub(crate) mod reference {
    //! The `f64` construction the tables were generated from (tests only).
    extern crate std;
    use std::vec::Vec;

    /// Bhattacharyya parameters of the `2^n_log2` synthetic channels of BEC(`e`).
    pub fn bhattacharyya(n_log2: u32, e: f64) -> Vec<f64> {
        let mut z = std::vec![e];
        for _ in 0..n_log2 {
            let mut nz = std::vec![0.0; 2 * z.len()];
            for (i, &v) in z.iter().enumerate() {
                nz[2 * i] = 2.0 * v - v * v;
                nz[2 * i + 1] = v * v;
            }
            z = nz;
        }
        z
    }

    /// Indices in decreasing Z, ties to the lower index.
    pub fn order(n_log2: u32) -> Vec<u32> {
        let z = bhattacharyya(n_log2, 0.5);
        let mut idx: Vec<u32> = (0..z.len() as u32).collect();
        idx.sort_by(|&a, &b| z[b as usize].total_cmp(&z[a as usize]).then(a.cmp(&b)));
        idx
    }

    /// The table bytes for `n_log2` (module-docs layout).
    pub fn table_bytes(n_log2: u32) -> Vec<u8> {
        let n = 1usize << n_log2;
        let ord = order(n_log2);
        let mut out = std::vec![0u8; n / 8];
        for &i in &ord[..n / 4] {
            out[i as usize / 8] |= 1 << (i % 8);
        }
        for &i in &ord[n / 4..n / 2] {
            out.extend_from_slice(&(i as u16).to_le_bytes());
        }
        out
    }
}
