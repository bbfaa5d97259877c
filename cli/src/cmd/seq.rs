//! `vyrn seq`: the sequencer box from its config file, on the UDP backend.
//!
//! Usage: `vyrn seq --config FILE [--secs N] [--threads N]`; `vyrn config init DIR` writes a
//! dev home (or `--box-only`, a dev box's config) with fresh keys.
//!
//! * Reads the config (`[box]`, `[account.N]`, `[session.N]`, `[voter.N]`; keys in 0600
//!   files), runs the startup checks (cores of the core map exist, ports free, key files
//!   private) and stops with every problem listed if any fails.
//! * `profile = "ref"`: one pinned thread per tile on the cores of `core_map`, in tile order
//!   (lanes, cut, BBO, stream-A, stream-B, TX, hasher, control, RX, control RX, cert); hot tiles
//!   spin, cold ones block when idle; lane `l` listens on `client_port + l`.
//!   `dev`/`consumer`: the hot path (RX, lanes, cut, BBO, stream cores, TX) on one
//!   thread pinned to `core_map[0]` that spins and never sleeps; the cold tiles (control,
//!   control RX, order hasher, cert) on a thread on the rest of `core_map` that blocks when idle;
//!   one client port. `--threads N`: the legacy map (every tile round-robin on N yielding
//!   threads), for comparison.
//! * The voters come from the membership (`[voter.N]`); a box outside `dev` without them does
//!   not start. (The voter doubles are test support inside `vyrn-seq`'s `testkit`, never here.)
//! * A tile that panics aborts the process with a message naming it (exit by SIGABRT): a
//!   supervisor sees the box die, never a box with one tile dead.
//! * Every second: what came in and went out, the gate words, durable/final, and each tile's
//!   load (busy time / wall time: B-REP-4 for the stream cores, B-REP-6 for the hasher).
//! * `--secs 0` (the default): run until SIGTERM/SIGINT, which end it cleanly (summary printed).

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};
use vyrn_home::{startup_checks, BoxConfig, Profile};
use vyrn_seq::ports::{core_map_of, CoreMap, NetBox, RunningBox};
use vyrn_seq::runner::Clock;

/// `vyrn seq`: the sequencer box from its config file (07 §4).
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The box's config: the home's file with `seq_key_file` (the sequencer's seed).
    #[arg(long, alias = "home", value_name = "FILE")]
    pub config: PathBuf,
    /// Run this many seconds (0: until SIGTERM/SIGINT).
    #[arg(long, default_value_t = 0)]
    pub secs: u64,
    /// The legacy map: every tile round-robin on N yielding threads (dev/consumer only; for
    /// comparison with the hot/cold placement).
    #[arg(long, value_name = "N")]
    pub threads: Option<usize>,
    /// Serve Prometheus metrics (`GET /metrics`) on this address, e.g. 127.0.0.1:9400; updated
    /// once a second by the box's reporting loop, never by a tile.
    #[arg(long, value_name = "IP:PORT")]
    pub metrics: Option<std::net::SocketAddr>,
}

/// The box's metrics page: what it renders (`vyrn_seq::metrics`) and the endpoint's own.
fn render(running: &RunningBox, published: &vyrn_metrics::Published, now_ns: u64) -> String {
    let mut e = vyrn_metrics::Exposition::new();
    vyrn_seq::metrics::render(running, &mut e, now_ns);
    published.own(&mut e);
    e.render()
}

/// Write a dev box's config, or a whole dev home, with fresh keys (`vyrn config init`).
pub fn init(
    dir: &std::path::Path,
    lanes: u8,
    per_lane: u16,
    box_only: bool,
    base_port: u16,
) -> ExitCode {
    let write = if box_only {
        vyrn_home::write_dev_config
    } else {
        vyrn_home::write_dev_home
    };
    match write(dir, lanes, per_lane, base_port) {
        Ok(p) => {
            println!(
                "wrote {} (keys in {}, mode 0600)",
                p.display(),
                dir.join("keys").display()
            );
            ExitCode::SUCCESS
        }
        Err(err) => {
            eprintln!("vyrn config init: {}: {err}", dir.display());
            ExitCode::from(2)
        }
    }
}

/// The placement, one thread a line: its core, how it waits, its tiles in poll order; on the
/// REF map, the topology it sits on and what breaks the REF rule (two tiles on SMT siblings of
/// one core, tiles on more than one NUMA node: `vyrn_tile::topo`).
fn print_placement(running: &RunningBox, map: &CoreMap) {
    println!(
        "tiles on {} threads ({} pinned){}:",
        running.runner.placement.len(),
        running.runner.pinned.load(Ordering::Relaxed),
        match map {
            CoreMap::PerTile(_) => " — ref: one per core",
            CoreMap::HotCold { .. } => " — hot path spinning on its core, cold tiles blocking",
            CoreMap::Shared { .. } => " — legacy round-robin (--threads)",
        }
    );
    for (names, core, wait) in &running.runner.placement {
        let how = wait.to_string();
        let at = match core {
            Some(c) => format!("core {c}"),
            None => "unpinned".to_string(),
        };
        println!("  {at:<9} {how:<28} {}", names.join(" "));
    }
    if let CoreMap::PerTile(cores) = map {
        let topo = vyrn_tile::topo::Topology::detect();
        let nodes = topo.numa_nodes(cores);
        println!(
            "topology ({:?}): core_map on NUMA node(s) {nodes:?}",
            topo.source
        );
        for (a, b) in topo.shared_cores(cores) {
            eprintln!(
                "vyrn seq: warning: core_map pins tiles on CPUs {a} and {b}, SMT siblings of one core: each spins at half speed (07 §4.1; `vyrn up --profile ref` places one per core)"
            );
        }
        if nodes.len() > 1 {
            eprintln!(
                "vyrn seq: warning: core_map spans NUMA nodes {nodes:?}: rings between tiles cross the interconnect"
            );
        }
    }
}

/// Run the box until `--secs` or a signal; exit 0, 1 (encoding refusals) or 2 (start refused).
pub fn run(o: Args) -> ExitCode {
    let cfg = match BoxConfig::load(&o.config) {
        Ok(c) => c,
        Err(errs) => {
            for e in errs {
                eprintln!("vyrn seq: config: {e}");
            }
            return ExitCode::from(2);
        }
    };
    let problems = startup_checks(&cfg);
    if !problems.is_empty() {
        for p in problems {
            eprintln!("vyrn seq: startup check failed: {p}");
        }
        return ExitCode::from(2);
    }
    let mut map = core_map_of(&cfg);
    // `--threads N`: the legacy map (every tile round-robin on N unpinned, yielding threads),
    // kept to compare against the hot/cold placement.
    if let (Some(t), false) = (o.threads, cfg.profile == Profile::Ref) {
        map = CoreMap::Shared {
            threads: t.max(1),
            cores: Vec::new(),
        };
    }
    let lay = cfg.engine.layout;
    println!(
        "vyrn seq: config {}: profile {:?}, {} lanes, {} substream(s), {} sessions, {} voters; startup checks passed",
        o.config.display(),
        cfg.profile,
        lay.n_lanes,
        lay.n_streams,
        cfg.engine.sessions.len(),
        cfg.voters
    );
    let mut net = match NetBox::open(&cfg, cfg.profile == Profile::Ref) {
        Ok(n) => n,
        Err(e) => {
            eprintln!("vyrn seq: opening the client and control ports: {e}");
            return ExitCode::from(2);
        }
    };
    let ctrl = match net.ctrl_addr() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("vyrn seq: the control port: {e}");
            return ExitCode::from(2);
        }
    };
    // The voters and their keys come from the membership ([voter.N] sections), never from
    // anything derivable.
    if cfg.voters_members.is_empty() {
        if cfg.profile != Profile::Dev {
            eprintln!(
                "vyrn seq: {}: no [voter.N] sections: a {:?} box needs its voters and their keys (REP_Membership)",
                o.config.display(),
                cfg.profile
            );
            return ExitCode::from(2);
        }
        eprintln!("vyrn seq: warning: no voters configured: nothing becomes durable or final, and the finality gate halts the book after FIN_GATE_BLOCKS blocks");
    }
    net.register_members(&cfg);
    // The metrics port and the signal handler before the box starts: a port clash must refuse
    // the start, not end a tenure that has begun.
    // SIGTERM/SIGINT end the run cleanly (the summary is printed).
    let stop = vyrn_nic::wait::stop_on_signals();
    let published = vyrn_metrics::Published::default();
    if let Some(a) = o.metrics {
        match vyrn_metrics::serve(a, published.clone()) {
            Ok(at) => {
                println!("metrics: http://{at}/metrics (Prometheus text, updated every second)")
            }
            Err(e) => {
                eprintln!("vyrn seq: --metrics {a}: {e}");
                return ExitCode::from(2);
            }
        }
    }
    let clients = net.client_addrs();
    let clock = Clock::new();
    let t0 = Instant::now();
    let (running, paths) = match net.start(&cfg, &map, clock) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("vyrn seq: starting the box: {e}");
            return ExitCode::from(2);
        }
    };
    println!(
        "client port(s) {:?}, control port {ctrl}, replication paths over {}",
        clients, paths.how
    );
    print_placement(&running, &map);
    let _ = t0;
    let metrics = o.metrics.is_some().then_some(&published);
    serve_box(running, clock, o.secs, stop, metrics)
}

/// The running box's report a second (and its metrics page when `published`), until `secs`
/// (0: none) or `stop`; then the summary. Exit 0, or 1 on encoding refusals. `vyrn seq` runs
/// its box here, and a promoted standby its own (07 §9.5).
pub(super) fn serve_box(
    running: RunningBox,
    clock: Clock,
    secs: u64,
    stop: &std::sync::atomic::AtomicBool,
    published: Option<&vyrn_metrics::Published>,
) -> ExitCode {
    if let Some(p) = published {
        p.set(render(&running, p, clock.now()));
    }
    let h = &running.handles;
    let s = &running.stats;
    let mut last_busy: Vec<u64> = vec![0; running.runner.stats.len()];
    let mut last_t = clock.now();
    let mut sec = 0u64;
    let mut peak_stream = 0.0f64;
    let mut peak_hasher = 0.0f64;
    let mut watchdog = vyrn_seq::runner::Watchdog::default();
    loop {
        std::thread::sleep(Duration::from_secs(1));
        sec += 1;
        let now = clock.now();
        // A tile that stopped polling: alarm and abort (a stalled box must not look alive).
        let polls = running
            .runner
            .stats
            .iter()
            .map(|(n, _, st)| (n.as_str(), st.polls.load(Ordering::Relaxed)));
        if let Some((tile, secs)) = watchdog.check(now, polls) {
            eprintln!("alarm=REP_A_STALL role=seq tile={tile}: no poll for {secs} s; aborting");
            std::process::abort();
        }
        let wall = (now - last_t).max(1) as f64;
        last_t = now;
        let mut loads = Vec::new();
        for (i, (name, _, st)) in running.runner.stats.iter().enumerate() {
            let b = st.busy_ns.load(Ordering::Relaxed);
            let frac = (b - last_busy[i]) as f64 / wall;
            last_busy[i] = b;
            if name.starts_with("stream") {
                peak_stream = peak_stream.max(frac);
            }
            if name == "hasher" {
                peak_hasher = peak_hasher.max(frac);
            }
            loads.push(format!("{name} {:.0}%", frac * 100.0));
        }
        let c = &h.control;
        println!(
            "[{sec:>4}s] in {}  out {}  frames {}  steps {}  released A/B {}/{}  durable {}  final {}/{} closed  gate halts {}  fenced {}  | load: {}",
            s.rx_client.load(Ordering::Relaxed),
            s.responses.load(Ordering::Relaxed),
            h.words.gate.iter().map(|g| g.frames.load(Ordering::Relaxed)).sum::<u64>(),
            h.words.step_done(),
            h.words.released(0),
            h.words.released(1),
            c.durable.load(Ordering::Relaxed),
            c.final_height.load(Ordering::Relaxed),
            c.closed_height.load(Ordering::Relaxed),
            c.gate_halts.load(Ordering::Relaxed),
            h.words.fenced(),
            loads.join(", ")
        );
        if let Some(p) = published {
            p.set(render(&running, p, clock.now()));
        }
        if (secs > 0 && sec >= secs) || stop.load(Ordering::Relaxed) {
            break;
        }
    }
    let RunningBox {
        runner,
        handles,
        stats,
        ..
    } = running;
    let total_ns = clock.now();
    let stats_v: Vec<(String, u64)> = runner
        .stats
        .iter()
        .map(|(n, _, s)| (n.clone(), s.busy_ns.load(Ordering::Relaxed)))
        .collect();
    runner.stop();
    let loads: Vec<String> = stats_v
        .iter()
        .map(|(n, b)| format!("{n} {:.1}%", *b as f64 * 100.0 / total_ns.max(1) as f64))
        .collect();
    summary(&handles, &stats, &loads, peak_stream, peak_hasher)
}

/// The box's summary at the end of its run: its ports, the tiles' loads, control, finality.
fn summary(
    handles: &vyrn_seq::tiles::BoxHandles,
    stats: &vyrn_seq::ports::NetStats,
    loads: &[String],
    peak_stream: f64,
    peak_hasher: f64,
) -> ExitCode {
    let mut ok = true;
    println!("--- summary");
    println!(
        "ports: client packets in {} (unknown {}, too long {}, over the slot {}, wrong lane port {}, lane ring full {}, socket full {}), responses/notices out {} (no address {}), frames written and fenced {} (writes A/B {}/{}, refused {}, REP_A_PATH raised {}), RepAcks {} (refused {}), NACKs {}, finality certs {} (bad {}), control from unknown sources {}, control unsealed {} (bad seal {}), data box reports: bad MAC {}, copy conflicts {} (evidence {}), control dropped (full/rate) {}, control over the slot {}, NackTooOld {}, retransmissions unicast {} (refused {}), SeqDataReq {} (answered {}), REP_DurableMark {}",
        stats.rx_client.load(Ordering::Relaxed),
        stats.rx_unknown.load(Ordering::Relaxed),
        stats.rx_too_long.load(Ordering::Relaxed),
        stats.rx_truncated.load(Ordering::Relaxed),
        stats.rx_wrong_port.load(Ordering::Relaxed),
        stats.rx_full.load(Ordering::Relaxed),
        stats.rx_kernel_dropped.load(Ordering::Relaxed),
        stats.responses.load(Ordering::Relaxed),
        stats.no_addr.load(Ordering::Relaxed),
        handles.words.gate.iter().map(|g| g.frames.load(Ordering::Relaxed)).sum::<u64>(),
        stats.path_writes[0].load(Ordering::Relaxed),
        stats.path_writes[1].load(Ordering::Relaxed),
        stats.frame_errors.load(Ordering::Relaxed),
        stats.path_alarms.load(Ordering::Relaxed),
        stats.ctrl[0].load(Ordering::Relaxed),
        handles.control.acks_refused.load(Ordering::Relaxed),
        stats.ctrl[1].load(Ordering::Relaxed),
        stats.ctrl[2].load(Ordering::Relaxed),
        stats.ctrl_bad.load(Ordering::Relaxed),
        stats.ctrl_unknown.load(Ordering::Relaxed),
        stats.ctrl_unsealed.load(Ordering::Relaxed),
        stats.ctrl_bad_seal.load(Ordering::Relaxed),
        stats.data_bad_mac.load(Ordering::Relaxed),
        stats.copy_conflicts.load(Ordering::Relaxed),
        stats.conflict_evidence.load(Ordering::Relaxed),
        stats.ctrl_dropped.load(Ordering::Relaxed),
        stats.ctrl_truncated.load(Ordering::Relaxed),
        stats.too_old.load(Ordering::Relaxed),
        stats.rtx_unicast.load(Ordering::Relaxed),
        stats.rtx_unicast_failed.load(Ordering::Relaxed),
        stats.seq_data_reqs.load(Ordering::Relaxed),
        stats.seq_data_sent.load(Ordering::Relaxed),
        stats.durable_marks.load(Ordering::Relaxed),
    );
    println!("tile load over the run (busy / wall): {}", loads.join(", "));
    println!(
        "peak 1 s load: stream cores {:.1}% (B-REP-4 budget 50%), order hasher {:.1}% (B-REP-6 budget 60%)",
        peak_stream * 100.0,
        peak_hasher * 100.0
    );
    println!(
        "control: durable step {}, final height {} of {} closed, finality-gate halts {}, divergence halts {} (Diverge messages {}), seq_fenced {}",
        handles.control.durable.load(Ordering::Relaxed),
        handles.control.final_height.load(Ordering::Relaxed),
        handles.control.closed_height.load(Ordering::Relaxed),
        handles.control.gate_halts.load(Ordering::Relaxed),
        handles.control.diverge_halts.load(Ordering::Relaxed),
        handles.control.diverge_msgs.load(Ordering::Relaxed),
        handles.words.fenced()
    );
    let cf = &handles.control.close_to_final;
    println!(
        "finality: block close -> final (Q valid finalize votes at the listener) p50 {:.2} ms p99 {:.2} ms max {:.2} ms over {} blocks",
        cf[0].load(Ordering::Relaxed) as f64 / 1e6,
        cf[1].load(Ordering::Relaxed) as f64 / 1e6,
        cf[2].load(Ordering::Relaxed) as f64 / 1e6,
        cf[3].load(Ordering::Relaxed)
    );
    if handles.words.fenced() {
        println!(
            "fenced: responses/notices held back {}, frames never written {}, fences for unwritable frames {}",
            handles.words.fenced_drops.load(Ordering::Relaxed),
            handles.words.gate.iter().map(|g| g.fenced_drops.load(Ordering::Relaxed)).sum::<u64>(),
            handles.words.gate.iter().map(|g| g.write_fences.load(Ordering::Relaxed)).sum::<u64>(),
        );
    }
    if handles.words.errors.load(Ordering::Relaxed) > 0 {
        eprintln!("vyrn seq: encoding refusals in the stream cores");
        ok = false;
    }
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}
