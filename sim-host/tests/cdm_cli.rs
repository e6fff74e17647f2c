//! `ftl-sim` with the NV cache (feature `cdm`): the flags turn it on, the report carries a `cdm`
//! object whose counters agree with the report's own, `compare` runs no cache, NVM-basic and CDM
//! side by side, and bad input gives a clear message and a non-zero exit.

use std::process::Command;

use serde_json::Value;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_ftl-sim"))
}

fn json_of(args: &[&str], name: &str) -> Value {
    let path = std::env::temp_dir().join(format!("ftl-sim-cdm-{}-{name}.json", std::process::id()));
    let out = bin().args(args).args(["--quiet", "--json", path.to_str().unwrap()]).output().unwrap();
    assert!(out.status.success(), "{name}: {}", String::from_utf8_lossy(&out.stderr));
    let v = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let _ = std::fs::remove_file(&path);
    v
}

const WORKLOAD: [&str; 12] = [
    "--workload",
    "zipf:0.9",
    "--read-ratio",
    "0.6",
    "--writes",
    "60000",
    "--device",
    "small",
    "--precondition",
    "seq",
    "--nv-cache-percent",
    "5",
];

#[test]
fn run_reports_the_cache() {
    let r = json_of(&[&["run"][..], &WORKLOAD[..], &["--nv-policy", "cdm"]].concat(), "run");
    assert_eq!(r["label"], "cdm");
    let c = &r["features"]["cdm"];
    assert_eq!(c["policy"], "cdm");
    assert_eq!(c["read_fill"], "lru");
    // 5% of the small device's logical pages.
    let logical = r["device"]["logical_pages"].as_u64().unwrap();
    assert_eq!(c["cache_pages"].as_u64().unwrap(), (logical * 5).div_ceil(100));
    let hits = c["read_hits"].as_u64().unwrap();
    let misses = c["read_misses"].as_u64().unwrap();
    assert!(hits > 0 && c["removable_drops"].as_u64().unwrap() > 0);
    // Every host page read is a hit, a miss, or a never-written page (neither).
    assert!(hits + misses <= r["host_read_pages"].as_u64().unwrap());
    // Every host page written enters the cache.
    assert_eq!(c["write_inserts"], r["host_write_pages"]);
}

#[test]
fn compare_runs_none_basic_and_cdm() {
    let v = json_of(
        &[
            &["compare"][..],
            &WORKLOAD[..],
            &["--configs", "baseline,nvm-basic,cdm", "--mount-pool-blocks", "0"],
        ]
        .concat(),
        "cmp",
    );
    let r = v.as_array().unwrap();
    let labels: Vec<&str> = r.iter().map(|x| x["label"].as_str().unwrap()).collect();
    assert_eq!(labels, ["baseline", "nvm-basic", "cdm"]);
    assert!(r[0]["features"].get("cdm").is_none());
    assert_eq!(r[1]["features"]["cdm"]["policy"], "basic");
    assert_eq!(r[1]["nand_programs"], r[0]["nand_programs"]);
    assert_eq!(r[2]["features"]["cdm"]["policy"], "cdm");
}

#[test]
fn bad_cache_flags_are_refused() {
    for (args, msg) in [
        (&["--nv-cache-pages", "8", "--nv-policy", "lru"][..], "unknown --nv-policy 'lru'"),
        (&["--nv-cache-pages", "0"][..], "--nv-cache-pages must be at least 1"),
        (&["--nv-cache-percent", "150"][..], "--nv-cache-percent 150"),
        (&["--features", "cdm"][..], "needs --nv-cache-pages"),
        (&["--nv-policy", "basic"][..], "--nv-policy needs the NV cache"),
        (&["--nv-cache-pages", "8", "--nv-read-fill", "mru"][..], "unknown --nv-read-fill 'mru'"),
    ] {
        let out = bin().args(["run", "--workload", "uniform", "--writes", "10"]).args(args).output().unwrap();
        assert!(!out.status.success(), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(msg), "{args:?}: {err}");
    }
}
