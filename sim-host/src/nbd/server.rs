//! The NBD server: a TCP listener, one thread per connection, and the FTL export behind a mutex.
//!
//! - Connections are served concurrently (at most `max_connections`; more are accepted and closed
//!   at once). A request holds the device's lock only while the FTL works on it: a client that
//!   stalls in the middle of a request, or never sends one, blocks nobody else. Negotiation must
//!   finish within [`HANDSHAKE_TIMEOUT`].
//! - [`FtlExport`] maps the protocol onto [`BlockDisk`] over a [`PersistentNand`]: a write is
//!   acknowledged once the FTL has written it (to the emulated NAND in RAM); `NBD_CMD_FLUSH` is the
//!   FTL's `flush` followed by a durable append of the NAND log ([`PersistentNand::persist`]), and
//!   a request with `FUA` does the same before its reply. A clean disconnect persists too.
//!   Between flushes the pending NAND operations are appended (without a sync) once they reach
//!   the spill threshold, which bounds the memory they take.
//! - FTL errors become protocol errors: no space -> `ENOSPC`, an out-of-range access (already
//!   excluded by the protocol layer) -> `EINVAL`, anything else -> `EIO`. If persisting fails the
//!   flush is answered `EIO` and the operations stay pending for the next one.
//! - A poisoned lock (a panic while serving, which the FTL's guarantee 3 rules out) turns every
//!   later request into `EIO` rather than touching a device in an unknown state.

use std::io::{self, BufReader, BufWriter};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use super::disk::{BlockDisk, DiskError};
use super::image::PersistentNand;
use super::protocol::{self, Closed, Errno, Export};

/// Longest a client may take to finish the negotiation.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(30);

/// The FTL over a persistent NAND, exported over NBD.
pub struct FtlExport<'m> {
    disk: Mutex<BlockDisk<'m, PersistentNand>>,
    name: String,
    size: u64,
    page: u32,
    spill_bytes: usize,
}

impl<'m> FtlExport<'m> {
    /// Exports `disk` as `name`; pending NAND operations are appended to the log once they reach
    /// `spill_bytes` (0: after every request).
    pub fn new(disk: BlockDisk<'m, PersistentNand>, name: &str, spill_bytes: usize) -> Self {
        FtlExport {
            size: disk.size(),
            page: disk.page_bytes() as u32,
            disk: Mutex::new(disk),
            name: name.to_string(),
            spill_bytes,
        }
    }

    fn lock(&self) -> Result<MutexGuard<'_, BlockDisk<'m, PersistentNand>>, Errno> {
        self.disk.lock().map_err(|_| Errno::EIO)
    }

    /// Runs `f` on the disk.
    pub fn with_disk<T>(&self, f: impl FnOnce(&mut BlockDisk<'m, PersistentNand>) -> T) -> Option<T> {
        self.lock().ok().map(|mut d| f(&mut d))
    }

    /// FTL flush, then a durable append of the NAND log.
    fn flush_locked(disk: &mut BlockDisk<'m, PersistentNand>) -> Result<(), Errno> {
        disk.flush().map_err(errno)?;
        persist(disk.ftl_mut().nand_mut(), true).map_err(|e| {
            eprintln!("ftl-sim serve: persisting the image failed: {e}");
            Errno::EIO
        })
    }

    /// After a write or trim: a FUA flush, or a spill of the pending operations if large.
    fn after_update(&self, disk: &mut BlockDisk<'m, PersistentNand>, fua: bool) -> Result<(), Errno> {
        if fua {
            return Self::flush_locked(disk);
        }
        let nand = disk.ftl_mut().nand_mut();
        if nand.pending_bytes() > self.spill_bytes {
            if let Err(e) = persist(nand, false) {
                // Not fatal: the operations stay pending for the next flush, which reports it.
                eprintln!("ftl-sim serve: appending to the image log failed: {e}");
            }
        }
        Ok(())
    }
}

/// [`PersistentNand::persist`], reporting a compaction (the one slow step) on standard error.
fn persist(nand: &mut PersistentNand, durable: bool) -> io::Result<()> {
    let before = nand.stats().snapshots;
    nand.persist(durable)?;
    let s = nand.stats();
    if s.snapshots != before {
        let (bytes, took) = s.last_snapshot;
        eprintln!(
            "ftl-sim serve: log compacted: wrote a {} MiB snapshot in {} ms",
            bytes >> 20,
            took.as_millis()
        );
    }
    Ok(())
}

fn errno(e: DiskError) -> Errno {
    match e {
        DiskError::OutOfRange => Errno::EINVAL,
        DiskError::Ftl(ftl_core::Error::NoSpace) => Errno::ENOSPC,
        DiskError::Ftl(ftl_core::Error::OutOfRange | ftl_core::Error::BufferSize) => Errno::EINVAL,
        DiskError::Ftl(_) | DiskError::Adapter(_) => Errno::EIO,
    }
}

impl Export for FtlExport<'_> {
    fn name(&self) -> &str {
        &self.name
    }

    fn description(&self) -> String {
        format!("NAND FTL on the emulator ({} B pages)", self.page)
    }

    fn size(&self) -> u64 {
        self.size
    }

    fn preferred_block_size(&self) -> u32 {
        if self.page.is_power_of_two() {
            self.page.max(512)
        } else {
            4096
        }
    }

    fn read(&self, offset: u64, buf: &mut [u8]) -> Result<(), Errno> {
        self.lock()?.read_at(offset, buf).map_err(errno)
    }

    fn write(&self, offset: u64, data: &[u8], fua: bool) -> Result<(), Errno> {
        let mut disk = self.lock()?;
        disk.write_at(offset, data).map_err(errno)?;
        self.after_update(&mut disk, fua)
    }

    fn trim(&self, offset: u64, len: u64, fua: bool) -> Result<(), Errno> {
        let mut disk = self.lock()?;
        disk.trim(offset, len).map_err(errno)?;
        self.after_update(&mut disk, fua)
    }

    fn flush(&self) -> Result<(), Errno> {
        Self::flush_locked(&mut *self.lock()?)
    }

    fn disconnect(&self) {
        if let Ok(mut disk) = self.lock() {
            let _ = Self::flush_locked(&mut disk);
        }
    }
}

/// Serves one connection to its end.
pub fn handle_connection(stream: TcpStream, export: &dyn Export) -> Closed {
    let _ = stream.set_nodelay(true);
    let run = || -> Result<Closed, Closed> {
        stream.set_read_timeout(Some(HANDSHAKE_TIMEOUT))?;
        stream.set_write_timeout(Some(HANDSHAKE_TIMEOUT))?;
        let mut r = BufReader::with_capacity(256 << 10, stream.try_clone()?);
        let mut w = BufWriter::with_capacity(64 << 10, stream.try_clone()?);
        protocol::negotiate(&mut r, &mut w, export)?;
        // Transmission: an idle client is legitimate (a mounted filesystem may not write for
        // hours), so no read timeout; the lock is never held while waiting for a client.
        stream.set_read_timeout(None)?;
        stream.set_write_timeout(None)?;
        let mut buf = Vec::new();
        Ok(protocol::transmission(&mut r, &mut w, export, &mut buf))
    };
    let closed = run().unwrap_or_else(|c| c);
    let _ = stream.shutdown(std::net::Shutdown::Both);
    closed
}

/// Accepts connections on `listener` and serves each on its own thread until `stop` is set (it
/// is checked after each accepted connection). Returns once every connection has ended.
pub fn serve(listener: &TcpListener, export: &dyn Export, max_connections: usize, stop: &AtomicBool) {
    let active = AtomicUsize::new(0);
    std::thread::scope(|s| {
        for conn in listener.incoming() {
            if stop.load(Ordering::SeqCst) {
                break;
            }
            let stream = match conn {
                Ok(c) => c,
                Err(e) => {
                    eprintln!("ftl-sim serve: accept failed: {e}");
                    std::thread::sleep(Duration::from_millis(50));
                    continue;
                }
            };
            let peer = stream.peer_addr().map_or_else(|_| "unknown peer".to_string(), |a| a.to_string());
            if active.load(Ordering::SeqCst) >= max_connections {
                eprintln!("ftl-sim serve: {peer}: refused (already {max_connections} connections)");
                continue;
            }
            active.fetch_add(1, Ordering::SeqCst);
            let active = &active;
            let who = peer.clone();
            let spawned =
                std::thread::Builder::new().name(format!("nbd {peer}")).spawn_scoped(s, move || {
                    eprintln!("ftl-sim serve: {who}: connected");
                    let closed = handle_connection(stream, export);
                    eprintln!("ftl-sim serve: {who}: {closed}");
                    active.fetch_sub(1, Ordering::SeqCst);
                });
            if let Err(e) = spawned {
                eprintln!("ftl-sim serve: no thread for {peer}: {e}");
                active.fetch_sub(1, Ordering::SeqCst);
            }
        }
    });
}

/// Whether `addr` may be listened on without `--allow-remote`.
pub fn is_loopback(addr: &SocketAddr) -> bool {
    addr.ip().is_loopback()
}

/// Resolves `listen` and applies the loopback rule.
pub fn resolve_listen(listen: &str, allow_remote: bool) -> Result<Vec<SocketAddr>, String> {
    use std::net::ToSocketAddrs;
    let addrs: Vec<SocketAddr> =
        listen.to_socket_addrs().map_err(|e| format!("--listen {listen}: {e}"))?.collect();
    if addrs.is_empty() {
        return Err(format!("--listen {listen}: resolves to no address"));
    }
    if !allow_remote {
        if let Some(a) = addrs.iter().find(|a| !is_loopback(a)) {
            return Err(format!(
                "--listen {listen}: {a} is not a loopback address; NBD has no authentication, so \
                 serving beyond this machine needs --allow-remote"
            ));
        }
    }
    Ok(addrs)
}

/// Binds the first address of `addrs` that works.
pub fn bind(addrs: &[SocketAddr]) -> io::Result<TcpListener> {
    TcpListener::bind(addrs)
}
