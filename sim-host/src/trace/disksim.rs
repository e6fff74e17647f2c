//! # DiskSim ASCII, as shipped with MQSim
//!
//! The trace format MQSim reads (`traces/tpcc-small.trace`, `traces/wsrch-small.trace` in
//! CMU-SAFARI/MQSim). One request a line, five whitespace-separated fields:
//!
//! ```text
//! arrival_ns device lba_sector size_sectors type
//! 938513000 4 264719034 16 0
//! ```
//!
//! The conventions are MQSim's (`src/host/ASCII_Trace_Definition.h` and
//! `IO_Flow_Trace_Based.cpp`): column 0 is the arrival time, 1 the device, 2 the start LBA, 3 the
//! size in sectors, 4 the type with `"0"` = write and `"1"` = read; MQSim's default trace time
//! unit is the nanosecond and its sectors are 512 bytes. So here:
//!
//! - `arrival_ns`: integer nanoseconds, made relative to the trace's earliest timestamp. A
//!   decimal time is malformed: DiskSim's own traces have fractional milliseconds there, and
//!   reading them as nanoseconds would be silently wrong (and [`detect`](super::detect) tells the
//!   Heimdall format, with decimal milliseconds, from this one by that).
//! - `device`: integer, not used (MQSim maps all of a flow's requests to one address space too).
//! - `lba_sector`, `size_sectors`: 512-byte sectors, converted to bytes.
//! - `type`: `0` write, `1` read; anything else is malformed (MQSim would read it as a read).
//!
//! TPC-C has 2,618 writes out of 6,999 requests (37%, as the README says); WebSearch is 24,779
//! reads and 4 writes.

use super::{field_count_error, int_field, scaled, Op, Parsed};

/// Bytes in a sector.
pub const SECTOR_BYTES: u64 = 512;

const LAYOUT: &str = "arrival_ns device lba_sector size_sectors type";

/// Parses one non-blank line.
pub(crate) fn parse_fields(line: &str) -> Result<Parsed, String> {
    let mut f = [""; 5];
    let mut n = 0;
    for field in line.split_whitespace() {
        if n < f.len() {
            f[n] = field;
        }
        n += 1;
    }
    if n != 5 {
        return Err(field_count_error("5 whitespace-separated", LAYOUT, n));
    }
    if f[0].contains('.') {
        return Err(format!(
            "arrival_ns: \"{}\" is not an integer number of nanoseconds (MQSim's unit)",
            f[0]
        ));
    }
    let time_ns = int_field("arrival_ns", f[0])?;
    int_field("device", f[1])?;
    let lba = int_field("lba_sector", f[2])?;
    let sectors = int_field("size_sectors", f[3])?;
    let op = match f[4] {
        "1" => Op::Read,
        "0" => Op::Write,
        other => return Err(format!("type: \"{other}\" is not 0 (write) or 1 (read)")),
    };
    Ok(Parsed {
        time_ns,
        op,
        offset: scaled("lba_sector", lba, SECTOR_BYTES)?,
        len: scaled("size_sectors", sectors, SECTOR_BYTES)?,
        content: None,
    })
}
