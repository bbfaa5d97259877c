//! The replica core (`ReplicaCore`) on the real box's frames over two lossy, reordering paths,
//! NACKs answered from the box's log, copy 2 in DATA frames with some lost (fetched back from the
//! data box by `data_seq`): every completed block verifies, RepAcks follow the contiguous
//! frames, and replay reproduces every response the box sent, byte for byte — with replay
//! inline, and with replay on its own tile (`replay_tile`) polled in turn with the core, on its
//! own thread, and behind a ring too small for a frame's worth (07 §7.2): every runner replays
//! the same responses and takes the same state roots.

mod boxrun;

use std::collections::HashMap;

use boxrun::{as_sent, finalize, first_copy_key, Responses};

use vyrn_engine::workload::{Input, Mix, Workload};
use vyrn_engine::EngineConfig;
use vyrn_replica::front::core::{CoreConfig, ReplicaCore, ReplicaOut};
use vyrn_replica::front::decode::Fault;
use vyrn_replica::front::verdict::{Anchor, VerifyOutcome};
use vyrn_replica::replay::split::{SplitCounters, SplitSlots, Workers};
use vyrn_replica::replay::tile::{Idle, ReplayTile, ReportingSink, SinkReport};
use vyrn_replica::replay::SnapPolicy;
use vyrn_seq::testkit::{SimBox, WireEvent};
use vyrn_seq::SeqConfig;
use vyrn_wire::decoder::BlockRoots;
use vyrn_wire::header::BlockHeader;
use vyrn_wire::msg::ctrl::{DataFetch, Nack, RepAck};
use vyrn_wire::msg::data::{DataFrameBuilder, DataKind};

#[derive(Default)]
struct Out {
    nacks: Vec<Nack>,
    acks: Vec<RepAck>,
    fetches: Vec<DataFetch>,
    faults: Vec<Fault>,
    blocks: Vec<BlockRoots>,
    headers: Vec<BlockHeader>,
    other: u64,
}

impl ReplicaOut for Out {
    fn nack(&mut self, n: &Nack) {
        self.nacks.push(*n);
    }
    fn ack(&mut self, a: &RepAck) {
        self.acks.push(*a);
    }
    fn data_fetch(&mut self, _d: u8, f: &DataFetch) {
        self.fetches.push(*f);
    }
    fn seq_data_req(&mut self, _k: vyrn_wire::msg::PktKey, _h: u64) {
        self.other += 1;
    }
    fn copy_mismatch(
        &mut self,
        _m: &vyrn_replica::front::data::CopyMismatch,
        _s: &[u8],
        _d: &[u8],
    ) {
        self.other += 1;
    }
    fn fault(&mut self, f: &Fault) {
        self.faults.push(*f);
    }
    fn block(&mut self, b: &BlockRoots) {
        self.blocks.push(*b);
    }
    fn header(&mut self, h: &BlockHeader) {
        self.headers.push(*h);
    }
}

impl ReportingSink for Responses {
    fn report(&self) -> SinkReport {
        SinkReport {
            responses: self.by_key.len() as u64,
            events: self.events,
            ..SinkReport::default()
        }
    }
}

/// How replay runs beside the core.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Runner {
    /// Inline: every stage on the test's thread (`ReplicaCore::new`).
    Inline,
    /// Its own tile, polled after each core tick on the same thread (with `ring` bytes).
    Turns { ring: usize },
    /// Its own tile on its own thread.
    Thread,
    /// Its own tile in turn, the engine split (07 §7.2: the tile the replay BBO core, the lanes
    /// on `workers` workers polled by the tile).
    LanesInTurn { workers: usize, tiny: bool },
    /// Its own tile on its own thread, the lanes on `workers` threads of their own.
    LanesThreads { workers: usize, tiny: bool },
}

/// What a run replayed: first-copy responses by key, and the roots taken.
struct Replayed {
    by_key: HashMap<(u32, u64), Vec<u8>>,
    roots: Vec<(u64, [u8; 32])>,
    /// REP_Snapshots taken (07 §7.5), `(height, file)`.
    snaps: Vec<(u64, Vec<u8>)>,
    split: Option<SplitCounters>,
}

/// 07 §7.5's schedule in this home: participant 1 of 4, every 32 blocks (offset 8), so at the
/// root heights (every 8) 7, 39, 71, …
fn snap_policy() -> SnapPolicy {
    SnapPolicy::for_participant(32, 1, 4, 4)
}

#[test]
fn the_core_follows_the_box_over_lossy_paths_and_a_lossy_data_tier() {
    follow(Runner::Inline);
}

/// 07 §7.5: replay writes a REP_Snapshot at each of its participant's snapshot heights, each
/// the state its certified root commits: it restores to an engine whose state root is `R(h)`;
/// the header hash can be filled in after; a flipped byte in any section is refused.
#[test]
fn replay_takes_a_snapshot_at_its_heights_that_restores_to_its_root() {
    let r = follow(Runner::Inline);
    let p = snap_policy();
    let roots: HashMap<u64, [u8; 32]> = r.roots.iter().copied().collect();
    let want: Vec<u64> = r
        .roots
        .iter()
        .map(|&(h, _)| h)
        .filter(|&h| p.at(h))
        .collect();
    assert!(want.len() >= 2, "snapshot heights {want:?}");
    assert_eq!(r.snaps.iter().map(|s| s.0).collect::<Vec<_>>(), want);
    let e = EngineConfig::test_home(4, 4);
    for (h, file) in &r.snaps {
        let (eng, hdr) = vyrn_engine::load::restore(e.clone(), file).expect("restores");
        assert_eq!(hdr.meta.height, *h);
        assert_eq!(hdr.meta.epoch, 4);
        assert_eq!(Some(&hdr.state_root), roots.get(h), "R({h})");
        assert_eq!(eng.state_root(), hdr.state_root);
        assert_eq!(hdr.replication.root_gate_cursor, *h);
        // The node fills in header_hash(h) once the header is known.
        let mut f = file.clone();
        vyrn_engine::snapshot::set_header_hash(&mut f, &[7; 32]).unwrap();
        let (hdr2, _) = vyrn_engine::snapshot::read(&f).expect("reads");
        assert_eq!(hdr2.meta.header_hash, [7; 32]);
        assert_ne!(hdr2.file_hash, hdr.file_hash);
        // A flipped byte past the header (the table or a section) is refused, never loaded.
        for at in [200, file.len() / 2, file.len() - 1] {
            let mut bad = file.clone();
            bad[at] ^= 1;
            assert!(
                vyrn_engine::load::restore(e.clone(), &bad).is_err(),
                "byte {at} of {}",
                file.len()
            );
        }
    }
}

#[test]
fn replay_on_its_own_tile_replays_what_inline_replay_does() {
    let inline = follow(Runner::Inline);
    for runner in [
        Runner::Turns { ring: 1 << 22 },
        // Smaller than one frame's records: the front stages, nothing is lost.
        Runner::Turns { ring: 256 },
        Runner::Thread,
        Runner::LanesInTurn {
            workers: 1,
            tiny: false,
        },
        Runner::LanesInTurn {
            workers: 3,
            tiny: false,
        },
        // Rings of two between the BBO core and each lane: ops and events wait staged.
        Runner::LanesInTurn {
            workers: 2,
            tiny: true,
        },
        Runner::LanesThreads {
            workers: 2,
            tiny: false,
        },
        // Threads with rings of a few slots: the handover and the settle meet staged events.
        Runner::LanesThreads {
            workers: 1,
            tiny: true,
        },
    ] {
        let split = follow(runner);
        if let Runner::LanesInTurn { tiny: true, .. } = runner {
            let c = split.split.expect("split");
            assert!(c.events_staged > 0, "{c:?}: events waited for room");
        }
        assert_eq!(
            split.by_key, inline.by_key,
            "{runner:?}: the same responses"
        );
        assert!(inline.roots.len() >= 5, "{} roots", inline.roots.len());
        assert_eq!(
            split.roots, inline.roots,
            "{runner:?}: the same state roots"
        );
        // The same snapshots, byte for byte, from replay on its tile; the split engine (lanes
        // on workers) writes none.
        match runner {
            Runner::Turns { .. } | Runner::Thread => {
                assert!(!inline.snaps.is_empty());
                assert!(
                    split.snaps == inline.snaps,
                    "{runner:?}: the same snapshots"
                );
            }
            _ => assert!(split.snaps.is_empty(), "{runner:?}: no snapshot"),
        }
    }
}

/// The test home's box (epoch 4, 40 µs blocks) and a core configured to follow it.
fn test_box() -> (EngineConfig, u32, SimBox, CoreConfig) {
    let e = EngineConfig::test_home(4, 4);
    let epoch = 4u32;
    let home = SimBox::new(SeqConfig {
        engine: e.clone(),
        epoch,
        block_ns: 40_000,
        seq_key: [2; 32],
        voters: 4,
        rtx_ring_bytes: 8 << 20,
        tenure: vyrn_seq::shm::TenureId::FIRST,
    });
    let cc = CoreConfig {
        engine: e.clone(),
        epoch,
        tenure: 0,
        sender: 0,
        seq_key: home.seq_public(),
        n_boxes: 1,
        n_peers: 0,
        anchor: Anchor::default(),
    };
    (e, epoch, home, cc)
}

fn follow(runner: Runner) -> Replayed {
    let (e, epoch, mut home, cc) = test_box();
    let (mut core, mut tile, mut thread) = match runner {
        Runner::Inline => {
            let mut c = ReplicaCore::new(cc).unwrap();
            assert!(c.set_snapshots(snap_policy()));
            (c, None, None)
        }
        Runner::Turns { ring } => {
            let (c, mut t) = ReplicaCore::new_split(cc, ring, Responses::default()).unwrap();
            t.set_snapshots(snap_policy());
            (c, Some(t), None)
        }
        Runner::Thread => {
            let (c, mut t) = ReplicaCore::new_split(cc, 1 << 22, Responses::default()).unwrap();
            t.set_snapshots(snap_policy());
            t.prefault(1 << 10);
            let th = vyrn_replica::replay::tile::spawn(t, clock, None, Idle::Backoff).unwrap();
            (c, None, Some(th))
        }
        Runner::LanesInTurn { workers, tiny } => {
            let slots = if tiny {
                SplitSlots {
                    lane_in: 2,
                    fwd: 2,
                    ev: 2,
                }
            } else {
                SplitSlots::default()
            };
            let (c, t) = ReplicaCore::new_split_lanes(
                cc,
                1 << 22,
                Responses::default(),
                Workers::Inline(workers),
                slots,
            )
            .unwrap();
            (c, Some(t), None)
        }
        Runner::LanesThreads { workers, tiny } => {
            let (c, mut t) = ReplicaCore::new_split_lanes(
                cc,
                1 << 22,
                Responses::default(),
                Workers::Threads {
                    n: workers,
                    cores: Vec::new(),
                    idle: Idle::Backoff,
                },
                if tiny {
                    SplitSlots {
                        lane_in: 4,
                        fwd: 4,
                        ev: 4,
                    }
                } else {
                    SplitSlots::default()
                },
            )
            .unwrap();
            t.prefault(1 << 10);
            let th = vyrn_replica::replay::tile::spawn(t, clock, None, Idle::Backoff).unwrap();
            (c, None, Some(th))
        }
    };
    // 07 §7.4: a state root every 8 heights (the split runner must take the same ones).
    core.set_root_blocks(8, &Anchor::default());
    for s in &e.sessions {
        core.data_mut().set_home(s.session, 0);
    }
    let mut w = Workload::new(&e, 9, Mix::clean());
    let mut out = Out::default();
    let mut resp = Responses::default();
    let mut live: HashMap<(u32, u64), Vec<u8>> = HashMap::new();
    // The box's frames by (stream, frame_seq) (for NACKs) and the data box's DATA frames by
    // data_seq (for DataFetch).
    let mut frames: HashMap<(u8, u64), Vec<u8>> = HashMap::new();
    let mut data_frames: HashMap<u64, Vec<u8>> = HashMap::new();
    let mut late: Vec<(u64, u8, Vec<u8>)> = Vec::new();
    let mut snaps = Vec::new();
    let mut rng = 0x1234_5678_9abc_def1u64;
    let mut next = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let (mut data_seq, mut data_lost) = (0u64, 0u64);
    let tiles = home.tiles();
    let mut now = 0u64;
    for round in 0..5000 {
        if round < 3000 {
            if let Input::Packet { rx_ts, bytes } = w.next_input() {
                data_seq += 1;
                let mut b =
                    DataFrameBuilder::new(DataKind::Data, e.book, epoch as u16, data_seq, 0);
                b.push(&bytes).unwrap();
                data_frames.insert(data_seq, b.as_bytes().to_vec());
                if next() % 100 < 2 {
                    data_lost += 1; // lost on the way from the data box
                } else {
                    core.on_data_frame(0, b.as_bytes(), now, &mut out);
                }
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
            match ev {
                WireEvent::Frame { bytes, path, .. } => {
                    let (h, _) = vyrn_wire::frame::FrameHeader::parse(&bytes).unwrap();
                    if path == 0 {
                        frames.insert((h.stream, h.frame_seq), bytes.clone());
                    }
                    if next() % 100 < 4 {
                        continue; // lost on this path
                    }
                    late.push((now + next() % 4_000, path, bytes));
                }
                WireEvent::Resp { bytes, .. } => {
                    if let Some(k) = first_copy_key(&bytes) {
                        live.entry(k).or_insert(bytes);
                    }
                }
                _ => {}
            }
        }
        late.sort_by_key(|x| x.0);
        while late.first().is_some_and(|x| x.0 <= now) {
            let (_, p, b) = late.remove(0);
            core.on_path_frame(p, &b, now, &mut out);
        }
        core.tick(now, &mut out, &mut resp).expect("replay");
        if let Some(t) = tile.as_mut() {
            t.poll(now);
        }
        snaps.extend(std::iter::from_fn(|| core.take_snapshot()).map(|t| (t.height, t.file)));
        // The sequencer answers NACKs from its ring; the data box answers DataFetch::Range.
        for n in out.nacks.drain(..) {
            for fs in n.from_seq..=n.to_seq {
                if let Some(b) = frames.get(&(n.stream, fs)) {
                    let mut b = b.clone();
                    b[16] |= vyrn_wire::frame::FLAG_RETRANSMIT;
                    late.push((now + 2_000, 0, b));
                }
            }
        }
        for f in std::mem::take(&mut out.fetches) {
            if let DataFetch::Range { from, to, .. } = f {
                for s in from..=to {
                    if let Some(b) = data_frames.get(&s) {
                        core.on_data_frame(0, b, now, &mut out);
                    }
                }
            }
        }
        finalize(&mut home, core.order_rx().contiguous(), now);
    }
    core.settle(&mut resp);
    let (mut resp, split) = settle(&mut core, &mut out, resp, tile, thread.take(), now);
    snaps.extend(std::iter::from_fn(|| core.take_snapshot()).map(|t| (t.height, t.file)));
    if let Some(tx) = core.replay_tx() {
        assert_eq!(tx.counters().snapshots_dropped, 0);
    }
    assert!(out.faults.is_empty(), "{:?}", out.faults);
    assert!(data_lost > 10, "{data_lost} data frames lost");
    let c = core.order_rx().counters();
    assert!(c.holes > 10 && c.nacks >= 1 && c.repaired >= 1, "{c:?}");
    assert_eq!(out.other, 0, "no mismatch, no sequencer fetch");
    // Every completed block verifies as one range.
    let last = out.blocks.iter().map(|b| b.height).max().unwrap();
    assert!(last > 20, "{last} blocks");
    let hdr = out.headers.iter().find(|h| h.height == last).unwrap();
    assert_eq!(
        core.verify(1, last, &hdr.header_hash(), now, &mut out),
        VerifyOutcome::True
    );
    // RepAcks carried the contiguous frames, and they reached the end.
    let a = out.acks.last().expect("acks");
    assert!(
        a.contiguous_frame_seq[0] > 100 && a.contiguous_frame_seq[1] > 100,
        "{a:?}"
    );
    // Replay: every response of the box, byte for byte.
    assert!(live.len() > 1000);
    let sent = as_sent(&e, &resp.by_key);
    for (k, b) in &live {
        assert_eq!(sent.get(k), Some(b), "response {k:?}");
    }
    assert_eq!(sent.len(), live.len());
    let (dec, rep) = core.replay_lag();
    assert_eq!(dec, rep);
    let roots = (1..=last)
        .filter_map(|h| core.root(h).map(|r| (h, r)))
        .collect();
    Replayed {
        by_key: std::mem::take(&mut resp.by_key),
        roots,
        snaps,
        split,
    }
}

fn clock() -> u64 {
    0
}

type Thread = (
    std::sync::Arc<std::sync::atomic::AtomicBool>,
    std::thread::JoinHandle<ReplayTile<Responses>>,
);

/// The end of the input: inline, `resp` has every answer; on a tile, wait for its settle report
/// and take its sink back.
fn settle(
    core: &mut ReplicaCore,
    out: &mut Out,
    resp: Responses,
    mut tile: Option<ReplayTile<Responses>>,
    thread: Option<Thread>,
    now: u64,
) -> (Responses, Option<SplitCounters>) {
    if tile.is_none() && thread.is_none() {
        return (resp, None);
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while core.replay_tx().unwrap().settled() == 0 {
        assert!(std::time::Instant::now() < deadline, "the tile settles");
        match tile.as_mut() {
            Some(t) => {
                t.poll(now);
            }
            None => std::thread::yield_now(),
        }
        core.tick(now, out, &mut Responses::default())
            .expect("replay");
    }
    let t = match (tile, thread) {
        (Some(t), _) => t,
        (None, Some((stop, h))) => {
            stop.store(true, std::sync::atomic::Ordering::Release);
            h.join().expect("the replay thread")
        }
        (None, None) => unreachable!(),
    };
    assert_eq!(t.counters().malformed, 0);
    assert_eq!(t.waiting(), 0, "every record replayed, none left waiting");
    let split = t.split_counters();
    let report = t.report();
    let (mut sink, lanes) = t.into_sinks();
    if let Some(c) = split {
        // The lanes ran on their workers: their sinks hold the answers.
        assert!(c.steps > 1000 && c.handovers >= 5, "{c:?}");
        assert!(!lanes.is_empty());
        assert!(
            sink.by_key.is_empty(),
            "the BBO core's side answers nothing"
        );
        for l in lanes {
            let r = l.into_any().downcast::<Responses>().expect("Responses");
            sink.events += r.events;
            sink.by_key.extend(r.by_key);
        }
        assert_eq!(
            report.events, sink.events,
            "the lanes' reports reached the tile"
        );
    }
    (sink, split)
}

/// The box's path-A frames of a short run, in order, with the box's clock when each was sent.
fn box_frames() -> (CoreConfig, Vec<(u64, Vec<u8>)>) {
    let (e, _, mut home, cc) = test_box();
    let mut w = Workload::new(&e, 9, Mix::clean());
    let tiles = home.tiles();
    let mut frames = Vec::new();
    let mut now = 0u64;
    for _ in 0..600 {
        if let Input::Packet { rx_ts, bytes } = w.next_input() {
            home.receive(rx_ts, bytes);
        }
        now = now.max(w.now());
        for &t in &tiles {
            home.poll(t, now);
        }
        for ev in home.drain_wire() {
            if let WireEvent::Frame { bytes, path: 0, .. } = ev {
                frames.push((now, bytes));
            }
        }
        finalize(&mut home, [u64::MAX; 2], now);
    }
    (cc, frames)
}

/// 07 §3.7 (INV-REP-8) is about frames *sent*: a replica whose loop takes the box's frames
/// late, a little later for each (it was serving a peer's catch-up between them), decodes each
/// at its arrival and raises no REP_E_HASHLAG; taken at its loop's clock instead, the same
/// frames make a record look late past the budget — the sequencer fault that stopped a voter
/// serving a wiped peer's repairs.
#[test]
fn a_replica_that_takes_frames_late_measures_the_hash_lag_on_their_arrival() {
    let (cc, frames) = box_frames();
    assert!(frames.len() > 50, "{} frames", frames.len());
    let hashlag = |o: &Out| {
        o.faults
            .iter()
            .any(|f| f.err.code == vyrn_wire::error::RepE::HashLag)
    };
    // The loop falls 0.6 ms further behind per frame: under the 1 ms budget each time (no
    // stall the decoder sets aside), past it over a few frames.
    let lag = |i: usize| 600_000 * i as u64;
    let mut core = ReplicaCore::new(cc.clone()).unwrap();
    let mut out = Out::default();
    let mut resp = Responses::default();
    for (i, (sent, f)) in frames.iter().enumerate() {
        let now = sent + lag(i);
        core.on_path_frame_arrived(0, f, now, *sent + 1_000, &mut out);
        core.tick(now, &mut out, &mut resp).expect("replay");
    }
    assert!(!hashlag(&out), "{:?}", out.faults);
    assert!(core.order_rx().contiguous()[0] as usize >= frames.len() / 2);
    let mut core = ReplicaCore::new(cc).unwrap();
    let mut out = Out::default();
    for (i, (sent, f)) in frames.iter().enumerate() {
        let now = sent + lag(i);
        core.on_path_frame(0, f, now, &mut out);
        let _ = core.tick(now, &mut out, &mut resp);
    }
    assert!(
        hashlag(&out),
        "the loop's clock counts its own lag: {:?}",
        out.faults
    );
}
