//! The peer frame store (07 §4.10): every frame order RX delivers is kept for
//! REP_PEER_RING_MS (and within a byte budget) so this replica can serve its peers'
//! `RepairReq`s — the fallback when the sequencer's ring no longer holds a frame, and the only
//! source for older ones (then the journal). Served frames go out with `flags.peer_repaired`
//! set (the receiver trusts them only once their block's `order_root` checks), at most
//! REP_PEER_RTX_MAX_FPS frames a second (token bucket; the rest is counted and the peer asks
//! again or elsewhere).
//!
//! One preallocated circular byte log per substream and an index of `(frame_seq, time, offset,
//! length)`: storing a frame copies its bytes and allocates nothing once the index has grown to
//! its working size. Frames arrive in `frame_seq` order (order RX delivers in order), so a range
//! is found by subtraction from the oldest held.

use std::collections::VecDeque;

use crate::disk::order_journal::OrderJournal;
use vyrn_wire::consts::{REP_PEER_RING_MS, REP_PEER_RTX_MAX_FPS};
use vyrn_wire::frame::{FLAGS_OFFSET, FLAG_PEER_REPAIRED};
use vyrn_wire::msg::ctrl::RepairReq;

/// Burst of the serving token bucket (frames).
const SERVE_BURST: u64 = 4096;

/// What serving one `RepairReq` did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Served {
    /// Frames sent.
    pub sent: u64,
    /// Frames held but not sent: over REP_PEER_RTX_MAX_FPS.
    pub capped: u64,
    /// Frames of the range this store does not hold (older than it, or not yet received).
    pub missing: u64,
}

/// Counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StoreCounters {
    /// Frames stored.
    pub stored: u64,
    /// Frames evicted (age or bytes).
    pub evicted: u64,
    /// Frames refused: larger than the whole log, or out of order.
    pub refused: u64,
    /// Repair requests served, frames sent, capped, missing.
    pub requests: u64,
    /// Frames sent to peers.
    pub sent: u64,
    /// Frames held back by the rate cap.
    pub capped: u64,
    /// Frames asked for and not held.
    pub missing: u64,
    /// Frames sent from the order journal (older than the memory store).
    pub from_journal: u64,
}

#[derive(Debug)]
struct Log {
    buf: Vec<u8>,
    /// (frame_seq, stored at, offset, len), oldest first, frame_seq consecutive.
    idx: VecDeque<(u64, u64, usize, usize)>,
    /// Where the next frame starts.
    head: usize,
}

impl Log {
    fn new(bytes: usize) -> Self {
        Log {
            buf: vec![0; bytes],
            idx: VecDeque::with_capacity(1024),
            head: 0,
        }
    }

    /// Evict the oldest while they overlap `[from, to)` of the buffer.
    fn free(&mut self, from: usize, to: usize) -> u64 {
        let mut n = 0;
        while let Some(&(_, _, off, len)) = self.idx.front() {
            if off < to && from < off + len {
                self.idx.pop_front();
                n += 1;
            } else {
                break;
            }
        }
        n
    }

    fn get(&self, seq: u64) -> Option<&[u8]> {
        let &(first, ..) = self.idx.front()?;
        let i = usize::try_from(seq.checked_sub(first)?).ok()?;
        let &(s, _, off, len) = self.idx.get(i)?;
        (s == seq).then(|| &self.buf[off..off + len])
    }
}

/// The store, both substreams.
#[derive(Debug)]
pub struct FrameStore {
    logs: [Log; 2],
    keep_ns: u64,
    fps: u64,
    tokens: u64,
    last_refill: u64,
    scratch: Vec<u8>,
    counters: StoreCounters,
    /// The order journal behind the memory store (07 §4.10 "and then from their NVMe order
    /// journal"), if this replica journals.
    journal: Option<OrderJournal>,
}

impl FrameStore {
    /// A store of `bytes_per_stream` bytes per substream keeping frames `keep_ns` (07:
    /// REP_PEER_RING_MS) and serving at most `fps` frames a second (REP_PEER_RTX_MAX_FPS).
    pub fn new(bytes_per_stream: usize, keep_ns: u64, fps: u64) -> Self {
        FrameStore {
            logs: [Log::new(bytes_per_stream), Log::new(bytes_per_stream)],
            keep_ns,
            fps: fps.max(1),
            tokens: SERVE_BURST,
            last_refill: 0,
            scratch: Vec::with_capacity(9216),
            counters: StoreCounters::default(),
            journal: None,
        }
    }

    /// A store with 07's figures: REP_PEER_RING_MS, REP_PEER_RTX_MAX_FPS.
    pub fn with_defaults(bytes_per_stream: usize) -> Self {
        Self::new(
            bytes_per_stream,
            REP_PEER_RING_MS * 1_000_000,
            REP_PEER_RTX_MAX_FPS,
        )
    }

    /// Keep every stored frame in `j` too, and serve from it what memory no longer holds.
    pub fn set_journal(&mut self, j: OrderJournal) {
        self.journal = Some(j);
    }

    /// The order journal, if any.
    pub fn journal(&self) -> Option<&OrderJournal> {
        self.journal.as_ref()
    }

    /// The order journal, to read (a restarted replica's own frames).
    pub fn journal_mut(&mut self) -> Option<&mut OrderJournal> {
        self.journal.as_mut()
    }

    /// Write the order journal's buffered frames (every tick of the node).
    pub fn flush(&mut self) {
        if let Some(j) = self.journal.as_mut() {
            j.flush();
        }
    }

    /// Counters.
    pub fn counters(&self) -> StoreCounters {
        self.counters
    }

    /// The oldest and newest frame_seq held for `stream`.
    pub fn span(&self, stream: u8) -> Option<(u64, u64)> {
        let l = self.logs.get(stream as usize)?;
        Some((l.idx.front()?.0, l.idx.back()?.0))
    }

    /// Keep frame `seq` of `stream` (delivered in order by order RX) at `now` (and append it to
    /// the order journal, if any).
    pub fn store(&mut self, stream: u8, seq: u64, frame: &[u8], now: u64) -> bool {
        if let Some(j) = self.journal.as_mut() {
            j.append(stream, seq, frame);
        }
        let Some(l) = self.logs.get_mut(stream as usize & 1) else {
            return false;
        };
        let len = frame.len();
        let in_order = l.idx.back().is_none_or(|b| b.0 + 1 == seq);
        if len == 0 || len > l.buf.len() || !in_order {
            self.counters.refused += 1;
            return false;
        }
        if l.head + len > l.buf.len() {
            // Wrap: the tail end of the buffer is left unused this lap.
            self.counters.evicted += l.free(l.head, l.buf.len());
            l.head = 0;
        }
        self.counters.evicted += l.free(l.head, l.head + len);
        l.buf[l.head..l.head + len].copy_from_slice(frame);
        l.idx.push_back((seq, now, l.head, len));
        l.head += len;
        self.counters.stored += 1;
        self.evict(now);
        true
    }

    /// Drop frames older than the keep time.
    pub fn evict(&mut self, now: u64) {
        for l in &mut self.logs {
            while l
                .idx
                .front()
                .is_some_and(|f| now.saturating_sub(f.1) > self.keep_ns)
            {
                l.idx.pop_front();
                self.counters.evicted += 1;
            }
        }
    }

    /// Serve a peer's `RepairReq` at `now`: each held frame of the range, flagged
    /// `peer_repaired`, to `send`, within the rate cap.
    pub fn serve(&mut self, r: &RepairReq, now: u64, mut send: impl FnMut(&[u8])) -> Served {
        self.counters.requests += 1;
        // Refill: fps tokens a second, up to the burst.
        let dt = now.saturating_sub(self.last_refill);
        let add = (dt as u128 * self.fps as u128 / 1_000_000_000) as u64;
        if add > 0 {
            self.tokens = (self.tokens + add).min(SERVE_BURST);
            self.last_refill = now;
        }
        let mut out = Served::default();
        let Some(l) = self.logs.get(r.stream as usize) else {
            return out;
        };
        let (from, to) = (r.from_seq, r.to_seq.max(r.from_seq));
        // At most one burst's worth per request: a request for a huge range costs bounded work.
        let span = (to - from).min(SERVE_BURST * 4);
        let end = from + span;
        // Older than memory holds: the order journal, in one read per segment.
        let mut seq = from;
        let mem_first = l.idx.front().map_or(u64::MAX, |f| f.0);
        if let Some(j) = self.journal.as_mut() {
            let j_to = end.min(mem_first.saturating_sub(1));
            // Tokens are checked before any read (security review F7: a request with none left
            // read ~16k frames from disk to send nothing): the read stops where they do.
            let j_read = if self.tokens == 0 {
                None
            } else {
                Some(j_to.min(from.saturating_add(self.tokens - 1)))
            };
            if from <= j_to && j_read.is_none_or(|r| r < j_to) {
                let past = j_read.map_or(from, |r| r + 1);
                if past <= j_to {
                    out.capped += j_to - past + 1;
                }
            }
            if let Some(j_to) = j_read.filter(|&r| from <= r) {
                let (tokens, scratch) = (&mut self.tokens, &mut self.scratch);
                let mut sent = 0;
                let got = j.read(r.stream, from, j_to, |_, f| {
                    if *tokens == 0 {
                        out.capped += 1;
                        return;
                    }
                    *tokens -= 1;
                    scratch.clear();
                    scratch.extend_from_slice(f);
                    if let Some(b) = scratch.get_mut(FLAGS_OFFSET) {
                        *b |= FLAG_PEER_REPAIRED;
                    }
                    send(scratch);
                    sent += 1;
                });
                out.sent += sent;
                out.missing += (j_to - from + 1) - got;
                self.counters.from_journal += sent;
            }
            if from <= j_to {
                seq = j_to + 1;
            }
        }
        for seq in seq..=end {
            if self.tokens == 0 {
                // Out of tokens: the rest is capped without a look (the asker asks again).
                out.capped += end - seq + 1;
                break;
            }
            let Some(f) = l.get(seq) else {
                out.missing += 1;
                continue;
            };
            self.tokens -= 1;
            self.scratch.clear();
            self.scratch.extend_from_slice(f);
            if let Some(b) = self.scratch.get_mut(FLAGS_OFFSET) {
                *b |= FLAG_PEER_REPAIRED;
            }
            send(&self.scratch);
            out.sent += 1;
        }
        out.missing += (to - from) - span;
        self.counters.sent += out.sent;
        self.counters.capped += out.capped;
        self.counters.missing += out.missing;
        out
    }
}
