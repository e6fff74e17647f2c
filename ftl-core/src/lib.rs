//! # ftl-core: a page-mapping flash translation layer for raw NAND
//!
//! `#![no_std]`, no `alloc`, no floating point. The caller lends every table (see [`RamLayout`]
//! for the sizes as a function of the geometry) and the FTL never allocates.
//!
//! Mechanism lives here: the map ([`map`]), block states and pools ([`blocks`]), write frontiers
//! ([`frontier`]), garbage collection ([`gc`]), wear leveling ([`wear`]), bad-block retirement,
//! page metadata ([`meta`]), trims ([`journal`]), checkpoints ([`checkpoint`]), the anchor that
//! finds the newest one ([`anchor`]), the mount pool that bounds a mount after a cut ([`pool`]) and
//! power-loss recovery ([`recovery`]). Policy is a seam ([`policy`]): page codec, hot/cold classifier, GC
//! victim choice and write placement, with the baseline's defaults.
//!
//! ```text
//!  host: read / write / trim / flush
//!        |
//!   Ftl --+-- classifier -> placement -> frontier (per plane x stream) -> codec -> NandFlash
//!        |                                   ^
//!        +-- map (MappingTable) <-- gc (victim policy) / wear leveling / retirement
//!        +-- journal (trims) + checkpoint  ->  recovery at mount
//! ```
#![no_std]
#![deny(missing_docs)]

mod fmt;

pub mod anchor;
pub mod blocks;
#[cfg(feature = "cdm")]
pub mod cdm;
pub mod checkpoint;
mod config;
mod counters;
pub mod crc32c;
#[cfg(feature = "dedup")]
pub mod dedup;
mod emigration;
mod error;
pub mod ext;
mod format_doc;
pub mod frontier;
mod ftl;
pub mod gc;
mod gc_copy_back;
mod gc_stripe;
#[cfg(feature = "flex-ecc")]
pub mod intent;
pub mod journal;
pub mod map;
pub mod map_cache;
mod map_io;
pub mod meta;
pub mod multiplane;
pub mod pacing;
pub mod policy;
pub mod pool;
pub mod recovery;
#[cfg(feature = "wom")]
pub mod reuse;
pub mod wear;

pub use blocks::BlockInfo;
pub use config::{
    checkpoint_blocks, Config, RamLayout, StripeOrder, MAX_TOTAL_PLANES, RECOMMENDED_MOUNT_POOL_BLOCKS,
};
pub use counters::Counters;
pub use error::Error;
pub use ext::{Extensions, Refusal, Stack};
pub use ftl::{Ftl, Memory};
pub use map::{AnyMap, FlatMap, MapNeed, MappingTable};
pub use map_cache::{CachedMap, CachedMapLayout, DirtyEntry, MapLine, NO_ENTRY};
