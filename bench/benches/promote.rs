//! B-REP-8 (07 §9.5, §15): promotion, in process — the standby's replay handed to a box of the
//! next tenure. Timed per promotion:
//!
//! - **promote**: `Replayer::promote` (every event applied, the engine taken),
//!   `Takeover::new` and `tiles::build_takeover` — every tile and ring of the box built from the
//!   engine, the gate words, cut, BBO core, control and the hasher's chain set at the seal, the
//!   trailing ops queued, and the TenureStart and SessionBinds written on both substreams;
//! - baseline, same run: **fresh box** — `tiles::build` of a box at an epoch's start (the same
//!   tiles, rings and first frames, no state to take over).
//!
//! The engine is a dev home (4 lanes, 64 sessions) after a seeded workload with every kind of
//! input; each round replays its captured frames into a fresh replay first (not timed). Budget
//! (07 §9.7 stage 9): ≤ 3 ms for "re-pin, keys, filters, TenureStart"; not in this figure:
//! starting and pinning the tile threads, loading the keys from the secret store and arming NIC
//! flow filters (the standby process does none of these yet).

use std::collections::HashMap;

use vyrn_bench::{enabled, measure_with_setup, quick, ratio, rounds};
use vyrn_engine::home::NullEngineSink;
use vyrn_engine::workload::{Input, Mix, Workload};
use vyrn_engine::{EngineConfig, Gate};
use vyrn_replica::front::decode::{DecodedOut, Decoder};
use vyrn_replica::front::failover::seal::{seal_header, SignedTip};
use vyrn_replica::replay::{PayloadSource, Replayer};
use vyrn_seq::shm::TenureId;
use vyrn_seq::takeover::Takeover;
use vyrn_seq::testkit::{SimBox, WireEvent};
use vyrn_seq::tiles::{self, Wire, WireFor};
use vyrn_seq::SeqConfig;
use vyrn_wire::decoder::{Awaiting, Pos};
use vyrn_wire::header::BlockHeader;
use vyrn_wire::records::{PacketRecord, Step};

/// Every copy of each (session, pkt_seq), as sent.
#[derive(Default)]
struct Store(HashMap<(u32, u32), Vec<Vec<u8>>>);

impl PayloadSource for Store {
    fn payload(&self, session: u32, pkt_seq: u32, pkt_hash: u64) -> Option<&[u8]> {
        self.0.get(&(session, pkt_seq))?.iter().find_map(|p| {
            (vyrn_wire::msg::client::pkt_hash(p).ok() == Some(pkt_hash)).then_some(p.as_slice())
        })
    }
}

struct Tap<'a> {
    replay: &'a mut Replayer,
    tip: &'a mut Option<BlockHeader>,
}

impl DecodedOut for Tap<'_> {
    fn record(&mut self, _h: u64, _at: Pos, r: &PacketRecord) {
        self.replay.on_record(r);
    }
    fn hash(&mut self, _at: Pos, lane: u8, rec: &Awaiting, pkt_hash: u64) {
        self.replay.on_hash(lane, rec.first_lane_seq, pkt_hash);
    }
    fn step(&mut self, s: &Step, cut: &[u64], payload: &[u8]) {
        self.replay.on_step(s, cut, payload);
    }
    fn header(&mut self, h: &BlockHeader) {
        if self.tip.as_ref().is_none_or(|t| h.height > t.height) {
            *self.tip = Some(*h);
        }
    }
}

/// Frames and responses go nowhere.
struct Null;
impl Wire for Null {
    fn resp(&mut self, _s: u32, _g: Gate, _b: &[u8]) {}
    fn notice(&mut self, _s: u32, _b: &[u8]) {}
}

fn seq_config(e: &EngineConfig, tenure: TenureId) -> SeqConfig {
    SeqConfig {
        engine: e.clone(),
        epoch: 1,
        block_ns: 40_000,
        seq_key: [7; 32],
        voters: 4,
        rtx_ring_bytes: 8 << 20,
        tenure,
    }
}

/// Tenure 0 under the workload, until it went quiet with every header in: its frames in order
/// (path A), the data tier's copies, and the seal over the open block.
fn capture(e: &EngineConfig, packets: usize) -> (Vec<Vec<u8>>, Store, BlockHeader) {
    let mut home = SimBox::new(seq_config(e, TenureId::FIRST));
    let tiles = home.tiles();
    let mut w = Workload::new(e, 11, Mix::everything());
    let mut store = Store::default();
    let mut frames = Vec::new();
    let mut dec = Decoder::new(e.layout, 1).expect("layout");
    let mut replay = Replayer::new(e.clone());
    let mut tip = None;
    let mut now = 0;
    for round in 0.. {
        if round < packets {
            if let Input::Packet { rx_ts, bytes } = w.next_input() {
                if bytes.len() >= 16 {
                    let s = u32::from_le_bytes(bytes[4..8].try_into().expect("4"));
                    let q = u32::from_le_bytes(bytes[8..12].try_into().expect("4"));
                    store.0.entry((s, q)).or_default().push(bytes.clone());
                }
                home.receive(rx_ts, bytes);
            }
            now = w.now().max(now);
        } else {
            now += 1_000;
        }
        for &t in &tiles {
            home.poll(t, now);
        }
        let closed = home.closed_height();
        for ev in home.drain_wire() {
            if let WireEvent::Frame { bytes, path: 0, .. } = ev {
                dec.on_frame(
                    &bytes,
                    now,
                    &mut Tap {
                        replay: &mut replay,
                        tip: &mut tip,
                    },
                );
                frames.push(bytes);
            }
        }
        // A stand-in finalizer: every voter votes every closed block.
        for v in 0..4 {
            home.on_ack(v, [u64::MAX >> 1; 2], now);
            home.on_vote(v, closed);
        }
        let open = dec.open_height(0);
        if round > packets + 1_000 && tip.as_ref().is_some_and(|t| t.height + 1 == open) {
            break;
        }
    }
    let tip = tip.expect("headers");
    let ob = dec.seal_block(tip.height, (0, 0)).expect("the tail");
    let signed = SignedTip {
        height: tip.height,
        hash: tip.header_hash(),
        last_step: tip.last_step,
    };
    let seal = seal_header(1, e.book, &signed, &ob, [0; 32]).expect("seal header");
    (frames, store, seal)
}

/// A fresh replay of the captured frames, at the seal.
fn replayed(e: &EngineConfig, frames: &[Vec<u8>], store: &Store) -> Replayer {
    let mut dec = Decoder::new(e.layout, 1).expect("layout");
    let mut replay = Replayer::new(e.clone());
    let mut tip = None;
    for f in frames {
        dec.on_frame(
            f,
            0,
            &mut Tap {
                replay: &mut replay,
                tip: &mut tip,
            },
        );
    }
    replay.resolve_unhashed(store);
    replay.pump(store, &mut NullEngineSink).expect("replay");
    replay
}

fn main() {
    if !enabled("promote") {
        return;
    }
    let e = EngineConfig::test_home(4, 16);
    let packets = if quick() { 2_000 } else { 30_000 };
    let (frames, store, seal) = capture(&e, packets);
    let n = rounds(30);
    println!(
        "B-REP-8 promotion: dev home ({} lanes, {} sessions), {} frames replayed, seal at height {} step {}",
        e.layout.n_lanes,
        e.sessions.len(),
        frames.len(),
        seal.height,
        seal.last_step
    );
    let t1 = TenureId {
        tenure: 1,
        sender: 1,
    };
    let fresh = measure_with_setup(
        "fresh box: tiles::build + first frames",
        n,
        1,
        || (),
        |()| {
            tiles::build(
                &seq_config(&e, TenureId::FIRST),
                None,
                |_w: WireFor| Box::new(Null) as Box<dyn Wire>,
                |_| None,
                None,
            )
        },
    );
    let promote = measure_with_setup(
        "promote: replay handed over + box built",
        n,
        1,
        || replayed(&e, &frames, &store),
        |r: Replayer| {
            let h = r.promote(&mut NullEngineSink).expect("at the seal");
            let t = Takeover::new(&e, h, &seal).expect("takeover");
            tiles::build_takeover(
                &seq_config(&e, t1),
                t,
                None,
                None,
                |_w: WireFor| Box::new(Null) as Box<dyn Wire>,
                |_| None,
                None,
            )
        },
    );
    // A warm standby built its box's memory when it started (`tiles::Reserve`).
    let warm = measure_with_setup(
        "promote, warm: the box's memory built at start",
        n,
        1,
        || {
            (
                replayed(&e, &frames, &store),
                tiles::Reserve::new(&seq_config(&e, t1)),
            )
        },
        |(r, reserve): (Replayer, tiles::Reserve)| {
            let h = r.promote(&mut NullEngineSink).expect("at the seal");
            let t = Takeover::new(&e, h, &seal).expect("takeover");
            tiles::build_takeover(
                &seq_config(&e, t1),
                t,
                Some(reserve),
                None,
                |_w: WireFor| Box::new(Null) as Box<dyn Wire>,
                |_| None,
                None,
            )
        },
    );
    ratio(&promote, &fresh);
    ratio(&warm, &fresh);
    for (what, s) in [("cold", &promote), ("warm", &warm)] {
        println!(
            "  promotion ({what}) p50 {:.3} ms against B-REP-8's 3 ms budget ({:.1}% of it; \
             thread start, pinning, keys and NIC filters not included)",
            s.p50_ns() / 1e6,
            s.p50_ns() / 3e6 * 100.0
        );
    }
}
