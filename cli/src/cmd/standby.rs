//! `vyrn standby`: the warm standby — its finality listener (07 §6.8) and its non-voting replica (07 §9.5).
//!
//! Usage: `vyrn standby --home FILE [--key FILE] [--secs N] [--metrics IP:PORT] [--cores LIST]`.
//!
//! `--key` is the standby's secret identity seed (hex, 0600; default `keys/standby.key` beside
//! the home's file), whose public key must be `[standby] link_key`.
//!
//! Every voter sends its finalize vote, and later each `REP_FinalityCert`, to the sequencer's
//! *and the standby's* control port, so the standby learns finality at the same hop as the
//! sequencer (07 §6.8) — the state a promoted standby needs first. This process binds the home's
//! `[standby] ctrl_addr` and runs the same listener as the sequencer's cold certificate tile
//! (`vyrn_consensus::FinalityListener`: votes kept per proposal, batch-verified once Q distinct
//! voters signed, `final_height` only with Q valid signatures). Datagrams from any address but a
//! voter's `ctrl_addr` are counted and dropped unread; anything but a vote or a certificate is
//! counted and ignored. As on the box's control port: a finalize vote counts only from the
//! address of the voter it names, every vote and certificate is charged to the voter it came
//! from ([`FinalityListener::on_cert_from`](vyrn_consensus::FinalityListener::on_cert_from), security review F16), and each voter is held to
//! [`CERT_PER_SEC`](vyrn_consensus::listener::CERT_PER_SEC) with a burst of
//! [`CERT_BURST`](vyrn_consensus::listener::CERT_BURST) (a token bucket per voter; the rest is
//! counted and dropped before any signature check).
//!
//! Where `[standby]` names its replica (`replica_addr`, `data_addr`), the process also runs the
//! standby's non-voting replica (07 §9.5, C-ONEBIN): a replica's front and replay
//! (`vyrn_replica::node::Node` with `standby`) on both paths' multicast groups, fed DATA frames
//! by every data box and repaired by NACKs to the box, checking every block as a voter's
//! verdict would and voting in none. It reports whether it is `promotable` (07 §9.5:
//! REP_PROMOTE_HISTORY_S replayed, replay lag within REP_PROMOTE_LAG_US, no block refused) and
//! raises REP_A_STANDBY once warm when it is not.
//!
//! When the box goes silent, the replica sends its TailReport (07 §9.3) to every voter, and a seal
//! names the standby next when it is promotable. When the seal is final (the voters send it the
//! certificate), the replica follows it, replays to the seal's last step and stops; this process
//! then hands its engine to the box of the next tenure (`vyrn_seq::takeover`, one writer:
//! INV-WRITER) on the standby's addresses (`BoxConfig::standby_box`, checked at the start: a
//! standby that could not start it reports promotable = 0) and runs it as `vyrn seq` runs its
//! box, for the rest of `--secs`.
//!
//! A line a second from each (the listener's final height and view, votes, bad signatures; the
//! replica's checked height, promotable and a replica's line); `--metrics` serves
//! `vyrn_standby_*` and the replica's `vyrn_replica_*` in Prometheus text; at the end the summary
//! lines `standby: final height H` and `standby replica: replay digest D over N responses`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::Ordering;
use std::time::Instant;

use super::{cores, Cores};
use vyrn_home::HomeConfig;
use vyrn_nic::udp::UdpPort;
use vyrn_replica::node::{Node, NodeConfig, Promotable};
use vyrn_seq::standby::Standby;

/// `vyrn standby`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The home's file (with a `[standby] ctrl_addr`).
    #[arg(long, value_name = "FILE")]
    pub home: PathBuf,
    /// Its secret identity seed (hex, 0600); default `keys/standby.key` beside the home file.
    #[arg(long, value_name = "FILE")]
    pub key: Option<PathBuf>,
    /// Run this many seconds (0: until SIGTERM/SIGINT).
    #[arg(long, default_value_t = 0)]
    pub secs: u64,
    /// Cores this process runs on (e.g. `1` or `0-3,6`).
    #[arg(long, value_name = "LIST", value_parser = cores)]
    pub cores: Option<Cores>,
    /// Serve Prometheus metrics (`GET /metrics`) on this address; updated once a second.
    #[arg(long, value_name = "IP:PORT")]
    pub metrics: Option<SocketAddr>,
    /// Lab fault injection (`vyrn up --isolate-seq`): SIGUSR1 cuts the box off from the
    /// standby's replica, SIGUSR2 heals it.
    #[cfg(feature = "lab")]
    #[arg(long, hide = true)]
    pub lab_isolate_seq: bool,
}

/// Run the standby's listener; exit 0, or 2 when the start is refused.
pub fn run(o: Args) -> ExitCode {
    if !vyrn_tile::pin::pin_process("vyrn standby", o.cores.as_ref().map(|c| c.0.as_slice())) {
        return ExitCode::from(2);
    }
    let Some(home) = HomeConfig::load_for("vyrn standby", &o.home) else {
        return ExitCode::from(2);
    };
    match serve(&home, &o) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("vyrn standby: {e}");
            ExitCode::from(2)
        }
    }
}

/// The standby's metrics page: what it renders (`Standby::metrics`) and the endpoint's own.
fn render(s: &Standby<UdpPort>, published: &vyrn_metrics::Published) -> String {
    let mut e = vyrn_metrics::Exposition::new();
    s.metrics(&mut e);
    published.own(&mut e);
    e.render()
}

fn serve(home: &HomeConfig, o: &Args) -> Result<(), String> {
    if home.standby_ctrl.is_none() {
        return Err("the home's file has no [standby] section (its ctrl_addr)".into());
    }
    let key_path = o.key.clone().unwrap_or_else(|| {
        o.home
            .parent()
            .unwrap_or(std::path::Path::new("."))
            .join("keys/standby.key")
    });
    let seed = vyrn_home::read_seed(&key_path)
        .map_err(|e| format!("--key {}: {e}", key_path.display()))?;
    let me = ed25519_dalek::SigningKey::from_bytes(seed.expose());
    if Some(me.verifying_key()) != home.standby_key {
        return Err(format!(
            "--key {}: not the secret of [standby] link_key",
            key_path.display()
        ));
    }
    let standby = vyrn_seq::standby::open(home, &me)?;
    // 07 §9.5: the non-voting replica beside the listener, where the file names one.
    let mut node = match home.standby_replica {
        Some(_) => Some(open_replica(home, &me)?),
        None => None,
    };
    drop(me);
    // The box it becomes when promoted, checked now: a standby that could not start it is
    // never reported promotable.
    let boxed = node.as_ref().map(|_| {
        vyrn_home::BoxConfig::standby_box(&o.home, seed.clone())
            .map_err(|e| format!("its box: {e}"))
    });
    if let (Some(Err(e)), Some(n)) = (&boxed, node.as_mut()) {
        eprintln!("vyrn standby: warning: this standby cannot be promoted ({e}): it reports promotable = 0");
        n.bar_promotion();
    }
    let boxed = boxed.and_then(Result::ok);
    drop(seed);
    // 07 §9.5: a warm standby's box memory and signer, built now (not at the promotion).
    let reserve = boxed.as_ref().map(vyrn_seq::ports::standby_reserve);
    // Its box's client ports too: bound now, a client redirected before the box's tiles run
    // finds its packets queued there (07 §9.5). A port that cannot be bound bars promotion.
    let clients = match boxed
        .as_ref()
        .map(|c| vyrn_seq::ports::ClientPorts::open(c, c.profile == vyrn_home::Profile::Ref))
    {
        Some(Ok(p)) => Some(p),
        Some(Err(e)) => {
            eprintln!("vyrn standby: warning: this standby cannot be promoted (its box's client port: {e}): it reports promotable = 0");
            if let Some(n) = node.as_mut() {
                n.bar_promotion();
            }
            None
        }
        None => None,
    };
    let at = standby
        .port()
        .local_addr()
        .map_err(|e| format!("control port: {e}"))?;
    println!(
        "standby: finality listener on {at} for {} voters (Q {})",
        standby.listener().voters().n(),
        standby.listener().voters().quorum()
    );
    match (&node, home.standby_replica) {
        (Some(_), Some(r)) => println!(
            "standby: replica (non-voting, 07 §9.5) on {}, data on {}, paths on port {}/{}; {}",
            r.ctrl_addr,
            r.data_addr.map_or("-".into(), |a| a.to_string()),
            home.path_port,
            home.path_port + 1,
            match &boxed {
                Some(b) => format!(
                    "promoted on a seal that names it: its box on client port {}:{}, control port {}",
                    b.ip, b.client_port, b.ctrl_port
                ),
                None => "never promoted".into(),
            }
        ),
        _ => println!(
            "standby: no [standby] replica_addr: finality listener only (never promotable: a seal names no next sequencer)"
        ),
    }
    #[cfg(feature = "lab")]
    if let (true, Some(n)) = (o.lab_isolate_seq, node.as_mut()) {
        n.isolate_seq_on(super::isolate::isolation_flag());
        println!("standby: LAB FAULT armed: SIGUSR1 cuts the box off, SIGUSR2 heals it");
    }
    let stop = vyrn_nic::wait::stop_on_signals();
    let published = vyrn_metrics::Published::default();
    if let Some(a) = o.metrics {
        let at =
            vyrn_metrics::serve(a, published.clone()).map_err(|e| format!("--metrics {a}: {e}"))?;
        println!("standby: metrics on http://{at}/metrics");
        published.set(render(&standby, &published));
    }
    let metrics = o.metrics.is_some().then_some(published.clone());
    let promote = node.as_ref().map(Node::promote_flag);
    let (runner, halted) = start(standby, node, metrics);
    let t0 = Instant::now();
    let promoted = || promote.as_ref().is_some_and(|p| p.load(Ordering::Acquire));
    vyrn_tile::supervise(&runner, "standby", || {
        stop.load(Ordering::Relaxed)
            || halted.as_ref().is_some_and(|h| h.load(Ordering::Relaxed))
            || (o.secs > 0 && t0.elapsed().as_secs() >= o.secs)
            || promoted()
    });
    let mut tiles = runner.stop();
    let s = vyrn_tile::take::<vyrn_tile::Reported<Standby<UdpPort>>>(&mut tiles)
        .ok_or("the listener's tile was lost (its thread panicked)")?
        .tile;
    let node = vyrn_tile::take::<vyrn_tile::Reported<Node>>(&mut tiles).map(|t| t.tile);
    summary(&s);
    if let (true, Some(cfg)) = (promoted(), boxed.as_ref()) {
        let node = node.ok_or("the replica's tile was lost (its thread panicked)")?;
        // The listener's control port is the box's now.
        drop(s);
        let left = match o.secs {
            0 => 0,
            s => s.saturating_sub(t0.elapsed().as_secs()).max(1),
        };
        let metrics = o.metrics.is_some().then_some(&published);
        return promote_box(node, (cfg, reserve, clients), left, stop, metrics);
    }
    match node {
        Some(mut n) => {
            let r = n.finish();
            replica_summary(&n);
            r.map_err(|e| format!("the standby's replay stopped: {e:?}"))
        }
        None if halted.is_some() => Err("the replica's tile was lost (its thread panicked)".into()),
        None => Ok(()),
    }
}

/// 07 §9.5: the seal named this standby and its replay stands at the seal: its engine becomes
/// the box of the next tenure on the standby's addresses (`cfg`), run and reported as `vyrn seq`
/// runs its box, for `secs` more (0: until a signal).
fn promote_box(
    node: Node,
    (cfg, reserve, clients): (
        &vyrn_home::BoxConfig,
        Option<vyrn_seq::tiles::Reserve>,
        Option<vyrn_seq::ports::ClientPorts>,
    ),
    secs: u64,
    stop: &std::sync::atomic::AtomicBool,
    published: Option<&vyrn_metrics::Published>,
) -> Result<(), String> {
    let t0 = Instant::now();
    let f = node
        .followed()
        .cloned()
        .ok_or("the standby's replica follows no seal")?;
    println!("standby replica: {}", super::replica::digest_line(&node));
    let (engine, seal) = node.into_handover()?;
    let handover = t0.elapsed();
    let map = vyrn_seq::ports::core_map_of(cfg);
    let clock = vyrn_seq::runner::Clock::new();
    let tenure = vyrn_seq::shm::TenureId {
        tenure: f.next.tenure,
        sender: f.next.sender,
    };
    let (running, paths, first_step) = vyrn_seq::ports::start_promoted(
        cfg,
        &map,
        clock,
        engine,
        &seal,
        (tenure, reserve, clients),
    )?;
    println!(
        "standby: promoted (07 §9.5): tenure {} of sequencer {} from step {first_step}, height {} (after the seal block {}), {:.1} ms from the seal to the box's tiles (the engine handed over in {:.1} ms); client port {:?}, control port {}:{}, replication paths over {}",
        tenure.tenure,
        tenure.sender,
        seal.height + 1,
        seal.height,
        t0.elapsed().as_secs_f64() * 1e3,
        handover.as_secs_f64() * 1e3,
        running.client_addr,
        cfg.ip,
        cfg.ctrl_port,
        paths.how
    );
    match super::seq::serve_box(running, clock, secs, stop, published) {
        c if c == ExitCode::SUCCESS => Ok(()),
        _ => Err("the promoted box reported encoding refusals".into()),
    }
}

/// The standby's replica (07 §9.5): a replica's front and replay on the home's `[standby]`
/// addresses, under the standby's identity, checking every block and voting in none.
fn open_replica(home: &HomeConfig, me: &ed25519_dalek::SigningKey) -> Result<Node, String> {
    let cfg = NodeConfig {
        standby: true,
        ..NodeConfig::new(home.clone(), home.voters_members.len(), me.clone())
    };
    Node::open(&cfg).map_err(|e| format!("the standby's replica: {e}"))
}

/// The listener (blocking on its port) and the replica (as a replica's front waits) on a
/// thread each; a line a second from each, and the metrics page from both.
fn start(
    standby: Standby<UdpPort>,
    node: Option<Node>,
    published: Option<vyrn_metrics::Published>,
) -> (
    vyrn_tile::Runner,
    Option<std::sync::Arc<std::sync::atomic::AtomicBool>>,
) {
    // The listener's part of the page, which the replica's thread completes when it runs.
    let part = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    let with_node = node.is_some();
    let (p1, part1) = (published.clone(), part.clone());
    let mut sec = 0u64;
    let tile = vyrn_tile::Reported::new(
        standby,
        1_000_000_000,
        move |s: &mut Standby<UdpPort>, _| {
            sec += 1;
            let (l, counts) = (s.listener(), s.counts());
            println!(
                "[{sec:>4}s] standby: final height {} (view {}), votes {}, bad {}, from unknown sources {}",
                l.final_height(),
                l.final_view(),
                counts.taken,
                counts.bad,
                counts.unknown
            );
            match (&p1, with_node) {
                (Some(p), false) => p.set(render(s, p)),
                (Some(_), true) => {
                    let mut e = vyrn_metrics::Exposition::new();
                    s.metrics(&mut e);
                    *part1.lock().unwrap_or_else(|e| e.into_inner()) = e.render();
                }
                (None, _) => {}
            }
        },
    );
    let mut groups = vec![vyrn_tile::Group {
        core: None,
        wait: vyrn_tile::Wait::Block {
            timeout_ns: 100_000_000,
        },
        tasks: vec![Box::new(tile)],
    }];
    let halted = node.as_ref().map(Node::halted);
    if let Some(node) = node {
        let mut sec = 0u64;
        let tile = vyrn_tile::Reported::new(node, 1_000_000_000, move |n: &mut Node, _| {
            sec += 1;
            println!("[{sec:>4}s] standby replica: {}", standby_line(n));
            if let Some(p) = &published {
                let text = super::replica::render(n, p);
                let listener = part.lock().unwrap_or_else(|e| e.into_inner()).clone();
                p.set(text + &listener);
            }
        });
        groups.push(vyrn_tile::Group {
            core: None,
            wait: vyrn_replica::node::NODE_WAIT,
            tasks: vec![Box::new(tile)],
        });
    }
    (
        vyrn_tile::Runner::start(groups, vyrn_tile::Clock::from_ns(1_000_000)),
        halted,
    )
}

/// The standby's state first (07 §9.5), then a replica's line.
fn standby_line(n: &Node) -> String {
    let (checked, p, alarm) = n
        .standby_state()
        .unwrap_or((0, Promotable::Warming(0), false));
    format!(
        "checked to {checked}, promotable {}{}; {}",
        match p {
            Promotable::Yes => "yes".to_string(),
            Promotable::Warming(ns) => format!("no (warming, {} s of history)", ns / 1_000_000_000),
            Promotable::Lagging(us) => format!("no (replay lag {us} µs)"),
            Promotable::Refused(h) => format!("no (block {h} refused)"),
            Promotable::NoBox => "no (its box cannot start: see the start warning)".to_string(),
        },
        if alarm { ", alarm REP_A_STANDBY" } else { "" },
        super::replica::line(n)
    )
}

/// The listener's summary line.
fn summary(s: &Standby<UdpPort>) {
    let (listener, counts) = (s.listener(), s.counts());
    let lc = listener.counters();
    println!(
        "standby: final height {} (view {}), {} proposals finalized, {} votes taken, {} bad signatures, {} refused, {} from unknown sources, {} other messages, {} over the rate limit, {} unsealed, {} with a bad seal",
        listener.final_height(),
        listener.final_view(),
        lc.finalized,
        counts.taken,
        lc.bad_sigs,
        lc.refused,
        counts.unknown,
        counts.other,
        counts.limited,
        counts.unsealed,
        counts.bad_seal
    );
}

/// The replica's summary: its line, and its replay digest (`vyrn up` compares it with the
/// voters').
fn replica_summary(n: &Node) {
    println!("standby replica: {}", standby_line(n));
    println!("standby replica: {}", super::replica::digest_line(n));
}
