//! What each extension claims of the on-flash format, declared in one table and checked at
//! compile time: no two extensions that may run together (see [`super::refusal`]) claim
//! overlapping aux words on the same page kind. The aux constants live here (re-exported by
//! their technique's module), so the table exists in every build, features on or off.
//!
//! Claims on the spare area are not in the table: the core's metadata takes the first
//! [`crate::meta::META_LEN`] bytes and the page codec the next `PageCodec::spare_len()` bytes
//! (both fixed per build); second writes take the region their codec names plus their metadata
//! at the end of the spare, which depends on the codec's length and is checked when the FTL is
//! opened (`Reuse::check`). docs/format.md lays every byte out.

use super::{refusal, Stack};
use crate::meta::PageKind;

/// `aux` bit of a data page's metadata (second writes): the data is scrambled (keyed by its
/// logical page).
pub const AUX_SCRAMBLED: u32 = 1;
/// `aux` bit (second writes): the scrambled data was complemented.
pub const AUX_COMPLEMENTED: u32 = 2;
/// `aux` bit (second writes): the page's flags are lost (GC moved it when its metadata no longer
/// decoded, so whether and how it was scrambled is unknown): reads return
/// `Error::Uncorrectable` rather than data that may still be scrambled.
pub const AUX_FLAGS_LOST: u32 = 4;
/// Aux word (deduplication) of a journal page that holds share records (trim journal pages have
/// 0).
pub const SHARE_JOURNAL: u32 = 0x5348_524A;
/// Aux word (deduplication) of a data page written by GC to relocate shared content; its tag is
/// the physical page the content moved from.
pub const SHARED_MOVE: u32 = 0x5348_4D56;
/// Aux word (deduplication with second writes) of a relocation copy of shared content whose
/// source was scrambled with flags GC could not read (its metadata no longer decoded): the copy
/// holds the data as stored, and reads return `Error::Uncorrectable` rather than data that may
/// still be scrambled. Its tag is the physical page the content moved from, as for
/// [`SHARED_MOVE`].
pub const SHARED_MOVE_LOST: u32 = 0x5348_4D4C;

/// The extensions (and the core) as owners of claims.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Owner {
    /// The core (no technique).
    Core,
    /// Second writes (`wom`).
    Wom,
    /// Deduplication (`dedup`).
    Dedup,
    /// The NV cache (`cdm`).
    NvCache,
    /// FlexECC (`flex-ecc`).
    FlexEcc,
}

impl Owner {
    /// The stack of this owner alone.
    const fn stack(self) -> Stack {
        let mut s = Stack { wom: false, dedup: false, nv_cache: false, flex_ecc: false };
        match self {
            Owner::Core => {}
            Owner::Wom => s.wom = true,
            Owner::Dedup => s.dedup = true,
            Owner::NvCache => s.nv_cache = true,
            Owner::FlexEcc => s.flex_ecc = true,
        }
        s
    }
}

/// How a claim uses the aux word of a page kind.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Aux {
    /// These bits, combined freely (a bit field).
    Bits(u32),
    /// This one value (an enumerated tag).
    Value(u32),
}

impl Aux {
    /// Whether a page could be read as carrying both claims. `bits_a` / `bits_b`: every bit the
    /// owner of `self` / `other` may set in this page kind's aux word (the union of its `Bits`
    /// claims there): a value collides with a bit field when it is one of the field's words.
    const fn overlaps(self, other: Aux, bits_a: u32, bits_b: u32) -> bool {
        match (self, other) {
            (Aux::Bits(a), Aux::Bits(b)) => a & b != 0,
            (Aux::Bits(_), Aux::Value(v)) => v & !bits_a == 0,
            (Aux::Value(v), Aux::Bits(_)) => v & !bits_b == 0,
            (Aux::Value(a), Aux::Value(b)) => a == b,
        }
    }
}

/// Every bit `owner` may set in the aux word of pages of `kind` (its `Bits` claims there).
const fn bits_of(claims: &[Claim], owner: Owner, kind: PageKind) -> u32 {
    let mut bits = 0;
    let mut i = 0;
    while i < claims.len() {
        let c = claims[i];
        if c.owner as u8 == owner as u8 && same_kind(c.kind, kind) {
            if let Aux::Bits(m) = c.aux {
                bits |= m;
            }
        }
        i += 1;
    }
    bits
}

/// One claim: `owner` gives `aux` of pages of `kind` a meaning.
#[derive(Copy, Clone, Debug)]
pub struct Claim {
    /// Who claims it.
    pub owner: Owner,
    /// The page kind.
    pub kind: PageKind,
    /// The aux bits or value.
    pub aux: Aux,
}

/// Every aux claim (docs/format.md, "Every aux value in use"). The core's plain pages carry 0,
/// which no claim may take: a bit field must not include bit patterns of 0 (none can), a value
/// must not be 0.
pub const CLAIMS: [Claim; 6] = [
    Claim { owner: Owner::Wom, kind: PageKind::Data, aux: Aux::Bits(AUX_SCRAMBLED | AUX_COMPLEMENTED) },
    Claim { owner: Owner::Wom, kind: PageKind::Data, aux: Aux::Bits(AUX_FLAGS_LOST) },
    Claim { owner: Owner::Dedup, kind: PageKind::Data, aux: Aux::Value(SHARED_MOVE) },
    Claim { owner: Owner::Dedup, kind: PageKind::Data, aux: Aux::Value(SHARED_MOVE_LOST) },
    Claim { owner: Owner::Dedup, kind: PageKind::Journal, aux: Aux::Value(SHARE_JOURNAL) },
    Claim { owner: Owner::Core, kind: PageKind::Journal, aux: Aux::Value(0) },
];

const fn same_kind(a: PageKind, b: PageKind) -> bool {
    a as u8 == b as u8
}

const fn union(a: Stack, b: Stack) -> Stack {
    Stack {
        wom: a.wom || b.wom,
        dedup: a.dedup || b.dedup,
        nv_cache: a.nv_cache || b.nv_cache,
        flex_ecc: a.flex_ecc || b.flex_ecc,
    }
}

/// The first pair of claims (indices into `claims`) of different owners that may run together
/// (`respect_refusals`: per [`refusal`]; otherwise any two) and overlap; `None` if there is none.
pub const fn first_conflict(claims: &[Claim], respect_refusals: bool) -> Option<(usize, usize)> {
    let mut i = 0;
    while i < claims.len() {
        let a = claims[i];
        if let Aux::Value(0) = a.aux {
            if !matches!(a.owner, Owner::Core) {
                return Some((i, i));
            }
        }
        let mut j = i + 1;
        while j < claims.len() {
            let b = claims[j];
            let different =
                !matches!((a.owner, b.owner), (Owner::Core, Owner::Core)) && (a.owner as u8 != b.owner as u8);
            let together =
                !respect_refusals || refusal(union(a.owner.stack(), b.owner.stack()), false).is_none();
            let (bits_a, bits_b) = (bits_of(claims, a.owner, a.kind), bits_of(claims, b.owner, b.kind));
            if different && together && same_kind(a.kind, b.kind) && a.aux.overlaps(b.aux, bits_a, bits_b) {
                return Some((i, j));
            }
            j += 1;
        }
        i += 1;
    }
    None
}

// The compile-time check: extensions that may be stacked claim disjoint aux words.
const _: () =
    assert!(first_conflict(&CLAIMS, true).is_none(), "stackable extensions claim overlapping aux words");

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_pair_of_claims_is_disjoint_refusals_or_not() {
        assert_eq!(first_conflict(&CLAIMS, true), None);
        // No refusal rests on the aux word: second writes and deduplication share data pages'
        // aux (SHARED_MOVE has bits outside the scrambler's, so it is none of its words).
        assert_eq!(first_conflict(&CLAIMS, false), None);
        assert_ne!(SHARED_MOVE & !(AUX_SCRAMBLED | AUX_COMPLEMENTED | AUX_FLAGS_LOST), 0);
        // A value that is one of the scrambler's words would be caught, even one that combines
        // bits of its two claims.
        let mut claims = CLAIMS;
        claims[2].aux = Aux::Value(AUX_SCRAMBLED | AUX_FLAGS_LOST);
        assert_eq!(first_conflict(&claims, false), Some((0, 2)));
    }

    #[test]
    fn a_new_claim_that_overlaps_a_stackable_one_is_caught() {
        // A hypothetical NV cache tag equal to the share journal's value.
        let mut claims = [CLAIMS[0]; 7];
        claims[..6].copy_from_slice(&CLAIMS);
        claims[6] = Claim { owner: Owner::NvCache, kind: PageKind::Journal, aux: Aux::Value(SHARE_JOURNAL) };
        assert_eq!(first_conflict(&claims, true), Some((4, 6)));
        // The same value on a page kind nobody else claims is no conflict (on data pages it
        // would be: the NV cache stacks with second writes, whose scrambler flags it has).
        claims[6].kind = PageKind::Map;
        assert_eq!(first_conflict(&claims, true), None);
        // A technique may not claim the core's 0.
        claims[6] = Claim { owner: Owner::FlexEcc, kind: PageKind::Data, aux: Aux::Value(0) };
        assert_eq!(first_conflict(&claims, true), Some((6, 6)));
    }
}
