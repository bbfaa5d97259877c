//! The box on its ports (07 §3.1, §4.1; missing-chapters §5): client packets in over UDP,
//! responses and notices back to each session's last source address, and every frame written
//! to the two replication paths (`vyrn_nic::pair::PathPair`, write both, then fence) in the order
//! the box logged it — so a response leaves the box only after the frames logged before it are on
//! both paths (INV-FRAME-FIRST on the wire, not just in memory).
//!
//! The receiving side ([`PathsRx`]) takes both paths for the voting replicas of a home on one
//! host and hands each frame to them with its path.

use crate::home::{SeqHome, WireEvent};
use std::collections::HashMap;
use std::net::{Ipv4Addr, SocketAddr};
use vyrn_nic::pair::{Path, PathMark, PathPair};
use vyrn_nic::udp::{UdpConfig, UdpPort};
use vyrn_nic::{Dest, NicError, Port, RxBatch, TxPacket};

/// Counters of the box's ports.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct NetCounters {
    /// Client packets received.
    pub rx_client: u64,
    /// Client packets naming no session of this box (dropped).
    pub rx_unknown: u64,
    /// Frames written to both paths.
    pub frames: u64,
    /// Frames a path refused after retries (backpressure).
    pub frame_errors: u64,
    /// Responses and notices sent.
    pub responses: u64,
    /// Responses to a session whose address the box has not learned yet (dropped; the
    /// client resends, 07 §9.5).
    pub no_addr: u64,
    /// Control messages by kind: RepAck, Nack, FinalityCert.
    pub ctrl: [u64; 3],
    /// Control messages refused: unparseable, from an unknown voter, or a certificate whose
    /// signatures do not check.
    pub ctrl_bad: u64,
    /// NackTooOld answers sent.
    pub too_old: u64,
    /// REP_DurableMark messages sent.
    pub durable_marks: u64,
    /// HashListReq taken (from registered voters).
    pub hash_list_reqs: u64,
    /// HashList parts sent.
    pub hash_list_parts: u64,
}

/// The box's ports.
#[derive(Debug)]
pub struct BoxNet {
    client: UdpPort,
    ctrl: UdpPort,
    /// Voters by control address: (index, Ed25519 public key) — from REP_Membership in a home.
    voters: HashMap<SocketAddr, (usize, ed25519_dalek::VerifyingKey)>,
    keys: Vec<Option<ed25519_dalek::VerifyingKey>>,
    epoch: u32,
    paths: PathPair<UdpPort>,
    addrs: HashMap<u32, SocketAddr>,
    rx: RxBatch,
    counters: NetCounters,
}

/// The finalize votes a `REP_FinalityCert` carries: `vote(voter, height)` for each entry whose
/// signature over the proposal's digest checks against that voter's key, for every height of
/// the proposal. True when every entry checked.
pub fn cert_votes(
    c: &vyrn_wire::msg::consensus::RepFinalityCert,
    keys: &[Option<ed25519_dalek::VerifyingKey>],
    mut vote: impl FnMut(usize, u64),
) -> bool {
    let digest = c.proposal.digest();
    let mut valid = 0;
    for e in &c.entries {
        let key = keys.get(e.index as usize).copied().flatten();
        let sig = ed25519_dalek::Signature::from_bytes(&e.sig);
        if key.is_some_and(|k| k.verify_strict(&digest, &sig).is_ok()) {
            valid += 1;
            for h in c.proposal.first_height..=c.proposal.last_height {
                vote(e.index as usize, h);
            }
        }
    }
    valid == c.entries.len()
}

/// A block's full-hash lists as `HashList` messages, each part's bytes to `send` (07 §5.6).
pub fn hash_list_parts(height: u64, lists: &crate::home::HashLists, mut send: impl FnMut(&[u8])) {
    for (h, list) in lists.iter().enumerate() {
        for part in vyrn_wire::msg::ctrl::HashList::split(height, h as u8, list) {
            if let Ok(b) = part.to_bytes() {
                send(&b);
            }
        }
    }
}

/// How the paths were opened.
pub const PATH_GROUPS: [Ipv4Addr; 2] = [
    Ipv4Addr::new(239, 255, 75, 1),
    Ipv4Addr::new(239, 255, 75, 2),
];

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
    let one = |g: Option<Ipv4Addr>| -> Result<(UdpPort, UdpPort), NicError> {
        let mut c = match g {
            Some(g) => UdpConfig::multicast_receiver(g, 0),
            None => UdpConfig::loopback(),
        }
        .with_batch(64);
        c.recv_buffer = Some(8 << 20);
        let r = UdpPort::open(&c)?;
        let a = r.local_addr()?;
        let t = match g {
            Some(g) => UdpPort::open(&UdpConfig::multicast_sender(g, a.port()))?,
            None => UdpPort::open(&UdpConfig::loopback().with_dest(a))?,
        };
        Ok((t, r))
    };
    match (one(Some(groups[0])), one(Some(groups[1]))) {
        (Ok((ta, ra)), Ok((tb, rb))) => Ok(([ta, tb], [ra, rb], true)),
        _ => {
            let (ta, ra) = one(None)?;
            let (tb, rb) = one(None)?;
            Ok(([ta, tb], [ra, rb], false))
        }
    }
}

fn open_paths() -> Result<(PathPair<UdpPort>, PathsRx), NicError> {
    let ([ta, tb], [ra, rb], mc) = open_path_sockets(PATH_GROUPS)?;
    let how = if mc {
        "loopback multicast 239.255.75.1 / 239.255.75.2"
    } else {
        "unicast 127.0.0.1"
    };
    Ok((
        PathPair::new(ta, tb, PathMark::VYRN),
        PathsRx {
            pair: PathPair::new(ra, rb, PathMark::VYRN),
            a: RxBatch::new(64, 9216),
            b: RxBatch::new(64, 9216),
            how,
        },
    ))
}

impl BoxNet {
    /// Open the client port on `client`, the control port on `ctrl` and the two paths; returns
    /// the ports and the receiving side of the paths.
    pub fn open(
        client: SocketAddr,
        ctrl: SocketAddr,
        epoch: u32,
    ) -> Result<(BoxNet, PathsRx), NicError> {
        let mut c = UdpConfig::new(client).with_batch(64);
        c.recv_buffer = Some(8 << 20);
        let client = UdpPort::open(&c)?;
        let mut c = UdpConfig::new(ctrl).with_batch(64);
        c.recv_buffer = Some(4 << 20);
        let ctrl = UdpPort::open(&c)?;
        let (paths, rx) = open_paths()?;
        Ok((
            BoxNet {
                client,
                ctrl,
                voters: HashMap::new(),
                keys: Vec::new(),
                epoch,
                paths,
                addrs: HashMap::new(),
                rx: RxBatch::new(64, 256),
                counters: NetCounters::default(),
            },
            rx,
        ))
    }

    /// A voter: its control address, index and public key (REP_Membership in a real home).
    pub fn register_voter(
        &mut self,
        addr: SocketAddr,
        index: usize,
        key: ed25519_dalek::VerifyingKey,
    ) {
        self.voters.insert(addr, (index, key));
        if self.keys.len() <= index {
            self.keys.resize(index + 1, None);
        }
        self.keys[index] = Some(key);
    }

    /// The control port's address.
    pub fn ctrl_addr(&self) -> Result<SocketAddr, NicError> {
        self.ctrl.local_addr()
    }

    /// Take the control messages waiting (07 §4.8, §4.10, §6.5): RepAcks from known voters,
    /// NACKs (served from the frame ring; NackTooOld back to the sender), and finality
    /// certificates whose entries are checked against the voters' keys (each valid entry is a
    /// finalize vote for the proposal's heights).
    pub fn recv_ctrl(&mut self, home: &mut SeqHome, now: u64) -> Result<usize, NicError> {
        use vyrn_wire::msg::ctrl::{CtrlMsg, NackTooOld};
        let mut total = 0;
        let mut rx = RxBatch::new(64, 2048);
        for _ in 0..4 {
            let n = self.ctrl.recv_batch(&mut rx)?;
            if n == 0 {
                break;
            }
            for p in rx.iter() {
                total += 1;
                let src = p.meta.src;
                let voter = src.and_then(|a| self.voters.get(&a)).map(|v| v.0);
                match (CtrlMsg::parse(p.data), voter) {
                    (Ok(CtrlMsg::RepAck(a)), Some(v)) if a.epoch == self.epoch => {
                        self.counters.ctrl[0] += 1;
                        home.on_ack(v, a.contiguous_frame_seq, now);
                    }
                    (Ok(CtrlMsg::Nack(k)), Some(_)) => {
                        self.counters.ctrl[1] += 1;
                        let out = home.on_nack(k.stream, k.from_seq, k.to_seq, now);
                        if let (Some(oldest), Some(src)) = (out.too_old, src) {
                            let m = NackTooOld {
                                epoch: k.epoch,
                                tenure: k.tenure,
                                stream: k.stream,
                                oldest_seq: oldest,
                            };
                            if let Ok(b) = m.to_bytes() {
                                let _ = self.ctrl.send_batch(&[TxPacket::to(&b, Dest::Addr(src))]);
                                self.counters.too_old += 1;
                            }
                        }
                    }
                    // HashListReq (07 §4.6, §5.6): the block's full-hash lists, while kept.
                    (Ok(CtrlMsg::HashListReq(q)), Some(_)) => {
                        self.counters.hash_list_reqs += 1;
                        if let (Some(lists), Some(src)) = (home.hash_list(q.height), src) {
                            let (ctrl, counters) = (&mut self.ctrl, &mut self.counters);
                            hash_list_parts(q.height, lists, |b| {
                                let _ = ctrl.send_batch(&[TxPacket::to(b, Dest::Addr(src))]);
                                counters.hash_list_parts += 1;
                            });
                        }
                    }
                    (Ok(CtrlMsg::FinalityCert(c)), _) if c.epoch == self.epoch => {
                        if cert_votes(&c, &self.keys, |v, h| home.on_vote(v, h)) {
                            self.counters.ctrl[2] += 1;
                        } else {
                            self.counters.ctrl_bad += 1;
                        }
                    }
                    _ => self.counters.ctrl_bad += 1,
                }
            }
        }
        Ok(total)
    }

    /// The client port's address.
    pub fn client_addr(&self) -> Result<SocketAddr, NicError> {
        self.client.local_addr()
    }

    /// Counters.
    pub fn counters(&self) -> NetCounters {
        self.counters
    }

    /// Take the client packets waiting (up to a few batches) into the box's lanes.
    pub fn recv(&mut self, home: &mut SeqHome, now: u64) -> Result<usize, NicError> {
        let mut total = 0;
        for _ in 0..4 {
            let n = self.client.recv_batch(&mut self.rx)?;
            if n == 0 {
                break;
            }
            for p in self.rx.iter() {
                self.counters.rx_client += 1;
                let Some(s) = p.data.get(4..8) else {
                    self.counters.rx_unknown += 1;
                    continue;
                };
                let session = u32::from_le_bytes([s[0], s[1], s[2], s[3]]);
                if home.receive(now, p.data.to_vec()) {
                    if let Some(src) = p.meta.src {
                        // The lane checks the tag; an address is only learned from a packet
                        // that names a configured session (a forged one costs the client a
                        // resend, never a lost response: responses are kept for resend).
                        self.addrs.insert(session, src);
                    }
                } else {
                    self.counters.rx_unknown += 1;
                }
            }
            total += n;
        }
        Ok(total)
    }

    /// Write what the box logged, in order: frames to both paths (write, write, fence), then
    /// responses and notices to their sessions.
    pub fn send(&mut self, home: &mut SeqHome) {
        let wire: Vec<WireEvent> = home.drain_wire().collect();
        for ev in wire {
            match ev {
                WireEvent::Frame { bytes, .. } => {
                    match self.paths.write_and_fence(&bytes, Dest::Default, 1000) {
                        Ok(()) => self.counters.frames += 1,
                        Err(_) => self.counters.frame_errors += 1,
                    }
                }
                WireEvent::Resp { session, bytes, .. } | WireEvent::Notice { session, bytes } => {
                    match self.addrs.get(&session) {
                        Some(&a) => {
                            let _ = self
                                .client
                                .send_batch(&[TxPacket::to(&bytes, Dest::Addr(a))]);
                            self.counters.responses += 1;
                        }
                        None => self.counters.no_addr += 1,
                    }
                }
            }
        }
        let _ = self.client.flush();
        // REP_DurableMark (07 §6.9) to the voters' control addresses.
        if let Some((step, height)) = home.sh.durable_mark.take() {
            let m = vyrn_wire::msg::ctrl::RepDurableMark {
                epoch: self.epoch,
                tenure: 0,
                step,
                height,
            };
            if let Ok(b) = m.to_bytes() {
                for &a in self.voters.keys() {
                    let _ = self.ctrl.send_batch(&[TxPacket::to(&b, Dest::Addr(a))]);
                }
                self.counters.durable_marks += 1;
            }
        }
    }
}
