//! T-REP-1 (07 §15): seeded interleavings of every tile of a box — a lane of each half, the cut
//! core, the BBO core, stream-A, stream-B and the TX tile — on a 2-lane workload whose steps
//! include one that spans both halves, checking INV-REP-1, INV-REP-2 and INV-REP-11 after every
//! poll; and the same checks failing when the gate is removed. Plus: the replica decoder of
//! `wire` decodes everything the box writes.

use vyrn_engine::workload::{Input, Mix, Workload};
use vyrn_engine::EngineConfig;
use vyrn_seq::check::Checker;
use vyrn_seq::{GateMode, SeqConfig, SeqHome, Tile, WireEvent};
use vyrn_wire::corpus::Rng;
use vyrn_wire::decoder::{DecState, Pos, Sink};
use vyrn_wire::msg::client::{Msg, MsgType, RequestPacket, Side};
use vyrn_wire::records::{PacketRecord, Step};

fn cfg() -> SeqConfig {
    // Lane 0 is half A, lane 1 half B; one session each (sessions 1 and 10001).
    SeqConfig {
        engine: EngineConfig::test_home(2, 1),
        epoch: 7,
        // Blocks close every 30 µs of the run's clock, so marks interleave with the steps.
        block_ns: 30_000,
        seq_key: [7; 32],
        voters: 4,
        rtx_ring_bytes: 8 << 20,
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

fn gtc(side: Side, tick: i32, qty: u32, tag: u32) -> Msg {
    Msg {
        kind: MsgType::NewGtc,
        side,
        tick,
        qty,
        client_tag: tag,
    }
}

/// The T-REP-1 workload: a resting sell on lane 0 (half A), a crossing buy on lane 1 (half B) —
/// the Cross step spans both halves, since both half-cuts move — and a lane-local reject.
fn workload(c: &EngineConfig) -> Vec<Vec<u8>> {
    vec![
        pkt(c, 1, 1, &[gtc(Side::Sell, 100, 5, 1)]),
        pkt(c, 10001, 1, &[gtc(Side::Buy, 100, 3, 2)]),
        pkt(c, 1, 2, &[gtc(Side::Sell, 100, 99_999, 3)]), // RISK_QTY, answered by the lane
    ]
}

/// Run one seeded interleaving; returns the first violation, if any, and the number of polls.
fn run(seed: u64, mode: GateMode) -> (Result<(), String>, usize, SeqHome) {
    let c = cfg();
    let mut home = SeqHome::new(c.clone());
    home.set_gate_mode(mode);
    for (i, p) in workload(&c.engine).into_iter().enumerate() {
        home.receive(100 + i as u64, p);
    }
    let tiles = home.tiles();
    let mut rng = Rng::new(seed);
    let mut chk = Checker::default();
    let mut now = 1_000;
    for i in 0..4000 {
        let t = tiles[rng.below(tiles.len() as u64) as usize];
        // Time moves slowly, so the 1 µs age rule fires only now and then.
        now += rng.below(40);
        home.poll(t, now);
        if let Err(e) = chk.check(&home) {
            return (Err(e), i, home);
        }
    }
    // Drain: let everything age out and go.
    home.settle(now + 10_000, 100);
    let r = chk.check(&home);
    (r, 4000, home)
}

#[test]
fn t_rep_1_gates_hold_under_every_seeded_interleaving() {
    let mut spanning = 0;
    for seed in 0..2000 {
        let (r, _, home) = run(seed, GateMode::Correct);
        r.unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        // The workload did what it claims: three answers out, a Cross that spans both halves.
        let resps = home
            .sh
            .wire
            .iter()
            .filter(|e| matches!(e, WireEvent::Resp { .. }))
            .count();
        assert!(resps >= 4, "seed {seed}: only {resps} responses");
        let frames_both: usize = (0..2).map(|h| home.frames(h).len()).min().unwrap();
        assert!(frames_both >= 3, "seed {seed}");
        if home.sh.wire.iter().any(|e| match e {
            WireEvent::Frame { info, .. } => info.stream == 1 && !info.steps.is_empty(),
            _ => false,
        }) && home.sh.wire.iter().any(|e| match e {
            WireEvent::Frame { info, .. } => info.stream == 0 && !info.steps.is_empty(),
            _ => false,
        }) {
            spanning += 1;
        }
    }
    assert_eq!(
        spanning, 2000,
        "every run carries step records on both substreams"
    );
}

#[test]
fn t_rep_1_checks_fail_when_the_gate_is_removed() {
    let mut caught = 0;
    for seed in 0..300 {
        let (r, _, _) = run(seed, GateMode::ReleaseOnAppend);
        if r.is_err() {
            caught += 1;
        }
    }
    eprintln!("broken gate caught in {caught} of 300 interleavings");
    assert!(
        caught > 30,
        "the broken gate was caught in only {caught} of 300 interleavings"
    );
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
        };
        let mut home = SeqHome::new(c);
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
        for ev in &home.sh.wire {
            if let WireEvent::Frame { bytes, .. } = ev {
                dec.on_frame(bytes, now, &mut out)
                    .unwrap_or_else(|err| panic!("seed {seed}: {err:?}"));
            }
        }
        let logged: u64 = home.sh.lane_counter.iter().sum();
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
            home.sh.step_done,
            "seed {seed}: every step decoded"
        );
        for (i, s) in out.steps.iter().enumerate() {
            assert_eq!(s.step, i as u64 + 1);
        }
        assert_eq!(home.sh.errors, 0);
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
        let _ = Tile::Tx;
    }
}
