//! The recovery service's response store (07 §8.5) at the peak mix (07 §3.13: 10 messages a
//! packet), each figure beside a baseline measured in the same run:
//! - B-REP-14, entry bytes per response packet (budget ≤ 53 B) and per record (~5.5 B), against
//!   the packets' own wire bytes;
//! - keeping a packet (`RspStore::keep`: encode the entry, copy it into its page) vs copying
//!   the packet into a byte arena, what the box's hot response ring does;
//! - rebuilding a resend (`RspStore::rebuild`: decode from its group's start) vs the SipHash of
//!   the packet its sender computes anyway.

use vyrn_bench::{enabled, measure, quick, ratio, rounds};
use vyrn_engine::workload::{live_capture, Mix};
use vyrn_engine::EngineConfig;
use vyrn_replica::recovery::RspStore;
use vyrn_wire::msg::client::{siphash128, NOTICE_RESP_SEQ, RESP_HDR_BYTES, RESP_RECORD_BYTES};
use vyrn_wire::msg::rsp_entry::RSP_PACKET_MAX;

fn cfg() -> EngineConfig {
    let mut c = EngineConfig::unlimited_home(4, 64);
    c.hot_ring_bytes = 8 << 20;
    c
}

/// Every numbered response of a live run at the peak mix, in send order: (session, resp_seq,
/// bytes).
fn responses(c: &EngineConfig, n: usize) -> Vec<(u32, u64, Vec<u8>)> {
    let cap = live_capture(c, 42, Mix::peak(), n);
    let mut v: Vec<(u32, u64, Vec<u8>)> = cap
        .responses
        .into_iter()
        .flat_map(|(s, rs)| {
            rs.into_iter().filter_map(move |(b, _)| {
                let q = u64::from_le_bytes(b[8..16].try_into().ok()?);
                (q != NOTICE_RESP_SEQ).then_some((s, q, b))
            })
        })
        .collect();
    // Interleave sessions as a replay would hand them over.
    v.sort_by_key(|x| (x.1, x.0));
    v
}

fn main() {
    println!("# recovery: one shared 2-core machine; ratios are the figures to quote");
    let c = cfg();
    let rs = responses(&c, if quick() { 5_000 } else { 100_000 });
    let r = rounds(15);
    let sessions = || c.sessions.iter().map(|s| s.session);

    if enabled("size") {
        let mut st = RspStore::spec(sessions());
        for (s, q, b) in &rs {
            st.keep(*s, *q, b).expect("kept");
        }
        let k = st.counters();
        let records: u64 = rs
            .iter()
            .map(|(_, _, b)| ((b.len() - RESP_HDR_BYTES - 16) / RESP_RECORD_BYTES) as u64)
            .sum();
        println!(
            "B-REP-14 entry bytes: {:.1} B per packet (budget ≤ 53 B), {:.2} B per record (~5.5 B), \
             {} packets of {:.1} records; wire bytes {:.1} B per packet: {:.1}x smaller",
            k.bytes_per_packet(),
            k.entry_bytes as f64 / records.max(1) as f64,
            k.kept,
            records as f64 / k.kept.max(1) as f64,
            k.packet_bytes as f64 / k.kept.max(1) as f64,
            k.packet_bytes as f64 / k.entry_bytes.max(1) as f64,
        );
    }

    if enabled("keep") {
        let n = rs.len() as u64;
        let total: usize = rs.iter().map(|x| x.2.len()).sum();
        let mut arena = vec![0u8; total];
        let copy = measure("copy into an arena (the hot ring)", r, n, || {
            let mut at = 0;
            for (_, _, b) in &rs {
                arena[at..at + b.len()].copy_from_slice(b);
                at += b.len();
            }
            arena[at / 2]
        });
        let mut st = RspStore::spec(sessions());
        let mut base = 0u64;
        let keep = measure("RspStore::keep (encode + page copy)", r, n, || {
            // Each round a fresh run of resp_seqs above the last: every packet is kept.
            for (s, q, b) in &rs {
                let _ = st.keep(*s, base + q, b);
            }
            base += 1 << 32;
            st.counters().kept
        });
        ratio(&keep, &copy);
    }

    if enabled("rebuild") {
        let mut st = RspStore::spec(sessions());
        for (s, q, b) in &rs {
            st.keep(*s, *q, b).expect("kept");
        }
        let n = rs.len() as u64;
        let key = [7u8; 16];
        let tag = measure("SipHash-128 of the packet (the sender's tag)", r, n, || {
            let mut x = 0u8;
            for (_, _, b) in &rs {
                x ^= siphash128(&key, &b[..b.len() - 16])[0];
            }
            x
        });
        let mut out = [0u8; RSP_PACKET_MAX];
        let rebuild = measure(
            "RspStore::rebuild (decode from its group start)",
            r,
            n,
            || {
                let mut x = 0usize;
                for (s, q, _) in &rs {
                    x += st.rebuild(*s, *q, &mut out).unwrap_or(0);
                }
                x
            },
        );
        ratio(&rebuild, &tag);
    }
}
