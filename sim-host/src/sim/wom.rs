//! Second writes (feature `wom`, Reusable SSD) on the host: owned buffers for
//! [`ftl_core::reuse::ReuseMemory`], the polar WOM codec with owned work space ([`PolarWom`]),
//! and the simulator's codec for metadata-only runs ([`SimulatedWom`]), which, like the paper's
//! DiskSim experiments, draws encoding success at random with a given probability per attempt
//! instead of encoding data the emulator does not store.

use ftl_core::meta::META_LEN;
use ftl_core::policy::NullCodec;
use ftl_core::reuse::{ReuseLayout, ReuseMemory, SecondWriteCodec, SecondWriteError};
use ftl_policies::wom::{fitted_codec, ftl_layout, WomScratch, WomSecondWrite};
use nand_hal::Geometry;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Owned buffers behind [`ReuseMemory`].
#[derive(Clone, Debug)]
pub struct ReuseBuffers {
    second: Vec<u32>,
    pair: Vec<u32>,
    state: Vec<u8>,
    page_a: Vec<u8>,
    page_b: Vec<u8>,
    page_c: Vec<u8>,
}

impl ReuseBuffers {
    /// Buffers for `geometry`.
    pub fn new(geometry: &Geometry) -> Self {
        let l = ReuseLayout::new(geometry);
        ReuseBuffers {
            second: vec![0; l.second_words],
            pair: vec![0; l.blocks],
            state: vec![0; l.blocks],
            page_a: vec![0; l.page_buf],
            page_b: vec![0; l.page_buf],
            page_c: vec![0; l.page_buf],
        }
    }

    /// The memory, borrowed for one FTL instance.
    pub fn memory(&mut self) -> ReuseMemory<'_> {
        ReuseMemory {
            second: &mut self.second,
            pair: &mut self.pair,
            state: &mut self.state,
            page_a: &mut self.page_a,
            page_b: &mut self.page_b,
            page_c: &mut self.page_c,
        }
    }
}

/// Block-length words of the polar codec (N up to 2^16).
pub const POLAR_W: usize = 1024;

/// The polar WOM codec with owned work space, no ECC of its own (the page's CRC-32C checks it).
pub type PolarWom = WomSecondWrite<POLAR_W, 0, NullCodec, Box<WomScratch<POLAR_W, 0>>, Vec<u8>>;

/// The polar WOM second-write codec for an FTL on `geometry` whose page codec stores
/// `codec_spare` bytes: N = 2^`n_log2`, `attempts` attempts per codeword, plain SC, and the
/// lowest rate that fits the spare left between the first write and the second write's metadata.
pub fn polar_wom(
    geometry: &Geometry,
    codec_spare: usize,
    n_log2: u32,
    attempts: u8,
) -> Result<PolarWom, String> {
    let layout = ftl_layout(geometry, META_LEN + codec_spare)
        .ok_or_else(|| format!("a {}-byte spare has no room for second writes", geometry.spare_bytes))?;
    let codec = fitted_codec::<POLAR_W>(layout, n_log2, attempts, 1, 0)
        .map_err(|e| format!("no polar WOM code of N = 2^{n_log2} fits this page layout: {e:?}"))?;
    let page = geometry.raw_page_bytes() as usize;
    WomSecondWrite::new(codec, NullCodec, Box::new(WomScratch::new()), vec![0; page], vec![0; page])
        .map_err(|e| format!("WOM codec: {e:?}"))
}

/// The simulator's second-write codec: each encoding attempt succeeds with probability
/// `success_permille / 1000` (independently, as the paper models its retries), data is not
/// encoded (the emulator stores none in metadata-only mode) and reads decode to zeros.
#[derive(Clone, Debug)]
pub struct SimulatedWom {
    region: (usize, usize),
    success_permille: u32,
    attempts: u32,
    rng: ChaCha8Rng,
}

impl SimulatedWom {
    /// The paper's code (95 % per attempt, one retry) for an FTL on `geometry` whose page codec
    /// stores `codec_spare` bytes.
    pub fn new(
        geometry: &Geometry,
        codec_spare: usize,
        success_permille: u32,
        attempts: u32,
        seed: u64,
    ) -> Self {
        let off = META_LEN + codec_spare;
        let len = (geometry.spare_bytes as usize).saturating_sub(off + ftl_core::reuse::SW_META_LEN);
        SimulatedWom { region: (off, len), success_permille, attempts, rng: ChaCha8Rng::seed_from_u64(seed) }
    }
}

impl SecondWriteCodec for SimulatedWom {
    fn region(&self) -> (usize, usize) {
        self.region
    }
    fn scramble(&mut self, _key: u64, data: &[u8], out: &mut [u8]) -> bool {
        out.copy_from_slice(data);
        false
    }
    fn descramble(&mut self, _key: u64, stored: &[u8], _complemented: bool, out: &mut [u8]) {
        out.copy_from_slice(stored);
    }
    fn encode(
        &mut self,
        _key: u64,
        _message: &[u8],
        _a: &mut [u8],
        _b: &mut [u8],
    ) -> Result<u32, SecondWriteError> {
        for retry in 0..self.attempts {
            if self.rng.random_range(0..1000) < self.success_permille {
                return Ok(retry);
            }
        }
        Err(SecondWriteError::EncodeFailed)
    }
    fn decode(
        &mut self,
        _key: u64,
        _a: &mut [u8],
        _b: &mut [u8],
        out: &mut [u8],
    ) -> Result<(), SecondWriteError> {
        out.fill(0);
        Ok(())
    }
}

/// Whether second writes can run on `geometry`, as a message for the command line if not.
pub fn check_device(geometry: &Geometry) -> Result<(), String> {
    if geometry.planes_per_lun < 2
        || !geometry.planes_per_lun.is_multiple_of(2)
        || geometry.nop < 3
        || geometry.sequential_program
    {
        return Err(format!(
            "second writes (wom) need an even number of planes per LUN, NOP >= 3 and pages programmable \
             in any order; this device has {} planes, NOP {}{}: use --device wom",
            geometry.planes_per_lun,
            geometry.nop,
            if geometry.sequential_program { ", in-order programming" } else { "" }
        ));
    }
    Ok(())
}

/// Whether `cfg` runs second writes: (prefetching, same-plane pairs).
pub fn enabled(cfg: &super::SimConfig) -> Option<(bool, bool)> {
    cfg.features.iter().find_map(|f| match f {
        super::Feature::Wom => Some((true, false)),
        super::Feature::WomNoPrefetch => Some((false, false)),
        super::Feature::WomSamePlane => Some((true, true)),
        _ => None,
    })
}

/// The report's `wom` object.
pub fn report(
    s: &ftl_core::reuse::ReuseStats,
    cfg: &Option<ftl_core::reuse::ReuseConfig>,
) -> serde_json::Value {
    serde_json::json!({
        "second_writes": s.second_writes,
        "encode_failures": s.encode_failures,
        "retries": s.retries,
        "no_pair": s.no_pair,
        "recycled": s.recycled,
        "pairs": s.pairs,
        "second_reads": s.second_reads,
        "gc_rewrites": s.gc_rewrites,
        "prefetch_hits": s.prefetch_hits,
        "prefetch_misses": s.prefetch_misses,
        "skipped_pages": s.skipped_pages,
        "cap_blocks": cfg.map(|c| c.cap_blocks),
        "gc_threshold": cfg.map(|c| c.gc_threshold),
        "prefetch": cfg.map(|c| c.prefetch),
        "same_plane": cfg.map(|c| c.same_plane),
        "recycle_max_valid_permille": cfg.map(|c| c.recycle_max_valid_permille),
        "success_per_attempt": 0.95,
        "attempts": 2,
    })
}
