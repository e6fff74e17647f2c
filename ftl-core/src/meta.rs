//! Per-page metadata in the spare area: its layout, its error-correcting code and the void mark.
//!
//! Layout of the first [`META_LEN`] spare bytes:
//!
//! | bytes | field |
//! |---|---|
//! | 0 | bad-block marker position: always left 0xFF by the FTL |
//! | 1..3 | void mark: 0xFFFF normally; 0x0000 once the page is voided (not covered by the code) |
//! | 3..25 | message (22 bytes, little endian fields, below) |
//! | 25..28 | BCH parity of the message (`meta/ecc.rs`: t = 3 over the 200 bits of 3..28) |
//!
//! | message bytes | field |
//! |---|---|
//! | 0 | page kind ([`PageKind`]) |
//! | 1..5 | logical page (data), entry count (journal) or page index (checkpoint) |
//! | 5..11 | global sequence number (48 bits; larger values are stored as [`MAX_SEQ`]) |
//! | 11..14 | erase count of the block when the page was written (24 bits, saturating) |
//! | 14..18 | auxiliary word (checkpoint: its total pages) |
//! | 18..22 | CRC-32C over [`FORMAT_VERSION`] and message bytes 0..18 |
//!
//! The page codec's bytes (ECC/EDC over the data) follow at `META_LEN`.
//!
//! Guarantees of [`PageMeta::decode`]:
//! - Up to 3 raw bit errors anywhere in bytes 3..28 are corrected (the metadata is not covered by
//!   the page codec, so it has its own code); an erased area with up to 3 bits flipped reads as
//!   [`SpareState::Erased`] (all 0xFF is a codeword).
//! - More errors, a torn or half-erased area, another format version, garbage: `Invalid`, except
//!   with probability about 2^-32 (the CRC-32C inside the message checks what BCH corrected: a
//!   pattern beyond t that BCH "corrects" into another codeword is caught there).
//! - A page whose void mark has at least [`VOID_MIN_ZEROS`] of its 16 bits at 0 is `Invalid`,
//!   whatever its other bytes say. A clear mark needs 8 raw bit errors to read as voided, a mark
//!   voided in full ([`VOID_STRONG_ZEROS`] or more zeros, as [`crate::Ftl`] checks after voiding)
//!   needs 7 to read as clear. Marks in between are left only by a power cut or a failure during
//!   the voiding program; mount's contract for them is in `recovery.rs`.
//!
//! Decode checks the message's CRC first: CRC-32C has Hamming distance 8 over the 184 bits it
//! covers, so a match means no bit error in the message and BCH is skipped (the common case:
//! about 20 ns on x86-64 against 13 for format 1's plain CRC); only a mismatch runs the BCH
//! decoder, and the CRC then checks what it corrected.

pub(crate) mod ecc;

/// Bytes of metadata at the start of the spare area.
pub const META_LEN: usize = 28;
/// On-flash format version (bound into the CRC; version 1 had no ECC and a one-byte void flag).
pub const FORMAT_VERSION: u8 = 2;
/// Offset of the void mark.
pub const VOID_OFFSET: usize = 1;
/// Bytes of the void mark.
pub const VOID_LEN: usize = 2;
/// A page is voided when at least this many bits of its void mark are 0.
pub const VOID_MIN_ZEROS: u32 = 8;
/// A void counts as complete (confirmed by reading it back; left alone by mount) with at least
/// this many zero bits: 7 raw bit errors away from reading as not voided.
pub const VOID_STRONG_ZEROS: u32 = 14;
/// A void mark with at most this many zero bits is clear: raw bit errors of a never-voided mark.
/// More (and fewer than [`VOID_MIN_ZEROS`]) is a void a cut interrupted.
pub const VOID_CLEAR_MAX_ZEROS: u32 = 2;
/// Largest sequence number the metadata stores.
pub const MAX_SEQ: u64 = (1 << 48) - 1;
/// Largest erase count the metadata stores.
pub const MAX_ERASE_COUNT: u32 = (1 << 24) - 1;
/// Bit errors the metadata code corrects.
pub const META_ECC_BITS: usize = ecc::T;

const MSG: usize = VOID_OFFSET + VOID_LEN;
const PARITY: usize = MSG + ecc::MSG_BYTES;
const _: () = assert!(PARITY + ecc::PARITY_BYTES == META_LEN);
// The margins the module doc states: 8 flips turn a clear mark voided, 7 a complete void clear.
const _: () = assert!(VOID_MIN_ZEROS == 8 && VOID_STRONG_ZEROS - VOID_MIN_ZEROS + 1 == 7);
const _: () = assert!(VOID_CLEAR_MAX_ZEROS < VOID_MIN_ZEROS && VOID_STRONG_ZEROS <= 8 * VOID_LEN as u32);

/// Whether the bad-block marker byte (spare byte 0 of a block's first page) marks the block bad.
/// A marker is 0x00 (the factory's and `mark_bad`'s); the FTL leaves the byte 0xFF. Half the bits
/// decide, so raw bit errors of either do not change the answer.
pub const fn is_bad_block_marker(byte: u8) -> bool {
    byte.count_zeros() >= 4
}

/// Zero bits in the void mark of `spare` (at least `META_LEN` bytes).
pub fn void_zeros(spare: &[u8]) -> u32 {
    spare[VOID_OFFSET..VOID_OFFSET + VOID_LEN].iter().map(|b| b.count_zeros()).sum()
}

/// The bytes a void programs: `[0xFF, 0x00, 0x00]` (the spare from byte 0 to the end of the mark).
pub const VOID_PROGRAM: [u8; VOID_OFFSET + VOID_LEN] = {
    let mut m = [0u8; VOID_OFFSET + VOID_LEN];
    let mut i = 0;
    while i < VOID_OFFSET {
        m[i] = 0xFF;
        i += 1;
    }
    m
};

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
    /// A map page of a flash-resident map (tag: the map page's number).
    Map = 4,
    /// An anchor record (see [`crate::anchor`]; tag: its page in the anchor block).
    Anchor = 5,
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
    /// Anything else: voided, torn, half-erased, foreign, more raw bit errors than the code
    /// corrects.
    Invalid,
}

impl PageMeta {
    /// Writes the metadata into `spare[..META_LEN]` (void mark clear, marker byte 0xFF).
    pub fn encode(&self, spare: &mut [u8]) {
        let s = &mut spare[..META_LEN];
        s[..MSG].fill(0xFF);
        let mut m = [0u8; ecc::MSG_BYTES];
        m[0] = self.kind as u8;
        m[1..5].copy_from_slice(&self.tag.to_le_bytes());
        m[5..11].copy_from_slice(&self.seq.min(MAX_SEQ).to_le_bytes()[..6]);
        m[11..14].copy_from_slice(&self.erase_count.min(MAX_ERASE_COUNT).to_le_bytes()[..3]);
        m[14..18].copy_from_slice(&self.aux.to_le_bytes());
        let crc = message_crc(&m);
        m[18..22].copy_from_slice(&crc.to_le_bytes());
        s[MSG..PARITY].copy_from_slice(&m);
        s[PARITY..].copy_from_slice(&ecc::encode(&m));
    }

    /// Reads the metadata area of a spare, correcting raw bit errors (see the module doc).
    pub fn decode(spare: &[u8]) -> SpareState {
        if spare.len() < META_LEN {
            return SpareState::Invalid;
        }
        let s = &spare[..META_LEN];
        if void_zeros(s) >= VOID_MIN_ZEROS {
            return SpareState::Invalid;
        }
        let mut m = [0u8; ecc::MSG_BYTES];
        m.copy_from_slice(&s[MSG..PARITY]);
        let crc_ok =
            |m: &[u8; ecc::MSG_BYTES]| u32::from_le_bytes([m[18], m[19], m[20], m[21]]) == message_crc(m);
        // Fast path: CRC-32C has Hamming distance 8 over these 184 bits, so a matching CRC means
        // no bit error in the message (up to 7; more pass with probability 2^-32, as after BCH).
        // Otherwise BCH corrects, and the CRC checks what it corrected.
        if !crc_ok(&m) {
            let mut parity = [0u8; ecc::PARITY_BYTES];
            parity.copy_from_slice(&s[PARITY..]);
            if ecc::decode(&mut m, &parity).is_err() {
                return SpareState::Invalid;
            }
            if m.iter().all(|&b| b == 0xFF) {
                return SpareState::Erased;
            }
            if !crc_ok(&m) {
                return SpareState::Invalid;
            }
        }
        let kind = match m[0] {
            1 => PageKind::Data,
            2 => PageKind::Journal,
            3 => PageKind::Checkpoint,
            4 => PageKind::Map,
            5 => PageKind::Anchor,
            _ => return SpareState::Invalid,
        };
        let w = |i: usize| u32::from_le_bytes([m[i], m[i + 1], m[i + 2], m[i + 3]]);
        let mut seq = [0u8; 8];
        seq[..6].copy_from_slice(&m[5..11]);
        SpareState::Valid(PageMeta {
            kind,
            tag: w(1),
            seq: u64::from_le_bytes(seq),
            erase_count: u32::from_le_bytes([m[11], m[12], m[13], 0]),
            aux: w(14),
        })
    }
}

fn message_crc(m: &[u8; ecc::MSG_BYTES]) -> u32 {
    crate::crc32c::crc32c_append(crate::crc32c::crc32c(&[FORMAT_VERSION]), &m[..18])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> PageMeta {
        PageMeta { kind: PageKind::Data, tag: 77, seq: 0x1234_0000_0005, erase_count: 9, aux: 3 }
    }

    fn encoded(m: &PageMeta) -> [u8; META_LEN] {
        let mut s = [0xFFu8; META_LEN];
        m.encode(&mut s);
        s
    }

    /// A small deterministic generator (xorshift64*).
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
        }
        fn below(&mut self, n: usize) -> usize {
            (self.next() % n as u64) as usize
        }
        /// `k` distinct bit positions among the code's bits (bytes MSG..META_LEN).
        fn code_bits(&mut self, k: usize) -> [usize; 16] {
            let mut out = [0usize; 16];
            let mut n = 0;
            while n < k {
                let b = 8 * MSG + self.below(8 * (META_LEN - MSG));
                if !out[..n].contains(&b) {
                    out[n] = b;
                    n += 1;
                }
            }
            out
        }
    }

    fn flip(s: &mut [u8], bit: usize) {
        s[bit / 8] ^= 1 << (bit % 8);
    }

    fn random_meta(rng: &mut Rng) -> PageMeta {
        PageMeta {
            kind: [PageKind::Data, PageKind::Journal, PageKind::Checkpoint, PageKind::Map, PageKind::Anchor]
                [rng.below(5)],
            tag: rng.next() as u32,
            seq: rng.next() & MAX_SEQ,
            erase_count: rng.next() as u32 & MAX_ERASE_COUNT,
            aux: rng.next() as u32,
        }
    }

    #[test]
    fn round_trip() {
        let spare = encoded(&sample());
        assert_eq!(spare[0], 0xFF);
        assert_eq!(void_zeros(&spare), 0);
        assert_eq!(PageMeta::decode(&spare), SpareState::Valid(sample()));
        let mut rng = Rng(5);
        for _ in 0..1000 {
            let m = random_meta(&mut rng);
            assert_eq!(PageMeta::decode(&encoded(&m)), SpareState::Valid(m));
        }
        // Out-of-range values saturate (mount treats sequence numbers that large as corrupt).
        let big = PageMeta { seq: u64::MAX, erase_count: u32::MAX, ..sample() };
        let want = PageMeta { seq: MAX_SEQ, erase_count: MAX_ERASE_COUNT, ..sample() };
        assert_eq!(PageMeta::decode(&encoded(&big)), SpareState::Valid(want));
        assert_eq!(PageMeta::decode(&spare[..META_LEN - 1]), SpareState::Invalid);
    }

    #[test]
    fn every_error_of_up_to_two_bits_is_corrected() {
        for m in [sample(), PageMeta { kind: PageKind::Checkpoint, tag: 0, seq: 1, erase_count: 0, aux: 0 }] {
            let spare = encoded(&m);
            for a in 8 * MSG..8 * META_LEN {
                let mut s = spare;
                flip(&mut s, a);
                assert_eq!(PageMeta::decode(&s), SpareState::Valid(m), "bit {a}");
                for b in a + 1..8 * META_LEN {
                    let mut s2 = s;
                    flip(&mut s2, b);
                    assert_eq!(PageMeta::decode(&s2), SpareState::Valid(m), "bits {a} {b}");
                }
            }
        }
    }

    #[test]
    fn every_three_bit_error_is_corrected() {
        let m = sample();
        let spare = encoded(&m);
        let bits = 8 * MSG..8 * META_LEN;
        for a in bits.clone() {
            for b in a + 1..bits.end {
                for c in b + 1..bits.end {
                    let mut s = spare;
                    flip(&mut s, a);
                    flip(&mut s, b);
                    flip(&mut s, c);
                    assert_eq!(PageMeta::decode(&s), SpareState::Valid(m), "bits {a} {b} {c}");
                }
            }
        }
    }

    #[test]
    fn three_bit_errors_are_corrected() {
        let mut rng = Rng(7);
        for _ in 0..100_000 {
            let m = random_meta(&mut rng);
            let mut s = encoded(&m);
            for &b in &rng.code_bits(3)[..3] {
                flip(&mut s, b);
            }
            // Up to 7 raw errors in the void mark and in the marker byte do not matter either.
            let junk = rng.next();
            s[0] ^= junk as u8;
            let mut mark = 0u16;
            for _ in 0..rng.below(8) {
                mark |= 1 << rng.below(16);
            }
            s[1] ^= mark as u8;
            s[2] ^= (mark >> 8) as u8;
            assert_eq!(PageMeta::decode(&s), SpareState::Valid(m));
        }
    }

    #[test]
    fn four_to_twelve_bit_errors_are_never_miscorrected() {
        let mut rng = Rng(11);
        for k in 4..=12 {
            for _ in 0..40_000 {
                let m = random_meta(&mut rng);
                let mut s = encoded(&m);
                let bits = rng.code_bits(k);
                for &b in &bits[..k] {
                    flip(&mut s, b);
                }
                // Errors only in the parity leave the message intact: then it reads as itself.
                let message_intact = bits[..k].iter().all(|&b| b >= 8 * PARITY);
                match PageMeta::decode(&s) {
                    SpareState::Invalid => {}
                    SpareState::Valid(got) if got == m && message_intact => {}
                    other => panic!("{k} errors at {:?}: {other:?}", &bits[..k]),
                }
            }
        }
    }

    #[test]
    fn garbage_is_invalid() {
        let mut rng = Rng(13);
        for _ in 0..200_000 {
            let mut s = [0u8; META_LEN];
            for b in s.iter_mut() {
                *b = rng.next() as u8;
            }
            s[1] = 0xFF;
            s[2] = 0xFF;
            assert_eq!(PageMeta::decode(&s), SpareState::Invalid);
        }
        // Another format version's CRC does not match.
        let s = encoded(&sample());
        let mut m = [0u8; ecc::MSG_BYTES];
        m.copy_from_slice(&s[MSG..PARITY]);
        let old = crate::crc32c::crc32c_append(crate::crc32c::crc32c(&[1]), &m[..18]);
        m[18..22].copy_from_slice(&old.to_le_bytes());
        let mut t = s;
        t[MSG..PARITY].copy_from_slice(&m);
        t[PARITY..].copy_from_slice(&ecc::encode(&m));
        assert_eq!(PageMeta::decode(&t), SpareState::Invalid);
    }

    #[test]
    fn erased_reads_as_erased_with_up_to_three_flips() {
        assert_eq!(PageMeta::decode(&[0xFF; 64]), SpareState::Erased);
        // (decode's fast path relies on this: an erased message fails the CRC.)
        let m = [0xFFu8; ecc::MSG_BYTES];
        assert_ne!(message_crc(&m), u32::MAX);
        let mut rng = Rng(17);
        for k in 1..=3 {
            for _ in 0..20_000 {
                let mut s = [0xFFu8; META_LEN];
                for &b in &rng.code_bits(k)[..k] {
                    flip(&mut s, b);
                }
                assert_eq!(PageMeta::decode(&s), SpareState::Erased, "{k} flips");
            }
        }
    }

    /// A program interrupted by a power cut clears only some of the bits it should: the area then
    /// reads as erased, as the intended metadata, or as invalid, never as other metadata.
    #[test]
    fn torn_programs_never_read_as_other_metadata() {
        let mut rng = Rng(19);
        let (mut erased, mut valid, mut invalid) = (0, 0, 0);
        for i in 0..100_000 {
            let m = random_meta(&mut rng);
            let target = encoded(&m);
            // Keep each bit to clear with probability 1/2, 1/64 or 63/64.
            let shift = [1u32, 6, 6][i % 3];
            let mut s = [0xFFu8; META_LEN];
            for (k, byte) in s.iter_mut().enumerate() {
                for bit in 0..8 {
                    let r = rng.next() >> 58;
                    let keep = if i % 3 == 2 { r != 0 } else { r >> (6 - shift) == 0 };
                    if target[k] & (1 << bit) == 0 && keep {
                        *byte &= !(1 << bit);
                    }
                }
            }
            match PageMeta::decode(&s) {
                SpareState::Erased => erased += 1,
                SpareState::Valid(got) => {
                    assert_eq!(got, m);
                    valid += 1;
                }
                SpareState::Invalid => invalid += 1,
            }
        }
        assert!(erased > 1000 && valid > 1000 && invalid > 1000, "{erased} {valid} {invalid}");
    }

    #[test]
    fn void_mark_thresholds() {
        let spare = encoded(&sample());
        let mut rng = Rng(23);
        for zeros in 0..=16u32 {
            for _ in 0..50 {
                let mut s = spare;
                let mut mark = 0xFFFFu16;
                while mark.count_zeros() < zeros {
                    mark &= !(1 << rng.below(16));
                }
                s[1..3].copy_from_slice(&mark.to_le_bytes());
                assert_eq!(void_zeros(&s), zeros);
                let want =
                    if zeros >= VOID_MIN_ZEROS { SpareState::Invalid } else { SpareState::Valid(sample()) };
                assert_eq!(PageMeta::decode(&s), want, "{zeros} zeros");
            }
        }
        // The void program clears the whole mark and nothing else; on an erased page it makes
        // the area invalid (not erased).
        let mut s = spare;
        for (d, v) in s.iter_mut().zip(VOID_PROGRAM) {
            *d &= v;
        }
        assert_eq!((s[0], void_zeros(&s)), (0xFF, 16));
        assert_eq!(PageMeta::decode(&s), SpareState::Invalid);
        let mut e = [0xFFu8; META_LEN];
        e[..VOID_PROGRAM.len()].copy_from_slice(&VOID_PROGRAM);
        assert_eq!(PageMeta::decode(&e), SpareState::Invalid);
    }

    #[test]
    fn bad_block_marker_tolerates_bit_errors() {
        assert!(is_bad_block_marker(0x00));
        assert!(!is_bad_block_marker(0xFF));
        for a in 0..8 {
            assert!(!is_bad_block_marker(0xFF ^ (1 << a)));
            assert!(is_bad_block_marker(1 << a));
            for b in 0..8 {
                assert!(!is_bad_block_marker(0xFF ^ (1 << a) ^ (1 << b)));
                assert!(is_bad_block_marker((1 << a) | (1 << b)));
            }
        }
    }
}
