//! Cost of the emulator's operations on an MT29F4G08-shaped device, metadata-only and with data
//! stored. Run: `cargo bench -p ftl-benches --bench emulator`.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use nand_hal::{BlockId, Geometry, NandFlash, PageId};
use sim_host::emulator::{Emulator, EmulatorConfig};

fn ops(c: &mut Criterion) {
    let geometry = Geometry::MT29F4G08;
    let ppb = geometry.pages_per_block;
    let (data, spare) = (vec![0x5Au8; 2048], vec![0xA5u8; 64]);
    let (mut rd, mut rs) = (vec![0u8; 2048], vec![0u8; 64]);
    for store_data in [false, true] {
        let mode = if store_data { "with_data" } else { "metadata_only" };
        let mut e =
            Emulator::new(EmulatorConfig { store_data, ..EmulatorConfig::new(geometry) }).expect("emulator");
        let mut g = c.benchmark_group(format!("emulator_{mode}"));
        g.throughput(Throughput::Elements(ppb as u64));
        let mut block = 0u32;
        g.bench_function("erase_then_program_block_2048+64", |b| {
            b.iter(|| {
                block = (block + 1) % geometry.total_blocks();
                e.erase_block(BlockId(block)).expect("erase");
                for p in 0..ppb {
                    e.program_page(geometry.page(BlockId(block), p), black_box(&data), &spare)
                        .expect("program");
                }
            })
        });
        g.bench_function("read_block_2048+64", |b| {
            b.iter(|| {
                for p in 0..ppb {
                    e.read_page(PageId(block * ppb + p), &mut rd, &mut rs).expect("read");
                }
                black_box(&rd);
            })
        });
        g.bench_function("read_spare_block_16", |b| {
            b.iter(|| {
                for p in 0..ppb {
                    e.read_spare(PageId(block * ppb + p), &mut rs[..16]).expect("read");
                }
                black_box(&rs);
            })
        });
        g.finish();
    }
}

criterion_group!(benches, ops);
criterion_main!(benches);
