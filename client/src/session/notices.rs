//! The data tier's notices to a session (07 §5.7, §9.4–§9.6): `SeqChange`, `TenureEnd` and
//! `DataRedirect`.

use super::*;
use vyrn_wire::msg::consensus::NEXT_SEQ_NONE;
use vyrn_wire::msg::{addr_to_socket, Addr18};

impl Session {
    /// 07 §9.5–§9.6: the sequencer of a later tenure has logged nothing of this session from
    /// `from` on, yet packets from there were answered — by the ended tenure, whose seal does
    /// not hold them. Their answers are void: each message is reported
    /// ([`Uncertainty::Reverted`]), each order it placed is back to placed and unanswered (a
    /// cancel's target is live again), and the packet counts as unanswered, so it is resent.
    /// Fills the tenure's end reverted were reported by `TenureEnd` ([`Event::Reverted`]).
    pub(super) fn revert_from(&mut self, from: u32) {
        let Some(ended) = self.ended else {
            return;
        };
        for p in from.max(self.retain.head())..self.retain.end() {
            let Some(s) = self.retain.get_mut(p) else {
                continue;
            };
            // Answers the current tenure gave stand (a late BAD_SEQ, overtaken by them).
            if s.answered == 0 || s.answered_in > ended {
                continue;
            }
            let answered = std::mem::take(&mut s.answered);
            let msgs: Vec<(usize, MsgType, u32)> = (0..s.count as usize)
                .map(|i| (i, s.kinds[i], s.tags[i]))
                .collect();
            self.counters.reverted_packets += 1;
            for (i, kind, tag) in msgs {
                let Some(o) = self.orders.get_mut(&tag) else {
                    continue;
                };
                if kind == MsgType::Cancel {
                    o.cancelled = false;
                } else {
                    let v = o.view;
                    *o = Order::new(v.placed, v.kind, v.side, v.tick, v.qty);
                }
                o.view.done = o.done();
                if answered >> i & 1 == 1 {
                    self.events.push_back(Event::Uncertain {
                        msg: MsgRef {
                            pkt_seq: p,
                            msg_index: i as u8,
                        },
                        order: tag,
                        why: Uncertainty::Reverted,
                    });
                }
            }
        }
    }

    pub(super) fn on_notice(&mut self, r: &Record, now: u64) {
        match *r {
            Record::SeqChange {
                epoch,
                tenure,
                new_seq,
                addr,
            } => self.on_seq_change(epoch, tenure, new_seq, &addr, now),
            Record::DataRedirect {
                from,
                to,
                resend_from,
            } => self.on_data_redirect(from, to, resend_from, now),
            Record::TenureEnd {
                epoch,
                tenure,
                height,
                last_step,
            } => self.on_tenure_end(epoch, tenure, height, last_step),
            _ => {}
        }
    }

    /// 07 §9.4, §9.6: tenure `tenure` ended in a final seal (block `height`, its last step
    /// `last_step`). Every fill still waiting for a fact came from it (the client talks to one
    /// sequencer at a time): at a step ≤ `last_step` it is durable and final now; above, it was
    /// reverted ([`Event::Reverted`]). Once per ended tenure (every data box sends it).
    fn on_tenure_end(&mut self, epoch: u32, tenure: u8, height: u64, last_step: u64) {
        if self.ended.is_some_and(|e| (epoch, tenure) <= e) {
            self.counters.notice_stale += 1;
            return;
        }
        self.ended = Some((epoch, tenure));
        let mut out = Vec::new();
        self.facts
            .on_tenure_end(height, last_step, &mut |f| out.push(f));
        self.apply_facts(out);
    }

    /// 07 §9.5 client redirect: switch copy 1 to the new sequencer and resend every packet
    /// with no response.
    fn on_seq_change(&mut self, epoch: u32, tenure: u8, new_seq: u8, addr: &Addr18, now: u64) {
        if (epoch, tenure) <= self.tenure {
            self.counters.notice_stale += 1;
            return;
        }
        self.tenure = (epoch, tenure);
        if new_seq == NEXT_SEQ_NONE {
            self.seq_addr = None;
            // Nothing can go to a sequencer that does not exist; unqueue copy 1.
            self.window_reset(true);
            let retain = &mut self.retain;
            self.outbox.retain(|&(p, c)| {
                if c == PktCopy::Seq {
                    if let Some(s) = retain.get_mut(p) {
                        s.queued[0] = false;
                    }
                    false
                } else {
                    true
                }
            });
            self.events.push_back(Event::SeqChanged {
                epoch,
                tenure,
                addr: None,
            });
            return;
        }
        let a = addr_to_socket(addr);
        self.seq_addr = Some(a);
        self.events.push_back(Event::SeqChanged {
            epoch,
            tenure,
            addr: Some(a),
        });
        // A new sequencer: the backoff of the old one's silence starts over (the round-trip
        // estimate stays, the best guess until the new one's answers time it).
        self.rtt.backoff = 0;
        // Resends out to the old sequencer are lost with it.
        self.window_reset(false);
        self.resend_where(0, now, |s, p| s.unanswered(p));
    }

    /// 07 §5.7: switch copy 2 to the new data home and resend it from `resend_from`.
    ///
    /// Each replica computes its own `resend_from` (the lowest `pkt_seq` it has not resolved)
    /// and the data boxes relay a repeat only when it is lower: a repeat of the redirect taken
    /// with a lower `resend_from` resends the packets below the first one too, so no replica is
    /// left without a payload another replica happened to hold.
    fn on_data_redirect(&mut self, from: u8, to: u8, resend_from: u32, now: u64) {
        if let Some((f, t, rf)) = self.redirected {
            if f == from && t == to && t == self.data_home && resend_from < rf {
                self.redirected = Some((f, t, resend_from));
                let head = self.retain.head();
                if resend_from < head {
                    self.events.push_back(Event::DataLost {
                        first: resend_from.max(1),
                        last: head.min(rf) - 1,
                    });
                }
                for p in resend_from.max(head)..rf.min(self.retain.end()) {
                    self.resend(p, PktCopy::Data, now);
                }
                return;
            }
        }
        if from != self.data_home || to == from {
            self.counters.notice_stale += 1;
            return;
        }
        if to as usize >= self.cfg.data_boxes.len() {
            self.counters.notice_bad += 1;
            return;
        }
        self.data_home = to;
        self.redirected = Some((from, to, resend_from));
        self.events.push_back(Event::DataRedirected {
            from,
            to,
            resend_from,
        });
        let head = self.retain.head();
        if resend_from < head {
            self.events.push_back(Event::DataLost {
                first: resend_from.max(1),
                last: head - 1,
            });
        }
        for p in resend_from.max(head)..self.retain.end() {
            self.resend(p, PktCopy::Data, now);
        }
    }
}
