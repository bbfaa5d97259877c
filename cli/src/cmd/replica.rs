//! `vyrn replica`: one voting replica of a home, on the UDP backend.
//!
//! Usage: `vyrn replica --home FILE --index N --key FILE [--journal DIR[,DIR..]] [--secs N]
//! [--ack-us N]` (`vyrn replica --help` lists every option).
//!
//! * `--home`: the home's file (the one the sequencer reads; `[box] seq_pub`, `path_port`, the
//!   `[voter.N]` membership with `ctrl_addr`/`data_addr`, the `[databox.N]` sections, sessions
//!   and their keys for replay). The sequencer's seed file is never read.
//! * `--index`: which voter this is; `--key`: its secret vote seed (hex, a 0600 file), whose
//!   public key must be that voter's `vote_key`.
//! * Budgets: 07's figures, or on a `dev` home [`Budgets::dev`] (RepAcks every 250 µs, a data
//!   box down after 200 ms of silence, a hash-lag fault at 100 ms), printed at start. `--ack-us`
//!   overrides the RepAck period.
//! * `--journal DIR[,DIR..]`: the block journal's drive directories (07 §8.2): recovered and
//!   verified at start (printed), then every block this replica votes for is written once
//!   (`REP_BlockRecord`, `record.rs`) by a writer thread that syncs at most every 5 ms.
//!   `--journal-backend`: `auto` (io_uring + O_DIRECT where it works), `uring`, `std`;
//!   `--journal-sync-ms`: the sync period (07 §8.2's ≤ 5 ms is a budget).
//! * `--secs 0` (the default): run until killed.
//!
//! Every second a line: frames per path (first copies, duplicates, lost), holes, NACKs, peer
//! repairs, data frames and fetches, blocks decoded, headers checked, the voter's
//! checked height, final height and view, its proposals, verifies and votes, replay (responses, step lag) and any alarm. At the end, a summary with the replay
//! digest — a multiset hash of every first-copy response replay produced (order-free), equal at
//! every replica of a home that replayed the same steps.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::Ordering;
use std::time::Instant;

use super::{cores, Cores};
use vyrn_home::{read_seed, HomeConfig, Profile};
use vyrn_replica::disk::journal::BackendChoice;
use vyrn_replica::front::core::Budgets;
use vyrn_replica::node::{Node, NodeConfig};
use vyrn_replica::vote::SimplexCfg;

/// `vyrn replica`: one voting replica of a home (07 §7.2).
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The home's file (the one the sequencer reads; its seed file is never read).
    #[arg(long, value_name = "FILE")]
    pub home: PathBuf,
    /// Which voter of the membership this is.
    #[arg(long, value_name = "N")]
    pub index: usize,
    /// Its secret vote seed (hex, a 0600 file); its public key must be that voter's vote_key.
    #[arg(long, value_name = "FILE")]
    pub key: PathBuf,
    /// Run this many seconds (0: until SIGTERM/SIGINT).
    #[arg(long, default_value_t = 0)]
    pub secs: u64,
    /// RepAck period override, µs (10..=REP_ACK_LIVE_US).
    #[arg(long, value_name = "US", value_parser = clap::value_parser!(u64).range(10..=vyrn_wire::consts::REP_ACK_LIVE_US))]
    pub ack_us: Option<u64>,
    /// The block journal's drive directories (07 §8.2), comma-separated.
    #[arg(long, value_name = "DIR[,DIR..]", value_delimiter = ',')]
    pub journal: Option<Vec<PathBuf>>,
    /// Journal backend: auto (io_uring + O_DIRECT where it works), uring or std.
    #[arg(long, value_name = "auto|uring|std", default_value = "auto", value_parser = backend)]
    pub journal_backend: BackendChoice,
    /// The journal's sync period, ms (1..=1000; 07 §8.2's ≤ 5 ms is a budget; 0 = default).
    #[arg(long, value_name = "MS", default_value_t = 0, value_parser = clap::value_parser!(u64).range(0..=1000))]
    pub journal_sync_ms: u64,
    /// The block journal's segment size, MiB, each preallocated (0 = 256; a dev run's
    /// journals take a fraction of one).
    #[arg(long, value_name = "MIB", default_value_t = 0, value_parser = clap::value_parser!(u64).range(0..=4096))]
    pub journal_segment_mb: u64,
    /// Cores this process runs on (e.g. `1` or `0-3,6`).
    #[arg(long, value_name = "LIST", value_parser = cores)]
    pub cores: Option<Cores>,
    /// Cores of the journal's writer thread.
    #[arg(long, value_name = "LIST", value_parser = cores)]
    pub journal_cores: Option<Cores>,
    /// Run replay on its own thread (07 §7.2's replay cores), fed over a ring from the thread
    /// that runs order RX, the decoder and the data side. Off: every stage on one thread (a
    /// shared 2-core box).
    #[arg(long)]
    pub replay_thread: bool,
    /// Pin the replay thread to this core (it then spins when idle; implies --replay-thread).
    #[arg(long, value_name = "CORE")]
    pub replay_core: Option<usize>,
    /// Split replay further (07 §7.2): the replay thread is the replay BBO core, pinned to
    /// --replay-core, and the lanes run on threads of their own, one pinned to each core of
    /// this list; every one spins (the two sides wait on each other for every window of
    /// steps: dedicated cores only — on a shared box it is far slower than one replay thread,
    /// docs/benchmarks.md).
    #[arg(long, value_name = "LIST", value_parser = cores, requires = "replay_core")]
    pub replay_lane_cores: Option<Cores>,
    /// 07 §7.5: a REP_Snapshot every this many blocks, written to the first journal drive's
    /// `snapshots/` (this voter's at its index × N / voters; N a multiple of voters ×
    /// REP_ROOT_BLOCKS). Default with --journal: REP_SNAP_INTERVAL_S (60 s) of blocks, rounded
    /// up to that multiple; 0: none.
    #[arg(long, value_name = "N")]
    pub snapshot_blocks: Option<u64>,
    /// MiB of order frames held behind holes per substream at most (security review F11;
    /// default: the home file's `[voter.N] held_mib`, else 64): frames past it are refused and
    /// repaired when the hole fills.
    #[arg(long, value_name = "MIB", value_parser = clap::value_parser!(u64).range(1..=4096))]
    pub held_mib: Option<u64>,
    /// The Simplex engine's journal directory (default: `consensus-N` next to the home file).
    #[arg(long, value_name = "DIR")]
    pub consensus_dir: Option<PathBuf>,
    /// Cores of the Simplex engine's threads.
    #[arg(long, value_name = "LIST", value_parser = cores)]
    pub consensus_cores: Option<Cores>,
    /// Serve Prometheus metrics (`GET /metrics`) on this address; updated once a second.
    #[arg(long, value_name = "IP:PORT")]
    pub metrics: Option<std::net::SocketAddr>,
    /// Test and lab flags: only in a `vyrn` built with the `lab` feature.
    #[command(flatten)]
    pub lab: Lab,
}

/// `vyrn replica`'s test and lab flags (feature `lab`): the product build has none of them and
/// refuses each as an unknown argument (`cli/tests/product_flags.rs`).
#[cfg(feature = "lab")]
#[derive(Debug, Clone, Default, clap::Args)]
pub struct Lab {
    /// Test support only: vote as the interim voter (no consensus engine), for a home whose
    /// other voters are the in-process interim voters of the replica's tests.
    #[arg(long, hide = true)]
    pub interim_voter: bool,
    /// Lab fault injection: `A@S` or `B@S` drops every datagram of that replication path from
    /// S seconds after start, as a cut link would (07 §14 "path down").
    #[arg(long, hide = true, value_name = "PATH@SECS", value_parser = cut)]
    pub lab_cut_path: Option<(u8, u64)>,
    /// Lab fault injection (`vyrn up --isolate-seq`): SIGUSR1 cuts the box off from this
    /// replica both ways (its paths, its control address), SIGUSR2 heals it (07 §14 "sequencer
    /// cut off from ≥ 2 voters").
    #[arg(long, hide = true)]
    pub lab_isolate_seq: bool,
    /// Lab fault injection: sign a wrong state root at every root height, as a replica whose
    /// replay diverged (07 §7.4): one such voter is a RootFault, two of four fire REP_A_DIVERGE
    /// and halt the book.
    #[arg(long, hide = true)]
    pub lab_wrong_root: bool,
}

/// `vyrn replica`'s test and lab flags: none in the product build.
#[cfg(not(feature = "lab"))]
#[derive(Debug, Clone, Default, clap::Args)]
pub struct Lab {}

impl Lab {
    /// `--interim-voter`.
    pub fn interim_voter(&self) -> bool {
        #[cfg(feature = "lab")]
        return self.interim_voter;
        #[cfg(not(feature = "lab"))]
        false
    }
}

#[cfg(feature = "lab")]
fn cut(s: &str) -> Result<(u8, u64), String> {
    let (p, t) = s.split_once('@').ok_or("PATH@SECS, e.g. B@2")?;
    let path = match p {
        "A" | "a" => 0,
        "B" | "b" => 1,
        _ => return Err(format!("{p}: path A or B")),
    };
    let secs = t.parse::<u64>().map_err(|e| format!("{t}: {e}"))?;
    Ok((path, secs))
}

/// The replica's metrics page: what it renders (`Node::metrics`) and the endpoint's own.
pub(super) fn render(n: &Node, published: &vyrn_metrics::Published) -> String {
    let mut e = vyrn_metrics::Exposition::new();
    n.metrics(&mut e);
    published.own(&mut e);
    e.render()
}

fn backend(s: &str) -> Result<BackendChoice, String> {
    match s {
        "auto" => Ok(BackendChoice::Auto),
        "uring" => Ok(BackendChoice::Uring),
        "std" => Ok(BackendChoice::Std),
        x => Err(format!("{x}: auto, uring or std")),
    }
}

/// REP_ROOT_BLOCKS of the home's profile (07 §7.4; a dev home roots once a second of its
/// blocks: every 50 of 20 ms).
/// `--snapshot-blocks`, or 07 §7.5's default: REP_SNAP_INTERVAL_S of blocks, rounded up to a
/// multiple of voters × REP_ROOT_BLOCKS (so every voter's snapshots fall on root heights);
/// none without a journal or without the Simplex voter's state roots.
fn snapshot_blocks(o: &Args, h: &HomeConfig) -> u64 {
    if o.journal.is_none() || o.lab.interim_voter() {
        return o.snapshot_blocks.unwrap_or(0);
    }
    o.snapshot_blocks.unwrap_or_else(|| {
        let unit = (h.voters.max(1) as u64) * root_blocks(h).max(1);
        let blocks = vyrn_wire::consts::REP_SNAP_INTERVAL_S * 1_000_000_000 / h.block_ns.max(1);
        blocks.div_ceil(unit) * unit
    })
}

pub fn root_blocks(h: &HomeConfig) -> u64 {
    if h.profile == Profile::Dev {
        vyrn_replica::vote::RootSettings::dev(h.block_ns).root_blocks
    } else {
        vyrn_replica::vote::RootSettings::spec().root_blocks
    }
}

/// `vyrn verify-cert --home FILE --journal DIR[,DIR]`: check every finality certificate in a
/// replica's cert journal against the home's REP_Membership (07 §6.5, §13.1).
pub fn verify_cert_journal(home: &Path, dirs: &[PathBuf]) -> ExitCode {
    let Some(h) = HomeConfig::load_for("vyrn verify-cert", home) else {
        return ExitCode::from(2);
    };
    let Some(m) = h.membership.as_ref() else {
        eprintln!(
            "vyrn verify-cert: {} names no membership file",
            home.display()
        );
        return ExitCode::from(2);
    };
    match vyrn_replica::vote::verify_cert_journal(dirs, m, root_blocks(&h)) {
        Ok(r) if super::tools::print_cert_audit(&r) => ExitCode::SUCCESS,
        Ok(_) => ExitCode::from(1),
        Err(e) => {
            eprintln!("vyrn verify-cert: {e}");
            ExitCode::from(2)
        }
    }
}

/// What the replica found on its drives at start: the journal's recovery and the snapshots.
fn print_storage(name: &str, o: &Args, node: &Node) {
    if let Some(j) = node.journal() {
        let r = &j.recovered;
        println!(
            "{name}: journal on {} drive(s): recovered {} blocks up to height {}, refused {}, torn tails cut {}, failed drives {:?}",
            o.journal.as_ref().map_or(0, |d| d.len()),
            r.blocks,
            j.recovered_top,
            r.refused.len(),
            r.truncated.len(),
            r.failed_drives
        );
    }
    if let Some((p, found)) = node.snapshots() {
        match found {
            Ok(a) => println!("{name}: snapshots (07 §7.5): {}", a.line()),
            Err(e) => println!("{name}: snapshots (07 §7.5): not checked: {e}"),
        }
        println!(
            "{name}: a snapshot every {} blocks, this voter's at offset {} (07 §7.5)",
            p.every, p.offset
        );
    }
}

/// Run one replica until `--secs` or a signal; exit 0, 1 (replay stopped) or 2 (start refused).
pub fn run(o: Args) -> ExitCode {
    // `--cores`: off the sequencer box's hot core when sharing its host (the threads it starts
    // inherit the set).
    if !vyrn_tile::pin::pin_process("vyrn replica", o.cores.as_ref().map(|c| c.0.as_slice())) {
        return ExitCode::from(2);
    }
    let Some(home) = HomeConfig::load_for("vyrn replica", &o.home) else {
        return ExitCode::from(2);
    };
    let seed = match read_seed(&o.key) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("vyrn replica: --key {}: {e}", o.key.display());
            return ExitCode::from(2);
        }
    };
    let mut budgets = Budgets::of(home.profile);
    if let Some(us) = o.ack_us {
        budgets.rx.ack_ns = us * 1000;
    }
    // The Simplex voter (07 §6.3): its peers' p2p addresses from the membership, its journal
    // in `--consensus-dir` (default: `consensus-N` next to the home's file).
    let storage = o.consensus_dir.clone().unwrap_or_else(|| {
        o.home
            .parent()
            .unwrap_or(std::path::Path::new("."))
            .join(format!("consensus-{}", o.index))
    });
    let mut simplex = SimplexCfg::new(
        home.voters_members.iter().map(|m| m.p2p()).collect(),
        storage,
        "home".into(),
    );
    if home.profile == Profile::Dev {
        simplex = simplex.dev(home.block_ns);
    }
    simplex.cores = o.consensus_cores.clone().map(|c| c.0);
    #[cfg(feature = "lab")]
    {
        simplex.lab_wrong_root = o.lab.lab_wrong_root;
    }
    let snapshot_blocks = snapshot_blocks(&o, &home);
    let cfg = NodeConfig {
        home,
        index: o.index,
        vote_key: ed25519_dalek::SigningKey::from_bytes(seed.expose()),
        standby: false,
        budgets,
        journal: o.journal.clone(),
        journal_backend: o.journal_backend,
        journal_sync_ns: o.journal_sync_ms * 1_000_000,
        journal_segment_bytes: o.journal_segment_mb << 20,
        journal_cores: o.journal_cores.clone().map(|c| c.0),
        simplex: (!o.lab.interim_voter()).then(|| simplex.clone()),
        replay_tile: o.replay_thread || o.replay_core.is_some(),
        replay_lanes: o.replay_lane_cores.as_ref().map_or(0, |c| c.0.len()),
        replay_lane_cores: o.replay_lane_cores.clone().map(|c| c.0).unwrap_or_default(),
        snapshot_blocks,
    };
    let mut node = match Node::open(&cfg) {
        Ok(n) => n,
        Err(e) => {
            eprintln!("vyrn replica {}: {e}", o.index);
            return ExitCode::from(2);
        }
    };
    if let Some(m) = o.held_mib {
        node.core_mut()
            .order_rx_mut()
            .set_held_bytes_max((m as usize) << 20);
    }
    // Off the sequencer's hot core where the home shares a box: the OS places this process;
    // it blocks when idle.
    vyrn_nic::wait::fine_timer_slack();
    let name = format!("replica {}", o.index);
    println!(
        "{name}: voter {} of {}, paths on port {}/{}, {} data box(es); budgets ({:?}): acks every {} µs, data box down after {} ms silent, hash lag fault at {} ms",
        o.index,
        cfg.home.voters,
        cfg.home.path_port,
        cfg.home.path_port + 1,
        cfg.home.databoxes.len(),
        cfg.home.profile,
        budgets.rx.ack_ns / 1000,
        budgets.data.silence_ns / 1_000_000,
        budgets.hashlag_fault_ns / 1_000_000
    );
    if let Some(m) = &cfg.home.membership {
        println!(
            "{name}: membership (07 §13.1) from epoch {}: {} voters, Q {}, certified by {} of them",
            m.epoch_from,
            m.voters.len(),
            m.q,
            m.cert.len()
        );
    }
    if o.lab.interim_voter() {
        println!("{name}: INTERIM voter (test support: no consensus engine)");
    } else {
        println!(
            "{name}: Simplex voter on {} (Δ {} ms, verify wait {} ms), engine journal in {}",
            simplex.p2p[o.index],
            simplex.delta.as_millis(),
            simplex.verify_wait_ns / 1_000_000,
            simplex.storage.display()
        );
    }
    print_storage(&name, &o, &node);
    // SIGTERM/SIGINT end the run cleanly (the summary is printed).
    let stop = vyrn_nic::wait::stop_on_signals();
    let published = vyrn_metrics::Published::default();
    if let Some(a) = o.metrics {
        match vyrn_metrics::serve(a, published.clone()) {
            Ok(at) => println!("{name}: metrics on http://{at}/metrics"),
            Err(e) => {
                eprintln!("vyrn replica {}: --metrics {a}: {e}", o.index);
                return ExitCode::from(2);
            }
        }
        published.set(render(&node, &published));
    }
    let clock = vyrn_tile::Clock::from_ns(1_000_000);
    if cfg.replay_tile {
        if let Err(e) = node.start_replay_thread(move || clock.now(), o.replay_core) {
            eprintln!("vyrn replica {}: replay thread: {e}", o.index);
            return ExitCode::from(2);
        }
        println!(
            "{name}: replay on its own thread{}{}",
            o.replay_core
                .map_or(String::new(), |c| format!(", pinned to core {c}")),
            o.replay_lane_cores
                .as_ref()
                .map_or(String::new(), |c| format!(
                    "; its lanes on {} thread(s) of their own, cores {:?}",
                    c.0.len(),
                    c.0
                ))
        );
    }
    #[cfg(feature = "lab")]
    arm_lab(&mut node, &o.lab, &name);
    let metrics = o.metrics.is_some().then_some(published);
    let Some((node, r)) = run_front(node, clock, &name, o.secs, metrics, stop) else {
        return ExitCode::from(1);
    };
    println!("--- {name} summary");
    println!("{}", line(&node));
    // The data side's every counter (07 §5.3–§5.6), for the SRE reading a replica that lagged.
    println!("{name}: data side {:?}", node.core().data().counters());
    println!("{name}: {}", digest_line(&node));
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{name}: replay stopped: {e:?}");
            ExitCode::from(1)
        }
    }
}

/// The front as one cold tile on the runner (`Node`, waiting as `NODE_WAIT` says) until a
/// signal, `secs` or a replay error; its line a second and its metrics page (`published`) are
/// rendered on its own thread. The node, stopped, and how replay ended.
fn run_front(
    node: Node,
    clock: vyrn_tile::Clock,
    name: &str,
    secs: u64,
    published: Option<vyrn_metrics::Published>,
    stop: &std::sync::atomic::AtomicBool,
) -> Option<(Node, Result<(), vyrn_engine::home::ReplayError>)> {
    let halted = node.halted();
    let mut sec = 0u64;
    let line_name = name.to_string();
    let tile = vyrn_tile::Reported::new(node, 1_000_000_000, move |n: &mut Node, _| {
        sec += 1;
        println!("[{sec:>4}s] {line_name}: {}", line(n));
        if let Some(p) = &published {
            p.set(render(n, p));
        }
    });
    let runner = vyrn_tile::Runner::start(
        vec![vyrn_tile::Group {
            core: None,
            wait: vyrn_replica::node::NODE_WAIT,
            tasks: vec![Box::new(tile)],
        }],
        clock,
    );
    let t0 = Instant::now();
    vyrn_tile::supervise(&runner, "replica", || {
        stop.load(Ordering::Relaxed)
            || halted.load(Ordering::Relaxed)
            || (secs > 0 && t0.elapsed().as_secs() >= secs)
    });
    let mut tiles = runner.stop();
    let Some(tile) = vyrn_tile::take::<vyrn_tile::Reported<Node>>(&mut tiles) else {
        eprintln!("{name}: the front's tile was lost");
        return None;
    };
    let mut node = tile.tile;
    let r = node.finish();
    Some((node, r))
}

/// The Simplex voter's part of the line: final height and view, proposals, verifies, votes.
fn voter_line(n: &Node) -> String {
    let Some(v) = n.simplex() else {
        return String::new();
    };
    let d = v.desk_counters();
    let c = v.counters();
    let (started, failed) = v.engine_state();
    format!(
        ", final {} (view {}), led {}/{}, verified {} true {} false {} timed out {}, nullified {}, votes out {}, certs out {}, root certs {}{}{}{}",
        v.final_height(),
        v.final_view(),
        d.proposed,
        d.propose_asked,
        d.verify_asked,
        d.verify_true,
        d.verify_false,
        d.verify_timeout,
        d.nullified,
        c.votes_out,
        c.certs_out,
        c.root_certs_out,
        if c.diverges > 0 {
            ", REP_A_DIVERGE: voting stopped"
        } else {
            ""
        },
        match v.refused {
            Some(h) => format!(", REFUSED at {h}"),
            None => String::new(),
        },
        match (started, failed) {
            (_, true) => ", ENGINE FAILED".to_string(),
            (false, _) => ", engine starting".to_string(),
            _ => String::new(),
        }
    )
}

/// `replay digest D over N responses`: the first 8 bytes of replay's order-free digest (`vyrn
/// up` compares it across the replicas and the standby).
pub(super) fn digest_line(n: &Node) -> String {
    let d = n.replay().digest();
    let hex: String = d.iter().take(8).map(|b| format!("{b:02x}")).collect();
    format!(
        "replay digest {hex} over {} responses",
        n.replay().responses
    )
}

/// The lab faults a replica is started with (`--lab-cut-path`, `--lab-isolate-seq`).
#[cfg(feature = "lab")]
fn arm_lab(node: &mut Node, lab: &Lab, name: &str) {
    if let Some((path, at)) = lab.lab_cut_path {
        // The front's clock starts at 1 ms.
        node.cut_path(path, at * 1_000_000_000 + 1_000_000);
        println!(
            "{name}: LAB FAULT: path {} cut from {at} s",
            if path == 0 { 'A' } else { 'B' }
        );
    }
    if lab.lab_isolate_seq {
        node.isolate_seq_on(super::isolate::isolation_flag());
        println!("{name}: LAB FAULT armed: SIGUSR1 cuts the box off, SIGUSR2 heals it");
    }
}

/// What an operator reads about one replica.
pub(super) fn line(n: &Node) -> String {
    let c = n.counters();
    let core = n.core();
    let rx = core.order_rx().counters();
    let skew = core.order_rx().path_skew();
    let fill = core.order_rx().hole_fill();
    let v = core.verdicts().counters();
    let d = core.data().counters();
    let (dec, rep) = core.replay_lag();
    let lag = core.replay_lag_time();
    let alarms: Vec<&str> = (0..2u8)
        .filter(|&p| core.order_rx().path_alarm(p))
        .map(|p| {
            if p == 0 {
                "REP_A_PATH(A)"
            } else {
                "REP_A_PATH(B)"
            }
        })
        .collect();
    format!(
        "frames A/B {}/{} (dups {}/{}, lost {}/{}), repaired {} (dups {}), holes {}, NACKs {}, peer repairs asked {} served {}, repair round trip {:.0} µs, \
         data frames {} (gaps {}, fetched {}, unavailable {}, from peers asked/got {}/{}, served to peers {}, from the sequencer asked/got {}/{}, DataDown sent/taken {}/{}, redirects {}), blocks {}, headers {} (bad {}), voted to {}{}, \
         replay {} responses, step lag {}, replay lag p50/p99/max {:.2}/{:.2}/{:.2} ms over {} steps, seq faults {}, unknown sources {}, tx dropped {}, \
         path skew A/B p50/p99/max {:.1}/{:.1}/{:.1} µs over {} frames, \
         hole to filled p50/p99/max by a path {:.1}/{:.1}/{:.1} µs over {}, by a repair {:.1}/{:.1}/{:.1} µs over {}{}{}",
        rx.first[0],
        rx.first[1],
        rx.dups[0],
        rx.dups[1],
        rx.lost[0],
        rx.lost[1],
        rx.repaired,
        rx.repair_dups,
        rx.holes,
        rx.nacks,
        rx.repairs,
        c.repairs_served.1,
        core.order_rx().repair_rtt().srtt_ns() as f64 / 1e3,
        d.frames[0] + d.frames[1] + d.frames[2],
        d.gaps,
        d.gap_fetches,
        c.unavailable,
        c.peer_data_asked,
        c.peer_data_rx,
        c.peer_data_served,
        c.seq_data_asked,
        c.seq_data_rx,
        c.data_down_sent,
        c.data_down_rx,
        c.redirects_sent,
        c.blocks,
        v.headers,
        v.bad_sig,
        n.voted(),
        voter_line(n),
        n.replay().responses,
        dec.saturating_sub(rep),
        lag.p50 as f64 / 1e6,
        lag.p99 as f64 / 1e6,
        lag.max as f64 / 1e6,
        lag.steps,
        c.seq_faults,
        c.unknown_src,
        c.tx_dropped,
        skew.p50 as f64 / 1e3,
        skew.p99 as f64 / 1e3,
        skew.max as f64 / 1e3,
        skew.frames,
        fill.by_path.p50 as f64 / 1e3,
        fill.by_path.p99 as f64 / 1e3,
        fill.by_path.max as f64 / 1e3,
        fill.by_path.frames,
        fill.by_repair.p50 as f64 / 1e3,
        fill.by_repair.p99 as f64 / 1e3,
        fill.by_repair.max as f64 / 1e3,
        fill.by_repair.frames,
        n.journal().map_or(String::new(), |j| format!(
            ", journal synced to {} (appended {}, skipped {}, errors {}), certs {}",
            j.synced(), j.appended(), j.skipped, j.errors(), j.certs()
        )),
        if alarms.is_empty() {
            String::new()
        } else {
            format!(", alarms {}", alarms.join(" "))
        }
    )
}
