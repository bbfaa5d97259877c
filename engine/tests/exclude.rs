//! A seal's unavailable packets (07 §9.3, §9.4, §9.6 case d): replay runs a record whose
//! payload no box held without it (`ReplayEngine::exclude`). The record keeps its LaneSeqs, its
//! messages never execute, every later step runs as the final log reads it — and any two
//! replays of the same log with the same exclusions agree, whatever their schedule (INV-DET).

use vyrn_engine::workload::{Input, Mix, Workload};
use vyrn_engine::{Capture, EngineConfig, LiveEngine, ReplayEngine};
use vyrn_wire::records::{PacketRecord, StepKind};

struct Run {
    cfg: EngineConfig,
    live: Capture,
    published: Vec<u64>,
    done: u64,
}

fn live_run(seed: u64, inputs: usize) -> Run {
    let mut cfg = EngineConfig::test_home(2 + (seed % 3) as u8, 1);
    if seed % 4 == 1 {
        // Tight risk limits: the excluded packet's account then judges later orders otherwise
        // than the dead box did (ops forwarded that the log never steps, and the reverse).
        for a in cfg.accounts.iter_mut() {
            a.max_open_orders = 3;
        }
    }
    cfg.validate().expect("valid config");
    let mut w = Workload::new(&cfg, seed, Mix::clean());
    let mut e = LiveEngine::new(cfg.clone());
    let mut cap = Capture::default();
    for i in 0..inputs {
        match w.next_input() {
            Input::Packet { rx_ts, bytes } => {
                let _ = e.submit(rx_ts, rx_ts, &bytes, &mut cap);
            }
            Input::Control(c) => e.control(c),
        }
        if i % 3 == 0 {
            e.poll(w.now(), &mut cap).expect("live step");
        }
    }
    e.poll(w.now() + 10_000, &mut cap).expect("live step");
    e.flush_hashes(&mut cap);
    e.settle(&mut cap);
    Run {
        published: e.lanes().iter().map(|l| l.published()).collect(),
        done: e.bbo().done(),
        cfg,
        live: cap,
    }
}

/// Replay `run`'s log with the records `excl` excluded, on a schedule.
fn replay(run: &Run, excl: &[PacketRecord], schedule: Option<u64>) -> (ReplayEngine, Capture) {
    let mut r = ReplayEngine::new(run.cfg.clone());
    if let Some(s) = schedule {
        r.shuffle_schedule(s);
    }
    for (rec, p) in &run.live.records {
        r.push_record(*rec, p.clone()).expect("lane exists");
    }
    for x in excl {
        assert!(r.exclude(x.lane, x.first_lane_seq), "{x:?} waits");
    }
    for s in &run.live.steps {
        r.push_step(s.clone());
    }
    let mut cap = Capture::default();
    r.run(None, &mut cap).expect("replay with exclusions");
    r.check_drained().expect("every step ran");
    r.settle(&mut cap);
    (r, cap)
}

/// The record whose op step `s` took.
fn record_of(run: &Run, lane: u8, lane_seq: u64) -> PacketRecord {
    run.live
        .records
        .iter()
        .map(|(r, _)| *r)
        .find(|r| {
            r.lane == lane
                && r.count > 0
                && (r.first_lane_seq..r.first_lane_seq + r.count as u64).contains(&lane_seq)
        })
        .expect("the step's record is logged")
}

/// Events naming an order of the packet of `x` (its cookie: slot, pkt_seq, message).
fn names(ev: &vyrn_engine::bbo::LaneEvent, x: &PacketRecord) -> bool {
    ev.cookie != 0 && ev.session == x.session && (ev.cookie >> 8) as u32 == x.pkt_seq
}

#[test]
fn an_excluded_packet_keeps_its_lane_seqs_and_never_trades() {
    let run = live_run(3, 3000);
    let crosses: Vec<_> = run
        .live
        .steps
        .iter()
        .filter(|s| s.kind == StepKind::Cross)
        .collect();
    assert!(crosses.len() > 20, "the workload trades");
    let s = crosses[crosses.len() / 3];
    let x = record_of(&run, s.src_lane, s.src_lane_seq);

    let (r, cap) = replay(&run, &[x], None);
    // Every LaneSeq and every step of the log is taken.
    let published: Vec<u64> = r.lanes().iter().map(|l| l.published()).collect();
    assert_eq!(published, run.published);
    assert_eq!(r.bbo().done(), run.done);
    assert_eq!(cap.steps.len(), run.live.steps.len());
    // The packet ran without its messages: one EXCLUDED answer, nothing forwarded or traded.
    let lane = &r.lanes()[x.lane as usize];
    assert_eq!(lane.counters().excluded, 1);
    assert!(lane.counters().rejects[14] >= 1);
    assert!(cap.forwards.iter().all(|f| !(f.lane == x.lane
        && f.op.session == x.session
        && (f.op.cookie >> 8) as u32 == x.pkt_seq)));
    assert!(cap.events.iter().flatten().all(|e| !names(e, &x)));
    // The step that crossed it runs as nothing, under the logged cut.
    let got = &cap.steps[(s.step - 1) as usize];
    assert_eq!(got.step, s.step);
    assert_eq!(got.kind, StepKind::Idle);
    assert_eq!(got.cut, s.cut);
    // The live run did trade it.
    assert!(run.live.events.iter().flatten().any(|e| names(e, &x)));

    // Any schedule, the same result.
    for seed in [1, 7, 99] {
        let (r2, cap2) = replay(&run, &[x], Some(seed));
        assert_eq!(r2.state_root(), r.state_root(), "schedule {seed}");
        assert_eq!(cap2.steps, cap.steps, "schedule {seed}");
        assert_eq!(cap2.events, cap.events, "schedule {seed}");
    }
    // And not the state without the exclusion.
    let (plain, _) = replay(&run, &[], None);
    assert_ne!(plain.state_root(), r.state_root());
}

#[test]
fn any_record_excluded_replays_to_one_result_on_every_schedule() {
    let (mut runs, mut retired, mut rekinded) = (0, 0, 0);
    for seed in 0..16u64 {
        let run = live_run(seed, 1500);
        let recs: Vec<PacketRecord> = run
            .live
            .records
            .iter()
            .map(|(r, _)| *r)
            .filter(|r| r.count > 0)
            .collect();
        // Two records of the log, drawn by the seed.
        let a = recs[(seed as usize * 7919) % recs.len()];
        let b = recs[(seed as usize * 104_729 + 13) % recs.len()];
        let excl: Vec<PacketRecord> = if a.lane == b.lane && a.first_lane_seq == b.first_lane_seq {
            vec![a]
        } else {
            vec![a, b]
        };
        let (r, cap) = replay(&run, &excl, None);
        let published: Vec<u64> = r.lanes().iter().map(|l| l.published()).collect();
        assert_eq!(published, run.published, "seed {seed}");
        assert_eq!(r.bbo().done(), run.done, "seed {seed}");
        let excluded: u64 = r.lanes().iter().map(|l| l.counters().excluded).sum();
        assert_eq!(excluded, excl.len() as u64, "seed {seed}");
        let (r2, cap2) = replay(&run, &excl, Some(seed ^ 0x5eed));
        assert_eq!(r2.state_root(), r.state_root(), "seed {seed}");
        assert_eq!(cap2.events, cap.events, "seed {seed}");
        runs += 1;
        retired += cap
            .events
            .iter()
            .flatten()
            .filter(|e| e.what == vyrn_engine::bbo::Outcome::Excluded)
            .count();
        rekinded += cap
            .steps
            .iter()
            .zip(&run.live.steps)
            .filter(|(a, b)| a.kind != b.kind && a.kind != StepKind::Idle)
            .count();
    }
    assert_eq!(runs, 16);
    // The campaign reaches both of the final log's departures from the dead box's: an op the
    // log passed over (retired EXCLUDED), and a step whose kind the book now judges otherwise.
    assert!(
        retired > 0 && rekinded > 0,
        "retired {retired}, kinds changed {rekinded}"
    );
}
