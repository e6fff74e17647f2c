//! The second-write codec seam: what the FTL asks of a WOM code (implemented in `ftl-policies`
//! by the polar WOM codec, and by a simulated codec in the simulator).
//!
//! The FTL hands the codec raw page images (data area then the whole spare area, as read) and
//! keys (a logical page for first writes, the plane-0 half's physical page for second writes);
//! everything else (code, retries, scratch memory, the ECC of the second write) is the codec's.

/// Why a second write could not be encoded or decoded.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum SecondWriteError {
    /// Every attempt failed (the page is then written as a first write elsewhere), or cells the
    /// second write needs erased are not.
    EncodeFailed,
    /// The two pages do not hold a readable second write.
    Uncorrectable,
}

/// A write-once-memory code for second writes over two physical pages, in NAND terms (erased =
/// 1, a program only clears bits), plus the first-write scrambler that makes it work on
/// structured data.
pub trait SecondWriteCodec {
    /// The spare bytes (`offset`, `len`) of each page the second write stores raw bits and ECC
    /// in. They must lie after the first write's metadata and codec bytes and before the FTL's
    /// second-write metadata at the end of the spare; the first write leaves them erased.
    fn region(&self) -> (usize, usize);

    /// Scrambles a first write keyed by `key` (`out = data XOR keystream`, complemented when
    /// more than half the cells would be programmed); returns the complement flag.
    fn scramble(&mut self, key: u64, data: &[u8], out: &mut [u8]) -> bool;

    /// Undoes [`SecondWriteCodec::scramble`].
    fn descramble(&mut self, key: u64, stored: &[u8], complemented: bool, out: &mut [u8]);

    /// Encodes `message` (one logical page) as a second write over the two raw page images
    /// `a` and `b` (their current contents on entry, their new contents on success; each new
    /// image only clears bits of the old one, region [`SecondWriteCodec::region`] included, and
    /// leaves every byte outside the data area and that region as it was). Returns the retries
    /// the encoding needed.
    fn encode(
        &mut self,
        key: u64,
        message: &[u8],
        a: &mut [u8],
        b: &mut [u8],
    ) -> Result<u32, SecondWriteError>;

    /// Decodes the second write in the raw images `a` and `b` (corrected in place) into `out`.
    fn decode(
        &mut self,
        key: u64,
        a: &mut [u8],
        b: &mut [u8],
        out: &mut [u8],
    ) -> Result<(), SecondWriteError>;
}
