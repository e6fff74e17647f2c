//! `ftl-sim`: the FTL simulator's command line. `ftl-sim --help` lists the commands.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::{Args, Parser, Subcommand};
use ftl_core::cdm::NvPolicy;
use ftl_core::Config;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use nand_hal::Geometry;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use sim_host::filebench::{self, FilebenchSpec, Personality};
use sim_host::memory::MapChoice;
use sim_host::sim::cdm::{parse_read_fill, take_nv_cache, NvCacheSpec};
use sim_host::sim::dedup::DedupOptions;
use sim_host::sim::device::{GeometryFlags, Preset};
use sim_host::sim::ecc_model::{DecodeTiming, ErrorRates};
use sim_host::sim::flexecc::{EccMode, FlexSimConfig};
use sim_host::sim::report::{compare_table, CompareRow};
use sim_host::sim::wom::WomOptions;
use sim_host::sim::{
    parse_classifier, parse_features, plot, refusal, simulate, AddressMode, ClassifierKind, ClassifierOpts,
    Feature, Precondition, SimConfig, SimOutput,
};
use sim_host::steady_state::SteadyState;
use sim_host::trace::{footprint_pages, read_trace, Format, ParseOptions, Trace};
use sim_host::workload::{generate, Pattern, RequestPages, WorkloadSpec};

#[derive(Parser)]
#[command(
    name = "ftl-sim",
    version,
    about = "Trace-driven simulator of the NAND FTL on the built-in emulator"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Replays a trace or a synthetic workload and reports metrics (JSON, plots).
    Run {
        #[command(flatten)]
        device: DeviceArgs,
        #[command(flatten)]
        input: InputArgs,
        #[command(flatten)]
        opts: RunOpts,
        #[command(flatten)]
        flex: FlexArgs,
        /// Techniques to enable, comma separated: wom (wom-noprefetch, wom-sameplane,
        /// wom-sameblock: both halves in one block), dedup, flex-ecc, eti, cdm. Dedup takes options after colons (dedup:nosample:switch:buffer=64:ool,
        /// ...; see docs/eval/dedup).
        #[arg(long, default_value = "")]
        features: String,
        /// Hot/cold classifier: none (one host stream), size (64 KiB rule, hot and cold streams),
        /// mhf, mbf, eti; options after colons: eti:alpha=N:beta=N:decay=N, mhf:hN, mbf:xN:hN,
        /// and :guard (see --guard), :guard:alt=mhf (the guard may follow MHF instead).
        #[arg(long, default_value = "none")]
        classifier: String,
    },
    /// Runs several configurations on the same input and prints each metric relative to the first.
    Compare {
        #[command(flatten)]
        device: DeviceArgs,
        #[command(flatten)]
        input: InputArgs,
        #[command(flatten)]
        opts: RunOpts,
        #[command(flatten)]
        flex: FlexArgs,
        /// Configurations, comma separated; each is FEATURES[@CLASSIFIER] with FEATURES `baseline`
        /// or techniques joined by `+` (e.g. `none,wom,dedup+cdm+eti,baseline@size`; `none` is
        /// `baseline`); `flex-ecc:flex` and `flex-ecc:all-bch` pick the device ECC of a flex-ecc
        /// run (else --ecc). A configuration that does not parse fails the command; one the
        /// simulator does not run gets its reason in its row (JSON: {"label", "refused"}).
        #[arg(long, required = true)]
        configs: String,
    },
    /// The README's main job: a short self-contained demonstration on the built-in emulator.
    Demo {
        /// Fewer overwrites (for a quick look).
        #[arg(long)]
        quick: bool,
        /// Where the demo writes its JSON and plots.
        #[arg(long, default_value = "out/demo")]
        out: PathBuf,
    },
    /// Steady-state WAF under uniform random overwrites at the given fill levels (percent of raw).
    Waf {
        /// Fill levels, percent of raw capacity in use.
        #[arg(long, value_delimiter = ',', default_values_t = vec![60.0, 73.0, 80.0, 90.0])]
        fill: Vec<f64>,
        /// Overwrites before measuring, in multiples of the logical capacity.
        #[arg(long, default_value_t = 4.0)]
        warmup: f64,
        /// Overwrites measured, in multiples of the logical capacity.
        #[arg(long, default_value_t = 4.0)]
        measure: f64,
        /// Seed of the address stream.
        #[arg(long, default_value_t = 1)]
        seed: u64,
    },
    /// NAND reads of a mount after a clean unmount and after power cuts (90% of raw in use, or
    /// the fill --op gives).
    Mount {
        #[command(flatten)]
        device: DeviceArgs,
        /// Power cuts to try.
        #[arg(long, default_value_t = 20)]
        cuts: u32,
        /// Mapping table: flat or cached.
        #[arg(long, default_value = "flat")]
        map: String,
        /// Map cache size in KiB (with --map cached; default 16).
        #[arg(long)]
        map_cache_kib: Option<u32>,
        /// Write the figures as JSON here (mount_reads_clean, mount_reads_after_cut_mean,
        /// mount_reads_after_cut_max, ...).
        #[arg(long)]
        json: Option<PathBuf>,
    },
    /// Serves the FTL as a network block device (NBD) on an emulated NAND kept in an image file.
    Serve {
        #[command(flatten)]
        device: DeviceArgs,
        #[command(flatten)]
        serve: sim_host::nbd::ServeArgs,
    },
}

#[derive(Args, Clone)]
struct DeviceArgs {
    /// Device preset: mt29f4g08, anchor, small, caftl, eti, cdm, wom, wom-fast-bus, wom-ssd,
    /// flexecc (each one's sources: sim-host/src/sim/device.rs).
    #[arg(long, default_value = "anchor")]
    device: String,
    /// Override: data bytes per page.
    #[arg(long)]
    page_bytes: Option<u32>,
    /// Override: spare bytes per page.
    #[arg(long)]
    spare_bytes: Option<u32>,
    /// Override: pages per block.
    #[arg(long)]
    pages_per_block: Option<u32>,
    /// Override: total blocks.
    #[arg(long)]
    blocks: Option<u32>,
    /// Override: planes per LUN.
    #[arg(long)]
    planes: Option<u32>,
    /// Override: LUNs.
    #[arg(long)]
    luns: Option<u32>,
    /// Override: bus transfer time, ns per byte (e.g. 5 for a 200 MB/s ONFI bus).
    #[arg(long)]
    xfer_ns_per_byte: Option<f64>,
    /// Override: channels (data buses) the LUNs share, LUN l on channel l % channels; at most
    /// --luns (default: one channel per LUN).
    #[arg(long)]
    channels: Option<u32>,
    /// Override: LUNs (dies) on each channel; the device then has --channels x this many LUNs
    /// (needs --channels; --luns, if given too, must agree).
    #[arg(long)]
    luns_per_channel: Option<u32>,
    /// Override: scheduling of the timing model: planes (each plane its own queue, bus in issue
    /// order) or luns (a LUN runs one command at a time; transfers fill gaps on the channel's
    /// bus). See nand-emu/src/timing.rs.
    #[arg(long)]
    scheduling: Option<String>,
    /// Override: read priority of the timing model: on (a host read's NAND reads go before the
    /// programs and erases queued on their channel that have not begun; one in progress is not
    /// suspended; the CAFTL paper's SSD, MQSim's scheduler) or off (the presets' default: every
    /// operation in issue order). Changes timing only. See nand-emu/src/timing/read_priority.rs.
    #[arg(long)]
    read_priority: Option<String>,
    /// Over-provisioning in percent (physical = logical x (1 + OP/100)); the preset's default
    /// otherwise.
    #[arg(long)]
    op: Option<f64>,
    /// Size the device to the trace: the fewest blocks whose logical capacity at --op holds every
    /// page the trace touches (overrides --blocks; use with --compact).
    #[arg(long)]
    fit: bool,
    /// Over-provisioning on top of the FTL's own reserve blocks (per plane its free reserve and
    /// open blocks, two checkpoints: `ReuseConfig::reserve_blocks`): the logical capacity is
    /// (physical - reserve) / (1 + OP/100), so that GC and second writes get R = T - U blocks as
    /// the Reusable SSD paper defines them; with --fit the device grows to keep the trace's
    /// pages. The report's op_percent is then the device's whole over-provisioning.
    #[arg(long)]
    op_beyond_reserve: bool,
    /// Override: rated erase cycles per block (second writes stop at 30 % of it; --until-worn
    /// ends a run when the blocks have spent it on average).
    #[arg(long)]
    endurance: Option<u32>,
}

impl DeviceArgs {
    /// A preset with its defaults, `op` percent over-provisioning and `fit` (for the demo).
    fn preset(device: &str, op: f64, fit: bool) -> Self {
        DeviceArgs {
            device: device.into(),
            page_bytes: None,
            spare_bytes: None,
            pages_per_block: None,
            blocks: None,
            planes: None,
            luns: None,
            xfer_ns_per_byte: None,
            channels: None,
            luns_per_channel: None,
            scheduling: None,
            read_priority: None,
            op: Some(op),
            fit,
            op_beyond_reserve: false,
            endurance: None,
        }
    }

    /// The geometry overrides given.
    fn geometry_flags(&self) -> GeometryFlags {
        GeometryFlags {
            page_bytes: self.page_bytes,
            spare_bytes: self.spare_bytes,
            pages_per_block: self.pages_per_block,
            blocks: self.blocks,
            planes: self.planes,
            luns: self.luns,
            endurance: self.endurance,
        }
    }
}

#[derive(Args, Clone)]
struct InputArgs {
    /// Trace file to replay.
    #[arg(long, conflicts_with = "workload")]
    trace: Option<PathBuf>,
    /// Trace format: msr, disksim, heimdall, fiu, auto.
    #[arg(long, default_value = "auto")]
    format: String,
    /// Skip malformed trace lines (counted and reported) instead of stopping.
    #[arg(long)]
    skip_bad: bool,
    /// Replay the trace this many times.
    #[arg(long = "loop", default_value_t = 1)]
    loops: u32,
    /// Stop once the host has written this many times the logical capacity, replaying the trace
    /// as often as needed (the ETI paper's "until 2x the volume is written"); overrides --loop.
    #[arg(long)]
    until_written: Option<f64>,
    /// Remap the distinct pages a trace touches onto a dense range, in first-touch order.
    #[arg(long, conflicts_with = "wrap")]
    compact: bool,
    /// Fold pages beyond the capacity by modulo.
    #[arg(long)]
    wrap: bool,
    /// Synthetic workload: uniform, zipf:ALPHA, hotcold:H/C, sequential, or a Filebench-like
    /// personality: fileserver, webserver, varmail, oltp (sim_host::filebench; with --arrival-us
    /// their requests are timed, and flex-ecc's --ioscale scales the times).
    #[arg(long)]
    workload: Option<String>,
    /// Write requests of the synthetic workload.
    #[arg(long, default_value_t = 100_000)]
    writes: u64,
    /// Fraction of the synthetic workload's requests that are reads.
    #[arg(long, default_value_t = 0.0)]
    read_ratio: f64,
    /// Pages per synthetic request: N or MIN-MAX.
    #[arg(long, default_value = "1")]
    request_pages: String,
    /// Fraction of written pages whose content repeats earlier content (synthetic workloads).
    #[arg(long, default_value_t = 0.0)]
    dup_ratio: f64,
    /// Synthetic workload: requests arrive open loop, at exponential intervals of this mean in
    /// microseconds (default: closed loop at --queue-depth).
    #[arg(long)]
    arrival_us: Option<f64>,
    /// Seed of the synthetic workload and of the preconditioning.
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

/// The classifiers' parameters (defaults: the ETI paper's Table 2).
#[derive(Args, Clone)]
struct ClassifierArgs {
    /// ETI's split threshold alpha in percent (the paper's 100); `eti:alpha=N` per configuration.
    #[arg(long, default_value_t = 100)]
    eti_alpha: u8,
    /// ETI's merge threshold beta (the paper's 4); `eti:beta=N` per configuration.
    #[arg(long, default_value_t = 4)]
    eti_beta: u8,
    /// ETI's decay period in write requests (the paper's 4096); `eti:decay=N` per configuration.
    #[arg(long, default_value_t = 4096)]
    eti_decay: u32,
    /// MHF's and MBF's hash pair: 1 = CRC-32C + CRC-32, 2 = CRC-32 + CD-ROM, 3 = CD-ROM + CRC-32C
    /// (the paper's three variants); `mhf:hN` per configuration.
    #[arg(long, default_value_t = 1)]
    hashes: u8,
    /// MBF's filter size, times the paper's 2048 bits: 1, 2 or 4; `mbf:xN` per configuration.
    #[arg(long, default_value_t = 1)]
    mbf_size: u8,
    /// Guard the classifier: separate hot and cold only while a miniature simulation of both
    /// choices says separation lowers WAF (`ftl_policies::eti::guard`); `eti:guard` per
    /// configuration.
    #[arg(long)]
    guard: bool,
    /// The guard's margin: separate when its ghost programs this many per mille fewer pages.
    #[arg(long, default_value_t = 20)]
    guard_margin: u32,
    /// The guard's decision window in sampled writes.
    #[arg(long, default_value_t = 512)]
    guard_window: u32,
}

impl Default for ClassifierArgs {
    fn default() -> Self {
        let d = ClassifierOpts::default();
        ClassifierArgs {
            eti_alpha: d.eti_alpha,
            eti_beta: d.eti_beta,
            eti_decay: d.eti_decay,
            hashes: d.hashes,
            mbf_size: d.mbf_scale,
            guard: d.guard,
            guard_margin: d.guard_margin_permille,
            guard_window: d.guard_window,
        }
    }
}

/// Second writes' settings (defaults: the paper's, [`WomOptions::default`]).
#[derive(Args, Clone)]
struct WomArgs {
    /// Second writes: encoding success per attempt, per mille (the paper's 950; its figure 12
    /// sweeps 750-1000).
    #[arg(long, default_value_t = 950)]
    wom_success_permille: u32,
    /// Second writes: encoding attempts on the same pages (2: the paper's polar-code retry; 1:
    /// no retry, figure 12(a)).
    #[arg(long, default_value_t = 2)]
    wom_attempts: u32,
    /// Second writes: after the attempts fail, encode once more on the next pair of invalid
    /// pages (read first), then fall back to a first write (the paper's figure 12(c)).
    #[arg(long)]
    wom_retry_new_pair: bool,
    /// Second writes: controller time per encoding attempt, us (default: the paper's
    /// worst-case ECC computation, half of tR 25 us).
    #[arg(long, default_value_t = 12.5)]
    wom_encode_us: f64,
    /// Second writes: controller time per decoding, us.
    #[arg(long, default_value_t = 12.5)]
    wom_decode_us: f64,
    /// Second writes: prefetch into a slot per plane pair (slots, the paper's) or only the next
    /// second write's pair (next).
    #[arg(long, default_value = "slots")]
    wom_prefetch: String,
    /// Second writes: requests smaller than this many KiB are hot (the paper's 64; its figure
    /// 10 sweeps 16-256).
    #[arg(long, default_value_t = 64)]
    hot_threshold_kib: u64,
}

impl Default for WomArgs {
    fn default() -> Self {
        let d = WomOptions::default();
        WomArgs {
            wom_success_permille: d.success_permille,
            wom_attempts: d.attempts,
            wom_retry_new_pair: d.retry_new_pair,
            wom_encode_us: d.encode_ns as f64 / 1000.0,
            wom_decode_us: d.decode_ns as f64 / 1000.0,
            wom_prefetch: "slots".into(),
            hot_threshold_kib: d.hot_threshold_bytes / 1024,
        }
    }
}

#[derive(Args, Clone)]
struct RunOpts {
    /// Second writes (wom): GC recycles only victims with at most this share (per mille) of
    /// valid pages (1000: no limit, the paper's rule).
    #[arg(long, default_value_t = 1000)]
    wom_recycle_max_valid: u32,
    /// Second writes' settings.
    #[command(flatten)]
    wom: WomArgs,
    /// End the measured part once the blocks have spent this share (per mille) of their rated
    /// endurance on average (the lifetime run: 1000 = worn out, 300 = the paper's life share of
    /// second writes; combine with --until-written or enough --writes so the input lasts).
    #[arg(long)]
    until_worn_permille: Option<u32>,
    /// Before measuring: none, seq, seq+random:PASSES, eti (= seq+random:2).
    #[arg(long, default_value = "none")]
    precondition: String,
    /// Outstanding requests in closed-loop replay (traces without times, synthetic workloads).
    #[arg(long, default_value_t = 1)]
    queue_depth: u32,
    /// Ignore trace times and replay closed loop.
    #[arg(long)]
    closed_loop: bool,
    /// GC pacing: on (a copy budget per host write, the default) or off (whole victims when a
    /// host block opens in a plane below its free reserve).
    #[arg(long, default_value = "on")]
    gc_pacing: String,
    /// The FTL's multi-plane operations (ftl_core::multiplane): off (one plane at a time, the
    /// default here, so that the figures of the studies before issue #20 stay reproducible) or on
    /// (erases, programs and reads of sibling planes together, the library's default).
    #[arg(long, default_value = "off")]
    multi_plane: String,
    /// GC copies as multi-plane programs, one page per plane of a LUN (ftl_core::gc_stripe):
    /// on (the FTL is lent one page buffer per plane; only with --multi-plane on) or off (the
    /// default for now, so that the multi-plane evaluations keep their figures: GC copies one
    /// page at a time).
    #[arg(long, default_value = "off")]
    gc_stripes: String,
    /// The order consecutive host pages visit the planes in (ftl_core::StripeOrder):
    /// plane-first (the planes of LUN 0, then LUN 1, ...; the default) or channel-first (one
    /// page on each LUN, so each channel, before the next plane of any: MQSim's CWDP order).
    #[arg(long, default_value = "plane-first")]
    stripe: String,
    /// Batching of queued writes: off (one request at a time, the default) or on (whole-page
    /// writes queued at one instant in the closed loop, up to --queue-depth, go to the FTL as
    /// one Ftl::write_many; each still completes when its own pages are programmed).
    #[arg(long, default_value = "off")]
    batch: String,
    /// Mapping table: flat (one word per logical page in RAM) or cached (map pages on flash
    /// behind a RAM cache of --map-cache-kib; of the techniques only flex-ecc runs with it).
    #[arg(long, default_value = "flat")]
    map: String,
    /// Map cache size in KiB (with --map cached; default 16).
    #[arg(long)]
    map_cache_kib: Option<u32>,
    /// Classifier parameters.
    #[command(flatten)]
    classifier: ClassifierArgs,
    /// On-device write buffer in MiB (the CAFTL paper's 2-16 MB): writes complete when they
    /// enter it, reads of buffered pages are served from it, the hash processor fingerprints one
    /// write at a time (sim::write_buffer). Default: none (write-through).
    #[arg(long)]
    write_buffer_mib: Option<u64>,
    /// Blocks the mount pool may list (the blocks a mount after a power cut reads; see
    /// ftl-core/src/pool.rs; the library's default is 160). The simulator's default 0 (no pool,
    /// every mount after a cut surveys every block, no pool records; wom, dedup and the NV cache
    /// mount by survey and keep none either) keeps the techniques' evaluations like for like
    /// with their baselines.
    #[arg(long, default_value_t = 0)]
    mount_pool_blocks: u32,
    /// Write the JSON report here.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Write plots (SVG and PNG) into this directory.
    #[arg(long)]
    plots: Option<PathBuf>,
    /// No progress bar, no table (for scripts).
    #[arg(long)]
    quiet: bool,
    /// NV cache capacity in pages (feature cdm). In `run` it turns the cache on; in `compare` it
    /// sizes the cache of the configurations named `cdm` or `nvm-basic`.
    #[arg(long, conflicts_with = "nv_cache_percent")]
    nv_cache_pages: Option<u32>,
    /// NV cache capacity in percent of the device's logical pages (instead of --nv-cache-pages).
    #[arg(long)]
    nv_cache_percent: Option<f64>,
    /// NV cache policy: cdm (GC drops cached valid pages) or basic (the same NVM managed like a
    /// volatile LRU cache). Default cdm.
    #[arg(long)]
    nv_policy: Option<String>,
    /// What an NV cache read miss does: lru (cache the page, evicting the least recently used
    /// slot, written back first if it is an only copy), clean (cache it only when that needs no
    /// write-back), off.
    #[arg(long, default_value = "lru")]
    nv_read_fill: String,
}

/// Settings of `--features flex-ecc` runs (the cache manager, disk, bit errors, decode costs and
/// scrubber; see `sim_host::sim::flexecc`).
#[derive(Args, Clone)]
struct FlexArgs {
    /// flex-ecc: the device's ECC: flex (BCH for dirty pages, CRC for clean ones) or all-bch.
    #[arg(long, default_value = "flex")]
    ecc: String,
    /// flex-ecc: cache size in pages (default: half the device's logical pages).
    #[arg(long)]
    cache_pages: Option<u32>,
    /// flex-ecc: cache size as a share of the device's logical pages (instead of --cache-pages;
    /// 1: the cache fills the device, as a cache manager given the whole SSD).
    #[arg(long, conflicts_with = "cache_pages")]
    cache_share: Option<f64>,
    /// flex-ecc: periodic flush of all dirty pages every this many ms (0: on eviction only).
    #[arg(long, default_value_t = 5000.0)]
    flush_interval_ms: f64,
    /// flex-ecc: disk access time, ms (also the scrubber's T_disk).
    #[arg(long, default_value_t = 1.5)]
    disk_ms: f64,
    /// flex-ecc: raw bit-error rate of a page read.
    #[arg(long, default_value_t = 0.0)]
    rber: f64,
    /// flex-ecc: growth of the bit-error rate with wear (x (1 + F * erases / endurance)).
    #[arg(long, default_value_t = 0.0)]
    rber_wear_factor: f64,
    /// flex-ecc: growth of the bit-error rate with retention (x (1 + F * age / 1 day)).
    #[arg(long, default_value_t = 0.0)]
    rber_retention_factor: f64,
    /// flex-ecc: bit errors drawn afresh on every read (read noise) instead of staying with the
    /// programmed page (retention and wear errors, the default).
    #[arg(long)]
    transient_errors: bool,
    /// flex-ecc: BCH correction capability t per codeword (also scales its decode cost).
    #[arg(long, default_value_t = 6)]
    ecc_t: u32,
    /// flex-ecc: time of a CRC check of a page, ns; BCH costs t x that on a clean page and 2t x
    /// with errors (default: the paper's 10 us for t = 6, / 6).
    #[arg(long, default_value_t = DecodeTiming::PAPER.t_crc_ns)]
    t_crc_ns: u64,
    /// flex-ecc: the scrubber verifies CRC pages in gaps longer than M x T_crc.
    #[arg(long, default_value_t = 10)]
    scrub_m: u64,
    /// flex-ecc: no scrubber.
    #[arg(long)]
    no_scrub: bool,
    /// flex-ecc: refresh BCH pages read with at least this many corrected bits (0: never).
    #[arg(long, default_value_t = 5)]
    refresh_threshold: u32,
    /// flex-ecc: mean gap between synthetic requests, us (exponential; 0: back to back).
    #[arg(long, default_value_t = 0.0)]
    interarrival_us: f64,
    /// flex-ecc: multiply trace times (and those of the Filebench-like workloads) by this: the
    /// paper's ioscale (100), slowing a trace recorded on a fast SSD down; --ioscale is the same.
    #[arg(long, alias = "ioscale", default_value_t = 1.0)]
    time_scale: f64,
    /// How GC moves pages: off (read out, program in), checked (copy-back: the page is read out
    /// and decoded, only the new parity written back in) or crc-direct (flex-ecc: checked for
    /// BCH pages, CRC pages copied back unread). With flex-ecc the bit-error model charges it
    /// (sim-host/src/sim/ecc_model.rs); without, checked or crc-direct turns the FTL's copy-back
    /// GC on (every copy read out and checked) and the emulator charges each real copy-back.
    #[arg(long, default_value = "off")]
    copy_back: String,
    /// flex-ecc: on (the disk serves one access at a time) or off (every access takes --disk-ms
    /// without queueing: the paper's trace-driven replay, where fills arrive when the trace says).
    #[arg(long, default_value = "on")]
    disk_queue: String,
    /// flex-ecc: where a read's decode time goes: controller (after the transfer, while the LUN
    /// serves its next command) or lun (part of the read's service time on the LUN, as a
    /// simulator with one read latency per page format charges it).
    #[arg(long, default_value = "controller")]
    decode_model: String,
    /// flex-ecc: requests replayed before measuring (cache warm-up).
    #[arg(long, default_value_t = 0)]
    warmup: u64,
    /// flex-ecc: disk pages a synthetic workload addresses, in cache sizes.
    #[arg(long, default_value_t = 12.0)]
    working_set: f64,
}

impl FlexArgs {
    fn config(&self, logical_pages: u32) -> Result<FlexSimConfig, String> {
        let mode: EccMode = self.ecc.parse()?;
        let nonneg = |name: &str, x: f64| {
            if x.is_finite() && x >= 0.0 {
                Ok(x)
            } else {
                Err(format!("--{name} {x} is not a finite non-negative number"))
            }
        };
        if !(0.0..=1.0).contains(&self.rber) {
            return Err(format!("--rber {} is not between 0 and 1", self.rber));
        }
        if !(1..=64).contains(&self.ecc_t) {
            return Err(format!("--ecc-t {} is not between 1 and 64", self.ecc_t));
        }
        if self.t_crc_ns == 0 {
            return Err("--t-crc-ns must be positive".into());
        }
        if self.refresh_threshold > self.ecc_t {
            return Err(format!(
                "--refresh-threshold {} exceeds --ecc-t {}: such pages are uncorrectable already",
                self.refresh_threshold, self.ecc_t
            ));
        }
        let disk_ms = nonneg("disk-ms", self.disk_ms)?;
        if disk_ms == 0.0 {
            return Err("--disk-ms must be positive".into());
        }
        if let Some(c) = self.cache_pages {
            if c == 0 || c > logical_pages {
                return Err(format!(
                    "--cache-pages {c} is not between 1 and the device's {logical_pages} logical pages"
                ));
            }
        }
        let mut cache_pages = self.cache_pages;
        if let Some(f) = self.cache_share {
            if !(f.is_finite() && f > 0.0 && f <= 1.0) {
                return Err(format!("--cache-share {f} is not in (0, 1]"));
            }
            cache_pages = Some(((logical_pages as f64 * f).floor() as u32).max(1));
        }
        let ws = nonneg("working-set", self.working_set)?;
        if ws < 1.0 {
            return Err(format!("--working-set {ws} is below 1 (the cache would hold it all)"));
        }
        let mut fx = FlexSimConfig {
            mode,
            cache_pages,
            flush_interval_ns: (nonneg("flush-interval-ms", self.flush_interval_ms)? * 1e6) as u64,
            disk_ns: (disk_ms * 1e6) as u64,
            timing: DecodeTiming { t_crc_ns: self.t_crc_ns, t: self.ecc_t },
            rates: ErrorRates {
                rber: self.rber,
                wear_factor: nonneg("rber-wear-factor", self.rber_wear_factor)?,
                retention_factor: nonneg("rber-retention-factor", self.rber_retention_factor)?,
                persistent: !self.transient_errors,
                ..ErrorRates::default()
            },
            scrub_m: self.scrub_m,
            scrub: !self.no_scrub,
            refresh_threshold: self.refresh_threshold,
            interarrival_ns: (nonneg("interarrival-us", self.interarrival_us)? * 1e3) as u64,
            warmup_requests: self.warmup,
            time_scale: match self.time_scale {
                x if x.is_finite() && x > 0.0 => x,
                x => return Err(format!("--ioscale {x} (--time-scale) is not a positive number")),
            },
            workload_pages: None,
            copy_back: self.copy_back.parse()?,
            disk_queue: match self.disk_queue.as_str() {
                "on" => true,
                "off" => false,
                other => return Err(format!("--disk-queue {other}: expected on or off")),
            },
            decode_holds_lun: match self.decode_model.as_str() {
                "controller" => false,
                "lun" => true,
                other => return Err(format!("--decode-model {other}: expected controller or lun")),
            },
        };
        fx.workload_pages = Some((ws * fx.cache_pages_for(logical_pages) as f64).ceil() as u64);
        Ok(fx)
    }
}

/// The requests of an input, replayable.
enum Input {
    Trace {
        trace: Trace,
        has_times: bool,
        skipped: u64,
    },
    /// A synthetic workload; with a mean interarrival time (ns), its requests arrive open loop at
    /// exponentially distributed intervals (seeded by the workload's seed).
    Workload(WorkloadSpec, Option<f64>),
    /// A Filebench-like personality; timed when a mean gap (ns) is given.
    Filebench(FilebenchSpec, bool),
}

impl Input {
    fn load(a: &InputArgs) -> Result<Input, String> {
        if a.loops == 0 {
            return Err("--loop must be at least 1".into());
        }
        match (&a.trace, &a.workload) {
            (Some(path), None) => {
                let format: Format = a.format.parse()?;
                let t = read_trace(path, format, &ParseOptions { skip_bad: a.skip_bad })
                    .map_err(|e| e.to_string())?;
                Ok(Input::Trace { has_times: t.has_times, skipped: t.skipped_lines, trace: t })
            }
            (None, Some(w)) if w.parse::<Personality>().is_ok() => {
                let gap_us = a.arrival_us.unwrap_or(0.0);
                if !(gap_us.is_finite() && gap_us >= 0.0) || a.arrival_us == Some(0.0) {
                    return Err(format!("--arrival-us {gap_us} must be a positive number"));
                }
                if a.writes == 0 {
                    return Err("--writes must be at least 1 for a Filebench workload".into());
                }
                let spec = FilebenchSpec {
                    personality: w.parse()?,
                    writes: a.writes,
                    mean_gap_ns: gap_us * 1000.0,
                    seed: a.seed,
                };
                Ok(Input::Filebench(spec, a.arrival_us.is_some()))
            }
            (None, Some(w)) => {
                if !(0.0..=1.0).contains(&a.read_ratio) {
                    return Err(format!("--read-ratio {} is not between 0 and 1", a.read_ratio));
                }
                if !(0.0..=1.0).contains(&a.dup_ratio) {
                    return Err(format!("--dup-ratio {} is not between 0 and 1", a.dup_ratio));
                }
                let arrival = match a.arrival_us {
                    Some(us) if !(us.is_finite() && us > 0.0) => {
                        return Err(format!("--arrival-us {us} must be a positive number"))
                    }
                    other => other.map(|us| us * 1000.0),
                };
                Ok(Input::Workload(
                    WorkloadSpec {
                        pattern: w.parse::<Pattern>()?,
                        writes: a.writes,
                        read_ratio: a.read_ratio,
                        request_pages: a.request_pages.parse::<RequestPages>()?,
                        duplicate_ratio: a.dup_ratio,
                        seed: a.seed,
                    },
                    arrival,
                ))
            }
            _ => Err("give either --trace FILE or --workload PATTERN".into()),
        }
    }

    fn len_hint(&self, loops: u32) -> Option<u64> {
        match self {
            Input::Trace { trace, .. } => Some(trace.requests.len() as u64 * loops as u64),
            Input::Workload(w, _) => {
                (w.read_ratio < 1.0).then(|| (w.writes as f64 / (1.0 - w.read_ratio)).round() as u64)
            }
            Input::Filebench(..) => None,
        }
    }

    /// Runs one configuration over this input.
    fn run(&self, cfg: &SimConfig, loops: u32, bar: &ProgressBar) -> Result<SimOutput, String> {
        let started = Instant::now();
        let mut progress = |done: u64| {
            if bar.is_hidden() && started.elapsed() > Duration::from_secs(1) {
                bar.set_draw_target(ProgressDrawTarget::stderr());
            }
            bar.set_position(done);
        };
        match self {
            Input::Trace { trace, .. } => {
                let requests = &trace.requests;
                let span = requests.iter().filter_map(|r| r.time_ns).max().unwrap_or(0)
                    - requests.iter().filter_map(|r| r.time_ns).min().unwrap_or(0);
                let loops = if cfg.write_limit_pages.is_some() { u64::MAX } else { loops as u64 };
                if cfg.write_limit_pages.is_some() && !trace.requests.iter().any(|r| r.is_write()) {
                    return Err("--until-written needs a trace with writes".into());
                }
                let iter = (0..loops).flat_map(|i| {
                    requests.iter().map(move |r| {
                        let mut r = r.clone();
                        r.time_ns = r.time_ns.map(|t| t + i * (span + 1_000_000));
                        r
                    })
                });
                simulate(cfg, iter, &mut progress)
            }
            Input::Filebench(spec, timed) => {
                let page = cfg.device.geometry.data_bytes as u64;
                let n = if cfg.features.contains(&Feature::FlexEcc) {
                    cfg.flex.workload_pages_for(cfg.logical_pages())
                } else {
                    // No cache in front: the files' extents must fit the device.
                    filebench::working_set_within(spec.personality, cfg.logical_pages() as u64, page)
                        .ok_or_else(|| {
                            format!(
                                "the device's {} logical pages cannot hold a Filebench file set",
                                cfg.logical_pages()
                            )
                        })?
                };
                let timed = *timed;
                let w = filebench::generate(spec, n, page)?.map(move |mut r| {
                    if !timed {
                        r.time_ns = None;
                    }
                    r
                });
                simulate(cfg, w, &mut progress)
            }
            Input::Workload(spec, arrival) => {
                let n = if cfg.features.contains(&Feature::FlexEcc) {
                    cfg.flex.workload_pages_for(cfg.logical_pages())
                } else {
                    cfg.logical_pages() as u64
                };
                let w =
                    generate(spec, n, cfg.device.geometry.data_bytes as u64).map_err(|e| e.to_string())?;
                match arrival {
                    Some(mean_ns) => {
                        let mut rng = ChaCha8Rng::seed_from_u64(spec.seed ^ 0x00a7_71a1);
                        let mut t = 0f64;
                        let timed = w.map(move |mut r| {
                            t += -mean_ns * (1.0 - rng.random::<f64>()).ln();
                            r.time_ns = Some(t as u64);
                            r
                        });
                        simulate(cfg, timed, &mut progress)
                    }
                    None => simulate(cfg, w, &mut progress),
                }
            }
        }
    }
}

fn base_config(
    device: &DeviceArgs,
    input: &InputArgs,
    opts: &RunOpts,
    inp: &Input,
) -> Result<SimConfig, String> {
    let has_times = matches!(
        inp,
        Input::Trace { has_times: true, .. } | Input::Workload(_, Some(_)) | Input::Filebench(_, true)
    );
    if !(1..=4096).contains(&opts.queue_depth) {
        return Err(format!("--queue-depth {} is not between 1 and 4096", opts.queue_depth));
    }
    let preset: Preset = device.device.parse()?;
    let mut dev = preset.device();
    let mut flags = device.geometry_flags();
    if let Some(k) = device.luns_per_channel {
        let Some(c) = device.channels else {
            return Err(format!("--luns-per-channel {k} needs --channels"));
        };
        let luns = c.checked_mul(k).filter(|&l| k > 0 && l <= 256).ok_or_else(|| {
            format!("--luns-per-channel {k} x --channels {c} is not between 1 and 256 LUNs")
        })?;
        if flags.luns.is_some_and(|l| l != luns) {
            return Err(format!(
                "--luns {} disagrees with --channels {c} x --luns-per-channel {k} = {luns}",
                flags.luns.unwrap_or(0)
            ));
        }
        flags.luns = Some(luns);
    }
    dev.geometry = flags.apply(dev.geometry)?;
    if let Some(s) = &device.scheduling {
        dev.timing.scheduling = s.parse().map_err(|e| format!("--scheduling: {e}"))?;
    }
    if let Some(s) = &device.read_priority {
        dev.read_priority = match s.as_str() {
            "on" => true,
            "off" => false,
            _ => return Err(format!("--read-priority: unknown value '{s}' (expected on or off)")),
        };
    }
    if let Some(x) = device.xfer_ns_per_byte {
        if !(x.is_finite() && (0.0..=1000.0).contains(&x)) {
            return Err(format!("--xfer-ns-per-byte {x} is not between 0 and 1000"));
        }
        dev.timing.t_xfer_ps_per_byte = (x * 1000.0).round() as u64;
    }
    if let Some(c) = device.channels {
        if c == 0 || c > dev.geometry.luns {
            return Err(format!("--channels {c} is not between 1 and the {} LUNs", dev.geometry.luns));
        }
        dev.channels = c;
    }
    let op = device.op.unwrap_or(dev.default_op_percent);
    if !(op > 0.0 && op <= 400.0) {
        return Err(format!("--op {op} is not a percentage between 0 (exclusive) and 400"));
    }
    let mut footprint = None;
    if device.fit {
        let Input::Trace { trace, .. } = inp else {
            return Err("--fit sizes the device to a trace; give --trace".into());
        };
        let f = footprint_pages(trace, dev.geometry.data_bytes as u64);
        dev.geometry = if device.op_beyond_reserve {
            // Grown from one block per plane by `beyond_reserve`.
            Geometry { blocks_per_plane: 1, ..dev.geometry }
        } else {
            fit_geometry(dev.geometry, f, op)?
        };
        footprint = Some(f);
    }
    let mut op = op;
    if device.op_beyond_reserve {
        (dev.geometry, op) = sim_host::sim::device::beyond_reserve(dev.geometry, op, footprint)?;
    }
    let mut cfg = SimConfig {
        label: "baseline".into(),
        device: dev,
        op_percent: op,
        classifier: ClassifierKind::None,
        features: Vec::new(),
        precondition: opts.precondition.parse::<Precondition>()?,
        address: if input.compact {
            AddressMode::Compact
        } else if input.wrap {
            AddressMode::Wrap
        } else {
            AddressMode::Strict
        },
        queue_depth: opts.queue_depth,
        open_loop: has_times && !opts.closed_loop,
        seed: input.seed,
        write_limit_pages: None,
        nv_cache: None,
        dedup: DedupOptions::default(),
        flex: FlexSimConfig::default(),
        wom: WomOptions {
            recycle_max_valid_permille: opts.wom_recycle_max_valid,
            success_permille: opts.wom.wom_success_permille,
            attempts: opts.wom.wom_attempts,
            retry_new_pair: opts.wom.wom_retry_new_pair,
            encode_ns: us_to_ns("--wom-encode-us", opts.wom.wom_encode_us)?,
            decode_ns: us_to_ns("--wom-decode-us", opts.wom.wom_decode_us)?,
            prefetch_slots: match opts.wom.wom_prefetch.as_str() {
                "slots" => true,
                "next" => false,
                other => return Err(format!("--wom-prefetch {other}: expected slots or next")),
            },
            hot_threshold_bytes: opts.wom.hot_threshold_kib * 1024,
        },
        until_worn_permille: opts.until_worn_permille,
        gc_pacing: match opts.gc_pacing.as_str() {
            "on" => true,
            "off" => false,
            other => return Err(format!("--gc-pacing {other}: expected on or off")),
        },
        multi_plane: match opts.multi_plane.as_str() {
            "on" => true,
            "off" => false,
            other => return Err(format!("--multi-plane {other}: expected on or off")),
        },
        gc_stripes: match opts.gc_stripes.as_str() {
            "on" => true,
            "off" => false,
            other => return Err(format!("--gc-stripes {other}: expected on or off")),
        },
        stripe_order: match opts.stripe.as_str() {
            "plane-first" => ftl_core::StripeOrder::PlaneFirst,
            "channel-first" => ftl_core::StripeOrder::ChannelFirst,
            other => return Err(format!("--stripe {other}: expected plane-first or channel-first")),
        },
        batch: match opts.batch.as_str() {
            "on" => true,
            "off" => false,
            other => return Err(format!("--batch {other}: expected on or off")),
        },
        check_data: false,
        map: MapChoice::Flat,
        classifier_opts: ClassifierOpts {
            eti_alpha: opts.classifier.eti_alpha,
            eti_beta: opts.classifier.eti_beta,
            eti_decay: opts.classifier.eti_decay,
            hashes: opts.classifier.hashes,
            mbf_scale: opts.classifier.mbf_size,
            guard: opts.classifier.guard,
            guard_margin_permille: opts.classifier.guard_margin,
            guard_window: opts.classifier.guard_window,
            guard_alt: None,
        },
        write_buffer_bytes: opts.write_buffer_mib.map(|m| m * (1 << 20)),
        mount_pool_blocks: opts.mount_pool_blocks,
    };
    cfg.classifier_opts.apply("")?;
    cfg.map = map_choice(&opts.map, opts.map_cache_kib)?;
    if opts.wom_recycle_max_valid > 1000 {
        return Err(format!(
            "--wom-recycle-max-valid {} is above 1000 per mille",
            opts.wom_recycle_max_valid
        ));
    }
    if let Some(f) = input.until_written {
        if !(f.is_finite() && f > 0.0) {
            return Err(format!("--until-written {f} is not a positive number"));
        }
        cfg.write_limit_pages = Some((f * cfg.logical_pages() as f64).ceil() as u64);
    }
    Ok(cfg)
}

/// Microseconds from the command line as nanoseconds.
fn us_to_ns(flag: &str, us: f64) -> Result<u64, String> {
    if !(us.is_finite() && (0.0..=1e6).contains(&us)) {
        return Err(format!("{flag} {us} is not between 0 and 1000000"));
    }
    Ok((us * 1000.0).round() as u64)
}

/// The geometry with the fewest blocks (a multiple of the planes) whose logical capacity at `op`
/// percent over-provisioning holds `footprint` pages and which the FTL accepts (its own reserve of
/// free, open and checkpoint blocks comes on top where the over-provisioning alone is too small).
/// Applies `--nv-read-fill` to the cache, if any.
fn with_read_fill(nv: Option<NvCacheSpec>, opts: &RunOpts) -> Result<Option<NvCacheSpec>, String> {
    let read_fill = parse_read_fill(&opts.nv_read_fill)?;
    Ok(nv.map(|s| NvCacheSpec { read_fill, ..s }))
}

/// `--nv-cache-pages`, or `--nv-cache-percent` of the logical pages.
fn nv_cache_pages(opts: &RunOpts, cfg: &SimConfig) -> Result<Option<u32>, String> {
    match opts.nv_cache_percent {
        None => Ok(opts.nv_cache_pages),
        Some(p) if p.is_finite() && p > 0.0 && p <= 100.0 => {
            Ok(Some(((p / 100.0 * cfg.logical_pages() as f64).ceil() as u32).max(1)))
        }
        Some(p) => Err(format!("--nv-cache-percent {p} is not a percentage in (0, 100]")),
    }
}

fn fit_geometry(g: Geometry, footprint: u64, op: f64) -> Result<Geometry, String> {
    let units = g.planes_per_lun * g.luns;
    let raw = (footprint as f64 * (1.0 + op / 100.0)).ceil() as u64;
    let mut blocks = (raw.div_ceil(g.pages_per_block as u64) as u32).div_ceil(units).max(1) * units;
    for _ in 0..100_000 {
        let cand = Geometry { blocks_per_plane: blocks / units, ..g };
        let logical = (cand.total_pages() as f64 / (1.0 + op / 100.0)).floor() as u32;
        if logical as u64 >= footprint
            && Config::with_logical_pages(&cand, logical).validate(&cand, 0).is_ok()
        {
            return Ok(cand);
        }
        blocks += units;
    }
    Err(format!("no device of this shape fits a footprint of {footprint} pages"))
}

fn progress_bar(total: Option<u64>, quiet: bool, label: &str) -> ProgressBar {
    if quiet {
        return ProgressBar::hidden();
    }
    let bar = match total {
        Some(n) => ProgressBar::with_draw_target(Some(n), ProgressDrawTarget::hidden()),
        None => ProgressBar::with_draw_target(None, ProgressDrawTarget::hidden()),
    };
    if let Ok(style) =
        ProgressStyle::with_template("{msg:>14} [{bar:40}] {pos}/{len} requests ({per_sec}, eta {eta})")
    {
        bar.set_style(style.progress_chars("=> "));
    }
    bar.set_message(label.to_string());
    bar
}

fn write_json(path: &Path, value: &impl serde::Serialize) -> Result<(), String> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    let text = serde_json::to_string_pretty(value).map_err(|e| e.to_string())?;
    std::fs::write(path, text + "\n").map_err(|e| format!("{}: {e}", path.display()))
}

fn print_report(out: &SimOutput, skipped: u64) {
    let r = &out.report;
    println!("{}: {} requests ({} skipped lines)", r.label, r.requests, skipped);
    println!(
        "  host pages: {} read, {} written ({} read-modify-write)",
        r.host_read_pages, r.host_write_pages, r.rmw_pages
    );
    println!(
        "  NAND: {} reads, {} programs, {} erases, {} GC copies; WAF {:.3}",
        r.nand_reads, r.nand_programs, r.nand_erases, r.gc_page_copies, r.waf
    );
    println!(
        "  erases per block: min {} max {} mean {:.2}",
        r.erase_count_min, r.erase_count_max, r.erase_count_mean
    );
    for (name, l) in [("read", &r.read_latency_us), ("write", &r.write_latency_us)] {
        println!(
            "  {name} response (us): mean {:.1} p50 {:.1} p99 {:.1} p99.9 {:.1} stddev {:.1}",
            l.mean, l.p50, l.p99, l.p999, l.stddev
        );
    }
    println!(
        "  simulated {:.3} s in {:.3} s wall: {:.0} requests/s",
        r.simulated_seconds, r.sim_wall_seconds, r.sim_requests_per_second
    );
    if let Some(f) = r.features.get("flex_ecc") {
        let g = |k: &str| f.get(k).and_then(|v| v.as_u64()).unwrap_or(0);
        let ms = |k: &str| f.get(k).and_then(|v| v.as_f64()).unwrap_or(0.0);
        let d = |k: &str| f.get(k).and_then(|v| v.get("mean")).and_then(|v| v.as_f64()).unwrap_or(0.0);
        println!(
            "  flex-ecc ({}): read hits {} misses {}; BCH reads {} CRC reads {}; BCH->CRC {}; corrupt CRC from disk {}, prefetched {}",
            f.get("mode").and_then(|v| v.as_str()).unwrap_or("?"),
            g("read_hits"),
            g("read_misses"),
            g("bch_reads"),
            g("crc_reads"),
            g("gc_bch_to_crc"),
            g("crc_corrupt_served_from_disk"),
            g("scrub_prefetched")
        );
        println!(
            "  device response (us): mean {:.1} (host reads {:.1}); GC time {:.1} ms",
            d("device_latency_us"),
            d("device_read_latency_us"),
            ms("gc_time_ms")
        );
    }
}

fn cmd_run(
    device: &DeviceArgs,
    input: &InputArgs,
    opts: &RunOpts,
    flex: &FlexArgs,
    features: &str,
    classifier: &str,
) -> Result<(), String> {
    let inp = Input::load(input)?;
    let skipped = match &inp {
        Input::Trace { skipped, .. } => *skipped,
        Input::Workload(..) | Input::Filebench(..) => 0,
    };
    let mut cfg = base_config(device, input, opts, &inp)?;
    let pages = nv_cache_pages(opts, &cfg)?;
    let (rest, nv) = take_nv_cache(features, pages, opts.nv_policy.as_deref(), true)?;
    cfg.features = parse_features(&rest)?;
    cfg.nv_cache = with_read_fill(nv, opts)?;
    cfg.dedup = DedupOptions::from_features(&rest)?.unwrap_or_default();
    cfg.flex = flex.config(cfg.logical_pages())?;
    (cfg.classifier, cfg.classifier_opts) = parse_classifier(classifier, cfg.classifier_opts)?;
    let mut names: Vec<&str> = rest.split([',', '+']).map(str::trim).filter(|f| !f.is_empty()).collect();
    if let Some(spec) = nv {
        names.retain(|n| *n != "cdm");
        names.push(match (spec.policy, spec.write_back) {
            (NvPolicy::Basic, false) => "nvm-basic",
            (NvPolicy::Basic, true) => "nvm-basic-wb",
            (NvPolicy::Cdm, false) => "cdm",
            (NvPolicy::Cdm, true) => "cdm-wb",
        });
    }
    let base = if names.is_empty() { "baseline".to_string() } else { names.join("+") };
    cfg.label = if cfg.classifier != ClassifierKind::None { format!("{base}@{classifier}") } else { base };
    let bar = progress_bar(inp.len_hint(input.loops), opts.quiet, &cfg.label);
    let mut out = inp.run(&cfg, input.loops, &bar)?;
    bar.finish_and_clear();
    if !opts.quiet {
        print_report(&out, skipped);
    }
    if let Some(p) = &opts.json {
        write_json(p, &out.report)?;
    }
    if let Some(dir) = &opts.plots {
        let files = plot::run_plots(&mut out, dir)?;
        if !opts.quiet {
            println!(
                "  plots: {}",
                files.iter().map(|f| f.display().to_string()).collect::<Vec<_>>().join(", ")
            );
        }
    }
    Ok(())
}

fn cmd_compare(
    device: &DeviceArgs,
    input: &InputArgs,
    opts: &RunOpts,
    flex: Option<&FlexArgs>,
    configs: &str,
) -> Result<(), String> {
    let inp = Input::load(input)?;
    let mut base = base_config(device, input, opts, &inp)?;
    if let Some(f) = flex {
        base.flex = f.config(base.logical_pages())?;
    }
    let mut cfgs = Vec::new();
    for item in configs.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        cfgs.push(compare_config(&base, opts, item).map_err(|e| format!("--configs {item}: {e}"))?);
    }
    if cfgs.is_empty() {
        return Err("--configs names no configuration".into());
    }
    let mut rows = Vec::new();
    let mut outs = Vec::new();
    for c in &cfgs {
        if let Some(reason) = refusal(c) {
            rows.push(CompareRow::Refused { label: c.label.clone(), reason });
            continue;
        }
        let bar = progress_bar(inp.len_hint(input.loops), opts.quiet, &c.label);
        let out = inp.run(c, input.loops, &bar)?;
        bar.finish_and_clear();
        rows.push(CompareRow::Ran(Box::new(out.report.clone())));
        outs.push(out);
    }
    if !opts.quiet {
        print!("{}", compare_table(&rows));
    }
    if let Some(p) = &opts.json {
        write_json(p, &rows.iter().map(CompareRow::to_json).collect::<Vec<_>>())?;
    }
    if let Some(dir) = &opts.plots {
        plot::compare_plots(&mut outs, dir)?;
    }
    Ok(())
}

/// One `--configs` item (FEATURES[@CLASSIFIER], see `compare --help`) on top of `base`.
fn compare_config(base: &SimConfig, opts: &RunOpts, item: &str) -> Result<SimConfig, String> {
    let (feat, class) = item.split_once('@').unwrap_or((item, "none"));
    let mut c = base.clone();
    // `flex-ecc:MODE` picks the device ECC; other techniques' options after colons are their own.
    let mut names = Vec::new();
    for f in feat.split('+').map(str::trim) {
        match f.split_once(':') {
            Some(("flex-ecc", mode)) => {
                c.flex.mode = mode.parse()?;
                names.push("flex-ecc");
            }
            _ if f == "none" => names.push("baseline"),
            _ => names.push(f),
        }
    }
    let feat = names.join("+");
    let (rest, nv) = take_nv_cache(&feat, nv_cache_pages(opts, base)?, opts.nv_policy.as_deref(), false)?;
    c.features = parse_features(&rest)?;
    c.nv_cache = with_read_fill(nv, opts)?;
    c.dedup = DedupOptions::from_features(&rest)?.unwrap_or_default();
    (c.classifier, c.classifier_opts) = parse_classifier(class, c.classifier_opts)?;
    c.label = item.to_string();
    Ok(c)
}

/// WAF an independent greedy page-mapped FTL measured on the same geometry (issue #2's anchor).
fn anchor(fill: f64) -> Option<f64> {
    [(60.0, 1.42), (73.0, 2.0), (80.0, 2.57), (90.0, 4.83)]
        .iter()
        .find(|(f, _)| (*f - fill).abs() < 0.01)
        .map(|x| x.1)
}

fn waf_table(fills: &[f64], warmup: f64, measure: f64, seed: u64) -> Result<(), String> {
    println!("geometry: 1024 blocks x 64 pages x 2 KiB, 2 planes; uniform random single-page overwrites");
    println!(
        "{:>6} {:>9} {:>8} {:>9} {:>8} {:>10} {:>7} {:>9}",
        "fill%", "WAF(gc)", "anchor", "diff", "WAF(all)", "ec min-max", "spread", "RAM KiB"
    );
    for &fill in fills {
        if !(1.0..=99.0).contains(&fill) {
            return Err(format!("fill level {fill} is not a percentage between 1 and 99"));
        }
        let run = SteadyState {
            geometry: SteadyState::ANCHOR_GEOMETRY,
            utilization_permille: (fill * 10.0).round() as u32,
            warmup,
            measure,
            seed,
        };
        let r = run.run()?;
        let (a, d) = match anchor(fill) {
            Some(a) => (format!("{a:.2}"), format!("{:+.1}%", (r.waf_gc / a - 1.0) * 100.0)),
            None => ("-".into(), "-".into()),
        };
        println!(
            "{:>6.1} {:>9.2} {:>8} {:>9} {:>8.2} {:>10} {:>7} {:>9}",
            fill,
            r.waf_gc,
            a,
            d,
            r.waf_total,
            format!("{}-{}", r.erase_min, r.erase_max),
            r.erase_max - r.erase_min,
            r.ram_bytes / 1024
        );
    }
    Ok(())
}

fn mount_table(cuts: u32) -> Result<(), String> {
    print_mount(
        &sim_host::mount_cost::measure(SteadyState::ANCHOR_GEOMETRY, 900, cuts, 5, MapChoice::Flat)?,
        900,
        cuts,
    );
    Ok(())
}

/// `ftl-sim mount`: the device options (geometry and --op, which sets the fill), the map kind.
fn mount_command(
    device: &DeviceArgs,
    cuts: u32,
    map: &str,
    cache_kib: Option<u32>,
    json: Option<&Path>,
) -> Result<(), String> {
    let choice = map_choice(map, cache_kib)?;
    let preset: Preset = device.device.parse()?;
    let flags = device.geometry_flags();
    let geometry = flags.apply(preset.device().geometry)?;
    let permille = match device.op {
        Some(op) if op > 0.0 && op <= 400.0 => (1000.0 / (1.0 + op / 100.0)).floor() as u32,
        Some(op) => return Err(format!("--op {op} is not a percentage between 0 (exclusive) and 400")),
        None => 900,
    };
    let r = sim_host::mount_cost::measure(geometry, permille, cuts, 5, choice)?;
    print_mount(&r, permille, cuts);
    if let Some(path) = json {
        write_json(
            path,
            &serde_json::json!({
                "map": map,
                "blocks": r.blocks,
                "pages": r.pages,
                "fill_permille": permille,
                "checkpoint_pages": r.checkpoint_pages,
                "cuts": cuts,
                "mount_reads_clean": r.clean_reads,
                "mount_reads_after_cut_mean": r.cut_reads_mean,
                "mount_reads_after_cut_max": r.cut_reads_max,
                "mount_replayed_pages_max": r.cut_replayed_max,
                "mount_replayed_pages_mean": r.cut_replayed_mean,
                "mount_surveyed_blocks_after_cut_max": r.cut_surveyed_max,
            }),
        )?;
    }
    Ok(())
}

fn print_mount(r: &sim_host::mount_cost::MountCost, permille: u32, cuts: u32) {
    println!(
        "mount cost ({} blocks, {} pages, {:.1}% fill, checkpoint of {} pages):",
        r.blocks,
        r.pages,
        permille as f64 / 10.0,
        r.checkpoint_pages
    );
    println!("  after a clean unmount: {} NAND reads", r.clean_reads);
    println!(
        "  after a power cut ({cuts} random cuts): mean {} reads, worst {} reads ({} pages replayed \
         at most, {} on average; first pages of at most {} blocks read)",
        r.cut_reads_mean, r.cut_reads_max, r.cut_replayed_max, r.cut_replayed_mean, r.cut_surveyed_max
    );
    println!("  (a full scan would read {} pages)", r.pages);
}

fn demo(quick: bool, out: &Path) -> Result<(), String> {
    println!("== 1. Baseline write amplification and wear (uniform random overwrites) ==");
    let (w, m) = if quick { (1.0, 1.0) } else { (3.0, 3.0) };
    waf_table(&[60.0, 73.0, 80.0, 90.0], w, m, 1)?;
    println!();
    println!("== 2. Mount cost ==");
    mount_table(if quick { 5 } else { 20 })?;
    println!();
    println!("== 3. Hot/cold separation on an MSR Cambridge window (Heimdall cut 1370) ==");
    println!(
        "   device sized to the trace at 7% spare, ETI preconditioning, replayed until 2x capacity written,"
    );
    println!("   closed loop at queue depth 8: one stream vs the 64 KiB size rule vs MHF vs ETI");
    let trace = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../testdata/traces/msr_cuts_heimdall/msr.cut.per_10k.rw_40_60.1370.trace");
    let device = DeviceArgs::preset("caftl", 7.0, true);
    let input = InputArgs {
        trace: Some(trace),
        format: "heimdall".into(),
        skip_bad: false,
        loops: 1,
        until_written: Some(if quick { 1.0 } else { 2.0 }),
        compact: true,
        wrap: false,
        workload: None,
        writes: 0,
        read_ratio: 0.0,
        request_pages: "1".into(),
        dup_ratio: 0.0,
        arrival_us: None,
        seed: 1,
    };
    let opts = RunOpts {
        wom_recycle_max_valid: 1000,
        wom: WomArgs::default(),
        until_worn_permille: None,
        precondition: "eti".into(),
        queue_depth: 8,
        closed_loop: true,
        gc_pacing: "on".into(),
        multi_plane: "off".into(),
        gc_stripes: "on".into(),
        stripe: "plane-first".into(),
        batch: "off".into(),
        map: "flat".into(),
        map_cache_kib: None,
        write_buffer_mib: None,
        mount_pool_blocks: 0,
        json: Some(out.join("heimdall1370_compare.json")),
        plots: Some(out.join("heimdall1370_plots")),
        quiet: false,
        nv_cache_pages: None,
        nv_cache_percent: None,
        nv_policy: None,
        nv_read_fill: "lru".into(),
        classifier: ClassifierArgs::default(),
    };
    cmd_compare(&device, &input, &opts, None, "baseline,baseline@size,baseline@mhf,eti")?;
    println!("(JSON and plots in {})", out.display());
    println!();
    println!("== 4. Flat vs cached map (16 KiB cache) at 90% fill, with dhara as reference ==");
    map_table(quick)
}

/// Demo section 4: the flat and the cached map side by side on the anchor geometry at 90% of raw
/// in use (uniform random, half reads), with dhara's figures from an independent harness.
fn map_table(quick: bool) -> Result<(), String> {
    let device = DeviceArgs::preset("anchor", 11.111, false);
    let input = InputArgs {
        trace: None,
        format: "heimdall".into(),
        skip_bad: false,
        loops: 1,
        until_written: None,
        compact: false,
        wrap: false,
        workload: Some("uniform".into()),
        writes: if quick { 30_000 } else { 120_000 },
        read_ratio: 0.5,
        request_pages: "1".into(),
        dup_ratio: 0.0,
        arrival_us: None,
        seed: 2,
    };
    let cuts = if quick { 3 } else { 10 };
    println!(
        "   anchor geometry (1024 x 64 x 2 KiB), uniform random single pages, half reads, after a fill and"
    );
    println!(
        "   one random pass; mount: {cuts} random power cuts. dhara: upstream C, measured side by side on an"
    );
    println!("   in-memory NAND with the same geometry (../shared/design/anchors-measured.md), best gc_ratio each.");
    println!(
        "   {:<8} {:>8} {:>12} {:>12} {:>10} {:>12} {:>16}",
        "map", "WAF", "reads/read", "worst write", "RAM (B)", "mount clean", "mount after cut"
    );
    for map in ["flat", "cached"] {
        let opts = RunOpts {
            wom_recycle_max_valid: 1000,
            wom: WomArgs::default(),
            until_worn_permille: None,
            precondition: "seq+random:1".into(),
            queue_depth: 1,
            closed_loop: true,
            gc_pacing: "on".into(),
            multi_plane: "off".into(),
            gc_stripes: "on".into(),
            stripe: "plane-first".into(),
            batch: "off".into(),
            map: map.into(),
            map_cache_kib: None,
            write_buffer_mib: None,
            mount_pool_blocks: 0,
            json: None,
            plots: None,
            quiet: true,
            nv_cache_pages: None,
            nv_cache_percent: None,
            nv_policy: None,
            nv_read_fill: "lru".into(),
            classifier: ClassifierArgs::default(),
        };
        let inp = Input::load(&input)?;
        let mut cfg = base_config(&device, &input, &opts, &inp)?;
        cfg.map = map_choice(map, None)?;
        cfg.label = format!("{map} map");
        let r = inp.run(&cfg, 1, &ProgressBar::hidden())?.report;
        let m = sim_host::mount_cost::measure(SteadyState::ANCHOR_GEOMETRY, 900, cuts, 5, cfg.map)?;
        let reads = r.nand_reads_per_host_read;
        println!(
            "   {:<8} {:>8.2} {:>12.2} {:>12} {:>10} {:>12} {:>16}",
            map,
            r.waf,
            reads,
            r.worst_host_write_programs,
            r.ftl_ram_bytes,
            m.clean_reads,
            format!("{} ({})", m.cut_reads_mean, m.cut_reads_max)
        );
    }
    println!(
        "   {:<8} {:>8} {:>12} {:>12} {:>10} {:>12} {:>16}",
        "dhara", "19.9-33.7", "7.8-8.0", "72-272", "2,112", "59-73", "52-56 (69)"
    );
    println!("   (reads/read: NAND reads a host read causes, its page and the map pages its misses read.)");
    Ok(())
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match &cli.command {
        Command::Run { device, input, opts, flex, features, classifier } => {
            cmd_run(device, input, opts, flex, features, classifier)
        }
        Command::Compare { device, input, opts, flex, configs } => {
            cmd_compare(device, input, opts, Some(flex), configs)
        }
        Command::Demo { quick, out } => demo(*quick, out),
        Command::Waf { fill, warmup, measure, seed } => waf_table(fill, *warmup, *measure, *seed),
        Command::Mount { device, cuts, map, map_cache_kib, json } => {
            mount_command(device, *cuts, map, *map_cache_kib, json.as_deref())
        }
        Command::Serve { device, serve } => sim_host::nbd::serve_command(
            serve,
            &sim_host::nbd::DeviceSpec {
                preset: device.device.clone(),
                flags: device.geometry_flags(),
                op_percent: device.op,
            },
        ),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ftl-sim: {e}");
            ExitCode::FAILURE
        }
    }
}

/// `--map` and `--map-cache-kib` as a map choice (16 KiB of cache by default).
fn map_choice(map: &str, cache_kib: Option<u32>) -> Result<MapChoice, String> {
    match (map, cache_kib) {
        ("flat", None) => Ok(MapChoice::Flat),
        ("flat", Some(_)) => Err("--map-cache-kib applies to --map cached".into()),
        ("cached", kib) => {
            let kib = kib.unwrap_or(16);
            if kib == 0 {
                return Err("--map-cache-kib must be at least 1".into());
            }
            Ok(MapChoice::Cached { cache_bytes: kib as usize * 1024 })
        }
        (other, _) => Err(format!("--map {other}: expected flat or cached")),
    }
}
