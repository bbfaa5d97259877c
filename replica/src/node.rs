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
//! the core's clock, the voter, then the queued messages sent by `sendmmsg` per socket. The loop
//! in [`Node::run`] blocks in `ppoll` on the four sockets between rounds (at most the next timer
//! away): a replica on a shared dev core costs nothing while the home is idle.
//!
//! **Interim finality voter** ([`InterimVoter`], named as interim until the consensus issue
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
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ed25519_dalek::SigningKey;
use vyrn_engine::bbo::LaneEvent;
use vyrn_engine::home::EngineSink;
use vyrn_engine::resp::RespOut;
use vyrn_home::HomeConfig;
use vyrn_nic::udp::{UdpConfig, UdpPort};
use vyrn_nic::{Dest, Port, RxBatch, TxPacket};
use vyrn_wire::consts::{FRAME_MAGIC, REP_MAX_HDRS_PER_PROPOSAL};
use vyrn_wire::decoder::BlockRoots;
use vyrn_wire::header::{BlockHeader, Hash};
use vyrn_wire::msg::consensus::{ProposalKind, RepProposal};
use vyrn_wire::msg::ctrl::{
    CtrlMsg, DataFetch, FinalizeVote, HashListReq, Nack, RepAck, RepairReq,
};
use vyrn_wire::msg::journal::RepBlockRecord;
use vyrn_wire::msg::seal::{self, LinkKey, Opener, SealErr, Sealer};
use vyrn_wire::msg::PktKey;

use crate::core::{Budgets, CoreConfig, ReplicaCore, ReplicaOut};
use crate::data_down::DownStep;
use crate::data_side::{CopyMismatch, DataAlarm, Source};
use crate::decode::Fault;
use crate::frame_store::FrameStore;
use crate::journal::{Appended, BlockJournal, JournalConfig, RecoveryReport};
use crate::order_rx::{RxAlarm, LOCAL_CHANNEL, PEER_CHANNEL, REPAIR_CHANNEL};
use crate::replay_tile::ReplayTile;
use crate::verdict::{Anchor, Pending, Refusal, VerifyOutcome};
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
/// How long [`Node::run`] lets traffic gather after a wake-up: a quarter of a dev home's ack
/// period, so RepAcks and votes leave at most this much later.
pub const BATCH_NS: u64 = 60_000;
/// Longest the loop blocks between rounds: the core's timers (hole wait, acks) are no coarser.
const WAIT_NS: u64 = 50_000;

/// What a replica process is: its home, which voter it is, its key, its budgets.
#[derive(Debug, Clone)]
pub struct NodeConfig {
    /// The home's file, as every role reads it.
    pub home: HomeConfig,
    /// This voter's index in the membership.
    pub index: usize,
    /// This voter's vote key (its secret; its public half is the membership's `vote_key`).
    pub vote_key: SigningKey,
    /// The core's budgets ([`Budgets::dev`] on a dev home, 07's figures elsewhere).
    pub budgets: Budgets,
    /// The block journal's drive directories (07 §8.2); `None`: no journal.
    pub journal: Option<Vec<std::path::PathBuf>>,
    /// The journal's backend (io_uring + O_DIRECT where it works, else portable, by default).
    pub journal_backend: crate::journal::BackendChoice,
    /// The writer syncs at most this often while blocks are queued (0: 5 ms, 07 §8.2).
    pub journal_sync_ns: u64,
    /// Cores the journal writer thread is restricted to (off a sequencer's hot core when the
    /// home shares a host); `None`: the process's own set.
    pub journal_cores: Option<Vec<usize>>,
    /// The Simplex voter (07 §6.3); `None`: the interim voter (in-process tests only).
    pub simplex: Option<crate::voter::SimplexCfg>,
    /// Replay on its own tile (07 §7.2's replay cores, [`crate::replay_tile`]): polled in turn
    /// with the core until [`Node::start_replay_thread`] moves it to its own thread. False:
    /// replay inline, every stage on the node's thread (a shared 2-core box).
    pub replay_tile: bool,
    /// With `replay_tile`: the replay engine split too (07 §7.2), the tile the replay BBO core
    /// and the lanes on this many threads of their own ([`crate::replay_split`]); 0: the tile
    /// runs the lanes itself.
    pub replay_lanes: usize,
    /// Cores to pin the replay lane threads to (one each, in order; they then spin when idle).
    pub replay_lane_cores: Vec<usize>,
    /// 07 §7.5: take a REP_Snapshot every this many blocks (this voter's offset is its index ×
    /// this / voters; a multiple of voters × REP_ROOT_BLOCKS), written to the first journal
    /// drive's `snapshots/`. 0: none. Needs a journal and state roots.
    pub snapshot_blocks: u64,
}

/// The snapshots of a replica process (07 §7.5): taken by replay, written here once their
/// block's header hash is known ([`crate::snapshots`]).
#[derive(Debug)]
struct NodeSnaps {
    dir: crate::snapshots::SnapshotDir,
    policy: crate::replay::SnapPolicy,
    /// Taken, waiting for `header_hash(h)`, oldest first (at most [`SNAPS_PENDING`]).
    pending: std::collections::VecDeque<(u64, Vec<u8>)>,
    /// Header hashes of snapshot heights seen (at most [`SNAPS_PENDING`] × 4).
    headers: std::collections::BTreeMap<u64, vyrn_wire::header::Hash>,
    /// The area's audit at start (07 §7.5 "Loading"), or why it could not run.
    found: Result<crate::snapshots::SnapAudit, String>,
}

/// Snapshots that wait for their header before the oldest is dropped (counted).
const SNAPS_PENDING: usize = 4;

/// Most blocks whose ORDER bytes and header wait for their vote before the oldest is dropped
/// (a replica that stopped voting keeps no unbounded backlog).
const JOURNAL_PENDING_MAX: usize = 4096;
/// The writer syncs at most this often while blocks are queued (07 §8.2: final blocks on
/// NVMe within ≤ 5 ms, one io_uring batch).
const JOURNAL_SYNC_NS: u64 = 5_000_000;

/// The journal side of a replica process: the block journal runs on its own writer thread, so
/// a slow `fdatasync` never stalls order RX, RepAcks or votes (07 §8.2: "a replica acks
/// nothing to anyone based on NVMe"). Records go to it through a bounded queue; a full queue
/// skips the block (counted), it never blocks the tile.
#[derive(Debug)]
pub struct NodeJournal {
    /// What recovery found at start.
    pub recovered: RecoveryReport,
    /// Highest height recovery served.
    pub recovered_top: u64,
    /// Voted blocks not handed to the writer: a piece missing, or its queue full.
    pub skipped: u64,
    tx: Option<std::sync::mpsc::SyncSender<ToWriter>>,
    /// Certificates not handed to the writer (its queue full).
    pub certs_skipped: u64,
    writer: Option<std::thread::JoinHandle<()>>,
    stats: Arc<JournalStats>,
}

/// What the journal writer takes (a block moves by value: the queue holds at most
/// `JOURNAL_QUEUE` of them, and boxing each would allocate per block).
#[derive(Debug)]
#[allow(clippy::large_enum_variant)]
enum ToWriter {
    /// A voted block.
    Block(u64, RepBlockRecord),
    /// A certificate for the cert journal: a `REP_FinalityCert`'s bytes (type byte included)
    /// or a `REP_RootCert`'s (07 §7.4).
    Cert(crate::journal::cert::CertKind, Vec<u8>),
    /// A REP_Snapshot of height h for the snapshot area (07 §7.5; 07 §7.2's storage core
    /// writes it, so its fsync never stalls order RX).
    Snapshot(crate::snapshots::SnapshotDir, u64, Vec<u8>),
}

/// The writer thread's figures.
#[derive(Debug, Default)]
struct JournalStats {
    certs: AtomicU64,
    appended: AtomicU64,
    synced: AtomicU64,
    identical: AtomicU64,
    errors: AtomicU64,
    /// Bytes made durable (`JournalCounters::bytes_written`, slot heads included).
    bytes: AtomicU64,
    /// Snapshots written, the newest one's height, and writes that failed.
    snapshots: AtomicU64,
    snapshot_height: AtomicU64,
    snapshot_errors: AtomicU64,
}

/// Blocks the writer's queue holds (about 4 s of dev blocks).
const JOURNAL_QUEUE: usize = 2048;

impl NodeJournal {
    fn start(
        journal: BlockJournal,
        certs: crate::journal::cert::CertJournal,
        recovered: RecoveryReport,
        sync_ns: u64,
        cores: Option<Vec<usize>>,
    ) -> NodeJournal {
        let top = journal.heights().last().copied().unwrap_or(0);
        let stats = Arc::new(JournalStats::default());
        stats.appended.store(top, Ordering::Relaxed);
        stats.synced.store(top, Ordering::Relaxed);
        let (tx, rx) = std::sync::mpsc::sync_channel::<ToWriter>(JOURNAL_QUEUE);
        stats.certs.store(certs.len() as u64, Ordering::Relaxed);
        let st = stats.clone();
        let writer = std::thread::spawn(move || {
            if let Some(c) = cores {
                let _ = vyrn_nic::wait::pin_to(&c);
            }
            let mut j = journal;
            let mut cj = certs;
            let mut cert_dirty = false;
            let mut last = Instant::now();
            let sync = |j: &mut BlockJournal, st: &JournalStats| match j.sync() {
                Ok(()) => {
                    st.synced
                        .store(st.appended.load(Ordering::Relaxed), Ordering::Relaxed);
                    st.bytes
                        .store(j.counters().bytes_written, Ordering::Relaxed);
                }
                Err(_) => {
                    st.errors.fetch_add(1, Ordering::Relaxed);
                }
            };
            loop {
                let wait = Duration::from_nanos(sync_ns);
                match rx.recv_timeout(wait) {
                    Ok(ToWriter::Cert(kind, b)) => match cj.append(kind, &b) {
                        Ok(_) => {
                            st.certs.fetch_add(1, Ordering::Relaxed);
                            cert_dirty = true;
                        }
                        Err(_) => {
                            st.errors.fetch_add(1, Ordering::Relaxed);
                        }
                    },
                    Ok(ToWriter::Block(h, rec)) => match j.append_record(&rec) {
                        Ok(Appended::Queued) => {
                            st.appended.fetch_max(h, Ordering::Relaxed);
                        }
                        Ok(Appended::Identical) => {
                            st.identical.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(_) => {
                            st.errors.fetch_add(1, Ordering::Relaxed);
                        }
                    },
                    Ok(ToWriter::Snapshot(d, h, b)) => match d.write(h, &b) {
                        Ok(_) => {
                            st.snapshots.fetch_add(1, Ordering::Relaxed);
                            st.snapshot_height.store(h, Ordering::Relaxed);
                        }
                        Err(e) => {
                            st.snapshot_errors.fetch_add(1, Ordering::Relaxed);
                            eprintln!("snapshot at height {h} not written: {e}");
                        }
                    },
                    Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
                    Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                        sync(&mut j, &st);
                        let _ = cj.sync();
                        return;
                    }
                }
                if cert_dirty && last.elapsed() >= wait {
                    if cj.sync().is_err() {
                        st.errors.fetch_add(1, Ordering::Relaxed);
                    }
                    cert_dirty = false;
                }
                if j.queued() > 0 && last.elapsed() >= wait {
                    sync(&mut j, &st);
                    last = Instant::now();
                }
            }
        });
        NodeJournal {
            recovered,
            recovered_top: top,
            skipped: 0,
            certs_skipped: 0,
            tx: Some(tx),
            writer: Some(writer),
            stats,
        }
    }

    /// Highest height handed to the journal and appended.
    pub fn appended(&self) -> u64 {
        self.stats.appended.load(Ordering::Relaxed)
    }

    /// Highest height durable (appended before the last successful sync).
    pub fn synced(&self) -> u64 {
        self.stats.synced.load(Ordering::Relaxed)
    }

    /// Bytes the journal made durable since it opened (blocks and their slot heads).
    pub fn bytes_written(&self) -> u64 {
        self.stats.bytes.load(Ordering::Relaxed)
    }

    /// Heights the journal already held with the same bytes.
    pub fn identical(&self) -> u64 {
        self.stats.identical.load(Ordering::Relaxed)
    }

    /// Append or sync errors.
    pub fn errors(&self) -> u64 {
        self.stats.errors.load(Ordering::Relaxed)
    }

    fn submit(&mut self, h: u64, rec: RepBlockRecord) {
        let ok = self
            .tx
            .as_ref()
            .is_some_and(|tx| tx.try_send(ToWriter::Block(h, rec)).is_ok());
        if !ok {
            self.skipped += 1;
        }
    }

    /// A snapshot for the writer to put in `dir` (07 §7.5); false when its queue is full.
    fn submit_snapshot(
        &mut self,
        dir: crate::snapshots::SnapshotDir,
        h: u64,
        file: Vec<u8>,
    ) -> bool {
        self.tx
            .as_ref()
            .is_some_and(|tx| tx.try_send(ToWriter::Snapshot(dir, h, file)).is_ok())
    }

    /// Snapshots the writer wrote, the newest one's height, and its failed writes.
    pub fn snapshots(&self) -> (u64, u64, u64) {
        (
            self.stats.snapshots.load(Ordering::Relaxed),
            self.stats.snapshot_height.load(Ordering::Relaxed),
            self.stats.snapshot_errors.load(Ordering::Relaxed),
        )
    }

    /// A certificate's bytes for the cert journal (07 §8.2).
    fn submit_cert(&mut self, kind: crate::journal::cert::CertKind, bytes: Vec<u8>) {
        let ok = self
            .tx
            .as_ref()
            .is_some_and(|tx| tx.try_send(ToWriter::Cert(kind, bytes)).is_ok());
        if !ok {
            self.certs_skipped += 1;
        }
    }

    /// Certificates in the cert journal (recovered and appended).
    pub fn certs(&self) -> u64 {
        self.stats.certs.load(Ordering::Relaxed)
    }

    /// Close the queue and wait for the writer's last sync.
    fn finish(&mut self) {
        self.tx = None;
        if let Some(w) = self.writer.take() {
            let _ = w.join();
        }
    }
}

impl Drop for NodeJournal {
    fn drop(&mut self) {
        self.finish();
    }
}

/// Counters of the process side (each piece of the core keeps its own too).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NodeCounters {
    /// Datagrams off path A and B.
    pub path_rx: [u64; 2],
    /// Control datagrams in (sequencer, peers).
    pub ctrl_rx: u64,
    /// Data-tier datagrams in.
    pub data_rx: u64,
    /// Datagrams from an address that is not a member (dropped unread).
    pub unknown_src: u64,
    /// Control messages that did not parse, or are not for a replica.
    pub ctrl_bad: u64,
    /// Control messages from a member that should have come sealed and came bare
    /// (dropped unread).
    pub unsealed: u64,
    /// Sealed messages refused: a tag that does not verify, another sender's id, a replay.
    pub bad_seal: u64,
    /// Messages not sent because their destination has no link key (no member).
    pub tx_unsealed: u64,
    /// `RepairReq`s refused because the peer used up its share of REP_PEER_RTX_MAX_FPS.
    pub repairs_over_share: u64,
    /// Datagrams sent.
    pub tx: u64,
    /// Datagrams the kernel refused (dropped; the protocol's retries cover them).
    pub tx_dropped: u64,
    /// Peer RepairReqs served, and frames sent for them.
    pub repairs_served: (u64, u64),
    /// `SeqDataReq`s sent to the sequencer (07 §5.5 source 3).
    pub seq_data_asked: u64,
    /// `SeqData` answers taken from the sequencer.
    pub seq_data_rx: u64,
    /// Payloads no source had (07 §5.5: every fetch source asked).
    pub unavailable: u64,
    /// CopyMismatch evidence raised.
    pub copy_mismatches: u64,
    /// Sequencer faults the decoder raised.
    pub seq_faults: u64,
    /// Conflict evidence the consensus engine reported (07 §10.2).
    pub consensus_faults: u64,
    /// `REP_RootCert`s formed over this replica's own state root (07 §7.4).
    pub root_certs: u64,
    /// Root signatures for a digest other than the certified one (RootFault, 07 §10.2).
    pub root_faults: u64,
    /// 1 once REP_A_DIVERGE fired (07 §7.4, INV-REP-9): the replica votes no more.
    pub diverge: u64,
    /// REP_DurableMark notices from the sequencer.
    pub durable_marks: u64,
    /// NackTooOld answers.
    pub too_old: u64,
    /// Frames a restarted replica took from its own order journal (not from the network).
    pub own_journal_frames: u64,
    /// Frames the sequencer retransmitted to this replica's control port (07 §4.10).
    pub rtx_in: u64,
    /// Blocks the decoder completed.
    pub blocks: u64,
    /// Datagrams dropped by the lab's path cut ([`Node::cut_path`]).
    pub path_cut_drops: u64,
    /// Datagrams from the data boxes dropped by the lab's cut ([`Node::cut_data`]).
    pub data_cut_drops: u64,
    /// `DataDown` gossip rounds sent (07 §5.7).
    pub data_down_sent: u64,
    /// `DataDown` gossip taken from peers.
    pub data_down_rx: u64,
    /// `DataRedirect`s sent, one per session per round (to every live data box).
    pub redirects_sent: u64,
    /// `PeerDataFetch` sent (07 §5.5 source 2).
    pub peer_data_asked: u64,
    /// `PeerData` answers taken from peers.
    pub peer_data_rx: u64,
    /// Peers' `PeerDataFetch` answered from this replica's store.
    pub peer_data_served: u64,
    /// Peers' `PeerDataFetch` for a payload this replica does not hold (not answered).
    pub peer_data_missing: u64,
    /// Peers' `PeerDataFetch` over PEER_DATA_MAX_PPS (not answered).
    pub peer_data_capped: u64,
    /// REP_Snapshots written to the snapshot area (07 §7.5).
    pub snapshots_written: u64,
    /// The newest snapshot's height.
    pub snapshot_height: u64,
    /// Snapshots not written: the write failed, or their header never came.
    pub snapshot_errors: u64,
    /// Snapshots in the area refused by the audit at start (never loaded).
    pub snapshots_refused: u64,
}

/// Payloads a replica serves its peers per second (07 §5.5 names REP_SEQ_DATA_MAX_PPS for the
/// sequencer's source; a peer gets the same bound).
pub const PEER_DATA_MAX_PPS: u64 = 50_000;

/// A token bucket of `rate` a second with a burst of `burst`.
#[derive(Debug)]
struct Tokens {
    rate: u64,
    burst: u64,
    left: u64,
    at: u64,
}

impl Tokens {
    fn new(rate: u64, burst: u64) -> Self {
        Tokens {
            rate: rate.max(1),
            burst,
            left: burst,
            at: 0,
        }
    }
    fn take(&mut self, now: u64) -> bool {
        let per = 1_000_000_000 / self.rate;
        if now > self.at {
            let add = (now - self.at) / per.max(1);
            if add > 0 {
                self.left = (self.left + add).min(self.burst);
                self.at += add * per;
            }
        }
        if self.left == 0 {
            return false;
        }
        self.left -= 1;
        true
    }
    /// Take `n` more after the fact (a request whose cost is known once served), to zero.
    fn spend(&mut self, n: u64) {
        self.left = self.left.saturating_sub(n);
    }
}

/// A fair share per peer of a service's budget: each of `peers` gets
/// `rate / peers` a second and `burst / peers` at once, so one peer (or a spoofer of one, before
/// the seal) cannot use up what the others need.
fn per_peer(peers: usize, rate: u64, burst: u64) -> Vec<Tokens> {
    let k = peers.max(1) as u64;
    (0..peers)
        .map(|_| Tokens::new(rate / k, (burst / k).max(1)))
        .collect()
}

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
#[derive(Debug, Default, Clone)]
pub struct ReplaySink {
    digest: [u64; 4],
    /// First-copy responses replayed.
    pub responses: u64,
    /// Lane events applied.
    pub events: u64,
}

/// The replay digest's hasher: fixed seed, the same at every replica (and pinned version).
const DIGEST_HASH: foldhash::quality::FixedState =
    foldhash::quality::FixedState::with_seed(0x7679_726e_5245_5350);

impl ReplaySink {
    /// The multiset digest of every first-copy response replayed so far.
    pub fn digest(&self) -> Hash {
        let mut h = [0u8; 32];
        for (i, x) in self.digest.iter().enumerate() {
            h[8 * i..8 * i + 8].copy_from_slice(&x.to_le_bytes());
        }
        h
    }

    /// Fold one response's bytes into the digest.
    fn add(&mut self, bytes: &[u8]) {
        use std::hash::BuildHasher;
        let h = DIGEST_HASH.hash_one(bytes);
        let d = &mut self.digest;
        d[0] = d[0].wrapping_add(h);
        d[1] = d[1].wrapping_add(h.wrapping_mul(h));
        d[2] = d[2].wrapping_add(bytes.len() as u64);
        d[3] = d[3].wrapping_add(1);
    }
}

impl crate::replay_tile::ReportingSink for ReplaySink {
    fn report(&self) -> crate::replay_tile::SinkReport {
        crate::replay_tile::SinkReport {
            responses: self.responses,
            events: self.events,
            digest: self.digest(),
        }
    }
}

impl From<crate::replay_tile::SinkReport> for ReplaySink {
    fn from(r: crate::replay_tile::SinkReport) -> Self {
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
        }
    }
}

impl EngineSink for ReplaySink {
    fn respond(&mut self, r: &RespOut<'_>) {
        if !r.resend {
            self.responses += 1;
            self.add(r.bytes);
        }
    }
    fn event(&mut self, _lane: u8, _ev: &LaneEvent) {
        self.events += 1;
    }
}

/// The interim finality voter (until the consensus issue: see the module docs).
#[derive(Debug)]
pub struct InterimVoter {
    /// Its finalize signer (Simplex's ed25519 signature, what the box's finality listener
    /// checks), None if its key is not in the home's voters.
    signer: Option<vyrn_consensus::FinalizeSigner>,
    index: u8,
    epoch: u32,
    /// First height not yet voted.
    next: u64,
    /// Header hashes of held headers not yet voted, by height.
    hashes: std::collections::BTreeMap<u64, Hash>,
    /// The first height the verdict refused, and why: nothing at or after it is ever voted.
    refused: Option<(u64, Refusal)>,
    /// What the last ask was pending on (height, reason).
    pub pending: Option<(u64, Pending)>,
    /// Asks that timed out (REP_VERIFY_WAIT_MS pending): asked again, as a new view would.
    pub timeouts: u64,
    /// Votes sent, and the heights they covered.
    pub votes: u64,
    /// Highest height voted.
    pub voted: u64,
}

impl InterimVoter {
    /// A voter with `key` at `index` of the membership `voters`, voting from `first_height`.
    pub fn new(
        key: &SigningKey,
        voters: Option<&vyrn_consensus::Voters>,
        index: u8,
        epoch: u32,
        first_height: u64,
    ) -> Self {
        InterimVoter {
            signer: voters.and_then(|v| vyrn_consensus::FinalizeSigner::new(v, &key.to_bytes())),
            index,
            epoch,
            next: first_height,
            hashes: Default::default(),
            refused: None,
            pending: None,
            timeouts: 0,
            votes: 0,
            voted: first_height.saturating_sub(1),
        }
    }

    /// A header the replica holds, by height and `header_hash` (signature and chain are the
    /// verdict's to check).
    pub fn on_header(&mut self, height: u64, hash: Hash) {
        if height >= self.next && self.hashes.len() < 1 << 16 {
            self.hashes.insert(height, hash);
        }
    }

    /// The height the verdict refused and why, if any.
    pub fn refused(&self) -> Option<(u64, Refusal)> {
        self.refused
    }

    /// Ask the verdict for the longest contiguous held range from the next height; on `True`,
    /// the signed vote's bytes to `send`. Pending asks again next time.
    pub fn tick(
        &mut self,
        core: &mut ReplicaCore,
        now: u64,
        out: &mut impl ReplicaOut,
        mut send: impl FnMut(&[u8]),
    ) {
        if self.refused.is_some() {
            return;
        }
        let mut last = None;
        for (&h, hash) in self.hashes.range(self.next..) {
            if h != last.map_or(self.next, |(l, _)| l + 1)
                || h - self.next >= REP_MAX_HDRS_PER_PROPOSAL
            {
                break;
            }
            last = Some((h, *hash));
        }
        let Some((mut last_h, mut last_hash)) = last else {
            return;
        };
        // INV-REP-4: vote only on what the verdict says is held and checked.
        let first = core.verify(self.next, last_h, &last_hash, now, out);
        self.pending = match first {
            VerifyOutcome::Pending(h, p) => Some((h, p)),
            _ => None,
        };
        match first {
            VerifyOutcome::True => {}
            VerifyOutcome::Pending(h, _) if h > self.next => {
                // The blocks below the pending one are complete: vote them now.
                last_h = h - 1;
                let Some(x) = self.hashes.get(&last_h) else {
                    return;
                };
                last_hash = *x;
                if core.verify(self.next, last_h, &last_hash, now, out) != VerifyOutcome::True {
                    return;
                }
            }
            VerifyOutcome::Pending(..) => return,
            // A contradiction: never (INV-REP-4).
            VerifyOutcome::False(h, Some(r)) => {
                self.refused = Some((h, r));
                return;
            }
            // Pending past REP_VERIFY_WAIT_MS: this ask is false; the next asks afresh.
            VerifyOutcome::False(_, None) => {
                self.timeouts += 1;
                return;
            }
        }
        // One proposal per height (view h + 1 on parent view h): every honest interim voter
        // signs the same proposals, so Q of them make the listener's quorum (07 §6.8).
        let Some(signer) = &self.signer else {
            return;
        };
        for h in self.next..=last_h {
            let Some(hash) = self.hashes.get(&h) else {
                break;
            };
            let proposal = RepProposal {
                kind: ProposalKind::Headers,
                epoch: self.epoch,
                first_height: h,
                last_height: h,
                last_hash: *hash,
                excl_root: [0; 32],
            };
            let v = FinalizeVote {
                epoch: self.epoch,
                view: h + 1,
                parent_view: h,
                proposal,
                index: self.index,
                sig: signer.sign(self.epoch, h + 1, h, &proposal),
            };
            let mut b = Vec::with_capacity(176);
            if v.encode(&mut b).is_ok() {
                send(&b);
                self.votes += 1;
            }
        }
        self.voted = last_h;
        self.next = last_h + 1;
        self.hashes = self.hashes.split_off(&self.next);
    }
}

/// Which socket a queued message leaves by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Sock {
    Ctrl,
    Data,
}

/// The core's output: messages queued in one arena for the round's sends, alarms logged and
/// counted, in-order frames into the peer store.
#[derive(Debug)]
struct Io {
    arena: Vec<u8>,
    msgs: Vec<(Sock, SocketAddr, usize, usize)>,
    seq_ctrl: SocketAddr,
    /// The tenure's `seq_key`: what the box signs on the control port (NackTooOld) verifies
    /// under it.
    seq_pub: ed25519_dalek::VerifyingKey,
    /// The warm standby's control port (07 §6.8): finalize votes and certificates go there too.
    standby_ctrl: Option<SocketAddr>,
    peers: Vec<SocketAddr>,
    boxes: Vec<SocketAddr>,
    store: FrameStore,
    /// Headers held since the last round, for the voter.
    headers: Vec<(u64, Hash, u64)>,
    /// With a journal: each unjournaled block's header and ORDER bytes per substream.
    keep: bool,
    pending_hdr: std::collections::BTreeMap<u64, BlockHeader>,
    pending_order: std::collections::BTreeMap<u64, [Vec<u8>; 2]>,
    now: u64,
    c: NodeCounters,
    name: String,
    suspect_since: u64,
    /// Data box failure (07 §5.7): the gossip, its quorum, the redirects.
    down: crate::data_down::DataDown,
    /// Voter index of each entry of `peers`.
    peer_index: Vec<usize>,
    /// Per failed box: the sessions moved off it to their backup home.
    moved: Vec<Vec<u32>>,
    /// PEER_DATA_MAX_PPS.
    peer_data_tokens: Tokens,
    /// Per peer (by position in `peers`): its share of PEER_DATA_MAX_PPS and of
    /// REP_PEER_RTX_MAX_FPS (frames).
    peer_data_share: Vec<Tokens>,
    peer_rtx_share: Vec<Tokens>,
    /// The member envelope: every control message this replica sends is
    /// sealed under the link key of its destination (the box, a peer, a data box, the standby).
    sealer: Sealer,
    links: Vec<(SocketAddr, LinkKey)>,
    /// What it takes sealed: the box's HashList and SeqData, every peer's control messages.
    opener: Opener,
}

impl Io {
    /// Queue one control message to member `to`, sealed under its link key (a destination
    /// with no link key is no member: nothing is sent, `tx_unsealed` counts it).
    fn queue(&mut self, s: Sock, to: SocketAddr, f: impl FnOnce(&mut Vec<u8>) -> bool) {
        let Some((_, key)) = self.links.iter().find(|l| l.0 == to) else {
            self.c.tx_unsealed += 1;
            return;
        };
        let start = self.arena.len();
        if self.sealer.seal(&mut self.arena, key, f) {
            self.msgs.push((s, to, start, self.arena.len()));
        }
    }
}

impl ReplicaOut for Io {
    fn nack(&mut self, n: &Nack) {
        let to = self.seq_ctrl;
        self.queue(Sock::Ctrl, to, |b| n.encode(b).is_ok());
    }
    fn repair(&mut self, peer: usize, r: &RepairReq) {
        if let Some(&to) = self.peers.get(peer) {
            self.queue(Sock::Ctrl, to, |b| r.encode(b).is_ok());
        }
    }
    fn ack(&mut self, a: &RepAck) {
        let to = self.seq_ctrl;
        self.queue(Sock::Ctrl, to, |b| a.encode(b).is_ok());
    }
    fn rx_alarm(&mut self, a: RxAlarm) {
        match a {
            RxAlarm::Path {
                path,
                raised,
                silent,
            } => eprintln!(
                "{}: alarm=REP_A_PATH state={} path={} cause={}",
                self.name,
                if raised { "raised" } else { "cleared" },
                if path == 0 { "A" } else { "B" },
                if silent { "silence" } else { "loss" }
            ),
            // Once per silence (order RX repeats it while the silence lasts).
            RxAlarm::Suspect { last_rx_ns } if last_rx_ns != self.suspect_since => {
                self.suspect_since = last_rx_ns;
                eprintln!(
                    "{}: failover suspicion (07 §9.1): no frame on either path since t={} ms",
                    self.name,
                    last_rx_ns / 1_000_000
                )
            }
            RxAlarm::Suspect { .. } => {}
        }
    }
    fn data_fetch(&mut self, d: u8, f: &DataFetch) {
        if let Some(&to) = self.boxes.get(d as usize) {
            self.queue(Sock::Data, to, |b| f.encode(b).is_ok());
        }
    }
    fn peer_data_fetch(&mut self, peer: usize, key: PktKey, pkt_hash: u64) {
        // 07 §5.5 source 2: one peer, round robin (the data side chose it).
        if let Some(&to) = self.peers.get(peer) {
            let m = vyrn_wire::msg::ctrl::PeerDataFetch {
                session: key.session,
                pkt_seq: key.pkt_seq,
                pkt_hash,
            };
            self.queue(Sock::Ctrl, to, |b| m.encode(b).is_ok());
            self.c.peer_data_asked += 1;
        }
    }
    fn seq_data_req(&mut self, key: PktKey, pkt_hash: u64) {
        // 07 §5.5 source 3: the sequencer's control core, from its lanes' retention.
        let m = vyrn_wire::msg::ctrl::SeqDataReq {
            session: key.session,
            pkt_seq: key.pkt_seq,
            pkt_hash,
        };
        let to = self.seq_ctrl;
        self.queue(Sock::Ctrl, to, |b| m.encode(b).is_ok());
        self.c.seq_data_asked += 1;
    }
    fn hash_list_req(&mut self, r: &HashListReq) {
        let to = self.seq_ctrl;
        self.queue(Sock::Ctrl, to, |b| r.encode(b).is_ok());
    }
    fn copy_mismatch(&mut self, m: &CopyMismatch, _seq_pkt: &[u8], _data_pkt: &[u8]) {
        self.c.copy_mismatches += 1;
        // Evidence against the session's client (07 §5.6): the first few logged, all counted.
        if self.c.copy_mismatches <= 3 {
            let hex8 = |h: &Hash| {
                h[..8]
                    .iter()
                    .map(|b| format!("{b:02x}"))
                    .collect::<String>()
            };
            eprintln!(
                "{}: evidence=CopyMismatch session={} pkt_seq={} seq_hash={}… data_hash={}… (07 §5.6: the sequencer's copy is canonical; later ones counted in vyrn_replica_copy_mismatches_total)",
                self.name,
                m.session,
                m.pkt_seq,
                hex8(&m.seq_hash),
                hex8(&m.data_hash)
            );
        }
    }
    fn data_alarm(&mut self, a: DataAlarm) {
        // Per-packet outcomes are counted; box state changes are logged.
        match a {
            DataAlarm::Unavailable { .. } => {
                self.c.unavailable += 1;
                if self.c.unavailable <= 3 {
                    eprintln!(
                        "{}: data tier: {a:?} (every source asked; later ones counted)",
                        self.name
                    );
                }
            }
            _ => eprintln!("{}: data tier: {a:?}", self.name),
        }
    }
    fn fault(&mut self, f: &Fault) {
        self.c.seq_faults += 1;
        eprintln!(
            "{}: alarm=SEQ_FAULT {:?} at block {} (07 §3.12, §10.1): that block and every later one is refused",
            self.name, f.err, f.height
        );
    }
    fn block(&mut self, _b: &BlockRoots) {
        self.c.blocks += 1;
    }
    fn header(&mut self, h: &BlockHeader) {
        self.headers.push((h.height, h.header_hash(), h.last_step));
        if self.keep {
            self.pending_hdr.insert(h.height, *h);
            while self.pending_hdr.len() > JOURNAL_PENDING_MAX {
                self.pending_hdr.pop_first();
            }
        }
    }
    fn order_bytes(&mut self, stream: u8, height: u64, bytes: &[u8]) {
        if self.keep && !bytes.is_empty() {
            self.pending_order.entry(height).or_default()[(stream & 1) as usize]
                .extend_from_slice(bytes);
            while self.pending_order.len() > JOURNAL_PENDING_MAX {
                self.pending_order.pop_first();
            }
        }
    }
    fn frame(&mut self, stream: u8, frame_seq: u64, frame: &[u8]) {
        let now = self.now;
        self.store.store(stream, frame_seq, frame, now);
    }
}

/// A replica process's state: the core and its sockets.
#[derive(Debug)]
pub struct Node {
    core: ReplicaCore,
    paths: [UdpPort; 2],
    ctrl: UdpPort,
    data: UdpPort,
    rx: RxBatch,
    io: Io,
    voter: InterimVoter,
    /// The Simplex voter (07 §6.3), in place of the interim one when configured.
    simplex: Option<crate::voter::SimplexVoter>,
    sink: ReplaySink,
    /// Replay's tile, polled in turn with the core (`replay_tile`, before its thread starts).
    tile: Option<ReplayTile<ReplaySink>>,
    /// Replay's tile on its own thread.
    replay_thread: Option<ReplayThread>,
    epoch: u32,
    last_tick: u64,
    /// When the order journal's buffer was last written out ([`ORDER_FLUSH_NS`]).
    last_order_flush: u64,
    /// A restarted replica's own order journal, per substream: the next frame to take from it
    /// and the last it held at start (07 §4.10; the network fills the rest).
    own: [(u64, u64); 2],
    /// Frames taken from `own` for one poll (reused).
    own_buf: Vec<u8>,
    own_ends: Vec<usize>,
    /// Held blocks' (height, last_step), oldest first, until they are voted and replayed.
    held: std::collections::VecDeque<(u64, u64)>,
    journal: Option<NodeJournal>,
    /// Lab fault (`vyrn replica --lab-cut-path`): from this time on, every datagram of the path
    /// is read and dropped, as if its link were down (07 §14 "path down").
    cut: [Option<u64>; 2],
    /// REP_A_DIVERGE's `Diverge` message and when it last went to the sequencer: repeated
    /// every [`DIVERGE_REPEAT_NS`] (UDP may lose it; the sequencer halts once).
    diverge: Option<(Vec<u8>, u64)>,
    /// Lab: datagrams from the data boxes dropped from this time on ([`Node::cut_data`]).
    data_cut: Option<u64>,
    /// The home's sessions (07 §5.7 moves those of a failed data box).
    sessions: Vec<u32>,
    /// 07 §7.5's snapshots (`snapshot_blocks`).
    snaps: Option<NodeSnaps>,
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
        if h.path_port == 0 {
            return Err("the home's file sets no path_port: replica processes join the paths at a fixed port".into());
        }
        let ctrl_ip = me.ctrl_addr.ip();
        let seq_ctrl = SocketAddr::new(std::net::IpAddr::V4(h.box_ip), h.ctrl_port);
        let peers: Vec<SocketAddr> = h
            .voters_members
            .iter()
            .filter(|v| v.index != cfg.index)
            .map(|v| v.ctrl_addr)
            .collect();
        let peer_index: Vec<usize> = h
            .voters_members
            .iter()
            .filter(|v| v.index != cfg.index)
            .map(|v| v.index)
            .collect();
        let n_peers = peer_index.len();
        // Q of 07 §5.7: n − f with f = ⌊(n − 1)/3⌋.
        let n_voters = h.voters_members.len();
        let quorum = vyrn_home::quorum(n_voters) as u32;
        let boxes: Vec<SocketAddr> = h.databoxes.iter().map(|d| d.dest_addr(cfg.index)).collect();
        // A link key with every member this replica talks to, agreed from its
        // vote key and theirs (vyrn_wire::msg::seal).
        let agree = |k: &ed25519_dalek::VerifyingKey, what: &str| {
            LinkKey::agree(&cfg.vote_key, k).ok_or_else(|| format!("{what}: no link key"))
        };
        let mut links: Vec<(SocketAddr, LinkKey)> = Vec::new();
        let mut opener = Opener::new(h.epoch);
        let to_box = agree(&h.seq_pub, "seq_pub")?;
        opener.add(seal::from::BOX_HASHER, to_box.clone());
        opener.add(seal::from::BOX_CTRL, to_box.clone());
        links.push((seq_ctrl, to_box));
        for v in h.voters_members.iter().filter(|v| v.index != cfg.index) {
            let k = agree(&v.vote_key, "a peer's vote_key")?;
            opener.add(seal::from::voter(v.index), k.clone());
            links.push((v.ctrl_addr, k));
        }
        for (d, a) in h.databoxes.iter().zip(&boxes) {
            links.push((*a, agree(&d.link_key, "a data box's link_key")?));
        }
        if let (Some(a), Some(k)) = (h.standby_ctrl, h.standby_key) {
            links.push((a, agree(&k, "the standby's link_key")?));
        }
        let open = |c: UdpConfig, what: &str| UdpPort::open(&c).map_err(|e| format!("{what}: {e}"));
        let pc = |i: usize| {
            // 07 §3.1: each path joined on this voter's own interface on that path's network.
            let mut c = UdpConfig::multicast_receiver_on(
                PATH_GROUPS[i],
                h.path_port + i as u16,
                me.path_ips[i],
            )
            .with_batch(RX_BATCH);
            c.recv_buffer = Some(8 << 20);
            open(c, if i == 0 { "path A" } else { "path B" })
        };
        let paths = [pc(0)?, pc(1)?];
        let mut cc = UdpConfig::new(me.ctrl_addr).with_batch(RX_BATCH);
        cc.recv_buffer = Some(4 << 20);
        let ctrl = open(cc, "control socket")?;
        let data_addr = match me.data_addr {
            Some(a) => a,
            None if h.databoxes.is_empty() => SocketAddr::new(ctrl_ip, 0),
            None => return Err(format!("voter {} has no data_addr", cfg.index)),
        };
        let mut dc = UdpConfig::new(data_addr).with_batch(RX_BATCH);
        dc.recv_buffer = Some(8 << 20);
        let data = open(dc, "data socket")?;
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
        let (mut core, mut tile) = if cfg.replay_tile {
            let (core, mut tile) = if cfg.replay_lanes > 0 {
                let idle = if cfg.replay_lane_cores.is_empty() {
                    crate::replay_tile::Idle::Backoff
                } else {
                    crate::replay_tile::Idle::Spin
                };
                ReplicaCore::new_split_lanes(
                    cc,
                    crate::replay_tile::REPLAY_RING_BYTES,
                    ReplaySink::default(),
                    crate::replay_split::Workers::Threads {
                        n: cfg.replay_lanes,
                        cores: cfg.replay_lane_cores.clone(),
                        idle,
                    },
                    crate::replay_split::SplitSlots::default(),
                )?
            } else {
                ReplicaCore::new_split(
                    cc,
                    crate::replay_tile::REPLAY_RING_BYTES,
                    ReplaySink::default(),
                )?
            };
            tile.prefault(REPLAY_COPIES);
            (core, Some(tile))
        } else {
            (ReplicaCore::new(cc)?, None)
        };
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
        let mut snaps = match (
            cfg.snapshot_blocks,
            cfg.journal.as_ref().and_then(|d| d.first()),
        ) {
            (0, _) => None,
            (_, None) => return Err("snapshots need a journal (--journal)".into()),
            (every, Some(d0)) => {
                let n = h.voters.max(1) as u64;
                let rb = root_blocks.ok_or("snapshots need state roots (the Simplex voter)")?;
                if every % (n * rb) != 0 {
                    return Err(format!(
                        "snapshot interval {every} blocks: not a multiple of voters × REP_ROOT_BLOCKS = {} (07 §7.5: snapshots fall on root heights)",
                        n * rb
                    ));
                }
                let mut policy =
                    crate::replay::SnapPolicy::for_participant(every, cfg.index as u64, n, h.epoch);
                // Section 7: the REP_Membership in force (its body digest, 07 §13.1).
                if let Some(m) = &h.membership {
                    policy.replication.membership_hash = m.body_digest();
                }
                let set = match tile.as_mut() {
                    Some(t) => {
                        t.set_snapshots(policy.clone());
                        true
                    }
                    None => core.set_snapshots(policy.clone()),
                };
                if !set {
                    return Err("snapshots: replay is on a tile the node does not hold".into());
                }
                let dir = crate::snapshots::SnapshotDir::open(&d0.join("snapshots"))
                    .map_err(|e| format!("snapshot area: {e}"))?;
                Some(NodeSnaps {
                    dir,
                    policy,
                    pending: Default::default(),
                    headers: Default::default(),
                    found: Ok(Default::default()),
                })
            }
        };
        // 07 §8.2: the block journal, recovered and verified before anything is received.
        let journal = match &cfg.journal {
            None => None,
            Some(dirs) => {
                let mut jc = JournalConfig::new(dirs.clone());
                jc.verifying_key = Some(h.seq_pub);
                jc.backend = cfg.journal_backend;
                let (journal, recovered) =
                    BlockJournal::open(jc).map_err(|e| format!("journal: {e:?}"))?;
                let every = if cfg.journal_sync_ns == 0 {
                    JOURNAL_SYNC_NS
                } else {
                    cfg.journal_sync_ns
                };
                // The cert journal, mirrored on the first two drives (07 §8.2).
                let certs = crate::journal::cert::CertJournal::open(dirs)
                    .map_err(|e| format!("cert journal: {e}"))?;
                Some(NodeJournal::start(
                    journal,
                    certs,
                    recovered,
                    every,
                    cfg.journal_cores.clone(),
                ))
            }
        };
        // 07 §7.5 "Loading": what a restart finds in the snapshot area, each file against the
        // root its certificate certifies (the cert journal read-only: recovered above).
        if let (Some(sn), Some(dirs)) = (snaps.as_mut(), cfg.journal.as_deref()) {
            sn.found = match &h.membership {
                Some(m) => crate::voter::verify_cert_journal(
                    &dirs[..2.min(dirs.len())],
                    m,
                    root_blocks.unwrap_or(0),
                )
                .map(|c| c.roots),
                None => Ok(Default::default()),
            }
            .and_then(|roots| {
                crate::snapshots::audit(sn.dir.path(), &h.engine, &roots).map_err(|e| e.to_string())
            });
        }
        for s in &h.engine.sessions {
            core.data_mut().set_home(s.session, h.data_home(s.session));
        }
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
                .join(crate::order_journal::ORDER_DIR)
                .join(format!("e{}-t0", h.epoch));
            let oj = crate::order_journal::OrderJournal::open(
                crate::order_journal::OrderJournalConfig::new(dir),
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
        // The voting set: the home's REP_Membership when it names one (07 §13.1, checked at
        // load), else the `[voter.N]` sections' keys.
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
            (Some(_), None) => {
                return Err("the home's vote keys do not form a voting set".to_string())
            }
            (Some(sc), Some(v)) => {
                // 07 §8.2: the cert journal's newest verified certificate is the engine's floor.
                let floor = cfg
                    .journal
                    .as_ref()
                    .and_then(|dirs| crate::voter::newest_floor(dirs, v));
                if let Some((f, p)) = &floor {
                    eprintln!(
                        "replica {}: consensus floor from the cert journal: view {}, final height {}",
                        cfg.index,
                        f.proposal.round.view().get(),
                        p.last_height
                    );
                }
                Some(
                    crate::voter::SimplexVoter::start(
                        sc,
                        v.clone(),
                        cfg.index as u8,
                        &cfg.vote_key.to_bytes(),
                        floor,
                    )
                    .map_err(|e| format!("the consensus engine: {e}"))?,
                )
            }
        };
        Ok(Node {
            cut: [None; 2],
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
                name: format!("replica {}", cfg.index),
                suspect_since: u64::MAX,
                down: crate::data_down::DataDown::new(h.databoxes.len() as u8, quorum, cfg.index),
                peer_index,
                moved: vec![Vec::new(); h.databoxes.len()],
                peer_data_tokens: Tokens::new(PEER_DATA_MAX_PPS, 4096),
                peer_data_share: per_peer(n_peers, PEER_DATA_MAX_PPS, 4096),
                peer_rtx_share: per_peer(n_peers, vyrn_wire::consts::REP_PEER_RTX_MAX_FPS, 4096),
                sealer: Sealer::new(seal::from::voter(cfg.index), h.epoch, seal::start_seq()),
                links,
                opener,
            },
            voter: InterimVoter::new(&cfg.vote_key, voters.as_ref(), cfg.index as u8, h.epoch, 1),
            simplex,
            sink: ReplaySink::default(),
            tile,
            replay_thread: None,
            epoch: h.epoch,
            last_tick: 0,
            last_order_flush: 0,
            own,
            own_buf: Vec::new(),
            own_ends: Vec::new(),
            held: Default::default(),
            journal,
            diverge: None,
            data_cut: None,
            sessions: h.engine.sessions.iter().map(|s| s.session).collect(),
            snaps,
        })
    }

    /// Hand the snapshots replay took whose block header is known (07 §7.5: `header_hash(h)`
    /// goes in the file's header) to the journal's writer thread; rare (one per snapshot
    /// interval), off the per-packet path.
    fn write_snapshots(&mut self) {
        let Some(sn) = self.snaps.as_mut() else {
            return;
        };
        while let Some(t) = self.core.take_snapshot() {
            sn.pending.push_back(t);
            if sn.pending.len() > SNAPS_PENDING {
                // Its header never came: not written (counted), the newer ones go on.
                sn.pending.pop_front();
                self.io.c.snapshot_errors += 1;
            }
        }
        while let Some(hash) = sn
            .pending
            .front()
            .and_then(|(h, _)| sn.headers.get(h).copied())
        {
            let Some((h, mut file)) = sn.pending.pop_front() else {
                break;
            };
            // The journal's writer thread writes it (07 §7.2's storage core): its fsync never
            // stalls this thread.
            let handed = vyrn_engine::snapshot::set_header_hash(&mut file, &hash).is_ok()
                && self
                    .journal
                    .as_mut()
                    .is_some_and(|j| j.submit_snapshot(sn.dir.clone(), h, file));
            if !handed {
                self.io.c.snapshot_errors += 1;
            }
        }
    }

    /// With snapshots on: their schedule, and what the audit at start found in the area.
    pub fn snapshots(
        &self,
    ) -> Option<(
        &crate::replay::SnapPolicy,
        &Result<crate::snapshots::SnapAudit, String>,
    )> {
        self.snaps.as_ref().map(|s| (&s.policy, &s.found))
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
        c
    }

    /// The interim voter.
    pub fn voter(&self) -> &InterimVoter {
        &self.voter
    }

    /// The Simplex voter, if this replica runs one.
    pub fn simplex(&self) -> Option<&crate::voter::SimplexVoter> {
        self.simplex.as_ref()
    }

    /// Every height through this one was checked true by this replica's verdict (voted).
    pub fn voted(&self) -> u64 {
        self.simplex.as_ref().map_or(self.voter.voted, |v| v.voted)
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
            crate::replay_tile::Idle::Spin
        } else {
            crate::replay_tile::Idle::Backoff
        };
        self.replay_thread = Some(crate::replay_tile::spawn(tile, clock, core, idle)?);
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
    pub fn store(&self) -> crate::frame_store::StoreCounters {
        self.io.store.counters()
    }

    /// The order journal's counters, if this replica journals.
    pub fn order_journal(&self) -> Option<crate::order_journal::OrderJournalCounters> {
        self.io.store.journal().map(|j| j.counters())
    }

    /// Lab fault injection (07 §14 "path down"): from `from_ns` on
    /// (this process's clock, as `poll` gets it), drop every datagram of path `path` (0 = A,
    /// 1 = B) unread, as a cut link would. The replica must raise REP_A_PATH and go on, on the
    /// other path.
    pub fn cut_path(&mut self, path: u8, from_ns: u64) {
        if let Some(c) = self.cut.get_mut(path as usize) {
            *c = Some(from_ns);
        }
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
                DownStep::Gossip(d) => {
                    let m = vyrn_wire::msg::ctrl::DataDown { d };
                    for i in 0..self.io.peers.len() {
                        let to = self.io.peers[i];
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

    /// Lab fault injection: from `from_ns` on, drop every datagram from the data boxes unread
    /// (this replica's link to the data tier cut). Its payloads must then come from its peers
    /// (`PeerDataFetch`, 07 §5.5 source 2).
    pub fn cut_data(&mut self, from_ns: u64) {
        self.data_cut = Some(from_ns);
    }

    /// One round at `now` (ns on this process's monotonic clock). True if anything was done.
    pub fn poll(&mut self, now: u64) -> Result<bool, vyrn_engine::home::ReplayError> {
        self.io.now = now;
        let mut work = 0;
        for path in 0..2u8 {
            if let Ok(n) = self.paths[path as usize].recv_batch(&mut self.rx) {
                work += n;
                if self.cut[path as usize].is_some_and(|t| now >= t) {
                    self.io.c.path_cut_drops += n as u64;
                    continue;
                }
                self.io.c.path_rx[path as usize] += n as u64;
                for p in self.rx.iter() {
                    self.core.on_path_frame(path, p.data, now, &mut self.io);
                }
            }
        }
        if let Ok(n) = self.ctrl.recv_batch(&mut self.rx) {
            work += n;
            for p in self.rx.iter() {
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
            let cut = self.data_cut.is_some_and(|t| now >= t);
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
        // A restarted replica's own frames, a batch per poll after the sockets were read: a
        // backlog fed before reading them let the kernel drop live frames meanwhile.
        work += self.feed_own_journal(now);
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
            for (h, hash, last_step) in self.io.headers.drain(..) {
                match self.simplex.as_mut() {
                    Some(v) => v.on_header(h, hash),
                    None => self.voter.on_header(h, hash),
                }
                if self.held.len() < 1 << 16 {
                    self.held.push_back((h, last_step));
                }
                if let Some(sn) = self.snaps.as_mut().filter(|sn| sn.policy.at(h)) {
                    sn.headers.insert(h, hash);
                    while sn.headers.len() > 4 * SNAPS_PENDING {
                        sn.headers.pop_first();
                    }
                }
            }
            self.write_snapshots();
        }
        if let Some(v) = self.simplex.as_mut() {
            // The desk answers on every round (the engine waits on it), the verdict's timers
            // ran above.
            let io = &mut self.io;
            let mut outs: Vec<DeskOut> = Vec::new();
            if v.poll(&mut self.core, io, now, |o| outs.push(o.clone())) {
                work += 1;
            }
            for o in outs {
                let mut b = Vec::with_capacity(256);
                // 07 §6.8: votes and certificates to the sequencer's and the standby's control
                // ports, so both learn finality at the same hop.
                let standby = matches!(o, DeskOut::Vote(_) | DeskOut::Cert(_))
                    .then_some(self.io.standby_ctrl)
                    .flatten();
                let ok = match &o {
                    DeskOut::Vote(fv) => fv.encode(&mut b).is_ok(),
                    DeskOut::Cert(c) => {
                        b.push(vyrn_wire::msg::ctrl::ty::FINALITY_CERT);
                        let ok = c.encode(&mut b).is_ok();
                        if ok {
                            if let Some(j) = self.journal.as_mut() {
                                j.submit_cert(crate::journal::cert::CertKind::Finality, b.clone());
                            }
                        }
                        ok
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
                                j.submit_cert(crate::journal::cert::CertKind::Root, b.clone());
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
        } else if ticked {
            let mut vote = None;
            self.voter.tick(&mut self.core, now, &mut self.io, |b| {
                vote = Some(b.to_vec())
            });
            if let Some(v) = vote {
                let to = self.io.seq_ctrl;
                self.io.queue(Sock::Ctrl, to, |b| {
                    b.extend_from_slice(&v);
                    true
                });
            }
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
        self.forget_done();
        work += self.flush();
        Ok(work > 0)
    }

    /// Write every block voted since the last round to the journal (07 §8.2: "written once,
    /// when its verify passes"), and sync at most every [`JOURNAL_SYNC_NS`].
    fn journal_voted(&mut self, _now: u64) {
        let voted = self.voted();
        let Some(j) = self.journal.as_mut() else {
            return;
        };
        let from = self
            .io
            .pending_hdr
            .first_key_value()
            .map_or(voted + 1, |(&h, _)| h);
        for h in from..=voted {
            let Some(hdr) = self.io.pending_hdr.remove(&h) else {
                continue;
            };
            let [a, b] = self.io.pending_order.remove(&h).unwrap_or_default();
            let core = &self.core;
            let rec = crate::record::block_record(0, hdr, &a, &b, |f| core.block_packets(h, f));
            match rec {
                Some(r) => j.submit(h, r),
                None => j.skipped += 1,
            }
        }
        self.io.pending_order = self.io.pending_order.split_off(&(voted + 1));
    }

    /// The journal side, if this replica journals.
    pub fn journal(&self) -> Option<&NodeJournal> {
        self.journal.as_ref()
    }

    /// Hand the writer its last blocks and wait for its final sync (at the end of a run).
    pub fn sync_journal(&mut self) {
        if let Some(j) = self.journal.as_mut() {
            j.finish();
        }
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

    /// Send what the round queued, one `sendmmsg` per socket per 64 datagrams.
    fn flush(&mut self) -> usize {
        let n = self.io.msgs.len();
        if n == 0 {
            return 0;
        }
        for sock in [Sock::Ctrl, Sock::Data] {
            let mut txs = [TxPacket::new(&[]); TX_BATCH];
            let mut k = 0;
            let port = match sock {
                Sock::Ctrl => &mut self.ctrl,
                Sock::Data => &mut self.data,
            };
            let mut send = |txs: &[TxPacket<'_>], c: &mut NodeCounters| {
                let mut off = 0;
                while off < txs.len() {
                    match port.send_batch(&txs[off..]) {
                        Ok(0) | Err(_) => {
                            // Refused or full: dropped (the protocol's retries cover it).
                            c.tx_dropped += 1;
                            off += 1;
                        }
                        Ok(s) => {
                            c.tx += s as u64;
                            off += s;
                        }
                    }
                }
            };
            let mut c = self.io.c;
            for &(s, to, a, b) in &self.io.msgs {
                if s != sock {
                    continue;
                }
                txs[k] = TxPacket::to(&self.io.arena[a..b], Dest::Addr(to));
                k += 1;
                if k == TX_BATCH {
                    send(&txs[..k], &mut c);
                    k = 0;
                }
            }
            if k > 0 {
                send(&txs[..k], &mut c);
            }
            self.io.c = c;
        }
        self.io.msgs.clear();
        self.io.arena.clear();
        n
    }

    /// Run until `stop` says so: poll; when a round did nothing, block in `ppoll` on the four
    /// sockets (≤ 50 µs, the core's timers are no coarser), and once one is readable let
    /// [`BATCH_NS`] of traffic gather before the next round, so one wake-up and one
    /// `recvmmsg` per socket take many frames (a replica sharing a core wakes a few thousand
    /// times a second under load, not once per datagram). `report` is called about once a
    /// second.
    pub fn run(
        &mut self,
        clock: impl Fn() -> u64,
        stop: impl Fn() -> bool,
        mut report: impl FnMut(&Node, u64),
    ) -> Result<(), vyrn_engine::home::ReplayError> {
        let fds = self.fds();
        let mut next_report = clock() + 1_000_000_000;
        while !stop() {
            let now = clock();
            let busy = self.poll(now)?;
            if now >= next_report {
                report(self, now);
                next_report = now + 1_000_000_000;
            }
            if !busy && vyrn_nic::wait::wait_readable(&fds, WAIT_NS) {
                vyrn_nic::wait::wait_readable(&[], BATCH_NS);
            }
        }
        self.stop_replay_thread();
        self.sync_journal();
        Ok(())
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        self.stop_replay_thread();
    }
}

/// A control datagram from `src`.
fn on_ctrl(
    core: &mut ReplicaCore,
    io: &mut Io,
    epoch: u32,
    src: Option<SocketAddr>,
    b: &[u8],
    now: u64,
) {
    let Some(src) = src else {
        io.c.unknown_src += 1;
        return;
    };
    if src == io.seq_ctrl {
        // HashList and SeqData come sealed by the box; frames (order_root),
        // NackTooOld (seq_sig) and REP_DurableMark (counted only) come bare.
        let sealed = seal::Sealed::is_sealed(b);
        let b = if sealed {
            match io.opener.open(b) {
                Ok((f, body)) if f == seal::from::BOX_HASHER || f == seal::from::BOX_CTRL => body,
                Ok(_) | Err(_) => {
                    io.c.bad_seal += 1;
                    return;
                }
            }
        } else {
            b
        };
        match CtrlMsg::parse(b) {
            _ if b.len() >= 2 && u16::from_le_bytes([b[0], b[1]]) == FRAME_MAGIC => {
                // The sequencer's retransmission, unicast to this replica (07 §4.10).
                io.c.rtx_in += 1;
                core.on_path_frame(REPAIR_CHANNEL, b, now, io);
            }
            // Signed by the box (security review F17): a forged one would stop NACKs to it.
            Ok(CtrlMsg::NackTooOld(t)) if t.epoch == epoch && t.verify(&io.seq_pub) => {
                io.c.too_old += 1;
                core.on_too_old(t.stream, t.oldest_seq);
            }
            Ok(CtrlMsg::HashList(l)) if sealed => core.on_hash_list(&l, now, io),
            Ok(CtrlMsg::RepDurableMark(_)) => io.c.durable_marks += 1,
            // The canonical copy (07 §5.5 source 3, §5.6): checked like any other.
            Ok(CtrlMsg::SeqData(d)) if sealed => {
                io.c.seq_data_rx += 1;
                core.on_fetched(Source::Seq, &d.pkt, now, io);
            }
            Ok(CtrlMsg::HashList(_) | CtrlMsg::SeqData(_)) => io.c.unsealed += 1,
            _ => io.c.ctrl_bad += 1,
        }
        return;
    }
    let Some(peer) = io.peers.iter().position(|&p| p == src) else {
        io.c.unknown_src += 1;
        return;
    };
    if b.len() >= 2 && u16::from_le_bytes([b[0], b[1]]) == FRAME_MAGIC {
        // A peer-repaired frame (trusted only once its block's order_root checks, 07 §4.10):
        // into order RX as peer-repaired, for a hole only.
        core.on_path_frame(PEER_CHANNEL, b, now, io);
        return;
    }
    // Every other message from a peer comes sealed by that peer.
    let b = match io
        .opener
        .open_from(seal::from::voter(io.peer_index[peer]), b)
    {
        Ok(body) => body,
        Err(SealErr::NotSealed) => {
            io.c.unsealed += 1;
            return;
        }
        Err(_) => {
            io.c.bad_seal += 1;
            return;
        }
    };
    match CtrlMsg::parse(b) {
        // 07 §5.7: a peer's DataDown gossip, counted toward the quorum by its voter index.
        Ok(CtrlMsg::DataDown(m)) => {
            io.c.data_down_rx += 1;
            let voter = io.peer_index[peer];
            io.down.on_peer(voter, m.d, now);
        }
        // 07 §5.5: a peer asks for a payload this replica stored; answered when held, at most
        // PEER_DATA_MAX_PPS a second (the asker moves to its next source otherwise).
        Ok(CtrlMsg::PeerDataFetch(f)) => {
            let key = PktKey {
                session: f.session,
                pkt_seq: f.pkt_seq,
            };
            let Some(pkt) = core.data().payload_for(key, f.pkt_hash) else {
                io.c.peer_data_missing += 1;
                return;
            };
            if !io.peer_data_share[peer].take(now) || !io.peer_data_tokens.take(now) {
                io.c.peer_data_capped += 1;
                return;
            }
            let to = io.peers[peer];
            io.queue(Sock::Ctrl, to, |b| {
                vyrn_wire::msg::ctrl::PeerData::encode_parts(f.session, f.pkt_seq, pkt, b)
            });
            io.c.peer_data_served += 1;
        }
        // A peer's answer: checked like any pushed packet (the replica's own full hash).
        Ok(CtrlMsg::PeerData(d)) => {
            io.c.peer_data_rx += 1;
            core.on_fetched(Source::Peer(peer), &d.pkt, now, io);
        }
        Ok(CtrlMsg::RepairReq(r)) if r.epoch == epoch => {
            let to = io.peers[peer];
            // The peer's share of REP_PEER_RTX_MAX_FPS first: one peer's
            // storm never uses up the store's whole budget.
            if !io.peer_rtx_share[peer].take(now) {
                io.c.repairs_over_share += 1;
                return;
            }
            let Io {
                store,
                arena,
                msgs,
                c,
                peer_rtx_share,
                ..
            } = io;
            c.repairs_served.0 += 1;
            let served = store.serve(&r, now, |f| {
                let start = arena.len();
                arena.extend_from_slice(f);
                msgs.push((Sock::Ctrl, to, start, arena.len()));
                c.repairs_served.1 += 1;
            });
            peer_rtx_share[peer].spend(served.sent.saturating_sub(1));
        }
        _ => io.c.ctrl_bad += 1,
    }
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
        use crate::replay_tile::ReportingSink;
        let mut m = x.report();
        m.merge(&y.report());
        assert_eq!(ReplaySink::from(m).digest(), a.digest());
    }
}
