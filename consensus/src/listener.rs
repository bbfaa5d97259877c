//! The sequencer's finality listener (07 §6.8): finalize votes and certificates in,
//! `final_height` out — only once Q valid votes for one proposal are held, so no single voter
//! can forge finality.
//!
//! Votes are kept per proposal unverified until the proposal's distinct signers reach Q; then
//! the unverified ones are checked in one batch ([`crate::cert::valid_entries`]), the bad ones
//! dropped (and counted), and the proposal is final once Q valid remain. A full certificate is
//! the same thing with Q entries at once. A proposal at or below `final_height` costs nothing
//! (its votes are stale).
//!
//! The tables are bounded, and charged to the voter that *sent* a message (the caller knows it
//! from the datagram's source, [`FinalityListener::on_cert_from`]), never to an index a message
//! names (security review F16: a Byzantine voter relaying a certificate whose entries named an
//! honest voter filled that voter's bound and evicted its real votes). Each sender has votes in
//! at most [`PER_VOTER_OPEN`] open proposals; past it, its own oldest contribution goes (the
//! entries it sent there), never another sender's. An entry a sender relays for index `i` never
//! hides `i`'s own vote (entries are kept per (sender, index), and identical ones once), and a
//! sender one of whose entries failed the batch for a proposal is heard no more for it. So a
//! proposal holds at most n × n unchecked entries and at most n × [`PER_VOTER_OPEN`] proposals
//! are open. A proposal is dropped once final or overtaken.
//!
//! Cold path: this runs on the sequencer's certificate tile (and the standby's loop), never on
//! the gate path.

use std::collections::BTreeMap;

use vyrn_wire::msg::consensus::{CertEntry, RepFinalityCert, RepProposal};

use crate::voters::Voters;

/// Open (not yet final) proposals one voter may have sent votes in.
pub const PER_VOTER_OPEN: usize = 64;

/// Finalize votes and certificates each voter may hand a finality listener per second (a
/// project bound, the sequencer's control port's: a voter sends one vote and one certificate
/// per finalization, a few hundred a second at most; 07 §6.8).
pub const CERT_PER_SEC: u64 = 2000;
/// The burst of [`CERT_PER_SEC`].
pub const CERT_BURST: u64 = 64;

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
    /// Refused: wrong epoch, a proposal breaking 07 §6.3, an unknown voter (signer or
    /// sender), or (for a certificate) a bad signature.
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
    /// A sender's votes in an open proposal evicted by its [`PER_VOTER_OPEN`] bound.
    pub evicted: u64,
}

/// Per-voter token buckets of [`CERT_PER_SEC`] and [`CERT_BURST`]: what the sequencer's
/// control port applies before its certificate tile, for a listener that reads its own socket
/// (the standby's, 07 §6.8).
#[derive(Debug, Clone)]
pub struct CertTokens {
    /// Per voter: tokens and when they were last refilled (ns).
    tokens: Vec<(u64, u64)>,
}

impl CertTokens {
    /// Full buckets for `n` voters.
    pub fn new(n: usize) -> Self {
        CertTokens {
            tokens: vec![(CERT_BURST, 0); n],
        }
    }

    /// Take one of voter `v`'s tokens at `now` ns (monotonic); false: over its rate, or no
    /// voter.
    pub fn take(&mut self, v: usize, now: u64) -> bool {
        let Some(t) = self.tokens.get_mut(v) else {
            return false;
        };
        let per = 1_000_000_000 / CERT_PER_SEC;
        if now > t.1 {
            let add = (now - t.1) / per;
            if add > 0 {
                t.0 = t.0.saturating_add(add).min(CERT_BURST);
                t.1 += add * per;
            }
        }
        if t.0 == 0 {
            return false;
        }
        t.0 -= 1;
        true
    }
}

/// An entry not yet checked, and the voter that sent it.
#[derive(Debug, Clone, Copy)]
struct Pending {
    entry: CertEntry,
    from: u8,
}

#[derive(Debug, Clone)]
struct Open {
    proposal: RepProposal,
    view: u64,
    parent_view: u64,
    /// Signers whose signature checked.
    valid: u64,
    /// Votes not yet checked.
    unchecked: Vec<Pending>,
    /// Senders charged for this proposal (each against its own [`PER_VOTER_OPEN`]).
    senders: u64,
    /// Senders one of whose entries failed the batch here: not heard for it again.
    bad_from: u64,
    /// Arrival order, for eviction.
    seq: u64,
}

impl Open {
    /// Whether `e` from `from` adds nothing: its signer is valid already, the same entry is
    /// held, `from` already sent one for that signer, or `from` sent a bad one here.
    fn refuses(&self, e: &CertEntry, from: u8) -> bool {
        self.valid & (1u64 << e.index) != 0
            || self.bad_from & (1u64 << from) != 0
            || self
                .unchecked
                .iter()
                .any(|u| u.entry.index == e.index && (u.from == from || u.entry.sig == e.sig))
    }

    /// Distinct signers held, valid or not yet checked.
    fn signers(&self) -> usize {
        let mut m = self.valid;
        for u in &self.unchecked {
            m |= 1u64 << u.entry.index;
        }
        m.count_ones() as usize
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

    /// A finalize vote or a certificate (a vote is a certificate of one entry) that voter
    /// `sender` sent — the membership index of the address it came from, which the caller
    /// checked: every entry it carries is charged to `sender`'s bound (07 §6.8; F16).
    pub fn on_cert_from(&mut self, sender: usize, c: &RepFinalityCert) -> VoteOutcome {
        match u8::try_from(sender) {
            Ok(s) if sender < self.voters.n() => self.take(c, Some(s)),
            _ => {
                self.counters.refused += 1;
                VoteOutcome::Bad
            }
        }
    }

    /// A finalize vote or a certificate whose sender is unknown: each entry is charged to the
    /// voter it names, which a relayed certificate can name falsely — prefer
    /// [`FinalityListener::on_cert_from`] wherever the sender is known.
    pub fn on_cert(&mut self, c: &RepFinalityCert) -> VoteOutcome {
        self.take(c, None)
    }

    fn take(&mut self, c: &RepFinalityCert, sender: Option<u8>) -> VoteOutcome {
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
        // What this message adds, each entry with the voter charged for it.
        let mut fresh: Vec<Pending> = Vec::new();
        {
            let held = self.open.get(&key);
            for e in &c.entries {
                let from = sender.unwrap_or(e.index);
                let dup = held.is_some_and(|o| o.refuses(e, from))
                    || fresh.iter().any(|u| {
                        u.entry.index == e.index && (u.from == from || u.entry.sig == e.sig)
                    });
                if !dup {
                    fresh.push(Pending { entry: *e, from });
                }
            }
        }
        if fresh.is_empty() {
            return VoteOutcome::Held(self.open.get(&key).map_or(0, Open::signers));
        }
        // A sender new to this proposal counts against its own bound first.
        let charged = self.open.get(&key).map_or(0, |o| o.senders);
        let mut new_senders = 0u64;
        for u in &fresh {
            new_senders |= 1u64 << u.from;
        }
        new_senders &= !charged;
        for i in 0..self.per_voter.len() {
            if new_senders & (1u64 << i) != 0 {
                self.make_room(i);
                self.per_voter[i] += 1;
            }
        }
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
                    senders: 0,
                    bad_from: 0,
                    seq: self.seq,
                },
            );
        }
        let q = self.voters.quorum();
        let Some(o) = self.open.get_mut(&key) else {
            return VoteOutcome::Bad;
        };
        o.senders |= new_senders;
        o.unchecked.extend(fresh);
        let signers = o.signers();
        if signers < q {
            return VoteOutcome::Held(signers);
        }
        // Q distinct signers: check the unchecked ones, one batch per round of distinct
        // signers (a batch names each signer once; a second entry for a signer is checked only
        // if its first failed).
        let mut pending = std::mem::take(&mut o.unchecked);
        // Per signer, its own vote first: a relayed entry for it is checked only if that fails.
        pending.sort_by_key(|u| (u.entry.index, u.from != u.entry.index));
        while !pending.is_empty() {
            let mut round: Vec<Pending> = Vec::new();
            let mut later: Vec<Pending> = Vec::new();
            for u in pending {
                if o.valid & (1u64 << u.entry.index) != 0 {
                    continue;
                }
                if round.last().is_some_and(|r| r.entry.index == u.entry.index) {
                    later.push(u);
                } else {
                    round.push(u);
                }
            }
            if round.is_empty() {
                break;
            }
            let probe = RepFinalityCert {
                epoch: c.epoch,
                view: o.view,
                parent_view: o.parent_view,
                proposal: o.proposal,
                entries: round.iter().map(|u| u.entry).collect(),
            };
            let ok = crate::cert::valid_entries(&self.voters, &probe);
            self.counters.batches += 1;
            self.counters.verified += round.len() as u64;
            self.counters.bad_sigs += (round.len() - ok.len()) as u64;
            for u in &round {
                if ok.contains(&u.entry.index) {
                    o.valid |= 1u64 << u.entry.index;
                } else if sender.is_some() {
                    // The sender is known: a bad signature is its own (F16).
                    o.bad_from |= 1u64 << u.from;
                }
            }
            pending = later;
        }
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
            for (i, n) in self.per_voter.iter_mut().enumerate() {
                if o.senders & (1u64 << i) != 0 {
                    *n = n.saturating_sub(1);
                }
            }
        }
    }

    /// Keep sender `i` under [`PER_VOTER_OPEN`]: drop what it sent to its oldest open proposal
    /// (only its own entries; the proposal goes once no sender is left in it).
    fn make_room(&mut self, i: usize) {
        if self.per_voter[i] < PER_VOTER_OPEN {
            return;
        }
        let bit = 1u64 << i;
        let oldest = self
            .open
            .iter()
            .filter(|(_, o)| o.senders & bit != 0)
            .min_by_key(|(_, o)| o.seq)
            .map(|(k, _)| *k);
        let Some(k) = oldest else {
            return;
        };
        self.counters.evicted += 1;
        self.per_voter[i] = self.per_voter[i].saturating_sub(1);
        let empty = match self.open.get_mut(&k) {
            Some(o) => {
                o.senders &= !bit;
                o.unchecked.retain(|u| usize::from(u.from) != i);
                o.senders == 0
            }
            None => false,
        };
        if empty {
            self.open.remove(&k);
        }
    }
}
