//! Logging shim: `debug!`, `info!`, `warn!` expand to defmt with the `defmt` feature and to
//! nothing otherwise, so host tests never link defmt (see the embedded notes' pitfall).
#![allow(unused_macros)]

#[cfg(feature = "defmt")]
macro_rules! ftl_debug { ($($t:tt)*) => { defmt::debug!($($t)*) }; }
#[cfg(not(feature = "defmt"))]
macro_rules! ftl_debug {
    ($($t:tt)*) => {{}};
}

#[cfg(feature = "defmt")]
macro_rules! ftl_info { ($($t:tt)*) => { defmt::info!($($t)*) }; }
#[cfg(not(feature = "defmt"))]
macro_rules! ftl_info {
    ($($t:tt)*) => {{}};
}

#[cfg(feature = "defmt")]
macro_rules! ftl_warn { ($($t:tt)*) => { defmt::warn!($($t)*) }; }
#[cfg(not(feature = "defmt"))]
macro_rules! ftl_warn {
    ($($t:tt)*) => {{}};
}

#[allow(unused_imports)]
pub(crate) use {ftl_debug as debug, ftl_info as info, ftl_warn as warn};
