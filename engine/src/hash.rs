//! The hasher of the engine's internal maps: a folded 64×64→128-bit multiply per word, keyed by
//! a per-process random seed (so a client cannot precompute colliding `client_tag`s), several
//! times cheaper than `std`'s SipHash-1-3 on the small integer keys the engine uses.
//!
//! Determinism never depends on it: no decision iterates a hash map (snapshots sort), which the
//! live-vs-replay harness checks with two differently seeded maps in one process.

use std::hash::{BuildHasher, Hasher};

const K: u64 = 0x9E37_79B9_7F4A_7C15;

#[inline(always)]
fn fold(a: u64, b: u64) -> u64 {
    let r = (a as u128).wrapping_mul(b as u128);
    (r as u64) ^ ((r >> 64) as u64)
}

/// Builds [`FoldHasher`]s with one random seed.
#[derive(Debug, Clone, Copy)]
pub struct SeededState(u64);

impl Default for SeededState {
    fn default() -> Self {
        // The std RandomState's keys come from the OS once per process (then increment).
        SeededState(std::collections::hash_map::RandomState::new().hash_one(0x5EED_u64) | 1)
    }
}

impl BuildHasher for SeededState {
    type Hasher = FoldHasher;
    #[inline(always)]
    fn build_hasher(&self) -> FoldHasher {
        FoldHasher(self.0)
    }
}

/// A keyed multiply-fold hasher for small integer keys.
#[derive(Debug, Clone, Copy)]
pub struct FoldHasher(u64);

impl FoldHasher {
    #[inline(always)]
    fn mix(&mut self, x: u64) {
        self.0 = fold(self.0 ^ x, K);
    }
}

impl Hasher for FoldHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        for c in bytes.chunks(8) {
            let mut w = [0u8; 8];
            w[..c.len()].copy_from_slice(c);
            self.mix(u64::from_le_bytes(w));
        }
    }
    #[inline(always)]
    fn write_u8(&mut self, i: u8) {
        self.mix(i as u64);
    }
    #[inline(always)]
    fn write_u16(&mut self, i: u16) {
        self.mix(i as u64);
    }
    #[inline(always)]
    fn write_u32(&mut self, i: u32) {
        self.mix(i as u64);
    }
    #[inline(always)]
    fn write_u64(&mut self, i: u64) {
        self.mix(i);
    }
    #[inline(always)]
    fn write_usize(&mut self, i: usize) {
        self.mix(i as u64);
    }
    #[inline(always)]
    fn finish(&self) -> u64 {
        fold(self.0, K.rotate_left(17))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn spreads_sequential_tags_over_buckets() {
        let s = SeededState::default();
        // Low 12 bits (bucket index of a 4096-bucket table) of 4096 sequential (slot, tag)
        // keys must hit most buckets.
        let buckets: HashSet<u64> = (0..4096u32).map(|t| s.hash_one((3u16, t)) & 4095).collect();
        assert!(buckets.len() > 2400, "{}", buckets.len());
        // Top 7 bits (hashbrown's control byte) vary too.
        let tops: HashSet<u64> = (0..4096u32).map(|t| s.hash_one((3u16, t)) >> 57).collect();
        assert!(tops.len() > 100, "{}", tops.len());
    }
}
