//! Emulated non-volatile RAM for the NV cache (`ftl_core::cdm::Nvm`): a byte array that keeps
//! its content across power cuts, with cuts that tear the write in progress.
//!
//! Power cuts: [`NvRam::schedule_power_cut`] picks the write (counted by
//! [`NvRam::writes_issued`], reads are not counted) to interrupt. The interrupted write stores a
//! prefix of its bytes up to an 8-byte-aligned address chosen at random (anything from none to
//! all but the last word), and with probability 1/2 the next 8-byte word of the range is filled
//! with random bytes (a word caught mid-update); the rest keeps its old content. It then returns
//! `PowerLoss`, and every access fails with `PowerLoss` until [`NvRam::restore_power`]. The tear
//! granularity is 8 bytes (a 64-bit bus word, as battery-backed SRAM or MRAM behind a 64-bit
//! controller would tear); the NV cache itself assumes nothing about it (see
//! `ftl_core::cdm::Nvm`).
//!
//! For the simulator, [`NvRam::with_stored_prefix`] stores only the first bytes (the cache's
//! directory) and drops writes beyond them (reads there return zeros), as the NAND emulator's
//! metadata-only mode does for page data.

use ftl_core::cdm::Nvm;
use nand_hal::ErrorKind;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Tear granularity in bytes.
pub const TEAR_WORD: usize = 8;

/// An emulated persistent byte region.
#[derive(Clone, Debug)]
pub struct NvRam {
    bytes: Vec<u8>,
    len: u32,
    powered: bool,
    writes: u64,
    cut_at: Option<u64>,
    rng: ChaCha8Rng,
}

impl NvRam {
    /// `len` bytes, zeroed, every byte stored; `seed` drives tearing.
    pub fn new(len: u32, seed: u64) -> Self {
        Self::with_stored_prefix(len, len, seed)
    }

    /// `len` bytes of which only the first `stored` are kept (see the module documentation).
    pub fn with_stored_prefix(len: u32, stored: u32, seed: u64) -> Self {
        NvRam {
            bytes: vec![0; stored.min(len) as usize],
            len,
            powered: true,
            writes: 0,
            cut_at: None,
            rng: ChaCha8Rng::seed_from_u64(seed ^ 0x4E56_5241_4D00_0000),
        }
    }

    /// Writes issued so far (power cut or not).
    pub fn writes_issued(&self) -> u64 {
        self.writes
    }

    /// Interrupts the write with index `writes_issued() + after` (0 = the next one).
    pub fn schedule_power_cut(&mut self, after: u64) {
        self.cut_at = Some(self.writes + after);
    }

    /// Cancels a scheduled cut.
    pub fn cancel_power_cut(&mut self) {
        self.cut_at = None;
    }

    /// Whether a cut is scheduled.
    pub fn pending_power_cut(&self) -> Option<u64> {
        self.cut_at.map(|c| c.saturating_sub(self.writes))
    }

    /// Cuts power now.
    pub fn power_cut_now(&mut self) {
        self.powered = false;
    }

    /// Restores power.
    pub fn restore_power(&mut self) {
        self.powered = true;
    }

    /// Whether the region has power.
    pub fn is_powered(&self) -> bool {
        self.powered
    }

    /// The stored bytes (the whole region unless built with a stored prefix).
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    fn check(&self, offset: u32, n: usize) -> Result<(), ErrorKind> {
        if offset as u64 + n as u64 > self.len as u64 {
            return Err(ErrorKind::OutOfRange);
        }
        if !self.powered {
            return Err(ErrorKind::PowerLoss);
        }
        Ok(())
    }

    fn store(&mut self, offset: usize, data: &[u8]) {
        let end = (offset + data.len()).min(self.bytes.len());
        if offset < end {
            self.bytes[offset..end].copy_from_slice(&data[..end - offset]);
        }
    }
}

impl Nvm for NvRam {
    fn len(&self) -> u32 {
        self.len
    }

    fn read(&mut self, offset: u32, buf: &mut [u8]) -> Result<(), ErrorKind> {
        self.check(offset, buf.len())?;
        let o = offset as usize;
        let end = (o + buf.len()).min(self.bytes.len());
        let have = end.saturating_sub(o);
        if have > 0 {
            buf[..have].copy_from_slice(&self.bytes[o..end]);
        }
        buf[have..].fill(0);
        Ok(())
    }

    fn write(&mut self, offset: u32, data: &[u8]) -> Result<(), ErrorKind> {
        let index = self.writes;
        self.writes += 1;
        self.check(offset, data.len())?;
        let o = offset as usize;
        if self.cut_at == Some(index) {
            self.cut_at = None;
            self.powered = false;
            // Word boundaries (absolute addresses) inside the range, and the range's end.
            let first_boundary = o.next_multiple_of(TEAR_WORD);
            let end = o + data.len();
            let words = end.saturating_sub(first_boundary) / TEAR_WORD;
            let cut = if first_boundary >= end {
                o
            } else {
                first_boundary + TEAR_WORD * self.rng.random_range(0..=words)
            }
            .min(end);
            let keep = cut - o;
            let prefix = data[..keep].to_vec();
            self.store(o, &prefix);
            if cut < end && self.rng.random_bool(0.5) {
                let w = (end - cut).min(TEAR_WORD);
                let junk: Vec<u8> = (0..w).map(|_| self.rng.random()).collect();
                self.store(cut, &junk);
            }
            return Err(ErrorKind::PowerLoss);
        }
        self.store(o, data);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_survives_a_cut_and_the_cut_write_is_torn_at_words() {
        let mut r = NvRam::new(256, 7);
        r.write(0, &[1u8; 64]).unwrap();
        let mut saw_partial = false;
        for seed in 0..64 {
            let mut n = r.clone();
            n.rng = ChaCha8Rng::seed_from_u64(seed);
            n.schedule_power_cut(0);
            assert_eq!(n.write(0, &[2u8; 64]), Err(ErrorKind::PowerLoss));
            assert_eq!(n.read(0, &mut [0u8; 4]), Err(ErrorKind::PowerLoss));
            n.restore_power();
            let mut b = [0u8; 64];
            n.read(0, &mut b).unwrap();
            // A prefix of whole words is new, at most one word is junk, the rest is old.
            let new_words = b.chunks(8).take_while(|w| w.iter().all(|&x| x == 2)).count();
            let rest = &b[new_words * 8..];
            let old_from = if rest.len() >= 8 && rest[..8].iter().any(|&x| x != 1) { 8 } else { 0 };
            assert!(rest[old_from..].iter().all(|&x| x == 1), "seed {seed}: {b:?}");
            saw_partial |= new_words > 0 && new_words < 8;
            // Power back: writes work again.
            n.write(0, &[3u8; 8]).unwrap();
        }
        assert!(saw_partial);
    }

    #[test]
    fn a_stored_prefix_drops_the_rest() {
        let mut r = NvRam::with_stored_prefix(1024, 16, 1);
        r.write(8, &[9u8; 16]).unwrap();
        let mut b = [0xAAu8; 24];
        r.read(0, &mut b).unwrap();
        assert_eq!(&b[8..16], &[9u8; 8]);
        assert_eq!(&b[16..], &[0u8; 8]);
        assert_eq!(r.write(1020, &[0u8; 8]), Err(ErrorKind::OutOfRange));
    }
}
