//! The fetch order (07 §5.5): an unresolved record asks its data home, then one peer, then the
//! sequencer, one source per `fetch_step_ns`, with the in-flight and per-step bounds.

use super::*;

impl DataSide {
    /// Ask the next source for record `(s, rid)` and re-arm its timer.
    pub(super) fn fire(&mut self, s: u8, rid: u64, now: u64, out: &mut impl DataOut) {
        let n_peers = self.cfg.n_peers;
        let Some(r) = self.subs[s as usize].get_mut(rid) else {
            return;
        };
        let key = r.key;
        // The previous ask (if any) expired: its place in the window is free.
        if r.asking {
            r.asking = false;
            self.in_flight = self.in_flight.saturating_sub(1);
        }
        let step = self.cfg.timing.fetch_step_ns.max(1);
        if now.saturating_sub(self.fetch_budget.1) >= step {
            self.fetch_budget = (FETCH_KEYS_PER_STEP, now);
        }
        let mut retry_at = None;
        if self.in_flight >= FETCH_IN_FLIGHT_MAX {
            // The window is full: asked at the next step, stage kept.
            self.c.fetch_paced += 1;
            let due = now.saturating_add(step);
            r.due = due;
            self.timers.push(Reverse((due, s, rid)));
            return;
        }
        loop {
            match r.stage {
                0 => {
                    let home = self.homes.get(&key.session).copied();
                    if let Some(d) = home.filter(|&d| {
                        self.boxes
                            .get(d as usize)
                            .is_some_and(|b| !b.down && b.last_rx.is_some())
                    }) {
                        if self.fetch_budget.0 == 0 {
                            // Over the pace: asked at the next step, stage kept.
                            self.c.fetch_paced += 1;
                            break;
                        }
                        self.fetch_budget.0 -= 1;
                        r.stage = 1;
                        r.asking = true;
                        self.c.fetch_home += 1;
                        out.data_fetch(d, &DataFetch::Key(key));
                        break;
                    }
                    r.stage = 1;
                }
                1 => {
                    r.stage = 2;
                    if n_peers > 0 {
                        let peer = self.next_peer % n_peers;
                        self.next_peer = self.next_peer.wrapping_add(1);
                        self.c.fetch_peer += 1;
                        r.asking = true;
                        out.peer_data_fetch(peer, key, r.pkt_hash.unwrap_or(0));
                        break;
                    }
                }
                st if st < 2 + SEQ_TRIES => {
                    r.stage = st + 1;
                    self.c.fetch_seq += 1;
                    r.asking = true;
                    out.seq_data_req(key, r.pkt_hash.unwrap_or(0));
                    break;
                }
                _ => {
                    if r.state != RecState::Unavailable {
                        if r.state == RecState::Missing {
                            r.state = RecState::Unavailable;
                        }
                        self.c.unavailable += 1;
                        out.alarm(DataAlarm::Unavailable { key });
                    } else {
                        self.c.unavailable_retries += 1;
                    }
                    // Every source asked: the home again after a while (the block waits).
                    r.stage = 0;
                    retry_at = Some(now.saturating_add(UNAVAILABLE_RETRY_NS));
                    break;
                }
            }
        }
        if r.asking {
            self.in_flight += 1;
        }
        // A source gets longer before the next is asked while many asks are out: a replica far
        // behind answers late, and asking the next source every step only doubled the load
        // that made it late (a storm of 136k SeqDataReqs in 5 s, measured).
        let step = self.cfg.timing.fetch_step_ns;
        let wait = if r.asking {
            step.saturating_mul(1 + self.in_flight / FETCH_STEP_STRETCH)
        } else {
            step // paced: asked at the next step
        };
        let due = retry_at.unwrap_or(now.saturating_add(wait));
        r.due = due;
        self.timers.push(Reverse((due, s, rid)));
    }

    /// Record `r` no longer waits for an answer: its place in the fetch window is free.
    pub(super) fn answered(in_flight: &mut u64, r: &mut Rec) {
        if r.asking {
            r.asking = false;
            *in_flight = in_flight.saturating_sub(1);
        }
    }

    /// Timers: box silence (07 §5.7), fetch escalation (§5.5), store age (§5.4).
    pub fn tick(&mut self, now: u64, out: &mut impl DataOut) {
        for (d, b) in self.boxes.iter_mut().enumerate() {
            let last = *b.last_rx.get_or_insert(now);
            let t = &self.cfg.timing;
            let window = if b.seen {
                t.silence_ns
            } else {
                t.silence_ns.max(t.first_contact_ns)
            };
            if !b.down && now.saturating_sub(last) >= window {
                b.down = true;
                self.c.box_down += 1;
                out.alarm(DataAlarm::BoxDown {
                    d: d as u8,
                    last_rx_ns: last,
                });
            }
        }
        loop {
            // The earlier of the two timer queues' heads.
            let (from_arms, (due, s, rid)) = match (self.arms.front(), self.timers.peek()) {
                (Some(&a), Some(&Reverse(h))) if a <= h => (true, a),
                (_, Some(&Reverse(h))) => (false, h),
                (Some(&a), None) => (true, a),
                (None, None) => break,
            };
            if due > now {
                break;
            }
            if from_arms {
                self.arms.pop_front();
            } else {
                self.timers.pop();
            }
            let Some(r) = self.subs[s as usize].get(rid) else {
                continue;
            };
            if r.due != due {
                continue;
            }
            match r.state {
                RecState::Missing | RecState::Mismatch | RecState::Unavailable => {
                    self.fire(s, rid, now, out)
                }
                _ => {}
            }
        }
        while let Some((k, t)) = self.store.oldest() {
            if now.saturating_sub(t) < self.cfg.timing.store_age_ns {
                break;
            }
            if self.index.contains_key(&k) {
                // A live record still needs it (verify, replay): kept until its block is
                // released — a replica catching up replays payloads older than the ring.
                self.store.order.pop_front();
                self.store.pinned.insert(k);
                self.c.age_pinned += 1;
                continue;
            }
            self.store.pop_oldest();
            self.c.evicted_age += 1;
        }
    }
}
