//! The JSON report of a simulation, built from what a run measured ([`RunStats`]), and the
//! `compare` table.
//!
//! Key invariants (tested): `waf == nand_programs / host_write_pages`; the per-block erase counts
//! behind `erase_count_*` sum to `nand_erases`.

use std::collections::BTreeMap;

use ftl_core::Counters;
use nand_hal::BlockId;
use serde::Serialize;

use super::metrics::{Latencies, LatencySummary};
use super::SimConfig;

/// The device a report was measured on.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DeviceReport {
    /// Data bytes per page.
    pub page_bytes: u32,
    /// Spare bytes per page.
    pub spare_bytes: u32,
    /// Pages per block.
    pub pages_per_block: u32,
    /// Blocks.
    pub blocks: u32,
    /// Planes (all LUNs).
    pub planes: u32,
    /// Logical pages exported.
    pub logical_pages: u32,
    /// Over-provisioning, percent.
    pub op_percent: f64,
    /// Array read time.
    pub t_r_us: f64,
    /// Program time.
    pub t_prog_us: f64,
    /// Erase time.
    pub t_bers_us: f64,
    /// Bus transfer time per byte.
    pub t_xfer_ns_per_byte: f64,
    /// LUNs (dies).
    pub luns: u32,
    /// Channels the LUNs share.
    pub channels: u32,
    /// The timing model's scheduling: `planes` or `luns`.
    pub scheduling: &'static str,
    /// Host reads go before queued programs and erases (`--read-priority`).
    pub read_priority: bool,
}

/// Everything a run measured (the measured part only; preconditioning excluded).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Report {
    /// Configuration name.
    pub label: String,
    /// Device.
    pub device: DeviceReport,
    /// Host requests replayed.
    pub requests: u64,
    /// Logical pages read by the host.
    pub host_read_pages: u64,
    /// NAND reads the host's reads caused per host page read (their pages and map misses).
    pub nand_reads_per_host_read: f64,
    /// Logical pages written by the host.
    pub host_write_pages: u64,
    /// Partial pages read for read-modify-write.
    pub rmw_pages: u64,
    /// NAND page reads.
    pub nand_reads: u64,
    /// NAND page programs (GC copies, checkpoints and journal pages included).
    pub nand_programs: u64,
    /// NAND block erases.
    pub nand_erases: u64,
    /// Pages copied by GC.
    pub gc_page_copies: u64,
    /// Of `gc_page_copies`, those the FTL moved by copy-back (`--copy-back checked` or
    /// `crc-direct` turns the FTL's `Config::gc_copy_back` on; the emulator charges each one,
    /// with FlexECC its bit-error model).
    pub gc_copy_backs: u64,
    /// Pages programmed for checkpoints.
    pub checkpoint_pages: u64,
    /// Anchor records programmed (a record per checkpoint and per mount-pool extension, each
    /// to two copies; included in `nand_programs`).
    pub anchor_pages: u64,
    /// Erases of the anchor's two blocks (included in `nand_erases`, not in the erase counts).
    pub anchor_erases: u64,
    /// Mount-pool extensions (see ftl-core/src/pool.rs).
    pub pool_extensions: u64,
    /// Times the mount pool could not be listed and went unbounded until the next checkpoint.
    pub pool_unbounded: u64,
    /// Journal pages programmed.
    pub journal_pages: u64,
    /// Write amplification: `nand_programs / host_write_pages` (the host's pages, also where a
    /// cache in front of the FTL writes other pages to it, as FlexECC's).
    pub waf: f64,
    /// Most NAND programs one host page write caused (GC, journal and checkpoint included).
    pub worst_host_write_programs: u64,
    /// GC victims collected (or finished) on demand, in one go, because a host block was to open
    /// in a plane below its free reserve.
    pub gc_blocks_on_demand: u64,
    /// RAM the FTL uses: every buffer `RamLayout` asks for plus the `Ftl` struct.
    pub ftl_ram_bytes: u64,
    /// Whether GC was paced (a copy budget per host write) or ran whole victims on demand.
    pub gc_pacing: bool,
    /// Whether multi-plane operations were on.
    pub multi_plane: bool,
    /// The order host pages visited the planes in: `plane-first` or `channel-first`.
    pub stripe: String,
    /// Whether queued writes were batched (`--batch`).
    pub batch: bool,
    /// With `--batch on`: `Ftl::write_many` calls of two requests or more, and the requests in
    /// them.
    pub batches: u64,
    /// (See `batches`.)
    pub batched_requests: u64,
    /// Multi-plane programs, reads and erases the FTL issued (`ftl_core::multiplane`).
    pub multi_plane_programs: u64,
    /// (See `multi_plane_programs`.)
    pub multi_plane_reads: u64,
    /// (See `multi_plane_programs`.)
    pub multi_plane_erases: u64,
    /// Pages the FTL voided to line the planes up again for stripes (`ftl_core::multiplane`,
    /// **Realignment**).
    pub realign_pads: u64,
    /// Of `multi_plane_programs`, those that programmed GC copies (`ftl_core::gc_stripe`).
    pub gc_stripes: u64,
    /// Mapping table: `flat` (the only one built so far).
    pub map: String,
    /// NAND reads of map pages (0 with the flat map, which lives in RAM).
    pub map_page_reads: u64,
    /// NAND programs of map pages (0 with the flat map; its checkpoints are `checkpoint_pages`).
    pub map_page_writes: u64,
    /// Fewest erases of a good block during the run.
    pub erase_count_min: u32,
    /// Most erases of a good block during the run.
    pub erase_count_max: u32,
    /// Mean erases per good block during the run.
    pub erase_count_mean: f64,
    /// Read response time.
    pub read_latency_us: LatencySummary,
    /// Write response time.
    pub write_latency_us: LatencySummary,
    /// Simulated device time of the measured part.
    pub simulated_seconds: f64,
    /// Wall-clock time of the measured part.
    pub sim_wall_seconds: f64,
    /// Requests replayed per wall-clock second.
    pub sim_requests_per_second: f64,
    /// One object per enabled feature with its own counters.
    pub features: BTreeMap<String, serde_json::Value>,
}

impl DeviceReport {
    /// The device of `cfg`, exporting `logical_pages`.
    pub fn new(cfg: &SimConfig, logical_pages: u32) -> Self {
        let geo = cfg.device.geometry;
        let timing = cfg.device.timing;
        DeviceReport {
            page_bytes: geo.data_bytes,
            spare_bytes: geo.spare_bytes,
            pages_per_block: geo.pages_per_block,
            blocks: geo.total_blocks(),
            planes: geo.total_planes(),
            logical_pages,
            op_percent: cfg.op_percent,
            t_r_us: timing.t_r_ns as f64 / 1000.0,
            t_prog_us: timing.t_prog_ns as f64 / 1000.0,
            t_bers_us: timing.t_bers_ns as f64 / 1000.0,
            t_xfer_ns_per_byte: timing.t_xfer_ps_per_byte as f64 / 1000.0,
            luns: geo.luns,
            channels: if cfg.device.channels == 0 { geo.luns } else { cfg.device.channels },
            scheduling: timing.scheduling.name(),
            read_priority: cfg.device.read_priority,
        }
    }
}

/// What a run measured: the inputs of [`Report::from_run`].
pub struct RunStats<'a> {
    /// The configuration run (its label and device).
    pub cfg: &'a SimConfig,
    /// Logical pages the device exported.
    pub logical_pages: u32,
    /// Host requests measured.
    pub requests: u64,
    /// Logical pages read by the host.
    pub host_read_pages: u64,
    /// Logical pages written by the host.
    pub host_write_pages: u64,
    /// Partial pages read for read-modify-write.
    pub rmw_pages: u64,
    /// The FTL's counters over the measured part (NAND work, GC, checkpoints, journal; `waf`
    /// is their `nand_programs / host_write_pages`).
    pub counters: Counters,
    /// Erases of each good block during the measured part ([`erases_since`]).
    pub erase_counts: &'a [u32],
    /// Read response times.
    pub read_latency: &'a mut Latencies,
    /// Write response times.
    pub write_latency: &'a mut Latencies,
    /// Simulated device time of the measured part, ns.
    pub simulated_ns: u64,
    /// Wall-clock time of the measured part, seconds.
    pub wall_seconds: f64,
    /// RAM the FTL uses (`Ftl::ram_bytes`).
    pub ftl_ram_bytes: usize,
    /// One object per enabled feature.
    pub features: BTreeMap<String, serde_json::Value>,
    /// `Ftl::write_many` calls of two requests or more, and the requests in them (`--batch`).
    pub batches: (u64, u64),
}

impl Report {
    /// The report of a run.
    pub fn from_run(s: RunStats<'_>) -> Self {
        let c = s.counters;
        let e = s.erase_counts;
        Report {
            label: s.cfg.label.clone(),
            device: DeviceReport::new(s.cfg, s.logical_pages),
            requests: s.requests,
            host_read_pages: s.host_read_pages,
            nand_reads_per_host_read: c.host_read_nand_reads as f64 / s.host_read_pages.max(1) as f64,
            host_write_pages: s.host_write_pages,
            rmw_pages: s.rmw_pages,
            nand_reads: c.nand_reads,
            nand_programs: c.nand_programs,
            nand_erases: c.nand_erases,
            gc_page_copies: c.gc_page_copies,
            gc_copy_backs: c.gc_copy_backs,
            checkpoint_pages: c.checkpoint_pages,
            anchor_pages: c.anchor_pages,
            anchor_erases: c.anchor_erases,
            pool_extensions: c.pool_extensions,
            pool_unbounded: c.pool_unbounded,
            journal_pages: c.journal_pages,
            // Host pages as the run counts them: the FlexECC pipeline's host writes go to its cache
            // manager, whose flushes and clean fills are the FTL's writes (one run reported 1.04
            // programs per FTL write against 6.71 per host write; issue #17).
            waf: if s.host_write_pages == 0 {
                0.0
            } else {
                c.nand_programs as f64 / s.host_write_pages as f64
            },
            worst_host_write_programs: c.worst_host_write_programs,
            gc_blocks_on_demand: c.gc_blocks_on_demand,
            ftl_ram_bytes: s.ftl_ram_bytes as u64,
            gc_pacing: s.cfg.gc_pacing,
            multi_plane: s.cfg.multi_plane,
            stripe: match s.cfg.stripe_order {
                ftl_core::StripeOrder::PlaneFirst => "plane-first".into(),
                ftl_core::StripeOrder::ChannelFirst => "channel-first".into(),
            },
            batch: s.cfg.batch,
            batches: s.batches.0,
            batched_requests: s.batches.1,
            multi_plane_programs: c.multi_plane_programs,
            multi_plane_reads: c.multi_plane_reads,
            multi_plane_erases: c.multi_plane_erases,
            realign_pads: c.realign_pads,
            gc_stripes: c.gc_stripes,
            map: match s.cfg.map {
                crate::memory::MapChoice::Flat => "flat".into(),
                crate::memory::MapChoice::Cached { .. } => "cached".into(),
            },
            map_page_reads: c.map_page_reads,
            map_page_writes: c.map_page_writes,
            erase_count_min: e.iter().copied().min().unwrap_or(0),
            erase_count_max: e.iter().copied().max().unwrap_or(0),
            erase_count_mean: e.iter().map(|&x| x as f64).sum::<f64>() / e.len().max(1) as f64,
            read_latency_us: s.read_latency.summary(),
            write_latency_us: s.write_latency.summary(),
            simulated_seconds: s.simulated_ns as f64 / 1e9,
            sim_wall_seconds: s.wall_seconds,
            sim_requests_per_second: if s.wall_seconds > 0.0 {
                s.requests as f64 / s.wall_seconds
            } else {
                0.0
            },
            features: s.features,
        }
    }
}

/// Erases of each block wear leveling covers since `base`: `blocks` as the FTL lists them
/// (`Ftl::leveled_erase_counts`: good blocks outside the anchor), `now` and `base` the device's
/// per-block erase counts (a block missing from `base` had none).
pub fn erases_since(blocks: impl Iterator<Item = (BlockId, u32)>, now: &[u32], base: &[u32]) -> Vec<u32> {
    blocks.map(|(b, _)| now[b.0 as usize] - base.get(b.0 as usize).copied().unwrap_or(0)).collect()
}

/// Reads one metric from a report.
pub type Metric = fn(&Report) -> f64;

/// The metrics `compare` puts side by side.
pub const COMPARED: [(&str, Metric); 7] = [
    ("erasures", |r| r.nand_erases as f64),
    ("waf", |r| r.waf),
    ("read response (mean)", |r| r.read_latency_us.mean),
    ("write response (mean)", |r| r.write_latency_us.mean),
    ("response (mean, all)", |r| {
        let n = (r.read_latency_us.count + r.write_latency_us.count).max(1) as f64;
        (r.read_latency_us.mean * r.read_latency_us.count as f64
            + r.write_latency_us.mean * r.write_latency_us.count as f64)
            / n
    }),
    ("write response (p99)", |r| r.write_latency_us.p99),
    ("gc page copies", |r| r.gc_page_copies as f64),
];

/// One configuration of `compare`: its report, or why the simulator does not run it.
#[derive(Clone, Debug)]
pub enum CompareRow {
    /// The configuration ran.
    Ran(Box<Report>),
    /// The configuration was refused ([`super::refusal`]).
    Refused {
        /// The configuration as given.
        label: String,
        /// The refusal's message.
        reason: String,
    },
}

impl CompareRow {
    /// The configuration's label.
    pub fn label(&self) -> &str {
        match self {
            CompareRow::Ran(r) => &r.label,
            CompareRow::Refused { label, .. } => label,
        }
    }

    /// The row as JSON: the report, or `{"label", "refused"}`.
    pub fn to_json(&self) -> serde_json::Value {
        match self {
            CompareRow::Ran(r) => serde_json::to_value(r).unwrap_or(serde_json::Value::Null),
            CompareRow::Refused { label, reason } => serde_json::json!({ "label": label, "refused": reason }),
        }
    }
}

/// The `compare` table: each metric of each configuration, and relative to the first one (`-`
/// when the first was refused or its value is 0); a refused configuration's column reads
/// `refused`, and its reason follows the table.
pub fn compare_table(rows: &[CompareRow]) -> String {
    let mut s = String::new();
    s.push_str(&format!("{:<24}", "metric"));
    for r in rows {
        s.push_str(&format!(" {:>22}", r.label()));
    }
    s.push('\n');
    for (name, f) in COMPARED {
        s.push_str(&format!("{name:<24}"));
        let base = match rows.first() {
            Some(CompareRow::Ran(r)) => f(r),
            _ => 0.0,
        };
        for r in rows {
            match r {
                CompareRow::Ran(r) => {
                    let v = f(r);
                    let rel = if base != 0.0 { format!("{:.3}x", v / base) } else { "-".into() };
                    s.push_str(&format!(" {:>12.2} ({rel:>7})", v));
                }
                CompareRow::Refused { .. } => s.push_str(&format!(" {:>22}", "refused")),
            }
        }
        s.push('\n');
    }
    for r in rows {
        if let CompareRow::Refused { label, reason } = r {
            s.push_str(&format!("{label}: refused: {reason}\n"));
        }
    }
    s
}
