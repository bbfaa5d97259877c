//! The open block as a seal would close it (07 §9.4): what a replica's decoder holds after the
//! last BlockMark, through the newest in-order frame of each substream.

use super::{DecState, StreamDec};
use crate::header::{empty_root, Hash};

/// The open block of a decoder whose substreams stopped at their newest in-order frames — the
/// seal header's fields that come from the order stream (07 §9.4):
///
/// - `first_step` = `last_step(H*) + 1`, `last_step` = the last StepId delivered (every step
///   complete in the frames held: a cut-only record whose home record is not in them is not
///   delivered, and nor is any later step);
/// - `order_root` over each substream's ORDER section bytes after its BlockMark(H*) through its
///   newest frame (as 07 §6.1 for a normal block);
/// - `lane_bounds`: the last `lane_seq` of each lane in the frames held.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenBlock {
    /// Its height: `H* + 1`.
    pub height: u64,
    /// `last_step(H*) + 1`.
    pub first_step: u64,
    /// The last step delivered (`first_step − 1` for none).
    pub last_step: u64,
    /// BLAKE3(order_root_A ‖ order_root_B).
    pub order_root: Hash,
    /// Substream A's root over its bytes after BlockMark(H*).
    pub order_root_a: Hash,
    /// Substream B's (BLAKE3 of nothing with one substream).
    pub order_root_b: Hash,
    /// Per lane, the last `lane_seq` decoded.
    pub lane_bounds: Vec<u64>,
    /// Per substream, the next frame_seq expected (the frames held end one below).
    pub next_frame_seq: [u64; 2],
}

fn peek_root(s: &StreamDec) -> Hash {
    let mut h = s.hasher.clone();
    h.update(&s.root_buf);
    *h.finalize().as_bytes()
}

impl DecState {
    /// The open block (07 §9.4), or `None` when there is none to seal: a substream failed or has
    /// no TenureStart yet, the substreams' last BlockMarks differ (one passed a mark the other
    /// has not), or a marked block still waits for its steps.
    pub fn open_block(&self) -> Option<OpenBlock> {
        let n = self.layout.n_streams as usize;
        let t = self.tail()?;
        let live = &self.streams[..n];
        let s0 = &live[0];
        if live
            .iter()
            .any(|s| s.next_height != s0.next_height || s.last_mark_step != s0.last_mark_step)
        {
            return None;
        }
        if !self.blocks_ready.is_empty() || live.iter().any(|s| !s.roots.is_empty()) {
            return None;
        }
        let a = peek_root(s0);
        let b = if n == 2 {
            peek_root(&live[1])
        } else {
            empty_root()
        };
        Some(OpenBlock {
            height: s0.next_height,
            first_step: s0.last_mark_step + 1,
            last_step: t.last_step,
            order_root: crate::header::order_root(&a, &b),
            order_root_a: a,
            order_root_b: b,
            lane_bounds: t.lane_bounds,
            next_frame_seq: t.next_frame_seq,
        })
    }
}

/// Where a decoder's substreams stopped, whatever BlockMarks they passed (07 §9.4's seal over a
/// tail that spans marks whose headers never came): the fields of the seal header that do not
/// depend on where the prefix's signed part ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tail {
    /// The last step delivered, or the newest BlockMark's `last_step` if higher (the open
    /// block's form: a substream that passed a mark the other has not reached yet).
    pub last_step: u64,
    /// The last step delivered: every step up to it complete in the frames held (both halves
    /// where OTHER is set). A seal's `last_step` (07 §9.4: a record whose step is not complete
    /// in the prefix is dropped, and every later one).
    pub delivered: u64,
    /// Per lane, the last `lane_seq` decoded.
    pub lane_bounds: Vec<u64>,
    /// Per substream, the next frame_seq expected.
    pub next_frame_seq: [u64; 2],
    /// Per substream, its open block's height (last BlockMark + 1).
    pub open_height: [u64; 2],
}

impl DecState {
    /// The tail (see [`Tail`]), or `None` when a substream failed or has no TenureStart yet.
    pub fn tail(&self) -> Option<Tail> {
        let n = self.layout.n_streams as usize;
        let live = &self.streams[..n];
        if live
            .iter()
            .any(|s| s.failed.is_some() || s.tenure.is_none())
        {
            return None;
        }
        let lanes = self.layout.n_lanes as usize;
        let mark_step = live.iter().map(|s| s.last_mark_step).max().unwrap_or(0);
        Some(Tail {
            last_step: self.next_emit.saturating_sub(1).max(mark_step),
            delivered: self.next_emit.saturating_sub(1),
            lane_bounds: self.lanes[..lanes.min(self.lanes.len())]
                .iter()
                .map(|l| l.st.next_lane_seq.saturating_sub(1))
                .collect(),
            next_frame_seq: [
                live[0].next_frame_seq,
                live.get(1).map_or(0, |s| s.next_frame_seq),
            ],
            open_height: [
                live[0].next_height,
                live.get(1).map_or(0, |s| s.next_height),
            ],
        })
    }
}
