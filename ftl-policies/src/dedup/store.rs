//! The paper's fingerprint store: a fixed memory budget of fixed-size buckets holding the most
//! referenced fingerprints, with the paper's three lookup accelerations.
//!
//! # Organisation
//!
//! * **Segments.** The fingerprint space is split into N segments ([`StoreMemory::segments`]'s
//!   length, 1..=65536); a fingerprint belongs to segment `f mod N`, `f` being its 160 bits read
//!   as a big-endian number (computed exactly, with a mask when N is a power of two).
//! * **Buckets.** Each segment owns a list of [`Bucket`]s taken from one shared pool (the
//!   caller's slice). A bucket holds up to `K` entries sorted by fingerprint, stored as columns
//!   (`K` = [`ENTRIES_4K`] = 141 makes a 4 KiB bucket: 29 bytes per entry, namely the 160-bit
//!   fingerprint, the 32-bit location, the 32-bit CRC of the pre-hash and the 8-bit reference
//!   counter, plus a length). Buckets are handed to segments in the order they are needed and
//!   stay with their segment until [`FingerprintStore::clear`]. The segments' bucket lists are
//!   kept as one array ([`StoreMemory::bucket_list`]) of bucket numbers grouped by segment, the
//!   paper's "array of pointers to the buckets" that bucket-level binary search needs.
//! * **Entries** are unique: a fingerprint is resident at most once.
//!
//! # Inserting and replacing
//!
//! Following the paper: a segment's new entries go into its last bucket while that has room, and
//! a new bucket from the pool is linked in when it is full. When it is full and the pool has no
//! free bucket left, the insert takes the segment's next bucket in round-robin order: a free slot
//! there (left by a removal) takes the entry; otherwise the entry replaces the bucket's coldest
//! entry (the smallest reference counter; the smallest fingerprint among equals), unless the new
//! entry is colder still ([`InsertOutcome::TooCold`]). The round-robin cursor advances on every
//! insert that reaches it, successful or not. A segment that got no bucket before the pool ran
//! out declines inserts ([`InsertOutcome::NoBucket`]).
//!
//! # Looking up, and the accelerations
//!
//! A lookup scans the segment's buckets in list order and binary-searches each (the paper's
//! baseline). [`Accel`] switches, at run time, the two search strategies:
//!
//! * **range check** (`range_check`): compare with a bucket's smallest and largest fingerprint
//!   (its first and last entries) first, and skip it if the fingerprint is outside;
//! * **bucket-level binary search** (`bucket_search`): when the segment's buckets are sorted
//!   across (every fingerprint of a bucket below every fingerprint of the next), binary-search the
//!   bucket list, comparing with each probed bucket's largest fingerprint, then search one bucket.
//!   A segment that is not sorted across is scanned as usual.
//!
//! Neither changes what is stored or what a lookup returns, only how many fingerprints are
//! compared ([`StoreStats::comparisons`]); the tests check all combinations against each other.
//!
//! The third acceleration, **hotness-based reorganisation**, is not a search strategy but a
//! placement: [`FingerprintStore::reorganize`] with [`Layout::Hotness`] moves a segment's entries
//! so that the hottest fill its first buckets (in descending reference count, each bucket still
//! sorted by fingerprint); the list-order scan then meets hot fingerprints first. Likewise the
//! sorted-across state that bucket-level binary search needs comes from the paper's "additional
//! merge sort", [`Layout::Sorted`]. Both run in place (a heap sort over the segment's entries,
//! after compacting them into the first buckets), are meant for idle time, and preserve the set
//! of resident entries, so no lookup result changes; they do move entries between buckets, so
//! later round-robin replacements may pick different victims, and the model in the tests
//! reorganises the same way. The sorted-across state survives removals, and inserts that happen
//! to land in order; any other insert ends it until the next [`Layout::Sorted`] (an empty
//! segment starts sorted). A hotness layout is not sorted across. Choosing which reorganisation
//! to run, if any, is how the hotness acceleration is switched on and off.
//!
//! The CRC pre-hash index ([`super::prehash`]) is kept exact through inserts, replacements and
//! removals, so [`DedupIndex::may_contain_crc`] never misses resident content.
//!
//! # Costs
//!
//! Memory: `buckets x size_of::<Bucket<K>>()` (4 KiB each by default) + 4 bytes per bucket for
//! the list + 20 bytes per segment + 8 bytes per pre-hash slot (a power of two above the entry
//! capacity; twice the capacity keeps probes short). A lookup compares O(buckets in the segment x
//! log K) fingerprints, O(log buckets + log K) with bucket-level binary search on a sorted
//! segment; an insert adds a lookup (the uniqueness check) and a shift of at most K entries;
//! linking a new bucket shifts the bucket list and the segments after it (O(buckets + N)); a
//! reorganisation is O(S log S) for a segment of S entries.
//!
//! Guarantees: `no_std`, no `alloc`, no floating point, no panics (every index is bounded by the
//! structure's invariants, which the constructor's checks establish).

use core::cmp::Ordering;

use super::fingerprint::Fingerprint;
use super::index::{DedupIndex, Entry, Hit, InsertOutcome, Location};
use super::prehash::{CrcIndex, CrcSlot};

/// Bytes of a default bucket.
pub const BUCKET_BYTES: usize = 4096;

/// Entries in a 4 KiB bucket (29 bytes each, plus a 2-byte length: 4091 bytes, padded to 4096).
pub const ENTRIES_4K: usize = 141;

/// Most segments a store can have.
pub const MAX_SEGMENTS: usize = 1 << 16;

/// A fingerprint as three big-endian words, so that comparing keys compares fingerprints.
#[derive(Copy, Clone, PartialEq, Eq, PartialOrd, Ord, Debug)]
struct Key {
    hi: u64,
    mid: u64,
    lo: u32,
}

impl Key {
    #[inline]
    fn of(fp: &Fingerprint) -> Key {
        let b = fp.as_bytes();
        let mut hi = [0u8; 8];
        let mut mid = [0u8; 8];
        let mut lo = [0u8; 4];
        hi.copy_from_slice(&b[0..8]);
        mid.copy_from_slice(&b[8..16]);
        lo.copy_from_slice(&b[16..20]);
        Key { hi: u64::from_be_bytes(hi), mid: u64::from_be_bytes(mid), lo: u32::from_be_bytes(lo) }
    }

    fn fingerprint(&self) -> Fingerprint {
        let mut b = [0u8; 20];
        b[0..8].copy_from_slice(&self.hi.to_be_bytes());
        b[8..16].copy_from_slice(&self.mid.to_be_bytes());
        b[16..20].copy_from_slice(&self.lo.to_be_bytes());
        Fingerprint(b)
    }
}

/// One entry as the bucket columns hold it.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
struct Raw {
    key: Key,
    loc: u32,
    crc: u32,
    hot: u8,
}

impl Raw {
    fn of(e: &Entry) -> Raw {
        Raw { key: Key::of(&e.fingerprint), loc: e.location.raw(), crc: e.crc, hot: e.hotness }
    }

    fn entry(&self) -> Entry {
        Entry {
            fingerprint: self.key.fingerprint(),
            crc: self.crc,
            location: Location::from_raw(self.loc),
            hotness: self.hot,
        }
    }
}

/// A fixed-size bucket of up to `K` entries, sorted by fingerprint. Caller memory: initialise with
/// [`Bucket::EMPTY`] (any contents are fine; the store resets a bucket when it links it in).
#[repr(C)]
pub struct Bucket<const K: usize = ENTRIES_4K> {
    hi: [u64; K],
    mid: [u64; K],
    lo: [u32; K],
    loc: [u32; K],
    crc: [u32; K],
    hot: [u8; K],
    len: u16,
}

impl<const K: usize> Bucket<K> {
    /// An empty bucket.
    pub const EMPTY: Self =
        Bucket { hi: [0; K], mid: [0; K], lo: [0; K], loc: [0; K], crc: [0; K], hot: [0; K], len: 0 };

    /// Entries a bucket holds.
    pub const CAPACITY: usize = K;

    /// An empty bucket.
    pub const fn new() -> Self {
        Self::EMPTY
    }

    #[inline]
    fn len(&self) -> usize {
        (self.len as usize).min(K)
    }

    #[inline]
    fn is_full(&self) -> bool {
        self.len() >= K
    }

    /// Compares entry `i` (< len) with `k`.
    #[inline]
    fn cmp_at(&self, i: usize, k: &Key) -> Ordering {
        match self.hi[i].cmp(&k.hi) {
            Ordering::Equal => (self.mid[i], self.lo[i]).cmp(&(k.mid, k.lo)),
            o => o,
        }
    }

    /// Binary search for `k`: `Ok(slot)` or `Err(insertion slot)`; counts comparisons.
    #[inline]
    fn search(&self, k: &Key, cmp: &mut u64) -> Result<usize, usize> {
        let (mut lo, mut hi) = (0usize, self.len());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            *cmp += 1;
            match self.cmp_at(mid, k) {
                Ordering::Less => lo = mid + 1,
                Ordering::Greater => hi = mid,
                Ordering::Equal => return Ok(mid),
            }
        }
        Err(lo)
    }

    fn get(&self, i: usize) -> Raw {
        Raw {
            key: Key { hi: self.hi[i], mid: self.mid[i], lo: self.lo[i] },
            loc: self.loc[i],
            crc: self.crc[i],
            hot: self.hot[i],
        }
    }

    fn set(&mut self, i: usize, r: Raw) {
        self.hi[i] = r.key.hi;
        self.mid[i] = r.key.mid;
        self.lo[i] = r.key.lo;
        self.loc[i] = r.loc;
        self.crc[i] = r.crc;
        self.hot[i] = r.hot;
    }

    /// Inserts at its sorted place; the bucket must not be full.
    fn insert_sorted(&mut self, r: Raw) {
        let n = self.len();
        if n >= K {
            return;
        }
        let mut scratch = 0;
        let at = match self.search(&r.key, &mut scratch) {
            Ok(i) | Err(i) => i,
        };
        self.hi.copy_within(at..n, at + 1);
        self.mid.copy_within(at..n, at + 1);
        self.lo.copy_within(at..n, at + 1);
        self.loc.copy_within(at..n, at + 1);
        self.crc.copy_within(at..n, at + 1);
        self.hot.copy_within(at..n, at + 1);
        self.set(at, r);
        self.len = (n + 1) as u16;
    }

    /// Removes entry `i` (< len) and returns it.
    fn remove_at(&mut self, i: usize) -> Raw {
        let n = self.len();
        let r = self.get(i);
        self.hi.copy_within(i + 1..n, i);
        self.mid.copy_within(i + 1..n, i);
        self.lo.copy_within(i + 1..n, i);
        self.loc.copy_within(i + 1..n, i);
        self.crc.copy_within(i + 1..n, i);
        self.hot.copy_within(i + 1..n, i);
        self.len = (n - 1) as u16;
        r
    }

    /// The first entry with the smallest reference counter.
    fn coldest(&self) -> Option<usize> {
        let hot = &self.hot[..self.len()];
        let min = *hot.iter().min()?;
        hot.iter().position(|&h| h == min)
    }
}

impl<const K: usize> Default for Bucket<K> {
    fn default() -> Self {
        Self::EMPTY
    }
}

/// A segment's bookkeeping. Caller memory: initialise with [`Segment::EMPTY`].
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Segment {
    /// First position of the segment's buckets in the bucket list.
    start: u32,
    /// Buckets linked to the segment.
    buckets: u32,
    /// Round-robin cursor (a position in the segment's list).
    rr: u32,
    /// Entries resident.
    entries: u32,
    /// With `sorted`: the buckets `0..run` are non-empty and sorted across; the rest are empty.
    run: u32,
    /// Whether the segment is sorted across buckets.
    sorted: bool,
}

impl Segment {
    /// A segment with no buckets.
    pub const EMPTY: Segment = Segment { start: 0, buckets: 0, rr: 0, entries: 0, run: 0, sorted: true };
}

impl Default for Segment {
    fn default() -> Self {
        Segment::EMPTY
    }
}

/// The caller memory of a [`FingerprintStore`].
pub struct StoreMemory<'a, const K: usize = ENTRIES_4K> {
    /// The bucket pool: the store's entry capacity is `buckets.len() x K`.
    pub buckets: &'a mut [Bucket<K>],
    /// One `u32` per bucket: the segments' bucket lists.
    pub bucket_list: &'a mut [u32],
    /// One per segment; the length is N (1..=65536).
    pub segments: &'a mut [Segment],
    /// The CRC pre-hash table: empty (no pre-hash), or a power of two greater than the entry
    /// capacity (twice the capacity or more recommended).
    pub crc_slots: &'a mut [CrcSlot],
}

/// Why [`FingerprintStore::new`] refused its memory.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum StoreError {
    /// `K` must be 1..=65535.
    BucketSize,
    /// There must be at least one bucket, and at most 2^32 - 1 entries in all.
    Buckets,
    /// The bucket list must have one element per bucket.
    BucketList,
    /// There must be 1..=65536 segments.
    Segments,
    /// The pre-hash table must be empty or a power of two greater than the entry capacity.
    CrcSlots,
}

/// Which search strategies lookups use (see the module documentation). Changing them never
/// changes a result.
#[derive(Copy, Clone, PartialEq, Eq, Debug, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Accel {
    /// Skip a bucket whose smallest..largest fingerprint range excludes the one sought.
    pub range_check: bool,
    /// Binary-search the bucket list of a segment that is sorted across buckets.
    pub bucket_search: bool,
}

impl Accel {
    /// Neither (the paper's baseline: every bucket binary-searched in list order).
    pub const NONE: Accel = Accel { range_check: false, bucket_search: false };
    /// Both, the paper's recommendation ("we would suggest applying Bucket-level Binary Search and
    /// Range Check").
    pub const ALL: Accel = Accel { range_check: true, bucket_search: true };
}

/// How [`FingerprintStore::reorganize`] arranges a segment's entries.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Layout {
    /// Hotness-based reorganisation: entries in descending reference count (ascending
    /// fingerprint among equals) fill the buckets from the list head; each bucket sorted by
    /// fingerprint.
    Hotness,
    /// The merge sort for bucket-level binary search: entries in ascending fingerprint fill the
    /// buckets from the list head, so the segment is sorted across buckets.
    Sorted,
}

/// Counters of a [`FingerprintStore`]; only [`DedupIndex::lookup`] calls count as lookups (the
/// searches inside insert, remove and the reference updates do not).
#[derive(Copy, Clone, PartialEq, Eq, Debug, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct StoreStats {
    /// Lookups.
    pub lookups: u64,
    /// Lookups that found their fingerprint.
    pub hits: u64,
    /// Fingerprint comparisons made by lookups (the paper's Figure 12 metric).
    pub comparisons: u64,
    /// Buckets binary-searched by lookups.
    pub buckets_searched: u64,
    /// Buckets a range check skipped.
    pub buckets_skipped: u64,
    /// Entries stored in free space.
    pub inserted: u64,
    /// Entries stored in place of an evicted one.
    pub replaced: u64,
    /// Inserts declined ([`InsertOutcome::TooCold`] or [`InsertOutcome::NoBucket`]).
    pub declined: u64,
    /// Entries removed.
    pub removed: u64,
}

/// Per-lookup counters.
#[derive(Default)]
struct Work {
    cmp: u64,
    searched: u64,
    skipped: u64,
}

/// `f mod N` for a 160-bit `f`.
#[derive(Copy, Clone, Debug)]
struct SegMap {
    n: u32,
    /// `2^(32 k) mod n` for k = 0..5.
    pow: [u64; 5],
}

impl SegMap {
    fn new(n: u32) -> SegMap {
        let n = n.max(1);
        let mut pow = [0u64; 5];
        let mut m = 1 % n as u64;
        for p in pow.iter_mut() {
            *p = m;
            m = (m << 32) % n as u64;
        }
        SegMap { n, pow }
    }

    /// With n <= 2^16 each product is below 2^48, and their sum below 2^51.
    #[inline]
    fn of(&self, k: &Key) -> usize {
        if self.n.is_power_of_two() {
            return (k.lo & (self.n - 1)) as usize;
        }
        let w = [k.hi >> 32, k.hi & 0xFFFF_FFFF, k.mid >> 32, k.mid & 0xFFFF_FFFF, k.lo as u64];
        let s = w[0] * self.pow[4] + w[1] * self.pow[3] + w[2] * self.pow[2] + w[3] * self.pow[1] + w[4];
        (s % self.n as u64) as usize
    }
}

/// A summary of one segment (for reports and tests).
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct SegmentInfo {
    /// Buckets linked to the segment.
    pub buckets: usize,
    /// Entries resident.
    pub entries: usize,
    /// Whether the segment is sorted across buckets (bucket-level binary search applies).
    pub sorted: bool,
}

/// The fingerprint store (see the module documentation), in caller memory.
pub struct FingerprintStore<'a, const K: usize = ENTRIES_4K> {
    buckets: &'a mut [Bucket<K>],
    list: &'a mut [u32],
    segs: &'a mut [Segment],
    crc: CrcIndex<'a>,
    map: SegMap,
    allocated: usize,
    len: usize,
    accel: Accel,
    stats: StoreStats,
}

impl<'a, const K: usize> FingerprintStore<'a, K> {
    /// An empty store over `mem` (whose contents are overwritten), searching with `accel`.
    pub fn new(mem: StoreMemory<'a, K>, accel: Accel) -> Result<Self, StoreError> {
        if K == 0 || K > u16::MAX as usize {
            return Err(StoreError::BucketSize);
        }
        let nb = mem.buckets.len();
        let capacity = nb.checked_mul(K).ok_or(StoreError::Buckets)?;
        if nb == 0 || capacity > u32::MAX as usize {
            return Err(StoreError::Buckets);
        }
        if mem.bucket_list.len() != nb {
            return Err(StoreError::BucketList);
        }
        let n = mem.segments.len();
        if n == 0 || n > MAX_SEGMENTS {
            return Err(StoreError::Segments);
        }
        let slots = mem.crc_slots.len();
        if slots != 0 && (!slots.is_power_of_two() || slots <= capacity) {
            return Err(StoreError::CrcSlots);
        }
        let crc = CrcIndex::new(mem.crc_slots).ok_or(StoreError::CrcSlots)?;
        let mut store = FingerprintStore {
            buckets: mem.buckets,
            list: mem.bucket_list,
            segs: mem.segments,
            crc,
            map: SegMap::new(n as u32),
            allocated: 0,
            len: 0,
            accel,
            stats: StoreStats::default(),
        };
        store.clear();
        Ok(store)
    }

    /// Empties the store: every bucket back in the pool, every segment empty, the pre-hash
    /// table cleared (counters kept).
    pub fn clear(&mut self) {
        self.segs.fill(Segment::EMPTY);
        self.list.fill(0);
        for b in self.buckets.iter_mut() {
            b.len = 0;
        }
        self.crc.clear();
        self.allocated = 0;
        self.len = 0;
    }

    /// The search strategies in use.
    pub fn accel(&self) -> Accel {
        self.accel
    }

    /// Changes the search strategies (takes effect at the next lookup).
    pub fn set_accel(&mut self, accel: Accel) {
        self.accel = accel;
    }

    /// The counters so far.
    pub fn stats(&self) -> StoreStats {
        self.stats
    }

    /// Zeroes the counters.
    pub fn reset_stats(&mut self) {
        self.stats = StoreStats::default();
    }

    /// Segments (N).
    pub fn segments(&self) -> usize {
        self.segs.len()
    }

    /// Buckets in the pool.
    pub fn buckets(&self) -> usize {
        self.buckets.len()
    }

    /// Buckets linked to segments so far.
    pub fn buckets_in_use(&self) -> usize {
        self.allocated
    }

    /// The segment of a fingerprint: its big-endian value modulo N.
    pub fn segment_of(&self, fingerprint: &Fingerprint) -> usize {
        self.map.of(&Key::of(fingerprint))
    }

    /// The pre-hash index.
    pub fn crc_index(&self) -> &CrcIndex<'a> {
        &self.crc
    }

    /// A summary of segment `s`, if it exists.
    pub fn segment_info(&self, s: usize) -> Option<SegmentInfo> {
        self.segs.get(s).map(|g| SegmentInfo {
            buckets: g.buckets as usize,
            entries: g.entries as usize,
            sorted: g.sorted,
        })
    }

    /// The entries of the `p`-th bucket of segment `s`'s list, in stored (fingerprint) order,
    /// or `None` if there is no such bucket.
    pub fn bucket_entries(&self, s: usize, p: usize) -> Option<impl Iterator<Item = Entry> + '_> {
        let g = self.segs.get(s)?;
        if p >= g.buckets as usize {
            return None;
        }
        let b = self.buckets.get(*self.list.get(g.start as usize + p)? as usize)?;
        Some((0..b.len()).map(move |i| b.get(i).entry()))
    }

    /// Calls `f` with every resident entry (by segment, then bucket list, then fingerprint).
    pub fn for_each_entry<F: FnMut(&Entry)>(&self, mut f: F) {
        for s in 0..self.segs.len() {
            let nb = self.segs[s].buckets as usize;
            for p in 0..nb {
                if let Some(it) = self.bucket_entries(s, p) {
                    for e in it {
                        f(&e);
                    }
                }
            }
        }
    }

    #[inline]
    fn bucket_id(&self, g: &Segment, p: usize) -> usize {
        self.list[g.start as usize + p] as usize
    }

    /// Finds `k` in segment `s`: `(list position, bucket, slot)`.
    #[inline]
    fn find(&self, k: &Key, s: usize, w: &mut Work) -> Option<(usize, usize, usize)> {
        let g = &self.segs[s];
        let Accel { range_check, bucket_search } = self.accel;
        if bucket_search && g.sorted {
            // The first bucket of the run whose largest fingerprint is >= k.
            let (mut lo, mut hi) = (0usize, g.run as usize);
            while lo < hi {
                let mid = lo + (hi - lo) / 2;
                let bk = &self.buckets[self.bucket_id(g, mid)];
                w.cmp += 1;
                match bk.cmp_at(bk.len().saturating_sub(1), k) {
                    Ordering::Less => lo = mid + 1,
                    Ordering::Greater => hi = mid,
                    Ordering::Equal => return Some((mid, self.bucket_id(g, mid), bk.len() - 1)),
                }
            }
            if lo >= g.run as usize {
                return None;
            }
            let b = self.bucket_id(g, lo);
            let bk = &self.buckets[b];
            if range_check {
                w.cmp += 1;
                if bk.cmp_at(0, k) == Ordering::Greater {
                    w.skipped += 1;
                    return None;
                }
            }
            w.searched += 1;
            return bk.search(k, &mut w.cmp).ok().map(|i| (lo, b, i));
        }
        for p in 0..g.buckets as usize {
            let b = self.bucket_id(g, p);
            let bk = &self.buckets[b];
            let n = bk.len();
            if n == 0 {
                continue;
            }
            if range_check {
                w.cmp += 1;
                if bk.cmp_at(0, k) == Ordering::Greater {
                    w.skipped += 1;
                    continue;
                }
                w.cmp += 1;
                if bk.cmp_at(n - 1, k) == Ordering::Less {
                    w.skipped += 1;
                    continue;
                }
            }
            w.searched += 1;
            if let Ok(i) = bk.search(k, &mut w.cmp) {
                return Some((p, b, i));
            }
        }
        None
    }

    /// Finds a fingerprint without counting: `(segment, list position, bucket, slot)`.
    fn locate(&self, fp: &Fingerprint) -> Option<(usize, usize, usize, usize)> {
        let k = Key::of(fp);
        let s = self.map.of(&k);
        self.find(&k, s, &mut Work::default()).map(|(p, b, i)| (s, p, b, i))
    }

    /// Links a new bucket to the end of segment `s`'s list; its list position.
    fn link_bucket(&mut self, s: usize) -> Option<usize> {
        let id = self.allocated;
        if id >= self.buckets.len() {
            return None;
        }
        let g = self.segs[s];
        let pos = (g.start + g.buckets) as usize;
        self.list.copy_within(pos..id, pos + 1);
        self.list[pos] = id as u32;
        self.buckets[id].len = 0;
        for t in self.segs[s + 1..].iter_mut() {
            t.start += 1;
        }
        self.segs[s].buckets += 1;
        self.allocated += 1;
        Some(g.buckets as usize)
    }

    /// The smallest and largest keys of the `p`-th bucket of `g` (which must not be empty).
    fn bounds(&self, g: &Segment, p: usize) -> (Key, Key) {
        let bk = &self.buckets[self.bucket_id(g, p)];
        (bk.get(0).key, bk.get(bk.len().saturating_sub(1)).key)
    }

    /// Keeps the sorted-across state of segment `s` after an insert into its `p`-th bucket.
    fn after_insert(&mut self, s: usize, p: usize) {
        let g = self.segs[s];
        if !g.sorted {
            return;
        }
        let m = g.run as usize;
        let (lo, hi) = self.bounds(&g, p);
        let left_ok = p == 0 || self.bounds(&g, p - 1).1 < lo;
        let (ok, grow) = if p < m {
            (left_ok && (p + 1 == m || hi < self.bounds(&g, p + 1).0), false)
        } else {
            (p == m && left_ok, true)
        };
        let g = &mut self.segs[s];
        if !ok {
            g.sorted = false;
        } else if grow {
            g.run += 1;
        }
    }

    /// Keeps the sorted-across state of segment `s` after a removal from its `p`-th bucket.
    fn after_remove(&mut self, s: usize, p: usize) {
        let g = self.segs[s];
        if !g.sorted || p >= g.run as usize || self.buckets[self.bucket_id(&g, p)].len() > 0 {
            return;
        }
        let g = &mut self.segs[s];
        if p + 1 == g.run as usize {
            g.run -= 1;
        } else {
            g.sorted = false;
        }
    }

    /// Stores `r` in the `p`-th bucket of segment `s` (which has room).
    fn put(&mut self, s: usize, p: usize, r: Raw) {
        let b = self.bucket_id(&self.segs[s], p);
        self.buckets[b].insert_sorted(r);
        self.segs[s].entries += 1;
        self.len += 1;
        self.after_insert(s, p);
    }

    /// Removes slot `i` of the `p`-th bucket (`b`) of segment `s`.
    fn take(&mut self, s: usize, p: usize, b: usize, i: usize) -> Raw {
        let r = self.buckets[b].remove_at(i);
        self.crc.remove(r.crc);
        self.segs[s].entries -= 1;
        self.len -= 1;
        self.after_remove(s, p);
        r
    }

    fn insert_raw(&mut self, r: Raw) -> InsertOutcome {
        let s = self.map.of(&r.key);
        if let Some((_, b, i)) = self.find(&r.key, s, &mut Work::default()) {
            return InsertOutcome::AlreadyPresent(Location::from_raw(self.buckets[b].loc[i]));
        }
        let g = self.segs[s];
        let tail = (g.buckets as usize).checked_sub(1);
        // The bucket to use, and the entry it has to give up, if any.
        let (p, victim) = if let Some(t) = tail.filter(|&t| !self.buckets[self.bucket_id(&g, t)].is_full()) {
            (t, None)
        } else if let Some(p) = self.link_bucket(s) {
            (p, None)
        } else {
            if g.buckets == 0 {
                return self.declined(InsertOutcome::NoBucket);
            }
            let p = g.rr as usize;
            self.segs[s].rr = (g.rr + 1) % g.buckets;
            let b = self.bucket_id(&g, p);
            let bk = &self.buckets[b];
            if bk.is_full() {
                match bk.coldest() {
                    Some(c) if r.hot >= bk.hot[c] => (p, Some((b, c))),
                    _ => return self.declined(InsertOutcome::TooCold),
                }
            } else {
                (p, None)
            }
        };
        let evicted = victim.map(|(b, c)| self.take(s, p, b, c));
        if !self.crc.add(r.crc) {
            // Impossible by construction (the table has more slots than the store has entries);
            // declining keeps "a pre-hash miss means not resident" true regardless.
            if let Some(v) = evicted {
                self.crc.add(v.crc);
                self.put(s, p, v);
            }
            return self.declined(InsertOutcome::NoBucket);
        }
        self.put(s, p, r);
        match evicted {
            Some(v) => {
                self.stats.replaced += 1;
                InsertOutcome::Replaced(v.entry())
            }
            None => {
                self.stats.inserted += 1;
                InsertOutcome::Inserted
            }
        }
    }

    fn declined(&mut self, o: InsertOutcome) -> InsertOutcome {
        self.stats.declined += 1;
        o
    }

    /// Reorganises every segment (see [`reorganize_segment`](Self::reorganize_segment)).
    pub fn reorganize(&mut self, layout: Layout) {
        for s in 0..self.segs.len() {
            self.reorganize_segment(s, layout);
        }
    }

    /// Rearranges segment `s`'s entries in `layout` (see the module documentation): compacts
    /// them into the first buckets of its list (the same number of buckets stays linked), then
    /// orders them. The resident set, the round-robin cursor and the pre-hash index are
    /// unchanged. Returns `false` if there is no segment `s`.
    pub fn reorganize_segment(&mut self, s: usize, layout: Layout) -> bool {
        let Some(&g) = self.segs.get(s) else { return false };
        let base = g.start as usize;
        let nb = g.buckets as usize;
        // Compact: move entries from the last non-empty bucket into the first non-full one.
        if nb > 1 {
            let (mut p, mut q) = (0usize, nb - 1);
            while p < q {
                let bp = self.list[base + p] as usize;
                let bq = self.list[base + q] as usize;
                if self.buckets[bp].is_full() {
                    p += 1;
                } else if self.buckets[bq].len() == 0 {
                    q -= 1;
                } else {
                    let n = self.buckets[bq].len();
                    let r = self.buckets[bq].get(n - 1);
                    self.buckets[bq].len = (n - 1) as u16;
                    let m = self.buckets[bp].len();
                    self.buckets[bp].set(m, r);
                    self.buckets[bp].len = (m + 1) as u16;
                }
            }
        }
        let total = g.entries as usize;
        match layout {
            Layout::Sorted => self.heapsort(base, 0, total, by_key),
            Layout::Hotness => {
                self.heapsort(base, 0, total, by_hotness);
                let mut v = 0;
                while v < total {
                    let n = K.min(total - v);
                    self.heapsort(base, v, n, by_key);
                    v += n;
                }
            }
        }
        let g = &mut self.segs[s];
        g.sorted = layout == Layout::Sorted;
        g.run = if g.sorted { total.div_ceil(K) as u32 } else { 0 };
        true
    }

    /// The `v`-th entry of a compacted segment whose list starts at `base`.
    fn vget(&self, base: usize, v: usize) -> Raw {
        self.buckets[self.list[base + v / K] as usize].get(v % K)
    }

    fn vset(&mut self, base: usize, v: usize, r: Raw) {
        let b = self.list[base + v / K] as usize;
        self.buckets[b].set(v % K, r);
    }

    /// Heap sort of the `n` entries from virtual index `first` of a compacted segment.
    fn heapsort(&mut self, base: usize, first: usize, n: usize, before: fn(&Raw, &Raw) -> Ordering) {
        if n < 2 {
            return;
        }
        let mut start = n / 2;
        while start > 0 {
            start -= 1;
            self.sift_down(base, first, start, n, before);
        }
        let mut end = n;
        while end > 1 {
            end -= 1;
            let a = self.vget(base, first);
            let z = self.vget(base, first + end);
            self.vset(base, first, z);
            self.vset(base, first + end, a);
            self.sift_down(base, first, 0, end, before);
        }
    }

    fn sift_down(
        &mut self,
        base: usize,
        first: usize,
        mut root: usize,
        end: usize,
        before: fn(&Raw, &Raw) -> Ordering,
    ) {
        let top = self.vget(base, first + root);
        loop {
            let mut child = 2 * root + 1;
            if child >= end {
                break;
            }
            let mut c = self.vget(base, first + child);
            if child + 1 < end {
                let d = self.vget(base, first + child + 1);
                if before(&c, &d) == Ordering::Less {
                    child += 1;
                    c = d;
                }
            }
            if before(&top, &c) != Ordering::Less {
                break;
            }
            self.vset(base, first + root, c);
            root = child;
        }
        self.vset(base, first + root, top);
    }
}

fn by_key(a: &Raw, b: &Raw) -> Ordering {
    a.key.cmp(&b.key)
}

fn by_hotness(a: &Raw, b: &Raw) -> Ordering {
    b.hot.cmp(&a.hot).then(a.key.cmp(&b.key))
}

impl<const K: usize> DedupIndex for FingerprintStore<'_, K> {
    fn prehash_enabled(&self) -> bool {
        self.crc.is_enabled()
    }

    #[inline]
    fn may_contain_crc(&self, crc: u32) -> bool {
        self.crc.contains(crc)
    }

    #[inline]
    fn lookup(&mut self, fingerprint: &Fingerprint) -> Option<Hit> {
        let k = Key::of(fingerprint);
        let s = self.map.of(&k);
        let mut w = Work::default();
        let found = self.find(&k, s, &mut w);
        self.stats.lookups += 1;
        self.stats.comparisons += w.cmp;
        self.stats.buckets_searched += w.searched;
        self.stats.buckets_skipped += w.skipped;
        let (_, b, i) = found?;
        self.stats.hits += 1;
        let bk = &self.buckets[b];
        Some(Hit { location: Location::from_raw(bk.loc[i]), hotness: bk.hot[i] })
    }

    fn insert(&mut self, entry: Entry) -> InsertOutcome {
        self.insert_raw(Raw::of(&entry))
    }

    fn remove(&mut self, fingerprint: &Fingerprint) -> Option<Entry> {
        let (s, p, b, i) = self.locate(fingerprint)?;
        let r = self.take(s, p, b, i);
        self.stats.removed += 1;
        Some(r.entry())
    }

    fn update_location(&mut self, fingerprint: &Fingerprint, location: Location) -> bool {
        match self.locate(fingerprint) {
            Some((_, _, b, i)) => {
                self.buckets[b].loc[i] = location.raw();
                true
            }
            None => false,
        }
    }

    fn add_ref(&mut self, fingerprint: &Fingerprint) -> Option<u8> {
        let (_, _, b, i) = self.locate(fingerprint)?;
        let h = &mut self.buckets[b].hot[i];
        *h = h.saturating_add(1);
        Some(*h)
    }

    fn drop_ref(&mut self, fingerprint: &Fingerprint) -> Option<u8> {
        let (_, _, b, i) = self.locate(fingerprint)?;
        let h = &mut self.buckets[b].hot[i];
        if *h != u8::MAX {
            *h = h.saturating_sub(1);
        }
        Some(*h)
    }

    fn set_hotness(&mut self, fingerprint: &Fingerprint, hotness: u8) -> bool {
        match self.locate(fingerprint) {
            Some((_, _, b, i)) => {
                self.buckets[b].hot[i] = hotness;
                true
            }
            None => false,
        }
    }

    fn len(&self) -> usize {
        self.len
    }

    fn capacity(&self) -> usize {
        self.buckets.len() * K
    }
}
