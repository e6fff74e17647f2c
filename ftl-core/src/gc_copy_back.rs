//! Copy-back GC: GC moves a valid page with the chip's copy-back
//! ([`NandFlash::copy_back`]: read for internal data move, then program from the plane's page
//! register) instead of a read and a program, saving the page's transfer in.
//!
//! When ([`Ftl::copy_back_destination`]): [`crate::Config::gc_copy_back`] is on, the device
//! does copy-back natively ([`nand_hal::CopyBackCaps::native`]; a device that would only run
//! the read + program fallback gains nothing), and the next page of the GC frontier the page
//! goes to meets the rule of [`nand_hal::copy_back::check_copy_back`] with the source (same
//! plane of one LUN; same page parity unless the part allows odd-to-even; computed from what
//! GC knows, the device checks it again; a frontier a mount resumed is excluded, its next page
//! is checked erased first). Anything else moves the plain way. Pages a technique moves its
//! own way (second writes, shared pages) never come here: their hooks run first (`gc.rs`).
//!
//! How the data is checked (the rule of [`nand_hal::copy_back`]): every copy is read out
//! ([`CopyBackRead::Page`]) and, in the `check` callback, its metadata decoded (its own BCH)
//! and matched against the map as the plain path does, then its data decoded by the page codec
//! in the format its codec bytes name (with FlexECC: a correcting page by its BCH, which
//! corrects up to t bits per codeword, plus the CRC-32C over the data; a detecting page by its
//! CRC-32C alone, which corrects nothing; a tag naming neither, both in turn, as any read).
//! The copy's format and codec bytes are then the plain path's ([`crate::gc::MovePlan`] from
//! `ExtState::flex_move_plan`, the decision FlexECC's move hook makes there): the stored format
//! kept, or a flush-read correcting page dropped to detecting. The data area is the same in
//! every format (the codec bytes live in the spare), so a format change is a copy-back too.
//! Clean: the register is programmed with the new metadata (new sequence number, the
//! destination block's erase count) and the codec bytes as read, or computed anew for a
//! format change (`write_spare`). Corrected (a correcting page): the corrected data and its
//! new codec bytes are written back too (`write_data`), so the read's raw bit errors are never
//! stored. Uncorrectable, a CRC mismatch (a detecting page with any bit error), metadata that
//! does not decode or name the page, a map entry not in RAM (a flash-resident map's miss needs
//! I/O, impossible inside the callback): `Abort`. Nothing is programmed and the page
//! continues on the plain path from the bytes just read: exactly what a GC read that fails
//! its check gets (a raw copy that keeps reading as uncorrectable, FlexECC's hook deciding its
//! format; a map search for a spare that does not decode), with no second read.
//!
//! Guarantees: a copy-back programs the same data and spare bytes to the same page, with the
//! same sequence number, as the plain read + program would have (the frontier page is taken
//! only once the program was issued, exactly as `append` takes it); the check only reads
//! FlexECC's RAM marks, which its hook updates once the program was issued (the plain path
//! updates them just before its program: nothing runs in between), so the marks and the
//! counters are the plain path's, plus [`crate::Counters::gc_copy_backs`] and its two
//! companions. A failed program is handled as `append` handles one ([`Ftl::program_failed`])
//! and retried the plain way from the checked buffer in the same format; a failed read is a
//! failed read (nothing programmed, no mark changed); a cut on either of its two operations
//! leaves what a cut of that read or program leaves (the marks are RAM, lost on a cut anyway).

use nand_hal::copy_back::check_copy_back;
use nand_hal::{BlockId, CopyBackAction, CopyBackError, CopyBackOp, CopyBackRead, NandFlash, PageId};

use crate::ext::ExtState;
use crate::frontier::{Frontier, Source, TornPages};
use crate::gc::MovePlan;
use crate::map::{MapNeed, MappingTable};
use crate::meta::{PageKind, PageMeta, SpareState, META_LEN};
use crate::policy::{CodecError, PageCodec, PolicySet, Stream};
use crate::{Error, Ftl};

/// What [`Ftl::try_copy_back`] did with a page GC relocates.
pub(crate) enum CopyBack {
    /// Nothing: the page is still to be read.
    NotTried,
    /// Read out into the page buffer, nothing programmed: the page moves the plain way from
    /// there. `decoded`: the codec's answer if the check decoded the data (the buffer's data is
    /// then as the decode left it, and must not be decoded again).
    Aborted { decoded: Option<Result<u32, CodecError>> },
    /// Programmed (by the copy-back, or by the plain retry after its program failed): `lpn` now
    /// belongs at `new` (not remapped yet).
    Moved { lpn: u32, new: PageId },
}

/// What the check decided, for after the copy-back returns.
#[derive(Copy, Clone)]
enum Verdict {
    /// Aborted before the data was decoded.
    Unchecked,
    /// Aborted after the codec's answer.
    Failed(Result<u32, CodecError>),
    /// Programmed as described.
    Copy(Copied),
}

/// A copy the check let program: the new metadata of `lpn` (`aux` kept) and the codec bytes
/// `plan` asks for; `corrected`: data written back.
#[derive(Copy, Clone)]
struct Copied {
    lpn: u32,
    aux: u32,
    corrected: bool,
    plan: MovePlan,
}

/// What the check needs besides the page: the new metadata's fields and the map's bound.
struct NewCopy {
    src: PageId,
    seq: u64,
    erase_count: u32,
    logical_pages: u32,
    spare_len: usize,
}

/// The `check` callback's work on the page read out (`data`, `spare`: the whole page).
fn check_copy<C: PageCodec, M: MappingTable>(
    codec: &mut C,
    map: &mut M,
    ext: &ExtState<'_>,
    new: &NewCopy,
    data: &mut [u8],
    spare: &mut [u8],
) -> Verdict {
    let Some(stored) = spare.get(..new.spare_len) else { return Verdict::Unchecked };
    let m = match PageMeta::decode(stored) {
        SpareState::Valid(m) if m.kind == PageKind::Data && m.tag < new.logical_pages => m,
        _ => return Verdict::Unchecked,
    };
    // The plain path's test (`map_get_for_write(tag) == Some(src)`), answered only from RAM.
    if map.need_write(m.tag) != MapNeed::Ready || map.get(m.tag) != Some(new.src) {
        return Verdict::Unchecked;
    }
    let codec_bytes = &stored[META_LEN..];
    // The format the stored codec bytes name (the decode does not change them).
    let format = codec.format_of(codec_bytes);
    let corrected = match codec.decode(data, codec_bytes) {
        Ok(n) => n > 0,
        failed => return Verdict::Failed(failed),
    };
    // The copy's format and codec bytes: the plain path's decision (`relocate_read`).
    let plan = ext.flex_move_plan(m.tag, format, true, corrected);
    let meta =
        PageMeta { kind: PageKind::Data, tag: m.tag, seq: new.seq, erase_count: new.erase_count, aux: m.aux };
    meta.encode(&mut spare[..META_LEN]);
    if plan.encode {
        codec.encode_as(data, &mut spare[META_LEN..new.spare_len], plan.format);
    }
    // The plain program writes only metadata and codec bytes; the rest of the spare stays erased.
    spare[new.spare_len..].fill(0xFF);
    Verdict::Copy(Copied { lpn: m.tag, aux: m.aux, corrected, plan })
}

impl<N: NandFlash, P: PolicySet, M: MappingTable> Ftl<'_, N, P, M> {
    /// The page a copy-back of `src` to the GC frontier of `plane` (open: `ensure_gc_frontier`
    /// returned it) would program, if copy-back is to be used for it (see the module doc).
    fn copy_back_destination(&self, src: PageId, plane: u32) -> Option<PageId> {
        if !self.cfg.gc_copy_back {
            return None;
        }
        let caps = self.nand.copy_back_caps();
        if !caps.native {
            return None;
        }
        let i = Self::frontier_index(plane, Stream::Gc);
        let f = *self.frontiers.get(i)?;
        if f.block == Frontier::NONE.block || self.resumed & (1 << i) != 0 {
            return None;
        }
        // The rules of `check_copy_back` from what is known here: `src` is a page of this device
        // (GC found it valid), the frontier's block is in `plane` and the page buffer is exactly
        // one page (checked at open), so the plane and the parity remain. (The device checks
        // the whole rule again; a refusal would send the page the plain way.)
        let g = &self.geo;
        if g.plane_index(g.block_of(src)) != plane
            || (!caps.odd_to_even && (g.page_in_block(src) ^ f.next_page) & 1 != 0)
        {
            return None;
        }
        let dst = g.page(BlockId(f.block), f.next_page);
        debug_assert_eq!(
            check_copy_back(
                g,
                caps,
                src,
                dst,
                self.buf.len() - g.spare_bytes as usize,
                g.spare_bytes as usize
            ),
            Ok(())
        );
        Some(dst)
    }

    /// Moves `page` (valid, in a block GC collects) to the GC frontier of `plane` by copy-back if
    /// it qualifies (see the module doc). The caller has counted the read.
    pub(crate) fn try_copy_back(&mut self, page: PageId, plane: u32) -> Result<CopyBack, Error> {
        let Some(dst) = self.copy_back_destination(page, plane) else { return Ok(CopyBack::NotTried) };
        let d = self.geo.data_bytes as usize;
        let new = NewCopy {
            src: page,
            seq: self.seq,
            erase_count: self.blocks.get(self.geo.block_of(dst)).erase_count(),
            logical_pages: self.cfg.logical_pages,
            spare_len: META_LEN + self.codec_len,
        };
        let mut verdict = Verdict::Unchecked;
        let result = {
            let (codec, map, ext) = (self.policies.codec(), &mut self.map, &self.ext);
            let (data, spare) = self.buf.split_at_mut(d);
            let op = CopyBackOp { src: page, dst, read: CopyBackRead::Page, data, spare };
            self.nand.copy_back(op, &mut |data, spare| {
                verdict = check_copy(codec, map, ext, &new, data, spare);
                match verdict {
                    Verdict::Copy(Copied { corrected, .. }) => {
                        CopyBackAction::Program { write_data: corrected, write_spare: true }
                    }
                    _ => CopyBackAction::Abort,
                }
            })
        };
        let program_error = match result {
            Ok(CopyBackAction::Abort) => {
                self.counters.gc_copy_back_aborts += 1;
                let decoded = match verdict {
                    Verdict::Failed(r) => Some(r),
                    _ => None,
                };
                return Ok(CopyBack::Aborted { decoded });
            }
            // Not issued (the device disagrees with the rules checked above): the plain way.
            Err(CopyBackError::Refused(_)) => return Ok(CopyBack::NotTried),
            Err(CopyBackError::Read(e)) => return Err(e.into()),
            Ok(CopyBackAction::Program { .. }) => None,
            Err(CopyBackError::Program(e)) => Some(e),
        };
        // The program was issued: the destination is consumed, as in `append`, and FlexECC
        // records the move as the plain path's hook does before its program.
        let Verdict::Copy(copied) = verdict else { return Err(Error::Corrupt) };
        let saved = self.flex_begin_move(copied.lpn, copied.plan);
        let moved = self.copy_back_issued(dst, plane, program_error, copied);
        self.flex_after_move(saved);
        moved
    }

    /// The end of a copy-back whose program was issued to `dst` (`program_error`: it failed).
    fn copy_back_issued(
        &mut self,
        dst: PageId,
        plane: u32,
        program_error: Option<N::Error>,
        copied: Copied,
    ) -> Result<CopyBack, Error> {
        let Copied { lpn, aux, corrected, plan } = copied;
        self.counters.nand_programs += 1;
        self.dirty = true;
        self.seq += 1;
        if self.take_page(plane, Stream::Gc)? != dst {
            return Err(Error::Corrupt);
        }
        let Some(e) = program_error else {
            self.counters.gc_copy_backs += 1;
            self.counters.gc_copy_back_corrected += corrected as u64;
            return Ok(CopyBack::Moved { lpn, new: dst });
        };
        let mut unvoided = TornPages::NONE;
        self.program_failed(dst, e, &mut unvoided)?;
        // Retried the plain way from the checked buffer, in the plan's format (set by
        // `flex_begin_move`; codec bytes computed again when the plan says so).
        match self.append(plane, Stream::Gc, PageKind::Data, lpn, aux, Source::Buffer { encode: plan.encode })
        {
            Ok(new) => Ok(CopyBack::Moved { lpn, new }),
            Err(e) => {
                self.torn.append(&unvoided);
                Err(e)
            }
        }
    }
}
