//! The FTL's second-write seam ([`SecondWriteCodec`]) implemented by the polar WOM page codec:
//! [`WomSecondWrite`] encodes and decodes in place over the FTL's raw page images (through two
//! page copies of its own), scrambles first writes with [`scramble_first_write`], and reports the
//! spare region its [`SecondWriteLayout`] uses.
//!
//! Memory: the code (`WomPageCodec<W>`), the scratch (`WomScratch<W, LW>`, 64 KiB at W = 1024)
//! and two raw pages, each behind any owner (`&mut` on the board, `Box`/`Vec` on a host).

use core::ops::DerefMut;

use ftl_core::policy::PageCodec;
use ftl_core::reuse::{SecondWriteCodec, SecondWriteError, SW_META_LEN};

use super::{descramble_first_write, scramble_first_write, PagePlan, SecondWriteLayout, WomCodec, WomConfig};
use super::{WomError, WomPageCodec, WomScratch};

/// A polar WOM code as the FTL's second-write codec.
pub struct WomSecondWrite<const W: usize, const LW: usize, E, S, B> {
    codec: WomPageCodec<W>,
    ecc: E,
    scratch: S,
    tmp_a: B,
    tmp_b: B,
}

impl<const W: usize, const LW: usize, E, S, B> WomSecondWrite<W, LW, E, S, B>
where
    E: PageCodec,
    S: DerefMut<Target = WomScratch<W, LW>>,
    B: AsMut<[u8]> + AsRef<[u8]>,
{
    /// The codec `codec` with `ecc` protecting each page of a second write (its `spare_len()`
    /// must be the codec's `ecc_len`), work space `scratch` and two raw-page buffers.
    pub fn new(codec: WomPageCodec<W>, ecc: E, scratch: S, tmp_a: B, tmp_b: B) -> Result<Self, WomError> {
        let page = codec.plan().layout.page_len();
        if tmp_a.as_ref().len() != page || tmp_b.as_ref().len() != page {
            return Err(WomError::BadLength);
        }
        if ecc.spare_len() != codec.plan().ecc_len {
            return Err(WomError::BadConfig);
        }
        Ok(WomSecondWrite { codec, ecc, scratch, tmp_a, tmp_b })
    }

    /// The page codec.
    pub fn page_codec(&self) -> &WomPageCodec<W> {
        &self.codec
    }
}

/// The layout of second writes on `geometry` next to an FTL whose first writes use
/// `first_write_spare` spare bytes (its metadata plus its page codec): region B runs from there
/// to the FTL's second-write metadata at the end of the spare.
pub fn ftl_layout(geometry: &nand_hal::Geometry, first_write_spare: usize) -> Option<SecondWriteLayout> {
    let spare = geometry.spare_bytes as usize;
    let len = spare.checked_sub(first_write_spare + SW_META_LEN)?;
    Some(SecondWriteLayout::from_geometry(geometry, first_write_spare, len))
}

/// The polar WOM page codec with the lowest rate that fits `layout` at `N = 2^n_log2`,
/// `attempts` attempts per codeword, list size `list` and `ecc_len` ECC bytes per page.
pub fn fitted_codec<const W: usize>(
    layout: SecondWriteLayout,
    n_log2: u32,
    attempts: u8,
    list: u8,
    ecc_len: usize,
) -> Result<WomPageCodec<W>, WomError> {
    let k = PagePlan::min_k(layout, n_log2, attempts, ecc_len).ok_or(WomError::BadConfig)?;
    let cfg = WomConfig { list_size: list, ..WomConfig::new(n_log2, k, attempts) };
    WomPageCodec::new(WomCodec::new(cfg)?, layout, ecc_len)
}

impl<const W: usize, const LW: usize, E, S, B> SecondWriteCodec for WomSecondWrite<W, LW, E, S, B>
where
    E: PageCodec,
    S: DerefMut<Target = WomScratch<W, LW>>,
    B: AsMut<[u8]> + AsRef<[u8]>,
{
    fn region(&self) -> (usize, usize) {
        let l = self.codec.plan().layout;
        (l.raw_offset, l.raw_len)
    }

    fn scramble(&mut self, key: u64, data: &[u8], out: &mut [u8]) -> bool {
        match scramble_first_write(key, data, out) {
            Ok(c) => c,
            Err(_) => {
                // Lengths differ (not something the FTL does): store the data as it is.
                let n = out.len().min(data.len());
                out[..n].copy_from_slice(&data[..n]);
                false
            }
        }
    }

    fn descramble(&mut self, key: u64, stored: &[u8], complemented: bool, out: &mut [u8]) {
        let _ = descramble_first_write(key, stored, complemented, out);
    }

    fn encode(
        &mut self,
        key: u64,
        message: &[u8],
        a: &mut [u8],
        b: &mut [u8],
    ) -> Result<u32, SecondWriteError> {
        let (ta, tb) = (self.tmp_a.as_mut(), self.tmp_b.as_mut());
        if ta.len() != a.len() || tb.len() != b.len() {
            return Err(SecondWriteError::EncodeFailed);
        }
        ta.copy_from_slice(a);
        tb.copy_from_slice(b);
        self.codec
            .encode_second_write(&mut self.ecc, key, message, ta, tb, a, b, &mut *self.scratch)
            .map(|e| e.retries)
            .map_err(|_| SecondWriteError::EncodeFailed)
    }

    fn decode(
        &mut self,
        key: u64,
        a: &mut [u8],
        b: &mut [u8],
        out: &mut [u8],
    ) -> Result<(), SecondWriteError> {
        self.codec
            .decode_second_write(&mut self.ecc, key, a, b, out, &mut *self.scratch)
            .map(drop)
            .map_err(|_| SecondWriteError::Uncorrectable)
    }
}
