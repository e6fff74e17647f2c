//! CDM (feature `cdm`): the FTL with an NV cache, against the model of `ftl_tests`.
//!
//! - `cdm_matches_model` (proptest): random writes, reads, trims, flushes, clean remounts and
//!   power cuts on a small device whose GC runs often, with a small NV cache so that pages are
//!   cached, dropped by GC while removable, evicted and written back all the time. A cut hits
//!   either a NAND operation or an NVM write (torn at 8-byte words by `NvRam`), sometimes the
//!   recovery mount too. After every step the pages it touched read as the model says (reading
//!   every page after every step would keep the small cache thrashing); after every cut each page reads
//!   as its last flushed content or a later one (so removable pages, whose only copy may be in
//!   the cache, are never lost), mount never fails, and the device keeps working.
//! - `exhaustive_cuts`: one fixed workload, cut at every NAND operation and at every NVM write;
//!   `exhaustive_cuts_write_back` the same with the write-back cache (the proptest draws it too).
//! - Deterministic checks: the configuration reaches drops and write-backs; `basic` programs
//!   exactly what the FTL without a cache programs (no removable state); CDM copies fewer pages;
//!   the map points into the cache after a drop, across a checkpoint and a cut.
//! - `second_writes` (with `wom`, issue #17): second writes stacked on the cache, the same model
//!   proptest with NAND and NVM cuts, random cuts that reach second writes, drops and
//!   write-backs (`FTL_WOM_CDM_SEEDS`, default 20), and a clean mount keeping every slot clean.
//!
//! `PROPTEST_CASES` sets the case count (default 300).

// The NV cache with the simulator's NV-RAM and traces (`sim`).
#![cfg(all(feature = "cdm", feature = "sim"))]

use std::sync::{Arc, Mutex};

use ftl_core::cdm::{NvCache, NvCacheConfig, NvCacheLayout, NvPolicy, Nvm, ReadFill, Slot};
use ftl_core::policy::DefaultPolicies;
use ftl_core::{Config, Error, Extensions, Ftl};
use ftl_tests::{
    fill_page, geometry, identify, is_power_loss, session, settle_all, verify_all, Ctx, CutHook, Forward,
    Found, Hook, Log, Model, Op, Outcome, TestFtl, WomParts,
};
use nand_hal::{ErrorKind, NandFlash, PageId, ProgramOp};
use proptest::prelude::*;
use sim_host::emulator::{EmuError, Emulator, EmulatorConfig, FaultConfig, NvRam};
use sim_host::memory::FtlMemory;

const PPB: u32 = 8;
const BLOCKS_PER_PLANE: u32 = 32;
const PLANES: u32 = 2;
const LOGICAL: u32 = 320;

/// A device whose GC victims hold valid pages (about 80% of the data blocks' pages in use when
/// full).
fn config() -> Config {
    let geo = geometry(PPB, BLOCKS_PER_PLANE, PLANES);
    let mut cfg = Config::with_logical_pages(&geo, LOGICAL);
    cfg.checkpoint_interval_blocks = 4;
    // The runs without a cache (the references) keep no mount pool either: with a technique
    // attached every mount surveys, so the pool's records would be the only difference.
    cfg.mount_pool_blocks = 0;
    cfg
}

/// The NVM shared between the test (to cut its power) and the FTL's cache.
#[derive(Clone)]
struct SharedNvm(Arc<Mutex<NvRam>>);

impl SharedNvm {
    fn new(slots: u32, page_bytes: u32, seed: u64) -> Self {
        let len = NvCacheLayout::new(slots).nvm_bytes(page_bytes) as u32;
        SharedNvm(Arc::new(Mutex::new(NvRam::new(len, seed))))
    }
    fn with<T>(&self, f: impl FnOnce(&mut NvRam) -> T) -> T {
        f(&mut self.0.lock().unwrap())
    }
}

impl Nvm for SharedNvm {
    fn len(&self) -> u32 {
        self.with(|r| r.len())
    }
    fn read(&mut self, offset: u32, buf: &mut [u8]) -> Result<(), ErrorKind> {
        self.with(|r| r.read(offset, buf))
    }
    fn write(&mut self, offset: u32, data: &[u8]) -> Result<(), ErrorKind> {
        self.with(|r| r.write(offset, data))
    }
}

/// The emulator plus the NVM's power: `Op::Cut { after }` cuts the NVM at its `after / 3`-th
/// next write when `after` is a multiple of 3, else the NAND at its `after`-th next operation.
type Device<'a> = Forward<&'a mut Emulator, SharedNvm>;

/// The NVM as [`Device`]'s hook: spare reads and multi-plane programs go to the emulator's own,
/// and it cuts the power of the NVM or of the emulator.
impl Hook for SharedNvm {
    type Dev = Emulator;
    fn read_spare(&mut self, emu: &mut Emulator, page: PageId, spare: &mut [u8]) -> Result<(), EmuError> {
        emu.read_spare(page, spare)
    }
    fn program_multi(&mut self, emu: &mut Emulator, ops: &[ProgramOp<'_>]) -> Result<(), (usize, EmuError)> {
        emu.program_multi(ops)
    }
}

impl CutHook for SharedNvm {
    fn schedule_cut(&mut self, emu: &mut Emulator, after: u64) {
        emu.cancel_power_cut();
        self.with(|r| r.cancel_power_cut());
        if after.is_multiple_of(3) {
            self.with(|r| r.schedule_power_cut(after / 3));
        } else {
            emu.schedule_power_cut(after);
        }
    }
}

/// Emulator, NVM, the FTL's and the cache's RAM, and the model.
struct CdmEnv {
    emu: Emulator,
    nvm: SharedNvm,
    mem: FtlMemory,
    slots: Vec<Slot>,
    index: Vec<u32>,
    cfg: Config,
    cache_cfg: NvCacheConfig,
    model: Model,
    log: Log,
    /// Second writes stacked on the cache (`cdm_with_second_writes_matches_model`).
    wom: Option<WomParts>,
    cuts: u32,
    mount_cuts: u32,
    /// Counter sums over every FTL instance: (gc drops, write-backs, evictions, gc copies).
    drops: u64,
    write_backs: u64,
    evictions: u64,
    second_writes: u64,
    /// Multi-plane programs and reads (the device has 2 planes; issue #20).
    multi_programs: u64,
    multi_reads: u64,
}

type CdmFtl<'a> = TestFtl<'a, Device<'a>>;

impl CdmEnv {
    fn new(emu: Emulator, cfg: Config, slots: u32, cache_cfg: NvCacheConfig, seed: u64) -> Self {
        let geo = emu.geometry();
        let lay = NvCacheLayout::new(slots);
        CdmEnv {
            nvm: SharedNvm::new(slots, geo.data_bytes, seed),
            mem: FtlMemory::new(&geo, &cfg),
            slots: vec![Slot::EMPTY; lay.slots],
            index: vec![0; lay.index_words],
            emu,
            cfg,
            cache_cfg,
            model: Model::new(cfg.logical_pages),
            log: Log::default(),
            wom: None,
            cuts: 0,
            mount_cuts: 0,
            drops: 0,
            write_backs: 0,
            evictions: 0,
            second_writes: 0,
            multi_programs: 0,
            multi_reads: 0,
        }
    }

    fn power_on(&mut self) {
        self.emu.cancel_power_cut();
        self.emu.restore_power();
        self.nvm.with(|r| {
            r.cancel_power_cut();
            r.restore_power();
        });
    }

    fn run(&mut self, ops: &[Op]) -> Result<(), String> {
        self.run_inner(ops).map_err(|e| format!("{e}\nrecent events:\n{}", self.log.dump()))
    }

    fn run_inner(&mut self, ops: &[Op]) -> Result<(), String> {
        #[derive(PartialEq)]
        enum Next {
            Format,
            Mount,
            Recover,
        }
        let mut next = Next::Format;
        let mut next_op = 0usize;
        let mut mount_cut: Option<u32> = None;
        loop {
            if next == Next::Recover {
                self.cuts += 1;
                if let Some(m) = mount_cut.take() {
                    self.power_on();
                    // Odd: a NAND operation of the mount; even: one of its NVM writes (freeing
                    // stale or duplicate slots), if it makes that many.
                    if m % 2 == 1 {
                        self.emu.schedule_power_cut(m as u64);
                    } else {
                        self.nvm.with(|r| r.schedule_power_cut(m as u64 / 2));
                    }
                    let r = open_dev(
                        &mut self.emu,
                        &mut self.nvm,
                        &mut self.mem,
                        &mut self.slots,
                        &mut self.index,
                        (self.cfg, self.cache_cfg),
                        self.wom.as_mut(),
                        false,
                    )
                    .map(drop);
                    match r {
                        Ok(()) => {}
                        Err(e) if is_power_loss(&e) => {
                            self.mount_cuts += 1;
                            self.log.push(format!("recovery mount cut at op {m}"));
                        }
                        Err(e) => return Err(format!("mount cut at {m} failed: {e:?}")),
                    }
                }
                self.power_on();
            }
            let (emu, nvm, mem, slots, index) =
                (&mut self.emu, &mut self.nvm, &mut self.mem, &mut self.slots, &mut self.index);
            let cfgs = (self.cfg, self.cache_cfg);
            let made = open_dev(emu, nvm, mem, slots, index, cfgs, self.wom.as_mut(), next == Next::Format);
            let mut ftl = match made {
                Ok(f) => f,
                // A cut still pending from the session fired in a clean mount.
                Err(e) if is_power_loss(&e) && next == Next::Mount => {
                    next = Next::Recover;
                    continue;
                }
                Err(e) => return Err(format!("format/mount failed: {e:?}")),
            };
            if next == Next::Recover {
                let n = settle_all(&mut ftl, &mut self.model, true)?
                    .map_err(|_| "cut during the post-recovery check".to_string())?;
                self.log.push(format!("recovered, {n} pages rolled back"));
            } else if next == Next::Mount && verify_all(&mut ftl, &self.model)?.is_err() {
                next = Next::Recover;
                continue;
            }
            let mut ctx = Ctx::touched(&mut self.model, &mut self.log, &mut mount_cut);
            let outcome = session(&mut ftl, &mut ctx, ops, &mut next_op)?;
            if let Some(c) = ftl.nv_counters() {
                self.drops += c.gc_drops;
                self.write_backs += c.write_backs;
                self.evictions += c.evictions;
            }
            self.second_writes += second_writes(&ftl);
            self.multi_programs += ftl.counters().multi_plane_programs;
            self.multi_reads += ftl.counters().multi_plane_reads;
            match outcome {
                Outcome::Cut => {
                    self.log.push("power cut".into());
                    next = Next::Recover;
                }
                Outcome::Remount => match ftl.unmount() {
                    Ok(_) => {
                        self.model.flush();
                        next = Next::Mount;
                    }
                    Err(e) if is_power_loss(&e) => next = Next::Recover,
                    Err(e) => return Err(format!("unmount failed: {e:?}")),
                },
                Outcome::DeviceError(e) => return Err(format!("device error {e:?}")),
                Outcome::End => {
                    ftl.nand_mut().dev.cancel_power_cut();
                    ftl.nand_mut().hook.with(|r| r.cancel_power_cut());
                    verify_all(&mut ftl, &self.model)?.map_err(|_| "cut in the final check".to_string())?;
                    ftl.unmount().map_err(|e| format!("final unmount: {e:?}"))?;
                    self.model.flush();
                    let mut f = open_dev(
                        &mut self.emu,
                        &mut self.nvm,
                        &mut self.mem,
                        &mut self.slots,
                        &mut self.index,
                        (self.cfg, self.cache_cfg),
                        self.wom.as_mut(),
                        false,
                    )
                    .map_err(|e| format!("mount after the final unmount: {e:?}"))?;
                    verify_all(&mut f, &self.model)?.map_err(|_| "cut in the final check".to_string())?;
                    return Ok(());
                }
            }
        }
    }
}

fn cache<'a>(
    nvm: &'a mut SharedNvm,
    slots: &'a mut [Slot],
    index: &'a mut [u32],
    cc: NvCacheConfig,
) -> NvCache<'a> {
    NvCache::new(nvm, slots, index, cc).expect("cache memory")
}

fn format_dev<'a>(
    emu: &'a mut Emulator,
    nvm: &'a mut SharedNvm,
    mem: &'a mut FtlMemory,
    slots: &'a mut [Slot],
    index: &'a mut [u32],
    cfg: Config,
    cc: NvCacheConfig,
) -> Result<CdmFtl<'a>, Error> {
    open_dev(emu, nvm, mem, slots, index, (cfg, cc), None, true)
}

fn mount_dev<'a>(
    emu: &'a mut Emulator,
    nvm: &'a mut SharedNvm,
    mem: &'a mut FtlMemory,
    slots: &'a mut [Slot],
    index: &'a mut [u32],
    cfg: Config,
    cc: NvCacheConfig,
) -> Result<CdmFtl<'a>, Error> {
    open_dev(emu, nvm, mem, slots, index, (cfg, cc), None, false)
}

/// Formats (`format`) or mounts with the cache attached, and second writes if `wom` is given.
#[allow(clippy::too_many_arguments)]
fn open_dev<'a>(
    emu: &'a mut Emulator,
    nvm: &'a mut SharedNvm,
    mem: &'a mut FtlMemory,
    slots: &'a mut [Slot],
    index: &'a mut [u32],
    (cfg, cc): (Config, NvCacheConfig),
    wom: Option<&'a mut WomParts>,
    format: bool,
) -> Result<CdmFtl<'a>, Error> {
    let dev = Forward::new(emu, nvm.clone());
    let (map, m) = mem.parts();
    let ext = with_wom(Extensions::none().cache(cache(nvm, slots, index, cc)), wom);
    if format {
        Ftl::format_with(dev, DefaultPolicies::default(), map, m, cfg, ext)
    } else {
        Ftl::mount_with(dev, DefaultPolicies::default(), map, m, cfg, ext)
    }
}

/// `ext` with second writes stacked, if `wom` is given.
#[cfg(feature = "wom")]
fn with_wom<'a>(ext: Extensions<'a>, wom: Option<&'a mut WomParts>) -> Extensions<'a> {
    match wom {
        Some(w) => ext.reuse(w.buffers.reuse(&mut *w.codec, w.config, w.slots)),
        None => ext,
    }
}

/// Without feature `wom` no `WomParts` value exists.
#[cfg(not(feature = "wom"))]
fn with_wom<'a>(ext: Extensions<'a>, _wom: Option<&'a mut WomParts>) -> Extensions<'a> {
    ext
}

fn emulator(torn: f64, erase: f64) -> Emulator {
    let faults = FaultConfig { torn_fraction: torn, partial_erase_fraction: erase, ..FaultConfig::default() };
    Emulator::new(EmulatorConfig { faults, ..EmulatorConfig::new(geometry(PPB, BLOCKS_PER_PLANE, PLANES)) })
        .unwrap()
}

fn op(logical: u32) -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => (0..logical, 1..=4u32).prop_map(|(lpn, pages)| Op::Write { lpn, pages }),
        3 => (0..logical, 1..=4u32).prop_map(|(lpn, pages)| Op::Read { lpn, pages }),
        2 => (0..logical, 1..=8u32).prop_map(|(lpn, pages)| Op::Trim { lpn, pages }),
        1 => Just(Op::Flush),
        1 => (0..400u32, proptest::option::weighted(0.3, 0..80u32))
            .prop_map(|(after, mount_after)| Op::Cut { after, mount_after }),
        1 => Just(Op::Remount),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: ftl_tests::proptest_cases(300),
        max_shrink_iters: 2048,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// Removable pages are never lost: cache evictions, GC drops and power cuts (NAND and NVM)
    /// against the model.
    #[test]
    fn cdm_matches_model(
        ops in proptest::collection::vec(op(config().logical_pages), 1..300),
        slots in 1..=64u32,
        read_fill in prop_oneof![Just(ReadFill::Lru), Just(ReadFill::Clean), Just(ReadFill::Off)],
        basic in proptest::bool::weighted(0.2),
        write_back in proptest::bool::weighted(0.35),
        torn in prop_oneof![Just(0.5), Just(1.0), Just(0.01)],
        seed in any::<u64>(),
    ) {
        let policy = if basic { NvPolicy::Basic } else { NvPolicy::Cdm };
        let cc = NvCacheConfig { policy, read_fill, write_back };
        let mut env = CdmEnv::new(emulator(torn, 0.5), config(), slots, cc, seed);
        // Start full and in steady state (random overwrites and reads, so GC runs and the cache
        // holds removable pages and only copies when the generated sequence begins).
        let mut all = vec![Op::Write { lpn: 0, pages: LOGICAL }];
        let mut x = seed;
        for _ in 0..300 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            all.push(Op::Write { lpn: (x >> 33) as u32 % LOGICAL, pages: 1 });
            all.push(Op::Read { lpn: (x >> 13) as u32 % LOGICAL, pages: 1 });
        }
        all.push(Op::Flush);
        all.extend(ops);
        env.run(&all).map_err(TestCaseError::fail)?;
    }
}

fn workload() -> Vec<Op> {
    // Writes skewed to a hot quarter, reads spread over the whole space (reads cache pages that
    // sit in blocks GC later collects: removable pages), trims and flushes now and then.
    let mut ops = vec![Op::Write { lpn: 0, pages: LOGICAL }];
    let mut x = 7u64;
    let mut next = || {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (x >> 33) as u32
    };
    for i in 0..600u32 {
        let r = next();
        let lpn = if r % 2 == 0 { r % LOGICAL } else { r % 64 };
        ops.push(Op::Write { lpn, pages: 1 + i % 2 });
        ops.push(Op::Read { lpn: next() % LOGICAL, pages: 2 });
        if i % 25 == 12 {
            ops.push(Op::Trim { lpn: next() % LOGICAL, pages: 2 });
        }
        if i % 10 == 9 {
            ops.push(Op::Flush);
        }
    }
    ops
}

/// The proptest's configuration reaches what it is about: GC drops of removable pages,
/// write-backs of evicted only copies, evictions; and, on its 2-plane device, multi-plane
/// programs and reads (so the NAND and NVM cuts of `exhaustive_cuts` and the proptest land in
/// stripes and their cache copies too).
#[test]
fn config_reaches_drops_and_write_backs() {
    let mut env = CdmEnv::new(emulator(0.5, 0.5), config(), 32, NvCacheConfig::new(NvPolicy::Cdm), 1);
    env.run(&workload()).unwrap();
    assert!(
        env.drops > 10 && env.write_backs > 5 && env.evictions > 50,
        "{} {} {}",
        env.drops,
        env.write_backs,
        env.evictions
    );
    assert!(env.multi_programs > 50 && env.multi_reads > 5, "{} {}", env.multi_programs, env.multi_reads);
    eprintln!(
        "drops {}, write-backs {}, evictions {}, multi-plane programs {}, reads {}",
        env.drops, env.write_backs, env.evictions, env.multi_programs, env.multi_reads
    );
}

/// Every NAND operation and every NVM write of a fixed workload, cut in turn.
#[test]
fn exhaustive_cuts() {
    exhaustive_cuts_with(NvCacheConfig::new(NvPolicy::Cdm));
}

/// `exhaustive_cuts` with the write-back cache (host writes reach flash only when evicted).
#[test]
fn exhaustive_cuts_write_back() {
    exhaustive_cuts_with(NvCacheConfig { write_back: true, ..NvCacheConfig::new(NvPolicy::Cdm) });
}

fn exhaustive_cuts_with(cc: NvCacheConfig) {
    let ops = workload();
    // Count the operations of an uncut run.
    let mut env = CdmEnv::new(emulator(0.5, 0.5), config(), 6, cc, 3);
    env.run(&ops).unwrap();
    let nand_ops = env.emu.ops_issued();
    let nvm_writes = env.nvm.with(|r| r.writes_issued());
    let stride = |n: u64| (n / 400).max(1);
    let mut runs = 0;
    for (kind, total) in [(1u32, nand_ops), (0u32, nvm_writes)] {
        let mut k = 0;
        while k < total {
            // Op::Cut's encoding: multiples of 3 cut the NVM at after / 3.
            let after = if kind == 0 { k * 3 } else { k * 3 + 1 };
            let mut cut_ops =
                vec![Op::Cut { after: after as u32, mount_after: (k % 5 == 0).then_some((k % 37) as u32) }];
            cut_ops.extend(ops.iter().copied());
            let mut env = CdmEnv::new(emulator(0.5, 0.5), config(), 6, cc, k);
            env.run(&cut_ops)
                .unwrap_or_else(|e| panic!("cut {} at {k}: {e}", if kind == 0 { "NVM" } else { "NAND" }));
            runs += 1;
            k += stride(total);
        }
    }
    assert!(runs > 200, "{runs}");
}

fn page(lpn: u32, id: u64) -> Vec<u8> {
    let mut p = vec![0u8; 512];
    fill_page(lpn, id, &mut p);
    p
}

/// Host writes of `lpns` (ids from `next_id`), returning the FTL's NAND programs.
fn programs_with(policy: Option<NvPolicy>) -> (u64, u64, u64) {
    let geo = geometry(PPB, BLOCKS_PER_PLANE, PLANES);
    let cfg = config();
    let mut emu = Emulator::new(EmulatorConfig::new(geo)).unwrap();
    let mut mem = FtlMemory::new(&geo, &cfg);
    let lay = NvCacheLayout::new(8);
    let mut nvm = SharedNvm::new(8, geo.data_bytes, 1);
    let (mut slots, mut index) = (vec![Slot::EMPTY; lay.slots], vec![0u32; lay.index_words]);
    let (map, m) = mem.parts();
    let mut f = match policy {
        Some(p) => Ftl::format_with(
            &mut emu,
            DefaultPolicies::default(),
            map,
            m,
            cfg,
            Extensions::none().cache(cache(&mut nvm, &mut slots, &mut index, NvCacheConfig::new(p))),
        ),
        None => Ftl::format(&mut emu, DefaultPolicies::default(), map, m, cfg),
    }
    .unwrap();
    let mut x = 12345u64;
    let mut buf = vec![0u8; 512];
    let mut want = vec![None; LOGICAL as usize];
    for id in 1..3000u64 {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        // A hot fifth takes most writes; reads go anywhere.
        let lpn = if x >> 62 == 0 { (x >> 33) as u32 % LOGICAL } else { (x >> 33) as u32 % 64 };
        f.write(lpn, &page(lpn, id)).unwrap();
        want[lpn as usize] = Some(id);
        let r = (x >> 40) as u32 % LOGICAL;
        f.read(r, &mut buf).unwrap();
        assert_eq!(identify(r, &buf), Found::Content(want[r as usize]), "lpn {r}");
    }
    for l in 0..LOGICAL {
        f.read(l, &mut buf).unwrap();
        assert_eq!(identify(l, &buf), Found::Content(want[l as usize]), "lpn {l}");
    }
    let c = *f.counters();
    (c.nand_programs, c.gc_page_copies, f.nv_counters().map_or(0, |n| n.gc_drops))
}

/// NVM-basic has no removable state: it programs exactly what the FTL without a cache programs.
/// CDM drops removable pages (whether that lowers the copies of a given workload is the
/// simulator's question, see docs/eval/cdm); every page reads back as last written in all three.
#[test]
fn basic_equals_no_cache_and_cdm_drops() {
    let (none, none_copies, _) = programs_with(None);
    let (basic, basic_copies, basic_drops) = programs_with(Some(NvPolicy::Basic));
    let (_, _, cdm_drops) = programs_with(Some(NvPolicy::Cdm));
    assert_eq!((basic, basic_copies, basic_drops), (none, none_copies, 0));
    assert!(cdm_drops > 0, "{cdm_drops} drops");
}

/// After GC drops a removable page, the map points into the cache: the page reads back from the
/// cache, survives a checkpoint written after the drop (which records no flash copy) and a cut,
/// and mount restores the slot as the only copy.
#[test]
fn dropped_page_survives_checkpoint_and_cut() {
    let geo = geometry(PPB, BLOCKS_PER_PLANE, PLANES);
    let cfg = config();
    let mut emu = Emulator::new(EmulatorConfig::new(geo)).unwrap();
    let mut nvm = SharedNvm::new(4, geo.data_bytes, 9);
    let mut mem = FtlMemory::new(&geo, &cfg);
    let lay = NvCacheLayout::new(4);
    let (mut slots, mut index) = (vec![Slot::EMPTY; lay.slots], vec![0u32; lay.index_words]);
    let cc = NvCacheConfig { policy: NvPolicy::Cdm, read_fill: ReadFill::Off, write_back: false };
    let mut id = 0u64;
    let mut f = format_dev(&mut emu, &mut nvm, &mut mem, &mut slots, &mut index, cfg, cc).unwrap();
    // lpn 0 written once and cached; then other pages overwritten until GC has dropped it.
    id += 1;
    f.write(0, &page(0, id)).unwrap();
    let mut b = vec![0u8; 512];
    for l in 1..LOGICAL {
        id += 1;
        f.write(l, &page(l, id)).unwrap();
        f.read(0, &mut b).unwrap();
    }
    let mut n = 0;
    while f.nv_counters().unwrap().gc_drops == 0 {
        id += 1;
        let l = 1 + (id.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40) as u32 % (LOGICAL - 1);
        f.write(l, &page(l, id)).unwrap();
        n += 1;
        assert!(n < 10_000, "no drop");
        // Keep lpn 0 most recently used so it stays cached.
        let mut b = vec![0u8; 512];
        f.read(0, &mut b).unwrap();
        assert_eq!(identify(0, &b), Found::Content(Some(1)));
    }
    assert_eq!(f.nv_cache().unwrap().only_copies(), 1);
    f.flush().unwrap();
    // The clean unmount writes a checkpoint that has no flash copy of lpn 0; then power is cut
    // without the cache having evicted it.
    let _ = f.unmount().unwrap();
    let mut f = mount_dev(&mut emu, &mut nvm, &mut mem, &mut slots, &mut index, cfg, cc).unwrap();
    assert_eq!(f.nv_counters().unwrap().mount_only_copy, 1);
    let mut b = vec![0u8; 512];
    f.read(0, &mut b).unwrap();
    assert_eq!(identify(0, &b), Found::Content(Some(1)));
    drop(f);
    // Without the cache, the same device does not have lpn 0's data: mounting it with the cache
    // is required (documented), and the cache is what holds the page.
    emu.power_cut_now();
    emu.restore_power();
    let mut f = mount_dev(&mut emu, &mut nvm, &mut mem, &mut slots, &mut index, cfg, cc).unwrap();
    f.read(0, &mut b).unwrap();
    assert_eq!(identify(0, &b), Found::Content(Some(1)));
    // Detaching the cache: write the only copies back, unmount, mount without the cache.
    assert_eq!(f.nv_cache().unwrap().only_copies(), 1);
    f.nv_write_back_all().unwrap();
    assert_eq!(f.nv_cache().unwrap().only_copies(), 0);
    drop(f.unmount().unwrap());
    let mut f = ftl_tests::mount(&mut emu, &mut mem, cfg).unwrap();
    f.read(0, &mut b).unwrap();
    assert_eq!(identify(0, &b), Found::Content(Some(1)));
    for l in 1..LOGICAL {
        f.read(l, &mut b).unwrap();
        assert!(matches!(identify(l, &b), Found::Content(Some(_))), "lpn {l}");
    }
}

/// Mount refuses an NVM that holds no cache (never formatted) with a typed error.
#[test]
fn mount_without_a_formatted_cache_is_refused() {
    let geo = geometry(PPB, BLOCKS_PER_PLANE, PLANES);
    let cfg = config();
    let mut emu = Emulator::new(EmulatorConfig::new(geo)).unwrap();
    let mut mem = FtlMemory::new(&geo, &cfg);
    ftl_tests::format(&mut emu, &mut mem, cfg).unwrap().unmount().unwrap();
    let mut nvm = SharedNvm::new(4, geo.data_bytes, 1);
    let lay = NvCacheLayout::new(4);
    let (mut slots, mut index) = (vec![Slot::EMPTY; lay.slots], vec![0u32; lay.index_words]);
    let r = mount_dev(
        &mut emu,
        &mut nvm,
        &mut mem,
        &mut slots,
        &mut index,
        cfg,
        NvCacheConfig::new(NvPolicy::Cdm),
    );
    assert_eq!(r.err(), Some(Error::NotFormatted));
}

/// The TPC-C trace's access pattern (testdata/traces/mqsim_umass_tpcc_websearch, 4 KiB pages
/// compacted onto the logical space) on a device with data stored, CDM with a cache of 5% of the
/// logical pages: every read returns the last write, and so does every page at the end. NVM-basic
/// programs exactly what no cache programs on the same pattern.
#[test]
fn tpcc_pattern_reads_back_every_write() {
    use sim_host::trace::{page_span, read_trace, Compactor, Format, Op as TraceOp, ParseOptions};
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../testdata/traces/mqsim_umass_tpcc_websearch/tpcc-small.trace"
    );
    let trace =
        read_trace(std::path::Path::new(path), Format::Disksim, &ParseOptions { skip_bad: false }).unwrap();
    let mut compactor = Compactor::new();
    let reqs: Vec<(bool, Vec<u32>)> = trace
        .requests
        .iter()
        .filter_map(|r| {
            let s = page_span(r.offset, r.len, 4096)?;
            let pages = (s.first_page..s.first_page + s.pages).map(|p| compactor.map(p) as u32).collect();
            Some((r.op == TraceOp::Write, pages))
        })
        .collect();
    let footprint = reqs.iter().flat_map(|r| r.1.iter()).max().unwrap() + 1;
    let geo = geometry(64, 200, 2);
    let mut cfg = Config::with_logical_pages(&geo, footprint);
    // (No mount pool in the reference run: see `config`.)
    cfg.mount_pool_blocks = 0;
    let run = |policy: Option<NvPolicy>| -> (u64, u64) {
        let mut emu = Emulator::new(EmulatorConfig::new(geo)).unwrap();
        let mut mem = FtlMemory::new(&geo, &cfg);
        let slots_n = footprint / 20;
        let lay = NvCacheLayout::new(slots_n);
        let mut nvm = SharedNvm::new(slots_n, geo.data_bytes, 5);
        let (mut slots, mut index) = (vec![Slot::EMPTY; lay.slots], vec![0u32; lay.index_words]);
        let (map, m) = mem.parts();
        let mut f = match policy {
            Some(p) => Ftl::format_with(
                &mut emu,
                DefaultPolicies::default(),
                map,
                m,
                cfg,
                Extensions::none().cache(cache(&mut nvm, &mut slots, &mut index, NvCacheConfig::new(p))),
            ),
            None => Ftl::format(&mut emu, DefaultPolicies::default(), map, m, cfg),
        }
        .unwrap();
        let mut want = vec![0u64; footprint as usize];
        let mut id = 0u64;
        let mut buf = vec![0u8; 512];
        for l in 0..footprint {
            id += 1;
            f.write(l, &page(l, id)).unwrap();
            want[l as usize] = id;
        }
        for _ in 0..3 {
            for (write, pages) in &reqs {
                for &l in pages {
                    if *write {
                        id += 1;
                        f.write(l, &page(l, id)).unwrap();
                        want[l as usize] = id;
                    } else {
                        f.read(l, &mut buf).unwrap();
                        assert_eq!(identify(l, &buf), Found::Content(Some(want[l as usize])), "lpn {l}");
                    }
                }
            }
        }
        for l in 0..footprint {
            f.read(l, &mut buf).unwrap();
            assert_eq!(identify(l, &buf), Found::Content(Some(want[l as usize])), "lpn {l} at the end");
        }
        (f.counters().nand_programs, f.nv_counters().map_or(0, |c| c.gc_drops))
    };
    let (none, _) = run(None);
    let (basic, basic_drops) = run(Some(NvPolicy::Basic));
    let (_, cdm_drops) = run(Some(NvPolicy::Cdm));
    assert_eq!((basic, basic_drops), (none, 0));
    assert!(cdm_drops > 100, "{cdm_drops} drops");
}

/// A cut at any NVM write or any of the first NAND operations of `format_with` with a cache: mount then
/// fails with `NotFormatted`/`Corrupt` or finds an empty device, and a new format works.
#[test]
fn cut_during_format() {
    let geo = geometry(PPB, BLOCKS_PER_PLANE, PLANES);
    let cfg = config();
    let cc = NvCacheConfig::new(NvPolicy::Cdm);
    let lay = NvCacheLayout::new(8);
    // The operations of an uncut format.
    let (nand_ops, nvm_writes) = {
        let mut emu = Emulator::new(EmulatorConfig::new(geo)).unwrap();
        let mut nvm = SharedNvm::new(8, geo.data_bytes, 0);
        let mut mem = FtlMemory::new(&geo, &cfg);
        let (mut slots, mut index) = (vec![Slot::EMPTY; lay.slots], vec![0u32; lay.index_words]);
        drop(format_dev(&mut emu, &mut nvm, &mut mem, &mut slots, &mut index, cfg, cc).unwrap());
        (emu.ops_issued(), nvm.with(|r| r.writes_issued()))
    };
    let cuts = (0..nvm_writes).map(|k| (true, k)).chain((0..nand_ops).step_by(7).map(|k| (false, k)));
    for (on_nvm, k) in cuts {
        let mut emu = Emulator::new(EmulatorConfig::new(geo)).unwrap();
        let mut nvm = SharedNvm::new(8, geo.data_bytes, k);
        let mut mem = FtlMemory::new(&geo, &cfg);
        let (mut slots, mut index) = (vec![Slot::EMPTY; lay.slots], vec![0u32; lay.index_words]);
        if on_nvm {
            nvm.with(|r| r.schedule_power_cut(k));
        } else {
            emu.schedule_power_cut(k);
        }
        let r = format_dev(&mut emu, &mut nvm, &mut mem, &mut slots, &mut index, cfg, cc).map(drop);
        assert!(matches!(r, Err(e) if is_power_loss(&e)), "cut {k} did not fire: {r:?}");
        emu.restore_power();
        nvm.with(|r| r.restore_power());
        match mount_dev(&mut emu, &mut nvm, &mut mem, &mut slots, &mut index, cfg, cc) {
            Ok(mut f) => {
                let mut b = vec![0u8; 512];
                for l in 0..LOGICAL {
                    f.read(l, &mut b).unwrap();
                    assert_eq!(identify(l, &b), Found::Content(None), "cut {k}: lpn {l}");
                }
            }
            Err(Error::NotFormatted | Error::Corrupt) => {}
            Err(e) => panic!("cut {k}: mount returned {e:?}"),
        }
        let mut f = format_dev(&mut emu, &mut nvm, &mut mem, &mut slots, &mut index, cfg, cc).unwrap();
        f.write(3, &page(3, 1)).unwrap();
        drop(f.unmount().unwrap());
        let mut f = mount_dev(&mut emu, &mut nvm, &mut mem, &mut slots, &mut index, cfg, cc).unwrap();
        let mut b = vec![0u8; 512];
        f.read(3, &mut b).unwrap();
        assert_eq!(identify(3, &b), Found::Content(Some(1)));
    }
}

/// With `ReadFill::Clean` a read never programs flash (only copies are written back by writes),
/// while `ReadFill::Lru` reads do write back evicted only copies on this workload.
#[test]
fn clean_read_fill_never_programs_on_reads() {
    let geo = geometry(PPB, BLOCKS_PER_PLANE, PLANES);
    let cfg = config();
    let mut reads_programmed = [0u64; 2];
    for (i, read_fill) in [ReadFill::Clean, ReadFill::Lru].into_iter().enumerate() {
        let mut emu = Emulator::new(EmulatorConfig::new(geo)).unwrap();
        let mut nvm = SharedNvm::new(32, geo.data_bytes, 1);
        let mut mem = FtlMemory::new(&geo, &cfg);
        let lay = NvCacheLayout::new(32);
        let (mut slots, mut index) = (vec![Slot::EMPTY; lay.slots], vec![0u32; lay.index_words]);
        let cc = NvCacheConfig { policy: NvPolicy::Cdm, read_fill, write_back: false };
        let mut f = format_dev(&mut emu, &mut nvm, &mut mem, &mut slots, &mut index, cfg, cc).unwrap();
        let mut want = vec![None; LOGICAL as usize];
        let mut b = vec![0u8; 512];
        let mut x = 99u64;
        for id in 1..6000u64 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let l = if id <= LOGICAL as u64 { id as u32 - 1 } else { (x >> 33) as u32 % LOGICAL };
            f.write(l, &page(l, id)).unwrap();
            want[l as usize] = Some(id);
            for _ in 0..2 {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                let r = (x >> 33) as u32 % LOGICAL;
                let before = f.counters().nand_programs;
                f.read(r, &mut b).unwrap();
                reads_programmed[i] += f.counters().nand_programs - before;
                assert_eq!(identify(r, &b), Found::Content(want[r as usize]));
            }
        }
        assert!(f.nv_counters().unwrap().gc_drops > 0);
    }
    assert_eq!(reads_programmed[0], 0);
    assert!(reads_programmed[1] > 0);
}

/// Second writes an FTL made (0 without feature `wom`).
#[cfg(feature = "wom")]
fn second_writes(ftl: &CdmFtl<'_>) -> u64 {
    ftl.reuse_stats().map_or(0, |s| s.second_writes)
}

#[cfg(not(feature = "wom"))]
fn second_writes(_ftl: &CdmFtl<'_>) -> u64 {
    0
}

/// Second writes (wom) stacked on the NV cache (issue #17): the same model, cuts (NAND and NVM,
/// recovery mounts cut too) and remounts. A second write gives the cache its copy like a first
/// write, and mount's reconciliation reads a second write's sequence number and data through
/// the second-write path (before, the pair was refused).
#[cfg(feature = "wom")]
mod second_writes {
    use ftl_core::reuse::ReuseConfig;
    use nand_hal::EccRequirement;
    use sim_host::sim::wom::{polar_wom, ReuseBuffers};

    use super::*;
    use nand_hal::Geometry;

    /// Out-of-order programming, NOP 4, room in the spare for second-write metadata: the wom
    /// tests' small device (8 pages per block, 12 blocks per plane, 2 planes, 32 logical pages).
    fn wom_config() -> (Geometry, Config) {
        let geo = Geometry {
            data_bytes: 4096,
            spare_bytes: 368,
            pages_per_block: 8,
            blocks_per_plane: 12,
            planes_per_lun: 2,
            luns: 1,
            nop: 4,
            sequential_program: false,
            ecc: EccRequirement { bits: 8, codeword_bytes: 512 },
            endurance: 100_000,
        };
        let mut cfg = Config::with_logical_pages(&geo, 32);
        cfg.checkpoint_interval_blocks = 4;
        cfg.mount_pool_blocks = 0;
        (geo, cfg)
    }

    fn wom_env(slots: u32, cc: NvCacheConfig, torn: f64, seed: u64) -> CdmEnv {
        let (geo, cfg) = wom_config();
        let faults =
            FaultConfig { torn_fraction: torn, partial_erase_fraction: 0.5, ..FaultConfig::default() };
        let emu =
            Emulator::new(EmulatorConfig { faults, seed, reject_set_bits: true, ..EmulatorConfig::new(geo) })
                .unwrap();
        let mut env = CdmEnv::new(emu, cfg, slots, cc, seed);
        let mut config = ReuseConfig::paper(&geo, &cfg);
        config.gc_threshold = 8;
        let codec = Box::new(polar_wom(&geo, 4, 16, 2).unwrap());
        env.wom = Some(WomParts { codec, buffers: ReuseBuffers::new(&geo), config, slots: false });
        env
    }

    fn ops_with_prelude(seed: u64, ops: Vec<Op>) -> Vec<Op> {
        let mut all = vec![Op::Write { lpn: 0, pages: 32 }];
        let mut x = seed;
        for _ in 0..100 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            all.push(Op::Write { lpn: (x >> 33) as u32 % 32, pages: 1 });
            all.push(Op::Read { lpn: (x >> 13) as u32 % 32, pages: 1 });
        }
        all.push(Op::Flush);
        all.extend(ops);
        all
    }

    proptest! {
        #![proptest_config(ProptestConfig {
            cases: ftl_tests::proptest_cases(100),
            max_shrink_iters: 1024,
            failure_persistence: None,
            ..ProptestConfig::default()
        })]

        /// `cdm_matches_model` with second writes on.
        #[test]
        fn cdm_with_second_writes_matches_model(
            ops in proptest::collection::vec(op(32), 1..300),
            slots in 1..=16u32,
            read_fill in prop_oneof![Just(ReadFill::Lru), Just(ReadFill::Clean), Just(ReadFill::Off)],
            basic in proptest::bool::weighted(0.2),
            write_back in proptest::bool::weighted(0.35),
            torn in prop_oneof![Just(0.5), Just(0.99), Just(0.01)],
            seed in any::<u64>(),
        ) {
            let policy = if basic { NvPolicy::Basic } else { NvPolicy::Cdm };
            let mut env = wom_env(slots, NvCacheConfig { policy, read_fill, write_back }, torn, seed);
            env.run(&ops_with_prelude(seed, ops)).map_err(TestCaseError::fail)?;
            prop_assert_eq!(env.emu.counters().rejected, 0);
        }
    }

    /// After a clean unmount every cached page equals its flash copy, so mount keeps each slot as
    /// a clean copy and none as an only copy: reconciliation reads a second write's sequence number
    /// and data through the second-write path, and a first write unscrambled.
    #[test]
    fn clean_mount_keeps_cached_pages_clean_under_second_writes() {
        let mut env = wom_env(16, NvCacheConfig::new(NvPolicy::Basic), 0.5, 3);
        env.run(&ops_with_prelude(3, vec![])).unwrap();
        assert!(env.second_writes > 20, "{}", env.second_writes);
        let f = open_dev(
            &mut env.emu,
            &mut env.nvm,
            &mut env.mem,
            &mut env.slots,
            &mut env.index,
            (env.cfg, env.cache_cfg),
            env.wom.as_mut(),
            false,
        )
        .unwrap();
        let c = f.nv_counters().unwrap();
        assert!(c.mount_restored >= 8 && c.mount_only_copy == 0 && c.mount_stale == 0, "{c:?}");
    }

    /// The stack's configuration reaches second writes, GC drops and write-backs, under random
    /// cuts (`FTL_WOM_CDM_SEEDS` seeds, default 20).
    #[test]
    fn random_cuts_reach_second_writes_drops_and_write_backs() {
        let seeds: u64 = std::env::var("FTL_WOM_CDM_SEEDS").ok().and_then(|v| v.parse().ok()).unwrap_or(20);
        let (mut second, mut drops, mut write_backs, mut cuts) = (0, 0, 0, 0);
        for seed in 1..=seeds {
            let mut rng = ftl_tests::Rng::new(seed ^ 0x5EC0);
            let mut ops = ftl_tests::random_workload(&mut rng, 32, 400);
            for i in (0..ops.len()).step_by(97) {
                ops.insert(
                    i,
                    Op::Cut {
                        after: 50 + (seed as u32 * 37 + i as u32) % 300,
                        mount_after: (i % 3 == 0).then_some(i as u32 % 60),
                    },
                );
            }
            let write_back = seed % 3 == 0;
            let cc = NvCacheConfig { write_back, ..NvCacheConfig::new(NvPolicy::Cdm) };
            let mut env = wom_env(8, cc, [0.5, 0.99, 0.01][seed as usize % 3], seed);
            env.run(&ops_with_prelude(seed, ops)).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
            assert_eq!(env.emu.counters().rejected, 0, "seed {seed}");
            (second, drops, write_backs, cuts) = (
                second + env.second_writes,
                drops + env.drops,
                write_backs + env.write_backs,
                cuts + env.cuts,
            );
        }
        eprintln!("{second} second writes, {drops} drops, {write_backs} write-backs, {cuts} cuts");
        assert!(
            second > 20 * seeds && drops > 0 && write_backs > 0 && cuts as u64 > seeds,
            "{second} {drops} {write_backs} {cuts}"
        );
    }
}
