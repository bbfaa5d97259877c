//! Fuzz the live engine with arbitrary packets (missing-chapters §2, 07 §9.5): each input is a
//! sequence of chunks `len u8 ‖ flags u8 ‖ bytes`; flags bit 0 re-signs the chunk with the real
//! key of the session it names (so damaged but authentic packets get past the tag), bit 1 polls
//! the BBO core after it. Invariants: no panic, the book's invariants hold, every response
//! parses and verifies under its session's K_out.
#![no_main]

use libfuzzer_sys::fuzz_target;
use vyrn_engine::{Capture, EngineConfig, LiveEngine};
use vyrn_wire::msg::client::{siphash128, Response};

fuzz_target!(|data: &[u8]| {
    let mut cfg = EngineConfig::test_home(2, 2);
    // Small tables: this target builds an engine per input.
    cfg.hot_ring_bytes = 4096;
    cfg.book_cfg.max_orders = 64;
    cfg.lane_max_orders = 64;
    let mut e = LiveEngine::new(cfg.clone());
    let mut cap = Capture::default();
    let mut rest = data;
    let mut t = 1u64;
    while rest.len() >= 2 {
        let (len, flags) = (rest[0] as usize, rest[1]);
        rest = &rest[2..];
        let n = len.min(rest.len());
        let mut pkt = rest[..n].to_vec();
        rest = &rest[n..];
        if flags & 1 != 0 && pkt.len() >= 24 {
            let session = u32::from_le_bytes([pkt[4], pkt[5], pkt[6], pkt[7]]);
            let idx = session as usize % cfg.sessions.len();
            let s = &cfg.sessions[idx];
            pkt[4..8].copy_from_slice(&s.session.to_le_bytes());
            pkt[0..2].copy_from_slice(&cfg.book.to_le_bytes());
            let k = pkt.len() - 16;
            let tag = siphash128(&s.k_seq, &pkt[..k]);
            pkt[k..].copy_from_slice(&tag);
        }
        t += 100;
        let _ = e.submit(t, t - 50, &pkt, &mut cap);
        if flags & 2 != 0 {
            e.poll(t, &mut cap).expect("a live step never fails");
        }
    }
    e.poll(t + 1, &mut cap).expect("a live step never fails");
    e.bbo().book().check().expect("book invariants");
    for (session, resps) in &cap.responses {
        let k = cfg
            .sessions
            .iter()
            .find(|s| s.session == *session)
            .expect("session")
            .k_out;
        for (b, _) in resps {
            Response::parse(b, &k).expect("every response parses");
        }
    }
});
