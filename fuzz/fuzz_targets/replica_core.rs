//! Fuzz the replica's handlers with its state behind them (07 §4.9–§4.10, §5.3–§5.6, §6.4): a
//! program of datagrams into a `ReplicaCore` — raw bytes or a frame of the tenure with a fuzzed
//! body on either path, the sequencer's retransmission channel, a peer's repair channel or the
//! replica's own journal; data frames from any data box index (members and not); fetched packets
//! from the sequencer, any peer or any box; HashList parts; NackTooOld; clock steps; vote checks
//! of arbitrary ranges. Invariants: no panic, no unbounded loop; what order RX holds stays within
//! its bound; a frame delivered once is never delivered again (counters only grow).
#![no_main]

use libfuzzer_sys::fuzz_target;
use vyrn_engine::EngineConfig;
use vyrn_replica::front::core::{CoreConfig, NullOut, ReplicaCore};
use vyrn_replica::front::data::Source;
use vyrn_replica::front::verdict::Anchor;
use vyrn_wire::frame::{build_frame, FrameHeader, FrameKind};
use vyrn_wire::msg::ctrl::HashList;

const EPOCH: u32 = 4;

fn core(e: &EngineConfig) -> ReplicaCore {
    let key = ed25519_dalek::SigningKey::from_bytes(&[2; 32]).verifying_key();
    let mut c = ReplicaCore::new(CoreConfig {
        engine: e.clone(),
        epoch: EPOCH,
        tenure: 0,
        sender: 0,
        seq_key: key,
        n_boxes: 2,
        n_peers: 3,
        anchor: Anchor::default(),
    })
    .expect("valid config");
    c.order_rx_mut().set_held_bytes_max(1 << 20);
    c
}

struct Sink;
impl vyrn_engine::home::EngineSink for Sink {}

fuzz_target!(|data: &[u8]| {
    let e = EngineConfig::test_home(4, 2);
    let mut c = core(&e);
    let mut out = NullOut;
    let mut now = 1_000u64;
    let mut i = 0usize;
    let mut next = |n: usize| -> &[u8] {
        let s = &data[i.min(data.len())..(i + n).min(data.len())];
        i += n;
        s
    };
    let mut last_delivered = [0u64; 2];
    loop {
        let Some(&op) = next(1).first() else { break };
        let arg = next(1).first().copied().unwrap_or(0);
        match op % 9 {
            0 => {
                let len = next(1).first().copied().unwrap_or(0) as usize * 4;
                let b = next(len).to_vec();
                c.on_path_frame(arg % 6, &b, now, &mut out);
            }
            1 => {
                // A frame of the tenure: a real header, a fuzzed body.
                let f = next(4);
                let kind = [
                    FrameKind::Order,
                    FrameKind::Hash,
                    FrameKind::Header,
                    FrameKind::Heartbeat,
                ][(arg % 4) as usize];
                let frame_seq = 1 + u16::from_le_bytes([
                    f.first().copied().unwrap_or(0),
                    f.get(1).copied().unwrap_or(0),
                ]) as u64;
                let len = f.get(2).copied().unwrap_or(0) as usize;
                let body = next(len).to_vec();
                let h = FrameHeader {
                    kind,
                    book: e.book,
                    epoch16: EPOCH as u16,
                    frame_seq,
                    flags: f.get(3).copied().unwrap_or(0),
                    tenure: 0,
                    body_len: body.len() as u16,
                    sender: 0,
                    stream: (arg >> 2) & 1,
                };
                let mut b = Vec::new();
                build_frame(&h, &body, &mut b);
                c.on_path_frame((arg >> 3) % 5, &b, now, &mut out);
            }
            2 => {
                let len = next(1).first().copied().unwrap_or(0) as usize * 4;
                let b = next(len).to_vec();
                c.on_data_frame(arg % 4, &b, now, &mut out);
            }
            3 => {
                let len = next(1).first().copied().unwrap_or(0) as usize;
                let b = next(len).to_vec();
                let src = match arg % 3 {
                    0 => Source::Seq,
                    1 => Source::Peer((arg >> 2) as usize % 5),
                    _ => Source::Box((arg >> 2) % 4),
                };
                c.on_fetched(src, &b, now, &mut out);
            }
            4 => {
                let len = next(1).first().copied().unwrap_or(0) as usize * 4;
                if let Ok(l) = HashList::parse(next(len)) {
                    c.on_hash_list(&l, now, &mut out);
                }
            }
            5 => {
                let s = next(8);
                let mut x = [0u8; 8];
                x[..s.len()].copy_from_slice(s);
                c.on_too_old(arg & 1, u64::from_le_bytes(x));
            }
            6 => {
                now += 1 + (arg as u64) * 10_000;
                let _ = c.tick(now, &mut out, &mut Sink);
            }
            7 => {
                let s = next(8);
                let first = 1 + s.first().copied().unwrap_or(0) as u64;
                let last = first + s.get(1).copied().unwrap_or(0) as u64;
                let mut hash = [0u8; 32];
                let tail = &s[2.min(s.len())..];
                hash[..tail.len()].copy_from_slice(tail);
                let _ = c.verify(first, last, &hash, now, &mut out);
            }
            _ => {
                now += 1 + arg as u64;
            }
        }
        let rx = c.order_rx();
        for s in 0..2u8 {
            assert!(rx.held_bytes(s) <= rx.held_bytes_max() + 9216, "held bound");
        }
        // Delivered counts only grow, except by frames a failed hold gave back.
        let d = rx.counters().delivered;
        let back = rx.counters().rewound;
        for s in 0..2 {
            assert!(d[s] + back >= last_delivered[s], "delivered went back");
            last_delivered[s] = d[s].max(last_delivered[s]);
        }
    }
});
