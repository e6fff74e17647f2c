//! The checkpoint decoder (mount's `load_checkpoint` and the words it applies). The newest
//! checkpoint of the base image (`ftl_fuzz::base_image`) is taken as one stream of words; the
//! input XORs words of it (records of `[word u16][xor u32]` after a first flags byte) and, when
//! flags bit 0 is set, the stream's CRC-32C is recomputed so the forged words pass the checksum
//! and reach the decoder. Each page is re-encoded with the codec's protection and valid metadata,
//! so the pages themselves read clean. Checks: mount returns `Ok` or a typed error, never panics
//! or hangs, and a device that mounts survives reads, writes, a flush and a remount without a
//! panic (no data check: a forged checkpoint with a valid CRC may legitimately map pages anywhere).
#![no_main]

use std::sync::OnceLock;

use ftl_core::checkpoint::checkpoint_words;
use ftl_core::crc32c::crc32c_append;
use ftl_core::meta::{PageKind, PageMeta, SpareState, META_LEN};
use ftl_core::policy::{DefaultPolicies, PageCodec, PolicySet};
use ftl_fuzz::{base_image, config, geometry, mount_and_exercise};
use libfuzzer_sys::fuzz_target;

/// The pages of the newest complete checkpoint, in stream order.
fn checkpoint_pages() -> &'static [u32] {
    static PAGES: OnceLock<Vec<u32>> = OnceLock::new();
    PAGES.get_or_init(|| {
        let g = geometry();
        let mut image = base_image().clone();
        let mut found: Vec<(u64, u32, u32, u32)> = Vec::new(); // (seq, index, count, page)
        for p in 0..g.total_pages() {
            if let SpareState::Valid(m) = PageMeta::decode(image.spare_mut(p)) {
                if m.kind == PageKind::Checkpoint {
                    found.push((m.seq, m.tag, m.aux, p));
                }
            }
        }
        let seq = found.iter().map(|f| f.0).max().expect("the base image has a checkpoint");
        let mut pages: Vec<_> = found.iter().filter(|f| f.0 == seq).map(|f| (f.1, f.3)).collect();
        pages.sort();
        let count = found.iter().find(|f| f.0 == seq).unwrap().2;
        assert_eq!(pages.len() as u32, count, "the newest checkpoint is complete");
        pages.into_iter().map(|(_, p)| p).collect()
    })
}

fuzz_target!(|input: &[u8]| {
    let Some((&flags, records)) = input.split_first() else { return };
    let (g, cfg) = (geometry(), config());
    let d = g.data_bytes as usize;
    let pages = checkpoint_pages();
    let mut image = base_image().clone();
    let mut stream: Vec<u8> = pages.iter().flat_map(|&p| image.data_mut(p).to_vec()).collect();
    let words = checkpoint_words(&g, cfg.logical_pages) as usize;
    let mut chunks = records.chunks_exact(6);
    for r in chunks.by_ref().take(64) {
        let w = u16::from_le_bytes([r[0], r[1]]) as usize % words;
        for (b, x) in stream[4 * w..4 * w + 4].iter_mut().zip(&r[2..6]) {
            *b ^= x;
        }
    }
    if flags & 1 != 0 {
        let crc = crc32c_append(0, &stream[..4 * (words - 1)]);
        stream[4 * (words - 1)..4 * words].copy_from_slice(&crc.to_le_bytes());
    }
    let mut codec = DefaultPolicies::default();
    let codec = codec.codec();
    let codec_len = codec.spare_len();
    for (i, &p) in pages.iter().enumerate() {
        let data = &stream[i * d..(i + 1) * d];
        image.data_mut(p).copy_from_slice(data);
        codec.encode(data, &mut image.spare_mut(p)[META_LEN..META_LEN + codec_len]);
    }
    mount_and_exercise(image.load(), chunks.remainder(), false);
});
