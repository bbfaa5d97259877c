//! Ping mode: one outstanding request per session, like a ping-pong benchmark. Each
//! session places a resting GTC (a buy below the mid or a sell above it, so it never trades),
//! waits for its `Ack`, cancels it, waits for the `CancelAck`, and starts again; every
//! request → first answer is one round trip, measured from the moment the request was handed
//! to the session (what a client application sees), with nothing else in flight on the session.

use crate::loadgen::stats::{fmt_percentiles, Latency};
use crate::session::{Event, ExecKind, OrderId, OrderReq, Session, SubmitError};
use vyrn_wire::msg::client::Side;

/// Where one session is in its ping cycle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Nothing in flight: the next request goes at the next [`Ping::submit`].
    Idle,
    /// A GTC is out (placed by packet `pkt`, handed over at `sent`).
    New { order: OrderId, pkt: u32, sent: u64 },
    /// The GTC rests; its cancel goes next.
    Resting { order: OrderId },
    /// Its cancel is out.
    Cancel { order: OrderId, pkt: u32, sent: u64 },
}

/// Counts of a ping run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PingCounts {
    /// Requests sent (GTCs and cancels).
    pub sent: u64,
    /// Requests answered (one round trip each).
    pub answered: u64,
    /// Answers that were refusals (`Reject`, `Busy`): still a round trip, counted apart.
    pub refused: u64,
    /// Submits a session refused (retention full): retried at the next call.
    pub held: u64,
}

/// The ping-mode generator over a set of sessions.
#[derive(Debug)]
pub struct Ping {
    state: Vec<State>,
    /// Mid price (ticks): buys rest `depth` below, sells `depth` above.
    mid: i32,
    depth: i32,
    flip: bool,
    /// Request → first answer, ns.
    pub rtt: Latency,
    /// Counts.
    pub counts: PingCounts,
}

impl Ping {
    /// A ping generator for `n_sessions` sessions around `mid`, resting `depth` ticks away.
    pub fn new(n_sessions: usize, mid: i32, depth: i32) -> Self {
        Ping {
            state: vec![State::Idle; n_sessions],
            mid,
            depth: depth.max(1),
            flip: false,
            rtt: Latency::default(),
            counts: PingCounts::default(),
        }
    }

    /// Requests in flight (at most one per session).
    pub fn in_flight(&self) -> usize {
        self.state
            .iter()
            .filter(|s| matches!(s, State::New { .. } | State::Cancel { .. }))
            .count()
    }

    /// Hand every session with nothing in flight its next request, at `now` (the caller sends
    /// the transmits at once). Only `n` sessions of the set take part (`n` ≤ sessions).
    pub fn submit(
        &mut self,
        now: u64,
        sessions: &mut [Session],
        n: usize,
    ) -> Result<usize, SubmitError> {
        let mut k = 0;
        for (i, s) in sessions.iter_mut().enumerate().take(n) {
            let req = match self.state[i] {
                State::Idle => {
                    self.flip = !self.flip;
                    let (side, tick) = if self.flip {
                        (Side::Buy, self.mid - self.depth)
                    } else {
                        (Side::Sell, self.mid + self.depth)
                    };
                    OrderReq::Gtc { side, tick, qty: 1 }
                }
                State::Resting { order } => OrderReq::Cancel { order },
                _ => continue,
            };
            match s.submit(now, &[req]) {
                Ok(sub) => {
                    let order = sub.orders[0];
                    self.state[i] = match req {
                        OrderReq::Cancel { .. } => State::Cancel {
                            order,
                            pkt: sub.pkt_seq,
                            sent: now,
                        },
                        _ => State::New {
                            order,
                            pkt: sub.pkt_seq,
                            sent: now,
                        },
                    };
                    self.counts.sent += 1;
                    k += 1;
                }
                Err(SubmitError::RetentionFull) | Err(SubmitError::OrdersFull) => {
                    self.counts.held += 1;
                }
                Err(e) => return Err(e),
            }
        }
        Ok(k)
    }

    /// Take every session's events, received at `now`.
    pub fn drain_events(&mut self, now: u64, sessions: &mut [Session]) {
        for (i, s) in sessions.iter_mut().enumerate() {
            while let Some(e) = s.poll_event() {
                if i < self.state.len() {
                    self.on_event(i, now, &e);
                }
            }
        }
    }

    /// One event of session `i` at `now`: the answer to the request in flight ends its round
    /// trip.
    pub fn on_event(&mut self, i: usize, now: u64, e: &Event) {
        let Event::Exec(x) = e else {
            return;
        };
        let (order, pkt, sent, cancel) = match self.state[i] {
            State::New { order, pkt, sent } => (order, pkt, sent, false),
            State::Cancel { order, pkt, sent } => (order, pkt, sent, true),
            _ => return,
        };
        if x.msg.pkt_seq != pkt || x.order != order {
            return;
        }
        self.rtt.record(now.saturating_sub(sent));
        self.counts.answered += 1;
        self.state[i] = match (x.kind, cancel) {
            (ExecKind::Ack, false) => State::Resting { order },
            // A GTC that traded or was refused rests no more; a refused cancel leaves the order
            // resting (try the cancel again); anything else ends the cycle.
            (ExecKind::Reject { .. } | ExecKind::Busy, true) => {
                self.counts.refused += 1;
                State::Resting { order }
            }
            (ExecKind::Reject { .. } | ExecKind::Busy, false) => {
                self.counts.refused += 1;
                State::Idle
            }
            _ => State::Idle,
        };
    }

    /// The report: the round-trip percentiles and the counts.
    pub fn summary(&self) -> Vec<String> {
        let c = self.counts;
        vec![
            fmt_percentiles("ping request -> answer", &self.rtt.percentiles()),
            format!(
                "ping: sent {}, answered {}, refused {}, held by sessions {}",
                c.sent, c.answered, c.refused, c.held
            ),
        ]
    }
}
