//! Data box benchmarks (07 §5.2, §15), each against a baseline measured in the same run.
//!
//! 1. **ingest**: `DataBox::on_packet` — parse, MAC (SipHash-2-4-128), dedupe, full BLAKE3,
//!    ring + both indexes, fan-out into DATA frames — packets/s on one core, for count-10
//!    (192 B) and count-1 (48 B) packets over 4096 sessions, with a ring of 2^20 packets
//!    (2^16 quick) that has wrapped, so the ring and index writes miss the caches as they do
//!    on a 10 s ring. The out queue is emptied every 64 packets (what the driver does). Stage
//!    split: parse + MAC alone, and the full hash alone. 07 §5.2 sizes ~12 cores for 100M
//!    pkts/s: a budget of 120 ns per packet (≥ 8.3M pkts/s per core).
//! 2. **blake3**: the full hash of a 192-byte packet (176 bytes hashed, flags read as 0):
//!    ours (one stack copy, then `blake3::hash`), the wire crate's (three `Hasher::update`
//!    calls), and plain `blake3::hash` of the same 176 bytes as the baseline. The crate's
//!    `hash_many` (SIMD across many inputs) is not public API, so many-input batching is not
//!    measured.
//! 3. **fanout**: DATA frames built per second from stored 192-byte packets (46 per frame),
//!    against a bare `memcpy` of the same bytes into a 9000-byte buffer. One frame buffer
//!    serves every destination, so the figure does not depend on their number.

use vyrn_bench::{budget, measure, measure_with_setup, quick, ratio, rounds};
use vyrn_data::counters::Counters;
use vyrn_data::fanout::FanOut;
use vyrn_data::ingest::{full_hash, Mac, Parse};
use vyrn_data::out::OutQueue;
use vyrn_data::store::Ring;
use vyrn_data::{DataBox, DataConfig, DestConfig, RingConfig, SessionConfig};
use vyrn_wire::msg::client::{
    full_hash as wire_full_hash, req_len, Msg, MsgType, RequestPacket, Side,
};

const BOOK: u16 = 7;
const SESSIONS: u32 = 4096;

fn key(s: u32) -> [u8; 16] {
    let mut k = [0x5Au8; 16];
    k[..4].copy_from_slice(&s.to_le_bytes());
    k
}

fn config(ring: u64) -> DataConfig {
    let mut c = DataConfig::new(1, vec![3, 1, 4, 2], vec![BOOK]);
    c.sessions = (0..SESSIONS)
        .map(|s| SessionConfig {
            session: s + 1,
            k_seq: key(s + 1),
            k_out: key(s + 1),
            home: 1,
            addr: None,
        })
        .collect();
    c.dests = (0..5)
        .map(|i| DestConfig {
            name: format!("R{i}"),
            voter: i < 4,
        })
        .collect();
    c.ring = RingConfig {
        pkts_per_s: ring,
        seconds: 1,
        max_bytes: 1 << 31,
    };
    c.out_slots = 1024;
    c
}

/// `n` packets of `count` messages, one flat buffer, round `r` of a run: every session sends
/// in turn, pkt_seq continuing from the previous round.
fn packets(n: usize, count: usize, r: u32) -> Vec<u8> {
    let len = req_len(count);
    let mut buf = Vec::with_capacity(n * len);
    let per_round = (n as u32).div_ceil(SESSIONS);
    for i in 0..n as u32 {
        let s = i % SESSIONS + 1;
        let seq = r * per_round + i / SESSIONS + 1;
        let m = Msg {
            kind: MsgType::NewGtc,
            side: Side::Sell,
            tick: 1000 + (i % 97) as i32,
            qty: 1 + i % 13,
            client_tag: i,
        };
        RequestPacket {
            book: BOOK,
            resend: false,
            session: s,
            pkt_seq: seq,
            msgs: vec![m; count],
        }
        .encode(&key(s), &mut buf)
        .expect("valid");
    }
    buf
}

fn main() {
    println!("# data_ingest: one shared 2-core machine; ratios are the figures to quote");
    if vyrn_bench::enabled("ingest") {
        for count in [10usize, 1] {
            ingest(count);
        }
    }
    if vyrn_bench::enabled("blake3") {
        blake3_part();
    }
    if vyrn_bench::enabled("fanout") {
        fanout();
    }
}

fn ingest(count: usize) {
    let len = req_len(count);
    let n = if quick() { 20_000 } else { 200_000 };
    let ring = if quick() { 1 << 16 } else { 1 << 20 };
    let cfg = config(ring);
    let mut b = DataBox::new(&cfg).expect("config");
    // Fill and wrap the ring once, so every round runs in steady state (evicting).
    let mut r = 0u32;
    let mut now = 0u64;
    let run = |b: &mut DataBox, pkts: &[u8], now: &mut u64| {
        for (i, p) in pkts.chunks_exact(len).enumerate() {
            *now += 10;
            let _ = b.on_packet(p, None, *now);
            if i % 64 == 63 {
                b.poll(*now);
                b.out().clear();
            }
        }
        b.out().clear();
    };
    while b.counters().stored < ring + ring / 4 {
        r += 1;
        let pk = packets(n, count, r);
        run(&mut b, &pk, &mut now);
    }
    let rounds = rounds(10);
    let full = measure_with_setup(
        &format!("ingest {len} B (count {count}), per packet"),
        rounds,
        n as u64,
        || {
            r += 1;
            packets(n, count, r)
        },
        |pk| {
            run(&mut b, &pk, &mut now);
            pk
        },
    );
    let c = *b.counters();
    assert!(c.balanced());
    assert_eq!(c.stored, c.rx_packets, "every packet new: {c}");
    println!(
        "  {:.2} M pkts/s per core; ring {} slots, evicted {}, index displaced {}; {} frames ({:.1} pkts/frame)",
        full.ops_per_s() / 1e6,
        ring,
        c.ring_evicted,
        c.index_displaced_live,
        c.frames_data,
        c.frames_data_pkts as f64 / c.frames_data.max(1) as f64
    );
    budget("07 §5.2 ~12 cores for 100M pkts/s", full.p50_ns(), 120.0);

    // Stage split on the same packets.
    let pk = packets(n, count, r + 1);
    let ids: Vec<u32> = (1..=SESSIONS).collect();
    let parse = Parse::new(&[BOOK], &ids, 1);
    let mac = Mac::new((1..=SESSIONS).map(key).collect());
    let pm = measure("  parse + MAC only", rounds, n as u64, || {
        let mut ok = 0u32;
        for p in pk.chunks_exact(len) {
            if let Ok(x) = parse.parse(p) {
                ok += mac.check(&x).is_ok() as u32;
            }
        }
        assert_eq!(ok as usize, n);
        ok
    });
    let fh = measure("  full hash only", rounds, n as u64, || {
        let mut x = 0u8;
        for p in pk.chunks_exact(len) {
            x ^= full_hash(p)[0];
        }
        x
    });
    ratio(&pm, &full);
    ratio(&fh, &full);
    println!(
        "  rest (dedupe, ring, indexes, fan-out): ~{:.1} ns/packet",
        full.p50_ns() - pm.p50_ns() - fh.p50_ns()
    );
}

fn blake3_part() {
    let n = if quick() { 20_000 } else { 500_000 };
    let pk = packets(4096, 10, 1);
    let len = req_len(10);
    let rounds = rounds(20);
    let pkts: Vec<Vec<u8>> = pk.chunks_exact(len).map(<[u8]>::to_vec).collect();
    let hashed = len - 16;
    let base = measure(
        &format!("blake3::hash one-shot ({hashed} B)"),
        rounds,
        n as u64,
        || {
            let mut x = 0u8;
            for k in 0..n {
                x ^= blake3::hash(&pkts[k % 4096][..hashed]).as_bytes()[0];
            }
            x
        },
    );
    let ours = measure(
        "full_hash (copy, flags 0, one-shot)",
        rounds,
        n as u64,
        || {
            let mut x = 0u8;
            for k in 0..n {
                x ^= full_hash(&pkts[k % 4096])[0];
            }
            x
        },
    );
    let wire = measure(
        "wire full_hash (3 x Hasher::update)",
        rounds,
        n as u64,
        || {
            let mut x = 0u8;
            for k in 0..n {
                x ^= wire_full_hash(&pkts[k % 4096]).expect("valid")[0];
            }
            x
        },
    );
    ratio(&ours, &base);
    ratio(&wire, &base);
    println!(
        "  {:.2} M hashes/s per core (ours); blake3's hash_many is not public API, so no many-input SIMD figure",
        ours.ops_per_s() / 1e6
    );
}

fn fanout() {
    let len = req_len(10);
    let n = if quick() { 46 * 200 } else { 46 * 20_000 };
    let pk = packets(n, 10, 1);
    let mut ring = Ring::new(n);
    for p in pk.chunks_exact(len) {
        ring.push(p, 1, 1, 0);
    }
    let rounds = rounds(20);
    let frames = (n / 46) as u64;
    let mut out = OutQueue::new(64);
    let mut c = Counters::default();
    let built = measure("fan-out: DATA frames of 46 x 192 B", rounds, frames, || {
        let mut f = FanOut::new(&[BOOK], n, 1, 0, 5_000, 100_000);
        for (i, p) in pk.chunks_exact(len).enumerate() {
            f.append(BOOK, i as u64 + 1, p, 0, &mut ring, &mut out, &mut c);
            if out.len() >= 32 {
                out.clear();
            }
        }
        out.clear();
        f.last_data_seq()
    });
    let mut buf = Vec::with_capacity(9000);
    let copy = measure(
        "baseline: memcpy 46 x 192 B per frame",
        rounds,
        frames,
        || {
            let mut s = 0usize;
            for fr in pk.chunks(46 * len) {
                buf.clear();
                for p in fr.chunks_exact(len) {
                    buf.extend_from_slice(&(len as u16).to_le_bytes());
                    buf.extend_from_slice(p);
                }
                s += buf.len();
            }
            s
        },
    );
    ratio(&built, &copy);
    let fps = built.ops_per_s();
    println!(
        "  {:.2} M frames/s per core = {:.1} Gbps of frames per destination (one buffer for all)",
        fps / 1e6,
        fps * 8950.0 * 8.0 / 1e9
    );
}
