//! Order RX (07 §4.9, replica core 1): one receive loop over both replication paths and both
//! substreams. Per substream: drop frames of another epoch, tenure, book or sender; keep the
//! first copy of each `frame_seq` and count the other path's copy as a duplicate; deliver in
//! `frame_seq` order; open a hole for what is missing; NACK the sequencer after
//! REP_HOLE_WAIT_US, and after REP_NACK_RETRY_US ask a peer (`RepairReq`, round robin) and the
//! sequencer again; peer-only once the sequencer answered NackTooOld. RepAck every
//! REP_ACK_US, only while frames arrive (REP_ACK_LIVE_US). Per path: frames, duplicates,
//! losses, silence; REP_A_PATH when a path loses more than REP_PATH_LOSS_ALARM of its frames
//! over 10 s, or is silent for REP_PATH_DOWN_MS while the other path is live. Silence on both
//! paths past FAILOVER_SILENCE_MS raises a failover suspicion (§9.1, detection only).
//!
//! A tile with a non-blocking step: [`OrderRx::on_frame`] for each datagram off a path,
//! [`OrderRx::tick`] at least every few µs; everything that leaves goes through [`RxOut`], so the
//! same code runs on the UDP ports, in the simulator and in the tests. Bad input never panics: a
//! malformed frame, another tenure's frame or a frame too far ahead is refused with a typed
//! reason ([`Refused`]) and a counter. Bounded memory: at most [`HELD_MAX`] frames wait behind a
//! hole; past that a frame is dropped (counted) and the hole's repair brings it back.

use std::collections::BTreeMap;

use vyrn_wire::consts::{
    FAILOVER_SILENCE_MS, REP_ACK_LIVE_US, REP_ACK_US, REP_HOLE_WAIT_US, REP_NACK_RETRY_US,
    REP_PATH_DOWN_MS, REP_PATH_LOSS_ALARM,
};
use vyrn_wire::error::Malformed;
use vyrn_wire::frame::{FrameHeader, FLAG_PATH_B, FLAG_PEER_REPAIRED, FLAG_RETRANSMIT};
use vyrn_wire::msg::ctrl::{Nack, RepAck, RepairReq};

/// Frames at most waiting behind holes, per substream.
pub const HELD_MAX: usize = 65_536;
/// Bytes at most waiting behind holes, per substream, by default (`vyrn replica --held-mib`):
/// frames injected far ahead of a hole pinned ~1.2 GB at [`HELD_MAX`] full-size frames on two
/// substreams (security review F11). 64 MiB holds ~7,000 full frames, more than a hole of a
/// metro repair at 07 §3.13's rate.
pub const HELD_BYTES_MAX: usize = 64 << 20;
/// How far past `next_expected` a frame may be and still be kept (a frame further ahead is a
/// broken or hostile sender: refused, and the stream is repaired up to it as usual).
pub const AHEAD_MAX: u64 = 1 << 20;
/// The loss-rate window of REP_A_PATH (07 §4.9: 10 s), in one-second buckets.
const LOSS_BUCKETS: usize = 10;
/// Frames per substream remembered for the per-path loss count: a frame seen on one path only
/// is counted lost on the other once it is this far behind the newest.
const PATH_WINDOW: u64 = 4096;

/// The replication paths.
pub const PATHS: usize = 2;

/// Timing of the loop (07 §4.9; every one a budget, overridable by config).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RxTiming {
    /// REP_HOLE_WAIT_US: a hole this old is NACKed to the sequencer.
    pub hole_wait_ns: u64,
    /// REP_NACK_RETRY_US: a NACKed hole this old goes to a peer too, and to the sequencer again.
    pub nack_retry_ns: u64,
    /// REP_ACK_US: RepAck period.
    pub ack_ns: u64,
    /// REP_ACK_LIVE_US: acks only while a frame came within this.
    pub ack_live_ns: u64,
    /// REP_PATH_DOWN_MS: a path silent this long while the other is live is down.
    pub path_down_ns: u64,
    /// FAILOVER_SILENCE_MS: silence on both paths this long raises a failover suspicion.
    pub silence_ns: u64,
}

impl Default for RxTiming {
    fn default() -> Self {
        RxTiming {
            hole_wait_ns: REP_HOLE_WAIT_US * 1000,
            nack_retry_ns: REP_NACK_RETRY_US * 1000,
            ack_ns: REP_ACK_US * 1000,
            ack_live_ns: REP_ACK_LIVE_US * 1000,
            path_down_ns: REP_PATH_DOWN_MS * 1_000_000,
            silence_ns: FAILOVER_SILENCE_MS * 1_000_000,
        }
    }
}

/// Whose frames this loop takes (07 §2.2: frames are named by (epoch, tenure, stream,
/// frame_seq) and sent by the sequencer of the tenure).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RxConfig {
    /// Book.
    pub book: u16,
    /// Epoch (the frames carry its low 16 bits).
    pub epoch: u32,
    /// Tenure.
    pub tenure: u8,
    /// The sequencer's index.
    pub sender: u8,
    /// Substreams: 1 or 2.
    pub n_streams: u8,
    /// Peers to ask for repair (round robin), 0 for none.
    pub n_peers: usize,
    /// Timing.
    pub timing: RxTiming,
}

/// Why a datagram was not taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// Not a frame (07 §3.2).
    Malformed(Malformed),
    /// Another book.
    OtherBook,
    /// Another epoch, tenure or sequencer (a deposed sequencer's late frames, 07 §9).
    OtherTenure,
    /// A substream this layout does not have.
    BadStream,
    /// Further ahead than [`AHEAD_MAX`].
    TooFarAhead,
    /// Behind a hole with [`HELD_MAX`] frames already waiting (its repair brings it back).
    HeldFull,
    /// A repair (the sequencer's retransmission or a peer's) for a frame this replica did not
    /// ask for: in no hole (security review F2: a forged "repair" ahead of the box's frame made
    /// the genuine one a duplicate).
    Unsolicited,
    /// A frame of a tenure deposed at this replica (07 §9.2, INV-REP-5), or one that arrived
    /// while the tail was frozen with the freeze buffer full.
    Deposed,
}

/// What a datagram did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RxVerdict {
    /// New: it and the frames it unblocked were delivered (how many).
    Delivered(u64),
    /// New, past a hole: kept until the hole is repaired.
    Held,
    /// A copy of a frame already taken (the other path, a retransmission).
    Duplicate,
    /// Not taken.
    Refused(Refused),
}

/// A change of an alarm or a suspicion (07 §4.9, §9.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RxAlarm {
    /// REP_A_PATH raised (`raised`) or cleared for `path` (0: A, 1: B); `silent` if it was
    /// raised for silence rather than loss.
    Path {
        /// The path.
        path: u8,
        /// Raised or cleared.
        raised: bool,
        /// Silence (else the loss rate).
        silent: bool,
    },
    /// No frame on either path for FAILOVER_SILENCE_MS: a failover suspicion (§9.1).
    Suspect {
        /// When the last frame came.
        last_rx_ns: u64,
    },
}

/// Where the loop's output goes.
pub trait RxOut {
    /// Frame `frame_seq` of `stream`, in order, once (`peer_repaired`: it came from a peer and
    /// is trusted only once its block's `order_root` checks, 07 §4.10).
    fn deliver(&mut self, stream: u8, frame_seq: u64, frame: &[u8], peer_repaired: bool);
    /// A NACK to the sequencer's stream core of `n.stream`.
    fn nack(&mut self, n: &Nack);
    /// A repair request to peer `peer`.
    fn repair(&mut self, peer: usize, r: &RepairReq);
    /// A RepAck to the sequencer (every stream core's control port).
    fn ack(&mut self, a: &RepAck);
    /// An alarm changed.
    fn alarm(&mut self, a: RxAlarm);
}

/// Counters (one writer: the loop).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RxCounters {
    /// Frames delivered, per substream.
    pub delivered: [u64; 2],
    /// Copies dropped as duplicates, per path.
    pub dups: [u64; PATHS],
    /// Frames taken first from each path.
    pub first: [u64; PATHS],
    /// Frames each path never brought (the other path or a repair did), per path.
    pub lost: [u64; PATHS],
    /// Datagrams refused: malformed, another book, another tenure, bad stream, too far ahead,
    /// held full, unsolicited, deposed tenure.
    pub refused: [u64; 8],
    /// Frames buffered while the tail was frozen (07 §9.1), and of those applied at an abort.
    pub frozen: (u64, u64),
    /// Holes opened.
    pub holes: u64,
    /// NACKs sent to the sequencer.
    pub nacks: u64,
    /// Repair requests sent to peers.
    pub repairs: u64,
    /// Frames delivered that came by a retransmission or a peer.
    pub repaired: u64,
    /// Duplicates that came on the control port (a repair answered twice, or after the path).
    pub repair_dups: u64,
    /// NackTooOld answers taken.
    pub too_old: u64,
    /// Frames taken back after delivery ([`OrderRx::rewind`]: a failed hold).
    pub rewound: u64,
    /// RepAcks sent.
    pub acks: u64,
    /// Failover suspicions raised.
    pub suspects: u64,
    /// The seal's fetch (07 §9.3): repair requests sent for it, and frames it brought.
    pub seal_fetch: (u64, u64),
}

/// A range of a seal's tail and the peer that reported holding it (07 §9.3: "the leader
/// fetches the frames it lacks from their holders"): where [`OrderRx::seal_fetch`] asks first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FetchHint {
    /// Substream.
    pub stream: u8,
    /// First frame_seq.
    pub a: u64,
    /// Last frame_seq.
    pub b: u64,
    /// The holder's peer slot (the `peer` of [`RxOut::repair`]).
    pub peer: usize,
}

/// The seal's fetch (07 §9.3 "Unsigned tail"): every frame up to `to` is asked of peers.
#[derive(Debug, Default)]
struct SealFetch {
    /// `F*` per substream (0: nothing asked on it).
    to: [u64; 2],
    /// Who holds what, asked first.
    hints: Vec<FetchHint>,
}

#[derive(Debug, Clone, Copy)]
struct Hole {
    to: u64,
    /// When the hole was seen (its frames' repair time runs from here; never reset).
    seen: u64,
    /// When its current request round started (0: due at the next tick).
    opened: u64,
    nacked: Option<u64>,
    /// Retries so far: each waits twice the one before ([`retry_after`]).
    retries: u32,
    /// The last frame_seq the latest request asked for (a hole is asked for [`NACK_WINDOW`]
    /// frames at a time); its arrival makes the rest of the hole due at once.
    window_to: u64,
    /// When the current window was last asked, until its first repaired frame comes back:
    /// that wait is a sample of the repair round trip ([`RepairRtt`]).
    asked: Option<u64>,
}

impl Hole {
    /// A hole up to `to`, seen at `now`, asked at the next tick.
    fn due(to: u64, now: u64) -> Self {
        Hole {
            opened: 0,
            ..Self::opened(to, now)
        }
    }

    /// A hole up to `to`, seen at `now`, asked once it waited REP_HOLE_WAIT_US.
    fn opened(to: u64, now: u64) -> Self {
        Hole {
            to,
            seen: now,
            opened: now,
            nacked: None,
            retries: 0,
            window_to: 0,
            asked: None,
        }
    }
}

/// The repair round trip as this replica measures it (the time from a window's first request to
/// its first repaired frame), smoothed as TCP smooths its RTT (RFC 6298: `srtt` gains 1/8 of
/// each sample's difference, `rttvar` 1/4). A retry waits `srtt + 4 rttvar`, never less than
/// REP_NACK_RETRY_US: with a fixed 50 µs, a replica catching up on two shared cores asked every
/// window of 256 frames of up to seven sources before the first answered (its peers served 46,000
/// frames each for 29,000 it lacked, measured with `vyrn up --wipe`), and the load of serving
/// the duplicates slowed every peer's loop.
///
/// A window asked again before its first frame came back is timed from its latest request
/// (Karn's rule would take no sample; a source that loses every first answer, or a loop so late
/// that every window is asked twice, would then never give one and the retry timer never
/// adapt). The frame may answer an earlier request, so a sample can be short: the timer errs
/// toward asking again, never toward waiting on a lost request.
#[derive(Debug, Clone, Copy, Default)]
pub struct RepairRtt {
    srtt: u64,
    rttvar: u64,
    /// Samples taken.
    pub samples: u64,
}

impl RepairRtt {
    /// Take a sample of `ns` (at most [`NACK_BACKOFF_MAX_NS`]: a window no source answered
    /// for seconds says nothing of the round trip).
    pub fn sample(&mut self, ns: u64) {
        let ns = ns.min(NACK_BACKOFF_MAX_NS);
        if self.samples == 0 {
            self.srtt = ns;
            self.rttvar = ns / 2;
        } else {
            let d = self.srtt.abs_diff(ns);
            self.rttvar = self.rttvar - self.rttvar / 4 + d / 4;
            self.srtt = self.srtt - self.srtt / 8 + ns / 8;
        }
        self.samples += 1;
    }

    /// The wait before a first retry: `srtt + 4 rttvar`, at least `base`, at most
    /// [`NACK_BACKOFF_MAX_NS`] (or `base`, if larger).
    pub fn retry_ns(&self, base: u64) -> u64 {
        let measured = if self.samples == 0 {
            0
        } else {
            self.srtt + 4 * self.rttvar
        };
        measured.max(base).min(NACK_BACKOFF_MAX_NS.max(base))
    }

    /// The smoothed round trip, ns (0 before the first sample).
    pub fn srtt_ns(&self) -> u64 {
        self.srtt
    }
}

/// Frames one NACK or RepairReq asks for: a hole is repaired window by window, the next window
/// asked for as soon as the last frame of the one before arrives. A restarted replica's hole of
/// 60,000 frames asked for at once was served up to the sequencer's burst and then re-asked
/// after a backoff, slower than the live stream on two cores (measured, docs/operator.md).
/// Equal to the stream core's retransmission burst, so one window is served whole.
pub const NACK_WINDOW: u64 = vyrn_wire::consts::NACK_SPAN_MAX;

/// The `path` of [`OrderRx::on_frame`] for a frame that came on the control port: the
/// sequencer's unicast retransmission or a peer's repair (07 §4.10). It shows no path alive.
pub const REPAIR_CHANNEL: u8 = 2;
/// The `path` of [`OrderRx::on_frame`] for a frame a peer replica sent back to this one's
/// `RepairReq` (07 §4.10): delivered as peer-repaired whatever its flags byte says (the channel
/// decides, never the sender's byte: security review F2), and only for a hole.
pub const PEER_CHANNEL: u8 = 3;
/// The `path` of [`OrderRx::on_frame`] for a frame read back from this replica's own order
/// journal at a restart ([`OrderRx::expect_local`]): this replica's own earlier copy.
pub const LOCAL_CHANNEL: u8 = 4;

/// The part of a hole one request asks for: `from ..= min(to, from + NACK_WINDOW - 1)`.
pub fn nack_window(from: u64, to: u64) -> (u64, u64) {
    (from, to.min(from.saturating_add(NACK_WINDOW - 1)))
}

/// Windows of one hole asked at once, one per source (07 §7.6's striping): a catch-up of a long
/// hole moves this many windows per round trip.
pub const STRIPES_MAX: usize = 8;

/// Longest wait between two retries of one hole: 100 ms. 07 §4.9 names the first retry
/// (REP_NACK_RETRY_US) only; a hole no source can fill (a replica restarted past the box's frame
/// ring and its peers' stores) retried at that pace forever was a storm — 130,000 NACKs and peer
/// requests a second from one replica, measured — so retries back off, doubling, to this.
pub const NACK_BACKOFF_MAX_NS: u64 = 100_000_000;

/// The wait before retry number `retries + 1` of a hole: `base` (REP_NACK_RETRY_US), doubled
/// per retry already made, at most [`NACK_BACKOFF_MAX_NS`] (or `base`, if larger).
pub fn retry_after(base: u64, retries: u32) -> u64 {
    base.saturating_mul(1u64 << retries.min(30))
        .min(NACK_BACKOFF_MAX_NS.max(base))
}

#[derive(Debug, Default)]
struct Sub {
    /// Lowest frame_seq not yet delivered.
    next: u64,
    /// Frames past a hole: bytes and whether a peer repaired them.
    held: BTreeMap<u64, (Vec<u8>, bool)>,
    /// Bytes in `held`.
    held_bytes: usize,
    /// Missing ranges `from ..= to`, keyed by `from`.
    holes: BTreeMap<u64, Hole>,
    /// Highest frame_seq seen.
    high: u64,
    /// Frames the sequencer no longer holds start above this (NackTooOld): below, peers only.
    seq_gone_below: u64,
    /// Frames of this range come from this replica's own order journal (a restart): that part
    /// of a hole is not asked of anyone ([`OrderRx::expect_local`]).
    local: Option<(u64, u64)>,
    /// Per frame_seq in the last PATH_WINDOW: which paths brought it (bit per path), in a ring.
    seen: Vec<u8>,
    /// Per slot of `seen`: when the first path's copy came (B-REP-3's path skew).
    first_t: Vec<u64>,
    /// Highest frame_seq whose `seen` slot has been accounted.
    accounted: u64,
}

/// The tail's gate (07 §9.1–§9.2).
#[derive(Debug)]
enum TailGate {
    /// Frames are taken.
    Open,
    /// Suspicion: frames are buffered (path, bytes, arrival), and their bytes.
    Frozen {
        buf: Vec<(u8, Vec<u8>, u64)>,
        bytes: usize,
    },
    /// Deposed (INV-REP-5).
    Deposed,
}

#[derive(Debug, Clone, Copy, Default)]
struct PathState {
    last_rx: Option<u64>,
    /// One-second buckets: (second, frames, losses).
    buckets: [(u64, u64, u64); LOSS_BUCKETS],
    alarm: Option<bool>,
}

impl PathState {
    fn bucket(&mut self, now: u64) -> &mut (u64, u64, u64) {
        let sec = now / 1_000_000_000;
        let b = &mut self.buckets[(sec % LOSS_BUCKETS as u64) as usize];
        if b.0 != sec {
            *b = (sec, 0, 0);
        }
        b
    }
    /// Frames and losses over the last LOSS_BUCKETS seconds.
    fn window(&self, now: u64) -> (u64, u64) {
        let sec = now / 1_000_000_000;
        self.buckets
            .iter()
            .filter(|b| b.0 + LOSS_BUCKETS as u64 > sec && b.0 <= sec)
            .fold((0, 0), |(f, l), b| (f + b.1, l + b.2))
    }
}

/// The receive loop (07 §4.9).
#[derive(Debug)]
pub struct OrderRx {
    cfg: RxConfig,
    /// Bytes at most held behind holes per substream ([`HELD_BYTES_MAX`] by default).
    held_bytes_max: usize,
    subs: [Sub; 2],
    paths: [PathState; PATHS],
    last_rx: Option<u64>,
    last_ack: u64,
    next_peer: usize,
    /// The repair round trip: the retry timer's base.
    rtt: RepairRtt,
    suspected: bool,
    gate: TailGate,
    /// The seal's fetch, once a seal's `F*` is known here (07 §9.3).
    fetch: Option<SealFetch>,
    counters: RxCounters,
    /// B-REP-3: for each frame both paths brought, the time from the first copy to the
    /// second, ns.
    skew: hdrhistogram::Histogram<u64>,
    /// Hole to filled, ns, for frames a path brought after their hole opened (the other
    /// path's copy, or a reordered one).
    fill_path: hdrhistogram::Histogram<u64>,
    /// Hole to filled, ns, for frames a retransmission or a peer brought (07 §4.10 repair).
    fill_repair: hdrhistogram::Histogram<u64>,
}

/// Repair time (07 §4.10 budget: ≤ 100 µs within a facility): per frame that was missing when
/// a later one arrived, the time from that moment to its arrival, split by what filled it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HoleFill {
    /// Filled by a path: the other path's copy or a reordered one.
    pub by_path: PathSkew,
    /// Filled by a repair: the sequencer's retransmission or a peer's.
    pub by_repair: PathSkew,
}

/// B-REP-3 (07 §15): the path skew between A and B as this replica sees it — the time from
/// the first path's copy of a frame to the other path's — over every frame both brought:
/// `(p50, p99, max, frames)`, ns.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PathSkew {
    /// Median, ns.
    pub p50: u64,
    /// 99th percentile, ns.
    pub p99: u64,
    /// Largest, ns.
    pub max: u64,
    /// Frames measured.
    pub frames: u64,
}

impl OrderRx {
    /// B-REP-3's path skew so far (see [`PathSkew`]).
    pub fn path_skew(&self) -> PathSkew {
        let h = &self.skew;
        PathSkew {
            p50: h.value_at_quantile(0.5),
            p99: h.value_at_quantile(0.99),
            max: h.max(),
            frames: h.len(),
        }
    }

    /// Hole to filled so far (see [`HoleFill`]).
    pub fn hole_fill(&self) -> HoleFill {
        let q = |h: &hdrhistogram::Histogram<u64>| PathSkew {
            p50: h.value_at_quantile(0.5),
            p99: h.value_at_quantile(0.99),
            max: h.max(),
            frames: h.len(),
        };
        HoleFill {
            by_path: q(&self.fill_path),
            by_repair: q(&self.fill_repair),
        }
    }

    /// Hold at most `bytes` of frames behind holes per substream (security review F11).
    pub fn set_held_bytes_max(&mut self, bytes: usize) {
        self.held_bytes_max = bytes.max(1 << 16);
    }

    /// The bound [`OrderRx::set_held_bytes_max`] set ([`HELD_BYTES_MAX`] by default).
    pub fn held_bytes_max(&self) -> usize {
        self.held_bytes_max
    }

    /// The repair round trip measured so far (the retry timer's base).
    pub fn repair_rtt(&self) -> RepairRtt {
        self.rtt
    }

    /// Bytes held behind holes on `stream`.
    pub fn held_bytes(&self, stream: u8) -> usize {
        self.subs.get(stream as usize).map_or(0, |s| s.held_bytes)
    }

    /// A loop for `cfg`'s tenure, expecting frame 1 of each substream next.
    pub fn new(cfg: RxConfig) -> Self {
        let sub = || Sub {
            next: 1,
            seen: vec![0; PATH_WINDOW as usize],
            first_t: vec![0; PATH_WINDOW as usize],
            ..Sub::default()
        };
        OrderRx {
            cfg,
            held_bytes_max: HELD_BYTES_MAX,
            subs: [sub(), sub()],
            paths: [PathState::default(); PATHS],
            last_rx: None,
            gate: TailGate::Open,
            fetch: None,
            last_ack: 0,
            next_peer: 0,
            rtt: RepairRtt::default(),
            suspected: false,
            counters: RxCounters::default(),
            // 1 ns to 60 s at 2 significant digits (~20 KiB, allocated once here).
            skew: hdrhistogram::Histogram::new_with_bounds(1, 60_000_000_000, 2)
                .expect("constant, valid bounds"),
            fill_path: hdrhistogram::Histogram::new_with_bounds(1, 60_000_000_000, 2)
                .expect("constant, valid bounds"),
            fill_repair: hdrhistogram::Histogram::new_with_bounds(1, 60_000_000_000, 2)
                .expect("constant, valid bounds"),
        }
    }

    /// The configuration (its timing as last set).
    pub fn config(&self) -> &RxConfig {
        &self.cfg
    }

    /// Replace the loop's timing (budgets, 07 §15).
    pub fn set_timing(&mut self, t: RxTiming) {
        self.cfg.timing = t;
    }

    /// Counters.
    pub fn counters(&self) -> RxCounters {
        self.counters
    }

    /// Per substream: the highest frame_seq seen (live, held or repaired).
    pub fn high(&self) -> [u64; 2] {
        [self.subs[0].high, self.subs[1].high]
    }

    /// Per substream: the contiguous frames delivered (the RepAck's `contiguous_frame_seq`).
    pub fn contiguous(&self) -> [u64; 2] {
        [self.subs[0].next - 1, self.subs[1].next - 1]
    }

    /// Freeze the tail (07 §9.1, on suspicion): frames of the tenure are buffered, not taken,
    /// until [`OrderRx::unfreeze`] or [`OrderRx::depose`]. Bounded like the frames behind holes.
    pub fn freeze(&mut self) {
        if matches!(self.gate, TailGate::Open) {
            self.gate = TailGate::Frozen {
                buf: Vec::new(),
                bytes: 0,
            };
        }
    }

    /// The suspicion was aborted (fewer than Q `Silence`, §9.1): take the buffered frames, in
    /// the order they came; the holes left are repaired as usual.
    pub fn unfreeze(&mut self, out: &mut impl RxOut) {
        if !self.is_frozen() {
            return;
        }
        let TailGate::Frozen { buf, .. } = std::mem::replace(&mut self.gate, TailGate::Open) else {
            return;
        };
        for (path, bytes, at) in buf {
            self.counters.frozen.1 += 1;
            let _ = self.on_frame(path, &bytes, at, out);
        }
    }

    /// The tenure is deposed here (07 §9.2, INV-REP-5): no frame, header or retransmission of
    /// it is taken again; the buffer is dropped, and no NACK, repair request or RepAck leaves.
    pub fn depose(&mut self) {
        self.gate = TailGate::Deposed;
    }

    /// 07 §9.3 "Unsigned tail": fetch every frame of the tenure up to `to` (the seal's `F*`,
    /// per substream) that this replica lacks, from its peers — the holder `hints` names first,
    /// then round robin — never from the deposed sequencer. What is missing up to `to` becomes
    /// a hole, asked at the next tick; a peer's frame (`PEER_CHANNEL`) answering it is taken
    /// through any gate, a deposed one included: INV-REP-5 keeps the sequencer's own frames
    /// out, and the seal's certificate, each voter recomputing the seal header from what it
    /// holds, stands in for the `seq_sig` these frames never get. Called again with a higher
    /// `F*` (another leader's seal), the fetch goes on to it; empty `hints` keep the last ones.
    pub fn seal_fetch(&mut self, to: [u64; 2], hints: &[FetchHint], now: u64) {
        let n = self.cfg.n_streams.min(2) as usize;
        let f = self.fetch.get_or_insert_with(SealFetch::default);
        if !hints.is_empty() {
            f.hints.clear();
            f.hints
                .extend(hints.iter().filter(|h| (h.stream as usize) < n));
        }
        for (st, &want) in to.iter().enumerate().take(n) {
            f.to[st] = f.to[st].max(want);
            let sub = &mut self.subs[st];
            let top = sub.high.max(sub.next - 1);
            if f.to[st] > top {
                sub.holes.insert(top + 1, Hole::due(f.to[st], now));
                self.counters.holes += 1;
                sub.high = f.to[st];
            }
        }
    }

    /// The seal's fetch target (`F*` per substream), once one is set.
    pub fn fetch_target(&self) -> Option<[u64; 2]> {
        self.fetch.as_ref().map(|f| f.to)
    }

    /// The frames held above a hole of `stream` within `from ..= to`, lowest first (a peer's
    /// `RepairReq` for frames this replica reported in its TailReport's `extra`, 07 §9.3).
    pub fn held_range(&self, stream: u8, from: u64, to: u64) -> impl Iterator<Item = (u64, &[u8])> {
        let held = &self.subs[stream as usize & 1].held;
        let range = (from <= to).then_some(from..=to);
        range
            .into_iter()
            .flat_map(move |r| held.range(r).map(|(&k, (b, _))| (k, b.as_slice())))
    }

    /// Whether the tail is frozen.
    pub fn is_frozen(&self) -> bool {
        matches!(self.gate, TailGate::Frozen { .. })
    }

    /// Whether the tenure is deposed here.
    pub fn is_deposed(&self) -> bool {
        matches!(self.gate, TailGate::Deposed)
    }

    /// What this replica holds of `stream` for a TailReport (07 §9.3): `F_i` (every frame
    /// `1..=F_i` delivered) and the `extra` ranges held above it, the lowest
    /// [`TAIL_EXTRA_MAX`](vyrn_wire::msg::ctrl::TAIL_EXTRA_MAX) of them (F* is decided from
    /// the bottom up).
    pub fn holdings(&self, stream: u8) -> (u64, Vec<vyrn_wire::msg::ctrl::FrameRange>) {
        use vyrn_wire::msg::ctrl::{FrameRange, TAIL_EXTRA_MAX};
        let sub = &self.subs[stream as usize & 1];
        let mut extra: Vec<FrameRange> = Vec::new();
        for &k in sub.held.keys() {
            let full = extra.len() == TAIL_EXTRA_MAX;
            match extra.last_mut() {
                Some(r) if r.b + 1 == k => r.b = k,
                _ if full => break,
                _ => extra.push(FrameRange { a: k, b: k }),
            }
        }
        (sub.next - 1, extra)
    }

    /// Whether frame `fs` of `stream` came from a sequencer path (07 §9.3 `direct`): `Some`
    /// within the last PATH_WINDOW frames this loop accounts per path, `None` older.
    pub fn direct(&self, stream: u8, fs: u64) -> Option<bool> {
        let sub = &self.subs[stream as usize & 1];
        if fs <= sub.accounted || fs > sub.accounted + PATH_WINDOW {
            return None;
        }
        Some(sub.seen[(fs % PATH_WINDOW) as usize] != 0)
    }

    /// The tenure this loop takes and its sequencer's index (07 §2.2).
    pub fn tenure(&self) -> (u8, u8) {
        (self.cfg.tenure, self.cfg.sender)
    }

    /// The tenure is due to start by `at` (07 §9.5: its box is being promoted): its silence
    /// counts from then, so a sequencer that never sends its first frame is suspected (07 §9.1)
    /// like one that stopped.
    pub fn expect_first_by(&mut self, at: u64) {
        if self.last_rx.is_none() {
            self.last_rx = Some(at);
        }
    }

    /// When the newest frame of the tenure came (07 §9.3 `t_last_rx`, this clock).
    pub fn last_rx(&self) -> Option<u64> {
        self.last_rx
    }

    /// The holes of `stream`: `(from, to)`, lowest first.
    pub fn holes(&self, stream: u8) -> Vec<(u64, u64)> {
        self.subs[stream as usize & 1]
            .holes
            .iter()
            .map(|(&f, h)| (f, h.to))
            .collect()
    }

    /// Whether REP_A_PATH is raised for `path`.
    pub fn path_alarm(&self, path: u8) -> bool {
        self.paths[path as usize & 1].alarm.is_some()
    }

    /// One datagram off path `path` (0: A, 1: B, [`REPAIR_CHANNEL`]: a repair arriving on the
    /// control port) at `now`.
    pub fn on_frame(
        &mut self,
        path: u8,
        bytes: &[u8],
        now: u64,
        out: &mut impl RxOut,
    ) -> RxVerdict {
        let path = match path {
            REPAIR_CHANNEL | PEER_CHANNEL | LOCAL_CHANNEL => path as usize,
            _ => (path & 1) as usize,
        };
        let v = self.take(path, bytes, now, out);
        if let RxVerdict::Refused(r) = v {
            let i = match r {
                Refused::Malformed(_) => 0,
                Refused::OtherBook => 1,
                Refused::OtherTenure => 2,
                Refused::BadStream => 3,
                Refused::TooFarAhead => 4,
                Refused::HeldFull => 5,
                Refused::Unsolicited => 6,
                Refused::Deposed => 7,
            };
            self.counters.refused[i] += 1;
        }
        v
    }

    fn take(&mut self, path: usize, bytes: &[u8], now: u64, out: &mut impl RxOut) -> RxVerdict {
        let h = match FrameHeader::parse(bytes) {
            Ok((h, _)) => h,
            Err(e) => return RxVerdict::Refused(Refused::Malformed(e)),
        };
        let c = &self.cfg;
        if h.book != c.book {
            return RxVerdict::Refused(Refused::OtherBook);
        }
        if h.epoch16 != c.epoch as u16 || h.tenure != c.tenure || h.sender != c.sender {
            return RxVerdict::Refused(Refused::OtherTenure);
        }
        if h.stream >= c.n_streams {
            return RxVerdict::Refused(Refused::BadStream);
        }
        // 07 §9.3: a peer's frame of the seal's tail is fetched through any gate.
        let fetched = path == PEER_CHANNEL as usize
            && self
                .fetch
                .as_ref()
                .is_some_and(|f| h.frame_seq <= f.to[h.stream as usize]);
        // 07 §9.1–§9.2: a frozen tail buffers, a deposed tenure takes nothing more.
        match &mut self.gate {
            _ if fetched => {}
            TailGate::Open => {}
            TailGate::Deposed => return RxVerdict::Refused(Refused::Deposed),
            TailGate::Frozen { buf, bytes: held } => {
                if *held + bytes.len() > self.held_bytes_max || buf.len() >= HELD_MAX {
                    return RxVerdict::Refused(Refused::Deposed);
                }
                *held += bytes.len();
                buf.push((path as u8, bytes.to_vec(), now));
                self.counters.frozen.0 += 1;
                return RxVerdict::Held;
            }
        }
        // A frame of the tenure: the stream is alive; a path's frame (retransmissions too)
        // shows that path alive — a repair on the control port shows no path. A fetched one
        // shows nothing of the sequencer.
        if !fetched {
            self.last_rx = Some(now);
            self.suspected = false;
        }
        let channel = path >= REPAIR_CHANNEL as usize;
        if !channel {
            self.paths[path].last_rx = Some(now);
        }
        let direct = !channel && h.flags & (FLAG_RETRANSMIT | FLAG_PEER_REPAIRED) == 0;
        // Peer-supplied by the channel it came on (the flag byte is the sender's word). A frame
        // of this replica's own journal was journaled only once its block was vouched for
        // (`crate::front::quarantine`): it is this replica's own.
        let peer = path == PEER_CHANNEL as usize;
        let st = h.stream as usize;
        let fs = h.frame_seq;
        if fs > self.subs[st].next && fs - self.subs[st].next > AHEAD_MAX {
            return RxVerdict::Refused(Refused::TooFarAhead);
        }
        if direct {
            self.note_path(st, path, fs, now);
        }
        let sub = &mut self.subs[st];
        if fs < sub.next || sub.held.contains_key(&fs) {
            match self.counters.dups.get_mut(path) {
                Some(d) => *d += 1,
                None => self.counters.repair_dups += 1,
            }
            return RxVerdict::Duplicate;
        }
        // A repair answers a hole this replica has (and so asks for): anything else is
        // unsolicited (security review F2).
        let asked = |sub: &Sub| {
            sub.holes
                .range(..=fs)
                .next_back()
                .is_some_and(|(_, h)| fs <= h.to)
        };
        if (path == REPAIR_CHANNEL as usize || path == PEER_CHANNEL as usize) && !asked(sub) {
            return RxVerdict::Refused(Refused::Unsolicited);
        }
        if direct {
            self.counters.first[path] += 1;
        } else {
            self.counters.repaired += 1;
        }
        if fetched {
            self.counters.seal_fetch.1 += 1;
        }
        // Holes: a frame inside one splits it; one past the newest opens the gap before it.
        if let Some((seen, asked)) = Self::close_in_holes(sub, fs) {
            if let Some(t0) = asked.filter(|_| !direct) {
                self.rtt.sample(now.saturating_sub(t0));
            }
            // Hole to filled, by the other path (or a reordered copy) or by a repair.
            let h = if direct {
                &mut self.fill_path
            } else {
                &mut self.fill_repair
            };
            let _ = h.record(now.saturating_sub(seen).max(1));
        }
        let top = sub.high.max(sub.next - 1);
        if fs > top + 1 {
            sub.holes.insert(top + 1, Hole::opened(fs - 1, now));
            self.counters.holes += 1;
        }
        sub.high = sub.high.max(fs);
        if fs != sub.next {
            if sub.held.len() >= HELD_MAX
                || sub.held_bytes.saturating_add(bytes.len()) > self.held_bytes_max
            {
                // Reopen what this frame would have filled: its repair brings it back.
                Self::reopen(sub, fs, now);
                return RxVerdict::Refused(Refused::HeldFull);
            }
            sub.held_bytes += bytes.len();
            sub.held.insert(fs, (bytes.to_vec(), peer));
            return RxVerdict::Held;
        }
        // In order: deliver it and everything it unblocks (07 §4.9).
        out.deliver(h.stream, fs, bytes, peer);
        sub.next += 1;
        self.counters.delivered[st] += 1;
        RxVerdict::Delivered(1 + self.pump(h.stream, out))
    }

    /// Deliver the held frames of `stream` that are now in order; how many.
    pub fn pump(&mut self, stream: u8, out: &mut impl RxOut) -> u64 {
        let Some(sub) = self.subs.get_mut(stream as usize) else {
            return 0;
        };
        let mut n = 0;
        while let Some((b, p)) = sub.held.remove(&sub.next) {
            sub.held_bytes -= b.len();
            out.deliver(stream, sub.next, &b, p);
            sub.next += 1;
            n += 1;
        }
        self.counters.delivered[stream as usize] += n;
        n
    }

    /// Take back the frames of `stream` delivered from `frames`' first on, in order up to the
    /// last delivered (a hold that failed, `crate::front::quarantine`, 07 §4.10): each peer-supplied
    /// frame becomes a hole again, asked of the sequencer first at the next tick; the rest wait
    /// behind the holes as held frames (past the held-bytes bound, they are holes too).
    /// [`OrderRx::pump`] delivers what is in order again. Frames not contiguous up to the last
    /// delivered one are refused whole (false).
    pub fn rewind<'a>(
        &mut self,
        stream: u8,
        frames: impl IntoIterator<Item = (u64, &'a [u8], bool)>,
        now: u64,
    ) -> bool {
        let max = self.held_bytes_max;
        let Some(sub) = self.subs.get_mut(stream as usize) else {
            return false;
        };
        let frames: Vec<_> = frames.into_iter().collect();
        let Some(&(first, _, _)) = frames.first() else {
            return true;
        };
        let contiguous = frames
            .iter()
            .enumerate()
            .all(|(i, f)| f.0 == first + i as u64)
            && first + frames.len() as u64 == sub.next;
        if !contiguous {
            return false;
        }
        sub.next = first;
        self.counters.delivered[stream as usize] -= frames.len() as u64;
        self.counters.rewound += frames.len() as u64;
        let mut open: Option<(u64, u64)> = None;
        let mut holes = Vec::new();
        for (fs, bytes, peer) in frames {
            if !peer && sub.held_bytes.saturating_add(bytes.len()) <= max {
                sub.held_bytes += bytes.len();
                sub.held.insert(fs, (bytes.to_vec(), false));
                holes.extend(open.take());
                continue;
            }
            open = Some(match open {
                Some((a, _)) => (a, fs),
                None => (fs, fs),
            });
        }
        holes.extend(open);
        for (from, to) in holes {
            sub.holes.insert(from, Hole::due(to, now));
            self.counters.holes += 1;
        }
        true
    }

    /// Take `fs` out of the hole holding it; when it was in one, the time that hole was seen.
    /// Take `fs` out of its hole: the hole's `seen`, and when its window was first asked if
    /// this is the window's first frame back (taken: one round-trip sample per window).
    fn close_in_holes(sub: &mut Sub, fs: u64) -> Option<(u64, Option<u64>)> {
        let (&from, &hole) = sub.holes.range(..=fs).next_back()?;
        if fs > hole.to {
            return None;
        }
        let asked = hole.asked;
        let hole = Hole {
            asked: None,
            ..hole
        };
        sub.holes.remove(&from);
        if from < fs {
            sub.holes.insert(from, Hole { to: fs - 1, ..hole });
        }
        if fs < hole.to {
            let rest = if hole.nacked.is_some() && fs == hole.window_to {
                // The last frame of the asked window: ask for the next one at the next tick.
                Hole {
                    to: hole.to,
                    seen: hole.seen,
                    opened: 0,
                    nacked: None,
                    retries: 0,
                    window_to: 0,
                    asked: None,
                }
            } else {
                hole
            };
            sub.holes.insert(fs + 1, rest);
        }
        Some((hole.seen, asked))
    }

    fn reopen(sub: &mut Sub, fs: u64, now: u64) {
        sub.holes.insert(fs, Hole::opened(fs, now));
    }

    /// Path accounting: which paths brought each frame; a frame that leaves the window of the
    /// last PATH_WINDOW frame_seqs with a path's bit unset is a loss on that path (07 §4.9: "a
    /// replica counts per-path losses"). The window holds `accounted + 1 ..= accounted + W`.
    fn note_path(&mut self, st: usize, path: usize, fs: u64, now: u64) {
        let sub = &mut self.subs[st];
        if fs <= sub.accounted {
            return; // older than the window: already accounted
        }
        let mut losses = [0u64; PATHS];
        let mut frames = 0u64;
        let mut flush = |m: u8| {
            if m != 0 {
                frames += 1;
                for (p, l) in losses.iter_mut().enumerate() {
                    if m & (1 << p) == 0 {
                        *l += 1;
                    }
                }
            }
        };
        if fs > sub.accounted + 2 * PATH_WINDOW {
            // A jump past the whole window: account every slot once.
            for m in sub.seen.iter_mut() {
                flush(std::mem::take(m));
            }
            sub.accounted = fs - PATH_WINDOW;
        }
        while fs > sub.accounted + PATH_WINDOW {
            sub.accounted += 1;
            let slot = (sub.accounted % PATH_WINDOW) as usize;
            flush(std::mem::take(&mut sub.seen[slot]));
        }
        let slot = (fs % PATH_WINDOW) as usize;
        let had = sub.seen[slot];
        if had == 0 {
            sub.first_t[slot] = now;
        } else if had & (1 << path) == 0 {
            // The other path's copy came first: B-REP-3's skew for this frame.
            self.skew
                .saturating_record(now.saturating_sub(sub.first_t[slot]).max(1));
        }
        sub.seen[slot] |= 1 << path;
        for (p, &l) in losses.iter().enumerate() {
            self.counters.lost[p] += l;
            let b = self.paths[p].bucket(now);
            b.1 += frames;
            b.2 += l;
        }
    }

    /// Frames `range` of `stream` will be delivered from this replica's own order journal (a
    /// restart, 07 §4.10): that part of a hole is not asked of the sequencer or peers, so what
    /// the journal lacks — the downtime above it — is asked at once, while the peers still hold
    /// it. `None`: nothing local (the feed ended; anything still missing is asked as usual).
    pub fn expect_local(&mut self, stream: u8, range: Option<(u64, u64)>) {
        if let Some(sub) = self.subs.get_mut(stream as usize) {
            sub.local = range;
        }
    }

    /// NackTooOld from the sequencer for `stream`: frames below `oldest_seq` come from peers
    /// only from now on (07 §4.10).
    pub fn on_too_old(&mut self, stream: u8, oldest_seq: u64) {
        if let Some(sub) = self.subs.get_mut(stream as usize) {
            sub.seq_gone_below = sub.seq_gone_below.max(oldest_seq);
            self.counters.too_old += 1;
        }
    }

    /// The loop's clock: NACKs and repair requests for holes that waited, the RepAck when due,
    /// the path alarms and the silence suspicion. Call it at least every few µs.
    pub fn tick(&mut self, now: u64, out: &mut impl RxOut) {
        self.ask_holes(now, out);
        if self.is_deposed() {
            return;
        }
        self.tick_acks_and_alarms(now, out);
    }

    /// NACKs and repair requests for the holes that waited. Deposed, only the seal's fetch
    /// asks (07 §9.3), and only peers.
    fn ask_holes(&mut self, now: u64, out: &mut impl RxOut) {
        let deposed = self.is_deposed();
        if deposed && self.fetch.is_none() {
            return;
        }
        let t = self.cfg.timing;
        let retry_base = self.rtt.retry_ns(t.nack_retry_ns);
        // Windows a long hole's first request stripes across the sources (the sequencer and
        // each peer), at most STRIPES_MAX.
        let stripes = (1 + self.cfg.n_peers).min(STRIPES_MAX);
        for st in 0..self.cfg.n_streams.min(2) as usize {
            let gone = self.subs[st].seq_gone_below;
            let local = self.subs[st].local;
            let fetch_to = self.fetch.as_ref().map_or(0, |f| f.to[st]);
            // (from, to, retry, fetch, stripe)
            let mut to_nack: Vec<(u64, u64, bool, bool, usize)> = Vec::new();
            for (&from, h) in self.subs[st].holes.iter_mut() {
                // The part of the hole this replica's own journal will fill is not asked: a
                // hole starting inside the local range is asked from above it.
                let from = match local {
                    Some((lo, hi)) if from >= lo && from <= hi => hi.saturating_add(1),
                    _ => from,
                };
                if from > h.to {
                    continue;
                }
                // 07 §9.3: the seal's tail is fetched from peers at once; deposed, nothing else
                // is asked.
                let fetch = from <= fetch_to;
                if deposed && !fetch {
                    continue;
                }
                let due = match h.nacked {
                    None => fetch || now.saturating_sub(h.opened) >= t.hole_wait_ns,
                    Some(at) => now.saturating_sub(at) >= retry_after(retry_base, h.retries),
                };
                if due {
                    let hole_to = if fetch { h.to.min(fetch_to) } else { h.to };
                    let (from, to) = nack_window(from, hole_to);
                    h.window_to = to;
                    to_nack.push((from, to, h.nacked.is_some(), fetch, 0));
                    // 07 §7.6 "striped across all peers": a long hole's first request asks one
                    // window of each source at once (the sequencer the first, each peer the
                    // next), so a catch-up moves a window per source per round trip; a retry
                    // asks the first window still missing.
                    if h.nacked.is_none() && !fetch {
                        for j in 1..stripes {
                            if h.window_to >= hole_to {
                                break;
                            }
                            let (a, b) = nack_window(h.window_to + 1, hole_to);
                            h.window_to = b;
                            to_nack.push((a, b, false, false, j));
                        }
                    }
                    if h.nacked.is_some() {
                        h.retries = h.retries.saturating_add(1);
                    }
                    h.asked = Some(now);
                    h.nacked = Some(now);
                }
            }
            for (from, to, retry, fetch, stripe) in to_nack {
                let (epoch, tenure, stream) = (self.cfg.epoch, self.cfg.tenure, st as u8);
                if fetch {
                    self.fetch_from_peer(stream, from, to, retry, out);
                    continue;
                }
                if stripe > 0 {
                    // A striped window: its own peer.
                    let peer = (self.next_peer + stripe - 1) % self.cfg.n_peers;
                    self.ask_peer(peer, stream, from, to, out);
                    continue;
                }
                // The sequencer first (unless it no longer holds the frames); on a retry a
                // peer too, round robin by index (07 §4.10).
                if to >= gone {
                    out.nack(&Nack {
                        epoch,
                        tenure,
                        stream,
                        from_seq: from.max(gone),
                        to_seq: to,
                    });
                    self.counters.nacks += 1;
                }
                if (retry || to < gone) && self.cfg.n_peers > 0 {
                    let peer = self.next_peer % self.cfg.n_peers;
                    self.next_peer = self.next_peer.wrapping_add(1);
                    self.ask_peer(peer, stream, from, to, out);
                }
            }
        }
    }

    /// A `RepairReq` for frames `from ..= to` of `stream` to peer `peer` (07 §4.10), counted.
    fn ask_peer(&mut self, peer: usize, stream: u8, from: u64, to: u64, out: &mut impl RxOut) {
        self.send_repair(peer, stream, from, to, out);
        self.counters.repairs += 1;
    }

    fn send_repair(&self, peer: usize, stream: u8, from: u64, to: u64, out: &mut impl RxOut) {
        out.repair(
            peer,
            &RepairReq {
                epoch: self.cfg.epoch,
                tenure: self.cfg.tenure,
                stream,
                from_seq: from,
                to_seq: to,
            },
        );
    }

    /// 07 §9.3: ask a peer for frames `from ..= to` of the seal's tail — the first hint's holder
    /// of `from`, or on a retry (or with no hint) the next peer round robin.
    fn fetch_from_peer(
        &mut self,
        stream: u8,
        from: u64,
        to: u64,
        retry: bool,
        out: &mut impl RxOut,
    ) {
        if self.cfg.n_peers == 0 {
            return;
        }
        let hinted = self.fetch.as_ref().and_then(|f| {
            f.hints
                .iter()
                .find(|h| h.stream == stream && h.a <= from && from <= h.b)
                .map(|h| h.peer)
        });
        // The hinted holder may be the standby's replica (the slot after the peers').
        if let Some(p) = hinted.filter(|_| !retry) {
            self.send_repair(p, stream, from, to, out);
            self.counters.seal_fetch.0 += 1;
            return;
        }
        // No holder named (the standby's replica follows a final seal's `F*` with no reports
        // of its own), or the named one did not answer: every peer and the standby's slot at
        // once. The seal's tail is a few frames, asked once per retry; asked one peer at a
        // time, a standby whose one missing frame only one voter held went round the slots
        // under the retry's backoff and never got it in a CI run (`vyrn up --isolate-seq`).
        for p in 0..=self.cfg.n_peers {
            self.send_repair(p, stream, from, to, out);
            self.counters.seal_fetch.0 += 1;
        }
    }

    /// The RepAck, the path alarms and the silence suspicion (a tenure not deposed).
    fn tick_acks_and_alarms(&mut self, now: u64, out: &mut impl RxOut) {
        let t = self.cfg.timing;
        // RepAck every REP_ACK_US, only while frames arrive (07 §4.8).
        let live = |p: &PathState| {
            p.last_rx
                .is_some_and(|t0| now.saturating_sub(t0) <= t.ack_live_ns)
        };
        if now.saturating_sub(self.last_ack) >= t.ack_ns
            && self
                .last_rx
                .is_some_and(|t0| now.saturating_sub(t0) <= t.ack_live_ns)
        {
            let mask = (live(&self.paths[0]) as u8) | ((live(&self.paths[1]) as u8) << 1);
            out.ack(&RepAck {
                epoch: self.cfg.epoch,
                tenure: self.cfg.tenure,
                contiguous_frame_seq: self.contiguous(),
                path_mask: mask,
            });
            self.last_ack = now;
            self.counters.acks += 1;
        }
        // REP_A_PATH (07 §4.9): a loss rate over 10 s above REP_PATH_LOSS_ALARM, or silence for
        // REP_PATH_DOWN_MS while the other path is live.
        for p in 0..PATHS {
            let other = &self.paths[1 - p];
            let other_live = other
                .last_rx
                .is_some_and(|t0| now.saturating_sub(t0) < t.path_down_ns);
            let me = &self.paths[p];
            let silent = other_live
                && me
                    .last_rx
                    .is_none_or(|t0| now.saturating_sub(t0) >= t.path_down_ns)
                && self.last_rx.is_some();
            let (frames, lost) = me.window(now);
            let lossy = frames > 0 && lost as f64 > REP_PATH_LOSS_ALARM * frames as f64;
            let want = if silent {
                Some(true)
            } else if lossy {
                Some(false)
            } else {
                None
            };
            if want != me.alarm {
                let raised = want.is_some();
                let was = me.alarm;
                self.paths[p].alarm = want;
                out.alarm(RxAlarm::Path {
                    path: p as u8,
                    raised,
                    silent: want.or(was).unwrap_or(false),
                });
            }
        }
        // §9.1 detection: no frame of the tenure on either path for FAILOVER_SILENCE_MS.
        if let Some(t0) = self.last_rx {
            if !self.suspected && now.saturating_sub(t0) > t.silence_ns {
                self.suspected = true;
                self.counters.suspects += 1;
                out.alarm(RxAlarm::Suspect { last_rx_ns: t0 });
            }
        }
    }
}

/// Mark a frame's copy for path B (a sender's helper for tests and the simulator).
pub fn on_path_b(frame: &mut [u8]) {
    vyrn_wire::frame::set_path(frame, true);
    debug_assert!(frame.get(16).is_none_or(|f| f & FLAG_PATH_B != 0));
}
