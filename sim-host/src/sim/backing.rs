//! The backing store behind the simulated SSD cache: a model disk with one fixed access time
//! (FlexECC's `T_disk`, 1.5 ms by default) that serves one access at a time, or (`queued:
//! false`, `ftl-sim --disk-queue off`) a store whose every access takes that time without
//! waiting for the others: the FlexECC paper's trace-driven view, where the disk is outside the
//! simulation and a fill reaches the cache device when the trace says, whatever the load.
//!
//! Timing: a read issued at `t` starts when the disk is free and takes `access_ns`; reads on a
//! request's path (misses, corrupt CRC pages) delay the request, the scrubber's prefetches keep
//! the disk busy. Write-backs of flushed data are counted but take no read time: they are
//! absorbed by the disk's write cache and written in the background (with every dirty page
//! written back at each flush, charging them to the read queue would make the disk, not the
//! cache device, the bottleneck of every run). Data is not modelled (the simulator stores none):
//! a fetch fills the page with zeros, or, where contents matter (deduplication stacked), with the
//! content id the cache slot holds.

use std::collections::HashMap;

use ftl_core::intent::{BackingError, BackingStore};

/// A disk with a fixed access time.
#[derive(Clone, Debug)]
pub struct ModelDisk {
    access_ns: u64,
    queued: bool,
    free_at: u64,
    /// Reads served.
    pub reads: u64,
    /// Writes served.
    pub writes: u64,
}

impl ModelDisk {
    /// A disk taking `access_ns` per access.
    pub fn new(access_ns: u64) -> Self {
        ModelDisk { access_ns, queued: true, free_at: 0, reads: 0, writes: 0 }
    }

    /// A store whose accesses take `access_ns` each without queueing.
    pub fn unqueued(access_ns: u64) -> Self {
        ModelDisk { queued: false, ..ModelDisk::new(access_ns) }
    }

    /// The access time, ns.
    pub fn access_ns(&self) -> u64 {
        self.access_ns
    }

    fn access(&mut self, t: u64) -> u64 {
        if !self.queued {
            return t.saturating_add(self.access_ns);
        }
        let done = self.free_at.max(t).saturating_add(self.access_ns);
        self.free_at = done;
        done
    }

    /// A read issued at `t`; returns when it completes.
    pub fn read_at(&mut self, t: u64) -> u64 {
        self.reads += 1;
        self.access(t)
    }

    /// A write-back issued at `t`: counted, absorbed without delaying reads (see the module
    /// documentation); returns `t`.
    pub fn write_at(&mut self, t: u64) -> u64 {
        self.writes += 1;
        t
    }
}

/// The disk as a [`BackingStore`] for fetches issued at one time (the scrubber's prefetches in a
/// gap); `done` is when the last of them completes.
pub struct DiskAt<'a> {
    /// The disk.
    pub disk: &'a mut ModelDisk,
    /// Issue time, ns.
    pub at: u64,
    /// Completion of the last fetch, ns.
    pub done: u64,
    /// Fetches served.
    pub fetches: u64,
    /// Where page contents matter (deduplication stacked): each cache slot's content id, which
    /// a fetch writes back ([`super::dedup::fill_content`]); else fetched pages are zeros.
    pub contents: Option<&'a HashMap<u32, u64>>,
}

impl BackingStore for DiskAt<'_> {
    fn fetch(&mut self, lpn: u32, out: &mut [u8]) -> Result<(), BackingError> {
        self.done = self.disk.read_at(self.at);
        self.fetches += 1;
        match self.contents.and_then(|c| c.get(&lpn)) {
            Some(&c) => super::dedup::fill_content(c, out),
            None => out.fill(0),
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accesses_queue_on_one_disk() {
        let mut d = ModelDisk::new(1_500_000);
        assert_eq!(d.read_at(1000), 1_501_000);
        assert_eq!(d.read_at(1000), 3_001_000);
        assert_eq!(d.write_at(1000), 1000);
        assert_eq!(d.read_at(10_000_000), 11_500_000);
        assert_eq!((d.reads, d.writes), (3, 1));
        let mut u = ModelDisk::unqueued(1_500_000);
        assert_eq!((u.read_at(1000), u.read_at(1000)), (1_501_000, 1_501_000));
        assert_eq!(u.reads, 2);
    }
}
