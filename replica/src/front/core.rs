//! The replica's core (07 §7.2): order RX → decoder → data side, verdict and replay, as one tile
//! with one way in per source and one way out ([`ReplicaOut`]). The `vyrn-replica` process puts
//! it on its ports; the tests drive it with the real box's frames.
//!
//! * [`ReplicaCore::on_path_frame`]: a datagram off replication path A or B. Order RX dedupes,
//!   orders and repairs; each in-order frame goes to the decoder, whose records, hashes and marks
//!   go to the data side, headers, blocks and faults to the verdict, records and steps to replay.
//! * [`ReplicaCore::on_data_frame`], [`ReplicaCore::on_fetched`]: copy 2 from a data box, and
//!   fetched packets.
//! * [`ReplicaCore::tick`]: NACKs, repair requests, RepAcks, fetch escalation, hash lag, alarms;
//!   and replay as far as its input allows.
//! * [`ReplicaCore::verify`]: the vote's check for a proposal's range (07 §6.4).

use vyrn_engine::home::{EngineSink, ReplayError};
use vyrn_engine::EngineConfig;
use vyrn_wire::decoder::{Awaiting, BlockRoots, Pos};
use vyrn_wire::header::{BlockHeader, Hash};
use vyrn_wire::layout::Layout;
use vyrn_wire::msg::ctrl::{DataFetch, HashList, HashListReq, Nack, RepAck, RepairReq};
use vyrn_wire::msg::PktKey;
use vyrn_wire::records::{PacketRecord, Step};

use crate::front::data::{CopyMismatch, DataAlarm, DataConfig, DataOut, DataSide, Source};
use crate::front::decode::{DecodedOut, Decoder, Fault};
use crate::front::order_rx::{OrderRx, RxAlarm, RxConfig, RxOut, RxVerdict};
use crate::front::quarantine::{HeaderCheck, HeldFrame, HoldFailed};
use crate::front::verdict::{Anchor, Verdicts, VerifyOutcome};
use crate::replay::tile::{ReplayTile, ReplayTx, ReportingSink};
use crate::replay::Replayer;

/// Frames a hold releases at most per call: a block vouched for after a restart's backlog was
/// held released thousands of frames in one poll, the replica's sockets overflowed meanwhile,
/// and the loss fed more peer repairs (replica/tests/catchup.rs failed 1 run in 6).
const RELEASE_BATCH: usize = 64;

/// Frames whose failed holds are counted at most (the oldest forgotten first): a hostile peer
/// cannot grow the count without bound.
const STRIKES_MAX: usize = 4096;

/// Everything a replica sends or raises.
#[allow(unused_variables)]
pub trait ReplicaOut {
    /// A NACK to the sequencer's stream core (07 §4.10).
    fn nack(&mut self, n: &Nack) {}
    /// A repair request to a peer.
    fn repair(&mut self, peer: usize, r: &RepairReq) {}
    /// A RepAck to the sequencer (07 §4.8).
    fn ack(&mut self, a: &RepAck) {}
    /// An order-path alarm (REP_A_PATH, failover suspicion).
    fn rx_alarm(&mut self, a: RxAlarm) {}
    /// A fetch from data box `d`.
    fn data_fetch(&mut self, d: u8, f: &DataFetch) {}
    /// A payload fetch from a peer.
    fn peer_data_fetch(&mut self, peer: usize, key: PktKey, pkt_hash: u64) {}
    /// A payload request to the sequencer.
    fn seq_data_req(&mut self, key: PktKey, pkt_hash: u64) {}
    /// A HashList request to the sequencer's order hasher.
    fn hash_list_req(&mut self, r: &HashListReq) {}
    /// CopyMismatch evidence (07 §5.6).
    fn copy_mismatch(&mut self, m: &CopyMismatch, seq_pkt: &[u8], data_pkt: &[u8]) {}
    /// A data-side alarm.
    fn data_alarm(&mut self, a: DataAlarm) {}
    /// The sequencer-fault alarm (07 §3.12, §10.1).
    fn fault(&mut self, f: &Fault) {}
    /// A block the decoder completed (for the journal and the finality voter).
    fn block(&mut self, b: &BlockRoots) {}
    /// A header this replica holds.
    fn header(&mut self, h: &BlockHeader) {}
    /// Frame `frame_seq` of `stream`, delivered in order (for the peer frame store, 07 §4.10).
    fn frame(&mut self, stream: u8, frame_seq: u64, frame: &[u8]) {}
    /// ORDER section bytes of `stream` belonging to block `height`, in order (for the block
    /// journal, 07 §8.2).
    fn order_bytes(&mut self, stream: u8, height: u64, bytes: &[u8]) {}
}

/// Sends and raises nothing (benches and tests that look at the core's own state).
#[derive(Debug, Default, Clone, Copy)]
pub struct NullOut;
impl ReplicaOut for NullOut {}

/// Counters of the core's own (each piece keeps its own too).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CoreCounters {
    /// Frames delivered in order to the decoder.
    pub frames: u64,
    /// Records the data side refused (a record out of layout, a mark out of order).
    pub data_refused: u64,
    /// Holds started: a peer-supplied frame held from the decoder until its block is vouched
    /// for ([`crate::front::quarantine`]).
    pub holds: u64,
    /// Holds that failed, by [`HoldFailed`] (decode, order_root, timeout, full): their
    /// peer-supplied frames were dropped and asked again, the sequencer first.
    pub holds_failed: [u64; 4],
    /// Peer-supplied frames taken as they were after failing at every source (07 §9.1).
    pub holds_given_up: u64,
    /// Frames decoded through a hold (vouched for, then released).
    pub held_frames: u64,
    /// The longest a hold stayed open so far, ns.
    pub hold_max_ns: u64,
}

/// The core's budgets: order RX's timing, the data side's, the hash-lag fault threshold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budgets {
    /// Order RX (REP_HOLE_WAIT_US, REP_ACK_US, ...).
    pub rx: crate::front::order_rx::RxTiming,
    /// The data side (REP_DATA_WAIT_US, REP_DATA_SILENCE_MS, ...).
    pub data: crate::front::data::DataTiming,
    /// REP_HASHLAG_FAULT_NS.
    pub hashlag_fault_ns: u64,
    /// REP_PEER_RING_MS, ns: how long the peer frame store keeps a frame in memory (older ones
    /// are served from the order journal, if this replica journals).
    pub peer_ring_ns: u64,
    /// How long a hold of peer-supplied frames may go with no block vouched for before it
    /// fails and the frames are asked again ([`crate::front::quarantine`]): the time from a block's
    /// last frame to its signed header — the hash lag and a block.
    pub peer_verify_ns: u64,
    /// REP_SUSPECT_ABORT_MS, ns: a failover suspicion short of Q `Silence` within this long is
    /// aborted (07 §9.1).
    pub suspect_abort_ns: u64,
    /// REP_PROMOTE_HISTORY_S, ns: the replay history a standby's replica needs to be
    /// promotable (07 §9.5).
    pub promote_history_ns: u64,
    /// REP_TAIL_WAIT_MS, ns: how long past the deposition (and `T*`) the seal leader waits for
    /// the reports it lacks (07 §9.2).
    pub tail_wait_ns: u64,
    /// How long after a replica follows a seal the next tenure's silence starts counting
    /// (07 §9.7 stage 9: promotion, B-REP-8's 3 ms): a named sequencer that never sends its
    /// first frame is then suspected like a silent one.
    pub promote_wait_ns: u64,
}

impl Default for Budgets {
    /// 07's figures.
    fn default() -> Self {
        Budgets {
            rx: Default::default(),
            data: Default::default(),
            hashlag_fault_ns: vyrn_wire::consts::REP_HASHLAG_FAULT_NS,
            peer_ring_ns: vyrn_wire::consts::REP_PEER_RING_MS * 1_000_000,
            peer_verify_ns: vyrn_wire::consts::REP_HASHLAG_FAULT_NS
                + 2 * vyrn_wire::consts::BLOCK_NS,
            suspect_abort_ns: vyrn_wire::consts::REP_SUSPECT_ABORT_MS * 1_000_000,
            promote_history_ns: vyrn_wire::consts::REP_PROMOTE_HISTORY_S * 1_000_000_000,
            tail_wait_ns: (vyrn_wire::consts::REP_TAIL_WAIT_MS * 1e6) as u64,
            promote_wait_ns: 3_000_000,
        }
    }
}

/// A dev home's FAILOVER_SILENCE_MS, ns (07: 2 ms).
pub const DEV_FAILOVER_SILENCE_NS: u64 = 1_000_000_000;
/// A dev home's REP_SUSPECT_ABORT_MS, ns (07: 5 ms).
pub const DEV_SUSPECT_ABORT_NS: u64 = 500_000_000;
/// A dev home's REP_TAIL_WAIT_MS, ns (07: 4.05 ms = fence 1.15 + detection 2.0 + a hop 0.8 +
/// 0.1, counted from `T*`, the newest frame any report names): its detection
/// ([`DEV_FAILOVER_SILENCE_NS`]) and the roles' spread ([`DEV_SUSPECT_ABORT_NS`]).
pub const DEV_TAIL_WAIT_NS: u64 = DEV_FAILOVER_SILENCE_NS + DEV_SUSPECT_ABORT_NS;

/// A dev home's REP_DATA_SILENCE_MS ([`Budgets::dev`]): 200 ms.
pub const DEV_DATA_SILENCE_NS: u64 = 200_000_000;

impl Budgets {
    /// The budgets of a home of `profile`: [`Budgets::dev`] on a dev home, 07's figures
    /// elsewhere.
    pub fn of(profile: vyrn_home::Profile) -> Self {
        match profile {
            vyrn_home::Profile::Dev => Budgets::dev(),
            _ => Budgets::default(),
        }
    }

    /// A dev home's budgets (profile `dev`: a sequencer, a data box, four replicas and the
    /// clients on two shared cores, `docs/operator.md`): RepAcks every 250 µs, the data box's
    /// DATA_HB every 1 ms, and silence means down after 200 ms (with 20 ms a clean CI machine's
    /// `vyrn up` logged BoxDown then BoxUp at start, with four replicas and their engines
    /// starting beside the data box, and again under the attack lab's bursts: three replicas
    /// voted a live data box down for a moment), a payload is fetched when 2 ms late
    /// (REP_DATA_WAIT_US is 300 µs; each fetch source gets 2 ms), and a hash may trail its record
    /// 100 ms (the order hasher is a cold tile there, sharing one core with four replicas, the
    /// data box and the clients: a 20 ms budget was exceeded under the main command's load).
    pub fn dev() -> Self {
        let mut b = Budgets::default();
        b.rx.ack_ns = 250_000;
        b.data.silence_ns = DEV_DATA_SILENCE_NS;
        b.data.wait_ns = 2_000_000;
        b.data.fetch_step_ns = 2_000_000;
        // A seal leader lists a record unavailable (07 §9.3 item 4) only once the fetch order
        // had time to ask every source at the dev step: 2 ms late, then home, a peer and the
        // sequencer 3 times, 2 ms each, with room to spare.
        b.data.seal_wait_ns = 20_000_000;
        b.hashlag_fault_ns = 100_000_000;
        b.peer_verify_ns = 500_000_000;
        // 07 §9.1 on two shared cores: the box's frames paused up to 76 ms and the roles'
        // detections spread as far (measured on the data box, the same core), so a silence of
        // FAILOVER_SILENCE_MS (2 ms) is no sign of a dead box there, and Q voters' Silence do
        // not come within REP_SUSPECT_ABORT_MS (5 ms) of each other.
        b.rx.silence_ns = DEV_FAILOVER_SILENCE_NS;
        b.suspect_abort_ns = DEV_SUSPECT_ABORT_NS;
        // The seal leader's wait (07 §9.2) runs from `T*`, the newest frame: it spans the
        // detection, so a dev home's is its 1 s silence plus the spread (with 07's 4.05 ms, or
        // 250 ms, it was over before the deposition and the standby's report came too late).
        b.tail_wait_ns = DEV_TAIL_WAIT_NS;
        // A dev standby's promotion took 20–110 ms (debug builds, two shared cores).
        b.promote_wait_ns = 2_000_000_000;
        b
    }
}

/// What the core is for: the home's layout, sessions and keys, and the tenure it follows.
#[derive(Debug, Clone)]
pub struct CoreConfig {
    /// The engine config of the home (sessions, keys, layout): replay needs it.
    pub engine: EngineConfig,
    /// Epoch.
    pub epoch: u32,
    /// Tenure.
    pub tenure: u8,
    /// The sequencer's index.
    pub sender: u8,
    /// The tenure's `seq_key`.
    pub seq_key: ed25519_dalek::VerifyingKey,
    /// Data boxes.
    pub n_boxes: u8,
    /// Peer replicas.
    pub n_peers: usize,
    /// Where the tenure's chain starts.
    pub anchor: Anchor,
}

/// The replica's core.
#[derive(Debug)]
pub struct ReplicaCore {
    rx: OrderRx,
    dec: Decoder,
    data: DataSide,
    verdicts: Verdicts,
    replay: ReplayPart,
    /// Frames order RX delivered in order, waiting for the decoder: bytes back to back in one
    /// reused buffer (no allocation per frame once warm), with their ends.
    delivered: Delivered,
    /// The other buffer of `delivered` (swapped while one is decoded).
    spare: Delivered,
    /// Peer-supplied frames held from the decoder ([`crate::front::quarantine`]).
    hold: Option<crate::front::quarantine::Hold>,
    check: HeaderCheck,
    /// Failed holds by their first peer frame (at most [`STRIKES_MAX`] frames remembered).
    strikes: std::collections::BTreeMap<(u8, u64), u32>,
    peer_verify_ns: u64,
    n_sources: u32,
    counters: CoreCounters,
    /// Where the tenure's chain starts (the seal's `H*` may be it).
    anchor: Anchor,
    /// The tenure's tail is being sealed (07 §9.3): peer frames are decoded as they come.
    sealing: bool,
    /// The datagram being taken arrived at this time (its kernel receive stamp, on the
    /// caller's clock): the decoder's hash-lag rule runs on arrivals, so time this replica's
    /// own loop spent elsewhere (serving a peer's catch-up) is not counted against the
    /// sequencer (07 §3.7, INV-REP-8 is about frames sent).
    arrived: Option<u64>,
}

/// Where replay runs: inline (one thread for every stage: the multiplexed form), or on its own
/// tile fed over a ring (`replay_tile`: 07 §7.2's replay cores).
#[derive(Debug)]
// One per core, built once: the size does not matter, an indirection on the hot path would.
#[allow(clippy::large_enum_variant)]
enum ReplayPart {
    Inline(Replayer),
    Tile(ReplayTx),
}

#[derive(Debug, Default)]
struct Delivered {
    bytes: Vec<u8>,
    /// Per frame: its end in `bytes`, substream, frame_seq, and whether a peer supplied it.
    ends: Vec<(usize, u8, u64, bool)>,
}

/// Order RX's output: NACKs and acks out, in-order frames kept for the decoder.
struct RxBridge<'a, O: ReplicaOut> {
    out: &'a mut O,
    delivered: &'a mut Delivered,
}

impl<O: ReplicaOut> RxOut for RxBridge<'_, O> {
    fn deliver(&mut self, stream: u8, fs: u64, frame: &[u8], peer: bool) {
        self.delivered.bytes.extend_from_slice(frame);
        self.delivered
            .ends
            .push((self.delivered.bytes.len(), stream, fs, peer));
    }
    fn nack(&mut self, n: &Nack) {
        self.out.nack(n);
    }
    fn repair(&mut self, peer: usize, r: &RepairReq) {
        self.out.repair(peer, r);
    }
    fn ack(&mut self, a: &RepAck) {
        self.out.ack(a);
    }
    fn alarm(&mut self, a: RxAlarm) {
        self.out.rx_alarm(a);
    }
}

/// The data side's output: sends to `out`; resolved payloads to replay's ring when replay runs
/// on its own tile.
struct DataBridge<'a, O: ReplicaOut> {
    out: &'a mut O,
    replay: &'a mut ReplayPart,
}

impl<'a, O: ReplicaOut> DataBridge<'a, O> {
    fn new(out: &'a mut O, replay: &'a mut ReplayPart) -> Self {
        DataBridge { out, replay }
    }
}

impl<O: ReplicaOut> DataOut for DataBridge<'_, O> {
    fn data_fetch(&mut self, d: u8, f: &DataFetch) {
        self.out.data_fetch(d, f);
    }
    fn peer_data_fetch(&mut self, peer: usize, key: PktKey, pkt_hash: u64) {
        self.out.peer_data_fetch(peer, key, pkt_hash);
    }
    fn seq_data_req(&mut self, key: PktKey, pkt_hash: u64) {
        self.out.seq_data_req(key, pkt_hash);
    }
    fn hash_list_req(&mut self, r: &HashListReq) {
        self.out.hash_list_req(r);
    }
    fn copy_mismatch(&mut self, m: &CopyMismatch, seq_pkt: &[u8], data_pkt: &[u8]) {
        self.out.copy_mismatch(m, seq_pkt, data_pkt);
    }
    fn alarm(&mut self, a: DataAlarm) {
        self.out.data_alarm(a);
    }
    #[inline]
    fn resolved(&mut self, lane: u8, first_lane_seq: u64, bytes: &[u8]) {
        // Inline replay reads its payloads from the data side in place.
        if let ReplayPart::Tile(t) = &mut *self.replay {
            t.payload(lane, first_lane_seq, bytes);
        }
    }
    fn excluded(&mut self, lane: u8, first_lane_seq: u64) -> bool {
        match &mut *self.replay {
            ReplayPart::Inline(p) => p.on_excluded(lane, first_lane_seq),
            // The replay tile stops on an exclusion it cannot take (`Parse::Orphan`: a record
            // it already ran), as on any input that does not fit.
            ReplayPart::Tile(t) => {
                t.excluded(lane, first_lane_seq);
                true
            }
        }
    }
}

/// The decoder's output into the data side, the verdict and replay.
struct DecBridge<'a, O: ReplicaOut> {
    data: &'a mut DataSide,
    verdicts: &'a mut Verdicts,
    replay: &'a mut ReplayPart,
    out: &'a mut O,
    now: u64,
    refused: &'a mut u64,
}

/// A decoder output that keeps nothing: the decoder re-reading frames whose output already
/// went out (a hold's released frames).
struct Discard;
impl DecodedOut for Discard {}

impl<O: ReplicaOut> DecodedOut for DecBridge<'_, O> {
    fn record(&mut self, _h: u64, at: Pos, r: &PacketRecord) {
        if self
            .data
            .on_record(
                at.stream,
                r,
                self.now,
                &mut DataBridge::new(self.out, self.replay),
            )
            .is_err()
        {
            *self.refused += 1;
        }
        match self.replay {
            ReplayPart::Inline(p) => p.on_record(r),
            ReplayPart::Tile(t) => t.record(r),
        }
    }
    fn hash(&mut self, at: Pos, lane: u8, rec: &Awaiting, pkt_hash: u64) {
        let key = PktKey {
            session: rec.session,
            pkt_seq: rec.pkt_seq,
        };
        if self
            .data
            .on_hash(
                at.stream,
                key,
                pkt_hash,
                self.now,
                &mut DataBridge::new(self.out, self.replay),
            )
            .is_err()
        {
            *self.refused += 1;
        }
        // The replay tile needs no hash: the join hands it each record's chosen payload.
        if let ReplayPart::Inline(p) = self.replay {
            p.on_hash(lane, rec.first_lane_seq, pkt_hash);
        }
    }
    fn mark(&mut self, stream: u8, height: u64, last_step: u64) {
        if self.data.on_mark(stream, height).is_err() {
            *self.refused += 1;
        }
        // 07 §7.4: replay's root clock learns a block's end from its first mark — a step of the
        // next block can be delivered before the other substream's mark closes this one.
        match self.replay {
            ReplayPart::Inline(p) => p.on_block(height, last_step),
            ReplayPart::Tile(t) => t.block(height, last_step),
        }
    }
    fn step(&mut self, s: &Step, cut: &[u64], payload: &[u8]) {
        match self.replay {
            ReplayPart::Inline(p) => {
                p.on_step(s, cut, payload);
                p.note_decoded(s.step, self.now);
            }
            ReplayPart::Tile(t) => t.step(s, cut, payload, self.now),
        }
    }
    fn block(&mut self, b: &BlockRoots) {
        // Replay learned the block's end from its first BlockMark (`mark`).
        self.verdicts.on_block(b);
        self.out.block(b);
    }
    fn order_bytes(&mut self, stream: u8, height: u64, bytes: &[u8]) {
        self.out.order_bytes(stream, height, bytes);
    }
    fn header(&mut self, h: &BlockHeader) {
        // Only a header whose seq_sig checks goes on (the voter's ledger, the journal).
        if self.verdicts.on_header(h) {
            self.out.header(h);
        }
    }
    fn header_checked(&mut self, h: &BlockHeader, sig_ok: bool) {
        if self.verdicts.on_header_checked(h, Some(sig_ok)) {
            self.out.header(h);
        }
    }
    fn fault(&mut self, f: &Fault) {
        self.verdicts.on_fault(f);
        self.out.fault(f);
    }
}

impl ReplicaCore {
    /// A core for `cfg`'s home and tenure, replay inline (every stage on the caller's thread).
    pub fn new(cfg: CoreConfig) -> Result<Self, &'static str> {
        let replay = ReplayPart::Inline(Replayer::new(cfg.engine.clone()));
        Self::with_replay(cfg, replay)
    }

    /// A core for `cfg`'s home and tenure whose replay runs on its own tile, fed over a ring of
    /// `ring_bytes` ([`crate::replay::tile`]): poll the tile on its own thread
    /// ([`crate::replay::tile::spawn`], 07 §7.2's replay cores) or in turn with the core.
    pub fn new_split<S: ReportingSink>(
        cfg: CoreConfig,
        ring_bytes: usize,
        sink: S,
    ) -> Result<(Self, ReplayTile<S>), &'static str> {
        let (tx, tile) = crate::replay::tile::pair(cfg.engine.clone(), ring_bytes, sink);
        Ok((Self::with_replay(cfg, ReplayPart::Tile(tx))?, tile))
    }

    /// [`ReplicaCore::new_split`] with the tile's engine split across cores too: the tile is
    /// the replay BBO core, the lanes run on `workers` ([`crate::replay::split`], 07 §7.2).
    pub fn new_split_lanes<S: ReportingSink + Default + Send + 'static>(
        cfg: CoreConfig,
        ring_bytes: usize,
        sink: S,
        workers: crate::replay::split::Workers,
        slots: crate::replay::split::SplitSlots,
    ) -> Result<(Self, ReplayTile<S>), &'static str> {
        let (tx, tile) =
            crate::replay::tile::pair_split(cfg.engine.clone(), ring_bytes, sink, workers, slots)
                .map_err(|_| "cannot start the replay lane threads")?;
        Ok((Self::with_replay(cfg, ReplayPart::Tile(tx))?, tile))
    }

    fn with_replay(cfg: CoreConfig, replay: ReplayPart) -> Result<Self, &'static str> {
        let lay: Layout = cfg.engine.layout;
        Ok(ReplicaCore {
            rx: OrderRx::new(RxConfig {
                book: cfg.engine.book,
                epoch: cfg.epoch,
                tenure: cfg.tenure,
                sender: cfg.sender,
                n_streams: lay.n_streams,
                n_peers: cfg.n_peers,
                timing: Default::default(),
            }),
            dec: Decoder::new(lay, cfg.anchor.height + 1)?,
            data: DataSide::new(DataConfig::new(
                cfg.engine.book,
                cfg.epoch as u16,
                cfg.n_boxes,
                cfg.n_peers,
                lay.n_streams,
            )),
            verdicts: Verdicts::new(cfg.seq_key, cfg.epoch, cfg.anchor),
            replay,
            delivered: Delivered::default(),
            spare: Delivered::default(),
            hold: None,
            check: HeaderCheck {
                seq_key: cfg.seq_key,
                epoch: cfg.epoch,
            },
            strikes: Default::default(),
            peer_verify_ns: Budgets::default().peer_verify_ns,
            n_sources: 1 + cfg.n_peers as u32,
            counters: CoreCounters::default(),
            anchor: cfg.anchor,
            sealing: false,
            arrived: None,
        })
    }

    /// Touch the working set before the first frame (a replica process's startup work, as the
    /// box's): replay's books and queues, so the hot path takes no page faults once running.
    pub fn prefault(&mut self) {
        if let ReplayPart::Inline(p) = &mut self.replay {
            p.prefault();
        }
        self.data.prefault();
    }

    /// Replay's end of the ring when replay runs on its own tile.
    pub fn replay_tx(&self) -> Option<&ReplayTx> {
        match &self.replay {
            ReplayPart::Tile(t) => Some(t),
            ReplayPart::Inline(_) => None,
        }
    }

    /// Push what the stages staged for the replay tile (nothing when replay is inline).
    fn flush(&mut self) {
        if let ReplayPart::Tile(t) = &mut self.replay {
            t.flush();
        }
    }

    /// Push what is staged for the replay tile; true when nothing is left staged (always,
    /// inline). A runner stopping the tile's thread pushes the rest first.
    pub fn flush_replay(&mut self) -> bool {
        match &mut self.replay {
            ReplayPart::Tile(t) => t.flush(),
            ReplayPart::Inline(_) => true,
        }
    }

    /// Block `height`'s PacketRecords in O-order (substream A, then B; Advance records left
    /// out, as in `data_root`): `f(pkt_hash, packet)` for each, if every one is resolved.
    /// False (and nothing called) otherwise.
    pub fn block_packets(&self, height: u64, f: impl FnMut(u64, &[u8])) -> bool {
        self.data.block_packets(height, f)
    }

    /// Block `height`'s unavailable list ([`DataSide::block_unavail`]: a seal block's excluded
    /// packets, 07 §9.4; the journal record's list, §8.2).
    pub fn block_unavail(&self, height: u64) -> Vec<PktKey> {
        self.data.block_unavail(height)
    }

    /// Heights at or below `height` are done with (voted and final, or journaled): the verdict
    /// and the data side drop their state for them, so a long-running replica stays bounded.
    /// Replay is not affected (it consumes its input as it goes).
    pub fn forget_through(&mut self, height: u64) {
        self.verdicts.forget_through(height);
        self.data.release_through(height);
    }

    /// The budgets (each a figure of 07 §15 that a dev home on two shared cores overrides).
    pub fn set_budgets(&mut self, b: &Budgets) {
        self.rx.set_timing(b.rx);
        self.data.set_timing(b.data);
        self.dec.set_hashlag_fault_ns(b.hashlag_fault_ns);
        self.peer_verify_ns = b.peer_verify_ns;
    }

    /// Counters.
    pub fn counters(&self) -> CoreCounters {
        self.counters
    }

    /// Order RX (contiguous frame_seq, path alarms, counters).
    pub fn order_rx(&self) -> &OrderRx {
        &self.rx
    }

    /// Order RX, to set its bounds ([`OrderRx::set_held_bytes_max`]).
    pub fn order_rx_mut(&mut self) -> &mut OrderRx {
        &mut self.rx
    }

    /// The data side (payload states, the store).
    pub fn data(&self) -> &DataSide {
        &self.data
    }

    /// The data side, to set sessions' data homes.
    pub fn data_mut(&mut self) -> &mut DataSide {
        &mut self.data
    }

    /// The verdicts.
    pub fn verdicts(&self) -> &Verdicts {
        &self.verdicts
    }

    /// Replay's (decoded, replayed) steps.
    pub fn replay_lag(&self) -> (u64, u64) {
        match &self.replay {
            ReplayPart::Inline(p) => p.lag(),
            ReplayPart::Tile(t) => t.lag(),
        }
    }

    /// Replay's counters (the replay tile's as it last reported them).
    pub fn replay_counters(&self) -> crate::replay::ReplayCounters {
        match &self.replay {
            ReplayPart::Inline(p) => p.counters(),
            ReplayPart::Tile(t) => t.progress().counters,
        }
    }

    /// Replay lag in time, receipt to applied (07 §7.3); from the replay tile's last report
    /// when it runs on its own.
    pub fn replay_lag_time(&self) -> crate::replay::ReplayLag {
        match &self.replay {
            ReplayPart::Inline(p) => p.lag_time(),
            ReplayPart::Tile(t) => t.progress().lag,
        }
    }

    /// Take a REP_Snapshot at the root heights `p` names (07 §7.5). Replay inline only: a
    /// replay tile is set before it runs ([`crate::replay::tile::ReplayTile::set_snapshots`]).
    /// False when replay is on a tile.
    pub fn set_snapshots(&mut self, p: crate::replay::SnapPolicy) -> bool {
        match &mut self.replay {
            ReplayPart::Inline(r) => {
                r.set_snapshots(p);
                true
            }
            ReplayPart::Tile(_) => false,
        }
    }

    /// The oldest snapshot replay took and nobody took yet: `(height, REP_Snapshot file)`, its
    /// `header_hash` still zero ([`vyrn_engine::snapshot::set_header_hash`]).
    pub fn take_snapshot(&mut self) -> Option<crate::replay::Taken> {
        match &mut self.replay {
            ReplayPart::Inline(r) => r.take_snapshot(),
            ReplayPart::Tile(t) => t.take_snapshot(),
        }
    }

    /// Start inline replay from a REP_Snapshot (07 §7.6, [`crate::replay::Replayer::restore`]).
    /// A replay tile is restored before it runs ([`crate::replay::tile::ReplayTile::restore`]).
    pub fn restore_replay(
        &mut self,
        file: &[u8],
    ) -> Result<vyrn_engine::snapshot::SnapHeader, crate::replay::RestoreError> {
        match &mut self.replay {
            ReplayPart::Inline(r) => r.restore(file),
            ReplayPart::Tile(_) => Err(crate::replay::RestoreError::OnTile),
        }
    }

    /// Take a state root every `root_blocks` heights (07 §7.4; 0: off); the chain starts after
    /// `anchor`.
    pub fn set_root_blocks(&mut self, root_blocks: u64, anchor: &crate::front::verdict::Anchor) {
        match &mut self.replay {
            ReplayPart::Inline(p) => p.set_roots(root_blocks, anchor.height, anchor.last_step),
            ReplayPart::Tile(t) => {
                t.set_roots(root_blocks, anchor.height, anchor.last_step);
                t.flush();
            }
        }
    }

    /// `R(h)` if replay took it (and, on its own tile, reported it).
    pub fn root(&self, h: u64) -> Option<Hash> {
        match &self.replay {
            ReplayPart::Inline(p) => p.root(h),
            ReplayPart::Tile(t) => t.root(h),
        }
    }

    /// Frames `range` of `stream` come from this replica's own order journal (see
    /// [`OrderRx::expect_local`]).
    pub fn expect_local(&mut self, stream: u8, range: Option<(u64, u64)>) {
        self.rx.expect_local(stream, range);
    }

    /// A datagram off replication path `path` at `now`; every frame it unblocks is decoded.
    pub fn on_path_frame(
        &mut self,
        path: u8,
        bytes: &[u8],
        now: u64,
        out: &mut impl ReplicaOut,
    ) -> RxVerdict {
        let v = self.rx.on_frame(
            path,
            bytes,
            now,
            &mut RxBridge {
                out: &mut *out,
                delivered: &mut self.delivered,
            },
        );
        self.decode_delivered(now, out);
        self.flush();
        v
    }

    /// [`ReplicaCore::on_path_frame`] for a datagram that arrived at `arrived` (≤ `now`, the
    /// kernel's receive stamp on the caller's clock): the frames it delivers are decoded at
    /// their arrival for the hash-lag rule (07 §3.7), everything else runs at `now`.
    pub fn on_path_frame_arrived(
        &mut self,
        path: u8,
        bytes: &[u8],
        now: u64,
        arrived: u64,
        out: &mut impl ReplicaOut,
    ) -> RxVerdict {
        self.arrived = Some(arrived.min(now));
        let v = self.on_path_frame(path, bytes, now, out);
        self.arrived = None;
        v
    }

    /// Freeze the tail on a failover suspicion (07 §9.1): order RX buffers the tenure's frames.
    pub fn freeze(&mut self) {
        self.rx.freeze();
    }

    /// The suspicion was aborted (§9.1): the buffered frames are taken and decoded now.
    pub fn unfreeze(&mut self, now: u64, out: &mut impl ReplicaOut) {
        self.rx.unfreeze(&mut RxBridge {
            out: &mut *out,
            delivered: &mut self.delivered,
        });
        self.decode_delivered(now, out);
        self.flush();
    }

    /// The tenure is deposed here (§9.2, INV-REP-5): order RX takes none of its frames again.
    pub fn depose(&mut self) {
        self.rx.depose();
    }

    /// 07 §9.3: the seal's `F*` is known here — fetch what this replica lacks up to it from
    /// its peers ([`OrderRx::seal_fetch`]), and decode the tail as it is: frames a peer
    /// supplied are held for no header (none comes for the open block; the seal stands in).
    pub fn seal_fetch(
        &mut self,
        to: [u64; 2],
        hints: &[crate::front::order_rx::FetchHint],
        now: u64,
        out: &mut impl ReplicaOut,
    ) {
        if !self.sealing {
            self.sealing = true;
            if let Some(h) = self.hold.as_mut() {
                h.seal();
            }
        }
        self.rx.seal_fetch(to, hints, now);
        self.tick_fetch(now, out);
    }

    /// The seal's fetch asks at once, and what a hold kept is released.
    fn tick_fetch(&mut self, now: u64, out: &mut impl ReplicaOut) {
        self.rx_tick_and_decode(now, out);
        self.flush();
    }

    /// Order RX's clock, then decoding what it delivered — which settles a hold after the
    /// batch (a hold settled before it is fed would rewind frames order RX delivered past it).
    fn rx_tick_and_decode(&mut self, now: u64, out: &mut impl ReplicaOut) {
        self.rx.tick(
            now,
            &mut RxBridge {
                out: &mut *out,
                delivered: &mut self.delivered,
            },
        );
        self.decode_delivered(now, out);
    }

    /// The frames of `stream` order RX holds above a hole within `from ..= to` (a peer's
    /// `RepairReq` for the `extra` of this replica's TailReport, 07 §9.3).
    pub fn held_range(&self, stream: u8, from: u64, to: u64) -> impl Iterator<Item = (u64, &[u8])> {
        self.rx.held_range(stream, from, to)
    }

    /// The `SeqEquivocation` evidence the verdict found since the last call (07 §10.1: two
    /// headers the sequencer signed for one height).
    pub fn take_evidence(&mut self) -> Vec<vyrn_wire::msg::ctrl::SeqEquivocation> {
        self.verdicts.take_evidence()
    }

    /// The frame_seq of `BlockMark(height)` on `stream`, while the decoder remembers it.
    pub fn mark_frame(&self, stream: u8, height: u64) -> Option<u64> {
        self.dec.mark_frame(stream, height)
    }

    /// The first block the verdict refused for a contradiction the sequencer signed, since the
    /// last call ([`Verdicts::take_contradiction`]; 07 §9.1: a suspicion).
    pub fn take_contradiction(&mut self) -> Option<(u64, crate::front::verdict::Refusal)> {
        self.verdicts.take_contradiction()
    }

    /// The open block's height on `stream` (its last BlockMark + 1).
    pub fn open_height(&self, stream: u8) -> u64 {
        self.dec.open_height(stream)
    }

    /// The seal's block after `BlockMark(h_star)` (07 §9.4; [`Decoder::seal_block`]: however
    /// many marks whose headers never came the tail spans), with its `data_root` once every
    /// record of it not listed in `unavail` is resolved (an unhashed one by key alone, §9.3
    /// item 4; a listed one counts 32 zero bytes).
    pub fn seal_block(
        &self,
        h_star: u64,
        unavail: &[PktKey],
    ) -> Option<(vyrn_wire::decoder::OpenBlock, Option<Hash>)> {
        let ob = self
            .dec
            .seal_block(h_star, (self.anchor.height, self.anchor.last_step))?;
        let dr = self
            .data
            .tail_data_root(h_star, unavail)
            .map(|r| r.data_root);
        Some((ob, dr))
    }

    /// The seal leader's unavailable list over the tail after `BlockMark(h_star)` (07 §9.3
    /// item 4; [`DataSide::seal_unavail`]): `Err(n)` while `n` unresolved records are inside
    /// REP_SEAL_DATA_WAIT_MS.
    pub fn seal_unavail(&self, h_star: u64, now: u64) -> Result<Vec<PktKey>, u64> {
        self.data.seal_unavail(h_star, now)
    }

    /// A voter's check of a seal's unavailable list ([`DataSide::check_unavail`]).
    pub fn check_unavail(
        &self,
        h_star: u64,
        unavail: &[PktKey],
    ) -> Result<(), crate::front::data::UnavailRefused> {
        self.data.check_unavail(h_star, unavail)
    }

    /// The tenure is deposed here: the tail after `BlockMark(h)` is held back from replay until
    /// the seal is final ([`DataSide::hold_tail`]).
    pub fn hold_tail(&mut self, h: u64, now: u64, out: &mut impl ReplicaOut) {
        self.data
            .hold_tail(h, now, &mut DataBridge::new(out, &mut self.replay));
    }

    /// Hold back the copies of a seal's unavailable keys until the seal is final
    /// ([`DataSide::hold_for_seal`]).
    pub fn hold_for_seal(&mut self, keys: &[PktKey]) {
        self.data.hold_for_seal(keys);
    }

    /// Decode what order RX delivered — through a hold while peer-supplied frames are in
    /// question ([`crate::front::quarantine`]) — until nothing is left (a failed hold gives order RX
    /// back frames it delivers again).
    fn decode_delivered(&mut self, now: u64, out: &mut impl ReplicaOut) {
        loop {
            if !self.delivered.ends.is_empty() {
                let mut d = std::mem::replace(&mut self.delivered, std::mem::take(&mut self.spare));
                let mut start = 0;
                for &(end, stream, fs, peer) in &d.ends {
                    self.feed(stream, fs, &d.bytes[start..end], peer, now, out);
                    // What a hold vouched for goes on at once: a hold ended mid-batch sends the
                    // rest of the batch (a restart's backlog of path frames) straight to the
                    // decoder, decoded once.
                    self.release_vouched(now, out);
                    start = end;
                }
                d.bytes.clear();
                d.ends.clear();
                self.spare = d;
            }
            if self.hold.is_some() {
                self.settle_hold(now, out);
            }
            if self.delivered.ends.is_empty() {
                return;
            }
        }
    }

    /// One frame in order: to the decoder, or to the hold (which starts at a peer-supplied
    /// frame, 07 §4.10).
    fn feed(
        &mut self,
        stream: u8,
        fs: u64,
        bytes: &[u8],
        peer: bool,
        now: u64,
        out: &mut impl ReplicaOut,
    ) {
        if peer && self.hold.is_none() && !self.sealing {
            if self
                .strikes
                .get(&(stream, fs))
                .is_some_and(|&n| n >= self.n_sources)
            {
                self.counters.holds_given_up += 1;
            } else {
                self.hold = Some(crate::front::quarantine::Hold::new(
                    &self.dec,
                    (stream, fs),
                    now,
                ));
                self.counters.holds += 1;
            }
        }
        match &mut self.hold {
            Some(h) => {
                let v = &self.verdicts;
                h.push(stream, fs, bytes, peer, now, &self.check, |x| {
                    v.signed_order_root(x)
                });
            }
            None => self.decode_one(stream, fs, bytes, now, out),
        }
    }

    fn decode_one(
        &mut self,
        stream: u8,
        fs: u64,
        bytes: &[u8],
        now: u64,
        out: &mut impl ReplicaOut,
    ) {
        self.counters.frames += 1;
        // Kept for re-serving (and journaled) only now: nothing unvouched is stored.
        out.frame(stream, fs, bytes);
        let mut b = DecBridge {
            data: &mut self.data,
            verdicts: &mut self.verdicts,
            replay: &mut self.replay,
            out: &mut *out,
            now,
            refused: &mut self.counters.data_refused,
        };
        self.dec
            .on_frame(bytes, self.arrived.unwrap_or(now), &mut b);
    }

    /// Release what the hold vouched for; end it when done; on failure, give its frames back
    /// to order RX with the peer-supplied ones as holes again.
    fn settle_hold(&mut self, now: u64, out: &mut impl ReplicaOut) {
        let Some(mut h) = self.hold.take() else {
            return;
        };
        let max = self.rx.held_bytes_max();
        if let Some(why) = h.failed(now, self.peer_verify_ns, max) {
            self.fail_hold(h, why, now, out);
            return;
        }
        self.hold = Some(h);
        self.release_vouched(now, out);
    }

    /// Decode the frames the hold vouched for, at most [`RELEASE_BATCH`] a call; end the hold
    /// when everything is released.
    fn release_vouched(&mut self, now: u64, out: &mut impl ReplicaOut) {
        let Some(mut h) = self.hold.take() else {
            return;
        };
        for _ in 0..RELEASE_BATCH {
            let mut b = DecBridge {
                data: &mut self.data,
                verdicts: &mut self.verdicts,
                replay: &mut self.replay,
                out: &mut *out,
                now,
                refused: &mut self.counters.data_refused,
            };
            let Some(f) = h.release_next(&mut b) else {
                break;
            };
            // The decoder follows what was released, its output discarded (the probe's went
            // out just now): a hold that fails after releasing part of its frames gives order
            // RX back only the rest, and the decoder must then stand just before them — left at
            // the hold's start it saw a frame_seq gap and faulted the sequencer (a restarted
            // replica's long catch-up hold timed out after releasing its first blocks).
            self.dec.on_frame(&f.bytes, now, &mut Discard);
            self.counters.frames += 1;
            self.counters.held_frames += 1;
            out.frame(f.stream, f.frame_seq, &f.bytes);
        }
        self.counters.hold_max_ns = self
            .counters
            .hold_max_ns
            .max(now.saturating_sub(h.started()));
        if h.is_empty() {
            // Everything released (every peer frame vouched for): the probe is the decoder.
            self.dec = h.into_probe();
        } else {
            self.hold = Some(h);
        }
    }

    fn fail_hold(
        &mut self,
        h: crate::front::quarantine::Hold,
        why: HoldFailed,
        now: u64,
        out: &mut impl ReplicaOut,
    ) {
        self.counters.holds_failed[why as usize] += 1;
        // 07 §9.1: a frame whose holds failed once per source (the sequencer and every peer)
        // is taken as it is next time, and what it does is the sequencer's.
        *self.strikes.entry(h.first_peer()).or_insert(0) += 1;
        while self.strikes.len() > STRIKES_MAX {
            self.strikes.pop_first();
        }
        let frames = h.into_frames();
        for st in 0..2u8 {
            let mine = frames
                .iter()
                .filter(|f: &&HeldFrame| f.stream == st)
                .map(|f| (f.frame_seq, f.bytes.as_slice(), f.peer));
            let taken = self.rx.rewind(st, mine, now);
            debug_assert!(
                taken,
                "a hold's frames are order RX's last delivered, in order"
            );
            self.rx.pump(
                st,
                &mut RxBridge {
                    out: &mut *out,
                    delivered: &mut self.delivered,
                },
            );
        }
    }

    /// A data frame from data box `src_box` (copy 2, 07 §5.3).
    pub fn on_data_frame(
        &mut self,
        src_box: u8,
        bytes: &[u8],
        now: u64,
        out: &mut impl ReplicaOut,
    ) -> bool {
        let ok = self
            .data
            .on_data_frame(
                src_box,
                bytes,
                now,
                &mut DataBridge::new(out, &mut self.replay),
            )
            .is_ok();
        self.flush();
        ok
    }

    /// A fetched packet (a data box's FETCH_RESP packet, a peer's, the sequencer's).
    pub fn on_fetched(&mut self, src: Source, pkt: &[u8], now: u64, out: &mut impl ReplicaOut) {
        let _ = self
            .data
            .on_fetched(src, pkt, now, &mut DataBridge::new(out, &mut self.replay));
        self.flush();
    }

    /// A HashList part from the sequencer's order hasher (07 §5.6).
    pub fn on_hash_list(&mut self, l: &HashList, now: u64, out: &mut impl ReplicaOut) {
        let _ = self
            .data
            .on_hash_list(l, now, &mut DataBridge::new(out, &mut self.replay));
        self.flush();
    }

    /// NackTooOld from the sequencer.
    pub fn on_too_old(&mut self, stream: u8, oldest_seq: u64) {
        self.rx.on_too_old(stream, oldest_seq);
    }

    /// The core's clock; and replay as far as its input allows, answers to `sink`.
    pub fn tick(
        &mut self,
        now: u64,
        out: &mut impl ReplicaOut,
        sink: &mut impl EngineSink,
    ) -> Result<u64, ReplayError> {
        self.rx_tick_and_decode(now, out);
        self.data
            .tick(now, &mut DataBridge::new(out, &mut self.replay));
        // While a hold is open the decoder is behind it: the probe keeps the hash-lag clock.
        if let Some(h) = &mut self.hold {
            h.tick(now, &self.check);
            self.decode_delivered(now, out);
        } else {
            let mut b = DecBridge {
                data: &mut self.data,
                verdicts: &mut self.verdicts,
                replay: &mut self.replay,
                out: &mut *out,
                now,
                refused: &mut self.counters.data_refused,
            };
            self.dec.tick(now, &mut b);
        }
        match &mut self.replay {
            ReplayPart::Inline(p) => {
                let done = p.pump(&self.data, sink);
                p.note_replayed(now);
                done
            }
            ReplayPart::Tile(t) => {
                t.flush();
                t.drain_back();
                match t.failed() {
                    Some(e) => Err(e.clone()),
                    None => Ok(t.lag().1),
                }
            }
        }
    }

    /// Apply the last replayed steps' events (the end of the input, a snapshot point). On its
    /// own tile, replay is asked to (`sink` unused: the tile has its own); the answer is
    /// [`ReplayTx::settled`].
    pub fn settle(&mut self, sink: &mut impl EngineSink) {
        match &mut self.replay {
            ReplayPart::Inline(p) => p.settle(sink),
            ReplayPart::Tile(t) => {
                t.settle();
                t.flush();
            }
        }
    }

    /// The vote's check of a proposal `first ..= last` with last header hash `last_hash`
    /// (07 §6.4).
    pub fn verify(
        &mut self,
        first: u64,
        last: u64,
        last_hash: &Hash,
        now: u64,
        out: &mut impl ReplicaOut,
    ) -> VerifyOutcome {
        self.verdicts.verify_with(
            first,
            last,
            last_hash,
            now,
            &mut self.data,
            &mut DataBridge::new(out, &mut self.replay),
        )
    }
}

/// The tenure after a final seal (07 §9.4–§9.5): whose frames come next, and the seal they
/// follow.
#[derive(Debug, Clone)]
pub struct NextTenure {
    /// `next_tenure` of the seal.
    pub tenure: u8,
    /// `next_seq`: the promoted sequencer's index.
    pub sender: u8,
    /// Its `seq_key`.
    pub seq_key: ed25519_dalek::VerifyingKey,
    /// `H*`: the seal starts after its BlockMark.
    pub h_star: u64,
    /// The seal header (height `Hs = H* + 1`, its last step).
    pub seal: BlockHeader,
    /// The seal's unavailable packets (07 §9.4): excluded from the seal block.
    pub unavail: Vec<PktKey>,
}

/// Why [`ReplicaCore::next_tenure`] refused a seal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NextTenureRefused {
    /// The seal is not the block after `H*`.
    Form,
    /// This replica does not hold the tail after `BlockMark(H*)` (fewer frames, a fault, or
    /// marks no longer kept).
    NotHeld,
    /// Its own seal block differs from the seal's (other steps or `order_root`).
    Differs,
}

impl ReplicaCore {
    /// The seal is final (07 §9.4): the records after `BlockMark(H*)` are the seal block — the
    /// ones the dead box never hashed resolved by key alone (§9.3 item 4) — replay runs to the
    /// seal's last step, and the core follows the next tenure: order RX and the decoder for its
    /// frames from height `Hs + 1`, the verdict and header checks under its sequencer's key, the
    /// chain anchored at the seal. Replay and the data side go on (one engine across tenures).
    /// Returns the records resolved by key; refused, changing nothing, unless the seal is
    /// the block after `H*` and this replica's own seal block is the one it names (the same
    /// steps and `order_root`: it holds exactly the prefix).
    pub fn next_tenure(
        &mut self,
        t: &NextTenure,
        now: u64,
        out: &mut impl ReplicaOut,
    ) -> Result<u64, NextTenureRefused> {
        let n = self.take_seal(t.h_star, &t.seal, &t.unavail, now, out)?;
        let hs = t.seal.height;
        let lay = self.dec.layout();
        self.rx = OrderRx::new(RxConfig {
            tenure: t.tenure,
            sender: t.sender,
            ..*self.rx.config()
        });
        let mut dec = Decoder::new(lay, hs + 1).unwrap_or_else(|_| unreachable!("a valid layout"));
        dec.set_hashlag_fault_ns(self.dec.hashlag_fault_ns());
        self.dec = dec;
        self.anchor = Anchor {
            height: hs,
            header_hash: t.seal.header_hash(),
            last_step: t.seal.last_step,
        };
        self.verdicts = Verdicts::new(t.seq_key, self.check.epoch, self.anchor);
        self.check.seq_key = t.seq_key;
        self.hold = None;
        self.strikes.clear();
        self.sealing = false;
        self.delivered.bytes.clear();
        self.delivered.ends.clear();
        Ok(n)
    }

    /// The seal is final (07 §9.4): the records after `BlockMark(H*)` are the seal block —
    /// the ones the dead box never hashed resolved by key alone (§9.3 item 4) — and replay runs
    /// to the seal's last step. The deposed tenure's gate stays shut: a seal naming no next
    /// sequencer (07 §9.5, `next_seq` 0xFF) ends here, the book halted; [`Self::next_tenure`]
    /// goes on to the next tenure. Returns the records resolved by key; refused, changing
    /// nothing, unless `seal` is the block after `h_star` and this replica's own seal block is
    /// the one it names (the same steps and `order_root`).
    pub fn take_seal(
        &mut self,
        h_star: u64,
        seal: &BlockHeader,
        unavail: &[PktKey],
        now: u64,
        out: &mut impl ReplicaOut,
    ) -> Result<u64, NextTenureRefused> {
        if seal.height != h_star.wrapping_add(1) {
            return Err(NextTenureRefused::Form);
        }
        let (own, _) = self
            .seal_block(h_star, unavail)
            .ok_or(NextTenureRefused::NotHeld)?;
        if (own.first_step, own.last_step, own.order_root)
            != (seal.first_step, seal.last_step, seal.order_root)
        {
            return Err(NextTenureRefused::Differs);
        }
        let hs = seal.height;
        let h_star_step = seal.first_step.saturating_sub(1);
        let n = self.data.seal(
            h_star,
            hs,
            unavail,
            now,
            &mut DataBridge::new(out, &mut self.replay),
        );
        match &mut self.replay {
            ReplayPart::Inline(p) => {
                p.resolve_unhashed(&self.data);
                p.end_tenure(seal.last_step, &own.lane_bounds);
                p.on_seal(h_star, h_star_step, hs, seal.last_step);
            }
            // The tile's root clock learns the seal block as a block (a root height inside a
            // tail that spans marks is not re-taken there).
            ReplayPart::Tile(x) => {
                x.end_tenure(seal.last_step, &own.lane_bounds);
                x.block(hs, seal.last_step);
            }
        }
        Ok(n)
    }

    /// What the data side holds of the record of `lane` at `first_lane_seq` (a log line).
    pub fn describe_record(&self, lane: u8, first_lane_seq: u64) -> String {
        self.data.describe(lane, first_lane_seq)
    }

    /// Whether the inline replay could be promoted now, and from which step
    /// (`Replayer::promotable`); `None` for a replay on its own tile.
    pub fn promotable(&self) -> Option<Result<u64, vyrn_engine::ReplayError>> {
        match &self.replay {
            ReplayPart::Inline(p) => Some(p.promotable()),
            ReplayPart::Tile(_) => None,
        }
    }

    /// Hand the inline replay's engine to the box this replica's host promotes (07 §9.5;
    /// `Replayer::promote`): consumes the core. `None` for a replay on its own tile.
    pub fn into_replayer(self) -> Option<Replayer> {
        match self.replay {
            ReplayPart::Inline(p) => Some(p),
            ReplayPart::Tile(_) => None,
        }
    }
}
