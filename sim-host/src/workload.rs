//! # Synthetic workloads (`ftl-sim run --workload ...`)
//!
//! A [`WorkloadSpec`] describes a stream of host requests over a device of `logical_pages` pages
//! of `page_bytes` bytes; [`generate`] turns it into an iterator of [`Request`]s with page-aligned
//! byte offsets and lengths, no times (`time_ns: None`: the simulator runs them closed-loop), and
//! for writes one content fingerprint per page (`content: Some(..)`); reads have `content: None`.
//!
//! ## Address patterns ([`Pattern`], `--workload`)
//! - `uniform`: every page equally likely.
//! - `zipf:ALPHA`: page popularity follows Zipf's law over ranks: the page of rank `k`
//!   (1-based) is drawn with probability `k^-ALPHA / H(N, ALPHA)`, `H` the generalized harmonic
//!   number over the `N` logical pages. Ranks are sampled exactly, in O(1) time and memory a
//!   sample, by rejection-inversion (Hörmann and Derflinger, "Rejection-inversion to generate
//!   variates from monotone discrete distributions", 1996), for any `ALPHA > 0` including the 1
//!   and 2 of the Reusable SSD paper. Ranks are placed on addresses by a fixed pseudo-random
//!   permutation of the logical pages (seeded), so hot pages are scattered over the device.
//! - `hotcold:H/C`: `H` percent of the logical pages are hot and receive `C` percent of the
//!   accesses; the other `100 - H` percent receive the other `100 - C` percent; uniform within
//!   each set. `hotcold:20/80` is the "80/20 rule": 80% of accesses go to 20% of the space. The
//!   hot set is `round(N × H / 100)` pages (at least 1, and at least 1 page stays cold), scattered
//!   by the same permutation as Zipf's ranks. `0 < H < 100`, `0 <= C <= 100`.
//! - `sequential`: writes go through the logical space in order from page 0 and start again at 0
//!   when the next request does not fit; reads do the same with their own cursor.
//!
//! The pattern draws a page; a request of `n` pages starts at that page rounded down to a
//! multiple of `n` (as fio aligns random offsets to the block size), moved down to `N - n` if it
//! would run past the end. So the drawn page is always inside the request.
//!
//! ## Request sizes ([`RequestPages`], `--request-pages`)
//! `4` (always 4 pages), `1-16` (uniform over 1..=16 pages), or `1:70,8:20,64:10` (1 page with
//! weight 70, 8 with 20, 64 with 10; weights are relative).
//!
//! ## Reads, writes and content
//! Each request is a read with probability `read_ratio` (in `[0, 1)`), a write otherwise; the
//! stream ends after `writes` write requests (the reads drawn before the last write are
//! included), so it holds about `writes / (1 - read_ratio)` requests. Reads use the same pattern
//! (they may hit pages never written: the FTL returns erased data).
//!
//! Write content: each written page is, with probability `duplicate_ratio`, a copy of the
//! content of an earlier written page (the content of the `k`-th distinct content written, `k`
//! uniform over those written so far), otherwise new content never seen before. So the fraction
//! of written pages whose content duplicates an earlier written page is `duplicate_ratio` up to
//! sampling noise (the very first page is always new). Fingerprints are `u64`s; distinct new
//! contents have distinct fingerprints.
//!
//! ## Determinism
//! Everything is a function of the spec, `logical_pages` and `page_bytes`. Operations, sizes,
//! write addresses, read addresses and contents use separate random streams of one ChaCha8
//! generator, so changing `duplicate_ratio` does not move any address, and changing
//! `read_ratio` does not change the sequence of write addresses and sizes.
//!
//! [`precondition`] generates the ETI paper's preconditioning: the logical space written once
//! sequentially, then uniformly at random.

use std::fmt;
use std::str::FromStr;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::trace::{Op, Request};

/// Address pattern of a synthetic workload.
#[derive(Clone, Debug, PartialEq)]
pub enum Pattern {
    /// Every page equally likely.
    Uniform,
    /// Zipf over page ranks with exponent `alpha > 0`, ranks scattered over the addresses.
    Zipf {
        /// Exponent (1 and 2 in the Reusable SSD paper).
        alpha: f64,
    },
    /// `hot_space_percent` percent of the pages receive `hot_access_percent` percent of the
    /// accesses (`hotcold:20/80` = 80% of accesses to 20% of the space).
    HotCold {
        /// Share of the logical space that is hot, percent, in `(0, 100)`.
        hot_space_percent: f64,
        /// Share of the accesses that go to the hot pages, percent, in `[0, 100]`.
        hot_access_percent: f64,
    },
    /// In address order, wrapping at the end.
    Sequential,
}

impl fmt::Display for Pattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Pattern::Uniform => f.write_str("uniform"),
            Pattern::Zipf { alpha } => write!(f, "zipf:{alpha}"),
            Pattern::HotCold { hot_space_percent, hot_access_percent } => {
                write!(f, "hotcold:{hot_space_percent}/{hot_access_percent}")
            }
            Pattern::Sequential => f.write_str("sequential"),
        }
    }
}

const PATTERN_HELP: &str = "expected uniform, zipf:ALPHA (e.g. zipf:1), hotcold:H/C (e.g. hotcold:20/80: \
                            C% of the accesses to H% of the space) or sequential";

fn parse_number(what: &str, s: &str) -> Result<f64, String> {
    let v: f64 = s.trim().parse().map_err(|_| format!("{what}: \"{s}\" is not a number"))?;
    if !v.is_finite() {
        return Err(format!("{what}: \"{s}\" is not a finite number"));
    }
    Ok(v)
}

impl FromStr for Pattern {
    type Err = String;

    /// `uniform`, `zipf:ALPHA`, `hotcold:H/C` or `sequential` (ASCII case-insensitive).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let t = s.trim().to_ascii_lowercase();
        let (name, arg) = match t.split_once(':') {
            Some((n, a)) => (n, Some(a)),
            None => (t.as_str(), None),
        };
        match (name, arg) {
            ("uniform", None) => Ok(Pattern::Uniform),
            ("sequential", None) => Ok(Pattern::Sequential),
            ("zipf", Some(a)) => {
                let alpha = parse_number("zipf exponent", a)?;
                if alpha <= 0.0 {
                    return Err(format!("zipf exponent must be > 0, got {alpha}"));
                }
                Ok(Pattern::Zipf { alpha })
            }
            ("zipf", None) => Err("zipf needs an exponent: zipf:ALPHA, e.g. zipf:1".into()),
            ("hotcold", Some(a)) => {
                let (h, c) = a
                    .split_once('/')
                    .ok_or_else(|| format!("hotcold needs H/C, e.g. hotcold:20/80, got \"{a}\""))?;
                let hot_space_percent = parse_number("hotcold space percent (H)", h)?;
                let hot_access_percent = parse_number("hotcold access percent (C)", c)?;
                if !(hot_space_percent > 0.0 && hot_space_percent < 100.0) {
                    return Err(format!(
                        "hotcold: the hot share of the space H must be in (0, 100), got {hot_space_percent}"
                    ));
                }
                if !(0.0..=100.0).contains(&hot_access_percent) {
                    return Err(format!(
                        "hotcold: the hot share of the accesses C must be in [0, 100], got {hot_access_percent}"
                    ));
                }
                Ok(Pattern::HotCold { hot_space_percent, hot_access_percent })
            }
            ("hotcold", None) => Err("hotcold needs H/C, e.g. hotcold:20/80".into()),
            ("uniform" | "sequential", Some(_)) => Err(format!("{name} takes no parameter: \"{s}\"")),
            _ => Err(format!("unknown workload \"{s}\": {PATTERN_HELP}")),
        }
    }
}

/// Size of a request in pages.
#[derive(Clone, Debug, PartialEq)]
pub enum RequestPages {
    /// Always this many pages (`"4"`).
    Fixed(u64),
    /// Uniform over `min..=max` pages (`"1-16"`).
    Uniform {
        /// Smallest size, at least 1.
        min: u64,
        /// Largest size, at least `min`.
        max: u64,
    },
    /// Sizes with relative weights (`"1:70,8:20,64:10"`).
    Weighted(Vec<(u64, f64)>),
}

impl RequestPages {
    /// The largest size it can draw.
    pub fn max_pages(&self) -> u64 {
        match self {
            RequestPages::Fixed(n) => *n,
            RequestPages::Uniform { max, .. } => *max,
            RequestPages::Weighted(w) => w.iter().map(|(n, _)| *n).max().unwrap_or(0),
        }
    }

    /// The mean size in pages.
    pub fn mean_pages(&self) -> f64 {
        match self {
            RequestPages::Fixed(n) => *n as f64,
            RequestPages::Uniform { min, max } => (*min as f64 + *max as f64) / 2.0,
            RequestPages::Weighted(w) => {
                let total: f64 = w.iter().map(|(_, x)| x).sum();
                w.iter().map(|(n, x)| *n as f64 * x).sum::<f64>() / total
            }
        }
    }

    fn validate(&self) -> Result<(), String> {
        match self {
            RequestPages::Fixed(0) => Err("request size must be at least 1 page".into()),
            RequestPages::Fixed(_) => Ok(()),
            RequestPages::Uniform { min, max } => {
                if *min == 0 {
                    Err("request size must be at least 1 page".into())
                } else if min > max {
                    Err(format!("request size range {min}-{max} is empty"))
                } else {
                    Ok(())
                }
            }
            RequestPages::Weighted(w) => {
                if w.is_empty() {
                    return Err("no request sizes given".into());
                }
                for (n, weight) in w {
                    if *n == 0 {
                        return Err("request size must be at least 1 page".into());
                    }
                    if !(weight.is_finite() && *weight > 0.0) {
                        return Err(format!("weight of size {n} must be a positive number, got {weight}"));
                    }
                }
                Ok(())
            }
        }
    }
}

impl fmt::Display for RequestPages {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RequestPages::Fixed(n) => write!(f, "{n}"),
            RequestPages::Uniform { min, max } => write!(f, "{min}-{max}"),
            RequestPages::Weighted(w) => {
                for (i, (n, weight)) in w.iter().enumerate() {
                    if i > 0 {
                        f.write_str(",")?;
                    }
                    write!(f, "{n}:{weight}")?;
                }
                Ok(())
            }
        }
    }
}

impl FromStr for RequestPages {
    type Err = String;

    /// `N` (fixed), `MIN-MAX` (uniform, inclusive) or `N:W,N:W,...` (weighted), pages >= 1.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let t = s.trim();
        let help = "expected N (e.g. 4), MIN-MAX (e.g. 1-16) or N:WEIGHT,... (e.g. 1:70,8:30)";
        let pages = |x: &str| -> Result<u64, String> {
            x.trim().parse::<u64>().map_err(|_| format!("request pages: \"{x}\" is not a page count; {help}"))
        };
        let r = if t.contains(':') || t.contains(',') {
            let mut w = Vec::new();
            for item in t.split(',') {
                let (n, weight) = item
                    .split_once(':')
                    .ok_or_else(|| format!("request pages: \"{item}\" is not N:WEIGHT; {help}"))?;
                w.push((pages(n)?, parse_number("request pages weight", weight)?));
            }
            RequestPages::Weighted(w)
        } else if let Some((a, b)) = t.split_once('-') {
            RequestPages::Uniform { min: pages(a)?, max: pages(b)? }
        } else {
            RequestPages::Fixed(pages(t)?)
        };
        r.validate().map_err(|e| format!("request pages \"{s}\": {e}"))?;
        Ok(r)
    }
}

/// A synthetic workload.
#[derive(Clone, Debug, PartialEq)]
pub struct WorkloadSpec {
    /// Address pattern.
    pub pattern: Pattern,
    /// Host write requests to generate (the stream ends after the last one).
    pub writes: u64,
    /// Probability that a request is a read, in `[0, 1)`.
    pub read_ratio: f64,
    /// Request sizes.
    pub request_pages: RequestPages,
    /// Fraction of written pages whose content duplicates an earlier written page, in `[0, 1]`.
    pub duplicate_ratio: f64,
    /// Seed of all the random choices.
    pub seed: u64,
}

impl WorkloadSpec {
    /// Single-page writes only, no duplicates, seed 0.
    pub fn new(pattern: Pattern, writes: u64) -> Self {
        WorkloadSpec {
            pattern,
            writes,
            read_ratio: 0.0,
            request_pages: RequestPages::Fixed(1),
            duplicate_ratio: 0.0,
            seed: 0,
        }
    }
}

/// An invalid workload.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkloadError(pub String);

impl fmt::Display for WorkloadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for WorkloadError {}

fn check_device(logical_pages: u64, page_bytes: u64, max_request: u64) -> Result<(), WorkloadError> {
    if logical_pages == 0 {
        return Err(WorkloadError("the device has no logical pages".into()));
    }
    if page_bytes == 0 {
        return Err(WorkloadError("the page size is 0 bytes".into()));
    }
    if logical_pages.checked_mul(page_bytes).is_none() {
        return Err(WorkloadError(format!(
            "{logical_pages} pages of {page_bytes} bytes overflow a 64-bit byte address"
        )));
    }
    if max_request > logical_pages {
        return Err(WorkloadError(format!(
            "requests of up to {max_request} pages do not fit in {logical_pages} logical pages"
        )));
    }
    Ok(())
}

/// The requests of `spec` on a device of `logical_pages` pages of `page_bytes` bytes, or why the
/// spec is invalid (ratios out of range, a request larger than the device, ...).
pub fn generate(spec: &WorkloadSpec, logical_pages: u64, page_bytes: u64) -> Result<Workload, WorkloadError> {
    spec.request_pages.validate().map_err(WorkloadError)?;
    check_device(logical_pages, page_bytes, spec.request_pages.max_pages())?;
    if !(0.0..1.0).contains(&spec.read_ratio) {
        return Err(WorkloadError(format!("read ratio must be in [0, 1), got {}", spec.read_ratio)));
    }
    if !(0.0..=1.0).contains(&spec.duplicate_ratio) {
        return Err(WorkloadError(format!(
            "duplicate ratio must be in [0, 1], got {}",
            spec.duplicate_ratio
        )));
    }
    let sampler = match spec.pattern {
        Pattern::Uniform => Sampler::Uniform,
        Pattern::Sequential => Sampler::Sequential,
        Pattern::Zipf { alpha } => {
            if !(alpha.is_finite() && alpha > 0.0) {
                return Err(WorkloadError(format!("zipf exponent must be > 0, got {alpha}")));
            }
            Sampler::Zipf(Zipf::new(logical_pages, alpha), Permutation::new(logical_pages, spec.seed))
        }
        Pattern::HotCold { hot_space_percent: h, hot_access_percent: c } => {
            if !(h > 0.0 && h < 100.0 && (0.0..=100.0).contains(&c)) {
                return Err(WorkloadError(format!(
                    "hotcold:{h}/{c}: H must be in (0, 100) and C in [0, 100]"
                )));
            }
            let hot = if logical_pages < 2 {
                logical_pages
            } else {
                ((logical_pages as f64 * h / 100.0).round() as u64).clamp(1, logical_pages - 1)
            };
            Sampler::HotCold {
                hot_pages: hot,
                p_hot: c / 100.0,
                perm: Permutation::new(logical_pages, spec.seed),
            }
        }
    };
    let stream = |s: u64| {
        let mut r = ChaCha8Rng::seed_from_u64(spec.seed);
        r.set_stream(s);
        r
    };
    let size_dist = SizeDist::new(&spec.request_pages);
    Ok(Workload {
        logical_pages,
        page_bytes,
        writes_left: spec.writes,
        read_ratio: spec.read_ratio,
        duplicate_ratio: spec.duplicate_ratio,
        sampler,
        size_dist,
        op_rng: stream(1),
        write_size_rng: stream(2),
        write_addr_rng: stream(3),
        read_size_rng: stream(4),
        read_addr_rng: stream(5),
        content_rng: stream(6),
        write_cursor: 0,
        read_cursor: 0,
        content_key: splitmix64(spec.seed ^ 0xC0_17E7_7000),
        distinct_contents: 0,
    })
}

/// The request stream of a [`WorkloadSpec`] (see [`generate`]).
#[derive(Clone, Debug)]
pub struct Workload {
    logical_pages: u64,
    page_bytes: u64,
    writes_left: u64,
    read_ratio: f64,
    duplicate_ratio: f64,
    sampler: Sampler,
    size_dist: SizeDist,
    op_rng: ChaCha8Rng,
    write_size_rng: ChaCha8Rng,
    write_addr_rng: ChaCha8Rng,
    read_size_rng: ChaCha8Rng,
    read_addr_rng: ChaCha8Rng,
    content_rng: ChaCha8Rng,
    write_cursor: u64,
    read_cursor: u64,
    content_key: u64,
    distinct_contents: u64,
}

impl Workload {
    /// Write requests still to come.
    pub fn writes_left(&self) -> u64 {
        self.writes_left
    }

    /// Distinct contents written so far.
    pub fn distinct_contents(&self) -> u64 {
        self.distinct_contents
    }

    fn start_page(&mut self, op: Op, n: u64) -> u64 {
        let l = self.logical_pages;
        let (rng, cursor) = match op {
            Op::Write => (&mut self.write_addr_rng, &mut self.write_cursor),
            Op::Read => (&mut self.read_addr_rng, &mut self.read_cursor),
        };
        let page = match &self.sampler {
            Sampler::Sequential => {
                if *cursor + n > l {
                    *cursor = 0;
                }
                let start = *cursor;
                *cursor += n;
                return start;
            }
            Sampler::Uniform => rng.random_range(0..l),
            Sampler::Zipf(z, perm) => perm.apply(z.sample(rng) - 1),
            Sampler::HotCold { hot_pages, p_hot, perm } => {
                let i = if *hot_pages >= l {
                    rng.random_range(0..l)
                } else if rng.random::<f64>() < *p_hot {
                    rng.random_range(0..*hot_pages)
                } else {
                    rng.random_range(*hot_pages..l)
                };
                perm.apply(i)
            }
        };
        (page - page % n).min(l - n)
    }

    fn next_content(&mut self) -> u64 {
        let k = if self.distinct_contents > 0 && self.content_rng.random_bool(self.duplicate_ratio) {
            self.content_rng.random_range(0..self.distinct_contents)
        } else {
            self.distinct_contents += 1;
            self.distinct_contents - 1
        };
        splitmix64(k.wrapping_add(self.content_key))
    }
}

impl Iterator for Workload {
    type Item = Request;

    fn next(&mut self) -> Option<Request> {
        if self.writes_left == 0 {
            return None;
        }
        let op = if self.read_ratio > 0.0 && self.op_rng.random::<f64>() < self.read_ratio {
            Op::Read
        } else {
            Op::Write
        };
        let n = match op {
            Op::Write => self.size_dist.sample(&mut self.write_size_rng),
            Op::Read => self.size_dist.sample(&mut self.read_size_rng),
        };
        let start = self.start_page(op, n);
        let content = match op {
            Op::Write => {
                self.writes_left -= 1;
                Some((0..n).map(|_| self.next_content()).collect())
            }
            Op::Read => None,
        };
        Some(Request {
            time_ns: None,
            op,
            offset: start * self.page_bytes,
            len: n * self.page_bytes,
            content,
        })
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let writes = usize::try_from(self.writes_left).unwrap_or(usize::MAX);
        (writes, if self.read_ratio == 0.0 { Some(writes) } else { None })
    }
}

/// The ETI paper's preconditioning: every logical page written once in address order (in
/// requests of `request_pages` pages, the last one shorter if needed), then `random_writes`
/// write requests of `request_pages` pages at uniformly random aligned addresses. Contents are
/// all distinct (and distinct from those of any [`Workload`] with overwhelming probability).
pub fn precondition(
    logical_pages: u64,
    page_bytes: u64,
    request_pages: u64,
    random_writes: u64,
    seed: u64,
) -> Result<Precondition, WorkloadError> {
    if request_pages == 0 {
        return Err(WorkloadError("request size must be at least 1 page".into()));
    }
    check_device(logical_pages, page_bytes, request_pages)?;
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    rng.set_stream(7);
    Ok(Precondition {
        logical_pages,
        page_bytes,
        request_pages,
        next_sequential: 0,
        random_left: random_writes,
        rng,
        content_key: splitmix64(seed ^ 0x9E3C_0DD1_7104),
        contents: 0,
    })
}

/// The request stream of [`precondition`].
#[derive(Clone, Debug)]
pub struct Precondition {
    logical_pages: u64,
    page_bytes: u64,
    request_pages: u64,
    next_sequential: u64,
    random_left: u64,
    rng: ChaCha8Rng,
    content_key: u64,
    contents: u64,
}

impl Iterator for Precondition {
    type Item = Request;

    fn next(&mut self) -> Option<Request> {
        let (start, n) = if self.next_sequential < self.logical_pages {
            let start = self.next_sequential;
            let n = self.request_pages.min(self.logical_pages - start);
            self.next_sequential += n;
            (start, n)
        } else if self.random_left > 0 {
            self.random_left -= 1;
            let n = self.request_pages;
            let page = self.rng.random_range(0..self.logical_pages);
            ((page - page % n).min(self.logical_pages - n), n)
        } else {
            return None;
        };
        let content = (0..n)
            .map(|_| {
                self.contents += 1;
                splitmix64(self.contents.wrapping_add(self.content_key))
            })
            .collect();
        Some(Request {
            time_ns: None,
            op: Op::Write,
            offset: start * self.page_bytes,
            len: n * self.page_bytes,
            content: Some(content),
        })
    }
}

/// Where requests go.
#[derive(Clone, Debug)]
enum Sampler {
    Uniform,
    Sequential,
    Zipf(Zipf, Permutation),
    HotCold { hot_pages: u64, p_hot: f64, perm: Permutation },
}

/// Request-size sampler.
#[derive(Clone, Debug)]
enum SizeDist {
    Fixed(u64),
    Uniform(u64, u64),
    /// Sizes and cumulative probabilities.
    Weighted(Vec<u64>, Vec<f64>),
}

impl SizeDist {
    fn new(r: &RequestPages) -> Self {
        match r {
            RequestPages::Fixed(n) => SizeDist::Fixed(*n),
            RequestPages::Uniform { min, max } => SizeDist::Uniform(*min, *max),
            RequestPages::Weighted(w) => {
                let total: f64 = w.iter().map(|(_, x)| x).sum();
                let mut acc = 0.0;
                let cdf = w
                    .iter()
                    .map(|(_, x)| {
                        acc += x / total;
                        acc
                    })
                    .collect();
                SizeDist::Weighted(w.iter().map(|(n, _)| *n).collect(), cdf)
            }
        }
    }

    fn sample(&self, rng: &mut ChaCha8Rng) -> u64 {
        match self {
            SizeDist::Fixed(n) => *n,
            SizeDist::Uniform(a, b) => rng.random_range(*a..=*b),
            SizeDist::Weighted(sizes, cdf) => {
                let u: f64 = rng.random();
                let i = cdf.partition_point(|&c| c <= u).min(sizes.len() - 1);
                sizes[i]
            }
        }
    }
}

/// Zipf over ranks `1..=n` with exponent `alpha > 0` (probability of rank `k` proportional to
/// `k^-alpha`), sampled exactly by rejection-inversion (Hörmann and Derflinger 1996, in the
/// formulation of Apache Commons RNG's `RejectionInversionZipfSampler`): O(1) time and memory.
#[derive(Clone, Debug)]
pub struct Zipf {
    n: f64,
    alpha: f64,
    h_integral_x1: f64,
    h_integral_n: f64,
    s: f64,
}

impl Zipf {
    /// The distribution over `1..=n` (`n >= 1`, `alpha > 0` and finite; callers validate).
    pub fn new(n: u64, alpha: f64) -> Self {
        let n = n.max(1) as f64;
        let mut z = Zipf { n, alpha, h_integral_x1: 0.0, h_integral_n: 0.0, s: 0.0 };
        z.h_integral_x1 = z.h_integral(1.5) - 1.0;
        z.h_integral_n = z.h_integral(n + 0.5);
        z.s = 2.0 - z.h_integral_inverse(z.h_integral(2.5) - z.h(2.0));
        z
    }

    /// A rank in `1..=n`.
    pub fn sample<R: Rng + ?Sized>(&self, rng: &mut R) -> u64 {
        loop {
            let u = self.h_integral_n + rng.random::<f64>() * (self.h_integral_x1 - self.h_integral_n);
            let x = self.h_integral_inverse(u);
            let k = (x + 0.5).floor().clamp(1.0, self.n);
            if k - x <= self.s || u >= self.h_integral(k + 0.5) - self.h(k) {
                return k as u64;
            }
        }
    }

    /// `x^-alpha`.
    fn h(&self, x: f64) -> f64 {
        (-self.alpha * x.ln()).exp()
    }

    /// An antiderivative of `h`: `(x^(1-alpha) - 1) / (1 - alpha)`, or `ln x` for alpha 1.
    fn h_integral(&self, x: f64) -> f64 {
        let log_x = x.ln();
        helper2((1.0 - self.alpha) * log_x) * log_x
    }

    fn h_integral_inverse(&self, x: f64) -> f64 {
        let t = (x * (1.0 - self.alpha)).max(-1.0);
        (helper1(t) * x).exp()
    }
}

/// `ln(1 + x) / x`, accurate near 0.
fn helper1(x: f64) -> f64 {
    if x.abs() > 1e-8 {
        x.ln_1p() / x
    } else {
        1.0 - x * (0.5 - x * (1.0 / 3.0 - 0.25 * x))
    }
}

/// `(e^x - 1) / x`, accurate near 0.
fn helper2(x: f64) -> f64 {
    if x.abs() > 1e-8 {
        x.exp_m1() / x
    } else {
        1.0 + x * 0.5 * (1.0 + x * (1.0 / 3.0) * (1.0 + 0.25 * x))
    }
}

/// A seeded pseudo-random permutation of `0..n` in O(1) memory: a 4-round Feistel network on
/// the smallest even power of two `>= n`, with cycle-walking back into `0..n` (fewer than 4
/// rounds of the network on average).
#[derive(Clone, Debug)]
pub struct Permutation {
    n: u64,
    half_bits: u32,
    mask: u64,
    keys: [u64; 4],
}

impl Permutation {
    /// The permutation of `0..n` for `seed`.
    pub fn new(n: u64, seed: u64) -> Self {
        let bits = 64 - n.saturating_sub(1).leading_zeros();
        let half_bits = bits.div_ceil(2).max(1);
        let mask = if half_bits >= 64 { u64::MAX } else { (1u64 << half_bits) - 1 };
        let mut k = splitmix64(seed ^ 0x005E_ED0F_A119_A6E5);
        let mut keys = [0u64; 4];
        for key in &mut keys {
            k = splitmix64(k);
            *key = k;
        }
        Permutation { n, half_bits, mask, keys }
    }

    /// The image of `x` (`x < n`; other values are reduced modulo `n` first).
    pub fn apply(&self, x: u64) -> u64 {
        if self.n <= 1 {
            return 0;
        }
        let mut v = x % self.n;
        loop {
            v = self.round_trip(v);
            if v < self.n {
                return v;
            }
        }
    }

    fn round_trip(&self, v: u64) -> u64 {
        let mut l = v >> self.half_bits;
        let mut r = v & self.mask;
        for key in self.keys {
            let t = l ^ (splitmix64(r ^ key) & self.mask);
            l = r;
            r = t;
        }
        (l << self.half_bits) | r
    }
}

/// The SplitMix64 output function: a bijection of `u64` that mixes well.
fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use std::collections::{HashMap, HashSet};

    use super::*;

    const PAGE: u64 = 4096;

    fn spec(pattern: &str, writes: u64) -> WorkloadSpec {
        WorkloadSpec::new(pattern.parse().unwrap(), writes)
    }

    fn all(spec: &WorkloadSpec, logical: u64) -> Vec<Request> {
        generate(spec, logical, PAGE).unwrap().collect()
    }

    /// Pages written, in order, one entry per page.
    fn written_pages(reqs: &[Request]) -> Vec<u64> {
        reqs.iter()
            .filter(|r| r.is_write())
            .flat_map(|r| (r.offset / PAGE)..(r.offset + r.len) / PAGE)
            .collect()
    }

    /// Zipf probabilities of ranks 1..=n.
    fn zipf_pmf(n: u64, alpha: f64) -> Vec<f64> {
        let w: Vec<f64> = (1..=n).map(|k| (k as f64).powf(-alpha)).collect();
        let h: f64 = w.iter().sum();
        w.iter().map(|x| x / h).collect()
    }

    /// `|observed - p| <= sigmas` standard deviations of a binomial proportion over `n` samples.
    fn assert_close(what: &str, observed: f64, p: f64, n: u64, sigmas: f64) {
        let sd = (p * (1.0 - p) / n as f64).sqrt().max(1e-9);
        assert!(
            (observed - p).abs() <= sigmas * sd,
            "{what}: observed {observed}, expected {p} ± {}",
            sigmas * sd
        );
    }

    #[test]
    fn pattern_from_str_and_display() {
        assert_eq!("uniform".parse::<Pattern>(), Ok(Pattern::Uniform));
        assert_eq!("Sequential".parse::<Pattern>(), Ok(Pattern::Sequential));
        assert_eq!("zipf:1.0".parse::<Pattern>(), Ok(Pattern::Zipf { alpha: 1.0 }));
        assert_eq!("zipf:2".parse::<Pattern>(), Ok(Pattern::Zipf { alpha: 2.0 }));
        assert_eq!(
            "hotcold:20/80".parse::<Pattern>(),
            Ok(Pattern::HotCold { hot_space_percent: 20.0, hot_access_percent: 80.0 })
        );
        for p in ["uniform", "sequential", "zipf:1.5", "hotcold:10/90"] {
            assert_eq!(p.parse::<Pattern>().unwrap().to_string(), p);
        }
        let e = |s: &str| s.parse::<Pattern>().unwrap_err();
        assert_eq!(e("zipf"), "zipf needs an exponent: zipf:ALPHA, e.g. zipf:1");
        assert_eq!(e("zipf:x"), "zipf exponent: \"x\" is not a number");
        assert_eq!(e("zipf:0"), "zipf exponent must be > 0, got 0");
        assert_eq!(e("zipf:inf"), "zipf exponent: \"inf\" is not a finite number");
        assert_eq!(e("hotcold:20"), "hotcold needs H/C, e.g. hotcold:20/80, got \"20\"");
        assert_eq!(e("hotcold:100/80"), "hotcold: the hot share of the space H must be in (0, 100), got 100");
        assert_eq!(
            e("hotcold:20/101"),
            "hotcold: the hot share of the accesses C must be in [0, 100], got 101"
        );
        assert_eq!(e("uniform:3"), "uniform takes no parameter: \"uniform:3\"");
        assert!(e("random").starts_with("unknown workload \"random\": expected uniform, zipf:ALPHA"));
    }

    #[test]
    fn request_pages_from_str() {
        assert_eq!("4".parse::<RequestPages>(), Ok(RequestPages::Fixed(4)));
        assert_eq!("1-16".parse::<RequestPages>(), Ok(RequestPages::Uniform { min: 1, max: 16 }));
        assert_eq!(
            "1:70,8:30".parse::<RequestPages>(),
            Ok(RequestPages::Weighted(vec![(1, 70.0), (8, 30.0)]))
        );
        for s in ["4", "1-16", "1:70,8:30"] {
            assert_eq!(s.parse::<RequestPages>().unwrap().to_string(), s);
        }
        let e = |s: &str| s.parse::<RequestPages>().unwrap_err();
        assert_eq!(e("0"), "request pages \"0\": request size must be at least 1 page");
        assert_eq!(e("8-2"), "request pages \"8-2\": request size range 8-2 is empty");
        assert_eq!(e("1:0"), "request pages \"1:0\": weight of size 1 must be a positive number, got 0");
        assert!(e("x").starts_with("request pages: \"x\" is not a page count; expected N"));
        assert!(e("1,8").starts_with("request pages: \"1\" is not N:WEIGHT"));
        assert_eq!(RequestPages::Uniform { min: 1, max: 16 }.mean_pages(), 8.5);
        assert_eq!("1:3,5:1".parse::<RequestPages>().unwrap().mean_pages(), 2.0);
    }

    #[test]
    fn invalid_specs_are_errors() {
        let mut s = spec("uniform", 10);
        assert!(generate(&s, 0, PAGE).is_err());
        assert!(generate(&s, 10, 0).is_err());
        assert!(generate(&s, u64::MAX / 2, PAGE).is_err());
        s.read_ratio = 1.0;
        assert_eq!(generate(&s, 10, PAGE).unwrap_err().to_string(), "read ratio must be in [0, 1), got 1");
        s.read_ratio = 0.0;
        s.duplicate_ratio = 1.5;
        assert!(generate(&s, 10, PAGE).is_err());
        s.duplicate_ratio = 0.0;
        s.request_pages = RequestPages::Fixed(11);
        assert_eq!(
            generate(&s, 10, PAGE).unwrap_err().to_string(),
            "requests of up to 11 pages do not fit in 10 logical pages"
        );
        s.request_pages = RequestPages::Uniform { min: 0, max: 3 };
        assert!(generate(&s, 10, PAGE).is_err());
        let s = WorkloadSpec::new(Pattern::Zipf { alpha: -1.0 }, 1);
        assert!(generate(&s, 10, PAGE).is_err());
        let s = WorkloadSpec::new(Pattern::HotCold { hot_space_percent: 0.0, hot_access_percent: 50.0 }, 1);
        assert!(generate(&s, 10, PAGE).is_err());
    }

    #[test]
    fn deterministic_by_seed() {
        for p in ["uniform", "zipf:1", "hotcold:20/80", "sequential"] {
            let mut s = spec(p, 2000);
            s.read_ratio = 0.3;
            s.duplicate_ratio = 0.2;
            s.request_pages = "1-8".parse().unwrap();
            s.seed = 7;
            let a = all(&s, 10_000);
            assert_eq!(a, all(&s, 10_000), "{p}");
            s.seed = 8;
            if p != "sequential" {
                assert_ne!(a, all(&s, 10_000), "{p}");
            }
        }
    }

    #[test]
    fn requests_are_aligned_in_range_with_one_fingerprint_per_page() {
        for p in ["uniform", "zipf:1", "zipf:2", "hotcold:20/80", "sequential"] {
            let mut s = spec(p, 3000);
            s.read_ratio = 0.5;
            s.request_pages = "1-16".parse().unwrap();
            let logical = 1000;
            for r in all(&s, logical) {
                assert_eq!(r.time_ns, None);
                assert_eq!(r.offset % PAGE, 0);
                assert!(r.len >= PAGE && r.len <= 16 * PAGE && r.len % PAGE == 0);
                assert!(r.offset + r.len <= logical * PAGE, "{p}: {r:?}");
                match r.op {
                    Op::Write => assert_eq!(r.content.as_ref().unwrap().len() as u64, r.len / PAGE),
                    Op::Read => assert_eq!(r.content, None),
                }
            }
        }
    }

    #[test]
    fn read_ratio_and_write_count() {
        let mut s = spec("uniform", 20_000);
        s.read_ratio = 0.3;
        let reqs = all(&s, 1 << 20);
        let writes = reqs.iter().filter(|r| r.is_write()).count() as u64;
        assert_eq!(writes, 20_000);
        assert!(reqs.last().unwrap().is_write());
        let reads = reqs.len() as u64 - writes;
        assert_close("read fraction", reads as f64 / reqs.len() as f64, 0.3, reqs.len() as u64, 5.0);
        // No reads at all by default.
        assert!(all(&spec("uniform", 100), 100).iter().all(|r| r.is_write()));
        assert_eq!(generate(&spec("uniform", 100), 100, PAGE).unwrap().size_hint(), (100, Some(100)));
    }

    #[test]
    fn duplicate_ratio_is_met() {
        for ratio in [0.0, 0.25, 0.6, 1.0] {
            let mut s = spec("uniform", 10_000);
            s.duplicate_ratio = ratio;
            s.request_pages = RequestPages::Fixed(4);
            let reqs = all(&s, 1 << 16);
            let mut seen = HashSet::new();
            let mut dups = 0u64;
            let mut total = 0u64;
            for fp in reqs.iter().flat_map(|r| r.content.clone().unwrap()) {
                total += 1;
                if !seen.insert(fp) {
                    dups += 1;
                }
            }
            let observed = dups as f64 / total as f64;
            if ratio == 0.0 {
                assert_eq!(dups, 0);
            } else if ratio == 1.0 {
                assert_eq!(dups, total - 1);
            } else {
                assert_close("duplicate fraction", observed, ratio, total, 5.0);
            }
            let mut w = generate(&s, 1 << 16, PAGE).unwrap();
            w.by_ref().for_each(drop);
            assert_eq!(w.distinct_contents(), seen.len() as u64);
        }
    }

    #[test]
    fn duplicates_and_reads_do_not_move_write_addresses() {
        let base = {
            let mut s = spec("zipf:1", 3000);
            s.request_pages = "1-4".parse().unwrap();
            s
        };
        let addrs = |s: &WorkloadSpec| -> Vec<(u64, u64)> {
            all(s, 5000).iter().filter(|r| r.is_write()).map(|r| (r.offset, r.len)).collect()
        };
        let a = addrs(&base);
        let mut s = base.clone();
        s.duplicate_ratio = 0.5;
        assert_eq!(addrs(&s), a);
        s.read_ratio = 0.4;
        assert_eq!(addrs(&s), a);
    }

    #[test]
    fn request_size_distribution() {
        let mut s = spec("uniform", 32_000);
        s.request_pages = "1-16".parse().unwrap();
        let reqs = all(&s, 1 << 20);
        let mut counts = [0u64; 17];
        for r in &reqs {
            counts[(r.len / PAGE) as usize] += 1;
        }
        assert_eq!(counts[0], 0);
        for (n, c) in counts.iter().enumerate().skip(1) {
            assert_close(&format!("size {n}"), *c as f64 / 32_000.0, 1.0 / 16.0, 32_000, 5.0);
        }
        s.request_pages = "1:70,8:20,64:10".parse().unwrap();
        let reqs = all(&s, 1 << 20);
        let mut by_size: HashMap<u64, u64> = HashMap::new();
        for r in &reqs {
            *by_size.entry(r.len / PAGE).or_default() += 1;
        }
        assert_eq!(by_size.len(), 3);
        for (n, p) in [(1, 0.7), (8, 0.2), (64, 0.1)] {
            assert_close(&format!("size {n}"), by_size[&n] as f64 / 32_000.0, p, 32_000, 5.0);
        }
        s.request_pages = RequestPages::Fixed(8);
        assert!(all(&s, 64).iter().all(|r| r.len == 8 * PAGE && r.offset % (8 * PAGE) == 0));
    }

    #[test]
    fn zipf_sampler_matches_theory() {
        for (n, alpha) in [(1000u64, 1.0), (1000, 2.0), (50, 0.8), (100_000, 1.0), (3, 1.0)] {
            let z = Zipf::new(n, alpha);
            let mut rng = ChaCha8Rng::seed_from_u64(42);
            let samples = 200_000u64;
            let mut counts = vec![0u64; n as usize + 1];
            for _ in 0..samples {
                let k = z.sample(&mut rng);
                assert!((1..=n).contains(&k));
                counts[k as usize] += 1;
            }
            let pmf = zipf_pmf(n, alpha);
            for k in 1..=n.min(5) {
                let what = format!("n {n} alpha {alpha} rank {k}");
                assert_close(
                    &what,
                    counts[k as usize] as f64 / samples as f64,
                    pmf[k as usize - 1],
                    samples,
                    5.0,
                );
            }
            // The tail as a whole too.
            let tail: u64 = counts.iter().skip(11).sum();
            let p_tail: f64 = pmf.iter().skip(10).sum();
            assert_close("tail", tail as f64 / samples as f64, p_tail, samples, 5.0);
        }
        // Degenerate and huge domains.
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        assert!((0..100).all(|_| Zipf::new(1, 1.0).sample(&mut rng) == 1));
        let z = Zipf::new(1 << 40, 1.0);
        assert!((0..1000).all(|_| (1..=1u64 << 40).contains(&z.sample(&mut rng))));
    }

    #[test]
    fn zipf_workload_is_skewed_and_scattered() {
        for alpha in [1.0, 2.0] {
            let logical = 10_000;
            let writes = 200_000;
            let reqs = all(&WorkloadSpec::new(Pattern::Zipf { alpha }, writes), logical);
            let mut counts: HashMap<u64, u64> = HashMap::new();
            for p in written_pages(&reqs) {
                *counts.entry(p).or_default() += 1;
            }
            let mut by_freq: Vec<(u64, u64)> = counts.into_iter().map(|(p, c)| (c, p)).collect();
            by_freq.sort_unstable_by(|a, b| b.cmp(a));
            let pmf = zipf_pmf(logical, alpha);
            for (rank, (c, _)) in by_freq.iter().take(3).enumerate() {
                let what = format!("alpha {alpha} rank {}", rank + 1);
                assert_close(&what, *c as f64 / writes as f64, pmf[rank], writes, 5.0);
            }
            // Hot pages are scattered, not the first addresses.
            let top: Vec<u64> = by_freq.iter().take(3).map(|(_, p)| *p).collect();
            assert_ne!(top, [0, 1, 2]);
            let spread = top.iter().max().unwrap() - top.iter().min().unwrap();
            assert!(spread > 3, "{top:?}");
        }
    }

    #[test]
    fn hot_cold_split() {
        let logical = 10_000;
        let writes = 100_000;
        let s = spec("hotcold:20/80", writes);
        let reqs = all(&s, logical);
        let perm = Permutation::new(logical, s.seed);
        let hot: HashSet<u64> = (0..2000).map(|i| perm.apply(i)).collect();
        let hits = written_pages(&reqs).iter().filter(|p| hot.contains(p)).count();
        assert_close("hot fraction", hits as f64 / writes as f64, 0.8, writes, 5.0);
        // Every hot page is about equally popular, and so is every cold page.
        let mut counts = vec![0u64; logical as usize];
        for p in written_pages(&reqs) {
            counts[p as usize] += 1;
        }
        let hot_mean = 0.8 * writes as f64 / 2000.0;
        let cold_mean = 0.2 * writes as f64 / 8000.0;
        let hot_avg = hot.iter().map(|p| counts[*p as usize]).sum::<u64>() as f64 / 2000.0;
        assert!((hot_avg - hot_mean).abs() < 0.05 * hot_mean);
        let cold_total: u64 = (0..logical).filter(|p| !hot.contains(p)).map(|p| counts[p as usize]).sum();
        assert!((cold_total as f64 / 8000.0 - cold_mean).abs() < 0.05 * cold_mean);
    }

    #[test]
    fn sequential_walks_and_wraps() {
        let mut s = spec("sequential", 7);
        s.request_pages = RequestPages::Fixed(3);
        let offsets: Vec<u64> = all(&s, 10).iter().map(|r| r.offset / PAGE).collect();
        assert_eq!(offsets, [0, 3, 6, 0, 3, 6, 0]);
        s.request_pages = RequestPages::Fixed(1);
        s.read_ratio = 0.5;
        s.writes = 30;
        let reqs = all(&s, 1000);
        let w: Vec<u64> = reqs.iter().filter(|r| r.is_write()).map(|r| r.offset / PAGE).collect();
        let r: Vec<u64> = reqs.iter().filter(|r| !r.is_write()).map(|r| r.offset / PAGE).collect();
        assert_eq!(w, (0..30).collect::<Vec<_>>());
        assert_eq!(r, (0..r.len() as u64).collect::<Vec<_>>());
    }

    #[test]
    fn uniform_covers_the_space_evenly() {
        let logical = 100;
        let writes = 100_000;
        let reqs = all(&spec("uniform", writes), logical);
        let mut counts = vec![0u64; logical as usize];
        for p in written_pages(&reqs) {
            counts[p as usize] += 1;
        }
        for c in counts {
            assert_close("page", c as f64 / writes as f64, 0.01, writes, 5.0);
        }
    }

    #[test]
    fn permutation_is_a_bijection() {
        for n in [1u64, 2, 3, 5, 10, 64, 1000, 4099, 65_536] {
            let p = Permutation::new(n, 99);
            let image: HashSet<u64> = (0..n).map(|x| p.apply(x)).collect();
            assert_eq!(image.len() as u64, n);
            assert!(image.iter().all(|&y| y < n));
        }
        let p = Permutation::new(1000, 1);
        assert_ne!((0..1000).map(|x| p.apply(x)).collect::<Vec<_>>(), (0..1000).collect::<Vec<_>>());
        let big = Permutation::new(u64::MAX, 3);
        assert!(big.apply(12345) < u64::MAX);
    }

    #[test]
    fn precondition_writes_everything_then_randomly() {
        let reqs: Vec<Request> = precondition(10, PAGE, 4, 5, 3).unwrap().collect();
        let starts: Vec<(u64, u64)> = reqs.iter().map(|r| (r.offset / PAGE, r.len / PAGE)).collect();
        assert_eq!(&starts[..3], &[(0, 4), (4, 4), (8, 2)]);
        assert_eq!(reqs.len(), 3 + 5);
        for r in &reqs[3..] {
            assert_eq!(r.len, 4 * PAGE);
            assert!(r.offset + r.len <= 10 * PAGE);
        }
        assert!(reqs.iter().all(|r| r.is_write() && r.time_ns.is_none()));
        let fps: Vec<u64> = reqs.iter().flat_map(|r| r.content.clone().unwrap()).collect();
        assert_eq!(fps.iter().collect::<HashSet<_>>().len(), fps.len());
        assert!(precondition(10, PAGE, 0, 5, 3).is_err());
        assert!(precondition(10, PAGE, 11, 5, 3).is_err());
    }
}
