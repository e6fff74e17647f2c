//! # Filebench-like workloads (`ftl-sim run --workload fileserver|webserver|varmail|oltp`)
//!
//! The block requests that Filebench's four server personalities send below the file system,
//! the FlexECC paper's traffic (section 4.1: Filebench on a Flashcache hybrid, 30 GB cache over a
//! 360 GB working set). Each personality follows its Filebench 1.5 workload file
//! (github.com/filebench/filebench, `workloads/*.f`): its flowops, file sizes and I/O sizes; its
//! file set is scaled so that the files' mean total size is the working set the caller gives
//! (the paper scaled its file sets to 360 GB):
//!
//! | personality | Filebench file | files (mean size) | one thread loop, as block requests |
//! |---|---|---|---|
//! | `fileserver` | `fileserver.f` | 128 KiB | write a new whole file (createfile + writewholefile), append up to 16 KiB to a random file, read a random whole file, delete a random file |
//! | `webserver` | `webserver.f` | 16 KiB | read 10 random whole files, append up to 16 KiB to the one log file |
//! | `varmail` | `varmail.f` | 16 KiB | delete a random file; create one and append up to 16 KiB (fsync); read a random whole file and append up to 16 KiB to it (fsync); read a random whole file |
//! | `oltp` | `oltp.f` | 10 data files + a log | random 2 KiB reads of the data files (shadows); per 1000 reads, 100 random 2 KiB writes (database writers: `semblock value=1000`, `iters=100`); per 3200 reads, one 256 KiB log write at a random offset (log writer: `semblock value=3200`) |
//!
//! Sizes: file sizes are gamma distributed with the personality's mean and shape 1.5
//! (Filebench's `filesizegamma` default, 1500 / 1000); `appendfilerand` appends a uniform 1 to
//! `iosize` bytes at the end of the file (so a partial last page is rewritten);
//! `readwholefile` / `writewholefile` move the file in requests of at most `iosize` (1 MiB).
//! Files are contiguous extents, each with room for 4 mean sizes (a file never grows past its
//! extent: appends then rewrite its last pages); the log files of `webserver` and `oltp` have an
//! extent of 1/16 resp. 1/100 of the working set (at least 64 pages), appends wrapping round.
//! `oltp`'s data files fill the working set; its 2 KiB requests touch one page each.
//!
//! Not modelled: the file system's metadata and journal, the page cache above Flashcache (every
//! flowop reaches the cache device; `oltp` runs `directio` anyway), thread interleaving (the
//! loops run one after another; the mix, sizes and locality are the personality's).
//!
//! Without a cache in front (runs without `--features flex-ecc`), `ftl-sim` sizes the working set
//! so that these extents fit the device's logical space ([`working_set_within`]).
//!
//! Times: requests arrive as a Poisson stream with the given mean gap (the rate of the system the
//! paper recorded its traces on); the simulator's `--ioscale` then slows them down, as the paper
//! does. The stream ends after `writes` write requests. Deterministic in the spec.

use std::collections::VecDeque;
use std::str::FromStr;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::trace::{Op, Request};

/// A Filebench personality.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Personality {
    /// `fileserver.f`.
    FileServer,
    /// `webserver.f`.
    WebServer,
    /// `varmail.f` (the paper's mail server).
    VarMail,
    /// `oltp.f`.
    Oltp,
}

/// The CLI names.
pub const PERSONALITIES: [&str; 4] = ["fileserver", "webserver", "varmail", "oltp"];

impl FromStr for Personality {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "fileserver" => Ok(Personality::FileServer),
            "webserver" => Ok(Personality::WebServer),
            "varmail" | "mailserver" => Ok(Personality::VarMail),
            "oltp" => Ok(Personality::Oltp),
            other => Err(format!(
                "unknown Filebench personality '{other}' (expected {})",
                PERSONALITIES.join(", ")
            )),
        }
    }
}

impl Personality {
    /// Mean file size in bytes (Filebench's `meanfilesize` / `filesize`).
    pub fn mean_file_bytes(self) -> u64 {
        match self {
            Personality::FileServer => 128 << 10,
            Personality::WebServer | Personality::VarMail => 16 << 10,
            Personality::Oltp => 10 << 20,
        }
    }
}

/// A Filebench-like workload.
#[derive(Clone, Debug, PartialEq)]
pub struct FilebenchSpec {
    /// The personality.
    pub personality: Personality,
    /// Write requests before the stream ends.
    pub writes: u64,
    /// Mean gap between requests, ns (exponential), before any ioscale.
    pub mean_gap_ns: f64,
    /// Seed.
    pub seed: u64,
}

const IOSIZE: u64 = 1 << 20;
const APPEND: u64 = 16 << 10;
const GAMMA_SHAPE: f64 = 1.5;

/// The request stream (an iterator).
pub struct Filebench {
    spec: FilebenchSpec,
    page: u64,
    rng: ChaCha8Rng,
    /// Per file: size in bytes (`None`: deleted).
    files: Vec<Option<u64>>,
    /// Extent of each file, pages.
    extent: u64,
    /// The log file: first page, extent in pages, size in bytes.
    log: (u64, u64, u64),
    queue: VecDeque<(Op, u64, u64)>,
    writes_left: u64,
    time: f64,
    /// OLTP: reads since the last database-writer batch and log write.
    oltp_reads: (u64, u64),
}

/// The stream of `spec` over a working set of `working_set_pages` pages of `page_bytes`.
pub fn generate(spec: &FilebenchSpec, working_set_pages: u64, page_bytes: u64) -> Result<Filebench, String> {
    if page_bytes == 0 || working_set_pages < 64 {
        return Err(format!(
            "a Filebench workload needs a working set of at least 64 pages, not {working_set_pages}"
        ));
    }
    if !(spec.mean_gap_ns.is_finite() && spec.mean_gap_ns >= 0.0) {
        return Err(format!("mean gap {} ns is not a non-negative number", spec.mean_gap_ns));
    }
    let p = spec.personality;
    let (nfiles, extent, log_pages) = layout(p, working_set_pages, page_bytes);
    let mut rng = ChaCha8Rng::seed_from_u64(spec.seed ^ 0xF11E_BE7C);
    let files = (0..nfiles)
        .map(|_| {
            let size = match p {
                Personality::Oltp => extent * page_bytes,
                // Filebench preallocates 80% (fileserver, varmail) or 100% (webserver) of the set.
                Personality::WebServer => gamma_size(&mut rng, p.mean_file_bytes()),
                _ if rng.random_bool(0.8) => gamma_size(&mut rng, p.mean_file_bytes()),
                _ => return None,
            };
            Some(size.min(extent * page_bytes))
        })
        .collect::<Vec<_>>();
    Ok(Filebench {
        spec: spec.clone(),
        page: page_bytes,
        rng,
        log: (nfiles * extent, log_pages, 0),
        files,
        extent,
        queue: VecDeque::new(),
        writes_left: spec.writes,
        time: 0.0,
        oltp_reads: (0, 0),
    })
}

/// Files, pages per file extent and log pages of `p` over `working_set_pages`.
fn layout(p: Personality, working_set_pages: u64, page_bytes: u64) -> (u64, u64, u64) {
    let ws_bytes = working_set_pages * page_bytes;
    let (nfiles, extent_bytes, log_pages) = match p {
        // Ten data files fill the working set; the log is 1/100 of it.
        Personality::Oltp => (10, ws_bytes / 10, (working_set_pages / 100).max(64)),
        Personality::WebServer => (
            (ws_bytes / p.mean_file_bytes()).max(1),
            4 * p.mean_file_bytes(),
            (working_set_pages / 16).max(64),
        ),
        _ => ((ws_bytes / p.mean_file_bytes()).max(1), 4 * p.mean_file_bytes(), 0),
    };
    (nfiles, extent_bytes.div_ceil(page_bytes.max(1)).max(1), log_pages)
}

/// The pages the addresses of `p` over `working_set_pages` span (file extents and log): more
/// than the working set, since each file has room to grow.
pub fn span_pages(p: Personality, working_set_pages: u64, page_bytes: u64) -> u64 {
    let (nfiles, extent, log) = layout(p, working_set_pages, page_bytes);
    nfiles * extent + log
}

/// The largest working set (at least 64 pages) of `p` whose addresses fit in `pages`; `None`
/// if even 64 pages do not.
pub fn working_set_within(p: Personality, pages: u64, page_bytes: u64) -> Option<u64> {
    let fits = |w: u64| span_pages(p, w, page_bytes) <= pages;
    if !fits(64) {
        return None;
    }
    let (mut lo, mut hi) = (64u64, pages.max(64));
    while lo < hi {
        let mid = lo + (hi - lo).div_ceil(2);
        if fits(mid) {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    Some(lo)
}

/// A gamma(shape 1.5) size with mean `mean` bytes, at least one byte (Marsaglia and Tsang's
/// method).
fn gamma_size(rng: &mut ChaCha8Rng, mean: u64) -> u64 {
    let d = GAMMA_SHAPE - 1.0 / 3.0;
    let c = 1.0 / (9.0 * d).sqrt();
    let x = loop {
        let (u1, u2): (f64, f64) = (rng.random::<f64>().max(1e-300), rng.random());
        let z = (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos();
        let v = (1.0 + c * z).powi(3);
        if v <= 0.0 {
            continue;
        }
        let u: f64 = rng.random::<f64>().max(1e-300);
        if u.ln() < 0.5 * z * z + d - d * v + d * v.ln() {
            break d * v;
        }
    };
    ((x / GAMMA_SHAPE) * mean as f64).round().max(1.0) as u64
}

impl Filebench {
    fn file_start(&self, f: usize) -> u64 {
        f as u64 * self.extent * self.page
    }

    fn random_file(&mut self, existing: bool) -> Option<usize> {
        let n = self.files.len();
        for _ in 0..64 {
            let f = self.rng.random_range(0..n);
            if self.files[f].is_some() == existing {
                return Some(f);
            }
        }
        self.files.iter().position(|s| s.is_some() == existing)
    }

    /// `size` bytes from byte `at` of the file at `base`, in requests of at most 1 MiB.
    fn whole(&mut self, op: Op, base: u64, size: u64) {
        let mut at = 0;
        while at < size {
            let len = IOSIZE.min(size - at);
            self.queue.push_back((op, base + at, len));
            at += len;
        }
    }

    /// `appendfilerand`: 1 to 16 KiB at the end of file `f` (its last pages if the extent is
    /// full).
    fn append(&mut self, f: usize) {
        let n = self.rng.random_range(1..=APPEND);
        let cap = self.extent * self.page;
        let size = self.files[f].unwrap_or(0);
        let at = if size + n > cap { cap - n.min(cap) } else { size };
        self.files[f] = Some((at + n).max(size).min(cap));
        self.queue.push_back((Op::Write, self.file_start(f) + at, n));
    }

    fn log_append(&mut self, n: u64) {
        let (first, pages, size) = self.log;
        let cap = pages * self.page;
        let at = if size + n > cap { 0 } else { size };
        self.log.2 = at + n;
        self.queue.push_back((Op::Write, first * self.page + at, n.min(cap)));
    }

    fn read_whole_random(&mut self) {
        if let Some(f) = self.random_file(true) {
            let size = self.files[f].unwrap_or(0);
            self.whole(Op::Read, self.file_start(f), size);
        }
    }

    /// One thread loop of the personality into the queue.
    fn next_loop(&mut self) {
        match self.spec.personality {
            Personality::FileServer => {
                if let Some(f) = self.random_file(false).or_else(|| self.random_file(true)) {
                    let size = gamma_size(&mut self.rng, Personality::FileServer.mean_file_bytes())
                        .min(self.extent * self.page);
                    self.files[f] = Some(size);
                    self.whole(Op::Write, self.file_start(f), size);
                }
                if let Some(f) = self.random_file(true) {
                    self.append(f);
                }
                self.read_whole_random();
                if let Some(f) = self.random_file(true) {
                    self.files[f] = None;
                }
            }
            Personality::WebServer => {
                for _ in 0..10 {
                    self.read_whole_random();
                }
                let n = self.rng.random_range(1..=APPEND);
                self.log_append(n);
            }
            Personality::VarMail => {
                if let Some(f) = self.random_file(true) {
                    self.files[f] = None;
                }
                if let Some(f) = self.random_file(false) {
                    self.files[f] = Some(0);
                    self.append(f);
                }
                if let Some(f) = self.random_file(true) {
                    let size = self.files[f].unwrap_or(0);
                    self.whole(Op::Read, self.file_start(f), size);
                    self.append(f);
                }
                self.read_whole_random();
            }
            Personality::Oltp => {
                // A shadow read of 2 KiB anywhere in the data files.
                let data = self.files.len() as u64 * self.extent * self.page;
                let at = self.rng.random_range(0..data / 2048) * 2048;
                self.queue.push_back((Op::Read, at, 2048));
                self.oltp_reads.0 += 1;
                self.oltp_reads.1 += 1;
                if self.oltp_reads.0 == 1000 {
                    self.oltp_reads.0 = 0;
                    for _ in 0..100 {
                        let at = self.rng.random_range(0..data / 2048) * 2048;
                        self.queue.push_back((Op::Write, at, 2048));
                    }
                }
                if self.oltp_reads.1 == 3200 {
                    self.oltp_reads.1 = 0;
                    let (first, pages, _) = self.log;
                    let slots = (pages * self.page / (256 << 10)).max(1);
                    let at = first * self.page + self.rng.random_range(0..slots) * (256 << 10);
                    self.queue.push_back((Op::Write, at, (256 << 10).min(pages * self.page)));
                }
            }
        }
    }
}

impl Iterator for Filebench {
    type Item = Request;
    fn next(&mut self) -> Option<Request> {
        if self.writes_left == 0 {
            return None;
        }
        let mut guard = 0;
        while self.queue.is_empty() {
            self.next_loop();
            guard += 1;
            if guard > 1000 {
                return None;
            }
        }
        let (op, offset, len) = self.queue.pop_front()?;
        if op == Op::Write {
            self.writes_left -= 1;
        }
        let u: f64 = self.rng.random();
        self.time += -self.spec.mean_gap_ns * (1.0 - u).ln();
        Some(Request { time_ns: Some(self.time as u64), op, offset, len, content: None })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stream(p: Personality, writes: u64) -> Vec<Request> {
        let spec = FilebenchSpec { personality: p, writes, mean_gap_ns: 1000.0, seed: 3 };
        generate(&spec, 40_000, 4096).unwrap().collect()
    }

    #[test]
    fn mixes_and_sizes_follow_the_workload_files() {
        // Expected from the flowops (see the module table): fileserver 1 read per 2 writes
        // (files of 128 KiB < 1 MiB: one request each), webserver 10 reads per append, varmail
        // 2 reads per 2 appends, oltp 1000 reads per 100 + 1000/3200 writes.
        for (p, want, tol) in [
            (Personality::FileServer, 1.0 / 3.0, 0.03),
            (Personality::WebServer, 10.0 / 11.0, 0.02),
            (Personality::VarMail, 0.5, 0.03),
            (Personality::Oltp, 1000.0 / 1100.3125, 0.01),
        ] {
            let reqs = stream(p, 3000);
            let reads = reqs.iter().filter(|r| r.op == Op::Read).count() as f64;
            let ratio = reads / reqs.len() as f64;
            assert!((ratio - want).abs() < tol, "{p:?}: read ratio {ratio}, want {want}");
            assert_eq!(reqs.iter().filter(|r| r.op == Op::Write).count(), 3000);
        }
        // Appends are 1..=16 KiB, uniform: mean about 8 KiB (webserver writes only log appends).
        let web = stream(Personality::WebServer, 4000);
        let w: Vec<u64> = web.iter().filter(|r| r.op == Op::Write).map(|r| r.len).collect();
        assert!(w.iter().all(|&l| (1..=APPEND).contains(&l)));
        let mean = w.iter().sum::<u64>() as f64 / w.len() as f64;
        assert!((mean - 8192.5).abs() < 300.0, "{mean}");
        // Webserver reads are whole files of gamma sizes with a 16 KiB mean.
        let r: Vec<u64> = web.iter().filter(|r| r.op == Op::Read).map(|r| r.len).collect();
        let mean = r.iter().sum::<u64>() as f64 / r.len() as f64;
        assert!((mean - 16384.0).abs() < 800.0, "{mean}");
        // OLTP: 2 KiB requests but the 256 KiB log writes.
        let o = stream(Personality::Oltp, 2000);
        assert!(o.iter().all(|r| r.len == 2048 || (r.op == Op::Write && r.len == 256 << 10)));
    }

    #[test]
    fn addresses_stay_within_the_span_and_fit_a_device() {
        for p in [Personality::FileServer, Personality::WebServer, Personality::VarMail, Personality::Oltp] {
            let w = working_set_within(p, 15_000, 4096).unwrap();
            let span = span_pages(p, w, 4096);
            assert!(span <= 15_000 && span_pages(p, w + 1, 4096) > 15_000, "{p:?}: {w} -> {span}");
            let spec = FilebenchSpec { personality: p, writes: 2000, mean_gap_ns: 0.0, seed: 1 };
            for r in generate(&spec, w, 4096).unwrap() {
                assert!(
                    r.offset + r.len <= span * 4096,
                    "{p:?}: {} + {} beyond {span} pages",
                    r.offset,
                    r.len
                );
            }
        }
        assert_eq!(working_set_within(Personality::FileServer, 10, 4096), None);
    }

    #[test]
    fn gamma_sizes_have_the_mean_and_spread() {
        let mut rng = ChaCha8Rng::seed_from_u64(9);
        let xs: Vec<f64> = (0..40_000).map(|_| gamma_size(&mut rng, 1_000_000) as f64).collect();
        let mean = xs.iter().sum::<f64>() / xs.len() as f64;
        let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / xs.len() as f64;
        // Gamma(k = 1.5): mean 1e6, coefficient of variation 1/sqrt(1.5).
        assert!((mean / 1e6 - 1.0).abs() < 0.02, "{mean}");
        assert!(((var.sqrt() / mean) - (1.0 / 1.5f64.sqrt())).abs() < 0.02);
    }

    #[test]
    fn times_scale_and_stream_is_deterministic() {
        let a = stream(Personality::VarMail, 500);
        assert_eq!(a, stream(Personality::VarMail, 500));
        let span = a.last().unwrap().time_ns.unwrap() as f64;
        // Poisson arrivals of mean 1 us.
        assert!((span / a.len() as f64 / 1000.0 - 1.0).abs() < 0.1);
        assert!(a.windows(2).all(|w| w[0].time_ns <= w[1].time_ns));
        let bad = FilebenchSpec { personality: Personality::Oltp, writes: 1, mean_gap_ns: f64::NAN, seed: 1 };
        assert!(generate(&bad, 1000, 4096).is_err());
        assert!(generate(&FilebenchSpec { mean_gap_ns: 1.0, ..bad.clone() }, 10, 4096).is_err());
        assert!("bogus".parse::<Personality>().unwrap_err().contains("fileserver"));
    }
}
