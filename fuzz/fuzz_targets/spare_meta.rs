//! The spare-area metadata decoders: `PageMeta::decode` (void mark, CRC-32C, the BCH decoder of
//! `meta/ecc.rs` behind it) and the page codec's `decode` (`DefaultPolicies`), on arbitrary
//! bytes. Checks: no panic on any input; and a round trip: metadata built from the input, encoded,
//! with up to `META_ECC_BITS` (3) bits flipped at positions the input picks outside the void mark,
//! decodes to exactly what was encoded; the codec decodes its own encoding of the input's data.
#![no_main]

use ftl_core::meta::{
    PageKind, PageMeta, SpareState, MAX_ERASE_COUNT, MAX_SEQ, META_ECC_BITS, META_LEN, VOID_LEN, VOID_OFFSET,
};
use ftl_core::policy::{DefaultPolicies, PageCodec, PolicySet};
use libfuzzer_sys::fuzz_target;

fn u32_at(b: &[u8], i: usize) -> u32 {
    let mut w = [0u8; 4];
    for (k, x) in w.iter_mut().enumerate() {
        *x = b.get(i + k).copied().unwrap_or(0);
    }
    u32::from_le_bytes(w)
}

fuzz_target!(|input: &[u8]| {
    // Arbitrary spares, any length.
    let _ = PageMeta::decode(input);

    // Round trip with correctable errors.
    let kind = [PageKind::Data, PageKind::Journal, PageKind::Checkpoint]
        [input.first().map_or(0, |&b| b % 3) as usize];
    let meta = PageMeta {
        kind,
        tag: u32_at(input, 1),
        seq: (u64::from(u32_at(input, 5)) << 16 | u64::from(u32_at(input, 9) & 0xFFFF)).min(MAX_SEQ),
        erase_count: u32_at(input, 13).min(MAX_ERASE_COUNT),
        aux: u32_at(input, 17),
    };
    let mut spare = [0xFFu8; 64];
    meta.encode(&mut spare);
    let void = 8 * VOID_OFFSET..8 * (VOID_OFFSET + VOID_LEN);
    let flips = input.get(21).map_or(0, |&b| b as usize % (META_ECC_BITS + 1));
    let mut flipped = Vec::new();
    for k in 0..flips {
        let bit = u16::from_le_bytes([
            input.get(22 + 2 * k).copied().unwrap_or(0),
            input.get(23 + 2 * k).copied().unwrap_or(0),
        ]) as usize
            % (8 * META_LEN);
        if void.contains(&bit) || flipped.contains(&bit) {
            continue;
        }
        flipped.push(bit);
        spare[bit / 8] ^= 0x80 >> (bit % 8);
    }
    assert_eq!(PageMeta::decode(&spare), SpareState::Valid(meta), "flipped bits {flipped:?}");

    // The page codec: arbitrary stored bytes, then its own encoding of the input as data.
    let mut policies = DefaultPolicies::default();
    let codec = policies.codec();
    let n = codec.spare_len();
    let mut data = [0u8; 512];
    for (d, s) in data.iter_mut().zip(input.iter().skip(28)) {
        *d = *s;
    }
    let mut stored = vec![0u8; n];
    for (d, s) in stored.iter_mut().zip(input) {
        *d = *s;
    }
    let mut scratch = data;
    let _ = codec.decode(&mut scratch, &stored);
    codec.encode(&data, &mut stored);
    let mut back = data;
    assert!(codec.decode(&mut back, &stored).is_ok() && back == data, "the codec's own encoding");
});
