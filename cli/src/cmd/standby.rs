//! `vyrn standby`: the warm standby's finality listener (07 §6.8, issue 13 item 3).
//!
//! Usage: `vyrn standby --home FILE [--secs N] [--metrics IP:PORT] [--cores LIST]`.
//!
//! Every voter sends its finalize vote, and later each `REP_FinalityCert`, to the sequencer's
//! *and the standby's* control port, so the standby learns finality at the same hop as the
//! sequencer (07 §6.8) — the state a promoted standby needs first. This process binds the home's
//! `[standby] ctrl_addr` and runs the same listener as the sequencer's cold certificate tile
//! (`vyrn_consensus::FinalityListener`: votes kept per proposal, batch-verified once Q distinct
//! voters signed, `final_height` only with Q valid signatures). Datagrams from any address but a
//! voter's `ctrl_addr` are counted and dropped unread; anything but a vote or a certificate is
//! counted and ignored.
//!
//! Not built: the rest of the warm standby of 07 §9 — its replay, TailReport and promotion.
//!
//! A line a second (final height and view, votes, bad signatures); `--metrics` serves
//! `vyrn_standby_*` in Prometheus text; at the end a summary line `standby: final height H`.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::Ordering;
use std::time::Instant;

use super::{cores, Cores};
use vyrn_consensus::{FinalityListener, VoteOutcome, Voters};
use vyrn_nic::udp::{UdpConfig, UdpPort};
use vyrn_nic::{Port, RxBatch};
use vyrn_seq::boxcfg::HomeConfig;
use vyrn_wire::msg::ctrl::CtrlMsg;

/// `vyrn standby`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The home's file (with a `[standby] ctrl_addr`).
    #[arg(long, value_name = "FILE")]
    pub home: PathBuf,
    /// Run this many seconds (0: until SIGTERM/SIGINT).
    #[arg(long, default_value_t = 0)]
    pub secs: u64,
    /// Cores this process runs on (e.g. `1` or `0-3,6`).
    #[arg(long, value_name = "LIST", value_parser = cores)]
    pub cores: Option<Cores>,
    /// Serve Prometheus metrics (`GET /metrics`) on this address; updated once a second.
    #[arg(long, value_name = "IP:PORT")]
    pub metrics: Option<SocketAddr>,
}

/// What the standby counted.
#[derive(Debug, Default, Clone, Copy)]
struct Counts {
    /// Finalize votes and certificates taken into the listener.
    taken: u64,
    /// From an address that is no voter's.
    unknown: u64,
    /// Neither a vote nor a certificate (or malformed).
    other: u64,
    /// Refused by the listener, or with a failed signature.
    bad: u64,
}

/// Run the standby's listener; exit 0, or 2 when the start is refused.
pub fn run(o: Args) -> ExitCode {
    if !vyrn_nic::wait::pin_process("vyrn standby", o.cores.as_ref().map(|c| c.0.as_slice())) {
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

fn render(l: &FinalityListener, c: &Counts, published: &vyrn_metrics::Published) -> String {
    let mut e = vyrn_metrics::Exposition::new();
    let lc = l.counters();
    e.gauge(
        "vyrn_standby_final_height",
        "the standby's final height: Q valid finalize votes for a proposal ending there (07 §6.8)",
        &[],
        l.final_height() as f64,
    );
    e.gauge(
        "vyrn_standby_final_view",
        "the view of that proposal",
        &[],
        l.final_view() as f64,
    );
    for (what, v) in [
        ("taken", c.taken),
        ("unknown_source", c.unknown),
        ("other", c.other),
        ("bad", c.bad),
    ] {
        e.counter(
            "vyrn_standby_messages_total",
            "control datagrams by what became of them",
            &[("what", what)],
            v,
        );
    }
    e.counter(
        "vyrn_standby_bad_signatures_total",
        "votes whose signature failed the batch check",
        &[],
        lc.bad_sigs,
    );
    e.counter(
        "vyrn_standby_finalized_total",
        "proposals that reached Q valid votes",
        &[],
        lc.finalized,
    );
    published.own(&mut e);
    e.render()
}

fn serve(home: &HomeConfig, o: &Args) -> Result<(), String> {
    let at = home
        .standby_ctrl
        .ok_or("the home's file has no [standby] section (its ctrl_addr)")?;
    let keys: Vec<[u8; 32]> = home
        .voters_members
        .iter()
        .map(|v| v.vote_key.to_bytes())
        .collect();
    if keys.is_empty() {
        return Err("the home's file names no voters".into());
    }
    let set = Voters::with_simplex_quorum(home.epoch, &keys)
        .map_err(|e| format!("the voters' keys do not form a voting set: {e:?}"))?;
    let quorum = set.quorum();
    let mut listener = FinalityListener::new(set, 0);
    let voters: HashMap<SocketAddr, usize> = home
        .voters_members
        .iter()
        .map(|v| (v.ctrl_addr, v.index))
        .collect();
    let mut c = UdpConfig::new(at).with_batch(64);
    c.recv_buffer = Some(4 << 20);
    let mut port = UdpPort::open(&c).map_err(|e| format!("control port {at}: {e}"))?;
    let fd = std::os::fd::AsRawFd::as_raw_fd(port.socket());
    println!(
        "standby: finality listener on {at} for {} voters (Q {quorum}); replay and promotion (07 §9) not built",
        keys.len()
    );
    let stop = vyrn_nic::wait::stop_on_signals();
    let published = vyrn_metrics::Published::default();
    let mut counts = Counts::default();
    if let Some(a) = o.metrics {
        let at =
            vyrn_metrics::serve(a, published.clone()).map_err(|e| format!("--metrics {a}: {e}"))?;
        println!("standby: metrics on http://{at}/metrics");
        published.set(render(&listener, &counts, &published));
    }
    let t0 = Instant::now();
    let mut next = 1u64;
    let mut rx = RxBatch::new(64, 2048);
    while !stop.load(Ordering::Relaxed) && (o.secs == 0 || t0.elapsed().as_secs() < o.secs) {
        let n = port.recv_batch(&mut rx).unwrap_or(0);
        for p in rx.iter() {
            if !p.meta.src.is_some_and(|a| voters.contains_key(&a)) {
                counts.unknown += 1;
                continue;
            }
            let cert = match CtrlMsg::parse(p.data) {
                Ok(CtrlMsg::FinalityCert(c)) => *c,
                Ok(CtrlMsg::FinalizeVote(v)) => v.as_cert(),
                _ => {
                    counts.other += 1;
                    continue;
                }
            };
            let before = listener.counters().bad_sigs;
            match listener.on_cert(&cert) {
                VoteOutcome::Bad => counts.bad += 1,
                _ if listener.counters().bad_sigs > before => counts.bad += 1,
                _ => counts.taken += 1,
            }
        }
        if t0.elapsed().as_secs() >= next {
            println!(
                "[{next:>4}s] standby: final height {} (view {}), votes {}, bad {}, from unknown sources {}",
                listener.final_height(),
                listener.final_view(),
                counts.taken,
                counts.bad,
                counts.unknown
            );
            if o.metrics.is_some() {
                published.set(render(&listener, &counts, &published));
            }
            next += 1;
        }
        if n == 0 {
            vyrn_nic::wait::wait_readable(&[fd], 100_000_000);
        }
    }
    let lc = listener.counters();
    println!(
        "standby: final height {} (view {}), {} proposals finalized, {} votes taken, {} bad signatures, {} refused, {} from unknown sources, {} other messages",
        listener.final_height(),
        listener.final_view(),
        lc.finalized,
        counts.taken,
        lc.bad_sigs,
        lc.refused,
        counts.unknown,
        counts.other
    );
    Ok(())
}
