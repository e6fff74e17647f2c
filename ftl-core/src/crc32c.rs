//! CRC-32C (Castagnoli), the FTL's error-detection code: page metadata, the baseline page codec
//! and checkpoints use it.
//!
//! Written here rather than taken whole from a crate: the `crc` crate (used for the portable
//! slice-by-16 path) has no hardware path, and the `crc32c` crate, which has one, needs `std` for
//! CPU feature detection. On x86-64 this module detects SSE4.2 with `cpuid` (available in `core`)
//! once and then uses the `crc32` instruction; everywhere else (the Cortex-M7 included) it uses
//! the `crc` crate's table. Both paths give the same values (tested against the check values of
//! the CRC catalogue).

const TABLE: crc::Crc<u32, crc::Table<16>> = crc::Crc::<u32, crc::Table<16>>::new(&crc::CRC_32_ISCSI);

/// The CRC-32C of `data`.
#[inline]
pub fn crc32c(data: &[u8]) -> u32 {
    crc32c_append(0, data)
}

/// Extends `crc`, the CRC-32C of some bytes, with `data`: the CRC-32C of their concatenation.
#[inline]
pub fn crc32c_append(crc: u32, data: &[u8]) -> u32 {
    #[cfg(target_arch = "x86_64")]
    if x86::available() {
        // SAFETY: `available` checked that the CPU has SSE4.2.
        return !unsafe { x86::update(!crc, data) };
    }
    table_append(crc, data)
}

/// The portable path (exposed for tests that compare the two).
pub fn table_append(crc: u32, data: &[u8]) -> u32 {
    // The crc crate's digest starts from its init value; seed it with the previous CRC instead.
    let mut d = TABLE.digest_with_initial((crc ^ 0xFFFF_FFFF).reverse_bits());
    d.update(data);
    d.finalize()
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use core::arch::x86_64::{__cpuid, _mm_crc32_u64, _mm_crc32_u8};
    use core::sync::atomic::{AtomicU8, Ordering};

    /// 0: not yet known, 1: no SSE4.2, 2: SSE4.2.
    static STATE: AtomicU8 = AtomicU8::new(0);

    pub(super) fn available() -> bool {
        match STATE.load(Ordering::Relaxed) {
            2 => true,
            1 => false,
            _ => {
                #[allow(unused_unsafe)]
                // SAFETY: cpuid leaf 1 exists on every x86-64 CPU.
                let ecx = unsafe { __cpuid(1) }.ecx;
                let ok = ecx & (1 << 20) != 0;
                STATE.store(if ok { 2 } else { 1 }, Ordering::Relaxed);
                ok
            }
        }
    }

    /// Raw (non-inverted) CRC-32C update.
    #[target_feature(enable = "sse4.2")]
    pub(super) unsafe fn update(crc: u32, data: &[u8]) -> u32 {
        let mut c = crc as u64;
        let mut chunks = data.chunks_exact(8);
        for ch in &mut chunks {
            let w = u64::from_le_bytes([ch[0], ch[1], ch[2], ch[3], ch[4], ch[5], ch[6], ch[7]]);
            c = _mm_crc32_u64(c, w);
        }
        let mut c = c as u32;
        for &b in chunks.remainder() {
            c = _mm_crc32_u8(c, b);
        }
        c
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn check_values_from_the_catalogue() {
        // shared/vectors/crc_vectors.json (CRC-32C).
        assert_eq!(crc32c(b"123456789"), 0xE306_9283);
        assert_eq!(crc32c(&[0xFF; 4096]), 0x25C1_FE13);
        assert_eq!(crc32c(&[0x00; 4096]), 0x98F9_4189);
        assert_eq!(table_append(0, b"123456789"), 0xE306_9283);
    }

    #[test]
    fn append_equals_whole_on_both_paths() {
        let data: [u8; 100] = core::array::from_fn(|i| (i * 37 + 11) as u8);
        for cut in [0, 1, 7, 8, 9, 50, 99, 100] {
            let (a, b) = data.split_at(cut);
            assert_eq!(crc32c_append(crc32c(a), b), crc32c(&data));
            assert_eq!(table_append(table_append(0, a), b), table_append(0, &data));
            assert_eq!(crc32c(&data), table_append(0, &data));
        }
    }
}
