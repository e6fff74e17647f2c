//! The ONFI driver against the ONFI chip model: identification and geometry from the parameter
//! page (with corrupted copies, majority vote, unknown signature), round trips with spare areas
//! and column changes, the chip rules surfacing with the right error kinds, status FAIL,
//! timeouts, multi-plane operations, bad-block markers, and all of it on a bus without R/B#.

use nand_hal::onfi::model::MT29F4G08ABADA_ID;
use nand_hal::onfi::param_page::{multi_plane_attributes, PARAM_PAGE_BYTES};
use nand_hal::onfi::{
    cmd, BusTiming, ModelConfig, ModelError, OnfiBus, OnfiChipModel, OnfiError, OnfiNand, ParamError,
    ParamPage, ParamSource, ReadyLine,
};
use nand_hal::{
    BlockId, EccRequirement, Error as _, ErrorKind, Geometry, NandFlash, PageId, ProgramOp, ReadOp,
};

type Chip = OnfiChipModel<Vec<u8>>;
type Nand = OnfiNand<Chip>;

mod common;
use common::small;

fn chip(cfg: ModelConfig) -> Chip {
    let n = Chip::storage_bytes(&cfg).unwrap();
    OnfiChipModel::new(cfg, vec![0u8; n]).unwrap()
}

fn small_cfg() -> ModelConfig {
    ModelConfig::for_geometry(&small()).unwrap()
}

fn nand(cfg: ModelConfig) -> Nand {
    OnfiNand::new(chip(cfg)).unwrap()
}

/// Both bus kinds: with R/B# and polling READ STATUS.
fn both(cfg: ModelConfig) -> [Nand; 2] {
    [nand(cfg), nand(ModelConfig { ready_line: false, ..cfg })]
}

fn read<N: NandFlash>(n: &mut N, page: PageId, d: usize, s: usize) -> (Vec<u8>, Vec<u8>) {
    let (mut data, mut spare) = (vec![0u8; d], vec![0u8; s]);
    n.read_page(page, &mut data, &mut spare).unwrap();
    (data, spare)
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed)).collect()
}

// ---- identification ----

#[test]
fn identifies_an_mt29f4g08abada_like_part() {
    // The real page with fewer blocks, so that the store stays small.
    let param = ParamPage { blocks_per_lun: 64, ..ParamPage::MT29F4G08ABADA };
    let n = nand(ModelConfig { param, ..ModelConfig::mt29f4g08abada() });
    let info = *n.info();
    assert_eq!(info.id, MT29F4G08ABADA_ID);
    assert_eq!(info.param_source, ParamSource::Copy(0));
    assert_eq!(info.onfi_version(), (1, 0));
    assert_eq!(info.timing_mode(), 5);
    assert!(info.multi_plane_program_erase());
    assert!(!info.multi_plane_read());
    assert_eq!(&info.param.model[..16], b"MT29F4G08ABADAWP");
    assert_eq!((info.address.column_cycles(), info.address.row_cycles()), (2, 3));
    assert_eq!(n.geometry(), Geometry { blocks_per_plane: 32, ..Geometry::MT29F4G08 });
    let t = n.timeouts();
    assert_eq!((t.read_us, t.program_us, t.erase_us), (150, 1300, 6100));
}

#[test]
fn geometry_comes_from_the_parameter_page() {
    for g in [
        small(),
        Geometry {
            luns: 2,
            planes_per_lun: 4,
            nop: 1,
            sequential_program: false,
            endurance: 3000,
            ecc: EccRequirement { bits: 8, codeword_bytes: 512 },
            ..small()
        },
        Geometry { planes_per_lun: 1, blocks_per_plane: 20, spare_bytes: 64, data_bytes: 2048, ..small() },
    ] {
        let n = nand(ModelConfig::for_geometry(&g).unwrap());
        assert_eq!(n.geometry(), g);
        assert_eq!(n.info().multi_plane_program_erase(), g.planes_per_lun > 1);
    }
}

#[test]
fn reads_the_second_or_third_copy_when_the_first_are_corrupt() {
    let mut c = chip(small_cfg());
    c.param_copy_mut(0).unwrap()[80] ^= 0x04;
    let n = OnfiNand::new(&mut c).unwrap();
    assert_eq!(n.info().param_source, ParamSource::Copy(1));
    assert_eq!(n.geometry(), small());

    c.param_copy_mut(1).unwrap()[254] ^= 0x01; // the stored CRC itself
    let n = OnfiNand::new(&mut c).unwrap();
    assert_eq!(n.info().param_source, ParamSource::Copy(2));
    assert_eq!(n.geometry(), small());
}

#[test]
fn majority_vote_recovers_three_differently_corrupted_copies() {
    let mut c = chip(small_cfg());
    c.param_copy_mut(0).unwrap()[80] ^= 0x01; // data bytes per page
    c.param_copy_mut(1).unwrap()[92] ^= 0x80; // pages per block
    c.param_copy_mut(2).unwrap()[110] ^= 0xFF; // NOP
    let n = OnfiNand::new(&mut c).unwrap();
    assert_eq!(n.info().param_source, ParamSource::MajorityVote);
    assert_eq!(n.geometry(), small());
}

#[test]
fn unrecoverable_parameter_page_is_an_error() {
    let mut c = chip(small_cfg());
    c.param_copy_mut(0).unwrap()[80] ^= 0x01;
    c.param_copy_mut(1).unwrap()[80] ^= 0x01; // the same bit wrong in two copies
    c.param_copy_mut(2).unwrap()[92] ^= 0x01;
    let e = OnfiNand::new(&mut c).unwrap_err();
    assert_eq!(e, OnfiError::ParamPage(ParamError::Crc));
    assert_eq!(e.kind(), ErrorKind::Other);
}

#[test]
fn unknown_signature_is_an_error() {
    let mut c = chip(small_cfg());
    c.faults_mut().signature = Some(*b"JEDE");
    assert_eq!(OnfiNand::new(&mut c).unwrap_err(), OnfiError::NotOnfi(*b"JEDE"));

    // READ ID answers ONFI but the page (with a valid CRC) does not.
    c.faults_mut().signature = None;
    for i in 0..3 {
        let p = c.param_copy_mut(i).unwrap();
        p[0] = b'X';
        nand_hal::onfi::param_page::seal(p);
    }
    assert_eq!(OnfiNand::new(&mut c).unwrap_err(), OnfiError::ParamPage(ParamError::Signature));
}

#[test]
fn unusable_parameter_pages_are_refused() {
    let mut c = chip(small_cfg());
    let mut p = ParamPage::parse(c.param_copy_mut(0).unwrap());
    p.ecc_bits = 0xFF;
    let raw = p.to_bytes();
    for i in 0..3 {
        *c.param_copy_mut(i).unwrap() = raw;
    }
    assert_eq!(OnfiNand::new(&mut c).unwrap_err(), OnfiError::ParamPage(ParamError::EccInExtendedPage));
}

#[test]
fn address_cycles_follow_byte_101() {
    // Two row cycles are enough for 4 + 5 row bits.
    let mut cfg = small_cfg();
    cfg.param.address_cycles = 0x22;
    let mut c = chip(cfg);
    let mut n = OnfiNand::new(&mut c).unwrap();
    assert_eq!(n.info().address.row_cycles(), 2);
    let page = small().page(BlockId(31), 7);
    n.program_page(page, &[0x12; 4], &[0x34]).unwrap();
    assert_eq!(read(&mut n, page, 4, 1), (vec![0x12; 4], vec![0x34]));
    let before = c.counters().address_cycles;
    let mut n = OnfiNand::new(&mut c).unwrap();
    n.erase_block(BlockId(31)).unwrap();
    // RESET, READ ID twice, READ PARAMETER PAGE: 3 cycles; SET and GET FEATURES of 90h (on-die
    // ECC off) and of 01h (timing mode): 4; erase: 2 row cycles.
    assert_eq!(c.counters().address_cycles - before, 3 + 4 + 2);
}

// ---- data path ----

#[test]
fn round_trips_with_spare_and_column_changes() {
    for mut n in both(small_cfg()) {
        let g = n.geometry();
        let page = g.page(BlockId(5), 0);
        let data = pattern(512, 1);
        let spare = pattern(16, 2);
        n.program_page(page, &data, &spare).unwrap();
        assert_eq!(read(&mut n, page, 512, 16), (data.clone(), spare.clone()));
        // Shorter buffers: data start, then the spare through CHANGE READ COLUMN.
        assert_eq!(read(&mut n, page, 100, 3), (data[..100].to_vec(), spare[..3].to_vec()));
        let mut s = [0u8; 16];
        n.read_spare(page, &mut s).unwrap();
        assert_eq!(&s[..], &spare[..]);
        assert_eq!(read(&mut n, page, 7, 0).0, data[..7].to_vec());
        // Program a short data buffer and a spare (CHANGE WRITE COLUMN).
        let next = g.page(BlockId(5), 1);
        n.program_page(next, &[0xA5; 10], &[0x11, 0x22]).unwrap();
        let (d, s) = read(&mut n, next, 512, 16);
        assert_eq!(&d[..10], &[0xA5; 10]);
        assert!(d[10..].iter().all(|&b| b == 0xFF));
        assert_eq!(&s[..2], &[0x11, 0x22]);
        assert!(s[2..].iter().all(|&b| b == 0xFF));
        // Spare only.
        let third = g.page(BlockId(5), 2);
        n.program_page(third, &[], &[0x00; 4]).unwrap();
        assert_eq!(read(&mut n, third, 4, 5), (vec![0xFF; 4], vec![0, 0, 0, 0, 0xFF]));
        // Erase.
        n.erase_block(BlockId(5)).unwrap();
        assert_eq!(read(&mut n, page, 512, 16), (vec![0xFF; 512], vec![0xFF; 16]));
        let chip = n.release();
        assert_eq!(chip.program_count(page), Some(0));
    }
}

#[test]
fn empty_reads_are_array_reads_and_leave_the_target_usable() {
    for mut n in both(small_cfg()) {
        let before = n.bus().counters().page_reads;
        n.read_page(PageId(9), &mut [], &mut []).unwrap();
        assert_eq!(n.bus().counters().page_reads - before, 1);
        n.program_page(PageId(9), &[0x01], &[]).unwrap();
        n.read_page(PageId(9), &mut [], &mut []).unwrap();
        n.erase_block(BlockId(1)).unwrap();
        assert_eq!(read(&mut n, PageId(9), 1, 0).0, vec![0xFF]);
    }
}

#[test]
fn spare_read_uses_change_read_column() {
    let mut c = chip(small_cfg());
    let mut n = OnfiNand::new(&mut c).unwrap();
    let page = PageId(3);
    n.program_page(page, &[0x01; 8], &[0x02; 2]).unwrap();
    let before = *n.bus().counters();
    let (mut d, mut s) = ([0u8; 8], [0u8; 2]);
    n.read_page(page, &mut d, &mut s).unwrap();
    let after = *n.bus().counters();
    // 00h, 30h, READ STATUS (70h) confirming ready, 00h back to data output, 05h, E0h; 5
    // address cycles, then 2 column cycles.
    assert_eq!(after.commands - before.commands, 6);
    assert_eq!(after.address_cycles - before.address_cycles, 7);
    assert_eq!(after.page_reads - before.page_reads, 1);
    assert_eq!((d, s), ([0x01; 8], [0x02; 2]));
}

#[test]
fn programs_and_the_chip_rules() {
    for mut n in both(small_cfg()) {
        let g = n.geometry();
        let b = BlockId(2);
        let p0 = g.page(b, 0);
        // AND semantics, bytes not supplied untouched.
        n.program_page(p0, &[0xF0; 4], &[0x0F]).unwrap();
        n.program_page(p0, &[0x3C; 2], &[]).unwrap();
        assert_eq!(read(&mut n, p0, 5, 2), (vec![0x30, 0x30, 0xF0, 0xF0, 0xFF], vec![0x0F, 0xFF]));
        // NOP 4: two more programs, then refused with nothing changed.
        n.program_page(p0, &[0xFF], &[]).unwrap();
        n.program_page(p0, &[0xFF], &[]).unwrap();
        let e = n.program_page(p0, &[0x00], &[]).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::NopExceeded);
        assert_eq!(e, OnfiError::Bus(ModelError::NopExceeded(p0)));
        assert_eq!(read(&mut n, p0, 1, 0).0, vec![0x30]);
        // In-order programming: skipping forward is allowed, going back is not.
        n.program_page(g.page(b, 3), &[0x00], &[]).unwrap();
        let e = n.program_page(g.page(b, 1), &[0x00], &[]).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::ProgramOrder);
        assert_eq!(read(&mut n, g.page(b, 1), 1, 0).0, vec![0xFF]);
        n.program_page(g.page(b, 3), &[0x00], &[0x00]).unwrap();
        // The chip is still usable after a refused program.
        n.erase_block(b).unwrap();
        n.program_page(g.page(b, 1), &[0x00], &[]).unwrap();
    }
}

#[test]
fn nop_one_and_strict_set_bits() {
    let g = Geometry { nop: 1, ..small() };
    let mut cfg = ModelConfig::for_geometry(&g).unwrap();
    cfg.reject_set_bits = true;
    let mut n = nand(cfg);
    let p = PageId(0);
    n.program_page(p, &[0x0F], &[]).unwrap();
    assert_eq!(n.program_page(p, &[0x0F], &[]).unwrap_err().kind(), ErrorKind::NopExceeded);
    let g2 = Geometry { nop: 4, ..small() };
    let mut cfg = ModelConfig::for_geometry(&g2).unwrap();
    cfg.reject_set_bits = true;
    let mut n = nand(cfg);
    n.program_page(p, &[0x0F], &[]).unwrap();
    let e = n.program_page(p, &[0xF0], &[]).unwrap_err();
    assert_eq!(e, OnfiError::Bus(ModelError::SetBits(p)));
    assert_eq!(e.kind(), ErrorKind::ProgramFailed);
    n.program_page(p, &[0x0E], &[]).unwrap();
}

#[test]
fn argument_errors_issue_nothing() {
    let mut c = chip(small_cfg());
    let mut n = OnfiNand::new(&mut c).unwrap();
    let g = n.geometry();
    let before = n.bus().counters().commands;
    let past = PageId(g.total_pages());
    assert_eq!(n.read_page(past, &mut [0u8; 1], &mut []).unwrap_err().kind(), ErrorKind::OutOfRange);
    assert_eq!(n.erase_block(BlockId(g.total_blocks())).unwrap_err().kind(), ErrorKind::OutOfRange);
    assert_eq!(n.is_bad(BlockId(g.total_blocks())).unwrap_err().kind(), ErrorKind::OutOfRange);
    let e = n.program_page(PageId(0), &[0u8; 513], &[]).unwrap_err();
    assert_eq!(e, OnfiError::DataTooLong { len: 513, max: 512 });
    let e = n.read_page(PageId(0), &mut [], &mut [0u8; 17]).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::BufferSize);
    assert_eq!(n.bus().counters().commands, before);
}

// ---- status, timeouts ----

#[test]
fn status_fail_maps_to_program_and_erase_failed() {
    for mut n in both(small_cfg()) {
        let g = n.geometry();
        let p = g.page(BlockId(4), 0);
        n.bus_mut().faults_mut().fail_next_programs = 1;
        let e = n.program_page(p, &[0x00; 8], &[]).unwrap_err();
        assert_eq!(e, OnfiError::ProgramFailed(p));
        assert_eq!(e.kind(), ErrorKind::ProgramFailed);
        // Torn: only every other byte took the program.
        assert_eq!(read(&mut n, p, 4, 0).0, vec![0x00, 0xFF, 0x00, 0xFF]);
        n.program_page(g.page(BlockId(4), 1), &[0x00], &[]).unwrap();

        n.bus_mut().faults_mut().fail_next_erases = 1;
        let e = n.erase_block(BlockId(4)).unwrap_err();
        assert_eq!(e, OnfiError::EraseFailed(BlockId(4)));
        assert_eq!(e.kind(), ErrorKind::EraseFailed);
        n.erase_block(BlockId(4)).unwrap();

        n.bus_mut().set_block_faults(BlockId(6), true, true).unwrap();
        assert_eq!(
            n.program_page(g.page(BlockId(6), 0), &[0], &[]).unwrap_err(),
            OnfiError::ProgramFailed(g.page(BlockId(6), 0))
        );
        assert_eq!(n.erase_block(BlockId(6)).unwrap_err().kind(), ErrorKind::EraseFailed);
        n.bus_mut().set_block_faults(BlockId(6), false, false).unwrap();
        n.erase_block(BlockId(6)).unwrap();
        assert_eq!(n.bus().counters().program_failures, 2);
    }
}

#[test]
fn write_protect_is_reported() {
    let mut n = nand(small_cfg());
    n.bus_mut().faults_mut().write_protect = true;
    assert_eq!(n.program_page(PageId(0), &[0], &[]).unwrap_err(), OnfiError::WriteProtected);
    assert_eq!(n.erase_block(BlockId(0)).unwrap_err(), OnfiError::WriteProtected);
    n.bus_mut().faults_mut().write_protect = false;
    assert_eq!(read(&mut n, PageId(0), 1, 0).0, vec![0xFF]);
}

#[test]
fn a_stuck_target_times_out() {
    for mut n in both(small_cfg()) {
        let t0 = n.bus().elapsed_us();
        n.bus_mut().faults_mut().stuck_busy = true;
        let e = n.erase_block(BlockId(1)).unwrap_err();
        assert_eq!(e, OnfiError::Timeout);
        assert_eq!(e.kind(), ErrorKind::Timeout);
        // The driver waited about its erase timeout, in the model's virtual time.
        let waited = n.bus().elapsed_us() - t0;
        let limit = n.timeouts().erase_us as u64;
        assert!(waited >= limit && waited <= limit + 10, "waited {waited} us, limit {limit}");
        // Still stuck: reads time out too; the target refuses commands while busy.
        assert_eq!(n.read_page(PageId(0), &mut [0u8; 1], &mut []).unwrap_err().kind(), ErrorKind::Other);
        assert_eq!(n.reset().unwrap_err(), OnfiError::Timeout);
        n.bus_mut().faults_mut().stuck_busy = false;
        n.reset().unwrap();
        n.program_page(PageId(0), &[0x42], &[]).unwrap();
        assert_eq!(read(&mut n, PageId(0), 1, 0).0, vec![0x42]);
    }
}

#[test]
fn an_operation_slower_than_its_timeout_times_out() {
    let mut cfg = small_cfg();
    cfg.timing.t_bers_us = 20_000; // the page promises 3 ms at most
    let mut n = nand(cfg);
    assert_eq!(n.erase_block(BlockId(0)).unwrap_err(), OnfiError::Timeout);
    n.bus_mut().delay_us(20_000);
    n.erase_block(BlockId(1)).unwrap_err();
    n.set_timeouts(nand_hal::onfi::Timeouts { erase_us: 30_000, ..n.timeouts() });
    n.bus_mut().delay_us(20_000);
    n.erase_block(BlockId(1)).unwrap();
}

#[test]
fn identification_times_out_on_a_stuck_target() {
    let mut c = chip(small_cfg());
    c.faults_mut().stuck_busy = true;
    assert_eq!(OnfiNand::new(&mut c).unwrap_err(), OnfiError::Timeout);
    let mut c = chip(ModelConfig { ready_line: false, ..small_cfg() });
    c.faults_mut().stuck_busy = true;
    assert_eq!(OnfiNand::new(&mut c).unwrap_err(), OnfiError::Timeout);
}

// ---- bad blocks ----

#[test]
fn factory_and_grown_bad_blocks() {
    for mut n in both(small_cfg()) {
        let g = n.geometry();
        n.bus_mut().mark_factory_bad(BlockId(7)).unwrap();
        for b in 0..g.total_blocks() {
            assert_eq!(n.is_bad(BlockId(b)).unwrap(), b == 7, "block {b}");
        }
        assert_eq!(
            n.program_page(g.page(BlockId(7), 2), &[0], &[]).unwrap_err().kind(),
            ErrorKind::ProgramFailed
        );
        assert_eq!(n.erase_block(BlockId(7)).unwrap_err().kind(), ErrorKind::EraseFailed);
        assert!(n.is_bad(BlockId(7)).unwrap());

        // A grown bad block with pages programmed past the marker pages.
        let b = BlockId(9);
        for i in 0..5 {
            n.program_page(g.page(b, i), &[0x00; 4], &[0xFF, 0xAB]).unwrap();
        }
        assert!(!n.is_bad(b).unwrap());
        n.mark_bad(b).unwrap();
        assert!(n.is_bad(b).unwrap());
        // Marking a factory-bad block keeps it bad.
        n.mark_bad(BlockId(7)).unwrap();
    }
}

#[test]
fn mark_bad_on_a_failing_block() {
    let mut n = nand(small_cfg());
    n.bus_mut().set_block_faults(BlockId(3), true, true).unwrap();
    n.mark_bad(BlockId(3)).unwrap();
    assert!(n.is_bad(BlockId(3)).unwrap());
    n.bus_mut().faults_mut().write_protect = true;
    assert_eq!(n.mark_bad(BlockId(4)).unwrap_err(), OnfiError::WriteProtected);
}

// ---- multi-plane ----

#[test]
fn multi_plane_program_read_erase() {
    for mut n in both(small_cfg()) {
        let g = n.geometry();
        assert!(n.info().multi_plane_read() && n.info().multi_plane_program_erase());
        let (b0, b1) = (BlockId(10), BlockId(13)); // planes 0 and 1, different block indices
        let (p0, p1) = (g.page(b0, 0), g.page(b1, 0));
        let (d0, d1) = (pattern(512, 3), pattern(300, 4));
        let before = n.bus().counters().multi_plane_ops;
        n.program_multi(&[
            ProgramOp { page: p1, data: &d1, spare: &[0x01, 0x02] },
            ProgramOp { page: p0, data: &d0, spare: &[0x03] },
        ])
        .unwrap();
        let (mut r0, mut r1, mut s0, mut s1) = (vec![0u8; 512], vec![0u8; 300], [0u8; 2], [0u8; 3]);
        n.read_multi(&mut [
            ReadOp { page: p0, data: &mut r0, spare: &mut s0 },
            ReadOp { page: p1, data: &mut r1, spare: &mut s1 },
        ])
        .unwrap();
        assert_eq!((r0, s0), (d0, [0x03, 0xFF]));
        assert_eq!((r1, s1), (d1, [0x01, 0x02, 0xFF]));
        // Spare-only multi-plane read.
        let (mut t0, mut t1) = ([0u8; 1], [0u8; 1]);
        n.read_multi(&mut [
            ReadOp { page: p0, data: &mut [], spare: &mut t0 },
            ReadOp { page: p1, data: &mut [], spare: &mut t1 },
        ])
        .unwrap();
        assert_eq!((t0, t1), ([0x03], [0x01]));
        n.erase_multi(&[b0, b1]).unwrap();
        assert_eq!(read(&mut n, p0, 4, 1), (vec![0xFF; 4], vec![0xFF]));
        assert_eq!(read(&mut n, p1, 4, 1), (vec![0xFF; 4], vec![0xFF]));
        assert_eq!(n.bus().counters().multi_plane_ops - before, 4);
        // One operation is a plain single-plane one.
        n.erase_multi(&[b0]).unwrap();
        assert_eq!(n.bus().counters().multi_plane_ops - before, 4);
    }
}

#[test]
fn multi_plane_failures_are_attributed_to_their_plane() {
    for mut n in both(small_cfg()) {
        let g = n.geometry();
        let (b0, b1) = (BlockId(0), BlockId(1));
        n.bus_mut().set_block_faults(b1, true, true).unwrap();
        let ops = [
            ProgramOp { page: g.page(b0, 0), data: &[0x00], spare: &[] },
            ProgramOp { page: g.page(b1, 0), data: &[0x00], spare: &[] },
        ];
        let (i, e) = n.program_multi(&ops).unwrap_err();
        assert_eq!((i, e), (1, OnfiError::ProgramFailed(g.page(b1, 0))));
        assert_eq!(read(&mut n, g.page(b0, 0), 1, 0).0, vec![0x00]);
        let (i, e) = n.erase_multi(&[b1, b0]).unwrap_err();
        assert_eq!((i, e), (0, OnfiError::EraseFailed(b1)));
        // Rule violations refuse the whole multi-plane program.
        n.bus_mut().set_block_faults(b1, false, false).unwrap();
        n.erase_multi(&[b0, b1]).unwrap();
        n.program_page(g.page(b1, 2), &[0x00], &[]).unwrap();
        let ops = [
            ProgramOp { page: g.page(b0, 1), data: &[0x00], spare: &[] },
            ProgramOp { page: g.page(b1, 1), data: &[0x00], spare: &[] },
        ];
        let (i, e) = n.program_multi(&ops).unwrap_err();
        assert_eq!((i, e.kind()), (0, ErrorKind::ProgramOrder));
        assert_eq!(n.bus().program_count(g.page(b0, 1)), Some(0));
    }
}

#[test]
fn multi_plane_shape_rules() {
    let mut c = chip(small_cfg());
    let mut n = OnfiNand::new(&mut c).unwrap();
    let g = n.geometry();
    let before = n.bus().counters().commands;
    let op = |b: u32, i: u32| ProgramOp { page: g.page(BlockId(b), i), data: &[0u8], spare: &[] };
    let (i, e) = n.program_multi(&[op(0, 0), op(2, 0)]).unwrap_err();
    assert_eq!((i, e), (0, OnfiError::MultiPlane("two operations on one plane")));
    let (_, e) = n.program_multi(&[op(0, 0), op(1, 1)]).unwrap_err();
    assert_eq!(e, OnfiError::MultiPlane("operations at different page offsets"));
    let (_, e) = n.program_multi(&[op(0, 0), op(1, 0), op(3, 0)]).unwrap_err();
    assert_eq!(e, OnfiError::MultiPlane("more operations than planes per LUN"));
    assert_eq!(e.kind(), ErrorKind::Other);
    let (i, e) = n.program_multi(&[op(0, 0), op(999, 0)]).unwrap_err();
    assert_eq!((i, e.kind()), (1, ErrorKind::OutOfRange));
    assert_eq!(n.bus().counters().commands, before);
    assert!(n.erase_multi(&[]).is_ok());
}

#[test]
fn multi_plane_falls_back_when_not_advertised_or_restricted() {
    // The MT29F4G08ABADA page has no multi-plane read: reads go one after another.
    let param = ParamPage { blocks_per_lun: 16, ..ParamPage::MT29F4G08ABADA };
    let mut n = nand(ModelConfig { param, ..ModelConfig::mt29f4g08abada() });
    let g = n.geometry();
    let (p0, p1) = (g.page(BlockId(2), 0), g.page(BlockId(5), 0));
    n.program_multi(&[
        ProgramOp { page: p0, data: &[1], spare: &[] },
        ProgramOp { page: p1, data: &[2], spare: &[] },
    ])
    .unwrap();
    assert_eq!(n.bus().counters().multi_plane_ops, 1);
    let (mut a, mut b) = ([0u8], [0u8]);
    n.read_multi(&mut [
        ReadOp { page: p0, data: &mut a, spare: &mut [] },
        ReadOp { page: p1, data: &mut b, spare: &mut [] },
    ])
    .unwrap();
    assert_eq!((a, b), ([1], [2]));
    assert_eq!(n.bus().counters().multi_plane_ops, 1);

    // A part restricting block addresses: blocks 2 and 5 have different indices in their planes.
    let mut cfg = small_cfg();
    cfg.param.multi_plane_attributes &= !multi_plane_attributes::NO_BLOCK_RESTRICTIONS;
    let mut n = nand(cfg);
    n.erase_multi(&[BlockId(2), BlockId(5)]).unwrap();
    assert_eq!(n.bus().counters().multi_plane_ops, 0);
    n.erase_multi(&[BlockId(4), BlockId(5)]).unwrap();
    assert_eq!(n.bus().counters().multi_plane_ops, 1);
}

#[test]
fn multi_lun_parts() {
    let g = Geometry { luns: 2, ..small() };
    for mut n in both(ModelConfig::for_geometry(&g).unwrap()) {
        let last = BlockId(g.total_blocks() - 1);
        let p = g.page(last, 0);
        n.program_page(p, &[0x77; 3], &[0x66]).unwrap();
        assert_eq!(read(&mut n, p, 3, 1), (vec![0x77; 3], vec![0x66]));
        // The same offset in LUN 0 is untouched.
        assert_eq!(read(&mut n, g.page(BlockId(last.0 - g.blocks_per_lun()), 0), 1, 0).0, vec![0xFF]);
        let (_, e) = n.erase_multi(&[BlockId(0), BlockId(g.blocks_per_lun() + 1)]).unwrap_err();
        assert_eq!(e, OnfiError::MultiPlane("operations on different LUNs"));
    }
}

// ---- the model's protocol checks ----

#[test]
fn the_model_enforces_the_protocol() {
    let mut c = chip(small_cfg());
    let protocol = |r: Result<(), ModelError>| matches!(r, Err(ModelError::Protocol(_)));
    assert!(protocol(c.command(0x42)));
    assert!(protocol(c.write_data(&[0])));
    assert!(protocol(c.read_data(&mut [0])));
    assert!(protocol(c.address(&[0])));
    // Busy after RESET: only status and reset commands.
    c.command(cmd::RESET).unwrap();
    assert!(c.is_busy());
    assert!(protocol(c.command(cmd::READ_ID)));
    c.command(cmd::READ_STATUS).unwrap();
    let mut s = [0u8];
    c.read_data(&mut s).unwrap();
    assert_eq!(s[0] & 0x40, 0);
    c.delay_us(10);
    c.read_data(&mut s).unwrap();
    assert_eq!(s[0], 0xE0);
    // Exact address cycle counts.
    c.command(cmd::ERASE).unwrap();
    c.address(&[0, 0]).unwrap();
    assert!(protocol(c.command(cmd::ERASE_CONFIRM)));
    c.command(cmd::ERASE).unwrap();
    assert!(protocol(c.address(&[0, 0, 0, 0])));
    // Reading past the raw page.
    c.command(cmd::READ).unwrap();
    c.address(&[0x00, 0x02, 0, 0, 0]).unwrap();
    c.command(cmd::READ_CONFIRM).unwrap();
    c.delay_us(100);
    let mut buf = [0u8; 17];
    assert!(protocol(c.read_data(&mut buf)));
    // A row outside the part.
    c.command(cmd::ERASE).unwrap();
    assert_eq!(c.address(&[0, 0, 1]), Ok(()));
    assert_eq!(c.command(cmd::ERASE_CONFIRM), Err(ModelError::AddressOutOfRange));
    // Undersized store.
    let cfg = small_cfg();
    let need = Chip::storage_bytes(&cfg).unwrap();
    assert_eq!(
        OnfiChipModel::new(cfg, vec![0u8; need - 1]).unwrap_err(),
        ModelError::StorageTooSmall { needed: need, got: need - 1 }
    );
    // Parameter page copies repeat after the third.
    let mut c = chip(small_cfg());
    c.command(cmd::READ_PARAMETER_PAGE).unwrap();
    c.address(&[0]).unwrap();
    c.delay_us(25);
    let mut pages = vec![0u8; 4 * PARAM_PAGE_BYTES];
    c.read_data(&mut pages).unwrap();
    assert!(pages.chunks(PARAM_PAGE_BYTES).all(|p| p == &pages[..PARAM_PAGE_BYTES]));
}

#[test]
fn virtual_time_follows_the_operations() {
    let mut n = nand(small_cfg());
    let t0 = n.bus().elapsed_us();
    n.erase_block(BlockId(0)).unwrap();
    n.program_page(PageId(0), &[0], &[]).unwrap();
    let _ = read(&mut n, PageId(0), 1, 0);
    assert_eq!(n.bus().elapsed_us() - t0, 700 + 200 + 25);
}

#[test]
fn read_noise_flips_k_bits_per_codeword_and_one_in_the_spare_without_touching_the_array() {
    let geo = small();
    let mut n = nand(small_cfg());
    let page = geo.page(BlockId(3), 0);
    let (data, spare) = (pattern(512, 7), vec![0xFFu8; 16]);
    n.program_page(page, &data, &spare).unwrap();
    for k in [1u8, 3] {
        n.bus_mut().faults_mut().read_bit_errors = k;
        n.bus_mut().faults_mut().noise_seed = 99;
        let mut seen = Vec::new();
        for _ in 0..4 {
            let (d, s) = read(&mut n, page, 512, 16);
            let dflips: u32 = d.iter().zip(&data).map(|(a, b)| (a ^ b).count_ones()).sum();
            let sflips: u32 = s.iter().zip(&spare).map(|(a, b)| (a ^ b).count_ones()).sum();
            assert_eq!(dflips, k as u32, "one 512-byte codeword span: k distinct flips");
            assert_eq!(sflips, 1);
            assert_eq!(&s[..2], &[0xFF, 0xFF], "bad-block marks never flipped");
            seen.push(d);
        }
        // Transient and varying: the array is unchanged and the reads differ.
        assert_eq!(n.bus().page(page).unwrap().0, &data[..]);
        assert!(seen.windows(2).any(|w| w[0] != w[1]));
    }
    n.bus_mut().faults_mut().read_bit_errors = 0;
    assert_eq!(read(&mut n, page, 512, 16).0, data);
}

// ---- bus hardening: R/B# late, features, timing mode ----

/// A bus over the chip model whose R/B# reads ready for the first `late` samples after every
/// command (a line sampled before it fell: tWB, or a posted write), and which records the timing
/// the driver gives it and advertises `modes`.
struct Wrap<B> {
    inner: B,
    late: u32,
    since_cmd: u32,
    lies: u32,
    modes: u16,
    timing: Option<BusTiming>,
}

impl<B> Wrap<B> {
    fn new(inner: B, late: u32, modes: u16) -> Self {
        Wrap { inner, late, since_cmd: 0, lies: 0, modes, timing: None }
    }
}

impl<S: AsRef<[u8]> + AsMut<[u8]>> OnfiBus for Wrap<OnfiChipModel<S>> {
    type Error = ModelError;
    fn command(&mut self, c: u8) -> Result<(), ModelError> {
        self.since_cmd = 0;
        self.inner.command(c)
    }
    fn address(&mut self, a: &[u8]) -> Result<(), ModelError> {
        self.inner.address(a)
    }
    fn write_data(&mut self, d: &[u8]) -> Result<(), ModelError> {
        self.inner.write_data(d)
    }
    fn read_data(&mut self, b: &mut [u8]) -> Result<(), ModelError> {
        self.inner.read_data(b)
    }
    fn ready_line(&mut self) -> Result<ReadyLine, ModelError> {
        self.since_cmd += 1;
        if self.since_cmd <= self.late {
            if self.inner.is_busy() {
                self.lies += 1;
            }
            return Ok(ReadyLine::Ready);
        }
        self.inner.ready_line()
    }
    fn delay_us(&mut self, us: u32) {
        self.inner.delay_us(us)
    }
    fn timing_modes(&self) -> u16 {
        self.modes
    }
    fn set_timing(&mut self, t: &BusTiming) -> Result<(), ModelError> {
        self.timing = Some(*t);
        Ok(())
    }
}

fn exercise<N: NandFlash>(n: &mut N) {
    let g = n.geometry();
    let page = g.page(BlockId(4), 0);
    let (data, spare) = (pattern(512, 9), pattern(16, 3));
    n.program_page(page, &data, &spare).unwrap();
    assert_eq!(read(n, page, 512, 16), (data, spare));
    n.erase_block(BlockId(4)).unwrap();
    assert_eq!(read(n, page, 512, 16), (vec![0xFF; 512], vec![0xFF; 16]));
}

#[test]
fn rb_going_busy_late_is_waited_for_and_confirmed_by_status() {
    // 1: R/B# falls within the driver's busy-edge window; 1000: it never does in time, and the
    // status confirmation holds the driver back until the operation is really over.
    for late in [1u32, 1000] {
        let mut n = OnfiNand::new(Wrap::new(chip(small_cfg()), late, 1)).unwrap();
        exercise(&mut n);
        let bus = n.release();
        assert!(bus.lies > 0, "the bus did report ready while the chip was busy (late {late})");
    }
}

#[test]
fn on_die_ecc_is_switched_off_and_verified() {
    let cfg = ModelConfig { on_die_ecc: true, ..small_cfg() };
    let mut n = nand(cfg);
    assert!(n.info().on_die_ecc_off);
    assert_eq!(n.get_features(0x90).unwrap()[0] & 0x08, 0);
    exercise(&mut n);
    // Left on, the chip's parity lands in spare bytes 8..16: what the driver prevents.
    n.set_features(0x90, [0x08, 0, 0, 0]).unwrap();
    let page = small().page(BlockId(6), 0);
    let spare = pattern(16, 5);
    n.program_page(page, &pattern(512, 1), &spare).unwrap();
    let (_, s) = read(&mut n, page, 512, 16);
    assert_eq!(&s[..8], &spare[..8]);
    assert_ne!(&s[8..], &spare[8..]);
    // A part that ignores SET FEATURES is refused rather than run with its ECC on.
    let mut c = chip(cfg);
    c.faults_mut().ignore_set_features = true;
    assert_eq!(OnfiNand::new(&mut c).unwrap_err(), OnfiError::Feature { addr: 0x90, wrote: 0, read: 0x08 });
}

#[test]
fn timing_mode_is_the_fastest_both_support_set_and_read_back() {
    // The part supports modes 0-5, the bus 0-3: mode 3.
    let mut n = OnfiNand::new(Wrap::new(chip(small_cfg()), 0, 0x0F)).unwrap();
    assert_eq!(n.info().interface.mode, 3);
    assert_eq!(n.get_features(0x01).unwrap()[0], 3);
    assert_eq!(n.bus().timing, Some(BusTiming::for_mode(3, small_cfg().param.t_ccs_ns)));
    exercise(&mut n);
    // The part supports modes 0-1 only: mode 1; tCCS from its page.
    let mut cfg = small_cfg();
    cfg.param.async_timing_modes = 0x03;
    cfg.param.t_ccs_ns = 300;
    let n = OnfiNand::new(Wrap::new(chip(cfg), 0, 0x3F)).unwrap();
    assert_eq!(n.info().interface.mode, 1);
    assert_eq!(n.bus().timing.map(|t| (t.mode, t.t_ccs, t.t_wc)), Some((1, 300, 45)));
    // Mode 0 on a bus that only has mode 0, even if the part could go faster.
    let n = OnfiNand::new(Wrap::new(chip(small_cfg()), 0, 1)).unwrap();
    assert_eq!(n.info().interface, BusTiming::for_mode(0, small_cfg().param.t_ccs_ns));
}
