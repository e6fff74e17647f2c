//! The simulator's deduplication against independent expectations: the synthetic workload's
//! duplicate ratio, the offline optimum, the dynamic switch and out-of-line deduplication.

use sim_host::sim::dedup::DedupOptions;
use sim_host::sim::device::Preset;
use sim_host::sim::{simulate, AddressMode, ClassifierKind, Feature, Precondition, SimConfig, SimOutput};
use sim_host::trace::{Op, Request};
use sim_host::workload::{generate, Pattern, RequestPages, WorkloadSpec};

fn config(dedup: &str) -> SimConfig {
    SimConfig {
        label: dedup.into(),
        device: Preset::Small.device(),
        op_percent: 10.0,
        classifier: ClassifierKind::None,
        features: vec![Feature::Dedup],
        precondition: Precondition::None,
        address: AddressMode::Strict,
        queue_depth: 4,
        open_loop: false,
        seed: 1,
        write_limit_pages: None,
        dedup: DedupOptions::from_features(dedup).unwrap().unwrap(),
        nv_cache: None,
        flex: Default::default(),
        wom: sim_host::sim::wom::WomOptions::default(),
        until_worn_permille: None,
        gc_pacing: true,
        multi_plane: false,
        gc_stripes: true,
        stripe_order: Default::default(),
        batch: false,
        check_data: false,
        map: sim_host::memory::MapChoice::Flat,
        classifier_opts: Default::default(),
        write_buffer_bytes: None,
        mount_pool_blocks: ftl_core::RECOMMENDED_MOUNT_POOL_BLOCKS,
    }
}

fn run(dedup: &str, pattern: Pattern, writes: u64, dup: f64) -> serde_json::Value {
    let cfg = config(dedup);
    let spec = WorkloadSpec {
        request_pages: RequestPages::Uniform { min: 1, max: 8 },
        duplicate_ratio: dup,
        seed: 3,
        ..WorkloadSpec::new(pattern, writes)
    };
    let w = generate(&spec, cfg.logical_pages() as u64, cfg.device.geometry.data_bytes as u64).unwrap();
    let out = simulate(&cfg, w, &mut |_| {}).unwrap();
    out.report.features["dedup"].clone()
}

fn f(v: &serde_json::Value, k: &str) -> f64 {
    v[k].as_f64().unwrap_or_else(|| panic!("{k} missing in {v}"))
}

#[test]
fn sequential_without_sampling_finds_every_duplicate() {
    // Written once, nothing dies: every duplicate is of live content, and the index holds all.
    let r = run("dedup:nosample", Pattern::Sequential, 1500, 0.3);
    assert_eq!(f(&r, "dedup_rate"), f(&r, "offline_rate"), "{r}");
    assert!((f(&r, "dedup_rate") - 0.3).abs() < 0.03, "{r}");
    assert_eq!(f(&r, "stale_hits"), 0.0);
    // Every logical page's content is on flash once.
    let n = f(&r, "pages_written_n");
    let m = f(&r, "pages_to_flash_m");
    assert_eq!(f(&r, "live_physical_pages"), m, "{r}");
    assert_eq!(f(&r, "mapped_logical_pages"), n, "{r}");
}

#[test]
fn switch_and_out_of_line_recover_the_space() {
    let inline = run("dedup:nosample", Pattern::Sequential, 1500, 0.5);
    let switched = run("dedup:nosample:switch:buffer=4", Pattern::Sequential, 1500, 0.5);
    assert!(f(&switched, "switch_offs") > 0.0, "{switched}");
    assert!(f(&switched, "dedup_rate") < f(&inline, "dedup_rate"), "{switched}");
    let ool = run("dedup:nosample:switch:buffer=4:ool", Pattern::Sequential, 1500, 0.5);
    let o = &ool["out_of_line"];
    assert!(o["coalesced"].as_u64().unwrap() > 0, "{ool}");
    assert_eq!(o["refused"].as_u64(), Some(0));
    // After out-of-line deduplication the live pages are the distinct contents, as inline got.
    assert_eq!(f(&ool, "live_physical_pages"), f(&inline, "live_physical_pages"), "{ool}");
}

#[test]
fn gc_heavy_dedup_stays_within_the_live_oracle() {
    // Overwrites many times the space: shared pages are moved by GC and counted down.
    let r = run("dedup:nosample", Pattern::Uniform, 20_000, 0.5);
    assert!(f(&r, "shared_moves") > 0.0, "{r}");
    assert!(f(&r, "dedup_rate") > 0.0 && f(&r, "dedup_rate") <= f(&r, "live_oracle_rate") + 1e-9, "{r}");
}

/// Two one-page writes at t=0 through a one-page write buffer, then a read of the second page,
/// on the small device (2 KiB pages, tPROG 200 us, 20 ps/B): the first write completes at once;
/// the second waits until the first has been hashed (SHA-1 47,548 cycles per 4 KiB at 1000 MHz,
/// half for 2 KiB: 23,774 ns; no pre-hash) and programmed (bus 2,048 x 20 ps = 40,960 ns plus the
/// FTL's spare bytes, then tPROG: the write-through latency of one page without deduplication),
/// and the read of the buffered page costs nothing and no flash read.
#[test]
fn write_buffer_latencies_by_hand() {
    let w = |lpn: u64, c: u64, op: Op| Request {
        time_ns: Some(0),
        op,
        offset: lpn * 2048,
        len: 2048,
        content: Some(vec![c]),
    };
    let mut plain = config("dedup");
    plain.features.clear();
    plain.open_loop = true;
    let mut one = simulate(&plain, vec![w(0, 7, Op::Write)].into_iter(), &mut |_| {}).unwrap();
    let program = one.write_latency.sorted()[0];
    assert!((240_960..240_960 + 64 * 20).contains(&program), "{program}");

    let mut cfg = config("dedup:nosample:noprehash:mhz=1000");
    cfg.open_loop = true;
    cfg.write_buffer_bytes = Some(2048);
    let reqs = vec![w(0, 7, Op::Write), w(1, 8, Op::Write), w(1, 0, Op::Read)];
    let mut out = simulate(&cfg, reqs.into_iter(), &mut |_| {}).unwrap();
    assert_eq!(out.write_latency.sorted(), &[0, 23_774 + program]);
    assert_eq!(out.read_latency.sorted(), &[0]);
    assert_eq!(out.report.host_read_pages, 0, "the read was served from the buffer");
}

/// Hashing is on the clock page by page: a two-page write (distinct contents, no pre-hash) at
/// t=0 through a two-page buffer hashes page 1 in [0, h], programs it from h (bus x, then
/// tPROG on plane 0), hashes page 2 in [h, 2h] and programs it on plane 1 once the bus is free
/// (at h + x, later than 2h since x > h); a one-page write arriving at t=0 finds the buffer full
/// until the two-page write leaves at h + x + (x + tPROG). x + tPROG is the
/// write-through latency of one page without deduplication (`program`).
#[test]
fn hashing_is_pipelined_with_programs() {
    let mut plain = config("dedup");
    plain.features.clear();
    plain.open_loop = true;
    let one = Request { time_ns: Some(0), op: Op::Write, offset: 0, len: 2048, content: Some(vec![7]) };
    let program =
        simulate(&plain, vec![one.clone()].into_iter(), &mut |_| {}).unwrap().write_latency.sorted()[0];
    let x = program - 200_000;
    let h = 23_774;
    assert!(x > h);

    let mut cfg = config("dedup:nosample:noprehash:mhz=1000");
    cfg.open_loop = true;
    cfg.write_buffer_bytes = Some(2 * 2048);
    let two = Request { time_ns: Some(0), op: Op::Write, offset: 2048, len: 4096, content: Some(vec![8, 9]) };
    let third = Request { offset: 3 * 2048, content: Some(vec![10]), ..one };
    let mut out = simulate(&cfg, vec![two, third].into_iter(), &mut |_| {}).unwrap();
    assert_eq!(out.write_latency.sorted(), &[0, h + x + program]);
}

/// A read is not held up by a write the hash processor has not released to the flash yet: the
/// simulator places a buffered write's programs when it runs the write, at the time its hashing
/// ends (SHA-1 at 100 MHz: 237,740 ns per 2 KiB page), before it runs a read that arrives in
/// between. Pages 5 and 6 are written at t=0 (planes 0 and 1), page 0 at 1 ms (plane 0 again,
/// hashed until 1.238 ms), and page 5 is read at 1.05 ms on the same plane and bus: its latency
/// is the same as with no write at 1 ms (tR and transfer; it fits before the program), where
/// before it queued behind the program (latency over 400 us).
#[test]
fn a_read_does_not_wait_for_a_program_still_being_hashed() {
    let rq = |t_us: u64, lpn: u64, pages: u64, op: Op| Request {
        time_ns: Some(t_us * 1000),
        op,
        offset: lpn * 2048,
        len: pages * 2048,
        content: Some((0..pages).map(|i| 100 + lpn + i).collect()),
    };
    let mut cfg = config("dedup:nosample:noprehash:mhz=100");
    cfg.open_loop = true;
    cfg.write_buffer_bytes = Some(4 * 2048);
    let read_latency = |reqs: Vec<Request>| {
        let mut out = simulate(&cfg, reqs.into_iter(), &mut |_| {}).unwrap();
        assert_eq!(out.report.host_read_pages, 1, "the read went to flash");
        out.read_latency.sorted()[0]
    };
    let alone = read_latency(vec![rq(0, 5, 2, Op::Write), rq(1050, 5, 1, Op::Read)]);
    let behind =
        read_latency(vec![rq(0, 5, 2, Op::Write), rq(1000, 0, 1, Op::Write), rq(1050, 5, 1, Op::Read)]);
    assert!(alone < 100_000, "{alone}");
    assert_eq!(behind, alone);
}

/// Read priority (`--read-priority on`) through the whole simulator, with the write buffer and
/// no deduplication: page 100 is written at 0 (on flash by 10 ms); a 64-page write at 10 ms fills
/// both planes' queues (programs of 242 us each, one shared bus); page 100 is read at 10.1 ms.
/// Without priority the read's transfer waits for every program transfer issued before it
/// (several ms); with it the read waits only for what is in progress at 10.1 ms (each plane's
/// current program ends by 10.284 ms, then tR and one transfer: under 400 us). Priority changes
/// timing only: the FTL's calls and the NAND operation counts are the same.
#[test]
fn read_priority_moves_a_host_read_ahead_and_changes_timing_only() {
    let rq = |t_us: u64, lpn: u64, pages: u64, op: Op| Request {
        time_ns: Some(t_us * 1000),
        op,
        offset: lpn * 2048,
        len: pages * 2048,
        content: None,
    };
    let reqs = || vec![rq(0, 100, 1, Op::Write), rq(10_000, 0, 64, Op::Write), rq(10_100, 100, 1, Op::Read)];
    let run = |priority: bool| {
        let mut cfg = config("dedup");
        cfg.features = vec![];
        cfg.open_loop = true;
        cfg.write_buffer_bytes = Some(128 * 2048);
        cfg.device.read_priority = priority;
        simulate(&cfg, reqs().into_iter(), &mut |_| {}).unwrap()
    };
    let (mut off, mut on) = (run(false), run(true));
    let (r_off, r_on) = (off.read_latency.sorted()[0], on.read_latency.sorted()[0]);
    assert!(r_off > 1_000_000, "without priority the read queues behind the programs: {r_off} ns");
    assert!(r_on < 400_000, "with priority it waits only for the programs in progress: {r_on} ns");
    let (a, b) = (&off.report, &on.report);
    assert_eq!(a.host_read_pages, 1, "the read went to flash");
    assert_eq!(
        (a.host_read_pages, a.host_write_pages, a.nand_reads, a.nand_programs, a.nand_erases),
        (b.host_read_pages, b.host_write_pages, b.nand_reads, b.nand_programs, b.nand_erases)
    );
    assert!(!off.report.features.contains_key("read_priority"));
    let rp = &on.report.features["read_priority"];
    assert_eq!(rp["prioritized_reads"], 1, "{rp}");
    assert!(f(rp, "operations_moved_later") > 0.0, "{rp}");
    assert!(!a.device.read_priority && b.device.read_priority);
}

/// Idle-time reorganisation of the fingerprint store: 600 distinct one-page writes 1 ms apart,
/// a 300 ms idle gap, then 600 writes of the same contents to other pages. The trace has exactly
/// one gap of at least 100 ms after writes, so exactly one reorganisation runs; it keeps the
/// resident set (every phase-2 write still deduplicates: the same rate as without it) and, the
/// segment's 5 buckets sorted across, bucket-level binary search needs fewer comparisons than
/// the scan of buckets filled in arrival order (the paper's Figure 12).
#[test]
fn idle_time_reorganisation_keeps_hits_and_cuts_comparisons() {
    let reqs = || {
        let w = |t_ms: u64, lpn: u64, c: u64| Request {
            time_ns: Some(t_ms * 1_000_000),
            op: Op::Write,
            offset: lpn * 2048,
            len: 2048,
            content: Some(vec![c]),
        };
        let first = (0..600).map(move |i| w(i, i, 1000 + i));
        let second = (0..600).map(move |i| w(900 + i, 600 + i, 1000 + i));
        first.chain(second)
    };
    let run = |opts: &str| {
        let mut cfg = config(opts);
        cfg.open_loop = true;
        simulate(&cfg, reqs(), &mut |_| {}).unwrap().report.features["dedup"].clone()
    };
    let plain = run("dedup:nosample:noprehash:segments=1");
    let sorted = run("dedup:nosample:noprehash:segments=1:reorg=sorted");
    let (p, s) = (&plain["fingerprint_store"], &sorted["fingerprint_store"]);
    assert_eq!(p["reorganizations"], 0);
    assert_eq!(s["reorganizations"], 1, "{s}");
    assert_eq!(f(&plain, "dedup_rate"), 0.5, "{plain}");
    assert_eq!(f(&sorted, "dedup_rate"), 0.5, "{sorted}");
    assert_eq!(p["lookups"], s["lookups"]);
    assert!(f(s, "comparisons") < f(p, "comparisons") * 0.8, "{p} {s}");
}

/// The out-of-line workload: 200 distinct one-page writes at t=0, the same 200 contents to pages
/// 200..400 at 1 ms, then `reads` reads of page 0 from 2 ms on, `gap_ns` apart; run open loop
/// with the dynamic switch (`buffer=1`, so the copies are left to out-of-line deduplication) and
/// the dedup options `opts` added.
fn ool_run(gap_ns: u64, reads: u64, opts: &str) -> SimOutput {
    let w = |t_ns: u64, lpn: u64, c: u64| Request {
        time_ns: Some(t_ns),
        op: Op::Write,
        offset: lpn * 2048,
        len: 2048,
        content: Some(vec![c]),
    };
    let mut reqs: Vec<Request> = (0..200).map(|i| w(0, i, 1000 + i)).collect();
    reqs.extend((0..200).map(|i| w(1_000_000, 200 + i, 1000 + i)));
    reqs.extend((0..reads).map(|k| Request {
        time_ns: Some(2_000_000 + k * gap_ns),
        op: Op::Read,
        offset: 0,
        len: 2048,
        content: None,
    }));
    let mut cfg = config(&format!("dedup:nosample:switch:buffer=1{opts}"));
    cfg.open_loop = true;
    simulate(&cfg, reqs.into_iter(), &mut |_| {}).unwrap()
}

/// A counter of a report.
fn u(o: &serde_json::Value, k: &str) -> u64 {
    o[k].as_u64().unwrap_or_else(|| panic!("{k} in {o}"))
}

/// Idle-time out-of-line passes stop at a request's arrival and resume in the next gap, and
/// their sort runs are charged as flash pages. 200 distinct one-page writes, then the same 200
/// contents to 200 other pages, in two bursts with the dynamic switch (`buffer=1`): every write
/// but the first finds the buffer full and is not probed, so the 200 copies are left to
/// out-of-line deduplication. Then reads of a written page arrive 3 ms apart (gaps of >= 1 ms
/// start a pass; a pass needs several gaps), or once after a 1 s gap. Either way the passes
/// coalesce each copy with its original (200); with short gaps they stop at arrivals (aborts),
/// and a read waits at most for the one unit of work in flight, not for the rest of the pass.
/// Sort memory of 100 records: the first pass's 400 records fill 4 runs of 100 x 24 B = 2 pages
/// of 2 KiB each, the final pass's 200 records 2 runs: 12 run pages written and 12 read back.
#[test]
fn out_of_line_passes_stop_at_arrivals_and_charge_their_runs() {
    let run = |gap_ns: u64, reads: u64, opts: &str| {
        let mut out = ool_run(gap_ns, reads, opts);
        let reads: u64 = out.read_latency.sorted().iter().sum();
        (out.report.features["dedup"]["out_of_line"].clone(), reads)
    };
    let passes = ":idle=1:oolmem=100";
    let (short, short_reads) = run(3_000_000, 60, passes);
    let (_, no_pass_reads) = run(3_000_000, 60, "");
    let (long, _) = run(1_000_000_000, 2, passes);
    assert_eq!(u(&long, "aborts"), 0, "{long}");
    assert!(u(&short, "aborts") > 1, "{short}");
    for o in [&short, &long] {
        assert_eq!(u(o, "coalesced"), 200, "{o}");
        assert_eq!(u(o, "refused"), 0, "{o}");
        assert_eq!((u(o, "run_pages_written"), u(o, "run_pages_read")), (12, 12), "{o}");
    }
    // Each abort delays one read by at most the unit in flight (well under 1 ms here); a pass
    // that ran on would delay the read after its first gap by the rest of the pass (tens of ms).
    let added = short_reads.saturating_sub(no_pass_reads);
    assert!(added < u(&short, "aborts") * 1_000_000, "reads waited {added} ns more: {short}");
}

/// Out-of-line sort runs really on flash (`oolflash`) against the model (`ool`): the workload of
/// the test above (200 copies left to out-of-line deduplication, sort memory of 100 records,
/// reads 3 ms apart so that passes stop and resume, also in their merge). Both coalesce the same
/// 200 pages with the same 12 run pages written and read; with runs on flash those 12 pages are
/// FTL programs and reads (12 more of each at least than the model; GC may add programs), the
/// host's writes are the same, and the scratch range ends trimmed (the same live pages).
#[test]
fn out_of_line_runs_on_flash_match_the_model_and_are_real_io() {
    let run = |opts: &str| {
        let out = ool_run(3_000_000, 60, &format!(":idle=1:oolmem=100{opts}"));
        let r = serde_json::to_value(&out.report).unwrap();
        (r["features"]["dedup"].clone(), r)
    };
    let (model, mr) = run("");
    let (flash, fr) = run(":oolflash");
    let (mo, fo) = (&model["out_of_line"], &flash["out_of_line"]);
    for k in ["coalesced", "duplicate_groups", "pages_scanned", "runs", "live_after"] {
        assert_eq!(u(fo, k), u(mo, k), "{k}: {mo} {fo}");
    }
    assert_eq!((u(fo, "coalesced"), u(fo, "refused")), (200, 0), "{fo}");
    assert_eq!((u(fo, "run_pages_written"), u(fo, "run_pages_read")), (12, 12), "{fo}");
    assert!(u(fo, "aborts_in_merge") >= 1, "{fo}");
    for k in ["live_physical_pages", "mapped_logical_pages", "unprobed_pages"] {
        assert_eq!(u(&flash, k), u(&model, k), "{k}: {model} {flash}");
    }
    assert_eq!(u(&fr, "host_write_pages"), u(&mr, "host_write_pages"));
    assert!(u(&fr, "nand_programs") >= u(&mr, "nand_programs") + 12, "{fr}\n{mr}");
    assert!(u(&fr, "nand_reads") >= u(&mr, "nand_reads") + 12, "{fr}\n{mr}");
}
