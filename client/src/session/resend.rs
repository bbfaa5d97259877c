//! Copy-1 resends (07 §9.5): the timeout (RFC 6298 with Karn's rule), the resend window, the
//! go-back-N answer to `BAD_SEQ`, and which packets a `resp_seq` hole resends.

use super::*;

/// The resend timer of copy 1 (RFC 6298's, with Karn's rule): a smoothed request → first
/// answer time and its variation, from packets never resent, and a backoff exponent that
/// doubles the timeout each time a packet times out again and is cleared by the next sample.
///
/// A sequencer that answers late (a promoted standby working off the outage's backlog, a box
/// on shared cores) is then not sent every unanswered packet again each `resend_after_ns`:
/// each such resend is a duplicate it must log and answer (07 §9.5), and the extra load makes
/// it later still.
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct Rtt {
    pub(super) srtt: u64,
    rttvar: u64,
    pub(super) backoff: u8,
    /// When `backoff` last grew (it grows at most once per timeout).
    backed_off_at: u64,
}

impl Rtt {
    /// A sample `r` (ns) from a packet answered without a resend.
    pub(super) fn sample(&mut self, r: u64) {
        if self.srtt == 0 {
            self.srtt = r.max(1);
            self.rttvar = r / 2;
        } else {
            self.rttvar = (3 * self.rttvar + self.srtt.abs_diff(r)) / 4;
            self.srtt = (7 * self.srtt + r) / 8;
        }
        self.backoff = 0;
    }

    /// The timeout now: `max(resend_after_ns, srtt + 4·rttvar)` doubled `backoff` times, at
    /// most `resend_after_ns << resend_backoff_max`, never under `resend_gap_ns`.
    pub(super) fn rto(&self, cfg: &SessionConfig) -> u64 {
        let base = cfg
            .resend_after_ns
            .max(self.srtt.saturating_add(self.rttvar.saturating_mul(4)));
        let cap = cfg
            .resend_after_ns
            .saturating_mul(1 << cfg.resend_backoff_max)
            .max(cfg.resend_after_ns);
        base.saturating_mul(1 << self.backoff.min(16))
            .min(cap)
            .max(cfg.resend_gap_ns)
    }

    /// A packet timed out again: double the timeout (once per timeout).
    pub(super) fn back_off(&mut self, now: u64, rto: u64, max: u8) {
        if now.saturating_sub(self.backed_off_at) >= rto {
            self.backoff = (self.backoff + 1).min(max);
            self.backed_off_at = now;
        }
    }
}

impl Session {
    /// Queue a resend of `copy` of `pkt_seq` (07 §9.5, §5.7): `flags.resend` set, tag redone.
    /// A copy 1 never sent (held behind the window when it was built) goes as it was built.
    pub(super) fn resend(&mut self, pkt_seq: u32, copy: PktCopy, now: u64) {
        let k_seq = self.cfg.k_seq;
        let window = self.cfg.resend_window;
        let Some(s) = self.retain.get_mut(pkt_seq) else {
            return;
        };
        if s.queued[copy as usize] {
            return;
        }
        if copy == PktCopy::Seq {
            if s.in_flight {
                // Timed out: no longer out.
                s.in_flight = false;
                self.resends_out -= 1;
            }
            if self.resends_out >= window {
                if !s.pending {
                    s.pending = true;
                    self.resends_held += 1;
                }
                return;
            }
            if s.pending {
                s.pending = false;
                self.resends_held -= 1;
            }
            s.in_flight = true;
            self.resends_out += 1;
            if std::mem::take(&mut s.held_first) {
                s.queued[0] = true;
                s.last_tx_ns = now;
                self.outbox.push_back((pkt_seq, copy));
                return;
            }
        }
        if !s.resend_form {
            let len = s.len as usize;
            mark_resend(&mut s.bytes[..len], &k_seq);
            s.resend_form = true;
        }
        s.queued[copy as usize] = true;
        match copy {
            PktCopy::Seq => {
                s.last_tx_ns = now;
                s.resends = s.resends.saturating_add(1);
                self.counters.resend_seq += 1;
            }
            PktCopy::Data => self.counters.resend_data += 1,
        }
        self.outbox.push_back((pkt_seq, copy));
    }

    /// Resend copy 1 of every retained packet in `from..` that `pick` selects.
    pub(super) fn resend_where(&mut self, from: u32, now: u64, pick: impl Fn(&Self, u32) -> bool) {
        if self.seq_addr.is_none() {
            return;
        }
        for p in from.max(self.retain.head())..self.retain.end() {
            if pick(self, p) {
                self.resend(p, PktCopy::Seq, now);
            }
        }
    }

    /// Forget every copy-1 resend out (the sequencer they went to is gone), and with `held`
    /// every one held back too (there is no sequencer to send them to).
    pub(super) fn window_reset(&mut self, held: bool) {
        for p in self.retain.head()..self.retain.end() {
            if let Some(s) = self.retain.get_mut(p) {
                s.in_flight = false;
                if held {
                    (s.pending, s.held_first) = (false, false);
                }
            }
        }
        self.resends_out = 0;
        if held {
            self.resends_held = 0;
        }
    }

    pub(super) fn unanswered(&self, p: u32) -> bool {
        self.retain.get(p).is_some_and(|s| !s.fully_answered())
    }

    /// Packet `p` placed an order whose responses may not all have come: later ones (maker
    /// fills, its cancel's answer) may still echo it, or one missing from a hole may be its
    /// `Ack`. An order acked and ended (filled, cancelled, out) has none left to come.
    pub(super) fn placed_open_orders(&self, p: u32) -> bool {
        self.retain.get(p).is_some_and(|s| {
            (0..s.count as usize).any(|i| {
                s.kinds[i] != MsgType::Cancel
                    && self
                        .orders
                        .get(&s.tags[i])
                        .is_none_or(|o| !(o.done() && o.view.acked))
            })
        })
    }

    pub(super) fn on_bad_seq(&mut self, expected: u64, rejected: u32, now: u64) {
        self.counters.bad_seq += 1;
        let end = self.retain.end() as u64;
        if expected == 0 || expected >= end {
            // The sequencer wants a packet never sent (or none): nothing to resend.
            self.counters.rec_inconsistent += 1;
            return;
        }
        let expected = expected as u32;
        if expected < self.retain.head() {
            if self.stuck_at != Some(expected) {
                self.stuck_at = Some(expected);
                self.events.push_back(Event::Stuck { expected });
            }
            return;
        }
        // 07 §9.5–§9.6: answered packets from `expected` on, after a tenure ended, were answered
        // by a tenure whose seal does not hold them: "the client resends from there".
        self.revert_from(expected);
        // Go back N from `expected`: every unanswered packet from there not sent after the
        // rejected one (a later send is on its way). Once per round trip for one `expected`:
        // the other rejections of a burst answer sends the round already repeated.
        let round_trip = if self.rtt.srtt > 0 {
            self.rtt.srtt
        } else {
            self.cfg.resend_gap_ns
        };
        if self
            .gbn
            .is_some_and(|(e, at)| e == expected && now.saturating_sub(at) <= round_trip)
        {
            return;
        }
        self.gbn = Some((expected, now));
        let sent_by = self.retain.get(rejected).map_or(u64::MAX, |x| x.last_tx_ns);
        self.resend_where(expected, now, |s, p| {
            s.retain
                .get(p)
                .is_some_and(|x| !x.fully_answered() && x.last_tx_ns <= sent_by)
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use vyrn_wire::msg::addr_from_socket;
    use vyrn_wire::msg::client::Response;

    const SESSION: u32 = 0x77;
    const K: [u8; 16] = [3; 16];
    const MS: u64 = 1_000_000;

    #[derive(Debug, Clone)]
    enum Op {
        Submit,
        /// Answer the `i`-th unanswered retained packet (its `Ack`), or lose that answer.
        Answer(usize, bool),
        /// `BAD_SEQ{detail: expected}` echoing the `i`-th retained packet.
        BadSeq(usize, usize),
        SeqChange,
        Tick(u64),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => Just(Op::Submit),
            4 => (0usize..64, any::<bool>()).prop_map(|(i, l)| Op::Answer(i, l)),
            1 => (0usize..64, 0usize..64).prop_map(|(e, r)| Op::BadSeq(e, r)),
            1 => Just(Op::SeqChange),
            3 => (1u64..20).prop_map(Op::Tick),
        ]
    }

    struct Rig {
        s: Session,
        now: u64,
        resp_seq: u64,
        tenure: u8,
    }

    impl Rig {
        fn new() -> Rig {
            let seq: SocketAddr = "10.0.0.1:9000".parse().unwrap();
            let data: SocketAddr = "10.0.0.2:9000".parse().unwrap();
            let mut c = SessionConfig::new(7, SESSION, K, K, seq, vec![data], 0);
            c.retain_max = 256;
            c.retain_ns = 100_000 * MS;
            c.resend_window = 4;
            Rig {
                s: Session::new(c, 1, 0).unwrap(),
                now: 0,
                resp_seq: 0,
                tenure: 0,
            }
        }
        fn deliver(&mut self, echo: u32, records: Vec<Record>) {
            self.resp_seq += 1;
            let b = Response {
                session: SESSION,
                echo_pkt_seq: echo,
                resp_seq: self.resp_seq,
                resend: false,
                records,
            }
            .to_bytes(&K)
            .unwrap();
            self.s.handle_packet(self.now, &b);
        }
        fn ack(&mut self, p: u32) {
            let tag = self.s.retain.get(p).map_or(0, |x| x.tags[0]);
            self.deliver(
                p,
                vec![Record::Ack {
                    msg_index: 0,
                    client_tag: tag,
                }],
            );
        }
        fn unanswered(&self) -> Vec<u32> {
            (self.s.retain.head()..self.s.retain.end())
                .filter(|&p| self.s.unanswered(p))
                .collect()
        }
        /// The counters agree with the slots, and the window holds.
        fn check(&self) {
            let s = &self.s;
            let (mut out, mut held) = (0, 0);
            for p in s.retain.head()..s.retain.end() {
                let x = s.retain.get(p).unwrap();
                out += x.in_flight as u32;
                held += x.pending as u32;
                assert!(!(x.pending && x.queued[0]), "held and queued: {p}");
                assert!(
                    !x.held_first || x.pending,
                    "held_first without pending: {p}"
                );
            }
            assert_eq!(s.resends_out, out);
            assert_eq!(s.resends_held, held);
            assert!(s.resends_out <= s.cfg.resend_window);
        }
        fn apply(&mut self, op: &Op) {
            match *op {
                Op::Submit => {
                    let r = OrderReq::Gtc {
                        side: Side::Buy,
                        tick: 1,
                        qty: 1,
                    };
                    let _ = self.s.submit(self.now, &[r]);
                }
                Op::Answer(i, lost) => {
                    let u = self.unanswered();
                    if let (Some(&p), false) = (u.get(i % u.len().max(1)), lost) {
                        self.ack(p);
                    }
                }
                Op::BadSeq(e, r) => {
                    let (h, n) = (self.s.retain.head(), self.s.retain.len() as u32);
                    if n > 0 {
                        let (e, r) = (h + e as u32 % n, h + r as u32 % n);
                        self.deliver(
                            r,
                            vec![Record::Reject {
                                msg_index: MSG_INDEX_NONE,
                                code: RejectCode::BadSeq,
                                detail: e as u64,
                                client_tag: 0,
                            }],
                        );
                    }
                }
                Op::SeqChange => {
                    self.tenure += 1;
                    let to: SocketAddr = "10.0.0.3:9000".parse().unwrap();
                    let b = Response {
                        session: SESSION,
                        echo_pkt_seq: 0,
                        resp_seq: 1,
                        resend: false,
                        records: vec![Record::SeqChange {
                            epoch: 1,
                            tenure: self.tenure,
                            new_seq: 1,
                            addr: addr_from_socket(to),
                        }],
                    }
                    .to_bytes(&K)
                    .unwrap();
                    self.s.handle_packet(self.now, &b);
                }
                Op::Tick(ms) => {
                    self.now += ms * MS;
                    self.s.poll(self.now);
                }
            }
            let n = self.s.transmits_len();
            self.s.consume_transmits(n);
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]
        /// Under any mix of sends, answers (some lost), BAD_SEQs, sequencer changes and time,
        /// the window's counters match the slots and never pass `resend_window`; and a
        /// sequencer that then answers every copy 1 it gets answers every packet: nothing is
        /// held for good.
        #[test]
        fn the_resend_window_keeps_count_and_holds_nothing_for_good(
            ops in proptest::collection::vec(op(), 1..300)
        ) {
            let mut r = Rig::new();
            for o in &ops {
                r.apply(o);
                r.check();
            }
            for _ in 0..2_000 {
                let sent: Vec<u32> = r
                    .s
                    .transmits()
                    .filter(|t| t.copy == PktCopy::Seq)
                    .map(|t| t.pkt_seq)
                    .collect();
                let n = r.s.transmits_len();
                r.s.consume_transmits(n);
                for p in sent {
                    if r.s.unanswered(p) {
                        r.ack(p);
                    }
                }
                r.check();
                if r.unanswered().is_empty() {
                    break;
                }
                r.now += MS;
                r.s.poll(r.now);
            }
            prop_assert!(r.unanswered().is_empty(), "held for good: {:?}", r.unanswered());
        }
    }
}
