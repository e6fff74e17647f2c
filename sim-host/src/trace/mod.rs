//! # Block I/O traces: parsing real traces into host requests
//!
//! The simulator replays traces captured on real systems. Four line formats are read, one request
//! a line (see `testdata/traces/README.md`):
//!
//! | [`Format`] | module | line | units |
//! |---|---|---|---|
//! | `msr` | [`msr`] | `Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime` | time in Windows filetime ticks (100 ns), `Read`/`Write`, offset and size in bytes |
//! | `heimdall` | [`heimdall`] | `ts_ms dev offset_bytes size_bytes op` | time in (decimal) milliseconds, op `1` read, `0` write |
//! | `disksim` | [`disksim`] | `arrival_ns device lba_sector size_sectors type` | time in ns, 512-byte sectors, type `0` write, `1` read (MQSim's convention) |
//! | `fiu` | [`fiu`] | `ts_ns pid process lba size R/W major minor md5...` | time in ns, 512-byte sectors, one MD5 per 4 KiB of data |
//! | `auto` | [`detect`] | | the format is guessed from the first lines |
//!
//! Conventions shared by all formats:
//! - Every request carries a time: [`Request::time_ns`] is in nanoseconds **relative to the
//!   earliest timestamp of the trace** (for the traces in `testdata`, all in time order, that is
//!   the first request, which is at 0). Requests stay in file order; they are not sorted.
//! - Offsets and lengths are in bytes; sector-based formats use 512-byte sectors. A request of
//!   length 0 is kept (it covers no page: [`page_span`] returns `None`).
//! - Device / disk / host columns are validated but not used: a trace is one address space.
//! - Blank lines (and lines whose first non-blank character is `#`) are ignored and not counted
//!   as skipped. Line endings may be `\n` or `\r\n`.
//! - A malformed line is a [`TraceError`] whose `Display` is `file:line: what is wrong` (1-based
//!   line numbers). With [`ParseOptions::skip_bad`] such lines are skipped and counted in
//!   [`Trace::skipped_lines`] instead. I/O errors are always fatal and display as `file: error`.
//!   No input makes the parsers panic.
//!
//! [`pages`] splits requests into pages (with partial head and tail pages for read-modify-write)
//! and maps trace addresses onto the device: dense first-touch remapping ([`Compactor`]) or
//! modulo folding ([`AddressMode::Wrap`]). [`msr::write_csv`] converts any parsed trace to the MSR
//! CSV exchange format.

pub mod detect;
pub mod disksim;
pub mod fiu;
pub mod heimdall;
pub mod msr;
pub mod pages;

use std::fmt;
use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};
use std::path::Path;
use std::str::FromStr;

pub use pages::{footprint_pages, page_span, AddressMapper, AddressMode, Compactor, PageSpan};

/// A trace's line format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Format {
    /// MSR Cambridge CSV (SNIA IOTTA).
    Msr,
    /// DiskSim ASCII as shipped with MQSim.
    Disksim,
    /// The Heimdall "cut" format.
    Heimdall,
    /// FIU IODedup blkparse-like lines with per-4 KiB MD5 content hashes.
    Fiu,
    /// Guess the format from the file's first lines (see [`detect`]).
    Auto,
}

impl Format {
    /// The name accepted by [`FromStr`] and shown by `Display`.
    pub fn name(self) -> &'static str {
        match self {
            Format::Msr => "msr",
            Format::Disksim => "disksim",
            Format::Heimdall => "heimdall",
            Format::Fiu => "fiu",
            Format::Auto => "auto",
        }
    }

    /// The concrete formats, in the order auto-detection reports them.
    pub const CONCRETE: [Format; 4] = [Format::Msr, Format::Disksim, Format::Heimdall, Format::Fiu];
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Format {
    type Err = String;

    /// `msr`, `disksim`, `heimdall`, `fiu` or `auto` (ASCII case-insensitive).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "msr" => Ok(Format::Msr),
            "disksim" => Ok(Format::Disksim),
            "heimdall" => Ok(Format::Heimdall),
            "fiu" => Ok(Format::Fiu),
            "auto" => Ok(Format::Auto),
            _ => Err(format!(
                "unknown trace format \"{s}\": expected one of msr, disksim, heimdall, fiu, auto"
            )),
        }
    }
}

/// Direction of a host request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Op {
    /// Host read.
    Read,
    /// Host write.
    Write,
}

/// One host request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    /// Arrival time in ns relative to the trace's earliest timestamp; `None` when the source has
    /// no times (synthetic workloads).
    pub time_ns: Option<u64>,
    /// Read or write.
    pub op: Op,
    /// Start in bytes (`offset + len` never overflows `u64` for parsed requests).
    pub offset: u64,
    /// Length in bytes (may be 0).
    pub len: u64,
    /// Content fingerprints when the source records content: one per 4 KiB of the request's data
    /// for FIU traces (the first 8 bytes of the MD5, big endian, in order), one per page for
    /// synthetic workloads.
    pub content: Option<Vec<u64>>,
}

impl Request {
    /// Is it a write?
    pub fn is_write(&self) -> bool {
        self.op == Op::Write
    }

    /// The pages it covers for pages of `page_bytes` bytes; `None` for a zero-length request.
    pub fn page_span(&self, page_bytes: u64) -> Option<PageSpan> {
        page_span(self.offset, self.len, page_bytes)
    }
}

/// A parsed trace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Trace {
    /// The requests, in file order.
    pub requests: Vec<Request>,
    /// The format the file was parsed as (never [`Format::Auto`]).
    pub format: Format,
    /// Malformed lines skipped under [`ParseOptions::skip_bad`].
    pub skipped_lines: u64,
    /// Whether the requests carry arrival times (true for all four trace formats).
    pub has_times: bool,
}

impl Trace {
    /// Number of read and write requests.
    pub fn op_counts(&self) -> (u64, u64) {
        let writes = self.requests.iter().filter(|r| r.is_write()).count() as u64;
        (self.requests.len() as u64 - writes, writes)
    }
}

/// How to treat the input.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ParseOptions {
    /// Skip (and count) malformed lines instead of stopping at the first one.
    pub skip_bad: bool,
}

/// What went wrong.
#[derive(Debug)]
enum ErrorKind {
    Io(io::Error),
    Malformed { line: u64, message: String },
    NoFormat(String),
}

/// A trace that could not be read. `Display`: `file:line: what is wrong` for a malformed line,
/// `file: error` for an I/O error or a file whose format cannot be detected.
#[derive(Debug)]
pub struct TraceError {
    file: String,
    kind: ErrorKind,
}

impl TraceError {
    /// A malformed line (1-based `line`).
    pub fn malformed(file: impl Into<String>, line: u64, message: impl Into<String>) -> Self {
        TraceError { file: file.into(), kind: ErrorKind::Malformed { line, message: message.into() } }
    }

    /// An I/O error on `file`.
    pub fn io(file: impl Into<String>, error: io::Error) -> Self {
        TraceError { file: file.into(), kind: ErrorKind::Io(error) }
    }

    fn no_format(file: impl Into<String>, message: impl Into<String>) -> Self {
        TraceError { file: file.into(), kind: ErrorKind::NoFormat(message.into()) }
    }

    /// The file (or the name given to [`parse_trace`]).
    pub fn file(&self) -> &str {
        &self.file
    }

    /// The 1-based line of a malformed-line error.
    pub fn line(&self) -> Option<u64> {
        match self.kind {
            ErrorKind::Malformed { line, .. } => Some(line),
            _ => None,
        }
    }

    /// What is wrong, without the location.
    pub fn message(&self) -> String {
        match &self.kind {
            ErrorKind::Io(e) => e.to_string(),
            ErrorKind::Malformed { message, .. } | ErrorKind::NoFormat(message) => message.clone(),
        }
    }

    /// Whether it is an I/O error.
    pub fn is_io(&self) -> bool {
        matches!(self.kind, ErrorKind::Io(_))
    }
}

impl fmt::Display for TraceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            ErrorKind::Io(e) => write!(f, "{}: {}", self.file, e),
            ErrorKind::Malformed { line, message } => write!(f, "{}:{}: {}", self.file, line, message),
            ErrorKind::NoFormat(message) => write!(f, "{}: {}", self.file, message),
        }
    }
}

impl std::error::Error for TraceError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.kind {
            ErrorKind::Io(e) => Some(e),
            _ => None,
        }
    }
}

/// One parsed line before times are made relative: absolute time in ns.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Parsed {
    pub time_ns: u64,
    pub op: Op,
    pub offset: u64,
    pub len: u64,
    pub content: Option<Vec<u64>>,
}

/// What a line holds, for a given format.
pub(crate) enum LineKind {
    /// Blank or a comment.
    Ignore,
    /// A request.
    Request(Parsed),
}

/// Parses one line (without its line ending) in a concrete format.
pub(crate) fn parse_line(format: Format, line: &str) -> Result<LineKind, String> {
    let t = line.trim();
    if t.is_empty() || t.starts_with('#') {
        return Ok(LineKind::Ignore);
    }
    let parsed = match format {
        Format::Msr => {
            if msr::is_header(t) {
                return Ok(LineKind::Ignore);
            }
            msr::parse_fields(t)?
        }
        Format::Disksim => disksim::parse_fields(t)?,
        Format::Heimdall => heimdall::parse_fields(t)?,
        Format::Fiu => fiu::parse_fields(t)?,
        Format::Auto => return Err("internal: the format must be resolved first".into()),
    };
    if parsed.offset.checked_add(parsed.len).is_none() {
        return Err(format!(
            "request end overflows: offset {} + length {} bytes is beyond 2^64",
            parsed.offset, parsed.len
        ));
    }
    Ok(LineKind::Request(parsed))
}

/// Reads a trace file. The file name in errors is `path` as given.
pub fn read_trace(path: &Path, format: Format, opts: &ParseOptions) -> Result<Trace, TraceError> {
    let name = path.display().to_string();
    let file = File::open(path).map_err(|e| TraceError::io(name.clone(), e))?;
    parse_trace(BufReader::with_capacity(1 << 16, file), &name, format, opts)
}

/// Parses a trace from any reader; `name` is the file name used in errors.
pub fn parse_trace<R: Read>(
    reader: R,
    name: &str,
    format: Format,
    opts: &ParseOptions,
) -> Result<Trace, TraceError> {
    let mut lines = Lines::new(BufReader::with_capacity(1 << 16, reader), name);
    let format = match format {
        Format::Auto => {
            let mut head = Vec::new();
            while head.len() < detect::DETECT_LINES {
                match lines.next_line()? {
                    Some(l) => head.push(l),
                    None => break,
                }
            }
            let format = detect::detect_lines(head.iter().map(|(_, l)| l.as_str()))
                .ok_or_else(|| TraceError::no_format(name, detect::failure_message(head.is_empty())))?;
            lines.pending = head.into_iter().rev().collect();
            format
        }
        f => f,
    };

    let mut requests: Vec<Parsed> = Vec::new();
    let mut skipped = 0u64;
    while let Some((number, line)) = lines.next_line()? {
        match line_result(format, &line) {
            Ok(LineKind::Ignore) => {}
            Ok(LineKind::Request(p)) => requests.push(p),
            Err(message) => {
                if opts.skip_bad {
                    skipped += 1;
                } else {
                    return Err(TraceError::malformed(name, number, message));
                }
            }
        }
    }

    let base = requests.iter().map(|p| p.time_ns).min().unwrap_or(0);
    let requests = requests
        .into_iter()
        .map(|p| Request {
            time_ns: Some(p.time_ns - base),
            op: p.op,
            offset: p.offset,
            len: p.len,
            content: p.content,
        })
        .collect();
    Ok(Trace { requests, format, skipped_lines: skipped, has_times: true })
}

/// A line that is not UTF-8 is malformed, not an I/O error.
fn line_result(format: Format, line: &Line) -> Result<LineKind, String> {
    match line {
        Line::Text(s) => parse_line(format, s),
        Line::NotUtf8 => Err("line is not valid UTF-8 text".into()),
    }
}

/// A line of the input.
pub(crate) enum Line {
    Text(String),
    NotUtf8,
}

impl Line {
    pub(crate) fn as_str(&self) -> &str {
        match self {
            Line::Text(s) => s,
            Line::NotUtf8 => "",
        }
    }
}

/// Numbered lines of a reader, with a pushback buffer (used by auto-detection).
struct Lines<R> {
    reader: R,
    name: String,
    number: u64,
    buf: Vec<u8>,
    pending: Vec<(u64, Line)>,
}

impl<R: BufRead> Lines<R> {
    fn new(reader: R, name: &str) -> Self {
        Lines { reader, name: name.to_string(), number: 0, buf: Vec::new(), pending: Vec::new() }
    }

    fn next_line(&mut self) -> Result<Option<(u64, Line)>, TraceError> {
        if let Some(l) = self.pending.pop() {
            return Ok(Some(l));
        }
        self.buf.clear();
        let n = self.reader.read_until(b'\n', &mut self.buf).map_err(|e| TraceError::io(&*self.name, e))?;
        if n == 0 {
            return Ok(None);
        }
        self.number += 1;
        let mut bytes = &self.buf[..];
        if let Some(b) = bytes.strip_suffix(b"\n") {
            bytes = b;
        }
        if let Some(b) = bytes.strip_suffix(b"\r") {
            bytes = b;
        }
        let line = match std::str::from_utf8(bytes) {
            Ok(s) => Line::Text(s.to_string()),
            Err(_) => Line::NotUtf8,
        };
        Ok(Some((self.number, line)))
    }
}

// ---- field helpers shared by the format modules -------------------------------------------------

/// Parses a non-negative decimal integer field.
pub(crate) fn int_field(what: &str, s: &str) -> Result<u64, String> {
    let s = s.trim();
    if s.is_empty() {
        return Err(format!("{what}: empty field, expected a non-negative integer"));
    }
    if !s.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("{what}: \"{s}\" is not a non-negative integer"));
    }
    s.parse::<u64>().map_err(|_| format!("{what}: {s} is too large"))
}

/// Parses a non-negative decimal number `a[.b]` and scales it by `10^scale_digits`, truncating
/// digits below that precision: `("1017.077", 6)` is 1,017,077,000. Exact (no floating point).
pub(crate) fn decimal_field(what: &str, s: &str, scale_digits: u32) -> Result<u64, String> {
    let s = s.trim();
    let bad = || format!("{what}: \"{s}\" is not a non-negative decimal number");
    let (int, frac) = match s.split_once('.') {
        Some((i, f)) => (i, f),
        None => (s, ""),
    };
    if (int.is_empty() && frac.is_empty())
        || !int.bytes().all(|b| b.is_ascii_digit())
        || !frac.bytes().all(|b| b.is_ascii_digit())
    {
        return Err(bad());
    }
    let too_large = || format!("{what}: {s} is too large");
    let scale = 10u64.pow(scale_digits);
    let int_value = if int.is_empty() { 0 } else { int.parse::<u64>().map_err(|_| too_large())? };
    let mut frac_value = 0u64;
    for i in 0..scale_digits as usize {
        let digit = frac.as_bytes().get(i).map_or(0, |b| u64::from(b - b'0'));
        frac_value = frac_value * 10 + digit;
    }
    int_value.checked_mul(scale).and_then(|v| v.checked_add(frac_value)).ok_or_else(too_large)
}

/// Multiplies a count of `unit`-byte units into bytes.
pub(crate) fn scaled(what: &str, value: u64, unit: u64) -> Result<u64, String> {
    value.checked_mul(unit).ok_or_else(|| format!("{what}: {value} × {unit} bytes overflows"))
}

/// Formats a field-count error.
pub(crate) fn field_count_error(expected: &str, layout: &str, found: usize) -> String {
    format!("expected {expected} fields ({layout}), found {found}")
}

#[cfg(test)]
mod tests;
