//! Control (07 §4.8, §6.8, §6.9): RepAcks and finalize votes in; `REP_DurableMark` /
//! `Durable{step, height}` and `Final{height, view}` watermarks out to every session (as
//! notices, `NOTICE_RESP_SEQ`); the finality gate (INV-REP-10: Halt past `FIN_GATE_BLOCKS`
//! closed-but-not-final blocks, Resume at `REP_GATE_RESUME_BLOCKS`, both as logged Control
//! steps); and the self-fence (INV-REP-6: fewer than `REP_FENCE_ACKS` fresh voters → `seq_fenced`,
//! never cleared in the tenure).

use crate::shm::StepMsg;

/// How far past the newest closed height a finalize vote may reach and still be kept (votes
/// can overtake control's view of a close by a few blocks, never by this many).
pub const VOTE_AHEAD_MAX: u64 = 64;
/// Closed-not-final blocks control keeps the last step of (for the sessions' Final notices).
const MARKS_MAX: usize = 4096;
use crate::mem::ControlMem;
use std::collections::{BTreeMap, VecDeque};
use vyrn_engine::bbo::{control, ControlReq};
use vyrn_engine::resp::RespBuilder;
use vyrn_wire::consts::{
    FIN_GATE_BLOCKS, REP_FENCE_ACKS, REP_GATE_RESUME_BLOCKS, REP_SELF_FENCE_US,
};
use vyrn_wire::msg::client::{Record, SipKey, NOTICE_RESP_SEQ};

/// Counters of control.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct ControlCounters {
    /// Durable watermarks sent (per session).
    pub durable_notices: u64,
    /// Final watermarks sent (per session).
    pub final_notices: u64,
    /// Halts requested by the finality gate.
    pub gate_halts: u64,
    /// Resumes requested by the finality gate.
    pub gate_resumes: u64,
    /// Notice packets sent (one per session per watermark time; Durable and Final share one
    /// when both are due).
    pub notice_packets: u64,
    /// `Diverge` messages taken from voters (07 §7.4).
    pub diverge_msgs: u64,
    /// Halts requested for divergence (at most one: the book never resumes by itself).
    pub diverge_halts: u64,
}

/// What one session was last told (watermarks only to sessions they attest).
#[derive(Debug, Default, Clone, Copy)]
struct Notified {
    /// The step and height of the last Durable record it got.
    durable_step: u64,
    durable_height: u64,
    /// The last step and the height of the last Final record it got.
    final_step: u64,
    final_height: u64,
}

/// Close → final latency per height as control sees it (07 §6.6, B-REP-1 on a running box):
/// a log-linear histogram (four sub-buckets per power of two, ≤ 19% wide), fixed size, no
/// allocation per record.
#[derive(Debug, Clone)]
pub struct FinalLatency {
    buckets: [u64; 256],
    n: u64,
    max: u64,
}

impl Default for FinalLatency {
    fn default() -> Self {
        FinalLatency {
            buckets: [0; 256],
            n: 0,
            max: 0,
        }
    }
}

impl FinalLatency {
    fn index(ns: u64) -> usize {
        let v = ns.max(1);
        let lg = 63 - v.leading_zeros() as usize;
        let sub = if lg >= 2 {
            ((v >> (lg - 2)) & 3) as usize
        } else {
            0
        };
        (lg * 4 + sub).min(255)
    }

    fn upper(i: usize) -> u64 {
        let (lg, sub) = (i / 4, (i % 4) as u64);
        if lg < 2 {
            return 1u64 << (lg + 1);
        }
        ((4 + sub + 1) << (lg - 2)).saturating_sub(1)
    }

    /// One height's latency.
    pub fn record(&mut self, ns: u64) {
        self.buckets[Self::index(ns)] += 1;
        self.n += 1;
        self.max = self.max.max(ns);
    }

    /// Heights recorded.
    pub fn count(&self) -> u64 {
        self.n
    }

    /// The largest latency recorded.
    pub fn max(&self) -> u64 {
        self.max
    }

    /// The `q` quantile (0..=1), as its bucket's upper bound (capped at the max).
    pub fn quantile(&self, q: f64) -> u64 {
        if self.n == 0 {
            return 0;
        }
        let want = ((self.n as f64) * q).ceil().max(1.0) as u64;
        let mut seen = 0;
        for (i, &c) in self.buckets.iter().enumerate() {
            seen += c;
            if seen >= want {
                return Self::upper(i).min(self.max);
            }
        }
        self.max
    }
}

/// The control tile.
#[derive(Debug)]
pub struct Control {
    n_voters: usize,
    q: usize,
    /// Per voter: contiguous frame_seq per substream, and when it last acked.
    acks: Vec<([u64; 2], Option<u64>)>,
    votes: BTreeMap<u64, u64>,
    /// Steps with their need values, from the third `R_step` cursor.
    steps: VecDeque<(u64, u64, u64)>,
    /// Per substream: (frame_seq, highest step whose record is in frames ≤ it).
    frame_steps: [VecDeque<(u64, u64)>; 2],
    covered: [u64; 2],
    durable: u64,
    durable_sent: u64,
    last_durable_ns: u64,
    final_height: u64,
    view: u64,
    /// The finality listener's newest verdict (height, view), applied once control has seen
    /// that height close.
    certified: (u64, u64),
    halted_by_gate: bool,
    /// REP_A_DIVERGE reported (07 §7.4): the first voter and root index; the book halts and
    /// stays halted (§11: an operator's procedure, not a timer, ends it).
    diverged: Option<(usize, u64)>,
    /// The divergence halt has been requested.
    diverge_halt_sent: bool,
    armed: bool,
    fence_ns: u64,
    sessions: Vec<(u32, SipKey)>,
    rb: RespBuilder,
    counters: ControlCounters,
    /// When control saw each closed, not yet final height close: (height, ns).
    close_at: VecDeque<(u64, u64)>,
    /// Close → final latency per height.
    final_latency: FinalLatency,
    /// Closed blocks not yet durable: (height, last_step), from the mark entries.
    blocks: VecDeque<(u64, u64)>,
    /// Closed blocks not yet final: (height, last_step).
    marks: VecDeque<(u64, u64)>,
    /// The last step the final height covers.
    final_step: u64,
    /// Per session (as `sessions`): the watermarks it was last told.
    notified: Vec<Notified>,
    /// The newest Durable watermark: (step, height).
    durable_rec: Option<(u64, u64)>,
    /// When the sessions were last swept for watermarks they lack.
    last_sweep_ns: u64,
    closed_height: u64,
}

impl Control {
    /// Control for `n_voters` voters (quorum `q`), sending watermarks to `sessions`.
    pub fn new(n_voters: usize, q: usize, sessions: Vec<(u32, SipKey)>) -> Self {
        let n_sessions = sessions.len();
        Control {
            n_voters,
            q,
            acks: vec![([0; 2], None); n_voters],
            votes: BTreeMap::new(),
            steps: VecDeque::new(),
            frame_steps: Default::default(),
            covered: [0; 2],
            durable: 0,
            durable_sent: 0,
            last_durable_ns: 0,
            final_height: 0,
            view: 0,
            certified: (0, 0),
            close_at: VecDeque::new(),
            final_latency: FinalLatency::default(),
            halted_by_gate: false,
            diverged: None,
            diverge_halt_sent: false,
            armed: false,
            fence_ns: REP_SELF_FENCE_US * 1000,
            sessions,
            rb: RespBuilder::default(),
            counters: ControlCounters::default(),
            blocks: VecDeque::new(),
            marks: VecDeque::new(),
            final_step: 0,
            notified: vec![Notified::default(); n_sessions],
            durable_rec: None,
            last_sweep_ns: 0,
            closed_height: 0,
        }
    }

    /// Start after `prev_step` and `prev_height` (a later tenure, 07 §9.5): everything up to
    /// them is final (the seal), so durable, covered, closed and final all stand there.
    pub fn start_at(&mut self, prev_step: u64, prev_height: u64) {
        self.durable = prev_step;
        self.durable_sent = prev_step;
        self.covered = [prev_step; 2];
        self.final_step = prev_step;
        self.final_height = prev_height;
        self.closed_height = prev_height;
        self.certified = (prev_height, 0);
    }

    /// Override the self-fence window (REP_SELF_FENCE_US is a budget, 07 §4.8): for boxes
    /// whose voters do not run on dedicated cores, e.g. a dev home sharing two cores.
    pub fn set_self_fence_us(&mut self, us: u64) {
        self.fence_ns = us.saturating_mul(1000);
    }

    /// The newest final height.
    pub fn final_height(&self) -> u64 {
        self.final_height
    }

    /// The newest durable step (DUR_QUORUM).
    pub fn durable_step(&self) -> u64 {
        self.durable
    }

    /// Counters.
    pub fn counters(&self) -> ControlCounters {
        self.counters
    }

    /// A voter's RepAck: contiguous frame_seq per substream, at `now`.
    pub fn on_ack(&mut self, voter: usize, contiguous: [u64; 2], now: u64) {
        if let Some(a) = self.acks.get_mut(voter) {
            a.0 = [a.0[0].max(contiguous[0]), a.0[1].max(contiguous[1])];
            a.1 = Some(now);
        }
    }

    /// A voter's finalize vote for `height`.
    pub fn on_vote(&mut self, voter: usize, height: u64) {
        // A vote for a height far past the newest close names no block the box has cut: it
        // is not kept (the vote table stays bounded).
        if voter < self.n_voters
            && height > self.final_height
            && height <= self.closed_height + VOTE_AHEAD_MAX
        {
            *self.votes.entry(height).or_default() |= 1 << voter;
        }
    }

    /// The finality listener's verdict (07 §6.8): Q valid finalize votes make `height` final,
    /// in Simplex view `view`. Applied at the next poll once `height` has closed here (a
    /// certificate can overtake the close on its way in).
    pub fn on_final(&mut self, height: u64, view: u64) {
        if height > self.certified.0 {
            self.certified = (height, view);
        }
    }

    /// A voter's `Diverge` (07 §7.4, INV-REP-9): the next poll halts the book with
    /// `Control(Halt)` for [`control::REASON_DIVERGE`], and no finality-gate resume lifts it.
    pub fn on_diverge(&mut self, voter: usize, index: u64) {
        self.counters.diverge_msgs += 1;
        if self.diverged.is_none() {
            self.diverged = Some((voter, index));
        }
    }

    /// The first divergence reported: (voter, root index).
    pub fn diverged(&self) -> Option<(usize, u64)> {
        self.diverged
    }

    /// Close → final latency per height so far.
    pub fn final_latency(&self) -> &FinalLatency {
        &self.final_latency
    }

    /// The newest closed height control has seen.
    pub fn closed_height(&self) -> u64 {
        self.closed_height
    }

    /// The block holding `step` (the open one if no closed block does).
    fn height_of(&self, step: u64) -> u64 {
        self.blocks
            .iter()
            .find(|&&(_, last)| last >= step)
            .map_or(self.closed_height + 1, |b| b.0)
    }

    /// The watermarks to the sessions that have something for them to attest: a
    /// session gets `durable` while the Durable watermark it last got is below the newest
    /// step-gated response it was sent, and `fin` while the steps the Final it last got covers
    /// are below it — one packet per session, the two as separate records (07 §6.9 never merges
    /// them). A session with nothing newer gets nothing: its last watermarks still cover it.
    fn notice(&mut self, sh: &mut impl ControlMem) {
        let (Some((d_step, d_height)), fin) = (self.durable_rec, self.final_height) else {
            return;
        };
        for i in 0..self.sessions.len() {
            let (session, k_out) = self.sessions[i];
            let want = sh.session_step(session);
            let n = self.notified[i];
            // Durable while the session has an answer its last Durable does not cover, and a
            // newer Durable exists.
            let d = n.durable_step < want && d_step > n.durable_step;
            // Final until it covers the session's answers and the height of the last Durable it
            // got (the client bounds a fill's height by that Durable's, `client::facts`).
            let f = fin > n.final_height
                && (n.final_step < want
                    || n.final_height < n.durable_height.max(if d { d_height } else { 0 }));
            if !d && !f {
                continue;
            }
            self.rb.start(session, 0);
            if d {
                self.rb.push(&Record::Durable {
                    step: d_step,
                    height: d_height,
                });
                self.notified[i].durable_step = d_step;
                self.notified[i].durable_height = d_height;
                self.counters.durable_notices += 1;
            }
            if f {
                self.rb.push(&Record::Final {
                    height: fin,
                    view: self.view,
                });
                self.notified[i].final_step = self.final_step;
                self.notified[i].final_height = fin;
                self.counters.final_notices += 1;
            }
            let bytes = self.rb.finish(NOTICE_RESP_SEQ, Some(&k_out));
            sh.notice(session, bytes);
            self.counters.notice_packets += 1;
        }
    }

    /// One poll at `now`. Returns a control request for the BBO core, if any.
    pub fn poll(&mut self, now: u64, sh: &mut impl ControlMem) -> Option<ControlReq> {
        while let Some(m) = sh.step_pop() {
            match m {
                StepMsg::Step(s) => self.steps.push_back((s.step, s.need_a, s.need_b)),
                StepMsg::Mark { height, last_step } => {
                    self.blocks.push_back((height, last_step));
                    self.closed_height = height;
                    if self.close_at.len() == MARKS_MAX {
                        self.close_at.pop_front();
                    }
                    self.close_at.push_back((height, now));
                    // Bounded: a long finality stall keeps the newest MARKS_MAX (the book is
                    // halted by then; an older final height maps to the oldest kept).
                    if self.marks.len() == MARKS_MAX {
                        self.marks.pop_front();
                    }
                    self.marks.push_back((height, last_step));
                }
            }
        }
        for h in 0..2 {
            while let Some(x) = sh.frame_step_pop(h) {
                self.frame_steps[h].push_back(x);
            }
        }
        // DUR_QUORUM (07 §6.9): the Q-th highest contiguous frame_seq per substream (voters
        // ≤ 64, so a stack buffer: no allocation per poll).
        for h in 0..2 {
            let mut buf = [0u64; 64];
            let n = self.acks.len().min(64);
            for (d, a) in buf.iter_mut().zip(&self.acks) {
                *d = a.0[h];
            }
            let v = &mut buf[..n];
            v.sort_unstable_by(|a, b| b.cmp(a));
            let q_ack = v.get(self.q - 1).copied().unwrap_or(0);
            while let Some(&(fs, step)) = self.frame_steps[h].front() {
                if fs > q_ack {
                    break;
                }
                self.covered[h] = self.covered[h].max(step);
                self.frame_steps[h].pop_front();
            }
        }
        while let Some(&(s, na, nb)) = self.steps.front() {
            if na > self.covered[0] || nb > self.covered[1] {
                break;
            }
            self.durable = s;
            self.steps.pop_front();
        }
        // FINAL: the listener's certified height (07 §6.8), or contiguous heights with Q
        // votes (the in-process harnesses).
        let mut advanced = false;
        let mut certified_view = None;
        if self.certified.0 > self.final_height && self.certified.0 <= self.closed_height {
            self.final_height = self.certified.0;
            certified_view = Some(self.certified.1);
            advanced = true;
            let fin = self.final_height;
            self.votes.retain(|&h, _| h > fin);
        }
        while let Some((&h, &mask)) = self.votes.iter().next() {
            if h != self.final_height + 1 || (mask.count_ones() as usize) < self.q {
                if h <= self.final_height {
                    self.votes.remove(&h);
                    continue;
                }
                break;
            }
            self.final_height = h;
            self.votes.remove(&h);
            advanced = true;
        }
        // The watermarks (07 §6.9): Durable per ≤ 1 ms, Final per finalization — one packet
        // per session when both are due, a Durable that moved riding along with a Final.
        let durable_due = self.durable > self.durable_sent
            && (advanced || now.saturating_sub(self.last_durable_ns) >= 1_000_000);
        if durable_due {
            self.durable_sent = self.durable;
            self.last_durable_ns = now;
            while self.blocks.front().is_some_and(|b| b.1 < self.durable) {
                self.blocks.pop_front();
            }
            let height = self.height_of(self.durable);
            // DUR_QUORUM (07 §6.9): REP_DurableMark, and the Durable watermark to the sessions.
            sh.durable_mark(self.durable, height);
            self.durable_rec = Some((self.durable, height));
        }
        if advanced {
            while let Some(&(h, t)) = self.close_at.front() {
                if h > self.final_height {
                    break;
                }
                self.final_latency.record(now.saturating_sub(t));
                self.close_at.pop_front();
            }
            self.view = certified_view.unwrap_or(self.view + 1).max(self.view);
            // The steps the new final height covers (its block's last step, from the marks).
            while let Some(&(h, last)) = self.marks.front() {
                if h > self.final_height {
                    break;
                }
                self.final_step = self.final_step.max(last);
                self.marks.pop_front();
            }
        }
        // The watermarks to the sessions they attest: when one moved, and once a millisecond
        // for sessions whose answers went out after the watermark last moved (else a fill sent
        // just after its Durable would wait for the next one, or forever on an idle box).
        let sweep = now.saturating_sub(self.last_sweep_ns) >= 1_000_000;
        if durable_due || advanced || sweep {
            self.last_sweep_ns = now;
            self.notice(sh);
        }
        // Self-fence (INV-REP-6, §4.8): armed once Q voters have acked.
        let fresh = self
            .acks
            .iter()
            .filter(|a| a.1.is_some_and(|t| now.saturating_sub(t) <= self.fence_ns))
            .count();
        if fresh >= REP_FENCE_ACKS {
            self.armed = true;
        } else if self.armed {
            sh.fence();
        }
        // Divergence (07 §7.4): halt within one poll of the message, and never resume here.
        if self.diverged.is_some() {
            if !self.diverge_halt_sent {
                self.diverge_halt_sent = true;
                self.counters.diverge_halts += 1;
                return Some(ControlReq::Halt(control::REASON_DIVERGE));
            }
            return None;
        }
        // Finality gate (INV-REP-10, §6.8).
        let lag = self.closed_height.saturating_sub(self.final_height);
        if !self.halted_by_gate && lag > FIN_GATE_BLOCKS {
            self.halted_by_gate = true;
            self.counters.gate_halts += 1;
            return Some(ControlReq::Halt(control::REASON_FIN_GATE));
        }
        if self.halted_by_gate && lag <= REP_GATE_RESUME_BLOCKS {
            self.halted_by_gate = false;
            self.counters.gate_resumes += 1;
            return Some(ControlReq::Resume(control::REASON_FIN_GATE));
        }
        None
    }
}

/// Control for a box: `voters` voters, quorum Q = n − ⌊(n − 1)/3⌋ (3 of 4 in BASE), watermarks
/// to every configured session; for a tenure starting at `base`, its self-fence window
/// `self_fence_us` (None: REP_SELF_FENCE_US).
pub(crate) fn control_for(
    cfg: &crate::shm::SeqConfig,
    base: &crate::takeover::TenureBase,
    self_fence_us: Option<u64>,
) -> Control {
    let mut c = Control::new(
        cfg.voters,
        vyrn_home::quorum(cfg.voters),
        cfg.engine
            .sessions
            .iter()
            .map(|s| (s.session, s.k_out))
            .collect(),
    );
    c.start_at(base.prev_step(), base.first_height - 1);
    if let Some(us) = self_fence_us {
        c.set_self_fence_us(us);
    }
    c
}
