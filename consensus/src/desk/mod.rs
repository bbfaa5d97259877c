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
use std::sync::mpsc::Receiver;

use commonware_utils::channel::oneshot;
use vyrn_wire::consts::{
    REP_MAX_HDRS_PER_PROPOSAL, REP_ROOT_BLOCKS, REP_ROOT_GATE_BLOCKS, REP_ROOT_TIMEOUT_MS,
    REP_VERIFY_WAIT_MS,
};
use vyrn_wire::header::Hash;
use vyrn_wire::msg::consensus::{
    CertEntry, ProposalKind, RepFinalityCert, RepProposal, RepRootCert, RepSealExt,
};
use vyrn_wire::msg::ctrl::{Diverge, DivergeDigest, DivergeReason, FinalizeVote};

pub use crate::ingress::{FaultKind, Req};
pub use seal::{OfferRefused, SealAsk, SEALS_KEPT};

mod seal;
use crate::roots::{root_digest, root_height, RootScheme};

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
    /// `R(h)`, the state commitment after block `h`, once this replica's replay computed it
    /// (07 §7.4; asked only for root heights, and only when roots are on).
    fn root(&mut self, h: u64) -> Option<Hash>;
    /// Asked when this voter leads a view whose parent ends at `parent_last`: its seal, if the
    /// sequencer's tenure is deposed here (07 §9.2, §9.4). The default never seals.
    fn seal(&mut self, parent_last: u64, now: u64) -> SealAsk {
        let _ = (parent_last, now);
        SealAsk::No
    }
    /// The vote's check of a seal offer (07 §9.4: §6.4 items 1, 3, 4 on the signed range, §9.3
    /// items 3 and 4 on the tail, the next sequencer recomputed). The default refuses it.
    fn check_seal(&mut self, p: &RepProposal, ext: &RepSealExt, now: u64) -> Check {
        let _ = (ext, now);
        Check::False {
            at: p.first_height,
            contradiction: true,
        }
    }
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
    /// A `REP_RootCert` (07 §7.4) for the cert journal: Q signatures over this voter's own
    /// root.
    RootCert(RepRootCert),
    /// `REP_A_DIVERGE` (INV-REP-9): this voter votes for nothing more; the message goes to the
    /// sequencer's control core, which halts the book. Sent once.
    Diverge(Diverge),
    /// The seal this voter proposed as leader (07 §9.4): to every other voter's control port,
    /// whose desks take it with [`Desk::offer_seal`].
    SealOffer {
        /// The kind-1 proposal.
        proposal: RepProposal,
        /// Its `REP_SealExt`.
        ext: RepSealExt,
    },
    /// A finalized seal's certificate with its ext (07 §9.4): stands in for the seal header's
    /// `seq_sig`; to the control ports and the cert journal like [`DeskOut::Cert`].
    SealCert {
        /// Q finalize signatures over `BLAKE3(proposal ‖ ext)`.
        cert: RepFinalityCert,
        /// The seal ext.
        ext: RepSealExt,
    },
    /// A voter signed a root other than the certified one (07 §10.2: `RootFault{index, sig}`);
    /// `signer == me` when this replica's own root is the odd one.
    RootFault {
        /// Root index.
        index: u64,
        /// Membership index of the signer.
        signer: u8,
        /// The digest it signed.
        digest: [u8; 32],
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
    /// REP_ROOT_BLOCKS (07 §7.4); 0 turns state roots, the root gate and divergence off (a
    /// home without the aggregation engine, the scripted simulator).
    pub root_blocks: u64,
    /// REP_ROOT_GATE_BLOCKS: `verify(P)` needs a root certificate for every root height
    /// ≤ `P.last_height − root_gate_blocks` (INV-REP-7).
    pub root_gate_blocks: u64,
    /// REP_ROOT_TIMEOUT_MS in ns: no certificate this long after a root height was final is
    /// divergence (INV-REP-9, case 2).
    pub root_timeout_ns: u64,
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
            root_blocks: 0,
            root_gate_blocks: REP_ROOT_GATE_BLOCKS,
            root_timeout_ns: REP_ROOT_TIMEOUT_MS * 1_000_000,
        }
    }

    /// State roots on with 07's figures (REP_ROOT_BLOCKS, REP_ROOT_GATE_BLOCKS,
    /// REP_ROOT_TIMEOUT_MS).
    pub fn with_roots(mut self) -> Self {
        self.root_blocks = REP_ROOT_BLOCKS;
        self
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
    /// Root digests this voter gave its aggregation engine (one per root height replayed).
    pub roots_proposed: u64,
    /// Peer root acks counted (signature verified by the tap).
    pub root_acks: u64,
    /// Peer root acks refused: an index outside [`ROOT_ACK_WINDOW`], or a signer's digest past
    /// [`ROOT_DIGESTS_PER_SIGNER`] for one index (security review F10).
    pub root_acks_refused: u64,
    /// Verify answers forgotten for digests that name no held range, past
    /// [`ANSWERED_UNINDEXED_MAX`] (a certify of one asks the ledger afresh).
    pub answers_forgotten: u64,
    /// Root certificates formed (any digest).
    pub roots_certified: u64,
    /// `REP_RootCert`s exported (over this voter's own root).
    pub root_certs_out: u64,
    /// Root signatures for a digest other than the certified one (RootFault, 07 §10.2).
    pub root_faults: u64,
    /// Verifies and proposals held back by the root gate (INV-REP-7), counted per wait.
    pub root_gate_waits: u64,
    /// 1 once REP_A_DIVERGE fired (INV-REP-9).
    pub diverged: u64,
    /// 1 once the replica stopped this voter's votes ([`Desk::stop_votes`]: its journal failed).
    pub votes_stopped: u64,
    /// Seal offers taken (07 §9.4).
    pub seal_offers: u64,
    /// Seal offers refused for their form (kind, epoch, range, ext).
    pub seal_offers_refused: u64,
    /// Seals this voter proposed as leader.
    pub seals_proposed: u64,
    /// A notarized seal not final yet proposed again on itself (its view's finalize votes fell
    /// short, and nothing else can follow it; `Desk::seal_repropose`).
    pub seals_reproposed: u64,
    /// Seals finalized here (their certificate exported).
    pub seals_final: u64,
}

/// One root index as this voter sees it (07 §7.4).
#[derive(Debug, Default)]
struct RootSlot {
    /// `R(h)` from this replica's replay, and its digest.
    own: Option<(Hash, [u8; 32])>,
    /// Signatures seen per digest (this voter's own included).
    acks: BTreeMap<[u8; 32], BTreeMap<u8, [u8; 64]>>,
    /// The certified digest and its entries.
    certified: Option<([u8; 32], Vec<CertEntry>)>,
    /// The certificate went out (or this voter's root was the odd one).
    settled: bool,
    /// When its root height was first seen final.
    final_at: Option<u64>,
    /// Signers already reported as RootFault.
    faulted: BTreeSet<u8>,
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
    /// Payloads answered that name no held range, oldest first (bounded,
    /// [`ANSWERED_UNINDEXED_MAX`]).
    answered_unindexed: std::collections::VecDeque<[u8; 32]>,
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
    roots: BTreeMap<u64, RootSlot>,
    root_proposes: Vec<(u64, oneshot::Sender<Digest>)>,
    root_verifies: Vec<(u64, Digest, oneshot::Sender<bool>)>,
    root_tip: u64,
    /// Root indices below it were certified here and their slots evicted past ROOTS_KEPT: they
    /// count as certified, as below the tip.
    root_floor: u64,
    /// Root indices whose root height is final are registered up to here.
    root_final_scan: u64,
    root_signer: Option<RootScheme>,
    diverged: Option<Diverge>,
    /// The replica withdrew this voter ([`Desk::stop_votes`]).
    votes_stopped: bool,
    /// Seal offers by payload (07 §9.4).
    seals: seal::Seals,
}

/// Root indices kept (a stall longer than this many roots keeps the newest); never one inside
/// [`ROOT_ACK_WINDOW`].
const ROOTS_KEPT: usize = 1024;

/// Root indexes a peer's root ack may open a slot for, from the lowest index not yet certified
/// here (a project bound, 07 §7.4): the aggregation engine asks for 4 indexes past its tip, and
/// finality runs at most REP_ROOT_GATE_BLOCKS / REP_ROOT_BLOCKS = 5 indexes past the first
/// uncertified one (INV-REP-7), so every honest ack and every timeout slot falls inside. An
/// ack for an index above it, or below it with no slot, is refused and counted: acks for far
/// indexes no longer fill the table and evict the current slots (security review F10).
pub const ROOT_ACK_WINDOW: u64 = 8;

/// Digests one signer's acks may add to one root index (07 §7.4): an honest voter signs one;
/// two prove a Byzantine voter's equivocation and count for both in INV-REP-9 case 1; more are
/// refused, so one signer cannot grow a slot without bound.
pub const ROOT_DIGESTS_PER_SIGNER: usize = 2;

/// Verify answers kept for digests that name no held range (a Byzantine leader's junk, or a
/// range whose headers never came); past it the oldest goes. Answers for indexed digests go
/// with the index (`prune`).
pub const ANSWERED_UNINDEXED_MAX: usize = 1024;

/// The channel between [`crate::App`] and [`Desk`]: this many requests in flight at most.
pub const DESK_CHANNEL: usize = 4096;
/// Finalizations kept waiting for their headers.
const UNRESOLVED_MAX: usize = 256;
/// Finalized proposals remembered (for the sim's comparisons and the metrics).
const FINALS_KEPT: usize = 4096;

impl Desk {
    /// A desk and the sending end for the app.
    pub fn new(cfg: DeskConfig, voters: Voters) -> (Desk, crate::ingress::DeskLink) {
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
                answered_unindexed: std::collections::VecDeque::new(),
                unresolved_finals: Vec::new(),
                unresolved_votes: Vec::new(),
                out: Vec::new(),
                final_height: fh,
                final_view: 0,
                finals: BTreeMap::new(),
                counters: DeskCounters::default(),
                full: full.clone(),
                last_answer: 0,
                roots: BTreeMap::new(),
                root_proposes: Vec::new(),
                root_verifies: Vec::new(),
                root_tip: 0,
                root_floor: 0,
                root_final_scan: 0,
                root_signer: None,
                diverged: None,
                votes_stopped: false,
                seals: seal::Seals::default(),
            },
            crate::ingress::DeskLink::new(tx, full),
        )
    }

    /// The settings.
    pub fn config(&self) -> &DeskConfig {
        &self.cfg
    }

    /// This voter's root signer: its own root signature goes into `Diverge` evidence.
    pub fn set_root_signer(&mut self, s: RootScheme) {
        self.root_signer = Some(s);
    }

    /// `REP_A_DIVERGE` as raised, if it was (INV-REP-9).
    pub fn diverged(&self) -> Option<&Diverge> {
        self.diverged.as_ref()
    }

    /// Vote for nothing more, as after REP_A_DIVERGE but with no `Diverge` sent: the replica's
    /// block journal failed, so a block it voted for might not be on its drive and its vote
    /// would count toward a durability it does not give (07 §6.9: durable means Q journals).
    /// Every verify and certify answers false from here on and no proposal is made (the engine
    /// nullifies the views this voter leads). Until the process restarts.
    pub fn stop_votes(&mut self) {
        self.votes_stopped = true;
        self.counters.votes_stopped = 1;
    }

    /// Whether [`Desk::stop_votes`] or REP_A_DIVERGE stopped this voter.
    pub fn votes_stopped(&self) -> bool {
        self.votes_stopped || self.diverged.is_some()
    }

    /// The aggregation engine's tip (root indices below it are certified somewhere).
    pub fn root_tip(&self) -> u64 {
        self.root_tip
    }

    /// Root indices certified at this voter, with the certified digest.
    pub fn roots_certified(&self) -> Vec<(u64, [u8; 32])> {
        self.roots
            .iter()
            .filter_map(|(&i, s)| s.certified.as_ref().map(|c| (i, c.0)))
            .collect()
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
        self.by_digest
            .get(&parent.0)
            .copied()
            .or_else(|| self.seals.range(&parent.0))
            .map(|r| r.last)
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
            Req::RootPropose { index, reply } => self.root_proposes.push((index, reply)),
            Req::RootVerify {
                index,
                digest,
                reply,
            } => self.root_verifies.push((index, digest, reply)),
            Req::RootAck {
                index,
                signer,
                digest,
                sig,
            } => {
                if self.root_ack(index, signer, digest, sig, now) {
                    self.counters.root_acks += 1;
                } else {
                    self.counters.root_acks_refused += 1;
                }
            }
            Req::RootCertified {
                index,
                digest,
                entries,
            } => {
                let slot = self.roots.entry(index).or_default();
                if slot.certified.is_none() {
                    self.counters.roots_certified += 1;
                    slot.certified = Some((digest, entries));
                }
            }
            Req::RootTip { tip } => self.root_tip = self.root_tip.max(tip),
        }
    }

    fn answer(&mut self, now: u64, ledger: &mut impl Ledger) -> bool {
        let mut busy = self.roots_step(now, ledger);
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
                            self.remember_answer(w.payload.0, v);
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

    /// Remember verify's answer for `payload` (certify returns it). An answer for a digest
    /// that names no held range is kept in a bounded queue: a leader's junk digests do not grow
    /// the map (`prune` drops only indexed ones).
    fn remember_answer(&mut self, payload: [u8; 32], v: bool) {
        let fresh = self.answered.insert(payload, v).is_none();
        if fresh && !self.by_digest.contains_key(&payload) {
            self.answered_unindexed.push_back(payload);
            while self.answered_unindexed.len() > ANSWERED_UNINDEXED_MAX {
                if let Some(d) = self.answered_unindexed.pop_front() {
                    if !self.by_digest.contains_key(&d) && self.answered.remove(&d).is_some() {
                        self.counters.answers_forgotten += 1;
                    }
                }
            }
        }
    }

    /// The digest to propose on `w`'s parent, once its own check passes.
    fn try_propose(
        &mut self,
        w: &Waiting<Digest>,
        now: u64,
        ledger: &mut impl Ledger,
    ) -> Option<Digest> {
        if self.votes_stopped() {
            // INV-REP-9 (or a failed journal): never answered; the engine's leader timeout
            // nullifies the view.
            return None;
        }
        let parent = w.parent?;
        let parent_last = self.parent_last(&parent)?;
        if let Some(d) = self.seal_repropose(&parent, now, ledger) {
            // A notarized seal whose finalization fell short: proposed again on itself.
            return d;
        }
        if let Some(d) = self.seal_propose(parent_last, now, ledger) {
            // 07 §9.4: a deposed tenure's seal, or nothing while it is being built.
            return d;
        }
        let first = parent_last + 1;
        ledger.header_hash(first)?;
        // INV-REP-7: a proposal ends before the first height the root gate holds back.
        let cap = match self.root_gate_blocked(first) {
            Some(_) => {
                self.counters.root_gate_waits += 1;
                return None;
            }
            None => self.root_gate_limit(),
        };
        let mut last = first;
        while last + 1 - first < REP_MAX_HDRS_PER_PROPOSAL
            && last < cap
            && ledger.header_hash(last + 1).is_some()
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
        if self.votes_stopped() {
            // INV-REP-9: after REP_A_DIVERGE (or a failed journal) this voter votes for nothing
            // more.
            return Some(false);
        }
        if w.parent.is_none() {
            // certify: verify's answer for the same payload, if this voter gave one.
            if let Some(&v) = self.answered.get(&w.payload.0) {
                return Some(v);
            }
        }
        let timed_out = now.saturating_sub(w.since) > self.cfg.verify_wait_ns;
        if self.seals.get(&w.payload.0).is_some() && !self.by_digest.contains_key(&w.payload.0) {
            let parent_last = match &w.parent {
                None => None,
                Some(p) => match self.parent_last(p) {
                    Some(pl) => Some(pl),
                    None if timed_out => {
                        self.counters.verify_timeout += 1;
                        return Some(false);
                    }
                    None => return None,
                },
            };
            let again = w.parent == Some(w.payload);
            let c = self.seal_check(&w.payload.0, parent_last, again, now, ledger)?;
            return self.check_answer(c, timed_out);
        }
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
        if self.root_gate_blocked(r.last).is_some() {
            // INV-REP-7: a root certificate missing too far back; pending, then false.
            self.counters.root_gate_waits += 1;
            if timed_out {
                self.counters.verify_timeout += 1;
                return Some(false);
            }
            return None;
        }
        let c = ledger.check(r.first, r.last, &r.last_hash, now);
        self.check_answer(c, timed_out)
    }

    /// verify's answer from a ledger's check.
    fn check_answer(&mut self, c: Check, timed_out: bool) -> Option<bool> {
        match c {
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
            if !self.by_digest.contains_key(&f.proposal.payload.0) {
                if let Some(r) = self.seal_final(&f) {
                    // 07 §9.4: the seal's range is final; its certificate went out with the ext.
                    busy = true;
                    let view = f.proposal.round.view().get();
                    // The first finalization of a seal proposed twice is the one kept.
                    self.finals
                        .entry(r.last)
                        .or_insert((r.first, r.last_hash, view));
                    if r.last > self.final_height {
                        self.final_height = r.last;
                        self.final_view = view;
                    }
                    continue;
                }
            }
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
            if self.seals.get(&payload.0).is_some() {
                // A seal vote names its proposal only: the listeners take the certificate.
                continue;
            }
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

// --- state roots (07 §7.4) ---------------------------------------------------------------------

impl Desk {
    fn roots_on(&self) -> bool {
        self.cfg.root_blocks != 0
    }

    /// The first root height above genesis (root heights at or below it are the previous
    /// epoch's, 07 §7.4 counts them per height).
    fn first_root_index(&self) -> u64 {
        let rb = self.cfg.root_blocks;
        // The smallest i with root_height(i) > genesis_height.
        (self.cfg.genesis_height + 1) / rb
    }

    /// Whether root index `i` counts as certified for the gate: a certificate here, or the
    /// engine's tip past it (it skips ahead only over indices an honest voter certified).
    fn root_ok(&self, i: u64) -> bool {
        i < self.root_tip.max(self.root_floor)
            || self.roots.get(&i).is_some_and(|s| s.certified.is_some())
    }

    /// INV-REP-7 for a proposal ending at `last`: the first root index whose certificate is
    /// missing although its root height is ≤ `last − root_gate_blocks`, if any.
    fn root_gate_blocked(&self, last: u64) -> Option<u64> {
        if !self.roots_on() || last < self.cfg.root_gate_blocks {
            return None;
        }
        let bound = last - self.cfg.root_gate_blocks;
        let rb = self.cfg.root_blocks;
        if bound + 1 < rb {
            return None;
        }
        let top = (bound + 1) / rb - 1; // the highest root index with root height ≤ bound
        (self.root_start()..=top).find(|&i| !self.root_ok(i))
    }

    /// The first root index the gate asks about: above genesis, the tip and the evicted floor.
    fn root_start(&self) -> u64 {
        self.first_root_index()
            .max(self.root_tip)
            .max(self.root_floor)
    }

    /// The first root index from the tip on not certified here: the root gate's bound and the
    /// bottom of the ack window (07 §7.4).
    fn root_window_lo(&self) -> u64 {
        let mut i = self.root_start();
        while self.roots.get(&i).is_some_and(|s| s.certified.is_some()) {
            i += 1;
        }
        i
    }

    /// Whether root index `i` lies in the ack window (its slot is never evicted, F10).
    fn in_root_window(&self, i: u64, lo: u64) -> bool {
        i >= lo && i - lo < ROOT_ACK_WINDOW
    }

    /// The highest height a proposal may end at under the root gate (u64::MAX: none).
    fn root_gate_limit(&self) -> u64 {
        if !self.roots_on() {
            return u64::MAX;
        }
        // The first uncertified root index from the tip on bounds it.
        let i = self.root_window_lo();
        root_height(i, self.cfg.root_blocks).saturating_add(self.cfg.root_gate_blocks)
    }

    /// A peer's verified root ack (07 §7.4). Taken only for an index in [`ROOT_ACK_WINDOW`] or
    /// one below it that still has a slot (a certified root's late acks: RootFault evidence),
    /// and only a signer's first [`ROOT_DIGESTS_PER_SIGNER`] digests per index; false: refused.
    fn root_ack(
        &mut self,
        index: u64,
        signer: u8,
        digest: [u8; 32],
        sig: [u8; 64],
        now: u64,
    ) -> bool {
        if !self.roots_on() || (signer as usize) >= self.voters.n() {
            return false;
        }
        let lo = self.root_window_lo();
        let known = self.roots.contains_key(&index);
        if !(self.in_root_window(index, lo) || (index < lo && known)) {
            return false;
        }
        if let Some(slot) = self.roots.get(&index) {
            let signed = |d: &[u8; 32]| slot.acks.get(d).is_some_and(|s| s.contains_key(&signer));
            let digests = slot.acks.keys().filter(|d| signed(d)).count();
            if !signed(&digest) && digests >= ROOT_DIGESTS_PER_SIGNER {
                return false;
            }
        }
        let slot = self.roots.entry(index).or_default();
        slot.acks.entry(digest).or_default().insert(signer, sig);
        self.check_conflict(index, now);
        true
    }

    /// A slot's signatures as `Diverge` evidence (07 §7.4): the digests with the most
    /// signatures first, so the ones that make the case survive the message's bound.
    fn evidence(slot: &RootSlot) -> Vec<DivergeDigest> {
        let mut ds: Vec<DivergeDigest> = slot
            .acks
            .iter()
            .map(|(d, s)| DivergeDigest {
                digest: *d,
                sigs: s
                    .iter()
                    .map(|(&index, &sig)| CertEntry { index, sig })
                    .collect(),
            })
            .collect();
        ds.sort_by_key(|d| std::cmp::Reverse(d.sigs.len()));
        ds.truncate(vyrn_wire::msg::MAX_MEMBERS);
        ds
    }

    /// INV-REP-9 case 1: two digests for one index, each with ≥ f + 1 signatures.
    fn check_conflict(&mut self, index: u64, _now: u64) {
        if self.diverged.is_some() {
            return;
        }
        let f1 = self.voters.max_faults() + 1;
        let Some(slot) = self.roots.get(&index) else {
            return;
        };
        let heavy = slot.acks.values().filter(|s| s.len() >= f1).count();
        if heavy >= 2 {
            let digests = Self::evidence(slot);
            self.diverge(index, DivergeReason::Conflict, digests);
        }
    }

    fn diverge(&mut self, index: u64, reason: DivergeReason, digests: Vec<DivergeDigest>) {
        let d = Diverge {
            epoch: self.cfg.epoch,
            index,
            reason,
            digests,
        };
        self.counters.diverged = 1;
        self.out.push(DeskOut::Diverge(d.clone()));
        self.diverged = Some(d);
    }

    /// Root proposals and verifies answered from the replay's roots; certificates exported;
    /// RootFaults recorded; the timeout of INV-REP-9 case 2. True when it did anything.
    fn roots_step(&mut self, now: u64, ledger: &mut impl Ledger) -> bool {
        if !self.roots_on() {
            // Nothing to answer with: drop the engine's requests (roots are off).
            self.root_proposes.clear();
            self.root_verifies.clear();
            return false;
        }
        let mut busy = false;
        let rb = self.cfg.root_blocks;
        let proposes = std::mem::take(&mut self.root_proposes);
        for (index, reply) in proposes {
            if reply.is_closed() {
                busy = true;
                continue;
            }
            let h = root_height(index, rb);
            let Some(root) = self.own_root(index, ledger) else {
                self.root_proposes.push((index, reply));
                continue;
            };
            busy = true;
            let d = root_digest(self.cfg.epoch, h, &root);
            self.counters.roots_proposed += 1;
            let _ = reply.send(d);
            if let Some(sig) = self
                .root_signer
                .as_ref()
                .and_then(|s| crate::roots::sign_root(s, self.cfg.epoch, index, d))
            {
                let me = self.cfg.me;
                let slot = self.roots.entry(index).or_default();
                slot.acks.entry(d.0).or_default().insert(me, sig);
                self.check_conflict(index, now);
            }
        }
        let verifies = std::mem::take(&mut self.root_verifies);
        for (index, digest, reply) in verifies {
            if reply.is_closed() {
                continue;
            }
            match self.own_root(index, ledger) {
                Some(root) => {
                    busy = true;
                    let _ = reply
                        .send(root_digest(self.cfg.epoch, root_height(index, rb), &root) == digest);
                }
                None => self.root_verifies.push((index, digest, reply)),
            }
        }
        // Certificates over this voter's own root go out; a voter whose own root differs is
        // the odd one (its replay diverged from a quorum's).
        let me = self.cfg.me;
        let idx: Vec<u64> = self
            .roots
            .iter()
            .filter(|(_, s)| s.certified.is_some() && !s.settled)
            .map(|(&i, _)| i)
            .collect();
        for i in idx {
            let own = self.own_root(i, ledger);
            let Some(slot) = self.roots.get_mut(&i) else {
                continue;
            };
            let Some((cd, entries)) = slot.certified.clone() else {
                continue;
            };
            if let Some((root, d)) =
                own.map(|r| (r, root_digest(self.cfg.epoch, root_height(i, rb), &r).0))
            {
                slot.settled = true;
                busy = true;
                if d == cd {
                    self.counters.root_certs_out += 1;
                    self.out.push(DeskOut::RootCert(RepRootCert {
                        epoch: self.cfg.epoch,
                        view: 0,
                        parent_view: 0,
                        h: root_height(i, rb),
                        root,
                        entries,
                    }));
                } else if slot.faulted.insert(me) {
                    self.counters.root_faults += 1;
                    self.out.push(DeskOut::RootFault {
                        index: i,
                        signer: me,
                        digest: d,
                    });
                }
            }
            // Peers that signed another digest than the certified one (07 §10.2).
            let Some(slot) = self.roots.get_mut(&i) else {
                continue;
            };
            let odd: Vec<(u8, [u8; 32])> = slot
                .acks
                .iter()
                .filter(|(d, _)| **d != cd)
                .flat_map(|(d, s)| s.keys().map(move |&k| (k, *d)))
                .filter(|(k, _)| *k != me)
                .collect();
            for (signer, digest) in odd {
                if slot.faulted.insert(signer) {
                    self.counters.root_faults += 1;
                    self.out.push(DeskOut::RootFault {
                        index: i,
                        signer,
                        digest,
                    });
                }
            }
        }
        // INV-REP-9 case 2: a root height final REP_ROOT_TIMEOUT_MS ago with no certificate.
        let fin = self.final_height;
        if fin + 1 >= rb {
            let top = (fin + 1) / rb - 1;
            let from = self.first_root_index().max(self.root_final_scan);
            if top >= from {
                for i in from..=top {
                    self.roots.entry(i).or_default().final_at.get_or_insert(now);
                }
                self.root_final_scan = top + 1;
            }
        }
        if self.diverged.is_none() {
            let late = self.roots.iter().find(|(&i, s)| {
                !self.root_ok(i)
                    && s.final_at
                        .is_some_and(|t| now.saturating_sub(t) > self.cfg.root_timeout_ns)
            });
            if let Some((&i, s)) = late {
                let digests = Self::evidence(s);
                self.diverge(i, DivergeReason::Timeout, digests);
                busy = true;
            }
        }
        // Bounded: settled indices below the tip go; past ROOTS_KEPT the oldest below the ack
        // window goes, then the farthest above it — never a slot inside it (F10).
        let tip = self.root_tip;
        self.roots
            .retain(|&i, s| i + 64 >= tip || !(s.settled || s.certified.is_some()));
        if self.roots.len() > ROOTS_KEPT {
            let lo = self.root_window_lo();
            while self.roots.len() > ROOTS_KEPT {
                let below = self.roots.first_key_value().map(|(&i, _)| i);
                let above = self.roots.last_key_value().map(|(&i, _)| i);
                if let Some(i) = below.filter(|&i| i < lo) {
                    // Every index from the start up to the window is certified here: one
                    // evicted still counts for the gate (INV-REP-7).
                    if i >= self.root_start() {
                        self.root_floor = i + 1;
                    }
                    self.roots.remove(&i);
                } else if let Some(i) = above.filter(|&i| i >= lo && !self.in_root_window(i, lo)) {
                    self.roots.remove(&i);
                } else {
                    break;
                }
            }
        }
        busy
    }

    /// `R(h)` of root index `i` from the ledger, remembered in its slot.
    fn own_root(&mut self, i: u64, ledger: &mut impl Ledger) -> Option<Hash> {
        if let Some((r, _)) = self.roots.get(&i).and_then(|s| s.own) {
            return Some(r);
        }
        let h = root_height(i, self.cfg.root_blocks);
        let r = ledger.root(h)?;
        let d = root_digest(self.cfg.epoch, h, &r).0;
        self.roots.entry(i).or_default().own = Some((r, d));
        Some(r)
    }
}

/// Four voters whose seeds are `[seed + i; 32]` (the desk's unit tests).
#[cfg(test)]
fn test_voters(seed: u8) -> Voters {
    let keys: Vec<[u8; 32]> = (0..4u8)
        .map(|i| {
            use commonware_cryptography::Signer as _;
            let k = crate::private_key(&[seed + i; 32]);
            let mut b = [0u8; 32];
            b.copy_from_slice(k.public_key().as_ref());
            b
        })
        .collect();
    Voters::with_simplex_quorum(1, &keys).unwrap_or_else(|e| panic!("test voters: {e:?}"))
}

#[cfg(test)]
mod root_tests;
#[cfg(test)]
mod seal_tests;
