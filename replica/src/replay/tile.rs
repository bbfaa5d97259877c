//! Replay on its own core (07 §7.2: "replay cores"; 07 §7.1 replay from the wire).
//!
//! The replica's receive side is two tiles joined by SPSC rings: the **front** (order RX, the
//! decoder, the data side and the verdict: [`crate::front::core::ReplicaCore`]) and the **replay
//! tile** ([`ReplayTile`]: the engine in replay mode). The front hands replay what it decoded,
//! in decode order, over one byte ring ([`ReplayTx`]):
//!
//! * each PacketRecord, each step with its cut and payload (and when its frame was decoded, for
//!   the replay lag of 07 §7.3), each block's end (the root clock of 07 §7.4);
//! * each record's payload **copied once the record resolves** (07 §5.4: the stored copy of
//!   the key whose full BLAKE3 the data side judged equal to the record's `pkt_hash`, count
//!   equal), addressed to the record itself — its lane and first LaneSeq — so replay never
//!   reads the data side's store, which stays the front's alone (one writer, no lock), and
//!   needs neither the HashRuns nor a map of copies. A payload the data side judged a mismatch
//!   is never handed over: replay waits for the copy that resolves the record (the
//!   sequencer's, 07 §5.6).
//!
//! Replay hands back, over a second ring, every state root it takes (07 §7.4, the root votes
//! read them at the front), its progress (the last step replayed, which bounds what the front
//! may forget; the lag; what the sink saw) and a divergence if replay stops (INV-DET).
//!
//! Both runners poll the same two tiles: one thread for both (`ReplicaCore` with replay
//! inline, the multiplexed form a 2-core box runs, or the two tiles polled in turn), or one
//! thread each ([`spawn`]: the pinned form of 07 §7.2, replay on its own core).
//!
//! **Hot path.** Neither side allocates once warm: the front encodes into a reused staging
//! buffer and pushes it to the ring in one batch per call ([`ReplayTx::flush`]); a full ring
//! leaves the rest staged (never blocks the front, never drops: the staging buffer grows only
//! while replay is behind by more than the ring). The tile copies each payload into a buffer
//! the engine reuses once the record ran (`ReplayEngine::set_payload`; a map of copies keyed by
//! `(session, pkt_seq, pkt_hash)` cost ~10 % of the tile, `--bench replica`, 2026-12-04). No
//! lock, no syscall: the rings are `vyrn_rings::spsc`.

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use vyrn_engine::home::{NoPayloads, ReplayError};
use vyrn_engine::EngineConfig;
use vyrn_rings::spsc;
use vyrn_wire::header::Hash;
use vyrn_wire::msg::client::REQ_MAX_LEN;
use vyrn_wire::records::{PacketRecord, Step, StepKind};

pub use crate::replay::run::{ReportingSink, SinkReport};
use crate::replay::{ReplayCounters, ReplayLag, Replayer};
/// How a replay thread waits when idle: the tile runtime's one policy.
pub use vyrn_tile::Wait as Idle;

/// The front → replay ring, bytes (4 MiB: ~40 ms of the peak mix's records and payloads).
pub const REPLAY_RING_BYTES: usize = 1 << 22;
/// The replay → front ring, reports.
pub const REPLAY_BACK_SLOTS: usize = 1 << 10;
/// The tile's parse buffer: far more than the longest message (a step: 64 lanes' cut and a
/// payload within one ORDER frame).
const INBUF_BYTES: usize = 1 << 18;
/// Bytes parsed between two replay passes (~40 PacketRecords with their payloads).
const PARSE_CHUNK: usize = 4 << 10;
/// The tile reports its lag (an hdrhistogram read) at most this often, ns.
const LAG_REPORT_NS: u64 = 1_000_000;

// Message tags on the front → replay ring (little-endian fields, private to this module).
const T_RECORD: u8 = 1;
const T_STEP: u8 = 3;
const T_BLOCK: u8 = 4;
const T_PAYLOAD: u8 = 5;
const T_ROOTS: u8 = 6;
const T_SETTLE: u8 = 7;
const T_END_TENURE: u8 = 8;
/// A record a final seal listed unavailable (07 §9.4): `[T_EXCLUDED, lane, first_lane_seq u64]`.
const T_EXCLUDED: u8 = 9;
const EXCLUDED_LEN: usize = 10;

/// Bytes of a PacketRecord message, tag included.
const RECORD_LEN: usize = 1 + 3 + 4 + 2 + 4 + 8 * 3;
/// Bytes of a block message.
const BLOCK_LEN: usize = 1 + 8 + 8;
/// An end-of-tenure message's fixed part: tag, last step, lanes (u16); the lanes' bounds
/// follow.
const END_TENURE_FIXED: usize = 1 + 8 + 2;
/// Bytes of a roots message.
const ROOTS_LEN: usize = 1 + 8 * 3;
/// A step message's fixed part: tag, step, kind, src_lane, src_lane_seq, decoded at, lanes
/// (u16), payload length (u16), the mask of lanes whose cut moved (u64); the moved lanes' cut
/// values follow, then the payload.
const STEP_FIXED: usize = 1 + 8 + 1 + 1 + 8 + 8 + 2 + 2 + 8;
/// Most lanes a cut has (the layouts' bound).
const CUT_MAX: usize = 64;
/// A payload message's fixed part: tag, lane, first_lane_seq, length.
const PAYLOAD_FIXED: usize = 1 + 1 + 8 + 1;

/// What the replay tile reports back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Back {
    /// `R(h)` taken (07 §7.4).
    Root(u64, Hash),
    /// Progress.
    Progress(ReplayProgress),
    /// Replay stopped on a divergence (INV-DET); nothing more follows.
    Failed(ReplayError),
    /// Every event of the steps replayed so far applied ([`ReplayTx::settle`]).
    Settled(ReplayProgress),
    /// A REP_Snapshot taken at this root height (07 §7.5; rare: boxed, off the hot path).
    Snapshot(Box<crate::replay::Taken>),
}

/// The replay tile's progress as it last reported it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReplayProgress {
    /// The last step replayed.
    pub replayed: u64,
    /// The last step decoded that reached the tile.
    pub decoded: u64,
    /// Replay lag, receipt to applied (07 §7.3).
    pub lag: ReplayLag,
    /// Replay's counters.
    pub counters: ReplayCounters,
    /// What the sink saw.
    pub sink: SinkReport,
    /// Records waiting in replay's lanes now (for their payload, or for their turn).
    pub waiting: u64,
}

/// Counters of the front's end.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TxCounters {
    /// Bytes pushed to the ring.
    pub bytes: u64,
    /// Payload copies handed over.
    pub payloads: u64,
    /// Flushes that left bytes staged (the ring was full: replay behind by a ring).
    pub ring_full: u64,
    /// Most bytes staged at once.
    pub staged_max: u64,
    /// Payloads longer than REQ_MAX_LEN (never: the data side stores none).
    pub payloads_refused: u64,
    /// Snapshots dropped because the owner had not taken the last few (the oldest goes).
    pub snapshots_dropped: u64,
}

/// The front's end: what replay is fed, and what it reported back.
#[derive(Debug)]
pub struct ReplayTx {
    tx: spsc::Producer<u8>,
    /// Encoded, not yet pushed: `stage[staged_from..]`.
    stage: Vec<u8>,
    staged_from: usize,
    back: spsc::Consumer<Back>,
    roots: BTreeMap<u64, Hash>,
    /// Snapshots replay reported, oldest first, until the owner takes them.
    snaps: VecDeque<crate::replay::Taken>,
    progress: ReplayProgress,
    settled: u64,
    failed: Option<ReplayError>,
    decoded: u64,
    /// The cut of the last step sent (steps carry only the lanes that moved).
    last_cut: [u64; CUT_MAX],
    c: TxCounters,
}

/// Roots kept at the front for the voter (as replay keeps them inline).
const ROOTS_KEPT: usize = 64;

impl ReplayTx {
    fn put_u64(&mut self, v: u64) {
        self.stage.extend_from_slice(&v.to_le_bytes());
    }

    /// A decoded PacketRecord, in its lane's order.
    pub fn record(&mut self, r: &PacketRecord) {
        let mut m = [0u8; RECORD_LEN];
        m[0] = T_RECORD;
        m[1] = r.lane;
        m[2] = r.count;
        m[3] = r.flags;
        m[4..8].copy_from_slice(&r.session.to_le_bytes());
        m[8..10].copy_from_slice(&r.slot.to_le_bytes());
        m[10..14].copy_from_slice(&r.pkt_seq.to_le_bytes());
        m[14..22].copy_from_slice(&r.rx_ts.to_le_bytes());
        m[22..30].copy_from_slice(&r.first_lane_seq.to_le_bytes());
        m[30..38].copy_from_slice(&r.fills_applied.to_le_bytes());
        self.stage.extend_from_slice(&m);
    }

    /// A decoded step with its cut and payload, its frame decoded at `now`.
    pub fn step(&mut self, st: &Step, cut: &[u64], payload: &[u8], now: u64) {
        self.decoded = self.decoded.max(st.step);
        let (Ok(nc), Ok(np)) = (u16::try_from(cut.len()), u16::try_from(payload.len())) else {
            return;
        };
        if cut.len() > CUT_MAX {
            // The decoder's layouts have at most 64 lanes.
            return;
        }
        // Only the lanes whose cut moved since the last step (a step moves one or two).
        let mut mask = 0u64;
        for (i, (&c, l)) in cut.iter().zip(self.last_cut.iter_mut()).enumerate() {
            if c != *l {
                mask |= 1 << i;
                *l = c;
            }
        }
        let mut m = [0u8; STEP_FIXED];
        m[0] = T_STEP;
        m[1..9].copy_from_slice(&st.step.to_le_bytes());
        m[9] = st.kind as u8;
        m[10] = st.src_lane;
        m[11..19].copy_from_slice(&st.src_lane_seq.to_le_bytes());
        m[19..27].copy_from_slice(&now.to_le_bytes());
        m[27..29].copy_from_slice(&nc.to_le_bytes());
        m[29..31].copy_from_slice(&np.to_le_bytes());
        m[31..39].copy_from_slice(&mask.to_le_bytes());
        self.stage.extend_from_slice(&m);
        let mut bits = mask;
        while bits != 0 {
            let i = bits.trailing_zeros() as usize;
            bits &= bits - 1;
            self.put_u64(cut[i]);
        }
        self.stage.extend_from_slice(payload);
    }

    /// A block's end (its first BlockMark): height and last step.
    pub fn block(&mut self, height: u64, last_step: u64) {
        self.stage.push(T_BLOCK);
        self.put_u64(height);
        self.put_u64(last_step);
    }

    /// The dead tenure's log ends at `last_step` ([`Replayer::end_tenure`]), after its last
    /// record.
    /// `lane_bounds` are the seal's: the next tenure's cuts start there (07 §9.4). At most
    /// `CUT_MAX` lanes (a home's layout never has more).
    pub fn end_tenure(&mut self, last_step: u64, lane_bounds: &[u64]) {
        let n = lane_bounds.len().min(CUT_MAX);
        self.stage.push(T_END_TENURE);
        self.put_u64(last_step);
        self.stage.extend_from_slice(&(n as u16).to_le_bytes());
        for &b in &lane_bounds[..n] {
            self.put_u64(b);
        }
    }

    /// The copy that resolved the record of `lane` starting at `first_lane_seq` (07 §5.4),
    /// after that record ([`ReplayTx::record`]).
    pub fn payload(&mut self, lane: u8, first_lane_seq: u64, bytes: &[u8]) {
        let Some(len) = u8::try_from(bytes.len())
            .ok()
            .filter(|_| bytes.len() <= REQ_MAX_LEN)
        else {
            self.c.payloads_refused += 1;
            return;
        };
        self.c.payloads += 1;
        let mut m = [0u8; PAYLOAD_FIXED];
        m[0] = T_PAYLOAD;
        m[1] = lane;
        m[2..10].copy_from_slice(&first_lane_seq.to_le_bytes());
        m[10] = len;
        self.stage.extend_from_slice(&m);
        self.stage.extend_from_slice(bytes);
    }

    /// A final seal listed the packet of the record of `lane` starting at `first_lane_seq`
    /// unavailable (07 §9.4, [`Replayer::on_excluded`]), after that record.
    pub fn excluded(&mut self, lane: u8, first_lane_seq: u64) {
        self.stage.push(T_EXCLUDED);
        self.stage.push(lane);
        self.put_u64(first_lane_seq);
    }

    /// Take state roots every `root_blocks` heights after the anchor (07 §7.4).
    pub fn set_roots(&mut self, root_blocks: u64, anchor_height: u64, anchor_step: u64) {
        self.stage.push(T_ROOTS);
        self.put_u64(root_blocks);
        self.put_u64(anchor_height);
        self.put_u64(anchor_step);
    }

    /// Ask replay to apply every event of the steps replayed so far (the end of the input);
    /// [`ReplayTx::settled`] counts the answers.
    pub fn settle(&mut self) {
        self.stage.push(T_SETTLE);
    }

    /// Push what is staged, as much as the ring takes; true when nothing is left staged.
    pub fn flush(&mut self) -> bool {
        let pending = self.stage.len() - self.staged_from;
        if pending == 0 {
            return true;
        }
        self.c.staged_max = self.c.staged_max.max(pending as u64);
        let n = self.tx.push_batch(&self.stage[self.staged_from..]);
        self.c.bytes += n as u64;
        self.staged_from += n;
        if self.staged_from == self.stage.len() {
            self.stage.clear();
            self.staged_from = 0;
            true
        } else {
            self.c.ring_full += 1;
            // Keep the staging buffer from creeping: move the rest down once half is sent.
            if self.staged_from > self.stage.len() / 2 {
                self.stage.drain(..self.staged_from);
                self.staged_from = 0;
            }
            false
        }
    }

    /// The oldest snapshot replay reported and nobody took yet (07 §7.5): `(height, file)`.
    pub fn take_snapshot(&mut self) -> Option<crate::replay::Taken> {
        self.snaps.pop_front()
    }

    /// Read what replay reported.
    pub fn drain_back(&mut self) {
        while let Some(b) = self.back.pop() {
            match b {
                Back::Root(h, r) => {
                    self.roots.insert(h, r);
                    while self.roots.len() > ROOTS_KEPT {
                        self.roots.pop_first();
                    }
                }
                Back::Progress(p) => self.progress = p,
                Back::Settled(p) => {
                    self.progress = p;
                    self.settled += 1;
                }
                Back::Failed(e) => self.failed = Some(e),
                Back::Snapshot(t) => {
                    if self.snaps.len() >= crate::replay::SNAPS_KEPT {
                        self.snaps.pop_front();
                        self.c.snapshots_dropped += 1;
                    }
                    self.snaps.push_back(*t);
                }
            }
        }
    }

    /// `R(h)` if replay took it and reported it.
    pub fn root(&self, h: u64) -> Option<Hash> {
        self.roots.get(&h).copied()
    }

    /// Replay's progress as last reported.
    pub fn progress(&self) -> &ReplayProgress {
        &self.progress
    }

    /// (decoded, replayed) steps: decoded as the front handed them over, replayed as reported.
    pub fn lag(&self) -> (u64, u64) {
        (self.decoded, self.progress.replayed)
    }

    /// The divergence replay stopped on, if it did.
    pub fn failed(&self) -> Option<&ReplayError> {
        self.failed.as_ref()
    }

    /// Settle answers received.
    pub fn settled(&self) -> u64 {
        self.settled
    }

    /// Bytes staged, not yet in the ring.
    pub fn staged(&self) -> usize {
        self.stage.len() - self.staged_from
    }

    /// Counters.
    pub fn counters(&self) -> TxCounters {
        self.c
    }
}

/// Counters of the replay tile.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TileCounters {
    /// Messages taken off the ring.
    pub msgs: u64,
    /// Bytes taken off the ring.
    pub bytes: u64,
    /// Malformed messages (never, from this module's encoder): counted, and replay stops with
    /// [`ReplayError::Input`].
    pub malformed: u64,
    /// Payloads for no waiting record (never: the front sends a record before its payload):
    /// counted, and replay stops with [`ReplayError::Input`] (that record would wait forever).
    pub orphans: u64,
    /// Progress reports dropped because the back ring was full (roots, settles and a
    /// divergence wait for room).
    pub reports_dropped: u64,
}

/// The replay tile: the engine in replay mode fed from the ring.
#[derive(Debug)]
pub struct ReplayTile<S: ReportingSink> {
    rx: spsc::Consumer<u8>,
    /// Bytes off the ring, `inbuf[..filled]` not yet parsed (a message may straddle two pops).
    inbuf: Box<[u8]>,
    filled: usize,
    replay: Replayer,
    back: spsc::Producer<Back>,
    /// Reports that must reach the front (roots, settles, a divergence), waiting for room on
    /// the back ring: retried every poll, never spun on (a stopped front must not hang the
    /// tile's thread).
    must: VecDeque<Back>,
    last_root: u64,
    sink: S,
    last_lag: u64,
    lag: ReplayLag,
    reported: u64,
    decoded: u64,
    /// The cut of the last step received.
    cut: [u64; CUT_MAX],
    failed: bool,
    c: TileCounters,
}

/// A front end and a replay tile joined by rings of `ring_bytes` (rounded up to a power of two)
/// for the home of `cfg`, answers to `sink`.
pub fn pair<S: ReportingSink>(
    cfg: EngineConfig,
    ring_bytes: usize,
    sink: S,
) -> (ReplayTx, ReplayTile<S>) {
    pair_with(Replayer::new(cfg), ring_bytes, sink)
}

/// [`pair`] with the tile's engine split across cores (07 §7.2: the tile is the replay BBO
/// core, the lanes run on `workers`, `replay_split`); the lanes' answers go to sinks of type
/// `S` made fresh for each worker, and the tile's reports sum them with `sink`'s.
pub fn pair_split<S: ReportingSink + Default + Send + 'static>(
    cfg: EngineConfig,
    ring_bytes: usize,
    sink: S,
    workers: crate::replay::split::Workers,
    slots: crate::replay::split::SplitSlots,
) -> std::io::Result<(ReplayTx, ReplayTile<S>)> {
    let make = || -> Box<dyn crate::replay::split::WorkerSink> { Box::new(S::default()) };
    Ok(pair_with(
        Replayer::new_split(cfg, workers, slots, &make)?,
        ring_bytes,
        sink,
    ))
}

fn pair_with<S: ReportingSink>(
    replay: Replayer,
    ring_bytes: usize,
    sink: S,
) -> (ReplayTx, ReplayTile<S>) {
    let (tx, rx) = spsc::channel::<u8>(ring_bytes.next_power_of_two().max(1 << 8));
    let (btx, brx) = spsc::channel::<Back>(REPLAY_BACK_SLOTS);
    let stage = Vec::with_capacity(1 << 16);
    (
        ReplayTx {
            tx,
            stage,
            staged_from: 0,
            back: brx,
            roots: BTreeMap::new(),
            snaps: VecDeque::new(),
            progress: ReplayProgress::default(),
            settled: 0,
            failed: None,
            decoded: 0,
            last_cut: [0; CUT_MAX],
            c: TxCounters::default(),
        },
        ReplayTile {
            rx,
            inbuf: vec![0u8; INBUF_BYTES].into_boxed_slice(),
            filled: 0,
            replay,
            back: btx,
            must: VecDeque::new(),
            last_root: 0,
            sink,
            last_lag: 0,
            lag: ReplayLag::default(),
            reported: u64::MAX,
            decoded: 0,
            cut: [0; CUT_MAX],
            failed: false,
            c: TileCounters::default(),
        },
    )
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(w)
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    let mut w = [0u8; 4];
    w.copy_from_slice(&b[at..at + 4]);
    u32::from_le_bytes(w)
}

fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}

/// Why a message could not be parsed.
enum Parse {
    /// Not all of it is here yet.
    Short,
    /// Not a message of this module.
    Bad,
    /// A payload for no waiting record.
    Orphan,
}

impl<S: ReportingSink> ReplayTile<S> {
    /// Touch the working set before the first record: the engine's books and queues, and
    /// `copies` payload buffers.
    pub fn prefault(&mut self, copies: usize) {
        self.replay.prefault();
        self.replay.reserve_buffers(copies, REQ_MAX_LEN);
    }

    /// Start from a REP_Snapshot (07 §7.6, [`Replayer::restore`]) before the tile runs, its
    /// sink going on from `tally`, what the replay's sink had seen when it was taken.
    pub fn restore(
        &mut self,
        file: &[u8],
        tally: &SinkReport,
    ) -> Result<vyrn_engine::snapshot::SnapHeader, crate::replay::RestoreError> {
        let hdr = self.replay.restore(file)?;
        self.sink.resume(tally);
        Ok(hdr)
    }

    /// What the sink saw, with the split engine's lane sinks when split.
    pub fn report(&self) -> SinkReport {
        let mut r = self.sink.report();
        if let Some(l) = self.replay.lane_report() {
            r.merge(&l);
        }
        r
    }

    /// The split engine's counters, if the engine is split.
    pub fn split_counters(&self) -> Option<crate::replay::split::SplitCounters> {
        self.replay.split_counters()
    }

    /// The sink (the BBO core's side only when the engine is split: see [`ReplayTile::report`]).
    pub fn sink(&self) -> &S {
        &self.sink
    }

    /// The sink, taken back.
    pub fn into_sink(self) -> S {
        self.sink
    }

    /// The sink and, when the engine is split, the lane workers' sinks (workers stopped).
    pub fn into_sinks(self) -> (S, Vec<Box<dyn crate::replay::split::WorkerSink>>) {
        (self.sink, self.replay.into_lane_sinks())
    }

    /// Counters.
    pub fn counters(&self) -> TileCounters {
        self.c
    }

    /// Replay's counters.
    pub fn replay_counters(&self) -> ReplayCounters {
        self.replay.counters()
    }

    /// Take REP_Snapshots at the root heights `p` names (07 §7.5): set before the tile runs.
    pub fn set_snapshots(&mut self, p: crate::replay::SnapPolicy) {
        self.replay.set_snapshots(p);
    }

    /// Records waiting in replay's lanes now (for a payload or their turn; 0 once drained).
    pub fn waiting(&self) -> usize {
        self.replay.backlog().0
    }

    /// One step: take what the ring holds, replay as far as the input allows, report. True when
    /// it did any work. After a divergence it does nothing more (reported once).
    pub fn poll(&mut self, now: u64) -> bool {
        let sent = self.send_must();
        if self.failed {
            return sent;
        }
        let n = self.rx.pop_slice(&mut self.inbuf[self.filled..]);
        self.filled += n;
        self.c.bytes += n as u64;
        let was = self.replay.lag().1;
        let mut at = 0;
        let mut settle = false;
        // Parse a chunk, replay it, and on: a backlog parsed whole before replaying would queue
        // a ring's worth of records in the engine (its queues grow, the working set leaves the
        // cache: 1.8× slower per message in `--bench replica`, 2026-12-03).
        let mut more = true;
        while more {
            let end = at + PARSE_CHUNK;
            while at < self.filled && at < end {
                match self.parse(at, &mut settle) {
                    Ok(len) => {
                        at += len;
                        self.c.msgs += 1;
                    }
                    Err(Parse::Short) if at > 0 || self.filled < self.inbuf.len() => {
                        more = false;
                        break;
                    }
                    Err(e) => {
                        // Only this module writes the ring: a bad tag (or a message longer than
                        // the buffer, or a payload for no record) is a bug, not input. Stop
                        // rather than replay a corrupt stream.
                        if matches!(e, Parse::Orphan) {
                            self.c.orphans += 1;
                        } else {
                            self.c.malformed += 1;
                        }
                        self.fail(ReplayError::Input {
                            step: self.replay.lag().1,
                        });
                        return true;
                    }
                }
            }
            more &= at < self.filled;
            if let Err(e) = self.replay.pump(&NoPayloads, &mut self.sink) {
                self.fail(e);
                return true;
            }
        }
        self.inbuf.copy_within(at..self.filled, 0);
        self.filled -= at;
        self.replay.note_replayed(now);
        let done = self.replay.lag().1;
        self.take_roots();
        if settle {
            self.replay.settle(&mut self.sink);
            if let Some(e) = self.replay.failed() {
                // The lanes failed while settling: the divergence, not a settle.
                self.fail(e);
                return true;
            }
            // A split replay runs to a standstill in its settle: roots it took there go first.
            self.take_roots();
            self.lag = self.replay.lag_time();
            let p = self.progress();
            self.must.push_back(Back::Settled(p));
            self.send_must();
        } else if done != self.reported || now.saturating_sub(self.last_lag) >= LAG_REPORT_NS {
            if now.saturating_sub(self.last_lag) >= LAG_REPORT_NS {
                self.last_lag = now;
                self.lag = self.replay.lag_time();
            }
            self.reported = done;
            let p = self.progress();
            if self.must.is_empty() && self.back.push(Back::Progress(p)).is_err() {
                self.c.reports_dropped += 1;
            }
        }
        n > 0 || done != was
    }

    fn progress(&self) -> ReplayProgress {
        ReplayProgress {
            replayed: self.replay.lag().1,
            decoded: self.decoded,
            lag: self.lag,
            counters: self.replay.counters(),
            sink: self.report(),
            waiting: self.replay.backlog().0 as u64,
        }
    }

    fn fail(&mut self, e: ReplayError) {
        self.failed = true;
        self.must.push_back(Back::Failed(e));
        self.send_must();
    }

    /// Push the reports that must reach the front, oldest first, while the back ring has room;
    /// true when any went.
    fn send_must(&mut self) -> bool {
        let mut sent = false;
        while let Some(b) = self.must.pop_front() {
            if let Err(b) = self.back.push(b) {
                self.must.push_front(b);
                break;
            }
            sent = true;
        }
        sent
    }

    fn take_roots(&mut self) {
        // Roots are rare (every REP_ROOT_BLOCKS heights): the map is small.
        let mut h = self.last_root;
        while let Some((nh, r)) = self.replay.root_after(h) {
            self.must.push_back(Back::Root(nh, r));
            h = nh;
        }
        // Snapshots taken at those roots (07 §7.5), whole, for the front to write.
        while let Some(t) = self.replay.take_snapshot() {
            self.must.push_back(Back::Snapshot(Box::new(t)));
        }
        self.last_root = h;
        self.send_must();
    }

    /// Parse and apply the message at `inbuf[at..]`; its length.
    fn parse(&mut self, at: usize, settle: &mut bool) -> Result<usize, Parse> {
        let b = &self.inbuf[at..self.filled];
        let need = |n: usize| {
            if b.len() < n {
                Err(Parse::Short)
            } else {
                Ok(())
            }
        };
        match b[0] {
            T_RECORD => {
                need(RECORD_LEN)?;
                let r = PacketRecord {
                    lane: b[1],
                    count: b[2],
                    flags: b[3],
                    session: u32_at(b, 4),
                    slot: u16_at(b, 8),
                    pkt_seq: u32_at(b, 10),
                    rx_ts: u64_at(b, 14),
                    first_lane_seq: u64_at(b, 22),
                    fills_applied: u64_at(b, 30),
                };
                self.replay.on_record(&r);
                Ok(RECORD_LEN)
            }
            T_STEP => {
                need(STEP_FIXED)?;
                let nc = u16_at(b, 27) as usize;
                let np = u16_at(b, 29) as usize;
                let mask = u64_at(b, 31);
                let moved = mask.count_ones() as usize;
                let len = STEP_FIXED + 8 * moved + np;
                need(len)?;
                let kind = StepKind::from_u8(b[9]).ok_or(Parse::Bad)?;
                if nc > CUT_MAX || (nc < 64 && mask >> nc != 0) {
                    return Err(Parse::Bad);
                }
                let st = Step {
                    step: u64_at(b, 1),
                    kind,
                    src_lane: b[10],
                    src_lane_seq: u64_at(b, 11),
                    home: 0,
                    spans: false,
                };
                let now = u64_at(b, 19);
                let mut bits = mask;
                let mut at = STEP_FIXED;
                while bits != 0 {
                    let i = bits.trailing_zeros() as usize;
                    bits &= bits - 1;
                    self.cut[i] = u64_at(b, at);
                    at += 8;
                }
                let payload = &b[at..len];
                self.decoded = self.decoded.max(st.step);
                self.replay.on_step(&st, &self.cut[..nc], payload);
                self.replay.note_decoded(st.step, now);
                Ok(len)
            }
            T_END_TENURE => {
                need(END_TENURE_FIXED)?;
                let n = u16_at(b, 9) as usize;
                if n > CUT_MAX {
                    return Err(Parse::Bad);
                }
                let len = END_TENURE_FIXED + 8 * n;
                need(len)?;
                let mut bounds = [0u64; CUT_MAX];
                for (i, x) in bounds[..n].iter_mut().enumerate() {
                    *x = u64_at(b, END_TENURE_FIXED + 8 * i);
                }
                self.replay.end_tenure(u64_at(b, 1), &bounds[..n]);
                Ok(len)
            }
            T_BLOCK => {
                need(BLOCK_LEN)?;
                self.replay.on_block(u64_at(b, 1), u64_at(b, 9));
                Ok(BLOCK_LEN)
            }
            T_PAYLOAD => {
                need(PAYLOAD_FIXED)?;
                let n = b[10] as usize;
                need(PAYLOAD_FIXED + n)?;
                if n > REQ_MAX_LEN {
                    return Err(Parse::Bad);
                }
                if !self
                    .replay
                    .on_payload(b[1], u64_at(b, 2), &b[PAYLOAD_FIXED..PAYLOAD_FIXED + n])
                {
                    return Err(Parse::Orphan);
                }
                Ok(PAYLOAD_FIXED + n)
            }
            T_EXCLUDED => {
                need(EXCLUDED_LEN)?;
                if !self.replay.on_excluded(b[1], u64_at(b, 2)) {
                    return Err(Parse::Orphan);
                }
                Ok(EXCLUDED_LEN)
            }
            T_ROOTS => {
                need(ROOTS_LEN)?;
                self.replay
                    .set_roots(u64_at(b, 1), u64_at(b, 9), u64_at(b, 17));
                self.last_root = u64_at(b, 9);
                Ok(ROOTS_LEN)
            }
            T_SETTLE => {
                *settle = true;
                Ok(1)
            }
            _ => Err(Parse::Bad),
        }
    }
}

/// The replay tile as the tile runtime sees it: a hot tile (07 §7.2: replay cores) that the
/// runner, [`vyrn_tile::run_loop`] or the seeded scheduler polls.
impl<S: ReportingSink + Send + 'static> vyrn_tile::Task for ReplayTile<S> {
    fn name(&self) -> String {
        "replay".into()
    }
    fn poll(&mut self, now: u64) -> bool {
        ReplayTile::poll(self, now)
    }
}

/// A replay tile on its own thread: returns the stop flag and the thread's handle, whose join
/// gives the tile back. `core`: the core to pin it to (`None`: not pinned).
pub fn spawn<S: ReportingSink + Send + 'static>(
    mut tile: ReplayTile<S>,
    clock: impl Fn() -> u64 + Send + 'static,
    core: Option<usize>,
    idle: Idle,
) -> std::io::Result<(Arc<AtomicBool>, std::thread::JoinHandle<ReplayTile<S>>)> {
    let stop = Arc::new(AtomicBool::new(false));
    let s = stop.clone();
    let h = std::thread::Builder::new()
        .name("vyrn-replay".into())
        .spawn(move || {
            vyrn_tile::run_loop(&s, core, idle, || tile.poll(clock()));
            // What is left in the ring (the front stopped feeding).
            while tile.poll(clock()) {}
            tile
        })?;
    Ok((stop, h))
}

#[cfg(test)]
mod tests {
    use super::*;
    use vyrn_engine::home::CountingSink;

    /// A record of lane 2 at `first_lane_seq` that waits for step 100's events: it stays
    /// queued, never run.
    fn rec(first_lane_seq: u64) -> PacketRecord {
        PacketRecord {
            lane: 2,
            count: 1,
            flags: 0,
            session: 7,
            slot: 3,
            pkt_seq: first_lane_seq as u32,
            rx_ts: 5,
            first_lane_seq,
            fills_applied: 100,
        }
    }

    fn tiles() -> (ReplayTx, ReplayTile<CountingSink>) {
        pair(
            EngineConfig::test_home(4, 4),
            1 << 12,
            CountingSink::default(),
        )
    }

    /// The seeded scheduler runs the replay tile like any other: a block handed over the ring
    /// comes back as progress once the scheduler polled it.
    #[test]
    fn the_seeded_scheduler_polls_the_replay_tile() {
        let (mut tx, tile) = tiles();
        let mut s = vyrn_tile::Seeded::new(vec![Box::new(tile)], 7);
        assert_eq!(s.index_of("replay"), Some(0));
        assert!(!s.poll(0, 1), "nothing on the ring yet");
        tx.block(1, 0);
        assert!(tx.flush());
        s.settle(2, 16);
        tx.drain_back();
        assert_eq!(tx.failed(), None);
        assert!(!s.poll(0, 3), "the ring is drained");
    }

    #[test]
    fn a_bad_tag_stops_replay_with_a_typed_error_and_a_counter_not_a_panic() {
        let (mut tx, mut tile) = tiles();
        tx.block(1, 0);
        tx.stage.push(0xEE);
        assert!(tx.flush());
        assert!(tile.poll(1));
        assert_eq!(tile.counters().malformed, 1);
        assert_eq!(
            tile.counters().msgs,
            1,
            "the good message before it was taken"
        );
        tx.drain_back();
        assert_eq!(tx.failed(), Some(&ReplayError::Input { step: 0 }));
        // Stopped for good: nothing more is read.
        tx.block(2, 0);
        tx.flush();
        assert!(!tile.poll(2));
        assert_eq!(tile.counters().msgs, 1);
    }

    #[test]
    fn a_message_split_across_pops_waits_for_its_rest() {
        let (mut tx, mut tile) = tiles();
        let rec = PacketRecord {
            lane: 1,
            count: 1,
            flags: 0,
            session: 7,
            slot: 3,
            pkt_seq: 9,
            rx_ts: 5,
            first_lane_seq: 1,
            fills_applied: 0,
        };
        tx.record(&rec);
        let all = std::mem::take(&mut tx.stage);
        assert_eq!(all.len(), RECORD_LEN);
        assert_eq!(tx.tx.push_batch(&all[..10]), 10);
        tile.poll(1);
        assert_eq!((tile.counters().msgs, tile.counters().malformed), (0, 0));
        assert_eq!(tx.tx.push_batch(&all[10..]), RECORD_LEN - 10);
        tile.poll(2);
        assert_eq!((tile.counters().msgs, tile.counters().malformed), (1, 0));
        assert_eq!(tile.replay_counters().records, 1);
    }

    #[test]
    fn a_payload_goes_to_its_record_and_one_for_no_record_stops_replay() {
        let (mut tx, mut tile) = tiles();
        tx.record(&rec(1));
        tx.record(&rec(2));
        // The second record's payload first: each goes to the record it names.
        tx.payload(2, 2, b"second");
        tx.payload(2, 1, b"first");
        assert!(tx.flush());
        tile.poll(1);
        assert_eq!((tile.counters().msgs, tile.counters().orphans), (4, 0));
        assert_eq!(tile.waiting(), 2);
        tx.drain_back();
        assert_eq!(tx.failed(), None);
        // A payload for a record replay never got would leave that record waiting forever.
        tx.payload(2, 9, b"none");
        tx.flush();
        assert!(tile.poll(2));
        assert_eq!(tile.counters().orphans, 1);
        tx.drain_back();
        assert!(matches!(tx.failed(), Some(ReplayError::Input { .. })));
    }

    #[test]
    fn a_full_back_ring_never_hangs_the_tile_and_loses_no_divergence() {
        let (mut tx, mut tile) = tiles();
        // The front never drains: a progress report per poll (the lag clock) fills the ring.
        let mut now = 0;
        for _ in 0..REPLAY_BACK_SLOTS + 16 {
            now += LAG_REPORT_NS;
            tile.poll(now);
        }
        assert!(tile.counters().reports_dropped > 0, "{:?}", tile.counters());
        tx.stage.push(0xEE);
        tx.flush();
        // Returns with the ring still full (it used to spin until the front drained).
        tile.poll(now + 1);
        assert_eq!(tile.counters().malformed, 1);
        tx.drain_back();
        assert_eq!(tx.failed(), None, "no room yet");
        assert!(tile.poll(now + 2), "the divergence goes once there is room");
        tx.drain_back();
        assert_eq!(tx.failed(), Some(&ReplayError::Input { step: 0 }));
    }

    /// The end of a tenure crosses the ring with the seal's bounds (07 §9.4): the prefix's
    /// records waiting on a later step are clamped to the seal's last step; a message naming
    /// more lanes than a cut has is a typed input error, not a panic.
    #[test]
    fn the_end_of_a_tenure_crosses_the_ring_with_its_bounds() {
        let (mut tx, mut tile) = tiles();
        tx.record(&rec(1));
        tx.record(&rec(2));
        tx.end_tenure(5, &[1, 2, 3, 4]);
        assert_eq!(tx.stage.len(), 2 * RECORD_LEN + END_TENURE_FIXED + 4 * 8);
        assert!(tx.flush());
        tile.poll(1);
        assert_eq!((tile.counters().msgs, tile.counters().malformed), (3, 0));
        assert_eq!(tile.replay_counters().tenure_end_records, 2);
        tx.drain_back();
        assert_eq!(tx.failed(), None);
        tx.stage.push(T_END_TENURE);
        tx.put_u64(9);
        tx.stage
            .extend_from_slice(&((CUT_MAX + 1) as u16).to_le_bytes());
        tx.stage.extend_from_slice(&[0; 8 * (CUT_MAX + 1)]);
        tx.flush();
        tile.poll(2);
        assert_eq!(tile.counters().malformed, 1);
    }
}
