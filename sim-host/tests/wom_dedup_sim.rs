//! Second writes with deduplication in the simulator, on requests that carry no content (as the
//! TPC-C and Heimdall traces): the emulator then keeps page data (deduplication compares
//! contents) and the simulator fills pages with its synthetic contents, which are mostly zero
//! bytes. First writes must still reach the flash scrambled, so that invalid pages stay within
//! the density a second write needs: the stack makes second writes as second writes alone do.

use sim_host::sim::dedup::DedupOptions;
use sim_host::sim::device::Preset;
use sim_host::sim::{simulate, AddressMode, ClassifierKind, Feature, Precondition, SimConfig};
use sim_host::workload::{generate, Pattern, RequestPages, WorkloadSpec};

fn config(features: Vec<Feature>) -> SimConfig {
    let mut device = Preset::Wom.device();
    device.geometry.blocks_per_plane = 256;
    SimConfig {
        label: "wom".into(),
        device,
        op_percent: 12.0,
        classifier: ClassifierKind::None,
        features,
        precondition: Precondition::Sequential,
        address: AddressMode::Strict,
        queue_depth: 4,
        open_loop: false,
        seed: 1,
        write_limit_pages: None,
        dedup: DedupOptions::default(),
        nv_cache: None,
        flex: Default::default(),
        wom: sim_host::sim::wom::WomOptions::default(),
        until_worn_permille: None,
        gc_pacing: true,
        multi_plane: false,
        gc_stripes: true,
        map: sim_host::memory::MapChoice::Flat,
        classifier_opts: Default::default(),
        write_buffer_bytes: None,
        mount_pool_blocks: ftl_core::RECOMMENDED_MOUNT_POOL_BLOCKS,
        stripe_order: ftl_core::StripeOrder::PlaneFirst,
        batch: false,
        check_data: false,
    }
}

/// The report's `wom` object for a Zipf 1 run of single-page writes without content.
fn wom_report(features: Vec<Feature>) -> serde_json::Value {
    let cfg = config(features);
    let spec = WorkloadSpec {
        request_pages: RequestPages::Fixed(1),
        seed: 5,
        ..WorkloadSpec::new(Pattern::Zipf { alpha: 1.0 }, 30_000)
    };
    let w = generate(&spec, cfg.logical_pages() as u64, cfg.device.geometry.data_bytes as u64).unwrap();
    let contentless = w.map(|mut r| {
        r.content = None;
        r
    });
    let out = simulate(&cfg, contentless, &mut |_| {}).unwrap();
    out.report.features["wom"].clone()
}

fn n(v: &serde_json::Value, k: &str) -> u64 {
    v[k].as_u64().unwrap_or_else(|| panic!("{k} missing in {v}"))
}

#[test]
fn dedup_keeps_second_writes_on_contentless_requests() {
    let alone = wom_report(vec![Feature::Wom]);
    let stacked = wom_report(vec![Feature::Wom, Feature::Dedup]);
    // Second writes alone make second writes here and skip no page (the emulator keeps no data).
    assert!(n(&alone, "second_writes") > 100, "{alone}");
    assert_eq!(n(&alone, "skipped_pages"), 0, "{alone}");
    // With dedup the pages hold data. Unscrambled, nearly every pair was too dense: no second
    // write at all, every candidate skipped.
    let sw = n(&stacked, "second_writes");
    assert!(2 * sw >= n(&alone, "second_writes"), "alone {alone}\nstacked {stacked}");
    assert!(n(&stacked, "skipped_pages") < sw, "{stacked}");
}
