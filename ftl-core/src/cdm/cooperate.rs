//! How the FTL cooperates with the NV cache: the read, write, trim and GC hooks, eviction with
//! write-back, and mount's reconciliation of the flash map with the NV directory.
//!
//! Invariant (RAM): if `lpn` is cached in slot `s`, then either the flash map points at a page
//! holding the same data as `s` (the slot is *clean*: that flash page is removable), or the flash
//! map has no entry for `lpn` and `s` is marked as the only copy.
//!
//! Ordering that makes every step safe against a cut:
//! - host write: flash program (sequence `q`), map update, old slot freed, new slot filled with
//!   sequence `q`; the flash copy always exists before the cache copy;
//! - GC drop: RAM only (map entry cleared, slot marked only copy); the NV directory already says
//!   everything mount needs (see below), so the victim may be erased at once;
//! - eviction of an only copy: flash program first, then the slot is freed;
//! - trim of a cached only copy: the trim is journaled (durable) before the slot is freed.
//!
//! Mount (between replay and the rebuild of the valid bitmap): every live NV slot is compared
//! with the flash mapping of its page by sequence number. A flash page of the same logical page
//! with a larger sequence is newer (the slot is stale and freed); a page with the same or a
//! smaller sequence is kept and the slot clean if its data reads back whole and equal to the
//! slot's (the same write, or with deduplication an older shared page of the same content);
//! otherwise, or with a mapping into an erased, reused or non-data page (a checkpoint older than
//! a GC drop), or no mapping, the slot holds the newest copy: the flash entry is cleared and the
//! slot becomes the only copy. Two live slots of one page keep the larger sequence. The FTL's
//! next sequence number is raised above every slot's.

use nand_hal::{BlockId, NandFlash};

use super::cache::{NvCache, NvCounters, NvPolicy, ReadFill};
use crate::blocks::BlockState;
use crate::frontier::Source;
use crate::map::MappingTable;
use crate::meta::{PageKind, PageMeta, SpareState, META_LEN};
use crate::policy::{PageCodec, PolicySet, Stream};
use crate::{Error, Ftl};

/// What mount concluded about one slot.
enum Verdict {
    /// Flash holds the same data: keep both.
    Clean,
    /// The slot holds the newest (only) copy.
    OnlyCopy,
    /// Flash is newer: free the slot.
    Stale,
}

impl<'m, N: NandFlash, P: PolicySet, M: MappingTable> Ftl<'m, N, P, M> {
    /// Attaches the NV cache `ext` asks for: at format the cache is formatted first (so a cut
    /// during format never leaves an earlier life's cached pages next to a new image); at mount
    /// `Error::NotFormatted` if the NV memory holds no cache of this shape.
    pub(crate) fn attach_cache(
        &mut self,
        ext: &mut crate::ext::Extensions<'m>,
        open: crate::ext::Open,
    ) -> Result<(), Error> {
        let Some(mut cache) = ext.cache.take() else { return Ok(()) };
        cache.bind(self.geo.data_bytes)?;
        match open {
            crate::ext::Open::Format => cache.format()?,
            crate::ext::Open::Mount => {
                if !cache.header_ok()? {
                    return Err(Error::NotFormatted);
                }
            }
        }
        self.ext.nv = Some(cache);
        Ok(())
    }

    /// Whether the FTL runs with an NV cache.
    pub(crate) fn nv_on(&self) -> bool {
        self.ext.nv.is_some()
    }

    /// After mount: sequence numbers continue above every slot's; a slot that became the only
    /// copy of its page makes the next unmount write a checkpoint.
    pub(crate) fn nv_after_mount(&mut self) {
        if let Some(nv) = self.ext.nv.as_ref() {
            self.seq = self.seq.max(nv.max_seq + 1);
            if nv.counters.mount_only_copy > 0 {
                self.dirty = true;
            }
        }
    }

    /// The NV cache, if the FTL runs with one.
    pub fn nv_cache(&self) -> Option<&NvCache<'m>> {
        self.ext.nv.as_ref()
    }

    /// The NV cache's counters, if the FTL runs with one.
    pub fn nv_counters(&self) -> Option<NvCounters> {
        self.ext.nv.as_ref().map(|c| *c.counters())
    }

    /// Zeroes the NV cache's counters.
    pub fn reset_nv_counters(&mut self) {
        if let Some(c) = self.ext.nv.as_mut() {
            c.reset_counters();
        }
    }

    /// Writes every page whose only copy is in the cache to flash (normal writes), so that the
    /// flash alone holds every page again; the cache keeps its (now clean) contents. Call it,
    /// then `unmount`, before mounting the device without its cache (e.g. to replace the NVM).
    pub fn nv_write_back_all(&mut self) -> Result<(), Error> {
        let n = self.ext.nv.as_ref().map_or(0, |c| c.slot_count());
        for s in 0..n {
            if self.ext.nv.as_ref().is_some_and(|c| c.is_live(s) && c.is_dirty(s)) {
                self.nv_write_back(s)?;
            }
        }
        Ok(())
    }

    /// Whether the cache holds `lpn` (its current data; no counter moves). FlexECC's verify and
    /// the multi-plane read's grouping ask it.
    pub(crate) fn nv_holds(&self, lpn: u32) -> bool {
        self.ext.nv.as_ref().is_some_and(|nv| nv.lookup(lpn).is_some())
    }

    /// Whether a write-back cache takes host writes (then they are not striped: `multiplane.rs`).
    pub(crate) fn nv_takes_writes(&self) -> bool {
        self.ext.nv.as_ref().is_some_and(|nv| nv.config().write_back)
    }

    /// Whether `k` more pages put in the cache might evict an only copy (whose write-back
    /// programs flash): true if one of the `k` least recently used slots holds one. A stripe's
    /// `k` inserts after its multi-plane program evict at most the `k` least recently used
    /// slots (each evicts at most one, the least recently used; a page already cached frees its
    /// own slot instead), so when this is false nothing is programmed between the stripe's
    /// program and its last page's remap (`multiplane.rs`).
    pub(crate) fn nv_may_write_back(&self, k: usize) -> bool {
        self.ext.nv.as_ref().is_some_and(|nv| nv.dirty_among_lru(k))
    }

    /// Read hook: serves `lpn` from the cache if it is there.
    pub(crate) fn nv_read_hit(&mut self, lpn: u32, out: &mut [u8]) -> Result<bool, Error> {
        let Some(nv) = self.ext.nv.as_mut() else { return Ok(false) };
        match nv.lookup(lpn) {
            Some(s) => {
                nv.read_data(s, out)?;
                nv.touch(s);
                nv.counters.read_hits += 1;
                Ok(true)
            }
            None => {
                nv.counters.read_misses += 1;
                Ok(false)
            }
        }
    }

    /// Read hook: `data` of `lpn` was read from the flash page with sequence `seq`; cache it.
    pub(crate) fn nv_fill(&mut self, lpn: u32, data: &[u8], seq: u64) -> Result<(), Error> {
        let Some(nv) = self.ext.nv.as_ref() else { return Ok(()) };
        match nv.config().read_fill {
            ReadFill::Off => return Ok(()),
            ReadFill::Lru => {}
            ReadFill::Clean => {
                if !nv.has_free() && nv.lru().is_some_and(|v| nv.is_dirty(v)) {
                    return Ok(());
                }
            }
        }
        let s = self.nv_free_slot()?;
        if let Some(nv) = self.ext.nv.as_mut() {
            nv.store(s, lpn, seq, data)?;
            nv.counters.read_fills += 1;
        }
        Ok(())
    }

    /// Write hook: `data` of `lpn` was just programmed with sequence `seq` and mapped.
    pub(crate) fn nv_after_write(&mut self, lpn: u32, data: &[u8], seq: u64) -> Result<(), Error> {
        let Some(nv) = self.ext.nv.as_mut() else { return Ok(()) };
        if let Some(s) = nv.lookup(lpn) {
            nv.counters.write_hits += 1;
            nv.remove(s)?;
        }
        let s = self.nv_free_slot()?;
        if let Some(nv) = self.ext.nv.as_mut() {
            nv.store(s, lpn, seq, data)?;
            nv.counters.write_inserts += 1;
        }
        Ok(())
    }

    /// Write hook of a write-back cache: the page goes to the cache only, as the only copy of its
    /// page (true); its flash copy, if any, is unmapped. Power loss: the slot is in the NVM
    /// before the map changes; a mount that finds the old flash mapping (the unmapping is not
    /// journaled) keeps the slot, which is newer, unless the flash page holds the same data.
    pub(crate) fn nv_write_hook(&mut self, lpn: u32, data: &[u8]) -> Result<bool, Error> {
        if !self.ext.nv.as_ref().is_some_and(|nv| nv.config().write_back) {
            return Ok(false);
        }
        // A free slot first: an eviction may write an only copy back (programs flash).
        let s = self.nv_free_slot()?;
        let seq = self.seq;
        self.seq += 1;
        let Some(nv) = self.ext.nv.as_mut() else { return Ok(false) };
        let old = nv.lookup(lpn);
        if old.is_some() {
            nv.counters.write_hits += 1;
        }
        nv.replace(s, old, lpn, seq, data)?;
        nv.counters.write_inserts += 1;
        self.remap(lpn, None)?;
        self.counters.host_write_pages += 1;
        Ok(true)
    }

    /// Trim hook, after the trim is applied to the map and queued for the journal: cached pages
    /// in the range leave the cache; if one was an only copy, the trim is journaled first.
    pub(crate) fn nv_trim(&mut self, lpn: u32, count: u32) -> Result<(), Error> {
        let Some(nv) = self.ext.nv.as_ref() else { return Ok(()) };
        if nv.is_empty() {
            return Ok(());
        }
        let n = nv.slot_count();
        let end = lpn as u64 + count as u64;
        let in_range =
            |nv: &NvCache<'_>, s: u32| nv.is_live(s) && (lpn as u64..end).contains(&(nv.lpn_of(s) as u64));
        // The slots concerned: looked up by page for short ranges, scanned otherwise.
        let by_page = count <= n;
        let slot_at = |nv: &NvCache<'_>, i: u32| -> Option<u32> {
            if by_page {
                nv.lookup(lpn + i)
            } else {
                Some(i).filter(|&s| in_range(nv, s))
            }
        };
        let steps = if by_page { count } else { n };
        let any_only_copy = (0..steps).any(|i| slot_at(nv, i).is_some_and(|s| nv.is_dirty(s)));
        if any_only_copy {
            if let Err(e) = self.write_journal() {
                // The trim is not durable: the cached data stays, now as the only copy (the map
                // entries are gone), so nothing is lost and reads keep the pre-trim content.
                if let Some(nv) = self.ext.nv.as_mut() {
                    for i in 0..steps {
                        if let Some(s) = slot_at(nv, i) {
                            nv.set_dirty(s, true);
                        }
                    }
                }
                return Err(e);
            }
        }
        let mut first_err = None;
        if let Some(nv) = self.ext.nv.as_mut() {
            for i in 0..steps {
                if let Some(s) = slot_at(nv, i) {
                    if let Err(e) = nv.remove(s) {
                        first_err.get_or_insert(e);
                    }
                }
            }
        }
        first_err.map_or(Ok(()), Err)
    }

    /// GC hook, before the valid pages of victim `b` are moved: under CDM, every valid page of
    /// `b` whose data is cached is dropped (the cache becomes its only copy) instead of copied.
    pub(crate) fn nv_drop_removable(&mut self, b: BlockId) {
        let Some(nv) = self.ext.nv.as_ref() else { return };
        if nv.config().policy != NvPolicy::Cdm || nv.is_empty() || self.blocks.get(b).valid() == 0 {
            return;
        }
        for s in 0..nv.slot_count() {
            let Some(nv) = self.ext.nv.as_ref() else { return };
            if !nv.is_live(s) || nv.is_dirty(s) {
                continue;
            }
            let lpn = nv.lpn_of(s);
            let Some(p) = self.map.get(lpn) else { continue };
            // A second write (wom) has two halves in two blocks; GC moves it whole.
            if self.geo.block_of(p) != b || !self.is_valid_page(p) || self.reuse_is_second(p) {
                continue;
            }
            self.map.set(lpn, None);
            self.set_valid_bit(p, false);
            self.dirty = true;
            if let Some(nv) = self.ext.nv.as_mut() {
                nv.set_dirty(s, true);
                nv.counters.gc_drops += 1;
            }
        }
    }

    /// A free slot, evicting the least recently used one (written to flash first if it holds the
    /// only copy of its page).
    fn nv_free_slot(&mut self) -> Result<u32, Error> {
        loop {
            let nv = self.ext.nv.as_mut().ok_or(Error::Config)?;
            if let Some(s) = nv.take_free() {
                return Ok(s);
            }
            let v = nv.lru().ok_or(Error::Config)?;
            if nv.is_dirty(v) {
                self.nv_write_back(v)?;
            }
            let nv = self.ext.nv.as_mut().ok_or(Error::Config)?;
            nv.counters.evictions += 1;
            nv.remove(v)?;
        }
    }

    /// Writes slot `v` (an only copy) to flash as a normal write and maps it; the slot is clean
    /// afterwards.
    fn nv_write_back(&mut self, v: u32) -> Result<(), Error> {
        let plane = self.take_next_plane();
        // GC may run here (it only marks slots as only copies; it never frees one).
        let plane = self.ensure_frontier(plane, Stream::Host)?;
        let d = self.geo.data_bytes as usize;
        let Some(nv) = self.ext.nv.as_mut() else { return Ok(()) };
        if !nv.is_live(v) || !nv.is_dirty(v) {
            return Ok(());
        }
        let lpn = nv.lpn_of(v);
        nv.read_data(v, &mut self.buf[..d])?;
        let page =
            self.append(plane, Stream::Host, PageKind::Data, lpn, 0, Source::Buffer { encode: true })?;
        self.remap(lpn, Some(page))?;
        if let Some(nv) = self.ext.nv.as_mut() {
            nv.set_dirty(v, false);
            nv.counters.write_backs += 1;
        }
        Ok(())
    }

    /// Mount hook, after replay and before the valid bitmap is rebuilt from the map: loads the
    /// NV directory and reconciles it with the map (see the module documentation).
    pub(crate) fn nv_reconcile(&mut self) -> Result<(), Error> {
        let Some(nv) = self.ext.nv.as_mut() else { return Ok(()) };
        nv.begin_load();
        let d = self.geo.data_bytes as usize;
        let n = nv.slot_count();
        let mut restored = 0u64;
        let mut only = 0u64;
        let mut stale = 0u64;
        // Pass 1: live entries with intact data; duplicates keep the larger sequence.
        for s in 0..n {
            let Some(nv) = self.ext.nv.as_mut() else { return Ok(()) };
            let Some(e) = nv.read_entry(s)? else { continue };
            if e.lpn >= self.cfg.logical_pages {
                return Err(Error::Corrupt);
            }
            nv.read_data(s, &mut self.buf[..d])?;
            if crate::crc32c::crc32c(&self.buf[..d]) != e.data_crc {
                continue;
            }
            if let Some(o) = nv.lookup(e.lpn) {
                let older = nv.read_entry(o)?.map_or(0, |oe| oe.seq);
                if older >= e.seq {
                    nv.discard_loaded(s)?;
                    stale += 1;
                    continue;
                }
                nv.remove(o)?;
                stale += 1;
            }
            nv.adopt_loaded(s, e.lpn, e.seq);
        }
        // Pass 2: each live slot against the flash mapping.
        for s in 0..n {
            let Some(nv) = self.ext.nv.as_mut() else { return Ok(()) };
            if !nv.is_live(s) {
                continue;
            }
            let lpn = nv.lpn_of(s);
            let seq = nv.read_entry(s)?.map_or(0, |e| e.seq);
            let verdict = self.nv_judge(s, lpn, seq)?;
            let Some(nv) = self.ext.nv.as_mut() else { return Ok(()) };
            match verdict {
                Verdict::Clean => restored += 1,
                Verdict::OnlyCopy => {
                    // Raw map update: the bitmap is rebuilt from the map afterwards (and a
                    // shared page's references with it, as replay's are).
                    let prev = self.map.set(lpn, None);
                    self.dedup_replay_unref(prev);
                    let Some(nv) = self.ext.nv.as_mut() else { return Ok(()) };
                    nv.set_dirty(s, true);
                    restored += 1;
                    only += 1;
                }
                Verdict::Stale => {
                    nv.remove(s)?;
                    stale += 1;
                }
            }
        }
        if let Some(nv) = self.ext.nv.as_mut() {
            nv.rebuild_free_list();
            nv.counters.mount_restored = restored;
            nv.counters.mount_only_copy = only;
            nv.counters.mount_stale = stale;
        }
        Ok(())
    }

    /// Compares slot `s` (page `lpn`, sequence `seq`) with the flash mapping of `lpn`.
    fn nv_judge(&mut self, s: u32, lpn: u32, seq: u64) -> Result<Verdict, Error> {
        let Some(p) = self.map.get(lpn) else { return Ok(Verdict::OnlyCopy) };
        // A shared page's spare names its first owner, not `lpn`.
        let (p, shared) = self.dedup_resolve(p);
        if !self.geo.contains_page(p) || self.blocks.state(self.geo.block_of(p)) != BlockState::Used {
            return Ok(Verdict::OnlyCopy);
        }
        // With second writes, the page is read as a host read reads it (decoded or unscrambled).
        if let Some(copy) = self.reuse_flash_copy(lpn, p)? {
            return Ok(match copy {
                None => Verdict::OnlyCopy,
                Some(fseq) if fseq > seq => Verdict::Stale,
                Some(_) => self.nv_same_data(s)?,
            });
        }
        let d = self.geo.data_bytes as usize;
        let spare_len = META_LEN + self.codec_len;
        self.counters.nand_reads += 1;
        self.nand.read_spare(p, &mut self.buf[d..d + META_LEN])?;
        let fseq = match PageMeta::decode(&self.buf[d..d + META_LEN]) {
            SpareState::Valid(m) if m.kind == PageKind::Data && (m.tag == lpn || shared) => m.seq,
            _ => return Ok(Verdict::OnlyCopy),
        };
        // A newer flash page makes the slot stale, but not through a shared mapping: the shared
        // page's sequence number dates the page (a GC move renews it), not the mapping, which
        // replay may have restored from an older share record after a CDM drop (drops are not
        // journaled: the slot held the page's only copy) while the secondary-map entry now names
        // another content's page. The data decides then (below).
        if fseq > seq && !shared {
            return Ok(Verdict::Stale);
        }
        // The same write, or an older page with the same data (a deduplicated write's copy is
        // newer than the shared page it points at): keep the flash copy only if it reads back
        // whole and equal.
        self.counters.nand_reads += 1;
        {
            let (data, spare) = self.buf.split_at_mut(d);
            self.nand.read_page(p, data, &mut spare[..spare_len])?;
            if self.policies.codec().decode(data, &spare[META_LEN..spare_len]).is_err() {
                return Ok(Verdict::OnlyCopy);
            }
        }
        self.nv_same_data(s)
    }

    /// Clean if slot `s` holds the data in the page buffer's data area, else the only copy.
    fn nv_same_data(&mut self, s: u32) -> Result<Verdict, Error> {
        let d = self.geo.data_bytes as usize;
        let mut chunk = [0u8; 64];
        let mut at = 0usize;
        while at < d {
            let k = (d - at).min(chunk.len());
            let Some(nv) = self.ext.nv.as_mut() else { return Ok(Verdict::OnlyCopy) };
            nv.read_data_at(s, at as u32, &mut chunk[..k])?;
            if chunk[..k] != self.buf[at..at + k] {
                return Ok(Verdict::OnlyCopy);
            }
            at += k;
        }
        Ok(Verdict::Clean)
    }
}
