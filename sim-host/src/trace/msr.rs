//! # MSR Cambridge CSV
//!
//! The SNIA IOTTA MSR Cambridge traces (Narayanan et al., "Write Off-Loading", FAST'08), and the
//! exchange format of this simulator. One request a line, seven comma-separated fields, no header:
//!
//! ```text
//! Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime
//! 128166385295514663,hm,0,Write,9056014336,2048,2833
//! ```
//!
//! - `Timestamp`: Windows filetime, 100 ns ticks since 1601; converted to ns (× 100) and made
//!   relative to the trace's earliest timestamp.
//! - `Hostname` (any text) and `DiskNumber` (integer) are checked but not used.
//! - `Type`: `Read` or `Write` (ASCII case-insensitive).
//! - `Offset`, `Size`: bytes, not necessarily 512- or 4096-aligned.
//! - `ResponseTime`: 100 ns ticks; checked to be an integer, not used (the simulator computes its
//!   own).
//!
//! A header line starting with `Timestamp,` (as in some re-distributions) is ignored.
//! [`write_csv`] writes any trace back in this format.

use std::io::{self, Write};

use super::{field_count_error, int_field, Op, Parsed, Trace};

const LAYOUT: &str = "Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime";

/// A header line (`Timestamp,...`), ignored.
pub(crate) fn is_header(line: &str) -> bool {
    line.split(',').next().is_some_and(|f| f.trim().eq_ignore_ascii_case("timestamp"))
}

/// Parses the op field.
pub(crate) fn parse_op(s: &str) -> Option<Op> {
    let s = s.trim();
    if s.eq_ignore_ascii_case("read") {
        Some(Op::Read)
    } else if s.eq_ignore_ascii_case("write") {
        Some(Op::Write)
    } else {
        None
    }
}

/// Parses one non-blank line.
pub(crate) fn parse_fields(line: &str) -> Result<Parsed, String> {
    let mut f = [""; 7];
    let mut n = 0;
    for field in line.split(',') {
        if n < f.len() {
            f[n] = field;
        }
        n += 1;
    }
    if n != 7 {
        return Err(field_count_error("7 comma-separated", LAYOUT, n));
    }
    let ticks = int_field("Timestamp", f[0])?;
    if f[1].trim().is_empty() {
        return Err("Hostname: empty field".into());
    }
    int_field("DiskNumber", f[2])?;
    let op = parse_op(f[3]).ok_or_else(|| format!("Type: \"{}\" is not Read or Write", f[3].trim()))?;
    let offset = int_field("Offset", f[4])?;
    let len = int_field("Size", f[5])?;
    int_field("ResponseTime", f[6])?;
    let time_ns = ticks
        .checked_mul(100)
        .ok_or_else(|| format!("Timestamp: {ticks} ticks of 100 ns overflow 64-bit nanoseconds"))?;
    Ok(Parsed { time_ns, op, offset, len, content: None })
}

/// Writes `trace` as MSR CSV: timestamps are `time_ns / 100` ticks (0 when a request has no
/// time), the given host name and disk number, `Read`/`Write`, byte offset and size, and a
/// response time of 0. Content fingerprints are not representable and are dropped.
pub fn write_csv<W: Write>(trace: &Trace, hostname: &str, disk: u32, mut out: W) -> io::Result<()> {
    for r in &trace.requests {
        let ticks = r.time_ns.unwrap_or(0) / 100;
        let op = match r.op {
            Op::Read => "Read",
            Op::Write => "Write",
        };
        writeln!(out, "{ticks},{hostname},{disk},{op},{},{},0", r.offset, r.len)?;
    }
    out.flush()
}
