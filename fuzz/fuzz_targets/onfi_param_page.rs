//! The ONFI parameter page parser (`nand_hal::onfi::param_page`): the input is up to three
//! 256-byte copies. Checks: `select_copy` (CRC-16, bitwise majority), `ParamPage::parse`,
//! `check`, `geometry` and `AddressLayout::new` never panic; a page they accept describes a
//! geometry that validates, whose addresses encode and decode back (`page_row`/`decode_row`),
//! and whose own parameter page (`ParamPage::for_geometry`) parses back to the same geometry
//! (the endurance rounded down to two significant digits, as documented).
#![no_main]

use libfuzzer_sys::fuzz_target;
use nand_hal::onfi::param_page::{
    select_copy, AddressLayout, ParamPage, MAX_ADDRESS_CYCLES, PARAM_PAGE_BYTES,
};
use nand_hal::{BlockId, Geometry, PageId};

fuzz_target!(|input: &[u8]| {
    let copies: Vec<[u8; PARAM_PAGE_BYTES]> = input
        .chunks(PARAM_PAGE_BYTES)
        .take(3)
        .map(|c| {
            let mut page = [0u8; PARAM_PAGE_BYTES];
            page[..c.len()].copy_from_slice(c);
            page
        })
        .collect();
    let _ = select_copy(&copies);
    let Some(raw) = copies.first() else { return };
    // The parser without the CRC gate too: the driver only parses a selected copy, but parse
    // and check must hold on any bytes.
    let p = ParamPage::parse(raw);
    let _ = (p.onfi_version(), p.timing_mode(), p.endurance(), p.planes_per_lun());
    let _ = (p.multi_plane_program_erase(), p.multi_plane_read(), p.read_status_enhanced());
    let _ = p.to_bytes();
    if p.check(raw).is_err() {
        return;
    }
    let Ok(g) = p.geometry() else { return };
    assert!(g.validate().is_ok(), "geometry() returned an invalid geometry: {g:?}");
    let Ok(layout) = AddressLayout::new(&p, &g) else { return };
    let mut out = [0u8; MAX_ADDRESS_CYCLES];
    let last = g.total_pages() - 1;
    for page in [0, last / 2, last] {
        let row = layout.page_row(PageId(page));
        let (lun, block, pg) = layout.decode_row(row).expect("a row the layout made decodes");
        let blocks_per_lun = g.blocks_per_plane * g.planes_per_lun;
        let back = (lun * blocks_per_lun + block) * g.pages_per_block + pg;
        assert_eq!(back, page, "row {row:#x}");
        let n = layout.encode(g.data_bytes + g.spare_bytes - 1, row, &mut out);
        assert_eq!(n, (layout.column_cycles() + layout.row_cycles()) as usize);
        let _ = layout.block_row(BlockId(page / g.pages_per_block));
    }
    if let Ok(own) = ParamPage::for_geometry(&g) {
        // The endurance is rounded down to two significant digits (ONFI's mantissa and
        // exponent); everything else comes back exactly.
        let back = ParamPage::parse(&own.to_bytes()).geometry().expect("for_geometry's page parses");
        assert_eq!(Geometry { endurance: g.endurance, ..back }, g, "for_geometry round trip");
        assert!(back.endurance <= g.endurance && back.endurance as u64 * 11 >= g.endurance as u64 * 10);
    }
});
