//! Second writes with deduplication (`wom,dedup`: the polar code with BCH and the CAFTL index
//! that tests/src/stack.rs attaches, on the baseline policies) on structured contents: mostly zero bytes, as the
//! simulator's synthetic contents (a 64-bit id repeated), some shared by several logical pages.
//!
//! Every data page on flash that the FTL marked scrambled (`aux` bit [`AUX_SCRAMBLED`]) and that
//! carries no second write holds at most half of its cells programmed, the scrambler's bound,
//! whichever path wrote it (host first writes, shared contents, GC's rewrites of second writes);
//! so the invalid pages stay usable for second writes, second writes happen, and every logical
//! page reads back. Unscrambled, these contents program 80-90 % of the cells: more than the 5/8
//! a second write accepts.

#![cfg(all(feature = "wom", feature = "dedup"))]

use ftl_core::meta::{PageKind, PageMeta, SpareState, META_LEN};
use ftl_core::policy::DefaultPolicies;
use ftl_core::reuse::ReuseConfig;
use ftl_core::reuse::{AUX_FLAGS_LOST, AUX_SCRAMBLED, SW_META_LEN};
use ftl_core::Config;
use ftl_testkit::{FtlMemory, ReuseBuffers};
use ftl_tests::stack::DedupParts;
use ftl_tests::{open, ExtParts, WomParts};
use nand_emu::{Emulator, EmulatorConfig};
use nand_hal::{EccRequirement, Geometry, NandFlash, PageId};

/// Content `id` as the simulator fills pages: its big-endian bytes, repeated.
fn content(id: u64) -> Vec<u8> {
    id.to_be_bytes().iter().copied().cycle().take(4096).collect()
}

fn programmed(data: &[u8]) -> usize {
    data.iter().map(|b| b.count_zeros() as usize).sum()
}

#[test]
fn scrambled_pages_stay_within_half_the_cells_with_dedup() {
    // 4 KiB + 368-byte spare, two planes, pages programmed in any order (tests/src/stack.rs).
    let geo = Geometry {
        data_bytes: 4096,
        spare_bytes: 368,
        pages_per_block: 8,
        blocks_per_plane: 16,
        planes_per_lun: 2,
        luns: 1,
        nop: 4,
        sequential_program: false,
        ecc: EccRequirement { bits: 4, codeword_bytes: 512 },
        endurance: 100_000,
    };
    let cfg = Config::with_logical_pages(&geo, 64);
    let mut emu = Emulator::new(EmulatorConfig::new(geo)).unwrap();
    let mut mem = FtlMemory::new(&geo, &cfg);
    let mut config = ReuseConfig::paper(&geo, &cfg);
    config.gc_threshold = 8;
    config.cap_blocks = config.cap_blocks.max(ReuseConfig::paper_r_blocks(&geo, &cfg) / 2);
    let codec = ftl_testkit::reuse::polar_wom_bch(&geo).expect("polar WOM code with BCH");
    let wom = WomParts { codec, buffers: ReuseBuffers::new(&geo), config, slots: false };
    let mut parts = ExtParts { wom: Some(wom), dedup: DedupParts::for_build(&geo, &cfg), ..ExtParts::none() };
    let policies = DefaultPolicies::default();
    let mut f = open(&mut emu, &mut mem, parts.extensions(), cfg, policies, true).unwrap();
    let mut want = vec![None; 64];
    // A hot working set of 24 pages overwritten again and again, every third write one of 6
    // shared contents, the others fresh; ids from 2^63 up, as the simulator's.
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    for i in 0..3000u64 {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        let l = ((x >> 33) % 24) as u32;
        let id = if i % 3 == 0 { (1 << 63) | (i / 3 % 6) } else { (1 << 63) | (1000 + i) };
        let p = content(id);
        assert!(programmed(&p) * 8 > 4096 * 8 * 5, "the content is dense unscrambled");
        f.write(l, &p).unwrap();
        want[l as usize] = Some(p);
    }
    let s = f.reuse_stats().unwrap();
    assert!(s.second_writes > 100, "{s:?}");
    let d = f.dedup_stats();
    assert!(d.deduplicated > 100, "{d:?}");
    let mut buf = vec![0u8; 4096];
    for (l, w) in want.iter().enumerate() {
        if let Some(w) = w {
            f.read(l as u32, &mut buf).unwrap();
            assert!(&buf == w, "lpn {l}");
        }
    }
    drop(f);
    let (db, sb) = (geo.data_bytes as usize, geo.spare_bytes as usize);
    let (mut data, mut spare) = (vec![0u8; db], vec![0u8; sb]);
    let mut scrambled = 0;
    for p in 0..geo.total_pages() {
        emu.read_page(PageId(p), &mut data, &mut spare).unwrap();
        let SpareState::Valid(m) = PageMeta::decode(&spare[..META_LEN]) else { continue };
        let second_write_cells = spare[sb - SW_META_LEN..].iter().any(|&b| b != 0xFF);
        if m.kind != PageKind::Data
            || second_write_cells
            || m.aux & (AUX_SCRAMBLED | AUX_FLAGS_LOST) != AUX_SCRAMBLED
        {
            continue;
        }
        scrambled += 1;
        assert!(
            2 * programmed(&data) <= 8 * db,
            "page {p} (lpn {}, aux {}): {} of {} cells programmed",
            m.tag,
            m.aux,
            programmed(&data),
            8 * db
        );
    }
    assert!(scrambled > 50, "{scrambled} scrambled pages");
}
