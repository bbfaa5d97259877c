//! Replay from the wire (07 §7.1): the engine in replay mode fed with what this replica decoded —
//! each PacketRecord joined with its payload, each StepRecord with its cut — producing every
//! response and fill the sequencer produced, with its `resp_seq`. Every decision the log records
//! (SHED, kind, source) is read, never recomputed (INV-DET); a divergence stops replay with a
//! typed [`ReplayError`].
//!
//! A record waits, in its lane's order, until its payload can be chosen: the payload is the copy
//! of `(session, pkt_seq)` whose 8-byte hash is the record's `pkt_hash` (07 §5.4; the HashRun
//! brings it), so a key that two different packets share (a packet the box logged ahead of its
//! session's sequence, then the real one) still joins the right bytes. Advance records carry no
//! payload and go at once. Replay lag is the distance, in steps, between what was decoded and
//! what was replayed ([`Replayer::lag`]), and in time, receipt to applied ([`Replayer::lag_time`]).
//!
//! **State roots** (07 §7.4): with roots on ([`Replayer::set_roots`]), replay stops at the last
//! step of every root height `h` (the block's end, as its first BlockMark gives it), takes `R(h)` —
//! the engine's state commitment with every lane at exactly that step's cut — and goes on. It
//! never runs past the end of a root height's block before knowing it: while the open block is a
//! root height, replay stops at the end of the block before; through any other block it runs as
//! far as its input allows. So a root height's state is taken exactly once, at the same point at
//! every replica, and replay does not wait for headers (a dev home's replay lag was half a block
//! while it did).

pub mod run;
pub mod split;
pub mod tile;

use std::collections::{BTreeMap, VecDeque};

use vyrn_engine::bbo::StepIn;
use vyrn_engine::home::{EngineSink, ReplayEngine, ReplayError};

use crate::replay::run::SinkReport;
use crate::replay::split::{SplitEngine, SplitSlots, WorkerSink, Workers};
use vyrn_engine::EngineConfig;
use vyrn_wire::header::Hash;
use vyrn_wire::records::{PacketRecord, Step};

/// Where replay finds a packet's bytes (the data side's store): the engine reads them in place
/// when the record's lane runs it.
pub use vyrn_engine::home::Payloads as PayloadSource;

/// Counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReplayCounters {
    /// Records queued for the engine (each runs once its payload is known).
    pub records: u64,
    /// Steps fed to the engine.
    pub steps: u64,
    /// Steps replayed.
    pub replayed: u64,
    /// Lane passes that found the head record of a lane without its payload (waiting for the
    /// data side or its hash).
    pub waits: u64,
    /// REP_Snapshots taken (07 §7.5, [`Replayer::set_snapshots`]).
    pub snapshots: u64,
    /// Snapshot heights passed without one: the split engine does not write snapshots, or the
    /// owner had not taken the last [`SNAPS_KEPT`] yet.
    pub snapshots_skipped: u64,
    /// Records of a sealed tenure's prefix that named a step the seal dropped in
    /// `fills_applied`, run after the seal's last step instead ([`Replayer::end_tenure`]).
    pub tenure_end_records: u64,
    /// Records and steps fed again that the snapshot replay started from already held,
    /// dropped (07 §7.6, [`Replayer::restore`]).
    pub skipped: u64,
}

/// 07 §7.5's schedule: a snapshot at root height `h` when `(h + 1) % every == offset` (the
/// participant's index × `every / n`, so the n participants take theirs at different heights
/// and at most one pauses at a time). `every` 0: none.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SnapPolicy {
    /// Blocks between one participant's snapshots (REP_SNAP_INTERVAL_S × blocks a second:
    /// 60,000 at 1 kHz).
    pub every: u64,
    /// This participant's offset in blocks.
    pub offset: u64,
    /// The epoch written in the header.
    pub epoch: u32,
    /// Section 7 as the node knows it (tenure, membership hash); the root gate's cursor is set
    /// to the snapshot's own height (its certified root is what a loader checks).
    pub replication: vyrn_engine::snapshot::ReplicationState,
}

impl SnapPolicy {
    /// Participant `idx` of `n` (07 §7.5: offset `idx × every / n`).
    pub fn for_participant(every: u64, idx: u64, n: u64, epoch: u32) -> Self {
        SnapPolicy {
            every,
            offset: match (every, n) {
                (0, _) | (_, 0) => 0,
                _ => (idx % n) * (every / n),
            },
            epoch,
            replication: Default::default(),
        }
    }

    /// Is root height `h` a snapshot height?
    pub fn at(&self, h: u64) -> bool {
        self.every != 0 && h.wrapping_add(1) % self.every == self.offset % self.every
    }
}

/// Snapshots replay holds until its owner takes them ([`Replayer::take_snapshot`]).
pub const SNAPS_KEPT: usize = 4;

/// Why replay could not start from a snapshot ([`Replayer::restore`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RestoreError {
    /// The engine is split across lane workers.
    Split,
    /// Records or steps were already fed.
    Fed,
    /// Replay is on its tile: restore the tile before it runs.
    OnTile,
    /// The file does not load (a section hash, the commitment, the config).
    Snapshot(String),
}

impl std::fmt::Display for RestoreError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RestoreError::Split => f.write_str("the replay is split across lane workers"),
            RestoreError::Fed => f.write_str("replay was already fed"),
            RestoreError::OnTile => f.write_str("replay is on its tile"),
            RestoreError::Snapshot(e) => write!(f, "the snapshot does not load: {e}"),
        }
    }
}

/// A snapshot replay took (07 §7.5), for its owner to write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Taken {
    /// The root height it holds the state after.
    pub height: u64,
    /// The REP_Snapshot file (`header_hash` still zero).
    pub file: Vec<u8>,
    /// What the replay's sink had taken at that moment ([`vyrn_engine::EngineSink::tally`]:
    /// the replica's replay digest), kept beside the file so a replica restored from it goes on
    /// with the same digest. Not part of the certified state.
    pub tally: Vec<u8>,
}

/// The engine replay drives: lanes and BBO core on one thread, or split across cores
/// (`replay_split`).
// One per replica, never moved on the hot path: the one-thread engine stays inline (no
// pointer to chase per call), the rarer split one is boxed.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
enum Eng {
    One(ReplayEngine),
    Split(Box<SplitEngine>),
}

/// The replay of one tenure.
#[derive(Debug)]
pub struct Replayer {
    /// The engine, holding each lane's records in order until their payload is known.
    eng: Eng,
    decoded_step: u64,
    replayed_step: u64,
    counters: ReplayCounters,
    roots: RootClock,
    snap: SnapPolicy,
    /// Snapshots taken, `(height, REP_Snapshot file)`, oldest first, for the owner.
    snaps: VecDeque<Taken>,
    /// Steps decoded and not yet replayed, with when their frame was decoded (07 §7.3 replay
    /// lag, receipt to applied), at most [`LAG_PENDING_MAX`].
    pending: VecDeque<(u64, u64)>,
    /// Receipt → applied per step, ns.
    lag_ns: hdrhistogram::Histogram<u64>,
    /// Steps decoded while [`LAG_PENDING_MAX`] were already timed.
    untimed: u64,
    /// The snapshot's last step when replay started from one ([`Replayer::restore`]; else 0).
    restored_step: u64,
}

/// Steps timed for the replay lag at once: a replica far behind (a restart) times the first
/// ones and counts the rest as [`ReplayLag::untimed`].
pub const LAG_PENDING_MAX: usize = 1 << 16;

/// Replay lag, receipt to applied (07 §7.3, budget ≤ 2 ms steady state): per step, from the
/// decoding of the frame that completed it to the engine replaying it, ns.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReplayLag {
    /// Median, ns.
    pub p50: u64,
    /// 99th percentile, ns.
    pub p99: u64,
    /// Largest, ns.
    pub max: u64,
    /// Steps timed.
    pub steps: u64,
    /// Steps not timed (decoded while [`LAG_PENDING_MAX`] were waiting).
    pub untimed: u64,
}

/// Where replay may run to, and the roots it took (07 §7.4). The clock follows each block's end
/// as its first BlockMark gives it (either substream's: both carry the same `last_step`), not
/// the signed headers, which come later (the order hasher signs after the block's last full hash): replay
/// runs freely through a block that is not a root height, stops at the end of the block before
/// a root height until that block's end is decoded, and takes `R(h)` there.
#[derive(Debug, Default)]
struct RootClock {
    /// REP_ROOT_BLOCKS; 0: roots off, replay runs as far as its input allows.
    root_blocks: u64,
    /// Decoded blocks (height → last step) above the contiguous prefix.
    ahead: BTreeMap<u64, u64>,
    /// The newest height of the contiguous prefix of decoded blocks (the anchor at first).
    closed: u64,
    /// Its last step.
    closed_step: u64,
    /// Root heights of the prefix whose root is not taken yet: (h, last_step).
    due: VecDeque<(u64, u64)>,
    /// Roots taken, newest kept.
    taken: BTreeMap<u64, Hash>,
}

impl RootClock {
    /// How far replay may run now. Every step decoded so far belongs to the open block (the
    /// one after `closed`) or an earlier one: a step comes after its home substream's BlockMark
    /// of the block before (07 §3.8), so that block's end is known before any of its steps.
    /// (Waiting for both substreams' marks — the decoder's closed block — was not enough: a
    /// step of the next block can be delivered before the other substream's mark, and `R(h)`
    /// then depended on when that frame arrived.)
    fn bound(&self) -> u64 {
        match self.due.front() {
            Some(&(_, last_step)) => last_step,
            None if vyrn_wire::msg::consensus::is_root_height(
                self.closed + 1,
                self.root_blocks,
            ) =>
            {
                self.closed_step
            }
            None => u64::MAX,
        }
    }
}

/// Roots kept for the voter (it asks within seconds; a stalled voter re-asks none older).
const ROOTS_KEPT: usize = 64;

impl Replayer {
    /// Replay for the home of `cfg` (its sessions and keys), from the tenure's start.
    pub fn new(cfg: EngineConfig) -> Self {
        Self::with(Eng::One(ReplayEngine::new(cfg)))
    }

    /// Replay with the engine split across cores (07 §7.2): this thread the replay BBO core and
    /// driver, the lanes on `workers`, each worker's responses and events to a sink from
    /// `make_sink`. Its payloads come only through [`Replayer::on_payload`].
    pub fn new_split(
        cfg: EngineConfig,
        workers: Workers,
        slots: SplitSlots,
        make_sink: &dyn Fn() -> Box<dyn WorkerSink>,
    ) -> std::io::Result<Self> {
        Ok(Self::with(Eng::Split(Box::new(SplitEngine::new(
            cfg, workers, slots, make_sink,
        )?))))
    }

    fn with(eng: Eng) -> Self {
        Replayer {
            eng,
            decoded_step: 0,
            replayed_step: 0,
            counters: ReplayCounters::default(),
            roots: RootClock::default(),
            snap: SnapPolicy::default(),
            snaps: VecDeque::new(),
            pending: VecDeque::new(),
            lag_ns: hdrhistogram::Histogram::new_with_bounds(1, 600_000_000_000, 2)
                .unwrap_or_else(|_| unreachable!("valid bounds")),
            untimed: 0,
            restored_step: 0,
        }
    }

    /// Step `step` completed at `now` (its frame decoded): timed until replay applies it.
    pub fn note_decoded(&mut self, step: u64, now: u64) {
        if step <= self.restored_step {
            // Held by the snapshot replay started from ([`Replayer::restore`]): not replayed.
        } else if self.pending.len() < LAG_PENDING_MAX {
            self.pending.push_back((step, now));
        } else {
            self.untimed += 1;
        }
    }

    /// Replay ran to its last step at `now`: every timed step it passed gets its lag.
    pub fn note_replayed(&mut self, now: u64) {
        while let Some(&(step, t)) = self.pending.front() {
            if step > self.replayed_step {
                break;
            }
            self.pending.pop_front();
            let _ = self.lag_ns.record(now.saturating_sub(t).max(1));
        }
    }

    /// Replay lag so far (see [`ReplayLag`]).
    pub fn lag_time(&self) -> ReplayLag {
        let h = &self.lag_ns;
        ReplayLag {
            p50: h.value_at_quantile(0.5),
            p99: h.value_at_quantile(0.99),
            max: h.max(),
            steps: h.len(),
            untimed: self.untimed,
        }
    }

    /// Touch the working set before the first record (as the live engine does at the box's
    /// start): the engine's books and queues, with each lane's queue of records waiting for a
    /// payload, so the first seconds of a tenure take no page faults on the hot path.
    pub fn prefault(&mut self) {
        match &mut self.eng {
            Eng::One(e) => e.prefault(),
            Eng::Split(e) => e.prefault(0),
        }
        self.pending.reserve(1 << 12);
    }

    /// Start from a REP_Snapshot instead of the tenure's start (07 §7.6): the engine is rebuilt
    /// from `file` (every section hash and the commitment checked; the caller compared its
    /// state root with the certified `R(h)`), replay stands at its `last_step`, the root clock
    /// resumes after its height, and the stream fed from its start again is dropped up to
    /// there (`vyrn_engine::ReplayEngine::skipped`). Only before anything was fed, and only
    /// on the one-thread engine (a split replay's lanes are on their workers).
    pub fn restore(
        &mut self,
        file: &[u8],
    ) -> Result<vyrn_engine::snapshot::SnapHeader, RestoreError> {
        let Eng::One(e) = &self.eng else {
            return Err(RestoreError::Split);
        };
        if self.counters.records != 0 || self.counters.steps != 0 {
            return Err(RestoreError::Fed);
        }
        let (restored, hdr) = vyrn_engine::load::restore(e.config().clone(), file)
            .map_err(|e| RestoreError::Snapshot(e.to_string()))?;
        self.eng = Eng::One(restored);
        self.decoded_step = hdr.last_step;
        self.replayed_step = hdr.last_step;
        self.restored_step = hdr.last_step;
        self.counters.replayed = hdr.last_step;
        self.roots = RootClock {
            root_blocks: self.roots.root_blocks,
            closed: hdr.meta.height,
            closed_step: hdr.last_step,
            ..RootClock::default()
        };
        Ok(hdr)
    }

    /// Records and steps the snapshot replay started from already held, dropped as fed again
    /// ([`Replayer::restore`]).
    pub fn skipped(&self) -> u64 {
        match &self.eng {
            Eng::One(e) => e.skipped(),
            Eng::Split(_) => 0,
        }
    }

    /// Take state roots every `root_blocks` heights (07 §7.4; 0: off). The tenure's chain
    /// starts after `anchor_height`, whose last step is `anchor_step`.
    pub fn set_roots(&mut self, root_blocks: u64, anchor_height: u64, anchor_step: u64) {
        self.roots = RootClock {
            root_blocks,
            closed: anchor_height,
            closed_step: anchor_step,
            ..RootClock::default()
        };
    }

    /// Take a REP_Snapshot at the root heights `p` names (07 §7.5; they must be root heights:
    /// `p.every / n` a multiple of the root interval). Off by default.
    pub fn set_snapshots(&mut self, p: SnapPolicy) {
        self.snap = p;
    }

    /// The oldest snapshot taken and not yet handed out: `(height, file)`. Its `header_hash`
    /// field is zero — replay does not see headers; [`vyrn_engine::snapshot::set_header_hash`]
    /// fills it once the header is known.
    pub fn take_snapshot(&mut self) -> Option<Taken> {
        self.snaps.pop_front()
    }

    /// The state after block `h`, written (the engine stands exactly at `h`'s last step);
    /// returns its state root, `R(h)`, when it was.
    fn take_snap(&mut self, h: u64, tally: Vec<u8>) -> Option<Hash> {
        let Eng::One(e) = &self.eng else {
            // The split engine's lanes are on their workers: not written (documented).
            self.counters.snapshots_skipped += 1;
            return None;
        };
        if self.snaps.len() >= SNAPS_KEPT {
            self.counters.snapshots_skipped += 1;
            return None;
        }
        let meta = vyrn_engine::snapshot::SnapMeta {
            epoch: self.snap.epoch,
            height: h,
            header_hash: [0; 32],
        };
        let rep = vyrn_engine::snapshot::ReplicationState {
            root_gate_cursor: h,
            ..self.snap.replication.clone()
        };
        let file = e.snapshot(&meta, &rep);
        let root = vyrn_engine::snapshot::state_root_in(&file)?;
        self.snaps.push_back(Taken {
            height: h,
            file,
            tally,
        });
        self.counters.snapshots += 1;
        Some(root)
    }

    /// A block's end: height and last step (its first BlockMark, 07 §3.9; repeats are ignored).
    pub fn on_block(&mut self, height: u64, last_step: u64) {
        let c = &mut self.roots;
        if c.root_blocks == 0 || height <= c.closed {
            return;
        }
        if c.ahead.len() < 1 << 16 {
            c.ahead.insert(height, last_step);
        }
        while let Some(ls) = c.ahead.remove(&(c.closed + 1)) {
            c.closed += 1;
            c.closed_step = c.closed_step.max(ls);
            if vyrn_wire::msg::consensus::is_root_height(c.closed, c.root_blocks) {
                c.due.push_back((c.closed, ls));
            }
        }
    }

    /// The dead tenure's log ends at its seal's `last_step` (07 §9.4,
    /// `ReplayEngine::end_tenure`): records of the prefix waiting on a later step run after it.
    /// A split replay's records are on its lane workers: none changed there (a voter that
    /// replays on lane workers can stall on such a record; BASE replays on one thread).
    ///
    /// The next tenure's cuts start at the seal's `lane_bounds`, on either engine (07 §9.4:
    /// the replay's `need_H` and OTHER of the next tenure's first steps are the promoted box's).
    pub fn end_tenure(&mut self, last_step: u64, lane_bounds: &[u64]) -> u64 {
        let n = match &mut self.eng {
            Eng::One(e) => e.end_tenure(last_step, lane_bounds),
            Eng::Split(x) => {
                x.start_tenure_after(last_step, lane_bounds);
                0
            }
        };
        self.counters.tenure_end_records += n;
        n
    }

    /// The seal is final (07 §9.4): the blocks the dead tenure marked after `h_star` (whose
    /// last step is `h_star_step`) are not blocks — the seal block `hs`, ending at `last_step`,
    /// is. A root taken or due above `h_star` is dropped; `R(hs)` is taken at the seal's end.
    pub fn on_seal(&mut self, h_star: u64, h_star_step: u64, hs: u64, last_step: u64) {
        let c = &mut self.roots;
        if c.root_blocks == 0 {
            return;
        }
        c.ahead.retain(|&h, _| h <= h_star);
        c.due.retain(|&(h, _)| h <= h_star);
        c.taken.retain(|&h, _| h <= h_star);
        if c.closed > h_star {
            c.closed = h_star;
            c.closed_step = h_star_step;
        }
        self.on_block(hs, last_step);
    }

    /// `R(h)` if replay took it (07 §7.4).
    pub fn root(&self, h: u64) -> Option<Hash> {
        self.roots.taken.get(&h).copied()
    }

    /// The oldest root taken above height `h`, if any (the replay tile reports each once).
    pub fn root_after(&self, h: u64) -> Option<(u64, Hash)> {
        self.roots
            .taken
            .range(h.saturating_add(1)..)
            .next()
            .map(|(&h, &r)| (h, r))
    }

    /// Counters.
    pub fn counters(&self) -> ReplayCounters {
        ReplayCounters {
            waits: match &self.eng {
                Eng::One(e) => e.waits(),
                Eng::Split(e) => e.waits(),
            },
            skipped: self.skipped(),
            ..self.counters
        }
    }

    /// Steps decoded and replayed: the lag is their difference (07 §7.3).
    pub fn lag(&self) -> (u64, u64) {
        (self.decoded_step, self.replayed_step)
    }

    /// A decoded PacketRecord (in its lane's order); its payload is read when its HashRun
    /// names the `pkt_hash` and the data side holds that copy.
    pub fn on_record(&mut self, r: &PacketRecord) {
        let ok = match &mut self.eng {
            Eng::One(e) => e.push_keyed(*r).is_ok(),
            Eng::Split(e) => e.push_keyed(*r).is_ok(),
        };
        if ok {
            self.counters.records += 1;
        }
    }

    /// A HashRun's `pkt_hash` for the record of `lane` starting at `first_lane_seq`.
    pub fn on_hash(&mut self, lane: u8, first_lane_seq: u64, pkt_hash: u64) {
        // The split engine takes its payloads only as chosen by the join (`on_payload`).
        if let Eng::One(e) = &mut self.eng {
            e.set_hash(lane, first_lane_seq, pkt_hash);
        }
    }

    /// The payload the join chose for the record of `lane` starting at `first_lane_seq` (07
    /// §5.4; the replay tile's input): read as it is, no HashRun needed. False when no such
    /// record waits.
    pub fn on_payload(&mut self, lane: u8, first_lane_seq: u64, bytes: &[u8]) -> bool {
        match &mut self.eng {
            Eng::One(e) => e.set_payload(lane, first_lane_seq, bytes),
            Eng::Split(e) => e.set_payload(lane, first_lane_seq, bytes),
        }
    }

    /// A final seal listed the packet of the record of `lane` starting at `first_lane_seq`
    /// unavailable (07 §9.3, §9.4): replay runs it without a payload and the rest of the
    /// tenure's log as the final log reads it (`ReplayEngine::exclude`). False when no such
    /// record waits (it already ran: its payload came before the seal was final).
    pub fn on_excluded(&mut self, lane: u8, first_lane_seq: u64) -> bool {
        match &mut self.eng {
            Eng::One(e) => e.exclude(lane, first_lane_seq),
            Eng::Split(e) => e.exclude(lane, first_lane_seq),
        }
    }

    /// Keep `n` payload buffers of `cap` bytes ready (startup work, [`Replayer::on_payload`]).
    pub fn reserve_buffers(&mut self, n: usize, cap: usize) {
        match &mut self.eng {
            Eng::One(e) => e.reserve_buffers(n, cap),
            Eng::Split(e) => e.prefault(n),
        }
    }

    /// Records and steps fed and not yet replayed.
    pub fn backlog(&self) -> (usize, usize) {
        match &self.eng {
            Eng::One(e) => e.backlog(),
            Eng::Split(e) => e.backlog(),
        }
    }

    /// What the split engine's lane sinks reported, summed (None: one engine, its sink is the
    /// caller's).
    pub fn lane_report(&self) -> Option<SinkReport> {
        match &self.eng {
            Eng::One(_) => None,
            Eng::Split(e) => Some(e.report()),
        }
    }

    /// Stop a split engine's lane workers and take their sinks back (none when not split).
    pub fn into_lane_sinks(self) -> Vec<Box<dyn WorkerSink>> {
        match self.eng {
            Eng::One(_) => Vec::new(),
            Eng::Split(e) => e.into_sinks(),
        }
    }

    /// The split engine's counters, if split.
    pub fn split_counters(&self) -> Option<crate::replay::split::SplitCounters> {
        match &self.eng {
            Eng::One(_) => None,
            Eng::Split(e) => Some(e.counters()),
        }
    }

    /// A decoded step with its cut and payload.
    pub fn on_step(&mut self, s: &Step, cut: &[u64], payload: &[u8]) {
        self.decoded_step = self.decoded_step.max(s.step);
        // Copied into the queue's own slot: no allocation per step once warm.
        let st = StepIn {
            step: s.step,
            kind: s.kind,
            src_lane: s.src_lane,
            src_lane_seq: s.src_lane_seq,
            cut,
            payload,
        };
        match &mut self.eng {
            Eng::One(e) => e.push_step_in(&st),
            Eng::Split(e) => e.push_step_in(&st),
        }
        self.counters.steps += 1;
    }

    /// Run the engine as far as its input allows, each lane's head record going once its
    /// payload is known; responses and fills go to `sink`. Returns the last step replayed.
    pub fn pump(
        &mut self,
        src: &impl PayloadSource,
        sink: &mut impl EngineSink,
    ) -> Result<u64, ReplayError> {
        let done = if self.roots.root_blocks == 0 {
            self.run_eng(None, src, sink)?
        } else {
            loop {
                // No root due: as far as the input allows, lanes not held to each step's cut.
                let bound = Some(self.roots.bound()).filter(|&b| b != u64::MAX);
                let done = self.run_eng(bound, src, sink)?;
                match self.roots.due.front() {
                    Some(&(h, ls)) if done >= ls => {
                        // The state after block h: every lane at exactly its cut.
                        // At a snapshot height the snapshot's header carries R(h): the state
                        // is serialized once, not for the root and again for the file.
                        let snapped = if self.snap.at(h) {
                            self.take_snap(h, sink.tally())
                        } else {
                            None
                        };
                        let r = match (snapped, &mut self.eng) {
                            (Some(r), _) => r,
                            (None, Eng::One(e)) => e.state_root(),
                            (None, Eng::Split(e)) => e.state_root()?,
                        };
                        self.roots.taken.insert(h, r);
                        while self.roots.taken.len() > ROOTS_KEPT {
                            self.roots.taken.pop_first();
                        }
                        self.roots.due.pop_front();
                    }
                    _ => break done,
                }
            }
        };
        self.counters.replayed = done;
        self.replayed_step = done;
        Ok(done)
    }

    fn settle_split(&mut self, sink: &mut impl EngineSink) -> Result<(), ReplayError> {
        loop {
            let before = self.moved();
            // Run while anything moves (the lanes work beside this thread); a standstill of
            // 50 µs is checked with the workers (`sync`: each answers after a poll that ran
            // nothing) — a check per round trip alone was a cross-thread wait per window.
            let mut still = std::time::Instant::now();
            loop {
                let b = self.moved();
                self.pump(&vyrn_engine::home::NoPayloads, sink)?;
                if self.moved() != b {
                    still = std::time::Instant::now();
                } else if still.elapsed() > std::time::Duration::from_micros(50) {
                    break;
                } else {
                    std::hint::spin_loop();
                }
            }
            if let Eng::Split(e) = &mut self.eng {
                e.sync()?;
            }
            self.pump(&vyrn_engine::home::NoPayloads, sink)?;
            let now = self.moved();
            if now == before && now.2 == 0 {
                break;
            }
        }
        match &mut self.eng {
            Eng::Split(e) => e.settle(),
            Eng::One(_) => Ok(()),
        }
    }

    fn moved(&self) -> (u64, u64, usize) {
        match &self.eng {
            Eng::Split(e) => e.moved(),
            Eng::One(e) => (e.bbo().done(), 0, 0),
        }
    }

    /// The error replay stopped on, if it did (the split engine records one a settle met).
    pub fn failed(&self) -> Option<ReplayError> {
        match &self.eng {
            Eng::Split(e) => e.failed(),
            Eng::One(_) => None,
        }
    }

    fn run_eng(
        &mut self,
        until: Option<u64>,
        src: &impl PayloadSource,
        sink: &mut impl EngineSink,
    ) -> Result<u64, ReplayError> {
        match &mut self.eng {
            Eng::One(e) => e.run_with(until, src, sink),
            Eng::Split(e) => e.run(until, sink),
        }
    }

    /// At the seal (07 §9.3 item 4): every record of the prefix still without its HashRun
    /// takes its payload by key alone ([`PayloadSource::payload_by_key`]); run [`Self::pump`]
    /// after. A split replay resolves none (its records are on the lane workers).
    pub fn resolve_unhashed(&mut self, src: &impl PayloadSource) -> vyrn_engine::Unhashed {
        match &mut self.eng {
            Eng::One(e) => e.resolve_unhashed(src),
            Eng::Split(_) => vyrn_engine::Unhashed::default(),
        }
    }

    /// Hand this replay's engine to the box it promotes (07 §9.5): every event applied first
    /// (`sink` gets those answers as replay's own), then the lanes, BBO core and trailing ops
    /// as [`Handover`](vyrn_engine::Handover). Consumes the replay (INV-WRITER: one writer at
    /// a time). Refused while a step or record waits for its input, and for a split replay (its
    /// lanes live on their workers).
    pub fn promote(self, sink: &mut impl EngineSink) -> Result<vyrn_engine::Handover, ReplayError> {
        match self.eng {
            Eng::One(e) => e.promote(sink),
            Eng::Split(_) => Err(ReplayError::Split {
                step: self.replayed_step,
                what: "a split replay's lanes are on their workers: promotion takes a one-thread replay",
            }),
        }
    }

    /// Whether [`Replayer::promote`] would take this replay now (`ReplayEngine::promotable`),
    /// and if so the step it would start from.
    pub fn promotable(&self) -> Result<u64, ReplayError> {
        match &self.eng {
            Eng::One(e) => e.promotable().map(|()| e.bbo().next_step()),
            Eng::Split(_) => Err(ReplayError::Split {
                step: self.replayed_step,
                what: "a split replay's lanes are on their workers: promotion takes a one-thread replay",
            }),
        }
    }

    /// Apply every event of the steps replayed so far (the end of the input, or a snapshot
    /// point, 07 §7.5). Until then a lane applies a step's events when its next record comes
    /// (dependency 1 of §7.1: a record runs after exactly the events its `fills_applied`
    /// names, no more), so the answers those events produce surface then.
    pub fn settle(&mut self, sink: &mut impl EngineSink) {
        match &mut self.eng {
            Eng::One(e) => e.settle(sink),
            // A lane that fails while settling reports it through the next `pump`.
            Eng::Split(_) => {
                // Worker threads run on their own: first to a standstill (with the root clock's
                // bounds, as `pump`), then the events. A failure surfaces at the next `pump`.
                let _ = self.settle_split(sink);
            }
        }
    }
}
