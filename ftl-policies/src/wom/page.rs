//! A logical page written as a second write over two physical pages (`coding-notes.md` 1.6,
//! layout A), in NAND terms: erased = 1, a program only clears bits.
//!
//! **Cells.** The WOM cells are the two data areas: `2 * 8 * D` cells (`D = data_bytes`), cell
//! `8 i + j` of page A is bit `j` of data byte `i` (page B follows page A). They carry
//! `M = 16 D / N` polar codewords, codeword `c` on cells `c N .. (c+1) N` (attempt 0; later
//! attempts permute within the codeword). The logical page is `D` bytes; its first `M K` bits
//! (LSB first) are the codewords' messages, in order, and the rest are *overflow* bits.
//!
//! **Spare.** Each page's spare is `[ region A | region B | rest ]`: region A
//! (`0 .. raw_offset`) is the first write's (FTL metadata, first-write ECC) and is left as it
//! is; region B (`raw_offset .. raw_offset + raw_len`) must have been left erased by the first
//! write, and holds, in each page,
//!
//! ```text
//! [ payload half : P bytes ][ ECC of this page : ecc_len bytes ][ unused, left erased ]
//! ```
//!
//! The payload is one bit stream (LSB first), its first `8 P` bits in page A, the rest in page B:
//! `[ attempt index of each codeword : M x ceil(log2 attempts) bits ][ overflow bits ]
//! [ CRC-32C of the logical page : 32 bits ][ padding 1s ]`. These cells had nothing to carry
//! from the first write, so they store raw bits (capacity 1 bit/cell, no failure).
//! The bytes of a page after region B (`rest`) are left as they are, for the FTL's own
//! second-write metadata.
//!
//! **ECC.** The caller's [`PageCodec`] (e.g. `flex_ecc::BchCodec` configured for
//! `protected_len` bytes, or `NullCodec`) protects each page's bytes `0 .. D + raw_offset + P`
//! (data, region A as it stands, payload half) with `ecc_len = spare_len()` bytes stored right
//! after. Region A is inside the protected range because it is contiguous with the rest; the FTL
//! must therefore not program region A after the second write. Decoding corrects both pages in
//! place before the WOM decode (one flipped cell would otherwise flip many message bits).
//!
//! **Capacity.** [`PagePlan::new`] checks that a code fits a layout; [`PagePlan::min_k`] gives
//! the smallest K (highest success rate) that fits, and [`PagePlan::capacity_bytes`] the message
//! bytes two pages carry at a given rate; the overhead of the notes is
//! `(2 D + 2 P + 2 ecc_len) / D` ([`PagePlan::overhead_basis_points`]).
//!
//! Failure: [`WomError::EncodeFailed`] when a codeword fails every attempt (write the page as a
//! first write elsewhere); [`WomError::SpareNotErased`] when a raw cell that must be 1 is 0.
//! Neither output page is meaningful after an error. Decoding returns [`WomError::Uncorrectable`]
//! or [`WomError::CrcMismatch`] for a bad read and [`WomError::BadAttempt`] for a corrupt
//! attempt field.

use ftl_core::crc32c::crc32c;
use ftl_core::policy::PageCodec;

use super::polar::{bytes_to_words, load_u64, low_mask, read_bits_bytes, BitWriter};
use super::{WomCodec, WomConfig, WomError, WomScratch};

/// Where the second write may put its raw bits in each of the two pages.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct SecondWriteLayout {
    /// Data bytes per physical page (`D`, a multiple of 8); the logical page has `D` bytes.
    pub data_bytes: usize,
    /// Spare bytes per physical page; a raw page image is `data_bytes + spare_bytes` bytes.
    pub spare_bytes: usize,
    /// First spare byte the second write may use (everything before is the first write's).
    pub raw_offset: usize,
    /// Spare bytes from `raw_offset` on that the second write may use (erased by the first
    /// write).
    pub raw_len: usize,
}

/// Largest page part (data or spare) a layout may have: 16 MiB.
const MAX_PAGE_PART: usize = 1 << 24;

impl SecondWriteLayout {
    /// The layout of a device geometry's pages: region B is the `raw_len` spare bytes from
    /// `raw_offset` on (the FTL keeps the first write's metadata and ECC before `raw_offset`, and
    /// may keep its second-write metadata after region B).
    pub const fn from_geometry(geometry: &nand_hal::Geometry, raw_offset: usize, raw_len: usize) -> Self {
        SecondWriteLayout {
            data_bytes: geometry.data_bytes as usize,
            spare_bytes: geometry.spare_bytes as usize,
            raw_offset,
            raw_len,
        }
    }

    /// Raw page image length: data + spare.
    pub const fn page_len(&self) -> usize {
        self.data_bytes + self.spare_bytes
    }

    fn validate(&self) -> Result<(), WomError> {
        if self.data_bytes == 0
            || self.data_bytes > MAX_PAGE_PART
            || self.spare_bytes > MAX_PAGE_PART
            || !self.data_bytes.is_multiple_of(8)
            || self.raw_offset.checked_add(self.raw_len).is_none_or(|e| e > self.spare_bytes)
        {
            return Err(WomError::BadConfig);
        }
        Ok(())
    }
}

/// How a code fits a layout: the derived sizes of a second write.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct PagePlan {
    /// The layout.
    pub layout: SecondWriteLayout,
    /// Codewords per logical page (`M = 16 D / N`).
    pub codewords: usize,
    /// Message bits per codeword.
    pub k: usize,
    /// Bits of one attempt index.
    pub attempt_bits: u32,
    /// Logical-page bits stored raw (`8 D - M K`).
    pub overflow_bits: usize,
    /// Payload bytes in each page (`P`).
    pub payload_bytes: usize,
    /// ECC bytes in each page.
    pub ecc_len: usize,
    /// Bytes of each page the ECC protects (`D + raw_offset + P`).
    pub protected_len: usize,
}

/// Bits of the CRC-32C.
const CRC_BITS: usize = 32;

impl PagePlan {
    /// The plan of code `cfg` on `layout` with `ecc_len` ECC bytes per page; `BadConfig` if the
    /// code does not tile the two data areas or the payload and ECC do not fit region B.
    pub fn new(layout: SecondWriteLayout, cfg: &WomConfig, ecc_len: usize) -> Result<Self, WomError> {
        layout.validate()?;
        cfg.validate()?;
        let cells = 16 * layout.data_bytes;
        let n = cfg.n();
        if cfg.n_log2 < 6 || n > cells || !cells.is_multiple_of(n) {
            return Err(WomError::BadConfig);
        }
        let m = cells / n;
        let wom_bits = m * cfg.k;
        if wom_bits > 8 * layout.data_bytes {
            return Err(WomError::BadConfig);
        }
        let ab = cfg.attempt_bits();
        let overflow_bits = 8 * layout.data_bytes - wom_bits;
        let payload_bits = m * ab as usize + overflow_bits + CRC_BITS;
        let payload_bytes = payload_bits.div_ceil(16);
        if payload_bytes + ecc_len > layout.raw_len {
            return Err(WomError::BadConfig);
        }
        Ok(PagePlan {
            layout,
            codewords: m,
            k: cfg.k,
            attempt_bits: ab,
            overflow_bits,
            payload_bytes,
            ecc_len,
            protected_len: layout.data_bytes + layout.raw_offset + payload_bytes,
        })
    }

    /// The smallest K (the lowest rate, so the highest success rate), at least N/4, for which a
    /// code of `N = 2^n_log2` with `attempts` attempts fits `layout` with `ecc_len` ECC bytes per
    /// page; `None` if none does (or N does not tile the pages). A K that fits may still be
    /// useless: check its rate against the success tables (`coding-notes.md` 2.2; e.g. at
    /// N = 2^13 SC needs R <= 0.41 for 94 % per codeword).
    pub fn min_k(layout: SecondWriteLayout, n_log2: u32, attempts: u8, ecc_len: usize) -> Option<usize> {
        layout.validate().ok()?;
        let cells = 16 * layout.data_bytes;
        let n = 1usize.checked_shl(n_log2)?;
        if n_log2 < 6 || n > cells || !cells.is_multiple_of(n) {
            return None;
        }
        let m = cells / n;
        let cfg = WomConfig::new(n_log2, 0, attempts);
        cfg.validate().ok()?;
        let raw_bits = 16 * layout.raw_len.checked_sub(ecc_len)?;
        let fixed = m * cfg.attempt_bits() as usize + CRC_BITS + 8 * layout.data_bytes;
        // Need fixed - M K <= raw_bits (to whole bytes per page, checked below); K >= N/4, the
        // shipped message sets' lower bound (a smaller K that fits means N/4 fits too).
        let mut k = fixed.saturating_sub(raw_bits).div_ceil(m).max(n / 4);
        while k <= n {
            if PagePlan::new(layout, &WomConfig::new(n_log2, k, attempts), ecc_len).is_ok() {
                return Some(k);
            }
            if m * k > 8 * layout.data_bytes {
                return None;
            }
            k += 1;
        }
        None
    }

    /// Message bytes two pages of `layout` carry with codewords of `(2^n_log2, k)`, `attempts`
    /// attempts and `ecc_len` ECC bytes per page: the WOM bits plus the raw bits of region B
    /// left after the attempt indices and the CRC. (`D` bytes fit exactly when a plan exists.)
    pub fn capacity_bytes(
        layout: SecondWriteLayout,
        n_log2: u32,
        k: usize,
        attempts: u8,
        ecc_len: usize,
    ) -> usize {
        let cells = 16 * layout.data_bytes;
        let Some(n) = 1usize.checked_shl(n_log2) else { return 0 };
        if n == 0 || n > cells || !cells.is_multiple_of(n) || ecc_len > layout.raw_len {
            return 0;
        }
        let m = cells / n;
        let cfg = WomConfig::new(n_log2, k, attempts);
        let raw = 16 * (layout.raw_len - ecc_len);
        (m * k + raw).saturating_sub(m * cfg.attempt_bits() as usize + CRC_BITS) / 8
    }

    /// Cells used per logical-page cell, in hundredths of a percent (`coding-notes.md` 1.6
    /// overhead; 21_210 = 212.10 %): both data areas plus the payload and ECC bytes, over the
    /// logical page.
    pub fn overhead_basis_points(&self) -> u32 {
        let d = self.layout.data_bytes as u64;
        ((2 * d + 2 * (self.payload_bytes + self.ecc_len) as u64) * 10_000 / d) as u32
    }
}

/// Result of a successful second-write encode.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct WomEncoded {
    /// The highest attempt index any codeword needed (0: every codeword on its first try).
    pub max_attempt: u8,
    /// Retries over all codewords (sum of the attempt indices).
    pub retries: u32,
}

/// Result of a successful second-write decode.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct WomDecoded {
    /// Bits the ECC corrected in the two pages.
    pub corrected_bits: u32,
}

/// The second-write page codec: a [`WomCodec`] on a [`SecondWriteLayout`].
#[derive(Clone)]
pub struct WomPageCodec<const W: usize> {
    codec: WomCodec<W>,
    plan: PagePlan,
}

/// The bytes of the payload halves, or their positions in a page.
#[inline]
fn payload_range(plan: &PagePlan) -> core::ops::Range<usize> {
    let s = plan.layout.data_bytes + plan.layout.raw_offset;
    s..s + plan.payload_bytes
}

/// Reads `n <= 64` bits at bit `pos` of the payload stream split over `a` then `b`.
fn read_split(a: &[u8], b: &[u8], pos: usize, n: u32) -> u64 {
    let split = 8 * a.len();
    if pos + n as usize <= split {
        read_bits_bytes(a, pos, n)
    } else if pos >= split {
        read_bits_bytes(b, pos - split, n)
    } else {
        let na = (split - pos) as u32;
        read_bits_bytes(a, pos, na) | (read_bits_bytes(b, 0, n - na) << na)
    }
}

/// Writes a bit stream split over two byte slices.
struct SplitWriter<'a> {
    a: BitWriter<'a>,
    b: BitWriter<'a>,
    pos: usize,
    split: usize,
}

impl<'a> SplitWriter<'a> {
    fn new(a: &'a mut [u8], b: &'a mut [u8]) -> Self {
        let split = 8 * a.len();
        SplitWriter { a: BitWriter::new(a, 0), b: BitWriter::new(b, 0), pos: 0, split }
    }

    fn push(&mut self, bits: u64, n: u32) {
        let end = self.pos + n as usize;
        if end <= self.split {
            self.a.push(bits, n);
        } else if self.pos >= self.split {
            self.b.push(bits, n);
        } else {
            let na = (self.split - self.pos) as u32;
            self.a.push(bits & low_mask(na), na);
            self.b.push(bits >> na, n - na);
        }
        self.pos = end;
    }

    fn finish(self) {
        self.a.finish();
        self.b.finish();
    }
}

impl<const W: usize> WomPageCodec<W> {
    /// A page codec for `codec` on `layout`, with `ecc_len` bytes of ECC per page (the
    /// `spare_len()` of the [`PageCodec`] that will be passed to encode and decode, configured
    /// for [`PagePlan::protected_len`] bytes).
    pub fn new(codec: WomCodec<W>, layout: SecondWriteLayout, ecc_len: usize) -> Result<Self, WomError> {
        let plan = PagePlan::new(layout, codec.config(), ecc_len)?;
        Ok(WomPageCodec { codec, plan })
    }

    /// The plan (sizes, overhead).
    pub fn plan(&self) -> &PagePlan {
        &self.plan
    }

    /// The codeword-level codec.
    pub fn codec(&self) -> &WomCodec<W> {
        &self.codec
    }

    fn check_lengths(&self, pages: [usize; 2], msg: usize, ecc: usize) -> Result<(), WomError> {
        let l = &self.plan.layout;
        if pages.iter().any(|&p| p != l.page_len()) || msg != l.data_bytes {
            return Err(WomError::BadLength);
        }
        if ecc != self.plan.ecc_len {
            return Err(WomError::BadConfig);
        }
        Ok(())
    }

    /// The byte ranges of codeword `c`'s cells in page A and in page B.
    fn cell_ranges(&self, c: usize) -> (core::ops::Range<usize>, core::ops::Range<usize>) {
        let bytes = 8 * self.codec.config().words();
        let d = self.plan.layout.data_bytes;
        let (start, end) = (c * bytes, (c + 1) * bytes);
        (start.min(d)..end.min(d), start.max(d) - d..end.max(d) - d)
    }

    /// Reads codeword `c`'s cells (paper convention, `s = !nand`) from the two data areas.
    fn gather_cells(&self, c: usize, a: &[u8], b: &[u8], cells: &mut [u64]) {
        let (ra, rb) = self.cell_ranges(c);
        let src = a.get(ra).unwrap_or(&[]).chunks_exact(8).chain(b.get(rb).unwrap_or(&[]).chunks_exact(8));
        for (cell, chunk) in cells.iter_mut().zip(src) {
            *cell = !load_u64(chunk, 0, 0xFF);
        }
    }

    /// Writes codeword `c`'s cells back as NAND bits (`nand = !s`).
    fn scatter_cells(&self, c: usize, cells: &[u64], a: &mut [u8], b: &mut [u8]) {
        let (ra, rb) = self.cell_ranges(c);
        let (Some(a), Some(b)) = (a.get_mut(ra), b.get_mut(rb)) else { return };
        for (&cell, chunk) in cells.iter().zip(a.chunks_exact_mut(8).chain(b.chunks_exact_mut(8))) {
            chunk.copy_from_slice(&(!cell).to_le_bytes());
        }
    }

    /// Encodes the logical page `message` (`D` bytes) as a second write over two physical pages
    /// whose current contents (data + spare, as read, after any correction of the first write)
    /// are `first_a` and `first_b`. Writes the pages' new images to `out_a` and `out_b`; each
    /// new image only clears bits of its input (`out = first AND out`), so programming it over
    /// the page is a legal partial program. `address` keys the codewords' dither and
    /// permutations; decoding needs the same value (e.g. the plane-0 page's physical address,
    /// which the page map points at). `ecc` protects the result (see the module docs).
    #[allow(clippy::too_many_arguments)]
    pub fn encode_second_write<E: PageCodec, const LW: usize>(
        &self,
        ecc: &mut E,
        address: u64,
        message: &[u8],
        first_a: &[u8],
        first_b: &[u8],
        out_a: &mut [u8],
        out_b: &mut [u8],
        scratch: &mut WomScratch<W, LW>,
    ) -> Result<WomEncoded, WomError> {
        self.check_lengths([first_a.len(), first_b.len()], message.len(), ecc.spare_len())?;
        if out_a.len() != first_a.len() || out_b.len() != first_b.len() {
            return Err(WomError::BadLength);
        }
        self.codec.check_list::<LW>()?;
        let cfg = *self.codec.config();
        let plan = self.plan;
        out_a.copy_from_slice(first_a);
        out_b.copy_from_slice(first_b);
        let words = cfg.words();
        let d = plan.layout.data_bytes;
        let pr = payload_range(&plan);
        let mut result = WomEncoded::default();
        let (cells, msg, mut work) = scratch.split();
        {
            let (data_a, spare_a) = out_a.split_at_mut(d);
            let (data_b, spare_b) = out_b.split_at_mut(d);
            let sr = pr.start - d..pr.end - d;
            let (Some(pa), Some(pb)) = (spare_a.get_mut(sr.clone()), spare_b.get_mut(sr)) else {
                return Err(WomError::BadConfig);
            };
            // Payload: attempts (as the codewords are encoded), overflow, CRC, padding ones.
            let mut wr = SplitWriter::new(pa, pb);
            for c in 0..plan.codewords {
                self.gather_cells(c, first_a, first_b, &mut cells[..]);
                bytes_to_words(message, c * cfg.k, cfg.k, &mut msg[..]);
                let a = self.codec.encode_attempts(
                    address,
                    c as u32,
                    &mut cells[..words],
                    &msg[..],
                    &mut work,
                )?;
                self.scatter_cells(c, &cells[..], data_a, data_b);
                wr.push(u64::from(a), plan.attempt_bits);
                result.max_attempt = result.max_attempt.max(a);
                result.retries += u32::from(a);
            }
            let mut pos = plan.codewords * plan.k;
            let end = 8 * d;
            while pos < end {
                let n = (end - pos).min(64) as u32;
                wr.push(read_bits_bytes(message, pos, n), n);
                pos += n as usize;
            }
            wr.push(u64::from(crc32c(message)), 32);
            let total = 16 * plan.payload_bytes;
            while wr.pos < total {
                let n = (total - wr.pos).min(64) as u32;
                wr.push(low_mask(n), n);
            }
            wr.finish();
        }
        // ECC over each page's protected bytes, stored right after them.
        for (out, first) in [(&mut *out_a, first_a), (&mut *out_b, first_b)] {
            let (data, rest) = out.split_at_mut(plan.protected_len);
            let Some(parity) = rest.get_mut(..plan.ecc_len) else { return Err(WomError::BadConfig) };
            ecc.encode(data, parity);
            // Raw cells can only be cleared: each written bit must have been 1.
            let span = pr.start..plan.protected_len + plan.ecc_len;
            let (Some(new), Some(old)) = (out.get(span.clone()), first.get(span)) else {
                return Err(WomError::BadConfig);
            };
            if new.iter().zip(old).any(|(&n, &o)| n & !o != 0) {
                return Err(WomError::SpareNotErased);
            }
        }
        Ok(result)
    }

    /// Decodes a second write: `page_a` and `page_b` are the two raw page images as read (data +
    /// spare); they are corrected in place by `ecc`, then the logical page is decoded into
    /// `out` (`D` bytes) and checked against its CRC. `address` is the one given to encode.
    pub fn decode_second_write<E: PageCodec, const LW: usize>(
        &self,
        ecc: &mut E,
        address: u64,
        page_a: &mut [u8],
        page_b: &mut [u8],
        out: &mut [u8],
        scratch: &mut WomScratch<W, LW>,
    ) -> Result<WomDecoded, WomError> {
        self.check_lengths([page_a.len(), page_b.len()], out.len(), ecc.spare_len())?;
        let plan = self.plan;
        let mut corrected = 0u32;
        for page in [&mut *page_a, &mut *page_b] {
            let (data, rest) = page.split_at_mut(plan.protected_len);
            let Some(parity) = rest.get(..plan.ecc_len) else { return Err(WomError::BadConfig) };
            corrected += ecc.decode(data, parity).map_err(|_| WomError::Uncorrectable)?;
        }
        let page_a: &[u8] = page_a;
        let page_b: &[u8] = page_b;
        let pr = payload_range(&plan);
        let (Some(pa), Some(pb)) = (page_a.get(pr.clone()), page_b.get(pr)) else {
            return Err(WomError::BadConfig);
        };
        let (cells, _, work) = scratch.split();
        let mut wr = BitWriter::new(out, 0);
        let ab = plan.attempt_bits;
        for c in 0..plan.codewords {
            let attempt = read_split(pa, pb, c * ab as usize, ab) as u8;
            self.gather_cells(c, page_a, page_b, &mut cells[..]);
            self.codec.decode_into(address, c as u32, attempt, &cells[..], work.x, work.perm, &mut wr)?;
        }
        let mut pos = plan.codewords * ab as usize;
        let end = pos + plan.overflow_bits;
        while pos < end {
            let n = (end - pos).min(64) as u32;
            wr.push(read_split(pa, pb, pos, n), n);
            pos += n as usize;
        }
        wr.finish();
        let stored = read_split(pa, pb, end, 32) as u32;
        if crc32c(out) != stored {
            return Err(WomError::CrcMismatch);
        }
        Ok(WomDecoded { corrected_bits: corrected })
    }
}
