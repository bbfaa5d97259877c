//! The twin of the oracle decoder: `vyrn-wire`'s own decoder (`DecState`) with its events
//! collected in the oracle's shapes, and [`Twins`], both decoders fed the same frames one at a
//! time and compared (T-REP-2). This module calls `wire`'s decoder; [`super::decode`] never
//! does.

use super::decode::{Code, Decoded, Oracle, Pkt, Shape, Step};
use vyrn_wire::{
    AcctTake, BlockHeader, BlockMark, BlockRoots, DecState, Heartbeat, Layout, PacketRecord, Pos,
    RepE, SessionBind, Sink, TenureStart,
};

/// `wire`'s events in the oracle's shapes.
/// `wire`'s events collected in the oracle's shapes.
#[derive(Debug, Default)]
pub struct Collect(pub Decoded);

impl Sink for Collect {
    fn tenure(&mut self, at: Pos, t: &TenureStart) {
        let o = &mut self.0;
        o.tenures.push((
            at.stream,
            t.epoch,
            t.tenure,
            t.sender,
            t.first_step,
            t.first_height,
        ));
    }
    fn pkt(&mut self, _at: Pos, r: &PacketRecord) {
        self.0.pkts.push(Pkt {
            lane: r.lane,
            count: r.count,
            flags: r.flags,
            session: r.session,
            pkt_seq: r.pkt_seq,
            rx_ts: r.rx_ts,
            first_lane_seq: r.first_lane_seq,
            fills_applied: r.fills_applied,
        });
    }
    fn take(&mut self, _at: Pos, t: &AcctTake) {
        self.0.takes.push((t.lane, t.account, t.ver));
    }
    fn bind(&mut self, _at: Pos, b: &SessionBind) {
        self.0
            .binds
            .push((b.lane, b.slot, b.session, b.next_pkt_seq));
    }
    fn step(&mut self, s: &vyrn_wire::Step, cut: &[u64], payload: &[u8]) {
        self.0.steps.push(Step {
            step: s.step,
            kind: s.kind as u8,
            src_lane: s.src_lane,
            src_lane_seq: s.src_lane_seq,
            payload: payload.to_vec(),
            cut: cut.to_vec(),
        });
    }
    fn mark(&mut self, at: Pos, m: &BlockMark, lane_bounds: &[u64]) {
        self.0
            .marks
            .push((at.stream, m.height, m.last_step, lane_bounds.to_vec()));
    }
    fn block(&mut self, b: &BlockRoots) {
        self.0.blocks.push((b.height, b.last_step, b.order_root));
    }
    fn hash(&mut self, _at: Pos, lane: u8, rec: &vyrn_wire::decoder::Awaiting, pkt_hash: u64) {
        self.0
            .hashes
            .push((lane, rec.session, rec.pkt_seq, rec.first_lane_seq, pkt_hash));
    }
    fn header(&mut self, _at: Pos, h: &BlockHeader) {
        self.0.headers.push(h.to_bytes().to_vec());
    }
    fn heartbeat(&mut self, at: Pos, hb: &Heartbeat) {
        self.0
            .heartbeats
            .push((at.stream, hb.last_step, hb.last_height, hb.ptp_now));
    }
}

/// `wire`'s error code as the oracle names it.
pub fn code(e: RepE) -> Code {
    match e {
        RepE::Tag => Code::Tag,
        RepE::Count => Code::Count,
        RepE::Ts => Code::Ts,
        RepE::Kind => Code::Kind,
        RepE::Cut => Code::Cut,
        RepE::Tenure => Code::Tenure,
        RepE::HashLag => Code::HashLag,
        RepE::Frame => Code::Frame,
    }
}

/// A layout as the oracle takes it.
pub fn shape(l: Layout) -> Shape {
    Shape {
        n_lanes: usize::from(l.n_lanes),
        n_streams: l.n_streams,
        pool: l.pool_mask,
    }
}

/// Both decoders over `frames` up to the first error (a sequencer fault, 07 §3.12: the replica
/// stops there): per frame the two results must agree (the first disagreement is reported with
/// its frame index), and so must everything decoded.
pub fn agree(layout: Layout, frames: &[Vec<u8>]) -> Result<(), String> {
    let mut wire = DecState::new(layout).map_err(|e| e.to_string())?;
    let mut sink = Collect::default();
    let mut oracle = Oracle::new(shape(layout));
    for (i, f) in frames.iter().enumerate() {
        let a = wire
            .on_frame(f, 0, &mut sink)
            .map_err(|e| (code(e.code), e.detail));
        let b = oracle.frame(f);
        let stop = a.is_err();
        if a.map_err(|e| e.0) != b {
            return Err(format!(
                "frame {i} (stream {}, kind {}): wire {:?}, oracle {b:?}",
                f.get(21).copied().unwrap_or(0),
                f.get(3).copied().unwrap_or(0),
                wire.on_frame(f, 0, &mut Collect::default())
                    .err()
                    .map(|e| (e.code, e.detail)),
            ));
        }
        // The first error is a sequencer fault (07 §3.12): what follows it is no decoder's to
        // agree on.
        if stop {
            break;
        }
    }
    same(&sink.0, &oracle.out)
}

/// Everything the two decoders decoded, compared field by field; the first difference.
pub fn same(w: &Decoded, o: &Decoded) -> Result<(), String> {
    macro_rules! same {
        ($f:ident) => {
            if w.$f != o.$f {
                let at = w.$f.iter().zip(&o.$f).position(|(x, y)| x != y);
                return Err(format!(
                    "{}: wire {} vs oracle {}; first difference at {at:?}: {:?} vs {:?}",
                    stringify!($f),
                    w.$f.len(),
                    o.$f.len(),
                    at.map(|i| &w.$f[i]),
                    at.map(|i| &o.$f[i]),
                ));
            }
        };
    }
    same!(tenures);
    same!(pkts);
    same!(takes);
    same!(binds);
    same!(steps);
    same!(marks);
    same!(blocks);
    same!(hashes);
    same!(headers);
    same!(heartbeats);
    Ok(())
}

/// Both decoders of one path, fed frame by frame as the sequencer emits them (the simulator's
/// T-REP-2 check on a live home).
#[derive(Debug)]
pub struct Twins {
    wire: DecState,
    sink: Collect,
    oracle: Oracle,
    /// Frames fed.
    pub frames: u64,
    /// The first error both decoders agreed on (a sequencer fault, 07 §3.12): decoding stopped.
    pub stopped: Option<Code>,
    /// Per field of [`Decoded`], how many entries were compared already.
    seen: [usize; 10],
}

impl Twins {
    /// Both decoders for `layout`.
    pub fn new(layout: Layout) -> Result<Self, String> {
        Ok(Twins {
            wire: DecState::new(layout).map_err(|e| e.to_string())?,
            sink: Collect::default(),
            oracle: Oracle::new(shape(layout)),
            frames: 0,
            stopped: None,
            seen: [0; 10],
        })
    }

    /// Feed one frame to both. `Err`: they disagree (the result of this frame, or what it
    /// decoded so far).
    pub fn frame(&mut self, f: &[u8]) -> Result<(), String> {
        if self.stopped.is_some() {
            return Ok(());
        }
        self.frames += 1;
        let a = self
            .wire
            .on_frame(f, 0, &mut self.sink)
            .map_err(|e| code(e.code));
        let b = self.oracle.frame(f);
        if a != b {
            return Err(format!(
                "frame {} (stream {}, kind {}): wire {a:?}, oracle {b:?}",
                self.frames - 1,
                f.get(21).copied().unwrap_or(0),
                f.get(3).copied().unwrap_or(0),
            ));
        }
        if let Err(c) = a {
            self.stopped = Some(c);
        }
        // Only what this frame added: what came before was compared already.
        let (w, o) = (&self.sink.0, &self.oracle.out);
        let mut k = 0;
        macro_rules! tail {
            ($f:ident) => {
                let from = self.seen[k];
                if w.$f.len() != o.$f.len() || w.$f[from..] != o.$f[from..] {
                    let at = (from..w.$f.len().min(o.$f.len())).find(|&i| w.$f[i] != o.$f[i]);
                    return Err(format!(
                        "frame {}: {}: wire {} vs oracle {} decoded; first difference at {at:?}: {:?} vs {:?}",
                        self.frames - 1,
                        stringify!($f),
                        w.$f.len(),
                        o.$f.len(),
                        at.map(|i| &w.$f[i]),
                        at.map(|i| &o.$f[i]),
                    ));
                }
                self.seen[k] = w.$f.len();
                k += 1;
            };
        }
        tail!(tenures);
        tail!(pkts);
        tail!(takes);
        tail!(binds);
        tail!(steps);
        tail!(marks);
        tail!(blocks);
        tail!(hashes);
        tail!(headers);
        tail!(heartbeats);
        debug_assert_eq!(k, self.seen.len());
        Ok(())
    }

    /// What the oracle decoded.
    pub fn decoded(&self) -> &Decoded {
        &self.oracle.out
    }
}
