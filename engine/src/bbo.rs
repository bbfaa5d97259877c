//! The BBO core (07 §4.1–§4.2, missing-chapters §3): owns the book, takes one forwarded op per
//! step from the lane rings in `rx_ts` order of their heads, fixes the step's kind, source and
//! cut, pushes the StepRecord *before* any fill (07 §4.2), then applies the op and addresses
//! every outcome to the lane of the session it concerns, tagged `(step, need_A, need_B)`.
//!
//! The same [`Bbo::execute`] runs live and in replay (INV-DET): live, [`Bbo::poll`] decides
//! the step (deadline admission, kind, source, cut) and calls it; in replay the decision comes
//! from the StepRecord and is only read, never recomputed (07 §7.1).
//!
//! Hot path (one step): no allocation (event scratch and tables are sized at construction), no
//! lock, no syscall. `bench/benches/engine_bbo.rs` measures it.

use crate::book::{Book, BookReject, Event, Op, Side};
use crate::config::EngineConfig;
use vyrn_wire::consts::{N_LANES_MAX, SRC_NONE};
use vyrn_wire::layout::Layout;
use vyrn_wire::records::StepKind;

/// One op a lane forwards to the BBO core (07 §4.1 lane → BBO ring entry).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fwd {
    /// Lane.
    pub lane: u8,
    /// The op's LaneSeq.
    pub lane_seq: u64,
    /// Its packet's receive time (ring selection and deadline admission).
    pub rx_ts: u64,
    /// The op.
    pub op: Op,
}

/// What a step did for one session (or a whole lane), as the lane applies it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// One side of a trade (taker first, then maker, price = the maker's tick).
    Fill {
        /// Trade price.
        price: i32,
        /// Traded quantity.
        qty: u32,
        /// This order's open quantity after the trade.
        leaves: u32,
        /// The resting side.
        maker: bool,
    },
    /// The op's New rested this quantity.
    Rested {
        /// Resting quantity.
        qty: u32,
    },
    /// The op's IOC remainder (or a GTC remainder a full book could not take).
    Out {
        /// Quantity out.
        qty: u32,
    },
    /// The op's Cancel removed the order named by the event's `client_tag`.
    Cancelled {
        /// Quantity that was open.
        qty: u32,
    },
    /// The book refused the op.
    Rejected(BookReject),
    /// The op arrived while the book was halted or sealed (07 §6.8).
    Halted,
    /// The op's step was a `Shed` (deadline admission, 07 §3.8).
    Shed,
    /// The op's step is over (the lane retires its oldest op in flight).
    Done,
    /// `Control(Halt)` at this step: from now every new op is answered `BOOK_HALTED`.
    Halt,
    /// `Control(Resume)`.
    Resume,
    /// `Seal`: the book's last step of the epoch; nothing trades after it.
    Sealed,
    /// The last event of this step for this lane: the lane flushes the step's responses and
    /// counts the step as applied (`fills_applied`, 07 §3.6).
    End,
    /// Replay of a seal block with unavailable packets (07 §9.4): the op was forwarded here,
    /// but the final log steps nothing for it (the dead tenure refused it at its lane, where
    /// risk state now differs). The lane answers `Reject EXCLUDED` and retires it.
    Excluded,
}

/// One event addressed to a lane (07 §4.1 `R_fill`: tagged `(step, need_A, need_B)`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LaneEvent {
    /// StepId.
    pub step: u64,
    /// need_A(step) (07 §4.1).
    pub need_a: u64,
    /// need_B(step).
    pub need_b: u64,
    /// The session concerned (0: the whole lane).
    pub session: u32,
    /// The order concerned (0 for lane-wide events).
    pub client_tag: u32,
    /// The order's cookie (the lane's handle, [`crate::book::cookie`]; 0 for lane-wide events).
    pub cookie: u64,
    /// The order's side (Buy for lane-wide events).
    pub side: Side,
    /// What happened.
    pub what: Outcome,
}

/// A step as the BBO core pushes it (07 §3.8 StepRecord, both halves' worth).
#[derive(Debug, Clone, Copy)]
pub struct StepOut<'a> {
    /// StepId.
    pub step: u64,
    /// Kind.
    pub kind: StepKind,
    /// Source lane (`SRC_NONE` = none).
    pub src_lane: u8,
    /// Source op's LaneSeq (0 without a source).
    pub src_lane_seq: u64,
    /// The step's cut, `n_lanes` values.
    pub cut: &'a [u64],
    /// Payload (Control, Seal).
    pub payload: &'a [u8],
    /// need_A(step).
    pub need_a: u64,
    /// need_B(step).
    pub need_b: u64,
    /// Home substream (07 §3.8).
    pub home: u8,
    /// The other substream carries a cut-only record too.
    pub spans: bool,
}

/// A logged step, as replay reads it (07 §7.1).
#[derive(Debug, Clone, Copy)]
pub struct StepIn<'a> {
    /// StepId.
    pub step: u64,
    /// Kind.
    pub kind: StepKind,
    /// Source lane (`SRC_NONE` = none).
    pub src_lane: u8,
    /// Source op's LaneSeq.
    pub src_lane_seq: u64,
    /// The step's cut, `n_lanes` values.
    pub cut: &'a [u64],
    /// Payload.
    pub payload: &'a [u8],
}

/// Where the BBO core's output goes.
pub trait BboSink {
    /// The StepRecord, pushed before any event of the step (07 §4.2).
    fn step(&mut self, s: &StepOut<'_>);
    /// An event for `lane`, in step order.
    fn event(&mut self, lane: u8, ev: &LaneEvent);
}

/// The lane → BBO rings as the BBO core sees them.
pub trait OpQueues {
    /// The oldest op of `lane`, if any.
    fn head(&self, lane: usize) -> Option<&Fwd>;
    /// Take the oldest op of `lane`.
    fn pop(&mut self, lane: usize) -> Option<Fwd>;
}

/// Control requests (07 §6.8 HaltReq from the stream core's finality gate, §7.4 Diverge, 08 Seal).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ControlReq {
    /// Halt the book.
    Halt(u8),
    /// Resume it.
    Resume(u8),
    /// Seal it (the epoch's last step).
    Seal,
}

/// Control payload codes (05 owns them; this project's v1 values, `docs/engine.md`).
pub mod control {
    /// Halt; argument = reason.
    pub const HALT: u8 = 1;
    /// Resume; argument = reason.
    pub const RESUME: u8 = 2;
    /// Reason: the finality gate (07 §6.8).
    pub const REASON_FIN_GATE: u8 = 1;
    /// Reason: divergence (07 §7.4).
    pub const REASON_DIVERGE: u8 = 2;
    /// Reason: the operator.
    pub const REASON_OPERATOR: u8 = 3;
}

/// Why a logged step cannot be replayed: the log and this engine disagree (INV-DET), a
/// divergence an operator must see (`REP_A_DIVERGE`, 07 §7.4).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StepError {
    /// StepIds must be gapless.
    StepOrder {
        /// Expected.
        expected: u64,
        /// Logged.
        got: u64,
    },
    /// The source op is not the head of its lane's ring.
    MissingOp {
        /// Lane.
        lane: u8,
        /// LaneSeq logged.
        lane_seq: u64,
    },
    /// A kind that carries no op named a source, or the reverse.
    BadSource(StepKind),
    /// The book computed another kind than the log holds.
    KindMismatch {
        /// Logged.
        logged: StepKind,
        /// Computed.
        computed: StepKind,
    },
    /// A Control payload this engine does not know.
    BadPayload,
    /// A kind v1 does not run (Depletion, Rescan, Uncross: lane-local books, auctions).
    Unsupported(StepKind),
    /// The cut moved backwards (INV-CUT-MONO) or has the wrong length.
    BadCut,
}

/// Counters of the BBO core.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct BboCounters {
    /// Steps by kind (index = kind value).
    pub steps: [u64; 9],
    /// Trades.
    pub trades: u64,
    /// Events whose cookie names no lane of this home (never expected).
    pub orphan_events: u64,
}

/// The BBO core.
#[derive(Debug)]
pub struct Bbo {
    book: Book,
    layout: Layout,
    next_step: u64,
    cut: [u64; N_LANES_MAX],
    need: [u64; 2],
    halted: Option<u64>,
    sealed: bool,
    deadline: Option<u64>,
    control: Option<ControlReq>,
    scratch: Vec<Event>,
    counters: BboCounters,
    /// Replaying a seal block that excludes unavailable packets ([`Bbo::exclude`]).
    excluding: bool,
}

impl Bbo {
    /// A BBO core for `cfg`, first step 1, every lane's cut 0.
    pub fn new(cfg: &EngineConfig) -> Self {
        Bbo {
            book: Book::new(cfg.book_cfg),
            layout: cfg.layout,
            next_step: 1,
            cut: [0; N_LANES_MAX],
            need: [0; 2],
            halted: None,
            sealed: false,
            deadline: cfg.bbo_deadline_ns,
            control: None,
            scratch: Vec::with_capacity(1024),
            counters: BboCounters::default(),
            excluding: false,
        }
    }

    /// The book.
    pub fn book(&self) -> &Book {
        &self.book
    }

    /// The next StepId.
    pub fn next_step(&self) -> u64 {
        self.next_step
    }

    /// Steps executed so far: every step ≤ this is done.
    pub fn done(&self) -> u64 {
        self.next_step - 1
    }

    /// The cut of the last step.
    pub fn cut(&self) -> &[u64] {
        &self.cut[..self.layout.n_lanes as usize]
    }

    /// need_A and need_B of the last step.
    pub fn need(&self) -> (u64, u64) {
        (self.need[0], self.need[1])
    }

    /// The Control(Halt) step in force, if halted.
    pub fn halted(&self) -> Option<u64> {
        self.halted
    }

    /// Sealed?
    pub fn sealed(&self) -> bool {
        self.sealed
    }

    /// Counters.
    pub fn counters(&self) -> &BboCounters {
        &self.counters
    }

    /// Queue a control request; it becomes the next step (one at a time; a second request
    /// before the first ran replaces it — callers that queue several take the next only once
    /// [`Bbo::control_pending`] is false).
    pub fn request(&mut self, c: ControlReq) {
        self.control = Some(c);
    }

    /// Whether a control request waits to become the next step.
    pub fn control_pending(&self) -> bool {
        self.control.is_some()
    }

    /// Live: run at most one step at time `now` over the published `cut`. Returns the StepId
    /// run, if any. Order of preference: a control request; the ready op (LaneSeq covered by
    /// the cut) with the lowest head `rx_ts` (ties: lowest lane); an `Idle` step when the cut
    /// moved and no op logs it (07 §4.11).
    pub fn poll(
        &mut self,
        now: u64,
        cut: &[u64],
        queues: &mut impl OpQueues,
        sink: &mut impl BboSink,
    ) -> Result<Option<u64>, StepError> {
        let n = self.layout.n_lanes as usize;
        if cut.len() != n {
            return Err(StepError::BadCut);
        }
        let step = self.next_step;
        if let Some(c) = self.control.take() {
            let (kind, payload): (StepKind, [u8; 2]) = match c {
                ControlReq::Halt(r) => (StepKind::Control, [control::HALT, r]),
                ControlReq::Resume(r) => (StepKind::Control, [control::RESUME, r]),
                ControlReq::Seal => (StepKind::Seal, [0, 0]),
            };
            let payload: &[u8] = if kind == StepKind::Seal {
                &[]
            } else {
                &payload
            };
            let s = StepIn {
                step,
                kind,
                src_lane: SRC_NONE,
                src_lane_seq: 0,
                cut,
                payload,
            };
            self.execute(&s, None, sink)?;
            return Ok(Some(step));
        }
        let mut best: Option<(u64, usize)> = None;
        for (l, &c) in cut.iter().enumerate() {
            if let Some(h) = queues.head(l) {
                if h.lane_seq <= c && best.is_none_or(|(ts, _)| h.rx_ts < ts) {
                    best = Some((h.rx_ts, l));
                }
            }
        }
        if let Some((rx_ts, l)) = best {
            let Some(op) = queues.pop(l) else {
                return Ok(None);
            };
            let kind = if self.halted.is_some() || self.sealed {
                StepKind::Improve
            } else if self.deadline.is_some_and(|d| now.saturating_sub(rx_ts) > d) {
                StepKind::Shed
            } else {
                self.book.kind_of(&op.op)
            };
            let s = StepIn {
                step,
                kind,
                src_lane: l as u8,
                src_lane_seq: op.lane_seq,
                cut,
                payload: &[],
            };
            self.execute(&s, Some(op), sink)?;
            return Ok(Some(step));
        }
        if cut != &self.cut[..n] {
            let s = StepIn {
                step,
                kind: StepKind::Idle,
                src_lane: SRC_NONE,
                src_lane_seq: 0,
                cut,
                payload: &[],
            };
            self.execute(&s, None, sink)?;
            return Ok(Some(step));
        }
        Ok(None)
    }

    /// A final seal listed packets of this tenure's tail unavailable (07 §9.4): until the next
    /// tenure starts ([`Bbo::start_tenure`]), [`Bbo::replay`] runs the log as the final log
    /// reads it rather than as the dead box stepped it. The steps stand (their ids, cuts and
    /// order), but what each does is computed from the book: a step whose source op was never
    /// forwarded (an excluded packet's, or one its lane now refuses) runs as `Idle`; one whose
    /// op is there runs with the kind the book gives it; an op forwarded here and passed over
    /// by the log (the dead box's lane refused it) is retired with `Outcome::Excluded`. Every
    /// replica runs the same steps over the same input, so they agree with each other
    /// (INV-DET); where the result differs from what the dead box answered, the answer was
    /// reverted (§9.6 case d).
    pub fn exclude(&mut self) {
        self.excluding = true;
    }

    /// Whether replay runs the log as [`Bbo::exclude`] says.
    pub fn excluding(&self) -> bool {
        self.excluding
    }

    /// Replay: run the logged step `s`, taking its source op from `queues` (07 §7.1). The
    /// caller has let every lane apply its ops ≤ `s.cut` first.
    pub fn replay(
        &mut self,
        s: &StepIn<'_>,
        queues: &mut impl OpQueues,
        sink: &mut impl BboSink,
    ) -> Result<(), StepError> {
        if self.excluding {
            return self.replay_excluding(s, queues, sink);
        }
        let op = if s.src_lane == SRC_NONE {
            None
        } else {
            let l = s.src_lane as usize;
            match queues.head(l) {
                Some(h) if h.lane_seq == s.src_lane_seq => queues.pop(l),
                _ => {
                    return Err(StepError::MissingOp {
                        lane: s.src_lane,
                        lane_seq: s.src_lane_seq,
                    })
                }
            }
        };
        self.execute(s, op, sink)
    }

    /// [`Bbo::replay`] of a seal block with unavailable packets ([`Bbo::exclude`]).
    fn replay_excluding(
        &mut self,
        s: &StepIn<'_>,
        queues: &mut impl OpQueues,
        sink: &mut impl BboSink,
    ) -> Result<(), StepError> {
        let wants_op = matches!(s.kind, StepKind::Cross | StepKind::Improve | StepKind::Shed);
        if s.src_lane == SRC_NONE || !wants_op {
            return self.execute(s, None, sink);
        }
        let l = s.src_lane as usize;
        if l >= self.layout.n_lanes as usize {
            return Err(StepError::MissingOp {
                lane: s.src_lane,
                lane_seq: s.src_lane_seq,
            });
        }
        // Ops the log passed over: retired, answered EXCLUDED.
        while queues.head(l).is_some_and(|h| h.lane_seq < s.src_lane_seq) {
            if let Some(f) = queues.pop(l) {
                self.retire_excluded(s.step, &f, sink);
            }
        }
        let op = match queues.head(l) {
            Some(h) if h.lane_seq == s.src_lane_seq => queues.pop(l),
            _ => None,
        };
        let Some(op) = op else {
            let idle = StepIn {
                kind: StepKind::Idle,
                src_lane: SRC_NONE,
                src_lane_seq: 0,
                ..*s
            };
            return self.execute(&idle, None, sink);
        };
        let kind = match s.kind {
            StepKind::Shed => StepKind::Shed,
            _ if self.halted.is_some() || self.sealed => StepKind::Improve,
            _ => self.book.kind_of(&op.op),
        };
        self.execute(&StepIn { kind, ..*s }, Some(op), sink)
    }

    /// An op the final log never steps ([`Bbo::exclude`]): its lane answers `EXCLUDED` and
    /// retires it, before step `step` runs.
    fn retire_excluded(&mut self, step: u64, f: &Fwd, sink: &mut impl BboSink) {
        let (need_a, need_b) = (self.need[0], self.need[1]);
        let ev = |what| LaneEvent {
            step,
            need_a,
            need_b,
            session: f.op.session,
            client_tag: f.op.client_tag,
            cookie: f.op.cookie,
            side: f.op.side,
            what,
        };
        sink.event(f.lane, &ev(Outcome::Excluded));
        sink.event(f.lane, &ev(Outcome::Done));
    }

    /// The one step path, live and replay (INV-DET).
    pub fn execute(
        &mut self,
        s: &StepIn<'_>,
        op: Option<Fwd>,
        sink: &mut impl BboSink,
    ) -> Result<(), StepError> {
        let n = self.layout.n_lanes as usize;
        if s.step != self.next_step {
            return Err(StepError::StepOrder {
                expected: self.next_step,
                got: s.step,
            });
        }
        if s.cut.len() != n || s.cut.iter().zip(&self.cut[..n]).any(|(a, b)| a < b) {
            return Err(StepError::BadCut);
        }
        let wants_op = matches!(s.kind, StepKind::Cross | StepKind::Improve | StepKind::Shed);
        if wants_op != op.is_some() {
            return Err(StepError::BadSource(s.kind));
        }
        if let Some(o) = &op {
            if o.lane != s.src_lane || o.lane_seq != s.src_lane_seq {
                return Err(StepError::MissingOp {
                    lane: s.src_lane,
                    lane_seq: s.src_lane_seq,
                });
            }
        }
        let control = match s.kind {
            StepKind::Control => match s.payload {
                [control::HALT, _] => Some(Outcome::Halt),
                [control::RESUME, _] => Some(Outcome::Resume),
                _ => return Err(StepError::BadPayload),
            },
            StepKind::Seal => Some(Outcome::Sealed),
            StepKind::Depletion | StepKind::Rescan | StepKind::Uncross => {
                return Err(StepError::Unsupported(s.kind))
            }
            _ => None,
        };
        // need_H(s) (07 §4.1): s when H carries a record of s (home half, or its cut moved).
        let home = self.layout.home_of(s.src_lane);
        let mut carries = [false; 2];
        carries[home as usize] = true;
        for h in 0..self.layout.n_streams {
            let (a, b) = (
                self.layout.half_start(h),
                self.layout.half_start(h) + self.layout.half_len(h),
            );
            if s.cut[a..b] != self.cut[a..b] {
                carries[h as usize] = true;
            }
        }
        for (need, &c) in self.need.iter_mut().zip(&carries) {
            if c {
                *need = s.step;
            }
        }
        self.cut[..n].copy_from_slice(s.cut);
        let spans = self.layout.n_streams == 2 && carries[0] && carries[1];
        let (need_a, need_b) = (self.need[0], self.need[1]);
        sink.step(&StepOut {
            step: s.step,
            kind: s.kind,
            src_lane: s.src_lane,
            src_lane_seq: s.src_lane_seq,
            cut: s.cut,
            payload: s.payload,
            need_a,
            need_b,
            home,
            spans,
        });
        self.next_step += 1;
        self.counters.steps[s.kind as usize] += 1;
        let ev =
            |session: u32, client_tag: u32, cookie: u64, side: Side, what: Outcome| LaneEvent {
                step: s.step,
                need_a,
                need_b,
                session,
                client_tag,
                cookie,
                side,
                what,
            };
        if let Some(what) = control {
            match what {
                Outcome::Halt => self.halted = Some(s.step),
                Outcome::Resume => self.halted = None,
                _ => self.sealed = true,
            }
            for l in 0..n as u8 {
                sink.event(l, &ev(0, 0, 0, Side::Buy, what));
                sink.event(l, &ev(0, 0, 0, Side::Buy, Outcome::End));
            }
            return Ok(());
        }
        let Some(f) = op else {
            return Ok(()); // Idle
        };
        let src = f.lane;
        let (sess, tag, ck, side) = (f.op.session, f.op.client_tag, f.op.cookie, f.op.side);
        let mut touched: u64 = 1 << src;
        match s.kind {
            StepKind::Shed => sink.event(src, &ev(sess, tag, ck, side, Outcome::Shed)),
            _ if self.halted.is_some() || self.sealed => {
                if s.kind != StepKind::Improve {
                    return Err(StepError::KindMismatch {
                        logged: s.kind,
                        computed: StepKind::Improve,
                    });
                }
                sink.event(src, &ev(sess, tag, ck, side, Outcome::Halted));
            }
            _ => {
                let computed = self.book.kind_of(&f.op);
                if computed != s.kind {
                    return Err(StepError::KindMismatch {
                        logged: s.kind,
                        computed,
                    });
                }
                let mut scratch = std::mem::take(&mut self.scratch);
                scratch.clear();
                let k = self.book.apply(s.step, &f.op, &mut |e| scratch.push(e));
                debug_assert_eq!(k, computed);
                for e in &scratch {
                    let (session, client_tag, cookie, e_side, what) = match *e {
                        Event::Fill {
                            session,
                            client_tag,
                            side,
                            price,
                            qty,
                            leaves,
                            maker,
                            cookie,
                            ..
                        } => {
                            if !maker {
                                self.counters.trades += 1;
                            }
                            let what = Outcome::Fill {
                                price,
                                qty,
                                leaves,
                                maker,
                            };
                            (session, client_tag, cookie, side, what)
                        }
                        Event::Rested {
                            session,
                            client_tag,
                            cookie,
                            qty,
                        } => (session, client_tag, cookie, side, Outcome::Rested { qty }),
                        Event::Out {
                            session,
                            client_tag,
                            cookie,
                            side,
                            qty,
                        } => (session, client_tag, cookie, side, Outcome::Out { qty }),
                        Event::Cancelled {
                            session,
                            client_tag,
                            cookie,
                            side,
                            qty,
                        } => (
                            session,
                            client_tag,
                            cookie,
                            side,
                            Outcome::Cancelled { qty },
                        ),
                        Event::Rejected {
                            session,
                            client_tag,
                            reason,
                        } => (session, client_tag, ck, side, Outcome::Rejected(reason)),
                    };
                    // The cookie names the order's lane (crate::lane::cookie): no lookup.
                    let lane = crate::book::cookie_lane(cookie);
                    if lane as usize >= n {
                        self.counters.orphan_events += 1;
                        continue;
                    }
                    touched |= 1 << lane;
                    sink.event(lane, &ev(session, client_tag, cookie, e_side, what));
                }
                self.scratch = scratch;
            }
        }
        sink.event(src, &ev(sess, tag, ck, side, Outcome::Done));
        let mut t = touched;
        while t != 0 {
            let l = t.trailing_zeros() as u8;
            t &= t - 1;
            sink.event(l, &ev(0, 0, 0, Side::Buy, Outcome::End));
        }
        Ok(())
    }

    /// Restore from a snapshot's BBO state (07 §7.5 section 3).
    pub(crate) fn restore_state(
        &mut self,
        next_step: u64,
        cut: &[u64],
        need: (u64, u64),
        halted: Option<u64>,
        sealed: bool,
    ) {
        self.next_step = next_step;
        self.cut[..cut.len()].copy_from_slice(cut);
        self.need = [need.0, need.1];
        self.halted = halted;
        self.sealed = sealed;
    }

    /// A new tenure starts from `prev_cut`, its TenureStart's (07 §9.4: "the next tenure's
    /// first cut starts at these bounds", the seal's `lane_bounds`). The ops above the last
    /// step's cut — the seal's trailing ops — are stepped under cuts from there, and a half
    /// *moved* (need_H, OTHER, 07 §3.8, §4.1) only where a cut passes these bounds, as the stream
    /// cores and every decoder judge it. Refused (`BadCut`) below the current cut
    /// (INV-CUT-MONO) or of the wrong length.
    pub fn start_tenure(&mut self, prev_cut: &[u64]) -> Result<(), StepError> {
        let n = self.layout.n_lanes as usize;
        if prev_cut.len() != n || prev_cut.iter().zip(&self.cut[..n]).any(|(a, b)| a < b) {
            return Err(StepError::BadCut);
        }
        self.cut[..n].copy_from_slice(prev_cut);
        self.excluding = false;
        Ok(())
    }

    /// The book, mutable (snapshot restore).
    pub(crate) fn book_mut(&mut self) -> &mut Book {
        &mut self.book
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct NoOps;
    impl OpQueues for NoOps {
        fn head(&self, _: usize) -> Option<&Fwd> {
            None
        }
        fn pop(&mut self, _: usize) -> Option<Fwd> {
            None
        }
    }

    #[derive(Default)]
    struct Steps(Vec<(u64, bool, u64, u64)>);
    impl BboSink for Steps {
        fn step(&mut self, s: &StepOut<'_>) {
            self.0.push((s.step, s.spans, s.need_a, s.need_b));
        }
        fn event(&mut self, _: u8, _: &LaneEvent) {}
    }

    /// 07 §9.4: a tenure's cuts start at the seal's lane_bounds. A half whose lanes hold ops
    /// above the last step's cut (trailing ops) has not *moved* when the first cut equals those
    /// bounds: the BBO core agrees with the stream cores, which start there too.
    #[test]
    fn a_tenure_starts_its_cuts_at_the_bounds_and_refuses_bounds_below_the_cut() {
        let cfg = EngineConfig::test_home(4, 4);
        let lay = cfg.layout;
        assert_eq!(lay.n_streams, 2);
        let mut bbo = Bbo::new(&cfg);
        let mut sink = Steps::default();
        // The last tenure's last step: every lane's cut 3.
        bbo.poll(0, &[3; 4], &mut NoOps, &mut sink).unwrap();
        assert_eq!(bbo.cut(), &[3; 4]);
        // Trailing ops on every lane: the bounds are 5.
        assert_eq!(bbo.start_tenure(&[2, 5, 5, 5]), Err(StepError::BadCut));
        assert_eq!(bbo.start_tenure(&[5; 3]), Err(StepError::BadCut));
        assert_eq!(bbo.cut(), &[3; 4], "a refused start changes nothing");
        bbo.start_tenure(&[5; 4]).unwrap();
        assert_eq!(bbo.cut(), &[5; 4]);
        // A cut at the bounds is no move: no Idle step.
        assert_eq!(bbo.poll(0, &[5; 4], &mut NoOps, &mut sink), Ok(None));
        // The first half's cut moves past them, the other's does not: one half carries it.
        let mut cut = [5u64; 4];
        let a = (0..4).find(|&l| lay.stream_of(l) == 0).unwrap();
        cut[a] = 6;
        let step = bbo.poll(0, &cut, &mut NoOps, &mut sink).unwrap().unwrap();
        let (s, spans, need_a, need_b) = *sink.0.last().unwrap();
        assert_eq!(s, step);
        assert!(
            !spans,
            "OTHER would be set for a half that writes no record"
        );
        assert_eq!((need_a, need_b), (step, 1));
    }
}
