//! The load generator core: seeded mix proportions, the open-loop schedule, histograms and the
//! progress line, end to end against the sequencer double.

use std::net::SocketAddr;

use vyrn_client::loadgen::mix::{Mix, OpKind, OrderGen, Prices};
use vyrn_client::loadgen::schedule::OpenLoop;
use vyrn_client::loadgen::stats::{fmt_ns, Latency};
use vyrn_client::loadgen::{LoadConfig, LoadGen};
use vyrn_client::testkit::{DataDouble, SeqDouble, Switch};
use vyrn_client::{Driver, OrderReq, Session, SessionConfig};
use vyrn_nic::mem::MemPort;

#[test]
fn seeded_mix_proportions_and_reproducibility() {
    let mix = Mix::default();
    let draw = |seed| {
        let mut g = OrderGen::new(seed, mix, Prices::default());
        let mut live: Vec<u32> = (1..=1000).collect();
        let mut counts = [0u64; 4];
        let mut reqs = Vec::new();
        for k in 0..100_000u32 {
            let (kind, r) = g.next(&mut live);
            counts[match kind {
                OpKind::RestingGtc => 0,
                OpKind::CrossingGtc => 1,
                OpKind::Cancel => 2,
                OpKind::Ioc => 3,
            }] += 1;
            if !matches!(r, OrderReq::Cancel { .. }) {
                live.push(2000 + k);
            }
            reqs.push(r);
        }
        (counts, reqs, g.cancel_fallbacks)
    };
    let (counts, a, fallbacks) = draw(7);
    assert_eq!(fallbacks, 0);
    for (c, want) in counts.iter().zip([0.55, 0.25, 0.10, 0.10]) {
        let got = *c as f64 / 100_000.0;
        assert!((got - want).abs() < 0.01, "{counts:?}");
    }
    let (_, b, _) = draw(7);
    assert_eq!(a, b, "same seed, same orders");
    let (_, c, _) = draw(8);
    assert_ne!(a, c);
    // Prices: resting orders never cross the mid, crossing ones do.
    let p = Prices::default();
    let mut g = OrderGen::new(
        1,
        Mix {
            resting_gtc: 1,
            crossing_gtc: 0,
            cancel: 0,
            ioc: 0,
        },
        p,
    );
    for _ in 0..1000 {
        match g.next(&mut Vec::new()).1 {
            OrderReq::Gtc { side, tick, .. } => match side {
                vyrn_wire::msg::client::Side::Buy => assert!(tick < p.mid),
                vyrn_wire::msg::client::Side::Sell => assert!(tick > p.mid),
            },
            r => panic!("{r:?}"),
        }
    }
    // A cancel with nothing live becomes a resting GTC, counted.
    let mut g = OrderGen::new(
        1,
        Mix {
            resting_gtc: 0,
            crossing_gtc: 0,
            cancel: 1,
            ioc: 0,
        },
        p,
    );
    assert_eq!(g.next(&mut Vec::new()).0, OpKind::RestingGtc);
    assert_eq!(g.cancel_fallbacks, 1);
}

#[test]
fn open_loop_schedule_never_skips_and_keeps_intended_times() {
    let mut s = OpenLoop::new(1_000, 1_000); // 1 packet per ms from t = 1 µs
    assert_eq!(s.due(999), None);
    assert_eq!(s.due(1_000), Some((0, 1_000)));
    assert_eq!(s.due(1_000), None);
    // The caller stalls 5.5 ms: every packet due is handed out, at its intended time.
    let got: Vec<_> = std::iter::from_fn(|| s.due(5_501_000)).collect();
    assert_eq!(
        got,
        (1..=5)
            .map(|k| (k, 1_000 + k * 1_000_000))
            .collect::<Vec<_>>()
    );
    assert_eq!(s.lag_max_ns, 4_500_000);
    assert_eq!(s.sent(), 6);
    // Exact at high rates: 3 per second never drifts.
    let t = OpenLoop::new(0, 3);
    assert_eq!(t.intended(3), 1_000_000_000);
    assert_eq!(t.intended(3_000_000), 1_000_000_000_000_000);
}

#[test]
fn latency_percentiles_and_format() {
    let mut l = Latency::default();
    for ns in 1..=1000u64 {
        l.record(ns * 1000);
    }
    let p = l.percentiles();
    assert_eq!(p.n, 1000);
    assert!((499_000..=501_000).contains(&p.p50), "{p:?}");
    assert!((989_000..=991_000).contains(&p.p99), "{p:?}");
    assert!(p.p999 <= p.max && p.max >= 999_000);
    assert_eq!(fmt_ns(850), "850ns");
    assert_eq!(fmt_ns(12_340), "12.3us");
    assert_eq!(fmt_ns(4_560_000), "4.56ms");
}

/// The generator against the sequencer double: 4 sessions at 2000 msg/s for 2.5 simulated
/// seconds, the double answering every 20 µs, stalled for 10 ms once.
#[test]
fn end_to_end_histograms_and_progress_against_the_double() {
    let seq: SocketAddr = "10.0.0.1:9000".parse().unwrap();
    let data: SocketAddr = "10.0.1.1:7402".parse().unwrap();
    let me: SocketAddr = "10.0.9.9:5000".parse().unwrap();
    let (c_seq, mut seq_port) = MemPort::pair(1 << 16, 2048);
    let (c_data, mut data_port) = MemPort::pair(1 << 16, 2048);
    let mut sw = Switch::new();
    sw.link(seq, c_seq);
    sw.link(data, c_data);
    let mut double = SeqDouble::new(seq, 1, 0, 0);
    let mut dd = DataDouble::default();
    let mut sessions = Vec::new();
    for i in 0..4u32 {
        let id = 0x2000 + i;
        let (ks, ko) = ([i as u8 + 1; 16], [i as u8 + 9; 16]);
        double.add_session(id, ks, ko, me);
        dd.add_session(id, ks, ko);
        sessions.push(
            Session::new(SessionConfig::new(7, id, ks, ko, seq, vec![data], 0), 1, 0).unwrap(),
        );
    }
    let mut driver = Driver::new(sw, &sessions);
    let cfg = LoadConfig {
        msgs_per_s: 2000,
        msgs_per_pkt: 2,
        seed: 3,
        start_ns: 0,
        ..Default::default()
    };
    let mut lg = LoadGen::new(cfg, sessions.len());
    let mut lines = Vec::new();
    let tick = 20_000u64;
    let stall = 1_000_000_000..1_010_000_000u64;
    let mut now = 0;
    while now < 2_500_000_000 {
        now += tick;
        lg.submit_due(now, &mut sessions).unwrap();
        driver.pump(&mut sessions, now).unwrap();
        if !stall.contains(&now) {
            double.serve(&mut seq_port);
        }
        if now % 1_000_000 < tick {
            double.mark_durable();
        }
        if now % 3_000_000 < tick {
            double.mark_final();
        }
        double.flush_to(&mut seq_port);
        dd.serve(&mut data_port);
        driver.pump(&mut sessions, now).unwrap();
        lg.drain_events(now, &mut sessions);
        if let Some(l) = lg.progress(now, &sessions) {
            lines.push(l);
        }
    }
    // Open loop: exactly the scheduled number of packets went out, the stall notwithstanding.
    // Packet k is due at k ms (2 messages each), so packets 0..=2500 were due by 2.5 s.
    let sent: u64 = lg.counts.sent.iter().sum();
    assert_eq!(lg.schedule().sent(), 2501);
    assert_eq!(sent, 2 * 2501);
    assert_eq!(lines.len(), 2, "{lines:?}");
    println!("{}", lines[1]);
    assert!(lines[0].starts_with("t=   1s sent 2002"), "{}", lines[0]);
    for f in ["ack", "fill->durable", "fill->final", "p50/p99/p99.9/max"] {
        assert!(lines[1].contains(f), "{}", lines[1]);
    }
    let ack = lg.stats.req_ack.percentiles();
    let fill = lg.stats.req_fill.percentiles();
    let dur = lg.stats.fill_durable.percentiles();
    let fin = lg.stats.fill_final.percentiles();
    assert!(
        ack.n > 3000 && fill.n > 500 && dur.n > 500 && fin.n > 500,
        "{ack:?} {fill:?} {dur:?} {fin:?}"
    );
    // Answers come within a tick or two; the stall shows in the tail, not hidden.
    assert!(ack.p50 <= 3 * tick, "{ack:?}");
    assert!(ack.max >= 9_000_000, "the 10 ms stall must show: {ack:?}");
    // Durable within one 1 ms mark, final within one 3 ms mark plus a block.
    assert!(dur.max <= 1_100_000 + 2 * tick + 10_000_000, "{dur:?}");
    assert!(
        fin.p50 >= dur.p50,
        "final never before durable here: {fin:?} {dur:?}"
    );
    assert_eq!(
        dd.stored.len() as u64,
        lg.schedule().sent(),
        "copy 2 of every packet"
    );
}

/// Ping mode against the sequencer double: one request in flight per session at any time, a
/// GTC then its cancel, every answer one round trip; the double answering every tick gives
/// round trips of one tick, and a stall shows in the tail.
#[test]
fn ping_mode_keeps_one_request_in_flight_and_measures_round_trips() {
    use vyrn_client::loadgen::ping::Ping;
    let seq: SocketAddr = "10.0.0.1:9000".parse().unwrap();
    let data: SocketAddr = "10.0.1.1:7402".parse().unwrap();
    let me: SocketAddr = "10.0.9.9:5000".parse().unwrap();
    let (c_seq, mut seq_port) = MemPort::pair(1 << 16, 2048);
    let (c_data, mut data_port) = MemPort::pair(1 << 16, 2048);
    let mut sw = Switch::new();
    sw.link(seq, c_seq);
    sw.link(data, c_data);
    let mut double = SeqDouble::new(seq, 1, 0, 0);
    let mut dd = DataDouble::default();
    let mut sessions = Vec::new();
    for i in 0..3u32 {
        let id = 0x3000 + i;
        let (ks, ko) = ([i as u8 + 1; 16], [i as u8 + 9; 16]);
        double.add_session(id, ks, ko, me);
        dd.add_session(id, ks, ko);
        sessions.push(
            Session::new(SessionConfig::new(7, id, ks, ko, seq, vec![data], 0), 1, 0).unwrap(),
        );
    }
    let mut driver = Driver::new(sw, &sessions);
    // Two of the three sessions take part.
    let mut ping = Ping::new(sessions.len(), 10_000, 20);
    let tick = 10_000u64;
    let mut now = 0;
    let mut max_in_flight = 0;
    let stall = 200_000_000..205_000_000u64;
    while now < 400_000_000 {
        now += tick;
        ping.submit(now, &mut sessions, 2).unwrap();
        max_in_flight = max_in_flight.max(ping.in_flight());
        driver.pump(&mut sessions, now).unwrap();
        if !stall.contains(&now) {
            double.serve(&mut seq_port);
        }
        double.flush_to(&mut seq_port);
        dd.serve(&mut data_port);
        now += tick;
        driver.pump(&mut sessions, now).unwrap();
        ping.drain_events(now, &mut sessions);
    }
    let c = ping.counts;
    let p = ping.rtt.percentiles();
    assert_eq!(max_in_flight, 2, "one request in flight per taking session");
    // Two sessions, one round trip per two ticks each, for 0.4 s: ~40k round trips.
    assert!(c.answered > 36_000 && c.sent - c.answered <= 2, "{c:?}");
    assert_eq!(c.refused, 0, "{c:?}");
    assert!(
        (tick..=tick + tick / 100).contains(&p.p50),
        "one tick (3 significant digits): {p:?}"
    );
    assert!(p.max >= 4_000_000, "the 5 ms stall shows: {p:?}");
    // The third session never sent anything.
    assert_eq!(dd.stored.len() as u64, c.sent);
    let s = ping.summary();
    assert!(s[0].contains("ping request -> answer"), "{s:?}");
}
