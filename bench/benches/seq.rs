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
use vyrn_seq::home::StepMsg;
use vyrn_seq::{SeqConfig, SeqHome, Tile};

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
    if !vyrn_bench::enabled("gate") {
        return;
    }
    // B-REP-13 twice in the same run: as on the box's ports (frames counted, no per-frame
    // FrameInfo: the stream core's own work) and with the tests' wire log (a copy of every
    // frame and its FrameInfo), for comparison.
    for (logged, label) in [(false, "ports"), (true, "logged")] {
        gate_bench(logged, label);
    }
}

fn gate_bench(logged: bool, label: &str) {
    let mut e = EngineConfig::test_home(4, 16);
    for a in e.accounts.iter_mut() {
        a.max_open_orders = 1 << 16;
        a.max_exposure = 1 << 40;
    }
    e.book_cfg.max_orders = 1 << 20;
    let mut home = SeqHome::new(SeqConfig {
        engine: e.clone(),
        epoch: 1,
        block_ns: vyrn_wire::consts::BLOCK_NS,
        seq_key: [1; 32],
        voters: 4,
        rtx_ring_bytes: 8 << 20,
    });
    home.set_log_frames(logged);
    home.sh.stamp_releases = true;
    let mut mix = Mix::clean();
    mix.max_msgs = 2;
    let mut w = Workload::new(&e, 5, mix);
    let n = if quick() { 5_000 } else { 200_000 };
    let mut timer = Latency::new("baseline: Instant::now() pair");
    let mut gate = Latency::new(&format!(
        "stream core ({label}): R_step entry -> released (home only)"
    ));
    let mut span = Latency::new(&format!(
        "stream core ({label}): R_step entry -> released (spanning)"
    ));
    let mut poll = Latency::new(&format!(
        "stream core ({label}): the whole poll (HASH frames, marks, heartbeats after the release)"
    ));
    let others: Vec<Tile> = home
        .tiles()
        .into_iter()
        .filter(|t| !matches!(t, Tile::Stream(_)))
        .collect();
    for _ in 0..n {
        if let Input::Packet { rx_ts, bytes } = w.next_input() {
            home.receive(rx_ts, bytes);
        }
        let now = w.now();
        for &t in &others {
            home.poll(t, now);
        }
        // Time each stream core's poll when it has exactly one step to take.
        for h in 0..2u8 {
            let steps = home.sh.r_step[h as usize].len();
            let spans = home.sh.r_step[h as usize]
                .front()
                .is_some_and(|m| matches!(m, StepMsg::Step(s) if s.spans));
            let before = home.sh.released[h as usize];
            let t0 = Instant::now();
            home.poll(Tile::Stream(h), now);
            let whole = t0.elapsed().as_nanos() as u64;
            if steps == 1 && home.sh.released[h as usize] != before {
                let ns = home.sh.released_at[h as usize]
                    .map_or(whole, |t| t.duration_since(t0).as_nanos() as u64);
                poll.record(whole);
                if spans {
                    span.record(ns);
                } else {
                    gate.record(ns);
                }
            }
        }
        let t0 = Instant::now();
        let t1 = Instant::now();
        timer.record((t1 - t0).as_nanos() as u64);
        home.drain_wire().for_each(drop);
    }
    timer.print();
    gate.print();
    span.print();
    poll.print();
    let p50 = gate.ns.value_at_quantile(0.5) as f64;
    println!(
        "  budget B-REP-13 ({label}; ≤ 160 ns from step start to the release store): p50 {:.0} ns = {:.2}x, p99 {} ns = {:.2}x (one clock read included); spanning p50 {} ns, p99 {} ns",
        p50,
        p50 / 160.0,
        gate.ns.value_at_quantile(0.99),
        gate.ns.value_at_quantile(0.99) as f64 / 160.0,
        span.ns.value_at_quantile(0.5),
        span.ns.value_at_quantile(0.99)
    );
}
