//! The block-trace parsers (`sim_host::trace`: MSR CSV, Heimdall, DiskSim, FIU and the format
//! detection). The first input byte picks the format (or auto-detection) and whether bad lines
//! are skipped; the rest is the file. Checks: `parse_trace` returns a trace or a `TraceError`,
//! never panics; a parsed trace's requests have page spans and map through both address modes
//! without a panic, and converting it to MSR CSV (`msr::write_csv`) gives a file that parses
//! back to as many requests, with the same offsets, lengths and operations.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sim_host::trace::{msr, parse_trace, AddressMode, Format, ParseOptions};

fuzz_target!(|input: &[u8]| {
    let Some((&sel, text)) = input.split_first() else { return };
    let format =
        [Format::Auto, Format::Msr, Format::Heimdall, Format::Disksim, Format::Fiu][(sel % 5) as usize];
    let opts = ParseOptions { skip_bad: sel & 0x80 != 0 };
    let Ok(trace) = parse_trace(text, "fuzz", format, &opts) else { return };
    let _ = trace.op_counts();
    let _ = sim_host::trace::footprint_pages(&trace, 4096);
    for mode in [AddressMode::Direct, AddressMode::Compact, AddressMode::Wrap, AddressMode::CompactWrap] {
        let mut mapper = sim_host::trace::AddressMapper::new(mode, 1000);
        for r in &trace.requests {
            if let Some(span) = r.page_span(4096) {
                let _ = (span.partial_pages(), span.full_pages());
                for p in span.range().take(4) {
                    let _ = mapper.map(p);
                }
            }
        }
    }
    let mut csv = Vec::new();
    msr::write_csv(&trace, "fuzz", 0, &mut csv).expect("writing to memory");
    let back = parse_trace(&csv[..], "csv", Format::Msr, &ParseOptions::default())
        .unwrap_or_else(|e| panic!("the CSV written does not parse: {e}\n{}", String::from_utf8_lossy(&csv)));
    assert_eq!(back.requests.len(), trace.requests.len());
    for (a, b) in trace.requests.iter().zip(&back.requests) {
        assert_eq!((a.offset, a.len, a.op), (b.offset, b.len, b.op));
    }
});
