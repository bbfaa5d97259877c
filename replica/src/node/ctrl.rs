//! Control datagrams (07 §4.10, §5.5, §6.8): who may send what, sealed envelopes opened, and the
//! per-peer token buckets of the services a replica gives its peers.

use super::*;

/// Payloads a replica serves its peers per second (07 §5.5 names REP_SEQ_DATA_MAX_PPS for the
/// sequencer's source; a peer gets the same bound).
pub const PEER_DATA_MAX_PPS: u64 = 50_000;

/// A token bucket of `rate` a second with a burst of `burst`.
#[derive(Debug)]
pub(super) struct Tokens {
    pub(super) rate: u64,
    pub(super) burst: u64,
    pub(super) left: u64,
    pub(super) at: u64,
}

impl Tokens {
    pub(super) fn new(rate: u64, burst: u64) -> Self {
        Tokens {
            rate: rate.max(1),
            burst,
            left: burst,
            at: 0,
        }
    }
    pub(super) fn take(&mut self, now: u64) -> bool {
        let per = 1_000_000_000 / self.rate;
        if now > self.at {
            let add = (now - self.at) / per.max(1);
            if add > 0 {
                self.left = (self.left + add).min(self.burst);
                self.at += add * per;
            }
        }
        if self.left == 0 {
            return false;
        }
        self.left -= 1;
        true
    }
    /// Take `n` more after the fact (a request whose cost is known once served), to zero.
    pub(super) fn spend(&mut self, n: u64) {
        self.left = self.left.saturating_sub(n);
    }
}

/// A fair share per peer of a service's budget: each of `peers` gets
/// `rate / peers` a second and `burst / peers` at once, so one peer (or a spoofer of one, before
/// the seal) cannot use up what the others need.
pub(super) fn per_peer(peers: usize, rate: u64, burst: u64) -> Vec<Tokens> {
    let k = peers.max(1) as u64;
    (0..peers)
        .map(|_| Tokens::new(rate / k, (burst / k).max(1)))
        .collect()
}

/// A datagram from the box's control port: its retransmissions, NackTooOld, HashList, SeqData
/// and REP_DurableMark.
fn on_box(core: &mut ReplicaCore, io: &mut Io, epoch: u32, b: &[u8], now: u64) {
    // HashList and SeqData come sealed by the box; frames (order_root),
    // NackTooOld (seq_sig) and REP_DurableMark (counted only) come bare.
    let sealed = seal::Sealed::is_sealed(b);
    let b = if sealed {
        match io.opener.open(b) {
            Ok((f, body)) if f == seal::from::BOX_HASHER || f == seal::from::BOX_CTRL => body,
            Ok(_) | Err(_) => {
                io.c.bad_seal += 1;
                return;
            }
        }
    } else {
        b
    };
    match CtrlMsg::parse(b) {
        _ if b.len() >= 2 && u16::from_le_bytes([b[0], b[1]]) == FRAME_MAGIC => {
            // The sequencer's retransmission, unicast to this replica (07 §4.10).
            io.c.rtx_in += 1;
            core.on_path_frame(REPAIR_CHANNEL, b, now, io);
        }
        // Signed by the box (security review F17): a forged one would stop NACKs to it.
        Ok(CtrlMsg::NackTooOld(t))
            if t.epoch == epoch
                && t.tenure == core.order_rx().tenure().0
                && t.verify(&io.seq_pub) =>
        {
            io.c.too_old += 1;
            core.on_too_old(t.stream, t.oldest_seq);
        }
        Ok(CtrlMsg::HashList(l)) if sealed => core.on_hash_list(&l, now, io),
        Ok(CtrlMsg::RepDurableMark(_)) => io.c.durable_marks += 1,
        // The canonical copy (07 §5.5 source 3, §5.6): checked like any other.
        Ok(CtrlMsg::SeqData(d)) if sealed => {
            io.c.seq_data_rx += 1;
            core.on_fetched(Source::Seq, &d.pkt, now, io);
        }
        Ok(CtrlMsg::HashList(_) | CtrlMsg::SeqData(_)) => io.c.unsealed += 1,
        _ => io.c.ctrl_bad += 1,
    }
}

/// `b` opened as sealed by member `from` (its envelope checked, fresh); `None`, counted
/// (`unsealed`, `bad_seal`), otherwise.
fn open_sealed<'a>(io: &mut Io, from: u8, b: &'a [u8]) -> Option<&'a [u8]> {
    match io.opener.open_from(from, b) {
        Ok(body) => Some(body),
        Err(SealErr::NotSealed) => {
            io.c.unsealed += 1;
            None
        }
        Err(_) => {
            io.c.bad_seal += 1;
            None
        }
    }
}

/// 07 §5.5: a peer (share `slot`, at `to`) asks for a payload this replica stored; answered
/// when held, at most PEER_DATA_MAX_PPS a second (the asker moves to its next source otherwise).
fn serve_data(
    core: &ReplicaCore,
    io: &mut Io,
    f: &vyrn_wire::msg::ctrl::PeerDataFetch,
    slot: usize,
    to: SocketAddr,
    now: u64,
) {
    let key = PktKey {
        session: f.session,
        pkt_seq: f.pkt_seq,
    };
    let Some(pkt) = core.data().payload_for(key, f.pkt_hash) else {
        io.c.peer_data_missing += 1;
        return;
    };
    let share = io
        .peer_data_share
        .get_mut(slot)
        .is_some_and(|t| t.take(now));
    if !share || !io.peer_data_tokens.take(now) {
        io.c.peer_data_capped += 1;
        return;
    }
    io.queue(Sock::Ctrl, to, |b| {
        vyrn_wire::msg::ctrl::PeerData::encode_parts(f.session, f.pkt_seq, pkt, b)
    });
    io.c.peer_data_served += 1;
}

/// 07 §4.10: a peer's RepairReq (share `slot`, at `to`), served from the frame store within its
/// share of REP_PEER_RTX_MAX_FPS: one peer's storm never uses up the store's whole budget.
/// Frames the store lacks that order RX holds above a hole are served too: 07 §9.3's seal
/// fetch asks for what a TailReport's `extra` named.
fn serve_repair(
    core: &ReplicaCore,
    io: &mut Io,
    r: &vyrn_wire::msg::ctrl::RepairReq,
    slot: usize,
    to: SocketAddr,
    now: u64,
) {
    if !io.peer_rtx_share.get_mut(slot).is_some_and(|t| t.take(now)) {
        io.c.repairs_over_share += 1;
        return;
    }
    let Io {
        store,
        arena,
        msgs,
        c,
        peer_rtx_share,
        ..
    } = io;
    c.repairs_served.0 += 1;
    let served = store.serve(r, now, |f| {
        let start = arena.len();
        arena.extend_from_slice(f);
        msgs.push((Sock::Ctrl, to, start, arena.len()));
        c.repairs_served.1 += 1;
    });
    let mut sent = served.sent;
    if served.missing > 0 && r.tenure == core.order_rx().tenure().0 {
        let top = r
            .to_seq
            .min(r.from_seq.saturating_add(vyrn_wire::consts::NACK_SPAN_MAX));
        for (_, f) in core.held_range(r.stream, r.from_seq, top) {
            let start = arena.len();
            arena.extend_from_slice(f);
            if let Some(b) = arena.get_mut(start + vyrn_wire::frame::FLAGS_OFFSET) {
                *b |= vyrn_wire::frame::FLAG_PEER_REPAIRED;
            }
            msgs.push((Sock::Ctrl, to, start, arena.len()));
            c.repairs_served.1 += 1;
            c.repairs_served_held += 1;
            sent += 1;
        }
    }
    peer_rtx_share[slot].spend(sent.saturating_sub(1));
}

/// At a voter, a datagram from the standby's replica (07 §9.5), sealed by it: its `Silence`, for
/// its TailReport (07 §9.3: it reports, its Silence never counts toward Q), and its RepairReq
/// and PeerDataFetch, served like a peer's under a share of their own (the slot after the
/// peers'); and, unsealed, the frames it sends back to this voter's seal fetch. Nothing else is
/// taken from it.
fn on_standby(
    core: &mut ReplicaCore,
    io: &mut Io,
    epoch: u32,
    src: SocketAddr,
    b: &[u8],
    now: u64,
) {
    if b.len() >= 2 && u16::from_le_bytes([b[0], b[1]]) == FRAME_MAGIC {
        // A frame the standby's replica sent back to this voter's seal fetch (07 §9.3: it
        // reported holding it): into order RX as peer-supplied, for a hole only.
        core.on_path_frame(PEER_CHANNEL, b, now, io);
        return;
    }
    let Some(body) = open_sealed(io, seal::from::STANDBY, b) else {
        return;
    };
    match CtrlMsg::parse(body) {
        Ok(CtrlMsg::Silence(m)) => super::failover::queue_standby_report(io, m.report),
        Ok(CtrlMsg::PeerDataFetch(f)) => {
            let slot = io.peers.len();
            serve_data(core, io, &f, slot, src, now)
        }
        Ok(CtrlMsg::RepairReq(r)) if r.epoch == epoch => {
            let slot = io.peers.len();
            serve_repair(core, io, &r, slot, src, now)
        }
        _ => io.c.ctrl_bad += 1,
    }
}

/// A control datagram from `src`.
pub(super) fn on_ctrl(
    core: &mut ReplicaCore,
    io: &mut Io,
    epoch: u32,
    src: Option<SocketAddr>,
    b: &[u8],
    now: u64,
) {
    let Some(src) = src else {
        io.c.unknown_src += 1;
        return;
    };
    if src == io.seq_ctrl {
        on_box(core, io, epoch, b, now);
        return;
    }
    if Some(src) == io.standby_replica {
        on_standby(core, io, epoch, src, b, now);
        return;
    }
    let Some(peer) = io.peers.iter().position(|&p| p == src) else {
        io.c.unknown_src += 1;
        return;
    };
    if b.len() >= 2 && u16::from_le_bytes([b[0], b[1]]) == FRAME_MAGIC {
        // A peer-repaired frame (trusted only once its block's order_root checks, 07 §4.10):
        // into order RX as peer-repaired, for a hole only.
        core.on_path_frame(PEER_CHANNEL, b, now, io);
        return;
    }
    // Every other message from a peer comes sealed by that peer.
    let Some(b) = open_sealed(io, seal::from::voter(io.peer_index[peer]), b) else {
        return;
    };
    match CtrlMsg::parse(b) {
        // 07 §10.1: a peer's equivocation evidence, checked at the next round.
        Ok(CtrlMsg::SeqEquivocation(m)) => super::failover::queue_evidence(io, *m),
        // 07 §9.4: the seal leader's offer, for the desk at the next round.
        Ok(CtrlMsg::SealOffer(m)) => super::failover::queue_seal_offer(io, *m),
        // 07 §9.4: at the standby's replica, a voter's certificate of the final seal.
        Ok(CtrlMsg::SealCert(m)) if io.standby => super::failover::queue_seal_cert(io, *m),
        // 07 §9.1: a peer's Silence, checked and counted by the deposition at the next round.
        Ok(CtrlMsg::Silence(m)) => {
            let voter = io.peer_index[peer];
            super::failover::queue_silence(io, voter, *m);
        }
        // 07 §5.7: a peer's DataDown gossip, counted toward the quorum by its voter index.
        Ok(CtrlMsg::DataDown(m)) => {
            io.c.data_down_rx += 1;
            let voter = io.peer_index[peer];
            io.down.on_peer(voter, m.d, now);
        }
        Ok(CtrlMsg::PeerDataFetch(f)) => {
            let to = io.peers[peer];
            serve_data(core, io, &f, peer, to, now)
        }
        // A peer's answer: checked like any pushed packet (the replica's own full hash).
        Ok(CtrlMsg::PeerData(d)) => {
            io.c.peer_data_rx += 1;
            core.on_fetched(Source::Peer(peer), &d.pkt, now, io);
        }
        Ok(CtrlMsg::RepairReq(r)) if r.epoch == epoch => {
            let to = io.peers[peer];
            serve_repair(core, io, &r, peer, to, now)
        }
        _ => io.c.ctrl_bad += 1,
    }
}

/// A link key with every member this replica talks to, agreed from its vote key and theirs
/// (`vyrn_wire::msg::seal`), and the opener of what they seal to it.
pub(super) fn member_links(
    cfg: &NodeConfig,
    seq_ctrl: SocketAddr,
    boxes: &[SocketAddr],
) -> Result<(Vec<(SocketAddr, LinkKey)>, Opener), String> {
    let h = &cfg.home;
    let agree = |k: &ed25519_dalek::VerifyingKey, what: &str| {
        LinkKey::agree(&cfg.vote_key, k).ok_or_else(|| format!("{what}: no link key"))
    };
    let mut links: Vec<(SocketAddr, LinkKey)> = Vec::new();
    let mut opener = Opener::new(h.epoch);
    let to_box = agree(&h.seq_pub, "seq_pub")?;
    opener.add(seal::from::BOX_HASHER, to_box.clone());
    opener.add(seal::from::BOX_CTRL, to_box.clone());
    links.push((seq_ctrl, to_box));
    for v in h.voters_members.iter().filter(|v| v.index != cfg.index) {
        let k = agree(&v.vote_key, "a peer's vote_key")?;
        opener.add(seal::from::voter(v.index), k.clone());
        links.push((v.ctrl_addr, k));
    }
    for (d, a) in h.databoxes.iter().zip(boxes) {
        links.push((*a, agree(&d.link_key, "a data box's link_key")?));
    }
    if let (Some(a), Some(k)) = (h.standby_ctrl, h.standby_key) {
        let link = agree(&k, "the standby's link_key")?;
        // A voter takes the standby's replica's TailReport (07 §9.3), sealed by it.
        if let (false, Some(r)) = (cfg.standby, h.standby_replica) {
            opener.add(seal::from::STANDBY, link.clone());
            links.push((r.ctrl_addr, link.clone()));
        }
        links.push((a, link));
    }
    Ok((links, opener))
}
