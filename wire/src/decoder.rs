//! The replica-side order-stream decoder (07 §3.5, §3.12, §6.1).
//!
//! [`DecState`] holds `LaneDec` per lane and `StepDec` per substream, decodes ORDER, HASH, HEADER
//! and HEARTBEAT frames in `frame_seq` order per substream, merges the two substreams' step half
//! records by StepId (§3.8), computes `order_root_A/B` and `order_root` per block (§6.1,
//! wire-decisions 14) and stops a substream at its first `REP_E_*` error, with
//! (epoch, tenure, stream, frame_seq) (§3.12). Records decoded before an error in the same frame
//! are still delivered (wire-decisions 26).
//!
//! # Hot path
//! Decoding a frame allocates nothing in the common case: records go to a [`Sink`] by reference,
//! a step's cut is handed out as a slice of the decoder's merged cut. Memory grows only in
//! bounded queues: records awaiting their HashRun (`AWAIT_HASH_MAX` per lane, beyond which the
//! sequencer is at fault: `REP_E_HASHLAG`), step half records waiting for the other substream
//! (`PENDING_MAX` per substream; check [`DecState::would_block`] to pause a substream that runs
//! ahead), LSEQ_EXC gaps and shed ranges (`RANGE_MAX` per lane, oldest forgotten).
//!
//! No input can panic it or loop it: every loop is bounded by the bytes of the frame.

use std::collections::VecDeque;

use crate::consts::*;
use crate::error::{fail, RepE, RepErr, E};
use crate::frame::{FrameHeader, FrameKind, Heartbeat};
use crate::header::{empty_root, BlockHeader, Hash};
use crate::layout::Layout;
use crate::leb::Reader;
use crate::records::*;

/// ORDER bytes batched before a BLAKE3 update (see `StreamDec::root_buf`).
const ROOT_BATCH: usize = 32 * 1024;

/// Step half records one substream may hold while the other lags.
pub const PENDING_MAX: usize = 1 << 18;
/// LSEQ_EXC gap ranges and shed ranges remembered per lane (oldest forgotten beyond this).
pub const RANGE_MAX: usize = 4096;

/// Where a record was decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Pos {
    /// Substream.
    pub stream: u8,
    /// Frame.
    pub frame_seq: u64,
}

/// A PacketRecord waiting for its `pkt_hash` (07 §3.5 `awaiting_hash`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Awaiting {
    /// Session.
    pub session: u32,
    /// pkt_seq.
    pub pkt_seq: u32,
    /// LaneSeq of the first message.
    pub first_lane_seq: u64,
    /// Frame that carried the record.
    pub frame_seq: u64,
    /// Caller's clock when that frame was decoded (for `REP_E_HASHLAG`).
    pub t_ns: u64,
}

/// Roots of one block (07 §6.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockRoots {
    /// Height.
    pub height: u64,
    /// Last StepId of the block.
    pub last_step: u64,
    /// BLAKE3(order_root_A ‖ order_root_B).
    pub order_root: Hash,
    /// Substream A's root.
    pub order_root_a: Hash,
    /// Substream B's root (BLAKE3 of nothing with one substream).
    pub order_root_b: Hash,
}

/// Receives decoded records. Every method has an empty default.
#[allow(unused_variables)]
pub trait Sink {
    /// A substream's TenureStart.
    fn tenure(&mut self, at: Pos, t: &TenureStart) {}
    /// A PacketRecord (Advance included).
    fn pkt(&mut self, at: Pos, r: &PacketRecord) {}
    /// An AcctTake.
    fn take(&mut self, at: Pos, t: &AcctTake) {}
    /// A SessionBind.
    fn bind(&mut self, at: Pos, b: &SessionBind) {}
    /// A complete step, in StepId order; `cut` has `N_LANES` values.
    fn step(&mut self, s: &Step, cut: &[u64], payload: &[u8]) {}
    /// One substream's BlockMark; `lane_bounds` are its half's lanes.
    fn mark(&mut self, at: Pos, m: &BlockMark, lane_bounds: &[u64]) {}
    /// A block whose marks both passed and whose steps were all delivered.
    fn block(&mut self, b: &BlockRoots) {}
    /// A `pkt_hash` attached to an awaiting record of `lane`.
    fn hash(&mut self, at: Pos, lane: u8, rec: &Awaiting, pkt_hash: u64) {}
    /// A HEADER frame's BlockHeader.
    fn header(&mut self, at: Pos, h: &BlockHeader) {}
    /// A HEARTBEAT.
    fn heartbeat(&mut self, at: Pos, hb: &Heartbeat) {}
    /// ORDER section bytes of substream `stream` that belong to block `height`, in `frame_seq`
    /// order: exactly the bytes `order_root_H(height)` hashes (07 §6.1), handed over as the
    /// decoder passes them, before that block's `block` event. A journal keeps them.
    fn order_bytes(&mut self, stream: u8, height: u64, bytes: &[u8]) {}
}

/// A sink that discards everything (benchmarks, fuzzing).
#[derive(Debug, Default, Clone, Copy)]
pub struct NullSink;
impl Sink for NullSink {}

#[derive(Debug, Default, Clone)]
struct LaneDec {
    st: LaneState,
    table: usize,
    base: u64,
    awaiting: Fifo<Awaiting>,
    gaps: VecDeque<(u64, u64)>,
    gap_floor: u64,
    shed: VecDeque<(u64, u64)>,
    shed_floor: u64,
}

impl LaneDec {
    /// wire-decisions 7: LaneSeqs below the base count as decoded; LSEQ_EXC gaps do not.
    fn names_decoded_op(&self, q: u64) -> bool {
        if q == 0 || q >= self.st.next_lane_seq {
            return false;
        }
        if q < self.base || q < self.gap_floor {
            return true;
        }
        !self.gaps.iter().rev().any(|&(a, b)| a <= q && q <= b)
    }
    fn op_is_shed(&self, q: u64) -> bool {
        q >= self.shed_floor && self.shed.iter().rev().any(|&(a, b)| a <= q && q <= b)
    }
    fn push_range(v: &mut VecDeque<(u64, u64)>, floor: &mut u64, r: (u64, u64)) {
        if v.len() == RANGE_MAX {
            if let Some((_, b)) = v.pop_front() {
                *floor = b + 1;
            }
        }
        v.push_back(r);
    }
}

#[derive(Debug, Clone)]
struct PendingHalf {
    step: u64,
    kind: StepKind,
    home: bool,
    other: bool,
    src_lane: u8,
    src_lane_seq: u64,
    changed: u64,
    payload: Vec<u8>,
}

#[derive(Debug, Clone)]
struct StreamDec {
    next_frame_seq: u64,
    tenure: Option<TenureStart>,
    step: StepState,
    next_height: u64,
    last_mark_step: u64,
    bounds: [u64; N_HALF_MAX],
    hasher: blake3::Hasher,
    /// ORDER section bytes not yet fed to `hasher`: BLAKE3 runs its wide SIMD path only on
    /// updates of many whole chunks, so bytes are batched (`ROOT_BATCH`) and fed 1 KiB-aligned.
    root_buf: Vec<u8>,
    roots: VecDeque<(u64, u64, Hash)>,
    pending: VecDeque<PendingHalf>,
    pending_vals: VecDeque<u64>,
    failed: Option<RepErr>,
    dup_frames: u64,
    /// When the newest in-order frame of this substream was decoded (the caller's clock): the
    /// hash-lag clock of its records.
    last_rx_ns: u64,
}

impl StreamDec {
    #[inline]
    fn root_bytes(&mut self, b: &[u8]) {
        self.root_buf.extend_from_slice(b);
        if self.root_buf.len() >= ROOT_BATCH {
            let n = self.root_buf.len() & !1023;
            self.hasher.update(&self.root_buf[..n]);
            self.root_buf.drain(..n);
        }
    }

    fn root_finish(&mut self) -> Hash {
        self.hasher.update(&self.root_buf);
        self.root_buf.clear();
        let r = *self.hasher.finalize().as_bytes();
        self.hasher.reset();
        r
    }

    fn new() -> Self {
        StreamDec {
            next_frame_seq: 1,
            tenure: None,
            step: StepState::new(1, &[]),
            next_height: 0,
            last_mark_step: 0,
            bounds: [0; N_HALF_MAX],
            hasher: blake3::Hasher::new(),
            root_buf: Vec::with_capacity(ROOT_BATCH + 64 * 1024),
            roots: VecDeque::new(),
            pending: VecDeque::new(),
            pending_vals: VecDeque::new(),
            failed: None,
            dup_frames: 0,
            last_rx_ns: 0,
        }
    }
}

/// Counters an SRE reads (per decoder).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct DecCounters {
    /// Frames decoded.
    pub frames: u64,
    /// PacketRecords (Advance included).
    pub pkts: u64,
    /// Complete steps delivered.
    pub steps: u64,
    /// Blocks completed.
    pub blocks: u64,
    /// Hashes attached.
    pub hashes: u64,
    /// Frames below the expected frame_seq (duplicates), dropped.
    pub dup_frames: u64,
    /// Errors by code, indexed by `RepE::index`.
    pub errors: [u64; 8],
}

/// The decoder state of one replica for one tenure (07 §3.5).
#[derive(Debug, Clone)]
pub struct DecState {
    layout: Layout,
    lanes: Vec<LaneDec>,
    tables: Vec<SlotTable>,
    streams: [StreamDec; 2],
    epoch: u32,
    tenure: u8,
    sender: u8,
    epoch16: u16,
    next_emit: u64,
    merged_cut: [u64; N_LANES_MAX],
    blocks_ready: VecDeque<BlockRoots>,
    counters: DecCounters,
    /// REP_HASHLAG_FAULT_NS unless the caller's budget says otherwise.
    hashlag_fault_ns: u64,
}

struct Ctx {
    stream: u8,
    frame_seq: u64,
    now: u64,
}

impl DecState {
    /// A decoder for `layout` (which must validate).
    pub fn new(layout: Layout) -> Result<Self, &'static str> {
        layout.validate()?;
        let n = layout.n_lanes as usize;
        let lanes = (0..n)
            .map(|l| LaneDec {
                table: if layout.is_pool(l) { n } else { l },
                awaiting: Fifo::with_capacity(64),
                ..Default::default()
            })
            .collect();
        let tables = (0..=n).map(|_| SlotTable::default()).collect();
        Ok(DecState {
            layout,
            lanes,
            tables,
            streams: [StreamDec::new(), StreamDec::new()],
            epoch: 0,
            tenure: 0,
            sender: 0,
            epoch16: 0,
            next_emit: 0,
            merged_cut: [0; N_LANES_MAX],
            blocks_ready: VecDeque::new(),
            counters: DecCounters::default(),
            hashlag_fault_ns: REP_HASHLAG_FAULT_NS,
        })
    }

    /// The hash-lag fault threshold (07 §3.7's 1 ms, REP_HASHLAG_FAULT_NS, is a budget of the
    /// REF box; a dev home whose order hasher shares a core with its replicas sets more).
    pub fn set_hashlag_fault_ns(&mut self, ns: u64) {
        self.hashlag_fault_ns = ns.max(1);
    }

    /// The hash-lag fault threshold in force.
    pub fn hashlag_fault_ns(&self) -> u64 {
        self.hashlag_fault_ns
    }

    /// The layout.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// Counters so far.
    pub fn counters(&self) -> DecCounters {
        let mut c = self.counters;
        c.dup_frames = self.streams[0].dup_frames + self.streams[1].dup_frames;
        c
    }

    /// The first error of substream `s`, if it stopped.
    pub fn failed(&self, s: u8) -> Option<RepErr> {
        self.streams.get(s as usize).and_then(|x| x.failed)
    }

    /// Next frame_seq expected on substream `s`.
    pub fn next_frame_seq(&self, s: u8) -> u64 {
        self.streams.get(s as usize).map_or(0, |x| x.next_frame_seq)
    }

    /// True when substream `s` holds so many unmerged step records that the caller should feed
    /// the other substream first.
    pub fn would_block(&self, s: u8) -> bool {
        self.streams
            .get(s as usize)
            .is_some_and(|x| x.pending.len() >= PENDING_MAX - 1024)
    }

    /// Records awaiting a hash on lane `l`.
    pub fn awaiting_hash(&self, l: usize) -> usize {
        self.lanes.get(l).map_or(0, |d| d.awaiting.len())
    }

    fn err(&mut self, stream: u8, frame_seq: u64, e: E) -> RepErr {
        let r = RepErr {
            code: e.0,
            epoch: if self.streams.iter().any(|s| s.tenure.is_some()) {
                self.epoch
            } else {
                self.epoch16 as u32
            },
            tenure: self.tenure,
            stream,
            frame_seq,
            detail: e.1,
        };
        self.counters.errors[e.0.index()] += 1;
        if let Some(s) = self.streams.get_mut(stream as usize) {
            if s.failed.is_none() {
                s.failed = Some(r);
            }
        }
        r
    }

    /// `REP_E_HASHLAG` if any record has waited more than 1 ms (the configured budget) for its
    /// hash (07 §3.7, INV-REP-8). The wait runs on its substream's deliveries: it is the time
    /// from the record's frame to the newest later frame of that substream decoded without the
    /// hash. A hole being repaired (NACK, peer repair, a restarted replica catching up) stalls
    /// delivery and is no fault of the sequencer's; a sequencer that goes on sending frames
    /// (heartbeats included) without the hash is.
    pub fn tick(&mut self, now_ns: u64) -> Result<(), RepErr> {
        for l in 0..self.lanes.len() {
            if let Some(a) = self.lanes[l].awaiting.front() {
                let s = self.layout.stream_of(l);
                let seen = self.streams[s as usize].last_rx_ns.min(now_ns);
                if seen.saturating_sub(a.t_ns) > self.hashlag_fault_ns
                    && self.streams[s as usize].failed.is_none()
                {
                    {
                        let fs = a.frame_seq;
                        return Err(self.err(
                            s,
                            fs,
                            E(
                                RepE::HashLag,
                                "record waited past the hash-lag budget (1 ms on REF) for its hash",
                            ),
                        ));
                    }
                }
            }
        }
        Ok(())
    }

    /// Decode one frame (07 §3.12). `now_ns` is the caller's clock, used only for the hash-lag
    /// rule. Frames must arrive in `frame_seq` order per substream; a lower `frame_seq` (the other
    /// path's copy, a retransmission) is counted and dropped.
    pub fn on_frame<S: Sink>(
        &mut self,
        frame: &[u8],
        now_ns: u64,
        sink: &mut S,
    ) -> Result<(), RepErr> {
        let (h, body) = match FrameHeader::parse(frame) {
            Ok(x) => x,
            Err(m) => {
                let s = frame
                    .get(21)
                    .copied()
                    .filter(|&s| s < self.layout.n_streams)
                    .unwrap_or(0);
                if let Some(e) = self.streams[s as usize].failed {
                    return Err(e); // a stopped substream stays stopped with its first error
                }
                let fs = frame
                    .get(8..16)
                    .map_or(0, |b| u64::from_le_bytes(b.try_into().unwrap_or([0; 8])));
                return Err(self.err(s, fs, E::from(m)));
            }
        };
        if h.stream >= self.layout.n_streams {
            // Not a substream of this layout: reported, counted, but it stops nothing.
            self.counters.errors[RepE::Tag.index()] += 1;
            return Err(RepErr {
                code: RepE::Tag,
                epoch: self.epoch,
                tenure: self.tenure,
                stream: h.stream,
                frame_seq: h.frame_seq,
                detail: "frame on a substream the layout lacks",
            });
        }
        let si = h.stream as usize;
        if let Some(e) = self.streams[si].failed {
            return Err(e);
        }
        if h.frame_seq < self.streams[si].next_frame_seq {
            self.streams[si].dup_frames += 1;
            return Ok(());
        }
        if h.frame_seq > self.streams[si].next_frame_seq {
            return Err(self.err(
                h.stream,
                h.frame_seq,
                E(RepE::Frame, "frame_seq gap: decode needs frames in order"),
            ));
        }
        // The substream's hash-lag clock never runs back: a frame stamped earlier than one
        // already decoded (a live datagram that waited in the socket behind frames read back
        // from the order journal or repaired, stamped at their decode) counts as delivered
        // then. Its records dated by the older stamp looked late at once (a false
        // REP_E_HASHLAG at a restarted replica under load: record stamped 0, 513 ms behind).
        let now_ns = now_ns.max(self.streams[si].last_rx_ns);
        let ctx = Ctx {
            stream: h.stream,
            frame_seq: h.frame_seq,
            now: now_ns,
        };
        let r = self.frame_inner(&h, body, &ctx, sink);
        match r {
            Ok(()) => {
                self.streams[si].next_frame_seq += 1;
                let prev = self.streams[si].last_rx_ns;
                let gap = now_ns.saturating_sub(prev);
                if self.streams[si].next_frame_seq > 2 && gap > self.hashlag_fault_ns {
                    // The substream delivered nothing for longer than the budget (a hole under
                    // repair, a catch-up): that time is not the sequencer's, so the records
                    // waiting since before it wait on from here (07 §3.7 is about frames sent).
                    for l in 0..self.lanes.len() {
                        if self.layout.stream_of(l) as usize != si {
                            continue;
                        }
                        self.lanes[l].awaiting.for_each_mut(|a| {
                            if a.t_ns <= prev {
                                a.t_ns += gap;
                            }
                        });
                    }
                }
                self.streams[si].last_rx_ns = prev.max(now_ns);
                self.counters.frames += 1;
                Ok(())
            }
            Err(e) => Err(self.err(h.stream, h.frame_seq, e)),
        }
    }

    fn frame_inner<S: Sink>(
        &mut self,
        h: &FrameHeader,
        body: &[u8],
        ctx: &Ctx,
        sink: &mut S,
    ) -> Result<(), E> {
        let si = h.stream as usize;
        let mut r = Reader::new(body);
        let mut root_from = 0usize;
        if h.frame_seq == 1 {
            // wire-decisions 21: frame 1 begins with TenureStart.
            if h.kind != FrameKind::Order || r.u8().ok() != Some(tag::TENURE_START) {
                return fail(RepE::Tenure, "frame 1 does not begin with TenureStart");
            }
            self.tenure_start(h, &mut r, ctx, sink)?;
            root_from = r.pos();
        } else {
            let Some(t) = &self.streams[si].tenure else {
                return fail(RepE::Tenure, "no TenureStart on this substream");
            };
            if h.tenure != t.tenure || h.sender != t.sender || h.epoch16 != t.epoch as u16 {
                return fail(RepE::Tenure, "frame header disagrees with TenureStart");
            }
        }
        let at = Pos {
            stream: h.stream,
            frame_seq: h.frame_seq,
        };
        match h.kind {
            FrameKind::Order => {
                while !r.is_empty() {
                    let t = r.u8()?;
                    match t {
                        0..=tag::LANE_RUN_MAX => self.lane_run(t as usize, &mut r, ctx, sink)?,
                        tag::STEP_RUN => {
                            let m = r.leb_u64()?;
                            for _ in 0..m {
                                self.step_half(&mut r, ctx, sink)?;
                            }
                        }
                        tag::BLOCK_MARK => {
                            self.block_mark(&mut r, ctx, sink)?;
                            let s = &mut self.streams[si];
                            s.root_bytes(&body[root_from..r.pos()]);
                            sink.order_bytes(
                                si as u8,
                                s.next_height - 1,
                                &body[root_from..r.pos()],
                            );
                            let root = s.root_finish();
                            root_from = r.pos();
                            let (hh, ls) = (s.next_height - 1, s.last_mark_step);
                            s.roots.push_back((hh, ls, root));
                            self.pair_roots()?;
                            self.drain_blocks(sink);
                        }
                        tag::SESSION_BIND => self.session_bind(&mut r, at, sink)?,
                        tag::TENURE_START => {
                            return fail(
                                RepE::Tenure,
                                "TenureStart after the first section of frame 1",
                            )
                        }
                        tag::PAD => r.skip_rest(),
                        _ => {
                            return fail(
                                RepE::Tag,
                                "reserved or misplaced section tag in ORDER frame",
                            )
                        }
                    }
                }
                self.streams[si].root_bytes(&body[root_from..]);
                let open = self.streams[si].next_height;
                sink.order_bytes(si as u8, open, &body[root_from..]);
            }
            FrameKind::Hash => {
                while !r.is_empty() {
                    match r.u8()? {
                        tag::HASH_RUN => self.hash_run(&mut r, at, sink)?,
                        tag::PAD => r.skip_rest(),
                        _ => return fail(RepE::Tag, "non-HashRun section in HASH frame"),
                    }
                }
            }
            FrameKind::Header => {
                if h.stream != 0 {
                    return fail(RepE::Tag, "HEADER frame on substream B");
                }
                let hdr = BlockHeader::parse(body)?;
                sink.header(at, &hdr);
            }
            FrameKind::Heartbeat => {
                let hb = Heartbeat::parse(body)?;
                sink.heartbeat(at, &hb);
            }
        }
        Ok(())
    }

    fn tenure_start<S: Sink>(
        &mut self,
        h: &FrameHeader,
        r: &mut Reader<'_>,
        ctx: &Ctx,
        sink: &mut S,
    ) -> Result<(), E> {
        let hl = self.layout.half_len(h.stream);
        let start = self.layout.half_start(h.stream);
        let epoch = r.u32_le()?;
        let tenure = r.u8()?;
        let sender = r.u8()?;
        let first_step = r.u64_le()?;
        let first_height = r.u64_le()?;
        let prev_header_hash = r.array::<32>()?;
        let mut lanes = Vec::with_capacity(hl);
        for _ in 0..hl {
            let next_lane_seq = r.leb_u64()?;
            let rx_ts_base = r.u64_le()?;
            let fills_applied_base = r.leb_u64()?;
            lanes.push(LaneBase {
                next_lane_seq,
                rx_ts_base,
                fills_applied_base,
            });
        }
        let mut prev_cut = Vec::with_capacity(hl);
        for _ in 0..hl {
            prev_cut.push(r.leb_u64()?);
        }
        let t = TenureStart {
            epoch,
            tenure,
            sender,
            first_step,
            first_height,
            prev_header_hash,
            lanes,
            prev_cut,
        };
        if h.tenure != tenure || h.sender != sender || h.epoch16 != epoch as u16 {
            return fail(RepE::Tenure, "TenureStart disagrees with its frame header");
        }
        if first_step == 0 || first_step == u64::MAX || first_height == u64::MAX {
            return fail(
                RepE::Tenure,
                "TenureStart first_step/first_height out of range",
            );
        }
        for (b, &c) in t.lanes.iter().zip(&t.prev_cut) {
            if c > b.next_lane_seq.saturating_sub(1) {
                return fail(RepE::Tenure, "TenureStart prev_cut above next_lane_seq - 1");
            }
        }
        let other = 1 - h.stream as usize;
        if let Some(o) = &self.streams[other].tenure {
            if !o.same_tenure(&t) {
                return fail(RepE::Tenure, "TenureStarts of the two substreams disagree");
            }
        } else {
            self.epoch = epoch;
            self.tenure = tenure;
            self.sender = sender;
            self.epoch16 = epoch as u16;
            self.next_emit = first_step;
        }
        for (i, b) in t.lanes.iter().enumerate() {
            let d = &mut self.lanes[start + i];
            d.st = LaneState::from_base(b);
            d.base = b.next_lane_seq;
        }
        self.merged_cut[start..start + hl].copy_from_slice(&t.prev_cut);
        let s = &mut self.streams[h.stream as usize];
        s.step = StepState::new(first_step, &t.prev_cut);
        s.next_height = first_height;
        s.last_mark_step = first_step - 1;
        s.bounds[..hl].copy_from_slice(&t.prev_cut);
        s.hasher.reset();
        s.root_buf.clear();
        sink.tenure(
            Pos {
                stream: h.stream,
                frame_seq: ctx.frame_seq,
            },
            &t,
        );
        s.tenure = Some(t);
        Ok(())
    }

    #[inline]
    fn lane_run<S: Sink>(
        &mut self,
        l: usize,
        r: &mut Reader<'_>,
        ctx: &Ctx,
        sink: &mut S,
    ) -> Result<(), E> {
        if l >= self.layout.n_lanes as usize || self.layout.stream_of(l) != ctx.stream {
            return fail(
                RepE::Tag,
                "LaneRun for a lane outside this substream's half",
            );
        }
        let k = r.leb_u64()?;
        let at = Pos {
            stream: ctx.stream,
            frame_seq: ctx.frame_seq,
        };
        let pool = self.layout.is_pool(l);
        let d = &mut self.lanes[l];
        let tbl = &mut self.tables[d.table];
        for _ in 0..k {
            decode_pkt(l as u8, pool, d, tbl, r, ctx, at, sink)?;
            self.counters.pkts += 1;
        }
        Ok(())
    }

    fn session_bind<S: Sink>(
        &mut self,
        r: &mut Reader<'_>,
        at: Pos,
        sink: &mut S,
    ) -> Result<(), E> {
        let lane = r.u8()?;
        let slot = r.leb_u16()?;
        let session = r.u32_le()?;
        let next_pkt_seq = r.leb_u32()?;
        if lane as usize >= self.layout.n_lanes as usize {
            return fail(RepE::Tag, "SessionBind for a lane >= N_LANES");
        }
        if slot as usize >= MAX_SESSIONS_PER_LANE {
            return fail(RepE::Count, "SessionBind slot >= MAX_SESSIONS_PER_LANE");
        }
        let t = self.lanes[lane as usize].table;
        self.tables[t].bind(slot, session, next_pkt_seq);
        sink.bind(
            at,
            &SessionBind {
                lane,
                slot,
                session,
                next_pkt_seq,
            },
        );
        Ok(())
    }

    fn hash_run<S: Sink>(&mut self, r: &mut Reader<'_>, at: Pos, sink: &mut S) -> Result<(), E> {
        let lane = r.u8()? as usize;
        let k = r.leb_u64()?;
        if lane >= self.layout.n_lanes as usize || self.layout.stream_of(lane) != at.stream {
            return fail(
                RepE::Tag,
                "HashRun for a lane outside this substream's half",
            );
        }
        if k > (r.remaining() / 8) as u64 {
            return fail(RepE::Frame, "truncated");
        }
        if k > self.lanes[lane].awaiting.len() as u64 {
            return fail(
                RepE::HashLag,
                "HashRun names more records than await a hash",
            );
        }
        for _ in 0..k {
            let hsh = r.u64_le()?;
            if let Some(a) = self.lanes[lane].awaiting.pop() {
                self.counters.hashes += 1;
                sink.hash(at, lane as u8, &a, hsh);
            }
        }
        Ok(())
    }

    fn block_mark<S: Sink>(
        &mut self,
        r: &mut Reader<'_>,
        ctx: &Ctx,
        sink: &mut S,
    ) -> Result<(), E> {
        let si = ctx.stream as usize;
        let start = self.layout.half_start(ctx.stream);
        let hl = self.layout.half_len(ctx.stream);
        let height = r.leb_u64()?;
        let d_last = r.leb_u64()?;
        let bitmap = r.bytes(hl.div_ceil(8))?;
        let s = &mut self.streams[si];
        if height != s.next_height {
            return fail(RepE::Cut, "BlockMark height is not the previous + 1");
        }
        let last_step = s
            .last_mark_step
            .checked_add(d_last)
            .ok_or(E(RepE::Frame, "overflow"))?;
        if s.step.prev_step > last_step {
            return fail(
                RepE::Cut,
                "BlockMark last_step below a step carried before it",
            );
        }
        for i in 0..hl {
            if bitmap[i / 8] & (1 << (i % 8)) != 0 {
                let dv = r.leb_u64()?;
                s.bounds[i] = s.bounds[i]
                    .checked_add(dv)
                    .ok_or(E(RepE::Frame, "overflow"))?;
            }
        }
        if hl % 8 != 0 && bitmap[hl / 8] >> (hl % 8) != 0 {
            return fail(RepE::Cut, "BlockMark bitmap bit beyond the half");
        }
        for i in 0..hl {
            if s.bounds[i] != self.lanes[start + i].st.next_lane_seq.saturating_sub(1) {
                return fail(
                    RepE::Cut,
                    "BlockMark lane_bounds differ from the decoded lane",
                );
            }
        }
        s.next_height = height + 1;
        s.last_mark_step = last_step;
        let m = BlockMark {
            stream: ctx.stream,
            height,
            last_step,
        };
        sink.mark(
            Pos {
                stream: ctx.stream,
                frame_seq: ctx.frame_seq,
            },
            &m,
            &s.bounds[..hl],
        );
        Ok(())
    }

    /// Pair the two substreams' half roots of one height (07 §6.1).
    fn pair_roots(&mut self) -> Result<(), E> {
        loop {
            if self.layout.n_streams == 1 {
                let Some((h, ls, a)) = self.streams[0].roots.pop_front() else {
                    return Ok(());
                };
                let b = empty_root();
                self.blocks_ready.push_back(BlockRoots {
                    height: h,
                    last_step: ls,
                    order_root: crate::header::order_root(&a, &b),
                    order_root_a: a,
                    order_root_b: b,
                });
                continue;
            }
            let (Some(&(ha, la, a)), Some(&(hb, lb, b))) =
                (self.streams[0].roots.front(), self.streams[1].roots.front())
            else {
                return Ok(());
            };
            if ha != hb || la != lb {
                return fail(RepE::Cut, "BlockMarks of one height disagree on last_step");
            }
            self.streams[0].roots.pop_front();
            self.streams[1].roots.pop_front();
            self.blocks_ready.push_back(BlockRoots {
                height: ha,
                last_step: la,
                order_root: crate::header::order_root(&a, &b),
                order_root_a: a,
                order_root_b: b,
            });
        }
    }

    #[inline]
    fn drain_blocks<S: Sink>(&mut self, sink: &mut S) {
        while let Some(b) = self.blocks_ready.front() {
            if b.last_step >= self.next_emit {
                return;
            }
            let b = *b;
            self.blocks_ready.pop_front();
            self.counters.blocks += 1;
            sink.block(&b);
        }
    }

    /// Decode one half record (07 §3.8) and merge it by StepId.
    fn step_half<S: Sink>(&mut self, r: &mut Reader<'_>, ctx: &Ctx, sink: &mut S) -> Result<(), E> {
        let si = ctx.stream as usize;
        // Split borrows: the decode below touches this substream's state, the lanes and the
        // layout only, so each lives in a register-friendly local.
        let layout = self.layout;
        let start = layout.half_start(ctx.stream);
        let hl = layout.half_len(ctx.stream);
        let sd = &mut self.streams[si];
        let lanes = &self.lanes;
        let b0 = r.u8()?;
        let kind =
            StepKind::from_u8(b0 & step_bits::KIND).ok_or(E(RepE::Kind, "step kind 9..15"))?;
        let home = b0 & step_bits::HOME != 0;
        let mode = (b0 >> step_bits::MODE_SHIFT) & step_bits::MODE_MASK;
        let other = b0 & step_bits::OTHER != 0;
        if mode == 3 {
            return fail(RepE::Cut, "cut mode 3");
        }
        let gap = r.leb_u64()?;
        let step = sd
            .step
            .prev_step
            .checked_add(1)
            .and_then(|x| x.checked_add(gap))
            .ok_or(E(RepE::Frame, "overflow"))?;
        if step <= sd.last_mark_step {
            return fail(RepE::Cut, "step at or below the last BlockMark's last_step");
        }
        if layout.n_streams == 1 && (other || !home) {
            return fail(RepE::Kind, "cut-only or OTHER record with one substream");
        }
        let (mut src_lane, mut src_delta, mut payload) = (SRC_NONE, 0i64, &[][..]);
        if home {
            src_lane = r.u8()?;
            if src_lane != SRC_NONE {
                src_delta = r.zigzag_i64()?;
            }
            if kind.has_src() != (src_lane != SRC_NONE) {
                return fail(RepE::Kind, "src_lane violates the kind table");
            }
            if layout.home_of(src_lane) != ctx.stream
                || (src_lane != SRC_NONE && src_lane as usize >= layout.n_lanes as usize)
            {
                return fail(
                    RepE::Cut,
                    "home record's src_lane not in its substream's half",
                );
            }
            if kind.has_payload() {
                let plen = r.leb_u64()?;
                if plen > r.remaining() as u64 {
                    return fail(RepE::Frame, "truncated");
                }
                payload = r.bytes(plen as usize)?;
                if kind == StepKind::Seal && plen != 0 {
                    return fail(RepE::Kind, "Seal with a payload");
                }
            }
        } else {
            if !other {
                return fail(RepE::Kind, "cut-only record without OTHER");
            }
            if mode == step_bits::SAME {
                return fail(RepE::Cut, "cut-only record with mode SAME");
            }
        }
        // Cut delta (07 §3.8); INV-CUT-MONO holds by unsigned deltas.
        let mut changed = 0u64;
        let cut = &mut sd.step.prev_cut;
        let half_lanes = &lanes[start..start + hl];
        match mode {
            step_bits::DENSE => {
                for (i, c) in cut.iter_mut().enumerate().take(hl) {
                    let d = r.leb_u64()?;
                    if d != 0 {
                        *c = c.checked_add(d).ok_or(E(RepE::Frame, "overflow"))?;
                        changed |= 1 << i;
                    }
                }
            }
            step_bits::SPARSE => {
                let mut bits = read_bitmap(r, hl, "SPARSE bitmap bit beyond the half")?;
                while bits != 0 {
                    let i = bits.trailing_zeros() as usize;
                    bits &= bits - 1;
                    let d = r.leb_u64()?;
                    if d == 0 {
                        return fail(RepE::Cut, "SPARSE delta of 0");
                    }
                    cut[i] = cut[i].checked_add(d).ok_or(E(RepE::Frame, "overflow"))?;
                    changed |= 1 << i;
                }
            }
            _ => {}
        }
        // wire-decisions 8: cut[l] ≤ next_lane_seq − 1 for every lane of the half. Lanes whose
        // cut did not move were checked before and next_lane_seq only grows, so checking the
        // moved lanes is the same rule.
        let mut m = changed;
        while m != 0 {
            let i = m.trailing_zeros() as usize;
            m &= m - 1;
            if cut[i] > half_lanes[i].st.next_lane_seq.saturating_sub(1) {
                return fail(RepE::Cut, "cut above the lane's decoded ops");
            }
        }
        sd.step.prev_step = step;
        let mut src_lane_seq = 0u64;
        if src_lane != SRC_NONE {
            let i = src_lane as usize - start;
            src_lane_seq = cut[i]
                .checked_add_signed(src_delta)
                .ok_or(E(RepE::Cut, "src_lane_seq out of range"))?;
            let d = &half_lanes[i];
            if !d.names_decoded_op(src_lane_seq) {
                return fail(RepE::Cut, "src_lane_seq names no decoded op");
            }
            if kind == StepKind::Shed && d.op_is_shed(src_lane_seq) {
                return fail(RepE::Kind, "Shed step for an op whose packet carries SHED");
            }
        }
        // Hot path: a home record of its own, next in StepId order, nothing queued on this
        // substream: deliver it now, from this substream's cut (no PendingHalf, no queue).
        if home && !other && self.next_in_order(si, step) {
            let mut m = changed;
            while m != 0 {
                let i = m.trailing_zeros() as usize;
                m &= m - 1;
                self.merged_cut[start + i] = self.streams[si].step.prev_cut[i];
            }
            self.counters.steps += 1;
            self.next_emit = step + 1;
            let s = Step {
                step,
                kind,
                src_lane,
                src_lane_seq,
                home: ctx.stream,
                spans: false,
            };
            sink.step(
                &s,
                &self.merged_cut[..self.layout.n_lanes as usize],
                payload,
            );
            if !self.streams[1 - si].pending.is_empty() {
                self.drain_merge(sink)?;
            }
            if !self.blocks_ready.is_empty() {
                self.drain_blocks(sink);
            }
            return Ok(());
        }
        let rec = PendingHalf {
            step,
            kind,
            home,
            other,
            src_lane,
            src_lane_seq,
            changed,
            payload: Vec::new(),
        };
        self.merge(ctx, rec, payload, sink)
    }

    /// Copy a queued half record's cut values (in `pending_vals`, one per changed lane) into the
    /// merged cut.
    #[inline]
    fn emit_queued(&mut self, stream: usize, changed: u64) {
        let start = self.layout.half_start(stream as u8);
        let vals = &mut self.streams[stream].pending_vals;
        let mut m = changed;
        while m != 0 {
            let i = m.trailing_zeros() as usize;
            m &= m - 1;
            self.merged_cut[start + i] = vals.pop_front().unwrap_or(0);
        }
    }

    /// Copy a just-decoded half record's cut (this substream's live half-cut) into the merged cut.
    #[inline]
    fn emit_live(&mut self, stream: usize, changed: u64) {
        let start = self.layout.half_start(stream as u8);
        let mut m = changed;
        while m != 0 {
            let i = m.trailing_zeros() as usize;
            m &= m - 1;
            self.merged_cut[start + i] = self.streams[stream].step.prev_cut[i];
        }
    }

    fn deliver<S: Sink>(
        &mut self,
        home: &PendingHalf,
        home_stream: u8,
        payload: &[u8],
        sink: &mut S,
    ) {
        let s = Step {
            step: home.step,
            kind: home.kind,
            src_lane: home.src_lane,
            src_lane_seq: home.src_lane_seq,
            home: home_stream,
            spans: home.other,
        };
        self.counters.steps += 1;
        self.next_emit = home.step + 1;
        sink.step(
            &s,
            &self.merged_cut[..self.layout.n_lanes as usize],
            payload,
        );
    }

    fn defer(&mut self, si: usize, mut rec: PendingHalf, payload: &[u8]) -> Result<(), E> {
        let s = &mut self.streams[si];
        if s.pending.len() >= PENDING_MAX {
            return fail(
                RepE::Frame,
                "step merge backlog exceeded (feed the other substream)",
            );
        }
        let mut m = rec.changed;
        while m != 0 {
            let i = m.trailing_zeros() as usize;
            m &= m - 1;
            s.pending_vals.push_back(s.step.prev_cut[i]);
        }
        rec.payload = payload.to_vec();
        s.pending.push_back(rec);
        Ok(())
    }

    /// The fast path's condition for a record of `step` on substream `si`: next in StepId order,
    /// nothing queued before it on its substream, and no record of its step queued on the other
    /// (a cut-only record there makes the pair inconsistent: `merge` refuses it).
    #[inline]
    fn next_in_order(&self, si: usize, step: u64) -> bool {
        step == self.next_emit
            && self.streams[si].pending.is_empty()
            && self.streams[1 - si]
                .pending
                .front()
                .is_none_or(|p| p.step != step)
    }

    /// Merge by StepId (07 §3.8): deliver step `next_emit` once its home record and, if OTHER,
    /// its cut-only record are decoded.
    fn merge<S: Sink>(
        &mut self,
        ctx: &Ctx,
        rec: PendingHalf,
        payload: &[u8],
        sink: &mut S,
    ) -> Result<(), E> {
        let si = ctx.stream as usize;
        let oi = 1 - si;
        // 07 §3.8: step `rec.step` is complete already (its home record said this substream
        // carries none of it). Queued, the record would block this substream's later steps
        // forever; it is the sequencer's fault (found by the T-REP-2 oracle, `sim`).
        if rec.step < self.next_emit {
            return fail(RepE::Kind, "a record for a step already complete");
        }
        // Fast path: nothing queued on this substream and the record is next.
        if self.streams[si].pending.is_empty() && rec.step == self.next_emit {
            let twin = self.streams[oi]
                .pending
                .front()
                .is_some_and(|p| p.step == rec.step);
            if rec.home && !rec.other && !twin {
                self.emit_live(si, rec.changed);
                self.deliver(&rec, si as u8, payload, sink);
                self.drain_merge(sink)?;
                self.drain_blocks(sink);
                return Ok(());
            }
            if let Some(p) = self.streams[oi].pending.front() {
                if p.step == rec.step {
                    let mut p = self.streams[oi]
                        .pending
                        .pop_front()
                        .unwrap_or_else(unreachable_pending);
                    check_pair(&rec, &p)?;
                    self.emit_queued(oi, p.changed);
                    self.emit_live(si, rec.changed);
                    if rec.home {
                        self.deliver(&rec, si as u8, payload, sink);
                    } else {
                        let pl = std::mem::take(&mut p.payload);
                        self.deliver(&p, oi as u8, &pl, sink);
                    }
                    self.drain_merge(sink)?;
                    self.drain_blocks(sink);
                    return Ok(());
                }
                return fail(
                    RepE::Kind,
                    "OTHER set but the other substream skipped the step",
                );
            }
        }
        self.defer(si, rec, payload)?;
        self.drain_merge(sink)?;
        self.drain_blocks(sink);
        Ok(())
    }

    fn drain_merge<S: Sink>(&mut self, sink: &mut S) -> Result<(), E> {
        if self.streams[0].pending.is_empty() && self.streams[1].pending.is_empty() {
            return Ok(());
        }
        loop {
            let e = self.next_emit;
            let fa = self.streams[0]
                .pending
                .front()
                .map(|p| (p.step, p.home, p.other));
            let fb = self.streams[1]
                .pending
                .front()
                .map(|p| (p.step, p.home, p.other));
            let a_is = fa.is_some_and(|f| f.0 == e);
            let b_is = fb.is_some_and(|f| f.0 == e);
            match (a_is, b_is) {
                (true, true) => {
                    let pa = self.streams[0]
                        .pending
                        .pop_front()
                        .unwrap_or_else(unreachable_pending);
                    let pb = self.streams[1]
                        .pending
                        .pop_front()
                        .unwrap_or_else(unreachable_pending);
                    check_pair(&pa, &pb)?;
                    self.emit_queued(0, pa.changed);
                    self.emit_queued(1, pb.changed);
                    let (mut h, hs) = if pa.home { (pa, 0u8) } else { (pb, 1u8) };
                    let pl = std::mem::take(&mut h.payload);
                    self.deliver(&h, hs, &pl, sink);
                }
                (true, false) | (false, true) => {
                    let (i, f, o) = if a_is { (0usize, fa, fb) } else { (1, fb, fa) };
                    let (_, home, other) = f.unwrap_or((0, false, false));
                    if home && !other {
                        let mut p = self.streams[i]
                            .pending
                            .pop_front()
                            .unwrap_or_else(unreachable_pending);
                        self.emit_queued(i, p.changed);
                        let pl = std::mem::take(&mut p.payload);
                        self.deliver(&p, i as u8, &pl, sink);
                    } else if o.is_some() {
                        return fail(
                            RepE::Kind,
                            "OTHER set but the other substream skipped the step",
                        );
                    } else {
                        return Ok(()); // wait for the other substream
                    }
                }
                (false, false) => {
                    if fa.is_some() && fb.is_some() {
                        return fail(RepE::Kind, "step carried by neither substream");
                    }
                    return Ok(());
                }
            }
        }
    }
}

/// Read a `ceil(n/8)`-byte bitmap of `n` bits (n ≤ 64) as a u64; `REP_E_CUT` if a bit beyond
/// `n` is set (wire-decisions 20).
#[inline(always)]
fn read_bitmap(r: &mut Reader<'_>, n: usize, what: &'static str) -> Result<u64, E> {
    let b = r.bytes(n.div_ceil(8))?;
    // ≤ 8 bytes, assembled without a memcpy call.
    let bits = b.iter().rev().fold(0u64, |acc, &x| acc << 8 | x as u64);
    if n < 64 && bits >> n != 0 {
        return fail(RepE::Cut, what);
    }
    Ok(bits)
}

#[cold]
fn unreachable_pending() -> PendingHalf {
    PendingHalf {
        step: 0,
        kind: StepKind::Idle,
        home: false,
        other: false,
        src_lane: SRC_NONE,
        src_lane_seq: 0,
        changed: 0,
        payload: Vec::new(),
    }
}

/// The two records of a spanning step: one home, one cut-only, both OTHER, same kind.
fn check_pair(a: &PendingHalf, b: &PendingHalf) -> Result<(), E> {
    if a.home == b.home || !a.other || !b.other {
        return fail(
            RepE::Kind,
            "spanning step needs one home and one cut-only record, both OTHER",
        );
    }
    if a.kind != b.kind {
        return fail(
            RepE::Kind,
            "cut-only record's kind differs from its home record",
        );
    }
    Ok(())
}

/// Decode one PacketRecord O-encoding (07 §3.6), exactly as the spec's `decode_pkt`.
#[inline(always)]
#[allow(clippy::too_many_arguments)] // the hot loop's state, passed apart to keep borrows disjoint
fn decode_pkt<S: Sink>(
    lane: u8,
    pool: bool,
    d: &mut LaneDec,
    tbl: &mut SlotTable,
    r: &mut Reader<'_>,
    ctx: &Ctx,
    at: Pos,
    sink: &mut S,
) -> Result<(), E> {
    let h = r.u8()?;
    let count = h & h_bits::COUNT;
    let shed = h & h_bits::SHED != 0;
    if count as usize > MAX_MSGS_PER_PKT {
        return fail(RepE::Count, "count 11..15");
    }
    let slot = r.leb_u16()? as usize;
    if slot > REP_SLOT_TAKE {
        return fail(RepE::Count, "slot above REP_SLOT_TAKE");
    }
    if slot == REP_SLOT_TAKE {
        if h != 0 || !pool {
            return fail(RepE::Count, "AcctTake with h != 0 or on a dedicated lane");
        }
        let account = r.leb_u32()?;
        let ver = r.leb_u64()?;
        sink.take(at, &AcctTake { lane, account, ver });
        return Ok(());
    }
    let advance = slot == REP_SLOT_ADVANCE;
    if advance && (count != 0 || shed || h & (h_bits::SEQ_EXC | h_bits::LSEQ_EXC) != 0) {
        return fail(RepE::Count, "Advance with count, SHED, SEQ_EXC or LSEQ_EXC");
    }
    let dts = r.zigzag_i64()?;
    let rx_ts =
        d.st.prev_rx_ts
            .checked_add_signed(dts)
            .ok_or(E(RepE::Ts, "rx_ts out of range"))?;
    let fills_applied = if h & h_bits::FA_NZ != 0 {
        d.st.prev_fills_applied
            .checked_add(r.leb_u64()?)
            .ok_or(E(RepE::Frame, "overflow"))?
    } else {
        d.st.prev_fills_applied
    };
    let first_lane_seq = if h & h_bits::LSEQ_EXC != 0 {
        let dl = r.leb_u64()?;
        let f =
            d.st.next_lane_seq
                .checked_add(dl)
                .ok_or(E(RepE::Frame, "overflow"))?;
        if dl > 0 {
            let gap = (d.st.next_lane_seq, f - 1);
            LaneDec::push_range(&mut d.gaps, &mut d.gap_floor, gap);
        }
        f
    } else {
        d.st.next_lane_seq
    };
    let next = first_lane_seq
        .checked_add(count as u64)
        .ok_or(E(RepE::Frame, "overflow"))?;
    d.st.prev_rx_ts = rx_ts;
    d.st.prev_fills_applied = fills_applied;
    d.st.next_lane_seq = next; // a shed packet keeps its LaneSeqs
    if advance {
        sink.pkt(
            at,
            &PacketRecord {
                lane,
                count: 0,
                flags: PKT_ADVANCE,
                session: 0,
                slot: slot as u16,
                pkt_seq: 0,
                rx_ts,
                first_lane_seq,
                fills_applied,
            },
        );
        return Ok(());
    }
    // slot < REP_SLOT_ADVANCE = MAX_SESSIONS_PER_LANE here (Take and Advance returned above).
    let e = &mut tbl.slots[slot & (MAX_SESSIONS_PER_LANE - 1)];
    let pkt_seq = if h & h_bits::SEQ_EXC != 0 {
        r.leb_u32()?
    } else {
        e.next_pkt_seq
    };
    e.next_pkt_seq = pkt_seq.wrapping_add(1);
    let session = e.session;
    if d.awaiting.len() >= AWAIT_HASH_MAX {
        return fail(RepE::HashLag, "too many records awaiting their hash");
    }
    d.awaiting.push(Awaiting {
        session,
        pkt_seq,
        first_lane_seq,
        frame_seq: ctx.frame_seq,
        t_ns: ctx.now,
    });
    if shed && count > 0 {
        let range = (first_lane_seq, next - 1);
        LaneDec::push_range(&mut d.shed, &mut d.shed_floor, range);
    }
    #[cfg(feature = "planted")]
    let pkt_seq = planted::pkt_seq(pkt_seq);
    sink.pkt(
        at,
        &PacketRecord {
            lane,
            count,
            flags: if shed { PKT_SHED } else { 0 },
            session,
            slot: slot as u16,
            pkt_seq,
            rx_ts,
            first_lane_seq,
            fills_applied,
        },
    );
    Ok(())
}

/// A FIFO on a power-of-two ring that grows by doubling (the hash-awaiting queue of 07 §3.5;
/// its bound is enforced by the caller). Push and pop inline to a few instructions.
#[derive(Debug, Default, Clone)]
struct Fifo<T> {
    buf: Vec<T>,
    head: usize,
    len: usize,
}

impl<T: Copy + Default> Fifo<T> {
    fn with_capacity(n: usize) -> Self {
        Fifo {
            buf: vec![T::default(); n.next_power_of_two()],
            head: 0,
            len: 0,
        }
    }
    #[inline(always)]
    fn len(&self) -> usize {
        self.len
    }
    #[inline(always)]
    fn push(&mut self, x: T) {
        if self.len == self.buf.len() {
            self.grow();
        }
        let i = (self.head + self.len) & (self.buf.len() - 1);
        self.buf[i] = x;
        self.len += 1;
    }
    /// Every element, oldest first, mutably.
    fn for_each_mut(&mut self, mut f: impl FnMut(&mut T)) {
        let mask = self.buf.len() - 1;
        for k in 0..self.len {
            f(&mut self.buf[(self.head + k) & mask]);
        }
    }
    #[inline(always)]
    fn pop(&mut self) -> Option<T> {
        if self.len == 0 {
            return None;
        }
        let x = self.buf[self.head];
        self.head = (self.head + 1) & (self.buf.len() - 1);
        self.len -= 1;
        Some(x)
    }
    #[inline(always)]
    fn front(&self) -> Option<&T> {
        (self.len > 0).then(|| &self.buf[self.head])
    }
    #[cold]
    fn grow(&mut self) {
        let n = (self.buf.len() * 2).max(16);
        let mut nb = vec![T::default(); n];
        let m = self.buf.len().wrapping_sub(1);
        for (k, slot) in nb.iter_mut().enumerate().take(self.len) {
            *slot = self.buf[(self.head + k) & m];
        }
        self.buf = nb;
        self.head = 0;
    }
}

mod open;
pub use open::{OpenBlock, Tail};

#[cfg(feature = "planted")]
pub mod planted;
