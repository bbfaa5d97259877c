//! After the seal (07 §9.4–§9.5): the replica follows the tenure the seal names.
//!
//! A voter learns the seal from its own desk (its certificate); the standby's replica from the
//! voters, which send it the certificate with its ext sealed under its link key, checked here
//! against the epoch's voting set. Either way the seal header is rebuilt from this replica's
//! own tail after `BlockMark(H*)` and must hash to the proposal's `last_hash`
//! ([`ReplicaCore::next_tenure`] then checks the steps and `order_root` again and runs replay to
//! the seal's last step).
//!
//! Then a voter turns to the promoted box: order RX, the decoder and the verdict take its
//! tenure under its `seq_key`; NACKs, RepAcks, HashListReqs and votes go to its control port
//! (the standby's `ctrl_addr`, where its listener took votes until now), and what that port
//! seals is opened under the link key agreed with its key; failover watches the new tenure
//! (with no standby left to name: BASE has one). The standby's replica named next stops: its
//! engine, replayed to the seal, is what its host promotes ([`Node::into_handover`]).

use super::*;
use crate::front::core::{NextTenure, NextTenureRefused};
use crate::front::failover::seal::{seal_header, SignedTip};
use vyrn_wire::msg::consensus::{RepProposal, RepSealExt, NEXT_SEQ_NONE};

/// Heights whose header hash the node keeps for the seal (`H*` is one of the newest held).
pub(super) const RECENT_HASHES: usize = 1024;

/// Why the seal could not be followed here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FollowRefused {
    /// `next_seq` is no box this replica knows (only the standby of `[standby]` is).
    UnknownSeq(u8),
    /// This replica no longer holds `header_hash(H*)`.
    NoTip(u64),
    /// It does not hold the tail after `BlockMark(H*)` (or a record of it is unresolved).
    NoTail,
    /// It holds other frames than the seal's `F*` (fewer: fetched from the peers meanwhile;
    /// more: frames of the deposed tenure no report named, which the seal leaves out).
    Frames {
        /// Its last frame per substream.
        have: [u64; 2],
        /// `F*`.
        want: [u64; 2],
    },
    /// Its own seal header does not hash to the certificate's `last_hash`.
    Differs,
    /// The core refused the seal.
    Core(NextTenureRefused),
}

/// What a replica holds of the tenure after the seal.
#[derive(Debug, Clone)]
pub struct Followed {
    /// The tenure, its sequencer, its key, `H*` and the seal header.
    pub next: NextTenure,
    /// When it was taken (the node's clock, ns).
    pub at: u64,
}

/// What a replica needs to follow the tenure a seal names.
#[derive(Debug)]
pub(super) struct NodeTenure {
    /// The tenure followed after a final seal.
    followed: Option<Followed>,
    /// Set when the standby's replica is named next and stands at the seal (its host promotes).
    promote: Arc<AtomicBool>,
    /// Named next at this time (the node's clock), the replay not yet promotable: what it
    /// waits for was logged (`true`) or not.
    promote_due: Option<(u64, bool)>,
    /// The home, as this replica read it (the next sequencer's key and address).
    home: HomeConfig,
    /// Its own key: the link key with the promoted box is agreed from it.
    vote_key: SigningKey,
    /// The epoch's voting set (the standby's replica checks the seal certificate against it).
    voters: Option<vyrn_consensus::Voters>,
    /// [`crate::front::core::Budgets::promote_wait_ns`].
    promote_wait_ns: u64,
    /// A final seal this replica could not follow yet (its tail still arriving), tried again
    /// every [`FOLLOW_RETRY_EVERY_NS`] until the deadline, and when it was last tried.
    retry: Option<(RepProposal, RepSealExt, u64)>,
    retried_at: u64,
    /// The seal block at which the book halted (a final seal naming no next sequencer).
    halted_at: Option<u64>,
}

/// How long a standby named next waits for its replay before it logs what it waits for.
const PROMOTE_LOG_NS: u64 = 50_000_000;

/// How often a seal not followed yet is tried again (each try rebuilds the seal block).
pub(super) const FOLLOW_RETRY_EVERY_NS: u64 = 1_000_000;

/// How long a replica keeps trying to follow a final seal it cannot follow yet (its tail after
/// `BlockMark(H*)` still being repaired).
pub(super) const FOLLOW_RETRY_NS: u64 = 10_000_000_000;

impl NodeTenure {
    /// The tenure that produced block `h`: the followed one after its seal block, else the
    /// epoch's first.
    pub(super) fn tenure_of(&self, h: u64) -> u8 {
        match &self.followed {
            Some(f) if h > f.next.seal.height => f.next.tenure,
            _ => 0,
        }
    }

    pub(super) fn new(cfg: &NodeConfig, voters: Option<vyrn_consensus::Voters>) -> Self {
        NodeTenure {
            followed: None,
            promote: Arc::new(AtomicBool::new(false)),
            promote_due: None,
            home: cfg.home.clone(),
            vote_key: cfg.vote_key.clone(),
            voters,
            promote_wait_ns: cfg.budgets.promote_wait_ns,
            retry: None,
            retried_at: 0,
            halted_at: None,
        }
    }
}

impl Node {
    /// The seal `p` with `ext` is final (07 §9.4): follow the tenure it names (nothing for
    /// `next_seq` 0xFF: the book stays halted).
    pub(super) fn follow_seal(&mut self, p: &RepProposal, ext: &RepSealExt, now: u64) {
        // A seal already taken: the tenure it names is followed, or the book halted at it.
        let tenure = self.core.order_rx().tenure().0;
        if self.next.halted_at.is_some()
            || (self.next.followed.is_some() && tenure >= ext.next_tenure)
        {
            return;
        }
        // The seal is final: Q voters deposed the tenure. A replica that did not (the standby's,
        // whose suspicion aborted before the voters' Silences came) refuses its frames from now
        // too (INV-REP-5), so what it holds cannot grow past the seal's F* while it follows.
        if tenure < ext.next_tenure && !self.core.order_rx().is_deposed() {
            eprintln!(
                "{}: failover: tenure {tenure} deposed here by its final seal (INV-REP-5)",
                self.io.name
            );
            self.core.depose();
            self.io.c.deposed_by_seal += 1;
        }
        let taken = if ext.next_seq == NEXT_SEQ_NONE {
            self.seal_of(p, ext)
                .map(|(h_star, seal)| self.halt_at(h_star, seal, ext))
        } else {
            self.next_tenure_of(p, ext)
                .map(|t| self.take_tenure(t, now))
        };
        match taken {
            Ok(()) => self.next.retry = None,
            // Logged once: tried again until FOLLOW_RETRY_NS (a tail still being repaired).
            Err(e) if self.next.retry.is_none() => {
                // 07 §9.5: the frames up to the seal's F* this replica lacks are fetched from
                // its peers (the standby "fetches missing ones from the leader").
                self.core
                    .seal_fetch(ext.end_frame_seq, &[], now, &mut self.io);
                eprintln!(
                    "{}: failover: the final seal names sequencer {} for tenure {}, which this replica cannot follow yet: {e:?}; trying again for {} s",
                    self.io.name,
                    ext.next_seq,
                    ext.next_tenure,
                    FOLLOW_RETRY_NS / 1_000_000_000
                );
                self.next.retry = Some((*p, ext.clone(), now.saturating_add(FOLLOW_RETRY_NS)));
            }
            Err(_) => {}
        }
    }

    /// A final seal not followed yet, tried again (every [`FOLLOW_RETRY_EVERY_NS`]); given up,
    /// counted and logged once, past its deadline.
    pub(super) fn retry_follow(&mut self, now: u64) {
        if now.saturating_sub(self.next.retried_at) < FOLLOW_RETRY_EVERY_NS {
            return;
        }
        let Some((p, ext, until)) = self.next.retry.clone() else {
            return;
        };
        self.next.retried_at = now;
        if now > until {
            self.next.retry = None;
            self.io.c.follow_refused += 1;
            eprintln!(
                "{}: failover: gave up following tenure {} of sequencer {}: this replica does not hold the prefix the seal names; restart it to catch up from its peers",
                self.io.name, ext.next_tenure, ext.next_seq
            );
            return;
        }
        self.follow_seal(&p, &ext, now);
    }

    /// The next tenure the seal names, its header rebuilt from this replica's tail.
    fn next_tenure_of(
        &self,
        p: &RepProposal,
        ext: &RepSealExt,
    ) -> Result<NextTenure, FollowRefused> {
        let seq_key = self
            .next
            .home
            .standby_seq()
            .filter(|s| s.0 == ext.next_seq)
            .map(|s| s.1)
            .ok_or(FollowRefused::UnknownSeq(ext.next_seq))?;
        let (h_star, seal) = self.seal_of(p, ext)?;
        Ok(NextTenure {
            tenure: ext.next_tenure,
            sender: ext.next_seq,
            seq_key,
            h_star,
            seal,
            unavail: ext.unavail.clone(),
        })
    }

    /// `H*` and the seal header of `p`, rebuilt from this replica's tail after `BlockMark(H*)`
    /// (it must hash to the proposal's `last_hash`).
    fn seal_of(
        &self,
        p: &RepProposal,
        ext: &RepSealExt,
    ) -> Result<(u64, BlockHeader), FollowRefused> {
        let h = &self.next.home;
        let h_star = p.last_height.saturating_sub(1);
        let hash = *self
            .io
            .fo
            .recent
            .get(&h_star)
            .ok_or(FollowRefused::NoTip(h_star))?;
        let (ob, dr) = self
            .core
            .seal_block(h_star, &ext.unavail)
            .ok_or(FollowRefused::NoTail)?;
        let have = crate::front::failover::seal::frames_held(&ob);
        if have != ext.end_frame_seq {
            return Err(FollowRefused::Frames {
                have,
                want: ext.end_frame_seq,
            });
        }
        let tip = SignedTip {
            height: h_star,
            hash,
            last_step: ob.first_step.saturating_sub(1),
        };
        let dr = dr.ok_or(FollowRefused::NoTail)?;
        let seal = seal_header(self.epoch, h.engine.book, &tip, &ob, dr)
            .map_err(|_| FollowRefused::NoTail)?;
        if seal.header_hash() != p.last_hash {
            return Err(FollowRefused::Differs);
        }
        Ok((h_star, seal))
    }

    /// A final seal naming no next sequencer (07 §9.5 "No promotable box"): the seal block is
    /// taken (replay runs to its end, the journal writes it), the book stays halted with every
    /// response of the prefix final, and the data boxes are told (`SeqChange{none}`).
    fn halt_at(&mut self, h_star: u64, seal: BlockHeader, ext: &RepSealExt) {
        let now = self.io.now;
        if let Err(e) = self
            .core
            .take_seal(h_star, &seal, &ext.unavail, now, &mut self.io)
        {
            self.io.c.follow_refused += 1;
            eprintln!(
                "{}: failover: the core refuses the seal: {e:?}",
                self.io.name
            );
            return;
        }
        self.note_exclusions(&ext.unavail);
        eprintln!(
            "{}: failover: the book stays halted at the seal block {} (step {}): the seal names no next sequencer (07 §9.5)",
            self.io.name, seal.height, seal.last_step
        );
        self.announce(ext, &seal);
        if let Some(v) = self.simplex.as_mut() {
            v.follow_seal(seal.height);
        }
        if self.io.keep {
            self.io.pending_hdr.insert(seal.height, seal);
        }
        self.next.halted_at = Some(seal.height);
        let now = self.io.now;
        self.stages_done(now);
    }

    /// A final seal's unavailable packets (07 §9.4, §9.6 case d), said once: which were
    /// excluded, and whether this replica's replay had already run one of them.
    fn note_exclusions(&mut self, unavail: &[vyrn_wire::msg::PktKey]) {
        if unavail.is_empty() {
            return;
        }
        let d = self.core.data().counters();
        let keys: Vec<String> = unavail
            .iter()
            .take(8)
            .map(|k| format!("{}:{}", k.session, k.pkt_seq))
            .collect();
        eprintln!(
            "{}: failover: the seal lists {} packet(s) unavailable (07 §9.3 item 4): {}{} — replay runs their records without them (Reject EXCLUDED), and what the deposed tenure answered for them and for what traded against them is reverted (07 §9.6 d)",
            self.io.name,
            unavail.len(),
            keys.join(", "),
            if unavail.len() > 8 { ", …" } else { "" }
        );
        if d.excluded_late > 0 {
            eprintln!(
                "{}: failover: this replica's replay had already run {} record(s) the final seal excludes: its state differs from the final log's, and its next state root will not match its peers' (REP_A_DIVERGE, 07 §7.4; docs/sre.md)",
                self.io.name, d.excluded_late
            );
        }
    }

    fn take_tenure(&mut self, t: NextTenure, now: u64) {
        let resolved = match self.core.next_tenure(&t, now, &mut self.io) {
            Ok(n) => n,
            Err(e) => {
                self.io.c.follow_refused += 1;
                eprintln!(
                    "{}: failover: the core refuses the seal: {e:?}",
                    self.io.name
                );
                return;
            }
        };
        self.note_exclusions(&t.unavail);
        let me_next = self.io.standby && t.sender == self.io.fo.me;
        eprintln!(
            "{}: failover: following tenure {} of sequencer {} from height {} (the seal block {} ends at step {}; {resolved} record(s) of the tail resolved by key){}",
            self.io.name,
            t.tenure,
            t.sender,
            t.seal.height + 1,
            t.seal.height,
            t.seal.last_step,
            if me_next {
                ": this standby is named next, its engine replayed to the seal goes to the box"
            } else {
                ""
            }
        );
        if !self.io.standby {
            self.turn_to_box(&t);
            // A promoted box that never sends is suspected once its budget is over.
            let by = now.saturating_add(self.next.promote_wait_ns);
            self.core.order_rx_mut().expect_first_by(by);
        }
        let ext = self.sealed.as_ref().map(|s| s.1.clone());
        if let Some(ext) = ext {
            self.announce(&ext, &t.seal);
        }
        // No standby is left to name after a promotion (BASE has one; the next warms later).
        if let Some(f) = self.failover.as_mut() {
            f.follow(t.tenure, t.sender);
        }
        if let Some(v) = self.simplex.as_mut() {
            v.follow_seal(t.seal.height);
        }
        // The seal block is final: the journal writes it with its header (zero `seq_sig`, its
        // certificate in the cert journal) and the ORDER bytes of the tail.
        if self.io.keep {
            self.io.pending_hdr.insert(t.seal.height, t.seal);
        }
        self.next.followed = Some(Followed { next: t, at: now });
        self.stages_done(now);
        if me_next {
            self.next.promote_due = Some((now, false));
            self.promote_when_ready(now);
        }
    }

    /// The standby named next is promoted once its replay stands at the seal with every step
    /// run and every record's payload in (07 §9.5): under load the tail's last payloads may
    /// still be on their way from the data side or a peer. Until then its host waits; the
    /// voters' `promote_wait` budget bounds how long (then they depose the silent tenure).
    pub(super) fn promote_when_ready(&mut self, now: u64) {
        let Some((since, logged)) = self.next.promote_due else {
            return;
        };
        let want = self
            .next
            .followed
            .as_ref()
            .map_or(0, |f| f.next.seal.last_step + 1);
        // Ready, or a replay on its own tile (the host's `into_handover` says why not).
        let ready = match self.core.promotable() {
            Some(r) => r.as_ref().is_ok_and(|&next| next == want),
            None => true,
        };
        if !ready {
            if !logged && now.saturating_sub(since) >= PROMOTE_LOG_NS {
                self.next.promote_due = Some((since, true));
                let why = match self.core.promotable() {
                    Some(Ok(next)) => {
                        format!("its next step is {next}, the seal's first after it {want}")
                    }
                    Some(Err(vyrn_engine::ReplayError::Unresolved {
                        lane,
                        first_lane_seq,
                    })) => format!(
                        "the record of lane {lane} at {first_lane_seq} waits for its payload ({})",
                        self.core.describe_record(lane, first_lane_seq)
                    ),
                    r => format!("{r:?}"),
                };
                eprintln!(
                        "{}: failover: named next, the replay is not at the seal yet after {} ms: {why}; promoted once it is",
                        self.io.name,
                        now.saturating_sub(since) / 1_000_000
                    );
            }
        } else {
            self.next.promote_due = None;
            if now > since {
                eprintln!(
                    "{}: failover: named next, the replay stands at the seal after {} µs",
                    self.io.name,
                    now.saturating_sub(since) / 1_000
                );
            }
            self.next.promote.store(true, Ordering::Release);
        }
    }

    /// Every message to the box goes to the promoted box's control port from now on, and
    /// what it seals is opened under the link key with its key (07 §9.5).
    fn turn_to_box(&mut self, t: &NextTenure) {
        let Some(ctrl) = self.next.home.standby_ctrl else {
            return;
        };
        let Some(link) = LinkKey::agree(&self.next.vote_key, &t.seq_key) else {
            return;
        };
        self.io.opener.add(seal::from::BOX_HASHER, link.clone());
        self.io.opener.add(seal::from::BOX_CTRL, link.clone());
        self.io.links.retain(|l| l.0 != ctrl);
        self.io.links.push((ctrl, link));
        self.io.seq_ctrl = ctrl;
        self.io.seq_pub = t.seq_key;
        // Votes and certificates went to the box and the standby: they are one box now.
        self.io.standby_ctrl = None;
        // The standby's replica stays a known source: it may still be fetching the seal's tail
        // (07 §9.5 "it fetches missing ones from the leader") after this voter followed the
        // seal. Forgotten here, its RepairReqs were dropped as from an unknown source at every
        // voter that had turned, it never held F*, was never promoted, and the voters sealed
        // the promoted tenure with no next sequencer (three CI failures of
        // `vyrn up --isolate-seq`: 217 unknown sources at each voter).
    }

    /// 07 §9.5 client redirect: a voter tells every data box which sequencer the seal names
    /// (`SeqChange`, with its client address from `seq_order`; `new_seq` 0xFF: none) and where
    /// the ended tenure's log stops (the seal block's height and last step: the clients' fills
    /// above it were reverted, 07 §9.6); each relays it to the sessions it serves once Q voters
    /// agree.
    fn announce(&mut self, ext: &RepSealExt, seal: &BlockHeader) {
        if self.io.standby {
            return;
        }
        let addr = match ext.next_seq {
            NEXT_SEQ_NONE => Some([0u8; 18]),
            s => self.next.home.membership.as_ref().and_then(|m| {
                m.seq_order
                    .iter()
                    .find(|b| b.index == s)
                    .map(|b| b.client_addr)
            }),
        };
        let Some(addr) = addr else {
            eprintln!(
                "{}: failover: the membership gives no client address for sequencer {}: no SeqChange sent",
                self.io.name, ext.next_seq
            );
            return;
        };
        let m = vyrn_wire::msg::ctrl::SeqChange {
            epoch: self.epoch,
            tenure: ext.next_tenure,
            new_seq: ext.next_seq,
            addr,
            seal_height: seal.height,
            seal_last_step: seal.last_step,
        };
        for i in 0..self.io.boxes.len() {
            let to = self.io.boxes[i];
            self.io.queue(Sock::Data, to, |b| m.encode(b).is_ok());
        }
        self.io.c.seq_changes_sent += 1;
    }

    /// A voter's seal certificate sent to the standby's replica (07 §9.4), checked against the
    /// epoch's voting set and followed.
    pub(super) fn on_seal_cert(&mut self, m: &vyrn_wire::msg::ctrl::SealCert, now: u64) {
        if !self.io.standby || self.sealed.is_some() {
            return;
        }
        let ok =
            self.next.voters.as_ref().is_some_and(|v| {
                vyrn_consensus::cert::verify_seal_with(&m.cert, &m.ext, v).is_ok()
            });
        if !ok {
            self.io.c.seal_certs_bad += 1;
            return;
        }
        self.io.c.seals_final += 1;
        eprintln!(
            "{}: failover: the seal is final (07 §9.4, its certificate from a voter): heights {}..={}, next sequencer {}",
            self.io.name,
            m.cert.proposal.first_height,
            m.cert.proposal.last_height,
            m.ext.next_seq
        );
        self.sealed = Some((m.cert.proposal.last_height, m.ext.clone()));
        self.io.fo.stages.sealed.get_or_insert(now);
        if self.io.fo.stages.last_frame.is_none() {
            self.io.fo.stages.last_frame = self.core.order_rx().last_rx();
        }
        self.follow_seal(&m.cert.proposal, &m.ext, now);
    }

    /// The standby's host cannot start the box this replica would become: it never reports
    /// `promotable` (07 §9.5) and REP_A_STANDBY is raised.
    pub fn bar_promotion(&mut self) {
        if let Some(f) = self.follower.as_mut() {
            f.barred = true;
        }
    }

    /// The tenure this replica follows after a seal, if any.
    pub fn followed(&self) -> Option<&Followed> {
        self.next.followed.as_ref()
    }

    /// Set once the standby's replica was named next and its replay stands at the seal: its
    /// host stops the node's tile and promotes ([`Node::into_handover`]).
    pub fn promote_flag(&self) -> Arc<AtomicBool> {
        self.next.promote.clone()
    }

    /// The standby's engine, replayed to the seal, and the seal header (07 §9.5): what the
    /// promoted box starts from (`vyrn_seq::takeover::Takeover`). Consumes the node (one
    /// writer, INV-WRITER). Refused unless the seal named this standby and replay runs inline.
    pub fn into_handover(
        mut self,
    ) -> Result<(vyrn_engine::Handover, vyrn_wire::header::BlockHeader), String> {
        let f = self
            .next
            .followed
            .take()
            .filter(|f| self.io.standby && f.next.sender == self.io.fo.me)
            .ok_or("the seal names another box (or none has been followed)")?;
        self.stop_replay_thread();
        let mut sink = std::mem::take(&mut self.sink);
        let core = std::mem::replace(&mut self.core, placeholder_core(&self.next.home)?);
        let r = core
            .into_replayer()
            .ok_or("replay runs on its own tile: promotion takes an inline replay")?;
        let h = r
            .promote(&mut sink)
            .map_err(|e| format!("the replay cannot be promoted: {e:?}"))?;
        Ok((h, f.next.seal))
    }
}

/// An empty core to stand where the promoted one was (the node is dropped right after).
fn placeholder_core(h: &HomeConfig) -> Result<ReplicaCore, String> {
    ReplicaCore::new(CoreConfig {
        engine: h.engine.clone(),
        epoch: h.epoch,
        tenure: 0,
        sender: 0,
        seq_key: h.seq_pub,
        n_boxes: 1,
        n_peers: 0,
        anchor: Anchor::default(),
    })
    .map_err(|e| e.to_string())
}
