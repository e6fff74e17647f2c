//! QEMU `mps2-an500` (Cortex-M7): the same application with the ONFI chip model of nand-hal as
//! the NAND, its array in the board's 16 MiB PSRAM (0x6000_0000), the FTL's tables and the
//! test's buffers in the 4 MiB SSRAM (0x2000_0000).
//!
//! - Output: semihosting `hprintln!` (QEMU's stdout).
//! - Exit: semihosting SYS_EXIT, so QEMU exits 0 when the application passes and 1 on a failure,
//!   a panic or a HardFault.
//! - Time: SysTick on the core clock (25 MHz on mps2), extended to 64 bits by its wrap
//!   interrupt. With `-icount shift=3` (run-qemu.sh) QEMU executes one instruction per 8 ns of
//!   virtual time, so one tick is exactly 5 instructions: "time" is an instruction count, and
//!   the throughputs printed are those of a 125 MIPS core that waits for no NAND.
//!
//! The chip: 2048 + 64-byte pages, 64 pages per block, 2 planes of 32 blocks (64 blocks, 8 MiB
//! of data; the MT29F4G08ABADA's page and block, fewer blocks), NOP 4, in-order programming,
//! its parameter page built by `ParamPage::for_geometry`, on-die ECC on at power-on (the driver
//! must switch it off). Block 9 is factory bad and every
//! program of block 22 fails, so bad-block skipping and run-time retirement run in CI too.
//!
//! The map: the cached map with a 1 KiB cache, an eighth of the 8 KiB a flat map of the 2,048
//! logical pages takes (4 read lines of 16 entries and 64 dirty-entry slots for 4 map pages), so
//! that it misses and writes back all the time; the flat map with a technique feature or
//! `flat-map` (see `bundle`).

use core::sync::atomic::{AtomicU32, Ordering};

use cortex_m::peripheral::{syst::SystClkSource, SCB, SYST};
use cortex_m_rt::{entry, exception, ExceptionFrame};
use cortex_m_semihosting::{debug, hprintln};
use ftl_core::{BlockInfo, Config, RamLayout};

use crate::bundle::MapLayout;
use nand_hal::onfi::{ModelConfig, OnfiChipModel, OnfiNand};
use nand_hal::{BlockId, EccRequirement, Geometry, NandFlash};

use crate::app::{self, Failed, FtlBuffers, Generations, RamFigures, Target, TestBuffers, Workload};

/// Timer ticks per second of virtual time.
pub const TICK_HZ: u32 = 25_000_000;
/// What a tick counts, times [`UNITS_PER_TICK`].
pub const UNIT: &str = "instr";
/// Instructions per tick under `-icount shift=3`.
pub const UNITS_PER_TICK: u64 = 5;

/// The chip model's shape.
#[cfg(not(feature = "wom"))]
pub const GEO: Geometry = Geometry {
    data_bytes: 2048,
    spare_bytes: 64,
    pages_per_block: 64,
    blocks_per_plane: 32,
    planes_per_lun: 2,
    luns: 1,
    nop: 4,
    sequential_program: true,
    ecc: EccRequirement { bits: 4, codeword_bytes: 512 },
    endurance: 100_000,
};

/// With `wom`: a chip without the in-order rule (pages of a block programmable in any order, as
/// second writes need) and with a spare large enough for them: 4096 + 368-byte pages (the
/// project's WOM test geometry), 64 pages per block, 2 planes of 20 blocks (10 MiB of data).
#[cfg(feature = "wom")]
pub const GEO: Geometry = Geometry {
    data_bytes: 4096,
    spare_bytes: 368,
    pages_per_block: 64,
    blocks_per_plane: 20,
    planes_per_lun: 2,
    luns: 1,
    nop: 4,
    sequential_program: false,
    ecc: EccRequirement { bits: 4, codeword_bytes: 512 },
    endurance: 100_000,
};

/// 4 MiB of logical capacity: half the raw pages, two thirds of what is left after the FTL's
/// reserves.
#[cfg(not(feature = "wom"))]
const LOGICAL_PAGES: u32 = 2048;
/// With `wom`: 4 MiB of logical capacity, 40 % of the raw pages (the rest is where GC recycles
/// blocks for second writes).
#[cfg(feature = "wom")]
const LOGICAL_PAGES: u32 = 1024;

/// Defaults, with wear leveling made eager enough to act within a CI run.
const CONFIG: Config = {
    let mut c = Config::with_logical_pages(&GEO, LOGICAL_PAGES);
    c.wear_spread_limit = 4;
    c.wear_check_interval = 8;
    c
};

const LAYOUT: RamLayout = RamLayout::new(&GEO, &CONFIG);
/// Bytes of cache for the cached map: an eighth of the flat map's 8 KiB, so it misses.
const MAP_CACHE_BYTES: usize = 1024;
const MAP_LAYOUT: MapLayout = MapLayout::new(&GEO, &CONFIG, MAP_CACHE_BYTES);

/// The FTL's RAM by part (see `app::RamFigures`; size-report.py reads it from the ELF).
#[no_mangle]
pub static FW_RAM_FIGURES: RamFigures =
    app::ram_figures::<OnfiChipModel<&'static mut [u8]>>(&GEO, &CONFIG, MAP_CACHE_BYTES);
const PAGE: usize = GEO.data_bytes as usize;
/// The PSRAM.
const MODEL_CAPACITY: usize = 16 << 20;

/// RAM for deduplication (`dedup`): 512 KiB of the SSRAM.
#[cfg(feature = "dedup")]
pub const DEDUP_RAM: usize = 512 * 1024;

/// Bit errors per 512-byte codeword injected by the chip model on every page read (0 with the
/// `crc-codec` and `null-codec` measurement builds, which correct nothing).
const READ_BIT_ERRORS: u8 = if cfg!(any(feature = "crc-codec", feature = "null-codec")) { 0 } else { 2 };

const FACTORY_BAD: BlockId = BlockId(9);
const FAILING: BlockId = BlockId(22);

const RELOAD: u32 = 0x00FF_FFFF;
static WRAPS: AtomicU32 = AtomicU32::new(0);

/// Ticks since start-up.
pub fn now() -> u64 {
    loop {
        let w1 = WRAPS.load(Ordering::Acquire);
        let cur = SYST::get_current();
        let pending = SCB::is_pendst_pending();
        let w2 = WRAPS.load(Ordering::Acquire);
        if w1 != w2 {
            continue;
        }
        // Wrapped, but the interrupt has not run yet: the count is from after the reload.
        let wraps = w1 as u64 + u64::from(pending && cur > RELOAD / 2);
        return wraps * (RELOAD as u64 + 1) + (RELOAD - cur) as u64;
    }
}

#[exception]
fn SysTick() {
    WRAPS.fetch_add(1, Ordering::AcqRel);
}

fn start_clock(syst: &mut SYST) {
    syst.set_clock_source(SystClkSource::Core);
    syst.set_reload(RELOAD);
    syst.clear_current();
    syst.enable_interrupt();
    syst.enable_counter();
    // The counter reads 0 until its first reload.
    while SYST::get_current() == 0 {}
}

fn report_model(chip: &OnfiChipModel<&'static mut [u8]>) {
    let c = chip.counters();
    info!(
        "chip model: {} commands, {} address cycles, {} bytes in, {} bytes out",
        c.commands, c.address_cycles, c.bytes_in, c.bytes_out
    );
    info!(
        "chip model: {} page reads, {} page programs, {} block erases, {} multi-plane operations, {} program \
         and {} erase failures; {} us of NAND busy time",
        c.page_reads,
        c.page_programs,
        c.block_erases,
        c.multi_plane_ops,
        c.program_failures,
        c.erase_failures,
        chip.elapsed_us()
    );
}

/// The first-boot blank check: a page of another format (here, data with an erased spare) in one
/// block makes `scan_foreign` count one foreign block (the application then leaves the chip
/// alone); erased again, the chip counts as blank.
fn foreign_chip_check(
    chip: OnfiChipModel<&'static mut [u8]>,
) -> Result<OnfiChipModel<&'static mut [u8]>, Failed> {
    let mut nand = OnfiNand::new(chip).map_err(|e| {
        error!("foreign-chip check: identify: {:?}", e);
        Failed
    })?;
    let geo = nand.geometry();
    let block = BlockId(GEO.blocks_per_plane - 2);
    let mut data = [0u8; PAGE];
    for (i, b) in data.iter_mut().enumerate() {
        *b = i as u8 ^ 0x5A;
    }
    let spare = [0xFFu8; GEO.spare_bytes as usize];
    let r = nand.program_page(geo.page(block, 0), &data, &spare);
    if let Err(e) = r {
        error!("foreign-chip check: program: {:?}", e);
        return Err(Failed);
    }
    let found = app::scan_foreign(&mut nand)?;
    let kept = nand.bus().page(geo.page(block, 0)).is_some_and(|(d, _)| d == &data[..]);
    if found != 1 || !kept {
        error!("foreign-chip check: {} foreign blocks found (want 1), page kept: {}", found, kept);
        return Err(Failed);
    }
    if let Err(e) = nand.erase_block(block) {
        error!("foreign-chip check: erase: {:?}", e);
        return Err(Failed);
    }
    let found = app::scan_foreign(&mut nand)?;
    if found != 0 {
        error!("foreign-chip check: {} foreign blocks after the erase (want 0)", found);
        return Err(Failed);
    }
    info!("first-boot check: a block of another format is found and left alone; the erased chip counts as blank");
    Ok(nand.release())
}

fn run() -> Result<(), Failed> {
    let mut model = ModelConfig::for_geometry(&GEO).map_err(|e| {
        error!("chip model configuration: {:?}", e);
        Failed
    })?;
    // The chip powers up with its on-die ECC on: the run passes only if the driver switches it
    // off (its parity would otherwise overwrite the FTL's metadata in the spare).
    model.on_die_ecc = true;
    let bytes = OnfiChipModel::<&mut [u8]>::storage_bytes(&model).map_err(|e| {
        error!("chip model size: {:?}", e);
        Failed
    })?;
    if bytes > MODEL_CAPACITY {
        error!("chip model needs {} bytes, PSRAM has {}", bytes, MODEL_CAPACITY);
        return Err(Failed);
    }
    let store = static_slice!(#[link_section = ".psram"] u8; MODEL_CAPACITY; bytes; 0xFF);
    let mut chip = OnfiChipModel::new(model, store).map_err(|e| {
        error!("chip model: {:?}", e);
        Failed
    })?;
    let faults =
        chip.mark_factory_bad(FACTORY_BAD).and_then(|()| chip.set_block_faults(FAILING, true, false));
    if let Err(e) = faults {
        error!("chip model faults: {:?}", e);
        return Err(Failed);
    }
    let mut chip = foreign_chip_check(chip)?;
    // Raw bit errors from here on: every page read flips READ_BIT_ERRORS bits in each 512-byte
    // codeword of data and one in the spare (up to 3 per BCH codeword of t = 4, 1 in the
    // metadata, whose own code corrects 3).
    chip.faults_mut().read_bit_errors = READ_BIT_ERRORS;
    chip.faults_mut().noise_seed = 0x1234_5678;
    info!(
        "NAND: ONFI chip model, {} bytes of PSRAM; block {} factory bad, every program of block {} fails; {} bit \
         errors per 512 B and 1 in the spare on every page read",
        bytes, FACTORY_BAD.0, FAILING.0, READ_BIT_ERRORS
    );
    let ftl = FtlBuffers {
        map: map_buffers!(MAP_LAYOUT; flat: ; cached: ),
        valid: static_slice!(u32; MAP_LAYOUT.valid_words; MAP_LAYOUT.valid_words; 0),
        blocks: static_slice!(BlockInfo; LAYOUT.blocks; LAYOUT.blocks; BlockInfo::EMPTY),
        heads: static_slice!(u32; LAYOUT.list_heads; LAYOUT.list_heads; 0),
        page_buf: static_slice!(u8; LAYOUT.page_buf; LAYOUT.page_buf; 0),
        // With `cdm`, a RAM region stands for the board's backup SRAM; the application checks
        // that the cache survives a simulated reset (an FTL dropped without unmount).
        #[cfg(feature = "cdm")]
        attach: crate::bundle::AttachBuffers::new(static_slice!(
            u8; crate::bundle::NV_BYTES; crate::bundle::NV_BYTES; 0
        )),
        #[cfg(feature = "dedup")]
        attach: crate::bundle::AttachBuffers::new(dedup_parts!()).ok_or_else(|| {
            error!("deduplication memory refused");
            Failed
        })?,
        #[cfg(feature = "wom")]
        attach: crate::bundle::AttachBuffers::new(&CONFIG).ok_or_else(|| {
            error!("no polar WOM code fits the chip model's spare");
            Failed
        })?,
        #[cfg(not(any(feature = "cdm", feature = "dedup", feature = "wom")))]
        attach: crate::bundle::AttachBuffers::new(),
    };
    let test = TestBuffers {
        generations: static_slice!(
            u8; Generations::bytes(LOGICAL_PAGES); Generations::bytes(LOGICAL_PAGES); 0
        ),
        write: static_slice!(u8; PAGE; PAGE; 0),
        read: static_slice!(u8; PAGE; PAGE; 0),
    };
    app::run(Target {
        name: "QEMU mps2-an500 (Cortex-M7), -icount shift=3",
        bus: chip,
        shape: GEO,
        config: CONFIG,
        map_cache_bytes: MAP_CACHE_BYTES,
        ram_figures: &FW_RAM_FIGURES,
        ftl,
        test,
        workload: Workload {
            selftest_pages: 256,
            random_writes: LOGICAL_PAGES,
            random_reads: LOGICAL_PAGES,
            gc_writes: 6 * LOGICAL_PAGES,
        },
        force_format: cfg!(feature = "force-format"),
        report_bus: report_model,
        serve,
    })
}

/// The end of the run: nothing to serve the disk on (QEMU has no USB); the application unmounts the FTL.
fn serve(
    _: crate::fat::Disk<'_, '_, '_, OnfiChipModel<&'static mut [u8]>>,
    _: &mut [u8],
) -> Result<(), Failed> {
    Ok(())
}

#[entry]
fn main() -> ! {
    crate::stack::paint();
    let mut cp = cortex_m::Peripherals::take().expect("core peripherals");
    start_clock(&mut cp.SYST);
    match run() {
        Ok(()) => {
            info!("RESULT: PASS");
            debug::exit(debug::EXIT_SUCCESS);
        }
        Err(Failed) => {
            error!("RESULT: FAIL");
            debug::exit(debug::EXIT_FAILURE);
        }
    }
    loop {
        cortex_m::asm::wfi();
    }
}

#[panic_handler]
fn panic(info: &core::panic::PanicInfo) -> ! {
    hprintln!("ERROR PANIC: {}", info);
    debug::exit(debug::EXIT_FAILURE);
    loop {
        cortex_m::asm::wfi();
    }
}

#[exception]
unsafe fn HardFault(ef: &ExceptionFrame) -> ! {
    hprintln!("ERROR HARDFAULT at pc {:#010x}, lr {:#010x}", ef.pc(), ef.lr());
    debug::exit(debug::EXIT_FAILURE);
    loop {
        cortex_m::asm::wfi();
    }
}
