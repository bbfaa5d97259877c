//! A lane (07 §4.1–§4.2, §4.11, §9.5; missing-chapters §3): owns its sessions and their
//! accounts. Per packet: tag check, per-session `pkt_seq` dedupe by the §9.5 table, parse,
//! per-account risk, one LaneSeq per message, lane-local answers, forwarding of valid
//! New/Cancel ops to the BBO core, the PacketRecord pre-encoded against the lane's own LaneDec
//! mirror (§3.6), and the full BLAKE3 of each payload in batches of REP_HASH_BATCH (§3.7).
//! Per step event: risk state and responses, in step order; the point reached is logged as
//! `fills_applied`.
//!
//! The same [`Lane::process`] runs live and in replay (INV-DET): live it decides SHED from the
//! deadline; in replay it reads the logged record and only checks that it reaches the same
//! numbering (07 §7.1). Replay skips the tag (the replica holds no `K_seq`, §7.3) and the
//! hashing (the data tier did it).
//!
//! What the lane never logs: packets the data tier would drop too (a length, count, flags or
//! reserved error, `pkt_seq` 0, another book, an unknown session, a bad tag). Their payload
//! never reaches the replicas, so logging them would stall every replica's join (07 §5.2);
//! and an answer that is not in the log would break INV-REP-11. They are dropped with a typed
//! [`LaneDrop`] and a counter.
//!
//! Hot path (one packet): no allocation (tables reserved at construction; the hash batch and
//! the response builder are fixed buffers), no lock, no syscall.

use crate::bbo::{Fwd, LaneEvent, Outcome};
use crate::book::{BookReject, Op, OpKind, Side};
use crate::config::{AccountCfg, EngineConfig};
use crate::resp::{as_resend, Gate, HotRing, RespBuilder, RespOut, RESEND_WINDOW, RESP_MAX_BYTES};
use std::collections::{HashMap, VecDeque};
use vyrn_wire::consts::{MAX_SESSIONS_PER_LANE, REP_HASH_BATCH};
use vyrn_wire::msg::client::{
    siphash128, MsgType, Record, RejectCode, ReqReject, Request, SipKey, MSG_INDEX_NONE,
    REQ_HDR_BYTES, REQ_MAX_LEN, REQ_MIN_LEN, REQ_MSG_BYTES, REQ_TAG_BYTES,
};
use vyrn_wire::records::{encode_lane_op, LaneOp, LaneState, PacketRecord, PKT_ENC_MAX, PKT_SHED};

use crate::hash::SeededState as FixedState;

pub use crate::book::{cookie, cookie_lane};

fn cookie_parts(c: u64) -> (u16, u32, u8) {
    ((c >> 40) as u16, (c >> 8) as u32, c as u8)
}

/// Why a packet was dropped unlogged and unanswered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LaneDrop {
    /// Shorter than one message or longer than ten.
    BadLen,
    /// No session with this id on this lane.
    UnknownSession,
    /// `tag_seq` does not verify under the session's `K_seq`.
    BadTag,
    /// An authenticated packet the data tier drops too: its structure (count, length, flags,
    /// reserved) or `pkt_seq` 0.
    Malformed(ReqReject),
    /// Another book.
    BadBook,
}

/// What the lane did with a packet it logged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// New packet: its messages were numbered and answered or forwarded.
    New,
    /// New packet shed whole by deadline admission (SHED, answered `Busy`).
    Shed,
    /// `pkt_seq ≤ last`: not executed again; its held responses resent (07 §9.5).
    Duplicate,
    /// `pkt_seq > last + 1`: `Reject BAD_SEQ` with the expected value (07 §9.5).
    Gap,
}

/// A replayed record the lane does not reach the same way: the log and the engine disagree
/// (INV-DET), a divergence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LaneReplayError {
    /// The record's payload is not a packet this lane could have logged.
    Unloggable(LaneDrop),
    /// The record and its payload name different sessions or pkt_seqs.
    PayloadMismatch,
    /// The record's LaneSeqs, count or SHED bit differ from what the lane computes.
    Numbering {
        /// Logged (first_lane_seq, count, shed).
        logged: (u64, u8, bool),
        /// Computed.
        computed: (u64, u8, bool),
    },
}

/// Where a lane's output goes.
pub trait LaneSink {
    /// The packet's record (live only): the logical record, its pre-encoded O-part bytes
    /// (§3.6, for `R_pkt[l]`), and the payload (copy 1, for tests and tools).
    fn record(&mut self, rec: &PacketRecord, enc: &[u8], payload: &[u8]);
    /// A full hash of a logged packet (live only), in record order (§3.7).
    fn hash(&mut self, lane: u8, first_lane_seq: u64, full: &[u8; 32]);
    /// An op for the BBO core.
    fn forward(&mut self, f: &Fwd);
    /// A response, with its gate.
    fn respond(&mut self, r: &RespOut<'_>);
}

/// Lane counters (every drop reason, reject code and outcome has its own).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct LaneCounters {
    /// Packets offered.
    pub packets: u64,
    /// Packets logged.
    pub logged: u64,
    /// Messages numbered.
    pub msgs: u64,
    /// Drops: BadLen.
    pub drop_bad_len: u64,
    /// Drops: unknown session.
    pub drop_unknown_session: u64,
    /// Drops: bad tag.
    pub drop_bad_tag: u64,
    /// Drops: malformed structure.
    pub drop_malformed: u64,
    /// Drops: another book.
    pub drop_bad_book: u64,
    /// Duplicate packets (resends served).
    pub duplicates: u64,
    /// Gap packets (`BAD_SEQ`).
    pub gaps: u64,
    /// Packets shed whole.
    pub shed_packets: u64,
    /// Ops forwarded to the BBO core.
    pub forwarded: u64,
    /// Rejects by code (index = code).
    pub rejects: [u64; 16],
    /// Responses sent (resends excluded).
    pub responses: u64,
    /// Responses resent.
    pub resent: u64,
    /// Duplicates whose responses had left the hot ring (`RESEND_GONE`).
    pub resend_gone: u64,
    /// Events applied.
    pub events: u64,
    /// Events naming an order or session this lane does not hold (never expected).
    pub orphan_events: u64,
    /// Hash batches computed.
    pub hash_batches: u64,
    /// Records a seal listed unavailable, run without their payload (07 §9.4;
    /// [`Lane::exclude_packet`]).
    pub excluded: u64,
}

#[derive(Debug, Clone, Copy)]
struct Sess {
    session: u32,
    acct: u32,
    k_seq: SipKey,
    k_out: SipKey,
    tx: u8,
    last: u32,
    next_resp: u64,
}

/// Per-account risk state (missing-chapters §3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Acct {
    /// Limits.
    pub cfg: AccountCfg,
    /// Signed position (buys +, sells −).
    pub position: i64,
    /// Open buy quantity of working orders.
    pub open_buy: u64,
    /// Open sell quantity of working orders.
    pub open_sell: u64,
    /// Working orders.
    pub open_orders: u32,
}

/// An op forwarded and not yet stepped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InFlight {
    /// LaneSeq.
    pub lane_seq: u64,
    /// Slot.
    pub slot: u16,
    /// Packet.
    pub pkt_seq: u32,
    /// Message index.
    pub msg_index: u8,
    /// Tag.
    pub client_tag: u32,
    /// New or Cancel.
    pub kind: OpKind,
    /// Side (a New's; Buy for a Cancel).
    pub side: Side,
    /// Quantity (a New's; 0 for a Cancel).
    pub qty: u32,
}

const PEND_MAX: usize = 8;

/// The in-flight queue's starting capacity (ops forwarded and not yet Done).
const INFLIGHT_START: usize = 1 << 10;

#[derive(Debug)]
struct Pending {
    slot: u16,
    pkt_seq: u32,
    gate: Gate,
    b: RespBuilder,
}

#[derive(Debug)]
struct HashBatch {
    buf: Box<[[u8; REQ_MAX_LEN - REQ_TAG_BYTES]; REP_HASH_BATCH]>,
    len: [u8; REP_HASH_BATCH],
    lane_seq: [u64; REP_HASH_BATCH],
    n: usize,
}

/// How [`Lane::process`] runs.
#[derive(Debug, Clone, Copy)]
pub enum Mode<'a> {
    /// Live at time `now`.
    Live {
        /// Now, ns.
        now: u64,
    },
    /// Replaying this logged record.
    Replay(&'a PacketRecord),
}

/// One lane.
#[derive(Debug)]
pub struct Lane {
    id: u8,
    book: u16,
    sessions: Vec<Option<Sess>>,
    by_session: HashMap<u32, u16, FixedState>,
    accts: Vec<Acct>,
    inflight: VecDeque<InFlight>,
    next_lane_seq: u64,
    applied: u64,
    enc: LaneState,
    enc_next: Box<[u32]>,
    halted: Option<u64>,
    sealed: bool,
    deadline: Option<u64>,
    hot: HotRing,
    rb: RespBuilder,
    resend_buf: Box<[u8; RESP_MAX_BYTES]>,
    /// Pending responses, built in place: `pend_order` is a permutation of `pend`'s slots,
    /// `[..n_pend]` the ones in use oldest first, `[n_pend..]` the free ones. No response is
    /// moved or zeroed.
    pend: Box<[Pending; PEND_MAX]>,
    pend_order: [u8; PEND_MAX],
    n_pend: usize,
    /// Tag responses under `K_out` (live); a replay lane leaves the tag to whoever sends
    /// (07 §7.3: a replay lane does no TX work).
    tag_out: bool,
    hashes: HashBatch,
    counters: LaneCounters,
}

impl Lane {
    /// Replay lane `id` of `cfg` (07 §7.1): as [`Lane::new`], but its responses are not
    /// tagged — 16 zero bytes stand in the tag's place, in what it answers and in its hot
    /// ring; a sender tags them under `K_out` ([`crate::resp::tag`], [`crate::resp::as_resend`]
    /// as a live lane's resends do). 07 §7.3 budgets a replay lane without TX work, and §8.5
    /// stores replay's responses with no tag.
    pub fn for_replay(cfg: &EngineConfig, id: u8) -> Self {
        let mut l = Lane::new(cfg, id);
        l.tag_out = false;
        l
    }

    /// Lane `id` of `cfg`: LaneSeqs from 1, fills_applied 0.
    pub fn new(cfg: &EngineConfig, id: u8) -> Self {
        let mut sessions = vec![None; MAX_SESSIONS_PER_LANE];
        let mut by_session = HashMap::with_hasher(FixedState::default());
        let mut accts: Vec<Acct> = Vec::new();
        let mut acct_ix: HashMap<u32, u32> = HashMap::new();
        let mut mine: Vec<_> = cfg.sessions.iter().filter(|s| s.lane == id).collect();
        mine.sort_by_key(|s| s.account);
        for s in &mine {
            let ix = *acct_ix.entry(s.account).or_insert_with(|| {
                let a = cfg
                    .accounts
                    .iter()
                    .find(|a| a.account == s.account)
                    .copied()
                    .unwrap_or(AccountCfg {
                        account: s.account,
                        max_order_qty: 0,
                        max_open_orders: 0,
                        max_exposure: 0,
                    });
                accts.push(Acct {
                    cfg: a,
                    position: 0,
                    open_buy: 0,
                    open_sell: 0,
                    open_orders: 0,
                });
                (accts.len() - 1) as u32
            });
            sessions[s.slot as usize] = Some(Sess {
                session: s.session,
                acct: ix,
                k_seq: s.k_seq,
                k_out: s.k_out,
                tx: s.tx,
                last: 0,
                next_resp: 1,
            });
            by_session.insert(s.session, s.slot);
        }
        let pend = Box::new(std::array::from_fn(|_| Pending {
            slot: 0,
            pkt_seq: 0,
            gate: Gate::LaneCut {
                lane: id,
                lane_seq: 0,
            },
            b: RespBuilder::default(),
        }));
        Lane {
            id,
            book: cfg.book,
            sessions,
            by_session,
            accts,
            // Ops in flight are few (forwarded, not yet Done): a queue sized to
            // `lane_max_orders` swept 512 KiB per lane and missed the cache on its writes (the
            // engine's other queues, `home::Tiles::prefault`); a deeper one grows once.
            inflight: VecDeque::with_capacity(cfg.lane_max_orders.min(INFLIGHT_START)),
            next_lane_seq: 1,
            applied: 0,
            enc: LaneState {
                next_lane_seq: 1,
                prev_rx_ts: 0,
                prev_fills_applied: 0,
            },
            enc_next: vec![1u32; MAX_SESSIONS_PER_LANE].into_boxed_slice(),
            halted: None,
            sealed: false,
            deadline: cfg.lane_deadline_ns,
            hot: HotRing::new(
                cfg.hot_ring_bytes,
                &mine.iter().map(|s| s.slot).collect::<Vec<_>>(),
            ),
            rb: RespBuilder::default(),
            resend_buf: Box::new([0; RESP_MAX_BYTES]),
            pend,
            pend_order: std::array::from_fn(|i| i as u8),
            n_pend: 0,
            tag_out: true,
            hashes: HashBatch {
                buf: Box::new([[0; REQ_MAX_LEN - REQ_TAG_BYTES]; REP_HASH_BATCH]),
                len: [0; REP_HASH_BATCH],
                lane_seq: [0; REP_HASH_BATCH],
                n: 0,
            },
            counters: LaneCounters::default(),
        }
    }

    /// Touch every table the lane preallocated, so the hot path takes no page fault (startup
    /// work of a real box, 06: memory is faulted in before the lane goes live). Changes no
    /// state.
    pub fn prefault(&mut self) {
        self.hot.prefault();
        let cap = self.inflight.capacity() - self.inflight.len();
        for _ in 0..cap {
            self.inflight.push_back(InFlight {
                lane_seq: 0,
                slot: 0,
                pkt_seq: 0,
                msg_index: 0,
                client_tag: 0,
                kind: OpKind::Cancel,
                side: Side::Buy,
                qty: 0,
            });
        }
        let keep = self.inflight.len() - cap;
        self.inflight.truncate(keep);
    }

    /// Lane id.
    pub fn id(&self) -> u8 {
        self.id
    }

    /// The lane counter the cut core reads (07 §4.2 step (2)): the last LaneSeq assigned.
    pub fn published(&self) -> u64 {
        self.next_lane_seq - 1
    }

    /// Where this lane's records go on in a new tenure (07 §9.4–§9.5): its LaneDec mirror as
    /// TenureStart's `LaneBase` — the next LaneSeq, the last `rx_ts` and `fills_applied` it
    /// encoded against.
    pub fn tenure_base(&self) -> vyrn_wire::records::LaneBase {
        vyrn_wire::records::LaneBase {
            next_lane_seq: self.enc.next_lane_seq,
            rx_ts_base: self.enc.prev_rx_ts,
            fills_applied_base: self.enc.prev_fills_applied,
        }
    }

    /// This lane's sessions as the SessionBinds a new tenure starts with (07 §3.5): each bound
    /// slot at the `next_pkt_seq` its mirror encodes against, ascending by slot.
    pub fn session_binds(&self) -> impl Iterator<Item = vyrn_wire::records::SessionBind> + '_ {
        self.sessions
            .iter()
            .enumerate()
            .filter_map(move |(slot, s)| {
                s.as_ref().map(|s| vyrn_wire::records::SessionBind {
                    lane: self.id,
                    slot: slot as u16,
                    session: s.session,
                    next_pkt_seq: self.enc_next[slot],
                })
            })
    }

    /// A replay lane made live (07 §9.5, promotion): its responses, resends from the replayed
    /// hot ring included, are tagged under each session's `K_out` from now on.
    pub fn go_live(&mut self) {
        self.tag_out = true;
    }

    /// The last step whose events this lane applied (`fills_applied`).
    pub fn applied(&self) -> u64 {
        self.applied
    }

    /// Counters.
    pub fn counters(&self) -> &LaneCounters {
        &self.counters
    }

    /// The Control(Halt) step in force, if the lane knows of one.
    pub fn halted(&self) -> Option<u64> {
        self.halted
    }

    /// Ops forwarded and not yet stepped, oldest first.
    pub fn inflight(&self) -> impl Iterator<Item = &InFlight> {
        self.inflight.iter()
    }

    /// Live: one received packet at time `now`.
    pub fn on_packet(
        &mut self,
        now: u64,
        rx_ts: u64,
        bytes: &[u8],
        sink: &mut impl LaneSink,
    ) -> Result<Verdict, LaneDrop> {
        self.counters.packets += 1;
        match self.process(Mode::Live { now }, rx_ts, bytes, sink) {
            Ok(v) => Ok(v),
            Err(LaneReplayError::Unloggable(d)) => Err(d),
            // Live never compares against a log.
            Err(_) => Err(LaneDrop::BadLen),
        }
    }

    /// Replay: one logged record with its payload (07 §7.1). The caller has applied every
    /// event of steps ≤ `rec.fills_applied` first (dependency 1).
    pub fn replay_packet(
        &mut self,
        rec: &PacketRecord,
        payload: &[u8],
        sink: &mut impl LaneSink,
    ) -> Result<Verdict, LaneReplayError> {
        self.counters.packets += 1;
        self.process(Mode::Replay(rec), rec.rx_ts, payload, sink)
    }

    /// Replay: a logged record whose packet a final seal listed unavailable (07 §9.3, §9.4):
    /// no box held its payload, so the final log never executes its messages (§9.6 case d).
    /// The record still takes its logged LaneSeqs (the cut and every later record count on
    /// them) and, new in its session, moves `last(session)` to its `pkt_seq` (the next tenure's
    /// resend dedupe, §9.5, and the prefix's later packets of the session number as logged). It
    /// forwards no op: a step whose source is one of its LaneSeqs runs as nothing
    /// ([`crate::bbo::Bbo::replay`] once excluding). Its answer in the hot ring is one
    /// packet-level `Reject EXCLUDED`, so a resend to the promoted sequencer learns what became of
    /// it. The caller has applied every event of steps ≤ `rec.fills_applied` first.
    pub fn exclude_packet(
        &mut self,
        rec: &PacketRecord,
        sink: &mut impl LaneSink,
    ) -> Result<Verdict, LaneReplayError> {
        self.counters.packets += 1;
        let Some(&slot) = self.by_session.get(&rec.session) else {
            return Err(self.drop(LaneDrop::UnknownSession));
        };
        let Some(sess) = self.sessions[slot as usize] else {
            return Err(self.drop(LaneDrop::UnknownSession));
        };
        let first = self.next_lane_seq;
        let shed = rec.flags & PKT_SHED != 0;
        if rec.first_lane_seq != first || rec.count == 0 {
            return Err(LaneReplayError::Numbering {
                logged: (rec.first_lane_seq, rec.count, shed),
                computed: (first, rec.count, shed),
            });
        }
        let pkt_seq = rec.pkt_seq;
        let verdict = if pkt_seq <= sess.last {
            Verdict::Duplicate
        } else if pkt_seq > sess.last + 1 {
            Verdict::Gap
        } else if shed {
            Verdict::Shed
        } else {
            Verdict::New
        };
        // A packet-level answer takes one LaneSeq (as `process` numbers it).
        if matches!(verdict, Verdict::Duplicate | Verdict::Gap) && rec.count != 1 {
            return Err(LaneReplayError::Numbering {
                logged: (rec.first_lane_seq, rec.count, shed),
                computed: (first, 1, shed),
            });
        }
        if matches!(verdict, Verdict::New | Verdict::Shed) {
            if let Some(s) = self.sessions[slot as usize].as_mut() {
                s.last = pkt_seq;
            }
        }
        self.next_lane_seq += rec.count as u64;
        let last_seq = first + rec.count as u64 - 1;
        self.counters.logged += 1;
        self.counters.msgs += rec.count as u64;
        self.counters.excluded += 1;
        // The LaneDec mirror (snapshot section 5) takes the record as logged.
        let mut enc = [0u8; PKT_ENC_MAX];
        encode_lane_op(
            &mut self.enc,
            &mut self.enc_next,
            &LaneOp::Pkt {
                slot,
                count: rec.count,
                shed,
                pkt_seq,
                rx_ts: rec.rx_ts,
                first_lane_seq: first,
                fills_applied: self.applied,
            },
            &mut enc,
        );
        let gate = Gate::LaneCut {
            lane: self.id,
            lane_seq: last_seq,
        };
        self.rb.start(rec.session, pkt_seq);
        self.reject(MSG_INDEX_NONE, RejectCode::Excluded, 0, 0);
        self.send_rb(slot, pkt_seq, gate, sink);
        Ok(verdict)
    }

    fn drop(&mut self, d: LaneDrop) -> LaneReplayError {
        let c = &mut self.counters;
        match d {
            LaneDrop::BadLen => c.drop_bad_len += 1,
            LaneDrop::UnknownSession => c.drop_unknown_session += 1,
            LaneDrop::BadTag => c.drop_bad_tag += 1,
            LaneDrop::Malformed(_) => c.drop_malformed += 1,
            LaneDrop::BadBook => c.drop_bad_book += 1,
        }
        LaneReplayError::Unloggable(d)
    }

    /// The one packet path, live and replay.
    pub fn process(
        &mut self,
        mode: Mode<'_>,
        rx_ts: u64,
        bytes: &[u8],
        sink: &mut impl LaneSink,
    ) -> Result<Verdict, LaneReplayError> {
        let len = bytes.len();
        if !(REQ_MIN_LEN..=REQ_MAX_LEN).contains(&len) {
            return Err(self.drop(LaneDrop::BadLen));
        }
        let Some(session) = vyrn_wire::msg::PktKey::peek_session(bytes) else {
            return Err(self.drop(LaneDrop::BadLen));
        };
        let Some(&slot) = self.by_session.get(&session) else {
            return Err(self.drop(LaneDrop::UnknownSession));
        };
        let Some(sess) = self.sessions[slot as usize] else {
            return Err(self.drop(LaneDrop::UnknownSession));
        };
        if let Mode::Live { .. } = mode {
            // Constant-time compare of the 16-byte tag.
            let tag = siphash128(&sess.k_seq, &bytes[..len - REQ_TAG_BYTES]);
            let got = &bytes[len - REQ_TAG_BYTES..];
            if tag.iter().zip(got).fold(0u8, |a, (x, y)| a | (x ^ y)) != 0 {
                return Err(self.drop(LaneDrop::BadTag));
            }
        }
        let req = match Request::parse(bytes) {
            Ok(r) => r,
            Err(e) => return Err(self.drop(LaneDrop::Malformed(e))),
        };
        if req.book() != self.book {
            return Err(self.drop(LaneDrop::BadBook));
        }
        let pkt_seq = req.pkt_seq();
        if let Mode::Replay(rec) = mode {
            if rec.session != session || rec.pkt_seq != pkt_seq {
                return Err(LaneReplayError::PayloadMismatch);
            }
        }
        // 07 §9.5 resend dedupe table.
        let verdict = if pkt_seq <= sess.last {
            Verdict::Duplicate
        } else if pkt_seq > sess.last + 1 {
            Verdict::Gap
        } else {
            let shed = match mode {
                Mode::Live { now } => self.deadline.is_some_and(|d| now.saturating_sub(rx_ts) > d),
                Mode::Replay(rec) => rec.flags & PKT_SHED != 0,
            };
            if shed {
                Verdict::Shed
            } else {
                Verdict::New
            }
        };
        let count = match verdict {
            Verdict::New | Verdict::Shed => req.count() as u8,
            // A packet-level answer takes one LaneSeq, so LaneCut gates it like any other
            // (INV-REP-11; `docs/engine.md`).
            Verdict::Duplicate | Verdict::Gap => 1,
        };
        let shed = verdict == Verdict::Shed;
        let first = self.next_lane_seq;
        if let Mode::Replay(rec) = mode {
            let logged = (rec.first_lane_seq, rec.count, rec.flags & PKT_SHED != 0);
            if logged != (first, count, shed) {
                return Err(LaneReplayError::Numbering {
                    logged,
                    computed: (first, count, shed),
                });
            }
        }
        self.next_lane_seq += count as u64;
        let last_seq = first + count as u64 - 1;
        self.counters.logged += 1;
        self.counters.msgs += count as u64;
        // 07 §3.6: the record, pre-encoded against the lane's LaneDec mirror (both modes keep
        // the mirror: it is snapshot section 5).
        let rec = PacketRecord {
            lane: self.id,
            count,
            flags: if shed { PKT_SHED } else { 0 },
            session,
            slot,
            pkt_seq,
            rx_ts,
            first_lane_seq: first,
            fills_applied: self.applied,
        };
        let mut enc = [0u8; PKT_ENC_MAX];
        let n = encode_lane_op(
            &mut self.enc,
            &mut self.enc_next,
            &LaneOp::Pkt {
                slot,
                count,
                shed,
                pkt_seq,
                rx_ts,
                first_lane_seq: first,
                fills_applied: self.applied,
            },
            &mut enc,
        );
        if let Mode::Live { .. } = mode {
            sink.record(&rec, &enc[..n], bytes);
            self.hash_push(first, req.signed_part(), sink);
        }
        let gate = Gate::LaneCut {
            lane: self.id,
            lane_seq: last_seq,
        };
        match verdict {
            Verdict::Duplicate => {
                self.counters.duplicates += 1;
                self.resend(slot, &sess, pkt_seq, first, sink);
                return Ok(verdict);
            }
            Verdict::Gap => {
                self.counters.gaps += 1;
                self.rb.start(session, pkt_seq);
                self.reject(MSG_INDEX_NONE, RejectCode::BadSeq, sess.last as u64 + 1, 0);
                self.send_rb(slot, pkt_seq, gate, sink);
                return Ok(verdict);
            }
            Verdict::Shed => {
                self.counters.shed_packets += 1;
                if let Some(s) = self.sessions[slot as usize].as_mut() {
                    s.last = pkt_seq;
                }
                self.rb.start(session, pkt_seq);
                self.rb.push(&Record::Busy);
                self.send_rb(slot, pkt_seq, gate, sink);
                return Ok(verdict);
            }
            Verdict::New => {}
        }
        if let Some(s) = self.sessions[slot as usize].as_mut() {
            s.last = pkt_seq;
        }
        self.rb.start(session, pkt_seq);
        for i in 0..count as usize {
            let lane_seq = first + i as u64;
            let off = REQ_HDR_BYTES + REQ_MSG_BYTES * i;
            let mb = &bytes[off..off + REQ_MSG_BYTES];
            let client_tag = u32::from_le_bytes([mb[12], mb[13], mb[14], mb[15]]);
            let msg = match vyrn_wire::msg::client::Msg::parse(mb) {
                Ok(m) => m,
                Err(e) => {
                    self.reject(i as u8, RejectCode::BadMsg, e.detail(), client_tag);
                    continue;
                }
            };
            if let Some(h) = self.halted {
                self.reject(i as u8, RejectCode::BookHalted, h, client_tag);
                continue;
            }
            if self.sealed {
                self.reject(i as u8, RejectCode::BookHalted, 0, client_tag);
                continue;
            }
            let side = match msg.side {
                vyrn_wire::msg::client::Side::Buy => Side::Buy,
                vyrn_wire::msg::client::Side::Sell => Side::Sell,
            };
            let kind = match msg.kind {
                MsgType::NewGtc => OpKind::NewGtc,
                MsgType::NewIoc => OpKind::NewIoc,
                MsgType::Cancel => OpKind::Cancel,
            };
            let a = &self.accts[sess.acct as usize];
            if kind != OpKind::Cancel {
                // Risk (missing-chapters §3), in a fixed order so the first failing limit is
                // the one reported. Duplicate tags and unknown cancels are the book's to
                // refuse (it holds the orders; the lane keeps no per-order map).
                if msg.qty > a.cfg.max_order_qty {
                    let d = a.cfg.max_order_qty as u64;
                    self.reject(i as u8, RejectCode::RiskQty, d, client_tag);
                    continue;
                }
                if a.open_orders >= a.cfg.max_open_orders {
                    let d = a.cfg.max_open_orders as u64;
                    self.reject(i as u8, RejectCode::RiskOpen, d, client_tag);
                    continue;
                }
                let exposure = match side {
                    Side::Buy => a.position as i128 + a.open_buy as i128 + msg.qty as i128,
                    Side::Sell => -(a.position as i128) + a.open_sell as i128 + msg.qty as i128,
                };
                if exposure > a.cfg.max_exposure as i128 {
                    let d = a.cfg.max_exposure;
                    self.reject(i as u8, RejectCode::RiskExposure, d, client_tag);
                    continue;
                }
                let a = &mut self.accts[sess.acct as usize];
                a.open_orders += 1;
                match side {
                    Side::Buy => a.open_buy += msg.qty as u64,
                    Side::Sell => a.open_sell += msg.qty as u64,
                }
                self.rb.push(&Record::Ack {
                    msg_index: i as u8,
                    client_tag,
                });
            }
            let qty = if kind == OpKind::Cancel { 0 } else { msg.qty };
            self.inflight.push_back(InFlight {
                lane_seq,
                slot,
                pkt_seq,
                msg_index: i as u8,
                client_tag,
                kind,
                side,
                qty,
            });
            self.counters.forwarded += 1;
            sink.forward(&Fwd {
                lane: self.id,
                lane_seq,
                rx_ts,
                op: Op {
                    kind,
                    session,
                    account: self.accts[sess.acct as usize].cfg.account,
                    client_tag,
                    side,
                    tick: if kind == OpKind::Cancel { 0 } else { msg.tick },
                    qty,
                    cookie: cookie(self.id, slot, pkt_seq, i as u8),
                },
            });
        }
        if !self.rb.is_empty() {
            self.send_rb(slot, pkt_seq, gate, sink);
        }
        Ok(verdict)
    }

    fn reject(&mut self, msg_index: u8, code: RejectCode, detail: u64, client_tag: u32) {
        self.counters.rejects[(code as usize) & 15] += 1;
        self.rb.push(&Record::Reject {
            msg_index,
            code,
            detail,
            client_tag,
        });
    }

    fn send_rb(&mut self, slot: u16, pkt_seq: u32, gate: Gate, sink: &mut impl LaneSink) {
        let Some(s) = self.sessions[slot as usize].as_mut() else {
            return;
        };
        let resp_seq = s.next_resp;
        s.next_resp += 1;
        let (session, tx) = (s.session, s.tx);
        let bytes = self.rb.finish(resp_seq, self.tag_out.then_some(&s.k_out));
        self.hot.push(slot, pkt_seq, bytes);
        self.counters.responses += 1;
        sink.respond(&RespOut {
            session,
            echo_pkt_seq: pkt_seq,
            resp_seq,
            resend: false,
            gate,
            tx,
            bytes,
        });
    }

    fn resend(
        &mut self,
        slot: u16,
        sess: &Sess,
        pkt_seq: u32,
        lane_seq: u64,
        sink: &mut impl LaneSink,
    ) {
        let gate = Gate::LaneCut {
            lane: self.id,
            lane_seq,
        };
        let (hot, buf, counters) = (&self.hot, &mut self.resend_buf, &mut self.counters);
        let k_out = self.tag_out.then_some(&sess.k_out);
        let found = hot.find(slot, pkt_seq, |stored| {
            let b = as_resend(stored, k_out, buf);
            let resp_seq = u64::from_le_bytes(b[8..16].try_into().unwrap_or([0; 8]));
            counters.resent += 1;
            sink.respond(&RespOut {
                session: sess.session,
                echo_pkt_seq: pkt_seq,
                resp_seq,
                resend: true,
                gate,
                tx: sess.tx,
                bytes: b,
            });
        });
        if found == 0 && self.hot.gone(slot, pkt_seq) {
            // 07 §8.5: the recovery service may still hold it; the detail says from where
            // this lane can still resend.
            self.counters.resend_gone += 1;
            self.rb.start(sess.session, pkt_seq);
            let window = sess.last.saturating_sub(RESEND_WINDOW as u32 - 1);
            let floor = self.hot.floor(slot).max(window) as u64;
            self.reject(MSG_INDEX_NONE, RejectCode::ResendGone, floor, 0);
            self.send_rb(slot, pkt_seq, gate, sink);
        }
    }

    fn hash_push(&mut self, lane_seq: u64, signed: &[u8], sink: &mut impl LaneSink) {
        let h = &mut self.hashes;
        let k = h.n;
        h.buf[k][..signed.len()].copy_from_slice(signed);
        h.buf[k][3] = 0; // the full hash reads flags as 0 (missing-chapters §2)
        h.len[k] = signed.len() as u8;
        h.lane_seq[k] = lane_seq;
        h.n += 1;
        if h.n == REP_HASH_BATCH {
            self.flush_hashes(sink);
        }
    }

    /// Hash the packets batched so far (07 §3.7). Live callers flush when idle, so a record's
    /// hash never waits long (INV-REP-8 bounds it at the stream core).
    pub fn flush_hashes(&mut self, sink: &mut impl LaneSink) {
        let h = &mut self.hashes;
        if h.n == 0 {
            return;
        }
        for k in 0..h.n {
            let full = blake3::hash(&h.buf[k][..h.len[k] as usize]);
            sink.hash(self.id, h.lane_seq[k], full.as_bytes());
        }
        h.n = 0;
        self.counters.hash_batches += 1;
    }

    /// Apply one BBO event (in step order; 07 §3.6 `fills_applied`, §7.1 dependency 1).
    pub fn on_event(&mut self, ev: &LaneEvent, sink: &mut impl LaneSink) {
        self.counters.events += 1;
        let gate = Gate::Step {
            step: ev.step,
            need_a: ev.need_a,
            need_b: ev.need_b,
        };
        match ev.what {
            Outcome::End => {
                self.flush_pending(sink);
                self.applied = ev.step;
                return;
            }
            Outcome::Halt | Outcome::Sealed => {
                if ev.what == Outcome::Halt {
                    self.halted = Some(ev.step);
                } else {
                    self.sealed = true;
                }
                // The unsolicited notice to every session that has traded (07 §6.8).
                for slot in 0..self.sessions.len() {
                    let Some(s) = self.sessions[slot] else {
                        continue;
                    };
                    if s.last == 0 {
                        continue;
                    }
                    self.rb.start(s.session, 0);
                    self.rb.push(&Record::Halted);
                    self.send_rb(slot as u16, 0, gate, sink);
                }
                return;
            }
            Outcome::Resume => {
                self.halted = None;
                return;
            }
            Outcome::Done => {
                if self.inflight.pop_front().is_none() {
                    self.counters.orphan_events += 1;
                }
                return;
            }
            _ => {}
        }
        let (slot, pkt_seq, msg_index) = cookie_parts(ev.cookie);
        let Some(acct) = self
            .sessions
            .get(slot as usize)
            .and_then(|s| s.map(|s| s.acct))
        else {
            self.counters.orphan_events += 1;
            return;
        };
        let front = self.inflight.front().copied();
        match ev.what {
            Outcome::Fill {
                price, qty, leaves, ..
            } => {
                let a = &mut self.accts[acct as usize];
                match ev.side {
                    Side::Buy => {
                        a.position += qty as i64;
                        a.open_buy = a.open_buy.saturating_sub(qty as u64);
                    }
                    Side::Sell => {
                        a.position -= qty as i64;
                        a.open_sell = a.open_sell.saturating_sub(qty as u64);
                    }
                }
                if leaves == 0 {
                    a.open_orders = a.open_orders.saturating_sub(1);
                }
                let r = Record::Fill {
                    msg_index,
                    price,
                    qty,
                    leaves,
                    step: ev.step,
                    client_tag: ev.client_tag,
                };
                self.pend_push(slot, pkt_seq, gate, &r, sink);
            }
            Outcome::Rested { .. } => {}
            Outcome::Out { qty } => {
                self.release(acct, ev.side, qty);
                let r = Record::Out {
                    msg_index,
                    qty,
                    client_tag: ev.client_tag,
                };
                self.pend_push(slot, pkt_seq, gate, &r, sink);
            }
            Outcome::Cancelled { qty } => {
                self.release(acct, ev.side, qty);
                if let Some(f) = front.filter(|f| f.kind == OpKind::Cancel) {
                    let r = Record::CancelAck {
                        msg_index: f.msg_index,
                        client_tag: f.client_tag,
                    };
                    self.pend_push(f.slot, f.pkt_seq, gate, &r, sink);
                } else {
                    self.counters.orphan_events += 1;
                }
            }
            Outcome::Rejected(_) | Outcome::Halted | Outcome::Shed | Outcome::Excluded => {
                let Some(f) = front else {
                    self.counters.orphan_events += 1;
                    return;
                };
                let (code, detail) = match ev.what {
                    Outcome::Rejected(BookReject::UnknownOrder) => {
                        (RejectCode::UnknownOrder, f.client_tag as u64)
                    }
                    Outcome::Rejected(BookReject::DuplicateTag) => {
                        (RejectCode::DuplicateTag, f.client_tag as u64)
                    }
                    Outcome::Rejected(BookReject::BadQty) => {
                        (RejectCode::BadMsg, ReqReject::BadQty.detail())
                    }
                    Outcome::Rejected(BookReject::BookFull) => (RejectCode::BookFull, 0),
                    Outcome::Halted => (RejectCode::BookHalted, self.halted.unwrap_or(0)),
                    Outcome::Excluded => (RejectCode::Excluded, 0),
                    _ => (RejectCode::Busy, 0),
                };
                // A refused New leaves the account's working set; a BOOK_FULL remainder was
                // already released by its Out.
                if f.kind != OpKind::Cancel && ev.what != Outcome::Rejected(BookReject::BookFull) {
                    let f_acct = self.sessions[f.slot as usize].map_or(acct, |s| s.acct);
                    self.release(f_acct, f.side, f.qty);
                }
                self.counters.rejects[(code as usize) & 15] += 1;
                let r = Record::Reject {
                    msg_index: f.msg_index,
                    code,
                    detail,
                    client_tag: f.client_tag,
                };
                self.pend_push(f.slot, f.pkt_seq, gate, &r, sink);
            }
            _ => {}
        }
    }

    /// An order left the working set with `qty` still open: release its risk.
    fn release(&mut self, acct: u32, side: Side, qty: u32) {
        let a = &mut self.accts[acct as usize];
        match side {
            Side::Buy => a.open_buy = a.open_buy.saturating_sub(qty as u64),
            Side::Sell => a.open_sell = a.open_sell.saturating_sub(qty as u64),
        }
        a.open_orders = a.open_orders.saturating_sub(1);
    }

    fn pend_push(
        &mut self,
        slot: u16,
        pkt_seq: u32,
        gate: Gate,
        r: &Record,
        sink: &mut impl LaneSink,
    ) {
        let open = self.pend_order[..self.n_pend].iter().copied().find(|&i| {
            let p = &self.pend[i as usize];
            p.slot == slot && p.pkt_seq == pkt_seq && !p.b.is_full()
        });
        let ix = match open {
            Some(i) => i as usize,
            None => {
                if self.n_pend == PEND_MAX {
                    self.flush_one(0, sink);
                }
                let free = self.pend_order[self.n_pend] as usize;
                let session = self.sessions[slot as usize].map_or(0, |s| s.session);
                let p = &mut self.pend[free];
                p.slot = slot;
                p.pkt_seq = pkt_seq;
                p.gate = gate;
                p.b.start(session, pkt_seq);
                self.n_pend += 1;
                free
            }
        };
        self.pend[ix].b.push(r);
    }

    /// Send the `i`-th oldest pending response.
    fn flush_one(&mut self, i: usize, sink: &mut impl LaneSink) {
        if i >= self.n_pend {
            return;
        }
        let ix = self.pend_order[i] as usize;
        // Slot `ix` leaves the in-use run and becomes the first free one.
        self.pend_order[i..self.n_pend].rotate_left(1);
        self.n_pend -= 1;
        let p = &mut self.pend[ix];
        let Some(s) = self.sessions[p.slot as usize].as_mut() else {
            return;
        };
        let resp_seq = s.next_resp;
        s.next_resp += 1;
        let (session, tx) = (s.session, s.tx);
        let bytes = p.b.finish(resp_seq, self.tag_out.then_some(&s.k_out));
        self.hot.push(p.slot, p.pkt_seq, bytes);
        self.counters.responses += 1;
        sink.respond(&RespOut {
            session,
            echo_pkt_seq: p.pkt_seq,
            resp_seq,
            resend: false,
            gate: p.gate,
            tx,
            bytes,
        });
    }

    fn flush_pending(&mut self, sink: &mut impl LaneSink) {
        while self.n_pend > 0 {
            self.flush_one(0, sink);
        }
    }
}

// ---- Snapshot sections owned by the lane (07 §7.5; encodings in docs/engine.md) ----

use crate::snapcodec::{side_from, side_u8, SnapError, W};
use vyrn_wire::leb::Reader;

impl Lane {
    /// Section 2 for this lane: next_lane_seq, fills_applied, halt state, accounts ascending by
    /// AccountId, ops in flight in FIFO order (the lane keeps no per-order state: the book's
    /// resting orders carry the lane's cookie).
    pub(crate) fn snap_lane(&self, w: &mut W) {
        w.u8(self.id);
        w.u64(self.next_lane_seq);
        w.u64(self.applied);
        w.u64(self.halted.unwrap_or(0));
        w.u8(self.sealed as u8);
        // Accounts are stored sorted by AccountId at construction.
        w.u32(self.accts.len() as u32);
        for a in &self.accts {
            w.u32(a.cfg.account);
            w.u64(a.position as u64);
            w.u64(a.open_buy);
            w.u64(a.open_sell);
            w.u32(a.open_orders);
        }
        w.u32(self.inflight.len() as u32);
        for f in &self.inflight {
            w.u64(f.lane_seq);
            w.u16(f.slot);
            w.u32(f.pkt_seq);
            w.u8(f.msg_index);
            w.u32(f.client_tag);
            w.u8(kind_u8(f.kind));
            w.u8(side_u8(f.side));
            w.u32(f.qty);
        }
    }

    /// Section 5 for this lane: the LaneDec mirror (07 §3.5) and the bound slots'
    /// next_pkt_seq, ascending by slot.
    pub(crate) fn snap_decoder(&self, w: &mut W) {
        w.u8(self.id);
        w.u64(self.enc.next_lane_seq);
        w.u64(self.enc.prev_rx_ts);
        w.u64(self.enc.prev_fills_applied);
        let bound: Vec<usize> = (0..self.sessions.len())
            .filter(|&s| self.sessions[s].is_some())
            .collect();
        w.u32(bound.len() as u32);
        for s in bound {
            w.u16(s as u16);
            w.u32(self.enc_next[s]);
        }
    }

    /// Section 6 entries of this lane: (session, account, lane, slot, last pkt_seq, next resp_seq).
    pub(crate) fn snap_sessions(&self, out: &mut Vec<(u32, u32, u8, u16, u32, u64)>) {
        for (slot, s) in self.sessions.iter().enumerate() {
            if let Some(s) = s {
                let acct = self.accts[s.acct as usize].cfg.account;
                out.push((s.session, acct, self.id, slot as u16, s.last, s.next_resp));
            }
        }
    }

    /// Restore section 2 for this lane.
    pub(crate) fn restore_lane(&mut self, r: &mut Reader<'_>) -> Result<(), SnapError> {
        if r.u8()? != self.id {
            return Err(SnapError::Content("lane order"));
        }
        self.next_lane_seq = r.u64_le()?;
        self.applied = r.u64_le()?;
        self.halted = Some(r.u64_le()?).filter(|&h| h != 0);
        self.sealed = r.u8()? != 0;
        let n = r.u32_le()? as usize;
        if n != self.accts.len() {
            return Err(SnapError::Content("lane accounts differ from the config"));
        }
        for a in self.accts.iter_mut() {
            if r.u32_le()? != a.cfg.account {
                return Err(SnapError::Content("lane accounts differ from the config"));
            }
            a.position = r.u64_le()? as i64;
            a.open_buy = r.u64_le()?;
            a.open_sell = r.u64_le()?;
            a.open_orders = r.u32_le()?;
        }
        self.inflight.clear();
        let n = r.u32_le()? as usize;
        for _ in 0..n {
            let f = InFlight {
                lane_seq: r.u64_le()?,
                slot: r.u16_le()?,
                pkt_seq: r.u32_le()?,
                msg_index: r.u8()?,
                client_tag: r.u32_le()?,
                kind: kind_from(r.u8()?)?,
                side: side_from(r.u8()?)?,
                qty: r.u32_le()?,
            };
            self.inflight.push_back(f);
        }
        Ok(())
    }

    /// Restore section 5 for this lane.
    pub(crate) fn restore_decoder(&mut self, r: &mut Reader<'_>) -> Result<(), SnapError> {
        if r.u8()? != self.id {
            return Err(SnapError::Content("decoder lane order"));
        }
        self.enc = LaneState {
            next_lane_seq: r.u64_le()?,
            prev_rx_ts: r.u64_le()?,
            prev_fills_applied: r.u64_le()?,
        };
        let n = r.u32_le()? as usize;
        for _ in 0..n {
            let slot = r.u16_le()? as usize;
            let v = r.u32_le()?;
            *self
                .enc_next
                .get_mut(slot)
                .ok_or(SnapError::Content("decoder slot out of range"))? = v;
        }
        Ok(())
    }

    /// Restore one section 6 entry.
    pub(crate) fn restore_session(
        &mut self,
        session: u32,
        slot: u16,
        last: u32,
        next_resp: u64,
    ) -> Result<(), SnapError> {
        match self.sessions.get_mut(slot as usize) {
            Some(Some(s)) if s.session == session => {
                s.last = last;
                s.next_resp = next_resp;
                Ok(())
            }
            _ => Err(SnapError::Content(
                "session not bound where the snapshot says",
            )),
        }
    }
}

pub(crate) fn kind_u8(k: OpKind) -> u8 {
    match k {
        OpKind::NewGtc => 1,
        OpKind::NewIoc => 2,
        OpKind::Cancel => 3,
    }
}

pub(crate) fn kind_from(v: u8) -> Result<OpKind, SnapError> {
    Ok(match v {
        1 => OpKind::NewGtc,
        2 => OpKind::NewIoc,
        3 => OpKind::Cancel,
        _ => return Err(SnapError::Content("op kind")),
    })
}

#[cfg(test)]
mod pend_tests {
    use super::*;
    use vyrn_wire::msg::client::Response;

    #[derive(Default)]
    struct Out(Vec<Vec<u8>>);
    impl LaneSink for Out {
        fn record(&mut self, _: &PacketRecord, _: &[u8], _: &[u8]) {}
        fn hash(&mut self, _: u8, _: u64, _: &[u8; 32]) {}
        fn forward(&mut self, _: &Fwd) {}
        fn respond(&mut self, r: &RespOut<'_>) {
            self.0.push(r.bytes.to_vec());
        }
    }

    /// Pending responses reuse their slots in place: more open packets than PEND_MAX send the
    /// oldest first, a record joins its own packet's open response, and every response goes
    /// out once, with resp_seq in send order and exactly its own records.
    #[test]
    fn pending_responses_go_out_oldest_first_each_with_its_own_records() {
        let cfg = EngineConfig::test_home(1, 2);
        let mut lane = Lane::new(&cfg, 0);
        let (slot, session) = (0u16, cfg.sessions[0].session);
        let k_out = cfg.sessions[0].k_out;
        let gate = Gate::LaneCut {
            lane: 0,
            lane_seq: 1,
        };
        let ack = |tag: u32| Record::Ack {
            msg_index: 0,
            client_tag: tag,
        };
        let mut out = Out::default();
        // Packets 1..=12, each with one Ack (client_tag = pkt_seq); packet 3 gets a second
        // record while still open, after packets 4..=8 opened.
        for p in 1..=12u32 {
            lane.pend_push(slot, p, gate, &ack(p), &mut out);
            if p == 8 {
                lane.pend_push(slot, 3, gate, &ack(300), &mut out);
            }
        }
        // PEND_MAX (8) open at most: packets 9..=12 pushed out 1..=4 in order.
        assert_eq!(out.0.len(), 4);
        lane.flush_pending(&mut out);
        assert_eq!(out.0.len(), 12);
        for (i, b) in out.0.iter().enumerate() {
            let r = Response::parse(b, &k_out).expect("tagged, well formed");
            assert_eq!(r.session, session);
            assert_eq!(r.echo_pkt_seq, i as u32 + 1, "oldest first");
            assert_eq!(r.resp_seq, i as u64 + 1);
            let want: Vec<Record> = if r.echo_pkt_seq == 3 {
                vec![ack(3), ack(300)]
            } else {
                vec![ack(r.echo_pkt_seq)]
            };
            assert_eq!(r.records, want, "packet {}", r.echo_pkt_seq);
        }
        assert_eq!(lane.n_pend, 0);
    }
}
