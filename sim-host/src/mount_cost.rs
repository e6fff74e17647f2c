//! What a mount costs: NAND reads after a clean `unmount` and after a power cut, on a device that
//! has been overwritten long enough for checkpoints and GC to be in steady state.
//!
//! The emulator stores data here (a mount reads checkpoint pages), and the baseline CRC-32C codec
//! is used, as on a real device.

use ftl_core::policy::DefaultPolicies;
use ftl_core::{Config, Ftl};
use nand_hal::Geometry;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::emulator::{Emulator, EmulatorConfig};
use crate::memory::{FtlMemory, MapChoice};

/// Mount costs measured.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct MountCost {
    /// Blocks in the device.
    pub blocks: u32,
    /// Pages in the device.
    pub pages: u32,
    /// Pages one checkpoint occupies.
    pub checkpoint_pages: u32,
    /// Reads of a mount after a clean unmount.
    pub clean_reads: u64,
    /// Reads of a mount after a power cut (worst of the cut points tried).
    pub cut_reads_max: u64,
    /// Mean reads of a mount after a power cut over the cut points tried.
    pub cut_reads_mean: u64,
    /// Pages replayed by the worst mount after a cut.
    pub cut_replayed_max: u64,
    /// Mean pages replayed by a mount after a cut.
    pub cut_replayed_mean: u64,
    /// Most blocks whose first page a mount after a cut read (the mount pool's, or every block
    /// when it surveyed).
    pub cut_surveyed_max: u64,
}

/// Measures mount costs on `geometry` at `utilization_permille` fill with `map`, cutting power
/// at `cuts` random points of a random-overwrite workload.
pub fn measure(
    geometry: Geometry,
    utilization_permille: u32,
    cuts: u32,
    seed: u64,
    map: MapChoice,
) -> Result<MountCost, String> {
    let mut cfg = Config::for_utilization(&geometry, utilization_permille);
    // With the mount pool: a mount after a cut reads the pool's blocks, not every block.
    cfg.mount_pool_blocks = ftl_core::RECOMMENDED_MOUNT_POOL_BLOCKS;
    let mut emu = Emulator::new(EmulatorConfig::new(geometry)).map_err(|e| e.to_string())?;
    let mut mem = FtlMemory::with_map(&geometry, &cfg, map);
    let n = cfg.logical_pages;
    let page = vec![0x3Cu8; geometry.data_bytes as usize];
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    {
        let (map, m) = mem.parts();
        let mut ftl =
            Ftl::format(&mut emu, DefaultPolicies::default(), map, m, cfg).map_err(|e| e.to_string())?;
        for lpn in 0..n {
            ftl.write(lpn, &page).map_err(|e| e.to_string())?;
        }
        for _ in 0..2 * n {
            ftl.write(rng.random_range(0..n), &page).map_err(|e| e.to_string())?;
        }
        ftl.unmount().map_err(|e| e.to_string())?;
    }
    let (clean_reads, checkpoint_pages) = {
        let (map, m) = mem.parts();
        let ftl = Ftl::mount(&mut emu, DefaultPolicies::default(), map, m, cfg).map_err(|e| e.to_string())?;
        (ftl.counters().mount_reads, ftl.checkpoint_pages())
    };
    let (mut max, mut sum, mut replayed_max, mut replayed_sum, mut surveyed_max) =
        (0u64, 0u64, 0u64, 0u64, 0u64);
    for _ in 0..cuts {
        {
            let (map, m) = mem.parts();
            let mut ftl =
                Ftl::mount(&mut emu, DefaultPolicies::default(), map, m, cfg).map_err(|e| e.to_string())?;
            ftl.nand_mut().schedule_random_power_cut(40 * geometry.pages_per_block as u64 * 8);
            loop {
                if ftl.write(rng.random_range(0..n), &page).is_err() {
                    break;
                }
            }
        }
        emu.restore_power();
        let (map, m) = mem.parts();
        let ftl = Ftl::mount(&mut emu, DefaultPolicies::default(), map, m, cfg)
            .map_err(|e| format!("mount after a cut: {e}"))?;
        let c = ftl.counters();
        max = max.max(c.mount_reads);
        sum += c.mount_reads;
        replayed_max = replayed_max.max(c.mount_replayed_pages);
        replayed_sum += c.mount_replayed_pages;
        surveyed_max = surveyed_max.max(c.mount_surveyed_blocks);
    }
    Ok(MountCost {
        blocks: geometry.total_blocks(),
        pages: geometry.total_pages(),
        checkpoint_pages,
        clean_reads,
        cut_reads_max: max,
        cut_reads_mean: sum / cuts.max(1) as u64,
        cut_replayed_max: replayed_max,
        cut_replayed_mean: replayed_sum / cuts.max(1) as u64,
        cut_surveyed_max: surveyed_max,
    })
}
