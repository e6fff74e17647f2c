//! The ALIENTEK Apollo STM32H743 (STM32H743IIT6, 25 MHz HSE) with a Micron MT29F4G08ABADA
//! (x8 SLC, 2048 + 64-byte pages, 64 pages per block, 2 planes of 2048 blocks) on FMC bank 3.
//!
//! Start-up, in order:
//! 1. MPU region 0: 0x8000_0000, 256 MiB (the FMC NAND bank's common and attribute spaces) as
//!    strongly-ordered memory, execute-never (as ST advises for the FMC NAND region: each access
//!    completes before the next instruction, so R/B# is never sampled while a command write is
//!    still buffered). The default memory map makes this range Normal,
//!    cacheable memory, where the core may read speculatively: a stray read there is a data
//!    output cycle that would shift the chip's column. The rest keeps the default map.
//! 2. I-cache and D-cache on (the NAND window is uncached by 1; the FTL's tables are in AXI
//!    and D2 SRAM and nothing but the core touches them; RTT's buffer is in DTCM).
//! 3. Clocks: LDO, VOS1, HSE 25 MHz -> PLL1 -> 400 MHz core, 200 MHz AHB (HCLK3, the FMC's
//!    kernel clock).
//! 4. D2 SRAM1-3 clocks (AHB2ENR), for the FTL's tables in SRAM1 and the test's in SRAM2.
//! 5. DWT cycle counter (the timer: 400 MHz, extended to 64 bits; SysTick interrupts every
//!    2^24 cycles only to keep the extension current).
//! 6. FMC pins (AF12, very high speed): D0-D7 = PD14, PD15, PD0, PD1, PE7, PE8, PE9, PE10;
//!    NOE = PD4, NWE = PD5, CLE = A16 = PD11, ALE = A17 = PD12, NCE = PG9; R/B# = PD6 as a
//!    GPIO input with pull-up. Then the FMC NAND bank ([`fmc`]).
//!
//! Memory (memory/stm32h743.x; the board's 32 MiB SDRAM is not set up):
//! - default (cached map): the whole chip at 7 % over-provisioning (244,994 logical pages,
//!   478 MiB) with the map on flash behind a 16 KiB cache. Everything the FTL borrows (cache,
//!   map directory and I/O buffer, block table, list heads, page buffer: 71 KiB) is in D2 SRAM1;
//!   the 512 KiB AXI SRAM is left free (for a codec's tables, a technique's memory).
//! - with a technique feature (flat map): 131,072 logical pages (256 MiB, half the chip), what a
//!   flat map filling the AXI SRAM holds; block table, valid bitmap, list heads and page buffer
//!   (83 KiB) in D2 SRAM1.
//!
//! The test's generation table (4 bits per logical page: 120 KiB or 64 KiB) is in D2 SRAM2,
//! stack and the rest in DTCM.
//!
//! Nothing in this module has run on hardware yet (see docs/firmware.md).

pub mod fmc;
mod usb;

use core::sync::atomic::{AtomicU32, Ordering};

use cortex_m::peripheral::{syst::SystClkSource, DWT, MPU, SYST};
use cortex_m_rt::{entry, exception, ExceptionFrame};
use ftl_core::{BlockInfo, Config, RamLayout};
use nand_hal::Geometry;
use stm32h7xx_hal::gpio::{ErasedPin, Input, Speed};
use stm32h7xx_hal::pac;
use stm32h7xx_hal::prelude::*;
use stm32h7xx_hal::rcc::rec::UsbClkSel;
use stm32h7xx_hal::rcc::ResetEnable;
use stm32h7xx_hal::usb_hs::USB2;
use {defmt_rtt as _, panic_probe as _};

use crate::app::{self, Failed, FtlBuffers, Generations, RamFigures, Target, TestBuffers, Workload};
use crate::bundle::MapLayout;
use fmc::FmcNand;

/// Core clock.
pub const CPU_HZ: u32 = 400_000_000;
/// Timer ticks per second: the DWT cycle counter.
pub const TICK_HZ: u32 = CPU_HZ;
/// What a tick counts.
pub const UNIT: &str = "cycles";
/// Cycles per tick.
pub const UNITS_PER_TICK: u64 = 1;

/// The chip the memory is sized for (its parameter page must give this shape).
const GEO: Geometry = Geometry::MT29F4G08;
/// The cached map: the whole chip at 7 % over-provisioning (244,994 logical pages).
#[cfg(not(flat_map))]
const CONFIG: Config = Config::for_over_provisioning(&GEO, 7);
/// The flat map (technique features): what a 512 KiB flat map holds, half the chip.
#[cfg(flat_map)]
const CONFIG: Config = Config::with_logical_pages(&GEO, 128 * 1024);
const LOGICAL_PAGES: u32 = CONFIG.logical_pages;
const LAYOUT: RamLayout = RamLayout::new(&GEO, &CONFIG);
/// Bytes of cache for the cached map (read lines and dirty-entry buffer).
const MAP_CACHE_BYTES: usize = 16 * 1024;
const MAP_LAYOUT: MapLayout = MapLayout::new(&GEO, &CONFIG, MAP_CACHE_BYTES);

/// The FTL's RAM by part (see `app::RamFigures`; size-report.py reads it from the ELF).
#[no_mangle]
pub static FW_RAM_FIGURES: RamFigures = app::ram_figures::<Bus>(&GEO, &CONFIG, MAP_CACHE_BYTES);
const PAGE: usize = GEO.data_bytes as usize;

static CYCLES_HIGH: AtomicU32 = AtomicU32::new(0);
static CYCLES_LAST: AtomicU32 = AtomicU32::new(0);

/// CPU cycles since start-up (the 32-bit DWT counter extended to 64 bits; it must be read at
/// least every 10 s, which the SysTick interrupt guarantees).
pub fn now() -> u64 {
    cortex_m::interrupt::free(|_| {
        let cur = DWT::cycle_count();
        let mut high = CYCLES_HIGH.load(Ordering::Relaxed);
        if cur < CYCLES_LAST.load(Ordering::Relaxed) {
            high += 1;
            CYCLES_HIGH.store(high, Ordering::Relaxed);
        }
        CYCLES_LAST.store(cur, Ordering::Relaxed);
        ((high as u64) << 32) | cur as u64
    })
}

#[exception]
fn SysTick() {
    let _ = now();
}

/// Region 0: the FMC NAND bank as strongly-ordered memory; with `cdm`, region 1: the backup
/// SRAM, non-cacheable (see the module documentation).
fn configure_mpu(mpu: &mut MPU) {
    const BASE: u32 = 0x8000_0000;
    const SIZE_256_MIB: u32 = 27; // 2^(27 + 1) bytes
    const XN: u32 = 1 << 28;
    const AP_FULL_ACCESS: u32 = 0b011 << 24;
    const STRONGLY_ORDERED: u32 = 0; // TEX 000, C 0, B 0 (always shareable)
    const ENABLE: u32 = 1;
    const CTRL_PRIVDEFENA: u32 = 1 << 2;
    cortex_m::asm::dmb();
    // SAFETY: the MPU is reprogrammed before anything uses the region; the default map stays
    // in force everywhere else (PRIVDEFENA).
    unsafe {
        mpu.ctrl.write(0);
        mpu.rnr.write(0);
        mpu.rbar.write(BASE);
        mpu.rasr.write(XN | AP_FULL_ACCESS | STRONGLY_ORDERED | (SIZE_256_MIB << 1) | ENABLE);
        // With `cdm`: region 1, the 4 KiB backup SRAM (the NV cache), Normal non-cacheable, so
        // that a write is in the SRAM when it completes (not in a write-back D-cache line).
        #[cfg(feature = "cdm")]
        {
            const SIZE_4_KIB: u32 = 11; // 2^(11 + 1) bytes
            const NORMAL_NON_CACHEABLE: u32 = 0b001 << 19; // TEX 001, C 0, B 0
            mpu.rnr.write(1);
            mpu.rbar.write(BACKUP_SRAM);
            mpu.rasr.write(XN | AP_FULL_ACCESS | NORMAL_NON_CACHEABLE | (SIZE_4_KIB << 1) | ENABLE);
        }
        mpu.ctrl.write(CTRL_PRIVDEFENA | ENABLE);
    }
    cortex_m::asm::dsb();
    cortex_m::asm::isb();
}

/// RAM for deduplication (`dedup`): the 32 KiB of D2 SRAM3, all that the map, the FTL's tables
/// and the test leave (one 4 KiB bucket of 141 fingerprints and its tables).
#[cfg(feature = "dedup")]
pub const DEDUP_RAM: usize = 32 * 1024;

/// The backup SRAM (4 KiB, in the backup domain: kept in Standby and on VBAT with the backup
/// regulator on).
#[cfg(feature = "cdm")]
const BACKUP_SRAM: u32 = 0x3880_0000;

/// The backup SRAM as the NV cache's memory: its clock (RCC_AHB4ENR.BKPRAMEN), backup-domain
/// write access (PWR_CR1.DBP) and the backup regulator (PWR_CR2.BREN, waiting for BRRDY,
/// bounded) are turned on; its content is kept. Battery-backed only where VBAT is fitted:
/// without it a power-off loses the cache, and the next boot finds an FTL image whose NV cache
/// is gone (reported as data it leaves alone).
#[cfg(feature = "cdm")]
fn backup_sram() -> &'static mut [u8] {
    // SAFETY: enable bits the HAL does not own; the region is the backup SRAM (RM0433 memory
    // map), used only through this slice, which start-up makes once.
    unsafe {
        let rcc = &*pac::RCC::ptr();
        rcc.ahb4enr.modify(|r, w| w.bits(r.bits() | (1 << 28)));
        let pwr = &*pac::PWR::ptr();
        pwr.cr1.modify(|r, w| w.bits(r.bits() | (1 << 8)));
        pwr.cr2.modify(|r, w| w.bits(r.bits() | 1));
        let mut spins = 0u32;
        while pwr.cr2.read().bits() & (1 << 16) == 0 && spins < 1_000_000 {
            spins += 1;
        }
        cortex_m::asm::dsb();
        core::slice::from_raw_parts_mut(BACKUP_SRAM as *mut u8, crate::bundle::NV_BYTES)
    }
}

/// Clocks of D2 SRAM1, SRAM2 and SRAM3 (RCC_AHB2ENR bits 29-31).
fn enable_d2_sram() {
    // SAFETY: sets three enable bits; the HAL's clock tree does not own them.
    unsafe {
        let rcc = &*pac::RCC::ptr();
        rcc.ahb2enr.modify(|r, w| w.bits(r.bits() | (0b111 << 29)));
        let _ = rcc.ahb2enr.read().bits();
    }
    cortex_m::asm::dsb();
}

fn start_clock(syst: &mut SYST) {
    DWT::unlock();
    // SAFETY: CYCCNT is only ever read elsewhere.
    unsafe { (*DWT::PTR).cyccnt.write(0) };
    syst.set_clock_source(SystClkSource::Core);
    syst.set_reload(0x00FF_FFFF);
    syst.clear_current();
    syst.enable_interrupt();
    syst.enable_counter();
}

/// R/B# on a HAL GPIO input as an embedded-hal 1.0 [`InputPin`](embedded_hal::digital::InputPin)
/// (stm32h7xx-hal 0.16 implements only embedded-hal 0.2's traits).
pub struct ReadyPin(ErasedPin<Input>);

impl embedded_hal::digital::ErrorType for ReadyPin {
    type Error = core::convert::Infallible;
}

impl embedded_hal::digital::InputPin for ReadyPin {
    fn is_high(&mut self) -> Result<bool, Self::Error> {
        Ok(self.0.is_high())
    }
    fn is_low(&mut self) -> Result<bool, Self::Error> {
        Ok(self.0.is_low())
    }
}

/// The board's NAND bus: the FMC, R/B# on PD6.
type Bus = FmcNand<ReadyPin>;

fn report_fmc(bus: &Bus) {
    let t = bus.timing();
    info!(
        "FMC: NAND bank 3, 8-bit, ONFI timing mode {} (tWC {} ns, tRC {} ns), R/B# on PD6",
        t.mode, t.t_wc, t.t_rc
    );
}

fn run(bus: Bus) -> Result<(), Failed> {
    let ftl = FtlBuffers {
        map: map_buffers!(MAP_LAYOUT; flat: #[link_section = ".axisram"]; cached: #[link_section = ".sram1"]),
        valid: static_slice!(
            #[link_section = ".sram1"] u32; MAP_LAYOUT.valid_words; MAP_LAYOUT.valid_words; 0
        ),
        blocks: static_slice!(
            #[link_section = ".sram1"] BlockInfo; LAYOUT.blocks; LAYOUT.blocks; BlockInfo::EMPTY
        ),
        heads: static_slice!(#[link_section = ".sram1"] u32; LAYOUT.list_heads; LAYOUT.list_heads; 0),
        page_buf: static_slice!(#[link_section = ".sram1"] u8; LAYOUT.page_buf; LAYOUT.page_buf; 0),
        #[cfg(feature = "cdm")]
        attach: crate::bundle::AttachBuffers::new(backup_sram()),
        #[cfg(feature = "dedup")]
        attach: crate::bundle::AttachBuffers::new(dedup_parts!(#[link_section = ".sram3"])).ok_or_else(
            || {
                error!("deduplication memory refused");
                Failed
            },
        )?,
        #[cfg(not(any(feature = "cdm", feature = "dedup", feature = "wom")))]
        attach: crate::bundle::AttachBuffers::new(),
    };
    let test = TestBuffers {
        generations: static_slice!(
            #[link_section = ".sram2"] u8; Generations::bytes(LOGICAL_PAGES); Generations::bytes(LOGICAL_PAGES); 0
        ),
        write: static_slice!(u8; PAGE; PAGE; 0),
        read: static_slice!(u8; PAGE; PAGE; 0),
    };
    app::run(Target {
        name: "ALIENTEK Apollo STM32H743 @ 400 MHz, MT29F4G08ABADA on FMC bank 3",
        bus,
        shape: GEO,
        config: CONFIG,
        map_cache_bytes: MAP_CACHE_BYTES,
        ram_figures: &FW_RAM_FIGURES,
        ftl,
        test,
        workload: Workload {
            selftest_pages: 1024,
            random_writes: LOGICAL_PAGES / 4,
            random_reads: LOGICAL_PAGES / 4,
            gc_writes: GEO.total_pages(),
        },
        force_format: cfg!(feature = "force-format"),
        report_bus: report_fmc,
        serve,
    })
}

/// The end of the run, every check passed: reports it, then serves the disk (the FAT volume of
/// the round trip) over USB mass storage, for good.
fn serve(disk: crate::fat::Disk<'_, '_, '_, Bus>, xfer: &mut [u8]) -> Result<(), Failed> {
    info!("RESULT: PASS (self-test, benchmark, FAT round trip); the disk goes to USB now");
    usb::serve(disk, xfer)
}

#[entry]
fn main() -> ! {
    crate::stack::paint();
    let mut cp = cortex_m::Peripherals::take().expect("core peripherals");
    let dp = pac::Peripherals::take().expect("device peripherals");

    configure_mpu(&mut cp.MPU);
    cp.SCB.enable_icache();
    cp.SCB.enable_dcache(&mut cp.CPUID);

    let pwrcfg = dp.PWR.constrain().freeze();
    let mut ccdr =
        dp.RCC.constrain().use_hse(25.MHz()).sys_ck(CPU_HZ.Hz()).hclk(200.MHz()).freeze(pwrcfg, &dp.SYSCFG);
    // The PLL may land a few hundred Hz below the request (fractional divider).
    let hclk = ccdr.clocks.hclk().raw();
    assert!(
        hclk <= fmc::FMC_KERNEL_HZ && hclk > fmc::FMC_KERNEL_HZ / 100 * 99,
        "FMC timings assume a 200 MHz HCLK3"
    );
    // The USB kernel clock: HSI48 (on after freeze).
    assert!(ccdr.clocks.hsi48_ck().is_some(), "HSI48 (the USB kernel clock) must run");
    ccdr.peripheral.kernel_usb_clk_mux(UsbClkSel::Hsi48);
    enable_d2_sram();
    cp.DCB.enable_trace();
    start_clock(&mut cp.SYST);
    cp.DWT.enable_cycle_counter();

    let gpiod = dp.GPIOD.split(ccdr.peripheral.GPIOD);
    let gpioe = dp.GPIOE.split(ccdr.peripheral.GPIOE);
    let gpiog = dp.GPIOG.split(ccdr.peripheral.GPIOG);
    let _fmc_rec = ccdr.peripheral.FMC.enable();
    macro_rules! fmc_pins {
        ($($pin:expr),+) => {
            $( let _ = $pin.into_alternate::<12>().speed(Speed::VeryHigh); )+
        };
    }
    fmc_pins!(
        gpiod.pd14, gpiod.pd15, gpiod.pd0, gpiod.pd1, gpioe.pe7, gpioe.pe8, gpioe.pe9,
        gpioe.pe10, // D0-D7
        gpiod.pd4, gpiod.pd5, gpiod.pd11, gpiod.pd12, gpiog.pg9 // NOE, NWE, CLE, ALE, NCE
    );
    let rb = ReadyPin(gpiod.pd6.into_pull_up_input().erase());
    let bus = FmcNand::new(dp.FMC, rb);

    // USB (served at the end of the run): OTG2's full-speed PHY on PA11/PA12.
    let gpioa = dp.GPIOA.split(ccdr.peripheral.GPIOA);
    usb::install(USB2::new(
        dp.OTG2_HS_GLOBAL,
        dp.OTG2_HS_DEVICE,
        dp.OTG2_HS_PWRCLK,
        gpioa.pa11.into_alternate(),
        gpioa.pa12.into_alternate(),
        ccdr.peripheral.USB2OTG,
        &ccdr.clocks,
    ));

    match run(bus) {
        Ok(()) => info!("RESULT: PASS"),
        Err(Failed) => defmt::panic!("RESULT: FAIL"),
    }
    // probe-rs ends the session at a breakpoint.
    loop {
        cortex_m::asm::bkpt();
    }
}

#[exception]
unsafe fn HardFault(ef: &ExceptionFrame) -> ! {
    defmt::panic!("HardFault at pc {:#010x}, lr {:#010x}", ef.pc(), ef.lr());
}

defmt::timestamp!("{=u64:us}", now() / (CPU_HZ / 1_000_000) as u64);
