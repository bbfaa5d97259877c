//! Test support (feature `testkit`, out of the default build): the one-thread harness
//! [`SimBox`] — the production tiles of [`crate::tiles`] driven by the seeded scheduler of
//! [`crate::runner::Seeded`], every write logged in the order it happened, the replication
//! paths failable on demand — the wire-order invariant checker ([`check`]), and the voter
//! doubles ([`VoterDouble`], [`doubles`]) that stand in for the replicas until they exist.

pub mod alloc;
pub mod capture;
pub mod check;
pub mod doubles;
mod voter;

pub use voter::VoterDouble;

use crate::control::ControlCounters;
use crate::mem::PathWrite;
use crate::runner::Seeded;
use crate::shm::{FrameInfo, HashLists, SeqConfig};
use crate::stream::{GateMode, NackOutcome};
use crate::tiles::{self, BoxHandles, CtrlIn, HashReq, NackReq, RxPkt, Wire, Words};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, MutexGuard};
use vyrn_engine::Gate;

/// One write to the wire, in the order it happened.
#[derive(Debug, Clone)]
pub enum WireEvent {
    /// A frame written on one replication path.
    Frame {
        /// What it holds.
        info: FrameInfo,
        /// Its bytes.
        bytes: Vec<u8>,
        /// The path (0: A, 1: B).
        path: u8,
    },
    /// A stream core raised (`down`) or cleared REP_A_PATH for one of its paths.
    PathAlarm {
        /// Substream.
        stream: u8,
        /// Path.
        path: u8,
        /// Raised or cleared.
        down: bool,
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
    /// `REP_DurableMark{step, height}` raised by control (07 §6.9).
    DurableMark {
        /// Step.
        step: u64,
        /// Height.
        height: u64,
    },
    /// An address learned for a session (from a packet whose tag verified).
    Learn {
        /// Session.
        session: u32,
        /// Address.
        src: SocketAddr,
    },
}

/// How a test path answers writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PathMode {
    /// Every write is taken.
    #[default]
    Up,
    /// Every write pushes back (a full queue).
    Busy,
    /// Every write is refused (the link is gone).
    Failed,
}

/// A wire that logs every write into one shared log, and whose replication paths a test can
/// make push back or fail, per substream and path.
#[derive(Clone, Default)]
pub struct LogWire {
    log: Arc<Mutex<Vec<WireEvent>>>,
    modes: Arc<Mutex<[[PathMode; 2]; 2]>>,
    /// Frames taken but not logged (benchmarks, allocation tests).
    quiet: Arc<std::sync::atomic::AtomicBool>,
    /// Per session: the newest StepId of a step-gated response (what control's notices follow).
    steps: Arc<Mutex<std::collections::HashMap<u32, u64>>>,
}

impl std::fmt::Debug for LogWire {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LogWire")
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl LogWire {
    /// The log.
    pub fn log(&self) -> MutexGuard<'_, Vec<WireEvent>> {
        lock(&self.log)
    }
    /// Make path `path` of substream `h` answer every write with `mode`.
    pub fn set_path(&self, h: u8, path: u8, mode: PathMode) {
        lock(&self.modes)[h as usize & 1][path as usize & 1] = mode;
    }
    fn push(&self, e: WireEvent) {
        lock(&self.log).push(e);
    }
}

impl Wire for LogWire {
    fn frame_on(&mut self, h: u8, path: u8, info: &FrameInfo, bytes: &[u8]) -> PathWrite {
        let mode = lock(&self.modes)[h as usize & 1][path as usize & 1];
        match mode {
            PathMode::Up if self.quiet.load(Ordering::Relaxed) => PathWrite::Done,
            PathMode::Up => {
                self.push(WireEvent::Frame {
                    info: info.clone(),
                    bytes: bytes.to_vec(),
                    path,
                });
                PathWrite::Done
            }
            PathMode::Busy => PathWrite::Busy,
            PathMode::Failed => PathWrite::Failed,
        }
    }
    fn path_alarm(&mut self, h: u8, path: u8, down: bool) {
        self.push(WireEvent::PathAlarm {
            stream: h,
            path,
            down,
        });
    }
    fn session_step(&self, session: u32) -> u64 {
        lock(&self.steps).get(&session).copied().unwrap_or(0)
    }
    fn resp(&mut self, session: u32, gate: Gate, bytes: &[u8]) {
        if let Gate::Step { step, .. } = gate {
            let mut m = lock(&self.steps);
            let e = m.entry(session).or_insert(0);
            *e = (*e).max(step);
        }
        self.push(WireEvent::Resp {
            session,
            gate,
            bytes: bytes.to_vec(),
        });
    }
    fn notice(&mut self, session: u32, bytes: &[u8]) {
        self.push(WireEvent::Notice {
            session,
            bytes: bytes.to_vec(),
        });
    }
    fn learn(&mut self, session: u32, src: SocketAddr) {
        self.push(WireEvent::Learn { session, src });
    }
    fn learn_first(&mut self, session: u32, src: SocketAddr) {
        let known = self
            .log()
            .iter()
            .any(|e| matches!(e, WireEvent::Learn { session: s, .. } if *s == session));
        if !known {
            self.push(WireEvent::Learn { session, src });
        }
    }
    fn durable(&mut self, step: u64, height: u64) {
        self.push(WireEvent::DurableMark { step, height });
    }
}

/// The tiles of a box, as a test names them.
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
    /// The order hasher.
    Hasher,
    /// Control.
    Control,
}

impl Tile {
    /// The tile's name as [`crate::runner::Task::name`] gives it.
    pub fn name(self) -> String {
        match self {
            Tile::Lane(l) => format!("lane{l}"),
            Tile::Cut => "cut".into(),
            Tile::Bbo => "bbo".into(),
            Tile::Stream(h) => format!("stream{}", (b'A' + h) as char),
            Tile::Tx => "tx".into(),
            Tile::Hasher => "hasher".into(),
            Tile::Control => "control".into(),
        }
    }
}

/// A whole box on the calling thread: the production tiles under the seeded scheduler, every
/// write logged, the paths failable.
pub struct SimBox {
    cfg: SeqConfig,
    /// The scheduler and its tiles.
    pub sched: Seeded,
    /// The box's rings and words, as the ports would hold them.
    pub handles: BoxHandles,
    wire: LogWire,
    tiles: Vec<Tile>,
    index: Vec<usize>,
    lane_of: HashMap<u32, u8>,
    nack_out: Arc<Mutex<Vec<NackOutcome>>>,
    hash_parts: Arc<Mutex<Vec<Vec<u8>>>>,
    /// The stream cores' settings (`tiles::StreamKnobs`).
    knobs: Arc<tiles::StreamKnobs>,
}

impl std::fmt::Debug for SimBox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SimBox({:?})", self.sched)
    }
}

impl SimBox {
    /// A box at the start of a tenure, scheduler seed 0.
    pub fn new(cfg: SeqConfig) -> Self {
        Self::build(cfg, None, 0)
    }

    /// A box with a self-fence window of `self_fence_us` (None: REP_SELF_FENCE_US) and a
    /// scheduler drawing from `seed`.
    pub fn build(cfg: SeqConfig, self_fence_us: Option<u64>, seed: u64) -> Self {
        Self::build_at(cfg, None, self_fence_us, seed)
    }

    /// A promoted standby's box (07 §9.5): its tenure (`cfg.tenure`) starts after the seal,
    /// from the engine `t` hands over; otherwise as [`SimBox::build`].
    /// A warm standby passes the memory it built at start (`reserve`, [`tiles::Reserve`]).
    pub fn takeover(
        cfg: SeqConfig,
        t: crate::takeover::Takeover,
        reserve: Option<tiles::Reserve>,
        self_fence_us: Option<u64>,
        seed: u64,
    ) -> Self {
        Self::build_at(cfg, Some((t, reserve)), self_fence_us, seed)
    }

    fn build_at(
        cfg: SeqConfig,
        t: Option<(crate::takeover::Takeover, Option<tiles::Reserve>)>,
        self_fence_us: Option<u64>,
        seed: u64,
    ) -> Self {
        let wire = LogWire::default();
        let nack_out: Arc<Mutex<Vec<NackOutcome>>> = Arc::default();
        let hash_parts: Arc<Mutex<Vec<Vec<u8>>>> = Arc::default();
        let no = nack_out.clone();
        let hp = hash_parts.clone();
        let w = wire.clone();
        let mk_wire = move |_| Box::new(w.clone()) as Box<dyn Wire>;
        let nack = move |_| {
            let no = no.clone();
            Some(tiles::NackReply {
                resend: None,
                answer: Box::new(move |_n: NackReq, out: NackOutcome| {
                    lock(&no).push(out);
                }),
            })
        };
        let hash: Option<tiles::HashReply> = Some(Box::new(move |_to: SocketAddr, b: &[u8]| {
            lock(&hp).push(b.to_vec());
        }));
        let (tiles, handles) = match t {
            Some((t, r)) => tiles::build_takeover(&cfg, t, r, self_fence_us, mk_wire, nack, hash),
            None => tiles::build(&cfg, self_fence_us, mk_wire, nack, hash),
        };
        let knobs = tiles.knobs.clone();
        let tasks = tiles.tiles;
        let names: Vec<String> = tasks.iter().map(|t| t.name()).collect();
        let e = &cfg.engine;
        let mut named: Vec<Tile> = (0..e.layout.n_lanes).map(Tile::Lane).collect();
        named.push(Tile::Cut);
        named.push(Tile::Bbo);
        named.extend((0..e.layout.n_streams).map(Tile::Stream));
        named.extend([Tile::Tx, Tile::Hasher, Tile::Control]);
        let index = named
            .iter()
            .map(|t| {
                let n = t.name();
                names
                    .iter()
                    .position(|m| *m == n)
                    .expect("every tile is built")
            })
            .collect();
        SimBox {
            lane_of: e.sessions.iter().map(|s| (s.session, s.lane)).collect(),
            cfg,
            sched: Seeded::new(tasks, seed),
            knobs,
            handles,
            wire,
            tiles: named,
            index,
            nack_out,
            hash_parts,
        }
    }

    /// The configuration.
    pub fn config(&self) -> &SeqConfig {
        &self.cfg
    }

    /// Every tile, in build order.
    pub fn tiles(&self) -> Vec<Tile> {
        self.tiles.clone()
    }

    /// The gate words.
    pub fn words(&self) -> &Words {
        &self.handles.words
    }

    /// The log wire (to fail paths, or read the log).
    pub fn wire(&self) -> &LogWire {
        &self.wire
    }

    /// The log so far.
    pub fn log(&self) -> MutexGuard<'_, Vec<WireEvent>> {
        self.wire.log()
    }

    /// Take the log written so far.
    pub fn drain_wire(&mut self) -> Vec<WireEvent> {
        std::mem::take(&mut *self.wire.log())
    }

    /// Poll one tile at `now`. Returns whether it did anything.
    pub fn poll(&mut self, tile: Tile, now: u64) -> bool {
        match self.tiles.iter().position(|t| *t == tile) {
            Some(i) => self.sched.poll(self.index[i], now),
            None => false,
        }
    }

    /// Break every stream core's gate on purpose.
    pub fn set_gate_mode(&mut self, m: GateMode) {
        self.knobs.set_gate_mode(m);
    }

    /// Log frames (and keep a `FrameInfo` per frame in the stream cores), or only count them
    /// as the box on its ports does (benchmarks, allocation tests).
    pub fn set_log_frames(&mut self, on: bool) {
        self.wire.quiet.store(!on, Ordering::Relaxed);
        self.knobs.set_track(on);
    }

    /// A packet arrives at `rx_ts` from `src` on its lane's port (the NIC flow filter routes by
    /// session). False if no lane serves its session or its lane's ring is full.
    pub fn receive_from(&mut self, rx_ts: u64, bytes: &[u8], src: Option<SocketAddr>) -> bool {
        let Some(lane) = tiles::session_of(bytes).and_then(|s| self.lane_of.get(&s).copied())
        else {
            return false;
        };
        let Some(mut p) = RxPkt::new(rx_ts, bytes) else {
            return false;
        };
        p.src = src;
        self.handles.rx[lane as usize].push(p).is_ok()
    }

    /// A packet arrives at `rx_ts` (no source address).
    pub fn receive(&mut self, rx_ts: u64, bytes: Vec<u8>) -> bool {
        self.receive_from(rx_ts, &bytes, None)
    }

    /// Packets received and not yet taken by their lane.
    pub fn rx_backlog(&self) -> usize {
        self.handles
            .rx
            .iter()
            .map(|p| p.capacity() - p.free())
            .sum()
    }

    /// Round-robin every tile until nothing moves (at most `max_rounds` rounds).
    pub fn settle(&mut self, now: u64, max_rounds: usize) {
        for _ in 0..max_rounds {
            let mut busy = false;
            for t in &mut self.sched.tasks {
                busy |= t.poll(now);
            }
            if !busy && self.rx_backlog() == 0 {
                break;
            }
        }
    }

    /// A voter's RepAck (07 §4.8), as the control-port tile hands it to control.
    pub fn on_ack(&mut self, voter: usize, contiguous: [u64; 2], now: u64) {
        let _ = self.handles.ctrl.push(CtrlIn::Ack {
            voter,
            contiguous,
            now,
        });
    }

    /// A voter's finalize vote (07 §6.8), as the certificate tile hands it to control.
    pub fn on_vote(&mut self, voter: usize, height: u64) {
        let _ = self.handles.votes.push(CtrlIn::Vote { voter, height });
    }

    /// A voter's `Diverge` (07 §7.4), as the control-port tile hands it to control.
    pub fn on_diverge(&mut self, voter: usize, index: u64) {
        let _ = self.handles.ctrl.push(CtrlIn::Diverge { voter, index });
    }

    /// A NACK for frames `from..=to` of substream `stream` (07 §4.10), served by its stream
    /// core's next poll at `now`; what it got.
    pub fn on_nack(&mut self, stream: u8, from: u64, to: u64, now: u64) -> NackOutcome {
        let Some(q) = self.handles.nacks.get_mut(stream as usize) else {
            return NackOutcome::default();
        };
        let _ = q.push(NackReq {
            from,
            to,
            now,
            src: None,
        });
        lock(&self.nack_out).clear();
        self.poll(Tile::Stream(stream), now);
        lock(&self.nack_out).pop().unwrap_or_default()
    }

    /// Control's state: (durable step, final height, counters).
    pub fn watermarks(&self) -> (u64, u64, ControlCounters) {
        let c = &self.handles.control;
        let r = Ordering::Relaxed;
        (
            c.durable.load(r),
            c.final_height.load(r),
            ControlCounters {
                durable_notices: c.durable_notices.load(r),
                final_notices: c.final_notices.load(r),
                gate_halts: c.gate_halts.load(r),
                gate_resumes: c.gate_resumes.load(r),
                notice_packets: c.notice_packets.load(r),
                diverge_msgs: c.diverge_msgs.load(r),
                diverge_halts: c.diverge_halts.load(r),
            },
        )
    }

    /// Closed heights so far, as control has seen them.
    pub fn closed_height(&self) -> u64 {
        self.handles.control.closed_height.load(Ordering::Relaxed)
    }

    /// Block `height`'s full-hash lists, asked of the order hasher the way a voter asks
    /// (HashListReq, answered with HashList parts) at `now`; None if it no longer keeps them.
    pub fn hash_list(&mut self, height: u64, now: u64) -> Option<HashLists> {
        use vyrn_wire::msg::ctrl::{CtrlMsg, HashList};
        lock(&self.hash_parts).clear();
        let src = SocketAddr::from(([127, 0, 0, 1], 9));
        self.handles.hash_reqs.push(HashReq { height, src }).ok()?;
        self.poll(Tile::Hasher, now);
        let parts: Vec<HashList> = lock(&self.hash_parts)
            .iter()
            .filter_map(|b| match CtrlMsg::parse(b) {
                Ok(CtrlMsg::HashList(l)) => Some(l),
                _ => None,
            })
            .collect();
        if parts.is_empty() {
            return None;
        }
        let mut lists: HashLists = Default::default();
        for p in parts {
            if let Some(l) = lists.get_mut(p.stream as usize) {
                l.extend_from_slice(&p.hashes);
            }
        }
        Some(lists)
    }

    /// The sequencer's verifying key.
    pub fn seq_public(&self) -> ed25519_dalek::VerifyingKey {
        self.handles.seq_public
    }

    /// Frames written on substream `h` as path A carried them, in order.
    pub fn frames(&self, h: u8) -> Vec<Vec<u8>> {
        frames_of(&self.log(), h, 0)
    }
}

/// The frames of substream `h` written on path `path` among `log`'s events, in order.
pub fn frames_of(log: &[WireEvent], h: u8, path: u8) -> Vec<Vec<u8>> {
    log.iter()
        .filter_map(|e| match e {
            WireEvent::Frame {
                info,
                bytes,
                path: p,
            } if info.stream == h && *p == path => Some(bytes.clone()),
            _ => None,
        })
        .collect()
}

/// Every frame among `log`'s events as path A carried it, any substream, in order.
pub fn frames_in(log: &[WireEvent]) -> Vec<Vec<u8>> {
    log.iter()
        .filter_map(|e| match e {
            WireEvent::Frame { bytes, path: 0, .. } => Some(bytes.clone()),
            _ => None,
        })
        .collect()
}
