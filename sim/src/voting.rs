//! The voting side of a home, simulated (07 §6).
//!
//! - **Sequencer (scripted).** Block `h` closes at `h × block`; its header (signed with the
//!   sequencer's key, chained by `prev`) reaches voter `i` `header_delay[i]` later and its
//!   payloads `data_delay[i]` later. The sequencer's finality listener takes every voter's
//!   finalize votes and certificates `seq_link` after they leave the voter, and the finality
//!   gate (07 §6.8) halts the book while more than FIN_GATE_BLOCKS closed blocks are not final,
//!   resuming at REP_GATE_RESUME_BLOCKS.
//! - **Voters.** Each honest voter is the production desk and app around Simplex; its
//!   [`SimLedger`] answers the vote check of 07 §6.4 from the scripted arrival times: pending
//!   while a header or payload is missing, false on a contradicting root.
//! - **Network.** commonware's simulated network: one link per ordered pair with latency,
//!   jitter and loss; an [`Outage`] removes a voter's links both ways for a while.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, UNIX_EPOCH};

use commonware_consensus::simplex;
#[cfg(feature = "mocks")]
use commonware_consensus::types::Epoch;
use commonware_cryptography::Signer as _;
use commonware_p2p::simulated::{self, Link, Network};
use commonware_p2p::Recipients;
use commonware_runtime::{
    deterministic, Clock as _, Quota, Runner as _, Spawner as _, Supervisor as _,
};
use commonware_utils::{NZUsize, Probability, NZU32};
use vyrn_consensus::desk::{DeskOut, FaultKind};
use vyrn_consensus::engine::{EngineParams, CHANNEL_CERTS, CHANNEL_RESOLVER, CHANNEL_VOTES};
use vyrn_consensus::{
    App, Check, Desk, DeskConfig, DeskCounters, FinalityListener, Ledger, ListenerCounters,
    PrivateKey, Voters,
};
use vyrn_wire::consts::{FIN_GATE_BLOCKS, REP_GATE_RESUME_BLOCKS};
use vyrn_wire::header::{BlockHeader, Hash};
use vyrn_wire::msg::consensus::{RepFinalityCert, RepProposal, RepSealExt};
use vyrn_wire::msg::ctrl::FinalizeVote;

/// The epoch every simulated home runs.
pub const EPOCH: u32 = 1;

mod seal;
pub use seal::{seal_ext, seal_hash, SealSim};

/// What a voter is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// The production desk and app around Simplex.
    Honest,
    /// commonware's conflicter: two notarize/finalize votes per view (feature `mocks`).
    Conflicter,
    /// commonware's nuller: nullify and finalize in the same view (feature `mocks`).
    Nuller,
    /// commonware's equivocator: different proposals to different peers when it leads
    /// (feature `mocks`).
    Equivocator,
    /// Twins (the Twins method, arXiv 2004.10617): the voter's key runs two production
    /// voters — desk, app and engine each, honest on their own — whose network is split by
    /// [`VoterSpec::twins`]: each half talks only to its own set of peers until the split
    /// heals. Together they equivocate the way a compromised key can.
    Twins,
}

/// The network split of a [`Role::Twins`] voter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TwinSplit {
    /// The voters (indices) the primary half exchanges messages with.
    pub primary: Vec<usize>,
    /// The voters the secondary half exchanges messages with (may overlap `primary`).
    pub secondary: Vec<usize>,
    /// From this time on both halves talk to everyone (eventual synchrony); `None`: never.
    pub heal: Option<Duration>,
}

/// One voter's view of the scripted sequencer.
#[derive(Debug, Clone)]
pub struct VoterSpec {
    /// Block close → header held.
    pub header_delay: Duration,
    /// Block close → every payload resolved.
    pub data_delay: Duration,
    /// Heights whose payloads never resolve (the voter must never vote for them).
    pub missing: BTreeSet<u64>,
    /// Heights whose `data_root` contradicts the header (the voter must never vote for them).
    pub bad_root: BTreeSet<u64>,
    /// Honest or one of the Byzantine mocks.
    pub role: Role,
    /// Root heights whose `R(h)` this voter's replay gets wrong (a client bug, 07 §7.4).
    pub wrong_root: BTreeSet<u64>,
    /// Block close → `R(h)` computed (replay lag); `None`: this voter's replay never gets there.
    pub root_delay: Option<Duration>,
    /// The split of a [`Role::Twins`] voter.
    pub twins: Option<TwinSplit>,
    /// This voter computes another next sequencer than the seal leader (07 §9.5: it refuses
    /// the seal; as leader it offers its own).
    pub seal_disagrees: bool,
}

impl VoterSpec {
    /// An honest voter with metro-like delays: header 0.5 ms after close, payloads 0.6 ms.
    pub fn honest() -> Self {
        VoterSpec {
            header_delay: Duration::from_micros(500),
            data_delay: Duration::from_micros(600),
            missing: BTreeSet::new(),
            bad_root: BTreeSet::new(),
            role: Role::Honest,
            wrong_root: BTreeSet::new(),
            root_delay: Some(Duration::from_millis(2)),
            twins: None,
            seal_disagrees: false,
        }
    }
}

/// A voter cut off from every peer and from the sequencer during `[from, to)` (a crash or a
/// partition; its own engine keeps running and catches up after).
#[derive(Debug, Clone, Copy)]
pub struct Outage {
    /// The voter.
    pub voter: usize,
    /// From (simulated time since start).
    pub from: Duration,
    /// Until.
    pub to: Duration,
}

/// A simulated run.
#[derive(Debug, Clone)]
pub struct SimConfig {
    /// The seed: scheduling, jitter, loss.
    pub seed: u64,
    /// The voters (n = its length).
    pub voters: Vec<VoterSpec>,
    /// Block interval (07: 1 ms).
    pub block: Duration,
    /// Blocks the sequencer closes.
    pub blocks: u64,
    /// Voter ↔ voter one-way latency.
    pub link: Duration,
    /// Its jitter (standard deviation).
    pub jitter: Duration,
    /// Delivery probability of each message.
    pub success: f64,
    /// Voter → sequencer one-way latency.
    pub seq_link: Duration,
    /// Δ for the timeouts.
    pub delta: Duration,
    /// How long the run goes on after the last close.
    pub tail: Duration,
    /// Outages.
    pub outages: Vec<Outage>,
    /// How often each desk is polled.
    pub poll: Duration,
    /// The scheduler's cycle (simulated time per pass; keep it well under the link latency).
    pub cycle: Duration,
    /// Every duration above was multiplied by this ([`SimConfig::scaled`]).
    pub scale: u32,
    /// State roots (07 §7.4): the aggregation engine beside Simplex at every honest voter;
    /// `None` runs Simplex alone.
    pub roots: Option<RootsSim>,
    /// A sequencer that dies after its last block, sealed by the voters (07 §9.4).
    pub seal: Option<SealSim>,
    /// A scripted Twins prefix (commonware's `mocks::twins` generator, `twins::cases`): every
    /// engine, honest or twin, elects the scenario's leader view by view, and each
    /// [`Role::Twins`] voter's halves exchange votes and certificates only with the scenario's
    /// recipient sets for the message's view; after the prefix, round-robin leaders and
    /// all-to-all. Certificate fetches (the resolver) are not split. `None`: round-robin
    /// throughout, twins split by [`VoterSpec::twins`].
    #[cfg(feature = "mocks")]
    pub twins_script: Option<commonware_consensus::simplex::mocks::twins::Scenario>,
}

/// The state-root settings of a simulated home (07 §7.4, scaled down so a short run has many
/// root heights).
#[derive(Debug, Clone, Copy)]
pub struct RootsSim {
    /// REP_ROOT_BLOCKS.
    pub root_blocks: u64,
    /// REP_ROOT_GATE_BLOCKS.
    pub gate_blocks: u64,
    /// REP_ROOT_TIMEOUT_MS.
    pub timeout: Duration,
}

impl SimConfig {
    /// 4 honest voters on 0.5 ms metro links (07 §6.6), Δ = 1 ms, 1 ms blocks, `blocks` blocks.
    pub fn metro(seed: u64, blocks: u64) -> Self {
        SimConfig {
            seed,
            voters: vec![VoterSpec::honest(); 4],
            block: Duration::from_millis(1),
            blocks,
            link: Duration::from_micros(500),
            jitter: Duration::from_micros(20),
            success: 1.0,
            seq_link: Duration::from_micros(500),
            delta: Duration::from_millis(1),
            tail: Duration::from_millis(100),
            outages: Vec::new(),
            poll: Duration::from_micros(50),
            cycle: Duration::from_micros(10),
            scale: 1,
            roots: None,
            seal: None,
            #[cfg(feature = "mocks")]
            twins_script: None,
        }
    }

    /// The same run with every duration (links, jitter, blocks, delays, Δ, outages, polling)
    /// multiplied by `k`, for latency figures: commonware's simulated network draws each
    /// message's latency in whole milliseconds (`Duration::from_millis(sample as u64)`), so
    /// sub-millisecond metro links would arrive at once. Simplex's timeouts all derive from Δ
    /// and compute takes no simulated time, so the run is the same up to the scale, and
    /// [`SimReport`]'s latencies divide by it (the truncation error is then under 1 ms / k).
    pub fn scaled(mut self, k: u32) -> Self {
        let k = k.max(1);
        for d in [
            &mut self.block,
            &mut self.link,
            &mut self.jitter,
            &mut self.seq_link,
            &mut self.delta,
            &mut self.tail,
            &mut self.poll,
            &mut self.cycle,
        ] {
            *d *= k;
        }
        for v in &mut self.voters {
            v.header_delay *= k;
            v.data_delay *= k;
            if let Some(d) = &mut v.root_delay {
                *d *= k;
            }
        }
        if let Some(r) = &mut self.roots {
            r.timeout *= k;
        }
        if let Some(s) = &mut self.seal {
            s.detect *= k;
            s.ready *= k;
        }
        for o in &mut self.outages {
            o.from *= k;
            o.to *= k;
        }
        self.scale *= k;
        self
    }
}

/// What one honest voter saw.
#[derive(Debug, Clone, Default)]
pub struct VoterReport {
    /// Finalized proposals it resolved: last_height → (first_height, last_hash, view).
    pub finals: BTreeMap<u64, (u64, Hash, u64)>,
    /// Its final height at the end.
    pub final_height: u64,
    /// Its own finalize votes, as sent to the sequencer.
    pub votes: Vec<FinalizeVote>,
    /// The certificates it exported.
    pub certs: Vec<RepFinalityCert>,
    /// When it first held each height final (ns since start).
    pub final_at: BTreeMap<u64, u64>,
    /// Its desk's counters.
    pub counters: DeskCounters,
    /// Conflict evidence it reported.
    pub faults: Vec<(FaultKind, u8, u64)>,
    /// The `REP_RootCert`s it exported.
    pub root_certs: Vec<vyrn_wire::msg::consensus::RepRootCert>,
    /// RootFaults it recorded: (index, signer, digest).
    pub root_faults: Vec<(u64, u8, [u8; 32])>,
    /// Its REP_A_DIVERGE, with when it fired (ns since start).
    pub diverge: Option<(u64, vyrn_wire::msg::ctrl::Diverge)>,
    /// The seals it offered as seal leader (07 §9.4).
    pub seal_offers: Vec<(RepProposal, RepSealExt)>,
    /// The seal certificates it exported, with when (ns since start).
    pub seal_certs: Vec<(u64, RepFinalityCert, RepSealExt)>,
}

/// What the sequencer saw.
#[derive(Debug, Clone, Default)]
pub struct SeqReport {
    /// When its listener first held each height final (ns since start).
    pub final_at: BTreeMap<u64, u64>,
    /// Its final height at the end.
    pub final_height: u64,
    /// Finality-gate transitions: (ns, halted).
    pub gate: Vec<(u64, bool)>,
    /// The largest closed − final lag seen.
    pub max_lag: u64,
    /// The listener's counters.
    pub counters: ListenerCounters,
}

/// The result of a run.
#[derive(Debug, Clone)]
pub struct SimReport {
    /// Per voter; `None` for a Byzantine one.
    pub voters: Vec<Option<VoterReport>>,
    /// Each [`Role::Twins`] voter's two halves: (voter, primary, secondary).
    pub twins: Vec<(usize, VoterReport, VoterReport)>,
    /// The sequencer.
    pub seq: SeqReport,
    /// The runtime's auditor digest (equal for equal seeds).
    pub auditor: String,
    /// `header_hash(h)` of the scripted chain, index h (0 is the anchor).
    pub chain: Vec<Hash>,
    /// Block close time of height h in ns is `h × block_ns`.
    pub block_ns: u64,
    /// The run's time scale ([`SimConfig::scaled`]): latencies are divided by it.
    pub scale: u64,
}

impl SimReport {
    /// Close → final latency at every honest voter, every height it finalized, in ns.
    pub fn voter_latencies(&self) -> Vec<u64> {
        let mut v = Vec::new();
        for r in self.voters.iter().flatten() {
            for (&h, &t) in &r.final_at {
                v.push(t.saturating_sub(h * self.block_ns) / self.scale.max(1));
            }
        }
        v
    }

    /// Close → final latency at the sequencer, every height, in ns.
    pub fn seq_latencies(&self) -> Vec<u64> {
        self.seq
            .final_at
            .iter()
            .map(|(&h, &t)| t.saturating_sub(h * self.block_ns) / self.scale.max(1))
            .collect()
    }
}

/// The key of voter `i` (fixed per index so runs compare).
pub fn voter_key(i: usize) -> PrivateKey {
    vyrn_consensus::private_key(&[0x40 + i as u8; 32])
}

/// The voter set of an `n`-voter simulated home (keys [`voter_key`], quorum of N3f1), as an
/// auditor checking its certificates builds it.
pub fn sim_voters(n: usize) -> Voters {
    let raw: Vec<[u8; 32]> = (0..n)
        .map(|i| {
            let mut b = [0u8; 32];
            b.copy_from_slice(voter_key(i).public_key().as_ref());
            b
        })
        .collect();
    let q = <commonware_utils::N3f1 as commonware_utils::Faults>::quorum(n);
    Voters::new(EPOCH, &raw, q as u8).expect("the simulated voter set is valid")
}

/// The scripted sequencer's key.
pub fn seq_key() -> ed25519_dalek::SigningKey {
    ed25519_dalek::SigningKey::from_bytes(&[0x07; 32])
}

/// The scripted chain: `blocks` signed headers chained by `prev`, one step each.
pub fn chain(blocks: u64) -> Vec<(BlockHeader, Hash)> {
    let key = seq_key();
    let mut prev = [0u8; 32];
    let mut out = Vec::with_capacity(blocks as usize);
    for h in 1..=blocks {
        let mut hdr = BlockHeader {
            height: h,
            epoch: EPOCH,
            book: 1,
            first_step: h,
            last_step: h,
            prev,
            order_root: *blake3::hash(&h.to_le_bytes()).as_bytes(),
            data_root: *blake3::hash(&(h + 1).to_le_bytes()).as_bytes(),
            seq_sig: [0; 64],
        };
        hdr.sign(&key);
        prev = hdr.header_hash();
        out.push((hdr, prev));
    }
    out
}

/// A voter's ledger over the scripted chain (07 §6.4 modelled by arrival times).
#[derive(Debug)]
pub struct SimLedger {
    chain: Arc<Vec<(BlockHeader, Hash)>>,
    spec: VoterSpec,
    block_ns: u64,
    now: u64,
    seal: Option<seal::SealScript>,
}

impl SimLedger {
    /// Voter `spec`'s ledger over `chain`; `seal`: the sequencer dies after `blocks` and is
    /// sealed (07 §9.4).
    fn new(
        chain: Arc<Vec<(BlockHeader, Hash)>>,
        spec: &VoterSpec,
        block_ns: u64,
        seal: Option<(SealSim, u64)>,
    ) -> Self {
        SimLedger {
            chain,
            spec: spec.clone(),
            block_ns,
            now: 0,
            seal: seal.map(|(s, blocks)| seal::SealScript::new(&s, blocks, block_ns, spec)),
        }
    }
    fn close(&self, h: u64) -> u64 {
        h * self.block_ns
    }
    fn held(&self, h: u64) -> bool {
        h >= 1
            && h as usize <= self.chain.len()
            && self.now >= self.close(h) + self.spec.header_delay.as_nanos() as u64
    }
}

/// The scripted state root `R(h)` (a wrong one for a voter whose replay diverges).
pub fn sim_root(h: u64, wrong: bool) -> Hash {
    let mut x = blake3::Hasher::new();
    x.update(b"sim root");
    x.update(&h.to_le_bytes());
    x.update(&[wrong as u8]);
    *x.finalize().as_bytes()
}

impl Ledger for SimLedger {
    fn root(&mut self, h: u64) -> Option<Hash> {
        let d = self.spec.root_delay?;
        if h == 0 || h as usize > self.chain.len() || self.now < self.close(h) + d.as_nanos() as u64
        {
            return None;
        }
        Some(sim_root(h, self.spec.wrong_root.contains(&h)))
    }
    fn header_hash(&self, h: u64) -> Option<Hash> {
        self.held(h).then(|| self.chain[h as usize - 1].1)
    }
    fn top(&self) -> u64 {
        let d = self.spec.header_delay.as_nanos() as u64;
        (self.now.saturating_sub(d) / self.block_ns).min(self.chain.len() as u64)
    }
    fn check(&mut self, first: u64, last: u64, last_hash: &Hash, now: u64) -> Check {
        self.now = now;
        for h in first..=last {
            if !self.held(h) {
                return Check::Pending { at: h };
            }
            if self.spec.bad_root.contains(&h) {
                return Check::False {
                    at: h,
                    contradiction: true,
                };
            }
            let ready = self.close(h) + self.spec.data_delay.as_nanos() as u64;
            if self.spec.missing.contains(&h) || now < ready {
                return Check::Pending { at: h };
            }
        }
        if self.chain[last as usize - 1].1 != *last_hash {
            return Check::False {
                at: last,
                contradiction: true,
            };
        }
        Check::True
    }
    fn seal(&mut self, parent_last: u64, now: u64) -> vyrn_consensus::SealAsk {
        self.now = now;
        self.seal_ask(parent_last)
    }
    fn check_seal(&mut self, p: &RepProposal, ext: &RepSealExt, now: u64) -> Check {
        self.now = now;
        self.seal_check(p, ext)
    }
}

fn ns(ctx: &deterministic::Context) -> u64 {
    ctx.current()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

/// Where a desk's outputs go, and its loop's timing.
#[derive(Clone)]
struct DeskWire {
    i: usize,
    inbox: SeqInbox,
    cut: Arc<Mutex<Vec<bool>>>,
    seq_link: u64,
    poll: Duration,
    end: u64,
    /// Seal offers between the voters' control ports (07 §9.4), one queue per voter.
    mail: seal::SealMail,
    /// One hop between voters, ns.
    link_ns: u64,
}

/// A voter's desk loop: poll it against its ledger, send its votes and certificates to the
/// sequencer (unless the voter is cut off), and keep its report.
fn spawn_desk(
    ctx: deterministic::Context,
    mut desk: Desk,
    mut ledger: SimLedger,
    report: Arc<Mutex<VoterReport>>,
    w: DeskWire,
) {
    let DeskWire {
        i,
        inbox,
        cut,
        seq_link,
        poll,
        end,
        mail,
        link_ns,
    } = w;
    ctx.spawn(move |ctx| async move {
        let mut fin = 0;
        loop {
            let now = ns(&ctx);
            ledger.now = now;
            seal::deliver(&mail, i, now, &mut desk);
            desk.poll(now, &mut ledger);
            let is_cut = cut.lock().map(|c| c[i]).unwrap_or(false);
            {
                let mut r = report.lock().expect("report lock");
                desk.drain_out(|o| match o {
                    DeskOut::Vote(v) => {
                        if !is_cut {
                            if let Ok(mut q) = inbox.lock() {
                                q.push_back((now + seq_link, v.as_cert()));
                            }
                        }
                        r.votes.push(v);
                    }
                    DeskOut::Cert(c) => {
                        if !is_cut {
                            if let Ok(mut q) = inbox.lock() {
                                q.push_back((now + seq_link, c.clone()));
                            }
                        }
                        r.certs.push(c);
                    }
                    DeskOut::Fault { kind, signer, view } => r.faults.push((kind, signer, view)),
                    DeskOut::RootCert(c) => r.root_certs.push(c),
                    DeskOut::RootFault {
                        index,
                        signer,
                        digest,
                    } => r.root_faults.push((index, signer, digest)),
                    DeskOut::Diverge(d) => {
                        r.diverge.get_or_insert((now, d));
                    }
                    DeskOut::SealOffer { proposal, ext } => {
                        if !is_cut {
                            seal::post(&mail, i, now + link_ns, &proposal, &ext);
                        }
                        r.seal_offers.push((proposal, ext));
                    }
                    DeskOut::SealCert { cert, ext } => r.seal_certs.push((now, cert, ext)),
                });
                let f = desk.final_height();
                for h in fin + 1..=f {
                    r.final_at.entry(h).or_insert(now);
                }
                fin = fin.max(f);
                r.final_height = f;
                r.counters = desk.counters();
                if now > end {
                    r.finals = desk.finals().clone();
                }
            }
            if now > end {
                break;
            }
            ctx.sleep(poll).await;
        }
    });
}

/// Messages from voters to the sequencer, with their delivery time.
type SeqInbox = Arc<Mutex<VecDeque<(u64, RepFinalityCert)>>>;

/// Run the simulation.
pub fn run(cfg: SimConfig) -> SimReport {
    let rt = deterministic::Config::new()
        .with_seed(cfg.seed)
        .with_cycle(cfg.cycle)
        .with_timeout(Some(Duration::from_secs(3600)));
    deterministic::Runner::new(rt).start(|context| async move { home(context, cfg).await })
}

async fn home(context: deterministic::Context, cfg: SimConfig) -> SimReport {
    let n = cfg.voters.len();
    let keys: Vec<PrivateKey> = (0..n).map(voter_key).collect();
    let raw: Vec<[u8; 32]> = keys
        .iter()
        .map(|k| {
            let mut b = [0u8; 32];
            b.copy_from_slice(k.public_key().as_ref());
            b
        })
        .collect();
    let q = <commonware_utils::N3f1 as commonware_utils::Faults>::quorum(n);
    let voters = Voters::new(EPOCH, &raw, q as u8).expect("the simulated voter set is valid");
    let block_ns = cfg.block.as_nanos() as u64;
    let chain = Arc::new(chain(cfg.blocks));
    let end = cfg.blocks * block_ns + cfg.tail.as_nanos() as u64;
    let genesis = vyrn_consensus::genesis_digest(EPOCH, 0, &[0; 32]);
    let script = Script {
        #[cfg(feature = "mocks")]
        scenario: cfg.twins_script.clone(),
        n,
    };

    let net_cfg = simulated::Config {
        max_size: vyrn_consensus::engine::max_message_size(n as u32),
        max_peers_per_set: std::num::NonZeroUsize::new(n).unwrap_or(NZUsize!(4)),
        disconnect_on_block: true,
        tracked_peer_sets: NZUsize!(1),
    };
    let (network, oracle) = Network::new_with_peers(
        context.child("network"),
        net_cfg,
        voters.set().iter().cloned(),
    )
    .await;
    network.start();
    let link = Link {
        latency: cfg.link,
        jitter: cfg.jitter,
        success_rate: Probability::from_f64(cfg.success)
            .unwrap_or(commonware_utils::probability!(1.0)),
    };
    for a in 0..n {
        for b in 0..n {
            if a != b {
                let _ = oracle
                    .add_link(keys[a].public_key(), keys[b].public_key(), link.clone())
                    .await;
            }
        }
    }

    let inbox: SeqInbox = Arc::new(Mutex::new(VecDeque::new()));
    let mail: seal::SealMail = Arc::new(Mutex::new(vec![VecDeque::new(); n]));
    let cut: Arc<Mutex<Vec<bool>>> = Arc::new(Mutex::new(vec![false; n]));
    let mut reports: Vec<Option<Arc<Mutex<VoterReport>>>> = Vec::with_capacity(n);
    let mut twin_reports: Vec<(usize, Vec<Arc<Mutex<VoterReport>>>)> = Vec::new();
    // Per peer per channel: about three messages a view at up to a few thousand views a second.
    let quota = Quota::per_second(NZU32!(10_000));
    for (i, spec) in cfg.voters.iter().enumerate() {
        let ctx = context.child("voter").with_attribute("index", i);
        let control = oracle.control(keys[i].public_key());
        let votes = control
            .register(CHANNEL_VOTES, quota)
            .await
            .expect("register");
        let certs = control
            .register(CHANNEL_CERTS, quota)
            .await
            .expect("register");
        let resolver = control
            .register(CHANNEL_RESOLVER, quota)
            .await
            .expect("register");
        let roots_net = match cfg.roots {
            Some(_) => Some(
                control
                    .register(vyrn_consensus::roots::CHANNEL_ROOTS, quota)
                    .await
                    .expect("register"),
            ),
            None => None,
        };
        let scheme = voters.signer(keys[i].clone()).expect("a voter of the set");
        if spec.role == Role::Twins {
            let split = spec.twins.clone().unwrap_or(TwinSplit {
                primary: (0..n).filter(|&j| j != i).collect(),
                secondary: Vec::new(),
                heal: None,
            });
            let healed = Arc::new(std::sync::atomic::AtomicBool::new(false));
            if let Some(t) = split.heal {
                let h = healed.clone();
                ctx.child("heal").spawn(move |ctx| async move {
                    ctx.sleep(t).await;
                    h.store(true, std::sync::atomic::Ordering::Relaxed);
                });
            }
            let pks = |v: &[usize]| -> Vec<vyrn_consensus::PublicKey> {
                v.iter().map(|&j| keys[j].public_key()).collect()
            };
            // A half sends only to its own peers (of the recipients the engine named), and
            // hears only from them: the fixed split until it heals, or a Twins script's sets
            // for each message's view.
            let route = TwinRoute {
                primary: Arc::new(pks(&split.primary)),
                secondary: Arc::new(pks(&split.secondary)),
                healed,
                #[cfg(feature = "mocks")]
                script: script.route(&voters),
                certs: false,
            };
            let certs_route = TwinRoute {
                certs: true,
                ..route.clone()
            };
            // Certificate fetches are never split by a script (their view is not on the wire).
            let resolver_route = TwinRoute {
                #[cfg(feature = "mocks")]
                script: None,
                ..route.clone()
            };
            let (vs_p, vs_s) = votes.0.split_with(route.forwarder());
            let (vr_p, vr_s) = votes.1.split_with(ctx.child("split_votes"), route.router());
            let (cs_p, cs_s) = certs.0.split_with(certs_route.forwarder());
            let (cr_p, cr_s) = certs
                .1
                .split_with(ctx.child("split_certs"), certs_route.router());
            let (rs_p, rs_s) = resolver.0.split_with(resolver_route.forwarder());
            let (rr_p, rr_s) = resolver
                .1
                .split_with(ctx.child("split_resolver"), resolver_route.router());
            let me = voters.index_of(&keys[i].public_key()).unwrap_or(i as u8);
            let mut halves = Vec::new();
            let wire = DeskWire {
                i,
                inbox: inbox.clone(),
                cut: cut.clone(),
                seq_link: cfg.seq_link.as_nanos() as u64,
                poll: cfg.poll,
                end,
                mail: mail.clone(),
                link_ns: cfg.link.as_nanos() as u64,
            };
            let mut dcfg = DeskConfig::new(me, EPOCH, 0, genesis);
            dcfg.verify_wait_ns = vyrn_wire::consts::REP_VERIFY_WAIT_MS * 1_000_000;
            // Each half is the production voter on its own; only the network makes them twins.
            let (desk_p, link_p) = Desk::new(dcfg.clone(), voters.clone());
            let (desk_s, link_s) = Desk::new(dcfg, voters.clone());
            let half_params = |half: &str| EngineParams {
                epoch: EPOCH,
                delta: cfg.delta,
                partition: format!(
                    "{}-twin-{half}",
                    EngineParams::partition_for("sim", EPOCH, i as u8)
                ),
                genesis,
                floor: None,
            };
            start_engine(
                ctx.child("twin_primary"),
                (
                    scheme.clone(),
                    control.clone(),
                    App::new(link_p, voters.clone(), me),
                    &half_params("primary"),
                ),
                &script,
                (vs_p, vr_p),
                (cs_p, cr_p),
                (rs_p, rr_p),
            );
            start_engine(
                ctx.child("twin_secondary"),
                (
                    scheme,
                    control.clone(),
                    App::new(link_s, voters.clone(), me),
                    &half_params("secondary"),
                ),
                &script,
                (vs_s, vr_s),
                (cs_s, cr_s),
                (rs_s, rr_s),
            );
            for (label, desk) in [("primary", desk_p), ("secondary", desk_s)] {
                let report = Arc::new(Mutex::new(VoterReport::default()));
                halves.push(report.clone());
                let ledger = SimLedger::new(chain.clone(), spec, block_ns, None);
                spawn_desk(ctx.child(label), desk, ledger, report, wire.clone());
            }
            twin_reports.push((i, halves));
            reports.push(None);
            continue;
        }
        if spec.role != Role::Honest {
            byzantine(ctx, spec.role, scheme, (votes, certs, resolver));
            reports.push(None);
            continue;
        }
        let me = voters.index_of(&keys[i].public_key()).unwrap_or(i as u8);
        let mut dcfg = DeskConfig::new(me, EPOCH, 0, genesis);
        dcfg.verify_wait_ns = vyrn_wire::consts::REP_VERIFY_WAIT_MS * 1_000_000;
        if let Some(r) = cfg.roots {
            dcfg.root_blocks = r.root_blocks;
            dcfg.root_gate_blocks = r.gate_blocks;
            dcfg.root_timeout_ns = r.timeout.as_nanos() as u64;
        }
        let (mut desk, link) = Desk::new(dcfg, voters.clone());
        if let (Some(_), Some((tx, rx))) = (cfg.roots, roots_net) {
            let rs = vyrn_consensus::roots::root_signer(&voters, keys[i].clone())
                .expect("a voter of the set");
            desk.set_root_signer(rs.clone());
            let rapp = vyrn_consensus::roots::RootsApp::new(link.clone(), voters.clone());
            let rx = rapp.tap(rx);
            let rcfg = vyrn_consensus::roots::config(
                rs,
                control.clone(),
                rapp,
                EPOCH,
                format!("sim-roots-{i}"),
                cfg.delta * 20,
            );
            commonware_consensus::aggregation::Engine::new(ctx.child("roots"), rcfg)
                .start((tx, rx));
        }
        let app = App::new(link, voters.clone(), me);
        let params = EngineParams {
            epoch: EPOCH,
            delta: cfg.delta,
            partition: EngineParams::partition_for("sim", EPOCH, i as u8),
            genesis,
            floor: None,
        };
        start_engine(
            ctx.child("engine"),
            (scheme, control.clone(), app, &params),
            &script,
            votes,
            certs,
            resolver,
        );
        let report = Arc::new(Mutex::new(VoterReport::default()));
        reports.push(Some(report.clone()));
        let seal = cfg.seal.map(|s| (s, cfg.blocks));
        let ledger = SimLedger::new(chain.clone(), spec, block_ns, seal);
        spawn_desk(
            ctx.child("desk"),
            desk,
            ledger,
            report,
            DeskWire {
                i,
                inbox: inbox.clone(),
                cut: cut.clone(),
                seq_link: cfg.seq_link.as_nanos() as u64,
                poll: cfg.poll,
                end,
                mail: mail.clone(),
                link_ns: cfg.link.as_nanos() as u64,
            },
        );
    }

    // Outages: a voter's links removed both ways for a while.
    for o in cfg.outages.clone() {
        let (oracle, keys, cut, link) = (oracle.clone(), keys.clone(), cut.clone(), link.clone());
        context.child("outage").spawn(move |ctx| async move {
            ctx.sleep(o.from).await;
            if let Ok(mut c) = cut.lock() {
                c[o.voter] = true;
            }
            for j in 0..keys.len() {
                if j != o.voter {
                    let _ = oracle
                        .remove_link(keys[o.voter].public_key(), keys[j].public_key())
                        .await;
                    let _ = oracle
                        .remove_link(keys[j].public_key(), keys[o.voter].public_key())
                        .await;
                }
            }
            ctx.sleep(o.to.saturating_sub(o.from)).await;
            for j in 0..keys.len() {
                if j != o.voter {
                    let _ = oracle
                        .add_link(
                            keys[o.voter].public_key(),
                            keys[j].public_key(),
                            link.clone(),
                        )
                        .await;
                    let _ = oracle
                        .add_link(
                            keys[j].public_key(),
                            keys[o.voter].public_key(),
                            link.clone(),
                        )
                        .await;
                }
            }
            if let Ok(mut c) = cut.lock() {
                c[o.voter] = false;
            }
        });
    }

    // The sequencer: the production finality listener, the gate of 07 §6.8 modelled.
    let mut listener = FinalityListener::new(voters.clone(), 0);
    let mut seq = SeqReport::default();
    let mut halted = false;
    loop {
        let now = ns(&context);
        let due: Vec<RepFinalityCert> = {
            let mut q = inbox.lock().expect("inbox lock");
            let mut d = Vec::new();
            while q.front().is_some_and(|(t, _)| *t <= now) {
                if let Some((_, c)) = q.pop_front() {
                    d.push(c);
                }
            }
            d
        };
        for c in due {
            let before = listener.final_height();
            listener.on_cert(&c);
            for h in before + 1..=listener.final_height() {
                seq.final_at.entry(h).or_insert(now);
            }
        }
        let closed = (now / block_ns).min(cfg.blocks);
        let lag = closed.saturating_sub(listener.final_height());
        seq.max_lag = seq.max_lag.max(lag);
        if !halted && lag > FIN_GATE_BLOCKS {
            halted = true;
            seq.gate.push((now, true));
        } else if halted && lag <= REP_GATE_RESUME_BLOCKS {
            halted = false;
            seq.gate.push((now, false));
        }
        if now > end + cfg.poll.as_nanos() as u64 * 4 {
            break;
        }
        context.sleep(cfg.poll).await;
    }
    seq.final_height = listener.final_height();
    seq.counters = listener.counters();
    let voters_out = reports
        .into_iter()
        .map(|r| r.map(|r| r.lock().map(|g| g.clone()).unwrap_or_default()))
        .collect();
    let mut hashes = vec![[0u8; 32]];
    hashes.extend(chain.iter().map(|(_, h)| *h));
    let take = |r: &Arc<Mutex<VoterReport>>| r.lock().map(|g| g.clone()).unwrap_or_default();
    let twins = twin_reports
        .iter()
        .map(|(i, h)| (*i, take(&h[0]), take(&h[1])))
        .collect();
    SimReport {
        voters: voters_out,
        twins,
        seq,
        auditor: context.auditor().state(),
        chain: hashes,
        block_ns,
        scale: cfg.scale as u64,
    }
}

type Channel<S, R> = (S, R);

/// A voter's sending end on one of the three Simplex networks.
trait NetSender: commonware_p2p::Sender<PublicKey = vyrn_consensus::PublicKey> {}
impl<T: commonware_p2p::Sender<PublicKey = vyrn_consensus::PublicKey>> NetSender for T {}

/// A voter's receiving end on one of the three Simplex networks.
trait NetReceiver: commonware_p2p::Receiver<PublicKey = vyrn_consensus::PublicKey> {}
impl<T: commonware_p2p::Receiver<PublicKey = vyrn_consensus::PublicKey>> NetReceiver for T {}

/// The leader elector of every engine of a run: round-robin (production), or a Twins script's
/// leaders for its prefix and round-robin after ([`SimConfig::twins_script`]).
#[derive(Clone)]
struct Script {
    #[cfg(feature = "mocks")]
    scenario: Option<commonware_consensus::simplex::mocks::twins::Scenario>,
    n: usize,
}

impl Script {
    /// How a twin's halves split votes and certificates under the script, if there is one.
    #[cfg(feature = "mocks")]
    fn route(&self, voters: &Voters) -> Option<ScriptRoute> {
        use commonware_consensus::simplex::elector::RoundRobin;
        let scenario = self.scenario.clone()?;
        // The term structure as the engine derives it: from the built fallback elector.
        let built = <RoundRobin<commonware_cryptography::Sha256> as commonware_consensus::simplex::elector::Config<vyrn_consensus::Scheme>>::build(
            RoundRobin::default(),
            voters.set(),
        );
        let term =
            commonware_consensus::simplex::elector::Elector::<vyrn_consensus::Scheme>::terms(
                &built,
            )
            .length();
        Some(ScriptRoute {
            scenario,
            term,
            parts: voters.set().iter().cloned().collect(),
            scheme: voters.verifier().clone(),
        })
    }
}

/// A Twins script's routing: the recipient sets of each half for the view a message belongs to.
#[cfg(feature = "mocks")]
#[derive(Clone)]
struct ScriptRoute {
    scenario: commonware_consensus::simplex::mocks::twins::Scenario,
    term: commonware_consensus::types::TermLength,
    /// The participants in commonware's order (the scenario's indices).
    parts: Arc<[vyrn_consensus::PublicKey]>,
    scheme: vyrn_consensus::Scheme,
}

#[cfg(feature = "mocks")]
impl ScriptRoute {
    fn sets(&self, msg: &commonware_runtime::IoBuf, certs: bool) -> Sets {
        use commonware_codec::{Decode as _, DecodeExt as _};
        use commonware_consensus::simplex::types::{Certificate, Vote};
        use commonware_consensus::Viewable as _;
        use commonware_cryptography::certificate::Verifier as _;
        let view = if certs {
            Certificate::<vyrn_consensus::Scheme, vyrn_consensus::Digest>::decode_cfg(
                msg.clone(),
                &self.scheme.certificate_codec_config(),
            )
            .ok()
            .map(|c| c.view())
        } else {
            Vote::<vyrn_consensus::Scheme, vyrn_consensus::Digest>::decode(msg.clone())
                .ok()
                .map(|v| v.view())
        };
        match view {
            Some(v) => {
                let (p, s) = self.scenario.partitions(v, self.term, &self.parts);
                Sets::Split(Arc::new(p), Arc::new(s))
            }
            None => Sets::Drop,
        }
    }
}

/// Who a twin's halves exchange a message with.
enum Sets {
    /// Everyone (the split healed).
    All,
    /// Primary's peers, secondary's peers.
    Split(
        Arc<Vec<vyrn_consensus::PublicKey>>,
        Arc<Vec<vyrn_consensus::PublicKey>>,
    ),
    /// No one (a message that does not decode; only a script decodes).
    #[cfg_attr(not(feature = "mocks"), allow(dead_code))]
    Drop,
}

/// The network split of a [`Role::Twins`] voter, per channel.
#[derive(Clone)]
struct TwinRoute {
    primary: Arc<Vec<vyrn_consensus::PublicKey>>,
    secondary: Arc<Vec<vyrn_consensus::PublicKey>>,
    healed: Arc<std::sync::atomic::AtomicBool>,
    #[cfg(feature = "mocks")]
    script: Option<ScriptRoute>,
    /// The certificates channel (decoded as certificates under a script).
    #[cfg_attr(not(feature = "mocks"), allow(dead_code))]
    certs: bool,
}

impl TwinRoute {
    fn sets(&self, msg: &commonware_runtime::IoBuf) -> Sets {
        #[cfg(feature = "mocks")]
        if let Some(s) = &self.script {
            return s.sets(msg, self.certs);
        }
        let _ = msg;
        if self.healed.load(std::sync::atomic::Ordering::Relaxed) {
            return Sets::All;
        }
        Sets::Split(self.primary.clone(), self.secondary.clone())
    }

    /// A half sends only to its own peers, of the recipients the engine named.
    fn forwarder(
        &self,
    ) -> impl Fn(
        simulated::SplitOrigin,
        &Recipients<vyrn_consensus::PublicKey>,
        &commonware_runtime::IoBuf,
    ) -> Option<Recipients<vyrn_consensus::PublicKey>>
           + Send
           + Sync
           + Clone
           + 'static {
        let r = self.clone();
        move |origin, to, msg| {
            let (p, s) = match r.sets(msg) {
                Sets::All => return Some(to.clone()),
                Sets::Drop => return None,
                Sets::Split(p, s) => (p, s),
            };
            let mine = match origin {
                simulated::SplitOrigin::Primary => &p,
                simulated::SplitOrigin::Secondary => &s,
            };
            let v: Vec<_> = match to {
                Recipients::All => mine.to_vec(),
                Recipients::Some(v) => v.iter().filter(|p| mine.contains(p)).cloned().collect(),
                Recipients::One(p) => mine.iter().filter(|m| *m == p).cloned().collect(),
            };
            (!v.is_empty()).then_some(Recipients::Some(v))
        }
    }

    /// A half hears only from its own peers.
    fn router(
        &self,
    ) -> impl Fn(&(vyrn_consensus::PublicKey, commonware_runtime::IoBuf)) -> simulated::SplitTarget
           + Send
           + Sync
           + 'static {
        let r = self.clone();
        move |(from, msg)| match r.sets(msg) {
            Sets::All => simulated::SplitTarget::Both,
            Sets::Drop => simulated::SplitTarget::None,
            Sets::Split(p, s) => match (p.contains(from), s.contains(from)) {
                (true, true) => simulated::SplitTarget::Both,
                (true, false) => simulated::SplitTarget::Primary,
                (false, true) => simulated::SplitTarget::Secondary,
                (false, false) => simulated::SplitTarget::None,
            },
        }
    }
}

/// Start one voter's Simplex engine with the run's elector.
fn start_engine<B, S1, R1, S2, R2, S3, R3>(
    ctx: deterministic::Context,
    (scheme, blocker, app, params): (vyrn_consensus::Scheme, B, App, &EngineParams),
    script: &Script,
    votes: Channel<S1, R1>,
    certs: Channel<S2, R2>,
    resolver: Channel<S3, R3>,
) where
    B: commonware_p2p::Blocker<PublicKey = vyrn_consensus::PublicKey>,
    S1: NetSender,
    R1: NetReceiver,
    S2: NetSender,
    R2: NetReceiver,
    S3: NetSender,
    R3: NetReceiver,
{
    #[cfg(feature = "mocks")]
    if let Some(sc) = &script.scenario {
        let elector = commonware_consensus::simplex::mocks::twins::Elector::new(
            commonware_consensus::simplex::elector::RoundRobin::<commonware_cryptography::Sha256>::default(),
            sc,
            script.n,
        );
        let ecfg = vyrn_consensus::engine::config_with(scheme, blocker, app, params, elector);
        simplex::Engine::new(ctx, ecfg).start(votes, certs, resolver);
        return;
    }
    let _ = script.n;
    let ecfg = vyrn_consensus::engine::config(scheme, blocker, app, params);
    simplex::Engine::new(ctx, ecfg).start(votes, certs, resolver);
}

#[cfg(feature = "mocks")]
fn byzantine<S1, R1, S2, R2, S3, R3>(
    ctx: deterministic::Context,
    role: Role,
    scheme: vyrn_consensus::Scheme,
    (votes, certs, resolver): (Channel<S1, R1>, Channel<S2, R2>, Channel<S3, R3>),
) where
    S1: NetSender,
    R1: NetReceiver,
    S2: NetSender,
    R2: NetReceiver,
    S3: NetSender,
    R3: NetReceiver,
{
    use commonware_consensus::simplex::elector::RoundRobin;
    use commonware_consensus::simplex::mocks::{conflicter, equivocator, nuller, relay};
    use commonware_cryptography::{Blake3, Sha256};
    match role {
        Role::Honest | Role::Twins => {}
        Role::Conflicter => {
            ctx.child("idle").spawn(move |_| async move {
                let _keep = (certs, resolver);
                std::future::pending::<()>().await
            });
            conflicter::Conflicter::<_, _, Blake3>::new(
                ctx.child("conflicter"),
                conflicter::Config { scheme },
            )
            .start(votes);
        }
        Role::Nuller => {
            ctx.child("idle").spawn(move |_| async move {
                let _keep = (certs, resolver);
                std::future::pending::<()>().await
            });
            nuller::Nuller::<_, _, Blake3>::new(ctx.child("nuller"), nuller::Config { scheme })
                .start(votes);
        }
        Role::Equivocator => {
            ctx.child("idle").spawn(move |_| async move {
                let _keep = resolver;
                std::future::pending::<()>().await
            });
            equivocator::Equivocator::<_, _, RoundRobin<Sha256>, Blake3>::new(
                ctx.child("equivocator"),
                equivocator::Config {
                    scheme,
                    elector: RoundRobin::<Sha256>::default(),
                    epoch: Epoch::new(EPOCH as u64),
                    relay: Arc::new(relay::Relay::default()),
                },
            )
            .start(votes, certs);
        }
    }
}

#[cfg(not(feature = "mocks"))]
fn byzantine<S1, R1, S2, R2, S3, R3>(
    ctx: deterministic::Context,
    _role: Role,
    _scheme: vyrn_consensus::Scheme,
    channels: (Channel<S1, R1>, Channel<S2, R2>, Channel<S3, R3>),
) where
    S1: Send + 'static,
    R1: Send + 'static,
    S2: Send + 'static,
    R2: Send + 'static,
    S3: Send + 'static,
    R3: Send + 'static,
{
    // Without the mocks a Byzantine role is a silent voter: it holds its channels and says
    // nothing (a crashed voter).
    ctx.child("silent").spawn(move |_| async move {
        let _keep = channels;
        std::future::pending::<()>().await
    });
}
