//! Sequencer failover at the process (07 §9.1–§9.2): order RX's suspicion freezes the tail and
//! sends this voter's signed `Silence` (with its TailReport) to every peer; the peers' `Silence`
//! are checked and counted ([`crate::front::failover::depose`]); short of Q within
//! REP_SUSPECT_ABORT_MS the tail is unfrozen and its buffered frames taken; with Q the tenure is
//! deposed here and order RX refuses its frames from then on (INV-REP-5).
//!
//! Once the seal leader's wait (§9.2) is over, `H*`, `F*` and the next sequencer go to the voter
//! as its seal plan (`plan_seal`): its ledger proposes the seal when it leads a view and checks
//! the leader's otherwise (07 §9.4, `vote::seal`). What follows the seal — the standby's
//! promotion, SeqChange — is not built: the book stays halted with every response of the
//! prefix final.

use super::*;
use crate::front::failover::depose::{DeposeConfig, Deposition, Phase, SilenceRefused, Steps};
use crate::front::failover::report::{tail_report, ReportInput};
use vyrn_wire::msg::ctrl::{SealOffer, SeqEquivocation, Silence, SilenceReason};

/// Peers' `Silence` waiting for the next round at most (more are dropped and counted: a peer
/// repeats its own while it stays frozen).
pub(super) const SILENCES_QUEUED_MAX: usize = 64;

/// When each stage of one failover happened at this replica (07 §9.7's stages; this process's
/// clock, ns): from the box's last frame here to the tenure the seal names followed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FailoverStages {
    /// The tenure's newest frame taken here (its silence starts then).
    pub last_frame: Option<u64>,
    /// This replica suspected the box (07 §9.1), if it did before the deposition.
    pub suspected: Option<u64>,
    /// Q Silence: the tenure deposed here (§9.2).
    pub deposed: Option<u64>,
    /// The wait for reports over: `H*`, `F*` and the next sequencer planned (§9.3).
    pub planned: Option<u64>,
    /// The seal final here (§9.4).
    pub sealed: Option<u64>,
    /// The seal taken: the next tenure followed, or the book halted at it (§9.5).
    pub taken: Option<u64>,
}

impl FailoverStages {
    /// Each stage as `(name, ms after the last frame)`, in order; stages not reached are left out.
    pub fn since_last_frame(&self) -> Vec<(&'static str, f64)> {
        let Some(t0) = self.last_frame else {
            return Vec::new();
        };
        [
            ("detected", self.suspected),
            ("deposed", self.deposed),
            ("planned", self.planned),
            ("sealed", self.sealed),
            ("followed", self.taken),
        ]
        .into_iter()
        .filter_map(|(n, t)| t.map(|t| (n, t.saturating_sub(t0) as f64 / 1e6)))
        .collect()
    }
}

/// What the round passes to failover: order RX's suspicion, the peers' `Silence`, and what a
/// TailReport names.
#[derive(Debug)]
pub(super) struct FailoverIo {
    /// Order RX raised a failover suspicion since the last round (07 §9.1).
    pub(super) suspected: bool,
    /// The decoder stopped a substream since the last round (REP_E_HASHLAG, or another
    /// sequencer fault): a suspicion for that reason.
    pub(super) fault: Option<SilenceReason>,
    /// Peers' `Silence` for the next round (by voter index).
    pub(super) silences: Vec<(usize, Silence)>,
    /// The standby's TailReports for the next round (07 §9.3).
    pub(super) standby_reports: Vec<vyrn_wire::msg::ctrl::TailReport>,
    /// Peers' `SeqEquivocation` for the next round.
    pub(super) evidence: Vec<SeqEquivocation>,
    /// Seal offers from the seal leader for the desk (07 §9.4).
    pub(super) seal_offers: Vec<SealOffer>,
    /// At the standby's replica: the voters' seal certificates (07 §9.4), for the next round.
    pub(super) seal_certs: Vec<vyrn_wire::msg::ctrl::SealCert>,
    /// The newest held headers' hashes by height (the seal header's `prev` is `H*`'s).
    pub(super) recent: std::collections::BTreeMap<u64, Hash>,
    /// Heights whose evidence this voter already sent (each is sent once).
    pub(super) evidence_sent: std::collections::BTreeSet<u64>,
    /// This voter's index.
    pub(super) me: u8,
    /// The highest height whose header this replica holds (07 §9.3 `H_i` is at most it).
    pub(super) header_height: u64,
    /// The stages of the failover under way (or the last one).
    pub(super) stages: FailoverStages,
    /// The last failover's stages, once its seal was taken.
    pub(super) last_stages: Option<FailoverStages>,
}

impl FailoverIo {
    pub(super) fn new(me: u8) -> Self {
        FailoverIo {
            suspected: false,
            fault: None,
            silences: Vec::new(),
            standby_reports: Vec::new(),
            evidence: Vec::new(),
            seal_offers: Vec::new(),
            seal_certs: Vec::new(),
            recent: Default::default(),
            evidence_sent: Default::default(),
            me,
            header_height: 0,
            stages: FailoverStages::default(),
            last_stages: None,
        }
    }
}

/// The failover state of a replica process.
#[derive(Debug)]
pub(super) struct NodeFailover {
    pub(super) dep: Deposition,
    key: ed25519_dalek::SigningKey,
    n_streams: u8,
    /// The deposition's log line, once.
    said_deposed: bool,
    /// The book (the seal header's).
    book: u16,
    /// The seal plan went to the voter (07 §9.4).
    planned: bool,
    /// A refused standby report was logged.
    said_refused: bool,
}

impl NodeFailover {
    /// Voter `cfg.index` of `cfg.home`, watching tenure 0 of the epoch's primary.
    pub(super) fn new(cfg: &NodeConfig, quorum: u32) -> Self {
        let h = &cfg.home;
        let mut voters: Vec<_> = h
            .voters_members
            .iter()
            .map(|v| (v.index, v.vote_key))
            .collect();
        voters.sort_by_key(|v| v.0);
        let mut dc = DeposeConfig::new(
            h.epoch,
            0,
            0,
            cfg.index,
            voters.into_iter().map(|v| v.1).collect(),
            quorum,
        );
        // 07 §9.3: a voter waits for the standby's report too, and names it next when promotable.
        dc.standby = (!cfg.standby).then(|| h.standby_seq()).flatten();
        dc.abort_ns = cfg.budgets.suspect_abort_ns;
        dc.tail_wait_ns = cfg.budgets.tail_wait_ns;
        dc.resend_ns = (dc.abort_ns / 4).max(1);
        NodeFailover {
            dep: Deposition::new(dc),
            key: cfg.vote_key.clone(),
            n_streams: h.engine.layout.n_streams,
            said_deposed: false,
            book: h.engine.book,
            planned: false,
            said_refused: false,
        }
    }
}

impl NodeFailover {
    /// Watch tenure `tenure` of sequencer `seq` from now on (07 §9.5: the seal named it), with
    /// no standby to name next (the standby was promoted; BASE has one).
    pub(super) fn follow(&mut self, tenure: u8, seq: u8) {
        let mut dc = self.dep.config().clone();
        dc.tenure = tenure;
        dc.seq = seq;
        dc.standby = None;
        self.dep = Deposition::new(dc);
        self.said_deposed = false;
        self.planned = false;
        self.said_refused = false;
    }
}

/// The highest height `h ≤ header_height` whose BlockMark the decoder still remembers on every
/// substream, with those marks' frame_seqs (07 §9.3 `H_i`); `(0, [0, 0])` for none.
fn signed_part(core: &ReplicaCore, header_height: u64, n_streams: u8) -> (u64, [u64; 2]) {
    let lo = header_height.saturating_sub(crate::front::decode::MARKS_KEPT as u64);
    for h in (lo..=header_height).rev() {
        let a = core.mark_frame(0, h);
        let b = if n_streams > 1 {
            core.mark_frame(1, h)
        } else {
            Some(0)
        };
        if let (Some(a), Some(b)) = (a, b) {
            return (h, [a, b]);
        }
    }
    (0, [0, 0])
}

impl Node {
    /// This voter's TailReport now (07 §9.3), signed by its vote key.
    fn own_tail_report(&self, f: &NodeFailover) -> vyrn_wire::msg::ctrl::TailReport {
        let (key, n_streams) = (&f.key, f.n_streams);
        let (h_i, marks) = signed_part(&self.core, self.io.fo.header_height, n_streams);
        let (tenure, _) = self.core.order_rx().tenure();
        let lag = self.core.replay_lag_time();
        tail_report(
            self.core.order_rx(),
            &ReportInput {
                epoch: self.epoch,
                tenure,
                reporter: self.io.fo.me,
                h_i,
                marks,
                replay_lag_us: (lag.p50 / 1000).min(u32::MAX as u64) as u32,
                // 07 §9.5: a voter never is; the standby's replica when warm and caught up.
                promotable: self.standby_state().is_some_and(|s| s.1.yes()),
            },
            key,
        )
    }

    /// 07 §9.1–§9.2 at `now`: a new suspicion, the peers' `Silence`, the abort and repeat timers.
    pub(super) fn failover_poll(&mut self, now: u64) {
        let Some(mut f) = self.failover.take() else {
            self.io.fo.silences.clear();
            return;
        };
        let mut steps = Steps::default();
        let silent = std::mem::take(&mut self.io.fo.suspected).then_some(SilenceReason::Silence);
        let equiv = self.equivocation().then_some(SilenceReason::Equiv);
        // 07 §9.1: a block the verdict refused for what the sequencer signed (its frames decode
        // to another order_root, or its header breaks the chain) is a suspicion too.
        let contra = self.core.take_contradiction().map(|(h, r)| {
            eprintln!(
                "{}: alarm=SEQ_FAULT block {h} refused: {r:?} under the sequencer's own seq_sig (07 §6.4, §9.1): suspicion",
                self.io.name
            );
            self.io.c.seq_faults += 1;
            SilenceReason::OrderRoot
        });
        let reason = equiv.or(self.io.fo.fault.take()).or(contra).or(silent);
        if let Some(reason) = reason.filter(|_| !f.dep.is_frozen() && !f.dep.is_deposed()) {
            self.io.fo.stages.suspected.get_or_insert(now);
            let report = self.own_tail_report(&f);
            steps = merge(steps, f.dep.on_suspect(reason, report, now));
        }
        for (voter, m) in std::mem::take(&mut self.io.fo.silences) {
            if let Ok(s) = f.dep.on_silence(voter, &m, now) {
                steps = merge(steps, s);
            }
        }
        for r in std::mem::take(&mut self.io.fo.standby_reports) {
            let first = f.dep.standby_report().is_none();
            match f.dep.on_standby_report(&r) {
                Ok(()) if first => eprintln!(
                    "{}: failover: the standby's TailReport taken (07 §9.3): H_i {}, promotable {}{}",
                    self.io.name,
                    r.h_i,
                    r.promotable,
                    match f.dep.phase() {
                        Phase::Deposed { at } => format!(
                            ", {} ms after the deposition",
                            now.saturating_sub(at) / 1_000_000
                        ),
                        _ => " (before the deposition)".to_string(),
                    }
                ),
                Ok(()) => {}
                // Once: the standby repeats its report while it suspects.
                Err(e) if !f.said_refused => {
                    f.said_refused = true;
                    eprintln!(
                        "{}: failover: the standby's TailReport refused: {e:?}{}",
                        self.io.name,
                        match e {
                            SilenceRefused::NoStandby =>
                                " (the membership's seq_order names no standby: it cannot be named next)",
                            _ => "",
                        }
                    )
                }
                Err(_) => {}
            }
        }
        steps = merge(steps, f.dep.tick(now));
        self.apply(&mut f, steps, now);
        if f.dep.is_deposed() && !f.dep.reporting() {
            // Deposed on the others' word before it suspected: its TailReport goes out too.
            let report = self.own_tail_report(&f);
            let s = f.dep.report_deposed(report, now);
            self.apply(&mut f, s, now);
        }
        // The seal of this tenure may be final already (the other voters' plans came first):
        // then there is nothing to plan.
        let tenure = f.dep.config().tenure;
        let sealed = self
            .sealed
            .as_ref()
            .is_some_and(|s| s.1.next_tenure > tenure);
        if f.dep.is_deposed() && !f.planned && sealed {
            f.planned = true;
        }
        if f.dep.is_deposed() && !f.planned && f.dep.wait_over(now) {
            self.plan_seal(&mut f, now);
        }
        self.failover = Some(f);
    }

    /// 07 §10.1: equivocation evidence found here or taken from a peer — checked under the
    /// tenure's `seq_key`, sent once per height to every peer, and a suspicion (EQUIV) at once.
    /// True when valid evidence is held.
    fn equivocation(&mut self) -> bool {
        let mut ev = self.core.take_evidence();
        for m in std::mem::take(&mut self.io.fo.evidence) {
            if m.check(&self.io.seq_pub).is_ok() && m.epoch == self.epoch {
                self.io.c.evidence_rx += 1;
                ev.push(m);
            } else {
                self.io.c.evidence_bad += 1;
            }
        }
        let mut any = false;
        for m in ev {
            any = true;
            if self.io.fo.evidence_sent.len() >= 64 || !self.io.fo.evidence_sent.insert(m.height) {
                continue;
            }
            eprintln!(
                "{}: SeqEquivocation (07 §10.1): the sequencer signed two headers for height {}; evidence sent to the peers, suspicion EQUIV",
                self.io.name, m.height
            );
            for i in 0..self.io.peers.len() {
                let to = self.io.peers[i];
                self.io.queue(Sock::Ctrl, to, |b| m.encode(b).is_ok());
            }
            self.io.c.evidence_sent += 1;
        }
        any
    }

    fn apply(&mut self, f: &mut NodeFailover, s: Steps, now: u64) {
        if s.broadcast {
            if let Some(m) = f.dep.silence() {
                for i in 0..self.io.peers.len() {
                    let to = self.io.peers[i];
                    self.io.queue(Sock::Ctrl, to, |b| m.encode(b).is_ok());
                }
                // The standby's replica counts the voters' Silences too: Q of them depose the
                // tenure there as here (INV-REP-5), so its frozen tail is not taken back when
                // its own suspicion would abort, and it holds what it reported until the seal.
                if let Some(to) = self.io.standby_replica {
                    self.io.queue(Sock::Ctrl, to, |b| m.encode(b).is_ok());
                }
                self.io.c.silences_sent += 1;
            }
        }
        if f.dep.is_frozen() && !self.core.order_rx().is_frozen() {
            eprintln!(
                "{}: failover suspicion (07 §9.1): tail frozen, Silence sent to the peers; Q of them within {} ms depose the tenure",
                self.io.name,
                f.dep.config().abort_ns / 1_000_000
            );
            self.core.freeze();
        }
        if s.unfreeze {
            eprintln!(
                "{}: failover suspicion aborted (07 §9.1): fewer than Q voters sent Silence within {} ms; the frozen frames are taken",
                self.io.name,
                f.dep.config().abort_ns / 1_000_000
            );
            self.core.unfreeze(now, &mut self.io);
        }
        if s.deposed {
            let last = self.core.order_rx().last_rx();
            let st = &mut self.io.fo.stages;
            st.deposed.get_or_insert(now);
            if st.last_frame.is_none() {
                st.last_frame = last;
            }
            self.core.depose();
            if !f.said_deposed {
                // 07 §9.3 item 4: the tail after this replica's H_i may lose packets to the
                // seal's unavailable list: replay takes none of it until the seal is final.
                let (h_i, _) = signed_part(&self.core, self.io.fo.header_height, f.n_streams);
                self.core.hold_tail(h_i, now, &mut self.io);
                f.said_deposed = true;
                let who: Vec<String> = (0..64)
                    .filter(|i| f.dep.counted(now) & (1u64 << i) != 0)
                    .map(|i: u32| i.to_string())
                    .collect();
                eprintln!(
                    "{}: failover: tenure {} of sequencer {} deposed (07 §9.2): Silence from voters {}; INV-REP-5: its frames are refused from now; the seal follows (07 §9.3–§9.4)",
                    self.io.name,
                    f.dep.config().tenure,
                    f.dep.config().seq,
                    who.join(",")
                );
            }
        }
    }

    /// 07 §9.3–§9.4 once the wait is over: `H*` and `F*` from every report held, the next
    /// sequencer (none: no standby reports yet, so `0xFF` and the book stays halted), the seal
    /// plan to the voter, whose ledger proposes and checks the seal from then on.
    fn plan_seal(&mut self, f: &mut NodeFailover, now: u64) {
        use crate::front::failover::prefix::{f_star, h_star, next_seq, Holdings};
        if self.simplex.is_none() {
            // Not a voter (the standby's replica): it plans nothing and fetches nothing on its
            // own reckoning of F* (a report the leader lacked would take it past the seal's);
            // the final seal's F* is what it fetches to (`follow_seal`).
            f.planned = true;
            return;
        }
        let reports: Vec<&vyrn_wire::msg::ctrl::TailReport> = f.dep.reports().collect();
        let hs = h_star(reports.iter().copied());
        let mut fs = [0u64; 2];
        for (s, x) in fs.iter_mut().enumerate().take(f.n_streams as usize) {
            let hold: Vec<Holdings<'_>> = reports.iter().map(|r| Holdings::of(r, s)).collect();
            *x = f_star(&hold);
        }
        let c = f.dep.config();
        let ext = vyrn_wire::msg::consensus::RepSealExt {
            end_frame_seq: fs,
            next_seq: next_seq(&standings(&f.dep, self.seq_boxes), c.seq),
            next_tenure: c.tenure.wrapping_add(1),
            unavail: Vec::new(),
        };
        // 07 §9.3: what this voter lacks up to F* is fetched from its holders at once.
        let hints = self.fetch_hints(f, fs);
        let held = self.core.order_rx().contiguous();
        if held[0] < fs[0] || held[1] < fs[1] {
            let asks: Vec<String> = hints
                .iter()
                .map(|h| format!("{}:{}..={} of slot {}", h.stream, h.a, h.b, h.peer))
                .collect();
            eprintln!(
                "{}: failover: seal fetch (07 §9.3): this replica holds [{}, {}] of F* [{}, {}]; asking {}",
                self.io.name,
                held[0],
                held[1],
                fs[0],
                fs[1],
                if asks.is_empty() {
                    "its peers in turn".to_string()
                } else {
                    asks.join(", ")
                }
            );
        }
        self.core.seal_fetch(fs, &hints, now, &mut self.io);
        // The tail is the one after H*: the blocks up to it are the signed range's.
        self.core.hold_tail(hs, now, &mut self.io);
        self.io.fo.stages.planned.get_or_insert(now);
        let Some(v) = self.simplex.as_mut() else {
            return;
        };
        f.planned = true;
        eprintln!(
            "{}: failover: seal plan (07 §9.3): {} reports, H* = {hs}, F* = [{}, {}], next sequencer {} — the seal is proposed by the next Simplex leader",
            self.io.name,
            reports.len(),
            fs[0],
            fs[1],
            if ext.next_seq == vyrn_wire::msg::consensus::NEXT_SEQ_NONE {
                "none (no promotable standby reported: the book stays halted)".to_string()
            } else {
                ext.next_seq.to_string()
            }
        );
        v.set_seal(crate::front::failover::seal::SealPlan {
            epoch: self.epoch,
            book: f.book,
            h_star: hs,
            ext,
        });
    }

    /// 07 §9.3: the ranges up to `fs` this replica lacks, each with a peer whose TailReport
    /// holds it (the lowest voter index that does).
    fn fetch_hints(
        &self,
        f: &NodeFailover,
        fs: [u64; 2],
    ) -> Vec<crate::front::order_rx::FetchHint> {
        use crate::front::failover::prefix::{fetch_plan, Holdings};
        let mut peers: Vec<(usize, &vyrn_wire::msg::ctrl::TailReport)> = f
            .dep
            .voter_reports()
            .filter_map(|r| {
                let slot = self
                    .io
                    .peer_index
                    .iter()
                    .position(|&v| v == r.reporter as usize)?;
                Some((slot, r))
            })
            .collect();
        // The standby's replica reports too (07 §9.3): it may hold frames no voter does (it
        // kept receiving a moment longer). It is asked at the slot after the peers'.
        if let (Some(r), Some(_)) = (f.dep.standby_report(), self.io.standby_replica) {
            peers.push((self.io.peers.len(), r));
        }
        let mut hints = Vec::new();
        for (s, &to) in fs.iter().enumerate().take(f.n_streams as usize) {
            let (f_i, extra) = self.core.order_rx().holdings(s as u8);
            let mine = Holdings { f_i, extra: &extra };
            let hold: Vec<Holdings<'_>> = peers.iter().map(|(_, r)| Holdings::of(r, s)).collect();
            for x in fetch_plan(&mine, &hold, to) {
                hints.push(crate::front::order_rx::FetchHint {
                    stream: s as u8,
                    a: x.a,
                    b: x.b,
                    peer: peers[x.holder].0,
                });
            }
        }
        hints
    }

    /// The stages of the last failover whose seal this replica took (`None`: none yet).
    pub fn failover_stages(&self) -> Option<FailoverStages> {
        self.io.fo.last_stages
    }

    /// The seal is taken at `now`: the failover's stages, logged once and kept
    /// ([`Node::failover_stages`]); the next failover's start afresh.
    pub(super) fn stages_done(&mut self, now: u64) {
        let mut st = std::mem::take(&mut self.io.fo.stages);
        st.taken = Some(now);
        let line: Vec<String> = st
            .since_last_frame()
            .iter()
            .map(|(n, ms)| format!("{n} {ms:.1}"))
            .collect();
        eprintln!(
            "{}: failover stages (07 §9.7; ms after the box's last frame here, this replica's clock): {}",
            self.io.name,
            line.join(", ")
        );
        self.io.fo.last_stages = Some(st);
    }

    /// Where failover stands at this voter (`None`: not watched).
    pub fn failover_phase(&self) -> Option<Phase> {
        self.failover.as_ref().map(|f| f.dep.phase())
    }

    /// The failover counters (`None`: not watched).
    pub fn failover_counters(&self) -> Option<crate::front::failover::depose::DeposeCounters> {
        self.failover.as_ref().map(|f| f.dep.counters())
    }
}

fn merge(a: Steps, b: Steps) -> Steps {
    Steps {
        broadcast: a.broadcast || b.broadcast,
        unfreeze: a.unfreeze || b.unfreeze,
        deposed: a.deposed || b.deposed,
    }
}

/// A peer's `SeqEquivocation` off the control port, for the next round (bounded).
pub(super) fn queue_evidence(io: &mut Io, m: SeqEquivocation) {
    if io.fo.evidence.len() >= SILENCES_QUEUED_MAX {
        io.c.evidence_bad += 1;
        return;
    }
    io.fo.evidence.push(m);
}

impl Node {
    /// 07 §9.3 item 4: this voter refused a seal listing `key` unavailable because it holds the
    /// packet; its copy goes to every peer (the leader among them: it takes a copy its record
    /// waits for, the others refuse it as unasked), so the next proposal includes it.
    pub(super) fn push_held(&mut self, key: PktKey) {
        let Some(pkt) = self.core.data().payload(key).map(|p| p.to_vec()) else {
            return;
        };
        for i in 0..self.io.peers.len() {
            let to = self.io.peers[i];
            self.io.queue(Sock::Ctrl, to, |b| {
                vyrn_wire::msg::ctrl::PeerData::encode_parts(key.session, key.pkt_seq, &pkt, b)
            });
            self.io.c.peer_data_pushed += 1;
        }
    }
}

/// A voter's `SealCert` off the standby replica's control port, for the next round (bounded).
pub(super) fn queue_seal_cert(io: &mut Io, m: vyrn_wire::msg::ctrl::SealCert) {
    if io.fo.seal_certs.len() >= 8 {
        io.c.seal_certs_bad += 1;
        return;
    }
    io.fo.seal_certs.push(m);
}

/// A peer's `SealOffer` off the control port, for the desk at the next round (bounded).
pub(super) fn queue_seal_offer(io: &mut Io, m: SealOffer) {
    if io.fo.seal_offers.len() >= vyrn_consensus::desk::SEALS_KEPT {
        io.c.seal_offers_dropped += 1;
        return;
    }
    io.c.seal_offers_rx += 1;
    io.fo.seal_offers.push(m);
}

/// Each `seq_order` entry's standing in this failover (07 §9.5): the deposed tenure's box, and
/// the standby as its TailReport says (reported, promotable).
fn standings(
    dep: &Deposition,
    seq_boxes: usize,
) -> Vec<crate::front::failover::prefix::SeqStanding> {
    let mut s = vec![crate::front::failover::prefix::SeqStanding::default(); seq_boxes];
    if let Some(x) = s.get_mut(dep.config().seq as usize) {
        x.deposed = true;
    }
    if let Some(r) = dep.standby_report() {
        if let Some(x) = s.get_mut(r.reporter as usize) {
            x.reported = true;
            x.promotable = r.promotable;
        }
    }
    s
}

/// The standby's TailReport off the control port, for the next round (bounded).
pub(super) fn queue_standby_report(io: &mut Io, r: vyrn_wire::msg::ctrl::TailReport) {
    if io.fo.standby_reports.len() >= SILENCES_QUEUED_MAX {
        io.c.silences_dropped += 1;
        return;
    }
    io.c.silences_rx += 1;
    io.fo.standby_reports.push(r);
}

/// A peer's `Silence` off the control port, for the next round (bounded).
pub(super) fn queue_silence(io: &mut Io, voter: usize, m: Silence) {
    if io.fo.silences.len() >= SILENCES_QUEUED_MAX {
        io.c.silences_dropped += 1;
        return;
    }
    io.c.silences_rx += 1;
    io.fo.silences.push((voter, m));
}
