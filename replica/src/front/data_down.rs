//! Data box failure at a replica (07 §5.7): the `DataDown` gossip, its quorum, the
//! deterministic backup home and when to send `DataRedirect`.
//!
//! 1. The data side marks box `d` down after REP_DATA_SILENCE_MS of silence
//!    ([`crate::front::data::DataAlarm::BoxDown`]); the replica then gossips `DataDown{d}` to its
//!    peers and to every data box ([`DataDown::on_own`]), and repeats it every
//!    [`GOSSIP_EVERY_NS`] while `d` stays silent (a lost datagram is replaced).
//! 2. `quorum` distinct voters' `DataDown{d}` (its own included) make `d` down here
//!    ([`DataDown::on_peer`]). One voter's silence alone moves nothing: a faulty voter cannot
//!    redirect the clients.
//! 3. Once `d` is down, each session homed on `d` is served by the backup home: the next box
//!    after `d` in facility order that is not down ([`DataDown::backup`], the rule the data
//!    boxes apply too; no message chooses it). The replica sends `DataRedirect{d → d', session,
//!    resend_from}` to the live data boxes, which relay it to the session's client, and fetches
//!    the session's payloads from `d'` from then on. It repeats the redirects every
//!    [`GOSSIP_EVERY_NS`] for [`REDIRECT_REPEAT`] rounds: the data boxes relay only a first one
//!    or one with a lower `resend_from`.
//!
//! A box that sends again is up in this replica's eyes: the votes for it are dropped and, if it
//! was down by quorum, it is live again for the backup rule; sessions already moved stay on
//! their backup home (07 names no move back; the operator's restart of the box is a new home
//! assignment).

use crate::front::data::BOXES_MAX;

/// How often the gossip and the redirects are repeated while they matter.
pub const GOSSIP_EVERY_NS: u64 = 100_000_000;
/// Rounds of `DataRedirect` per failed box (the first included).
pub const REDIRECT_REPEAT: u32 = 10;

/// What the replica must send now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DownStep {
    /// Gossip `DataDown{d}` to the peers and the data boxes.
    Gossip(u8),
    /// Box `from` is down by quorum: redirect its sessions to `to`.
    Redirect {
        /// The failed home.
        from: u8,
        /// Its backup.
        to: u8,
    },
}

/// Counters of the data-box failover.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DownCounters {
    /// `DataDown` gossip sent (rounds, not datagrams).
    pub gossip_rounds: u64,
    /// `DataDown` votes taken from peers.
    pub peer_votes: u64,
    /// `DataDown` from a peer naming a box this home does not have.
    pub bad_votes: u64,
    /// Boxes made down by a quorum.
    pub effective: u64,
    /// `DataRedirect` rounds sent.
    pub redirect_rounds: u64,
    /// Boxes down with no live box left to take their sessions.
    pub no_backup: u64,
    /// Boxes down by quorum that were heard again (live again for the backup rule).
    pub recovered: u64,
}

/// The failover state of one replica (see the module docs).
#[derive(Debug)]
pub struct DataDown {
    n_boxes: u8,
    quorum: u32,
    me: usize,
    /// Per box: bit `i` = voter `i` said it is down.
    votes: [u64; BOXES_MAX],
    /// Per box: this replica sees it silent.
    silent: [bool; BOXES_MAX],
    down: [bool; BOXES_MAX],
    /// Per box: redirect rounds left and the time of the next round.
    redirect: [(u32, u64); BOXES_MAX],
    /// Per box: the time of the next gossip round.
    next_gossip: [u64; BOXES_MAX],
    c: DownCounters,
}

impl DataDown {
    /// A replica with voter index `me` in a home of `n_boxes` data boxes, where `quorum`
    /// voters' `DataDown` make a box down (07 §5.7: Q).
    pub fn new(n_boxes: u8, quorum: u32, me: usize) -> Self {
        DataDown {
            n_boxes: n_boxes.min(BOXES_MAX as u8),
            quorum: quorum.max(1),
            me: me.min(63),
            votes: [0; BOXES_MAX],
            silent: [false; BOXES_MAX],
            down: [false; BOXES_MAX],
            redirect: [(0, 0); BOXES_MAX],
            next_gossip: [0; BOXES_MAX],
            c: DownCounters::default(),
        }
    }

    /// The counters.
    pub fn counters(&self) -> DownCounters {
        self.c
    }

    /// Whether box `d` is down by quorum here.
    pub fn is_down(&self, d: u8) -> bool {
        self.down.get(d as usize).copied().unwrap_or(false)
    }

    /// Whether this replica sees `d` silent (and votes it down).
    pub fn is_silent(&self, d: u8) -> bool {
        self.silent.get(d as usize).copied().unwrap_or(false)
    }

    /// The backup home of `d`: the next box after it in facility order, cyclically, that is
    /// not down (07 §5.7). `None` when no other box is live.
    pub fn backup(&self, d: u8) -> Option<u8> {
        let n = self.n_boxes;
        (1..n)
            .map(|k| (d + k) % n)
            .find(|&b| !self.down[b as usize])
    }

    /// This replica's data side saw `d` silent: vote, and gossip at the next [`Self::tick`].
    pub fn on_own(&mut self, d: u8, now: u64) {
        if d >= self.n_boxes {
            return;
        }
        self.silent[d as usize] = true;
        self.next_gossip[d as usize] = now;
        self.vote(self.me, d, now);
    }

    /// Box `d` sends again: the silence ended. Every vote for it is dropped (a peer that still
    /// sees it silent gossips again within [`GOSSIP_EVERY_NS`]), and a box down by quorum is
    /// live again for the backup rule and its remaining redirect rounds are cancelled —
    /// sessions already moved stay on their backup. On two shared cores a 20 ms stall of a data
    /// box process seen by every replica at once made it down by quorum for good, and a later
    /// real failure of the other box then found no live backup (a clean CI run).
    pub fn on_own_up(&mut self, d: u8) {
        if d >= self.n_boxes {
            return;
        }
        let i = d as usize;
        self.silent[i] = false;
        self.votes[i] = 0;
        if self.down[i] {
            self.down[i] = false;
            self.redirect[i] = (0, 0);
            self.c.recovered += 1;
        }
    }

    /// A peer voter `voter` gossiped `DataDown{d}`.
    pub fn on_peer(&mut self, voter: usize, d: u8, now: u64) {
        if d >= self.n_boxes || voter >= 64 {
            self.c.bad_votes += 1;
            return;
        }
        self.c.peer_votes += 1;
        self.vote(voter, d, now);
    }

    fn vote(&mut self, voter: usize, d: u8, now: u64) {
        let i = d as usize;
        self.votes[i] |= 1u64 << voter;
        // Only a replica that sees the silence itself redirects: its own vote is in the count.
        if !self.down[i] && self.silent[i] && self.votes[i].count_ones() >= self.quorum {
            self.down[i] = true;
            self.c.effective += 1;
            self.redirect[i] = (REDIRECT_REPEAT, now);
        }
    }

    /// What is due at `now`, in box order.
    pub fn tick(&mut self, now: u64, mut f: impl FnMut(DownStep)) {
        for d in 0..self.n_boxes {
            let i = d as usize;
            if self.silent[i] && now >= self.next_gossip[i] {
                self.next_gossip[i] = now.saturating_add(GOSSIP_EVERY_NS);
                self.c.gossip_rounds += 1;
                f(DownStep::Gossip(d));
            }
            let (left, at) = self.redirect[i];
            if left > 0 && now >= at {
                let Some(to) = self.backup(d) else {
                    self.redirect[i] = (0, 0);
                    self.c.no_backup += 1;
                    continue;
                };
                self.redirect[i] = (left - 1, now.saturating_add(GOSSIP_EVERY_NS));
                self.c.redirect_rounds += 1;
                f(DownStep::Redirect { from: d, to });
            }
        }
    }
}
