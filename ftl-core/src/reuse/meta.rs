//! The metadata of a second write: [`SW_META_LEN`] bytes at the very end of each of the two
//! pages' spare areas, cells the first write left erased.
//!
//! | bytes | field |
//! |---|---|
//! | 0 | void flag: 0xFF normally, 0x00 once the second write was rolled back or failed (outside the code) |
//! | 1 | magic `0x57` |
//! | 2 | half (bits 0..7): 0 = plane-0 page (the one the map points at), 1 = plane-1 page, 2 = activation marker (page 0 of a pair's plane-0 block); bit 7 ([`SW_SAME_BLOCK`]): both halves in this block (half 0 the lower offset) |
//! | 3..7 | logical page |
//! | 7..13 | global sequence number (48 bits, the same in both halves) |
//! | 13..17 | the other half's block, or with [`SW_SAME_BLOCK`] its page offset in this block |
//! | 17..21 | CRC-32C over bytes 1..17 |
//! | 21..24 | parity of the first write's metadata code (`meta/ecc.rs`: BCH over GF(2^8), t = 3) over two implicit 0xFF bytes and bytes 1..21 |
//!
//! Guarantee: [`SwMeta::decode`] accepts only metadata written whole and not voided, with up to
//! three raw bit errors in bytes 1..24 corrected (more are caught by the decoder or the CRC);
//! erased cells (with up to three bit errors) are told apart from anything else. A void flag
//! with [`VOID_MIN_ZEROS`] or more zero bits is voided; the void programs the whole byte, so
//! raw bit errors cannot make a voided flag read as clear nor a clear one as voided.

use crate::meta::ecc;

/// Bytes of second-write metadata at the end of the spare.
pub const SW_META_LEN: usize = 24;
const MAGIC: u8 = 0x57;
/// `half` of a pair's activation marker.
pub const HALF_MARKER: u8 = 2;
/// Flag in the half byte: both halves in one block (`partner` is then the other half's page
/// offset). Images written before it had the bit clear, so they read as before; an FTL without
/// it takes a same-block half for garbage (a torn write).
pub const SW_SAME_BLOCK: u8 = 0x80;
/// Offset of the void flag within the metadata.
pub const SW_VOID_OFFSET: usize = 0;
/// Zero bits from which the void flag reads as voided.
pub const VOID_MIN_ZEROS: u32 = 4;
/// The message bytes stored (1..21); the code's message is two implicit 0xFF bytes and these.
const STORED: usize = 20;
const IMPLICIT: usize = ecc::MSG_BYTES - STORED;
const SEQ_MASK: u64 = (1 << 48) - 1;

/// Decoded second-write metadata.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct SwMeta {
    /// 0: plane-0 (or lower-offset) half; 1: the other half; [`HALF_MARKER`]: activation marker.
    pub half: u8,
    /// Both halves are in one block ([`SW_SAME_BLOCK`]; never on a marker).
    pub same_block: bool,
    /// Logical page.
    pub lpn: u32,
    /// Sequence number (48 bits are stored).
    pub seq: u64,
    /// The other half's block, or in a same-block pair its page offset.
    pub partner: u32,
}

/// What the second-write metadata cells of a page say.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum SwState {
    /// Erased: no second write was ever started on the page.
    Erased,
    /// A whole second write's metadata.
    Valid(SwMeta),
    /// Torn, voided or garbage.
    Invalid,
}

fn crc(s: &[u8]) -> u32 {
    crate::crc32c::crc32c(&s[1..17])
}

fn code_message(s: &[u8]) -> [u8; ecc::MSG_BYTES] {
    let mut m = [0xFFu8; ecc::MSG_BYTES];
    m[IMPLICIT..].copy_from_slice(&s[1..1 + STORED]);
    m
}

impl SwMeta {
    /// Writes the metadata into `s[..SW_META_LEN]`.
    pub fn encode(&self, s: &mut [u8]) {
        let s = &mut s[..SW_META_LEN];
        s[SW_VOID_OFFSET] = 0xFF;
        s[1] = MAGIC;
        s[2] = self.half | if self.same_block { SW_SAME_BLOCK } else { 0 };
        s[3..7].copy_from_slice(&self.lpn.to_le_bytes());
        s[7..13].copy_from_slice(&(self.seq & SEQ_MASK).to_le_bytes()[..6]);
        s[13..17].copy_from_slice(&self.partner.to_le_bytes());
        let c = crc(s);
        s[17..21].copy_from_slice(&c.to_le_bytes());
        let parity = ecc::encode(&code_message(s));
        s[21..24].copy_from_slice(&parity);
    }

    /// Reads the metadata cells `s[..SW_META_LEN]`.
    pub fn decode(s: &[u8]) -> SwState {
        let Some(s) = s.get(..SW_META_LEN) else { return SwState::Invalid };
        let void_zeros = s[SW_VOID_OFFSET].count_zeros();
        let mut m = code_message(s);
        let parity = [s[21], s[22], s[23]];
        if ecc::decode(&mut m, &parity).is_err() || m[..IMPLICIT].iter().any(|&b| b != 0xFF) {
            return SwState::Invalid;
        }
        if m.iter().all(|&b| b == 0xFF) && void_zeros < VOID_MIN_ZEROS {
            return SwState::Erased;
        }
        if void_zeros >= VOID_MIN_ZEROS {
            return SwState::Invalid;
        }
        let mut c = [0xFFu8; SW_META_LEN];
        c[1..1 + STORED].copy_from_slice(&m[IMPLICIT..]);
        let w = |i: usize| u32::from_le_bytes([c[i], c[i + 1], c[i + 2], c[i + 3]]);
        let (half, same_block) = (c[2] & !SW_SAME_BLOCK, c[2] & SW_SAME_BLOCK != 0);
        if c[1] != MAGIC || half > HALF_MARKER || (same_block && half == HALF_MARKER) || w(17) != crc(&c) {
            return SwState::Invalid;
        }
        let mut seq = [0u8; 8];
        seq[..6].copy_from_slice(&c[7..13]);
        SwState::Valid(SwMeta { half, same_block, lpn: w(3), seq: u64::from_le_bytes(seq), partner: w(13) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> ([u8; SW_META_LEN], SwMeta) {
        let m = SwMeta { half: HALF_MARKER, same_block: false, lpn: 7, seq: 0x1234_0000_0003, partner: 42 };
        let mut s = [0xFFu8; SW_META_LEN];
        m.encode(&mut s);
        (s, m)
    }

    #[test]
    fn round_trip_and_erased() {
        let (s, m) = sample();
        assert_eq!(SwMeta::decode(&s), SwState::Valid(m));
        assert_eq!(SwMeta::decode(&[0xFF; SW_META_LEN]), SwState::Erased);
        assert_eq!(SwMeta::decode(&s[..SW_META_LEN - 1]), SwState::Invalid);
    }

    /// Up to three flipped bits anywhere in the coded bytes are corrected; the same holds for
    /// erased cells; a flip in the void flag changes nothing.
    #[test]
    fn corrects_three_bit_errors() {
        let (s, m) = sample();
        const BITS: usize = SW_META_LEN * 8;
        for a in (8..BITS).step_by(5) {
            for b in (a + 1..BITS).step_by(11) {
                let c = 8 + (a * 7 + b * 3) % (BITS - 8);
                if c == a || c == b {
                    continue;
                }
                let mut t = s;
                let mut e = [0xFFu8; SW_META_LEN];
                for x in [a, b, c] {
                    t[x / 8] ^= 1 << (x % 8);
                    e[x / 8] ^= 1 << (x % 8);
                }
                assert_eq!(SwMeta::decode(&t), SwState::Valid(m), "bits {a} {b} {c}");
                assert_eq!(SwMeta::decode(&e), SwState::Erased, "erased, bits {a} {b} {c}");
            }
        }
        let mut t = s;
        t[SW_VOID_OFFSET] ^= 0x10;
        assert_eq!(SwMeta::decode(&t), SwState::Valid(m));
    }

    /// Same-block halves round-trip with their flag; a same-block marker is refused; images
    /// without the flag (all before it) decode as before.
    #[test]
    fn same_block_flag() {
        for half in [0, 1] {
            let m = SwMeta { half, same_block: true, lpn: 9, seq: 5, partner: 17 };
            let mut s = [0xFFu8; SW_META_LEN];
            m.encode(&mut s);
            assert_eq!(s[2], half | SW_SAME_BLOCK);
            assert_eq!(SwMeta::decode(&s), SwState::Valid(m));
            let two = SwMeta { same_block: false, ..m };
            two.encode(&mut s);
            assert_eq!(s[2], half);
            assert_eq!(SwMeta::decode(&s), SwState::Valid(two));
        }
        let mut s = [0xFFu8; SW_META_LEN];
        SwMeta { half: HALF_MARKER, same_block: true, lpn: 0, seq: 1, partner: 3 }.encode(&mut s);
        assert_eq!(SwMeta::decode(&s), SwState::Invalid);
    }

    /// A voided flag reads as voided (also with raw bit errors), whatever the rest says.
    #[test]
    fn voided_is_invalid() {
        let (mut s, _) = sample();
        s[SW_VOID_OFFSET] = 0;
        assert_eq!(SwMeta::decode(&s), SwState::Invalid);
        s[SW_VOID_OFFSET] = 0b0100_0101;
        assert_eq!(SwMeta::decode(&s), SwState::Invalid);
        let mut e = [0xFFu8; SW_META_LEN];
        e[SW_VOID_OFFSET] = 0;
        assert_eq!(SwMeta::decode(&e), SwState::Invalid);
    }

    /// Torn metadata (the bits up to a cut programmed, the rest erased) reads as valid only when
    /// at most three of its zero bits are missing (the code corrects them: the metadata is whole).
    #[test]
    fn torn_is_valid_only_when_correctable() {
        let (s, m) = sample();
        for cut in 0..SW_META_LEN * 8 {
            let mut t = [0xFFu8; SW_META_LEN];
            let mut missing = 0;
            for x in 0..SW_META_LEN * 8 {
                if s[x / 8] >> (x % 8) & 1 == 0 {
                    if x < cut {
                        t[x / 8] &= !(1 << (x % 8));
                    } else {
                        missing += 1;
                    }
                }
            }
            match SwMeta::decode(&t) {
                SwState::Valid(v) => assert!(v == m && missing <= 3, "cut {cut}: {missing} missing"),
                _ => assert!(missing > 0, "cut {cut}"),
            }
        }
    }
}
