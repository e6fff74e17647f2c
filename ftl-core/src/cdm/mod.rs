//! CDM: cooperative data management between the FTL and an in-storage non-volatile cache (the
//! MSST'16 talk "Reducing Write Amplification of Flash Storage through Cooperative Data Management
//! with NVM", deployable in-storage variant).
//!
//! - `nvm`: the [`Nvm`] seam (byte-addressable persistent memory: FRAM, MRAM, battery-backed
//!   SRAM, or the emulator's power-cut-aware `NvRam`).
//! - `cache`: the [`NvCache`]: page slots, a persistent CRC-protected directory, an LRU list and
//!   a hash index in caller RAM.
//! - `cooperate`: how the FTL uses it. Host writes go to flash and into the cache (write-through:
//!   the cache holds clean copies); host reads are served from the cache and fill it on a miss.
//!   Under [`NvPolicy::Cdm`] a valid flash page whose data is cached is *removable*: GC drops it
//!   instead of copying it, the mapping then points into the cache (flash map entry empty, slot
//!   marked as the only copy), and evicting such a slot first writes it to flash as a normal
//!   write. [`NvPolicy::Basic`] manages the same cache like a volatile LRU cache (GC copies
//!   everything). Without a cache ([`crate::Ftl::format`] / [`crate::Ftl::mount`]) the FTL is
//!   the baseline, unchanged.
//!
//! Power-loss contract (the FTL's, unchanged): after `flush` returns every acknowledged write
//! survives; after a cut a page reads as its old or its new content; mount never fails because of
//! a cut. A device whose cache may hold only copies must be mounted with the same cache
//! ([`crate::Ftl::mount_with`] with [`crate::Extensions::cache`]); mount reconciles the flash map with the NV directory by
//! sequence numbers (see `cooperate`).

mod cache;
mod cooperate;
mod nvm;

pub use cache::{
    NvCache, NvCacheConfig, NvCacheLayout, NvCounters, NvPolicy, ReadFill, Slot, ENTRY_LEN, HEADER_LEN,
};
pub use nvm::{Nvm, SliceNvm};
