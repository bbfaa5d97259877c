//! The hot/cold placement: hot tiles on a pinned thread that spins, in pipeline
//! order with RX first; cold tiles on a thread that blocks when idle, never on the hot core,
//! and wakes at once when its socket has data.

use std::net::UdpSocket;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use vyrn_seq::runner::{self, Clock, Runner, Task, TileClass, Wait};

/// A probe tile: counts its polls, records every CPU it ran on (a bit per CPU), and on a
/// socket (cold) counts the datagrams it took and when it took the first.
struct Probe {
    name: &'static str,
    class: TileClass,
    polls: Arc<AtomicU64>,
    cpus: Arc<AtomicU64>,
    sock: Option<UdpSocket>,
    got_at: Arc<AtomicU64>,
    t0: Instant,
}

impl Task for Probe {
    fn name(&self) -> String {
        self.name.to_string()
    }
    fn class(&self) -> TileClass {
        self.class
    }
    fn wait_fd(&self) -> Option<RawFd> {
        self.sock.as_ref().map(|s| s.as_raw_fd())
    }
    fn poll(&mut self, _now: u64) -> bool {
        self.polls.fetch_add(1, Ordering::Relaxed);
        // SAFETY: sched_getcpu takes no arguments and only reads this thread's state.
        let cpu = unsafe { libc::sched_getcpu() };
        if (0..64).contains(&cpu) {
            self.cpus.fetch_or(1 << cpu, Ordering::Relaxed);
        }
        let mut buf = [0u8; 16];
        if let Some(s) = &self.sock {
            if s.recv(&mut buf).is_ok() {
                let _ = self.got_at.compare_exchange(
                    0,
                    self.t0.elapsed().as_nanos() as u64,
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                );
                return true;
            }
        }
        false
    }
}

fn probe(
    name: &'static str,
    class: TileClass,
    sock: Option<UdpSocket>,
) -> (
    Box<dyn Task>,
    Arc<AtomicU64>,
    Arc<AtomicU64>,
    Arc<AtomicU64>,
) {
    let (polls, cpus, got) = (Arc::default(), Arc::default(), Arc::default());
    let t: Box<dyn Task> = Box::new(Probe {
        name,
        class,
        polls: Arc::clone(&polls),
        cpus: Arc::clone(&cpus),
        sock,
        got_at: Arc::clone(&got),
        t0: Instant::now(),
    });
    (t, polls, cpus, got)
}

#[test]
fn place_puts_hot_tiles_first_rx_and_cold_tiles_on_blocking_threads() {
    let names = [
        ("lane0", TileClass::Hot),
        ("bbo", TileClass::Hot),
        ("hasher", TileClass::Cold),
        ("tx", TileClass::Hot),
        ("control", TileClass::Cold),
        ("rx", TileClass::Hot),
    ];
    let tasks: Vec<Box<dyn Task>> = names.iter().map(|&(n, c)| probe(n, c, None).0).collect();
    let g = runner::place(tasks, &[1], &[0]);
    assert_eq!(g.len(), 2, "{g:?}");
    let hot: Vec<String> = g[0].tasks.iter().map(|t| t.name()).collect();
    assert_eq!(
        hot,
        ["rx", "lane0", "bbo", "tx"],
        "pipeline order, RX first"
    );
    assert_eq!((g[0].core, g[0].wait), (Some(1), Wait::Spin));
    let cold: Vec<String> = g[1].tasks.iter().map(|t| t.name()).collect();
    assert_eq!(cold, ["hasher", "control"]);
    assert_eq!(g[1].core, Some(0));
    assert!(matches!(g[1].wait, Wait::Block { .. }));
    // No cold core given: one blocking thread without a core (kept off the hot one at start).
    let tasks: Vec<Box<dyn Task>> = names.iter().map(|&(n, c)| probe(n, c, None).0).collect();
    let g = runner::place(tasks, &[1], &[]);
    assert_eq!(
        (g[1].core, matches!(g[1].wait, Wait::Block { .. })),
        (None, true)
    );
}

/// On real threads: the cold thread sleeps when idle (a spinning one would poll millions of
/// times in 300 ms), never runs on the hot core, and a datagram on its socket wakes it long
/// before its timeout would.
#[test]
fn cold_thread_blocks_when_idle_wakes_on_its_socket_and_keeps_off_the_hot_core() {
    let cores: Vec<usize> = core_affinity::get_core_ids()
        .map(|v| v.into_iter().map(|c| c.id).collect())
        .unwrap_or_default();
    if cores.len() < 2 {
        eprintln!("one core: nothing to keep apart");
        return;
    }
    let hot_core = cores[1];
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    sock.set_nonblocking(true).unwrap();
    let to = sock.local_addr().unwrap();
    let (hot_t, hot_polls, hot_cpus, _) = probe("rx", TileClass::Hot, None);
    let (cold_t, cold_polls, cold_cpus, got) = probe("ctrl-rx", TileClass::Cold, Some(sock));
    let groups = runner::place(vec![hot_t, cold_t], &[hot_core], &[]);
    let r = Runner::start_with(groups, Clock::new(), runner::OnPanic::StopAll);
    std::thread::sleep(Duration::from_millis(300));
    let idle_polls = cold_polls.load(Ordering::Relaxed);
    // ≤ one poll per COLD_WAIT_US of sleep (+ slack for wake-ups): ~6000 in 300 ms.
    let bound = 3 * 300_000 / runner::COLD_WAIT_US + 100;
    assert!(
        idle_polls <= bound,
        "cold thread polled {idle_polls} times idle (bound {bound})"
    );
    let hot = hot_polls.load(Ordering::Relaxed);
    assert!(
        hot > 10 * idle_polls.max(1),
        "hot spins: {hot} vs cold {idle_polls}"
    );
    // A datagram wakes the cold tile at once (its timeout would be 50 µs anyway; on a shared
    // CI box allow scheduling delay, but far less than a spinning-free 1 ms tick).
    UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .send_to(b"wake", to)
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(2);
    while got.load(Ordering::Relaxed) == 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
    let took = got.load(Ordering::Relaxed);
    assert!(took > 0, "the cold tile never saw its datagram");
    r.stop();
    assert_eq!(
        hot_cpus.load(Ordering::Relaxed),
        1 << hot_core,
        "hot thread pinned"
    );
    assert_eq!(
        cold_cpus.load(Ordering::Relaxed) & (1 << hot_core),
        0,
        "the cold thread never ran on the hot core"
    );
}
