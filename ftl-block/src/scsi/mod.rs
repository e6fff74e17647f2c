//! [`ScsiDisk`]: a SCSI block-command handler over the [`SectorDisk`], the device side of USB
//! mass storage (SCSI over bulk-only transport).
//!
//! The handler is a polled state machine, independent of any USB stack: the transport hands it
//! the current [`Command`] and a [`DataPhase`] (what moves data to and from the host), and calls
//! [`ScsiDisk::poll`] again while it returns [`Poll::Pending`] (the transport had no room or no
//! data yet). That is the shape of `usbd-storage`'s `Scsi::poll` callback; the glue is
//! `crate::usb` (feature `usbd-storage`), and the tests drive it with command blocks.
//!
//! Commands: TEST UNIT READY, REQUEST SENSE (fixed format), INQUIRY (standard data; VPD pages
//! 0x00, 0xB0 block limits, 0xB1 non-rotating, 0xB2 provisioning), MODE SENSE(6/10) (caching
//! and control pages), READ CAPACITY(10/16), READ FORMAT CAPACITIES, READ(6/10/16),
//! WRITE(6/10/16), SYNCHRONIZE CACHE(10/16) (the FTL's flush), UNMAP (the adapter's trim), START
//! STOP UNIT (flush), PREVENT ALLOW MEDIUM REMOVAL (accepted). Anything else fails with ILLEGAL
//! REQUEST / INVALID COMMAND OPERATION CODE; a range past the end with LOGICAL BLOCK ADDRESS OUT
//! OF RANGE, before any data moves; FTL errors with MEDIUM ERROR, DATA PROTECT or HARDWARE ERROR
//! ([`Sense::for_error`]). A failed command's sense data is what the next REQUEST SENSE returns.
//!
//! Data moves through the transfer buffer lent at construction (at least 512 bytes), in chunks
//! cut at FTL page boundaries: with a buffer of a page or more, aligned writes reach the FTL as
//! whole pages (no read-modify-write), and only the partial pages at a request's ends are read,
//! patched and rewritten. A smaller buffer works but rewrites a page once per chunk.
//!
//! Durability ([`WriteCache`]): by default the handler is write-through: every WRITE and UNMAP
//! ends with the FTL's flush before it reports success, and the caching mode page says WCE = 0, so
//! a host that never sends SYNCHRONIZE CACHE (Linux's usb-storage driver assumes no write cache
//! by default) still gets "completed means durable". Without pending trims the FTL's flush writes
//! nothing, so this costs no NAND programs for writes. `WriteBack` reports WCE = 1 and flushes
//! only on SYNCHRONIZE CACHE / START STOP UNIT. Either way the per-sector power-loss behaviour is
//! the adapter's (see [`crate::disk`]).
//!
//! UNMAP validates every descriptor of the parameter list before discarding anything; the list
//! must fit the transfer buffer (block limits VPD: at most `(buffer - 8) / 16` descriptors).
//! Whole pages are discarded, partial pages keep their data (so LBPRZ = 0); the optimal unmap
//! granularity reported is one FTL page.

mod command;
mod pages;
mod sense;

pub use command::{opcode, Command};
pub use sense::Sense;

use crate::disk::SectorDisk;
use crate::error::Error;
use crate::store::PageStore;
use crate::SECTOR_SIZE;
use pages::Device;

/// Moves the data phase of a command: device-to-host (`send`) and host-to-device (`receive`).
/// Both may take fewer bytes than offered, or none (then the handler returns
/// [`Poll::Pending`] and continues at the next poll).
pub trait DataPhase {
    /// The transport's error.
    type Error;
    /// Queues up to `data.len()` bytes for the host; returns how many were taken.
    fn send(&mut self, data: &[u8]) -> Result<usize, Self::Error>;
    /// Takes up to `buf.len()` bytes the host sent; returns how many.
    fn receive(&mut self, buf: &mut [u8]) -> Result<usize, Self::Error>;
}

/// The outcome of a command, for the status (CSW) the transport sends.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Status {
    /// GOOD.
    Passed,
    /// CHECK CONDITION: sense data via REQUEST SENSE.
    Failed,
}

/// What one call of [`ScsiDisk::poll`] reached.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Poll {
    /// The data phase waits for the transport: poll again with the same command.
    Pending,
    /// The command is complete.
    Done {
        /// Its status.
        status: Status,
        /// Bytes moved in the data phase (for the residue).
        bytes: u32,
    },
}

/// When writes become durable (see the module documentation).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum WriteCache {
    /// Every WRITE and UNMAP flushes before it completes; WCE = 0.
    WriteThrough,
    /// Flush only on SYNCHRONIZE CACHE and START STOP UNIT; WCE = 1.
    WriteBack,
}

/// The strings of the standard INQUIRY data (ASCII, space padded).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Identity {
    /// T10 vendor identification.
    pub vendor: [u8; 8],
    /// Product identification.
    pub product: [u8; 16],
    /// Product revision level.
    pub revision: [u8; 4],
}

impl Default for Identity {
    fn default() -> Self {
        Identity { vendor: *b"nandftl ", product: *b"FTL raw NAND    ", revision: *b"0.1 " }
    }
}

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum State {
    Idle,
    /// A reply in `xfer[..len]`, `sent` bytes of it gone.
    Reply {
        len: usize,
        sent: usize,
    },
    /// READ: sectors `next..end` not yet read from the disk; `xfer[sent..len]` not yet sent.
    Read {
        next: u64,
        end: u64,
        len: usize,
        sent: usize,
        total: u64,
    },
    /// WRITE: sectors `next..end` not yet written; `xfer[..filled]` received of the next chunk.
    Write {
        next: u64,
        end: u64,
        filled: usize,
        total: u64,
    },
    /// UNMAP: `xfer[..filled]` of the parameter list received; `want` once the header is in.
    Unmap {
        param_len: Option<u16>,
        filled: usize,
        want: Option<usize>,
    },
}

/// The SCSI handler: a [`SectorDisk`], a lent transfer buffer `X`, the sense data of the last
/// command and the state of the current one.
pub struct ScsiDisk<S: PageStore, B: AsMut<[u8]>, X: AsMut<[u8]>> {
    disk: SectorDisk<S, B>,
    xfer: X,
    sense: Sense,
    state: State,
    identity: Identity,
    cache: WriteCache,
}

fn done(status: Status, bytes: u64) -> Poll {
    Poll::Done { status, bytes: bytes.min(u32::MAX as u64) as u32 }
}

/// Sectors of the next chunk of `next..end`: up to the next page boundary if `next` is inside a
/// page, else as many whole pages as the buffer holds (or what the buffer holds, if less than a
/// page).
fn chunk(next: u64, end: u64, spp: u64, cap: u64) -> u64 {
    let left = end - next;
    let off = next % spp;
    if off != 0 {
        (spp - off).min(left).min(cap)
    } else if cap >= spp {
        left.min(cap / spp * spp)
    } else {
        left.min(cap)
    }
}

impl<S: PageStore, B: AsMut<[u8]>, X: AsMut<[u8]>> ScsiDisk<S, B, X> {
    /// A handler over `disk` with transfer buffer `xfer` (at least 512 bytes, else
    /// [`Error::Buffer`]; a multiple of the page size is best), write-through.
    pub fn new(disk: SectorDisk<S, B>, mut xfer: X) -> Result<Self, Error> {
        if xfer.as_mut().len() < SECTOR_SIZE {
            return Err(Error::Buffer);
        }
        Ok(ScsiDisk {
            disk,
            xfer,
            sense: Sense::NONE,
            state: State::Idle,
            identity: Identity::default(),
            cache: WriteCache::WriteThrough,
        })
    }

    /// Sets the INQUIRY strings.
    pub fn with_identity(mut self, identity: Identity) -> Self {
        self.identity = identity;
        self
    }

    /// Sets the write-cache behaviour.
    pub fn with_write_cache(mut self, cache: WriteCache) -> Self {
        self.cache = cache;
        self
    }

    /// The sector adapter.
    pub fn disk(&self) -> &SectorDisk<S, B> {
        &self.disk
    }

    /// The sector adapter, mutably (not in the middle of a command).
    pub fn disk_mut(&mut self) -> &mut SectorDisk<S, B> {
        &mut self.disk
    }

    /// Gives the adapter and the transfer buffer back.
    pub fn into_parts(self) -> (SectorDisk<S, B>, X) {
        (self.disk, self.xfer)
    }

    /// The sense data REQUEST SENSE would return now.
    pub fn sense(&self) -> Sense {
        self.sense
    }

    /// Whether a command is in progress.
    pub fn busy(&self) -> bool {
        self.state != State::Idle
    }

    /// Drops the command in progress (call it on a bus reset or a bulk-only mass storage reset).
    /// Sectors already written stay written.
    pub fn abort(&mut self) {
        self.state = State::Idle;
    }

    fn device(&mut self) -> Device {
        Device {
            sectors: self.disk.sectors(),
            sectors_per_page: self.disk.sectors_per_page(),
            max_unmap_descriptors: ((self.xfer.as_mut().len() - 8) / 16) as u32,
            cache: self.cache,
        }
    }

    fn fail(&mut self, sense: Sense, bytes: u64) -> Poll {
        self.sense = sense;
        self.state = State::Idle;
        done(Status::Failed, bytes)
    }

    /// Runs `cmd` as far as the transport lets it: starts it if no command is in progress, else
    /// continues the one in progress (the transport must pass the same command until
    /// [`Poll::Done`]). A transport error drops the command and is returned.
    pub fn poll<D: DataPhase>(&mut self, cmd: &Command, io: &mut D) -> Result<Poll, D::Error> {
        if self.state == State::Idle {
            if let Some(p) = self.start(cmd) {
                return Ok(p);
            }
        }
        let r = self.step(io);
        match r {
            Err(_) | Ok(Poll::Done { .. }) => self.state = State::Idle,
            Ok(Poll::Pending) => {}
        }
        r
    }

    /// Prepares `len` bytes of reply in `xfer[..len]`, cut to `alloc`.
    fn reply(&mut self, len: usize, alloc: usize) -> Option<Poll> {
        let len = len.min(alloc);
        if len == 0 {
            return Some(done(Status::Passed, 0));
        }
        self.state = State::Reply { len, sent: 0 };
        None
    }

    fn flush_then(&mut self, bytes: u64) -> Poll {
        match self.disk.flush() {
            Ok(()) => done(Status::Passed, bytes),
            Err(e) => self.fail(Sense::for_error(e, true), bytes),
        }
    }

    /// Starts a command: `Some` if it completes without a data phase.
    fn start(&mut self, cmd: &Command) -> Option<Poll> {
        if !matches!(cmd, Command::RequestSense { .. }) {
            self.sense = Sense::NONE;
        }
        let sectors = self.disk.sectors();
        let in_range = |lba: u64, len: u32| lba.checked_add(len as u64).is_some_and(|e| e <= sectors);
        match *cmd {
            Command::TestUnitReady | Command::PreventAllowMediumRemoval => Some(done(Status::Passed, 0)),
            Command::StartStopUnit | Command::SynchronizeCache => Some(self.flush_then(0)),
            Command::RequestSense { desc: true, .. } => Some(self.fail(Sense::INVALID_FIELD_IN_CDB, 0)),
            Command::RequestSense { desc: false, alloc_len } => {
                let n = self.sense.fixed(self.xfer.as_mut());
                self.sense = Sense::NONE;
                self.reply(n, alloc_len as usize)
            }
            Command::Inquiry { evpd: false, page_code: 0, alloc_len } => {
                let n = pages::inquiry(&self.identity, self.xfer.as_mut());
                self.reply(n, alloc_len as usize)
            }
            Command::Inquiry { evpd: false, .. } => Some(self.fail(Sense::INVALID_FIELD_IN_CDB, 0)),
            Command::Inquiry { evpd: true, page_code, alloc_len } => {
                let dev = self.device();
                match pages::vpd(&dev, page_code, self.xfer.as_mut()) {
                    Some(n) => self.reply(n, alloc_len as usize),
                    None => Some(self.fail(Sense::INVALID_FIELD_IN_CDB, 0)),
                }
            }
            Command::ModeSense { page_control: 3, .. } => {
                Some(self.fail(Sense::SAVING_PARAMETERS_NOT_SUPPORTED, 0))
            }
            Command::ModeSense { ten, page_control, page_code, subpage_code, alloc_len } => {
                let dev = self.device();
                match pages::mode_sense(&dev, ten, page_control, page_code, subpage_code, self.xfer.as_mut())
                {
                    Some(n) => self.reply(n, alloc_len as usize),
                    None => Some(self.fail(Sense::INVALID_FIELD_IN_CDB, 0)),
                }
            }
            Command::ReadCapacity10 => {
                let dev = self.device();
                let n = pages::capacity10(&dev, self.xfer.as_mut());
                self.reply(n, n)
            }
            Command::ReadCapacity16 { alloc_len } => {
                let dev = self.device();
                let n = pages::capacity16(&dev, self.xfer.as_mut());
                self.reply(n, alloc_len.min(u16::MAX as u32) as usize)
            }
            Command::ReadFormatCapacities { alloc_len } => {
                let dev = self.device();
                let n = pages::format_capacities(&dev, self.xfer.as_mut());
                self.reply(n, alloc_len as usize)
            }
            Command::Read { lba, len } | Command::Write { lba, len } if !in_range(lba, len) => {
                Some(self.fail(Sense::LBA_OUT_OF_RANGE, 0))
            }
            Command::Read { len: 0, .. } | Command::Write { len: 0, .. } => Some(done(Status::Passed, 0)),
            Command::Read { lba, len } => {
                self.state = State::Read { next: lba, end: lba + len as u64, len: 0, sent: 0, total: 0 };
                None
            }
            Command::Write { lba, len } => {
                self.state = State::Write { next: lba, end: lba + len as u64, filled: 0, total: 0 };
                None
            }
            Command::Unmap { anchor: true, .. } => Some(self.fail(Sense::INVALID_FIELD_IN_CDB, 0)),
            Command::Unmap { param_len: Some(0), .. } => Some(done(Status::Passed, 0)),
            Command::Unmap { param_len: Some(1..8), .. } => {
                Some(self.fail(Sense::PARAMETER_LIST_LENGTH_ERROR, 0))
            }
            Command::Unmap { param_len, .. } => {
                self.state = State::Unmap { param_len, filled: 0, want: None };
                None
            }
            Command::Invalid { .. } => Some(self.fail(Sense::INVALID_FIELD_IN_CDB, 0)),
            Command::Unknown { .. } => Some(self.fail(Sense::INVALID_OPCODE, 0)),
        }
    }

    /// Moves data until the command completes or the transport makes no progress.
    fn step<D: DataPhase>(&mut self, io: &mut D) -> Result<Poll, D::Error> {
        let spp = self.disk.sectors_per_page() as u64;
        let cap = (self.xfer.as_mut().len() / SECTOR_SIZE) as u64;
        loop {
            match self.state {
                State::Idle => return Ok(done(Status::Passed, 0)),
                State::Reply { len, sent } => {
                    if sent >= len {
                        return Ok(done(Status::Passed, len as u64));
                    }
                    let n = io.send(&self.xfer.as_mut()[sent..len])?;
                    if n == 0 {
                        return Ok(Poll::Pending);
                    }
                    self.state = State::Reply { len, sent: (sent + n).min(len) };
                }
                State::Read { next, end, len, sent, total } => {
                    if sent < len {
                        let n = io.send(&self.xfer.as_mut()[sent..len])?.min(len - sent);
                        if n == 0 {
                            return Ok(Poll::Pending);
                        }
                        self.state = State::Read { next, end, len, sent: sent + n, total: total + n as u64 };
                        continue;
                    }
                    if next >= end {
                        return Ok(done(Status::Passed, total));
                    }
                    let k = chunk(next, end, spp, cap);
                    let bytes = k as usize * SECTOR_SIZE;
                    if let Err(e) = self.disk.read(next, &mut self.xfer.as_mut()[..bytes]) {
                        return Ok(self.fail(Sense::for_error(e, false), total));
                    }
                    self.state = State::Read { next: next + k, end, len: bytes, sent: 0, total };
                }
                State::Write { next, end, filled, total } => {
                    if next >= end {
                        return Ok(match self.cache {
                            WriteCache::WriteThrough => self.flush_then(total),
                            WriteCache::WriteBack => done(Status::Passed, total),
                        });
                    }
                    let k = chunk(next, end, spp, cap);
                    let want = k as usize * SECTOR_SIZE;
                    if filled < want {
                        let n = io.receive(&mut self.xfer.as_mut()[filled..want])?.min(want - filled);
                        if n == 0 {
                            return Ok(Poll::Pending);
                        }
                        self.state = State::Write { next, end, filled: filled + n, total: total + n as u64 };
                        continue;
                    }
                    if let Err(e) = self.disk.write(next, &self.xfer.as_mut()[..want]) {
                        return Ok(self.fail(Sense::for_error(e, true), total));
                    }
                    self.state = State::Write { next: next + k, end, filled: 0, total };
                }
                State::Unmap { param_len, filled, want } => {
                    let target = want.unwrap_or(8);
                    if filled < target {
                        let n = io.receive(&mut self.xfer.as_mut()[filled..target])?.min(target - filled);
                        if n == 0 {
                            return Ok(Poll::Pending);
                        }
                        self.state = State::Unmap { param_len, filled: filled + n, want };
                        continue;
                    }
                    if want.is_none() {
                        match self.unmap_length(param_len) {
                            Ok(w) => self.state = State::Unmap { param_len, filled, want: Some(w) },
                            Err(s) => return Ok(self.fail(s, filled as u64)),
                        }
                        continue;
                    }
                    return Ok(self.unmap(target));
                }
            }
        }
    }

    /// From the parameter list header in `xfer[..8]`: the list's length to receive (header and
    /// whole descriptors), or the sense to fail with.
    fn unmap_length(&mut self, param_len: Option<u16>) -> Result<usize, Sense> {
        let x = self.xfer.as_mut();
        let data_len = u16::from_be_bytes([x[0], x[1]]) as usize + 2;
        let desc_len = u16::from_be_bytes([x[2], x[3]]) as usize;
        // What the CDB and the header allow, cut to whole 16-byte descriptors.
        let limit = param_len.map_or(usize::MAX, |p| p as usize).min(data_len);
        if limit < 8 {
            return Err(Sense::PARAMETER_LIST_LENGTH_ERROR);
        }
        let desc = desc_len.min(limit - 8) / 16 * 16;
        if 8 + desc > x.len() {
            return Err(Sense::INVALID_FIELD_IN_PARAMETER_LIST);
        }
        Ok(8 + desc)
    }

    /// Checks every descriptor in `xfer[8..len]`, then discards them all.
    fn unmap(&mut self, len: usize) -> Poll {
        let sectors = self.disk.sectors();
        let desc = |x: &[u8], i: usize| {
            let d = &x[8 + 16 * i..8 + 16 * (i + 1)];
            let lba = u64::from_be_bytes([d[0], d[1], d[2], d[3], d[4], d[5], d[6], d[7]]);
            (lba, u32::from_be_bytes([d[8], d[9], d[10], d[11]]) as u64)
        };
        let count = (len - 8) / 16;
        for i in 0..count {
            let (lba, n) = desc(self.xfer.as_mut(), i);
            if lba.checked_add(n).is_none_or(|e| e > sectors) {
                return self.fail(Sense::LBA_OUT_OF_RANGE, len as u64);
            }
        }
        for i in 0..count {
            let (lba, n) = desc(self.xfer.as_mut(), i);
            if let Err(e) = self.disk.trim(lba, n) {
                return self.fail(Sense::for_error(e, true), len as u64);
            }
        }
        match self.cache {
            WriteCache::WriteThrough => self.flush_then(len as u64),
            WriteCache::WriteBack => done(Status::Passed, len as u64),
        }
    }
}
