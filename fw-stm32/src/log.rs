//! Logging shim. The application logs through `info!`, `warn!` and `error!`, which expand to
//! defmt on the board (RTT, decoded by probe-rs) and to semihosting `hprintln!` under QEMU (the
//! host's stdout, no decoder needed in CI).
//!
//! Format strings must mean the same in both: `{}` (defmt `Format` / core `Display`), `{:?}`
//! (`Format` / `Debug`) and zero padding such as `{:03}` or `{:02x}` on integers. No floats.
//! [`Loggable`] is what an error type must implement to be logged with `{:?}` on both.

#[cfg(feature = "board")]
macro_rules! info {
    ($($t:tt)*) => { defmt::info!($($t)*) };
}
#[cfg(feature = "board")]
#[allow(unused_macros)]
macro_rules! warn {
    ($($t:tt)*) => { defmt::warn!($($t)*) };
}
#[cfg(feature = "board")]
macro_rules! error {
    ($($t:tt)*) => { defmt::error!($($t)*) };
}

#[cfg(not(feature = "board"))]
macro_rules! info {
    ($fmt:literal $(, $arg:expr)* $(,)?) => {
        cortex_m_semihosting::hprintln!(concat!("INFO  ", $fmt) $(, $arg)*)
    };
}
#[cfg(not(feature = "board"))]
#[allow(unused_macros)]
macro_rules! warn {
    ($fmt:literal $(, $arg:expr)* $(,)?) => {
        cortex_m_semihosting::hprintln!(concat!("WARN  ", $fmt) $(, $arg)*)
    };
}
#[cfg(not(feature = "board"))]
macro_rules! error {
    ($fmt:literal $(, $arg:expr)* $(,)?) => {
        cortex_m_semihosting::hprintln!(concat!("ERROR ", $fmt) $(, $arg)*)
    };
}

/// A value the log macros can print with `{:?}` on every platform.
#[cfg(feature = "board")]
pub trait Loggable: defmt::Format + core::fmt::Debug {}
#[cfg(feature = "board")]
impl<T: defmt::Format + core::fmt::Debug> Loggable for T {}

/// A value the log macros can print with `{:?}` on every platform.
#[cfg(not(feature = "board"))]
pub trait Loggable: core::fmt::Debug {}
#[cfg(not(feature = "board"))]
impl<T: core::fmt::Debug> Loggable for T {}
