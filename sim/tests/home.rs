//! The simulated home (docs/testing.md): one seed replays exactly, each planted bug is found, and the
//! seeds the simulator once failed stay fixed (regression seeds).

use vyrn_sim::home::{run, FaultKinds, Plant, Report, SimConfig};

fn short(seed: u64, kinds: FaultKinds) -> SimConfig {
    SimConfig {
        seed,
        kinds,
        load_ms: 120,
        rate: 4000,
        plant: None,
        scenario: None,
    }
}

fn must_pass(r: &Report) {
    assert!(
        r.ok(),
        "seed {}: {}\nschedule: {:?}",
        r.seed,
        r.violations
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("\n"),
        r.schedule.describe()
    );
    assert!(r.final_height > 100, "final height {}", r.final_height);
    assert!(
        r.client[3] > 0,
        "nothing final at the client: {:?}",
        r.client
    );
    assert!(r.frames[0] > 500 && r.responses > 500, "{r:?}");
}

/// Two runs of one seed: the same network events (trace), the same polls, the same replay
/// digest, the same client figures.
#[test]
fn one_seed_replays_exactly() {
    for seed in [3, 11] {
        let a = run(&short(seed, FaultKinds::ALL)).expect("runs");
        let b = run(&short(seed, FaultKinds::ALL)).expect("runs");
        must_pass(&a);
        assert_eq!(a.trace, b.trace, "seed {seed}: the traces differ");
        assert_eq!((a.polls, a.digest, a.client), (b.polls, b.digest, b.client));
        assert_eq!(a.net, b.net);
    }
    // And another seed is another run.
    let c = run(&short(4, FaultKinds::ALL)).expect("runs");
    let a = run(&short(3, FaultKinds::ALL)).expect("runs");
    assert_ne!(a.trace, c.trace);
}

/// Each bug planted on purpose is found, and named by the invariant it breaks.
#[test]
fn every_planted_bug_is_found() {
    for (plant, invariant) in [
        (Plant::Gate, "INV-FRAME-FIRST"),
        (Plant::Decoder, "T-REP-2"),
        (Plant::Replay, "INV-DET"),
    ] {
        for seed in 0..3 {
            let r = run(&SimConfig {
                plant: Some(plant),
                ..short(seed, FaultKinds::ALL)
            })
            .expect("runs");
            let v = r
                .violations
                .first()
                .unwrap_or_else(|| panic!("seed {seed}: the planted {plant:?} bug was not found"));
            assert!(
                v.invariant.starts_with(invariant),
                "seed {seed}, {plant:?}: found as {v}"
            );
        }
    }
}

/// Regression seed: the simulator's first finding. The sim home's data box sent DATA_HB every
/// 1 ms (the dev profile's) while its replicas ran 07's REP_DATA_SILENCE_MS = 1 ms, so every
/// quiet millisecond marked it down and up again; now it heartbeats at 07's 100 µs.
#[test]
fn regression_a_quiet_home_never_marks_its_data_box_down() {
    let r = run(&SimConfig {
        load_ms: 300,
        ..short(1, FaultKinds::NONE)
    })
    .expect("runs");
    must_pass(&r);
}

/// A misbehaving client in the simulated home (07 §5.6: a client sending two different copies,
/// `docs/wire.md` "What the box logs"): every seed that draws it, alone or with the network's
/// faults, keeps every invariant — the replicas join each copy by its own hash (the
/// sequencer's retention serving the conflicting duplicates and the copy a data box got
/// wrong), replay the same responses — and the session's next valid packet is answered. (Seeds
/// no other test of this file runs: a seed's home directory is its own.)
#[test]
fn a_misbehaving_client_stops_nothing() {
    let only = FaultKinds {
        misbehave: true,
        ..FaultKinds::NONE
    };
    // The first three seeds from 20 on that draw it, alone and with every kind.
    let drawing = |kinds: FaultKinds| {
        (20u64..)
            .filter(move |&s| {
                vyrn_sim::home::Schedule::draw(s, kinds, short(s, kinds).load_ms * 1_000_000)
                    .kinds()
                    .contains(&"misbehave")
            })
            .take(3)
            .map(move |s| (s, kinds))
    };
    for (seed, kinds) in drawing(only).chain(drawing(FaultKinds::ALL)) {
        let r = run(&short(seed, kinds)).expect("runs");
        assert!(r.schedule.kinds().contains(&"misbehave"));
        must_pass(&r);
    }
}
