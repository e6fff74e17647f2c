//! Mount over arbitrary images. The input patches the image of a formatted, used and cut device
//! (`ftl_fuzz::base_image`): records of `[page u16][flags u8][offset u16][len u8][bytes]`
//! overwrite (flags bit 0 clear) or XOR (set) bytes of a page's spare (bit 1 clear) or data area
//! (set); what follows the last whole record drives the writes and trims after the mount. Checks:
//! `Ftl::mount` returns `Ok` or a typed `Error`, never panics or hangs; a device that mounts
//! survives reads of every page, writes, trims, a flush, a cut and a remount without a panic;
//! when only programmed pages were damaged, a page flushed after the first mount never reads
//! back other content (it may fail with a typed error). `FTL_FUZZ_STRICT=1`: every damaged image
//! that mounts must remount and read back what was flushed (fails today: known finding in
//! `fuzz/artifacts-known/`).
#![no_main]

use ftl_fuzz::{base_image, geometry, mount_and_exercise, strict};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|input: &[u8]| {
    let g = geometry();
    let mut image = base_image().clone();
    let mut touched_erased = false;
    let mut rest = input;
    while rest.len() >= 6 {
        let page = u16::from_le_bytes([rest[0], rest[1]]) as u32 % g.total_pages();
        touched_erased |= base_image().is_erased(page);
        let flags = rest[2];
        let offset = u16::from_le_bytes([rest[3], rest[4]]) as usize;
        let len = rest[5] as usize;
        let Some(bytes) = rest.get(6..6 + len) else { break };
        let area = if flags & 2 == 0 { image.spare_mut(page) } else { image.data_mut(page) };
        let offset = offset % area.len();
        for (dst, &b) in area[offset..].iter_mut().zip(bytes) {
            *dst = if flags & 1 == 0 { b } else { *dst ^ b };
        }
        rest = &rest[6 + len..];
    }
    // Damage to an erased page is checked for panics only, unless strict: a page past an open
    // block's frontier that is not erased is programmed over (fuzz/artifacts-known/README.md).
    mount_and_exercise(image.load(), rest, !touched_erased || strict());
});
