//! BCH encode/decode and CRC-32C throughput: the issue-8 benchmark set, in the harness shape of
//! `coding-notes.md` 5.3 (the clean codeword is prepared once, k random data bits are flipped in
//! each of 64 prepared copies, and only the decode call, which locates the errors, is timed).
//! Also the whole `BchCodec` on an MT29F4G08 page (2 KiB, 4 x BCH(13, 4) + CRC-32C), and
//! FlexECC's `FlexCodec` on a 4 KiB page in both formats (BCH(13, 8) per 512 B, or CRC only).
//! Run: `cargo bench -p ftl-benches --bench bch`.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use ftl_core::crc32c::crc32c;
use ftl_core::policy::{PageCodec, PageFormat};
use ftl_policies::flex_ecc::{Bch, BchCodec, FlexCodec};
use nand_hal::Geometry;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

const COPIES: usize = 64;

fn bench_code<const F: usize, const W: usize>(
    c: &mut Criterion,
    bch: &mut Bch<F, W>,
    m: u32,
    t: u32,
    len: usize,
) {
    bch.init(m, t, None).expect("valid BCH parameters");
    let mut rng = ChaCha8Rng::seed_from_u64(u64::from(m * 100 + t));
    let data: Vec<u8> = (0..len).map(|_| rng.random()).collect();
    let mut ecc = vec![0u8; bch.ecc_bytes()];
    bch.encode(&data, &mut ecc).expect("encode");
    let mut g = c.benchmark_group(format!("bch_m{m}_t{t}_{len}B"));
    g.throughput(Throughput::Bytes(len as u64));
    g.bench_function("encode", |b| {
        let mut out = vec![0u8; bch.ecc_bytes()];
        b.iter(|| bch.encode(black_box(&data), &mut out).expect("encode"));
    });
    for errors in [0, t / 2, t] {
        let copies: Vec<Vec<u8>> = (0..COPIES)
            .map(|_| {
                let mut d = data.clone();
                let mut flipped = Vec::new();
                while flipped.len() < errors as usize {
                    let p = rng.random_range(0..8 * len);
                    if !flipped.contains(&p) {
                        flipped.push(p);
                        d[p / 8] ^= 1 << (p % 8);
                    }
                }
                d
            })
            .collect();
        for d in &copies {
            assert_eq!(bch.decode(d, &ecc).expect("correctable").len(), errors as usize);
        }
        let mut i = 0;
        g.bench_function(format!("decode_{errors}_errors"), |b| {
            b.iter(|| {
                i = (i + 1) % COPIES;
                black_box(bch.decode(black_box(&copies[i]), &ecc).expect("correctable"))
            })
        });
    }
    g.finish();
}

fn bch(c: &mut Criterion) {
    let mut small: Box<Bch<8192, 4>> = Box::new(Bch::zeroed());
    for t in [4, 8, 16] {
        bench_code(c, &mut small, 13, t, 512);
    }
    let mut large: Box<Bch<16384, 9>> = Box::new(Bch::zeroed());
    for t in [8, 16, 40] {
        bench_code(c, &mut large, 14, t, 1024);
    }
}

fn codec(c: &mut Criterion) {
    let geo = Geometry::MT29F4G08;
    let mut codec: Box<BchCodec<8192, 1>> = Box::new(BchCodec::zeroed());
    codec.init_for_geometry(&geo).expect("geometry ECC requirement");
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    let data: Vec<u8> = (0..geo.data_bytes).map(|_| rng.random()).collect();
    let mut spare = vec![0u8; codec.spare_len()];
    codec.encode(&data, &mut spare);
    let mut g = c.benchmark_group("bch_codec_mt29f4g08_2048B");
    g.throughput(Throughput::Bytes(data.len() as u64));
    g.bench_function("encode", |b| {
        let mut out = vec![0u8; codec.spare_len()];
        b.iter(|| codec.encode(black_box(&data), &mut out));
    });
    let mut buf = data.clone();
    g.bench_function("decode_0_errors", |b| {
        b.iter(|| codec.decode(black_box(&mut buf), &spare).expect("clean"))
    });
    g.bench_function("decode_4_errors_one_per_codeword", |b| {
        b.iter(|| {
            buf.copy_from_slice(&data);
            for k in 0..4 {
                buf[k * 512 + 100] ^= 0x10;
            }
            codec.decode(black_box(&mut buf), &spare).expect("correctable")
        })
    });
    g.finish();
}

/// FlexECC's two formats on a 4 KiB page (BCH(13, 8) per 512 B + CRC-32C, or CRC-32C only): the
/// software cost of a dirty (BCH) and a clean (CRC) page.
fn flex(c: &mut Criterion) {
    let mut codec: Box<FlexCodec<8192, 2>> =
        Box::new(FlexCodec::new(BchCodec::new(13, 8, 512, 4096).expect("valid BCH parameters")));
    let mut rng = ChaCha8Rng::seed_from_u64(4);
    let data: Vec<u8> = (0..4096).map(|_| rng.random()).collect();
    let mut g = c.benchmark_group("flex_codec_4096B_t8");
    g.throughput(Throughput::Bytes(data.len() as u64));
    for (name, format) in [("bch", PageFormat::Correcting), ("crc", PageFormat::Detecting)] {
        let mut spare = vec![0u8; codec.spare_len()];
        codec.encode_as(&data, &mut spare, format);
        g.bench_function(format!("{name}_encode"), |b| {
            let mut out = vec![0u8; codec.spare_len()];
            b.iter(|| codec.encode_as(black_box(&data), &mut out, format));
        });
        let mut buf = data.clone();
        g.bench_function(format!("{name}_decode_0_errors"), |b| {
            b.iter(|| codec.decode(black_box(&mut buf), &spare).expect("clean"))
        });
        if format == PageFormat::Correcting {
            g.bench_function("bch_decode_8_errors_one_per_codeword", |b| {
                b.iter(|| {
                    buf.copy_from_slice(&data);
                    for k in 0..8 {
                        buf[k * 512 + 100] ^= 0x10;
                    }
                    codec.decode(black_box(&mut buf), &spare).expect("correctable")
                })
            });
        }
    }
    g.finish();
}

fn crc(c: &mut Criterion) {
    let data: Vec<u8> = (0..4096u32).map(|i| (i * 31) as u8).collect();
    let mut g = c.benchmark_group("crc32c");
    g.throughput(Throughput::Bytes(4096));
    g.bench_function("4KiB", |b| b.iter(|| crc32c(black_box(&data))));
    g.finish();
}

criterion_group!(benches, bch, codec, flex, crc);
criterion_main!(benches);
