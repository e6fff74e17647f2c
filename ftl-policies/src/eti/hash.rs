//! The CRC-based hash functions of MHF and MBF (the paper's Table 2: two hash functions of type
//! CRC).
//!
//! This module owns [`CrcPoly`], a choice among three 32-bit CRC polynomials, and [`CrcPoly::hash`],
//! the CRC of a logical page number's four little-endian bytes; a classifier reduces it modulo its
//! table size. Each polynomial is computed by a byte-wise table (256 `u32`, built at compile
//! time; 1 KiB of read-only data per polynomial), in the reflected form with initial value and
//! final XOR of all ones, so [`CrcPoly::Castagnoli`] is CRC-32C (equal to
//! `ftl_core::crc32c::crc32c`) and [`CrcPoly::Ieee`] is the CRC-32 of zlib and Ethernet; the
//! tests check both against their catalogue check values.
//!
//! Why different polynomials rather than one CRC with different seeds: a CRC is affine over
//! GF(2), so CRCs of the same polynomial with different seeds (initial values or prefixes) differ
//! by a constant XOR for inputs of one length. Such a second "hash function" collides exactly
//! where the first does and adds nothing. Different polynomials are different linear maps.
//!
//! Linearity has a second consequence, which is why the third polynomial is CD-ROM EDC's and not,
//! say, Koopman's: the bucket of a page is a linear function of its number, so 2^k aligned
//! consecutive pages fill 2^k buckets only if that function has full rank on them. For 2048
//! buckets, CRC-32C, CRC-32 and the CD-ROM polynomial do (each of 2048 aligned consecutive pages gets its
//! own bucket; the tests check it), while Koopman's 0x741B8CD7 sends them to 256 buckets, 8 each.
//! The paper notes MHF and MBF were sensitive to the hash functions and reports three variants;
//! [`CrcPoly`] offers three pairs.
//!
//! `ftl_core::crc32c` is not called here, although it computes the same CRC-32C: its hardware
//! path does a CPU-feature check per call and works on byte slices, and one table path for all
//! three polynomials keeps the hash cost the same whichever pair is configured.
//!
//! Guarantees: pure functions, no panics, no floating point, no allocation.

/// A 32-bit CRC polynomial (reflected, init and final XOR `0xFFFF_FFFF`).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum CrcPoly {
    /// CRC-32C (Castagnoli, 0x1EDC6F41).
    Castagnoli,
    /// CRC-32 (IEEE 802.3, 0x04C11DB7).
    Ieee,
    /// The polynomial of CRC-32/CD-ROM-EDC, 0x8001801B (here with the all-ones initial value and
    /// final XOR of the other two, unlike the catalogue's CD-ROM CRC, which uses zeros).
    CdRom,
}

const fn table(reflected_poly: u32) -> [u32; 256] {
    let mut t = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u32;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 != 0 { (c >> 1) ^ reflected_poly } else { c >> 1 };
            k += 1;
        }
        t[i] = c;
        i += 1;
    }
    t
}

static CASTAGNOLI: [u32; 256] = table(0x82F6_3B78);
static IEEE: [u32; 256] = table(0xEDB8_8320);
static CD_ROM: [u32; 256] = table(0xD801_8001);

impl CrcPoly {
    fn table(self) -> &'static [u32; 256] {
        match self {
            CrcPoly::Castagnoli => &CASTAGNOLI,
            CrcPoly::Ieee => &IEEE,
            CrcPoly::CdRom => &CD_ROM,
        }
    }

    /// The CRC of `data`.
    pub fn checksum(self, data: &[u8]) -> u32 {
        let t = self.table();
        let mut c = !0u32;
        for &b in data {
            c = (c >> 8) ^ t[((c ^ b as u32) & 0xFF) as usize];
        }
        !c
    }

    /// The CRC of `lpn`'s four little-endian bytes: the hash of a logical page.
    #[inline]
    pub fn hash(self, lpn: u32) -> u32 {
        let t = self.table();
        let mut c = !lpn;
        // Four byte steps; `c ^ byte` for byte i of `lpn` is folded into the initial XOR above.
        for _ in 0..4 {
            c = (c >> 8) ^ t[(c & 0xFF) as usize];
        }
        !c
    }
}

/// Two hash functions of an LPN reduced to `0..buckets` (`buckets` > 0).
#[inline]
pub(crate) fn bucket_pair(polys: [CrcPoly; 2], lpn: u32, buckets: usize) -> [usize; 2] {
    [polys[0].hash(lpn) as usize % buckets, polys[1].hash(lpn) as usize % buckets]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn check_values() {
        assert_eq!(CrcPoly::Castagnoli.checksum(b"123456789"), 0xE306_9283);
        assert_eq!(CrcPoly::Ieee.checksum(b"123456789"), 0xCBF4_3926);
    }

    #[test]
    fn hash_is_the_crc_of_the_le_bytes() {
        for lpn in [0u32, 1, 0x1234_5678, u32::MAX, 77_777] {
            for p in [CrcPoly::Castagnoli, CrcPoly::Ieee, CrcPoly::CdRom] {
                assert_eq!(p.hash(lpn), p.checksum(&lpn.to_le_bytes()));
            }
            assert_eq!(CrcPoly::Castagnoli.hash(lpn), ftl_core::crc32c::crc32c(&lpn.to_le_bytes()));
        }
    }

    #[test]
    fn polynomials_are_not_affinely_related() {
        // Same-polynomial CRCs with different seeds would differ by a constant; these must not.
        let d = |p: CrcPoly, q: CrcPoly, x: u32| p.hash(x) ^ q.hash(x);
        for (p, q) in [
            (CrcPoly::Castagnoli, CrcPoly::Ieee),
            (CrcPoly::Ieee, CrcPoly::CdRom),
            (CrcPoly::CdRom, CrcPoly::Castagnoli),
        ] {
            assert_ne!(d(p, q, 1), d(p, q, 2));
        }
    }

    #[test]
    fn buckets_spread_a_sequential_range() {
        // 2048 aligned consecutive LPNs over 2048 buckets: one each (see the module docs).
        for p in [CrcPoly::Castagnoli, CrcPoly::Ieee, CrcPoly::CdRom] {
            for base in [0u32, 4096, 1 << 20, 0xFFFF_F800] {
                let mut seen = [0u8; 2048];
                for lpn in base..=base + 2047 {
                    seen[p.hash(lpn) as usize % 2048] += 1;
                }
                assert!(seen.iter().all(|&s| s == 1), "{p:?} at {base}");
            }
        }
        // Koopman's polynomial would not: 256 buckets only.
        let koopman: [u32; 256] = table(0xEB31_D82E);
        let hash = |x: u32| {
            let mut c = !x;
            for _ in 0..4 {
                c = (c >> 8) ^ koopman[(c & 0xFF) as usize];
            }
            !c
        };
        let mut seen = [false; 2048];
        (4096u32..4096 + 2048).for_each(|l| seen[hash(l) as usize % 2048] = true);
        assert_eq!(seen.iter().filter(|&&s| s).count(), 256);
    }
}
