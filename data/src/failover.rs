//! Failover tile (07 §5.7): `DataDown` votes, the deterministic backup home, and the relay of
//! `DataRedirect` to the affected sessions' clients.
//!
//! 1. Replicas gossip `DataDown{d}`; `quorum` of them from distinct voting destinations make
//!    box `d` down here ([`Failover::on_data_down`]).
//! 2. A session homed on a down box is served by the backup home: the next live box after it in
//!    facility order, cyclically ([`Failover::backup`]); no message chooses it.
//! 3. Replicas send `DataRedirect{from, to, session, resend_from}`; the box checks that `from`
//!    is on the session's home chain and `to` is the deterministic backup of `from`, then
//!    relays it to the client's bound address as a `DataRedirect` response record
//!    ([`Failover::on_redirect`]). A repeat with the same or a higher `resend_from` is not
//!    relayed again; a lower one is (the client must resend more).
//!
//! 4. After a final seal (07 §9.5, client redirect), the voters send `SeqChange{epoch, tenure,
//!    new_seq, address}`; once `quorum` distinct voters sent the same one, the box relays it to
//!    every session whose address it knows, as a `SeqChange` response record
//!    ([`Failover::on_seq_change`]), once per tenure (`new_seq` 0xFF: no sequencer, the book
//!    stays halted). A single voter cannot move the clients.
//!
//! The relay is a response packet (docs/wire-messages.md §5) tagged under the session's `K_out`,
//! with `echo_pkt_seq` 0 and `resp_seq` = [`RELAY_RESP_SEQ`]: the data box is not part of the
//! sequencer's gapless `resp_seq` stream, so it uses a value that stream never reaches.

use std::net::SocketAddr;

use vyrn_wire::msg::client::{Record, Response, SipKey};
use vyrn_wire::msg::ctrl::{DataRedirect, SeqChange};

use crate::counters::Counters;
use crate::out::{Class, OutQueue, To};

/// `resp_seq` of a response packet a data box relays (this project's decision; see the module
/// docs): `u64::MAX`, never reached by a sequencer's per-session count from 1.
pub const RELAY_RESP_SEQ: u64 = u64::MAX;

/// Per-session state the failover path needs.
#[derive(Clone)]
struct SessionFo {
    session: u32,
    home: u8,
    k_out: SipKey,
    addr: Option<SocketAddr>,
    /// A copy from this session was received (its address is then known, or the port has none).
    seen: bool,
    last: Option<(u8, u8, u32)>,
}

/// The failover tile.
pub struct Failover {
    index: u8,
    /// Box indices in facility order.
    boxes: Box<[u8]>,
    quorum: u32,
    /// Bit `i` = destination `i` is a voter.
    voters: u64,
    /// Per box index: bit `i` = destination `i` voted it down.
    votes: Box<[u64; 256]>,
    down: Box<[bool; 256]>,
    sessions: Box<[SessionFo]>,
    /// `SeqChange`s being voted, each with its voters (bit per destination); a few at most.
    seq_votes: Vec<(SeqChange, u64)>,
    /// The newest `SeqChange` relayed.
    seq_taken: Option<SeqChange>,
}

/// `SeqChange`s voted at once (more are refused: honest voters send one per seal).
const SEQ_VOTES_MAX: usize = 4;

impl core::fmt::Debug for Failover {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let down: Vec<u8> = (0..=255u8).filter(|&d| self.down[d as usize]).collect();
        f.debug_struct("Failover")
            .field("index", &self.index)
            .field("boxes", &self.boxes)
            .field("down", &down)
            .finish_non_exhaustive()
    }
}

/// What a session needs for the failover tile: `(session, home, K_out, configured address)`.
pub type SessionFoConfig = (u32, u8, SipKey, Option<SocketAddr>);

impl Failover {
    /// A tile for box `index` of `boxes` (facility order), with `voters` (bit per destination)
    /// and the sessions in session-index order.
    pub fn new(
        index: u8,
        boxes: &[u8],
        quorum: u8,
        voters: u64,
        sessions: &[SessionFoConfig],
    ) -> Self {
        Failover {
            index,
            boxes: boxes.to_vec().into_boxed_slice(),
            quorum: quorum as u32,
            voters,
            votes: Box::new([0; 256]),
            down: Box::new([false; 256]),
            sessions: sessions
                .iter()
                .map(|&(session, home, k_out, addr)| SessionFo {
                    session,
                    home,
                    k_out,
                    addr,
                    seen: false,
                    last: None,
                })
                .collect(),
            seq_votes: Vec::new(),
            seq_taken: None,
        }
    }

    /// The newest `SeqChange` relayed (07 §9.5), if any.
    pub fn seq_change(&self) -> Option<&SeqChange> {
        self.seq_taken.as_ref()
    }

    /// A voter's `SeqChange` from destination `from` (07 §9.5). Once `quorum` distinct voters
    /// sent the same one for a later tenure than the last relayed, it is relayed to every
    /// session whose address this box knows. Returns the sessions it was queued for.
    pub fn on_seq_change(
        &mut self,
        from: usize,
        m: &SeqChange,
        out: &mut OutQueue,
        c: &mut Counters,
    ) -> usize {
        c.seq_change_votes += 1;
        if from >= 64 || self.voters & (1 << from) == 0 {
            c.seq_change_refused += 1;
            return 0;
        }
        if self
            .seq_taken
            .is_some_and(|t| (m.epoch, m.tenure) <= (t.epoch, t.tenure))
        {
            return 0;
        }
        let held = self.seq_votes.len();
        let votes = match self.seq_votes.iter_mut().find(|v| v.0 == *m) {
            Some(v) => {
                v.1 |= 1 << from;
                v.1
            }
            None if held < SEQ_VOTES_MAX => {
                self.seq_votes.push((*m, 1 << from));
                1 << from
            }
            None => {
                c.seq_change_refused += 1;
                return 0;
            }
        };
        if votes.count_ones() < self.quorum {
            return 0;
        }
        self.seq_taken = Some(*m);
        self.seq_votes.clear();
        c.seq_changes += 1;
        let mut n = 0;
        for s in self.sessions.iter() {
            // As a redirect: a session heard from on a port with no addresses (a test's
            // `MemPort`) goes to the port's own peer.
            if s.addr.is_none() && !s.seen {
                c.seq_change_no_addr += 1;
                continue;
            }
            // 07 §9.4, §9.6: where the ended tenure's log stops, first (the client settles its
            // fills of that tenure), then the new sequencer.
            let recs = [
                Record::TenureEnd {
                    epoch: m.epoch,
                    tenure: m.tenure.wrapping_sub(1),
                    height: m.seal_height,
                    last_step: m.seal_last_step,
                },
                Record::SeqChange {
                    epoch: m.epoch,
                    tenure: m.tenure,
                    new_seq: m.new_seq,
                    addr: m.addr,
                },
            ];
            if relay(s, &recs, out, c) == Relayed::Yes {
                n += 1;
            }
        }
        c.seq_change_relayed += n as u64;
        n
    }

    /// Whether box `d` is down here (Q votes).
    pub fn is_down(&self, d: u8) -> bool {
        self.down[d as usize]
    }

    /// Learn a session's bound address from a copy that passed the MAC check.
    #[inline]
    pub fn seen(&mut self, sidx: u32, src: Option<SocketAddr>) {
        let s = &mut self.sessions[sidx as usize];
        s.seen = true;
        if src.is_some() {
            s.addr = src;
        }
    }

    /// The address a session's redirects go to, as learned from its packets (session index).
    pub fn addr(&self, sidx: u32) -> Option<SocketAddr> {
        self.sessions.get(sidx as usize).and_then(|s| s.addr)
    }

    /// A `DataDown{d}` from destination `from`. Returns true when it made `d` down.
    pub fn on_data_down(&mut self, from: usize, d: u8, c: &mut Counters) -> bool {
        c.data_down_votes += 1;
        if from >= 64 || self.voters & (1 << from) == 0 || self.down[d as usize] {
            return false;
        }
        self.votes[d as usize] |= 1 << from;
        if self.votes[d as usize].count_ones() < self.quorum {
            return false;
        }
        self.down[d as usize] = true;
        c.data_down_effective += 1;
        if d == self.index {
            c.data_down_self += 1;
        }
        true
    }

    /// Forget votes against `d` (the operator brought it back).
    pub fn mark_up(&mut self, d: u8) {
        self.votes[d as usize] = 0;
        self.down[d as usize] = false;
    }

    /// The backup home of `d` (07 §5.7): the next box after `d` in facility order, cyclically,
    /// that is not down and is not `d`. `None` when every other box is down or `d` is unknown.
    pub fn backup(&self, d: u8) -> Option<u8> {
        let pos = self.boxes.iter().position(|&b| b == d)?;
        let n = self.boxes.len();
        (1..n)
            .map(|k| self.boxes[(pos + k) % n])
            .find(|&b| !self.down[b as usize])
    }

    /// The box serving a session homed on `home` now: `home` while it is up, else the backup
    /// chain's first live box.
    pub fn serving(&self, home: u8) -> Option<u8> {
        let mut h = home;
        for _ in 0..self.boxes.len() {
            if !self.down[h as usize] {
                return Some(h);
            }
            h = self.backup(h)?;
        }
        None
    }

    /// Whether `from` is on the home chain of a session homed on `home`: `home` itself or a
    /// down box after it in facility order before the first live one (each such box served
    /// the session after the one before it went down).
    fn on_chain(&self, home: u8, from: u8) -> bool {
        let Some(pos) = self.boxes.iter().position(|&b| b == home) else {
            return false;
        };
        let n = self.boxes.len();
        for k in 0..n {
            let b = self.boxes[(pos + k) % n];
            if b == from {
                return true;
            }
            if !self.down[b as usize] {
                return false;
            }
        }
        false
    }

    /// A replica's `DataRedirect` for session index `sidx` (`None`: unknown session): check
    /// it and queue the relay to the client. Returns true when relayed.
    pub fn on_redirect(
        &mut self,
        r: &DataRedirect,
        sidx: Option<u32>,
        out: &mut OutQueue,
        c: &mut Counters,
    ) -> bool {
        let Some(sidx) = sidx else {
            c.redirects_refused += 1;
            return false;
        };
        let s = &self.sessions[sidx as usize];
        // The backup of `from`, counting `from` as down whatever the votes here say: replicas
        // send this once Q of them agree, and their votes may still be on the way here. This
        // box counts as live whatever votes it got: it is here, relaying (a box voted down by
        // a scheduling stall that ended is still the backup the replicas compute).
        let backup = {
            let pos = self.boxes.iter().position(|&b| b == r.from);
            let n = self.boxes.len();
            pos.and_then(|pos| {
                (1..n)
                    .map(|k| self.boxes[(pos + k) % n])
                    .find(|&b| b == self.index || !self.down[b as usize])
            })
        };
        if !self.on_chain(s.home, r.from) || backup != Some(r.to) {
            c.redirects_refused += 1;
            return false;
        }
        if let Some((f, t, from_seq)) = s.last {
            if f == r.from && t == r.to && r.resend_from >= from_seq {
                c.redirects_dup += 1;
                return false;
            }
        }
        if !s.seen && s.addr.is_none() {
            c.redirects_no_addr += 1;
            return false;
        }
        let rec = Record::DataRedirect {
            from: r.from,
            to: r.to,
            resend_from: r.resend_from,
        };
        match relay(s, &[rec], out, c) {
            Relayed::Yes => {}
            Relayed::Full => return false,
            Relayed::Unencodable => {
                c.redirects_refused += 1;
                return false;
            }
        }
        self.sessions[sidx as usize].last = Some((r.from, r.to, r.resend_from));
        c.redirects_relayed += 1;
        true
    }
}

/// What [`relay`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Relayed {
    Yes,
    /// No out buffer free (`ctrl_out_full`).
    Full,
    /// The record does not encode.
    Unencodable,
}

/// Queue `rec` to session `s`'s client as a response packet tagged under its `K_out`, outside
/// its `resp_seq` stream ([`RELAY_RESP_SEQ`]).
fn relay(s: &SessionFo, recs: &[Record], out: &mut OutQueue, c: &mut Counters) -> Relayed {
    let Some(id) = out.alloc(Class::Ctrl) else {
        c.ctrl_out_full += 1;
        return Relayed::Full;
    };
    let resp = Response {
        session: s.session,
        echo_pkt_seq: 0,
        resp_seq: RELAY_RESP_SEQ,
        resend: false,
        records: recs.to_vec(),
    };
    if resp.encode(&s.k_out, out.buf_mut(id)).is_err() {
        out.cancel(id);
        return Relayed::Unencodable;
    }
    out.commit(id, To::Client(s.addr));
    Relayed::Yes
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fo() -> Failover {
        // Facility order 3, 1, 4, 2; destinations 0..3 voters, 4 the standby.
        Failover::new(1, &[3, 1, 4, 2], 3, 0b01111, &[(77, 4, [0; 16], None)])
    }

    #[test]
    fn down_needs_q_distinct_voters() {
        let mut f = fo();
        let mut c = Counters::default();
        assert!(!f.on_data_down(0, 4, &mut c));
        assert!(!f.on_data_down(0, 4, &mut c), "same voter twice");
        assert!(!f.on_data_down(4, 4, &mut c), "the standby does not vote");
        assert!(!f.on_data_down(1, 4, &mut c));
        assert!(f.on_data_down(2, 4, &mut c));
        assert!(f.is_down(4));
        assert_eq!(c.data_down_votes, 5);
        assert_eq!(c.data_down_effective, 1);
        assert_eq!(c.data_down_self, 0);
    }

    #[test]
    fn backup_is_next_live_in_facility_order() {
        let mut f = fo();
        let mut c = Counters::default();
        assert_eq!(f.backup(3), Some(1));
        assert_eq!(f.backup(2), Some(3), "wraps around");
        for v in 0..3 {
            f.on_data_down(v, 1, &mut c);
        }
        assert_eq!(f.backup(3), Some(4), "skips a down box");
        assert_eq!(f.serving(1), Some(4));
        assert_eq!(f.serving(3), Some(3));
        for d in [3, 4, 2] {
            for v in 0..3 {
                f.on_data_down(v, d, &mut c);
            }
        }
        assert_eq!(f.backup(2), None);
        assert_eq!(f.serving(2), None);
        assert_eq!(f.backup(9), None, "unknown box");
        assert_eq!(c.data_down_self, 1, "box 1 is this box");
    }

    #[test]
    fn seq_change_needs_q_distinct_voters_and_is_relayed_once_per_tenure() {
        let mut f = fo();
        let mut c = Counters::default();
        let mut out = OutQueue::new(16);
        let a: SocketAddr = "127.0.0.1:4000".parse().unwrap();
        f.seen(0, Some(a));
        let m = SeqChange {
            epoch: 1,
            tenure: 1,
            new_seq: 1,
            addr: vyrn_wire::msg::addr_from_socket("127.0.0.1:5000".parse().unwrap()),
            seal_height: 9,
            seal_last_step: 120,
        };
        assert_eq!(f.on_seq_change(0, &m, &mut out, &mut c), 0);
        assert_eq!(
            f.on_seq_change(0, &m, &mut out, &mut c),
            0,
            "same voter twice"
        );
        assert_eq!(
            f.on_seq_change(4, &m, &mut out, &mut c),
            0,
            "the standby is no voter"
        );
        // A voter naming another box counts for that one only.
        let other = SeqChange { new_seq: 2, ..m };
        assert_eq!(f.on_seq_change(1, &other, &mut out, &mut c), 0);
        assert_eq!(f.on_seq_change(1, &m, &mut out, &mut c), 0);
        assert!(out.is_empty());
        assert_eq!(f.on_seq_change(2, &m, &mut out, &mut c), 1);
        assert_eq!(f.seq_change(), Some(&m));
        let (to, bytes, _) = out.get(0).expect("queued");
        assert_eq!(to, To::Client(Some(a)));
        let r = Response::parse(bytes, &[0; 16]).expect("tagged under K_out");
        assert_eq!(
            r.records,
            vec![
                Record::TenureEnd {
                    epoch: 1,
                    tenure: 0,
                    height: 9,
                    last_step: 120
                },
                Record::SeqChange {
                    epoch: 1,
                    tenure: 1,
                    new_seq: 1,
                    addr: m.addr
                }
            ]
        );
        // The fourth voter's copy, and the tenure again: nothing more.
        assert_eq!(f.on_seq_change(3, &m, &mut out, &mut c), 0);
        assert_eq!(out.len(), 1);
        assert_eq!(
            (c.seq_changes, c.seq_change_relayed, c.seq_change_refused),
            (1, 1, 1)
        );
    }
}
