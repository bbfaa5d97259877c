//! The warm standby's replica checks every block as a voter does and votes in none (07 §9.5:
//! a non-voting `vyrn-replica` beside `vyrn-seq standby`). Its verdict is the voters' (the
//! header chain, `order_root`, `data_root`, every payload joined); what it has checked is what it
//! may forget once replayed, as a voter forgets what it voted.

use super::*;
use crate::front::verdict::{Pending, Refusal, VerifyOutcome};
use vyrn_wire::consts::REP_MAX_HDRS_PER_PROPOSAL;

/// Where the next run of held headers stands ([`verify_run`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Run {
    /// Every block from the first held through this height checks, and this is its hash.
    Through(u64, Hash),
    /// Nothing to check yet, or the first block waits (on the stream or its payloads).
    Wait(Option<(u64, Pending)>),
    /// The verdict refused a block: a contradiction at that height.
    Refused(u64, Refusal),
    /// Pending past REP_VERIFY_WAIT_MS.
    TimedOut,
}

/// Check the held headers from `next` on, as one proposal of up to
/// REP_MAX_HDRS_PER_PROPOSAL contiguous ones would be; a run whose tail is pending is cut
/// to its ready part.
pub(super) fn verify_run(
    core: &mut ReplicaCore,
    hashes: &std::collections::BTreeMap<u64, Hash>,
    next: u64,
    now: u64,
    out: &mut impl ReplicaOut,
) -> Run {
    let mut last = None;
    for (&h, hash) in hashes.range(next..) {
        if h != last.map_or(next, |(l, _)| l + 1) || h - next >= REP_MAX_HDRS_PER_PROPOSAL {
            break;
        }
        last = Some((h, *hash));
    }
    let Some((last_h, last_hash)) = last else {
        return Run::Wait(None);
    };
    match core.verify(next, last_h, &last_hash, now, out) {
        VerifyOutcome::True => Run::Through(last_h, last_hash),
        VerifyOutcome::Pending(h, p) if h > next => {
            let Some(&x) = hashes.get(&(h - 1)) else {
                return Run::Wait(Some((h, p)));
            };
            match core.verify(next, h - 1, &x, now, out) {
                VerifyOutcome::True => Run::Through(h - 1, x),
                _ => Run::Wait(Some((h, p))),
            }
        }
        VerifyOutcome::Pending(h, p) => Run::Wait(Some((h, p))),
        VerifyOutcome::False(h, Some(r)) => Run::Refused(h, r),
        VerifyOutcome::False(_, None) => Run::TimedOut,
    }
}

/// The standby replica's check of every block, in height order.
#[derive(Debug, Default)]
pub(super) struct Follower {
    next: u64,
    hashes: std::collections::BTreeMap<u64, Hash>,
    /// The first block the verdict refused: the standby stops checking (REP_A_STANDBY: it is no
    /// longer promotable).
    pub(super) refused: Option<(u64, Refusal)>,
    /// Every block through this height checks.
    pub(super) checked: u64,
    /// Checks that ran past REP_VERIFY_WAIT_MS (asked again).
    pub(super) timeouts: u64,
    /// When the first block checked (the history of 07 §9.5 counts from there: this replica
    /// loads no snapshot, it replays from the tenure's start).
    since: Option<u64>,
    /// REP_A_STANDBY as last logged.
    alarm: bool,
    /// When [`Follower::alarm_due`] next says yes.
    next_alarm: u64,
    /// REP_PROMOTE_HISTORY_S, ns ([`crate::front::core::Budgets::promote_history_ns`]).
    history_ns: u64,
    /// Its host cannot start the box it would become ([`Node::bar_promotion`]).
    pub(super) barred: bool,
}

/// How often the standby reads replay's lag for REP_A_STANDBY (a histogram read: not per
/// round).
const ALARM_EVERY_NS: u64 = 100_000_000;

/// 07 §9.5 `promotable`, and why not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Promotable {
    /// REP_PROMOTE_HISTORY_S replayed, replay lag ≤ REP_PROMOTE_LAG_US, every block checked.
    Yes,
    /// Still warming: this much history so far, ns.
    Warming(u64),
    /// Replay lags: its lag now, µs.
    Lagging(u64),
    /// The verdict refused a block at this height.
    Refused(u64),
    /// Its host cannot start the box it would become (its home file names no client address
    /// for it, or its key is not the membership's).
    NoBox,
}

impl Promotable {
    /// Whether the standby reports `promotable = 1`.
    pub fn yes(self) -> bool {
        self == Promotable::Yes
    }
}

impl Follower {
    pub(super) fn new(history_ns: u64) -> Self {
        Follower {
            next: 1,
            history_ns,
            ..Default::default()
        }
    }

    /// A header the decoder holds.
    pub(super) fn on_header(&mut self, height: u64, hash: Hash) {
        if height >= self.next && self.hashes.len() < 1 << 16 {
            self.hashes.insert(height, hash);
        }
    }

    /// One round: check the next run of held headers.
    pub(super) fn tick(&mut self, core: &mut ReplicaCore, now: u64, out: &mut impl ReplicaOut) {
        if self.refused.is_some() {
            return;
        }
        match verify_run(core, &self.hashes, self.next, now, out) {
            Run::Through(h, _) => {
                self.since.get_or_insert(now);
                self.checked = h;
                self.next = h + 1;
                self.hashes = self.hashes.split_off(&self.next);
            }
            Run::Wait(_) => {}
            Run::Refused(h, r) => {
                eprintln!("standby replica: the verdict refuses block {h}: {r:?}");
                self.refused = Some((h, r));
            }
            Run::TimedOut => self.timeouts += 1,
        }
    }

    /// 07 §9.5 at `now`, with replay's lag `lag_us`.
    pub(super) fn promotable(&self, now: u64, lag_us: u64) -> Promotable {
        use vyrn_wire::consts::REP_PROMOTE_LAG_US;
        if self.barred {
            return Promotable::NoBox;
        }
        if let Some((h, _)) = self.refused {
            return Promotable::Refused(h);
        }
        let history = self.since.map_or(0, |t| now.saturating_sub(t));
        if history < self.history_ns {
            return Promotable::Warming(history);
        }
        if lag_us > REP_PROMOTE_LAG_US {
            return Promotable::Lagging(lag_us);
        }
        Promotable::Yes
    }

    /// REP_A_STANDBY (07 §9.5: the second-failure margin is missing) as a structured line on
    /// each change once warm: raised while not promotable (warming does not raise it).
    pub(super) fn alarm(&mut self, p: Promotable) {
        let raise = matches!(
            p,
            Promotable::Lagging(_) | Promotable::Refused(_) | Promotable::NoBox
        );
        if raise != self.alarm {
            self.alarm = raise;
            eprintln!(
                "standby replica: alarm=REP_A_STANDBY state={} cause={p:?}",
                if raise { "raised" } else { "cleared" }
            );
        }
    }

    /// Whether it is time to evaluate REP_A_STANDBY (every [`ALARM_EVERY_NS`]).
    pub(super) fn alarm_due(&mut self, now: u64) -> bool {
        if now < self.next_alarm {
            return false;
        }
        self.next_alarm = now + ALARM_EVERY_NS;
        true
    }

    /// Whether REP_A_STANDBY is raised.
    pub(super) fn alarm_raised(&self) -> bool {
        self.alarm
    }
}
