//! The decoder tile (07 §3.12, replica core 3): order RX's in-order frames into `wire`'s
//! [`DecState`] — sections, step merge, block marks, HASH runs, headers, `order_root` per block —
//! with what the rest of the replica needs around it:
//!
//! * every PacketRecord tagged with the height of the block it belongs to (a substream's records
//!   before its `BlockMark(h)` are in blocks ≤ h, so a record is in its substream's open block);
//! * the first decoder error of the tenure recorded with (epoch, tenure, stream, frame_seq) and
//!   the height of the block it hit ([`Fault`]): that block and every later one are refused for
//!   voting ([`crate::front::verdict`]), and the sequencer-fault alarm is raised once (07 §3.12, §10.1);
//! * counters.
//!
//! Hot path: records go to [`DecodedOut`] by reference; nothing is allocated per record.

use vyrn_wire::decoder::{Awaiting, BlockRoots, DecState, Pos, Sink};
use vyrn_wire::error::RepErr;
use vyrn_wire::frame::Heartbeat;
use vyrn_wire::header::BlockHeader;
use vyrn_wire::layout::Layout;
use vyrn_wire::records::{BlockMark, PacketRecord, Step};

/// A sequencer fault found by the decoder: its first error and the block it hit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fault {
    /// The error, with (epoch, tenure, stream, frame_seq) (07 §3.12).
    pub err: RepErr,
    /// The open block of the erroring substream: it and every later block are refused.
    pub height: u64,
}

/// Where decoded records go.
#[allow(unused_variables)]
pub trait DecodedOut {
    /// A PacketRecord (Advance included) of block `height`.
    fn record(&mut self, height: u64, at: Pos, r: &PacketRecord) {}
    /// The `pkt_hash` of an earlier record of `lane` (a HashRun).
    fn hash(&mut self, at: Pos, lane: u8, rec: &Awaiting, pkt_hash: u64) {}
    /// A complete step, in StepId order.
    fn step(&mut self, s: &Step, cut: &[u64], payload: &[u8]) {}
    /// Substream `stream` passed `BlockMark(height)` (the block ends at `last_step`): its
    /// records of the block are all out. The first substream's mark of a height comes before
    /// any step of the next block is delivered (a step comes after its home substream's mark).
    fn mark(&mut self, stream: u8, height: u64, last_step: u64) {}
    /// ORDER section bytes of `stream` belonging to block `height` (for the journal).
    fn order_bytes(&mut self, stream: u8, height: u64, bytes: &[u8]) {}
    /// A block whose marks both passed and whose steps were all delivered, with its roots.
    fn block(&mut self, b: &BlockRoots) {}
    /// A HEADER frame's header.
    fn header(&mut self, h: &BlockHeader) {}
    /// A header whose `seq_sig` was already checked (`sig_ok`: it verified) — a hold's
    /// released output ([`crate::front::quarantine`]), so the signature is checked once.
    fn header_checked(&mut self, h: &BlockHeader, sig_ok: bool) {
        let _ = sig_ok;
        self.header(h);
    }
    /// The sequencer-fault alarm (once per tenure): the decoder stopped a substream.
    fn fault(&mut self, f: &Fault) {}
}

/// Counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DecodeCounters {
    /// Frames handed in.
    pub frames: u64,
    /// PacketRecords delivered.
    pub records: u64,
    /// Blocks completed.
    pub blocks: u64,
    /// Headers delivered.
    pub headers: u64,
    /// Frames refused after the fault (the substream stays stopped).
    pub after_fault: u64,
}

/// The decoder tile of one tenure. A clone is a probe ([`crate::front::quarantine`]).
#[derive(Debug, Clone)]
pub struct Decoder {
    dec: DecState,
    /// Per substream: the height of its open block (last BlockMark + 1).
    open: [u64; 2],
    /// Per substream: the newest [`MARKS_KEPT`] BlockMarks as `(height, frame_seq,
    /// last_step)`, a ring indexed by height (a failover's TailReport names the frame of
    /// `BlockMark(H_i)`, 07 §9.3; the seal starts after `last_step(H*)`, §9.4).
    marks: [[(u64, u64, u64); MARKS_KEPT]; 2],
    /// The newest blocks' ORDER section bytes (the seal's `order_root`, 07 §9.4).
    tail: crate::front::failover::tail::TailBytes,
    fault: Option<Fault>,
    counters: DecodeCounters,
}

/// BlockMarks remembered per substream (64 blocks: 64 ms at 07's 1 ms blocks).
pub const MARKS_KEPT: usize = 64;

struct Adapter<'a, O: DecodedOut> {
    open: &'a mut [u64; 2],
    marks: &'a mut [[(u64, u64, u64); MARKS_KEPT]; 2],
    tail: &'a mut crate::front::failover::tail::TailBytes,
    out: &'a mut O,
    counters: &'a mut DecodeCounters,
}

impl<O: DecodedOut> Sink for Adapter<'_, O> {
    fn order_bytes(&mut self, stream: u8, height: u64, bytes: &[u8]) {
        self.tail.push(stream, height, bytes);
        self.out.order_bytes(stream, height, bytes);
    }
    fn pkt(&mut self, at: Pos, r: &PacketRecord) {
        self.counters.records += 1;
        let h = self.open[at.stream as usize & 1];
        self.out.record(h, at, r);
    }
    fn step(&mut self, s: &Step, cut: &[u64], payload: &[u8]) {
        self.out.step(s, cut, payload);
    }
    fn mark(&mut self, at: Pos, m: &BlockMark, _lane_bounds: &[u64]) {
        let o = &mut self.open[at.stream as usize & 1];
        *o = (*o).max(m.height + 1);
        self.marks[at.stream as usize & 1][m.height as usize % MARKS_KEPT] =
            (m.height, at.frame_seq, m.last_step);
        self.out.mark(at.stream, m.height, m.last_step);
    }
    fn block(&mut self, b: &BlockRoots) {
        self.counters.blocks += 1;
        self.out.block(b);
    }
    fn hash(&mut self, at: Pos, lane: u8, rec: &Awaiting, pkt_hash: u64) {
        self.out.hash(at, lane, rec, pkt_hash);
    }
    fn header(&mut self, _at: Pos, h: &BlockHeader) {
        self.counters.headers += 1;
        self.out.header(h);
    }
    fn heartbeat(&mut self, _at: Pos, _hb: &Heartbeat) {}
}

impl Decoder {
    /// The hash-lag fault threshold (a budget, [`DecState::set_hashlag_fault_ns`]).
    pub fn set_hashlag_fault_ns(&mut self, ns: u64) {
        self.dec.set_hashlag_fault_ns(ns);
    }

    /// The hash-lag fault threshold in force.
    pub fn hashlag_fault_ns(&self) -> u64 {
        self.dec.hashlag_fault_ns()
    }

    /// The layout.
    pub fn layout(&self) -> Layout {
        *self.dec.layout()
    }

    /// A decoder for `layout`; blocks are numbered from `first_height`.
    pub fn new(layout: Layout, first_height: u64) -> Result<Self, &'static str> {
        Ok(Decoder {
            dec: DecState::new(layout)?,
            open: [first_height; 2],
            marks: [[(0, 0, 0); MARKS_KEPT]; 2],
            tail: Default::default(),
            fault: None,
            counters: DecodeCounters::default(),
        })
    }

    /// The open block of `stream` (its last BlockMark + 1): the highest block the bytes
    /// decoded so far on it can lie in.
    pub fn open_height(&self, stream: u8) -> u64 {
        self.open[stream as usize & 1]
    }

    /// The open block as a seal would close it (07 §9.4; `DecState::open_block`).
    pub fn open_block(&self) -> Option<vyrn_wire::decoder::OpenBlock> {
        self.dec.open_block()
    }

    /// The frame_seq of `BlockMark(height)` on `stream`, while it is among the newest
    /// [`MARKS_KEPT`] (0 for height 0: the tenure's start).
    pub fn mark_frame(&self, stream: u8, height: u64) -> Option<u64> {
        if height == 0 {
            return Some(0);
        }
        let (h, fs, _) = self.marks[stream as usize & 1][height as usize % MARKS_KEPT];
        (h == height).then_some(fs)
    }

    /// The seal's block (07 §9.4) after `BlockMark(h_star)`, however many later marks the tail
    /// spans (a box that died after closing a block whose header never came): `first_step =
    /// last_step(h_star) + 1`, the last step delivered, each substream's `order_root` over its
    /// bytes after that mark, the lane bounds and frames held. `anchor` is the tenure's
    /// `(height, last_step)`, for an `h_star` at the tenure's start. `None` when a substream
    /// failed, has not passed `BlockMark(h_star)`, or the mark or the bytes after it are no
    /// longer kept.
    pub fn seal_block(
        &self,
        h_star: u64,
        anchor: (u64, u64),
    ) -> Option<vyrn_wire::decoder::OpenBlock> {
        let t = self.dec.tail()?;
        let n = self.dec.layout().n_streams as usize;
        let last_of_h_star = if h_star == anchor.0 {
            anchor.1
        } else {
            let (h, _, step) = self.marks[0][h_star as usize % MARKS_KEPT];
            (h == h_star).then_some(step)?
        };
        let first_step = last_of_h_star + 1;
        // 07 §9.4: the seal ends at the last step complete in the prefix. A substream that
        // passed a later BlockMark says nothing of steps whose other half never came (the box
        // died with one stream core behind): those, and every later record, are dropped — a
        // seal ending at that mark's step named steps no replica could replay, and the promoted
        // standby stood short of it (`NotAtSeal`).
        if t.open_height[..n].iter().any(|&o| o <= h_star) || t.delivered + 1 < first_step {
            return None;
        }
        let a = self.tail.root_since(0, h_star)?;
        let b = if n == 2 {
            self.tail.root_since(1, h_star)?
        } else {
            vyrn_wire::header::empty_root()
        };
        Some(vyrn_wire::decoder::OpenBlock {
            height: h_star + 1,
            first_step,
            last_step: t.delivered,
            order_root: vyrn_wire::header::order_root(&a, &b),
            order_root_a: a,
            order_root_b: b,
            lane_bounds: t.lane_bounds,
            next_frame_seq: t.next_frame_seq,
        })
    }

    /// The fault, once the decoder found one.
    pub fn fault(&self) -> Option<Fault> {
        self.fault
    }

    /// Counters (this tile's and the decoder's).
    pub fn counters(&self) -> (DecodeCounters, vyrn_wire::decoder::DecCounters) {
        (self.counters, self.dec.counters())
    }

    /// One frame, in `frame_seq` order per substream (order RX delivers so), at `now`.
    pub fn on_frame(&mut self, frame: &[u8], now: u64, out: &mut impl DecodedOut) {
        self.counters.frames += 1;
        let r = {
            let mut a = Adapter {
                open: &mut self.open,
                marks: &mut self.marks,
                tail: &mut self.tail,
                out,
                counters: &mut self.counters,
            };
            self.dec.on_frame(frame, now, &mut a)
        };
        if let Err(e) = r {
            self.on_error(e, out);
        }
    }

    /// The hash-lag rule (07 §3.7: a record waiting > 1 ms for its HashRun is a fault).
    pub fn tick(&mut self, now: u64, out: &mut impl DecodedOut) {
        if let Err(e) = self.dec.tick(now) {
            self.on_error(e, out);
        }
    }

    fn on_error(&mut self, e: RepErr, out: &mut impl DecodedOut) {
        if self.fault.is_some() {
            self.counters.after_fault += 1;
            return;
        }
        let f = Fault {
            err: e,
            height: self.open[e.stream as usize & 1],
        };
        self.fault = Some(f);
        out.fault(&f);
    }
}
