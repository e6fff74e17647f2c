//! Batching of queued writes (`SimConfig::batch`, `ftl-sim --batch on`) and channel-first
//! striping (`--stripe channel-first`) in the simulator, against the same run unbatched:
//! - the final data: every run stamps each written page with its request and reads every
//!   logical page back at the end (`SimConfig::check_data`): each holds what the last request
//!   that wrote it wrote, batched or not, in either stripe order;
//! - the counters: the same requests and host pages; NAND programs add up to host pages, GC
//!   copies and metadata pages in each run, and the WAF stays within a few percent;
//! - batching does something: single-page writes queued together go out as multi-plane programs
//!   (unbatched, a one-page request never can), and each request still completes on its own.

use nand_emu::Scheduling;
use sim_host::sim::device::Preset;
use sim_host::sim::{simulate, AddressMode, ClassifierKind, Feature, Precondition, SimConfig};
use sim_host::workload::{generate, Pattern, RequestPages, WorkloadSpec};

fn config(batch: bool, order: ftl_core::StripeOrder) -> SimConfig {
    let mut device = Preset::Small.device();
    device.geometry.luns = 4;
    device.geometry.blocks_per_plane = 64;
    device.channels = 2;
    device.timing.scheduling = Scheduling::LunQueues;
    SimConfig {
        label: "batch".into(),
        device,
        op_percent: 15.0,
        classifier: ClassifierKind::None,
        features: Vec::new(),
        precondition: Precondition::Sequential,
        address: AddressMode::Strict,
        queue_depth: 16,
        open_loop: false,
        seed: 5,
        write_limit_pages: None,
        nv_cache: None,
        dedup: Default::default(),
        flex: Default::default(),
        wom: Default::default(),
        until_worn_permille: None,
        classifier_opts: Default::default(),
        gc_pacing: true,
        multi_plane: true,
        gc_stripes: true,
        stripe_order: order,
        batch,
        check_data: true,
        map: sim_host::memory::MapChoice::Flat,
        write_buffer_bytes: None,
        mount_pool_blocks: 0,
    }
}

/// The run's report, with `min_write_ns` (its shortest write response) added.
fn run(cfg: &SimConfig, pages: RequestPages) -> serde_json::Value {
    let spec = WorkloadSpec {
        request_pages: pages,
        read_ratio: 0.2,
        seed: 9,
        ..WorkloadSpec::new(Pattern::Uniform, 12000)
    };
    let w = generate(&spec, cfg.logical_pages() as u64, cfg.device.geometry.data_bytes as u64).unwrap();
    let mut out = simulate(cfg, w, &mut |_| {}).unwrap_or_else(|e| panic!("{}: {e}", cfg.label));
    let mut v = serde_json::to_value(&out.report).unwrap();
    v["min_write_ns"] = out.write_latency.sorted()[0].into();
    v
}

fn u(v: &serde_json::Value, k: &str) -> u64 {
    v[k].as_u64().unwrap_or_else(|| panic!("{k} missing"))
}

#[test]
fn batching_keeps_the_data_and_the_counters() {
    use ftl_core::StripeOrder::{ChannelFirst, PlaneFirst};
    for order in [PlaneFirst, ChannelFirst] {
        for pages in [RequestPages::Fixed(1), RequestPages::Uniform { min: 1, max: 8 }] {
            let off = run(&config(false, order), pages.clone());
            let on = run(&config(true, order), pages.clone());
            let case = format!("{order:?}, {pages:?}");
            for k in ["requests", "host_write_pages", "host_read_pages"] {
                assert_eq!(u(&off, k), u(&on, k), "{case}: {k}");
            }
            for r in [&off, &on] {
                let meta = u(r, "gc_page_copies")
                    + u(r, "checkpoint_pages")
                    + u(r, "anchor_pages")
                    + u(r, "journal_pages")
                    // The voids that realign drifted planes (`ftl_core::multiplane`).
                    + u(r, "realign_pads");
                assert_eq!(u(r, "nand_programs"), u(r, "host_write_pages") + meta, "{case}");
                assert!(u(r, "gc_page_copies") > 0, "{case}: the run must reach GC");
            }
            let (w0, w1) = (off["waf"].as_f64().unwrap(), on["waf"].as_f64().unwrap());
            assert!((w1 - w0).abs() / w0 < 0.05, "{case}: WAF {w0} unbatched, {w1} batched");
            assert_eq!((u(&off, "batches"), u(&off, "batched_requests")), (0, 0), "{case}");
            // Mixed sizes complete together less often than single pages.
            let least = if matches!(pages, RequestPages::Fixed(1)) { 100 } else { 20 };
            assert!(u(&on, "batches") > least, "{case}: {on}");
            assert!(u(&on, "batched_requests") >= 2 * u(&on, "batches"), "{case}");
            // Every write still has its own response time, none shorter than one program.
            let t_prog_ns = config(true, order).device.timing.t_prog_ns;
            assert!(u(&on, "min_write_ns") >= t_prog_ns, "{case}: {}", u(&on, "min_write_ns"));
        }
    }
    // One-page writes pair up in multi-plane programs only when batched (plane-first order: the
    // two pages of a pair take the two planes of one LUN; channel first puts them on two LUNs).
    // GC's copies go out as multi-plane programs either way (`gc_stripes`, `ftl_core::gc_stripe`).
    let off = run(&config(false, PlaneFirst), RequestPages::Fixed(1));
    let on = run(&config(true, PlaneFirst), RequestPages::Fixed(1));
    let host = |r: &serde_json::Value| u(r, "multi_plane_programs") - u(r, "gc_stripes");
    assert_eq!(host(&off), 0, "{off}");
    assert!(u(&off, "gc_stripes") > 0, "{off}");
    assert!(host(&on) > 100, "{on}");
}

#[test]
fn batching_refuses_what_it_does_not_model() {
    let mut cfg = config(true, ftl_core::StripeOrder::PlaneFirst);
    cfg.features = vec![Feature::Eti];
    let w = generate(&WorkloadSpec::new(Pattern::Uniform, 10), cfg.logical_pages() as u64, 2048).unwrap();
    let Err(err) = simulate(&cfg, w, &mut |_| {}) else {
        panic!("batching with a technique must be refused");
    };
    assert!(err.contains("--batch"), "{err}");
}
