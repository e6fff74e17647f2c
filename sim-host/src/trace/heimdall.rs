//! # Heimdall cut format
//!
//! The 10,000-request windows of MSR Cambridge traces used by Heimdall (ucare-uchicago/Heimdall,
//! `ds_pipeline/data/raw_data/*.trace`). One request a line, five whitespace-separated fields:
//!
//! ```text
//! ts_ms dev offset_bytes size_bytes op
//! 45.304 0 11403917312 512 0
//! ```
//!
//! - `ts_ms`: arrival time in milliseconds, a decimal number (the files have three decimals);
//!   converted exactly to ns (digits below 1 ns are dropped) and made relative to the trace's
//!   earliest timestamp. The `.stats` files beside the traces agree: the `rw_40_60.1370` window
//!   ends at 85,915 ms and its stats say "Duration = 85.0 s".
//! - `dev`: device number (integer), not used.
//! - `offset_bytes`, `size_bytes`: bytes.
//! - `op`: `1` read, `0` write (the stats' "R:W ratio = 83/17" for `most_thpt_rand_iops.1006`
//!   matches 8,316 lines with `1` and 1,684 with `0`).

use super::{decimal_field, field_count_error, int_field, Op, Parsed};

const LAYOUT: &str = "ts_ms dev offset_bytes size_bytes op";

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
    let time_ns = decimal_field("ts_ms", f[0], 6)?;
    int_field("dev", f[1])?;
    let offset = int_field("offset_bytes", f[2])?;
    let len = int_field("size_bytes", f[3])?;
    let op = match f[4] {
        "1" => Op::Read,
        "0" => Op::Write,
        other => return Err(format!("op: \"{other}\" is not 1 (read) or 0 (write)")),
    };
    Ok(Parsed { time_ns, op, offset, len, content: None })
}
