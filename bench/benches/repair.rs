//! Repair time, hole to filled, on loopback (07 §4.10) — the production roles: the
//! sequencer box (its stream cores' frame rings answer NACKs, unicast) and four replicas (order
//! RX of §4.9: holes, NACKs after REP_HOLE_WAIT_US, retries, peer repair), one data box and the
//! client load, each on its own threads and UDP sockets (`vyrn_replica::homekit`), with the
//! `nic` lossy wrapper on the box's path senders: each path drops 2% and reorders 1% of its
//! frames, independently, so a frame is missing on both paths about 0.04% of the time.
//!
//! Every replica times each frame that was missing when a later one arrived, from that moment
//! to its arrival (`OrderRx::hole_fill`), split by what filled it:
//! * **baseline** — filled by a path: the other path's copy or a reordered one (no NACK; the
//!   time is the paths' skew plus the reorder hold);
//! * **repair** — filled by the box's retransmission (or a peer's): the hole wait, the NACK, the
//!   frame ring lookup and the unicast answer.
//!
//! Printed per replica and over all four: p50/p99/max of each and the ratio repair / baseline.
//! 07's budget: ≤ 100 µs within a facility (hole wait 5 µs + NACK + lookup + return); the dev
//! home's hole wait is its budget override (`Budgets::dev`), and the roles share two cores.
//! `VYRN_BENCH_QUICK=1`: 2 s of load.

use vyrn_replica::front::order_rx::PathSkew;
use vyrn_replica::homekit::{LoopbackHome, PathLoss};

fn us(ns: u64) -> f64 {
    ns as f64 / 1e3
}

fn row(what: &str, s: &PathSkew) -> String {
    format!(
        "{what:<44} p50 {:>9.1} µs  p99 {:>9.1} µs  max {:>9.1} µs  over {} frames",
        us(s.p50),
        us(s.p99),
        us(s.max),
        s.frames
    )
}

fn main() {
    let secs = if vyrn_bench::quick() { 2 } else { 8 };
    let mut h = match LoopbackHome::new("br-repair", 47_800, false) {
        Ok(h) => h,
        Err(e) => {
            eprintln!("repair: {e}");
            return;
        }
    };
    h.path_loss = Some(PathLoss {
        drop: 0.02,
        reorder: 0.01,
        seed: 1,
    });
    println!(
        "repair: a whole home on loopback, 2000 msgs/s for {secs} s, each path dropping 2% and reordering 1% of the box's frames"
    );
    let r = match h.run(&[0, 1, 2, 3], 2000, secs) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("repair: {e}");
            let _ = std::fs::remove_dir_all(&h.dir);
            return;
        }
    };
    let _ = std::fs::remove_dir_all(&h.dir);
    let mut worst = (0.0f64, 0.0f64);
    for (i, n) in r.nodes.iter().enumerate() {
        let rx = n.core().order_rx();
        let f = rx.hole_fill();
        let c = rx.counters();
        println!(
            "replica {i}: holes {}, NACKs {}, peer requests {}, frames repaired {}, lost on A/B {}/{}",
            c.holes, c.nacks, c.repairs, c.repaired, c.lost[0], c.lost[1]
        );
        println!(
            "  {}",
            row("baseline: filled by a path (other copy)", &f.by_path)
        );
        println!(
            "  {}",
            row("repair: filled by a retransmission", &f.by_repair)
        );
        if f.by_path.frames > 0 && f.by_repair.frames > 0 {
            let p99 = f.by_repair.p99 as f64 / f.by_path.p99.max(1) as f64;
            let max = f.by_repair.max as f64 / f.by_path.max.max(1) as f64;
            // The replica's clock is its poll round: both paths' copies read in one round time
            // as 0, so the baseline's median is below the clock's grain and no ratio of it is
            // printed.
            println!("  ratio repair / baseline: p99 {p99:.2}x  max {max:.2}x");
            worst = (worst.0.max(p99), worst.1.max(max));
        }
    }
    println!(
        "  worst replica's ratio: p99 {:.2}x  max {:.2}x; the home: {} fills, {} final at the client, final height {}",
        worst.0, worst.1, r.counts.fills, r.counts.fin, r.fin
    );
}
