//! # FIU IODedup traces (blkparse-like, with content hashes)
//!
//! The FIU traces of Koller and Rangaswami, "I/O Deduplication" (FAST'10), SNIA IOTTA. One request
//! a line, whitespace-separated:
//!
//! ```text
//! ts_ns pid process lba_sectors size_sectors R/W major minor md5...
//! 89966522969723 4270 rpc.mountd 18579576 8 W 6 0 d6c75ba46e82326fefa545b57a12e221
//! ```
//!
//! - `ts_ns`: nanoseconds; made relative to the trace's earliest timestamp.
//! - `pid` (integer) and `process` (text) are not used. The process name may contain blanks: the
//!   fields are taken as the first two and the last six, the process name is what is between.
//! - `lba_sectors`, `size_sectors`: 512-byte sectors, converted to bytes.
//! - `R/W`: `R` read, `W` write (ASCII case-insensitive).
//! - `major`, `minor`: device numbers (integers), not used.
//! - `md5...`: one 32-hex-digit MD5 per 4 KiB of the request's data, run together without
//!   separators. The field must hold exactly `ceil(size / 4 KiB)` hashes (none for a zero-length
//!   request). Each hash becomes a fingerprint, the first 8 bytes of the MD5 read big endian
//!   (the first 16 hex digits), in [`Request::content`](super::Request::content), for reads and
//!   writes alike.

use super::{field_count_error, int_field, scaled, Op, Parsed};

/// Bytes in a sector.
pub const SECTOR_BYTES: u64 = 512;
/// Bytes of data covered by one MD5.
pub const HASH_BLOCK_BYTES: u64 = 4096;

const LAYOUT: &str = "ts_ns pid process lba_sectors size_sectors R/W major minor md5...";

/// Parses one non-blank line.
pub(crate) fn parse_fields(line: &str) -> Result<Parsed, String> {
    let f: Vec<&str> = line.split_whitespace().collect();
    if f.len() < 9 {
        return Err(field_count_error("at least 9 whitespace-separated", LAYOUT, f.len()));
    }
    let time_ns = int_field("ts_ns", f[0])?;
    int_field("pid", f[1])?;
    let tail = &f[f.len() - 6..];
    let lba = int_field("lba_sectors", tail[0])?;
    let sectors = int_field("size_sectors", tail[1])?;
    let op = parse_op(tail[2]).ok_or_else(|| format!("R/W: \"{}\" is not R or W", tail[2]))?;
    int_field("major", tail[3])?;
    int_field("minor", tail[4])?;
    let len = scaled("size_sectors", sectors, SECTOR_BYTES)?;
    let content = parse_hashes(tail[5], len)?;
    Ok(Parsed { time_ns, op, offset: scaled("lba_sectors", lba, SECTOR_BYTES)?, len, content: Some(content) })
}

/// Parses the op field.
pub(crate) fn parse_op(s: &str) -> Option<Op> {
    match s {
        "R" | "r" => Some(Op::Read),
        "W" | "w" => Some(Op::Write),
        _ => None,
    }
}

/// The fingerprints of the hash field of a `len`-byte request.
fn parse_hashes(field: &str, len: u64) -> Result<Vec<u64>, String> {
    if !field.is_ascii() || !field.len().is_multiple_of(32) {
        return Err(format!(
            "md5: expected 32-hex-digit MD5s run together, found {} characters",
            field.chars().count()
        ));
    }
    let expected = len.div_ceil(HASH_BLOCK_BYTES);
    let found = (field.len() / 32) as u64;
    if found != expected {
        return Err(format!(
            "md5: expected {expected} MD5 hash(es) for {len} bytes (one per 4 KiB), found {found}"
        ));
    }
    let mut out = Vec::with_capacity(found as usize);
    for (i, chunk) in field.as_bytes().chunks(32).enumerate() {
        if !chunk.iter().all(u8::is_ascii_hexdigit) {
            return Err(format!("md5: hash {} is not 32 hexadecimal digits", i + 1));
        }
        // Checked above: 16 ASCII hex digits.
        let head = std::str::from_utf8(&chunk[..16]).map_err(|_| "md5: not ASCII".to_string())?;
        out.push(
            u64::from_str_radix(head, 16).map_err(|_| format!("md5: hash {} is not hexadecimal", i + 1))?,
        );
    }
    Ok(out)
}
