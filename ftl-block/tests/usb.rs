//! The SCSI handler behind the real usbd-storage bulk-only transport, on a mock USB bus: the
//! test plays the host, sending command block wrappers (CBW) and data in 64-byte packets on the
//! bulk OUT endpoint and collecting data and the command status wrapper (CSW) from the bulk IN
//! endpoint, which holds one packet at a time (the device has to wait for the host to take it).
//! Checked: data both ways, CSW tag, status and residue, sense after a failure, SYNCHRONIZE CACHE
//! and UNMAP (which usbd-storage does not decode) reaching the FTL.

mod common;

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use common::{emulator, geometry, open};
use ftl_block::scsi::ScsiDisk;
use ftl_block::SECTOR_SIZE;
use ftl_core::Config;
use sim_host::memory::FtlMemory;
use usb_device::bus::{PollResult, UsbBus, UsbBusAllocator};
use usb_device::device::{UsbDeviceBuilder, UsbVidPid};
use usb_device::endpoint::{EndpointAddress, EndpointType};
use usb_device::{UsbDirection, UsbError};
use usbd_storage::subclass::scsi::Scsi;

const PACKET: usize = 64;

#[derive(Default)]
struct Wire {
    /// Host to device, on the bulk OUT endpoint.
    out: VecDeque<Vec<u8>>,
    /// Device to host, on the bulk IN endpoint (at most one packet in flight).
    inn: VecDeque<Vec<u8>>,
    stalls: u32,
    next_ep: usize,
}

struct MockBus(Arc<Mutex<Wire>>);

impl UsbBus for MockBus {
    fn alloc_ep(
        &mut self,
        dir: UsbDirection,
        _addr: Option<EndpointAddress>,
        _ty: EndpointType,
        _max_packet_size: u16,
        _interval: u8,
    ) -> usb_device::Result<EndpointAddress> {
        let mut w = self.0.lock().unwrap();
        w.next_ep += 1;
        Ok(EndpointAddress::from_parts(w.next_ep, dir))
    }
    fn enable(&mut self) {}
    fn reset(&self) {}
    fn set_device_address(&self, _addr: u8) {}
    fn write(&self, _ep: EndpointAddress, buf: &[u8]) -> usb_device::Result<usize> {
        let mut w = self.0.lock().unwrap();
        if !w.inn.is_empty() {
            return Err(UsbError::WouldBlock);
        }
        assert!(buf.len() <= PACKET);
        w.inn.push_back(buf.to_vec());
        Ok(buf.len())
    }
    fn read(&self, _ep: EndpointAddress, buf: &mut [u8]) -> usb_device::Result<usize> {
        let mut w = self.0.lock().unwrap();
        let p = w.out.pop_front().ok_or(UsbError::WouldBlock)?;
        buf[..p.len()].copy_from_slice(&p);
        Ok(p.len())
    }
    fn set_stalled(&self, _ep: EndpointAddress, stalled: bool) {
        if stalled {
            self.0.lock().unwrap().stalls += 1;
        }
    }
    fn is_stalled(&self, _ep: EndpointAddress) -> bool {
        false
    }
    fn suspend(&self) {}
    fn resume(&self) {}
    fn poll(&self) -> PollResult {
        PollResult::None
    }
}

struct Csw {
    residue: u32,
    status: u8,
}

/// One command through the transport: the CBW, the data-out packets, then polls until the CSW
/// arrives; returns the data-in bytes and the CSW.
fn transact<F: FnMut()>(
    wire: &Arc<Mutex<Wire>>,
    mut poll: F,
    tag: u32,
    cdb: &[u8],
    data_len: u32,
    data_in: bool,
    out: &[u8],
) -> (Vec<u8>, Csw) {
    let mut cbw = vec![0u8; 31];
    cbw[0..4].copy_from_slice(b"USBC");
    cbw[4..8].copy_from_slice(&tag.to_le_bytes());
    cbw[8..12].copy_from_slice(&data_len.to_le_bytes());
    cbw[12] = if data_in { 0x80 } else { 0 };
    cbw[14] = cdb.len() as u8;
    cbw[15..15 + cdb.len()].copy_from_slice(cdb);
    {
        let mut w = wire.lock().unwrap();
        w.out.push_back(cbw);
        for p in out.chunks(PACKET) {
            w.out.push_back(p.to_vec());
        }
    }
    let mut data = Vec::new();
    for _ in 0..100_000 {
        poll();
        let p = wire.lock().unwrap().inn.pop_front();
        if let Some(p) = p {
            if p.len() == 13 && &p[0..4] == b"USBS" && p[4..8] == tag.to_le_bytes() {
                assert!(wire.lock().unwrap().out.is_empty(), "the device read every data-out packet");
                return (
                    data,
                    Csw { residue: u32::from_le_bytes(p[8..12].try_into().unwrap()), status: p[12] },
                );
            }
            data.extend_from_slice(&p);
        }
    }
    panic!("no CSW for {cdb:?}");
}

#[test]
fn scsi_over_usbd_storage_bulk_only_transport() {
    let cfg = Config::with_logical_pages(&geometry(16), 64);
    let mut emu = emulator(geometry(16), 0.5, 0.5);
    let mut mem = FtlMemory::new(&geometry(16), &cfg);
    let mut handler = ScsiDisk::new(open(&mut emu, &mut mem, cfg, true).unwrap(), vec![0u8; 2048]).unwrap();
    let wire = Arc::new(Mutex::new(Wire::default()));
    let alloc = UsbBusAllocator::new(MockBus(wire.clone()));
    let mut scsi = Scsi::new(&alloc, PACKET as u16, 0, vec![0u8; 512]).unwrap();
    // Building the device freezes the allocator (the endpoints are usable from then on); the
    // test drives the class directly, as `UsbDevice::poll` would once configured.
    let _device = UsbDeviceBuilder::new(&alloc, UsbVidPid(0x1209, 0x0001)).build();
    let mut tag = 0;
    let mut run = |handler: &mut ScsiDisk<_, _, _>, cdb: &[u8], len: u32, data_in: bool, out: &[u8]| {
        tag += 1;
        transact(
            &wire,
            || {
                let _ = scsi.poll(|cmd| handler.process(cmd));
            },
            tag,
            cdb,
            len,
            data_in,
            out,
        )
    };
    // INQUIRY.
    let (d, csw) = run(&mut handler, &[0x12, 0, 0, 0, 36, 0], 36, true, &[]);
    assert_eq!((csw.status, csw.residue, d.len()), (0, 0, 36));
    assert_eq!(&d[8..16], b"nandftl ");
    // WRITE(10) then READ(10) of 19 sectors at 3 (unaligned on 4-sector pages).
    let data: Vec<u8> = (0..19 * SECTOR_SIZE).map(|i| (i * 13 % 256) as u8).collect();
    let len = data.len() as u32;
    let (_, csw) = run(&mut handler, &[0x2A, 0, 0, 0, 0, 3, 0, 0, 19, 0], len, false, &data);
    assert_eq!((csw.status, csw.residue), (0, 0));
    let (d, csw) = run(&mut handler, &[0x28, 0, 0, 0, 0, 3, 0, 0, 19, 0], len, true, &[]);
    assert_eq!((csw.status, csw.residue), (0, 0));
    assert!(d == data);
    // READ(16) past the end: failed, nothing moved (residue = everything), sense LBA out of range.
    let mut r16 = [0u8; 16];
    r16[0] = 0x88;
    r16[9] = 255;
    r16[13] = 2;
    let stalls = wire.lock().unwrap().stalls;
    let (d, csw) = run(&mut handler, &r16, 1024, true, &[]);
    assert_eq!((csw.status, csw.residue, d.len()), (1, 1024, 0));
    assert_eq!(wire.lock().unwrap().stalls, stalls + 1, "the IN endpoint stalls on a short data phase");
    let (d, csw) = run(&mut handler, &[0x03, 0, 0, 0, 18, 0], 18, true, &[]);
    assert_eq!((csw.status, d[2], d[12], d[13]), (0, 0x05, 0x21, 0x00));
    // SYNCHRONIZE CACHE and UNMAP: opcodes usbd-storage leaves undecoded.
    let flushes = handler.disk().store().counters().host_flushes;
    let (_, csw) = run(&mut handler, &[0x35, 0, 0, 0, 0, 0, 0, 0, 0, 0], 0, false, &[]);
    assert_eq!(csw.status, 0);
    assert_eq!(handler.disk().store().counters().host_flushes, flushes + 1);
    let mut list = vec![0u8; 24];
    list[1] = 22;
    list[3] = 16;
    list[15] = 4; // LBA 4, 4 sectors: page 1
    list[19] = 4;
    let (_, csw) = run(&mut handler, &[0x42, 0, 0, 0, 0, 0, 0, 0, 24, 0], 24, false, &list);
    assert_eq!(csw.status, 0);
    assert_eq!(handler.disk().store().counters().host_trim_pages, 1);
    let (d, _) = run(&mut handler, &[0x28, 0, 0, 0, 0, 3, 0, 0, 19, 0], len, true, &[]);
    let mut want = data.clone();
    want[SECTOR_SIZE..5 * SECTOR_SIZE].fill(0);
    assert!(d == want);
    // An unknown opcode fails with INVALID COMMAND OPERATION CODE.
    let (_, csw) = run(&mut handler, &[0xA0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0], 0, false, &[]);
    assert_eq!(csw.status, 1);
    let (d, _) = run(&mut handler, &[0x03, 0, 0, 0, 18, 0], 18, true, &[]);
    assert_eq!((d[2], d[12]), (0x05, 0x20));
}
