//! One exchange session as a pure state machine: requests in, `(destination, bytes)` out,
//! responses in, events out. It never reads a clock (every call takes `now`, ns) and never
//! touches a socket ([`crate::driver`] is the thin layer that does).
//!
//! ```text
//!  submit(now, orders) ──► build + tag (K_seq) ──► retain ──► outbox: copy 1 → sequencer
//!                                                                    copy 2 → data home
//!  handle_packet(now, bytes) ──► tag check (K_out) ──► resp_seq dedupe/gaps ──► records
//!        records ──► per-order dedupe ──► events: Exec | Durable | Final | notices
//!  poll(now) ──► resend timer, gap timer, retention expiry
//! ```
//!
//! Identity. `pkt_seq` is the identity the sequencer dedupes on (07 §9.5), so a resend always
//! repeats the original `pkt_seq` and bytes (only `flags.resend` and the tag change); the
//! client never re-sends an order under a new `pkt_seq`, which could execute it twice. An
//! order is named by its `client_tag` ([`OrderId`]), which the session allocates and never
//! reuses.

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;

use vyrn_wire::msg::client::{Msg, MsgType, Record, RejectCode, Side, MSG_INDEX_NONE};

use crate::config::{ConfigError, SessionConfig};
use crate::facts::{Fact, Facts, Height, StepId};
use crate::packet::{build_request, mark_resend, DropReason, ResponseView, MAX_MSGS, REQ_BUF};
use crate::retain::Retention;

mod notices;
mod resend;
use resend::Rtt;

/// An order, named by its `client_tag` (allocated by the session from 1, never reused).
pub type OrderId = u32;

/// One message of one request packet: the request identity (07 §9.5 dedupes on `pkt_seq`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MsgRef {
    /// The packet.
    pub pkt_seq: u32,
    /// The message's index in it, 0..=9.
    pub msg_index: u8,
}

/// One message the application asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OrderReq {
    /// A new limit order, good till cancelled.
    Gtc {
        /// Side.
        side: Side,
        /// Limit, ticks.
        tick: i32,
        /// Quantity, ≥ 1.
        qty: u32,
    },
    /// A new limit order, immediate or cancel.
    Ioc {
        /// Side.
        side: Side,
        /// Limit, ticks.
        tick: i32,
        /// Quantity, ≥ 1.
        qty: u32,
    },
    /// Cancel an order of this session.
    Cancel {
        /// The order to cancel.
        order: OrderId,
    },
}

/// What [`Session::submit`] sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Submitted {
    /// The packet's `pkt_seq`.
    pub pkt_seq: u32,
    /// Messages in it.
    pub count: u8,
    /// `orders[i]`: the order message `i` placed (a New) or names (a Cancel).
    pub orders: [OrderId; MAX_MSGS],
}

impl Submitted {
    /// The orders, one per message, in message order.
    pub fn orders(&self) -> &[OrderId] {
        &self.orders[..self.count as usize]
    }
}

/// Why [`Session::submit`] sent nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SubmitError {
    /// No message, or more than 10.
    BadCount,
    /// A New with quantity 0.
    BadQty,
    /// The retention ring is full of packets younger than the retention time (07 §5.7).
    RetentionFull,
    /// `orders_max` orders are tracked.
    OrdersFull,
    /// There is no sequencer (`SeqChange{new_seq: none}`, 07 §9.5): the book is halted.
    NoSequencer,
    /// `pkt_seq` or `client_tag` would pass `u32::MAX`: open a new session.
    Exhausted,
}

impl std::fmt::Display for SubmitError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(self, f)
    }
}

impl std::error::Error for SubmitError {}

/// An execution fact (07 §6.9 "executed", `DUR_PATHS`): one response record about one of this
/// session's orders, reported once, however many times the network or a resend delivers it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExecKind {
    /// The New was accepted (rests or works). Carries no StepId on the wire.
    Ack,
    /// A trade of the order.
    Fill {
        /// Trade price, ticks.
        price: i32,
        /// Traded quantity.
        qty: u32,
        /// Quantity still open.
        leaves: u32,
        /// The step of the trade: what the durable and final facts refer to.
        step: StepId,
    },
    /// A Cancel removed the order.
    CancelAck,
    /// The unfilled remainder of an IOC (or an unrestable GTC remainder) was cancelled.
    Out {
        /// Quantity cancelled.
        qty: u32,
    },
    /// The message was refused (for a Cancel: the cancel was refused, the order is untouched).
    Reject {
        /// Why.
        code: RejectCode,
        /// Code-specific detail.
        detail: u64,
    },
    /// The whole packet was shed (SHED): the message was not executed.
    Busy,
}

/// One [`ExecKind`] with the message and the order it is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Exec {
    /// The message answered (for a maker fill, the message that placed the order).
    pub msg: MsgRef,
    /// The order (for a Cancel's answer, the order the Cancel names).
    pub order: OrderId,
    /// What happened.
    pub kind: ExecKind,
    /// It came in a packet with `flags.resend` (first seen there: the original was lost).
    pub resent: bool,
}

/// Why the client cannot tell whether a message executed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Uncertainty {
    /// The packet left retention with no answer to this message: it may have executed or not.
    Expired,
    /// The sequencer holds the packet but no longer its responses (`RESEND_GONE`, 07 §8.5):
    /// it was processed, the outcome is unknown here.
    ResendGone,
    /// The message was answered by a tenure whose seal does not hold its packet (07 §9.6: the
    /// next sequencer's `BAD_SEQ` names an earlier `pkt_seq`): those answers are void, the
    /// order is back to placed-and-unanswered, and the packet is resent to execute anew.
    Reverted,
}

/// What the session tells the application, in order. Execution, durability and finality are
/// three separate kinds of event (07 §6.9); none implies another.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// Executed: a response about one of our messages (exactly once per fact).
    Exec(Exec),
    /// Durable (`DUR_QUORUM`): the fill of `order` at `step` is held by Q voters.
    Durable {
        /// The order.
        order: OrderId,
        /// The fill's step.
        step: StepId,
    },
    /// Final (`FINAL`): the block holding the fill's `step` is final; `height` is the bound
    /// the client used (see [`crate::facts`]).
    Final {
        /// The order.
        order: OrderId,
        /// The fill's step.
        step: StepId,
        /// The height bound that the `Final` watermark covered.
        height: Height,
    },
    /// The client cannot conclude whether this message executed.
    Uncertain {
        /// The message.
        msg: MsgRef,
        /// Its order (a New's own, a Cancel's target).
        order: OrderId,
        /// Why.
        why: Uncertainty,
    },
    /// Reverted (07 §9.6): the fill of `order` at `step` was executed by a tenure that ended
    /// in a seal without it (`TenureEnd`): it is in no final log, and will never be durable or
    /// final. Its order's other facts stand.
    Reverted {
        /// The order.
        order: OrderId,
        /// The fill's step.
        step: StepId,
    },
    /// The sequencer changed (07 §9.5); unanswered packets were queued for resend.
    SeqChanged {
        /// Epoch.
        epoch: u32,
        /// New tenure.
        tenure: u8,
        /// The new sequencer's client address; `None`: no sequencer, the book stays halted.
        addr: Option<SocketAddr>,
    },
    /// The data home changed (07 §5.7); copy 2 from `resend_from` was queued to the new one.
    DataRedirected {
        /// Old data box index.
        from: u8,
        /// New data box index.
        to: u8,
        /// First pkt_seq resent.
        resend_from: u32,
    },
    /// Copy 2 of `first..=last` was asked for but is no longer retained: the replicas must
    /// fetch those packets from the sequencer (07 §5.5 source 3).
    DataLost {
        /// First pkt_seq not resendable.
        first: u32,
        /// Last.
        last: u32,
    },
    /// The book halted (07 §6.8).
    Halted,
    /// Response packets `first..=last` never arrived and are given up (a hole in `resp_seq`
    /// older than `gap_giveup_ns`). Facts they carried are unknown to the client.
    ResponsesLost {
        /// First missing resp_seq.
        first: u64,
        /// Last.
        last: u64,
    },
    /// The sequencer expects pkt_seq `expected` (`BAD_SEQ`), which is no longer retained: the
    /// session cannot continue and must be reopened (a new session).
    Stuck {
        /// The pkt_seq the sequencer wants.
        expected: u32,
    },
}

/// Which copy of a request packet (07 §2.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PktCopy {
    /// Copy 1, to the sequencer.
    Seq,
    /// Copy 2, to the data home.
    Data,
}

/// One packet to send.
#[derive(Debug, Clone, Copy)]
pub struct Transmit<'a> {
    /// Where.
    pub dest: SocketAddr,
    /// Which copy.
    pub copy: PktCopy,
    /// `pkt_seq` of the packet.
    pub pkt_seq: u32,
    /// The bytes (a resend carries `flags.resend`).
    pub bytes: &'a [u8],
}

/// Per-session counters. Every dropped input is counted under one name; nothing panics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    /// Request packets submitted.
    pub packets: u64,
    /// Messages submitted.
    pub msgs: u64,
    /// Copy-1 resends queued (timer, `BAD_SEQ`, `SeqChange`, gap recovery).
    pub resend_seq: u64,
    /// Copy-2 resends queued (`DataRedirect`).
    pub resend_data: u64,
    /// Response packets accepted.
    pub rx_ok: u64,
    /// Dropped: `tag_out` did not verify.
    pub rx_bad_tag: u64,
    /// Dropped: truncated or of the wrong length.
    pub rx_truncated: u64,
    /// Dropped: another session's packet.
    pub rx_wrong_session: u64,
    /// Dropped: an unknown record type.
    pub rx_unknown_type: u64,
    /// Dropped: any other layout rule.
    pub rx_malformed: u64,
    /// Dropped: `echo_pkt_seq` names a packet never sent.
    pub rx_bad_echo: u64,
    /// Dropped: a `resp_seq` already received (network duplicate or a resend of a known one).
    pub rx_dup: u64,
    /// Accepted packets that carried `flags.resend`.
    pub rx_resent: u64,
    /// Records dropped as a fact already reported (second delivery under another resp_seq).
    pub rec_dup: u64,
    /// Records that name an order this session does not track (done and forgotten, or never).
    pub rec_unknown_order: u64,
    /// Records inconsistent with the packet they answer or the order (wrong tag, overlapping
    /// or oversized fill).
    pub rec_inconsistent: u64,
    /// Packet-level answers for a packet no longer retained (its messages are unknown).
    pub rec_unmatched: u64,
    /// `BAD_SEQ` rejects received.
    pub bad_seq: u64,
    /// Notices ignored as stale or repeated (`SeqChange`, `DataRedirect` from several boxes).
    pub notice_stale: u64,
    /// Fills a tenure's seal reverted (07 §9.6; `TenureEnd`).
    pub fills_reverted: u64,
    /// Answered packets a later tenure had not logged (07 §9.6; [`Uncertainty::Reverted`]):
    /// their answers voided, resent.
    pub reverted_packets: u64,
    /// Notices naming an unknown data box.
    pub notice_bad: u64,
    /// `resp_seq` holes seen.
    pub gaps: u64,
    /// Response packets given up as lost.
    pub resp_lost: u64,
    /// Messages that left retention unanswered.
    pub expired_unanswered: u64,
    /// Submits refused because retention was full.
    pub retention_full: u64,
    /// Fills whose facts could not be tracked (`pending_facts_max`).
    pub facts_untracked: u64,
}

/// What the session knows about one order. The three facts of 07 §6.9 are separate fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OrderView {
    /// The message that placed it.
    pub placed: MsgRef,
    /// New GTC or New IOC.
    pub kind: MsgType,
    /// Side.
    pub side: Side,
    /// Limit.
    pub tick: i32,
    /// Quantity.
    pub qty: u32,
    /// Executed: an `Ack` arrived.
    pub acked: bool,
    /// Executed: quantity traded so far (sum of distinct fills).
    pub filled: u32,
    /// Executed: step of the newest fill.
    pub last_fill_step: Option<StepId>,
    /// Ended: cancelled, out, rejected, shed or fully filled.
    pub done: bool,
    /// Durable: fills of this order not yet durable.
    pub fills_not_durable: u32,
    /// Final: fills of this order not yet final.
    pub fills_not_final: u32,
    /// Fills of this order its tenure's seal reverted (07 §9.6): in no final log.
    pub fills_reverted: u32,
    /// Its message went unanswered past retention or its responses are gone.
    pub uncertain: bool,
}

#[derive(Debug, Clone)]
struct Order {
    view: OrderView,
    cancelled: bool,
    out: bool,
    rejected: bool,
    busy: bool,
    /// The fills taken, `(lo, hi, step)` by `lo`: a fill with `qty, leaves` at `step` takes
    /// `[leaves, leaves + qty)` of the order's quantity, disjoint from the others. A repeat
    /// overlaps; reordered fills do not. Kept one entry a fill (not merged) so a fill its
    /// tenure's seal reverted gives its range back ([`Order::revert`]).
    cover: Vec<(u32, u32, StepId)>,
    /// The placing packet left retention.
    slot_gone: bool,
}

impl Order {
    /// A just-placed New: nothing acked, filled or ended yet.
    fn new(placed: MsgRef, kind: MsgType, side: Side, tick: i32, qty: u32) -> Self {
        Order {
            view: OrderView {
                placed,
                kind,
                side,
                tick,
                qty,
                acked: false,
                filled: 0,
                last_fill_step: None,
                done: false,
                fills_not_durable: 0,
                fills_not_final: 0,
                fills_reverted: 0,
                uncertain: false,
            },
            cancelled: false,
            out: false,
            rejected: false,
            busy: false,
            cover: Vec::new(),
            slot_gone: false,
        }
    }

    fn done(&self) -> bool {
        self.cancelled
            || self.out
            || self.rejected
            || self.busy
            || self.view.filled == self.view.qty
    }

    /// Add `[lo, hi)`, a fill at `step`; `Err(true)` for an exact repeat (within one fill
    /// taken), `Err(false)` for a partial overlap.
    fn take(&mut self, lo: u32, hi: u32, step: StepId) -> Result<(), bool> {
        for &(a, b, _) in &self.cover {
            if lo < b && a < hi {
                return Err(a <= lo && hi <= b);
            }
        }
        let i = self.cover.partition_point(|&(a, _, _)| a < lo);
        self.cover.insert(i, (lo, hi, step));
        Ok(())
    }

    /// A fill at `step` its tenure's seal reverted (07 §9.6): in no final log, so its quantity
    /// is the order's again — unfilled, and free for the fill the next tenure may make of the
    /// same range (the same `leaves`, which a merged cover took for a repeat). The view's
    /// `filled`, `last_fill_step` and `done` follow. Returns the quantity given back (`None`
    /// when no fill of the order is at `step`: a reset order, or one never tracked).
    fn revert(&mut self, step: StepId) -> Option<u32> {
        let i = self.cover.iter().position(|&(_, _, s)| s == step)?;
        let (lo, hi, _) = self.cover.remove(i);
        let qty = hi - lo;
        self.view.filled = self.view.filled.saturating_sub(qty);
        self.view.last_fill_step = self.cover.iter().map(|&(_, _, s)| s).max();
        self.view.done = self.done();
        Some(qty)
    }
}

/// Window of `resp_seq` values tracked above the contiguous prefix.
const RESP_WINDOW: u64 = 4096;

/// Most hole checkpoints kept; past it, the newest checkpoint absorbs new holes.
const HOLES_MAX: usize = 1024;

/// `resp_seq` bookkeeping: every value ≤ `contig` was received (or given up); a bitmap covers
/// `(contig, contig + RESP_WINDOW]`. Each time a new hole opens (a value arrives more than one
/// above the highest so far), a checkpoint `(now, value − 1)` is kept: when it is older than
/// the give-up time, everything up to `value − 1` still missing is given up.
#[derive(Debug)]
struct RespTrack {
    contig: u64,
    max_seen: u64,
    bits: Box<[u64; (RESP_WINDOW / 64) as usize]>,
    holes: VecDeque<(u64, u64)>,
    /// When to resend for the open holes next, and the backoff interval.
    next_attempt: Option<u64>,
    interval: u64,
}

impl RespTrack {
    fn new() -> Self {
        RespTrack {
            contig: 0,
            max_seen: 0,
            bits: Box::new([0; (RESP_WINDOW / 64) as usize]),
            holes: VecDeque::with_capacity(HOLES_MAX),
            next_attempt: None,
            interval: 0,
        }
    }
    fn bit(&self, r: u64) -> bool {
        let i = (r % RESP_WINDOW) as usize;
        self.bits[i / 64] >> (i % 64) & 1 == 1
    }
    fn set(&mut self, r: u64, v: bool) {
        let i = (r % RESP_WINDOW) as usize;
        if v {
            self.bits[i / 64] |= 1 << (i % 64);
        } else {
            self.bits[i / 64] &= !(1 << (i % 64));
        }
    }
    fn seen(&self, r: u64) -> bool {
        r <= self.contig || (r <= self.contig + RESP_WINDOW && self.bit(r))
    }
    fn has_gap(&self) -> bool {
        self.contig < self.max_seen
    }
    /// Skip holes up to `upto`; reports each missing range.
    fn advance_to(&mut self, upto: u64, lost: &mut impl FnMut(u64, u64)) {
        let mut hole: Option<u64> = None;
        // Only `(contig, contig + RESP_WINDOW]` can hold received values: scan that part and
        // jump over the rest, so a far `resp_seq` costs at most one window.
        let scan_end = upto.min(self.contig + RESP_WINDOW);
        while self.contig < scan_end {
            let r = self.contig + 1;
            if self.bit(r) {
                self.set(r, false);
                if let Some(h) = hole.take() {
                    lost(h, r - 1);
                }
            } else if hole.is_none() {
                hole = Some(r);
            }
            self.contig = r;
        }
        if self.contig < upto {
            hole.get_or_insert(self.contig + 1);
            self.contig = upto;
        }
        if let Some(h) = hole {
            lost(h, upto);
        }
        self.absorb();
    }
    /// Move `contig` over every received value right above it; drop settled checkpoints.
    fn absorb(&mut self) {
        while self.contig < self.max_seen && self.bit(self.contig + 1) {
            self.contig += 1;
            let c = self.contig;
            self.set(c, false);
        }
        while self
            .holes
            .front()
            .is_some_and(|&(_, upto)| upto <= self.contig)
        {
            self.holes.pop_front();
        }
        if !self.has_gap() {
            self.next_attempt = None;
        }
    }
    /// Record `r` (not seen before). Returns true when it opened a new hole.
    fn insert(&mut self, r: u64, now: u64, lost: &mut impl FnMut(u64, u64)) -> bool {
        if r > self.contig + RESP_WINDOW {
            self.advance_to(r - RESP_WINDOW, lost);
        }
        let new_hole = r > self.max_seen.max(self.contig) + 1;
        self.set(r, true);
        self.max_seen = self.max_seen.max(r);
        if new_hole {
            if self.holes.len() == HOLES_MAX {
                self.holes.back_mut().expect("full").1 = r - 1;
            } else {
                self.holes.push_back((now, r - 1));
            }
        }
        self.absorb();
        new_hole
    }
    /// Give up every hole whose checkpoint is `giveup_ns` old.
    fn give_up(&mut self, now: u64, giveup_ns: u64, lost: &mut impl FnMut(u64, u64)) {
        while let Some(&(since, upto)) = self.holes.front() {
            if now.saturating_sub(since) < giveup_ns {
                break;
            }
            self.holes.pop_front();
            if self.contig < upto {
                self.advance_to(upto, lost);
            }
        }
    }
}

/// One exchange session. See the module docs for the flow and `docs/client.md` for the rules.
#[derive(Debug)]
pub struct Session {
    cfg: SessionConfig,
    retain: Retention,
    orders: HashMap<OrderId, Order>,
    next_tag: u32,
    seq_addr: Option<SocketAddr>,
    data_home: u8,
    /// The last redirect taken: `(from, to, resend_from)` (07 §5.7).
    redirected: Option<(u8, u8, u32)>,
    tenure: (u32, u8),
    /// The last tenure whose end (`TenureEnd`) was taken.
    ended: Option<(u32, u8)>,
    resp: RespTrack,
    rtt: Rtt,
    /// The last go-back-N round of a `BAD_SEQ`: `(expected, when)`.
    gbn: Option<(u32, u64)>,
    /// Copy-1 resends out (`Slot::in_flight`) and held back (`Slot::pending`).
    resends_out: u32,
    resends_held: u32,
    /// `now` of the response packet being handled (the RTT sample of its first answers).
    rx_now: u64,
    facts: Facts,
    outbox: VecDeque<(u32, PktCopy)>,
    events: VecDeque<Event>,
    stuck_at: Option<u32>,
    counters: Counters,
}

impl Session {
    /// A session starting at `pkt_seq` 1, in `(epoch, tenure)` as known from the epoch notice
    /// (a `SeqChange` is accepted only for a later one).
    pub fn new(cfg: SessionConfig, epoch: u32, tenure: u8) -> Result<Self, ConfigError> {
        cfg.validate()?;
        Ok(Session {
            retain: Retention::new(cfg.retain_max),
            orders: HashMap::with_capacity(cfg.orders_max.min(1 << 20)),
            next_tag: 1,
            seq_addr: Some(cfg.seq_addr),
            data_home: cfg.data_home,
            redirected: None,
            tenure: (epoch, tenure),
            ended: None,
            resp: RespTrack::new(),
            rtt: Rtt::default(),
            gbn: None,
            resends_out: 0,
            resends_held: 0,
            rx_now: 0,
            facts: Facts::new(cfg.pending_facts_max),
            outbox: VecDeque::with_capacity(2 * cfg.retain_max),
            events: VecDeque::with_capacity(1024),
            stuck_at: None,
            counters: Counters::default(),
            cfg,
        })
    }

    /// The session id.
    pub fn id(&self) -> u32 {
        self.cfg.session
    }

    /// The configuration.
    pub fn config(&self) -> &SessionConfig {
        &self.cfg
    }

    /// Counters.
    pub fn counters(&self) -> Counters {
        let mut c = self.counters;
        c.facts_untracked = self.facts.overflow;
        c
    }

    /// The next `pkt_seq` to be sent.
    pub fn next_pkt_seq(&self) -> u32 {
        self.retain.end()
    }

    /// Packets retained now, and the oldest retained `pkt_seq`.
    pub fn retained(&self) -> (usize, u32) {
        (self.retain.len(), self.retain.head())
    }

    /// The sequencer address copy 1 goes to (`None` after `SeqChange{new_seq: none}`).
    pub fn seq_addr(&self) -> Option<SocketAddr> {
        self.seq_addr
    }

    /// The data home copy 2 goes to.
    pub fn data_home(&self) -> (u8, SocketAddr) {
        (self.data_home, self.cfg.data_boxes[self.data_home as usize])
    }

    /// The `DUR_QUORUM` watermark (highest durable step) and the `FINAL` watermark (highest
    /// final height), as received; two separate values.
    pub fn watermarks(&self) -> (Option<StepId>, Option<Height>) {
        (self.facts.durable_step(), self.facts.final_height())
    }

    /// Highest `resp_seq` below which every response arrived (or was given up).
    pub fn resp_contig(&self) -> u64 {
        self.resp.contig
    }

    /// What the session knows about `order`, while it tracks it.
    pub fn order(&self, order: OrderId) -> Option<&OrderView> {
        self.orders.get(&order).map(|o| &o.view)
    }

    /// Orders tracked now.
    pub fn orders_tracked(&self) -> usize {
        self.orders.len()
    }

    /// Stop tracking `order` (for an order left uncertain that the application settled by
    /// other means). Later records about it are dropped and counted.
    pub fn forget(&mut self, order: OrderId) {
        self.orders.remove(&order);
    }

    /// The next event, oldest first. Drain after every call.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// Build, tag, retain and queue one request packet (copy 1 and copy 2).
    pub fn submit(&mut self, now: u64, reqs: &[OrderReq]) -> Result<Submitted, SubmitError> {
        if reqs.is_empty() || reqs.len() > MAX_MSGS {
            return Err(SubmitError::BadCount);
        }
        let news = reqs
            .iter()
            .filter(|r| !matches!(r, OrderReq::Cancel { .. }))
            .count();
        for r in reqs {
            if let OrderReq::Gtc { qty: 0, .. } | OrderReq::Ioc { qty: 0, .. } = r {
                return Err(SubmitError::BadQty);
            }
        }
        if self.seq_addr.is_none() {
            return Err(SubmitError::NoSequencer);
        }
        if self.retain.end() == u32::MAX || self.next_tag.checked_add(news as u32).is_none() {
            return Err(SubmitError::Exhausted);
        }
        self.expire(now);
        if self.retain.is_full() {
            self.counters.retention_full += 1;
            return Err(SubmitError::RetentionFull);
        }
        if self.orders.len() + news > self.cfg.orders_max {
            return Err(SubmitError::OrdersFull);
        }
        let pkt_seq = self.retain.end();
        let mut msgs = [Msg {
            kind: MsgType::Cancel,
            side: Side::Buy,
            tick: 0,
            qty: 0,
            client_tag: 0,
        }; MAX_MSGS];
        let mut sub = Submitted {
            pkt_seq,
            count: reqs.len() as u8,
            orders: [0; MAX_MSGS],
        };
        for (i, r) in reqs.iter().enumerate() {
            let m = match *r {
                OrderReq::Gtc { side, tick, qty } | OrderReq::Ioc { side, tick, qty } => {
                    let tag = self.next_tag;
                    self.next_tag += 1;
                    let kind = if matches!(r, OrderReq::Gtc { .. }) {
                        MsgType::NewGtc
                    } else {
                        MsgType::NewIoc
                    };
                    self.orders.insert(
                        tag,
                        Order::new(
                            MsgRef {
                                pkt_seq,
                                msg_index: i as u8,
                            },
                            kind,
                            side,
                            tick,
                            qty,
                        ),
                    );
                    Msg {
                        kind,
                        side,
                        tick,
                        qty,
                        client_tag: tag,
                    }
                }
                OrderReq::Cancel { order } => Msg {
                    kind: MsgType::Cancel,
                    side: Side::Buy,
                    tick: 0,
                    qty: 0,
                    client_tag: order,
                },
            };
            msgs[i] = m;
            sub.orders[i] = m.client_tag;
        }
        let n = reqs.len();
        let cfg = &self.cfg;
        let slot = self.retain.push();
        let mut buf = [0u8; REQ_BUF];
        let len = build_request(
            &mut buf,
            &cfg.k_seq,
            cfg.book,
            cfg.session,
            pkt_seq,
            false,
            &msgs[..n],
        );
        slot.bytes = buf;
        slot.len = len as u8;
        slot.count = n as u8;
        slot.first_tx_ns = now;
        slot.last_tx_ns = now;
        for (i, m) in msgs[..n].iter().enumerate() {
            slot.kinds[i] = m.kind;
            slot.tags[i] = m.client_tag;
        }
        if self.resends_held > 0 {
            // Older packets wait for the resend window: the sequencer takes a session's
            // packets in pkt_seq order (07 §9.5), so this one would only draw a BAD_SEQ. It
            // waits behind them; copy 2 goes now.
            slot.pending = true;
            slot.held_first = true;
            self.resends_held += 1;
            slot.queued = [false, true];
        } else {
            slot.queued = [true, true];
            self.outbox.push_back((pkt_seq, PktCopy::Seq));
        }
        self.outbox.push_back((pkt_seq, PktCopy::Data));
        self.counters.packets += 1;
        self.counters.msgs += n as u64;
        Ok(sub)
    }

    /// The packets waiting to be sent, oldest first. After sending the first `n`, call
    /// [`consume_transmits`](Self::consume_transmits)`(n)`.
    pub fn transmits(&self) -> impl Iterator<Item = Transmit<'_>> + '_ {
        self.outbox.iter().map(move |&(pkt_seq, copy)| {
            let slot = self
                .retain
                .get(pkt_seq)
                .expect("a queued packet stays retained");
            let dest = match copy {
                PktCopy::Seq => self
                    .seq_addr
                    .expect("copy 1 is queued only with a sequencer"),
                PktCopy::Data => self.cfg.data_boxes[self.data_home as usize],
            };
            Transmit {
                dest,
                copy,
                pkt_seq,
                bytes: slot.bytes(),
            }
        })
    }

    /// Transmits waiting.
    pub fn transmits_len(&self) -> usize {
        self.outbox.len()
    }

    /// The first `n` transmits were sent.
    pub fn consume_transmits(&mut self, n: usize) {
        for _ in 0..n.min(self.outbox.len()) {
            let (pkt_seq, copy) = self.outbox.pop_front().expect("len checked");
            if let Some(s) = self.retain.get_mut(pkt_seq) {
                s.queued[copy as usize] = false;
            }
        }
    }

    /// Timers: retention expiry, resend of unanswered packets, `resp_seq` hole recovery.
    pub fn poll(&mut self, now: u64) {
        self.expire(now);
        // Resend copy 1 of packets still unanswered one timeout after their last send (07
        // §9.5: "Clients resend every packet that has no response"; the timeout: `Rtt`).
        let after = self.cfg.resend_after_ns;
        let rto = self.rtt.rto(&self.cfg);
        for p in self.retain.head()..self.retain.end() {
            let s = self.retain.get_mut(p).expect("in window");
            if now.saturating_sub(s.first_tx_ns) < after {
                break; // first sends are in pkt_seq order: no later packet is due
            }
            if s.in_flight && (s.fully_answered() || now.saturating_sub(s.last_tx_ns) >= rto) {
                // Answered (by any path) or timed out: no longer out.
                s.in_flight = false;
                self.resends_out -= 1;
            }
            let s = self.retain.get(p).expect("in window");
            if !s.fully_answered()
                && !s.pending
                && now.saturating_sub(s.last_tx_ns) >= rto
                && self.seq_addr.is_some()
            {
                if s.resends > 0 {
                    // Resent before and still no answer: the timeout was too short.
                    self.rtt.back_off(now, rto, self.cfg.resend_backoff_max);
                }
                self.resend(p, PktCopy::Seq, now);
            }
        }
        // Resends held back by the window go as it opens, lowest pkt_seq first.
        let mut p = self.retain.head();
        while self.resends_held > 0 && self.resends_out < self.cfg.resend_window {
            if p >= self.retain.end() {
                break;
            }
            if self.retain.get(p).is_some_and(|s| s.pending) {
                self.resend(p, PktCopy::Seq, now);
            }
            p += 1;
        }
        let mut lost = Vec::new();
        self.resp
            .give_up(now, self.cfg.gap_giveup_ns, &mut |a, b| lost.push((a, b)));
        self.report_lost(lost);
        if self.resp.next_attempt.is_some_and(|t| now >= t) {
            // A missing response may be any response echoing a retained packet: an answer, or
            // a later maker fill or cancel of an order it placed (the client cannot tell which
            // from the hole). A resend makes the sequencer resend every response of the packet
            // (07 §9.5 duplicate row). Retried with a doubling interval while holes stay open;
            // losses are rare on the real network, so the burst is too.
            self.resp.interval = self.resp.interval.saturating_mul(2);
            self.resp.next_attempt = Some(now + self.resp.interval);
            // Only packets not sent within the timeout: a hole left open by a sequencer that is
            // merely slow does not resend the same packets every interval.
            let rto = self.rtt.rto(&self.cfg);
            self.resend_where(0, now, |s, p| {
                (s.unanswered(p) || s.placed_open_orders(p))
                    && s.retain
                        .get(p)
                        .is_some_and(|x| now.saturating_sub(x.last_tx_ns) >= rto)
            });
        }
    }

    fn report_lost(&mut self, lost: Vec<(u64, u64)>) {
        for (first, last) in lost {
            self.counters.resp_lost = self.counters.resp_lost.saturating_add(last - first + 1);
            self.events.push_back(Event::ResponsesLost { first, last });
        }
    }

    /// Drop packets older than the retention time from the front of the ring.
    fn expire(&mut self, now: u64) {
        while let Some(s) = self.retain.front() {
            if now.saturating_sub(s.first_tx_ns) < self.cfg.retain_ns || s.queued != [false; 2] {
                break;
            }
            let s = *s;
            self.retain.pop_front();
            if s.in_flight {
                self.resends_out -= 1;
            }
            if s.pending {
                self.resends_held -= 1;
            }
            for i in 0..s.count as usize {
                let tag = s.tags[i];
                let msg = MsgRef {
                    pkt_seq: s.pkt_seq,
                    msg_index: i as u8,
                };
                if s.answered >> i & 1 == 0 {
                    self.counters.expired_unanswered += 1;
                    if let Some(o) = self.orders.get_mut(&tag) {
                        o.view.uncertain = true;
                    }
                    self.events.push_back(Event::Uncertain {
                        msg,
                        order: tag,
                        why: Uncertainty::Expired,
                    });
                }
                if s.kinds[i] != MsgType::Cancel {
                    if let Some(o) = self.orders.get_mut(&tag) {
                        o.slot_gone = true;
                    }
                    self.gc(tag);
                }
            }
        }
    }

    /// Forget `tag` once nothing more can be learned or repeated about it.
    fn gc(&mut self, tag: OrderId) {
        if let Some(o) = self.orders.get(&tag) {
            if o.slot_gone
                && o.done()
                && o.view.fills_not_durable == 0
                && o.view.fills_not_final == 0
            {
                self.orders.remove(&tag);
            }
        }
    }

    /// Take one received packet (from any source). Bad packets are dropped and counted.
    pub fn handle_packet(&mut self, now: u64, bytes: &[u8]) {
        self.rx_now = now;
        let v = match ResponseView::parse(bytes, &self.cfg.k_out, self.cfg.session) {
            Ok(v) => v,
            Err(e) => {
                let c = &mut self.counters;
                match e {
                    DropReason::Truncated => c.rx_truncated += 1,
                    DropReason::BadTag => c.rx_bad_tag += 1,
                    DropReason::WrongSession => c.rx_wrong_session += 1,
                    DropReason::UnknownType => c.rx_unknown_type += 1,
                    DropReason::Malformed => c.rx_malformed += 1,
                }
                return;
            }
        };
        if v.is_notice() {
            self.counters.rx_ok += 1;
            for r in v.records() {
                match r {
                    // Watermarks and the halt notice from control (NOTICE_RESP_SEQ).
                    Record::Durable { .. } | Record::Final { .. } | Record::Halted => {
                        self.on_record(&v, r, now)
                    }
                    _ => self.on_notice(r, now),
                }
            }
            return;
        }
        if v.echo_pkt_seq >= self.retain.end() {
            self.counters.rx_bad_echo += 1;
            return;
        }
        if self.resp.seen(v.resp_seq) {
            self.counters.rx_dup += 1;
            return;
        }
        let mut lost = Vec::new();
        let new_hole = self
            .resp
            .insert(v.resp_seq, now, &mut |a, b| lost.push((a, b)));
        self.report_lost(lost);
        if new_hole {
            self.counters.gaps += 1;
            let first = now + self.cfg.gap_resend_ns;
            self.resp.interval = self.cfg.gap_resend_ns;
            self.resp.next_attempt = Some(self.resp.next_attempt.map_or(first, |t| t.min(first)));
        }
        self.counters.rx_ok += 1;
        if v.resend {
            self.counters.rx_resent += 1;
        }
        for r in v.records() {
            self.on_record(&v, r, now);
        }
    }

    /// Mark message `i` of `pkt_seq` answered; false when the record contradicts the packet
    /// (index past its count, or another tag).
    fn mark_answered(&mut self, msg: MsgRef, tag: u32) -> bool {
        let tenure = self.tenure;
        match self.retain.get_mut(msg.pkt_seq) {
            Some(s) => {
                let i = msg.msg_index as usize;
                if i >= s.count as usize || s.tags[i] != tag {
                    return false;
                }
                if s.answered == 0 && s.resends == 0 {
                    // Karn's rule: only a packet sent once times the round trip (from its one
                    // send, which a window may have held back since it was built).
                    self.rtt.sample(self.rx_now.saturating_sub(s.last_tx_ns));
                }
                s.answered |= 1 << i;
                if s.in_flight {
                    s.in_flight = false;
                    self.resends_out -= 1;
                }
                if s.pending && s.fully_answered() {
                    (s.pending, s.held_first) = (false, false);
                    self.resends_held -= 1;
                }
                s.answered_in = tenure;
                true
            }
            None => true,
        }
    }

    fn emit(&mut self, msg: MsgRef, order: OrderId, kind: ExecKind, resent: bool) {
        self.events.push_back(Event::Exec(Exec {
            msg,
            order,
            kind,
            resent,
        }));
    }

    fn on_record(&mut self, v: &ResponseView, r: &Record, now: u64) {
        let resent = v.resend;
        let msg = MsgRef {
            pkt_seq: v.echo_pkt_seq,
            msg_index: r.msg_index(),
        };
        match *r {
            Record::Ack { client_tag, .. } => {
                self.on_order_record(msg, client_tag, resent, ExecKind::Ack)
            }
            Record::Fill {
                price,
                qty,
                leaves,
                step,
                client_tag,
                ..
            } => self.on_order_record(
                msg,
                client_tag,
                resent,
                ExecKind::Fill {
                    price,
                    qty,
                    leaves,
                    step,
                },
            ),
            Record::Out {
                qty, client_tag, ..
            } => self.on_order_record(msg, client_tag, resent, ExecKind::Out { qty }),
            Record::CancelAck { client_tag, .. } => {
                self.on_order_record(msg, client_tag, resent, ExecKind::CancelAck)
            }
            Record::Reject {
                msg_index: MSG_INDEX_NONE,
                code,
                detail,
                ..
            } => match code {
                RejectCode::BadSeq => self.on_bad_seq(detail, msg.pkt_seq, now),
                RejectCode::ResendGone => self.on_packet_uncertain(msg.pkt_seq),
                _ => self.on_packet_answer(msg.pkt_seq, resent, ExecKind::Reject { code, detail }),
            },
            Record::Reject {
                code,
                detail,
                client_tag,
                ..
            } => self.on_order_record(msg, client_tag, resent, ExecKind::Reject { code, detail }),
            Record::Busy => self.on_packet_answer(msg.pkt_seq, resent, ExecKind::Busy),
            Record::Halted => self.events.push_back(Event::Halted),
            Record::Durable { step, height } => {
                let mut out = Vec::new();
                self.facts.on_durable(step, height, &mut |f| out.push(f));
                self.apply_facts(out);
            }
            Record::Final { height, .. } => {
                let mut out = Vec::new();
                self.facts.on_final(height, &mut |f| out.push(f));
                self.apply_facts(out);
            }
            Record::SeqChange { .. } | Record::DataRedirect { .. } | Record::TenureEnd { .. } => {
                self.on_notice(r, now)
            }
        }
    }

    fn apply_facts(&mut self, facts: Vec<Fact>) {
        for f in facts {
            match f {
                Fact::Durable { tag, step } => {
                    if let Some(o) = self.orders.get_mut(&tag) {
                        o.view.fills_not_durable = o.view.fills_not_durable.saturating_sub(1);
                    }
                    self.events.push_back(Event::Durable { order: tag, step });
                }
                Fact::Final { tag, step, height } => {
                    if let Some(o) = self.orders.get_mut(&tag) {
                        o.view.fills_not_final = o.view.fills_not_final.saturating_sub(1);
                    }
                    self.events.push_back(Event::Final {
                        order: tag,
                        step,
                        height,
                    });
                    self.gc(tag);
                }
                Fact::Reverted { tag, step } => {
                    if let Some(o) = self.orders.get_mut(&tag) {
                        o.view.fills_not_durable = o.view.fills_not_durable.saturating_sub(1);
                        o.view.fills_not_final = o.view.fills_not_final.saturating_sub(1);
                        o.view.fills_reverted += 1;
                        o.revert(step);
                    }
                    self.counters.fills_reverted += 1;
                    self.events.push_back(Event::Reverted { order: tag, step });
                    self.gc(tag);
                }
            }
        }
    }

    /// A packet-level answer (`Busy`, or a `Reject` for the whole packet): every message of
    /// the packet that has no answer yet gets it.
    fn on_packet_answer(&mut self, pkt_seq: u32, resent: bool, kind: ExecKind) {
        let Some(s) = self.retain.get(pkt_seq).copied() else {
            self.counters.rec_unmatched += 1;
            return;
        };
        for i in 0..s.count as usize {
            let msg = MsgRef {
                pkt_seq,
                msg_index: i as u8,
            };
            self.on_order_record(msg, s.tags[i], resent, kind);
        }
    }

    /// `RESEND_GONE`: every unanswered message of the packet is uncertain.
    fn on_packet_uncertain(&mut self, pkt_seq: u32) {
        let Some(s) = self.retain.get_mut(pkt_seq) else {
            self.counters.rec_unmatched += 1;
            return;
        };
        let s0 = *s;
        s.answered = (1 << s.count) - 1;
        for i in 0..s0.count as usize {
            if s0.answered >> i & 1 == 0 {
                let tag = s0.tags[i];
                if let Some(o) = self.orders.get_mut(&tag) {
                    o.view.uncertain = true;
                }
                self.events.push_back(Event::Uncertain {
                    msg: MsgRef {
                        pkt_seq,
                        msg_index: i as u8,
                    },
                    order: tag,
                    why: Uncertainty::ResendGone,
                });
            }
        }
    }

    /// One record about one message and order: dedupe, update the order, report.
    fn on_order_record(&mut self, msg: MsgRef, tag: u32, resent: bool, kind: ExecKind) {
        let slot = self.retain.get(msg.pkt_seq);
        let is_cancel_msg = match slot {
            Some(s) => {
                let i = msg.msg_index as usize;
                if i >= s.count as usize || s.tags[i] != tag {
                    self.counters.rec_inconsistent += 1;
                    return;
                }
                s.kinds[i] == MsgType::Cancel
            }
            None => self.orders.get(&tag).is_none_or(|o| o.view.placed != msg),
        };
        let already_answered = slot.is_some_and(|s| s.answered >> msg.msg_index & 1 == 1);
        let Some(o) = self.orders.get_mut(&tag) else {
            self.counters.rec_unknown_order += 1;
            self.mark_answered(msg, tag);
            return;
        };
        let fresh = if is_cancel_msg {
            match kind {
                ExecKind::CancelAck => {
                    let f = !o.cancelled;
                    o.cancelled = true;
                    f
                }
                // A refused or shed Cancel changes nothing on the order; its only record is the
                // answer.
                ExecKind::Reject { .. } | ExecKind::Busy => !already_answered,
                // Ack, Fill and Out name the New that placed an order, never a Cancel.
                _ => {
                    self.counters.rec_inconsistent += 1;
                    return;
                }
            }
        } else {
            match kind {
                ExecKind::Ack => !std::mem::replace(&mut o.view.acked, true),
                ExecKind::Out { .. } => !std::mem::replace(&mut o.out, true),
                ExecKind::Reject { .. } => !std::mem::replace(&mut o.rejected, true),
                ExecKind::Busy => !std::mem::replace(&mut o.busy, true),
                ExecKind::CancelAck => {
                    // CancelAck names the Cancel message, never the New.
                    self.counters.rec_inconsistent += 1;
                    return;
                }
                ExecKind::Fill {
                    qty, leaves, step, ..
                } => {
                    let hi = leaves as u64 + qty as u64;
                    if qty == 0 || hi > o.view.qty as u64 {
                        self.counters.rec_inconsistent += 1;
                        return;
                    }
                    match o.take(leaves, hi as u32, step) {
                        Ok(()) => {
                            o.view.filled += qty;
                            o.view.last_fill_step =
                                Some(o.view.last_fill_step.map_or(step, |s| s.max(step)));
                            o.view.fills_not_durable += 1;
                            o.view.fills_not_final += 1;
                            true
                        }
                        Err(true) => false,
                        Err(false) => {
                            self.counters.rec_inconsistent += 1;
                            return;
                        }
                    }
                }
            }
        };
        if !fresh {
            self.counters.rec_dup += 1;
            self.mark_answered(msg, tag);
            return;
        }
        o.view.done = o.done();
        let _ = self.mark_answered(msg, tag);
        self.emit(msg, tag, kind, resent);
        if let ExecKind::Fill { step, .. } = kind {
            let mut out = Vec::new();
            if !self.facts.add_fill(tag, step, &mut |f| out.push(f)) {
                if let Some(o) = self.orders.get_mut(&tag) {
                    o.view.fills_not_durable = o.view.fills_not_durable.saturating_sub(1);
                    o.view.fills_not_final = o.view.fills_not_final.saturating_sub(1);
                }
            }
            self.apply_facts(out);
        }
        self.gc(tag);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn order(qty: u32) -> Order {
        let placed = MsgRef {
            pkt_seq: 1,
            msg_index: 0,
        };
        Order::new(placed, MsgType::NewGtc, Side::Buy, 1, qty)
    }

    #[test]
    fn fill_cover_catches_repeats_and_gives_back_a_reverted_fill() {
        let mut o = order(10);
        assert_eq!(o.take(7, 10, 5), Ok(())); // first fill of 3, leaves 7
        assert_eq!(o.take(2, 4, 9), Ok(())); // a later fill arriving early
        assert_eq!(o.take(7, 10, 5), Err(true)); // repeat
        assert_eq!(o.take(4, 7, 7), Ok(())); // the middle one
        assert_eq!(o.cover, vec![(2, 4, 9), (4, 7, 7), (7, 10, 5)]);
        assert_eq!(o.take(3, 4, 9), Err(true));
        assert_eq!(o.take(1, 3, 11), Err(false)); // overlaps partly: inconsistent
        assert_eq!(o.take(0, 2, 12), Ok(()));
        o.view.filled = 10;
        o.view.last_fill_step = Some(12);
        o.view.done = o.done();
        assert!(o.view.done);
        // 07 §9.6: the fill at step 12 and the one at 7 reverted. Their ranges are the order's
        // again: filled, the newest fill step and done follow, and the next tenure's fill of
        // the same range is taken, not counted a repeat.
        assert_eq!(o.revert(12), Some(2));
        assert_eq!(o.revert(7), Some(3));
        assert_eq!(o.revert(7), None, "one fill at step 7");
        assert_eq!(
            (o.view.filled, o.view.last_fill_step, o.view.done),
            (5, Some(9), false)
        );
        assert_eq!(o.take(4, 7, 40), Ok(()));
        assert_eq!(o.cover, vec![(2, 4, 9), (4, 7, 40), (7, 10, 5)]);
    }

    #[test]
    fn resp_track_gaps_and_giveup() {
        let mut t = RespTrack::new();
        let mut lost = Vec::new();
        assert!(!t.insert(1, 0, &mut |a, b| lost.push((a, b))));
        assert!(t.insert(3, 5, &mut |a, b| lost.push((a, b))));
        assert_eq!((t.contig, t.has_gap()), (1, true));
        assert!(t.seen(3) && !t.seen(2));
        assert!(!t.insert(2, 6, &mut |a, b| lost.push((a, b))));
        assert_eq!((t.contig, t.has_gap()), (3, false));
        assert!(t.insert(10, 7, &mut |a, b| lost.push((a, b))));
        assert!(t.insert(20, 50, &mut |a, b| lost.push((a, b))));
        // Only the hole opened at 7 is old enough at 60 with a give-up time of 53.
        t.give_up(60, 53, &mut |a, b| lost.push((a, b)));
        assert_eq!(lost, vec![(4, 9)]);
        assert_eq!(t.contig, 10);
        t.give_up(103, 53, &mut |a, b| lost.push((a, b)));
        assert_eq!(lost, vec![(4, 9), (11, 19)]);
        assert_eq!((t.contig, t.has_gap()), (20, false));
        // Far ahead: the window slides and the skipped range is reported.
        lost.clear();
        t.insert(20 + RESP_WINDOW + 5, 8, &mut |a, b| lost.push((a, b)));
        assert_eq!(lost, vec![(21, 25)]);
        assert!(t.seen(20 + RESP_WINDOW + 5));
        // A resp_seq near u64::MAX costs one window, not 2^64 steps.
        lost.clear();
        t.insert(u64::MAX - 1, 9, &mut |a, b| lost.push((a, b)));
        assert_eq!(
            lost,
            vec![
                (26, 20 + RESP_WINDOW + 4),
                (21 + RESP_WINDOW + 5, u64::MAX - 1 - RESP_WINDOW)
            ]
        );
    }
}
