//! `vyrn standby`: the warm standby's finality listener (07 §6.8).
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
//! Not built: the rest of the warm standby of 07 §9 — its replay, TailReport and promotion.
//!
//! A line a second (final height and view, votes, bad signatures); `--metrics` serves
//! `vyrn_standby_*` in Prometheus text; at the end a summary line `standby: final height H`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::Ordering;
use std::time::Instant;

use super::{cores, Cores};
use vyrn_home::HomeConfig;
use vyrn_nic::udp::UdpPort;
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
    drop(me);
    let at = standby
        .port()
        .local_addr()
        .map_err(|e| format!("control port: {e}"))?;
    println!(
        "standby: finality listener on {at} for {} voters (Q {}); replay and promotion (07 §9) not built",
        standby.listener().voters().n(),
        standby.listener().voters().quorum()
    );
    let stop = vyrn_nic::wait::stop_on_signals();
    let published = vyrn_metrics::Published::default();
    if let Some(a) = o.metrics {
        let at =
            vyrn_metrics::serve(a, published.clone()).map_err(|e| format!("--metrics {a}: {e}"))?;
        println!("standby: metrics on http://{at}/metrics");
        published.set(render(&standby, &published));
    }
    // The listener is one cold tile on the runner, blocking on its control port; its line a
    // second and its metrics page are rendered on its own thread.
    let metrics = o.metrics.is_some();
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
            if metrics {
                published.set(render(s, &published));
            }
        },
    );
    let runner = vyrn_tile::Runner::start(
        vec![vyrn_tile::Group {
            core: None,
            wait: vyrn_tile::Wait::Block {
                timeout_ns: 100_000_000,
            },
            tasks: vec![Box::new(tile)],
        }],
        vyrn_tile::Clock::new(),
    );
    let t0 = Instant::now();
    vyrn_tile::supervise(&runner, "standby", || {
        stop.load(Ordering::Relaxed) || (o.secs > 0 && t0.elapsed().as_secs() >= o.secs)
    });
    let mut tiles = runner.stop();
    let s = vyrn_tile::take::<vyrn_tile::Reported<Standby<UdpPort>>>(&mut tiles)
        .ok_or("the listener's tile was lost (its thread panicked)")?
        .tile;
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
    Ok(())
}
