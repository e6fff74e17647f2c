//! FlexECC's codes: a binary BCH codec bit-exact with Linux `lib/bch.c`, and [`BchCodec`], the
//! `PageCodec` that pairs BCH with a CRC-32C.
//!
//! This module owns:
//! * [`gf`]: GF(2^m) tables and helpers, m = 5..=15, Linux' default primitive polynomials;
//! * [`bch`]: [`Bch`], the code: table-driven systematic encoder, decoder (syndromes from the
//!   parity difference, binary Berlekamp-Massey, root finding), error locations in the kernel's
//!   `errloc` convention;
//! * `roots` (private): the root finder (closed forms up to degree 4, Berlekamp's trace algorithm
//!   above);
//! * [`codec`]: [`BchCodec`], per-codeword BCH plus a page CRC-32C, with the NAND erased-page
//!   convention, its tables owned or borrowed;
//! * `fast` (private): the one-word BCH kernel and a slice-by-8 CRC-32C, unrolled for the
//!   Cortex-M7;
//! * [`flex`] (feature `flex-ecc`; everything else needs only `bch`): [`FlexCodec`], FlexECC's two page formats (BCH or CRC-only,
//!   tagged in the spare);
//! * [`scrub`]: [`Scrubber`], the idle-time scrubber (verify CRC pages, prefetch
//!   corrupt ones from the backing store, refresh BCH pages near their limit).
//!
//! Guarantees: `no_std`, no `alloc`, no floating point, no panics on any data or stored bytes
//! (malformed lengths give errors). Up to t bit errors per codeword (message and parity) are
//! corrected exactly; more are reported as uncorrectable or, rarely, decoded to another codeword,
//! which [`BchCodec`]'s CRC then rejects. The implementation is written from the textbook
//! algorithms; only its outputs (parity bytes, bit order, error locations, erased-page masks) are
//! made to match the kernel, checked against the shared test vectors.
//!
//! Memory: every table lives inside the value, sized by two const generics, `FIELD` (`2^m` or
//! more, power of two) and `WORDS` (at least `ceil(ecc_bits/64)`, see [`ecc_words`]):
//!
//! | configuration | type | table bytes |
//! |---|---|---|
//! | m=13, t=4, 512 B | `Bch<8192, 1>` | 48 KiB (32 KiB field + 16 KiB encoder) |
//! | m=13, t=8, 512 B | `Bch<8192, 2>` | 64 KiB |
//! | m=13, t=16, 512 B | `Bch<8192, 4>` | 96 KiB |
//! | m=14, t=16, 1 KiB | `Bch<16384, 4>` | 128 KiB |
//! | m=14, t=40, 1 KiB | `Bch<16384, 9>` | 208 KiB |
//! | m=15, t=64, 2 KiB | `Bch<32768, 15>` | 368 KiB |
//!
//! ([`Bch::TABLE_BYTES`] gives the exact figure.) The tables are computed by `init`, a `const fn`:
//! at run time in place (a `static` in RAM built from `zeroed()`), or at compile time with
//! [`Bch::new_const`] in a `static` initializer (in flash: the firmware's way), the codec then
//! borrowing them ([`BchCodec::with_tables`]). The one-word case (m = 13, t = 4, the MT29F4G08's
//! requirement) runs BCH and the page CRC-32C through the unrolled kernels of the private `fast`
//! module (about 24,000 instructions per 2 KiB page on the Cortex-M7, encode or clean decode). Decoding needs about 4 KiB of stack, 12 KiB while locating more than 4 errors.

pub mod bch;
pub mod codec;
mod fast;
#[cfg(feature = "flex-ecc")]
pub mod flex;
pub mod gf;
mod roots;
#[cfg(feature = "flex-ecc")]
pub mod scrub;
#[cfg(all(test, feature = "flex-ecc"))]
mod tests;

pub use bch::{correct, ecc_bytes, ecc_words, Bch, EccState, ErrorLocations};
pub use codec::{codec_m, BchCodec, CRC_BYTES};
#[cfg(feature = "flex-ecc")]
pub use flex::{tag_format, FlexCodec, TAG_CORRECTING, TAG_DETECTING};
pub use gf::{default_prim_poly, field_size, Gf, DEFAULT_PRIM_POLYS};
#[cfg(feature = "flex-ecc")]
pub use scrub::{IdleWork, ScrubConfig, ScrubStats, Scrubber};

/// Largest supported t (Linux `BCH_MAX_T`).
pub const MAX_T: usize = 64;
/// Most `u64` words a remainder can take (m = 15, t = 64: 960 bits).
pub const MAX_ECC_WORDS: usize = 15;
/// Most parity bytes a codeword can have (m = 15, t = 64).
pub const MAX_ECC_BYTES: usize = 120;

/// Why a BCH code could not be built or a word could not be decoded.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum BchError {
    /// m outside 5..=15.
    UnsupportedField,
    /// t is 0 or above 64, or `m*t >= 2^m - 1`.
    UnsupportedStrength,
    /// The primitive polynomial given is not primitive of degree m.
    NotPrimitive,
    /// `FIELD` or `WORDS` is too small for (m, t).
    TablesTooSmall,
    /// The message plus parity is longer than `2^m - 1` bits.
    TooLong,
    /// A buffer is shorter than the code needs (parity, page or spare length).
    BadLength,
    /// More errors than the code corrects.
    Uncorrectable,
}
