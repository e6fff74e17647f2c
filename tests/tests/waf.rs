//! Wear and GC under uniform random overwrites at several fill levels: the baseline's write
//! amplification must stay within 10% of an independent greedy page-mapped FTL measured on the same
//! geometry (1024 blocks x 64 pages x 2 KiB): WAF 1.42 at 60% of raw capacity in use, 2.0 at 73%,
//! 2.57 at 80%, 4.83 at 90%. The erase-count spread must stay bounded. Figures are printed.

// Needs the simulator's steady-state runner (`sim`).
#![cfg(feature = "sim")]

use sim_host::steady_state::SteadyState;

fn check(fill_permille: u32, anchor: f64) {
    let r = SteadyState {
        geometry: SteadyState::ANCHOR_GEOMETRY,
        utilization_permille: fill_permille,
        warmup: 2.0,
        measure: 2.0,
        seed: 11,
    }
    .run()
    .expect("steady-state run");
    let spread = r.erase_max - r.erase_min;
    println!(
        "fill {:.1}%: WAF(gc) {:.3} (anchor {anchor}), WAF(all) {:.3}, erase counts {}..{} (spread {spread}), mean {:.1}",
        fill_permille as f64 / 10.0,
        r.waf_gc,
        r.waf_total,
        r.erase_min,
        r.erase_max,
        r.erase_mean
    );
    assert!((r.waf_gc / anchor - 1.0).abs() <= 0.10, "WAF {:.3} is not within 10% of {anchor}", r.waf_gc);
    // Metadata (checkpoints, journal) adds at most a few percent of programs.
    assert!(
        r.waf_total >= r.waf_gc && r.waf_total <= r.waf_gc * 1.05,
        "metadata overhead {:.3}",
        r.waf_total
    );
    // Dynamic wear leveling under uniform traffic keeps every block within a few dozen erases.
    assert!(spread <= 32, "erase-count spread {spread}");
    assert_eq!(r.host_writes, (2.0 * r.logical_pages as f64) as u64);
}

#[test]
fn waf_at_60_percent() {
    check(600, 1.42);
}

#[test]
fn waf_at_73_percent() {
    check(730, 2.0);
}

#[test]
fn waf_at_80_percent() {
    check(800, 2.57);
}

#[test]
fn waf_at_90_percent() {
    check(900, 4.83);
}
