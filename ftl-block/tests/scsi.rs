//! The SCSI handler driven with command blocks on the emulated NAND, through a mock transport
//! that moves at most 64 bytes per call and sometimes none (so every command spans several
//! polls): data against a byte model, replies against the SPC/SBC layouts, sense codes on bad
//! LBAs, lengths, fields and opcodes, flush and unmap reaching the FTL, write-through durability
//! across power cuts (every completed command survives), FTL errors mapped to MEDIUM ERROR, and
//! the replies and sense data decoded by sg3-utils.

mod common;

use common::{emulator, geometry, open, Disk};
use ftl_block::scsi::{opcode, Command, DataPhase, Poll, ScsiDisk, Sense, Status, WriteCache};
use ftl_block::SECTOR_SIZE;
use ftl_core::Config;
use rand::{Rng, RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;
use sim_host::memory::FtlMemory;

const BLOCKS: u32 = 16;
const LOGICAL_PAGES: u32 = 64;
const SECTORS: u64 = LOGICAL_PAGES as u64 * 4;

fn config() -> Config {
    Config::with_logical_pages(&geometry(BLOCKS), LOGICAL_PAGES)
}

/// The host side of the data phase: bytes to hand to the device, bytes it sent.
struct Host {
    out: Vec<u8>,
    taken: usize,
    got: Vec<u8>,
    calls: u32,
}

impl DataPhase for Host {
    type Error = ();
    fn send(&mut self, data: &[u8]) -> Result<usize, ()> {
        self.calls += 1;
        if self.calls.is_multiple_of(3) {
            return Ok(0);
        }
        let n = data.len().min(64);
        self.got.extend_from_slice(&data[..n]);
        Ok(n)
    }
    fn receive(&mut self, buf: &mut [u8]) -> Result<usize, ()> {
        self.calls += 1;
        if self.calls.is_multiple_of(3) {
            return Ok(0);
        }
        let n = buf.len().min(64).min(self.out.len() - self.taken);
        buf[..n].copy_from_slice(&self.out[self.taken..self.taken + n]);
        self.taken += n;
        Ok(n)
    }
}

type Scsi<'a> = ScsiDisk<common::TestFtl<'a>, Vec<u8>, Vec<u8>>;

struct Done {
    status: Status,
    bytes: u32,
    data: Vec<u8>,
    sense: Sense,
}

/// Runs one command to completion (polling while it is pending).
fn run_cmd(scsi: &mut Scsi<'_>, cmd: Command, out: &[u8]) -> Done {
    let mut host = Host { out: out.to_vec(), taken: 0, got: Vec::new(), calls: 0 };
    let mut polls = 0;
    let (status, bytes) = loop {
        match scsi.poll(&cmd, &mut host).unwrap() {
            Poll::Pending => {
                polls += 1;
                assert!(polls < 1_000_000, "{cmd:?} makes no progress");
            }
            Poll::Done { status, bytes } => break (status, bytes),
        }
    };
    assert!(!scsi.busy());
    Done { status, bytes, data: host.got, sense: scsi.sense() }
}

/// Runs one command to completion, then asks REQUEST SENSE and checks it reports the same sense.
fn exec_cmd(scsi: &mut Scsi<'_>, cmd: Command, out: &[u8]) -> Done {
    let done = run_cmd(scsi, cmd, out);
    let sense = done.sense;
    if cmd != (Command::RequestSense { desc: false, alloc_len: 18 }) {
        // REQUEST SENSE reports the same sense, in fixed format, and clears it.
        let rs = exec_cmd(scsi, Command::RequestSense { desc: false, alloc_len: 18 }, &[]);
        assert_eq!(rs.status, Status::Passed);
        assert_eq!(rs.data.len(), 18);
        assert_eq!((rs.data[0], rs.data[7]), (0x70, 10));
        assert_eq!(Sense { key: rs.data[2], asc: rs.data[12], ascq: rs.data[13] }, sense);
        assert_eq!(scsi.sense(), Sense::NONE);
    }
    done
}

fn exec(scsi: &mut Scsi<'_>, cdb: &[u8], out: &[u8]) -> Done {
    exec_cmd(scsi, Command::parse(cdb), out)
}

fn handler(disk: Disk<'_>, xfer: usize) -> Scsi<'_> {
    ScsiDisk::new(disk, vec![0; xfer]).unwrap()
}

fn read10(lba: u32, len: u16) -> [u8; 10] {
    let mut c = [0u8; 10];
    c[0] = opcode::READ_10;
    c[2..6].copy_from_slice(&lba.to_be_bytes());
    c[7..9].copy_from_slice(&len.to_be_bytes());
    c
}

fn write10(lba: u32, len: u16) -> [u8; 10] {
    let mut c = read10(lba, len);
    c[0] = opcode::WRITE_10;
    c
}

fn rw16(op: u8, lba: u64, len: u32) -> [u8; 16] {
    let mut c = [0u8; 16];
    c[0] = op;
    c[2..10].copy_from_slice(&lba.to_be_bytes());
    c[10..14].copy_from_slice(&len.to_be_bytes());
    c
}

fn unmap_cdb(param_len: u16) -> [u8; 10] {
    let mut c = [0u8; 10];
    c[0] = opcode::UNMAP;
    c[7..9].copy_from_slice(&param_len.to_be_bytes());
    c
}

fn unmap_list(ranges: &[(u64, u32)]) -> Vec<u8> {
    let mut v = vec![0u8; 8];
    v[0..2].copy_from_slice(&((6 + 16 * ranges.len()) as u16).to_be_bytes());
    v[2..4].copy_from_slice(&((16 * ranges.len()) as u16).to_be_bytes());
    for &(lba, n) in ranges {
        v.extend_from_slice(&lba.to_be_bytes());
        v.extend_from_slice(&n.to_be_bytes());
        v.extend_from_slice(&[0; 4]);
    }
    v
}

fn passed(d: &Done) {
    assert_eq!((d.status, d.sense), (Status::Passed, Sense::NONE));
}

fn failed(d: &Done, sense: Sense) {
    assert_eq!((d.status, d.sense), (Status::Failed, sense));
}

#[test]
fn reads_and_writes_match_a_byte_model() {
    // A transfer buffer of one page (whole-page writes), of two pages, and of one sector (a
    // read-modify-write per sector).
    for xfer in [2048, 4096, 512] {
        let mut emu = emulator(geometry(BLOCKS), 0.5, 0.5);
        let mut mem = FtlMemory::new(&geometry(BLOCKS), &config());
        let mut scsi = handler(open(&mut emu, &mut mem, config(), true).unwrap(), xfer);
        let mut model = vec![0u8; SECTORS as usize * SECTOR_SIZE];
        let mut rng = ChaCha8Rng::seed_from_u64(xfer as u64);
        for round in 0..400 {
            let len = rng.random_range(0..=20u64);
            let lba = rng.random_range(0..=SECTORS - len);
            let bytes = len as usize * SECTOR_SIZE;
            let at = lba as usize * SECTOR_SIZE;
            let form = rng.random_range(0..3);
            if round % 2 == 0 {
                let mut data = vec![0u8; bytes];
                rng.fill_bytes(&mut data);
                let cdb: Vec<u8> = match form {
                    0 => write10(lba as u32, len as u16).to_vec(),
                    1 => rw16(opcode::WRITE_16, lba, len as u32).to_vec(),
                    _ if len > 0 => vec![opcode::WRITE_6, 0, (lba >> 8) as u8, lba as u8, len as u8, 0],
                    _ => write10(lba as u32, 0).to_vec(),
                };
                let d = exec(&mut scsi, &cdb, &data);
                passed(&d);
                assert_eq!(d.bytes as usize, bytes);
                model[at..at + bytes].copy_from_slice(&data);
            } else {
                let cdb: Vec<u8> = match form {
                    0 => read10(lba as u32, len as u16).to_vec(),
                    1 => rw16(opcode::READ_16, lba, len as u32).to_vec(),
                    _ if len > 0 => vec![opcode::READ_6, 0, (lba >> 8) as u8, lba as u8, len as u8, 0],
                    _ => read10(lba as u32, 0).to_vec(),
                };
                let d = exec(&mut scsi, &cdb, &[]);
                passed(&d);
                assert_eq!(d.bytes as usize, bytes);
                assert!(d.data == model[at..at + bytes], "xfer {xfer}: READ of {len} at {lba} differs");
            }
        }
        let d = exec(&mut scsi, &rw16(opcode::READ_16, 0, SECTORS as u32), &[]);
        assert!(d.data == model);
    }
}

#[test]
fn whole_page_writes_need_no_read_modify_write() {
    let mut emu = emulator(geometry(BLOCKS), 0.5, 0.5);
    let mut mem = FtlMemory::new(&geometry(BLOCKS), &config());
    let mut scsi = handler(open(&mut emu, &mut mem, config(), true).unwrap(), 4096);
    // 8 pages, aligned: 8 page programs and no read.
    let before = *scsi.disk().store().counters();
    passed(&exec(&mut scsi, &write10(16, 32), &vec![7u8; 32 * SECTOR_SIZE]));
    let after = *scsi.disk().store().counters();
    assert_eq!(after.host_write_pages - before.host_write_pages, 8);
    assert_eq!(after.host_read_pages - before.host_read_pages, 0);
    // One sector inside a page: one page read, one page program.
    passed(&exec(&mut scsi, &write10(18, 1), &[9u8; SECTOR_SIZE]));
    let last = *scsi.disk().store().counters();
    assert_eq!(
        (last.host_write_pages - after.host_write_pages, last.host_read_pages - after.host_read_pages),
        (1, 1)
    );
    // Write-through flushed after each WRITE without programming anything more: NAND programs
    // equal the host's page writes.
    assert_eq!(last.host_flushes - before.host_flushes, 2);
    assert_eq!((last.nand_programs - before.nand_programs, last.checkpoints - before.checkpoints), (9, 0));
}

#[test]
fn out_of_range_and_malformed_commands_fail_with_sense() {
    let mut emu = emulator(geometry(BLOCKS), 0.5, 0.5);
    let mut mem = FtlMemory::new(&geometry(BLOCKS), &config());
    let mut scsi = handler(open(&mut emu, &mut mem, config(), true).unwrap(), 2048);
    passed(&exec(&mut scsi, &write10(0, 4), &[0xAB; 4 * SECTOR_SIZE]));
    let last = (SECTORS - 1) as u32;
    for cdb in [
        read10(last, 2).to_vec(),
        read10(last + 1, 1).to_vec(),
        write10(last, 2).to_vec(),
        read10(u32::MAX, 1).to_vec(),
        rw16(opcode::READ_16, u64::MAX, 1).to_vec(),
        rw16(opcode::WRITE_16, u64::MAX - 1, 2).to_vec(),
        rw16(opcode::WRITE_16, 0, u32::MAX).to_vec(),
    ] {
        let d = exec(&mut scsi, &cdb, &[0u8; 1024]);
        failed(&d, Sense::LBA_OUT_OF_RANGE);
        assert_eq!((d.bytes, d.data.len()), (0, 0), "{cdb:?}");
    }
    // Zero-length transfers at the end are no error.
    passed(&exec(&mut scsi, &read10(last + 1, 0), &[]));
    // Unknown opcodes; truncated CDBs and unsupported fields.
    for op in [0x04u8 /* FORMAT UNIT */, 0xFF, 0x2F /* VERIFY(10) */, 0xA0 /* REPORT LUNS */] {
        failed(&exec(&mut scsi, &[op, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0], &[]), Sense::INVALID_OPCODE);
    }
    for cdb in [
        &read10(0, 1)[..5],
        &[opcode::WRITE_16, 0, 0][..],
        &[opcode::SERVICE_ACTION_IN_16, 0x11, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 32, 0, 0][..],
        &[][..],
        &[opcode::REQUEST_SENSE, 1, 0, 0, 18, 0][..],
        &[opcode::INQUIRY, 0, 0x80, 0, 36, 0][..],
        &[opcode::INQUIRY, 1, 0x83, 0, 255, 0][..],
        &[opcode::MODE_SENSE_6, 0, 0x1C, 0, 255, 0][..],
        &[opcode::MODE_SENSE_6, 0, 0x08, 1, 255, 0][..],
    ] {
        failed(&exec(&mut scsi, cdb, &[]), Sense::INVALID_FIELD_IN_CDB);
    }
    failed(
        &exec(&mut scsi, &[opcode::MODE_SENSE_6, 0, 0xC8, 0, 255, 0], &[]),
        Sense::SAVING_PARAMETERS_NOT_SUPPORTED,
    );
    // None of it changed the data; a good command clears the sense.
    let d = exec(&mut scsi, &read10(0, 4), &[]);
    passed(&d);
    assert!(d.data.iter().all(|&b| b == 0xAB));
    passed(&exec(&mut scsi, &[opcode::TEST_UNIT_READY, 0, 0, 0, 0, 0], &[]));
}

#[test]
fn informational_replies_follow_spc_and_sbc() {
    let mut emu = emulator(geometry(BLOCKS), 0.5, 0.5);
    let mut mem = FtlMemory::new(&geometry(BLOCKS), &config());
    let mut scsi = handler(open(&mut emu, &mut mem, config(), true).unwrap(), 2048);
    // Standard INQUIRY: direct-access, not removable, SPC-4, the identity strings; cut to the
    // allocation length.
    let d = exec(&mut scsi, &[opcode::INQUIRY, 0, 0, 0, 96, 0], &[]);
    passed(&d);
    assert_eq!(d.data.len(), 36);
    assert_eq!(&d.data[..5], &[0, 0, 6, 2, 31]);
    assert_eq!(&d.data[8..36], b"nandftl FTL raw NAND    0.1 ");
    assert_eq!(exec(&mut scsi, &[opcode::INQUIRY, 0, 0, 0, 5, 0], &[]).data.len(), 5);
    // VPD pages.
    let d = exec(&mut scsi, &[opcode::INQUIRY, 1, 0x00, 0, 255, 0], &[]);
    assert_eq!(d.data, [0, 0, 0, 4, 0x00, 0xB0, 0xB1, 0xB2]);
    let d = exec(&mut scsi, &[opcode::INQUIRY, 1, 0xB0, 0, 255, 0], &[]);
    assert_eq!(d.data.len(), 64);
    assert_eq!(&d.data[..4], &[0, 0xB0, 0, 0x3C]);
    assert_eq!(u16::from_be_bytes([d.data[6], d.data[7]]), 4, "optimal transfer granularity: a page");
    assert_eq!(u32::from_be_bytes(d.data[24..28].try_into().unwrap()), (2048 - 8) / 16, "unmap descriptors");
    assert_eq!(u32::from_be_bytes(d.data[28..32].try_into().unwrap()), 4, "unmap granularity: a page");
    let d = exec(&mut scsi, &[opcode::INQUIRY, 1, 0xB1, 0, 255, 0], &[]);
    assert_eq!(&d.data[4..6], &[0, 1], "non-rotating");
    let d = exec(&mut scsi, &[opcode::INQUIRY, 1, 0xB2, 0, 255, 0], &[]);
    assert_eq!(d.data, [0, 0xB2, 0, 4, 0, 0x80, 0x02, 0], "LBPU, LBPRZ = 0, thin");
    // Capacity: 256 sectors of 512 bytes, 4 per page (exponent 2), LBPME.
    let d = exec(&mut scsi, &[opcode::READ_CAPACITY_10, 0, 0, 0, 0, 0, 0, 0, 0, 0], &[]);
    assert_eq!(d.data, [0, 0, 0, 255, 0, 0, 2, 0]);
    let d = exec(
        &mut scsi,
        &[opcode::SERVICE_ACTION_IN_16, 0x10, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 32, 0, 0],
        &[],
    );
    assert_eq!(d.data.len(), 32);
    assert_eq!(&d.data[..16], &[0, 0, 0, 0, 0, 0, 0, 255, 0, 0, 2, 0, 0, 2, 0x80, 0]);
    let d = exec(&mut scsi, &[opcode::READ_FORMAT_CAPACITIES, 0, 0, 0, 0, 0, 0, 0, 252, 0], &[]);
    assert_eq!(d.data, [0, 0, 0, 8, 0, 0, 1, 0, 2, 0, 2, 0]);
    // MODE SENSE: caching page, WCE = 0 when write-through; all pages; the 10-byte header.
    let d = exec(&mut scsi, &[opcode::MODE_SENSE_6, 0, 0x08, 0, 255, 0], &[]);
    assert_eq!(d.data.len(), 24);
    assert_eq!(&d.data[..7], &[23, 0, 0, 0, 0x08, 0x12, 0x00]);
    let d = exec(&mut scsi, &[opcode::MODE_SENSE_6, 0, 0x3F, 0, 255, 0], &[]);
    assert_eq!((d.data.len(), d.data[0], d.data[4], d.data[24]), (36, 35, 0x08, 0x0A));
    let d = exec(&mut scsi, &[opcode::MODE_SENSE_10, 0, 0x08, 0, 0, 0, 0, 0, 255, 0], &[]);
    assert_eq!(d.data.len(), 28);
    assert_eq!(&d.data[..11], &[0, 26, 0, 0, 0, 0, 0, 0, 0x08, 0x12, 0x00]);
    let d = exec(&mut scsi, &[opcode::MODE_SENSE_6, 0, 0x08, 0, 4, 0], &[]);
    assert_eq!(d.data, [23, 0, 0, 0], "cut to the allocation length");
    let (disk, xfer) = scsi.into_parts();
    let mut scsi = ScsiDisk::new(disk, xfer).unwrap().with_write_cache(WriteCache::WriteBack);
    let d = exec(&mut scsi, &[opcode::MODE_SENSE_6, 0, 0x08, 0, 255, 0], &[]);
    assert_eq!(d.data[6], 0x04, "WCE when write-back");
    let d = exec(&mut scsi, &[opcode::MODE_SENSE_6, 0, 0x48, 0, 255, 0], &[]);
    assert_eq!(d.data[6], 0x00, "nothing changeable");
}

#[test]
fn synchronize_cache_flushes_and_unmap_trims_whole_pages() {
    let mut emu = emulator(geometry(BLOCKS), 0.5, 0.5);
    let mut mem = FtlMemory::new(&geometry(BLOCKS), &config());
    let disk = open(&mut emu, &mut mem, config(), true).unwrap();
    let mut scsi = ScsiDisk::new(disk, vec![0; 2048]).unwrap().with_write_cache(WriteCache::WriteBack);
    let flushes = |s: &Scsi<'_>| s.disk().store().counters().host_flushes;
    let data: Vec<u8> = (0..64 * SECTOR_SIZE).map(|i| (i / SECTOR_SIZE) as u8 + 1).collect();
    passed(&exec(&mut scsi, &write10(0, 64), &data));
    assert_eq!(flushes(&scsi), 0, "write-back: no flush on WRITE");
    passed(&exec(&mut scsi, &[opcode::SYNCHRONIZE_CACHE_10, 0, 0, 0, 0, 0, 0, 0, 0, 0], &[]));
    passed(&exec(
        &mut scsi,
        &[opcode::SYNCHRONIZE_CACHE_16, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
        &[],
    ));
    assert_eq!(flushes(&scsi), 2);
    // UNMAP sectors 2..13 (pages 1 and 2 whole; sectors 2, 3 and 12 of partial pages stay) and
    // 40..44 (page 10).
    let list = unmap_list(&[(2, 11), (40, 4)]);
    passed(&exec(&mut scsi, &unmap_cdb(list.len() as u16), &list));
    assert_eq!(scsi.disk().store().counters().host_trim_pages, 3);
    let d = exec(&mut scsi, &read10(0, 64), &[]);
    let mut want = data.clone();
    want[4 * SECTOR_SIZE..12 * SECTOR_SIZE].fill(0);
    want[40 * SECTOR_SIZE..44 * SECTOR_SIZE].fill(0);
    assert!(d.data == want);
    // The list's own header is used when the CDB's length is unknown (the usbd-storage path).
    let list = unmap_list(&[(16, 4)]);
    passed(&exec_cmd(&mut scsi, Command::Unmap { anchor: false, param_len: None }, &list));
    assert_eq!(scsi.disk().store().counters().host_trim_pages, 4);
    // A descriptor out of range fails the command before anything is trimmed.
    let list = unmap_list(&[(20, 4), (SECTORS - 2, 3)]);
    let d = exec(&mut scsi, &unmap_cdb(list.len() as u16), &list);
    failed(&d, Sense::LBA_OUT_OF_RANGE);
    assert_eq!(scsi.disk().store().counters().host_trim_pages, 4);
    // Bad lengths: a short parameter list, more descriptors than the buffer holds, the ANCHOR bit.
    failed(&exec(&mut scsi, &unmap_cdb(4), &[0; 4]), Sense::PARAMETER_LIST_LENGTH_ERROR);
    let many: Vec<(u64, u32)> = (0..200).map(|i| (i, 1)).collect();
    let list = unmap_list(&many);
    failed(&exec(&mut scsi, &unmap_cdb(list.len() as u16), &list), Sense::INVALID_FIELD_IN_PARAMETER_LIST);
    let mut anchored = unmap_cdb(24);
    anchored[1] = 1;
    failed(&exec(&mut scsi, &anchored, &unmap_list(&[(0, 4)])), Sense::INVALID_FIELD_IN_CDB);
    passed(&exec(&mut scsi, &unmap_cdb(0), &[]));
    assert_eq!(scsi.disk().store().counters().host_trim_pages, 4);
    let d = exec(&mut scsi, &read10(20, 4), &[]);
    assert!(d.data == data[20 * SECTOR_SIZE..24 * SECTOR_SIZE]);
}

#[test]
fn write_through_commands_are_durable_when_they_complete() {
    let mut emu = emulator(geometry(BLOCKS), 0.5, 0.5);
    let mut mem = FtlMemory::new(&geometry(BLOCKS), &config());
    let data: Vec<u8> = (0..16 * SECTOR_SIZE).map(|i| (i * 7 % 251) as u8).collect();
    {
        let mut scsi = handler(open(&mut emu, &mut mem, config(), true).unwrap(), 2048);
        passed(&exec(&mut scsi, &write10(100, 16), &data));
        let list = unmap_list(&[(104, 4)]);
        passed(&exec(&mut scsi, &unmap_cdb(list.len() as u16), &list));
        let (disk, _) = scsi.into_parts();
        let (mut ftl, _) = disk.into_parts();
        ftl.nand_mut().power_cut_now();
    }
    emu.restore_power();
    let mut scsi = handler(open(&mut emu, &mut mem, config(), false).unwrap(), 2048);
    let d = exec(&mut scsi, &read10(100, 16), &[]);
    let mut want = data.clone();
    want[4 * SECTOR_SIZE..8 * SECTOR_SIZE].fill(0);
    assert!(d.data == want, "completed WRITE and UNMAP survive the cut");
}

#[test]
fn ftl_errors_become_medium_errors() {
    let mut emu = emulator(geometry(BLOCKS), 0.5, 0.5);
    let mut mem = FtlMemory::new(&geometry(BLOCKS), &config());
    let mut scsi = handler(open(&mut emu, &mut mem, config(), true).unwrap(), 2048);
    passed(&exec(&mut scsi, &write10(0, 64), &vec![1u8; 64 * SECTOR_SIZE]));
    // The device fails (power lost) after two page reads: the READ fails with an unrecovered read
    // error after the sectors it could send.
    scsi.disk_mut().store_mut().nand_mut().schedule_power_cut(2);
    let d = exec_cmd(&mut scsi, Command::Read { lba: 0, len: 64 }, &[]);
    failed(&d, Sense::UNRECOVERED_READ_ERROR);
    assert_eq!(d.bytes, 2 * 2048);
    let d = exec(&mut scsi, &write10(8, 8), &vec![2u8; 8 * SECTOR_SIZE]);
    failed(&d, Sense::WRITE_ERROR);
    // A flush with a trim to journal fails the same way (write-back, so UNMAP leaves it pending).
    let (disk, xfer) = scsi.into_parts();
    let mut scsi = ScsiDisk::new(disk, xfer).unwrap().with_write_cache(WriteCache::WriteBack);
    let list = unmap_list(&[(32, 8)]);
    passed(&exec(&mut scsi, &unmap_cdb(list.len() as u16), &list));
    failed(
        &exec(&mut scsi, &[opcode::SYNCHRONIZE_CACHE_10, 0, 0, 0, 0, 0, 0, 0, 0, 0], &[]),
        Sense::WRITE_ERROR,
    );
    // The mapping of the other FTL errors.
    use ftl_block::Error as E;
    use ftl_core::Error as F;
    assert_eq!(Sense::for_error(E::Ftl(F::NoSpace), true), Sense { key: 7, asc: 0x27, ascq: 7 });
    assert_eq!(
        Sense::for_error(E::Ftl(F::Uncorrectable { lpn: 3 }), false),
        Sense { key: 3, asc: 0x11, ascq: 0 }
    );
    assert_eq!(Sense::for_error(E::Ftl(F::Corrupt), false), Sense { key: 4, asc: 0x44, ascq: 0 });
}

#[test]
fn usbd_storage_commands_map_to_the_handler() {
    use ftl_block::usb::command;
    use usbd_storage::subclass::scsi::{PageControl, ScsiCommand as U};
    let cases = [
        (U::Read { lba: 7, len: 3 }, Command::Read { lba: 7, len: 3 }),
        (U::Write { lba: 1 << 40, len: 1 << 20 }, Command::Write { lba: 1 << 40, len: 1 << 20 }),
        (U::ReadCapacity16 { alloc_len: 32 }, Command::ReadCapacity16 { alloc_len: 32 }),
        (
            U::ModeSense6 {
                dbd: true,
                page_control: PageControl::ChangeableValues,
                page_code: 0x08,
                subpage_code: 0,
                alloc_len: 192,
            },
            Command::ModeSense { ten: false, page_control: 1, page_code: 8, subpage_code: 0, alloc_len: 192 },
        ),
        (U::Unknown { cmd: 0x35 }, Command::SynchronizeCache),
        (U::Unknown { cmd: 0x91 }, Command::SynchronizeCache),
        (U::Unknown { cmd: 0x42 }, Command::Unmap { anchor: false, param_len: None }),
        (U::Unknown { cmd: 0x04 }, Command::Unknown { opcode: 0x04 }),
    ];
    for (u, want) in cases {
        assert_eq!(command(&u), want, "{u:?}");
    }
}

/// Runs an sg3-utils decoder on `bytes` (as an ASCII hex file) and returns its output.
fn sg3(tool: &str, opt: &str, bytes: &[u8]) -> String {
    let found =
        std::env::var_os("PATH").is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(tool).is_file()));
    assert!(found, "`{tool}` is not installed: run `bash scripts/setup.sh` (it installs sg3-utils)");
    let path = std::env::temp_dir().join(format!("ftl-block-sg3-{}-{tool}.hex", std::process::id()));
    let hex: Vec<String> = bytes.iter().map(|b| format!("{b:02x}")).collect();
    std::fs::write(&path, hex.join(" ") + "\n").unwrap();
    let out = std::process::Command::new(tool).arg(format!("{opt}{}", path.display())).output().unwrap();
    std::fs::remove_file(&path).unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{tool} failed:\n{text}");
    text
}

/// The replies and sense data as sg3-utils (a decoder nobody here wrote) reads them.
#[test]
fn replies_and_sense_decode_with_sg3_utils() {
    let mut emu = emulator(geometry(BLOCKS), 0.5, 0.5);
    let mut mem = FtlMemory::new(&geometry(BLOCKS), &config());
    let mut scsi = handler(open(&mut emu, &mut mem, config(), true).unwrap(), 2048);
    let d = exec(&mut scsi, &[opcode::INQUIRY, 0, 0, 0, 96, 0], &[]);
    let t = sg3("sg_inq", "--inhex=", &d.data);
    for want in [
        "PQual=0  PDT=0  RMB=0",
        "version=0x06  [SPC-4]",
        "Peripheral device type: disk",
        "Vendor identification: nandftl",
        "Product identification: FTL raw NAND",
        "Product revision level: 0.1",
    ] {
        assert!(t.contains(want), "sg_inq lacks {want:?}:\n{t}");
    }
    let vpd = |scsi: &mut Scsi<'_>, page: u8| exec(scsi, &[opcode::INQUIRY, 1, page, 0, 255, 0], &[]).data;
    let t = sg3("sg_vpd", "--inhex=", &vpd(&mut scsi, 0x00));
    for want in
        ["Block limits (SBC)", "Block device characteristics (SBC)", "Logical block provisioning (SBC)"]
    {
        assert!(t.contains(want), "sg_vpd 0x00 lacks {want:?}:\n{t}");
    }
    let t = sg3("sg_vpd", "--inhex=", &vpd(&mut scsi, 0xB0));
    for want in [
        "Optimal transfer length granularity: 4 blocks",
        "Maximum unmap block descriptor count: 127",
        "Optimal unmap granularity: 4 blocks",
        "Unmap granularity alignment valid: true",
    ] {
        assert!(t.contains(want), "sg_vpd 0xB0 lacks {want:?}:\n{t}");
    }
    let t = sg3("sg_vpd", "--inhex=", &vpd(&mut scsi, 0xB1));
    assert!(t.contains("Non-rotating medium"), "{t}");
    let t = sg3("sg_vpd", "--inhex=", &vpd(&mut scsi, 0xB2));
    for want in ["(LBPU): 1", "(LBPRZ): 0", "Provisioning type: 2 (thin provisioned)"] {
        assert!(t.contains(want), "sg_vpd 0xB2 lacks {want:?}:\n{t}");
    }
    // Sense data of failed commands, as REQUEST SENSE returns it.
    let read_past_end = read10(SECTORS as u32, 1);
    let cases: [(&[u8], &str); 4] = [
        (&read_past_end, "Logical block address out of range"),
        (&[0xFF, 0, 0, 0, 0, 0], "Invalid command operation code"),
        (&[opcode::MODE_SENSE_6, 0, 0x1C, 0, 255, 0], "Invalid field in cdb"),
        (&unmap_cdb(4), "Parameter list length error"),
    ];
    for (cdb, asc) in cases {
        assert_eq!(run_cmd(&mut scsi, Command::parse(cdb), &[0; 4]).status, Status::Failed);
        let rs = run_cmd(&mut scsi, Command::RequestSense { desc: false, alloc_len: 252 }, &[]);
        let t = sg3("sg_decode_sense", "--file=", &rs.data);
        assert!(t.contains("Fixed format, current; Sense key: Illegal Request"), "{t}");
        assert!(t.contains(asc), "sg_decode_sense lacks {asc:?}:\n{t}");
    }
    for (sense, key, asc) in [
        (Sense::UNRECOVERED_READ_ERROR, "Medium Error", "Unrecovered read error"),
        (Sense::WRITE_ERROR, "Medium Error", "Write error"),
        (Sense::SPACE_ALLOCATION_FAILED, "Data Protect", "Space allocation failed write protect"),
        (Sense::INTERNAL_TARGET_FAILURE, "Hardware Error", "Internal target failure"),
    ] {
        let fixed = [0x70, 0, sense.key, 0, 0, 0, 0, 10, 0, 0, 0, 0, sense.asc, sense.ascq, 0, 0, 0, 0];
        let t = sg3("sg_decode_sense", "--file=", &fixed);
        assert!(t.contains(key) && t.contains(asc), "{sense:?}: {t}");
    }
}

/// A host's view of durability with the default write-through handler, under power cuts at
/// random NAND operations: every command that completed survives exactly; the pages a command
/// interrupted by the cut touched read as their content before it or after it (page by page).
#[test]
fn completed_commands_survive_power_cuts() {
    const PAGE: usize = 4 * SECTOR_SIZE;
    let mut rng = ChaCha8Rng::seed_from_u64(19);
    let (mut cuts, mut interrupted_writes) = (0, 0);
    for round in 0..40 {
        let mut emu = emulator(geometry(BLOCKS), 0.5, 0.5);
        let mut mem = FtlMemory::new(&geometry(BLOCKS), &config());
        let mut model = vec![0u8; SECTORS as usize * SECTOR_SIZE];
        let mut format = true;
        let mut left = 120;
        while left > 0 {
            let mut scsi = handler(open(&mut emu, &mut mem, config(), format).unwrap(), 2048);
            format = false;
            let after = rng.random_range(0..200u64);
            scsi.disk_mut().store_mut().nand_mut().schedule_power_cut(after);
            let mut cut = None;
            while left > 0 && cut.is_none() {
                left -= 1;
                let len = rng.random_range(1..=12u64);
                let lba = rng.random_range(0..=SECTORS - len);
                let at = lba as usize * SECTOR_SIZE;
                let bytes = len as usize * SECTOR_SIZE;
                let mut next = model.clone();
                let (cdb, out) = match rng.random_range(0..4) {
                    0 => {
                        let list = unmap_list(&[(lba, len as u32)]);
                        for p in lba.div_ceil(4)..(lba + len) / 4 {
                            next[p as usize * PAGE..(p as usize + 1) * PAGE].fill(0);
                        }
                        (unmap_cdb(list.len() as u16).to_vec(), list)
                    }
                    1 => (read10(lba as u32, len as u16).to_vec(), vec![]),
                    _ => {
                        let mut data = vec![0u8; bytes];
                        rng.fill_bytes(&mut data);
                        next[at..at + bytes].copy_from_slice(&data);
                        (write10(lba as u32, len as u16).to_vec(), data)
                    }
                };
                let d = run_cmd(&mut scsi, Command::parse(&cdb), &out);
                match d.status {
                    Status::Passed => {
                        if cdb[0] == opcode::READ_10 {
                            assert!(d.data == model[at..at + bytes], "round {round}: READ differs");
                        }
                        model = next;
                    }
                    Status::Failed => {
                        assert!(
                            matches!(d.sense, Sense::WRITE_ERROR | Sense::UNRECOVERED_READ_ERROR),
                            "{:?}",
                            d.sense
                        );
                        cut = Some(next);
                    }
                }
            }
            let Some(next) = cut else { break };
            cuts += 1;
            interrupted_writes += (next != model) as u32;
            drop(scsi);
            emu.restore_power();
            let mut scsi = handler(open(&mut emu, &mut mem, config(), false).unwrap(), 2048);
            let all = run_cmd(&mut scsi, Command::Read { lba: 0, len: SECTORS as u32 }, &[]);
            assert_eq!(all.status, Status::Passed);
            for (p, got) in all.data.chunks(PAGE).enumerate() {
                let (old, new) = (&model[p * PAGE..(p + 1) * PAGE], &next[p * PAGE..(p + 1) * PAGE]);
                assert!(
                    got == old || got == new,
                    "round {round}: page {p} after a cut is neither before nor after"
                );
            }
            model = all.data;
        }
    }
    assert!(cuts > 40 && interrupted_writes > 20, "cuts {cuts}, in a WRITE or UNMAP {interrupted_writes}");
}
