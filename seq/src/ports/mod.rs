//! The box on its UDP ports (07 §3.1, §4.1; missing-chapters §4–§5): the tiles of
//! [`crate::tiles`] plus three I/O tiles —
//!
//! * **RX**: the client port(s). `dev`: one port for every lane, packets sent to their
//!   session's lane ring. `ref`: lane `l` listens on `client_port + l` (the NIC's flow filter,
//!   UDP port = lane); a packet on the wrong lane's port is dropped and counted. The RX tile
//!   never learns an address: the lane does, from a packet whose tag verified and that is
//!   fresh ([`crate::tiles::Wire::learn`]), so a forged packet moves nothing.
//! * **control RX**: the control port — RepAcks from registered voters (timestamped here, on a
//!   tile that does nothing slow), NACKs (to the stream core of their substream, which answers
//!   NackTooOld itself), HashListReq, and `REP_FinalityCert`s from registered voters, handed
//!   under a per-source rate limit to a bounded ring for —
//! * **cert**: a cold tile that checks each certificate's signatures (one batch verification,
//!   07 §6.5) and turns each valid entry into a finalize vote for control. Junk on the control
//!   port can cost this tile time, never the acks' timestamps.
//!
//! Each stream core owns its own sender on each replication path and writes each frame on A and
//! B separately ([`PathWire`]); lanes, TX and control send responses and notices from a clone of
//! the client socket; control sends `REP_DurableMark` (07 §6.9) to the voters' control
//! addresses.

use crate::boxcfg::{BoxConfig, Profile, SeqConfigOf};
use crate::mem::PathWrite;
use crate::runner::{Clock, Group, Runner, Task};
use crate::shm::FrameInfo;
use crate::shm::SeqConfig;
use crate::shm::TenureId;
use crate::takeover::Takeover;
use crate::tiles::{self, BoxHandles, CtrlIn, NackReply, NackReq, RxPkt, Wire, WireFor};
use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, SocketAddrV4};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use vyrn_engine::Gate;
use vyrn_nic::pair::{Path, PathMark, PathPair};
use vyrn_nic::udp::{UdpConfig, UdpPort};
use vyrn_nic::{Dest, NicError, Port, RxBatch, TxPacket};
use vyrn_rings::spsc::Consumer;
use vyrn_rings::spsc::Producer;
use vyrn_wire::msg::seal::{self, LinkKey, Opener, SealErr, Sealer};

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
    /// Client datagrams the kernel dropped because the client socket's receive buffer was full
    /// (`SO_RXQ_OVFL`): a burst larger than the buffer (clients resending at once).
    pub rx_kernel_dropped: AtomicU64,
    /// `ref`: packets on another lane's port.
    pub rx_wrong_port: AtomicU64,
    /// Packets dropped because their lane's receive ring was full (the client resends).
    pub rx_full: AtomicU64,
    /// Fences after frame writes (one per release, or per batch of frames written together);
    /// frames themselves are `path_writes` per path and `Words::gate[h].frames`.
    pub fences: AtomicU64,
    /// Path flushes that failed with a hard error (not backpressure), per path: what was queued
    /// on that path did not go out.
    pub fence_errors: [AtomicU64; 2],
    /// Frame writes a path refused (an error, not backpressure).
    pub frame_errors: AtomicU64,
    /// Frame writes queued, per path (A, B).
    pub path_writes: [AtomicU64; 2],
    /// REP_A_PATH raised (times).
    pub path_alarms: AtomicU64,
    /// Responses and notices sent.
    pub responses: AtomicU64,
    /// Responses to a session whose address is not known yet.
    pub no_addr: AtomicU64,
    /// Responses and notices the kernel refused (full socket buffer): dropped, the client
    /// resends.
    pub tx_dropped: AtomicU64,
    /// Control messages taken: RepAck, Nack, FinalityCert.
    pub ctrl: [AtomicU64; 3],
    /// Control messages refused: unparseable, another epoch, a RepAck or NACK of another
    /// tenure (07 §2.2), or a certificate whose signatures do not check.
    pub ctrl_bad: AtomicU64,
    /// Finalize signatures that failed the finality listener's batch check (07 §6.8).
    pub bad_sigs: AtomicU64,
    /// Control datagrams longer than the receive slot, dropped by the port.
    pub ctrl_truncated: AtomicU64,
    /// Control datagrams from an address that is no registered voter (dropped unread).
    pub ctrl_unknown: AtomicU64,
    /// Control datagrams from a voter's address that came bare: every voter message must come
    /// in the member envelope (dropped unread).
    pub ctrl_unsealed: AtomicU64,
    /// Sealed control datagrams refused: a tag that does not verify under the voter's link key,
    /// another sender's id, or a replayed sequence number.
    pub ctrl_bad_seal: AtomicU64,
    /// 07 §5.2: `DataBadMac{session, pkt_seq}` reports from the data boxes (sealed by one): a
    /// client sent copy 2 with a bad tag.
    pub data_bad_mac: AtomicU64,
    /// 07 §5.2: `CopyConflict` reports (client equivocation: two copies of one packet).
    pub copy_conflicts: AtomicU64,
    /// NACKs dropped on the control-receive tile: their voter used its share of REP_RTX_MAX_FPS
    /// (the voter NACKs again).
    pub nacks_over_share: AtomicU64,
    /// The evidence frames that go with them (both packets).
    pub conflict_evidence: AtomicU64,
    /// Control messages dropped at a full inbox or over a source's rate (the sender repeats).
    pub ctrl_dropped: AtomicU64,
    /// NackTooOld answers sent.
    pub too_old: AtomicU64,
    /// Frames retransmitted unicast to a NACK's sender (07 §4.10).
    pub rtx_unicast: AtomicU64,
    /// `SeqDataReq`s taken from registered voters (07 §5.5 source 3).
    pub seq_data_reqs: AtomicU64,
    /// `SeqData` answers sent.
    pub seq_data_sent: AtomicU64,
    /// Retransmissions the control socket refused (the sender NACKs them again).
    pub rtx_unicast_failed: AtomicU64,
    /// REP_DurableMark messages sent.
    pub durable_marks: AtomicU64,
    /// HashListReq taken (from registered voters).
    pub hash_list_reqs: AtomicU64,
    /// `Diverge` messages taken (from registered voters, 07 §7.4).
    pub diverge_msgs: AtomicU64,
    /// `Diverge` messages whose evidence did not check (no halt; security review F3).
    pub diverge_refused: AtomicU64,
    /// Timeout `Diverge`s from fewer than f + 1 voters so far (no halt yet).
    pub diverge_pending: AtomicU64,
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
    /// Per session: the newest StepId of a step-gated response sent to it (control's notices
    /// go only to sessions with something to attest).
    steps: Vec<AtomicU64>,
}

impl SessionAddrs {
    fn new(sessions: impl Iterator<Item = u32>) -> Self {
        let index: HashMap<u32, usize> = sessions.enumerate().map(|(i, s)| (s, i)).collect();
        let v = (0..index.len()).map(|_| AtomicU64::new(0)).collect();
        let steps = (0..index.len()).map(|_| AtomicU64::new(0)).collect();
        SessionAddrs { index, v, steps }
    }
    fn note_step(&self, session: u32, step: u64) {
        if let Some(&i) = self.index.get(&session) {
            self.steps[i].fetch_max(step, Ordering::Relaxed);
        }
    }
    fn step(&self, session: u32) -> u64 {
        self.index
            .get(&session)
            .map_or(0, |&i| self.steps[i].load(Ordering::Relaxed))
    }
    fn learn(&self, session: u32, a: SocketAddr) {
        if let (Some(&i), SocketAddr::V4(a)) = (self.index.get(&session), a) {
            let packed = (1u64 << 48) | (u64::from(u32::from(*a.ip())) << 16) | u64::from(a.port());
            self.v[i].store(packed, Ordering::Relaxed);
        }
    }
    /// Learn `a` only while `session` has no address.
    fn learn_first(&self, session: u32, a: SocketAddr) {
        if let (Some(&i), SocketAddr::V4(a)) = (self.index.get(&session), a) {
            let packed = (1u64 << 48) | (u64::from(u32::from(*a.ip())) << 16) | u64::from(a.port());
            let _ = self.v[i].compare_exchange(0, packed, Ordering::Relaxed, Ordering::Relaxed);
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

/// Responses and notices a tile batches per `sendmmsg` (no syscall per message).
pub const TX_BATCH: usize = 64;

/// Responses and notices from a clone of the client socket, batched: a tile's poll queues them
/// (bytes copied into one arena, no allocation once warm) and its end sends them with one
/// `sendmmsg` per [`TX_BATCH`] ([`Wire::flush`]).
struct ClientWire {
    port: UdpPort,
    addrs: Arc<SessionAddrs>,
    stats: Arc<NetStats>,
    /// Control: where REP_DurableMark goes (the voters' control addresses), and from which socket.
    durable: Option<(UdpPort, Vec<SocketAddr>, u32, u8)>,
    /// Queued messages' bytes, back to back.
    arena: Vec<u8>,
    /// Queued messages: offset and length in `arena`, destination.
    pend: Vec<(usize, usize, SocketAddr)>,
}

impl ClientWire {
    fn new(
        port: UdpPort,
        addrs: Arc<SessionAddrs>,
        stats: Arc<NetStats>,
        durable: Option<(UdpPort, Vec<SocketAddr>, u32, u8)>,
    ) -> Self {
        ClientWire {
            port,
            addrs,
            stats,
            durable,
            arena: Vec::with_capacity(TX_BATCH * 256),
            pend: Vec::with_capacity(TX_BATCH),
        }
    }

    fn send(&mut self, session: u32, bytes: &[u8]) {
        match self.addrs.get(session) {
            Some(a) => {
                if self.pend.len() == TX_BATCH {
                    self.send_queued();
                }
                let off = self.arena.len();
                self.arena.extend_from_slice(bytes);
                self.pend.push((off, bytes.len(), a));
            }
            None => bump(&self.stats.no_addr),
        }
    }

    /// Everything queued, `TX_BATCH` per `sendmmsg`. A datagram the kernel refuses (a full
    /// socket buffer, an address it cannot reach) is dropped and counted (`tx_dropped`): the
    /// client's resend brings it again (07 §9.5).
    fn send_queued(&mut self) {
        let mut i = 0;
        while i < self.pend.len() {
            let n = (self.pend.len() - i).min(TX_BATCH);
            let mut pk = [TxPacket::new(&[]); TX_BATCH];
            for (d, &(o, l, a)) in pk.iter_mut().zip(&self.pend[i..i + n]) {
                *d = TxPacket::to(&self.arena[o..o + l], Dest::Addr(a));
            }
            match self.port.send_batch(&pk[..n]) {
                Ok(k) => {
                    self.stats.responses.fetch_add(k as u64, Ordering::Relaxed);
                    i += k;
                    if k < n {
                        bump(&self.stats.tx_dropped);
                        i += 1;
                    }
                }
                Err(_) => {
                    bump(&self.stats.tx_dropped);
                    i += 1;
                }
            }
        }
        self.pend.clear();
        self.arena.clear();
    }
}

impl Wire for ClientWire {
    fn resp(&mut self, session: u32, gate: Gate, bytes: &[u8]) {
        if let Gate::Step { step, .. } = gate {
            self.addrs.note_step(session, step);
        }
        self.send(session, bytes);
    }
    fn session_step(&self, session: u32) -> u64 {
        self.addrs.step(session)
    }
    fn notice(&mut self, session: u32, bytes: &[u8]) {
        self.send(session, bytes);
    }
    fn learn(&mut self, session: u32, src: SocketAddr) {
        self.addrs.learn(session, src);
    }
    fn learn_first(&mut self, session: u32, src: SocketAddr) {
        self.addrs.learn_first(session, src);
    }
    fn flush(&mut self) {
        if !self.pend.is_empty() {
            self.send_queued();
        }
    }
    fn discard(&mut self) -> u64 {
        let n = self.pend.len() as u64;
        self.pend.clear();
        self.arena.clear();
        n
    }
    fn durable(&mut self, step: u64, height: u64) {
        if let Some((sock, to, epoch, tenure)) = &mut self.durable {
            let m = vyrn_wire::msg::ctrl::RepDurableMark {
                epoch: *epoch,
                tenure: *tenure,
                step,
                height,
            };
            if let Ok(b) = m.to_bytes() {
                for a in to {
                    send_to(sock, &b, *a);
                }
                bump(&self.stats.durable_marks);
            }
        }
    }
}

/// A stream core's two paths: each frame written on A and on B separately, each path's outcome
/// reported to the gate (07 §4.2, §14).
pub struct PathWire<P: Port = UdpPort> {
    paths: PathPair<P>,
    stats: Arc<NetStats>,
}

impl<P: Port> PathWire<P> {
    /// The writer over `paths`, counting into `stats`.
    pub fn new(paths: PathPair<P>, stats: Arc<NetStats>) -> Self {
        PathWire { paths, stats }
    }
}

impl<P: Port> std::fmt::Debug for PathWire<P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PathWire")
    }
}

impl<P: Port + Send> Wire for PathWire<P> {
    fn frame_on(&mut self, _h: u8, path: u8, _info: &FrameInfo, bytes: &[u8]) -> PathWrite {
        let p = if path == 0 { Path::A } else { Path::B };
        match self.paths.send_on(p, bytes, Dest::Default) {
            Ok(true) => {
                bump(&self.stats.path_writes[path as usize & 1]);
                PathWrite::Done
            }
            Ok(false) | Err(NicError::WouldBlock) => PathWrite::Busy,
            Err(_) => {
                bump(&self.stats.frame_errors);
                PathWrite::Failed
            }
        }
    }
    fn fence(&mut self) -> bool {
        // Each path on its own: a path that pushed back is not fenced yet; one that failed
        // hard lost what it held (counted; its next write fails and the gate takes it down).
        // The fence holds only when no path pushed back and at least one path flushed: a
        // flush error is never a fence (the frame must be out somewhere, INV-FRAME-FIRST).
        let r = [self.paths.a_mut().flush(), self.paths.b_mut().flush()];
        let mut pending = false;
        let mut out = false;
        for (i, r) in r.into_iter().enumerate() {
            match r {
                Ok(()) => out = true,
                Err(NicError::WouldBlock) => pending = true,
                Err(_) => bump(&self.stats.fence_errors[i]),
            }
        }
        let ok = out && !pending;
        if ok {
            bump(&self.stats.fences);
        }
        ok
    }
    fn path_alarm(&mut self, h: u8, path: u8, down: bool) {
        if down {
            bump(&self.stats.path_alarms);
        }
        // The alarm as a structured log line (docs/sre.md).
        eprintln!(
            "alarm=REP_A_PATH state={} substream={} path={}",
            if down { "raised" } else { "cleared" },
            (b'A' + h) as char,
            (b'A' + path) as char
        );
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
    stats: Arc<NetStats>,
}

impl Task for RxTile {
    fn name(&self) -> String {
        "rx".into()
    }
    fn poll(&mut self, now: u64) -> bool {
        let mut busy = false;
        let (mut truncated, mut kernel_dropped) = (0, 0);
        for (sock, port_lane) in &mut self.socks {
            let got = sock.recv_batch(&mut self.batch);
            let c = sock.counters();
            truncated += c.rx_truncated;
            kernel_dropped += c.rx_dropped;
            let Ok(n) = got else {
                continue;
            };
            if n == 0 {
                continue;
            }
            busy = true;
            for p in self.batch.iter() {
                bump(&self.stats.rx_client);
                let session = vyrn_wire::msg::PktKey::peek_session(p.data);
                let lane = session.and_then(|s| self.lane_of.get(&s).copied());
                let (Some(_), Some(lane)) = (session, lane) else {
                    bump(&self.stats.rx_unknown);
                    continue;
                };
                if port_lane.is_some_and(|pl| pl != lane) {
                    bump(&self.stats.rx_wrong_port);
                    continue;
                }
                let Some(mut pkt) = RxPkt::new(now, p.data) else {
                    bump(&self.stats.rx_too_long);
                    continue;
                };
                // The lane learns the address, and only once the tag verified (07 §9.5).
                pkt.src = p.meta.src;
                if self.rx[lane as usize].push(pkt).is_err() {
                    bump(&self.stats.rx_full);
                    continue;
                }
            }
        }
        self.stats.rx_truncated.store(truncated, Ordering::Relaxed);
        self.stats
            .rx_kernel_dropped
            .store(kernel_dropped, Ordering::Relaxed);
        busy
    }
}

mod ctrl_rx;
use ctrl_rx::{
    take_token, CertTile, CtrlRxTile, CERT_BURST, HASH_LIST_BURST, NACK_SHARE_BURST,
    NACK_TOO_OLD_PER_SEC, SEQ_DATA_BURST,
};

/// The paths' multicast groups (07 §3.1), a fact of the home.
pub use vyrn_home::PATH_GROUPS;

/// The replication paths as a home on one host receives them.
#[derive(Debug)]
pub struct PathsRx {
    pair: PathPair<UdpPort>,
    a: RxBatch,
    b: RxBatch,
    /// How the paths run: loopback multicast, or unicast where multicast is unavailable.
    pub how: &'static str,
}

impl PathsRx {
    /// The receiving side of paths A and B.
    pub fn new(a: UdpPort, b: UdpPort, how: &'static str) -> Self {
        PathsRx {
            pair: PathPair::new(a, b, PathMark::VYRN),
            a: RxBatch::new(64, 9216),
            b: RxBatch::new(64, 9216),
            how,
        }
    }

    /// The two receiving sockets (for a thread that blocks until a frame arrives).
    pub fn fds(&self) -> [std::os::fd::RawFd; 2] {
        use std::os::fd::AsRawFd;
        [
            self.pair.a().socket().as_raw_fd(),
            self.pair.b().socket().as_raw_fd(),
        ]
    }

    /// Every frame waiting on either path, with its path.
    pub fn recv(&mut self, mut f: impl FnMut(Path, &[u8])) -> Result<usize, NicError> {
        let [na, nb] = self.pair.recv_both(&mut self.a, &mut self.b)?;
        for p in self.a.iter() {
            f(Path::A, p.data);
        }
        for p in self.b.iter() {
            f(Path::B, p.data);
        }
        Ok(na + nb)
    }
}

/// Sender and receiver sockets of two replication paths on this host (07 §3.1): loopback
/// multicast on `groups` (receiver buffers of 8 MiB), or unicast on 127.0.0.1 where multicast is
/// unavailable. Returns `(senders, receivers, multicast?)`.
pub fn open_path_sockets(
    groups: [Ipv4Addr; 2],
) -> Result<([UdpPort; 2], [UdpPort; 2], bool), NicError> {
    open_path_sockets_at(groups, [0, 0], [Ipv4Addr::LOCALHOST; 2])
}

/// [`open_path_sockets`] on fixed ports (`[0, 0]`: ephemeral), path i sent from and joined on
/// the interface `ifs[i]` (loopback, or the box's own interface on that path's network). On
/// fixed ports only multicast will do — every replica process of the home receives its own copy
/// — so there is no unicast fallback: a host without multicast gets the error.
pub fn open_path_sockets_at(
    groups: [Ipv4Addr; 2],
    ports: [u16; 2],
    ifs: [Ipv4Addr; 2],
) -> Result<([UdpPort; 2], [UdpPort; 2], bool), NicError> {
    let fixed = ports != [0, 0];
    let one = |g: Option<Ipv4Addr>, i: usize| -> Result<(UdpPort, UdpPort), NicError> {
        let mut c = match g {
            Some(g) => UdpConfig::multicast_receiver_on(g, ports[i], ifs[i]),
            None => UdpConfig::loopback(),
        }
        .with_batch(64);
        c.recv_buffer = Some(8 << 20);
        let r = UdpPort::open(&c)?;
        let a = r.local_addr()?;
        let t = match g {
            Some(g) => UdpPort::open(&UdpConfig::multicast_sender_on(g, a.port(), ifs[i]))?,
            None => UdpPort::open(&UdpConfig::loopback().with_dest(a))?,
        };
        Ok((t, r))
    };
    match (one(Some(groups[0]), 0), one(Some(groups[1]), 1)) {
        (Ok((ta, ra)), Ok((tb, rb))) => Ok(([ta, tb], [ra, rb], true)),
        (Err(e), _) | (_, Err(e)) if fixed => Err(e),
        _ => {
            let (ta, ra) = one(None, 0)?;
            let (tb, rb) = one(None, 1)?;
            Ok(([ta, tb], [ra, rb], false))
        }
    }
}

/// Sender sockets for `senders` stream cores on each of the two paths, and the receiving side
/// for the home's voters (loopback multicast, or unicast where multicast is unavailable).
/// `port`: path A on `PATH_GROUPS[0]:port`, B on `PATH_GROUPS[1]:port + 1`, where the home's
/// replica processes join them; 0: ephemeral ports (one process, tests). Path i leaves from the
/// interface `ifs[i]` (`[box] path_a_ip`, `path_b_ip`).
pub fn open_paths_for(
    senders: usize,
    port: u16,
    ifs: [Ipv4Addr; 2],
) -> Result<(Vec<PathPair<UdpPort>>, PathsRx), NicError> {
    let ports = if port == 0 {
        [0, 0]
    } else {
        [port, port.wrapping_add(1)]
    };
    let ([ta, tb], [ra, rb], mc) = open_path_sockets_at(PATH_GROUPS, ports, ifs)?;
    let dest = [ra.local_addr()?, rb.local_addr()?];
    let sender = |i: usize| -> Result<UdpPort, NicError> {
        if mc {
            UdpPort::open(&UdpConfig::multicast_sender_on(
                PATH_GROUPS[i],
                dest[i].port(),
                ifs[i],
            ))
        } else {
            UdpPort::open(&UdpConfig::loopback().with_dest(dest[i]))
        }
    };
    let mut pairs = vec![PathPair::new(ta, tb, PathMark::VYRN)];
    for _ in 1..senders {
        pairs.push(PathPair::new(sender(0)?, sender(1)?, PathMark::VYRN));
    }
    let how = match (mc, ifs[0].is_loopback() && ifs[1].is_loopback()) {
        (true, true) => "loopback multicast 239.255.75.1 / 239.255.75.2",
        (true, false) => "multicast 239.255.75.1 / 239.255.75.2 on the paths' own interfaces",
        (false, _) => "unicast 127.0.0.1",
    };
    Ok((pairs, PathsRx::new(ra, rb, how)))
}

/// How the tiles map to threads.
#[derive(Debug, Clone)]
pub enum CoreMap {
    /// `ref`: one thread per tile, pinned to these cores in tile order (hot tiles spin, cold
    /// ones block when idle).
    PerTile(Vec<usize>),
    /// `dev`/`consumer`: the hot path (RX, lanes, cut, BBO, stream cores, TX) on
    /// spinning threads pinned to `hot`; the cold tiles (control, control RX, order hasher,
    /// cert) on blocking threads on `cold` (or kept off the hot cores when `cold` is empty).
    HotCold {
        /// Hot cores (one spinning thread each).
        hot: Vec<usize>,
        /// Cold cores (one blocking thread each).
        cold: Vec<usize>,
    },
    /// The legacy map (`vyrn-seq --threads N`, tests): this many threads, tiles dealt
    /// round-robin; pinned to `cores` if given, else yielding when idle.
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
    /// The standby's replica (07 §9.5): its control address and identity. Its NACKs,
    /// SeqDataReqs and HashListReqs are served like a voter's; it votes in nothing.
    standby: Option<(SocketAddr, ed25519_dalek::VerifyingKey)>,
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

/// A box's tiles, built and not started ([`NetBox::tiles_on`]).
pub struct BoxTiles {
    /// Every tile, in build order.
    pub tasks: Vec<Box<dyn Task>>,
    /// The lanes' rings, control's inbox, the gate words, control's watermarks.
    pub handles: BoxHandles,
    /// Port counters.
    pub stats: Arc<NetStats>,
    /// Where clients send (lane 0's port on `ref`).
    pub client_addr: SocketAddr,
    /// The stream cores' knobs (a test or the simulator may break the gate on purpose).
    pub knobs: Arc<tiles::StreamKnobs>,
}

impl std::fmt::Debug for BoxTiles {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<String> = self.tasks.iter().map(|t| t.name()).collect();
        write!(f, "BoxTiles({names:?}, clients at {})", self.client_addr)
    }
}

/// A box's client port(s), bound before its tiles exist: a warm standby binds its box's while it
/// waits (07 §9.5: the client ports are the standby's before the promotion), so a client that
/// takes the `SeqChange` before the promoted box's tiles run finds its packets queued in the
/// socket, not refused by a closed port.
#[derive(Debug)]
pub struct ClientPorts(Vec<(UdpPort, Option<u8>)>);

impl ClientPorts {
    /// Open the client port(s) of `cfg` — one on `dev`, `client_port + l` for lane `l` on
    /// `ref` (`per_lane_ports`) — with receive buffers of 8 MiB.
    pub fn open(cfg: &BoxConfig, per_lane_ports: bool) -> Result<ClientPorts, NicError> {
        let mut client = Vec::new();
        if per_lane_ports {
            for l in 0..cfg.engine.layout.n_lanes {
                let port = if cfg.client_port == 0 {
                    0
                } else {
                    cfg.client_port + l as u16
                };
                client.push((open_box_port(cfg, port)?, Some(l)));
            }
        } else {
            client.push((open_box_port(cfg, cfg.client_port)?, None));
        }
        Ok(ClientPorts(client))
    }
}

/// One of the box's ports on `cfg.ip`.
fn open_box_port(cfg: &BoxConfig, port: u16) -> Result<UdpPort, NicError> {
    let mut c = UdpConfig::new(SocketAddr::new(IpAddr::V4(cfg.ip), port)).with_batch(64);
    c.recv_buffer = Some(8 << 20);
    UdpPort::open(&c)
}

impl NetBox {
    /// Open the client port(s) — one on `dev`, `client_port + l` for lane `l` on `ref` — and the
    /// control port.
    pub fn open(cfg: &BoxConfig, per_lane_ports: bool) -> Result<NetBox, NicError> {
        let client = ClientPorts::open(cfg, per_lane_ports)?;
        NetBox::open_with(cfg, client)
    }

    /// [`NetBox::open`] on client ports already bound ([`ClientPorts`]).
    pub fn open_with(cfg: &BoxConfig, client: ClientPorts) -> Result<NetBox, NicError> {
        Ok(NetBox {
            client: client.0,
            ctrl: open_box_port(cfg, cfg.ctrl_port)?,
            voters: Vec::new(),
            standby: None,
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

    /// Every member of `cfg`'s home that speaks to the control port: its voters (REP_Membership)
    /// and the standby's replica where the file names one.
    pub fn register_members(&mut self, cfg: &BoxConfig) {
        for m in &cfg.voters_members {
            self.register_voter(m.ctrl_addr, m.index, m.vote_key);
        }
        if let (Some(r), Some(k)) = (cfg.standby_replica, cfg.standby_key) {
            self.register_standby(r.ctrl_addr, k);
        }
    }

    /// The warm standby's replica (07 §9.5, `[standby] replica_addr` and `link_key`): its
    /// messages come sealed `from::STANDBY`; the box serves its NACKs and data requests under a
    /// share of its own and takes no ack, vote, certificate or `Diverge` from it.
    pub fn register_standby(&mut self, addr: SocketAddr, key: ed25519_dalek::VerifyingKey) {
        self.standby = Some((addr, key));
    }

    /// Build the tiles and start them on `map`; returns the running box and the paths'
    /// receiving side for the home's voters.
    pub fn start(
        self,
        cfg: &BoxConfig,
        map: &CoreMap,
        clock: Clock,
    ) -> Result<(RunningBox, PathsRx), NicError> {
        let (paths, paths_rx) = box_paths(cfg)?;
        let running = self.start_on(cfg, map, clock, paths)?;
        Ok((running, paths_rx))
    }

    /// [`NetBox::start`] over given replication paths, one pair per stream core (tests wrap
    /// them to fail writes).
    pub fn start_on<P: Port + Send + 'static>(
        self,
        cfg: &BoxConfig,
        map: &CoreMap,
        clock: Clock,
        paths: Vec<PathPair<P>>,
    ) -> Result<RunningBox, NicError> {
        let t = self.tiles_on(cfg, paths)?;
        let groups = plan(t.tasks, map);
        let runner = Runner::start(groups, clock);
        Ok(RunningBox {
            runner,
            handles: t.handles,
            stats: t.stats,
            client_addr: t.client_addr,
        })
    }

    /// The link key with each registered voter and each data box, agreed from the box's key;
    /// the openers of their sealed messages.
    #[allow(clippy::type_complexity)]
    fn link_keys(
        &self,
        cfg: &BoxConfig,
        seq: &SeqConfig,
    ) -> Result<(HashMap<SocketAddr, LinkKey>, Opener, Opener), NicError> {
        let box_key = ed25519_dalek::SigningKey::from_bytes(&seq.seq_key);
        let mut links: HashMap<SocketAddr, LinkKey> = HashMap::new();
        let mut opener = Opener::new(seq.epoch);
        for &(a, i, k) in &self.voters {
            let l = LinkKey::agree(&box_key, &k).ok_or(NicError::Config(
                "a voter's key gives no link key (a weak key)",
            ))?;
            opener.add(seal::from::voter(i), l.clone());
            links.insert(a, l);
        }
        if let Some((a, k)) = self.standby {
            let l = LinkKey::agree(&box_key, &k).ok_or(NicError::Config(
                "[standby] link_key gives no link key (a weak key)",
            ))?;
            opener.add(seal::from::STANDBY, l.clone());
            links.insert(a, l);
        }
        let mut databoxes = Opener::new(seq.epoch);
        for d in &cfg.databoxes {
            let l = LinkKey::agree(&box_key, &d.link_key)
                .ok_or(NicError::Config("a data box's link_key gives no link key"))?;
            databoxes.add(seal::from::databox(d.index), l);
        }
        drop(box_key);
        Ok((links, opener, databoxes))
    }

    /// The certificate tile's finality listener over the registered voters 0..`n` (none when
    /// no voter is registered), each voter's control address, and how many indices are
    /// registered (an index past `n` is a hash-list fetcher, no voter).
    #[allow(clippy::type_complexity)]
    fn finality_listener(
        &self,
        n: usize,
        epoch: u32,
        final_from: u64,
    ) -> Result<
        (
            Option<vyrn_consensus::FinalityListener>,
            HashMap<SocketAddr, usize>,
            usize,
        ),
        NicError,
    > {
        let mut keys: Vec<Option<[u8; 32]>> = Vec::new();
        let mut voters = HashMap::new();
        for &(a, i, k) in &self.voters {
            voters.insert(a, i);
            if keys.len() <= i {
                keys.resize(i + 1, None);
            }
            keys[i] = Some(k.to_bytes());
        }
        // The finality listener's voting set: indices 0..n, every one registered
        // (REP_Membership); an index past n (a hash-list fetcher) is no voter.
        let listener = match keys
            .iter()
            .take(n)
            .copied()
            .collect::<Option<Vec<[u8; 32]>>>()
        {
            Some(k) if !k.is_empty() => {
                let set = vyrn_consensus::Voters::with_simplex_quorum(epoch, &k).map_err(|_| {
                    NicError::Config(
                        "the voters' keys do not form a voting set (a bad or repeated key)",
                    )
                })?;
                Some(vyrn_consensus::FinalityListener::new(set, final_from))
            }
            Some(_) => None,
            None => return Err(NicError::Config(
                "voter indices are not contiguous from 0: register every voter of the membership",
            )),
        };
        Ok((listener, voters, keys.len()))
    }

    /// A promoted standby's box (07 §9.5): its tiles built on `t`'s engine for tenure
    /// `tenure` (`next_tenure` and `next_seq` of the seal), started on `map` as
    /// [`NetBox::start`] starts the epoch's primary. `cfg` is the standby's box
    /// ([`vyrn_home::BoxConfig::standby_box`]).
    pub fn start_takeover(
        self,
        cfg: &BoxConfig,
        map: &CoreMap,
        clock: Clock,
        t: Takeover,
        tenure: TenureId,
        reserve: Option<tiles::Reserve>,
    ) -> Result<(RunningBox, PathsRx), NicError> {
        let (paths, paths_rx) = box_paths(cfg)?;
        let tiles = self.tiles_at(cfg, paths, Some((t, tenure, reserve)))?;
        let groups = plan(tiles.tasks, map);
        let runner = Runner::start(groups, clock);
        Ok((
            RunningBox {
                runner,
                handles: tiles.handles,
                stats: tiles.stats,
                client_addr: tiles.client_addr,
            },
            paths_rx,
        ))
    }

    /// The box's tiles on its sockets and `paths`, not started: [`NetBox::start_on`] places
    /// them on threads; a seeded scheduler may poll them all on one.
    pub fn tiles_on<P: Port + Send + 'static>(
        self,
        cfg: &BoxConfig,
        paths: Vec<PathPair<P>>,
    ) -> Result<BoxTiles, NicError> {
        self.tiles_at(cfg, paths, None)
    }

    /// [`NetBox::tiles_on`], or a promoted box's on `takeover` (07 §9.5).
    fn tiles_at<P: Port + Send + 'static>(
        self,
        cfg: &BoxConfig,
        paths: Vec<PathPair<P>>,
        takeover: Option<(Takeover, TenureId, Option<tiles::Reserve>)>,
    ) -> Result<BoxTiles, NicError> {
        let mut seq = cfg.seq_config();
        // The promoted box's tenure, and the height before its first: everything through the
        // seal is final already.
        let mut final_from = 0;
        if let Some((t, tenure, _)) = &takeover {
            seq.tenure = *tenure;
            final_from = t.base.first_height.saturating_sub(1);
        }
        let e = &seq.engine;
        let stats = Arc::new(NetStats::default());
        let addrs = Arc::new(SessionAddrs::new(e.sessions.iter().map(|s| s.session)));
        let mut paths: Vec<Option<PathPair<P>>> = paths.into_iter().map(Some).collect();
        let client_port = &self.client[0].0;
        let ctrl_sock = self.ctrl.try_clone()?;
        let voter_addrs: Vec<SocketAddr> = self.voters.iter().map(|v| v.0).collect();
        let (links, opener, databoxes) = self.link_keys(cfg, &seq)?;
        let mut err = None;
        let wire = |w| -> Box<dyn Wire> {
            match w {
                WireFor::Stream(h) => match paths.get_mut(h as usize).and_then(Option::take) {
                    Some(p) => Box::new(PathWire::new(p, stats.clone())),
                    None => {
                        err.get_or_insert(std::io::Error::other("no path pair"));
                        Box::new(NullWire)
                    }
                },
                WireFor::Lane(_) | WireFor::Tx | WireFor::Control => {
                    let port = client_port.try_clone();
                    let durable = if w == WireFor::Control {
                        ctrl_sock
                            .try_clone()
                            .ok()
                            .map(|s| (s, voter_addrs.clone(), seq.epoch, seq.tenure.tenure))
                    } else {
                        None
                    };
                    match port {
                        Ok(port) => {
                            Box::new(ClientWire::new(port, addrs.clone(), stats.clone(), durable))
                        }
                        Err(e) => {
                            err = Some(std::io::Error::other(e.to_string()));
                            Box::new(NullWire)
                        }
                    }
                }
            }
        };
        let nacks = |h| nack_reply(h, &seq, &ctrl_sock, &stats);
        let hashes = hash_reply(&ctrl_sock, &stats, &links, seq.epoch);
        let (tiles, handles) = match takeover {
            None => tiles::build(&seq, cfg.self_fence_us, wire, nacks, hashes),
            Some((t, _, reserve)) => {
                tiles::build_takeover(&seq, t, reserve, cfg.self_fence_us, wire, nacks, hashes)
            }
        };
        if let Some(e) = err {
            return Err(io_err(e));
        }
        let mut handles = handles;
        let (listener, mut voters, n_keys) =
            self.finality_listener(cfg.voters, seq.epoch, final_from)?;
        // The standby's replica takes the index after every registered one.
        let standby = self.standby.map(|(a, _)| {
            voters.insert(a, n_keys);
            n_keys
        });
        let n_keys = n_keys + usize::from(standby.is_some());
        let rx = std::mem::take(&mut handles.rx);
        let nacks = std::mem::take(&mut handles.nacks);
        let (hq, _) = vyrn_rings::spsc::channel(1);
        let hash_reqs = std::mem::replace(&mut handles.hash_reqs, hq);
        let (inbox, _) = vyrn_rings::spsc::channel(1);
        let inbox = std::mem::replace(&mut handles.ctrl, inbox);
        let (votes, _) = vyrn_rings::spsc::channel(1);
        let votes = std::mem::replace(&mut handles.votes, votes);
        let (cert_p, cert_c) = vyrn_rings::spsc::channel(256);
        let client_addr = self.client[0].0.local_addr()?;
        let mut tasks = tiles.tiles;
        // No per-frame FrameInfo on the ports (it exists for the tests' invariant checks).
        tiles.knobs.set_track(false);
        if let Some(us) = cfg.hb_us {
            tiles.knobs.set_heartbeat_ns(us * 1000);
        }
        tasks.push(Box::new(RxTile {
            socks: self.client,
            batch: RxBatch::new(64, 256),
            lane_of: e.sessions.iter().map(|s| (s.session, s.lane)).collect(),
            rx,
            stats: stats.clone(),
        }));
        tasks.push(Box::new(CtrlRxTile {
            ctrl: self.ctrl,
            batch: RxBatch::new(64, 2048),
            cert_tokens: vec![(CERT_BURST, 0); n_keys],
            hash_tokens: vec![(HASH_LIST_BURST, 0); n_keys],
            voters,
            standby,
            epoch: seq.epoch,
            tenure: seq.tenure.tenure,
            inbox: tiles::Outq::new(inbox),
            certs: cert_p,
            nacks,
            hash_reqs,
            stats: stats.clone(),
            lane_of: e.sessions.iter().map(|s| (s.session, s.lane)).collect(),
            data_asks: std::mem::take(&mut handles.seq_data_asks),
            data_answers: std::mem::take(&mut handles.seq_data_answers),
            data_tokens: (SEQ_DATA_BURST, 0),
            data_share: vec![(SEQ_DATA_BURST / 2, 0); n_keys],
            nack_share: vec![(NACK_SHARE_BURST, 0); n_keys],
            opener,
            sealer: Sealer::new(seal::from::BOX_CTRL, seq.epoch, seal::start_seq()),
            links: links.clone(),
            seal_buf: Vec::with_capacity(256),
            databoxes,
        }));
        if let Some(listener) = listener {
            tasks.push(Box::new(CertTile {
                certs: cert_c,
                diverge: vyrn_consensus::roots::DivergeGate::new(listener.voters().clone()),
                listener,
                votes: tiles::Outq::new(votes),
                stats: stats.clone(),
            }));
        }
        Ok(BoxTiles {
            tasks,
            handles,
            stats,
            client_addr,
            knobs: tiles.knobs.clone(),
        })
    }
}

/// `cfg`'s replication paths: one pair per stream core, and their receiving side.
fn box_paths(cfg: &BoxConfig) -> Result<(Vec<PathPair<UdpPort>>, PathsRx), NicError> {
    open_paths_for(
        cfg.engine.layout.n_streams as usize,
        cfg.path_port,
        cfg.path_ips,
    )
}

/// A promoted standby's box (07 §9.5), opened and started: the tenure `tenure` after `seal` on
/// `engine` (the standby's replay, standing at the seal's last step), on `cfg`'s ports
/// ([`vyrn_home::BoxConfig::standby_box`]), its voters the membership's. Returns the running
/// box, its paths' receiving side, and the tenure's first step. `reserve`: the box's memory and
/// signer built while the standby was warm ([`standby_reserve`]), so the promotion only hands
/// them over; `clients`: its client ports, bound while it was warm ([`ClientPorts`]; `None`:
/// bound now).
pub fn start_promoted(
    cfg: &BoxConfig,
    map: &CoreMap,
    clock: Clock,
    engine: vyrn_engine::Handover,
    seal: &vyrn_wire::header::BlockHeader,
    (tenure, reserve, clients): (TenureId, Option<tiles::Reserve>, Option<ClientPorts>),
) -> Result<(RunningBox, PathsRx, u64), String> {
    let t = Takeover::new(&cfg.engine, engine, seal).map_err(|e| format!("takeover: {e:?}"))?;
    let first_step = t.base.first_step;
    let clients = match clients {
        Some(c) => c,
        None => ClientPorts::open(cfg, cfg.profile == Profile::Ref)
            .map_err(|e| format!("the promoted box's client ports: {e}"))?,
    };
    let mut net =
        NetBox::open_with(cfg, clients).map_err(|e| format!("the promoted box's ports: {e}"))?;
    net.register_members(cfg);
    let (running, paths) = net
        .start_takeover(cfg, map, clock, t, tenure, reserve)
        .map_err(|e| format!("the promoted box's start: {e}"))?;
    Ok((running, paths, first_step))
}

/// What a warm standby builds before any seal (07 §9.5 "promotion"): its box's frame rings,
/// retention tables and signer for `cfg` (its own key), touched now so a promotion takes them
/// over instead of allocating and faulting them in.
pub fn standby_reserve(cfg: &BoxConfig) -> tiles::Reserve {
    tiles::Reserve::new(&cfg.seq_config())
}

/// One datagram to `to` from `port` (a cold path: control answers, one send each); whether it
/// went.
fn send_to(port: &mut UdpPort, b: &[u8], to: SocketAddr) -> bool {
    let p = vyrn_nic::TxPacket {
        data: b,
        dest: vyrn_nic::Dest::Addr(to),
    };
    matches!(port.send_batch(&[p]), Ok(1))
}

/// Stream core `h`'s answers to NACKs: retransmissions unicast to the NACK's sender from the
/// control port, and signed NackTooOld for what the ring no longer holds.
fn nack_reply(
    h: u8,
    seq: &SeqConfig,
    ctrl_sock: &UdpPort,
    stats: &Arc<NetStats>,
) -> Option<NackReply> {
    let mut sock = ctrl_sock.try_clone().ok()?;
    let mut rtx_sock = ctrl_sock.try_clone().ok()?;
    let stats = stats.clone();
    let rtx_stats = stats.clone();
    let (epoch, tenure) = (seq.epoch, seq.tenure.tenure);
    // NackTooOld is signed (security review F17): the stream's own copy of the key.
    let key = ed25519_dalek::SigningKey::from_bytes(&seq.seq_key);
    // Retransmissions unicast to the NACK's sender from the control port, where
    // the replica takes them (07 §4.10); a cold path, one send per frame.
    let resend = Box::new(move |to: SocketAddr, b: &[u8]| {
        let ok = send_to(&mut rtx_sock, b, to);
        bump(if ok {
            &rtx_stats.rtx_unicast
        } else {
            &rtx_stats.rtx_unicast_failed
        });
        ok
    });
    // A signature costs ~20 µs: the answers are few (NACK_TOO_OLD_PER_SEC, burst
    // 8) and one signed answer is reused while the ring's oldest frame stays put
    // (a replica behind the ring NACKs again and is answered again).
    let mut tokens = (8u64, 0u64);
    let mut last: Option<(u64, Vec<u8>)> = None;
    Some(NackReply {
        resend: Some(resend),
        answer: Box::new(move |n: NackReq, out: crate::stream::NackOutcome| {
            let (Some(oldest), Some(src)) = (out.too_old, n.src) else {
                return;
            };
            if last.as_ref().is_none_or(|l| l.0 != oldest) {
                if !take_token(&mut tokens, n.now, NACK_TOO_OLD_PER_SEC, 8) {
                    bump(&stats.ctrl_dropped);
                    return;
                }
                let m = vyrn_wire::msg::ctrl::NackTooOld::sign(epoch, tenure, h, oldest, &key);
                last = m.to_bytes().ok().map(|b| (oldest, b));
            }
            if let Some((_, b)) = last.as_ref() {
                send_to(&mut sock, b, src);
                bump(&stats.too_old);
            }
        }),
    })
}

/// The order hasher's HashList parts to a voter, sealed under its link key (a spoofed,
/// mis-shaped part would otherwise make a replica refuse the block).
fn hash_reply(
    ctrl_sock: &UdpPort,
    stats: &Arc<NetStats>,
    links: &HashMap<SocketAddr, LinkKey>,
    epoch: u32,
) -> Option<tiles::HashReply> {
    ctrl_sock.try_clone().ok().map(|mut sock| {
        let stats = stats.clone();
        let links = links.clone();

        let mut sealer = Sealer::new(seal::from::BOX_HASHER, epoch, seal::start_seq());
        let mut buf = Vec::with_capacity(9216);
        Box::new(move |to: SocketAddr, b: &[u8]| {
            let Some(key) = links.get(&to) else {
                bump(&stats.ctrl_dropped);
                return;
            };
            buf.clear();
            sealer.seal(&mut buf, key, |o| {
                o.extend_from_slice(b);
                true
            });
            send_to(&mut sock, &buf, to);
            bump(&stats.hash_list_parts);
        }) as tiles::HashReply
    })
}

fn io_err(e: std::io::Error) -> NicError {
    NicError::Io {
        op: "dup",
        errno: e.raw_os_error().unwrap_or(0),
    }
}

struct NullWire;

impl Wire for NullWire {
    fn frame_on(&mut self, _h: u8, _path: u8, _info: &FrameInfo, _bytes: &[u8]) -> PathWrite {
        PathWrite::Failed
    }
    fn resp(&mut self, _session: u32, _gate: Gate, _bytes: &[u8]) {}
    fn notice(&mut self, _session: u32, _bytes: &[u8]) {}
}

/// Tiles to threads per the core map.
pub fn plan(tasks: Vec<Box<dyn Task>>, map: &CoreMap) -> Vec<Group> {
    match map {
        CoreMap::PerTile(cores) => crate::runner::groups(tasks, cores, true, 0),
        CoreMap::HotCold { hot, cold } => crate::runner::place(tasks, hot, cold),
        CoreMap::Shared { threads, cores } => crate::runner::groups(tasks, cores, false, *threads),
    }
}

/// The core map a config asks for: `ref` pins one tile per core of `core_map`; `dev` and
/// `consumer` put the hot path on `core_map[0]` (pinned, spinning) and the cold tiles on the
/// rest of `core_map` (blocking when idle; kept off the hot core if `core_map` names one core).
pub fn core_map_of(cfg: &BoxConfig) -> CoreMap {
    match cfg.profile {
        Profile::Ref => CoreMap::PerTile(cfg.core_map.clone()),
        _ => CoreMap::HotCold {
            hot: cfg.core_map.first().copied().into_iter().collect(),
            cold: cfg.core_map.iter().skip(1).copied().collect(),
        },
    }
}

#[cfg(test)]
mod fence_tests {
    use super::*;
    use vyrn_nic::mem::MemPort;
    use vyrn_nic::{PortCounters, RxPacket, TxStamp};

    /// A port whose flush answers what the test says.
    struct Flaky(MemPort, Option<NicError>);
    impl Port for Flaky {
        fn max_payload(&self) -> usize {
            self.0.max_payload()
        }
        fn send_batch(&mut self, p: &[TxPacket<'_>]) -> Result<usize, NicError> {
            self.0.send_batch(p)
        }
        fn recv_batch(&mut self, b: &mut RxBatch) -> Result<usize, NicError> {
            self.0.recv_batch(b)
        }
        fn poll_recv(
            &mut self,
            max: usize,
            f: &mut dyn FnMut(RxPacket<'_>),
        ) -> Result<usize, NicError> {
            self.0.poll_recv(max, f)
        }
        fn flush(&mut self) -> Result<(), NicError> {
            match &self.1 {
                Some(e) => Err(*e),
                None => self.0.flush(),
            }
        }
        fn last_tx(&self) -> TxStamp {
            self.0.last_tx()
        }
        fn counters(&self) -> PortCounters {
            self.0.counters()
        }
    }

    fn wire(a: Option<NicError>, b: Option<NicError>) -> (PathWire<Flaky>, Arc<NetStats>) {
        let (pa, _ra) = MemPort::pair(16, 9216);
        let (pb, _rb) = MemPort::pair(16, 9216);
        let stats = Arc::new(NetStats::default());
        let pair = PathPair::new(Flaky(pa, a), Flaky(pb, b), PathMark::VYRN);
        (PathWire::new(pair, stats.clone()), stats)
    }

    /// Security review: a flush error was taken for a fence. A hard error on one path is
    /// counted and the other path's flush holds the fence; errors on both, or a path that
    /// pushed back, hold none.
    #[test]
    fn a_flush_error_is_never_a_fence() {
        let hard = || {
            Some(NicError::Io {
                op: "sendmmsg",
                errno: libc::EPIPE,
            })
        };
        let (mut w, st) = wire(None, None);
        assert!(w.fence());
        let (mut w, st2) = wire(hard(), None);
        assert!(w.fence(), "path B flushed: the frame is out");
        assert_eq!(st2.fence_errors[0].load(Ordering::Relaxed), 1);
        let (mut w, st3) = wire(hard(), hard());
        assert!(!w.fence(), "no path flushed: no fence");
        assert_eq!(st3.fences.load(Ordering::Relaxed), 0);
        let (mut w, _) = wire(Some(NicError::WouldBlock), None);
        assert!(!w.fence(), "a path still holds frames");
        assert_eq!(st.fences.load(Ordering::Relaxed), 1);
    }
}
