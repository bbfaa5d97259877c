//! What each tile reads and writes of the box's shared memory (07 §4.1's table), as one trait per
//! tile. [`crate::tiles`] implements them over `vyrn-rings` SPSC rings and gate words, one set of
//! endpoints per tile, so each tile runs on its own pinned core, round-robin with others, or
//! under the seeded scheduler of the tests — the same code in every case.

use crate::shm::{ClosedHalf, FrameInfo, PktEntry, StepMsg};
use vyrn_wire::header::BlockHeader;

/// A replication path's answer to one frame write (07 §4.2, §14).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathWrite {
    /// Queued on the path.
    Done,
    /// Backpressure: the path's queue is full; the stream core tries again at a later poll.
    Busy,
    /// The path refused the write (an error, not backpressure): REP_A_PATH.
    Failed,
}

/// A stream core's view (07 §4.2): its lanes' `R_pkt`/`R_hash8`, its `R_step` cursor, its
/// `released[H]` word, its lanes' `LaneCut`, `seq_fenced`, and its two paths.
pub trait StreamMem {
    /// `seq_fenced` (INV-REP-6).
    fn fenced(&self) -> bool;
    /// The next record of lane `l` from `R_pkt[l]`.
    fn pkt_pop(&mut self, l: usize) -> Option<PktEntry>;
    /// The next `(first_lane_seq, pkt_hash)` of lane `l` from `R_hash8[l]`.
    fn hash8_pop(&mut self, l: usize) -> Option<(u64, u64)>;
    /// The head of stream core `h`'s `R_step` cursor.
    fn step_peek(&mut self, h: u8) -> Option<StepMsg>;
    /// Advance stream core `h`'s `R_step` cursor.
    fn step_pop(&mut self, h: u8);
    /// Frame `frame_seq` of substream `h` carries records of steps up to `step` (for control's
    /// DUR_QUORUM, 07 §6.9).
    fn frame_step(&mut self, h: u8, frame_seq: u64, step: u64);
    /// Write a frame on replication path `path` (0: A, 1: B) — one half of 07 §4.2's
    /// `flush_order`; the stream core fences with [`StreamMem::fence_paths`] before it releases.
    fn write_path(&mut self, path: u8, info: &FrameInfo, bytes: &[u8]) -> PathWrite;
    /// Fence: every frame write so far is complete (the sfence after the CTPIO writes); false
    /// if a path still holds some (try again).
    fn fence_paths(&mut self) -> bool;
    /// REP_A_PATH raised (`down`) or cleared for path `path` of this substream (07 §14).
    fn path_alarm(&mut self, path: u8, down: bool);
    /// Set `seq_fenced` (INV-REP-6): a frame could not be written on any path.
    fn fence(&mut self);
    /// Store `released[h]` (release; after the frame's writes).
    fn release(&mut self, h: u8, step: u64);
    /// `released[h]` as last stored.
    fn released(&self, h: u8) -> u64;
    /// Store `LaneCut[l]` (INV-REP-11: after the release).
    fn lane_cut(&mut self, l: usize, step: u64, cut: u64);
    /// Hand a closed block half to the order hasher.
    fn closed(&mut self, h: u8, c: ClosedHalf);
    /// A signed header for stream-A to write.
    fn header_pop(&mut self) -> Option<BlockHeader>;
    /// Count an encoding refusal (never expected).
    fn error(&mut self);
    /// Post `close_req` for `height` (07 §3.9: stream-A's clock crossed `k × BLOCK_NS`);
    /// false if the previous request is not taken yet.
    fn post_close(&mut self, height: u64) -> bool;
}

/// Control's view (07 §4.8, §6.8, §6.9).
pub trait ControlMem {
    /// The next entry on control's `R_step` cursor.
    fn step_pop(&mut self) -> Option<StepMsg>;
    /// The next `(frame_seq, step)` a stream core reported for substream `h`.
    fn frame_step_pop(&mut self, h: usize) -> Option<(u64, u64)>;
    /// Send a notice (a watermark, `NOTICE_RESP_SEQ`) to a session.
    fn notice(&mut self, session: u32, bytes: &[u8]);
    /// Set `seq_fenced` (INV-REP-6; never cleared in the tenure).
    fn fence(&mut self);
    /// Raise `REP_DurableMark{step, height}` (07 §6.9, DUR_QUORUM).
    fn durable_mark(&mut self, step: u64, height: u64);
    /// The newest StepId of a response sent to `session` (`u64::MAX`: unknown, so every
    /// watermark goes to it).
    fn session_step(&self, _session: u32) -> u64 {
        u64::MAX
    }
}

/// The order hasher's view (07 §4.6).
pub trait HasherMem {
    /// The next `(lane, first_lane_seq, full hash)` from the lanes.
    fn hash32_pop(&mut self) -> Option<(u8, u64, [u8; 32])>;
    /// The oldest closed half of substream `h` not yet taken.
    fn closed_peek(&mut self, h: usize) -> Option<&ClosedHalf>;
    /// Take it.
    fn closed_pop(&mut self, h: usize) -> Option<ClosedHalf>;
    /// A signed header for stream-A.
    fn header_push(&mut self, hdr: BlockHeader);
}
