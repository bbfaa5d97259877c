//! `vyrn paths`: a lab for the replication paths — the order stream end to end on two lossy
//! loopback paths, with no sequencer or replica process. A sender thread plays a seeded stream (ORDER, HASH, HEADER, HEARTBEAT frames of both
//! substreams, signed headers) onto two paths — two loopback multicast groups, each behind a
//! seeded lossy wrapper — and serves NACKs from its frame store with `flags.retransmit`
//! (07 §4.10). The receiver runs the replica's receive loop of §4.9 (dedupe the other path's
//! copy, hole detection, NACK, retry), feeds the decoder in `frame_seq` order, and checks every
//! HEADER's `order_root` and `seq_sig`. It prints a progress line every second and an operator
//! summary at the end; exit status 1 on any fault.
//!
//! Simplification of this harness: the receiver learns the stream's last `frame_seq` per
//! substream from the sender in-process, standing in for heartbeats' tail detection.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use vyrn_client::loadgen::stats::{fmt_percentiles, Latency};
use vyrn_nic::lossy::{LossConfig, Lossy};
use vyrn_nic::pair::{Path, PathMark, PathPair};
use vyrn_nic::udp::{UdpConfig, UdpPort};
use vyrn_nic::{now_ns, Dest, Port, RxBatch, TxPacket};
use vyrn_wire::corpus::{generate, CorpusConfig};
use vyrn_wire::frame::{FrameHeader, FLAG_RETRANSMIT};
use vyrn_wire::msg::ctrl::{CtrlMsg, Nack};
use vyrn_wire::{BlockHeader, BlockRoots, DecState, Layout, Pos, Sink};

/// `vyrn paths`: the order stream on two lossy loopback paths with NACK repair.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The stream's and the loss's seed.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Frames to send.
    #[arg(long, default_value_t = 60_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub frames: u64,
    /// Send rate, frames/s.
    #[arg(long, value_name = "FRAMES_PER_S", default_value_t = 50_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub rate: u64,
    /// Drop probability on path A.
    #[arg(long, value_name = "P", default_value_t = 0.02, value_parser = prob)]
    pub drop_a: f64,
    /// Drop probability on path B.
    #[arg(long, value_name = "P", default_value_t = 0.02, value_parser = prob)]
    pub drop_b: f64,
    /// Reorder probability on each path.
    #[arg(long, value_name = "P", default_value_t = 0.01, value_parser = prob)]
    pub reorder: f64,
    /// The peak mix (07 §15) instead of the reference mix.
    #[arg(long)]
    pub peak: bool,
}

fn prob(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(p) if (0.0..=1.0).contains(&p) => Ok(p),
        _ => Err(format!("{s}: a probability in 0..=1")),
    }
}

struct Opts {
    seed: u64,
    frames: usize,
    rate: u64,
    drop: [f64; 2],
    reorder: f64,
    peak: bool,
}

/// Index of (stream, frame_seq) into per-frame tables.
struct FrameIndex {
    base: [usize; 2],
    count: [u64; 2],
}

impl FrameIndex {
    fn idx(&self, stream: u8, seq: u64) -> Option<usize> {
        let s = stream as usize;
        (s < 2 && seq >= 1 && seq <= self.count[s]).then(|| self.base[s] + (seq - 1) as usize)
    }
}

#[derive(Default)]
struct Verify {
    records: u64,
    steps: u64,
    blocks: BTreeMap<u64, BlockRoots>,
    headers: Vec<BlockHeader>,
}

impl Sink for Verify {
    fn pkt(&mut self, _: Pos, _: &vyrn_wire::PacketRecord) {
        self.records += 1;
    }
    fn take(&mut self, _: Pos, _: &vyrn_wire::AcctTake) {
        self.records += 1;
    }
    fn step(&mut self, _: &vyrn_wire::Step, _: &[u64], _: &[u8]) {
        self.records += 1;
        self.steps += 1;
    }
    fn block(&mut self, b: &BlockRoots) {
        self.blocks.insert(b.height, *b);
    }
    fn header(&mut self, _: Pos, h: &BlockHeader) {
        self.headers.push(*h);
    }
}

/// Sender pair (behind the lossy stage), receiver pair, and how they are connected.
type Paths = (PathPair<Lossy<UdpPort>>, PathPair<UdpPort>, &'static str);

fn open_paths(o: &Opts) -> Result<Paths, String> {
    let groups = [
        Ipv4Addr::new(239, 255, 74, 1),
        Ipv4Addr::new(239, 255, 74, 2),
    ];
    let lossy = |p: UdpPort, i: usize| {
        Lossy::tx_only(
            p,
            LossConfig::seeded(o.seed.wrapping_mul(31).wrapping_add(i as u64))
                .with_drop(o.drop[i])
                .with_reorder(o.reorder, 3),
        )
        .map_err(|e| format!("lossy: {e}"))
    };
    // Multicast on loopback, as a replica subscribes to G_ord(seq, A) and G_ord(seq, B) (07 §3.1).
    let (tx, rx, mc) = vyrn_seq::ports::open_path_sockets(groups).map_err(|e| e.to_string())?;
    let how = if mc {
        "loopback multicast 239.255.74.1 / 239.255.74.2"
    } else {
        eprintln!("note: loopback multicast unavailable; using unicast on 127.0.0.1");
        "unicast 127.0.0.1"
    };
    let mut tx = tx.into_iter();
    let mut rx = rx.into_iter();
    let (ta, tb) = (tx.next().ok_or("no port")?, tx.next().ok_or("no port")?);
    let (ra, rb) = (rx.next().ok_or("no port")?, rx.next().ok_or("no port")?);
    Ok((
        PathPair::new(lossy(ta, 0)?, lossy(tb, 1)?, PathMark::VYRN),
        PathPair::new(ra, rb, PathMark::VYRN),
        how,
    ))
}

/// Run the stream; exit 0, 1 (a fault) or 2 (the paths could not open).
pub fn run(a: Args) -> ExitCode {
    let o = Opts {
        seed: a.seed,
        frames: a.frames as usize,
        rate: a.rate,
        drop: [a.drop_a, a.drop_b],
        reorder: a.reorder,
        peak: a.peak,
    };
    match stream(&o) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("vyrn paths: {e}");
            ExitCode::from(2)
        }
    }
}

fn stream(o: &Opts) -> Result<bool, String> {
    let t_gen = Instant::now();
    let mut cfg = if o.peak {
        CorpusConfig::peak(o.seed, o.frames)
    } else {
        CorpusConfig::reference(o.seed, o.frames)
    };
    cfg.layout = Layout::reference();
    let corpus = generate(&cfg);
    let seq_key =
        ed25519_dalek::VerifyingKey::from_bytes(&corpus.seq_pubkey).map_err(|e| e.to_string())?;
    // Frame store by (stream, frame_seq): what the sequencer's frame rings hold (07 §4.10).
    let mut by_stream: [Vec<Vec<u8>>; 2] = [Vec::new(), Vec::new()];
    let mut order = Vec::with_capacity(corpus.frames.len());
    for f in &corpus.frames {
        let (h, _) = FrameHeader::parse(f).map_err(|e| format!("corpus frame: {e}"))?;
        by_stream[h.stream as usize].push(f.clone());
        order.push((h.stream, h.frame_seq));
    }
    let index = Arc::new(FrameIndex {
        base: [0, by_stream[0].len()],
        count: [by_stream[0].len() as u64, by_stream[1].len() as u64],
    });
    let store: Arc<Vec<Vec<u8>>> = Arc::new(by_stream.concat());
    let sent_ns: Arc<Vec<AtomicU64>> =
        Arc::new((0..store.len()).map(|_| AtomicU64::new(0)).collect());
    println!(
        "vyrn paths: seed {} — {} frames ({} on A, {} on B), {} packet records, {} steps, {} blocks, generated in {:.2?}",
        o.seed,
        store.len(),
        index.count[0],
        index.count[1],
        corpus.stats.pkts + corpus.stats.advances,
        corpus.stats.steps,
        corpus.stats.blocks,
        t_gen.elapsed()
    );

    let (mut txp, mut rxp, how) = open_paths(o)?;
    let mut rx_ctrl = UdpPort::open(&UdpConfig::loopback()).map_err(|e| e.to_string())?;
    let mut tx_ctrl = UdpPort::open(&UdpConfig::loopback()).map_err(|e| e.to_string())?;
    let tx_ctrl_addr = tx_ctrl.local_addr().map_err(|e| e.to_string())?;
    println!(
        "paths: {how}; drop A {:.1}% B {:.1}%, reorder {:.1}% per path; pacing {} frames/s; NACK repair from the sender's frame store",
        o.drop[0] * 100.0,
        o.drop[1] * 100.0,
        o.reorder * 100.0,
        o.rate
    );

    let done = Arc::new(AtomicBool::new(false));
    let rtx_count = Arc::new(AtomicU64::new(0));
    let order = Arc::new(order);
    let rate = o.rate;
    let sender = {
        let (store, index, sent_ns, done, rtx_count, order) = (
            store.clone(),
            index.clone(),
            sent_ns.clone(),
            done.clone(),
            rtx_count.clone(),
            order.clone(),
        );
        std::thread::spawn(move || -> Result<[u64; 2], String> {
            let start = Instant::now();
            let mut next = 0usize;
            let mut rtx_buf = Vec::with_capacity(9216);
            let mut ctrl = RxBatch::new(64, 256);
            loop {
                // Pace: frame i goes out at start + i / rate.
                let due = (start.elapsed().as_nanos() * rate as u128 / 1_000_000_000) as usize;
                while next < order.len() && next <= due {
                    let (stream, seq) = order[next];
                    if let Some(i) = index.idx(stream, seq) {
                        sent_ns[i].store(now_ns(), Ordering::Relaxed);
                        // Both paths, then the fence (07 §4.2); a path that stays full drops it.
                        let _ = txp.write_and_fence(&store[i], Dest::Default, 1000);
                    }
                    next += 1;
                }
                // NACK service (07 §4.10): re-post from the store, retransmit bit set, unicast.
                ctrl.clear();
                let _ = tx_ctrl.recv_batch(&mut ctrl);
                for p in ctrl.iter() {
                    let (Ok(CtrlMsg::Nack(n)), Some(src)) = (CtrlMsg::parse(p.data), p.meta.src)
                    else {
                        continue;
                    };
                    for seq in n.from_seq..=n.to_seq.min(n.from_seq + 255) {
                        if let Some(i) = index.idx(n.stream, seq) {
                            rtx_buf.clear();
                            rtx_buf.extend_from_slice(&store[i]);
                            rtx_buf[vyrn_wire::frame::FLAGS_OFFSET] |= FLAG_RETRANSMIT;
                            let _ = tx_ctrl.send_batch(&[TxPacket {
                                data: &rtx_buf,
                                dest: Dest::Addr(src),
                            }]);
                            rtx_count.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
                if done.load(Ordering::Acquire) {
                    let c = txp.counters();
                    return Ok([c[0].tx_packets, c[1].tx_packets]);
                }
                if next >= order.len() {
                    std::thread::sleep(Duration::from_micros(50));
                } else {
                    std::thread::yield_now();
                }
            }
        })
    };

    // Receiver: the replica's receive loop (07 §4.9), one per substream, and the decoder.
    let mut dec = DecState::new(Layout::reference()).map_err(|e| e.to_string())?;
    let mut v = Verify::default();
    let mut next_expected = [1u64, 1u64];
    let mut held: [BTreeMap<u64, Vec<u8>>; 2] = [BTreeMap::new(), BTreeMap::new()];
    let mut hole_since: [Option<(u64, Instant, Instant)>; 2] = [None, None]; // (hole start, opened, last nack)
    let (mut dups, mut rtx_rx, mut nacks, mut holes) = ([0u64; 2], 0u64, 0u64, 0u64);
    let mut rx_by_path = [0u64; 2];
    let mut lat = Latency::default();
    let mut repair = Latency::default();
    let mut repair_nack = Latency::default();
    let mut fault: Option<String> = None;
    let mut ba = RxBatch::new(64, 9216);
    let mut bb = RxBatch::new(64, 9216);
    let mut bc = RxBatch::new(64, 9216);
    let t0 = Instant::now();
    let mut last_print = Instant::now();
    let deadline = Duration::from_secs(20 + (store.len() as u64 / o.rate.max(1)) * 3);
    const HOLE_WAIT: Duration = Duration::from_micros(300); // loopback scheduling skew, not 5 µs
    const NACK_RETRY: Duration = Duration::from_millis(2);
    let mut idle_spins = 0u32;
    loop {
        let mut got = 0usize;
        ba.clear();
        bb.clear();
        bc.clear();
        let _ = rxp.recv_both(&mut ba, &mut bb);
        let _ = rx_ctrl.recv_batch(&mut bc);
        for (path, batch) in [(Some(Path::A), &ba), (Some(Path::B), &bb), (None, &bc)] {
            for p in batch.iter() {
                got += 1;
                let Ok((h, _)) = FrameHeader::parse(p.data) else {
                    continue;
                };
                match path {
                    Some(pa) => rx_by_path[pa.index()] += 1,
                    None => rtx_rx += 1,
                }
                let s = h.stream as usize;
                if s > 1 || h.frame_seq < next_expected[s] || held[s].contains_key(&h.frame_seq) {
                    if let Some(pa) = path {
                        dups[pa.index()] += 1;
                    }
                    continue;
                }
                if h.frame_seq == next_expected[s] {
                    // In order: straight to the decoder, no copy.
                    if fault.is_none() {
                        if let Err(e) = dec.on_frame(p.data, now_ns(), &mut v) {
                            fault = Some(e.to_string());
                        }
                    }
                    if let Some(i) = index.idx(h.stream, h.frame_seq) {
                        lat.record(now_ns().saturating_sub(sent_ns[i].load(Ordering::Relaxed)));
                    }
                    next_expected[s] += 1;
                } else if held[s].len() < 65_536 {
                    held[s].insert(h.frame_seq, p.data.to_vec());
                }
            }
        }
        // Deliver in order per substream.
        for s in 0..2 {
            while let Some(f) = held[s].remove(&next_expected[s]) {
                if fault.is_none() {
                    if let Err(e) = dec.on_frame(&f, now_ns(), &mut v) {
                        fault = Some(e.to_string());
                    }
                }
                if let Some(i) = index.idx(s as u8, next_expected[s]) {
                    lat.record(now_ns().saturating_sub(sent_ns[i].load(Ordering::Relaxed)));
                }
                next_expected[s] += 1;
            }
            // A hole that closed since the last round: its repair time, from the moment it was
            // seen (a frame above it arrived) to the moment it was filled.
            if let Some((start, opened, last)) = hole_since[s] {
                if next_expected[s] > start {
                    let t = opened.elapsed().as_nanos() as u64;
                    if last == opened {
                        repair.record(t);
                    } else {
                        repair_nack.record(t);
                    }
                    hole_since[s] = None;
                }
            }
            // Hole: something above next_expected arrived but next_expected did not.
            if let Some((&first_above, _)) = held[s].iter().next() {
                let now = Instant::now();
                match hole_since[s] {
                    Some((start, opened, last)) if start == next_expected[s] => {
                        if now - opened >= HOLE_WAIT && (last == opened || now - last >= NACK_RETRY)
                        {
                            let n = Nack {
                                epoch: 1,
                                tenure: 0,
                                stream: s as u8,
                                from_seq: next_expected[s],
                                to_seq: first_above - 1,
                            };
                            if let Ok(b) = n.to_bytes() {
                                let _ = rx_ctrl.send_batch(&[TxPacket {
                                    data: &b,
                                    dest: Dest::Addr(tx_ctrl_addr),
                                }]);
                                nacks += 1;
                            }
                            hole_since[s] = Some((start, opened, now + Duration::from_nanos(1)));
                        }
                    }
                    _ => {
                        holes += 1;
                        hole_since[s] = Some((next_expected[s], now, now));
                    }
                }
            } else {
                hole_since[s] = None;
            }
        }
        let delivered = next_expected[0] - 1 + next_expected[1] - 1;
        let complete = next_expected[0] > index.count[0] && next_expected[1] > index.count[1];
        if last_print.elapsed() >= Duration::from_secs(1) || complete {
            last_print = Instant::now();
            println!(
                "t={:>5.1}s  decoded {:>7}/{} frames  rx A {:>7} B {:>7} (other-path dups {:>7})  holes {:>5} nacks {:>5} rtx {:>5}  records {:>8} blocks {:>5}  frame latency p50 {:>6} ns p99 {:>8} ns",
                t0.elapsed().as_secs_f64(),
                delivered,
                store.len(),
                rx_by_path[0],
                rx_by_path[1],
                dups[0] + dups[1],
                holes,
                nacks,
                rtx_rx,
                v.records,
                v.blocks.len(),
                lat.histogram().value_at_quantile(0.5),
                lat.histogram().value_at_quantile(0.99)
            );
        }
        if complete || t0.elapsed() > deadline {
            break;
        }
        if got == 0 {
            idle_spins += 1;
            if idle_spins > 64 {
                let _ = rxp.a().wait_readable(Duration::from_micros(200));
            } else {
                std::thread::yield_now();
            }
        } else {
            idle_spins = 0;
        }
    }
    done.store(true, Ordering::Release);
    let sent = sender.join().map_err(|_| "sender panicked".to_string())??;
    let secs = t0.elapsed().as_secs_f64();

    // Verify every header against the decoder's own roots and the sequencer key.
    let (mut ok, mut bad_root, mut bad_sig, mut missing) = (0u64, 0u64, 0u64, 0u64);
    for h in &v.headers {
        match v.blocks.get(&h.height) {
            Some(b) if b.order_root == h.order_root => ok += 1,
            Some(_) => bad_root += 1,
            None => missing += 1,
        }
        if !h.verify(&seq_key) {
            bad_sig += 1;
        }
    }
    let complete = next_expected[0] > index.count[0] && next_expected[1] > index.count[1];
    println!();
    println!("== summary ==");
    println!(
        "frames       {} of {} delivered in order to the decoder in {:.2} s ({:.0} frames/s)",
        next_expected[0] + next_expected[1] - 2,
        store.len(),
        secs,
        (next_expected[0] + next_expected[1] - 2) as f64 / secs
    );
    let rc = rxp.counters();
    println!(
        "paths        sent A {} B {}; received A {} B {}; kernel queue drops A {} B {}; other-path duplicates dropped {}",
        sent[0], sent[1], rx_by_path[0], rx_by_path[1], rc[0].rx_dropped, rc[1].rx_dropped, dups[0] + dups[1]
    );
    println!(
        "repair       holes {holes}, NACKs {nacks}, retransmits received {rtx_rx} (served {})",
        rtx_count.load(Ordering::Relaxed)
    );
    println!(
        "decoder      {} records ({} steps), {} blocks; counters {:?}",
        v.records,
        v.steps,
        v.blocks.len(),
        dec.counters().errors
    );
    println!("headers      {} checked: order_root ok {ok}, mismatch {bad_root}, block incomplete {missing}; seq_sig bad {bad_sig}", v.headers.len());
    for (name, l) in [
        ("frame send -> decoded (incl. repair)", &lat),
        (
            "hole seen -> filled, no NACK needed (other path, reorder)",
            &repair,
        ),
        (
            "hole seen -> filled by NACK repair (lost on both paths)",
            &repair_nack,
        ),
    ] {
        println!("{}", fmt_percentiles(name, &l.percentiles()));
    }
    let healthy = complete && fault.is_none() && bad_root == 0 && bad_sig == 0 && missing == 0;
    match (&fault, healthy) {
        (Some(f), _) => println!("RESULT       FAULT {f}"),
        (None, false) if !complete => println!("RESULT       FAULT stream incomplete after the deadline"),
        (None, false) => println!("RESULT       FAULT header check failed"),
        (None, true) => println!("RESULT       OK: every frame delivered once, in order, every block's order_root and seq_sig verified"),
    }
    Ok(healthy)
}
