//! Second writes (feature `wom`, Reusable SSD) on the host: owned buffers for
//! [`ftl_core::reuse::ReuseMemory`] (`ftl_testkit::ReuseBuffers`, re-exported here), the polar WOM codec with owned work space ([`PolarWom`]),
//! and the simulator's codec for metadata-only runs ([`SimulatedWom`]), which, like the paper's
//! DiskSim experiments, draws encoding success at random with a given probability per attempt
//! instead of encoding data the emulator does not store, and charges each encoding attempt and
//! each decoding on the emulator's clock ([`crate::emulator::Emulator::set_compute_source`]).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use ftl_core::meta::META_LEN;
use ftl_core::reuse::{PairLayout, SecondWriteCodec, SecondWriteError};
use ftl_policies::wom::{descramble_first_write, scramble_first_write};
use nand_hal::Geometry;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

pub use ftl_testkit::reuse::{polar_wom, PolarWom, POLAR_W};
pub use ftl_testkit::ReuseBuffers;

/// The simulator's second-write codec: each encoding attempt succeeds with probability
/// `success_permille / 1000` (independently, as the paper models its retries) and data is not
/// encoded. In metadata-only mode (the emulator stores no data) reads decode to zeros; where the
/// emulator keeps page data ([`Self::keep_data`]: deduplication, a cached map) the codec keeps
/// each second write's message by its first page and decodes it back, so that GC's rewrites of
/// second writes and deduplication's content checks see the data the host wrote (decoding to
/// zeros wrote zero contents back at every GC rewrite).
///
/// First writes are scrambled as the real codec scrambles them (`ftl_policies::wom`'s
/// scrambler, keyed by logical page, complemented past half the cells): the FTL marks them
/// scrambled (`aux` 1) and, before a second write, skips pages with more than 5/8 of their cells
/// programmed. Where the emulator keeps page data (deduplication, a cached map) those pages
/// hold the simulator's synthetic contents, mostly zero bytes (`dedup::fill_content`): stored as
/// they are, nearly every first write read back 80-90 % programmed and no second write was made
/// (TPC-C with dedup: 0 second writes, 10,086 pages skipped). In metadata-only mode the
/// scrambled data is dropped as any data is (reads return erased cells).
#[derive(Clone, Debug)]
pub struct SimulatedWom {
    region: (usize, usize),
    success_permille: u32,
    attempts: u32,
    rng: ChaCha8Rng,
    encode_ns: u64,
    decode_ns: u64,
    compute: Arc<AtomicU64>,
    /// Second writes' messages by their first page (with [`Self::keep_data`]).
    messages: Option<HashMap<u64, Vec<u8>>>,
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
        SimulatedWom {
            region: (off, len),
            success_permille,
            attempts,
            rng: ChaCha8Rng::seed_from_u64(seed),
            encode_ns: 0,
            decode_ns: 0,
            compute: Arc::new(AtomicU64::new(0)),
            messages: None,
        }
    }

    /// Keeps each second write's message and decodes it back (`on`: the emulator keeps page
    /// data), or decodes to zeros (metadata-only runs, the default).
    pub fn keep_data(mut self, on: bool) -> Self {
        self.messages = on.then(HashMap::new);
        self
    }

    /// Charges `encode_ns` per encoding attempt and `decode_ns` per decoding to the counter
    /// [`Self::compute_source`] returns (for the emulator's
    /// [`crate::emulator::Emulator::set_compute_source`]).
    pub fn with_compute_ns(mut self, encode_ns: u64, decode_ns: u64) -> Self {
        self.encode_ns = encode_ns;
        self.decode_ns = decode_ns;
        self
    }

    /// The counter of computation time not yet waited for.
    pub fn compute_source(&self) -> Arc<AtomicU64> {
        self.compute.clone()
    }

    fn charge(&self, ns: u64) {
        if ns > 0 {
            self.compute.fetch_add(ns, Ordering::Relaxed);
        }
    }
}

impl SecondWriteCodec for SimulatedWom {
    fn region(&self) -> (usize, usize) {
        self.region
    }
    fn scramble(&mut self, key: u64, data: &[u8], out: &mut [u8]) -> bool {
        match scramble_first_write(key, data, out) {
            Ok(complemented) => complemented,
            Err(_) => {
                // Lengths differ (not something the FTL does): stored as it is.
                let n = out.len().min(data.len());
                out[..n].copy_from_slice(&data[..n]);
                false
            }
        }
    }
    fn descramble(&mut self, key: u64, stored: &[u8], complemented: bool, out: &mut [u8]) {
        if descramble_first_write(key, stored, complemented, out).is_err() {
            let n = out.len().min(stored.len());
            out[..n].copy_from_slice(&stored[..n]);
        }
    }
    fn encode(
        &mut self,
        key: u64,
        message: &[u8],
        _a: &mut [u8],
        _b: &mut [u8],
    ) -> Result<u32, SecondWriteError> {
        for retry in 0..self.attempts {
            self.charge(self.encode_ns);
            if self.rng.random_range(0..1000) < self.success_permille {
                if let Some(m) = self.messages.as_mut() {
                    m.insert(key, message.to_vec());
                }
                return Ok(retry);
            }
        }
        Err(SecondWriteError::EncodeFailed)
    }
    fn decode(
        &mut self,
        key: u64,
        _a: &mut [u8],
        _b: &mut [u8],
        out: &mut [u8],
    ) -> Result<(), SecondWriteError> {
        self.charge(self.decode_ns);
        match self.messages.as_ref().and_then(|m| m.get(&key)) {
            Some(msg) if msg.len() == out.len() => out.copy_from_slice(msg),
            _ => out.fill(0),
        }
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

/// The simulator's settings of second writes (the paper's by default).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct WomOptions {
    /// GC recycles only victims with at most this share (per mille) of valid pages (1000: the
    /// paper's rule, no limit).
    pub recycle_max_valid_permille: u32,
    /// Encoding success per attempt, per mille (the paper's 95 %).
    pub success_permille: u32,
    /// Encoding attempts on the same pair (the polar code's retry: 2; 1 for no retry).
    pub attempts: u32,
    /// After the attempts fail, encode once more on the next pair of invalid pages
    /// ([`ReuseConfig::retry_new_pair`], the paper's figure 12(c)).
    pub retry_new_pair: bool,
    /// Controller time per encoding attempt, ns.
    pub encode_ns: u64,
    /// Controller time per decoding, ns.
    pub decode_ns: u64,
    /// A prefetch slot per plane pair ([`ftl_core::reuse::Reuse::with_prefetch_slots`]); else one pair is read
    /// ahead, the next second write's.
    pub prefetch_slots: bool,
    /// Requests smaller than this are hot (second-write candidates): the paper's 64 KiB.
    pub hot_threshold_bytes: u64,
}

impl Default for WomOptions {
    /// The paper's: 95 % per attempt, one retry on the same pages, no limit on recycling, a
    /// prefetch per plane pair, 64 KiB threshold; encoding and decoding charged 12.5 us each,
    /// the paper's worst-case estimate of a page's ECC computation (section 6.6: "half the read
    /// access time", tR 25 us in the `wom` presets).
    fn default() -> Self {
        WomOptions {
            recycle_max_valid_permille: 1000,
            success_permille: 950,
            attempts: 2,
            retry_new_pair: false,
            encode_ns: 12_500,
            decode_ns: 12_500,
            prefetch_slots: true,
            hot_threshold_bytes: 64 * 1024,
        }
    }
}

/// Whether `cfg` runs second writes: (prefetching, where the halves go).
pub fn enabled(cfg: &super::SimConfig) -> Option<(bool, PairLayout)> {
    cfg.features.iter().find_map(|f| match f {
        super::Feature::Wom => Some((true, PairLayout::TwoPlanes)),
        super::Feature::WomNoPrefetch => Some((false, PairLayout::TwoPlanes)),
        super::Feature::WomSamePlane => Some((true, PairLayout::SamePlane)),
        super::Feature::WomSameBlock => Some((true, PairLayout::SameBlock)),
        _ => None,
    })
}

/// The report's `wom` object.
pub fn report(
    s: &ftl_core::reuse::ReuseStats,
    cfg: &Option<ftl_core::reuse::ReuseConfig>,
    opts: &WomOptions,
    r: (u32, u32),
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
        "pair_retries": s.pair_retries,
        "slot_hits": s.slot_hits,
        "r_blocks_paper": r.0,
        "reserve_blocks": r.1,
        "retry_new_pair": opts.retry_new_pair,
        "encode_us": opts.encode_ns as f64 / 1000.0,
        "decode_us": opts.decode_ns as f64 / 1000.0,
        "prefetch_slots": opts.prefetch_slots,
        "hot_threshold_bytes": opts.hot_threshold_bytes,
        "cap_blocks": cfg.map(|c| c.cap_blocks),
        "gc_threshold": cfg.map(|c| c.gc_threshold),
        "prefetch": cfg.map(|c| c.prefetch),
        "same_plane": cfg.map(|c| c.layout == PairLayout::SamePlane),
        "layout": cfg.map(|c| format!("{:?}", c.layout)),
        "recycle_max_valid_permille": cfg.map(|c| c.recycle_max_valid_permille),
        "success_per_attempt": opts.success_permille as f64 / 1000.0,
        "attempts": opts.attempts,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::dedup::fill_content;
    use crate::sim::device::Preset;

    /// Cells a NAND program sets (bit 0), per mille of the page's cells.
    fn programmed_permille(page: &[u8]) -> usize {
        page.iter().map(|b| b.count_zeros() as usize).sum::<usize>() * 1000 / (8 * page.len())
    }

    #[test]
    fn first_writes_of_synthetic_content_are_scrambled_to_at_most_half_the_cells() {
        let geo = Preset::Wom.device().geometry;
        let mut codec = SimulatedWom::new(&geo, 0, 950, 2, 1);
        let d = geo.data_bytes as usize;
        let (mut page, mut stored, mut back) = (vec![0u8; d], vec![0u8; d], vec![0u8; d]);
        // The contents the simulator writes where a trace carries none (ids from 2^63 up) and
        // all zeros (a decoded second write).
        for (lpn, content) in [(6978u32, (1u64 << 63) + 6979), (17, (1 << 63) + 123_456), (3, 0)] {
            fill_content(content, &mut page);
            assert!(programmed_permille(&page) > 625, "content {content:#x} is dense unscrambled");
            let complemented = codec.scramble(lpn as u64, &page, &mut stored);
            // The scrambler's bound (half the cells), under the FTL's second-write limit (5/8).
            assert!(programmed_permille(&stored) <= 500, "lpn {lpn}: {}", programmed_permille(&stored));
            codec.descramble(lpn as u64, &stored, complemented, &mut back);
            assert_eq!(back, page, "lpn {lpn}");
        }
    }

    /// With the emulator keeping data, a second write decodes to its message (the latest one
    /// encoded at that first page); in metadata-only runs to zeros.
    #[test]
    fn second_writes_decode_to_their_message_where_data_is_kept() {
        let geo = Preset::Wom.device().geometry;
        let d = geo.data_bytes as usize;
        let (mut a, mut b, mut out) = (vec![0xFFu8; d], vec![0xFFu8; d], vec![0u8; d]);
        let msg = |k: u64| (0..d).map(|i| (i as u64 * 31 + k) as u8).collect::<Vec<u8>>();
        for keep in [true, false] {
            // Every attempt succeeds, so each encode stores its message.
            let mut codec = SimulatedWom::new(&geo, 0, 1000, 1, 1).keep_data(keep);
            for (key, k) in [(10u64, 1u64), (11, 2), (10, 3)] {
                codec.encode(key, &msg(k), &mut a, &mut b).unwrap();
            }
            for (key, k) in [(10u64, 3u64), (11, 2)] {
                codec.decode(key, &mut a, &mut b, &mut out).unwrap();
                let want = if keep { msg(k) } else { vec![0u8; d] };
                assert_eq!(out, want, "keep {keep} key {key}");
            }
        }
    }
}
