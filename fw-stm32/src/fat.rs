//! The FAT round trip: the FTL as a disk of 512-byte sectors (ftl-block's `SectorDisk`) with a
//! FAT16 volume on it (ftl-block's `mkfs::format_fat16`, since embedded-sdmmc cannot format),
//! used through embedded-sdmmc (ftl-block's `SdmmcDisk`, write-through: every block write ends
//! with the FTL's flush).
//!
//! [`create`] formats the disk ([`format`]), creates `HELLO.TXT` and `DATA.BIN` (written in uneven
//! pieces that cross sector and page boundaries), logs what that cost the FTL (NAND programs and
//! reads), reads both back and lists the root directory; [`check`], after the caller has
//! unmounted and mounted the FTL again, opens the volume (no format), lists and reads both files
//! again. Every check compares with the content computed again from its definition ([`HELLO`],
//! [`data_byte`]), never with what was read before, and fails with [`Failed`] on any mismatch or
//! error. The `disk` mode uses [`format`] (blank chip) and [`list`]; [`disk`] is the disk both
//! platforms serve at the end.
//!
//! RAM: embedded-sdmmc's `VolumeManager` (one 512-byte block cache, one volume, one directory,
//! one file) and a 512-byte chunk buffer, both on the stack; the adapter's page buffer is lent
//! by the caller.

use core::ops::ControlFlow;

use embedded_sdmmc::{Mode, TimeSource, Timestamp, VolumeIdx, VolumeManager};
use ftl_block::mkfs;
use ftl_block::sdmmc::SdmmcDisk;
use ftl_block::SectorDisk;
use nand_hal::onfi::OnfiBus;

use crate::app::{ticks_to_us, Failed};
use crate::ftl_api::{AppFtl, Store};
use crate::log::Loggable;
use crate::platform::now;

/// The disk: the mounted FTL (borrowed through [`Store`]) with a lent page buffer.
pub type Disk<'s, 'a, 'b, B> = SectorDisk<Store<'s, 'a, B>, &'b mut [u8]>;

/// The first file's content.
pub const HELLO: &[u8] = b"Hello from the FTL on raw NAND (fw-stm32, FAT16 written by embedded-sdmmc)\r\n";
/// The second file's length: ten pages and a bit, not a whole number of sectors.
pub const DATA_LEN: u32 = 20 * 1024 + 123;
/// The sizes of the pieces `DATA.BIN` is written in, in turn: 1 to 512 bytes, so that writes
/// start and end inside sectors and pages and some cover a whole sector.
const PIECES: [usize; 5] = [1, 511, 512, 300, 37];
/// The volume label.
const LABEL: &[u8; 11] = b"NANDFTL    ";

/// Byte `i` of `DATA.BIN`: a multiplicative hash of the offset (every sector differs).
pub fn data_byte(i: u32) -> u8 {
    (i.wrapping_mul(0x9E37_79B1) >> 13) as u8 ^ (i >> 9) as u8
}

/// A fixed timestamp (the board keeps no calendar time): 2026-11-26 12:00:00.
struct Clock;

impl TimeSource for Clock {
    fn get_timestamp(&self) -> Timestamp {
        Timestamp {
            year_since_1970: 56,
            zero_indexed_month: 10,
            zero_indexed_day: 25,
            hours: 12,
            minutes: 0,
            seconds: 0,
        }
    }
}

/// One volume, one directory, one file open at a time.
type Vm<'d, 's, 'a, 'b, B> = VolumeManager<&'d SdmmcDisk<Store<'s, 'a, B>, &'b mut [u8]>, Clock, 1, 1, 1>;

fn failed(what: &str, e: impl Loggable) -> Failed {
    error!("[fat] {} failed: {:?}", what, e);
    Failed
}

/// NAND programs and reads so far.
fn nand_ops<B: OnfiBus>(disk: &Disk<'_, '_, '_, B>) -> (u64, u64) {
    let c = disk.store().0.counters();
    (c.nand_programs, c.nand_reads)
}

/// The disk over the mounted FTL, through `buf` (at least one page).
pub fn disk<'s, 'a, 'b, B: OnfiBus>(
    ftl: &'s mut AppFtl<'a, B>,
    buf: &'b mut [u8],
) -> Result<Disk<'s, 'a, 'b, B>, Failed> {
    SectorDisk::new(Store(ftl), buf).map_err(|e| failed("sector disk", e))
}

/// Formats the FTL's logical space (through the page buffer `buf`) as one empty FAT16 volume
/// (MBR, boot sector, FATs, root directory; the whole disk trimmed first).
#[inline(never)]
pub fn format<B: OnfiBus>(ftl: &mut AppFtl<'_, B>, buf: &mut [u8]) -> Result<(), Failed> {
    let mut disk = disk(ftl, buf)?;
    let t0 = now();
    let l = mkfs::format_fat16(&mut disk, 0x1A2B_3C4D, LABEL).map_err(|e| failed("format", e))?;
    info!(
        "[fat] formatted FAT16 in {} us: {} sectors ({} KiB), {} clusters of {} bytes, volume at sector {}",
        ticks_to_us(now() - t0),
        disk.sectors(),
        disk.size_bytes() / 1024,
        l.clusters,
        l.cluster_sectors * 512,
        l.start
    );
    Ok(())
}

/// Logs the root directory of the disk's FAT volume (names and sizes of the first entries) and
/// returns how many files it has; `None` (logged, not an error) if no FAT volume opens.
#[inline(never)]
pub fn list<B: OnfiBus>(ftl: &mut AppFtl<'_, B>, buf: &mut [u8]) -> Option<u32> {
    let sd = SdmmcDisk::new(disk(ftl, buf).ok()?);
    let vm: Vm<'_, '_, '_, '_, B> = VolumeManager::new_with_limits(&sd, Clock, 0);
    let Ok(volume) = vm.open_volume(VolumeIdx(0)) else {
        info!("[fat] no FAT16/FAT32 volume in the first partition (the host may have put another filesystem there)");
        return None;
    };
    let root = volume.open_root_dir().ok()?;
    let mut files = 0u32;
    let listed = root.iterate_dir(|e| {
        if !e.attributes.is_volume() {
            files += 1;
            if files <= 16 {
                let name = |b| core::str::from_utf8(b).unwrap_or("?");
                info!(
                    "[fat]   {}.{} {} bytes{}",
                    name(e.name.base_name()),
                    name(e.name.extension()),
                    e.size,
                    if e.attributes.is_directory() { " (directory)" } else { "" }
                );
            }
        }
        ControlFlow::Continue(())
    });
    if listed.is_err() {
        info!("[fat] the root directory does not list");
        return None;
    }
    info!("[fat] the FAT volume's root directory holds {} entries", files);
    Some(files)
}

/// Formats the disk as one FAT16 volume ([`format`]), writes the two files, reads them back and
/// lists them.
#[inline(never)]
pub fn create<B: OnfiBus>(ftl: &mut AppFtl<'_, B>, buf: &mut [u8]) -> Result<(), Failed> {
    format(ftl, buf)?;
    let disk = disk(ftl, buf)?;
    let (p0, r0) = nand_ops(&disk);
    let t0 = now();
    let sd = SdmmcDisk::new(disk);
    {
        let vm: Vm<'_, '_, '_, '_, B> = VolumeManager::new_with_limits(&sd, Clock, 0);
        write_files(&vm)?;
        let t1 = now();
        let (p1, r1) = sd.with_disk(|d| nand_ops(d)).map_err(|e| failed("disk", e))?;
        info!(
            "[fat] created HELLO.TXT ({} bytes) and DATA.BIN ({} bytes, pieces of 1-512 bytes) in {} us: NAND {} \
             programs, {} reads",
            HELLO.len(),
            DATA_LEN,
            ticks_to_us(t1 - t0),
            p1 - p0,
            r1 - r0
        );
        verify_files(&vm, "read back")
    }
}

/// Opens the volume on the FTL's logical space (no format), lists and reads the files again.
#[inline(never)]
pub fn check<B: OnfiBus>(ftl: &mut AppFtl<'_, B>, buf: &mut [u8], what: &str) -> Result<(), Failed> {
    let sd = SdmmcDisk::new(disk(ftl, buf)?);
    let vm: Vm<'_, '_, '_, '_, B> = VolumeManager::new_with_limits(&sd, Clock, 0);
    verify_files(&vm, what)
}

fn write_files<B: OnfiBus>(vm: &Vm<'_, '_, '_, '_, B>) -> Result<(), Failed> {
    let volume = vm.open_volume(VolumeIdx(0)).map_err(|e| failed("open volume", e))?;
    let root = volume.open_root_dir().map_err(|e| failed("open root", e))?;
    let f = root
        .open_file_in_dir("HELLO.TXT", Mode::ReadWriteCreate)
        .map_err(|e| failed("create HELLO.TXT", e))?;
    f.write(HELLO).map_err(|e| failed("write HELLO.TXT", e))?;
    f.close().map_err(|e| failed("close HELLO.TXT", e))?;
    let f =
        root.open_file_in_dir("DATA.BIN", Mode::ReadWriteCreate).map_err(|e| failed("create DATA.BIN", e))?;
    let mut chunk = [0u8; 512];
    let mut at = 0u32;
    for n in PIECES.iter().cycle() {
        let n = (*n as u32).min(DATA_LEN - at);
        for (i, b) in chunk[..n as usize].iter_mut().enumerate() {
            *b = data_byte(at + i as u32);
        }
        f.write(&chunk[..n as usize]).map_err(|e| failed("write DATA.BIN", e))?;
        at += n;
        if at == DATA_LEN {
            break;
        }
    }
    f.close().map_err(|e| failed("close DATA.BIN", e))?;
    root.close().map_err(|e| failed("close root", e))?;
    volume.close().map_err(|e| failed("close volume", e))
}

/// Lists the root directory (exactly the two files, with their lengths), then reads both and
/// compares them with their definitions.
fn verify_files<B: OnfiBus>(vm: &Vm<'_, '_, '_, '_, B>, what: &str) -> Result<(), Failed> {
    let volume = vm.open_volume(VolumeIdx(0)).map_err(|e| failed("open volume", e))?;
    let root = volume.open_root_dir().map_err(|e| failed("open root", e))?;
    let (mut hello, mut data, mut other) = (None, None, 0u32);
    root.iterate_dir(|e| {
        if !e.attributes.is_volume() {
            match (e.name.base_name(), e.name.extension()) {
                (b"HELLO", b"TXT") => hello = Some(e.size),
                (b"DATA", b"BIN") => data = Some(e.size),
                _ => other += 1,
            }
        }
        ControlFlow::Continue(())
    })
    .map_err(|e| failed("list root", e))?;
    if hello != Some(HELLO.len() as u32) || data != Some(DATA_LEN) || other != 0 {
        error!(
            "[fat] {}: root lists HELLO.TXT {:?} and DATA.BIN {:?} bytes and {} other entries; want {} and {}, none",
            what,
            hello,
            data,
            other,
            HELLO.len(),
            DATA_LEN
        );
        return Err(Failed);
    }
    let mut chunk = [0u8; 512];
    let f = root.open_file_in_dir("HELLO.TXT", Mode::ReadOnly).map_err(|e| failed("open HELLO.TXT", e))?;
    let n = f.read(&mut chunk).map_err(|e| failed("read HELLO.TXT", e))?;
    if chunk[..n] != *HELLO || !f.is_eof() {
        error!("[fat] {}: HELLO.TXT reads {} bytes that differ from what was written", what, n);
        return Err(Failed);
    }
    f.close().map_err(|e| failed("close HELLO.TXT", e))?;
    let f = root.open_file_in_dir("DATA.BIN", Mode::ReadOnly).map_err(|e| failed("open DATA.BIN", e))?;
    let mut at = 0u32;
    while !f.is_eof() {
        let n = f.read(&mut chunk).map_err(|e| failed("read DATA.BIN", e))?;
        if let Some(i) = (0..n).find(|&i| chunk[i] != data_byte(at + i as u32)) {
            error!("[fat] {}: DATA.BIN differs at byte {}", what, at + i as u32);
            return Err(Failed);
        }
        at += n as u32;
        if n == 0 {
            break;
        }
    }
    if at != DATA_LEN {
        error!("[fat] {}: DATA.BIN reads {} bytes, want {}", what, at, DATA_LEN);
        return Err(Failed);
    }
    f.close().map_err(|e| failed("close DATA.BIN", e))?;
    root.close().map_err(|e| failed("close root", e))?;
    volume.close().map_err(|e| failed("close volume", e))?;
    info!("[fat] {}: root lists HELLO.TXT and DATA.BIN, both read back as written", what);
    Ok(())
}

/// Whether `sector` is a master boot record (the signature, and a first partition of a FAT type):
/// the first page of a disk formatted by [`create`] or by a PC.
pub fn is_mbr(sector: &[u8]) -> bool {
    sector.len() >= 512
        && sector[510..512] == [0x55, 0xAA]
        && matches!(sector[446 + 4], 0x01 | 0x04 | 0x06 | 0x0B | 0x0C | 0x0E)
}
