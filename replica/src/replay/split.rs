//! Replay split across cores (07 §7.2: the **replay BBO core**, core 2, and the **replay
//! lanes**, cores 8–49 and 56–62, one to one with the live map; 07 §7.1's two dependencies
//! between them).
//!
//! [`SplitEngine`] is the replay BBO core and the replay driver: it holds the decoded records
//! until their payload comes (each lane's in its order), hands each lane its records with their
//! payloads over an SPSC ring, runs every logged step once every lane has published its ops up
//! to the step's cut (dependency 2), and sends each lane its events. [`LaneWorker`]s run the
//! lanes — one worker per thread, each any subset of the lanes — a record once every event of
//! steps ≤ its `fills_applied` has reached the lane (dependency 1). The same worker is polled
//! by the driver itself when it has no thread (a 2-core box, the tests), or spins on its own
//! core: one code path.
//!
//! Between them, per lane: records in (`LaneIn`, the payload copied inline), ops out (`Fwd`),
//! events in (`LaneEvent`), and three words — the lane's published LaneSeq (worker → driver,
//! stored after its ops are in the ring), the BBO core's last step (driver → workers, stored
//! after that step's events are in the rings; a lane whose event ring was full has the step of
//! its first event not yet sent in `ev_blocked`), and the lane's hold (driver → worker: the
//! LaneSeq it must not run past while a state root is due, 07 §7.4).
//!
//! **State roots** (07 §7.4) need one state: every lane at exactly the cut of the root's last
//! step. The driver holds each lane at that cut (its hold), lets the BBO core reach the step,
//! then asks every worker for its lanes: each worker, once its ops are all in the ring, hands
//! its `Lane`s and their unapplied events over (a move, no copy) and waits; the driver commits
//! with the engine's own function (`snapshot::state_root_of`, the bytes a one-thread engine
//! commits) and hands them back. Roots are rare (every REP_ROOT_BLOCKS heights); the pause is a
//! few microseconds of moves and the commitment itself.
//!
//! **Hot path.** No allocation once warm (payload buffers reused, rings preallocated, queues
//! reserved at start), no lock, no syscall: rings are `vyrn_rings::spsc`, the words atomics.
//! Ops and events cross in batches — each side stages what it produces and pushes it once per
//! pass, one store of the ring's tail per batch (pushed one by one, every event was a cache
//! line pulled from the other core twice: the two threads ran 141.8 ns/msg at the peak mix,
//! batched 107.6, `--bench replica`, 2026-12-04). A full ring never blocks: what does not fit
//! stays staged, and the lane's word (or the step word, for events) is not advanced past it.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use crossbeam_utils::CachePadded;
use vyrn_engine::bbo::StepIn;
use vyrn_engine::home::{find_waiting, BboAdapter, EngineSink, Queues, ReplayError, SPARE_BUFFERS};
use vyrn_engine::lane::LaneSink;
use vyrn_engine::resp::RespOut;
use vyrn_engine::stepq::StepQueue;
use vyrn_engine::{Bbo, EngineConfig, Fwd, Lane, LaneEvent};
use vyrn_rings::spsc;
use vyrn_wire::msg::client::REQ_MAX_LEN;
use vyrn_wire::records::PacketRecord;

use crate::replay::run::{ReportingSink, SinkReport};
use vyrn_tile::Wait as Idle;

/// Ring sizes between the driver and one lane (each rounded up to a power of two).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SplitSlots {
    /// Records in flight to the lane (each carries its payload inline: ~250 bytes).
    pub lane_in: usize,
    /// Ops in flight from the lane to the BBO core.
    pub fwd: usize,
    /// Events in flight from the BBO core to the lane.
    pub ev: usize,
}

impl Default for SplitSlots {
    fn default() -> Self {
        SplitSlots {
            lane_in: 1 << 10,
            fwd: 1 << 14,
            ev: 1 << 14,
        }
    }
}
/// Ops a lane stages before it stops for the ring to drain.
const STAGE_MAX: usize = 1 << 12;
/// A worker reports what its sink saw at most every this many records.
const REPORT_EVERY: u32 = 256;

/// A lane worker's sink: the lanes' responses and applied events, reported to the driver.
pub trait WorkerSink: ReportingSink + Send {
    /// The sink itself, for a caller that knows its type (tests, tools).
    fn into_any(self: Box<Self>) -> Box<dyn std::any::Any + Send>;
}
impl<T: ReportingSink + Send + 'static> WorkerSink for T {
    fn into_any(self: Box<Self>) -> Box<dyn std::any::Any + Send> {
        self
    }
}

/// [`LaneIn::len`] of a record a final seal listed unavailable (07 §9.4): it runs without a
/// payload ([`vyrn_engine::lane::Lane::exclude_packet`]).
const EXCLUDED_LEN: u8 = u8::MAX;
const _: () = assert!(REQ_MAX_LEN < EXCLUDED_LEN as usize);

/// A record and its payload, on the way to its lane.
#[derive(Clone, Copy)]
struct LaneIn {
    rec: PacketRecord,
    len: u8,
    bytes: [u8; REQ_MAX_LEN],
}

/// The words the driver and the workers share (atomics only: no lock), each on its own cache
/// line (one writer each; on a shared line every store would pull the line from the readers).
#[derive(Debug)]
struct Shared {
    /// Per lane: its published LaneSeq (worker → driver; Release after its ops are in the ring).
    published: Vec<CachePadded<AtomicU64>>,
    /// Per lane: the LaneSeq it must not run past (driver → worker; `u64::MAX`: none).
    hold: Vec<CachePadded<AtomicU64>>,
    /// Per lane: the step of its first event still staged at the driver (`u64::MAX`: none).
    ev_blocked: Vec<CachePadded<AtomicU64>>,
    /// The BBO core's last step (Release after the step's events are in the rings or staged
    /// with `ev_blocked` set; stored once per pass of the driver, not per step).
    done: CachePadded<AtomicU64>,
    /// Worker threads stop.
    stop: AtomicBool,
}

/// Driver → worker.
enum Req {
    /// Hand every lane over (a state root, 07 §7.4) once its ops are all in the ring.
    Handover,
    /// Take them back.
    Return(Vec<(u8, Lane, VecDeque<LaneEvent>)>),
    /// Apply every event of steps ≤ this (the end of the input), then answer.
    Settle(u64),
    /// Answer after the next poll that can run nothing.
    Sync,
}

/// Worker → driver.
enum WMsg {
    /// The lanes, with what the sink saw (a report that must not be dropped).
    Lanes(Vec<(u8, Lane, VecDeque<LaneEvent>)>, SinkReport),
    /// Settled, with what the sink saw.
    Settled(SinkReport),
    /// A poll after the `Sync` ran nothing.
    Synced,
    Report(SinkReport),
    Failed(ReplayError),
}

/// One lane as a worker holds it.
struct WLane {
    id: u8,
    /// None while handed over.
    lane: Option<Lane>,
    input: spsc::Consumer<LaneIn>,
    ev_rx: spsc::Consumer<LaneEvent>,
    /// Events received, not yet applied (a record applies those ≤ its `fills_applied`).
    events: VecDeque<LaneEvent>,
    fwd_tx: spsc::Producer<Fwd>,
    /// Ops the ring had no room for (the lane's word waits for them).
    fwd_stage: VecDeque<Fwd>,
    /// The published LaneSeq last stored.
    published: u64,
}

/// Replay lanes on one core (07 §7.2's replay lanes): any subset of the home's lanes.
pub struct LaneWorker {
    lanes: Vec<WLane>,
    sh: Arc<Shared>,
    req: spsc::Consumer<Req>,
    out: spsc::Producer<WMsg>,
    /// Messages the out ring had no room for (reports are dropped instead).
    out_stage: VecDeque<WMsg>,
    sink: Box<dyn WorkerSink>,
    want_handover: bool,
    want_sync: bool,
    /// A settle to apply once a poll finds nothing to run (the one-thread engine runs every
    /// record it can before it settles).
    want_settle: Option<u64>,
    handed: bool,
    failed: bool,
    since_report: u32,
}

impl std::fmt::Debug for LaneWorker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LaneWorker")
            .field(
                "lanes",
                &self.lanes.iter().map(|l| l.id).collect::<Vec<_>>(),
            )
            .field("handed", &self.handed)
            .field("failed", &self.failed)
            .finish()
    }
}

/// The lane side of a sink: responses, and ops staged for the ring (one batch per poll).
struct WAdapter<'a> {
    sink: &'a mut dyn WorkerSink,
    stage: &'a mut VecDeque<Fwd>,
}

impl LaneSink for WAdapter<'_> {
    fn record(&mut self, _rec: &PacketRecord, _enc: &[u8], _payload: &[u8]) {}
    fn hash(&mut self, _lane: u8, _first_lane_seq: u64, _full: &[u8; 32]) {}
    fn forward(&mut self, f: &Fwd) {
        self.sink.forward(f);
        // Out in one batch per poll (`LaneWorker::publish`): one store of the ring's tail, not
        // one per op, on a line the BBO core's core reads.
        self.stage.push_back(*f);
    }
    fn respond(&mut self, r: &RespOut<'_>) {
        self.sink.respond(r);
    }
}

/// Apply a lane's received events of steps ≤ `upto` (dependency 1 of 07 §7.1).
fn apply_events(lane: &mut Lane, q: &mut VecDeque<LaneEvent>, upto: u64, ad: &mut WAdapter<'_>) {
    while let Some(ev) = q.front() {
        if ev.step > upto {
            break;
        }
        let ev = *ev;
        q.pop_front();
        ad.sink.event(lane.id(), &ev);
        lane.on_event(&ev, ad);
    }
}

impl LaneWorker {
    fn send(&mut self, m: WMsg) {
        if !self.out_stage.is_empty() {
            self.out_stage.push_back(m);
        } else if let Err(m) = self.out.push(m) {
            self.out_stage.push_back(m);
        }
    }

    fn flush_out(&mut self) {
        while let Some(m) = self.out_stage.pop_front() {
            if let Err(m) = self.out.push(m) {
                self.out_stage.push_front(m);
                break;
            }
        }
    }

    fn report(&mut self) {
        self.since_report = 0;
        // Reports are progress: one the ring has no room for is dropped, the next one covers it.
        if self.out_stage.is_empty() {
            let _ = self.out.push(WMsg::Report(self.sink.report()));
        }
    }

    fn fail(&mut self, e: ReplayError) {
        self.failed = true;
        self.send(WMsg::Failed(e));
    }

    /// Flush staged ops and store each lane's published word where its ops are all out.
    fn publish(&mut self) -> bool {
        let mut work = false;
        for wl in &mut self.lanes {
            while !wl.fwd_stage.is_empty() {
                let (a, _) = wl.fwd_stage.as_slices();
                let n = wl.fwd_tx.push_batch(a);
                if n == 0 {
                    break;
                }
                wl.fwd_stage.drain(..n);
                work = true;
            }
            if let (true, Some(lane)) = (wl.fwd_stage.is_empty(), wl.lane.as_ref()) {
                let p = lane.published();
                if p != wl.published {
                    wl.published = p;
                    self.sh.published[wl.id as usize].store(p, Ordering::Release);
                }
            }
        }
        work
    }

    /// One step: requests, then every lane as far as its input, its events and its hold allow.
    /// True when it did any work.
    pub fn poll(&mut self) -> bool {
        self.flush_out();
        let mut work = false;
        while let Some(r) = self.req.pop() {
            work = true;
            match r {
                Req::Handover => self.want_handover = true,
                Req::Sync => self.want_sync = true,
                Req::Return(v) => {
                    for (id, lane, events) in v {
                        if let Some(wl) = self.lanes.iter_mut().find(|w| w.id == id) {
                            wl.lane = Some(lane);
                            wl.events = events;
                        }
                    }
                    self.handed = false;
                }
                Req::Settle(upto) => self.want_settle = Some(upto),
            }
        }
        if self.failed || self.handed {
            return work;
        }
        work |= self.publish();
        if self.want_handover {
            if self.lanes.iter().all(|w| w.fwd_stage.is_empty()) {
                let mut v = Vec::with_capacity(self.lanes.len());
                for wl in &mut self.lanes {
                    while let Some(e) = wl.ev_rx.pop() {
                        wl.events.push_back(e);
                    }
                    if let Some(lane) = wl.lane.take() {
                        v.push((wl.id, lane, std::mem::take(&mut wl.events)));
                    }
                }
                self.want_handover = false;
                self.handed = true;
                self.since_report = 0;
                let r = self.sink.report();
                self.send(WMsg::Lanes(v, r));
                return true;
            }
            return work;
        }
        // The step word first, then the events it covers (they were in the ring before it).
        let done = self.sh.done.load(Ordering::Acquire);
        let mut ran = 0u32;
        for i in 0..self.lanes.len() {
            let wl = &mut self.lanes[i];
            let l = wl.id as usize;
            let blocked = self.sh.ev_blocked[l].load(Ordering::Acquire);
            let ev_done = if blocked == u64::MAX {
                done
            } else {
                done.min(blocked.saturating_sub(1))
            };
            while let Some(e) = wl.ev_rx.pop() {
                wl.events.push_back(e);
            }
            let hold = self.sh.hold[l].load(Ordering::Acquire);
            let Some(lane) = wl.lane.as_mut() else {
                continue;
            };
            while let Some(head) = wl.input.peek() {
                let rec = head.rec;
                // Ops the ring had no room for hold the lane back (a poll's worth is normal).
                if rec.fills_applied > ev_done || wl.fwd_stage.len() >= STAGE_MAX {
                    break;
                }
                let last = rec.first_lane_seq + rec.count.max(1) as u64 - 1;
                if last > hold {
                    break;
                }
                let mut ad = WAdapter {
                    sink: &mut *self.sink,
                    stage: &mut wl.fwd_stage,
                };
                apply_events(lane, &mut wl.events, rec.fills_applied, &mut ad);
                let r = if head.len == EXCLUDED_LEN {
                    lane.exclude_packet(&rec, &mut ad)
                } else {
                    lane.replay_packet(&rec, &head.bytes[..head.len as usize], &mut ad)
                };
                wl.input.pop();
                ran += 1;
                if let Err(err) = r {
                    self.fail(ReplayError::Lane {
                        lane: l as u8,
                        first_lane_seq: rec.first_lane_seq,
                        err,
                    });
                    return true;
                }
            }
        }
        if ran > 0 {
            work = true;
            self.publish();
            self.since_report = self.since_report.saturating_add(ran);
            if self.since_report >= REPORT_EVERY {
                self.report();
            }
        } else if self.since_report > 0 {
            // Idle after work: say what the sink saw.
            self.report();
        }
        let still = ran == 0 && self.lanes.iter().all(|w| w.fwd_stage.is_empty());
        if self.want_sync && still {
            self.want_sync = false;
            self.send(WMsg::Synced);
        }
        if let (Some(upto), true) = (self.want_settle, still) {
            // Every event of steps ≤ upto is in the ring (the driver sends this only once its
            // staging is empty and its step word is past `upto`), and no record can run: now
            // the events, as the one-thread engine's settle applies them after its last run.
            self.want_settle = None;
            for wl in &mut self.lanes {
                while let Some(e) = wl.ev_rx.pop() {
                    wl.events.push_back(e);
                }
                if let Some(lane) = wl.lane.as_mut() {
                    let mut ad = WAdapter {
                        sink: &mut *self.sink,
                        stage: &mut wl.fwd_stage,
                    };
                    apply_events(lane, &mut wl.events, upto, &mut ad);
                }
            }
            self.publish();
            let r = self.sink.report();
            self.send(WMsg::Settled(r));
            work = true;
        }
        work
    }
}

/// How a worker runs.
enum Run {
    /// Polled by the driver (no thread of its own).
    Inline(Box<LaneWorker>),
    /// On its own thread.
    Thread(Option<std::thread::JoinHandle<LaneWorker>>),
}

/// The driver's end of one worker.
struct Worker {
    req: spsc::Producer<Req>,
    msgs: spsc::Consumer<WMsg>,
    report: SinkReport,
    run: Run,
    lanes: usize,
}

/// Where the lane workers run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Workers {
    /// `n` workers polled by the driver on its own thread (the tests; a 2-core box).
    Inline(usize),
    /// `n` workers on threads of their own, pinned to `cores` where given (one each, in order).
    Threads {
        /// Workers.
        n: usize,
        /// Cores to pin them to.
        cores: Vec<usize>,
        /// How they wait when idle (as the replay thread does).
        idle: Idle,
    },
}

impl Workers {
    fn n(&self) -> usize {
        match self {
            Workers::Inline(n) | Workers::Threads { n, .. } => (*n).max(1),
        }
    }
}

/// Counters of the split.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SplitCounters {
    /// Records handed to lanes.
    pub records: u64,
    /// Steps run by the BBO core.
    pub steps: u64,
    /// Passes that left a lane's events staged at the driver (its ring was full).
    pub events_staged: u64,
    /// State roots gathered (lanes handed over and back).
    pub handovers: u64,
}

/// The replay BBO core and driver (see the module docs).
pub struct SplitEngine {
    cfg: EngineConfig,
    bbo: Bbo,
    sh: Arc<Shared>,
    /// Per lane, records waiting at the driver for their payload (`None`) or for room.
    recs: Vec<VecDeque<(PacketRecord, Option<Vec<u8>>)>>,
    spare: Vec<Vec<u8>>,
    to_lane: Vec<spsc::Producer<LaneIn>>,
    ev_tx: Vec<spsc::Producer<LaneEvent>>,
    ev_stage: Vec<VecDeque<LaneEvent>>,
    fwd_rx: Vec<spsc::Consumer<Fwd>>,
    fwd: Vec<VecDeque<Fwd>>,
    steps: StepQueue,
    workers: Vec<Worker>,
    /// Which worker holds each lane.
    owner: Vec<usize>,
    hold: Vec<u64>,
    /// Per lane, the published word as last read (a step whose cut is within it needs no load).
    seen: Vec<u64>,
    /// Per lane, `ev_blocked` as last stored.
    ev_blocked_now: Vec<u64>,
    waits: u64,
    failed: Option<ReplayError>,
    c: SplitCounters,
    /// The sealed tenure's last step and the seal's bounds
    /// ([`SplitEngine::start_tenure_after`]).
    tenure_start: Option<(u64, Vec<u64>)>,
}

impl std::fmt::Debug for SplitEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SplitEngine")
            .field("done", &self.bbo.done())
            .field("workers", &self.workers.len())
            .field("counters", &self.c)
            .finish()
    }
}

/// Longest the driver waits for its lanes to answer a handover, a sync or a settle.
const WAIT_MAX: std::time::Duration = std::time::Duration::from_secs(10);

const _: () = assert!(REQ_MAX_LEN <= u8::MAX as usize, "a LaneIn's length is a u8");

impl SplitEngine {
    /// Replay for `cfg` with its lanes on `workers` (lane `l` on worker `l mod n`), each with a
    /// sink from `make_sink`.
    pub fn new(
        cfg: EngineConfig,
        workers: Workers,
        slots: SplitSlots,
        make_sink: &dyn Fn() -> Box<dyn WorkerSink>,
    ) -> std::io::Result<Self> {
        let n_lanes = cfg.layout.n_lanes as usize;
        let nw = workers.n().min(n_lanes.max(1));
        let sh = Arc::new(Shared {
            published: (0..n_lanes)
                .map(|_| CachePadded::new(AtomicU64::new(0)))
                .collect(),
            hold: (0..n_lanes)
                .map(|_| CachePadded::new(AtomicU64::new(u64::MAX)))
                .collect(),
            ev_blocked: (0..n_lanes)
                .map(|_| CachePadded::new(AtomicU64::new(u64::MAX)))
                .collect(),
            done: CachePadded::new(AtomicU64::new(0)),
            stop: AtomicBool::new(false),
        });
        let mut wlanes: Vec<Vec<WLane>> = (0..nw).map(|_| Vec::new()).collect();
        let (mut to_lane, mut ev_tx, mut fwd_rx) = (Vec::new(), Vec::new(), Vec::new());
        let mut owner = Vec::with_capacity(n_lanes);
        for l in 0..n_lanes {
            let (itx, irx) = spsc::channel_prefaulted::<LaneIn>(slots.lane_in.max(2));
            let (etx, erx) = spsc::channel_prefaulted::<LaneEvent>(slots.ev.max(2));
            let (ftx, frx) = spsc::channel_prefaulted::<Fwd>(slots.fwd.max(2));
            to_lane.push(itx);
            ev_tx.push(etx);
            fwd_rx.push(frx);
            owner.push(l % nw);
            let mut lane = Lane::for_replay(&cfg, l as u8);
            lane.prefault();
            wlanes[l % nw].push(WLane {
                id: l as u8,
                published: lane.published(),
                lane: Some(lane),
                input: irx,
                ev_rx: erx,
                events: VecDeque::with_capacity(1 << 12),
                fwd_tx: ftx,
                fwd_stage: VecDeque::new(),
            });
        }
        for (l, w) in wlanes
            .iter()
            .flatten()
            .map(|w| (w.id as usize, w.published))
        {
            sh.published[l].store(w, Ordering::Release);
        }
        let mut ws = Vec::with_capacity(nw);
        for (i, lanes) in wlanes.into_iter().enumerate() {
            let (rtx, rrx) = spsc::channel::<Req>(16);
            let (mtx, mrx) = spsc::channel::<WMsg>(64);
            let nl = lanes.len();
            let w = LaneWorker {
                lanes,
                sh: sh.clone(),
                req: rrx,
                out: mtx,
                out_stage: VecDeque::new(),
                sink: make_sink(),
                want_handover: false,
                want_sync: false,
                want_settle: None,
                handed: false,
                failed: false,
                since_report: 0,
            };
            let run = match &workers {
                Workers::Inline(_) => Run::Inline(Box::new(w)),
                Workers::Threads { cores, idle, .. } => {
                    let core = cores.get(i).copied();
                    let idle = *idle;
                    let stop = sh.clone();
                    let mut w = w;
                    let h = std::thread::Builder::new()
                        .name(format!("vyrn-rlane{i}"))
                        .spawn(move || {
                            vyrn_tile::run_loop(&stop.stop, core, idle, || w.poll());
                            w
                        })?;
                    Run::Thread(Some(h))
                }
            };
            ws.push(Worker {
                req: rtx,
                msgs: mrx,
                report: SinkReport::default(),
                run,
                lanes: nl,
            });
        }
        Ok(SplitEngine {
            bbo: Bbo::new(&cfg),
            recs: (0..n_lanes).map(|_| VecDeque::new()).collect(),
            spare: Vec::new(),
            to_lane,
            ev_tx,
            ev_stage: (0..n_lanes).map(|_| VecDeque::new()).collect(),
            fwd_rx,
            fwd: (0..n_lanes)
                .map(|_| VecDeque::with_capacity(1 << 12))
                .collect(),
            steps: {
                let mut q = StepQueue::new(n_lanes);
                q.prefault(1 << 14);
                q
            },
            workers: ws,
            owner,
            hold: vec![u64::MAX; n_lanes],
            seen: vec![0; n_lanes],
            ev_blocked_now: vec![u64::MAX; n_lanes],
            waits: 0,
            failed: None,
            c: SplitCounters::default(),
            tenure_start: None,
            sh,
            cfg,
        })
    }

    /// Fault in the driver's queues and keep `n` payload buffers of REQ_MAX_LEN ready.
    pub fn prefault(&mut self, n: usize) {
        for q in &mut self.recs {
            q.reserve(1 << 12);
        }
        let n = n.min(SPARE_BUFFERS);
        while self.spare.len() < n {
            self.spare.push(Vec::with_capacity(REQ_MAX_LEN));
        }
    }

    /// Counters.
    pub fn counters(&self) -> SplitCounters {
        self.c
    }

    /// The last step the BBO core ran.
    pub fn done(&self) -> u64 {
        self.bbo.done()
    }

    /// Lane passes that found the head record without its payload.
    pub fn waits(&self) -> u64 {
        self.waits
    }

    /// Records waiting at the driver and steps not yet run.
    pub fn backlog(&self) -> (usize, usize) {
        (self.recs.iter().map(|q| q.len()).sum(), self.steps.len())
    }

    /// What the workers' sinks reported last, summed.
    pub fn report(&self) -> SinkReport {
        let mut r = SinkReport::default();
        for w in &self.workers {
            r.merge(&w.report);
        }
        r
    }

    /// A decoded PacketRecord, in its lane's order (an Advance record needs no payload).
    pub fn push_keyed(&mut self, rec: PacketRecord) -> Result<(), ReplayError> {
        let q = self
            .recs
            .get_mut(rec.lane as usize)
            .ok_or(ReplayError::NoLane(rec.lane))?;
        let p = rec.is_advance().then(Vec::new);
        q.push_back((rec, p));
        Ok(())
    }

    /// The payload the join chose for the record of `lane` starting at `first_lane_seq` (the
    /// first one still without it). False when no such record waits.
    pub fn set_payload(&mut self, lane: u8, first_lane_seq: u64, bytes: &[u8]) -> bool {
        // The front never sends more (`ReplayTx::payload`); a record cut short would diverge.
        if bytes.len() > REQ_MAX_LEN {
            return false;
        }
        let Some(q) = self.recs.get_mut(lane as usize) else {
            return false;
        };
        let Some(e) = find_waiting(q, first_lane_seq, |r, p| p.is_none() && !r.is_advance()) else {
            return false;
        };
        let mut b = self.spare.pop().unwrap_or_default();
        b.extend_from_slice(bytes);
        e.1 = Some(b);
        true
    }

    /// A final seal listed the packet of the record of `lane` starting at `first_lane_seq`
    /// unavailable (07 §9.4; `ReplayEngine::exclude`): it goes to its lane without a payload, and
    /// the BBO core runs the rest of the tenure's log as the final log reads it. False when no
    /// such record waits here (a record already on its lane worker cannot be excluded).
    pub fn exclude(&mut self, lane: u8, first_lane_seq: u64) -> bool {
        let Some(q) = self.recs.get_mut(lane as usize) else {
            return false;
        };
        let Some(e) = find_waiting(q, first_lane_seq, |r, _| !r.is_advance()) else {
            return false;
        };
        if let Some(mut b) = e.1.replace(Vec::new()) {
            if b.capacity() > 0 && self.spare.len() < SPARE_BUFFERS {
                b.clear();
                self.spare.push(b);
            }
        }
        self.bbo.exclude();
        true
    }

    /// The sealed tenure ends at `last_step`: once it has run, the BBO core's cut is the seal's
    /// `lane_bounds` (07 §9.4, `ReplayEngine::end_tenure`). Records waiting on a later step
    /// are on the lane workers and are not changed here.
    pub fn start_tenure_after(&mut self, last_step: u64, lane_bounds: &[u64]) {
        self.tenure_start = Some((last_step, lane_bounds.to_vec()));
    }

    /// A decoded StepRecord, copied into the queue.
    pub fn push_step_in(&mut self, s: &StepIn<'_>) {
        self.steps.push(s);
    }

    /// The error the split stopped on, if any.
    pub fn failed(&self) -> Option<ReplayError> {
        self.failed.clone()
    }

    fn check(&self) -> Result<(), ReplayError> {
        match &self.failed {
            Some(e) => Err(e.clone()),
            None => Ok(()),
        }
    }

    /// Poll inline workers and read every worker's messages; `Lanes` and `Settled` go to
    /// `got`. True when anything moved.
    fn service(&mut self, got: &mut Vec<WMsg>) -> Result<bool, ReplayError> {
        let mut work = false;
        for w in &mut self.workers {
            match &mut w.run {
                Run::Inline(lw) => work |= lw.poll(),
                Run::Thread(h) => {
                    if h.as_ref().is_some_and(|h| h.is_finished()) {
                        // A worker thread never returns while running: it panicked.
                        self.failed.get_or_insert(ReplayError::Split {
                            step: self.bbo.done(),
                            what: "a replay lane thread died",
                        });
                    }
                }
            }
            while let Some(m) = w.msgs.pop() {
                work = true;
                match m {
                    WMsg::Report(r) => w.report = r,
                    WMsg::Failed(e) => {
                        self.failed.get_or_insert(e);
                    }
                    WMsg::Lanes(v, r) => {
                        w.report = r;
                        got.push(WMsg::Lanes(v, r));
                    }
                    WMsg::Settled(r) => {
                        w.report = r;
                        got.push(WMsg::Settled(r));
                    }
                    m => got.push(m),
                }
            }
        }
        self.check()?;
        Ok(work)
    }

    /// Hand each lane the records whose payloads are here, in its order, as the ring allows.
    fn feed_lanes(&mut self) -> bool {
        let mut work = false;
        for (l, q) in self.recs.iter_mut().enumerate() {
            let tx = &mut self.to_lane[l];
            while let Some((_, p)) = q.front() {
                if p.is_none() {
                    self.waits += 1;
                    break;
                }
                if tx.is_full() {
                    break;
                }
                let Some((rec, Some(mut b))) = q.pop_front() else {
                    break;
                };
                let n = b.len().min(REQ_MAX_LEN);
                // An empty payload on a record that carries one: excluded (`exclude`).
                let excluded = n == 0 && !rec.is_advance();
                let mut li = LaneIn {
                    rec,
                    len: if excluded { EXCLUDED_LEN } else { n as u8 },
                    bytes: [0; REQ_MAX_LEN],
                };
                li.bytes[..n].copy_from_slice(&b[..n]);
                let _ = tx.push(li);
                if b.capacity() > 0 && self.spare.len() < SPARE_BUFFERS {
                    b.clear();
                    self.spare.push(b);
                }
                self.c.records += 1;
                work = true;
            }
        }
        work
    }

    fn drain_fwd(&mut self) {
        for (l, rx) in self.fwd_rx.iter_mut().enumerate() {
            while let Some(f) = rx.pop() {
                self.fwd[l].push_back(f);
            }
        }
    }

    /// Push staged events to their rings, a batch per lane; a lane's `ev_blocked` names the
    /// step of its first event left staged (`u64::MAX` once all are out). The caller stores
    /// the step word only after this.
    fn flush_events(&mut self) {
        for l in 0..self.ev_stage.len() {
            let st = &mut self.ev_stage[l];
            if st.is_empty() {
                continue;
            }
            while !st.is_empty() {
                let (a, _) = st.as_slices();
                let n = self.ev_tx[l].push_batch(a);
                if n == 0 {
                    break;
                }
                st.drain(..n);
            }
            let b = st.front().map_or(u64::MAX, |e| e.step);
            if b != u64::MAX {
                self.c.events_staged += 1;
            }
            if b != self.ev_blocked_now[l] {
                self.ev_blocked_now[l] = b;
                self.sh.ev_blocked[l].store(b, Ordering::Release);
            }
        }
    }

    /// Set each lane's hold: with a bound, the cut of the newest step ≤ the bound known (the
    /// BBO core's own cut when none is queued); without, none.
    fn set_holds(&mut self, until: Option<u64>) {
        for l in 0..self.hold.len() {
            let h = match until {
                None => u64::MAX,
                Some(u) => {
                    let i = self.steps.partition_point(|s| s.step <= u);
                    match i.checked_sub(1).and_then(|i| self.steps.get(i)) {
                        Some(s) => s.cut.get(l).copied().unwrap_or(0),
                        None => self.bbo.cut().get(l).copied().unwrap_or(0),
                    }
                }
            };
            if h != self.hold[l] {
                self.hold[l] = h;
                self.sh.hold[l].store(h, Ordering::Release);
            }
        }
    }

    /// Run what the input allows, the BBO core stopping after step `until` (if given) with
    /// every lane held at that step's cut. Returns the last step run. With worker threads it
    /// returns when nothing is ready (it never waits for the lanes); inline, it polls the
    /// workers until nothing moves.
    pub fn run(
        &mut self,
        until: Option<u64>,
        sink: &mut impl EngineSink,
    ) -> Result<u64, ReplayError> {
        self.check()?;
        let mut got = Vec::new();
        loop {
            // Holds before new records reach the lanes.
            self.set_holds(until);
            let mut progress = self.feed_lanes();
            progress |= self.service(&mut got)?;
            self.flush_events();
            // Every lane's ring drained each pass: a lane whose ring is full holds its word back
            // until its staged ops are out.
            self.drain_fwd();
            // Dependency 2: step s once every lane published its ops ≤ cut_s.
            while let Some(s) = self.steps.front() {
                if until.is_some_and(|u| self.bbo.done() >= u) {
                    break;
                }
                // 07 §9.4: the next tenure's first cut starts at the seal's bounds.
                if let Some((last, bounds)) = &self.tenure_start {
                    if self.bbo.done() >= *last {
                        if let Err(e) = self.bbo.start_tenure(bounds) {
                            let e = ReplayError::Step(e);
                            self.failed = Some(e.clone());
                            return Err(e);
                        }
                        self.tenure_start = None;
                    }
                }
                let mut ready = true;
                for (l, &c) in s.cut.iter().enumerate() {
                    if c <= self.seen[l] {
                        continue;
                    }
                    let p = self.sh.published[l].load(Ordering::Acquire);
                    self.seen[l] = p;
                    if p < c {
                        ready = false;
                        break;
                    }
                }
                if !ready {
                    break;
                }
                // The words were read first: the step's op is in its lane's ring by now (only
                // the source lane's queue is read).
                let src = s.src_lane as usize;
                if let (Some(rx), Some(q)) = (self.fwd_rx.get_mut(src), self.fwd.get_mut(src)) {
                    while let Some(f) = rx.pop() {
                        q.push_back(f);
                    }
                }
                // Events staged per lane, out in one batch per pass (`flush_events`, before the
                // step word moves).
                let mut ad = BboAdapter {
                    sink,
                    events: &mut self.ev_stage,
                };
                if let Err(e) = self.bbo.replay(&s, &mut Queues(&mut self.fwd), &mut ad) {
                    let e = ReplayError::Step(e);
                    self.failed = Some(e.clone());
                    return Err(e);
                }
                self.c.steps += 1;
                self.steps.pop();
                progress = true;
            }
            // The steps' events to the rings (what does not fit stays staged, its lane's
            // `ev_blocked` set), then the step word, once per pass.
            self.flush_events();
            if progress {
                self.sh.done.store(self.bbo.done(), Ordering::Release);
            }
            // Handovers, settles and syncs are answered only while their caller waits.
            debug_assert!(got.is_empty(), "an answer nobody asked for");
            let inline = self.workers.iter().any(|w| matches!(w.run, Run::Inline(_)));
            if !progress || !inline {
                break;
            }
        }
        Ok(self.bbo.done())
    }

    /// Wait (polling inline workers, yielding to threaded ones) until `f` holds of the messages
    /// gathered. Staged events go out meanwhile only when `flush` (never during a handover: an
    /// event pushed after a worker emptied its ring would be in neither the lanes handed over
    /// nor the stage). Lanes silent for [`WAIT_MAX`] stop replay with a typed error.
    fn wait_for(
        &mut self,
        flush: bool,
        mut f: impl FnMut(&[WMsg]) -> bool,
    ) -> Result<Vec<WMsg>, ReplayError> {
        let mut got = Vec::new();
        let t0 = std::time::Instant::now();
        loop {
            if flush {
                self.flush_events();
            }
            self.drain_fwd();
            self.service(&mut got)?;
            if f(&got) {
                return Ok(got);
            }
            if t0.elapsed() > WAIT_MAX {
                return Err(self.fail_split("the replay lanes stopped answering"));
            }
            std::thread::yield_now();
        }
    }

    fn fail_split(&mut self, what: &'static str) -> ReplayError {
        let e = ReplayError::Split {
            step: self.bbo.done(),
            what,
        };
        self.failed.get_or_insert(e.clone());
        e
    }

    fn request(&mut self, w: usize, r: Req) -> Result<(), ReplayError> {
        // At most a few requests are ever in flight (the ring holds 16).
        if self.workers[w].req.push(r).is_err() {
            return Err(self.fail_split("a replay lane worker's request ring is full"));
        }
        Ok(())
    }

    /// Push every staged event to the lanes' rings (the workers drain them).
    fn flush_all_events(&mut self) -> Result<(), ReplayError> {
        let t0 = std::time::Instant::now();
        while self.ev_stage.iter().any(|s| !s.is_empty()) {
            let mut got = Vec::new();
            self.flush_events();
            self.service(&mut got)?;
            if t0.elapsed() > WAIT_MAX {
                return Err(self.fail_split("the replay lanes stopped taking events"));
            }
            std::thread::yield_now();
        }
        Ok(())
    }

    /// The state commitment after the BBO core's last step (07 §7.4), every lane at exactly
    /// that step's cut (the caller ran with `until` = that step, so the holds put them there).
    pub fn state_root(&mut self) -> Result<[u8; 32], ReplayError> {
        self.check()?;
        // Every event of the steps run goes to the rings first; then nothing is pushed while
        // the lanes are handed over (the BBO core does not run meanwhile).
        self.flush_all_events()?;
        for w in 0..self.workers.len() {
            self.request(w, Req::Handover)?;
        }
        let nw = self.workers.len();
        let got = self.wait_for(false, |g| {
            g.iter().filter(|m| matches!(m, WMsg::Lanes(..))).count() == nw
        })?;
        let n = self.cfg.layout.n_lanes as usize;
        let mut lanes: Vec<Option<(Lane, VecDeque<LaneEvent>)>> = (0..n).map(|_| None).collect();
        for m in got {
            if let WMsg::Lanes(v, _) = m {
                for (id, lane, ev) in v {
                    if let Some(slot) = lanes.get_mut(id as usize) {
                        *slot = Some((lane, ev));
                    }
                }
            }
        }
        self.drain_fwd();
        if lanes.iter().any(|x| x.is_none()) {
            return Err(self.fail_split("a replay lane was not handed over"));
        }
        let (ls, evs): (Vec<Lane>, Vec<VecDeque<LaneEvent>>) = lanes.into_iter().flatten().unzip();
        // 07 §7.4: the state after the step, every lane at exactly its cut (the holds put them
        // there; a lane past it would make the root depend on the schedule).
        let at_cut = ls
            .iter()
            .zip(self.bbo.cut())
            .all(|(lane, &c)| lane.published() == c);
        let root = vyrn_engine::snapshot::state_root_of(&self.cfg, &ls, &self.bbo, &self.fwd, &evs);
        let mut back: Vec<Vec<(u8, Lane, VecDeque<LaneEvent>)>> =
            (0..nw).map(|_| Vec::new()).collect();
        for (l, (lane, ev)) in ls.into_iter().zip(evs).enumerate() {
            back[self.owner[l]].push((l as u8, lane, ev));
        }
        for (w, v) in back.into_iter().enumerate() {
            self.request(w, Req::Return(v))?;
        }
        if !at_cut {
            return Err(self.fail_split("a replay lane was off the root's cut"));
        }
        self.c.handovers += 1;
        Ok(root)
    }

    /// What has moved so far (the BBO core's last step, records handed to lanes, events still
    /// staged): a caller that runs, [`SplitEngine::sync`]s and runs again is at a standstill
    /// when this did not change and no event is staged (a staged event pushed later could
    /// let a lane run a record).
    pub fn moved(&self) -> (u64, u64, usize) {
        (
            self.bbo.done(),
            self.c.records,
            self.ev_stage.iter().map(|s| s.len()).sum(),
        )
    }

    /// Wait until every worker has polled once and found nothing to run (the end of the
    /// input: with worker threads, [`SplitEngine::run`] returns without waiting for them).
    pub fn sync(&mut self) -> Result<(), ReplayError> {
        self.check()?;
        for w in 0..self.workers.len() {
            self.request(w, Req::Sync)?;
        }
        let nw = self.workers.len();
        self.wait_for(true, |g| {
            g.iter().filter(|m| matches!(m, WMsg::Synced)).count() == nw
        })?;
        Ok(())
    }

    /// Apply every event of the steps run so far (the end of the input, after running to a
    /// standstill: see [`SplitEngine::sync`]): waits for the lanes.
    pub fn settle(&mut self) -> Result<(), ReplayError> {
        self.check()?;
        // Every lane's events through the last step must be in its ring first.
        self.flush_all_events()?;
        let upto = self.bbo.done();
        for w in 0..self.workers.len() {
            self.request(w, Req::Settle(upto))?;
        }
        let nw = self.workers.len();
        // Each answer carries its worker's report (`service` keeps it).
        self.wait_for(true, |g| {
            g.iter().filter(|m| matches!(m, WMsg::Settled(_))).count() == nw
        })?;
        Ok(())
    }

    /// Lanes each worker holds.
    pub fn worker_lanes(&self) -> Vec<usize> {
        self.workers.iter().map(|w| w.lanes).collect()
    }
}

impl SplitEngine {
    /// Stop the workers and take their sinks back, in worker order (a worker thread that
    /// panicked gives none).
    pub fn into_sinks(mut self) -> Vec<Box<dyn WorkerSink>> {
        self.sh.stop.store(true, Ordering::Release);
        let mut out = Vec::new();
        for w in std::mem::take(&mut self.workers) {
            match w.run {
                Run::Inline(lw) => out.push(lw.sink),
                Run::Thread(Some(h)) => {
                    if let Ok(lw) = h.join() {
                        out.push(lw.sink);
                    }
                }
                Run::Thread(None) => {}
            }
        }
        out
    }
}

impl Drop for SplitEngine {
    fn drop(&mut self) {
        self.sh.stop.store(true, Ordering::Release);
        for w in &mut self.workers {
            if let Run::Thread(h) = &mut w.run {
                if let Some(h) = h.take() {
                    let _ = h.join();
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use vyrn_engine::home::CountingSink;

    fn sink() -> Box<dyn WorkerSink> {
        Box::new(CountingSink::default())
    }

    fn garbage(e: &mut SplitEngine) {
        let rec = PacketRecord {
            lane: 1,
            count: 1,
            session: 1,
            slot: 0,
            pkt_seq: 1,
            first_lane_seq: 1,
            ..PacketRecord::default()
        };
        e.push_keyed(rec).unwrap();
        assert!(e.set_payload(1, 1, b"not a packet"));
        assert!(!e.set_payload(1, 1, b"twice"), "one payload per record");
        assert!(!e.set_payload(3, 7, b"no record"));
    }

    #[test]
    fn a_lane_that_disagrees_with_its_record_stops_replay_with_a_typed_error_inline() {
        let mut e = SplitEngine::new(
            EngineConfig::test_home(4, 4),
            Workers::Inline(2),
            SplitSlots::default(),
            &sink,
        )
        .unwrap();
        garbage(&mut e);
        let r = e.run(None, &mut CountingSink::default());
        assert!(
            matches!(
                r,
                Err(ReplayError::Lane {
                    lane: 1,
                    first_lane_seq: 1,
                    ..
                })
            ),
            "{r:?}"
        );
        // Stopped for good.
        assert!(e.run(None, &mut CountingSink::default()).is_err());
        assert!(e.state_root().is_err());
    }

    #[test]
    fn a_lane_thread_that_disagrees_reports_it_and_the_threads_stop_on_drop() {
        let mut e = SplitEngine::new(
            EngineConfig::test_home(4, 4),
            Workers::Threads {
                n: 2,
                cores: Vec::new(),
                idle: Idle::Backoff,
            },
            SplitSlots::default(),
            &sink,
        )
        .unwrap();
        assert_eq!(e.worker_lanes(), vec![2, 2]);
        garbage(&mut e);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        let err = loop {
            match e.run(None, &mut CountingSink::default()) {
                Err(err) => break err,
                Ok(_) => {
                    assert!(std::time::Instant::now() < deadline, "the worker reports");
                    std::thread::yield_now();
                }
            }
        };
        assert!(matches!(err, ReplayError::Lane { lane: 1, .. }), "{err:?}");
        // Dropping joins the threads (a hang here fails the test by timeout).
        drop(e);
    }

    /// 07 §9.4: a record a final seal excluded runs on its lane worker without a payload, and
    /// the split's BBO core runs the rest of the log as one engine does: the same state.
    #[test]
    fn a_split_replay_excludes_a_record_as_one_engine_does() {
        use vyrn_engine::workload::{Input, Mix, Workload};
        let cfg = EngineConfig::test_home(4, 4);
        let mut w = Workload::new(&cfg, 5, Mix::clean());
        let mut live = vyrn_engine::LiveEngine::new(cfg.clone());
        let mut cap = vyrn_engine::Capture::default();
        for i in 0..1500 {
            match w.next_input() {
                Input::Packet { rx_ts, bytes } => {
                    let _ = live.submit(rx_ts, rx_ts, &bytes, &mut cap);
                }
                Input::Control(c) => live.control(c),
            }
            if i % 3 == 0 {
                live.poll(w.now(), &mut cap).unwrap();
            }
        }
        live.poll(w.now() + 10_000, &mut cap).unwrap();
        let x = cap.records[cap.records.len() / 2..]
            .iter()
            .map(|(r, _)| *r)
            .find(|r| r.count > 0)
            .unwrap();
        let mut one = vyrn_engine::ReplayEngine::new(cfg.clone());
        let mut split =
            SplitEngine::new(cfg, Workers::Inline(2), SplitSlots::default(), &sink).unwrap();
        for (rec, p) in &cap.records {
            one.push_record(*rec, p.clone()).unwrap();
            split.push_keyed(*rec).unwrap();
            if !rec.is_advance() && (rec.lane, rec.first_lane_seq) != (x.lane, x.first_lane_seq) {
                assert!(split.set_payload(rec.lane, rec.first_lane_seq, p));
            }
        }
        assert!(one.exclude(x.lane, x.first_lane_seq));
        assert!(split.exclude(x.lane, x.first_lane_seq));
        for st in &cap.steps {
            one.push_step(st.clone());
            split.push_step_in(&st.as_in());
        }
        let done = one.run(None, &mut CountingSink::default()).unwrap();
        assert_eq!(done, live.bbo().done());
        let mut got = 0;
        for _ in 0..10_000 {
            got = split.run(None, &mut CountingSink::default()).unwrap();
            if got == done {
                break;
            }
        }
        assert_eq!(got, done, "the split ran every step");
        assert_eq!(split.state_root().unwrap(), one.state_root());
        let mut plain = vyrn_engine::ReplayEngine::new(EngineConfig::test_home(4, 4));
        for (rec, p) in &cap.records {
            plain.push_record(*rec, p.clone()).unwrap();
        }
        for st in &cap.steps {
            plain.push_step(st.clone());
        }
        plain.run(None, &mut CountingSink::default()).unwrap();
        assert_ne!(
            plain.state_root(),
            one.state_root(),
            "the exclusion mattered"
        );
    }

    #[test]
    fn an_empty_split_takes_the_same_root_as_one_engine() {
        let cfg = EngineConfig::test_home(4, 4);
        let mut e = SplitEngine::new(
            cfg.clone(),
            Workers::Inline(3),
            SplitSlots::default(),
            &sink,
        )
        .unwrap();
        let one = vyrn_engine::ReplayEngine::new(cfg);
        assert_eq!(e.state_root().unwrap(), one.state_root());
        assert_eq!(e.counters().handovers, 1);
        // The lanes came back: a second root is the same.
        assert_eq!(e.state_root().unwrap(), one.state_root());
    }
}
