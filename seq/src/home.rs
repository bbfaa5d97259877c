//! The box's shared memory and its tiles (07 §4.1): lanes, the cut core, the BBO core, stream-A,
//! stream-B and the TX tile, each with a non-blocking `poll`. [`SeqHome`] owns them and runs them
//! in any order a scheduler picks — round-robin, or seeded-random for T-REP-1 — and logs every
//! write to the wire (frames on the paths, responses to clients) with what was released when it
//! left, so the tests can check INV-REP-1, INV-REP-2 and INV-REP-11 after every poll.

use crate::mem::HasherMem;
use crate::stream::{GateMode, StreamCore};
use std::collections::VecDeque;
use vyrn_engine::bbo::{BboSink, LaneEvent, OpQueues, StepOut};
use vyrn_engine::cut::CutCore;
use vyrn_engine::lane::{Lane, LaneSink};
use vyrn_engine::{Bbo, EngineConfig, Fwd, Gate, RespOut};
use vyrn_wire::consts::N_LANES_MAX;
use vyrn_wire::frame::FrameKind;
use vyrn_wire::records::{PacketRecord, SessionBind, StepKind, PKT_ENC_MAX};

/// An `R_pkt[l]` entry (07 §4.1): the record pre-encoded by its lane.
#[derive(Debug, Clone, Copy)]
pub struct PktEntry {
    /// First LaneSeq.
    pub first_lane_seq: u64,
    /// LaneSeqs it takes.
    pub count: u8,
    /// Encoded length.
    pub len: u8,
    /// Encoded bytes.
    pub enc: [u8; PKT_ENC_MAX],
}

/// An `R_step` entry (07 §4.1): the StepRecord with `need_A`/`need_B`.
#[derive(Debug, Clone, Copy)]
pub struct StepEntry {
    /// StepId.
    pub step: u64,
    /// Kind.
    pub kind: StepKind,
    /// Source lane.
    pub src_lane: u8,
    /// Source LaneSeq.
    pub src_lane_seq: u64,
    /// Cut (`n_lanes` values used).
    pub cut: [u64; N_LANES_MAX],
    /// Payload bytes.
    pub payload: [u8; 16],
    /// Payload length.
    pub plen: u8,
    /// need_A.
    pub need_a: u64,
    /// need_B.
    pub need_b: u64,
    /// Both substreams carry a record.
    pub spans: bool,
}

/// The SessionBinds a tenure starts with: every configured session at `next_pkt_seq` 1 (07 §3.5).
pub(crate) fn session_binds(e: &EngineConfig) -> Vec<SessionBind> {
    e.sessions
        .iter()
        .map(|s| SessionBind {
            lane: s.lane,
            slot: s.slot,
            session: s.session,
            next_pkt_seq: 1,
        })
        .collect()
}

/// Control for a box: `voters` voters, quorum Q = n − ⌊(n − 1)/3⌋ (3 of 4 in BASE), watermarks
/// to every configured session.
pub(crate) fn control_for(cfg: &SeqConfig) -> crate::control::Control {
    crate::control::Control::new(
        cfg.voters,
        cfg.voters - (cfg.voters.saturating_sub(1)) / 3,
        cfg.engine
            .sessions
            .iter()
            .map(|s| (s.session, s.k_out))
            .collect(),
    )
}

impl PktEntry {
    /// The entry for a record the lane logged, with its pre-encoded bytes.
    pub fn new(rec: &PacketRecord, enc: &[u8]) -> Self {
        let mut e = PktEntry {
            first_lane_seq: rec.first_lane_seq,
            count: rec.count,
            len: enc.len() as u8,
            enc: [0; PKT_ENC_MAX],
        };
        e.enc[..enc.len()].copy_from_slice(enc);
        e
    }
}

impl StepEntry {
    /// The entry for a step the BBO core ran.
    pub fn from_out(s: &StepOut<'_>) -> Self {
        let mut e = StepEntry {
            step: s.step,
            kind: s.kind,
            src_lane: s.src_lane,
            src_lane_seq: s.src_lane_seq,
            cut: [0; N_LANES_MAX],
            payload: [0; 16],
            plen: s.payload.len().min(16) as u8,
            need_a: s.need_a,
            need_b: s.need_b,
            spans: s.spans,
        };
        e.cut[..s.cut.len()].copy_from_slice(s.cut);
        e.payload[..e.plen as usize].copy_from_slice(&s.payload[..e.plen as usize]);
        e
    }
}

/// A packet's `pkt_hash` (07 §3.7): the first 8 bytes of its full BLAKE3, little-endian.
pub fn pkt_hash8(full: &[u8; 32]) -> u64 {
    let mut h = [0u8; 8];
    h.copy_from_slice(&full[..8]);
    u64::from_le_bytes(h)
}

/// An `R_step` entry: a step, or the block-mark entry the BBO core places after its current
/// step when stream-A asks for a block's close (07 §3.9, §6.1).
#[derive(Debug, Clone, Copy)]
#[allow(clippy::large_enum_variant)] // a ring slot is fixed-size; boxing would allocate per step
pub enum StepMsg {
    /// A step.
    Step(StepEntry),
    /// Close block `height` after step `last_step`.
    Mark {
        /// Height.
        height: u64,
        /// Last StepId of the block.
        last_step: u64,
    },
}

/// One substream's part of a closed block, for the order hasher (07 §4.6, §6.1).
#[derive(Debug, Clone)]
pub struct ClosedHalf {
    /// Height.
    pub height: u64,
    /// First StepId of the block.
    pub first_step: u64,
    /// Last StepId.
    pub last_step: u64,
    /// `order_root_H(h)`.
    pub order_root: [u8; 32],
    /// The block's PacketRecords on this substream in O-order: (lane, first_lane_seq).
    pub recs: Vec<(u8, u64)>,
}

/// What a written ORDER frame holds (for the invariant checks).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FrameInfo {
    /// Substream.
    pub stream: u8,
    /// frame_seq.
    pub frame_seq: u64,
    /// Kind (None until written).
    pub kind: Option<FrameKind>,
    /// Per lane: highest LaneSeq of a record in this frame (0: none).
    pub lane_max: Vec<u64>,
    /// Step half records in this frame, with this half's cut.
    pub steps: Vec<(u64, Vec<u64>)>,
}

/// One write to the wire, in order.
#[derive(Debug, Clone)]
pub enum WireEvent {
    /// A frame written to both replication paths.
    Frame {
        /// What it holds.
        info: FrameInfo,
        /// Its bytes.
        bytes: Vec<u8>,
    },
    /// A notice (watermark) sent to a client outside `resp_seq` (`NOTICE_RESP_SEQ`).
    Notice {
        /// Session.
        session: u32,
        /// Its bytes.
        bytes: Vec<u8>,
    },
    /// A response sent to a client.
    Resp {
        /// Session.
        session: u32,
        /// Its gate.
        gate: Gate,
        /// Its bytes.
        bytes: Vec<u8>,
    },
}

/// A response waiting at its gate.
#[derive(Debug, Clone)]
pub struct Held {
    session: u32,
    gate: Gate,
    bytes: Vec<u8>,
}

/// The box's shared memory: rings as queues, gate words as fields (07 §4.1's table).
#[derive(Debug, Default)]
pub struct Shared {
    /// `R_pkt[l]`.
    pub r_pkt: Vec<VecDeque<PktEntry>>,
    /// `R_hash8[l]`: `(first_lane_seq, pkt_hash)`.
    pub r_hash8: Vec<VecDeque<(u64, u64)>>,
    /// `R_step`: one cursor per stream core, and control's (07 §4.1's third cursor).
    pub r_step: [VecDeque<StepMsg>; 3],
    /// Per substream: `(frame_seq, highest step with a record in it)` of written ORDER frames.
    pub frame_steps: [VecDeque<(u64, u64)>; 2],
    /// `seq_fenced` (INV-REP-6): set once, never cleared in a tenure.
    pub fenced: bool,
    /// `R_hash32`: `(lane, first_lane_seq, full hash)` for the order hasher.
    pub r_hash32: VecDeque<(u8, u64, [u8; 32])>,
    /// Closed block halves, per substream, for the order hasher.
    pub closed: [VecDeque<ClosedHalf>; 2],
    /// Signed headers for stream-A to write.
    pub headers: VecDeque<vyrn_wire::header::BlockHeader>,
    /// Lane → BBO rings.
    pub fwd: Vec<VecDeque<Fwd>>,
    /// BBO → lane event rings.
    pub events: Vec<VecDeque<LaneEvent>>,
    /// Lane counters (last LaneSeq published).
    pub lane_counter: Vec<u64>,
    /// The published cut.
    pub cut: Vec<u64>,
    /// `step_done`.
    pub step_done: u64,
    /// `released[A]`, `released[B]`.
    pub released: [u64; 2],
    /// `LaneCut[l]` = (step, cut).
    pub lane_cut: Vec<(u64, u64)>,
    /// Lane answers held until `LaneCut` covers them (per lane).
    pub lane_held: Vec<VecDeque<Held>>,
    /// Step-gated responses for the TX tile.
    pub tx_q: VecDeque<Held>,
    /// Every write to the wire, in order.
    pub wire: Vec<WireEvent>,
    /// Encoding refusals (never expected).
    pub errors: u64,
    /// `close_req` (07 §3.9): the height stream-A's clock asks the BBO core to close.
    pub close_req: Option<u64>,
    /// The newest `REP_DurableMark{step, height}` raised by control (07 §6.9) not yet sent by
    /// the ports, and how many were raised.
    pub durable_mark: Option<(u64, u64)>,
    /// `REP_DurableMark`s raised.
    pub durable_marks: u64,
    /// Log every frame into `wire` (tests, tools); off, frames are only counted (benchmarks).
    pub log_frames: bool,
    /// Frames written while `log_frames` is off.
    pub frames_written: u64,
    /// Benchmarks: when each substream's `released` word was last stored (B-REP-13 measures
    /// from a step's start to this store).
    pub released_at: [Option<std::time::Instant>; 2],
    /// Take `released_at` (one clock read per release; benchmarks only).
    pub stamp_releases: bool,
}

impl Shared {
    /// Log a write.
    pub fn log(&mut self, e: WireEvent) {
        self.wire.push(e);
    }
}

/// The tiles of a box, as a scheduler names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tile {
    /// Lane l.
    Lane(u8),
    /// The cut core.
    Cut,
    /// The BBO core.
    Bbo,
    /// Stream core H.
    Stream(u8),
    /// The TX tile.
    Tx,
    /// The order hasher (07 §4.6): data roots, HEADER signing.
    Hasher,
    /// Control (07 §4.8, §6.8, §6.9): acks, votes, watermarks, finality gate, self-fence.
    Control,
}

/// Box configuration.
#[derive(Debug, Clone)]
pub struct SeqConfig {
    /// The engine (book, lanes, sessions, accounts, deadlines).
    pub engine: EngineConfig,
    /// Epoch.
    pub epoch: u32,
    /// Block period (07 §6.1: `BLOCK_NS`; `u64::MAX`: never close).
    pub block_ns: u64,
    /// The sequencer's Ed25519 signing key seed (`seq_key`, loaded once, never written).
    pub seq_key: [u8; 32],
    /// Voting replicas (n; quorum Q = n − ⌊(n − 1)/3⌋, 3 of 4 in BASE).
    pub voters: usize,
    /// Bytes of each stream core's frame ring for retransmission (REP_RTX_RING_BYTES).
    pub rtx_ring_bytes: usize,
}

struct LaneOut<'a> {
    sh: &'a mut Shared,
    lane: usize,
}

impl LaneSink for LaneOut<'_> {
    fn record(&mut self, rec: &PacketRecord, enc: &[u8], _payload: &[u8]) {
        self.sh.r_pkt[self.lane].push_back(PktEntry::new(rec, enc));
    }
    fn hash(&mut self, lane: u8, first_lane_seq: u64, full: &[u8; 32]) {
        self.sh.r_hash8[lane as usize].push_back((first_lane_seq, pkt_hash8(full)));
        self.sh.r_hash32.push_back((lane, first_lane_seq, *full));
    }
    fn forward(&mut self, f: &Fwd) {
        self.sh.fwd[self.lane].push_back(*f);
    }
    fn respond(&mut self, r: &RespOut<'_>) {
        let h = Held {
            session: r.session,
            gate: r.gate,
            bytes: r.bytes.to_vec(),
        };
        match r.gate {
            Gate::LaneCut { .. } => self.sh.lane_held[self.lane].push_back(h),
            Gate::Step { .. } => self.sh.tx_q.push_back(h),
        }
    }
}

struct BboOut<'a> {
    sh: &'a mut Shared,
}

impl BboSink for BboOut<'_> {
    fn step(&mut self, s: &StepOut<'_>) {
        let e = StepEntry::from_out(s);
        // R_step: one writer, a cursor per stream core (07 §4.1, INV-WRITER).
        for c in self.sh.r_step.iter_mut() {
            c.push_back(StepMsg::Step(e));
        }
    }
    fn event(&mut self, lane: u8, ev: &LaneEvent) {
        self.sh.events[lane as usize].push_back(*ev);
    }
}

struct Queues<'a>(&'a mut [VecDeque<Fwd>]);

impl OpQueues for Queues<'_> {
    fn head(&self, lane: usize) -> Option<&Fwd> {
        self.0[lane].front()
    }
    fn pop(&mut self, lane: usize) -> Option<Fwd> {
        self.0[lane].pop_front()
    }
}

/// A whole box on one thread.
#[derive(Debug)]
pub struct SeqHome {
    cfg: SeqConfig,
    /// Shared memory.
    pub sh: Shared,
    lanes: Vec<Lane>,
    rx: Vec<VecDeque<(u64, Vec<u8>)>>,
    cut: CutCore,
    bbo: Bbo,
    streams: Vec<StreamCore>,
    hasher: OrderHasher,
    control: crate::control::Control,
    /// The next height to close.
    height: u64,
}

/// Signer slices the order hasher runs per poll: each is a few tens of ns (`signer.rs`), so a
/// poll signs for about 2 µs at most; a signature is 768 slices.
const SIGN_SLICES_PER_POLL: usize = 64;

/// The order hasher (07 §4.6): full hashes from the lanes, closed block halves from the stream
/// cores; when a block's every full hash is in, its data roots, the header, `seq_sig`.
#[derive(Debug)]
pub(crate) struct OrderHasher {
    fulls: std::collections::HashMap<(u8, u64), [u8; 32]>,
    prev: [u8; 32],
    key: ed25519_dalek::SigningKey,
    signer: crate::signer::SlicedSigner,
    /// Headers with roots, waiting for (or in) the sliced signer, in height order.
    unsigned: VecDeque<vyrn_wire::header::BlockHeader>,
    epoch: u32,
    book: u16,
    n_streams: u8,
    /// Each block's full-hash list per substream in O-order (the leaves of `data_root_H`),
    /// kept REP_SEQ_HASHLIST_MS for HashListReq (07 §4.6, §5.6): (height, made at, lists).
    lists: VecDeque<(u64, u64, HashLists)>,
}

/// A block's full-hash lists, one per substream.
pub type HashLists = [Vec<[u8; 32]>; 2];

impl OrderHasher {
    /// The hasher of a box at the start of a tenure (the key expanded once, never written).
    pub(crate) fn new(cfg: &SeqConfig) -> Self {
        OrderHasher {
            fulls: std::collections::HashMap::new(),
            prev: [0; 32],
            key: ed25519_dalek::SigningKey::from_bytes(&cfg.seq_key),
            signer: crate::signer::SlicedSigner::new(&cfg.seq_key),
            unsigned: VecDeque::new(),
            epoch: cfg.epoch,
            book: cfg.engine.book,
            n_streams: cfg.engine.layout.n_streams,
            lists: VecDeque::new(),
        }
    }

    /// Block `height`'s full-hash lists, while kept (REP_SEQ_HASHLIST_MS).
    pub(crate) fn hash_list(&self, height: u64) -> Option<&HashLists> {
        self.lists
            .iter()
            .find(|(h, _, _)| *h == height)
            .map(|(_, _, l)| l)
    }

    /// The sequencer's verifying key.
    pub(crate) fn public(&self) -> ed25519_dalek::VerifyingKey {
        self.key.verifying_key()
    }

    pub(crate) fn poll(&mut self, now: u64, sh: &mut impl HasherMem) -> bool {
        let mut busy = false;
        let keep = vyrn_wire::consts::REP_SEQ_HASHLIST_MS * 1_000_000;
        while self
            .lists
            .front()
            .is_some_and(|l| now.saturating_sub(l.1) > keep)
        {
            self.lists.pop_front();
        }
        while let Some((l, f, h)) = sh.hash32_pop() {
            self.fulls.insert((l, f), h);
            busy = true;
        }
        loop {
            let n = self.n_streams as usize;
            let ready = (0..n).all(|h| {
                sh.closed_peek(h)
                    .is_some_and(|c| c.recs.iter().all(|k| self.fulls.contains_key(k)))
            });
            if !ready {
                break;
            }
            let mut roots = [vyrn_wire::header::empty_root(); 2];
            let mut droots = [vyrn_wire::header::empty_root(); 2];
            let mut first = None;
            let mut lists: HashLists = Default::default();
            for h in 0..n {
                let c = sh.closed_pop(h).expect("checked");
                let mut d = vyrn_wire::header::DataRootHasher::default();
                for k in &c.recs {
                    if let Some(full) = self.fulls.remove(k) {
                        d.push(&full);
                        lists[h].push(full);
                    }
                }
                roots[h] = c.order_root;
                droots[h] = d.finish();
                first.get_or_insert((c.height, c.first_step, c.last_step));
            }
            let (height, first_step, last_step) = first.expect("one stream");
            self.lists.push_back((height, now, lists));
            let hdr = vyrn_wire::header::BlockHeader {
                height,
                epoch: self.epoch,
                book: self.book,
                first_step,
                last_step,
                prev: self.prev,
                order_root: vyrn_wire::header::order_root(&roots[0], &roots[1]),
                data_root: vyrn_wire::header::data_root(&droots[0], &droots[1]),
                seq_sig: [0; 64],
            };
            // header_hash covers bytes 0..126, not seq_sig: the chain does not wait for it.
            self.prev = hdr.header_hash();
            self.unsigned.push_back(hdr);
            busy = true;
        }
        // seq_sig by the sliced signer (07 §6.2): a bounded number of slices per poll, so the
        // tile never holds its thread for a whole signature.
        for _ in 0..SIGN_SLICES_PER_POLL {
            let Some(h) = self.unsigned.front() else {
                break;
            };
            if !self.signer.busy() && !self.signer.start(&h.sig_message()) {
                break;
            }
            busy = true;
            if let Some(sig) = self.signer.step() {
                let mut h = self.unsigned.pop_front().expect("front");
                h.seq_sig = sig;
                self.signer.reset();
                sh.header_push(h);
            }
        }
        busy
    }
}

impl SeqHome {
    /// A box at the start of a tenure.
    pub fn new(cfg: SeqConfig) -> Self {
        let e = &cfg.engine;
        let n = e.layout.n_lanes as usize;
        let mut sh = Shared {
            log_frames: true,
            r_pkt: vec![VecDeque::new(); n],
            r_hash8: vec![VecDeque::new(); n],
            fwd: vec![VecDeque::new(); n],
            events: vec![VecDeque::new(); n],
            lane_counter: vec![0; n],
            cut: vec![0; n],
            lane_cut: vec![(0, 0); n],
            lane_held: vec![VecDeque::new(); n],
            ..Shared::default()
        };
        let binds = session_binds(e);
        let streams = (0..e.layout.n_streams)
            .map(|h| {
                let mut s = StreamCore::new(
                    h,
                    e.layout,
                    e.book,
                    cfg.epoch,
                    &binds,
                    cfg.rtx_ring_bytes,
                    &mut sh,
                );
                if h == 0 {
                    s.set_block_ns(cfg.block_ns);
                }
                s
            })
            .collect();
        SeqHome {
            lanes: (0..n as u8).map(|l| Lane::new(e, l)).collect(),
            rx: vec![VecDeque::new(); n],
            cut: CutCore::new(e.layout, 0),
            bbo: Bbo::new(e),
            streams,
            hasher: OrderHasher::new(&cfg),
            control: control_for(&cfg),
            height: 1,
            sh,
            cfg,
        }
    }

    /// The configuration.
    pub fn config(&self) -> &SeqConfig {
        &self.cfg
    }

    /// Every tile, in a round-robin order.
    pub fn tiles(&self) -> Vec<Tile> {
        let mut t: Vec<Tile> = (0..self.lanes.len() as u8).map(Tile::Lane).collect();
        t.push(Tile::Cut);
        t.push(Tile::Bbo);
        for h in 0..self.streams.len() as u8 {
            t.push(Tile::Stream(h));
        }
        t.push(Tile::Tx);
        t.push(Tile::Hasher);
        t.push(Tile::Control);
        t
    }

    /// Override the self-fence window (a budget, 07 §4.8).
    pub fn set_self_fence_us(&mut self, us: u64) {
        self.control.set_self_fence_us(us);
    }

    /// A voter's RepAck (07 §4.8).
    pub fn on_ack(&mut self, voter: usize, contiguous: [u64; 2], now: u64) {
        self.control.on_ack(voter, contiguous, now);
    }

    /// A NACK for frames `from..=to` of substream `stream` (07 §4.10).
    pub fn on_nack(
        &mut self,
        stream: u8,
        from: u64,
        to: u64,
        now: u64,
    ) -> crate::stream::NackOutcome {
        match self.streams.get_mut(stream as usize) {
            Some(s) => s.on_nack(from, to, now, &mut self.sh),
            None => crate::stream::NackOutcome::default(),
        }
    }

    /// Retransmission counters of substream `stream`.
    pub fn rtx_counters(&self, stream: u8) -> crate::stream::RtxCounters {
        self.streams
            .get(stream as usize)
            .map(|s| s.rtx_counters())
            .unwrap_or_default()
    }

    /// A voter's finalize vote (07 §6.8).
    pub fn on_vote(&mut self, voter: usize, height: u64) {
        self.control.on_vote(voter, height);
    }

    /// Control's state: (durable step, final height, counters).
    pub fn watermarks(&self) -> (u64, u64, crate::control::ControlCounters) {
        (
            self.control.durable_step(),
            self.control.final_height(),
            self.control.counters(),
        )
    }

    /// Closed heights so far.
    pub fn closed_height(&self) -> u64 {
        self.height - 1
    }

    /// Block `height`'s full-hash list per substream, while the order hasher keeps it
    /// (REP_SEQ_HASHLIST_MS; 07 §4.6, served to HashListReq).
    pub fn hash_list(&self, height: u64) -> Option<&HashLists> {
        self.hasher.hash_list(height)
    }

    /// The sequencer's verifying key.
    pub fn seq_public(&self) -> ed25519_dalek::VerifyingKey {
        self.hasher.public()
    }

    /// Benchmarks: frames are counted, not logged, and the stream cores keep no per-frame
    /// [`FrameInfo`] — the stream core's own work, as on the box's ports.
    pub fn set_log_frames(&mut self, on: bool) {
        self.sh.log_frames = on;
        for s in &mut self.streams {
            s.set_track(on);
        }
    }

    /// Break a stream core's gate on purpose (tests only).
    #[doc(hidden)]
    pub fn set_gate_mode(&mut self, m: GateMode) {
        for s in &mut self.streams {
            s.set_gate_mode(m);
        }
    }

    /// A packet arrives at `rx_ts` on its lane's port (the NIC flow filter: UDP port = lane).
    /// Returns false if no lane serves its session.
    pub fn receive(&mut self, rx_ts: u64, bytes: Vec<u8>) -> bool {
        let Some(s) = bytes.get(4..8) else {
            return false;
        };
        let session = u32::from_le_bytes([s[0], s[1], s[2], s[3]]);
        match self
            .cfg
            .engine
            .sessions
            .iter()
            .find(|c| c.session == session)
        {
            Some(c) => {
                self.rx[c.lane as usize].push_back((rx_ts, bytes));
                true
            }
            None => false,
        }
    }

    /// Packets received and not yet taken by their lane.
    pub fn rx_backlog(&self) -> usize {
        self.rx.iter().map(|q| q.len()).sum()
    }

    /// Poll one tile at `now`. Returns whether it did anything.
    pub fn poll(&mut self, tile: Tile, now: u64) -> bool {
        match tile {
            Tile::Lane(l) => self.poll_lane(l as usize, now),
            Tile::Cut => {
                let c = &self.sh.lane_counter;
                let moved = self.cut.refresh(now, |l| c[l]);
                self.sh.cut.copy_from_slice(self.cut.cut());
                moved
            }
            Tile::Bbo => {
                let cut = self.sh.cut.clone();
                let mut q = std::mem::take(&mut self.sh.fwd);
                let r = self.bbo.poll(
                    now,
                    &cut,
                    &mut Queues(&mut q),
                    &mut BboOut { sh: &mut self.sh },
                );
                self.sh.fwd = q;
                // step_done after the step's events are in the rings.
                self.sh.step_done = self.bbo.done();
                // Block close (07 §3.9, §6.1): stream-A's `close_req`, taken at step end and
                // placed after the current step on every cursor of R_step.
                let mut closed = false;
                if let Some(height) = self.sh.close_req.take() {
                    let m = StepMsg::Mark {
                        height,
                        last_step: self.bbo.done(),
                    };
                    for c in self.sh.r_step.iter_mut() {
                        c.push_back(m);
                    }
                    self.height = height + 1;
                    closed = true;
                }
                closed || matches!(r, Ok(Some(_)))
            }
            Tile::Stream(h) => self.streams[h as usize].poll(now, &mut self.sh),
            Tile::Hasher => self.hasher.poll(now, &mut self.sh),
            Tile::Control => match self.control.poll(now, &mut self.sh) {
                Some(req) => {
                    self.bbo.request(req);
                    true
                }
                None => false,
            },
            Tile::Tx => {
                // INV-REP-1: a step's response leaves once both release words cover it.
                let mut any = false;
                while let Some(h) = self.sh.tx_q.front() {
                    let Gate::Step { need_a, need_b, .. } = h.gate else {
                        break;
                    };
                    if self.sh.released[0] < need_a || self.sh.released[1] < need_b {
                        break;
                    }
                    let h = self.sh.tx_q.pop_front().expect("front");
                    self.sh.log(WireEvent::Resp {
                        session: h.session,
                        gate: h.gate,
                        bytes: h.bytes,
                    });
                    any = true;
                }
                any
            }
        }
    }

    fn poll_lane(&mut self, l: usize, now: u64) -> bool {
        let mut busy = false;
        let lane = &mut self.lanes[l];
        // Step events in step order, up to step_done.
        while let Some(ev) = self.sh.events[l].front() {
            if ev.step > self.sh.step_done {
                break;
            }
            let ev = *ev;
            self.sh.events[l].pop_front();
            lane.on_event(
                &ev,
                &mut LaneOut {
                    sh: &mut self.sh,
                    lane: l,
                },
            );
            busy = true;
        }
        // INV-REP-11: a lane answer leaves once LaneCut covers its op.
        while let Some(h) = self.sh.lane_held[l].front() {
            let Gate::LaneCut { lane_seq, .. } = h.gate else {
                break;
            };
            if self.sh.lane_cut[l].1 < lane_seq {
                break;
            }
            let h = self.sh.lane_held[l].pop_front().expect("front");
            self.sh.log(WireEvent::Resp {
                session: h.session,
                gate: h.gate,
                bytes: h.bytes,
            });
            busy = true;
        }
        if let Some((rx_ts, bytes)) = self.rx[l].pop_front() {
            let _ = lane.on_packet(
                now,
                rx_ts,
                &bytes,
                &mut LaneOut {
                    sh: &mut self.sh,
                    lane: l,
                },
            );
            // (2) publish after the record is in R_pkt (07 §4.2).
            self.sh.lane_counter[l] = lane.published();
            busy = true;
        } else {
            lane.flush_hashes(&mut LaneOut {
                sh: &mut self.sh,
                lane: l,
            });
        }
        busy
    }

    /// Round-robin every tile until nothing moves (at most `max_rounds` rounds).
    pub fn settle(&mut self, now: u64, max_rounds: usize) {
        let tiles = self.tiles();
        for _ in 0..max_rounds {
            let mut busy = false;
            for &t in &tiles {
                busy |= self.poll(t, now);
            }
            if !busy && self.rx_backlog() == 0 {
                break;
            }
        }
    }

    /// Take the wire log written so far (a long-running box drains it to its ports).
    pub fn drain_wire(&mut self) -> std::vec::Drain<'_, WireEvent> {
        self.sh.wire.drain(..)
    }

    /// The BBO core.
    pub fn bbo(&self) -> &Bbo {
        &self.bbo
    }

    /// The lanes.
    pub fn lanes(&self) -> &[Lane] {
        &self.lanes
    }

    /// Frames written on substream `h`, in order.
    pub fn frames(&self, h: u8) -> Vec<&[u8]> {
        self.sh
            .wire
            .iter()
            .filter_map(|e| match e {
                WireEvent::Frame { info, bytes } if info.stream == h => Some(bytes.as_slice()),
                _ => None,
            })
            .collect()
    }
}
