//! Polar WOM codec (issue 6): encode and decode of one 4 KiB logical page as a second write over
//! two physical pages, at N = 2^13 (8 codewords, K = 3201) and N = 2^16 (1 codeword, K = 28815).
//!
//! Targets on x86-64: encode <= 50 us, decode <= 10 us per page (a bit-packed C prototype:
//! 82 us / 10 us at N = 2^16, 106 us / 9 us at 8 x 2^13).
//!
//! * `page_*`: the whole `WomPageCodec` path with `NullCodec` (gather of the cells, dither,
//!   SC encode or polar transform, message packing, raw overflow bits, attempt bits, CRC-32C):
//!   the figure to compare with the targets. Inputs are prepared pages (scrambled random first
//!   writes, random messages) that encode on the first attempt, so one attempt is timed; a retry
//!   costs one more attempt of the failing codeword.
//! * `page_bch_*`: the same with BCH(13, 8) per 512 bytes over each page (encode: parity;
//!   decode: syndromes of a clean read), the cost a real second write adds.
//! * `codeword_*`: one SC encode / decode of a single codeword with an explicit dither (no page
//!   mapping), the unit the C figures were measured on.
//! * `codeword_list8_*`: the list encoder (L = 8) at 210 % (K = 3686 at 2^13, 29491 at 2^16),
//!   one codeword.
//!
//! Run: `cargo bench -p ftl-benches --bench wom`. The machine is shared: read criterion's lower
//! bound.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion};
use ftl_core::policy::{NullCodec, PageCodec};
use ftl_policies::flex_ecc::BchCodec;
use ftl_policies::wom::list;
use ftl_policies::wom::scramble::{scramble_first_write, SplitMix64};
use ftl_policies::wom::{SecondWriteLayout, WomCodec, WomConfig, WomError, WomPageCodec, WomScratch};

const W: usize = 1024;
const LAYOUT: SecondWriteLayout =
    SecondWriteLayout { data_bytes: 4096, spare_bytes: 1024, raw_offset: 64, raw_len: 896 };
const VARIANTS: usize = 16;

struct Case {
    a: Vec<u8>,
    b: Vec<u8>,
    msg: Vec<u8>,
    addr: u64,
}

fn first_page(r: &mut SplitMix64, addr: u64) -> Vec<u8> {
    let data: Vec<u8> = (0..4096).map(|_| r.next_u64() as u8).collect();
    let mut page = vec![0xFFu8; LAYOUT.page_len()];
    scramble_first_write(addr, &data, &mut page[..4096]).expect("lengths");
    for b in page[4096..4096 + 64].iter_mut() {
        *b = r.next_u64() as u8;
    }
    page
}

/// Pages that encode on the first attempt with `pc`.
fn cases<E: PageCodec>(pc: &WomPageCodec<W>, ecc: &mut E, scratch: &mut WomScratch<W>) -> Vec<Case> {
    let mut r = SplitMix64::new(0xBE4C);
    let mut out = Vec::new();
    let mut oa = vec![0u8; LAYOUT.page_len()];
    let mut ob = vec![0u8; LAYOUT.page_len()];
    while out.len() < VARIANTS {
        let addr = r.next_u64() >> 16;
        let c = Case {
            a: first_page(&mut r, addr),
            b: first_page(&mut r, addr + 1),
            msg: (0..4096).map(|_| r.next_u64() as u8).collect(),
            addr,
        };
        match pc.encode_second_write(ecc, c.addr, &c.msg, &c.a, &c.b, &mut oa, &mut ob, scratch) {
            Ok(e) if e.max_attempt == 0 => out.push(c),
            Ok(_) | Err(WomError::EncodeFailed { .. }) => {}
            Err(e) => panic!("{e:?}"),
        }
    }
    out
}

fn bench_page<E: PageCodec>(c: &mut Criterion, name: &str, n_log2: u32, k: usize, ecc: &mut E) {
    let codec = WomCodec::<W>::new(WomConfig::new(n_log2, k, 2)).expect("config");
    let pc = WomPageCodec::new(codec, LAYOUT, ecc.spare_len()).expect("layout fits");
    let mut scratch: Box<WomScratch<W>> = Box::new(WomScratch::new());
    let cases = cases(&pc, ecc, &mut scratch);
    let encoded: Vec<(Vec<u8>, Vec<u8>)> = cases
        .iter()
        .map(|cs| {
            let mut oa = vec![0u8; LAYOUT.page_len()];
            let mut ob = vec![0u8; LAYOUT.page_len()];
            pc.encode_second_write(ecc, cs.addr, &cs.msg, &cs.a, &cs.b, &mut oa, &mut ob, &mut scratch)
                .expect("prepared");
            (oa, ob)
        })
        .collect();
    let mut g = c.benchmark_group(format!("{name}_n{}_k{k}", 1u32 << n_log2));
    let mut oa = vec![0u8; LAYOUT.page_len()];
    let mut ob = vec![0u8; LAYOUT.page_len()];
    let mut i = 0;
    g.bench_function("encode_4KiB_page", |b| {
        b.iter(|| {
            i = (i + 1) % VARIANTS;
            let cs = &cases[i];
            pc.encode_second_write(
                ecc,
                cs.addr,
                black_box(&cs.msg),
                &cs.a,
                &cs.b,
                &mut oa,
                &mut ob,
                &mut scratch,
            )
            .expect("encodes")
        })
    });
    let mut pa = vec![0u8; LAYOUT.page_len()];
    let mut pb = vec![0u8; LAYOUT.page_len()];
    let mut msg = vec![0u8; 4096];
    g.bench_function("decode_4KiB_page", |b| {
        b.iter(|| {
            i = (i + 1) % VARIANTS;
            // The decode corrects in place: start from the stored images (a 2 x 5 KiB copy,
            // about 0.2 us, included).
            pa.copy_from_slice(&encoded[i].0);
            pb.copy_from_slice(&encoded[i].1);
            let d = pc.decode_second_write(ecc, cases[i].addr, &mut pa, &mut pb, &mut msg, &mut scratch);
            black_box(d.expect("decodes"))
        })
    });
    g.finish();
}

fn page(c: &mut Criterion) {
    bench_page(c, "wom_page", 13, 3201, &mut NullCodec);
    bench_page(c, "wom_page", 16, 28815, &mut NullCodec);
}

fn page_bch(c: &mut Criterion) {
    for (n_log2, k) in [(13u32, 3201usize), (16, 28815)] {
        let codec = WomCodec::<W>::new(WomConfig::new(n_log2, k, 2)).expect("config");
        let plan = ftl_policies::wom::PagePlan::new(LAYOUT, codec.config(), 0).expect("fits");
        let mut bch: Box<BchCodec<8192, 2>> = Box::new(BchCodec::zeroed());
        bch.init(13, 8, 512, plan.protected_len).expect("BCH(13, 8)");
        bench_page(c, "wom_page_bch", n_log2, k, &mut *bch);
    }
}

fn codeword(c: &mut Criterion) {
    for (n_log2, k) in [(13u32, 3201usize), (16, 28815)] {
        let codec = WomCodec::<W>::new(WomConfig::new(n_log2, k, 1)).expect("config");
        let mut scratch: Box<WomScratch<W>> = Box::new(WomScratch::new());
        let words = 1usize << (n_log2 - 6);
        let mut r = SplitMix64::new(u64::from(n_log2));
        let mut cases = Vec::new();
        while cases.len() < VARIANTS {
            let s: Vec<u64> = (0..words).map(|_| r.next_u64()).collect();
            let g: Vec<u64> = (0..words).map(|_| r.next_u64()).collect();
            let m: Vec<u64> = (0..k.div_ceil(64)).map(|_| r.next_u64()).collect();
            let mut st = s.clone();
            if codec.encode_raw(&mut st, &g, &m, &mut scratch).expect("encode") {
                cases.push((s, g, m, st));
            }
        }
        let mut grp = c.benchmark_group(format!("wom_codeword_n{}_k{k}", 1u32 << n_log2));
        let mut st = vec![0u64; words];
        let mut i = 0;
        grp.bench_function("encode", |b| {
            b.iter(|| {
                i = (i + 1) % VARIANTS;
                st.copy_from_slice(&cases[i].0);
                codec.encode_raw(&mut st, &cases[i].1, black_box(&cases[i].2), &mut scratch).expect("encode")
            })
        });
        let mut out = vec![0u8; k.div_ceil(8)];
        grp.bench_function("decode", |b| {
            b.iter(|| {
                i = (i + 1) % VARIANTS;
                codec.decode_raw(black_box(&cases[i].3), &cases[i].1, &mut out, &mut scratch).expect("decode")
            })
        });
        grp.finish();
    }
}

/// The list encoder option at 210 % (K = 29491 WOM bits per 4 KiB page), one codeword.
fn codeword_list(c: &mut Criterion) {
    const LW: usize = list::scratch_words(16, 8);
    let mut scratch: Box<WomScratch<W, LW>> = Box::new(WomScratch::new());
    for (n_log2, k) in [(13u32, 3686usize), (16, 29491)] {
        let mut cfg = WomConfig::new(n_log2, k, 1);
        cfg.list_size = 8;
        let codec = WomCodec::<W>::new(cfg).expect("config");
        let words = 1usize << (n_log2 - 6);
        let mut r = SplitMix64::new(u64::from(n_log2) + 100);
        let mut cases = Vec::new();
        while cases.len() < VARIANTS {
            let s: Vec<u64> = (0..words).map(|_| r.next_u64()).collect();
            let g: Vec<u64> = (0..words).map(|_| r.next_u64()).collect();
            let m: Vec<u64> = (0..k.div_ceil(64)).map(|_| r.next_u64()).collect();
            let mut st = s.clone();
            if codec.encode_raw(&mut st, &g, &m, &mut scratch).expect("encode") {
                cases.push((s, g, m));
            }
        }
        let mut grp = c.benchmark_group(format!("wom_codeword_list8_n{}_k{k}", 1u32 << n_log2));
        grp.sample_size(20);
        let mut st = vec![0u64; words];
        let mut i = 0;
        grp.bench_function("encode", |b| {
            b.iter(|| {
                i = (i + 1) % VARIANTS;
                st.copy_from_slice(&cases[i].0);
                codec.encode_raw(&mut st, &cases[i].1, black_box(&cases[i].2), &mut scratch).expect("encode")
            })
        });
        grp.finish();
    }
}

criterion_group!(benches, page, page_bch, codeword, codeword_list);
criterion_main!(benches);
