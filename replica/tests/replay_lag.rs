//! Replay lag in time, receipt to applied (07 §7.3, budget ≤ 2 ms steady state), as the core
//! measures it: every step is timed from the decoding of the frame that completed it to the
//! tick whose replay applied it.

use vyrn_engine::home::CountingSink;
use vyrn_engine::workload::Mix;
use vyrn_engine::EngineConfig;
use vyrn_replica::front::core::{CoreConfig, NullOut, ReplicaCore};
use vyrn_replica::front::verdict::Anchor;
use vyrn_seq::testkit::capture::capture;

const EPOCH: u32 = 5;

#[test]
fn replay_lag_is_timed_from_a_steps_frame_to_the_tick_that_replays_it() {
    let e = EngineConfig::test_home(4, 8);
    let c = capture(&e, EPOCH, 100_000, 11, Mix::clean(), 600);
    let (seq_key, frames, data) = (c.seq_key, c.frames, c.data);
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
    let (mut out, mut sink) = (NullOut, CountingSink::default());
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
