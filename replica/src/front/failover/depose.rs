//! Detection and deposition at one voter (07 §9.1–§9.2).
//!
//! * **Suspicion** ([`Deposition::on_suspect`]): the order RX saw no frame of the tenure for
//!   FAILOVER_SILENCE_MS, or the voter holds equivocation evidence, or a block failed
//!   `order_root` after every repair, or REP_E_HASHLAG fired. The voter freezes its tail (the
//!   order RX buffers what still arrives) and broadcasts a signed `Silence` carrying its
//!   TailReport; it repeats it every [`DeposeConfig::resend_ns`] while frozen (a lost datagram
//!   is replaced).
//! * **Abort**: fewer than Q voters' `Silence` within REP_SUSPECT_ABORT_MS of the freeze: the
//!   voter unfreezes ([`Steps::unfreeze`]), applies the buffered frames and repairs the rest. One
//!   isolated voter cannot depose a live sequencer.
//! * **Deposition**: `Silence` from Q distinct voters, each received within the last
//!   REP_SUSPECT_ABORT_MS (this voter's own among them when it suspects), deposes the tenure
//!   here, for good: INV-REP-5, no frame, header or retransmission of (epoch, tenure) is taken
//!   into the log again ([`Steps::deposed`]). A voter that does not suspect is deposed all the
//!   same once it holds Q.
//! * **The leader's wait** ([`Deposition::wait_over`], §9.2): every voter's and the standby's
//!   report, but no longer than `T* + REP_TAIL_WAIT_MS`, `T*` the newest `t_last_rx` of the
//!   reports held. `t_last_rx` is the reporters' PTP time; where clocks are not disciplined (a
//!   dev home's processes each count from their own start) the wait is also bounded by the
//!   local time of the deposition plus REP_TAIL_WAIT_MS.
//!
//! Every `Silence` is checked before it counts: this epoch, this tenure, this sequencer, a
//! voter of the home other than this one, its report's `reporter` the voter it came from, and
//! its signature under that voter's vote key. The standby's report (under its `seq_key`) is
//! held for the prefix but never counts toward Q. A refused one is counted by reason.

use ed25519_dalek::VerifyingKey;
use vyrn_wire::msg::ctrl::{Silence, SilenceReason, TailReport};

/// What a voter needs to judge `Silence` messages of one tenure.
#[derive(Debug, Clone)]
pub struct DeposeConfig {
    /// Epoch.
    pub epoch: u32,
    /// The tenure watched.
    pub tenure: u8,
    /// Its sequencer's index (`seq_order`).
    pub seq: u8,
    /// This voter's index.
    pub me: usize,
    /// Every voter's vote key, in membership order.
    pub voters: Vec<VerifyingKey>,
    /// The standby's sequencer index and `seq_key`, where the home has one.
    pub standby: Option<(u8, VerifyingKey)>,
    /// Q.
    pub quorum: u32,
    /// REP_SUSPECT_ABORT_MS, ns.
    pub abort_ns: u64,
    /// REP_TAIL_WAIT_MS, ns.
    pub tail_wait_ns: u64,
    /// While frozen, `Silence` is sent again this often (project choice: a lost datagram must
    /// not make a crash look like one voter's isolation).
    pub resend_ns: u64,
}

impl DeposeConfig {
    /// 07's timings for voter `me` of `voters` (Q `quorum`) watching `(epoch, tenure)` of
    /// sequencer `seq`.
    pub fn new(
        epoch: u32,
        tenure: u8,
        seq: u8,
        me: usize,
        voters: Vec<VerifyingKey>,
        quorum: u32,
    ) -> Self {
        use vyrn_wire::consts::{REP_SUSPECT_ABORT_MS, REP_TAIL_WAIT_MS};
        DeposeConfig {
            epoch,
            tenure,
            seq,
            me,
            voters,
            standby: None,
            quorum: quorum.max(1),
            abort_ns: REP_SUSPECT_ABORT_MS * 1_000_000,
            tail_wait_ns: (REP_TAIL_WAIT_MS * 1e6) as u64,
            resend_ns: REP_SUSPECT_ABORT_MS * 1_000_000 / 4,
        }
    }
}

/// Where the tenure stands at this voter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Frames of the tenure are taken.
    Live,
    /// This voter suspects since `since`: its tail is frozen.
    Frozen {
        /// When it froze.
        since: u64,
        /// Why.
        reason: SilenceReason,
    },
    /// Deposed at `at` (INV-REP-5: for the rest of the epoch).
    Deposed {
        /// When Q was reached here.
        at: u64,
    },
}

/// What the caller must do after a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[must_use]
pub struct Steps {
    /// Send [`Deposition::silence`] to every peer and the standby.
    pub broadcast: bool,
    /// The suspicion is aborted: apply the buffered frames, repair the rest.
    pub unfreeze: bool,
    /// The tenure is deposed here: refuse its frames from now on (INV-REP-5); the seal's
    /// leader starts its wait.
    pub deposed: bool,
}

/// Why a `Silence` (or the standby's report) was not counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SilenceRefused {
    /// Another epoch.
    Epoch,
    /// Another tenure (an older one's late message, or one this voter does not know yet).
    Tenure,
    /// Another sequencer index than the tenure's.
    Seq,
    /// From no voter of the home, or from this voter's own index.
    NotVoter,
    /// The report's `reporter` is not the voter it came from.
    Reporter,
    /// The signature does not verify under the reporter's key.
    Signature,
    /// A standby report, but the home has no standby or it is another box.
    NoStandby,
}

/// Counters of detection and deposition.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DeposeCounters {
    /// Suspicions that froze the tail.
    pub suspects: u64,
    /// `Silence` broadcasts (first and repeats).
    pub broadcasts: u64,
    /// Peers' `Silence` counted.
    pub silences_rx: u64,
    /// Refused: another epoch, tenure or sequencer.
    pub refused_stale: u64,
    /// Refused: not a voter, wrong reporter, bad signature, no standby.
    pub refused_forged: u64,
    /// Suspicions aborted (fewer than Q within REP_SUSPECT_ABORT_MS).
    pub aborts: u64,
    /// Standby reports held.
    pub standby_reports: u64,
}

/// Detection and deposition of one tenure at one voter (see the module docs).
#[derive(Debug)]
pub struct Deposition {
    cfg: DeposeConfig,
    phase: Phase,
    /// Per voter: when its newest `Silence` came, and its report.
    heard: Vec<Option<(u64, TailReport)>>,
    standby: Option<TailReport>,
    /// This voter's own report and reason while it suspects.
    own: Option<(SilenceReason, TailReport)>,
    last_broadcast: u64,
    c: DeposeCounters,
}

impl Deposition {
    /// Watching `cfg`'s tenure, live.
    pub fn new(cfg: DeposeConfig) -> Self {
        let n = cfg.voters.len();
        Deposition {
            cfg,
            phase: Phase::Live,
            heard: vec![None; n],
            standby: None,
            own: None,
            last_broadcast: 0,
            c: DeposeCounters::default(),
        }
    }

    /// The phase.
    pub fn phase(&self) -> Phase {
        self.phase
    }

    /// Whether this voter's tail is frozen.
    pub fn is_frozen(&self) -> bool {
        matches!(self.phase, Phase::Frozen { .. })
    }

    /// Whether the tenure is deposed here (INV-REP-5).
    pub fn is_deposed(&self) -> bool {
        matches!(self.phase, Phase::Deposed { .. })
    }

    /// The counters.
    pub fn counters(&self) -> DeposeCounters {
        self.c
    }

    /// The config.
    pub fn config(&self) -> &DeposeConfig {
        &self.cfg
    }

    /// This voter suspects the sequencer for `reason` at `now`; `report` is its TailReport,
    /// signed by its vote key. Freezes the tail and asks for a broadcast; nothing when already
    /// frozen or deposed (the report is refreshed while frozen).
    pub fn on_suspect(&mut self, reason: SilenceReason, report: TailReport, now: u64) -> Steps {
        match self.phase {
            Phase::Deposed { .. } => Steps::default(),
            Phase::Frozen { .. } => {
                self.own = Some((reason, report));
                Steps::default()
            }
            Phase::Live => {
                self.phase = Phase::Frozen { since: now, reason };
                self.own = Some((reason, report));
                self.c.suspects += 1;
                self.c.broadcasts += 1;
                self.last_broadcast = now;
                let mut s = self.check_quorum(now);
                s.broadcast = true;
                s
            }
        }
    }

    /// Deposed by the others' Silences before this replica suspected (a voter whose paths still
    /// carried frames, or the standby's replica): it reports all the same (07 §9.2: the leader
    /// waits for every voter's and the standby's report), its tail already deposed. Asks for a
    /// broadcast once; nothing when not deposed or already reporting.
    pub fn report_deposed(&mut self, report: TailReport, now: u64) -> Steps {
        if !self.is_deposed() || self.own.is_some() {
            return Steps::default();
        }
        self.own = Some((SilenceReason::Silence, report));
        self.c.broadcasts += 1;
        self.last_broadcast = now;
        Steps {
            broadcast: true,
            ..Steps::default()
        }
    }

    /// Whether this replica holds its own report (it suspected, or reported once deposed).
    pub fn reporting(&self) -> bool {
        self.own.is_some()
    }

    /// The `Silence` this voter broadcasts while it suspects.
    pub fn silence(&self) -> Option<Silence> {
        let (reason, report) = self.own.clone()?;
        Some(Silence {
            epoch: self.cfg.epoch,
            tenure: self.cfg.tenure,
            seq: self.cfg.seq,
            reason,
            report,
        })
    }

    /// A `Silence` from voter `voter` (the sealed envelope's sender) at `now`.
    pub fn on_silence(
        &mut self,
        voter: usize,
        m: &Silence,
        now: u64,
    ) -> Result<Steps, SilenceRefused> {
        if let Err(e) = self.check(voter, m) {
            match e {
                SilenceRefused::Epoch | SilenceRefused::Tenure | SilenceRefused::Seq => {
                    self.c.refused_stale += 1
                }
                _ => self.c.refused_forged += 1,
            }
            return Err(e);
        }
        self.c.silences_rx += 1;
        self.heard[voter] = Some((now, m.report.clone()));
        Ok(self.check_quorum(now))
    }

    fn check(&self, voter: usize, m: &Silence) -> Result<(), SilenceRefused> {
        let c = &self.cfg;
        if m.epoch != c.epoch || m.report.epoch != c.epoch {
            return Err(SilenceRefused::Epoch);
        }
        if m.tenure != c.tenure || m.report.tenure != c.tenure {
            return Err(SilenceRefused::Tenure);
        }
        if m.seq != c.seq {
            return Err(SilenceRefused::Seq);
        }
        if voter >= c.voters.len() || voter == c.me {
            return Err(SilenceRefused::NotVoter);
        }
        if m.report.reporter as usize != voter {
            return Err(SilenceRefused::Reporter);
        }
        if !m.report.verify(&c.voters[voter]) {
            return Err(SilenceRefused::Signature);
        }
        Ok(())
    }

    /// The standby's TailReport (07 §9.3: it reports, its Silence never counts toward Q).
    pub fn on_standby_report(&mut self, r: &TailReport) -> Result<(), SilenceRefused> {
        let Some((index, key)) = self.cfg.standby else {
            self.c.refused_forged += 1;
            return Err(SilenceRefused::NoStandby);
        };
        if r.epoch != self.cfg.epoch || r.tenure != self.cfg.tenure {
            self.c.refused_stale += 1;
            return Err(if r.epoch != self.cfg.epoch {
                SilenceRefused::Epoch
            } else {
                SilenceRefused::Tenure
            });
        }
        if r.reporter != index {
            self.c.refused_forged += 1;
            return Err(SilenceRefused::Reporter);
        }
        if !r.verify(&key) {
            self.c.refused_forged += 1;
            return Err(SilenceRefused::Signature);
        }
        self.c.standby_reports += 1;
        self.standby = Some(r.clone());
        Ok(())
    }

    /// Voters whose `Silence` counts at `now` (bit `i` = voter `i`): received within
    /// REP_SUSPECT_ABORT_MS, this voter's own while it suspects; every one held once deposed.
    pub fn counted(&self, now: u64) -> u64 {
        let deposed = self.is_deposed();
        let mut bits = 0u64;
        for (i, h) in self.heard.iter().enumerate().take(64) {
            if let Some((at, _)) = h {
                if deposed || now.saturating_sub(*at) < self.cfg.abort_ns {
                    bits |= 1 << i;
                }
            }
        }
        // Its own suspicion counts only at a voter: the standby's replica (index past the
        // voters) deposes on Q voters' Silences alone (07 §9.3: its Silence never counts).
        if self.own.is_some() && self.cfg.me < self.heard.len().min(64) {
            bits |= 1 << self.cfg.me;
        }
        bits
    }

    fn check_quorum(&mut self, now: u64) -> Steps {
        if self.is_deposed() || self.counted(now).count_ones() < self.cfg.quorum {
            return Steps::default();
        }
        self.phase = Phase::Deposed { at: now };
        Steps {
            deposed: true,
            ..Steps::default()
        }
    }

    /// Timers at `now`: the abort of a suspicion short of Q, and the `Silence` repeats.
    pub fn tick(&mut self, now: u64) -> Steps {
        if let Phase::Deposed { at } = self.phase {
            // A peer that missed this voter's Silence may still be short of Q: repeat it for
            // a while (REP_SUSPECT_ABORT_MS × 4).
            let repeat = self.own.is_some()
                && now < at.saturating_add(self.cfg.abort_ns.saturating_mul(4))
                && now.saturating_sub(self.last_broadcast) >= self.cfg.resend_ns;
            if repeat {
                self.last_broadcast = now;
                self.c.broadcasts += 1;
            }
            return Steps {
                broadcast: repeat,
                ..Steps::default()
            };
        }
        let Phase::Frozen { since, .. } = self.phase else {
            return Steps::default();
        };
        let mut s = self.check_quorum(now);
        if s.deposed {
            return s;
        }
        if now.saturating_sub(since) >= self.cfg.abort_ns {
            self.phase = Phase::Live;
            self.own = None;
            self.c.aborts += 1;
            s.unfreeze = true;
            return s;
        }
        if now.saturating_sub(self.last_broadcast) >= self.cfg.resend_ns {
            self.last_broadcast = now;
            self.c.broadcasts += 1;
            s.broadcast = true;
        }
        s
    }

    /// Every report held: the voters' (this one's own included while it suspects or once
    /// deposed) then the standby's.
    pub fn reports(&self) -> impl Iterator<Item = &TailReport> {
        self.own
            .as_ref()
            .map(|(_, r)| r)
            .into_iter()
            .chain(self.heard.iter().flatten().map(|(_, r)| r))
            .chain(self.standby.as_ref())
    }

    /// The voters' TailReports held: this voter's own and its peers' (the standby's left out).
    pub fn voter_reports(&self) -> impl Iterator<Item = &TailReport> {
        self.own
            .as_ref()
            .map(|(_, r)| r)
            .into_iter()
            .chain(self.heard.iter().flatten().map(|(_, r)| r))
    }

    /// The standby's TailReport, when held (07 §9.3).
    pub fn standby_report(&self) -> Option<&TailReport> {
        self.standby.as_ref()
    }

    /// The seal leader's wait (07 §9.2) is over at `now`: deposed, and either every voter's and
    /// the standby's report is held, or `min(T*, deposed at) + REP_TAIL_WAIT_MS` has passed.
    pub fn wait_over(&self, now: u64) -> bool {
        let Phase::Deposed { at } = self.phase else {
            return false;
        };
        let voters = self
            .heard
            .iter()
            .enumerate()
            .all(|(i, h)| h.is_some() || (i == self.cfg.me && self.own.is_some()));
        let standby = self.cfg.standby.is_none() || self.standby.is_some();
        if voters && standby {
            return true;
        }
        let t_star = self.reports().map(|r| r.t_last_rx).max().unwrap_or(at);
        now >= t_star.min(at).saturating_add(self.cfg.tail_wait_ns)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ed25519_dalek::SigningKey;

    const MS: u64 = 1_000_000;

    fn keys() -> Vec<SigningKey> {
        (0..5u8)
            .map(|i| SigningKey::from_bytes(&[i + 1; 32]))
            .collect()
    }

    fn report(k: &SigningKey, reporter: u8, tenure: u8, t_last_rx: u64) -> TailReport {
        let mut r = TailReport {
            epoch: 1,
            tenure,
            reporter,
            h_i: 10,
            f_i: [100, 90],
            extra: Default::default(),
            direct: Default::default(),
            t_last_rx,
            replay_lag_us: 0,
            promotable: false,
            sig: [0; 64],
        };
        r.sign(k);
        r
    }

    fn silence(k: &SigningKey, reporter: u8) -> Silence {
        Silence {
            epoch: 1,
            tenure: 0,
            seq: 0,
            reason: SilenceReason::Silence,
            report: report(k, reporter, 0, 0),
        }
    }

    fn voter(me: usize) -> (Vec<SigningKey>, Deposition) {
        let k = keys();
        let mut cfg = DeposeConfig::new(
            1,
            0,
            0,
            me,
            k[..4].iter().map(|s| s.verifying_key()).collect(),
            3,
        );
        cfg.standby = Some((1, k[4].verifying_key()));
        (k, Deposition::new(cfg))
    }

    #[test]
    fn at_the_standby_q_voters_silences_depose_and_its_own_never_counts() {
        let k = keys();
        // The standby's replica: index 4, past the four voters.
        let cfg = DeposeConfig::new(
            1,
            0,
            0,
            4,
            k[..4].iter().map(|s| s.verifying_key()).collect(),
            3,
        );
        let mut d = Deposition::new(cfg);
        let s = d.on_suspect(SilenceReason::Silence, report(&k[4], 4, 0, 0), 0);
        assert!(s.broadcast && d.is_frozen());
        // Its own suspicion and two voters' Silences: 2 of Q = 3, not deposed.
        let _ = d.on_silence(0, &silence(&k[0], 0), MS);
        let s = d.on_silence(1, &silence(&k[1], 1), MS).unwrap();
        assert!(!s.deposed && !d.is_deposed());
        // The third voter's makes Q.
        let s = d.on_silence(2, &silence(&k[2], 2), 2 * MS).unwrap();
        assert!(s.deposed && d.is_deposed());
    }

    #[test]
    fn deposed_before_it_suspected_a_replica_still_reports_once() {
        let (k, mut d) = voter(3);
        assert_eq!(
            d.report_deposed(report(&k[3], 3, 0, 0), 0),
            Steps::default(),
            "not deposed: nothing to report"
        );
        for (v, key) in k.iter().enumerate().take(3) {
            let _ = d.on_silence(v, &silence(key, v as u8), MS);
        }
        assert!(d.is_deposed());
        assert!(d.silence().is_none(), "it never suspected");
        let s = d.report_deposed(report(&k[3], 3, 0, 0), 2 * MS);
        assert!(s.broadcast);
        assert_eq!(d.silence().map(|m| m.report.reporter), Some(3));
        assert_eq!(
            d.report_deposed(report(&k[3], 3, 0, 0), 3 * MS),
            Steps::default(),
            "once"
        );
        // Repeated for a while like any deposed voter's.
        assert!(d.tick(3 * MS + d.config().resend_ns).broadcast);
    }

    #[test]
    fn q_silences_depose_and_one_voter_alone_aborts() {
        let (k, mut d) = voter(0);
        let s = d.on_suspect(SilenceReason::Silence, report(&k[0], 0, 0, 0), 0);
        assert!(s.broadcast && !s.deposed && d.is_frozen());
        assert_eq!(d.silence().unwrap().report.reporter, 0);
        // One peer agrees: 2 of Q = 3.
        assert_eq!(
            d.on_silence(1, &silence(&k[1], 1), MS),
            Ok(Steps::default())
        );
        // Repeats while frozen.
        let s = d.tick(2 * MS);
        assert!(s.broadcast && !s.unfreeze);
        // Nobody else within REP_SUSPECT_ABORT_MS: unfreeze.
        let s = d.tick(5 * MS);
        assert!(s.unfreeze && !s.deposed);
        assert_eq!(d.phase(), Phase::Live);
        assert_eq!(d.counters().aborts, 1);
        // A late third Silence alone does not depose: voter 1's is stale, this voter's own is
        // gone with the abort.
        assert_eq!(
            d.on_silence(2, &silence(&k[2], 2), 7 * MS),
            Ok(Steps::default())
        );
        assert!(!d.is_deposed());
        // Suspect again: own + voter 2 (fresh) + voter 3 make Q.
        let _ = d.on_suspect(SilenceReason::Silence, report(&k[0], 0, 0, 0), 8 * MS);
        let s = d.on_silence(3, &silence(&k[3], 3), 9 * MS).unwrap();
        assert!(s.deposed);
        assert_eq!(d.phase(), Phase::Deposed { at: 9 * MS });
        // Deposed for good: no abort, no more suspicion; its Silence repeated a while for
        // peers that missed it, then no more.
        assert!(d.tick(11 * MS).broadcast);
        assert_eq!(d.tick(100 * MS), Steps::default());
        assert_eq!(
            d.on_suspect(SilenceReason::Silence, report(&k[0], 0, 0, 0), 101 * MS),
            Steps::default()
        );
        assert!(d.is_deposed());
    }

    #[test]
    fn a_voter_that_does_not_suspect_is_deposed_by_q_others() {
        let (k, mut d) = voter(3);
        for v in 0..2u8 {
            assert!(
                !d.on_silence(v as usize, &silence(&k[v as usize], v), MS)
                    .unwrap()
                    .deposed
            );
        }
        assert!(d.on_silence(2, &silence(&k[2], 2), 2 * MS).unwrap().deposed);
        assert!(!d.is_frozen() && d.is_deposed());
    }

    #[test]
    fn forged_and_stale_silences_do_not_count() {
        let (k, mut d) = voter(0);
        let mut other_tenure = silence(&k[1], 1);
        other_tenure.tenure = 1;
        other_tenure.report = report(&k[1], 1, 1, 0);
        assert_eq!(
            d.on_silence(1, &other_tenure, 0),
            Err(SilenceRefused::Tenure)
        );
        let mut other_seq = silence(&k[1], 1);
        other_seq.seq = 2;
        assert_eq!(d.on_silence(1, &other_seq, 0), Err(SilenceRefused::Seq));
        // Voter 2's report relayed as voter 1's, voter 1 signed by voter 2's key, itself, a
        // stranger.
        assert_eq!(
            d.on_silence(1, &silence(&k[2], 2), 0),
            Err(SilenceRefused::Reporter)
        );
        assert_eq!(
            d.on_silence(1, &silence(&k[2], 1), 0),
            Err(SilenceRefused::Signature)
        );
        assert_eq!(
            d.on_silence(0, &silence(&k[0], 0), 0),
            Err(SilenceRefused::NotVoter)
        );
        assert_eq!(
            d.on_silence(7, &silence(&k[4], 7), 0),
            Err(SilenceRefused::NotVoter)
        );
        let mut tampered = silence(&k[1], 1);
        tampered.report.f_i[0] += 1;
        assert_eq!(
            d.on_silence(1, &tampered, 0),
            Err(SilenceRefused::Signature)
        );
        let c = d.counters();
        assert_eq!(
            (c.refused_stale, c.refused_forged, c.silences_rx),
            (2, 5, 0)
        );
        // The same voter twice is one voter.
        let _ = d.on_silence(1, &silence(&k[1], 1), 0).unwrap();
        let s = d.on_silence(1, &silence(&k[1], 1), 1).unwrap();
        assert!(!s.deposed);
        assert_eq!(d.counted(1).count_ones(), 1);
    }

    #[test]
    fn the_standby_reports_but_never_counts_toward_q() {
        let (k, mut d) = voter(0);
        // The standby's report under its seq_key; a voter's key or another index is refused.
        assert_eq!(d.on_standby_report(&report(&k[4], 1, 0, 0)), Ok(()));
        assert_eq!(
            d.on_standby_report(&report(&k[3], 1, 0, 0)),
            Err(SilenceRefused::Signature)
        );
        assert_eq!(
            d.on_standby_report(&report(&k[4], 2, 0, 0)),
            Err(SilenceRefused::Reporter)
        );
        let _ = d.on_suspect(SilenceReason::Silence, report(&k[0], 0, 0, 0), 0);
        let s = d.on_silence(1, &silence(&k[1], 1), 0).unwrap();
        assert!(!s.deposed, "own + one voter + the standby is not Q");
        assert_eq!(d.reports().count(), 3);
    }

    #[test]
    fn the_leaders_wait_ends_with_every_report_or_at_t_star_plus_the_tail_wait() {
        let (k, mut d) = voter(0);
        let _ = d.on_suspect(SilenceReason::Silence, report(&k[0], 0, 0, 0), 2 * MS);
        let _ = d.on_silence(1, &silence(&k[1], 1), 2 * MS);
        let mut s2 = silence(&k[2], 2);
        s2.report = report(&k[2], 2, 0, MS); // T* = 1 ms
        assert!(d.on_silence(2, &s2, 3 * MS).unwrap().deposed);
        let tail = d.config().tail_wait_ns;
        // Voter 3 and the standby have not reported: wait to T* + REP_TAIL_WAIT_MS.
        assert!(!d.wait_over(MS + tail - 1));
        assert!(d.wait_over(MS + tail));
        // Every report in: over at once.
        let (k, mut d) = voter(0);
        let _ = d.on_suspect(SilenceReason::Silence, report(&k[0], 0, 0, 0), 0);
        for v in 1..4u8 {
            let _ = d.on_silence(v as usize, &silence(&k[v as usize], v), 0);
        }
        assert!(
            d.is_deposed() && !d.wait_over(1),
            "the standby is still awaited"
        );
        d.on_standby_report(&report(&k[4], 1, 0, 0)).unwrap();
        assert!(d.wait_over(1));
        // A reporter whose clock runs far ahead cannot stretch the wait past the local bound.
        let (k, mut d) = voter(0);
        let _ = d.on_suspect(SilenceReason::Silence, report(&k[0], 0, 0, 0), 0);
        let mut far = silence(&k[1], 1);
        far.report = report(&k[1], 1, 0, 1 << 50);
        let _ = d.on_silence(1, &far, 0);
        let _ = d.on_silence(2, &silence(&k[2], 2), 0);
        assert!(d.wait_over(tail));
    }
}
