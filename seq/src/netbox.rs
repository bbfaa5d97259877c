//! The threaded box on its UDP ports (issue 4 item 6; missing-chapters §4–§5): the tiles of
//! [`crate::threaded`] plus two I/O tiles —
//!
//! * **RX**: the client port(s). `dev`: one port for every lane, packets sent to their
//!   session's lane ring. `ref`: lane `l` listens on `client_port + l` (the NIC's flow filter,
//!   UDP port = lane); a packet on the wrong lane's port is dropped and counted. Each session's
//!   address is learned from its packets (read by whichever tile answers it).
//! * **control RX**: the control port — RepAcks from registered voters, NACKs (to the stream
//!   core of their substream, which answers NackTooOld itself), `REP_FinalityCert`s checked
//!   against the voters' keys (each valid entry a finalize vote).
//!
//! Each stream core owns its own sender on each replication path (`PathPair`: write A, write B,
//! fence, then `released[H]`); lanes, TX and control send responses and notices from a clone of
//! the client socket; control sends `REP_DurableMark` (07 §6.9) to the voters' control
//! addresses.

use crate::boxcfg::{BoxConfig, Profile};
use crate::home::FrameInfo;
use crate::net::{PathsRx, PATH_GROUPS};
use crate::threaded::{
    self, BoxHandles, Clock, CtrlIn, Group, NackReply, NackReq, Runner, RxPkt, Task, Wire, WireFor,
};
use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, SocketAddrV4, UdpSocket};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use vyrn_engine::Gate;
use vyrn_nic::pair::{PathMark, PathPair};
use vyrn_nic::udp::{UdpConfig, UdpPort};
use vyrn_nic::{Dest, NicError, Port, RxBatch};
use vyrn_rings::spsc::Producer;

/// Counters of the box's ports (each written by one tile; read by anyone).
#[derive(Debug, Default)]
pub struct NetStats {
    /// Client packets received.
    pub rx_client: AtomicU64,
    /// Client packets naming no session of this box (or too short to name one).
    pub rx_unknown: AtomicU64,
    /// Client packets longer than any request (`REQ_MAX_LEN`): dropped before a lane.
    pub rx_too_long: AtomicU64,
    /// Client datagrams longer than the receive slot, dropped by the port (`rx_truncated`).
    pub rx_truncated: AtomicU64,
    /// `ref`: packets on another lane's port.
    pub rx_wrong_port: AtomicU64,
    /// Packets dropped because their lane's receive ring was full (the client resends).
    pub rx_full: AtomicU64,
    /// Frames written to both paths.
    pub frames: AtomicU64,
    /// Frames a path refused after retries.
    pub frame_errors: AtomicU64,
    /// Responses and notices sent.
    pub responses: AtomicU64,
    /// Responses to a session whose address is not known yet.
    pub no_addr: AtomicU64,
    /// Control messages taken: RepAck, Nack, FinalityCert.
    pub ctrl: [AtomicU64; 3],
    /// Control messages refused.
    pub ctrl_bad: AtomicU64,
    /// NackTooOld answers sent.
    pub too_old: AtomicU64,
    /// REP_DurableMark messages sent.
    pub durable_marks: AtomicU64,
    /// HashListReq taken (from registered voters).
    pub hash_list_reqs: AtomicU64,
    /// HashList parts sent.
    pub hash_list_parts: AtomicU64,
}

fn bump(c: &AtomicU64) {
    c.fetch_add(1, Ordering::Relaxed);
}

/// Each session's last source address: written by the RX tile, read by the tiles that answer.
#[derive(Debug)]
pub struct SessionAddrs {
    index: HashMap<u32, usize>,
    v: Vec<AtomicU64>,
}

impl SessionAddrs {
    fn new(sessions: impl Iterator<Item = u32>) -> Self {
        let index: HashMap<u32, usize> = sessions.enumerate().map(|(i, s)| (s, i)).collect();
        let v = (0..index.len()).map(|_| AtomicU64::new(0)).collect();
        SessionAddrs { index, v }
    }
    fn learn(&self, session: u32, a: SocketAddr) {
        if let (Some(&i), SocketAddr::V4(a)) = (self.index.get(&session), a) {
            let packed = (1u64 << 48) | (u64::from(u32::from(*a.ip())) << 16) | u64::from(a.port());
            self.v[i].store(packed, Ordering::Relaxed);
        }
    }
    fn get(&self, session: u32) -> Option<SocketAddr> {
        let p = self.v[*self.index.get(&session)?].load(Ordering::Relaxed);
        (p != 0).then(|| {
            SocketAddr::V4(SocketAddrV4::new(
                Ipv4Addr::from((p >> 16) as u32),
                p as u16,
            ))
        })
    }
}

/// Responses and notices from a clone of the client socket.
struct ClientWire {
    sock: UdpSocket,
    addrs: Arc<SessionAddrs>,
    stats: Arc<NetStats>,
    /// Control: where REP_DurableMark goes (the voters' control addresses), and from which socket.
    durable: Option<(UdpSocket, Vec<SocketAddr>, u32)>,
}

impl ClientWire {
    fn send(&mut self, session: u32, bytes: &[u8]) {
        match self.addrs.get(session) {
            Some(a) => {
                let _ = self.sock.send_to(bytes, a);
                bump(&self.stats.responses);
            }
            None => bump(&self.stats.no_addr),
        }
    }
}

impl Wire for ClientWire {
    fn frame(&mut self, _h: u8, _info: &FrameInfo, _bytes: &[u8]) {}
    fn resp(&mut self, session: u32, _gate: Gate, bytes: &[u8]) {
        self.send(session, bytes);
    }
    fn notice(&mut self, session: u32, bytes: &[u8]) {
        self.send(session, bytes);
    }
    fn durable(&mut self, step: u64, height: u64) {
        if let Some((sock, to, epoch)) = &self.durable {
            let m = vyrn_wire::msg::ctrl::RepDurableMark {
                epoch: *epoch,
                tenure: 0,
                step,
                height,
            };
            if let Ok(b) = m.to_bytes() {
                for a in to {
                    let _ = sock.send_to(&b, a);
                }
                bump(&self.stats.durable_marks);
            }
        }
    }
}

/// A stream core's two paths.
struct PathWire {
    paths: PathPair<UdpPort>,
    stats: Arc<NetStats>,
}

impl Wire for PathWire {
    fn frame(&mut self, _h: u8, _info: &FrameInfo, bytes: &[u8]) {
        // 07 §4.2: write A, write B, fence — the caller stores released[H] after this returns.
        match self.paths.write_and_fence(bytes, Dest::Default, 1000) {
            Ok(()) => bump(&self.stats.frames),
            Err(_) => bump(&self.stats.frame_errors),
        }
    }
    fn resp(&mut self, _session: u32, _gate: Gate, _bytes: &[u8]) {}
    fn notice(&mut self, _session: u32, _bytes: &[u8]) {}
}

/// The RX tile: client ports into the lanes' receive rings.
struct RxTile {
    socks: Vec<(UdpPort, Option<u8>)>,
    batch: RxBatch,
    lane_of: HashMap<u32, u8>,
    rx: Vec<Producer<RxPkt>>,
    addrs: Arc<SessionAddrs>,
    stats: Arc<NetStats>,
}

impl Task for RxTile {
    fn name(&self) -> String {
        "rx".into()
    }
    fn poll(&mut self, now: u64) -> bool {
        let mut busy = false;
        let mut truncated = 0;
        for (sock, port_lane) in &mut self.socks {
            let got = sock.recv_batch(&mut self.batch);
            truncated += sock.counters().rx_truncated;
            let Ok(n) = got else {
                continue;
            };
            if n == 0 {
                continue;
            }
            busy = true;
            for p in self.batch.iter() {
                bump(&self.stats.rx_client);
                let session = p
                    .data
                    .get(4..8)
                    .map(|s| u32::from_le_bytes([s[0], s[1], s[2], s[3]]));
                let lane = session.and_then(|s| self.lane_of.get(&s).copied());
                let (Some(session), Some(lane)) = (session, lane) else {
                    bump(&self.stats.rx_unknown);
                    continue;
                };
                if port_lane.is_some_and(|pl| pl != lane) {
                    bump(&self.stats.rx_wrong_port);
                    continue;
                }
                let Some(pkt) = RxPkt::new(now, p.data) else {
                    bump(&self.stats.rx_too_long);
                    continue;
                };
                if self.rx[lane as usize].push(pkt).is_err() {
                    bump(&self.stats.rx_full);
                    continue;
                }
                // The lane checks the tag; an address is only learned from a packet that names a
                // configured session (a forged one costs the client a resend, never a lost
                // response: responses are kept for resend).
                if let Some(src) = p.meta.src {
                    self.addrs.learn(session, src);
                }
            }
        }
        self.stats.rx_truncated.store(truncated, Ordering::Relaxed);
        busy
    }
}

/// The control-port tile.
struct CtrlRxTile {
    ctrl: UdpPort,
    batch: RxBatch,
    voters: HashMap<SocketAddr, usize>,
    keys: Vec<Option<ed25519_dalek::VerifyingKey>>,
    epoch: u32,
    /// Control's inbox: acks and votes are never dropped (a lost vote could stall finality).
    inbox: threaded::Outq<CtrlIn>,
    nacks: Vec<Producer<NackReq>>,
    hash_reqs: Producer<threaded::HashReq>,
    stats: Arc<NetStats>,
}

impl Task for CtrlRxTile {
    fn name(&self) -> String {
        "ctrl-rx".into()
    }
    fn poll(&mut self, now: u64) -> bool {
        use vyrn_wire::msg::ctrl::CtrlMsg;
        self.inbox.drain();
        let Ok(n) = self.ctrl.recv_batch(&mut self.batch) else {
            return false;
        };
        for p in self.batch.iter() {
            let src = p.meta.src;
            let voter = src.and_then(|a| self.voters.get(&a).copied());
            match (CtrlMsg::parse(p.data), voter) {
                (Ok(CtrlMsg::RepAck(a)), Some(v)) if a.epoch == self.epoch => {
                    bump(&self.stats.ctrl[0]);
                    self.inbox.push(CtrlIn::Ack {
                        voter: v,
                        contiguous: a.contiguous_frame_seq,
                        now,
                    });
                }
                (Ok(CtrlMsg::Nack(k)), Some(_)) => {
                    bump(&self.stats.ctrl[1]);
                    if let Some(q) = self.nacks.get_mut(k.stream as usize) {
                        let _ = q.push(NackReq {
                            from: k.from_seq,
                            to: k.to_seq,
                            now,
                            src,
                        });
                    }
                }
                (Ok(CtrlMsg::HashListReq(q)), Some(_)) => {
                    bump(&self.stats.hash_list_reqs);
                    if let Some(src) = src {
                        let _ = self.hash_reqs.push(threaded::HashReq {
                            height: q.height,
                            src,
                        });
                    }
                }
                (Ok(CtrlMsg::FinalityCert(c)), _) if c.epoch == self.epoch => {
                    let inbox = &mut self.inbox;
                    let all = crate::net::cert_votes(&c, &self.keys, |voter, height| {
                        inbox.push(CtrlIn::Vote { voter, height });
                    });
                    if all {
                        bump(&self.stats.ctrl[2]);
                    } else {
                        bump(&self.stats.ctrl_bad);
                    }
                }
                _ => bump(&self.stats.ctrl_bad),
            }
        }
        n > 0
    }
}

/// Sender sockets for `senders` stream cores on each of the two paths, and the receiving side
/// for the home's voters (loopback multicast, or unicast where multicast is unavailable).
pub fn open_paths_for(senders: usize) -> Result<(Vec<PathPair<UdpPort>>, PathsRx), NicError> {
    let ([ta, tb], [ra, rb], mc) = crate::net::open_path_sockets(PATH_GROUPS)?;
    let dest = [ra.local_addr()?, rb.local_addr()?];
    let sender = |i: usize| -> Result<UdpPort, NicError> {
        if mc {
            UdpPort::open(&UdpConfig::multicast_sender(PATH_GROUPS[i], dest[i].port()))
        } else {
            UdpPort::open(&UdpConfig::loopback().with_dest(dest[i]))
        }
    };
    let mut pairs = vec![PathPair::new(ta, tb, PathMark::VYRN)];
    for _ in 1..senders {
        pairs.push(PathPair::new(sender(0)?, sender(1)?, PathMark::VYRN));
    }
    let how = if mc {
        "loopback multicast 239.255.75.1 / 239.255.75.2"
    } else {
        "unicast 127.0.0.1"
    };
    Ok((pairs, PathsRx::new(ra, rb, how)))
}

/// How the tiles map to threads.
#[derive(Debug, Clone)]
pub enum CoreMap {
    /// `ref`: one thread per tile, pinned to these cores in tile order.
    PerTile(Vec<usize>),
    /// `dev`: this many threads, tiles dealt round-robin; pinned to `cores` if given.
    Shared {
        /// Threads.
        threads: usize,
        /// Cores to pin them to (empty: not pinned).
        cores: Vec<usize>,
    },
}

/// The box's ports, open, before its tiles start.
#[derive(Debug)]
pub struct NetBox {
    client: Vec<(UdpPort, Option<u8>)>,
    ctrl: UdpPort,
    voters: Vec<(SocketAddr, usize, ed25519_dalek::VerifyingKey)>,
}

/// A running box.
#[derive(Debug)]
pub struct RunningBox {
    /// The tile threads.
    pub runner: Runner,
    /// The lanes' rings, control's inbox, the gate words, control's watermarks.
    pub handles: BoxHandles,
    /// Port counters.
    pub stats: Arc<NetStats>,
    /// Where clients send (lane 0's port on `ref`).
    pub client_addr: SocketAddr,
}

impl NetBox {
    /// Open the client port(s) — one on `dev`, `client_port + l` for lane `l` on `ref` — and the
    /// control port.
    pub fn open(cfg: &BoxConfig, per_lane_ports: bool) -> Result<NetBox, NicError> {
        let lo = IpAddr::V4(Ipv4Addr::LOCALHOST);
        let open = |port: u16| -> Result<UdpPort, NicError> {
            let mut c = UdpConfig::new(SocketAddr::new(lo, port)).with_batch(64);
            c.recv_buffer = Some(8 << 20);
            UdpPort::open(&c)
        };
        let mut client = Vec::new();
        if per_lane_ports {
            for l in 0..cfg.engine.layout.n_lanes {
                let port = if cfg.client_port == 0 {
                    0
                } else {
                    cfg.client_port + l as u16
                };
                client.push((open(port)?, Some(l)));
            }
        } else {
            client.push((open(cfg.client_port)?, None));
        }
        Ok(NetBox {
            client,
            ctrl: open(cfg.ctrl_port)?,
            voters: Vec::new(),
        })
    }

    /// The control port's address.
    pub fn ctrl_addr(&self) -> Result<SocketAddr, NicError> {
        self.ctrl.local_addr()
    }

    /// Each lane's client address (one for all lanes on `dev`).
    pub fn client_addrs(&self) -> Vec<SocketAddr> {
        self.client
            .iter()
            .filter_map(|(s, _)| s.local_addr().ok())
            .collect()
    }

    /// A voter: its control address, index and public key (REP_Membership in a real home).
    pub fn register_voter(
        &mut self,
        addr: SocketAddr,
        index: usize,
        key: ed25519_dalek::VerifyingKey,
    ) {
        self.voters.push((addr, index, key));
    }

    /// Build the tiles and start them on `map`; returns the running box and the paths'
    /// receiving side for the home's voters.
    pub fn start(
        self,
        cfg: &BoxConfig,
        map: &CoreMap,
        clock: Clock,
    ) -> Result<(RunningBox, PathsRx), NicError> {
        let seq = cfg.seq_config();
        let e = &seq.engine;
        let stats = Arc::new(NetStats::default());
        let addrs = Arc::new(SessionAddrs::new(e.sessions.iter().map(|s| s.session)));
        let (paths, paths_rx) = open_paths_for(e.layout.n_streams as usize)?;
        let mut paths: Vec<Option<PathPair<UdpPort>>> = paths.into_iter().map(Some).collect();
        let client_sock = self.client[0].0.socket().try_clone().map_err(io_err)?;
        let ctrl_sock = self.ctrl.socket().try_clone().map_err(io_err)?;
        let voter_addrs: Vec<SocketAddr> = self.voters.iter().map(|v| v.0).collect();
        let mut err = None;
        let (tiles, handles) = threaded::build(
            &seq,
            cfg.self_fence_us,
            |w| -> Box<dyn Wire> {
                match w {
                    WireFor::Stream(h) => Box::new(PathWire {
                        paths: paths[h as usize].take().expect("one pair per stream core"),
                        stats: stats.clone(),
                    }),
                    WireFor::Lane(_) | WireFor::Tx | WireFor::Control => {
                        let sock = client_sock.try_clone();
                        let durable = if w == WireFor::Control {
                            ctrl_sock
                                .try_clone()
                                .ok()
                                .map(|s| (s, voter_addrs.clone(), seq.epoch))
                        } else {
                            None
                        };
                        match sock {
                            Ok(sock) => Box::new(ClientWire {
                                sock,
                                addrs: addrs.clone(),
                                stats: stats.clone(),
                                durable,
                            }),
                            Err(e) => {
                                err = Some(e);
                                Box::new(NullWire)
                            }
                        }
                    }
                }
            },
            |h| -> Option<NackReply> {
                let sock = ctrl_sock.try_clone().ok()?;
                let stats = stats.clone();
                let epoch = seq.epoch;
                Some(Box::new(
                    move |n: NackReq, out: crate::stream::NackOutcome| {
                        if let (Some(oldest), Some(src)) = (out.too_old, n.src) {
                            let m = vyrn_wire::msg::ctrl::NackTooOld {
                                epoch,
                                tenure: 0,
                                stream: h,
                                oldest_seq: oldest,
                            };
                            if let Ok(b) = m.to_bytes() {
                                let _ = sock.send_to(&b, src);
                                bump(&stats.too_old);
                            }
                        }
                    },
                ))
            },
            ctrl_sock.try_clone().ok().map(|sock| {
                let stats = stats.clone();
                Box::new(move |to: SocketAddr, b: &[u8]| {
                    let _ = sock.send_to(b, to);
                    bump(&stats.hash_list_parts);
                }) as threaded::HashReply
            }),
        );
        if let Some(e) = err {
            return Err(io_err(e));
        }
        let mut handles = handles;
        let mut keys = Vec::new();
        let mut voters = HashMap::new();
        for &(a, i, k) in &self.voters {
            voters.insert(a, i);
            if keys.len() <= i {
                keys.resize(i + 1, None);
            }
            keys[i] = Some(k);
        }
        let rx = std::mem::take(&mut handles.rx);
        let nacks = std::mem::take(&mut handles.nacks);
        let (hq, _) = vyrn_rings::spsc::channel(1);
        let hash_reqs = std::mem::replace(&mut handles.hash_reqs, hq);
        let (inbox, _) = vyrn_rings::spsc::channel(1);
        let inbox = std::mem::replace(&mut handles.ctrl, inbox);
        let client_addr = self.client[0].0.local_addr()?;
        let mut tasks = tiles.tiles;
        // No per-frame FrameInfo on the ports (it exists for the tests' invariant checks).
        for t in &mut tasks {
            t.set_track(false);
        }
        tasks.push(Box::new(RxTile {
            socks: self.client,
            batch: RxBatch::new(64, 256),
            lane_of: e.sessions.iter().map(|s| (s.session, s.lane)).collect(),
            rx,
            addrs,
            stats: stats.clone(),
        }));
        tasks.push(Box::new(CtrlRxTile {
            ctrl: self.ctrl,
            batch: RxBatch::new(64, 2048),
            voters,
            keys,
            epoch: seq.epoch,
            inbox: threaded::Outq::new(inbox),
            nacks,
            hash_reqs,
            stats: stats.clone(),
        }));
        let groups = plan(tasks, map);
        let runner = Runner::start(groups, clock);
        Ok((
            RunningBox {
                runner,
                handles,
                stats,
                client_addr,
            },
            paths_rx,
        ))
    }
}

fn io_err(e: std::io::Error) -> NicError {
    NicError::Io {
        op: "dup",
        errno: e.raw_os_error().unwrap_or(0),
    }
}

struct NullWire;

impl Wire for NullWire {
    fn frame(&mut self, _h: u8, _info: &FrameInfo, _bytes: &[u8]) {}
    fn resp(&mut self, _session: u32, _gate: Gate, _bytes: &[u8]) {}
    fn notice(&mut self, _session: u32, _bytes: &[u8]) {}
}

/// Tiles to threads per the core map.
pub fn plan(tasks: Vec<Box<dyn Task>>, map: &CoreMap) -> Vec<Group> {
    let tiles = threaded::BoxTiles { tiles: tasks };
    match map {
        CoreMap::PerTile(cores) => threaded::groups(tiles, cores, true, 0),
        CoreMap::Shared { threads, cores } => threaded::groups(tiles, cores, false, *threads),
    }
}

/// The core map a config asks for: `ref` pins one tile per core of `core_map`; `dev` and
/// `consumer` multiplex the tiles on `core_map.len()` threads (not pinned: a dev box shares
/// its cores with the clients and voters of the home).
pub fn core_map_of(cfg: &BoxConfig) -> CoreMap {
    match cfg.profile {
        Profile::Ref => CoreMap::PerTile(cfg.core_map.clone()),
        _ => CoreMap::Shared {
            threads: cfg.core_map.len().max(1),
            cores: Vec::new(),
        },
    }
}
