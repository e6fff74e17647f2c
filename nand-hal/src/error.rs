//! Errors, in the embedded-hal pattern: every device defines its own error type and maps each
//! error to a portable [`ErrorKind`], which is all the FTL looks at.

/// What went wrong, in terms every NAND device shares.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum ErrorKind {
    /// The program operation reported failure (status FAIL): the block should be retired.
    ProgramFailed,
    /// The erase operation reported failure (status FAIL): the block should be retired.
    EraseFailed,
    /// The device (or its on-die ECC) could not return correct data.
    Uncorrectable,
    /// An address or column outside the geometry.
    OutOfRange,
    /// A buffer whose length does not fit the page or spare area.
    BufferSize,
    /// More partial programs of one page than the geometry's NOP allows.
    NopExceeded,
    /// A page programmed out of order in a block whose geometry requires in-order programming.
    ProgramOrder,
    /// The device did not become ready in time.
    Timeout,
    /// The device has no power (emulated power cut); nothing was done.
    PowerLoss,
    /// The operation targets a block marked bad.
    BadBlock,
    /// Anything else.
    Other,
}

impl core::fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let s = match self {
            ErrorKind::ProgramFailed => "program failed",
            ErrorKind::EraseFailed => "erase failed",
            ErrorKind::Uncorrectable => "uncorrectable data",
            ErrorKind::OutOfRange => "address out of range",
            ErrorKind::BufferSize => "buffer size does not fit the page",
            ErrorKind::NopExceeded => "partial-program limit (NOP) exceeded",
            ErrorKind::ProgramOrder => "page programmed out of order",
            ErrorKind::Timeout => "device timeout",
            ErrorKind::PowerLoss => "device has no power",
            ErrorKind::BadBlock => "block is marked bad",
            ErrorKind::Other => "device error",
        };
        f.write_str(s)
    }
}

/// A device error: any debuggable type that knows its [`ErrorKind`].
pub trait Error: core::fmt::Debug {
    /// The portable kind of this error.
    fn kind(&self) -> ErrorKind;
}

impl Error for ErrorKind {
    fn kind(&self) -> ErrorKind {
        *self
    }
}

/// Names a device's error type.
pub trait ErrorType {
    /// The device's error type.
    type Error: Error;
}

impl<T: ErrorType + ?Sized> ErrorType for &mut T {
    type Error = T::Error;
}
