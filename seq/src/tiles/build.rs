//! Building a box: every tile with its endpoints at the start of a tenure — the first of an
//! epoch ([`build`]) or a promoted standby's, from the engine its replay built
//! ([`build_takeover`], 07 §9.5).

use super::*;
use crate::stream::RtxRing;
use crate::takeover::{Takeover, TenureBase};
use vyrn_engine::Handover;

/// Build a box at the start of a tenure: every tile with its endpoints, each writer with the
/// [`Wire`] `wire` gives it; `nack_reply` answers NACKs past a stream core's ring.
pub fn build(
    cfg: &SeqConfig,
    self_fence_us: Option<u64>,
    mut wire: impl FnMut(WireFor) -> Box<dyn Wire>,
    mut nack_reply: impl FnMut(u8) -> Option<NackReply>,
    hash_reply: Option<HashReply>,
) -> (BoxTiles, BoxHandles) {
    let base = TenureBase::first(&cfg.engine);
    let hooks = Hooks {
        self_fence_us,
        wire: &mut wire,
        nack_reply: &mut nack_reply,
        hash_reply,
    };
    build_at(cfg, base, None, None, hooks)
}

/// What a box's build takes time for that a warm standby builds when it starts, not at
/// promotion (07 §9.5, B-REP-8): each stream core's frame ring (REP_RTX_RING_BYTES, every page
/// touched), each lane's packet retention table, and the sliced signer's tables for its
/// `seq_key` (~3 ms).
pub struct Reserve {
    rtx: Vec<RtxRing>,
    retain: Vec<crate::retain::PktRetain>,
    signer: crate::signer::SlicedSigner,
    /// The public key the signer is for (a box of another key builds its own).
    public: ed25519_dalek::VerifyingKey,
}

impl std::fmt::Debug for Reserve {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reserve")
            .field("rtx", &self.rtx.len())
            .field("retain", &self.retain.len())
            .finish_non_exhaustive()
    }
}

/// A reserve's parts for `cfg`'s box: its frame rings, retention tables, and its signer when
/// built for `cfg`'s key (none for another key: the box builds its own).
type ReserveParts = (
    std::vec::IntoIter<RtxRing>,
    Vec<crate::retain::PktRetain>,
    Option<crate::signer::SlicedSigner>,
);

impl Reserve {
    fn parts(r: Option<Reserve>, cfg: &SeqConfig) -> ReserveParts {
        match r {
            Some(r) => {
                let mine = ed25519_dalek::SigningKey::from_bytes(&cfg.seq_key).verifying_key();
                let signer = (r.public == mine).then_some(r.signer);
                (r.rtx.into_iter(), r.retain, signer)
            }
            None => (Vec::new().into_iter(), Vec::new(), None),
        }
    }

    /// The memory of a box of `cfg`, faulted in.
    pub fn new(cfg: &SeqConfig) -> Self {
        let lay = cfg.engine.layout;
        Reserve {
            rtx: (0..lay.n_streams)
                .map(|_| RtxRing::new(cfg.rtx_ring_bytes))
                .collect(),
            retain: (0..lay.n_lanes)
                .map(|_| crate::retain::PktRetain::new(crate::retain::RETAIN_SLOTS))
                .collect(),
            signer: crate::signer::SlicedSigner::new(&cfg.seq_key),
            public: ed25519_dalek::SigningKey::from_bytes(&cfg.seq_key).verifying_key(),
        }
    }
}

/// Build the box of a promoted standby (07 §9.5): its tenure (`cfg.tenure`) starts after the
/// seal, with the lanes, BBO core and trailing ops of `t`'s engine, in the memory of `reserve`
/// when the standby built one (else faulted in now); otherwise as [`build`].
pub fn build_takeover(
    cfg: &SeqConfig,
    t: Takeover,
    reserve: Option<Reserve>,
    self_fence_us: Option<u64>,
    mut wire: impl FnMut(WireFor) -> Box<dyn Wire>,
    mut nack_reply: impl FnMut(u8) -> Option<NackReply>,
    hash_reply: Option<HashReply>,
) -> (BoxTiles, BoxHandles) {
    let hooks = Hooks {
        self_fence_us,
        wire: &mut wire,
        nack_reply: &mut nack_reply,
        hash_reply,
    };
    build_at(cfg, t.base, Some(t.engine), reserve, hooks)
}

/// What the caller gives every box it builds.
struct Hooks<'a> {
    self_fence_us: Option<u64>,
    wire: &'a mut dyn FnMut(WireFor) -> Box<dyn Wire>,
    nack_reply: &'a mut dyn FnMut(u8) -> Option<NackReply>,
    hash_reply: Option<HashReply>,
}

/// The lanes' ring ends the other tiles hold.
struct LaneEnds {
    rx_p: Vec<Producer<RxPkt>>,
    pkt_c: Vec<Option<Consumer<PktEntry>>>,
    h8_c: Vec<Option<Consumer<(u64, u64)>>>,
    h32_c: Vec<Consumer<(u8, u64, [u8; 32])>>,
    fwd_c: Vec<Consumer<Fwd>>,
    ev_p: Vec<Outq<LaneEvent>>,
    tx_c: Vec<Consumer<Held>>,
    ask_p: Vec<Producer<crate::retain::SeqDataAsk>>,
    answer_c: Vec<Consumer<crate::retain::SeqDataAnswer>>,
}

/// The lane tiles, each with its rings: fresh lanes of `cfg`, or the engine's (its trailing ops
/// go first into each lane's ring to the BBO core).
fn lane_tiles(
    cfg: &SeqConfig,
    engine: Option<(Vec<Lane>, Vec<VecDeque<Fwd>>)>,
    retain: Vec<crate::retain::PktRetain>,
    words: &Arc<Words>,
    wire: &mut dyn FnMut(WireFor) -> Box<dyn Wire>,
    retain_stats: &Arc<RetainStats>,
) -> (Vec<LaneTile>, LaneEnds) {
    let e = &cfg.engine;
    let n = e.layout.n_lanes as usize;
    let (mut given, mut given_fwd) = match engine {
        Some((l, f)) => (l.into_iter().map(Some).collect(), f),
        None => (Vec::new(), Vec::new()),
    };
    let mut ends = LaneEnds {
        rx_p: Vec::new(),
        pkt_c: Vec::new(),
        h8_c: Vec::new(),
        h32_c: Vec::new(),
        fwd_c: Vec::new(),
        ev_p: Vec::new(),
        tx_c: Vec::new(),
        ask_p: Vec::new(),
        answer_c: Vec::new(),
    };
    let mut lanes = Vec::new();
    let mut retain = retain.into_iter();
    for l in 0..n {
        let (ap, ac) = spsc::channel(256);
        let (anp, anc) = spsc::channel(256);
        ends.ask_p.push(ap);
        ends.answer_c.push(anc);
        let (rp, rc) = spsc::channel(LANE_RING);
        let (pp, pc) = spsc::channel(LANE_RING);
        let (h8p, h8c) = spsc::channel(LANE_RING);
        let (h32p, h32c) = spsc::channel(LANE_RING);
        let (fp, fc) = spsc::channel(LANE_RING);
        let (ep, ec) = spsc::channel(LANE_RING);
        let (tp, tc) = spsc::channel(LANE_RING);
        ends.rx_p.push(rp);
        ends.pkt_c.push(Some(pc));
        ends.h8_c.push(Some(h8c));
        ends.h32_c.push(h32c);
        ends.fwd_c.push(fc);
        ends.ev_p.push(Outq::new(ep));
        ends.tx_c.push(tc);
        let mut fwd = Outq::new(fp);
        if let Some(q) = given_fwd.get_mut(l) {
            for op in q.drain(..) {
                fwd.push(op);
            }
        }
        let lane = given
            .get_mut(l)
            .and_then(Option::take)
            .unwrap_or_else(|| Lane::new(e, l as u8));
        lanes.push(LaneTile {
            lane,
            rx: rc,
            events: ec,
            ports: LanePorts {
                l,
                r_pkt: Outq::new(pp),
                r_hash8: Outq::new(h8p),
                r_hash32: Outq::new(h32p),
                fwd,
                tx: Outq::new(tp),
                held: VecDeque::new(),
            },
            words: words.clone(),
            out: Out::new(wire(WireFor::Lane(l as u8)), words.clone()),
            retain: retain
                .next()
                .unwrap_or_else(|| crate::retain::PktRetain::new(crate::retain::RETAIN_SLOTS)),
            asks: ac,
            answers: anp,
            retain_stats: retain_stats.clone(),
        });
    }
    (lanes, ends)
}

fn build_at(
    cfg: &SeqConfig,
    base: TenureBase,
    engine: Option<Handover>,
    reserve: Option<Reserve>,
    hooks: Hooks<'_>,
) -> (BoxTiles, BoxHandles) {
    let (mut rtx, retain, signer) = Reserve::parts(reserve, cfg);
    let (wire, nack_reply) = (hooks.wire, hooks.nack_reply);
    let e = &cfg.engine;
    let lay = e.layout;
    let n = lay.n_lanes as usize;
    let ns = lay.n_streams as usize;
    let words = Arc::new(Words::at(base.prev_step(), &base.prev_cut));
    let knobs = Arc::new(StreamKnobs::default());
    let (step_w, [c_a, c_b, c_ctl]) = multi::channel::<StepMsg, 3>(STEP_RING);
    let mut step_cursors = vec![Some(c_a), Some(c_b)];
    let retain_stats = Arc::new(RetainStats::default());
    let (bbo, engine_lanes) = match engine {
        Some(h) => (h.bbo, Some((h.lanes, h.fwd))),
        None => (Bbo::new(e), None),
    };
    let (lanes, mut ends) = lane_tiles(cfg, engine_lanes, retain, &words, wire, &retain_stats);
    let (ctl_p, ctl_c) = spsc::channel(1024);
    let (in_p, in_c) = spsc::channel(1 << 14);
    let (vote_p, vote_c) = spsc::channel(1 << 12);
    let (fs_p, fs_c): (Vec<_>, Vec<_>) = (0..2).map(|_| spsc::channel(1 << 16)).unzip();
    let mut fs_p: Vec<Option<Producer<(u64, u64)>>> = fs_p.into_iter().map(Some).collect();
    let (cl_p, cl_c): (Vec<_>, Vec<_>) = (0..ns).map(|_| spsc::channel(1024)).unzip();
    let mut cl_p: Vec<Option<Producer<ClosedHalf>>> = cl_p.into_iter().map(Some).collect();
    let (hd_p, hd_c) = spsc::channel(1024);
    let mut hd_c = Some(hd_c);
    let mut streams = Vec::new();
    let mut nack_p = Vec::new();
    for h in 0..ns as u8 {
        let (np, nc) = spsc::channel(1024);
        nack_p.push(np);
        let mine = |l: usize| lay.stream_of(l) == h;
        let mut ports = StreamPorts {
            h,
            r_pkt: (0..n)
                .map(|l| if mine(l) { ends.pkt_c[l].take() } else { None })
                .collect(),
            r_hash8: (0..n)
                .map(|l| if mine(l) { ends.h8_c[l].take() } else { None })
                .collect(),
            step: step_cursors[h as usize]
                .take()
                .expect("one cursor per stream core"),
            frame_steps: Outq::new(fs_p[h as usize].take().expect("one per stream")),
            closed: Outq::new(cl_p[h as usize].take().expect("one per stream")),
            headers: if h == 0 { hd_c.take() } else { None },
            words: words.clone(),
            out: wire(WireFor::Stream(h)),
        };
        let ring = rtx
            .next()
            .unwrap_or_else(|| RtxRing::new(cfg.rtx_ring_bytes));
        let mut core = StreamCore::with_ring(h, cfg, &base, ring, &mut ports);
        if h == 0 {
            core.set_block_ns(cfg.block_ns);
        }
        streams.push(StreamTile {
            core,
            ports,
            nacks: nc,
            nack_reply: nack_reply(h),
            spare: None,
            published: Default::default(),
            knobs: knobs.clone(),
            knobs_seen: 0,
        });
    }
    // A one-substream layout: the writer waits for every cursor, so stream-A moves the unused
    // one too.
    if let Some(c) = step_cursors.into_iter().flatten().next() {
        streams[0].spare = Some(c);
    }
    let control = crate::control::control_for(cfg, &base, hooks.self_fence_us);
    let stats = Arc::new(ControlStats::default());
    let [fs_a, fs_b]: [Consumer<(u64, u64)>; 2] =
        fs_c.try_into().unwrap_or_else(|_| unreachable!("two"));
    let signer = signer.unwrap_or_else(|| crate::signer::SlicedSigner::new(&cfg.seq_key));
    let hasher = OrderHasher::with_signer(cfg, base.prev_header_hash, signer);
    let seq_public = hasher.public();
    let mut tiles: Vec<Box<dyn Task>> = Vec::new();
    for t in lanes {
        tiles.push(Box::new(t));
    }
    tiles.push(Box::new(CutTile::at(lay, &base.prev_cut, words.clone())));
    tiles.push(Box::new(BboTile {
        bbo,
        fwd: ends.fwd_c,
        ports: BboPorts::new(step_w, ends.ev_p),
        ctl: ctl_c,
        cut: base.prev_cut.clone(),
        words: words.clone(),
        published: base.prev_step(),
    }));
    for s in streams {
        tiles.push(Box::new(s));
    }
    tiles.push(Box::new(TxTile {
        tx: ends.tx_c,
        words: words.clone(),
        out: Out::new(wire(WireFor::Tx), words.clone()),
    }));
    let (hq_p, hq_c) = spsc::channel(256);
    tiles.push(Box::new(HasherTile {
        reqs: hq_c,
        words: words.clone(),
        reply: hooks.hash_reply,
        hasher,
        ports: HasherPorts {
            hash32: ends.h32_c,
            next: 0,
            closed: cl_c,
            headers: Outq::new(hd_p),
        },
    }));
    tiles.push(Box::new(ControlTile {
        control,
        ports: ControlPorts {
            step: c_ctl,
            frame_steps: [fs_a, fs_b],
            words: words.clone(),
            out: Out::new(wire(WireFor::Control), words.clone()),
        },
        inbox: in_c,
        votes: vote_c,
        req: Outq::new(ctl_p),
        stats: stats.clone(),
    }));
    (
        BoxTiles { tiles, knobs },
        BoxHandles {
            rx: ends.rx_p,
            ctrl: in_p,
            votes: vote_p,
            nacks: nack_p,
            hash_reqs: hq_p,
            words,
            control: stats,
            seq_public,
            seq_data_asks: ends.ask_p,
            seq_data_answers: ends.answer_c,
            retain: retain_stats,
        },
    )
}

impl CutTile {
    /// The cut core of a tenure starting at `bounds` (published by [`Words::at`] as store 1
    /// when any is above 0, so the next store is 2).
    fn at(lay: vyrn_wire::layout::Layout, bounds: &[u64], words: Arc<Words>) -> Self {
        let mut cut = CutCore::new(lay, 0);
        cut.set(bounds);
        CutTile {
            cut,
            words,
            version: u64::from(bounds.iter().any(|&b| b > 0)),
        }
    }
}
