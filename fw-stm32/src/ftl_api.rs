//! The firmware's calls into the FTL and the ONFI driver. Each is a function the compiler may
//! not inline, so that whatever it inlines from ftl-core, ftl-policies and nand-hal lands in a
//! symbol of this module: `size-report.py` counts this module as "FTL core + HAL + ONFI driver"
//! (with the symbols of those crates that stay out of line). The cost is one call per
//! operation.

use ftl_core::policy::{Greedy, Policies, RequestSizeClassifier, SingleHostStream};
use ftl_core::{Config, Error as FtlError, FlatMap, Ftl, Memory};
use nand_hal::onfi::{OnfiBus, OnfiError, OnfiNand};
use nand_hal::Geometry;

use crate::meter::{TimedBus, TimedCodec, TimedNand};

/// Field-table entries of the BCH code (2^13: m = 13).
#[cfg(not(any(feature = "crc-codec", feature = "null-codec")))]
pub const BCH_FIELD: usize = 8192;
/// Remainder words of the BCH code (52 parity bits: one `u64`).
#[cfg(not(any(feature = "crc-codec", feature = "null-codec")))]
pub const BCH_WORDS: usize = 1;
/// The BCH code's correction per codeword (the MT29F4G08ABADA requires 4 bits per 512 bytes).
#[cfg(not(any(feature = "crc-codec", feature = "null-codec")))]
pub const BCH_T: u32 = 4;

/// BCH(m = 13, t = 4): tables computed by the compiler (`Bch::new_const` in a `static`
/// initializer), so they live in flash (`.rodata`, 48 KiB), not RAM; a bad (m, t) is a build
/// error.
#[cfg(not(any(feature = "crc-codec", feature = "null-codec")))]
pub static BCH: ftl_policies::flex_ecc::Bch<BCH_FIELD, BCH_WORDS> =
    match ftl_policies::flex_ecc::Bch::new_const(13, BCH_T) {
        Ok(b) => b,
        Err(_) => panic!("BCH(13, 4) tables"),
    };

/// The page codec (default): BCH t = 4 per 512-byte codeword plus a CRC-32C over the page, the
/// tables in flash: on a 2048 + 64 page, 4 x 7 parity bytes + 4 CRC bytes = 32 spare bytes next to
/// the FTL's 28 metadata bytes (60 of 64).
#[cfg(not(any(feature = "crc-codec", feature = "null-codec")))]
pub type Codec = ftl_policies::flex_ecc::BchCodec<
    BCH_FIELD,
    BCH_WORDS,
    &'static ftl_policies::flex_ecc::Bch<BCH_FIELD, BCH_WORDS>,
>;
/// The page codec with `crc-codec`: CRC-32C only (detects, corrects nothing; for comparison).
#[cfg(all(feature = "crc-codec", not(feature = "null-codec")))]
pub type Codec = ftl_policies::policy::Crc32cCodec;
/// The page codec with `null-codec`: none (to measure the FTL without a codec).
#[cfg(feature = "null-codec")]
pub type Codec = ftl_policies::policy::NullCodec;

/// Bit errors per codeword the page codec corrects (0: none).
pub const CODEC_T: u32 = if cfg!(any(feature = "crc-codec", feature = "null-codec")) { 0 } else { 4 }; // BCH_T

/// Name of the page codec, for the log.
pub const CODEC_NAME: &str = if cfg!(feature = "null-codec") {
    "none (null-codec)"
} else if cfg!(feature = "crc-codec") {
    "CRC-32C only (crc-codec)"
} else {
    "BCH t=4 per 512 B + CRC-32C, tables in flash"
};

/// The codec for a chip of shape `geo`; `None` if the compiled code is weaker than the chip's
/// ECC requirement (or does not fit its page).
#[cfg(not(any(feature = "crc-codec", feature = "null-codec")))]
pub fn codec(geo: &Geometry) -> Option<Codec> {
    Codec::with_tables_for_geometry(&BCH, geo).ok()
}

/// The codec for a chip of shape `geo`.
#[cfg(any(feature = "crc-codec", feature = "null-codec"))]
pub fn codec(_geo: &Geometry) -> Option<Codec> {
    Some(Codec::default())
}

/// The policy bundle the firmware runs. The techniques of ftl-policies (cargo features `wom`,
/// `dedup`, `flex-ecc`, `eti`, `cdm`, forwarded by this crate's features of the same names) will
/// select their policies here as they land; today every build runs the baseline bundle.
pub type AppPolicies = Policies<TimedCodec<Codec>, RequestSizeClassifier, Greedy, SingleHostStream>;

/// The policy bundle for a chip of shape `geo` (`None`: see [`codec`]).
pub fn policies(geo: &Geometry) -> Option<AppPolicies> {
    Some(Policies {
        codec: TimedCodec::new(codec(geo)?),
        classifier: RequestSizeClassifier::default(),
        victim: Greedy,
        placement: SingleHostStream,
    })
}

/// The ONFI driver over the metered bus.
pub type Driver<B> = OnfiNand<TimedBus<B>>;

/// The NAND the FTL sees: the metered driver.
pub type Nand<B> = TimedNand<Driver<B>>;

/// The FTL over a lent NAND (lent, so that a failed mount does not drop the device).
pub type AppFtl<'a, B> = Ftl<'a, &'a mut Nand<B>, AppPolicies, FlatMap<'a>>;

/// RESET, READ ID, READ PARAMETER PAGE.
#[inline(never)]
pub fn identify<B: OnfiBus>(bus: TimedBus<B>) -> Result<Driver<B>, OnfiError<B::Error>> {
    OnfiNand::new(bus)
}

/// Mounts.
#[inline(never)]
pub fn mount<'a, B: OnfiBus>(
    nand: &'a mut Nand<B>,
    policies: AppPolicies,
    map: FlatMap<'a>,
    mem: Memory<'a>,
    cfg: Config,
) -> Result<AppFtl<'a, B>, FtlError> {
    Ftl::mount(nand, policies, map, mem, cfg)
}

/// Formats.
#[inline(never)]
pub fn format<'a, B: OnfiBus>(
    nand: &'a mut Nand<B>,
    policies: AppPolicies,
    map: FlatMap<'a>,
    mem: Memory<'a>,
    cfg: Config,
) -> Result<AppFtl<'a, B>, FtlError> {
    Ftl::format(nand, policies, map, mem, cfg)
}

/// Flushes, checkpoints, gives the device back.
#[inline(never)]
pub fn unmount<B: OnfiBus>(ftl: AppFtl<'_, B>) -> Result<(), FtlError> {
    ftl.unmount().map(|_| ())
}

/// Writes whole pages.
#[inline(never)]
pub fn write<B: OnfiBus>(ftl: &mut AppFtl<'_, B>, lpn: u32, data: &[u8]) -> Result<(), FtlError> {
    ftl.write(lpn, data)
}

/// Reads whole pages.
#[inline(never)]
pub fn read<B: OnfiBus>(ftl: &mut AppFtl<'_, B>, lpn: u32, buf: &mut [u8]) -> Result<(), FtlError> {
    ftl.read(lpn, buf)
}

/// Trims pages.
#[inline(never)]
pub fn trim<B: OnfiBus>(ftl: &mut AppFtl<'_, B>, lpn: u32, count: u32) -> Result<(), FtlError> {
    ftl.trim(lpn, count)
}

/// Makes writes and trims durable.
#[inline(never)]
pub fn flush<B: OnfiBus>(ftl: &mut AppFtl<'_, B>) -> Result<(), FtlError> {
    ftl.flush()
}
