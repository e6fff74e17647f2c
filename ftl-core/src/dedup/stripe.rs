//! Deduplication's write path in multi-plane stripes (issue #20; `multiplane.rs`, **When**).
//!
//! With multi-plane programs on, `write_dedup` does not program a request's unique pages one by one
//! (nor `write_many_dedup` a batch's, each page its own one-page request, [`PagesIn`]): each page
//! is probed in request order, a hit is shared (or written) at once as before, and a miss or an
//! unprobed page is held back in a [`StripePages`] until a stripe's worth is held (the planes left
//! in the LUN from the rotation's next plane, plane-first order; a round of the rotation,
//! channel-first) or the request ends (a sampling unit's end flushes nothing: its pages are held as
//! any others). The held pages then go to [`Ftl::write_striped`] (one multi-plane program per
//! aligned stripe, each page remapped in order after it), and only then is each probed one inserted
//! in the index at its final location.
//! Plane-first, the first page of each stripe is classified (its stream) as it is held, the
//! others as the stripe is programmed; before the first page a request holds,
//! [`Ftl::realign_planes`] voids the pages that line the LUN's planes up if the requests before
//! kept starting their stripes one page off them (`multiplane.rs`, **Realignment**; the
//! request's pages from that page on count as its size). The voids change no mapping, reference
//! or index entry, so the sharing below is unchanged.
//!
//! The one-by-one path probes a page after every earlier page of the request was written,
//! remapped and indexed; a page probed while earlier ones are held sees the index without them.
//! Two cases differ, and in both the held pages are programmed (and indexed) first:
//! - the page's data equals a held page's (two pages with one content in one stripe): checked
//!   byte for byte before the probe, so the probe then finds the first page's content (and the
//!   second becomes a share of it, its record pending as any share's);
//! - the probe hits a location that a held page's logical page maps now (its remap would drop
//!   that reference, and may free the content): the page is probed again after the program
//!   (one probe counted; the index counts the hit's reference twice, which only weighs that
//!   entry when the store is full).
//!
//! Every other probe answers as it would after the held pages (their inserts add only their own
//! contents; their remaps drop only the locations their logical pages map), except when the
//! store is full and a held page's insert would have evicted the entry the probe found: then
//! the page shares content the one-by-one path would have written again (same data, one more
//! share). Share records: a request's logical pages are distinct and the records pending before
//! it that name them are journaled first (`dedup_order_before`), so no record is due between a
//! held page and its program. Power loss: a cut during the program leaves each page of the
//! stripe programmed, torn or erased; recovery checks the newest `planes_per_lun` data pages
//! (`recovery.rs` `torn_window`), and a share taken before the program whose record was still in
//! RAM is lost with the unacknowledged request. RAM: the held pages on the stack,
//! [`MAX_TOTAL_PLANES`] x 40 bytes, a count, the first page's stream and a flag (656 bytes on a
//! 64-bit host).

use nand_hal::{NandFlash, MAX_PLANES};

use crate::config::{StripeOrder, MAX_TOTAL_PLANES};
use crate::map::MappingTable;
use crate::multiplane::RequestTemp;
use crate::policy::{PolicySet, Stream};
use crate::{Error, Ftl};

use super::vmap::VIRTUAL_FLAG;
use super::{is_virtual, ContentKey, ContentProbe};

/// A page held back for the next stripe: its logical page, its index in the request's data,
/// and its probe (`None`: not probed).
#[derive(Copy, Clone)]
pub(super) struct HeldPage {
    pub(super) lpn: u32,
    pub(super) index: u32,
    pub(super) probe: Option<ContentProbe>,
}

/// The pages held back for the next stripe, in request order.
pub(super) struct StripePages {
    pages: [HeldPage; MAX_TOTAL_PLANES],
    len: usize,
    /// The stream of the first held page, classified as it was held (plane-first order).
    first: Option<Stream>,
    /// Whether the request held a page already (its realignment decided).
    started: bool,
}

impl StripePages {
    /// None held, for a new request.
    pub(super) fn new() -> Self {
        StripePages {
            pages: [HeldPage { lpn: 0, index: 0, probe: None }; MAX_TOTAL_PLANES],
            len: 0,
            first: None,
            started: false,
        }
    }

    fn held(&self) -> &[HeldPage] {
        &self.pages[..self.len]
    }
}

/// Where the held pages' data is: a request's pages (`write`), or a batch's (`write_many`);
/// a [`HeldPage`]'s `index` counts pages of it.
#[derive(Copy, Clone)]
pub(super) enum PagesIn<'d> {
    Request(&'d [u8]),
    Batch(&'d [(u32, &'d [u8])]),
}

impl<'d> PagesIn<'d> {
    /// The data of page `index` (`pb` bytes a page).
    fn page(self, index: u32, pb: usize) -> &'d [u8] {
        match self {
            PagesIn::Request(data) => &data[index as usize * pb..][..pb],
            PagesIn::Batch(pages) => pages[index as usize].1,
        }
    }
}

impl<N: NandFlash, P: PolicySet, M: MappingTable> Ftl<'_, N, P, M> {
    /// Probes `page` (request data `data`) as if the held pages were written: see the module
    /// doc. The caller counts the probe.
    pub(super) fn dedup_probe_in_order(
        &mut self,
        held: &mut StripePages,
        page: &[u8],
        data: PagesIn<'_>,
        temp: RequestTemp,
    ) -> Result<Option<ContentProbe>, Error> {
        let pb = self.geo.data_bytes as usize;
        if held.held().iter().any(|h| data.page(h.index, pb) == page) {
            self.dedup_program_held(held, data, temp)?;
        }
        let Some(ix) = self.ext.dedup.index.as_deref_mut() else { return Ok(None) };
        let probe = ix.probe(page);
        if let ContentProbe::Hit { location, .. } = probe {
            if self.dedup_hit_is_held(held, location) {
                self.dedup_program_held(held, data, temp)?;
                return Ok(self.ext.dedup.index.as_deref_mut().map(|ix| ix.probe(page)));
            }
        }
        Ok(Some(probe))
    }

    /// Whether index location `location` is (or holds the content of) what a held page's
    /// logical page maps now.
    fn dedup_hit_is_held(&self, held: &StripePages, location: u32) -> bool {
        let content = if location & VIRTUAL_FLAG != 0 {
            self.ext.dedup.vmap.page(location & !VIRTUAL_FLAG)
        } else {
            Some(location)
        };
        held.held().iter().any(|h| match self.map.get(h.lpn) {
            Some(m) => m.0 == location || Some(self.dedup_resolve(m).0 .0) == content,
            None => false,
        })
    }

    /// Holds `page` (its probe a miss or none; `left`, the request's pages from it on) for the
    /// next stripe, and programs the held pages once they fill one. Plane-first, the first page
    /// of a stripe is classified as it is held, and the request's first held page realigns the
    /// planes first if striped requests keep starting off them (`multiplane.rs`,
    /// **Realignment**).
    pub(super) fn dedup_hold(
        &mut self,
        held: &mut StripePages,
        page: HeldPage,
        left: u32,
        data: PagesIn<'_>,
        temp: RequestTemp,
    ) -> Result<(), Error> {
        if held.len == 0 && self.cfg.stripe_order == StripeOrder::PlaneFirst {
            let stream = self.stripe_stream(page.lpn, temp);
            if !held.started {
                self.realign_planes(left as usize, stream)?;
            }
            held.first = Some(stream);
        }
        held.started = true;
        held.pages[held.len] = page;
        held.len += 1;
        if held.len >= self.dedup_stripe_width() {
            self.dedup_program_held(held, data, temp)?;
        }
        Ok(())
    }

    /// How many pages fill the next stripe: the planes left in the rotation's LUN (plane-first),
    /// or a round of the rotation (channel-first, which spreads a round over the LUNs).
    fn dedup_stripe_width(&self) -> usize {
        match self.cfg.stripe_order {
            StripeOrder::PlaneFirst => {
                let ppl = (self.geo.planes_per_lun as usize).clamp(1, MAX_PLANES);
                ppl - self.next_plane as usize % ppl
            }
            StripeOrder::ChannelFirst => (self.geo.total_planes() as usize).clamp(1, MAX_TOTAL_PLANES),
        }
    }

    /// Programs the held pages (striped, each remapped in order), then inserts each probed one
    /// in the index at its final location, in order.
    pub(super) fn dedup_program_held(
        &mut self,
        held: &mut StripePages,
        data: PagesIn<'_>,
        temp: RequestTemp,
    ) -> Result<(), Error> {
        let n = held.len;
        if n == 0 {
            return Ok(());
        }
        held.len = 0;
        let pages = held.pages;
        let pb = self.geo.data_bytes as usize;
        let page = |i: usize| (pages[i].lpn, data.page(pages[i].index, pb));
        match held.first.take() {
            // Plane-first: the first page classified and the realignment decided as it was held.
            Some(stream) => self.write_plane_first(n, page, temp, Some(stream))?,
            None => self.write_striped(n, page, temp)?,
        }
        for (i, h) in pages[..n].iter().enumerate() {
            let Some(ContentProbe::Miss(key)) = h.probe else { continue };
            // Where it is now (GC between two stripes of the call may have moved it already).
            let Some(written) = self.map.get(h.lpn).filter(|&p| !is_virtual(p)) else { continue };
            self.dedup_index_written(&key, page(i).1, written.0);
        }
        Ok(())
    }

    /// A missed page was written at `location`: the index learns its content (its fingerprint
    /// computed now after a pre-hash miss, if the settings say so).
    pub(super) fn dedup_index_written(&mut self, key: &ContentKey, page: &[u8], location: u32) {
        let after = self.ext.dedup.settings.fingerprint_misses;
        let Some(ix) = self.ext.dedup.index.as_deref_mut() else { return };
        if key.hashed {
            ix.insert(key, location);
        } else if after {
            let key = ix.fingerprint(page);
            ix.insert(&key, location);
            self.ext.dedup.stats.fingerprinted_after_write += 1;
        }
    }
}
