//! Request → ack latency against the kernel's own UDP round trip, in one run:
//!
//! * (a) **the floor** — a bare UDP ping-pong over loopback between two threads placed like the
//!   box and the client: the "box" thread pinned to the hot core, spinning on a non-blocking
//!   `recv`; the "client" thread on the cold core, waiting the way the load generator waits
//!   (`ppoll` on its socket with 1 ns timer slack, `vyrn_nic::wait`).
//! * (b) **the box in ping mode** — `vyrn-seq`'s box (dev profile: the hot path spinning on
//!   its pinned core, the cold tiles blocking on the other) with the light voter responder
//!   (one decoding double, four identities acking and signing) in a **child process**; the
//!   client in this process pinned to the cold core at nice −5 (as the floor's client), one
//!   session, one request in flight
//!   (`vyrn_client::loadgen::run::ping`): request → first answer.
//! * (b′) the same with the legacy map (every tile round-robin on two yielding threads, the map
//!   before the hot/cold placement), for the before/after ratio in the same run.
//! * (c) **the box under the open-loop mix** at 10k and 50k msgs/s (32 sessions), request →
//!   ack from intended send times (`run::open_loop`).
//!
//! It prints p50/p99/p99.9 of each and the ratios (b)/(a), (c)/(a). Targets: ping
//! p50 ≤ 2× the floor's p50, p99 ≤ 5× the floor's p99; open loop at 10k p50 ≤ 3× the floor.
//! `VYRN_BENCH_QUICK=1`: a short smoke run. The child is this same binary, re-run with
//! `VYRN_LAT_ROLE=box`.

use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use vyrn_bench::quick;
use vyrn_client::loadgen::ping::Ping;
use vyrn_client::loadgen::run::{self, Copy2Sink, RunClock};
use vyrn_client::loadgen::stats::{fmt_ns, Latency, Percentiles};
use vyrn_client::loadgen::{sessions_for, LoadConfig, LoadGen};
use vyrn_client::Driver;
use vyrn_home::BoxConfig;
use vyrn_nic::udp::{UdpConfig, UdpPort};
use vyrn_seq::ports::{core_map_of, CoreMap, NetBox};
use vyrn_seq::runner::Clock;
use vyrn_seq::testkit::doubles::{VoterNet, VoterThread};

/// The client port of the bench's box (the README's main command uses 27400).
const BASE_PORT: u16 = 47_600;

/// The cores: the box's hot core and the cold one (the client's), as the dev config places them.
fn cores() -> (usize, usize) {
    let ids: Vec<usize> = core_affinity::get_core_ids()
        .map(|v| v.into_iter().map(|c| c.id).collect())
        .unwrap_or_default();
    match ids.as_slice() {
        [a, b, ..] => (*b, *a),
        [a] => (*a, *a),
        [] => (0, 0),
    }
}

/// The measuring client's nice value in the floor and ping runs: its wake-ups on the core it
/// shares with the box's cold tiles and voters are not queued behind them.
const CLIENT_NICE: i32 = -5;
/// Its nice value under the open-loop mix: 32 busy sessions at −5 would take the shared core
/// from the finality path (the book then halts); −2 leaves it enough (`docs/benchmarks.md`).
const OPEN_LOOP_NICE: i32 = -2;

fn client_priority() {
    let _ = vyrn_nic::wait::set_nice(CLIENT_NICE);
}

fn pin(core: usize) {
    let _ = core_affinity::set_for_current(core_affinity::CoreId { id: core });
}

fn line(name: &str, p: &Percentiles) {
    println!(
        "{name:<44} p50 {:>9}  p99 {:>9}  p99.9 {:>9}  max {:>9}  (n={})",
        fmt_ns(p.p50),
        fmt_ns(p.p99),
        fmt_ns(p.p999),
        fmt_ns(p.max),
        p.n
    );
}

/// (a): the bare UDP round trip between a spinning pinned echo thread and a `ppoll`ing client.
fn floor(n: usize) -> Percentiles {
    let (hot, cold) = cores();
    let echo = UdpSocket::bind("127.0.0.1:0").expect("bind");
    echo.set_nonblocking(true).expect("nonblocking");
    let echo_addr = echo.local_addr().expect("addr");
    let stop = Arc::new(AtomicBool::new(false));
    let s2 = stop.clone();
    let th = std::thread::spawn(move || {
        pin(hot);
        let mut buf = [0u8; 256];
        while !s2.load(Ordering::Relaxed) {
            if let Ok((len, from)) = echo.recv_from(&mut buf) {
                let _ = echo.send_to(&buf[..len], from);
            }
        }
    });
    // The client on a thread of its own: pinning and priority stay off the main thread, whose
    // settings the box processes spawned later would inherit.
    let h = std::thread::spawn(move || floor_client(cold, echo_addr, n));
    let p = h.join().expect("floor client");
    stop.store(true, Ordering::Relaxed);
    let _ = th.join();
    p
}

fn floor_client(cold: usize, echo_addr: SocketAddr, n: usize) -> Percentiles {
    pin(cold);
    client_priority();
    let _ = vyrn_nic::wait::fine_timer_slack();
    let c = UdpSocket::bind("127.0.0.1:0").expect("bind");
    c.set_nonblocking(true).expect("nonblocking");
    let fd = c.as_raw_fd();
    let mut h = Latency::default();
    // A request-sized datagram (48 bytes: one message) and a response-sized answer.
    let req = [7u8; 48];
    let mut buf = [0u8; 256];
    for i in 0..n + n / 10 {
        let t0 = Instant::now();
        let _ = c.send_to(&req, echo_addr);
        loop {
            if c.recv_from(&mut buf).is_ok() {
                break;
            }
            let _ = vyrn_nic::wait::wait_readable(&[fd], 1_000_000);
        }
        if i >= n / 10 {
            h.record(t0.elapsed().as_nanos() as u64);
        }
    }
    h.percentiles()
}

/// The child: the box from `conf` (dev profile; `legacy` = every tile round-robin on two
/// yielding threads) with the light voter responder, for at most `secs`, until stdin closes.
fn run_box(conf: &Path, legacy: bool, secs: u64) {
    let cfg = match BoxConfig::load(conf) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("latency bench box: config: {e:?}");
            std::process::exit(2);
        }
    };
    let mut net = NetBox::open(&cfg, false).expect("open the box's ports");
    let ctrl = net.ctrl_addr().expect("control port");
    let voters = VoterNet::open(cfg.voters, ctrl, cfg.seq_public()).expect("voter sockets");
    for (a, i, k) in voters.members() {
        net.register_voter(a, i, k);
    }
    let map = if legacy {
        CoreMap::Shared {
            threads: 2,
            cores: Vec::new(),
        }
    } else {
        core_map_of(&cfg)
    };
    let clock = Clock::new();
    let t0 = Instant::now();
    let (running, paths) = net.start(&cfg, &map, clock).expect("start the box");
    let v = VoterThread::spawn_light(
        cfg.engine.layout,
        running.handles.seq_public,
        voters,
        paths,
        t0,
    );
    println!("ready");
    // Stop when the parent closes our stdin (or after `secs`, whatever happens to it).
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::stdin().read_line(&mut s);
        let _ = tx.send(());
    });
    let _ = rx.recv_timeout(Duration::from_secs(secs));
    let c = &running.handles.control;
    println!(
        "box: final {} of {} closed, finality-gate halts {}, fenced {}",
        c.final_height.load(Ordering::Relaxed),
        c.closed_height.load(Ordering::Relaxed),
        c.gate_halts.load(Ordering::Relaxed),
        running.handles.words.fenced()
    );
    v.stop.store(true, Ordering::Relaxed);
    let _ = v.handle.join();
    running.runner.stop();
}

/// Start the child box and wait until it says it is ready.
fn spawn_box(conf: &Path, legacy: bool, secs: u64) -> Child {
    let exe = std::env::current_exe().expect("current exe");
    let mut child = Command::new(exe)
        .env("VYRN_LAT_ROLE", "box")
        .env("VYRN_LAT_CONF", conf)
        .env("VYRN_LAT_SECS", secs.to_string())
        .env("VYRN_LAT_LEGACY", if legacy { "1" } else { "0" })
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn the box");
    let out = child.stdout.take().expect("stdout");
    let mut r = BufReader::new(out);
    let mut l = String::new();
    while r.read_line(&mut l).unwrap_or(0) > 0 {
        if l.trim() == "ready" {
            break;
        }
        l.clear();
    }
    child.stdout = Some(r.into_inner());
    child
}

/// Close the child's stdin, relay its last line, reap it.
fn stop_box(mut child: Child) {
    drop(child.stdin.take());
    if let Some(out) = child.stdout.take() {
        for l in BufReader::new(out).lines().map_while(Result::ok) {
            println!("  {l}");
        }
    }
    let _ = child.wait();
}

/// The client side of (b)/(c): this process's sessions against the box at `seq`.
struct Client {
    driver: Driver<UdpPort>,
    sessions: Vec<vyrn_client::Session>,
    sink: Copy2Sink,
}

fn client(cfg: &BoxConfig, seq: SocketAddr) -> Client {
    let open = |buf: usize| {
        let mut c = UdpConfig::loopback().with_batch(64);
        c.recv_buffer = Some(buf);
        UdpPort::open(&c).expect("client socket")
    };
    let port = open(8 << 20);
    let sink = open(1 << 20);
    let data = sink.local_addr().expect("sink addr");
    let e = &cfg.engine;
    let keys = e.sessions.iter().map(|s| (s.session, s.k_seq, s.k_out));
    let sessions = sessions_for(e.book, keys, seq, data, 50_000_000).expect("sessions");
    let driver = Driver::new(port, &sessions);
    Client {
        driver,
        sessions,
        sink: Copy2Sink::new(sink),
    }
}

fn ping_run(conf: &Path, legacy: bool, secs: u64) -> Percentiles {
    let cfg = BoxConfig::load(conf).expect("config");
    let child = spawn_box(conf, legacy, secs + 30);
    let seq: SocketAddr = format!("127.0.0.1:{}", cfg.client_port)
        .parse()
        .expect("addr");
    let p = std::thread::spawn(move || ping_client(&cfg, seq, secs))
        .join()
        .expect("ping client");
    stop_box(child);
    p
}

fn ping_client(cfg: &BoxConfig, seq: SocketAddr, secs: u64) -> Percentiles {
    let (_, cold) = cores();
    pin(cold);
    client_priority();
    let mut c = client(cfg, seq);
    let mut p = Ping::new(c.sessions.len(), 10_000, 20);
    let clock = RunClock::new(1_000_000);
    // Warm-up: half a second not measured (the voters join, the first blocks finalize).
    run::ping(
        &mut c.driver,
        &mut c.sessions,
        &mut p,
        1,
        &clock,
        clock.now() + 500_000_000,
        100_000_000,
        Some(&mut c.sink),
        |_| {},
    );
    let mut p2 = Ping::new(c.sessions.len(), 10_000, 20);
    run::ping(
        &mut c.driver,
        &mut c.sessions,
        &mut p2,
        1,
        &clock,
        clock.now() + secs * 1_000_000_000,
        100_000_000,
        Some(&mut c.sink),
        |_| {},
    );
    println!(
        "  ping: sent {}, answered {}, refused (book halted by the finality gate, or busy) {}",
        p2.counts.sent, p2.counts.answered, p2.counts.refused
    );
    p2.rtt.percentiles()
}

fn open_loop_run(conf: &Path, rate: u64, secs: u64) -> Percentiles {
    let cfg = BoxConfig::load(conf).expect("config");
    let child = spawn_box(conf, false, secs + 30);
    let seq: SocketAddr = format!("127.0.0.1:{}", cfg.client_port)
        .parse()
        .expect("addr");
    let p = std::thread::spawn(move || open_loop_client(&cfg, seq, rate, secs))
        .join()
        .expect("open-loop client");
    stop_box(child);
    p
}

fn open_loop_client(cfg: &BoxConfig, seq: SocketAddr, rate: u64, secs: u64) -> Percentiles {
    let (_, cold) = cores();
    pin(cold);
    let _ = vyrn_nic::wait::set_nice(OPEN_LOOP_NICE);
    let mut c = client(cfg, seq);
    let clock = RunClock::new(1_000_000);
    let start = clock.now() + 300_000_000;
    let mut load = LoadGen::new(
        LoadConfig {
            msgs_per_s: rate,
            seed: 1,
            start_ns: start,
            ..LoadConfig::default()
        },
        c.sessions.len(),
    );
    run::open_loop(
        &mut c.driver,
        &mut c.sessions,
        &mut load,
        &clock,
        start + secs * 1_000_000_000,
        200_000_000,
        Some(&mut c.sink),
        |_| {},
    );
    let k = load.counts;
    println!(
        "  open loop {rate}/s: sent {}, answered {}, fills {}, refused by sessions {}, schedule lag max {}",
        k.sent.iter().sum::<u64>(),
        k.answered,
        k.fills,
        k.refused,
        fmt_ns(load.schedule().lag_max_ns)
    );
    load.stats.req_ack.percentiles()
}

fn ratio(name: &str, a: &Percentiles, b: &Percentiles, target_p50: f64, target_p99: Option<f64>) {
    let r50 = a.p50 as f64 / b.p50.max(1) as f64;
    let r99 = a.p99 as f64 / b.p99.max(1) as f64;
    let r999 = a.p999 as f64 / b.p999.max(1) as f64;
    let verdict = |r: f64, t: f64| if r <= t { "met" } else { "MISSED" };
    print!(
        "ratio {name:<32} p50 {r50:>6.2}x (target ≤ {target_p50}x: {})  p99 {r99:>6.2}x",
        verdict(r50, target_p50)
    );
    if let Some(t) = target_p99 {
        print!(" (target ≤ {t}x: {})", verdict(r99, t));
    }
    println!("  p99.9 {r999:>6.2}x");
}

fn main() {
    if std::env::var("VYRN_LAT_ROLE").as_deref() == Ok("box") {
        let conf = PathBuf::from(std::env::var("VYRN_LAT_CONF").expect("VYRN_LAT_CONF"));
        let secs = std::env::var("VYRN_LAT_SECS")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(30);
        let legacy = std::env::var("VYRN_LAT_LEGACY").as_deref() == Ok("1");
        run_box(&conf, legacy, secs);
        return;
    }
    if !vyrn_bench::enabled("latency") {
        return;
    }
    let q = quick();
    let secs = if q { 1 } else { 3 };
    let dir = std::env::temp_dir().join(format!("vyrn-latency-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let conf = match vyrn_home::write_dev_config(&dir, 4, 8, BASE_PORT) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("latency bench: writing the dev config: {e}");
            std::process::exit(1);
        }
    };
    let (hot, cold) = cores();
    println!("latency: box hot core {hot}, client and cold tiles on core {cold}; {secs} s per run");
    let fl = floor(if q { 2_000 } else { 50_000 });
    line("(a) floor: bare UDP ping-pong", &fl);
    let b = ping_run(&conf, false, secs);
    line("(b) box, ping mode (hot/cold placement)", &b);
    let bl = ping_run(&conf, true, secs);
    line("(b') box, ping mode (legacy round-robin)", &bl);
    let c10 = open_loop_run(&conf, 10_000, secs);
    line("(c) box, open loop 10k msgs/s: req->ack", &c10);
    let c50 = open_loop_run(&conf, 50_000, secs);
    line("(c) box, open loop 50k msgs/s: req->ack", &c50);
    ratio("(b)/(a) ping vs floor", &b, &fl, 2.0, Some(5.0));
    ratio("(b')/(a) legacy ping vs floor", &bl, &fl, 2.0, Some(5.0));
    ratio("(c)/(a) 10k open loop vs floor", &c10, &fl, 3.0, None);
    ratio("(c)/(a) 50k open loop vs floor", &c50, &fl, 3.0, None);
    ratio("(b')/(b) legacy vs placement", &bl, &b, f64::INFINITY, None);
    let _ = std::fs::remove_dir_all(&dir);
}
