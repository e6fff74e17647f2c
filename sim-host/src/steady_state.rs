//! Steady-state study of the baseline under uniform random overwrites: write amplification and
//! erase-count spread at a given fill level. It is what `ftl-sim demo` and the WAF figures in the
//! docs run, and what the WAF regression test checks against the sanity anchor.
//!
//! Method: format, fill the logical space sequentially, overwrite `warmup` times the logical
//! space with uniformly random single-page writes (so GC reaches steady state), reset counters,
//! then measure over `measure` times the logical space. The emulator runs metadata-only and the
//! FTL uses the null codec: the figures are about mapping and GC, not data.

use ftl_core::policy::{Greedy, NullCodec, Policies, RequestSizeClassifier, SingleHostStream};
use ftl_core::{Config, Ftl};
use nand_hal::Geometry;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::emulator::{Emulator, EmulatorConfig};
use crate::memory::FtlMemory;

/// The policies of the study: the baseline without a data codec.
pub type MetadataOnlyPolicies = Policies<NullCodec, RequestSizeClassifier, Greedy, SingleHostStream>;

/// One steady-state run.
#[derive(Clone, Debug)]
pub struct SteadyState {
    /// Device shape.
    pub geometry: Geometry,
    /// Logical capacity in thousandths of the raw pages.
    pub utilization_permille: u32,
    /// Overwrites before measuring, in multiples of the logical capacity.
    pub warmup: f64,
    /// Overwrites measured, in multiples of the logical capacity.
    pub measure: f64,
    /// Seed of the address stream.
    pub seed: u64,
}

/// What a run measured.
#[derive(Clone, Debug, PartialEq)]
pub struct SteadyStateResult {
    /// Logical pages exported.
    pub logical_pages: u32,
    /// Host page writes measured.
    pub host_writes: u64,
    /// NAND programs in the measured part (GC copies, checkpoints and journal included).
    pub nand_programs: u64,
    /// Pages GC copied in the measured part.
    pub gc_copies: u64,
    /// Erases in the measured part.
    pub erases: u64,
    /// Checkpoints written in the measured part.
    pub checkpoints: u64,
    /// `(host writes + GC copies) / host writes`: the classic GC write amplification.
    pub waf_gc: f64,
    /// `nand programs / host writes`: everything, metadata included.
    pub waf_total: f64,
    /// Lowest erase count of a good block at the end.
    pub erase_min: u32,
    /// Highest erase count at the end.
    pub erase_max: u32,
    /// Mean erase count at the end.
    pub erase_mean: f64,
    /// RAM the FTL uses (caller buffers and its struct).
    pub ram_bytes: usize,
}

impl SteadyState {
    /// The geometry of the sanity anchor: 1024 blocks of 64 pages of 2 KiB (two planes).
    pub const ANCHOR_GEOMETRY: Geometry = Geometry {
        data_bytes: 2048,
        spare_bytes: 64,
        pages_per_block: 64,
        blocks_per_plane: 512,
        planes_per_lun: 2,
        luns: 1,
        ..Geometry::MT29F4G08
    };

    /// Runs the study.
    pub fn run(&self) -> Result<SteadyStateResult, String> {
        let mut ec = EmulatorConfig::new(self.geometry);
        ec.store_data = false;
        // The FTL's anchor records must read back (they are verified when written).
        ec.stored_blocks = ftl_core::anchor::ANCHOR_BLOCKS;
        let mut emu = Emulator::new(ec).map_err(|e| e.to_string())?;
        let cfg = Config::for_utilization(&self.geometry, self.utilization_permille);
        let mut mem = FtlMemory::new(&self.geometry, &cfg);
        let (map, m) = mem.parts();
        let mut ftl = Ftl::format(&mut emu, MetadataOnlyPolicies::default(), map, m, cfg)
            .map_err(|e| format!("format: {e}"))?;
        let page = vec![0u8; self.geometry.data_bytes as usize];
        let n = cfg.logical_pages;
        for lpn in 0..n {
            ftl.write(lpn, &page).map_err(|e| format!("fill: {e}"))?;
        }
        let mut rng = ChaCha8Rng::seed_from_u64(self.seed);
        let warm = (self.warmup * n as f64) as u64;
        for _ in 0..warm {
            ftl.write(rng.random_range(0..n), &page).map_err(|e| format!("warmup: {e}"))?;
        }
        ftl.reset_counters();
        let measure = (self.measure * n as f64) as u64;
        for _ in 0..measure {
            ftl.write(rng.random_range(0..n), &page).map_err(|e| format!("measure: {e}"))?;
        }
        let c = *ftl.counters();
        let ram_bytes = ftl.ram_bytes();
        let mut good = ftl.leveled_erase_counts().map(|(_, ec)| ec);
        let first = good.next().unwrap_or(0);
        let (mut min, mut max, mut sum, mut count) = (first, first, first as u64, 1u64);
        for e in good {
            min = min.min(e);
            max = max.max(e);
            sum += e as u64;
            count += 1;
        }
        let hw = c.host_write_pages.max(1);
        Ok(SteadyStateResult {
            logical_pages: n,
            host_writes: c.host_write_pages,
            nand_programs: c.nand_programs,
            gc_copies: c.gc_page_copies,
            erases: c.nand_erases,
            checkpoints: c.checkpoints,
            waf_gc: (c.host_write_pages + c.gc_page_copies) as f64 / hw as f64,
            waf_total: c.nand_programs as f64 / hw as f64,
            erase_min: min,
            erase_max: max,
            erase_mean: sum as f64 / count as f64,
            ram_bytes,
        })
    }
}
