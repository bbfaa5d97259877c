//! Engines that wire the tiles together on one thread: [`LiveEngine`] (lanes, cut core, BBO
//! core, the rings between them) and [`ReplayEngine`] (the same lanes and BBO core driven by
//! logged records, 07 §7.1). The sequencer box (`seq`) runs the same tiles on their own
//! threads with the rings of `vyrn-rings`; the simulator and the tests use these.

use crate::bbo::{Bbo, BboSink, ControlReq, Fwd, LaneEvent, OpQueues, StepError, StepIn, StepOut};
use crate::config::EngineConfig;
use crate::cut::CutCore;
use crate::lane::{Lane, LaneDrop, LaneReplayError, LaneSink, Verdict};
use crate::resp::RespOut;
use crate::stepq::StepQueue;
use std::collections::{HashMap, VecDeque};
use vyrn_wire::records::{PacketRecord, StepKind};

/// Everything an engine emits, by lane.
pub trait EngineSink {
    /// A logged packet (live only): record, pre-encoded O-part, payload.
    fn record(&mut self, _rec: &PacketRecord, _enc: &[u8], _payload: &[u8]) {}
    /// A full hash (live only).
    fn hash(&mut self, _lane: u8, _first_lane_seq: u64, _full: &[u8; 32]) {}
    /// An op a lane forwarded to the BBO core.
    fn forward(&mut self, _f: &Fwd) {}
    /// A StepRecord (live: to be logged; replay: as executed).
    fn step(&mut self, _s: &StepOut<'_>) {}
    /// An event as a lane applies it (the fill stream).
    fn event(&mut self, _lane: u8, _ev: &LaneEvent) {}
    /// A response.
    fn respond(&mut self, _r: &RespOut<'_>) {}
    /// What the sink has taken so far, as bytes kept beside a snapshot taken now (the replica's
    /// replay digest, so a replica restored from that snapshot goes on with the same one).
    /// Empty by default: nothing to keep.
    fn tally(&self) -> Vec<u8> {
        Vec::new()
    }
}

/// A sink that keeps nothing.
#[derive(Debug, Default, Clone, Copy)]
pub struct NullEngineSink;
impl EngineSink for NullEngineSink {}

/// A sink that counts the responses and keeps nothing (benches and tests).
#[derive(Debug, Default, Clone, Copy)]
pub struct CountingSink(pub u64);
impl EngineSink for CountingSink {
    fn respond(&mut self, _r: &RespOut<'_>) {
        self.0 += 1;
    }
}

struct LaneAdapter<'a, S: EngineSink> {
    sink: &'a mut S,
    fwd: &'a mut VecDeque<Fwd>,
}

impl<S: EngineSink> LaneSink for LaneAdapter<'_, S> {
    fn record(&mut self, rec: &PacketRecord, enc: &[u8], payload: &[u8]) {
        self.sink.record(rec, enc, payload);
    }
    fn hash(&mut self, lane: u8, first_lane_seq: u64, full: &[u8; 32]) {
        self.sink.hash(lane, first_lane_seq, full);
    }
    fn forward(&mut self, f: &Fwd) {
        self.sink.forward(f);
        self.fwd.push_back(*f);
    }
    fn respond(&mut self, r: &RespOut<'_>) {
        self.sink.respond(r);
    }
}

/// The BBO core's output as a replay keeps it: StepRecords to the sink, each lane's events
/// queued for the lane (here, and staged for the lanes' rings in a replica's split replay).
#[derive(Debug)]
pub struct BboAdapter<'a, S: EngineSink> {
    /// StepRecords.
    pub sink: &'a mut S,
    /// Per lane, its events in step order.
    pub events: &'a mut [VecDeque<LaneEvent>],
}

impl<S: EngineSink> BboSink for BboAdapter<'_, S> {
    fn step(&mut self, s: &StepOut<'_>) {
        self.sink.step(s);
    }
    fn event(&mut self, lane: u8, ev: &LaneEvent) {
        self.events[lane as usize].push_back(*ev);
    }
}

/// Per-lane queues of forwarded ops as the BBO core reads them (a replay that keeps the lane →
/// BBO rings' contents in `VecDeque`s, here and in a replica's split replay).
#[derive(Debug)]
pub struct Queues<'a>(pub &'a mut [VecDeque<Fwd>]);

/// The first record of a lane's queue (kept in LaneSeq order, `first_lane_seq` never
/// decreasing: an Advance record shares its number with the next) that starts at
/// `first_lane_seq` and satisfies `want`: a binary search, then the few that share the number.
pub fn find_waiting<T>(
    q: &mut VecDeque<(PacketRecord, T)>,
    first_lane_seq: u64,
    want: impl Fn(&PacketRecord, &T) -> bool,
) -> Option<&mut (PacketRecord, T)> {
    let from = q.partition_point(|(r, _)| r.first_lane_seq < first_lane_seq);
    q.range_mut(from..)
        .take_while(|(r, _)| r.first_lane_seq == first_lane_seq)
        .find(|(r, t)| want(r, t))
}

impl OpQueues for Queues<'_> {
    fn head(&self, lane: usize) -> Option<&Fwd> {
        self.0.get(lane).and_then(|q| q.front())
    }
    fn pop(&mut self, lane: usize) -> Option<Fwd> {
        self.0.get_mut(lane).and_then(|q| q.pop_front())
    }
}

/// Apply a lane's queued events of steps ≤ `upto`.
fn apply_events<S: EngineSink>(
    lane: &mut Lane,
    q: &mut VecDeque<LaneEvent>,
    fwd: &mut VecDeque<Fwd>,
    upto: u64,
    sink: &mut S,
) {
    while let Some(ev) = q.front() {
        if ev.step > upto {
            break;
        }
        let ev = *ev;
        q.pop_front();
        sink.event(lane.id(), &ev);
        lane.on_event(&ev, &mut LaneAdapter { sink, fwd });
    }
}

/// What the live and the replay engine share: the configuration, the lanes, the BBO core and
/// the rings between them. Both engines deref to it.
#[derive(Debug)]
pub struct Tiles {
    pub(crate) cfg: EngineConfig,
    pub(crate) lanes: Vec<Lane>,
    pub(crate) bbo: Bbo,
    pub(crate) fwd: Vec<VecDeque<Fwd>>,
    pub(crate) events: Vec<VecDeque<LaneEvent>>,
}

impl Tiles {
    fn new(cfg: EngineConfig, ring_cap: usize, lane: fn(&EngineConfig, u8) -> Lane) -> Self {
        let n = cfg.layout.n_lanes as usize;
        Tiles {
            lanes: (0..n as u8).map(|l| lane(&cfg, l)).collect(),
            bbo: Bbo::new(&cfg),
            fwd: (0..n).map(|_| VecDeque::with_capacity(ring_cap)).collect(),
            events: (0..n).map(|_| VecDeque::with_capacity(ring_cap)).collect(),
            cfg,
        }
    }

    /// The configuration.
    pub fn config(&self) -> &EngineConfig {
        &self.cfg
    }

    /// The lanes.
    pub fn lanes(&self) -> &[Lane] {
        &self.lanes
    }

    /// The BBO core.
    pub fn bbo(&self) -> &Bbo {
        &self.bbo
    }

    /// Fault in every table (startup work; see [`Lane::prefault`]).
    pub fn prefault(&mut self) {
        for l in self.lanes.iter_mut() {
            l.prefault();
        }
        // Queues sized to what they hold in a poll, not more: a ring's write position sweeps its
        // whole buffer, so a 16K-event queue (768 KiB a lane) missed the cache on every line it
        // wrote; at 1K a queue stayed in L2 (the replay tile 70–72 → 62–64 ns/msg at the peak
        // mix, `--bench replica`, 2026-12-04); [`QUEUE_START`] is smaller still. A deeper
        // backlog grows a queue once.
        for q in self.events.iter_mut() {
            touch(q, QUEUE_START);
        }
        for q in self.fwd.iter_mut() {
            touch(q, QUEUE_START);
        }
    }

    /// Apply every event produced so far (the state to commit, 07 §7.5).
    pub fn settle(&mut self, sink: &mut impl EngineSink) {
        let done = self.bbo.done();
        for (l, lane) in self.lanes.iter_mut().enumerate() {
            apply_events(lane, &mut self.events[l], &mut self.fwd[l], done, sink);
        }
    }

    pub(crate) fn parts(&self) -> crate::snapshot::Parts<'_> {
        crate::snapshot::Parts {
            cfg: &self.cfg,
            lanes: &self.lanes,
            bbo: &self.bbo,
            fwd: &self.fwd,
            events: &self.events,
        }
    }
}

macro_rules! deref_tiles {
    ($t:ty) => {
        impl std::ops::Deref for $t {
            type Target = Tiles;
            fn deref(&self) -> &Tiles {
                &self.t
            }
        }
        impl std::ops::DerefMut for $t {
            fn deref_mut(&mut self) -> &mut Tiles {
                &mut self.t
            }
        }
    };
}

deref_tiles!(LiveEngine);
deref_tiles!(ReplayEngine);

/// The live engine on one thread.
#[derive(Debug)]
pub struct LiveEngine {
    t: Tiles,
    cut: CutCore,
    route: HashMap<u32, u8, crate::hash::SeededState>,
}

impl LiveEngine {
    /// A live engine for a validated `cfg` (the cut refreshes on every poll).
    pub fn new(cfg: EngineConfig) -> Self {
        let route = cfg.sessions.iter().map(|s| (s.session, s.lane)).collect();
        LiveEngine {
            cut: CutCore::new(cfg.layout, 0),
            route,
            t: Tiles::new(cfg, 1024, Lane::new),
        }
    }

    /// The lane a packet goes to: its session's (the NIC flow filter in production, 07 §9.5).
    pub fn lane_of(&self, bytes: &[u8]) -> Option<u8> {
        self.route
            .get(&vyrn_wire::msg::PktKey::peek_session(bytes)?)
            .copied()
    }

    /// One packet received at `rx_ts`, processed at `now` by its lane. The lane first applies
    /// every event the BBO core has produced for it (eagerly, as a live lane does).
    pub fn submit(
        &mut self,
        now: u64,
        rx_ts: u64,
        bytes: &[u8],
        sink: &mut impl EngineSink,
    ) -> Result<Verdict, LaneDrop> {
        let Some(l) = self.lane_of(bytes) else {
            return Err(LaneDrop::UnknownSession);
        };
        let l = l as usize;
        let done = self.t.bbo.done();
        apply_events(
            &mut self.t.lanes[l],
            &mut self.t.events[l],
            &mut self.t.fwd[l],
            done,
            sink,
        );
        let mut ad = LaneAdapter {
            sink,
            fwd: &mut self.t.fwd[l],
        };
        self.t.lanes[l].on_packet(now, rx_ts, bytes, &mut ad)
    }

    /// Queue a control request (Halt, Resume, Seal); it is the next step.
    pub fn control(&mut self, c: ControlReq) {
        self.t.bbo.request(c);
    }

    /// Run the home until nothing moves: lanes apply their events, the cut refreshes, the BBO
    /// core steps. Returns the steps run.
    pub fn poll(&mut self, now: u64, sink: &mut impl EngineSink) -> Result<u64, StepError> {
        let mut steps = 0;
        loop {
            let done = self.t.bbo.done();
            for (l, lane) in self.t.lanes.iter_mut().enumerate() {
                apply_events(lane, &mut self.t.events[l], &mut self.t.fwd[l], done, sink);
            }
            let lanes = &self.t.lanes;
            self.cut.refresh(now, |l| lanes[l].published());
            let mut ad = BboAdapter {
                sink,
                events: &mut self.t.events,
            };
            match self
                .t
                .bbo
                .poll(now, self.cut.cut(), &mut Queues(&mut self.t.fwd), &mut ad)?
            {
                Some(_) => steps += 1,
                None => break,
            }
        }
        Ok(steps)
    }

    /// Flush every lane's hash batch (what an idle lane does).
    pub fn flush_hashes(&mut self, sink: &mut impl EngineSink) {
        for (l, lane) in self.t.lanes.iter_mut().enumerate() {
            lane.flush_hashes(&mut LaneAdapter {
                sink,
                fwd: &mut self.t.fwd[l],
            });
        }
    }
}

/// A logged step, owned (captures, tests).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoggedStep {
    /// StepId.
    pub step: u64,
    /// Kind.
    pub kind: StepKind,
    /// Source lane.
    pub src_lane: u8,
    /// Source LaneSeq.
    pub src_lane_seq: u64,
    /// Cut.
    pub cut: Vec<u64>,
    /// Payload.
    pub payload: Vec<u8>,
}

impl LoggedStep {
    /// As replay input.
    pub fn as_in(&self) -> StepIn<'_> {
        StepIn {
            step: self.step,
            kind: self.kind,
            src_lane: self.src_lane,
            src_lane_seq: self.src_lane_seq,
            cut: &self.cut,
            payload: &self.payload,
        }
    }
}

/// Why replay stopped: a divergence between the log and the engine (INV-DET).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReplayError {
    /// A lane disagrees with a record.
    Lane {
        /// Lane.
        lane: u8,
        /// The record's first LaneSeq.
        first_lane_seq: u64,
        /// What.
        err: LaneReplayError,
    },
    /// The BBO core disagrees with a step.
    Step(StepError),
    /// A record for a lane this home does not have.
    NoLane(u8),
    /// Input ran out before the dependencies of a step were met.
    Stalled {
        /// The step waiting.
        step: u64,
    },
    /// A promotion (07 §9.5) found a record its lane has not run: its payload is not joined.
    Unresolved {
        /// Lane.
        lane: u8,
        /// The record's first LaneSeq.
        first_lane_seq: u64,
    },
    /// Replay's input could not be read (a replica's replay ring carried a message that does
    /// not parse): replay stops rather than run a corrupt stream.
    Input {
        /// The last step replayed.
        step: u64,
    },
    /// A replay split across threads (a replica's replay lanes apart from its BBO core) broke
    /// its own contract: a lane worker died, a root found a lane off its cut, or the lanes
    /// stopped answering. Replay stops rather than commit a state it cannot vouch for.
    Split {
        /// The last step replayed.
        step: u64,
        /// What.
        what: &'static str,
    },
}

/// Where replay finds a keyed record's payload (07 §5.4, the data join): the copy of
/// `(session, pkt_seq)` whose 8-byte hash is the record's `pkt_hash`. Replay reads it in place,
/// when the lane runs the record: no copy, no buffer per record.
pub trait Payloads {
    /// The payload of `(session, pkt_seq)` whose 8-byte hash is `pkt_hash`, if held.
    fn payload(&self, session: u32, pkt_seq: u32, pkt_hash: u64) -> Option<&[u8]>;

    /// The payload of `(session, pkt_seq)` by its key alone, for a record the sealed prefix
    /// left unhashed (07 §9.3: "its payload is accepted on (session, pkt_seq) alone"): the one
    /// distinct copy held (copies that differ only in `flags` are one), or why not.
    fn payload_by_key(&self, _session: u32, _pkt_seq: u32) -> KeyOnly<'_> {
        KeyOnly::NotHeld
    }
}

/// A payload looked up by its key alone ([`Payloads::payload_by_key`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyOnly<'a> {
    /// The one distinct copy held.
    Held(&'a [u8]),
    /// No copy held.
    NotHeld,
    /// Two or more different copies: the client equivocated (07 §9.6 case d).
    Ambiguous,
}

/// What [`ReplayEngine::resolve_unhashed`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Unhashed {
    /// Records given the one copy their key holds.
    pub resolved: u64,
    /// Records whose key holds no copy.
    pub not_held: u64,
    /// Records whose key holds different copies.
    pub ambiguous: u64,
    /// The first record left waiting, `(lane, first_lane_seq)`.
    pub first_left: Option<(u8, u64)>,
}

/// No stored payloads: every record was fed with its own ([`ReplayEngine::push_record`]).
#[derive(Debug, Default, Clone, Copy)]
pub struct NoPayloads;
impl Payloads for NoPayloads {
    fn payload(&self, _: u32, _: u32, _: u64) -> Option<&[u8]> {
        None
    }
}

/// A queued record's payload: its own bytes, or a key into [`Payloads`] once its `pkt_hash` is
/// known.
#[derive(Debug)]
enum Input {
    Owned(Vec<u8>),
    Keyed(Option<u64>),
    /// A final seal listed the packet unavailable (07 §9.4): run without a payload
    /// ([`Lane::exclude_packet`]).
    Excluded,
}

/// The replay engine (07 §7.1): decoded PacketRecords with their payloads replace the NIC,
/// StepRecord cuts replace the cut core. Both dependencies of §7.1 are honoured; everything
/// else may run in any order, so the result does not depend on the schedule.
#[derive(Debug)]
pub struct ReplayEngine {
    pub(crate) t: Tiles,
    recs: Vec<VecDeque<(PacketRecord, Input)>>,
    steps: StepQueue,
    /// Lane passes that found the head record's payload not yet held.
    waits: u64,
    shuffle: Option<vyrn_wire::corpus::Rng>,
    /// Payload buffers of records already run, for [`ReplayEngine::buffer`] (no allocation per
    /// record once warm).
    spare: Vec<Vec<u8>>,
    /// The sealed tenure's last step and the seal's `lane_bounds` ([`ReplayEngine::end_tenure`]):
    /// the BBO core's cut is set to them once that step has run.
    tenure_start: Option<(u64, Vec<u64>)>,
    /// Restored from a snapshot ([`crate::load::restore`]): the input it already holds.
    floor: Option<Floor>,
    /// Records and steps fed at or below [`ReplayEngine::floor`], dropped.
    skipped: u64,
}

/// What a restored engine already applied (07 §7.6: catch-up replays from the block after the
/// snapshot): each lane's last LaneSeq and the last step. A record whose LaneSeqs all lie at or
/// below its lane's, a step at or below the last, and a payload for such a record are taken and
/// dropped — the decoder feeds the stream from its start, the snapshot stands in for its prefix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Floor {
    pub(crate) lanes: Vec<u64>,
    pub(crate) step: u64,
}

/// Most payload buffers a replay keeps for reuse.
pub const SPARE_BUFFERS: usize = 4096;

/// Entries each lane's event and op queue starts with (a deeper backlog grows it once): small
/// enough that the ring a queue's write position sweeps stays in L1/L2 (64-byte events: 16 KiB a
/// lane). 1K → 256 made the replay tile alone ~4 % faster at the peak mix (`--bench replica`,
/// 2026-12-04).
pub const QUEUE_START: usize = 1 << 8;

/// Steps a replay's queue has room for from the start ([`StepQueue::prefault`]).
pub const STEPS_PREFAULT: usize = 1 << 11;

impl ReplayEngine {
    /// A replay engine at the start of a tenure (LaneSeq 1, step 1).
    pub fn new(cfg: EngineConfig) -> Self {
        let n = cfg.layout.n_lanes as usize;
        ReplayEngine {
            recs: (0..n).map(|_| VecDeque::new()).collect(),
            steps: StepQueue::new(n),
            waits: 0,
            shuffle: None,
            t: Tiles::new(cfg, 0, Lane::for_replay),
            spare: Vec::new(),
            tenure_start: None,
            floor: None,
            skipped: 0,
        }
    }

    /// Records and steps dropped because the snapshot this engine was restored from already
    /// holds them ([`crate::load::restore`]).
    pub fn skipped(&self) -> u64 {
        self.skipped
    }

    /// 07 §7.6: the input this (restored) engine already holds is dropped as it is fed again.
    pub(crate) fn hold_floor(&mut self) {
        self.floor = Some(Floor {
            lanes: self.t.lanes.iter().map(|l| l.published()).collect(),
            step: self.t.bbo.done(),
        });
    }

    /// Below the floor: the record of `lane` whose LaneSeqs end at `last` was applied before
    /// the snapshot.
    fn applied(&self, lane: u8, last: u64) -> bool {
        self.floor
            .as_ref()
            .is_some_and(|f| f.lanes.get(lane as usize).is_some_and(|&p| last <= p))
    }

    /// Fault in the books and the input queues (startup work, as [`LiveEngine`]'s): a replica
    /// takes no page faults on its first records.
    pub fn prefault(&mut self) {
        self.t.prefault();
        for q in &mut self.recs {
            touch(q, 1 << 10);
        }
        self.steps.prefault(STEPS_PREFAULT);
    }

    /// An empty buffer for the next record's payload ([`ReplayEngine::push_record`]): one a
    /// record already run returned, else a new one.
    pub fn buffer(&mut self) -> Vec<u8> {
        self.spare.pop().unwrap_or_default()
    }

    /// Feed a decoded PacketRecord with its joined payload.
    pub fn push_record(&mut self, rec: PacketRecord, payload: Vec<u8>) -> Result<(), ReplayError> {
        if self.applied(rec.lane, rec.first_lane_seq + rec.count.max(1) as u64 - 1) {
            self.skipped += 1;
            return Ok(());
        }
        let q = self
            .recs
            .get_mut(rec.lane as usize)
            .ok_or(ReplayError::NoLane(rec.lane))?;
        q.push_back((rec, Input::Owned(payload)));
        Ok(())
    }

    /// Feed a decoded PacketRecord whose payload replay takes from [`Payloads`] once
    /// [`ReplayEngine::set_hash`] names its `pkt_hash` (an Advance record carries none and goes
    /// as it is).
    pub fn push_keyed(&mut self, rec: PacketRecord) -> Result<(), ReplayError> {
        if self.applied(rec.lane, rec.first_lane_seq + rec.count.max(1) as u64 - 1) {
            self.skipped += 1;
            return Ok(());
        }
        let q = self
            .recs
            .get_mut(rec.lane as usize)
            .ok_or(ReplayError::NoLane(rec.lane))?;
        let input = if rec.is_advance() {
            Input::Owned(Vec::new())
        } else {
            Input::Keyed(None)
        };
        q.push_back((rec, input));
        Ok(())
    }

    /// A HashRun's `pkt_hash` for the keyed record of `lane` starting at `first_lane_seq` (the
    /// first one still without its hash).
    ///
    /// A lane's records wait in its order, `first_lane_seq` never decreasing (an Advance record
    /// shares its number with the next), so the record is found by binary search: a linear scan
    /// per hash was a third of the whole receive side's time (`--bench replica`, 2026-12-03).
    pub fn set_hash(&mut self, lane: u8, first_lane_seq: u64, pkt_hash: u64) {
        if let Some(q) = self.recs.get_mut(lane as usize) {
            if let Some(e) = find_waiting(q, first_lane_seq, |_, i| matches!(i, Input::Keyed(None)))
            {
                e.1 = Input::Keyed(Some(pkt_hash));
            }
        }
    }

    /// The payload chosen for the keyed record of `lane` starting at `first_lane_seq` (the first
    /// one still without its payload), copied into a reused buffer: the caller judged it (07
    /// §5.4's join), so replay reads it as it is, with no [`Payloads`] lookup and no HashRun.
    /// False when no such record waits (the caller fed the payload before its record).
    pub fn set_payload(&mut self, lane: u8, first_lane_seq: u64, bytes: &[u8]) -> bool {
        // A record applied before the snapshot (records end on a cut: never straddle it).
        if self.applied(lane, first_lane_seq) {
            return true;
        }
        let Some(q) = self.recs.get_mut(lane as usize) else {
            return false;
        };
        let Some(e) = find_waiting(q, first_lane_seq, |_, i| matches!(i, Input::Keyed(_))) else {
            return false;
        };
        let mut b = self.spare.pop().unwrap_or_default();
        b.extend_from_slice(bytes);
        e.1 = Input::Owned(b);
        true
    }

    /// A final seal listed the packet of the record of `lane` starting at `first_lane_seq`
    /// unavailable (07 §9.3, §9.4): the record runs without a payload
    /// ([`Lane::exclude_packet`]), and the BBO core runs the rest of the tenure's log as the
    /// final log reads it ([`Bbo::exclude`]). Call it before the lane reaches the record (it
    /// waits for a payload that never comes until then). False when no such record waits.
    pub fn exclude(&mut self, lane: u8, first_lane_seq: u64) -> bool {
        if self.applied(lane, first_lane_seq) {
            return true;
        }
        let Some(q) = self.recs.get_mut(lane as usize) else {
            return false;
        };
        let Some(e) = find_waiting(q, first_lane_seq, |r, i| {
            !r.is_advance() && !matches!(i, Input::Excluded)
        }) else {
            return false;
        };
        if let Input::Owned(b) = std::mem::replace(&mut e.1, Input::Excluded) {
            if b.capacity() > 0 && self.spare.len() < SPARE_BUFFERS {
                let mut b = b;
                b.clear();
                self.spare.push(b);
            }
        }
        self.t.bbo.exclude();
        true
    }

    /// Keep `n` payload buffers of `cap` bytes ready for [`ReplayEngine::buffer`] and
    /// [`ReplayEngine::set_payload`] (startup work: no allocation on the first records).
    pub fn reserve_buffers(&mut self, n: usize, cap: usize) {
        let n = n.min(SPARE_BUFFERS);
        while self.spare.len() < n {
            self.spare.push(Vec::with_capacity(cap));
        }
    }

    /// Lane passes that found the head record's payload not yet held (waiting for the data
    /// side or its hash).
    pub fn waits(&self) -> u64 {
        self.waits
    }

    /// Feed a decoded StepRecord.
    pub fn push_step(&mut self, s: LoggedStep) {
        self.push_step_in(&s.as_in());
    }

    /// Feed a decoded StepRecord, copied into the queue (no buffer of its own).
    pub fn push_step_in(&mut self, s: &StepIn<'_>) {
        if self.floor.as_ref().is_some_and(|f| s.step <= f.step) {
            self.skipped += 1;
            return;
        }
        self.steps.push(s);
    }

    /// Run lanes and the BBO core in a seeded random interleaving (tests: the result must not
    /// depend on the schedule, only on the two dependencies of 07 §7.1).
    pub fn shuffle_schedule(&mut self, seed: u64) {
        self.shuffle = Some(vyrn_wire::corpus::Rng::new(seed));
    }

    /// Records and steps fed and not yet run.
    pub fn backlog(&self) -> (usize, usize) {
        (self.recs.iter().map(|q| q.len()).sum(), self.steps.len())
    }

    /// Run what the input allows, stopping after step `until` (if given) with every lane at
    /// exactly the records that step's cut covers: the state "after step `until`" (a snapshot
    /// point, 07 §7.5). Returns the last step run.
    pub fn run(
        &mut self,
        until: Option<u64>,
        sink: &mut impl EngineSink,
    ) -> Result<u64, ReplayError> {
        self.run_with(until, &NoPayloads, sink)
    }

    /// [`ReplayEngine::run`], taking keyed records' payloads from `src` in place.
    pub fn run_with(
        &mut self,
        until: Option<u64>,
        src: &impl Payloads,
        sink: &mut impl EngineSink,
    ) -> Result<u64, ReplayError> {
        let mut full = true;
        loop {
            let mut progress = false;
            // A shuffled pass lets a random subset of lanes run a few records each and the
            // BBO core a few steps; a full pass (after a shuffled pass that moved nothing)
            // decides whether anything can move at all.
            let (lane_mask, per_lane, bbo_steps) = match (&mut self.shuffle, full) {
                (Some(rng), false) => (
                    rng.next_u64(),
                    1 + rng.below(4) as usize,
                    rng.below(4) as usize,
                ),
                // A full pass runs every step that is ready: one step per pass walked every
                // lane once per step (`--bench replica`, 2026-12-03).
                _ => (u64::MAX, usize::MAX, usize::MAX),
            };
            let done = self.t.bbo.done();
            if until.is_some_and(|u| done >= u) {
                break;
            }
            // Lanes: dependency 1 — a record runs once every event of steps ≤ its
            // fills_applied exists; and only as far as the next step's cut needs (so lane
            // state at a step boundary is exact).
            for l in 0..self.t.lanes.len() {
                if lane_mask & (1 << l) == 0 {
                    continue;
                }
                let mut budget = per_lane;
                // Stopping after `until`, a lane runs only as far as the next step's cut.
                let bound = match until {
                    Some(_) => self.steps.front().map_or(0, |s| s.cut[l]),
                    None => u64::MAX,
                };
                let q = &mut self.recs[l];
                while let Some((rec, input)) = q.front() {
                    if budget == 0 {
                        break;
                    }
                    budget -= 1;
                    if rec.fills_applied > done {
                        break;
                    }
                    let last = rec.first_lane_seq + rec.count.max(1) as u64 - 1;
                    if last > bound {
                        break;
                    }
                    // A keyed record's payload, read in place (07 §5.4 join).
                    let payload: &[u8] = match input {
                        Input::Owned(b) => b,
                        Input::Excluded => &[],
                        Input::Keyed(h) => {
                            match h.and_then(|h| src.payload(rec.session, rec.pkt_seq, h)) {
                                Some(p) => p,
                                None => {
                                    self.waits += 1;
                                    break;
                                }
                            }
                        }
                    };
                    let rec = *rec;
                    apply_events(
                        &mut self.t.lanes[l],
                        &mut self.t.events[l],
                        &mut self.t.fwd[l],
                        rec.fills_applied,
                        sink,
                    );
                    let mut ad = LaneAdapter {
                        sink,
                        fwd: &mut self.t.fwd[l],
                    };
                    let excluded = matches!(input, Input::Excluded);
                    let lane = &mut self.t.lanes[l];
                    if excluded {
                        lane.exclude_packet(&rec, &mut ad)
                    } else {
                        lane.replay_packet(&rec, payload, &mut ad)
                    }
                    .map_err(|err| ReplayError::Lane {
                        lane: l as u8,
                        first_lane_seq: rec.first_lane_seq,
                        err,
                    })?;
                    if let Some((_, Input::Owned(mut b))) = q.pop_front() {
                        if b.capacity() > 0 && self.spare.len() < SPARE_BUFFERS {
                            b.clear();
                            self.spare.push(b);
                        }
                    }
                    progress = true;
                }
            }
            // BBO: dependency 2 — step s once every lane applied its ops ≤ cut_s.
            for _ in 0..bbo_steps {
                let Some(s) = self.steps.front() else { break };
                if until.is_some_and(|u| self.t.bbo.done() >= u) {
                    break;
                }
                // 07 §9.4: the next tenure's first cut starts at the seal's bounds.
                if let Some((last, bounds)) = &self.tenure_start {
                    if self.t.bbo.done() >= *last {
                        self.t.bbo.start_tenure(bounds).map_err(ReplayError::Step)?;
                        self.tenure_start = None;
                    }
                }
                let ready = s
                    .cut
                    .iter()
                    .zip(&self.t.lanes)
                    .all(|(&c, lane)| lane.published() >= c);
                if ready {
                    let mut ad = BboAdapter {
                        sink,
                        events: &mut self.t.events,
                    };
                    self.t
                        .bbo
                        .replay(&s, &mut Queues(&mut self.t.fwd), &mut ad)
                        .map_err(ReplayError::Step)?;
                    self.steps.pop();
                    progress = true;
                } else {
                    break;
                }
            }
            if !progress && full {
                break;
            }
            full = self.shuffle.is_none() || !progress;
        }
        Ok(self.t.bbo.done())
    }

    /// At the seal (07 §9.3 item 4): every record still without its HashRun takes its payload
    /// by key alone, when exactly one distinct copy is held. Records already hashed keep
    /// waiting for their own copy.
    pub fn resolve_unhashed(&mut self, src: &impl Payloads) -> Unhashed {
        let mut u = Unhashed::default();
        let mut found = Vec::new();
        for (l, q) in self.recs.iter().enumerate() {
            for (r, i) in q {
                if !matches!(i, Input::Keyed(None)) {
                    continue;
                }
                match src.payload_by_key(r.session, r.pkt_seq) {
                    KeyOnly::Held(b) => {
                        found.push((l as u8, r.first_lane_seq, b.to_vec()));
                        continue;
                    }
                    KeyOnly::NotHeld => u.not_held += 1,
                    KeyOnly::Ambiguous => u.ambiguous += 1,
                }
                u.first_left = u.first_left.or(Some((l as u8, r.first_lane_seq)));
            }
        }
        for (l, f, b) in found {
            if self.set_payload(l, f, &b) {
                u.resolved += 1;
            }
        }
        u
    }

    /// The first record (lane order) still waiting for its lane to run it: `(lane,
    /// first_lane_seq)`.
    pub(crate) fn first_waiting(&self) -> Option<(u8, u64)> {
        self.recs
            .iter()
            .enumerate()
            .find_map(|(l, q)| q.front().map(|(r, _)| (l as u8, r.first_lane_seq)))
    }

    /// The tenure's log ends at `last_step`, its seal's (07 §9.4): a record of the prefix that
    /// names a later step in `fills_applied` (its lane applied that step's fills live, and the
    /// box died before the step was complete on both substreams, so the seal dropped it) runs
    /// after the seal's last step instead — the dropped step's events never happened in the
    /// final log, and the next tenure reuses its number. INV-REP-11 lets such a record's ack out
    /// ("q stays in the prefix as a trailing lane op"): without this it waited for ever, and a
    /// promoted standby could not be handed its lanes. Returns the records changed.
    ///
    /// The next tenure's cuts start at the seal's `lane_bounds` (07 §9.4), as the promoted box's
    /// BBO core starts them (`Bbo::start_tenure`): once `last_step` has run, the replay's BBO
    /// core takes `lane_bounds` as its cut, so a half is *moved* at the next tenure's first
    /// steps (`need_H`, OTHER) exactly where the box judged it. Before, the replay kept the last
    /// step's cut, and with trailing ops its events' `need` differed from the box's. Bounds
    /// below the last step's cut are a replay error (`StepError::BadCut`) at that point.
    pub fn end_tenure(&mut self, last_step: u64, lane_bounds: &[u64]) -> u64 {
        self.tenure_start = Some((last_step, lane_bounds.to_vec()));
        let mut n = 0;
        for q in &mut self.recs {
            for (r, _) in q.iter_mut() {
                if r.fills_applied > last_step {
                    r.fills_applied = last_step;
                    n += 1;
                }
            }
        }
        n
    }

    /// After the whole log: if steps remain that can never run, say which.
    pub fn check_drained(&self) -> Result<(), ReplayError> {
        match self.steps.front() {
            Some(s) => Err(ReplayError::Stalled { step: s.step }),
            None => Ok(()),
        }
    }
}

/// A sink that keeps what a test or tool compares: the log (records with payloads, steps,
/// hashes), per-session response bytes with their gates, and per-lane event streams.
#[derive(Debug, Default, Clone)]
pub struct Capture {
    /// Logged records with payloads, in logging order.
    pub records: Vec<(PacketRecord, Vec<u8>)>,
    /// Pre-encoded O-part bytes per record, in the same order.
    pub encoded: Vec<Vec<u8>>,
    /// Steps in order.
    pub steps: Vec<LoggedStep>,
    /// Full hashes `(lane, first_lane_seq, hash)`.
    pub hashes: Vec<(u8, u64, [u8; 32])>,
    /// Responses per session, in send order: (bytes, gate).
    pub responses: HashMap<u32, Vec<(Vec<u8>, crate::resp::Gate)>>,
    /// Events per lane, in application order.
    pub events: Vec<Vec<LaneEvent>>,
    /// Ops forwarded to the BBO core, in forwarding order.
    pub forwards: Vec<Fwd>,
}

impl EngineSink for Capture {
    fn record(&mut self, rec: &PacketRecord, enc: &[u8], payload: &[u8]) {
        self.records.push((*rec, payload.to_vec()));
        self.encoded.push(enc.to_vec());
    }
    fn hash(&mut self, lane: u8, first_lane_seq: u64, full: &[u8; 32]) {
        self.hashes.push((lane, first_lane_seq, *full));
    }
    fn forward(&mut self, f: &Fwd) {
        self.forwards.push(*f);
    }
    fn step(&mut self, s: &StepOut<'_>) {
        self.steps.push(LoggedStep {
            step: s.step,
            kind: s.kind,
            src_lane: s.src_lane,
            src_lane_seq: s.src_lane_seq,
            cut: s.cut.to_vec(),
            payload: s.payload.to_vec(),
        });
    }
    fn event(&mut self, lane: u8, ev: &LaneEvent) {
        let l = lane as usize;
        if self.events.len() <= l {
            self.events.resize_with(l + 1, Vec::new);
        }
        self.events[l].push(*ev);
    }
    fn respond(&mut self, r: &RespOut<'_>) {
        self.responses
            .entry(r.session)
            .or_default()
            .push((r.bytes.to_vec(), r.gate));
    }
}

/// Room for `n` entries in an empty queue, its pages faulted in (a reservation alone maps them
/// on first use: a fresh replay engine took page faults in its first milliseconds of the peak
/// mix, `--bench replica`, 2026-12-03). A queue in use is only reserved.
fn touch<T>(q: &mut VecDeque<T>, n: usize) {
    if !q.is_empty() || q.capacity() >= n {
        q.reserve(n);
        return;
    }
    let mut v: Vec<T> = Vec::with_capacity(n);
    for slot in v.spare_capacity_mut() {
        *slot = std::mem::MaybeUninit::zeroed();
    }
    // `From<Vec>` keeps the buffer (no copy, no reallocation).
    *q = VecDeque::from(std::hint::black_box(v));
}

impl Tiles {
    /// The state commitment now.
    pub fn state_root(&self) -> [u8; 32] {
        crate::snapshot::commit(&self.parts())
    }

    /// Write a REP_Snapshot file of the state now.
    pub fn snapshot(
        &self,
        meta: &crate::snapshot::SnapMeta,
        rep: &crate::snapshot::ReplicationState,
    ) -> Vec<u8> {
        crate::snapshot::write(&self.parts(), meta, rep)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::{Input, Mix, Workload};

    /// One tenure's log: `inputs` inputs, the BBO core polled every third (a poll with the
    /// lanes ahead of the last step's cut leaves trailing ops until the next).
    fn feed(e: &mut LiveEngine, w: &mut Workload, inputs: usize, poll: bool, cap: &mut Capture) {
        for i in 0..inputs {
            match w.next_input() {
                Input::Packet { rx_ts, bytes } => {
                    let _ = e.submit(rx_ts, rx_ts, &bytes, cap);
                }
                Input::Control(c) => e.control(c),
            }
            if poll && i % 3 == 0 {
                e.poll(w.now(), cap).expect("live step");
            }
        }
    }

    /// The log as a replay takes it: the first tenure's records and steps (`split` of them),
    /// then `end` (or nothing) as `ReplicaCore::take_seal` sends it, then the next tenure's.
    fn replay(
        cfg: &EngineConfig,
        live: &Capture,
        split: (usize, usize),
        end: Option<(u64, &[u64])>,
    ) -> Result<Capture, ReplayError> {
        let mut r = ReplayEngine::new(cfg.clone());
        let push =
            |r: &mut ReplayEngine, recs: &[(PacketRecord, Vec<u8>)], steps: &[LoggedStep]| {
                for (rec, p) in recs {
                    r.push_record(*rec, p.clone()).expect("lane exists");
                }
                for s in steps {
                    r.push_step(s.clone());
                }
            };
        let mut cap = Capture::default();
        push(&mut r, &live.records[..split.0], &live.steps[..split.1]);
        r.run(None, &mut cap)?;
        if let Some((last, bounds)) = end {
            r.end_tenure(last, bounds);
        }
        push(&mut r, &live.records[split.0..], &live.steps[split.1..]);
        r.run(None, &mut cap)?;
        r.check_drained()?;
        r.settle(&mut cap);
        Ok(cap)
    }

    /// 07 §9.4: a tenure's cuts start at the seal's `lane_bounds`. A box that died with ops
    /// above its last step's cut on both halves (trailing ops) is followed by one whose BBO core
    /// starts at the bounds (`Bbo::start_tenure`); a replay told where the tenure ended
    /// (`end_tenure`) judges the next steps' moved halves as that box did — every event's
    /// `need_A`/`need_B` and every response's gate equal. Without it the replay keeps the last
    /// step's cut and they differ.
    #[test]
    fn a_replay_starts_the_next_tenures_cuts_at_the_seals_bounds() {
        let cfg = EngineConfig::test_home(4, 3);
        assert_eq!(cfg.layout.n_streams, 2);
        let mut w = Workload::new(&cfg, 11, Mix::clean());
        let mut e = LiveEngine::new(cfg.clone());
        let mut live = Capture::default();
        feed(&mut e, &mut w, 600, true, &mut live);
        e.poll(w.now(), &mut live).expect("live step");
        // Trailing ops: packets the lanes take after the last step, on both halves.
        feed(&mut e, &mut w, 40, false, &mut live);
        let last = e.t.bbo.done();
        let bounds: Vec<u64> = e.t.lanes.iter().map(|l| l.published()).collect();
        let trailing: Vec<bool> = (0..2u8)
            .map(|h| {
                (0..bounds.len())
                    .any(|l| cfg.layout.stream_of(l) == h && bounds[l] > e.t.bbo.cut()[l])
            })
            .collect();
        assert_eq!(
            trailing,
            [true, true],
            "{bounds:?} over {:?}",
            e.t.bbo.cut()
        );
        // The next tenure (what `Takeover::new` does to the promoted box's BBO core).
        e.t.bbo
            .start_tenure(&bounds)
            .expect("bounds at or above the cut");
        let split = (live.records.len(), live.steps.len());
        feed(&mut e, &mut w, 600, true, &mut live);
        e.poll(w.now() + 10_000, &mut live).expect("live step");
        e.flush_hashes(&mut live);
        e.settle(&mut live);

        let told = replay(&cfg, &live, split, Some((last, &bounds))).expect("replay");
        assert_eq!(told.events, live.events, "events (need_A/need_B)");
        assert_eq!(told.steps, live.steps);
        let gates = |c: &Capture| -> Vec<crate::resp::Gate> {
            let mut s: Vec<_> = c.responses.keys().copied().collect();
            s.sort_unstable();
            s.iter()
                .flat_map(|k| c.responses[k].iter().map(|r| r.1))
                .collect()
        };
        assert_eq!(gates(&told), gates(&live), "response gates");
        // Not told: the replay judges the first steps against the last step's cut.
        let blind = replay(&cfg, &live, split, None).expect("replay");
        assert_ne!(blind.events, live.events);
        // Bounds below the cut are refused at that step, not taken.
        let mut low = bounds.clone();
        low[0] = 0;
        let got = replay(&cfg, &live, split, Some((last, &low)));
        assert_eq!(got.err(), Some(ReplayError::Step(StepError::BadCut)));
    }
}
