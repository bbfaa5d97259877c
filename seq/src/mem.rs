//! What each tile reads and writes of the box's shared memory (07 §4.1's table), as one trait per
//! tile. The one-thread box ([`crate::home::SeqHome`]) implements them over [`Shared`] (rings as
//! queues, words as fields) so any scheduler — round-robin or the seeded one of T-REP-1 — can
//! interleave the tiles; the threaded box ([`crate::threaded`]) implements them over `vyrn-rings`
//! SPSC rings and gate words, one set of endpoints per tile, so each tile can run on its own
//! pinned core. The tiles' code is the same in both.

use crate::home::{ClosedHalf, FrameInfo, PktEntry, Shared, StepMsg, WireEvent};
use vyrn_wire::header::BlockHeader;

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
    /// Write a frame to **both** paths, then fence (07 §4.2 `flush_order`); returns when both
    /// writes are complete.
    fn write_frame(&mut self, info: &FrameInfo, bytes: &[u8]);
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

impl StreamMem for Shared {
    fn fenced(&self) -> bool {
        self.fenced
    }
    fn pkt_pop(&mut self, l: usize) -> Option<PktEntry> {
        self.r_pkt[l].pop_front()
    }
    fn hash8_pop(&mut self, l: usize) -> Option<(u64, u64)> {
        self.r_hash8[l].pop_front()
    }
    fn step_peek(&mut self, h: u8) -> Option<StepMsg> {
        self.r_step[h as usize].front().copied()
    }
    fn step_pop(&mut self, h: u8) {
        self.r_step[h as usize].pop_front();
    }
    fn frame_step(&mut self, h: u8, frame_seq: u64, step: u64) {
        self.frame_steps[h as usize].push_back((frame_seq, step));
    }
    fn write_frame(&mut self, info: &FrameInfo, bytes: &[u8]) {
        if self.log_frames {
            self.log(WireEvent::Frame {
                info: info.clone(),
                bytes: bytes.to_vec(),
            });
        } else {
            self.frames_written += 1;
        }
    }
    fn release(&mut self, h: u8, step: u64) {
        self.released[h as usize] = step;
        if self.stamp_releases {
            self.released_at[h as usize] = Some(std::time::Instant::now());
        }
    }
    fn released(&self, h: u8) -> u64 {
        self.released[h as usize]
    }
    fn lane_cut(&mut self, l: usize, step: u64, cut: u64) {
        self.lane_cut[l] = (step, cut);
    }
    fn closed(&mut self, h: u8, c: ClosedHalf) {
        self.closed[h as usize].push_back(c);
    }
    fn header_pop(&mut self) -> Option<BlockHeader> {
        self.headers.pop_front()
    }
    fn error(&mut self) {
        self.errors += 1;
    }
    fn post_close(&mut self, height: u64) -> bool {
        if self.close_req.is_some() {
            return false;
        }
        self.close_req = Some(height);
        true
    }
}

impl ControlMem for Shared {
    fn step_pop(&mut self) -> Option<StepMsg> {
        self.r_step[2].pop_front()
    }
    fn frame_step_pop(&mut self, h: usize) -> Option<(u64, u64)> {
        self.frame_steps[h].pop_front()
    }
    fn notice(&mut self, session: u32, bytes: &[u8]) {
        self.log(WireEvent::Notice {
            session,
            bytes: bytes.to_vec(),
        });
    }
    fn fence(&mut self) {
        self.fenced = true;
    }
    fn durable_mark(&mut self, step: u64, height: u64) {
        self.durable_mark = Some((step, height));
        self.durable_marks += 1;
    }
}

impl HasherMem for Shared {
    fn hash32_pop(&mut self) -> Option<(u8, u64, [u8; 32])> {
        self.r_hash32.pop_front()
    }
    fn closed_peek(&mut self, h: usize) -> Option<&ClosedHalf> {
        self.closed[h].front()
    }
    fn closed_pop(&mut self, h: usize) -> Option<ClosedHalf> {
        self.closed[h].pop_front()
    }
    fn header_push(&mut self, hdr: BlockHeader) {
        self.headers.push_back(hdr);
    }
}
