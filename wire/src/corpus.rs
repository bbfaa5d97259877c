//! A seeded generator of valid order streams: the behaviour of a sequencer's two stream cores,
//! minus the engine, producing ORDER, HASH, HEADER and HEARTBEAT frames for both substreams
//! from a TenureStart (07 §3). Every section kind, SHED, Advance, AcctTake on pooled lanes,
//! SEQ_EXC/LSEQ_EXC/FA_NZ, all three cut modes, spanning steps with OTHER, every step kind,
//! block marks and signed headers appear in a long enough corpus.
//!
//! The generator keeps its own books (what it framed, which block each byte belongs to) and
//! computes `order_root` and `data_root` itself, independently of [`crate::decoder`], so
//! decoding a corpus and checking every HEADER's roots is a real cross-check.

use crate::consts::*;
use crate::encoder::FrameWriter;
use crate::frame::Heartbeat;
use crate::header::{data_root, empty_root, order_root, BlockHeader, Hash};
use crate::layout::Layout;
use crate::records::*;

/// A small, fast, seeded PRNG (SplitMix64): deterministic across platforms and releases.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// Seeded.
    pub fn new(seed: u64) -> Self {
        Rng(seed ^ 0x005E_ED0F_7A1E_u64)
    }
    /// Next 64 bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in `0..n` (n > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        ((self.next_u64() as u128 * n as u128) >> 64) as u64
    }
    /// True with probability `p_permille / 1000`.
    pub fn chance(&mut self, p_permille: u64) -> bool {
        self.below(1000) < p_permille
    }
}

/// What to generate.
#[derive(Debug, Clone, Copy)]
pub struct CorpusConfig {
    /// Seed.
    pub seed: u64,
    /// Stop after at least this many frames (the last block is then closed).
    pub frames: usize,
    /// Lanes, substreams, pool.
    pub layout: Layout,
    /// Book.
    pub book: u16,
    /// Epoch.
    pub epoch: u32,
    /// ORDER body cap (07 §4.5: 160).
    pub frame_cap: usize,
    /// `false`: the coverage mix (every form often, small blocks; for tests and fuzz seeds).
    /// `true`: the peak mix of 07 §3.13 (10 messages per packet, ~3.3 packets per step, about a
    /// third of steps spanning, rare exceptions, blocks of ~3000 steps, HASH frames batched, no
    /// heartbeats); for benchmarks.
    pub peak_mix: bool,
}

impl CorpusConfig {
    /// REF defaults with this seed and frame count.
    pub fn reference(seed: u64, frames: usize) -> Self {
        CorpusConfig {
            seed,
            frames,
            layout: Layout::reference(),
            book: 1,
            epoch: 1,
            frame_cap: REP_ORDER_FRAME_MAX,
            peak_mix: false,
        }
    }

    /// The peak mix (see `peak_mix`) on the REF layout.
    pub fn peak(seed: u64, frames: usize) -> Self {
        CorpusConfig {
            peak_mix: true,
            ..Self::reference(seed, frames)
        }
    }
}

/// Counts of what a corpus holds, for tests and for the CLI's summary.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct CorpusStats {
    /// Frames.
    pub frames: u64,
    /// PacketRecords with a packet (not Advance).
    pub pkts: u64,
    /// Advance records.
    pub advances: u64,
    /// Shed packets.
    pub shed: u64,
    /// AcctTakes.
    pub takes: u64,
    /// SessionBinds.
    pub binds: u64,
    /// Steps.
    pub steps: u64,
    /// Steps with two half records.
    pub spanning: u64,
    /// Steps by kind.
    pub by_kind: [u64; 9],
    /// Half records by cut mode (SAME, DENSE, SPARSE).
    pub by_mode: [u64; 3],
    /// Blocks.
    pub blocks: u64,
    /// Records with SEQ_EXC, LSEQ_EXC, FA_NZ.
    pub exc: [u64; 3],
    /// Pad sections.
    pub pads: u64,
    /// Heartbeats.
    pub heartbeats: u64,
}

/// A generated corpus: frames in send order, the headers it signed and the key to check them.
#[derive(Debug, Clone)]
pub struct Corpus {
    /// Frames (header + body), in the order they were sent, both substreams interleaved.
    pub frames: Vec<Vec<u8>>,
    /// The signed headers, in height order.
    pub headers: Vec<BlockHeader>,
    /// Sequencer public key.
    pub seq_pubkey: [u8; 32],
    /// What it holds.
    pub stats: CorpusStats,
}

impl Corpus {
    /// The capture file: records `u32 LE length ‖ frame bytes`.
    pub fn capture(&self) -> Vec<u8> {
        let mut out = Vec::new();
        for f in &self.frames {
            out.extend_from_slice(&(f.len() as u32).to_le_bytes());
            out.extend_from_slice(f);
        }
        out
    }
}

/// Split a capture file into frames; `None` if a length runs past the end.
pub fn read_capture(bytes: &[u8]) -> Result<Vec<&[u8]>, usize> {
    let mut v = Vec::new();
    let mut p = 0usize;
    while p < bytes.len() {
        let Some(lb) = bytes.get(p..p + 4) else {
            return Err(p);
        };
        let n = u32::from_le_bytes([lb[0], lb[1], lb[2], lb[3]]) as usize;
        let Some(f) = bytes.get(p + 4..p + 4 + n) else {
            return Err(p);
        };
        v.push(f);
        p += 4 + n;
    }
    Ok(v)
}

struct LaneGen {
    st: LaneState,
    table: usize,
    /// Recent packets (first_lane_seq, count), not shed, for picking a step's source op.
    recent: Vec<(u64, u8)>,
    fills_applied: u64,
}

struct TableGen {
    next: Vec<u32>,
    bound: Vec<u16>,
}

struct Gen {
    cfg: CorpusConfig,
    rng: Rng,
    w: Vec<FrameWriter>,
    order: Vec<(u8, usize)>,
    noted: [usize; 2],
    n_frames: usize,
    lanes: Vec<LaneGen>,
    tables: Vec<TableGen>,
    step_st: Vec<StepState>,
    half_cut: Vec<Vec<u64>>,
    steprun: Vec<(u64, Vec<u8>)>,
    bounds_prev: Vec<Vec<u64>>,
    hashes_pending: Vec<Vec<(u8, u64)>>,
    data_hashes: Vec<Vec<u8>>,
    next_step: u64,
    height: u64,
    last_mark_step: u64,
    prev_hash: Hash,
    key: ed25519_dalek::SigningKey,
    headers: Vec<BlockHeader>,
    stats: CorpusStats,
    rx_ts: u64,
    accounts_ver: Vec<u64>,
}

/// Generate a corpus.
pub fn generate(cfg: &CorpusConfig) -> Corpus {
    let mut g = Gen::new(*cfg);
    g.run();
    let mut frames = Vec::new();
    // Frames were recorded per writer; `order` says which writer's next frame went out next.
    let mut per: Vec<std::collections::VecDeque<Vec<u8>>> =
        g.w.iter_mut().map(|w| w.take_frames().into()).collect();
    for &(s, n) in &g.order {
        for _ in 0..n {
            if let Some(f) = per[s as usize].pop_front() {
                frames.push(f);
            }
        }
    }
    for p in per.iter_mut() {
        frames.extend(p.drain(..));
    }
    let mut stats = g.stats;
    stats.frames = frames.len() as u64;
    Corpus {
        frames,
        headers: g.headers,
        seq_pubkey: g.key.verifying_key().to_bytes(),
        stats,
    }
}

impl Gen {
    fn new(cfg: CorpusConfig) -> Self {
        let lay = cfg.layout;
        let n = lay.n_lanes as usize;
        let ns = lay.n_streams as usize;
        let mut rng = Rng::new(cfg.seed);
        let seed_bytes = *blake3::hash(&cfg.seed.to_le_bytes()).as_bytes();
        let key = ed25519_dalek::SigningKey::from_bytes(&seed_bytes);
        let w = (0..ns)
            .map(|s| FrameWriter::new(cfg.book, cfg.epoch, 0, 0, s as u8, cfg.frame_cap))
            .collect();
        let rx_ts = 1_700_000_000_000_000_000 + rng.below(1 << 30);
        let lanes = (0..n)
            .map(|l| {
                let base = 1 + rng.below(1000);
                LaneGen {
                    st: LaneState {
                        next_lane_seq: base,
                        prev_rx_ts: rx_ts,
                        prev_fills_applied: 0,
                    },
                    table: if lay.is_pool(l) { n } else { l },
                    recent: Vec::new(),
                    fills_applied: 0,
                }
            })
            .collect();
        let tables = (0..=n)
            .map(|_| TableGen {
                next: vec![0; MAX_SESSIONS_PER_LANE],
                bound: Vec::new(),
            })
            .collect();
        Gen {
            cfg,
            rng,
            w,
            order: Vec::new(),
            noted: [0; 2],
            n_frames: 0,
            lanes,
            tables,
            step_st: Vec::new(),
            half_cut: Vec::new(),
            steprun: vec![(0, Vec::new()); ns],
            bounds_prev: Vec::new(),
            hashes_pending: vec![Vec::new(); ns],
            data_hashes: vec![Vec::new(); ns],
            next_step: 0,
            height: 0,
            last_mark_step: 0,
            prev_hash: [0; 32],
            key,
            headers: Vec::new(),
            stats: CorpusStats::default(),
            rx_ts,
            accounts_ver: vec![0; 64],
        }
    }

    /// A probability in permille: the coverage mix's, or the peak mix's.
    fn p(&self, coverage: u64, peak: u64) -> u64 {
        if self.cfg.peak_mix {
            peak
        } else {
            coverage
        }
    }

    fn lay(&self) -> Layout {
        self.cfg.layout
    }

    fn frames_so_far(&self) -> usize {
        self.n_frames
    }

    /// Record that writer `s` produced frames (so the interleaving is kept).
    fn note(&mut self, s: u8) {
        let now = self.w[s as usize].frames_sealed();
        let before = self.noted[s as usize];
        if now > before {
            self.order.push((s, now - before));
            self.noted[s as usize] = now;
            self.n_frames += now - before;
        }
    }

    fn run(&mut self) {
        self.start_tenure();
        while self.frames_so_far() < self.cfg.frames {
            if self.cfg.peak_mix {
                // Bursts of 1-3 packets (a lane drained into one LaneRun) against steps, for
                // ~3.3 packets per step (07 §3.13).
                if self.rng.below(1000) < 623 {
                    self.lane_burst();
                } else {
                    self.step(None);
                }
                if self.next_step - self.last_mark_step > 3000 {
                    self.close_block();
                }
                continue;
            }
            let r = self.rng.below(100);
            if r < 45 {
                self.lane_burst();
            } else if r < 85 {
                self.step(None);
            } else if r < 90 {
                self.close_block();
            } else if r < 93 {
                let s = self.rng.below(self.lay().n_streams as u64) as u8;
                self.heartbeat(s);
            } else if r < 95 {
                let s = self.rng.below(self.lay().n_streams as u64) as u8;
                self.close_steprun(s);
                let n = 1 + self.rng.below(12) as usize;
                self.w[s as usize].pad(n);
                self.stats.pads += 1;
                self.after_flush(s);
            } else {
                self.lane_burst();
            }
        }
        self.step(Some(StepKind::Seal));
        self.close_block();
    }

    fn start_tenure(&mut self) {
        let lay = self.lay();
        self.next_step = 1 + self.rng.below(1000);
        self.height = 1 + self.rng.below(1000);
        self.last_mark_step = self.next_step - 1;
        self.prev_hash = *blake3::hash(b"genesis").as_bytes();
        for s in 0..lay.n_streams {
            let range = lanes_of(&lay, s);
            let lanes: Vec<LaneBase> = range
                .clone()
                .map(|l| LaneBase {
                    next_lane_seq: self.lanes[l].st.next_lane_seq,
                    rx_ts_base: self.rx_ts,
                    fills_applied_base: 0,
                })
                .collect();
            let prev_cut: Vec<u64> = range
                .clone()
                .map(|l| self.lanes[l].st.next_lane_seq - 1)
                .collect();
            let ts = TenureStart {
                epoch: self.cfg.epoch,
                tenure: 0,
                sender: 0,
                first_step: self.next_step,
                first_height: self.height,
                prev_header_hash: self.prev_hash,
                lanes,
                prev_cut: prev_cut.clone(),
            };
            let mut b = Vec::new();
            ts.encode(&mut b);
            self.w[s as usize].tenure_start(&b);
            // Frame 1 is the TenureStart alone, so no HASH or HEARTBEAT frame can precede it.
            self.w[s as usize].flush();
            self.note(s);
            self.step_st.push(StepState::new(self.next_step, &prev_cut));
            self.half_cut.push(prev_cut.clone());
            self.bounds_prev.push(prev_cut);
        }
    }

    fn lane_burst(&mut self) {
        let l = self.rng.below(self.lay().n_lanes as u64) as usize;
        self.lane_burst_on(l);
    }

    fn lane_burst_on(&mut self, l: usize) {
        let lay = self.lay();
        let s = lay.stream_of(l);
        let k = 1 + self.rng.below(if self.cfg.peak_mix { 3 } else { 4 }) as usize;
        let mut recs: Vec<Vec<u8>> = Vec::new();
        let mut hashes: Vec<(u8, u64)> = Vec::new();
        let mut fulls: Vec<Hash> = Vec::new();
        for _ in 0..k {
            let t = self.lanes[l].table;
            // A pooled lane sometimes takes an account's token first.
            if lay.is_pool(l) && self.rng.chance(self.p(150, 20)) {
                let acct = self.rng.below(64) as usize;
                self.accounts_ver[acct] += 1;
                let op = LaneOp::Take {
                    account: 1000 + acct as u32,
                    ver: self.accounts_ver[acct],
                };
                recs.push(self.enc(l, &op));
                self.stats.takes += 1;
            }
            if self.rng.chance(self.p(40, 2)) {
                // Advance record.
                self.rx_ts = self.rx_ts.wrapping_add(self.rng.below(5000));
                let fa = self.bump_fills(l);
                let op = LaneOp::Advance {
                    rx_ts: self.rx_ts,
                    fills_applied: fa,
                    first_lane_seq: self.lanes[l].st.next_lane_seq,
                };
                recs.push(self.enc(l, &op));
                self.stats.advances += 1;
                continue;
            }
            // Need a bound slot: bind a new session sometimes (flush this lane's records first,
            // so the bind is decoded between them exactly where it was applied).
            if self.tables[t].bound.is_empty() || self.rng.chance(self.p(30, 0)) {
                if !recs.is_empty() {
                    self.append_lane(l, s, &mut recs, &mut hashes, &mut fulls);
                }
                let slot = match self.rng.below(4) {
                    0 => 300,
                    1 => (MAX_SESSIONS_PER_LANE - 1) as u16,
                    _ => self.rng.below(MAX_SESSIONS_PER_LANE as u64) as u16,
                };
                let session = 1 + self.rng.below(1 << 31) as u32;
                let next_pkt_seq = 1 + self.rng.below(1 << 20) as u32;
                self.tables[t].next[slot as usize] = next_pkt_seq;
                if !self.tables[t].bound.contains(&slot) {
                    self.tables[t].bound.push(slot);
                }
                let mut b = Vec::new();
                // wire-decisions 10: accepted on either substream; we send it on the lane's own.
                encode_session_bind(
                    &SessionBind {
                        lane: l as u8,
                        slot,
                        session,
                        next_pkt_seq,
                    },
                    &mut b,
                );
                self.close_steprun(s);
                self.w[s as usize].section(&b);
                self.stats.binds += 1;
            }
            let bi = self.rng.below(self.tables[t].bound.len() as u64) as usize;
            let slot = self.tables[t].bound[bi];
            let expect = self.tables[t].next[slot as usize];
            let pkt_seq = if self.rng.chance(self.p(30, 1)) {
                self.stats.exc[0] += 1;
                if self.rng.chance(500) {
                    expect.wrapping_sub(1 + self.rng.below(5) as u32)
                } else {
                    expect.wrapping_add(1 + self.rng.below(1000) as u32)
                }
            } else {
                expect
            };
            let count = if self.cfg.peak_mix {
                MAX_MSGS_PER_PKT as u8
            } else if self.rng.chance(50) {
                0
            } else {
                1 + self.rng.below(MAX_MSGS_PER_PKT as u64) as u8
            };
            let shed = self.rng.chance(self.p(30, 2));
            // rx_ts is mostly increasing, sometimes a little behind (several NIC queues, 07 §3.6).
            let back = self.rng.chance(150);
            self.rx_ts = if back {
                self.rx_ts.wrapping_sub(self.rng.below(2000))
            } else {
                self.rx_ts.wrapping_add(self.rng.below(3000))
            };
            let mut first = self.lanes[l].st.next_lane_seq;
            if self.rng.chance(self.p(20, 0)) {
                first += 1 + self.rng.below(3);
                self.stats.exc[1] += 1;
            }
            let fa = self.bump_fills(l);
            let op = LaneOp::Pkt {
                slot,
                count,
                shed,
                pkt_seq,
                rx_ts: self.rx_ts,
                first_lane_seq: first,
                fills_applied: fa,
            };
            recs.push(self.enc(l, &op));
            self.stats.pkts += 1;
            if shed {
                self.stats.shed += 1;
            } else if count > 0 {
                let r = &mut self.lanes[l].recent;
                if r.len() == 32 {
                    r.remove(0);
                }
                r.push((first, count));
            }
            let full = *blake3::hash(
                &[
                    &(l as u64).to_le_bytes()[..],
                    &first.to_le_bytes(),
                    &pkt_seq.to_le_bytes(),
                ]
                .concat(),
            )
            .as_bytes();
            let mut h8 = [0u8; 8];
            h8.copy_from_slice(&full[..8]);
            hashes.push((l as u8, u64::from_le_bytes(h8)));
            fulls.push(full);
        }
        self.append_lane(l, s, &mut recs, &mut hashes, &mut fulls);
    }

    fn append_lane(
        &mut self,
        l: usize,
        s: u8,
        recs: &mut Vec<Vec<u8>>,
        hashes: &mut Vec<(u8, u64)>,
        fulls: &mut Vec<Hash>,
    ) {
        self.close_steprun(s);
        let refs: Vec<&[u8]> = recs.iter().map(|r| r.as_slice()).collect();
        self.w[s as usize].lane_records(l as u8, &refs);
        self.hashes_pending[s as usize].append(hashes);
        for f in fulls.drain(..) {
            self.data_hashes[s as usize].extend_from_slice(&f);
        }
        recs.clear();
        self.note(s);
    }

    fn bump_fills(&mut self, l: usize) -> u64 {
        let lg = &mut self.lanes[l];
        if self.rng.chance(80) && self.next_step > lg.fills_applied + 1 {
            lg.fills_applied += 1 + self.rng.below(self.next_step - 1 - lg.fills_applied);
            self.stats.exc[2] += 1;
        }
        lg.fills_applied
    }

    fn enc(&mut self, l: usize, op: &LaneOp) -> Vec<u8> {
        let t = self.lanes[l].table;
        let mut out = [0u8; PKT_ENC_MAX];
        let n = encode_lane_op(
            &mut self.lanes[l].st,
            &mut self.tables[t].next,
            op,
            &mut out,
        );
        out[..n].to_vec()
    }

    fn close_steprun(&mut self, s: u8) {
        let (m, recs) = std::mem::take(&mut self.steprun[s as usize]);
        if m == 0 {
            return;
        }
        let mut b = vec![tag::STEP_RUN];
        crate::leb::push_u64(&mut b, m);
        b.extend_from_slice(&recs);
        self.w[s as usize].section(&b);
        self.note(s);
    }

    #[allow(clippy::needless_range_loop)] // s indexes several per-substream arrays at once
    fn step(&mut self, force: Option<StepKind>) {
        let lay = self.lay();
        let kind = force.unwrap_or_else(|| match self.rng.below(100) {
            0..=29 => StepKind::Cross,
            30..=54 => StepKind::Improve,
            55..=64 => StepKind::Idle,
            65..=72 => StepKind::Shed,
            73..=80 => StepKind::Depletion,
            81..=88 => StepKind::Control,
            89..=94 => StepKind::Rescan,
            _ => StepKind::Uncross,
        });
        // Source op.
        let (mut src_lane, mut src_seq) = (SRC_NONE, 0u64);
        if kind.has_src() {
            let cands: Vec<usize> = (0..lay.n_lanes as usize)
                .filter(|&l| !self.lanes[l].recent.is_empty())
                .collect();
            if cands.is_empty() {
                return self.step(Some(StepKind::Idle));
            }
            let l = cands[self.rng.below(cands.len() as u64) as usize];
            let r = &self.lanes[l].recent;
            let (f, c) = r[self.rng.below(r.len() as u64) as usize];
            src_lane = l as u8;
            src_seq = f + self.rng.below(c as u64);
        }
        let step = self.next_step;
        self.next_step += 1;
        // New half-cuts: each lane moves with some probability, to at most its decoded ops.
        let mut moved = [false; 2];
        let mut new_cut = self.half_cut.clone();
        let dense_burst = self.rng.chance(self.p(15, 0));
        if dense_burst {
            // Every lane gets fresh ops, so most of a half moves and DENSE is the shorter form.
            for l in 0..lay.n_lanes as usize {
                self.lane_burst_on(l);
            }
        }
        for s in 0..lay.n_streams as usize {
            for (i, l) in lanes_of(&lay, s as u8).enumerate() {
                let top = self.lanes[l].st.next_lane_seq - 1;
                let cur = new_cut[s][i];
                // ~1/3 of steps move a given half (07 §3.13: 20M half-cut changes for 30M steps).
                let p = if dense_burst { 1000 } else { self.p(16, 16) };
                if top > cur && self.rng.chance(p) {
                    new_cut[s][i] = cur + 1 + self.rng.below(top - cur);
                    moved[s] = true;
                }
            }
        }
        let home = lay.home_of(src_lane) as usize;
        let other = lay.n_streams == 2 && moved[1 - home];
        let mut payload = Vec::new();
        if kind.has_payload() && kind != StepKind::Seal {
            let n = self.rng.below(9) as usize;
            payload.extend((0..n).map(|_| self.rng.next_u64() as u8));
        }
        for s in 0..lay.n_streams as usize {
            let is_home = s == home;
            if !is_home && !other {
                continue;
            }
            let before = self.steprun[s].1.len();
            let mut buf = std::mem::take(&mut self.steprun[s].1);
            let start = lay.half_start(s as u8);
            let ok = encode_step_half(
                &mut self.step_st[s],
                start,
                &HalfRecord {
                    step,
                    kind,
                    home: is_home,
                    other,
                    src_lane: if is_home { src_lane } else { SRC_NONE },
                    src_lane_seq: src_seq,
                    payload: &payload,
                    cut: &new_cut[s],
                },
                &mut buf,
            );
            debug_assert!(ok, "generator built an unencodable step");
            let mode = (buf[before] >> step_bits::MODE_SHIFT) & step_bits::MODE_MASK;
            self.stats.by_mode[mode as usize] += 1;
            self.steprun[s].1 = buf;
            self.steprun[s].0 += 1;
        }
        self.half_cut = new_cut;
        self.stats.steps += 1;
        self.stats.by_kind[kind as usize] += 1;
        if other {
            self.stats.spanning += 1;
        }
        // Flush rule 1 (07 §4.5): a step that can release a response (fills or a moved cut).
        // Under load the steps that queue in R_step while a frame is written go into the next
        // one (§4.5 "coalescing comes for free"): the peak mix coalesces to ~11 records per
        // ORDER frame, 07 §3.13's 12M frames/s for 130M records/s.
        let coalesce = self.cfg.peak_mix && self.rng.chance(550);
        for s in 0..lay.n_streams as usize {
            let carried = s == home || other;
            let gated = carried && (moved[s] || kind == StepKind::Cross) && !coalesce;
            if gated || self.steprun[s].1.len() > self.cfg.frame_cap / 2 {
                self.close_steprun(s as u8);
                self.w[s].flush();
                self.after_flush(s as u8);
            }
        }
    }

    /// After an ORDER flush: the HashRuns of records now on the wire (07 §3.7).
    fn after_flush(&mut self, s: u8) {
        self.after_flush_hash(s, false);
    }

    /// HASH frames batch the hashes of several ORDER frames (07 §3.13: ~0.1M HASH frames/s
    /// against 12M ORDER frames/s), within the lag budget; `force` at block close.
    fn after_flush_hash(&mut self, s: u8, force: bool) {
        self.note(s);
        let n = self.hashes_pending[s as usize].len();
        if n == 0 || (!force && n < self.p(48, 400) as usize && !self.rng.chance(self.p(50, 0))) {
            return;
        }
        let mut pend = std::mem::take(&mut self.hashes_pending[s as usize]);
        // The stream core drains each lane's R_hash8 ring into one HashRun (07 §3.7, §4.1):
        // group by lane, keeping each lane's order (the order its records await hashes).
        pend.sort_by_key(|x| x.0);
        let mut body = Vec::new();
        let max_run = (REP_HASH_FRAME_MAX - 12) / 8;
        let mut i = 0;
        while i < pend.len() {
            let lane = pend[i].0;
            let mut j = i;
            while j < pend.len() && pend[j].0 == lane && j - i < max_run {
                j += 1;
            }
            let hs: Vec<u64> = pend[i..j].iter().map(|x| x.1).collect();
            if body.len() + 12 + hs.len() * 8 > REP_HASH_FRAME_MAX && !body.is_empty() {
                self.w[s as usize].hash_frame(&body);
                body.clear();
            }
            encode_hash_run(lane, &hs, &mut body);
            i = j;
        }
        self.w[s as usize].hash_frame(&body);
        self.note(s);
    }

    fn heartbeat(&mut self, s: u8) {
        let hb = Heartbeat {
            last_step: self.next_step - 1,
            last_height: self.height.saturating_sub(1),
            ptp_now: self.rx_ts,
        };
        self.w[s as usize].heartbeat(&hb);
        self.stats.heartbeats += 1;
        self.note(s);
    }

    fn close_block(&mut self) {
        let lay = self.lay();
        let last_step = self.next_step - 1;
        let mut roots = [empty_root(), empty_root()];
        let mut droots = [empty_root(), empty_root()];
        for s in 0..lay.n_streams as usize {
            self.close_steprun(s as u8);
            let bounds: Vec<u64> = lanes_of(&lay, s as u8)
                .map(|l| self.lanes[l].st.next_lane_seq - 1)
                .collect();
            let mut b = Vec::new();
            let mut prev = std::mem::take(&mut self.bounds_prev[s]);
            encode_block_mark(
                self.height,
                last_step,
                self.last_mark_step,
                &mut prev,
                &bounds,
                &mut b,
            );
            self.bounds_prev[s] = prev;
            roots[s] = self.w[s].block_mark(&b);
            droots[s] = *blake3::hash(&self.data_hashes[s]).as_bytes();
            self.data_hashes[s].clear();
            self.w[s].flush();
            self.after_flush_hash(s as u8, true);
        }
        let first_step = self.last_mark_step + 1;
        let mut h = BlockHeader {
            height: self.height,
            epoch: self.cfg.epoch,
            book: self.cfg.book,
            first_step,
            last_step,
            prev: self.prev_hash,
            order_root: order_root(&roots[0], &roots[1]),
            data_root: data_root(&droots[0], &droots[1]),
            seq_sig: [0; 64],
        };
        h.sign(&self.key);
        self.w[0].header_frame(&h);
        self.note(0);
        self.prev_hash = h.header_hash();
        self.headers.push(h);
        self.last_mark_step = last_step;
        self.height += 1;
        self.stats.blocks += 1;
    }
}

/// The order-decoder fuzz harness, shared by `fuzz` (libFuzzer) and the regression replay
/// in `wire/tests/fuzz_regressions.rs`. The first byte picks the layout (REF, a 4-lane dev
/// layout, an 11-lane single-substream one); the rest is a capture, or 64-byte chunks when it
/// does not parse as one. Invariants: no panic, no hang, and errors are sticky per substream.
#[doc(hidden)]
pub fn fuzz_order_decoder(data: &[u8]) {
    let Some((&sel, rest)) = data.split_first() else {
        return;
    };
    let layout = fuzz_layout(sel);
    let frames: Vec<&[u8]> = match read_capture(rest) {
        Ok(f) => f,
        Err(_) => rest.chunks(64).collect(),
    };
    let Ok(mut d) = crate::DecState::new(layout) else {
        return;
    };
    for (i, f) in frames.iter().enumerate() {
        let before = [d.failed(0), d.failed(1)];
        if let Err(e) = d.on_frame(f, i as u64 * 1000, &mut crate::NullSink) {
            if e.stream < layout.n_streams {
                let first = before[e.stream as usize].unwrap_or(e);
                assert_eq!(e, first, "errors are sticky per substream");
                assert_eq!(d.failed(e.stream), Some(e));
            }
        }
    }
    let _ = d.tick(u64::MAX);
}

/// The layout the fuzz harness's selector byte picks.
#[doc(hidden)]
pub fn fuzz_layout(sel: u8) -> Layout {
    match sel % 3 {
        0 => Layout::reference(),
        1 => Layout::two_streams(4),
        _ => Layout {
            n_lanes: 11,
            n_streams: 1,
            pool_mask: 0,
        },
    }
}
