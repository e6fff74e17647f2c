//! The adapter's error type: what a caller did wrong, or what the FTL reported.

/// Why a sector (or byte) access failed. The device is unchanged by a refused call
/// ([`Error::OutOfRange`], [`Error::Length`], [`Error::Buffer`]).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Error {
    /// The range reaches past the last sector (or its end overflows).
    OutOfRange,
    /// A buffer length that is not a whole number of sectors.
    Length,
    /// The page buffer is shorter than a page, or the page size is not a non-zero multiple of
    /// [`crate::SECTOR_SIZE`].
    Buffer,
    /// The device is already in use: a re-entrant call through a shared handle (the
    /// embedded-sdmmc wrapper).
    Busy,
    /// The disk is too small or too large for the filesystem asked for ([`crate::mkfs`]).
    Size,
    /// The FTL refused or failed (device error, full device, uncorrectable page, ...).
    Ftl(ftl_core::Error),
}

impl From<ftl_core::Error> for Error {
    fn from(e: ftl_core::Error) -> Self {
        Error::Ftl(e)
    }
}

impl core::fmt::Display for Error {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Error::OutOfRange => f.write_str("access past the end of the device"),
            Error::Length => f.write_str("length is not a whole number of 512-byte sectors"),
            Error::Buffer => {
                f.write_str("page buffer shorter than a page, or page size not a multiple of 512")
            }
            Error::Size => f.write_str("disk size outside what the filesystem supports"),
            Error::Busy => f.write_str("device in use (re-entrant call)"),
            Error::Ftl(e) => write!(f, "FTL: {e}"),
        }
    }
}

impl core::error::Error for Error {}
