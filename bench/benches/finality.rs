//! Finality latency (07 §6.6, §15): block close → Q finalize votes, at each voter (its
//! engine's finalization) and at the sequencer (its finality listener's `final_height`), in the
//! deterministic simulator: four voters running the production desk and app around
//! commonware's Simplex, 0.5 ms metro links (20 µs jitter), 0.5 ms voter → sequencer, 1 ms
//! blocks, a header 0.5 ms and its payloads 0.6 ms after close (07 §6.6's budget: 2.6 ms
//! typical, ≤ 5.65 ms max, ≤ 8.65 ms with one fault).
//!
//! commonware's simulated network draws each message's latency in whole milliseconds, so the
//! runs are scaled ×100 (`SimConfig::scaled`: every duration, Δ included) and the figures
//! divided back. Simulated time does not depend on this machine's load, so each figure is also printed as
//! a multiple of the one-way link (the baseline of the same run): Simplex's finality is three
//! hops after the leader holds a block (propose, notarize, finalize) plus one to the sequencer.
//! The one-fault row runs with voter 3 down for the whole run (its leader views time out and
//! are skipped). `VYRN_BENCH_QUICK=1` runs 100 blocks instead of 1000.

use std::time::Duration;

use vyrn_bench::{quick, Latency};
use vyrn_sim::voting::{run, Outage, SimConfig};

/// The time scale of the runs (see `SimConfig::scaled`).
const SCALE: u32 = 100;

fn report(tag: &str, cfg: SimConfig) {
    let link = (cfg.link.as_nanos() / cfg.scale as u128) as f64;
    let blocks = cfg.blocks;
    let r = run(cfg);
    let mut v = Latency::new(&format!("{tag}: close -> final at voters"));
    for ns in r.voter_latencies() {
        v.record(ns);
    }
    let mut s = Latency::new(&format!("{tag}: close -> final at sequencer"));
    for ns in r.seq_latencies() {
        s.record(ns);
    }
    v.print();
    s.print();
    let hops = |ns: u64| ns as f64 / link;
    println!(
        "{tag}: in one-way links (0.5 ms): voters p50 {:.1} p99 {:.1} max {:.1}; sequencer p50 {:.1} p99 {:.1} max {:.1}; final {} of {blocks} blocks",
        hops(v.ns.value_at_quantile(0.5)),
        hops(v.ns.value_at_quantile(0.99)),
        hops(v.ns.max()),
        hops(s.ns.value_at_quantile(0.5)),
        hops(s.ns.value_at_quantile(0.99)),
        hops(s.ns.max()),
        r.seq.final_at.len(),
    );
}

fn main() {
    let blocks = if quick() { 100 } else { 1000 };
    println!("finality latency in the simulator (Simplex, n = 4, Δ = 1 ms, 1 ms blocks)");
    // Scaled ×100 (SimConfig::scaled): the simulated network draws latencies in whole ms.
    report("all honest", SimConfig::metro(1, blocks).scaled(SCALE));
    let mut one_down = SimConfig::metro(2, blocks);
    one_down.outages.push(Outage {
        voter: 3,
        from: Duration::ZERO,
        to: Duration::from_secs(3600),
    });
    report("voter 3 down", one_down.scaled(SCALE));
    println!("07 §6.6 budget: 2.6 ms typical, <= 5.65 ms max, <= 8.65 ms with one fault");
}
