//! The CI campaign (docs/testing.md): a fixed set of seeds with every fault kind, plus one seed derived
//! from the commit under test. A failing seed prints the command that replays it. Longer
//! campaigns: `vyrn sim --seeds N --first F` (docs/testing.md).

use vyrn_sim::home::{campaign, SimConfig};

/// Seeds of the fixed campaign (`VYRN_SIM_SEEDS` overrides).
const SEEDS: u64 = 200;

fn commit_seed() -> Option<u64> {
    let out = std::process::Command::new("git")
        .args(["rev-parse", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()?;
    let hex = String::from_utf8(out.stdout).ok()?;
    u64::from_str_radix(hex.get(..16)?, 16).ok()
}

#[test]
fn the_ci_campaign_finds_no_violation() {
    let n = std::env::var("VYRN_SIM_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(SEEDS);
    let mut failed = Vec::new();
    let mut report = |r: &vyrn_sim::home::Report| {
        if let Some(v) = r.violations.first() {
            failed.push(format!(
                "seed {}: {v}\n  replay: vyrn sim --seed {} --faults all",
                r.seed, r.seed
            ));
        }
    };
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get().min(4));
    let c = campaign(0..n, threads, SimConfig::campaign, &mut report);
    if let Some(s) = commit_seed() {
        eprintln!("the commit's seed: {s}");
        campaign(s..s + 1, 1, SimConfig::campaign, &mut report);
    }
    eprintln!(
        "{} seeds in {:.0} s on {threads} threads ({:.2} simulated s per core-second); fault kinds drawn: {:?}",
        c.seeds,
        c.wall_s,
        c.sim_ns as f64 / 1e9 / c.cpu_s.max(1e-9),
        c.kinds
    );
    // Every fault kind was exercised.
    assert!(c.kinds.len() >= 9 || n < 50, "{:?}", c.kinds);
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}
