//! `ftl-sim` end to end: runs on the shared traces and on Zipf workloads produce a consistent JSON
//! report and non-trivial plots; bad input gives a clear message and a non-zero exit.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_ftl-sim"))
}

fn traces() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../testdata/traces")
}

fn out_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("ftl-sim-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Runs `ftl-sim run ARGS --json --plots` and checks the report and the plot files.
fn run_and_check(name: &str, args: &[&str]) -> Value {
    let dir = out_dir(name);
    let json = dir.join("report.json");
    let plots = dir.join("plots");
    let out = bin()
        .arg("run")
        .args(args)
        .args(["--quiet", "--json", json.to_str().unwrap(), "--plots", plots.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{name}: {}", String::from_utf8_lossy(&out.stderr));
    let r: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    for key in [
        "host_read_pages",
        "host_write_pages",
        "nand_reads",
        "nand_programs",
        "nand_erases",
        "gc_page_copies",
        "waf",
        "erase_count_min",
        "erase_count_max",
        "erase_count_mean",
        "sim_wall_seconds",
        "sim_requests_per_second",
        "features",
    ] {
        assert!(r.get(key).is_some(), "{name}: key {key} missing");
    }
    for lat in ["read_latency_us", "write_latency_us"] {
        for k in ["mean", "p50", "p99", "p999", "stddev"] {
            assert!(r[lat][k].is_number(), "{name}: {lat}.{k} missing");
        }
        let l = &r[lat];
        if l["count"].as_u64().unwrap() > 0 {
            let (p50, p99, p999) =
                (l["p50"].as_f64().unwrap(), l["p99"].as_f64().unwrap(), l["p999"].as_f64().unwrap());
            assert!(p50 <= p99 && p99 <= p999, "{name}: percentiles out of order");
        }
    }
    let hw = r["host_write_pages"].as_u64().unwrap();
    let programs = r["nand_programs"].as_u64().unwrap();
    assert!(hw > 0, "{name}: no writes");
    assert!((r["waf"].as_f64().unwrap() - programs as f64 / hw as f64).abs() < 1e-9, "{name}: waf");
    // Every host page is programmed once at least, unless deduplication shared it.
    if r["features"]["dedup"].is_null() {
        assert!(programs >= hw + r["gc_page_copies"].as_u64().unwrap(), "{name}: programs");
    }
    // Erase counts are per block wear leveling covers (good blocks outside the anchor) during
    // the run: their sum is nand_erases less the anchor's erases.
    let blocks = r["device"]["blocks"].as_f64().unwrap() - ftl_core::anchor::ANCHOR_BLOCKS as f64;
    let sum = r["erase_count_mean"].as_f64().unwrap() * blocks;
    let leveled = r["nand_erases"].as_f64().unwrap() - r["anchor_erases"].as_f64().unwrap();
    assert!(
        (sum - leveled).abs() < 0.5,
        "{name}: erase counts sum {sum}, erases outside the anchor {leveled}"
    );
    assert!(r["erase_count_min"].as_u64().unwrap() <= r["erase_count_max"].as_u64().unwrap());
    for plot in ["erase_histogram", "waf_over_time", "latency_cdf"] {
        let png = std::fs::read(plots.join(format!("{plot}.png"))).unwrap();
        assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n", "{name}: {plot}.png is not a PNG");
        assert!(png.len() > 10_000, "{name}: {plot}.png is only {} bytes", png.len());
        let svg = std::fs::read_to_string(plots.join(format!("{plot}.svg"))).unwrap();
        assert!(svg.contains("<svg") && svg.len() > 5_000, "{name}: {plot}.svg looks empty");
        assert!(svg.contains("<text"), "{name}: {plot}.svg has no labels");
        assert!(svg.contains("<polyline") || svg.contains("<rect"), "{name}: {plot}.svg draws nothing");
    }
    let _ = std::fs::remove_dir_all(&dir);
    r
}

#[test]
fn msr_trace() {
    let t = traces().join("msr_raw_samples/msr-cambridge1-sample.csv");
    let r = run_and_check(
        "msr",
        &[
            "--trace",
            t.to_str().unwrap(),
            "--format",
            "msr",
            "--device",
            "small",
            "--compact",
            "--loop",
            "20",
        ],
    );
    assert_eq!(r["requests"].as_u64(), Some(20_000));
}

#[test]
fn heimdall_trace() {
    let t = traces().join("msr_cuts_heimdall/msr.cut.per_10k.most_thpt_rand_iops.1006.trace");
    let r = run_and_check(
        "heimdall",
        &["--trace", t.to_str().unwrap(), "--device", "anchor", "--compact", "--precondition", "seq"],
    );
    assert_eq!(r["requests"].as_u64(), Some(10_000));
}

#[test]
fn tpcc_trace() {
    let t = traces().join("mqsim_umass_tpcc_websearch/tpcc-small.trace");
    let r = run_and_check(
        "tpcc",
        &[
            "--trace",
            t.to_str().unwrap(),
            "--format",
            "disksim",
            "--compact",
            "--loop",
            "3",
            "--closed-loop",
            "--queue-depth",
            "4",
        ],
    );
    assert_eq!(r["requests"].as_u64(), Some(3 * 6_999));
    assert!(r["rmw_pages"].as_u64().unwrap() > 0, "TPC-C has unaligned writes");
}

#[test]
fn zipf_workloads() {
    let a1 = run_and_check("zipf1", &["--workload", "zipf:1", "--writes", "200000", "--device", "small"]);
    let a2 = run_and_check("zipf2", &["--workload", "zipf:2", "--writes", "200000", "--device", "small"]);
    assert_eq!(a1["host_write_pages"].as_u64(), Some(200_000));
    // Zipf 2 concentrates writes on far fewer pages: less to copy, lower write amplification.
    assert!(a2["waf"].as_f64().unwrap() < a1["waf"].as_f64().unwrap());
}

/// `--copy-back checked` without FlexECC turns the FTL's copy-back GC on (every copy read out and
/// checked) and the emulator charges each one: the same operations as without it (GC's decisions
/// do not depend on time), the moves counted, and the device busy for less time.
#[test]
fn copy_back_without_flex_ecc_runs_the_ftls_copy_backs() {
    let args = ["--workload", "zipf:1", "--writes", "60000", "--device", "small"];
    let off = run_and_check("cb-off", &args);
    let on = run_and_check("cb-on", &[&args[..], &["--copy-back", "checked"]].concat());
    assert_eq!(off["gc_copy_backs"].as_u64(), Some(0));
    for k in ["nand_reads", "nand_programs", "nand_erases", "gc_page_copies"] {
        assert_eq!(on[k], off[k], "{k}");
    }
    let (cb, copies) = (on["gc_copy_backs"].as_u64().unwrap(), on["gc_page_copies"].as_u64().unwrap());
    assert!(cb > 0 && cb <= copies, "{cb} copy-backs of {copies} GC copies");
    let mean = |r: &Value| r["write_latency_us"]["mean"].as_f64().unwrap();
    assert!(mean(&on) < mean(&off), "write response {} vs {} us", mean(&on), mean(&off));
}

#[test]
fn compare_prints_relative_metrics_and_plots() {
    let dir = out_dir("compare");
    let out = bin()
        .args(["compare", "--workload", "hotcold:20/80", "--writes", "100000", "--device", "small"])
        .args(["--configs", "baseline,baseline@size", "--plots", dir.to_str().unwrap()])
        .args(["--json", dir.join("c.json").to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("erasures") && text.contains("1.000x"), "{text}");
    let reports: Value = serde_json::from_str(&std::fs::read_to_string(dir.join("c.json")).unwrap()).unwrap();
    assert_eq!(reports.as_array().map(|a| a.len()), Some(2));
    for f in ["compare_relative.png", "compare_relative.svg", "compare_write_cdf.png"] {
        assert!(std::fs::metadata(dir.join(f)).unwrap().len() > 5_000, "{f}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

fn fails_with(args: &[&str], needle: &str) {
    let out = bin().args(args).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{args:?} succeeded");
    assert!(err.contains(needle), "{args:?}: stderr {err:?} lacks {needle:?}");
}

#[test]
fn bad_input_gets_a_clear_message_and_a_failure_exit() {
    fails_with(&["run", "--workload", "uniform", "--device", "nope"], "unknown device preset");
    fails_with(&["run", "--workload", "uniform", "--op=-3"], "--op");
    fails_with(&["run", "--workload", "uniform", "--op", "500"], "--op");
    fails_with(&["run", "--workload", "zipf:x"], "zipf");
    fails_with(&["run", "--workload", "uniform", "--read-ratio", "2"], "--read-ratio");
    fails_with(&["run", "--trace", "/nonexistent/trace.csv"], "/nonexistent/trace.csv");
    fails_with(&["run"], "--trace");
    fails_with(
        &["run", "--device", "wom", "--workload", "uniform", "--features", "wom,flex-ecc"],
        "a second write replaces the page codec",
    );
    // The default device programs pages in order: no second writes there.
    fails_with(&["run", "--workload", "uniform", "--features", "wom"], "--device wom");
    fails_with(&["run", "--workload", "uniform", "--classifier", "bogus"], "unknown classifier");
    fails_with(&["run", "--workload", "uniform", "--luns", "2", "--channels", "3"], "--channels 3");
    fails_with(&["run", "--workload", "uniform", "--channels", "0"], "--channels 0");
    fails_with(&["run", "--workload", "uniform", "--queue-depth", "0"], "--queue-depth 0");
    fails_with(&["run", "--workload", "uniform", "--luns-per-channel", "2"], "needs --channels");
    let disagree =
        ["run", "--workload", "uniform", "--luns", "3", "--channels", "2", "--luns-per-channel", "2"];
    fails_with(&disagree, "--luns 3 disagrees");
    fails_with(
        &["run", "--workload", "uniform", "--channels", "2", "--luns-per-channel", "0"],
        "--luns-per-channel 0",
    );
    fails_with(&["run", "--workload", "uniform", "--scheduling", "dies"], "unknown scheduling 'dies'");
    fails_with(&["run", "--workload", "uniform", "--device", "nope"], "wom-ssd, flexecc");
    let t = traces().join("msr_raw_samples/msr-cambridge1-sample.csv");
    fails_with(&["run", "--trace", t.to_str().unwrap(), "--device", "small"], "--compact or --wrap");
    // A malformed line stops the run with file:line, unless --skip-bad.
    let dir = out_dir("bad");
    let bad = dir.join("bad.csv");
    std::fs::write(&bad, "128166372003061629,hm,0,Write,4096,4096,100\nnot,a,valid,line\n").unwrap();
    fails_with(&["run", "--trace", bad.to_str().unwrap(), "--format", "msr", "--compact"], "bad.csv:2:");
    let out = bin()
        .args(["run", "--trace", bad.to_str().unwrap(), "--format", "msr", "--compact", "--skip-bad"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("(1 skipped lines)"));
    let _ = std::fs::remove_dir_all(&dir);
}

/// Device-level IOPS of 4 KiB random reads with LUN queues on the flexecc preset's chip (tR 25 us,
/// 1.25 ns per byte), against the timing model's arithmetic: a saturated LUN completes one read
/// per tR + transfer (4096 data bytes plus the few spare bytes the FTL reads: 30.12-30.3 us),
/// whatever the queue depth once it is kept busy; at queue depth 1 more LUNs add nothing; at
/// queue depth 16, 4 LUNs on 2 channels give at least 3x one LUN (issue #20's target).
#[test]
fn random_read_iops_scale_over_luns_with_lun_queues() {
    let dir = out_dir("parallel");
    let iops = |luns: &str, channels: &str, qd: &str| -> f64 {
        let json = dir.join(format!("{luns}-{channels}-{qd}.json"));
        let args = ["run", "--device", "flexecc", "--blocks", "512", "--luns", luns, "--channels", channels];
        let out = bin()
            .args(args)
            .args([
                "--scheduling",
                "luns",
                "--workload",
                "uniform",
                "--read-ratio",
                "0.9999",
                "--writes",
                "3",
            ])
            .args(["--queue-depth", qd, "--precondition", "seq", "--quiet", "--json"])
            .arg(&json)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let r: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        assert_eq!(
            (r["device"]["luns"].as_u64(), r["device"]["scheduling"].as_str()),
            (luns.parse().ok(), Some("luns"))
        );
        r["requests"].as_f64().unwrap() / r["simulated_seconds"].as_f64().unwrap()
    };
    let (slowest, fastest) = (1e9 / 30_300.0, 1e9 / 30_120.0);
    let one = iops("1", "1", "16");
    assert!((slowest * 0.99..fastest * 1.01).contains(&one), "one LUN at QD 16: {one}");
    let serial = iops("4", "2", "1");
    assert!((slowest * 0.99..fastest * 1.01).contains(&serial), "4 LUNs at QD 1: {serial}");
    let four = iops("4", "2", "16");
    assert!(four >= 3.0 * one, "4 LUNs on 2 channels: {four} vs one LUN {one}");
}

/// Techniques stack in one run (issue #17): dedup with the NV cache (both report their work),
/// second writes under ETI's classifier and with the NV cache (they happen); a pair the FTL
/// refuses fails with the library's reason.
#[test]
fn stacked_features_run_and_refusals_name_their_reason() {
    let r = run_and_check(
        "stack-dedup-cdm",
        &[
            "--workload",
            "zipf:1",
            "--writes",
            "20000",
            "--dup-ratio",
            "0.4",
            "--features",
            "dedup+cdm",
            "--nv-cache-pages",
            "256",
        ],
    );
    let f = &r["features"];
    assert!(f["dedup"]["hits"].as_u64().unwrap() > 1000, "{f}");
    assert_eq!(f["cdm"]["write_inserts"].as_u64(), r["host_write_pages"].as_u64(), "{f}");
    let wom_run = |name: &str, extra: &[&str]| {
        let args = [&["--device", "wom", "--workload", "zipf:1", "--writes", "200000"][..], extra].concat();
        run_and_check(name, &args)
    };
    let r = wom_run("stack-wom-eti", &["--features", "wom", "--classifier", "eti"]);
    assert!(r["features"]["wom"]["second_writes"].as_u64().unwrap() > 1000, "{}", r["features"]);
    assert!(r["features"]["eti"]["requests"].as_u64().unwrap() > 0, "{}", r["features"]);
    // wom stacks with the NV cache: both report, and second writes still happen.
    let r = wom_run("stack-wom-cdm", &["--features", "wom+cdm", "--nv-cache-pages", "64"]);
    assert!(r["features"]["wom"]["second_writes"].as_u64().unwrap() > 100, "{}", r["features"]);
    assert!(r["features"]["cdm"]["write_inserts"].as_u64().unwrap() > 0, "{}", r["features"]);
    // wom stacks with dedup: duplicate content is shared, hot unique pages are second-written.
    let r = wom_run("stack-wom-dedup", &["--dup-ratio", "0.3", "--features", "wom+dedup"]);
    assert!(r["features"]["wom"]["second_writes"].as_u64().unwrap() > 100, "{}", r["features"]);
    assert!(r["features"]["dedup"]["hits"].as_u64().unwrap() > 1000, "{}", r["features"]);
}
