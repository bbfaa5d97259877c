//! The gate words every tile of the box shares (07 §4.1): counters, the published cut,
//! `released[A/B]`, `LaneCut`, the fence; and the held responses each gate releases (INV-REP-1,
//! INV-REP-11).

use super::*;

/// The gate words every tile shares (07 §4.1).
pub struct Words {
    pub(super) lane_counter: Vec<CachePadded<AtomicU64>>,
    pub(super) cut: PublishedCut,
    pub(super) step_done: StepDone,
    pub(super) released: [Released; 2],
    pub(super) lane_cut: Vec<LaneCut>,
    pub(super) fenced: SeqFenced,
    pub(super) close_req: CloseReq,
    /// Encoding refusals (never expected).
    pub errors: AtomicU64,
    /// Responses and notices not sent because the box is fenced (INV-REP-6).
    pub fenced_drops: AtomicU64,
    /// Per substream: the highest `frame_seq` written (a RepAck claiming more is refused).
    pub(super) sent: [CachePadded<AtomicU64>; 2],
    /// Per substream: the gate's counters and REP_A_PATH state, published by its stream core.
    pub gate: [GateStats; 2],
}

impl Words {
    /// The words of a box at the start of a tenure after step `prev_step`, each lane at
    /// `bounds[l]` (07 §9.4's `prev_cut`; all 0 at an epoch's start): nothing of the tenure
    /// released, cut at the bounds (published as store 1 when any is above 0), not fenced.
    pub(super) fn at(prev_step: u64, bounds: &[u64]) -> Words {
        let n = bounds.len();
        let cut = PublishedCut::new(n);
        if bounds.iter().any(|&b| b > 0) {
            cut.store(1, bounds);
        }
        Words {
            lane_counter: bounds
                .iter()
                .map(|&b| CachePadded::new(AtomicU64::new(b)))
                .collect(),
            cut,
            step_done: StepDone::new(prev_step, 0),
            released: [Released::new(prev_step), Released::new(prev_step)],
            lane_cut: bounds.iter().map(|&b| LaneCut::new(prev_step, b)).collect(),
            fenced: SeqFenced::new(),
            close_req: CloseReq::new(),
            errors: AtomicU64::new(0),
            fenced_drops: AtomicU64::new(0),
            sent: [
                CachePadded::new(AtomicU64::new(0)),
                CachePadded::new(AtomicU64::new(0)),
            ],
            gate: Default::default(),
        }
    }
}

/// One stream core's gate as other threads read it (07 §4.2, §14).
#[derive(Debug, Default)]
pub struct GateStats {
    /// Frames written and fenced.
    pub frames: AtomicU64,
    /// Writes a path pushed back on, per path.
    pub busy: [AtomicU64; 2],
    /// Writes a path refused, per path.
    pub failed: [AtomicU64; 2],
    /// REP_A_PATH raised, per path (times).
    pub path_down: [AtomicU64; 2],
    /// REP_A_PATH active now, per path.
    pub alarm: [AtomicBool; 2],
    /// The box fenced because a frame could not be written on any path.
    pub write_fences: AtomicU64,
    /// Frames sealed after the fence and never written.
    pub fenced_drops: AtomicU64,
}

impl GateStats {
    pub(super) fn publish(&self, c: &crate::stream::GateCounters, down: [bool; 2]) {
        let r = Ordering::Relaxed;
        self.frames.store(c.frames, r);
        for (p, d) in down.iter().enumerate() {
            self.busy[p].store(c.busy[p], r);
            self.failed[p].store(c.failed[p], r);
            self.path_down[p].store(c.path_down[p], r);
            self.alarm[p].store(*d, r);
        }
        self.write_fences.store(c.write_fences, r);
        self.fenced_drops.store(c.fenced_drops, r);
    }
}

impl std::fmt::Debug for Words {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Words")
            .field("step_done", &self.step_done.load())
            .field(
                "released",
                &[self.released[0].load(), self.released[1].load()],
            )
            .field("fenced", &self.fenced.is_set())
            .finish()
    }
}

impl Words {
    /// `released[h]`.
    pub fn released(&self, h: usize) -> u64 {
        self.released[h].load()
    }
    /// `step_done`.
    pub fn step_done(&self) -> u64 {
        self.step_done.load().0
    }
    /// `seq_fenced`.
    pub fn fenced(&self) -> bool {
        self.fenced.is_set()
    }
    /// Fence the box (INV-REP-6): what control does when acks stop; an operator's or a test's
    /// way to the same state. Nothing leaves the box after it.
    pub fn fence(&self) {
        self.fenced.set();
    }
    /// The highest `frame_seq` written on substream `h`.
    pub fn sent(&self, h: usize) -> u64 {
        self.sent[h].load(Ordering::Acquire)
    }
    /// Lane `l`'s published LaneSeq.
    pub fn lane_counter(&self, l: usize) -> u64 {
        self.lane_counter[l].load(Ordering::Acquire)
    }
}

/// Response bytes carried inline up to this length (a response of a few records; longer ones,
/// rare, go to the heap).
pub(super) const RESP_INLINE: usize = 240;

/// A response's bytes on their way to the wire: inline (no allocation per response), or boxed
/// when longer than [`RESP_INLINE`].
#[allow(clippy::large_enum_variant)] // inline on purpose: a ring slot, no allocation per response
pub(super) enum RespBytes {
    Inline { len: u8, b: [u8; RESP_INLINE] },
    Heap(Vec<u8>),
}

impl RespBytes {
    pub(super) fn new(bytes: &[u8]) -> Self {
        if bytes.len() <= RESP_INLINE {
            let mut b = [0u8; RESP_INLINE];
            b[..bytes.len()].copy_from_slice(bytes);
            RespBytes::Inline {
                len: bytes.len() as u8,
                b,
            }
        } else {
            RespBytes::Heap(bytes.to_vec())
        }
    }
    pub(super) fn as_slice(&self) -> &[u8] {
        match self {
            RespBytes::Inline { len, b } => &b[..*len as usize],
            RespBytes::Heap(v) => v,
        }
    }
}

impl std::fmt::Debug for RespBytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "RespBytes({} B)", self.as_slice().len())
    }
}

/// A held response.
#[derive(Debug)]
pub(super) struct Held {
    pub(super) session: u32,
    pub(super) gate: Gate,
    pub(super) bytes: RespBytes,
}

/// Whether a response's gate has passed: a step's response once `released[A] ≥ need_A` and
/// `released[B] ≥ need_B` (INV-REP-1), a lane answer once `LaneCut[l]` covers its op
/// (INV-REP-11). Every response checks its own gate, whichever tile holds it.
pub(super) fn gate_open(gate: &Gate, words: &Words) -> bool {
    match *gate {
        Gate::Step { need_a, need_b, .. } => {
            words.released[0].load() >= need_a && words.released[1].load() >= need_b
        }
        Gate::LaneCut { lane, lane_seq } => words
            .lane_cut
            .get(lane as usize)
            .is_some_and(|c| c.cut() >= lane_seq),
    }
}
