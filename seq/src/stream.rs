//! A stream core (07 §4.1–§4.2, §4.5): owns substream H — its lanes' records, its half of every
//! step, its `frame_seq`, its HASH frames and heartbeats, its `released[H]` word and the
//! `LaneCut` of its lanes.
//!
//! Per poll:
//! 1. Part B: drain this half's `R_pkt[l]` rings into the open ORDER frame as LaneRuns (records
//!    are framed ahead of the steps that will cover them, 07 §4.11).
//! 2. Part A: for each step in `R_step` (its cursor): if H carries a record of the step (its home
//!    half, or its half-cut moved), first check every record ≤ the step's half-cut is framed
//!    (INV-REP-2), then append the half record (07 §3.8).
//! 3. Flush (07 §4.5): a gated step (one that carries a record, so it may release a response),
//!    the 160-byte body cap, or `REP_FLUSH_MAX_NS` of age; never between a step's drain and its
//!    record. A flush writes the frame to **both paths**, then fences, then stores `released[H]`
//!    (release), then `LaneCut[l]` for this half's lanes (INV-REP-11).
//! 4. HASH frames: the `pkt_hash` of every record already written (INV-REP-8), grouped per lane.
//! 5. HEARTBEAT after `REP_HB_US` of silence.
//!
//! The gate under failure (07 §4.2, §4.8, §14 "one order path down"): each frame is written to
//! path A and path B separately. A step is released only when every frame up to the one holding
//! its record is written on both paths — or on one path while the other is declared down
//! (REP_A_PATH raised) — and fenced; never on none. A path that pushes back (`Busy`) is retried
//! on later polls, never in a spin inside the gate; frames queue behind it in `frame_seq` order
//! (their buffers kept, so allocation happens only under backpressure). A path that refuses a
//! write, or stays busy for [`WRITE_RETRY_NS`] while the other path took the frame, is declared
//! down and probed again every REP_PATH_DOWN_MS. A frame that no path takes within
//! [`WRITE_RETRY_NS`] cannot complete: the box fences (INV-REP-6) and writes nothing more in
//! the tenure — not a frame of any kind, not a retransmission.

use crate::mem::{PathWrite, StreamMem};
use crate::shm::{ClosedHalf, FrameInfo, StepMsg};
use std::collections::VecDeque;
use vyrn_wire::consts::{
    REP_FLUSH_MAX_NS, REP_HB_US, REP_ORDER_FRAME_MAX, REP_PATH_DOWN_MS, REP_RTX_MAX_FPS,
    REP_SELF_FENCE_US, SRC_NONE,
};
use vyrn_wire::encoder::FrameWriter;
use vyrn_wire::frame::{FrameHeader, FrameKind, Heartbeat, FLAG_RETRANSMIT};
use vyrn_wire::layout::Layout;
use vyrn_wire::leb::push_u64;
use vyrn_wire::records::{
    encode_block_mark, encode_hash_run, encode_session_bind, encode_step_half, tag, HalfRecord,
    StepState,
};

/// Retransmissions a stream core may send back to back before the REP_RTX_MAX_FPS rate holds.
const RTX_BURST: u64 = 256;
/// Steps a stream core takes from `R_step` per poll at most (a burst in one poll,
/// bounded so a poll stays short).
pub const STREAM_STEPS_PER_POLL: usize = 64;
/// Hashes a stream core lets wait for a HASH frame while it is releasing gated steps (
/// the HASH frame goes at the next quieter poll, not between a release and its answer).
pub const HASH_DEFER_MAX: usize = 64;

/// How long a frame may wait for a path that pushes back before the gate gives up on that path
/// (the other path has the frame: REP_A_PATH, trading goes on on one path) or on the frame (no
/// path has it: the box fences, INV-REP-6). A vyrn decision: the self-fence window
/// REP_SELF_FENCE_US, the longest 07 lets a sequencer hold releases before it falls silent.
pub const WRITE_RETRY_NS: u64 = REP_SELF_FENCE_US * 1000;

/// How often a path declared down is tried again (REP_PATH_DOWN_MS).
pub const PATH_PROBE_NS: u64 = REP_PATH_DOWN_MS * 1_000_000;

/// The gate's counters for one substream (07 §4.2, §14).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct GateCounters {
    /// Frames written (on at least one path) and fenced.
    pub frames: u64,
    /// Frame writes a path pushed back on (each retried later), per path.
    pub busy: [u64; 2],
    /// Frame writes a path refused, per path.
    pub failed: [u64; 2],
    /// Frames not written on a path because it was down, per path.
    pub skipped: [u64; 2],
    /// Times a path was declared down (REP_A_PATH raised), per path.
    pub path_down: [u64; 2],
    /// Times a path came back (REP_A_PATH cleared), per path.
    pub path_up: [u64; 2],
    /// Frames that waited for a path (queued behind backpressure).
    pub queued: u64,
    /// Frames sealed after the fence, never written.
    pub fenced_drops: u64,
    /// The box fenced because a frame could not be written on any path (INV-REP-6).
    pub write_fences: u64,
}

/// A sealed frame not yet written on every live path.
#[derive(Debug)]
struct Pending {
    frame_seq: u64,
    buf: Vec<u8>,
    info: FrameInfo,
    done: [bool; 2],
    since: u64,
}

/// How the stream core orders its gate. `Correct` is the protocol; the other exists so the
/// tests can show that the invariant checks catch a broken gate (T-REP-1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GateMode {
    /// Write to both paths, fence, then release (07 §4.2).
    Correct,
    /// The gate removed (tests only): release words and `LaneCut` are stored as soon as a
    /// step's record is appended to the open frame, and the frame is written only when it ages
    /// out — INV-FRAME-FIRST broken on purpose, to show the checks catch it.
    ReleaseOnAppend,
}

/// Where a NACK's retransmissions go when it names its sender: one frame at a time; false:
/// it did not go (07 §4.10).
pub type RtxSink<'a> = dyn FnMut(&[u8]) -> bool + 'a;

/// What a NACK got (07 §4.10).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct NackOutcome {
    /// Frames retransmitted (`flags.retransmit`).
    pub resent: u64,
    /// The oldest frame_seq still in the ring, when part of the range was older (NackTooOld).
    pub too_old: Option<u64>,
    /// Frames not resent because of the REP_RTX_MAX_FPS cap (the receiver NACKs again).
    pub capped: u64,
}

/// Retransmission counters of a stream core.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct RtxCounters {
    /// NACKs served.
    pub nacks: u64,
    /// Frames retransmitted.
    pub resent: u64,
    /// NACKs answered NackTooOld.
    pub too_old: u64,
    /// Frames held back by the rate cap.
    pub capped: u64,
}

/// The frame ring for retransmission (07 §4.10): one preallocated byte buffer of
/// REP_RTX_RING_BYTES written as a circular log — each frame contiguous, a pass that reaches the
/// end starts again at 0 — and an index of (frame_seq, offset, length), oldest first. A new frame
/// evicts the oldest frames it overlaps. No allocation per frame once the index has grown to its
/// steady size.
#[derive(Debug)]
pub(crate) struct RtxRing {
    buf: Vec<u8>,
    idx: VecDeque<(u64, u32, u16)>,
    tail: usize,
}

impl RtxRing {
    pub(crate) fn new(bytes: usize) -> Self {
        let mut buf = vec![0u8; bytes];
        // Prefault: a zeroed allocation is mapped lazily, and the first write to each page would
        // take a page fault (µs) on the gate path during the ring's first pass.
        for i in (0..bytes).step_by(4096) {
            buf[i] = 0xFF;
        }
        RtxRing {
            buf,
            idx: VecDeque::with_capacity(bytes / 64 + 16),
            tail: 0,
        }
    }

    fn push(&mut self, frame_seq: u64, frame: &[u8]) {
        let len = frame.len();
        if len > self.buf.len() || len > u16::MAX as usize {
            self.idx.clear(); // cannot be kept: the ring holds nothing older either
            return;
        }
        let off = if self.tail + len > self.buf.len() {
            // A new pass from 0: the frames past the tail (the oldest) go first, or the frames
            // the new pass overwrites would sit behind them in the index.
            while self.idx.front().is_some_and(|e| e.1 as usize >= self.tail) {
                self.idx.pop_front();
            }
            0
        } else {
            self.tail
        };
        while let Some(&(_, o, l)) = self.idx.front() {
            let (o, l) = (o as usize, l as usize);
            if o < off + len && off < o + l {
                self.idx.pop_front();
            } else {
                break;
            }
        }
        self.buf[off..off + len].copy_from_slice(frame);
        self.idx.push_back((frame_seq, off as u32, len as u16));
        self.tail = off + len;
    }

    fn oldest(&self) -> Option<u64> {
        self.idx.front().map(|e| e.0)
    }

    fn newest(&self) -> Option<u64> {
        self.idx.back().map(|e| e.0)
    }

    fn get(&self, frame_seq: u64) -> Option<&[u8]> {
        let oldest = self.oldest()?;
        let &(fs, o, l) = self.idx.get(frame_seq.checked_sub(oldest)? as usize)?;
        debug_assert_eq!(fs, frame_seq);
        Some(&self.buf[o as usize..o as usize + l as usize])
    }
}

/// One substream's stream core.
#[derive(Debug)]
pub struct StreamCore {
    h: u8,
    layout: Layout,
    first: usize,
    len: usize,
    w: FrameWriter,
    st: StepState,
    steprun_n: u64,
    steprun: Vec<u8>,
    /// Per lane of the half: last LaneSeq drained into a frame (open or written).
    drained: Vec<u64>,
    /// Per lane: last LaneSeq in a written frame.
    written: Vec<u64>,
    half_cut: Vec<u64>,
    /// The last step whose record is in the open frame, with this half's cut.
    open_step: Option<u64>,
    open_since: Option<u64>,
    last_write: u64,
    info: FrameInfo,
    /// Per lane: `(first_lane_seq, pkt_hash)` received, waiting for their record to be written.
    hashes: Vec<std::collections::VecDeque<(u64, u64)>>,
    mode: GateMode,
    scratch: Vec<u8>,
    run_buf: Vec<u8>,
    /// The records drained this poll: their encodings back to back, and per record (last
    /// LaneSeq, end offset) — reused, no allocation per record.
    rec_bytes: Vec<u8>,
    rec_ix: Vec<(u64, usize)>,
    /// HASH frame body and one lane's hashes, reused.
    hash_body: Vec<u8>,
    hash_run: Vec<u64>,
    /// A retransmission's bytes (the copy gets `flags.retransmit`), reused.
    rtx_scratch: Vec<u8>,
    /// The newest step whose record is in the open ORDER frame (for control's DUR_QUORUM).
    open_last_step: Option<u64>,
    /// Keep [`FrameInfo`] per frame (the invariant checks of the tests); off in production.
    track: bool,
    /// Heartbeat period (REP_HB_US unless the config overrides the budget).
    hb_ns: u64,
    /// This block's PacketRecords in O-order: (lane, first_lane_seq).
    block_recs: Vec<(u8, u64)>,
    prev_last_step: u64,
    prev_bounds: Vec<u64>,
    /// The frame ring for retransmission (REP_RTX_RING_BYTES).
    rtx: RtxRing,
    rtx_tokens: u64,
    rtx_refill_ns: u64,
    rtx_counters: RtxCounters,
    /// Block clock (stream-A only, 07 §3.9): `BLOCK_NS`, the next `k × BLOCK_NS`, its height.
    block_ns: u64,
    next_close: u64,
    next_height: u64,
    /// Frames sealed but not yet written on every live path, oldest first.
    pending: VecDeque<Pending>,
    /// Per path: declared down (REP_A_PATH), and since when (the probe clock).
    path_down: [bool; 2],
    down_since: [u64; 2],
    /// Writes since the last fence.
    unfenced: bool,
    /// A release waiting for its frames: (last frame_seq it needs, step), this half's cut.
    deferred: Option<(u64, u64)>,
    deferred_cut: Vec<u64>,
    /// frame_seq of the newest sealed frame.
    last_sealed: u64,
    gate: GateCounters,
}

impl StreamCore {
    /// Stream core of substream `h` of `cfg`'s box, starting its tenure at `base`: frame 1 is
    /// the TenureStart (07 §3.9), then a SessionBind per bound session of this half (§3.5).
    pub fn new(
        h: u8,
        cfg: &crate::shm::SeqConfig,
        base: &crate::takeover::TenureBase,
        sh: &mut impl StreamMem,
    ) -> Self {
        Self::with_ring(h, cfg, base, RtxRing::new(cfg.rtx_ring_bytes), sh)
    }

    /// [`StreamCore::new`] with its frame ring built (and faulted in) beforehand: a warm
    /// standby's box takes it at promotion (07 §9.5, B-REP-8).
    pub(crate) fn with_ring(
        h: u8,
        cfg: &crate::shm::SeqConfig,
        base: &crate::takeover::TenureBase,
        rtx: RtxRing,
        sh: &mut impl StreamMem,
    ) -> Self {
        let (layout, book, epoch) = (cfg.engine.layout, cfg.engine.book, cfg.epoch);
        let tenure = cfg.tenure;
        let first = layout.half_start(h);
        let len = layout.half_len(h);
        let mut w = FrameWriter::new(
            book,
            epoch,
            tenure.tenure,
            tenure.sender,
            h,
            REP_ORDER_FRAME_MAX,
        );
        let ts = base.tenure_start(&layout, h, epoch, tenure);
        let mut b = Vec::new();
        ts.encode(&mut b);
        w.tenure_start(&b);
        w.flush();
        for bind in base
            .binds
            .iter()
            .filter(|b| layout.stream_of(b.lane as usize) == h)
        {
            let mut b = Vec::new();
            encode_session_bind(bind, &mut b);
            w.section(&b);
        }
        w.flush();
        let mut s = StreamCore {
            h,
            layout,
            first,
            len,
            w,
            st: StepState::new(base.first_step, &ts.prev_cut),
            steprun_n: 0,
            steprun: Vec::with_capacity(256),
            drained: ts.prev_cut.clone(),
            written: ts.prev_cut.clone(),
            half_cut: ts.prev_cut.clone(),
            open_step: None,
            open_since: None,
            last_write: 0,
            info: FrameInfo::default(),
            hashes: (0..len).map(|_| Default::default()).collect(),
            mode: GateMode::Correct,
            scratch: Vec::with_capacity(256),
            run_buf: Vec::with_capacity(256),
            rec_bytes: Vec::with_capacity(4096),
            rec_ix: Vec::with_capacity(128),
            hash_body: Vec::with_capacity(512),
            hash_run: Vec::with_capacity(64),
            rtx_scratch: Vec::with_capacity(256),
            open_last_step: None,
            track: true,
            hb_ns: REP_HB_US * 1000,
            block_recs: Vec::new(),
            prev_last_step: base.prev_step(),
            prev_bounds: ts.prev_cut.clone(),
            rtx,
            rtx_tokens: RTX_BURST,
            rtx_refill_ns: 0,
            rtx_counters: RtxCounters::default(),
            block_ns: u64::MAX,
            next_close: u64::MAX,
            next_height: base.first_height,
            pending: VecDeque::new(),
            path_down: [false; 2],
            down_since: [0; 2],
            unfenced: false,
            deferred: None,
            deferred_cut: ts.prev_cut.clone(),
            last_sealed: 0,
            gate: GateCounters::default(),
        };
        s.send(0, sh);
        s
    }

    /// Serve a NACK for `from..=to` at `now` (07 §4.10): retransmit from the frame ring with
    /// `flags.retransmit`, at most REP_RTX_MAX_FPS (a token bucket with a small burst); a range
    /// older than the ring gets NackTooOld with the oldest frame_seq still held.
    ///
    /// `unicast`: where the NACK's sender takes its frames — each retransmission goes there
    /// alone, "unicast to the requesting replica" (§4.10), and a frame it refuses counts as
    /// capped (the sender NACKs it again). `None` (no sender address: the in-memory box):
    /// best effort on each live path.
    pub fn on_nack(
        &mut self,
        from: u64,
        to: u64,
        now: u64,
        sh: &mut impl StreamMem,
        mut unicast: Option<&mut RtxSink<'_>>,
    ) -> NackOutcome {
        self.rtx_counters.nacks += 1;
        // INV-REP-6: nothing leaves a fenced box, retransmissions included (07 §4.8).
        if sh.fenced() {
            return NackOutcome::default();
        }
        let per = 1_000_000_000 / REP_RTX_MAX_FPS;
        if now > self.rtx_refill_ns {
            let add = (now - self.rtx_refill_ns) / per;
            self.rtx_tokens = (self.rtx_tokens + add).min(RTX_BURST);
            self.rtx_refill_ns += add * per;
        }
        let mut out = NackOutcome::default();
        let Some(oldest) = self.rtx.oldest() else {
            return out;
        };
        if from < oldest {
            out.too_old = Some(oldest);
            self.rtx_counters.too_old += 1;
        }
        let first = from.max(oldest);
        // At most NACK_SPAN_MAX frames, whatever the caller passes (the wire refuses longer
        // NACKs; security review F5), and no walk past the tokens.
        let to = to.min(first.saturating_add(vyrn_wire::consts::NACK_SPAN_MAX - 1));
        for fs in first..=to {
            let Some(bytes) = self.rtx.get(fs) else {
                break;
            };
            if self.rtx_tokens == 0 {
                // The rest of the range the ring holds is capped without a look.
                let newest = self.rtx.newest().unwrap_or(fs).min(to);
                out.capped += newest.saturating_sub(fs) + 1;
                break;
            }
            self.rtx_tokens -= 1;
            self.rtx_scratch.clear();
            self.rtx_scratch.extend_from_slice(bytes);
            self.rtx_scratch[vyrn_wire::frame::FLAGS_OFFSET] |= FLAG_RETRANSMIT;
            let info = FrameInfo {
                stream: self.h,
                frame_seq: fs,
                ..FrameInfo::default()
            };
            if let Some(send) = unicast.as_mut() {
                // To the one replica that asked: a catch-up of thousands of frames never
                // reaches the healthy replicas as duplicates.
                if !send(&self.rtx_scratch) {
                    out.capped += 1;
                    continue;
                }
            } else {
                // Best effort on each live path: the receiver NACKs again what does not arrive.
                for p in 0..2u8 {
                    if !self.path_down[p as usize] {
                        let _ = sh.write_path(p, &info, &self.rtx_scratch);
                    }
                }
            }
            out.resent += 1;
        }
        self.rtx_counters.resent += out.resent;
        self.rtx_counters.capped += out.capped;
        out
    }

    /// Retransmission counters.
    pub fn rtx_counters(&self) -> RtxCounters {
        self.rtx_counters
    }

    /// Substream.
    pub fn stream(&self) -> u8 {
        self.h
    }

    /// Run the block clock (stream-A, 07 §3.9): post `close_req` for the next height each time
    /// the clock crosses `k × block_ns` (`u64::MAX`: never).
    pub fn set_block_ns(&mut self, block_ns: u64) {
        self.block_ns = block_ns;
        self.next_close = block_ns;
    }

    /// The heartbeat period: a HEARTBEAT after `ns` of silence (REP_HB_US is a budget, 07 §15).
    pub fn set_heartbeat_ns(&mut self, ns: u64) {
        self.hb_ns = ns.max(1_000);
    }

    /// Keep a [`FrameInfo`] per frame for the invariant checks (on by default; the box on its
    /// ports turns it off: it allocates per frame and per step).
    pub fn set_track(&mut self, on: bool) {
        self.track = on;
        if !on {
            self.info = FrameInfo::default();
        }
    }

    /// Break the gate on purpose (tests only).
    #[doc(hidden)]
    pub fn set_gate_mode(&mut self, m: GateMode) {
        self.mode = m;
    }

    fn close_steprun(&mut self) {
        if self.steprun_n == 0 {
            return;
        }
        // Its own buffer: `scratch` may hold the step record waiting to join the next run.
        self.run_buf.clear();
        self.run_buf.push(tag::STEP_RUN);
        push_u64(&mut self.run_buf, self.steprun_n);
        self.run_buf.extend_from_slice(&self.steprun);
        self.w.section(&self.run_buf);
        self.steprun.clear();
        self.steprun_n = 0;
    }

    /// The gate's counters.
    pub fn gate_counters(&self) -> GateCounters {
        self.gate
    }

    /// Per path: declared down (REP_A_PATH raised by this stream core).
    pub fn paths_down(&self) -> [bool; 2] {
        self.path_down
    }

    /// Frames sealed and not yet written on every live path.
    pub fn pending_frames(&self) -> usize {
        self.pending.len()
    }

    /// Write every sealed frame to both paths, in `frame_seq` order, keep it in the frame ring,
    /// and recycle the buffers: no allocation per frame while the paths take every write. A
    /// frame a path pushes back on waits in `pending` with its buffer (07 §4.2; module docs).
    fn send(&mut self, now: u64, sh: &mut impl StreamMem) {
        for k in 0..self.w.pending() {
            let f = self.w.take_frame(k);
            let Ok((hdr, _)) = FrameHeader::parse(&f) else {
                self.w.recycle(f);
                continue;
            };
            let order = hdr.kind == FrameKind::Order;
            if order {
                if let Some(step) = self.open_last_step.take() {
                    sh.frame_step(self.h, hdr.frame_seq, step);
                }
            }
            let mut info = if order && self.track {
                let n = self.info.lane_max.len();
                std::mem::replace(
                    &mut self.info,
                    FrameInfo {
                        lane_max: vec![0; n],
                        ..FrameInfo::default()
                    },
                )
            } else {
                FrameInfo::default()
            };
            info.stream = self.h;
            info.frame_seq = hdr.frame_seq;
            info.kind = Some(hdr.kind);
            self.last_sealed = hdr.frame_seq;
            self.last_write = now;
            // INV-REP-6: a fenced box writes nothing (the frame is sealed, never sent).
            if sh.fenced() {
                self.gate.fenced_drops += 1;
                self.w.recycle(f);
                continue;
            }
            // Keep it for retransmission (07 §4.10, REP_RTX_RING_BYTES).
            self.rtx.push(hdr.frame_seq, &f);
            let mut p = Pending {
                frame_seq: hdr.frame_seq,
                buf: f,
                info,
                done: [false; 2],
                since: now,
            };
            if self.pending.is_empty() && self.write_paths(&mut p, now, true, sh) {
                self.gate.frames += 1;
                self.w.recycle(p.buf);
            } else {
                self.gate.queued += 1;
                self.pending.push_back(p);
            }
        }
        self.w.clear_taken();
        self.pump(now, sh);
    }

    /// Try `p` on each live path it still needs (and, when `probe`, on a down path whose probe
    /// is due); true when every live path has it.
    fn write_paths(
        &mut self,
        p: &mut Pending,
        now: u64,
        probe: bool,
        sh: &mut impl StreamMem,
    ) -> bool {
        for path in 0..2usize {
            if p.done[path] {
                continue;
            }
            let down = self.path_down[path];
            if down && !(probe && now.saturating_sub(self.down_since[path]) >= PATH_PROBE_NS) {
                self.gate.skipped[path] += 1;
                continue;
            }
            match sh.write_path(path as u8, &p.info, &p.buf) {
                PathWrite::Done => {
                    p.done[path] = true;
                    self.unfenced = true;
                    if down {
                        // The probe went through: the path is back (REP_A_PATH cleared).
                        self.path_down[path] = false;
                        self.gate.path_up[path] += 1;
                        sh.path_alarm(path as u8, false);
                    }
                }
                PathWrite::Busy => {
                    if down {
                        self.down_since[path] = now;
                    } else {
                        self.gate.busy[path] += 1;
                    }
                }
                PathWrite::Failed => {
                    self.gate.failed[path] += 1;
                    if down {
                        self.down_since[path] = now;
                    } else {
                        self.declare_down(path, now, sh);
                    }
                }
            }
        }
        (0..2).all(|q| p.done[q] || self.path_down[q])
    }

    /// REP_A_PATH: path `path` is down; trading goes on on the other (07 §14).
    fn declare_down(&mut self, path: usize, now: u64, sh: &mut impl StreamMem) {
        self.path_down[path] = true;
        self.down_since[path] = now;
        self.gate.path_down[path] += 1;
        sh.path_alarm(path as u8, true);
        if self.path_down.iter().all(|&d| d) {
            // No path left to write on: nothing can be released again (INV-REP-6).
            self.gate.write_fences += 1;
            sh.fence();
        }
    }

    /// Retry the frames waiting for a path, oldest first, then fence and store a release whose
    /// frames are all out. Runs at every poll; never spins.
    fn pump(&mut self, now: u64, sh: &mut impl StreamMem) {
        while let Some(mut p) = self.pending.pop_front() {
            if sh.fenced() {
                self.gate.fenced_drops += 1 + self.pending.len() as u64;
                self.pending.clear();
                break;
            }
            if self.write_paths(&mut p, now, false, sh) {
                self.gate.frames += 1;
                self.w.recycle(p.buf);
                continue;
            }
            if now.saturating_sub(p.since) >= WRITE_RETRY_NS {
                if p.done.iter().any(|&d| d) {
                    // The other path took it: the busy one is down; go on with one path.
                    for path in 0..2 {
                        if !p.done[path] && !self.path_down[path] {
                            self.declare_down(path, now, sh);
                        }
                    }
                } else {
                    // No path took the frame in time: it cannot complete; fence (INV-REP-6).
                    self.gate.write_fences += 1;
                    sh.fence();
                }
                self.pending.push_front(p);
                continue;
            }
            self.pending.push_front(p);
            break;
        }
        self.try_release(sh);
    }

    /// Store the deferred release once every frame it needs is written and fenced (07 §4.2:
    /// write A, write B, fence, `released[H]`, then `LaneCut`).
    fn try_release(&mut self, sh: &mut impl StreamMem) {
        let Some((upto, step)) = self.deferred else {
            return;
        };
        if self.pending.front().is_some_and(|p| p.frame_seq <= upto) || sh.fenced() {
            return;
        }
        if self.unfenced {
            if !sh.fence_paths() {
                return; // the fence itself pushed back: try at the next poll
            }
            self.unfenced = false;
        }
        self.deferred = None;
        sh.release(self.h, step); // (release)
        for i in 0..self.len {
            sh.lane_cut(self.first + i, step, self.deferred_cut[i]); // INV-REP-11: after release
        }
    }

    /// Flush the open ORDER frame: write, fence, release (07 §4.2).
    fn flush(&mut self, now: u64, sh: &mut impl StreamMem) {
        self.close_steprun();
        if self.w.open_len() == 0 {
            return;
        }
        let release = self.open_step.take();
        self.w.flush();
        self.send(now, sh);
        self.open_since = None;
        self.written.copy_from_slice(&self.drained);
        if let Some(s) = release {
            self.deferred = Some((self.last_sealed, s));
            self.deferred_cut.copy_from_slice(&self.half_cut);
        }
        self.try_release(sh);
    }

    fn append_lane(&mut self, l: usize, now: u64, sh: &mut impl StreamMem) -> bool {
        let i = l - self.first;
        self.rec_bytes.clear();
        self.rec_ix.clear();
        while let Some(e) = sh.pkt_pop(l) {
            self.block_recs.push((l as u8, e.first_lane_seq));
            self.rec_bytes.extend_from_slice(&e.enc[..e.len as usize]);
            self.rec_ix.push((
                e.first_lane_seq + e.count.max(1) as u64 - 1,
                self.rec_bytes.len(),
            ));
        }
        if self.rec_ix.is_empty() {
            return false;
        }
        self.close_steprun();
        let mut k = 0;
        let start = |ix: &[(u64, usize)], k: usize| if k == 0 { 0 } else { ix[k - 1].1 };
        while k < self.rec_ix.len() {
            // As many records as fit the open frame (a run never straddles frames, §3.4).
            let room = REP_ORDER_FRAME_MAX.saturating_sub(self.w.open_len());
            let from = start(&self.rec_ix, k);
            let mut n = 0;
            while k + n < self.rec_ix.len() && 3 + self.rec_ix[k + n].1 - from <= room {
                n += 1;
            }
            if n == 0 {
                if self.w.open_len() == 0 {
                    n = 1;
                } else {
                    self.flush(now, sh);
                    continue;
                }
            }
            let to = self.rec_ix[k + n - 1].1;
            self.w.lane_run(l as u8, n, &self.rec_bytes[from..to]);
            // `drained` moves only as records enter the open frame: a flush in the middle of
            // this run copies it to `written`, and HASH frames name written records only.
            self.drained[i] = self.rec_ix[k + n - 1].0;
            if self.track {
                self.info.lane_max[l] = self.info.lane_max[l].max(self.drained[i]);
            }
            self.open_since.get_or_insert(now);
            k += n;
        }
        true
    }

    /// Close this substream's part of block `height` (07 §3.9, §6.1): BlockMark with the
    /// half's lane bounds after every record and step of the block, `order_root_H` over the
    /// block's ORDER section bytes, then a flush; the half goes to the order hasher.
    fn block_mark(&mut self, height: u64, last_step: u64, now: u64, sh: &mut impl StreamMem) {
        self.close_steprun();
        self.run_buf.clear();
        encode_block_mark(
            height,
            last_step,
            self.prev_last_step,
            &mut self.prev_bounds,
            &self.drained,
            &mut self.run_buf,
        );
        let root = self.w.block_mark(&self.run_buf);
        self.open_since.get_or_insert(now);
        self.flush(now, sh);
        sh.closed(
            self.h,
            ClosedHalf {
                height,
                first_step: self.prev_last_step + 1,
                last_step,
                order_root: root,
                // The next block's list starts at this one's size: one allocation per block.
                recs: {
                    let n = self.block_recs.len();
                    std::mem::replace(&mut self.block_recs, Vec::with_capacity(n + n / 4 + 16))
                },
            },
        );
        self.prev_last_step = last_step;
    }

    /// One poll at `now`. Returns whether it did anything.
    pub fn poll(&mut self, now: u64, sh: &mut impl StreamMem) -> bool {
        // INV-REP-6: a fenced box writes nothing more in this tenure.
        if sh.fenced() {
            return false;
        }
        if self.track && self.info.lane_max.is_empty() {
            self.info.lane_max = vec![0; self.layout.n_lanes as usize];
        }
        let mut busy = false;
        // Frames waiting for a path first, in frame_seq order (the gate under backpressure).
        if !self.pending.is_empty() {
            self.pump(now, sh);
            busy = true;
            if sh.fenced() {
                return true;
            }
        }
        // Block clock (07 §3.9): `close_req` at k × BLOCK_NS; the BBO core places the mark
        // entry after its current step. A request not yet taken is not overwritten.
        if now >= self.next_close && sh.post_close(self.next_height) {
            self.next_height += 1;
            self.next_close = self.next_close.saturating_add(self.block_ns);
            busy = true;
        }
        // Part B: frame the lanes' records ahead of the steps.
        for l in self.first..self.first + self.len {
            busy |= self.append_lane(l, now, sh);
            while let Some(h) = sh.hash8_pop(l) {
                self.hashes[l - self.first].push_back(h);
                busy = true;
            }
        }
        // Part A: this half's records of every ready step (bounded): a burst coalesces into as
        // few frames as the body cap allows (§4.5), flushed once below.
        let mut gated = false;
        for _ in 0..STREAM_STEPS_PER_POLL {
            let Some(msg) = sh.step_peek(self.h) else {
                break;
            };
            let se = match msg {
                StepMsg::Step(se) => se,
                StepMsg::Mark { height, last_step } => {
                    sh.step_pop(self.h);
                    self.block_mark(height, last_step, now, sh);
                    busy = true;
                    continue;
                }
            };
            let cut = &se.cut[self.first..self.first + self.len];
            let home = self.layout.home_of(se.src_lane) == self.h;
            let moved = cut != self.half_cut.as_slice();
            if !home && !moved {
                sh.step_pop(self.h);
                continue;
            }
            // INV-REP-2: every record ≤ the half-cut is framed before the step's record.
            if cut.iter().zip(&self.drained).any(|(c, d)| c > d) {
                break; // its records are not in the ring yet; never expected (lanes push first)
            }
            // OTHER: the other substream carries a record of this step too (§3.8).
            let other = se.spans;

            self.scratch.clear();
            let ok = encode_step_half(
                &mut self.st,
                self.first,
                &HalfRecord {
                    step: se.step,
                    kind: se.kind,
                    home,
                    other,
                    src_lane: if home { se.src_lane } else { SRC_NONE },
                    src_lane_seq: se.src_lane_seq,
                    payload: &se.payload[..se.plen as usize],
                    cut,
                },
                &mut self.scratch,
            );
            if !ok {
                sh.error();
                sh.step_pop(self.h);
                continue;
            }
            // The StepRun section must fit the open frame; flush complete steps first.
            let need = self.scratch.len() + self.steprun.len() + 11;
            if self.w.open_len() + need > REP_ORDER_FRAME_MAX && self.w.open_len() > 0 {
                self.flush(now, sh);
            }
            self.steprun.extend_from_slice(&self.scratch);
            self.steprun_n += 1;
            self.half_cut.copy_from_slice(cut);
            self.open_step = Some(se.step);
            self.open_last_step = Some(se.step);
            if self.track {
                self.info.steps.push((se.step, cut.to_vec()));
            }
            if self.mode == GateMode::ReleaseOnAppend {
                sh.release(self.h, se.step);
                for i in 0..self.len {
                    sh.lane_cut(self.first + i, se.step, self.half_cut[i]);
                }
            }
            self.open_since.get_or_insert(now);
            sh.step_pop(self.h);
            gated = true;
            busy = true;
        }
        // Flush rules (§4.5): a gated step, or the open frame's age.
        let aged = self
            .open_since
            .is_some_and(|t| now.saturating_sub(t) >= REP_FLUSH_MAX_NS);
        if (gated && self.mode == GateMode::Correct) || aged {
            self.flush(now, sh);
        }
        // HEADER frames (substream A, wire-decisions 24), once the order hasher signed them.
        if self.h == 0 {
            while let Some(hdr) = sh.header_pop() {
                self.w.header_frame(&hdr);
                self.send(now, sh);
                busy = true;
            }
        }
        // HASH frames: hashes of written records only (a HashRun names records already decoded).
        // They are on no response path: a poll that just released a gated step leaves them to
        // the next poll (so the TX tile answers first), unless many wait.
        let waiting: usize = self.hashes.iter().map(VecDeque::len).sum();
        if gated && self.mode == GateMode::Correct && waiting < HASH_DEFER_MAX {
            return true;
        }
        self.hash_body.clear();
        for i in 0..self.len {
            let q = &mut self.hashes[i];
            self.hash_run.clear();
            while let Some(&(first, h)) = q.front() {
                if first > self.written[i] {
                    break;
                }
                self.hash_run.push(h);
                q.pop_front();
            }
            if !self.hash_run.is_empty() {
                encode_hash_run((self.first + i) as u8, &self.hash_run, &mut self.hash_body);
            }
        }
        if !self.hash_body.is_empty() {
            self.w.hash_frame(&self.hash_body);
            self.send(now, sh);
            busy = true;
        }
        // HEARTBEAT after REP_HB_US of silence.
        if self.pending.is_empty() && now.saturating_sub(self.last_write) >= self.hb_ns {
            self.w.heartbeat(&Heartbeat {
                last_step: sh.released(self.h),
                last_height: 0,
                ptp_now: now,
            });
            self.send(now, sh);
        }
        busy
    }
}

#[cfg(test)]
mod tests {
    use super::RtxRing;

    /// The circular frame log keeps the newest frames that fit, byte for byte, across wraps.
    #[test]
    fn rtx_ring_keeps_the_newest_frames_across_wraps() {
        let mut r = RtxRing::new(1000);
        let frame = |fs: u64| -> Vec<u8> { vec![fs as u8; 20 + (fs as usize * 37) % 180] };
        for fs in 1..=500u64 {
            r.push(fs, &frame(fs));
            let oldest = r.oldest().expect("holds the newest");
            assert!(oldest <= fs);
            // Everything from `oldest` to `fs` is there and intact; total ≤ the ring.
            let mut total = 0;
            for k in oldest..=fs {
                let got = r.get(k).expect("held");
                assert_eq!(got, frame(k).as_slice(), "frame {k} after pushing {fs}");
                total += got.len();
            }
            assert!(total <= 1000);
            assert!(r.get(oldest.saturating_sub(1)).is_none() || oldest == 1);
            assert!(r.get(fs + 1).is_none());
        }
        // A frame larger than the ring empties it rather than keeping a torn copy.
        r.push(501, &[0; 2000]);
        assert_eq!(r.oldest(), None);
    }
}
