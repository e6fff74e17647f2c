//! The FTL's one error type. Every failure the outside world can cause (device errors, bad
//! arguments, a full device, a corrupt or foreign image) comes back as an [`Error`]; the FTL's
//! state stays consistent after each of them.

use nand_hal::ErrorKind;

/// What went wrong.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum Error {
    /// The NAND device failed in a way the FTL could not work around (timeout, power loss, ...).
    /// Nothing acknowledged is lost; the operation that saw it did not take effect, or took
    /// effect only as the power-loss guarantees allow.
    Device(ErrorKind),
    /// A logical page outside the device's capacity.
    OutOfRange,
    /// A buffer whose length is not a whole number of logical pages (or is too short).
    BufferSize,
    /// No free space is left: too many blocks went bad for the configured capacity.
    NoSpace,
    /// The data of a logical page failed its integrity check and could not be corrected.
    Uncorrectable {
        /// The logical page.
        lpn: u32,
    },
    /// The device holds no FTL image (never formatted).
    NotFormatted,
    /// The device holds an image this FTL cannot use: another format version, geometry or
    /// configuration, or metadata that contradicts itself.
    Corrupt,
    /// The configuration does not fit the geometry, or the geometry is invalid.
    Config,
    /// The caller's memory does not have the sizes [`crate::RamLayout`] requires.
    Memory,
    /// A combination of techniques the FTL does not run; the [`crate::Refusal`] says why.
    Unsupported(crate::Refusal),
}

impl core::fmt::Display for Error {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Error::Device(k) => write!(f, "NAND device error: {k}"),
            Error::OutOfRange => f.write_str("logical page out of range"),
            Error::BufferSize => f.write_str("buffer length is not a whole number of pages"),
            Error::NoSpace => f.write_str("no free space left"),
            Error::Uncorrectable { lpn } => write!(f, "logical page {lpn} is uncorrectable"),
            Error::NotFormatted => f.write_str("device is not formatted"),
            Error::Corrupt => f.write_str("device image is corrupt or foreign"),
            Error::Config => f.write_str("configuration does not fit the geometry"),
            Error::Memory => f.write_str("caller memory has the wrong size"),
            Error::Unsupported(r) => write!(f, "unsupported combination: {r}"),
        }
    }
}

impl<E: nand_hal::Error> From<E> for Error {
    fn from(e: E) -> Self {
        Error::Device(e.kind())
    }
}
