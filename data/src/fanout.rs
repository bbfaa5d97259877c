//! Fan-out tile (07 §5.2 step 6, §5.3): stored packets into DATA frames for every destination,
//! sent at 9000 B or `REP_DATA_BATCH_US` old, `DATA_HB` when idle, and the frame log that lets
//! `DataFetch::Range` rebuild any frame still in the ring.
//!
//! **One frame for all destinations.** Every destination receives every packet, in the same
//! order, so a frame is built once and its one buffer is sent to each destination (the driver
//! points every port at the same bytes). `data_seq` is one counter, from 1: the sequence each
//! destination sees is gapless while it is in the set, which is what 07 §5.3 asks of a
//! per-destination `data_seq`. A destination that joins later starts at the current value.
//!
//! **Books.** The frame header names one book, so each served book has its own open frame.
//! `data_seq` is taken when a frame opens, and frames are sent in `data_seq` order: sending a
//! frame first sends every older open frame.
//!
//! **Heartbeat.** With no frame sent for `hb_ns`, a `DATA_HB` goes to every destination. It
//! carries the `data_seq` of the last DATA frame (0 before the first), so a replica that missed
//! the last frame before a quiet spell sees the gap within one heartbeat (this project's
//! reading; 07 §5.3 says only that a heartbeat is sent).
//!
//! **Frame log.** Entry `data_seq mod L` (L = the ring's capacity, since a frame holds at least
//! one packet) keeps the frame's first ring seq and span; each ring slot keeps the `data_seq`
//! of its frame. A frame is rebuilt by scanning that span for slots of that frame.

use vyrn_wire::consts::REP_DATA_FRAME_MAX;
use vyrn_wire::msg::client::REQ_MIN_LEN;
use vyrn_wire::msg::data::{DataHeader, DataKind, DATA_HDR_BYTES, DATA_MAX_PKTS};

use crate::counters::Counters;
use crate::out::{Class, OutQueue, To};
use crate::store::Ring;

/// Wire bytes a packet of `len` bytes takes in a frame body: length prefix, bytes, pad.
#[inline]
pub const fn slot_len(len: usize) -> usize {
    2 + len + (len & 1)
}

/// Append one packet to a frame body.
#[inline]
pub(crate) fn put_pkt(buf: &mut Vec<u8>, pkt: &[u8]) {
    buf.extend_from_slice(&(pkt.len() as u16).to_le_bytes());
    buf.extend_from_slice(pkt);
    if pkt.len() % 2 == 1 {
        buf.push(0);
    }
}

/// Write the 24-byte header over the first bytes of `buf` (which already holds the body).
#[inline]
pub(crate) fn put_header(buf: &mut [u8], h: DataHeader) {
    buf[..DATA_HDR_BYTES].copy_from_slice(&h.to_bytes());
}

#[derive(Debug, Clone, Copy)]
struct Open {
    /// Out buffer, or `None` when the pool was empty: the frame is then logged, not sent.
    buf: Option<u32>,
    data_seq: u64,
    /// Body bytes so far.
    body: usize,
    n: usize,
    first: u64,
    last: u64,
    opened_ns: u64,
}

#[derive(Debug, Clone, Copy, Default)]
struct LogEntry {
    data_seq: u64,
    first: u64,
    span: u64,
    book: u16,
}

const _: () = assert!(core::mem::size_of::<LogEntry>() as u64 == crate::config::FRAME_LOG_BYTES);

/// A frame as the log remembers it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoggedFrame {
    /// Its book.
    pub book: u16,
    /// First ring seq of the span holding its packets.
    pub first: u64,
    /// Ring seqs in the span.
    pub span: u64,
}

/// The fan-out tile.
#[derive(Debug)]
pub struct FanOut {
    books: Box<[u16]>,
    open: Box<[Option<Open>]>,
    next_data_seq: u64,
    log: Box<[LogEntry]>,
    last_tx_ns: u64,
    src: u8,
    epoch16: u16,
    batch_ns: u64,
    hb_ns: u64,
}

impl FanOut {
    /// A tile for `books`, a log of `log_len` frames, and the box's identity.
    pub fn new(
        books: &[u16],
        log_len: usize,
        src: u8,
        epoch16: u16,
        batch_ns: u64,
        hb_ns: u64,
    ) -> Self {
        FanOut {
            books: books.to_vec().into_boxed_slice(),
            open: vec![None; books.len()].into_boxed_slice(),
            next_data_seq: 1,
            log: vec![LogEntry::default(); log_len.max(1)].into_boxed_slice(),
            last_tx_ns: 0,
            src,
            epoch16,
            batch_ns,
            hb_ns,
        }
    }

    /// The `data_seq` of the last frame sent or logged (0: none).
    pub fn last_data_seq(&self) -> u64 {
        self.next_data_seq - 1
    }

    fn header(
        &self,
        kind: DataKind,
        book: u16,
        data_seq: u64,
        n: usize,
        body: usize,
    ) -> DataHeader {
        DataHeader {
            kind,
            book,
            epoch16: self.epoch16,
            data_seq,
            src: self.src,
            n_pkts: n as u8,
            body_len: body as u16,
        }
    }

    /// Append stored packet `seq` of `book` to its open frame (opening one if needed) and send
    /// the frame when it is full.
    #[inline]
    #[allow(clippy::too_many_arguments)]
    pub fn append(
        &mut self,
        book: u16,
        seq: u64,
        pkt: &[u8],
        now_ns: u64,
        ring: &mut Ring,
        out: &mut OutQueue,
        c: &mut Counters,
    ) {
        let Some(bi) = self.books.iter().position(|&b| b == book) else {
            return;
        };
        let need = slot_len(pkt.len());
        if let Some(o) = self.open[bi] {
            if o.n >= DATA_MAX_PKTS || DATA_HDR_BYTES + o.body + need > REP_DATA_FRAME_MAX {
                self.send(bi, now_ns, out, c);
            }
        }
        let o = match &mut self.open[bi] {
            Some(o) => o,
            slot @ None => {
                let buf = out.alloc(Class::Data);
                if let Some(id) = buf {
                    out.buf_mut(id).resize(DATA_HDR_BYTES, 0);
                }
                let data_seq = self.next_data_seq;
                self.next_data_seq += 1;
                slot.insert(Open {
                    buf,
                    data_seq,
                    body: 0,
                    n: 0,
                    first: seq,
                    last: seq,
                    opened_ns: now_ns,
                })
            }
        };
        if let Some(id) = o.buf {
            put_pkt(out.buf_mut(id), pkt);
        }
        o.body += need;
        o.n += 1;
        o.last = seq;
        if let Some(s) = ring.get_mut(seq) {
            s.frame = o.data_seq;
        }
        // 07 §5.2: sent when it reaches 9000 B, i.e. when not even a 48-byte packet fits.
        if o.n >= DATA_MAX_PKTS
            || DATA_HDR_BYTES + o.body + slot_len(REQ_MIN_LEN) > REP_DATA_FRAME_MAX
        {
            self.send(bi, now_ns, out, c);
        }
    }

    /// Send open frame `bi`, after every older open frame.
    fn send(&mut self, bi: usize, now_ns: u64, out: &mut OutQueue, c: &mut Counters) {
        let Some(this) = self.open[bi] else { return };
        loop {
            // The oldest open frame with data_seq ≤ this one's.
            let next = (0..self.open.len())
                .filter_map(|i| self.open[i].map(|o| (o.data_seq, i)))
                .filter(|&(d, _)| d <= this.data_seq)
                .min();
            let Some((_, i)) = next else { break };
            self.send_one(i, now_ns, out, c);
        }
    }

    fn send_one(&mut self, bi: usize, now_ns: u64, out: &mut OutQueue, c: &mut Counters) {
        let Some(o) = self.open[bi].take() else {
            return;
        };
        let book = self.books[bi];
        self.log[(o.data_seq % self.log.len() as u64) as usize] = LogEntry {
            data_seq: o.data_seq,
            first: o.first,
            span: o.last - o.first + 1,
            book,
        };
        match o.buf {
            Some(id) => {
                let h = self.header(DataKind::Data, book, o.data_seq, o.n, o.body);
                put_header(out.buf_mut(id), h);
                out.commit(id, To::Dests);
                c.frames_data += 1;
                c.frames_data_pkts += o.n as u64;
            }
            None => c.frames_unsent += 1,
        }
        self.last_tx_ns = now_ns;
    }

    /// Timers: send frames `batch_ns` old; send `DATA_HB` after `hb_ns` with nothing sent.
    /// Returns the frames sent.
    pub fn poll(&mut self, now_ns: u64, out: &mut OutQueue, c: &mut Counters) -> usize {
        let mut n = 0;
        for bi in 0..self.open.len() {
            if let Some(o) = self.open[bi] {
                if now_ns.saturating_sub(o.opened_ns) >= self.batch_ns {
                    self.send(bi, now_ns, out, c);
                    n += 1;
                }
            }
        }
        let idle = self.open.iter().all(Option::is_none);
        if idle && now_ns.saturating_sub(self.last_tx_ns) >= self.hb_ns {
            if let Some(id) = out.alloc(Class::Data) {
                let h = self.header(DataKind::DataHb, self.books[0], self.last_data_seq(), 0, 0);
                out.buf_mut(id).extend_from_slice(&h.to_bytes());
                out.commit(id, To::Dests);
                c.frames_hb += 1;
                self.last_tx_ns = now_ns;
                n += 1;
            }
        }
        n
    }

    /// When [`FanOut::poll`] next has a timer to serve (ns): the oldest open frame's send time,
    /// or the next `DATA_HB` when no frame is open.
    pub fn due(&self) -> u64 {
        let open = self
            .open
            .iter()
            .flatten()
            .map(|o| o.opened_ns + self.batch_ns)
            .min();
        open.unwrap_or(self.last_tx_ns + self.hb_ns)
    }

    /// Send every open frame now (shutdown, tests).
    pub fn flush_all(&mut self, now_ns: u64, out: &mut OutQueue, c: &mut Counters) {
        for bi in 0..self.open.len() {
            self.send(bi, now_ns, out, c);
        }
    }

    /// The log entry of frame `data_seq`, if it was sent and not yet overwritten.
    pub fn logged(&self, data_seq: u64) -> Option<LoggedFrame> {
        if data_seq == 0 || data_seq >= self.next_data_seq {
            return None;
        }
        let e = self.log[(data_seq % self.log.len() as u64) as usize];
        // A frame still open has no entry yet (its data_seq is taken, the entry is older).
        (e.data_seq == data_seq).then_some(LoggedFrame {
            book: e.book,
            first: e.first,
            span: e.span,
        })
    }

    /// Write a `FETCH_RESP` frame for `data_seq` into `buf`: its packets still in the ring, in
    /// order. Returns how many (0: gone, the frame is then empty).
    pub fn rebuild(&self, data_seq: u64, ring: &Ring, buf: &mut Vec<u8>) -> usize {
        buf.clear();
        buf.resize(DATA_HDR_BYTES, 0);
        let mut n = 0;
        let mut book = self.books[0];
        if let Some(f) = self.logged(data_seq) {
            book = f.book;
            let from = f.first.max(ring.oldest_seq());
            let to = f.first + f.span;
            for seq in from..to {
                let Some(s) = ring.get(seq) else { continue };
                if s.frame == data_seq && n < DATA_MAX_PKTS {
                    put_pkt(buf, s.packet());
                    n += 1;
                }
            }
        }
        let body = buf.len() - DATA_HDR_BYTES;
        put_header(
            buf,
            self.header(DataKind::FetchResp, book, data_seq, n, body),
        );
        n
    }

    /// The header of a `FETCH_RESP` answering a key fetch or carrying conflict evidence
    /// (`data_seq` 0, docs/wire-messages.md §1).
    pub fn evidence_header(&self, book: u16, n: usize, body: usize) -> DataHeader {
        self.header(DataKind::FetchResp, book, 0, n, body)
    }
}
