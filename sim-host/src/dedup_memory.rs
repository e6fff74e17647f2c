//! Owned buffers for deduplication on the host: moved to `ftl_testkit::dedup` (the tests attach
//! deduplication in builds without the simulator); re-exported here at their old path.

pub use ftl_testkit::dedup::{DedupBuffers, DedupSizes};
