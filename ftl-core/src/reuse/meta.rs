//! The metadata of a second write: [`SW_META_LEN`] bytes at the very end of each of the two
//! pages' spare areas, cells the first write left erased.
//!
//! | bytes | field |
//! |---|---|
//! | 0 | magic `0x57` |
//! | 1 | half: 0 = plane-0 page (the one the map points at), 1 = plane-1 page, 2 = activation marker (page 0 of a pair's plane-0 block) |
//! | 2 | void flag: 0xFF normally, 0x00 once mount rolled the second write back (not in the CRC) |
//! | 3 | 0xFF |
//! | 4..8 | logical page |
//! | 8..16 | global sequence number (the same in both halves) |
//! | 16..20 | the other half's block |
//! | 20..24 | CRC-32C over bytes 0..2 and 4..20 |
//!
//! Guarantee: [`SwMeta::decode`] accepts only metadata written whole and not voided; all-0xFF
//! (no second write) is told apart from anything else.

/// Bytes of second-write metadata at the end of the spare.
pub const SW_META_LEN: usize = 24;
const MAGIC: u8 = 0x57;
/// `half` of a pair's activation marker.
pub const HALF_MARKER: u8 = 2;
/// Offset of the void flag within the metadata.
pub const SW_VOID_OFFSET: usize = 2;

/// Decoded second-write metadata.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct SwMeta {
    /// 0: plane-0 half; 1: plane-1 half; [`HALF_MARKER`]: activation marker.
    pub half: u8,
    /// Logical page.
    pub lpn: u32,
    /// Sequence number.
    pub seq: u64,
    /// The other half's block.
    pub partner: u32,
}

/// What the second-write metadata cells of a page say.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum SwState {
    /// All 0xFF: no second write was ever started on the page.
    Erased,
    /// A whole second write's metadata.
    Valid(SwMeta),
    /// Torn, voided or garbage.
    Invalid,
}

impl SwMeta {
    /// Writes the metadata into `s[..SW_META_LEN]`.
    pub fn encode(&self, s: &mut [u8]) {
        let s = &mut s[..SW_META_LEN];
        s[0] = MAGIC;
        s[1] = self.half;
        s[2] = 0xFF;
        s[3] = 0xFF;
        s[4..8].copy_from_slice(&self.lpn.to_le_bytes());
        s[8..16].copy_from_slice(&self.seq.to_le_bytes());
        s[16..20].copy_from_slice(&self.partner.to_le_bytes());
        let crc = crc(s);
        s[20..24].copy_from_slice(&crc.to_le_bytes());
    }

    /// Reads the metadata cells `s[..SW_META_LEN]`.
    pub fn decode(s: &[u8]) -> SwState {
        let Some(s) = s.get(..SW_META_LEN) else { return SwState::Invalid };
        if s.iter().all(|&b| b == 0xFF) {
            return SwState::Erased;
        }
        let w = |i: usize| u32::from_le_bytes([s[i], s[i + 1], s[i + 2], s[i + 3]]);
        if s[0] != MAGIC || s[1] > HALF_MARKER || s[SW_VOID_OFFSET] != 0xFF || w(20) != crc(s) {
            return SwState::Invalid;
        }
        SwState::Valid(SwMeta {
            half: s[1],
            lpn: w(4),
            seq: w(8) as u64 | (w(12) as u64) << 32,
            partner: w(16),
        })
    }
}

fn crc(s: &[u8]) -> u32 {
    crate::crc32c::crc32c_append(crate::crc32c::crc32c(&s[0..2]), &s[4..20])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_erased_and_corrupt() {
        let m = SwMeta { half: HALF_MARKER, lpn: 7, seq: 0x1_0000_0003, partner: 42 };
        let mut s = [0xFFu8; SW_META_LEN];
        assert_eq!(SwMeta::decode(&s), SwState::Erased);
        m.encode(&mut s);
        assert_eq!(SwMeta::decode(&s), SwState::Valid(m));
        for bit in 0..SW_META_LEN * 8 {
            if bit / 8 == 3 {
                continue;
            }
            let mut t = s;
            t[bit / 8] ^= 1 << (bit % 8);
            assert_eq!(SwMeta::decode(&t), SwState::Invalid, "bit {bit}");
        }
    }
}
