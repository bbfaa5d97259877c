//! The process's sockets and the core's output: messages queued in one arena, sent by
//! `sendmmsg` per socket once a round.

use super::*;

/// Which socket a queued message leaves by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Sock {
    Ctrl,
    Data,
}

/// The core's output: messages queued in one arena for the round's sends, alarms logged and
/// counted, in-order frames into the peer store.
#[derive(Debug)]
pub(super) struct Io {
    pub(super) arena: Vec<u8>,
    pub(super) msgs: Vec<(Sock, SocketAddr, usize, usize)>,
    pub(super) seq_ctrl: SocketAddr,
    /// The tenure's `seq_key`: what the box signs on the control port (NackTooOld) verifies
    /// under it.
    pub(super) seq_pub: ed25519_dalek::VerifyingKey,
    /// The warm standby's control port (07 §6.8): finalize votes and certificates go there too.
    pub(super) standby_ctrl: Option<SocketAddr>,
    pub(super) peers: Vec<SocketAddr>,
    pub(super) boxes: Vec<SocketAddr>,
    pub(super) store: FrameStore,
    /// Headers held since the last round, for the voter.
    pub(super) headers: Vec<(u64, Hash, u64)>,
    /// With a journal: each unjournaled block's header and ORDER bytes per substream.
    pub(super) keep: bool,
    pub(super) pending_hdr: std::collections::BTreeMap<u64, BlockHeader>,
    pub(super) pending_order: std::collections::BTreeMap<u64, [Vec<u8>; 2]>,
    pub(super) now: u64,
    pub(super) c: NodeCounters,
    pub(super) name: String,
    pub(super) suspect_since: u64,
    /// What failover needs of the round (07 §9.1–§9.3).
    pub(super) fo: super::failover::FailoverIo,
    /// Data box failure (07 §5.7): the gossip, its quorum, the redirects.
    pub(super) down: crate::front::data_down::DataDown,
    /// Voter index of each entry of `peers`.
    pub(super) peer_index: Vec<usize>,
    /// Per failed box: the sessions moved off it to their backup home.
    pub(super) moved: Vec<Vec<u32>>,
    /// PEER_DATA_MAX_PPS.
    pub(super) peer_data_tokens: Tokens,
    /// Per peer (by position in `peers`): its share of PEER_DATA_MAX_PPS and of
    /// REP_PEER_RTX_MAX_FPS (frames).
    pub(super) peer_data_share: Vec<Tokens>,
    pub(super) peer_rtx_share: Vec<Tokens>,
    /// The member envelope: every control message this replica sends is
    /// sealed under the link key of its destination (the box, a peer, a data box, the standby).
    pub(super) sealer: Sealer,
    pub(super) links: Vec<(SocketAddr, LinkKey)>,
    /// What it takes sealed: the box's HashList and SeqData, every peer's control messages.
    pub(super) opener: Opener,
    /// At a voter: the standby's replica's control address, whose TailReport it takes (07 §9.3).
    pub(super) standby_replica: Option<SocketAddr>,
    /// The standby's replica (07 §9.5): it sends the box no RepAck (the box gates on the
    /// voters' acks; its NACKs alone repair its holes).
    pub(super) standby: bool,
    /// A destination nothing is sent to (the lab's isolated box, `Node::isolate_seq_on`).
    pub(super) blackhole: Option<SocketAddr>,
}

impl Io {
    /// Queue one control message to member `to`, sealed under its link key (a destination
    /// with no link key is no member: nothing is sent, `tx_unsealed` counts it).
    pub(super) fn queue(&mut self, s: Sock, to: SocketAddr, f: impl FnOnce(&mut Vec<u8>) -> bool) {
        if self.blackhole == Some(to) {
            self.c.path_cut_drops += 1;
            return;
        }
        let Some((_, key)) = self.links.iter().find(|l| l.0 == to) else {
            self.c.tx_unsealed += 1;
            return;
        };
        let start = self.arena.len();
        if self.sealer.seal(&mut self.arena, key, f) {
            self.msgs.push((s, to, start, self.arena.len()));
        }
    }
}

impl ReplicaOut for Io {
    fn nack(&mut self, n: &Nack) {
        let to = self.seq_ctrl;
        self.queue(Sock::Ctrl, to, |b| n.encode(b).is_ok());
    }
    fn repair(&mut self, peer: usize, r: &RepairReq) {
        // The slot after the peers' is the standby's replica (07 §9.3: a reporter, so a holder
        // the seal's fetch may ask).
        let to = match self.peers.get(peer) {
            Some(&to) => Some(to),
            None if peer == self.peers.len() => self.standby_replica,
            None => None,
        };
        if let Some(to) = to {
            self.queue(Sock::Ctrl, to, |b| r.encode(b).is_ok());
        }
    }
    fn ack(&mut self, a: &RepAck) {
        if self.standby {
            return;
        }
        let to = self.seq_ctrl;
        self.queue(Sock::Ctrl, to, |b| a.encode(b).is_ok());
    }
    fn rx_alarm(&mut self, a: RxAlarm) {
        match a {
            RxAlarm::Path {
                path,
                raised,
                silent,
            } => eprintln!(
                "{}: alarm=REP_A_PATH state={} path={} cause={}",
                self.name,
                if raised { "raised" } else { "cleared" },
                if path == 0 { "A" } else { "B" },
                if silent { "silence" } else { "loss" }
            ),
            // Once per silence (order RX repeats it while the silence lasts).
            RxAlarm::Suspect { last_rx_ns } if last_rx_ns != self.suspect_since => {
                self.suspect_since = last_rx_ns;
                self.fo.suspected = true;
                eprintln!(
                    "{}: failover suspicion (07 §9.1): no frame on either path since t={} ms",
                    self.name,
                    last_rx_ns / 1_000_000
                )
            }
            RxAlarm::Suspect { .. } => {}
        }
    }
    fn data_fetch(&mut self, d: u8, f: &DataFetch) {
        if let Some(&to) = self.boxes.get(d as usize) {
            self.queue(Sock::Data, to, |b| f.encode(b).is_ok());
        }
    }
    fn peer_data_fetch(&mut self, peer: usize, key: PktKey, pkt_hash: u64) {
        // 07 §5.5 source 2: one peer, round robin (the data side chose it).
        if let Some(&to) = self.peers.get(peer) {
            let m = vyrn_wire::msg::ctrl::PeerDataFetch {
                session: key.session,
                pkt_seq: key.pkt_seq,
                pkt_hash,
            };
            self.queue(Sock::Ctrl, to, |b| m.encode(b).is_ok());
            self.c.peer_data_asked += 1;
        }
    }
    fn seq_data_req(&mut self, key: PktKey, pkt_hash: u64) {
        // 07 §5.5 source 3: the sequencer's control core, from its lanes' retention.
        let m = vyrn_wire::msg::ctrl::SeqDataReq {
            session: key.session,
            pkt_seq: key.pkt_seq,
            pkt_hash,
        };
        let to = self.seq_ctrl;
        self.queue(Sock::Ctrl, to, |b| m.encode(b).is_ok());
        self.c.seq_data_asked += 1;
    }
    fn hash_list_req(&mut self, r: &HashListReq) {
        let to = self.seq_ctrl;
        self.queue(Sock::Ctrl, to, |b| r.encode(b).is_ok());
    }
    fn copy_mismatch(&mut self, m: &CopyMismatch, _seq_pkt: &[u8], _data_pkt: &[u8]) {
        self.c.copy_mismatches += 1;
        // Evidence against the session's client (07 §5.6): the first few logged, all counted.
        if self.c.copy_mismatches <= 3 {
            let hex8 = |h: &Hash| {
                h[..8]
                    .iter()
                    .map(|b| format!("{b:02x}"))
                    .collect::<String>()
            };
            eprintln!(
                "{}: evidence=CopyMismatch session={} pkt_seq={} seq_hash={}… data_hash={}… (07 §5.6: the sequencer's copy is canonical; later ones counted in vyrn_replica_copy_mismatches_total)",
                self.name,
                m.session,
                m.pkt_seq,
                hex8(&m.seq_hash),
                hex8(&m.data_hash)
            );
        }
    }
    fn data_alarm(&mut self, a: DataAlarm) {
        // Per-packet outcomes are counted; box state changes are logged.
        match a {
            DataAlarm::Unavailable { .. } => {
                self.c.unavailable += 1;
                if self.c.unavailable <= 3 {
                    eprintln!(
                        "{}: data tier: {a:?} (every source asked; later ones counted)",
                        self.name
                    );
                }
            }
            _ => eprintln!("{}: data tier: {a:?}", self.name),
        }
    }
    fn fault(&mut self, f: &Fault) {
        self.c.seq_faults += 1;
        // 07 §9.1: REP_E_HASHLAG, or a stream the decoder had to stop (its bytes break 07 §3: a
        // sequencer fault, like a block failing order_root), is a suspicion.
        self.fo.fault = Some(if f.err.code == vyrn_wire::error::RepE::HashLag {
            vyrn_wire::msg::ctrl::SilenceReason::HashLag
        } else {
            vyrn_wire::msg::ctrl::SilenceReason::OrderRoot
        });
        eprintln!(
            "{}: alarm=SEQ_FAULT {:?} at block {} (07 §3.12, §10.1): that block and every later one is refused",
            self.name, f.err, f.height
        );
    }
    fn block(&mut self, _b: &BlockRoots) {
        self.c.blocks += 1;
    }
    fn header(&mut self, h: &BlockHeader) {
        self.headers.push((h.height, h.header_hash(), h.last_step));
        if self.keep {
            self.pending_hdr.insert(h.height, *h);
            while self.pending_hdr.len() > JOURNAL_PENDING_MAX {
                self.pending_hdr.pop_first();
            }
        }
    }
    fn order_bytes(&mut self, stream: u8, height: u64, bytes: &[u8]) {
        if self.keep && !bytes.is_empty() {
            self.pending_order.entry(height).or_default()[(stream & 1) as usize]
                .extend_from_slice(bytes);
            while self.pending_order.len() > JOURNAL_PENDING_MAX {
                self.pending_order.pop_first();
            }
        }
    }
    fn frame(&mut self, stream: u8, frame_seq: u64, frame: &[u8]) {
        let now = self.now;
        self.store.store(stream, frame_seq, frame, now);
    }
}

impl Node {
    /// Send what the round queued, one `sendmmsg` per socket per 64 datagrams.
    pub(super) fn flush(&mut self) -> usize {
        let n = self.io.msgs.len();
        if n == 0 {
            return 0;
        }
        for sock in [Sock::Ctrl, Sock::Data] {
            let mut txs = [TxPacket::new(&[]); TX_BATCH];
            let mut k = 0;
            let port = match sock {
                Sock::Ctrl => &mut self.ctrl,
                Sock::Data => &mut self.data,
            };
            let mut send = |txs: &[TxPacket<'_>], c: &mut NodeCounters| {
                let mut off = 0;
                while off < txs.len() {
                    match port.send_batch(&txs[off..]) {
                        Ok(0) | Err(_) => {
                            // Refused or full: dropped (the protocol's retries cover it).
                            c.tx_dropped += 1;
                            off += 1;
                        }
                        Ok(s) => {
                            c.tx += s as u64;
                            off += s;
                        }
                    }
                }
            };
            let mut c = self.io.c;
            for &(s, to, a, b) in &self.io.msgs {
                if s != sock {
                    continue;
                }
                txs[k] = TxPacket::to(&self.io.arena[a..b], Dest::Addr(to));
                k += 1;
                if k == TX_BATCH {
                    send(&txs[..k], &mut c);
                    k = 0;
                }
            }
            if k > 0 {
                send(&txs[..k], &mut c);
            }
            self.io.c = c;
        }
        self.io.msgs.clear();
        self.io.arena.clear();
        n
    }
}

/// The four sockets of voter `me`: paths A and B, control, data (07 §3.1).
pub(super) fn open_sockets(
    cfg: &NodeConfig,
    me: &vyrn_home::VoterMember,
) -> Result<([UdpPort; 2], UdpPort, UdpPort), String> {
    let h = &cfg.home;
    let ctrl_ip = me.ctrl_addr.ip();
    let open = |c: UdpConfig, what: &str| UdpPort::open(&c).map_err(|e| format!("{what}: {e}"));
    let pc = |i: usize| {
        // 07 §3.1: each path joined on this voter's own interface on that path's network.
        let mut c = UdpConfig::multicast_receiver_on(
            PATH_GROUPS[i],
            h.path_port + i as u16,
            me.path_ips[i],
        )
        .with_batch(RX_BATCH);
        c.recv_buffer = Some(8 << 20);
        open(c, if i == 0 { "path A" } else { "path B" })
    };
    let paths = [pc(0)?, pc(1)?];
    let mut cc = UdpConfig::new(me.ctrl_addr).with_batch(RX_BATCH);
    cc.recv_buffer = Some(4 << 20);
    let ctrl = open(cc, "control socket")?;
    let data_addr = match me.data_addr {
        Some(a) => a,
        None if h.databoxes.is_empty() => SocketAddr::new(ctrl_ip, 0),
        None => return Err(format!("voter {} has no data_addr", cfg.index)),
    };
    let mut dc = UdpConfig::new(data_addr).with_batch(RX_BATCH);
    dc.recv_buffer = Some(8 << 20);
    let data = open(dc, "data socket")?;
    Ok((paths, ctrl, data))
}
