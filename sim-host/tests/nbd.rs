//! `ftl-sim serve` tested with clients nobody on this project wrote: qemu-io and qemu-img (Debian's
//! qemu-utils, installed by `scripts/setup.sh`), plus a small raw-socket client for the bad inputs
//! no well-behaved client sends. Every server listens on 127.0.0.1 (port 0: the kernel picks a
//! free one, the server prints it) with a fresh image in the test's temporary directory.
//!
//! A missing tool fails the test with a message naming `scripts/setup.sh`; nothing is skipped.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

const SERVER: &str = env!("CARGO_BIN_EXE_ftl-sim");
/// A 16 MiB device (128 blocks of 64 x 2 KiB pages) at 25% over-provisioning: 12.8 MiB exported.
const SMALL: &[&str] = &["--device", "small", "--blocks", "128", "--op", "25"];

/// Fails (never skips) when a tool the tests need is missing.
fn require(tools: &[&str]) {
    for tool in tools {
        let found = std::env::var_os("PATH")
            .is_some_and(|paths| std::env::split_paths(&paths).any(|d| d.join(tool).is_file()));
        assert!(
            found,
            "`{tool}` is not installed: run `bash scripts/setup.sh` (it installs qemu-utils, dosfstools \
             and mtools) before the tests"
        );
    }
}

fn test_dir(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("nbd-{name}"));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// `ftl-sim serve` on `image`, listening on a free loopback port, its standard output piped.
fn spawn(image: &Path, extra: &[&str], stderr: Stdio) -> Child {
    Command::new(SERVER)
        .args(["serve", "--listen", "127.0.0.1:0", "--image"])
        .arg(image)
        .args(extra)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(stderr)
        .spawn()
        .expect("start ftl-sim serve")
}

/// A running `ftl-sim serve`.
struct Server {
    child: Child,
    _stdout: BufReader<ChildStdout>,
    port: u16,
    size: u64,
    page: u64,
    banner: String,
    stderr: PathBuf,
}

impl Server {
    fn start(image: &Path, extra: &[&str]) -> Server {
        let stderr = image.with_extension("stderr");
        let err_file = std::fs::OpenOptions::new().create(true).append(true).open(&stderr).unwrap();
        let mut child = spawn(image, extra, err_file.into());
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let (tx, rx) = mpsc::channel();
        let reader = std::thread::spawn(move || {
            let mut line = String::new();
            let n = stdout.read_line(&mut line).unwrap_or(0);
            tx.send((n, line)).ok();
            stdout
        });
        let (n, banner) = rx
            .recv_timeout(Duration::from_secs(60))
            .expect("the server did not print its address within 60 s");
        let stdout = reader.join().unwrap();
        if n == 0 {
            let _ = child.wait();
            panic!(
                "the server exited before listening: {}",
                std::fs::read_to_string(&stderr).unwrap_or_default()
            );
        }
        // "ftl-sim serve: listening on 127.0.0.1:PORT, export 'ftl': SIZE bytes (N pages of P B), ..."
        let field = |after: &str, until: char| -> u64 {
            let at = banner.find(after).unwrap_or_else(|| panic!("no '{after}' in {banner}")) + after.len();
            banner[at..].split(until).next().unwrap().trim().parse().unwrap()
        };
        let port = field("127.0.0.1:", ',') as u16;
        let size = field("'ftl': ", ' ');
        let page = field("pages of ", ' ');
        Server { child, _stdout: stdout, port, size, page, banner, stderr }
    }

    fn url(&self) -> String {
        format!("nbd://127.0.0.1:{}", self.port)
    }

    /// `kill -9`.
    fn kill(mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }

    fn alive(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn run(cmd: &mut Command) -> Output {
    let out = cmd.output().expect("run a client tool");
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Runs qemu-io commands on the export; fails on any error or pattern mismatch.
fn qemu_io(url: &str, cmds: &[String]) -> String {
    let mut c = Command::new("qemu-io");
    c.args(["-f", "raw", url]);
    for cmd in cmds {
        c.arg("-c").arg(cmd);
    }
    let out = run(&mut c);
    let text = String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    for bad in ["Pattern verification failed", "error", "failed", "Error"] {
        assert!(!text.contains(bad), "qemu-io reported '{bad}':\n{text}");
    }
    text
}

/// The export read back whole through qemu-img.
fn read_export(server: &Server, dir: &Path) -> Vec<u8> {
    let out = dir.join("readback.raw");
    let _ = std::fs::remove_file(&out);
    run(Command::new("qemu-img").args(["convert", "-f", "raw", "-O", "raw", &server.url()]).arg(&out));
    let bytes = std::fs::read(&out).unwrap();
    assert_eq!(bytes.len() as u64, server.size);
    bytes
}

fn pattern_of(chunk: u64) -> u8 {
    (chunk % 250) as u8 + 1
}

#[test]
fn qemu_io_patterns_overlaps_discards_flushes_and_restart() {
    require(&["qemu-io", "qemu-img"]);
    let dir = test_dir("qemu-io");
    let image = dir.join("flash.img");
    let server = Server::start(&image, SMALL);
    assert!(server.banner.contains("created and formatted"), "{}", server.banner);
    let size = server.size;
    assert_eq!(size % server.page, 0);
    const MIB: u64 = 1 << 20;
    let chunks: Vec<(u64, u64)> =
        (0..size.div_ceil(MIB)).map(|i| (i * MIB, MIB.min(size - i * MIB))).collect();

    // Patterns over the whole device, then read back with verification.
    let mut cmds: Vec<String> =
        chunks.iter().map(|&(off, len)| format!("write -P {} {off} {len}", pattern_of(off / MIB))).collect();
    cmds.push("flush".into());
    cmds.extend(chunks.iter().map(|&(off, len)| format!("read -P {} {off} {len}", pattern_of(off / MIB))));
    let out = qemu_io(&server.url(), &cmds);
    assert_eq!(out.matches("read ").count(), chunks.len());

    // Overlapping, unaligned writes (read-modify-write in the server), discards, flushes.
    let p0 = pattern_of(0);
    let tail = size - 1;
    let out = qemu_io(
        &server.url(),
        &[
            "write -P 0xa1 1000 10000".into(),
            "write -P 0xb2 5000 20000".into(),
            "write -P 0xc3 4097 3".into(),
            "flush".into(),
            format!("read -P {p0} 0 1000"),
            "read -P 0xa1 1000 3097".into(),
            "read -P 0xc3 4097 3".into(),
            "read -P 0xa1 4100 900".into(),
            "read -P 0xb2 5000 20000".into(),
            format!("read -P {p0} 25000 {}", MIB - 25000),
            // Aligned discard: the pages read as zeros.
            "discard 2M 1M".into(),
            "read -P 0 2M 1M".into(),
            // Unaligned discard: only whole pages inside go; the neighbours stay intact.
            "discard 5243000 100000".into(),
            format!("read -P {} 4M 1048576", pattern_of(4)),
            format!("read -P {} 5242880 120", pattern_of(5)),
            format!("read -P 0 5244928 {}", 5343000 / 2048 * 2048 - 5244928),
            format!("read -P {} 5343000 100000", pattern_of(5)),
            "flush".into(),
            // The last byte, and overwrites of a region many times (GC churn on a small range).
            format!("write -P 0xcc {tail} 1"),
            format!("read -P 0xcc {tail} 1"),
            "write -P 0x5a 8M 512k".into(),
            "write -P 0x5b 8M 512k".into(),
            "write -P 0x5c 8M 512k".into(),
            "write -P 0x5d 8388100 1000".into(),
            "flush".into(),
            "read -P 0x5d 8388100 1000".into(),
            "read -P 0x5c 8389100 523796".into(),
            format!("read -P {} 8912896 512k", pattern_of(8)),
        ],
    );
    assert!(out.contains("discard 1048576/1048576"), "{out}");

    // kill -9 after the flushes, restart on the same image: everything reads back.
    let expected = |bytes: &mut Vec<u8>| {
        for &(off, len) in &chunks {
            bytes[off as usize..(off + len) as usize].fill(pattern_of(off / MIB));
        }
        bytes[1000..11000].fill(0xa1);
        bytes[5000..25000].fill(0xb2);
        bytes[4097..4100].fill(0xc3);
        bytes[2 << 20..3 << 20].fill(0);
        bytes[5244928..5343000 / 2048 * 2048].fill(0);
        bytes[tail as usize] = 0xcc;
        bytes[8 << 20..(8 << 20) + (512 << 10)].fill(0x5c);
        bytes[8388100..8389100].fill(0x5d);
    };
    let mut want = vec![0u8; size as usize];
    expected(&mut want);
    assert!(read_export(&server, &dir) == want, "content before restart");
    server.kill();
    let server = Server::start(&image, SMALL);
    assert!(server.banner.contains("mounted"), "{}", server.banner);
    assert_eq!(server.size, size);
    assert!(read_export(&server, &dir) == want, "content after kill -9 and restart");
    // And it keeps working.
    qemu_io(&server.url(), &["write -P 0x77 0 64k".into(), "read -P 0x77 0 64k".into()]);
}

#[test]
fn qemu_img_convert_and_compare() {
    require(&["qemu-img"]);
    let dir = test_dir("qemu-img");
    let image = dir.join("flash.img");
    let server = Server::start(&image, SMALL);
    // An 8 MiB raw image: pseudo-random data with zero stretches and unaligned boundaries.
    let mut src = vec![0u8; 8 << 20];
    let mut x = 0x2545_f491_4f6c_dd1du64;
    for (i, b) in src.iter_mut().enumerate() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let zero = (i / 300_000) % 4 == 1;
        *b = if zero { 0 } else { x as u8 };
    }
    let src_path = dir.join("source.raw");
    std::fs::write(&src_path, &src).unwrap();
    run(Command::new("qemu-img")
        .args(["convert", "-n", "-f", "raw", "-O", "raw"])
        .arg(&src_path)
        .arg(server.url()));
    // compare treats the larger export's extra bytes as needing to be zero: they are (never
    // written).
    let out = run(Command::new("qemu-img")
        .args(["compare", "-f", "raw", "-F", "raw"])
        .arg(&src_path)
        .arg(server.url()));
    assert!(String::from_utf8_lossy(&out.stdout).contains("Images are identical"));
    let back = read_export(&server, &dir);
    assert!(back[..src.len()] == src[..]);
    assert!(back[src.len()..].iter().all(|&b| b == 0));
    // qemu-img flushed and disconnected: the data survives kill -9 and a restart.
    server.kill();
    let server = Server::start(&image, SMALL);
    let out = run(Command::new("qemu-img")
        .args(["compare", "-f", "raw", "-F", "raw"])
        .arg(&src_path)
        .arg(server.url()));
    assert!(String::from_utf8_lossy(&out.stdout).contains("Images are identical"));
    // A differing byte is found.
    let mut other = src.clone();
    other[5_000_001] ^= 0x40;
    std::fs::write(&src_path, &other).unwrap();
    let out = Command::new("qemu-img")
        .args(["compare", "-f", "raw", "-F", "raw"])
        .arg(&src_path)
        .arg(server.url())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    // (reported at the start of its 512-byte sector)
    let at = format!("mismatch at offset {}", 5_000_001 / 512 * 512);
    assert!(String::from_utf8_lossy(&out.stdout).contains(&at), "{out:?}");
}

/// IOPS of one `qemu-img bench` run.
fn bench(server: &Server, write: bool, depth: u32, count: u64, flush_every: Option<u32>) -> f64 {
    let mut c = Command::new("qemu-img");
    c.args(["bench", "-f", "raw", "-s", "4096"])
        .arg("-c")
        .arg(count.to_string())
        .arg("-d")
        .arg(depth.to_string());
    if write {
        c.arg("-w");
    }
    if let Some(n) = flush_every {
        c.arg(format!("--flush-interval={n}"));
    }
    let out = run(c.arg(server.url()));
    let text = String::from_utf8_lossy(&out.stdout);
    let secs: f64 = text
        .split("Run completed in ")
        .nth(1)
        .and_then(|s| s.split(' ').next())
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no run time in {text}"));
    count as f64 / secs.max(1e-6)
}

#[test]
fn qemu_img_bench_reads_and_writes() {
    require(&["qemu-img"]);
    let dir = test_dir("bench");
    // The `anchor` preset (the default): 1024 blocks of 64 x 2 KiB, 7% over-provisioning (119.6
    // MiB exported).
    let server = Server::start(&dir.join("flash.img"), &["--device", "anchor"]);
    // qemu-img bench walks the device sequentially in 4 KiB requests and does not wrap. 16000
    // requests write 62.5 MiB: the four write runs stay below the 270 MiB of log that would
    // trigger a compaction (a rewrite of the 135 MiB image, reported on the server's stderr), so
    // the figures are the per-request cost.
    let count = (server.size / 4096).min(16_000);
    // Fill the range once first, so every measured write is an overwrite (GC at work) and every
    // read finds data on the NAND.
    bench(&server, true, 16, count, None);
    let mut rows = Vec::new();
    for (write, depth, flush) in
        [(true, 1, None), (true, 16, None), (false, 1, None), (false, 16, None), (true, 16, Some(64))]
    {
        let iops = bench(&server, write, depth, count, flush);
        assert!(iops > 100.0, "{iops} IOPS");
        rows.push(format!(
            "| {} | {depth} | {} | {count} | {iops:.0} |",
            if write { "write" } else { "read" },
            flush.map_or("-".to_string(), |n| format!("every {n}")),
        ));
    }
    let table = format!(
        "| op (4 KiB, sequential) | queue depth | flush | requests | IOPS |\n|---|---|---|---|---|\n{}\n",
        rows.join("\n")
    );
    println!("qemu-img bench through ftl-sim serve ({}):\n{table}", server.url());
    std::fs::write(Path::new(env!("CARGO_TARGET_TMPDIR")).join("nbd-bench.md"), &table).unwrap();
}

fn file_len(p: &Path) -> u64 {
    std::fs::metadata(p).map_or(0, |m| m.len())
}

#[test]
fn kill_9_during_unflushed_writes_keeps_flushed_data() {
    require(&["qemu-io", "qemu-img"]);
    let dir = test_dir("crash");
    let image = dir.join("flash.img");
    let log = dir.join("flash.img.log");
    // Spill the NAND log every 64 KiB, so part of the unflushed burst reaches the image: the
    // restarted server then mounts a state cut in the middle of the burst, like a power cut.
    let opts = [SMALL, &["--spill-bytes", "65536"]].concat();
    let server = Server::start(&image, &opts);
    let (size, page) = (server.size, server.page as usize);
    const MIB: u64 = 1 << 20;
    // Old content everywhere, flushed.
    let mut cmds: Vec<String> = (0..size.div_ceil(MIB))
        .map(|i| format!("write -P 0x11 {} {}", i * MIB, MIB.min(size - i * MIB)))
        .collect();
    cmds.push("flush".into());
    qemu_io(&server.url(), &cmds);
    // A newer flushed region.
    qemu_io(&server.url(), &["write -P 0x33 0 1M".into(), "flush".into()]);
    let flushed_log = file_len(&log);
    // The burst: 64 KiB writes of 0x22 over the rest, four passes, never flushed.
    let mut burst = Command::new("qemu-io");
    burst.args(["-f", "raw", &server.url()]);
    for _ in 0..4 {
        let mut off = MIB;
        while off < size {
            let len = (64 << 10).min(size - off);
            burst.arg("-c").arg(format!("write -P 0x22 {off} {len}"));
            off += len;
        }
    }
    let mut burst = burst.stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
    // Kill the server once a few MiB of the burst are in the log (the burst is not over yet:
    // four passes log about 45 MiB).
    let started = Instant::now();
    while file_len(&log) < flushed_log + 3 * MIB {
        assert!(started.elapsed() < Duration::from_secs(60), "the burst did not reach the log");
        std::thread::sleep(Duration::from_millis(2));
    }
    server.kill();
    let _ = burst.kill();
    let _ = burst.wait();

    let server = Server::start(&image, &opts);
    assert!(server.banner.contains("mounted"), "{}", server.banner);
    let bytes = read_export(&server, &dir);
    assert!(bytes[..MIB as usize].iter().all(|&b| b == 0x33), "the flushed region changed");
    let (mut old, mut new) = (0, 0);
    for (i, p) in bytes[MIB as usize..].chunks(page).enumerate() {
        if p.iter().all(|&b| b == 0x11) {
            old += 1;
        } else if p.iter().all(|&b| b == 0x22) {
            new += 1;
        } else {
            panic!("page {} is neither old nor new content", MIB as usize / page + i);
        }
    }
    println!("after kill -9: {new} pages new, {old} old");
    assert!(new > 0, "part of the burst reached the image before the kill");
    // The restarted server takes writes and flushes as usual.
    qemu_io(&server.url(), &["write -P 0x44 4M 1M".into(), "flush".into(), "read -P 0x44 4M 1M".into()]);
}

/// A raw NBD client for the inputs no real client sends.
struct Raw {
    s: TcpStream,
}

impl Raw {
    fn connect(port: u16) -> Raw {
        let s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        let mut r = Raw { s };
        let mut hello = [0u8; 18];
        r.s.read_exact(&mut hello).unwrap();
        assert_eq!(&hello[..16], b"NBDMAGICIHAVEOPT");
        assert_eq!(u16::from_be_bytes([hello[16], hello[17]]), 3);
        r
    }

    fn send(&mut self, b: &[u8]) {
        self.s.write_all(b).unwrap();
    }

    fn option(&mut self, option: u32, data: &[u8]) {
        let mut m = b"IHAVEOPT".to_vec();
        m.extend_from_slice(&option.to_be_bytes());
        m.extend_from_slice(&(data.len() as u32).to_be_bytes());
        m.extend_from_slice(data);
        self.send(&m);
    }

    /// (option, reply type, data).
    fn option_reply(&mut self) -> (u32, u32, Vec<u8>) {
        let mut h = [0u8; 20];
        self.s.read_exact(&mut h).unwrap();
        assert_eq!(u64::from_be_bytes(h[..8].try_into().unwrap()), 0x0003_e889_0455_65a9);
        let len = u32::from_be_bytes(h[16..20].try_into().unwrap()) as usize;
        let mut d = vec![0u8; len];
        self.s.read_exact(&mut d).unwrap();
        (
            u32::from_be_bytes(h[8..12].try_into().unwrap()),
            u32::from_be_bytes(h[12..16].try_into().unwrap()),
            d,
        )
    }

    /// NBD_OPT_GO: Ok(size) or Err(error reply type).
    fn go(&mut self, name: &str) -> Result<u64, u32> {
        let mut d = (name.len() as u32).to_be_bytes().to_vec();
        d.extend_from_slice(name.as_bytes());
        d.extend_from_slice(&0u16.to_be_bytes());
        self.option(7, &d);
        let mut size = None;
        loop {
            let (opt, kind, data) = self.option_reply();
            assert_eq!(opt, 7);
            match kind {
                3 if data[..2] == [0, 0] => size = Some(u64::from_be_bytes(data[2..10].try_into().unwrap())),
                3 => {}
                1 => return Ok(size.expect("NBD_INFO_EXPORT before the ACK")),
                e => return Err(e),
            }
        }
    }

    /// Connected and in transmission.
    fn open(port: u16) -> (Raw, u64) {
        let mut r = Raw::connect(port);
        r.send(&3u32.to_be_bytes());
        let size = r.go("").unwrap();
        (r, size)
    }

    fn request(&mut self, kind: u16, flags: u16, cookie: u64, offset: u64, len: u32, payload: &[u8]) {
        let mut m = 0x2560_9513u32.to_be_bytes().to_vec();
        m.extend_from_slice(&flags.to_be_bytes());
        m.extend_from_slice(&kind.to_be_bytes());
        m.extend_from_slice(&cookie.to_be_bytes());
        m.extend_from_slice(&offset.to_be_bytes());
        m.extend_from_slice(&len.to_be_bytes());
        m.extend_from_slice(payload);
        self.send(&m);
    }

    /// (error, data): data of `len` bytes follows a successful reply.
    fn reply(&mut self, cookie: u64, len: usize) -> (u32, Vec<u8>) {
        let mut h = [0u8; 16];
        self.s.read_exact(&mut h).unwrap();
        assert_eq!(u32::from_be_bytes(h[..4].try_into().unwrap()), 0x6744_6698);
        assert_eq!(u64::from_be_bytes(h[8..].try_into().unwrap()), cookie);
        let err = u32::from_be_bytes(h[4..8].try_into().unwrap());
        let mut d = vec![0u8; if err == 0 { len } else { 0 }];
        self.s.read_exact(&mut d).unwrap();
        (err, d)
    }

    /// Whether the server closed the connection (EOF or reset before the timeout).
    fn closed_by_server(&mut self) -> bool {
        let mut b = [0u8; 1];
        match self.s.read(&mut b) {
            Ok(0) => true,
            Ok(_) => false,
            Err(e) => matches!(
                e.kind(),
                std::io::ErrorKind::ConnectionReset | std::io::ErrorKind::ConnectionAborted
            ),
        }
    }

    fn write_read(&mut self, offset: u64, data: &[u8]) {
        self.request(1, 0, 100, offset, data.len() as u32, data);
        assert_eq!(self.reply(100, 0).0, 0);
        self.request(0, 0, 101, offset, data.len() as u32, &[]);
        let (err, back) = self.reply(101, data.len());
        assert_eq!((err, &back[..]), (0, data));
    }
}

const EINVAL: u32 = 22;
const ENOSPC: u32 = 28;

#[test]
fn bad_clients_get_errors_and_the_server_keeps_serving() {
    require(&["qemu-io"]);
    let dir = test_dir("bad-clients");
    let mut server = Server::start(&dir.join("flash.img"), SMALL);
    let (port, size) = (server.port, server.size);
    qemu_io(&server.url(), &["write -P 0x5a 0 1M".into(), "flush".into()]);
    let healthy = |server: &mut Server| {
        assert!(server.alive(), "the server died");
        let (mut c, s) = Raw::open(port);
        assert_eq!(s, size);
        c.write_read(3 << 20, b"still serving");
        c.request(2, 0, 9, 0, 0, &[]);
        assert!(c.closed_by_server());
    };

    // Handshake: garbage instead of client flags, unknown flags, a bad option magic, an HTTP
    // request, a client that connects and leaves.
    for junk in [&b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"[..], &0x8000_0001u32.to_be_bytes()] {
        let mut c = Raw::connect(port);
        c.send(junk);
        assert!(c.closed_by_server());
    }
    let mut c = Raw::connect(port);
    c.send(&3u32.to_be_bytes());
    c.send(b"NOTAMAGIC-------");
    assert!(c.closed_by_server());
    drop(Raw::connect(port));
    let s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.shutdown(Shutdown::Both).unwrap();
    healthy(&mut server);

    // Options: unknown option, unknown export, list, info, export-name, abort.
    let mut c = Raw::connect(port);
    c.send(&3u32.to_be_bytes());
    c.option(0x77, b"what");
    assert_eq!(c.option_reply().1, 0x8000_0001);
    c.option(5, &[]); // STARTTLS
    assert_eq!(c.option_reply().1, 0x8000_0001);
    assert_eq!(c.go("nonexistent"), Err(0x8000_0006));
    c.option(7, &[0, 0, 0, 9, b'f']); // malformed GO
    assert_eq!(c.option_reply().1, 0x8000_0003);
    c.option(3, &[]);
    let (_, kind, data) = c.option_reply();
    assert_eq!((kind, &data[4..]), (2, &b"ftl"[..]));
    assert_eq!(c.option_reply().1, 1);
    c.option(2, &[]);
    assert_eq!(c.option_reply().1, 1);
    assert!(c.closed_by_server());
    let mut c = Raw::connect(port);
    c.send(&3u32.to_be_bytes());
    c.option(1, b"ftl");
    let mut h = [0u8; 10];
    c.s.read_exact(&mut h).unwrap();
    assert_eq!(u64::from_be_bytes(h[..8].try_into().unwrap()), size);
    c.write_read(3 << 20, b"export name path");
    drop(c);
    healthy(&mut server);

    // Transmission: errors that keep the connection.
    let (mut c, _) = Raw::open(port);
    c.request(0, 0, 1, 0, 64 << 20, &[]); // oversized read
    assert_eq!(c.reply(1, 0).0, EINVAL);
    c.request(0, 0, 2, size, 512, &[]); // read past the end
    assert_eq!(c.reply(2, 0).0, EINVAL);
    c.request(0, 0, 3, u64::MAX - 10, 512, &[]); // offset + length overflows
    assert_eq!(c.reply(3, 0).0, EINVAL);
    c.request(1, 0, 4, size - 100, 4096, &[0xEE; 4096]); // write past the end
    assert_eq!(c.reply(4, 0).0, ENOSPC);
    c.request(4, 0, 5, size - 2048, 4096, &[]); // trim past the end
    assert_eq!(c.reply(5, 0).0, EINVAL);
    c.request(0x55, 0, 6, 0, 0, &[]); // unknown command
    assert_eq!(c.reply(6, 0).0, EINVAL);
    c.request(6, 0, 7, 0, 4096, &[]); // WRITE_ZEROES: not advertised
    assert_eq!(c.reply(7, 0).0, EINVAL);
    c.request(0, 1 << 2, 8, 0, 512, &[]); // DF flag without structured replies
    assert_eq!(c.reply(8, 0).0, EINVAL);
    c.request(1, 0x80, 9, 0, 16, &[0xEE; 16]); // unknown flag on a write: payload consumed
    assert_eq!(c.reply(9, 0).0, EINVAL);
    c.request(1, 1, 10, size - 16, 16, &[0xAB; 16]); // FUA write at the very end
    assert_eq!(c.reply(10, 0).0, 0);
    c.write_read(3 << 20, b"same connection");
    // Errors that close it: a wrong request magic, an oversized write.
    c.send(&[0xde, 0xad, 0xbe, 0xef]);
    c.send(&[0; 24]);
    assert!(c.closed_by_server());
    let (mut c, _) = Raw::open(port);
    c.request(1, 0, 11, 0, 64 << 20, &[]);
    assert!(c.closed_by_server());
    healthy(&mut server);

    // Hang-ups in the middle of a request: a half header, a write with half its payload. The
    // partial write must not reach the device.
    let (mut c, _) = Raw::open(port);
    c.send(&0x2560_9513u32.to_be_bytes()[..3]);
    drop(c);
    let (mut c, _) = Raw::open(port);
    let mut m = 0x2560_9513u32.to_be_bytes().to_vec();
    m.extend_from_slice(&[0, 0, 0, 1]);
    m.extend_from_slice(&12u64.to_be_bytes());
    m.extend_from_slice(&0u64.to_be_bytes());
    m.extend_from_slice(&4096u32.to_be_bytes());
    m.extend_from_slice(&[0xEE; 1000]);
    c.send(&m);
    drop(c);
    // A client stalled mid-request blocks nobody.
    let (mut stalled, _) = Raw::open(port);
    stalled.send(&0x2560_9513u32.to_be_bytes());
    let started = Instant::now();
    qemu_io(&server.url(), &["read -P 0x5a 0 1M".into(), "write -P 0x5b 1M 64k".into(), "flush".into()]);
    assert!(started.elapsed() < Duration::from_secs(20));
    drop(stalled);
    healthy(&mut server);

    // The image holds what was written and nothing of the rejected requests.
    qemu_io(
        &server.url(),
        &[
            "read -P 0x5a 0 1M".into(),
            "read -P 0x5b 1M 64k".into(),
            format!("read -P 0 {} {}", size - 4096, 4096 - 16),
            format!("read -P 0xab {} 16", size - 16),
        ],
    );
    assert!(server.alive());
    let log = std::fs::read_to_string(&server.stderr).unwrap();
    for want in ["protocol violation", "hung up in the middle"] {
        assert!(log.contains(want), "no '{want}' in the server log:\n{log}");
    }
}

#[test]
fn refuses_remote_addresses_and_unknown_features() {
    let dir = test_dir("refusals");
    let image = dir.join("flash.img");
    // Checked before anything is bound or created.
    for (args, want) in [
        (vec!["--listen", "0.0.0.0:10809"], "--allow-remote"),
        (vec!["--listen", "192.0.2.1:10809"], "--allow-remote"),
        (vec!["--listen", "127.0.0.1:0", "--features", "wom"], "not implemented"),
        (vec!["--listen", "127.0.0.1:0", "--features", "nonsense"], "unknown feature"),
        (vec!["--listen", "127.0.0.1:0", "--device", "small", "--blocks", "8"], "geometry"),
    ] {
        let out = Command::new(SERVER).arg("serve").arg("--image").arg(&image).args(&args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && err.contains(want), "{args:?}: {err}");
        assert!(!image.exists(), "{args:?} created the image");
    }
    // A corrupt image is refused, not reformatted.
    std::fs::write(&image, b"not a NAND image").unwrap();
    let out = Command::new(SERVER)
        .args(["serve", "--listen", "127.0.0.1:0", "--image"])
        .arg(&image)
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("magic"), "{out:?}");
    assert_eq!(std::fs::read(&image).unwrap(), b"not a NAND image");
}

/// Starts the server expecting it to refuse: its exit must come within 60 s, non-zero; returns
/// its standard error.
fn start_refused(image: &Path, extra: &[&str]) -> String {
    let mut child = spawn(image, extra, Stdio::piped());
    let started = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!("the server started instead of refusing: {}", String::from_utf8_lossy(&out.stdout));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    assert!(!out.status.success());
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn a_damaged_log_is_refused_not_silently_rolled_back() {
    require(&["qemu-io"]);
    let dir = test_dir("damaged-log");
    let image = dir.join("flash.img");
    let log = dir.join("flash.img.log");
    // Three flushed writes, each its own appended batch (or batches) in the log.
    let server = Server::start(&image, SMALL);
    let mut ends = vec![file_len(&log)];
    for (i, p) in [0x41, 0x42, 0x43].into_iter().enumerate() {
        qemu_io(&server.url(), &[format!("write -P {p} {} 64k", i << 20), "flush".into()]);
        ends.push(file_len(&log));
    }
    server.kill();
    assert!(ends.windows(2).all(|w| w[1] > w[0] + 100), "every flush appends: {ends:?}");
    let good = std::fs::read(&log).unwrap();

    // A flipped bit in the second write's batch, with the third's valid after it: refused, with
    // what would be lost, and the files left as they were.
    let mut bad = good.clone();
    bad[ends[1] as usize + 40] ^= 0x04;
    std::fs::write(&log, &bad).unwrap();
    let err = start_refused(&image, &[]);
    for want in ["not a torn append", "NAND operations", "bytes of the log", "--accept-log-rollback"] {
        assert!(err.contains(want), "no '{want}' in: {err}");
    }
    assert_eq!(std::fs::read(&log).unwrap(), bad);
    // Accepted explicitly: the state before the damage, the damaged log kept.
    let server = Server::start(&image, &["--accept-log-rollback"]);
    qemu_io(
        &server.url(),
        &["read -P 0x41 0 64k".into(), "read -P 0 1M 64k".into(), "read -P 0 2M 64k".into()],
    );
    assert_eq!(std::fs::read(dir.join("flash.img.log.damaged")).unwrap(), bad);
    let warned = std::fs::read_to_string(&server.stderr).unwrap();
    assert!(warned.contains("serving the older state"), "{warned}");
    server.kill();

    // A damaged header and a missing log: refused too (no "assuming N% over-provisioning").
    let snapshot_log = std::fs::read(&log).unwrap();
    let mut header = snapshot_log.clone();
    header[3] ^= 0x01;
    std::fs::write(&log, &header).unwrap();
    let err = start_refused(&image, &[]);
    assert!(err.contains("damaged header") && err.contains("--accept-log-rollback"), "{err}");
    std::fs::remove_file(&log).unwrap();
    let err = start_refused(&image, &[]);
    assert!(err.contains("missing") && err.contains("--accept-log-rollback"), "{err}");

    // A torn tail (the last append cut short) is still accepted: everything before it is served.
    std::fs::write(&log, &snapshot_log).unwrap();
    let server = Server::start(&image, &[]);
    let base = file_len(&log);
    qemu_io(&server.url(), &["write -P 0x51 0 64k".into(), "flush".into()]);
    let mid = file_len(&log);
    qemu_io(&server.url(), &["write -P 0x52 1M 64k".into(), "flush".into()]);
    server.kill();
    let full = std::fs::read(&log).unwrap();
    assert!(base < mid && mid < full.len() as u64);
    std::fs::write(&log, &full[..full.len() - 7]).unwrap();
    let server = Server::start(&image, &[]);
    qemu_io(&server.url(), &["read -P 0x51 0 64k".into(), "read -P 0 1M 64k".into()]);
    let said = std::fs::read_to_string(&server.stderr).unwrap();
    assert!(said.contains("incomplete last batch"), "{said}");
}
