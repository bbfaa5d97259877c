//! The live engine's log replays to the same responses, fills and state (INV-DET, 07 §7.1),
//! over many seeds of a workload with every kind of input; snapshots restore to the same
//! future.

use std::collections::HashMap;
use vyrn_engine::bbo::Outcome;
use vyrn_engine::snapshot::{ReplicationState, SnapMeta};
use vyrn_engine::workload::{Input, Mix, Workload};
use vyrn_engine::{Capture, EngineConfig, LiveEngine, LoggedStep, ReplayEngine};
use vyrn_wire::msg::client::{Record, Response};
use vyrn_wire::records::StepKind;

struct Run {
    cfg: EngineConfig,
    live: Capture,
    root: [u8; 32],
    engine: LiveEngine,
}

fn cfg_for(seed: u64) -> EngineConfig {
    let lanes = 2 + (seed % 5) as u8;
    let mut cfg = EngineConfig::test_home(lanes, 1 + (seed % 7) as u16);
    if seed % 3 == 0 {
        cfg.lane_deadline_ns = Some(900);
        cfg.bbo_deadline_ns = Some(1_500);
    }
    if seed % 11 == 0 {
        cfg.book_cfg.max_orders = 8; // BOOK_FULL
    }
    if seed % 13 == 0 {
        cfg.hot_ring_bytes = 4096; // RESEND_GONE
    }
    cfg.validate().expect("valid config");
    cfg
}

fn live_run(seed: u64, inputs: usize, mix: Mix) -> Run {
    let cfg = cfg_for(seed);
    let mut w = Workload::new(&cfg, seed, mix);
    let mut e = LiveEngine::new(cfg.clone());
    let mut cap = Capture::default();
    for i in 0..inputs {
        match w.next_input() {
            Input::Packet { rx_ts, bytes } => {
                // Processing lags receipt by 0–2 µs, so deadline admission sheds some.
                let now = rx_ts + (i as u64 * 7919 % 2000);
                let _ = e.submit(now, rx_ts, &bytes, &mut cap);
            }
            Input::Control(c) => e.control(c),
        }
        if i % 3 == 0 {
            let now = w.now() + (i as u64 * 104_729 % 2500);
            e.poll(now, &mut cap).expect("live step");
        }
    }
    e.poll(w.now() + 10_000, &mut cap).expect("live step");
    e.flush_hashes(&mut cap);
    e.settle(&mut cap);
    let root = e.state_root();
    Run {
        cfg,
        live: cap,
        root,
        engine: e,
    }
}

fn replay(run: &Run, schedule: Option<u64>) -> (ReplayEngine, Capture) {
    let mut r = ReplayEngine::new(run.cfg.clone());
    if let Some(s) = schedule {
        r.shuffle_schedule(s);
    }
    for (rec, p) in &run.live.records {
        r.push_record(*rec, p.clone()).expect("lane exists");
    }
    for s in &run.live.steps {
        r.push_step(s.clone());
    }
    let mut cap = Capture::default();
    r.run(None, &mut cap).expect("replay");
    r.check_drained().expect("every step replayed");
    r.settle(&mut cap);
    (r, cap)
}

/// Live's responses (`a`) against replay's (`b`), byte for byte: replay leaves the 16 tag bytes
/// zero (07 §7.3, §8.5), so each of its packets must carry a zero tag and, tagged under the
/// session's `K_out` as a sender would, equal live's packet.
fn assert_same(cfg: &EngineConfig, seed: u64, a: &Capture, b: &Capture) {
    let k_out = |s: u32| {
        cfg.sessions
            .iter()
            .find(|x| x.session == s)
            .expect("session")
            .k_out
    };
    assert_eq!(
        a.responses.len(),
        b.responses.len(),
        "seed {seed}: sessions with responses"
    );
    for (s, ra) in &a.responses {
        let rb = b
            .responses
            .get(s)
            .unwrap_or_else(|| panic!("seed {seed}: session {s} silent in replay"));
        assert_eq!(
            ra.len(),
            rb.len(),
            "seed {seed}: session {s} response count"
        );
        for (i, (x, y)) in ra.iter().zip(rb).enumerate() {
            let (mut bytes, gate) = y.clone();
            let n = bytes.len();
            assert!(
                n >= 16 && bytes[n - 16..].iter().all(|&b| b == 0),
                "seed {seed}: session {s} response {i}: replay tagged it"
            );
            vyrn_engine::resp::tag(&mut bytes, &k_out(*s));
            assert_eq!(x, &(bytes, gate), "seed {seed}: session {s} response {i}");
        }
    }
    assert_eq!(a.events, b.events, "seed {seed}: event (fill) streams");
    let steps_b: Vec<&LoggedStep> = b.steps.iter().collect();
    assert_eq!(
        a.steps.iter().collect::<Vec<_>>(),
        steps_b,
        "seed {seed}: steps"
    );
}

#[test]
fn live_and_replay_agree_over_many_seeds() {
    let seeds: u64 = std::env::var("VYRN_REPLAY_SEEDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1500);
    let mut totals = HashMap::<&str, u64>::new();
    for seed in 0..seeds {
        let run = live_run(seed, 300, Mix::everything());
        // Odd seeds replay in a random interleaving of lanes and BBO core: only the two
        // dependencies of 07 §7.1 may order the work.
        let (r, cap) = replay(&run, (seed % 2 == 1).then_some(seed ^ 0xA5A5));
        assert_same(&run.cfg, seed, &run.live, &cap);
        assert_eq!(r.state_root(), run.root, "seed {seed}: state commitment");
        run.engine.bbo().book().check().expect("book invariants");
        for s in &run.live.steps {
            *totals.entry(s.kind.name()).or_default() += 1;
        }
        for l in run.engine.lanes() {
            let c = l.counters();
            *totals.entry("dup").or_default() += c.duplicates;
            *totals.entry("gap").or_default() += c.gaps;
            *totals.entry("shed_pkt").or_default() += c.shed_packets;
            *totals.entry("drop_tag").or_default() += c.drop_bad_tag;
            *totals.entry("resent").or_default() += c.resent;
            *totals.entry("resend_gone").or_default() += c.resend_gone;
            *totals.entry("risk").or_default() += c.rejects[4] + c.rejects[5] + c.rejects[6];
            *totals.entry("book_full").or_default() += c.rejects[13];
            *totals.entry("halted").or_default() += c.rejects[8];
        }
    }
    // The workload must actually exercise what the harness claims to cover.
    for k in [
        "cross", "improve", "idle", "shed", "control", "dup", "gap", "shed_pkt", "drop_tag",
        "resent", "risk", "halted",
    ] {
        assert!(
            totals.get(k).copied().unwrap_or(0) > 0,
            "workload never produced {k}: {totals:?}"
        );
    }
    if seeds >= 200 {
        for k in ["book_full", "resend_gone"] {
            assert!(
                totals.get(k).copied().unwrap_or(0) > 0,
                "workload never produced {k}: {totals:?}"
            );
        }
    }
}

#[test]
fn responses_parse_and_answer_every_logged_message() {
    for seed in 0..40 {
        let run = live_run(seed, 400, Mix::everything());
        for (session, resps) in &run.live.responses {
            let k_out = run
                .cfg
                .sessions
                .iter()
                .find(|s| s.session == *session)
                .expect("session")
                .k_out;
            let mut seen = std::collections::HashSet::new();
            for (bytes, _) in resps {
                let p =
                    Response::parse(bytes, &k_out).expect("response parses and its tag verifies");
                assert_eq!(p.session, *session);
                if p.resend {
                    assert!(
                        seen.contains(&p.resp_seq),
                        "seed {seed}: resend of an unsent resp_seq"
                    );
                } else {
                    assert!(seen.insert(p.resp_seq), "seed {seed}: resp_seq reused");
                    assert_eq!(
                        p.resp_seq,
                        seen.len() as u64,
                        "seed {seed}: resp_seq gapless from 1"
                    );
                }
            }
        }
        // Every fill reported to a client matches a fill event.
        let fills: usize = run
            .live
            .responses
            .values()
            .flatten()
            .filter(|(b, _)| b[17] == 0)
            .map(|(b, _)| {
                (0..b[16] as usize)
                    .filter(|i| b[24 + 32 * i] == vyrn_wire::msg::client::rec::FILL)
                    .count()
            })
            .sum();
        let fill_events = run
            .live
            .events
            .iter()
            .flatten()
            .filter(|e| matches!(e.what, Outcome::Fill { .. }))
            .count();
        assert_eq!(
            fills, fill_events,
            "seed {seed}: one Fill record per fill event"
        );
        let _ = Record::Busy;
    }
}

#[test]
fn replay_rejects_a_tampered_log() {
    let run = live_run(7, 400, Mix::everything());
    // Flip a Cross to Improve (or the reverse): the BBO core must refuse it.
    let i = run
        .live
        .steps
        .iter()
        .position(|s| s.kind == StepKind::Cross)
        .expect("a Cross step");
    let mut r = ReplayEngine::new(run.cfg.clone());
    for (rec, p) in &run.live.records {
        r.push_record(*rec, p.clone()).unwrap();
    }
    for (k, s) in run.live.steps.iter().enumerate() {
        let mut s = s.clone();
        if k == i {
            s.kind = StepKind::Improve;
        }
        r.push_step(s);
    }
    let err = r
        .run(None, &mut Capture::default())
        .expect_err("tampered kind");
    assert!(matches!(err, vyrn_engine::ReplayError::Step(_)), "{err:?}");

    // Flip a record's SHED bit: the lane must refuse it.
    let mut r = ReplayEngine::new(run.cfg.clone());
    for (k, (rec, p)) in run.live.records.iter().enumerate() {
        let mut rec = *rec;
        if k == run.live.records.len() / 2 {
            rec.flags ^= vyrn_wire::records::PKT_SHED;
        }
        r.push_record(rec, p.clone()).unwrap();
    }
    for s in &run.live.steps {
        r.push_step(s.clone());
    }
    // Replay reads the SHED decision (INV-DET): the lane believes it, and the BBO core then
    // misses the ops the live lane forwarded — a divergence either way.
    let err = r
        .run(None, &mut Capture::default())
        .expect_err("tampered SHED");
    assert!(
        matches!(
            err,
            vyrn_engine::ReplayError::Lane { .. } | vyrn_engine::ReplayError::Step(_)
        ),
        "{err:?}"
    );
}

#[test]
fn snapshot_restores_to_the_same_future() {
    for seed in [1u64, 2, 4, 5, 8, 10, 14, 16, 20, 22] {
        let mut mix = Mix::everything();
        mix.resend = 0; // response rings are not in a snapshot (07 §7.5)
        let run = live_run(seed, 600, mix);
        let total = run.live.steps.len() as u64;
        let mid = total / 2;
        let mut a = ReplayEngine::new(run.cfg.clone());
        for (rec, p) in &run.live.records {
            a.push_record(*rec, p.clone()).unwrap();
        }
        for s in &run.live.steps {
            a.push_step(s.clone());
        }
        let mut before = Capture::default();
        assert_eq!(a.run(Some(mid), &mut before).unwrap(), mid);
        let meta = SnapMeta {
            epoch: 3,
            height: 41,
            header_hash: [7; 32],
        };
        let rep = ReplicationState {
            tenure: 2,
            seq_order: vec![5, 6, 7],
            deposed: 0b10,
            membership_hash: [9; 32],
            root_gate_cursor: 999,
        };
        let file = a.snapshot(&meta, &rep);
        let (mut b, hdr) = vyrn_engine::load::restore(run.cfg.clone(), &file).expect("restore");
        assert_eq!(hdr.meta, meta);
        assert_eq!(hdr.replication, rep);
        assert_eq!(hdr.last_step, mid);
        assert_eq!(hdr.state_root, a.state_root());
        assert_eq!(
            b.state_root(),
            a.state_root(),
            "seed {seed}: restored commitment"
        );
        // Feed b the whole stream again (07 §7.6: catch-up decodes from the stream's start):
        // what the snapshot holds is dropped, exactly that.
        let held = run
            .live
            .records
            .iter()
            .filter(|(rec, _)| rec.first_lane_seq <= b.lanes()[rec.lane as usize].published())
            .count()
            + run.live.steps.iter().filter(|s| s.step <= mid).count();
        assert!(held > 0, "seed {seed}: the snapshot holds a prefix");
        for (rec, p) in &run.live.records {
            b.push_record(*rec, p.clone()).unwrap();
        }
        for s in &run.live.steps {
            b.push_step(s.clone());
        }
        assert_eq!(b.skipped(), held as u64, "seed {seed}: the prefix dropped");
        let (mut ca, mut cb) = (Capture::default(), Capture::default());
        a.run(None, &mut ca).unwrap();
        b.run(None, &mut cb).unwrap();
        a.settle(&mut ca);
        b.settle(&mut cb);
        b.check_drained().unwrap();
        assert_eq!(
            ca.events, cb.events,
            "seed {seed}: events after the snapshot"
        );
        assert_eq!(
            ca.responses, cb.responses,
            "seed {seed}: responses after the snapshot"
        );
        assert_eq!(
            a.state_root(),
            b.state_root(),
            "seed {seed}: final commitment"
        );
        assert_eq!(
            a.state_root(),
            run.root,
            "seed {seed}: replay reaches live's commitment"
        );
    }
}

#[test]
fn corrupt_snapshots_are_refused_not_panicked_on() {
    let run = live_run(3, 300, Mix::everything());
    let (r, _) = replay(&run, None);
    let file = r.snapshot(&SnapMeta::default(), &ReplicationState::default());
    let (_, clean) =
        vyrn_engine::load::restore(run.cfg.clone(), &file).expect("clean file restores");
    let mut rng = vyrn_wire::corpus::Rng::new(99);
    for i in 0..2000 {
        let mut f = file.clone();
        match i % 3 {
            0 => {
                let k = rng.below(f.len() as u64) as usize;
                f[k] ^= 1 << rng.below(8);
            }
            1 => f.truncate(rng.below(f.len() as u64) as usize),
            _ => {
                let k = rng.below(f.len() as u64) as usize;
                f.insert(k, 0);
            }
        }
        // Refused, or (a header field the caller checks against certified data: epoch,
        // height, header_hash) reported with a different file hash.
        if let Ok((_, h)) = vyrn_engine::load::restore(run.cfg.clone(), &f) {
            assert_ne!(
                h.file_hash, clean.file_hash,
                "mutation {i} accepted unnoticed"
            );
        }
    }
    // A config with other limits refuses the snapshot.
    let mut other = run.cfg.clone();
    other.accounts[0].max_order_qty += 1;
    assert!(vyrn_engine::load::restore(other, &file).is_err());
}

/// `VYRN_FUZZ_SEEDS=fuzz/corpus cargo test -p vyrn-engine --test live_replay fuzz_seeds`
/// writes seed inputs for the engine fuzz targets (snapshots of a 3-lane home; packet chunks).
#[test]
fn fuzz_seeds() {
    let Ok(dir) = std::env::var("VYRN_FUZZ_SEEDS") else {
        return;
    };
    let dir = std::path::Path::new(&dir);
    let cfg = EngineConfig::test_home(3, 3);
    for seed in 0..4u64 {
        let mut w = Workload::new(&cfg, seed, Mix::everything());
        let mut e = LiveEngine::new(cfg.clone());
        let mut cap = Capture::default();
        let mut chunks = Vec::new();
        for _ in 0..(50 + 100 * seed) {
            if let Input::Packet { rx_ts, bytes } = w.next_input() {
                let _ = e.submit(rx_ts, rx_ts, &bytes, &mut cap);
                chunks.push(bytes.len().min(255) as u8);
                chunks.push(2);
                chunks.extend_from_slice(&bytes[..bytes.len().min(255)]);
            }
            e.poll(w.now(), &mut cap).unwrap();
        }
        let snap = e.snapshot(&SnapMeta::default(), &ReplicationState::default());
        let d = dir.join("engine_snapshot");
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join(format!("seed-{seed}")), &snap).unwrap();
        let d = dir.join("engine_lane");
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(
            d.join(format!("seed-{seed}")),
            &chunks[..chunks.len().min(4000)],
        )
        .unwrap();
    }
}

/// Payloads held by key and 8-byte hash, as a replica's data side holds copy 2.
struct Held(HashMap<(u32, u32), (u64, Vec<u8>)>);
impl vyrn_engine::home::Payloads for Held {
    fn payload(&self, session: u32, pkt_seq: u32, pkt_hash: u64) -> Option<&[u8]> {
        self.0
            .get(&(session, pkt_seq))
            .filter(|(h, _)| *h == pkt_hash)
            .map(|(_, p)| &p[..])
    }
}

/// Keyed records (07 §5.4 join): replay reads each payload in place once its `pkt_hash` is set
/// and the copy is held; a record without either waits, with every record behind it in its
/// lane, and the result is the live engine's, byte for byte.
#[test]
fn keyed_records_wait_for_their_hash_and_payload_and_replay_the_same() {
    for seed in [1u64, 4, 9] {
        let run = live_run(seed, 3_000, Mix::clean());
        let hash_of =
            |p: &[u8]| u64::from_le_bytes(blake3::hash(p).as_bytes()[..8].try_into().unwrap());
        let mut r = ReplayEngine::new(run.cfg.clone());
        for (rec, _) in &run.live.records {
            r.push_keyed(*rec).expect("lane exists");
        }
        for s in &run.live.steps {
            r.push_step(s.clone());
        }
        let mut held = Held(HashMap::new());
        let mut cap = Capture::default();
        // No hash yet: nothing of any lane's records runs, and the engine counts the waits.
        let before = r.run_with(None, &held, &mut cap).expect("replay");
        assert!(r.waits() > 0, "seed {seed}: heads waited");
        assert!(
            cap.responses.is_empty(),
            "seed {seed}: no record ran without its payload"
        );
        // Hashes set, but one packet's copy missing: its lane stops there.
        for (rec, p) in &run.live.records {
            r.set_hash(rec.lane, rec.first_lane_seq, hash_of(p));
        }
        let (gap, _) = run.live.records[run.live.records.len() / 2].clone();
        for (rec, p) in &run.live.records {
            if (rec.session, rec.pkt_seq) != (gap.session, gap.pkt_seq) {
                held.0
                    .insert((rec.session, rec.pkt_seq), (hash_of(p), p.clone()));
            }
        }
        let mid = r.run_with(None, &held, &mut cap).expect("replay");
        assert!(mid >= before);
        assert!(
            r.backlog().0 > 0,
            "seed {seed}: the lane of the missing copy stopped at it"
        );
        // A copy of the right key but another hash is not the payload.
        held.0.insert((gap.session, gap.pkt_seq), (0, vec![0; 64]));
        r.run_with(None, &held, &mut cap).expect("replay");
        assert!(r.backlog().0 > 0, "seed {seed}: a wrong copy is not joined");
        let p = &run.live.records[run.live.records.len() / 2].1;
        held.0
            .insert((gap.session, gap.pkt_seq), (hash_of(p), p.clone()));
        r.run_with(None, &held, &mut cap).expect("replay");
        r.check_drained().expect("every step replayed");
        assert_eq!(r.backlog(), (0, 0), "seed {seed}: every record ran");
        r.settle(&mut cap);
        assert_same(&run.cfg, seed, &run.live, &cap);
        assert_eq!(r.state_root(), run.root, "seed {seed}: same state");
    }
}

/// The peak's shape (07 §3.13: 10 msgs per packet): every packet full, and replay answers it
/// as live does. The light mixes' draws are unchanged by the fewest-messages bound (their
/// packets still carry 1..=max_msgs).
#[test]
fn the_peak_mix_fills_every_packet_and_replays_the_same() {
    let cfg = cfg_for(3);
    let mut w = Workload::new(&cfg, 3, Mix::peak());
    let mut packets = 0;
    for _ in 0..500 {
        if let Input::Packet { bytes, .. } = w.next_input() {
            assert_eq!(bytes[2], 10, "a full packet");
            packets += 1;
        }
    }
    assert!(packets > 400);
    let mut w = Workload::new(&cfg, 3, Mix::everything());
    let counts: std::collections::BTreeSet<u8> = (0..500)
        .filter_map(|_| match w.next_input() {
            Input::Packet { bytes, .. } => Some(bytes[2]),
            _ => None,
        })
        .collect();
    assert!(counts.contains(&1) && counts.iter().all(|&n| n <= 4));
    for seed in 0..6 {
        let run = live_run(seed, 300, Mix::peak());
        let (_, cap) = replay(&run, (seed % 2 == 1).then_some(seed ^ 0x5A5A));
        assert_same(&run.cfg, seed, &run.live, &cap);
    }
}
