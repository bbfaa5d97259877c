//! Replay from the wire (07 §7.1): the real box (production tiles,
//! seeded) runs a workload with every kind of input; its frames — as written on path A — go
//! through order RX and the decoder; replay takes the decoded records joined with the payloads
//! this replica holds (each packet as the client sent it, chosen by `pkt_hash`) and the decoded
//! steps; every response replay produces must equal, byte for byte, what the box sent (the test
//! tap: the box's wire log), and every response the box sent must come out of replay.

mod boxrun;

use std::collections::HashMap;

use boxrun::{as_sent, finalize, first_copy_key, Net, Responses};

use vyrn_engine::workload::{Input, Mix, Workload};
use vyrn_engine::EngineConfig;
use vyrn_replica::front::decode::{DecodedOut, Decoder, Fault};
use vyrn_replica::front::order_rx::{OrderRx, RxConfig, RxTiming};
use vyrn_replica::replay::{PayloadSource, Replayer};
use vyrn_seq::testkit::{SimBox, WireEvent};
use vyrn_seq::SeqConfig;
use vyrn_wire::decoder::{Awaiting, Pos};
use vyrn_wire::records::{PacketRecord, Step};

/// The payloads this replica holds: every copy of each (session, pkt_seq), as sent.
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
    faults: Vec<Fault>,
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
    fn fault(&mut self, f: &Fault) {
        self.faults.push(*f);
    }
}

/// The real box (production tiles, seeded) under a workload with every kind of input, path A
/// read through order RX: each round, the frames it delivers in order; the payloads as the
/// data tier stores them; the first copy of every response the box sent (the test tap).
struct Rig {
    home: SimBox,
    w: Workload,
    rx: OrderRx,
    store: Store,
    live: HashMap<(u32, u64), Vec<u8>>,
    net: Net,
    tiles: Vec<vyrn_seq::testkit::Tile>,
    now: u64,
}

impl Rig {
    fn new(e: &EngineConfig, seed: u64) -> Rig {
        let home = SimBox::new(SeqConfig {
            engine: e.clone(),
            epoch: 2,
            block_ns: 40_000,
            seq_key: [5; 32],
            voters: 4,
            rtx_ring_bytes: 8 << 20,
            tenure: vyrn_seq::shm::TenureId::FIRST,
        });
        let tiles = home.tiles();
        Rig {
            home,
            w: Workload::new(e, seed, Mix::everything()),
            rx: OrderRx::new(RxConfig {
                book: e.book,
                epoch: 2,
                tenure: 0,
                sender: 0,
                n_streams: 2,
                n_peers: 0,
                timing: RxTiming::default(),
            }),
            store: Store::default(),
            live: HashMap::new(),
            net: Net::default(),
            tiles,
            now: 0,
        }
    }

    /// One round (input while `load`, else time passing): the frames delivered in order.
    fn round(&mut self, load: bool) -> Vec<Vec<u8>> {
        if load {
            if let Input::Packet { rx_ts, bytes } = self.w.next_input() {
                // Copy 2: what the data tier stores (any packet long enough to name a key).
                if bytes.len() >= 16 {
                    let s = u32::from_le_bytes(bytes[4..8].try_into().unwrap());
                    let q = u32::from_le_bytes(bytes[8..12].try_into().unwrap());
                    self.store.0.entry((s, q)).or_default().push(bytes.clone());
                }
                self.home.receive(rx_ts, bytes);
            }
            self.now = self.now.max(self.w.now());
        } else {
            self.now += 1_000;
        }
        for &t in &self.tiles {
            self.home.poll(t, self.now);
        }
        for ev in self.home.drain_wire() {
            match ev {
                WireEvent::Frame { bytes, path: 0, .. } => {
                    self.rx.on_frame(0, &bytes, self.now, &mut self.net);
                }
                // First copies only (a lane's resends carry flags.resend).
                WireEvent::Resp { bytes, .. } => {
                    if let Some(k) = first_copy_key(&bytes) {
                        self.live.entry(k).or_insert(bytes);
                    }
                }
                _ => {}
            }
        }
        finalize(&mut self.home, self.rx.contiguous(), self.now);
        std::mem::take(&mut self.net.delivered)
    }
}

#[test]
fn replay_from_the_wire_matches_what_the_box_sent_byte_for_byte() {
    for seed in 1..=3u64 {
        let e = EngineConfig::test_home(4, 4);
        let mut rig = Rig::new(&e, seed);
        let mut dec = Decoder::new(e.layout, 1).unwrap();
        let mut replay = Replayer::new(e.clone());
        let mut out = Responses::default();
        let mut faults = Vec::new();
        for round in 0..5000 {
            let frames = rig.round(round < 3500);
            let mut tap = Tap {
                replay: &mut replay,
                faults: Vec::new(),
            };
            for f in frames {
                dec.on_frame(&f, rig.now, &mut tap);
            }
            faults.extend(tap.faults);
            replay
                .pump(&rig.store, &mut out)
                .unwrap_or_else(|e| panic!("seed {seed}: {e:?}"));
        }
        let live = rig.live;
        // The end of the input: the lanes apply the last steps' events (their answers).
        replay.settle(&mut out);
        assert!(faults.is_empty(), "seed {seed}: {faults:?}");
        let (decoded, replayed) = replay.lag();
        assert_eq!(decoded, replayed, "seed {seed}: replay caught up");
        assert!(decoded > 1000, "seed {seed}: {decoded} steps");
        // Every response the box sent came out of replay, byte for byte.
        assert!(live.len() > 1000, "seed {seed}: {} responses", live.len());
        let mut same = 0;
        let sent = as_sent(&e, &out.by_key);
        for (k, b) in &live {
            let r = sent
                .get(k)
                .unwrap_or_else(|| panic!("seed {seed}: {k:?} not replayed"));
            assert_eq!(r, b, "seed {seed}: response {k:?} differs");
            same += 1;
        }
        // And replay produced nothing the box did not send (but what the box still holds back
        // for a frame not yet written, none here: the run ends idle).
        let extra: Vec<_> = out
            .by_key
            .keys()
            .filter(|k| !live.contains_key(k))
            .collect();
        assert!(
            extra.is_empty(),
            "seed {seed}: replay-only responses {extra:?}"
        );
        assert!(out.events > 100, "seed {seed}: {} lane events", out.events);
        println!("seed {seed}: {same} responses identical, {decoded} steps");
    }
}

/// Feeds three replayers at once, with the decoder's closed blocks (for the root clock).
struct Tap2<'a> {
    a: &'a mut Replayer,
    b: &'a mut Replayer,
    c: &'a mut Replayer,
    headers: u64,
}

impl DecodedOut for Tap2<'_> {
    fn record(&mut self, _h: u64, _at: Pos, r: &PacketRecord) {
        for p in [&mut *self.a, &mut *self.b, &mut *self.c] {
            p.on_record(r);
        }
    }
    fn hash(&mut self, _at: Pos, lane: u8, rec: &Awaiting, pkt_hash: u64) {
        for p in [&mut *self.a, &mut *self.b, &mut *self.c] {
            p.on_hash(lane, rec.first_lane_seq, pkt_hash);
        }
    }
    fn step(&mut self, s: &Step, cut: &[u64], payload: &[u8]) {
        for p in [&mut *self.a, &mut *self.b, &mut *self.c] {
            p.on_step(s, cut, payload);
        }
    }
    fn block(&mut self, b: &vyrn_wire::decoder::BlockRoots) {
        for p in [&mut *self.a, &mut *self.b, &mut *self.c] {
            p.on_block(b.height, b.last_step);
        }
    }
    fn header(&mut self, _h: &vyrn_wire::header::BlockHeader) {
        self.headers += 1;
    }
}

/// 07 §7.4: `R(h)` is the state after block h — taken at the same point whatever the pace of
/// replay. Three replays of one wire — pumped every round (running through each block as its
/// steps come), every 37 rounds (far past root heights in one pump), and once at the very end
/// (every block's end known before anything runs: exact by construction) — take the same roots
/// at every root height; roots move with the state; and stopping at root heights changes none
/// of replay's answers.
#[test]
fn state_roots_are_taken_at_block_ends_whatever_the_pace_of_replay() {
    const RB: u64 = 8;
    let e = EngineConfig::test_home(4, 4);
    let mut rig = Rig::new(&e, 9);
    let mut dec = Decoder::new(e.layout, 1).unwrap();
    let mut fast = Replayer::new(e.clone());
    let mut slow = Replayer::new(e.clone());
    let mut last = Replayer::new(e.clone());
    fast.set_roots(RB, 0, 0);
    slow.set_roots(RB, 0, 0);
    last.set_roots(RB, 0, 0);
    let (mut out_fast, mut out_slow) = (Responses::default(), Responses::default());
    let mut out_last = Responses::default();
    let mut headers = 0;
    for round in 0..4000 {
        let frames = rig.round(round < 3000);
        let mut tap = Tap2 {
            a: &mut fast,
            b: &mut slow,
            c: &mut last,
            headers: 0,
        };
        for f in frames {
            dec.on_frame(&f, rig.now, &mut tap);
        }
        headers += tap.headers;
        fast.pump(&rig.store, &mut out_fast).unwrap();
        if round % 37 == 0 {
            slow.pump(&rig.store, &mut out_slow).unwrap();
        }
    }
    let (store, live) = (rig.store, rig.live);
    slow.pump(&store, &mut out_slow).unwrap();
    last.pump(&store, &mut out_last).unwrap();
    fast.settle(&mut out_fast);
    slow.settle(&mut out_slow);
    last.settle(&mut out_last);
    assert!(headers > 4 * RB, "{headers} headers");
    let roots: Vec<(u64, [u8; 32])> = (0..headers + 1)
        .filter(|h| (h + 1) % RB == 0)
        .filter_map(|h| Some((h, fast.root(h)?)))
        .collect();
    assert!(roots.len() >= 4, "roots taken at {:?}", roots);
    for &(h, r) in &roots {
        assert_eq!(
            slow.root(h),
            Some(r),
            "R({h}) depends on the pace of replay"
        );
        assert_eq!(
            last.root(h),
            Some(r),
            "R({h}) differs from the replay that knew every block's end first"
        );
    }
    // Not a root height: none taken.
    assert_eq!(fast.root(RB), None);
    // The roots follow the state: a busy book changes it between root heights.
    let distinct: std::collections::BTreeSet<_> = roots.iter().map(|r| r.1).collect();
    assert!(distinct.len() >= 2, "{} distinct roots", distinct.len());
    // Stopping at root heights changed no answer.
    assert!(live.len() > 500);
    let (fast_sent, slow_sent) = (as_sent(&e, &out_fast.by_key), as_sent(&e, &out_slow.by_key));
    for (k, b) in &live {
        assert_eq!(fast_sent.get(k), Some(b), "{k:?}");
        assert_eq!(slow_sent.get(k), Some(b), "{k:?}");
    }
}
