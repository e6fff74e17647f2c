//! `ftl-sim --features flex-ecc` end to end: the same workload through the cache manager on a
//! FlexECC and on an all-BCH device; the reports' counters are consistent with each other and with
//! the mechanism (CRC pages only on FlexECC, cheaper host reads there, corrupt CRC pages served
//! from the disk or prefetched under bit errors), and bad input fails with a clear message.

use std::process::Command;

use serde_json::Value;

fn run(name: &str, args: &[&str]) -> Value {
    run_stack(name, "flex-ecc", args)
}

/// [`run`] with `features` (flex-ecc and what it stacks with).
fn run_stack(name: &str, features: &str, args: &[&str]) -> Value {
    let dir = std::env::temp_dir().join(format!("ftl-sim-flex-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let json = dir.join("r.json");
    let out = Command::new(env!("CARGO_BIN_EXE_ftl-sim"))
        .args([
            "run",
            "--device",
            "small",
            "--features",
            features,
            "--workload",
            "zipf:1",
            "--writes",
            "2000",
        ])
        .args([
            "--read-ratio",
            "0.9",
            "--interarrival-us",
            "1000",
            "--quiet",
            "--json",
            json.to_str().unwrap(),
        ])
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "{name}: {}", String::from_utf8_lossy(&out.stderr));
    let r: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    r
}

fn u(v: &Value, k: &str) -> u64 {
    v["features"]["flex_ecc"][k].as_u64().unwrap_or_else(|| panic!("{k} missing"))
}

fn mean(v: &Value, k: &str) -> f64 {
    v["features"]["flex_ecc"][k]["mean"].as_f64().unwrap()
}

#[test]
fn flex_and_all_bch_see_the_same_cache_and_flex_reads_crc_pages_cheaper() {
    let b = run("bch", &["--ecc", "all-bch"]);
    let x = run("flex", &["--ecc", "flex"]);
    for k in ["read_hits", "read_misses", "write_hits", "write_misses", "flush_reads", "dirty_writes"] {
        assert_eq!(u(&b, k), u(&x, k), "{k}");
    }
    for r in [&b, &x] {
        assert_eq!(u(r, "bch_reads") + u(r, "crc_reads") + u(r, "read_inflight"), u(r, "read_hits"));
        assert_eq!(r["host_read_pages"].as_u64().unwrap(), u(r, "read_hits") + u(r, "read_misses"));
        // Every miss is filled by a clean write unless its slot was evicted or overwritten
        // before the disk delivered it.
        assert!(u(r, "clean_writes") <= u(r, "read_misses"));
        assert_eq!(u(r, "crc_corrupt_served_from_disk") + u(r, "bch_uncorrectable_dirty"), 0);
        // WAF as every other run reports it: NAND programs per host page written (not per page
        // the cache manager wrote to the FTL, which adds the clean fills).
        let programs = r["nand_programs"].as_u64().unwrap() as f64;
        let hw = r["host_write_pages"].as_u64().unwrap() as f64;
        assert_eq!(hw as u64, u(r, "write_hits") + u(r, "write_misses"));
        assert!((r["waf"].as_f64().unwrap() - programs / hw).abs() < 1e-9, "waf {}", r["waf"]);
    }
    assert_eq!(u(&b, "crc_reads"), 0);
    assert_eq!(u(&b, "gc_bch_to_crc"), 0);
    assert!(u(&x, "crc_reads") > 0);
    // A CRC read saves (t - 1) x T_crc of decoding; the device's host reads are cheaper on
    // average.
    assert!(mean(&x, "device_read_latency_us") < mean(&b, "device_read_latency_us"));
    // Without the scrubber's verifications, FlexECC decodes for less time in all.
    let quiet = run("flex-noscrub", &["--ecc", "flex", "--no-scrub"]);
    let decode = |v: &Value| v["features"]["flex_ecc"]["decode_ms"].as_f64().unwrap();
    assert!(decode(&quiet) < decode(&b), "{} vs {}", decode(&quiet), decode(&b));
}

/// Issue #17: FlexECC's cache-manager front end drives the same stacked FTL as every other run:
/// with dedup, the NV cache (CDM) and ETI the cache manager sees the same host pages, the host
/// reads it serves add up with the NV cache's, and each technique does its part (fewer programs
/// than FlexECC alone with half the written contents duplicates).
#[test]
fn flex_ecc_stacks_with_dedup_cdm_and_eti() {
    let common = ["--ecc", "flex", "--dup-ratio", "0.5"];
    let alone = run("stack-alone", &common);
    let s =
        run_stack("stack", "dedup,flex-ecc,cdm,eti", &[&common[..], &["--nv-cache-percent", "10"]].concat());
    for k in ["read_hits", "read_misses", "write_hits", "write_misses", "dirty_writes"] {
        assert_eq!(u(&alone, k), u(&s, k), "{k}");
    }
    assert_eq!(
        u(&s, "bch_reads") + u(&s, "crc_reads") + u(&s, "nv_cache_reads") + u(&s, "read_inflight"),
        u(&s, "read_hits")
    );
    assert!(u(&s, "nv_cache_reads") > 0 && u(&alone, "nv_cache_reads") == 0);
    for t in ["dedup", "cdm", "eti", "flex_ecc"] {
        assert!(s["features"][t].is_object(), "{t} missing from {}", s["features"]);
    }
    // Dedup finds the duplicates still live (the simulator's oracle tracks every page's content).
    let d = &s["features"]["dedup"];
    assert!(
        d["dedup_rate"].as_f64().unwrap() > 0.0 && d["found_of_live_oracle"].as_f64().unwrap() >= 0.9,
        "{d}"
    );
    let programs = |v: &Value| v["nand_programs"].as_u64().unwrap();
    assert!(programs(&s) < programs(&alone), "stacked {} vs alone {}", programs(&s), programs(&alone));
    let waf = programs(&s) as f64 / s["host_write_pages"].as_u64().unwrap() as f64;
    assert!((s["waf"].as_f64().unwrap() - waf).abs() < 1e-9);
}

#[test]
fn corrupt_crc_pages_are_served_from_disk_or_prefetched() {
    let x = run("rber", &["--ecc", "flex", "--rber", "1e-5"]);
    assert!(u(&x, "raw_bit_errors") > 0);
    assert!(u(&x, "scrub_verified") > 0);
    assert!(u(&x, "crc_corrupt_served_from_disk") + u(&x, "scrub_prefetched") > 0);
    // t = 6 per 512 B codeword corrects everything at this rate: no dirty data lost.
    assert_eq!(u(&x, "bch_uncorrectable_dirty"), 0);
    let quiet = run("noscrub", &["--ecc", "flex", "--rber", "1e-5", "--no-scrub"]);
    assert_eq!(u(&quiet, "scrub_verified") + u(&quiet, "scrub_prefetched"), 0);
}

#[test]
fn bad_flex_ecc_input_fails_clearly() {
    let fails_with = |args: &[&str], needle: &str| {
        let out = Command::new(env!("CARGO_BIN_EXE_ftl-sim"))
            .args(["run", "--device", "small", "--workload", "uniform", "--features", "flex-ecc"])
            .args(args)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} succeeded");
        assert!(err.contains(needle), "{args:?}: stderr {err:?} lacks {needle:?}");
    };
    fails_with(&["--ecc", "bogus"], "unknown --ecc");
    fails_with(&["--rber", "2"], "--rber");
    fails_with(&["--ecc-t", "0"], "--ecc-t");
    fails_with(&["--ecc-t", "6", "--refresh-threshold", "9"], "--refresh-threshold");
    fails_with(&["--cache-pages", "0"], "--cache-pages");
    fails_with(&["--disk-ms", "0"], "--disk-ms");
    fails_with(&["--working-set", "0.5"], "--working-set");
}

#[test]
fn compare_runs_both_devices() {
    let dir = std::env::temp_dir().join(format!("ftl-sim-flex-{}-compare", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let json = dir.join("c.json");
    let out = Command::new(env!("CARGO_BIN_EXE_ftl-sim"))
        .args([
            "compare",
            "--device",
            "small",
            "--workload",
            "zipf:1",
            "--writes",
            "1000",
            "--read-ratio",
            "0.9",
        ])
        .args(["--quiet", "--configs", "flex-ecc:all-bch,flex-ecc:flex", "--json", json.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let r: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let modes: Vec<&str> =
        r.as_array().unwrap().iter().map(|x| x["features"]["flex_ecc"]["mode"].as_str().unwrap()).collect();
    assert_eq!(modes, ["all-bch", "flex"]);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A Filebench-like workload on a 2-LUN flexecc device (whole device cached, so GC moves pages).
fn filebench(name: &str, args: &[&str]) -> Value {
    let dir = std::env::temp_dir().join(format!("ftl-sim-flexfb-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let json = dir.join("r.json");
    let out = Command::new(env!("CARGO_BIN_EXE_ftl-sim"))
        .args(["run", "--device", "flexecc", "--luns", "2", "--blocks", "256", "--scheduling", "luns"])
        .args(["--features", "flex-ecc", "--workload", "varmail", "--writes", "3000", "--arrival-us", "20"])
        .args(["--disk-queue", "off", "--cache-share", "1", "--quiet", "--json", json.to_str().unwrap()])
        // No mount pool: the allocator then takes any free block, and every GC move here stays in
        // its plane (with the pool a few cross planes when a plane's pool runs short).
        .args(["--mount-pool-blocks", "0"])
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "{name}: {}", String::from_utf8_lossy(&out.stderr));
    let r: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    r
}

#[test]
fn ioscale_stretches_filebench_times_and_copy_back_shortens_gc_moves() {
    let slow = filebench("io100", &["--ioscale", "100", "--copy-back", "checked"]);
    let requests = slow["requests"].as_f64().unwrap();
    // Poisson arrivals of mean 20 us x 100: the run lasts at least about requests x 2 ms.
    let span = slow["simulated_seconds"].as_f64().unwrap();
    assert!(span > 0.9 * requests * 2e-3, "{span} s for {requests} requests");
    let fast = filebench("io1", &["--ioscale", "1", "--copy-back", "checked"]);
    assert!(fast["simulated_seconds"].as_f64().unwrap() < span / 5.0);
    // Copy-back: every GC move stays in its plane here; per move it saves the page transfer in.
    let off = filebench("cb-off", &["--ioscale", "100", "--copy-back", "off"]);
    assert!(u(&slow, "gc_moves") > 0);
    assert_eq!(u(&slow, "gc_copy_backs"), u(&slow, "gc_moves"));
    assert_eq!(u(&off, "gc_copy_backs"), 0);
    // They are the FTL's own copy-backs (its counter), checked by its codec.
    assert_eq!(slow["gc_copy_backs"].as_u64(), Some(u(&slow, "gc_copy_backs")));
    assert_eq!(off["gc_copy_backs"].as_u64(), Some(0));
    // The same GC decisions (timing does not steer them; a copy-back takes the format the plain
    // move gives), each move cheaper.
    assert_eq!(u(&off, "gc_moves"), u(&slow, "gc_moves"));
    for k in ["gc_bch_to_crc", "gc_crc_moved", "gc_bch_moved"] {
        assert_eq!(u(&off, k), u(&slow, k), "{k}");
    }
    assert!(u(&slow, "gc_bch_to_crc") > 0);
    let gc = |v: &Value| v["features"]["flex_ecc"]["gc_time_ms"].as_f64().unwrap();
    assert!(gc(&slow) < gc(&off), "{} vs {}", gc(&slow), gc(&off));
    // CRC pages copied back unread: cheaper still.
    let direct = filebench("cb-direct", &["--ioscale", "100", "--copy-back", "crc-direct"]);
    assert!(u(&direct, "gc_unread_copy_backs") > 0);
    assert!(gc(&direct) < gc(&slow), "{} vs {}", gc(&direct), gc(&slow));
}

#[test]
fn bad_filebench_and_copy_back_input_fails_clearly() {
    let fails_with = |args: &[&str], needle: &str| {
        let out = Command::new(env!("CARGO_BIN_EXE_ftl-sim"))
            .args(["run", "--device", "small", "--features", "flex-ecc"])
            .args(args)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} succeeded");
        assert!(err.contains(needle), "{args:?}: stderr {err:?} lacks {needle:?}");
    };
    let wl = ["--workload", "uniform"];
    fails_with(&[&wl[..], &["--copy-back", "always"]].concat(), "unknown --copy-back");
    fails_with(&[&wl[..], &["--decode-model", "gpu"]].concat(), "--decode-model gpu");
    fails_with(&[&wl[..], &["--disk-queue", "maybe"]].concat(), "--disk-queue maybe");
    fails_with(&[&wl[..], &["--cache-share", "1.5"]].concat(), "--cache-share 1.5");
    fails_with(&[&wl[..], &["--ioscale=-1"]].concat(), "--ioscale -1");
    fails_with(&[&wl[..], &["--ioscale", "0"]].concat(), "--ioscale 0");
    fails_with(&["--workload", "varmail", "--arrival-us", "0"], "--arrival-us 0");
    fails_with(&["--workload", "varmail", "--writes", "0"], "--writes");
    fails_with(&["--workload", "mailserverx"], "expected uniform");
}

#[test]
fn filebench_without_a_cache_fits_the_device() {
    for w in ["fileserver", "webserver", "varmail", "oltp"] {
        let out = Command::new(env!("CARGO_BIN_EXE_ftl-sim"))
            .args(["run", "--device", "small", "--workload", w, "--writes", "300", "--quiet"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{w}: {}", String::from_utf8_lossy(&out.stderr));
    }
}
