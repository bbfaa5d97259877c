//! B-REP-5 (the sliced signer, below) and B-REP-13 (07 §15): the stream core's work from taking a step off `R_step` to the
//! store of `released[H]` — drain check, half-record encode, frame seal, the write to both
//! paths (an in-memory log here, no NIC), fence, release, `LaneCut` — per gated step, as
//! hdrhistogram percentiles; steps whose records span both substreams reported apart. Budget:
//! ≤ 160 ns from step start (07 §4.7, REP_FRAME_GATE_NS = 60 past the step).
//! Baseline in the same run: one `Instant::now()` pair (the timer's own cost).

use std::time::Instant;
use vyrn_bench::{quick, Latency};
use vyrn_engine::workload::{Input, Mix, Workload};
use vyrn_engine::EngineConfig;
use vyrn_seq::SeqConfig;

/// B-REP-5 (07 §15): the sliced signer's CPU per signature and its longest slice, against
/// ed25519-dalek's one-shot sign of the same 139-byte HEADER message (budget ≤ 12 µs per
/// signature, ≤ REP_SIGN_SLICE_NS = 50 ns per slice).
///
/// A slice's work is the same every signature (slice `i` of one signature does what slice `i`
/// of the next does), so the slice figure is the median over signatures of each slice index,
/// less the median of an `Instant` pair measured in the same run, and the longest of those
/// medians is the signer's longest slice. The raw per-slice samples (timer included, and every
/// interrupt of a shared VM) are printed too.
fn signer() {
    use ed25519_dalek::Signer;
    use vyrn_seq::signer::SlicedSigner;
    let seed = [7u8; 32];
    let msg = [0x5au8; 139];
    let n = if quick() { 200 } else { 3_000 };
    let mut s = SlicedSigner::new(&seed);
    let mut timer = Latency::new("baseline: one Instant pair");
    for _ in 0..100_000 {
        let t0 = Instant::now();
        timer.record(t0.elapsed().as_nanos() as u64);
    }
    let tq = timer.ns.value_at_quantile(0.5);
    let mut slice = Latency::new("sliced signer: one slice (raw, timer included)");
    let mut per_index: Vec<Vec<u32>> = Vec::new();
    for _ in 0..n {
        s.start(&msg);
        let mut k = 0;
        loop {
            let t0 = Instant::now();
            let done = s.step();
            let ns = t0.elapsed().as_nanos() as u64;
            slice.record(ns);
            if per_index.len() <= k {
                per_index.push(Vec::with_capacity(n));
            }
            per_index[k].push(ns as u32);
            k += 1;
            if done.is_some() {
                s.reset();
                break;
            }
        }
    }
    let medians: Vec<u64> = per_index
        .iter_mut()
        .map(|v| {
            v.sort_unstable();
            (v[v.len() / 2] as u64).saturating_sub(tq)
        })
        .collect();
    let (worst_i, worst) = medians
        .iter()
        .enumerate()
        .max_by_key(|(_, &m)| m)
        .map(|(i, &m)| (i, m))
        .unwrap_or_default();
    let mut sorted = medians.clone();
    sorted.sort_unstable();
    let mut total = Latency::new("sliced signer: CPU per signature (all slices, one timer)");
    for _ in 0..n {
        let t0 = Instant::now();
        std::hint::black_box(s.sign(&msg));
        total.record(t0.elapsed().as_nanos() as u64);
    }
    let key = ed25519_dalek::SigningKey::from_bytes(&seed);
    let mut one = Latency::new("baseline: ed25519-dalek sign (one shot)");
    for _ in 0..n {
        let t0 = Instant::now();
        std::hint::black_box(key.sign(&msg));
        one.record(t0.elapsed().as_nanos() as u64);
    }
    timer.print();
    slice.print();
    total.print();
    one.print();
    println!(
        "  slices per signature {}; work per slice (median over signatures of each slice, less the timer's {} ns): median {} ns, p90 {} ns, longest {} ns (slice {})",
        medians.len(),
        tq,
        sorted[sorted.len() / 2],
        sorted[sorted.len() * 9 / 10],
        worst,
        worst_i
    );
    let (t, o) = (
        total.ns.value_at_quantile(0.5) as f64,
        one.ns.value_at_quantile(0.5) as f64,
    );
    println!(
        "  ratio sliced CPU / one-shot = {:.2}x; budget B-REP-5: {:.2} us vs 12 us = {:.2}x; longest slice {} ns vs 50 ns = {:.2}x",
        t / o,
        t / 1000.0,
        t / 12_000.0,
        worst,
        worst as f64 / 50.0
    );
}

fn main() {
    println!(
        "# seq: one shared 2-core machine; compare against the timer baseline in the same run"
    );
    if vyrn_bench::enabled("signer") {
        signer();
    }
    if vyrn_bench::enabled("load") {
        tile_loads();
    }
    if !vyrn_bench::enabled("gate") {
        return;
    }
    // B-REP-13 as on the box's ports: frames counted, no per-frame FrameInfo — the stream
    // core's own work.
    gate_bench();
}

/// A `Wire` that counts (the NIC's work is not the tile's).
struct CountWire;

impl vyrn_seq::tiles::Wire for CountWire {
    fn frame_on(
        &mut self,
        _h: u8,
        _path: u8,
        _info: &vyrn_seq::FrameInfo,
        bytes: &[u8],
    ) -> vyrn_seq::mem::PathWrite {
        std::hint::black_box(bytes);
        vyrn_seq::mem::PathWrite::Done
    }
    fn resp(&mut self, _s: u32, _g: vyrn_engine::Gate, bytes: &[u8]) {
        std::hint::black_box(bytes);
    }
    fn notice(&mut self, _s: u32, bytes: &[u8]) {
        std::hint::black_box(bytes);
    }
}

/// B-REP-4 and B-REP-6 (07 §15): each stream core's load and the order hasher's load — busy
/// time over wall time, as the runner counts them — with the threaded box on two threads fed a
/// sustained open-loop rate in process (frames and responses to a counting sink, so the NIC's
/// work is not in it; a stand-in finalizer votes every closed block so the finality gate stays
/// open). Baseline from the same run: the same box idle for the same time (heartbeats, block
/// headers, the spinning of empty polls). Reported: the load at each rate, the busy time per
/// message, and the rate at which the stream core would reach its 0.50 budget (B-REP-4) and the
/// hasher its 0.60 (B-REP-6) if the cost per message held.
fn tile_loads() {
    use std::sync::atomic::Ordering;
    use vyrn_seq::runner::{self, Clock, Runner};
    use vyrn_seq::tiles::{self, CtrlIn, RxPkt, Wire, WireFor};
    let secs = if quick() { 0.3 } else { 3.0 };
    let mut e = EngineConfig::test_home(4, 8);
    for a in e.accounts.iter_mut() {
        a.max_open_orders = 1 << 16;
        a.max_exposure = 1 << 40;
    }
    e.book_cfg.max_orders = 1 << 20;
    e.lane_max_orders = 1 << 16;
    let run = |rate: u64| -> (u64, f64, f64, f64) {
        let cfg = SeqConfig {
            engine: e.clone(),
            epoch: 1,
            block_ns: vyrn_wire::consts::BLOCK_NS,
            seq_key: [1; 32],
            voters: 4,
            rtx_ring_bytes: 8 << 20,
            tenure: vyrn_seq::shm::TenureId::FIRST,
        };
        let (tiles, mut h) = tiles::build(
            &cfg,
            Some(10_000_000_000),
            |_w: WireFor| Box::new(CountWire) as Box<dyn Wire>,
            |_| None,
            None,
        );
        tiles.knobs.set_track(false);
        let clock = Clock::new();
        let runner = Runner::start(runner::groups(tiles.tiles, &[], false, 2), clock);
        let mut w = Workload::new(&e, 3, Mix::clean());
        let t0 = clock.now();
        let end = t0 + (secs * 1e9) as u64;
        let (mut sent, mut voted) = (0u64, 0u64);
        loop {
            let now = clock.now();
            if now >= end {
                break;
            }
            let due = (now - t0) as u128 * rate as u128 / 1_000_000_000;
            while (sent as u128) < due {
                if let Input::Packet { bytes, .. } = w.next_input() {
                    let session = u32::from_le_bytes([bytes[4], bytes[5], bytes[6], bytes[7]]);
                    let lane = e
                        .sessions
                        .iter()
                        .find(|s| s.session == session)
                        .map_or(0, |s| s.lane as usize);
                    if let Some(p) = RxPkt::new(now, &bytes) {
                        if h.rx[lane].push(p).is_ok() {
                            sent += 1;
                        }
                    }
                }
            }
            // The stand-in finalizer: Q votes for every closed block, acks for every frame.
            let closed = h.control.closed_height.load(Ordering::Relaxed);
            while voted < closed {
                voted += 1;
                for voter in 0..4 {
                    let _ = h.ctrl.push(CtrlIn::Vote {
                        voter,
                        height: voted,
                    });
                }
            }
            for voter in 0..4 {
                let _ = h.ctrl.push(CtrlIn::Ack {
                    voter,
                    contiguous: [u64::MAX >> 1; 2],
                    now,
                });
            }
            std::thread::sleep(std::time::Duration::from_micros(200));
        }
        let wall = (clock.now() - t0) as f64;
        let busy = |name: &str| -> f64 {
            runner
                .stats
                .iter()
                .filter(|(n, _, _)| n.as_str() == name)
                .map(|(_, _, s)| s.busy_ns.load(Ordering::Relaxed) as f64)
                .sum::<f64>()
        };
        let (a, b, hs) = (busy("streamA"), busy("streamB"), busy("hasher"));
        runner.stop();
        (sent, a.max(b) / wall, hs / wall, a.max(b))
    };
    let (_, idle_stream, idle_hasher, _) = run(0);
    println!(
        "baseline: idle box for {secs} s: busier stream core load {:.2}%, order hasher {:.2}%",
        idle_stream * 100.0,
        idle_hasher * 100.0
    );
    for rate in [20_000u64, 50_000] {
        let (sent, stream, hasher, _) = run(rate);
        let per_msg = (stream - idle_stream).max(0.0) * secs * 1e9 / sent.max(1) as f64;
        let hasher_per = (hasher - idle_hasher).max(0.0) * secs * 1e9 / sent.max(1) as f64;
        println!(
            "  {rate} msgs/s ({sent} sent): busier stream core load {:.2}% ({:.1}x idle; B-REP-4 budget 50% -> {:.3}x), order hasher {:.2}% ({:.1}x idle; B-REP-6 budget 60% -> {:.3}x)",
            stream * 100.0,
            stream / idle_stream.max(1e-9),
            stream / 0.50,
            hasher * 100.0,
            hasher / idle_hasher.max(1e-9),
            hasher / 0.60
        );
        println!(
            "    above idle: stream core {:.0} ns per message -> 50% at ~{:.0}k msgs/s; hasher {:.0} ns per message -> 60% at ~{:.0}k msgs/s (if the cost per message held)",
            per_msg,
            0.5e9 / per_msg.max(1.0) / 1000.0,
            hasher_per,
            0.6e9 / hasher_per.max(1.0) / 1000.0
        );
    }
}

/// A `Wire` that counts and stamps each fence — the store of `released[H]` follows it at once
/// (07 §4.2: write A, write B, fence, release).
struct StampWire(
    std::sync::Arc<std::sync::atomic::AtomicU64>,
    vyrn_seq::runner::Clock,
);

impl vyrn_seq::tiles::Wire for StampWire {
    fn frame_on(
        &mut self,
        _h: u8,
        _path: u8,
        _info: &vyrn_seq::FrameInfo,
        bytes: &[u8],
    ) -> vyrn_seq::mem::PathWrite {
        std::hint::black_box(bytes);
        vyrn_seq::mem::PathWrite::Done
    }
    fn fence(&mut self) -> bool {
        self.0
            .store(self.1.now(), std::sync::atomic::Ordering::Relaxed);
        true
    }
    fn resp(&mut self, _s: u32, _g: vyrn_engine::Gate, bytes: &[u8]) {
        std::hint::black_box(bytes);
    }
    fn notice(&mut self, _s: u32, bytes: &[u8]) {
        std::hint::black_box(bytes);
    }
}

/// B-REP-13: the production tiles under the seeded scheduler on this thread; each stream
/// core's poll timed from its start to the fence before its release store (the stamp taken by
/// the wire), when the poll released a step.
fn gate_bench() {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Arc;
    use vyrn_seq::runner::{Clock, Seeded};
    use vyrn_seq::tiles::{self, RxPkt, Wire};
    let mut e = EngineConfig::test_home(4, 16);
    for a in e.accounts.iter_mut() {
        a.max_open_orders = 1 << 16;
        a.max_exposure = 1 << 40;
    }
    e.book_cfg.max_orders = 1 << 20;
    let cfg = SeqConfig {
        engine: e.clone(),
        epoch: 1,
        block_ns: vyrn_wire::consts::BLOCK_NS,
        seq_key: [1; 32],
        voters: 4,
        rtx_ring_bytes: 8 << 20,
        tenure: vyrn_seq::shm::TenureId::FIRST,
    };
    let clock = Clock::new();
    let stamp = Arc::new(AtomicU64::new(0));
    let (tiles, mut h) = tiles::build(
        &cfg,
        Some(10_000_000_000),
        |_| Box::new(StampWire(stamp.clone(), clock)) as Box<dyn Wire>,
        |_| None,
        None,
    );
    tiles.knobs.set_track(false);
    let mut sched = Seeded::new(tiles.tiles, 0);
    let streams = [
        sched.index_of("streamA").expect("stream-A"),
        sched.index_of("streamB").expect("stream-B"),
    ];
    let others: Vec<usize> = (0..sched.tasks.len())
        .filter(|i| !streams.contains(i))
        .collect();
    let lane_of: std::collections::HashMap<u32, usize> = e
        .sessions
        .iter()
        .map(|s| (s.session, s.lane as usize))
        .collect();
    let mut mix = Mix::clean();
    mix.max_msgs = 2;
    let mut w = Workload::new(&e, 5, mix);
    let n = if quick() { 5_000 } else { 200_000 };
    let mut timer = Latency::new("baseline: clock read pair");
    let mut gate = Latency::new("stream core (ports): poll start -> fence before released");
    let mut poll = Latency::new(
        "stream core (ports): the whole poll (HASH frames, marks, heartbeats after the release)",
    );
    for _ in 0..n {
        if let Input::Packet { rx_ts, bytes } = w.next_input() {
            let lane = tiles::session_of(&bytes)
                .and_then(|s| lane_of.get(&s).copied())
                .unwrap_or(0);
            if let Some(p) = RxPkt::new(rx_ts, &bytes) {
                let _ = h.rx[lane].push(p);
            }
        }
        let now = w.now();
        for &t in &others {
            sched.poll(t, now);
        }
        for (k, &i) in streams.iter().enumerate() {
            let before = h.words.released(k);
            let t0 = clock.now();
            sched.poll(i, now);
            let t1 = clock.now();
            if h.words.released(k) != before {
                poll.record(t1 - t0);
                gate.record(stamp.load(Ordering::Relaxed).saturating_sub(t0));
            }
        }
        let t0 = clock.now();
        let t1 = clock.now();
        timer.record(t1 - t0);
    }
    let _ = &mut h;
    timer.print();
    gate.print();
    poll.print();
    let p50 = gate.ns.value_at_quantile(0.5) as f64;
    println!(
        "  budget B-REP-13 (ports; ≤ 160 ns from step start to the release store): p50 {:.0} ns = {:.2}x, p99 {} ns = {:.2}x (one clock read included)",
        p50,
        p50 / 160.0,
        gate.ns.value_at_quantile(0.99),
        gate.ns.value_at_quantile(0.99) as f64 / 160.0,
    );
}
