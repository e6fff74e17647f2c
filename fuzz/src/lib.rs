//! What the fuzz targets share: a small emulated device (sim-host's emulator), the saved image of
//! a formatted and used FTL on it, patching that image's pages and spares, and mounting and
//! exercising whatever results.
//!
//! The device is small on purpose (48 blocks of 8 pages of 512 + 64 bytes: a 221 KiB image) so
//! that one execution (load, mount, a pass of reads and writes, a remount) takes well under a
//! millisecond and libFuzzer explores many of them.

use std::collections::HashMap;
use std::sync::OnceLock;

use ftl_core::policy::DefaultPolicies;
use ftl_core::{AnyMap, Config, Ftl};
use nand_hal::{Geometry, NandFlash};
use sim_host::emulator::{Emulator, EmulatorConfig};
use sim_host::memory::FtlMemory;

/// The fuzzed device: 48 blocks of 8 pages of 512 data and 64 spare bytes, one plane (the
/// smallest of this shape whose configuration validates).
pub fn geometry() -> Geometry {
    Geometry {
        data_bytes: 512,
        spare_bytes: 64,
        pages_per_block: 8,
        blocks_per_plane: 48,
        planes_per_lun: 1,
        luns: 1,
        ..Geometry::MT29F4G08
    }
}

/// The FTL configuration of the fuzzed device: 25% over-provisioning, a checkpoint every 16
/// blocks (so the base image has several).
pub fn config() -> Config {
    Config { checkpoint_interval_blocks: 16, ..Config::for_over_provisioning(&geometry(), 25) }
}

/// The content written to logical page `lpn` as its version `v` (the page number first, so a
/// page read from the wrong place is told apart).
pub fn page_content(lpn: u32, v: u8) -> Vec<u8> {
    let mut p = vec![v; geometry().data_bytes as usize];
    p[..4].copy_from_slice(&lpn.to_le_bytes());
    p
}

/// A saved emulator image (`Emulator::save_to_writer`) and where its array sections are.
#[derive(Clone)]
pub struct Image {
    /// The image.
    pub bytes: Vec<u8>,
    body_at: usize,
    spare_at: usize,
    data_at: usize,
}

impl Image {
    /// The image of `emu`.
    pub fn of(emu: &Emulator) -> Image {
        let mut bytes = Vec::new();
        emu.save_to_writer(&mut bytes).expect("saving to memory");
        let g = emu.geometry();
        let (blocks, pages) = (g.total_blocks() as usize, g.total_pages() as usize);
        let header = u32::from_le_bytes(bytes[12..16].try_into().unwrap()) as usize;
        // Magic, version, header length, header, header CRC; then per block a factory flag, an
        // erase count and a read counter, per page a program count and a program time.
        let body_at = 16 + header + 4;
        let spare_at = body_at + 9 * blocks + 5 * pages;
        let data_at = spare_at + pages * g.spare_bytes as usize;
        assert_eq!(data_at + pages * g.data_bytes as usize + 4, bytes.len(), "image layout");
        Image { bytes, body_at, spare_at, data_at }
    }

    /// The spare area of page `p`.
    pub fn spare_mut(&mut self, p: u32) -> &mut [u8] {
        let n = geometry().spare_bytes as usize;
        let at = self.spare_at + p as usize * n;
        &mut self.bytes[at..at + n]
    }

    /// The data area of page `p`.
    pub fn data_mut(&mut self, p: u32) -> &mut [u8] {
        let n = geometry().data_bytes as usize;
        let at = self.data_at + p as usize * n;
        &mut self.bytes[at..at + n]
    }

    /// Whether page `p` is erased (every byte of its spare and data 0xFF).
    pub fn is_erased(&self, p: u32) -> bool {
        let g = geometry();
        let (s, d) = (g.spare_bytes as usize, g.data_bytes as usize);
        let spare = &self.bytes[self.spare_at + p as usize * s..][..s];
        let data = &self.bytes[self.data_at + p as usize * d..][..d];
        spare.iter().chain(data).all(|&b| b == 0xFF)
    }

    /// Loads the image after its checksum is recomputed over the patched body.
    pub fn load(mut self) -> Emulator {
        let end = self.bytes.len() - 4;
        let crc = ftl_core::crc32c::crc32c(&self.bytes[self.body_at..end]); // the image's CRC-32C
        self.bytes[end..].copy_from_slice(&crc.to_le_bytes());
        Emulator::load_from_reader(&self.bytes[..]).expect("an image with only its array patched loads")
    }
}

/// Writes `lpn` (version `v`), returning the content written.
fn write(ftl: &mut Ftl<'_, Emulator, DefaultPolicies, AnyMap<'_>>, lpn: u32, v: u8) -> Vec<u8> {
    let data = page_content(lpn, v);
    ftl.write(lpn, &data).expect("writing the base image");
    data
}

/// The image of the device after a format, two passes of writes over every logical page (so GC
/// has run and checkpoints were written), a trim, a flush, and writes after it, cut without an
/// unmount: mount then has a checkpoint, journal pages and a tail of pages to replay.
pub fn base_image() -> &'static Image {
    static BASE: OnceLock<Image> = OnceLock::new();
    BASE.get_or_init(|| {
        let (g, cfg) = (geometry(), config());
        let emu = Emulator::new(EmulatorConfig::new(g)).expect("the fuzzed geometry is valid");
        let mut mem = FtlMemory::new(&g, &cfg);
        let (map, m) = mem.parts();
        let mut ftl = Ftl::format(emu, DefaultPolicies::default(), map, m, cfg).expect("format");
        let n = ftl.capacity_pages();
        for v in 1..=2u8 {
            for lpn in 0..n {
                write(&mut ftl, (lpn * 7 + v as u32) % n, v);
            }
        }
        ftl.trim(3, 4).expect("trim");
        ftl.flush().expect("flush");
        for lpn in 0..n / 4 {
            write(&mut ftl, lpn * 3 % n, 3);
        }
        Image::of(&ftl.into_nand())
    })
}

/// `FTL_FUZZ_STRICT=1`: a device that mounted and flushed must also remount and read back what
/// was flushed without an error, whatever was damaged (guarantee 1 held on damaged images too;
/// it does not today, see `fuzz/artifacts-known/README.md`).
pub fn strict() -> bool {
    static STRICT: OnceLock<bool> = OnceLock::new();
    *STRICT.get_or_init(|| std::env::var_os("FTL_FUZZ_STRICT").is_some_and(|v| v == "1"))
}

/// Mounts `emu`, which must return `Ok` or a typed error. If it mounts: every logical page is
/// read, a few writes and trims chosen by `ops` (3 bytes each: logical page, version or trim) are
/// made, then a flush; if the flush succeeds the device is cut and mounted again, and with
/// `check_flushed` each page written (and not trimmed after) must read back as written or fail
/// with a typed error, never return other content. Errors of any step are allowed (a damaged
/// image is outside the power-cut model of guarantees 1 and 2: it may refuse work, or lose what
/// was flushed on it, as `fuzz/artifacts-known/README.md` describes); panics and silently wrong
/// data are not.
pub fn mount_and_exercise(emu: Emulator, ops: &[u8], check_flushed: bool) {
    let (g, cfg) = (geometry(), config());
    let mut mem = FtlMemory::new(&g, &cfg);
    let (map, m) = mem.parts();
    let Ok(mut ftl) = Ftl::mount(emu, DefaultPolicies::default(), map, m, cfg) else { return };
    let n = ftl.capacity_pages();
    let mut buf = vec![0u8; g.data_bytes as usize];
    for lpn in 0..n {
        let _ = ftl.read(lpn, &mut buf);
    }
    let mut expect: HashMap<u32, Vec<u8>> = HashMap::new();
    for op in ops.chunks_exact(3).take(16) {
        let lpn = u16::from_le_bytes([op[0], op[1]]) as u32 % n;
        if op[2] >= 0xF0 {
            let count = (op[2] & 0x0F) as u32 + 1;
            // Trimmed pages (or, if the trim fails, pages of undefined content) are not checked.
            let _ = ftl.trim(lpn, count);
            expect.retain(|&l, _| !(lpn..lpn.saturating_add(count)).contains(&l));
        } else {
            let data = page_content(lpn, op[2]);
            match ftl.write(lpn, &data) {
                Ok(()) => expect.insert(lpn, data),
                Err(_) => expect.remove(&lpn),
            };
        }
    }
    if ftl.flush().is_err() {
        return;
    }
    let nand = ftl.into_nand();
    let mut mem = FtlMemory::new(&g, &cfg);
    let (map, m) = mem.parts();
    let strict = check_flushed && strict();
    let mut ftl = match Ftl::mount(nand, DefaultPolicies::default(), map, m, cfg) {
        Ok(ftl) => ftl,
        Err(e) if strict => panic!("mounted, flushed, cut: the remount fails with {e:?}"),
        Err(_) => return,
    };
    if check_flushed {
        for (lpn, data) in &expect {
            match ftl.read(*lpn, &mut buf) {
                Ok(()) => assert!(buf == *data, "flushed page {lpn} reads other content"),
                Err(e) if strict => panic!("flushed page {lpn} reads {e:?}"),
                Err(_) => {}
            }
        }
    }
}
