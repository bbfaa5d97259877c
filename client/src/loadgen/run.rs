//! The load generator's loops over a real UDP port: they measure, they add nothing.
//!
//! * No naps in the measured path: when there is nothing to do the loop blocks in `ppoll` on
//!   its socket (1 ns timer slack, [`vyrn_nic::wait`]) until an answer arrives or until just
//!   before the next intended send time, then spins the last [`SPIN_NS`] so a packet leaves at
//!   its intended time and not a timer's wake-up later.
//! * Open loop: every packet is measured from its *intended* send time (no coordinated
//!   omission; a stall shows in the percentiles).
//! * Ping: one request in flight per session; each answer sends the next at once.
//! * Each received batch is stamped with the clock read right after `recvmmsg` returned.

use std::os::fd::AsRawFd;
use std::time::Instant;

use vyrn_nic::udp::UdpPort;
use vyrn_nic::{Port, RxBatch};

use super::ping::Ping;
use super::LoadGen;
use crate::driver::Driver;
use crate::session::Session;

/// The last stretch before an intended send time that the loop spins instead of sleeping.
pub const SPIN_NS: u64 = 5_000;
/// Longest block when nothing is scheduled (session timers tick at least this often).
pub const IDLE_WAIT_NS: u64 = 1_000_000;

/// The clock of a run: ns since `t0`, plus `base` (the load generator's `start_ns` origin).
#[derive(Debug, Clone, Copy)]
pub struct RunClock {
    t0: Instant,
    base: u64,
}

impl RunClock {
    /// A clock whose `now()` is `base` at this instant.
    pub fn new(base: u64) -> Self {
        RunClock {
            t0: Instant::now(),
            base,
        }
    }
    /// Now, ns.
    #[inline]
    pub fn now(&self) -> u64 {
        self.t0.elapsed().as_nanos() as u64 + self.base
    }
}

/// Where copy 2 goes when no data box is in the loop: a local socket the loop drains and counts.
#[derive(Debug)]
pub struct Copy2Sink {
    port: UdpPort,
    rx: RxBatch,
    /// Packets counted.
    pub count: u64,
    next_drain: u64,
}

impl Copy2Sink {
    /// A sink over `port`.
    pub fn new(port: UdpPort) -> Self {
        Copy2Sink {
            port,
            rx: RxBatch::new(64, 512),
            count: 0,
            next_drain: 0,
        }
    }
    /// Drain it, at most once a millisecond (it is not measured).
    fn drain(&mut self, now: u64) {
        if now < self.next_drain {
            return;
        }
        self.next_drain = now + 1_000_000;
        while let Ok(n) = self.port.recv_batch(&mut self.rx) {
            if n == 0 {
                break;
            }
            self.count += n as u64;
        }
    }
}

/// Receive, run timers, send — stamping received packets with the time `recvmmsg` returned.
fn turn(driver: &mut Driver<UdpPort>, sessions: &mut [Session], clock: &RunClock) -> usize {
    let rx = driver.counters().rx;
    let now = clock.now();
    let _ = driver.recv(sessions, now, usize::MAX);
    let got = (driver.counters().rx - rx) as usize;
    for s in sessions.iter_mut() {
        s.poll(now);
    }
    driver.send(sessions);
    got
}

/// Wait until the socket is readable or `until` (spinning the last [`SPIN_NS`]).
fn wait_until(driver: &Driver<UdpPort>, clock: &RunClock, until: u64) {
    let fd = driver.port().socket().as_raw_fd();
    let now = clock.now();
    if until > now + SPIN_NS {
        let _ = vyrn_nic::wait::wait_readable(&[fd], until - now - SPIN_NS);
    }
}

/// The open-loop run: packets at their intended times until `end_ns`, then answers for
/// `drain_ns` more; a progress line through `line` once a second.
#[allow(clippy::too_many_arguments)]
pub fn open_loop(
    driver: &mut Driver<UdpPort>,
    sessions: &mut [Session],
    load: &mut LoadGen,
    clock: &RunClock,
    end_ns: u64,
    drain_ns: u64,
    sink: Option<&mut Copy2Sink>,
    mut line: impl FnMut(String),
) {
    // The whole drain, always: callers measure what arrives in it.
    run_open_loop(
        driver,
        sessions,
        load,
        clock,
        end_ns,
        drain_ns,
        false,
        None,
        sink,
        |l, _| line(l),
    )
}

/// [`open_loop`] with the generator handed to the once-a-second callback too, so a caller can
/// publish its counts and histograms (`vyrn load --metrics`) as well as the line; `stop` (a
/// signal) ends the sending at once and starts the drain; the drain ends early once every fill
/// is both durable and final ([`LoadGen::settled`]), so a long `drain_ns` costs nothing when the
/// home keeps up.
#[allow(clippy::too_many_arguments)]
pub fn open_loop_with(
    driver: &mut Driver<UdpPort>,
    sessions: &mut [Session],
    load: &mut LoadGen,
    clock: &RunClock,
    end_ns: u64,
    drain_ns: u64,
    stop: Option<&std::sync::atomic::AtomicBool>,
    sink: Option<&mut Copy2Sink>,
    line: impl FnMut(String, &LoadGen),
) {
    run_open_loop(
        driver, sessions, load, clock, end_ns, drain_ns, true, stop, sink, line,
    )
}

#[allow(clippy::too_many_arguments)]
fn run_open_loop(
    driver: &mut Driver<UdpPort>,
    sessions: &mut [Session],
    load: &mut LoadGen,
    clock: &RunClock,
    end_ns: u64,
    drain_ns: u64,
    settle_early: bool,
    stop: Option<&std::sync::atomic::AtomicBool>,
    mut sink: Option<&mut Copy2Sink>,
    mut line: impl FnMut(String, &LoadGen),
) {
    let _ = vyrn_nic::wait::fine_timer_slack();
    let mut end_ns = end_ns;
    loop {
        let now = clock.now();
        if stop.is_some_and(|s| s.load(std::sync::atomic::Ordering::Relaxed)) && now < end_ns {
            end_ns = now;
        }
        if now >= end_ns.saturating_add(drain_ns)
            || (settle_early && now >= end_ns && load.settled())
        {
            break;
        }
        if now < end_ns {
            let _ = load.submit_due(now, sessions);
        }
        let got = turn(driver, sessions, clock);
        let now = clock.now();
        load.drain_events(now, sessions);
        if let Some(s) = sink.as_deref_mut() {
            s.drain(now);
        }
        if let Some(l) = load.progress(now, sessions) {
            line(l, load);
        }
        if got == 0 {
            let next = load.schedule().intended(load.schedule().sent());
            let until = if now < end_ns { next.min(end_ns) } else { now };
            wait_until(driver, clock, until.min(now + IDLE_WAIT_NS).max(now));
        }
    }
}

/// The ping run: the first `n` sessions each keep one request in flight until `end_ns`, then
/// answers for `drain_ns` more; a line through `line` once a second (round trips so far).
#[allow(clippy::too_many_arguments)]
pub fn ping(
    driver: &mut Driver<UdpPort>,
    sessions: &mut [Session],
    ping: &mut Ping,
    n: usize,
    clock: &RunClock,
    end_ns: u64,
    drain_ns: u64,
    mut sink: Option<&mut Copy2Sink>,
    mut line: impl FnMut(String),
) {
    let _ = vyrn_nic::wait::fine_timer_slack();
    let start = clock.now();
    let mut next_line = start + 1_000_000_000;
    loop {
        let now = clock.now();
        if now >= end_ns + drain_ns || (now >= end_ns && ping.in_flight() == 0) {
            break;
        }
        if now < end_ns {
            let _ = ping.submit(now, sessions, n);
        }
        let got = turn(driver, sessions, clock);
        let now = clock.now();
        ping.drain_events(now, sessions);
        // An answer frees its session: the next request leaves at once.
        if got > 0 && now < end_ns {
            let _ = ping.submit(now, sessions, n);
            driver.send(sessions);
        }
        if let Some(s) = sink.as_deref_mut() {
            s.drain(now);
        }
        if now >= next_line {
            next_line += 1_000_000_000;
            let p = ping.rtt.percentiles();
            line(format!(
                "t={:>4}s ping round trips {} p50/p99/p99.9/max {}/{}/{}/{}",
                (now - start) / 1_000_000_000,
                p.n,
                super::stats::fmt_ns(p.p50),
                super::stats::fmt_ns(p.p99),
                super::stats::fmt_ns(p.p999),
                super::stats::fmt_ns(p.max)
            ));
        }
        if got == 0 {
            wait_until(driver, clock, now + IDLE_WAIT_NS);
        }
    }
}
