//! Replay's answers folded into one digest that every replica of a home prints the same.

use super::*;

/// Replay's answers folded into one digest (every replica of a home prints the same one). The
/// digest is a multiset hash, so it does not depend on the order in which replay interleaves
/// sessions (which follows the order payloads arrived in), only on the responses themselves:
/// each first-copy response is hashed to 64 bits (`foldhash`'s quality hasher with a fixed seed,
/// one pass over its bytes) and the digest's four words are, mod 2^64, the sum of those hashes,
/// the sum of their squares, the sum of the responses' lengths and their count.
///
/// It runs on the replay thread for every response, so it is cheap and not cryptographic: it
/// shows an operator that the replicas replayed the same answers (a divergence by accident or
/// bug); the state roots (07 §7.4) are the signed check. BLAKE3 of each response cost the replay
/// thread more than replay itself at the peak mix (`--bench replica`, docs/benchmarks.md).
#[derive(Debug, Default)]
pub struct ReplaySink {
    pub(super) digest: [u64; 4],
    /// First-copy responses replayed.
    pub responses: u64,
    /// Lane events applied.
    pub events: u64,
    /// The planted nondeterminism ([`Node::plant_map_order`]): sessions answered since the last
    /// fold.
    #[cfg(feature = "lab")]
    pub(super) plant: Option<std::collections::HashSet<u32>>,
    /// At the recovery service's voter (07 §8.5): every first-copy response, kept.
    pub(super) rsp: Option<Box<crate::recovery::RspStore>>,
}

/// A copy of the digest and counts; the recovery service's store stays with the original.
impl Clone for ReplaySink {
    fn clone(&self) -> Self {
        ReplaySink {
            digest: self.digest,
            responses: self.responses,
            events: self.events,
            #[cfg(feature = "lab")]
            plant: self.plant.clone(),
            rsp: None,
        }
    }
}

/// Responses between two folds of the planted map order.
#[cfg(feature = "lab")]
pub(super) const PLANT_BATCH: usize = 8;

/// The replay digest's hasher: fixed seed, the same at every replica (and pinned version).
pub(super) const DIGEST_HASH: foldhash::quality::FixedState =
    foldhash::quality::FixedState::with_seed(0x7679_726e_5245_5350);

impl ReplaySink {
    /// The sink of `cfg`'s replay: the recovery service's store too (07 §8.5) where the
    /// membership names this voter for the role (R3), kept from its own replay — inline
    /// replay only (`on_tile` false): the node serves from it.
    pub(super) fn for_node(cfg: &NodeConfig, on_tile: bool) -> Self {
        let h = &cfg.home;
        let recovery = h.membership.as_ref().map(|m| m.recovery as usize) == Some(cfg.index);
        ReplaySink {
            rsp: (recovery && !cfg.standby && !on_tile).then(|| {
                Box::new(crate::recovery::RspStore::spec(
                    h.engine.sessions.iter().map(|s| s.session),
                ))
            }),
            ..ReplaySink::default()
        }
    }

    /// The multiset digest of every first-copy response replayed so far.
    pub fn digest(&self) -> Hash {
        let mut h = [0u8; 32];
        for (i, x) in self.digest.iter().enumerate() {
            h[8 * i..8 * i + 8].copy_from_slice(&x.to_le_bytes());
        }
        h
    }

    /// Fold one response's bytes into the digest.
    pub(super) fn add(&mut self, bytes: &[u8]) {
        use std::hash::BuildHasher;
        let h = DIGEST_HASH.hash_one(bytes);
        let d = &mut self.digest;
        d[0] = d[0].wrapping_add(h);
        d[1] = d[1].wrapping_add(h.wrapping_mul(h));
        d[2] = d[2].wrapping_add(bytes.len() as u64);
        d[3] = d[3].wrapping_add(1);
    }
}

#[cfg(feature = "lab")]
impl ReplaySink {
    fn planted(&mut self, resp: &[u8]) {
        let Some(mut set) = self.plant.take() else {
            return;
        };
        if let Some(s) = resp.get(..4) {
            set.insert(u32::from_le_bytes([s[0], s[1], s[2], s[3]]));
        }
        if self.responses % PLANT_BATCH as u64 == 0 {
            let order: Vec<u8> = set.iter().flat_map(|s| s.to_le_bytes()).collect();
            self.add(&order);
            set.clear();
        }
        self.plant = Some(set);
    }
}

impl crate::replay::tile::ReportingSink for ReplaySink {
    fn report(&self) -> crate::replay::tile::SinkReport {
        crate::replay::tile::SinkReport {
            responses: self.responses,
            events: self.events,
            digest: self.digest(),
        }
    }
    fn resume(&mut self, r: &crate::replay::tile::SinkReport) {
        let mut at = crate::replay::tile::ReportingSink::report(self);
        at.merge(r);
        let at = ReplaySink::from(at);
        (self.digest, self.responses, self.events) = (at.digest, at.responses, at.events);
    }
}

impl From<crate::replay::tile::SinkReport> for ReplaySink {
    fn from(r: crate::replay::tile::SinkReport) -> Self {
        let mut digest = [0u64; 4];
        for (i, d) in digest.iter_mut().enumerate() {
            let mut w = [0u8; 8];
            w.copy_from_slice(&r.digest[8 * i..8 * i + 8]);
            *d = u64::from_le_bytes(w);
        }
        ReplaySink {
            digest,
            responses: r.responses,
            events: r.events,
            #[cfg(feature = "lab")]
            plant: None,
            rsp: None,
        }
    }
}

impl EngineSink for ReplaySink {
    fn respond(&mut self, r: &RespOut<'_>) {
        if !r.resend {
            self.responses += 1;
            self.add(r.bytes);
            if let Some(s) = self.rsp.as_deref_mut() {
                // Refusals are counted in the store (a repeat, an unknown session).
                let _ = s.keep(r.session, r.resp_seq, r.bytes);
            }
            #[cfg(feature = "lab")]
            self.planted(r.bytes);
        }
    }
    fn event(&mut self, _lane: u8, _ev: &LaneEvent) {
        self.events += 1;
    }
    fn tally(&self) -> Vec<u8> {
        crate::replay::tile::ReportingSink::report(self)
            .to_bytes()
            .to_vec()
    }
}
