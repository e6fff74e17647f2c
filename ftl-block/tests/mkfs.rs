//! `ftl_block::mkfs::format_fat16` over a range of disk and page sizes (on a sparse in-RAM page
//! store, so that volumes up to 2 GiB cost only their metadata): the layout's invariants (cluster
//! count within FAT16's limits, FATs large enough, data region and partition aligned to the FTL
//! page, inside the disk), `fsck.fat -n` on the partition after embedded-sdmmc wrote a file to
//! it, and `Error::Size` for disks FAT16 cannot hold. The FTL on the emulator is formatted this
//! way in `fat.rs`.

use std::collections::HashMap;
use std::io::{Seek, SeekFrom, Write};
use std::ops::ControlFlow;
use std::process::Command;

use embedded_sdmmc::{Mode, TimeSource, Timestamp, VolumeIdx, VolumeManager};
use ftl_block::mkfs::{format_fat16, FatLayout};
use ftl_block::sdmmc::SdmmcDisk;
use ftl_block::{Error, PageStore, SectorDisk, SECTOR_SIZE};

/// Pages in a map; missing pages read as zeros.
struct SparseStore {
    page: usize,
    pages: u32,
    data: HashMap<u32, Vec<u8>>,
}

impl PageStore for SparseStore {
    fn page_bytes(&self) -> usize {
        self.page
    }
    fn pages(&self) -> u32 {
        self.pages
    }
    fn read_pages(&mut self, page: u32, buf: &mut [u8]) -> Result<(), ftl_core::Error> {
        for (i, b) in buf.chunks_mut(self.page).enumerate() {
            match self.data.get(&(page + i as u32)) {
                Some(d) => b.copy_from_slice(d),
                None => b.fill(0),
            }
        }
        Ok(())
    }
    fn write_pages(&mut self, page: u32, data: &[u8]) -> Result<(), ftl_core::Error> {
        for (i, d) in data.chunks(self.page).enumerate() {
            self.data.insert(page + i as u32, d.to_vec());
        }
        Ok(())
    }
    fn trim_pages(&mut self, page: u32, count: u32) -> Result<(), ftl_core::Error> {
        for p in page..page + count {
            self.data.remove(&p);
        }
        Ok(())
    }
    fn flush(&mut self) -> Result<(), ftl_core::Error> {
        Ok(())
    }
}

struct Clock;

impl TimeSource for Clock {
    fn get_timestamp(&self) -> Timestamp {
        Timestamp {
            year_since_1970: 56,
            zero_indexed_month: 0,
            zero_indexed_day: 0,
            hours: 0,
            minutes: 0,
            seconds: 0,
        }
    }
}

fn disk(sectors: u64, spp: u64) -> SectorDisk<SparseStore, Vec<u8>> {
    let page = spp as usize * SECTOR_SIZE;
    let store = SparseStore { page, pages: (sectors / spp) as u32, data: HashMap::new() };
    SectorDisk::new(store, vec![0; page]).unwrap()
}

#[test]
fn layouts_hold_fat16_invariants_and_pass_fsck() {
    assert!(
        std::env::var_os("PATH")
            .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join("fsck.fat").is_file())),
        "`fsck.fat` is not installed: run `bash scripts/setup.sh`"
    );
    const MIB: u64 = 2048;
    for (sectors, spp) in [
        (4 * MIB, 4),
        (16 * MIB, 1),
        (100 * MIB + 3, 4),
        (430 * MIB, 4),
        (430 * MIB, 8),
        (1024 * MIB, 32),
        (2047 * MIB, 4),
    ] {
        let mut d = disk(sectors, spp);
        let l = format_fat16(&mut d, 7, b"NANDFTL    ").unwrap();
        let what = format!("{} MiB, {spp} sectors per page: {l:?}", sectors / MIB);
        assert!((4085..=65524).contains(&l.clusters), "{what}");
        assert!(l.fat_sectors * 256 >= l.clusters + 2, "{what}: FAT too small");
        assert!(
            l.start.is_multiple_of(spp) && l.data_start().is_multiple_of(spp.max(l.cluster_sectors)),
            "{what}: alignment"
        );
        assert!(l.start + l.sectors <= d.sectors(), "{what}: past the end");
        assert_eq!(l.data_start() + l.clusters * l.cluster_sectors, l.start + l.sectors, "{what}");
        if sectors >= 4085 * spp * 2 {
            assert!(l.cluster_sectors >= spp, "{what}: a cluster is at least a page when the disk allows");
        }
        assert_eq!(FatLayout::plan(d.sectors(), spp), Ok(l));
        // embedded-sdmmc mounts it and writes a file.
        let sd = SdmmcDisk::new(d);
        {
            let vm: VolumeManager<_, _, 4, 4, 1> = VolumeManager::new(&sd, Clock);
            let volume = vm.open_volume(VolumeIdx(0)).unwrap();
            let root = volume.open_root_dir().unwrap();
            let f = root.open_file_in_dir("A.BIN", Mode::ReadWriteCreate).unwrap();
            f.write(&vec![0x5A; 10_000]).unwrap();
            f.close().unwrap();
            let mut names = Vec::new();
            root.iterate_dir(|e| {
                names.push((e.name.to_string(), e.size));
                ControlFlow::Continue(())
            })
            .unwrap();
            assert!(names.contains(&("A.BIN".to_string(), 10_000)), "{what}: {names:?}");
        }
        // The partition as a sparse file for fsck.fat.
        let mut d = sd.into_inner();
        let path = std::env::temp_dir().join(format!("ftl-block-mkfs-{}.img", std::process::id()));
        let mut f = std::fs::File::create(&path).unwrap();
        f.set_len(l.sectors * SECTOR_SIZE as u64).unwrap();
        let page_sectors = spp;
        let mut pages: Vec<u32> = d.store().data.keys().copied().collect();
        pages.sort();
        for p in pages {
            let first = p as u64 * page_sectors;
            let mut buf = vec![0u8; spp as usize * SECTOR_SIZE];
            d.read(first, &mut buf).unwrap();
            for (i, s) in buf.chunks(SECTOR_SIZE).enumerate() {
                let lba = first + i as u64;
                if lba >= l.start && lba < l.start + l.sectors {
                    f.seek(SeekFrom::Start((lba - l.start) * SECTOR_SIZE as u64)).unwrap();
                    f.write_all(s).unwrap();
                }
            }
        }
        drop(f);
        let out = Command::new("fsck.fat").arg("-n").arg(&path).output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
        std::fs::remove_file(&path).unwrap();
        let used = 10_000u64.div_ceil(l.cluster_sectors * SECTOR_SIZE as u64);
        assert!(out.status.success(), "{what}: fsck.fat:\n{text}");
        assert!(text.contains(&format!(" {used}/{} clusters", l.clusters)), "{what}: fsck.fat:\n{text}");
    }
}

#[test]
fn disks_outside_fat16_are_refused_untouched() {
    for (sectors, spp) in [(2048u64, 4u64), (4000, 1), (8 << 21, 4)] {
        let mut d = disk(sectors, spp);
        d.write(0, &[0xEE; SECTOR_SIZE]).unwrap();
        assert_eq!(format_fat16(&mut d, 7, b"NANDFTL    "), Err(Error::Size), "{sectors} sectors");
        let mut b = [0u8; SECTOR_SIZE];
        d.read(0, &mut b).unwrap();
        assert_eq!(b, [0xEE; SECTOR_SIZE], "nothing written");
    }
}
