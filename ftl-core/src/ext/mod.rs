//! Extensions: the techniques that stack on the core (second writes, deduplication, the NV cache,
//! FlexECC), how an FTL is opened with them, which combinations run, and the hooks the core calls.
//!
//! **Opening.** [`Ftl::format_with`] and [`Ftl::mount_with`] are the one format and one mount entry
//! point; they take the stacked techniques as an [`Extensions`] value built by chaining
//! (`Extensions::none().reuse(r).cache(c)`). [`Ftl::format`] and [`Ftl::mount`] are the same with
//! none. A technique whose feature is off has no builder method, so it cannot be asked for.
//!
//! **What combines** ([`Refusal`], checked before anything is written): every technique runs with
//! every classifier and page codec, and deduplication, the NV cache and FlexECC stack in any
//! subset; second writes stack with deduplication and the NV cache, not with FlexECC; on a
//! flash-resident (cached) map only FlexECC runs (each refusal's reason is on its variant).
//!
//! **Stacking order** (the precedence, written here and nowhere else). Host read: the NV cache
//! serves a cached page first; otherwise deduplication resolves a shared page to its physical
//! page; second writes then read it (a second write decoded, a first write unscrambled with the
//! logical page its metadata names), or without them the core reads and checks it; the NV cache
//! then keeps a copy. Host write: deduplication's write path, when attached, replaces the core's
//! (it shares what it can; a page it cannot share goes to second writes if they take it, else to
//! `Ftl::first_write`); otherwise a write-back NV cache takes the page (it reaches flash when
//! evicted), else second writes take the hot pages they can place; every page written to flash
//! then goes to a write-through NV cache. FlexECC only chooses the page format: of host pages
//! (by the write's intent) and of GC's copies (kept, or dropped to detect-only after a
//! flush-read); every other page is written correcting. GC: the NV cache drops the clean pages it
//! holds before a victim is moved (not a second write, whose two halves move together); second
//! writes decide recycle or
//! erase for the victim; a page is moved as a second write, a shared page or a plain page.
//! Mount: second writes survey and scan their blocks, replay applies every technique's records in
//! sequence order, the NV cache is reconciled with the replayed map (a flash copy read the way a
//! host read reads it: second writes decoded, first writes unscrambled), then valid counts are rebuilt
//! (the core's, second writes', deduplication's).
//!
//! Each technique's hooks live in its own module (`reuse`, `dedup`, `cdm`, `intent`); the
//! no-op twins a build without the feature uses are in `off.rs`, so the core's function bodies
//! carry no `#[cfg]`.

pub mod claims;
mod off;

use core::marker::PhantomData;

use nand_hal::NandFlash;

use crate::map::MappingTable;
use crate::policy::PolicySet;
use crate::{Config, Error, Ftl, Memory};

/// A combination of techniques the FTL does not run, with the reason.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum Refusal {
    /// Second writes with FlexECC: a second write replaces the page codec by the WOM code and its
    /// CRC, so there is no per-page codec format to switch.
    WomWithFlexEcc,
    /// Second writes, deduplication or the NV cache on a flash-resident (cached) map: each keeps
    /// per-page state keyed by the map's words or reconciles the whole map at mount. Not ported.
    /// (FlexECC runs there: its marks are per logical page in RAM, lost at a cut by design, and
    /// it reads the map only through the core's lookups.)
    FlashResidentMap,
}

impl Refusal {
    /// The reason, in one line.
    pub fn reason(self) -> &'static str {
        match self {
            Refusal::WomWithFlexEcc => {
                "wom with flex-ecc: a second write replaces the page codec, so there is no page format to switch"
            }
            Refusal::FlashResidentMap => {
                "wom, dedup and the NV cache run on the flat map only (the cached map is not ported to them)"
            }
        }
    }
}

impl core::fmt::Display for Refusal {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.reason())
    }
}

/// Which techniques are on (for [`refusal`]).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct Stack {
    /// Second writes.
    pub wom: bool,
    /// Deduplication.
    pub dedup: bool,
    /// The NV cache.
    pub nv_cache: bool,
    /// FlexECC.
    pub flex_ecc: bool,
}

/// Whether the FTL runs `stack` (on a flash-resident map if `flash_map`): `None`, or why not.
/// The one place combinations are decided; the simulator asks it too.
pub const fn refusal(stack: Stack, flash_map: bool) -> Option<Refusal> {
    if (stack.wom || stack.dedup || stack.nv_cache) && flash_map {
        return Some(Refusal::FlashResidentMap);
    }
    if stack.wom && stack.flex_ecc {
        return Some(Refusal::WomWithFlexEcc);
    }
    None
}

/// The techniques to stack on an FTL, for [`Ftl::format_with`] / [`Ftl::mount_with`].
#[derive(Default)]
pub struct Extensions<'m> {
    #[cfg(feature = "wom")]
    pub(crate) reuse: Option<crate::reuse::Reuse<'m>>,
    #[cfg(feature = "dedup")]
    pub(crate) dedup: Option<crate::dedup::Dedup<'m>>,
    #[cfg(feature = "cdm")]
    pub(crate) cache: Option<crate::cdm::NvCache<'m>>,
    #[cfg(feature = "flex-ecc")]
    pub(crate) flex: Option<(&'m mut [u32], crate::intent::FlexConfig)>,
    _memory: PhantomData<&'m mut ()>,
}

impl<'m> Extensions<'m> {
    /// No technique: the baseline FTL (the firmware's configuration).
    pub fn none() -> Self {
        Self::default()
    }

    /// Second writes (Reusable SSD).
    #[cfg(feature = "wom")]
    pub fn reuse(mut self, reuse: crate::reuse::Reuse<'m>) -> Self {
        self.reuse = Some(reuse);
        self
    }

    /// Inline deduplication (CAFTL). Its index starts empty at format and mount.
    #[cfg(feature = "dedup")]
    pub fn dedup(mut self, dedup: crate::dedup::Dedup<'m>) -> Self {
        self.dedup = Some(dedup);
        self
    }

    /// The NV cache (CDM or NVM-basic). Format formats the cache first (so a cut during format
    /// never leaves an earlier life's cached pages next to a new image); mount reconciles the
    /// flash map with the cache's directory (`Error::NotFormatted` if the NV memory holds no
    /// cache of this shape).
    #[cfg(feature = "cdm")]
    pub fn cache(mut self, cache: crate::cdm::NvCache<'m>) -> Self {
        self.cache = Some(cache);
        self
    }

    /// FlexECC: write intents choose the page format and flush-reads mark pages for GC to drop
    /// to the detecting format. `marks` must have `flex_mark_words(logical_pages)` words (else
    /// `Error::Memory`); its content is discarded.
    #[cfg(feature = "flex-ecc")]
    pub fn flex(mut self, marks: &'m mut [u32], cfg: crate::intent::FlexConfig) -> Self {
        self.flex = Some((marks, cfg));
        self
    }

    /// Which techniques this value stacks.
    pub fn stack(&self) -> Stack {
        Stack {
            wom: self.has_reuse(),
            dedup: self.has_dedup(),
            nv_cache: self.has_cache(),
            flex_ecc: self.has_flex(),
        }
    }
}

// Which techniques an `Extensions` value holds (the twins for features that are off: `off.rs`).
#[cfg(feature = "wom")]
impl Extensions<'_> {
    pub(crate) fn has_reuse(&self) -> bool {
        self.reuse.is_some()
    }
}
#[cfg(feature = "dedup")]
impl Extensions<'_> {
    pub(crate) fn has_dedup(&self) -> bool {
        self.dedup.is_some()
    }
}
#[cfg(feature = "cdm")]
impl Extensions<'_> {
    pub(crate) fn has_cache(&self) -> bool {
        self.cache.is_some()
    }
}
#[cfg(feature = "flex-ecc")]
impl Extensions<'_> {
    pub(crate) fn has_flex(&self) -> bool {
        self.flex.is_some()
    }
}

/// The stacked techniques' state inside the FTL (each empty or detached when not attached).
#[derive(Default)]
pub(crate) struct ExtState<'m> {
    /// Second writes, when on (see [`crate::reuse`]).
    #[cfg(feature = "wom")]
    pub(crate) reuse: Option<crate::reuse::Reuse<'m>>,
    /// The NV cache (CDM or NVM-basic), if the FTL runs with one.
    #[cfg(feature = "cdm")]
    pub(crate) nv: Option<crate::cdm::NvCache<'m>>,
    /// Deduplication state (detached unless attached).
    #[cfg(feature = "dedup")]
    pub(crate) dedup: crate::dedup::DedupState<'m>,
    /// FlexECC: write format, per-page RAM marks, counters.
    #[cfg(feature = "flex-ecc")]
    pub(crate) flex: crate::intent::FlexState<'m>,
    _memory: PhantomData<&'m mut ()>,
}

/// How an FTL is being opened.
#[derive(Copy, Clone, PartialEq, Eq)]
pub(crate) enum Open {
    Format,
    Mount,
}

impl<'m, N: NandFlash, P: PolicySet, M: MappingTable> Ftl<'m, N, P, M> {
    /// Formats the device with the techniques of `ext` stacked (see [`Ftl::format`]).
    /// `Error::Unsupported` names a combination the FTL does not run.
    pub fn format_with(
        nand: N,
        policies: P,
        map: M,
        mem: Memory<'m>,
        cfg: Config,
        ext: Extensions<'m>,
    ) -> Result<Self, Error> {
        let mut ftl = Self::new(nand, policies, map, mem, cfg)?;
        ftl.attach(ext, Open::Format)?;
        ftl.format_device()?;
        Ok(ftl)
    }

    /// Mounts a device with the techniques of `ext` stacked (see [`Ftl::mount`]); they must be
    /// the ones it was formatted with.
    pub fn mount_with(
        nand: N,
        policies: P,
        map: M,
        mem: Memory<'m>,
        cfg: Config,
        ext: Extensions<'m>,
    ) -> Result<Self, Error> {
        let mut ftl = Self::new(nand, policies, map, mem, cfg)?;
        ftl.attach(ext, Open::Mount)?;
        ftl.recover()?;
        ftl.nv_after_mount();
        Ok(ftl)
    }

    /// Checks the combination, then hands each technique its state, in stacking order.
    fn attach(&mut self, ext: Extensions<'m>, open: Open) -> Result<(), Error> {
        if let Some(r) = refusal(ext.stack(), self.map.on_flash()) {
            return Err(Error::Unsupported(r));
        }
        let mut ext = ext;
        self.attach_reuse(&mut ext)?;
        self.attach_dedup(&mut ext)?;
        self.attach_cache(&mut ext, open)?;
        self.attach_flex(&mut ext)
    }

    /// Which techniques this FTL runs with.
    pub fn stack(&self) -> Stack {
        Stack {
            wom: self.reuse_on(),
            dedup: self.dedup_on(),
            nv_cache: self.nv_on(),
            flex_ecc: self.flex_on(),
        }
    }
}
