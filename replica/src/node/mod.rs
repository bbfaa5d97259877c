//! The replica as a process on the UDP backend (07 §7.2): [`ReplicaCore`] on
//! its ports, the peer frame store, replay into a running digest, and the interim finality voter.
//!
//! Sockets (addresses from the home's file, [`HomeConfig`]):
//!
//! | socket | bound at | receives | sends |
//! |---|---|---|---|
//! | path A, path B | the paths' multicast groups at `path_port`, `path_port + 1` | ORDER/HASH/HEADER frames (and the sequencer's retransmissions) | — |
//! | control | this voter's `ctrl_addr` | from the sequencer's control port: NackTooOld, HashList, REP_DurableMark; from peers' `ctrl_addr`: RepairReq, peer-repaired frames | RepAck, NACK, HashListReq, FinalizeVote to the sequencer; RepairReq and repaired frames to peers |
//! | data | this voter's `data_addr` | DATA, DATA_HB, FETCH_RESP from each data box's socket for this voter | DataFetch to it |
//!
//! Addresses are the authentication of v1 (missing-chapters §2, as on the sequencer): a control
//! datagram from anywhere but the sequencer's control port or a peer's `ctrl_addr`, or a data
//! datagram from anywhere but a configured data box's socket for this voter, is counted
//! (`unknown_src`) and dropped unread.
//!
//! [`Node::poll`] is the tile's non-blocking step: every socket drained once (bounded batches),
//! the core's clock, the voter, then the queued messages sent by `sendmmsg` per socket. The node
//! is one cold tile on the runner (`vyrn_tile`), whose thread blocks in `ppoll` on the four
//! sockets between rounds ([`NODE_WAIT`]: at most the next timer away): a replica on a shared dev
//! core costs nothing while the home is idle.
//!
//! **Interim finality voter** (`InterimVoter`, feature `lab`; named as interim until the consensus issue
//! brings Simplex): for every contiguous range of headers this replica holds it asks the core's
//! verdict (07 §6.4, INV-REP-4: pending while anything is missing, false on a contradiction or
//! after REP_VERIFY_WAIT_MS) and, only on `True`, signs the range's `RepProposal` digest with its
//! own vote key and sends the signature to the sequencer's control port as a `FinalizeVote`
//! (07 §6.8). It never votes past a refused height. Every other voter function here is the
//! replica's own.
//!
//! Allocation: the outgoing queue is one reused byte arena; no allocation per frame or record
//! once warm, except where the core's pieces say otherwise (`docs/replica.md`).

use std::net::SocketAddr;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ed25519_dalek::SigningKey;
use vyrn_engine::bbo::LaneEvent;
use vyrn_engine::home::EngineSink;
use vyrn_engine::resp::RespOut;
use vyrn_home::HomeConfig;
use vyrn_nic::udp::{UdpConfig, UdpPort};
use vyrn_nic::{Dest, Port, RxBatch, TxPacket};
use vyrn_wire::consts::FRAME_MAGIC;
use vyrn_wire::decoder::BlockRoots;
use vyrn_wire::header::{BlockHeader, Hash};
use vyrn_wire::msg::ctrl::{CtrlMsg, DataFetch, HashListReq, Nack, RepAck, RepairReq};
use vyrn_wire::msg::journal::RepBlockRecord;
use vyrn_wire::msg::seal::{self, LinkKey, Opener, SealErr, Sealer};
use vyrn_wire::msg::PktKey;

use crate::disk::frame_store::FrameStore;
use crate::disk::journal::{Appended, BlockJournal, JournalConfig, RecoveryReport};
use crate::front::core::{Budgets, CoreConfig, ReplicaCore, ReplicaOut};
use crate::front::data::{CopyMismatch, DataAlarm, Source};
use crate::front::data_down::DownStep;
use crate::front::decode::Fault;
use crate::front::order_rx::{RxAlarm, LOCAL_CHANNEL, PEER_CHANNEL, REPAIR_CHANNEL};
use crate::front::verdict::Anchor;
use crate::replay::tile::ReplayTile;
use vyrn_consensus::DeskOut;

/// The multicast groups of paths A and B (07 §3.1), the home's.
pub use vyrn_home::PATH_GROUPS;
/// Datagrams taken per socket per round.
const RX_BATCH: usize = 64;
/// Datagrams per `sendmmsg`.
const TX_BATCH: usize = 64;
/// Frames a restarted replica takes from its own order journal per substream per poll.
const OWN_BATCH: u64 = 128;

/// How often the order journal's buffered frames are written out, ns.
const ORDER_FLUSH_NS: u64 = 5_000_000;

/// The peer frame store per substream (07 §4.10: REP_PEER_RING_MS of frames; a dev home's
/// rate fits in 16 MiB; pages are touched only as frames come).
const STORE_BYTES: usize = 16 << 20;
/// Blocks kept in the verdict and the data side behind the newest voted and replayed one.
pub const FORGET_LAG: u64 = 64;
/// How long the front's thread ([`NODE_WAIT`]) lets traffic gather after a wake-up: a quarter of a dev home's ack
/// period, so RepAcks and votes leave at most this much later.
pub const BATCH_NS: u64 = 60_000;
/// Longest the loop blocks between rounds: the core's timers (hole wait, acks) are no coarser.
const WAIT_NS: u64 = 50_000;

/// What a replica process is: its home, which voter it is, its key, its budgets.
pub mod catchup;
mod config;
mod counters;
mod ctrl;
mod digest;
mod failover;
pub use failover::FailoverStages;
mod follow;
#[cfg(feature = "lab")]
mod interim;
mod io;
mod journal;
#[cfg(feature = "lab")]
mod lab;
pub mod metrics;
mod tenure;

pub use config::NodeConfig;
pub use counters::NodeCounters;
pub use ctrl::PEER_DATA_MAX_PPS;
use ctrl::{member_links, on_ctrl, per_peer, Tokens};
pub use digest::ReplaySink;
pub use follow::Promotable;
#[cfg(feature = "lab")]
pub use interim::InterimVoter;
use io::{open_sockets, Io, Sock};
pub use journal::{JournalFailure, NodeJournal};
use journal::{NodeSnaps, JOURNAL_PENDING_MAX, SNAPS_PENDING};
pub use tenure::{FollowRefused, Followed};

/// A replica process's state: the core and its sockets.
#[derive(Debug)]
pub struct Node {
    core: ReplicaCore,
    paths: [UdpPort; 2],
    ctrl: UdpPort,
    data: UdpPort,
    rx: RxBatch,
    io: Io,
    /// Test and lab behaviour (feature `lab`): the interim voter, the receive cuts.
    #[cfg(feature = "lab")]
    lab: lab::NodeLab,
    /// The Simplex voter (07 §6.3), in place of the interim one when configured.
    simplex: Option<crate::vote::SimplexVoter>,
    sink: ReplaySink,
    /// Replay's tile, polled in turn with the core (`replay_tile`, before its thread starts).
    tile: Option<ReplayTile<ReplaySink>>,
    /// Replay's tile on its own thread.
    replay_thread: Option<ReplayThread>,
    epoch: u32,
    last_tick: u64,
    /// When the order journal's buffer was last written out ([`ORDER_FLUSH_NS`]).
    last_order_flush: u64,
    /// 07 §7.6: how long a replica that started behind took to reach the final height.
    catchup: catchup::CatchUpClock,
    /// A restarted replica's own order journal, per substream: the next frame to take from it
    /// and the last it held at start (07 §4.10; the network fills the rest).
    own: [(u64, u64); 2],
    /// Frames taken from `own` for one poll (reused).
    own_buf: Vec<u8>,
    own_ends: Vec<usize>,
    /// Held blocks' (height, last_step), oldest first, until they are voted and replayed.
    held: std::collections::VecDeque<(u64, u64)>,
    journal: Option<NodeJournal>,
    /// REP_A_DIVERGE's `Diverge` message and when it last went to the sequencer: repeated
    /// every [`DIVERGE_REPEAT_NS`] (UDP may lose it; the sequencer halts once).
    diverge: Option<(Vec<u8>, u64)>,
    /// The home's sessions (07 §5.7 moves those of a failed data box).
    sessions: Vec<u32>,
    /// 07 §7.5's snapshots (`snapshot_blocks`).
    snaps: Option<NodeSnaps>,
    /// Sequencer failover at this voter (07 §9.1–§9.2).
    failover: Option<failover::NodeFailover>,
    /// The standby's replica: its check of every block, in place of a voter (07 §9.5).
    follower: Option<follow::Follower>,
    /// How many boxes `seq_order` lists (07 §9.5's choice of the next sequencer).
    seq_boxes: usize,
    /// The final seal (07 §9.4): the seal block's height and its `REP_SealExt`.
    sealed: Option<(u64, vyrn_wire::msg::consensus::RepSealExt)>,
    /// The replay error that halted the front (the tile's polls then do nothing).
    failed: Option<vyrn_engine::home::ReplayError>,
    /// Set with `failed`, for whoever supervises the runner.
    halted: Arc<AtomicBool>,
    /// After a final seal: the tenure it names (07 §9.4–§9.5).
    next: tenure::NodeTenure,
}

type ReplayThread = (
    std::sync::Arc<std::sync::atomic::AtomicBool>,
    std::thread::JoinHandle<ReplayTile<ReplaySink>>,
);

/// Payload buffers the replay tile keeps ready (the engine reuses at most 4,096: a few ms of
/// the peak mix resolved and not yet replayed).
const REPLAY_COPIES: usize = 1 << 12;

/// How often a diverged replica repeats its `Diverge` to the sequencer.
const DIVERGE_REPEAT_NS: u64 = 100_000_000;

impl Node {
    /// Open voter `cfg.index`'s sockets and build its core.
    pub fn open(cfg: &NodeConfig) -> Result<Node, String> {
        let h = &cfg.home;
        let me = &member(cfg)?;
        if h.path_port == 0 {
            return Err("the home's file sets no path_port: replica processes join the paths at a fixed port".into());
        }
        let seq_ctrl = SocketAddr::new(std::net::IpAddr::V4(h.box_ip), h.ctrl_port);
        // Every voter but this one (the standby's replica: every voter).
        let (peers, peer_index): (Vec<SocketAddr>, Vec<usize>) = h
            .voters_members
            .iter()
            .filter(|v| v.index != cfg.index)
            .map(|v| (v.ctrl_addr, v.index))
            .unzip();
        // One share of the peer services per peer, and one for the standby's replica after them
        // (07 §9.5).
        let shares = peer_index.len() + usize::from(!cfg.standby && h.standby_replica.is_some());
        // Q of 07 §5.7 and §9.2: n − f with f = ⌊(n − 1)/3⌋.
        let quorum = vyrn_home::quorum(h.voters_members.len()) as u32;
        let boxes = box_addrs(cfg);
        let (links, opener) = member_links(cfg, seq_ctrl, &boxes)?;
        let (paths, ctrl, data) = open_sockets(cfg, me)?;
        let cc = CoreConfig {
            engine: h.engine.clone(),
            epoch: h.epoch,
            tenure: 0,
            sender: 0,
            seq_key: h.seq_pub,
            n_boxes: h.databoxes.len().max(1) as u8,
            n_peers: peers.len(),
            anchor: Anchor::default(),
        };
        let (mut core, mut tile) = new_core(cfg, cc)?;
        core.set_budgets(&cfg.budgets);
        // Security review F11: the bound on frames held behind holes, from the home file
        // (`[voter.N] held_mib`; `vyrn replica --held-mib` overrides it).
        if let Some(m) = me.held_mib {
            core.order_rx_mut().set_held_bytes_max((m as usize) << 20);
        }
        core.prefault();
        // 07 §7.4: replay takes R(h) at every root height for the root votes.
        let root_blocks = cfg
            .simplex
            .as_ref()
            .and_then(|s| s.roots)
            .map(|r| r.root_blocks);
        if let Some(rb) = root_blocks {
            core.set_root_blocks(rb, &Anchor::default());
        }
        // 07 §7.5: snapshots at this voter's heights, written to the first journal drive.
        let mut snaps = NodeSnaps::open(cfg, root_blocks, &mut core, tile.as_mut())?;
        // 07 §8.2: the block journal, recovered and verified before anything is received.
        let journal = NodeJournal::open(cfg, me)?;
        let name = match cfg.standby {
            true => "standby replica".to_string(),
            false => format!("replica {}", cfg.index),
        };
        let mut sink = ReplaySink::for_node(cfg, tile.is_some());
        let loaded = match snaps.as_mut() {
            Some(sn) => sn.audit_and_load(
                cfg,
                &name,
                journal::ReplayStart {
                    core: &mut core,
                    tile: tile.as_mut(),
                    sink: &mut sink,
                    root_blocks,
                    epoch: h.epoch,
                },
            ),
            None => None,
        };
        for s in &h.engine.sessions {
            core.data_mut().set_home(s.session, h.data_home(s.session));
        }
        let (own, store) = frame_store(cfg, &mut core)?;
        let (voters, simplex) = start_voting(cfg, journal.as_ref().map_or(0, |j| j.held_through))?;
        Ok(Node {
            core,
            paths,
            ctrl,
            data,
            rx: RxBatch::new(RX_BATCH, 9216),
            io: Io {
                arena: Vec::with_capacity(1 << 16),
                msgs: Vec::with_capacity(256),
                seq_ctrl,
                seq_pub: h.seq_pub,
                standby_ctrl: h.standby_ctrl,
                peers,
                boxes,
                store,
                headers: Vec::with_capacity(64),
                keep: journal.is_some(),
                pending_hdr: Default::default(),
                pending_order: Default::default(),
                now: 0,
                c: NodeCounters::default(),
                name,
                suspect_since: u64::MAX,
                fo: failover::FailoverIo::new(reporter(cfg)),
                down: crate::front::data_down::DataDown::new(
                    h.databoxes.len() as u8,
                    quorum,
                    cfg.index,
                ),
                peer_index,
                moved: vec![Vec::new(); h.databoxes.len()],
                peer_data_tokens: Tokens::new(PEER_DATA_MAX_PPS, 4096),
                peer_data_share: per_peer(shares, PEER_DATA_MAX_PPS, 4096),
                peer_rtx_share: per_peer(shares, vyrn_wire::consts::REP_PEER_RTX_MAX_FPS, 4096),
                sealer: Sealer::new(sealed_from(cfg), h.epoch, seal::start_seq()),
                standby: cfg.standby,
                blackhole: None,
                standby_replica: (!cfg.standby)
                    .then(|| h.standby_replica.map(|r| r.ctrl_addr))
                    .flatten(),
                links,
                opener,
            },
            #[cfg(feature = "lab")]
            lab: lab::NodeLab::new(cfg, voters.as_ref()),
            simplex,
            sink,
            tile,
            replay_thread: None,
            epoch: h.epoch,
            last_tick: 0,
            last_order_flush: 0,
            catchup: catchup::CatchUpClock::new(h.block_ns).after_snapshot(loaded),
            own,
            own_buf: Vec::new(),
            own_ends: Vec::new(),
            held: Default::default(),
            journal,
            diverge: None,
            sessions: h.engine.sessions.iter().map(|s| s.session).collect(),
            snaps,
            failover: Some(failover::NodeFailover::new(cfg, quorum)),
            follower: cfg
                .standby
                .then(|| follow::Follower::new(cfg.budgets.promote_history_ns)),
            seq_boxes: h.seq_boxes(),
            sealed: None,
            failed: None,
            halted: Arc::new(AtomicBool::new(false)),
            next: tenure::NodeTenure::new(cfg, voters),
        })
    }

    /// The four sockets, for a loop that blocks until one is readable.
    pub fn fds(&self) -> [RawFd; 4] {
        [
            self.paths[0].socket().as_raw_fd(),
            self.paths[1].socket().as_raw_fd(),
            self.ctrl.socket().as_raw_fd(),
            self.data.socket().as_raw_fd(),
        ]
    }

    /// The core (verdicts, order RX, data side, replay lag).
    pub fn core(&self) -> &ReplicaCore {
        &self.core
    }

    /// The core, to set its bounds.
    pub fn core_mut(&mut self) -> &mut ReplicaCore {
        &mut self.core
    }

    /// Counters of the process side.
    pub fn counters(&self) -> NodeCounters {
        let mut c = self.io.c;
        if let Some(j) = &self.journal {
            let (n, h, errors) = j.snapshots();
            c.snapshots_written = n;
            c.snapshot_height = h;
            c.snapshot_errors += errors;
        }
        if let Some(Ok(a)) = self.snaps.as_ref().map(|s| &s.found) {
            c.snapshots_refused = a.bad.len() as u64;
        }
        if let Some(s) = &self.snaps {
            c.snapshot_loaded = s.loaded.map_or(0, |(h, _)| h);
            c.snapshots_skipped = s.skipped;
        }
        c
    }

    /// The Simplex voter, if this replica runs one.
    pub fn simplex(&self) -> Option<&crate::vote::SimplexVoter> {
        self.simplex.as_ref()
    }

    /// Every height through this one was checked true by this replica's verdict (voted).
    pub fn voted(&self) -> u64 {
        match (&self.simplex, &self.follower) {
            (Some(v), _) => v.voted,
            (None, Some(f)) => f.checked,
            (None, None) => self.interim_voted(),
        }
    }

    /// The final seal this voter holds (07 §9.4): the seal block's height and its
    /// `REP_SealExt` (`next_seq`: the box named to take over, 0xFF for none).
    pub fn sealed(&self) -> Option<&(u64, vyrn_wire::msg::consensus::RepSealExt)> {
        self.sealed.as_ref()
    }

    /// The standby's replica (07 §9.5): the height through which every block checks, whether
    /// it is promotable now (and why not), and whether REP_A_STANDBY is raised. `None` on a
    /// voter.
    pub fn standby_state(&self) -> Option<(u64, Promotable, bool)> {
        let f = self.follower.as_ref()?;
        let lag_us = self.core.replay_lag_time().p50 / 1000;
        Some((
            f.checked,
            f.promotable(self.io.now, lag_us),
            f.alarm_raised(),
        ))
    }

    /// The recovery service's store (07 §8.5) when this replica holds the role.
    pub fn rsp_store(&self) -> Option<&crate::recovery::RspStore> {
        self.sink.rsp.as_deref()
    }

    /// Replay's digest and counts: replay's own when it runs on its tile (as the tile last
    /// reported it while its thread runs).
    pub fn replay(&self) -> ReplaySink {
        if let Some(t) = &self.tile {
            // With the engine split, the lanes' sinks hold the answers: the merged report.
            return t.report().into();
        }
        match self.core.replay_tx() {
            Some(tx) => tx.progress().sink.into(),
            None => self.sink.clone(),
        }
    }

    /// Move replay's tile to its own thread (07 §7.2's replay cores), pinned to `core` if
    /// given; `clock` must be the clock `poll` is given (replay lag is measured across the two).
    /// Nothing to do when replay runs inline or already has its thread.
    pub fn start_replay_thread(
        &mut self,
        clock: impl Fn() -> u64 + Send + 'static,
        core: Option<usize>,
    ) -> std::io::Result<()> {
        let Some(tile) = self.tile.take() else {
            return Ok(());
        };
        let idle = if core.is_some() {
            crate::replay::tile::Idle::Spin
        } else {
            crate::replay::tile::Idle::Backoff
        };
        self.replay_thread = Some(crate::replay::tile::spawn(tile, clock, core, idle)?);
        Ok(())
    }

    /// Stop replay's thread, if it runs, and take its tile back (what it replayed stays).
    pub fn stop_replay_thread(&mut self) {
        if let Some((stop, h)) = self.replay_thread.take() {
            // What the front staged behind a full ring goes in first (the thread drains it).
            let t0 = Instant::now();
            while !self.core.flush_replay() && t0.elapsed() < Duration::from_secs(5) {
                std::thread::yield_now();
            }
            stop.store(true, std::sync::atomic::Ordering::Release);
            if let Ok(t) = h.join() {
                self.tile = Some(t);
            }
        }
    }

    /// A restarted replica takes the frames its own order journal held at start before asking
    /// anyone: [`OWN_BATCH`] per substream per poll, through order RX as a repair (no path
    /// statistics; the block's `order_root` checks them as every frame). What the journal does
    /// not hold — the downtime, and anything older than its ring — the network repairs as
    /// before. Returns the frames taken.
    fn feed_own_journal(&mut self, now: u64) -> usize {
        let mut n = 0;
        for s in 0..2u8 {
            let (next, last) = self.own[s as usize];
            if next > last {
                continue;
            }
            let to = last.min(next + OWN_BATCH - 1);
            self.own_buf.clear();
            self.own_ends.clear();
            let (buf, ends) = (&mut self.own_buf, &mut self.own_ends);
            let got = self.io.store.journal_mut().map_or(0, |j| {
                j.read(s, next, to, |_, f| {
                    buf.extend_from_slice(f);
                    ends.push(buf.len());
                })
            });
            // A frame the journal cannot serve now ends the feed of this substream: the
            // network repairs from there.
            self.own[s as usize] = if got == to - next + 1 {
                (to + 1, last)
            } else {
                (1, 0)
            };
            if self.own[s as usize].0 > self.own[s as usize].1 {
                self.core.expect_local(s, None);
            }
            let mut start = 0;
            for i in 0..self.own_ends.len() {
                let end = self.own_ends[i];
                self.core.on_path_frame(
                    LOCAL_CHANNEL,
                    &self.own_buf[start..end],
                    now,
                    &mut self.io,
                );
                start = end;
            }
            self.io.c.own_journal_frames += got;
            n += got as usize;
            if self.own[s as usize].0 > self.own[s as usize].1 && got > 0 {
                eprintln!(
                    "{}: substream {s}: took {} frames from its own order journal",
                    self.io.name, self.io.c.own_journal_frames
                );
            }
        }
        n
    }

    /// The peer frame store's counters.
    pub fn store(&self) -> crate::disk::frame_store::StoreCounters {
        self.io.store.counters()
    }

    /// The order journal's counters, if this replica journals.
    pub fn order_journal(&self) -> Option<crate::disk::order_journal::OrderJournalCounters> {
        self.io.store.journal().map(|j| j.counters())
    }

    /// 07 §5.7 at `now`: gossip `DataDown` for the boxes this replica sees silent, and once a
    /// quorum agrees, move the failed box's sessions to its backup home and send their
    /// `DataRedirect`s (with this replica's `resend_from`) to the live data boxes.
    fn data_failover(&mut self, now: u64) {
        // A box silent after it was heard from is voted down; one never heard from since this
        // replica started (the home starting) is not: its sessions have sent it nothing yet.
        for d in 0..self.io.boxes.len() as u8 {
            let data = self.core.data();
            let silent = data.box_down(d) && data.box_seen(d);
            if silent && !self.io.down.is_silent(d) {
                eprintln!(
                    "{}: data box {d} silent: DataDown{{{d}}} gossiped to the peers and the data boxes (07 §5.7)",
                    self.io.name
                );
                self.io.down.on_own(d, now);
            } else if !silent && self.io.down.is_silent(d) {
                self.io.down.on_own_up(d);
            }
        }
        let mut steps = [None; 4];
        let mut n = 0;
        self.io.down.tick(now, |s| {
            if n < steps.len() {
                steps[n] = Some(s);
                n += 1;
            }
        });
        for s in steps.into_iter().flatten() {
            match s {
                // The standby's replica votes in nothing (07 §5.7): it re-homes its own fetches
                // on the voters' gossip, and sends neither gossip nor redirects.
                DownStep::Gossip(_) if self.io.standby => {}
                DownStep::Gossip(d) => {
                    let m = vyrn_wire::msg::ctrl::DataDown { d };
                    let standby = self.io.standby_replica;
                    for to in self.io.peers.clone().into_iter().chain(standby) {
                        self.io.queue(Sock::Ctrl, to, |b| m.encode(b).is_ok());
                    }
                    for i in 0..self.io.boxes.len() {
                        let to = self.io.boxes[i];
                        self.io.queue(Sock::Data, to, |b| m.encode(b).is_ok());
                    }
                    self.io.c.data_down_sent += 1;
                }
                DownStep::Redirect { from, to } => {
                    let Some(moved) = self.io.moved.get_mut(from as usize) else {
                        continue;
                    };
                    if moved.is_empty() {
                        let data = self.core.data_mut();
                        for sess in &self.sessions {
                            if data.home(*sess) == Some(from) {
                                data.set_home(*sess, to);
                                moved.push(*sess);
                            }
                        }
                        eprintln!(
                            "{}: data box {from} down by quorum (07 §5.7): {} session(s) redirected to data box {to}",
                            self.io.name,
                            moved.len()
                        );
                    }
                    if self.io.standby {
                        continue;
                    }
                    // Each session's resend_from from one pass over the live records.
                    let points = self.core.data().resend_points(moved);
                    for (session, resend_from) in points {
                        let r = vyrn_wire::msg::ctrl::DataRedirect {
                            from,
                            to,
                            session,
                            resend_from,
                        };
                        for b in 0..self.io.boxes.len() {
                            if !self.io.down.is_down(b as u8) {
                                let a = self.io.boxes[b];
                                self.io.queue(Sock::Data, a, |o| r.encode(o).is_ok());
                            }
                        }
                        self.io.c.redirects_sent += 1;
                    }
                }
            }
        }
    }

    /// One round at `now` (ns on this process's monotonic clock). True if anything was done.
    pub fn poll(&mut self, now: u64) -> Result<bool, vyrn_engine::home::ReplayError> {
        self.io.now = now;
        let mut work = self.read_sockets(now);
        // A restarted replica's own frames, a batch per poll after the sockets were read: a
        // backlog fed before reading them let the kernel drop live frames meanwhile.
        work += self.feed_own_journal(now);
        work += self.feed_own_payloads(now);
        // The order journal's buffered frames go to disk every ORDER_FLUSH_NS (a read that needs
        // newer ones flushes itself).
        if now.saturating_sub(self.last_order_flush) >= ORDER_FLUSH_NS {
            self.last_order_flush = now;
            self.io.store.flush();
        }
        // The core's timers at most every 10 µs, and after any input.
        let ticked = work > 0 || now.saturating_sub(self.last_tick) >= 10_000;
        if ticked {
            self.last_tick = now;
            self.core.tick(now, &mut self.io, &mut self.sink)?;
            if let Some(t) = self.tile.as_mut() {
                t.poll(now);
            }
            self.data_failover(now);
            self.failover_poll(now);
            self.retry_follow(now);
            self.promote_when_ready(now);
            for (h, hash, last_step) in self.io.headers.drain(..) {
                self.io.fo.header_height = self.io.fo.header_height.max(h);
                self.io.fo.recent.insert(h, hash);
                if self.io.fo.recent.len() > tenure::RECENT_HASHES {
                    self.io.fo.recent.pop_first();
                }
                match (self.simplex.as_mut(), self.follower.as_mut()) {
                    (Some(v), _) => v.on_header(h, hash),
                    (None, Some(f)) => f.on_header(h, hash),
                    #[cfg(feature = "lab")]
                    (None, None) => self.lab.voter.on_header(h, hash),
                    #[cfg(not(feature = "lab"))]
                    (None, None) => {}
                }
                if self.held.len() < 1 << 16 {
                    self.held.push_back((h, last_step));
                }
                self.catchup.on_header(h, last_step);
                if let Some(sn) = self.snaps.as_mut().filter(|sn| sn.policy.at(h)) {
                    sn.headers.insert(h, hash);
                    while sn.headers.len() > 4 * SNAPS_PENDING {
                        sn.headers.pop_first();
                    }
                }
            }
            self.write_snapshots();
            self.check_catchup(now);
        }
        if let Some(v) = self.simplex.as_mut() {
            // 07 §8.2: voted blocks waiting for the journal's queue hold the checks of new ones.
            if let Some(j) = self.journal.as_mut() {
                j.drain_backlog();
                v.hold_checks(j.behind());
            }
            // 07 §9.4: the seal leader's offers, indexed before the desk answers.
            for m in std::mem::take(&mut self.io.fo.seal_offers) {
                if v.offer_seal(m).is_err() {
                    self.io.c.seal_offers_refused += 1;
                }
            }
            // The desk answers on every round (the engine waits on it), the verdict's timers
            // ran above.
            let io = &mut self.io;
            let mut outs: Vec<DeskOut> = Vec::new();
            if v.poll(&mut self.core, io, now, |o| outs.push(o.clone())) {
                work += 1;
            }
            if let Some(why) = v.take_seal_why() {
                eprintln!("{}: failover: seal (07 §9.4): {why:?}", self.io.name);
                if let crate::vote::SealWhy::Held(k) = why {
                    self.push_held(k);
                }
            }
            for o in outs {
                self.on_desk_out(o, now);
            }
        } else if self.follower.is_some() && ticked {
            // 07 §9.4: the voters' certificates of the final seal.
            for m in std::mem::take(&mut self.io.fo.seal_certs) {
                self.on_seal_cert(&m, now);
            }
            if let Some(f) = self.follower.as_mut() {
                f.tick(&mut self.core, now, &mut self.io);
                if f.alarm_due(now) {
                    let lag_us = self.core.replay_lag_time().p50 / 1000;
                    f.alarm(f.promotable(now, lag_us));
                }
            }
        } else if ticked {
            self.interim_tick(now);
        }
        if let Some((b, at)) = self.diverge.as_mut() {
            if now.saturating_sub(*at) >= DIVERGE_REPEAT_NS {
                *at = now;
                let to = self.io.seq_ctrl;
                self.io.queue(Sock::Ctrl, to, |q| {
                    q.extend_from_slice(b);
                    true
                });
            }
        }
        self.journal_voted(now);
        self.check_journal();
        self.forget_done();
        work += self.flush();
        Ok(work > 0)
    }

    /// What the desk has for the sequencer and the standby (07 §6.8), the cert journal, and the
    /// alarms it raised.
    fn on_desk_out(&mut self, o: DeskOut, now: u64) {
        let mut b = Vec::with_capacity(256);
        // 07 §6.8: votes and certificates to the sequencer's and the standby's control
        // ports, so both learn finality at the same hop.
        let standby = matches!(
            o,
            DeskOut::Vote(_) | DeskOut::Cert(_) | DeskOut::SealCert { .. }
        )
        .then_some(self.io.standby_ctrl)
        .flatten();
        let ok = match &o {
            DeskOut::Vote(fv) => fv.encode(&mut b).is_ok(),
            DeskOut::Cert(c) => {
                b.push(vyrn_wire::msg::ctrl::ty::FINALITY_CERT);
                let ok = c.encode(&mut b).is_ok();
                if ok {
                    if let Some(j) = self.journal.as_mut() {
                        j.submit_cert(crate::disk::journal::cert::CertKind::Finality, b.clone());
                    }
                }
                ok
            }
            DeskOut::SealOffer { proposal, ext } => {
                // 07 §9.4: the seal this voter leads, to every other voter (not the box).
                let m = vyrn_wire::msg::ctrl::SealOffer {
                    proposal: *proposal,
                    ext: ext.clone(),
                };
                for i in 0..self.io.peers.len() {
                    let to = self.io.peers[i];
                    self.io.queue(Sock::Ctrl, to, |q| m.encode(q).is_ok());
                }
                false
            }
            DeskOut::SealCert { cert, ext } => {
                // 07 §9.4: the seal's certificate stands in for its seq_sig; the cert journal
                // keeps it and its ext (§8.2).
                self.io.c.seals_final += 1;
                eprintln!(
                    "{}: failover: the seal is final (07 §9.4): heights {}..={} (the seal block {}), F* = [{}, {}], next sequencer {}: every response of the prefix is final",
                    self.io.name,
                    cert.proposal.first_height,
                    cert.proposal.last_height,
                    cert.proposal.last_height,
                    ext.end_frame_seq[0],
                    ext.end_frame_seq[1],
                    if ext.next_seq == vyrn_wire::msg::consensus::NEXT_SEQ_NONE {
                        "none: the book stays halted".to_string()
                    } else {
                        format!("{} (the standby, promoted on this seal)", ext.next_seq)
                    }
                );
                self.sealed = Some((cert.proposal.last_height, ext.clone()));
                let now = self.io.now;
                self.io.fo.stages.sealed.get_or_insert(now);
                let m = vyrn_wire::msg::ctrl::SealCert {
                    cert: cert.clone(),
                    ext: ext.clone(),
                };
                // 07 §9.5: the standby's replica learns the seal from the voters.
                if let Some(to) = self.io.standby_replica {
                    self.io.queue(Sock::Ctrl, to, |q| m.encode(q).is_ok());
                }
                let ok = m.encode(&mut b).is_ok();
                if ok {
                    if let Some(j) = self.journal.as_mut() {
                        j.submit_cert(crate::disk::journal::cert::CertKind::SealExt, b.clone());
                    }
                }
                if ok {
                    if let Some(to) = standby {
                        self.io.queue(Sock::Ctrl, to, |q| {
                            q.extend_from_slice(&b);
                            true
                        });
                    }
                }
                self.follow_seal(&cert.proposal, ext, now);
                false
            }
            DeskOut::Fault { kind, signer, view } => {
                self.io.c.consensus_faults += 1;
                eprintln!(
                    "{}: Byzantine voter evidence (07 §10.2): voter {signer} {kind:?} in view {view}",
                    self.io.name
                );
                false
            }
            DeskOut::RootCert(c) => {
                // 07 §7.4: Q root signatures over this replica's own R(h), kept in
                // the cert journal beside the finality certificates.
                self.io.c.root_certs += 1;
                if c.encode(&mut b).is_ok() {
                    if let Some(j) = self.journal.as_mut() {
                        j.submit_cert(crate::disk::journal::cert::CertKind::Root, b.clone());
                    }
                }
                false
            }
            DeskOut::RootFault {
                index,
                signer,
                digest,
            } => {
                self.io.c.root_faults += 1;
                eprintln!(
                    "{}: RootFault (07 §10.2): voter {signer} signed root digest {:02x?} for index {index}",
                    self.io.name,
                    &digest[..8]
                );
                false
            }
            DeskOut::Diverge(d) => {
                // 07 §7.4 INV-REP-9: this replica votes for nothing more; the
                // sequencer's control core halts the book on this message.
                self.io.c.diverge = 1;
                eprintln!(
                    "{}: REP_A_DIVERGE (07 §7.4): root index {} {:?}, {} digest(s); voting stopped, Diverge sent to the sequencer",
                    self.io.name,
                    d.index,
                    d.reason,
                    d.digests.len()
                );
                let ok = d.encode(&mut b).is_ok();
                if ok {
                    self.diverge = Some((b.clone(), now));
                }
                ok
            }
        };
        if ok {
            let to = self.io.seq_ctrl;
            self.io.queue(Sock::Ctrl, to, |q| {
                q.extend_from_slice(&b);
                true
            });
            if let Some(to) = standby {
                self.io.queue(Sock::Ctrl, to, |q| {
                    q.extend_from_slice(&b);
                    true
                });
            }
        }
    }

    /// One bounded batch from each socket: paths, control, data. Datagrams read.
    fn read_sockets(&mut self, now: u64) -> usize {
        let mut work = 0;
        // `now` was read as this poll began; the time since is added back where a kernel stamp
        // is mapped, so a round that was descheduled while taking path A does not date path B's
        // datagrams by the round's start (they arrived during the pause): a frame dated early
        // made a hash look late (REP_E_HASHLAG at one replica of a loaded dev home).
        let began = std::time::Instant::now();
        self.lab_isolation(now);
        for path in 0..2u8 {
            if let Ok(n) = self.paths[path as usize].recv_batch(&mut self.rx) {
                work += n;
                if self.lab_drops_path(path as usize, now, n) {
                    self.io.c.path_cut_drops += n as u64;
                    continue;
                }
                self.io.c.path_rx[path as usize] += n as u64;
                // Kernel stamps only (a simulated port has none, and its time is the seed's).
                let stamped = self
                    .rx
                    .iter()
                    .any(|p| p.meta.ts_source == vyrn_nic::TsSource::Kernel);
                let at_now = if stamped {
                    now.saturating_add(began.elapsed().as_nanos() as u64)
                } else {
                    now
                };
                // Read right after the batch: every stamp in it is older.
                let wall = arrivals(at_now);
                for p in self.rx.iter() {
                    if self.lab_drops_frame(p.data) {
                        self.io.c.path_cut_drops += 1;
                        continue;
                    }
                    let at = wall.arrived(&p.meta);
                    self.core
                        .on_path_frame_arrived(path, p.data, at_now, at, &mut self.io);
                }
            }
        }
        if let Ok(n) = self.ctrl.recv_batch(&mut self.rx) {
            work += n;
            for p in self.rx.iter() {
                if self.lab_drops_ctrl(p.meta.src) {
                    self.io.c.path_cut_drops += 1;
                    continue;
                }
                self.io.c.ctrl_rx += 1;
                on_ctrl(
                    &mut self.core,
                    &mut self.io,
                    self.epoch,
                    p.meta.src,
                    p.data,
                    now,
                );
            }
        }
        if let Ok(n) = self.data.recv_batch(&mut self.rx) {
            work += n;
            let cut = self.lab_drops_data(now, n);
            if cut {
                self.io.c.data_cut_drops += n as u64;
            }
            for p in self.rx.iter().filter(|_| !cut) {
                self.io.c.data_rx += 1;
                match p
                    .meta
                    .src
                    .and_then(|a| self.io.boxes.iter().position(|&b| b == a))
                {
                    Some(d) => {
                        self.core.on_data_frame(d as u8, p.data, now, &mut self.io);
                    }
                    None => self.io.c.unknown_src += 1,
                }
            }
        }
        work
    }

    /// 07 §7.6: once a replica that started behind has replayed through the home's final
    /// height, one line with the time it took and its rate against the home's block rate.
    fn check_catchup(&mut self, now: u64) {
        if self.catchup.done.is_some() {
            return;
        }
        let Some(fin) = self.simplex.as_ref().map(|v| v.final_height()) else {
            return;
        };
        let replayed = self.core.replay_lag().1;
        let rx = self.core.order_rx();
        let frames = (rx.contiguous()[0], rx.high()[0]);
        if let Some(c) = self.catchup.poll(now, replayed, fin, frames) {
            let from = if c.head_frame > 0 {
                format!(
                    "the stream's head was frame {} when first seen, passed before the home's final height was known",
                    c.head_frame
                )
            } else {
                format!(
                    "the home's final height was {} when first seen",
                    c.final_at_start
                )
            };
            let snap = c.snapshot.map_or(String::new(), |s| {
                format!(" from the snapshot of height {s}")
            });
            eprintln!(
                "{}: caught up (07 §7.6): replayed blocks {}..={}{snap} in {:.1} ms since start ({from}): {:.0} blocks/s, {:.1}x the home's {:.0} blocks/s",
                self.io.name,
                c.first,
                c.height,
                c.elapsed_ns as f64 / 1e6,
                c.blocks_per_s,
                c.ratio(),
                c.production_per_s
            );
        }
    }

    /// The catch-up this replica measured (07 §7.6), once it reached the final height from
    /// behind; `None` while catching up or when it started with its home.
    pub fn caught_up(&self) -> Option<catchup::CaughtUp> {
        self.catchup.done.flatten()
    }

    /// Drop the verdict's and the data side's state of blocks this replica voted and replayed,
    /// [`FORGET_LAG`] blocks behind (the journal and the peers' catch-up keep them after).
    fn forget_done(&mut self) {
        let replayed = self.core.replay_lag().1;
        let mut upto = None;
        while let Some(&(h, last_step)) = self.held.front() {
            if h + FORGET_LAG > self.voted() || last_step > replayed {
                break;
            }
            self.held.pop_front();
            upto = Some(h);
        }
        if let Some(h) = upto {
            self.core.forget_through(h);
        }
    }

    /// After its runner stopped: replay's thread stopped (what it replayed stays), the journal
    /// synced; the replay error that halted the front, if one did.
    pub fn finish(&mut self) -> Result<(), vyrn_engine::home::ReplayError> {
        self.stop_replay_thread();
        self.sync_journal();
        self.failed.take().map_or(Ok(()), Err)
    }

    /// Set once replay failed and the front stopped (the process then ends: [`Node::finish`]
    /// gives the error).
    pub fn halted(&self) -> Arc<AtomicBool> {
        self.halted.clone()
    }
}

/// How the front's thread waits (07 §4, a vyrn decision): when a round did nothing, block in
/// `ppoll` on the four sockets (≤ 50 µs, the core's timers are no coarser), and once one is
/// readable let [`BATCH_NS`] of traffic gather before the next round, so one wake-up and one
/// `recvmmsg` per socket take many frames (a replica sharing a core wakes a few thousand times
/// a second under load, not once per datagram).
pub const NODE_WAIT: vyrn_tile::Wait = vyrn_tile::Wait::Gather {
    timeout_ns: WAIT_NS,
    gather_ns: BATCH_NS,
};

/// The replica's front as one cold tile (order RX, decode, data side, verdict, votes, the
/// journal's hand-off, and replay inline unless it has a thread of its own), waiting as
/// [`NODE_WAIT`] says. A replay error halts it: its polls then do nothing and
/// [`Node::halted`] is set.
impl vyrn_tile::Task for Node {
    fn name(&self) -> String {
        "replica".into()
    }
    fn class(&self) -> vyrn_tile::TileClass {
        vyrn_tile::TileClass::Cold
    }
    fn wait_fds(&self, out: &mut Vec<RawFd>) {
        out.extend(self.fds());
    }
    fn poll(&mut self, now: u64) -> bool {
        if self.failed.is_some() {
            return false;
        }
        match Node::poll(self, now) {
            Ok(busy) => busy,
            Err(e) => {
                self.failed = Some(e);
                self.halted
                    .store(true, std::sync::atomic::Ordering::Release);
                false
            }
        }
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        self.stop_replay_thread();
    }
}

/// Without the `lab` feature there is no interim voter and no cut: the product build's voter is
/// Simplex alone, and every datagram read is handled.
#[cfg(not(feature = "lab"))]
impl Node {
    #[inline]
    fn lab_drops_path(&mut self, _path: usize, _now: u64, _n: usize) -> bool {
        false
    }
    #[inline]
    fn lab_drops_data(&mut self, _now: u64, _n: usize) -> bool {
        false
    }
    #[inline]
    fn lab_isolation(&mut self, _now: u64) -> bool {
        false
    }
    #[inline]
    fn lab_drops_ctrl(&self, _src: Option<SocketAddr>) -> bool {
        false
    }
    #[inline]
    fn lab_drops_frame(&self, _frame: &[u8]) -> bool {
        false
    }
    fn interim_voted(&self) -> u64 {
        0
    }
    fn interim_tick(&mut self, _now: u64) {}
    fn interim_stop(&mut self) {}
}

/// `CLOCK_REALTIME` against this process's monotonic `now`, read once per round: a
/// datagram's kernel receive stamp (`SO_TIMESTAMPNS`) on the `now` clock.
#[derive(Debug, Clone, Copy)]
struct Arrivals {
    now: u64,
    wall: u64,
}

fn arrivals(now: u64) -> Arrivals {
    let wall = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    Arrivals { now, wall }
}

impl Arrivals {
    /// When the datagram arrived, on the `now` clock: `now` less its age by the kernel's stamp;
    /// `now` where there is no kernel stamp, and an age past a second (a clock step) is taken
    /// as none.
    fn arrived(&self, m: &vyrn_nic::RxMeta) -> u64 {
        if m.ts_source != vyrn_nic::TsSource::Kernel || m.ts_ns > self.wall {
            return self.now;
        }
        let age = self.wall - m.ts_ns;
        if age > 1_000_000_000 {
            return self.now;
        }
        self.now.saturating_sub(age)
    }
}

/// The core, with its replay tile when replay runs on a thread of its own (07 §7.2).
#[allow(clippy::type_complexity)]
fn new_core(
    cfg: &NodeConfig,
    cc: CoreConfig,
) -> Result<(ReplicaCore, Option<ReplayTile<ReplaySink>>), String> {
    if cfg.replay_tile {
        let (core, mut tile) = if cfg.replay_lanes > 0 {
            let idle = if cfg.replay_lane_cores.is_empty() {
                crate::replay::tile::Idle::Backoff
            } else {
                crate::replay::tile::Idle::Spin
            };
            ReplicaCore::new_split_lanes(
                cc,
                crate::replay::tile::REPLAY_RING_BYTES,
                ReplaySink::default(),
                crate::replay::split::Workers::Threads {
                    n: cfg.replay_lanes,
                    cores: cfg.replay_lane_cores.clone(),
                    idle,
                },
                crate::replay::split::SplitSlots::default(),
            )?
        } else {
            ReplicaCore::new_split(
                cc,
                crate::replay::tile::REPLAY_RING_BYTES,
                ReplaySink::default(),
            )?
        };
        tile.prefault(REPLAY_COPIES);
        Ok((core, Some(tile)))
    } else {
        Ok((ReplicaCore::new(cc)?, None))
    }
}

/// The peer frame store, with this replica's order journal behind it when it journals, and the
/// spans of its own frames the journal held at start (07 §4.10).
fn frame_store(
    cfg: &NodeConfig,
    core: &mut ReplicaCore,
) -> Result<([(u64, u64); 2], FrameStore), String> {
    let h = &cfg.home;
    // 07 §4.10: peers serve repairs from memory (REP_PEER_RING_MS) and then from their order
    // journal — a journaling replica keeps every frame it delivers on its first drive.
    // Nothing of its own to read unless the order journal held frames at start.
    let mut own = [(1, 0); 2];
    let mut store = FrameStore::new(
        STORE_BYTES,
        cfg.budgets.peer_ring_ns,
        vyrn_wire::consts::REP_PEER_RTX_MAX_FPS,
    );
    if let Some(d0) = cfg.journal.as_ref().and_then(|d| d.first()) {
        let dir = d0
            .join(crate::disk::order_journal::ORDER_DIR)
            .join(format!("e{}-t0", h.epoch));
        let oj = crate::disk::order_journal::OrderJournal::open(
            crate::disk::order_journal::OrderJournalConfig::new(dir),
        )
        .map_err(|e| e.to_string())?;
        let c = oj.counters();
        if c.recovered > 0 || c.truncated_bytes > 0 {
            eprintln!(
                "replica {}: order journal recovered {} frames (spans {:?} {:?}), cut {} bytes",
                cfg.index,
                c.recovered,
                oj.span(0),
                oj.span(1),
                c.truncated_bytes
            );
        }
        own = [0, 1].map(|s| oj.span(s).map_or((1, 0), |(a, b)| (a, b)));
        for (s, &(first, last)) in own.iter().enumerate() {
            core.expect_local(s as u8, (first <= last).then_some((first, last)));
        }
        store.set_journal(oj);
    }
    Ok((own, store))
}

/// The voting set — the home's REP_Membership when it names one (07 §13.1, checked at load),
/// else the `[voter.N]` sections' keys — and the Simplex voter when `cfg` runs one.
/// Each data box's socket for this replica: voter `i`'s at `dest_base + i`, the standby's at
/// its `standby_port` (07 §5.1).
fn box_addrs(cfg: &NodeConfig) -> Vec<SocketAddr> {
    let h = &cfg.home;
    h.databoxes
        .iter()
        .map(|d| match cfg.standby {
            true => d.standby_addr(cfg.index),
            false => d.dest_addr(cfg.index),
        })
        .collect()
}

/// This replica's TailReport `reporter` (07 §9.3): its voter index, or the standby's sequencer
/// index.
fn reporter(cfg: &NodeConfig) -> u8 {
    match cfg.standby {
        true => cfg.home.standby_seq().map_or(1, |s| s.0),
        false => cfg.index as u8,
    }
}

/// The member envelope's `from` for this replica.
fn sealed_from(cfg: &NodeConfig) -> u8 {
    match cfg.standby {
        true => seal::from::STANDBY,
        false => seal::from::voter(cfg.index),
    }
}

/// This replica's member entry: voter `cfg.index`, or the standby's replica (07 §9.5), whose
/// key must be the one the file names.
fn member(cfg: &NodeConfig) -> Result<vyrn_home::VoterMember, String> {
    let h = &cfg.home;
    if cfg.standby {
        if cfg.simplex.is_some() {
            return Err(
                "the standby's replica votes in nothing: it takes no consensus engine".into(),
            );
        }
        let me = h.standby_member().ok_or(
            "the home's [standby] names no replica (replica_addr) and link_key: nothing to run",
        )?;
        if cfg.index != me.index {
            return Err(format!(
                "the standby's replica takes slot {} (after the voters), not {}",
                me.index, cfg.index
            ));
        }
        if me.vote_key != cfg.vote_key.verifying_key() {
            return Err("the key given is not the secret of [standby] link_key".into());
        }
        return Ok(me);
    }
    let me = h
        .voters_members
        .iter()
        .find(|v| v.index == cfg.index)
        .ok_or_else(|| format!("voter {} is not in the home's membership", cfg.index))?;
    if me.vote_key != cfg.vote_key.verifying_key() {
        return Err(format!(
            "the vote key given is not voter {}'s vote_key in the home's file",
            cfg.index
        ));
    }
    Ok(me.clone())
}

/// `checked`: the heights its journal recovered gap-free, checked here before a restart (07
/// §8.2): the voter's checked prefix resumes there.
fn start_voting(
    cfg: &NodeConfig,
    checked: u64,
) -> Result<
    (
        Option<vyrn_consensus::Voters>,
        Option<crate::vote::SimplexVoter>,
    ),
    String,
> {
    let h = &cfg.home;
    let voters = match &h.membership {
        Some(m) => vyrn_consensus::Voters::from_membership(m, h.epoch).ok(),
        None => {
            let keys: Vec<[u8; 32]> = h
                .voters_members
                .iter()
                .map(|m| m.vote_key.to_bytes())
                .collect();
            vyrn_consensus::Voters::with_simplex_quorum(h.epoch, &keys).ok()
        }
    };
    let simplex = match (&cfg.simplex, &voters) {
        (None, _) => None,
        (Some(_), None) => return Err("the home's vote keys do not form a voting set".to_string()),
        (Some(sc), Some(v)) => {
            // 07 §8.2: the cert journal's newest verified certificate is the engine's floor.
            let floor = cfg
                .journal
                .as_ref()
                .and_then(|dirs| crate::vote::newest_floor(dirs, v));
            if let Some((f, p)) = &floor {
                eprintln!(
                    "replica {}: consensus floor from the cert journal: view {}, final height {}",
                    cfg.index,
                    f.proposal.round.view().get(),
                    p.last_height
                );
            }
            Some(
                crate::vote::SimplexVoter::start(
                    sc,
                    v.clone(),
                    cfg.index as u8,
                    &cfg.vote_key.to_bytes(),
                    floor,
                )
                .map(|mut v| {
                    v.resume_checked(checked);
                    v
                })
                .map_err(|e| format!("the consensus engine: {e}"))?,
            )
        }
    };
    Ok((voters, simplex))
}

#[cfg(test)]
mod tests {
    use super::*;
    use vyrn_engine::resp::Gate;

    fn respond(s: &mut ReplaySink, bytes: &[u8], resend: bool) {
        s.respond(&RespOut {
            session: 1,
            echo_pkt_seq: 1,
            resp_seq: 1,
            resend,
            gate: Gate::LaneCut {
                lane: 0,
                lane_seq: 1,
            },
            tx: 0,
            bytes,
        });
    }

    /// The replay digest is a multiset hash: the same responses in any order give the same
    /// digest, a changed byte, a lost response or a duplicate changes it, resends do not count,
    /// and two sinks' reports merge to the digest of one sink fed both (the split replay's
    /// lanes report apart).
    #[test]
    fn the_replay_digest_is_order_free_and_sees_every_byte() {
        let resps: Vec<Vec<u8>> = (0..50u8)
            .map(|i| (0..40 + i as usize).map(|j| i ^ j as u8).collect())
            .collect();
        let mut a = ReplaySink::default();
        resps.iter().for_each(|r| respond(&mut a, r, false));
        let mut b = ReplaySink::default();
        resps.iter().rev().for_each(|r| respond(&mut b, r, false));
        respond(&mut b, &resps[3], true);
        assert_eq!(a.digest(), b.digest());
        assert_eq!(a.responses, 50);
        assert_ne!(a.digest(), ReplaySink::default().digest());

        let mut flipped = resps.clone();
        flipped[7][5] ^= 1;
        let mut c = ReplaySink::default();
        flipped.iter().for_each(|r| respond(&mut c, r, false));
        assert_ne!(a.digest(), c.digest(), "one bit");
        let mut d = ReplaySink::default();
        resps[1..].iter().for_each(|r| respond(&mut d, r, false));
        assert_ne!(a.digest(), d.digest(), "one lost");
        respond(&mut d, &resps[2], false);
        assert_ne!(a.digest(), d.digest(), "one lost, another twice");

        let (mut x, mut y) = (ReplaySink::default(), ReplaySink::default());
        resps[..20].iter().for_each(|r| respond(&mut x, r, false));
        resps[20..].iter().for_each(|r| respond(&mut y, r, false));
        use crate::replay::tile::ReportingSink;
        let mut m = x.report();
        m.merge(&y.report());
        assert_eq!(ReplaySink::from(m).digest(), a.digest());
    }
}
