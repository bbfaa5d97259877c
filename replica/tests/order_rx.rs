//! Order RX (07 §4.9): two paths, two substreams, holes, NACKs, peer repair, RepAcks and the
//! path alarms — against frames built with `wire`'s frame builder.

use proptest::prelude::*;
use vyrn_replica::front::order_rx::{
    OrderRx, Refused, RxAlarm, RxConfig, RxOut, RxTiming, RxVerdict,
};
use vyrn_wire::frame::{build_frame, FrameHeader, FrameKind, FLAG_PATH_B, FLAG_RETRANSMIT};
use vyrn_wire::msg::ctrl::{Nack, RepAck, RepairReq};

const US: u64 = 1_000;
const MS: u64 = 1_000_000;

fn cfg(n_peers: usize) -> RxConfig {
    RxConfig {
        book: 1,
        epoch: 7,
        tenure: 2,
        sender: 0,
        n_streams: 2,
        n_peers,
        timing: RxTiming::default(),
    }
}

/// A HEARTBEAT-kind frame `fs` of `stream` (the loop reads only the header).
fn frame(stream: u8, fs: u64, flags: u8) -> Vec<u8> {
    let h = FrameHeader {
        kind: FrameKind::Heartbeat,
        book: 1,
        epoch16: 7,
        frame_seq: fs,
        flags,
        tenure: 2,
        body_len: 24,
        sender: 0,
        stream,
    };
    let mut out = Vec::new();
    build_frame(&h, &[0u8; 24], &mut out);
    out
}

#[derive(Default)]
struct Out {
    delivered: Vec<(u8, u64, bool)>,
    nacks: Vec<Nack>,
    repairs: Vec<(usize, RepairReq)>,
    acks: Vec<RepAck>,
    alarms: Vec<RxAlarm>,
}

impl RxOut for Out {
    fn deliver(&mut self, stream: u8, frame_seq: u64, frame: &[u8], peer: bool) {
        let (h, _) = FrameHeader::parse(frame).unwrap();
        assert_eq!((h.stream, h.frame_seq), (stream, frame_seq));
        self.delivered.push((stream, frame_seq, peer));
    }
    fn nack(&mut self, n: &Nack) {
        self.nacks.push(*n);
    }
    fn repair(&mut self, peer: usize, r: &RepairReq) {
        self.repairs.push((peer, *r));
    }
    fn ack(&mut self, a: &RepAck) {
        self.acks.push(*a);
    }
    fn alarm(&mut self, a: RxAlarm) {
        self.alarms.push(a);
    }
}

#[test]
fn both_paths_in_order_deliver_once_and_count_the_other_copy() {
    let mut rx = OrderRx::new(cfg(0));
    let mut o = Out::default();
    let mut now = 0;
    for fs in 1..=100 {
        for st in 0..2 {
            now += US;
            assert_eq!(
                rx.on_frame(0, &frame(st, fs, 0), now, &mut o),
                RxVerdict::Delivered(1)
            );
            assert_eq!(
                rx.on_frame(1, &frame(st, fs, FLAG_PATH_B), now, &mut o),
                RxVerdict::Duplicate
            );
        }
        rx.tick(now, &mut o);
    }
    assert_eq!(o.delivered.len(), 200);
    for st in 0..2u8 {
        let seqs: Vec<u64> = o
            .delivered
            .iter()
            .filter(|d| d.0 == st)
            .map(|d| d.1)
            .collect();
        assert_eq!(seqs, (1..=100).collect::<Vec<_>>());
    }
    let c = rx.counters();
    assert_eq!(
        (c.first, c.dups, c.holes, c.nacks),
        ([200, 0], [0, 200], 0, 0)
    );
    assert_eq!(rx.contiguous(), [100, 100]);
    assert!(o.nacks.is_empty() && o.alarms.is_empty());
}

#[test]
fn reordered_across_paths_delivers_in_order() {
    let mut rx = OrderRx::new(cfg(0));
    let mut o = Out::default();
    // Path B is ahead: 2, 3 before 1.
    assert_eq!(
        rx.on_frame(1, &frame(0, 2, FLAG_PATH_B), 10, &mut o),
        RxVerdict::Held
    );
    assert_eq!(
        rx.on_frame(1, &frame(0, 3, FLAG_PATH_B), 11, &mut o),
        RxVerdict::Held
    );
    assert_eq!(rx.holes(0), vec![(1, 1)]);
    assert_eq!(
        rx.on_frame(0, &frame(0, 1, 0), 12, &mut o),
        RxVerdict::Delivered(3)
    );
    assert_eq!(
        rx.on_frame(0, &frame(0, 2, 0), 13, &mut o),
        RxVerdict::Duplicate
    );
    assert!(rx.holes(0).is_empty());
    let seqs: Vec<u64> = o.delivered.iter().map(|d| d.1).collect();
    assert_eq!(seqs, vec![1, 2, 3]);
    // Within REP_HOLE_WAIT_US nothing was NACKed.
    rx.tick(13, &mut o);
    assert!(o.nacks.is_empty());
}

#[test]
fn a_hole_is_nacked_after_the_wait_then_asked_of_a_peer_and_repaired() {
    let mut rx = OrderRx::new(cfg(3));
    let mut o = Out::default();
    let t0 = 1_000 * US;
    rx.on_frame(0, &frame(1, 1, 0), t0, &mut o);
    // 2..=4 lost on both paths; 5 arrives.
    rx.on_frame(0, &frame(1, 5, 0), t0 + US, &mut o);
    assert_eq!(rx.holes(1), vec![(2, 4)]);
    rx.tick(t0 + 3 * US, &mut o);
    assert!(o.nacks.is_empty(), "before REP_HOLE_WAIT_US");
    rx.tick(t0 + 6 * US, &mut o);
    assert_eq!(o.nacks.len(), 1);
    let n = o.nacks[0];
    assert_eq!(
        (n.epoch, n.tenure, n.stream, n.from_seq, n.to_seq),
        (7, 2, 1, 2, 4)
    );
    assert!(o.repairs.is_empty(), "a peer only after REP_NACK_RETRY_US");
    // The retransmission of 3 arrives (flags.retransmit): the hole splits.
    assert_eq!(
        rx.on_frame(0, &frame(1, 3, FLAG_RETRANSMIT), t0 + 20 * US, &mut o),
        RxVerdict::Held
    );
    assert_eq!(rx.holes(1), vec![(2, 2), (4, 4)]);
    // Past REP_NACK_RETRY_US: the sequencer again and a peer (round robin).
    rx.tick(t0 + 60 * US, &mut o);
    assert_eq!(o.nacks.len(), 3);
    assert_eq!(o.repairs.len(), 2);
    assert_eq!(o.repairs[0].0, 0);
    assert_eq!(o.repairs[1].0, 1);
    assert_eq!((o.repairs[0].1.from_seq, o.repairs[0].1.to_seq), (2, 2));
    // A peer's copies (flags.peer_repaired, on the peer channel) fill the rest: delivered
    // flagged, in order.
    let peer = vyrn_wire::frame::FLAG_PEER_REPAIRED;
    let pc = vyrn_replica::front::order_rx::PEER_CHANNEL;
    rx.on_frame(pc, &frame(1, 4, peer), t0 + 70 * US, &mut o);
    assert_eq!(
        rx.on_frame(pc, &frame(1, 2, peer), t0 + 71 * US, &mut o),
        RxVerdict::Delivered(4)
    );
    let got: Vec<(u64, bool)> = o.delivered.iter().map(|d| (d.1, d.2)).collect();
    assert_eq!(
        got,
        vec![(1, false), (2, true), (3, false), (4, true), (5, false)]
    );
    assert!(rx.holes(1).is_empty());
    let before = o.nacks.len();
    rx.tick(t0 + 500 * US, &mut o);
    assert_eq!(o.nacks.len(), before, "no NACK once repaired");
    assert_eq!(rx.counters().repaired, 3);
}

#[test]
fn nack_too_old_sends_the_hole_to_peers_only() {
    let mut rx = OrderRx::new(cfg(2));
    let mut o = Out::default();
    rx.on_frame(0, &frame(0, 1, 0), 0, &mut o);
    rx.on_frame(0, &frame(0, 10, 0), US, &mut o);
    rx.tick(10 * US, &mut o);
    assert_eq!(o.nacks.len(), 1);
    rx.on_too_old(0, 20);
    rx.tick(100 * US, &mut o);
    assert_eq!(o.nacks.len(), 1, "the sequencer no longer holds 2..=9");
    assert_eq!(o.repairs.len(), 1);
    assert_eq!((o.repairs[0].1.from_seq, o.repairs[0].1.to_seq), (2, 9));
}

/// A hole no source ever fills (a replica restarted past the box's frame ring and its peers'
/// stores): its retries back off, doubling from REP_NACK_RETRY_US to NACK_BACKOFF_MAX_NS,
/// instead of asking every 50 µs forever (130,000 requests a second were measured before).
#[test]
fn retries_of_a_hole_nobody_fills_back_off() {
    use vyrn_replica::front::order_rx::{retry_after, NACK_BACKOFF_MAX_NS};
    let mut rx = OrderRx::new(cfg(3));
    let mut o = Out::default();
    rx.on_frame(0, &frame(0, 1, 0), 0, &mut o);
    rx.on_frame(0, &frame(0, 50, 0), US, &mut o);
    let mut now = US;
    while now < 2_000 * MS {
        now += 10 * US;
        rx.tick(now, &mut o);
    }
    let asked = o.nacks.len() + o.repairs.len();
    // 2 s: ~12 doublings up to 100 ms, then one retry every 100 ms — about 30 each way.
    assert!(
        o.nacks.len() <= 40 && o.repairs.len() <= 40,
        "{asked} requests in 2 s"
    );
    assert!(o.nacks.len() >= 10, "it keeps asking: {}", o.nacks.len());
    assert_eq!(retry_after(50 * US, 0), 50 * US);
    assert_eq!(retry_after(50 * US, 3), 400 * US);
    assert_eq!(retry_after(50 * US, 40), NACK_BACKOFF_MAX_NS);
    // A hole that opens later starts from REP_NACK_RETRY_US again (per hole, not global).
    let before = o.nacks.len();
    rx.on_frame(0, &frame(0, 60, 0), now, &mut o);
    rx.tick(now + 10 * US, &mut o);
    assert!(
        o.nacks.len() > before,
        "the new hole 51..=59 is asked at once"
    );
}

#[test]
fn refused_frames_are_typed_and_counted() {
    let mut rx = OrderRx::new(cfg(0));
    let mut o = Out::default();
    let mut other = frame(0, 1, 0);
    other[20] = 3; // another sequencer
    assert_eq!(
        rx.on_frame(0, &other, 1, &mut o),
        RxVerdict::Refused(Refused::OtherTenure)
    );
    let mut f = frame(0, 1, 0);
    f[17] = 9; // another tenure
    assert_eq!(
        rx.on_frame(0, &f, 1, &mut o),
        RxVerdict::Refused(Refused::OtherTenure)
    );
    assert!(matches!(
        rx.on_frame(0, &[1, 2, 3], 1, &mut o),
        RxVerdict::Refused(Refused::Malformed(_))
    ));
    let far = frame(0, 1 << 30, 0);
    assert_eq!(
        rx.on_frame(0, &far, 1, &mut o),
        RxVerdict::Refused(Refused::TooFarAhead)
    );
    let mut rx1 = OrderRx::new(RxConfig {
        n_streams: 1,
        ..cfg(0)
    });
    assert_eq!(
        rx1.on_frame(0, &frame(1, 1, 0), 1, &mut o),
        RxVerdict::Refused(Refused::BadStream)
    );
    assert!(o.delivered.is_empty());
    let c = rx.counters();
    assert_eq!(c.refused[0], 1);
    assert_eq!(c.refused[4], 1);
    assert_eq!(c.refused[2], 2);
    // A refused frame is no sign of life: no ack.
    rx.tick(10 * US, &mut o);
    assert!(o.acks.is_empty());
}

#[test]
fn acks_every_period_only_while_frames_arrive() {
    let mut rx = OrderRx::new(cfg(0));
    let mut o = Out::default();
    let mut now = 0;
    let mut fs = 0;
    // 1 ms of frames every 10 µs on both paths, ticking every µs.
    while now < MS {
        now += US;
        if now % (10 * US) == 0 {
            fs += 1;
            rx.on_frame(0, &frame(0, fs, 0), now, &mut o);
            rx.on_frame(1, &frame(0, fs, FLAG_PATH_B), now, &mut o);
        }
        rx.tick(now, &mut o);
    }
    let n = o.acks.len();
    assert!((18..=21).contains(&n), "one per REP_ACK_US over 1 ms: {n}");
    let last = o.acks.last().unwrap();
    assert_eq!(last.contiguous_frame_seq[0], fs);
    assert_eq!(last.path_mask, 0b11);
    // Silence: at most one more ack within REP_ACK_LIVE_US, then none.
    for _ in 0..1000 {
        now += US;
        rx.tick(now, &mut o);
    }
    assert!(
        o.acks.len() <= n + 2,
        "acks stop when frames stop: {}",
        o.acks.len() - n
    );
    // And past FAILOVER_SILENCE_MS, one failover suspicion.
    for _ in 0..3000 {
        now += US;
        rx.tick(now, &mut o);
    }
    let s = o
        .alarms
        .iter()
        .filter(|a| matches!(a, RxAlarm::Suspect { .. }))
        .count();
    assert_eq!(s, 1);
}

/// 07 §9.5 then §9.1: a tenure that never sends its first frame is no tenure at all. A fresh
/// order RX raises no suspicion before a first frame; told the tenure is due by `at`
/// (`expect_first_by`, a replica following a seal), it suspects FAILOVER_SILENCE_MS after `at`
/// and not before; a first frame in time counts as usual.
#[test]
fn a_promoted_tenure_that_never_sends_is_suspected_after_its_budget() {
    let count = |o: &Out| {
        o.alarms
            .iter()
            .filter(|a| matches!(a, RxAlarm::Suspect { .. }))
            .count()
    };
    let mut quiet = OrderRx::new(cfg(0));
    let mut o = Out::default();
    for t in 1..=20 {
        quiet.tick(t * MS, &mut o);
    }
    assert_eq!(count(&o), 0, "no frame yet, no expectation: no suspicion");
    let mut rx = OrderRx::new(cfg(0));
    let mut o = Out::default();
    rx.expect_first_by(5 * MS);
    let mut now = 0;
    while now < 7 * MS {
        now += US;
        rx.tick(now, &mut o);
    }
    assert_eq!(
        count(&o),
        0,
        "within the budget and FAILOVER_SILENCE_MS of it"
    );
    while now < 8 * MS {
        now += US;
        rx.tick(now, &mut o);
    }
    assert_eq!(count(&o), 1, "silent past the budget: suspected");
    // A tenure whose first frame comes in time is watched from that frame.
    let mut ok = OrderRx::new(cfg(0));
    let mut o = Out::default();
    ok.expect_first_by(5 * MS);
    ok.on_frame(0, &frame(0, 1, 0), 4 * MS, &mut o);
    assert_eq!(ok.last_rx(), Some(4 * MS));
    ok.tick(5 * MS, &mut o);
    assert_eq!(count(&o), 0);
}

#[test]
fn rep_a_path_for_a_silent_path_and_for_losses() {
    let mut rx = OrderRx::new(cfg(0));
    let mut o = Out::default();
    let mut now = 0;
    // Both paths for 10 ms, then only A for 150 ms, then both again.
    let mut fs = 0;
    let step = |rx: &mut OrderRx, o: &mut Out, now: u64, b: bool, fs: &mut u64| {
        *fs += 1;
        rx.on_frame(0, &frame(0, *fs, 0), now, o);
        if b {
            rx.on_frame(1, &frame(0, *fs, FLAG_PATH_B), now, o);
        }
        rx.tick(now, o);
    };
    while now < 10 * MS {
        now += 50 * US;
        step(&mut rx, &mut o, now, true, &mut fs);
    }
    assert!(!rx.path_alarm(1));
    while now < 160 * MS {
        now += 50 * US;
        step(&mut rx, &mut o, now, false, &mut fs);
    }
    assert!(rx.path_alarm(1), "B silent past REP_PATH_DOWN_MS");
    assert!(!rx.path_alarm(0));
    assert!(o.alarms.contains(&RxAlarm::Path {
        path: 1,
        raised: true,
        silent: true
    }));
    // B returns: no longer silent, but it lost ~3,000 frames in the last 10 s: still raised for
    // loss (REP_PATH_LOSS_ALARM = 1e-6) once they leave the 4096-frame accounting window.
    while now < 400 * MS {
        now += 50 * US;
        step(&mut rx, &mut o, now, true, &mut fs);
    }
    assert!(rx.path_alarm(1));
    assert!(rx.counters().lost[1] > 2000, "{:?}", rx.counters());
    assert_eq!(rx.counters().lost[0], 0);
    // Ten seconds later with both paths clean the alarm clears.
    while now < 11_000 * MS {
        now += 500 * US;
        step(&mut rx, &mut o, now, true, &mut fs);
    }
    assert!(!rx.path_alarm(1), "{:?}", o.alarms.last());
    assert!(o.alarms.iter().any(|a| matches!(
        a,
        RxAlarm::Path {
            path: 1,
            raised: false,
            ..
        }
    )));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Random loss, duplication and reordering on two paths, with a sequencer that answers every
    /// NACK: every frame of both substreams is delivered exactly once, in order.
    #[test]
    fn lossy_paths_with_repair_deliver_everything_once(
        seed in any::<u64>(),
        n in 50u64..400,
        loss in 0u32..30,
    ) {
        let mut rng = seed | 1;
        let mut next = || { rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17; rng };
        let mut rx = OrderRx::new(cfg(1));
        let mut o = Out::default();
        let mut now = 0u64;
        // What is in flight: (arrival time, path, frame).
        let mut flight: Vec<(u64, u8, Vec<u8>)> = Vec::new();
        for fs in 1..=n {
            for st in 0..2u8 {
                for p in 0..2u8 {
                    if (next() % 100) as u32 >= loss {
                        let delay = next() % 20 * US;
                        let fl = if p == 1 { FLAG_PATH_B } else { 0 };
                        flight.push((now + delay, p, frame(st, fs, fl)));
                    }
                }
            }
            now += 2 * US;
        }
        let end = now + 50 * MS;
        let mut t = 0;
        // After the data, heartbeats every 50 µs on both substreams (their frame_seqs reveal a
        // lost last frame, 07 §4.8), lossy like the rest.
        let mut hb = [n; 2];
        while t < end {
            t += US;
            if t > now && t % (50 * US) == 0 {
                for (st, h) in hb.iter_mut().enumerate() {
                    *h += 1;
                    for p in 0..2u8 {
                        if (next() % 100) as u32 >= loss {
                            let fl = if p == 1 { FLAG_PATH_B } else { 0 };
                            flight.push((t + next() % 20 * US, p, frame(st as u8, *h, fl)));
                        }
                    }
                }
            }
            flight.sort_by_key(|f| f.0);
            while flight.first().is_some_and(|f| f.0 <= t) {
                let (_, p, f) = flight.remove(0);
                rx.on_frame(p, &f, t, &mut o);
            }
            rx.tick(t, &mut o);
            for nk in o.nacks.drain(..) {
                for fs in nk.from_seq..=nk.to_seq.min(hb[nk.stream as usize]) {
                    flight.push((t + 10 * US, 0, frame(nk.stream, fs, FLAG_RETRANSMIT)));
                }
            }
            o.repairs.clear();
            let c = rx.contiguous();
            if c[0] > n && c[1] > n {
                break;
            }
        }
        let c = rx.contiguous();
        prop_assert!(c[0] > n && c[1] > n, "{:?} of {}", c, n);
        for st in 0..2u8 {
            let seqs: Vec<u64> = o.delivered.iter().filter(|d| d.0 == st).map(|d| d.1).collect();
            prop_assert_eq!(seqs, (1..=c[st as usize]).collect::<Vec<_>>());
        }
    }

    /// Random bytes never panic the loop and are never delivered.
    #[test]
    fn garbage_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..300), path in 0u8..4) {
        let mut rx = OrderRx::new(cfg(2));
        let mut o = Out::default();
        let _ = rx.on_frame(path, &bytes, 1, &mut o);
        rx.tick(1_000_000, &mut o);
        prop_assert!(o.delivered.len() <= 1);
    }
}

/// A restarted replica's hole of thousands of frames is asked for NACK_WINDOW frames at a time,
/// and the next window as soon as the last frame of the one before arrives — not after the
/// retry backoff (a whole-range NACK was served up to the box's burst, then re-asked 100 ms
/// later: slower than the live stream, measured in docs/operator.md).
#[test]
fn a_long_hole_is_asked_window_by_window_as_each_arrives() {
    use vyrn_replica::front::order_rx::{nack_window, NACK_WINDOW, REPAIR_CHANNEL};
    // The sequencer alone (no peer to stripe windows across).
    let mut rx = OrderRx::new(cfg(0));
    let mut o = Out::default();
    let last = 3 * NACK_WINDOW + 10; // frames 2 ..= last - 1 lost
    rx.on_frame(0, &frame(0, 1, 0), 0, &mut o);
    rx.on_frame(0, &frame(0, last, 0), US, &mut o);
    let mut now = 10 * US;
    rx.tick(now, &mut o);
    assert_eq!(o.nacks.len(), 1);
    let n = o.nacks[0];
    assert_eq!((n.from_seq, n.to_seq), (2, 1 + NACK_WINDOW), "one window");
    assert_eq!(nack_window(2, last - 1), (2, 1 + NACK_WINDOW));
    assert_eq!(nack_window(2, 5), (2, 5));
    // The window arrives, retransmitted on the control port (REPAIR_CHANNEL): the next window
    // is asked at the very next tick, long before REP_NACK_RETRY_US.
    let mut from = 2;
    for w in 1..=3u64 {
        let to = (from + NACK_WINDOW - 1).min(last - 1);
        for fs in from..=to {
            rx.on_frame(REPAIR_CHANNEL, &frame(0, fs, FLAG_RETRANSMIT), now, &mut o);
        }
        now += US;
        rx.tick(now, &mut o);
        from = to + 1;
        if from == last {
            break;
        }
        assert_eq!(
            o.nacks.len() as u64,
            w + 1,
            "window {} asked at once",
            w + 1
        );
        let n = o.nacks.last().unwrap();
        assert_eq!(
            (n.from_seq, n.to_seq),
            (from, (from + NACK_WINDOW - 1).min(last - 1))
        );
    }
    // The last, short window: the hole is closed and all delivered in order.
    let to = last - 1;
    for fs in from..=to {
        rx.on_frame(REPAIR_CHANNEL, &frame(0, fs, FLAG_RETRANSMIT), now, &mut o);
    }
    assert!(rx.holes(0).is_empty());
    let got: Vec<u64> = o.delivered.iter().map(|d| d.1).collect();
    assert_eq!(got, (1..=last).collect::<Vec<_>>());
    assert!(
        o.repairs.is_empty(),
        "the sequencer served every window in time"
    );
    // Repairs on the control port show no path alive and count no path's copy.
    let c = rx.counters();
    assert_eq!(c.repaired, last - 2);
    assert_eq!(c.first, [2, 0]);
    assert_eq!(
        rx.on_frame(REPAIR_CHANNEL, &frame(0, 5, FLAG_RETRANSMIT), now, &mut o),
        RxVerdict::Duplicate
    );
    assert_eq!(rx.counters().repair_dups, 1);
    assert_eq!(rx.counters().dups, [0, 0]);
}

/// A window whose last frame is lost is asked again after the retry wait, from the first
/// frame still missing, and the rest of the hole is not asked before that.
#[test]
fn a_window_missing_its_last_frame_waits_for_the_retry() {
    use vyrn_replica::front::order_rx::NACK_WINDOW;
    let mut rx = OrderRx::new(cfg(0));
    let mut o = Out::default();
    let last = 2 * NACK_WINDOW + 2;
    rx.on_frame(0, &frame(0, 1, 0), 0, &mut o);
    rx.on_frame(0, &frame(0, last, 0), US, &mut o);
    rx.tick(10 * US, &mut o);
    assert_eq!(o.nacks.len(), 1);
    let end = 1 + NACK_WINDOW;
    for fs in 2..end {
        rx.on_frame(0, &frame(0, fs, FLAG_RETRANSMIT), 12 * US, &mut o);
    }
    rx.tick(13 * US, &mut o);
    assert_eq!(o.nacks.len(), 1, "the window's last frame has not arrived");
    rx.tick(70 * US, &mut o);
    assert_eq!(o.nacks.len(), 2, "past REP_NACK_RETRY_US");
    let n = o.nacks[1];
    assert_eq!((n.from_seq, n.to_seq), (end, end + NACK_WINDOW - 1));
}

/// B-REP-3 (07 §15): the path skew is the time from a frame's first path copy to the other
/// path's, over the frames both paths brought; a frame one path alone brought, or a repair,
/// measures nothing.
#[test]
fn path_skew_is_measured_between_the_two_copies_of_a_frame() {
    use vyrn_replica::front::order_rx::REPAIR_CHANNEL;
    let mut rx = OrderRx::new(cfg(0));
    let mut o = Out::default();
    assert_eq!(rx.path_skew().frames, 0);
    for fs in 1..=100u64 {
        let t = fs * 100 * US;
        // A first by 3 µs on even frames, B first by 1 µs on odd ones.
        if fs % 2 == 0 {
            rx.on_frame(0, &frame(0, fs, 0), t, &mut o);
            rx.on_frame(1, &frame(0, fs, FLAG_PATH_B), t + 3 * US, &mut o);
        } else {
            rx.on_frame(1, &frame(0, fs, FLAG_PATH_B), t, &mut o);
            rx.on_frame(0, &frame(0, fs, 0), t + US, &mut o);
        }
    }
    // Path A alone, then a repair on the control port: not measured.
    rx.on_frame(0, &frame(0, 101, 0), 20 * MS, &mut o);
    rx.on_frame(
        REPAIR_CHANNEL,
        &frame(0, 101, FLAG_RETRANSMIT),
        20 * MS + US,
        &mut o,
    );
    let s = rx.path_skew();
    assert_eq!(s.frames, 100);
    assert!((990..=1010).contains(&s.p50), "{s:?}");
    assert!((2990..=3010).contains(&s.p99), "{s:?}");
    assert!((2990..=3010).contains(&s.max), "{s:?}");
}

/// Repair time (07 §4.10), hole to filled, per missing frame: timed from the moment a later
/// frame shows it missing to its arrival, split by what filled it — a path (the other path's
/// copy, a reordered one) or a repair (the sequencer's retransmission on the control port) —
/// and not for frames that were never missing.
#[test]
fn hole_to_filled_is_timed_per_frame_and_split_by_what_filled_it() {
    use vyrn_replica::front::order_rx::REPAIR_CHANNEL;
    let mut rx = OrderRx::new(cfg(0));
    let mut o = Out::default();
    assert_eq!(rx.hole_fill().by_path.frames, 0);
    rx.on_frame(0, &frame(0, 1, 0), MS, &mut o);
    // Frame 4 arrives on A at 2 ms: 2 and 3 are missing from then.
    rx.on_frame(0, &frame(0, 4, 0), 2 * MS, &mut o);
    // B brings 2 at 2 ms + 40 µs (filled by a path).
    rx.on_frame(1, &frame(0, 2, FLAG_PATH_B), 2 * MS + 40 * US, &mut o);
    // 3 comes back as a retransmission on the control port at 2 ms + 400 µs (a repair).
    rx.on_frame(
        REPAIR_CHANNEL,
        &frame(0, 3, FLAG_RETRANSMIT),
        2 * MS + 400 * US,
        &mut o,
    );
    // Late copies of frames already held or delivered are not timed again.
    rx.on_frame(1, &frame(0, 4, FLAG_PATH_B), 3 * MS, &mut o);
    rx.on_frame(1, &frame(0, 3, FLAG_PATH_B), 3 * MS, &mut o);
    assert_eq!(o.delivered.len(), 4);
    let f = rx.hole_fill();
    assert_eq!((f.by_path.frames, f.by_repair.frames), (1, 1), "{f:?}");
    assert!((39_500..=40_500).contains(&f.by_path.p50), "{f:?}");
    assert!((398_000..=402_000).contains(&f.by_repair.max), "{f:?}");
    // A hole asked window by window keeps its first time: a frame of the second window is
    // timed from when the hole was seen, not from when its window was asked.
    let mut rx = OrderRx::new(cfg(0));
    let mut o = Out::default();
    rx.on_frame(0, &frame(1, 1, 0), MS, &mut o);
    rx.on_frame(0, &frame(1, 600, 0), 2 * MS, &mut o);
    for fs in 2..600u64 {
        rx.on_frame(
            REPAIR_CHANNEL,
            &frame(1, fs, FLAG_RETRANSMIT),
            2 * MS + fs * US,
            &mut o,
        );
    }
    let f = rx.hole_fill();
    assert_eq!(f.by_repair.frames, 598);
    assert!(f.by_repair.max >= 595 * US, "{f:?}");
}

/// A restarted replica's own order journal holds frames 1..=40 (07 §4.10): the hole up to the
/// live stream is asked only above them — the downtime, at once — and, once the local feed
/// ends, anything still missing is asked as usual.
#[test]
fn a_hole_the_own_journal_covers_is_asked_only_above_it() {
    use vyrn_replica::front::order_rx::REPAIR_CHANNEL;
    let mut rx = OrderRx::new(cfg(2));
    let mut o = Out::default();
    rx.expect_local(0, Some((1, 40)));
    // Live frames start at 60: the hole 1..=59.
    rx.on_frame(0, &frame(0, 60, 0), 0, &mut o);
    rx.tick(10 * US, &mut o);
    assert_eq!(o.nacks.len(), 1);
    assert_eq!((o.nacks[0].from_seq, o.nacks[0].to_seq), (41, 59));
    // The feed delivers 1..=40 (as repairs): the hole is 41..=59, asked again on its retry.
    for fs in 1..=40 {
        rx.on_frame(REPAIR_CHANNEL, &frame(0, fs, 0), 20 * US, &mut o);
    }
    rx.tick(200 * US, &mut o);
    assert!(o.nacks.iter().all(|n| n.from_seq >= 41), "{:?}", o.nacks);
    // A feed that stopped short (the journal held less than it said): once it is over, the rest
    // is asked from the bottom of the hole.
    let mut rx = OrderRx::new(cfg(2));
    let mut o = Out::default();
    rx.expect_local(0, Some((1, 40)));
    rx.on_frame(0, &frame(0, 60, 0), 0, &mut o);
    for fs in 1..=10 {
        rx.on_frame(REPAIR_CHANNEL, &frame(0, fs, 0), US, &mut o);
    }
    rx.expect_local(0, None);
    rx.tick(10 * US, &mut o);
    assert_eq!(o.nacks.last().map(|n| n.from_seq), Some(11));
}

/// Security review F11: frames injected ahead of a hole are held up to a byte bound per
/// substream, not only a count (65,536 full frames on two substreams pinned ~1.2 GB): past it
/// they are refused (`HeldFull`), the hole's repair delivers what was held, and the bytes held
/// go back to zero.
#[test]
fn frames_held_behind_a_hole_are_bounded_in_bytes() {
    let mut rx = OrderRx::new(cfg(0));
    rx.set_held_bytes_max(1 << 16);
    let mut o = Out::default();
    let f1 = frame(0, 1, 0);
    let per = frame(0, 2, 0).len();
    // Frame 1 is the hole; frames 2.. wait behind it until the byte bound.
    let fit = (1 << 16) / per;
    let mut refused = 0;
    for fs in 2..2 + fit as u64 + 50 {
        match rx.on_frame(0, &frame(0, fs, 0), 0, &mut o) {
            RxVerdict::Held => {}
            RxVerdict::Refused(Refused::HeldFull) => refused += 1,
            v => panic!("frame {fs}: {v:?}"),
        }
    }
    assert_eq!(refused, 50);
    assert!(rx.held_bytes(0) <= 1 << 16);
    assert_eq!(rx.held_bytes(0), fit * per);
    // The hole fills: everything held is delivered, nothing stays pinned.
    assert!(matches!(
        rx.on_frame(1, &f1, 1, &mut o),
        RxVerdict::Delivered(n) if n as usize == 1 + fit
    ));
    assert_eq!(rx.held_bytes(0), 0);
}

/// Security review F2: a repair is taken only for a hole this replica has, and it is
/// peer-repaired by the channel it came on, never by the sender's flags byte. A forged "repair"
/// of the box's next frame, sent ahead of it, is refused, and the box's own frame then arrives
/// as new; a path frame that claims `peer_repaired` is the box's.
#[test]
fn a_repair_is_taken_only_for_a_hole_and_is_a_peers_by_its_channel() {
    use vyrn_replica::front::order_rx::{PEER_CHANNEL, REPAIR_CHANNEL};
    let peer = vyrn_wire::frame::FLAG_PEER_REPAIRED;
    let mut rx = OrderRx::new(cfg(1));
    let mut o = Out::default();
    rx.on_frame(0, &frame(0, 1, 0), 0, &mut o);
    // Frames 2 and 3 "repaired" before anyone missed them: unsolicited, on either channel.
    for (ch, fs) in [(PEER_CHANNEL, 2), (REPAIR_CHANNEL, 3)] {
        assert_eq!(
            rx.on_frame(ch, &frame(0, fs, peer), 10, &mut o),
            RxVerdict::Refused(Refused::Unsolicited)
        );
    }
    assert_eq!(rx.counters().refused[6], 2);
    // The box's frames 2 and 3 arrive as new; 3 on path A claims peer_repaired: not a peer's.
    assert_eq!(
        rx.on_frame(0, &frame(0, 2, 0), 20, &mut o),
        RxVerdict::Delivered(1)
    );
    assert_eq!(
        rx.on_frame(1, &frame(0, 3, peer), 21, &mut o),
        RxVerdict::Delivered(1)
    );
    let got: Vec<(u64, bool)> = o.delivered.iter().map(|d| (d.1, d.2)).collect();
    assert_eq!(got, vec![(1, false), (2, false), (3, false)]);
    // A real hole (5 seen, 4 missing): a peer's copy of 4 is taken, as a peer's.
    rx.on_frame(0, &frame(0, 5, 0), 30, &mut o);
    assert_eq!(
        rx.on_frame(PEER_CHANNEL, &frame(0, 4, 0), 40, &mut o),
        RxVerdict::Delivered(2)
    );
    assert_eq!(o.delivered[3], (0, 4, true));
    // Far ahead of everything, on the repair channel: unsolicited, nothing held.
    assert_eq!(
        rx.on_frame(REPAIR_CHANNEL, &frame(0, 1_000, 0), 50, &mut o),
        RxVerdict::Refused(Refused::Unsolicited)
    );
    assert!(rx.holes(0).is_empty());
}

/// 07 §9.3: the TailReport of a tail with holes — F_i is the contiguous prefix, `extra` the runs
/// held above it, `direct` 1 for what a path brought and 0 for a repair, and the report is
/// signed and well-formed.
#[test]
fn the_tail_report_says_what_is_held_and_how_it_came() {
    use vyrn_replica::front::failover::report::{tail_report, ReportInput};
    use vyrn_wire::msg::ctrl::FrameRange;
    let mut rx = OrderRx::new(cfg(1));
    let mut o = Out::default();
    // Substream 0: 1..=5 by path A, 6 missing, 7..=8 held, 9 missing, 10 held.
    for fs in [1, 2, 3, 4, 5, 7, 8, 10] {
        let _ = rx.on_frame(0, &frame(0, fs, 0), fs * US, &mut o);
    }
    // Substream 1: 1, 2 and 4 by path B, 3 (a hole) repaired by a peer.
    for fs in [1, 2, 4] {
        let _ = rx.on_frame(1, &frame(1, fs, FLAG_PATH_B), 20 * US, &mut o);
    }
    let _ = rx.on_frame(
        vyrn_replica::front::order_rx::PEER_CHANNEL,
        &frame(1, 3, vyrn_wire::frame::FLAG_PEER_REPAIRED),
        30 * US,
        &mut o,
    );
    let key = ed25519_dalek::SigningKey::from_bytes(&[9; 32]);
    let inp = ReportInput {
        epoch: 7,
        tenure: 2,
        reporter: 1,
        h_i: 4,
        marks: [2, 0],
        replay_lag_us: 12,
        promotable: false,
    };
    let r = tail_report(&rx, &inp, &key);
    assert_eq!(r.f_i, [5, 4]);
    assert_eq!(
        r.extra[0],
        vec![FrameRange { a: 7, b: 8 }, FrameRange { a: 10, b: 10 }]
    );
    assert!(r.extra[1].is_empty());
    // Substream 0: frames 3, 4, 5, 7, 8, 10 — all by path A.
    assert_eq!(r.direct[0], vec![0b0011_1111]);
    // Substream 1: frames 1, 2, 4 by path B, 3 by a peer.
    assert_eq!(r.direct[1], vec![0b0000_1011]);
    assert_eq!(r.t_last_rx, 30 * US);
    assert!(r.verify(&key.verifying_key()));
    // It survives the wire.
    let m = vyrn_wire::msg::ctrl::CtrlMsg::TailReport(Box::new(r.clone()));
    let mut b = Vec::new();
    m.encode(&mut b).unwrap();
    assert_eq!(
        vyrn_wire::msg::ctrl::CtrlMsg::parse(&b),
        Ok(vyrn_wire::msg::ctrl::CtrlMsg::TailReport(Box::new(r)))
    );
}

/// 07 §9.1–§9.2: a frozen tail buffers what still arrives and takes it all at an abort; a
/// deposed tenure takes nothing more (INV-REP-5) and asks nothing of anyone.
#[test]
fn a_frozen_tail_buffers_and_a_deposed_tenure_takes_nothing() {
    let mut rx = OrderRx::new(cfg(1));
    let mut o = Out::default();
    for fs in 1..=3 {
        let _ = rx.on_frame(0, &frame(0, fs, 0), fs * US, &mut o);
    }
    assert_eq!(o.delivered.len(), 3);
    rx.freeze();
    assert!(rx.is_frozen());
    for fs in [4, 6, 5] {
        assert_eq!(
            rx.on_frame(0, &frame(0, fs, 0), 10 * US, &mut o),
            RxVerdict::Held
        );
    }
    assert_eq!(o.delivered.len(), 3, "nothing taken while frozen");
    assert_eq!(rx.contiguous(), [3, 0]);
    rx.unfreeze(&mut o);
    assert!(!rx.is_frozen());
    assert_eq!(rx.contiguous(), [6, 0]);
    assert_eq!(
        o.delivered.iter().map(|d| d.1).collect::<Vec<_>>(),
        vec![1, 2, 3, 4, 5, 6]
    );
    assert_eq!(rx.counters().frozen, (3, 3));
    // Deposed: every frame of the tenure refused, the buffer of a freeze dropped, and no NACK,
    // repair request or RepAck for the hole that stays.
    rx.freeze();
    let _ = rx.on_frame(0, &frame(0, 8, 0), 20 * US, &mut o);
    rx.depose();
    assert!(rx.is_deposed() && !rx.is_frozen());
    assert_eq!(
        rx.on_frame(0, &frame(0, 7, 0), 21 * US, &mut o),
        RxVerdict::Refused(Refused::Deposed)
    );
    assert_eq!(
        rx.on_frame(1, &frame(1, 1, FLAG_PATH_B), 21 * US, &mut o),
        RxVerdict::Refused(Refused::Deposed)
    );
    let (nacks, acks) = (o.nacks.len(), o.acks.len());
    rx.tick(100 * MS, &mut o);
    assert_eq!(
        (o.nacks.len(), o.acks.len(), o.repairs.len()),
        (nacks, acks, 0)
    );
    rx.unfreeze(&mut o);
    assert!(rx.is_deposed(), "an abort cannot undo a deposition");
    assert_eq!(rx.contiguous(), [6, 0]);
    assert_eq!(rx.counters().refused[7], 2);
}

/// The retry timer follows the measured repair round trip (RFC 6298's smoothing, each window
/// timed from its latest request): a source that answers every request 2 ms late — far past
/// REP_NACK_RETRY_US, as on a loaded box — is asked for about two windows per window it
/// serves; the fixed 50 µs retry asked each window eleven times (220 requests here, measured
/// with the timer pinned to REP_NACK_RETRY_US), and serving the duplicates loads every peer.
#[test]
fn retries_wait_for_the_measured_repair_round_trip() {
    use vyrn_replica::front::order_rx::{NACK_WINDOW, REPAIR_CHANNEL};
    let mut rx = OrderRx::new(cfg(3));
    let mut o = Out::default();
    let windows = 20;
    let last = windows * NACK_WINDOW + 2;
    rx.on_frame(0, &frame(0, 1, 0), 0, &mut o);
    rx.on_frame(0, &frame(0, last, 0), US, &mut o);
    let rtt = 2 * MS;
    // 07 §7.6's striping: the first request asks a window of each source — the sequencer the
    // first, each of the three peers the next three.
    rx.tick(10 * US, &mut o);
    assert_eq!(o.nacks.len(), 1);
    assert_eq!(
        (o.nacks[0].from_seq, o.nacks[0].to_seq),
        (2, 1 + NACK_WINDOW)
    );
    let mut peers: Vec<usize> = o.repairs.iter().map(|r| r.0).collect();
    peers.sort();
    assert_eq!(peers, vec![0, 1, 2]);
    for (j, (_, r)) in o.repairs.iter().enumerate() {
        let from = 2 + (j as u64 + 1) * NACK_WINDOW;
        assert_eq!((r.from_seq, r.to_seq), (from, from + NACK_WINDOW - 1));
    }
    // (due, from, to): each request's answer, whoever it went to.
    let mut answers: Vec<(u64, u64, u64)> = Vec::new();
    let mut asked = 0u64;
    let mut now = 10 * US;
    while !rx.holes(0).is_empty() && now < 10_000 * MS {
        rx.tick(now, &mut o);
        for n in o.nacks.drain(..) {
            answers.push((now + rtt, n.from_seq, n.to_seq));
            asked += 1;
        }
        for (_, r) in o.repairs.drain(..) {
            answers.push((now + rtt, r.from_seq, r.to_seq));
            asked += 1;
        }
        answers.sort_by_key(|a| a.0);
        while answers.first().is_some_and(|a| a.0 <= now) {
            let (_, from, to) = answers.remove(0);
            for fs in from..=to.min(last - 1) {
                rx.on_frame(REPAIR_CHANNEL, &frame(0, fs, FLAG_RETRANSMIT), now, &mut o);
            }
        }
        now += 50 * US;
    }
    assert!(rx.holes(0).is_empty(), "the hole was never filled");
    let got: Vec<u64> = o.delivered.iter().map(|d| d.1).collect();
    assert_eq!(got, (1..=last).collect::<Vec<_>>());
    let m = rx.repair_rtt();
    // Timed from the latest request, a sample may be short of the round trip, never past it.
    assert!(
        m.srtt_ns() >= rtt / 8 && m.srtt_ns() <= rtt,
        "srtt {} ns",
        m.srtt_ns()
    );
    assert!(
        asked <= windows * 5 / 2,
        "{asked} requests for {windows} windows"
    );
    assert!(
        rx.counters().repair_dups <= windows * NACK_WINDOW,
        "{} duplicates",
        rx.counters().repair_dups
    );
}
