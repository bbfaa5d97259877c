//! The replica's Simplex voter (07 §6.3–§6.4, §7.2 core 4): the consensus engine on its own
//! thread (commonware's runtime, authenticated p2p between the voters, its journal in a
//! directory), and its [`Desk`] answered on the replica's loop from the per-block verdict.
//!
//! Every `verify` is the verdict's (INV-REP-4: a voter votes only on what it fully holds and has
//! checked); the replica's own finalize votes and each finalization's `REP_FinalityCert` go to
//! the sequencer's control port (07 §6.8), where the finality listener counts Q valid votes.
//! The blocks a verify said true of are the ones the journal writes (07 §8.2: "written once,
//! when its verify passes").

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use vyrn_consensus::desk::{Check, Desk, DeskConfig, DeskOut, Ledger};
use vyrn_consensus::engine::EngineParams;
use vyrn_consensus::process::{self, ProcessConfig, VoterThread};
use vyrn_consensus::{App, Voters};
use vyrn_wire::header::Hash;

use crate::front::core::{ReplicaCore, ReplicaOut};
use crate::front::verdict::VerifyOutcome;

/// How the replica's voter runs.
#[derive(Debug, Clone)]
pub struct SimplexCfg {
    /// Every voter's consensus p2p address, membership order.
    pub p2p: Vec<SocketAddr>,
    /// The engine's journal directory (one per voter; a fresh one for a fresh home).
    pub storage: PathBuf,
    /// Δ (REP_DELTA_MS = 1 ms in 07; a dev home sharing two cores uses more).
    pub delta: Duration,
    /// REP_VERIFY_WAIT_MS in ns (a budget).
    pub verify_wait_ns: u64,
    /// The home's name, for the journal partition.
    pub home: String,
    /// Cores the consensus thread runs on (`None`: the process's set).
    pub cores: Option<Vec<usize>>,
    /// The desk's recheck period ([`DeskConfig::recheck_ns`]).
    pub recheck_ns: u64,
    /// State roots (07 §7.4): the aggregation engine beside Simplex, the root gate and
    /// divergence; `None` runs Simplex alone.
    pub roots: Option<RootSettings>,
    /// Lab fault: this voter signs a wrong `R(h)` at every root height, as a replica whose
    /// replay diverged would (`vyrn replica --lab-wrong-root`; tests of INV-REP-9). Feature
    /// `lab` only.
    #[cfg(feature = "lab")]
    pub lab_wrong_root: bool,
}

/// The state-root figures of a home (07 §7.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RootSettings {
    /// REP_ROOT_BLOCKS: a root at every height h with (h + 1) % root_blocks == 0.
    pub root_blocks: u64,
    /// REP_ROOT_GATE_BLOCKS: verify(P) needs a root cert for every root height
    /// ≤ P.last_height − gate_blocks (INV-REP-7).
    pub gate_blocks: u64,
    /// REP_ROOT_TIMEOUT_MS in ns: no root cert this long after the root height was final
    /// fires REP_A_DIVERGE (INV-REP-9 case 2).
    pub timeout_ns: u64,
    /// How often the aggregation engine rebroadcasts this voter's root signature.
    pub rebroadcast: Duration,
}

impl RootSettings {
    /// 07's figures.
    pub fn spec() -> Self {
        RootSettings {
            root_blocks: vyrn_wire::consts::REP_ROOT_BLOCKS,
            gate_blocks: vyrn_wire::consts::REP_ROOT_GATE_BLOCKS,
            timeout_ns: vyrn_wire::consts::REP_ROOT_TIMEOUT_MS * 1_000_000,
            rebroadcast: Duration::from_millis(100),
        }
    }

    /// A dev home's, for its block period `block_ns` (20 ms on two shared cores): 07's times
    /// rather than its block counts — a root every second (07: 1000 × 1 ms), the gate 5 s
    /// behind — and a 20 s timeout: replay on two shared cores lags by seconds under the load
    /// generator, and a false REP_A_DIVERGE halts the book for good.
    pub fn dev(block_ns: u64) -> Self {
        let root_blocks = (1_000_000_000 / block_ns.max(1)).max(1);
        RootSettings {
            root_blocks,
            gate_blocks: 5 * root_blocks,
            timeout_ns: 20_000_000_000,
            rebroadcast: Duration::from_millis(200),
        }
    }
}

impl SimplexCfg {
    /// 07's figures: Δ = REP_DELTA_MS, REP_VERIFY_WAIT_MS.
    pub fn new(p2p: Vec<SocketAddr>, storage: PathBuf, home: String) -> Self {
        SimplexCfg {
            p2p,
            storage,
            delta: Duration::from_millis(1),
            verify_wait_ns: vyrn_wire::consts::REP_VERIFY_WAIT_MS * 1_000_000,
            home,
            cores: None,
            recheck_ns: 0,
            roots: Some(RootSettings::spec()),
            #[cfg(feature = "lab")]
            lab_wrong_root: false,
        }
    }

    /// A dev home's budgets (four replicas, a data box, the sequencer and the clients on two
    /// shared cores): Δ = 20 ms, so a leader has 40 ms to hold and check a header (a dev
    /// block is 20 ms; a replica's check waits on payloads from a data box sharing the cores)
    /// before its view times out, a verify waits 200 ms for its blocks, and waiting requests
    /// are rechecked every 500 µs unless something arrived. With Δ = 5 ms
    /// almost every view of the main command timed out (`docs/benchmarks.md`).
    pub fn dev(mut self, block_ns: u64) -> Self {
        self.delta = Duration::from_millis(20);
        self.recheck_ns = 500_000;
        self.verify_wait_ns = 200_000_000;
        self.roots = self.roots.map(|_| RootSettings::dev(block_ns));
        self
    }
}

/// The voter's figures.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct VoterCounters {
    /// Verdict checks asked by the desk.
    pub checks: u64,
    /// Checks answered false on a contradiction.
    pub refused: u64,
    /// Finalize votes sent to the sequencer.
    pub votes_out: u64,
    /// Certificates sent to the sequencer.
    pub certs_out: u64,
    /// Conflict evidence reported by the engine.
    pub faults: u64,
    /// `REP_RootCert`s exported (07 §7.4).
    pub root_certs_out: u64,
    /// Root signatures for a digest other than the certified one (RootFault, 07 §10.2).
    pub root_faults: u64,
    /// REP_A_DIVERGE raised (07 §7.4, INV-REP-9): at most one per run.
    pub diverges: u64,
    /// Seal offers this voter made as seal leader (07 §9.4).
    pub seal_offers_out: u64,
    /// Seal certificates exported (07 §9.4).
    pub seal_certs_out: u64,
    /// Checks answered pending because the journal's queue was full (07 §8.2 backpressure).
    pub journal_holds: u64,
}

/// The replica's Simplex voter: the desk on the replica's loop, the engine on its thread.
#[derive(Debug)]
pub struct SimplexVoter {
    desk: Desk,
    thread: Option<VoterThread>,
    hashes: BTreeMap<u64, Hash>,
    /// Ranges a verify said true of, `first → last`, not yet merged into `voted`.
    ranges: BTreeMap<u64, u64>,
    /// Every height through this one was checked true (the journal writes up to it).
    pub voted: u64,
    /// The first contradiction the verdict reported, if any.
    pub refused: Option<u64>,
    counters: VoterCounters,
    last_catchup: u64,
    lab_wrong_root: bool,
    /// The seal this voter builds and checks once the tenure is deposed here (07 §9.4).
    seal: Option<crate::front::failover::seal::SealPlan>,
    /// The journal's queue is full: no new block is checked true until it drains (07 §8.2).
    held: bool,
    /// Where the seal stands here, and whether that changed since [`Self::take_seal_why`].
    seal_why: Option<seal::SealWhy>,
    seal_why_new: bool,
    /// The desk's `seals_reproposed` as last logged.
    seals_reproposed: u64,
}

mod seal;
pub use seal::SealWhy;

/// How often a voter behind its final height checks the next finalized range itself.
const CATCHUP_NS: u64 = 1_000_000;

/// Headers kept below the final height (a lagging leader's proposal may still name them).
const HASHES_BELOW_FINAL: u64 = 4096;

impl SimplexVoter {
    /// Voter `me` of `voters` with seed `seed`: start its engine (genesis at height 0 of the
    /// epoch) on a new thread.
    pub fn start(
        cfg: &SimplexCfg,
        voters: Voters,
        me: u8,
        seed: &[u8; 32],
        floor: Option<(
            vyrn_consensus::Finalization,
            vyrn_wire::msg::consensus::RepProposal,
        )>,
    ) -> std::io::Result<Self> {
        if cfg.p2p.len() != voters.n() {
            return Err(std::io::Error::other(format!(
                "{} p2p addresses for {} voters",
                cfg.p2p.len(),
                voters.n()
            )));
        }
        let epoch = voters.epoch();
        let genesis = vyrn_consensus::genesis_digest(epoch, 0, &[0; 32]);
        // From a certified floor (the cert journal's newest), the desk builds on its proposal as
        // on a genesis: the next proposal's parent is the floor's payload, its first height the
        // floor's last + 1.
        let mut dcfg = match &floor {
            Some((f, p)) => DeskConfig::new(me, epoch, p.last_height, f.proposal.payload),
            None => DeskConfig::new(me, epoch, 0, genesis),
        };
        dcfg.verify_wait_ns = cfg.verify_wait_ns;
        dcfg.recheck_ns = cfg.recheck_ns;
        if let Some(r) = cfg.roots {
            dcfg.root_blocks = r.root_blocks;
            dcfg.root_gate_blocks = r.gate_blocks;
            dcfg.root_timeout_ns = r.timeout_ns;
        }
        let key = vyrn_consensus::private_key(seed);
        let (mut desk, link) = Desk::new(dcfg, voters.clone());
        let roots = match cfg.roots {
            Some(r) => {
                let rs = vyrn_consensus::roots::root_signer(&voters, key.clone())
                    .ok_or_else(|| std::io::Error::other("the key is not a voter of the set"))?;
                desk.set_root_signer(rs);
                Some(vyrn_consensus::process::RootsSetup {
                    app: vyrn_consensus::roots::RootsApp::new(link.clone(), voters.clone()),
                    rebroadcast: r.rebroadcast,
                    partition: format!(
                        "{}-roots",
                        EngineParams::partition_for(&cfg.home, epoch, me)
                    ),
                })
            }
            None => None,
        };
        let app = App::new(link, voters.clone(), me);
        std::fs::create_dir_all(&cfg.storage)?;
        let pcfg = ProcessConfig {
            voters,
            me,
            key,
            p2p: cfg.p2p.clone(),
            storage: cfg.storage.clone(),
            params: EngineParams {
                epoch,
                delta: cfg.delta,
                partition: EngineParams::partition_for(&cfg.home, epoch, me),
                genesis,
                floor: floor.map(|(f, _)| f),
            },
            worker_threads: 1,
            quota_per_s: 10_000,
            roots,
        };
        let cores = cfg.cores.clone();
        let thread = process::spawn(pcfg, app, move || {
            if let Some(c) = cores {
                let _ = vyrn_tile::pin::pin_process("voter", Some(&c));
            }
        })?;
        Ok(SimplexVoter {
            desk,
            thread: Some(thread),
            hashes: BTreeMap::new(),
            ranges: BTreeMap::new(),
            voted: 0,
            refused: None,
            counters: VoterCounters::default(),
            last_catchup: 0,
            #[cfg(feature = "lab")]
            lab_wrong_root: cfg.lab_wrong_root,
            #[cfg(not(feature = "lab"))]
            lab_wrong_root: false,
            seal: None,
            held: false,
            seal_why: None,
            seal_why_new: false,
            seals_reproposed: 0,
        })
    }

    /// Hold (or release) the checks of new blocks: while the journal's writer cannot take the
    /// blocks voted so far, a check answers pending (counted, `journal_holds`), so the desk
    /// waits and this voter votes for nothing it could not write (07 §8.2). The others' Q
    /// finalize without it meanwhile.
    pub fn hold_checks(&mut self, held: bool) {
        self.held = held;
    }

    /// Blocks through `through` were checked by this replica before it restarted: its block
    /// journal holds them from its lowest height, gap-free (07 §8.2: a block is written once its
    /// checks pass). The checked prefix resumes there, so the journal and the forgetting go on
    /// from the next block instead of waiting for heights no header will name again.
    pub fn resume_checked(&mut self, through: u64) {
        self.voted = self.voted.max(through);
    }

    /// A header the replica holds (its signature and chain are the verdict's to check). Kept
    /// above the checked prefix as well as above the final height: a replica catching up
    /// checks finalized blocks it was never asked to verify against them.
    pub fn on_header(&mut self, height: u64, hash: Hash) {
        if height > self.voted.min(self.desk.final_height()) && self.hashes.len() < 1 << 16 {
            self.hashes.insert(height, hash);
        }
    }

    /// One step: the desk's requests answered from `core`'s verdict; what it has for the
    /// sequencer to `send`. True if it did anything.
    pub fn poll(
        &mut self,
        core: &mut ReplicaCore,
        out: &mut impl ReplicaOut,
        now: u64,
        mut send: impl FnMut(&DeskOut),
    ) -> bool {
        let mut ledger = CoreLedger {
            core,
            seal: self.seal.as_ref(),
            out,
            hashes: &self.hashes,
            ranges: &mut self.ranges,
            counters: &mut self.counters,
            refused: &mut self.refused,
            wrong_root: self.lab_wrong_root,
            held: self.held,
            seal_why: &mut self.seal_why,
            seal_why_new: &mut self.seal_why_new,
        };
        let mut busy = self.desk.poll(now, &mut ledger);
        // Finalized ranges this voter never verified (it was not asked in time): checked by its
        // own verdict all the same, so the journal and the forgetting move on (07 §8.2: a block
        // is written once its checks pass here, never on another's word).
        let fin = self.desk.final_height();
        let next = self.voted + 1;
        if next <= fin && now.saturating_sub(self.last_catchup) >= CATCHUP_NS {
            self.last_catchup = now;
            let last = fin.min(next + vyrn_wire::consts::REP_MAX_HDRS_PER_PROPOSAL - 1);
            if let Some(hash) = ledger.hashes.get(&last).copied() {
                if ledger.check(next, last, &hash, now) == Check::True {
                    busy = true;
                }
            }
        }
        let c = &mut self.counters;
        self.desk.drain_out(|o| {
            match &o {
                DeskOut::Vote(_) => c.votes_out += 1,
                DeskOut::Cert(_) => c.certs_out += 1,
                DeskOut::Fault { .. } => c.faults += 1,
                DeskOut::RootCert(_) => c.root_certs_out += 1,
                DeskOut::RootFault { .. } => c.root_faults += 1,
                DeskOut::Diverge(_) => c.diverges += 1,
                DeskOut::SealOffer { .. } => c.seal_offers_out += 1,
                DeskOut::SealCert { .. } => c.seal_certs_out += 1,
            }
            send(&o);
        });
        // The checked prefix grows as ranges join it.
        while let Some((&first, &last)) = self.ranges.first_key_value() {
            if first > self.voted + 1 {
                break;
            }
            self.voted = self.voted.max(last);
            self.ranges.pop_first();
        }
        // The checked prefix's next header is kept however far behind it is (the catch-up
        // check above needs the hashes from there on; the insert's cap bounds them).
        let keep_from = self
            .desk
            .final_height()
            .saturating_sub(HASHES_BELOW_FINAL)
            .min(self.voted + 1);
        if self
            .hashes
            .first_key_value()
            .is_some_and(|(&h, _)| h < keep_from)
        {
            self.hashes = self.hashes.split_off(&keep_from);
        }
        busy
    }

    /// A peer's seal offer for the desk (07 §9.4): indexed for `verify` when its form is right.
    pub fn offer_seal(
        &mut self,
        m: vyrn_wire::msg::ctrl::SealOffer,
    ) -> Result<(), vyrn_consensus::desk::OfferRefused> {
        self.desk.offer_seal(m.proposal, m.ext).map(|_| ())
    }

    /// The seal to build and check from now on (07 §9.4: the tenure is deposed here and the
    /// wait of §9.2 is over).
    pub fn set_seal(&mut self, plan: crate::front::failover::seal::SealPlan) {
        self.seal = Some(plan);
    }

    /// The seal ending at `seal_height` is final and the next tenure followed (07 §9.5): the
    /// seal block counts as checked (this voter's seal check passed on it), and headers are
    /// proposed and checked as before from the block after it.
    pub fn follow_seal(&mut self, seal_height: u64) {
        self.seal = None;
        self.voted = self.voted.max(seal_height);
        self.ranges = self.ranges.split_off(&(seal_height + 1));
    }

    /// Where the seal stands here when that changed since the last call (07 §9.4; the node
    /// logs it: why a leader proposes nothing yet, why a check is pending or refused).
    pub fn take_seal_why(&mut self) -> Option<SealWhy> {
        let again = self.desk.counters().seals_reproposed;
        if again > self.seals_reproposed {
            self.seals_reproposed = again;
            return Some(SealWhy::Reproposed);
        }
        std::mem::take(&mut self.seal_why_new)
            .then_some(self.seal_why)
            .flatten()
    }

    /// Whether a seal plan is set.
    pub fn sealing(&self) -> bool {
        self.seal.is_some()
    }

    /// Vote for nothing more (the replica's journal failed: `Desk::stop_votes`).
    pub fn stop_votes(&mut self) {
        self.desk.stop_votes();
    }

    /// REP_A_DIVERGE as this voter raised it (07 §7.4, INV-REP-9), if it did.
    pub fn diverged(&self) -> Option<&vyrn_wire::msg::ctrl::Diverge> {
        self.desk.diverged()
    }

    /// The newest height finalized, as this voter's engine saw it.
    pub fn final_height(&self) -> u64 {
        self.desk.final_height()
    }

    /// The view of that finalization.
    pub fn final_view(&self) -> u64 {
        self.desk.final_view()
    }

    /// The desk's counters.
    pub fn desk_counters(&self) -> vyrn_consensus::DeskCounters {
        self.desk.counters()
    }

    /// The voter's counters.
    pub fn counters(&self) -> VoterCounters {
        self.counters
    }

    /// Whether the engine started, and whether it failed.
    pub fn engine_state(&self) -> (bool, bool) {
        use std::sync::atomic::Ordering;
        self.thread.as_ref().map_or((false, true), |t| {
            (
                t.stats.started.load(Ordering::Relaxed) == 1,
                t.stats.failed.load(Ordering::Relaxed) == 1,
            )
        })
    }

    /// Stop the engine (its journal synced).
    pub fn stop(&mut self) {
        if let Some(t) = self.thread.take() {
            t.stop();
        }
    }
}

impl Drop for SimplexVoter {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The verdict as the desk's ledger (07 §6.4).
struct CoreLedger<'a, O> {
    core: &'a mut ReplicaCore,
    seal: Option<&'a crate::front::failover::seal::SealPlan>,
    out: &'a mut O,
    hashes: &'a BTreeMap<u64, Hash>,
    ranges: &'a mut BTreeMap<u64, u64>,
    counters: &'a mut VoterCounters,
    refused: &'a mut Option<u64>,
    wrong_root: bool,
    held: bool,
    seal_why: &'a mut Option<seal::SealWhy>,
    seal_why_new: &'a mut bool,
}

impl<O: ReplicaOut> Ledger for CoreLedger<'_, O> {
    fn header_hash(&self, h: u64) -> Option<Hash> {
        self.hashes.get(&h).copied()
    }
    fn top(&self) -> u64 {
        self.hashes.last_key_value().map_or(0, |(&h, _)| h)
    }
    fn check(&mut self, first: u64, last: u64, last_hash: &Hash, now: u64) -> Check {
        self.counters.checks += 1;
        if self.held {
            // 07 §8.2: the journal's writer is behind; nothing new is checked true.
            self.counters.journal_holds += 1;
            return Check::Pending { at: first };
        }
        match self.core.verify(first, last, last_hash, now, self.out) {
            VerifyOutcome::True => {
                let e = self.ranges.entry(first).or_insert(last);
                *e = (*e).max(last);
                Check::True
            }
            VerifyOutcome::Pending(at, _) => Check::Pending { at },
            VerifyOutcome::False(at, Some(_)) => {
                self.counters.refused += 1;
                self.refused.get_or_insert(at);
                Check::False {
                    at,
                    contradiction: true,
                }
            }
            VerifyOutcome::False(at, None) => Check::False {
                at,
                contradiction: false,
            },
        }
    }
    fn seal(&mut self, parent_last: u64, now: u64) -> vyrn_consensus::SealAsk {
        self.seal_ask(parent_last, now)
    }
    fn check_seal(
        &mut self,
        p: &vyrn_wire::msg::consensus::RepProposal,
        ext: &vyrn_wire::msg::consensus::RepSealExt,
        now: u64,
    ) -> Check {
        self.seal_check(p, ext, now)
    }
    fn root(&mut self, h: u64) -> Option<Hash> {
        let mut r = self.core.root(h)?;
        if self.wrong_root {
            r[0] ^= 0x5a;
        }
        Some(r)
    }
}

/// The newest `REP_FinalityCert` of `voters`' epoch in the cert journal on `dirs` that
/// verifies (07 §6.5), as the Simplex finalization the engine starts from and its proposal:
/// a replica whose engine partition is gone (a replaced drive, a wiped directory) resumes from
/// its last certified view instead of the epoch's genesis (commonware's `Floor::Finalized`; an
/// intact partition further on still wins). `None`: no journal, or nothing in it verifies.
/// Certificates that do not verify are skipped, never trusted.
pub fn newest_floor(
    dirs: &[PathBuf],
    voters: &Voters,
) -> Option<(
    vyrn_consensus::Finalization,
    vyrn_wire::msg::consensus::RepProposal,
)> {
    use crate::disk::journal::cert::{CertJournal, CertKind};
    use vyrn_wire::msg::ctrl::CtrlMsg;
    let mut j = CertJournal::open_read_only(dirs).ok()?;
    // Parse every entry (cheap), then check signatures newest view first and stop at the first
    // that verifies: a long journal costs one verification, not one per certificate.
    let mut certs: Vec<_> = (0..j.len())
        .filter_map(|i| match j.get(i) {
            Ok((CertKind::Finality, b)) => match CtrlMsg::parse(&b) {
                Ok(CtrlMsg::FinalityCert(c)) => Some(c),
                _ => None,
            },
            _ => None,
        })
        .collect();
    certs.sort_unstable_by_key(|c| std::cmp::Reverse(c.view));
    certs.iter().find_map(|c| {
        vyrn_consensus::cert::to_finalization(voters, c)
            .ok()
            .map(|f| (f, c.proposal))
    })
}

/// What [`verify_cert_journal`] found.
#[derive(Debug, Default)]
pub struct CertAudit {
    /// Finality certificates that verify.
    pub ok: u64,
    /// The highest `last_height` a verified certificate finalizes.
    pub final_height: u64,
    /// Entries that do not: (entry index, why).
    pub bad: Vec<(usize, String)>,
    /// `REP_RootCert`s that verify (07 §7.4).
    pub roots_ok: u64,
    /// The highest root height a verified root certificate covers.
    pub root_height: u64,
    /// Each certified root: height → `R(h)` (what a snapshot's state root must equal, 07
    /// §7.5 "Loading").
    pub roots: std::collections::BTreeMap<u64, vyrn_wire::header::Hash>,
    /// Entries of other kinds (seal extensions), not checked here.
    pub other: u64,
}

/// Check every `REP_FinalityCert` in the cert journal on `dirs` against `membership` with
/// [`vyrn_consensus::cert::verify_finality_cert`] (07 §6.5: the one check), and every
/// `REP_RootCert` with [`vyrn_consensus::roots::verify_root_cert`] for REP_ROOT_BLOCKS =
/// `root_blocks` (07 §7.4) — what `vyrn verify-cert` prints.
pub fn verify_cert_journal(
    dirs: &[PathBuf],
    membership: &vyrn_wire::msg::ctrl::RepMembership,
    root_blocks: u64,
) -> Result<CertAudit, String> {
    use crate::disk::journal::cert::{CertJournal, CertKind};
    use vyrn_wire::msg::ctrl::CtrlMsg;
    // Read-only: an audit never cuts, repairs or creates anything (the replica may be writing).
    let mut j = CertJournal::open_read_only(dirs).map_err(|e| format!("cert journal: {e}"))?;
    let mut a = CertAudit::default();
    for i in 0..j.len() {
        match j.get(i) {
            Ok((CertKind::Finality, b)) => match CtrlMsg::parse(&b) {
                Ok(CtrlMsg::FinalityCert(c)) => {
                    match vyrn_consensus::cert::verify_finality_cert(&c, membership) {
                        Ok(()) => {
                            a.ok += 1;
                            a.final_height = a.final_height.max(c.proposal.last_height);
                        }
                        Err(e) => a.bad.push((i, e.to_string())),
                    }
                }
                Ok(_) => a.bad.push((i, "not a REP_FinalityCert".into())),
                Err(e) => a.bad.push((i, format!("does not parse: {e:?}"))),
            },
            Ok((CertKind::Root, b)) => match vyrn_wire::msg::consensus::RepRootCert::parse(&b) {
                Ok(c) => {
                    let checked = Voters::from_membership(membership, c.epoch)
                        .map_err(|e| format!("membership: {e:?}"))
                        .and_then(|v| {
                            vyrn_consensus::roots::verify_root_cert(&c, &v, root_blocks)
                                .map_err(|e| format!("{e:?}"))
                        });
                    match checked {
                        Ok(()) => {
                            a.roots_ok += 1;
                            a.root_height = a.root_height.max(c.h);
                            a.roots.insert(c.h, c.root);
                        }
                        Err(e) => a.bad.push((i, format!("root certificate: {e}"))),
                    }
                }
                Err(e) => a
                    .bad
                    .push((i, format!("root certificate does not parse: {e:?}"))),
            },
            Ok(_) => a.other += 1,
            Err(e) => a.bad.push((i, format!("unreadable: {e}"))),
        }
    }
    Ok(a)
}
