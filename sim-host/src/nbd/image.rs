//! The persistent NAND behind `ftl-sim serve`: the emulator in RAM, a snapshot of it in the image
//! file and a redo log of the NAND operations since that snapshot.
//!
//! Files, for `--image PATH`:
//! - `PATH`: a snapshot of the emulator in its own image format ([`Emulator::save`]).
//! - `PATH.log`: a header (the snapshot's identity: its length and CRC-64; the FTL
//!   configuration) followed by batches of NAND operations (program, erase, mark bad) in the
//!   order the emulator executed them. Each batch is `[length u32][CRC-32C u32][operations]`.
//!
//! [`PersistentNand`] implements [`NandFlash`] over the [`Emulator`] and records every operation
//! that changes the array. [`PersistentNand::persist`] appends the recorded operations as one
//! batch and, when asked to be durable, `fdatasync`s the log; the server does that on every NBD
//! flush and FUA request, so a flush costs one append and one sync, not a rewrite of the image.
//! When the log outgrows twice the snapshot (and 64 MiB) the snapshot is rewritten and the log
//! restarted: the rewrite costs at most half a byte per byte logged, and a load replays at most
//! that much log.
//!
//! Why it is sound: a batch ends between two NAND operations, so the files always describe the
//! array as it was at some point between operations -- the state a power cut at that point would
//! leave, which the FTL is built to mount (its guarantees 1 and 2). Loading reads the snapshot and
//! replays the log's complete batches in order, dropping an incomplete last batch (a `kill -9` or
//! a power cut in the middle of an append); the emulator is deterministic, so replaying an
//! operation reproduces exactly what it did (each record carries its outcome, and a replay that
//! disagrees is an error, never silently accepted). Replacing files is write-to-temporary,
//! `fsync`, `rename`, `fsync` of the directory; a new snapshot is followed by a new log whose
//! header names it, and a log naming another snapshot is ignored, so a crash between the two
//! renames loses nothing (the new snapshot already holds every logged operation). The first
//! snapshot of a new image renames its log first, so an image never legitimately lacks a log.
//!
//! Damage is not a torn tail: a batch that fails its CRC but is followed by a valid batch, a
//! damaged log header, or a missing log would silently roll the device back to the snapshot (or
//! to the batch before the damage), losing writes that a flush acknowledged. [`PersistentNand::open`]
//! refuses such an image with an error saying what would be lost ([`LogState`]) unless the caller
//! accepts the rollback (`ftl-sim serve --accept-log-rollback`).
//!
//! Not covered: two servers on one image at once (nothing locks the files), and emulator state
//! that does not shape the array (counters, the timing model, `ops_issued`) is not restored by
//! a replay.

use std::fs::{self, File, OpenOptions};
use std::io::{self, BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use crc::{Crc, Table, CRC_32_ISCSI, CRC_64_XZ};
use ftl_core::Config;
use nand_hal::{BlockId, ErrorType, Geometry, NandFlash, PageId};

use crate::emulator::{EmuError, Emulator};

static CRC32C: Crc<u32, Table<16>> = Crc::<u32, Table<16>>::new(&CRC_32_ISCSI);
static CRC64: Crc<u64, Table<16>> = Crc::<u64, Table<16>>::new(&CRC_64_XZ);

const LOG_MAGIC: [u8; 8] = *b"FTLNBDL1";
/// magic, snapshot length, snapshot CRC-64, five configuration words, header CRC-32C.
const LOG_HEADER_LEN: usize = 8 + 8 + 8 + 5 * 4 + 4;
/// The log is compacted into a new snapshot once it is larger than twice the snapshot and this.
const MIN_COMPACT_BYTES: u64 = 64 << 20;
/// Largest batch accepted when loading (a batch is at most the spill threshold plus one record).
const MAX_BATCH: u32 = 1 << 30;

const OP_PROGRAM: u8 = 1;
const OP_ERASE: u8 = 2;
const OP_MARK_BAD: u8 = 3;

fn invalid(why: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, why.into())
}

/// Counters of the persistence work.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct PersistStats {
    /// Batches appended to the log.
    pub batches: u64,
    /// Bytes appended to the log (batch headers included).
    pub log_bytes: u64,
    /// `fdatasync` calls on the log.
    pub syncs: u64,
    /// Snapshots written.
    pub snapshots: u64,
    /// Operations replayed by the last load.
    pub replayed_ops: u64,
    /// Bytes and duration of the last snapshot (write, fsync, renames).
    pub last_snapshot: (u64, std::time::Duration),
}

/// An [`Emulator`] whose array persists in an image file and its log (see the module
/// documentation).
pub struct PersistentNand {
    emu: Emulator,
    path: PathBuf,
    /// The open log, positioned at its end; `None` until the first snapshot (or after a failed
    /// one: the next `persist` writes a snapshot).
    log: Option<File>,
    log_len: u64,
    snapshot_len: u64,
    /// Operations executed but not yet in the log.
    pending: Vec<u8>,
    config: Option<Config>,
    compact_min: u64,
    stats: PersistStats,
}

fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(suffix);
    PathBuf::from(s)
}

/// The log file of the image at `path`.
pub fn log_path(path: &Path) -> PathBuf {
    with_suffix(path, ".log")
}

fn sync_dir(path: &Path) -> io::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    File::open(dir)?.sync_all()
}

/// A writer that computes the CRC-64 of what passes through.
struct HashWriter<'a, W> {
    inner: W,
    digest: crc::Digest<'a, u64, Table<16>>,
    len: u64,
}

impl<W: Write> Write for HashWriter<'_, W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.digest.update(&buf[..n]);
        self.len += n as u64;
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// A reader that computes the CRC-64 of what passes through.
struct HashReader<'a, R> {
    inner: R,
    digest: crc::Digest<'a, u64, Table<16>>,
    len: u64,
}

impl<R: Read> Read for HashReader<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.digest.update(&buf[..n]);
        self.len += n as u64;
        Ok(n)
    }
}

fn encode_log_header(snapshot_len: u64, snapshot_crc: u64, c: &Config) -> Vec<u8> {
    let mut h = Vec::with_capacity(LOG_HEADER_LEN);
    h.extend_from_slice(&LOG_MAGIC);
    h.extend_from_slice(&snapshot_len.to_le_bytes());
    h.extend_from_slice(&snapshot_crc.to_le_bytes());
    for v in [
        c.logical_pages,
        c.gc_free_threshold,
        c.wear_spread_limit,
        c.wear_check_interval,
        c.checkpoint_interval_blocks,
    ] {
        h.extend_from_slice(&v.to_le_bytes());
    }
    h.extend_from_slice(&CRC32C.checksum(&h).to_le_bytes());
    h
}

/// (snapshot length, snapshot CRC-64, configuration) of a log header.
fn decode_log_header(h: &[u8]) -> Option<(u64, u64, Config)> {
    let h = h.get(..LOG_HEADER_LEN)?;
    let body = &h[..LOG_HEADER_LEN - 4];
    if h[..8] != LOG_MAGIC || CRC32C.checksum(body).to_le_bytes() != h[LOG_HEADER_LEN - 4..] {
        return None;
    }
    let u64_at = |i: usize| u64::from_le_bytes(h[i..i + 8].try_into().unwrap_or([0; 8]));
    let u32_at = |i: usize| u32::from_le_bytes(h[i..i + 4].try_into().unwrap_or([0; 4]));
    let config = Config {
        logical_pages: u32_at(24),
        gc_free_threshold: u32_at(28),
        wear_spread_limit: u32_at(32),
        wear_check_interval: u32_at(36),
        checkpoint_interval_blocks: u32_at(40),
        // Not stored: a mount-time choice, not a property of the image (the library's default).
        mount_pool_blocks: ftl_core::RECOMMENDED_MOUNT_POOL_BLOCKS,
        // Not stored either: the library's default.
        gc_copy_back: true,
        // Not stored: where new pages go is no property of the image (the library's default).
        stripe_order: ftl_core::StripeOrder::PlaneFirst,
    };
    Some((u64_at(8), u64_at(16), config))
}

/// What [`PersistentNand::open`] found in the log of an image.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LogState {
    /// Every complete batch was replayed; the last `torn_tail` bytes, an incomplete batch (an
    /// append cut by a crash, never acknowledged by a sync), were dropped.
    Replayed {
        /// Bytes of the incomplete last batch.
        torn_tail: u64,
    },
    /// The log names another snapshot: a crash between the two renames of a new snapshot, which
    /// already holds every logged operation. Ignored; nothing is lost.
    OtherSnapshot,
    /// A rollback: no log beside the image. Whatever was logged since the snapshot is gone.
    Missing,
    /// A rollback: the log's header is damaged (bad magic or CRC, or shorter than a header), so
    /// its operations cannot be tied to the snapshot; the device would be the bare snapshot.
    DamagedHeader {
        /// Length of the log, header included.
        log_bytes: u64,
    },
    /// A rollback: the batch at `offset` fails its checks but valid batches follow it, so it is
    /// damage, not a torn append. The replay stops before it.
    DamagedBatch {
        /// Byte offset of the damaged batch in the log.
        offset: u64,
        /// Bytes from the damaged batch to the end of the log, all dropped.
        lost_bytes: u64,
        /// Valid batches found after the damaged one (the ones a torn tail could not have).
        batches_after: u64,
        /// NAND operations in those valid batches.
        ops_after: u64,
    },
}

impl LogState {
    /// Whether loading this log rolls the device back past operations that were logged.
    pub fn is_rollback(&self) -> bool {
        matches!(self, LogState::Missing | LogState::DamagedHeader { .. } | LogState::DamagedBatch { .. })
    }

    /// What a rollback loses, in words (`None` when nothing logged is lost).
    pub fn rollback_description(&self, log: &Path) -> Option<String> {
        let log = log.display();
        Some(match *self {
            LogState::Replayed { .. } | LogState::OtherSnapshot => return None,
            LogState::Missing => format!(
                "{log} is missing: every NAND operation logged since the image's snapshot (all writes \
                 flushed since the server last started) would be lost, and the FTL configuration is unknown"
            ),
            LogState::DamagedHeader { log_bytes } => format!(
                "{log} has a damaged header: its {log_bytes} bytes of logged NAND operations cannot be tied \
                 to the snapshot and would all be lost (every write flushed since the server last started), \
                 and the FTL configuration recorded there is unreadable"
            ),
            LogState::DamagedBatch { offset, lost_bytes, batches_after, ops_after } => format!(
                "{log}: the batch at byte {offset} fails its checks but {batches_after} valid batch(es) with \
                 {ops_after} NAND operations follow it, so this is damage, not a torn append; replaying \
                 would stop there and lose the last {lost_bytes} bytes of the log (the damaged batch and \
                 the {batches_after} batch(es), {ops_after} operations, after it: writes that were flushed)"
            ),
        })
    }
}

/// The error of [`PersistentNand::open`] refusing a rollback (inside an `InvalidData`
/// [`io::Error`]).
#[derive(Debug)]
pub struct RollbackRefused {
    /// What the log held.
    pub state: LogState,
    why: String,
}

impl RollbackRefused {
    /// The refusal inside `e`, if that is what `e` is.
    pub fn of(e: &io::Error) -> Option<&RollbackRefused> {
        e.get_ref()?.downcast_ref()
    }
}

impl std::fmt::Display for RollbackRefused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.why)
    }
}

impl std::error::Error for RollbackRefused {}

/// What [`PersistentNand::open`] found.
pub struct Opened {
    /// The device, in the state of the last persisted operation.
    pub nand: PersistentNand,
    /// The FTL configuration recorded with the image, if its log was there.
    pub config: Option<Config>,
    /// What the log held.
    pub log: LogState,
}

impl PersistentNand {
    /// A device that will persist at `path`; nothing is written until the first
    /// [`PersistentNand::snapshot`] or [`PersistentNand::persist`].
    pub fn create(path: impl Into<PathBuf>, emu: Emulator, config: Config) -> Self {
        PersistentNand {
            emu,
            path: path.into(),
            log: None,
            log_len: 0,
            snapshot_len: 0,
            pending: Vec::new(),
            config: Some(config),
            compact_min: MIN_COMPACT_BYTES,
            stats: PersistStats::default(),
        }
    }

    /// Loads the snapshot at `path` and replays its log. The device comes back without an open
    /// log: call [`PersistentNand::set_config`] if the log held none, then
    /// [`PersistentNand::snapshot`] to start a new log.
    ///
    /// A log whose loss would roll the device back ([`LogState::is_rollback`]) is an
    /// `InvalidData` error saying what would be lost, unless `accept_rollback`: the device is
    /// then the snapshot plus the batches before the damage.
    pub fn open(path: impl Into<PathBuf>, accept_rollback: bool) -> io::Result<Opened> {
        let path = path.into();
        let file = File::open(&path)?;
        let mut reader =
            HashReader { inner: BufReader::with_capacity(1 << 20, file), digest: CRC64.digest(), len: 0 };
        let mut emu = Emulator::load_from_reader(&mut reader)?;
        if reader.inner.read(&mut [0u8; 1])? != 0 {
            return Err(invalid(format!("{}: trailing bytes after the image", path.display())));
        }
        let (snapshot_len, snapshot_crc) = (reader.len, reader.digest.finalize());
        let mut config = None;
        let mut replayed = 0;
        let lp = log_path(&path);
        let state = match fs::read(&lp) {
            Ok(log) => match decode_log_header(&log) {
                None => LogState::DamagedHeader { log_bytes: log.len() as u64 },
                Some((len, crc, c)) => {
                    config = Some(c);
                    if (len, crc) == (snapshot_len, snapshot_crc) {
                        let (ops, state) = replay(&mut emu, &log[LOG_HEADER_LEN..])
                            .map_err(|e| invalid(format!("{}: {e}", lp.display())))?;
                        replayed = ops;
                        state
                    } else {
                        LogState::OtherSnapshot
                    }
                }
            },
            Err(e) if e.kind() == io::ErrorKind::NotFound => LogState::Missing,
            Err(e) => return Err(e),
        };
        if let (false, Some(why)) = (accept_rollback, state.rollback_description(&lp)) {
            return Err(io::Error::new(io::ErrorKind::InvalidData, RollbackRefused { state, why }));
        }
        let nand = PersistentNand {
            emu,
            path,
            log: None,
            log_len: 0,
            snapshot_len,
            pending: Vec::new(),
            config,
            compact_min: MIN_COMPACT_BYTES,
            stats: PersistStats { replayed_ops: replayed, ..PersistStats::default() },
        };
        Ok(Opened { nand, config, log: state })
    }

    /// The FTL configuration recorded with the image.
    pub fn config(&self) -> Option<&Config> {
        self.config.as_ref()
    }

    /// Sets the FTL configuration recorded with the next snapshot.
    pub fn set_config(&mut self, config: Config) {
        self.config = Some(config);
    }

    /// Compacts the log into a new snapshot once it is larger than both twice the snapshot and
    /// `bytes` (default 64 MiB).
    pub fn set_compact_threshold(&mut self, bytes: u64) {
        self.compact_min = bytes;
    }

    /// The emulator.
    pub fn emulator(&self) -> &Emulator {
        &self.emu
    }

    /// The image path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Bytes of operations executed since the last append.
    pub fn pending_bytes(&self) -> usize {
        self.pending.len()
    }

    /// Persistence counters.
    pub fn stats(&self) -> PersistStats {
        self.stats
    }

    /// Writes the whole emulator to the image file and starts an empty log naming it.
    pub fn snapshot(&mut self) -> io::Result<()> {
        let started = std::time::Instant::now();
        self.log = None;
        let config = self.config.ok_or_else(|| invalid("no FTL configuration to record with the image"))?;
        let tmp = with_suffix(&self.path, ".tmp");
        let written = (|| {
            let file = File::create(&tmp)?;
            let mut w =
                BufWriter::with_capacity(1 << 20, HashWriter { inner: file, digest: CRC64.digest(), len: 0 });
            self.emu.save_to_writer(&mut w)?;
            let hw = w.into_inner().map_err(io::IntoInnerError::into_error)?;
            hw.inner.sync_all()?;
            Ok::<_, io::Error>((hw.len, hw.digest.finalize()))
        })();
        let (len, crc) = match written {
            Ok(v) => v,
            Err(e) => {
                let _ = fs::remove_file(&tmp);
                return Err(e);
            }
        };
        // A new image gets its log first: a crash between the renames then leaves no image (the
        // next start creates one), never an image without a log. Later snapshots go first: a
        // crash between the renames leaves the old log naming the old snapshot, ignored.
        let first = !self.path.exists();
        if !first {
            fs::rename(&tmp, &self.path)?;
            sync_dir(&self.path)?;
        }
        let lp = log_path(&self.path);
        let ltmp = with_suffix(&lp, ".tmp");
        let header = encode_log_header(len, crc, &config);
        {
            let mut f = File::create(&ltmp)?;
            f.write_all(&header)?;
            f.sync_all()?;
        }
        fs::rename(&ltmp, &lp)?;
        sync_dir(&lp)?;
        if first {
            fs::rename(&tmp, &self.path)?;
            sync_dir(&self.path)?;
        }
        self.log = Some(OpenOptions::new().append(true).open(&lp)?);
        self.log_len = header.len() as u64;
        self.snapshot_len = len;
        self.pending.clear();
        self.stats.snapshots += 1;
        self.stats.last_snapshot = (len, started.elapsed());
        Ok(())
    }

    /// Appends the operations executed since the last call to the log; with `durable`, syncs it
    /// (the data is then on stable storage). Compacts the log into a new snapshot when it has
    /// grown past twice the snapshot's size. On error nothing acknowledged is lost: the pending
    /// operations stay pending and the log is cut back to its last complete batch.
    pub fn persist(&mut self, durable: bool) -> io::Result<()> {
        let Some(log) = self.log.as_mut() else {
            return self.snapshot();
        };
        if !self.pending.is_empty() {
            let len = u32::try_from(self.pending.len()).map_err(|_| invalid("batch too large"))?;
            let mut digest = CRC32C.digest();
            digest.update(&len.to_le_bytes());
            digest.update(&self.pending);
            let mut head = [0u8; 8];
            head[..4].copy_from_slice(&len.to_le_bytes());
            head[4..].copy_from_slice(&digest.finalize().to_le_bytes());
            let appended = log.write_all(&head).and_then(|()| log.write_all(&self.pending));
            if let Err(e) = appended {
                if log.set_len(self.log_len).is_err() {
                    // The log's end is unknown: the next persist rewrites everything.
                    self.log = None;
                }
                return Err(e);
            }
            let n = 8 + self.pending.len() as u64;
            self.log_len += n;
            self.stats.batches += 1;
            self.stats.log_bytes += n;
            self.pending.clear();
        }
        if durable {
            log.sync_data()?;
            self.stats.syncs += 1;
        }
        if self.log_len > (2 * self.snapshot_len).max(self.compact_min) {
            self.snapshot()?;
        }
        Ok(())
    }

    fn record(&mut self, op: u8, id: u32, ok: bool) {
        self.pending.push(op);
        self.pending.extend_from_slice(&id.to_le_bytes());
        self.pending.push(u8::from(ok));
    }
}

/// The checksummed batch at the start of `log`: (body, bytes taken), or `None` if it is
/// incomplete (its length runs past the end) or fails its CRC.
fn batch_at(log: &[u8]) -> Option<(&[u8], usize)> {
    let head = log.get(..8)?;
    let len = u32::from_le_bytes([head[0], head[1], head[2], head[3]]);
    let crc = u32::from_le_bytes([head[4], head[5], head[6], head[7]]);
    if len > MAX_BATCH {
        return None;
    }
    let body = log.get(8..8 + len as usize)?;
    let mut digest = CRC32C.digest();
    digest.update(&len.to_le_bytes());
    digest.update(body);
    (digest.finalize() == crc).then_some((body, 8 + len as usize))
}

/// Operations in a batch body, without executing them (`None` if its records do not parse).
fn count_ops(mut b: &[u8]) -> Option<u64> {
    let mut n = 0;
    while !b.is_empty() {
        let op = *b.first()?;
        b = b.get(6..)?;
        if op == OP_PROGRAM {
            let dl = u32::from_le_bytes(b.get(..4)?.try_into().ok()?) as usize;
            let sl = u32::from_le_bytes(b.get(4..8)?.try_into().ok()?) as usize;
            b = b.get(8 + dl.checked_add(sl)?..)?;
        } else if op != OP_ERASE && op != OP_MARK_BAD {
            return None;
        }
        n += 1;
    }
    Some(n)
}

/// The valid batches (count, operations) chained from the start of `log`.
fn chain(mut log: &[u8]) -> (u64, u64) {
    let (mut batches, mut ops) = (0, 0);
    while let Some((body, n)) = batch_at(log) {
        let Some(k) = count_ops(body) else { break };
        batches += 1;
        ops += k;
        log = &log[n..];
    }
    (batches, ops)
}

/// Valid batches after a bad one at the start of `rest`: first where its length says the next
/// one starts, then (its length may be the damaged part) at every later offset. The scan hashes
/// at most 8 times `rest` plus 64 MiB (data whose every offset looks like a long batch would
/// otherwise cost quadratic time); past that budget nothing is found, as before this check.
fn valid_after_bad(rest: &[u8]) -> (u64, u64) {
    if rest.len() >= 8 {
        let len = u32::from_le_bytes([rest[0], rest[1], rest[2], rest[3]]) as usize;
        if let Some(next) = rest.get(8 + len..).filter(|n| !n.is_empty()) {
            let found = chain(next);
            if found.0 > 0 {
                return found;
            }
        }
    }
    let mut budget = 8 * rest.len() as u64 + (64 << 20);
    (1..rest.len().saturating_sub(8))
        .filter(|&i| {
            // Cheap filters before the CRC: a plausible length and a first record's op and outcome.
            let r = &rest[i..];
            let len = u32::from_le_bytes([r[0], r[1], r[2], r[3]]) as usize;
            (6..=r.len() - 8).contains(&len) && (OP_PROGRAM..=OP_MARK_BAD).contains(&r[8]) && r[13] <= 1
        })
        .map_while(|i| {
            let len = u32::from_le_bytes([rest[i], rest[i + 1], rest[i + 2], rest[i + 3]]) as u64;
            budget = budget.checked_sub(len)?;
            Some(chain(&rest[i..]))
        })
        .find(|found| found.0 > 0)
        .unwrap_or((0, 0))
}

/// Replays the complete batches of a log body (the log after its header); returns the
/// operations replayed and what the log held: a replay to the end or an incomplete last batch,
/// or damage followed by valid batches (the replay then stops before the damage).
fn replay(emu: &mut Emulator, body: &[u8]) -> Result<(u64, LogState), String> {
    let mut ops = 0u64;
    let mut at = 0;
    while at < body.len() {
        let Some((batch, n)) = batch_at(&body[at..]) else {
            let rest = &body[at..];
            let (batches_after, ops_after) = valid_after_bad(rest);
            if batches_after == 0 {
                return Ok((ops, LogState::Replayed { torn_tail: rest.len() as u64 }));
            }
            let state = LogState::DamagedBatch {
                offset: (LOG_HEADER_LEN + at) as u64,
                lost_bytes: rest.len() as u64,
                batches_after,
                ops_after,
            };
            return Ok((ops, state));
        };
        replay_batch(emu, batch, &mut ops)?;
        at += n;
    }
    Ok((ops, LogState::Replayed { torn_tail: 0 }))
}

fn replay_batch(emu: &mut Emulator, mut b: &[u8], ops: &mut u64) -> Result<(), String> {
    fn take<'a>(b: &mut &'a [u8], n: usize) -> Result<&'a [u8], String> {
        if b.len() < n {
            return Err("truncated operation record in a checksummed batch".into());
        }
        let (head, rest) = b.split_at(n);
        *b = rest;
        Ok(head)
    }
    while !b.is_empty() {
        let head = take(&mut b, 6)?;
        let (op, id, ok) = (head[0], u32::from_le_bytes([head[1], head[2], head[3], head[4]]), head[5]);
        let result = match op {
            OP_PROGRAM => {
                let lens = take(&mut b, 8)?;
                let dl = u32::from_le_bytes([lens[0], lens[1], lens[2], lens[3]]) as usize;
                let sl = u32::from_le_bytes([lens[4], lens[5], lens[6], lens[7]]) as usize;
                let data = take(&mut b, dl)?;
                let spare = take(&mut b, sl)?;
                emu.program_page(PageId(id), data, spare)
            }
            OP_ERASE => emu.erase_block(BlockId(id)),
            OP_MARK_BAD => emu.mark_bad(BlockId(id)),
            other => return Err(format!("unknown operation {other} in the log")),
        };
        if result.is_ok() != (ok == 1) {
            return Err(format!(
                "replaying operation {} ({op} on {id}) gave {result:?}, the log recorded {}",
                *ops,
                if ok == 1 { "success" } else { "failure" }
            ));
        }
        *ops += 1;
    }
    Ok(())
}

impl ErrorType for PersistentNand {
    type Error = EmuError;
}

impl NandFlash for PersistentNand {
    fn geometry(&self) -> Geometry {
        self.emu.geometry()
    }

    fn read_page(&mut self, page: PageId, data: &mut [u8], spare: &mut [u8]) -> Result<(), EmuError> {
        self.emu.read_page(page, data, spare)
    }

    fn program_page(&mut self, page: PageId, data: &[u8], spare: &[u8]) -> Result<(), EmuError> {
        let r = self.emu.program_page(page, data, spare);
        self.record(OP_PROGRAM, page.0, r.is_ok());
        self.pending.extend_from_slice(&(data.len() as u32).to_le_bytes());
        self.pending.extend_from_slice(&(spare.len() as u32).to_le_bytes());
        self.pending.extend_from_slice(data);
        self.pending.extend_from_slice(spare);
        r
    }

    fn erase_block(&mut self, block: BlockId) -> Result<(), EmuError> {
        let r = self.emu.erase_block(block);
        self.record(OP_ERASE, block.0, r.is_ok());
        r
    }

    fn is_bad(&mut self, block: BlockId) -> Result<bool, EmuError> {
        self.emu.is_bad(block)
    }

    fn mark_bad(&mut self, block: BlockId) -> Result<(), EmuError> {
        let r = self.emu.mark_bad(block);
        self.record(OP_MARK_BAD, block.0, r.is_ok());
        r
    }

    fn read_spare(&mut self, page: PageId, spare: &mut [u8]) -> Result<(), EmuError> {
        self.emu.read_spare(page, spare)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::emulator::EmulatorConfig;
    use crate::memory::FtlMemory;
    use ftl_core::policy::DefaultPolicies;
    use ftl_core::Ftl;

    fn geometry() -> Geometry {
        Geometry { blocks_per_plane: 64, pages_per_block: 32, ..Geometry::MT29F4G08 }
    }

    fn tempdir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("sim-host-nbd-image-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(&d).unwrap();
        d
    }

    fn same_array(a: &Emulator, b: &Emulator) -> bool {
        let g = a.geometry();
        a.erase_counts() == b.erase_counts()
            && (0..g.total_pages()).all(|p| {
                a.peek_page(PageId(p)) == b.peek_page(PageId(p))
                    && a.program_count(PageId(p)) == b.program_count(PageId(p))
            })
    }

    fn page(lpn: u32, v: u8) -> Vec<u8> {
        let mut p = vec![v; 2048];
        p[..4].copy_from_slice(&lpn.to_le_bytes());
        p
    }

    #[test]
    fn snapshot_log_replay_and_torn_tails() {
        let dir = tempdir("replay");
        let path = dir.join("flash.img");
        let g = geometry();
        let cfg = Config::for_over_provisioning(&g, 25);
        let emu = Emulator::new(EmulatorConfig::new(g)).unwrap();
        let mut mem = FtlMemory::new(&g, &cfg);
        let (map, m) = mem.parts();
        let mut ftl =
            Ftl::format(PersistentNand::create(&path, emu, cfg), DefaultPolicies::default(), map, m, cfg)
                .unwrap();
        ftl.nand_mut().snapshot().unwrap();
        assert_eq!(ftl.nand().pending_bytes(), 0);
        let n = cfg.logical_pages;
        // Enough overwrites for GC and erases between persists.
        let mut states = Vec::new();
        for round in 0..4u8 {
            for i in 0..n {
                ftl.write((i * 7 + round as u32) % n, &page(i, round)).unwrap();
            }
            ftl.trim(round as u32, 3).unwrap();
            ftl.flush().unwrap();
            ftl.nand_mut().persist(round % 2 == 0).unwrap();
            states.push((fs::metadata(log_path(&path)).unwrap().len(), ftl.nand().emulator().clone()));
        }
        assert!(ftl.counters().gc_blocks > 0);
        let stats = ftl.nand().stats();
        assert_eq!((stats.batches, stats.syncs, stats.snapshots), (4, 2, 1));
        let live = ftl.nand().emulator().clone();
        let opened = PersistentNand::open(&path, false).unwrap();
        assert_eq!(opened.config, Some(cfg));
        assert!(same_array(opened.nand.emulator(), &live));
        // The mounted FTL reads what was written.
        drop(ftl);
        let mut mem2 = FtlMemory::new(&g, &cfg);
        let (map, m) = mem2.parts();
        let mut ftl2 = Ftl::mount(opened.nand, DefaultPolicies::default(), map, m, cfg).unwrap();
        let mut buf = vec![0u8; 2048];
        ftl2.read(10, &mut buf).unwrap();
        assert_eq!(buf[4..], page(0, 3)[4..]);

        // A log cut anywhere replays exactly the complete batches before the cut.
        let log = fs::read(log_path(&path)).unwrap();
        let full = log.len() as u64;
        for cut in [full - 1, states[2].0 + 5, states[1].0, states[0].0 + 100, 60] {
            fs::write(log_path(&path), &log[..cut as usize]).unwrap();
            let want = states.iter().rev().find(|(len, _)| *len <= cut);
            let got = PersistentNand::open(&path, false).unwrap().nand;
            match want {
                Some((_, e)) => assert!(same_array(got.emulator(), e), "cut at {cut}"),
                None => assert!(got.stats().replayed_ops == 0),
            }
        }
        // A log of another snapshot (a crash between the renames of a new snapshot) is ignored.
        let mut other = encode_log_header(1, 2, &cfg);
        other.extend_from_slice(&log[LOG_HEADER_LEN..]);
        fs::write(log_path(&path), &other).unwrap();
        let o = PersistentNand::open(&path, false).unwrap();
        assert_eq!((o.config, o.log, o.nand.stats().replayed_ops), (Some(cfg), LogState::OtherSnapshot, 0));
        fs::remove_dir_all(&dir).unwrap();
    }

    /// The error `open` refuses `path` with, without `accept_rollback`.
    fn refusal(path: &Path) -> LogState {
        let e = PersistentNand::open(path, false).err().expect("a rollback must be refused");
        assert_eq!(e.kind(), io::ErrorKind::InvalidData);
        RollbackRefused::of(&e).unwrap_or_else(|| panic!("not a refused rollback: {e}")).state.clone()
    }

    #[test]
    fn damage_before_valid_batches_is_refused_unless_accepted() {
        let dir = tempdir("damage");
        let path = dir.join("flash.img");
        let g = geometry();
        let cfg = Config::for_over_provisioning(&g, 25);
        let mut nand = PersistentNand::create(&path, Emulator::new(EmulatorConfig::new(g)).unwrap(), cfg);
        nand.snapshot().unwrap();
        // Three batches: erases and programs of distinct blocks.
        let mut ends = vec![LOG_HEADER_LEN];
        let mut states = Vec::new();
        for b in 0..3u32 {
            nand.erase_block(BlockId(b)).unwrap();
            for p in 0..4 {
                nand.program_page(g.page(BlockId(b), p), &[b as u8 + 1; 2048], &[7; 8]).unwrap();
            }
            nand.persist(true).unwrap();
            ends.push(fs::metadata(log_path(&path)).unwrap().len() as usize);
            states.push(nand.emulator().clone());
        }
        let log = fs::read(log_path(&path)).unwrap();
        let full = PersistentNand::open(&path, false).unwrap();
        assert_eq!(full.log, LogState::Replayed { torn_tail: 0 });
        assert_eq!(full.nand.stats().replayed_ops, 15);
        assert!(same_array(full.nand.emulator(), &states[2]));

        // The middle batch damaged in its body, its CRC, or its length (the next batch is then
        // found by scanning): refused, saying the last batch (5 operations) would be lost.
        for at in [ends[1] + 30, ends[1] + 5, ends[1] + 1, ends[1] + 3] {
            let mut bad = log.clone();
            bad[at] ^= 0x10;
            fs::write(log_path(&path), &bad).unwrap();
            let want = LogState::DamagedBatch {
                offset: ends[1] as u64,
                lost_bytes: (ends[3] - ends[1]) as u64,
                batches_after: 1,
                ops_after: 5,
            };
            assert_eq!(refusal(&path), want, "damage at byte {at}");
            let text = want.rollback_description(&log_path(&path)).unwrap();
            assert!(
                text.contains("5 NAND operations") && text.contains(&format!("{} bytes", ends[3] - ends[1]))
            );
            // Accepted: the state before the damaged batch.
            let o = PersistentNand::open(&path, true).unwrap();
            assert_eq!(o.log, want);
            assert!(same_array(o.nand.emulator(), &states[0]), "damage at byte {at}");
        }
        // The last batch damaged or cut: a torn tail, accepted without a word.
        for (cut, flip) in [(ends[3] - 1, None), (ends[2] + 3, None), (ends[3], Some(ends[2] + 30))] {
            let mut torn = log[..cut].to_vec();
            if let Some(f) = flip {
                torn[f] ^= 1;
            }
            fs::write(log_path(&path), &torn).unwrap();
            let o = PersistentNand::open(&path, false).unwrap();
            assert_eq!(o.log, LogState::Replayed { torn_tail: (cut - ends[2]) as u64 });
            assert!(same_array(o.nand.emulator(), &states[1]));
        }
        // A damaged or cut header: refused; accepted, the bare snapshot without configuration.
        for header in [&log[..LOG_HEADER_LEN - 1], &log[..0]] {
            fs::write(log_path(&path), header).unwrap();
            assert_eq!(refusal(&path), LogState::DamagedHeader { log_bytes: header.len() as u64 });
        }
        let mut bad = log.clone();
        bad[20] ^= 1;
        fs::write(log_path(&path), &bad).unwrap();
        assert_eq!(refusal(&path), LogState::DamagedHeader { log_bytes: log.len() as u64 });
        let o = PersistentNand::open(&path, true).unwrap();
        assert_eq!((o.config, o.nand.stats().replayed_ops), (None, 0));
        // No log at all: refused.
        fs::remove_file(log_path(&path)).unwrap();
        assert_eq!(refusal(&path), LogState::Missing);
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_scan_for_batches_after_damage_is_bounded() {
        // A torn batch of 1 MiB of page data in which every fourth offset looks like the start of
        // a 512 KiB batch: an unbounded scan would hash 128 GiB. It is a torn tail, nothing more.
        let mut body = Vec::new();
        body.extend_from_slice(&(4u32 << 20).to_le_bytes());
        body.extend_from_slice(&[0; 4]);
        body.extend((0..1 << 20).map(|i| [1u8, 0, 8, 0][i % 4]));
        let mut emu = Emulator::new(EmulatorConfig::new(geometry())).unwrap();
        let (ops, state) = replay(&mut emu, &body).unwrap();
        assert_eq!((ops, state), (0, LogState::Replayed { torn_tail: body.len() as u64 }));
    }

    #[test]
    fn compaction_and_missing_files() {
        let dir = tempdir("compact");
        let path = dir.join("flash.img");
        assert_eq!(PersistentNand::open(&path, false).err().unwrap().kind(), io::ErrorKind::NotFound);
        let g = geometry();
        let cfg = Config::for_over_provisioning(&g, 25);
        let emu = Emulator::new(EmulatorConfig::new(g)).unwrap();
        let mut nand = PersistentNand::create(&path, emu, cfg);
        nand.set_compact_threshold(0);
        // The first persist without a snapshot writes one.
        nand.erase_block(BlockId(3)).unwrap();
        nand.persist(true).unwrap();
        assert_eq!(nand.stats().snapshots, 1);
        let snap = fs::metadata(&path).unwrap().len();
        // Appending more than max(snapshot, 64 MiB) of log compacts it.
        let data = vec![0u8; 2048];
        let mut rounds = 0;
        while nand.stats().snapshots == 1 {
            for b in 0..g.total_blocks() {
                nand.erase_block(BlockId(b)).unwrap();
                for p in 0..g.pages_per_block {
                    nand.program_page(g.page(BlockId(b), p), &data, &[0; 8]).unwrap();
                }
            }
            nand.persist(false).unwrap();
            rounds += 1;
        }
        // One round logs a little less than the whole array: the third one passes twice the
        // snapshot.
        assert_eq!(rounds, 3, "snapshot of {snap} bytes");
        assert_eq!(fs::metadata(log_path(&path)).unwrap().len(), LOG_HEADER_LEN as u64);
        let live = nand.emulator().clone();
        assert!(same_array(PersistentNand::open(&path, false).unwrap().nand.emulator(), &live));
        // Without its log the snapshot is refused (a rollback); accepted, it loads and says it
        // has no configuration.
        fs::remove_file(log_path(&path)).unwrap();
        assert_eq!(refusal(&path), LogState::Missing);
        assert_eq!(PersistentNand::open(&path, true).unwrap().config, None);
        fs::remove_dir_all(&dir).unwrap();
    }
}
