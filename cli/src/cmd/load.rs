//! `vyrn load`: the exchange clients' load generator as its own process. Many
//! sessions (the home's config gives their ids and keys), an open-loop target rate, a seeded
//! realistic mix (resting and crossing GTC, cancels, IOC), copy 1 to the sequencer, copy 2 to the
//! data home; a progress line every second and, at the end, p50/p99/p99.9/max of request → ack,
//! request → fill, fill → durable and fill → final.
//!
//! Usage: `vyrn load --home FILE [--seq ADDR] [--data ADDR] [--secs N] [--rate MSGS_PER_S]
//! [--seed N] [--ping [--sessions N]] [--core C]`. Copy 1 goes to `--seq`, else to the home's
//! client port on loopback; copy 2 to `--data`, else to the home file's `[databox.0]`; a file with neither (a box run without its data tier) sends it to a
//! local socket that only counts it. The file is read as every role but the sequencer reads it
//! (`HomeConfig`: no seed file is opened).
//!
//! It measures without adding (`vyrn_client::loadgen::run`): no naps — an idle loop
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
use std::path::PathBuf;
use std::process::ExitCode;
use vyrn_client::loadgen::ping::Ping;
use vyrn_client::loadgen::run::{self, Copy2Sink, RunClock};
use vyrn_client::loadgen::{retention, sessions_with, LoadConfig, LoadGen};
use vyrn_client::Driver;
use vyrn_home::HomeConfig;
use vyrn_nic::udp::{UdpConfig, UdpPort};

/// `vyrn load`: the exchange clients' load generator.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The home's file (sessions and their keys; the sequencer's seed is never read).
    #[arg(long, alias = "config", value_name = "FILE")]
    pub home: PathBuf,
    /// The sequencer's client address (default: the home's `[box] ip` at its client_port).
    #[arg(long, value_name = "ADDR")]
    pub seq: Option<SocketAddr>,
    /// Where copy 2 goes (default: the home's data box 0; none: a local socket that counts it).
    #[arg(long, value_name = "ADDR")]
    pub data: Option<SocketAddr>,
    /// Seconds of load.
    #[arg(long, default_value_t = 5)]
    pub secs: u64,
    /// Open-loop target rate, msgs/s.
    #[arg(long, value_name = "MSGS_PER_S", default_value_t = 10_000)]
    pub rate: u64,
    /// The mix's seed.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Ping mode: one request in flight per session, each answer sending the next.
    #[arg(long)]
    pub ping: bool,
    /// Sessions in ping mode (default 1).
    #[arg(long, value_name = "N", requires = "ping")]
    pub sessions: Option<usize>,
    /// Use the home's sessions after the first N (another generator owns those).
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub skip: usize,
    /// Pin the generator to this core (keep it off the box's hot core).
    #[arg(long, value_name = "C")]
    pub core: Option<usize>,
    /// Run at this nice value (below 0 needs CAP_SYS_NICE).
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    pub nice: Option<i32>,
    /// After the last send, wait at most this long for answers and for every fill's Durable and
    /// Final facts (the wait ends as soon as every fill has both).
    #[arg(long, value_name = "MS", default_value_t = 300, value_parser = clap::value_parser!(u64).range(0..=600_000))]
    pub drain_ms: u64,
    /// Keep every sent packet this long for resends (07 §5.7, §9.5; never below
    /// REP_CLIENT_RETAIN_MS = 100). After a failover the new sequencer answers BAD_SEQ from the
    /// first packet it never took, and the session resends from there: a dev home's failover
    /// takes seconds, not 07's 20 ms, so `vyrn up --kill-seq` raises this to cover it.
    #[arg(long, value_name = "MS", default_value_t = 100, value_parser = clap::value_parser!(u64).range(0..=600_000))]
    pub retain_ms: u64,
    /// Serve Prometheus metrics (`GET /metrics`) on this address: counts and the four latency
    /// distributions, updated once a second (open loop only).
    #[arg(long, value_name = "IP:PORT")]
    pub metrics: Option<SocketAddr>,
    /// Lab flags: only in a `vyrn` built with the `lab` feature.
    #[command(flatten)]
    pub lab: Lab,
}

/// `vyrn load`'s lab flags (feature `lab`): the product build refuses them.
#[cfg(feature = "lab")]
#[derive(Debug, Clone, Default, clap::Args)]
pub struct Lab {
    /// A misbehaving client on one session (the first after `--skip`): resends of multi-message
    /// packets, packets ahead of sequence, exact and conflicting duplicates, refused messages and
    /// packets no lane logs, `--rounds-per-s` rounds a second for `--secs` (`docs/wire.md` "What
    /// the box logs"); then the session's next valid packet, which must be answered (exit 1 if
    /// not).
    #[arg(long, conflicts_with = "ping")]
    pub misbehave: bool,
    /// Rounds a second in `--misbehave` (13 packets each).
    #[arg(long, value_name = "N", default_value_t = 20, requires = "misbehave")]
    pub rounds_per_s: u64,
}

/// `vyrn load`'s lab flags: none in the product build.
#[cfg(not(feature = "lab"))]
#[derive(Debug, Clone, Default, clap::Args)]
pub struct Lab {}

/// The generator's metrics page: what it renders (`loadgen::metrics`) and the endpoint's own.
pub fn render(load: &LoadGen, published: &vyrn_metrics::Published) -> String {
    let mut e = vyrn_metrics::Exposition::new();
    vyrn_client::loadgen::metrics::render(load, &mut e);
    published.own(&mut e);
    e.render()
}

/// The one `client_addr` every session from `skip` on is bound to, if they share one.
fn sessions_addr(cfg: &HomeConfig, skip: usize) -> Option<SocketAddr> {
    let mut addrs = cfg
        .engine
        .sessions
        .iter()
        .skip(skip)
        .map(|s| cfg.session_addrs.get(&s.session).copied());
    let first = addrs.next()??;
    addrs.all(|a| a == Some(first)).then_some(first)
}

/// Run the generator; exit 0, 1 (nothing answered) or 2 (start refused).
pub fn run(o: Args) -> ExitCode {
    // The home's file as a client reads it: sessions and keys, never the sequencer's seed.
    let Some(cfg) = HomeConfig::load_for("vyrn load: home", &o.home) else {
        return ExitCode::from(2);
    };
    let seq = o
        .seq
        .unwrap_or_else(|| SocketAddr::from((cfg.box_ip, cfg.client_port)));
    // An ephemeral port on loopback for a box there, else on every interface (the route to
    // the box picks the source address).
    let any = if cfg.box_ip.is_loopback() {
        SocketAddr::from(([127, 0, 0, 1], 0))
    } else {
        SocketAddr::from(([0, 0, 0, 0], 0))
    };
    // 07 §5.7: where the home binds these sessions (`client_addr`), the generator sends from
    // there, so a backup data box can relay a DataRedirect before it had a copy from them.
    let bound = sessions_addr(&cfg, o.skip);
    let (port, sink) = match open_ports(any, bound) {
        Ok(x) => x,
        Err(e) => {
            eprintln!("vyrn load: opening sockets: {e}");
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
            "vyrn load: --skip {} leaves none of the home's {} sessions",
            o.skip,
            e.sessions.len()
        );
        return ExitCode::from(2);
    }
    // Copy 2 to each session's data home (07 §5.1) among the home's data boxes, which a
    // `DataRedirect` moves (§5.7); `--data` or no data box: everything to that one address.
    let boxes: Vec<SocketAddr> = match o.data {
        None if !cfg.databoxes.is_empty() => cfg.databoxes.iter().map(|d| d.client_addr).collect(),
        _ => vec![data],
    };
    let multi = boxes.len() > 1;
    let keys = e.sessions.iter().skip(o.skip).map(|s| {
        let home = if multi { cfg.data_home(s.session) } else { 0 };
        (s.session, s.k_seq, s.k_out, home)
    });
    // A REF box listens for lane l's sessions on client_port + l (its flow filter, 07 §9.5):
    // each session sends there unless `--seq` names one address for all.
    let lane_of: std::collections::HashMap<u32, u8> =
        e.sessions.iter().map(|s| (s.session, s.lane)).collect();
    let per_lane = cfg.profile == vyrn_home::Profile::Ref && o.seq.is_none();
    let seq_of = |session: u32| -> SocketAddr {
        match lane_of.get(&session) {
            Some(&l) if per_lane => SocketAddr::new(seq.ip(), seq.port().saturating_add(l as u16)),
            _ => seq,
        }
    };
    #[cfg(feature = "lab")]
    if o.lab.misbehave {
        let Some(s) = e.sessions.get(o.skip) else {
            return ExitCode::from(2);
        };
        let home = if multi { cfg.data_home(s.session) } else { 0 };
        let copy2 = boxes.get(home as usize).copied().unwrap_or(data);
        return misbehave(&o, e.book, s, seq_of(s.session), copy2);
    }
    let tweak = retention(o.retain_ms);
    let mut sessions = match sessions_with(e.book, keys, seq_of, boxes, 50_000_000, tweak) {
        Ok(v) => v,
        Err(err) => {
            eprintln!("vyrn load: sessions: {err:?}");
            return ExitCode::from(2);
        }
    };
    if let Some(c) = o.core {
        if !core_affinity::set_for_current(core_affinity::CoreId { id: c }) {
            eprintln!("vyrn load: could not pin to core {c}");
            return ExitCode::from(2);
        }
    }
    if let Some(n) = o.nice {
        if !vyrn_nic::wait::set_nice(n) {
            eprintln!("vyrn load: warning: could not set nice {n} (needs CAP_SYS_NICE below 0)");
        }
    }
    let mut driver = Driver::new(port, &sessions);
    let mut sink = data_box.is_none().then(|| Copy2Sink::new(sink));
    let clock = RunClock::new(1_000_000);
    let end = o
        .secs
        .saturating_mul(1_000_000_000)
        .saturating_add(1_000_000);
    // Answers in flight when the load stops still count.
    let drain = o.drain_ms * 1_000_000;
    // SIGTERM/SIGINT stop the sending; the drain and the summary follow.
    let stop = vyrn_nic::wait::stop_on_signals();
    if o.ping {
        let n = o.sessions.unwrap_or(1).clamp(1, sessions.len());
        println!(
            "vyrn load: ping mode, {n} session(s) with one request in flight each, for {} s, copy 1 to {}, copy 2 to {}",
            o.secs, seq, data
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
        return finish(
            p.summary(),
            &driver,
            &sessions,
            copy2,
            p.counts.answered,
            seq,
        );
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
        "vyrn load: {} sessions, {} msgs/s open loop for {} s, copy 1 to {}, copy 2 to {}",
        sessions.len(),
        o.rate,
        o.secs,
        seq,
        data
    );
    let published = vyrn_metrics::Published::default();
    if let Some(a) = o.metrics {
        match vyrn_metrics::serve(a, published.clone()) {
            Ok(at) => println!("vyrn load: metrics on http://{at}/metrics"),
            Err(e) => {
                eprintln!("vyrn load: --metrics {a}: {e}");
                return ExitCode::from(2);
            }
        }
        published.set(render(&load, &published));
    }
    let metrics = o.metrics.is_some();
    run::open_loop_with(
        &mut driver,
        &mut sessions,
        &mut load,
        &clock,
        end,
        drain,
        Some(stop),
        sink.as_mut(),
        |l, g| {
            println!("{l}");
            if metrics {
                published.set(render(g, &published));
            }
        },
    );
    if metrics {
        published.set(render(&load, &published));
    }
    let copy2 = sink.map_or(0, |s| s.count);
    finish(
        load.summary(),
        &driver,
        &sessions,
        copy2,
        load.counts.answered,
        seq,
    )
}

#[cfg(feature = "lab")]
/// `--misbehave`: the script of `vyrn_client::loadgen::misbehave` on one session, copy 1 to the
/// box and copy 2 to its data home, answers read and counted; then the session's next valid
/// packet, answered without a `Reject` (up to five tries a second apart: a finality gate that
/// halted the book for a moment answers `BOOK_HALTED`, 07 §6.8).
fn misbehave(
    o: &Args,
    book: u16,
    s: &vyrn_engine::config::SessionCfg,
    seq: SocketAddr,
    data: SocketAddr,
) -> ExitCode {
    let stop = vyrn_nic::wait::stop_on_signals();
    use std::sync::atomic::Ordering;
    use std::time::{Duration, Instant};
    use vyrn_client::loadgen::misbehave::{Expect, Script};
    use vyrn_client::packet::ResponseView;
    use vyrn_wire::msg::client::Record;
    let sock = match std::net::UdpSocket::bind(if seq.ip().is_loopback() {
        "127.0.0.1:0"
    } else {
        "0.0.0.0:0"
    }) {
        Ok(x) => x,
        Err(e) => {
            eprintln!("vyrn load: --misbehave: socket: {e}");
            return ExitCode::from(2);
        }
    };
    let _ = sock.set_read_timeout(Some(Duration::from_millis(2)));
    let mut script = Script::new(book, s.session, s.k_seq, 1);
    let (mut sent, mut answers, mut rejects, mut resent, mut bad) = (0u64, 0u64, 0u64, 0u64, 0u64);
    let mut by_kind = [0u64; 4];
    let mut buf = [0u8; 2048];
    let mut read = |until: Instant, want: Option<u32>| -> Option<Vec<Record>> {
        loop {
            match sock.recv(&mut buf) {
                Ok(n) => match ResponseView::parse(&buf[..n], &s.k_out, s.session) {
                    Ok(v) => {
                        answers += 1;
                        resent += v.resend as u64;
                        rejects += v
                            .records()
                            .iter()
                            .filter(|r| matches!(r, Record::Reject { .. }))
                            .count() as u64;
                        if want.is_some_and(|w| w == v.echo_pkt_seq && !v.resend) {
                            return Some(v.records().to_vec());
                        }
                    }
                    Err(_) => bad += 1,
                },
                Err(_) if Instant::now() >= until => return None,
                Err(_) => {}
            }
        }
    };
    println!(
        "vyrn load: misbehaving client on session {}, {} rounds/s for {} s, copy 1 to {seq}, copy 2 to {data}",
        s.session, o.lab.rounds_per_s, o.secs
    );
    let t0 = Instant::now();
    let period = Duration::from_nanos(1_000_000_000 / o.lab.rounds_per_s.max(1));
    let mut rounds = 0u64;
    while t0.elapsed() < Duration::from_secs(o.secs) && !stop.load(Ordering::Relaxed) {
        for p in script.round() {
            let i = match p.expect {
                Expect::New => 0,
                Expect::Duplicate => 1,
                Expect::Gap => 2,
                Expect::Dropped => 3,
            };
            by_kind[i] += 1;
            let _ = sock.send_to(&p.bytes, seq);
            let _ = sock.send_to(&p.bytes, data);
            sent += 1;
        }
        rounds += 1;
        read(t0 + period * rounds as u32, None);
    }
    let mut verdict = None;
    for _ in 0..5 {
        let v = script.valid();
        let pkt_seq = u32::from_le_bytes([v[8], v[9], v[10], v[11]]);
        let _ = sock.send_to(&v, seq);
        let _ = sock.send_to(&v, data);
        sent += 1;
        match read(Instant::now() + Duration::from_secs(1), Some(pkt_seq)) {
            Some(recs) if !recs.iter().any(|r| matches!(r, Record::Reject { .. })) => {
                verdict = Some((pkt_seq, recs));
                break;
            }
            Some(recs) => {
                println!("vyrn load: next valid packet {pkt_seq} answered {recs:?}; again")
            }
            None => println!("vyrn load: next valid packet {pkt_seq} not answered; again"),
        }
    }
    println!("--- summary");
    println!(
        "misbehave: {rounds} rounds, {sent} packets sent (new {}, duplicates {}, ahead of sequence {}, unloggable {}), {answers} answers ({resent} resends, {rejects} reject records, {bad} unreadable)",
        by_kind[0], by_kind[1], by_kind[2], by_kind[3]
    );
    match verdict {
        Some((p, recs)) => {
            println!("misbehave: the session's next valid packet {p} answered: {recs:?}");
            ExitCode::SUCCESS
        }
        None => {
            println!("misbehave: FAILED: the session's next valid packet was not answered without a Reject");
            ExitCode::from(1)
        }
    }
}

/// The client's socket (at `bound` where the home binds the sessions, else an ephemeral one on
/// `any`'s address) and the local sink that counts copy 2 when there is no data box.
fn open_ports(
    any: SocketAddr,
    bound: Option<SocketAddr>,
) -> Result<(UdpPort, UdpPort), vyrn_nic::NicError> {
    let open = |buf: usize, at: Option<SocketAddr>| {
        let mut c = UdpConfig::new(at.unwrap_or(any)).with_batch(64);
        c.recv_buffer = Some(buf);
        UdpPort::open(&c)
    };
    let first = match open(8 << 20, bound) {
        Err(e) if bound.is_some() => {
            eprintln!(
                "vyrn load: warning: binding the sessions' client_addr {}: {e}; sending from an ephemeral port (a backup data box cannot relay DataRedirect)",
                bound.unwrap_or(any)
            );
            open(8 << 20, None)
        }
        r => r,
    };
    Ok((first?, open(1 << 20, None)?))
}

/// The end of a run, either mode: the summary, the driver's counters, and exit 1 if nothing was
/// answered.
fn finish(
    summary: Vec<String>,
    driver: &Driver<UdpPort>,
    sessions: &[vyrn_client::Session],
    copy2: u64,
    answered: u64,
    seq: SocketAddr,
) -> ExitCode {
    println!("--- summary");
    for line in summary {
        println!("{line}");
    }
    // What the sessions dropped and why, and where copy 1 goes at the end (07 §9.5: another
    // sequencer after a failover).
    let mut c = vyrn_client::session::Counters::default();
    for s in sessions {
        let x = s.counters();
        c.rx_ok += x.rx_ok;
        c.rx_dup += x.rx_dup;
        c.rx_bad_tag += x.rx_bad_tag;
        c.rx_bad_echo += x.rx_bad_echo;
        c.rx_resent += x.rx_resent;
        c.bad_seq += x.bad_seq;
        c.notice_stale += x.notice_stale;
        c.resend_seq += x.resend_seq;
        c.gaps += x.gaps;
        c.resp_lost += x.resp_lost;
        c.expired_unanswered += x.expired_unanswered;
    }
    let mut to: Vec<String> = sessions
        .iter()
        .map(|s| s.seq_addr().map_or("none".into(), |a| a.to_string()))
        .collect();
    to.sort();
    to.dedup();
    println!(
        "sessions: responses taken {} (resent {}), dropped: duplicate resp_seq {}, bad tag {}, bad echo {}; BAD_SEQ {}, stale notices {}, copy-1 resends {}, resp_seq gaps {} (lost {}), expired unanswered {}; copy 1 goes to {}",
        c.rx_ok,
        c.rx_resent,
        c.rx_dup,
        c.rx_bad_tag,
        c.rx_bad_echo,
        c.bad_seq,
        c.notice_stale,
        c.resend_seq,
        c.gaps,
        c.resp_lost,
        c.expired_unanswered,
        to.join(", ")
    );
    println!(
        "driver: {:?}; copy 2 packets counted locally: {copy2}",
        driver.counters()
    );
    if answered == 0 {
        eprintln!("vyrn load: nothing was answered: is the box at {seq}?");
        return ExitCode::from(1);
    }
    ExitCode::SUCCESS
}
