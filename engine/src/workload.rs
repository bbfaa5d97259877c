//! A seeded order flow (tests, benches, the dev box's built-in flow): many sessions and
//! accounts, resting and crossing orders, IOCs, cancels of live and dead orders, risk
//! rejects, resends, gaps, bad packets of every kind, halts and resumes.

use crate::bbo::{control, ControlReq};
use crate::config::EngineConfig;
use vyrn_wire::consts::MAX_MSGS_PER_PKT;
use vyrn_wire::corpus::Rng;
use vyrn_wire::msg::client::{siphash128, SipKey, MSG_FLAG_SELL, REQ_FLAG_RESEND};

/// Mix of the flow, in permille of packets (the rest are ordinary orders).
#[derive(Debug, Clone, Copy)]
pub struct Mix {
    /// Resend an earlier packet (a duplicate, flags.resend).
    pub resend: u64,
    /// Skip a pkt_seq (a gap).
    pub gap: u64,
    /// A bad packet (bad tag, short, unknown session, other book, bad message fields).
    pub bad: u64,
    /// A Halt (later followed by a Resume).
    pub halt: u64,
    /// A New above the account's max order qty.
    pub risk: u64,
    /// Cancels among messages.
    pub cancel: u64,
    /// IOCs among messages.
    pub ioc: u64,
    /// Fewest messages per packet (the count is uniform in `min_msgs..=max_msgs`).
    pub min_msgs: u8,
    /// Most messages per packet.
    pub max_msgs: u8,
}

impl Mix {
    /// Every kind of input, for the live-vs-replay harness.
    pub fn everything() -> Self {
        Mix {
            resend: 30,
            gap: 15,
            bad: 40,
            halt: 3,
            risk: 30,
            cancel: 200,
            ioc: 100,
            min_msgs: 1,
            max_msgs: 4,
        }
    }

    /// Clean trading only (benchmarks).
    pub fn clean() -> Self {
        Mix {
            resend: 0,
            gap: 0,
            bad: 0,
            halt: 0,
            risk: 0,
            cancel: 150,
            ioc: 100,
            min_msgs: 1,
            max_msgs: 1,
        }
    }

    /// Clean trading in the peak's shape (07 §3.13: 10 msgs per packet): every packet full.
    pub fn peak() -> Self {
        Mix {
            min_msgs: MAX_MSGS_PER_PKT as u8,
            max_msgs: MAX_MSGS_PER_PKT as u8,
            ..Mix::clean()
        }
    }
}

/// One input of the flow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Input {
    /// A packet received at `rx_ts`.
    Packet {
        /// Receive time.
        rx_ts: u64,
        /// Bytes as received.
        bytes: Vec<u8>,
    },
    /// A control request.
    Control(ControlReq),
}

#[derive(Debug, Clone)]
struct S {
    session: u32,
    k_seq: SipKey,
    next_pkt: u32,
    next_tag: u32,
    live: Vec<u32>,
    sent: Vec<Vec<u8>>,
}

/// `n` inputs of the flow `mix` (seeded) through a live engine, stepped every fourth input and
/// settled at the end: what it logged and answered (benches, size figures, tests).
pub fn live_capture(cfg: &EngineConfig, seed: u64, mix: Mix, n: usize) -> crate::Capture {
    let mut w = Workload::new(cfg, seed, mix);
    let mut e = crate::LiveEngine::new(cfg.clone());
    let mut cap = crate::Capture::default();
    for i in 0..n {
        if let Input::Packet { rx_ts, bytes } = w.next_input() {
            let _ = e.submit(rx_ts, rx_ts, &bytes, &mut cap);
        }
        if i % 4 == 3 {
            // A step error ends the flow early: the capture holds what ran.
            if e.poll(w.now(), &mut cap).is_err() {
                return cap;
            }
        }
    }
    let _ = e.poll(u64::MAX / 2, &mut cap);
    e.settle(&mut cap);
    cap
}

/// The flow generator.
#[derive(Debug)]
pub struct Workload {
    rng: Rng,
    book: u16,
    sessions: Vec<S>,
    mix: Mix,
    t: u64,
    halted: bool,
    /// Mean spacing of packets, ns.
    pub spacing_ns: u64,
}

impl Workload {
    /// A flow over `cfg`'s sessions.
    pub fn new(cfg: &EngineConfig, seed: u64, mix: Mix) -> Self {
        Workload {
            rng: Rng::new(seed),
            book: cfg.book,
            sessions: cfg
                .sessions
                .iter()
                .map(|s| S {
                    session: s.session,
                    k_seq: s.k_seq,
                    next_pkt: 1,
                    next_tag: 1,
                    live: Vec::new(),
                    sent: Vec::new(),
                })
                .collect(),
            mix,
            t: 1_000_000,
            halted: false,
            spacing_ns: 200,
        }
    }

    /// The current time of the flow.
    pub fn now(&self) -> u64 {
        self.t
    }

    fn msg(&mut self, si: usize, out: &mut Vec<u8>) {
        let r = &mut self.rng;
        let s = &mut self.sessions[si];
        let m = self.mix;
        if !s.live.is_empty() && r.below(1000) < m.cancel {
            // Cancel a live order (or, one time in five, a dead or unknown one).
            let tag = if r.below(5) == 0 {
                s.next_tag + 1000 + r.below(50) as u32
            } else {
                let i = r.below(s.live.len() as u64) as usize;
                s.live.swap_remove(i)
            };
            out.extend_from_slice(&[3, 0, 0, 0]);
            out.extend_from_slice(&0i32.to_le_bytes());
            out.extend_from_slice(&0u32.to_le_bytes());
            out.extend_from_slice(&tag.to_le_bytes());
            return;
        }
        let sell = r.below(2) == 1;
        let ioc = r.below(1000) < m.ioc;
        // Prices around 1000: crossing ~1/3 of the time.
        let off = r.below(12) as i32 - 3;
        let tick = if sell { 1000 + off } else { 1000 - off };
        let mut qty = 1 + r.below(40) as u32;
        if r.below(1000) < m.risk {
            qty = 5000 + r.below(1000) as u32;
        }
        let tag = s.next_tag;
        s.next_tag += 1;
        if !ioc {
            s.live.push(tag);
            if s.live.len() > 48 {
                s.live.swap_remove(0);
            }
        }
        out.push(if ioc { 2 } else { 1 });
        out.push(if sell { MSG_FLAG_SELL } else { 0 });
        out.extend_from_slice(&[0, 0]);
        out.extend_from_slice(&tick.to_le_bytes());
        out.extend_from_slice(&qty.to_le_bytes());
        out.extend_from_slice(&tag.to_le_bytes());
    }

    fn packet(&mut self, si: usize, pkt_seq: u32, n: u8) -> Vec<u8> {
        let mut b = Vec::with_capacity(32 + 16 * n as usize);
        b.extend_from_slice(&self.book.to_le_bytes());
        b.push(n);
        b.push(0);
        b.extend_from_slice(&self.sessions[si].session.to_le_bytes());
        b.extend_from_slice(&pkt_seq.to_le_bytes());
        b.extend_from_slice(&[0; 4]);
        for _ in 0..n {
            self.msg(si, &mut b);
        }
        let tag = siphash128(&self.sessions[si].k_seq, &b);
        b.extend_from_slice(&tag);
        b
    }

    fn retag(&self, si: usize, b: &mut [u8]) {
        let n = b.len() - 16;
        let tag = siphash128(&self.sessions[si].k_seq, &b[..n]);
        b[n..].copy_from_slice(&tag);
    }

    /// The next input.
    pub fn next_input(&mut self) -> Input {
        self.t += 1 + self.rng.below(2 * self.spacing_ns.max(1));
        let rx_ts = self.t;
        let m = self.mix;
        let roll = self.rng.below(1000);
        // Halts are rare and short: a halted book resumes within ~20 inputs.
        if (!self.halted && roll < m.halt) || (self.halted && roll < 50) {
            self.halted = !self.halted;
            return Input::Control(if self.halted {
                ControlReq::Halt(control::REASON_OPERATOR)
            } else {
                ControlReq::Resume(control::REASON_OPERATOR)
            });
        }
        let si = self.rng.below(self.sessions.len() as u64) as usize;
        let roll = self.rng.below(1000);
        if roll < m.resend && !self.sessions[si].sent.is_empty() {
            let s = &self.sessions[si];
            let i = s.sent.len() - 1 - self.rng.below(s.sent.len().min(8) as u64) as usize;
            let mut b = s.sent[i].clone();
            b[3] |= REQ_FLAG_RESEND;
            self.retag(si, &mut b);
            return Input::Packet { rx_ts, bytes: b };
        }
        if roll < m.resend + m.gap {
            // Skip ahead: the lane answers BAD_SEQ; the client then resends from the gap.
            let seq = self.sessions[si].next_pkt + 1 + self.rng.below(3) as u32;
            let bytes = self.packet(si, seq, 1);
            return Input::Packet { rx_ts, bytes };
        }
        if roll < m.resend + m.gap + m.bad {
            let seq = self.sessions[si].next_pkt;
            let mut b = self.packet(si, seq, 1);
            match self.rng.below(7) {
                0 => {
                    let k = b.len() - 1;
                    b[k] ^= 0x55; // bad tag
                }
                1 => b.truncate(20), // short
                2 => {
                    b[4..8].copy_from_slice(&0xDEAD_BEEFu32.to_le_bytes()); // unknown session
                }
                3 => {
                    b[0] ^= 1; // another book
                    self.retag(si, &mut b);
                }
                4 => {
                    b[16] = 9; // bad message type: a logged, per-message reject
                    self.retag(si, &mut b);
                    self.sessions[si].next_pkt += 1;
                    self.sessions[si].sent.push(b.clone());
                }
                5 => {
                    b[12] = 1; // reserved bytes: dropped like the data tier drops it
                    self.retag(si, &mut b);
                }
                _ => {
                    b[17] = 0x80; // bad message flags: a logged, per-message reject
                    self.retag(si, &mut b);
                    self.sessions[si].next_pkt += 1;
                    self.sessions[si].sent.push(b.clone());
                }
            }
            return Input::Packet { rx_ts, bytes: b };
        }
        let lo = m.min_msgs.clamp(1, m.max_msgs.max(1));
        let n = lo + self.rng.below(u64::from(m.max_msgs.max(1) - lo) + 1) as u8;
        let seq = self.sessions[si].next_pkt;
        let b = self.packet(si, seq, n);
        let s = &mut self.sessions[si];
        s.next_pkt += 1;
        s.sent.push(b.clone());
        if s.sent.len() > 16 {
            s.sent.remove(0);
        }
        Input::Packet { rx_ts, bytes: b }
    }
}
