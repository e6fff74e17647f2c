//! The NBD server's handshake and transmission phases (`sim_host::nbd::protocol::negotiate` and
//! `transmission`), driven by the input as the client's byte stream over an in-memory
//! connection, against the FTL's byte-level block device (`BlockDisk`) on a freshly formatted
//! small emulated device. Checks: no panic or hang on any byte stream (options, names, requests,
//! lengths, offsets, flags, truncated payloads); and every read the server performs returns what
//! a byte-array model of the export holds (writes land where they should, whole trimmed pages
//! read as zeros, unaligned read-modify-writes keep their neighbours).
#![no_main]

use std::sync::Mutex;

use ftl_core::policy::DefaultPolicies;
use ftl_core::Ftl;
use ftl_fuzz::{config, geometry};
use libfuzzer_sys::fuzz_target;
use sim_host::emulator::{Emulator, EmulatorConfig};
use sim_host::memory::FtlMemory;
use sim_host::nbd::protocol::{negotiate, transmission, Errno, Export};
use sim_host::nbd::BlockDisk;

/// The block device and a model of its bytes (`None`: unknown after a failed write).
struct Checked<'m> {
    disk: Mutex<BlockDisk<'m, Emulator>>,
    model: Mutex<Vec<Option<u8>>>,
    size: u64,
    page: u64,
}

impl Export for Checked<'_> {
    fn name(&self) -> &str {
        "ftl"
    }
    fn description(&self) -> String {
        "fuzzed".into()
    }
    fn size(&self) -> u64 {
        self.size
    }
    fn preferred_block_size(&self) -> u32 {
        self.page as u32
    }
    fn read(&self, offset: u64, buf: &mut [u8]) -> Result<(), Errno> {
        self.disk.lock().unwrap().read_at(offset, buf).map_err(|_| Errno::EIO)?;
        let model = self.model.lock().unwrap();
        for (i, (&got, want)) in buf.iter().zip(&model[offset as usize..]).enumerate() {
            if let Some(want) = *want {
                assert_eq!(got, want, "byte {} of the export", offset as usize + i);
            }
        }
        Ok(())
    }
    fn write(&self, offset: u64, data: &[u8], fua: bool) -> Result<(), Errno> {
        let mut disk = self.disk.lock().unwrap();
        let result = disk.write_at(offset, data).and_then(|()| if fua { disk.flush() } else { Ok(()) });
        let mut model = self.model.lock().unwrap();
        let known = result.is_ok();
        for (m, &b) in model[offset as usize..].iter_mut().zip(data) {
            *m = known.then_some(b);
        }
        result.map_err(|_| Errno::EIO)
    }
    fn trim(&self, offset: u64, len: u64, fua: bool) -> Result<(), Errno> {
        let mut disk = self.disk.lock().unwrap();
        let result = disk.trim(offset, len).and_then(|n| if fua { disk.flush().map(|()| n) } else { Ok(n) });
        let first = offset.div_ceil(self.page);
        let end = (offset + len) / self.page;
        let mut model = self.model.lock().unwrap();
        for m in model.iter_mut().take((end * self.page) as usize).skip((first * self.page) as usize) {
            *m = result.is_ok().then_some(0);
        }
        result.map(|_| ()).map_err(|_| Errno::EIO)
    }
    fn flush(&self) -> Result<(), Errno> {
        self.disk.lock().unwrap().flush().map_err(|_| Errno::EIO)
    }
}

fuzz_target!(|input: &[u8]| {
    let (g, cfg) = (geometry(), config());
    let emu = Emulator::new(EmulatorConfig::new(g)).expect("the fuzzed geometry is valid");
    let mut mem = FtlMemory::new(&g, &cfg);
    let (map, m) = mem.parts();
    let ftl = Ftl::format(emu, DefaultPolicies::default(), map, m, cfg).expect("format");
    let disk = BlockDisk::new(ftl).expect("a block device over the formatted FTL");
    let (size, page) = (disk.size(), disk.page_bytes() as u64);
    let export =
        Checked { disk: Mutex::new(disk), model: Mutex::new(vec![Some(0); size as usize]), size, page };
    let mut r = input;
    let mut w = std::io::sink();
    if negotiate(&mut r, &mut w, &export).is_ok() {
        let mut buf = Vec::new();
        let _ = transmission(&mut r, &mut w, &export, &mut buf);
    }
});
