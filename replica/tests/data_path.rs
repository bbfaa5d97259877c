//! The replica's data path end to end: the real box (production tiles,
//! seeded, a clean mix) writes its frames; copy 2 of every client packet reaches the replica in
//! DATA frames from one data box; the frames go through order RX and the decoder; the data side
//! hashes every payload itself, joins each record by `(session, pkt_seq)` and `pkt_hash`, and
//! computes `data_root`; the verdict answers `verify` for ranges of headers; replay, fed from the
//! data side's store, reproduces every response the box sent, byte for byte.

mod boxrun;

use std::collections::HashMap;

use boxrun::{as_sent, finalize, first_copy_key, Net, Responses};

use vyrn_engine::workload::{Input, Mix, Workload};
use vyrn_engine::EngineConfig;
use vyrn_replica::front::data::{
    BlockPayloads, CopyMismatch, DataAlarm, DataConfig, DataOut, DataSide,
};
use vyrn_replica::front::decode::{DecodedOut, Decoder, Fault};
use vyrn_replica::front::order_rx::{OrderRx, RxConfig, RxTiming};
use vyrn_replica::front::verdict::{Anchor, Verdicts, VerifyOutcome};
use vyrn_replica::replay::Replayer;
use vyrn_seq::testkit::{SimBox, WireEvent};
use vyrn_seq::SeqConfig;
use vyrn_wire::decoder::{Awaiting, BlockRoots, Pos};
use vyrn_wire::header::BlockHeader;
use vyrn_wire::msg::ctrl::{DataFetch, HashListReq};
use vyrn_wire::msg::data::{DataFrameBuilder, DataKind};
use vyrn_wire::msg::PktKey;
use vyrn_wire::records::{PacketRecord, Step};

#[derive(Default)]
struct Asks {
    fetches: u64,
    mismatches: u64,
    alarms: Vec<DataAlarm>,
}

impl DataOut for Asks {
    fn data_fetch(&mut self, _d: u8, _f: &DataFetch) {
        self.fetches += 1;
    }
    fn peer_data_fetch(&mut self, _peer: usize, _key: PktKey, _h: u64) {
        self.fetches += 1;
    }
    fn seq_data_req(&mut self, _key: PktKey, _h: u64) {
        self.fetches += 1;
    }
    fn hash_list_req(&mut self, _r: &HashListReq) {
        self.fetches += 1;
    }
    fn copy_mismatch(&mut self, _m: &CopyMismatch, _seq_pkt: &[u8], _data_pkt: &[u8]) {
        self.mismatches += 1;
    }
    fn alarm(&mut self, a: DataAlarm) {
        self.alarms.push(a);
    }
}

/// The replica's core for this test: decoded output into the data side, the verdict and replay.
struct Core {
    data: DataSide,
    asks: Asks,
    verdicts: Verdicts,
    replay: Replayer,
    headers: Vec<BlockHeader>,
    blocks: Vec<BlockRoots>,
    faults: Vec<Fault>,
    now: u64,
}

impl DecodedOut for Core {
    fn record(&mut self, _h: u64, at: Pos, r: &PacketRecord) {
        self.data
            .on_record(at.stream, r, self.now, &mut self.asks)
            .expect("record taken");
        self.replay.on_record(r);
    }
    fn hash(&mut self, at: Pos, lane: u8, rec: &Awaiting, pkt_hash: u64) {
        let key = PktKey {
            session: rec.session,
            pkt_seq: rec.pkt_seq,
        };
        self.data
            .on_hash(at.stream, key, pkt_hash, self.now, &mut self.asks)
            .expect("hash taken");
        self.replay.on_hash(lane, rec.first_lane_seq, pkt_hash);
    }
    fn mark(&mut self, stream: u8, height: u64, _last_step: u64) {
        self.data.on_mark(stream, height).expect("mark taken");
    }
    fn step(&mut self, s: &Step, cut: &[u64], payload: &[u8]) {
        self.replay.on_step(s, cut, payload);
    }
    fn block(&mut self, b: &BlockRoots) {
        self.verdicts.on_block(b);
        self.blocks.push(*b);
    }
    fn header(&mut self, h: &BlockHeader) {
        self.verdicts.on_header(h);
        self.headers.push(*h);
    }
    fn fault(&mut self, f: &Fault) {
        self.verdicts.on_fault(f);
        self.faults.push(*f);
    }
}

#[test]
fn the_data_path_resolves_verifies_and_replays_every_block() {
    for seed in 1..=2u64 {
        let e = EngineConfig::test_home(4, 4);
        let epoch = 6u32;
        let mut home = SimBox::new(SeqConfig {
            engine: e.clone(),
            epoch,
            block_ns: 40_000,
            seq_key: [8; 32],
            voters: 4,
            rtx_ring_bytes: 8 << 20,
            tenure: vyrn_seq::shm::TenureId::FIRST,
        });
        let mut w = Workload::new(&e, seed, Mix::clean());
        let mut rx = OrderRx::new(RxConfig {
            book: e.book,
            epoch,
            tenure: 0,
            sender: 0,
            n_streams: 2,
            n_peers: 0,
            timing: RxTiming::default(),
        });
        let mut dec = Decoder::new(e.layout, 1).unwrap();
        let mut core = Core {
            data: DataSide::new(DataConfig::new(e.book, epoch as u16, 1, 0, 2)),
            asks: Asks::default(),
            verdicts: Verdicts::new(home.seq_public(), epoch, Anchor::default()),
            replay: Replayer::new(e.clone()),
            headers: Vec::new(),
            blocks: Vec::new(),
            faults: Vec::new(),
            now: 0,
        };
        for s in &e.sessions {
            core.data.set_home(s.session, 0);
        }
        let mut live: HashMap<(u32, u64), Vec<u8>> = HashMap::new();
        let mut out = Responses::default();
        let mut net = Net::default();
        let mut data_seq = 0u64;
        let tiles = home.tiles();
        let mut now = 0;
        for round in 0..4500 {
            if round < 3000 {
                if let Input::Packet { rx_ts, bytes } = w.next_input() {
                    // Copy 2 through the data box (one DATA frame each, data_seq from 1).
                    data_seq += 1;
                    let mut b =
                        DataFrameBuilder::new(DataKind::Data, e.book, epoch as u16, data_seq, 0);
                    b.push(&bytes).unwrap();
                    core.data
                        .on_data_frame(0, b.as_bytes(), now, &mut core.asks)
                        .expect("data frame");
                    home.receive(rx_ts, bytes);
                }
                now = now.max(w.now());
            } else {
                now += 1_000;
            }
            core.now = now;
            for &t in &tiles {
                home.poll(t, now);
            }
            for ev in home.drain_wire() {
                match ev {
                    WireEvent::Frame { bytes, path: 0, .. } => {
                        rx.on_frame(0, &bytes, now, &mut net);
                    }
                    WireEvent::Resp { bytes, .. } => {
                        if let Some(k) = first_copy_key(&bytes) {
                            live.entry(k).or_insert(bytes);
                        }
                    }
                    _ => {}
                }
            }
            finalize(&mut home, rx.contiguous(), now);
            for f in net.delivered.drain(..) {
                dec.on_frame(&f, now, &mut core);
            }
            core.data.tick(now, &mut core.asks);
            core.replay
                .pump(&core.data, &mut out)
                .unwrap_or_else(|e| panic!("seed {seed}: {e:?}"));
        }
        core.replay.settle(&mut out);
        assert!(core.faults.is_empty(), "seed {seed}: {:?}", core.faults);
        assert_eq!(core.asks.mismatches, 0, "seed {seed}");
        assert_eq!(
            core.asks.fetches, 0,
            "seed {seed}: every payload was pushed"
        );
        // Every completed block: resolved, and a range of them verifies (07 §6.4).
        let done: Vec<u64> = core.blocks.iter().map(|b| b.height).collect();
        assert!(done.len() > 20, "seed {seed}: {} blocks", done.len());
        for &h in &done {
            assert_eq!(
                core.data.block_payloads(h),
                BlockPayloads::Ready,
                "seed {seed} h {h}"
            );
        }
        let last = *done.last().unwrap();
        let hdr = core
            .headers
            .iter()
            .find(|x| x.height == last)
            .expect("header");
        let v = core.verdicts.verify_with(
            1,
            last,
            &hdr.header_hash(),
            now,
            &mut core.data,
            &mut core.asks,
        );
        assert_eq!(v, VerifyOutcome::True, "seed {seed}: 1..={last}");
        // Replay from the data side's store: every response the box sent, byte for byte.
        assert!(live.len() > 1000, "seed {seed}");
        let sent = as_sent(&e, &out.by_key);
        for (k, b) in &live {
            assert_eq!(sent.get(k), Some(b), "seed {seed}: response {k:?}");
        }
        assert_eq!(sent.len(), live.len(), "seed {seed}: nothing extra");
    }
}
