//! The box's control port (missing-chapters §4, cold tiles): the control-port tile (acks to
//! control, NACKs and HashListReq to their tiles, certificates to the certificate tile, the
//! voters' and data boxes' reports), its token buckets, and the certificate tile.

use super::*;

/// How many RepAcks may wait in the control-port tile's overflow when control's inbox ring is
/// full (acks are periodic state: a dropped one is replaced 50 µs later).
pub(super) const ACK_OVERFLOW_MAX: usize = 4096;

/// Certificates each voter may hand the certificate tile per second, and its burst (a voter
/// sends one per finalization, a few hundred per second at most).
pub(super) const CERT_PER_SEC: u64 = 2000;
pub(super) const CERT_BURST: u64 = 64;

/// The control-port tile: acks timestamped and queued for control, NACKs and HashListReq to
/// their tiles, certificates to the certificate tile — nothing slow here.
pub(super) struct CtrlRxTile {
    pub(super) ctrl: UdpPort,
    pub(super) batch: RxBatch,
    pub(super) voters: HashMap<SocketAddr, usize>,
    /// The standby's replica's index in `voters` (07 §9.5): sealed `from::STANDBY`, served
    /// NACKs and data requests only.
    pub(super) standby: Option<usize>,
    pub(super) epoch: u32,
    /// This box's tenure: a RepAck or NACK of another is refused (07 §2.2).
    pub(super) tenure: u8,
    /// Control's ack inbox (bounded overflow).
    pub(super) inbox: tiles::Outq<CtrlIn>,
    /// The certificate tile's ring (bounded: full means dropped and counted).
    pub(super) certs: Producer<(usize, Vec<u8>)>,
    /// Per voter: certificate tokens and when they were last refilled.
    pub(super) cert_tokens: Vec<(u64, u64)>,
    /// Per voter: HashListReq tokens and when they were last refilled.
    pub(super) hash_tokens: Vec<(u64, u64)>,
    pub(super) nacks: Vec<Producer<NackReq>>,
    pub(super) hash_reqs: Producer<tiles::HashReq>,
    pub(super) stats: Arc<NetStats>,
    /// 07 §5.5 source 3: each session's lane, the lanes' SeqDataReq rings and their answers,
    /// and the REP_SEQ_DATA_MAX_PPS budget (tokens, last refill).
    pub(super) lane_of: HashMap<u32, u8>,
    pub(super) data_asks: Vec<Producer<crate::retain::SeqDataAsk>>,
    pub(super) data_answers: Vec<Consumer<crate::retain::SeqDataAnswer>>,
    pub(super) data_tokens: (u64, u64),
    /// Per voter: its share of REP_SEQ_DATA_MAX_PPS (1/(f + 1) of the rate and the burst, issue
    /// 28 item 5: the f Byzantine voters' storm never starves the others' fetches).
    pub(super) data_share: Vec<(u64, u64)>,
    /// Per voter: its share of REP_RTX_MAX_FPS in NACKed frames (F5): the
    /// stream core serves NACKs (07 D6), so what one voter may ask of it is bounded here, on
    /// this cold tile, before the NACK reaches the hot one.
    pub(super) nack_share: Vec<(u64, u64)>,
    /// The member envelope: every voter's message comes sealed by it; the
    /// SeqData answers leave sealed (`from::BOX_CTRL`).
    pub(super) opener: Opener,
    pub(super) sealer: Sealer,
    pub(super) links: HashMap<SocketAddr, LinkKey>,
    pub(super) seal_buf: Vec<u8>,
    /// The data boxes' link keys: their 07 §5.2 reports come sealed from an ephemeral port
    /// (security review F13).
    pub(super) databoxes: Opener,
}

/// HashListReqs a voter may make a second (07 §5.6 row 2 asks once per differing block; a
/// project bound), and the burst.
pub(super) const HASH_LIST_PER_SEC: u64 = 50;
pub(super) const HASH_LIST_BURST: u64 = 16;

/// Newly signed NackTooOld answers a stream core makes a second at most (each costs an Ed25519
/// signature on that core; a project bound, security review F17).
pub(super) const NACK_TOO_OLD_PER_SEC: u64 = 100;

/// Frames one voter may NACK back to back before its share of REP_RTX_MAX_FPS holds (a whole
/// NACK span, `NACK_SPAN_MAX`).
pub(super) const NACK_SHARE_BURST: u64 = vyrn_wire::consts::NACK_SPAN_MAX;

/// A voter's share of REP_RTX_MAX_FPS: all of it. The bucket bounds what one voter may ask of
/// a stream core (its rate, a span at a time) on this cold tile, before the NACK reaches the hot
/// one; it does not split the rate among voters. 1/(f + 1) was tried: a replica catching up
/// after a restart then had half the box's retransmissions, its NACKs were dropped silently and
/// its retries backed off, and its peers served 3–20× more frames (`replica/tests/catchup.rs`).
pub(super) fn nack_share_rate(_voters: usize) -> u64 {
    vyrn_wire::consts::REP_RTX_MAX_FPS
}

/// Take a NACK of `span` frames from a voter's share `t` (tokens, last refill) of
/// REP_RTX_MAX_FPS among `voters` ([`nack_share_rate`]): it needs a token per frame of its span
/// (at most a burst), so a voter that NACKs wide ranges waits in proportion.
pub(super) fn nack_share_take(t: &mut (u64, u64), now: u64, span: u64, voters: usize) -> bool {
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
pub(super) const SEQ_DATA_BURST: u64 = 1024;

/// Take a token at `now` from bucket `t` = (tokens, last refill) of `per_sec` a second and
/// `burst` at most.
pub(super) fn take_token(t: &mut (u64, u64), now: u64, per_sec: u64, burst: u64) -> bool {
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
pub(super) fn seq_data_token(t: &mut (u64, u64), now: u64) -> bool {
    take_token(
        t,
        now,
        vyrn_wire::consts::REP_SEQ_DATA_MAX_PPS,
        SEQ_DATA_BURST,
    )
}

/// Take a certificate token of voter `v` at `now` (a token bucket per source).
pub(super) fn cert_token(tokens: &mut [(u64, u64)], v: usize, now: u64) -> bool {
    tokens
        .get_mut(v)
        .is_some_and(|t| take_token(t, now, CERT_PER_SEC, CERT_BURST))
}

/// 07 §5.2: a data box's `DataBadMac`, `CopyConflict` or the evidence frame after it, counted
/// (the session rules they feed are 01 §12.5's, not in this build).
pub(super) fn on_data_report(stats: &NetStats, body: &[u8]) {
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

impl CtrlRxTile {
    /// The lanes' SeqData answers (07 §5.5 source 3), sealed and sent from this port.
    fn send_seq_data_answers(&mut self) {
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
    }

    /// The envelope's `from` of registered index `v`: a voter's index, or the standby's.
    fn sender_of(&self, v: usize) -> u8 {
        if Some(v) == self.standby {
            seal::from::STANDBY
        } else {
            seal::from::voter(v)
        }
    }

    /// 07 §9.5: the standby's replica votes in nothing and gates nothing — its NACKs and data
    /// requests only; a voter may send anything the match below takes.
    fn may_send(
        &self,
        v: usize,
        msg: &Result<vyrn_wire::msg::ctrl::CtrlMsg, vyrn_wire::Malformed>,
    ) -> bool {
        use vyrn_wire::msg::ctrl::CtrlMsg;
        Some(v) != self.standby
            || matches!(
                msg,
                Ok(CtrlMsg::Nack(_) | CtrlMsg::SeqDataReq(_) | CtrlMsg::HashListReq(_))
            )
    }
}

impl Task for CtrlRxTile {
    fn name(&self) -> String {
        "ctrl-rx".into()
    }
    fn backpressure(&self) -> u64 {
        self.inbox.spilled()
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
        self.send_seq_data_answers();
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
            let body = match self.opener.open_from(self.sender_of(v), p.data) {
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
                m if !self.may_send(v, &m) => bump(&self.stats.ctrl_bad),
                Ok(CtrlMsg::RepAck(a)) if a.epoch == self.epoch && a.tenure == self.tenure => {
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
                Ok(CtrlMsg::Nack(k)) if k.epoch == self.epoch && k.tenure == self.tenure => {
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
pub(super) struct CertTile {
    pub(super) certs: Consumer<(usize, Vec<u8>)>,
    pub(super) listener: vyrn_consensus::FinalityListener,
    /// 07 §7.4: a `Diverge` halts the book only with its evidence checked.
    pub(super) diverge: vyrn_consensus::roots::DivergeGate,
    pub(super) votes: tiles::Outq<CtrlIn>,
    pub(super) stats: Arc<NetStats>,
}

impl Task for CertTile {
    fn name(&self) -> String {
        "cert".into()
    }
    fn backpressure(&self) -> u64 {
        self.votes.spilled()
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
