//! Multi-plane operations (`ftl_core::multiplane`) under power cuts and failures, and the batch
//! API (`Ftl::write_many`, `Ftl::read_many`) against a model.
//!
//! The FTL issues multi-plane operations without techniques, with FlexECC, with the NV cache
//! and with deduplication, and multi-plane reads and erases (programs single-plane) with
//! deduplication stacked with the NV cache and with a write-back NV cache (second writes have
//! their own paths), so these tests run the baseline (`Env::new`, the flat map) in every build,
//! with feature `cdm` the NV cache too (`nv_cache`, at the end); the default build's torture and
//! model suites stack deduplication, FlexECC and the NV cache (multi-plane reads and erases).
//! With feature `dedup` (issue #20), deduplication attached alone ([`dedup_env`]: the build's
//! CAFTL index, shared contents among the writes):
//! - `dedup_runs_the_same_with_multi_plane_operations`: a seeded workload with multi-plane off
//!   and on, 2 and 4 planes: the same contents, reference counts and dedup counters;
//!   multi-plane reads, erases and programs (a request's unique pages striped) only when on.
//! - `dedup_stripes_with_one_content_twice`: requests holding one content twice in a stripe
//!   and overwriting pages whose content they write again, off and on, 2 and 4 planes: the
//!   same contents before and after a remount, reference counts, shared contents, live pages
//!   and write-path counters; multi-plane programs only when on.
//! - `dedup_batches_stripe_their_misses`: the same with `write_many` batches (pages anywhere, a
//!   logical page now and then twice in a batch): a batch's misses go out in stripes.
//! - `dedup_batch_model_reaches_cuts_in_stripes`: the batch model below with deduplication
//!   attached and shared contents, fixed seeds, both cut semantics: after a cut, each page of an
//!   unacknowledged batch reads old or new (about 290 cuts inside batches).
//! - `exhaustive_cuts_with_dedup`: the exhaustive run below with shared contents on 2 and 4
//!   planes, both emulator semantics of a cut multi-plane call, and channel-first striping on
//!   2 LUNs x 2 planes; then across a realignment of the unique pages' stripes (the workload
//!   below, 2 planes cut op only, 4 planes whole calls torn) (about 10,700 cut points; cuts
//!   tear whole multi-plane programs of unique pages, and land on the realigning voids).
//! - `dedup_even_requests_realign_the_planes_after_an_odd_page`: requests of one stripe's pages
//!   after an odd page, every fourth of shared contents: the unique pages' stripes realign
//!   (`multiplane.rs`, **Realignment**) and stripe whole; the same contents, reference counts
//!   and dedup counters as with multi-plane off.
//!
//! With feature `flex-ecc` (issue #20), FlexECC attached
//! alone ([`flex_env`]: its codec over BCH t = 4, clean writes and flush-reads among the ops):
//! - `exhaustive_cuts_with_flex_ecc`: the exhaustive run below on 2 and 4 planes, both emulator
//!   semantics of a cut multi-plane call, flat and cached map (about 13,500 cut points).
//! - `random_cuts_multi_plane_with_flex_ecc`: the random runs below, both semantics, flat and
//!   cached map: `FTL_MPFLEX_CUTS` cuts each (default 300), seeds from `FTL_MPFLEX_SEED`.
//!
//! - `exhaustive_cuts_in_multi_plane_ops`: a workload of multi-page writes (stripes programmed
//!   by one multi-plane program), GC (victims erased in multi-plane erases at allocation),
//!   trims, flushes and a remount, cut at every device operation (`FTL_TORTURE_STRIDE` = s: every
//!   s-th). Each page or block of a multi-plane call is its own device operation, so the cut
//!   points include every page of every multi-plane program and every block of every
//!   multi-plane erase: before the cut one, all done; the cut one torn or partly erased; after
//!   it, untouched (the emulator's semantics).
//! - `random_cuts_multi_plane`: random workloads with a cut always pending on 2- and 4-plane
//!   devices, program and erase failures injected in half the seeds (a multi-plane call failing
//!   part way: bad-block marking and retries); `FTL_MPLANE_CUTS` cuts (default 3000).
//! - `batch_api_matches_model`: proptest of `write_many` / `read_many` batches, flushes and cuts:
//!   reads equal the model; after a cut, each page of an unacknowledged batch (and every page
//!   written since the last flush) reads as its old or its new content, never anything else
//!   (half the cases, and every seed of `batch_model_reaches_cuts_in_multi_plane_programs`, also
//!   on the chip that tears whole calls, below).
//!
//! A chip that programs (erases) the planes of a multi-plane call at once can leave *every* page
//! of the cut program torn (every block of the cut erase partly erased): the emulator's
//! `MultiPlaneCut::WholeCall`. On it:
//! - `exhaustive_cuts_tearing_whole_multi_plane_calls`: the exhaustive run above on 2 and 4
//!   planes (`FTL_TORTURE_STRIDE` applies).
//! - `random_cuts_tearing_whole_multi_plane_calls`: the random runs above with the CRC codec and
//!   with BCH t = 8 at RBER 2e-5 (torn fractions 0.99: metadata decodes, data does not; 0.999:
//!   data decodes with corrections), `FTL_MPTEAR_CUTS` cuts each (default 3000; 20000 takes a
//!   few minutes), seeds from `FTL_MPTEAR_SEED`.
//! - `each_page_of_a_torn_multi_plane_program_is_rolled_back_or_kept`: 36 torn programs (2 and
//!   4 planes, the cut on each page of the program), every page judged from its own bytes:
//!   rolled back and voided, or kept and copied once if it needed correction.
//! - `torn_program_copies_survive_cuts_in_the_recovery_mount`: the same with the recovery mount
//!   cut at each of its operations: every page that needed correction is copied in the end.
//! - `batches_realign_drifted_frontiers`: after cuts leave the planes' host frontiers at
//!   different offsets, batches line them up again and multi-plane programs resume.
//! - `even_requests_realign_the_planes_after_an_odd_page`, `mixed_requests_never_realign`,
//!   `exhaustive_cuts_across_realignment`: requests of one stripe's pages that keep starting one
//!   page off the lined-up planes get the planes realigned by voided pages, once; mixed sizes
//!   never do; cuts at every device operation around it (`multiplane.rs`, **Realignment**).
//!
//! The cached (flash-resident) map: multi-plane programs and reads run on it too, each stripe's
//! map entries in RAM with room for their changes before its program (`multiplane.rs`).
//! `*_cached_map` run the exhaustive and random cut runs above on it ([`cached_map`]: the
//! harness's small cache, evictions and map write-backs all the time); the batch model runs on
//! it in half its cases (and in `batch_model_reaches_cuts_in_multi_plane_programs`);
//! `cached_map_issues_multi_plane_programs_and_reads` counts the calls, and
//! `cached_map_stripe_makes_room_before_its_program` / `cached_map_too_small_for_a_stripe`
//! check the rule's two sides (room made by a write-back before the program; a stripe that
//! cannot be resident written page by page), each across a cut. GC leaves its victims for
//! multi-plane erases on the cached map unless a mount from the pool keeps its counts:
//! `exhaustive_cuts_in_multi_plane_ops_cached_map` counts the pairs, and
//! `cached_map_pool_mount_takes_no_unerased_victim_for_a_used_block` checks both sides across
//! power losses (a map the mount recounts, one whose counts it keeps).
//!
//! The NV cache (feature `cdm`, module `nv_cache`):
//! - `nv_cache_runs_multi_plane_with_the_same_cache_behaviour`: one seeded workload per cache
//!   setting (CDM and NVM-basic write-through, CDM write-back) on 2 and 4 planes with
//!   multi-plane operations on and off: the same bytes on every read (each checked against the
//!   model), the same NV cache counters, and multi-plane calls only when on.
//! - `exhaustive_cuts_with_the_nv_cache` and `random_cuts_with_the_nv_cache`
//!   (`FTL_MPNV_CUTS`): the cut runs above with the cache attached, under both cut semantics
//!   (and channel first on 2 LUNs).
//! - `stripe_never_lets_an_evicted_only_copy_overwrite_its_pages`: a stripe whose cache copies
//!   might evict an only copy is written page by page (else the only copy's write-back, after
//!   the stripe's program, outranks the stripe's newer page at the next mount).
//! - `torn_stripe_of_a_write_through_cache_mounted_write_back`: a write-through cache's stripe
//!   torn whole by a cut, mounted write-back (a runtime setting): mount still checks every page
//!   of the torn program.
//!
//! Deduplication stacked with the NV cache (features `dedup` and `cdm`, module
//! `dedup_nv_cache`; duplicate content among the writes, shared pages read by multi-plane reads
//! while some logical pages are cached and some not):
//! - `dedup_with_the_nv_cache_runs_the_same_with_multi_plane_reads_and_erases`: a seeded
//!   workload per cache setting (CDM and NVM-basic write-through, CDM write-back; with
//!   deduplication's write path first, a write-back cache takes no host page) on 2 and 4
//!   planes, multi-plane on and off: the same bytes on every read (checked against the model),
//!   the same host-side cache counters (NVM-basic: all of them, and the same flash reads), the
//!   same reference counts and shared contents; multi-plane reads and erases only when on.
//! - `exhaustive_cuts_with_dedup_and_the_nv_cache`: the dedup exhaustive run with the cache
//!   attached (write-through and write-back, the whole device read after each flush), 2 and 4
//!   planes, both cut semantics (about 10,500 cut points).
//! - `random_cuts_with_dedup_and_the_nv_cache`: random workloads with duplicates and a cut always
//!   pending, failures in half the seeds, both cut semantics: `FTL_MPDEDUPNV_CUTS` cuts each
//!   (default 300; a third as many write-back), seeds from `FTL_MPDEDUPNV_SEED`.
//!
//! Channel-first striping (`Config::stripe_order`, `StripeOrder::ChannelFirst`):
//! - `channel_first_places_consecutive_pages_on_alternate_luns`: the planes consecutive pages
//!   land on, against the order written out by hand, with multi-plane programs off and on.
//! - `exhaustive_cuts_channel_first`: the exhaustive cut run on 2 LUNs x 2 planes, both cut
//!   semantics; `batch_api_matches_model_channel_first` and every third seed of
//!   `batch_model_reaches_cuts_in_multi_plane_programs`: the batch model on 2 LUNs.

use ftl_core::meta::{void_zeros, PageKind, PageMeta, SpareState, META_LEN, VOID_STRONG_ZEROS};
use ftl_core::policy::{
    DefaultPolicies, Greedy, PageCodec, Policies, PolicySet, RequestSizeClassifier, SingleHostStream,
};
use ftl_core::{Config, Error, StripeOrder};
use ftl_policies::flex_ecc::BchCodec;
use ftl_testkit::{FtlMemory, MapChoice};
use ftl_tests::{
    fill_page, format, format_with, geometry, identify, is_power_loss, mount, mount_with, random_workload,
    small_map_cache, Content, Env, ExtParts, Found, Op, RandomCuts, Rng, Start, Verify,
};
use nand_emu::{Emulator, EmulatorConfig, FaultConfig, MultiPlaneCut};
use nand_hal::{EccRequirement, Geometry, NandFlash, PageId};
use proptest::prelude::*;

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// `n` scaled down by `FTL_TORTURE_STRIDE` (an exhaustive run cuts every stride-th operation):
/// how many of the cut points' events a strided run must still reach.
fn per_stride(n: u64) -> u64 {
    n / env_u64("FTL_TORTURE_STRIDE", 1).max(1)
}

fn emulator(geo: Geometry, torn: f64, seed: u64, fail: bool, cut: MultiPlaneCut) -> Emulator {
    emulator_rber(geo, 0.0, torn, seed, fail, cut)
}

fn emulator_rber(geo: Geometry, rber: f64, torn: f64, seed: u64, fail: bool, cut: MultiPlaneCut) -> Emulator {
    let mut faults =
        FaultConfig { rber, torn_fraction: torn, partial_erase_fraction: 0.5, ..FaultConfig::default() };
    if fail {
        faults.program_fail_base = 5e-4;
        faults.erase_fail_base = 5e-4;
    }
    Emulator::new(EmulatorConfig { faults, seed, multi_plane_cut: cut, ..EmulatorConfig::new(geo) }).unwrap()
}

/// The cached map these tests run: the harness's small cache ([`small_map_cache`], an eighth of
/// the map's lines: evictions and map write-backs all the time), with at least 8 slots in its
/// dirty-entry buffer (6 changes), so that a 4-plane stripe's changes fit (the harness's
/// smallest cache, one line and 4 slots, takes 3: [`cached_map_too_small_for_a_stripe`]).
fn cached_map(cfg: &Config) -> MapChoice {
    match small_map_cache(cfg) {
        MapChoice::Cached { cache_bytes } => MapChoice::Cached { cache_bytes: cache_bytes.max(160) },
        flat => flat,
    }
}

/// A map's name in messages.
fn map_name(map: MapChoice) -> &'static str {
    if map == MapChoice::Flat {
        "flat map"
    } else {
        "cached map"
    }
}

/// Multi-page writes over the whole capacity, overwrites, trims, flushes and a remount.
fn striped_workload(logical: u32, rng: &mut Rng) -> Vec<Op> {
    let mut ops = vec![];
    for lpn in (0..logical).step_by(4) {
        ops.push(Op::Write { lpn, pages: 4.min(logical - lpn) });
    }
    ops.extend(random_workload(rng, logical, 120));
    ops.push(Op::Flush);
    ops.push(Op::Remount);
    ops.extend(random_workload(rng, logical, 80));
    ops.push(Op::Flush);
    ops
}

/// What the cut runs of a test reached: cuts, and of them those the emulator took as tearing a
/// whole multi-plane program or erase.
#[derive(Default, Debug)]
struct CutRuns {
    cuts: u64,
    whole_programs: u64,
    whole_erases: u64,
    totals: ftl_tests::Totals,
    /// Map pages written (cached map).
    map_writes: u64,
}

impl CutRuns {
    fn add<P>(&mut self, env: &Env<P>) {
        let (t, e) = (env.totals, env.emu.counters());
        self.whole_programs += e.whole_call_cut_programs;
        self.whole_erases += e.whole_call_cut_erases;
        self.totals.multi_plane_programs += t.multi_plane_programs;
        self.totals.multi_plane_erases += t.multi_plane_erases;
        self.totals.multi_plane_reads += t.multi_plane_reads;
        self.totals.deduplicated += t.deduplicated;
        self.totals.program_failures += t.program_failures;
        self.totals.erase_failures += t.erase_failures;
        self.totals.gc_blocks += t.gc_blocks;
        self.totals.realign_pads += t.realign_pads;
        self.totals.flex_dirty_writes += t.flex_dirty_writes;
        self.totals.flex_correcting_moved += t.flex_correcting_moved;
        self.totals.flex_clean_writes += t.flex_clean_writes;
        self.totals.flex_marked += t.flex_marked;
        self.totals.flex_converted += t.flex_converted;
        self.totals.flex_detecting_moved += t.flex_detecting_moved;
        self.totals.nv_write_inserts += t.nv_write_inserts;
        self.totals.nv_read_hits += t.nv_read_hits;
        self.map_writes += t.map_page_writes;
    }
}

/// What the cut runs stack on the FTL.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Attach {
    /// Nothing: the baseline.
    Nothing,
    /// The harness's NV cache (feature `cdm`: CDM, write-through, a quarter of the logical
    /// pages, its NV memory whole across the NAND's cuts; cuts of the NV memory itself are
    /// cdm.rs's).
    #[cfg(feature = "cdm")]
    NvCache,
    /// The same cache in write-back mode: host pages go to the cache (no host stripes), reads
    /// and erases are multi-plane, evicted only copies are written back page by page.
    #[cfg(feature = "cdm")]
    NvCacheWriteBack,
}

impl Attach {
    /// Adds what every format and mount of a run lends the FTL to `ext` (the techniques the
    /// run's environment attaches already, e.g. [`dedup_env`]'s deduplication, stay).
    fn add_to(self, ext: &mut ExtParts, geo: &Geometry, cfg: &Config) {
        let _ = (&ext, geo, cfg);
        match self {
            Attach::Nothing => {}
            #[cfg(feature = "cdm")]
            Attach::NvCache => ext.cache = ftl_tests::stack::CacheParts::for_build(geo, cfg),
            #[cfg(feature = "cdm")]
            Attach::NvCacheWriteBack => {
                let mut cache = ftl_tests::stack::CacheParts::for_build(geo, cfg);
                if let Some(c) = cache.as_mut() {
                    c.config.write_back = true;
                }
                ext.cache = cache;
            }
        }
    }

    /// Whether host writes are striped (multi-plane programs): not into a write-back cache.
    fn stripes(self) -> bool {
        match self {
            #[cfg(feature = "cdm")]
            Attach::NvCacheWriteBack => false,
            _ => true,
        }
    }

    /// The runs reached what the attached technique does: pages put in the cache, and read
    /// from it.
    fn check_reached(self, t: &ftl_tests::Totals) {
        if self != Attach::Nothing {
            assert!(t.nv_write_inserts > 0 && t.nv_read_hits > 0, "the runs must reach the NV cache: {t:?}");
        }
    }
}

/// [`striped_workload`] on `geo` cut at every device operation (every `FTL_TORTURE_STRIDE`-th),
/// each cut followed by a recovery mount that is itself cut at a varying point.
fn exhaustive_cuts(geo: Geometry, cut: MultiPlaneCut) -> CutRuns {
    exhaustive_cuts_in(geo, cut, StripeOrder::PlaneFirst, MapChoice::Flat)
}

/// [`exhaustive_cuts`] with the host pages striped in `order`, on `map` (`MapChoice::Flat`, or
/// [`cached_map`]'s choice when cached).
fn exhaustive_cuts_in(geo: Geometry, cut: MultiPlaneCut, order: StripeOrder, map: MapChoice) -> CutRuns {
    exhaustive_cuts_env(geo, cut, order, map, Env::new, Attach::Nothing)
}

/// [`exhaustive_cuts_in`] with `attach` stacked on every format and mount.
#[cfg(feature = "cdm")]
fn exhaustive_cuts_with(
    geo: Geometry,
    cut: MultiPlaneCut,
    order: StripeOrder,
    map: MapChoice,
    attach: Attach,
) -> CutRuns {
    exhaustive_cuts_env(geo, cut, order, map, Env::new, attach)
}

/// [`exhaustive_cuts_in`] with each run's environment from `make_env` (its policies, the
/// techniques it attaches) and `attach` stacked on every format and mount.
fn exhaustive_cuts_env<P: PolicySet + Clone>(
    geo: Geometry,
    cut: MultiPlaneCut,
    order: StripeOrder,
    map: MapChoice,
    make_env: impl Fn(Emulator, Config) -> Env<P>,
    attach: Attach,
) -> CutRuns {
    let mut cfg = Config::with_logical_pages(&geo, 32);
    cfg.checkpoint_interval_blocks = 4;
    cfg.stripe_order = order;
    let map = if map == MapChoice::Flat { map } else { cached_map(&cfg) };
    let mut ops = striped_workload(cfg.logical_pages, &mut Rng::new(11));
    let mut dry = make_env(emulator(geo, 0.5, 1, false, cut), cfg);
    // Deduplication attached: shared contents among the writes (its unique pages striped).
    let dedup = dry.ext.stack().dedup;
    if dedup {
        ftl_tests::with_duplicates(&mut ops);
        if attach != Attach::Nothing {
            // The NV cache serves most of the workload's reads: the whole device read after
            // each flush (shared pages, cached and not, in multi-plane reads).
            ops = ops
                .into_iter()
                .flat_map(|op| match op {
                    Op::Flush => vec![op, Op::Read { lpn: 0, pages: cfg.logical_pages }],
                    op => vec![op],
                })
                .collect();
        }
    }
    dry.use_map(map);
    attach.add_to(&mut dry.ext, &geo, &cfg);
    dry.verify = Verify::Touched;
    let n = dry.run(&ops, Start::Format).unwrap().ops_at_end;
    let t = dry.totals;
    if dedup {
        // Deduplication alone stripes its unique pages; stacked with the NV cache its programs
        // stay single-plane.
        let programs =
            if attach == Attach::Nothing { t.multi_plane_programs > 20 } else { t.multi_plane_programs == 0 };
        assert!(
            programs && t.multi_plane_reads > 20 && t.deduplicated > 20 && t.gc_blocks > 0,
            "the workload must reach multi-plane reads (and programs alone), duplicates and GC: {t:?}"
        );
    } else {
        assert!(
            t.multi_plane_programs > 20 && t.gc_blocks > 0,
            "the workload must reach multi-plane programs and GC: {t:?}"
        );
    }
    attach.check_reached(&t);
    assert!(t.multi_plane_erases > 5, "the workload must reach multi-plane erases: {t:?}");
    if map != MapChoice::Flat {
        assert!(t.map_page_writes > 20, "the workload must reach map write-backs: {t:?}");
    }
    cut_each_op(geo, cut, cfg, map, &ops, n, &make_env, attach, &t)
}

/// Runs `ops` (`n` device operations uncut) once per device operation `k` (`FTL_TORTURE_STRIDE`
/// = s: every s-th) with a power cut at `k`, the recovery mount cut too and 12 more ops after
/// the cut; every read checked against the model. `t`: the uncut run's counters (reported).
#[allow(clippy::too_many_arguments)]
fn cut_each_op<P: PolicySet + Clone>(
    geo: Geometry,
    cut: MultiPlaneCut,
    cfg: Config,
    map: MapChoice,
    ops: &[Op],
    n: u64,
    make_env: &impl Fn(Emulator, Config) -> Env<P>,
    attach: Attach,
    t: &ftl_tests::Totals,
) -> CutRuns {
    let order = cfg.stripe_order;
    let stride = env_u64("FTL_TORTURE_STRIDE", 1).max(1) as usize;
    let mut runs = CutRuns::default();
    for k in (0..n).step_by(stride) {
        let mut env = make_env(emulator(geo, [0.5, 0.999, 0.01][k as usize % 3], k, false, cut), cfg);
        env.use_map(map);
        attach.add_to(&mut env.ext, &geo, &cfg);
        env.verify = Verify::Touched;
        env.ops_after_cut = Some(12);
        env.mount_cut = Some(((k * 0x9E37_79B9) % 400) as u32);
        env.emu.schedule_power_cut(k);
        let s = env.run(ops, Start::Format).unwrap_or_else(|e| {
            panic!(
                "{} planes, {order:?}, {cut:?}, {}, {attach:?}: cut at device op {k} of {n}: {e}",
                geo.planes_per_lun,
                map_name(map)
            )
        });
        assert!(s.format_cut || s.cuts >= 1, "cut at op {k} of {n} never fired");
        runs.cuts += 1;
        runs.add(&env);
    }
    eprintln!(
        "{} LUNs x {} planes, {order:?}, {cut:?}, {}, {attach:?}: {} cut points of {n}; {runs:?}; dry-run counters {t:?}",
        geo.luns,
        geo.planes_per_lun,
        map_name(map),
        runs.cuts
    );
    runs
}

#[test]
fn exhaustive_cuts_in_multi_plane_ops() {
    exhaustive_cuts(geometry(4, 12, 2), MultiPlaneCut::CutOpOnly);
}

/// Channel-first striping (consecutive pages on different LUNs, each LUN's pages of a request
/// in one multi-plane program) on 2 LUNs x 2 planes, cut at every device operation, under both
/// emulator semantics of a cut multi-plane call.
#[test]
fn exhaustive_cuts_channel_first() {
    let geo = Geometry { luns: 2, ..geometry(4, 12, 2) };
    for cut in [MultiPlaneCut::CutOpOnly, MultiPlaneCut::WholeCall] {
        let r = exhaustive_cuts_in(geo, cut, StripeOrder::ChannelFirst, MapChoice::Flat);
        if cut == MultiPlaneCut::WholeCall {
            assert!(r.whole_programs > per_stride(20), "the cuts must land in multi-plane programs: {r:?}");
        }
    }
}

/// The chip that tears every page of a multi-plane program (and partly erases every block of a
/// multi-plane erase) when a cut lands on any of its operations, on 2 and 4 planes.
#[test]
fn exhaustive_cuts_tearing_whole_multi_plane_calls() {
    for planes in [2, 4] {
        let r = exhaustive_cuts(geometry(4, 12, planes), MultiPlaneCut::WholeCall);
        assert!(
            r.whole_programs > per_stride(40) && r.whole_erases > per_stride(5),
            "{planes} planes: the cuts must land in multi-plane programs and erases: {r:?}"
        );
    }
}

/// [`exhaustive_cuts_in_multi_plane_ops`] on the cached map (its small cache: map write-backs
/// and evictions between stripes, and stripes whose entries cannot all be resident written page
/// by page), and the same on the chip that tears whole multi-plane calls, on 2 and 4 planes and
/// channel first on 2 LUNs.
#[test]
fn exhaustive_cuts_in_multi_plane_ops_cached_map() {
    let cached = ftl_tests::CACHED;
    let r = exhaustive_cuts_in(geometry(4, 12, 2), MultiPlaneCut::CutOpOnly, StripeOrder::PlaneFirst, cached);
    assert!(r.totals.multi_plane_programs > per_stride(1000) && r.map_writes > per_stride(1000), "{r:?}");
    // GC leaves its victims `Dirty` for multi-plane erases (this map is recounted by a mount
    // from the pool): 107,470 multi-plane erases over the cut runs; when GC erased each victim
    // at once (format's stripes and released checkpoint blocks only), a run of every 50th cut
    // point made 654 (so about 32,700 for all of them), this one's 2,140.
    assert!(r.totals.multi_plane_erases > per_stride(70_000), "GC's victims must be erased in pairs: {r:?}");
    for planes in [2, 4] {
        let r = exhaustive_cuts_in(
            geometry(4, 12, planes),
            MultiPlaneCut::WholeCall,
            StripeOrder::PlaneFirst,
            cached,
        );
        assert!(
            r.whole_programs > per_stride(40),
            "{planes} planes: the cuts must land in multi-plane programs: {r:?}"
        );
    }
    // Channel-first striping on 2 LUNs x 2 planes (a round's reads fault their entries in to
    // sort them).
    let geo = Geometry { luns: 2, ..geometry(4, 12, 2) };
    let r = exhaustive_cuts_in(geo, MultiPlaneCut::WholeCall, StripeOrder::ChannelFirst, cached);
    assert!(r.whole_programs > per_stride(20), "the cuts must land in multi-plane programs: {r:?}");
}

/// The page codec of a random cut run.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Codec {
    /// The default CRC-32C (detects, corrects nothing), no raw bit errors.
    Crc,
    /// BCH t = 8 per 512 bytes at RBER 2e-5 (as bit_errors.rs): torn pages that decode with
    /// corrections are kept and rewritten by mount (its step 7).
    Bch,
    /// FlexECC attached ([`flex_env`]): its codec over BCH t = 4 per 512 bytes, clean writes in
    /// the detecting format and flush-reads (GC drops them to it) among the ops; no raw bit
    /// errors (a detecting page with one fails its read: served from the backing store by
    /// `read_or_fetch`, which the harness does not call).
    #[cfg(feature = "flex-ecc")]
    Flex,
}

/// BCH(m = 13, t = 8) over 512-byte codewords (bit_errors.rs).
type Bch8 = BchCodec<8192, 2>;
type BchPolicies = Policies<Bch8, RequestSizeClassifier, Greedy, SingleHostStream>;

/// `geometry` with room for [`Bch8`]: 64 spare bytes, t = 8 per 512 bytes.
fn bch_geometry(ppb: u32, bpp: u32, planes: u32) -> Geometry {
    Geometry {
        spare_bytes: 64,
        ecc: EccRequirement { bits: 8, codeword_bytes: 512 },
        ..geometry(ppb, bpp, planes)
    }
}

fn bch_policies(geo: &Geometry) -> BchPolicies {
    let d = DefaultPolicies::default();
    let codec = Bch8::for_geometry(geo).expect("BCH codec for the geometry");
    Policies { codec, classifier: d.classifier, victim: d.victim, placement: d.placement }
}

/// Random workloads with a cut always pending on 2- and 4-plane devices (program and erase
/// failures in half the seeds), until `target` cuts fired; seeds from `seed`.
fn random_cuts(cut: MultiPlaneCut, codec: Codec, target: u64, seed: u64, rerun: &str) -> CutRuns {
    random_cuts_on(MapChoice::Flat, cut, codec, target, seed, rerun)
}

/// [`random_cuts`] on `map` (flat, or [`cached_map`]'s cache when cached).
fn random_cuts_on(
    map: MapChoice,
    cut: MultiPlaneCut,
    codec: Codec,
    target: u64,
    seed: u64,
    rerun: &str,
) -> CutRuns {
    random_cuts_with(map, Attach::Nothing, cut, codec, target, seed, rerun)
}

/// [`random_cuts_on`] with `attach` stacked on every format and mount.
fn random_cuts_with(
    map: MapChoice,
    attach: Attach,
    cut: MultiPlaneCut,
    codec: Codec,
    target: u64,
    mut seed: u64,
    rerun: &str,
) -> CutRuns {
    let mut runs = CutRuns::default();
    while runs.cuts < target {
        let mut rng = Rng::new(seed);
        let (ppb, bpp, planes) = [(16, 48, 2), (8, 32, 4)][(seed % 2) as usize];
        let (geo, rber, torn) = match codec {
            Codec::Crc => (geometry(ppb, bpp, planes), 0.0, [0.5, 0.999, 0.01]),
            // 0.99: metadata decodes (BCH t = 3), data does not; 0.999: data decodes corrected.
            Codec::Bch => (bch_geometry(ppb, bpp, planes), 2e-5, [0.99, 0.999, 0.5]),
            #[cfg(feature = "flex-ecc")]
            Codec::Flex => (flex_geometry(ppb, bpp, planes), 0.0, [0.99, 0.999, 0.5]),
        };
        let mut cfg = Config::for_utilization(&geo, 600);
        cfg.checkpoint_interval_blocks = 16;
        let mut ops = Vec::new();
        for _ in 0..8 {
            ops.extend(random_workload(&mut rng, cfg.logical_pages, 400));
            if rng.chance(1, 3) {
                ops.push(Op::Remount);
            }
        }
        let fail = seed % 4 >= 2;
        let emu = emulator_rber(geo, rber, torn[(seed % 3) as usize], seed, fail, cut);
        let map = if map == MapChoice::Flat { map } else { cached_map(&cfg) };
        let s = match codec {
            Codec::Crc => {
                let mut env = Env::new(emu, cfg);
                attach.add_to(&mut env.ext, &geo, &cfg);
                run_random_cuts(env, map, &ops, seed, &mut runs)
            }
            Codec::Bch => {
                let mut env = Env::with_policies(emu, cfg, bch_policies(&geo));
                attach.add_to(&mut env.ext, &geo, &cfg);
                run_random_cuts(env, map, &ops, seed, &mut runs)
            }
            #[cfg(feature = "flex-ecc")]
            Codec::Flex => run_random_cuts(flex_env(emu, cfg), map, &ops, seed, &mut runs),
        };
        s.unwrap_or_else(|e| {
            panic!(
                "seed {seed} ({planes} planes, failures {fail}, {cut:?}, {codec:?}, {}, {attach:?}) failed (rerun: {rerun}_SEED={seed} {rerun}_CUTS=1): {e}",
                map_name(map)
            )
        });
        seed += 1;
    }
    let t = &runs.totals;
    assert!(
        (t.multi_plane_programs > 100 || !attach.stripes()) && t.program_failures > 0 && t.erase_failures > 0,
        "the runs must reach multi-plane programs and failures: {runs:?}"
    );
    attach.check_reached(t);
    if map == MapChoice::Flat {
        assert!(t.multi_plane_erases > 10, "the runs must reach multi-plane erases: {runs:?}");
    } else {
        assert!(runs.map_writes > 1000, "the runs must reach map write-backs: {runs:?}");
    }
    eprintln!("{cut:?}, {codec:?}, {}, {attach:?}: {} random cuts; {runs:?}", map_name(map), runs.cuts);
    runs
}

/// One run of [`random_cuts`]: `ops` with a cut always pending.
fn run_random_cuts<P: PolicySet + Clone>(
    mut env: Env<P>,
    map: MapChoice,
    ops: &[Op],
    seed: u64,
    runs: &mut CutRuns,
) -> Result<(), String> {
    env.use_map(map);
    env.verify = Verify::Touched;
    env.random_cuts = Some(RandomCuts {
        rng: Rng::new(seed ^ 0xC0FFEE),
        max_after: 3000,
        mount_cut_percent: 25,
        max_mount_after: 600,
    });
    let s = env.run(ops, Start::Format)?;
    runs.cuts += s.cuts as u64;
    runs.add(&env);
    Ok(())
}

#[test]
fn random_cuts_multi_plane() {
    random_cuts(
        MultiPlaneCut::CutOpOnly,
        Codec::Crc,
        env_u64("FTL_MPLANE_CUTS", 3000),
        env_u64("FTL_MPLANE_SEED", 1),
        "FTL_MPLANE",
    );
}

/// [`random_cuts_multi_plane`] on the chip that tears whole multi-plane calls, with the CRC
/// codec and with BCH and raw bit errors: `FTL_MPTEAR_CUTS` cuts each (default 3000), seeds
/// from `FTL_MPTEAR_SEED` (default 1).
#[test]
fn random_cuts_tearing_whole_multi_plane_calls() {
    for codec in [Codec::Crc, Codec::Bch] {
        let r = random_cuts(
            MultiPlaneCut::WholeCall,
            codec,
            env_u64("FTL_MPTEAR_CUTS", 3000),
            env_u64("FTL_MPTEAR_SEED", 1),
            "FTL_MPTEAR",
        );
        assert!(
            r.whole_programs * 20 > r.cuts,
            "{codec:?}: at least one cut in 20 must tear a whole multi-plane program: {r:?}"
        );
    }
}

/// [`random_cuts_multi_plane`] and [`random_cuts_tearing_whole_multi_plane_calls`] (CRC codec)
/// on the cached map: `FTL_MPCACHE_CUTS` cuts each (default 1500), seeds from
/// `FTL_MPCACHE_SEED` (default 1).
#[test]
fn random_cuts_multi_plane_cached_map() {
    let cached = ftl_tests::CACHED;
    for cut in [MultiPlaneCut::CutOpOnly, MultiPlaneCut::WholeCall] {
        let r = random_cuts_on(
            cached,
            cut,
            Codec::Crc,
            env_u64("FTL_MPCACHE_CUTS", 1500),
            env_u64("FTL_MPCACHE_SEED", 1),
            "FTL_MPCACHE",
        );
        if cut == MultiPlaneCut::WholeCall {
            assert!(
                r.whole_programs * 20 > r.cuts,
                "one cut in 20 must tear a whole multi-plane program: {r:?}"
            );
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Deduplication attached (feature `dedup`, issue #20): multi-plane reads, erases and programs
// (a request's unique pages in stripes)

/// The baseline policies with deduplication attached as the build attaches it (CAFTL index that
/// pre-hashes, no sampling; `ftl_tests::stack`).
#[cfg(feature = "dedup")]
fn dedup_env(emu: Emulator, cfg: Config) -> Env {
    let geo = emu.geometry();
    let mut env = Env::new(emu, cfg);
    let dedup = ftl_tests::stack::DedupParts::for_build(&geo, &env.cfg);
    assert!(dedup.is_some(), "the dedup build attaches deduplication");
    env.ext = ftl_tests::ExtParts { dedup, ..ftl_tests::ExtParts::none() };
    env
}

/// What a run of [`dedup_run_ops`] left: every logical page's content read back after a remount
/// (one multi-page read) and each one's reference count, the shared contents and live pages.
#[cfg(feature = "dedup")]
#[derive(Debug, PartialEq)]
struct DedupImage {
    contents: Vec<Found>,
    refs: Vec<u32>,
    shared: usize,
    live: u64,
}

/// [`striped_workload`] with shared contents (`with_duplicates`) for `geo`, and its config.
#[cfg(feature = "dedup")]
fn dedup_workload(geo: Geometry) -> (Config, Vec<Op>) {
    let mut cfg = Config::with_logical_pages(&geo, 32);
    cfg.checkpoint_interval_blocks = 4;
    let mut ops = striped_workload(cfg.logical_pages, &mut Rng::new(5));
    for seed in 6..9 {
        ops.extend(random_workload(&mut Rng::new(seed), cfg.logical_pages, 150));
        ops.push(Op::Flush);
    }
    ftl_tests::with_duplicates(&mut ops);
    (cfg, ops)
}

/// `ops` ([`dedup_run_ops`]) with multi-plane operations off and on: the same image after a
/// remount (contents, reference counts, shared contents, live pages) and the same dedup rate
/// (pages shared, probes, host pages), the workload sharing more than `shares` pages. Returns
/// the totals, off and on.
#[cfg(feature = "dedup")]
fn dedup_off_and_on(
    geo: Geometry,
    cfg: Config,
    ops: &[Op],
    shares: u64,
) -> (ftl_tests::Totals, ftl_tests::Totals) {
    let planes = geo.planes_per_lun;
    let (off, image_off) = dedup_run_ops(geo, cfg, ops, false);
    let (on, image_on) = dedup_run_ops(geo, cfg, ops, true);
    assert_eq!(image_on, image_off, "{planes} planes: contents and sharing must not depend on multi-plane");
    assert!(
        image_on.shared > 0 && off.deduplicated > shares,
        "{planes} planes: the workload must share: {off:?}"
    );
    assert_eq!(
        (on.deduplicated, on.dedup_probes, on.host_write_pages),
        (off.deduplicated, off.dedup_probes, off.host_write_pages),
        "{planes} planes: dedup rate"
    );
    (off, on)
}

/// `ops` with deduplication on `geo`, multi-plane operations `multi_plane`, no cut; every read
/// checked against the model; then the image a remount reads.
#[cfg(feature = "dedup")]
fn dedup_run_ops(
    geo: Geometry,
    cfg: Config,
    ops: &[Op],
    multi_plane: bool,
) -> (ftl_tests::Totals, DedupImage) {
    let mut env = dedup_env(emulator(geo, 0.5, 1, false, MultiPlaneCut::CutOpOnly), cfg);
    env.multi_plane = multi_plane;
    env.verify = Verify::All;
    env.run(ops, Start::Format).unwrap_or_else(|e| panic!("multi-plane {multi_plane}: {e}"));
    let totals = env.totals;
    let policies = env.policies.clone();
    let mut f =
        ftl_tests::open(&mut env.emu, &mut env.mem, env.ext.extensions(), cfg, policies, false).unwrap();
    let pb = f.page_bytes() as usize;
    let mut buf = vec![0u8; pb * cfg.logical_pages as usize];
    f.read(0, &mut buf).unwrap();
    let contents = buf.chunks_exact(pb).enumerate().map(|(l, p)| identify(l as u32, p)).collect();
    let refs = (0..cfg.logical_pages).map(|l| f.content_refs(l)).collect();
    let image = DedupImage { contents, refs, shared: f.shared_contents(), live: f.live_physical_pages() };
    (totals, image)
}

/// The same seeded dedup workload with multi-plane operations off and on (2 and 4 planes): the
/// same contents read back, the same duplicates found and shared (reference counts per logical
/// page, shared contents, live physical pages, after a remount); with them on, multi-plane
/// reads, erases (GC's deferred erase) and programs (the unique pages of a request in stripes,
/// `dedup/stripe.rs`) run.
#[cfg(feature = "dedup")]
#[test]
fn dedup_runs_the_same_with_multi_plane_operations() {
    let mut moves = 0;
    for planes in [2, 4] {
        let geo = geometry(4, 12, planes);
        let (cfg, ops) = dedup_workload(geo);
        let (off, on) = dedup_off_and_on(geo, cfg, &ops, 50);
        // (Off: the harness turns them off once an instance is open, so format's erases and
        // each mount's check of every page still count.)
        assert!(
            on.multi_plane_reads > off.multi_plane_reads + 20
                && on.multi_plane_erases > off.multi_plane_erases + 20
                && on.multi_plane_programs > 20
                && off.multi_plane_programs == 0,
            "{planes} planes: multi-plane reads, erases and programs (the unique pages' stripes) when on: {on:?}\n{off:?}"
        );
        moves += on.shared_moves.min(off.shared_moves);
        eprintln!("{planes} planes: off {off:?}\non {on:?}");
    }
    assert!(moves > 0, "GC must move shared pages, multi-plane on and off");
}

/// What [`dedup_direct_run`] left: every logical page read back after a remount, each one's
/// reference count, the shared contents, the live physical pages and the dedup counters (of
/// the run, before the remount).
#[cfg(feature = "dedup")]
struct DirectImage {
    data: Vec<u8>,
    refs: Vec<u32>,
    shared: usize,
    live: u64,
    stats: ftl_core::dedup::DedupStats,
}

/// Requests of 1 to 8 pages, each page a content of a pool of 5, the previous page's content
/// again, or a new content (so that one request often holds one content twice, in one stripe,
/// and overwrites a page holding a content it writes again elsewhere), written with deduplication on `geo`, multi-plane operations `multi_plane`;
/// each page read back against what was written, before and after a remount. With `batches`,
/// each request is a `write_many` batch of pages anywhere instead (now and then the previous
/// page's logical page again: the later wins). Returns the image and the multi-plane programs.
#[cfg(feature = "dedup")]
fn dedup_direct_run(
    geo: Geometry,
    multi_plane: bool,
    sampling_unit: u32,
    batches: bool,
) -> (DirectImage, u64) {
    let cfg = Config::with_logical_pages(&geo, 32);
    let mut env = dedup_env(emulator(geo, 0.5, 1, false, MultiPlaneCut::CutOpOnly), cfg);
    let policies = env.policies.clone();
    let pb = geo.data_bytes as usize;
    let n = cfg.logical_pages as usize;
    let mut expect = vec![0u8; pb * n];
    let mut rng = Rng::new(3);
    let mut fresh = 100;
    let programs = {
        let mut f =
            ftl_tests::open(&mut env.emu, &mut env.mem, env.ext.extensions(), cfg, policies.clone(), true)
                .unwrap();
        f.set_multi_plane(multi_plane);
        f.set_dedup_settings(ftl_core::dedup::DedupSettings { sampling_unit, ..f.dedup_settings() });
        for step in 0..400 {
            let pages = 1 + rng.below(8) as usize;
            let lpn = rng.below((n - pages + 1) as u64) as usize;
            let mut id = 0;
            let mut batch: Vec<(u32, Vec<u8>)> = vec![];
            for i in 0..pages {
                let l = match batch.last() {
                    Some(&(prev, _)) if rng.chance(1, 8) => prev as usize,
                    _ if batches => rng.below(n as u64) as usize,
                    _ => lpn + i,
                };
                // A pooled content, the previous page's again, or a new one.
                id = match rng.below(4) {
                    0 => 1 + rng.below(5),
                    1 if i > 0 => id,
                    _ => {
                        fresh += 1;
                        fresh
                    }
                };
                let page = &mut expect[l * pb..(l + 1) * pb];
                fill_page(0, ftl_tests::SHARED_CONTENT | id, page);
                if batches {
                    batch.push((l as u32, page.to_vec()));
                }
            }
            if batches {
                let pairs: Vec<(u32, &[u8])> = batch.iter().map(|(l, d)| (*l, &d[..])).collect();
                f.write_many(&pairs).unwrap();
            } else {
                f.write(lpn as u32, &expect[lpn * pb..(lpn + pages) * pb]).unwrap();
            }
            if step % 40 == 39 {
                f.flush().unwrap();
            }
        }
        f.flush().unwrap();
        let mut got = vec![0u8; pb * n];
        f.read(0, &mut got).unwrap();
        assert!(got == expect, "multi-plane {multi_plane}: contents before the remount");
        (f.counters().multi_plane_programs, f.dedup_stats())
    };
    let (programs, stats) = programs;
    let mut f =
        ftl_tests::open(&mut env.emu, &mut env.mem, env.ext.extensions(), cfg, policies, false).unwrap();
    let mut data = vec![0u8; pb * n];
    f.read(0, &mut data).unwrap();
    assert!(data == expect, "multi-plane {multi_plane}: contents after the remount");
    let refs = (0..cfg.logical_pages).map(|l| f.content_refs(l)).collect();
    let image = DirectImage { data, refs, shared: f.shared_contents(), live: f.live_physical_pages(), stats };
    (image, programs)
}

/// Requests that hold one content twice (a stripe's second page a share of its first, only after
/// the first's program) and overwrite pages whose content they write again (a probe that hits a
/// page held for the stripe): with multi-plane programs on, the same contents, reference counts,
/// shared contents, live pages and dedup counters (probes, hits, shares, conversions) as with
/// them off, 2 and 4 planes, every page probed or 4-page sampling units (a unit's sample probed
/// first), and multi-plane programs only when on.
#[cfg(feature = "dedup")]
#[test]
fn dedup_stripes_with_one_content_twice() {
    for (planes, unit) in [(2, 0), (4, 0), (2, 4), (4, 4)] {
        dedup_direct_off_and_on(planes, unit, false);
    }
}

/// [`dedup_stripes_with_one_content_twice`] with `write_many` batches (each page a request of
/// its own; a batch may name a logical page twice), 2 and 4 planes: the misses of a batch go
/// out in stripes (before, deduplication wrote a batch page by page: no multi-plane program),
/// with the same contents, sharing and dedup counters as with multi-plane programs off.
#[cfg(feature = "dedup")]
#[test]
fn dedup_batches_stripe_their_misses() {
    for planes in [2, 4] {
        dedup_direct_off_and_on(planes, 0, true);
    }
}

/// [`dedup_direct_run`] with multi-plane operations off and on (`planes` planes, sampling unit
/// `unit`, `batches`): the same contents, reference counts, shared contents, live pages and
/// write-path dedup counters, and multi-plane programs only when on.
#[cfg(feature = "dedup")]
fn dedup_direct_off_and_on(planes: u32, unit: u32, batches: bool) {
    let what = format!("{planes} planes, sampling unit {unit}, batches {batches}");
    let geo = geometry(4, 12, planes);
    let (off, off_programs) = dedup_direct_run(geo, false, unit, batches);
    let (on, on_programs) = dedup_direct_run(geo, true, unit, batches);
    assert!(
        off.stats.deduplicated > if unit == 0 { 500 } else { 30 } && (off.shared > 0 || unit > 0),
        "{what}: the run must share: {:?}, {} shared",
        off.stats,
        off.shared
    );
    // The write path's counters (GC's moves of shared pages and its journal pages follow
    // GC's timing, which multi-plane programs change).
    let write_path = |s: &ftl_core::dedup::DedupStats| {
        (s.probes, s.unprobed, s.hits, s.stale_hits, s.deduplicated, s.vmap_full, s.conversions)
    };
    assert_eq!(write_path(&on.stats), write_path(&off.stats), "{what}: dedup counters");
    assert!(
        (&on.data, &on.refs, on.shared, on.live) == (&off.data, &off.refs, off.shared, off.live),
        "{what}: contents and sharing must not depend on multi-plane"
    );
    assert!(
        on_programs > 20 && off_programs == 0,
        "{what}: multi-plane programs {on_programs} on, {off_programs} off"
    );
    eprintln!("{what}: {on_programs} multi-plane programs, {:?}", on.stats);
}

/// The dedup workload of [`exhaustive_cuts_in`] cut at every device operation
/// (`FTL_TORTURE_STRIDE`) on 2 and 4 planes, under both emulator semantics of a cut multi-plane
/// call (`WholeCall`: every page of a cut multi-plane program torn, every block of a cut
/// multi-plane erase partly erased), against the model: the unique pages' stripes torn by a cut
/// read old or new after the mount; and channel-first striping on 2 LUNs x 2 planes
/// (`WholeCall`).
#[cfg(feature = "dedup")]
#[test]
fn exhaustive_cuts_with_dedup() {
    for planes in [2, 4] {
        for cut in [MultiPlaneCut::CutOpOnly, MultiPlaneCut::WholeCall] {
            let geo = geometry(4, 12, planes);
            let r = exhaustive_cuts_env(
                geo,
                cut,
                StripeOrder::PlaneFirst,
                MapChoice::Flat,
                dedup_env,
                Attach::Nothing,
            );
            let t = &r.totals;
            assert!(
                t.multi_plane_erases > 100
                    && t.multi_plane_reads > 100
                    && t.multi_plane_programs > 100
                    && t.deduplicated > 100,
                "{planes} planes, {cut:?}: {r:?}"
            );
            if cut == MultiPlaneCut::WholeCall {
                assert!(
                    r.whole_erases > 5 && r.whole_programs > per_stride(20),
                    "{planes} planes: cuts must land in multi-plane erases and programs: {r:?}"
                );
            }
            eprintln!("{planes} planes, {cut:?}: {} cuts, {} whole programs torn", r.cuts, r.whole_programs);
        }
    }
    // Channel-first striping on 2 LUNs x 2 planes: a request's held pages spread over the LUNs
    // (a round of the rotation held at a time), each LUN's share one multi-plane program.
    let geo = Geometry { luns: 2, ..geometry(4, 12, 2) };
    let (cut, cf) = (MultiPlaneCut::WholeCall, StripeOrder::ChannelFirst);
    let r = exhaustive_cuts_env(geo, cut, cf, MapChoice::Flat, dedup_env, Attach::Nothing);
    assert!(
        r.totals.multi_plane_programs > 100
            && r.totals.deduplicated > 100
            && r.whole_programs > per_stride(10),
        "channel first: the cuts must land in multi-plane programs: {r:?}"
    );
    eprintln!(
        "2 LUNs x 2 planes, channel first, {cut:?}: {} cuts, {} whole programs torn",
        r.cuts, r.whole_programs
    );
    // Across a realignment of the held pages' stripes (`multiplane.rs`, **Realignment**): the
    // workload of `dedup_even_requests_realign_the_planes_after_an_odd_page`, the voided pads
    // among the cut points, on 2 planes (cut program alone) and 4 (whole calls torn).
    for (planes, cut) in [(2u32, MultiPlaneCut::CutOpOnly), (4, MultiPlaneCut::WholeCall)] {
        let r = cuts_across_realignment(planes, cut, false, dedup_env);
        assert!(
            r.totals.realign_pads > 0 && r.cuts >= per_stride(1000),
            "{planes} planes: cuts across the realignment: {r:?}"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// FlexECC attached (feature `flex-ecc`, issue #20)

/// FlexECC's codec over BCH t = 4 per 512 bytes, the baseline's other policies.
#[cfg(feature = "flex-ecc")]
type FlexPolicies =
    Policies<ftl_policies::flex_ecc::FlexCodec<8192, 1>, RequestSizeClassifier, Greedy, SingleHostStream>;

/// `geometry` with room for FlexECC's codec bytes (64 spare bytes).
#[cfg(feature = "flex-ecc")]
fn flex_geometry(ppb: u32, bpp: u32, planes: u32) -> Geometry {
    Geometry { spare_bytes: 64, ..geometry(ppb, bpp, planes) }
}

/// An environment over `emu` with FlexECC attached alone (whatever else the build enables),
/// [`FlexPolicies`], and FlexECC's intents among the ops (`Env::flex_intents`: every third
/// write clean, in the detecting format; every other read a flush-read, so that GC drops pages
/// to that format).
#[cfg(feature = "flex-ecc")]
fn flex_env(emu: Emulator, cfg: Config) -> Env<FlexPolicies> {
    use ftl_policies::flex_ecc::{BchCodec, FlexCodec};
    let geo = emu.geometry();
    let codec = FlexCodec::new(BchCodec::new(13, 4, 512, geo.data_bytes as usize).expect("BCH"));
    let d = DefaultPolicies::default();
    let policies = Policies { codec, classifier: d.classifier, victim: d.victim, placement: d.placement };
    let mut env = Env::with_policies(emu, cfg, policies);
    let flex = ftl_tests::stack::FlexParts::for_build(&geo, &env.cfg);
    env.ext = ftl_tests::ExtParts { flex, ..ftl_tests::ExtParts::none() };
    env.flex_intents = true;
    env
}

/// FlexECC's work the cut runs of a test reached: clean writes, flush-read marks and, if
/// `conversions`, GC's conversions (besides the multi-plane calls their callers check).
#[cfg(feature = "flex-ecc")]
fn assert_flex_reached(r: &CutRuns, what: &str, conversions: bool) {
    let t = &r.totals;
    assert!(
        t.flex_clean_writes > 0 && t.flex_marked > 0 && (t.flex_converted > 0 || !conversions),
        "{what}: the runs must write clean pages, mark flush-read ones (and convert: {conversions}): {r:?}"
    );
}

/// Issue #20: the striped workload of [`exhaustive_cuts_in_multi_plane_ops`] with FlexECC
/// attached (clean writes, flush-reads, GC conversions on 2 planes), cut at every device
/// operation (`FTL_TORTURE_STRIDE`): 2 and 4 planes, both emulator semantics of a cut
/// multi-plane call, the flat map (multi-plane programs, reads and GC's deferred, paired erases)
/// and the cached map. Every acknowledged write reads back, an unacknowledged one old or new.
#[cfg(feature = "flex-ecc")]
#[test]
fn exhaustive_cuts_with_flex_ecc() {
    let order = StripeOrder::PlaneFirst;
    let maps = [MapChoice::Flat, ftl_tests::CACHED];
    let cuts = [MultiPlaneCut::CutOpOnly, MultiPlaneCut::WholeCall];
    for (planes, bpp) in [(2, 12), (4, 10)] {
        for (map, cut) in maps.into_iter().flat_map(|m| cuts.map(|c| (m, c))) {
            let what = format!("{planes} planes, {cut:?}, {}", map_name(map));
            let r = exhaustive_cuts_env(
                flex_geometry(4, bpp, planes),
                cut,
                order,
                map,
                flex_env,
                Attach::Nothing,
            );
            assert!(r.totals.multi_plane_programs > per_stride(40), "{what}: {r:?}");
            if map == MapChoice::Flat {
                assert!(r.totals.multi_plane_erases > per_stride(5), "{what}: {r:?}");
            }
            if cut == MultiPlaneCut::WholeCall {
                assert!(
                    r.whole_programs > per_stride(20),
                    "{what}: the cuts must tear whole multi-plane programs: {r:?}"
                );
            }
            // (On 4 planes the 32 logical pages leave GC's victims empty: nothing to convert.)
            assert_flex_reached(&r, &what, planes == 2);
        }
    }
}

/// Issue #20: random workloads (with clean writes and flush-reads) with a cut always pending,
/// program and erase failures in half the seeds, on 2- and 4-plane devices with FlexECC
/// attached, under both emulator semantics, on the flat and the cached map: `FTL_MPFLEX_CUTS`
/// cuts each (default 300), seeds from `FTL_MPFLEX_SEED` (default 1).
#[cfg(feature = "flex-ecc")]
#[test]
fn random_cuts_multi_plane_with_flex_ecc() {
    for map in [MapChoice::Flat, ftl_tests::CACHED] {
        for cut in [MultiPlaneCut::CutOpOnly, MultiPlaneCut::WholeCall] {
            let r = random_cuts_on(
                map,
                cut,
                Codec::Flex,
                env_u64("FTL_MPFLEX_CUTS", 300),
                env_u64("FTL_MPFLEX_SEED", 1),
                "FTL_MPFLEX",
            );
            let what = format!("{cut:?}, {}", map_name(map));
            if cut == MultiPlaneCut::WholeCall {
                assert!(
                    r.whole_programs * 20 > r.cuts,
                    "{what}: one cut in 20 must tear a whole program: {r:?}"
                );
            }
            assert_flex_reached(&r, &what, true);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// One torn multi-plane program, page by page

/// What [`torn_program_case`] found, page by page of the torn program.
#[derive(Default, Debug)]
struct TornPages {
    /// Metadata valid, data not decoding: rolled back (old content) and voided.
    rolled_back: u32,
    /// Data decoding with corrections: kept (new content) and copied once more by mount.
    refreshed: u32,
    /// Data decoding without corrections: kept.
    kept: u32,
    /// Metadata not decoding: skipped by replay (old content).
    unreadable: u32,
    /// Recovery mounts the cut stopped.
    mount_cuts: u32,
}

/// The valid data pages of `lpn` on flash with a sequence number above `seq`.
fn data_pages_after(emu: &Emulator, lpn: u32, seq: u64) -> usize {
    (0..emu.geometry().total_pages())
        .filter(|&p| {
            let spare = emu.peek_page(PageId(p)).expect("page").1;
            matches!(PageMeta::decode(&spare[..META_LEN]),
                SpareState::Valid(m) if m.kind == PageKind::Data && m.tag == lpn && m.seq > seq)
        })
        .count()
}

/// Writes `planes` pages (one stripe: one multi-plane program), flushes, writes them again with
/// a cut on the `d`-th device operation of that write on the chip that tears whole multi-plane
/// programs, and mounts. `None` if the cut did not tear a multi-plane program. Otherwise each
/// page of the torn program is judged from its own bytes (metadata and BCH decode, as the
/// emulator holds them; no raw bit errors, so every read sees those bytes) and checked after
/// the mount: data that does not decode (valid metadata) must be rolled back and the page
/// voided; data that decodes must be kept, and copied once (step 7) if it needed correction;
/// unreadable metadata means the old content. Every page reads without error.
///
/// With `mount_cut`, the first mount after the cut is itself cut at that device operation (if it
/// gets that far) and a second mount follows: then a rolled-back page may be left unvoided behind
/// the checkpoint that mount writes for it, and a page that needed correction is copied at least
/// once (a copy can be torn in turn, and copied again).
fn torn_program_case(planes: u32, torn: f64, seed: u64, d: u64, mount_cut: Option<u64>) -> Option<TornPages> {
    let geo = bch_geometry(8, 16, planes);
    let cfg = Config::with_logical_pages(&geo, 64);
    let pb = geo.data_bytes as usize;
    let n = planes;
    let data = |version: u64| {
        let mut buf = vec![0u8; n as usize * pb];
        for l in 0..n {
            fill_page(l, version * 1000 + u64::from(l), &mut buf[l as usize * pb..(l as usize + 1) * pb]);
        }
        buf
    };
    let mut emu = emulator(geo, torn, seed, false, MultiPlaneCut::WholeCall);
    let mut mem = ftl_tests::test_memory(&geo, &cfg);
    let before = {
        let mut f = format_with(&mut emu, &mut mem, cfg, bch_policies(&geo)).expect("format");
        f.write(0, &data(1)).expect("first write");
        f.flush().expect("flush");
        assert!(f.counters().multi_plane_programs >= 1, "the first write is one stripe");
        let before = (**f.nand()).clone();
        f.nand_mut().schedule_power_cut(d);
        let r = f.write(0, &data(2));
        if f.nand().counters().whole_call_cut_programs == 0 {
            return None;
        }
        assert!(r.as_ref().is_err_and(is_power_loss), "{r:?}");
        before
    };
    emu.restore_power();
    let torn_pages: Vec<PageId> = (0..geo.total_pages())
        .map(PageId)
        .filter(|&p| emu.program_count(p) != before.program_count(p))
        .collect();
    assert_eq!(torn_pages.len(), n as usize, "the cut program's pages and nothing else");
    // Judged from the bytes: (lpn, page, seq, decodes, corrected).
    let mut codec = Bch8::for_geometry(&geo).expect("BCH");
    let mut found = TornPages::default();
    let mut want = vec![1u64; n as usize];
    let mut judged = Vec::new();
    for &p in &torn_pages {
        let (bytes, spare) = emu.peek_page(p).expect("page");
        match PageMeta::decode(&spare[..META_LEN]) {
            SpareState::Valid(m) if m.kind == PageKind::Data && m.tag < n => {
                let mut d = bytes.to_vec();
                let r = codec.decode(&mut d, &spare[META_LEN..META_LEN + codec.spare_len()]);
                if r.is_ok() {
                    want[m.tag as usize] = 2;
                }
                judged.push((m.tag, p, m.seq, r.ok()));
            }
            _ => found.unreadable += 1,
        }
    }
    if let Some(m) = mount_cut {
        emu.schedule_power_cut(m);
        match mount_with(&mut emu, &mut mem, cfg, bch_policies(&geo)) {
            Ok(f) => drop(f.into_nand()),
            Err(e) => {
                assert!(is_power_loss(&e), "mount cut at {m}: {e:?}");
                found.mount_cuts += 1;
            }
        }
        emu.cancel_power_cut();
        emu.restore_power();
    }
    let mut f = mount_with(&mut emu, &mut mem, cfg, bch_policies(&geo)).expect("mount after the cut");
    let mut page = vec![0u8; pb];
    for l in 0..n {
        f.read(l, &mut page).unwrap_or_else(|e| panic!("lpn {l} after the cut: {e:?}"));
        assert_eq!(
            identify(l, &page),
            Found::Content(Some(want[l as usize] * 1000 + u64::from(l))),
            "lpn {l}"
        );
    }
    let emu = f.into_nand();
    for (lpn, p, seq, decoded) in judged {
        let spare = emu.peek_page(p).expect("page").1;
        let copies = data_pages_after(emu, lpn, seq);
        match decoded {
            None => {
                assert!(
                    mount_cut.is_some() || void_zeros(spare) >= VOID_STRONG_ZEROS,
                    "torn page of lpn {lpn} not voided"
                );
                found.rolled_back += 1;
            }
            Some(corrected) => {
                assert!(void_zeros(spare) < VOID_STRONG_ZEROS, "whole page of lpn {lpn} voided");
                if mount_cut.is_some() {
                    assert!(
                        copies >= usize::from(corrected > 0),
                        "lpn {lpn}: {corrected} bits corrected, no copy"
                    );
                } else {
                    assert_eq!(copies, usize::from(corrected > 0), "lpn {lpn}: {corrected} bits corrected");
                }
                if corrected > 0 {
                    found.refreshed += 1;
                } else {
                    found.kept += 1;
                }
            }
        }
    }
    Some(found)
}

/// A cut that tears every page of a multi-plane program, on 2 and 4 planes with the BCH codec, at
/// torn fractions 0.99 (metadata decodes, data does not) and 0.999 (data decodes with a few
/// corrections), the cut on each operation of the program: every page of the program is rolled
/// back and voided, or kept (and rewritten if it needed correction), as its own bytes say; the
/// older pages of the program included, not only the newest.
#[test]
fn each_page_of_a_torn_multi_plane_program_is_rolled_back_or_kept() {
    let mut total = TornPages::default();
    let mut cases = 0;
    for planes in [2u32, 4] {
        for torn in [0.99, 0.999] {
            for seed in 0..3 {
                for d in 0..40 {
                    let Some(f) = torn_program_case(planes, torn, seed, d, None) else { continue };
                    cases += 1;
                    total.rolled_back += f.rolled_back;
                    total.refreshed += f.refreshed;
                    total.kept += f.kept;
                    total.unreadable += f.unreadable;
                }
            }
        }
    }
    assert!(cases == 36 && total.rolled_back >= 50 && total.refreshed >= 40, "{cases} cases: {total:?}");
    eprintln!("{cases} torn programs: {total:?}");
}

/// [`torn_program_case`] with the recovery mount cut at each of its device operations (about 110),
/// on 4 planes at torn fraction 0.999 (every page of the program decodes with corrections, so
/// that mount rewrites up to four pages): after the next mount every page that needed correction
/// has been copied, also when the cut fell among the copies (they go oldest first, so each page
/// not copied yet stays where the next mount checks it).
#[test]
fn torn_program_copies_survive_cuts_in_the_recovery_mount() {
    let mut total = TornPages::default();
    for seed in 0..2 {
        // The first device operation of the write that lands in its multi-plane program.
        let d =
            (0..40).find(|&d| torn_program_case(4, 0.999, seed, d, None).is_some()).expect("a torn program");
        for m in 0..150 {
            let f = torn_program_case(4, 0.999, seed, d, Some(m)).expect("the same torn program");
            total.refreshed += f.refreshed;
            total.mount_cuts += f.mount_cuts;
        }
    }
    assert!(total.mount_cuts > 150 && total.refreshed > 1000, "{total:?}");
    eprintln!("{total:?}");
}

// ---------------------------------------------------------------------------------------------
// The batch API against a model

#[derive(Clone, Debug)]
enum Step {
    /// `write_many` of these logical pages (distinct or not), each with a fresh content.
    Batch(Vec<u32>),
    /// `read_many` of these logical pages.
    Read(Vec<u32>),
    Flush,
    /// A power cut this many device operations from now.
    Cut(u64),
}

fn step(logical: u32) -> impl Strategy<Value = Step> {
    prop_oneof![
        6 => prop::collection::vec(0..logical, 1..9).prop_map(Step::Batch),
        3 => (0..logical, 1..9u32).prop_map(move |(l, n)| Step::Batch((l..(l + n).min(logical)).collect())),
        2 => prop::collection::vec(0..logical, 1..9).prop_map(Step::Read),
        1 => Just(Step::Flush),
        1 => (0..120u64).prop_map(Step::Cut),
    ]
}

/// The model: what each page holds now, and what it may hold after a cut (its content at the
/// last flush and every content written since, acknowledged or not).
struct Model {
    now: Vec<Content>,
    may: Vec<Vec<Content>>,
}

impl Model {
    fn flushed(&mut self) {
        for (l, m) in self.may.iter_mut().enumerate() {
            *m = vec![self.now[l]];
        }
    }
}

/// What a run of [`run_batches`] reached.
#[derive(Default, Debug)]
struct Reached {
    /// Cuts that fired during a `write_many`.
    cuts_in_batches: u32,
    /// Multi-plane programs.
    multi_programs: u64,
    /// Multi-plane reads.
    multi_reads: u64,
    /// Pages deduplication shared (attached).
    shares: u64,
}

/// Pages deduplication shared in `f`'s life (0 when not attached, or not built).
fn shares<N: NandFlash>(f: &ftl_tests::TestFtl<'_, N>) -> u64 {
    #[cfg(feature = "dedup")]
    return f.dedup_stats().deduplicated;
    #[cfg(not(feature = "dedup"))]
    {
        let _ = f;
        0
    }
}

fn run_batches(
    planes: u32,
    map: MapChoice,
    steps: &[Step],
    seed: u64,
    cut: MultiPlaneCut,
) -> Result<Reached, TestCaseError> {
    run_batches_in(planes, 1, StripeOrder::PlaneFirst, map, steps, seed, cut)
}

/// [`run_batches`] on `luns` LUNs with the host pages striped in `order`, on `map` (flat, or
/// [`cached_map`]'s cache when cached).
fn run_batches_in(
    planes: u32,
    luns: u32,
    order: StripeOrder,
    map: MapChoice,
    steps: &[Step],
    seed: u64,
    cut: MultiPlaneCut,
) -> Result<Reached, TestCaseError> {
    run_batches_with(planes, luns, order, map, steps, seed, cut, false)
}

/// [`run_batches_in`], with deduplication attached if `dedup` (the build's, flat map only), and
/// then every third page written a shared content ([`ftl_tests::SHARED_CONTENT`], one of 6).
#[allow(clippy::too_many_arguments)]
fn run_batches_with(
    planes: u32,
    luns: u32,
    order: StripeOrder,
    map: MapChoice,
    steps: &[Step],
    seed: u64,
    cut: MultiPlaneCut,
    dedup: bool,
) -> Result<Reached, TestCaseError> {
    let mut reached = Reached::default();
    let geo = Geometry { luns, ..geometry(4, 16, planes) };
    let mut cfg = Config::with_logical_pages(&geo, 48);
    cfg.checkpoint_interval_blocks = 4;
    cfg.stripe_order = order;
    let mut emu = emulator(geo, [0.5, 0.999, 0.01][(seed % 3) as usize], seed, false, cut);
    let map = if map == MapChoice::Flat { map } else { cached_map(&cfg) };
    let mut mem = FtlMemory::with_map(&geo, &cfg, map);
    let logical = cfg.logical_pages;
    let pb = geo.data_bytes as usize;
    let mut model = Model { now: vec![None; logical as usize], may: vec![vec![None]; logical as usize] };
    let mut id = 1u64;
    let mut ext = ExtParts::none();
    if dedup {
        ext.dedup = ftl_tests::stack::DedupParts::for_build(&geo, &cfg);
        assert!(ext.dedup.is_some() && map == MapChoice::Flat, "deduplication attached, flat map");
    }
    let mut f = Some(
        ftl_tests::open(&mut emu, &mut mem, ext.extensions(), cfg, DefaultPolicies::default(), true)
            .map_err(|e| TestCaseError::fail(format!("{e:?}")))?,
    );
    let mut cut_pending = false;
    for s in steps {
        let ftl = f.as_mut().expect("mounted");
        let result: Result<(), Error> = match s {
            Step::Batch(lpns) => {
                let datas: Vec<Vec<u8>> = lpns
                    .iter()
                    .map(|&l| {
                        let mut p = vec![0u8; pb];
                        let c = if dedup && id.is_multiple_of(3) {
                            ftl_tests::SHARED_CONTENT | (1 + id / 3 % 6)
                        } else {
                            id
                        };
                        fill_page(l, c, &mut p);
                        model.may[l as usize].push(Some(c));
                        id += 1;
                        p
                    })
                    .collect();
                let pairs: Vec<(u32, &[u8])> = lpns.iter().zip(&datas).map(|(&l, d)| (l, &d[..])).collect();
                let r = ftl.write_many(&pairs);
                if r.is_ok() {
                    for (&l, d) in lpns.iter().zip(&datas) {
                        model.now[l as usize] = Some(u64::from_le_bytes(d[..8].try_into().unwrap()));
                    }
                }
                r
            }
            Step::Read(lpns) => {
                let mut bufs = vec![vec![0u8; pb]; lpns.len()];
                let mut items: Vec<(u32, &mut [u8])> =
                    lpns.iter().zip(bufs.iter_mut()).map(|(&l, b)| (l, &mut b[..])).collect();
                let r = ftl.read_many(&mut items);
                if r.is_ok() {
                    for (&l, b) in lpns.iter().zip(&bufs) {
                        prop_assert_eq!(
                            identify(l, b),
                            Found::Content(model.now[l as usize]),
                            "read_many of {}",
                            l
                        );
                    }
                }
                r
            }
            Step::Flush => {
                let r = ftl.flush();
                if r.is_ok() {
                    model.flushed();
                }
                r
            }
            Step::Cut(after) => {
                ftl.nand_mut().schedule_power_cut(*after);
                cut_pending = true;
                Ok(())
            }
        };
        match result {
            Ok(()) => {}
            Err(e) if cut_pending && is_power_loss(&e) => {
                // Remount and check every page against what it may hold; that is now durable.
                let c = *f.as_ref().expect("mounted").counters();
                reached.multi_programs += c.multi_plane_programs;
                reached.multi_reads += c.multi_plane_reads;
                reached.shares += shares(f.as_ref().expect("mounted"));
                reached.cuts_in_batches += matches!(s, Step::Batch(_)) as u32;
                drop(f.take());
                emu.restore_power();
                cut_pending = false;
                let mut g = ftl_tests::open(
                    &mut emu,
                    &mut mem,
                    ext.extensions(),
                    cfg,
                    DefaultPolicies::default(),
                    false,
                )
                .map_err(|e| TestCaseError::fail(format!("mount: {e:?}")))?;
                let mut p = vec![0u8; pb];
                for l in 0..logical {
                    g.read(l, &mut p).map_err(|e| TestCaseError::fail(format!("read {l}: {e:?}")))?;
                    let Found::Content(c) = identify(l, &p) else {
                        return Err(TestCaseError::fail(format!("lpn {l} reads garbage after the cut")));
                    };
                    prop_assert!(
                        model.may[l as usize].contains(&c),
                        "lpn {} reads {:?}, may: {:?}",
                        l,
                        c,
                        model.may[l as usize]
                    );
                    model.now[l as usize] = c;
                }
                model.flushed();
                f = Some(g);
            }
            Err(e) => return Err(TestCaseError::fail(format!("{s:?}: {e:?}"))),
        }
    }
    let c = *f.as_ref().expect("mounted").counters();
    reached.multi_programs += c.multi_plane_programs;
    reached.multi_reads += c.multi_plane_reads;
    reached.shares += shares(f.as_ref().expect("mounted"));
    // A clean unmount and mount read everything back, with the batch read too.
    let nand = f.take().expect("mounted").unmount().map_err(|e| TestCaseError::fail(format!("{e:?}")));
    if cut_pending {
        // The cut never fired during the steps; it may fire in the unmount: not checked here.
        return Ok(reached);
    }
    nand?;
    let mut g = ftl_tests::open(&mut emu, &mut mem, ext.extensions(), cfg, DefaultPolicies::default(), false)
        .map_err(|e| TestCaseError::fail(format!("{e:?}")))?;
    let mut bufs = vec![vec![0u8; pb]; logical as usize];
    let mut items: Vec<(u32, &mut [u8])> =
        bufs.iter_mut().enumerate().map(|(l, b)| (l as u32, &mut b[..])).collect();
    g.read_many(&mut items).map_err(|e| TestCaseError::fail(format!("{e:?}")))?;
    for (l, b) in bufs.iter().enumerate() {
        prop_assert_eq!(identify(l as u32, b), Found::Content(model.now[l]));
    }
    Ok(reached)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(ftl_tests::proptest_cases(300) / 2))]

    #[test]
    fn batch_api_matches_model(
        steps in prop::collection::vec(step(48), 1..120),
        planes in prop::sample::select(vec![2u32, 4]),
        whole in any::<bool>(),
        cached in any::<bool>(),
        seed in 0..1000u64,
    ) {
        let cut = if whole { MultiPlaneCut::WholeCall } else { MultiPlaneCut::CutOpOnly };
        let map = if cached { ftl_tests::CACHED } else { MapChoice::Flat };
        run_batches(planes, map, &steps, seed, cut)?;
    }

    /// The same model with channel-first striping over 2 LUNs (batches and requests striped
    /// across the LUNs, each LUN's share of a round in one multi-plane program), on either map.
    #[test]
    fn batch_api_matches_model_channel_first(
        steps in prop::collection::vec(step(48), 1..120),
        planes in prop::sample::select(vec![2u32, 4]),
        whole in any::<bool>(),
        cached in any::<bool>(),
        seed in 0..1000u64,
    ) {
        let cut = if whole { MultiPlaneCut::WholeCall } else { MultiPlaneCut::CutOpOnly };
        let map = if cached { ftl_tests::CACHED } else { MapChoice::Flat };
        run_batches_in(planes, 2, StripeOrder::ChannelFirst, map, &steps, seed, cut)?;
    }
}

/// The model test's steps reach what it is about: cuts inside batches, multi-plane programs and
/// reads (fixed seeds, the same driver), under both emulator semantics of a cut multi-plane
/// program.
#[test]
fn batch_model_reaches_cuts_in_multi_plane_programs() {
    // Per map (flat, cached) and emulator semantics (the cut page torn, every page of the cut
    // program torn).
    let mut total: [[Reached; 2]; 2] = Default::default();
    for seed in 0..60u64 {
        let mut rng = Rng::new(seed);
        let steps: Vec<Step> = (0..100)
            .map(|_| match rng.below(13) {
                0..=8 => {
                    let l = rng.below(48) as u32;
                    Step::Batch((l..(l + 1 + rng.below(8) as u32).min(48)).collect())
                }
                9 | 10 => Step::Read((0..1 + rng.below(8)).map(|_| rng.below(48) as u32).collect()),
                11 => Step::Flush,
                _ => Step::Cut(rng.below(120)),
            })
            .collect();
        for (mi, map) in [MapChoice::Flat, ftl_tests::CACHED].into_iter().enumerate() {
            for (m, cut) in [MultiPlaneCut::CutOpOnly, MultiPlaneCut::WholeCall].into_iter().enumerate() {
                // Every third seed on 2 LUNs striped channel first.
                let (luns, order) =
                    if seed % 3 == 2 { (2, StripeOrder::ChannelFirst) } else { (1, StripeOrder::PlaneFirst) };
                let r = run_batches_in([2, 4][seed as usize % 2], luns, order, map, &steps, seed, cut)
                    .unwrap_or_else(|e| panic!("seed {seed}, {order:?}, {cut:?}, {}: {e}", map_name(map)));
                let t = &mut total[mi][m];
                t.cuts_in_batches += r.cuts_in_batches;
                t.multi_programs += r.multi_programs;
                t.multi_reads += r.multi_reads;
            }
        }
    }
    for t in total.iter().flatten() {
        assert!(t.cuts_in_batches > 50 && t.multi_programs > 500 && t.multi_reads > 50, "{total:?}");
    }
    eprintln!("{total:?}");
}

/// The batch model with deduplication attached (every third page a shared content; batches of
/// consecutive pages, and of pages anywhere, a logical page maybe twice), 2 and 4 planes, both
/// emulator semantics of a cut multi-plane program, fixed seeds: a batch's misses go out in
/// stripes (`write_many_dedup`), and after a cut each page of an unacknowledged batch (and every
/// page written since the last flush) reads old or new, never anything else.
#[cfg(feature = "dedup")]
#[test]
fn dedup_batch_model_reaches_cuts_in_stripes() {
    let mut total: [Reached; 2] = Default::default();
    for seed in 0..60u64 {
        let mut rng = Rng::new(seed);
        let steps: Vec<Step> = (0..100)
            .map(|_| match rng.below(13) {
                0..=5 => {
                    let l = rng.below(48) as u32;
                    Step::Batch((l..(l + 1 + rng.below(8) as u32).min(48)).collect())
                }
                6..=8 => Step::Batch((0..1 + rng.below(8)).map(|_| rng.below(48) as u32).collect()),
                9 | 10 => Step::Read((0..1 + rng.below(8)).map(|_| rng.below(48) as u32).collect()),
                11 => Step::Flush,
                _ => Step::Cut(rng.below(120)),
            })
            .collect();
        for (m, cut) in [MultiPlaneCut::CutOpOnly, MultiPlaneCut::WholeCall].into_iter().enumerate() {
            let planes = [2, 4][seed as usize % 2];
            let r = run_batches_with(
                planes,
                1,
                StripeOrder::PlaneFirst,
                MapChoice::Flat,
                &steps,
                seed,
                cut,
                true,
            )
            .unwrap_or_else(|e| panic!("seed {seed}, {cut:?}: {e}"));
            let t = &mut total[m];
            t.cuts_in_batches += r.cuts_in_batches;
            t.multi_programs += r.multi_programs;
            t.multi_reads += r.multi_reads;
            t.shares += r.shares;
        }
    }
    for t in &total {
        assert!(t.cuts_in_batches > 50 && t.multi_programs > 500 && t.shares > 200, "{total:?}");
    }
    eprintln!("{total:?}");
}

/// The batch API issues multi-plane programs and reads; a stripe read back with `read` too.
#[test]
fn batches_use_multi_plane_programs_and_reads() {
    let geo = geometry(8, 16, 2);
    let cfg = Config::with_logical_pages(&geo, 100);
    let mut emu = emulator(geo, 0.5, 1, false, MultiPlaneCut::CutOpOnly);
    let mut mem = ftl_tests::test_memory(&geo, &cfg);
    let mut f = format(&mut emu, &mut mem, cfg).unwrap();
    let pb = geo.data_bytes as usize;
    let data: Vec<Vec<u8>> = (0..8u32)
        .map(|l| {
            let mut p = vec![0u8; pb];
            fill_page(l, 100 + l as u64, &mut p);
            p
        })
        .collect();
    let pairs: Vec<(u32, &[u8])> = data.iter().enumerate().map(|(l, d)| (l as u32, &d[..])).collect();
    f.reset_counters();
    f.write_many(&pairs).unwrap();
    assert_eq!(f.counters().multi_plane_programs, 4, "eight pages on two aligned planes: four pairs");
    assert_eq!(f.counters().nand_programs, 8);
    let mut whole = vec![0u8; 8 * pb];
    f.read(0, &mut whole).unwrap();
    assert_eq!(f.counters().multi_plane_reads, 4);
    for (l, p) in whole.chunks(pb).enumerate() {
        assert_eq!(identify(l as u32, p), Found::Content(Some(100 + l as u64)));
    }
    // Off: the same pages programmed one by one.
    f.set_multi_plane(false);
    f.reset_counters();
    f.write_many(&pairs).unwrap();
    assert_eq!((f.counters().multi_plane_programs, f.counters().nand_programs), (0, 8));
}

/// A cut leaves the host frontiers wherever mount resumes them; batches line them up again.
#[test]
fn batches_realign_drifted_frontiers() {
    let geo = geometry(8, 16, 2);
    let cfg = Config::with_logical_pages(&geo, 100);
    let mut emu = emulator(geo, 0.5, 3, false, MultiPlaneCut::CutOpOnly);
    let mut mem = ftl_tests::test_memory(&geo, &cfg);
    let pb = geo.data_bytes as usize;
    let page = |l: u32, id: u64| {
        let mut p = vec![0u8; pb];
        fill_page(l, id, &mut p);
        p
    };
    {
        let mut f = format(&mut emu, &mut mem, cfg).unwrap();
        // Three single pages: plane 0 gets two, plane 1 one (offsets 2 and 1).
        for l in 0..3 {
            f.write(l, &page(l, 1)).unwrap();
        }
        f.flush().unwrap();
    }
    emu.power_cut_now();
    emu.restore_power();
    let mut f = mount(&mut emu, &mut mem, cfg).unwrap();
    f.reset_counters();
    let data: Vec<Vec<u8>> = (10..30).map(|l| page(l, 2)).collect();
    let pairs: Vec<(u32, &[u8])> = data.iter().zip(10..).map(|(d, l)| (l, &d[..])).collect();
    f.write_many(&pairs).unwrap();
    let c = *f.counters();
    assert!(c.multi_plane_programs >= 8, "after realigning, most of the 20 pages go in pairs: {c:?}");
    for l in 0..30u32 {
        let mut p = vec![0u8; pb];
        f.read(l, &mut p).unwrap();
        let want = match l {
            0..3 => Some(1),
            10..30 => Some(2),
            _ => None,
        };
        assert_eq!(identify(l, &p), Found::Content(want), "lpn {l}");
    }
    let _ = f.nand().geometry();
}

/// Host writes of `planes` pages after one single page (which leaves plane 0 one page ahead, the
/// rotation on plane 1: no stripe of `planes` pages lines up until something writes an odd
/// number of pages), reads in between, a flush, a remount and the same again.
fn odd_then_even_workload(logical: u32, planes: u32, rng: &mut Rng) -> Vec<Op> {
    let mut ops = vec![];
    for round in 0..2 {
        ops.push(Op::Write { lpn: round, pages: 1 });
        for _ in 0..150 {
            let lpn = rng.below((logical - planes) as u64) as u32;
            ops.push(Op::Write { lpn, pages: planes });
            if rng.chance(1, 4) {
                ops.push(Op::Read { lpn: rng.below(logical as u64) as u32, pages: planes });
            }
        }
        ops.push(Op::Flush);
        ops.push(Op::Remount);
    }
    ops
}

/// Requests of exactly one stripe's pages, after an odd page: without realignment none of them
/// is one multi-plane program (each page goes alone, and the rotation stays one page off);
/// the FTL voids the pages that line the planes up after `REALIGN_AFTER_MISSES` (8) such
/// requests in a row, once, and stripes the rest. Every read checks the model.
#[test]
fn even_requests_realign_the_planes_after_an_odd_page() {
    for planes in [2u32, 4] {
        let geo = geometry(16, 12, planes);
        let cfg = Config::with_logical_pages(&geo, 64);
        let ops = odd_then_even_workload(cfg.logical_pages, planes, &mut Rng::new(5));
        let mut env = Env::new(emulator(geo, 0.5, 1, false, MultiPlaneCut::CutOpOnly), cfg);
        env.run(&ops, Start::Format).unwrap();
        let t = env.totals;
        // Per round: 8 requests wait, the 9th realigns (planes - 1 pads) and stripes, as do
        // the other 31; the remount resumes the frontiers, which are never padded, so the
        // second round stripes once their blocks are closed.
        assert!(t.realign_pads >= (planes - 1) as u64, "{planes} planes: {t:?}");
        assert!(t.realign_pads <= 2 * (planes - 1) as u64, "{planes} planes: at most once a round: {t:?}");
        assert!(t.multi_plane_programs >= 60, "{planes} planes: stripes after realigning: {t:?}");
        assert!(t.gc_blocks > 0, "{planes} planes: GC collects blocks holding voided pages: {t:?}");
    }
}

/// [`even_requests_realign_the_planes_after_an_odd_page`] with deduplication attached (every
/// fourth request of shared contents, `with_duplicates`): a request's unique pages are held for
/// stripes (`dedup/stripe.rs`), and those that keep starting one page off the lined-up planes
/// get them realigned as host requests do (before, never: each such request's held pages went
/// out as one page, whole stripes, one page; measured on 2 planes, 118 multi-plane programs
/// where realignment gives 173). With
/// multi-plane off, the same contents, reference counts, shared contents and live pages after a
/// remount, and the same dedup counters; every read checks the model.
#[cfg(feature = "dedup")]
#[test]
fn dedup_even_requests_realign_the_planes_after_an_odd_page() {
    for planes in [2u32, 4] {
        let geo = geometry(16, 12, planes);
        let cfg = Config::with_logical_pages(&geo, 64);
        let mut ops = odd_then_even_workload(cfg.logical_pages, planes, &mut Rng::new(5));
        ftl_tests::with_duplicates(&mut ops);
        let (off, on) = dedup_off_and_on(geo, cfg, &ops, 20);
        // Realigned at least once, each time after 8 striped requests in a row started off the
        // planes (a request whose pages are partly shared may hold an odd number of pages,
        // which puts the rotation off again), then the requests' unique pages stripe whole.
        let writes = ops.iter().filter(|op| matches!(op, Op::Write { .. } | Op::Dup { .. })).count() as u64;
        // (At most `planes - 1` pads each: the planes behind the rotation's.)
        assert!(
            on.realign_pads >= 1 && on.realign_pads * 9 <= (planes - 1) as u64 * writes,
            "{planes} planes: {on:?}"
        );
        assert!(on.multi_plane_programs >= 60, "{planes} planes: stripes after realigning: {on:?}");
        assert_eq!((off.realign_pads, off.multi_plane_programs), (0, 0), "{planes} planes: off: {off:?}");
        eprintln!(
            "{planes} planes: {} multi-plane programs, {} pads, {} shared",
            on.multi_plane_programs, on.realign_pads, on.deduplicated
        );
    }
}

/// Requests of mixed sizes keep the rotation moving (1 and 2 pages in turn): no request starts
/// off the lined-up planes twice in a row, and nothing is voided to realign.
#[test]
fn mixed_requests_never_realign() {
    let geo = geometry(16, 24, 2);
    let cfg = Config::with_logical_pages(&geo, 64);
    let mut rng = Rng::new(9);
    let ops: Vec<Op> = (0..200)
        .map(|i| Op::Write { lpn: rng.below(60) as u32, pages: if i % 2 == 0 { 1 } else { 2 } })
        .collect();
    let mut env = Env::new(emulator(geo, 0.5, 1, false, MultiPlaneCut::CutOpOnly), cfg);
    env.run(&ops, Start::Format).unwrap();
    assert_eq!(env.totals.realign_pads, 0, "{:?}", env.totals);
    // Each single page flips which plane is ahead, so every other 2-page request starts lined
    // up (one program) and the others each page alone.
    assert!(env.totals.multi_plane_programs >= 45, "{:?}", env.totals);
}

/// One-page requests among stripe-sized ones at random (a quarter of the requests two pages,
/// as batched one-page writes are): each single moves the rotation, so a run of 2-page
/// requests starting off the planes is no steady state and must not be realigned. Before
/// singles ended a run, 8 such requests with singles between them voided pages (and cost
/// 4 KiB random writes on 4 LUNs at QD 16, batched, 14% of their IOPS).
#[test]
fn random_singles_among_stripes_never_realign() {
    let geo = geometry(16, 24, 2);
    let cfg = Config::with_logical_pages(&geo, 64);
    let mut rng = Rng::new(21);
    let ops: Vec<Op> = (0..3000)
        .map(|_| {
            let pages = if rng.below(4) == 0 { 2 } else { 1 };
            Op::Write { lpn: rng.below(60) as u32, pages }
        })
        .collect();
    let mut env = Env::new(emulator(geo, 0.5, 1, false, MultiPlaneCut::CutOpOnly), cfg);
    env.run(&ops, Start::Format).unwrap();
    assert_eq!(env.totals.realign_pads, 0, "{:?}", env.totals);
    // The 2-page requests that start lined up are still one program each.
    assert!(env.totals.multi_plane_programs >= 200, "{:?}", env.totals);
}

/// [`odd_then_even_workload`] cut at every device operation (the realigning voids among them),
/// 2 and 4 planes, both cut semantics, flat map; 2 planes on the cached map (GC there decides
/// validity by reading each page's metadata, a voided page's included).
#[test]
fn exhaustive_cuts_across_realignment() {
    let mut cuts = 0;
    let runs = [
        (2u32, MultiPlaneCut::CutOpOnly, false),
        (2, MultiPlaneCut::WholeCall, false),
        (4, MultiPlaneCut::CutOpOnly, false),
        (4, MultiPlaneCut::WholeCall, false),
        (2, MultiPlaneCut::CutOpOnly, true),
    ];
    for (planes, cut, cached) in runs {
        cuts += cuts_across_realignment(planes, cut, cached, Env::new).cuts;
    }
    assert!(cuts >= per_stride(8000), "{cuts} cut points");
}

/// [`odd_then_even_workload`] on `planes` planes (shared contents among the writes when
/// `make_env` attaches deduplication) under `cut`, on the flat map or, `cached`, [`cached_map`]'s
/// choice: the uncut run must realign, stripe and collect (and share); then cut at every device
/// operation ([`cut_each_op`]).
fn cuts_across_realignment<P: PolicySet + Clone>(
    planes: u32,
    cut: MultiPlaneCut,
    cached: bool,
    make_env: impl Fn(Emulator, Config) -> Env<P>,
) -> CutRuns {
    let geo = geometry(16, 12, planes);
    let mut cfg = Config::with_logical_pages(&geo, 64);
    cfg.checkpoint_interval_blocks = 4;
    let map = if cached { cached_map(&cfg) } else { MapChoice::Flat };
    let mut ops = odd_then_even_workload(cfg.logical_pages, planes, &mut Rng::new(5));
    let mut dry = make_env(emulator(geo, 0.5, 1, false, cut), cfg);
    let dedup = dry.ext.stack().dedup;
    if dedup {
        ftl_tests::with_duplicates(&mut ops);
    }
    dry.use_map(map);
    dry.verify = Verify::Touched;
    let n = dry.run(&ops, Start::Format).unwrap().ops_at_end;
    let t = dry.totals;
    assert!(
        t.realign_pads > 0
            && t.multi_plane_programs > 20
            && t.gc_blocks > 0
            && (!dedup || t.deduplicated > 20),
        "{planes} planes, {cut:?}: the workload must realign, stripe and collect (and share): {t:?}"
    );
    cut_each_op(geo, cut, cfg, map, &ops, n, &make_env, Attach::Nothing, &t)
}

/// Where consecutive host pages go, by hand for 2 LUNs x 2 planes (device planes: LUN 0's are
/// 0 and 1, LUN 1's 2 and 3). One page at a time: plane first 0 1 2 3, channel first 0 2 1 3.
/// With multi-plane programs on, channel first: 2-page writes (one round takes two of them) put
/// their pages on both LUNs (0 2, then 1 3: no multi-plane program); an 8-page write gives each
/// LUN two consecutive pages per round, one two-plane program each (0 1 2 3 0 1 2 3, 4 programs).
/// Either way the 8 pages read back with 4 multi-plane reads (a channel-first read groups a
/// round's pages by LUN and page offset, and the 2-page writes left sibling pages at one offset).
#[test]
fn channel_first_places_consecutive_pages_on_alternate_luns() {
    let geo = Geometry { luns: 2, ..geometry(8, 16, 2) };
    let pb = geo.data_bytes as usize;
    let (pf, cf) = (StripeOrder::PlaneFirst, StripeOrder::ChannelFirst);
    // (order, multi-plane, pages per write, planes of lpn 0..8, multi-plane programs)
    for (order, multi, per, want, programs) in [
        (pf, false, 1, [0, 1, 2, 3, 0, 1, 2, 3], 0),
        (cf, false, 1, [0, 2, 1, 3, 0, 2, 1, 3], 0),
        (cf, false, 8, [0, 2, 1, 3, 0, 2, 1, 3], 0),
        (pf, true, 2, [0, 1, 2, 3, 0, 1, 2, 3], 4),
        (cf, true, 2, [0, 2, 1, 3, 0, 2, 1, 3], 0),
        (cf, true, 8, [0, 1, 2, 3, 0, 1, 2, 3], 4),
    ] {
        let mut cfg = Config::with_logical_pages(&geo, 100);
        cfg.stripe_order = order;
        let mut emu = emulator(geo, 0.5, 1, false, MultiPlaneCut::CutOpOnly);
        let mut mem = ftl_tests::test_memory(&geo, &cfg);
        let mut f = format(&mut emu, &mut mem, cfg).unwrap();
        f.set_multi_plane(multi);
        let mut data = vec![0u8; 8 * pb];
        for (l, p) in data.chunks_mut(pb).enumerate() {
            fill_page(l as u32, 7 + l as u64, p);
        }
        f.reset_counters();
        for (w, chunk) in data.chunks(per * pb).enumerate() {
            f.write((w * per) as u32, chunk).unwrap();
        }
        let planes: Vec<u32> =
            (0..8).map(|l| geo.plane_index(geo.block_of(f.mapped_page(l).expect("mapped")))).collect();
        let case = format!("{order:?}, multi-plane {multi}, {per}-page writes");
        assert_eq!(planes, want, "{case}");
        let c = *f.counters();
        assert_eq!((c.nand_programs, c.multi_plane_programs), (8, programs), "{case}");
        let mut back = vec![0u8; 8 * pb];
        f.read(0, &mut back).unwrap();
        assert_eq!(f.counters().multi_plane_reads, if multi { 4 } else { 0 }, "{case}");
        for (l, p) in back.chunks(pb).enumerate() {
            assert_eq!(identify(l as u32, p), Found::Content(Some(7 + l as u64)), "{case}: lpn {l}");
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The cached map

/// Pages `(lpn, id)` filled for [`identify`].
fn pages_of(geo: &Geometry, lpns: &[u32], id: u64) -> Vec<Vec<u8>> {
    lpns.iter()
        .map(|&l| {
            let mut p = vec![0u8; geo.data_bytes as usize];
            fill_page(l, id, &mut p);
            p
        })
        .collect()
}

/// `write_many` of `lpns`, each page with content `id`.
fn write_ids<N: NandFlash>(f: &mut ftl_tests::TestFtl<'_, N>, lpns: &[u32], id: u64) {
    let geo = f.nand().geometry();
    let data = pages_of(&geo, lpns, id);
    let pairs: Vec<(u32, &[u8])> = lpns.iter().zip(&data).map(|(&l, d)| (l, &d[..])).collect();
    f.write_many(&pairs).unwrap();
}

/// `read_many` of `lpns`: what each reads as.
fn read_ids<N: NandFlash>(f: &mut ftl_tests::TestFtl<'_, N>, lpns: &[u32]) -> Vec<Found> {
    let pb = f.nand().geometry().data_bytes as usize;
    let mut bufs = vec![vec![0u8; pb]; lpns.len()];
    let mut items: Vec<(u32, &mut [u8])> =
        lpns.iter().zip(bufs.iter_mut()).map(|(&l, b)| (l, &mut b[..])).collect();
    f.read_many(&mut items).unwrap();
    lpns.iter().zip(&bufs).map(|(&l, b)| identify(l, b)).collect()
}

/// On the cached map, stripes go out as multi-plane programs and read back with multi-plane
/// reads, on 2 and 4 planes: with a cache that holds them (a counted batch), and with
/// [`cached_map`]'s one-line cache under sequential 4-page writes over the whole capacity (every
/// stripe within one line; the buffer full every few stripes, so map pages are written back to
/// make room before the stripes' programs).
#[test]
fn cached_map_issues_multi_plane_programs_and_reads() {
    for planes in [2u32, 4] {
        let geo = geometry(8, 16, planes);
        let cfg = Config::with_logical_pages(&geo, 100);
        let pb = geo.data_bytes as usize;
        let mut emu = emulator(geo, 0.5, 1, false, MultiPlaneCut::CutOpOnly);
        // 4 lines (of the 7 the 100 entries take) and 64 buffer slots (48 changes).
        let mut mem = FtlMemory::with_map(&geo, &cfg, MapChoice::Cached { cache_bytes: 1024 });
        let mut f = format(&mut emu, &mut mem, cfg).unwrap();
        let lpns: Vec<u32> = (0..8).collect();
        f.reset_counters();
        write_ids(&mut f, &lpns, 100);
        let c = *f.counters();
        assert_eq!(
            (c.multi_plane_programs, c.nand_programs),
            (8 / planes as u64, 8),
            "{planes} planes: 8 pages in stripes of {planes}, no map write-back"
        );
        let mut whole = vec![0u8; 8 * pb];
        f.read(0, &mut whole).unwrap();
        assert_eq!(f.counters().multi_plane_reads, 8 / planes as u64);
        for (l, p) in whole.chunks(pb).enumerate() {
            assert_eq!(identify(l as u32, p), Found::Content(Some(100)), "lpn {l}");
        }
        assert!(read_ids(&mut f, &lpns).iter().all(|&r| r == Found::Content(Some(100))));
        assert_eq!(f.counters().multi_plane_reads, 16 / planes as u64);
        // After a flush (the buffer written back, the entries only in lines) and a remount (no
        // line cached): the reads fault the entries in and still go multi-plane.
        f.flush().unwrap();
        drop(f);
        let mut f = mount(&mut emu, &mut mem, cfg).unwrap();
        f.reset_counters();
        assert!(read_ids(&mut f, &lpns).iter().all(|&r| r == Found::Content(Some(100))));
        let c = *f.counters();
        assert_eq!(c.multi_plane_reads, 8 / planes as u64, "{c:?}");
        assert!(c.map_page_reads <= 1, "one map page holds the 8 entries: {c:?}");
        // Off: page by page.
        f.set_multi_plane(false);
        f.reset_counters();
        write_ids(&mut f, &lpns, 101);
        assert!(read_ids(&mut f, &lpns).iter().all(|&r| r == Found::Content(Some(101))));
        let c = *f.counters();
        assert_eq!((c.multi_plane_programs, c.multi_plane_reads, c.nand_programs), (0, 0, 8));
        drop(f);

        // The tests' small cache: one line, 8 slots (6 changes).
        let map = cached_map(&cfg);
        assert_eq!(map, MapChoice::Cached { cache_bytes: 160 });
        let mut emu = emulator(geo, 0.5, 2, false, MultiPlaneCut::CutOpOnly);
        let mut mem = FtlMemory::with_map(&geo, &cfg, map);
        let mut f = format(&mut emu, &mut mem, cfg).unwrap();
        f.reset_counters();
        let mut data = vec![0u8; 4 * pb];
        for lpn in (0..100).step_by(4) {
            for (j, p) in data.chunks_mut(pb).enumerate() {
                fill_page(lpn + j as u32, 7, p);
            }
            f.write(lpn, &data).unwrap();
        }
        let c = *f.counters();
        assert_eq!(c.multi_plane_programs, 100 / planes as u64, "{planes} planes: every stripe: {c:?}");
        assert!(c.map_page_writes >= 100 / 6, "room made by map write-backs: {c:?}");
        let all: Vec<u32> = (0..100).collect();
        assert!(read_ids(&mut f, &all).iter().all(|&r| r == Found::Content(Some(7))));
        assert!(f.counters().multi_plane_reads >= 90 / planes as u64, "{:?}", f.counters());
        f.flush().unwrap();
    }
}

/// The rule's room side, across a cut: a 2-plane stripe finds the dirty-entry buffer one slot
/// short (5 of its 6 changes taken, by 6 single writes: the planes' frontiers stay in line), so
/// a map page is written back *before* the stripe's
/// multi-plane program (its sequence number below the stripe's pages'); a cut before any flush
/// then mounts every page's new content (replay takes the stripe's two changes, which fit).
#[test]
fn cached_map_stripe_makes_room_before_its_program() {
    let geo = geometry(8, 16, 2);
    let cfg = Config::with_logical_pages(&geo, 100);
    let mut emu = emulator(geo, 0.5, 1, false, MultiPlaneCut::CutOpOnly);
    let mut mem = FtlMemory::with_map(&geo, &cfg, MapChoice::Cached { cache_bytes: 160 });
    {
        let mut f = format(&mut emu, &mut mem, cfg).unwrap();
        f.flush().unwrap();
        let singles = [50u32, 60, 70, 80, 90, 50];
        for (l, d) in singles.iter().zip(pages_of(&geo, &singles, 1)) {
            f.write(*l, &d).unwrap();
        }
        f.reset_counters();
        write_ids(&mut f, &[0, 1], 2);
        let c = *f.counters();
        assert_eq!((c.multi_plane_programs, c.map_page_writes), (1, 1), "{c:?}");
        f.nand_mut().power_cut_now();
    }
    // The map page written back and the stripe's pages, from the bytes on flash.
    let mut map_seq = 0;
    let mut stripe_seqs = vec![];
    for p in 0..geo.total_pages() {
        let spare = emu.peek_page(PageId(p)).expect("page").1;
        if let SpareState::Valid(m) = PageMeta::decode(&spare[..META_LEN]) {
            match m.kind {
                PageKind::Map => map_seq = map_seq.max(m.seq),
                PageKind::Data if m.tag < 2 => stripe_seqs.push(m.seq),
                _ => {}
            }
        }
    }
    assert_eq!(stripe_seqs.len(), 2);
    assert!(stripe_seqs.iter().all(|&s| s > map_seq), "map page {map_seq}, stripe {stripe_seqs:?}");
    emu.restore_power();
    let mut f = mount(&mut emu, &mut mem, cfg).unwrap();
    let want = [(0, 2), (1, 2), (50, 1), (60, 1), (70, 1), (80, 1), (90, 1)];
    for (l, id) in want {
        assert_eq!(read_ids(&mut f, &[l]), [Found::Content(Some(id))], "lpn {l}");
    }
}

/// The rule's other side: a stripe whose entries cannot all be in RAM at once is written page
/// by page, correctly. The harness's smallest cache (one line, 4 buffer slots: 3 changes) never
/// takes a 4-plane stripe's 4 changes (the pages still land at one offset, and, a read needing
/// no room, read back with one multi-plane read); on 2 planes, a stripe over two lines (15 and
/// 16) cannot keep both lines in its one line (written and read page by page), one within a
/// line can.
#[test]
fn cached_map_too_small_for_a_stripe() {
    let one_line = MapChoice::Cached { cache_bytes: core::mem::size_of::<ftl_core::MapLine>() };
    for (planes, lpns, programs, reads) in
        [(4u32, &[0u32, 1, 2, 3][..], 0, 1), (2, &[15, 16][..], 0, 0), (2, &[16, 17][..], 1, 1)]
    {
        let geo = geometry(8, 16, planes);
        let cfg = Config::with_logical_pages(&geo, 100);
        let mut emu = emulator(geo, 0.5, 1, false, MultiPlaneCut::CutOpOnly);
        let mut mem = FtlMemory::with_map(&geo, &cfg, one_line);
        let mut f = format(&mut emu, &mut mem, cfg).unwrap();
        f.flush().unwrap();
        f.reset_counters();
        write_ids(&mut f, lpns, 3);
        let c = *f.counters();
        assert_eq!(c.multi_plane_programs, programs, "{planes} planes, {lpns:?}: {c:?}");
        // Both pages at one offset of sibling planes either way.
        let at: Vec<(u32, u32)> = lpns
            .iter()
            .map(|&l| {
                let p = f.mapped_page(l).expect("mapped");
                (geo.plane_index(geo.block_of(p)), geo.page_in_block(p))
            })
            .collect();
        assert!(at.iter().all(|&(_, o)| o == at[0].1), "{lpns:?} at {at:?}");
        // Four more single pages: a map write-back on the way takes the stripe's entries out of
        // the buffer, so the reads below find them only in lines.
        for (l, d) in [40u32, 41, 42, 43].iter().zip(pages_of(&geo, &[40, 41, 42, 43], 4)) {
            f.write(*l, &d).unwrap();
        }
        assert!(f.counters().map_page_writes >= 1);
        f.reset_counters();
        assert!(read_ids(&mut f, lpns).iter().all(|&r| r == Found::Content(Some(3))), "{lpns:?}");
        assert_eq!(f.counters().multi_plane_reads, reads, "{planes} planes, {lpns:?}");
    }
}

// ---------------------------------------------------------------------------------------------
// With the NV cache attached (feature `cdm`)

/// The NV cache's per-page hooks on the multi-plane paths: host stripes programmed by one
/// multi-plane program each go into the cache page by page after their remaps, multi-plane
/// reads ask the cache and fill it page by page as single reads do, GC drops cached pages from
/// victims that the allocator then erases with multi-plane erases.
#[cfg(feature = "cdm")]
mod nv_cache {
    use super::*;
    use ftl_core::cdm::{NvCacheConfig, NvCounters, NvPolicy};
    use ftl_core::policy::DefaultPolicies;
    use ftl_tests::stack::CacheParts;

    /// One step of [`workload`] (and of `dedup_nv_cache`'s, which has no remount).
    #[derive(Clone, Debug)]
    pub(super) enum Step {
        /// `write_many` of these pages.
        Batch(Vec<u32>),
        /// `write` of `n` pages from `lpn`.
        Write(u32, u32),
        /// `read` of `n` pages from `lpn`.
        Read(u32, u32),
        /// `read_many` of these pages.
        ReadMany(Vec<u32>),
        Trim(u32, u32),
        Flush,
        /// A clean unmount and mount (the cache reconciled with the flash map).
        Remount,
    }

    /// Runs `step` on `f` but a remount (false: the caller remounts): page `i` of a write
    /// with id `id` holds content `content(id, i)`, kept in the model `now`; every page read is
    /// checked against the model (seed `seed` in the message) and pushed to `reads`.
    pub(super) fn run_step<N: NandFlash>(
        f: &mut ftl_tests::TestFtl<'_, N>,
        step: Step,
        id: u64,
        content: impl Fn(u64, u32) -> u64,
        now: &mut [Content],
        reads: &mut Vec<Vec<u8>>,
        seed: u64,
    ) -> bool {
        let pb = f.page_bytes() as usize;
        let mut check = |lpn: u32, page: &[u8], now: &[Content]| {
            assert_eq!(identify(lpn, page), Found::Content(now[lpn as usize]), "seed {seed}: lpn {lpn}");
            reads.push(page.to_vec());
        };
        match step {
            Step::Batch(lpns) => {
                let data: Vec<Vec<u8>> = lpns
                    .iter()
                    .enumerate()
                    .map(|(i, &l)| {
                        let mut p = vec![0u8; pb];
                        fill_page(l, content(id, i as u32), &mut p);
                        p
                    })
                    .collect();
                let pairs: Vec<(u32, &[u8])> = lpns.iter().zip(&data).map(|(&l, d)| (l, &d[..])).collect();
                f.write_many(&pairs).unwrap();
                for (i, &l) in lpns.iter().enumerate() {
                    now[l as usize] = Some(content(id, i as u32));
                }
            }
            Step::Write(lpn, n) => {
                let mut data = vec![0u8; n as usize * pb];
                for (i, p) in data.chunks_mut(pb).enumerate() {
                    fill_page(lpn + i as u32, content(id, i as u32), p);
                    now[(lpn + i as u32) as usize] = Some(content(id, i as u32));
                }
                f.write(lpn, &data).unwrap();
            }
            Step::Read(lpn, n) => {
                let mut data = vec![0u8; n as usize * pb];
                f.read(lpn, &mut data).unwrap();
                for (i, p) in data.chunks(pb).enumerate() {
                    check(lpn + i as u32, p, now);
                }
            }
            Step::ReadMany(lpns) => {
                let mut bufs = vec![vec![0u8; pb]; lpns.len()];
                let mut items: Vec<(u32, &mut [u8])> =
                    lpns.iter().zip(bufs.iter_mut()).map(|(&l, b)| (l, &mut b[..])).collect();
                f.read_many(&mut items).unwrap();
                for (&l, b) in lpns.iter().zip(&bufs) {
                    check(l, b, now);
                }
            }
            Step::Trim(lpn, n) => {
                f.trim(lpn, n).unwrap();
                for l in lpn..lpn + n {
                    now[l as usize] = None;
                }
            }
            Step::Flush => f.flush().unwrap(),
            Step::Remount => return false,
        }
        true
    }

    /// The mix of a seeded [`workload`]: each step draws `r` in 0..100 and is a batch below
    /// `batch`, a write below `write`, a read (of up to `read_pages` pages, anywhere) below
    /// `read`, a `read_many` below `read_many`, a trim below `trim`, a flush below 99, and at 99
    /// a remount if `remounts`, else a flush.
    pub(super) struct Mix {
        pub(super) batch: u64,
        pub(super) write: u64,
        pub(super) read: u64,
        pub(super) read_pages: u64,
        pub(super) read_many: u64,
        pub(super) trim: u64,
        pub(super) remounts: bool,
    }

    /// A seeded workload over `logical` pages in the proportions of `mix`: batches, writes,
    /// `read_many` and trims with half of their pages on a hot tenth of the pages (the cache
    /// holds a quarter), multi-page reads over the whole device (most pages not cached:
    /// multi-plane reads), flushes and remounts.
    pub(super) fn workload(logical: u32, seed: u64, len: usize, mix: &Mix) -> Vec<Step> {
        let mut rng = Rng::new(seed);
        let lpn = |rng: &mut Rng| {
            if rng.chance(1, 2) {
                rng.below((logical / 10) as u64) as u32
            } else {
                rng.below(logical as u64) as u32
            }
        };
        (0..len)
            .map(|_| match rng.below(100) {
                r if r < mix.batch => Step::Batch((0..1 + rng.below(8)).map(|_| lpn(&mut rng)).collect()),
                r if r < mix.write => {
                    let l = lpn(&mut rng);
                    Step::Write(l, (1 + rng.below(8) as u32).min(logical - l))
                }
                r if r < mix.read => {
                    let l = rng.below(logical as u64) as u32;
                    Step::Read(l, (1 + rng.below(mix.read_pages) as u32).min(logical - l))
                }
                r if r < mix.read_many => {
                    Step::ReadMany((0..1 + rng.below(8)).map(|_| lpn(&mut rng)).collect())
                }
                r if r < mix.trim => {
                    let l = lpn(&mut rng);
                    Step::Trim(l, (1 + rng.below(4) as u32).min(logical - l))
                }
                r if r < 99 => Step::Flush,
                _ if mix.remounts => Step::Remount,
                _ => Step::Flush,
            })
            .collect()
    }

    /// What a run saw.
    #[derive(Debug, Default, PartialEq, Eq)]
    struct Seen {
        /// Every page every read returned, in order.
        reads: Vec<Vec<u8>>,
        /// The NV cache's counters of each FTL instance (format, then each mount).
        nv: Vec<NvCounters>,
    }

    /// Multi-plane calls and GC over every instance of a run.
    #[derive(Debug, Default)]
    struct Calls {
        programs: u64,
        reads: u64,
        erases: u64,
        gc_blocks: u64,
    }

    /// [`workload`] on `planes` planes with the NV cache `cc`, multi-plane operations `multi`:
    /// every read checked against the model (each page's last written content, zeros when
    /// never written or trimmed).
    fn run(planes: u32, cc: NvCacheConfig, multi: bool, seed: u64, remounts: bool) -> (Seen, Calls) {
        let geo = geometry(8, 32, planes);
        let mut cfg = Config::for_utilization(&geo, 600);
        cfg.checkpoint_interval_blocks = 8;
        let logical = cfg.logical_pages;
        let mut emu = emulator(geo, 0.5, seed, false, MultiPlaneCut::CutOpOnly);
        let mut mem = ftl_tests::test_memory(&geo, &cfg);
        let mut ext = ExtParts { cache: CacheParts::for_build(&geo, &cfg), ..ExtParts::none() };
        ext.cache.as_mut().expect("feature cdm").config = cc;
        let mut now: Vec<Content> = vec![None; logical as usize];
        let mut id = 1u64;
        let (mut seen, mut calls) = (Seen::default(), Calls::default());
        // Writes and batches, 55%; reads of up to 8 pages, 20%; `read_many`, 18%.
        let mix = Mix { batch: 30, write: 55, read: 75, read_pages: 8, read_many: 93, trim: 96, remounts };
        let mut steps = workload(logical, seed, 1500, &mix).into_iter().peekable();
        let mut format = true;
        while steps.peek().is_some() {
            let mut f = ftl_tests::open(
                &mut emu,
                &mut mem,
                ext.extensions(),
                cfg,
                DefaultPolicies::default(),
                format,
            )
            .unwrap();
            format = false;
            f.set_multi_plane(multi);
            // Format's multi-plane erases (before the switch) are not the workload's.
            let base = *f.counters();
            // Every page of a write holds the write's own content.
            for s in steps.by_ref() {
                if !run_step(&mut f, s, id, |id, _| id, &mut now, &mut seen.reads, seed) {
                    break;
                }
                id += 1;
            }
            let c = *f.counters();
            calls.programs += c.multi_plane_programs - base.multi_plane_programs;
            calls.reads += c.multi_plane_reads - base.multi_plane_reads;
            calls.erases += c.multi_plane_erases - base.multi_plane_erases;
            calls.gc_blocks += c.gc_blocks - base.gc_blocks;
            seen.nv.push(f.nv_counters().expect("NV cache attached"));
            f.unmount().unwrap();
        }
        (seen, calls)
    }

    /// The NV cache settings the tests run: CDM and NVM-basic, write-through; CDM write-back.
    pub(super) fn settings() -> [NvCacheConfig; 3] {
        let wb = NvCacheConfig { write_back: true, ..NvCacheConfig::new(NvPolicy::Cdm) };
        [NvCacheConfig::new(NvPolicy::Cdm), NvCacheConfig::new(NvPolicy::Basic), wb]
    }

    /// The same seeded workload with the NV cache and multi-plane operations on and off, on 2
    /// and 4 planes. Without remounts: every read returns the model's content (so on and off
    /// the same bytes), and what the host's requests do to the cache is the same (read hits and
    /// misses, write hits, inserts, read fills, evictions; with NVM-basic every counter, NV
    /// memory traffic included). With clean remounts: the same bytes again (a mount's verdicts
    /// depend on GC's history: a clean slot whose page GC moved, or that was written back, is
    /// older than its flash copy and freed). With them on the FTL issues multi-plane programs
    /// (write-through: host stripes; a write-back cache takes every host page, so none), reads
    /// and erases.
    #[test]
    fn nv_cache_runs_multi_plane_with_the_same_cache_behaviour() {
        for planes in [2u32, 4] {
            for cc in settings() {
                for seed in 1..=3u64 {
                    let case = format!("{planes} planes, {cc:?}, seed {seed}");
                    let (off, none) = run(planes, cc, false, seed, false);
                    let (on, calls) = run(planes, cc, true, seed, false);
                    assert_eq!((none.programs, none.reads, none.erases), (0, 0, 0), "{case}");
                    assert!(calls.gc_blocks > 20, "{case}: the workload must reach GC: {calls:?}");
                    assert!(off.reads == on.reads && off.reads.len() > 1000, "{case}: reads differ");
                    // What the host's requests do to the cache.
                    let host = |c: &NvCounters| {
                        (c.read_hits, c.read_misses, c.write_hits, c.write_inserts, c.read_fills, c.evictions)
                    };
                    assert_eq!(host(&off.nv[0]), host(&on.nv[0]), "{case}: {:?} / {:?}", off.nv, on.nv);
                    if cc.policy == NvPolicy::Basic {
                        // No drops: nothing depends on which blocks GC picks.
                        assert_eq!(off.nv, on.nv, "{case}");
                    }
                    let (nv, nv_on) = (off.nv[0], on.nv[0]);
                    assert!(nv.read_hits > 100 && nv.evictions > 100, "{case}: {nv:?}");
                    if cc.policy == NvPolicy::Cdm {
                        // GC drops cached pages (and evictions write them back) either way; how
                        // many depends on which blocks GC picks, which multi-plane operations
                        // change (victims left for paired erases, the allocator's wear order),
                        // with or without the cache.
                        assert!(nv.gc_drops > 0 && nv_on.gc_drops > 0, "{case}: {nv:?} / {nv_on:?}");
                        assert!(nv.write_backs > 0 && nv_on.write_backs > 0, "{case}: {nv:?} / {nv_on:?}");
                    }
                    assert!(calls.reads > 20 && calls.erases > 5, "{case}: {calls:?}");
                    if cc.write_back {
                        assert_eq!(calls.programs, 0, "{case}: a write-back cache takes every host page");
                    } else {
                        assert!(calls.programs > 50, "{case}: {calls:?}");
                    }
                    // With clean remounts (the cache reconciled with the flash map).
                    let (off, _) = run(planes, cc, false, seed, true);
                    let (on, calls_r) = run(planes, cc, true, seed, true);
                    assert!(off.nv.len() > 5, "{case}: the workload must remount");
                    assert!(
                        off.reads == on.reads && off.reads.len() > 1000,
                        "{case}, remounts: reads differ"
                    );
                    assert!(calls_r.reads > 20 && calls_r.erases > 5, "{case}, remounts: {calls_r:?}");
                    eprintln!("{case}: {calls:?}, off {nv:?}, on {nv_on:?}");
                }
            }
        }
    }

    /// The rule that keeps a stripe's cache copies from writing an only copy back between its
    /// program and its last remap, with a cut after the batch is flushed. Eight cached only
    /// copies (written to a write-back cache, then mounted write-through: the cache holds the
    /// only copy of each, none on flash), `b`'s the least recently used; then `write_many` of
    /// `[a, b]` and a flush: the copy of `a` evicts `b`'s old only copy, which is written back;
    /// eight more pages evict every slot (`b`'s new copy too), no checkpoint in between, then a
    /// cut. Issued as one multi-plane program, that write-back came after `b`'s new page with a
    /// larger sequence number, and the mount took it: the flushed `b` read old (seen with the
    /// rule switched off). With the rule the batch goes page by page and `b` reads new after the
    /// cut; with the only copies written back first (`nv_write_back_all`), the same batch is one
    /// multi-plane program.
    #[test]
    fn stripe_never_lets_an_evicted_only_copy_overwrite_its_pages() {
        for write_back_first in [false, true] {
            let geo = geometry(4, 12, 2);
            let mut cfg = Config::with_logical_pages(&geo, 32);
            cfg.checkpoint_interval_blocks = 16;
            let mut emu = emulator(geo, 0.5, 1, false, MultiPlaneCut::CutOpOnly);
            let mut mem = ftl_tests::test_memory(&geo, &cfg);
            let mut ext = ExtParts { cache: CacheParts::for_build(&geo, &cfg), ..ExtParts::none() };
            let slots = cfg.logical_pages / 4;
            let (a, b) = (20u32, 0u32);
            let more: Vec<u32> = (24..32).collect();
            {
                ext.cache.as_mut().expect("feature cdm").config =
                    NvCacheConfig { write_back: true, ..NvCacheConfig::new(NvPolicy::Cdm) };
                let mut f = ftl_tests::open(
                    &mut emu,
                    &mut mem,
                    ext.extensions(),
                    cfg,
                    DefaultPolicies::default(),
                    true,
                )
                .unwrap();
                // `b` first: the least recently used slot.
                for l in b..b + slots {
                    f.write(l, &pages_of(&geo, &[l], 1)[0]).unwrap();
                }
                assert_eq!(f.nv_cache().map(|c| c.only_copies()), Some(slots));
                f.unmount().unwrap();
            }
            ext.cache.as_mut().expect("feature cdm").config = NvCacheConfig::new(NvPolicy::Cdm);
            {
                let mut f = ftl_tests::open(
                    &mut emu,
                    &mut mem,
                    ext.extensions(),
                    cfg,
                    DefaultPolicies::default(),
                    false,
                )
                .unwrap();
                assert_eq!(f.nv_cache().map(|c| c.only_copies()), Some(slots), "mount keeps the only copies");
                if write_back_first {
                    f.nv_write_back_all().unwrap();
                }
                let before = *f.counters();
                write_ids(&mut f, &[a, b], 2);
                f.flush().unwrap();
                let c = *f.counters();
                let programs = c.multi_plane_programs - before.multi_plane_programs;
                let wb = f.nv_counters().expect("cache").write_backs;
                if write_back_first {
                    assert_eq!(programs, 1, "no only copy to evict: one multi-plane program");
                } else {
                    assert_eq!(programs, 0, "an only copy among the 2 least recently used: page by page");
                    assert!(wb >= 1, "the copy of {a} evicts {b}'s only copy: {wb} write-backs");
                }
                assert_eq!(read_ids(&mut f, &[a, b]), [Found::Content(Some(2)); 2]);
                // Eight more pages: every slot evicted (`b`'s new copy clean: no write-back),
                // so after the cut `b` reads from flash.
                write_ids(&mut f, &more, 3);
                f.flush().unwrap();
                assert!(!f.nv_cache().expect("cache").contains(b));
                f.nand_mut().power_cut_now();
            }
            emu.restore_power();
            let mut f =
                ftl_tests::open(&mut emu, &mut mem, ext.extensions(), cfg, DefaultPolicies::default(), false)
                    .unwrap();
            let want: Vec<Found> =
                (0..slots).map(|l| Found::Content(Some(if l == b { 2 } else { 1 }))).collect();
            let lpns: Vec<u32> = (0..slots).collect();
            assert_eq!(read_ids(&mut f, &lpns), want, "write-back first: {write_back_first}");
            assert_eq!(read_ids(&mut f, &[a]), [Found::Content(Some(2))]);
            assert_eq!(read_ids(&mut f, &more), [Found::Content(Some(3)); 8]);
        }
    }

    /// A write-back cache is a runtime setting (`NvCacheConfig::write_back`, not in the NV
    /// memory), so the mount after a cut may run write-back while the cut program was a
    /// write-through cache's stripe: a 2-page stripe written again with a cut on each device
    /// operation of that write, on the chip that tears whole multi-plane programs (torn fraction
    /// 0.999: metadata mostly decodes, the data does not pass its CRC), then mounted with the
    /// cache write-through and write-back: each page reads as its old or its new content (mount
    /// checks every page of the torn program, not only the newest).
    #[test]
    fn torn_stripe_of_a_write_through_cache_mounted_write_back() {
        let geo = geometry(4, 12, 2);
        let cfg = Config::with_logical_pages(&geo, 32);
        let pb = geo.data_bytes as usize;
        let data = |version: u64| {
            let mut buf = vec![0u8; 2 * pb];
            for (l, p) in buf.chunks_mut(pb).enumerate() {
                fill_page(l as u32, version * 10 + l as u64, p);
            }
            buf
        };
        let mut torn = 0;
        for write_back in [false, true] {
            for seed in 0..4u64 {
                for d in 0..6u64 {
                    let mut emu = emulator(geo, 0.999, seed, false, MultiPlaneCut::WholeCall);
                    let mut mem = ftl_tests::test_memory(&geo, &cfg);
                    let mut ext = ExtParts { cache: CacheParts::for_build(&geo, &cfg), ..ExtParts::none() };
                    {
                        let mut f = ftl_tests::open(
                            &mut emu,
                            &mut mem,
                            ext.extensions(),
                            cfg,
                            DefaultPolicies::default(),
                            true,
                        )
                        .unwrap();
                        f.write(0, &data(1)).unwrap();
                        f.flush().unwrap();
                        assert_eq!(f.counters().multi_plane_programs, 1, "the first write is one stripe");
                        f.nand_mut().schedule_power_cut(d);
                        let r = f.write(0, &data(2));
                        if f.nand().counters().whole_call_cut_programs == 0 {
                            f.nand_mut().cancel_power_cut();
                            continue;
                        }
                        assert!(r.as_ref().is_err_and(is_power_loss), "{r:?}");
                    }
                    torn += 1;
                    emu.restore_power();
                    ext.cache.as_mut().expect("feature cdm").config.write_back = write_back;
                    let mut f = ftl_tests::open(
                        &mut emu,
                        &mut mem,
                        ext.extensions(),
                        cfg,
                        DefaultPolicies::default(),
                        false,
                    )
                    .unwrap();
                    let mut page = vec![0u8; pb];
                    for l in 0..2u32 {
                        f.read(l, &mut page).unwrap_or_else(|e| {
                            panic!("write-back {write_back}, seed {seed}, cut {d}: lpn {l}: {e:?}")
                        });
                        let found = identify(l, &page);
                        assert!(
                            found == Found::Content(Some(10 + u64::from(l)))
                                || found == Found::Content(Some(20 + u64::from(l))),
                            "write-back {write_back}, seed {seed}, cut {d}: lpn {l}: {found:?}"
                        );
                    }
                }
            }
        }
        assert!(torn >= 8, "the cuts must tear whole multi-plane programs: {torn}");
    }

    /// [`exhaustive_cuts_in_multi_plane_ops`] with the NV cache attached: every device operation
    /// cut (`FTL_TORTURE_STRIDE` applies), on 2 planes, and on the chip that tears whole
    /// multi-plane calls on 2 and 4 planes; the harness's model checks that every acknowledged
    /// write reads back and an unacknowledged one reads as its old or its new content.
    #[test]
    fn exhaustive_cuts_with_the_nv_cache() {
        let (pf, flat) = (StripeOrder::PlaneFirst, MapChoice::Flat);
        let r = exhaustive_cuts_with(geometry(4, 12, 2), MultiPlaneCut::CutOpOnly, pf, flat, Attach::NvCache);
        assert!(r.totals.multi_plane_programs > 500 && r.totals.nv_read_hits > 0, "{r:?}");
        for planes in [2, 4] {
            let r = exhaustive_cuts_with(
                geometry(4, 12, planes),
                MultiPlaneCut::WholeCall,
                pf,
                flat,
                Attach::NvCache,
            );
            assert!(
                r.whole_programs > per_stride(200) && r.whole_erases > per_stride(40),
                "{planes} planes: the cuts must land in multi-plane programs and erases: {r:?}"
            );
        }
        // Channel-first striping on 2 LUNs x 2 planes (reads in the host's order with the cache).
        let geo = Geometry { luns: 2, ..geometry(4, 12, 2) };
        let cf = StripeOrder::ChannelFirst;
        let r = exhaustive_cuts_with(geo, MultiPlaneCut::WholeCall, cf, flat, Attach::NvCache);
        assert!(r.whole_programs > per_stride(100), "the cuts must land in multi-plane programs: {r:?}");
    }

    /// [`random_cuts_multi_plane`] (program and erase failures in half the seeds) with the NV
    /// cache attached, under both emulator semantics of a cut multi-plane call:
    /// `FTL_MPNV_CUTS` cuts each (default 1500), seeds from `FTL_MPNV_SEED` (default 1); and a
    /// third as many with the write-back cache.
    #[test]
    fn random_cuts_with_the_nv_cache() {
        for cut in [MultiPlaneCut::CutOpOnly, MultiPlaneCut::WholeCall] {
            let r = random_cuts_with(
                MapChoice::Flat,
                Attach::NvCache,
                cut,
                Codec::Crc,
                env_u64("FTL_MPNV_CUTS", 1500),
                env_u64("FTL_MPNV_SEED", 1),
                "FTL_MPNV",
            );
            // The write-back cache (`cdm-wb`): no host stripes; multi-plane reads and erases.
            let wb = random_cuts_with(
                MapChoice::Flat,
                Attach::NvCacheWriteBack,
                cut,
                Codec::Crc,
                env_u64("FTL_MPNV_CUTS", 1500) / 3,
                env_u64("FTL_MPNV_SEED", 1),
                "FTL_MPNV",
            );
            assert_eq!(wb.totals.multi_plane_programs, 0, "{wb:?}");
            if cut == MultiPlaneCut::WholeCall {
                assert!(wb.whole_erases > 0, "cuts must tear whole multi-plane erases: {wb:?}");
                assert!(
                    r.whole_programs * 20 > r.cuts,
                    "one cut in 20 must tear a whole multi-plane program: {r:?}"
                );
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Deduplication stacked with the NV cache (features `dedup` and `cdm`, issue #20): multi-plane
// reads (the cache first per page, a shared page read where its content is) and erases,
// programs single-plane

#[cfg(all(feature = "dedup", feature = "cdm"))]
mod dedup_nv_cache {
    use super::nv_cache::{run_step, settings, workload, Mix};
    use super::*;
    use ftl_core::cdm::{NvCacheConfig, NvCounters, NvPolicy};
    use ftl_tests::stack::{CacheParts, DedupParts};
    use ftl_tests::SHARED_CONTENT;

    /// How many distinct shared contents the workload writes (more than `DUP_POOL`, so that
    /// shared pages sit on every plane and many logical pages of a multi-page read share).
    const POOL: u64 = 16;

    /// The content id of page `i` of the write with id `id`: a shared content (the same bytes
    /// on every logical page written with it) for about half the pages, else `id`'s own.
    fn content(id: u64, i: u32) -> u64 {
        let h =
            (id.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ u64::from(i)).wrapping_mul(0xBF58_476D_1CE4_E5B9) >> 32;
        if h.is_multiple_of(2) {
            SHARED_CONTENT | (1 + (h >> 8) % POOL)
        } else {
            id
        }
    }

    /// What a run saw: every page every read returned, the cache's counters, and the sharing
    /// at the end (each logical page's reference count, shared contents, live physical pages).
    #[derive(Debug, Default, PartialEq, Eq)]
    struct Seen {
        reads: Vec<Vec<u8>>,
        nv: Option<NvCounters>,
        refs: Vec<u32>,
        shared: usize,
        live: u64,
    }

    /// What the FTL did: multi-plane calls, flash reads of host reads, GC, duplicates.
    #[derive(Debug, Default, PartialEq, Eq)]
    struct Calls {
        programs: u64,
        reads: u64,
        erases: u64,
        host_read_nand_reads: u64,
        gc_blocks: u64,
        deduplicated: u64,
        shared_moves: u64,
    }

    /// [`workload`] on `planes` planes with deduplication and the NV cache `cc` attached,
    /// multi-plane operations `multi`, one FTL instance: every read checked against the model
    /// (each page's last written content, zeros when never written or trimmed).
    fn run(planes: u32, cc: NvCacheConfig, multi: bool, seed: u64) -> (Seen, Calls) {
        let geo = geometry(8, 32, planes);
        let mut cfg = Config::for_utilization(&geo, 600);
        cfg.checkpoint_interval_blocks = 8;
        let logical = cfg.logical_pages;
        let mut emu = emulator(geo, 0.5, seed, false, MultiPlaneCut::CutOpOnly);
        let mut mem = ftl_tests::test_memory(&geo, &cfg);
        let mut ext = ExtParts {
            dedup: DedupParts::for_build(&geo, &cfg),
            cache: CacheParts::for_build(&geo, &cfg),
            ..ExtParts::none()
        };
        ext.cache.as_mut().expect("feature cdm").config = cc;
        let mut f =
            ftl_tests::open(&mut emu, &mut mem, ext.extensions(), cfg, DefaultPolicies::default(), true)
                .unwrap();
        assert!(f.stack().dedup && f.stack().nv_cache);
        f.set_multi_plane(multi);
        // Format's multi-plane erases (before the switch) are not the workload's.
        let base = *f.counters();
        let mut now: Vec<Content> = vec![None; logical as usize];
        let mut seen = Seen::default();
        // Writes and batches, 50%; reads of up to 32 pages (many shared), 25%; `read_many`, 19%.
        let mix =
            Mix { batch: 25, write: 50, read: 75, read_pages: 32, read_many: 94, trim: 97, remounts: false };
        for (step, s) in workload(logical, seed, 1500, &mix).into_iter().enumerate() {
            run_step(&mut f, s, step as u64 + 1, content, &mut now, &mut seen.reads, seed);
        }
        let c = *f.counters();
        let d = f.dedup_stats();
        let calls = Calls {
            programs: c.multi_plane_programs - base.multi_plane_programs,
            reads: c.multi_plane_reads - base.multi_plane_reads,
            erases: c.multi_plane_erases - base.multi_plane_erases,
            host_read_nand_reads: c.host_read_nand_reads - base.host_read_nand_reads,
            gc_blocks: c.gc_blocks - base.gc_blocks,
            deduplicated: d.deduplicated,
            shared_moves: d.shared_moves,
        };
        seen.nv = f.nv_counters();
        seen.refs = (0..logical).map(|l| f.content_refs(l)).collect();
        seen.shared = f.shared_contents();
        seen.live = f.live_physical_pages();
        f.unmount().unwrap();
        (seen, calls)
    }

    /// The same seeded workload, with duplicate content, deduplication and the NV cache attached,
    /// multi-plane operations on and off, on 2 and 4 planes: every read returns the model's
    /// content (so on and off the same bytes); the cache sees the same host requests (read hits
    /// and misses, write hits, inserts, read fills, evictions); the same duplicates are found
    /// and shared (reference counts per logical page, shared contents, live physical pages).
    /// NVM-basic (no GC drops, so no only copy and no write-back): every cache counter the same,
    /// and host reads read the same number of flash pages (a multi-plane read reads each of its
    /// pages once; none is read again). With them on, multi-plane reads and erases run, and no
    /// multi-plane program (deduplication's write path programs page by page). (With
    /// deduplication's write path first, the write-back cache takes no host page: it runs as
    /// write-through, GC's drops its only copies; `ftl_core::ext`, stacking order.)
    #[test]
    fn dedup_with_the_nv_cache_runs_the_same_with_multi_plane_reads_and_erases() {
        for planes in [2u32, 4] {
            for cc in settings() {
                for seed in 1..=2u64 {
                    let case = format!("{planes} planes, {cc:?}, seed {seed}");
                    let (off, none) = run(planes, cc, false, seed);
                    let (on, calls) = run(planes, cc, true, seed);
                    assert_eq!((none.programs, none.reads, none.erases), (0, 0, 0), "{case}");
                    assert!(off.reads == on.reads && off.reads.len() > 1000, "{case}: reads differ");
                    let host = |c: &NvCounters| {
                        (c.read_hits, c.read_misses, c.write_hits, c.write_inserts, c.read_fills, c.evictions)
                    };
                    let (nv_off, nv_on) = (off.nv.expect("cache"), on.nv.expect("cache"));
                    assert_eq!(host(&nv_off), host(&nv_on), "{case}: {nv_off:?} / {nv_on:?}");
                    assert!(nv_off.read_hits > 100 && nv_off.read_misses > 500, "{case}: {nv_off:?}");
                    assert_eq!(
                        (&on.refs, on.shared, on.live, calls.deduplicated),
                        (&off.refs, off.shared, off.live, none.deduplicated),
                        "{case}: sharing must not depend on multi-plane"
                    );
                    assert!(
                        on.shared >= POOL as usize / 2 && calls.deduplicated > 200,
                        "{case}: the workload must share: {calls:?}, {} shared",
                        on.shared
                    );
                    if cc.policy == NvPolicy::Basic {
                        assert_eq!(nv_off, nv_on, "{case}");
                        assert_eq!(
                            calls.host_read_nand_reads, none.host_read_nand_reads,
                            "{case}: flash reads"
                        );
                    }
                    assert!(
                        calls.reads > 100 && calls.erases > 5 && calls.gc_blocks > 20 && calls.programs == 0,
                        "{case}: multi-plane reads and erases, no multi-plane program: {calls:?}"
                    );
                    eprintln!("{case}: on {calls:?}, off {none:?}, on {nv_on:?}, off {nv_off:?}");
                }
            }
        }
    }

    /// [`exhaustive_cuts_with_dedup`] with the NV cache attached too, write-through and
    /// write-back: every device operation cut (`FTL_TORTURE_STRIDE` applies), 2 and 4 planes,
    /// both emulator semantics of a cut multi-plane call, against the model (every acknowledged
    /// write reads back, an unacknowledged one as its old or its new content).
    #[test]
    fn exhaustive_cuts_with_dedup_and_the_nv_cache() {
        let mut cuts = 0;
        for attach in [Attach::NvCache, Attach::NvCacheWriteBack] {
            for planes in [2, 4] {
                for cut in [MultiPlaneCut::CutOpOnly, MultiPlaneCut::WholeCall] {
                    let geo = geometry(4, 12, planes);
                    let r = exhaustive_cuts_env(
                        geo,
                        cut,
                        StripeOrder::PlaneFirst,
                        MapChoice::Flat,
                        dedup_env,
                        attach,
                    );
                    let t = &r.totals;
                    assert!(
                        t.multi_plane_erases > per_stride(100)
                            && t.multi_plane_reads > per_stride(100)
                            && t.deduplicated > per_stride(100)
                            && t.multi_plane_programs == 0,
                        "{planes} planes, {cut:?}, {attach:?}: {r:?}"
                    );
                    if cut == MultiPlaneCut::WholeCall {
                        assert!(r.whole_erases > per_stride(5), "{planes} planes, {attach:?}: {r:?}");
                    }
                    cuts += r.cuts;
                }
            }
        }
        eprintln!("{cuts} cut points");
    }

    /// Random workloads with duplicate content and a cut always pending, deduplication and the
    /// NV cache attached (write-through, and a third as many cuts write-back), 2 and 4 planes,
    /// program and erase failures in half the seeds, both emulator semantics of a cut
    /// multi-plane call: `FTL_MPDEDUPNV_CUTS` cuts each (default 300), seeds from
    /// `FTL_MPDEDUPNV_SEED` (default 1).
    #[test]
    fn random_cuts_with_dedup_and_the_nv_cache() {
        let target = env_u64("FTL_MPDEDUPNV_CUTS", 300);
        for cut in [MultiPlaneCut::CutOpOnly, MultiPlaneCut::WholeCall] {
            for (attach, target) in
                [(Attach::NvCache, target), (Attach::NvCacheWriteBack, target.div_ceil(3))]
            {
                let mut seed = env_u64("FTL_MPDEDUPNV_SEED", 1);
                let mut runs = CutRuns::default();
                while runs.cuts < target {
                    let mut rng = Rng::new(seed);
                    let (ppb, bpp, planes) = [(16, 48, 2), (8, 32, 4)][(seed % 2) as usize];
                    let geo = geometry(ppb, bpp, planes);
                    let mut cfg = Config::for_utilization(&geo, 600);
                    cfg.checkpoint_interval_blocks = 16;
                    let mut ops = Vec::new();
                    for _ in 0..8 {
                        ops.extend(random_workload(&mut rng, cfg.logical_pages, 400));
                        if rng.chance(1, 3) {
                            ops.push(Op::Remount);
                        }
                    }
                    ftl_tests::with_duplicates(&mut ops);
                    let fail = seed % 4 >= 2;
                    let emu = emulator(geo, [0.5, 0.999, 0.01][(seed % 3) as usize], seed, fail, cut);
                    let mut env = dedup_env(emu, cfg);
                    attach.add_to(&mut env.ext, &geo, &cfg);
                    run_random_cuts(env, MapChoice::Flat, &ops, seed, &mut runs).unwrap_or_else(|e| {
                        panic!(
                            "seed {seed} ({planes} planes, failures {fail}, {cut:?}, {attach:?}) failed (rerun: FTL_MPDEDUPNV_SEED={seed} FTL_MPDEDUPNV_CUTS=1): {e}"
                        )
                    });
                    seed += 1;
                }
                let t = &runs.totals;
                assert!(
                    t.multi_plane_reads > 0 && t.multi_plane_erases > 0 && t.deduplicated > 0 && t.multi_plane_programs == 0,
                    "{cut:?}, {attach:?}: multi-plane reads and erases, duplicates, no multi-plane program: {runs:?}"
                );
                attach.check_reached(t);
                eprintln!("{cut:?}, {attach:?}: {} random cuts; {runs:?}", runs.cuts);
            }
        }
    }
}

/// GC's deferred erase on the cached map against a mount from the pool. Two configurations
/// of one device (1,024 blocks of 64 pages, 2 planes): a map of 100 map pages, which such a mount
/// recounts (at most `mount_pool_blocks` = 160 map pages), and one of 435, whose counts it keeps
/// from the checkpoint (upper bounds). Rounds of random overwrites, each ended by a power loss
/// (the FTL dropped without unmount); at each, the blocks the FTL held `Dirty` with a programmed
/// first page (emptied, not erased yet) must not come back as used from the mount (and every
/// flushed write reads back). With the recounted map GC leaves its victims `Dirty` for
/// multi-plane erases, so such blocks are there at the cuts; with the kept counts it erases
/// them at once. Deferred there (GC before `Ftl::pool_keeps_counts`), a victim's first page is
/// older than the checkpoint, whose count the mount keeps: block 413 came back `Used` with 1
/// valid page at the second cut, and in anchor.rs `mount_after_a_cut_reads_the_pool_cached_map`
/// such blocks (6 at its first cut) added up until a write failed with `NoSpace`.
#[test]
fn cached_map_pool_mount_takes_no_unerased_victim_for_a_used_block() {
    use ftl_core::blocks::BlockState;
    let geo = geometry(64, 512, 2);
    for (logical, kept) in [(12_800u32, false), (Config::for_utilization(&geo, 850).logical_pages, true)] {
        let mut cfg = Config::with_logical_pages(&geo, logical);
        cfg.mount_pool_blocks = ftl_core::RECOMMENDED_MOUNT_POOL_BLOCKS;
        let map = ftl_tests::sized_map(ftl_tests::CACHED, &cfg);
        let map_pages = logical.div_ceil(geo.data_bytes / 4);
        assert_eq!(map_pages > cfg.mount_pool_blocks, kept, "{map_pages} map pages");
        let mut emu = Emulator::new(EmulatorConfig::new(geo)).unwrap();
        let mut mem = FtlMemory::with_map(&geo, &cfg, map);
        let mut model = ftl_tests::Model::new(logical);
        let mut rng = Rng::new(5);
        let mut buf = vec![0u8; geo.data_bytes as usize];
        let (mut unerased_total, mut mpe) = (0usize, 0u64);
        for round in 0..5u32 {
            let mut f =
                if round == 0 { format(&mut emu, &mut mem, cfg) } else { mount(&mut emu, &mut mem, cfg) }
                    .unwrap_or_else(|e| panic!("round {round}: {e:?}"));
            if round > 0 {
                ftl_tests::verify_all(&mut f, &model).unwrap().unwrap();
            }
            for _ in 0..logical + 3_000 * round {
                let lpn = rng.below(logical as u64) as u32;
                let id = model.write(lpn, 1)[0];
                fill_page(lpn, id, &mut buf);
                f.write(lpn, &buf).unwrap_or_else(|e| panic!("round {round}: {e:?}"));
                if rng.chance(1, 500) {
                    f.flush().unwrap();
                    model.flush();
                }
            }
            mpe += f.counters().multi_plane_erases;
            // The power goes: the pages since the last flush are not acknowledged.
            let _ = f.into_nand();
            let (_, m) = mem.parts();
            let unerased: Vec<u32> = (0..geo.total_blocks())
                .filter(|&b| {
                    m.blocks[b as usize].state() == BlockState::Dirty
                        && !matches!(
                            PageMeta::decode(
                                &emu.peek_page(geo.page(nand_hal::BlockId(b), 0)).unwrap().1[..META_LEN]
                            ),
                            SpareState::Erased
                        )
                })
                .collect();
            unerased_total += unerased.len();
            let f = mount(&mut emu, &mut mem, cfg).unwrap_or_else(|e| panic!("round {round}: {e:?}"));
            assert!(
                f.counters().mount_surveyed_blocks < geo.total_blocks() as u64 / 4,
                "a mount from the pool"
            );
            let _ = f.into_nand();
            let (_, m) = mem.parts();
            for &b in &unerased {
                let s = m.blocks[b as usize].state();
                assert!(
                    !matches!(s, BlockState::Used | BlockState::Open),
                    "{map_pages} map pages, round {round}: block {b}, emptied and not erased at the cut, \
                     mounted {s:?} with {} valid pages",
                    m.blocks[b as usize].valid()
                );
            }
        }
        eprintln!("{map_pages} map pages: {unerased_total} emptied unerased blocks at the cuts, {mpe} multi-plane erases");
        if !kept {
            assert!(unerased_total > 10 && mpe > 100, "GC must leave victims for multi-plane erases");
        }
    }
}
