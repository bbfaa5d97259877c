//! SPSC ring benchmarks (07 §4.1: `R_pkt[l]`, `R_hash8[l]`, `R_hash32[l]`), `vyrn_rings::spsc`
//! against `rtrb` 0.3.6 and `crossbeam_queue::ArrayQueue` 0.3.14, all in the same run, `u64`
//! items.
//!
//! 1. **single**: one thread pushes a batch of 64 items then pops them, per item (`push`/`pop`)
//!    and with each ring's batch API (vyrn `push_batch`/`pop_batch_with`, rtrb
//!    `push_partial_slice`/`pop_partial_slice`; `ArrayQueue` has none). ns per item = one push
//!    plus one pop. No cross-core traffic: this is the instruction cost.
//! 2. **latency**: one-way cross-core latency by ping-pong. A ping thread (pinned to core 0)
//!    pushes one item and waits for an echo thread (pinned to core 1) to send it back on a second
//!    ring; one-way = round trip / 2, as an hdrhistogram of samples. Both sides spin (with a
//!    `yield_now` every 4096 empty polls, so a descheduled peer on this shared box costs a slice,
//!    not a hang). Every handle sits on its own cache lines in all three parts (see `Pad`). The timer read (`Instant::now`, twice per sample) is inside the round trip; its
//!    cost is printed.
//! 3. **throughput**: a producer thread (core 0) pushes 1M items (100k quick) as fast as it can
//!    into a 64 Ki-slot ring (the spec's `R_pkt` size), a consumer thread (core 1) pops and sums
//!    them; items/s per round, per item and with the batch APIs (batches of 32).
//!
//! `VYRN_BENCH_QUICK=1` shrinks everything to a smoke run of a few seconds;
//! `VYRN_BENCH_ONLY=single,latency,throughput` selects parts.

use std::hint::{black_box, spin_loop};
use std::sync::Arc;
use std::thread;
use std::time::Instant;

use crossbeam_queue::ArrayQueue;
use vyrn_bench::{enabled, measure, quick, ratio, rounds, Latency, Stats};
use vyrn_rings::spsc;

/// Items per batch in the single-thread part.
const BATCH: usize = 64;
/// Items per batch in the throughput part's batch variants.
const TP_BATCH: usize = 32;
/// Ring size for the throughput part (07 §4.1: 64 Ki entries).
const TP_CAPACITY: usize = 64 * 1024;

/// One SPSC queue implementation under test, reduced to what the benches use.
trait Ring {
    const NAME: &'static str;
    type Tx: Tx;
    type Rx: Rx;
    fn channel(capacity: usize) -> (Self::Tx, Self::Rx);
}

trait Tx: Send {
    /// `false` when full.
    fn push(&mut self, v: u64) -> bool;
}

trait Rx: Send {
    fn pop(&mut self) -> Option<u64>;
}

struct Vyrn;
struct Rtrb;
struct Aq;

impl Ring for Vyrn {
    const NAME: &'static str = "vyrn spsc";
    type Tx = spsc::Producer<u64>;
    type Rx = spsc::Consumer<u64>;
    fn channel(capacity: usize) -> (Self::Tx, Self::Rx) {
        spsc::channel(capacity)
    }
}

impl Tx for spsc::Producer<u64> {
    #[inline(always)]
    fn push(&mut self, v: u64) -> bool {
        spsc::Producer::push(self, v).is_ok()
    }
}

impl Rx for spsc::Consumer<u64> {
    #[inline(always)]
    fn pop(&mut self) -> Option<u64> {
        spsc::Consumer::pop(self)
    }
}

impl Ring for Rtrb {
    const NAME: &'static str = "rtrb";
    type Tx = rtrb::Producer<u64>;
    type Rx = rtrb::Consumer<u64>;
    fn channel(capacity: usize) -> (Self::Tx, Self::Rx) {
        rtrb::RingBuffer::new(capacity)
    }
}

impl Tx for rtrb::Producer<u64> {
    #[inline(always)]
    fn push(&mut self, v: u64) -> bool {
        rtrb::Producer::push(self, v).is_ok()
    }
}

impl Rx for rtrb::Consumer<u64> {
    #[inline(always)]
    fn pop(&mut self) -> Option<u64> {
        rtrb::Consumer::pop(self).ok()
    }
}

impl Ring for Aq {
    const NAME: &'static str = "crossbeam ArrayQueue";
    type Tx = AqEnd;
    type Rx = AqEnd;
    fn channel(capacity: usize) -> (Self::Tx, Self::Rx) {
        let q = Arc::new(ArrayQueue::new(capacity));
        (AqEnd(q.clone()), AqEnd(q))
    }
}

/// Either end of a shared `ArrayQueue` (an MPMC queue used as SPSC).
struct AqEnd(Arc<ArrayQueue<u64>>);

impl Tx for AqEnd {
    #[inline(always)]
    fn push(&mut self, v: u64) -> bool {
        self.0.push(v).is_ok()
    }
}

impl Rx for AqEnd {
    #[inline(always)]
    fn pop(&mut self) -> Option<u64> {
        self.0.pop()
    }
}

/// Keeps a ring handle on cache lines of its own, so that the producer's and the consumer's
/// private indices (which every ring under test keeps inside its handles) never share a line
/// because the bench happened to place the two handles next to each other.
#[repr(align(128))]
struct Pad<T>(T);

/// Pin the current thread to core `core` (mod the number of cores); false if not possible.
fn pin(core: usize) -> bool {
    match core_affinity::get_core_ids() {
        Some(ids) if !ids.is_empty() => core_affinity::set_for_current(ids[core % ids.len()]),
        _ => false,
    }
}

/// Busy-wait step: spin, and every 4096 empty polls give the core away once.
#[inline(always)]
fn relax(spins: &mut u32) {
    *spins = spins.wrapping_add(1);
    if *spins % 4096 == 0 {
        thread::yield_now();
    } else {
        spin_loop();
    }
}

fn main() {
    let cores = core_affinity::get_core_ids().map_or(0, |v| v.len());
    println!(
        "# rings: vyrn_rings::spsc vs rtrb 0.3.6 vs crossbeam-queue 0.3.14 ArrayQueue, u64 items, \
         same run: single-thread push+pop ns/item, one-way cross-core latency (ping-pong RTT/2), \
         cross-thread throughput items/s"
    );
    println!(
        "# figures from one shared 2-core machine ({cores} cores visible, other work may run on \
         both): quote the ratios, not the absolutes{}",
        if quick() {
            " [QUICK smoke run: tiny counts, figures meaningless]"
        } else {
            ""
        }
    );
    if enabled("single") {
        single_thread();
    }
    if enabled("latency") {
        latency();
    }
    if enabled("throughput") {
        throughput();
    }
}

// ---------------------------------------------------------------------------------------------
// 1. single thread

fn single<R: Ring>(rounds: usize, batches: usize) -> Stats {
    let (mut tx, mut rx) = R::channel(1024);
    let name = format!("single {} push+pop x{BATCH}", R::NAME);
    measure(&name, rounds, (batches * BATCH) as u64, || {
        let mut sum = 0u64;
        for b in 0..batches as u64 {
            for i in 0..BATCH as u64 {
                let ok = tx.push(black_box(b + i));
                debug_assert!(ok);
            }
            for _ in 0..BATCH {
                sum = sum.wrapping_add(rx.pop().unwrap_or(0));
            }
        }
        sum
    })
}

fn single_thread() {
    println!(
        "\n## 1. single thread: push {BATCH} then pop {BATCH}; ns per item (one push + one pop)"
    );
    let r = rounds(30);
    let batches = if quick() { 200 } else { 4_000 };
    let items: Vec<u64> = (0..BATCH as u64).collect();

    let vyrn = single::<Vyrn>(r, batches);
    let rt = single::<Rtrb>(r, batches);
    let aq = single::<Aq>(r, batches);

    let (mut tx, mut rx) = spsc::channel::<u64>(1024);
    let vyrn_batch = measure(
        &format!("single vyrn spsc push_batch+pop_batch_with x{BATCH}"),
        r,
        (batches * BATCH) as u64,
        || {
            let mut sum = 0u64;
            for _ in 0..batches {
                let n = tx.push_batch(black_box(&items));
                debug_assert_eq!(n, BATCH);
                rx.pop_batch_with(BATCH, |v| sum = sum.wrapping_add(v));
            }
            sum
        },
    );
    let (mut tx, mut rx) = rtrb::RingBuffer::<u64>::new(1024);
    let mut out = vec![0u64; BATCH];
    let rtrb_batch = measure(
        &format!("single rtrb push/pop_partial_slice x{BATCH}"),
        r,
        (batches * BATCH) as u64,
        || {
            let mut sum = 0u64;
            for _ in 0..batches {
                let (pushed, _) = tx.push_partial_slice(black_box(&items));
                debug_assert_eq!(pushed.len(), BATCH);
                let (popped, _) = rx.pop_partial_slice(&mut out);
                for &v in popped.iter() {
                    sum = sum.wrapping_add(v);
                }
            }
            sum
        },
    );
    ratio(&vyrn, &rt);
    ratio(&vyrn, &aq);
    ratio(&vyrn_batch, &rtrb_batch);
    ratio(&vyrn_batch, &vyrn);
}

// ---------------------------------------------------------------------------------------------
// 2. cross-core latency

fn ping_pong<R: Ring>(samples: usize) -> Latency
where
    R::Tx: 'static,
    R::Rx: 'static,
{
    const STOP: u64 = u64::MAX;
    let (tx_ab, rx_ab) = R::channel(64);
    let (tx_ba, rx_ba) = R::channel(64);
    let (mut tx_ab, mut rx_ab, mut tx_ba, mut rx_ba) =
        (Pad(tx_ab), Pad(rx_ab), Pad(tx_ba), Pad(rx_ba));
    let echo = thread::spawn(move || {
        pin(1);
        let mut spins = 0;
        loop {
            match rx_ab.0.pop() {
                Some(STOP) => break,
                Some(v) => {
                    while !tx_ba.0.push(v) {
                        relax(&mut spins);
                    }
                }
                None => relax(&mut spins),
            }
        }
    });
    let ping = thread::spawn(move || {
        pin(0);
        let mut lat = Latency::new(&format!("latency {} one-way (RTT/2)", R::NAME));
        let warmup = samples / 10 + 100;
        let mut spins = 0;
        for i in 0..(warmup + samples) as u64 {
            let t = Instant::now();
            while !tx_ab.0.push(i) {
                relax(&mut spins);
            }
            loop {
                match rx_ba.0.pop() {
                    Some(v) => {
                        debug_assert_eq!(v, i);
                        break;
                    }
                    None => relax(&mut spins),
                }
            }
            let rtt = t.elapsed().as_nanos() as u64;
            if i >= warmup as u64 {
                lat.record(rtt / 2);
            }
        }
        while !tx_ab.0.push(STOP) {
            relax(&mut spins);
        }
        lat
    });
    let lat = ping.join().expect("ping thread");
    echo.join().expect("echo thread");
    lat.print();
    lat
}

fn latency() {
    let samples = if quick() { 2_000 } else { 200_000 };
    let pinned = thread::spawn(|| pin(0) && pin(1)).join().unwrap_or(false);
    println!(
        "\n## 2. one-way cross-core latency: ping-pong, RTT/2 per sample, {samples} samples, \
         threads {}",
        if pinned {
            "pinned to cores 0 and 1"
        } else {
            "NOT pinned (affinity unavailable)"
        }
    );
    // Cost of the two timer reads inside every round trip.
    let mut timer = Latency::new("timer: Instant::now + elapsed (in each RTT)");
    for _ in 0..10_000 {
        let t = Instant::now();
        let e = black_box(t).elapsed().as_nanos() as u64;
        timer.record(e);
    }
    timer.print();
    let vyrn = ping_pong::<Vyrn>(samples);
    let rt = ping_pong::<Rtrb>(samples);
    let aq = ping_pong::<Aq>(samples);
    for (other, name) in [(&rt, Rtrb::NAME), (&aq, Aq::NAME)] {
        let q = |l: &Latency, x: f64| l.ns.value_at_quantile(x) as f64;
        println!(
            "  ratio latency vyrn spsc / {name}: p50 {:.2}x  p99 {:.2}x",
            q(&vyrn, 0.5) / q(other, 0.5),
            q(&vyrn, 0.99) / q(other, 0.99)
        );
    }
}

// ---------------------------------------------------------------------------------------------
// 3. cross-thread throughput

/// Print the median per round of the producer's full polls and the consumer's empty polls:
/// they tell which regime a round ran in. When the consumer is the faster side it finds the
/// ring empty and takes items one at a time as they are published, so every item's cache lines
/// cross between the cores (slow); when the producer is faster the ring stays full and the
/// consumer streams through it on its cached tail (fast). Which side is faster depends on a
/// nanosecond either way, so compare per-item figures together with these counts.
fn print_polls(polls: &[(u32, u32)]) {
    let med = |v: &mut Vec<u32>| {
        v.sort_unstable();
        v.get(v.len() / 2).copied().unwrap_or(0)
    };
    let mut full: Vec<u32> = polls.iter().map(|p| p.0).collect();
    let mut empty: Vec<u32> = polls.iter().map(|p| p.1).collect();
    println!(
        "  polls per round (median): producer found the ring full {}, consumer found it empty {}",
        med(&mut full),
        med(&mut empty)
    );
}

/// Run `rounds` rounds, each moving `items` items from a producer thread (core 0, `produce`,
/// returns its full polls) to a consumer thread (core 1, `consume`, returns the sum and its
/// empty polls), and print the poll counts.
fn run_stream<P: Send, C: Send>(
    name: &str,
    rounds: usize,
    items: u64,
    (tx, rx): (P, C),
    produce: impl Fn(&mut P, u64) -> u32 + Sync,
    consume: impl Fn(&mut C, u64) -> (u64, u32) + Sync,
) -> Stats {
    let (mut tx, mut rx) = (Pad(tx), Pad(rx));
    let mut polls = Vec::new();
    let stats = measure(name, rounds, items, || {
        thread::scope(|s| {
            let producer = s.spawn(|| {
                pin(0);
                produce(&mut tx.0, items)
            });
            let consumer = s.spawn(|| {
                pin(1);
                consume(&mut rx.0, items)
            });
            let (sum, empty) = consumer.join().expect("consumer");
            let full = producer.join().expect("producer");
            polls.push((full, empty));
            sum
        })
    });
    print_polls(&polls);
    stats
}

fn produce_each<T: Tx>(tx: &mut T, items: u64) -> u32 {
    let mut spins = 0;
    for i in 0..items {
        while !tx.push(i) {
            relax(&mut spins);
        }
    }
    spins
}

fn consume_each<T: Rx>(rx: &mut T, items: u64) -> (u64, u32) {
    let (mut sum, mut got, mut spins) = (0u64, 0u64, 0);
    while got < items {
        match rx.pop() {
            Some(v) => {
                sum = sum.wrapping_add(v);
                got += 1;
            }
            None => relax(&mut spins),
        }
    }
    (sum, spins)
}

/// Feed `push_some` batches of up to `TP_BATCH` consecutive items; it returns how many it took.
fn produce_batches(items: u64, mut push_some: impl FnMut(&[u64]) -> usize) -> u32 {
    let mut buf = [0u64; TP_BATCH];
    let (mut next, mut spins) = (0u64, 0);
    while next < items {
        let n = (items - next).min(TP_BATCH as u64) as usize;
        for (k, slot) in buf[..n].iter_mut().enumerate() {
            *slot = next + k as u64;
        }
        let mut sent = 0;
        while sent < n {
            let k = push_some(&buf[sent..n]);
            if k == 0 {
                relax(&mut spins);
            }
            sent += k;
        }
        next += n as u64;
    }
    spins
}

/// Drain with `pop_some` (adds what it popped to the sum, returns how many) until `items`.
fn consume_batches(items: u64, mut pop_some: impl FnMut(&mut u64) -> usize) -> (u64, u32) {
    let (mut sum, mut got, mut spins) = (0u64, 0u64, 0);
    while got < items {
        let n = pop_some(&mut sum);
        if n == 0 {
            relax(&mut spins);
        }
        got += n as u64;
    }
    (sum, spins)
}

fn stream<R: Ring>(rounds: usize, items: u64) -> Stats {
    let name = format!("throughput {} per item", R::NAME);
    run_stream(
        &name,
        rounds,
        items,
        R::channel(TP_CAPACITY),
        produce_each,
        consume_each,
    )
}

fn stream_vyrn_batch(rounds: usize, items: u64) -> Stats {
    run_stream(
        &format!("throughput vyrn spsc batch x{TP_BATCH}"),
        rounds,
        items,
        spsc::channel::<u64>(TP_CAPACITY),
        |tx, items| produce_batches(items, |b| tx.push_batch(b)),
        |rx, items| {
            consume_batches(items, |sum| {
                rx.pop_batch_with(TP_BATCH, |v| *sum = sum.wrapping_add(v))
            })
        },
    )
}

fn stream_rtrb_batch(rounds: usize, items: u64) -> Stats {
    run_stream(
        &format!("throughput rtrb partial_slice x{TP_BATCH}"),
        rounds,
        items,
        rtrb::RingBuffer::<u64>::new(TP_CAPACITY),
        |tx, items| produce_batches(items, |b| tx.push_partial_slice(b).0.len()),
        |rx, items| {
            let mut out = [0u64; TP_BATCH];
            consume_batches(items, |sum| {
                let (popped, _) = rx.pop_partial_slice(&mut out);
                for &v in popped.iter() {
                    *sum = sum.wrapping_add(v);
                }
                popped.len()
            })
        },
    )
}

fn throughput() {
    let items: u64 = if quick() { 100_000 } else { 1_000_000 };
    let r = rounds(15);
    println!(
        "\n## 3. cross-thread throughput: {items} items per round through a {TP_CAPACITY}-slot \
         ring, producer on core 0, consumer on core 1 (ns per item and items/s)"
    );
    let vyrn = stream::<Vyrn>(r, items);
    let rt = stream::<Rtrb>(r, items);
    let aq = stream::<Aq>(r, items);
    let vyrn_batch = stream_vyrn_batch(r, items);
    let rtrb_batch = stream_rtrb_batch(r, items);
    ratio(&vyrn, &rt);
    ratio(&vyrn, &aq);
    ratio(&vyrn_batch, &rtrb_batch);
    ratio(&vyrn_batch, &vyrn);
}
