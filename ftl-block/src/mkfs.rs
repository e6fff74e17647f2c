//! [`format_fat16`]: puts an MBR and one FAT16 volume on a [`SectorDisk`], so that firmware can
//! create a filesystem that embedded-sdmmc (which reads FAT16/FAT32 but cannot format) then uses.
//! Written here because no `no_std` crate formats FAT (fatfs 0.3 needs `std`; embedded-sdmmc only
//! mounts); it follows Microsoft's FAT specification (BPB fields, FAT size formula, cluster count
//! limits) and is checked on the host by `fsck.fat` and embedded-sdmmc.
//!
//! Layout: MBR in sector 0 (one partition, type 0x0E "FAT16 LBA"), the volume from
//! [`FatLayout::start`] (a multiple of the FTL page, 1 MiB when the disk is large enough) to the
//! end of the disk, rounded down to whole clusters. Clusters are one FTL page (or a multiple) and
//! the data region starts on a page boundary, so a cluster write is a whole-page write (no
//! read-modify-write in the adapter). Two FATs, 512 root directory entries, a volume label entry.
//!
//! Formatting first discards the whole disk (trim: whole pages read as zeros afterwards, and the
//! FTL forgets the old data), then writes the MBR, boot sector, FATs and root directory, and
//! flushes. It never allocates: sectors are produced on the fly through
//! [`SectorDisk::write_with`]. FAT16 needs 4085 to 65524 clusters of at most 64 sectors: between
//! about 2 MiB and 2 GiB; outside that it returns [`Error::Size`] and writes nothing.
//!
//! Power loss: a cut during formatting leaves a partly formatted disk (format again); after it
//! returns Ok, the volume is durable.

use crate::disk::SectorDisk;
use crate::error::Error;
use crate::store::PageStore;
use crate::SECTOR_SIZE;

const MIN_CLUSTERS: u64 = 4085;
const MAX_CLUSTERS: u64 = 65524;
const ROOT_ENTRIES: u64 = 512;
const ROOT_SECTORS: u64 = ROOT_ENTRIES * 32 / SECTOR_SIZE as u64;

/// Where the volume's parts are, in sectors from the start of the disk.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct FatLayout {
    /// First sector of the partition (its boot sector).
    pub start: u64,
    /// Sectors in the partition.
    pub sectors: u64,
    /// Reserved sectors (boot sector and padding that aligns the data region).
    pub reserved: u64,
    /// Sectors per FAT.
    pub fat_sectors: u64,
    /// Sectors per cluster.
    pub cluster_sectors: u64,
    /// Data clusters.
    pub clusters: u64,
}

impl FatLayout {
    /// First sector of the data region (cluster 2).
    pub fn data_start(&self) -> u64 {
        self.start + self.reserved + 2 * self.fat_sectors + ROOT_SECTORS
    }

    /// The layout for a disk of `sectors` sectors with `sectors_per_page` sectors per FTL page:
    /// the smallest cluster of at least a page (up to 64 sectors) that FAT16 can count, else the
    /// largest smaller one (disks too small for page-sized clusters).
    pub fn plan(sectors: u64, sectors_per_page: u64) -> Result<FatLayout, Error> {
        let spp = sectors_per_page.max(1);
        let start =
            if sectors >= 64 * 2048 { 2048u64.div_ceil(spp) * spp } else { spp.max(8).div_ceil(spp) * spp };
        let avail = sectors.checked_sub(start).ok_or(Error::Size)?;
        let first = spp.next_power_of_two().min(64);
        let larger = (0..7).map(|k| first << k).take_while(|&c| c <= 64);
        let smaller = (1..7).map(|k| first >> k).take_while(|&c| c >= 1);
        larger.chain(smaller).find_map(|spc| Self::with_clusters(start, avail, spc, spp)).ok_or(Error::Size)
    }

    /// The layout with clusters of `spc` sectors, if FAT16 can count them.
    fn with_clusters(start: u64, avail: u64, spc: u64, spp: u64) -> Option<FatLayout> {
        let align = spp.max(spc);
        // The FAT size from the specification's formula (with one reserved sector, which only
        // overestimates it once padding is added), then padding so the data region is aligned.
        let tmp1 = avail.checked_sub(1 + ROOT_SECTORS)?;
        let fat_sectors = tmp1.div_ceil(256 * spc + 2);
        let meta = 1 + 2 * fat_sectors + ROOT_SECTORS;
        let reserved = 1 + ((start + meta).div_ceil(align) * align - (start + meta));
        let data = avail.checked_sub(reserved + 2 * fat_sectors + ROOT_SECTORS)?;
        let clusters = data / spc;
        if !(MIN_CLUSTERS..=MAX_CLUSTERS).contains(&clusters) || reserved > u16::MAX as u64 {
            return None;
        }
        let used = reserved + 2 * fat_sectors + ROOT_SECTORS + clusters * spc;
        Some(FatLayout { start, sectors: used, reserved, fat_sectors, cluster_sectors: spc, clusters })
    }
}

/// Writes sector `i` of the volume's metadata (boot sector, reserved, FATs, root directory).
fn meta_sector(l: &FatLayout, volume_id: u32, label: &[u8; 11], i: u64, s: &mut [u8]) {
    s.fill(0);
    let fat1 = l.reserved;
    let fat2 = fat1 + l.fat_sectors;
    let root = fat2 + l.fat_sectors;
    if i == 0 {
        s[0..3].copy_from_slice(&[0xEB, 0x3C, 0x90]);
        s[3..11].copy_from_slice(b"NANDFTL ");
        s[11..13].copy_from_slice(&(SECTOR_SIZE as u16).to_le_bytes());
        s[13] = l.cluster_sectors as u8;
        s[14..16].copy_from_slice(&(l.reserved as u16).to_le_bytes());
        s[16] = 2;
        s[17..19].copy_from_slice(&(ROOT_ENTRIES as u16).to_le_bytes());
        if l.sectors < 0x10000 {
            s[19..21].copy_from_slice(&(l.sectors as u16).to_le_bytes());
        } else {
            s[32..36].copy_from_slice(&(l.sectors as u32).to_le_bytes());
        }
        s[21] = 0xF8;
        s[22..24].copy_from_slice(&(l.fat_sectors as u16).to_le_bytes());
        s[24..26].copy_from_slice(&63u16.to_le_bytes());
        s[26..28].copy_from_slice(&255u16.to_le_bytes());
        s[28..32].copy_from_slice(&(l.start as u32).to_le_bytes());
        s[36] = 0x80;
        s[38] = 0x29;
        s[39..43].copy_from_slice(&volume_id.to_le_bytes());
        s[43..54].copy_from_slice(label);
        s[54..62].copy_from_slice(b"FAT16   ");
        s[510] = 0x55;
        s[511] = 0xAA;
    } else if i == fat1 || i == fat2 {
        // Entries 0 and 1: the media byte and end-of-chain.
        s[0..4].copy_from_slice(&[0xF8, 0xFF, 0xFF, 0xFF]);
    } else if i == root {
        s[0..11].copy_from_slice(label);
        s[11] = 0x08; // volume label
    }
}

/// Formats the whole disk as one FAT16 volume behind an MBR (see the module documentation);
/// `label` is space-padded ASCII. Returns the layout.
pub fn format_fat16<S: PageStore, B: AsMut<[u8]>>(
    disk: &mut SectorDisk<S, B>,
    volume_id: u32,
    label: &[u8; 11],
) -> Result<FatLayout, Error> {
    let l = FatLayout::plan(disk.sectors(), disk.sectors_per_page() as u64)?;
    disk.trim(0, disk.sectors())?;
    disk.write_with(0, 1, |_, s| {
        s.fill(0);
        let e = &mut s[446..462];
        e[4] = 0x0E; // FAT16, LBA
        e[8..12].copy_from_slice(&(l.start as u32).to_le_bytes());
        e[12..16].copy_from_slice(&(l.sectors as u32).to_le_bytes());
        s[510] = 0x55;
        s[511] = 0xAA;
    })?;
    let meta = l.reserved + 2 * l.fat_sectors + ROOT_SECTORS;
    disk.write_with(l.start, meta, |i, s| meta_sector(&l, volume_id, label, i, s))?;
    disk.flush()?;
    Ok(l)
}
