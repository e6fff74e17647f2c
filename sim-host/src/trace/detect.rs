//! # Format auto-detection (`--format auto`)
//!
//! The first [`DETECT_LINES`] lines of the file are tried with every concrete parser; blank and
//! comment lines (and an MSR header) do not vote. The format under which most of those lines
//! parse wins, so a few malformed lines do not mislead it. The formats are told apart by their
//! shapes:
//!
//! - MSR: 7 comma-separated fields with `Read`/`Write` in the fourth.
//! - FIU: at least 9 whitespace-separated fields, `R`/`W` sixth from the end, MD5s last.
//! - Heimdall and DiskSim: 5 whitespace-separated numeric fields. Heimdall's times are decimal
//!   milliseconds (`45.304`); DiskSim's (MQSim's) are integer nanoseconds and a decimal time does
//!   not parse as DiskSim. When every line is integer-only (both parse), the file is taken as
//!   Heimdall only if every size (fourth field) is a positive multiple of 512, as byte sizes are,
//!   and as DiskSim otherwise (its sizes are sector counts such as 8 or 16).
//!
//! When no line parses in any format, detection fails with
//! `file: cannot detect the trace format ...`, even with `--skip-bad`.

use super::{parse_line, Format, LineKind};

/// How many lines detection looks at.
pub const DETECT_LINES: usize = 100;

/// The format of a text, from its first [`DETECT_LINES`] lines; `None` when no line parses.
pub fn detect(text: &str) -> Option<Format> {
    detect_lines(text.lines().take(DETECT_LINES))
}

/// The format of the given lines (all of them are used).
pub(crate) fn detect_lines<'a>(lines: impl Iterator<Item = &'a str>) -> Option<Format> {
    // Votes in the order of Format::CONCRETE: Msr, Disksim, Heimdall, Fiu.
    let mut votes = [0u64; 4];
    let mut sizes_look_like_bytes = true;
    for line in lines {
        for (i, format) in Format::CONCRETE.iter().enumerate() {
            if let Ok(LineKind::Request(p)) = parse_line(*format, line) {
                votes[i] += 1;
                if *format == Format::Heimdall && (p.len == 0 || p.len % 512 != 0) {
                    sizes_look_like_bytes = false;
                }
            }
        }
    }
    let best = *votes.iter().max()?;
    if best == 0 {
        return None;
    }
    let [msr, disksim, heimdall, fiu] = votes;
    if msr == best {
        Some(Format::Msr)
    } else if fiu == best {
        Some(Format::Fiu)
    } else if heimdall == best && disksim == best {
        Some(if sizes_look_like_bytes { Format::Heimdall } else { Format::Disksim })
    } else if heimdall == best {
        Some(Format::Heimdall)
    } else {
        Some(Format::Disksim)
    }
}

/// The message when detection fails.
pub(crate) fn failure_message(empty: bool) -> String {
    if empty {
        "cannot detect the trace format: the file is empty; give --format".to_string()
    } else {
        format!(
            "cannot detect the trace format: none of the first {DETECT_LINES} lines is a valid msr, \
             disksim, heimdall or fiu request; give --format to see what is wrong with them"
        )
    }
}
