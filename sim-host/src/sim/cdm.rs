//! The NV cache (CDM or NVM-basic) in the simulator: its settings from the command line, its
//! memory (an [`NvRam`] storing only the directory, as the NAND emulator stores no page data), the
//! NVM access time charged to requests, and the report's `cdm` object.
//!
//! NVM timing ([`NvmTiming::DEFAULT`]): 100 ns per access plus 0.25 ns per byte read (4 GB/s)
//! and 1 ns per byte written (1 GB/s): 1.1 us to read and 4.2 us to write a 4 KiB page, a
//! 3D XPoint / PCM-class part (the talk's "1000 times less latency than NAND" is about reads;
//! writes are slower). A request's NVM accesses are charged after its NAND work (serially: the
//! conservative choice; they are 1-4 us against >= 225 us for a NAND page read with transfer).

use ftl_core::cdm::{NvCache, NvCacheConfig, NvCacheLayout, NvCounters, NvPolicy, ReadFill, Slot};

use crate::emulator::NvRam;

/// Which cache a simulation runs with.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct NvCacheSpec {
    /// Capacity in pages.
    pub pages: u32,
    /// CDM or basic.
    pub policy: NvPolicy,
    /// Read misses.
    pub read_fill: ReadFill,
    /// Write-back (`cdm-wb`, `nvm-basic-wb`): host writes go to the cache only.
    pub write_back: bool,
}

/// Parses `--nv-read-fill`.
pub fn parse_read_fill(s: &str) -> Result<ReadFill, String> {
    match s {
        "lru" => Ok(ReadFill::Lru),
        "clean" => Ok(ReadFill::Clean),
        "off" => Ok(ReadFill::Off),
        _ => Err(format!("unknown --nv-read-fill '{s}' (expected lru, clean or off)")),
    }
}

/// Parses `--nv-policy`.
pub fn parse_policy(s: &str) -> Result<NvPolicy, String> {
    match s {
        "cdm" => Ok(NvPolicy::Cdm),
        "basic" => Ok(NvPolicy::Basic),
        _ => Err(format!("unknown --nv-policy '{s}' (expected cdm or basic)")),
    }
}

/// The name of a policy in reports.
pub fn policy_name(p: NvPolicy) -> &'static str {
    match p {
        NvPolicy::Cdm => "cdm",
        NvPolicy::Basic => "basic",
    }
}

/// Takes the NV-cache tokens out of a feature list: `cdm` (policy from `--nv-policy`, default
/// cdm) and `nvm-basic` (basic), write-through; `cdm-wb` and `nvm-basic-wb`, the same write-back. Returns the remaining list (with `cdm` kept as a feature name)
/// and the cache, if any. `implicit`: the flags alone turn the cache on (`run`), else only a
/// token does (`compare`, where `baseline` must stay without a cache).
pub fn take_nv_cache(
    features: &str,
    pages: Option<u32>,
    policy: Option<&str>,
    implicit: bool,
) -> Result<(String, Option<NvCacheSpec>), String> {
    let flag_policy = policy.map(parse_policy).transpose()?;
    let mut chosen: Option<NvPolicy> = None;
    let mut write_back = false;
    let mut rest = Vec::new();
    for tok in features.split(['+', ',']).map(str::trim).filter(|t| !t.is_empty()) {
        match tok {
            "cdm" | "cdm-wb" => {
                chosen = Some(flag_policy.unwrap_or(NvPolicy::Cdm));
                write_back = tok == "cdm-wb";
                rest.push("cdm");
            }
            "nvm-basic" | "nvm-basic-wb" => {
                chosen = Some(NvPolicy::Basic);
                write_back = tok == "nvm-basic-wb";
            }
            _ => rest.push(tok),
        }
    }
    if chosen.is_none() && implicit && pages.is_some() {
        chosen = Some(flag_policy.unwrap_or(NvPolicy::Cdm));
        rest.push("cdm");
    }
    if chosen.is_none() && implicit && flag_policy.is_some() {
        return Err("--nv-policy needs the NV cache: give --nv-cache-pages N".into());
    }
    let rest = rest.join("+");
    let Some(policy) = chosen else { return Ok((rest, None)) };
    let pages = match pages {
        Some(0) => return Err("--nv-cache-pages must be at least 1".into()),
        Some(p) => p,
        None => return Err("the NV cache (cdm, nvm-basic) needs --nv-cache-pages N".into()),
    };
    Ok((rest, Some(NvCacheSpec { pages, policy, read_fill: ReadFill::Lru, write_back })))
}

/// NVM access latencies.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct NvmTiming {
    /// Fixed cost of one access.
    pub access_ns: u64,
    /// Read time per byte, picoseconds.
    pub read_ps_per_byte: u64,
    /// Write time per byte, picoseconds.
    pub write_ps_per_byte: u64,
}

impl NvmTiming {
    /// The simulator's NVM (see the module documentation).
    pub const DEFAULT: NvmTiming =
        NvmTiming { access_ns: 100, read_ps_per_byte: 250, write_ps_per_byte: 1000 };

    /// Time of the NVM work between two snapshots of the counters.
    pub fn cost_ns(&self, before: &NvCounters, after: &NvCounters) -> u64 {
        let accesses = (after.nvm_reads - before.nvm_reads) + (after.nvm_writes - before.nvm_writes);
        let rd = after.nvm_read_bytes - before.nvm_read_bytes;
        let wr = after.nvm_write_bytes - before.nvm_write_bytes;
        accesses * self.access_ns + (rd * self.read_ps_per_byte + wr * self.write_ps_per_byte).div_ceil(1000)
    }
}

/// The owned memory of one simulation's cache.
pub struct SimNvCache {
    /// Settings.
    pub spec: NvCacheSpec,
    nvram: NvRam,
    slots: Vec<Slot>,
    index: Vec<u32>,
}

impl SimNvCache {
    /// Memory for `spec` with pages of `page_bytes`.
    pub fn new(spec: NvCacheSpec, page_bytes: u32) -> Result<Self, String> {
        let lay = NvCacheLayout::new(spec.pages);
        let bytes = lay.nvm_bytes(page_bytes);
        if bytes > u32::MAX as u64 {
            return Err(format!(
                "--nv-cache-pages {} needs {bytes} bytes of NVM, more than the 4 GiB an NVM region addresses",
                spec.pages
            ));
        }
        Ok(SimNvCache {
            spec,
            nvram: NvRam::with_stored_prefix(bytes as u32, lay.data_offset() as u32, 1),
            slots: vec![Slot::EMPTY; lay.slots],
            index: vec![0; lay.index_words],
        })
    }

    /// The cache over this memory, for one FTL.
    pub fn cache(&mut self) -> Result<NvCache<'_>, String> {
        let cfg = NvCacheConfig {
            policy: self.spec.policy,
            read_fill: self.spec.read_fill,
            write_back: self.spec.write_back,
        };
        NvCache::new(&mut self.nvram, &mut self.slots, &mut self.index, cfg)
            .map_err(|e| format!("NV cache: {e}"))
    }
}

/// What one simulation measures of the cache beyond its counters: NVM busy time and the mean
/// number of only copies (pages whose flash copy GC dropped) held per request.
#[derive(Clone, Debug)]
pub struct NvRun {
    /// NVM timing.
    pub timing: NvmTiming,
    busy_ns: u64,
    only_copies_sum: u64,
    requests: u64,
}

impl Default for NvRun {
    fn default() -> Self {
        NvRun { timing: NvmTiming::DEFAULT, busy_ns: 0, only_copies_sum: 0, requests: 0 }
    }
}

impl NvRun {
    /// Accounts one request: counters before and after it, only copies after it. Returns the
    /// NVM time to charge to it.
    pub fn request(
        &mut self,
        before: Option<NvCounters>,
        after: Option<NvCounters>,
        only_copies: u32,
    ) -> u64 {
        let (Some(a), Some(b)) = (before, after) else { return 0 };
        let ns = self.timing.cost_ns(&a, &b);
        self.busy_ns += ns;
        self.only_copies_sum += only_copies as u64;
        self.requests += 1;
        ns
    }

    /// The report's `cdm` object.
    pub fn report(
        &self,
        spec: &NvCacheSpec,
        page_bytes: u32,
        c: &NvCounters,
        only_copies: u32,
    ) -> (String, serde_json::Value) {
        let lay = NvCacheLayout::new(spec.pages);
        let lookups = c.read_hits + c.read_misses;
        let t = &self.timing;
        (
            "cdm".into(),
            serde_json::json!({
                "policy": policy_name(spec.policy),
                "read_fill": format!("{:?}", spec.read_fill).to_lowercase(),
                "cache_pages": spec.pages,
                "nvm_bytes": lay.nvm_bytes(page_bytes),
                "ram_bytes": lay.ram_bytes(),
                "read_hits": c.read_hits,
                "read_misses": c.read_misses,
                "read_hit_ratio": if lookups == 0 { 0.0 } else { c.read_hits as f64 / lookups as f64 },
                "write_hits": c.write_hits,
                "write_inserts": c.write_inserts,
                "read_fills": c.read_fills,
                "evictions": c.evictions,
                "write_backs": c.write_backs,
                "removable_drops": c.gc_drops,
                "only_copies_mean": if self.requests == 0 { 0.0 } else { self.only_copies_sum as f64 / self.requests as f64 },
                "only_copies_at_end": only_copies,
                "nvm_reads": c.nvm_reads,
                "nvm_writes": c.nvm_writes,
                "nvm_read_bytes": c.nvm_read_bytes,
                "nvm_write_bytes": c.nvm_write_bytes,
                "nvm_busy_us": self.busy_ns as f64 / 1000.0,
                "nvm_timing": {
                    "access_ns": t.access_ns,
                    "read_ps_per_byte": t.read_ps_per_byte,
                    "write_ps_per_byte": t.write_ps_per_byte,
                },
            }),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_and_flags() {
        let (rest, s) = take_nv_cache("cdm", Some(64), None, false).unwrap();
        assert_eq!(
            (rest.as_str(), s),
            (
                "cdm",
                Some(NvCacheSpec {
                    pages: 64,
                    policy: NvPolicy::Cdm,
                    read_fill: ReadFill::Lru,
                    write_back: false
                })
            )
        );
        let (rest, s) = take_nv_cache("nvm-basic", Some(64), None, false).unwrap();
        assert_eq!((rest.as_str(), s.map(|s| s.policy)), ("", Some(NvPolicy::Basic)));
        let (_, s) = take_nv_cache("cdm", Some(8), Some("basic"), false).unwrap();
        assert_eq!(s.map(|s| s.policy), Some(NvPolicy::Basic));
        assert_eq!(take_nv_cache("baseline", Some(8), None, false).unwrap().1, None);
        assert_eq!(take_nv_cache("", Some(8), None, true).unwrap().1.map(|s| s.pages), Some(8));
        assert!(take_nv_cache("cdm", None, None, false).unwrap_err().contains("--nv-cache-pages"));
        assert!(take_nv_cache("cdm", Some(0), None, false).unwrap_err().contains("at least 1"));
        assert!(take_nv_cache("cdm", Some(8), Some("lru"), false).unwrap_err().contains("--nv-policy"));
        assert!(take_nv_cache("", None, Some("cdm"), true).unwrap_err().contains("--nv-cache-pages"));
    }

    fn sim(nv: Option<NvCacheSpec>) -> crate::sim::report::Report {
        use crate::sim::{device::Preset, simulate, AddressMode, ClassifierKind, Precondition, SimConfig};
        use crate::workload::{generate, Pattern, RequestPages, WorkloadSpec};
        let device = Preset::Small.device();
        let cfg = SimConfig {
            label: "t".into(),
            device,
            op_percent: 15.0,
            classifier: ClassifierKind::None,
            features: Vec::new(),
            precondition: Precondition::Sequential,
            address: AddressMode::Strict,
            queue_depth: 1,
            open_loop: false,
            seed: 1,
            write_limit_pages: None,
            nv_cache: nv,
            dedup: crate::sim::dedup::DedupOptions::default(),
            flex: crate::sim::flexecc::FlexSimConfig::default(),
            wom: crate::sim::wom::WomOptions::default(),
            until_worn_permille: None,
            classifier_opts: Default::default(),
            gc_pacing: true,
            multi_plane: false,
            gc_stripes: true,
            stripe_order: Default::default(),
            batch: false,
            check_data: false,
            map: crate::memory::MapChoice::Flat,
            write_buffer_bytes: None,
            // Like for like: with a cache attached every mount surveys and no pool records are
            // written, so the reference keeps no pool either.
            mount_pool_blocks: 0,
        };
        let spec = WorkloadSpec {
            pattern: Pattern::Uniform,
            writes: 40_000,
            read_ratio: 0.5,
            request_pages: RequestPages::Fixed(1),
            duplicate_ratio: 0.0,
            seed: 3,
        };
        let w = generate(&spec, cfg.logical_pages() as u64, 2048).unwrap();
        simulate(&cfg, w, &mut |_| {}).unwrap().report
    }

    /// In the simulator NVM-basic programs exactly what no cache programs and serves some reads
    /// from the NVM (faster); CDM drops removable pages and reports them.
    #[test]
    fn simulated_basic_matches_no_cache_on_flash_and_cdm_reports_drops() {
        let none = sim(None);
        let basic = sim(Some(NvCacheSpec {
            pages: 200,
            policy: NvPolicy::Basic,
            read_fill: ReadFill::Lru,
            write_back: false,
        }));
        let cdm = sim(Some(NvCacheSpec {
            pages: 200,
            policy: NvPolicy::Cdm,
            read_fill: ReadFill::Lru,
            write_back: false,
        }));
        assert_eq!((basic.nand_programs, basic.gc_page_copies), (none.nand_programs, none.gc_page_copies));
        assert!(!none.features.contains_key("cdm"));
        let b = &basic.features["cdm"];
        assert_eq!(b["removable_drops"], 0);
        assert!(b["read_hits"].as_u64().unwrap() > 0);
        let c = &cdm.features["cdm"];
        assert_eq!(c["policy"], "cdm");
        assert!(c["removable_drops"].as_u64().unwrap() > 0);
        // Every program is a host write, a GC copy, a write-back, or checkpoint/journal work.
        let wb = c["write_backs"].as_u64().unwrap();
        assert_eq!(
            cdm.nand_programs,
            cdm.host_write_pages + cdm.gc_page_copies + wb + cdm.checkpoint_pages + cdm.journal_pages
        );
    }

    /// The `cdm` device preset is the talk's Table 2 (capacity scaled down).
    #[test]
    fn cdm_preset_is_the_talks_setup() {
        let d = crate::sim::device::Preset::Cdm.device();
        let g = d.geometry;
        assert_eq!((g.data_bytes, g.pages_per_block), (4096, 64));
        assert_eq!((d.timing.t_r_ns, d.timing.t_prog_ns, d.timing.t_bers_ns), (25_000, 200_000, 1_500_000));
        assert_eq!(d.timing.xfer_ns(4096), 100_000);
        assert_eq!(d.default_op_percent, 15.0);
        // 64 GB scaled to 4 GiB by default (`--blocks` changes it).
        assert_eq!(g.total_pages() as u64 * 4096, 4 << 30);
    }

    #[test]
    fn nvm_cost_of_a_page() {
        let t = NvmTiming::DEFAULT;
        let a = NvCounters::default();
        let b = NvCounters { nvm_reads: 1, nvm_read_bytes: 4096, ..a };
        assert_eq!(t.cost_ns(&a, &b), 100 + 1024);
        let w = NvCounters { nvm_writes: 2, nvm_write_bytes: 4096 + 32, ..a };
        assert_eq!(t.cost_ns(&a, &w), 200 + 4128);
    }
}
