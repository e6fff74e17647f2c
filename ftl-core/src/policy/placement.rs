//! The placement seam: where a host page's data goes. The baseline has first writes only, on a
//! stream's open block; the `wom` and `dedup` features add second writes and references.
//! GC copies always go to the GC stream; placement decides only for host data.

use super::Temperature;

/// A write frontier: each plane has one open block per stream.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[repr(u8)]
pub enum Stream {
    /// Host data (hot data where temperatures are separated).
    Host = 0,
    /// Cold host data, where temperatures are separated.
    Cold = 1,
    /// Data moved by garbage collection and wear leveling.
    Gc = 2,
}

/// Where a page goes.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum Destination {
    /// A first write on the open block of a stream.
    FirstWrite(Stream),
}

/// Chooses where host data goes.
pub trait Placement {
    /// The destination of logical page `lpn` of the given temperature.
    fn place(&mut self, lpn: u32, temperature: Temperature) -> Destination;
}

/// Every host write on the host stream (the baseline).
#[derive(Copy, Clone, Debug, Default)]
pub struct SingleHostStream;

impl Placement for SingleHostStream {
    fn place(&mut self, _lpn: u32, _t: Temperature) -> Destination {
        Destination::FirstWrite(Stream::Host)
    }
}

/// Hot data on the host stream, cold data on the cold stream (dual frontiers).
#[derive(Copy, Clone, Debug, Default)]
pub struct SeparateByTemperature;

impl Placement for SeparateByTemperature {
    fn place(&mut self, _lpn: u32, t: Temperature) -> Destination {
        match t {
            Temperature::Hot => Destination::FirstWrite(Stream::Host),
            Temperature::Cold => Destination::FirstWrite(Stream::Cold),
        }
    }
}
