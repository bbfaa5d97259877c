//! B-REP-7 at the replica (07 §7.3, §15): replay speed from the wire against live, in one run.
//!
//! A seeded clean-mix home runs through the real box (production tiles, seeded scheduler); its
//! frames (path A) and copy 2 of every packet (DATA frames) are captured. Then, each round from
//! a fresh state:
//! - **baseline**: the live engine (`LiveEngine`: lanes, cut, BBO) on the same packets;
//! - **replica**: the whole receive side of a replica (`ReplicaCore`: order RX, the decoder, the
//!   data side with its own BLAKE3 of every payload and the join, and replay) on the captured
//!   frames and DATA frames, to the last response;
//! - and its stages one at a time, as 07 §7.3's budget table counts them (on the REF box each
//!   has its own cores, so replay runs at the speed of the slowest): **order RX + decoder**
//!   (the frames alone: the join waits, nothing replays), **data side** (the DATA frames alone:
//!   parse, the replica's own BLAKE3 of every payload, the store), **replay alone** (the replay
//!   engine on the live engine's own log and payloads: no decode, no data side).
//!
//! Budget (07 §15 B-REP-7): replay ≥ 1.5× live at peak (REP_REPLAY_SPEEDUP_PEAK). Per message,
//! medians over rounds; the ratios are what to read: the whole receive side on one thread, and
//! each stage's speed against live (the pipeline's bound is the smallest).

use std::collections::HashMap;

use vyrn_bench::{enabled, measure_with_setup, quick, ratio, rounds};
use vyrn_engine::home::{EngineSink, LiveEngine, NullEngineSink};
use vyrn_engine::workload::{Input, Mix, Workload};
use vyrn_engine::{Capture as EngineLog, EngineConfig, ReplayEngine};
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

/// The capture: packets as received (ts, bytes), the box's frames in order, DATA frames.
struct Capture {
    cfg: EngineConfig,
    seq_key: ed25519_dalek::VerifyingKey,
    packets: Vec<(u64, Vec<u8>)>,
    frames: Vec<Vec<u8>>,
    data: Vec<Vec<u8>>,
    msgs: u64,
}

const EPOCH: u32 = 3;

fn capture(n: usize) -> Capture {
    let e = EngineConfig::test_home(4, 8);
    let mut home = SimBox::new(SeqConfig {
        engine: e.clone(),
        epoch: EPOCH,
        block_ns: 100_000,
        seq_key: [6; 32],
        voters: 4,
        rtx_ring_bytes: 64 << 20,
    });
    let mut w = Workload::new(&e, 5, Mix::clean());
    let tiles = home.tiles();
    let mut c = Capture {
        cfg: e.clone(),
        seq_key: home.seq_public(),
        packets: Vec::new(),
        frames: Vec::new(),
        data: Vec::new(),
        msgs: 0,
    };
    let mut now = 0;
    let mut data_seq = 0u64;
    let mut i = 0;
    while i < n + 2000 {
        i += 1;
        if i <= n {
            if let Input::Packet { rx_ts, bytes } = w.next_input() {
                c.msgs += bytes[2] as u64;
                data_seq += 1;
                let mut b =
                    DataFrameBuilder::new(DataKind::Data, e.book, EPOCH as u16, data_seq, 0);
                let _ = b.push(&bytes);
                c.data.push(b.as_bytes().to_vec());
                c.packets.push((rx_ts, bytes.clone()));
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
                c.frames.push(bytes);
            }
        }
        // A stand-in finalizer: every frame acked, every closed block voted (no halt, no fence).
        let sent = [home.words().sent(0), home.words().sent(1)];
        let closed = home.closed_height();
        for v in 0..4 {
            home.on_ack(v, sent, now);
            for h in closed.saturating_sub(4)..=closed {
                home.on_vote(v, h);
            }
        }
    }
    c
}

fn main() {
    if !enabled("replica") {
        return;
    }
    let n = if quick() { 2_000 } else { 40_000 };
    let r = rounds(if quick() { 3 } else { 15 });
    let c = capture(n);
    println!(
        "B-REP-7 at the replica: {} packets ({} msgs), {} frames, {} DATA frames",
        c.packets.len(),
        c.msgs,
        c.frames.len(),
        c.data.len()
    );
    let live = measure_with_setup(
        "baseline: live engine, same packets (per msg)",
        r,
        c.msgs,
        || {
            let mut e = LiveEngine::new(c.cfg.clone());
            e.prefault();
            e
        },
        |mut e| {
            let mut s = NullEngineSink;
            for (i, (ts, b)) in c.packets.iter().enumerate() {
                let _ = e.submit(*ts, *ts, b, &mut s);
                if i % 4 == 3 {
                    let _ = e.poll(*ts, &mut s);
                }
            }
            let _ = e.poll(u64::MAX / 2, &mut s);
            e
        },
    );
    let core_cfg = CoreConfig {
        engine: c.cfg.clone(),
        epoch: EPOCH,
        tenure: 0,
        sender: 0,
        seq_key: c.seq_key,
        n_boxes: 1,
        n_peers: 0,
        anchor: Anchor::default(),
    };
    let mut answers = HashMap::new();
    let replica = measure_with_setup(
        "replica: order RX + decode + data side + replay (per msg)",
        r,
        c.msgs,
        || ReplicaCore::new(core_cfg.clone()).expect("core"),
        |mut core| {
            let mut out = Quiet;
            let mut sink = Count::default();
            let mut d = 0;
            for (i, f) in c.frames.iter().enumerate() {
                // Copy 2 runs a little ahead of the frames, as on a live home.
                while d < c.data.len() && d < i * 2 + 64 {
                    core.on_data_frame(0, &c.data[d], i as u64, &mut out);
                    d += 1;
                }
                core.on_path_frame(0, f, i as u64, &mut out);
                if i % 16 == 15 {
                    let _ = core.tick(i as u64, &mut out, &mut sink);
                }
            }
            while d < c.data.len() {
                core.on_data_frame(0, &c.data[d], 0, &mut out);
                d += 1;
            }
            let _ = core.tick(c.frames.len() as u64, &mut out, &mut sink);
            core.settle(&mut sink);
            answers.insert(0, sink.0);
            core
        },
    );
    ratio(&replica, &live);
    println!(
        "  replay speed from the wire vs live = {:.2}x (B-REP-7: ≥ 1.5x at peak); {} answers replayed per round",
        live.p50_ns() / replica.p50_ns(),
        answers.get(&0).copied().unwrap_or(0)
    );

    // 07 §7.3: each stage alone, against live.
    let frames_only = measure_with_setup(
        "stage: order RX + decoder, frames alone (per msg)",
        r,
        c.msgs,
        || ReplicaCore::new(core_cfg.clone()).expect("core"),
        |mut core| {
            let mut out = Quiet;
            let mut sink = Count::default();
            for (i, f) in c.frames.iter().enumerate() {
                core.on_path_frame(0, f, i as u64, &mut out);
                if i % 16 == 15 {
                    let _ = core.tick(i as u64, &mut out, &mut sink);
                }
            }
            let _ = core.tick(c.frames.len() as u64, &mut out, &mut sink);
            core
        },
    );
    let data_only = measure_with_setup(
        "stage: data side, DATA frames alone (per msg)",
        r,
        c.msgs,
        || ReplicaCore::new(core_cfg.clone()).expect("core"),
        |mut core| {
            let mut out = Quiet;
            for (i, d) in c.data.iter().enumerate() {
                core.on_data_frame(0, d, i as u64, &mut out);
            }
            core
        },
    );
    // The live engine's own log: what the decoder hands replay, with the joined payloads.
    let mut log = EngineLog::default();
    {
        let mut e = LiveEngine::new(c.cfg.clone());
        for (i, (ts, b)) in c.packets.iter().enumerate() {
            let _ = e.submit(*ts, *ts, b, &mut log);
            if i % 4 == 3 {
                let _ = e.poll(*ts, &mut log);
            }
        }
        let _ = e.poll(u64::MAX / 2, &mut log);
    }
    let replay_only = measure_with_setup(
        "stage: replay engine alone, the decoded log (per msg)",
        r,
        c.msgs,
        || {
            let mut e = ReplayEngine::new(c.cfg.clone());
            e.prefault();
            for (rec, p) in &log.records {
                e.push_record(*rec, p.clone()).expect("lane");
            }
            for st in &log.steps {
                e.push_step(st.clone());
            }
            e
        },
        |mut e| {
            let mut s = NullEngineSink;
            e.run(None, &mut s).expect("replay");
            e
        },
    );
    let speed = |m: &vyrn_bench::Stats| live.p50_ns() / m.p50_ns();
    let stages = [
        ("order RX + decoder", speed(&frames_only)),
        ("data side", speed(&data_only)),
        ("replay engine", speed(&replay_only)),
    ];
    for (name, x) in stages {
        println!("  stage speed vs live: {name:<20} {x:.2}x");
    }
    let (slowest, bound) =
        stages
            .iter()
            .copied()
            .fold(("", f64::MAX), |a, b| if b.1 < a.1 { b } else { a });
    println!(
        "  pipeline bound (each stage on its own cores, 07 §7.2): {bound:.2}x, set by the {slowest} (B-REP-7: ≥ 1.5x at peak)"
    );
}
