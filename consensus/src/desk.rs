//! The voter's synchronous side (07 §6.3–§6.4): Simplex's questions answered from what this
//! replica holds and has checked.
//!
//! [`crate::App`] (on the consensus runtime) turns each `propose`, `verify`, `certify` and each
//! reported activity into a [`Req`] on a bounded channel; the [`Desk`] takes them on the
//! replica's own loop ([`Desk::poll`], non-blocking) and answers from the [`Ledger`] — the
//! replica's per-block verdict. Nothing is shared between the two sides but the channel and
//! the one-shot replies, so the replica's tile takes no lock.
//!
//! **No relay** (07 §6.3): a payload is only a digest. A voter finds which headers a digest
//! names by itself: every held header `h` is indexed under the digests of the sixteen ranges
//! `a ..= h` (`h − a < REP_MAX_HDRS_PER_PROPOSAL`) that could end at it. A digest that names no
//! held range yet stays pending (the header may still be in flight) until REP_VERIFY_WAIT_MS.
//!
//! **Rules** (INV-REP-4): `verify` is true only when the parent is known, the payload's range
//! starts right after the parent's `last_height`, and the ledger says the whole range is held and
//! checked; pending while the ledger is pending; false at once on a contradiction; false after
//! the wait. `certify` returns verify's answer for the same payload (asking the ledger afresh if
//! this voter never verified it). `propose` takes every contiguous held header after the
//! parent's `last_height`, up to 16, and answers once its own check of that range (or of its
//! longest checked prefix) is true.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::mpsc::{Receiver, SyncSender};

use commonware_utils::channel::oneshot;
use vyrn_wire::consts::{REP_MAX_HDRS_PER_PROPOSAL, REP_VERIFY_WAIT_MS};
use vyrn_wire::header::Hash;
use vyrn_wire::msg::consensus::{ProposalKind, RepFinalityCert, RepProposal};
use vyrn_wire::msg::ctrl::FinalizeVote;

use crate::voters::Voters;
use crate::Digest;

/// The ledger's answer for a range (07 §6.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Check {
    /// Every block of the range is held and checked, and the last header's hash is the one asked.
    True,
    /// Not yet: the first height still incomplete.
    Pending {
        /// First incomplete height.
        at: u64,
    },
    /// False at `at`: a contradiction (a root mismatch after repair, a bad signature), or
    /// (`contradiction == false`) the ledger's own REP_VERIFY_WAIT_MS ran out.
    False {
        /// The height.
        at: u64,
        /// A contradiction rather than a timeout.
        contradiction: bool,
    },
}

/// What a voter holds: its per-block verdict (07 §6.4). The replica implements it over its
/// `ReplicaCore`; the simulator over scripted headers.
pub trait Ledger {
    /// `header_hash(h)` of a header held at height `h` (its signature and chain are the
    /// verdict's to check).
    fn header_hash(&self, h: u64) -> Option<Hash>;
    /// The highest height of a header held.
    fn top(&self) -> u64;
    /// The vote's check of `first ..= last` whose last header hash is `last_hash`, at `now` ns.
    fn check(&mut self, first: u64, last: u64, last_hash: &Hash, now: u64) -> Check;
}

/// Byzantine evidence Simplex reported (07 §10.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultKind {
    /// Two notarize votes of one signer in one view.
    ConflictingNotarize,
    /// Two finalize votes of one signer in one view.
    ConflictingFinalize,
    /// A nullify and a finalize of one signer in one view.
    NullifyFinalize,
}

/// A request from the consensus side.
#[derive(Debug)]
pub enum Req {
    /// `Automaton::propose`.
    Propose {
        /// The view proposed in.
        view: u64,
        /// The parent's payload.
        parent: Digest,
        /// The answer.
        reply: oneshot::Sender<Digest>,
    },
    /// `Automaton::verify`.
    Verify {
        /// The view.
        view: u64,
        /// The parent's payload.
        parent: Digest,
        /// The payload to check.
        payload: Digest,
        /// The answer.
        reply: oneshot::Sender<bool>,
    },
    /// `CertifiableAutomaton::certify`.
    Certify {
        /// The view.
        view: u64,
        /// The payload.
        payload: Digest,
        /// The answer.
        reply: oneshot::Sender<bool>,
    },
    /// This voter's own finalize vote (reported by the engine).
    Finalize {
        /// View.
        view: u64,
        /// Parent view.
        parent_view: u64,
        /// Payload.
        payload: Digest,
        /// The signature.
        sig: [u8; 64],
    },
    /// A finalization.
    Finalized(Box<crate::Finalization>),
    /// A nullification of a view.
    Nullified {
        /// The view.
        view: u64,
    },
    /// Conflict evidence.
    Fault {
        /// What.
        kind: FaultKind,
        /// Membership index of the signer.
        signer: u8,
        /// The view.
        view: u64,
    },
}

/// What the desk gives the replica to send or record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeskOut {
    /// This voter's finalize vote: to the sequencer's and the standby's control port (07 §6.8).
    Vote(FinalizeVote),
    /// A finality certificate: to the control ports and the cert journal (07 §6.5, §8.2).
    Cert(RepFinalityCert),
    /// Conflict evidence for the alarms (07 §10.2).
    Fault {
        /// What.
        kind: FaultKind,
        /// Membership index of the signer.
        signer: u8,
        /// The view.
        view: u64,
    },
}

/// The desk's settings.
#[derive(Debug, Clone)]
pub struct DeskConfig {
    /// This voter's membership index.
    pub me: u8,
    /// The epoch.
    pub epoch: u32,
    /// The epoch's genesis height (the handoff's `last_height`; 0 at a home's start).
    pub genesis_height: u64,
    /// The genesis payload ([`crate::genesis_digest`]).
    pub genesis: Digest,
    /// REP_VERIFY_WAIT_MS in ns (a budget: a dev home on a shared core may raise it).
    pub verify_wait_ns: u64,
    /// Heights kept indexed below the newest final one.
    pub window: u64,
    /// Waiting requests are checked again at most this often unless a request or a header
    /// arrived (0: every poll — a voter on its own core; a dev home sharing two cores sets
    /// hundreds of µs, so four replicas do not spin on their ledgers).
    pub recheck_ns: u64,
}

impl DeskConfig {
    /// The defaults of 07 for voter `me` of `epoch` from its genesis.
    pub fn new(me: u8, epoch: u32, genesis_height: u64, genesis: Digest) -> Self {
        DeskConfig {
            me,
            epoch,
            genesis_height,
            genesis,
            verify_wait_ns: REP_VERIFY_WAIT_MS * 1_000_000,
            window: 4096,
            recheck_ns: 0,
        }
    }
}

/// The desk's figures.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DeskCounters {
    /// Proposals asked of this voter (it led).
    pub propose_asked: u64,
    /// Proposals it made.
    pub proposed: u64,
    /// Proposals given up (the engine stopped waiting: its leader timeout).
    pub propose_dropped: u64,
    /// Verifies asked.
    pub verify_asked: u64,
    /// Verifies answered true.
    pub verify_true: u64,
    /// Verifies answered false on a contradiction (a range not after its parent included).
    pub verify_false: u64,
    /// Verifies answered false after the wait.
    pub verify_timeout: u64,
    /// Certifies asked.
    pub certify_asked: u64,
    /// Finalizations seen.
    pub finalizations: u64,
    /// Finalizations whose headers this voter does not hold (no certificate exported).
    pub unresolved: u64,
    /// Nullified views.
    pub nullified: u64,
    /// Conflict evidence reported.
    pub faults: u64,
    /// Requests dropped because the desk's channel was full (counted by the app).
    pub channel_full: u64,
    /// Finalize votes of this voter sent out.
    pub votes_out: u64,
    /// Certificates exported.
    pub certs_out: u64,
}

/// A digest's range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Range {
    first: u64,
    last: u64,
    last_hash: Hash,
}

#[derive(Debug)]
struct Waiting<T> {
    parent: Option<Digest>,
    payload: Digest,
    since: u64,
    reply: oneshot::Sender<T>,
}

/// The voter's synchronous side: indexes held headers by proposal digest, answers the engine's
/// questions from the [`Ledger`], turns finalizations into certificates.
#[derive(Debug)]
pub struct Desk {
    cfg: DeskConfig,
    voters: Voters,
    rx: Receiver<Req>,
    by_digest: HashMap<[u8; 32], Range>,
    by_last: BTreeMap<u64, Vec<[u8; 32]>>,
    scanned: u64,
    gaps: BTreeSet<u64>,
    proposes: Vec<Waiting<Digest>>,
    verifies: Vec<Waiting<bool>>,
    certifies: Vec<Waiting<bool>>,
    /// Verify answers by payload (certify returns them).
    answered: HashMap<[u8; 32], bool>,
    unresolved_finals: Vec<crate::Finalization>,
    unresolved_votes: Vec<(u64, u64, Digest, [u8; 64])>,
    out: Vec<DeskOut>,
    final_height: u64,
    final_view: u64,
    /// Finalized proposals (first, last, last_hash, view), newest last, bounded.
    finals: BTreeMap<u64, (u64, Hash, u64)>,
    counters: DeskCounters,
    full: std::sync::Arc<std::sync::atomic::AtomicU64>,
    last_answer: u64,
}

/// The channel between [`crate::App`] and [`Desk`]: this many requests in flight at most.
pub const DESK_CHANNEL: usize = 4096;
/// Finalizations kept waiting for their headers.
const UNRESOLVED_MAX: usize = 256;
/// Finalized proposals remembered (for the sim's comparisons and the metrics).
const FINALS_KEPT: usize = 4096;

impl Desk {
    /// A desk and the sending end for the app.
    pub fn new(cfg: DeskConfig, voters: Voters) -> (Desk, crate::app::DeskLink) {
        let (tx, rx) = std::sync::mpsc::sync_channel(DESK_CHANNEL);
        let full = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        let scanned = cfg.genesis_height;
        let fh = cfg.genesis_height;
        (
            Desk {
                cfg,
                voters,
                rx,
                by_digest: HashMap::new(),
                by_last: BTreeMap::new(),
                scanned,
                gaps: BTreeSet::new(),
                proposes: Vec::new(),
                verifies: Vec::new(),
                certifies: Vec::new(),
                answered: HashMap::new(),
                unresolved_finals: Vec::new(),
                unresolved_votes: Vec::new(),
                out: Vec::new(),
                final_height: fh,
                final_view: 0,
                finals: BTreeMap::new(),
                counters: DeskCounters::default(),
                full: full.clone(),
                last_answer: 0,
            },
            crate::app::DeskLink::new(tx, full),
        )
    }

    /// The settings.
    pub fn config(&self) -> &DeskConfig {
        &self.cfg
    }

    /// The voter set.
    pub fn voters(&self) -> &Voters {
        &self.voters
    }

    /// The newest height finalized (and every one below it, 07 §6.5).
    pub fn final_height(&self) -> u64 {
        self.final_height
    }

    /// The view of the newest finalization.
    pub fn final_view(&self) -> u64 {
        self.final_view
    }

    /// The counters.
    pub fn counters(&self) -> DeskCounters {
        let mut c = self.counters;
        c.channel_full = self.full.load(std::sync::atomic::Ordering::Relaxed);
        c
    }

    /// Finalized proposals this voter resolved: `last_height → (first_height, last_hash, view)`.
    pub fn finals(&self) -> &BTreeMap<u64, (u64, Hash, u64)> {
        &self.finals
    }

    /// Requests waiting (propose, verify, certify).
    pub fn waiting(&self) -> (usize, usize, usize) {
        (
            self.proposes.len(),
            self.verifies.len(),
            self.certifies.len(),
        )
    }

    /// Take what the replica must send or record.
    pub fn drain_out(&mut self, mut f: impl FnMut(DeskOut)) {
        for o in self.out.drain(..) {
            f(o);
        }
    }

    /// One non-blocking step at `now` ns: index new headers, take requests, answer what can be
    /// answered. True when it did anything.
    pub fn poll(&mut self, now: u64, ledger: &mut impl Ledger) -> bool {
        let mut busy = self.index(ledger);
        while let Ok(r) = self.rx.try_recv() {
            busy = true;
            self.take(r, now);
        }
        if busy || now.saturating_sub(self.last_answer) >= self.cfg.recheck_ns {
            self.last_answer = now;
            busy |= self.answer(now, ledger);
        }
        busy
    }

    // --- the digest index -------------------------------------------------------------------

    fn index(&mut self, ledger: &impl Ledger) -> bool {
        let top = ledger.top();
        let floor = self.final_height.saturating_sub(self.cfg.window);
        let mut any = false;
        if top > self.scanned {
            // A voter far behind (a restart) indexes the newest window only.
            let from = (self.scanned + 1).max(top.saturating_sub(self.cfg.window));
            for h in from..=top {
                if ledger.header_hash(h).is_some() {
                    self.index_height(h, ledger);
                } else {
                    self.gaps.insert(h);
                }
            }
            self.scanned = top;
            any = true;
        }
        if !self.gaps.is_empty() {
            self.gaps = self.gaps.split_off(&floor);
            let filled: Vec<u64> = self
                .gaps
                .iter()
                .copied()
                .filter(|&h| ledger.header_hash(h).is_some())
                .collect();
            for h in filled {
                self.gaps.remove(&h);
                self.index_height(h, ledger);
                any = true;
            }
        }
        any
    }

    fn index_height(&mut self, h: u64, ledger: &impl Ledger) {
        let Some(last_hash) = ledger.header_hash(h) else {
            return;
        };
        let lo = (self.cfg.genesis_height + 1).max(h.saturating_sub(REP_MAX_HDRS_PER_PROPOSAL - 1));
        let mut ds = Vec::with_capacity((h - lo + 1) as usize);
        for first in lo..=h {
            let d = self.proposal(first, h, last_hash).digest();
            self.by_digest.insert(
                d,
                Range {
                    first,
                    last: h,
                    last_hash,
                },
            );
            ds.push(d);
        }
        self.by_last.insert(h, ds);
    }

    fn proposal(&self, first: u64, last: u64, last_hash: Hash) -> RepProposal {
        RepProposal {
            kind: ProposalKind::Headers,
            epoch: self.cfg.epoch,
            first_height: first,
            last_height: last,
            last_hash,
            excl_root: [0; 32],
        }
    }

    /// The parent's `last_height` (the genesis height for the genesis payload).
    fn parent_last(&self, parent: &Digest) -> Option<u64> {
        if *parent == self.cfg.genesis {
            return Some(self.cfg.genesis_height);
        }
        self.by_digest.get(&parent.0).map(|r| r.last)
    }

    fn prune(&mut self) {
        let floor = self
            .final_height
            .saturating_sub(self.cfg.window.max(2 * REP_MAX_HDRS_PER_PROPOSAL));
        let keep = self.by_last.split_off(&floor);
        for ds in self.by_last.values() {
            for d in ds {
                self.by_digest.remove(d);
                self.answered.remove(d);
            }
        }
        self.by_last = keep;
        while self.finals.len() > FINALS_KEPT {
            self.finals.pop_first();
        }
    }

    // --- requests ---------------------------------------------------------------------------

    fn take(&mut self, r: Req, now: u64) {
        match r {
            Req::Propose {
                view: _,
                parent,
                reply,
            } => {
                self.counters.propose_asked += 1;
                self.proposes.push(Waiting {
                    parent: Some(parent),
                    payload: parent,
                    since: now,
                    reply,
                });
            }
            Req::Verify {
                view: _,
                parent,
                payload,
                reply,
            } => {
                self.counters.verify_asked += 1;
                self.verifies.push(Waiting {
                    parent: Some(parent),
                    payload,
                    since: now,
                    reply,
                });
            }
            Req::Certify {
                view: _,
                payload,
                reply,
            } => {
                self.counters.certify_asked += 1;
                self.certifies.push(Waiting {
                    parent: None,
                    payload,
                    since: now,
                    reply,
                });
            }
            Req::Finalize {
                view,
                parent_view,
                payload,
                sig,
            } => self
                .unresolved_votes
                .push((view, parent_view, payload, sig)),
            Req::Finalized(f) => {
                self.counters.finalizations += 1;
                self.unresolved_finals.push(*f);
            }
            Req::Nullified { .. } => self.counters.nullified += 1,
            Req::Fault { kind, signer, view } => {
                self.counters.faults += 1;
                self.out.push(DeskOut::Fault { kind, signer, view });
            }
        }
    }

    fn answer(&mut self, now: u64, ledger: &mut impl Ledger) -> bool {
        let mut busy = false;
        // Proposals: held until answered or the engine stops waiting.
        let proposes = std::mem::take(&mut self.proposes);
        for w in proposes {
            if w.reply.is_closed() {
                self.counters.propose_dropped += 1;
                busy = true;
                continue;
            }
            match self.try_propose(&w, now, ledger) {
                Some(d) => {
                    self.counters.proposed += 1;
                    self.answered.insert(d.0, true);
                    let _ = w.reply.send(d);
                    busy = true;
                }
                None => self.proposes.push(w),
            }
        }
        for certify in [false, true] {
            let list = std::mem::take(if certify {
                &mut self.certifies
            } else {
                &mut self.verifies
            });
            for w in list {
                if w.reply.is_closed() {
                    busy = true;
                    continue;
                }
                match self.try_verify(&w, now, ledger) {
                    Some(v) => {
                        if !certify {
                            if v {
                                self.counters.verify_true += 1;
                            }
                            self.answered.insert(w.payload.0, v);
                        }
                        let _ = w.reply.send(v);
                        busy = true;
                    }
                    None if certify => self.certifies.push(w),
                    None => self.verifies.push(w),
                }
            }
        }
        busy |= self.resolve_finals();
        busy
    }

    /// The digest to propose on `w`'s parent, once its own check passes.
    fn try_propose(
        &mut self,
        w: &Waiting<Digest>,
        now: u64,
        ledger: &mut impl Ledger,
    ) -> Option<Digest> {
        let parent_last = self.parent_last(w.parent.as_ref()?)?;
        let first = parent_last + 1;
        ledger.header_hash(first)?;
        let mut last = first;
        while last + 1 - first < REP_MAX_HDRS_PER_PROPOSAL && ledger.header_hash(last + 1).is_some()
        {
            last += 1;
        }
        let mut hash = ledger.header_hash(last)?;
        match ledger.check(first, last, &hash, now) {
            Check::True => {}
            Check::Pending { at } if at > first => {
                // The blocks below the incomplete one are ready: propose them.
                last = at - 1;
                hash = ledger.header_hash(last)?;
                if ledger.check(first, last, &hash, now) != Check::True {
                    return None;
                }
            }
            _ => return None,
        }
        Some(crate::cert::payload_digest(
            &self.proposal(first, last, hash),
        ))
    }

    /// verify / certify of `w`: Some(answer) once known.
    fn try_verify(
        &mut self,
        w: &Waiting<bool>,
        now: u64,
        ledger: &mut impl Ledger,
    ) -> Option<bool> {
        if w.parent.is_none() {
            // certify: verify's answer for the same payload, if this voter gave one.
            if let Some(&v) = self.answered.get(&w.payload.0) {
                return Some(v);
            }
        }
        let timed_out = now.saturating_sub(w.since) > self.cfg.verify_wait_ns;
        let Some(r) = self.by_digest.get(&w.payload.0).copied() else {
            // No held range has this digest (yet).
            if timed_out {
                self.counters.verify_timeout += 1;
                return Some(false);
            }
            return None;
        };
        if let Some(parent) = &w.parent {
            match self.parent_last(parent) {
                Some(pl) if r.first != pl + 1 => {
                    // 07 §6.3's parent rule: a range must start after its parent's.
                    self.counters.verify_false += 1;
                    return Some(false);
                }
                Some(_) => {}
                None if timed_out => {
                    self.counters.verify_timeout += 1;
                    return Some(false);
                }
                None => return None,
            }
        }
        match ledger.check(r.first, r.last, &r.last_hash, now) {
            Check::True => Some(true),
            Check::False {
                contradiction: true,
                ..
            } => {
                self.counters.verify_false += 1;
                Some(false)
            }
            Check::False { .. } => {
                self.counters.verify_timeout += 1;
                Some(false)
            }
            Check::Pending { .. } if timed_out => {
                self.counters.verify_timeout += 1;
                Some(false)
            }
            Check::Pending { .. } => None,
        }
    }

    /// Finalizations and own votes whose headers are now indexed become certificates and votes.
    fn resolve_finals(&mut self) -> bool {
        let mut busy = false;
        let finals = std::mem::take(&mut self.unresolved_finals);
        for f in finals {
            let Some(r) = self.by_digest.get(&f.proposal.payload.0).copied() else {
                if f.proposal.round.view().get() > self.final_view
                    && self.unresolved_finals.len() < UNRESOLVED_MAX
                {
                    self.unresolved_finals.push(f);
                } else {
                    self.counters.unresolved += 1;
                }
                continue;
            };
            busy = true;
            let p = self.proposal(r.first, r.last, r.last_hash);
            let view = f.proposal.round.view().get();
            self.finals.insert(r.last, (r.first, r.last_hash, view));
            if r.last > self.final_height {
                self.final_height = r.last;
                self.final_view = view;
            }
            if let Some(c) = crate::cert::from_finalization(&self.voters, &f, &p) {
                self.counters.certs_out += 1;
                self.out.push(DeskOut::Cert(c));
            }
        }
        let votes = std::mem::take(&mut self.unresolved_votes);
        for (view, parent_view, payload, sig) in votes {
            let Some(r) = self.by_digest.get(&payload.0).copied() else {
                if view > self.final_view && self.unresolved_votes.len() < UNRESOLVED_MAX {
                    self.unresolved_votes
                        .push((view, parent_view, payload, sig));
                }
                continue;
            };
            busy = true;
            let proposal = self.proposal(r.first, r.last, r.last_hash);
            self.counters.votes_out += 1;
            self.out.push(DeskOut::Vote(FinalizeVote {
                epoch: self.cfg.epoch,
                view,
                parent_view,
                proposal,
                index: self.cfg.me,
                sig,
            }));
        }
        if busy {
            self.prune();
        }
        busy
    }
}

/// The sending half as the app holds it.
pub(crate) type DeskTx = SyncSender<Req>;
