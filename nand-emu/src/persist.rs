//! Saving and loading an emulator image.
//!
//! The image holds the whole array and everything needed to continue where it stopped: geometry,
//! configuration, factory-bad flags, erase counts, per-page program counts, spare areas, data
//! areas (when stored), the operation counter, the positions of the random streams and the
//! bit-error model's state (page program times, block read counters, the retention clock).
//! Counters and the timing state are not saved (a loaded emulator starts with zero counters at
//! simulated time 0, its retention clock continuing from the value it had when saved: time does
//! not pass while an image sits on disk); it comes up powered, with no cut scheduled and no
//! injected failure pending.
//!
//! Format (version 4), all integers little endian:
//!
//! | bytes            | content                                                          |
//! |------------------|------------------------------------------------------------------|
//! | 8                | magic `NANDEMU\0`                                                |
//! | 4                | version (`u32`, 1)                                               |
//! | 4                | header length `h` (`u32`)                                        |
//! | h                | header: geometry, configuration, `ops_issued`, stream positions  |
//! | 4                | CRC-32C of the header                                            |
//! | blocks           | factory-bad flags, one byte (0 or 1) per block                   |
//! | 4 * blocks       | erase counts (`u32`)                                             |
//! | pages            | program counts since erase (`u8`)                                |
//! | 4 * pages        | program times, retention-clock seconds (`u32`)                   |
//! | 4 * blocks       | page reads since erase (`u32`)                                   |
//! | pages * spare    | spare areas                                                      |
//! | pages * data     | data areas, present only when `store_data`                      |
//! | 4                | CRC-32C of everything after the header CRC                       |
//!
//! The header ends with the configuration's fault rates (version 2 adds
//! `rber_retention_factor`, `rber_retention_scale_s` and `read_disturb_factor` after them),
//! `ops_issued`, the three stream positions, (version 2) the retention clock (`u32`),
//! (version 3) the channel count (`u32`, 0 = one per LUN) and (version 4) the timing model's
//! scheduling (`u8`: 0 plane queues, 1 LUN queues).
//!
//! Version 1 images (before the retention and read-disturb model) still load: their new fault
//! fields take the defaults (off), every page has age 0 and every block 0 reads. Version 1 and 2
//! images have one channel per LUN; images before version 4 have plane queues. Images are always
//! written as version 4.
//!
//! Loading rejects (with an `io::Error`, never a panic) a wrong magic or version, a truncated
//! image, a checksum mismatch, an invalid configuration and out-of-range fields. Memory is
//! allocated as the bytes arrive, so a short file cannot make the loader reserve the size its
//! header claims.

use std::fs::File;
use std::io::{self, BufReader, BufWriter, Read, Write};
use std::path::Path;

use crc::{Crc, Table, CRC_32_ISCSI};
use nand_hal::{EccRequirement, Geometry};

use super::timing::Scheduling;
use super::{Emulator, EmulatorConfig, FaultConfig, TimingParams, WearState};

const MAGIC: [u8; 8] = *b"NANDEMU\0";
const VERSION: u32 = 4;
/// The oldest version [`Emulator::load_from_reader`] reads.
const MIN_VERSION: u32 = 1;
/// Largest header accepted (the factory-bad list dominates it).
const MAX_HEADER: u32 = 1 << 28;
static CRC32C: Crc<u32, Table<16>> = Crc::<u32, Table<16>>::new(&CRC_32_ISCSI);

fn invalid(why: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("emulator image: {why}"))
}

/// Little-endian encoder of the header.
struct Enc(Vec<u8>);

impl Enc {
    fn bytes(&mut self, b: &[u8]) {
        self.0.extend_from_slice(b);
    }
    fn u8(&mut self, v: u8) {
        self.0.push(v);
    }
    fn u16(&mut self, v: u16) {
        self.bytes(&v.to_le_bytes());
    }
    fn u32(&mut self, v: u32) {
        self.bytes(&v.to_le_bytes());
    }
    fn u64(&mut self, v: u64) {
        self.bytes(&v.to_le_bytes());
    }
    fn u128(&mut self, v: u128) {
        self.bytes(&v.to_le_bytes());
    }
    fn f64(&mut self, v: f64) {
        self.u64(v.to_bits());
    }
}

/// Little-endian decoder of the header; every read is bounds-checked.
struct Dec<'a>(&'a [u8]);

impl Dec<'_> {
    fn take<const N: usize>(&mut self) -> io::Result<[u8; N]> {
        let (head, rest) = self.0.split_first_chunk::<N>().ok_or_else(|| invalid("header too short"))?;
        self.0 = rest;
        Ok(*head)
    }
    fn u8(&mut self) -> io::Result<u8> {
        Ok(self.take::<1>()?[0])
    }
    fn bool(&mut self) -> io::Result<bool> {
        match self.u8()? {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(invalid("flag is neither 0 nor 1")),
        }
    }
    fn u16(&mut self) -> io::Result<u16> {
        self.take().map(u16::from_le_bytes)
    }
    fn u32(&mut self) -> io::Result<u32> {
        self.take().map(u32::from_le_bytes)
    }
    fn u64(&mut self) -> io::Result<u64> {
        self.take().map(u64::from_le_bytes)
    }
    fn u128(&mut self) -> io::Result<u128> {
        self.take().map(u128::from_le_bytes)
    }
    fn f64(&mut self) -> io::Result<f64> {
        self.u64().map(f64::from_bits)
    }
}

/// What the header holds besides the configuration.
struct HeaderState {
    ops_issued: u64,
    faults_pos: u128,
    rber_pos: u128,
    power_pos: u128,
    retention_clock_s: u32,
}

fn encode_header(e: &Emulator, version: u32) -> Vec<u8> {
    let c = &e.config;
    let g = &c.geometry;
    let f = &c.faults;
    let t = &c.timing;
    let mut h = Enc(Vec::with_capacity(256 + 4 * f.factory_bad.len()));
    for v in [g.data_bytes, g.spare_bytes, g.pages_per_block, g.blocks_per_plane, g.planes_per_lun, g.luns] {
        h.u32(v);
    }
    h.u8(g.nop);
    h.u8(u8::from(g.sequential_program));
    h.u8(g.ecc.bits);
    h.u16(g.ecc.codeword_bytes);
    h.u32(g.endurance);
    h.u64(c.seed);
    h.u8(u8::from(c.store_data));
    h.u8(u8::from(c.reject_set_bits));
    for v in [t.t_r_ns, t.t_prog_ns, t.t_bers_ns, t.t_xfer_ps_per_byte] {
        h.u64(v);
    }
    h.u32(f.factory_bad_permille);
    h.u32(f.factory_bad.len() as u32);
    for &b in &f.factory_bad {
        h.u32(b);
    }
    for v in [
        f.rber,
        f.rber_wear_factor,
        f.program_fail_base,
        f.program_fail_slope,
        f.erase_fail_base,
        f.erase_fail_slope,
        f.torn_fraction,
        f.partial_erase_fraction,
    ] {
        h.f64(v);
    }
    if version >= 2 {
        for v in [f.rber_retention_factor, f.rber_retention_scale_s, f.read_disturb_factor] {
            h.f64(v);
        }
    }
    h.u64(e.power.ops_issued);
    h.u128(e.faults.rng.get_word_pos());
    h.u128(e.faults.rber_rng.get_word_pos());
    h.u128(e.power.rng.get_word_pos());
    if version >= 2 {
        h.u32(e.retention_clock_s());
    }
    if version >= 3 {
        h.u32(c.channels);
    }
    if version >= 4 {
        h.u8(match t.scheduling {
            Scheduling::PlaneQueues => 0,
            Scheduling::LunQueues => 1,
        });
    }
    h.0
}

fn decode_header(bytes: &[u8], version: u32) -> io::Result<(EmulatorConfig, HeaderState)> {
    let mut d = Dec(bytes);
    let geometry = Geometry {
        data_bytes: d.u32()?,
        spare_bytes: d.u32()?,
        pages_per_block: d.u32()?,
        blocks_per_plane: d.u32()?,
        planes_per_lun: d.u32()?,
        luns: d.u32()?,
        nop: d.u8()?,
        sequential_program: d.bool()?,
        ecc: EccRequirement { bits: d.u8()?, codeword_bytes: d.u16()? },
        endurance: d.u32()?,
    };
    let seed = d.u64()?;
    let store_data = d.bool()?;
    let reject_set_bits = d.bool()?;
    let mut timing = TimingParams {
        t_r_ns: d.u64()?,
        t_prog_ns: d.u64()?,
        t_bers_ns: d.u64()?,
        t_xfer_ps_per_byte: d.u64()?,
        scheduling: Scheduling::PlaneQueues,
    };
    let factory_bad_permille = d.u32()?;
    let listed = d.u32()?;
    let mut factory_bad = Vec::new();
    for _ in 0..listed {
        factory_bad.push(d.u32()?);
    }
    let mut faults = FaultConfig {
        factory_bad_permille,
        factory_bad,
        rber: d.f64()?,
        rber_wear_factor: d.f64()?,
        program_fail_base: d.f64()?,
        program_fail_slope: d.f64()?,
        erase_fail_base: d.f64()?,
        erase_fail_slope: d.f64()?,
        torn_fraction: d.f64()?,
        partial_erase_fraction: d.f64()?,
        ..FaultConfig::default()
    };
    if version >= 2 {
        faults.rber_retention_factor = d.f64()?;
        faults.rber_retention_scale_s = d.f64()?;
        faults.read_disturb_factor = d.f64()?;
    }
    let state = HeaderState {
        ops_issued: d.u64()?,
        faults_pos: d.u128()?,
        rber_pos: d.u128()?,
        power_pos: d.u128()?,
        retention_clock_s: if version >= 2 { d.u32()? } else { 0 },
    };
    let channels = if version >= 3 { d.u32()? } else { 0 };
    if version >= 4 {
        timing.scheduling = match d.u8()? {
            0 => Scheduling::PlaneQueues,
            1 => Scheduling::LunQueues,
            v => return Err(invalid(&format!("unknown scheduling {v}"))),
        };
    }
    if !d.0.is_empty() {
        return Err(invalid("header longer than its fields"));
    }
    let config = EmulatorConfig {
        geometry,
        faults,
        timing,
        seed,
        store_data,
        stored_blocks: 0,
        reject_set_bits,
        channels,
        copy_back: super::NATIVE_COPY_BACK,
        multi_plane_cut: super::MultiPlaneCut::CutOpOnly,
    };
    config.validate().map_err(|e| invalid(&e.to_string()))?;
    Ok((config, state))
}

/// Reads exactly `n` bytes, growing the buffer as they arrive.
fn read_vec<R: Read>(r: &mut R, n: usize) -> io::Result<Vec<u8>> {
    const CHUNK: usize = 16 << 20;
    let mut v = Vec::new();
    while v.len() < n {
        let len = v.len();
        let step = CHUNK.min(n - len);
        v.try_reserve(step).map_err(|_| io::Error::new(io::ErrorKind::OutOfMemory, "emulator image"))?;
        v.resize(len + step, 0);
        r.read_exact(&mut v[len..])?;
    }
    Ok(v)
}

fn read_u32<R: Read>(r: &mut R) -> io::Result<u32> {
    let mut b = [0u8; 4];
    r.read_exact(&mut b)?;
    Ok(u32::from_le_bytes(b))
}

fn u32s_le(v: &[u32]) -> Vec<u8> {
    v.iter().flat_map(|c| c.to_le_bytes()).collect()
}

fn le_u32s(b: &[u8]) -> Vec<u32> {
    b.chunks_exact(4).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
}

impl Emulator {
    /// Writes the image (see the module documentation) to `w`.
    pub fn save_to_writer<W: Write>(&self, w: W) -> io::Result<()> {
        self.save_version(w, VERSION)
    }

    /// Writes the image in format `version` (1 or 2; 1 drops the bit-error model's state).
    fn save_version<W: Write>(&self, mut w: W, version: u32) -> io::Result<()> {
        let header = encode_header(self, version);
        let header_len = u32::try_from(header.len()).map_err(|_| invalid("header too large"))?;
        w.write_all(&MAGIC)?;
        w.write_all(&version.to_le_bytes())?;
        w.write_all(&header_len.to_le_bytes())?;
        w.write_all(&header)?;
        w.write_all(&CRC32C.checksum(&header).to_le_bytes())?;
        let factory: Vec<u8> = self.factory_bad.iter().map(|&b| u8::from(b)).collect();
        let erase_counts = u32s_le(&self.erase_count);
        let (prog_time, block_reads) = if version >= 2 {
            (u32s_le(&self.prog_time), u32s_le(&self.block_reads))
        } else {
            Default::default()
        };
        let mut digest = CRC32C.digest();
        for section in
            [&factory[..], &erase_counts, &self.prog_count, &prog_time, &block_reads, &self.spare, &self.data]
        {
            digest.update(section);
            w.write_all(section)?;
        }
        w.write_all(&digest.finalize().to_le_bytes())?;
        w.flush()
    }

    /// Reads an image written by [`Emulator::save_to_writer`], consuming exactly its bytes.
    pub fn load_from_reader<R: Read>(mut r: R) -> io::Result<Emulator> {
        let mut magic = [0u8; 8];
        r.read_exact(&mut magic)?;
        if magic != MAGIC {
            return Err(invalid("bad magic number"));
        }
        let version = read_u32(&mut r)?;
        if !(MIN_VERSION..=VERSION).contains(&version) {
            return Err(invalid(&format!("unsupported version {version}")));
        }
        let header_len = read_u32(&mut r)?;
        if header_len > MAX_HEADER {
            return Err(invalid("header too large"));
        }
        let header = read_vec(&mut r, header_len as usize)?;
        if read_u32(&mut r)? != CRC32C.checksum(&header) {
            return Err(invalid("header checksum mismatch"));
        }
        let (config, state) = decode_header(&header, version)?;
        let g = config.geometry;
        let (blocks, pages) = (g.total_blocks() as usize, g.total_pages() as usize);

        let mut digest = CRC32C.digest();
        let mut section = |r: &mut R, n: usize| -> io::Result<Vec<u8>> {
            let v = read_vec(r, n)?;
            digest.update(&v);
            Ok(v)
        };
        let factory = section(&mut r, blocks)?;
        let erase_counts = section(&mut r, blocks * 4)?;
        let prog_count = section(&mut r, pages)?;
        let (prog_time, block_reads) = if version >= 2 {
            (section(&mut r, pages * 4)?, section(&mut r, blocks * 4)?)
        } else {
            (vec![0; pages * 4], vec![0; blocks * 4])
        };
        let spare = section(&mut r, pages * g.spare_bytes as usize)?;
        let data =
            if config.store_data { section(&mut r, pages * g.data_bytes as usize)? } else { Vec::new() };
        if read_u32(&mut r)? != digest.finalize() {
            return Err(invalid("checksum mismatch"));
        }
        if factory.iter().any(|&b| b > 1) {
            return Err(invalid("factory-bad flag is neither 0 nor 1"));
        }
        if prog_count.iter().any(|&c| c > g.nop) {
            return Err(invalid("program count above NOP"));
        }

        let factory_bad = factory.iter().map(|&b| b == 1).collect();
        let erase_count = le_u32s(&erase_counts);
        let wear = WearState {
            prog_time: le_u32s(&prog_time),
            block_reads: le_u32s(&block_reads),
            clock_base_s: u64::from(state.retention_clock_s),
        };
        let mut e = Emulator::from_parts(config, factory_bad, data, spare, prog_count, erase_count, wear)
            .map_err(|err| io::Error::new(io::ErrorKind::OutOfMemory, err.to_string()))?;
        e.power.ops_issued = state.ops_issued;
        // The streams were just created from the seed; move them to where they were saved.
        e.faults.rng.set_word_pos(state.faults_pos);
        e.faults.rber_rng.set_word_pos(state.rber_pos);
        e.power.rng.set_word_pos(state.power_pos);
        Ok(e)
    }

    /// Saves the image to a file at `path`, replacing it.
    pub fn save(&self, path: impl AsRef<Path>) -> io::Result<()> {
        let mut w = BufWriter::new(File::create(path)?);
        self.save_to_writer(&mut w)?;
        w.into_inner().map_err(io::IntoInnerError::into_error)?.sync_all()
    }

    /// Loads an image saved with [`Emulator::save`]; bytes after the image are an error.
    pub fn load(path: impl AsRef<Path>) -> io::Result<Emulator> {
        let mut r = BufReader::new(File::open(path)?);
        let e = Emulator::load_from_reader(&mut r)?;
        if r.read(&mut [0u8; 1])? != 0 {
            return Err(invalid("trailing bytes after the image"));
        }
        Ok(e)
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{small_config, small_geometry};
    use super::*;
    use nand_hal::{BlockId, NandFlash, PageId};

    fn busy_emulator(config: EmulatorConfig) -> Emulator {
        let mut e = Emulator::new(config).unwrap();
        let g = e.geometry();
        for b in [0, 1, 5] {
            e.erase_block(BlockId(b)).unwrap();
        }
        e.erase_block(BlockId(5)).unwrap();
        let pattern: Vec<u8> = (0..g.data_bytes).map(|i| (i * 31 + 7) as u8).collect();
        e.program_page(g.page(BlockId(1), 0), &pattern, &[0x01, 0x02]).unwrap();
        e.program_page(g.page(BlockId(1), 0), &[0x00], &[]).unwrap();
        e.program_page(g.page(BlockId(1), 3), &pattern[..100], &[]).unwrap();
        e.mark_bad(BlockId(6)).unwrap();
        e
    }

    fn assert_same_array(a: &Emulator, b: &Emulator) {
        let g = a.geometry();
        assert_eq!(b.geometry(), g);
        assert_eq!(a.config(), b.config());
        assert_eq!(a.erase_counts(), b.erase_counts());
        assert_eq!(a.ops_issued(), b.ops_issued());
        assert_eq!(a.factory_bad_blocks().collect::<Vec<_>>(), b.factory_bad_blocks().collect::<Vec<_>>());
        for p in 0..g.total_pages() {
            assert_eq!(a.peek_page(PageId(p)), b.peek_page(PageId(p)), "page {p}");
            assert_eq!(a.program_count(PageId(p)), b.program_count(PageId(p)));
        }
    }

    fn round_trip(e: &Emulator) -> (Vec<u8>, Emulator) {
        let mut image = Vec::new();
        e.save_to_writer(&mut image).unwrap();
        let mut reader = &image[..];
        let loaded = Emulator::load_from_reader(&mut reader).unwrap();
        assert!(reader.is_empty(), "the loader consumes exactly the image");
        (image, loaded)
    }

    fn faulty_config() -> EmulatorConfig {
        EmulatorConfig {
            seed: 77,
            faults: FaultConfig {
                factory_bad: vec![9],
                factory_bad_permille: 100,
                rber: 1e-4,
                torn_fraction: 0.25,
                ..FaultConfig::default()
            },
            timing: TimingParams::CAFTL_PAPER,
            ..small_config()
        }
    }

    #[test]
    fn round_trip_keeps_array_rules_and_random_streams() {
        let mut e = busy_emulator(faulty_config());
        let g = e.geometry();
        // Move every random stream before saving.
        for _ in 0..10 {
            e.read_page(g.page(BlockId(1), 0), &mut [0u8; 512], &mut []).unwrap();
        }
        e.schedule_power_cut(0);
        assert!(e.program_page(g.page(BlockId(2), 0), &[0; 64], &[]).is_err());
        e.restore_power();
        e.inject_erase_failure(BlockId(2)).unwrap();
        assert!(e.erase_block(BlockId(2)).is_err());
        assert!(e.faults.rng.get_word_pos() > 0 && e.faults.rber_rng.get_word_pos() > 0);
        assert!(e.power.rng.get_word_pos() > 0);
        let (image, mut loaded) = round_trip(&e);
        assert_same_array(&e, &loaded);
        for emu in [&mut e, &mut loaded] {
            assert!(emu.is_bad(BlockId(9)).unwrap());
            assert!(emu.is_bad(BlockId(6)).unwrap());
            assert!(emu.program_page(g.page(BlockId(9), 2), &[0], &[]).is_err(), "still factory bad");
        }
        // Order and NOP state continue.
        assert_eq!(
            loaded.program_page(g.page(BlockId(1), 2), &[0], &[]).unwrap_err(),
            e.program_page(g.page(BlockId(1), 2), &[0], &[]).unwrap_err()
        );
        // The random streams continue where they were: the same reads flip the same bits, the
        // same cut tears the same way.
        let (mut a, mut b) = (vec![0u8; 512], vec![0u8; 512]);
        for _ in 0..20 {
            e.read_page(g.page(BlockId(1), 0), &mut a, &mut []).unwrap();
            loaded.read_page(g.page(BlockId(1), 0), &mut b, &mut []).unwrap();
            assert_eq!(a, b);
        }
        assert!(e.counters().bit_flips > 0);
        for emu in [&mut e, &mut loaded] {
            emu.schedule_power_cut(0);
            assert!(emu.program_page(g.page(BlockId(1), 4), &[0; 64], &[]).is_err());
        }
        assert_same_array(&e, &loaded);
        // A second round trip of the loaded emulator gives the same bytes.
        let (again, _) = round_trip(&Emulator::load_from_reader(&image[..]).unwrap());
        assert_eq!(again, image);
    }

    #[test]
    fn round_trip_keeps_lun_queue_scheduling() {
        let timing = TimingParams { scheduling: Scheduling::LunQueues, ..TimingParams::CAFTL_PAPER };
        let e = busy_emulator(EmulatorConfig { timing, ..faulty_config() });
        let (image, loaded) = round_trip(&e);
        assert_eq!(loaded.timing_params().scheduling, Scheduling::LunQueues);
        // An unknown scheduling byte (the header's last, before its CRC) is refused.
        let header_len = u32::from_le_bytes(image[12..16].try_into().unwrap()) as usize;
        let mut bad = image.clone();
        bad[16 + header_len - 1] = 7;
        let crc = CRC32C.checksum(&bad[16..16 + header_len]);
        bad[16 + header_len..20 + header_len].copy_from_slice(&crc.to_le_bytes());
        let Err(err) = Emulator::load_from_reader(&bad[..]) else { panic!("an unknown scheduling loads") };
        assert!(err.to_string().contains("unknown scheduling 7"), "{err}");
    }

    #[test]
    fn round_trip_keeps_page_ages_and_read_counters() {
        let faults = FaultConfig {
            rber: 1e-4,
            rber_retention_factor: 3.0,
            rber_retention_scale_s: 100.0,
            read_disturb_factor: 1e-6,
            ..FaultConfig::default()
        };
        let mut e = busy_emulator(EmulatorConfig { faults, ..small_config() });
        let g = e.geometry();
        e.set_now_ns(250_000_000_000); // 250 s
        e.program_page(g.page(BlockId(1), 5), &[0x00; 64], &[]).unwrap();
        e.set_now_ns(400_000_000_000);
        for _ in 0..7 {
            e.read_page(g.page(BlockId(1), 0), &mut [0u8; 512], &mut []).unwrap();
        }
        let (image, mut loaded) = round_trip(&e);
        assert_same_array(&e, &loaded);
        assert_eq!(loaded.now_ns(), 0);
        assert_eq!(loaded.retention_clock_s(), 400);
        for emu in [&e, &loaded] {
            assert_eq!(emu.page_age_s(g.page(BlockId(1), 0)), Some(400));
            assert_eq!(emu.page_age_s(g.page(BlockId(1), 5)), Some(150));
            assert_eq!(emu.block_reads_since_erase(BlockId(1)), Some(7));
        }
        // The same reads flip the same bits: rates and streams agree.
        e.set_now_ns(0);
        e.set_now_ns(400_000_000_000);
        let clock = e.retention_clock_s();
        loaded.set_now_ns(0);
        assert_eq!(clock, loaded.retention_clock_s());
        e.reset_counters();
        let (mut a, mut b) = (vec![0u8; 512], vec![0u8; 512]);
        for _ in 0..20 {
            e.read_page(g.page(BlockId(1), 5), &mut a, &mut []).unwrap();
            loaded.read_page(g.page(BlockId(1), 5), &mut b, &mut []).unwrap();
            assert_eq!(a, b);
        }
        assert_eq!(e.counters().bit_flips, loaded.counters().bit_flips);
        assert!(e.counters().bit_flips > 0);
        let (again, _) = round_trip(&Emulator::load_from_reader(&image[..]).unwrap());
        assert_eq!(again, image);
    }

    #[test]
    fn loads_version_1_images() {
        let mut e = busy_emulator(faulty_config());
        e.set_now_ns(10_000_000_000);
        e.read_page(PageId(8), &mut [0u8; 16], &mut []).unwrap();
        let mut image = Vec::new();
        e.save_version(&mut image, 1).unwrap();
        assert_eq!(u32::from_le_bytes(image[8..12].try_into().unwrap()), 1);
        let loaded = Emulator::load_from_reader(&image[..]).unwrap();
        assert_same_array(&e, &loaded);
        assert_eq!(loaded.retention_clock_s(), 0);
        assert_eq!(loaded.page_age_s(PageId(8)), Some(0));
        assert_eq!(loaded.block_reads_since_erase(BlockId(1)), Some(0));
        // Saved again, it is an image of the current version.
        let (v2, _) = round_trip(&loaded);
        assert_eq!(u32::from_le_bytes(v2[8..12].try_into().unwrap()), VERSION);
        assert!(v2.len() > image.len());
    }

    #[test]
    fn metadata_only_images_hold_no_data() {
        let meta = busy_emulator(EmulatorConfig { store_data: false, ..small_config() });
        let full = busy_emulator(small_config());
        let (meta_image, loaded) = round_trip(&meta);
        let (full_image, _) = round_trip(&full);
        assert_same_array(&meta, &loaded);
        let g = small_geometry();
        assert_eq!(full_image.len() - meta_image.len(), (g.total_pages() * g.data_bytes) as usize);
        assert!(!loaded.config().store_data);
    }

    #[test]
    fn file_round_trip() {
        let dir = std::env::temp_dir().join(format!("sim-host-persist-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("flash.img");
        let e = busy_emulator(faulty_config());
        e.save(&path).unwrap();
        let loaded = Emulator::load(&path).unwrap();
        assert_same_array(&e, &loaded);
        // Trailing garbage is rejected by `load`.
        let mut bytes = std::fs::read(&path).unwrap();
        bytes.push(0);
        std::fs::write(&path, &bytes).unwrap();
        assert_eq!(Emulator::load(&path).unwrap_err().kind(), io::ErrorKind::InvalidData);
        assert!(Emulator::load(dir.join("missing.img")).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn rejects_wrong_magic_and_version() {
        let (mut image, _) = round_trip(&busy_emulator(small_config()));
        image[0] ^= 0x20;
        let err = Emulator::load_from_reader(&image[..]).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidData);
        assert!(err.to_string().contains("magic"), "{err}");
        image[0] ^= 0x20;
        image[8] = VERSION as u8 + 1;
        let err = Emulator::load_from_reader(&image[..]).unwrap_err();
        assert!(err.to_string().contains(&format!("version {}", VERSION + 1)), "{err}");
        image[8] = 0;
        let err = Emulator::load_from_reader(&image[..]).unwrap_err();
        assert!(err.to_string().contains("version 0"), "{err}");
        image[8] = VERSION as u8;
        assert!(Emulator::load_from_reader(&image[..]).is_ok());
        assert!(Emulator::load_from_reader(&b"not an image at all"[..]).is_err());
    }

    /// A geometry small enough to truncate and corrupt its image at every byte.
    fn tiny() -> Emulator {
        let geometry = nand_hal::Geometry {
            data_bytes: 16,
            spare_bytes: 4,
            pages_per_block: 4,
            blocks_per_plane: 2,
            planes_per_lun: 2,
            ..small_geometry()
        };
        let config = EmulatorConfig {
            faults: FaultConfig { factory_bad: vec![3], ..FaultConfig::default() },
            ..EmulatorConfig::new(geometry)
        };
        let mut e = Emulator::new(config).unwrap();
        e.program_page(PageId(1), &[0x12; 16], &[0x34; 4]).unwrap();
        e.erase_block(BlockId(2)).unwrap();
        e
    }

    #[test]
    fn rejects_every_truncation() {
        let (image, _) = round_trip(&tiny());
        for len in 0..image.len() {
            let err = Emulator::load_from_reader(&image[..len]).unwrap_err();
            assert!(
                matches!(err.kind(), io::ErrorKind::UnexpectedEof | io::ErrorKind::InvalidData),
                "length {len}: {err}"
            );
        }
    }

    #[test]
    fn rejects_every_single_byte_corruption() {
        let (image, _) = round_trip(&tiny());
        for at in 0..image.len() {
            for flip in [0x01, 0x80, 0xFF] {
                let mut bad = image.clone();
                bad[at] ^= flip;
                assert!(Emulator::load_from_reader(&bad[..]).is_err(), "byte {at} ^ {flip:#x} accepted");
            }
        }
    }

    #[test]
    fn rejects_an_invalid_configuration_with_a_valid_checksum() {
        let e = tiny();
        let mut header = encode_header(&e, VERSION);
        header[0..4].copy_from_slice(&0u32.to_le_bytes()); // data_bytes = 0
        let mut image = Vec::new();
        image.extend_from_slice(&MAGIC);
        image.extend_from_slice(&VERSION.to_le_bytes());
        image.extend_from_slice(&(header.len() as u32).to_le_bytes());
        image.extend_from_slice(&header);
        image.extend_from_slice(&CRC32C.checksum(&header).to_le_bytes());
        let err = Emulator::load_from_reader(&image[..]).unwrap_err();
        assert!(err.to_string().contains("geometry"), "{err}");
        // A header that claims a huge array but ends early fails without allocating it.
        let mut header = encode_header(&e, VERSION);
        header[12..16].copy_from_slice(&(1u32 << 20).to_le_bytes()); // blocks_per_plane
        let mut image = Vec::new();
        image.extend_from_slice(&MAGIC);
        image.extend_from_slice(&VERSION.to_le_bytes());
        image.extend_from_slice(&(header.len() as u32).to_le_bytes());
        image.extend_from_slice(&header);
        image.extend_from_slice(&CRC32C.checksum(&header).to_le_bytes());
        let err = Emulator::load_from_reader(&image[..]).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::UnexpectedEof);
    }
}
