//! The logical records of the order stream and their encoders (07 §3.4–§3.9).
//!
//! Encoders keep the same delta state as the decoder ([`LaneState`], [`StepState`]); a lane
//! pre-encodes its own records against its mirror (07 §4.1), a stream core its half's step
//! records. Decoding lives in [`crate::decoder`].

use crate::consts::*;
use crate::layout::Layout;
use crate::leb::{len_u64, put_u64, zigzag};

/// Section tags (07 §3.4).
pub mod tag {
    /// Highest LaneRun tag (lane = tag).
    pub const LANE_RUN_MAX: u8 = 0x3F;
    /// StepRun.
    pub const STEP_RUN: u8 = 0x40;
    /// HashRun (HASH frames only, wire-decisions 2).
    pub const HASH_RUN: u8 = 0x41;
    /// BlockMark.
    pub const BLOCK_MARK: u8 = 0x42;
    /// SessionBind.
    pub const SESSION_BIND: u8 = 0x43;
    /// TenureStart.
    pub const TENURE_START: u8 = 0x44;
    /// Pad: the rest of the body is padding.
    pub const PAD: u8 = 0xFF;
}

/// `PacketRecord.flags` bit 0 (01 §6.6).
pub const PKT_SHED: u8 = 1;
/// `PacketRecord.flags` bit 1 (01 §6.6).
pub const PKT_ADVANCE: u8 = 2;

/// `h` bits (07 §3.6).
pub mod h_bits {
    /// Count mask.
    pub const COUNT: u8 = 0x0F;
    /// pkt_seq ≠ `slot_next_pkt_seq[slot]`.
    pub const SEQ_EXC: u8 = 0x10;
    /// first_lane_seq ≠ next_lane_seq.
    pub const LSEQ_EXC: u8 = 0x20;
    /// fills_applied ≠ prev_fills_applied.
    pub const FA_NZ: u8 = 0x40;
    /// The lane shed the packet.
    pub const SHED: u8 = 0x80;
}

/// A decoded PacketRecord (the logical record of 01 §6.6, less `pkt_hash`, which arrives in
/// a HashRun).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PacketRecord {
    /// Lane.
    pub lane: u8,
    /// Numbered messages.
    pub count: u8,
    /// `PKT_SHED`, `PKT_ADVANCE`.
    pub flags: u8,
    /// Session (0 for Advance and never-bound slots).
    pub session: u32,
    /// Lane-local slot (`REP_SLOT_ADVANCE` for Advance).
    pub slot: u16,
    /// Per-session packet sequence (0 for Advance).
    pub pkt_seq: u32,
    /// Receive timestamp, ns.
    pub rx_ts: u64,
    /// LaneSeq of the first message.
    pub first_lane_seq: u64,
    /// Steps whose fills the lane had applied.
    pub fills_applied: u64,
}

impl PacketRecord {
    /// An Advance record?
    pub fn is_advance(&self) -> bool {
        self.flags & PKT_ADVANCE != 0
    }
    /// Shed?
    pub fn is_shed(&self) -> bool {
        self.flags & PKT_SHED != 0
    }
}

/// AcctTake (07 §3.6): a pooled lane took an account's token.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct AcctTake {
    /// Lane.
    pub lane: u8,
    /// Account.
    pub account: u32,
    /// Token version after the take.
    pub ver: u64,
}

/// SessionBind (07 §3.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SessionBind {
    /// Lane.
    pub lane: u8,
    /// Slot.
    pub slot: u16,
    /// Session.
    pub session: u32,
    /// Next expected pkt_seq.
    pub next_pkt_seq: u32,
}

/// Step kinds (07 §3.8).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum StepKind {
    /// The forwarded op traded.
    Cross = 0,
    /// The op changed the book without trading.
    Improve = 1,
    /// Lane-local book depletion (later version; decoded now).
    Depletion = 2,
    /// Rescan band (payload).
    Rescan = 3,
    /// Logs a cut nothing else logs.
    Idle = 4,
    /// Deadline admission failed; the lane answers BUSY.
    Shed = 5,
    /// Phase, band, halt, resume, uncross request (payload).
    Control = 6,
    /// The book's last step of an epoch (payload length 0).
    Seal = 7,
    /// Auction uncross (payload).
    Uncross = 8,
}

impl StepKind {
    /// From the 4-bit field; 9–15 are `REP_E_KIND`.
    pub fn from_u8(v: u8) -> Option<Self> {
        Some(match v {
            0 => StepKind::Cross,
            1 => StepKind::Improve,
            2 => StepKind::Depletion,
            3 => StepKind::Rescan,
            4 => StepKind::Idle,
            5 => StepKind::Shed,
            6 => StepKind::Control,
            7 => StepKind::Seal,
            8 => StepKind::Uncross,
            _ => return None,
        })
    }
    /// Kind-table: does the kind name a source op (Cross, Improve, Shed)?
    pub fn has_src(self) -> bool {
        matches!(self, StepKind::Cross | StepKind::Improve | StepKind::Shed)
    }
    /// Kind-table: does the home record carry `plen` + payload (Rescan, Control, Seal, Uncross)?
    pub fn has_payload(self) -> bool {
        matches!(
            self,
            StepKind::Rescan | StepKind::Control | StepKind::Seal | StepKind::Uncross
        )
    }
    /// Lower-case name.
    pub fn name(self) -> &'static str {
        match self {
            StepKind::Cross => "cross",
            StepKind::Improve => "improve",
            StepKind::Depletion => "depletion",
            StepKind::Rescan => "rescan",
            StepKind::Idle => "idle",
            StepKind::Shed => "shed",
            StepKind::Control => "control",
            StepKind::Seal => "seal",
            StepKind::Uncross => "uncross",
        }
    }
    /// All kinds.
    pub const ALL: [StepKind; 9] = [
        StepKind::Cross,
        StepKind::Improve,
        StepKind::Depletion,
        StepKind::Rescan,
        StepKind::Idle,
        StepKind::Shed,
        StepKind::Control,
        StepKind::Seal,
        StepKind::Uncross,
    ];
}

/// Step record byte-0 bits (07 §3.8).
pub mod step_bits {
    /// Kind mask.
    pub const KIND: u8 = 0x0F;
    /// Home record.
    pub const HOME: u8 = 0x10;
    /// Mode shift.
    pub const MODE_SHIFT: u8 = 5;
    /// Mode mask (after shift).
    pub const MODE_MASK: u8 = 0x3;
    /// The other substream carries a record of this step too.
    pub const OTHER: u8 = 0x80;
    /// SAME.
    pub const SAME: u8 = 0;
    /// DENSE.
    pub const DENSE: u8 = 1;
    /// SPARSE.
    pub const SPARSE: u8 = 2;
}

/// A merged step (07 §3.8: home record plus, if OTHER, the cut-only record). The cut is handed
/// out beside it, as a slice of `N_LANES` LaneSeqs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Step {
    /// StepId.
    pub step: u64,
    /// Kind.
    pub kind: StepKind,
    /// Source lane, `SRC_NONE` = none.
    pub src_lane: u8,
    /// Source op's LaneSeq (0 when `src_lane = SRC_NONE`).
    pub src_lane_seq: u64,
    /// Substream of the home record.
    pub home: u8,
    /// Spans both halves (OTHER).
    pub spans: bool,
}

/// BlockMark of one substream (07 §3.9).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockMark {
    /// Substream.
    pub stream: u8,
    /// Height.
    pub height: u64,
    /// Last StepId of the block.
    pub last_step: u64,
}

/// Per-lane base of a TenureStart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LaneBase {
    /// First LaneSeq expected.
    pub next_lane_seq: u64,
    /// rx_ts base.
    pub rx_ts_base: u64,
    /// fills_applied base.
    pub fills_applied_base: u64,
}

/// TenureStart (07 §3.9), for one substream's half.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TenureStart {
    /// Epoch.
    pub epoch: u32,
    /// Tenure.
    pub tenure: u8,
    /// Sequencer index.
    pub sender: u8,
    /// First StepId of the tenure.
    pub first_step: u64,
    /// First height of the tenure.
    pub first_height: u64,
    /// header_hash of the previous block.
    pub prev_header_hash: [u8; 32],
    /// One per lane of the half.
    pub lanes: Vec<LaneBase>,
    /// Absolute half-cut, one per lane of the half.
    pub prev_cut: Vec<u64>,
}

impl TenureStart {
    /// Do two substreams' TenureStarts agree on the shared fields (wire-decisions 21)?
    pub fn same_tenure(&self, o: &TenureStart) -> bool {
        self.epoch == o.epoch
            && self.tenure == o.tenure
            && self.sender == o.sender
            && self.first_step == o.first_step
            && self.first_height == o.first_height
            && self.prev_header_hash == o.prev_header_hash
    }

    /// Append the section (tag included).
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.push(tag::TENURE_START);
        out.extend_from_slice(&self.epoch.to_le_bytes());
        out.push(self.tenure);
        out.push(self.sender);
        out.extend_from_slice(&self.first_step.to_le_bytes());
        out.extend_from_slice(&self.first_height.to_le_bytes());
        out.extend_from_slice(&self.prev_header_hash);
        for b in &self.lanes {
            crate::leb::push_u64(out, b.next_lane_seq);
            out.extend_from_slice(&b.rx_ts_base.to_le_bytes());
            crate::leb::push_u64(out, b.fills_applied_base);
        }
        for &c in &self.prev_cut {
            crate::leb::push_u64(out, c);
        }
    }
}

/// One slot of a [`SlotTable`]: `slot_session` and `slot_next_pkt_seq` side by side, so a
/// record's lookup and update touch one cache line, not two.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Slot {
    /// `slot_session[slot]` (0: never bound).
    pub session: u32,
    /// `slot_next_pkt_seq[slot]`.
    pub next_pkt_seq: u32,
}

/// A session slot table (07 §3.5): one per dedicated lane, one shared by the pool (07 §3.6
/// "Pooled slots"). Exactly `MAX_SESSIONS_PER_LANE` slots.
#[derive(Debug, Clone)]
pub struct SlotTable {
    /// The slots.
    pub slots: Box<[Slot; MAX_SESSIONS_PER_LANE]>,
}

impl Default for SlotTable {
    fn default() -> Self {
        SlotTable {
            slots: Box::new([Slot::default(); MAX_SESSIONS_PER_LANE]),
        }
    }
}

impl SlotTable {
    /// Apply a SessionBind.
    #[inline]
    pub fn bind(&mut self, slot: u16, session: u32, next_pkt_seq: u32) {
        if let Some(s) = self.slots.get_mut(slot as usize) {
            *s = Slot {
                session,
                next_pkt_seq,
            };
        }
    }
}

/// The per-lane delta state shared by encoder and decoder (`LaneDec` of 07 §3.5, less the
/// slot table and the hash FIFO).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LaneState {
    /// first_lane_seq expected for the next PacketRecord.
    pub next_lane_seq: u64,
    /// Previous rx_ts.
    pub prev_rx_ts: u64,
    /// Previous fills_applied.
    pub prev_fills_applied: u64,
}

impl LaneState {
    /// From a TenureStart lane base.
    pub fn from_base(b: &LaneBase) -> Self {
        LaneState {
            next_lane_seq: b.next_lane_seq,
            prev_rx_ts: b.rx_ts_base,
            prev_fills_applied: b.fills_applied_base,
        }
    }
}

/// What a lane encodes: a packet, an Advance, or an AcctTake.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LaneOp {
    /// A packet (count may be 0 for a packet whose messages take no number).
    Pkt {
        /// Slot (< MAX_SESSIONS_PER_LANE).
        slot: u16,
        /// Numbered messages, 0..=10.
        count: u8,
        /// Shed by the lane.
        shed: bool,
        /// pkt_seq.
        pkt_seq: u32,
        /// rx_ts.
        rx_ts: u64,
        /// first_lane_seq.
        first_lane_seq: u64,
        /// fills_applied.
        fills_applied: u64,
    },
    /// An Advance record (05 §6.2).
    Advance {
        /// rx_ts (the lane's previous prio_ts).
        rx_ts: u64,
        /// fills_applied.
        fills_applied: u64,
        /// first_lane_seq (normally `next_lane_seq`).
        first_lane_seq: u64,
    },
    /// AcctTake (pooled lanes only).
    Take {
        /// Account.
        account: u32,
        /// Version after the take.
        ver: u64,
    },
}

/// Longest O-encoding of one record: h 1 + slot 2 + rx_ts 10 + FA 10 + LSEQ 10 + SEQ 5.
pub const PKT_ENC_MAX: usize = 38;

/// Encode one lane record (07 §3.6) against `st` and the slot table's `next_pkt_seq`, updating
/// both exactly as the decoder will. Returns the bytes written into `out`. Never allocates.
///
/// The caller guarantees the op is valid (count ≤ 10, slot < MAX_SESSIONS_PER_LANE,
/// rx_ts within ±2^63 of the previous, non-decreasing fills_applied and LaneSeqs); debug
/// builds assert it.
#[inline]
pub fn encode_lane_op(
    st: &mut LaneState,
    next_pkt_seq: &mut [u32],
    op: &LaneOp,
    out: &mut [u8; PKT_ENC_MAX],
) -> usize {
    let mut p = 1usize;
    match *op {
        LaneOp::Take { account, ver } => {
            out[0] = 0;
            put_u64(out, &mut p, REP_SLOT_TAKE as u64);
            put_u64(out, &mut p, account as u64);
            put_u64(out, &mut p, ver);
            p
        }
        LaneOp::Advance {
            rx_ts,
            fills_applied,
            first_lane_seq,
        } => {
            debug_assert!(fills_applied >= st.prev_fills_applied);
            let mut h = 0u8;
            put_u64(out, &mut p, REP_SLOT_ADVANCE as u64);
            put_u64(
                out,
                &mut p,
                zigzag(rx_ts.wrapping_sub(st.prev_rx_ts) as i64),
            );
            if fills_applied != st.prev_fills_applied {
                h |= h_bits::FA_NZ;
                put_u64(out, &mut p, fills_applied - st.prev_fills_applied);
            }
            // An Advance never carries LSEQ_EXC (07 §3.6 decode rule); it takes no LaneSeq.
            debug_assert_eq!(first_lane_seq, st.next_lane_seq);
            out[0] = h;
            st.prev_rx_ts = rx_ts;
            st.prev_fills_applied = fills_applied;
            p
        }
        LaneOp::Pkt {
            slot,
            count,
            shed,
            pkt_seq,
            rx_ts,
            first_lane_seq,
            fills_applied,
        } => {
            debug_assert!(count as usize <= MAX_MSGS_PER_PKT);
            debug_assert!((slot as usize) < MAX_SESSIONS_PER_LANE);
            debug_assert!(fills_applied >= st.prev_fills_applied);
            debug_assert!(first_lane_seq >= st.next_lane_seq);
            let mut h = count & h_bits::COUNT;
            if shed {
                h |= h_bits::SHED;
            }
            put_u64(out, &mut p, slot as u64);
            put_u64(
                out,
                &mut p,
                zigzag(rx_ts.wrapping_sub(st.prev_rx_ts) as i64),
            );
            if fills_applied != st.prev_fills_applied {
                h |= h_bits::FA_NZ;
                put_u64(out, &mut p, fills_applied - st.prev_fills_applied);
            }
            if first_lane_seq != st.next_lane_seq {
                h |= h_bits::LSEQ_EXC;
                put_u64(out, &mut p, first_lane_seq - st.next_lane_seq);
            }
            let expect = &mut next_pkt_seq[slot as usize];
            if pkt_seq != *expect {
                h |= h_bits::SEQ_EXC;
                put_u64(out, &mut p, pkt_seq as u64);
            }
            *expect = pkt_seq.wrapping_add(1);
            out[0] = h;
            st.prev_rx_ts = rx_ts;
            st.prev_fills_applied = fills_applied;
            st.next_lane_seq = first_lane_seq + count as u64;
            p
        }
    }
}

/// Append a SessionBind section.
pub fn encode_session_bind(b: &SessionBind, out: &mut Vec<u8>) {
    out.push(tag::SESSION_BIND);
    out.push(b.lane);
    crate::leb::push_u64(out, b.slot as u64);
    out.extend_from_slice(&b.session.to_le_bytes());
    crate::leb::push_u64(out, b.next_pkt_seq as u64);
}

/// Append a HashRun section (HASH frames only).
pub fn encode_hash_run(lane: u8, hashes: &[u64], out: &mut Vec<u8>) {
    out.push(tag::HASH_RUN);
    out.push(lane);
    crate::leb::push_u64(out, hashes.len() as u64);
    for h in hashes {
        out.extend_from_slice(&h.to_le_bytes());
    }
}

/// The per-substream step delta state (`StepDec` of 07 §3.5).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepState {
    /// The last step this substream carried a record of.
    pub prev_step: u64,
    /// This half's cut, `|H|` values.
    pub prev_cut: [u64; N_HALF_MAX],
    /// `|H|`.
    pub half_len: usize,
}

impl StepState {
    /// From a TenureStart (wire-decisions 11: prev_step = first_step − 1).
    pub fn new(first_step: u64, prev_cut: &[u64]) -> Self {
        let mut c = [0u64; N_HALF_MAX];
        c[..prev_cut.len()].copy_from_slice(prev_cut);
        StepState {
            prev_step: first_step.wrapping_sub(1),
            prev_cut: c,
            half_len: prev_cut.len(),
        }
    }
}

/// One half record to encode (07 §3.8). `cut` is this half's new cut (`|H|` values).
#[derive(Debug, Clone, Copy)]
pub struct HalfRecord<'a> {
    /// StepId.
    pub step: u64,
    /// Kind (a cut-only record repeats the home record's kind).
    pub kind: StepKind,
    /// Home record (false: cut-only).
    pub home: bool,
    /// The other substream carries a record of this step too.
    pub other: bool,
    /// Source lane as a lane index (home records; `SRC_NONE` = none).
    pub src_lane: u8,
    /// Source op's LaneSeq.
    pub src_lane_seq: u64,
    /// Payload (home records of payload kinds only).
    pub payload: &'a [u8],
    /// This half's new cut.
    pub cut: &'a [u64],
}

/// Encode one step half record against `st` (07 §3.8), choosing SAME, or the shorter of DENSE
/// and SPARSE. `half_start` is the half's first lane (to index `src_lane` into `cut`). Updates
/// `st`. Returns false (writing nothing) if the record is not encodable: a decreasing cut, a
/// step not above `prev_step`, or a cut-only record with an unchanged cut.
pub fn encode_step_half(
    st: &mut StepState,
    half_start: usize,
    rec: &HalfRecord<'_>,
    out: &mut Vec<u8>,
) -> bool {
    let n = st.half_len;
    if rec.cut.len() != n || rec.step <= st.prev_step && st.prev_step != u64::MAX {
        return false;
    }
    let mut changed = 0usize;
    let mut dense_len = 0usize;
    let mut sparse_vals = 0usize;
    for i in 0..n {
        let (old, new) = (st.prev_cut[i], rec.cut[i]);
        if new < old {
            return false;
        }
        let d = new - old;
        dense_len += len_u64(d);
        if d != 0 {
            changed += 1;
            sparse_vals += len_u64(d);
        }
    }
    let sparse_len = n.div_ceil(8) + sparse_vals;
    let mode = if changed == 0 {
        step_bits::SAME
    } else if sparse_len < dense_len {
        step_bits::SPARSE
    } else {
        step_bits::DENSE
    };
    if !rec.home && mode == step_bits::SAME {
        return false;
    }
    let mut b0 = rec.kind as u8 | (mode << step_bits::MODE_SHIFT);
    if rec.home {
        b0 |= step_bits::HOME;
    }
    if rec.other {
        b0 |= step_bits::OTHER;
    }
    out.push(b0);
    crate::leb::push_u64(out, rec.step - st.prev_step.wrapping_add(1));
    if rec.home {
        out.push(rec.src_lane);
        if rec.src_lane != SRC_NONE {
            let i = rec.src_lane as usize - half_start;
            crate::leb::push_u64(
                out,
                zigzag(rec.src_lane_seq.wrapping_sub(rec.cut[i]) as i64),
            );
        }
        if rec.kind.has_payload() {
            crate::leb::push_u64(out, rec.payload.len() as u64);
            out.extend_from_slice(rec.payload);
        }
    }
    match mode {
        step_bits::DENSE => {
            for i in 0..n {
                crate::leb::push_u64(out, rec.cut[i] - st.prev_cut[i]);
            }
        }
        step_bits::SPARSE => {
            let base = out.len();
            out.resize(base + n.div_ceil(8), 0);
            for i in 0..n {
                if rec.cut[i] != st.prev_cut[i] {
                    out[base + i / 8] |= 1 << (i % 8);
                }
            }
            for i in 0..n {
                if rec.cut[i] != st.prev_cut[i] {
                    crate::leb::push_u64(out, rec.cut[i] - st.prev_cut[i]);
                }
            }
        }
        _ => {}
    }
    st.prev_cut[..n].copy_from_slice(rec.cut);
    st.prev_step = rec.step;
    true
}

/// Append a BlockMark section (07 §3.9): height, last_step delta from `prev_last_step`, and the
/// half's lane_bounds as bitmap + deltas from `prev_bounds`. Updates `prev_bounds`.
pub fn encode_block_mark(
    height: u64,
    last_step: u64,
    prev_last_step: u64,
    prev_bounds: &mut [u64],
    bounds: &[u64],
    out: &mut Vec<u8>,
) {
    out.push(tag::BLOCK_MARK);
    crate::leb::push_u64(out, height);
    crate::leb::push_u64(out, last_step - prev_last_step);
    let n = bounds.len();
    let base = out.len();
    out.resize(base + n.div_ceil(8), 0);
    for i in 0..n {
        if bounds[i] != prev_bounds[i] {
            out[base + i / 8] |= 1 << (i % 8);
        }
    }
    for i in 0..n {
        if bounds[i] != prev_bounds[i] {
            crate::leb::push_u64(out, bounds[i] - prev_bounds[i]);
        }
    }
    prev_bounds.copy_from_slice(bounds);
}

/// Which layout-level limits a section may touch; used by encoders to place lanes.
pub fn lanes_of(layout: &Layout, stream: u8) -> core::ops::Range<usize> {
    let s = layout.half_start(stream);
    s..s + layout.half_len(stream)
}
