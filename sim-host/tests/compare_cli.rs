//! `ftl-sim compare`: every configuration's row is what `ftl-sim run` reports for the same
//! settings (all but the wall-clock fields), a combination the simulator does not run shows its
//! refusal in its row while the others run, and a configuration that does not parse fails the
//! whole command with a clear message.

use std::process::Command;

use serde_json::Value;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_ftl-sim"))
}

/// A small second-write-capable device (so that every technique runs on it) under Zipf 1 with
/// duplicate content.
const WORKLOAD: [&str; 16] = [
    "--device",
    "wom",
    "--blocks",
    "256",
    "--workload",
    "zipf:1",
    "--read-ratio",
    "0.5",
    "--dup-ratio",
    "0.3",
    "--writes",
    "8000",
    "--precondition",
    "seq",
    "--seed",
    "3",
];

fn temp(name: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("ftl-sim-compare-{}-{name}.json", std::process::id()))
}

/// Runs `ftl-sim ARGS --quiet --json FILE`; the JSON and the standard output.
fn json_of(args: &[&str], name: &str) -> (Value, String) {
    let path = temp(name);
    let out = bin().args(args).args(["--json", path.to_str().unwrap()]).output().unwrap();
    assert!(out.status.success(), "{name}: {}", String::from_utf8_lossy(&out.stderr));
    let v = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let _ = std::fs::remove_file(&path);
    (v, String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The report without the fields that measure the host's wall clock.
fn simulated(mut r: Value) -> Value {
    let o = r.as_object_mut().unwrap();
    for k in ["sim_wall_seconds", "sim_requests_per_second", "label"] {
        assert!(o.remove(k).is_some(), "{k} missing");
    }
    r
}

#[test]
fn each_row_equals_its_own_run() {
    let configs = [
        ("baseline", ""),
        ("eti", "eti"),
        ("wom", "wom"),
        ("dedup", "dedup"),
        ("cdm", "cdm"),
        ("flex-ecc", "flex-ecc"),
        ("dedup+cdm@eti", "dedup,cdm"),
    ];
    let list: Vec<&str> = configs.iter().map(|c| c.0).collect();
    let (rows, _) = json_of(
        &[
            &["compare"][..],
            &WORKLOAD[..],
            &["--quiet", "--nv-cache-percent", "5", "--configs", &list.join(",")],
        ]
        .concat(),
        "rows",
    );
    let rows = rows.as_array().unwrap();
    assert_eq!(rows.len(), configs.len());
    for (row, (label, features)) in rows.iter().zip(configs) {
        assert_eq!(row["label"], label);
        let mut args = vec!["run", "--quiet", "--features", features];
        args.extend(WORKLOAD);
        if features.contains("cdm") {
            args.extend(["--nv-cache-percent", "5"]);
        }
        if let Some((_, class)) = label.split_once('@') {
            args.extend(["--classifier", class]);
        }
        let (run, _) = json_of(&args, label);
        assert!(run["host_write_pages"].as_u64().unwrap() > 0, "{label}");
        assert_eq!(simulated(row.clone()), simulated(run), "{label}: compare's row differs from its run");
    }
    // The techniques do something here (the rows are not all the baseline's).
    let erases = |i: usize| rows[i]["nand_erases"].as_u64().unwrap();
    assert!(rows[3]["features"]["dedup"].is_object() && rows[4]["features"]["cdm"].is_object());
    assert!(erases(3) < erases(0), "dedup erases {} vs baseline {}", erases(3), erases(0));
}

#[test]
fn a_refused_combination_shows_its_reason_and_the_others_run() {
    let args =
        [&["compare"][..], &WORKLOAD[..], &["--configs", "baseline,wom+dedup,wom+flex-ecc,eti"]].concat();
    let (rows, text) = json_of(&args, "refused");
    let rows = rows.as_array().unwrap();
    let labels: Vec<&str> = rows.iter().map(|r| r["label"].as_str().unwrap()).collect();
    assert_eq!(labels, ["baseline", "wom+dedup", "wom+flex-ecc", "eti"]);
    // The FTL's own reason for wom with flex-ecc, passed on word for word.
    let wom_flex = ftl_core::Refusal::WomWithFlexEcc.reason();
    assert_eq!(rows[2]["refused"], wom_flex);
    for i in [0, 1, 3] {
        assert!(rows[i].get("refused").is_none() && rows[i]["host_write_pages"].as_u64().unwrap() > 0);
    }
    // wom with dedup runs both.
    assert!(
        rows[1]["features"]["wom"].is_object() && rows[1]["features"]["dedup"].is_object(),
        "{}",
        rows[1]
    );
    assert!(text.contains(&format!("wom+flex-ecc: refused: {wom_flex}")), "{text}");
    // `run` refuses the same combinations with the same messages; a technique on the cached map
    // too (the FTL's reason, before anything runs).
    for (features, reason) in [
        (&["--features", "wom,flex-ecc"][..], wom_flex),
        (&["--features", "dedup", "--map", "cached"][..], ftl_core::Refusal::FlashResidentMap.reason()),
    ] {
        let out = bin().arg("run").args(features).args(WORKLOAD).output().unwrap();
        assert!(!out.status.success(), "{features:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(reason) && !err.contains("cannot format"), "{features:?}: {err}");
    }
}

#[test]
fn a_bad_configuration_fails_the_command_with_a_clear_message() {
    for (configs, needle) in [
        ("baseline,bogus", "unknown feature 'bogus'"),
        ("baseline,eti@lru", "unknown classifier 'lru'"),
        ("wom+wom-noprefetch", "give one of wom, wom-noprefetch, wom-sameplane and wom-sameblock"),
        (",", "--configs names no configuration"),
    ] {
        let out = bin().args(["compare", "--configs", configs]).args(WORKLOAD).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{configs}: succeeded");
        assert!(err.contains(needle), "{configs}: stderr {err:?} lacks {needle:?}");
        assert!(out.stdout.is_empty(), "{configs}: ran before failing");
    }
}
