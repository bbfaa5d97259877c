//! The engine against 07's budgets, each beside a baseline measured in the same run:
//! - lane ns per message, live (tag check, dedupe, parse, risk, LaneSeq, pre-encode, BLAKE3,
//!   Ack response with its tag) vs 07 §7.3's 30 ns, and replay (no tag, no hash) vs ≤ 20 ns;
//!   baseline: the bare SipHash-2-4-128 of the packet plus `blake3::hash` of it (the
//!   cryptography a live lane cannot skip);
//! - BBO core ns per step (07 §4.7 budget 100 ns; 15 ns target of a simple step) vs the bare
//!   `Book::apply` of the same ops;
//! - replay speed vs live on the same corpus (REP_REPLAY_SPEEDUP_PEAK ≥ 1.5×, 07 §7.3);
//! - snapshot write and restore, GB/s (07 §7.5 serializes at ~2 GB/s).

use std::collections::VecDeque;
use vyrn_bench::{budget, enabled, measure, measure_with_setup, quick, ratio, rounds};
use vyrn_engine::bbo::{BboSink, LaneEvent, OpQueues, StepOut};
use vyrn_engine::home::NullEngineSink as NullSinks;
use vyrn_engine::lane::LaneSink;
use vyrn_engine::snapshot::{ReplicationState, SnapMeta};
use vyrn_engine::workload::{Input, Mix, Workload};
use vyrn_engine::{Bbo, Book, Capture, EngineConfig, Fwd, Lane, LiveEngine, ReplayEngine, RespOut};
use vyrn_wire::msg::client::siphash128;
use vyrn_wire::records::{PacketRecord, StepKind};

fn cfg() -> EngineConfig {
    let mut c = EngineConfig::unlimited_home(4, 64);
    c.hot_ring_bytes = 8 << 20;
    c
}

fn inputs(c: &EngineConfig, n: usize, max_msgs: u8) -> Vec<(u64, Vec<u8>)> {
    let mut mix = Mix::clean();
    mix.max_msgs = max_msgs;
    let mut w = Workload::new(c, 42, mix);
    (0..n)
        .filter_map(|_| match w.next_input() {
            Input::Packet { rx_ts, bytes } => Some((rx_ts, bytes)),
            Input::Control(_) => None,
        })
        .collect()
}

#[derive(Default)]
struct CountSink {
    n: u64,
}

impl LaneSink for CountSink {
    fn record(&mut self, _: &PacketRecord, enc: &[u8], _: &[u8]) {
        self.n += enc.len() as u64;
    }
    fn hash(&mut self, _: u8, _: u64, full: &[u8; 32]) {
        self.n += full[0] as u64;
    }
    fn forward(&mut self, f: &Fwd) {
        self.n += f.lane_seq;
    }
    fn respond(&mut self, r: &RespOut<'_>) {
        self.n += r.bytes.len() as u64;
    }
}

struct Q(Vec<VecDeque<Fwd>>);
impl OpQueues for Q {
    fn head(&self, lane: usize) -> Option<&Fwd> {
        self.0[lane].front()
    }
    fn pop(&mut self, lane: usize) -> Option<Fwd> {
        self.0[lane].pop_front()
    }
}

#[derive(Default)]
struct Null(u64);
impl BboSink for Null {
    fn step(&mut self, s: &StepOut<'_>) {
        self.0 += s.need_a;
    }
    fn event(&mut self, lane: u8, ev: &LaneEvent) {
        self.0 += lane as u64 + ev.step;
    }
}

fn main() {
    println!("# engine: one shared 2-core machine; ratios are the figures to quote");
    let c = cfg();
    let n_in = if quick() { 20_000 } else { 400_000 };
    let r = rounds(15);

    // One live run of the whole home gives the log, steps, events and ops for every part.
    let ins = inputs(&c, n_in, 4);
    let mut cap = Capture::default();
    let mut e = LiveEngine::new(c.clone());
    for (i, (ts, b)) in ins.iter().enumerate() {
        let _ = e.submit(*ts, *ts, b, &mut cap);
        if i % 4 == 3 {
            e.poll(*ts, &mut cap).expect("step");
        }
    }
    e.poll(u64::MAX / 2, &mut cap).expect("step");
    e.settle(&mut cap);
    let n_lanes = c.layout.n_lanes as usize;

    if enabled("lane") {
        // Lane 0 of that run, fed exactly as it ran: before each packet, the step events it
        // had applied (its logged fills_applied), so its working set stays realistic.
        enum In<'a> {
            Ev(&'a LaneEvent),
            Pkt(u64, &'a [u8], &'a PacketRecord),
        }
        let evs = cap.events.first().cloned().unwrap_or_default();
        let mut sched = Vec::new();
        let mut k = 0;
        for (rec, p) in cap.records.iter().filter(|(r, _)| r.lane == 0) {
            while k < evs.len() && evs[k].step <= rec.fills_applied {
                sched.push(In::Ev(&evs[k]));
                k += 1;
            }
            sched.push(In::Pkt(rec.rx_ts, p, rec));
        }
        let msgs: u64 = cap
            .records
            .iter()
            .filter(|(r, _)| r.lane == 0)
            .map(|(r, _)| r.count as u64)
            .sum();
        let k_seq = c.sessions[0].k_seq;
        let crypto = measure(
            "baseline: siphash128 + blake3 of each packet (per msg)",
            r,
            msgs,
            || {
                let mut x = 0u8;
                for i in &sched {
                    if let In::Pkt(_, b, _) = i {
                        x ^= siphash128(&k_seq, &b[..b.len() - 16])[0];
                        x ^= blake3::hash(&b[..b.len() - 16]).as_bytes()[0];
                    }
                }
                x
            },
        );
        let fresh = || {
            let mut l = Lane::new(&c, 0);
            l.prefault();
            (l, CountSink::default())
        };
        let live = measure_with_setup("lane live (per msg)", r, msgs, fresh, |(mut l, mut s)| {
            for i in &sched {
                match i {
                    In::Ev(e) => l.on_event(e, &mut s),
                    In::Pkt(ts, b, _) => {
                        let _ = l.on_packet(*ts, *ts, b, &mut s);
                    }
                }
            }
            l.flush_hashes(&mut s);
            (l, s.n)
        });
        ratio(&live, &crypto);
        budget("lane live (07 §7.3: 30 ns/msg)", live.p50_ns(), 30.0);
        let replay =
            measure_with_setup("lane replay (per msg)", r, msgs, fresh, |(mut l, mut s)| {
                for i in &sched {
                    match i {
                        In::Ev(e) => l.on_event(e, &mut s),
                        In::Pkt(_, b, rec) => {
                            let _ = l.replay_packet(rec, b, &mut s);
                        }
                    }
                }
                (l, s.n)
            });
        ratio(&replay, &live);
        budget("lane replay (07 §7.3: ≤ 20 ns/msg)", replay.p50_ns(), 20.0);
    }

    if enabled("bbo") {
        let steps = &cap.steps;
        let mut ops_in_order = Vec::new();
        {
            let mut q: Vec<VecDeque<Fwd>> = vec![VecDeque::new(); n_lanes];
            for f in &cap.forwards {
                q[f.lane as usize].push_back(*f);
            }
            for s in steps {
                if s.src_lane != 0xFF {
                    ops_in_order.push(q[s.src_lane as usize].pop_front().expect("op").op);
                }
            }
        }
        let book = measure_with_setup(
            "baseline: Book::apply of the same ops (per step)",
            r,
            steps.len() as u64,
            || Book::new(c.book_cfg),
            |mut b| {
                let mut x = 0u64;
                for (i, op) in ops_in_order.iter().enumerate() {
                    b.apply(i as u64 + 1, op, &mut |_| x += 1);
                }
                (b, x)
            },
        );
        let bbo = measure_with_setup(
            "BBO core step: kind, cut, need, StepRecord, book, events (per step)",
            r,
            steps.len() as u64,
            || {
                let mut q: Vec<VecDeque<Fwd>> = vec![VecDeque::new(); n_lanes];
                for f in &cap.forwards {
                    q[f.lane as usize].push_back(*f);
                }
                (Bbo::new(&c), Q(q), Null::default())
            },
            |(mut b, mut q, mut sink)| {
                for s in steps {
                    b.replay(&s.as_in(), &mut q, &mut sink).expect("step");
                }
                (b, sink.0)
            },
        );
        ratio(&bbo, &book);
        budget("BBO step (07 §4.7: 100 ns)", bbo.p50_ns(), 100.0);
        let simple = steps.iter().filter(|s| s.kind == StepKind::Improve).count();
        println!(
            "  steps: {} ({} Improve, {} Cross); the 15 ns simple-step target applies to Improve",
            steps.len(),
            simple,
            steps.iter().filter(|s| s.kind == StepKind::Cross).count()
        );
    }

    if enabled("replay") {
        let msgs: u64 = ins.iter().map(|(_, b)| b[2] as u64).sum();
        let live = measure_with_setup(
            "live engine, whole home (per msg)",
            r,
            msgs,
            || {
                let mut e = LiveEngine::new(c.clone());
                e.prefault();
                (e, NullSinks)
            },
            |(mut e, mut s)| {
                for (i, (ts, b)) in ins.iter().enumerate() {
                    let _ = e.submit(*ts, *ts, b, &mut s);
                    if i % 4 == 3 {
                        e.poll(*ts, &mut s).expect("step");
                    }
                }
                e.poll(u64::MAX / 2, &mut s).expect("step");
                e
            },
        );
        let replay = measure_with_setup(
            "replay engine, same log (per msg)",
            r,
            msgs,
            || {
                let mut r = ReplayEngine::new(c.clone());
                r.prefault();
                for (rec, p) in &cap.records {
                    r.push_record(*rec, p.clone()).expect("lane");
                }
                for s in &cap.steps {
                    r.push_step(s.clone());
                }
                (r, NullSinks)
            },
            |(mut r, mut s)| {
                r.run(None, &mut s).expect("replay");
                r
            },
        );
        ratio(&replay, &live);
        println!(
            "  replay speed vs live = {:.2}x (REP_REPLAY_SPEEDUP_PEAK ≥ 1.5x)",
            live.p50_ns() / replay.p50_ns()
        );
    }

    if enabled("snapshot") {
        let file = e.snapshot(&SnapMeta::default(), &ReplicationState::default());
        let bytes = file.len() as u64;
        println!(
            "  snapshot of {} resting orders: {} bytes",
            e.bbo().book().len(),
            bytes
        );
        let copy = measure("baseline: memcpy of the file (per byte)", r, bytes, || {
            file.clone()
        });
        let w = measure("snapshot write (per byte)", r, bytes, || {
            e.snapshot(&SnapMeta::default(), &ReplicationState::default())
        });
        let rd = measure("snapshot restore (per byte)", r, bytes, || {
            vyrn_engine::load::restore(c.clone(), &file).expect("restore")
        });
        ratio(&w, &copy);
        ratio(&rd, &copy);
        println!(
            "  snapshot write {:.2} GB/s, restore {:.2} GB/s (07 §7.5 serializer ~2 GB/s)",
            1.0 / w.p50_ns(),
            1.0 / rd.p50_ns()
        );
    }
}
