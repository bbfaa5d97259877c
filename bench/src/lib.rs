//! Shared harness for vyrn benchmarks.
//!
//! Every benchmark here measures a candidate and a baseline in the same process run, because
//! the development and CI machines are shared and noisy: absolute figures move between runs,
//! ratios much less. A benchmark prints one line per measured quantity with hdrhistogram
//! percentiles of the per-round ns/op, and a ratio line against its baseline.
//!
//! Environment knobs: `VYRN_BENCH_ROUNDS` (default 30), `VYRN_BENCH_QUICK=1` (a smoke run,
//! used by CI to prove the benches still run) and `VYRN_BENCH_ONLY=part[,part]` (run only the
//! named parts of a bench).
#![forbid(unsafe_code)]

use hdrhistogram::Histogram;
use std::time::Instant;

/// Rounds per measurement, from `VYRN_BENCH_ROUNDS` or a default; `VYRN_BENCH_QUICK` cuts it to 3.
pub fn rounds(default: usize) -> usize {
    if quick() {
        return 3;
    }
    std::env::var("VYRN_BENCH_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

/// True unless `VYRN_BENCH_ONLY` is set and does not contain `name` (run one part of a bench).
pub fn enabled(name: &str) -> bool {
    std::env::var("VYRN_BENCH_ONLY").map_or(true, |v| v.split(',').any(|p| name.contains(p)))
}

/// True when `VYRN_BENCH_QUICK` is set: smoke mode with tiny iteration counts.
pub fn quick() -> bool {
    std::env::var_os("VYRN_BENCH_QUICK").is_some()
}

/// The result of one measurement: a histogram of per-round cost in picoseconds per op
/// (picoseconds so that sub-nanosecond operations keep their resolution).
#[derive(Debug)]
pub struct Stats {
    /// What was measured, printed as the line's name.
    pub name: String,
    /// Per-round cost in ps per op.
    pub ps_per_op: Histogram<u64>,
    /// Operations per round.
    pub ops_per_round: u64,
}

impl Stats {
    /// Median ns per op.
    pub fn p50_ns(&self) -> f64 {
        self.ps_per_op.value_at_quantile(0.5) as f64 / 1000.0
    }
    /// Best (minimum) ns per op over the rounds.
    pub fn min_ns(&self) -> f64 {
        self.ps_per_op.min() as f64 / 1000.0
    }
    /// Ops per second at the median.
    pub fn ops_per_s(&self) -> f64 {
        1e9 / self.p50_ns()
    }
    /// Print one line: name, median ns/op, ops/s, p99 and max ns/op.
    pub fn print(&self) {
        let q = |x: f64| self.ps_per_op.value_at_quantile(x) as f64 / 1000.0;
        println!(
            "{:<44} {:>9.2} ns/op  {:>12.0} op/s   min {:>8.2}  p90 {:>8.2}  max {:>8.2} ns/op  ({} rounds x {} ops)",
            self.name,
            self.p50_ns(),
            self.ops_per_s(),
            self.min_ns(),
            q(0.9),
            self.ps_per_op.max() as f64 / 1000.0,
            self.ps_per_op.len(),
            self.ops_per_round
        );
    }
}

/// Run `round` `rounds` times after one warm-up round. `round` performs `ops` operations
/// and returns a value that is passed through `black_box` so the work is not elided.
pub fn measure<R>(name: &str, rounds: usize, ops: u64, mut round: impl FnMut() -> R) -> Stats {
    let mut h = Histogram::<u64>::new(3).expect("histogram");
    std::hint::black_box(round());
    for _ in 0..rounds.max(1) {
        let t = Instant::now();
        let out = std::hint::black_box(round());
        let ps = t.elapsed().as_nanos() as u64 * 1000 / ops.max(1);
        drop(out); // freeing what the round built is not part of it
        h.record(ps.max(1)).expect("record");
    }
    let s = Stats {
        name: name.to_string(),
        ps_per_op: h,
        ops_per_round: ops,
    };
    s.print();
    s
}

/// Like [`measure`], but each round first runs `setup` (not timed) and hands its value to
/// `round` (timed): for state that must be fresh every round, built right before it is used, as
/// a long-running process would have it warm.
pub fn measure_with_setup<T, R>(
    name: &str,
    rounds: usize,
    ops: u64,
    mut setup: impl FnMut() -> T,
    mut round: impl FnMut(T) -> R,
) -> Stats {
    let mut h = Histogram::<u64>::new(3).expect("histogram");
    std::hint::black_box(round(setup()));
    for _ in 0..rounds.max(1) {
        let state = setup();
        let t = Instant::now();
        let out = std::hint::black_box(round(state));
        let ps = t.elapsed().as_nanos() as u64 * 1000 / ops.max(1);
        drop(out); // freeing what the round built is not part of it
        h.record(ps.max(1)).expect("record");
    }
    let s = Stats {
        name: name.to_string(),
        ps_per_op: h,
        ops_per_round: ops,
    };
    s.print();
    s
}

/// Print the ratio of `candidate` to `baseline` (median ns/op; < 1 means the candidate is faster).
pub fn ratio(candidate: &Stats, baseline: &Stats) {
    println!(
        "  ratio {} / {} = {:.2}x time per op (median)",
        candidate.name,
        baseline.name,
        candidate.p50_ns() / baseline.p50_ns()
    );
}

/// Print a budget check: `measured` ns against a spec budget, as a ratio.
pub fn budget(what: &str, measured_ns: f64, budget_ns: f64) {
    println!(
        "  budget {what}: {measured_ns:.2} ns vs {budget_ns:.2} ns budget = {:.2}x of budget",
        measured_ns / budget_ns
    );
}

/// A latency histogram in nanoseconds, for one-way or round-trip samples.
#[derive(Debug)]
pub struct Latency {
    /// What was measured.
    pub name: String,
    /// Samples in ns.
    pub ns: Histogram<u64>,
}

impl Latency {
    /// An empty latency recorder.
    pub fn new(name: &str) -> Self {
        Latency {
            name: name.to_string(),
            ns: Histogram::new(3).expect("histogram"),
        }
    }
    /// Record one sample in ns.
    pub fn record(&mut self, ns: u64) {
        self.ns.record(ns.max(1)).expect("record");
    }
    /// Print p50/p99/p99.9/max.
    pub fn print(&self) {
        let q = |x: f64| self.ns.value_at_quantile(x);
        println!(
            "{:<44} p50 {:>7} ns  p99 {:>7} ns  p99.9 {:>7} ns  max {:>8} ns  (n={})",
            self.name,
            q(0.5),
            q(0.99),
            q(0.999),
            self.ns.max(),
            self.ns.len()
        );
    }
}
