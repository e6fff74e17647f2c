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
//! queues it behind them otherwise (with read priority it goes before them: they have not begun).
//!
//! With read priority (`--read-priority on`, `nand_emu` `set_read_priority`) a host read's flash
//! reads go before programs queued earlier, which then end later than the completion the
//! simulator saw when it issued them: the buffer follows the emulator's window completions
//! ([`WriteBuffer::follow`], `nand_emu::WindowEnds`) and holds a request's pages until its
//! operations really end.
//!
//! Simplifications (stated in docs/eval/dedup/README.md): without `--read-priority on` reads are
//! not given priority over flash operations already issued; the buffer transfer itself costs no
//! time.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use crate::emulator::WindowEnds;

/// No completion window (the release time is final).
const NO_WINDOW: u64 = u64::MAX;

/// The buffer and the hash processor (all times in ns).
#[derive(Debug)]
pub struct WriteBuffer {
    capacity: u64,
    /// (release time, pages, completion window), earliest release first; a release time is
    /// raised to its window's completion when it is reached ([`Self::follow`]).
    held: VecDeque<(u64, u64, u64)>,
    occupied: u64,
    /// Logical page -> (when its newest buffered write leaves the buffer, that write's window).
    resident: HashMap<u32, (u64, u64)>,
    /// The emulator's window completions, followed with read priority.
    windows: Option<Arc<Mutex<WindowEnds>>>,
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
            windows: None,
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

    /// Holds each request's pages until its completion window (the emulator's, opened when the
    /// request's flash work was issued) ends, as `windows` reports it when the release is
    /// reached, not only until the completion given to [`Self::hold`] (read priority moves
    /// queued programs later after they were issued).
    pub fn follow(&mut self, windows: Arc<Mutex<WindowEnds>>) {
        self.windows = Some(windows);
    }

    /// Release time `r` of window `w` as of now: raised to the window's completion.
    fn current_release(&self, r: u64, w: u64) -> u64 {
        match (&self.windows, w) {
            (Some(ws), w) if w != NO_WINDOW => {
                ws.lock().ok().and_then(|ws| ws.end_of(w)).map_or(r, |e| r.max(e))
            }
            _ => r,
        }
    }

    /// Releases the earliest held request if it leaves by `t`, its release time first raised
    /// to its window's completion (a raised one is put back in order); returns its release time.
    fn release_first(&mut self, t: u64) -> Option<u64> {
        loop {
            let &(r, _, _) = self.held.front()?;
            if r > t {
                return None;
            }
            let (r, p, w) = self.held.pop_front()?;
            let c = self.current_release(r, w);
            if c == r {
                self.occupied -= p;
                return Some(r);
            }
            self.insert_held(c, p, w);
        }
    }

    fn insert_held(&mut self, release: u64, pages: u64, w: u64) {
        let at = self.held.partition_point(|&(r, _, _)| r <= release);
        self.held.insert(at, (release, pages, w));
    }

    fn release_until(&mut self, t: u64) {
        while self.release_first(t).is_some() {}
    }

    /// Whether logical page `lpn` is in the buffer at `t` (a read of it is served there).
    pub fn holds(&self, lpn: u32, t: u64) -> bool {
        self.resident.get(&lpn).is_some_and(|&(r, w)| r > t || self.current_release(r, w) > t)
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
            let Some(r) = self.release_first(u64::MAX) else { break };
            at = at.max(r);
        }
        self.last_admit = at;
        at
    }

    /// When a write admitted at `admitted` starts hashing (and its flash work is issued).
    pub fn issue_at(&self, admitted: u64) -> u64 {
        admitted.max(self.cpu_free)
    }

    /// A request's `pages` occupy the buffer until `release` (or, with [`Self::follow`], until
    /// the emulator's current window ends, if later); for a write, `lpns` are the logical pages
    /// it holds and the hash processor is busy until `cpu_busy_until`.
    pub fn hold(&mut self, release: u64, pages: u64, lpns: &[u32], cpu_busy_until: Option<u64>) {
        let pages = pages.min(self.capacity);
        let w =
            self.windows.as_ref().and_then(|ws| ws.lock().ok().map(|ws| ws.current())).unwrap_or(NO_WINDOW);
        if pages > 0 {
            self.insert_held(release, pages, w);
            self.occupied += pages;
        }
        for &l in lpns {
            let r = self.resident.entry(l).or_insert((0, w));
            *r = (r.0.max(release), w);
        }
        if let Some(c) = cpu_busy_until {
            self.cpu_free = self.cpu_free.max(c);
        }
        // Pages released before the latest arrival cannot serve a later read.
        if self.resident.len() > 4 * self.capacity as usize {
            let now = self.last_arrival;
            let mut resident = std::mem::take(&mut self.resident);
            resident.retain(|_, &mut (r, w)| r > now || self.current_release(r, w) > now);
            self.resident = resident;
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

    /// With read priority the emulator moves a write's programs later after the simulator saw
    /// its completion: the buffer holds its pages until its window's completion as it is when
    /// the release comes due. Without [`WriteBuffer::follow`] the release is the one given.
    #[test]
    fn releases_follow_the_windows_completion() {
        for follow in [false, true] {
            let windows = Arc::new(Mutex::new(WindowEnds::new()));
            let mut b = WriteBuffer::new(4);
            if follow {
                b.follow(windows.clone());
            }
            // Window 1: a write of 3 pages (lpn 0..3) whose programs end at 100 when issued.
            windows.lock().unwrap().open(0);
            windows.lock().unwrap().note(1, 100);
            assert_eq!(b.admit(0, 3), 0);
            b.hold(100, 3, &[0, 1, 2], Some(10));
            // Window 2: a read of one page, done at 40 (reads are not moved).
            windows.lock().unwrap().open(5);
            windows.lock().unwrap().note(2, 40);
            assert_eq!(b.admit(5, 1), 5);
            b.hold(40, 1, &[], None);
            // Later reads went first: window 1's programs now end at 180.
            windows.lock().unwrap().note(1, 180);
            // Page 0 is still buffered at 150 only when followed.
            assert_eq!(b.holds(0, 150), follow);
            assert!(!b.holds(0, 180));
            // A write of 2 pages at 50: the read left at 40 (3 + 2 > 4 still), then it waits for
            // the first write: 100 as given, 180 as it really ends.
            windows.lock().unwrap().open(50);
            assert_eq!(b.admit(50, 2), if follow { 180 } else { 100 });
            assert_eq!(b.occupied_at(180), 0);
        }
    }
}
