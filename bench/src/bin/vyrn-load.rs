//! `vyrn-load`: the exchange clients' load generator as its own process (issue 5 item 3). Many
//! sessions (the home's config gives their ids and keys), an open-loop target rate, a seeded
//! realistic mix (resting and crossing GTC, cancels, IOC), copy 1 to the sequencer, copy 2 to the
//! data home; a progress line every second and, at the end, p50/p99/p99.9/max of request → ack,
//! request → fill, fill → durable and fill → final.
//!
//! Usage: `vyrn-load --config FILE --seq ADDR [--data ADDR] [--secs N] [--rate MSGS_PER_S]
//! [--seed N] [--ping [--sessions N]] [--core C]`. Copy 2 goes to `--data`, else to the home
//! file's `[databox 0]`; a file with neither (a box run without its data tier) sends it to a
//! local socket that only counts it. The file is read as every role but the sequencer reads it
//! (`HomeConfig`: no seed file is opened).
//!
//! It measures without adding (issue 11, `vyrn_client::loadgen::run`): no naps — an idle loop
//! blocks in `ppoll` on its socket with 1 ns timer slack until an answer arrives or just before
//! the next intended send, then spins to it; open-loop latencies from intended send times.
//! `--skip N`: use the home's sessions after the first N (another run of the generator owns
//! those: each session's `pkt_seq` belongs to one client process).
//! `--ping`: one request in flight per session (the first `--sessions N`, default 1), each
//! answer sending the next — request → answer round trips like a ping-pong benchmark.
//! `--core C`: pin the generator to core C (keep it off the box's hot core). `--nice N`: run at
//! nice N (e.g. -10 as root) so that on a core shared with the box's cold tiles and voters the
//! generator's wake-ups are not queued behind them — it then measures the box, not its own
//! scheduling.

use std::net::SocketAddr;
use std::process::ExitCode;
use vyrn_client::loadgen::ping::Ping;
use vyrn_client::loadgen::run::{self, Copy2Sink, RunClock};
use vyrn_client::loadgen::{sessions_for, LoadConfig, LoadGen};
use vyrn_client::Driver;
use vyrn_nic::udp::{UdpConfig, UdpPort};
use vyrn_seq::boxcfg::HomeConfig;

struct Opts {
    config: std::path::PathBuf,
    seq: SocketAddr,
    data: Option<SocketAddr>,
    secs: u64,
    rate: u64,
    seed: u64,
    ping: bool,
    sessions: Option<usize>,
    skip: usize,
    core: Option<usize>,
    nice: Option<i32>,
}

const USAGE: &str = "usage: vyrn-load --config FILE --seq ADDR [--data ADDR] [--secs N] [--rate MSGS_PER_S] [--seed N] [--ping [--sessions N]] [--skip N] [--core C] [--nice N]";

fn opts() -> Result<Opts, String> {
    let (mut config, mut seq, mut data) = (None, None, None);
    let (mut secs, mut rate, mut seed) = (5u64, 10_000u64, 1u64);
    let (mut ping, mut sessions, mut core, mut nice) = (false, None, None, None);
    let mut skip = 0usize;
    let mut a = std::env::args().skip(1);
    while let Some(k) = a.next() {
        let mut v = || a.next().ok_or(format!("{k} needs a value"));
        match k.as_str() {
            "--config" => config = Some(v()?.into()),
            "--seq" => seq = Some(v()?.parse().map_err(|e| format!("--seq: {e}"))?),
            "--data" => data = Some(v()?.parse().map_err(|e| format!("--data: {e}"))?),
            "--secs" => secs = v()?.parse().map_err(|e| format!("--secs: {e}"))?,
            "--rate" => rate = v()?.parse().map_err(|e| format!("--rate: {e}"))?,
            "--seed" => seed = v()?.parse().map_err(|e| format!("--seed: {e}"))?,
            "--ping" => ping = true,
            "--sessions" => sessions = Some(v()?.parse().map_err(|e| format!("--sessions: {e}"))?),
            "--skip" => skip = v()?.parse().map_err(|e| format!("--skip: {e}"))?,
            "--core" => core = Some(v()?.parse().map_err(|e| format!("--core: {e}"))?),
            "--nice" => nice = Some(v()?.parse().map_err(|e| format!("--nice: {e}"))?),
            "-h" | "--help" => return Err(String::new()),
            _ => return Err(format!("unknown argument {k}")),
        }
    }
    Ok(Opts {
        config: config.ok_or("--config is required")?,
        seq: seq.ok_or("--seq is required")?,
        data,
        secs,
        rate,
        seed,
        ping,
        sessions,
        skip,
        core,
        nice,
    })
}

fn main() -> ExitCode {
    let o = match opts() {
        Ok(o) => o,
        Err(e) => {
            if !e.is_empty() {
                eprintln!("vyrn-load: {e}");
            }
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    // The home's file as a client reads it: sessions and keys, never the sequencer's seed.
    let Some(cfg) = HomeConfig::load_for("vyrn-load: config", &o.config) else {
        return ExitCode::from(2);
    };
    let open = |buf: usize| {
        let mut c = UdpConfig::loopback().with_batch(64);
        c.recv_buffer = Some(buf);
        UdpPort::open(&c)
    };
    let (port, sink) = match (open(8 << 20), open(1 << 20)) {
        (Ok(p), Ok(s)) => (p, s),
        (Err(e), _) | (_, Err(e)) => {
            eprintln!("vyrn-load: opening sockets: {e}");
            return ExitCode::from(2);
        }
    };
    // Copy 2 to --data, else to the home's data box 0, else to a local socket that counts it.
    let data_box = o.data.or(cfg.databoxes.first().map(|d| d.client_addr));
    let data = match data_box {
        Some(d) => d,
        None => sink.local_addr().expect("bound"),
    };
    let e = &cfg.engine;
    // `--skip N`: leave the home's first N sessions to another run (a session's pkt_seq space is
    // one client's: a second process starting it at 1 again would be answered as resends).
    if o.skip >= e.sessions.len() {
        eprintln!(
            "vyrn-load: --skip {} leaves none of the home's {} sessions",
            o.skip,
            e.sessions.len()
        );
        return ExitCode::from(2);
    }
    let keys = e
        .sessions
        .iter()
        .skip(o.skip)
        .map(|s| (s.session, s.k_seq, s.k_out));
    let mut sessions = match sessions_for(e.book, keys, o.seq, data, 50_000_000) {
        Ok(v) => v,
        Err(err) => {
            eprintln!("vyrn-load: sessions: {err:?}");
            return ExitCode::from(2);
        }
    };
    if let Some(c) = o.core {
        if !core_affinity::set_for_current(core_affinity::CoreId { id: c }) {
            eprintln!("vyrn-load: could not pin to core {c}");
            return ExitCode::from(2);
        }
    }
    if let Some(n) = o.nice {
        if !vyrn_nic::wait::set_nice(n) {
            eprintln!("vyrn-load: warning: could not set nice {n} (needs CAP_SYS_NICE below 0)");
        }
    }
    let mut driver = Driver::new(port, &sessions);
    let mut sink = data_box.is_none().then(|| Copy2Sink::new(sink));
    let clock = RunClock::new(1_000_000);
    let end = o.secs * 1_000_000_000 + 1_000_000;
    // Answers in flight when the load stops still count.
    let drain = 300_000_000;
    if o.ping {
        let n = o.sessions.unwrap_or(1).clamp(1, sessions.len());
        println!(
            "vyrn-load: ping mode, {n} session(s) with one request in flight each, for {} s, copy 1 to {}, copy 2 to {}",
            o.secs, o.seq, data
        );
        let mut p = Ping::new(sessions.len(), 10_000, 20);
        run::ping(
            &mut driver,
            &mut sessions,
            &mut p,
            n,
            &clock,
            end,
            drain,
            sink.as_mut(),
            |l| println!("{l}"),
        );
        let copy2 = sink.map_or(0, |s| s.count);
        return finish(p.summary(), &driver, copy2, p.counts.answered, o.seq);
    }
    let mut load = LoadGen::new(
        LoadConfig {
            msgs_per_s: o.rate,
            seed: o.seed,
            start_ns: 1_000_000,
            ..LoadConfig::default()
        },
        sessions.len(),
    );
    println!(
        "vyrn-load: {} sessions, {} msgs/s open loop for {} s, copy 1 to {}, copy 2 to {}",
        sessions.len(),
        o.rate,
        o.secs,
        o.seq,
        data
    );
    run::open_loop(
        &mut driver,
        &mut sessions,
        &mut load,
        &clock,
        end,
        drain,
        sink.as_mut(),
        |l| println!("{l}"),
    );
    let copy2 = sink.map_or(0, |s| s.count);
    finish(load.summary(), &driver, copy2, load.counts.answered, o.seq)
}

/// The end of a run, either mode: the summary, the driver's counters, and exit 1 if nothing was
/// answered.
fn finish(
    summary: Vec<String>,
    driver: &Driver<UdpPort>,
    copy2: u64,
    answered: u64,
    seq: SocketAddr,
) -> ExitCode {
    println!("--- summary");
    for line in summary {
        println!("{line}");
    }
    println!(
        "driver: {:?}; copy 2 packets counted locally: {copy2}",
        driver.counters()
    );
    if answered == 0 {
        eprintln!("vyrn-load: nothing was answered: is the box at {seq}?");
        return ExitCode::from(1);
    }
    ExitCode::SUCCESS
}
