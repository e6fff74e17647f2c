//! USB mass storage: the FTL's disk (the FAT volume the application left on it) as a USB disk
//! of 512-byte sectors, SCSI over bulk-only transport.
//!
//! Stack, bottom up: the STM32H743's OTG2 controller in device mode with its internal full-speed
//! PHY on PA11 (DM) / PA12 (DP) (stm32h7xx-hal's `usb_hs::USB2`, driven by synopsys-usb-otg),
//! usb-device, usbd-storage 2's SCSI class on the bulk-only transport (64-byte packets, one
//! LUN), and ftl-block's `ScsiDisk` (the command set, sense data, write-through by default:
//! every WRITE and UNMAP is flushed before its status) over the application's `SectorDisk`.
//! The USB kernel clock is HSI48 (set in `super::main`); the HAL's enable sets USB33DEN (VDD33USB
//! from the board's 3.3 V). Polled: [`serve`] loops on `UsbDevice::poll` and `Scsi::poll` and
//! never returns.
//!
//! RAM (DTCM, static): 4 KiB of endpoint memory for the driver, 512 bytes of usbd-storage I/O
//! buffer; the adapter's page buffer and the handler's transfer buffer (one page each) are the
//! application's two page buffers, lent.
//!
//! Only compiles: nothing here has run (no board here). docs/firmware.md has the bring-up
//! checklist.

use core::cell::RefCell;

use cortex_m::interrupt::{free, Mutex};
use ftl_block::scsi::ScsiDisk;
use stm32h7xx_hal::usb_hs::{UsbBus, USB2};
use usb_device::device::{StringDescriptors, UsbDeviceBuilder, UsbDeviceState, UsbVidPid};
use usbd_storage::subclass::scsi::Scsi;

use super::Bus;
use crate::app::Failed;
use crate::fat::Disk;

/// pid.codes' test VID/PID (0x1209/0x0001): for development only, not for a product.
pub const VID: u16 = 0x1209;
/// See [`VID`].
pub const PID: u16 = 0x0001;
/// Bulk endpoint packet size (full speed).
const PACKET: u16 = 64;
/// usbd-storage's I/O buffer (at least one packet; 512 bytes as the crate recommends).
const IO_BUF: usize = 512;
/// Words of endpoint memory for synopsys-usb-otg (as in the HAL's examples).
const EP_WORDS: usize = 1024;

/// The OTG2 peripheral, set up by `super::main` (clocks, pins), taken by [`serve`].
static USB: Mutex<RefCell<Option<USB2>>> = Mutex::new(RefCell::new(None));

/// Keeps the USB peripheral for [`serve`].
pub fn install(usb: USB2) {
    free(|cs| USB.borrow(cs).replace(Some(usb)));
}

fn state_name(s: UsbDeviceState) -> &'static str {
    match s {
        UsbDeviceState::Default => "default (reset, no address)",
        UsbDeviceState::Addressed => "addressed",
        UsbDeviceState::Configured => "configured: the host sees the disk",
        UsbDeviceState::Suspend => "suspended",
    }
}

/// Serves `disk` over USB (`xfer`: the SCSI handler's transfer buffer, one page). Returns only if
/// the USB stack cannot be set up.
pub fn serve(disk: Disk<'_, '_, '_, Bus>, xfer: &mut [u8]) -> Result<(), Failed> {
    let Some(usb) = free(|cs| USB.borrow(cs).take()) else {
        error!("USB: the peripheral was not installed");
        return Err(Failed);
    };
    let sectors = disk.sectors();
    let bus = UsbBus::new(usb, static_slice!(u32; EP_WORDS; EP_WORDS; 0));
    let mut handler = ScsiDisk::new(disk, xfer).map_err(|e| {
        error!("USB: SCSI handler: {:?}", e);
        Failed
    })?;
    let mut scsi = Scsi::new(&bus, PACKET, 0, static_slice!(u8; IO_BUF; IO_BUF; 0)).map_err(|_| {
        error!("USB: usbd-storage refused its endpoints or buffer");
        Failed
    })?;
    let strings =
        [StringDescriptors::default().manufacturer("nandftl").product("FTL raw NAND").serial_number("0001")];
    let builder = UsbDeviceBuilder::new(&bus, UsbVidPid(VID, PID))
        .strings(&strings)
        .and_then(|b| b.max_packet_size_0(64))
        .and_then(|b| b.max_power(100));
    let Ok(builder) = builder else {
        error!("USB: device descriptor refused");
        return Err(Failed);
    };
    let mut device = builder.build();
    info!(
        "USB: mass storage (SCSI, bulk-only) on OTG2 full speed (PA11/PA12), VID:PID {:04x}:{:04x}, {} sectors of 512 \
         bytes; waiting for the host",
        VID,
        PID,
        sectors
    );
    let mut last = device.state();
    let mut transport_errors = 0u32;
    loop {
        device.poll(&mut [&mut scsi]);
        if scsi.poll(|cmd| handler.process(cmd)).is_err() {
            transport_errors += 1;
            if transport_errors.is_power_of_two() {
                warn!("USB: {} transport errors so far", transport_errors);
            }
        }
        let state = device.state();
        if state != last {
            info!("USB: {}", state_name(state));
            if state != UsbDeviceState::Configured {
                // A reset or a suspend drops the command in progress.
                handler.abort();
            }
            last = state;
        }
    }
}
