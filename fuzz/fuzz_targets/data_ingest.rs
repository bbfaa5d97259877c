//! Fuzz the data box's ingest and control paths (vyrn-data, 07 §5.2–§5.7). The input is a
//! program of operations: raw bytes as a client packet, a validly tagged packet built from
//! fuzzed fields (so dedupe, conflicts, the ring and fan-out are reached), a raw control
//! message, or a clock step. Invariants: no panic; every packet is accounted for exactly once
//! (`rx_packets = stored + conflicts + Σ drop_*`); every frame the box queues parses.
#![no_main]

use libfuzzer_sys::fuzz_target;
use vyrn_data::{DataBox, DataConfig, DestConfig, RingConfig, SessionConfig};
use vyrn_wire::msg::client::{Msg, MsgType, RequestPacket, Side};
use vyrn_wire::msg::data::DataFrame;

fn key(s: u32) -> [u8; 16] {
    let mut k = [7u8; 16];
    k[..4].copy_from_slice(&s.to_le_bytes());
    k
}

fn boxed() -> DataBox {
    let mut c = DataConfig::new(1, vec![3, 1, 4, 2], vec![7]);
    c.sessions = (0..4u32)
        .map(|i| SessionConfig {
            session: 100 + i,
            k_seq: key(100 + i),
            k_out: key(200 + i),
            home: [3, 1, 4, 2][i as usize],
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
        pkts_per_s: 64,
        seconds: 1,
        max_bytes: 1 << 20,
    };
    c.out_slots = 16;
    DataBox::new(&c).expect("valid config")
}

fuzz_target!(|data: &[u8]| {
    let mut b = boxed();
    let mut now = 0u64;
    let mut i = 0usize;
    let mut next = |n: usize| -> &[u8] {
        let s = &data[i.min(data.len())..(i + n).min(data.len())];
        i += n;
        s
    };
    loop {
        let Some(&op) = next(1).first() else { break };
        match op % 4 {
            0 => {
                let len = next(1).first().copied().unwrap_or(0) as usize;
                let p = next(len).to_vec();
                let _ = b.on_packet(&p, None, now);
            }
            1 => {
                let f = next(5).to_vec();
                if f.len() < 5 {
                    break;
                }
                let session = 100 + (f[0] % 5) as u32; // 104 is unknown
                let pkt_seq = u16::from_le_bytes([f[1], f[2]]) as u32;
                let count = 1 + (f[3] % 10) as usize;
                let m = Msg {
                    kind: MsgType::NewGtc,
                    side: Side::Buy,
                    tick: f[4] as i32,
                    qty: 1,
                    client_tag: f[4] as u32 % 3,
                };
                let p = RequestPacket {
                    book: 7,
                    resend: f[3] & 0x80 != 0,
                    session,
                    pkt_seq: pkt_seq.max(1),
                    msgs: vec![m; count],
                };
                if let Ok(bytes) = p.to_bytes(&key(session)) {
                    let _ = b.on_packet(&bytes, None, now);
                }
            }
            2 => {
                let hdr = next(2).to_vec();
                if hdr.len() < 2 {
                    break;
                }
                let m = next(hdr[1] as usize % 48).to_vec();
                let _ = b.on_ctrl(hdr[0] as usize % 6, &m, now);
            }
            _ => {
                now += next(1).first().copied().unwrap_or(0) as u64 * 100;
                b.poll(now);
            }
        }
        assert!(b.counters().balanced(), "{}", b.counters());
        // Every frame queued parses; then the "network" takes it.
        let out = b.out();
        for k in 0..out.len() {
            let (_, bytes, _) = out.get(k).unwrap();
            if bytes.len() >= 2 && bytes[..2] == [0x50, 0x44] {
                DataFrame::parse(bytes).expect("queued data frames parse");
            }
        }
        out.clear();
    }
});
