//! Batching without added latency: a lane takes every queued packet in one poll, the
//! BBO core runs every ready step in one poll (both bounded), and the stream core coalesces the
//! burst into few frames — under the seeded scheduler on the production tiles, the gate checked.

use vyrn_engine::workload::{Input, Mix, Workload};
use vyrn_engine::EngineConfig;
use vyrn_seq::testkit::check::Checker;
use vyrn_seq::testkit::{SimBox, Tile, WireEvent};
use vyrn_seq::tiles::{BBO_STEPS_PER_POLL, LANE_BATCH};
use vyrn_seq::SeqConfig;

#[test]
fn a_burst_is_taken_in_one_poll_per_tile_and_coalesced() {
    let e = EngineConfig::test_home(2, 2);
    let mut home = SimBox::new(SeqConfig {
        engine: e.clone(),
        epoch: 1,
        block_ns: 1_000_000_000,
        seq_key: [3; 32],
        voters: 4,
        rtx_ring_bytes: 1 << 20,
        tenure: vyrn_seq::shm::TenureId::FIRST,
    });
    let mut w = Workload::new(&e, 11, Mix::clean());
    // A burst: 40 packets queued at once, all of lane 0's sessions and lane 1's.
    let mut queued = [0usize; 2];
    let mut now = 0;
    while queued.iter().sum::<usize>() < 40 {
        if let Input::Packet { rx_ts, bytes } = w.next_input() {
            let session = u32::from_le_bytes([bytes[4], bytes[5], bytes[6], bytes[7]]);
            let lane = e
                .sessions
                .iter()
                .find(|s| s.session == session)
                .map_or(0, |s| s.lane);
            if home.receive(rx_ts, bytes) {
                queued[lane as usize] += 1;
            }
        }
        now = w.now();
    }
    assert!(queued[0] > 1 && queued[1] > 1, "{queued:?}");
    assert!(queued[0] <= LANE_BATCH && queued[1] <= LANE_BATCH);
    // Nothing was polled yet: the log holds nothing; keep it whole for the checker.
    // One poll of each lane takes its whole queue.
    for l in 0..2u8 {
        home.poll(Tile::Lane(l), now);
    }
    assert_eq!(
        home.rx_backlog(),
        0,
        "each lane took its whole queue in one poll"
    );
    // The cut, then one BBO poll runs every ready step.
    home.poll(Tile::Cut, now);
    home.poll(Tile::Bbo, now);
    let steps = home.words().step_done();
    assert!(
        steps >= 20 && steps as usize <= BBO_STEPS_PER_POLL,
        "one BBO poll ran {steps} steps"
    );
    // Both stream cores: the burst's steps in few ORDER frames (the 160-byte body cap splits
    // them; one per step would be ≥ 20).
    let before = home.log().len();
    home.poll(Tile::Stream(0), now);
    home.poll(Tile::Stream(1), now);
    let frames = home.log()[before..]
        .iter()
        .filter(|ev| matches!(ev, WireEvent::Frame { path: 0, .. }))
        .count();
    assert!(
        frames >= 1 && frames < steps as usize / 2,
        "{frames} frames for {steps} steps"
    );
    // Everything answered, and the gate held throughout (INV-REP-1/-2/-11).
    let mut chk = Checker::default();
    for _ in 0..50 {
        for t in home.tiles() {
            home.poll(t, now);
            chk.check(&home).unwrap_or_else(|e| panic!("{e}"));
        }
    }
    let resps = home
        .log()
        .iter()
        .filter(|ev| matches!(ev, WireEvent::Resp { .. }))
        .count();
    assert!(resps >= 40, "{resps} responses");
}

/// The recorded runs the replica's bench replays: a box polled once per 16 packets (a loaded
/// box) writes the same packets in far fewer, fuller frames than one polled after every
/// packet (the bench's 8,000-packet run: ~6 packets a frame, HASH and HEADER frames counted;
/// 07 §3.13's peak has ~8 per ORDER frame).
#[test]
fn a_batched_capture_fills_its_frames() {
    use vyrn_seq::testkit::capture::{capture, capture_batched};
    let e = EngineConfig::test_home(4, 8);
    let light = capture(&e, 3, 1_000_000, 5, Mix::peak(), 400);
    let loaded = capture_batched(&e, 3, 1_000_000, 5, Mix::peak(), 400, 16);
    assert_eq!(light.packets, loaded.packets);
    assert_eq!(light.data, loaded.data);
    assert_eq!(loaded.msgs, 4_000, "every packet full");
    println!(
        "frames: polled per packet {}, per 16 packets {}",
        light.frames.len(),
        loaded.frames.len()
    );
    assert!(loaded.frames.len() * 3 < light.frames.len());
    // Fewer frames than packets, with a short run's idle tail (heartbeats, the last headers).
    assert!(loaded.frames.len() < 250, "{} frames", loaded.frames.len());
}
