//! The policy seams: traits the techniques plug into, and the baseline's defaults.
//!
//! | seam | trait | baseline default |
//! |---|---|---|
//! | what goes on the page and in the spare for the data | [`PageCodec`] | [`Crc32cCodec`] (detection only) |
//! | hot or cold | [`Classifier`] | [`RequestSizeClassifier`] (Reusable SSD's 64 KiB rule) |
//! | which block GC cleans, erase or recycle | [`VictimPolicy`] | [`Greedy`] (fewest valid pages) |
//! | where a page's data goes | [`Placement`] | [`SingleHostStream`] |
//!
//! An FTL is generic over one [`PolicySet`], a bundle of the four; [`Policies`] is the plain
//! bundle and [`DefaultPolicies`] the baseline. Everything is static: no trait objects, no
//! allocation.

mod classifier;
mod codec;
mod placement;
mod victim;

pub use classifier::{Classifier, RequestSizeClassifier, Temperature, WriteRequest};
pub use codec::{CodecError, Crc32cCodec, NullCodec, PageCodec, PageFormat};
pub use placement::{Destination, Placement, SeparateByTemperature, SingleHostStream, Stream};
pub use victim::{Greedy, VictimAction, VictimPolicy};

pub use crate::blocks::VictimView;

/// A bundle of the four policies an FTL runs with.
pub trait PolicySet {
    /// Page codec.
    type Codec: PageCodec;
    /// Hot/cold classifier.
    type Classifier: Classifier;
    /// GC victim policy.
    type Victim: VictimPolicy;
    /// Write placement.
    type Placement: Placement;
    /// The codec.
    fn codec(&mut self) -> &mut Self::Codec;
    /// The codec, shared.
    fn codec_ref(&self) -> &Self::Codec;
    /// The classifier.
    fn classifier(&mut self) -> &mut Self::Classifier;
    /// The victim policy.
    fn victim(&mut self) -> &mut Self::Victim;
    /// The placement.
    fn placement(&mut self) -> &mut Self::Placement;
}

/// The plain bundle of four policies.
#[derive(Clone, Debug, Default)]
pub struct Policies<C, K, V, L> {
    /// Page codec.
    pub codec: C,
    /// Hot/cold classifier.
    pub classifier: K,
    /// GC victim policy.
    pub victim: V,
    /// Write placement.
    pub placement: L,
}

impl<C: PageCodec, K: Classifier, V: VictimPolicy, L: Placement> PolicySet for Policies<C, K, V, L> {
    type Codec = C;
    type Classifier = K;
    type Victim = V;
    type Placement = L;
    fn codec(&mut self) -> &mut C {
        &mut self.codec
    }
    fn codec_ref(&self) -> &C {
        &self.codec
    }
    fn classifier(&mut self) -> &mut K {
        &mut self.classifier
    }
    fn victim(&mut self) -> &mut V {
        &mut self.victim
    }
    fn placement(&mut self) -> &mut L {
        &mut self.placement
    }
}

/// The baseline: CRC-32C pages, the request-size classifier, greedy GC, one host stream.
pub type DefaultPolicies = Policies<Crc32cCodec, RequestSizeClassifier, Greedy, SingleHostStream>;
