//! B-REP-2 as a test (07 §15): a long seeded run of the box with every write logged, four voter
//! doubles receiving each frame over two lossy paths (independent loss; both copies lost is a
//! hole), NACKing holes and the stream cores retransmitting from their frame rings — zero
//! violations of INV-REP-1/-2/-11 in the write log, every voter ends with every frame, every
//! header checked, durable and final advancing. And NackTooOld from a small ring.

use vyrn_engine::workload::{Input, Mix, Workload};
use vyrn_engine::EngineConfig;
use vyrn_seq::testkit::check::Checker;
use vyrn_seq::testkit::{SimBox, Tile, VoterDouble, WireEvent};
use vyrn_seq::SeqConfig;
use vyrn_wire::corpus::Rng;

fn config(e: &EngineConfig, rtx: usize) -> SeqConfig {
    SeqConfig {
        engine: e.clone(),
        epoch: 2,
        block_ns: 20_000,
        seq_key: [4; 32],
        voters: 4,
        rtx_ring_bytes: rtx,
        tenure: vyrn_seq::shm::TenureId::FIRST,
    }
}

#[test]
fn b_rep_2_no_violation_with_loss_on_both_paths() {
    for seed in 0..6u64 {
        let e = EngineConfig::test_home(4, 4);
        let mut home = SimBox::new(config(&e, 8 << 20));
        let mut voters: Vec<VoterDouble> = (0..4)
            .map(|_| VoterDouble::new(e.layout, home.seq_public()))
            .collect();
        let mut w = Workload::new(&e, seed, Mix::everything());
        let mut rng = Rng::new(seed ^ 0xB2);
        let mut chk = Checker::default();
        let tiles = home.tiles();
        let mut now = 0;
        let (mut nacks, mut resent) = (0u64, 0u64);
        let loss = 60; // permille per path, independently
        let deliver = |voters: &mut [VoterDouble], rng: &mut Rng, bytes: &[u8], now: u64| {
            for v in voters.iter_mut() {
                for _path in 0..2 {
                    if rng.below(1000) >= loss {
                        v.on_frame(bytes, now);
                    }
                }
            }
        };
        for round in 0..6000u64 {
            if round < 4000 {
                if let Input::Packet { rx_ts, bytes } = w.next_input() {
                    home.receive(rx_ts, bytes);
                }
                now = now.max(w.now());
            } else {
                now += 1_000;
            }
            for &t in &tiles {
                home.poll(t, now);
            }
            chk.check(&home)
                .unwrap_or_else(|e| panic!("seed {seed} round {round}: {e}"));
            let frames: Vec<Vec<u8>> = home
                .drain_wire()
                .into_iter()
                .filter_map(|ev| match ev {
                    WireEvent::Frame { bytes, path: 0, .. } => Some(bytes),
                    _ => None,
                })
                .collect();
            chk.rewind();
            for f in &frames {
                deliver(&mut voters, &mut rng, f, now);
            }
            // Holes: NACK them (each voter; the box serves each).
            for v in voters.iter() {
                for (s, from, to) in v.holes() {
                    nacks += 1;
                    resent += home.on_nack(s, from, to, now).resent;
                }
            }
            for (i, v) in voters.iter_mut().enumerate() {
                if let Some(a) = v.ack() {
                    home.on_ack(i, a, now);
                }
                for h in v.take_votes() {
                    home.on_vote(i, h);
                }
            }
        }
        assert!(
            nacks > 0 && resent > 0,
            "seed {seed}: loss never forced a repair"
        );
        for (i, v) in voters.iter().enumerate() {
            assert_eq!(v.faults(), (0, 0), "seed {seed} voter {i}");
            assert!(
                v.holes().is_empty(),
                "seed {seed} voter {i}: holes left {:?}",
                v.holes()
            );
        }
        let c0 = voters[0].contiguous();
        assert!(voters.iter().all(|v| v.contiguous() == c0));
        let (durable, fin, cc) = home.watermarks();
        assert!(
            durable > 0 && fin > 0,
            "seed {seed}: durable {durable}, final {fin}"
        );
        assert!(
            fin + 8 >= home.closed_height(),
            "seed {seed}: final {fin} of {}",
            home.closed_height()
        );
        assert_eq!(cc.gate_halts, cc.gate_resumes, "seed {seed}");
        assert!(!home.words().fenced(), "seed {seed}");
    }
}

#[test]
fn nack_too_old_past_the_ring() {
    let e = EngineConfig::test_home(2, 2);
    let mut home = SimBox::new(config(&e, 4096));
    let mut w = Workload::new(&e, 3, Mix::clean());
    let tiles = home.tiles();
    let mut now = 0;
    for _ in 0..2000 {
        if let Input::Packet { rx_ts, bytes } = w.next_input() {
            home.receive(rx_ts, bytes);
        }
        now = w.now();
        for &t in &tiles {
            home.poll(t, now);
        }
        home.drain_wire();
    }
    let out = home.on_nack(0, 1, 3, now);
    let oldest = out.too_old.expect("frame 1 left a 4 KiB ring long ago");
    assert!(oldest > 3);
    assert_eq!(out.resent, 0);
    // A range inside the ring is resent, with flags.retransmit.
    let out = home.on_nack(0, oldest, oldest + 1, now);
    assert_eq!(out.resent, 2);
    // The same poll may also write a HASH frame held back from a releasing poll:
    // the retransmits are the frames flagged so, exactly the two asked for.
    let frames: Vec<Vec<u8>> = home
        .drain_wire()
        .into_iter()
        .filter_map(|ev| match ev {
            WireEvent::Frame { bytes, path: 0, .. } => Some(bytes),
            _ => None,
        })
        .filter(|f| f[vyrn_wire::frame::FLAGS_OFFSET] & vyrn_wire::frame::FLAG_RETRANSMIT != 0)
        .collect();
    assert_eq!(frames.len(), 2);
}

/// A stream core that falls behind finds more records in `R_pkt` than one frame holds: it
/// flushes in the middle of the run, and the HASH frame that follows must name only records
/// already in written frames (found by the threaded box; HashLag at the replica before the fix).
#[test]
fn hashes_of_a_run_split_across_frames_follow_their_records() {
    let e = EngineConfig::test_home(2, 2);
    let mut home = SimBox::new(config(&e, 8 << 20));
    let mut voter = VoterDouble::new(e.layout, home.seq_public());
    let mut w = Workload::new(&e, 11, Mix::clean());
    let mut n = 0;
    while n < 300 {
        if let Input::Packet { rx_ts, bytes } = w.next_input() {
            home.receive(rx_ts, bytes);
            n += 1;
        }
    }
    let now = w.now();
    // The lanes log everything (records and hashes) before the stream cores run at all.
    for _ in 0..400 {
        home.poll(Tile::Lane(0), now);
        home.poll(Tile::Lane(1), now);
    }
    // The stream cores run before the cut and the BBO core: no step flushes the open frame.
    home.poll(Tile::Stream(0), now);
    home.poll(Tile::Stream(1), now);
    home.settle(now, 1000);
    let mut frames = 0;
    for ev in home.drain_wire() {
        if let WireEvent::Frame { bytes, .. } = ev {
            voter.on_frame(&bytes, now);
            frames += 1;
        }
    }
    assert!(frames > 4, "the run did not span frames ({frames})");
    assert_eq!(voter.faults(), (0, 0));
    assert!(voter.decoder_counters().hashes > 0);
}

/// Security review F5: a NACK for `1..=u64::MAX` (the codec refuses it on the wire; the stream
/// core bounds it again) sends at most NACK_SPAN_MAX frames, and with the burst spent it walks
/// nothing: the range is capped at once.
#[test]
fn a_nack_for_every_frame_is_bounded_by_its_span_and_the_tokens() {
    use vyrn_wire::consts::NACK_SPAN_MAX;
    let e = EngineConfig::test_home(2, 2);
    let mut home = SimBox::new(config(&e, 8 << 20));
    let mut w = Workload::new(&e, 5, Mix::clean());
    let tiles = home.tiles();
    let mut now = 0;
    for _ in 0..6000 {
        if let Input::Packet { rx_ts, bytes } = w.next_input() {
            home.receive(rx_ts, bytes);
        }
        now = w.now();
        for &t in &tiles {
            home.poll(t, now);
        }
        home.drain_wire();
    }
    let out = home.on_nack(0, 1, u64::MAX, now);
    assert_eq!(out.too_old, None);
    // Resent or capped, exactly a span: the ring holds more frames than one span.
    assert_eq!(out.resent + out.capped, NACK_SPAN_MAX, "{out:?}");
    assert!(out.resent > 0);
    // The burst is spent: the next one sends nothing and caps its span, no more.
    let out = home.on_nack(0, 1, u64::MAX, now);
    assert_eq!(out.resent, 0);
    assert!(out.capped <= NACK_SPAN_MAX, "{out:?}");
}
