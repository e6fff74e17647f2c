//! [`FlexCodec`]: FlexECC's two-format page codec. A page is stored either **correcting**
//! ([`BchCodec`]: BCH per codeword plus a CRC-32C, for dirty data that has no other copy) or
//! **detecting** (a CRC-32C only, for clean data that has a copy in the next tier).
//!
//! Layout of the codec's spare bytes (`spare_len() = 1 + BchCodec::spare_len()`):
//!
//! ```text
//! correcting: [ 0xC3 | BchCodec bytes (ecc per codeword, crc)          ]
//! detecting:  [ 0x3C | crc32c(data), little-endian | 0xFF ...          ]
//! ```
//!
//! The first byte is the format tag. The two tags differ in all 8 bits, so the format is read
//! right with up to 3 flipped tag bits (nearest tag); a tag at distance 4 from both (an erased
//! spare, or 4 flips) is ambiguous and `decode` tries the correcting format, then the detecting
//! one. Both formats end with a CRC-32C over the data, so neither a misread tag nor a BCH
//! miscorrection returns wrong data except with the CRC's 2^-32 chance.
//!
//! `decode` returns the bits corrected (always 0 for a detecting page); a detecting page with any
//! bit error in its data or CRC is `Uncorrectable` (the FTL then serves it from the backing
//! store). `encode` (without a format) writes the correcting format, so journal and checkpoint
//! pages, and every page of an FTL that never asks for another format, are BCH-protected.
//! Memory: the [`BchCodec`] inside (see its tables); no other state.

use ftl_core::crc32c::crc32c;
use ftl_core::policy::{CodecError, PageCodec, PageFormat};

use core::borrow::Borrow;

use super::bch::Bch;
use super::codec::BchCodec;

/// Format tag of a correcting (BCH) page.
pub const TAG_CORRECTING: u8 = 0xC3;
/// Format tag of a detecting (CRC-only) page.
pub const TAG_DETECTING: u8 = 0x3C;

/// The format a tag byte names: the nearer tag, `None` at equal distance.
pub fn tag_format(tag: u8) -> Option<PageFormat> {
    let dc = (tag ^ TAG_CORRECTING).count_ones();
    let dd = (tag ^ TAG_DETECTING).count_ones();
    match dc.cmp(&dd) {
        core::cmp::Ordering::Less => Some(PageFormat::Correcting),
        core::cmp::Ordering::Greater => Some(PageFormat::Detecting),
        core::cmp::Ordering::Equal => None,
    }
}

/// BCH or CRC per page, as the write asks (see the module documentation). `S` is where the BCH
/// tables are, as for [`BchCodec`] (owned, or borrowed from a `static` in flash).
#[derive(Clone)]
pub struct FlexCodec<const FIELD: usize, const WORDS: usize, S = Bch<FIELD, WORDS>> {
    bch: BchCodec<FIELD, WORDS, S>,
}

impl<const FIELD: usize, const WORDS: usize, S: Borrow<Bch<FIELD, WORDS>>> FlexCodec<FIELD, WORDS, S> {
    /// Wraps a BCH codec (which fixes the page size and the correcting strength).
    pub fn new(bch: BchCodec<FIELD, WORDS, S>) -> Self {
        FlexCodec { bch }
    }

    /// The BCH codec of the correcting format.
    pub fn bch(&self) -> &BchCodec<FIELD, WORDS, S> {
        &self.bch
    }

    fn decode_detecting(&self, data: &[u8], stored: &[u8]) -> Result<u32, CodecError> {
        if data.len() != self.bch.page_bytes() || stored.len() < 5 {
            return Err(CodecError::Uncorrectable);
        }
        let want = u32::from_le_bytes([stored[1], stored[2], stored[3], stored[4]]);
        if crc32c(data) == want {
            Ok(0)
        } else {
            Err(CodecError::Uncorrectable)
        }
    }
}

impl<const FIELD: usize, const WORDS: usize, S: Borrow<Bch<FIELD, WORDS>>> PageCodec
    for FlexCodec<FIELD, WORDS, S>
{
    fn spare_len(&self) -> usize {
        1 + self.bch.spare_len()
    }

    fn encode(&mut self, data: &[u8], out: &mut [u8]) {
        self.encode_as(data, out, PageFormat::Correcting);
    }

    fn encode_as(&mut self, data: &[u8], out: &mut [u8], format: PageFormat) {
        let sl = self.spare_len();
        if out.len() < sl {
            out.fill(0);
            return;
        }
        match format {
            PageFormat::Correcting => {
                out[0] = TAG_CORRECTING;
                self.bch.encode(data, &mut out[1..sl]);
            }
            PageFormat::Detecting => {
                out[..sl].fill(0xFF);
                out[0] = TAG_DETECTING;
                if data.len() == self.bch.page_bytes() {
                    out[1..5].copy_from_slice(&crc32c(data).to_le_bytes());
                } else {
                    out[1..5].fill(0);
                }
            }
        }
    }

    fn decode(&mut self, data: &mut [u8], stored: &[u8]) -> Result<u32, CodecError> {
        let sl = self.spare_len();
        if stored.len() < sl {
            return Err(CodecError::Uncorrectable);
        }
        match tag_format(stored[0]) {
            Some(PageFormat::Correcting) => self.bch.decode(data, &stored[1..sl]),
            Some(PageFormat::Detecting) => self.decode_detecting(data, stored),
            None => {
                // Ambiguous tag: the detecting check first (it does not touch the data), then BCH
                // (which may leave the data partly corrected when it fails).
                let mut copy_ok = self.decode_detecting(data, stored);
                if copy_ok.is_err() {
                    copy_ok = self.bch.decode(data, &stored[1..sl]);
                }
                copy_ok
            }
        }
    }

    fn format_of(&self, stored: &[u8]) -> Option<PageFormat> {
        stored.first().and_then(|&t| tag_format(t))
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use proptest::prelude::*;
    use std::vec;
    use std::vec::Vec;

    const PAGE: usize = 2048;
    const T: u32 = 8;

    /// BCH(13, 8) over 512-byte codewords of a 2 KiB page, as the MT29F4G08 presets use.
    fn codec() -> FlexCodec<8192, 2> {
        FlexCodec::new(BchCodec::new(13, T, 512, PAGE).unwrap())
    }

    fn data(seed: u64) -> Vec<u8> {
        let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        (0..PAGE)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect()
    }

    fn flip(buf: &mut [u8], bit: usize) {
        buf[bit / 8] ^= 1 << (bit % 8);
    }

    #[test]
    fn both_formats_round_trip_and_report_their_format() {
        let mut c = codec();
        let d = data(1);
        let mut spare = vec![0u8; c.spare_len()];
        for f in [PageFormat::Correcting, PageFormat::Detecting] {
            c.encode_as(&d, &mut spare, f);
            assert_eq!(c.format_of(&spare), Some(f));
            let mut got = d.clone();
            assert_eq!(c.decode(&mut got, &spare), Ok(0));
            assert_eq!(got, d);
        }
        // Plain encode is the correcting format (journal, checkpoint, all-BCH devices).
        c.encode(&d, &mut spare);
        assert_eq!(spare[0], TAG_CORRECTING);
        assert_eq!(c.spare_len(), 1 + 4 * 13 + 4);
    }

    #[test]
    fn erased_page_decodes_clean() {
        let mut c = codec();
        let mut d = vec![0xFFu8; PAGE];
        let spare = vec![0xFFu8; c.spare_len()];
        assert_eq!(c.format_of(&spare), None);
        assert_eq!(c.decode(&mut d, &spare), Ok(0));
    }

    #[test]
    fn tag_survives_three_flips_and_ambiguous_tags_still_decode() {
        let mut c = codec();
        let d = data(2);
        let mut spare = vec![0u8; c.spare_len()];
        for f in [PageFormat::Correcting, PageFormat::Detecting] {
            c.encode_as(&d, &mut spare, f);
            for mask in 0u16..256 {
                let mask = mask as u8;
                let mut s = spare.clone();
                s[0] ^= mask;
                let mut got = d.clone();
                match mask.count_ones() {
                    0..=3 => assert_eq!(c.format_of(&s), Some(f)),
                    4 => assert_eq!(c.format_of(&s), None),
                    _ => continue,
                }
                assert_eq!(c.decode(&mut got, &s), Ok(0), "{f:?} mask {mask:#x}");
                assert_eq!(got, d);
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]

        /// A detecting page with 1..=2t bit errors (data or CRC) is never accepted.
        #[test]
        fn detecting_page_with_errors_is_rejected(seed in any::<u64>(), bits in proptest::collection::btree_set(0usize..(PAGE + 4) * 8, 1..=2 * T as usize)) {
            let mut c = codec();
            let d = data(seed);
            let mut spare = vec![0u8; c.spare_len()];
            c.encode_as(&d, &mut spare, PageFormat::Detecting);
            let mut got = d.clone();
            for &b in &bits {
                if b < PAGE * 8 { flip(&mut got, b) } else { flip(&mut spare[1..5], b - PAGE * 8) }
            }
            prop_assert_eq!(c.decode(&mut got, &spare), Err(CodecError::Uncorrectable));
        }

        /// A correcting page with up to t errors per codeword is corrected and the count reported.
        #[test]
        fn correcting_page_with_up_to_t_errors_per_codeword_is_corrected(seed in any::<u64>(), per_cw in proptest::collection::vec(proptest::collection::btree_set(0usize..512 * 8, 0..=T as usize), 4)) {
            let mut c = codec();
            let d = data(seed);
            let mut spare = vec![0u8; c.spare_len()];
            c.encode_as(&d, &mut spare, PageFormat::Correcting);
            let mut got = d.clone();
            let mut n = 0;
            for (i, bits) in per_cw.iter().enumerate() {
                for &b in bits {
                    flip(&mut got, i * 512 * 8 + b);
                    n += 1;
                }
            }
            prop_assert_eq!(c.decode(&mut got, &spare), Ok(n));
            prop_assert_eq!(got, d);
        }
    }
}
