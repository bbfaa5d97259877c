//! What the replica's end-to-end tests share: the responses replay produced, the box's first
//! copies of what it sent, order RX's in-order frames, and a stand-in finalizer for the box.
#![allow(dead_code)] // each test file uses its own part

use std::collections::HashMap;

use vyrn_engine::home::EngineSink;
use vyrn_engine::resp::RespOut;
use vyrn_replica::front::order_rx::{RxAlarm, RxOut};
use vyrn_seq::testkit::SimBox;
use vyrn_wire::msg::ctrl::{Nack, RepAck, RepairReq};

/// Replay's answers: first copies by (session, resp_seq), and the lane events applied.
#[derive(Default)]
pub struct Responses {
    pub by_key: HashMap<(u32, u64), Vec<u8>>,
    pub events: u64,
}

impl EngineSink for Responses {
    fn respond(&mut self, r: &RespOut<'_>) {
        if !r.resend {
            self.by_key
                .entry((r.session, r.resp_seq))
                .or_insert_with(|| r.bytes.to_vec());
        }
    }
    fn event(&mut self, _lane: u8, _ev: &vyrn_engine::bbo::LaneEvent) {
        self.events += 1;
    }
}

/// Replay's first copies as the box sent them. Replay leaves the 16 tag bytes zero (07 §7.3: a
/// replay lane does no TX work; §8.5: the tag is computed where a packet is sent), so each must
/// carry a zero tag; it is tagged here under its session's `K_out`, as a sender would.
pub fn as_sent(
    e: &vyrn_engine::EngineConfig,
    by_key: &HashMap<(u32, u64), Vec<u8>>,
) -> HashMap<(u32, u64), Vec<u8>> {
    by_key
        .iter()
        .map(|(k, b)| {
            let n = b.len();
            assert!(
                n >= 16 && b[n - 16..].iter().all(|&x| x == 0),
                "response {k:?}: replay tagged it"
            );
            let s = e
                .sessions
                .iter()
                .find(|s| s.session == k.0)
                .expect("session");
            let mut b = b.clone();
            vyrn_engine::resp::tag(&mut b, &s.k_out);
            (*k, b)
        })
        .collect()
}

/// A response packet's (session, resp_seq), if it is a first copy (flags.resend, byte 17, clear).
pub fn first_copy_key(b: &[u8]) -> Option<(u32, u64)> {
    (b.len() >= 24 && b[17] & 1 == 0).then(|| {
        (
            u32::from_le_bytes(b[0..4].try_into().unwrap()),
            u64::from_le_bytes(b[8..16].try_into().unwrap()),
        )
    })
}

/// Order RX's in-order frames, NACKs kept.
#[derive(Default)]
pub struct Net {
    pub delivered: Vec<Vec<u8>>,
    pub nacks: Vec<Nack>,
}

impl RxOut for Net {
    fn deliver(&mut self, _s: u8, _fs: u64, frame: &[u8], _peer: bool) {
        self.delivered.push(frame.to_vec());
    }
    fn nack(&mut self, n: &Nack) {
        self.nacks.push(*n);
    }
    fn repair(&mut self, _p: usize, _r: &RepairReq) {}
    fn ack(&mut self, _a: &RepAck) {}
    fn alarm(&mut self, _a: RxAlarm) {}
}

/// A stand-in finalizer: all four voters ack `contiguous` and vote every closed block not final
/// yet, so the box neither fences nor halts on finality.
pub fn finalize(home: &mut SimBox, contiguous: [u64; 2], now: u64) {
    let closed = home.closed_height();
    let fin = home.watermarks().1;
    for v in 0..4 {
        home.on_ack(v, contiguous, now);
        for h in fin + 1..=closed {
            home.on_vote(v, h);
        }
    }
}

/// A client's resend of `b` (07 §9.5): `flags.resend`, retagged under `K_seq`.
pub fn resend_of(b: &[u8], k_seq: &vyrn_wire::msg::client::SipKey) -> Vec<u8> {
    let mut b = b.to_vec();
    b[3] |= vyrn_wire::msg::client::REQ_FLAG_RESEND;
    let n = b.len() - 16;
    let tag = vyrn_wire::msg::client::siphash128(k_seq, &b[..n]);
    b[n..].copy_from_slice(&tag);
    b
}

/// The packets of `sent` (by `(session, pkt_seq)`) that no response in `got` answers, in order:
/// what a client resends to the next sequencer (07 §9.5).
pub fn unanswered<'a, 'b>(
    sent: impl IntoIterator<Item = &'a (u32, u32)>,
    got: impl IntoIterator<Item = &'b Vec<u8>>,
) -> Vec<(u32, u32)> {
    let answered: std::collections::HashSet<(u32, u32)> = got
        .into_iter()
        .map(|b| {
            let s = u32::from_le_bytes(b[0..4].try_into().unwrap());
            (s, u32::from_le_bytes(b[4..8].try_into().unwrap()))
        })
        .collect();
    let mut out: Vec<(u32, u32)> = sent
        .into_iter()
        .filter(|k| !answered.contains(k))
        .copied()
        .collect();
    out.sort_unstable();
    out
}

/// Sessions with a hole in the `resp_seq`s of the responses they received (first copies and
/// resends): a client resends its retained packets then (docs/client.md).
pub fn resp_seq_holes<'a>(got: impl IntoIterator<Item = &'a Vec<u8>>) -> Vec<u32> {
    let mut by: HashMap<u32, std::collections::BTreeSet<u64>> = HashMap::new();
    for b in got {
        let s = u32::from_le_bytes(b[0..4].try_into().unwrap());
        let q = u64::from_le_bytes(b[8..16].try_into().unwrap());
        by.entry(s).or_default().insert(q);
    }
    let mut holes: Vec<u32> = by
        .into_iter()
        .filter(|(_, q)| q.last().is_some_and(|&m| m as usize != q.len()))
        .map(|(s, _)| s)
        .collect();
    holes.sort_unstable();
    holes
}

/// A resent response as its first copy: `(session, resp_seq)` and its bytes with
/// `flags.resend` cleared and the tag recomputed under the session's `K_out`.
pub fn as_first_copy(e: &vyrn_engine::EngineConfig, b: &[u8]) -> ((u32, u64), Vec<u8>) {
    let key = (
        u32::from_le_bytes(b[0..4].try_into().unwrap()),
        u64::from_le_bytes(b[8..16].try_into().unwrap()),
    );
    let mut first = b.to_vec();
    first[17] &= !1;
    let s = e
        .sessions
        .iter()
        .find(|s| s.session == key.0)
        .expect("session");
    vyrn_engine::resp::tag(&mut first, &s.k_out);
    (key, first)
}
