//! The load generator's end-of-run report and the session builder the binaries share.

use std::net::SocketAddr;
use vyrn_client::loadgen::{sessions_for, sessions_routed, LoadConfig, LoadGen};

#[test]
fn sessions_for_sets_every_resend_timer_and_summary_lists_four_distributions() {
    let seq: SocketAddr = "127.0.0.1:7400".parse().unwrap();
    let data: SocketAddr = "127.0.0.1:7402".parse().unwrap();
    let keys = (1..=3u32).map(|s| (s, [s as u8; 16], [s as u8 + 100; 16]));
    let sessions = sessions_for(1, keys, seq, data, 40_000_000).unwrap();
    assert_eq!(sessions.len(), 3);
    for s in &sessions {
        let c = s.config();
        assert_eq!(c.resend_after_ns, 40_000_000);
        assert_eq!(c.resend_gap_ns, 20_000_000);
        assert_eq!(c.gap_resend_ns, 40_000_000);
        assert_eq!(c.seq_addr, seq);
        assert_eq!(c.data_boxes, vec![data]);
    }
    let load = LoadGen::new(LoadConfig::default(), sessions.len());
    let lines = load.summary();
    assert_eq!(lines.len(), 6);
    for (l, name) in lines.iter().zip([
        "request -> ack",
        "request -> fill",
        "fill -> durable",
        "fill -> final",
    ]) {
        assert!(l.starts_with(name) && l.contains("p99.9"), "{l}");
    }
    assert!(lines[4].starts_with("sent 0 "), "{}", lines[4]);
    // The outage its clients saw (none yet: no answer came).
    assert_eq!(
        lines[5],
        "longest time with no answer: 0.0 ms, from 0.000 s into the run"
    );
}

/// A REF box listens for lane `l`'s sessions on `client_port + l` (07 §9.5 flow filter): the
/// routed builder gives each session the address its route says, with its data home.
#[test]
fn sessions_routed_sends_each_session_to_its_own_address() {
    let data: Vec<SocketAddr> = vec![
        "127.0.0.1:7430".parse().unwrap(),
        "127.0.0.1:7435".parse().unwrap(),
    ];
    let keys = (1..=4u32).map(|s| (s, [s as u8; 16], [s as u8 + 100; 16], (s % 2) as u8));
    let route =
        |s: u32| -> SocketAddr { SocketAddr::from(([127, 0, 0, 1], 7400 + (s as u16 % 3))) };
    let sessions = sessions_routed(1, keys, route, data.clone(), 50_000_000).unwrap();
    assert_eq!(sessions.len(), 4);
    for (i, s) in sessions.iter().enumerate() {
        let session = i as u32 + 1;
        let c = s.config();
        assert_eq!(c.session, session);
        assert_eq!(c.seq_addr, route(session));
        assert_eq!(c.data_home, (session % 2) as u8);
        assert_eq!(c.data_boxes, data);
    }
}
