//! The page codec's cost and correction, measured on the target at start-up: instructions (QEMU,
//! `-icount`) or cycles (board) per page to encode, to decode a clean page, and to decode a page
//! with k = 1..=t bit errors in every codeword (data bits at spread positions); then t + 1 errors
//! per codeword, which must never come back as wrong data. Every decode is checked against the
//! original page. The lines it logs (`[codec] ...`) are the figures docs/firmware.md quotes.

use ftl_core::policy::PageCodec;

use crate::app::Failed;
use crate::platform::{now, UNIT, UNITS_PER_TICK};

/// Repetitions of each measurement (the figure is the mean; under QEMU every repetition costs
/// the same, within the timer's 5-instruction tick).
const REPS: u64 = 8;
/// Largest spare a codec may use here.
const SPARE: usize = 64;

/// Measures and checks `codec` on pages of `page.len()` bytes; `t` errors per `cw`-byte codeword
/// must be corrected (`t = 0`: a codec that corrects nothing; only encode and clean decode are
/// measured). `page` and `work` are scratch buffers of one page each.
pub fn run<C: PageCodec>(
    codec: &mut C,
    t: u32,
    cw: usize,
    page: &mut [u8],
    work: &mut [u8],
) -> Result<(), Failed> {
    let sl = codec.spare_len();
    if sl > SPARE || work.len() != page.len() || cw == 0 {
        error!("[codec] spare of {} bytes or buffers not supported by the benchmark", sl);
        return Err(Failed);
    }
    let mut x = 0x1234_5679u32;
    for b in page.iter_mut() {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        *b = x as u8;
    }
    let mut spare = [0u8; SPARE];
    let t0 = now();
    for _ in 0..REPS {
        codec.encode(page, &mut spare[..sl]);
    }
    let enc = per_page(now() - t0);
    info!("[codec] encode: {} {} per page of {} bytes ({} spare bytes)", enc, UNIT, page.len(), sl);

    let cws = page.len().div_ceil(cw);
    for k in 0..=t + 1 {
        let mut ticks = 0;
        for rep in 0..REPS {
            work.copy_from_slice(page);
            flip(work, cw, k, rep as u32);
            let t0 = now();
            let r = codec.decode(work, &spare[..sl]);
            ticks += now() - t0;
            let exact = work == page;
            match r {
                Ok(n) if exact && (k > t || n as usize == k as usize * cws) => {}
                Err(_) if k > t => {}
                Ok(n) => {
                    error!(
                        "[codec] {} errors per codeword: decode said {} corrected, data {}",
                        k,
                        n,
                        if exact { "exact" } else { "WRONG" }
                    );
                    return Err(Failed);
                }
                Err(_) => {
                    error!("[codec] {} errors per codeword: uncorrectable", k);
                    return Err(Failed);
                }
            }
        }
        let per = per_page(ticks);
        let what = if k == 0 {
            "clean"
        } else if k <= t {
            "corrected"
        } else {
            "beyond t: never wrong data"
        };
        info!("[codec] decode {} errors/codeword: {} {} per page ({})", k, per, UNIT, what);
    }
    Ok(())
}

fn per_page(ticks: u64) -> u64 {
    ticks * UNITS_PER_TICK / REPS
}

/// Flips `k` distinct data bits in each `cw`-byte codeword of `page`, spread over it.
fn flip(page: &mut [u8], cw: usize, k: u32, salt: u32) {
    if k == 0 {
        return;
    }
    for (i, chunk) in page.chunks_mut(cw).enumerate() {
        let bits = chunk.len() * 8;
        let stride = bits / k as usize;
        let base = (salt as usize * 977 + i * 131) % stride.max(1);
        for j in 0..k as usize {
            let p = base + j * stride;
            if let Some(b) = chunk.get_mut(p / 8) {
                *b ^= 1 << (p % 8);
            }
        }
    }
}
