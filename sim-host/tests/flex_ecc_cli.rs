//! `ftl-sim --features flex-ecc` end to end: the same workload through the cache manager on a
//! FlexECC and on an all-BCH device; the reports' counters are consistent with each other and with
//! the mechanism (CRC pages only on FlexECC, cheaper host reads there, corrupt CRC pages served
//! from the disk or prefetched under bit errors), and bad input fails with a clear message.

use std::process::Command;

use serde_json::Value;

fn run(name: &str, args: &[&str]) -> Value {
    let dir = std::env::temp_dir().join(format!("ftl-sim-flex-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let json = dir.join("r.json");
    let out = Command::new(env!("CARGO_BIN_EXE_ftl-sim"))
        .args([
            "run",
            "--device",
            "small",
            "--features",
            "flex-ecc",
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
    fails_with(&["--classifier", "size"], "flex-ecc runs alone");
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
