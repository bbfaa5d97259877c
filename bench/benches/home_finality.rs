//! Block close → final on loopback, each role on
//! its own threads and UDP sockets exactly as the binaries run them (`vyrn_replica::homekit`):
//! the sequencer box, one data box, four replicas, the client library's open-loop load.
//!
//! * (a) **baseline** — the replicas' interim voter: each signs its finalize vote as soon as
//!   its own verdict holds the block (INV-REP-4's checks, no consensus round). What is left is
//!   the data path: frames, payloads, roots, the vote to the box's listener.
//! * (b) **Simplex** — the replicas' commonware Simplex engines (07 §6.3: propose, notarize,
//!   finalize among four voters over authenticated p2p), the same home, load and block period.
//!
//! Both measured by the box itself: from a block's close to Q valid finalize votes for a
//! proposal covering it at its finality listener (07 §6.6). Printed: p50/p99/max of each and
//! the ratios (b)/(a) — what consensus adds on this machine, in the same run. 20 ms blocks and
//! Δ = 20 ms (the dev home: four engines and the box share two cores); 07's 2.6 ms is for
//! dedicated cores and Δ = 1 ms (the simulator's figure, `--bench finality`).
//! `VYRN_BENCH_QUICK=1`: 2 s of load each.

use vyrn_replica::homekit::LoopbackHome;

fn run(simplex: bool, base: u16, secs: u64) -> Option<[u64; 4]> {
    let mut h = match LoopbackHome::new(
        if simplex { "bf-simplex" } else { "bf-interim" },
        base,
        simplex,
    ) {
        Ok(h) => h,
        Err(e) => {
            eprintln!("home_finality: {e}");
            return None;
        }
    };
    // The same block period for both: the baseline's is the Simplex home's.
    h.cfg.block_ns = 20_000_000;
    let r = match h.run(&[0, 1, 2, 3], 2000, secs) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("home_finality: {e}");
            return None;
        }
    };
    let fills = r.counts.fills;
    let fin = r.counts.fin;
    let _ = std::fs::remove_dir_all(&h.dir);
    println!(
        "{:<28} close -> final p50 {:>7.2} ms  p99 {:>7.2} ms  max {:>7.2} ms  over {} blocks (final height {}, fills {fills}, final at the client {fin})",
        if simplex { "(b) Simplex" } else { "(a) interim voter (baseline)" },
        r.close_to_final[0] as f64 / 1e6,
        r.close_to_final[1] as f64 / 1e6,
        r.close_to_final[2] as f64 / 1e6,
        r.close_to_final[3],
        r.fin,
    );
    Some(r.close_to_final)
}

fn main() {
    let secs = if vyrn_bench::quick() { 2 } else { 8 };
    println!(
        "home_finality: a whole home on loopback, 2000 msgs/s for {secs} s each, 20 ms blocks"
    );
    let a = run(false, 47_700, secs);
    let b = run(true, 47_700, secs);
    if let (Some(a), Some(b)) = (a, b) {
        let ratio = |x: u64, y: u64| x as f64 / y.max(1) as f64;
        println!(
            "  ratio (b)/(a): p50 {:.2}x  p99 {:.2}x  max {:.2}x  (what Simplex's rounds add to the verdict's path)",
            ratio(b[0], a[0]),
            ratio(b[1], a[1]),
            ratio(b[2], a[2])
        );
    }
}
