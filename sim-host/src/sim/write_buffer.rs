//! The on-device write buffer of the CAFTL paper's simulator (`--write-buffer-mib N`): a shared
//! buffer of N MiB that absorbs writes and serves reads first, and the hash processor that
//! fingerprints buffered pages one request at a time.
//!
//! What it owns: the buffer's occupancy over simulated time, which logical pages it holds, and
//! when the hash processor is next free. What it guarantees (the paper's Section 4 model):
//!
//! * A request enters the buffer in arrival order (FIFO) once its pages fit (a request larger
//!   than the buffer waits for an empty buffer and is then admitted whole).
//! * A write completes to the host when it is admitted; its pages stay in the buffer until its
//!   flash work (and hashing) is done (`release`).
//! * A read's pages still held in the buffer are served from it at no cost; the rest are read
//!   from flash once admitted, and the read holds its pages until it completes.
//! * The hash processor fingerprints one write at a time: a write's flash work is issued when it
//!   is admitted and the processor is free ([`WriteBuffer::issue_at`]).
//!
//! Hashing is on the emulator's clock page by page (`dedup::TimedIndex`): the operations a write
//! issues after a page's probe start no earlier than that page's hashing ends. The simulator runs
//! the whole write before the next request, so those operations are placed before a read that
//! arrives while the write is still being hashed; the emulator lets such a read use the idle
//! time they leave on its plane and bus if it fits there (`nand_emu` delayed operations), and
//! queues it behind them otherwise.
//!
//! Simplifications (stated in docs/eval/dedup/README.md): reads are not given priority over flash
//! operations already issued; the buffer transfer itself costs no time.

use std::collections::{HashMap, VecDeque};

/// The buffer and the hash processor (all times in ns).
#[derive(Debug)]
pub struct WriteBuffer {
    capacity: u64,
    /// (release time, pages), earliest release first.
    held: VecDeque<(u64, u64)>,
    occupied: u64,
    /// Logical page -> when its newest buffered write leaves the buffer.
    resident: HashMap<u32, u64>,
    /// The latest admission so far (admission is FIFO).
    last_admit: u64,
    /// The latest arrival so far (arrivals come in time order).
    last_arrival: u64,
    /// When the hash processor is next free.
    cpu_free: u64,
}

impl WriteBuffer {
    /// A buffer of `capacity_pages` pages (at least one).
    pub fn new(capacity_pages: u64) -> Self {
        WriteBuffer {
            capacity: capacity_pages.max(1),
            held: VecDeque::new(),
            occupied: 0,
            resident: HashMap::new(),
            last_admit: 0,
            last_arrival: 0,
            cpu_free: 0,
        }
    }

    /// Buffer size in pages.
    pub fn capacity(&self) -> u64 {
        self.capacity
    }

    /// Pages held at `t` (releases up to `t` applied).
    pub fn occupied_at(&mut self, t: u64) -> u64 {
        self.release_until(t);
        self.occupied
    }

    fn release_until(&mut self, t: u64) {
        while let Some(&(r, p)) = self.held.front() {
            if r > t {
                break;
            }
            self.held.pop_front();
            self.occupied -= p;
        }
    }

    /// Whether logical page `lpn` is in the buffer at `t` (a read of it is served there).
    pub fn holds(&self, lpn: u32, t: u64) -> bool {
        self.resident.get(&lpn).is_some_and(|&r| r > t)
    }

    /// When a request of `pages` arriving at `t` enters the buffer: no earlier than the previous
    /// admission (FIFO) and once its pages fit. A request with no pages (a read served wholly
    /// from the buffer) is admitted at `t`.
    pub fn admit(&mut self, t: u64, pages: u64) -> u64 {
        self.last_arrival = self.last_arrival.max(t);
        if pages == 0 {
            return t;
        }
        let need = pages.min(self.capacity);
        let mut at = t.max(self.last_admit);
        self.release_until(at);
        while self.occupied + need > self.capacity {
            let Some((r, p)) = self.held.pop_front() else { break };
            self.occupied -= p;
            at = at.max(r);
        }
        self.last_admit = at;
        at
    }

    /// When a write admitted at `admitted` starts hashing (and its flash work is issued).
    pub fn issue_at(&self, admitted: u64) -> u64 {
        admitted.max(self.cpu_free)
    }

    /// A request's `pages` occupy the buffer until `release`; for a write, `lpns` are the logical
    /// pages it holds and the hash processor is busy until `cpu_busy_until`.
    pub fn hold(&mut self, release: u64, pages: u64, lpns: &[u32], cpu_busy_until: Option<u64>) {
        let pages = pages.min(self.capacity);
        if pages > 0 {
            let at = self.held.partition_point(|&(r, _)| r <= release);
            self.held.insert(at, (release, pages));
            self.occupied += pages;
        }
        for &l in lpns {
            let r = self.resident.entry(l).or_insert(0);
            *r = (*r).max(release);
        }
        if let Some(c) = cpu_busy_until {
            self.cpu_free = self.cpu_free.max(c);
        }
        // Pages released before the latest arrival cannot serve a later read.
        if self.resident.len() > 4 * self.capacity as usize {
            let now = self.last_arrival;
            self.resident.retain(|_, r| *r > now);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tiny trace through a 4-page buffer, every time worked out by hand.
    #[test]
    fn admission_release_and_read_hits_by_hand() {
        let mut b = WriteBuffer::new(4);
        // t=0: write of 3 pages (lpn 0..3), admitted at once; hashing 10, flash done at 100.
        assert_eq!(b.admit(0, 3), 0);
        assert_eq!(b.issue_at(0), 0);
        b.hold(100, 3, &[0, 1, 2], Some(10));
        // t=5: write of 2 pages: 3 + 2 > 4, waits for the first write's release at 100; the
        // processor is free at 10, so it is issued at 100.
        assert_eq!(b.admit(5, 2), 100);
        assert_eq!(b.issue_at(100), 100);
        b.hold(250, 2, &[3, 4], Some(120));
        // t=6: a read of one page arrives behind it (FIFO): admitted at 100 too (2 + 1 <= 4).
        assert_eq!(b.admit(6, 1), 100);
        b.hold(130, 1, &[], None);
        assert_eq!(b.occupied_at(100), 3);
        // Page 3 is buffered until 250, page 0 left at 100.
        assert!(b.holds(3, 200) && !b.holds(3, 250) && !b.holds(0, 100) && b.holds(0, 99));
        // A read served wholly from the buffer is admitted on arrival.
        assert_eq!(b.admit(200, 0), 200);
        // t=140: a write of 4 pages needs the whole buffer: the read left at 130, the write at 250.
        assert_eq!(b.admit(140, 4), 250);
        // The processor: busy until 120, so a write admitted at 110 hashes from 120.
        assert_eq!(b.issue_at(110), 120);
        // A request larger than the buffer waits for it to empty and then fills it.
        b.hold(400, 4, &[], None);
        assert_eq!(b.admit(260, 9), 400);
        assert_eq!(b.occupied_at(400), 0);
    }
}
