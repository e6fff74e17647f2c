//! Page metadata (`ftl_core::meta`): encode, and decode of a clean spare, of one with 1 and 3
//! raw bit errors (BCH t = 3 correction), of an erased spare and of garbage; and, for
//! reference, format 1's whole check (a CRC-32C over 22 bytes). Every program encodes once;
//! every host read, GC copy and mount spare read decodes once.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion};
use ftl_core::meta::{PageKind, PageMeta, META_LEN};

fn meta(c: &mut Criterion) {
    let m = PageMeta { kind: PageKind::Data, tag: 123_456, seq: 0x0012_3456_789A, erase_count: 77, aux: 0 };
    let mut spare = [0xFFu8; META_LEN];
    m.encode(&mut spare);
    let mut g = c.benchmark_group("meta");
    g.bench_function("encode", |b| {
        let mut s = [0xFFu8; META_LEN];
        b.iter(|| black_box(&m).encode(black_box(&mut s)))
    });
    g.bench_function("decode_clean", |b| b.iter(|| PageMeta::decode(black_box(&spare))));
    let mut one = spare;
    one[9] ^= 0x10;
    g.bench_function("decode_1_error", |b| b.iter(|| PageMeta::decode(black_box(&one))));
    let mut three = one;
    three[4] ^= 0x01;
    three[26] ^= 0x80;
    g.bench_function("decode_3_errors", |b| b.iter(|| PageMeta::decode(black_box(&three))));
    let erased = [0xFFu8; META_LEN];
    g.bench_function("decode_erased", |b| b.iter(|| PageMeta::decode(black_box(&erased))));
    let mut garbage = [0u8; META_LEN];
    for (i, x) in garbage.iter_mut().enumerate() {
        *x = (i as u8).wrapping_mul(97) ^ 0x3C;
    }
    garbage[1] = 0xFF;
    garbage[2] = 0xFF;
    g.bench_function("decode_garbage", |b| b.iter(|| PageMeta::decode(black_box(&garbage))));
    // Reference: format 1's whole check, a CRC-32C over 22 metadata bytes (no correction).
    g.bench_function("reference_crc32c_22_bytes", |b| {
        b.iter(|| {
            ftl_core::crc32c::crc32c_append(ftl_core::crc32c::crc32c(&[1, 1]), black_box(&spare[4..24]))
        })
    });
    g.finish();
}

criterion_group!(benches, meta);
criterion_main!(benches);
