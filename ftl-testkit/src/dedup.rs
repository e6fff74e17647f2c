//! Owned buffers for deduplication on the host: the secondary map, its reverse index, the pending
//! share records (`ftl_core::dedup::DedupMemory`) and the CAFTL fingerprint store with its
//! pre-hash and location tables (`ftl_policies::dedup::CaftlIndex`), sized from a few numbers.

use ftl_core::dedup::shares::{page_capacity, ShareRecord};
use ftl_core::dedup::table::Slot;
use ftl_core::dedup::vmap::VirtualEntry;
use ftl_core::dedup::DedupMemory;
use ftl_policies::dedup::{
    Accel, Bucket, CaftlIndex, CrcSlot, Fingerprint, FingerprintStore, Segment, StoreMemory,
};

/// Sizes of the deduplication buffers.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct DedupSizes {
    /// Virtual pages (contents shared at once).
    pub virtual_pages: usize,
    /// Fingerprint-store buckets.
    pub buckets: usize,
    /// Fingerprint-store segments.
    pub segments: usize,
    /// Bytes of a page (sizes the pending share records to one journal page).
    pub page_bytes: u32,
}

/// Every buffer deduplication needs, owned; `K` entries per bucket.
pub struct DedupBuffers<const K: usize> {
    virtual_entries: Vec<VirtualEntry>,
    reverse: Vec<Slot<u32>>,
    pending: Vec<ShareRecord>,
    buckets: Vec<Bucket<K>>,
    bucket_list: Vec<u32>,
    segments: Vec<Segment>,
    crc: Vec<CrcSlot>,
    locations: Vec<Slot<Fingerprint>>,
}

impl<const K: usize> DedupBuffers<K> {
    /// Buffers of `sizes`.
    pub fn new(sizes: DedupSizes) -> Self {
        let capacity = sizes.buckets * K;
        let table = |n: usize| (n + 1).next_power_of_two().max(2);
        DedupBuffers {
            virtual_entries: vec![VirtualEntry::EMPTY; sizes.virtual_pages],
            reverse: vec![Slot { key: 0, value: 0 }; table(2 * sizes.virtual_pages)],
            pending: vec![ShareRecord::EMPTY; page_capacity(sizes.page_bytes).max(1)],
            buckets: (0..sizes.buckets).map(|_| Bucket::default()).collect(),
            bucket_list: vec![0; sizes.buckets],
            segments: vec![Segment::EMPTY; sizes.segments.max(1)],
            crc: vec![CrcSlot::EMPTY; table(2 * capacity)],
            locations: vec![Slot { key: 0, value: Fingerprint::default() }; table(2 * capacity)],
        }
    }

    /// Fingerprint entries the store holds.
    pub fn index_capacity(&self) -> usize {
        self.buckets.len() * K
    }

    /// Bytes held.
    pub fn bytes(&self) -> usize {
        self.virtual_entries.len() * core::mem::size_of::<VirtualEntry>()
            + self.reverse.len() * core::mem::size_of::<Slot<u32>>()
            + self.pending.len() * core::mem::size_of::<ShareRecord>()
            + self.buckets.len() * core::mem::size_of::<Bucket<K>>()
            + self.bucket_list.len() * 4
            + self.segments.len() * core::mem::size_of::<Segment>()
            + self.crc.len() * core::mem::size_of::<CrcSlot>()
            + self.locations.len() * core::mem::size_of::<Slot<Fingerprint>>()
    }

    /// The index (pre-hashing if `prehash`, searching with `accel`) and the core's memory,
    /// borrowed for one FTL instance.
    pub fn parts(&mut self, prehash: bool, accel: Accel) -> (CaftlIndex<'_, K>, DedupMemory<'_>) {
        let crc: &mut [CrcSlot] = if prehash { &mut self.crc } else { &mut [] };
        let store = FingerprintStore::new(
            StoreMemory {
                buckets: &mut self.buckets,
                bucket_list: &mut self.bucket_list,
                segments: &mut self.segments,
                crc_slots: crc,
            },
            accel,
        )
        .expect("store sizes are valid by construction");
        let index = CaftlIndex::new(store, prehash, &mut self.locations)
            .expect("location table sizes are valid by construction");
        (
            index,
            DedupMemory {
                virtual_entries: &mut self.virtual_entries,
                reverse_slots: &mut self.reverse,
                pending: &mut self.pending,
            },
        )
    }
}
