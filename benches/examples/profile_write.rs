//! Profiling aid (`perf record`): the FTL alone at 90% fill over the bare spare store.
use ftl_benches::SpareStore;
use ftl_core::{Config, Ftl};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use sim_host::memory::FtlMemory;
use sim_host::steady_state::{MetadataOnlyPolicies, SteadyState};

fn main() {
    let geo = SteadyState::ANCHOR_GEOMETRY;
    let cfg = Config::for_utilization(&geo, 900);
    let mut mem = FtlMemory::new(&geo, &cfg);
    let (m, memory) = mem.parts();
    let mut ftl =
        Ftl::format(SpareStore::new(geo), MetadataOnlyPolicies::default(), m, memory, cfg).expect("format");
    let page = vec![0u8; geo.data_bytes as usize];
    let n = cfg.logical_pages;
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    for _ in 0..40 * n {
        ftl.write(rng.random_range(0..n), &page).expect("write");
    }
    println!("{:?}", ftl.counters());
}
