//! The second order-stream decoder (07 §11, T-REP-2): written from 07 §3 and
//! `shared/design/wire-decisions.md` alone. It calls nothing of `vyrn-wire` — its own byte reader,
//! its own constants, its own state — so a misreading of §3 in `wire`'s decoder shows up as a
//! disagreement with this one on the same frames. Written for clarity, not speed: it allocates
//! per record and keeps whole histories where `wire` keeps bounded queues.
//!
//! [`Oracle::frame`] takes one frame (in `frame_seq` order per substream, no duplicates) and
//! appends what it decoded to [`Decoded`]; an error stops that substream, as §3.12 says.

use std::collections::{BTreeMap, VecDeque};

// 07 §3 constants, restated.
const MAGIC: u16 = 0x4250;
const VERSION: u8 = 1;
const HEADER_LEN: usize = 24;
const BLOCK_HEADER_LEN: usize = 190;
const HEARTBEAT_LEN: usize = 24;
const MAX_SESSIONS_PER_LANE: u64 = 4096;
const SLOT_ADVANCE: u64 = MAX_SESSIONS_PER_LANE;
const SLOT_TAKE: u64 = MAX_SESSIONS_PER_LANE + 1;
const MAX_MSGS: u8 = 10;
const SRC_NONE: u8 = 0xFF;
const TAG_STEPRUN: u8 = 0x40;
const TAG_HASHRUN: u8 = 0x41;
const TAG_MARK: u8 = 0x42;
const TAG_BIND: u8 = 0x43;
const TAG_TENURE: u8 = 0x44;
const TAG_PAD: u8 = 0xFF;

/// The error codes of 07 §3.12 (and `Frame`: bytes that do not parse, where 07 names none).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Code {
    /// REP_E_TAG.
    Tag,
    /// REP_E_COUNT.
    Count,
    /// REP_E_TS.
    Ts,
    /// REP_E_KIND.
    Kind,
    /// REP_E_CUT.
    Cut,
    /// REP_E_TENURE.
    Tenure,
    /// REP_E_HASHLAG.
    HashLag,
    /// Bytes that do not parse.
    Frame,
}

/// Lanes and substreams (07 §2.2, §3.5).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shape {
    /// N_LANES.
    pub n_lanes: usize,
    /// 1 or 2 substreams.
    pub n_streams: u8,
    /// Pooled lanes (bit l).
    pub pool: u64,
}

impl Shape {
    fn half(&self) -> usize {
        if self.n_streams == 2 {
            self.n_lanes.div_ceil(2)
        } else {
            self.n_lanes
        }
    }
    /// Substream `s`'s lanes.
    fn lanes(&self, s: u8) -> std::ops::Range<usize> {
        if s == 0 {
            0..self.half()
        } else {
            self.half()..self.n_lanes
        }
    }
    fn stream_of(&self, l: usize) -> u8 {
        u8::from(self.n_streams == 2 && l >= self.half())
    }
    fn pooled(&self, l: usize) -> bool {
        l < 64 && self.pool >> l & 1 == 1
    }
}

/// A PacketRecord (01 §6.6) as this decoder rebuilt it. `flags`: bit 0 SHED, bit 1 ADVANCE.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pkt {
    /// Lane.
    pub lane: u8,
    /// Numbered messages.
    pub count: u8,
    /// Bit 0 SHED, bit 1 ADVANCE.
    pub flags: u8,
    /// Session (0 for an unbound slot or an Advance).
    pub session: u32,
    /// pkt_seq.
    pub pkt_seq: u32,
    /// rx_ts.
    pub rx_ts: u64,
    /// LaneSeq of its first message.
    pub first_lane_seq: u64,
    /// fills_applied.
    pub fills_applied: u64,
}

/// A complete step: its home record's fields and the whole cut after it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    /// StepId.
    pub step: u64,
    /// Kind (07 §3.8 table).
    pub kind: u8,
    /// Source lane (0xFF: none).
    pub src_lane: u8,
    /// Source op's LaneSeq (0 without a source).
    pub src_lane_seq: u64,
    /// Payload (Rescan, Control, Seal, Uncross).
    pub payload: Vec<u8>,
    /// Every lane's cut after the step.
    pub cut: Vec<u64>,
}

/// What was decoded, per kind of thing, in decoding order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Decoded {
    /// (stream, epoch, tenure, sender, first_step, first_height).
    pub tenures: Vec<(u8, u32, u8, u8, u64, u64)>,
    /// Packet records (Advance included).
    pub pkts: Vec<Pkt>,
    /// (lane, account, ver).
    pub takes: Vec<(u8, u32, u64)>,
    /// (lane, slot, session, next_pkt_seq).
    pub binds: Vec<(u8, u16, u32, u32)>,
    /// Steps, in StepId order.
    pub steps: Vec<Step>,
    /// (stream, height, last_step, lane_bounds of its half).
    pub marks: Vec<(u8, u64, u64, Vec<u64>)>,
    /// (height, last_step, order_root).
    pub blocks: Vec<(u64, u64, [u8; 32])>,
    /// (lane, session, pkt_seq, first_lane_seq, pkt_hash).
    pub hashes: Vec<(u8, u32, u32, u64, u64)>,
    /// HEADER bodies.
    pub headers: Vec<Vec<u8>>,
    /// (stream, last_step, last_height, ptp_now).
    pub heartbeats: Vec<(u8, u64, u64, u64)>,
}

/// A little-endian, LEB128 reader over one frame body.
struct Rd<'a> {
    b: &'a [u8],
    at: usize,
}

impl<'a> Rd<'a> {
    fn done(&self) -> bool {
        self.at >= self.b.len()
    }
    fn bytes(&mut self, n: usize) -> Result<&'a [u8], Code> {
        let end = self.at.checked_add(n).ok_or(Code::Frame)?;
        let s = self.b.get(self.at..end).ok_or(Code::Frame)?;
        self.at = end;
        Ok(s)
    }
    fn u8(&mut self) -> Result<u8, Code> {
        Ok(self.bytes(1)?[0])
    }
    fn u32(&mut self) -> Result<u32, Code> {
        let s = self.bytes(4)?;
        Ok(u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
    }
    fn u64(&mut self) -> Result<u64, Code> {
        let s = self.bytes(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(s);
        Ok(u64::from_le_bytes(a))
    }
    /// Unsigned LEB128 of at most `bits` bits (non-minimal forms accepted: wire-decisions 17).
    fn leb(&mut self, bits: u32) -> Result<u64, Code> {
        let mut v: u128 = 0;
        for i in 0..10 {
            let byte = self.u8()?;
            v |= u128::from(byte & 0x7F) << (7 * i);
            if byte & 0x80 == 0 {
                if v >> bits != 0 {
                    return Err(Code::Frame);
                }
                return Ok(v as u64);
            }
        }
        Err(Code::Frame)
    }
    fn zigzag(&mut self) -> Result<i64, Code> {
        let u = self.leb(64)?;
        Ok(((u >> 1) as i64) ^ -((u & 1) as i64))
    }
}

fn add(a: u64, b: u64) -> Result<u64, Code> {
    a.checked_add(b).ok_or(Code::Frame)
}

/// One lane's decoder state (07 §3.5 LaneDec), with the history this oracle keeps in full.
#[derive(Debug, Clone, Default)]
struct Lane {
    next_lane_seq: u64,
    prev_rx_ts: u64,
    prev_fills: u64,
    /// LaneSeqs below it count as decoded (wire-decisions 7).
    base: u64,
    /// LaneSeqs skipped by LSEQ_EXC: never ops.
    skipped: Vec<(u64, u64)>,
    /// LaneSeqs of shed packets.
    shed: Vec<(u64, u64)>,
    /// Records waiting for their pkt_hash: (session, pkt_seq, first_lane_seq).
    awaiting: VecDeque<(u32, u32, u64)>,
}

impl Lane {
    fn decoded_op(&self, q: u64) -> bool {
        if q == 0 || q >= self.next_lane_seq {
            return false;
        }
        q < self.base || !self.skipped.iter().any(|&(a, b)| q >= a && q < b)
    }
    fn shed_op(&self, q: u64) -> bool {
        self.shed.iter().any(|&(a, b)| q >= a && q < b)
    }
}

/// A step's half record, decoded.
#[derive(Debug, Clone)]
struct Half {
    kind: u8,
    home: bool,
    other: bool,
    src_lane: u8,
    src_lane_seq: u64,
    payload: Vec<u8>,
    /// This half's cut after the record.
    cut: Vec<u64>,
}

/// One substream's state.
#[derive(Debug, Clone, Default)]
struct Sub {
    next_frame: u64,
    failed: Option<Code>,
    tenure: Option<(u32, u8, u8, u64, u64, [u8; 32])>,
    prev_step: u64,
    prev_cut: Vec<u64>,
    /// The last mark's height and last_step, and its lane bounds.
    mark_height: u64,
    mark_step: u64,
    bounds: Vec<u64>,
    /// Heights marked and not yet blocked: (height, last_step, root).
    marked: VecDeque<(u64, u64, [u8; 32])>,
    /// ORDER bytes since the last mark.
    root: Vec<u8>,
    /// Every ORDER section byte of the tenure by the block it belongs to (a mark's own bytes
    /// to the block it closes): the seal's root over a tail that spans marks (07 §9.4).
    by_height: BTreeMap<u64, Vec<u8>>,
    /// Half records by step.
    halves: BTreeMap<u64, Half>,
}

/// The oracle decoder of a home's order stream.
#[derive(Debug, Clone)]
pub struct Oracle {
    shape: Shape,
    lanes: Vec<Lane>,
    /// Slot tables: per lane, one shared table per pool (index `n_lanes`).
    slots: Vec<BTreeMap<u64, (u32, u32)>>,
    subs: Vec<Sub>,
    /// The merged cut, and the next StepId to emit.
    cut: Vec<u64>,
    next_step: u64,
    /// Everything decoded so far.
    pub out: Decoded,
}

impl Oracle {
    /// A decoder for `shape`, before any TenureStart.
    pub fn new(shape: Shape) -> Self {
        Oracle {
            shape,
            lanes: vec![Lane::default(); shape.n_lanes],
            slots: vec![BTreeMap::new(); shape.n_lanes + 1],
            subs: vec![Sub::default(); usize::from(shape.n_streams)],
            cut: vec![0; shape.n_lanes],
            next_step: 0,
            out: Decoded::default(),
        }
    }

    fn table(&self, l: usize) -> usize {
        if self.shape.pooled(l) {
            self.shape.n_lanes
        } else {
            l
        }
    }

    /// Decode one frame (07 §3.12).
    pub fn frame(&mut self, f: &[u8]) -> Result<(), Code> {
        // A header that does not parse is charged to the substream its stream byte names, or to
        // substream 0 when that byte names none (a frame no substream can own stops decoding
        // where it arrived: order RX drops such frames before a decoder sees them).
        let owner = f
            .get(21)
            .copied()
            .filter(|&s| s < self.shape.n_streams)
            .unwrap_or(0);
        if f.len() < HEADER_LEN {
            return Err(self.stop_parse(owner));
        }
        let u16at = |o: usize| u16::from_le_bytes([f[o], f[o + 1]]);
        let stream = f[21];
        let kind = f[3];
        let flags = f[16];
        let ok_header = u16at(0) == MAGIC
            && f[2] == VERSION
            && (1..=4).contains(&kind)
            && flags & !0x07 == 0
            && usize::from(u16at(18)) == f.len() - HEADER_LEN
            && u16at(22) == 0
            && stream <= 1;
        if !ok_header {
            return Err(self.stop_parse(owner));
        }
        if stream >= self.shape.n_streams {
            // A substream this layout lacks: refused, nothing stopped.
            return Err(Code::Tag);
        }
        if let Some(e) = self.subs[stream as usize].failed {
            return Err(e);
        }
        let frame_seq = u64::from_le_bytes(f[8..16].try_into().unwrap_or([0; 8]));
        let si = stream as usize;
        let expected = self.subs[si].next_frame.max(1);
        if frame_seq < expected {
            // The other path's copy or a retransmission of a frame already decoded.
            return Ok(());
        }
        if frame_seq > expected {
            return Err(self.stop(stream, Code::Frame));
        }
        let body = &f[HEADER_LEN..];
        // Every frame of a tenure names it (07 §3.2: epoch16, tenure, sender).
        if let Some(t) = self.subs[si].tenure {
            let epoch16 = u16::from_le_bytes([f[6], f[7]]);
            if epoch16 != t.0 as u16 || f[17] != t.1 || f[20] != t.2 {
                return Err(self.stop(stream, Code::Tenure));
            }
        }
        let r = match kind {
            1 => self.order(stream, f, body),
            _ if self.subs[si].tenure.is_none() => Err(Code::Tenure),
            2 => self.hash(stream, body),
            3 => self.header(stream, body),
            _ => self.heartbeat(stream, body),
        };
        match r {
            Ok(()) => {
                self.subs[si].next_frame = expected + 1;
                Ok(())
            }
            Err(e) => Err(self.stop(stream, e)),
        }
    }

    /// A frame whose header does not parse, charged to `owner` (a stopped substream keeps its
    /// first error).
    fn stop_parse(&mut self, owner: u8) -> Code {
        match self.subs.get(owner as usize).and_then(|s| s.failed) {
            Some(e) => e,
            None => self.stop(owner, Code::Frame),
        }
    }

    fn stop(&mut self, stream: u8, e: Code) -> Code {
        if let Some(s) = self.subs.get_mut(stream as usize) {
            s.failed.get_or_insert(e);
        }
        e
    }

    fn order(&mut self, stream: u8, f: &[u8], body: &[u8]) -> Result<(), Code> {
        let si = stream as usize;
        let mut r = Rd { b: body, at: 0 };
        let first = self.subs[si].tenure.is_none();
        if first {
            // wire-decisions 21: frame 1 begins with TenureStart.
            if body.first() != Some(&TAG_TENURE) {
                return Err(Code::Tenure);
            }
            r.at = 1;
            self.tenure_start(stream, f, &mut r)?;
            self.subs[si].root.clear();
        }
        while !r.done() {
            let start = r.at;
            let tag = r.u8()?;
            let res = match tag {
                0x00..=0x3F => self.lane_run(stream, tag, &mut r),
                TAG_STEPRUN => self.step_run(stream, &mut r),
                TAG_MARK => {
                    let res = self.mark(stream, &mut r);
                    // The mark's own bytes close its block's root (wire-decisions 14).
                    if res.is_ok() {
                        let sub = &mut self.subs[si];
                        sub.root.extend_from_slice(&body[start..r.at]);
                        let h = sub.mark_height;
                        sub.by_height
                            .entry(h)
                            .or_default()
                            .extend_from_slice(&body[start..r.at]);
                        self.close_mark(stream);
                        continue;
                    }
                    res
                }
                TAG_BIND => self.bind(&mut r),
                TAG_PAD => {
                    r.at = body.len();
                    Ok(())
                }
                TAG_TENURE => Err(Code::Tenure),
                _ => Err(Code::Tag),
            };
            res?;
            let sub = &mut self.subs[si];
            sub.root.extend_from_slice(&body[start..r.at]);
            let h = sub.mark_height.wrapping_add(1);
            sub.by_height
                .entry(h)
                .or_default()
                .extend_from_slice(&body[start..r.at]);
        }
        Ok(())
    }

    /// BLAKE3 over substream `stream`'s ORDER section bytes after `BlockMark(h)` through the
    /// last frame taken (07 §9.4: the seal's `order_root` half when `h` is `H*`), whatever
    /// marks follow `h`.
    pub fn order_root_since(&self, stream: u8, h: u64) -> [u8; 32] {
        let mut x = blake3::Hasher::new();
        if let Some(s) = self.subs.get(stream as usize) {
            for (_, b) in s.by_height.range(h.wrapping_add(1)..) {
                x.update(b);
            }
        }
        *x.finalize().as_bytes()
    }

    fn tenure_start(&mut self, stream: u8, f: &[u8], r: &mut Rd<'_>) -> Result<(), Code> {
        let epoch = r.u32()?;
        let tenure = r.u8()?;
        let sender = r.u8()?;
        let first_step = r.u64()?;
        let first_height = r.u64()?;
        let mut prev = [0u8; 32];
        prev.copy_from_slice(r.bytes(32)?);
        let lanes = self.shape.lanes(stream);
        let mut bases = Vec::new();
        for _ in lanes.clone() {
            let next = r.leb(64)?;
            let rx = r.u64()?;
            let fa = r.leb(64)?;
            bases.push((next, rx, fa));
        }
        let mut prev_cut = Vec::new();
        for _ in lanes.clone() {
            prev_cut.push(r.leb(64)?);
        }
        let epoch16 = u16::from_le_bytes([f[6], f[7]]);
        if tenure != f[17] || sender != f[20] || epoch as u16 != epoch16 {
            return Err(Code::Tenure);
        }
        // The cut cannot be above the ops decoded (wire-decisions 8, at the base).
        for (c, &(next, _, _)) in prev_cut.iter().zip(&bases) {
            if *c > next.saturating_sub(1) {
                return Err(Code::Tenure);
            }
        }
        let t = (epoch, tenure, sender, first_step, first_height, prev);
        for (i, s) in self.subs.iter().enumerate() {
            if i != stream as usize && s.tenure.is_some_and(|o| o != t) {
                return Err(Code::Tenure);
            }
        }
        if first_step == 0 {
            return Err(Code::Frame);
        }
        for (l, &(next, rx, fa)) in lanes.clone().zip(&bases) {
            self.lanes[l] = Lane {
                next_lane_seq: next,
                prev_rx_ts: rx,
                prev_fills: fa,
                base: next,
                ..Lane::default()
            };
        }
        for (i, l) in lanes.enumerate() {
            self.cut[l] = prev_cut[i];
        }
        let s = &mut self.subs[stream as usize];
        s.tenure = Some(t);
        s.prev_step = first_step - 1;
        s.prev_cut = prev_cut.clone();
        s.mark_height = first_height.wrapping_sub(1);
        s.mark_step = first_step - 1;
        s.bounds = prev_cut;
        if self.next_step == 0 {
            self.next_step = first_step;
        }
        self.out
            .tenures
            .push((stream, epoch, tenure, sender, first_step, first_height));
        Ok(())
    }

    fn lane_run(&mut self, stream: u8, l: u8, r: &mut Rd<'_>) -> Result<(), Code> {
        let lane = usize::from(l);
        if lane >= self.shape.n_lanes || self.shape.stream_of(lane) != stream {
            return Err(Code::Tag);
        }
        let k = r.leb(64)?;
        for _ in 0..k {
            self.pkt(lane, r)?;
        }
        Ok(())
    }

    /// 07 §3.6 decode_pkt, in its order.
    fn pkt(&mut self, lane: usize, r: &mut Rd<'_>) -> Result<(), Code> {
        let h = r.u8()?;
        let count = h & 0x0F;
        let shed = h & 0x80 != 0;
        if count > MAX_MSGS {
            return Err(Code::Count);
        }
        let slot = r.leb(16)?;
        if slot > SLOT_TAKE {
            return Err(Code::Count);
        }
        if slot == SLOT_TAKE {
            if h != 0 || !self.shape.pooled(lane) {
                return Err(Code::Count);
            }
            let account = r.leb(32)? as u32;
            let ver = r.leb(64)?;
            self.out.takes.push((lane as u8, account, ver));
            return Ok(());
        }
        let advance = slot == SLOT_ADVANCE;
        if advance && (count != 0 || shed || h & 0x30 != 0) {
            return Err(Code::Count);
        }
        let d = &self.lanes[lane];
        let rx_ts = d
            .prev_rx_ts
            .checked_add_signed(r.zigzag()?)
            .ok_or(Code::Ts)?;
        let fills = if h & 0x40 != 0 {
            add(d.prev_fills, r.leb(64)?)?
        } else {
            d.prev_fills
        };
        let first = if h & 0x20 != 0 {
            add(d.next_lane_seq, r.leb(64)?)?
        } else {
            d.next_lane_seq
        };
        let next = add(first, u64::from(count))?;
        let d = &mut self.lanes[lane];
        if first > d.next_lane_seq {
            d.skipped.push((d.next_lane_seq, first));
        }
        d.prev_rx_ts = rx_ts;
        d.prev_fills = fills;
        d.next_lane_seq = next;
        if advance {
            self.out.pkts.push(Pkt {
                lane: lane as u8,
                count: 0,
                flags: 2,
                session: 0,
                pkt_seq: 0,
                rx_ts,
                first_lane_seq: first,
                fills_applied: fills,
            });
            return Ok(());
        }
        let t = self.table(lane);
        let (session, expect) = self.slots[t].get(&slot).copied().unwrap_or((0, 0));
        let pkt_seq = if h & 0x10 != 0 {
            r.leb(32)? as u32
        } else {
            expect
        };
        let after = pkt_seq.checked_add(1).ok_or(Code::Frame)?;
        self.slots[t].insert(slot, (session, after));
        let d = &mut self.lanes[lane];
        if shed {
            d.shed.push((first, next));
        }
        d.awaiting.push_back((session, pkt_seq, first));
        self.out.pkts.push(Pkt {
            lane: lane as u8,
            count,
            flags: u8::from(shed),
            session,
            pkt_seq,
            rx_ts,
            first_lane_seq: first,
            fills_applied: fills,
        });
        Ok(())
    }

    fn bind(&mut self, r: &mut Rd<'_>) -> Result<(), Code> {
        let lane = r.u8()?;
        let slot = r.leb(16)?;
        let session = r.u32()?;
        let next = r.leb(32)? as u32;
        if usize::from(lane) >= self.shape.n_lanes {
            return Err(Code::Tag);
        }
        if slot >= MAX_SESSIONS_PER_LANE {
            return Err(Code::Count);
        }
        let t = self.table(usize::from(lane));
        self.slots[t].insert(slot, (session, next));
        self.out.binds.push((lane, slot as u16, session, next));
        Ok(())
    }

    fn step_run(&mut self, stream: u8, r: &mut Rd<'_>) -> Result<(), Code> {
        let m = r.leb(64)?;
        for _ in 0..m {
            self.half(stream, r)?;
        }
        Ok(())
    }

    /// 07 §3.8, one half record of this substream.
    fn half(&mut self, stream: u8, r: &mut Rd<'_>) -> Result<(), Code> {
        let si = stream as usize;
        let b0 = r.u8()?;
        let kind = b0 & 0x0F;
        let home = b0 & 0x10 != 0;
        let mode = (b0 >> 5) & 3;
        let other = b0 & 0x80 != 0;
        if kind > 8 {
            return Err(Code::Kind);
        }
        if mode == 3 {
            return Err(Code::Cut);
        }
        let gap = r.leb(64)?;
        let step = add(add(self.subs[si].prev_step, 1)?, gap)?;
        // Steps after a mark are above it (wire-decisions 13).
        if step <= self.subs[si].mark_step {
            return Err(Code::Cut);
        }
        if self.shape.n_streams == 1 && (other || !home) {
            return Err(Code::Kind);
        }
        let lanes = self.shape.lanes(stream);
        let (mut src_lane, mut zz, mut payload) = (SRC_NONE, 0i64, Vec::new());
        if home {
            // The kind table and the record's form (wire-decisions 3, 4, 6).
            src_lane = r.u8()?;
            if src_lane != SRC_NONE {
                zz = r.zigzag()?;
            }
            if matches!(kind, 0 | 1 | 5) != (src_lane != SRC_NONE) {
                return Err(Code::Kind);
            }
            let src_home = if src_lane == SRC_NONE {
                0
            } else {
                self.shape.stream_of(usize::from(src_lane))
            };
            if src_home != stream
                || (src_lane != SRC_NONE && usize::from(src_lane) >= self.shape.n_lanes)
            {
                return Err(Code::Cut);
            }
            if matches!(kind, 3 | 6 | 7 | 8) {
                let plen = r.leb(64)?;
                let n = usize::try_from(plen).map_err(|_| Code::Frame)?;
                payload = r.bytes(n)?.to_vec();
                if kind == 7 && n != 0 {
                    return Err(Code::Kind);
                }
            }
        } else {
            // wire-decisions 15 and §3.8: a cut-only record is OTHER and moves its half.
            if !other {
                return Err(Code::Kind);
            }
            if mode == 0 {
                return Err(Code::Cut);
            }
        }
        let h = lanes.len();
        let mut cut = self.subs[si].prev_cut.clone();
        match mode {
            1 => {
                for c in cut.iter_mut() {
                    *c = add(*c, r.leb(64)?)?;
                }
            }
            2 => {
                let bm = r.bytes(h.div_ceil(8))?.to_vec();
                let set: Vec<usize> = (0..bm.len() * 8)
                    .filter(|&i| bm[i / 8] >> (i % 8) & 1 == 1)
                    .collect();
                if set.iter().any(|&i| i >= h) {
                    return Err(Code::Cut);
                }
                for i in set {
                    let dv = r.leb(64)?;
                    if dv == 0 {
                        return Err(Code::Cut);
                    }
                    cut[i] = add(cut[i], dv)?;
                }
            }
            _ => {}
        }
        // INV-CUT-MONO holds by construction (deltas ≥ 0); the bound (wire-decisions 8).
        for (i, l) in lanes.clone().enumerate() {
            if cut[i] > self.lanes[l].next_lane_seq.saturating_sub(1) {
                return Err(Code::Cut);
            }
        }
        let mut src_lane_seq = 0;
        if src_lane != SRC_NONE {
            let i = usize::from(src_lane) - lanes.start;
            src_lane_seq = cut[i].checked_add_signed(zz).ok_or(Code::Cut)?;
            let lane = &self.lanes[usize::from(src_lane)];
            if !lane.decoded_op(src_lane_seq) {
                return Err(Code::Cut);
            }
            if kind == 5 && lane.shed_op(src_lane_seq) {
                return Err(Code::Kind);
            }
        }
        // A record for a step already complete: its home record said this substream carries
        // none of it (§3.8).
        if step < self.next_step {
            return Err(Code::Kind);
        }
        let s = &mut self.subs[si];
        s.prev_step = step;
        s.prev_cut = cut.clone();
        s.halves.insert(
            step,
            Half {
                kind,
                home,
                other,
                src_lane,
                src_lane_seq,
                payload,
                cut,
            },
        );
        self.merge()
    }

    /// The merge of 07 §3.8, in StepId order: step s goes out once its home record and, if
    /// OTHER, its cut-only record are decoded. A substream that has decoded past s without the
    /// record s needs from it is a fault, found when s is next.
    fn merge(&mut self) -> Result<(), Code> {
        loop {
            let s = self.next_step;
            let here: Vec<Option<&Half>> = self.subs.iter().map(|x| x.halves.get(&s)).collect();
            let waiting = |i: usize| self.subs.get(i).is_some_and(|x| !x.halves.is_empty());
            let (hi, oi) = match (
                here.first().copied().flatten(),
                here.get(1).copied().flatten(),
            ) {
                (Some(a), Some(b)) => {
                    if a.home == b.home || !a.other || !b.other || a.kind != b.kind {
                        return Err(Code::Kind);
                    }
                    if a.home {
                        (0, Some(1))
                    } else {
                        (1, Some(0))
                    }
                }
                (Some(x), None) | (None, Some(x)) => {
                    let i = usize::from(here[0].is_none());
                    if x.home && !x.other {
                        (i, None)
                    } else if waiting(1 - i) {
                        return Err(Code::Kind);
                    } else {
                        return Ok(());
                    }
                }
                (None, None) => {
                    if self.subs.len() == 2 && waiting(0) && waiting(1) {
                        return Err(Code::Kind);
                    }
                    return Ok(());
                }
            };
            let h = self.subs[hi]
                .halves
                .remove(&s)
                .unwrap_or_else(|| unreachable!());
            for (i, l) in self.shape.lanes(hi as u8).enumerate() {
                self.cut[l] = h.cut[i];
            }
            if let Some(oi) = oi {
                if let Some(c) = self.subs[oi].halves.remove(&s) {
                    for (i, l) in self.shape.lanes(oi as u8).enumerate() {
                        self.cut[l] = c.cut[i];
                    }
                }
            }
            self.out.steps.push(Step {
                step: s,
                kind: h.kind,
                src_lane: h.src_lane,
                src_lane_seq: h.src_lane_seq,
                payload: h.payload,
                cut: self.cut.clone(),
            });
            self.next_step = s + 1;
            self.emit_blocks();
        }
    }

    /// Every block whose marks are all decoded and whose steps are all out.
    fn emit_blocks(&mut self) {
        loop {
            let ready = self
                .subs
                .iter()
                .all(|s| s.marked.front().is_some_and(|m| m.1 < self.next_step));
            if !ready {
                break;
            }
            let mut roots = Vec::new();
            let mut hl = (0, 0);
            for s in self.subs.iter_mut() {
                if let Some((h, l, root)) = s.marked.pop_front() {
                    roots.push(root);
                    hl = (h, l);
                }
            }
            if roots.len() == 1 {
                roots.push(*blake3::hash(&[]).as_bytes());
            }
            let mut hasher = blake3::Hasher::new();
            hasher.update(&roots[0]);
            hasher.update(&roots[1]);
            self.out
                .blocks
                .push((hl.0, hl.1, *hasher.finalize().as_bytes()));
        }
    }

    /// 07 §3.9 BlockMark, with wire-decisions 12 and 13.
    fn mark(&mut self, stream: u8, r: &mut Rd<'_>) -> Result<(), Code> {
        let si = stream as usize;
        let lanes = self.shape.lanes(stream);
        let h = lanes.len();
        let height = r.leb(64)?;
        let dstep = r.leb(64)?;
        let bm = r.bytes(h.div_ceil(8))?.to_vec();
        if height != self.subs[si].mark_height.wrapping_add(1) {
            return Err(Code::Cut);
        }
        let last_step = add(self.subs[si].mark_step, dstep)?;
        if self.subs[si].prev_step > last_step {
            return Err(Code::Cut);
        }
        let mut bounds = self.subs[si].bounds.clone();
        for (i, b) in bounds.iter_mut().enumerate() {
            if bm[i / 8] >> (i % 8) & 1 == 1 {
                *b = add(*b, r.leb(64)?)?;
            }
        }
        if (h..bm.len() * 8).any(|i| bm[i / 8] >> (i % 8) & 1 == 1) {
            return Err(Code::Cut);
        }
        for (i, l) in lanes.enumerate() {
            if bounds[i] != self.lanes[l].next_lane_seq.saturating_sub(1) {
                return Err(Code::Cut);
            }
        }
        let s = &mut self.subs[si];
        s.mark_height = height;
        s.mark_step = last_step;
        s.bounds = bounds.clone();
        self.out.marks.push((stream, height, last_step, bounds));
        // The two marks of one height cut the block at one step (wire-decisions 13).
        for (i, s) in self.subs.iter().enumerate() {
            if i == si {
                continue;
            }
            let theirs = s
                .marked
                .iter()
                .find(|m| m.0 == height)
                .map(|m| m.1)
                .or((s.mark_height == height).then_some(s.mark_step));
            if theirs.is_some_and(|t| t != last_step) {
                return Err(Code::Cut);
            }
        }
        Ok(())
    }

    /// The mark's bytes are in the root: close the block's half root.
    fn close_mark(&mut self, stream: u8) {
        let s = &mut self.subs[stream as usize];
        let root = *blake3::hash(&s.root).as_bytes();
        s.root.clear();
        s.marked.push_back((s.mark_height, s.mark_step, root));
        self.emit_blocks();
    }

    /// 07 §3.7 HASH frames: HashRun sections for this substream's lanes.
    fn hash(&mut self, stream: u8, body: &[u8]) -> Result<(), Code> {
        let mut r = Rd { b: body, at: 0 };
        while !r.done() {
            match r.u8()? {
                TAG_HASHRUN => {}
                TAG_PAD => return Ok(()),
                _ => return Err(Code::Tag),
            }
            let lane = usize::from(r.u8()?);
            if lane >= self.shape.n_lanes || self.shape.stream_of(lane) != stream {
                return Err(Code::Tag);
            }
            let k = r.leb(64)?;
            // The run is read whole, then matched to as many waiting records.
            let n = usize::try_from(k).map_err(|_| Code::Frame)?;
            let bytes = r.bytes(n.checked_mul(8).ok_or(Code::Frame)?)?;
            if self.lanes[lane].awaiting.len() < n {
                return Err(Code::HashLag);
            }
            for c in bytes.chunks_exact(8) {
                let mut a = [0u8; 8];
                a.copy_from_slice(c);
                let (session, pkt_seq, first) =
                    self.lanes[lane].awaiting.pop_front().ok_or(Code::HashLag)?;
                self.out
                    .hashes
                    .push((lane as u8, session, pkt_seq, first, u64::from_le_bytes(a)));
            }
        }
        Ok(())
    }

    /// 07 §3.10: one BlockHeader, on substream A (wire-decisions 24).
    fn header(&mut self, stream: u8, body: &[u8]) -> Result<(), Code> {
        if stream != 0 {
            return Err(Code::Tag);
        }
        if body.len() != BLOCK_HEADER_LEN {
            return Err(Code::Frame);
        }
        self.out.headers.push(body.to_vec());
        Ok(())
    }

    fn heartbeat(&mut self, stream: u8, body: &[u8]) -> Result<(), Code> {
        if body.len() != HEARTBEAT_LEN {
            return Err(Code::Frame);
        }
        let mut r = Rd { b: body, at: 0 };
        let hb = (stream, r.u64()?, r.u64()?, r.u64()?);
        self.out.heartbeats.push(hb);
        Ok(())
    }
}
