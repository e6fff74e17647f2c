//! `ftl-sim serve`: the FTL as a network block device (NBD), on the NAND emulator, persistent in
//! an image file.
//!
//! ```text
//! NBD client (qemu-io, qemu-img, nbd-client, ...)
//!      | TCP (loopback by default)
//! protocol.rs   fixed newstyle negotiation (OPT_GO/INFO/EXPORT_NAME/LIST/ABORT); READ, WRITE,
//!      |        FLUSH, TRIM, DISC with simple replies; every request checked before use
//! server.rs     listener, a thread per connection, FtlExport: the device behind one mutex
//!      |
//! disk.rs       BlockDisk: std::io over ftl_block::SectorDisk (byte offsets and lengths onto
//!               whole FTL pages, read-modify-write)
//!      |
//! ftl_core::Ftl (baseline policies)
//!      |
//! image.rs      PersistentNand: the emulator + image snapshot + redo log of NAND operations,
//!               appended and fsync'ed on every NBD flush / FUA
//! ```
//!
//! Choices:
//! - The protocol is written here with `std` only. The `nbd` crate (0.3) was considered: its
//!   server answers `NBD_OPT_GO` and `NBD_OPT_INFO` with "unsupported", replies `ENOSYS` to trims,
//!   ignores FUA and serves a `Read + Write + Seek`, which leaves nowhere to hook a durable flush
//!   or page-granular trims; the subset needed is a few hundred lines.
//! - Persistence is a snapshot plus a log of NAND operations (see [`image`]) rather than a
//!   rewrite of the whole image on every flush: a flush costs an append and one `fdatasync`,
//!   whatever the device size. What is on disk is always the array at some point between two NAND
//!   operations (what a power cut there would leave), so after a `kill -9` the server mounts it
//!   like after a power cut: everything flushed is intact (guarantee 1) and every page written
//!   since reads as its old or its new content (guarantee 2).
//! - Byte granularity: requests need no alignment (`NBD_INFO_BLOCK_SIZE` says minimum 1,
//!   preferred the page size, maximum 32 MiB); partial pages are read, patched and written whole.
//! - The export is named `ftl`; the empty (default) name selects it too.
//! - Listening beyond loopback needs `--allow-remote`: the protocol has no authentication.

pub mod disk;
pub mod image;
pub mod protocol;
pub mod server;

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

use ftl_core::policy::{DefaultPolicies, PageCodec, PolicySet};
use ftl_core::{Config, Ftl};
use nand_hal::{Geometry, NandFlash};

use crate::emulator::{Emulator, EmulatorConfig};
use crate::memory::FtlMemory;
use crate::sim::device::{GeometryFlags, Preset};

pub use disk::{BlockDisk, DiskError};
pub use image::PersistentNand;
pub use server::FtlExport;

/// The export's name.
pub const EXPORT_NAME: &str = "ftl";

/// Options of `ftl-sim serve` besides the device flags.
#[derive(clap::Args, Clone, Debug)]
pub struct ServeArgs {
    /// Address to listen on. Only loopback addresses unless --allow-remote; port 0 picks a free
    /// port (the address is printed when the server is ready).
    #[arg(long, default_value = "127.0.0.1:10809")]
    pub listen: String,
    /// The NAND image. Created and formatted if missing (geometry from --device and its
    /// overrides); otherwise loaded, with its log PATH.log, and mounted with the geometry and
    /// capacity it was created with (the device flags are then ignored).
    #[arg(long)]
    pub image: PathBuf,
    /// Techniques to enable, comma separated (only the baseline exists yet).
    #[arg(long, default_value = "")]
    pub features: String,
    /// Allow a non-loopback --listen address (NBD has no authentication: anyone who can connect
    /// can read and write the device).
    #[arg(long)]
    pub allow_remote: bool,
    /// Append pending NAND operations to the image log (without a sync) once they exceed this
    /// many bytes, even without a flush; bounds memory between flushes.
    #[arg(long, default_value_t = 16 << 20)]
    pub spill_bytes: usize,
    /// Most simultaneous connections.
    #[arg(long, default_value_t = 16)]
    pub max_connections: usize,
    /// Serve an image whose log is damaged or missing (a bad batch followed by valid ones, a
    /// damaged header, no log), accepting the rollback to the state before the damage: writes
    /// flushed after it are lost. Without it such an image is refused with what would be lost.
    /// The damaged log is kept as PATH.log.damaged.
    #[arg(long)]
    pub accept_log_rollback: bool,
}

/// The device to create when the image does not exist: a preset, overrides, over-provisioning.
#[derive(Clone, Debug, PartialEq)]
pub struct DeviceSpec {
    /// Preset name (`ftl-sim run --device`).
    pub preset: String,
    /// Geometry overrides.
    pub flags: GeometryFlags,
    /// Over-provisioning in percent; the preset's default otherwise.
    pub op_percent: Option<f64>,
}

/// The FTL configuration for `geometry` at `op` percent over-provisioning.
pub fn ftl_config(geometry: &Geometry, op: f64) -> Result<Config, String> {
    if !(op > 0.0 && op <= 400.0) {
        return Err(format!("--op {op} is not a percentage between 0 (exclusive) and 400"));
    }
    let logical = (geometry.total_pages() as f64 / (1.0 + op / 100.0)).floor() as u32;
    let cfg = Config::with_logical_pages(geometry, logical);
    let codec = DefaultPolicies::default().codec_ref().spare_len();
    cfg.validate(geometry, codec)
        .map_err(|e| format!("the geometry cannot hold an FTL at {op}% over-provisioning: {e}"))?;
    Ok(cfg)
}

/// Opens the image at `path` (replaying its log) or, if it does not exist, creates a device for
/// `spec`. Returns the device, the FTL configuration and whether it was created. A damaged or
/// missing log is refused unless `accept_rollback` (then the damaged log is copied to
/// `PATH.log.damaged` before the server replaces it).
pub fn open_or_create(
    path: &Path,
    spec: &DeviceSpec,
    accept_rollback: bool,
) -> Result<(PersistentNand, Config, bool), String> {
    let preset: Preset = spec.preset.parse()?;
    let dev = preset.device();
    let op = spec.op_percent.unwrap_or(dev.default_op_percent);
    match PersistentNand::open(path, accept_rollback) {
        Ok(opened) => {
            let lp = image::log_path(path);
            if let Some(why) = opened.log.rollback_description(&lp) {
                let kept = if lp.exists() {
                    let damaged = lp.with_extension("log.damaged");
                    fs::copy(&lp, &damaged).map_err(|e| format!("keeping {}: {e}", damaged.display()))?;
                    format!(" (the damaged log is kept as {})", damaged.display())
                } else {
                    String::new()
                };
                eprintln!("ftl-sim serve: --accept-log-rollback: {why}; serving the older state{kept}");
            } else if let image::LogState::Replayed { torn_tail: n @ 1.. } = opened.log {
                eprintln!(
                    "ftl-sim serve: {}: dropped an incomplete last batch of {n} bytes (an append cut by \
                     a crash, never synced)",
                    lp.display()
                );
            }
            let mut nand = opened.nand;
            let cfg = match opened.config {
                Some(c) => c,
                None => {
                    eprintln!(
                        "ftl-sim serve: {} has no log with the FTL configuration; assuming {op}% \
                         over-provisioning",
                        image::log_path(path).display()
                    );
                    ftl_config(&nand.geometry(), op)?
                }
            };
            nand.set_config(cfg);
            Ok((nand, cfg, false))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let geometry = spec.flags.apply(dev.geometry)?;
            let cfg = ftl_config(&geometry, op)?;
            let emu = Emulator::new(EmulatorConfig { timing: dev.timing, ..EmulatorConfig::new(geometry) })
                .map_err(|e| e.to_string())?;
            Ok((PersistentNand::create(path, emu, cfg), cfg, true))
        }
        Err(e) if image::RollbackRefused::of(&e).is_some() => Err(format!(
            "{e}. Refusing to start; `ftl-sim serve --accept-log-rollback` serves the older state (the \
             damaged log is then kept as {}.damaged)",
            image::log_path(path).display()
        )),
        Err(e) => Err(format!("{}: {e}", path.display())),
    }
}

/// `ftl-sim serve`: binds, opens or creates the image, mounts or formats the FTL, prints one
/// line `ftl-sim serve: listening on ADDR ...` on standard output and serves until killed.
pub fn serve_command(args: &ServeArgs, spec: &DeviceSpec) -> Result<(), String> {
    let features = crate::sim::parse_features(&args.features)?;
    if let Some(f) = features.iter().find(|f| {
        matches!(
            f,
            crate::sim::Feature::Wom
                | crate::sim::Feature::WomNoPrefetch
                | crate::sim::Feature::WomSamePlane
                | crate::sim::Feature::WomSameBlock
        )
    }) {
        return Err(format!("feature {f:?} is not implemented in the NBD server (the simulator runs it)"));
    }
    let addrs = server::resolve_listen(&args.listen, args.allow_remote)?;
    let listener = server::bind(&addrs).map_err(|e| format!("--listen {}: {e}", args.listen))?;
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    let (nand, cfg, created) = open_or_create(&args.image, spec, args.accept_log_rollback)?;
    let geometry = nand.geometry();
    let mut mem = FtlMemory::new(&geometry, &cfg);
    let (map, m) = mem.parts();
    let ftl = if created {
        Ftl::format(nand, DefaultPolicies::default(), map, m, cfg)
            .map_err(|e| format!("formatting a new device failed: {e}"))?
    } else {
        Ftl::mount(nand, DefaultPolicies::default(), map, m, cfg).map_err(|e| {
            format!("cannot mount the FTL on {}: {e} (the image is left as it was)", args.image.display())
        })?
    };
    let mut disk =
        BlockDisk::new(ftl).map_err(|e| format!("the FTL cannot be served as a block device: {e}"))?;
    let replayed = disk.ftl().nand().stats().replayed_ops;
    disk.ftl_mut().nand_mut().snapshot().map_err(|e| format!("{}: {e}", args.image.display()))?;
    let export = FtlExport::new(disk, EXPORT_NAME, args.spill_bytes);
    let (size, page) = (export_size(&export), geometry.data_bytes);
    println!(
        "ftl-sim serve: listening on {addr}, export '{EXPORT_NAME}': {size} bytes ({} pages of {page} B), \
         image {} ({})",
        size / page as u64,
        args.image.display(),
        if created {
            "created and formatted".to_string()
        } else {
            format!("mounted, {replayed} logged NAND operations replayed")
        }
    );
    let _ = std::io::stdout().flush();
    server::serve(&listener, &export, args.max_connections.max(1), &AtomicBool::new(false));
    Ok(())
}

fn export_size(e: &FtlExport<'_>) -> u64 {
    protocol::Export::size(e)
}
