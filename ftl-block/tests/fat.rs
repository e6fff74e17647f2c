//! FAT on the FTL through embedded-sdmmc (the code the MCU runs): the emulated device is
//! formatted either by `mkfs.fat` (a FAT16 partition image, written behind an MBR through the
//! adapter) or by `ftl_block::mkfs::format_fat16` (what firmware would run); embedded-sdmmc (over [`SdmmcDisk`]) then creates a directory and files, writes, appends,
//! reads and lists them; power is cut and the FTL remounted, and everything reads and lists the
//! same; finally tools nobody here wrote check the partition as the FTL holds it: `fsck.fat -n`
//! (dosfstools) finds no error, `mdir` and `mcopy` (mtools) list and read the same files.
//!
//! A missing tool fails the test with a message naming `scripts/setup.sh`; nothing is skipped.

mod common;

use std::collections::BTreeMap;
use std::ops::ControlFlow;
use std::path::PathBuf;
use std::process::Command;

use common::{emulator, is_cut, open};
use embedded_sdmmc::{Mode, TimeSource, Timestamp, VolumeIdx, VolumeManager};
use ftl_block::mkfs::format_fat16;
use ftl_block::sdmmc::SdmmcDisk;
use ftl_block::SECTOR_SIZE;
use ftl_core::Config;
use nand_hal::Geometry;
use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;
use sim_host::memory::FtlMemory;

/// The partition starts 64 sectors in (32 KiB: a whole number of 2 KiB pages).
const PART_START: u64 = 64;

/// 128 blocks of 64 x 2 KiB pages (16 MiB raw), 25% over-provisioning.
fn geometry() -> Geometry {
    Geometry { blocks_per_plane: 64, ..Geometry::MT29F4G08 }
}

fn config() -> Config {
    Config::for_over_provisioning(&geometry(), 25)
}

struct Clock;

impl TimeSource for Clock {
    fn get_timestamp(&self) -> Timestamp {
        Timestamp {
            year_since_1970: 56,
            zero_indexed_month: 10,
            zero_indexed_day: 25,
            hours: 8,
            minutes: 0,
            seconds: 0,
        }
    }
}

fn require(tools: &[&str]) {
    for tool in tools {
        let found = std::env::var_os("PATH")
            .is_some_and(|paths| std::env::split_paths(&paths).any(|d| d.join(tool).is_file()));
        assert!(
            found,
            "`{tool}` is not installed: run `bash scripts/setup.sh` (it installs dosfstools and mtools)"
        );
    }
}

fn temp(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("ftl-block-fat-{}-{name}", std::process::id()))
}

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{cmd:?} failed ({}):\n{text}", out.status);
    text
}

/// The device image: an MBR with one FAT16 (LBA) partition, formatted by `mkfs.fat`.
fn image(sectors: u64) -> Vec<u8> {
    let part_sectors = (sectors - PART_START) / 8 * 8;
    let path = temp("mkfs.img");
    let _ = std::fs::remove_file(&path);
    run(Command::new("mkfs.fat")
        .args(["-F", "16", "-s", "4", "-S", "512", "-h"])
        .arg(PART_START.to_string())
        .args(["-i", "1a2b3c4d", "-n", "NANDFTL", "-C"])
        .arg(&path)
        .arg((part_sectors / 2).to_string()));
    let part = std::fs::read(&path).unwrap();
    std::fs::remove_file(&path).unwrap();
    assert_eq!(part.len() as u64, part_sectors * SECTOR_SIZE as u64);
    let mut img = vec![0u8; PART_START as usize * SECTOR_SIZE];
    let entry = &mut img[446..462];
    entry[4] = 0x0E; // FAT16, LBA
    entry[8..12].copy_from_slice(&(PART_START as u32).to_le_bytes());
    entry[12..16].copy_from_slice(&(part_sectors as u32).to_le_bytes());
    img[510] = 0x55;
    img[511] = 0xAA;
    img.extend_from_slice(&part);
    img
}

fn bytes(seed: u64, len: usize) -> Vec<u8> {
    let mut v = vec![0u8; len];
    ChaCha8Rng::seed_from_u64(seed).fill_bytes(&mut v);
    v
}

/// What the filesystem should hold: path -> content.
fn expected() -> BTreeMap<String, Vec<u8>> {
    let mut m = BTreeMap::new();
    m.insert("HELLO.TXT".to_string(), b"Hello from the FTL\r\n".to_vec());
    m.insert("DATA.BIN".to_string(), bytes(1, 300 * 1024 + 123));
    let mut log = Vec::new();
    for i in 0..50 {
        log.extend_from_slice(format!("line {i}: the board as a disk\r\n").as_bytes());
    }
    m.insert("LOG.TXT".to_string(), log);
    m.insert("SUB/INNER.BIN".to_string(), bytes(2, 20_000));
    m
}

type Vm<'d, 'a> = VolumeManager<&'d SdmmcDisk<common::TestFtl<'a>, Vec<u8>>, Clock, 4, 4, 1>;

/// Writes the files through embedded-sdmmc: `DATA.BIN` in uneven pieces, `LOG.TXT` appended a
/// line per open.
fn write_files(vm: &Vm<'_, '_>) {
    let files = expected();
    let volume = vm.open_volume(VolumeIdx(0)).unwrap();
    let root = volume.open_root_dir().unwrap();
    let f = root.open_file_in_dir("HELLO.TXT", Mode::ReadWriteCreate).unwrap();
    f.write(&files["HELLO.TXT"]).unwrap();
    f.close().unwrap();
    let f = root.open_file_in_dir("DATA.BIN", Mode::ReadWriteCreate).unwrap();
    let data = &files["DATA.BIN"];
    let mut at = 0;
    for step in [1usize, 511, 512, 513, 4096, 700, 65536].iter().cycle() {
        let n = (*step).min(data.len() - at);
        f.write(&data[at..at + n]).unwrap();
        at += n;
        if at == data.len() {
            break;
        }
    }
    f.close().unwrap();
    for line in files["LOG.TXT"].split_inclusive(|&b| b == b'\n') {
        let f = root.open_file_in_dir("LOG.TXT", Mode::ReadWriteCreateOrAppend).unwrap();
        f.write(line).unwrap();
        f.close().unwrap();
    }
    root.make_dir_in_dir("SUB").unwrap();
    let sub = root.open_dir("SUB").unwrap();
    let f = sub.open_file_in_dir("INNER.BIN", Mode::ReadWriteCreate).unwrap();
    f.write(&files["SUB/INNER.BIN"]).unwrap();
    f.close().unwrap();
    sub.close().unwrap();
    root.close().unwrap();
    volume.close().unwrap();
}

/// Lists and reads every file of `dir` (named `prefix...`) through embedded-sdmmc.
fn read_dir<D: embedded_sdmmc::BlockDevice, T: TimeSource>(
    d: &embedded_sdmmc::Directory<'_, D, T, 4, 4, 1>,
    prefix: &str,
    found: &mut BTreeMap<String, Vec<u8>>,
) {
    let mut names = Vec::new();
    d.iterate_dir(|e| {
        if !e.attributes.is_volume() && !e.attributes.is_directory() {
            names.push((e.name.to_string(), e.size));
        }
        ControlFlow::Continue(())
    })
    .unwrap();
    for (name, size) in names {
        let f = d.open_file_in_dir(name.as_str(), Mode::ReadOnly).unwrap();
        let mut content = vec![0u8; size as usize];
        let mut at = 0;
        while at < content.len() {
            let n = f.read(&mut content[at..]).unwrap();
            assert!(n > 0, "short read of {name}");
            at += n;
        }
        assert!(f.is_eof());
        f.close().unwrap();
        found.insert(format!("{prefix}{name}"), content);
    }
}

/// Lists and reads everything back through embedded-sdmmc.
fn read_files(vm: &Vm<'_, '_>) -> BTreeMap<String, Vec<u8>> {
    let volume = vm.open_volume(VolumeIdx(0)).unwrap();
    let root = volume.open_root_dir().unwrap();
    let mut found = BTreeMap::new();
    read_dir(&root, "", &mut found);
    let sub = root.open_dir("SUB").unwrap();
    read_dir(&sub, "SUB/", &mut found);
    sub.close().unwrap();
    root.close().unwrap();
    volume.close().unwrap();
    found
}

/// How the device gets its filesystem.
enum Format {
    /// `mkfs.fat` makes a partition image, written behind an MBR at [`PART_START`].
    MkfsFat,
    /// `ftl_block::mkfs::format_fat16` on the device (what firmware would do).
    Firmware,
}

/// Formats, then writes and reads the files through embedded-sdmmc, cuts power, remounts, reads
/// again, and checks the partition with fsck.fat, mdir and mcopy. Returns the cluster size.
fn round_trip(how: Format) -> u64 {
    require(&["mkfs.fat", "fsck.fat", "mdir", "mcopy"]);
    let geo = geometry();
    let mut emu = emulator(geo, 0.5, 0.5);
    let mut mem = FtlMemory::new(&geo, &config());
    let files = expected();
    let (sectors, part_start, part_sectors, cluster);
    {
        let mut disk = open(&mut emu, &mut mem, config(), true).unwrap();
        sectors = disk.sectors();
        match how {
            Format::MkfsFat => {
                disk.write(0, &image(sectors)).unwrap();
                disk.flush().unwrap();
                (part_start, part_sectors, cluster) = (PART_START, (sectors - PART_START) / 8 * 8, 4);
            }
            Format::Firmware => {
                let l = format_fat16(&mut disk, 0x1a2b_3c4d, b"NANDFTL    ").unwrap();
                (part_start, part_sectors, cluster) = (l.start, l.sectors, l.cluster_sectors);
            }
        }
        let sd = SdmmcDisk::new(disk);
        let vm: Vm<'_, '_> = VolumeManager::new(&sd, Clock);
        write_files(&vm);
        assert_eq!(read_files(&vm), files);
        drop(vm);
        // Power off without an unmount or a flush: embedded-sdmmc's writes were flushed as they
        // went (write-through).
        let mut disk = sd.into_inner();
        disk.store_mut().nand_mut().power_cut_now();
        let e = disk.read(0, &mut [0u8; SECTOR_SIZE]).unwrap_err();
        assert!(is_cut(&e), "{e:?}");
    }
    emu.restore_power();
    let disk = open(&mut emu, &mut mem, config(), false).unwrap();
    assert_eq!(disk.sectors(), sectors);
    let sd = SdmmcDisk::new(disk);
    {
        let vm: Vm<'_, '_> = VolumeManager::new(&sd, Clock);
        assert_eq!(read_files(&vm), files, "after a power cut and remount");
    }
    // The partition as the FTL holds it, checked by dosfstools and mtools.
    let mut disk = sd.into_inner();
    let mut part = vec![0u8; part_sectors as usize * SECTOR_SIZE];
    disk.read(part_start, &mut part).unwrap();
    let path = temp(if matches!(how, Format::MkfsFat) { "mkfs-part.img" } else { "fw-part.img" });
    std::fs::write(&path, &part).unwrap();
    let fsck = run(Command::new("fsck.fat").arg("-n").arg(&path));
    // Clusters in use: each file's, rounded up to whole clusters, and one for SUB.
    let cb = cluster as usize * SECTOR_SIZE;
    let used: usize = files.values().map(|c| c.len().div_ceil(cb)).sum::<usize>() + 1;
    assert!(fsck.contains(&format!(" {used}/")), "fsck.fat (expected {used} clusters in use):\n{fsck}");
    let listing = run(Command::new("mdir").args(["-b", "-/", "-i"]).arg(&path).arg("::"));
    let mut listed: Vec<&str> =
        listing.lines().map(|l| l.trim_start_matches("::/")).filter(|l| !l.ends_with('/')).collect();
    listed.sort();
    assert_eq!(listed, files.keys().map(String::as_str).collect::<Vec<_>>(), "mdir:\n{listing}");
    for (name, content) in &files {
        let out =
            Command::new("mcopy").arg("-i").arg(&path).arg(format!("::{name}")).arg("-").output().unwrap();
        assert!(out.status.success() && out.stdout == *content, "mcopy ::{name}");
    }
    std::fs::remove_file(&path).unwrap();
    cluster
}

#[test]
fn embedded_sdmmc_on_a_mkfs_fat_volume_survives_a_power_cut_and_passes_fsck() {
    round_trip(Format::MkfsFat);
}

#[test]
fn embedded_sdmmc_on_a_firmware_formatted_volume_survives_a_power_cut_and_passes_fsck() {
    // Clusters of one 2 KiB page.
    assert_eq!(round_trip(Format::Firmware), 4);
}
