//! The page codec seam: the bytes that protect a page's data, stored in the spare area after
//! the metadata. The baseline detects corruption with CRC-32C; the `flex-ecc` feature adds BCH.

use crate::crc32c::crc32c;

/// A decode that could not return correct data.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum CodecError {
    /// The data is corrupt beyond what the codec corrects.
    Uncorrectable,
}

/// The protection a page is written with, for codecs that have more than one (FlexECC: BCH for
/// dirty data that has no other copy, a CRC for clean data that has a copy in the next tier).
/// Codecs with a single format ignore it.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum PageFormat {
    /// Error correction (BCH): the page may be the only copy of its data.
    Correcting,
    /// Error detection only (CRC): the data has a copy elsewhere.
    Detecting,
}

/// Protects a page's data.
pub trait PageCodec {
    /// Spare bytes the codec stores per page (after the FTL's metadata).
    fn spare_len(&self) -> usize;
    /// Computes the protection bytes of `data` into `out` (`spare_len()` bytes).
    fn encode(&mut self, data: &[u8], out: &mut [u8]);
    /// Checks (and where it can, corrects) `data` against `stored`; returns the number of bits
    /// corrected.
    fn decode(&mut self, data: &mut [u8], stored: &[u8]) -> Result<u32, CodecError>;
    /// [`PageCodec::encode`] in the given format; codecs with one format ignore `format`. (A
    /// codec that wraps another must forward this and [`PageCodec::format_of`].)
    fn encode_as(&mut self, data: &[u8], out: &mut [u8], format: PageFormat) {
        let _ = format;
        self.encode(data, out);
    }
    /// The format the stored codec bytes say the page was written in; `None` for codecs with
    /// one format.
    fn format_of(&self, stored: &[u8]) -> Option<PageFormat> {
        let _ = stored;
        None
    }
}

/// CRC-32C over the data: detects corruption, corrects nothing. 4 spare bytes.
#[derive(Copy, Clone, Debug, Default)]
pub struct Crc32cCodec;

impl PageCodec for Crc32cCodec {
    fn spare_len(&self) -> usize {
        4
    }
    fn encode(&mut self, data: &[u8], out: &mut [u8]) {
        out[..4].copy_from_slice(&crc32c(data).to_le_bytes());
    }
    fn decode(&mut self, data: &mut [u8], stored: &[u8]) -> Result<u32, CodecError> {
        let want = u32::from_le_bytes([stored[0], stored[1], stored[2], stored[3]]);
        if crc32c(data) == want {
            Ok(0)
        } else {
            Err(CodecError::Uncorrectable)
        }
    }
}

/// No protection at all. For benchmarks against a metadata-only emulator (which stores no data)
/// and for devices whose controller does ECC itself.
#[derive(Copy, Clone, Debug, Default)]
pub struct NullCodec;

impl PageCodec for NullCodec {
    fn spare_len(&self) -> usize {
        0
    }
    fn encode(&mut self, _data: &[u8], _out: &mut [u8]) {}
    fn decode(&mut self, _data: &mut [u8], _stored: &[u8]) -> Result<u32, CodecError> {
        Ok(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc_codec_detects_any_single_bit_flip() {
        let mut data = [0u8; 64];
        for (i, b) in data.iter_mut().enumerate() {
            *b = (i * 7) as u8;
        }
        let mut c = Crc32cCodec;
        let mut stored = [0u8; 4];
        c.encode(&data, &mut stored);
        assert_eq!(c.decode(&mut data.clone(), &stored), Ok(0));
        for bit in 0..data.len() * 8 {
            let mut d = data;
            d[bit / 8] ^= 1 << (bit % 8);
            assert_eq!(c.decode(&mut d, &stored), Err(CodecError::Uncorrectable));
        }
    }

    #[test]
    fn crc_of_4096_ff_matches_vector() {
        // shared/vectors/crc_vectors.json: CRC-32C of 4096 x 0xFF = 0x25C1FE13.
        let data = [0xFFu8; 4096];
        let mut out = [0u8; 4];
        Crc32cCodec.encode(&data, &mut out);
        assert_eq!(u32::from_le_bytes(out), 0x25C1_FE13);
    }
}
