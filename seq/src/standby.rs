//! The warm standby's finality listener (07 §6.8) as a tile: every voter sends its finalize
//! vote, and later each `REP_FinalityCert`, to the sequencer's *and the standby's* control port,
//! so the standby learns finality at the same hop as the sequencer — the state a promoted standby
//! needs first. It runs the same listener as the box's cold certificate tile
//! ([`FinalityListener`]: votes kept per proposal, batch-verified once Q distinct voters signed,
//! `final_height` only with Q valid signatures).
//!
//! What it takes: datagrams from a voter's `ctrl_addr` only, sealed under the link key agreed
//! with that voter (the member envelope, docs/security.md); a finalize vote only from the address
//! of the voter it names; every vote and certificate charged to the voter it came from
//! ([`FinalityListener::on_cert_from`], security review F16), each voter held to
//! [`CERT_PER_SEC`](vyrn_consensus::listener::CERT_PER_SEC) with a burst of
//! [`CERT_BURST`](vyrn_consensus::listener::CERT_BURST) before any signature check. The rest is
//! counted ([`Counts`]) and dropped.
//!
//! Not built: the rest of the warm standby of 07 §9 — its replay, TailReport and promotion.

use std::collections::HashMap;
use std::net::SocketAddr;

use vyrn_consensus::listener::CertTokens;
use vyrn_consensus::{FinalityListener, VoteOutcome, Voters};
use vyrn_home::HomeConfig;
use vyrn_nic::udp::{UdpConfig, UdpPort};
use vyrn_nic::{Port, RxBatch};
use vyrn_wire::msg::ctrl::CtrlMsg;
use vyrn_wire::msg::seal::{self, LinkKey, Opener, SealErr};

vyrn_metrics::metrics! {
    /// Every family this role renders (docs/sre.md's metric reference and the Grafana
    /// dashboard are generated from the tables: `vyrn metrics`).
    pub METRICS;
    STANDBY_FINAL_HEIGHT: Gauge "vyrn_standby_final_height" []
        "the standby's final height: Q valid finalize votes for a proposal ending there (07 §6.8)";
    STANDBY_FINAL_VIEW: Gauge "vyrn_standby_final_view" []
        "the view of that proposal";
    STANDBY_MESSAGES: Counter "vyrn_standby_messages_total" ["what"]
        "control datagrams by what became of them";
    STANDBY_BAD_SIGNATURES: Counter "vyrn_standby_bad_signatures_total" []
        "votes whose signature failed the batch check";
    STANDBY_FINALIZED: Counter "vyrn_standby_finalized_total" []
        "proposals that reached Q valid votes";
}

/// What the standby counted.
#[derive(Debug, Default, Clone, Copy)]
pub struct Counts {
    /// Finalize votes and certificates taken into the listener.
    pub taken: u64,
    /// From an address that is no voter's.
    pub unknown: u64,
    /// Neither a vote nor a certificate (or malformed).
    pub other: u64,
    /// Refused by the listener, with a failed signature, or a vote naming another voter than
    /// its sender.
    pub bad: u64,
    /// Over the sending voter's rate (`CERT_PER_SEC`, burst `CERT_BURST`): dropped unread.
    pub limited: u64,
    /// From a voter's address but bare (the member envelope is required).
    pub unsealed: u64,
    /// Sealed, but the tag does not verify, names another sender, or is a replay.
    pub bad_seal: u64,
}

/// The standby's listener on its control port.
#[derive(Debug)]
pub struct Standby<P: Port> {
    listener: FinalityListener,
    tokens: CertTokens,
    /// Each voter's `ctrl_addr`.
    voters: HashMap<SocketAddr, usize>,
    /// Each voter's link key and replay window.
    opener: Opener,
    port: P,
    rx: RxBatch,
    counts: Counts,
}

/// Open the standby of `home` on its `[standby] ctrl_addr`; `me` is its identity, whose public
/// key must be `[standby] link_key`.
pub fn open(home: &HomeConfig, me: &ed25519_dalek::SigningKey) -> Result<Standby<UdpPort>, String> {
    let at = home
        .standby_ctrl
        .ok_or("the home's file has no [standby] section (its ctrl_addr)")?;
    if Some(me.verifying_key()) != home.standby_key {
        return Err("the key is not the secret of [standby] link_key".into());
    }
    let keys: Vec<[u8; 32]> = home
        .voters_members
        .iter()
        .map(|v| v.vote_key.to_bytes())
        .collect();
    if keys.is_empty() {
        return Err("the home's file names no voters".into());
    }
    let set = Voters::with_simplex_quorum(home.epoch, &keys)
        .map_err(|e| format!("the voters' keys do not form a voting set: {e:?}"))?;
    let voters: HashMap<SocketAddr, usize> = home
        .voters_members
        .iter()
        .map(|v| (v.ctrl_addr, v.index))
        .collect();
    // Each voter's messages come sealed under the link key agreed with it.
    let mut opener = Opener::new(home.epoch);
    for v in &home.voters_members {
        let k = LinkKey::agree(me, &v.vote_key)
            .ok_or_else(|| format!("voter {}'s vote_key gives no link key", v.index))?;
        opener.add(seal::from::voter(v.index), k);
    }
    let mut c = UdpConfig::new(at).with_batch(64);
    c.recv_buffer = Some(4 << 20);
    let port = UdpPort::open(&c).map_err(|e| format!("control port {at}: {e}"))?;
    Ok(Standby::new(
        FinalityListener::new(set, 0),
        voters,
        opener,
        port,
    ))
}

impl<P: Port> Standby<P> {
    /// The listener on `port`, taking `voters`' messages opened by `opener`.
    pub fn new(
        listener: FinalityListener,
        voters: HashMap<SocketAddr, usize>,
        opener: Opener,
        port: P,
    ) -> Self {
        Standby {
            tokens: CertTokens::new(listener.voters().n()),
            listener,
            voters,
            opener,
            port,
            rx: RxBatch::new(64, 2048),
            counts: Counts::default(),
        }
    }

    /// The listener (final height and view, its counters).
    pub fn listener(&self) -> &FinalityListener {
        &self.listener
    }

    /// What it counted.
    pub fn counts(&self) -> &Counts {
        &self.counts
    }

    /// The control port.
    pub fn port(&self) -> &P {
        &self.port
    }

    /// The listener's metrics (docs/sre.md), rendered through its table ([`METRICS`]).
    pub fn metrics(&self, e: &mut vyrn_metrics::Exposition) {
        let (l, c) = (&self.listener, &self.counts);
        let lc = l.counters();
        e.put_gauge(&STANDBY_FINAL_HEIGHT, &[], l.final_height() as f64);
        e.put_gauge(&STANDBY_FINAL_VIEW, &[], l.final_view() as f64);
        for (what, v) in [
            ("taken", c.taken),
            ("unknown_source", c.unknown),
            ("other", c.other),
            ("bad", c.bad),
            ("limited", c.limited),
            ("unsealed", c.unsealed),
            ("bad_seal", c.bad_seal),
        ] {
            e.put_counter(&STANDBY_MESSAGES, &[what], v);
        }
        e.put_counter(&STANDBY_BAD_SIGNATURES, &[], lc.bad_sigs);
        e.put_counter(&STANDBY_FINALIZED, &[], lc.finalized);
    }

    /// One batch from the control port at `now` ns; the datagrams read.
    pub fn poll(&mut self, now: u64) -> usize {
        let n = self.port.recv_batch(&mut self.rx).unwrap_or(0);
        for p in self.rx.iter() {
            let Some(v) = p.meta.src.and_then(|a| self.voters.get(&a).copied()) else {
                self.counts.unknown += 1;
                continue;
            };
            let body = match self.opener.open_from(seal::from::voter(v), p.data) {
                Ok(b) => b,
                Err(SealErr::NotSealed) => {
                    self.counts.unsealed += 1;
                    continue;
                }
                Err(_) => {
                    self.counts.bad_seal += 1;
                    continue;
                }
            };
            take(
                &mut self.listener,
                &mut self.tokens,
                &self.voters,
                &mut self.counts,
                (p.meta.src, body),
                now,
            );
        }
        n
    }
}

/// The standby's one cold tile: it blocks on its control port.
impl<P: Port + Send + 'static> vyrn_tile::Task for Standby<P> {
    fn name(&self) -> String {
        "standby".into()
    }
    fn class(&self) -> vyrn_tile::TileClass {
        vyrn_tile::TileClass::Cold
    }
    fn wait_fd(&self) -> Option<std::os::fd::RawFd> {
        self.port.wait_fd()
    }
    fn poll(&mut self, now: u64) -> bool {
        Standby::poll(self, now) > 0
    }
}

/// One control message `(source, bytes)` (its seal opened) at `now` ns into the listener: from a voter's
/// address only, a vote only from the voter it names, within that voter's tokens, charged to
/// that voter (07 §6.8; the box's control port and certificate tile do the same).
fn take(
    listener: &mut FinalityListener,
    tokens: &mut CertTokens,
    voters: &HashMap<SocketAddr, usize>,
    counts: &mut Counts,
    (src, data): (Option<SocketAddr>, &[u8]),
    now: u64,
) {
    let Some(v) = src.and_then(|a| voters.get(&a).copied()) else {
        counts.unknown += 1;
        return;
    };
    let cert = match CtrlMsg::parse(data) {
        Ok(CtrlMsg::FinalityCert(c)) => *c,
        // 07 §6.8: one voter's finalize vote, from that voter's own address.
        Ok(CtrlMsg::FinalizeVote(fv)) if fv.index as usize == v => fv.as_cert(),
        Ok(CtrlMsg::FinalizeVote(_)) => {
            counts.bad += 1;
            return;
        }
        _ => {
            counts.other += 1;
            return;
        }
    };
    // 07 §6.8: a token bucket per voter, before any signature check (the box's `cert_token`).
    if !tokens.take(v, now) {
        counts.limited += 1;
        return;
    }
    let before = listener.counters().bad_sigs;
    match listener.on_cert_from(v, &cert) {
        VoteOutcome::Bad => counts.bad += 1,
        _ if listener.counters().bad_sigs > before => counts.bad += 1,
        _ => counts.taken += 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use vyrn_consensus::listener::{CERT_BURST, CERT_PER_SEC};
    use vyrn_wire::msg::consensus::{CertEntry, ProposalKind, RepFinalityCert, RepProposal};
    use vyrn_wire::msg::ctrl::FinalizeVote;

    const EPOCH: u32 = 2;

    fn seed(i: u8) -> [u8; 32] {
        [0x70 + i; 32]
    }

    fn setup() -> (FinalityListener, CertTokens, HashMap<SocketAddr, usize>) {
        let keys: Vec<[u8; 32]> = (0..4)
            .map(|i| {
                ed25519_dalek::SigningKey::from_bytes(&seed(i))
                    .verifying_key()
                    .to_bytes()
            })
            .collect();
        let set = Voters::with_simplex_quorum(EPOCH, &keys).unwrap();
        let voters = (0..4)
            .map(|i| (addr(i), i))
            .collect::<HashMap<SocketAddr, usize>>();
        (FinalityListener::new(set, 0), CertTokens::new(4), voters)
    }

    fn addr(i: usize) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], 9000 + i as u16))
    }

    fn proposal(tag: u8) -> RepProposal {
        RepProposal {
            kind: ProposalKind::Headers,
            epoch: EPOCH,
            first_height: 1,
            last_height: 3,
            last_hash: [tag; 32],
            excl_root: [0; 32],
        }
    }

    /// A certificate as its control message (type byte first).
    fn cert_bytes(c: &RepFinalityCert) -> Vec<u8> {
        let mut b = vec![vyrn_wire::msg::ctrl::ty::FINALITY_CERT];
        c.encode(&mut b).unwrap();
        b
    }

    fn vote(l: &FinalityListener, i: u8, p: &RepProposal) -> FinalizeVote {
        let sig =
            vyrn_consensus::cert::sign_finalize(l.voters(), &seed(i), EPOCH, 2, 1, p).unwrap();
        FinalizeVote {
            epoch: EPOCH,
            view: 2,
            parent_view: 1,
            proposal: *p,
            index: i,
            sig,
        }
    }

    /// Security review F16: a voter past its burst is dropped before any check, at the box's
    /// rate (2000/s, burst 64); the other voters are not; a vote naming another voter than its
    /// sender is refused.
    #[test]
    fn each_voter_is_held_to_its_own_token_bucket() {
        let (mut l, mut t, voters) = setup();
        let mut c = Counts::default();
        let mut send = |l: &mut FinalityListener, c: &mut Counts, from: usize, b: &[u8], now| {
            take(l, &mut t, &voters, c, (Some(addr(from)), b), now)
        };
        // Voter 3 floods "certificates" naming voters 0, 1 and 2 (signatures no one's).
        let junk = |p: RepProposal, view: u64| RepFinalityCert {
            epoch: EPOCH,
            view,
            parent_view: view - 1,
            proposal: p,
            entries: (0..3u8)
                .map(|index| CertEntry {
                    index,
                    sig: [7; 64],
                })
                .collect(),
        };
        for k in 0..(CERT_BURST + 100) {
            send(
                &mut l,
                &mut c,
                3,
                &cert_bytes(&junk(proposal(k as u8), 2)),
                1_000,
            );
        }
        // The burst reached the listener (and failed its check), the rest was dropped unread.
        assert_eq!((c.bad, c.limited), (CERT_BURST, 100));
        assert_eq!(l.counters().bad_sigs, 3 * CERT_BURST);
        // A vote naming voter 0 sent from voter 1's address: refused.
        let p = proposal(0xee);
        let b = vote(&l, 0, &p).to_bytes().unwrap();
        send(&mut l, &mut c, 1, &b, 1_000);
        assert_eq!(c.bad, CERT_BURST + 1);
        // The honest voters, at the same instant, still finalize.
        for i in 0..3u8 {
            let b = vote(&l, i, &p).to_bytes().unwrap();
            send(&mut l, &mut c, i as usize, &b, 1_000);
        }
        assert_eq!((l.final_height(), c.taken), (3, 3));
        // Voter 3 gets one token back after 1/2000 s.
        let next = RepProposal {
            first_height: 4,
            last_height: 4,
            ..proposal(1)
        };
        let b = cert_bytes(&junk(next, 3));
        let per = 1_000_000_000 / CERT_PER_SEC;
        send(&mut l, &mut c, 3, &b, 1_000 + per);
        assert_eq!((c.bad, c.limited), (CERT_BURST + 2, 100));
        send(&mut l, &mut c, 3, &b, 1_000 + per);
        assert_eq!(c.limited, 101);
    }
}
