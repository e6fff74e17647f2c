//! A FAT filesystem on the FTL: the `fatfs` crate formats and uses the FTL's block device
//! ([`BlockDisk`], byte access with read-modify-write over whole pages) on the NAND emulator,
//! writing and overwriting files several times over the device's capacity so that garbage
//! collection and static wear leveling run; freed clusters are trimmed. The logical image is then
//! checked by tools nobody on this project wrote: `fsck.fat -n` (dosfstools) and `mdir` / `mcopy`
//! (mtools), whose listings and file contents must match what was written.
//!
//! `fatfs` 0.3 has no discard hook, so deleting a file only frees its clusters in the FAT; the
//! test does what `fstrim` does on a mounted filesystem: with the filesystem unmounted it reads
//! the FAT, and trims every free cluster's whole pages.
//!
//! A missing tool fails the test with a message naming `scripts/setup.sh`; nothing is skipped.

use std::collections::BTreeMap;
use std::io::{Read, Seek, Write};
use std::path::Path;
use std::process::Command;

use fatfs::{FatType, FileSystem, FormatVolumeOptions, FsOptions};
use ftl_core::policy::DefaultPolicies;
use ftl_core::{Config, Ftl};
use nand_hal::{Geometry, NandFlash};
use rand::{Rng, RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;
use sim_host::emulator::{Emulator, EmulatorConfig};
use sim_host::memory::FtlMemory;
use sim_host::nbd::BlockDisk;

fn require(tools: &[&str]) {
    for tool in tools {
        let found = std::env::var_os("PATH")
            .is_some_and(|paths| std::env::split_paths(&paths).any(|d| d.join(tool).is_file()));
        assert!(
            found,
            "`{tool}` is not installed: run `bash scripts/setup.sh` (it installs qemu-utils, dosfstools \
             and mtools) before the tests"
        );
    }
}

/// 128 blocks of 64 x 2 KiB pages (16 MiB raw) in `planes` planes.
fn geometry(planes: u32) -> Geometry {
    Geometry { blocks_per_plane: 128 / planes, planes_per_lun: planes, ..Geometry::MT29F4G08 }
}

/// The FAT16 layout, from the boot sector.
struct Layout {
    bytes_per_sector: u64,
    cluster_bytes: u64,
    fat_offset: u64,
    data_offset: u64,
    clusters: u32,
}

fn layout<D: Read + Seek>(disk: &mut D) -> Layout {
    let mut bs = [0u8; 512];
    disk.seek(std::io::SeekFrom::Start(0)).unwrap();
    disk.read_exact(&mut bs).unwrap();
    let u16_at = |i: usize| u16::from_le_bytes([bs[i], bs[i + 1]]) as u64;
    let bps = u16_at(11);
    let spc = bs[13] as u64;
    let reserved = u16_at(14);
    let fats = bs[16] as u64;
    let root_entries = u16_at(17);
    let total = match u16_at(19) {
        0 => u32::from_le_bytes([bs[32], bs[33], bs[34], bs[35]]) as u64,
        n => n,
    };
    let fat_sectors = u16_at(22);
    let root_sectors = (root_entries * 32).div_ceil(bps);
    let first_data = reserved + fats * fat_sectors + root_sectors;
    Layout {
        bytes_per_sector: bps,
        cluster_bytes: bps * spc,
        fat_offset: reserved * bps,
        data_offset: first_data * bps,
        clusters: ((total - first_data) / spc) as u32,
    }
}

/// `fstrim` for an unmounted FAT16 volume: trims the whole pages of every free cluster. Returns
/// the pages trimmed.
fn fstrim<N: NandFlash>(disk: &mut BlockDisk<'_, N>) -> u64 {
    let l = layout(disk);
    let mut fat = vec![0u8; 2 * (l.clusters as usize + 2)];
    disk.read_at(l.fat_offset, &mut fat).unwrap();
    let free = |c: u32| fat[2 * c as usize] == 0 && fat[2 * c as usize + 1] == 0;
    let mut trimmed = 0;
    let mut c = 2;
    while c < l.clusters + 2 {
        if !free(c) {
            c += 1;
            continue;
        }
        let start = c;
        while c < l.clusters + 2 && free(c) {
            c += 1;
        }
        let off = l.data_offset + (start - 2) as u64 * l.cluster_bytes;
        trimmed += disk.trim(off, (c - start) as u64 * l.cluster_bytes).unwrap();
    }
    assert_eq!(l.bytes_per_sector, 512);
    trimmed
}

/// Works around fatfs 0.3.6 writing long-name entries for the `.` and `..` entries of a new
/// directory (rafalh/rust-fatfs#117, fixed after 0.3.6): its first slots are `LFN(.)`, `.`,
/// `LFN(..)`, `..`, and fsck.fat requires `.` and `..` in slots 0 and 1. Moves them there and
/// marks the other two slots deleted. `path` is a chain of directory names under the root, in
/// 8.3 form (`"COLD       "`). Returns whether the directory needed the fix.
fn fix_dot_entries<D: Read + Write + Seek>(disk: &mut D, path: &[&[u8; 11]]) -> bool {
    let l = layout(disk);
    let root_offset = l.data_offset - 512 * 32; // the fixed root directory (512 entries)
    let mut dir_offset = root_offset;
    let mut dir_len = 512 * 32;
    for name in path {
        let mut entries = vec![0u8; dir_len as usize];
        disk.seek(std::io::SeekFrom::Start(dir_offset)).unwrap();
        disk.read_exact(&mut entries).unwrap();
        let e = entries
            .chunks(32)
            .find(|e| &e[..11] == *name && e[11] & 0x10 != 0)
            .unwrap_or_else(|| panic!("no directory {}", String::from_utf8_lossy(*name)));
        let cluster = u16::from_le_bytes([e[26], e[27]]) as u64;
        dir_offset = l.data_offset + (cluster - 2) * l.cluster_bytes;
        dir_len = l.cluster_bytes;
    }
    let mut head = [0u8; 128];
    disk.seek(std::io::SeekFrom::Start(dir_offset)).unwrap();
    disk.read_exact(&mut head).unwrap();
    let lfn = |e: &[u8]| e[11] == 0x0F;
    if !(lfn(&head[0..32]) && &head[32..43] == b".          " && lfn(&head[64..96])) {
        return false;
    }
    assert_eq!(&head[96..107], b"..         ");
    let mut fixed = [0u8; 128];
    fixed[..32].copy_from_slice(&head[32..64]);
    fixed[32..64].copy_from_slice(&head[96..128]);
    fixed[64..96].copy_from_slice(&head[0..32]);
    fixed[96..128].copy_from_slice(&head[64..96]);
    fixed[64] = 0xE5;
    fixed[96] = 0xE5;
    disk.seek(std::io::SeekFrom::Start(dir_offset)).unwrap();
    disk.write_all(&fixed).unwrap();
    true
}

fn content(rng: &mut ChaCha8Rng, len: usize) -> Vec<u8> {
    let mut v = vec![0u8; len];
    rng.fill_bytes(&mut v);
    v
}

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().expect("run a tool");
    assert!(
        out.status.success(),
        "{cmd:?} failed ({}): {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn mtools(tool: &str) -> Command {
    let mut c = Command::new(tool);
    // The image has no partition table and an unusual geometry; skip mtools' sanity checks of it.
    c.env("MTOOLS_SKIP_CHECK", "1");
    c
}

#[test]
fn fat_filesystem_on_one_plane_checked_by_fsck_and_mtools() {
    fat_workload(1);
}

/// Two planes: the FTL writes pages round robin over the planes, and FAT's alternating metadata
/// and data writes stress each plane's free reserve separately.
#[test]
fn fat_filesystem_on_two_planes_checked_by_fsck_and_mtools() {
    fat_workload(2);
}

/// Formats FAT16 on a 12.8 MiB FTL device (25% over-provisioning), creates directories, writes,
/// appends to, overwrites and deletes files for four times the capacity, trims free clusters,
/// then checks everything through fatfs, fsck.fat and mtools.
fn fat_workload(planes: u32) {
    require(&["fsck.fat", "mdir", "mcopy", "mlabel"]);
    let g = geometry(planes);
    let cfg = Config {
        // Low limits so static wear leveling has work on a short run.
        wear_spread_limit: 6,
        wear_check_interval: 16,
        ..Config::for_over_provisioning(&g, 25)
    };
    let mut emu = Emulator::new(EmulatorConfig::new(g)).unwrap();
    let mut mem = FtlMemory::new(&g, &cfg);
    let (map, m) = mem.parts();
    let ftl = Ftl::format(&mut emu, DefaultPolicies::default(), map, m, cfg).unwrap();
    let mut disk = BlockDisk::new(ftl).unwrap();
    let capacity = disk.size();

    fatfs::format_volume(
        &mut disk,
        FormatVolumeOptions::new()
            .fat_type(FatType::Fat16)
            .bytes_per_cluster(2048)
            .volume_label(*b"NANDFTL    "),
    )
    .unwrap();
    let mut model: BTreeMap<String, Vec<u8>> = BTreeMap::new();
    let mut rng = ChaCha8Rng::seed_from_u64(42);
    let mut written = 0u64;
    let mut trimmed = 0u64;
    let mut round = 0;
    while written < 4 * capacity {
        // fatfs expects the device positioned at its start.
        disk.rewind().unwrap();
        let fs = FileSystem::new(&mut disk, FsOptions::new()).unwrap();
        assert_eq!(fs.fat_type(), FatType::Fat16);
        let root = fs.root_dir();
        if round == 0 {
            // Cold data: written once, never touched again.
            root.create_dir("cold").unwrap();
            root.create_dir("hot").unwrap();
            root.create_dir("hot/sub").unwrap();
            for i in 0..6 {
                let path = format!("cold/c{i}.bin");
                let data = content(&mut rng, 400_000 + i * 1000);
                root.create_file(&path).unwrap().write_all(&data).unwrap();
                written += data.len() as u64;
                model.insert(path, data);
            }
            let note = b"Written through fatfs on a page-mapping FTL on emulated NAND.\n".to_vec();
            root.create_file("README.TXT").unwrap().write_all(&note).unwrap();
            model.insert("README.TXT".into(), note);
        }
        for _ in 0..12 {
            let slot = rng.random_range(0..10);
            let path =
                if slot < 6 { format!("hot/f{slot}.dat") } else { format!("hot/sub/long name {slot}.txt") };
            let free = fs.stats().unwrap().free_clusters() as u64 * 2048;
            match rng.random_range(0..10) {
                0..=1 if model.contains_key(&path) => {
                    root.remove(&path).unwrap();
                    model.remove(&path);
                }
                2 if model.contains_key(&path) => {
                    // Append.
                    let len = rng.random_range(1..50_000).min(free as usize / 2);
                    let extra = content(&mut rng, len);
                    let mut f = root.open_file(&path).unwrap();
                    f.seek(std::io::SeekFrom::End(0)).unwrap();
                    f.write_all(&extra).unwrap();
                    written += extra.len() as u64;
                    model.get_mut(&path).unwrap().extend_from_slice(&extra);
                }
                _ => {
                    // Create or overwrite with new content of a new size.
                    let old = model.get(&path).map_or(0, |d| d.len() as u64);
                    let room = (free + old).saturating_sub(64 << 10);
                    let len = rng.random_range(1..1_200_000u64).min(room) as usize;
                    let data = content(&mut rng, len);
                    let mut f = root.create_file(&path).unwrap();
                    f.truncate().unwrap();
                    f.write_all(&data).unwrap();
                    written += data.len() as u64;
                    model.insert(path, data);
                }
            }
        }
        // Spot-check through the filesystem.
        for (path, data) in model.iter().filter(|_| rng.random_range(0..4) == 0) {
            let mut back = Vec::new();
            root.open_file(path).unwrap().read_to_end(&mut back).unwrap();
            assert!(back == *data, "{path} differs in round {round}");
        }
        drop(root);
        fs.unmount().unwrap();
        if round == 0 {
            for path in [&[b"COLD       "][..], &[b"HOT        "], &[b"HOT        ", b"SUB        "]] {
                assert!(fix_dot_entries(&mut disk, path), "fatfs 0.3.6's dot entries were fixed");
            }
        }
        if round % 3 == 2 {
            trimmed += fstrim(&mut disk);
        }
        round += 1;
    }
    trimmed += fstrim(&mut disk);
    disk.flush().unwrap();

    // Everything reads back through fatfs after the trims.
    {
        disk.rewind().unwrap();
        let fs = FileSystem::new(&mut disk, FsOptions::new()).unwrap();
        for (path, data) in &model {
            let mut back = Vec::new();
            fs.root_dir().open_file(path).unwrap().read_to_end(&mut back).unwrap();
            assert!(back == *data, "{path} differs at the end");
        }
        fs.unmount().unwrap();
    }
    let c = *disk.ftl().counters();
    println!(
        "{planes} plane(s): {round} rounds, {} MiB written to files ({:.1}x the {} MiB device), {trimmed} pages trimmed; \
         FTL: {} host pages written, {} GC blocks, {} GC copies, {} wear-leveling moves, {} erases",
        written >> 20,
        written as f64 / capacity as f64,
        capacity >> 20,
        c.host_write_pages,
        c.gc_blocks,
        c.gc_page_copies,
        c.wear_level_moves,
        c.nand_erases
    );
    assert!(c.gc_blocks > 0 && c.gc_page_copies > 0, "GC ran: {c:?}");
    assert!(c.wear_level_moves > 0, "static wear leveling ran: {c:?}");
    assert!(c.host_trim_pages > 0 && trimmed > 0, "freed clusters were trimmed: {c:?}");

    // Export the logical image and let dosfstools and mtools judge it.
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("fat-{planes}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let img = dir.join("fat.img");
    let mut image = vec![0u8; capacity as usize];
    disk.read_at(0, &mut image).unwrap();
    std::fs::write(&img, &image).unwrap();
    let fsck = run(Command::new("fsck.fat").arg("-n").arg(&img));
    assert!(!fsck.to_lowercase().contains("dirty"), "{fsck}");
    let img_s = img.to_str().unwrap();
    let listing = run(mtools("mdir").args(["-/", "-b", "-i", img_s, "::"]));
    let listed: Vec<String> = listing
        .lines()
        .map(|l| l.trim_start_matches("::/").to_string())
        .filter(|l| !l.ends_with('/') && !l.is_empty())
        .collect();
    let mut want: Vec<String> = model.keys().cloned().collect();
    let mut got = listed.clone();
    want.sort();
    got.sort();
    assert_eq!(got, want, "mdir listing:\n{listing}");
    let label = run(mtools("mlabel").args(["-s", "-i", img_s, "::"]));
    assert!(label.contains("NANDFTL"), "{label}");
    for (path, data) in &model {
        let out = mtools("mcopy").args(["-n", "-i", img_s, &format!("::/{path}"), "-"]).output().unwrap();
        assert!(out.status.success(), "mcopy {path}: {out:?}");
        assert!(out.stdout == *data, "mcopy {path}: content differs");
    }

    // The FTL itself survives an unmount and mount with the same image.
    let ftl = disk.into_ftl();
    ftl.unmount().unwrap();
    let (map, m) = mem.parts();
    let mut disk =
        BlockDisk::new(Ftl::mount(&mut emu, DefaultPolicies::default(), map, m, cfg).unwrap()).unwrap();
    let mut again = vec![0u8; capacity as usize];
    disk.read_at(0, &mut again).unwrap();
    assert!(again == image, "the image changed across unmount and mount");
}
