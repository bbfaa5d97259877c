//! Frame building for one substream (07 §3.2–§3.4, §4.5): sections packed into frames no larger
//! than a body cap, `frame_seq` per substream, and the substream's `order_root_H` per block
//! (§6.1) computed from the section bytes as they are appended.
//!
//! The reference builder of the corpus generator, tests and tools, and the sequencer's stream
//! cores' (crate `seq`): they take each sealed frame with [`FrameWriter::take_frame`], write it,
//! and hand the buffer back with [`FrameWriter::recycle`], so steady state allocates nothing.

use crate::consts::*;
use crate::frame::{FrameHeader, FrameKind, Heartbeat};
use crate::header::{BlockHeader, Hash};
use crate::leb::{len_u64, push_u64};
use crate::records::tag;

/// Builds the frames of one substream.
#[derive(Debug)]
pub struct FrameWriter {
    hdr: FrameHeader,
    next_seq: u64,
    body: Vec<u8>,
    cap: usize,
    block_hasher: blake3::Hasher,
    hash_from: usize,
    out: Vec<Vec<u8>>,
    /// Frame buffers handed back by the caller ([`FrameWriter::recycle`]), reused by the next
    /// seals: a caller that recycles every frame it took allocates nothing in steady state.
    free: Vec<Vec<u8>>,
}

impl FrameWriter {
    /// A writer for (book, epoch, tenure, sender, stream), ORDER bodies capped at `cap` bytes.
    pub fn new(book: u16, epoch: u32, tenure: u8, sender: u8, stream: u8, cap: usize) -> Self {
        FrameWriter {
            hdr: FrameHeader {
                kind: FrameKind::Order,
                book,
                epoch16: epoch as u16,
                frame_seq: 0,
                flags: 0,
                tenure,
                body_len: 0,
                sender,
                stream,
            },
            next_seq: 1,
            body: Vec::with_capacity(cap.max(256)),
            cap,
            block_hasher: blake3::Hasher::new(),
            hash_from: 0,
            out: Vec::new(),
            free: Vec::new(),
        }
    }

    /// The substream.
    pub fn stream(&self) -> u8 {
        self.hdr.stream
    }

    /// Bytes in the open ORDER frame.
    pub fn open_len(&self) -> usize {
        self.body.len()
    }

    /// Body cap.
    pub fn cap(&self) -> usize {
        self.cap
    }

    /// Frames finished since the last call, in `frame_seq` order.
    pub fn take_frames(&mut self) -> Vec<Vec<u8>> {
        std::mem::take(&mut self.out)
    }

    /// Frames finished and not yet taken.
    pub fn pending(&self) -> usize {
        self.out.len()
    }

    /// Take frame `i` of the finished ones (`0..pending()`), leaving an empty buffer in its place;
    /// call [`FrameWriter::clear_taken`] after the last. No allocation.
    pub fn take_frame(&mut self, i: usize) -> Vec<u8> {
        std::mem::take(&mut self.out[i])
    }

    /// Forget the frames taken with [`FrameWriter::take_frame`].
    pub fn clear_taken(&mut self) {
        self.out.clear();
    }

    /// Hand a frame buffer back for reuse by a later seal (its contents are discarded).
    pub fn recycle(&mut self, mut buf: Vec<u8>) {
        if self.free.len() < 1024 {
            buf.clear();
            self.free.push(buf);
        }
    }

    fn seal(&mut self, kind: FrameKind, body: &[u8]) {
        let mut h = self.hdr;
        h.kind = kind;
        h.frame_seq = self.next_seq;
        h.body_len = body.len() as u16;
        self.next_seq += 1;
        let mut f = self
            .free
            .pop()
            .unwrap_or_else(|| Vec::with_capacity(REP_FRAME_HDR_BYTES + body.len().max(256)));
        f.extend_from_slice(&h.to_bytes());
        f.extend_from_slice(body);
        self.out.push(f);
    }

    /// Flush the open ORDER frame, if it holds anything.
    pub fn flush(&mut self) {
        if self.body.is_empty() {
            return;
        }
        self.block_hasher.update(&self.body[self.hash_from..]);
        self.hash_from = 0;
        let body = std::mem::take(&mut self.body);
        self.seal(FrameKind::Order, &body);
        self.body = body;
        self.body.clear();
    }

    /// Append one LaneRun section: lane `lane`, `n` records whose encodings are `recs`
    /// concatenated. The caller has checked it fits the open frame (`open_len`, `cap`).
    pub fn lane_run(&mut self, lane: u8, n: usize, recs: &[u8]) {
        self.body.push(lane);
        push_u64(&mut self.body, n as u64);
        self.body.extend_from_slice(recs);
    }

    /// Make room for a section of `n` bytes: flush first if it would pass the cap.
    pub fn reserve(&mut self, n: usize) {
        if !self.body.is_empty() && self.body.len() + n > self.cap {
            self.flush();
        }
    }

    /// Start the tenure: frame 1 begins with this TenureStart section (07 §3.9). The section
    /// is not part of the first block's order bytes (§6.1).
    pub fn tenure_start(&mut self, section: &[u8]) {
        debug_assert!(self.next_seq == 1 && self.body.is_empty());
        self.body.extend_from_slice(section);
        self.hash_from = self.body.len();
    }

    /// Append an encoded section (SessionBind, StepRun, BlockMark …) as one unit.
    pub fn section(&mut self, bytes: &[u8]) {
        self.reserve(bytes.len());
        self.body.extend_from_slice(bytes);
    }

    /// Append lane `l`'s pre-encoded records as LaneRun sections, splitting runs at frame
    /// boundaries (sections never straddle frames, 07 §3.4).
    pub fn lane_records(&mut self, lane: u8, recs: &[&[u8]]) {
        let mut i = 0;
        while i < recs.len() {
            // How many fit in the current frame?
            let room = self.cap.saturating_sub(self.body.len());
            let mut n = 0;
            let mut bytes = 0;
            while i + n < recs.len() {
                let nb = bytes + recs[i + n].len();
                if 1 + len_u64((n + 1) as u64) + nb > room {
                    break;
                }
                bytes = nb;
                n += 1;
            }
            if n == 0 {
                if self.body.is_empty() {
                    n = 1; // one record always fits an empty frame
                } else {
                    self.flush();
                    continue;
                }
            }
            self.body.push(lane);
            push_u64(&mut self.body, n as u64);
            for r in &recs[i..i + n] {
                self.body.extend_from_slice(r);
            }
            i += n;
        }
    }

    /// Append a BlockMark section and close this substream's part of the block: returns
    /// `order_root_H(h)`, BLAKE3 over the section bytes since the previous mark (§6.1).
    pub fn block_mark(&mut self, section: &[u8]) -> Hash {
        self.section(section);
        self.block_hasher.update(&self.body[self.hash_from..]);
        self.hash_from = self.body.len();
        let r = *self.block_hasher.finalize().as_bytes();
        self.block_hasher.reset();
        r
    }

    /// End the open frame with a Pad section of `n` bytes (tag included); flushes it.
    pub fn pad(&mut self, n: usize) {
        if n == 0 {
            return;
        }
        let n = n.min(self.cap.saturating_sub(self.body.len()).max(1));
        self.body.push(tag::PAD);
        self.body.resize(self.body.len() + n - 1, 0);
        self.flush();
    }

    /// Emit a HASH frame with these sections (HashRuns); the ORDER frame in progress is not
    /// touched.
    pub fn hash_frame(&mut self, body: &[u8]) {
        self.seal(FrameKind::Hash, body);
    }

    /// Emit a HEADER frame (substream A only, wire-decisions 24).
    pub fn header_frame(&mut self, h: &BlockHeader) {
        let b = h.to_bytes();
        self.seal(FrameKind::Header, &b);
    }

    /// Emit a HEARTBEAT frame.
    pub fn heartbeat(&mut self, hb: &Heartbeat) {
        let b = hb.to_bytes();
        self.seal(FrameKind::Heartbeat, &b);
    }
}

impl FrameWriter {
    /// Frames sealed so far (its next `frame_seq` − 1).
    pub fn frames_sealed(&self) -> usize {
        (self.next_seq - 1) as usize
    }
}
