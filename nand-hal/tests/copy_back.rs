//! Copy-back: the ONFI driver's READ / PROGRAM FOR INTERNAL DATA MOVE against the chip model
//! (the cycles it issues, the read-out and write-back variants, the same-plane and odd-to-even
//! refusals, which half failed), the model's own copy-back rules, and the default
//! implementation: read + program, with the same result as the on-chip move, read noise
//! included.

use nand_hal::copy_back::check_copy_back;
use nand_hal::onfi::param_page::features;
use nand_hal::onfi::{cmd, BusTiming, ModelConfig, ModelError, OnfiBus, OnfiChipModel, OnfiError, OnfiNand};
use nand_hal::onfi::{ReadyLine, Wait};
use nand_hal::{
    BlockId, CopyBackAction, CopyBackCaps, CopyBackError, CopyBackOp, CopyBackRead, CopyBackRule, Error as _,
    ErrorKind, ErrorType, Geometry, NandFlash, PageId,
};

type Chip = OnfiChipModel<Vec<u8>>;

mod common;
use common::small;

fn chip_of(g: &Geometry) -> Chip {
    let cfg = ModelConfig::for_geometry(g).unwrap();
    chip_cfg(cfg)
}

fn chip_cfg(cfg: ModelConfig) -> Chip {
    let n = Chip::storage_bytes(&cfg).unwrap();
    OnfiChipModel::new(cfg, vec![0u8; n]).unwrap()
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len).map(|i| (i as u8).wrapping_mul(37).wrapping_add(seed)).collect()
}

/// The raw page (data + spare) as stored.
fn stored(c: &Chip, page: PageId) -> Vec<u8> {
    let (d, s) = c.page(page).unwrap();
    [d, s].concat()
}

/// A check that keeps the register as read.
fn as_read(_: &mut [u8], _: &mut [u8]) -> CopyBackAction {
    CopyBackAction::AS_READ
}

// ---- a bus that records the cycles ----

#[derive(Clone, Debug, PartialEq)]
enum Cycle {
    Cmd(u8),
    Addr(Vec<u8>),
    DataIn(usize),
    DataOut(usize),
}

struct Rec<'a> {
    inner: &'a mut Chip,
    log: Vec<Cycle>,
}

impl OnfiBus for Rec<'_> {
    type Error = ModelError;
    fn command(&mut self, c: u8) -> Result<(), ModelError> {
        self.log.push(Cycle::Cmd(c));
        self.inner.command(c)
    }
    fn address(&mut self, a: &[u8]) -> Result<(), ModelError> {
        self.log.push(Cycle::Addr(a.to_vec()));
        self.inner.address(a)
    }
    fn write_data(&mut self, d: &[u8]) -> Result<(), ModelError> {
        self.log.push(Cycle::DataIn(d.len()));
        self.inner.write_data(d)
    }
    fn read_data(&mut self, b: &mut [u8]) -> Result<(), ModelError> {
        self.log.push(Cycle::DataOut(b.len()));
        self.inner.read_data(b)
    }
    fn ready_line(&mut self) -> Result<ReadyLine, ModelError> {
        self.inner.ready_line()
    }
    fn delay_us(&mut self, us: u32) {
        self.inner.delay_us(us)
    }
    fn timing_modes(&self) -> u16 {
        self.inner.timing_modes()
    }
    fn set_timing(&mut self, t: &BusTiming) -> Result<(), ModelError> {
        self.inner.set_timing(t)
    }
    fn wait_ready(&mut self, timeout_us: u32) -> Result<Wait, ModelError> {
        self.inner.wait_ready(timeout_us)
    }
}

/// Column (2 cycles, LE) and row (3 cycles, LE) of the small geometry, whose row is the
/// device-wide page number (3 page bits, then the block).
fn addr(column: u16, page: PageId) -> Cycle {
    let [c0, c1] = column.to_le_bytes();
    let [r0, r1, r2, _] = page.0.to_le_bytes();
    Cycle::Addr(vec![c0, c1, r0, r1, r2])
}

/// Status polls and their bytes: READ STATUS and its one-byte output.
fn without_status(log: &[Cycle]) -> Vec<Cycle> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < log.len() {
        if log[i] == Cycle::Cmd(cmd::READ_STATUS) && log.get(i + 1) == Some(&Cycle::DataOut(1)) {
            i += 2;
            continue;
        }
        out.push(log[i].clone());
        i += 1;
    }
    out
}

#[test]
fn driver_issues_read_and_program_for_internal_data_move() {
    let g = small();
    let mut c = chip_of(&g);
    let (src, dst) = (g.page(BlockId(4), 1), g.page(BlockId(6), 3)); // both plane 0
    let (data, spare) = (pattern(512, 3), pattern(16, 9));
    let new_spare = pattern(16, 200);
    {
        let mut n = OnfiNand::new(&mut c).unwrap();
        assert_eq!(n.copy_back_caps(), CopyBackCaps { native: true, odd_to_even: true });
        n.program_page(src, &data, &spare).unwrap();
    }
    let before = *c.counters();
    let mut rec = Rec { inner: &mut c, log: Vec::new() };
    let mut n = OnfiNand::new(&mut rec).unwrap();
    n.bus_mut().log.clear();
    let (mut d, mut s) = (vec![0u8; 512], vec![0u8; 16]);
    let mut seen = None;
    let action = n
        .copy_back(
            CopyBackOp { src, dst, read: CopyBackRead::Page, data: &mut d, spare: &mut s },
            &mut |d, s| {
                seen = Some((d.to_vec(), s.to_vec()));
                s.copy_from_slice(&new_spare);
                CopyBackAction::Program { write_data: false, write_spare: true }
            },
        )
        .unwrap();
    assert_eq!(action, CopyBackAction::Program { write_data: false, write_spare: true });
    assert_eq!(seen, Some((data.clone(), spare.clone())), "the check sees the page as read");
    let log = rec.log;
    let expected = vec![
        Cycle::Cmd(cmd::READ),
        addr(0, src),
        Cycle::Cmd(cmd::READ_INTERNAL_MOVE),
        Cycle::Cmd(cmd::READ), // back to data output after the READ STATUS confirming ready
        Cycle::DataOut(512),
        Cycle::DataOut(16),
        Cycle::Cmd(cmd::PROGRAM_INTERNAL_MOVE),
        addr(512, dst), // only the spare is written back: its column
        Cycle::DataIn(16),
        Cycle::Cmd(cmd::PROGRAM_CONFIRM),
    ];
    assert_eq!(without_status(&log), expected);
    assert_eq!(stored(&c, dst), [data, new_spare].concat());
    let after = *c.counters();
    assert_eq!(after.copy_backs - before.copy_backs, 1);
    assert_eq!(after.page_reads - before.page_reads, 1 + 1, "identification reads the parameter page");
    assert_eq!(after.page_programs - before.page_programs, 1);
    assert_eq!(c.program_count(dst), Some(1));
}

#[test]
fn read_out_and_write_back_variants() {
    let g = small();
    let mut c = chip_of(&g);
    let mut n = OnfiNand::new(&mut c).unwrap();
    let (data, spare) = (pattern(512, 1), pattern(16, 2));
    let src = g.page(BlockId(3), 0);
    n.program_page(src, &data, &spare).unwrap();
    let corrected = pattern(512, 77);
    // (read-out, action, bytes out, bytes in, expected destination)
    let cases = [
        (CopyBackRead::Nothing, CopyBackAction::AS_READ, 0, 0, [&data[..], &spare[..]].concat()),
        (CopyBackRead::Spare, CopyBackAction::AS_READ, 16, 0, [&data[..], &spare[..]].concat()),
        (
            CopyBackRead::Page,
            CopyBackAction::Program { write_data: true, write_spare: false },
            528,
            512,
            [&corrected[..], &spare[..]].concat(),
        ),
        (
            CopyBackRead::Page,
            CopyBackAction::Program { write_data: true, write_spare: true },
            528,
            528,
            [&corrected[..], &[0u8; 16][..]].concat(),
        ),
    ];
    for (i, (read, action, out, inn, want)) in cases.into_iter().enumerate() {
        let dst = g.page(BlockId(5), i as u32);
        let before = *n.bus().counters();
        let (mut d, mut s) = (vec![0xEEu8; 512], vec![0xEEu8; 16]);
        let mut seen_spare = None;
        n.copy_back(CopyBackOp { src, dst, read, data: &mut d, spare: &mut s }, &mut |d, s| {
            seen_spare = Some(s.to_vec());
            if let CopyBackAction::Program { write_data, write_spare } = action {
                if write_data {
                    d.copy_from_slice(&corrected);
                }
                if write_spare {
                    s.fill(0);
                }
            }
            action
        })
        .unwrap();
        let after = *n.bus().counters();
        assert_eq!(n.bus().page(dst).unwrap(), (&want[..512], &want[512..]), "case {i}");
        // Status bytes are data output too: one after the read, two after the program.
        assert_eq!(after.bytes_out - before.bytes_out - 3, out, "case {i}: bytes out");
        assert_eq!(after.bytes_in - before.bytes_in, inn, "case {i}: bytes in");
        if read == CopyBackRead::Nothing {
            assert_eq!(seen_spare, Some(vec![0xEE; 16]), "nothing read out");
        } else {
            assert_eq!(seen_spare, Some(spare.clone()));
        }
    }
    // Abort programs nothing.
    let dst = g.page(BlockId(5), 4);
    let (mut d, mut s) = (vec![0u8; 512], vec![0u8; 16]);
    let r = n.copy_back(
        CopyBackOp { src, dst, read: CopyBackRead::Page, data: &mut d, spare: &mut s },
        &mut |_, _| CopyBackAction::Abort,
    );
    assert_eq!(r, Ok(CopyBackAction::Abort));
    assert_eq!(n.bus().program_count(dst), Some(0));
    // The target is usable afterwards.
    n.program_page(dst, &[0x42], &[]).unwrap();
}

#[test]
fn other_planes_luns_and_parities_are_refused_before_any_cycle() {
    let g = Geometry { luns: 2, ..small() };
    let mut c = chip_of(&g);
    let mut n = OnfiNand::new(&mut c).unwrap();
    let src = g.page(BlockId(2), 0);
    n.program_page(src, &[0x11; 8], &[]).unwrap();
    let other_lun = g.page(BlockId(g.blocks_per_lun() + 2), 0); // plane 0 of LUN 1
    let cases = [
        (g.page(BlockId(3), 0), CopyBackRule::NotSamePlane),
        (other_lun, CopyBackRule::NotSamePlane),
        (PageId(g.total_pages()), CopyBackRule::OutOfRange),
    ];
    for (dst, rule) in cases {
        let commands = n.bus().counters().commands;
        let (mut d, mut s) = (vec![0u8; 512], vec![0u8; 16]);
        let op = CopyBackOp { src, dst, read: CopyBackRead::Page, data: &mut d, spare: &mut s };
        let e = n.copy_back(op, &mut as_read).unwrap_err();
        assert_eq!(e, CopyBackError::Refused(rule));
        assert_eq!(
            e.kind(),
            if rule == CopyBackRule::OutOfRange { ErrorKind::OutOfRange } else { ErrorKind::Other }
        );
        assert_eq!(n.bus().counters().commands, commands, "nothing issued");
    }
    let (mut d, mut s) = (vec![0u8; 511], vec![0u8; 16]);
    let dst = g.page(BlockId(4), 0);
    let op = CopyBackOp { src, dst, read: CopyBackRead::Page, data: &mut d, spare: &mut s };
    assert_eq!(n.copy_back(op, &mut as_read).unwrap_err().kind(), ErrorKind::BufferSize);
    assert_eq!(n.bus().program_count(dst), Some(0));

    // A part without odd-to-even copy-back: same parity only.
    let mut cfg = ModelConfig::for_geometry(&small()).unwrap();
    cfg.param.features &= !features::ODD_TO_EVEN_COPYBACK;
    let mut c = chip_cfg(cfg);
    let mut n = OnfiNand::new(&mut c).unwrap();
    assert_eq!(n.copy_back_caps(), CopyBackCaps { native: true, odd_to_even: false });
    let src = g.page(BlockId(2), 1);
    n.program_page(src, &[0x22; 8], &[]).unwrap();
    let (mut d, mut s) = (vec![0u8; 512], vec![0u8; 16]);
    let op = CopyBackOp {
        src,
        dst: g.page(BlockId(4), 2),
        read: CopyBackRead::Nothing,
        data: &mut d,
        spare: &mut s,
    };
    assert_eq!(n.copy_back(op, &mut as_read), Err(CopyBackError::Refused(CopyBackRule::OddToEven)));
    let dst = g.page(BlockId(4), 3);
    let op = CopyBackOp { src, dst, read: CopyBackRead::Nothing, data: &mut d, spare: &mut s };
    n.copy_back(op, &mut as_read).unwrap();
    assert_eq!(&n.bus().page(dst).unwrap().0[..9], &[0x22, 0x22, 0x22, 0x22, 0x22, 0x22, 0x22, 0x22, 0xFF]);
    // The rule function agrees, independently of any device.
    let caps = CopyBackCaps { native: true, odd_to_even: false };
    assert_eq!(check_copy_back(&g, caps, PageId(8), PageId(24), 512, 16), Ok(()));
    assert_eq!(check_copy_back(&g, caps, PageId(8), PageId(25), 512, 16), Err(CopyBackRule::OddToEven));
    assert_eq!(check_copy_back(&g, caps, PageId(8), PageId(16), 512, 16), Err(CopyBackRule::NotSamePlane));
}

#[test]
fn the_model_enforces_the_copy_back_rules() {
    let g = small();
    let protocol = |r: Result<(), ModelError>| matches!(r, Err(ModelError::Protocol(_)));
    let mut c = chip_of(&g);
    let read_for_move = |c: &mut Chip, page: PageId| {
        c.command(cmd::READ).unwrap();
        let Cycle::Addr(a) = addr(0, page) else { unreachable!() };
        c.address(&a).unwrap();
        c.command(cmd::READ_INTERNAL_MOVE).unwrap();
        c.delay_us(100);
    };
    let program_for_move = |c: &mut Chip, page: PageId| {
        c.command(cmd::PROGRAM_INTERNAL_MOVE)?;
        let Cycle::Addr(a) = addr(0, page) else { unreachable!() };
        c.address(&a)
    };
    // 85h without a 35h read.
    assert!(protocol(program_for_move(&mut c, PageId(16))));
    // After 00h-30h (a plain read), not a copy-back read.
    c.command(cmd::READ).unwrap();
    c.address(&[0, 0, 0, 0, 0]).unwrap();
    c.command(cmd::READ_CONFIRM).unwrap();
    c.delay_us(100);
    assert!(protocol(program_for_move(&mut c, PageId(16))));
    // Another plane (block 1), then the same plane (block 2) after a new read.
    read_for_move(&mut c, PageId(0));
    assert!(protocol(program_for_move(&mut c, g.page(BlockId(1), 0))));
    read_for_move(&mut c, PageId(0));
    program_for_move(&mut c, g.page(BlockId(2), 0)).unwrap();
    c.command(cmd::PROGRAM_CONFIRM).unwrap();
    c.delay_us(1000);
    assert_eq!(c.counters().copy_backs, 1);
    // One program consumes the register.
    assert!(protocol(program_for_move(&mut c, g.page(BlockId(2), 1))));
    // An erase in between, or a RESET, replaces it too.
    read_for_move(&mut c, PageId(0));
    c.command(cmd::ERASE).unwrap();
    c.address(&[10 << 3, 0, 0]).unwrap(); // block 10
    c.command(cmd::ERASE_CONFIRM).unwrap();
    c.delay_us(1000);
    assert!(protocol(program_for_move(&mut c, g.page(BlockId(2), 1))), "erase");
    read_for_move(&mut c, PageId(0));
    c.command(cmd::RESET).unwrap();
    c.delay_us(10);
    assert!(protocol(program_for_move(&mut c, g.page(BlockId(2), 1))), "reset");
    // The destination's rules are a program's: in-order programming.
    read_for_move(&mut c, PageId(0));
    program_for_move(&mut c, g.page(BlockId(2), 3)).unwrap();
    c.command(cmd::PROGRAM_CONFIRM).unwrap();
    c.delay_us(1000);
    read_for_move(&mut c, PageId(0));
    program_for_move(&mut c, g.page(BlockId(2), 1)).unwrap();
    assert!(matches!(c.command(cmd::PROGRAM_CONFIRM), Err(ModelError::ProgramOrder { .. })));
    assert_eq!(c.program_count(g.page(BlockId(2), 1)), Some(0));
    // Without odd-to-even copy-back: same parity only.
    let mut cfg = ModelConfig::for_geometry(&g).unwrap();
    cfg.param.features &= !features::ODD_TO_EVEN_COPYBACK;
    let mut c = chip_cfg(cfg);
    read_for_move(&mut c, PageId(0));
    assert!(protocol(program_for_move(&mut c, g.page(BlockId(2), 1))));
    read_for_move(&mut c, PageId(0));
    program_for_move(&mut c, g.page(BlockId(2), 2)).unwrap();
    c.command(cmd::PROGRAM_CONFIRM).unwrap();
    // Not advertised: 35h refused.
    let mut cfg = ModelConfig::for_geometry(&g).unwrap();
    cfg.param.optional_commands &= !nand_hal::onfi::param_page::optional_commands::COPYBACK;
    let mut c = chip_cfg(cfg);
    c.command(cmd::READ).unwrap();
    c.address(&[0, 0, 0, 0, 0]).unwrap();
    assert!(protocol(c.command(cmd::READ_INTERNAL_MOVE)));
}

/// Forwards only the required methods: `copy_back` is the trait's default (read + program).
struct Plain<N>(N);

impl<N: NandFlash> ErrorType for Plain<N> {
    type Error = N::Error;
}

impl<N: NandFlash> NandFlash for Plain<N> {
    fn geometry(&self) -> Geometry {
        self.0.geometry()
    }
    fn read_page(&mut self, page: PageId, data: &mut [u8], spare: &mut [u8]) -> Result<(), Self::Error> {
        self.0.read_page(page, data, spare)
    }
    fn program_page(&mut self, page: PageId, data: &[u8], spare: &[u8]) -> Result<(), Self::Error> {
        self.0.program_page(page, data, spare)
    }
    fn erase_block(&mut self, block: BlockId) -> Result<(), Self::Error> {
        self.0.erase_block(block)
    }
    fn is_bad(&mut self, block: BlockId) -> Result<bool, Self::Error> {
        self.0.is_bad(block)
    }
    fn mark_bad(&mut self, block: BlockId) -> Result<(), Self::Error> {
        self.0.mark_bad(block)
    }
}

#[test]
fn on_chip_move_fallback_and_read_plus_program_give_the_same_page_noise_included() {
    // Three identical chips with the same read noise: 2 flips per codeword span and one in the
    // spare on every read, from the same seed. The on-chip copy-back programs its noisy
    // register, the default method programs its noisy read, and so does a read + program by
    // hand: the same destination, carrying the read's errors uncorrected.
    let g = small();
    let (src, dst) = (g.page(BlockId(6), 0), g.page(BlockId(8), 0));
    let (data, spare) = (pattern(512, 5), pattern(16, 6));
    let mut chips: Vec<Chip> = (0..3).map(|_| chip_of(&g)).collect();
    for c in chips.iter_mut() {
        let mut n = OnfiNand::new(&mut *c).unwrap();
        n.program_page(src, &data, &[0xFF, 0xFF].iter().chain(&spare[2..]).copied().collect::<Vec<_>>())
            .unwrap();
        n.bus_mut().faults_mut().read_bit_errors = 2;
        n.bus_mut().faults_mut().noise_seed = 1234;
    }
    let src_raw = stored(&chips[0], src);
    let mut results = Vec::new();
    for (i, c) in chips.iter_mut().enumerate() {
        let mut n = OnfiNand::new(&mut *c).unwrap();
        // Identification reads no page, so the noise stream is where the setup left it.
        let (mut d, mut s) = (vec![0u8; 512], vec![0u8; 16]);
        match i {
            0 => {
                let op = CopyBackOp { src, dst, read: CopyBackRead::Page, data: &mut d, spare: &mut s };
                n.copy_back(op, &mut as_read).unwrap();
            }
            1 => {
                let mut plain = Plain(&mut n);
                assert_eq!(plain.copy_back_caps(), CopyBackCaps::FALLBACK);
                let op = CopyBackOp { src, dst, read: CopyBackRead::Nothing, data: &mut d, spare: &mut s };
                plain.copy_back(op, &mut as_read).unwrap();
            }
            _ => {
                n.read_page(src, &mut d, &mut s).unwrap();
                n.program_page(dst, &d, &s).unwrap();
            }
        }
        let copies = n.bus().counters().copy_backs;
        assert_eq!(copies, u64::from(i == 0));
        results.push(stored(c, dst));
    }
    assert_eq!(results[0], results[1], "on chip = default method");
    assert_eq!(results[1], results[2], "default method = read + program");
    let flips: u32 = results[0].iter().zip(&src_raw).map(|(a, b)| (a ^ b).count_ones()).sum();
    assert_eq!(flips, 2 + 1, "the read's errors are copied, none corrected");
    assert_eq!(stored(&chips[0], src), src_raw, "the source is only read");
}

#[test]
fn a_part_without_copy_back_gets_the_fallback() {
    let g = small();
    let mut cfg = ModelConfig::for_geometry(&g).unwrap();
    cfg.param.optional_commands &= !nand_hal::onfi::param_page::optional_commands::COPYBACK;
    let mut c = chip_cfg(cfg);
    let mut n = OnfiNand::new(&mut c).unwrap();
    assert_eq!(n.copy_back_caps(), CopyBackCaps::FALLBACK);
    let (src, dst) = (g.page(BlockId(1), 0), g.page(BlockId(3), 1));
    n.program_page(src, &pattern(512, 8), &pattern(16, 9)).unwrap();
    let (mut d, mut s) = (vec![0u8; 512], vec![0u8; 16]);
    let op = CopyBackOp { src, dst, read: CopyBackRead::Nothing, data: &mut d, spare: &mut s };
    n.copy_back(op, &mut as_read).unwrap();
    assert_eq!(n.bus().counters().copy_backs, 0);
    assert_eq!(stored(n.bus(), dst), stored(n.bus(), src));
    // The fallback keeps the same-plane rule.
    let op =
        CopyBackOp { src, dst: g.page(BlockId(2), 0), read: CopyBackRead::Page, data: &mut d, spare: &mut s };
    assert_eq!(n.copy_back(op, &mut as_read), Err(CopyBackError::Refused(CopyBackRule::NotSamePlane)));
}

#[test]
fn errors_say_which_half_failed() {
    let g = small();
    let mut c = chip_of(&g);
    let mut n = OnfiNand::new(&mut c).unwrap();
    let src = g.page(BlockId(2), 0);
    n.program_page(src, &[0x33; 16], &[]).unwrap();
    let copy = |n: &mut OnfiNand<&mut Chip>, dst: PageId| {
        let (mut d, mut s) = (vec![0u8; 512], vec![0u8; 16]);
        let op = CopyBackOp { src, dst, read: CopyBackRead::Page, data: &mut d, spare: &mut s };
        n.copy_back(op, &mut as_read)
    };
    // Status FAIL on the program.
    n.bus_mut().faults_mut().fail_next_programs = 1;
    let dst = g.page(BlockId(4), 0);
    let e = copy(&mut n, dst).unwrap_err();
    assert_eq!(e, CopyBackError::Program(OnfiError::ProgramFailed(dst)));
    assert_eq!(e.kind(), ErrorKind::ProgramFailed);
    // A rule on the destination (NOP 4 reached) is the program's.
    let dst = g.page(BlockId(4), 1);
    for _ in 0..4 {
        copy(&mut n, dst).unwrap();
    }
    let e = copy(&mut n, dst).unwrap_err();
    assert_eq!(e, CopyBackError::Program(OnfiError::Bus(ModelError::NopExceeded(dst))));
    assert_eq!(e.kind(), ErrorKind::NopExceeded);
    // A target stuck busy times out in the read: the destination is untouched.
    n.reset().unwrap();
    n.bus_mut().faults_mut().stuck_busy = true;
    let dst = g.page(BlockId(4), 2);
    assert_eq!(copy(&mut n, dst), Err(CopyBackError::Read(OnfiError::Timeout)));
    assert_eq!(n.bus().program_count(dst), Some(0));
}

#[test]
fn copy_back_on_a_bus_without_ready_busy() {
    let g = small();
    let cfg = ModelConfig { ready_line: false, ..ModelConfig::for_geometry(&g).unwrap() };
    let mut c = chip_cfg(cfg);
    let mut n = OnfiNand::new(&mut c).unwrap();
    let src = g.page(BlockId(2), 0);
    let (data, spare) = (pattern(512, 40), pattern(16, 41));
    n.program_page(src, &data, &spare).unwrap();
    for (i, read) in [CopyBackRead::Nothing, CopyBackRead::Spare, CopyBackRead::Page].into_iter().enumerate()
    {
        let dst = g.page(BlockId(4), i as u32);
        let (mut d, mut s) = (vec![0u8; 512], vec![0u8; 16]);
        let op = CopyBackOp { src, dst, read, data: &mut d, spare: &mut s };
        n.copy_back(op, &mut |_, s| {
            s[15] = 0;
            CopyBackAction::Program { write_data: false, write_spare: true }
        })
        .unwrap();
        let mut want = [&data[..], &spare[..]].concat();
        if read == CopyBackRead::Nothing {
            // The spare buffer was not read out: what the caller had there is written back.
            want[512..].fill(0);
        }
        want[527] = 0;
        assert_eq!(stored(n.bus(), dst), want, "{read:?}");
    }
}
