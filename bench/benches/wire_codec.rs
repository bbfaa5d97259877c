//! Order-stream codec benchmarks (07 §7.3, §4.1).
//!
//! 1. Replica decoder: records/s and ns/record on a seeded REF-mix corpus (49 lanes, two
//!    substreams), against 07's 4 ns per record budget (130M records/s on core 3), with two
//!    baselines from the same run: BLAKE3 over the same ORDER bytes (the order_root work every
//!    decoder must do) and the `leb128` crate reading the same number of LEB128 values.
//! 2. Lane pre-encode: ns per PacketRecord against 07's ~5 ns, with the `leb128` crate writing
//!    the same fields as baseline.

use vyrn_bench::{budget, measure, measure_with_setup, quick, ratio, rounds};
use vyrn_wire::corpus::{generate, CorpusConfig, Rng};
use vyrn_wire::encoder::FrameWriter;
use vyrn_wire::records::*;
use vyrn_wire::{
    DecState, FrameHeader, FrameKind, LaneBase, Layout, NullSink, StepState, TenureStart,
};

fn main() {
    println!("# wire_codec: one shared 2-core machine; ratios are the figures to quote");
    if vyrn_bench::enabled("decoder") {
        decoder();
    }
    if vyrn_bench::enabled("breakdown") {
        breakdown();
    }
    if vyrn_bench::enabled("encoder") {
        encoder();
    }
}

fn decoder() {
    let frames = if quick() { 2_000 } else { 40_000 };
    let c = generate(&CorpusConfig::peak(42, frames));
    let s = c.stats;
    let kinds = c
        .frames
        .iter()
        .filter_map(|f| FrameHeader::parse(f).ok())
        .fold([0u64; 5], |mut k, (h, _)| {
            k[h.kind as usize] += 1;
            k
        });
    println!(
        "frames by kind: order {} hash {} header {} heartbeat {}",
        kinds[1], kinds[2], kinds[3], kinds[4]
    );
    let records = s.pkts + s.advances + s.takes + s.steps;
    let order_bytes: Vec<u8> = c
        .frames
        .iter()
        .filter_map(|f| FrameHeader::parse(f).ok())
        .filter(|(h, _)| h.kind == FrameKind::Order)
        .flat_map(|(_, b)| b.iter().copied())
        .collect();
    let total_bytes: usize = c.frames.iter().map(|f| f.len()).sum();
    println!(
        "corpus: {} frames, {} B ({} B of ORDER sections), {} packet records, {} steps ({} spanning), {} blocks",
        s.frames,
        total_bytes,
        order_bytes.len(),
        s.pkts + s.advances,
        s.steps,
        s.spanning,
        s.blocks
    );
    let n = rounds(20);
    // Candidate: decode every frame. A fresh decoder per pass (a stream starts at TenureStart),
    // built right before the pass and not timed, so its tables are as warm as a running
    // replica's rather than cold from DRAM.
    let dec = measure_with_setup(
        "decode REF peak-mix corpus (per record)",
        n,
        records,
        || DecState::new(Layout::reference()).unwrap(),
        |mut d| {
            for f in &c.frames {
                d.on_frame(f, 0, &mut NullSink).expect("corpus decodes");
            }
            d
        },
    );
    println!(
        "  decoder: {:.1} M records/s per core",
        dec.ops_per_s() / 1e6
    );
    budget("decoder ns/record (07 §7.3: 4 ns)", dec.p50_ns(), 4.0);
    // Baseline 1: BLAKE3 of the same ORDER section bytes.
    let b3 = measure(
        "baseline: BLAKE3 of the ORDER bytes (per record)",
        n,
        records,
        || blake3::hash(&order_bytes),
    );
    ratio(&dec, &b3);
    // Baseline 2: the leb128 crate reading as many LEB128 values as there are bytes / 2.
    let mut leb = Vec::new();
    let mut rng = Rng::new(1);
    let vals = order_bytes.len() / 2;
    for _ in 0..vals {
        leb128::write::unsigned(&mut leb, rng.below(300)).unwrap();
    }
    let l = measure(
        "baseline: leb128 crate, same byte count (per record)",
        n,
        records,
        || {
            let mut r = &leb[..];
            let mut acc = 0u64;
            while !r.is_empty() {
                acc = acc.wrapping_add(leb128::read::unsigned(&mut r).unwrap());
            }
            acc
        },
    );
    ratio(&dec, &l);
}

/// A writer for substream `s` of a one-lane-per-half layout, with frame 1 (its TenureStart:
/// first LaneSeq `next_lane_seq`, rx_ts base `rx_ts_base`, cut 0) already flushed.
fn open_writer(s: u8, next_lane_seq: u64, rx_ts_base: u64) -> FrameWriter {
    let t = TenureStart {
        epoch: 1,
        tenure: 0,
        sender: 0,
        first_step: 1,
        first_height: 1,
        prev_header_hash: [0; 32],
        lanes: vec![LaneBase {
            next_lane_seq,
            rx_ts_base,
            fills_applied_base: 0,
        }],
        prev_cut: vec![0],
    };
    let mut b = Vec::new();
    t.encode(&mut b);
    let mut w = FrameWriter::new(1, 1, 0, 0, s, 160);
    w.tenure_start(&b);
    w.flush();
    w
}

/// Where the decoder's time goes: a stream of PacketRecords only (10 per LaneRun, 160-byte
/// frames) with their HashRuns, per record.
fn breakdown() {
    let layout = Layout::two_streams(2);
    let n_pkts = if quick() { 20_000 } else { 200_000 };
    let mut rng = Rng::new(3);
    let ts = |s: u8| open_writer(s, 1, 1 << 60);
    // Packets on lane 0 (substream A), 10 per LaneRun, frames of 160 B.
    let mut wa = ts(0);
    let wb = ts(1);
    let mut st = LaneState {
        next_lane_seq: 1,
        prev_rx_ts: 1 << 60,
        prev_fills_applied: 0,
    };
    let mut next = vec![1u32; 4096];
    let (mut rx, mut lseq) = (1u64 << 60, 1u64);
    let mut enc = Vec::new();
    for _ in 0..n_pkts {
        let slot = rng.below(4096) as u16;
        rx += rng.below(600);
        let op = LaneOp::Pkt {
            slot,
            count: 10,
            shed: false,
            pkt_seq: next[slot as usize],
            rx_ts: rx,
            first_lane_seq: lseq,
            fills_applied: 0,
        };
        lseq += 10;
        let mut out = [0u8; PKT_ENC_MAX];
        let n = encode_lane_op(&mut st, &mut next, &op, &mut out);
        enc.push(out[..n].to_vec());
    }
    // 10 records per LaneRun; every 240 records a HASH frame with their pkt_hash (07 §3.7).
    for (i, chunk) in enc.chunks(10).enumerate() {
        let refs: Vec<&[u8]> = chunk.iter().map(|r| r.as_slice()).collect();
        wa.lane_records(0, &refs);
        if i % 24 == 23 {
            wa.flush();
            let mut body = Vec::new();
            let hashes: Vec<u64> = (0..240).map(|j| j as u64).collect();
            encode_hash_run(0, &hashes, &mut body);
            wa.hash_frame(&body);
        }
    }
    wa.flush();
    let mut frames_a = wa.take_frames();
    let frames_b = {
        let mut wb = wb;
        wb.take_frames()
    };
    let pkt_frames: Vec<Vec<u8>> = frames_b.iter().cloned().chain(frames_a.drain(..)).collect();
    let n = rounds(20);
    let p = measure_with_setup(
        "breakdown: PacketRecords + HashRuns only (per record)",
        n,
        n_pkts as u64,
        || DecState::new(layout).unwrap(),
        |mut d| {
            for f in &pkt_frames {
                d.on_frame(f, 0, &mut NullSink).expect("decodes");
            }
            d
        },
    );
    println!(
        "  {:.1} records per ORDER frame",
        n_pkts as f64 / (pkt_frames.len() - 2) as f64
    );
    let _ = p;

    // Steps only: lanes 0 (A) and 1 (B) hold ops 1..2^40; every step moves lane 0's cut by 1
    // and is flushed in its own frame (a gated step, 07 §4.5); the spanning share also moves
    // lane 1 (two records, merged by StepId).
    for span in [0u64, 333] {
        let n_steps = if quick() { 5_000 } else { 50_000 };
        let top = 1u64 << 40;
        let ts = |s: u8| open_writer(s, top, 0);
        let mut w = [ts(0), ts(1)];
        let mut st = [StepState::new(1, &[0]), StepState::new(1, &[0])];
        let mut cut = [0u64, 0];
        let mut order = Vec::new();
        for step in 1..=n_steps as u64 {
            let spans = rng.below(1000) < span;
            cut[0] += 1;
            if spans {
                cut[1] += 1;
            }
            for s in 0..2usize {
                if s == 1 && !spans {
                    continue;
                }
                let mut b = vec![tag::STEP_RUN, 1];
                let rec = HalfRecord {
                    step,
                    kind: StepKind::Cross,
                    home: s == 0,
                    other: spans,
                    src_lane: if s == 0 { 0 } else { 0xFF },
                    src_lane_seq: cut[0],
                    payload: &[],
                    cut: &cut[s..s + 1],
                };
                assert!(encode_step_half(&mut st[s], s, &rec, &mut b));
                w[s].section(&b);
                w[s].flush();
                order.push(s);
            }
        }
        let [w0, w1] = w;
        let mut per = [w0, w1].map(|mut x| x.take_frames().into_iter());
        let mut frames: Vec<Vec<u8>> = Vec::new();
        frames.extend(per[0].next());
        frames.extend(per[1].next());
        for s in order {
            frames.extend(per[s].next());
        }
        let name = format!("breakdown: steps only, {}% spanning (per step)", span / 10);
        measure_with_setup(
            &name,
            n,
            n_steps as u64,
            || DecState::new(layout).unwrap(),
            |mut d| {
                for f in &frames {
                    d.on_frame(f, 0, &mut NullSink).expect("decodes");
                }
                d
            },
        );
    }
}

fn encoder() {
    let n_ops = 4096usize;
    let mut rng = Rng::new(7);
    let mut ops = Vec::with_capacity(n_ops);
    let (mut rx, mut lseq) = (1u64 << 60, 1u64);
    let mut next = vec![0u32; 4096];
    let mut seqs = vec![1u32; 4096];
    for _ in 0..n_ops {
        let slot = rng.below(300) as u16;
        let count = 1 + rng.below(10) as u8;
        rx += rng.below(600);
        ops.push(LaneOp::Pkt {
            slot,
            count,
            shed: false,
            pkt_seq: seqs[slot as usize],
            rx_ts: rx,
            first_lane_seq: lseq,
            fills_applied: 0,
        });
        seqs[slot as usize] += 1;
        lseq += count as u64;
    }
    let n = rounds(30);
    let reps = if quick() { 10 } else { 200 };
    let mut out = [0u8; PKT_ENC_MAX];
    let enc = measure(
        "lane pre-encode PacketRecord (per record)",
        n,
        (n_ops * reps) as u64,
        || {
            let mut total = 0usize;
            for _ in 0..reps {
                let mut st = LaneState {
                    next_lane_seq: 1,
                    prev_rx_ts: 1 << 60,
                    prev_fills_applied: 0,
                };
                next.iter_mut().for_each(|x| *x = 1);
                for op in &ops {
                    total += encode_lane_op(&mut st, &mut next, op, &mut out);
                    std::hint::black_box(&out);
                }
            }
            total
        },
    );
    budget(
        "lane pre-encode ns/packet (07 §4.1: ~5 ns)",
        enc.p50_ns(),
        5.0,
    );
    let mut buf = Vec::with_capacity(64);
    let base = measure(
        "baseline: leb128 crate, slot+rx_ts (per record)",
        n,
        (n_ops * reps) as u64,
        || {
            let mut total = 0usize;
            for _ in 0..reps {
                let mut prev = 1u64 << 60;
                for op in &ops {
                    if let LaneOp::Pkt { slot, rx_ts, .. } = op {
                        buf.clear();
                        buf.push(0);
                        leb128::write::unsigned(&mut buf, *slot as u64).unwrap();
                        leb128::write::signed(&mut buf, (*rx_ts - prev) as i64).unwrap();
                        prev = *rx_ts;
                        total += buf.len();
                    }
                }
            }
            total
        },
    );
    ratio(&enc, &base);
}
