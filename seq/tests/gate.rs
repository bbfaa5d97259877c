//! T-REP-1 (07 §15): seeded interleavings of every production tile of a box — lanes of both
//! halves, the cut core, the BBO core, stream-A, stream-B, the TX tile, the order hasher and
//! control — driven by the seeded scheduler (`runner::Seeded` through `testkit::SimBox`), on a
//! workload of hundreds of packets per run (resting and crossing orders on both halves, so steps
//! span both substreams; cancels, IOCs, resends, gaps, bad packets; blocks closing; finality-gate
//! halts and resumes), checking INV-REP-1, INV-REP-2 and INV-REP-11 after every poll; and the
//! same checks catching a removed gate in every run built to expose it. Plus: the replica
//! decoder of `wire` decodes everything the box writes.

use vyrn_engine::workload::{Input, Mix, Workload};
use vyrn_engine::EngineConfig;
use vyrn_seq::testkit::check::Checker;
use vyrn_seq::testkit::{frames_in, SimBox, Tile, WireEvent};
use vyrn_seq::{GateMode, SeqConfig};
use vyrn_wire::corpus::Rng;
use vyrn_wire::decoder::{DecState, Pos, Sink};
use vyrn_wire::msg::client::{Msg, MsgType, RequestPacket, Side};
use vyrn_wire::records::{PacketRecord, Step};

fn cfg(lanes: u8) -> SeqConfig {
    SeqConfig {
        engine: EngineConfig::test_home(lanes, 3),
        epoch: 7,
        // Blocks close every 4 µs of the run's clock, so marks interleave with the steps and
        // the finality gate halts the book when no votes come.
        block_ns: 4_000,
        seq_key: [7; 32],
        voters: 4,
        rtx_ring_bytes: 8 << 20,
        tenure: vyrn_seq::shm::TenureId::FIRST,
    }
}

fn pkt(c: &EngineConfig, session: u32, pkt_seq: u32, msgs: &[Msg]) -> Vec<u8> {
    let k = c
        .sessions
        .iter()
        .find(|s| s.session == session)
        .unwrap()
        .k_seq;
    RequestPacket {
        book: c.book,
        resend: false,
        session,
        pkt_seq,
        msgs: msgs.to_vec(),
    }
    .to_bytes(&k)
    .unwrap()
}

/// What one run did (so a test can say its workload is what it claims).
#[derive(Debug, Default)]
struct RunStats {
    packets: usize,
    polls: usize,
    resps: usize,
    /// Responses to steps whose records span both substreams.
    spanning: usize,
    halts: u64,
    resumes: u64,
}

/// The packets after the T-REP-1 mix of run `seed`: a last sell on lane 0 (half A) and a buy
/// crossing it on the last lane (half B), on sessions the workload never uses — the Cross spans
/// both halves and its fill is the last response of the run.
fn tail(e: &EngineConfig) -> Vec<Vec<u8>> {
    let a = e.sessions.iter().find(|s| s.lane == 0).unwrap();
    let last = e.layout.n_lanes - 1;
    let b = e.sessions.iter().rev().find(|s| s.lane == last).unwrap();
    let gtc = |side, tag| Msg {
        kind: MsgType::NewGtc,
        side,
        tick: 1,
        qty: 1,
        client_tag: tag,
    };
    vec![
        pkt(e, a.session, 1_000_000, &[gtc(Side::Sell, 900_001)]),
        pkt(e, b.session, 1_000_000, &[gtc(Side::Buy, 900_002)]),
    ]
}

/// One seeded interleaving of `n_pkts` workload packets. With `frozen`, the clock stops before
/// the tail, so no frame ever ages out after it: a gate that releases on append is then exposed
/// by the tail's responses. The first violation, if any.
fn run(seed: u64, mode: GateMode, n_pkts: usize, frozen: bool) -> (Result<(), String>, RunStats) {
    let c = cfg(4);
    let e = c.engine.clone();
    // Self-fence off (no acks here): this test is about the gate, not the fence.
    let mut home = SimBox::build(c, Some(1 << 40), seed);
    home.set_gate_mode(mode);
    let mut w = Workload::new(&e, seed, Mix::everything());
    let mut rng = Rng::new(seed ^ 0x5eed);
    let mut chk = Checker::default();
    let mut st = RunStats::default();
    let mut now = 1_000u64;
    let tiles = home.tiles();
    let mut fed = 0;
    let mut voting;
    let step = |home: &mut SimBox, chk: &mut Checker, now: u64, t: Tile, st: &mut RunStats| {
        home.poll(t, now);
        st.polls += 1;
        chk.check(home)
    };
    while fed < n_pkts || home.rx_backlog() > 0 {
        // Packets arrive in bursts between runs of polls.
        for _ in 0..rng.below(4) {
            if fed >= n_pkts {
                break;
            }
            if let Input::Packet { bytes, .. } = w.next_input() {
                if home.receive(now, bytes) {
                    st.packets += 1;
                }
            }
            fed += 1;
        }
        for _ in 0..1 + rng.below(40) {
            let t = tiles[rng.below(tiles.len() as u64) as usize];
            now += rng.below(60);
            if let Err(e) = step(&mut home, &mut chk, now, t, &mut st) {
                return (Err(e), st);
            }
        }
        // Voters come and go: without votes the finality gate halts the book, with them it
        // resumes (logged Control steps, both substreams).
        voting = (fed * 3 / n_pkts.max(1)) % 2 == 1;
        if voting {
            let closed = home.closed_height();
            let fin = home.watermarks().1;
            for h in fin + 1..=closed {
                for v in 0..3 {
                    home.on_vote(v, h);
                }
            }
        }
    }
    for p in tail(&e) {
        home.receive(now, p);
    }
    if !frozen {
        now += 10_000;
    }
    for _ in 0..20_000 {
        let t = tiles[rng.below(tiles.len() as u64) as usize];
        if let Err(e) = step(&mut home, &mut chk, now, t, &mut st) {
            return (Err(e), st);
        }
    }
    let (_, _, cc) = home.watermarks();
    st.halts = cc.gate_halts;
    st.resumes = cc.gate_resumes;
    for ev in home.log().iter() {
        if let WireEvent::Resp {
            gate: vyrn_engine::Gate::Step { need_a, need_b, .. },
            ..
        } = ev
        {
            st.resps += 1;
            if *need_a > 0 && need_a == need_b {
                st.spanning += 1;
            }
        } else if let WireEvent::Resp { .. } = ev {
            st.resps += 1;
        }
    }
    (chk.check(&home), st)
}

#[test]
fn t_rep_1_gates_hold_under_every_seeded_interleaving() {
    const RUNS: u64 = 200;
    let mut halted = 0;
    for seed in 0..RUNS {
        let (r, st) = run(seed, GateMode::Correct, 300, false);
        r.unwrap_or_else(|e| panic!("seed {seed}: {e} ({st:?})"));
        // The workload is what it claims: hundreds of packets, hundreds of answers, steps
        // that span both substreams.
        assert!(st.packets >= 250, "seed {seed}: {st:?}");
        assert!(st.resps >= 200, "seed {seed}: {st:?}");
        assert!(
            st.spanning >= 1,
            "seed {seed}: no spanning step answered ({st:?})"
        );
        if st.halts >= 1 && st.resumes >= 1 {
            halted += 1;
        }
    }
    // Voters are away for the first and last third of the packets: in (nearly) every run the
    // finality gate halts the book and resumes it when they come back (logged Control steps).
    assert!(
        halted >= RUNS * 9 / 10,
        "halted and resumed in {halted} of {RUNS} runs"
    );
}

/// The broken gate (released on append, the frame written when it ages out) is caught in every
/// run designed to expose it: the clock stops before a last crossing pair, so that pair's
/// responses leave while its records sit in an open frame.
#[test]
fn t_rep_1_catches_the_removed_gate_in_every_exposing_run() {
    const RUNS: u64 = 40;
    let mut caught = 0;
    for seed in 0..RUNS {
        let (r, st) = run(seed, GateMode::ReleaseOnAppend, 200, true);
        if r.is_err() {
            caught += 1;
        } else {
            eprintln!("seed {seed}: broken gate not caught ({st:?})");
        }
    }
    assert_eq!(
        caught, RUNS,
        "the broken gate was caught in {caught} of {RUNS} runs"
    );
    // And the same frozen-clock runs pass with the gate in place.
    for seed in 0..8 {
        let (r, _) = run(seed, GateMode::Correct, 200, true);
        r.unwrap_or_else(|e| panic!("seed {seed}: {e}"));
    }
}

#[derive(Default)]
struct Collect {
    pkts: Vec<PacketRecord>,
    steps: Vec<Step>,
    hashes: usize,
    blocks: Vec<vyrn_wire::decoder::BlockRoots>,
    headers: Vec<vyrn_wire::header::BlockHeader>,
}

impl Sink for Collect {
    fn pkt(&mut self, _: Pos, r: &PacketRecord) {
        self.pkts.push(*r);
    }
    fn step(&mut self, s: &Step, _: &[u64], _: &[u8]) {
        self.steps.push(*s);
    }
    fn hash(&mut self, _: Pos, _: u8, _: &vyrn_wire::decoder::Awaiting, _: u64) {
        self.hashes += 1;
    }
    fn block(&mut self, b: &vyrn_wire::decoder::BlockRoots) {
        self.blocks.push(*b);
    }
    fn header(&mut self, _: Pos, h: &vyrn_wire::header::BlockHeader) {
        self.headers.push(*h);
    }
}

#[test]
fn the_replica_decoder_decodes_everything_the_box_writes() {
    for seed in 0..20u64 {
        let e = EngineConfig::test_home(2 + (seed % 4) as u8, 4);
        e.validate().unwrap();
        let c = SeqConfig {
            engine: e.clone(),
            epoch: 3,
            block_ns: 50_000,
            seq_key: [seed as u8; 32],
            voters: 4,
            rtx_ring_bytes: 8 << 20,
            tenure: vyrn_seq::shm::TenureId::FIRST,
        };
        let mut home = SimBox::new(c);
        let mut w = Workload::new(&e, seed, Mix::everything());
        let mut rng = Rng::new(seed);
        let tiles = home.tiles();
        let mut now = 0;
        for _ in 0..400 {
            if let Input::Packet { rx_ts, bytes } = w.next_input() {
                home.receive(rx_ts, bytes);
            }
            now = w.now();
            for _ in 0..rng.below(12) {
                let t = tiles[rng.below(tiles.len() as u64) as usize];
                home.poll(t, now);
            }
        }
        home.settle(now + 1_000_000, 10_000);
        assert_eq!(home.rx_backlog(), 0);
        let mut dec = DecState::new(e.layout).unwrap();
        let mut out = Collect::default();
        // Interleave the two substreams as they were written.
        for bytes in frames_in(&home.log()) {
            dec.on_frame(&bytes, now, &mut out)
                .unwrap_or_else(|err| panic!("seed {seed}: {err:?}"));
        }
        let logged: u64 = (0..e.layout.n_lanes as usize)
            .map(|l| home.words().lane_counter(l))
            .sum();
        let numbered: u64 = out.pkts.iter().map(|p| p.count as u64).sum();
        assert!(logged > 100, "seed {seed}: only {logged} LaneSeqs");
        assert_eq!(numbered, logged, "seed {seed}: every LaneSeq decoded");
        assert_eq!(
            out.hashes,
            out.pkts.len(),
            "seed {seed}: every record got its pkt_hash"
        );
        assert_eq!(
            out.steps.len() as u64,
            home.words().step_done(),
            "seed {seed}: every step decoded"
        );
        for (i, s) in out.steps.iter().enumerate() {
            assert_eq!(s.step, i as u64 + 1);
        }
        assert_eq!(
            home.words()
                .errors
                .load(std::sync::atomic::Ordering::Relaxed),
            0
        );
        // Blocks: every HEADER's order_root is the one the decoder recomputed, its seq_sig
        // verifies, and the headers chain.
        assert!(
            out.headers.len() >= 3,
            "seed {seed}: {} headers",
            out.headers.len()
        );
        let key = home.seq_public();
        let mut prev = [0u8; 32];
        for (i, h) in out.headers.iter().enumerate() {
            assert_eq!(h.height, i as u64 + 1, "seed {seed}");
            let b = out
                .blocks
                .iter()
                .find(|b| b.height == h.height)
                .expect("block decoded");
            assert_eq!(
                b.order_root, h.order_root,
                "seed {seed}: height {}",
                h.height
            );
            assert_eq!(b.last_step, h.last_step, "seed {seed}");
            assert!(h.verify(&key), "seed {seed}: seq_sig");
            assert_eq!(h.prev, prev, "seed {seed}: chain");
            prev = h.header_hash();
        }
    }
}
