//! The NBD wire protocol, server side: fixed newstyle negotiation and the transmission phase with
//! simple replies (the subset of the NetworkBlockDevice `doc/proto.md` this server speaks).
//!
//! Negotiation: the server greets with `NBDMAGIC IHAVEOPT` and the handshake flags
//! `FIXED_NEWSTYLE | NO_ZEROES`. Options understood: `NBD_OPT_EXPORT_NAME`, `NBD_OPT_ABORT`,
//! `NBD_OPT_LIST`, `NBD_OPT_INFO` and `NBD_OPT_GO` (with the `EXPORT`, `NAME`, `DESCRIPTION` and
//! `BLOCK_SIZE` information items); every other option (`STARTTLS`, `STRUCTURED_REPLY`, meta
//! contexts, extended headers, unknown ones) is answered `NBD_REP_ERR_UNSUP` and negotiation goes
//! on. A malformed option is answered `NBD_REP_ERR_INVALID`, an unknown export name
//! `NBD_REP_ERR_UNKNOWN` (or a closed connection for `NBD_OPT_EXPORT_NAME`, which cannot fail
//! otherwise).
//!
//! Transmission: `NBD_CMD_READ`, `WRITE`, `FLUSH`, `TRIM` and `DISC`, with simple replies. The
//! export advertises `HAS_FLAGS | SEND_FLUSH | SEND_FUA | SEND_TRIM | CAN_MULTI_CONN` (every
//! connection shares one device and a flush persists all of it, so the multi-connection promise
//! holds). The only command flag accepted is `FUA`, on every command (the protocol asks servers
//! to accept it everywhere); any other flag, and any other command, is answered `EINVAL`.
//!
//! Bad input never reaches the export: every request is checked first.
//! - A read longer than [`MAX_REQUEST`] or outside the export is answered `EINVAL` (no data).
//! - A write longer than [`MAX_REQUEST`] closes the connection (its payload is not drained); a
//!   write outside the export has its payload read and dropped, then is answered `ENOSPC`.
//! - A trim outside the export is answered `EINVAL` (trims have no size limit).
//! - A wrong magic number (option or request) or unknown client flags close the connection; so
//!   does an option longer than [`MAX_OPTION`].
//! - A client that hangs up mid-request leaves the export untouched: a write is applied only once
//!   its whole payload has arrived.

use std::io::{self, Read, Write};

/// `NBDMAGIC`, the first 8 bytes the server sends.
pub const NBDMAGIC: u64 = 0x4e42_444d_4147_4943;
/// `IHAVEOPT`: the newstyle magic, and the magic of every option request.
pub const IHAVEOPT: u64 = 0x4948_4156_454f_5054;
/// Magic of option replies.
pub const OPT_REPLY_MAGIC: u64 = 0x0003_e889_0455_65a9;
/// Magic of transmission requests.
pub const REQUEST_MAGIC: u32 = 0x2560_9513;
/// Magic of simple replies.
pub const SIMPLE_REPLY_MAGIC: u32 = 0x6744_6698;

/// Handshake flag: fixed newstyle.
pub const FLAG_FIXED_NEWSTYLE: u16 = 1 << 0;
/// Handshake flag: no 124 zero bytes after `NBD_OPT_EXPORT_NAME`.
pub const FLAG_NO_ZEROES: u16 = 1 << 1;
/// Client flag: fixed newstyle.
pub const FLAG_C_FIXED_NEWSTYLE: u32 = 1 << 0;
/// Client flag: no zeroes.
pub const FLAG_C_NO_ZEROES: u32 = 1 << 1;

/// Option: choose the export and enter transmission (no error reply possible).
pub const OPT_EXPORT_NAME: u32 = 1;
/// Option: abort negotiation.
pub const OPT_ABORT: u32 = 2;
/// Option: list exports.
pub const OPT_LIST: u32 = 3;
/// Option: start TLS (not supported).
pub const OPT_STARTTLS: u32 = 5;
/// Option: describe an export.
pub const OPT_INFO: u32 = 6;
/// Option: describe an export and enter transmission.
pub const OPT_GO: u32 = 7;
/// Option: structured replies (not supported).
pub const OPT_STRUCTURED_REPLY: u32 = 8;

/// Option reply: acknowledged.
pub const REP_ACK: u32 = 1;
/// Option reply: an export's name.
pub const REP_SERVER: u32 = 2;
/// Option reply: an information item.
pub const REP_INFO: u32 = 3;
/// Option error: option not supported.
pub const REP_ERR_UNSUP: u32 = (1 << 31) | 1;
/// Option error: option malformed.
pub const REP_ERR_INVALID: u32 = (1 << 31) | 3;
/// Option error: no such export.
pub const REP_ERR_UNKNOWN: u32 = (1 << 31) | 6;

/// Information item: size and transmission flags.
pub const INFO_EXPORT: u16 = 0;
/// Information item: the export's name.
pub const INFO_NAME: u16 = 1;
/// Information item: a description.
pub const INFO_DESCRIPTION: u16 = 2;
/// Information item: block size constraints.
pub const INFO_BLOCK_SIZE: u16 = 3;

/// Transmission flag: flags are present (always set).
pub const TFLAG_HAS_FLAGS: u16 = 1 << 0;
/// Transmission flag: `NBD_CMD_FLUSH` supported.
pub const TFLAG_SEND_FLUSH: u16 = 1 << 2;
/// Transmission flag: `NBD_CMD_FLAG_FUA` supported.
pub const TFLAG_SEND_FUA: u16 = 1 << 3;
/// Transmission flag: `NBD_CMD_TRIM` supported.
pub const TFLAG_SEND_TRIM: u16 = 1 << 5;
/// Transmission flag: several connections may be used at once.
pub const TFLAG_CAN_MULTI_CONN: u16 = 1 << 8;
/// The transmission flags this server advertises.
pub const TRANSMISSION_FLAGS: u16 =
    TFLAG_HAS_FLAGS | TFLAG_SEND_FLUSH | TFLAG_SEND_FUA | TFLAG_SEND_TRIM | TFLAG_CAN_MULTI_CONN;

/// Command: read.
pub const CMD_READ: u16 = 0;
/// Command: write.
pub const CMD_WRITE: u16 = 1;
/// Command: disconnect.
pub const CMD_DISC: u16 = 2;
/// Command: flush.
pub const CMD_FLUSH: u16 = 3;
/// Command: trim.
pub const CMD_TRIM: u16 = 4;
/// Command flag: force unit access.
pub const CMD_FLAG_FUA: u16 = 1 << 0;

/// Largest read or write payload (the protocol's recommended 32 MiB).
pub const MAX_REQUEST: u32 = 32 << 20;
/// Longest option data accepted (names are at most 4096 bytes).
pub const MAX_OPTION: u32 = 64 << 10;

/// An error number of the protocol (Linux values, as the protocol defines them).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Errno(pub u32);

impl Errno {
    /// Operation not permitted.
    pub const EPERM: Errno = Errno(1);
    /// Input/output error.
    pub const EIO: Errno = Errno(5);
    /// Out of memory.
    pub const ENOMEM: Errno = Errno(12);
    /// Invalid argument.
    pub const EINVAL: Errno = Errno(22);
    /// No space left.
    pub const ENOSPC: Errno = Errno(28);
    /// Value too large.
    pub const EOVERFLOW: Errno = Errno(75);
    /// Not supported.
    pub const ENOTSUP: Errno = Errno(95);
    /// Server shutting down.
    pub const ESHUTDOWN: Errno = Errno(108);
}

/// What an NBD server exports: a range of bytes. Implementations lock internally (every
/// connection's thread calls them); requests arrive already checked against [`Export::size`]
/// and [`MAX_REQUEST`].
pub trait Export: Sync {
    /// The export's name (the empty name also selects it).
    fn name(&self) -> &str;
    /// A line describing the export, for `NBD_INFO_DESCRIPTION`.
    fn description(&self) -> String;
    /// Size in bytes.
    fn size(&self) -> u64;
    /// Preferred request granularity (a power of two of at least 512).
    fn preferred_block_size(&self) -> u32;
    /// Reads `buf.len()` bytes at `offset`.
    fn read(&self, offset: u64, buf: &mut [u8]) -> Result<(), Errno>;
    /// Writes `data` at `offset`; with `fua`, durably before returning.
    fn write(&self, offset: u64, data: &[u8], fua: bool) -> Result<(), Errno>;
    /// Discards `len` bytes at `offset` (they may read as anything afterwards; whole pages read
    /// as zeros here); with `fua`, durably before returning.
    fn trim(&self, offset: u64, len: u64, fua: bool) -> Result<(), Errno>;
    /// Makes every completed write and trim durable.
    fn flush(&self) -> Result<(), Errno>;
    /// The client disconnected cleanly (`NBD_CMD_DISC`).
    fn disconnect(&self) {}
}

/// Why a connection ended.
#[derive(Debug)]
pub enum Closed {
    /// The client sent `NBD_OPT_ABORT` during negotiation.
    Abort,
    /// The client sent `NBD_CMD_DISC`.
    Disconnect,
    /// The client closed the connection between two messages.
    HangUp,
    /// The client broke the protocol; the server closed the connection.
    Violation(String),
    /// The connection failed (including a client that hung up in the middle of a message).
    Io(io::Error),
}

impl std::fmt::Display for Closed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Closed::Abort => f.write_str("client aborted the negotiation"),
            Closed::Disconnect => f.write_str("client disconnected"),
            Closed::HangUp => f.write_str("client hung up"),
            Closed::Violation(why) => write!(f, "protocol violation: {why}"),
            Closed::Io(e) if e.kind() == io::ErrorKind::UnexpectedEof => {
                f.write_str("client hung up in the middle of a message")
            }
            Closed::Io(e) => write!(f, "connection error: {e}"),
        }
    }
}

impl From<io::Error> for Closed {
    fn from(e: io::Error) -> Self {
        Closed::Io(e)
    }
}

fn violation<T>(why: impl Into<String>) -> Result<T, Closed> {
    Err(Closed::Violation(why.into()))
}

/// Reads exactly `buf.len()` bytes; `Ok(false)` when the peer closed before sending any.
fn read_or_eof<R: Read>(r: &mut R, buf: &mut [u8]) -> io::Result<bool> {
    let mut got = 0;
    while got < buf.len() {
        match r.read(&mut buf[got..]) {
            Ok(0) if got == 0 => return Ok(false),
            Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(true)
}

fn be_u16(b: &[u8]) -> u16 {
    u16::from_be_bytes([b[0], b[1]])
}

fn be_u32(b: &[u8]) -> u32 {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}

fn be_u64(b: &[u8]) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[..8]);
    u64::from_be_bytes(a)
}

fn option_reply<W: Write>(w: &mut W, option: u32, kind: u32, data: &[u8]) -> io::Result<()> {
    let mut msg = Vec::with_capacity(20 + data.len());
    msg.extend_from_slice(&OPT_REPLY_MAGIC.to_be_bytes());
    msg.extend_from_slice(&option.to_be_bytes());
    msg.extend_from_slice(&kind.to_be_bytes());
    msg.extend_from_slice(&(data.len() as u32).to_be_bytes());
    msg.extend_from_slice(data);
    w.write_all(&msg)?;
    w.flush()
}

fn selects(export: &dyn Export, name: &[u8]) -> bool {
    name.is_empty() || name == export.name().as_bytes()
}

/// The block size constraints: any byte granularity, the page size preferred, at most
/// [`MAX_REQUEST`] per read or write.
fn block_size_info(export: &dyn Export) -> Vec<u8> {
    let mut d = INFO_BLOCK_SIZE.to_be_bytes().to_vec();
    d.extend_from_slice(&1u32.to_be_bytes());
    d.extend_from_slice(&export.preferred_block_size().to_be_bytes());
    d.extend_from_slice(&MAX_REQUEST.to_be_bytes());
    d
}

/// Answers `NBD_OPT_INFO` / `NBD_OPT_GO`; `Ok(true)` when the export was granted.
fn info_or_go<W: Write>(w: &mut W, export: &dyn Export, option: u32, data: &[u8]) -> io::Result<bool> {
    let parsed = (|| {
        let name_len = be_u32(data.get(..4)?) as usize;
        let name = data.get(4..4usize.checked_add(name_len)?)?;
        let rest = &data[4 + name_len..];
        let count = be_u16(rest.get(..2)?) as usize;
        let items = rest.get(2..)?;
        (items.len() == 2 * count).then(|| (name, items.chunks_exact(2).map(be_u16).collect::<Vec<_>>()))
    })();
    let Some((name, items)) = parsed else {
        option_reply(w, option, REP_ERR_INVALID, b"malformed NBD_OPT_INFO/GO request")?;
        return Ok(false);
    };
    if !selects(export, name) {
        let msg = format!("no export named '{}'", String::from_utf8_lossy(name));
        option_reply(w, option, REP_ERR_UNKNOWN, msg.as_bytes())?;
        return Ok(false);
    }
    let mut info = INFO_EXPORT.to_be_bytes().to_vec();
    info.extend_from_slice(&export.size().to_be_bytes());
    info.extend_from_slice(&TRANSMISSION_FLAGS.to_be_bytes());
    option_reply(w, option, REP_INFO, &info)?;
    let mut sent = Vec::new();
    for item in items {
        if sent.contains(&item) {
            continue;
        }
        sent.push(item);
        let mut d = item.to_be_bytes().to_vec();
        match item {
            INFO_NAME => d.extend_from_slice(export.name().as_bytes()),
            INFO_DESCRIPTION => d.extend_from_slice(export.description().as_bytes()),
            INFO_BLOCK_SIZE => d = block_size_info(export),
            _ => continue,
        }
        option_reply(w, option, REP_INFO, &d)?;
    }
    option_reply(w, option, REP_ACK, &[])?;
    Ok(true)
}

/// Runs the fixed newstyle negotiation. `Ok(())` means the client chose the export and the
/// transmission phase starts; everything else ends the connection.
pub fn negotiate<R: Read, W: Write>(r: &mut R, w: &mut W, export: &dyn Export) -> Result<(), Closed> {
    let mut hello = Vec::with_capacity(18);
    hello.extend_from_slice(&NBDMAGIC.to_be_bytes());
    hello.extend_from_slice(&IHAVEOPT.to_be_bytes());
    hello.extend_from_slice(&(FLAG_FIXED_NEWSTYLE | FLAG_NO_ZEROES).to_be_bytes());
    w.write_all(&hello)?;
    w.flush()?;
    let mut b4 = [0u8; 4];
    if !read_or_eof(r, &mut b4)? {
        return Err(Closed::HangUp);
    }
    let client_flags = u32::from_be_bytes(b4);
    if client_flags & !(FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES) != 0 {
        return violation(format!("unknown client flags {client_flags:#x}"));
    }
    let fixed = client_flags & FLAG_C_FIXED_NEWSTYLE != 0;
    let no_zeroes = client_flags & FLAG_C_NO_ZEROES != 0;
    loop {
        let mut head = [0u8; 16];
        if !read_or_eof(r, &mut head)? {
            return Err(Closed::HangUp);
        }
        if be_u64(&head) != IHAVEOPT {
            return violation("bad option magic");
        }
        let option = be_u32(&head[8..]);
        let len = be_u32(&head[12..]);
        if len > MAX_OPTION {
            return violation(format!("option {option} carries {len} bytes"));
        }
        let mut data = vec![0u8; len as usize];
        r.read_exact(&mut data)?;
        if option == OPT_EXPORT_NAME {
            if !selects(export, &data) {
                return violation(format!("no export named '{}'", String::from_utf8_lossy(&data)));
            }
            let mut msg = Vec::with_capacity(134);
            msg.extend_from_slice(&export.size().to_be_bytes());
            msg.extend_from_slice(&TRANSMISSION_FLAGS.to_be_bytes());
            if !no_zeroes {
                msg.extend_from_slice(&[0u8; 124]);
            }
            w.write_all(&msg)?;
            w.flush()?;
            return Ok(());
        }
        if !fixed {
            // A non-fixed newstyle client can receive no option reply: only EXPORT_NAME works.
            return violation(format!("option {option} from a client without fixed newstyle"));
        }
        match option {
            OPT_ABORT => {
                // The client may already be gone; the acknowledgement is best effort.
                let _ = option_reply(w, option, REP_ACK, &[]);
                return Err(Closed::Abort);
            }
            OPT_LIST if !data.is_empty() => {
                option_reply(w, option, REP_ERR_INVALID, b"NBD_OPT_LIST carries no data")?
            }
            OPT_LIST => {
                let name = export.name().as_bytes();
                let mut d = (name.len() as u32).to_be_bytes().to_vec();
                d.extend_from_slice(name);
                option_reply(w, option, REP_SERVER, &d)?;
                option_reply(w, option, REP_ACK, &[])?;
            }
            OPT_INFO => {
                info_or_go(w, export, option, &data)?;
            }
            OPT_GO => {
                if info_or_go(w, export, option, &data)? {
                    return Ok(());
                }
            }
            _ => option_reply(w, option, REP_ERR_UNSUP, b"option not supported by this server")?,
        }
    }
}

fn simple_reply<W: Write>(w: &mut W, error: Errno, cookie: u64) -> io::Result<()> {
    let mut msg = [0u8; 16];
    msg[..4].copy_from_slice(&SIMPLE_REPLY_MAGIC.to_be_bytes());
    msg[4..8].copy_from_slice(&error.0.to_be_bytes());
    msg[8..].copy_from_slice(&cookie.to_be_bytes());
    w.write_all(&msg)?;
    w.flush()
}

/// Whether `offset .. offset + len` lies inside an export of `size` bytes.
fn in_range(offset: u64, len: u64, size: u64) -> bool {
    offset.checked_add(len).is_some_and(|end| end <= size)
}

/// Serves requests until the client disconnects or breaks the protocol. `buf` is reused across
/// requests (it grows to the largest request seen, at most [`MAX_REQUEST`] + 16 bytes).
pub fn transmission<R: Read, W: Write>(
    r: &mut R,
    w: &mut W,
    export: &dyn Export,
    buf: &mut Vec<u8>,
) -> Closed {
    match transmission_loop(r, w, export, buf) {
        Ok(never) => match never {},
        Err(closed) => closed,
    }
}

enum Never {}

fn transmission_loop<R: Read, W: Write>(
    r: &mut R,
    w: &mut W,
    export: &dyn Export,
    buf: &mut Vec<u8>,
) -> Result<Never, Closed> {
    let size = export.size();
    loop {
        let mut head = [0u8; 28];
        if !read_or_eof(r, &mut head)? {
            return Err(Closed::HangUp);
        }
        if be_u32(&head) != REQUEST_MAGIC {
            return violation(format!("bad request magic {:#010x}", be_u32(&head)));
        }
        let flags = be_u16(&head[4..]);
        let kind = be_u16(&head[6..]);
        let cookie = be_u64(&head[8..]);
        let offset = be_u64(&head[16..]);
        let len = be_u32(&head[24..]);
        let flags_ok = flags & !CMD_FLAG_FUA == 0;
        let fua = flags & CMD_FLAG_FUA != 0;
        match kind {
            CMD_READ => {
                if !flags_ok || len > MAX_REQUEST || !in_range(offset, len as u64, size) {
                    simple_reply(w, Errno::EINVAL, cookie)?;
                    continue;
                }
                buf.resize(16 + len as usize, 0);
                match export.read(offset, &mut buf[16..]) {
                    Ok(()) => {
                        buf[..4].copy_from_slice(&SIMPLE_REPLY_MAGIC.to_be_bytes());
                        buf[4..8].copy_from_slice(&0u32.to_be_bytes());
                        buf[8..16].copy_from_slice(&cookie.to_be_bytes());
                        w.write_all(buf)?;
                        w.flush()?;
                    }
                    Err(e) => simple_reply(w, e, cookie)?,
                }
            }
            CMD_WRITE => {
                if len > MAX_REQUEST {
                    return violation(format!("write of {len} bytes (the limit is {MAX_REQUEST})"));
                }
                buf.resize(len as usize, 0);
                r.read_exact(buf)?;
                let result = if !flags_ok {
                    Err(Errno::EINVAL)
                } else if !in_range(offset, len as u64, size) {
                    Err(Errno::ENOSPC)
                } else if len == 0 {
                    Ok(())
                } else {
                    export.write(offset, buf, fua)
                };
                simple_reply(w, result.err().unwrap_or(Errno(0)), cookie)?;
            }
            CMD_FLUSH => {
                let result = if flags_ok { export.flush() } else { Err(Errno::EINVAL) };
                simple_reply(w, result.err().unwrap_or(Errno(0)), cookie)?;
            }
            CMD_TRIM => {
                let result = if !flags_ok || !in_range(offset, len as u64, size) {
                    Err(Errno::EINVAL)
                } else if len == 0 {
                    Ok(())
                } else {
                    export.trim(offset, len as u64, fua)
                };
                simple_reply(w, result.err().unwrap_or(Errno(0)), cookie)?;
            }
            CMD_DISC => {
                export.disconnect();
                return Err(Closed::Disconnect);
            }
            // CACHE, WRITE_ZEROES, BLOCK_STATUS, RESIZE and unknown commands: not advertised, no
            // payload to skip.
            _ => simple_reply(w, Errno::EINVAL, cookie)?,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    /// A RAM export for protocol tests.
    struct Ram {
        bytes: Mutex<Vec<u8>>,
        flushes: Mutex<u32>,
    }

    impl Ram {
        fn new(size: usize) -> Self {
            Ram { bytes: Mutex::new(vec![0; size]), flushes: Mutex::new(0) }
        }
    }

    impl Export for Ram {
        fn name(&self) -> &str {
            "ram"
        }
        fn description(&self) -> String {
            "RAM test export".into()
        }
        fn size(&self) -> u64 {
            self.bytes.lock().unwrap().len() as u64
        }
        fn preferred_block_size(&self) -> u32 {
            4096
        }
        fn read(&self, offset: u64, buf: &mut [u8]) -> Result<(), Errno> {
            let b = self.bytes.lock().unwrap();
            buf.copy_from_slice(&b[offset as usize..offset as usize + buf.len()]);
            Ok(())
        }
        fn write(&self, offset: u64, data: &[u8], fua: bool) -> Result<(), Errno> {
            let mut b = self.bytes.lock().unwrap();
            b[offset as usize..offset as usize + data.len()].copy_from_slice(data);
            if fua {
                *self.flushes.lock().unwrap() += 1;
            }
            Ok(())
        }
        fn trim(&self, offset: u64, len: u64, _fua: bool) -> Result<(), Errno> {
            let mut b = self.bytes.lock().unwrap();
            b[offset as usize..(offset + len) as usize].fill(0);
            Ok(())
        }
        fn flush(&self) -> Result<(), Errno> {
            *self.flushes.lock().unwrap() += 1;
            Ok(())
        }
    }

    fn opt(option: u32, data: &[u8]) -> Vec<u8> {
        let mut m = IHAVEOPT.to_be_bytes().to_vec();
        m.extend_from_slice(&option.to_be_bytes());
        m.extend_from_slice(&(data.len() as u32).to_be_bytes());
        m.extend_from_slice(data);
        m
    }

    fn go(name: &str, items: &[u16]) -> Vec<u8> {
        let mut d = (name.len() as u32).to_be_bytes().to_vec();
        d.extend_from_slice(name.as_bytes());
        d.extend_from_slice(&(items.len() as u16).to_be_bytes());
        for i in items {
            d.extend_from_slice(&i.to_be_bytes());
        }
        opt(OPT_GO, &d)
    }

    fn request(kind: u16, flags: u16, cookie: u64, offset: u64, len: u32, payload: &[u8]) -> Vec<u8> {
        let mut m = REQUEST_MAGIC.to_be_bytes().to_vec();
        m.extend_from_slice(&flags.to_be_bytes());
        m.extend_from_slice(&kind.to_be_bytes());
        m.extend_from_slice(&cookie.to_be_bytes());
        m.extend_from_slice(&offset.to_be_bytes());
        m.extend_from_slice(&len.to_be_bytes());
        m.extend_from_slice(payload);
        m
    }

    /// (option, reply type, data).
    type OptionReply = (u32, u32, Vec<u8>);

    /// Parses the option replies at the start of `out`; returns them and the rest.
    fn option_replies(mut out: &[u8]) -> (Vec<OptionReply>, &[u8]) {
        let mut v = Vec::new();
        while out.len() >= 20 && be_u64(out) == OPT_REPLY_MAGIC {
            let len = be_u32(&out[16..]) as usize;
            v.push((be_u32(&out[8..]), be_u32(&out[12..]), out[20..20 + len].to_vec()));
            out = &out[20 + len..];
        }
        (v, out)
    }

    fn run(input: &[u8], export: &Ram) -> (Result<(), String>, Vec<u8>, Option<String>) {
        let mut r = input;
        let mut w = Vec::new();
        let neg = negotiate(&mut r, &mut w, export).map_err(|c| c.to_string());
        let end = neg.is_ok().then(|| transmission(&mut r, &mut w, export, &mut Vec::new()).to_string());
        (neg, w, end)
    }

    #[test]
    fn greeting_then_go_and_requests() {
        let ram = Ram::new(1 << 20);
        let mut input = FLAG_C_FIXED_NEWSTYLE.to_be_bytes().to_vec();
        input.extend(opt(99, b"junk"));
        input.extend(opt(OPT_LIST, &[]));
        input.extend(go("nope", &[]));
        input.extend(go("ram", &[INFO_BLOCK_SIZE, INFO_NAME, INFO_NAME]));
        input.extend(request(CMD_WRITE, CMD_FLAG_FUA, 1, 4096, 5, b"hello"));
        input.extend(request(CMD_READ, 0, 2, 4094, 8, &[]));
        input.extend(request(CMD_READ, 0, 3, (1 << 20) - 4, 8, &[]));
        input.extend(request(CMD_WRITE, 0, 4, (1 << 20) - 2, 4, b"abcd"));
        input.extend(request(CMD_TRIM, 0, 5, 4096, 2, &[]));
        input.extend(request(CMD_FLUSH, 0, 6, 0, 0, &[]));
        input.extend(request(77, 0, 7, 0, 0, &[]));
        input.extend(request(CMD_READ, 1 << 2, 8, 0, 8, &[]));
        input.extend(request(CMD_READ, 0, 9, 0, MAX_REQUEST + 1, &[]));
        input.extend(request(CMD_TRIM, 0, 10, u64::MAX, 2, &[]));
        input.extend(request(CMD_DISC, 0, 11, 0, 0, &[]));
        let (neg, out, end) = run(&input, &ram);
        neg.unwrap();
        assert_eq!(end.as_deref(), Some("client disconnected"));
        assert_eq!(be_u64(&out), NBDMAGIC);
        assert_eq!(be_u64(&out[8..]), IHAVEOPT);
        assert_eq!(be_u16(&out[16..]), FLAG_FIXED_NEWSTYLE | FLAG_NO_ZEROES);
        let (replies, mut rest) = option_replies(&out[18..]);
        let kinds: Vec<(u32, u32)> = replies.iter().map(|r| (r.0, r.1)).collect();
        assert_eq!(
            kinds,
            [
                (99, REP_ERR_UNSUP),
                (OPT_LIST, REP_SERVER),
                (OPT_LIST, REP_ACK),
                (OPT_GO, REP_ERR_UNKNOWN),
                (OPT_GO, REP_INFO),
                (OPT_GO, REP_INFO),
                (OPT_GO, REP_INFO),
                (OPT_GO, REP_ACK),
            ]
        );
        assert_eq!(&replies[1].2[4..], b"ram");
        let export_info = &replies[4].2;
        assert_eq!(be_u16(export_info), INFO_EXPORT);
        assert_eq!(be_u64(&export_info[2..]), 1 << 20);
        assert_eq!(be_u16(&export_info[10..]), TRANSMISSION_FLAGS);
        let bs = &replies[5].2;
        assert_eq!(
            (be_u16(bs), be_u32(&bs[2..]), be_u32(&bs[6..]), be_u32(&bs[10..])),
            (INFO_BLOCK_SIZE, 1, 4096, MAX_REQUEST)
        );
        assert_eq!(&replies[6].2[2..], b"ram");
        let mut reply = |cookie: u64, data: usize| -> (u32, Vec<u8>) {
            assert_eq!(be_u32(rest), SIMPLE_REPLY_MAGIC);
            assert_eq!(be_u64(&rest[8..]), cookie);
            let err = be_u32(&rest[4..]);
            let n = if err == 0 { data } else { 0 };
            let d = rest[16..16 + n].to_vec();
            rest = &rest[16 + n..];
            (err, d)
        };
        assert_eq!(reply(1, 0), (0, vec![]));
        assert_eq!(reply(2, 8), (0, b"\0\0hello\0".to_vec()));
        assert_eq!(reply(3, 8).0, Errno::EINVAL.0);
        assert_eq!(reply(4, 0).0, Errno::ENOSPC.0);
        assert_eq!(reply(5, 0).0, 0);
        assert_eq!(reply(6, 0).0, 0);
        assert_eq!(reply(7, 0).0, Errno::EINVAL.0);
        assert_eq!(reply(8, 8).0, Errno::EINVAL.0);
        assert_eq!(reply(9, 0).0, Errno::EINVAL.0);
        assert_eq!(reply(10, 0).0, Errno::EINVAL.0);
        assert!(rest.is_empty());
        assert_eq!(&ram.bytes.lock().unwrap()[4096..4101], b"\0\0llo");
        assert_eq!(*ram.flushes.lock().unwrap(), 2);
    }

    #[test]
    fn export_name_with_and_without_zeroes() {
        for (flags, zeroes) in [(FLAG_C_FIXED_NEWSTYLE, 124), (3, 0), (0, 124)] {
            let ram = Ram::new(8192);
            let mut input = flags.to_be_bytes().to_vec();
            input.extend(opt(OPT_EXPORT_NAME, b""));
            let (neg, out, end) = run(&input, &ram);
            neg.unwrap();
            assert_eq!(end.as_deref(), Some("client hung up"));
            assert_eq!(out.len(), 18 + 10 + zeroes);
            assert_eq!(be_u64(&out[18..]), 8192);
            assert_eq!(be_u16(&out[26..]), TRANSMISSION_FLAGS);
        }
    }

    #[test]
    fn bad_negotiations_close() {
        let ram = Ram::new(4096);
        let cases: Vec<(Vec<u8>, &str)> = vec![
            (vec![], "client hung up"),
            (0x100u32.to_be_bytes().to_vec(), "unknown client flags"),
            ([&1u32.to_be_bytes()[..], b"garbage!garbage!"].concat(), "bad option magic"),
            ([&1u32.to_be_bytes()[..], &opt(OPT_EXPORT_NAME, b"other")].concat(), "no export named"),
            ([&0u32.to_be_bytes()[..], &opt(OPT_LIST, b"")].concat(), "without fixed newstyle"),
            ([&1u32.to_be_bytes()[..], &opt(OPT_ABORT, b"")].concat(), "aborted"),
            ([&1u32.to_be_bytes()[..], &opt(OPT_GO, b"\0\0")[..]].concat(), "hung up"),
            ([&1u32.to_be_bytes()[..], &opt(OPT_GO, &[0; 10])[..20]].concat(), "middle of a message"),
        ];
        for (input, want) in cases {
            let (neg, _, _) = run(&input, &ram);
            let err = neg.unwrap_err();
            assert!(err.contains(want), "{err} (wanted {want})");
        }
        // An oversized option closes the connection without reading it.
        let mut input = 1u32.to_be_bytes().to_vec();
        input.extend_from_slice(&IHAVEOPT.to_be_bytes());
        input.extend_from_slice(&OPT_INFO.to_be_bytes());
        input.extend_from_slice(&(MAX_OPTION + 1).to_be_bytes());
        assert!(run(&input, &ram).0.unwrap_err().contains("carries"));
    }

    #[test]
    fn bad_requests_close_or_error() {
        let start = || {
            let mut input = 3u32.to_be_bytes().to_vec();
            input.extend(opt(OPT_EXPORT_NAME, b"ram"));
            input
        };
        let ram = Ram::new(4096);
        let mut input = start();
        input.extend_from_slice(&[0xde, 0xad, 0xbe, 0xef]);
        input.extend_from_slice(&[0; 24]);
        assert!(run(&input, &ram).2.unwrap().contains("bad request magic"));
        let mut input = start();
        input.extend(request(CMD_WRITE, 0, 1, 0, MAX_REQUEST + 1, &[]));
        assert!(run(&input, &ram).2.unwrap().contains("limit"));
        // A write whose payload never fully arrives changes nothing.
        let mut input = start();
        input.extend(request(CMD_WRITE, 0, 1, 0, 100, &[0xAA; 60]));
        assert!(run(&input, &ram).2.unwrap().contains("middle of a message"));
        let mut input = start();
        input.extend(&request(CMD_READ, 0, 1, 0, 100, &[])[..10]);
        assert!(run(&input, &ram).2.unwrap().contains("middle of a message"));
        assert!(ram.bytes.lock().unwrap().iter().all(|&b| b == 0));
    }
}
