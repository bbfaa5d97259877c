//! `vyrn data`: one data box of a home on the UDP backend (07 §5).
//!
//! Usage: `vyrn data --home FILE --index N [--key FILE] [--secs N] [--hb-us N] [--batch-us N]`.
//!
//! * `--home`: the home's file (what the sequencer reads, without its seed: `HomeConfig`): the
//!   sessions and their keys (`K_seq` for the MAC check, `K_out` to relay DataRedirect), the
//!   voters' `data_addr`s (the fan-out's destinations, in membership order) and this box's
//!   `[databox.N]` section: `client_addr` (copy 2 arrives there) and `dest_base` (its socket for
//!   voter `i` is bound at `dest_base + i`, so a voter's DataFetch and DataDown are attributed
//!   by the socket they arrive on).
//! * `--key`: the box's secret identity seed (hex, a 0600 file; default `keys/databox-N.key` beside
//!   the home's file), whose public key must be `[databox.N] link_key`: each voter's DataFetch,
//!   DataDown and DataRedirect come sealed under the link key agreed with it (docs/security.md).
//! * `--hb-us`: the DATA_HB period when idle (100 µs is a budget; a dev home of one box and four
//!   voters on two cores uses 1000). `--batch-us`: the age at which an open DATA frame is sent
//!   (REP_DATA_BATCH_US = 5 is a budget; default 200 here, so a dev home's frames carry many
//!   packets and its one shared core is not spent on datagrams).
//! * `--secs 0` (the default): run until killed (SIGTERM/SIGINT end it cleanly).
//!
//! Every session's data home is box `session mod n` of the home's `n` boxes.
//! Every second a line: packets in, stored, dropped by cause, frames out, fetches served; at the
//! end every counter of the box.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::Ordering;
use std::time::Instant;

use super::{cores, Cores};

/// The data box on its UDP sockets.
type Driver = vyrn_data::driver::Driver<vyrn_nic::udp::UdpPort>;
use vyrn_data::databox::DataBox;
use vyrn_home::HomeConfig;

/// `vyrn data`: one data box of a home (07 §5).
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The home's file (what the sequencer reads, without its seed).
    #[arg(long, value_name = "FILE")]
    pub home: PathBuf,
    /// Which `[databox.N]` of the home this is.
    #[arg(long, value_name = "N")]
    pub index: u8,
    /// Its secret identity seed (hex, 0600); default `keys/databox-N.key` beside the home file.
    #[arg(long, value_name = "FILE")]
    pub key: Option<PathBuf>,
    /// Run this many seconds (0: until SIGTERM/SIGINT).
    #[arg(long, default_value_t = 0)]
    pub secs: u64,
    /// The DATA_HB period when idle, µs (voters call a box down after REP_DATA_SILENCE_MS).
    #[arg(long, value_name = "US", default_value_t = 1000, value_parser = clap::value_parser!(u64).range(10..=100_000))]
    pub hb_us: u64,
    /// The age at which an open DATA frame is sent, µs (REP_DATA_BATCH_US = 5 is a budget).
    #[arg(long, value_name = "US", default_value_t = 200, value_parser = clap::value_parser!(u64).range(1..=10_000))]
    pub batch_us: u64,
    /// Cores this process runs on (e.g. `1` or `0-3,6`).
    #[arg(long, value_name = "LIST", value_parser = cores)]
    pub cores: Option<Cores>,
    /// Serve Prometheus metrics (`GET /metrics`) on this address; updated once a second.
    #[arg(long, value_name = "IP:PORT")]
    pub metrics: Option<std::net::SocketAddr>,
    /// Run at this nice value (-20..=19) where allowed (root or CAP_SYS_NICE), else at the one
    /// it was started with, said on its first line. `vyrn up` gives a dev home's data box -10:
    /// it stands for a box of its own but shares one core with four replicas and the clients.
    #[arg(long, value_name = "N", allow_hyphen_values = true, value_parser = clap::value_parser!(i32).range(-20..=19))]
    pub nice: Option<i32>,
}

/// Set this process's nice value before it starts a thread (the threads inherit it). `Ok` with
/// the value it runs at, or why it could not.
fn set_nice(n: i32) -> Result<i32, String> {
    // SAFETY: setpriority on this thread (who 0) reads and writes no memory of ours.
    let r = unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, n) };
    if r != 0 {
        return Err(std::io::Error::last_os_error().to_string());
    }
    Ok(n)
}

/// Every counter of the data box as `vyrn_data_<counter>_total`, with the help its own crate
/// gives it (`vyrn_data::Counters::metrics`; docs/data.md names each), and the endpoint's own.
fn render(b: &DataBox, index: u8, published: &vyrn_metrics::Published) -> String {
    let mut e = vyrn_metrics::Exposition::new();
    b.counters().metrics(&mut e, &index.to_string());
    published.own(&mut e);
    e.render()
}

/// Run one data box until `--secs` or a signal; exit 0, or 2 when the start is refused.
pub fn run(o: Args) -> ExitCode {
    // `--cores`: off the sequencer box's hot core when sharing its host (the threads it starts
    // inherit the set).
    if !vyrn_tile::pin::pin_process("vyrn data", o.cores.as_ref().map(|c| c.0.as_slice())) {
        return ExitCode::from(2);
    }
    // Before any thread starts: they inherit it.
    if let Some(n) = o.nice {
        match set_nice(n) {
            Ok(n) => println!("data box {}: nice {n}", o.index),
            Err(e) => println!(
                "data box {}: nice {n} refused ({e}): running at the nice it was started with",
                o.index
            ),
        }
    }
    let Some(home) = HomeConfig::load_for("vyrn data", &o.home) else {
        return ExitCode::from(2);
    };
    match serve(&home, &o) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("vyrn data {}: {e}", o.index);
            ExitCode::from(2)
        }
    }
}

fn serve(home: &HomeConfig, o: &Args) -> Result<(), String> {
    let cfg = vyrn_data::home::config(home, o.index, o.hb_us * 1000, o.batch_us * 1000)?;
    let me = home.databoxes[o.index as usize].clone();
    let key_path = o
        .key
        .clone()
        .unwrap_or_else(|| vyrn_data::home::default_key_path(&o.home, o.index));
    let seed = vyrn_home::read_seed(&key_path)
        .map_err(|e| format!("--key {}: {e}", key_path.display()))?;
    let key = ed25519_dalek::SigningKey::from_bytes(seed.expose());
    let d = vyrn_data::home::open(home, &cfg, &key)?;
    vyrn_nic::wait::fine_timer_slack();
    println!(
        "data box {}: copy 2 on {}, {} sessions, fan-out to {} voters from {}:{}.., DATA_HB every {} µs, frames sent at {} µs old",
        o.index,
        me.client_addr,
        cfg.sessions.len(),
        cfg.dests.len(),
        me.client_addr.ip(),
        me.dest_base,
        o.hb_us,
        o.batch_us
    );
    let stop = vyrn_nic::wait::stop_on_signals();
    let published = vyrn_metrics::Published::default();
    if let Some(a) = o.metrics {
        let at =
            vyrn_metrics::serve(a, published.clone()).map_err(|e| format!("--metrics {a}: {e}"))?;
        println!("data box {}: metrics on http://{at}/metrics", o.index);
        published.set(render(&d.databox, o.index, &published));
    }
    // The box is one cold tile on the runner: it blocks on its sockets and wakes for its next
    // frame or DATA_HB; its line a second and its metrics are rendered on its own thread.
    let (index, metrics) = (o.index, o.metrics.is_some());
    let mut sec = 0u64;
    let tile = vyrn_tile::Reported::new(d, 1_000_000_000, move |d: &mut Driver, _| {
        sec += 1;
        println!("[{sec:>4}s] data box {index}: {}", line(&d.databox));
        if metrics {
            published.set(render(&d.databox, index, &published));
        }
    });
    let clock = vyrn_tile::Clock::from_ns(1_000_000);
    let wait = vyrn_tile::Wait::Block {
        timeout_ns: o.hb_us * 1000,
    };
    let runner = vyrn_tile::Runner::start(
        vec![vyrn_tile::Group {
            core: None,
            wait,
            tasks: vec![Box::new(tile)],
        }],
        clock,
    );
    let t0 = Instant::now();
    vyrn_tile::supervise(&runner, "data", || {
        stop.load(Ordering::Relaxed) || (o.secs > 0 && t0.elapsed().as_secs() >= o.secs)
    });
    let mut tiles = runner.stop();
    let mut d = vyrn_tile::take::<vyrn_tile::Reported<Driver>>(&mut tiles)
        .ok_or("the data box's tile was lost (its thread panicked)")?
        .tile;
    let now = || clock.now();
    d.databox.flush(now());
    d.drain();
    println!("--- data box {} summary", o.index);
    println!("{}", line(&d.databox));
    let all: Vec<String> = d
        .databox
        .counters()
        .iter()
        .filter(|(_, v)| *v != 0)
        .map(|(k, v)| format!("{k} {v}"))
        .collect();
    println!("counters (nonzero): {}", all.join(", "));
    Ok(())
}

fn line(b: &DataBox) -> String {
    let c = b.counters();
    format!(
        "packets in {} (stored {}, duplicates {}, bad MAC {}, unknown session {}, other drops {}), \
         DATA frames {} ({} packets), heartbeats {}, fetches: range {} key {} (hits {}), conflicts {}, \
         DataDown votes {} (boxes down {}), redirects relayed {} (repeats {}, refused {}, no address {})",
        c.rx_packets,
        c.stored,
        c.drop_duplicate,
        c.drop_bad_mac,
        c.drop_unknown_session,
        c.drop_bad_len
            + c.drop_bad_count
            + c.drop_bad_flags
            + c.drop_bad_reserved
            + c.drop_bad_seq
            + c.drop_bad_book
            + c.drop_late
            + c.drop_repeat_evicted,
        c.frames_data,
        c.frames_data_pkts,
        c.frames_hb,
        c.fetch_range_reqs,
        c.fetch_key_reqs,
        c.fetch_key_hits,
        c.conflicts,
        c.data_down_votes,
        c.data_down_effective,
        c.redirects_relayed,
        c.redirects_dup,
        c.redirects_refused,
        c.redirects_no_addr
    )
}
