//! Second writes (feature `wom`) on the host: owned buffers behind
//! [`ftl_core::reuse::ReuseMemory`], sized by [`ftl_core::reuse::ReuseLayout`], and the polar WOM
//! codec with owned work space, alone ([`polar_wom`]) or with BCH on its message
//! ([`polar_wom_bch`], beside BCH on first writes: [`WomBch`]).

use ftl_core::meta::META_LEN;
use ftl_core::policy::NullCodec;
use ftl_core::reuse::{Reuse, ReuseConfig, ReuseLayout, ReuseMemory, SecondWriteCodec};
use ftl_policies::wom::{fitted_codec, ftl_layout, WomScratch, WomSecondWrite};
use nand_hal::Geometry;

/// Block-length words of the polar codec (N up to 2^16).
pub const POLAR_W: usize = 1024;

/// The polar WOM codec with owned work space, no ECC of its own (the page's CRC-32C checks it).
pub type PolarWom = WomSecondWrite<POLAR_W, 0, NullCodec, Box<WomScratch<POLAR_W, 0>>, Vec<u8>>;

/// The polar WOM second-write codec for an FTL on `geometry` whose page codec stores
/// `codec_spare` bytes: N = 2^`n_log2`, `attempts` attempts per codeword, plain SC, and the
/// lowest rate that fits the spare left between the first write and the second write's metadata.
pub fn polar_wom(
    geometry: &Geometry,
    codec_spare: usize,
    n_log2: u32,
    attempts: u8,
) -> Result<PolarWom, String> {
    let layout = ftl_layout(geometry, META_LEN + codec_spare)
        .ok_or_else(|| format!("a {}-byte spare has no room for second writes", geometry.spare_bytes))?;
    let codec = fitted_codec::<POLAR_W>(layout, n_log2, attempts, 1, 0)
        .map_err(|e| format!("no polar WOM code of N = 2^{n_log2} fits this page layout: {e:?}"))?;
    let page = geometry.raw_page_bytes() as usize;
    WomSecondWrite::new(codec, NullCodec, Box::new(WomScratch::new()), vec![0; page], vec![0; page])
        .map_err(|e| format!("WOM codec: {e:?}"))
}

/// BCH (`BchCodec::for_geometry`: t = `bits` per 512 bytes + CRC-32C) on first writes and on
/// the second write's message, the polar code fitted into what is left of the spare.
pub type WomBch = ftl_policies::flex_ecc::BchCodec<8192, 2>;

pub fn polar_wom_bch(geo: &Geometry) -> Result<Box<dyn SecondWriteCodec + Send>, String> {
    use ftl_core::policy::PageCodec;
    let first = WomBch::for_geometry(geo).map_err(|e| format!("{e:?}"))?;
    let layout = ftl_layout(geo, META_LEN + first.spare_len()).ok_or("no room")?;
    let (m, t, cw) = (13, u32::from(geo.ecc.bits), geo.ecc.codeword_bytes as usize);
    // The ECC's length depends on the bytes it protects, which depend on the fitted code.
    let mut ecc_len = 0;
    for _ in 0..4 {
        let codec = fitted_codec::<POLAR_W>(layout, 16, 2, 1, ecc_len).map_err(|e| format!("{e:?}"))?;
        let ecc = WomBch::new(m, t, cw, codec.plan().protected_len).map_err(|e| format!("{e:?}"))?;
        if ecc.spare_len() != ecc_len {
            ecc_len = ecc.spare_len();
            continue;
        }
        let page = geo.raw_page_bytes() as usize;
        let w = WomSecondWrite::<POLAR_W, 0, _, _, _>::new(
            codec,
            ecc,
            Box::new(WomScratch::<POLAR_W, 0>::new()),
            vec![0u8; page],
            vec![0u8; page],
        )
        .map_err(|e| format!("{e:?}"))?;
        return Ok(Box::new(w));
    }
    Err("the ECC length does not settle".into())
}

/// Owned buffers behind [`ReuseMemory`].
#[derive(Clone, Debug)]
pub struct ReuseBuffers {
    second: Vec<u32>,
    pair: Vec<u32>,
    state: Vec<u8>,
    page_a: Vec<u8>,
    page_b: Vec<u8>,
    page_c: Vec<u8>,
    slots: Vec<u8>,
}

impl ReuseBuffers {
    /// Buffers for `geometry`.
    pub fn new(geometry: &Geometry) -> Self {
        let l = ReuseLayout::new(geometry);
        ReuseBuffers {
            second: vec![0; l.second_words],
            pair: vec![0; l.blocks],
            state: vec![0; l.blocks],
            page_a: vec![0; l.page_buf],
            page_b: vec![0; l.page_buf],
            page_c: vec![0; l.page_buf],
            slots: vec![0; l.slot_bytes(geometry)],
        }
    }

    /// Second writes over these buffers, with a prefetch slot per plane pair if `slots`
    /// ([`Reuse::with_prefetch_slots`]).
    pub fn reuse<'a>(
        &'a mut self,
        codec: &'a mut (dyn SecondWriteCodec + Send),
        cfg: ReuseConfig,
        slots: bool,
    ) -> Reuse<'a> {
        let ReuseBuffers { second, pair, state, page_a, page_b, page_c, slots: s } = self;
        let mem = ReuseMemory { second, pair, state, page_a, page_b, page_c };
        let r = Reuse::new(codec, mem, cfg);
        if slots {
            r.with_prefetch_slots(s)
        } else {
            r
        }
    }

    /// The memory, borrowed for one FTL instance.
    pub fn memory(&mut self) -> ReuseMemory<'_> {
        ReuseMemory {
            second: &mut self.second,
            pair: &mut self.pair,
            state: &mut self.state,
            page_a: &mut self.page_a,
            page_b: &mut self.page_b,
            page_c: &mut self.page_c,
        }
    }
}
