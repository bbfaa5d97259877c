//! Replay lag in time, receipt to applied (07 §7.3, budget ≤ 2 ms steady state), as the core
//! measures it: every step is timed from the decoding of the frame that completed it to the
//! tick whose replay applied it.

use vyrn_engine::home::EngineSink;
use vyrn_engine::workload::{Input, Mix, Workload};
use vyrn_engine::EngineConfig;
use vyrn_replica::core::{CoreConfig, ReplicaCore, ReplicaOut};
use vyrn_replica::verdict::Anchor;
use vyrn_seq::testkit::{SimBox, WireEvent};
use vyrn_seq::SeqConfig;
use vyrn_wire::msg::data::{DataFrameBuilder, DataKind};

struct Quiet;
impl ReplicaOut for Quiet {}

#[derive(Default)]
struct Count(u64);
impl EngineSink for Count {
    fn respond(&mut self, _r: &vyrn_engine::resp::RespOut<'_>) {
        self.0 += 1;
    }
}

const EPOCH: u32 = 5;

/// The real box (production tiles, seeded) on `n` clean-mix packets: its path-A frames and copy
/// 2 of every packet in DATA frames.
fn capture(
    e: &EngineConfig,
    n: usize,
) -> (ed25519_dalek::VerifyingKey, Vec<Vec<u8>>, Vec<Vec<u8>>) {
    let mut home = SimBox::new(SeqConfig {
        engine: e.clone(),
        epoch: EPOCH,
        block_ns: 100_000,
        seq_key: [9; 32],
        voters: 4,
        rtx_ring_bytes: 8 << 20,
    });
    let mut w = Workload::new(e, 11, Mix::clean());
    let tiles = home.tiles();
    let (mut frames, mut data) = (Vec::new(), Vec::new());
    let (mut now, mut data_seq) = (0u64, 0u64);
    for i in 0..n + 2000 {
        if i < n {
            if let Input::Packet { rx_ts, bytes } = w.next_input() {
                data_seq += 1;
                let mut b =
                    DataFrameBuilder::new(DataKind::Data, e.book, EPOCH as u16, data_seq, 0);
                let _ = b.push(&bytes);
                data.push(b.as_bytes().to_vec());
                home.receive(rx_ts, bytes);
            }
            now = now.max(w.now());
        } else {
            now += 1_000;
        }
        for &t in &tiles {
            home.poll(t, now);
        }
        for ev in home.drain_wire() {
            if let WireEvent::Frame { bytes, path: 0, .. } = ev {
                frames.push(bytes);
            }
        }
        let sent = [home.words().sent(0), home.words().sent(1)];
        let closed = home.closed_height();
        for v in 0..4 {
            home.on_ack(v, sent, now);
            for h in closed.saturating_sub(4)..=closed {
                home.on_vote(v, h);
            }
        }
    }
    (home.seq_public(), frames, data)
}

#[test]
fn replay_lag_is_timed_from_a_steps_frame_to_the_tick_that_replays_it() {
    let e = EngineConfig::test_home(4, 8);
    let (seq_key, frames, data) = capture(&e, 600);
    assert!(frames.len() > 100, "{} frames", frames.len());
    let mut core = ReplicaCore::new(CoreConfig {
        engine: e.clone(),
        epoch: EPOCH,
        tenure: 0,
        sender: 0,
        seq_key,
        n_boxes: 1,
        n_peers: 0,
        anchor: Anchor::default(),
    })
    .expect("core");
    let (mut out, mut sink) = (Quiet, Count::default());
    // Copy 2 first, then every frame at t0; nothing ticks (so nothing replays) until t1.
    for d in &data {
        core.on_data_frame(0, d, 0, &mut out);
    }
    let (t0, t1) = (1_000_000u64, 4_000_000u64);
    for f in &frames {
        core.on_path_frame(0, f, t0, &mut out);
    }
    assert_eq!(
        core.replay_lag_time().steps,
        0,
        "nothing replayed before a tick"
    );
    core.tick(t1, &mut out, &mut sink).expect("replay");
    let lag = core.replay_lag_time();
    let (decoded, replayed) = core.replay_lag();
    assert!(replayed > 100, "replayed to step {replayed} of {decoded}");
    assert!(sink.0 > 0, "no responses");
    // Every step decoded at t0 and replayed at the t1 tick: 3 ms each (the histogram keeps two
    // significant digits).
    assert!(
        lag.steps >= replayed * 9 / 10,
        "{lag:?}, replayed {replayed}"
    );
    assert!(
        (2_970_000..=3_030_000).contains(&lag.p50) && lag.max <= 3_030_000,
        "{lag:?}"
    );
    assert_eq!(lag.untimed, 0);
    // Later ticks time nothing again: each step is timed once.
    core.tick(t1 + 1_000_000, &mut out, &mut sink)
        .expect("replay");
    assert!(core.replay_lag_time().steps <= decoded);
    assert!(core.replay_lag_time().max <= 3_030_000);
}
