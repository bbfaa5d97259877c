//! UDP over loopback through `vyrn_nic::udp::UdpPort`: `sendmmsg`/`recvmmsg` batches of 32
//! against one syscall per packet, in the same run, for 64 B and 200 B payloads.
//!
//! 1. **send+recv, one thread**: each round sends 32 000 packets (3 200 quick) in batches of 32 and
//!    receives each batch before sending the next, so nothing is ever dropped and both
//!    directions' syscalls are in the figure (ns per packet = one send + one receive).
//! 2. **stream, two threads**: a sender thread pushes packets as fast as it can, a receiver
//!    thread drains them; prints the received rate and the loss (loopback UDP has no flow
//!    control, so a slow receiver shows up as loss, counted by the kernel via `SO_RXQ_OVFL`).
//! 3. **round trip**: one 64 B packet to an echo thread and back, as a latency histogram, once
//!    with both threads polling `recv_batch` and calling `sched_yield` when it comes back empty,
//!    once sleeping in `poll(2)` between packets (each bounded by a sample count and a time
//!    budget). A *pure* spin (no yield) is not measured: on the shared 2-vCPU dev VM, with other
//!    work runnable on both cores, it gave a p50 of ~8 ms (two scheduler ticks) against ~5 µs
//!    with the yield, because the spinning threads only get the CPU back a slice at a time.
//!    Pinned, isolated cores (the `ref` profile) are where a pure spin belongs.
//!
//! Traffic goes to 127.0.0.1 only. `VYRN_BENCH_QUICK=1` shrinks every part to a smoke run.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use vyrn_bench::{measure, quick, ratio, rounds, Latency};
use vyrn_nic::udp::{BatchMode, UdpConfig, UdpPort};
use vyrn_nic::{Port, RxBatch, TxPacket};

const BATCH: usize = 32;

fn pin(core: usize) {
    if let Some(ids) = core_affinity::get_core_ids() {
        if let Some(id) = ids.get(core % ids.len().max(1)) {
            core_affinity::set_for_current(*id);
        }
    }
}

/// A receiver on 127.0.0.1 and a sender aimed at it, both in `mode`.
fn ports(mode: BatchMode, recv_buffer: Option<usize>) -> (UdpPort, UdpPort) {
    let mut cfg = UdpConfig::loopback()
        .with_mode(mode)
        .with_batch(BATCH)
        .with_max_payload(2048);
    cfg.recv_buffer = recv_buffer;
    let rx = UdpPort::open(&cfg).expect("open receiver");
    let tx_cfg = UdpConfig::loopback()
        .with_mode(mode)
        .with_batch(BATCH)
        .with_max_payload(2048)
        .with_dest(rx.local_addr().expect("receiver address"));
    let tx = UdpPort::open(&tx_cfg).expect("open sender");
    (tx, rx)
}

/// Send `pkts` completely (bounded retries); returns false if the socket never took them.
fn send_all(tx: &mut UdpPort, pkts: &[TxPacket<'_>]) -> bool {
    let mut done = 0;
    for _ in 0..1_000_000 {
        if done == pkts.len() {
            return true;
        }
        done += tx.send_batch(&pkts[done..]).expect("send_batch");
    }
    false
}

/// Receive exactly `n` packets (bounded in time); returns how many arrived.
fn recv_exact(rx: &mut UdpPort, batch: &mut RxBatch, n: usize) -> usize {
    let mut got = 0;
    let deadline = Instant::now() + Duration::from_secs(1);
    while got < n && Instant::now() < deadline {
        got += rx.recv_batch(batch).expect("recv_batch");
    }
    got
}

fn send_recv(size: usize, mode: BatchMode, rounds: usize, per_round: u64) -> vyrn_bench::Stats {
    let (mut tx, mut rx) = ports(mode, None);
    let payload = vec![0xA5u8; size];
    let pkts = vec![TxPacket::new(&payload); BATCH];
    let mut batch = RxBatch::new(BATCH, 2048);
    let label = match mode {
        BatchMode::Mmsg => "mmsg x32",
        BatchMode::PerPacket => "per-packet",
    };
    let name = format!("udp lo {size:>3}B send+recv {label}");
    let mut lost = 0usize;
    let stats = measure(&name, rounds, per_round, || {
        let mut got = 0usize;
        for _ in 0..per_round as usize / BATCH {
            assert!(send_all(&mut tx, &pkts), "socket refused a batch");
            let n = recv_exact(&mut rx, &mut batch, BATCH);
            lost += BATCH - n;
            got += n;
        }
        got
    });
    let c = tx.counters();
    println!(
        "  {:<42} {:.2} packets per send syscall, {:.2} per recv syscall, lost {lost}",
        "",
        c.tx_packets as f64 / c.tx_calls.max(1) as f64,
        rx.counters().rx_packets as f64 / rx.counters().rx_calls.max(1) as f64,
    );
    stats
}

struct StreamResult {
    sent: u64,
    received: u64,
    dropped_by_kernel: u64,
    secs: f64,
}

/// Sender thread on core 0 pushes `n` packets; receiver thread on core 1 drains until the
/// sender is done and the socket has been quiet for 20 ms.
fn stream(size: usize, mode: BatchMode, n: u64) -> StreamResult {
    let (mut tx, mut rx) = ports(mode, Some(4 << 20));
    let done = Arc::new(AtomicBool::new(false));
    let done_rx = done.clone();
    let receiver = std::thread::spawn(move || {
        pin(1);
        let mut batch = RxBatch::new(BATCH, 2048);
        let mut received = 0u64;
        let mut last = Instant::now();
        let start = Instant::now();
        let hard_stop = start + Duration::from_secs(20);
        loop {
            let k = rx.recv_batch(&mut batch).expect("recv_batch") as u64;
            let now = Instant::now();
            if k > 0 {
                received += k;
                last = now;
            } else if (done_rx.load(Ordering::Acquire) && now - last > Duration::from_millis(20))
                || now > hard_stop
            {
                break;
            } else {
                std::thread::yield_now();
            }
        }
        (received, rx.counters().rx_dropped, last - start)
    });
    pin(0);
    let payload = vec![0x5Au8; size];
    let pkts = vec![TxPacket::new(&payload); BATCH];
    let t = Instant::now();
    let mut sent = 0u64;
    while sent < n {
        sent += tx.send_batch(&pkts).expect("send_batch") as u64;
    }
    let send_secs = t.elapsed().as_secs_f64();
    done.store(true, Ordering::Release);
    let (received, dropped_by_kernel, rx_time) = receiver.join().expect("receiver thread");
    StreamResult {
        sent,
        received,
        dropped_by_kernel,
        secs: send_secs.max(rx_time.as_secs_f64()),
    }
}

/// How a round-trip thread waits for its packet.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Wait {
    /// Poll `recv_batch`, `sched_yield` when it is empty (a core shared with other work).
    Spin,
    /// Sleep in `poll(2)` until the socket is readable (kinder to a shared, loaded machine).
    Block,
}

/// Round trips of one 64 B packet to an echo thread: at most `n` samples or `budget` of time.
fn round_trip(n: usize, budget: Duration, wait: Wait) -> Latency {
    let (mut tx, mut echo) = ports(BatchMode::Mmsg, None);
    // The echo answers to the sender's address: give it a port aimed back.
    let back = UdpConfig::loopback().with_dest(tx.local_addr().expect("sender address"));
    let mut echo_tx = UdpPort::open(&back).expect("open echo sender");
    let stop = Arc::new(AtomicBool::new(false));
    let stop_echo = stop.clone();
    let echo_thread = std::thread::spawn(move || {
        pin(1);
        let mut batch = RxBatch::new(BATCH, 2048);
        let hard_stop = Instant::now() + budget + Duration::from_secs(5);
        while !stop_echo.load(Ordering::Acquire) && Instant::now() < hard_stop {
            if wait == Wait::Block && !echo.wait_readable(Duration::from_millis(10)).expect("poll")
            {
                continue;
            }
            if echo.recv_batch(&mut batch).expect("echo recv") == 0 {
                std::thread::yield_now();
                continue;
            }
            for p in batch.iter() {
                let _ = echo_tx.send_batch(&[TxPacket::new(p.data)]);
            }
        }
    });
    pin(0);
    let payload = [0x33u8; 64];
    let mut batch = RxBatch::new(BATCH, 2048);
    let name = match wait {
        Wait::Spin => "udp lo 64B round trip, poll + sched_yield",
        Wait::Block => "udp lo 64B round trip, poll(2) wait",
    };
    let mut lat = Latency::new(name);
    let mut lost = 0usize;
    // Warm-up: the first tenth of the samples, or of the time budget, whichever ends first.
    let warmup = n / 10;
    let start = Instant::now();
    let (warm_until, end) = (start + budget / 10, start + budget);
    for i in 0..n + warmup {
        let t = Instant::now();
        if t > end {
            break;
        }
        let warm = i < warmup && t < warm_until;
        assert!(send_all(&mut tx, &[TxPacket::new(&payload)]));
        let deadline = t + Duration::from_millis(100);
        let mut got = 0;
        while got == 0 && Instant::now() < deadline {
            if wait == Wait::Block && !tx.wait_readable(Duration::from_millis(100)).expect("poll") {
                continue;
            }
            got = tx.recv_batch(&mut batch).expect("recv");
            if got == 0 {
                std::thread::yield_now();
            }
        }
        let ns = t.elapsed().as_nanos() as u64;
        if got == 0 {
            lost += 1;
        } else if !warm {
            lat.record(ns);
        }
    }
    stop.store(true, Ordering::Release);
    echo_thread.join().expect("echo thread");
    if lost > 0 {
        println!("  round trip: {lost} packets timed out after 100 ms");
    }
    lat
}

fn main() {
    let rounds = rounds(30);
    let quick = quick();
    let per_round: u64 = if quick { 3_200 } else { 32_000 };
    println!("nic_udp: vyrn-nic UdpPort over 127.0.0.1, batch {BATCH} (one syscall per batch) vs one syscall per packet");
    pin(0);
    for size in [64usize, 200] {
        let batched = send_recv(size, BatchMode::Mmsg, rounds, per_round);
        let single = send_recv(size, BatchMode::PerPacket, rounds, per_round);
        ratio(&batched, &single);
    }

    let n: u64 = if quick { 20_000 } else { 300_000 };
    for (size, mode, label) in [
        (200usize, BatchMode::Mmsg, "mmsg x32"),
        (200, BatchMode::PerPacket, "per-packet"),
    ] {
        let r = stream(size, mode, n);
        println!(
            "{:<44} sent {:>8}  received {:>8} ({:>10.0} pkt/s)  lost {:>5.1}% (kernel-counted drops {})",
            format!("udp lo {size}B stream 2 threads {label}"),
            r.sent,
            r.received,
            r.received as f64 / r.secs,
            100.0 * (r.sent - r.received.min(r.sent)) as f64 / r.sent as f64,
            r.dropped_by_kernel,
        );
    }

    let (samples, budget) = if quick {
        (1_000, Duration::from_millis(500))
    } else {
        (20_000, Duration::from_secs(4))
    };
    for wait in [Wait::Spin, Wait::Block] {
        round_trip(samples, budget, wait).print();
    }
}
