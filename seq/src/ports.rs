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
use crate::tiles::{self, BoxHandles, CtrlIn, NackReply, NackReq, RxPkt, Wire, WireFor};
use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, SocketAddrV4, UdpSocket};
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
    /// Control messages refused: unparseable, wrong epoch, or a certificate whose signatures
    /// do not check.
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
    durable: Option<(UdpSocket, Vec<SocketAddr>, u32)>,
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
        durable: Option<(UdpSocket, Vec<SocketAddr>, u32)>,
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
        busy
    }
}

/// How many RepAcks may wait in the control-port tile's overflow when control's inbox ring is
/// full (acks are periodic state: a dropped one is replaced 50 µs later).
const ACK_OVERFLOW_MAX: usize = 4096;

/// Certificates each voter may hand the certificate tile per second, and its burst (a voter
/// sends one per finalization, a few hundred per second at most).
const CERT_PER_SEC: u64 = 2000;
const CERT_BURST: u64 = 64;

/// The control-port tile: acks timestamped and queued for control, NACKs and HashListReq to
/// their tiles, certificates to the certificate tile — nothing slow here.
struct CtrlRxTile {
    ctrl: UdpPort,
    batch: RxBatch,
    voters: HashMap<SocketAddr, usize>,
    epoch: u32,
    /// Control's ack inbox (bounded overflow).
    inbox: tiles::Outq<CtrlIn>,
    /// The certificate tile's ring (bounded: full means dropped and counted).
    certs: Producer<(usize, Vec<u8>)>,
    /// Per voter: certificate tokens and when they were last refilled.
    cert_tokens: Vec<(u64, u64)>,
    /// Per voter: HashListReq tokens and when they were last refilled.
    hash_tokens: Vec<(u64, u64)>,
    nacks: Vec<Producer<NackReq>>,
    hash_reqs: Producer<tiles::HashReq>,
    stats: Arc<NetStats>,
    /// 07 §5.5 source 3: each session's lane, the lanes' SeqDataReq rings and their answers,
    /// and the REP_SEQ_DATA_MAX_PPS budget (tokens, last refill).
    lane_of: HashMap<u32, u8>,
    data_asks: Vec<Producer<crate::retain::SeqDataAsk>>,
    data_answers: Vec<Consumer<crate::retain::SeqDataAnswer>>,
    data_tokens: (u64, u64),
    /// Per voter: its share of REP_SEQ_DATA_MAX_PPS (1/(f + 1) of the rate and the burst, issue
    /// 28 item 5: the f Byzantine voters' storm never starves the others' fetches).
    data_share: Vec<(u64, u64)>,
    /// Per voter: its share of REP_RTX_MAX_FPS in NACKed frames (F5): the
    /// stream core serves NACKs (07 D6), so what one voter may ask of it is bounded here, on
    /// this cold tile, before the NACK reaches the hot one.
    nack_share: Vec<(u64, u64)>,
    /// The member envelope: every voter's message comes sealed by it; the
    /// SeqData answers leave sealed (`from::BOX_CTRL`).
    opener: Opener,
    sealer: Sealer,
    links: HashMap<SocketAddr, LinkKey>,
    seal_buf: Vec<u8>,
    /// The data boxes' link keys: their 07 §5.2 reports come sealed from an ephemeral port
    /// (security review F13).
    databoxes: Opener,
}

/// HashListReqs a voter may make a second (07 §5.6 row 2 asks once per differing block; a
/// project bound), and the burst.
const HASH_LIST_PER_SEC: u64 = 50;
const HASH_LIST_BURST: u64 = 16;

/// Newly signed NackTooOld answers a stream core makes a second at most (each costs an Ed25519
/// signature on that core; a project bound, security review F17).
const NACK_TOO_OLD_PER_SEC: u64 = 100;

/// Frames one voter may NACK back to back before its share of REP_RTX_MAX_FPS holds (a whole
/// NACK span, `NACK_SPAN_MAX`).
const NACK_SHARE_BURST: u64 = vyrn_wire::consts::NACK_SPAN_MAX;

/// A voter's share of REP_RTX_MAX_FPS: all of it. The bucket bounds what one voter may ask of
/// a stream core (its rate, a span at a time) on this cold tile, before the NACK reaches the hot
/// one; it does not split the rate among voters. 1/(f + 1) was tried: a replica catching up
/// after a restart then had half the box's retransmissions, its NACKs were dropped silently and
/// its retries backed off, and its peers served 3–20× more frames (`replica/tests/catchup.rs`).
fn nack_share_rate(_voters: usize) -> u64 {
    vyrn_wire::consts::REP_RTX_MAX_FPS
}

/// Take a NACK of `span` frames from a voter's share `t` (tokens, last refill) of
/// REP_RTX_MAX_FPS among `voters` ([`nack_share_rate`]): it needs a token per frame of its span
/// (at most a burst), so a voter that NACKs wide ranges waits in proportion.
fn nack_share_take(t: &mut (u64, u64), now: u64, span: u64, voters: usize) -> bool {
    let rate = nack_share_rate(voters);
    // Refill (take_token refills, then takes one).
    if !take_token(t, now, rate, NACK_SHARE_BURST) {
        return false;
    }
    let need = span.clamp(1, NACK_SHARE_BURST) - 1;
    if t.0 < need {
        t.0 += 1; // give the one back: not enough for this span yet
        return false;
    }
    t.0 -= need;
    true
}

/// Burst of the REP_SEQ_DATA_MAX_PPS token bucket.
const SEQ_DATA_BURST: u64 = 1024;

/// Take a token at `now` from bucket `t` = (tokens, last refill) of `per_sec` a second and
/// `burst` at most.
fn take_token(t: &mut (u64, u64), now: u64, per_sec: u64, burst: u64) -> bool {
    let per = 1_000_000_000 / per_sec.max(1);
    if now > t.1 {
        let add = (now - t.1) / per;
        if add > 0 {
            t.0 = (t.0 + add).min(burst);
            t.1 += add * per;
        }
    }
    if t.0 == 0 {
        return false;
    }
    t.0 -= 1;
    true
}

/// Take a SeqDataReq token at `now` (REP_SEQ_DATA_MAX_PPS, 07 §5.5).
fn seq_data_token(t: &mut (u64, u64), now: u64) -> bool {
    take_token(
        t,
        now,
        vyrn_wire::consts::REP_SEQ_DATA_MAX_PPS,
        SEQ_DATA_BURST,
    )
}

/// Take a certificate token of voter `v` at `now` (a token bucket per source).
fn cert_token(tokens: &mut [(u64, u64)], v: usize, now: u64) -> bool {
    tokens
        .get_mut(v)
        .is_some_and(|t| take_token(t, now, CERT_PER_SEC, CERT_BURST))
}

/// 07 §5.2: a data box's `DataBadMac`, `CopyConflict` or the evidence frame after it, counted
/// (the session rules they feed are 01 §12.5's, not in this build).
fn on_data_report(stats: &NetStats, body: &[u8]) {
    use vyrn_wire::msg::ctrl::CtrlMsg;
    if body.len() >= 2 && u16::from_le_bytes([body[0], body[1]]) == vyrn_wire::msg::data::DATA_MAGIC
    {
        bump(&stats.conflict_evidence);
        return;
    }
    match CtrlMsg::parse(body) {
        Ok(CtrlMsg::DataBadMac(_)) => bump(&stats.data_bad_mac),
        Ok(CtrlMsg::CopyConflict(_)) => bump(&stats.copy_conflicts),
        _ => bump(&stats.ctrl_bad),
    }
}

impl Task for CtrlRxTile {
    fn name(&self) -> String {
        "ctrl-rx".into()
    }
    fn class(&self) -> crate::runner::TileClass {
        crate::runner::TileClass::Cold
    }
    fn wait_fd(&self) -> Option<std::os::fd::RawFd> {
        use std::os::fd::AsRawFd;
        Some(self.ctrl.socket().as_raw_fd())
    }
    fn poll(&mut self, now: u64) -> bool {
        use vyrn_wire::msg::ctrl::CtrlMsg;
        self.inbox.drain();
        // The lanes' SeqData answers (07 §5.5 source 3), sent from this port.
        let mut answered = false;
        for q in &mut self.data_answers {
            while let Some(a) = q.pop() {
                answered = true;
                let Some(key) = self.links.get(&a.to) else {
                    bump(&self.stats.ctrl_dropped);
                    continue;
                };
                self.seal_buf.clear();
                self.sealer.seal(&mut self.seal_buf, key, |o| {
                    o.extend_from_slice(a.bytes());
                    true
                });
                let sent = self
                    .ctrl
                    .send_batch(&[TxPacket::to(&self.seal_buf, Dest::Addr(a.to))]);
                bump(if matches!(sent, Ok(1)) {
                    &self.stats.seq_data_sent
                } else {
                    &self.stats.ctrl_dropped
                });
            }
        }
        if answered {
            let _ = self.ctrl.flush();
        }
        let got = self.ctrl.recv_batch(&mut self.batch);
        self.stats
            .ctrl_truncated
            .store(self.ctrl.counters().rx_truncated, Ordering::Relaxed);
        let Ok(n) = got else {
            return false;
        };
        for p in self.batch.iter() {
            let src = p.meta.src;
            let voter = src.and_then(|a| self.voters.get(&a).copied());
            let Some(v) = voter else {
                // A data box's 07 §5.2 report, sealed by it (its socket's port is ephemeral).
                if seal::Sealed::is_sealed(p.data) {
                    if let Ok((_, body)) = self.databoxes.open(p.data) {
                        on_data_report(&self.stats, body);
                        continue;
                    }
                }
                // Only registered voters speak to the control port (REP_Membership).
                bump(&self.stats.ctrl_unknown);
                continue;
            };
            // Sealed by that voter under its link key, fresh (a spoofed source
            // address or a replayed capture is refused here, before anything is parsed).
            let body = match self.opener.open_from(seal::from::voter(v), p.data) {
                Ok(b) => b,
                Err(SealErr::NotSealed) => {
                    bump(&self.stats.ctrl_unsealed);
                    continue;
                }
                Err(_) => {
                    bump(&self.stats.ctrl_bad_seal);
                    continue;
                }
            };
            match CtrlMsg::parse(body) {
                Ok(CtrlMsg::RepAck(a)) if a.epoch == self.epoch => {
                    bump(&self.stats.ctrl[0]);
                    let ack = CtrlIn::Ack {
                        voter: v,
                        contiguous: a.contiguous_frame_seq,
                        now,
                    };
                    if !self.inbox.push_bounded(ack, ACK_OVERFLOW_MAX) {
                        bump(&self.stats.ctrl_dropped);
                    }
                }
                // 07 §4.10: this epoch's NACKs only (the codec bounded the span, F5), within
                // the voter's share of the stream cores' retransmission rate.
                Ok(CtrlMsg::Nack(k)) if k.epoch == self.epoch => {
                    bump(&self.stats.ctrl[1]);
                    let n = self.nack_share.len();
                    let span = k.to_seq.saturating_sub(k.from_seq).saturating_add(1);
                    if !self
                        .nack_share
                        .get_mut(v)
                        .is_some_and(|t| nack_share_take(t, now, span, n))
                    {
                        bump(&self.stats.nacks_over_share);
                        continue;
                    }
                    if let Some(q) = self.nacks.get_mut(k.stream as usize) {
                        let r = NackReq {
                            from: k.from_seq,
                            to: k.to_seq,
                            now,
                            src,
                        };
                        if q.push(r).is_err() {
                            bump(&self.stats.ctrl_dropped); // the voter NACKs again
                        }
                    }
                }
                // 07 §5.5 source 3: to the session's lane, within REP_SEQ_DATA_MAX_PPS.
                Ok(CtrlMsg::SeqDataReq(q)) => {
                    bump(&self.stats.seq_data_reqs);
                    let lane = self.lane_of.get(&q.session).copied();
                    let (Some(lane), Some(src)) = (lane, src) else {
                        bump(&self.stats.ctrl_bad);
                        continue;
                    };
                    // 1/(f + 1) of the budget, as for NACKs (nack_share_rate).
                    let n = (vyrn_home::max_faults(self.data_share.len()) + 1) as u64;
                    let share = self.data_share.get_mut(v).is_some_and(|t| {
                        take_token(
                            t,
                            now,
                            vyrn_wire::consts::REP_SEQ_DATA_MAX_PPS / n,
                            (SEQ_DATA_BURST / n).max(1),
                        )
                    });
                    if !share || !seq_data_token(&mut self.data_tokens, now) {
                        bump(&self.stats.ctrl_dropped);
                        continue;
                    }
                    let ask = crate::retain::SeqDataAsk {
                        session: q.session,
                        pkt_seq: q.pkt_seq,
                        pkt_hash: q.pkt_hash,
                        src,
                    };
                    if let Some(r) = self.data_asks.get_mut(lane as usize) {
                        if r.push(ask).is_err() {
                            bump(&self.stats.ctrl_dropped);
                        }
                    }
                }
                // 07 §5.6 row 2: a few a second per voter (each answer is a block's whole
                // list: security review F8 found it unlimited).
                Ok(CtrlMsg::HashListReq(q)) => {
                    bump(&self.stats.hash_list_reqs);
                    let ok = self
                        .hash_tokens
                        .get_mut(v)
                        .is_some_and(|t| take_token(t, now, HASH_LIST_PER_SEC, HASH_LIST_BURST));
                    if !ok {
                        bump(&self.stats.ctrl_dropped);
                        continue;
                    }
                    if let Some(src) = src {
                        let r = tiles::HashReq {
                            height: q.height,
                            src,
                        };
                        if self.hash_reqs.push(r).is_err() {
                            bump(&self.stats.ctrl_dropped);
                        }
                    }
                }
                // 07 §6.8: one voter's finalize vote, from that voter's own address.
                Ok(CtrlMsg::FinalizeVote(fv))
                    if fv.epoch == self.epoch && fv.index as usize == v =>
                {
                    if !cert_token(&mut self.cert_tokens, v, now)
                        || self.certs.push((v, body.to_vec())).is_err()
                    {
                        bump(&self.stats.ctrl_dropped);
                    }
                }
                // 07 §7.4: a voter's REP_A_DIVERGE, from that voter's own address, to the
                // certificate tile, which checks its evidence before control halts the book
                // (security review F3), under the voter's certificate tokens (the voter
                // repeats it while it stays diverged).
                Ok(CtrlMsg::Diverge(d)) if d.epoch == self.epoch => {
                    bump(&self.stats.diverge_msgs);
                    if !cert_token(&mut self.cert_tokens, v, now)
                        || self.certs.push((v, body.to_vec())).is_err()
                    {
                        bump(&self.stats.ctrl_dropped);
                    }
                }
                Ok(CtrlMsg::FinalityCert(c)) if c.epoch == self.epoch => {
                    // Checked on the certificate tile, under a per-source limit.
                    if !cert_token(&mut self.cert_tokens, v, now)
                        || self.certs.push((v, body.to_vec())).is_err()
                    {
                        bump(&self.stats.ctrl_dropped);
                    }
                }
                _ => bump(&self.stats.ctrl_bad),
            }
        }
        n > 0
    }
}

/// The certificate tile (cold, 07 §6.8): each finalize vote or `REP_FinalityCert` into the
/// finality listener ([`vyrn_consensus::FinalityListener`]), which batch-verifies a proposal's
/// votes once Q distinct voters signed it and makes its last height final only with Q valid
/// signatures; each new final height goes to control as [`CtrlIn::Final`]. Signature checks
/// never run on the gate path.
struct CertTile {
    certs: Consumer<(usize, Vec<u8>)>,
    listener: vyrn_consensus::FinalityListener,
    /// 07 §7.4: a `Diverge` halts the book only with its evidence checked.
    diverge: vyrn_consensus::roots::DivergeGate,
    votes: tiles::Outq<CtrlIn>,
    stats: Arc<NetStats>,
}

impl Task for CertTile {
    fn name(&self) -> String {
        "cert".into()
    }
    fn class(&self) -> crate::runner::TileClass {
        crate::runner::TileClass::Cold
    }
    fn poll(&mut self, _now: u64) -> bool {
        use vyrn_consensus::VoteOutcome;
        use vyrn_wire::msg::ctrl::CtrlMsg;
        if !self.votes.drain() {
            return true;
        }
        let Some((voter, bytes)) = self.certs.pop() else {
            return false;
        };
        let c = match CtrlMsg::parse(&bytes) {
            Ok(CtrlMsg::FinalityCert(c)) => *c,
            Ok(CtrlMsg::FinalizeVote(v)) => v.as_cert(),
            Ok(CtrlMsg::Diverge(d)) => {
                match self.diverge.on_diverge(voter, &d) {
                    Ok(index) => self.votes.push(CtrlIn::Diverge { voter, index }),
                    Err(vyrn_consensus::roots::DivergeErr::TimeoutPending) => {
                        bump(&self.stats.diverge_pending)
                    }
                    Err(_) => bump(&self.stats.diverge_refused),
                }
                return true;
            }
            _ => {
                bump(&self.stats.ctrl_bad);
                return true;
            }
        };
        let before = self.listener.counters().bad_sigs;
        let outcome = self.listener.on_cert_from(voter, &c);
        let bad_sigs = self.listener.counters().bad_sigs - before;
        self.stats.bad_sigs.fetch_add(bad_sigs, Ordering::Relaxed);
        if let VoteOutcome::Final { height, view } = outcome {
            self.votes.push(CtrlIn::Final { height, view });
        }
        // A message whose signatures failed the batch (or refused before it) is bad.
        if outcome == VoteOutcome::Bad || bad_sigs > 0 {
            bump(&self.stats.ctrl_bad);
        } else {
            bump(&self.stats.ctrl[2]);
        }
        true
    }
}

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
        let lo = IpAddr::V4(cfg.ip);
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
        let (paths, paths_rx) = open_paths_for(
            cfg.engine.layout.n_streams as usize,
            cfg.path_port,
            cfg.path_ips,
        )?;
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
        let seq = cfg.seq_config();
        let e = &seq.engine;
        let stats = Arc::new(NetStats::default());
        let addrs = Arc::new(SessionAddrs::new(e.sessions.iter().map(|s| s.session)));
        let mut paths: Vec<Option<PathPair<P>>> = paths.into_iter().map(Some).collect();
        let client_port = &self.client[0].0;
        let ctrl_sock = self.ctrl.socket().try_clone().map_err(io_err)?;
        let voter_addrs: Vec<SocketAddr> = self.voters.iter().map(|v| v.0).collect();
        // A link key with each registered voter, agreed from the box's key.
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
        let mut databoxes = Opener::new(seq.epoch);
        for d in &cfg.databoxes {
            let l = LinkKey::agree(&box_key, &d.link_key)
                .ok_or(NicError::Config("a data box's link_key gives no link key"))?;
            databoxes.add(seal::from::databox(d.index), l);
        }
        drop(box_key);
        let mut err = None;
        let (tiles, handles) = tiles::build(
            &seq,
            cfg.self_fence_us,
            |w| -> Box<dyn Wire> {
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
                                .map(|s| (s, voter_addrs.clone(), seq.epoch))
                        } else {
                            None
                        };
                        match port {
                            Ok(port) => Box::new(ClientWire::new(
                                port,
                                addrs.clone(),
                                stats.clone(),
                                durable,
                            )),
                            Err(e) => {
                                err = Some(std::io::Error::other(e.to_string()));
                                Box::new(NullWire)
                            }
                        }
                    }
                }
            },
            |h| -> Option<NackReply> {
                let sock = ctrl_sock.try_clone().ok()?;
                let rtx_sock = ctrl_sock.try_clone().ok()?;
                let stats = stats.clone();
                let rtx_stats = stats.clone();
                let epoch = seq.epoch;
                // NackTooOld is signed (security review F17): the stream's own copy of the key.
                let key = ed25519_dalek::SigningKey::from_bytes(&seq.seq_key);
                // Retransmissions unicast to the NACK's sender from the control port, where
                // the replica takes them (07 §4.10); a cold path, one send per frame.
                let resend = Box::new(move |to: SocketAddr, b: &[u8]| {
                    let ok = rtx_sock.send_to(b, to).is_ok();
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
                            let m =
                                vyrn_wire::msg::ctrl::NackTooOld::sign(epoch, 0, h, oldest, &key);
                            last = m.to_bytes().ok().map(|b| (oldest, b));
                        }
                        if let Some((_, b)) = last.as_ref() {
                            let _ = sock.send_to(b, src);
                            bump(&stats.too_old);
                        }
                    }),
                })
            },
            ctrl_sock.try_clone().ok().map(|sock| {
                let stats = stats.clone();
                // HashList parts leave sealed: a spoofed, mis-shaped part
                // would otherwise make a replica refuse the block.
                let links = links.clone();
                let mut sealer = Sealer::new(seal::from::BOX_HASHER, seq.epoch, seal::start_seq());
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
                    let _ = sock.send_to(&buf, to);
                    bump(&stats.hash_list_parts);
                }) as tiles::HashReply
            }),
        );
        if let Some(e) = err {
            return Err(io_err(e));
        }
        let mut handles = handles;
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
            .take(cfg.voters)
            .copied()
            .collect::<Option<Vec<[u8; 32]>>>()
        {
            Some(k) if !k.is_empty() => {
                let set =
                    vyrn_consensus::Voters::with_simplex_quorum(seq.epoch, &k).map_err(|_| {
                        NicError::Config(
                            "the voters' keys do not form a voting set (a bad or repeated key)",
                        )
                    })?;
                Some(vyrn_consensus::FinalityListener::new(set, 0))
            }
            Some(_) => None,
            None => return Err(NicError::Config(
                "voter indices are not contiguous from 0: register every voter of the membership",
            )),
        };
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
            cert_tokens: vec![(CERT_BURST, 0); keys.len()],
            hash_tokens: vec![(HASH_LIST_BURST, 0); keys.len()],
            voters,
            epoch: seq.epoch,
            inbox: tiles::Outq::new(inbox),
            certs: cert_p,
            nacks,
            hash_reqs,
            stats: stats.clone(),
            lane_of: e.sessions.iter().map(|s| (s.session, s.lane)).collect(),
            data_asks: std::mem::take(&mut handles.seq_data_asks),
            data_answers: std::mem::take(&mut handles.seq_data_answers),
            data_tokens: (SEQ_DATA_BURST, 0),
            data_share: vec![(SEQ_DATA_BURST / 2, 0); keys.len()],
            nack_share: vec![(NACK_SHARE_BURST, 0); keys.len()],
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
        let groups = plan(tasks, map);
        let runner = Runner::start(groups, clock);
        Ok(RunningBox {
            runner,
            handles,
            stats,
            client_addr,
        })
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
mod nack_share_tests {
    use super::{nack_share_rate, nack_share_take};

    #[test]
    fn a_voter_nacking_wide_ranges_waits_in_proportion_and_others_keep_their_share() {
        let n = 4;
        let rate = nack_share_rate(n); // frames/s per voter: the stream core's whole rate
        assert_eq!(rate, vyrn_wire::consts::REP_RTX_MAX_FPS);
        let per_frame_ns = 1_000_000_000 / rate;
        let (mut a, mut b) = ((super::NACK_SHARE_BURST, 0), (super::NACK_SHARE_BURST, 0));
        let now = 1_000;
        // One full-span NACK empties voter a's share; its next one waits.
        assert!(nack_share_take(&mut a, now, 256, n));
        assert!(!nack_share_take(&mut a, now, 1, n));
        // Voter b is untouched.
        assert!(nack_share_take(&mut b, now, 1, n));
        // After one frame's time, a may NACK again (one frame's worth).
        assert!(nack_share_take(&mut a, now + per_frame_ns + 1, 1, n));
        assert!(!nack_share_take(&mut a, now + per_frame_ns + 1, 1, n));
        // Over a second, a gets its share and no more: ≤ rate frames (+ the burst).
        let mut a = (super::NACK_SHARE_BURST, 0);
        let mut frames = 0;
        for i in 0..2 * rate {
            let t = i * 1_000_000_000 / (2 * rate);
            if nack_share_take(&mut a, t, 16, n) {
                frames += 16;
            }
        }
        assert!(frames <= rate + 256 + 16, "{frames} > {rate}");
        assert!(frames >= rate / 2, "{frames}");
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
