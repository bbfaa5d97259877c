//! B-REP-5 (the sliced signer, below) and B-REP-13 (07 §15), first form: the stream core's work from taking a step off `R_step` to the
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
fn signer() {
    use ed25519_dalek::Signer;
    use vyrn_seq::signer::SlicedSigner;
    let seed = [7u8; 32];
    let msg = [0x5au8; 139];
    let n = if quick() { 200 } else { 5_000 };
    let mut s = SlicedSigner::new(&seed);
    let mut slice = Latency::new("sliced signer: one slice");
    let mut total = Latency::new("sliced signer: CPU per signature (sum of slices)");
    let mut worst = Latency::new("sliced signer: longest slice per signature");
    for _ in 0..n {
        s.start(&msg);
        let (mut sum, mut max) = (0u64, 0u64);
        loop {
            let t0 = Instant::now();
            let done = s.step();
            let ns = t0.elapsed().as_nanos() as u64;
            slice.record(ns);
            sum += ns;
            max = max.max(ns);
            if done.is_some() {
                s.reset();
                break;
            }
        }
        total.record(sum);
        worst.record(max);
    }
    let key = ed25519_dalek::SigningKey::from_bytes(&seed);
    let mut one = Latency::new("baseline: ed25519-dalek sign (one shot)");
    for _ in 0..n {
        let t0 = Instant::now();
        std::hint::black_box(key.sign(&msg));
        one.record(t0.elapsed().as_nanos() as u64);
    }
    slice.print();
    worst.print();
    total.print();
    one.print();
    let (t, o) = (
        total.ns.value_at_quantile(0.5) as f64,
        one.ns.value_at_quantile(0.5) as f64,
    );
    println!(
        "  ratio sliced CPU / one-shot = {:.2}x; budget B-REP-5: {:.2} us vs 12 us = {:.2}x; longest slice p50 {} ns vs 50 ns = {:.1}x",
        t / o,
        t / 1000.0,
        t / 12_000.0,
        worst.ns.value_at_quantile(0.5),
        worst.ns.value_at_quantile(0.5) as f64 / 50.0
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
    let mut mix = Mix::clean();
    mix.max_msgs = 2;
    let mut w = Workload::new(&e, 5, mix);
    let n = if quick() { 5_000 } else { 200_000 };
    let mut timer = Latency::new("baseline: Instant::now() pair");
    let mut gate = Latency::new("stream core: R_step entry -> released (home only)");
    let mut span = Latency::new("stream core: R_step entry -> released (spanning)");
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
            let ns = t0.elapsed().as_nanos() as u64;
            if steps == 1 && home.sh.released[h as usize] != before {
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
    let p50 = gate.ns.value_at_quantile(0.5) as f64;
    println!(
        "  budget B-REP-13 (≤ 160 ns from step start): p50 {:.0} ns = {:.2}x of budget; max {} ns",
        p50,
        p50 / 160.0,
        gate.ns.max().max(span.ns.max())
    );
}
