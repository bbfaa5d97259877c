//! The tiles of the sequencer box (07 §4.1) — the one implementation of each: lanes, the cut
//! core, the BBO core, stream-A and stream-B, the TX tile, the order hasher and control. Each
//! owns its own endpoints of the box's shared memory — `vyrn-rings` SPSC rings, the one-writer
//! `R_step` broadcast ring with a cursor per stream core and control, and the gate words
//! (`released[H]`, `LaneCut[l]`, `step_done`, `close_req`, `seq_fenced`) — and has a
//! non-blocking `poll`. Who calls `poll` is a runner's business ([`crate::runner`]): pinned
//! threads in production, the seeded scheduler in the tests and the simulator.
//!
//! What leaves the box goes through each writing tile's own [`Wire`]: the stream cores write
//! each frame on path A and path B and fence before they store `released[H]` (07 §4.2; the gate
//! under failure in [`crate::stream`]); lanes, the TX tile and control send responses and
//! notices through an [`Out`] that checks `seq_fenced` first, so nothing leaves a fenced box
//! (INV-REP-6). Hot path: no tile takes a lock, allocates or makes a syscall of its own per
//! message; a ring that is full parks the item in the tile's own overflow queue (allocation
//! only under back-pressure), and an item is never dropped.

use crate::control::{Control, ControlCounters};
use crate::hasher::OrderHasher;
use crate::mem::{ControlMem, HasherMem, PathWrite, StreamMem};
use crate::runner::Task;
use crate::shm::{pkt_hash8, ClosedHalf, FrameInfo, PktEntry, SeqConfig, StepEntry, StepMsg};
use crate::stream::{NackOutcome, StreamCore};
use crossbeam_utils::CachePadded;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use vyrn_engine::bbo::{BboSink, ControlReq, LaneEvent, OpQueues, StepOut};
use vyrn_engine::cut::CutCore;
use vyrn_engine::lane::{Lane, LaneSink, Verdict};
use vyrn_engine::{Bbo, Fwd, Gate, RespOut};
use vyrn_rings::multi;
use vyrn_rings::spsc::{self, Consumer, Producer};
use vyrn_rings::words::{CloseReq, LaneCut, PublishedCut, Released, SeqFenced, StepDone};
use vyrn_wire::header::BlockHeader;
use vyrn_wire::msg::client::REQ_MAX_LEN;
use vyrn_wire::records::PacketRecord;

mod build;
mod words;
pub use build::{build, build_takeover, Reserve};
use words::{gate_open, Held, RespBytes};
pub use words::{GateStats, Words};

/// Entries of each lane's rings (`R_pkt[l]`, `R_hash8[l]`, lane → BBO, BBO → lane, responses).
pub const LANE_RING: usize = 1 << 14;
/// Entries of `R_step` (07 §4.1: 16 Ki).
pub const STEP_RING: usize = 1 << 14;
/// A lane takes a new packet only while each of its output rings has this much room.
const LANE_MARGIN: usize = 256;
/// Packets a lane takes per poll at most (a burst in one poll, bounded).
pub const LANE_BATCH: usize = 64;
/// Steps the BBO core runs per poll at most (every ready step, bounded).
pub const BBO_STEPS_PER_POLL: usize = 64;

/// Where a tile's writes leave the box.
pub trait Wire: Send {
    /// Write a frame of substream `h` on replication path `path` (0: A, 1: B); `Busy` is
    /// backpressure (the stream core tries again at a later poll), `Failed` a refusal.
    fn frame_on(&mut self, _h: u8, _path: u8, _info: &FrameInfo, _bytes: &[u8]) -> PathWrite {
        PathWrite::Done
    }
    /// Fence: every frame write so far is complete (07 §4.2: the sfence before `released[H]`);
    /// false if a path still holds some.
    fn fence(&mut self) -> bool {
        true
    }
    /// REP_A_PATH raised (`down`) or cleared by stream core `h` for path `path` (07 §14).
    fn path_alarm(&mut self, _h: u8, _path: u8, _down: bool) {}
    /// Send a response (its gate already passed).
    fn resp(&mut self, session: u32, gate: Gate, bytes: &[u8]);
    /// Send a notice (`NOTICE_RESP_SEQ`).
    fn notice(&mut self, session: u32, bytes: &[u8]);
    /// Send `REP_DurableMark{step, height}` (07 §6.9) to whoever follows the durable stream.
    fn durable(&mut self, _step: u64, _height: u64) {}
    /// A packet of `session` whose tag verified and that is fresh (not a replay of an old one)
    /// came from `src`: answers go there from now on (07 §9.5; a forged or replayed packet
    /// never moves a session's answers).
    fn learn(&mut self, _session: u32, _src: std::net::SocketAddr) {}
    /// [`Self::learn`], only while `session` has no address yet: a packet ahead of sequence
    /// (answered BAD_SEQ) may be an attacker's replay of one the box never saw, so it gives a
    /// session its first address but never moves one (security review F12).
    fn learn_first(&mut self, _session: u32, _src: std::net::SocketAddr) {}
    /// The newest StepId of a step-gated response sent to `session` so far: control sends a
    /// session the Durable/Final watermarks only while they have something of it to attest
    ///. `u64::MAX` (the default): every watermark to every session.
    fn session_step(&self, _session: u32) -> u64 {
        u64::MAX
    }
    /// Send what `resp`/`notice`/`durable` batched (a wire that sends at once has nothing to
    /// do). Called by the writing tile at the end of each poll.
    fn flush(&mut self) {}
    /// Drop what was batched and not sent (the box fenced meanwhile); how many messages.
    fn discard(&mut self) -> u64 {
        0
    }
}

/// A tile's way out for responses and notices: the fence checked before every write (INV-REP-6:
/// after `seq_fenced`, no response leaves for the rest of the tenure).
pub struct Out {
    wire: Box<dyn Wire>,
    words: Arc<Words>,
}

impl Out {
    fn new(wire: Box<dyn Wire>, words: Arc<Words>) -> Self {
        Out { wire, words }
    }
    fn fenced(&self) -> bool {
        if self.words.fenced.is_set() {
            self.words.fenced_drops.fetch_add(1, Ordering::Relaxed);
            return true;
        }
        false
    }
    fn resp(&mut self, session: u32, gate: Gate, bytes: &[u8]) {
        if !self.fenced() {
            self.wire.resp(session, gate, bytes);
        }
    }
    fn notice(&mut self, session: u32, bytes: &[u8]) {
        if !self.fenced() {
            self.wire.notice(session, bytes);
        }
    }
    fn durable(&mut self, step: u64, height: u64) {
        if !self.fenced() {
            self.wire.durable(step, height);
        }
    }
    fn session_step(&self, session: u32) -> u64 {
        self.wire.session_step(session)
    }
    /// End of a poll: what the wire batched leaves now (one `sendmmsg` for the poll's
    /// responses). A fenced box sends none of it (INV-REP-6).
    fn flush(&mut self) {
        if self.words.fenced.is_set() {
            let n = self.wire.discard();
            if n > 0 {
                self.words.fenced_drops.fetch_add(n, Ordering::Relaxed);
            }
            return;
        }
        self.wire.flush();
    }
}

impl std::fmt::Debug for Out {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Out")
    }
}

/// A received client packet for a lane.
#[derive(Clone, Copy)]
pub struct RxPkt {
    /// Receive time.
    pub rx_ts: u64,
    /// Where it came from (learned by the lane only if its tag verifies and it is fresh).
    pub src: Option<std::net::SocketAddr>,
    /// Length.
    pub len: u16,
    /// Bytes.
    pub bytes: [u8; REQ_MAX_LEN],
}

impl std::fmt::Debug for RxPkt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "RxPkt({} B at {})", self.len, self.rx_ts)
    }
}

impl RxPkt {
    /// A packet of at most `REQ_MAX_LEN` bytes (longer ones are not client requests).
    pub fn new(rx_ts: u64, data: &[u8]) -> Option<RxPkt> {
        if data.len() > REQ_MAX_LEN {
            return None;
        }
        let mut p = RxPkt {
            rx_ts,
            src: None,
            len: data.len() as u16,
            bytes: [0; REQ_MAX_LEN],
        };
        p.bytes[..data.len()].copy_from_slice(data);
        Some(p)
    }
}

/// What control takes in (07 §4.8, §6.8).
#[derive(Debug, Clone, Copy)]
pub enum CtrlIn {
    /// A voter's RepAck at `now`.
    Ack {
        /// Voter index.
        voter: usize,
        /// Contiguous frame_seq per substream.
        contiguous: [u64; 2],
        /// When it arrived.
        now: u64,
    },
    /// A voter's finalize vote for one height, unauthenticated: the in-process harnesses'
    /// path (SimBox, the threaded tests). A box on the network takes only [`CtrlIn::Final`].
    Vote {
        /// Voter index.
        voter: usize,
        /// Height.
        height: u64,
    },
    /// The finality listener's verdict (07 §6.8): Q valid finalize votes for a proposal whose
    /// last height is `height`, finalized in `view`.
    Final {
        /// The new final height.
        height: u64,
        /// The Simplex view that finalized it.
        view: u64,
    },
    /// A voter's `Diverge` (07 §7.4): REP_A_DIVERGE at that voter; control halts the book.
    Diverge {
        /// Voter index.
        voter: usize,
        /// Root index.
        index: u64,
    },
}

/// A NACK for a stream core (07 §4.10).
#[derive(Debug, Clone, Copy)]
pub struct NackReq {
    /// First frame_seq.
    pub from: u64,
    /// Last frame_seq.
    pub to: u64,
    /// When it arrived.
    pub now: u64,
    /// Who asked (for NackTooOld).
    pub src: Option<std::net::SocketAddr>,
}

/// A ring endpoint with an overflow queue: a push never fails and never drops; the overflow
/// (allocated only under back-pressure) drains first.
pub(crate) struct Outq<T> {
    p: Producer<T>,
    over: VecDeque<T>,
    /// Pushes that found the ring full (or an overflow already waiting): back-pressure.
    spilled: u64,
}

impl<T> Outq<T> {
    pub(crate) fn new(p: Producer<T>) -> Self {
        Outq {
            p,
            over: VecDeque::new(),
            spilled: 0,
        }
    }
    pub(crate) fn push(&mut self, v: T) {
        if !self.over.is_empty() {
            self.over.push_back(v);
            self.spilled += 1;
            return;
        }
        if let Err(v) = self.p.push(v) {
            self.over.push_back(v);
            self.spilled += 1;
        }
    }
    /// Back-pressure so far: pushes that waited in the overflow.
    pub(crate) fn spilled(&self) -> u64 {
        self.spilled
    }
    /// Push unless `cap` items already wait in the overflow (a bounded inbox); false: dropped.
    pub(crate) fn push_bounded(&mut self, v: T, cap: usize) -> bool {
        if self.over.len() >= cap {
            return false;
        }
        self.push(v);
        true
    }
    /// Move the overflow into the ring; true when nothing is left over.
    pub(crate) fn drain(&mut self) -> bool {
        while let Some(v) = self.over.pop_front() {
            if let Err(v) = self.p.push(v) {
                self.over.push_front(v);
                return false;
            }
        }
        true
    }
    fn room(&self) -> bool {
        self.over.is_empty() && self.p.free() >= LANE_MARGIN
    }
}

/// The session a client packet names (bytes 4..8, little-endian; missing-chapters §1).
pub fn session_of(pkt: &[u8]) -> Option<u32> {
    vyrn_wire::msg::PktKey::peek_session(pkt)
}

// ---------------------------------------------------------------------------------------------
// Lane

struct LanePorts {
    l: usize,
    r_pkt: Outq<PktEntry>,
    r_hash8: Outq<(u64, u64)>,
    r_hash32: Outq<(u8, u64, [u8; 32])>,
    fwd: Outq<Fwd>,
    tx: Outq<Held>,
    held: VecDeque<Held>,
}

impl LaneSink for LanePorts {
    fn record(&mut self, rec: &PacketRecord, enc: &[u8], _payload: &[u8]) {
        self.r_pkt.push(PktEntry::new(rec, enc));
    }
    fn hash(&mut self, lane: u8, first_lane_seq: u64, full: &[u8; 32]) {
        self.r_hash8.push((first_lane_seq, pkt_hash8(full)));
        self.r_hash32.push((lane, first_lane_seq, *full));
    }
    fn forward(&mut self, f: &Fwd) {
        self.fwd.push(*f);
    }
    fn respond(&mut self, r: &RespOut<'_>) {
        let h = Held {
            session: r.session,
            gate: r.gate,
            bytes: RespBytes::new(r.bytes),
        };
        match r.gate {
            Gate::LaneCut { .. } => self.held.push_back(h),
            Gate::Step { .. } => self.tx.push(h),
        }
    }
}

/// Lane `l` (07 §4.2 steps (1)–(2)): packets in, records and hashes out, ops to the BBO core,
/// events back; its answers leave once `LaneCut[l]` covers them (INV-REP-11).
struct LaneTile {
    lane: Lane,
    rx: Consumer<RxPkt>,
    events: Consumer<LaneEvent>,
    ports: LanePorts,
    words: Arc<Words>,
    out: Out,
    /// The packets this lane matched (07 §5.5 source 3), and its `SeqDataReq`s in and answers
    /// out (the control-port tile sends them).
    retain: crate::retain::PktRetain,
    asks: Consumer<crate::retain::SeqDataAsk>,
    answers: Producer<crate::retain::SeqDataAnswer>,
    retain_stats: Arc<RetainStats>,
}

/// `SeqDataReq`s a lane answers per poll at most (they are rare: a copy mismatch, a payload
/// the data tier lost).
const ASKS_PER_POLL: usize = 8;

/// Lane packet retention's counters, all lanes together (07 §5.5 source 3).
#[derive(Debug, Default)]
pub struct RetainStats {
    /// Packets kept (published every 1024 and at each answer).
    pub stored: AtomicU64,
    /// `SeqDataReq`s answered from retention.
    pub hits: AtomicU64,
    /// `SeqDataReq`s for a packet no longer (or never) held: no answer.
    pub misses: AtomicU64,
    /// Answers dropped at a full answer ring (the replica asks again).
    pub dropped: AtomicU64,
}

impl Task for LaneTile {
    fn name(&self) -> String {
        format!("lane{}", self.ports.l)
    }
    fn backpressure(&self) -> u64 {
        let p = &self.ports;
        p.r_pkt.spilled()
            + p.r_hash8.spilled()
            + p.r_hash32.spilled()
            + p.fwd.spilled()
            + p.tx.spilled()
    }
    fn poll(&mut self, now: u64) -> bool {
        let l = self.ports.l;
        let mut busy = false;
        let p = &mut self.ports;
        let drained =
            p.r_pkt.drain() & p.r_hash8.drain() & p.r_hash32.drain() & p.fwd.drain() & p.tx.drain();
        // Events in step order, up to step_done, each once its step is on both paths: a lane
        // applies a step's fills only after `released[A] ≥ need_A(s)` and `released[B] ≥
        // need_B(s)` (the fills' own gate, INV-REP-1). The lane's next PacketRecord names the
        // step in `fills_applied`, and its ack may leave on its own half alone (INV-REP-11):
        // applied earlier, a step one stream core never wrote (the box died with it behind) was
        // in the lane's state and in the resp_seq of every later answer, while the seal drops it
        // (07 §9.4) — the replay answered those later packets differently from the acks sent.
        // The shared words are read only when an event waits (an idle poll loads none).
        if self.events.peek().is_some() {
            let done = self.words.step_done.load().0;
            let released = [self.words.released[0].load(), self.words.released[1].load()];
            while let Some(ev) = self.events.peek() {
                if ev.step > done || released[0] < ev.need_a || released[1] < ev.need_b {
                    break;
                }
                let ev = *ev;
                self.events.pop();
                self.lane.on_event(&ev, &mut self.ports);
                busy = true;
            }
        }
        // INV-REP-11: a lane answer leaves once LaneCut covers its op.
        while let Some(h) = self.ports.held.front() {
            if !gate_open(&h.gate, &self.words) {
                break;
            }
            let Some(h) = self.ports.held.pop_front() else {
                break;
            };
            debug_assert!(
                gate_open(&h.gate, &self.words),
                "INV-REP-11: a lane answer leaves only once LaneCut covers its op (07 §4.2)"
            );
            self.out.resp(h.session, h.gate, h.bytes.as_slice());
            busy = true;
        }
        // Every queued packet (at most LANE_BATCH a poll), each while the output rings have
        // room: a burst is taken in one poll, and the first packet waits for no other.
        let mut took = 0;
        while took < LANE_BATCH {
            let p = &self.ports;
            let room = drained
                && p.r_pkt.room()
                && p.r_hash8.room()
                && p.r_hash32.room()
                && p.fwd.room()
                && p.tx.room();
            if !room {
                break;
            }
            let Some(pkt) = self.rx.pop() else {
                break;
            };
            took += 1;
            let bytes = &pkt.bytes[..pkt.len as usize];
            let v = self.lane.on_packet(now, pkt.rx_ts, bytes, &mut self.ports);
            // 07 §5.5 source 3: the bytes of every packet this lane logged, for a replica's
            // SeqDataReq (`docs/wire.md` "What the box logs"): a new or shed packet by its key,
            // a packet answered at packet level by its key and 8-byte hash (several can share
            // a key).
            let keep = match v {
                Ok(Verdict::New | Verdict::Shed) => Some(None),
                Ok(Verdict::Duplicate | Verdict::Gap) => {
                    let full = vyrn_wire::msg::client::full_hash(bytes).ok();
                    Some(full.map(|h| vyrn_wire::msg::client::pkt_hash_of(&h)))
                }
                Err(_) => None,
            };
            if let (Some(h), Some(session), Some(seq)) = (keep, session_of(bytes), bytes.get(8..12))
            {
                let seq = u32::from_le_bytes([seq[0], seq[1], seq[2], seq[3]]);
                self.retain.put(session, seq, bytes, h);
                if self.retain.stored % 1024 == 0 {
                    self.retain_stats.stored.fetch_add(1024, Ordering::Relaxed);
                }
            }
            // 07 §9.5: a session's address is learned only from a packet whose tag verified
            // and that is fresh — new, shed or ahead of sequence; never from a forged packet,
            // nor from a replayed copy of an old one (a duplicate).
            if let (Ok(v @ (Verdict::New | Verdict::Shed | Verdict::Gap)), Some(src)) = (v, pkt.src)
            {
                if let Some(session) = session_of(bytes) {
                    if v == Verdict::Gap {
                        self.out.wire.learn_first(session, src);
                    } else {
                        self.out.wire.learn(session, src);
                    }
                }
            }
            // (2) publish after the record is in R_pkt (07 §4.2), packet by packet: the cut
            // core may include this op while the lane parses the next.
            if self.ports.r_pkt.over.is_empty() {
                self.words.lane_counter[l].store(self.lane.published(), Ordering::Release);
            }
        }
        // 07 §5.5 source 3: a few SeqDataReqs, answered from retention into the answer ring;
        // none once the box is fenced (INV-REP-6, security review F8).
        for _ in 0..ASKS_PER_POLL {
            let Some(ask) = self.asks.pop() else {
                break;
            };
            busy = true;
            if self.words.fenced() {
                continue;
            }
            let st = &self.retain_stats;
            match self.retain.get(ask.session, ask.pkt_seq, ask.pkt_hash) {
                Some(pkt) => {
                    st.hits.fetch_add(1, Ordering::Relaxed);
                    if let Some(a) = crate::retain::SeqDataAnswer::new(&ask, pkt) {
                        if self.answers.push(a).is_err() {
                            st.dropped.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
                None => {
                    st.misses.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
        if took > 0 {
            self.out.flush();
            return true;
        }
        if drained {
            self.words.lane_counter[l].store(self.lane.published(), Ordering::Release);
        }
        self.lane.flush_hashes(&mut self.ports);
        self.out.flush();
        busy
    }
}

// ---------------------------------------------------------------------------------------------
// Cut

/// The cut core (07 §4.1): reads the lane counters, publishes the cut.
struct CutTile {
    cut: CutCore,
    words: Arc<Words>,
    /// Stores of the published cut so far (the seqlock's version; the writer counts them).
    version: u64,
}

impl Task for CutTile {
    fn name(&self) -> String {
        "cut".into()
    }
    fn poll(&mut self, now: u64) -> bool {
        let w = &self.words;
        let moved = self
            .cut
            .refresh(now, |l| w.lane_counter[l].load(Ordering::Acquire));
        if moved {
            self.version += 1;
            w.cut.store(self.version, self.cut.cut());
        }
        moved
    }
}

// ---------------------------------------------------------------------------------------------
// BBO

struct BboPorts {
    r_step: multi::Writer<StepMsg, 3>,
    step_over: VecDeque<StepMsg>,
    /// Steps that found `R_step` full: back-pressure.
    step_spilled: u64,
    events: Vec<Outq<LaneEvent>>,
    fill_lanes: u64,
}

impl BboPorts {
    fn new(r_step: multi::Writer<StepMsg, 3>, events: Vec<Outq<LaneEvent>>) -> Self {
        BboPorts {
            r_step,
            step_over: VecDeque::new(),
            step_spilled: 0,
            events,
            fill_lanes: 0,
        }
    }
    fn push_step(&mut self, m: StepMsg) {
        if !self.step_over.is_empty() {
            self.step_over.push_back(m);
            self.step_spilled += 1;
        } else if let Err(m) = self.r_step.push(m) {
            self.step_over.push_back(m);
            self.step_spilled += 1;
        }
    }
    fn drain(&mut self) -> bool {
        while let Some(m) = self.step_over.pop_front() {
            if let Err(m) = self.r_step.push(m) {
                self.step_over.push_front(m);
                return false;
            }
        }
        let mut all = true;
        for e in &mut self.events {
            all &= e.drain();
        }
        all
    }
}

impl BboSink for BboPorts {
    fn step(&mut self, s: &StepOut<'_>) {
        self.push_step(StepMsg::Step(StepEntry::from_out(s)));
    }
    fn event(&mut self, lane: u8, ev: &LaneEvent) {
        self.fill_lanes |= 1 << (lane as u64 % 64);
        self.events[lane as usize].push(*ev);
    }
}

struct RingQueues<'a>(&'a mut [Consumer<Fwd>]);

impl OpQueues for RingQueues<'_> {
    fn head(&self, lane: usize) -> Option<&Fwd> {
        self.0[lane].peek()
    }
    fn pop(&mut self, lane: usize) -> Option<Fwd> {
        self.0[lane].pop()
    }
}

/// The BBO core (07 §4.1): one step per op in lowest-head-`rx_ts` order under the published cut;
/// the StepRecord into `R_step` before the step's events; `step_done` once both are in the
/// rings; block marks on `close_req`.
struct BboTile {
    bbo: Bbo,
    fwd: Vec<Consumer<Fwd>>,
    ports: BboPorts,
    ctl: Consumer<ControlReq>,
    cut: Vec<u64>,
    words: Arc<Words>,
    published: u64,
}

impl Task for BboTile {
    fn name(&self) -> String {
        "bbo".into()
    }
    fn backpressure(&self) -> u64 {
        self.ports.step_spilled + self.ports.events.iter().map(Outq::spilled).sum::<u64>()
    }
    fn poll(&mut self, now: u64) -> bool {
        if !self.ports.drain() {
            return true;
        }
        if self.bbo.done() > self.published {
            // step_done only once every output of the steps is in its ring.
            self.published = self.bbo.done();
            self.words
                .step_done
                .store(self.published, std::mem::take(&mut self.ports.fill_lanes));
        }
        // One control request per step: a second queued behind the first waits for it to run
        // (a Resume then a Halt taken together must not collapse into the Halt alone).
        if !self.bbo.control_pending() {
            if let Some(r) = self.ctl.pop() {
                self.bbo.request(r);
            }
        }
        self.words.cut.load(&mut self.cut);
        // Every ready step under this cut, at most BBO_STEPS_PER_POLL.
        let mut stepped = false;
        for _ in 0..BBO_STEPS_PER_POLL {
            let r = self.bbo.poll(
                now,
                &self.cut,
                &mut RingQueues(&mut self.fwd),
                &mut self.ports,
            );
            if !matches!(r, Ok(Some(_))) {
                break;
            }
            stepped = true;
            if !self.bbo.control_pending() {
                if let Some(r) = self.ctl.pop() {
                    self.bbo.request(r);
                }
            }
        }
        // Block close (07 §3.9): stream-A's close_req, after the current step.
        let mut closed = false;
        if let Some(height) = self.words.close_req.take() {
            self.ports.push_step(StepMsg::Mark {
                height,
                last_step: self.bbo.done(),
            });
            closed = true;
        }
        if self.ports.drain() && self.bbo.done() > self.published {
            self.published = self.bbo.done();
            self.words
                .step_done
                .store(self.published, std::mem::take(&mut self.ports.fill_lanes));
        }
        stepped || closed
    }
}

// ---------------------------------------------------------------------------------------------
// Stream cores

struct StreamPorts {
    h: u8,
    r_pkt: Vec<Option<Consumer<PktEntry>>>,
    r_hash8: Vec<Option<Consumer<(u64, u64)>>>,
    step: multi::Cursor<StepMsg, 3>,
    frame_steps: Outq<(u64, u64)>,
    closed: Outq<ClosedHalf>,
    headers: Option<Consumer<BlockHeader>>,
    words: Arc<Words>,
    out: Box<dyn Wire>,
}

impl StreamMem for StreamPorts {
    fn fenced(&self) -> bool {
        self.words.fenced.is_set()
    }
    fn pkt_pop(&mut self, l: usize) -> Option<PktEntry> {
        self.r_pkt[l].as_mut()?.pop()
    }
    fn hash8_pop(&mut self, l: usize) -> Option<(u64, u64)> {
        self.r_hash8[l].as_mut()?.pop()
    }
    fn step_peek(&mut self, _h: u8) -> Option<StepMsg> {
        self.step.peek()
    }
    fn step_pop(&mut self, _h: u8) {
        self.step.advance();
    }
    fn frame_step(&mut self, _h: u8, frame_seq: u64, step: u64) {
        self.frame_steps.push((frame_seq, step));
    }
    fn write_path(&mut self, path: u8, info: &FrameInfo, bytes: &[u8]) -> PathWrite {
        // For control's check of RepAck `contiguous` against frames actually sent: stored before
        // the write, so a voter's ack can never overtake it.
        self.words.sent[self.h as usize].fetch_max(info.frame_seq, Ordering::Release);
        self.out.frame_on(self.h, path, info, bytes)
    }
    fn fence_paths(&mut self) -> bool {
        self.out.fence()
    }
    fn path_alarm(&mut self, path: u8, down: bool) {
        self.words.gate[self.h as usize].alarm[path as usize].store(down, Ordering::Relaxed);
        self.out.path_alarm(self.h, path, down);
    }
    fn fence(&mut self) {
        self.words.fenced.set();
    }
    fn release(&mut self, h: u8, step: u64) {
        self.words.released[h as usize].store(step);
    }
    fn released(&self, h: u8) -> u64 {
        self.words.released[h as usize].load()
    }
    fn lane_cut(&mut self, l: usize, step: u64, cut: u64) {
        self.words.lane_cut[l].store(step, cut);
    }
    fn closed(&mut self, _h: u8, c: ClosedHalf) {
        self.closed.push(c);
    }
    fn header_pop(&mut self) -> Option<BlockHeader> {
        self.headers.as_mut()?.pop()
    }
    fn error(&mut self) {
        self.words.errors.fetch_add(1, Ordering::Relaxed);
    }
    fn post_close(&mut self, height: u64) -> bool {
        self.words.close_req.post(height).is_ok()
    }
}

/// Settings of the stream cores that a box's owner changes after the tiles are built and
/// running: the heartbeat period (the home file's budget override of REP_HB_US), whether each
/// frame keeps a `FrameInfo` for the tests' invariant checks, and — tests only — a broken gate
/// (T-REP-1 shows the checks catch it). Each stream core picks a change up at its next poll
/// (one relaxed load of `version` per poll), so the tile runtime's `Task` carries no hooks.
#[derive(Debug, Default)]
pub struct StreamKnobs {
    version: AtomicU64,
    /// `GateMode` as 0 (`Correct`) or 1 (`ReleaseOnAppend`).
    gate_mode: std::sync::atomic::AtomicU8,
    /// 0: leave as built (tracking on); 1: on; 2: off.
    track: std::sync::atomic::AtomicU8,
    /// 0: leave as built.
    heartbeat_ns: AtomicU64,
}

impl StreamKnobs {
    /// Break (or mend) every stream core's gate.
    pub fn set_gate_mode(&self, m: crate::stream::GateMode) {
        let v = u8::from(m == crate::stream::GateMode::ReleaseOnAppend);
        self.gate_mode.store(v, Ordering::Relaxed);
        self.version.fetch_add(1, Ordering::Release);
    }
    /// Keep (or drop) a `FrameInfo` per frame in every stream core.
    pub fn set_track(&self, on: bool) {
        self.track.store(if on { 1 } else { 2 }, Ordering::Relaxed);
        self.version.fetch_add(1, Ordering::Release);
    }
    /// Every stream core's heartbeat period.
    pub fn set_heartbeat_ns(&self, ns: u64) {
        self.heartbeat_ns.store(ns, Ordering::Relaxed);
        self.version.fetch_add(1, Ordering::Release);
    }
    fn apply(&self, seen: &mut u64, core: &mut StreamCore) {
        let v = self.version.load(Ordering::Acquire);
        if v == *seen {
            return;
        }
        *seen = v;
        core.set_gate_mode(if self.gate_mode.load(Ordering::Relaxed) == 1 {
            crate::stream::GateMode::ReleaseOnAppend
        } else {
            crate::stream::GateMode::Correct
        });
        match self.track.load(Ordering::Relaxed) {
            1 => core.set_track(true),
            2 => core.set_track(false),
            _ => {}
        }
        let hb = self.heartbeat_ns.load(Ordering::Relaxed);
        if hb > 0 {
            core.set_heartbeat_ns(hb);
        }
    }
}

/// Stream core H (07 §4.2, §4.5), with its NACK service (§4.10).
struct StreamTile {
    core: StreamCore,
    ports: StreamPorts,
    nacks: Consumer<NackReq>,
    nack_reply: Option<NackReply>,
    /// A one-substream box: stream-A also moves the unused `R_step` cursor.
    spare: Option<multi::Cursor<StepMsg, 3>>,
    /// The gate counters as last published to [`Words::gate`].
    published: crate::stream::GateCounters,
    knobs: Arc<StreamKnobs>,
    knobs_seen: u64,
}

impl Task for StreamTile {
    fn name(&self) -> String {
        format!("stream{}", (b'A' + self.ports.h) as char)
    }
    fn backpressure(&self) -> u64 {
        self.ports.frame_steps.spilled() + self.ports.closed.spilled()
    }
    fn poll(&mut self, now: u64) -> bool {
        self.knobs.apply(&mut self.knobs_seen, &mut self.core);
        self.ports.frame_steps.drain();
        self.ports.closed.drain();
        let mut busy = self.core.poll(now, &mut self.ports);
        if let Some(c) = self.spare.as_mut() {
            while c.advance() {}
        }
        if let Some(n) = self.nacks.pop() {
            let out = match (
                self.nack_reply.as_mut().and_then(|r| r.resend.as_mut()),
                n.src,
            ) {
                (Some(resend), Some(to)) => {
                    let mut send = |b: &[u8]| resend(to, b);
                    self.core
                        .on_nack(n.from, n.to, now, &mut self.ports, Some(&mut send))
                }
                _ => self.core.on_nack(n.from, n.to, now, &mut self.ports, None),
            };
            if let Some(r) = self.nack_reply.as_mut() {
                (r.answer)(n, out);
            }
            busy = true;
        }
        let g = self.core.gate_counters();
        if g != self.published {
            self.published = g;
            self.ports.words.gate[self.ports.h as usize].publish(&g, self.core.paths_down());
        }
        busy
    }
}

// ---------------------------------------------------------------------------------------------
// TX

/// The TX tile (07 §4.1): each lane's step-gated responses leave once `released[A] ≥ need_A`
/// and `released[B] ≥ need_B` (INV-REP-1).
struct TxTile {
    tx: Vec<Consumer<Held>>,
    words: Arc<Words>,
    out: Out,
}

impl Task for TxTile {
    fn name(&self) -> String {
        "tx".into()
    }
    fn poll(&mut self, _now: u64) -> bool {
        let mut busy = false;
        for q in &mut self.tx {
            // Every response here checks its own gate (INV-REP-1; a lane answer that ever came
            // this way would wait for its LaneCut, INV-REP-11).
            while let Some(h) = q.peek() {
                if !gate_open(&h.gate, &self.words) {
                    break;
                }
                let Some(h) = q.pop() else {
                    break;
                };
                debug_assert!(
                    gate_open(&h.gate, &self.words),
                    "INV-REP-1 (INV-FRAME-FIRST): a response leaves only once released[A] and \
                     released[B] cover its step's frames (07 §4.2)"
                );
                self.out.resp(h.session, h.gate, h.bytes.as_slice());
                busy = true;
            }
        }
        if busy {
            self.out.flush();
        }
        busy
    }
}

// ---------------------------------------------------------------------------------------------
// Order hasher

struct HasherPorts {
    hash32: Vec<Consumer<(u8, u64, [u8; 32])>>,
    next: usize,
    closed: Vec<Consumer<ClosedHalf>>,
    headers: Outq<BlockHeader>,
}

impl HasherMem for HasherPorts {
    fn hash32_pop(&mut self) -> Option<(u8, u64, [u8; 32])> {
        let n = self.hash32.len();
        for _ in 0..n {
            let i = self.next;
            if let Some(v) = self.hash32[i].pop() {
                return Some(v);
            }
            self.next = (i + 1) % n;
        }
        None
    }
    fn closed_peek(&mut self, h: usize) -> Option<&ClosedHalf> {
        self.closed[h].peek()
    }
    fn closed_pop(&mut self, h: usize) -> Option<ClosedHalf> {
        self.closed[h].pop()
    }
    fn header_push(&mut self, hdr: BlockHeader) {
        self.headers.push(hdr);
    }
}

/// A HashListReq for the order hasher: the height and who asked.
#[derive(Debug, Clone, Copy)]
pub struct HashReq {
    /// Height.
    pub height: u64,
    /// Who asked.
    pub src: std::net::SocketAddr,
}

/// How the order hasher answers a HashListReq: each `HashList` part's bytes to the asker.
pub type HashReply = Box<dyn FnMut(std::net::SocketAddr, &[u8]) + Send>;

/// The order hasher (07 §4.6): data roots, the header chain, `seq_sig` in slices; the
/// full-hash lists kept REP_SEQ_HASHLIST_MS and served to HashListReq.
struct HasherTile {
    hasher: OrderHasher,
    ports: HasherPorts,
    reqs: Consumer<HashReq>,
    reply: Option<HashReply>,
    /// INV-REP-6: a fenced box answers no HashListReq (security review F8).
    words: Arc<Words>,
}

impl Task for HasherTile {
    fn name(&self) -> String {
        "hasher".into()
    }
    fn backpressure(&self) -> u64 {
        self.ports.headers.spilled()
    }
    fn class(&self) -> crate::runner::TileClass {
        crate::runner::TileClass::Cold
    }
    fn poll(&mut self, now: u64) -> bool {
        self.ports.headers.drain();
        let mut busy = self.hasher.poll(now, &mut self.ports);
        if let Some(r) = self.reqs.pop() {
            busy = true;
            if self.words.fenced() {
                return busy;
            }
            if let (Some(lists), Some(reply)) =
                (self.hasher.hash_list(r.height), self.reply.as_mut())
            {
                crate::shm::hash_list_parts(r.height, lists, |b| reply(r.src, b));
            }
        }
        busy
    }
}

// ---------------------------------------------------------------------------------------------
// Control

struct ControlPorts {
    step: multi::Cursor<StepMsg, 3>,
    frame_steps: [Consumer<(u64, u64)>; 2],
    words: Arc<Words>,
    out: Out,
}

impl ControlMem for ControlPorts {
    fn step_pop(&mut self) -> Option<StepMsg> {
        self.step.pop()
    }
    fn frame_step_pop(&mut self, h: usize) -> Option<(u64, u64)> {
        self.frame_steps[h].pop()
    }
    fn notice(&mut self, session: u32, bytes: &[u8]) {
        self.out.notice(session, bytes);
    }
    fn fence(&mut self) {
        self.words.fenced.set();
    }
    fn durable_mark(&mut self, step: u64, height: u64) {
        self.out.durable(step, height);
    }
    fn session_step(&self, session: u32) -> u64 {
        self.out.session_step(session)
    }
}

/// Control (07 §4.8, §6.8, §6.9): acks and votes in; watermarks, the finality gate and the
/// self-fence out.
struct ControlTile {
    control: Control,
    ports: ControlPorts,
    inbox: Consumer<CtrlIn>,
    /// Finalize votes from the certificate tile (checked off the gate path).
    votes: Consumer<CtrlIn>,
    req: Outq<ControlReq>,
    stats: Arc<ControlStats>,
}

/// Control's state as other threads read it.
#[derive(Debug, Default)]
pub struct ControlStats {
    /// DUR_QUORUM step.
    pub durable: AtomicU64,
    /// Final height.
    pub final_height: AtomicU64,
    /// Closed height.
    pub closed_height: AtomicU64,
    /// Finality-gate halts.
    pub gate_halts: AtomicU64,
    /// Durable notices sent.
    pub durable_notices: AtomicU64,
    /// Final notices sent.
    pub final_notices: AtomicU64,
    /// Finality-gate resumes.
    pub gate_resumes: AtomicU64,
    /// `Diverge` messages from voters (07 §7.4).
    pub diverge_msgs: AtomicU64,
    /// Halts for divergence (0 or 1: the book stays halted).
    pub diverge_halts: AtomicU64,
    /// RepAcks refused: `contiguous` beyond the frames the box wrote.
    pub acks_refused: AtomicU64,
    /// Notice packets sent (Durable and Final share one when both are due).
    pub notice_packets: AtomicU64,
    /// Close → final latency per height, ns: p50, p99, max, count (07 §6.6).
    pub close_to_final: [AtomicU64; 4],
}

/// Messages control takes from each inbox per poll at most.
const CTRL_PER_POLL: usize = 256;

impl Task for ControlTile {
    fn name(&self) -> String {
        "control".into()
    }
    fn backpressure(&self) -> u64 {
        self.req.spilled()
    }
    fn class(&self) -> crate::runner::TileClass {
        crate::runner::TileClass::Cold
    }
    fn poll(&mut self, now: u64) -> bool {
        self.req.drain();
        let mut busy = false;
        // Bounded work per poll: the inboxes are bounded rings, and a poll takes at most
        // CTRL_PER_POLL of each.
        let (mut acks, mut votes) = (0, 0);
        loop {
            let m = match (acks < CTRL_PER_POLL, votes < CTRL_PER_POLL) {
                (true, _) if !self.inbox.is_empty() => {
                    acks += 1;
                    self.inbox.pop()
                }
                (_, true) if !self.votes.is_empty() => {
                    votes += 1;
                    self.votes.pop()
                }
                _ => None,
            };
            let Some(m) = m else {
                break;
            };
            match m {
                CtrlIn::Ack {
                    voter,
                    contiguous,
                    now,
                } => {
                    // A RepAck cannot hold frames the box never wrote (a bogus or Byzantine
                    // ack would otherwise keep the box unfenced, INV-REP-6).
                    let w = &self.ports.words;
                    if contiguous[0] > w.sent(0) || contiguous[1] > w.sent(1) {
                        self.stats.acks_refused.fetch_add(1, Ordering::Relaxed);
                    } else {
                        self.control.on_ack(voter, contiguous, now);
                    }
                }
                CtrlIn::Vote { voter, height } => self.control.on_vote(voter, height),
                CtrlIn::Final { height, view } => self.control.on_final(height, view),
                CtrlIn::Diverge { voter, index } => {
                    if self.control.diverged().is_none() {
                        // The alarm as a structured log line (docs/sre.md).
                        eprintln!(
                            "alarm=REP_A_DIVERGE state=raised voter={voter} root_index={index} action=book-halted"
                        );
                    }
                    self.control.on_diverge(voter, index);
                }
            }
            busy = true;
        }
        if let Some(r) = self.control.poll(now, &mut self.ports) {
            self.req.push(r);
            busy = true;
        }
        let c: ControlCounters = self.control.counters();
        let s = &self.stats;
        s.durable
            .store(self.control.durable_step(), Ordering::Relaxed);
        s.final_height
            .store(self.control.final_height(), Ordering::Relaxed);
        s.closed_height
            .store(self.control.closed_height(), Ordering::Relaxed);
        s.gate_halts.store(c.gate_halts, Ordering::Relaxed);
        let fl = self.control.final_latency();
        if fl.count() != s.close_to_final[3].load(Ordering::Relaxed) {
            s.close_to_final[0].store(fl.quantile(0.5), Ordering::Relaxed);
            s.close_to_final[1].store(fl.quantile(0.99), Ordering::Relaxed);
            s.close_to_final[2].store(fl.max(), Ordering::Relaxed);
            s.close_to_final[3].store(fl.count(), Ordering::Relaxed);
        }
        s.durable_notices
            .store(c.durable_notices, Ordering::Relaxed);
        s.final_notices.store(c.final_notices, Ordering::Relaxed);
        s.gate_resumes.store(c.gate_resumes, Ordering::Relaxed);
        s.diverge_msgs.store(c.diverge_msgs, Ordering::Relaxed);
        s.diverge_halts.store(c.diverge_halts, Ordering::Relaxed);
        s.notice_packets.store(c.notice_packets, Ordering::Relaxed);
        // The poll's notices and REP_DurableMarks leave together (sendmmsg).
        self.ports.out.flush();
        busy
    }
}

// ---------------------------------------------------------------------------------------------
// Building the box

/// What the outside world holds of a threaded box: the lanes' receive rings, control's inbox,
/// the stream cores' NACK rings, and the shared words and control state to watch.
pub struct BoxHandles {
    /// Per lane: its receive ring (the RX side pushes client packets here).
    pub rx: Vec<Producer<RxPkt>>,
    /// Control's inbox for RepAcks (from the control-port tile).
    pub ctrl: Producer<CtrlIn>,
    /// Control's inbox for finalize votes (from the certificate tile).
    pub votes: Producer<CtrlIn>,
    /// Per substream: its stream core's NACK ring.
    pub nacks: Vec<Producer<NackReq>>,
    /// The order hasher's HashListReq ring.
    pub hash_reqs: Producer<HashReq>,
    /// The gate words.
    pub words: Arc<Words>,
    /// Control's watermarks.
    pub control: Arc<ControlStats>,
    /// The sequencer's verifying key.
    pub seq_public: ed25519_dalek::VerifyingKey,
    /// Per lane: its ring of `SeqDataReq`s (07 §5.5 source 3).
    pub seq_data_asks: Vec<Producer<crate::retain::SeqDataAsk>>,
    /// Per lane: its encoded `SeqData` answers, for the control-port tile to send.
    pub seq_data_answers: Vec<Consumer<crate::retain::SeqDataAnswer>>,
    /// Lane packet retention's counters.
    pub retain: Arc<RetainStats>,
}

impl std::fmt::Debug for BoxHandles {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BoxHandles")
            .field("lanes", &self.rx.len())
            .field("words", &self.words)
            .finish()
    }
}

/// Which tile a [`Wire`] is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WireFor {
    /// Lane l.
    Lane(u8),
    /// Stream core H.
    Stream(u8),
    /// The TX tile.
    Tx,
    /// Control.
    Control,
}

/// The tiles of one box, in the order a runner lists them: lanes, cut, BBO, stream cores, TX,
/// hasher, control.
pub struct BoxTiles {
    /// The tiles.
    pub tiles: Vec<Box<dyn Task>>,
    /// The stream cores' settings, changed while they run ([`StreamKnobs`]).
    pub knobs: Arc<StreamKnobs>,
}

impl std::fmt::Debug for BoxTiles {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<String> = self.tiles.iter().map(|t| t.name()).collect();
        write!(f, "BoxTiles{names:?}")
    }
}

/// Unicast one retransmitted frame to an address; false: it did not go.
pub type RtxSend = Box<dyn FnMut(std::net::SocketAddr, &[u8]) -> bool + Send>;

/// A stream core's NACK service hooks (07 §4.10).
pub struct NackReply {
    /// Unicast one retransmitted frame to the NACK's sender; false: it did not go. `None`:
    /// retransmissions go out on the live paths (a box without a control socket).
    pub resend: Option<RtxSend>,
    /// What each NACK got (NackTooOld back to the sender).
    pub answer: Box<dyn FnMut(NackReq, NackOutcome) + Send>,
}

impl std::fmt::Debug for NackReply {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NackReply")
            .field("unicast", &self.resend.is_some())
            .finish()
    }
}
