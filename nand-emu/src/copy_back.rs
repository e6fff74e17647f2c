//! Copy-back: [`nand_hal::NandFlash::copy_back`] with a real chip's rules.
//!
//! With [`super::EmulatorConfig::copy_back`] `native` (the default) the emulator runs the move
//! itself, through a page register; otherwise the trait's read + program fallback. Guarantees:
//!
//! - The pair rules of [`nand_hal::copy_back`] (same plane of one LUN; same page parity unless
//!   `odd_to_even`; page-sized buffers) are checked first; a refusal is not issued (no op index,
//!   no time, no counter), like the other argument errors.
//! - The move is two device operations, each with its own power-cut index
//!   ([`super::Emulator::ops_issued`]): the read for internal data move, then the program. A cut
//!   on the read changes nothing ([`CopyBackError::Read`]); a cut on the program tears the
//!   destination as any interrupted program does and counts against its NOP and order
//!   ([`CopyBackError::Program`]). The source is only read.
//! - Counters and time: one read (tR, transfer out of what [`CopyBackRead`] names) and one
//!   program (transfer in of the buffers written back, tPROG), plus `copy_backs`.
//! - Raw bit errors: the read into the register draws the source's raw bit errors like any read
//!   (`faults.rs`: wear, retention, read disturb), over the whole page; the program writes the
//!   register, errors included, into the destination, where they are now stored. Later reads
//!   add their own errors on top. Only a check that writes corrected data back
//!   (`write_data`) stops them; this is why the FTL must check every copy (the module doc of
//!   [`nand_hal::copy_back`]).
//! - The destination's rules are a program's: NOP, program order, factory-bad and injected or
//!   wear-driven failures (status FAIL), `reject_set_bits`.
//! - Metadata-only mode: data areas outside the stored blocks read as 0xFF into the register and
//!   are not stored at the destination, as for reads and programs.

use nand_hal::copy_back::copy_back_fallback;
use nand_hal::{CopyBackAction, CopyBackCaps, CopyBackError, CopyBackOp, CopyBackRead};

use super::{EmuError, Emulator};

/// The copy-back of a chip that has it (ONFI COPYBACK with odd-to-even pages, as the
/// MT29F4G08ABADA's parameter page says).
pub const NATIVE_COPY_BACK: CopyBackCaps = CopyBackCaps { native: true, odd_to_even: true };

impl Emulator {
    /// [`nand_hal::NandFlash::copy_back`] (see the module documentation).
    pub(super) fn copy_back_op(
        &mut self,
        op: CopyBackOp<'_>,
        check: &mut dyn FnMut(&mut [u8], &mut [u8]) -> CopyBackAction,
    ) -> Result<CopyBackAction, CopyBackError<EmuError>> {
        let caps = self.config.copy_back;
        if !caps.native {
            return copy_back_fallback(self, caps, op, check);
        }
        op.check(&self.geo, caps).map_err(CopyBackError::Refused)?;
        let mut register = std::mem::take(&mut self.register);
        register.resize(self.data_bytes + self.spare_bytes, 0xFF);
        let result = self.copy_back_exec(op, check, &mut register);
        self.register = register;
        result
    }

    fn copy_back_exec(
        &mut self,
        op: CopyBackOp<'_>,
        check: &mut dyn FnMut(&mut [u8], &mut [u8]) -> CopyBackAction,
        register: &mut [u8],
    ) -> Result<CopyBackAction, CopyBackError<EmuError>> {
        let (lun, plane) = self.lun_plane(op.src.0 / self.geo.pages_per_block);
        let (reg_data, reg_spare) = register.split_at_mut(self.data_bytes);
        // Read for internal data move: the whole page into the register, raw bit errors included.
        let interrupted = self.begin_op().map_err(CopyBackError::Read)?;
        self.read_exec(op.src, reg_data, reg_spare, interrupted).map_err(CopyBackError::Read)?;
        let out = match op.read {
            CopyBackRead::Nothing => 0,
            CopyBackRead::Spare => {
                op.spare.copy_from_slice(reg_spare);
                self.spare_bytes
            }
            CopyBackRead::Page => {
                op.data.copy_from_slice(reg_data);
                op.spare.copy_from_slice(reg_spare);
                self.data_bytes + self.spare_bytes
            }
        };
        // `read_exec` counted the whole page out; only `out` bytes crossed the bus.
        self.counters.bytes_out -= (self.data_bytes + self.spare_bytes - out) as u64;
        self.timing.read(lun, &[(plane, out as u64)]);

        let action = check(op.data, op.spare);
        let CopyBackAction::Program { write_data, write_spare } = action else {
            return Ok(action);
        };
        let mut bytes_in = 0;
        if write_data {
            reg_data.copy_from_slice(op.data);
            bytes_in += self.data_bytes;
        }
        if write_spare {
            reg_spare.copy_from_slice(op.spare);
            bytes_in += self.spare_bytes;
        }
        // Program for internal data move: the register into the destination.
        let interrupted = self.begin_op().map_err(CopyBackError::Program)?;
        let (result, reached) = self.program_exec(op.dst, reg_data, reg_spare, interrupted);
        if reached {
            // `program_exec` counted the whole page in; only `bytes_in` crossed the bus.
            self.counters.bytes_in -= (self.data_bytes + self.spare_bytes - bytes_in) as u64;
            self.counters.copy_backs += 1;
            self.timing.program(lun, &[(plane, bytes_in as u64)]);
        }
        result.map_err(CopyBackError::Program)?;
        Ok(action)
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::small_config;
    use super::super::{EmulatorConfig, FaultConfig, TimingParams};
    use super::*;
    use nand_hal::{BlockId, CopyBackRule, Error as _, ErrorKind, NandFlash, PageId};

    fn pattern(len: usize, seed: u8) -> Vec<u8> {
        (0..len).map(|i| (i as u8).wrapping_mul(29).wrapping_add(seed)).collect()
    }

    fn raw(e: &Emulator, page: PageId) -> Vec<u8> {
        let (d, s) = e.peek_page(page).unwrap();
        [d, s].concat()
    }

    fn diff_bits(a: &[u8], b: &[u8]) -> u32 {
        a.iter().zip(b).map(|(x, y)| (x ^ y).count_ones()).sum()
    }

    /// Copies `src` to `dst` with `read`, keeping the register as read.
    fn copy(
        e: &mut Emulator,
        src: PageId,
        dst: PageId,
        read: CopyBackRead,
    ) -> Result<CopyBackAction, CopyBackError<EmuError>> {
        let (mut d, mut s) = (vec![0u8; 512], vec![0u8; 16]);
        let op = CopyBackOp { src, dst, read, data: &mut d, spare: &mut s };
        e.copy_back(op, &mut |_, _| CopyBackAction::AS_READ)
    }

    #[test]
    fn copies_the_page_and_counts_one_read_and_one_program() {
        let mut e =
            Emulator::new(EmulatorConfig { timing: TimingParams::MT29F4G08, ..small_config() }).unwrap();
        let g = e.geometry();
        assert_eq!(e.copy_back_caps(), NATIVE_COPY_BACK);
        let (src, dst) = (g.page(BlockId(2), 0), g.page(BlockId(4), 5)); // plane 0 both
        let (data, spare) = (pattern(512, 1), pattern(16, 2));
        e.program_page(src, &data, &spare).unwrap();
        let (ops, c0, t0) = (e.ops_issued(), *e.counters(), e.idle_at_ns());
        e.set_now_ns(t0);
        let new_spare = pattern(16, 99);
        let (mut d, mut s) = (vec![0u8; 512], vec![0u8; 16]);
        let op = CopyBackOp { src, dst, read: CopyBackRead::Page, data: &mut d, spare: &mut s };
        let action = e
            .copy_back(op, &mut |d, s| {
                assert_eq!((&d[..], &s[..]), (&data[..], &spare[..]), "the check sees the page");
                s.copy_from_slice(&new_spare);
                CopyBackAction::Program { write_data: false, write_spare: true }
            })
            .unwrap();
        assert_eq!(action, CopyBackAction::Program { write_data: false, write_spare: true });
        assert_eq!(raw(&e, dst), [&data[..], &new_spare[..]].concat());
        assert_eq!(raw(&e, src), [&data[..], &spare[..]].concat());
        assert_eq!(e.program_count(dst), Some(1));
        assert_eq!(e.ops_issued() - ops, 2, "two device operations: read and program");
        let c = e.counters();
        assert_eq!((c.reads - c0.reads, c.programs - c0.programs, c.copy_backs - c0.copy_backs), (1, 1, 1));
        assert_eq!((c.bytes_out - c0.bytes_out, c.bytes_in - c0.bytes_in), (528, 16));
        // tR, 528 bytes out at 20 ns, 16 bytes in, tPROG: the data's transfer in is saved.
        assert_eq!(e.last_op_completion_ns() - t0, 25_000 + 528 * 20 + 16 * 20 + 200_000);
        // Unread: tR + tPROG only.
        let t1 = e.idle_at_ns();
        e.set_now_ns(t1);
        copy(&mut e, src, g.page(BlockId(4), 6), CopyBackRead::Nothing).unwrap();
        assert_eq!(e.last_op_completion_ns() - t1, 25_000 + 200_000);
        assert_eq!(raw(&e, g.page(BlockId(4), 6)), raw(&e, src));
        // Abort: a read, no program.
        let programs = e.counters().programs;
        let (mut d, mut s) = (vec![0u8; 512], vec![0u8; 16]);
        let op = CopyBackOp {
            src,
            dst: g.page(BlockId(4), 7),
            read: CopyBackRead::Spare,
            data: &mut d,
            spare: &mut s,
        };
        assert_eq!(e.copy_back(op, &mut |_, _| CopyBackAction::Abort), Ok(CopyBackAction::Abort));
        assert_eq!(e.counters().programs, programs);
        assert_eq!(e.program_count(g.page(BlockId(4), 7)), Some(0));
    }

    #[test]
    fn same_plane_parity_and_destination_rules() {
        let mut e = Emulator::new(small_config()).unwrap();
        let g = e.geometry();
        let src = g.page(BlockId(2), 1);
        e.program_page(src, &[0x0F; 8], &[]).unwrap();
        let ops = e.ops_issued();
        let other_plane = g.page(BlockId(3), 1);
        let e1 = copy(&mut e, src, other_plane, CopyBackRead::Page).unwrap_err();
        assert_eq!(e1, CopyBackError::Refused(CopyBackRule::NotSamePlane));
        assert_eq!(e1.kind(), ErrorKind::Other);
        let e2 = copy(&mut e, src, PageId(g.total_pages()), CopyBackRead::Page).unwrap_err();
        assert_eq!(e2.kind(), ErrorKind::OutOfRange);
        assert_eq!(e.ops_issued(), ops, "refusals are not issued");
        // Odd to even is allowed by default, refused on a part without it.
        copy(&mut e, src, g.page(BlockId(4), 2), CopyBackRead::Nothing).unwrap();
        let caps = CopyBackCaps { native: true, odd_to_even: false };
        let mut strict = Emulator::new(EmulatorConfig { copy_back: caps, ..small_config() }).unwrap();
        strict.program_page(src, &[0x0F; 8], &[]).unwrap();
        assert_eq!(
            copy(&mut strict, src, g.page(BlockId(4), 2), CopyBackRead::Nothing),
            Err(CopyBackError::Refused(CopyBackRule::OddToEven))
        );
        copy(&mut strict, src, g.page(BlockId(4), 3), CopyBackRead::Nothing).unwrap();
        // The destination obeys program order and NOP like any program.
        let dst = g.page(BlockId(4), 1);
        assert_eq!(
            copy(&mut e, src, dst, CopyBackRead::Nothing),
            Err(CopyBackError::Program(EmuError::ProgramOrder { page: dst, highest: 2 }))
        );
        assert_eq!(e.counters().rejected, 1);
        // Status FAIL on the destination's block.
        e.inject_program_failure(BlockId(6)).unwrap();
        let dst = g.page(BlockId(6), 0);
        let err = copy(&mut e, src, dst, CopyBackRead::Nothing).unwrap_err();
        assert_eq!(err, CopyBackError::Program(EmuError::ProgramFailed(dst)));
        assert_eq!(err.kind(), ErrorKind::ProgramFailed);
    }

    #[test]
    fn a_cut_leaves_the_source_intact_and_the_destination_torn() {
        let mut e = Emulator::new(EmulatorConfig { seed: 5, ..small_config() }).unwrap();
        let g = e.geometry();
        let src = g.page(BlockId(2), 0);
        let (data, spare) = (vec![0x00; 512], vec![0x00; 16]);
        e.program_page(src, &data, &spare).unwrap();
        let before = raw(&e, src);
        // A cut on the read (the first of the two operations): nothing changes.
        let dst = g.page(BlockId(4), 0);
        e.schedule_power_cut(0);
        assert_eq!(
            copy(&mut e, src, dst, CopyBackRead::Nothing),
            Err(CopyBackError::Read(EmuError::PowerLoss))
        );
        assert_eq!(e.program_count(dst), Some(0));
        assert!(raw(&e, dst).iter().all(|&b| b == 0xFF));
        e.restore_power();
        // A cut on the program (the second): the destination is torn, the source is not.
        e.schedule_power_cut(1);
        let err = copy(&mut e, src, dst, CopyBackRead::Page).unwrap_err();
        assert_eq!(err, CopyBackError::Program(EmuError::PowerLoss));
        assert_eq!(err.kind(), ErrorKind::PowerLoss);
        assert_eq!(raw(&e, src), before);
        assert_eq!(e.program_count(dst), Some(1));
        let zeros = raw(&e, dst).iter().map(|b| b.count_zeros()).sum::<u32>();
        // 4224 bits each cleared with p = 1/2 (torn_fraction): about 2112.
        assert!((1900..2330).contains(&zeros), "{zeros}");
        // Without power nothing more is done; after power returns the source copies whole.
        assert_eq!(
            copy(&mut e, src, g.page(BlockId(4), 1), CopyBackRead::Nothing),
            Err(CopyBackError::Read(EmuError::PowerLoss))
        );
        e.restore_power();
        copy(&mut e, src, g.page(BlockId(4), 1), CopyBackRead::Nothing).unwrap();
        assert_eq!(raw(&e, g.page(BlockId(4), 1)), before);
    }

    #[test]
    fn unchecked_copies_accumulate_raw_bit_errors_checked_ones_do_not() {
        // RBER 2e-3 on 4224-bit pages: about 8.4 errors per read. Eight generations copied
        // unread carry about eight reads' worth; a check that writes the corrected data back
        // (here with the true data, a decoder that always succeeds) keeps the data exact.
        let faults = FaultConfig { rber: 2e-3, ..FaultConfig::default() };
        let mut e = Emulator::new(EmulatorConfig { seed: 11, faults, ..small_config() }).unwrap();
        let g = e.geometry();
        let (data, spare) = (pattern(512, 3), pattern(16, 4));
        let first = g.page(BlockId(0), 0);
        e.program_page(first, &data, &spare).unwrap();
        let original = raw(&e, first);
        // Unchecked chain in blocks 0, 2, 4, ... (plane 0), page 0 each.
        let mut src = first;
        let mut stored_errors = Vec::new();
        for gen in 1..=8u32 {
            let dst = g.page(BlockId(2 * gen), 0);
            let flips = e.counters().bit_flips;
            copy(&mut e, src, dst, CopyBackRead::Nothing).unwrap();
            let read_flips = e.counters().bit_flips - flips;
            // The copy stores exactly the read's errors on top of the source's.
            assert_eq!(diff_bits(&raw(&e, dst), &raw(&e, src)), read_flips as u32, "gen {gen}");
            stored_errors.push(diff_bits(&raw(&e, dst), &original));
            src = dst;
        }
        // Independent expectation: 8 x 4224 x 2e-3 = 67.6 (sd ~8.2).
        let last = *stored_errors.last().unwrap();
        assert!((40..100).contains(&last), "{stored_errors:?}");
        assert!(stored_errors.windows(2).filter(|w| w[1] > w[0]).count() >= 6, "{stored_errors:?}");
        // Past a 4-bit-per-512-byte code: the data can no longer be corrected.
        assert!(diff_bits(&raw(&e, src)[..512], &data) > 4);

        // Checked chain in plane 1: read out, write the corrected data and spare back.
        let mut src = g.page(BlockId(1), 0);
        e.program_page(src, &data, &spare).unwrap();
        for gen in 1..=8u32 {
            let dst = g.page(BlockId(2 * gen + 1), 0);
            let (mut d, mut s) = (vec![0u8; 512], vec![0u8; 16]);
            let op = CopyBackOp { src, dst, read: CopyBackRead::Page, data: &mut d, spare: &mut s };
            e.copy_back(op, &mut |d, s| {
                let fixed = d != &data[..] || s != &spare[..];
                d.copy_from_slice(&data);
                s.copy_from_slice(&spare);
                CopyBackAction::Program { write_data: fixed, write_spare: fixed }
            })
            .unwrap();
            assert_eq!(raw(&e, dst), original, "gen {gen}");
            src = dst;
        }
    }

    #[test]
    fn native_and_fallback_store_the_same_page() {
        // Same seed, same raw bit errors: the on-chip move and the read + program fallback leave
        // the same destination; only the counted transfers differ.
        let faults = FaultConfig { rber: 1e-3, ..FaultConfig::default() };
        let run = |caps: CopyBackCaps| {
            let mut e = Emulator::new(EmulatorConfig {
                seed: 3,
                faults: faults.clone(),
                copy_back: caps,
                ..small_config()
            })
            .unwrap();
            let g = e.geometry();
            let (src, dst) = (g.page(BlockId(6), 0), g.page(BlockId(8), 0));
            e.program_page(src, &pattern(512, 9), &pattern(16, 8)).unwrap();
            copy(&mut e, src, dst, CopyBackRead::Nothing).unwrap();
            (raw(&e, dst), *e.counters(), e.ops_issued())
        };
        let (native, cn, on) = run(NATIVE_COPY_BACK);
        let (fallback, cf, of) = run(CopyBackCaps::FALLBACK);
        assert_eq!(native, fallback);
        assert!(cn.bit_flips > 0, "the test must carry errors");
        assert_eq!((on, of), (3, 3), "program + read + program either way");
        assert_eq!((cn.copy_backs, cf.copy_backs), (1, 0));
        assert_eq!((cn.bytes_out, cf.bytes_out), (0, 528));
        assert_eq!((cn.bytes_in - 528, cf.bytes_in - 528), (0, 528));
    }
}
