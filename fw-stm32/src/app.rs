//! The application, the same on the board and under QEMU. Given an [`OnfiBus`] and memory by the
//! platform ([`Target`]), it
//!
//! 1. identifies the chip with the ONFI driver (RESET, READ ID, parameter page with its CRC) and
//!    checks that its shape is the one the memory was sized for;
//! 2. mounts the FTL, or formats it when the device holds no FTL image (first boot) or the
//!    `force-format` feature is on; after a mount, checks what the previous boot left in the
//!    self-test region;
//! 3. self-test: writes, overwrites and trims the self-test region and verifies it, then
//!    unmounts, identifies the chip again, remounts and verifies it again;
//! 4. benchmark: sequential writes and reads of the whole logical capacity, random writes and
//!    reads, then a GC-heavy phase of random overwrites of the hot three quarters of the
//!    capacity (the first quarter stays cold, so static wear leveling has something to move);
//!    every read is verified;
//! 5. verifies everything, unmounts, identifies, remounts and verifies everything again;
//! 6. the FAT round trip ([`fat`]): formats the FTL's logical space as a FAT16 volume, creates,
//!    writes, reads back and lists two files through embedded-sdmmc, unmounts, identifies and
//!    remounts, lists and reads them again;
//! 7. hands the mounted disk to the platform ([`Target::serve`]): unmounted under QEMU, served as
//!    a USB mass-storage device on the board.
//!
//! Every page written carries its logical page number and a generation (also kept in a table
//! in RAM, four bits per logical page: [`Generations`]) and a pseudo-random body derived from
//! both, so a read checks content, placement and freshness.
//!
//! For each phase it logs the throughput (timer ticks spent in FTL calls only), the cost per page
//! in instructions (QEMU, `-icount`) or CPU cycles (board) split into NAND bus, page codec and
//! the rest (FTL core and ONFI driver), the NAND operations, WAF and GC work, and with the cached
//! map its map-page reads and writes. At the end: RAM used, erase-count spread, the bus's own
//! report, stack depth. Any failure is logged and returned as [`Failed`].
//!
//! RAM: the platform publishes its FTL's RAM as [`RamFigures`] in a `#[no_mangle]` static
//! (`FW_RAM_FIGURES`, computed at build time from `RamLayout`, the map's layout and the size of
//! the `Ftl` struct), which `size-report.py` reads from the ELF; the run checks it against
//! `Ftl::ram_bytes` and fails if they differ.

use ftl_core::{BlockInfo, Config, Counters, Error as FtlError, Memory, RamLayout};
use nand_hal::onfi::OnfiBus;
use nand_hal::{BlockId, Geometry, NandFlash};

use crate::bundle::{self, AppMap, Attach, MapBuffers, MapLayout};
use crate::fat;
use crate::ftl_api::{self as api, AppFtl, Nand};
use crate::log::Loggable;
use crate::meter::{calibrate, Meter, Overhead, TimedBus, TimedNand};
use crate::platform::{now, TICK_HZ, UNIT, UNITS_PER_TICK};

/// Generation of a page never written, or trimmed: it reads as zeros.
const GEN_ZERO: u8 = 0;
/// Generation of a page whose content is unknown (left by an earlier boot outside the
/// self-test region): not verified until written.
const GEN_UNKNOWN: u8 = 0xF;
/// Highest generation before wrapping to 1 (generations take four bits).
const GEN_MAX: u8 = 0xE;
/// First word of every page the application writes.
const MAGIC: u32 = 0x5446_4C46; // "FLFT"

/// The application failed; the reason was logged.
#[derive(Copy, Clone, Debug)]
pub struct Failed;

/// The buffers the FTL borrows, sized by [`RamLayout`] and [`MapLayout`] for the platform's
/// geometry, configuration and map cache (at least; the prefixes are used).
pub struct FtlBuffers {
    /// The map's buffers, [`MapLayout`].
    pub map: MapBuffers,
    /// The valid-page bitmap, [`MapLayout::valid_words`] (none with the cached map).
    pub valid: &'static mut [u32],
    /// The block table, [`RamLayout::blocks`].
    pub blocks: &'static mut [BlockInfo],
    /// The list heads, [`RamLayout::list_heads`].
    pub heads: &'static mut [u32],
    /// One raw page, [`RamLayout::page_buf`].
    pub page_buf: &'static mut [u8],
    /// What the policy bundle attaches (the NV cache with `cdm`).
    pub attach: bundle::AttachBuffers,
}

impl FtlBuffers {
    fn fits(&self, lay: &RamLayout, map: &MapLayout) -> bool {
        self.map.fits(map)
            && self.valid.len() >= map.valid_words
            && self.blocks.len() >= lay.blocks
            && self.heads.len() >= lay.list_heads
            && self.page_buf.len() >= lay.page_buf
    }

    /// The map, the rest and the attachment, for one FTL instance (call only after
    /// [`Self::fits`]).
    // Without `cdm` the attachment is `()`.
    #[allow(clippy::let_unit_value)]
    fn parts(&mut self, lay: &Layouts) -> Result<(AppMap<'_>, Memory<'_>, Attach<'_>), Failed> {
        let attach = self.attach.parts().ok_or_else(|| {
            error!("the policy bundle's attachment (NV cache) refused its memory");
            Failed
        })?;
        let map = self.map.map(&lay.map, &lay.geo, lay.logical_pages).ok_or_else(|| {
            error!("the map refused its memory");
            Failed
        })?;
        let (lay, valid_words) = (&lay.ram, lay.map.valid_words);
        Ok((
            map,
            Memory {
                valid: &mut self.valid[..valid_words],
                blocks: &mut self.blocks[..lay.blocks],
                list_heads: &mut self.heads[..lay.list_heads],
                page_buf: &mut self.page_buf[..lay.page_buf],
            },
            attach,
        ))
    }
}

/// What the FTL's buffers are sized by, for one chip and configuration.
struct Layouts {
    ram: RamLayout,
    map: MapLayout,
    geo: Geometry,
    logical_pages: u32,
}

/// The FTL's RAM in bytes, by part, as a platform publishes it (`FW_RAM_FIGURES`, see the module
/// documentation): `#[repr(C)]` words in this order, which `size-report.py` names.
#[repr(C)]
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct RamFigures {
    /// Logical pages the FTL maps.
    pub logical_pages: u32,
    /// Raw pages of the chip.
    pub raw_pages: u32,
    /// Everything below: what `Ftl::ram_bytes` reports.
    pub ftl_bytes: u32,
    /// Cached map: read lines and dirty-entry buffer.
    pub map_cache: u32,
    /// Cached map: directory (one word per map page, replay bits, buffered counts).
    pub map_directory: u32,
    /// Cached map: its I/O buffer (one raw page).
    pub map_io: u32,
    /// Flat map: its entries.
    pub flat_map: u32,
    /// Flat map: the valid-page bitmap.
    pub valid_bitmap: u32,
    /// Block table.
    pub block_table: u32,
    /// Free and per-valid-count list heads.
    pub list_heads: u32,
    /// The FTL's page buffer.
    pub page_buffer: u32,
    /// The `Ftl` struct.
    pub ftl_struct: u32,
}

/// The [`RamFigures`] of the FTL over bus `B` for `cfg` on `geo` with `cache_bytes` of map cache.
pub const fn ram_figures<B: OnfiBus + 'static>(
    geo: &Geometry,
    cfg: &Config,
    cache_bytes: usize,
) -> RamFigures {
    let lay = RamLayout::new(geo, cfg);
    let map = MapLayout::new(geo, cfg, cache_bytes);
    let block_table = lay.blocks * core::mem::size_of::<BlockInfo>();
    let ftl_struct = core::mem::size_of::<AppFtl<'static, B>>();
    let total = map.bytes() + block_table + 4 * lay.list_heads + lay.page_buf + ftl_struct;
    RamFigures {
        logical_pages: cfg.logical_pages,
        raw_pages: geo.total_pages(),
        ftl_bytes: total as u32,
        map_cache: map.cache_bytes() as u32,
        map_directory: 4 * map.cached.dir_words as u32,
        map_io: map.cached.io_bytes as u32,
        flat_map: 4 * map.flat_words as u32,
        valid_bitmap: 4 * map.valid_words as u32,
        block_table: block_table as u32,
        list_heads: 4 * lay.list_heads as u32,
        page_buffer: lay.page_buf as u32,
        ftl_struct: ftl_struct as u32,
    }
}

/// The test's table of generations: four bits per logical page, two pages a byte.
pub struct Generations<'g>(&'g mut [u8]);

impl Generations<'_> {
    /// Bytes for `pages` logical pages.
    pub const fn bytes(pages: u32) -> usize {
        pages.div_ceil(2) as usize
    }

    fn get(&self, lpn: u32) -> u8 {
        (self.0[lpn as usize / 2] >> (4 * (lpn % 2))) & 0xF
    }

    fn set(&mut self, lpn: u32, gen: u8) {
        let b = &mut self.0[lpn as usize / 2];
        let shift = 4 * (lpn % 2);
        *b = (*b & !(0xF << shift)) | ((gen & 0xF) << shift);
    }

    fn fill(&mut self, gen: u8) {
        self.0.fill((gen & 0xF) * 0x11);
    }
}

/// The application's own buffers.
pub struct TestBuffers {
    /// The generation table, [`Generations::bytes`] of the logical pages.
    pub generations: &'static mut [u8],
    /// One data page to write.
    pub write: &'static mut [u8],
    /// One data page to read into.
    pub read: &'static mut [u8],
}

/// How much work each phase does, in host page operations.
#[derive(Copy, Clone, Debug)]
pub struct Workload {
    /// Pages of the self-test region (from logical page 0).
    pub selftest_pages: u32,
    /// Random single-page writes over the whole capacity.
    pub random_writes: u32,
    /// Random single-page reads over the whole capacity.
    pub random_reads: u32,
    /// Random single-page writes over the hot three quarters of the capacity.
    pub gc_writes: u32,
}

/// What the platform hands the application.
pub struct Target<B: OnfiBus> {
    /// Platform name for the log.
    pub name: &'static str,
    /// The chip's bus.
    pub bus: B,
    /// The shape the buffers were sized for; the chip must have it.
    pub shape: Geometry,
    /// The FTL's configuration for that shape.
    pub config: Config,
    /// About how many bytes of cache the cached map gets (read lines and dirty-entry buffer;
    /// ignored by the flat map).
    pub map_cache_bytes: usize,
    /// What the platform published as its FTL's RAM (`FW_RAM_FIGURES`); checked against
    /// `Ftl::ram_bytes`.
    pub ram_figures: &'static RamFigures,
    /// Memory for the FTL.
    pub ftl: FtlBuffers,
    /// Memory for the application.
    pub test: TestBuffers,
    /// Phase sizes.
    pub workload: Workload,
    /// Format even when an FTL image is found.
    pub force_format: bool,
    /// Logs what the bus itself counted (the chip model's counters under QEMU).
    pub report_bus: fn(&B),
    /// At the end, after every check passed: what the platform does with the disk (the mounted
    /// FTL holding the FAT volume) and a spare page buffer before the FTL is unmounted: nothing
    /// under QEMU, USB mass storage on the board (which does not return).
    pub serve: fn(fat::Disk<'_, '_, '_, B>, &mut [u8]) -> Result<(), Failed>,
}

/// Runs everything (see the module documentation).
pub fn run<B: OnfiBus>(mut t: Target<B>) -> Result<(), Failed>
where
    B::Error: Loggable,
{
    info!("fw-stm32 on {}: FTL on raw ONFI NAND", t.name);
    let mut any = false;
    for (name, on, wired) in bundle::TECHNIQUES {
        if on {
            let state =
                if wired { "in the policy bundle" } else { "compiled, not yet wired into the policy bundle" };
            info!("feature {}: {}", name, state);
            any = true;
        }
    }
    if !any {
        info!("features: none (baseline FTL)");
    }
    info!(
        "policies: codec {}, {}, greedy GC; map {}",
        bundle::CODEC_NAME,
        bundle::CLASSIFIER_NAME,
        bundle::MAP_NAME
    );
    #[cfg(feature = "dedup")]
    info!(
        "dedup: fingerprint store of {} entries ({} buckets), {} virtual pages; {} bytes of the platform's {} for \
         deduplication",
        bundle::DEDUP.buckets * bundle::DEDUP_K,
        bundle::DEDUP.buckets,
        bundle::DEDUP.virtual_pages,
        bundle::DEDUP.bytes(),
        crate::platform::DEDUP_RAM
    );
    let overhead = calibrate();
    info!(
        "timer: {} ticks/s, 1 tick = {} {}; metering costs {}.{:03} ticks inside, {}.{:03} outside a call",
        TICK_HZ,
        UNITS_PER_TICK,
        UNIT,
        overhead.inside_milli / 1000,
        overhead.inside_milli % 1000,
        overhead.outside_milli / 1000,
        overhead.outside_milli % 1000
    );

    // ---- identify ----
    let t0 = now();
    let mut nand = identify(TimedBus::new(t.bus))?;
    info!("identified in {} us", ticks_to_us(now() - t0));
    let geo = nand.geometry();
    if !same_shape(&geo, &t.shape) {
        error!(
            "the chip's shape ({}+{} x {} pages x {} blocks x {} planes x {} LUNs) is not the one \
             the firmware's memory was sized for",
            geo.data_bytes,
            geo.spare_bytes,
            geo.pages_per_block,
            geo.blocks_per_plane,
            geo.planes_per_lun,
            geo.luns
        );
        return Err(Failed);
    }
    let cfg = t.config;
    let lay = Layouts {
        ram: RamLayout::new(&geo, &cfg),
        map: MapLayout::new(&geo, &cfg, t.map_cache_bytes),
        geo,
        logical_pages: cfg.logical_pages,
    };
    if !t.ftl.fits(&lay.ram, &lay.map) {
        error!("FTL buffers smaller than the RAM layout");
        return Err(Failed);
    }
    let n = cfg.logical_pages;
    let pb = geo.data_bytes as usize;
    if t.test.generations.len() < Generations::bytes(n) || t.test.write.len() < pb || t.test.read.len() < pb {
        error!("application buffers too small");
        return Err(Failed);
    }
    {
        let mut codec = policies(&nand, cfg.logical_pages)?.codec;
        crate::codec_bench::run(
            &mut codec,
            bundle::CODEC_T,
            geo.ecc.codeword_bytes as usize,
            &mut t.test.write[..pb],
            &mut t.test.read[..pb],
        )?;
    }
    let mut app = App {
        overhead,
        rng: 0x2545_F491,
        gens: Generations(&mut t.test.generations[..Generations::bytes(n)]),
        wbuf: &mut t.test.write[..pb],
        rbuf: &mut t.test.read[..pb],
        n,
        hot_start: n / 4,
    };
    info!(
        "FTL: {} logical pages of {} bytes ({} KiB) on {} raw pages ({}%); GC below {} free blocks per \
         plane; wear-leveling spread limit {}",
        n,
        pb,
        n as u64 * pb as u64 / 1024,
        geo.total_pages(),
        n as u64 * 100 / geo.total_pages() as u64,
        cfg.gc_free_threshold,
        cfg.wear_spread_limit
    );

    // ---- mount or format ----
    let w = t.workload;
    let region = w.selftest_pages.min(n);
    {
        let mounted = if t.force_format {
            info!("force-format: formatting without trying to mount");
            None
        } else {
            try_mount(&mut nand, &mut t.ftl, &lay, cfg)?
        };
        let (mut ftl, formatted) = match mounted {
            Some(ftl) => (ftl, false),
            None => {
                if !t.force_format {
                    first_boot_check(&mut nand)?;
                }
                (format(&mut nand, &mut t.ftl, &lay, cfg)?, true)
            }
        };
        log_ram(&ftl, &lay.map, t.ram_figures)?;
        if cfg!(feature = "disk") {
            // No test: the disk as it is (FAT-formatted on a blank chip), to the platform.
            disk_mode(&mut ftl, formatted, app.rbuf, app.wbuf, t.serve)?;
            return api::unmount(ftl).map_err(|e| ftl_failed("unmount", e));
        }
        app.gens.fill(if formatted { GEN_ZERO } else { GEN_UNKNOWN });
        if !formatted {
            app.check_previous(&mut ftl, region)?;
        }

        // ---- self-test ----
        app.selftest_writes(&mut ftl, region)?;
        let t0 = now();
        api::unmount(ftl).map_err(|e| ftl_failed("unmount", e))?;
        info!("self-test: unmounted in {} us", ticks_to_us(now() - t0));
    }
    nand = identify(nand.into_inner().release())?;
    {
        let mut ftl = mount(&mut nand, &mut t.ftl, &lay, cfg)?;
        app.verify_range(&mut ftl, 0, region, "self-test after remount")?;
        info!(
            "self-test: PASS ({} pages written, overwritten, trimmed, verified, remounted, verified)",
            region
        );

        // ---- benchmark ----
        info!("benchmark: single-page host requests; 'per page' = {} per host page in FTL calls", UNIT);
        app.seq_write(&mut ftl)?;
        app.seq_read(&mut ftl, "seq-read")?;
        app.random_write(&mut ftl, w.random_writes, 0, "rand-write")?;
        app.random_read(&mut ftl, w.random_reads)?;
        app.random_write(&mut ftl, w.gc_writes, app.hot_start, "gc-heavy")?;
        app.seq_read(&mut ftl, "verify-all")?;
        report_device(&mut ftl);
        #[cfg(feature = "wom")]
        wom_report(&ftl)?;
        end_of_life(ftl)?;
    }
    nand = identify(nand.into_inner().release())?;
    {
        let mut ftl = mount(&mut nand, &mut t.ftl, &lay, cfg)?;
        #[cfg(feature = "cdm")]
        nv_after_reset(&ftl)?;
        app.seq_read(&mut ftl, "remount-verify")?;
        fat::create(&mut ftl, app.rbuf)?;
        let t0 = now();
        api::unmount(ftl).map_err(|e| ftl_failed("unmount", e))?;
        info!("[fat] FTL unmounted in {} us", ticks_to_us(now() - t0));
    }
    nand = identify(nand.into_inner().release())?;
    let mut ftl = mount(&mut nand, &mut t.ftl, &lay, cfg)?;
    fat::check(&mut ftl, app.rbuf, "after unmount and remount")?;
    info!("FAT round trip: PASS (format, create, write, read back, list, remount, list, read back)");
    {
        let bus = ftl.nand().inner().bus();
        info!("NAND bus: {} calls, {} {} in all", bus.meter.calls, bus.meter.ticks * UNITS_PER_TICK, UNIT);
        (t.report_bus)(bus.inner());
    }
    info!("stack: {} bytes used at most", crate::stack::used());
    (t.serve)(fat::disk(&mut ftl, app.rbuf)?, app.wbuf)?;
    api::unmount(ftl).map_err(|e| ftl_failed("unmount", e))
}

/// Feature `disk`: formats a FAT16 volume if the FTL was just formatted (a blank chip), lists
/// the volume's root directory if there is one, and hands the disk to the platform. Nothing is
/// tested and nothing the disk holds is changed.
#[inline(never)]
fn disk_mode<B: OnfiBus>(
    ftl: &mut AppFtl<'_, B>,
    formatted: bool,
    page_buf: &mut [u8],
    spare_buf: &mut [u8],
    serve: fn(fat::Disk<'_, '_, '_, B>, &mut [u8]) -> Result<(), Failed>,
) -> Result<(), Failed> {
    info!("disk mode (feature disk): no self-test or benchmark; the disk keeps what it holds");
    if formatted {
        fat::format(ftl, page_buf)?;
    }
    if fat::list(ftl, page_buf).is_none() && formatted {
        error!("the FAT volume just formatted does not open");
        return Err(Failed);
    }
    info!("stack: {} bytes used at most", crate::stack::used());
    serve(fat::disk(ftl, page_buf)?, spare_buf)
}

/// After the benchmark: unmount; with `cdm`, a simulated reset instead (flush, then drop the FTL
/// without unmounting: the NV cache region keeps what it holds, RAM state is lost), which the
/// next mount must reconcile.
fn end_of_life<B: OnfiBus>(mut ftl: AppFtl<'_, B>) -> Result<(), Failed> {
    let t0 = now();
    if cfg!(feature = "cdm") {
        api::flush(&mut ftl).map_err(|e| ftl_failed("flush", e))?;
        #[cfg(feature = "cdm")]
        if let Some(c) = ftl.nv_counters() {
            info!(
                "NV cache: {} write inserts, {} read fills, {} evictions ({} write-backs), {} GC drops, {} NVM bytes \
                 written",
                c.write_inserts,
                c.read_fills,
                c.evictions,
                c.write_backs,
                c.gc_drops,
                c.nvm_write_bytes
            );
        }
        // Returning drops the FTL without unmount: the simulated reset.
        info!("simulated reset: FTL dropped without unmount after a flush; the NV cache region is kept");
        return Ok(());
    }
    api::unmount(ftl).map_err(|e| ftl_failed("unmount", e))?;
    info!("unmounted in {} us", ticks_to_us(now() - t0));
    Ok(())
}

/// With `wom`: what second writes did; the run fails if none happened (the technique did not
/// run) or if one was read back wrong (the verification phases would have failed first).
#[cfg(feature = "wom")]
fn wom_report<B: OnfiBus>(ftl: &AppFtl<'_, B>) -> Result<(), Failed> {
    let s = ftl.reuse_stats().unwrap_or_default();
    info!(
        "wom: {} second writes ({} retries, {} encode failures), {} second-write reads, {} blocks recycled, {} pairs",
        s.second_writes,
        s.retries,
        s.encode_failures,
        s.second_reads,
        s.recycled,
        s.pairs
    );
    if s.second_writes == 0 {
        error!("wom: no second write happened");
        return Err(Failed);
    }
    Ok(())
}

/// With `cdm`, after the simulated reset: the mount found the NV cache (its slots reconciled
/// with flash), else the region did not survive.
#[cfg(feature = "cdm")]
fn nv_after_reset<B: OnfiBus>(ftl: &AppFtl<'_, B>) -> Result<(), Failed> {
    let c = ftl.nv_counters().unwrap_or_default();
    info!(
        "NV cache after the reset: {} slots restored ({} only copies), {} stale",
        c.mount_restored, c.mount_only_copy, c.mount_stale
    );
    if c.mount_restored + c.mount_stale == 0 {
        error!("the NV cache held nothing after the reset: its region did not survive");
        return Err(Failed);
    }
    Ok(())
}

fn same_shape(a: &Geometry, b: &Geometry) -> bool {
    a.data_bytes == b.data_bytes
        && a.spare_bytes == b.spare_bytes
        && a.pages_per_block == b.pages_per_block
        && a.blocks_per_plane == b.blocks_per_plane
        && a.planes_per_lun == b.planes_per_lun
        && a.luns == b.luns
}

/// Timer ticks to microseconds.
pub fn ticks_to_us(ticks: u64) -> u64 {
    ticks * 1_000_000 / TICK_HZ as u64
}

fn ftl_failed(what: &str, e: FtlError) -> Failed {
    error!("{} failed: {:?}", what, e);
    Failed
}

fn ascii(bytes: &[u8]) -> &str {
    let s = core::str::from_utf8(bytes).unwrap_or("?");
    s.trim_matches(|c: char| c == ' ' || c == '\0')
}

/// RESET, READ ID, parameter page; logs what the chip is.
fn identify<B: OnfiBus>(bus: TimedBus<B>) -> Result<Nand<B>, Failed>
where
    B::Error: Loggable,
{
    let nand = match api::identify(bus) {
        Ok(n) => n,
        Err(e) => {
            error!("ONFI identification failed: {:?}", e);
            return Err(Failed);
        }
    };
    let i = nand.info();
    let g = i.geometry;
    let (major, minor) = i.onfi_version();
    info!(
        "chip: {} {}, ID {:02x} {:02x} {:02x} {:02x} {:02x}, ONFI {}.{}, parameter page {:?}",
        ascii(&i.param.manufacturer),
        ascii(&i.param.model),
        i.id[0],
        i.id[1],
        i.id[2],
        i.id[3],
        i.id[4],
        major,
        minor,
        i.param_source
    );
    info!(
        "chip: {}+{} bytes x {} pages x {} blocks x {} planes x {} LUNs, NOP {}, ECC {} bits/{} bytes, \
         timing mode {} (interface running mode {}), on-die ECC {}, multi-plane program/erase {}",
        g.data_bytes,
        g.spare_bytes,
        g.pages_per_block,
        g.blocks_per_plane,
        g.planes_per_lun,
        g.luns,
        g.nop,
        g.ecc.bits,
        g.ecc.codeword_bytes,
        i.timing_mode(),
        i.interface.mode,
        if i.on_die_ecc_off { "off (read back)" } else { "none" },
        i.multi_plane_program_erase()
    );
    Ok(TimedNand::new(nand))
}

/// The policy bundle for the chip (its codec sized by the chip's ECC requirement).
fn policies<B: OnfiBus>(nand: &Nand<B>, logical_pages: u32) -> Result<api::AppPolicies, Failed> {
    let geo = nand.geometry();
    bundle::policies(&geo, logical_pages).ok_or_else(|| {
        error!(
            "no policy bundle: the chip requires {} correctable bits per {} bytes (firmware's codec: {}), or the \
             classifier refused {} logical pages",
            geo.ecc.bits,
            geo.ecc.codeword_bytes,
            bundle::CODEC_NAME,
            logical_pages
        );
        Failed
    })
}

fn mount<'a, B: OnfiBus>(
    nand: &'a mut Nand<B>,
    mem: &'a mut FtlBuffers,
    lay: &Layouts,
    cfg: Config,
) -> Result<AppFtl<'a, B>, Failed> {
    let pol = policies(nand, cfg.logical_pages)?;
    let (map, m, att) = mem.parts(lay)?;
    let t0 = now();
    let ftl = api::mount(nand, pol, map, m, cfg, att).map_err(|e| ftl_failed("mount", e))?;
    let c = ftl.counters();
    info!(
        "mounted in {} us: {} NAND reads, {} pages replayed",
        ticks_to_us(now() - t0),
        c.mount_reads,
        c.mount_replayed_pages
    );
    Ok(ftl)
}

/// Mounts; `None` when the device holds no FTL image (first boot).
fn try_mount<'a, B: OnfiBus>(
    nand: &'a mut Nand<B>,
    mem: &'a mut FtlBuffers,
    lay: &Layouts,
    cfg: Config,
) -> Result<Option<AppFtl<'a, B>>, Failed> {
    let pol = policies(nand, cfg.logical_pages)?;
    let (map, m, att) = mem.parts(lay)?;
    let t0 = now();
    // The device is lent (`&mut`), so that a failed mount does not drop it.
    match api::mount(nand, pol, map, m, cfg, att) {
        Ok(ftl) => {
            let c = ftl.counters();
            info!(
                "mounted an existing FTL image in {} us: {} NAND reads, {} pages replayed",
                ticks_to_us(now() - t0),
                c.mount_reads,
                c.mount_replayed_pages
            );
            Ok(Some(ftl))
        }
        Err(FtlError::NotFormatted) => {
            info!("no FTL image on the device");
            Ok(None)
        }
        Err(e) => Err(ftl_failed("mount", e)),
    }
}

/// Format a chip that holds data in another format (feature `format-foreign`).
const FORMAT_FOREIGN: bool = cfg!(feature = "format-foreign");

/// First boot (no FTL image): formats only a blank chip, or a foreign one with `format-foreign`;
/// otherwise reports it and fails, leaving the chip alone.
fn first_boot_check<N: NandFlash>(nand: &mut N) -> Result<(), Failed>
where
    N::Error: Loggable,
{
    match scan_foreign(nand)? {
        0 => {
            info!("device blank: first boot, formatting");
            Ok(())
        }
        n if FORMAT_FOREIGN => {
            warn!("{} blocks hold data in another format: formatting anyway (feature format-foreign)", n);
            Ok(())
        }
        n => {
            error!(
                "{} blocks hold data in another format: left alone. To format this chip, rebuild with the \
                 cargo feature `format-foreign` (or `force-format`)",
                n
            );
            if cfg!(feature = "cdm") {
                error!(
                    "(with cdm this is also what an FTL image whose NV cache was lost looks like: the backup \
                     SRAM lost power without VBAT; formatting would lose the pages only the cache held)"
                );
            }
            Err(Failed)
        }
    }
}

/// Good blocks whose first page is not erased: more 0 bits in its data and spare than the chip's
/// ECC requirement allows for one page (`ecc.bits` per codeword: an erased page with read noise
/// still counts as erased): data in another format (or in none). Reads one page per block;
/// factory-bad blocks are skipped.
pub fn scan_foreign<N: NandFlash>(nand: &mut N) -> Result<u32, Failed>
where
    N::Error: Loggable,
{
    let geo = nand.geometry();
    let mut data = [0u8; 4096];
    let mut spare = [0u8; 512];
    let (db, sb) = (geo.data_bytes as usize, geo.spare_bytes as usize);
    if db > data.len() || sb > spare.len() {
        error!("page of {}+{} bytes too large for the blank check", db, sb);
        return Err(Failed);
    }
    let cw = (geo.ecc.codeword_bytes as u32).max(1);
    let noise_allowance = geo.ecc.bits as u32 * (geo.data_bytes.div_ceil(cw) + 1);
    let mut foreign = 0;
    for b in 0..geo.total_blocks() {
        let block = BlockId(b);
        let bad = nand.is_bad(block).map_err(|e| {
            error!("blank check: bad-block check of block {} failed: {:?}", b, e);
            Failed
        })?;
        if bad {
            continue;
        }
        nand.read_page(geo.page(block, 0), &mut data[..db], &mut spare[..sb]).map_err(|e| {
            error!("blank check: read of block {} failed: {:?}", b, e);
            Failed
        })?;
        let zeros: u32 = data[..db].iter().chain(&spare[..sb]).map(|&x| x.count_zeros()).sum();
        if zeros > noise_allowance {
            foreign += 1;
        }
    }
    Ok(foreign)
}

fn format<'a, B: OnfiBus>(
    nand: &'a mut Nand<B>,
    mem: &'a mut FtlBuffers,
    lay: &Layouts,
    cfg: Config,
) -> Result<AppFtl<'a, B>, Failed> {
    let pol = policies(nand, cfg.logical_pages)?;
    let (map, m, att) = mem.parts(lay)?;
    let t0 = now();
    let ftl = api::format(nand, pol, map, m, cfg, att).map_err(|e| ftl_failed("format", e))?;
    let c = ftl.counters();
    info!(
        "formatted in {} us: {} blocks erased, {} NAND reads, {} bad blocks",
        ticks_to_us(now() - t0),
        c.nand_erases,
        c.nand_reads,
        ftl.erase_counts().filter(|&(_, _, bad)| bad).count()
    );
    Ok(ftl)
}

/// Logs the FTL's RAM by part and checks the platform's published figures against
/// `Ftl::ram_bytes`.
fn log_ram<B: OnfiBus>(ftl: &AppFtl<'_, B>, map: &MapLayout, published: &RamFigures) -> Result<(), Failed> {
    // Read through an opaque reference, so the static stays in the ELF for size-report.py.
    let f = *core::hint::black_box(published);
    if cfg!(flat_map) {
        info!(
            "RAM: FTL {} bytes (flat map {}, valid bitmap {}, block table {}, list heads {}, page buffer {}, \
             Ftl struct {})",
            ftl.ram_bytes(),
            f.flat_map,
            f.valid_bitmap,
            f.block_table,
            f.list_heads,
            f.page_buffer,
            f.ftl_struct
        );
    } else {
        info!(
            "map: {}, {} map pages on flash; cache {} bytes: {} read lines of 16 entries, {} dirty-entry slots",
            bundle::MAP_NAME,
            ftl.capacity_pages().div_ceil(ftl.page_bytes() / 4),
            f.map_cache,
            map.cached.lines,
            map.cached.dirty_slots
        );
        info!(
            "RAM: FTL {} bytes (map cache {}, map directory {}, map I/O buffer {}, no valid bitmap, block table {}, \
             list heads {}, page buffer {}, Ftl struct {})",
            ftl.ram_bytes(),
            f.map_cache,
            f.map_directory,
            f.map_io,
            f.block_table,
            f.list_heads,
            f.page_buffer,
            f.ftl_struct
        );
    }
    if f.ftl_bytes as usize != ftl.ram_bytes() {
        error!("the platform's published FTL RAM ({} bytes) is not Ftl::ram_bytes", f.ftl_bytes);
        return Err(Failed);
    }
    Ok(())
}

/// Erase-count spread and the FTL's totals.
fn report_device<B: OnfiBus>(ftl: &mut AppFtl<'_, B>) {
    let (mut min, mut max, mut sum, mut good) = (u32::MAX, 0u32, 0u64, 0u64);
    let bad = ftl.erase_counts().filter(|&(_, _, bad)| bad).count();
    // The anchor's blocks are outside wear leveling.
    for (_, ec) in ftl.leveled_erase_counts() {
        min = min.min(ec);
        max = max.max(ec);
        sum += ec as u64;
        good += 1;
    }
    let avg_milli = sum * 1000 / good.max(1);
    info!(
        "wear: erase counts min {} max {} mean {}.{:03} over {} good blocks outside the anchor; {} bad",
        min,
        max,
        avg_milli / 1000,
        avg_milli % 1000,
        good,
        bad
    );
    let c = *ftl.counters();
    let waf = milli(c.nand_programs, c.host_write_pages);
    info!(
        "totals since mount: {} host writes, {} host reads, {} trims; NAND {} programs, {} reads, {} erases; WAF {}.{:03}",
        c.host_write_pages,
        c.host_read_pages,
        c.host_trim_pages,
        c.nand_programs,
        c.nand_reads,
        c.nand_erases,
        waf / 1000,
        waf % 1000
    );
    info!(
        "totals since mount: GC {} blocks, {} page copies; {} wear-leveling moves; {} checkpoints ({} pages); {} journal \
         pages; {} map-page reads, {} map-page writes; {} program and {} erase failures, {} blocks retired; at most {} \
         NAND programs for one host page write",
        c.gc_blocks,
        c.gc_page_copies,
        c.wear_level_moves,
        c.checkpoints,
        c.checkpoint_pages,
        c.journal_pages,
        c.map_page_reads,
        c.map_page_writes,
        c.program_failures,
        c.erase_failures,
        c.blocks_retired,
        c.worst_host_write_programs
    );
}

fn milli(num: u64, den: u64) -> u64 {
    num * 1000 / den.max(1)
}

/// Counters at the start of a phase.
#[derive(Copy, Clone)]
struct Snap {
    nand: Meter,
    bus: Meter,
    codec: Meter,
    counters: Counters,
}

fn snap<B: OnfiBus>(ftl: &mut AppFtl<'_, B>) -> Snap {
    let nand = ftl.nand().meter;
    let bus = ftl.nand().inner().bus().meter;
    let codec = ftl.policies_mut().codec.meter;
    Snap { nand, bus, codec, counters: *ftl.counters() }
}

/// Fills `page` with the content of generation `gen` of `lpn`.
fn fill(page: &mut [u8], lpn: u32, gen: u8) {
    let mut x = seed(lpn, gen);
    for w in page.chunks_exact_mut(4) {
        x = xorshift(x);
        w.copy_from_slice(&x.to_le_bytes());
    }
    page[0..4].copy_from_slice(&MAGIC.to_le_bytes());
    page[4..8].copy_from_slice(&lpn.to_le_bytes());
    page[8] = gen;
}

/// Whether `page` is generation `gen` of `lpn`.
fn matches(page: &[u8], lpn: u32, gen: u8) -> bool {
    if page[0..4] != MAGIC.to_le_bytes() || page[4..8] != lpn.to_le_bytes() || page[8] != gen {
        return false;
    }
    let mut x = seed(lpn, gen);
    for (i, w) in page.chunks_exact(4).enumerate() {
        x = xorshift(x);
        if i >= 3 && w != x.to_le_bytes() {
            return false;
        }
    }
    true
}

fn seed(lpn: u32, gen: u8) -> u32 {
    (lpn.wrapping_mul(0x9E37_79B9) ^ (gen as u32).wrapping_mul(0x85EB_CA6B)) | 1
}

fn xorshift(mut x: u32) -> u32 {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    x
}

struct App<'g> {
    overhead: Overhead,
    rng: u32,
    gens: Generations<'g>,
    wbuf: &'g mut [u8],
    rbuf: &'g mut [u8],
    n: u32,
    hot_start: u32,
}

impl App<'_> {
    fn random(&mut self) -> u32 {
        self.rng = xorshift(self.rng);
        self.rng
    }

    /// Writes the next generation of `lpn`; adds the time of the FTL call to `ticks`.
    fn write<B: OnfiBus>(
        &mut self,
        ftl: &mut AppFtl<'_, B>,
        lpn: u32,
        ticks: &mut u64,
    ) -> Result<(), Failed> {
        let g = self.gens.get(lpn);
        let gen = if g == GEN_UNKNOWN || g >= GEN_MAX { 1 } else { g + 1 };
        fill(self.wbuf, lpn, gen);
        let t0 = now();
        let r = api::write(ftl, lpn, self.wbuf);
        *ticks += now() - t0;
        if let Err(e) = r {
            error!("write of logical page {} failed: {:?}", lpn, e);
            return Err(Failed);
        }
        self.gens.set(lpn, gen);
        Ok(())
    }

    /// Reads `lpn` and checks it against its generation; adds the time of the FTL call to
    /// `ticks`.
    fn read<B: OnfiBus>(
        &mut self,
        ftl: &mut AppFtl<'_, B>,
        lpn: u32,
        ticks: &mut u64,
        what: &str,
    ) -> Result<(), Failed> {
        let t0 = now();
        let r = api::read(ftl, lpn, self.rbuf);
        *ticks += now() - t0;
        if let Err(e) = r {
            error!("{}: read of logical page {} failed: {:?}", what, lpn, e);
            return Err(Failed);
        }
        let gen = self.gens.get(lpn);
        let ok = match gen {
            GEN_UNKNOWN => true,
            GEN_ZERO => self.rbuf.iter().all(|&b| b == 0),
            g => matches(self.rbuf, lpn, g),
        };
        if !ok {
            error!(
                "{}: logical page {} does not hold generation {} (found lpn {} generation {})",
                what,
                lpn,
                gen,
                u32::from_le_bytes([self.rbuf[4], self.rbuf[5], self.rbuf[6], self.rbuf[7]]),
                self.rbuf[8]
            );
            return Err(Failed);
        }
        Ok(())
    }

    fn verify_range<B: OnfiBus>(
        &mut self,
        ftl: &mut AppFtl<'_, B>,
        from: u32,
        to: u32,
        what: &str,
    ) -> Result<(), Failed> {
        let mut ticks = 0;
        for lpn in from..to {
            self.read(ftl, lpn, &mut ticks, what)?;
        }
        Ok(())
    }

    /// After a mount: the self-test region holds pages of the previous boot (any generation) or
    /// zeros; learn their generations. A previous boot that got to the end left the FAT volume of
    /// the round trip there instead, and the board may have served it to a PC over USB since: if
    /// the first page is neither zeros nor a test page, the region is not checked.
    fn check_previous<B: OnfiBus>(&mut self, ftl: &mut AppFtl<'_, B>, region: u32) -> Result<(), Failed> {
        let foreign = region > 0
            && api::read(ftl, 0, self.rbuf).is_ok()
            && self.rbuf.iter().any(|&b| b != 0)
            && !matches(self.rbuf, 0, self.rbuf[8]);
        if foreign {
            let what = if fat::is_mbr(self.rbuf) {
                "a FAT volume (the previous boot's round trip, or the PC's)"
            } else {
                "data of another kind (written over USB)"
            };
            info!("previous boot: the disk holds {}: not checked", what);
            return Ok(());
        }
        let (mut zeros, mut pages) = (0u32, 0u32);
        for lpn in 0..region {
            if let Err(e) = api::read(ftl, lpn, self.rbuf) {
                error!("previous boot: read of logical page {} failed: {:?}", lpn, e);
                return Err(Failed);
            }
            let gen = self.rbuf[8];
            if self.rbuf.iter().all(|&b| b == 0) {
                self.gens.set(lpn, GEN_ZERO);
                zeros += 1;
            } else if gen != GEN_ZERO && gen <= GEN_MAX && matches(self.rbuf, lpn, gen) {
                self.gens.set(lpn, gen);
                pages += 1;
            } else {
                error!("previous boot: logical page {} holds neither zeros nor a page of this test", lpn);
                return Err(Failed);
            }
        }
        info!(
            "previous boot: self-test region intact ({} pages of earlier runs, {} zero pages)",
            pages, zeros
        );
        Ok(())
    }

    /// Writes, overwrites and trims the self-test region, verifying after each step.
    fn selftest_writes<B: OnfiBus>(&mut self, ftl: &mut AppFtl<'_, B>, region: u32) -> Result<(), Failed> {
        let mut ticks = 0;
        for lpn in 0..region {
            self.write(ftl, lpn, &mut ticks)?;
        }
        self.verify_range(ftl, 0, region, "self-test write")?;
        for lpn in (0..region).step_by(3) {
            self.write(ftl, lpn, &mut ticks)?;
        }
        let (trim_from, trim_len) = (region / 2, (region / 8).max(1));
        if let Err(e) = api::trim(ftl, trim_from, trim_len) {
            error!("trim failed: {:?}", e);
            return Err(Failed);
        }
        for lpn in trim_from..trim_from + trim_len {
            self.gens.set(lpn, GEN_ZERO);
        }
        self.verify_range(ftl, 0, region, "self-test overwrite+trim")?;
        #[cfg(feature = "dedup")]
        self.dedup_check(ftl, 0, region.min(64))?;
        if let Err(e) = api::flush(ftl) {
            error!("flush failed: {:?}", e);
            return Err(Failed);
        }
        info!("self-test: {} pages written, every third overwritten, {} trimmed: verified", region, trim_len);
        Ok(())
    }

    /// With `dedup`: writes one content to `count` logical pages from `from`, reads each back
    /// exact, requires the FTL to have deduplicated some of them, then gives the pages their own
    /// contents again (and verifies them).
    #[cfg(feature = "dedup")]
    fn dedup_check<B: OnfiBus>(
        &mut self,
        ftl: &mut AppFtl<'_, B>,
        from: u32,
        count: u32,
    ) -> Result<(), Failed> {
        let before = ftl.dedup_stats();
        fill(self.wbuf, u32::MAX, 1);
        for lpn in from..from + count {
            if let Err(e) = api::write(ftl, lpn, self.wbuf) {
                error!("dedup: write of logical page {} failed: {:?}", lpn, e);
                return Err(Failed);
            }
        }
        for lpn in from..from + count {
            if let Err(e) = api::read(ftl, lpn, self.rbuf) {
                error!("dedup: read of logical page {} failed: {:?}", lpn, e);
                return Err(Failed);
            }
            if self.rbuf != self.wbuf {
                error!("dedup: logical page {} does not hold the shared content", lpn);
                return Err(Failed);
            }
        }
        let after = ftl.dedup_stats();
        let (probes, hits, dedup) = (
            after.probes - before.probes,
            after.hits - before.hits,
            after.deduplicated - before.deduplicated,
        );
        info!(
            "dedup: {} writes of one content: {} probes, {} hits, {} pages deduplicated, {} shared contents; all read \
             back exact",
            count,
            probes,
            hits,
            dedup,
            ftl.shared_contents()
        );
        if dedup == 0 {
            error!("dedup: no page was deduplicated");
            return Err(Failed);
        }
        let mut ticks = 0;
        for lpn in from..from + count {
            self.write(ftl, lpn, &mut ticks)?;
        }
        self.verify_range(ftl, from, from + count, "dedup: own contents again")
    }

    fn seq_write<B: OnfiBus>(&mut self, ftl: &mut AppFtl<'_, B>) -> Result<(), Failed> {
        let start = snap(ftl);
        let mut ticks = 0;
        for lpn in 0..self.n {
            self.write(ftl, lpn, &mut ticks)?;
        }
        self.report(ftl, "seq-write", true, self.n as u64, ticks, &start);
        Ok(())
    }

    fn seq_read<B: OnfiBus>(&mut self, ftl: &mut AppFtl<'_, B>, name: &str) -> Result<(), Failed> {
        let start = snap(ftl);
        let mut ticks = 0;
        for lpn in 0..self.n {
            self.read(ftl, lpn, &mut ticks, name)?;
        }
        self.report(ftl, name, false, self.n as u64, ticks, &start);
        Ok(())
    }

    fn random_write<B: OnfiBus>(
        &mut self,
        ftl: &mut AppFtl<'_, B>,
        count: u32,
        from: u32,
        name: &str,
    ) -> Result<(), Failed> {
        let start = snap(ftl);
        let mut ticks = 0;
        let span = self.n - from;
        for _ in 0..count {
            let lpn = from + self.random() % span;
            self.write(ftl, lpn, &mut ticks)?;
        }
        self.report(ftl, name, true, count as u64, ticks, &start);
        Ok(())
    }

    fn random_read<B: OnfiBus>(&mut self, ftl: &mut AppFtl<'_, B>, count: u32) -> Result<(), Failed> {
        let start = snap(ftl);
        let mut ticks = 0;
        for _ in 0..count {
            let lpn = self.random() % self.n;
            self.read(ftl, lpn, &mut ticks, "rand-read")?;
        }
        self.report(ftl, "rand-read", false, count as u64, ticks, &start);
        Ok(())
    }

    /// Logs a phase: throughput, cost per page and its split, NAND work.
    fn report<B: OnfiBus>(
        &self,
        ftl: &mut AppFtl<'_, B>,
        name: &str,
        writes: bool,
        pages: u64,
        ticks: u64,
        start: &Snap,
    ) {
        let end = snap(ftl);
        let nand = end.nand.since(&start.nand);
        let bus = end.bus.since(&start.bus);
        let codec = end.codec.since(&start.codec);
        let c = &end.counters;
        let s = &start.counters;
        let bytes = pages * ftl.page_bytes() as u64;
        let kib_s = bytes * TICK_HZ as u64 / ticks.max(1) / 1024;
        info!(
            "[{}] {} pages ({} KiB) in {} us: {} KiB/s",
            name,
            pages,
            bytes / 1024,
            ticks_to_us(ticks),
            kib_s
        );
        // Metering overhead that lands outside a metered call counts in its caller's time: the
        // bus's calls' in the driver's share, the driver's and the codec's in the FTL's.
        // The NAND meter's own cost inside its interval is no driver work either.
        let bus_outside = self.overhead.outside_ticks(bus.calls) + self.overhead.inside_ticks(nand.calls);
        let driver = nand.ticks.saturating_sub(bus.ticks + bus_outside);
        let ftl_outside = self.overhead.outside_ticks(nand.calls + codec.calls);
        let core = ticks.saturating_sub(nand.ticks + codec.ticks + ftl_outside);
        let per = |t: u64| t * UNITS_PER_TICK / pages.max(1);
        info!(
            "[{}] per page: {} {} in all = FTL {} + ONFI driver {} + codec {} + NAND bus {} + metering {}",
            name,
            per(ticks),
            UNIT,
            per(core),
            per(driver),
            per(codec.ticks),
            per(bus.ticks),
            per(bus_outside + ftl_outside)
        );
        info!(
            "[{}] per page excluding codec and NAND bus: {} {} (FTL {} + ONFI driver {})",
            name,
            per(core + driver),
            UNIT,
            per(core),
            per(driver)
        );
        let (programs, reads, erases) =
            (c.nand_programs - s.nand_programs, c.nand_reads - s.nand_reads, c.nand_erases - s.nand_erases);
        let amp = if writes {
            milli(programs, c.host_write_pages - s.host_write_pages)
        } else {
            milli(reads, c.host_read_pages - s.host_read_pages)
        };
        info!(
            "[{}] NAND {} programs, {} reads, {} erases; {} {}.{:03}; GC {} blocks, {} copies; {} wear-leveling \
             moves; {} retired",
            name,
            programs,
            reads,
            erases,
            if writes { "WAF" } else { "read amplification" },
            amp / 1000,
            amp % 1000,
            c.gc_blocks - s.gc_blocks,
            c.gc_page_copies - s.gc_page_copies,
            c.wear_level_moves - s.wear_level_moves,
            c.blocks_retired - s.blocks_retired
        );
        if !cfg!(flat_map) {
            let (reads, writes) =
                (c.map_page_reads - s.map_page_reads, c.map_page_writes - s.map_page_writes);
            let (r, w) = (milli(reads, pages), milli(writes, pages));
            info!(
                "[{}] map: {} map-page reads, {} map-page writes ({}.{:03} and {}.{:03} per host page)",
                name,
                reads,
                writes,
                r / 1000,
                r % 1000,
                w / 1000,
                w % 1000
            );
        }
    }
}
