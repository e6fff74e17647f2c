//! Per-page metadata in the spare area, and the CRC that guards it.
//!
//! Layout of the first [`META_LEN`] spare bytes (little endian):
//!
//! | bytes | field |
//! |---|---|
//! | 0 | bad-block marker position: always left 0xFF by the FTL |
//! | 1 | format version ([`FORMAT_VERSION`]) |
//! | 2 | page kind ([`PageKind`]) |
//! | 3 | void flag: 0xFF normally; 0x00 after a failed program (not covered by the CRC) |
//! | 4..8 | logical page (data), entry count (journal) or page index (checkpoint) |
//! | 8..16 | global sequence number |
//! | 16..20 | erase count of the block when the page was written |
//! | 20..24 | auxiliary word (checkpoint: its total pages) |
//! | 24..28 | CRC-32C over bytes 1..3 and 4..24 |
//!
//! The page codec's bytes (ECC/EDC over the data) follow at `META_LEN`.
//! Guarantee: [`PageMeta::decode`] accepts only a page written whole by this FTL (correct CRC,
//! known version and kind, not voided); an erased spare is told apart from garbage.

/// Bytes of metadata at the start of the spare area.
pub const META_LEN: usize = 28;
/// On-flash format version.
pub const FORMAT_VERSION: u8 = 1;
/// Offset of the void flag.
pub const VOID_OFFSET: usize = 3;

/// What a page holds.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[repr(u8)]
pub enum PageKind {
    /// A logical page's data.
    Data = 1,
    /// A journal page (trims).
    Journal = 2,
    /// A page of a checkpoint.
    Checkpoint = 3,
}

/// Decoded page metadata.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct PageMeta {
    /// What the page holds.
    pub kind: PageKind,
    /// Logical page / entry count / checkpoint page index.
    pub tag: u32,
    /// Global sequence number.
    pub seq: u64,
    /// Erase count of the block at write time.
    pub erase_count: u32,
    /// Auxiliary word.
    pub aux: u32,
}

/// What the metadata area of a page says.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum SpareState {
    /// Every metadata byte is 0xFF: the page was never programmed (or fully erased).
    Erased,
    /// A valid page of this FTL.
    Valid(PageMeta),
    /// Anything else: torn, voided, half-erased, foreign.
    Invalid,
}

impl PageMeta {
    /// Writes the metadata into `spare[..META_LEN]`.
    pub fn encode(&self, spare: &mut [u8]) {
        let s = &mut spare[..META_LEN];
        s[0] = 0xFF;
        s[1] = FORMAT_VERSION;
        s[2] = self.kind as u8;
        s[3] = 0xFF;
        s[4..8].copy_from_slice(&self.tag.to_le_bytes());
        s[8..16].copy_from_slice(&self.seq.to_le_bytes());
        s[16..20].copy_from_slice(&self.erase_count.to_le_bytes());
        s[20..24].copy_from_slice(&self.aux.to_le_bytes());
        let crc = meta_crc(s);
        s[24..28].copy_from_slice(&crc.to_le_bytes());
    }

    /// Reads the metadata area of a spare.
    pub fn decode(spare: &[u8]) -> SpareState {
        if spare.len() < META_LEN {
            return SpareState::Invalid;
        }
        let s = &spare[..META_LEN];
        if s[1..].iter().all(|&b| b == 0xFF) {
            return SpareState::Erased;
        }
        let stored = u32::from_le_bytes([s[24], s[25], s[26], s[27]]);
        if stored != meta_crc(s) || s[1] != FORMAT_VERSION || s[VOID_OFFSET] != 0xFF {
            return SpareState::Invalid;
        }
        let kind = match s[2] {
            1 => PageKind::Data,
            2 => PageKind::Journal,
            3 => PageKind::Checkpoint,
            _ => return SpareState::Invalid,
        };
        let w = |i: usize| u32::from_le_bytes([s[i], s[i + 1], s[i + 2], s[i + 3]]);
        SpareState::Valid(PageMeta {
            kind,
            tag: w(4),
            seq: w(8) as u64 | (w(12) as u64) << 32,
            erase_count: w(16),
            aux: w(20),
        })
    }
}

fn meta_crc(s: &[u8]) -> u32 {
    crate::crc32c::crc32c_append(crate::crc32c::crc32c(&s[1..3]), &s[4..24])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> PageMeta {
        PageMeta { kind: PageKind::Data, tag: 77, seq: 0x1_0000_0005, erase_count: 9, aux: 3 }
    }

    #[test]
    fn round_trip() {
        let mut spare = [0xFFu8; 64];
        sample().encode(&mut spare);
        assert_eq!(spare[0], 0xFF);
        assert_eq!(PageMeta::decode(&spare), SpareState::Valid(sample()));
    }

    #[test]
    fn erased_and_corrupt_are_distinguished() {
        assert_eq!(PageMeta::decode(&[0xFF; 64]), SpareState::Erased);
        let mut spare = [0xFFu8; 64];
        sample().encode(&mut spare);
        for bit in 8..(META_LEN * 8) {
            if bit / 8 == VOID_OFFSET {
                continue;
            }
            let mut s = spare;
            s[bit / 8] ^= 1 << (bit % 8);
            assert_eq!(PageMeta::decode(&s), SpareState::Invalid, "bit {bit}");
        }
        let mut s = spare;
        s[VOID_OFFSET] = 0;
        assert_eq!(PageMeta::decode(&s), SpareState::Invalid);
    }
}
