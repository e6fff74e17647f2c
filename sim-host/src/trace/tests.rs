//! Tests of the trace parsers on the shared real traces (`testdata/traces`) and on hand-written
//! malformed input.

use std::collections::HashSet;
use std::path::PathBuf;

use super::*;

fn data(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../testdata/traces").join(rel)
}

const MSR: &str = "msr_raw_samples/msr-cambridge1-sample.csv";
const HEIMDALL_1006: &str = "msr_cuts_heimdall/msr.cut.per_10k.most_thpt_rand_iops.1006.trace";
const HEIMDALL_1370: &str = "msr_cuts_heimdall/msr.cut.per_10k.rw_40_60.1370.trace";
const TPCC: &str = "mqsim_umass_tpcc_websearch/tpcc-small.trace";
const WSRCH: &str = "mqsim_umass_tpcc_websearch/wsrch-small.trace";
const FIU: &str = "fiu_mail_sample/fiu_mail_cheetah_sample.blkparse";

fn read(rel: &str, format: Format) -> Trace {
    read_trace(&data(rel), format, &ParseOptions::default()).unwrap_or_else(|e| panic!("{e}"))
}

fn parse(text: &str, format: Format) -> Result<Trace, TraceError> {
    parse_trace(text.as_bytes(), "t", format, &ParseOptions::default())
}

fn parse_skip(text: &str, format: Format) -> Result<Trace, TraceError> {
    parse_trace(text.as_bytes(), "t", format, &ParseOptions { skip_bad: true })
}

fn err(text: &str, format: Format) -> String {
    parse(text, format).expect_err("should not parse").to_string()
}

/// Non-blank lines of a shared file, counted independently of the parser.
fn count_lines(rel: &str) -> usize {
    std::fs::read_to_string(data(rel)).unwrap().lines().filter(|l| !l.trim().is_empty()).count()
}

// ---- real files ---------------------------------------------------------------------------------

#[test]
fn msr_sample_parses_and_decodes() {
    let t = read(MSR, Format::Msr);
    assert_eq!(t.format, Format::Msr);
    assert_eq!(t.requests.len(), 1000);
    assert_eq!(t.skipped_lines, 0);
    assert!(t.has_times);
    assert_eq!(t.op_counts(), (508, 492));
    // Line 1: 128166385295514663,hm,0,Write,9056014336,2048,2833
    let r = &t.requests[0];
    assert_eq!(r, &Request { time_ns: Some(0), op: Op::Write, offset: 9056014336, len: 2048, content: None });
    // Line 4: 128166385301451520,hm,0,Write,3163095040,40960,3438 (100 ns ticks)
    let r = &t.requests[3];
    assert_eq!(r.time_ns, Some((128166385301451520u64 - 128166385295514663) * 100));
    assert_eq!((r.op, r.offset, r.len), (Op::Write, 3163095040, 40960));
    // Last line: 128166386567849604,hm,0,Read,11946549248,4096,3499
    let r = t.requests.last().unwrap();
    assert_eq!(r.time_ns, Some((128166386567849604u64 - 128166385295514663) * 100));
    assert_eq!((r.op, r.offset, r.len), (Op::Read, 11946549248, 4096));
    // Not all 4 KiB aligned.
    assert!(t.requests.iter().any(|r| r.offset % 4096 != 0 || r.len % 4096 != 0));
}

#[test]
fn heimdall_cuts_parse_and_match_their_stats() {
    // .stats: "Total IO = 10000", "#read io = 8316", "#write io = 1684", "Duration = 1.0 s".
    let t = read(HEIMDALL_1006, Format::Heimdall);
    assert_eq!(t.requests.len(), 10_000);
    assert_eq!(t.op_counts(), (8316, 1684));
    let r = &t.requests[0]; // 0.000 0 11562803200 4096 1
    assert_eq!(r, &Request { time_ns: Some(0), op: Op::Read, offset: 11562803200, len: 4096, content: None });
    assert_eq!(t.requests.last().unwrap().time_ns, Some(1_017_077_000)); // 1017.077 ms
                                                                         // .stats: "Size (read IO) = 33 MB", "Size (write IO) = 90 MB" (MiB, rounded down).
    let bytes = |op| t.requests.iter().filter(|r| r.op == op).map(|r| r.len).sum::<u64>() >> 20;
    assert_eq!((bytes(Op::Read), bytes(Op::Write)), (33, 90));

    // .stats: "#read io = 4054", "#write io = 5946", "Duration = 85.0 s".
    let t = read(HEIMDALL_1370, Format::Heimdall);
    assert_eq!(t.requests.len(), 10_000);
    assert_eq!(t.op_counts(), (4054, 5946));
    let r = &t.requests[2]; // 22.810 0 2205343744 4096 1
    assert_eq!((r.time_ns, r.op, r.offset, r.len), (Some(22_810_000), Op::Read, 2205343744, 4096));
    let r = &t.requests[3]; // 45.304 0 11403917312 512 0
    assert_eq!((r.time_ns, r.op, r.offset, r.len), (Some(45_304_000), Op::Write, 11403917312, 512));
    let last = t.requests.last().unwrap(); // 85915.075 0 1385840640 4096 0
    assert_eq!((last.time_ns, last.op, last.offset), (Some(85_915_075_000), Op::Write, 1385840640));
}

#[test]
fn disksim_tpcc_and_websearch_parse() {
    let t = read(TPCC, Format::Disksim);
    assert_eq!(t.requests.len(), count_lines(TPCC));
    assert_eq!(t.requests.len(), 6999);
    assert_eq!(t.op_counts(), (4381, 2618)); // 37% writes
    let r = &t.requests[0]; // 938513000 4 264719034 16 0
    assert_eq!(
        r,
        &Request { time_ns: Some(0), op: Op::Write, offset: 264719034 * 512, len: 16 * 512, content: None }
    );
    let r = &t.requests[2]; // 938944000 13 93230992 32 0
    assert_eq!((r.time_ns, r.offset, r.len), (Some(938944000 - 938513000), 93230992 * 512, 32 * 512));
    let r = t.requests.last().unwrap(); // 1075002000 7 160057354 16 0
    assert_eq!((r.time_ns, r.op), (Some(1075002000 - 938513000), Op::Write));
    let r = &t.requests[t.requests.len() - 2]; // 1075001000 3 340107914 16 1
    assert_eq!((r.op, r.offset), (Op::Read, 340107914 * 512));

    let t = read(WSRCH, Format::Disksim);
    assert_eq!(t.requests.len(), count_lines(WSRCH));
    assert_eq!(t.requests.len(), 24_783); // the last line has no newline
    assert_eq!(t.op_counts(), (24_779, 4));
    let r = &t.requests[0]; // 11413000 0 657728 16 1
    assert_eq!(
        r,
        &Request { time_ns: Some(0), op: Op::Read, offset: 657728 * 512, len: 8192, content: None }
    );
    let r = t.requests.last().unwrap(); // 60066625000 1 34371424 64 1
    assert_eq!((r.time_ns, r.offset, r.len), (Some(60066625000 - 11413000), 34371424 * 512, 64 * 512));
}

#[test]
fn fiu_mail_parses_with_content() {
    let t = read(FIU, Format::Fiu);
    assert_eq!(t.requests.len(), 9998);
    assert_eq!(t.op_counts(), (8896, 1102));
    // 89966522969723 4270 rpc.mountd 18579576 8 W 6 0 d6c75ba46e82326fefa545b57a12e221
    let r = &t.requests[0];
    assert_eq!(
        r,
        &Request {
            time_ns: Some(0),
            op: Op::Write,
            offset: 18579576 * 512,
            len: 4096,
            content: Some(vec![0xd6c75ba46e82326f]),
        }
    );
    // 89966527950584 4253 nfsd 508516672 8 W 6 0 88b93b628d84082186026d9da044f173
    let r = &t.requests[1];
    assert_eq!(r.time_ns, Some(89966527950584 - 89966522969723));
    assert_eq!(r.content, Some(vec![0x88b93b628d840821]));
    // Last: 89990094148817 0 swapper 283476816 8 R 6 0 d6bd5b6a24cdf1401e01db279fc9d884
    let r = t.requests.last().unwrap();
    assert_eq!((r.op, r.offset, r.len), (Op::Read, 283476816 * 512, 4096));
    assert_eq!(r.content, Some(vec![0xd6bd5b6a24cdf140]));
    assert!(t.requests.iter().all(|r| r.content.as_ref().map(Vec::len) == Some(1)));
}

#[test]
fn auto_detects_every_shared_file() {
    for (rel, want) in [
        (MSR, Format::Msr),
        (HEIMDALL_1006, Format::Heimdall),
        (HEIMDALL_1370, Format::Heimdall),
        (TPCC, Format::Disksim),
        (WSRCH, Format::Disksim),
        (FIU, Format::Fiu),
    ] {
        let auto = read(rel, Format::Auto);
        assert_eq!(auto.format, want, "{rel}");
        assert_eq!(auto, read(rel, want), "{rel}");
        let text = std::fs::read_to_string(data(rel)).unwrap();
        assert_eq!(detect::detect(&text), Some(want), "{rel}");
    }
}

#[test]
fn explicit_wrong_format_fails_on_line_1() {
    let e = read_trace(&data(TPCC), Format::Msr, &ParseOptions::default()).unwrap_err();
    assert_eq!(e.line(), Some(1));
    assert!(e.to_string().starts_with(&format!("{}:1: expected 7", data(TPCC).display())), "{e}");
    // Heimdall's decimal milliseconds are not DiskSim nanoseconds.
    let e = read_trace(&data(HEIMDALL_1370), Format::Disksim, &ParseOptions::default()).unwrap_err();
    assert!(
        e.to_string()
            .ends_with(":1: arrival_ns: \"0.000\" is not an integer number of nanoseconds (MQSim's unit)"),
        "{e}"
    );
}

#[test]
fn footprint_of_shared_msr_sample() {
    let t = read(MSR, Format::Msr);
    let mut pages = HashSet::new();
    for r in &t.requests {
        let s = r.page_span(4096).unwrap();
        pages.extend(s.range());
    }
    assert_eq!(footprint_pages(&t, 4096), pages.len() as u64);
    let mut c = Compactor::new();
    for r in &t.requests {
        for p in r.page_span(4096).unwrap().range() {
            assert!(c.map(p) < pages.len() as u64);
        }
    }
    assert_eq!(c.distinct(), pages.len() as u64);
}

#[test]
fn missing_file_is_an_io_error() {
    let p = data("no/such.trace");
    let e = read_trace(&p, Format::Msr, &ParseOptions::default()).unwrap_err();
    assert!(e.is_io());
    assert_eq!(e.line(), None);
    assert!(e.to_string().starts_with(&format!("{}: ", p.display())), "{e}");
}

// ---- malformed lines ----------------------------------------------------------------------------

const MSR_OK: &str = "128166385295514663,hm,0,Write,9056014336,2048,2833";

#[test]
fn msr_malformed_lines() {
    assert_eq!(
        err(&format!("{MSR_OK}\n128166385295514878,hm,0,Write,11855351808,512\n"), Format::Msr),
        "t:2: expected 7 comma-separated fields \
         (Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime), found 6"
    );
    assert_eq!(
        err("1,hm,0,Write,12a,512,1", Format::Msr),
        "t:1: Offset: \"12a\" is not a non-negative integer"
    );
    assert_eq!(
        err("1,hm,0,Write,-5,512,1", Format::Msr),
        "t:1: Offset: \"-5\" is not a non-negative integer"
    );
    assert_eq!(
        err("x,hm,0,Write,0,512,1", Format::Msr),
        "t:1: Timestamp: \"x\" is not a non-negative integer"
    );
    assert_eq!(err("1,hm,0,Erase,0,512,1", Format::Msr), "t:1: Type: \"Erase\" is not Read or Write");
    assert_eq!(
        err("1,hm,0,Read,0,,1", Format::Msr),
        "t:1: Size: empty field, expected a non-negative integer"
    );
    assert_eq!(
        err("1,hm,0,Read,0,99999999999999999999,1", Format::Msr),
        "t:1: Size: 99999999999999999999 is too large"
    );
    assert_eq!(
        err("1,hm,0,Read,18446744073709551615,2,1", Format::Msr),
        "t:1: request end overflows: offset 18446744073709551615 + length 2 bytes is beyond 2^64"
    );
    assert_eq!(
        err("184467440737095517,hm,0,Read,0,2,1", Format::Msr),
        "t:1: Timestamp: 184467440737095517 ticks of 100 ns overflow 64-bit nanoseconds"
    );
    // Case-insensitive type, header, CRLF, blank and comment lines.
    let t = parse(
        "Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime\r\n\r\n# c\r\n200,hm,0,read,4096,512,7\r\n100,hm,1,WRITE,0,0,7\r\n",
        Format::Msr,
    )
    .unwrap();
    assert_eq!(t.requests.len(), 2);
    assert_eq!(t.skipped_lines, 0);
    // Times are relative to the earliest timestamp even when it is not the first.
    assert_eq!(
        t.requests[0],
        Request { time_ns: Some(10_000), op: Op::Read, offset: 4096, len: 512, content: None }
    );
    assert_eq!(t.requests[1], Request { time_ns: Some(0), op: Op::Write, offset: 0, len: 0, content: None });
    assert_eq!(t.requests[1].page_span(4096), None);
}

#[test]
fn heimdall_malformed_lines() {
    let ok = "45.304 0 11403917312 512 0";
    assert_eq!(
        err(&format!("{ok}\n{ok}\n45.308 0 11403917824 512\n"), Format::Heimdall),
        "t:3: expected 5 whitespace-separated fields (ts_ms dev offset_bytes size_bytes op), found 4"
    );
    assert_eq!(
        err("45.3.4 0 0 512 0", Format::Heimdall),
        "t:1: ts_ms: \"45.3.4\" is not a non-negative decimal number"
    );
    assert_eq!(
        err("-1.0 0 0 512 0", Format::Heimdall),
        "t:1: ts_ms: \"-1.0\" is not a non-negative decimal number"
    );
    assert_eq!(
        err("1.0 0 0x10 512 0", Format::Heimdall),
        "t:1: offset_bytes: \"0x10\" is not a non-negative integer"
    );
    assert_eq!(err("1.0 0 0 512 2", Format::Heimdall), "t:1: op: \"2\" is not 1 (read) or 0 (write)");
    assert_eq!(err("1.0 0 0 512 R", Format::Heimdall), "t:1: op: \"R\" is not 1 (read) or 0 (write)");
    // Sub-nanosecond digits are dropped, integer and tab-separated times are fine.
    let t = parse("7\t0 0 512 1\n7.0000019 0 0 512 1\n.5 0 0 512 1\n", Format::Heimdall).unwrap();
    let times: Vec<_> = t.requests.iter().map(|r| r.time_ns.unwrap()).collect();
    assert_eq!(times, [6_500_000, 6_500_001, 0]);
}

#[test]
fn disksim_malformed_lines() {
    let ok = "938513000 4 264719034 16 0";
    assert_eq!(
        err(&format!("{ok}\n938513000 4 264719034 16 0 9\n"), Format::Disksim),
        "t:2: expected 5 whitespace-separated fields (arrival_ns device lba_sector size_sectors type), found 6"
    );
    assert_eq!(
        err("938513000 4 26471x034 16 0", Format::Disksim),
        "t:1: lba_sector: \"26471x034\" is not a non-negative integer"
    );
    assert_eq!(err("938513000 4 1 16 3", Format::Disksim), "t:1: type: \"3\" is not 0 (write) or 1 (read)");
    assert_eq!(
        err("938513000 4 1 36028797018963968 1", Format::Disksim),
        "t:1: size_sectors: 36028797018963968 × 512 bytes overflows"
    );
}

#[test]
fn fiu_malformed_lines_and_multi_hash_requests() {
    let h1 = "d6c75ba46e82326fefa545b57a12e221";
    let h2 = "88b93b628d84082186026d9da044f173";
    let h3 = "442aacdb6ea1684f2aebf339de201f12";
    assert_eq!(
        err("1 2 nfsd 8 8 W 6 0\n", Format::Fiu),
        "t:1: expected at least 9 whitespace-separated fields \
         (ts_ns pid process lba_sectors size_sectors R/W major minor md5...), found 8"
    );
    assert_eq!(err(&format!("1 2 nfsd 8 8 X 6 0 {h1}"), Format::Fiu), "t:1: R/W: \"X\" is not R or W");
    assert_eq!(
        err(&format!("1 2 nfsd 8 eight W 6 0 {h1}"), Format::Fiu),
        "t:1: size_sectors: \"eight\" is not a non-negative integer"
    );
    assert_eq!(
        err(&format!("1 2 nfsd 8 16 W 6 0 {h1}"), Format::Fiu),
        "t:1: md5: expected 2 MD5 hash(es) for 8192 bytes (one per 4 KiB), found 1"
    );
    assert_eq!(
        err(&format!("1 2 nfsd 8 8 W 6 0 {}", &h1[..31]), Format::Fiu),
        "t:1: md5: expected 32-hex-digit MD5s run together, found 31 characters"
    );
    assert_eq!(
        err(&format!("1 2 nfsd 8 8 W 6 0 {}g", &h1[..31]), Format::Fiu),
        "t:1: md5: hash 1 is not 32 hexadecimal digits"
    );
    // Several hashes run together (one per 4 KiB, a partial last one too), a process name with a
    // blank, lower-case op.
    let t = parse(
        &format!("5 2 kworker 1 16 W 6 0 {h1}{h2}\n9 7 Web Content 3 20 r 8 1 {h1}{h2}{h3}\n"),
        Format::Fiu,
    )
    .unwrap();
    assert_eq!(
        t.requests[0],
        Request {
            time_ns: Some(0),
            op: Op::Write,
            offset: 512,
            len: 8192,
            content: Some(vec![0xd6c75ba46e82326f, 0x88b93b628d840821])
        }
    );
    assert_eq!(t.requests[1].op, Op::Read);
    assert_eq!(t.requests[1].time_ns, Some(4));
    assert_eq!((t.requests[1].offset, t.requests[1].len), (1536, 10240));
    assert_eq!(t.requests[1].content.as_ref().unwrap().len(), 3);
    assert_eq!(t.requests[1].content.as_ref().unwrap()[2], 0x442aacdb6ea1684f);
}

#[test]
fn skip_bad_counts_and_skips() {
    let text = "1,hm,0,Write,0,4096,1\n1,hm,0,Write,0,4096\n\n2,hm,0,Bogus,0,4096,1\n3,hm,0,Read,4096,4096,1\n\u{0}\u{0}\u{0}\n";
    assert_eq!(err(text, Format::Msr), "t:2: expected 7 comma-separated fields (Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime), found 6");
    let t = parse_skip(text, Format::Msr).unwrap();
    assert_eq!(t.requests.len(), 2);
    assert_eq!(t.skipped_lines, 3);
    for (text, format, good, bad) in [
        ("1.0 0 0 512 0\n1.0 0 0 512\nx 0 0 512 1\n2.0 0 512 512 1\n", Format::Heimdall, 2, 2),
        ("1 0 0 8 0\n1 0 0 8 7\n1 0 0 8 1\n", Format::Disksim, 2, 1),
        ("1 2 p 0 8 W 6 0 d6c75ba46e82326fefa545b57a12e221\n1 2 p 0 8 W 6 0 zz\n", Format::Fiu, 1, 1),
    ] {
        assert!(parse(text, format).is_err());
        let t = parse_skip(text, format).unwrap();
        assert_eq!((t.requests.len(), t.skipped_lines), (good, bad), "{format}");
    }
}

#[test]
fn non_utf8_line_is_malformed_not_io() {
    let mut bytes = b"1,hm,0,Write,0,4096,1\n".to_vec();
    bytes.extend_from_slice(b"2,hm,0,Wr\xffte,0,4096,1\n");
    let e = parse_trace(&bytes[..], "t", Format::Msr, &ParseOptions::default()).unwrap_err();
    assert_eq!(e.to_string(), "t:2: line is not valid UTF-8 text");
    let t = parse_trace(&bytes[..], "t", Format::Auto, &ParseOptions { skip_bad: true }).unwrap();
    assert_eq!((t.format, t.requests.len(), t.skipped_lines), (Format::Msr, 1, 1));
}

#[test]
fn auto_detection_edge_cases() {
    assert_eq!(detect::detect("0.000 0 11562803200 4096 1\n"), Some(Format::Heimdall));
    assert_eq!(detect::detect("938513000 4 264719034 16 0\n"), Some(Format::Disksim));
    // Integer-only five-field lines whose sizes are all byte-like: Heimdall.
    assert_eq!(detect::detect("0 0 11562803200 4096 1\n12 0 512 512 0\n"), Some(Format::Heimdall));
    assert_eq!(detect::detect("1,hm,0,Read,0,512,1\n"), Some(Format::Msr));
    assert_eq!(detect::detect("1 2 nfsd 8 8 W 6 0 d6c75ba46e82326fefa545b57a12e221\n"), Some(Format::Fiu));
    // The majority wins over a few bad lines; line numbers stay those of the file.
    let text = "garbage\n1,hm,0,Read,0,512,1\n1,hm,0,Read,0,512,1\n";
    assert_eq!(err(text, Format::Auto), "t:1: expected 7 comma-separated fields (Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime), found 1");
    let t = parse_skip(text, Format::Auto).unwrap();
    assert_eq!((t.format, t.requests.len(), t.skipped_lines), (Format::Msr, 2, 1));
    assert_eq!(detect::detect("hello world\n"), None);
    assert_eq!(
        err("hello world\n", Format::Auto),
        "t: cannot detect the trace format: none of the first 100 lines is a valid msr, disksim, heimdall or \
         fiu request; give --format to see what is wrong with them"
    );
    assert_eq!(err("", Format::Auto), "t: cannot detect the trace format: the file is empty; give --format");
    // An empty file in an explicit format is an empty trace.
    let t = parse("", Format::Disksim).unwrap();
    assert!(t.requests.is_empty());
    // More than DETECT_LINES lines: the buffered head and the rest are both parsed, in order.
    let text: String = (0..250).map(|i| format!("{i} 0 {i} 8 1\n")).collect();
    let t = parse(&text, Format::Auto).unwrap();
    assert_eq!(t.format, Format::Disksim);
    assert_eq!(t.requests.len(), 250);
    assert!(t.requests.iter().enumerate().all(|(i, r)| r.offset == i as u64 * 512));
}

#[test]
fn format_from_str() {
    for f in [Format::Msr, Format::Disksim, Format::Heimdall, Format::Fiu, Format::Auto] {
        assert_eq!(f.to_string().parse::<Format>(), Ok(f));
    }
    assert_eq!("MSR".parse::<Format>(), Ok(Format::Msr));
    assert_eq!(
        "blktrace".parse::<Format>(),
        Err("unknown trace format \"blktrace\": expected one of msr, disksim, heimdall, fiu, auto"
            .to_string())
    );
}

#[test]
fn msr_csv_round_trip() {
    let fiu = read(FIU, Format::Fiu);
    let mut out = Vec::new();
    msr::write_csv(&fiu, "fiu", 0, &mut out).unwrap();
    let back = parse_trace(&out[..], "converted", Format::Auto, &ParseOptions::default()).unwrap();
    assert_eq!(back.format, Format::Msr);
    assert_eq!(back.requests.len(), fiu.requests.len());
    for (a, b) in fiu.requests.iter().zip(&back.requests) {
        assert_eq!((a.op, a.offset, a.len), (b.op, b.offset, b.len));
        assert_eq!(b.time_ns, Some(a.time_ns.unwrap() / 100 * 100));
        assert_eq!(b.content, None);
    }
}

// ---- pages --------------------------------------------------------------------------------------

#[test]
fn page_span_edge_cases() {
    let p = 4096;
    let span = |o, l| page_span(o, l, p);
    assert_eq!(span(0, 0), None);
    assert_eq!(span(12345, 0), None);
    assert_eq!(page_span(0, 4096, 0), None);
    assert_eq!(span(u64::MAX, 2), None);
    let s = span(0, 4096).unwrap();
    assert_eq!(s, PageSpan { first_page: 0, pages: 1, partial_head: false, partial_tail: false });
    assert_eq!((s.partial_pages(), s.full_pages()), (0, 1));
    let s = span(3 * p, 2 * p).unwrap();
    assert_eq!(s, PageSpan { first_page: 3, pages: 2, partial_head: false, partial_tail: false });
    assert_eq!((s.last_page(), s.range().count()), (4, 2));
    // Short write at the start of a page: one partial page.
    let s = span(0, 100).unwrap();
    assert_eq!(s, PageSpan { first_page: 0, pages: 1, partial_head: false, partial_tail: true });
    assert_eq!(s.partial_pages(), 1);
    // Inside one page, unaligned at both ends: still one partial page.
    let s = span(100, 200).unwrap();
    assert_eq!(s, PageSpan { first_page: 0, pages: 1, partial_head: true, partial_tail: true });
    assert_eq!((s.partial_pages(), s.full_pages()), (1, 0));
    // One page long but unaligned: straddles two pages, both partial.
    let s = span(100, 4096).unwrap();
    assert_eq!(s, PageSpan { first_page: 0, pages: 2, partial_head: true, partial_tail: true });
    assert_eq!((s.partial_pages(), s.full_pages()), (2, 0));
    // Crossing a boundary with few bytes.
    let s = span(4000, 200).unwrap();
    assert_eq!(s, PageSpan { first_page: 0, pages: 2, partial_head: true, partial_tail: true });
    // Unaligned head, aligned tail, full pages in between.
    let s = span(512, 3 * p - 512).unwrap();
    assert_eq!(s, PageSpan { first_page: 0, pages: 3, partial_head: true, partial_tail: false });
    assert_eq!((s.partial_pages(), s.full_pages()), (1, 2));
    // The very end of the address space.
    let s = span(u64::MAX - 9, 9).unwrap();
    assert_eq!(s.last_page(), (u64::MAX - 1) / p);
    // Other page sizes (512 B sectors, 2 KiB pages).
    assert_eq!(page_span(1536, 1024, 512).unwrap().pages, 2);
    assert_eq!(
        page_span(2048, 2048, 2048).unwrap(),
        PageSpan { first_page: 1, pages: 1, partial_head: false, partial_tail: false }
    );
}

#[test]
fn compactor_and_address_mapper() {
    let mut c = Compactor::new();
    assert_eq!(c.get(100), None);
    assert_eq!(c.map(1_000_000_007), 0);
    assert_eq!(c.map(5), 1);
    assert_eq!(c.map(1_000_000_007), 0);
    assert_eq!(c.map(6), 2);
    assert_eq!(c.get(5), Some(1));
    assert_eq!(c.distinct(), 3);

    let mut m = AddressMapper::new(AddressMode::from_flags(false, false), 10);
    assert_eq!((m.map(9), m.map(10)), (Some(9), None));
    let mut m = AddressMapper::new(AddressMode::from_flags(false, true), 10);
    assert_eq!((m.map(9), m.map(10), m.map(123)), (Some(9), Some(0), Some(3)));
    let mut m = AddressMapper::new(AddressMode::from_flags(true, false), 2);
    assert_eq!((m.map(1000), m.map(7), m.map(1000), m.map(8)), (Some(0), Some(1), Some(0), None));
    assert_eq!(m.distinct(), 3);
    let mut m = AddressMapper::new(AddressMode::from_flags(true, true), 2);
    assert_eq!((m.map(1000), m.map(7), m.map(8)), (Some(0), Some(1), Some(0)));
    assert_eq!(AddressMapper::new(AddressMode::Wrap, 0).map(1), None);
}

#[test]
fn footprint_merges_overlaps() {
    let req = |offset, len| Request { time_ns: None, op: Op::Write, offset, len, content: None };
    let t = Trace {
        requests: vec![req(0, 4096), req(100, 8192), req(40960, 1), req(0, 0), req(4096 * 1000, 4096 * 5)],
        format: Format::Msr,
        skipped_lines: 0,
        has_times: false,
    };
    // Pages 0..=2, 10, 1000..=1004.
    assert_eq!(footprint_pages(&t, 4096), 3 + 1 + 5);
    assert_eq!(footprint_pages(&t, 0), 0);
    // A huge request costs nothing.
    let t = Trace { requests: vec![req(0, u64::MAX)], ..t };
    assert_eq!(footprint_pages(&t, 4096), u64::MAX / 4096 + 1);
}
