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
//!
//! Raw bit errors: the metadata is not covered by the page codec, so the CRC also corrects.
//! When it mismatches, `decode` looks for the unique pattern of one or two flipped bits among the
//! 208 bits it covers (bytes 1..3 and 4..28) that explains the mismatch and repairs it (CRC-32C
//! has Hamming distance 8 at this length, so a pattern of at most two flips is unique and three
//! to five flips are never miscorrected). A metadata area with at most two 0 bits reads as
//! erased. The void flag counts as set when at least two of its
//! bits are 0 (a set flag is 0x00; one flipped bit of a clear flag is a read error). Without the
//! correction a single raw bit error in the metadata made a good page unreadable to host reads,
//! invisible to GC (which then dropped its data) and torn to mount.

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
        // Erased, up to two raw bit errors.
        if s[1..].iter().map(|b| b.count_zeros()).sum::<u32>() <= 2 {
            return SpareState::Erased;
        }
        let mut fixed = [0u8; META_LEN];
        fixed.copy_from_slice(s);
        let s = &mut fixed;
        let stored = u32::from_le_bytes([s[24], s[25], s[26], s[27]]);
        let syndrome = stored ^ meta_crc(s);
        if syndrome != 0 && !correct(s, syndrome) {
            return SpareState::Invalid;
        }
        if s[1] != FORMAT_VERSION || s[VOID_OFFSET].count_zeros() >= 2 {
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

/// Bits the metadata CRC covers: bytes 1..3 and 4..24 (data), 24..28 (the CRC itself).
const COVERED_BITS: usize = 8 * (META_LEN - 2);

/// Byte index of covered bit `k`.
fn covered_byte(k: usize) -> usize {
    if k < 16 {
        1 + k / 8
    } else {
        4 + (k - 16) / 8
    }
}

/// Repairs `s` (whose CRC check gave `syndrome` = stored XOR computed) if exactly one pattern
/// of one or two covered bit flips explains the syndrome. The CRC is affine: a flip of data bit
/// `k` changes the computed CRC by a constant, a flip of a stored CRC bit changes the stored CRC.
fn correct(s: &mut [u8; META_LEN], syndrome: u32) -> bool {
    let zeros = [0u8; META_LEN];
    let base = meta_crc(&zeros);
    let mut syn = [0u32; COVERED_BITS];
    for (k, v) in syn.iter_mut().enumerate() {
        let byte = covered_byte(k);
        if byte >= 24 {
            *v = 1 << (8 * (byte - 24) + k % 8);
        } else {
            let mut e = zeros;
            e[byte] = 1 << (k % 8);
            *v = meta_crc(&e) ^ base;
        }
    }
    let mut found = None;
    let mut count = 0;
    for i in 0..COVERED_BITS {
        if syn[i] == syndrome {
            found = Some((i, None));
            count += 1;
        }
        for j in i + 1..COVERED_BITS {
            if syn[i] ^ syn[j] == syndrome {
                found = Some((i, Some(j)));
                count += 1;
            }
        }
    }
    match found {
        Some((i, j)) if count == 1 => {
            for k in core::iter::once(i).chain(j) {
                s[covered_byte(k)] ^= 1 << (k % 8);
            }
            true
        }
        _ => false,
    }
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
        // Garbage, and three flips (beyond the correction), are invalid.
        let mut s = spare;
        for (i, b) in s[1..META_LEN].iter_mut().enumerate() {
            *b = (i as u8).wrapping_mul(37) ^ 0x5A;
        }
        assert_eq!(PageMeta::decode(&s), SpareState::Invalid);
        let mut covered = [0usize; 8 * (META_LEN - 2)];
        for (c, b) in covered.iter_mut().zip((8..META_LEN * 8).filter(|b| b / 8 != VOID_OFFSET)) {
            *c = b;
        }
        for (n, w) in covered.windows(3).enumerate() {
            let third = covered[(n * 7 + 100) % covered.len()];
            let mut s = spare;
            for &bit in [w[0], w[1], third].iter() {
                s[bit / 8] ^= 1 << (bit % 8);
            }
            if third != w[0] && third != w[1] {
                assert_eq!(PageMeta::decode(&s), SpareState::Invalid, "bits {w:?}");
            }
        }
        let mut s = spare;
        s[VOID_OFFSET] = 0;
        assert_eq!(PageMeta::decode(&s), SpareState::Invalid);
        s[VOID_OFFSET] = 0xFE ^ 0x80; // two bits of the flag cleared: voided
        assert_eq!(PageMeta::decode(&s), SpareState::Invalid);
    }

    /// Regression (found by the bit-error tests, `tests/tests/bit_errors.rs`): one raw bit error in
    /// the metadata made a page unreadable. One or two flipped bits anywhere in the metadata
    /// (the void flag included, one bit) are corrected.
    #[test]
    fn one_or_two_bit_errors_are_corrected() {
        let mut spare = [0xFFu8; 64];
        sample().encode(&mut spare);
        for a in 8..META_LEN * 8 {
            let mut s = spare;
            s[a / 8] ^= 1 << (a % 8);
            assert_eq!(PageMeta::decode(&s), SpareState::Valid(sample()), "bit {a}");
        }
        for a in 8..META_LEN * 8 {
            for b in (a + 1..META_LEN * 8).step_by(5) {
                if a / 8 == VOID_OFFSET && b / 8 == VOID_OFFSET {
                    continue;
                }
                let mut s = spare;
                s[a / 8] ^= 1 << (a % 8);
                s[b / 8] ^= 1 << (b % 8);
                assert_eq!(PageMeta::decode(&s), SpareState::Valid(sample()), "bits {a} {b}");
            }
        }
    }
}
