//! Latency samples and their summary statistics (mean, percentiles, standard deviation).
//!
//! Samples are kept whole (8 bytes per request) and sorted once at the end: exact percentiles,
//! memory proportional to the requests measured.

use serde::Serialize;

/// Latency samples in nanoseconds.
#[derive(Clone, Debug, Default)]
pub struct Latencies {
    samples: Vec<u64>,
    sorted: bool,
}

/// Summary of a latency distribution, in microseconds.
#[derive(Copy, Clone, Debug, Default, PartialEq, Serialize)]
pub struct LatencySummary {
    /// Samples.
    pub count: u64,
    /// Arithmetic mean.
    pub mean: f64,
    /// Median.
    pub p50: f64,
    /// 99th percentile.
    pub p99: f64,
    /// 99.9th percentile.
    pub p999: f64,
    /// Population standard deviation.
    pub stddev: f64,
    /// Largest sample.
    pub max: f64,
}

impl Latencies {
    /// Records one sample.
    pub fn push(&mut self, ns: u64) {
        self.samples.push(ns);
        self.sorted = false;
    }

    /// Samples recorded.
    pub fn len(&self) -> usize {
        self.samples.len()
    }

    /// Whether no sample was recorded.
    pub fn is_empty(&self) -> bool {
        self.samples.is_empty()
    }

    fn sort(&mut self) {
        if !self.sorted {
            self.samples.sort_unstable();
            self.sorted = true;
        }
    }

    /// The samples in ascending order.
    pub fn sorted(&mut self) -> &[u64] {
        self.sort();
        &self.samples
    }

    /// Nearest-rank percentile `q` in [0, 1], nanoseconds (0 when empty).
    pub fn percentile(&mut self, q: f64) -> u64 {
        self.sort();
        if self.samples.is_empty() {
            return 0;
        }
        let n = self.samples.len();
        let rank = ((q * n as f64).ceil() as usize).clamp(1, n);
        self.samples[rank - 1]
    }

    /// The summary, in microseconds.
    pub fn summary(&mut self) -> LatencySummary {
        if self.samples.is_empty() {
            return LatencySummary::default();
        }
        let n = self.samples.len() as f64;
        let mean = self.samples.iter().map(|&x| x as f64).sum::<f64>() / n;
        let var = self.samples.iter().map(|&x| (x as f64 - mean).powi(2)).sum::<f64>() / n;
        let us = |ns: u64| ns as f64 / 1000.0;
        LatencySummary {
            count: self.samples.len() as u64,
            mean: mean / 1000.0,
            p50: us(self.percentile(0.50)),
            p99: us(self.percentile(0.99)),
            p999: us(self.percentile(0.999)),
            stddev: var.sqrt() / 1000.0,
            max: us(self.percentile(1.0)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_of_one_to_thousand() {
        let mut l = Latencies::default();
        for x in (1..=1000u64).rev() {
            l.push(x * 1000);
        }
        let s = l.summary();
        assert_eq!(s.count, 1000);
        assert!((s.mean - 500.5).abs() < 1e-9);
        assert_eq!((s.p50, s.p99, s.p999, s.max), (500.0, 990.0, 999.0, 1000.0));
        // Population standard deviation of 1..=n is sqrt((n^2 - 1) / 12).
        assert!((s.stddev - ((1000.0f64 * 1000.0 - 1.0) / 12.0).sqrt()).abs() < 1e-6);
    }

    #[test]
    fn empty_is_zero() {
        assert_eq!(Latencies::default().summary(), LatencySummary::default());
    }
}
