//! Device presets for the simulator and the flags that override their geometry.
//!
//! | preset | geometry | timing |
//! |---|---|---|
//! | `mt29f4g08` | Micron MT29F4G08ABADA: 4096 blocks x 64 pages x (2048 + 64) B, 2 planes | datasheet |
//! | `anchor` | 1024 blocks x 64 x 2 KiB, 2 planes (the WAF sanity anchor's shape) | MT29F4G08 |
//! | `small` | 256 blocks x 64 x 2 KiB, 2 planes (quick runs) | MT29F4G08 |
//! | `caftl` | 4 KiB pages (+128 B spare), 64-page blocks, 2 planes, 8192 blocks (2 GiB) | CAFTL paper: 25 us / 200 us / 1.5 ms |
//! | `eti` | the ETI paper's simulator: 32768 blocks x 128 pages x 4 KiB (16 GiB), one plane (so the FTL's per-plane greedy is the paper's global greedy) | CAFTL paper: 25 us / 200 us / 1.5 ms |
//! | `cdm` | the CDM talk's 64 GB SLC scaled to 4 GiB: 4 KiB pages, 64-page blocks, 16384 blocks | 25 us / 200 us / 1.5 ms, 100 us per 4 KiB transfer |
//! | `wom` | one chip: 4 KiB (+368 B) pages, 64-page blocks, 2 planes of 1024 blocks, any program order | CAFTL paper |
//! | `wom-fast-bus` | `wom` | `wom` at 5 ns/byte |
//! | `wom-ssd` | the Reusable SSD paper's drive shape: 4 chips (LUNs) of 2 planes, one data path per chip, `wom`'s chip | CAFTL paper, plane queues |
//! | `flexecc` | the FlexECC paper's 8-chip SSD scaled to 256 MiB: 8 LUNs of 2 planes, one data path per chip, 4 KiB pages, 15% OP | 25 us / 200 us / 1.5 ms, 1.25 ns/byte, plane queues |
//!
//! Every preset but `wom-ssd` and `flexecc` has one LUN; all use the timing model's plane queues
//! ([`crate::emulator::Scheduling::PlaneQueues`]; `--scheduling luns` switches to LUN queues) and
//! serve operations in issue order (`--read-priority on`: host reads go before queued programs
//! and erases, `Emulator::set_read_priority`).
//!
//! Sources of the paper presets (the papers' text is in the project's shared papers folder; the
//! tables with the flash parameters did not survive extraction in either):
//!
//! - `wom-ssd`, Reusable SSD (Yaakobi et al., FAST'15), section 6.1: DiskSim with the MSR SSD
//!   extension, "two planes in each flash chip, so that each plane is an independent allocation
//!   pool", "parallel execution of commands in separate planes within each chip" (our plane
//!   queues), "one channel for the entire SSD, and one data path (way) for each chip" (transfers of
//!   different chips do not contend: one bus per LUN here), 4 KiB pages, "each chip contains 1GB,
//!   divided into two planes", the number of chips set by the drive size (Table 3). Not stated in
//!   the text: the flash latencies of its Table 4 (three manufacturers); we keep the `wom` preset's
//!   (the CAFTL paper's SLC values) and its chip. Scaled: 4 chips of 128 MiB (512 MiB, `wom`'s
//!   capacity, so that the two compare); `--blocks 16384` gives the paper's 1 GiB chips, `--luns`
//!   the chip count.
//! - `flexecc`, FlexECC section 4.1: "an 8-chip 60GB SSD with 15% overprovisioning", copy-back GC,
//!   DiskSim (its `ioscale` is a DiskSim parameter), presumably with the same MSR SSD extension (so
//!   one data path per chip and plane queues as above: an assumption); decoder: 10 us for a t = 6
//!   hardware BCH (section 2.3; the flex-ecc feature's `--ecc-t 6`, `--t-crc-ns 1666`). Its Table 2
//!   (page latencies) is lost; the text says the BCH decode is about 25% of a page access, which
//!   with tR 25 us and 10 us of decode leaves about 5 us for the transfer of a 4 KiB page: 1.25
//!   ns/byte (an 800 MT/s bus; a BCH page read is then 25 + 5.3 + 10 = 40.3 us, decode 24.8%).
//!   tPROG 200 us and tBERS 1.5 ms: the CAFTL paper's SLC values, as in the other 4 KiB presets.
//!   Scaled to 1024 blocks (256 MiB, the size of `scripts/eval/flexecc.sh`'s device); `--blocks`
//!   resizes.
//!
//! The CDM device is scaled down by default (64 GB would need a 64 MiB map and 2 GiB of emulated
//! spare areas); `--blocks 262144` restores the full size. Its over-provisioning default is the
//! talk's 15%.

use std::str::FromStr;

use ftl_core::reuse::ReuseConfig;
use ftl_core::Config;
use nand_hal::{EccRequirement, Geometry};

use crate::emulator::TimingParams;

/// A named device setup.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Preset {
    /// Micron MT29F4G08ABADA.
    Mt29f4g08,
    /// The WAF anchor's 1024-block device.
    Anchor,
    /// A small device for quick runs.
    Small,
    /// The CAFTL paper's flash timings.
    Caftl,
    /// The CDM talk's setup, scaled.
    Cdm,
    /// The ETI paper's geometry: 32K blocks of 128 4-KiB pages, 7% spare, one plane (global
    /// greedy).
    Eti,
    /// Reusable SSD's setup: 4 KiB pages with a 9 % spare (368 bytes), 64 pages per block, two
    /// planes of 1024 blocks, NOP 4, pages reprogrammable in any order (second writes), the
    /// CAFTL paper's SLC latencies.
    Wom,
    /// `wom` with a 200 MB/s bus (5 ns/byte) instead of 50 MB/s: how much of second writes'
    /// response time is bus transfer.
    WomFastBus,
    /// The Reusable SSD paper's drive: `wom`'s chip, 4 chips with a data path each.
    WomSsd,
    /// The FlexECC paper's 8-chip device, scaled.
    FlexEcc,
}

/// Every preset's CLI name.
pub const PRESET_NAMES: [&str; 10] =
    ["mt29f4g08", "anchor", "small", "caftl", "eti", "cdm", "wom", "wom-fast-bus", "wom-ssd", "flexecc"];

impl FromStr for Preset {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "mt29f4g08" => Ok(Preset::Mt29f4g08),
            "anchor" => Ok(Preset::Anchor),
            "small" => Ok(Preset::Small),
            "caftl" => Ok(Preset::Caftl),
            "cdm" => Ok(Preset::Cdm),
            "eti" => Ok(Preset::Eti),
            "wom" => Ok(Preset::Wom),
            "wom-fast-bus" => Ok(Preset::WomFastBus),
            "wom-ssd" => Ok(Preset::WomSsd),
            "flexecc" => Ok(Preset::FlexEcc),
            _ => Err(format!("unknown device preset '{s}' (expected one of {})", PRESET_NAMES.join(", "))),
        }
    }
}

/// A device: geometry, timings and the default over-provisioning.
#[derive(Copy, Clone, Debug, PartialEq)]
pub struct Device {
    /// Shape.
    pub geometry: Geometry,
    /// Operation latencies.
    pub timing: TimingParams,
    /// Over-provisioning in percent (physical = logical * (1 + op / 100)) unless `--op` says.
    pub default_op_percent: f64,
    /// Channels the LUNs share (`EmulatorConfig::channels`; 0: one per LUN) unless `--channels`
    /// says.
    pub channels: u32,
    /// Host reads go before queued programs and erases (`Emulator::set_read_priority`; off in
    /// every preset, `--read-priority on`).
    pub read_priority: bool,
}

const SLC_4K: Geometry = Geometry {
    data_bytes: 4096,
    spare_bytes: 128,
    pages_per_block: 64,
    blocks_per_plane: 4096,
    planes_per_lun: 2,
    luns: 1,
    nop: 4,
    sequential_program: true,
    ecc: EccRequirement { bits: 8, codeword_bytes: 512 },
    endurance: 100_000,
};

impl Preset {
    /// The device of this preset.
    pub fn device(self) -> Device {
        let g2k = Geometry { blocks_per_plane: 512, ..Geometry::MT29F4G08 };
        match self {
            Preset::Mt29f4g08 => Device {
                geometry: Geometry::MT29F4G08,
                timing: TimingParams::MT29F4G08,
                default_op_percent: 7.0,
                channels: 0,
                read_priority: false,
            },
            Preset::Anchor => Device {
                geometry: g2k,
                timing: TimingParams::MT29F4G08,
                default_op_percent: 7.0,
                channels: 0,
                read_priority: false,
            },
            Preset::Small => Device {
                geometry: Geometry { blocks_per_plane: 128, ..g2k },
                timing: TimingParams::MT29F4G08,
                default_op_percent: 7.0,
                channels: 0,
                read_priority: false,
            },
            Preset::Caftl => Device {
                geometry: SLC_4K,
                timing: TimingParams::CAFTL_PAPER,
                default_op_percent: 7.0,
                channels: 0,
                read_priority: false,
            },
            Preset::Eti => Device {
                geometry: Geometry {
                    pages_per_block: 128,
                    blocks_per_plane: 32768,
                    planes_per_lun: 1,
                    ..SLC_4K
                },
                timing: TimingParams::CAFTL_PAPER,
                default_op_percent: 7.0,
                channels: 0,
                read_priority: false,
            },
            Preset::Cdm => Device {
                geometry: Geometry { blocks_per_plane: 8192, ..SLC_4K },
                // 100 us to move a 4 KiB page: 24.4 ns per byte.
                timing: TimingParams { t_xfer_ps_per_byte: 100_000_000 / 4096, ..TimingParams::CAFTL_PAPER },
                default_op_percent: 15.0,
                channels: 0,
                read_priority: false,
            },
            Preset::Wom => Device {
                geometry: Geometry {
                    spare_bytes: 368,
                    blocks_per_plane: 1024,
                    sequential_program: false,
                    ..SLC_4K
                },
                timing: TimingParams::CAFTL_PAPER,
                default_op_percent: 7.0,
                channels: 0,
                read_priority: false,
            },
            Preset::WomFastBus => Device {
                timing: TimingParams { t_xfer_ps_per_byte: 5_000, ..TimingParams::CAFTL_PAPER },
                ..Preset::Wom.device()
            },
            Preset::WomSsd => {
                let wom = Preset::Wom.device();
                Device { geometry: Geometry { blocks_per_plane: 256, luns: 4, ..wom.geometry }, ..wom }
            }
            Preset::FlexEcc => Device {
                geometry: Geometry { blocks_per_plane: 64, luns: 8, ..SLC_4K },
                timing: TimingParams { t_xfer_ps_per_byte: 1_250, ..TimingParams::CAFTL_PAPER },
                default_op_percent: 15.0,
                channels: 0,
                read_priority: false,
            },
        }
    }
}

/// `--op-beyond-reserve`: the geometry (grown, if `footprint` is given, until the logical
/// capacity holds it) and the device's whole over-provisioning in percent such that the logical
/// capacity is (physical - the FTL's reserve blocks) / (1 + `op` / 100).
pub fn beyond_reserve(g: Geometry, op: f64, footprint: Option<u64>) -> Result<(Geometry, f64), String> {
    let mut g = g;
    for _ in 0..100_000 {
        let total = g.total_pages() as u64;
        let guess = (total as f64 / (1.0 + op / 100.0)) as u32;
        let reserve = ReuseConfig::reserve_blocks(&g, &Config::with_logical_pages(&g, guess)) as u64
            * g.pages_per_block as u64;
        let logical = (total.saturating_sub(reserve) as f64 / (1.0 + op / 100.0)).floor() as u64;
        if logical > 0 && footprint.is_none_or(|f| logical >= f) {
            // Slightly below the exact ratio, so that SimConfig::logical_pages floors to `logical`.
            let whole = (total as f64 / logical as f64 - 1.0) * 100.0 * (1.0 - 1e-9);
            if Config::with_logical_pages(&g, logical as u32).validate(&g, 0).is_ok() {
                return Ok((g, whole));
            }
        }
        if footprint.is_none() {
            return Err(format!("--op-beyond-reserve: no logical capacity left at {op}% on this device"));
        }
        g.blocks_per_plane += 1;
    }
    Err("--op-beyond-reserve: no device size found".into())
}

/// Geometry overrides from the command line.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct GeometryFlags {
    /// Data bytes per page.
    pub page_bytes: Option<u32>,
    /// Spare bytes per page.
    pub spare_bytes: Option<u32>,
    /// Pages per block.
    pub pages_per_block: Option<u32>,
    /// Total blocks (spread over planes and LUNs).
    pub blocks: Option<u32>,
    /// Planes per LUN.
    pub planes: Option<u32>,
    /// LUNs.
    pub luns: Option<u32>,
    /// Rated erase cycles per block.
    pub endurance: Option<u32>,
}

impl GeometryFlags {
    /// Applies the overrides; errors name the flag.
    pub fn apply(&self, mut g: Geometry) -> Result<Geometry, String> {
        if let Some(v) = self.page_bytes {
            g.data_bytes = v;
        }
        if let Some(v) = self.spare_bytes {
            g.spare_bytes = v;
        }
        if let Some(v) = self.pages_per_block {
            g.pages_per_block = v;
        }
        if let Some(v) = self.planes {
            g.planes_per_lun = v;
        }
        if let Some(v) = self.endurance {
            if v == 0 {
                return Err("--endurance 0: a block must take at least one erase".into());
            }
            g.endurance = v;
        }
        if let Some(v) = self.luns {
            // LUN addresses are 8 bits wide (`nand_hal::LunId`).
            if !(1..=256).contains(&v) {
                return Err(format!("--luns {v} is not between 1 and 256"));
            }
            g.luns = v;
        }
        let blocks = self.blocks.unwrap_or(g.total_blocks());
        let per_plane_units = g.planes_per_lun.max(1) * g.luns.max(1);
        if blocks == 0 || !blocks.is_multiple_of(per_plane_units) {
            return Err(format!(
                "--blocks {blocks} is not a positive multiple of planes x LUNs ({per_plane_units})"
            ));
        }
        g.blocks_per_plane = blocks / per_plane_units;
        g.validate().map_err(|e| format!("geometry is not usable: {e:?}"))?;
        if !g.data_bytes.is_multiple_of(512) {
            return Err(format!("--page-bytes {} is not a multiple of 512", g.data_bytes));
        }
        Ok(g)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `--op-beyond-reserve`: after the FTL's reserve, GC and second writes get the paper's
    /// R = T - U at the nominal OP (to a page), on a given device and on one grown to a footprint.
    #[test]
    fn op_beyond_reserve_leaves_r_at_the_nominal_op() {
        let g = Preset::WomSsd.device().geometry;
        for (op, footprint) in [(7.0, None), (28.0, None), (7.0, Some(10_000)), (28.0, Some(10_000))] {
            let start = if footprint.is_some() { Geometry { blocks_per_plane: 1, ..g } } else { g };
            let (geo, whole) = beyond_reserve(start, op, footprint).unwrap();
            let logical = (geo.total_pages() as f64 / (1.0 + whole / 100.0)).floor() as u32;
            let cfg = Config::with_logical_pages(&geo, logical);
            let reserve = (ReuseConfig::reserve_blocks(&geo, &cfg) * geo.pages_per_block) as f64;
            let r = geo.total_pages() as f64 - reserve - logical as f64;
            assert!((r - logical as f64 * op / 100.0).abs() <= 1.0 + op / 100.0, "{op} {footprint:?}: {r}");
            assert!(footprint.is_none_or(|f| logical as u64 >= f) && whole > op);
            if footprint.is_none() {
                assert_eq!(geo, g);
            }
        }
        let tiny = Geometry { blocks_per_plane: 4, ..g };
        assert!(beyond_reserve(tiny, 28.0, None).is_err(), "the reserve is the whole device");
    }

    #[test]
    fn presets_parse_and_validate() {
        for name in PRESET_NAMES {
            let d = name.parse::<Preset>().unwrap().device();
            assert_eq!(d.geometry.validate(), Ok(()), "{name}");
        }
        // The paper presets: FlexECC's 8 chips with a 10 us decode about 25% of a BCH page read;
        // Reusable SSD's chips with two planes each, `wom`'s capacity.
        let flex = Preset::FlexEcc.device();
        assert_eq!((flex.geometry.luns, flex.geometry.planes_per_lun, flex.default_op_percent), (8, 2, 15.0));
        let page = flex.geometry.data_bytes as u64 + flex.geometry.spare_bytes as u64;
        let bch_read = flex.timing.t_r_ns + flex.timing.xfer_ns(page) + 10_000;
        assert!((0.24..0.26).contains(&(10_000.0 / bch_read as f64)), "{bch_read}");
        let (wom, ssd) = (Preset::Wom.device(), Preset::WomSsd.device());
        assert_eq!((ssd.geometry.luns, ssd.geometry.total_blocks()), (4, wom.geometry.total_blocks()));
        assert!("foo".parse::<Preset>().unwrap_err().contains("unknown device preset"));
        let cdm = Preset::Cdm.device();
        assert_eq!(cdm.geometry.data_bytes, 4096);
        assert_eq!(cdm.timing.xfer_ns(4096), 100_000);
        assert_eq!(cdm.default_op_percent, 15.0);
    }

    #[test]
    fn flags_override_and_reject_bad_shapes() {
        let g = Preset::Small.device().geometry;
        let f = GeometryFlags { blocks: Some(64), pages_per_block: Some(32), ..Default::default() };
        let o = f.apply(g).unwrap();
        assert_eq!((o.total_blocks(), o.pages_per_block), (64, 32));
        assert!(GeometryFlags { blocks: Some(63), ..Default::default() }.apply(g).is_err());
        assert!(GeometryFlags { page_bytes: Some(1000), ..Default::default() }.apply(g).is_err());
        assert!(GeometryFlags { pages_per_block: Some(0), ..Default::default() }.apply(g).is_err());
        for luns in [0, 257] {
            let e = GeometryFlags { luns: Some(luns), ..Default::default() }.apply(g).unwrap_err();
            assert!(e.contains(&format!("--luns {luns} is not between 1 and 256")), "{e}");
        }
        let eight =
            GeometryFlags { luns: Some(8), blocks: Some(1024), ..Default::default() }.apply(g).unwrap();
        assert_eq!((eight.luns, eight.blocks_per_plane), (8, 64));
    }
}
