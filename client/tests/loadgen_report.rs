//! The load generator's end-of-run report and the session builder the binaries share.

use std::net::SocketAddr;
use vyrn_client::loadgen::{sessions_for, LoadConfig, LoadGen};

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
    assert_eq!(lines.len(), 5);
    for (l, name) in lines.iter().zip([
        "request -> ack",
        "request -> fill",
        "fill -> durable",
        "fill -> final",
    ]) {
        assert!(l.starts_with(name) && l.contains("p99.9"), "{l}");
    }
    assert!(lines[4].starts_with("sent 0 "), "{}", lines[4]);
}
