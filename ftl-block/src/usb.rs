//! Glue from `usbd-storage`'s SCSI class (bulk-only transport) to the [`ScsiDisk`] handler
//! (feature `usbd-storage`, which turns on its `scsi`, `bbb` and `extended_addressing`
//! features). Version 2: 3.0 uses `core::assert_matches`, not stable in the Rust 1.95 this
//! project builds with.
//!
//! ```text
//! let mut scsi = usbd_storage::subclass::scsi::Scsi::new(&usb_alloc, 64, 0, usb_buf)?;
//! // ... UsbDeviceBuilder, then in the USB interrupt or main loop:
//! usb_dev.poll(&mut [&mut scsi]);
//! let _ = scsi.poll(|cmd| handler.process(cmd));
//! ```
//!
//! usbd-storage decodes the CDB itself and keeps only the opcode of the commands it does not
//! know ([`ScsiCommand::Unknown`]); [`command`] maps those by opcode: SYNCHRONIZE CACHE(10/16)
//! (the whole device is flushed, whatever the range), UNMAP (the parameter list's own header
//! gives its length), START STOP UNIT and PREVENT ALLOW MEDIUM REMOVAL. READ(6)/WRITE(6) and
//! anything else stay unknown (INVALID COMMAND OPERATION CODE). usbd-storage gives no signal of a
//! bus reset to the callback: call [`ScsiDisk::abort`] when the device sees one (e.g. when
//! `UsbDevice::state()` leaves `Configured`), so a half-done command is not continued.
//!
//! Limitation (usbd-storage 2 gives the callback no access to the CBW's transfer length): a host
//! whose CBW announces less data than the CDB moves (bulk-only cases 7 and 13) leaves the command
//! waiting for the transport until the host times out and resets the device. Hosts send matching
//! lengths for the commands handled here.

use core::borrow::BorrowMut;

use usb_device::bus::UsbBus;
use usbd_storage::subclass::scsi::{Scsi, ScsiCommand};
use usbd_storage::subclass::Command as UsbCommand;
use usbd_storage::transport::bbb::{BulkOnly, BulkOnlyError};
use usbd_storage::transport::TransportError;

use crate::scsi::{opcode, Command, DataPhase, Poll, ScsiDisk, Status};
use crate::store::PageStore;

/// The handler's command for a command usbd-storage decoded.
pub fn command(kind: &ScsiCommand) -> Command {
    match *kind {
        ScsiCommand::TestUnitReady => Command::TestUnitReady,
        ScsiCommand::RequestSense { desc, alloc_len } => {
            Command::RequestSense { desc, alloc_len: alloc_len as u16 }
        }
        ScsiCommand::Inquiry { evpd, page_code, alloc_len } => {
            Command::Inquiry { evpd, page_code, alloc_len }
        }
        ScsiCommand::ModeSense6 { page_control, page_code, subpage_code, alloc_len, .. } => {
            Command::ModeSense {
                ten: false,
                page_control: page_control as u8,
                page_code,
                subpage_code,
                alloc_len: alloc_len as u16,
            }
        }
        ScsiCommand::ModeSense10 { page_control, page_code, subpage_code, alloc_len, .. } => {
            Command::ModeSense {
                ten: true,
                page_control: page_control as u8,
                page_code,
                subpage_code,
                alloc_len,
            }
        }
        ScsiCommand::ReadCapacity10 => Command::ReadCapacity10,
        ScsiCommand::ReadCapacity16 { alloc_len } => Command::ReadCapacity16 { alloc_len },
        ScsiCommand::Read { lba, len } => Command::Read { lba, len },
        ScsiCommand::Write { lba, len } => Command::Write { lba, len },
        ScsiCommand::ReadFormatCapacities { alloc_len } => Command::ReadFormatCapacities { alloc_len },
        ScsiCommand::Unknown { cmd } => match cmd {
            opcode::SYNCHRONIZE_CACHE_10 | opcode::SYNCHRONIZE_CACHE_16 => Command::SynchronizeCache,
            opcode::UNMAP => Command::Unmap { anchor: false, param_len: None },
            opcode::START_STOP_UNIT => Command::StartStopUnit,
            opcode::PREVENT_ALLOW_MEDIUM_REMOVAL => Command::PreventAllowMediumRemoval,
            opcode => Command::Unknown { opcode },
        },
        // `ScsiCommand` is non-exhaustive: a variant added later is not handled here.
        _ => Command::Unknown { opcode: 0xFF },
    }
}

/// The data phase of a usbd-storage command.
struct Phase<'c, 'a, 'alloc, Bus: UsbBus + 'alloc, Buf: BorrowMut<[u8]>>(
    &'c mut UsbCommand<'a, ScsiCommand, Scsi<BulkOnly<'alloc, Bus, Buf>>>,
);

impl<'alloc, Bus: UsbBus + 'alloc, Buf: BorrowMut<[u8]>> DataPhase for Phase<'_, '_, 'alloc, Bus, Buf> {
    type Error = TransportError<BulkOnlyError>;
    fn send(&mut self, data: &[u8]) -> Result<usize, Self::Error> {
        self.0.write_data(data)
    }
    fn receive(&mut self, buf: &mut [u8]) -> Result<usize, Self::Error> {
        self.0.read_data(buf)
    }
}

impl<S: PageStore, B: AsMut<[u8]>, X: AsMut<[u8]>> ScsiDisk<S, B, X> {
    /// The body of `Scsi::poll`'s callback: advances the command and, when it completes, sets the
    /// status of the command status wrapper (the transport counts the residue itself). A
    /// transport error (the host's CBW disagrees with the command about the data phase) ends the
    /// command with a phase error, which makes the host reset the device.
    pub fn process<'alloc, Bus: UsbBus + 'alloc, Buf: BorrowMut<[u8]>>(
        &mut self,
        mut cmd: UsbCommand<'_, ScsiCommand, Scsi<BulkOnly<'alloc, Bus, Buf>>>,
    ) {
        let c = command(&cmd.kind);
        match self.poll(&c, &mut Phase(&mut cmd)) {
            Ok(Poll::Pending) => {}
            Ok(Poll::Done { status: Status::Passed, .. }) => cmd.pass(),
            Ok(Poll::Done { status: Status::Failed, .. }) => cmd.fail(),
            Err(_) => cmd.fail_phase(),
        }
    }
}
