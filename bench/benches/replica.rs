//! B-REP-7 at the replica (07 §7.3, §15): replay speed from the wire against live, in one run.
//!
//! A seeded clean-mix home runs through the real box (production tiles, seeded scheduler); its
//! frames (path A) and copy 2 of every packet (DATA frames) are captured. Then, each round from
//! a fresh state:
//! - **baseline**: the live engine (`LiveEngine`: lanes, cut, BBO) on the same packets;
//! - **replica**: the whole receive side of a replica (`ReplicaCore`: order RX, the decoder, the
//!   data side with its own BLAKE3 of every payload and the join, and replay) on the captured
//!   frames and DATA frames, to the last response; copy 2 runs 64 packets ahead of the frames'
//!   records;
//! - **replay on its own thread** (07 §7.2's replay cores, `replay_tile`): the front (order RX,
//!   the decoder, the data side) on the bench's thread hands replay its input over an SPSC ring,
//!   the replay tile runs on a second thread; and each of the two tiles alone (`split`: the
//!   front into a ring that holds the whole capture, then the tile draining it);
//! - **replay split further** (`lanes`, `replay_split`): the tile as the replay BBO core with the
//!   lanes on a worker — polled in turn (one thread: the split's own cost) or on a thread of
//!   its own — from the full ring, and the three of 07 §7.2's map in the process: the front,
//!   the replay BBO core and the replay lanes on three threads;
//! - and its stages one at a time, on 07 §7.2's core map, as §7.3's budget table counts them
//!   (on the REF box each has its own cores, so replay runs at the speed of the slowest), each
//!   fed what its upstream stage hands it, prepared outside the timing: **order RX** (core 1:
//!   dedupe, holes, RepAck, in-order delivery), **decoder + join + roots** (core 3: the
//!   decoder, step merge, structural checks, `order_root`, the data join against copy 2 already
//!   stored, `data_root`, each header's `seq_sig`), **data side** (the data cores: parse, the
//!   replica's own BLAKE3 of every payload, the store), **replay** (the replay cores: the
//!   decoded records, hashes, steps and closed blocks through `Replayer`, with the stored payloads,
//!   to the last response).
//!
//! Budget (07 §15 B-REP-7): replay ≥ 1.5× live at peak (REP_REPLAY_SPEEDUP_PEAK). Per message,
//! medians over rounds; the ratios are what to read: the whole receive side on one thread, and
//! each stage's speed against live (the pipeline's bound is the smallest).

use std::collections::HashMap;

use std::collections::VecDeque;
use vyrn_bench::{enabled, measure_with_setup, quick, ratio, rounds};
use vyrn_engine::bbo::{BboSink, OpQueues};
use vyrn_engine::home::{LiveEngine, NullEngineSink};
use vyrn_engine::lane::LaneSink;
use vyrn_engine::workload::Mix;
use vyrn_engine::EngineConfig;
use vyrn_engine::{Bbo, Capture, Fwd, Lane, LaneEvent, RespOut, StepOut};
use vyrn_replica::front::core::{CoreConfig, NullOut, ReplicaCore};
use vyrn_replica::front::data::{DataConfig, DataSide, NullDataOut as NullData};
use vyrn_replica::front::decode::{DecodedOut, Decoder};
use vyrn_replica::front::order_rx::{OrderRx, RxAlarm, RxConfig, RxOut};
use vyrn_replica::front::verdict::{Anchor, Verdicts};
use vyrn_replica::node::ReplaySink;
use vyrn_replica::replay::split::{SplitSlots, Workers};
use vyrn_replica::replay::tile::{spawn, Idle, ReplayTile, REPLAY_RING_BYTES};
use vyrn_replica::replay::Replayer;
use vyrn_seq::testkit::capture::{capture, capture_batched, capture_pipelined};
use vyrn_wire::decoder::{Awaiting, BlockRoots, Pos};
use vyrn_wire::header::BlockHeader;
use vyrn_wire::msg::ctrl::{Nack, RepAck, RepairReq};
use vyrn_wire::msg::PktKey;
use vyrn_wire::records::{PacketRecord, Step};

/// Core 1's downstream: counts what order RX delivers.
struct DropRx(u64);
impl RxOut for DropRx {
    fn deliver(&mut self, _stream: u8, _fs: u64, _frame: &[u8], _peer: bool) {
        self.0 += 1;
    }
    fn nack(&mut self, _n: &Nack) {}
    fn repair(&mut self, _peer: usize, _r: &RepairReq) {}
    fn ack(&mut self, _a: &RepAck) {}
    fn alarm(&mut self, _a: RxAlarm) {}
}

/// Core 3's work on the decoder's output: the join, the roots, the headers (as `ReplicaCore`
/// does, less the hand-off to replay).
struct Core3<'a> {
    data: &'a mut DataSide,
    verdicts: &'a mut Verdicts,
    now: u64,
    refused: u64,
    blocks: u64,
    /// 0: the decoder alone; 1: and the join and the roots; 2: and each header's `seq_sig`.
    parts: u8,
}
impl DecodedOut for Core3<'_> {
    fn record(&mut self, _h: u64, at: Pos, r: &PacketRecord) {
        if self.parts > 0
            && self
                .data
                .on_record(at.stream, r, self.now, &mut NullData)
                .is_err()
        {
            self.refused += 1;
        }
    }
    fn hash(&mut self, at: Pos, _lane: u8, rec: &Awaiting, pkt_hash: u64) {
        let key = PktKey {
            session: rec.session,
            pkt_seq: rec.pkt_seq,
        };
        if self.parts > 0
            && self
                .data
                .on_hash(at.stream, key, pkt_hash, self.now, &mut NullData)
                .is_err()
        {
            self.refused += 1;
        }
    }
    fn mark(&mut self, stream: u8, height: u64, _last_step: u64) {
        if self.parts > 0 && self.data.on_mark(stream, height).is_err() {
            self.refused += 1;
        }
    }
    fn block(&mut self, b: &BlockRoots) {
        self.blocks += 1;
        if self.parts > 0 {
            self.verdicts.on_block(b);
        }
    }
    fn header(&mut self, h: &BlockHeader) {
        if self.parts > 1 {
            self.verdicts.on_header(h);
        }
    }
}

/// What the decoder hands replay, captured once.
enum Ev {
    Rec(PacketRecord),
    Hash(u8, u64, u64),
    Step(Step, Vec<u64>, Vec<u8>),
    Block(u64, u64),
}
#[derive(Default)]
struct Tap(Vec<Ev>);
impl DecodedOut for Tap {
    fn record(&mut self, _h: u64, _at: Pos, r: &PacketRecord) {
        self.0.push(Ev::Rec(*r));
    }
    fn hash(&mut self, _at: Pos, lane: u8, rec: &Awaiting, pkt_hash: u64) {
        self.0.push(Ev::Hash(lane, rec.first_lane_seq, pkt_hash));
    }
    fn step(&mut self, s: &Step, cut: &[u64], payload: &[u8]) {
        self.0.push(Ev::Step(*s, cut.to_vec(), payload.to_vec()));
    }
    fn block(&mut self, b: &BlockRoots) {
        self.0.push(Ev::Block(b.height, b.last_step));
    }
}

const EPOCH: u32 = 3;

/// The `avg` shape's name.
const AVG_SHAPE: &str = "average load (the peak mix, frames of fewer packets)";
/// 07 §7.3's average load: a tenth of peak.
const AVG_LOAD: f64 = 0.1;

fn main() {
    if !enabled("replica") {
        return;
    }
    let r = rounds(if quick() { 3 } else { 15 });
    let cfg = EngineConfig::test_home(4, 8);
    // `VYRN_BENCH_SHAPE=peak`, `pipe` or `light` (default all three).
    let shapes = std::env::var("VYRN_BENCH_SHAPE").unwrap_or_else(|_| "peak,pipe,avg,light".into());
    for shape in shapes.split(',') {
        match shape {
            // 07 §3.13's peak: 10 msgs per packet, ORDER frames full (~8 packets each), 1 kHz
            // blocks (07 §6.1). The tiles are polled once per 16 packets received.
            "peak" => {
                let n = if quick() { 400 } else { 8_000 };
                let c = capture_batched(&cfg, EPOCH, 1_000_000, 5, Mix::peak(), n, 16);
                run("peak mix", &cfg, &c, r);
            }
            // The peak mix again, captured with the box's lanes running beside its BBO core (the
            // cut core, then the lanes, then the BBO core each round): records'
            // `fills_applied` lag by a batch, the slack the replay lanes and replay BBO core
            // overlap in (`capture_pipelined`).
            "pipe" => {
                let n = if quick() { 400 } else { 8_000 };
                let c = capture_pipelined(&cfg, EPOCH, 1_000_000, 5, Mix::peak(), n, 16);
                run("peak mix, lanes beside the BBO core", &cfg, &c, r);
            }
            // 07 §7.3's average load: the peak mix's packets arriving at a tenth of the rate, so
            // the stream cores flush more often and frames carry fewer packets (the tiles
            // polled every second packet). B-REP-7's second figure: how fast replay runs
            // against those arrivals, the live engine's capacity on the same packets (measured
            // here) times AVG_LOAD.
            "avg" => {
                let n = if quick() { 400 } else { 8_000 };
                let c = capture_batched(&cfg, EPOCH, 1_000_000, 5, Mix::peak(), n, 2);
                run(AVG_SHAPE, &cfg, &c, r);
            }
            // A lightly loaded box: 1 msg per packet, the tiles polled after every packet (a
            // frame or two per packet), 100 µs blocks.
            "light" => {
                let n = if quick() { 2_000 } else { 40_000 };
                let c = capture(&cfg, EPOCH, 100_000, 5, Mix::clean(), n);
                run("light load", &cfg, &c, r);
            }
            other => eprintln!("VYRN_BENCH_SHAPE: no shape {other:?} (peak, pipe, avg, light)"),
        }
    }
}

/// Every part of the bench on one capture.
fn run(shape: &str, cfg: &EngineConfig, c: &vyrn_seq::testkit::capture::Capture, r: usize) {
    // `VYRN_BENCH_STAGE=replay` (comma-separated parts of names): the baseline and only the
    // stages named (profiling one stage).
    let on = |name: &str| {
        std::env::var("VYRN_BENCH_STAGE").map_or(true, |v| v.split(',').any(|p| name.contains(p)))
    };
    let bytes: usize = c.frames.iter().map(|f| f.len()).sum();
    println!(
        "\nB-REP-7 at the replica, {shape}: {} packets ({} msgs), {} frames ({:.1} msgs and {:.0} bytes a frame), {} DATA frames",
        c.packets.len(),
        c.msgs,
        c.frames.len(),
        c.msgs as f64 / c.frames.len().max(1) as f64,
        bytes as f64 / c.frames.len().max(1) as f64,
        c.data.len()
    );
    let live = measure_with_setup(
        "baseline: live engine, same packets (per msg)",
        r,
        c.msgs,
        || {
            let mut e = LiveEngine::new(cfg.clone());
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
        engine: cfg.clone(),
        epoch: EPOCH,
        tenure: 0,
        sender: 0,
        seq_key: c.seq_key,
        n_boxes: 1,
        n_peers: 0,
        anchor: Anchor::default(),
    };
    // As a replica process starts (`vyrn-replica`'s node): books and queues faulted in.
    let fresh_core = || {
        let mut core = ReplicaCore::new(core_cfg.clone()).expect("core");
        core.prefault();
        core
    };
    // Copy 2 runs a little ahead of the ORDER frames, as on a live home (the client sends both
    // copies at once; the data box relays in microseconds, the order stream waits for the
    // box's flush): 64 packets ahead of the frames' records, at the capture's packets per frame.
    let (n_data, n_frames) = (c.data.len(), c.frames.len().max(1));
    let ahead = move |i: usize| (i + 1) * n_data / n_frames + 64;
    // The capture into a core as a replica receives it (the tiles ticked once per 16 frames),
    // then the end of the input; answers to `sink` when replay runs inline.
    let feed = |core: &mut ReplicaCore, sink: &mut ReplaySink| {
        let mut out = NullOut;
        let mut d = 0;
        for (i, f) in c.frames.iter().enumerate() {
            while d < c.data.len() && d < ahead(i) {
                core.on_data_frame(0, &c.data[d], i as u64, &mut out);
                d += 1;
            }
            core.on_path_frame(0, f, i as u64, &mut out);
            if i % 16 == 15 {
                let _ = core.tick(i as u64, &mut out, sink);
            }
        }
        while d < c.data.len() {
            core.on_data_frame(0, &c.data[d], 0, &mut out);
            d += 1;
        }
        let _ = core.tick(c.frames.len() as u64, &mut out, sink);
        core.settle(sink);
    };
    let mut answers = HashMap::new();
    let replica = on("whole").then(|| {
        measure_with_setup(
            "replica: order RX + decode + data side + replay (per msg)",
            r,
            c.msgs,
            fresh_core,
            |mut core| {
                let mut sink = ReplaySink::default();
                feed(&mut core, &mut sink);
                answers.insert(0, sink.responses);
                core
            },
        )
    });
    // 07 §7.2: replay on its own core. The front (order RX, the decoder, the data side) on
    // this thread hands replay its input over a ring; the replay tile runs on a second thread,
    // spinning; the round ends when replay has answered the last response.
    // A threaded round's end: the front fed everything; wait for replay's settle report (the
    // front yields while it waits: on two cores a spinning front starves a third thread), then
    // stop the thread and take the tile back.
    let finish = |core: &mut ReplicaCore,
                  (stop, th): (
        std::sync::Arc<std::sync::atomic::AtomicBool>,
        std::thread::JoinHandle<ReplayTile<ReplaySink>>,
    )| {
        let mut out = NullOut;
        let mut none = ReplaySink::default();
        feed(core, &mut none);
        while core.replay_tx().is_some_and(|t| t.settled() == 0) {
            let _ = core.tick(c.frames.len() as u64, &mut out, &mut none);
            std::thread::yield_now();
        }
        stop.store(true, std::sync::atomic::Ordering::Release);
        th.join().expect("replay thread")
    };
    let threaded = on("thread").then(|| {
        measure_with_setup(
            "replica, replay on its own thread: front and replay tile on two threads (per msg)",
            r,
            c.msgs,
            || {
                let (mut core, mut tile) = ReplicaCore::new_split(
                    core_cfg.clone(),
                    REPLAY_RING_BYTES,
                    ReplaySink::default(),
                )
                .expect("core");
                core.prefault();
                tile.prefault(1 << 14);
                let th = spawn(tile, || 0, None, Idle::Spin).expect("replay thread");
                (core, th)
            },
            |(mut core, th)| {
                let tile = finish(&mut core, th);
                answers.insert(1, tile.report().responses);
                (core, tile)
            },
        )
    });
    // 07 §7.2's map in the process: the front on this thread, the replay BBO core (the tile)
    // and the replay lanes on threads of their own — three threads, on however many cores the
    // box has (this VM: two, so the three share them and wait as a shared box's do).
    let threaded_lanes = on("lanes").then(|| {
        measure_with_setup(
            "replica, front + replay BBO core + replay lanes on three threads (per msg)",
            r,
            c.msgs,
            || {
                let (mut core, mut tile) = ReplicaCore::new_split_lanes(
                    core_cfg.clone(),
                    REPLAY_RING_BYTES,
                    ReplaySink::default(),
                    Workers::Threads {
                        n: 1,
                        cores: Vec::new(),
                        idle: Idle::Backoff,
                    },
                    SplitSlots::default(),
                )
                .expect("core");
                core.prefault();
                tile.prefault(1 << 14);
                let th = spawn(tile, || 0, None, Idle::Backoff).expect("replay thread");
                (core, th)
            },
            |(mut core, th)| {
                let tile = finish(&mut core, th);
                answers.insert(5, tile.report().responses);
                (core, tile)
            },
        )
    });
    if let Some(t) = &threaded_lanes {
        println!(
            "  replay speed from the wire vs live, 07 §7.2's map on three threads: {:.2}x",
            live.p50_ns() / t.p50_ns()
        );
    }
    if let (Some(a), Some(b)) = (answers.get(&0), answers.get(&5)) {
        assert_eq!(
            a, b,
            "the three-thread replica answered as inline replay did"
        );
    }
    // The two tiles of that split, each alone: the front into a ring that holds the whole
    // capture (nothing drains it), then the replay tile draining that ring.
    let feed_front = |core: &mut ReplicaCore| feed(core, &mut ReplaySink::default());
    let split_fresh = || {
        let (mut core, mut tile) =
            ReplicaCore::new_split(core_cfg.clone(), 1 << 27, ReplaySink::default()).expect("core");
        core.prefault();
        tile.prefault(1 << 14);
        (core, tile)
    };
    let front = on("split").then(|| {
        measure_with_setup(
            "  front alone: order RX + decode + data side, into the ring (per msg)",
            r,
            c.msgs,
            split_fresh,
            |(mut core, tile)| {
                feed_front(&mut core);
                assert_eq!(core.replay_tx().map(|t| t.staged()), Some(0));
                (core, tile)
            },
        )
    });
    let tile_alone = on("split").then(|| {
        measure_with_setup(
            "  replay tile alone, from the full ring (per msg)",
            r,
            c.msgs,
            || {
                let (mut core, tile) = split_fresh();
                feed_front(&mut core);
                (core, tile)
            },
            |(core, mut tile)| {
                while tile.poll(0) {}
                answers.insert(2, tile.sink().responses);
                (core, tile)
            },
        )
    });
    // 07 §7.2 further: the tile as the replay BBO core, its lanes on a worker — polled in turn
    // by the tile (one thread: the split's own cost), or on a thread of its own (two threads).
    let lanes_fresh = |workers: Workers| {
        let (mut core, mut tile) = ReplicaCore::new_split_lanes(
            core_cfg.clone(),
            1 << 27,
            ReplaySink::default(),
            workers,
            SplitSlots::default(),
        )
        .expect("core");
        core.prefault();
        tile.prefault(1 << 14);
        feed_front(&mut core);
        (core, tile)
    };
    let lanes_turn = on("lanes").then(|| {
        measure_with_setup(
            "  replay tile split, BBO core + lanes polled in turn (one thread), from the full ring (per msg)",
            r,
            c.msgs,
            || lanes_fresh(Workers::Inline(1)),
            |(core, mut tile)| {
                while tile.poll(0) {}
                answers.insert(3, tile.report().responses);
                (core, tile)
            },
        )
    });
    let lanes_thread = on("lanes").then(|| {
        measure_with_setup(
            "  replay tile split, BBO core on this thread + lanes on a second, from the full ring (per msg)",
            r,
            c.msgs,
            || {
                lanes_fresh(Workers::Threads {
                    n: 1,
                    cores: Vec::new(),
                    idle: Idle::Spin,
                })
            },
            |(core, mut tile)| {
                while tile.poll(0) {}
                answers.insert(4, tile.report().responses);
                (core, tile)
            },
        )
    });
    for k in [3, 4] {
        if let (Some(a), Some(b)) = (answers.get(&0), answers.get(&k)) {
            assert_eq!(a, b, "the split replay tile answered as inline replay did");
        }
    }
    if let Some(t) = &lanes_turn {
        println!(
            "  the split on one thread vs live: {:.2}x (its own cost: rings, words, handovers)",
            live.p50_ns() / t.p50_ns()
        );
    }
    if let Some(t) = &lanes_thread {
        println!(
            "  replay from the ring, BBO core and lanes on two threads: {:.2}x live{}",
            live.p50_ns() / t.p50_ns(),
            tile_alone.as_ref().map_or(String::new(), |a| format!(
                ", {:.2}x the one-thread tile",
                a.p50_ns() / t.p50_ns()
            ))
        );
    }
    if let (Some(a), Some(b)) = (answers.get(&0), answers.get(&2)) {
        assert_eq!(a, b, "the replay tile alone answered as inline replay did");
    }
    if let (Some(a), Some(b)) = (answers.get(&0), answers.get(&1)) {
        assert_eq!(
            a, b,
            "replay on its own thread answered as inline replay did"
        );
    }
    if let (Some(f), Some(t)) = (&front, &tile_alone) {
        println!(
            "  the split's tiles alone vs live: front {:.2}x, replay tile {:.2}x (the pair's bound on two cores: {:.2}x)",
            live.p50_ns() / f.p50_ns(),
            live.p50_ns() / t.p50_ns(),
            live.p50_ns() / f.p50_ns().max(t.p50_ns())
        );
    }
    if let Some(t) = &threaded {
        ratio(t, &live);
        println!(
            "  replay speed from the wire vs live, replay on its own thread (2 threads vs live's 1) = {:.2}x",
            live.p50_ns() / t.p50_ns()
        );
        if shape == AVG_SHAPE {
            // 07 §7.3: at average load the stream arrives at AVG_LOAD of live's capacity; replay
            // runs at its own capacity, so a replica behind catches up at this multiple.
            println!(
                "  B-REP-7 at average load: arrivals at {:.0} % of the live engine's capacity on these packets ({:.2} M msgs/s here), replay on its own thread {:.2} M msgs/s = {:.1}x the arrivals (≥ 10x)",
                AVG_LOAD * 100.0,
                AVG_LOAD * 1e3 / live.p50_ns(),
                1e3 / t.p50_ns(),
                live.p50_ns() / t.p50_ns() / AVG_LOAD
            );
        }
        if let Some(one) = &replica {
            println!(
                "  replay on its own thread vs every stage on one thread = {:.2}x",
                one.p50_ns() / t.p50_ns()
            );
        }
    }
    if let Some(replica) = &replica {
        ratio(replica, &live);
        println!(
            "  replay speed from the wire vs live = {:.2}x (B-REP-7: ≥ 1.5x at peak); {} answers replayed per round",
            live.p50_ns() / replica.p50_ns(),
            answers.get(&0).copied().unwrap_or(0)
        );
    }

    // 07 §7.3: each stage alone, against live, on 07 §7.2's cores. Each stage is fed what
    // its upstream stage hands it (prepared outside the timing) and hands on what its
    // downstream stage takes.
    let n_streams = cfg.layout.n_streams;
    let rx_cfg = RxConfig {
        book: cfg.book,
        epoch: EPOCH,
        tenure: 0,
        sender: 0,
        n_streams,
        n_peers: 0,
        timing: Default::default(),
    };
    // Core 1: order RX on the replication paths — dedupe, holes, RepAck — delivering in order.
    let order_rx = on("order_rx").then(|| {
        measure_with_setup(
            "stage: order RX, core 1 (per msg)",
            r,
            c.msgs,
            || OrderRx::new(rx_cfg),
            |mut rx| {
                let mut o = DropRx(0);
                for (i, f) in c.frames.iter().enumerate() {
                    rx.on_frame(0, f, i as u64, &mut o);
                }
                assert_eq!(o.0, c.frames.len() as u64, "order RX delivered every frame");
                rx
            },
        )
    });
    // The data side as core 3 finds it on a live home: copy 2 stored by the data cores.
    let stored = || {
        let mut d = DataSide::new(DataConfig::new(cfg.book, EPOCH as u16, 1, 0, n_streams));
        d.prefault();
        for (i, f) in c.data.iter().enumerate() {
            d.on_data_frame(0, f, i as u64, &mut NullData)
                .expect("data frame");
        }
        d
    };
    // Core 3: the decoder, step merge, structural checks, `order_root`, the data join,
    // `data_root`, each header's `seq_sig` — and the same without the header checks, and the
    // decoder alone, to split its time.
    let core3 = |name: &str, parts: u8| {
        measure_with_setup(
            name,
            r,
            c.msgs,
            || {
                (
                    Decoder::new(cfg.layout, 1).expect("decoder"),
                    stored(),
                    Verdicts::new(c.seq_key, EPOCH, Anchor::default()),
                )
            },
            |(mut dec, mut data, mut verdicts)| {
                let mut o = Core3 {
                    data: &mut data,
                    verdicts: &mut verdicts,
                    now: 0,
                    refused: 0,
                    blocks: 0,
                    parts,
                };
                for (i, f) in c.frames.iter().enumerate() {
                    o.now = i as u64;
                    dec.on_frame(f, i as u64, &mut o);
                }
                assert_eq!(o.refused, 0, "every record joined");
                assert!(o.blocks > 0, "blocks closed");
                (dec, data, verdicts)
            },
        )
    };
    let decoder = on("decoder").then(|| {
        core3(
            "stage: decoder + join + roots + seq_sig, core 3 (per msg)",
            2,
        )
    });
    let core3_less_sig =
        on("decoder").then(|| core3("  core 3 less the headers' seq_sig (per msg)", 1));
    if on("decoder") {
        let dec_alone = core3("  core 3: the decoder alone (per msg)", 0);
        // Inside the decoder alone: keeping the newest blocks' ORDER bytes for a seal over a
        // tail that spans marks (07 §9.4, `front::failover::tail`), on the same sections.
        #[derive(Default)]
        struct Sections(Vec<(u8, u64, Vec<u8>)>);
        impl DecodedOut for Sections {
            fn order_bytes(&mut self, stream: u8, height: u64, bytes: &[u8]) {
                self.0.push((stream, height, bytes.to_vec()));
            }
        }
        let mut secs = Sections::default();
        let mut dec = Decoder::new(cfg.layout, 1).expect("decoder");
        for (i, f) in c.frames.iter().enumerate() {
            dec.on_frame(f, i as u64, &mut secs);
        }
        let tail = measure_with_setup(
            "    of which the seal's tail bytes (per msg)",
            r,
            c.msgs,
            vyrn_replica::front::failover::tail::TailBytes::default,
            |mut t| {
                for (s, h, b) in &secs.0 {
                    t.push(*s, *h, b);
                }
                t
            },
        );
        println!(
            "    the tail bytes are {:.1}% of the decoder alone",
            tail.p50_ns() / dec_alone.p50_ns() * 100.0
        );
    }
    let data_only = on("data").then(|| {
        measure_with_setup(
            "stage: data side, DATA frames alone (per msg)",
            r,
            c.msgs,
            fresh_core,
            |mut core| {
                let mut out = NullOut;
                for (i, d) in c.data.iter().enumerate() {
                    core.on_data_frame(0, d, i as u64, &mut out);
                }
                core
            },
        )
    });
    // Replay (cores 2, 8–49): what the decoder hands it — records, hashes, steps, headers —
    // with copy 2's payloads from the data side, to the last response.
    let mut tap = Tap::default();
    {
        let mut dec = Decoder::new(cfg.layout, 1).expect("decoder");
        for (i, f) in c.frames.iter().enumerate() {
            dec.on_frame(f, i as u64, &mut tap);
        }
    }
    let payloads = stored();
    // `VYRN_BENCH_SLACK=1`: how far ahead of the steps that need them the capture's records
    // may run (first step whose cut covers the record less its `fills_applied`): the slack
    // replay's lanes and BBO core can overlap in, by log2 bucket.
    if std::env::var("VYRN_BENCH_SLACK").is_ok() {
        let mut steps: Vec<(u64, Vec<u64>)> = Vec::new();
        let mut recs = Vec::new();
        for ev in &tap.0 {
            match ev {
                Ev::Step(s, cut, _) => steps.push((s.step, cut.clone())),
                Ev::Rec(r) => recs.push(*r),
                _ => {}
            }
        }
        steps.sort_by_key(|x| x.0);
        let mut hist = std::collections::BTreeMap::new();
        for r in &recs {
            let last = r.first_lane_seq + r.count.max(1) as u64 - 1;
            let i = steps.partition_point(|(_, c)| c[r.lane as usize] < last);
            let c = steps.get(i).map_or(u64::MAX, |x| x.0);
            let d = c as i64 - r.fills_applied as i64;
            let b = if d <= 0 {
                d
            } else {
                64 - (d as u64).leading_zeros() as i64
            };
            *hist.entry(b).or_insert(0u64) += 1;
        }
        println!(
            "  slack, the first step needing a record less its fills_applied (log2 buckets: records): {hist:?}"
        );
    }
    let want = answers.get(&0).copied().unwrap_or(0);
    let replay_only = on("replay").then(|| {
        measure_with_setup(
            "stage: replay, the decoded stream with its payloads (per msg)",
            r,
            c.msgs,
            || {
                let mut p = Replayer::new(cfg.clone());
                p.prefault();
                p
            },
            |mut p| {
                let mut sink = ReplaySink::default();
                for (i, ev) in tap.0.iter().enumerate() {
                    match ev {
                        Ev::Rec(rec) => p.on_record(rec),
                        Ev::Hash(lane, first, h) => p.on_hash(*lane, *first, *h),
                        Ev::Step(s, cut, pl) => p.on_step(s, cut, pl),
                        Ev::Block(h, last) => p.on_block(*h, *last),
                    }
                    if i % 64 == 63 {
                        p.pump(&payloads, &mut sink).expect("replay");
                    }
                }
                p.pump(&payloads, &mut sink).expect("replay");
                p.settle(&mut sink);
                if replica.is_some() {
                    assert_eq!(
                        sink.responses, want,
                        "replay answered as the whole replica did"
                    );
                }
                p
            },
        )
    });
    // 07 §7.3 counts replay per core: the replay BBO core does the live BBO core's work (both
    // run `Bbo::execute`; live chooses each step's op, replay pops the one its StepRecord
    // names), a replay lane does a live lane's without the NIC, the `tag_seq` MAC and the
    // full hash. Each core alone, live against replay, on one live run's log.
    let per_core = on("core").then(|| per_core(cfg, c, r, &payloads));
    let speed = |m: &vyrn_bench::Stats| live.p50_ns() / m.p50_ns();
    let stages: Vec<(&str, f64)> = [
        ("order RX (core 1)", &order_rx),
        ("decoder (core 3)", &decoder),
        ("data side", &data_only),
        ("replay", &replay_only),
    ]
    .into_iter()
    .filter_map(|(name, m)| m.as_ref().map(|m| (name, speed(m))))
    .collect();
    for &(name, x) in &stages {
        println!("  stage speed vs live: {name:<20} {x:.2}x");
    }
    if stages.is_empty() {
        return;
    }
    let (slowest, bound) =
        stages
            .iter()
            .copied()
            .fold(("", f64::MAX), |a, b| if b.1 < a.1 { b } else { a });
    println!(
        "  pipeline bound, each stage on one thread against the whole live engine on one: {bound:.2}x, set by the {slowest}"
    );
    if let Some((bbo_live_ns, bbo, lanes)) = per_core {
        println!(
            "  per core, replay vs live at the same load: BBO core {bbo:.2}x, lanes {lanes:.2}x; \
             at 07 §7.3's live load at peak (0.60 on both): BBO core {:.2}x, lanes {:.2}x",
            bbo / 0.6,
            lanes / 0.6
        );
        // The serial cores of 07 §7.2 (order RX, core 3) keep pace with the live box's serial
        // bound, its BBO core, which runs at 0.60 load at peak: live spends bbo_live_ns / 0.6
        // of time per message.
        let mut map: Vec<(&str, f64)> = vec![
            ("replay BBO core (core 2)", bbo / 0.6),
            ("replay lanes", lanes / 0.6),
        ];
        for (name, m) in [
            ("order RX (core 1)", &order_rx),
            ("core 3 with the header checks", &decoder),
            ("core 3", &core3_less_sig),
        ] {
            if let Some(m) = m {
                let x = bbo_live_ns / 0.6 / m.p50_ns();
                println!(
                    "  {name} vs the live BBO core's time at peak ({:.1} ns/msg): {x:.2}x",
                    bbo_live_ns / 0.6,
                );
                if name != "core 3 with the header checks" {
                    map.push((name, x));
                }
            }
        }
        // Each header's `seq_sig` is a check of the vote (07 §6.4 item 1), the voter's work
        // (core 4), not in 07 §7.2's list for core 3: its cost alone, on the voter's core.
        if let (Some(all), Some(less)) = (&decoder, &core3_less_sig) {
            let sig = (all.p50_ns() - less.p50_ns()).max(0.01);
            let x = bbo_live_ns / 0.6 / sig;
            println!("  header seq_sig (core 4): {sig:.2} ns/msg, {x:.2}x");
            map.push(("header seq_sig (core 4)", x));
        }
        // The data cores (six on REF) against the whole live engine on one thread: a bound
        // that is, if anything, low.
        if let Some(m) = &data_only {
            map.push(("data side (one core)", speed(m)));
        }
        if let Some(&(name, x)) = map.iter().min_by(|a, b| a.1.total_cmp(&b.1)) {
            println!(
                "  B-REP-7 on 07 §7.2's map, each stage on its own cores: {x:.2}x, set by the {name} \
                 (≥ 1.5x at peak; the replica process runs them on one thread, or two with replay on its own)"
            );
        }
    }
}

/// Counts what a core emits (each engine core's output goes to a ring in the box and the
/// replica alike; counting keeps both sides' cost equal and small).
#[derive(Default)]
struct CoreCount(u64);
impl BboSink for CoreCount {
    fn step(&mut self, _s: &StepOut<'_>) {
        self.0 += 1;
    }
    fn event(&mut self, _lane: u8, _ev: &LaneEvent) {
        self.0 += 1;
    }
}
impl LaneSink for CoreCount {
    fn record(&mut self, _rec: &PacketRecord, _enc: &[u8], _payload: &[u8]) {}
    fn hash(&mut self, _lane: u8, _first: u64, _full: &[u8; 32]) {}
    fn forward(&mut self, _f: &Fwd) {
        self.0 += 1;
    }
    fn respond(&mut self, _r: &RespOut<'_>) {
        self.0 += 1;
    }
}

/// The lane → BBO rings, filled with every op a live run forwarded.
struct Ops(Vec<VecDeque<Fwd>>);
impl OpQueues for Ops {
    fn head(&self, lane: usize) -> Option<&Fwd> {
        self.0.get(lane).and_then(|q| q.front())
    }
    fn pop(&mut self, lane: usize) -> Option<Fwd> {
        self.0.get_mut(lane).and_then(|q| q.pop_front())
    }
}

/// 07 §7.3 per core, live against replay on one live run's log (the same packets): the BBO
/// core (live: `Bbo::poll` at each logged step's cut, choosing the same op; replay:
/// `Bbo::replay` of the logged step) and the lanes (live: `Lane::on_packet` with the MAC and
/// the full hash; replay: the join's read of copy 2 from the data side's store and
/// `Lane::replay_packet`), each lane applying the BBO core's events before each record as its
/// `fills_applied` says. Returns the live BBO core's time per message and the speeds (live
/// time / replay time) of the BBO core and the lanes.
fn per_core(
    cfg: &EngineConfig,
    c: &vyrn_seq::testkit::capture::Capture,
    r: usize,
    payloads: &DataSide,
) -> (f64, f64, f64) {
    let mut log = Capture::default();
    let mut e = LiveEngine::new(cfg.clone());
    for (i, (ts, b)) in c.packets.iter().enumerate() {
        let _ = e.submit(*ts, *ts, b, &mut log);
        if i % 4 == 3 {
            let _ = e.poll(*ts, &mut log);
        }
    }
    let _ = e.poll(u64::MAX / 2, &mut log);
    e.settle(&mut log);
    let n = cfg.layout.n_lanes as usize;
    let ops = || {
        let mut q = Ops((0..n).map(|_| VecDeque::new()).collect());
        for f in &log.forwards {
            q.0[f.lane as usize].push_back(*f);
        }
        q
    };
    let bbo = |name: &str, live: bool| {
        measure_with_setup(
            name,
            r,
            c.msgs,
            || (Bbo::new(cfg), ops()),
            |(mut b, mut q)| {
                let mut out = CoreCount::default();
                for s in &log.steps {
                    if live {
                        let got = b.poll(0, &s.cut, &mut q, &mut out).expect("live step");
                        assert_eq!(got, Some(s.step), "live chose the logged step");
                    } else {
                        b.replay(&s.as_in(), &mut q, &mut out)
                            .expect("replayed step");
                    }
                }
                assert!(q.0.iter().all(|q| q.is_empty()), "every op executed");
                (b, q, out.0)
            },
        )
    };
    let bbo_live = bbo("core: BBO, live (poll at each logged cut) (per msg)", true);
    let bbo_replay = bbo("core: BBO, replay (each logged step) (per msg)", false);
    let responses: usize = log.responses.values().map(|v| v.len()).sum();
    // 0: live; 1: replay, reading copy 2 from the data side's store; 2: replay, the payload in
    // hand (the lane's own work).
    let lanes = |name: &str, mode: u8| {
        measure_with_setup(
            name,
            r,
            c.msgs,
            || {
                let new = if mode == 0 {
                    Lane::new
                } else {
                    Lane::for_replay
                };
                let mut ls: Vec<Lane> = (0..n as u8).map(|l| new(cfg, l)).collect();
                ls.iter_mut().for_each(Lane::prefault);
                ls
            },
            |mut ls| {
                let mut out = CoreCount::default();
                let mut applied = vec![0usize; n];
                let mut answers = 0u64;
                for (rec, p) in &log.records {
                    let l = rec.lane as usize;
                    let evs = &log.events[l];
                    while applied[l] < evs.len() && evs[applied[l]].step <= rec.fills_applied {
                        ls[l].on_event(&evs[applied[l]], &mut out);
                        applied[l] += 1;
                    }
                    if mode == 0 {
                        ls[l]
                            .on_packet(rec.rx_ts, rec.rx_ts, p, &mut out)
                            .expect("live");
                    } else if mode == 2 {
                        ls[l].replay_packet(rec, p, &mut out).expect("replay");
                    } else {
                        let key = PktKey {
                            session: rec.session,
                            pkt_seq: rec.pkt_seq,
                        };
                        let (bytes, _) = payloads.payload_hashed(key).expect("copy 2 held");
                        ls[l].replay_packet(rec, bytes, &mut out).expect("replay");
                    }
                }
                for (l, lane) in ls.iter_mut().enumerate() {
                    for ev in &log.events[l][applied[l]..] {
                        lane.on_event(ev, &mut out);
                    }
                    lane.flush_hashes(&mut out);
                    answers += lane.counters().responses;
                }
                assert_eq!(answers as usize, responses, "every answer produced");
                (ls, out.0)
            },
        )
    };
    let lanes_live = lanes("core: lanes, live (MAC, full hash) (per msg)", 0);
    let lanes_replay = lanes("core: lanes, replay (the join's read, no MAC) (per msg)", 1);
    let lanes_own = lanes("core: lanes, replay, payload in hand (per msg)", 2);
    ratio(&lanes_own, &lanes_live);
    (
        bbo_live.p50_ns(),
        bbo_live.p50_ns() / bbo_replay.p50_ns(),
        lanes_live.p50_ns() / lanes_replay.p50_ns(),
    )
}
