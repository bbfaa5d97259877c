//! The `(session, pkt_seq) → height` index (07 §8.2: "at 1-second granularity").
//!
//! Blocks are grouped into buckets of `granularity` heights (1000 = 1 s at 1 kHz). Per session
//! and bucket the index keeps the lowest and highest `pkt_seq` seen, so a lookup yields the
//! height ranges that may hold the packet; [`BlockJournal::locate_pkt`](super::BlockJournal::locate_pkt)
//! then reads those blocks to find it exactly. With `granularity = 1` a range is one height.
//!
//! The `height → (drive, offset, len)` index is the journal's per-drive `BTreeMap`s.

use std::collections::{BTreeMap, HashMap};
use std::ops::RangeInclusive;

/// `(session, bucket) → (min pkt_seq, max pkt_seq)`.
#[derive(Debug)]
pub struct PktIndex {
    granularity: u64,
    by_session: HashMap<u32, BTreeMap<u64, (u32, u32)>>,
    by_bucket: BTreeMap<u64, Vec<u32>>,
}

impl PktIndex {
    /// An empty index; `granularity` is clamped to ≥ 1.
    pub fn new(granularity: u64) -> PktIndex {
        PktIndex {
            granularity: granularity.max(1),
            by_session: HashMap::new(),
            by_bucket: BTreeMap::new(),
        }
    }

    /// Heights per bucket.
    pub fn granularity(&self) -> u64 {
        self.granularity
    }

    /// The bucket holding `height`.
    pub fn bucket(&self, height: u64) -> u64 {
        height / self.granularity
    }

    /// Record that block `height` holds (or lists as unavailable) each key.
    pub fn insert(&mut self, height: u64, keys: impl IntoIterator<Item = (u32, u32)>) {
        let b = self.bucket(height);
        for (session, seq) in keys {
            let m = self.by_session.entry(session).or_default();
            match m.get_mut(&b) {
                Some(r) => {
                    r.0 = r.0.min(seq);
                    r.1 = r.1.max(seq);
                }
                None => {
                    m.insert(b, (seq, seq));
                    self.by_bucket.entry(b).or_default().push(session);
                }
            }
        }
    }

    /// Height ranges (one per bucket) that may hold `(session, pkt_seq)`, oldest first.
    pub fn candidates(&self, session: u32, pkt_seq: u32) -> Vec<RangeInclusive<u64>> {
        let g = self.granularity;
        self.by_session
            .get(&session)
            .map(|m| {
                m.iter()
                    .filter(|(_, (lo, hi))| *lo <= pkt_seq && pkt_seq <= *hi)
                    .map(|(b, _)| b * g..=(b * g).saturating_add(g - 1))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Forget a bucket (every block in it is gone).
    pub fn remove_bucket(&mut self, bucket: u64) {
        if let Some(sessions) = self.by_bucket.remove(&bucket) {
            for s in sessions {
                if let Some(m) = self.by_session.get_mut(&s) {
                    m.remove(&bucket);
                    if m.is_empty() {
                        self.by_session.remove(&s);
                    }
                }
            }
        }
    }

    /// Buckets held.
    pub fn buckets(&self) -> usize {
        self.by_bucket.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_cover_their_keys_and_forget_on_removal() {
        let mut ix = PktIndex::new(10);
        ix.insert(3, [(1, 5), (1, 9), (2, 1)]);
        ix.insert(14, [(1, 10), (1, 12)]);
        assert_eq!(ix.candidates(1, 7), vec![0..=9]);
        assert_eq!(ix.candidates(1, 11), vec![10..=19]);
        assert!(ix.candidates(1, 13).is_empty());
        assert!(ix.candidates(3, 1).is_empty());
        ix.remove_bucket(0);
        assert!(ix.candidates(1, 7).is_empty());
        assert!(ix.candidates(2, 1).is_empty());
        assert_eq!(ix.buckets(), 1);
    }
}
