//! Peer-supplied frames held from the decoder until a header the sequencer signed vouches for
//! them (07 §4.10, §9.1, §10.2).
//!
//! A frame is unsigned; only its block's `order_root`, in the HEADER the sequencer signs, says
//! it is the sequencer's. A frame that came from the sequencer (a path, a retransmission) is
//! decoded as it comes, and a fault it causes is the sequencer's. A frame a peer supplied is
//! not: a forged repair decoded as it came made the genuine frame a duplicate and faulted the
//! sequencer for good (security review F2). So from the first peer-supplied frame on, every
//! frame delivered in order goes to a *probe* — a copy of the decoder as it stood — instead of
//! the decoder, and waits:
//!
//! * the probe's output — records, hashes, steps, marks, ORDER bytes, blocks, headers — is
//!   kept per frame, not acted on;
//! * when the probe completes a block and holds a header for that height with a valid `seq_sig`
//!   of this epoch, the roots are compared: equal, and the output of every frame whose bytes lie
//!   in that block or before is released to the data side, the verdict and replay, in order,
//!   exactly as it came (and the frame is kept for re-serving); once every block a peer frame
//!   touched is vouched for and everything is released, the probe *is* the decoder;
//! * when the probe faults, a root differs, no block is vouched for within the budget, or the
//!   held bytes pass their bound, the hold *fails*: the peer-supplied frames are dropped and
//!   asked again, the sequencer first ([`crate::front::order_rx::OrderRx::rewind`]), and the path
//!   frames behind them wait in order RX again;
//! * a hold that failed as many times at one frame as there are sources (the sequencer and each
//!   peer) is not held again: the frames go to the decoder as they are, and what they do is the
//!   sequencer's fault — 07 §9.1's "failed `order_root` after repair from the sequencer and from
//!   every peer".
//!
//! HASH and HEADER frames are outside `order_root`: a forged HEADER is refused by its
//! signature; a forged HASH frame moves a record's `pkt_hash` and is caught by `data_root` at
//! the verdict (07 §6.4 item 3), not here.
//!
//! Off the hot path: a hold copies each frame and its output once, and decodes it once (a
//! first version decoded it again on release: a restarted replica catching up from its peers
//! then fell behind its paths). It happens only after a peer repair, which the sequencer's
//! retransmission (07 D6) makes rare.

use std::collections::{BTreeMap, VecDeque};

use vyrn_wire::decoder::{Awaiting, BlockRoots, Pos};
use vyrn_wire::header::{BlockHeader, Hash};
use vyrn_wire::records::{PacketRecord, Step};

use crate::front::decode::{DecodedOut, Decoder, Fault};

/// Why a hold failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HoldFailed {
    /// The probe's decoder faulted on the held frames (07 §3.12).
    Decode,
    /// A block's `order_root` differs from its signed header's (07 §6.4 item 2).
    OrderRoot,
    /// No block was vouched for within the budget (`Budgets::peer_verify_ns`).
    Timeout,
    /// The held frames and their output passed the held-bytes bound.
    Full,
}

/// A frame waiting in a hold.
#[derive(Debug)]
pub struct HeldFrame {
    /// Substream.
    pub stream: u8,
    /// Its frame_seq.
    pub frame_seq: u64,
    /// The frame.
    pub bytes: Vec<u8>,
    /// A peer supplied it.
    pub peer: bool,
    /// The highest block its bytes can lie in (its substream's open block after it).
    top: u64,
    /// How many of the probe's outputs it made.
    events: usize,
}

/// Who checks a header: the tenure's `seq_key` and epoch.
#[derive(Debug, Clone, Copy)]
pub struct HeaderCheck {
    /// The tenure's key.
    pub seq_key: ed25519_dalek::VerifyingKey,
    /// The epoch.
    pub epoch: u32,
}

/// One output of the probe, kept until its frame is released (slices in [`Fifo`]s).
#[derive(Debug)]
enum Ev {
    Record(u64, Pos, PacketRecord),
    Hash(Pos, u8, Awaiting, u64),
    /// The step, its cut's length, its payload's length.
    Step(Step, usize, usize),
    Mark(u8, u64, u64),
    /// Substream, height, length.
    OrderBytes(u8, u64, usize),
    Block(BlockRoots),
    /// The header and whether its `seq_sig` verified.
    Header(Box<BlockHeader>, bool),
}

/// Slices pushed and taken back in order, in one buffer (compacted as it is taken).
#[derive(Debug, Default)]
struct Fifo<T> {
    v: Vec<T>,
    head: usize,
}

impl<T: Copy> Fifo<T> {
    fn push(&mut self, x: &[T]) {
        self.v.extend_from_slice(x);
    }
    fn take(&mut self, n: usize) -> &[T] {
        let a = self.head.min(self.v.len());
        let b = (a + n).min(self.v.len());
        self.head = b;
        &self.v[a..b]
    }
    /// Drop what was taken (call between takes).
    fn compact(&mut self) {
        if self.head == self.v.len() {
            self.v.clear();
            self.head = 0;
        } else if self.head > 1 << 16 && self.head > self.v.len() / 2 {
            self.v.drain(..self.head);
            self.head = 0;
        }
    }
    fn len(&self) -> usize {
        self.v.len() - self.head
    }
}

/// What the probe saw.
#[derive(Debug, Default)]
struct Seen {
    /// Roots of blocks the probe completed, not yet compared.
    roots: BTreeMap<u64, Hash>,
    /// `order_root`s of signed headers whose block has not been compared.
    headers: BTreeMap<u64, Hash>,
    fault: bool,
    events: VecDeque<Ev>,
    cuts: Fifo<u64>,
    bytes: Fifo<u8>,
}

struct ProbeOut<'a> {
    seen: &'a mut Seen,
    check: &'a HeaderCheck,
}

impl DecodedOut for ProbeOut<'_> {
    fn record(&mut self, height: u64, at: Pos, r: &PacketRecord) {
        self.seen.events.push_back(Ev::Record(height, at, *r));
    }
    fn hash(&mut self, at: Pos, lane: u8, rec: &Awaiting, pkt_hash: u64) {
        self.seen
            .events
            .push_back(Ev::Hash(at, lane, *rec, pkt_hash));
    }
    fn step(&mut self, s: &Step, cut: &[u64], payload: &[u8]) {
        self.seen.cuts.push(cut);
        self.seen.bytes.push(payload);
        self.seen
            .events
            .push_back(Ev::Step(*s, cut.len(), payload.len()));
    }
    fn mark(&mut self, stream: u8, height: u64, last_step: u64) {
        self.seen
            .events
            .push_back(Ev::Mark(stream, height, last_step));
    }
    fn order_bytes(&mut self, stream: u8, height: u64, bytes: &[u8]) {
        self.seen.bytes.push(bytes);
        self.seen
            .events
            .push_back(Ev::OrderBytes(stream, height, bytes.len()));
    }
    fn block(&mut self, b: &BlockRoots) {
        self.seen.roots.insert(b.height, b.order_root);
        self.seen.events.push_back(Ev::Block(*b));
    }
    fn header(&mut self, h: &BlockHeader) {
        let ok = h.verify(&self.check.seq_key);
        if ok && h.epoch == self.check.epoch && !h.is_seal() {
            self.seen.headers.entry(h.height).or_insert(h.order_root);
        }
        self.seen.events.push_back(Ev::Header(Box::new(*h), ok));
    }
    fn fault(&mut self, _f: &Fault) {
        self.seen.fault = true;
    }
}

/// One hold.
#[derive(Debug)]
pub struct Hold {
    probe: Decoder,
    frames: VecDeque<HeldFrame>,
    bytes: usize,
    seen: Seen,
    /// Highest block vouched for so far (every completed block up to it matched).
    vouched: u64,
    /// Highest block a peer frame's bytes can lie in.
    peer_top: u64,
    /// The first peer frame (what the strikes count against).
    first_peer: (u8, u64),
    /// The last progress (start, or a block vouched for).
    progress_ns: u64,
    started: u64,
    failed: Option<HoldFailed>,
    /// The tenure is being sealed (07 §9.3): every frame is released as it is.
    sealed: bool,
}

impl Hold {
    /// A hold starting from `dec` as it stands, at the peer frame `first_peer`.
    pub fn new(dec: &Decoder, first_peer: (u8, u64), now: u64) -> Self {
        Hold {
            probe: dec.clone(),
            frames: VecDeque::new(),
            bytes: 0,
            seen: Seen::default(),
            vouched: 0,
            peer_top: 0,
            first_peer,
            progress_ns: now,
            started: now,
            failed: None,
            sealed: false,
        }
    }

    /// When the hold started.
    pub fn started(&self) -> u64 {
        self.started
    }

    /// The first peer frame of the hold.
    pub fn first_peer(&self) -> (u8, u64) {
        self.first_peer
    }

    /// Frames held.
    pub fn len(&self) -> usize {
        self.frames.len()
    }

    /// Nothing held.
    pub fn is_empty(&self) -> bool {
        self.frames.is_empty()
    }

    /// Take the next frame delivered in order. `signed(h)`: the `order_root` of the signed
    /// header this replica already holds for height `h` (a header can come on one substream
    /// before the other substream's hole is repaired, so before the hold).
    #[allow(clippy::too_many_arguments)]
    pub fn push(
        &mut self,
        stream: u8,
        frame_seq: u64,
        bytes: &[u8],
        peer: bool,
        now: u64,
        check: &HeaderCheck,
        signed: impl Fn(u64) -> Option<Hash>,
    ) {
        let before = self.seen.events.len();
        self.probe.on_frame(
            bytes,
            now,
            &mut ProbeOut {
                seen: &mut self.seen,
                check,
            },
        );
        let top = self.probe.open_height(stream);
        if peer {
            self.peer_top = self.peer_top.max(top);
        }
        self.bytes += bytes.len();
        self.frames.push_back(HeldFrame {
            stream,
            frame_seq,
            bytes: bytes.to_vec(),
            peer,
            top,
            events: self.seen.events.len() - before,
        });
        self.compare(now, signed);
    }

    /// The probe's clock (its hash-lag rule, 07 §3.7).
    pub fn tick(&mut self, now: u64, check: &HeaderCheck) {
        self.probe.tick(
            now,
            &mut ProbeOut {
                seen: &mut self.seen,
                check,
            },
        );
        if self.seen.fault {
            self.failed.get_or_insert(HoldFailed::Decode);
        }
    }

    /// Compare completed blocks with signed headers, lowest first.
    fn compare(&mut self, now: u64, signed: impl Fn(u64) -> Option<Hash>) {
        if self.seen.fault {
            self.failed.get_or_insert(HoldFailed::Decode);
        }
        while let Some((&h, &root)) = self.seen.roots.first_key_value() {
            let Some(want) = self.seen.headers.get(&h).copied().or_else(|| signed(h)) else {
                break;
            };
            if want != root {
                self.failed.get_or_insert(HoldFailed::OrderRoot);
                return;
            }
            self.seen.roots.remove(&h);
            self.seen.headers = self.seen.headers.split_off(&(h + 1));
            self.vouched = h;
            self.progress_ns = now;
        }
    }

    /// Why the hold failed, if it did (a fault, a root, no progress for `budget_ns`, more than
    /// `max_bytes` held).
    pub fn failed(&mut self, now: u64, budget_ns: u64, max_bytes: usize) -> Option<HoldFailed> {
        if self.failed.is_none() && !self.sealed && now.saturating_sub(self.progress_ns) > budget_ns
        {
            self.failed = Some(HoldFailed::Timeout);
        }
        let held = self.bytes + self.seen.bytes.len() + 8 * self.seen.cuts.len();
        if self.failed.is_none() && held > max_bytes {
            self.failed = Some(HoldFailed::Full);
        }
        self.failed
    }

    /// Every block a peer frame touched is vouched for: what is left is frames the sequencer
    /// sent, released as they are.
    pub fn done(&self) -> bool {
        self.sealed || self.vouched >= self.peer_top
    }

    /// The tenure is deposed and its tail is being sealed (07 §9.3): no header will come for
    /// the open block, and the seal — each voter recomputing its header from what it holds —
    /// stands in for one. Everything held is released as it is; a peer's forged frame makes
    /// this replica's seal header differ from the honest voters', so it cannot vote with them.
    pub fn seal(&mut self) {
        self.sealed = true;
    }

    /// The next frame, if its blocks are vouched for (or the hold is done): its output goes to
    /// `out` in the order the probe made it, and the frame is returned (to keep for
    /// re-serving).
    pub fn release_next(&mut self, out: &mut impl DecodedOut) -> Option<HeldFrame> {
        let f = self.frames.front()?;
        if f.top > self.vouched && !self.done() {
            return None;
        }
        let f = self.frames.pop_front()?;
        self.bytes -= f.bytes.len();
        let s = &mut self.seen;
        for _ in 0..f.events {
            let Some(ev) = s.events.pop_front() else {
                break;
            };
            match ev {
                Ev::Record(h, at, r) => out.record(h, at, &r),
                Ev::Hash(at, lane, rec, x) => out.hash(at, lane, &rec, x),
                Ev::Step(st, nc, np) => {
                    let cut = s.cuts.take(nc);
                    let payload = s.bytes.take(np);
                    out.step(&st, cut, payload);
                }
                Ev::Mark(st, h, last) => out.mark(st, h, last),
                Ev::OrderBytes(st, h, n) => out.order_bytes(st, h, s.bytes.take(n)),
                Ev::Block(b) => out.block(&b),
                Ev::Header(h, ok) => out.header_checked(&h, ok),
            }
        }
        s.cuts.compact();
        s.bytes.compact();
        Some(f)
    }

    /// The probe, which is the decoder once everything is released.
    pub fn into_probe(self) -> Decoder {
        self.probe
    }

    /// Every frame still held, in order (a failed hold's, to go back to order RX).
    pub fn into_frames(self) -> VecDeque<HeldFrame> {
        self.frames
    }
}
