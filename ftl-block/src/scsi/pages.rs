//! The data-in replies of the informational commands: INQUIRY (standard data and the VPD pages
//! 0x00, 0xB0, 0xB1, 0xB2), MODE SENSE (caching and control pages), READ CAPACITY(10/16) and
//! READ FORMAT CAPACITIES. Each writes into a zeroed prefix of the transfer buffer (at least 512
//! bytes, more than any reply) and returns its length; `None` means a field of the CDB asks for
//! something not supported.

use super::{Identity, WriteCache};
use crate::SECTOR_SIZE;

/// What the replies describe.
pub(crate) struct Device {
    pub sectors: u64,
    pub sectors_per_page: u32,
    pub max_unmap_descriptors: u32,
    pub cache: WriteCache,
}

/// Standard INQUIRY data (36 bytes): a direct-access block device, not removable, SPC-4.
pub(crate) fn inquiry(id: &Identity, out: &mut [u8]) -> usize {
    out[..36].fill(0);
    out[0] = 0x00; // peripheral qualifier 0, direct-access block device
    out[1] = 0x00; // not removable
    out[2] = 0x06; // SPC-4
    out[3] = 0x02; // response data format 2
    out[4] = 36 - 5; // additional length
    out[8..16].copy_from_slice(&id.vendor);
    out[16..32].copy_from_slice(&id.product);
    out[32..36].copy_from_slice(&id.revision);
    36
}

/// The VPD pages supported, in ascending order.
pub(crate) const VPD_PAGES: [u8; 4] = [0x00, 0xB0, 0xB1, 0xB2];

/// A vital product data page.
pub(crate) fn vpd(dev: &Device, page: u8, out: &mut [u8]) -> Option<usize> {
    out[..64].fill(0);
    out[1] = page;
    let len = match page {
        0x00 => {
            out[4..4 + VPD_PAGES.len()].copy_from_slice(&VPD_PAGES);
            4 + VPD_PAGES.len()
        }
        // Block limits: the unmap granularity is one FTL page.
        0xB0 => {
            out[6..8].copy_from_slice(&(dev.sectors_per_page.min(u16::MAX as u32) as u16).to_be_bytes());
            out[20..24].copy_from_slice(&u32::MAX.to_be_bytes()); // maximum unmap LBA count
            out[24..28].copy_from_slice(&dev.max_unmap_descriptors.to_be_bytes());
            out[28..32].copy_from_slice(&dev.sectors_per_page.to_be_bytes()); // optimal unmap granularity
            out[32..36].copy_from_slice(&0x8000_0000u32.to_be_bytes()); // alignment valid, 0
            64
        }
        // Block device characteristics: non-rotating medium.
        0xB1 => {
            out[4..6].copy_from_slice(&1u16.to_be_bytes());
            64
        }
        // Logical block provisioning: UNMAP supported (LBPU), unmapped sectors not guaranteed to
        // read as zeros (LBPRZ = 0: the partial pages of a range keep their data), thin.
        0xB2 => {
            out[5] = 0x80;
            out[6] = 0x02;
            8
        }
        _ => return None,
    };
    out[2..4].copy_from_slice(&((len - 4) as u16).to_be_bytes());
    Some(len)
}

fn caching_page(dev: &Device, changeable: bool, out: &mut [u8]) -> usize {
    out[0] = 0x08;
    out[1] = 0x12;
    if !changeable && dev.cache == WriteCache::WriteBack {
        out[2] = 0x04; // WCE
    }
    20
}

fn control_page(out: &mut [u8]) -> usize {
    out[0] = 0x0A;
    out[1] = 0x0A;
    12
}

/// MODE SENSE(6/10) data: the header (no block descriptors) and the pages asked for. `None` for
/// an unsupported page, subpage or page control (saved values are reported by the caller).
pub(crate) fn mode_sense(
    dev: &Device,
    ten: bool,
    page_control: u8,
    page_code: u8,
    subpage: u8,
    out: &mut [u8],
) -> Option<usize> {
    let header = if ten { 8 } else { 4 };
    out[..header + 32].fill(0);
    let changeable = page_control == 1;
    let all_subpages = page_code == 0x3F && subpage == 0xFF;
    if subpage != 0 && !all_subpages {
        return None;
    }
    let mut len = header;
    match page_code {
        0x08 => len += caching_page(dev, changeable, &mut out[len..]),
        0x0A => len += control_page(&mut out[len..]),
        0x3F => {
            len += caching_page(dev, changeable, &mut out[len..]);
            len += control_page(&mut out[len..]);
        }
        _ => return None,
    }
    // Medium type 0, device-specific parameter 0 (not write protected), no block descriptors.
    if ten {
        out[0..2].copy_from_slice(&((len - 2) as u16).to_be_bytes());
    } else {
        out[0] = (len - 1) as u8;
    }
    Some(len)
}

/// READ CAPACITY(10): the last LBA (0xFFFF_FFFF if it does not fit) and the sector size.
pub(crate) fn capacity10(dev: &Device, out: &mut [u8]) -> usize {
    let last = dev.sectors.saturating_sub(1).min(u32::MAX as u64) as u32;
    out[0..4].copy_from_slice(&last.to_be_bytes());
    out[4..8].copy_from_slice(&(SECTOR_SIZE as u32).to_be_bytes());
    8
}

/// READ CAPACITY(16): last LBA, sector size, sectors per FTL page as the physical block
/// exponent (when a power of two), LBPME (UNMAP supported), LBPRZ = 0.
pub(crate) fn capacity16(dev: &Device, out: &mut [u8]) -> usize {
    out[..32].fill(0);
    out[0..8].copy_from_slice(&dev.sectors.saturating_sub(1).to_be_bytes());
    out[8..12].copy_from_slice(&(SECTOR_SIZE as u32).to_be_bytes());
    if dev.sectors_per_page.is_power_of_two() {
        out[13] = (dev.sectors_per_page.trailing_zeros() as u8) & 0x0F;
    }
    out[14] = 0x80;
    32
}

/// READ FORMAT CAPACITIES: one descriptor, formatted media.
pub(crate) fn format_capacities(dev: &Device, out: &mut [u8]) -> usize {
    out[..12].fill(0);
    out[3] = 8;
    out[4..8].copy_from_slice(&(dev.sectors.min(u32::MAX as u64) as u32).to_be_bytes());
    out[8] = 0x02; // formatted media
    out[9..12].copy_from_slice(&(SECTOR_SIZE as u32).to_be_bytes()[1..]);
    12
}
