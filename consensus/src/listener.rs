//! The sequencer's finality listener (07 §6.8): finalize votes and certificates in,
//! `final_height` out — only once Q valid votes for one proposal are held, so no single voter
//! can forge finality.
//!
//! Votes are kept per proposal unverified until the proposal's distinct signers reach Q; then
//! the unverified ones are checked in one batch ([`crate::cert::valid_entries`]), the bad ones
//! dropped (and counted), and the proposal is final once Q valid remain. A full certificate is
//! the same thing with Q entries at once. A proposal at or below `final_height` costs nothing
//! (its votes are stale). The tables are bounded: at most [`PER_VOTER_OPEN`] open proposals per
//! voter (a Byzantine voter signing many proposals evicts only its own), and a proposal is
//! dropped once final or overtaken.
//!
//! Cold path: this runs on the sequencer's certificate tile, never on the gate path.

use std::collections::BTreeMap;

use vyrn_wire::msg::consensus::{CertEntry, RepFinalityCert, RepProposal};

use crate::voters::Voters;

/// Open (not yet final) proposals one voter may have votes in.
pub const PER_VOTER_OPEN: usize = 64;

/// What one vote or certificate did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VoteOutcome {
    /// Held; the proposal has this many distinct signers, not yet Q valid.
    Held(usize),
    /// The proposal became final: `final_height` is now `height` (its last), from `view`.
    Final {
        /// The new final height.
        height: u64,
        /// The view of the finalized proposal.
        view: u64,
    },
    /// At or below `final_height` already: nothing to do.
    Stale,
    /// Refused: wrong epoch, a proposal breaking 07 §6.3, an unknown voter, or (for a
    /// certificate) a bad signature.
    Bad,
}

/// The listener's figures (exported by the sequencer as metrics).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ListenerCounters {
    /// Finalize votes taken (a certificate counts its entries).
    pub votes: u64,
    /// Votes whose signature failed the batch check.
    pub bad_sigs: u64,
    /// Messages refused before any signature check.
    pub refused: u64,
    /// Votes at or below final_height.
    pub stale: u64,
    /// Batch verifications run.
    pub batches: u64,
    /// Signatures verified.
    pub verified: u64,
    /// Proposals that reached Q.
    pub finalized: u64,
    /// Open proposals evicted by the per-voter bound.
    pub evicted: u64,
}

#[derive(Debug, Clone)]
struct Open {
    proposal: RepProposal,
    view: u64,
    parent_view: u64,
    /// Signers whose signature checked.
    valid: u64,
    /// Votes not yet checked.
    unchecked: Vec<CertEntry>,
    /// Arrival order, for eviction.
    seq: u64,
}

impl Open {
    fn has(&self, i: u8) -> bool {
        self.valid & (1u64 << i) != 0 || self.unchecked.iter().any(|u| u.index == i)
    }
}

/// Finalize votes per proposal, `final_height` once Q are valid (07 §6.8).
#[derive(Debug)]
pub struct FinalityListener {
    voters: Voters,
    open: BTreeMap<([u8; 32], u64, u64), Open>,
    per_voter: Vec<usize>,
    final_height: u64,
    final_view: u64,
    seq: u64,
    counters: ListenerCounters,
}

impl FinalityListener {
    /// A listener for `voters`, final through `final_height` already.
    pub fn new(voters: Voters, final_height: u64) -> Self {
        let n = voters.n();
        FinalityListener {
            voters,
            open: BTreeMap::new(),
            per_voter: vec![0; n],
            final_height,
            final_view: 0,
            seq: 0,
            counters: ListenerCounters::default(),
        }
    }

    /// The voting set it checks votes against.
    pub fn voters(&self) -> &Voters {
        &self.voters
    }

    /// The newest final height.
    pub fn final_height(&self) -> u64 {
        self.final_height
    }

    /// The view of the proposal that made it final.
    pub fn final_view(&self) -> u64 {
        self.final_view
    }

    /// The counters.
    pub fn counters(&self) -> ListenerCounters {
        self.counters
    }

    /// Proposals with votes held.
    pub fn open(&self) -> usize {
        self.open.len()
    }

    /// One voter's finalize vote or a certificate (a vote is a certificate of one entry).
    pub fn on_cert(&mut self, c: &RepFinalityCert) -> VoteOutcome {
        let p = &c.proposal;
        if c.epoch != self.voters.epoch()
            || p.epoch != c.epoch
            || p.validate().is_err()
            || c.view <= c.parent_view
            || c.entries.is_empty()
            || c.entries
                .iter()
                .any(|e| e.index as usize >= self.voters.n())
        {
            self.counters.refused += 1;
            return VoteOutcome::Bad;
        }
        self.counters.votes += c.entries.len() as u64;
        if p.last_height <= self.final_height {
            self.counters.stale += c.entries.len() as u64;
            return VoteOutcome::Stale;
        }
        let key = (p.digest(), c.view, c.parent_view);
        if !self.open.contains_key(&key) {
            self.seq += 1;
            self.open.insert(
                key,
                Open {
                    proposal: *p,
                    view: c.view,
                    parent_view: c.parent_view,
                    valid: 0,
                    unchecked: Vec::new(),
                    seq: self.seq,
                },
            );
        }
        // A voter new to this proposal counts against its own bound first.
        let fresh: Vec<CertEntry> = match self.open.get(&key) {
            Some(o) => c
                .entries
                .iter()
                .filter(|e| !o.has(e.index))
                .copied()
                .collect(),
            None => Vec::new(),
        };
        for e in &fresh {
            self.make_room(e.index);
            self.per_voter[e.index as usize] += 1;
        }
        let q = self.voters.quorum();
        let Some(o) = self.open.get_mut(&key) else {
            return VoteOutcome::Bad;
        };
        o.unchecked.extend(fresh);
        let signers = o.valid.count_ones() as usize + o.unchecked.len();
        if signers < q {
            return VoteOutcome::Held(signers);
        }
        // Q distinct signers: check the unchecked ones in one batch.
        let mut batch = o.unchecked.clone();
        batch.sort_unstable_by_key(|e| e.index);
        let probe = RepFinalityCert {
            epoch: c.epoch,
            view: o.view,
            parent_view: o.parent_view,
            proposal: o.proposal,
            entries: batch,
        };
        let ok = crate::cert::valid_entries(&self.voters, &probe);
        self.counters.batches += 1;
        self.counters.verified += probe.entries.len() as u64;
        self.counters.bad_sigs += (probe.entries.len() - ok.len()) as u64;
        for i in &ok {
            o.valid |= 1u64 << i;
        }
        for e in probe.entries.iter().filter(|e| !ok.contains(&e.index)) {
            let n = &mut self.per_voter[e.index as usize];
            *n = n.saturating_sub(1);
        }
        o.unchecked.clear();
        let valid = o.valid.count_ones() as usize;
        if valid < q {
            return VoteOutcome::Held(valid);
        }
        let (height, view) = (o.proposal.last_height, o.view);
        self.counters.finalized += 1;
        self.final_height = height;
        self.final_view = view;
        self.prune();
        VoteOutcome::Final { height, view }
    }

    /// Drop every open proposal the final height has overtaken.
    fn prune(&mut self) {
        let fin = self.final_height;
        let gone: Vec<_> = self
            .open
            .iter()
            .filter(|(_, o)| o.proposal.last_height <= fin)
            .map(|(k, _)| *k)
            .collect();
        for k in gone {
            self.remove(&k);
        }
    }

    fn remove(&mut self, k: &([u8; 32], u64, u64)) {
        if let Some(o) = self.open.remove(k) {
            for i in 0..self.per_voter.len() {
                if o.has(i as u8) {
                    self.per_voter[i] = self.per_voter[i].saturating_sub(1);
                }
            }
        }
    }

    /// Keep voter `i` under [`PER_VOTER_OPEN`]: evict its oldest open proposal.
    fn make_room(&mut self, i: u8) {
        if self.per_voter[i as usize] < PER_VOTER_OPEN {
            return;
        }
        let oldest = self
            .open
            .iter()
            .filter(|(_, o)| o.has(i))
            .min_by_key(|(_, o)| o.seq)
            .map(|(k, _)| *k);
        if let Some(k) = oldest {
            self.remove(&k);
            self.counters.evicted += 1;
        }
    }
}
