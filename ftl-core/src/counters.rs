//! Counters of what the FTL did, for reports, tests and the simulator. They are plain integers,
//! reset only by [`crate::Ftl::reset_counters`]; the NAND counts are the FTL's own view of the
//! operations it issued (the device may count more, e.g. retries inside a driver).

/// Operation counts.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Counters {
    /// Logical pages read by the host.
    pub host_read_pages: u64,
    /// Logical pages written by the host.
    pub host_write_pages: u64,
    /// Logical pages trimmed by the host.
    pub host_trim_pages: u64,
    /// Host flushes.
    pub host_flushes: u64,
    /// NAND page reads issued (spare-only reads included).
    pub nand_reads: u64,
    /// NAND page programs issued (all kinds).
    pub nand_programs: u64,
    /// NAND block erases issued.
    pub nand_erases: u64,
    /// Valid pages copied by garbage collection (wear-leveling moves and retirement included).
    pub gc_page_copies: u64,
    /// Of `gc_page_copies`, those the chip moved by copy-back (`Config::gc_copy_back`): read
    /// out, checked and programmed from its page register.
    pub gc_copy_backs: u64,
    /// Of `gc_copy_backs`, those whose data the codec corrected (written back into the register
    /// before the program).
    pub gc_copy_back_corrected: u64,
    /// Copy-backs whose check answered `Abort` (metadata or data that did not check out, a map
    /// entry not in RAM): the page was read, nothing programmed, and it
    /// moved the plain way from what was read (counted in `nand_reads` once).
    pub gc_copy_back_aborts: u64,
    /// Blocks collected by garbage collection.
    pub gc_blocks: u64,
    /// Of `gc_blocks`, those collected (or finished) on demand, when a host block was to open in
    /// a plane below its free reserve (with paced GC, the times pacing fell behind).
    pub gc_blocks_on_demand: u64,
    /// Times a plane's GC stopped gaining room and its copies went to another plane (see
    /// `emigration.rs`; 0 unless a plane filled with valid pages).
    pub gc_emigrations: u64,
    /// Open host-side blocks GC took over as its frontier when no plane had a block for it (see
    /// `frontier.rs`, `gc_take_host_block`).
    pub gc_host_blocks_taken: u64,
    /// Blocks collected for static wear leveling.
    pub wear_level_moves: u64,
    /// Checkpoints written.
    pub checkpoints: u64,
    /// Pages programmed for checkpoints.
    pub checkpoint_pages: u64,
    /// Anchor records programmed (one per copy; see `anchor.rs`).
    pub anchor_pages: u64,
    /// Erases of the anchor's blocks (included in `nand_erases`).
    pub anchor_erases: u64,
    /// Mount-pool extensions: records written because a plane ran short of pool blocks between
    /// checkpoints (see `pool.rs`).
    pub pool_extensions: u64,
    /// Times the pool could not be listed in a record and went unbounded until the next
    /// checkpoint (a mount after a cut in that window surveys every block).
    pub pool_unbounded: u64,
    /// Journal pages programmed (trims).
    pub journal_pages: u64,
    /// Program failures seen.
    pub program_failures: u64,
    /// Erase failures seen.
    pub erase_failures: u64,
    /// Blocks retired as bad at run time.
    pub blocks_retired: u64,
    /// NAND reads host reads caused (their pages, and the map pages their misses read).
    pub host_read_nand_reads: u64,
    /// Map pages read (flash-resident map: cache misses and write-backs).
    pub map_page_reads: u64,
    /// Map pages written (flash-resident map: write-backs, GC moves, checkpoints' flushes).
    pub map_page_writes: u64,
    /// NAND reads the last mount took.
    pub mount_reads: u64,
    /// Pages the last mount replayed after its checkpoint.
    pub mount_replayed_pages: u64,
    /// Blocks whose first page the last mount read to find what was written after its
    /// checkpoint: 0 after a clean unmount (the anchor's fast mount), the mount pool's blocks
    /// after a cut (see `pool.rs`), every block for a survey.
    pub mount_surveyed_blocks: u64,
    /// Most NAND programs one host page write caused (its own program, paced or on-demand GC
    /// copies, journal and checkpoint pages, retirement and wear-leveling moves at the end of the
    /// request, which count against its last page).
    pub worst_host_write_programs: u64,
    /// NAND programs the last host page write caused (as above).
    pub last_write_programs: u64,
    /// Multi-plane programs issued (their pages are in `nand_programs`; see `multiplane.rs`).
    pub multi_plane_programs: u64,
    /// Multi-plane reads issued (their pages are in `nand_reads`).
    pub multi_plane_reads: u64,
    /// Multi-plane erases issued (their blocks are in `nand_erases`).
    pub multi_plane_erases: u64,
    /// Pages voided to line a LUN's planes up again for host stripes (their programs are in
    /// `nand_programs`; see `multiplane.rs`, **Realignment**).
    pub realign_pads: u64,
    /// Of `multi_plane_programs`, those that programmed GC copies (one page per plane of a LUN;
    /// the pages are in `gc_page_copies`; see `gc_stripe.rs`).
    pub gc_stripes: u64,
}
