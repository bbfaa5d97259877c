//! `vyrn sim` (lab build only): the whole home on one thread in simulated time, under the faults
//! a seed draws (`vyrn_sim::home`, docs/testing.md). One seed replays exactly (`--seed`); a campaign
//! runs many and names each failing seed with the command that replays it (`--seeds`).

use std::process::ExitCode;
use vyrn_sim::home::{campaign, run, FaultKinds, Plant, Report, Scenario, SimConfig};

/// `vyrn sim`.
#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("which").required(true).multiple(true).args(["seed", "seeds", "scenario"])))]
pub struct Args {
    /// Run this one seed (the same seed gives the same run, event for event).
    #[arg(long)]
    seed: Option<u64>,
    /// Run a campaign of this many seeds, from `--first` (with `--scenario`: that row on each).
    #[arg(long, conflicts_with = "seed")]
    seeds: Option<u64>,
    /// Run one row of 07 §14's failure matrix (`list`: every row built, with its expected
    /// outcome); `--seed` then picks the poll order and the jitter (default 7), `--seeds` runs it
    /// on many.
    #[arg(long)]
    scenario: Option<String>,
    /// The campaign's first seed.
    #[arg(long, default_value_t = 0)]
    first: u64,
    /// Fault kinds a seed may draw: `all`, `none`, or a list of
    /// `loss,dup,jitter,partition,databox,stall,misbehave`.
    #[arg(long, default_value = "all")]
    faults: String,
    /// A bug planted on purpose, which the run must find: `gate`, `decoder` or `replay`.
    #[arg(long)]
    plant: Option<String>,
    /// Simulated ms of client load (then 150 ms for the last answers).
    #[arg(long, default_value_t = 300)]
    load_ms: u64,
    /// Client msgs/s.
    #[arg(long, default_value_t = 4000)]
    rate: u64,
    /// A campaign's threads (a seed is one thread's run): this machine's cores unless given.
    #[arg(long)]
    threads: Option<usize>,
}

/// Run `vyrn sim`.
pub fn run_cmd(a: Args) -> ExitCode {
    match go(&a) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("vyrn sim: {e}");
            ExitCode::from(2)
        }
    }
}

fn go(a: &Args) -> Result<bool, String> {
    let kinds = FaultKinds::parse(&a.faults)?;
    let plant = a.plant.as_deref().map(Plant::parse).transpose()?;
    if let Some(name) = &a.scenario {
        if name == "list" {
            for sc in Scenario::ALL {
                println!("{:<24} {}", sc.name(), sc.expected());
            }
            return Ok(true);
        }
        let sc = Scenario::parse(name)?;
        if let Some(n) = a.seeds {
            return scenario_seeds(a, sc, n, plant);
        }
        let seed = a.seed.unwrap_or(7);
        let r = run(&SimConfig {
            seed,
            kinds: FaultKinds::NONE,
            load_ms: a.load_ms,
            rate: a.rate,
            plant,
            scenario: Some(sc),
        })?;
        println!("scenario {}: expected: {}", sc.name(), sc.expected());
        println!("figures: {:?}", r.figures);
        print_one(&r, &format!("vyrn sim --scenario {name} --seed {seed}"));
        return Ok(r.ok());
    }
    let base = |seed| SimConfig {
        seed,
        kinds,
        load_ms: a.load_ms,
        rate: a.rate,
        plant,
        scenario: None,
    };
    let again = |seed: u64| {
        let mut c = format!("vyrn sim --seed {seed} --faults {}", a.faults);
        if let Some(p) = &a.plant {
            c += &format!(" --plant {p}");
        }
        if a.load_ms != 300 || a.rate != 4000 {
            c += &format!(" --load-ms {} --rate {}", a.load_ms, a.rate);
        }
        c
    };
    if let Some(seed) = a.seed {
        let r = run(&base(seed))?;
        print_one(&r, &again(seed));
        return Ok(r.ok());
    }
    let n = a.seeds.unwrap_or(0);
    println!(
        "vyrn sim: seeds {}..{} (faults {}), {} ms of load at {} msgs/s each",
        a.first,
        a.first + n,
        a.faults,
        a.load_ms,
        a.rate
    );
    let threads = a.threads.unwrap_or_else(|| {
        std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
    });
    let c = campaign(a.first..a.first + n, threads, base, |r| {
        if let Some(v) = r.violations.first() {
            println!("  seed {}: {v}\n    replay: {}", r.seed, again(r.seed));
        }
    });
    println!(
        "{} seeds, {} failed; {:.1} simulated s in {:.1} s wall on {threads} threads: {:.2} simulated s per core-second, {:.0} seeds per hour on this machine",
        c.seeds,
        c.failed.len(),
        c.sim_ns as f64 / 1e9,
        c.wall_s,
        c.sim_ns as f64 / 1e9 / c.cpu_s.max(1e-9),
        c.seeds as f64 * 3600.0 / c.wall_s.max(1e-9),
    );
    let kinds: Vec<String> = c
        .kinds
        .iter()
        .map(|(k, n)| format!("{k} {:.0} %", 100.0 * *n as f64 / c.seeds.max(1) as f64))
        .collect();
    println!("seeds that drew each fault kind: {}", kinds.join(", "));
    Ok(c.failed.is_empty())
}

/// Scenario `sc` on seeds `--first..--first + n`: each failing seed with its replay command, and
/// the row's figures over the seeds (a paused box: the time from its last frame to each
/// deposition, 07 §9.7 stages 1–3).
fn scenario_seeds(a: &Args, sc: Scenario, n: u64, plant: Option<Plant>) -> Result<bool, String> {
    let threads = a.threads.unwrap_or_else(|| {
        std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
    });
    let cfg = |seed| SimConfig {
        seed,
        kinds: FaultKinds::NONE,
        load_ms: a.load_ms,
        rate: a.rate,
        plant,
        scenario: Some(sc),
    };
    println!("scenario {}: expected: {}", sc.name(), sc.expected());
    let mut depose: Vec<u64> = Vec::new();
    let c = campaign(a.first..a.first + n, threads, cfg, |r| {
        if let Some(v) = r.violations.first() {
            println!(
                "  seed {}: {v}\n    replay: vyrn sim --scenario {} --seed {}",
                r.seed,
                sc.name(),
                r.seed
            );
        }
        if r.figures.deposed > 0 {
            depose.push(r.figures.deposed_after_ns);
        }
    });
    println!("{} seeds, {} failed", c.seeds, c.failed.len());
    if !depose.is_empty() {
        depose.sort_unstable();
        let q = |p: f64| depose[((depose.len() - 1) as f64 * p).round() as usize] as f64 / 1e6;
        println!(
            "deposed at every voter, from the box's last frame (the slowest voter of each seed), over {} seeds: p50 {:.3} ms, p99 {:.3} ms, max {:.3} ms (07 §9.7 stages 1-3: 3.6 ms)",
            depose.len(),
            q(0.5),
            q(0.99),
            q(1.0)
        );
    }
    Ok(c.failed.is_empty())
}

fn print_one(r: &Report, again: &str) {
    println!("vyrn sim: seed {}", r.seed);
    println!("fault schedule:");
    for l in r.schedule.describe() {
        println!("  {l}");
    }
    let n = &r.net;
    println!(
        "ran {:.1} simulated ms in {:.2} s wall ({:.2} s building the home), {} tile polls",
        r.sim_ns as f64 / 1e6,
        r.wall_s,
        r.setup_s,
        r.polls
    );
    println!(
        "network: {} datagrams sent, {} delivered ({} duplicates), {} lost, {} partitioned, {} unrouted",
        n.sent, n.delivered, n.duplicated, n.lost, n.partitioned, n.unrouted
    );
    println!(
        "checked: {} + {} frames through both decoders (T-REP-2), {} responses against the paths (INV-FRAME-FIRST)",
        r.frames[0], r.frames[1], r.responses
    );
    println!(
        "home: final height {}, client answered {} / fills {} / durable {} / final {}, replay digest {}",
        r.final_height,
        r.client[0],
        r.client[1],
        r.client[2],
        r.client[3],
        r.digest[..8].iter().map(|b| format!("{b:02x}")).collect::<String>()
    );
    println!("trace {:016x} over {} network events", r.trace.0, r.trace.1);
    match r.violations.split_first() {
        None => println!("OK: no invariant broken"),
        Some((v, rest)) => {
            println!("VIOLATION: {v}");
            for v in rest {
                println!("  and: {v}");
            }
            println!("replay: {again}");
        }
    }
}
