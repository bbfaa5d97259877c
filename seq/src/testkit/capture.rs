//! A recorded run of the real box for replica-side tests and benches: a seeded workload through
//! [`SimBox`] (production tiles, seeded scheduler), every frame of path A in order, copy 2 of
//! every packet in its own DATA frame (as one data box would push it), and the packets as
//! received. A stand-in finalizer acks every frame and votes every closed block, so the box
//! never halts or fences.

use super::{SimBox, WireEvent};
use crate::shm::SeqConfig;
use vyrn_engine::workload::{Input, Mix, Workload};
use vyrn_engine::EngineConfig;
use vyrn_wire::msg::data::{DataFrameBuilder, DataKind};

/// What [`capture`] recorded.
#[derive(Debug, Clone)]
pub struct Capture {
    /// The sequencer's verifying key (the headers' `seq_sig`).
    pub seq_key: ed25519_dalek::VerifyingKey,
    /// The packets as the box received them: (rx_ts, bytes).
    pub packets: Vec<(u64, Vec<u8>)>,
    /// Path A's frames, in the order written.
    pub frames: Vec<Vec<u8>>,
    /// One DATA frame per packet, `data_seq` from 1.
    pub data: Vec<Vec<u8>>,
    /// Messages in the packets.
    pub msgs: u64,
}

/// Run `n` packets of `mix` (workload seed `seed`) through a box of `engine` in `epoch` with
/// `block_ns` blocks, then 2,000 idle polls 1 µs apart so every block closes. The tiles are
/// polled after every packet: a lightly loaded box, a frame or two per packet.
pub fn capture(
    engine: &EngineConfig,
    epoch: u32,
    block_ns: u64,
    seed: u64,
    mix: Mix,
    n: usize,
) -> Capture {
    capture_batched(engine, epoch, block_ns, seed, mix, n, 1)
}

/// [`capture`] with the tiles polled once per `batch` packets received: a loaded box, whose
/// stream cores find many records per flush and fill their frames (07 §3.13 at peak: ~8
/// packets per ORDER frame).
pub fn capture_batched(
    engine: &EngineConfig,
    epoch: u32,
    block_ns: u64,
    seed: u64,
    mix: Mix,
    n: usize,
    batch: usize,
) -> Capture {
    run(engine, epoch, block_ns, seed, mix, n, batch, false)
}

/// [`capture_batched`] with the tiles polled cut core first, then the lanes, then the BBO
/// core and the rest: each round the BBO core works through the ops the cut published in the
/// round before while the lanes take the next batch — as on a box whose lanes and BBO core run
/// on their own cores at once. Each record's `fills_applied` then lags the ops the next steps
/// need by a batch, the slack a replica's replay lanes and replay BBO core overlap in (07
/// §7.1's two dependencies); the strictly alternating capture leaves none.
pub fn capture_pipelined(
    engine: &EngineConfig,
    epoch: u32,
    block_ns: u64,
    seed: u64,
    mix: Mix,
    n: usize,
    batch: usize,
) -> Capture {
    run(engine, epoch, block_ns, seed, mix, n, batch, true)
}

#[allow(clippy::too_many_arguments)]
fn run(
    engine: &EngineConfig,
    epoch: u32,
    block_ns: u64,
    seed: u64,
    mix: Mix,
    n: usize,
    batch: usize,
    pipelined: bool,
) -> Capture {
    let batch = batch.max(1);
    let mut home = SimBox::new(SeqConfig {
        engine: engine.clone(),
        epoch,
        block_ns,
        seq_key: [6; 32],
        voters: 4,
        rtx_ring_bytes: 64 << 20,
        tenure: crate::shm::TenureId::FIRST,
    });
    let mut w = Workload::new(engine, seed, mix);
    let mut tiles = home.tiles();
    if pipelined {
        use crate::testkit::Tile;
        tiles.sort_by_key(|t| match t {
            Tile::Cut => 0,
            Tile::Lane(_) => 1,
            Tile::Bbo => 2,
            _ => 3,
        });
    }
    let mut c = Capture {
        seq_key: home.seq_public(),
        packets: Vec::new(),
        frames: Vec::new(),
        data: Vec::new(),
        msgs: 0,
    };
    let (mut now, mut data_seq) = (0u64, 0u64);
    for i in 0..n + 2000 {
        if i < n {
            if let Input::Packet { rx_ts, bytes } = w.next_input() {
                c.msgs += u64::from(bytes.get(2).copied().unwrap_or(0));
                data_seq += 1;
                let mut b =
                    DataFrameBuilder::new(DataKind::Data, engine.book, epoch as u16, data_seq, 0);
                let _ = b.push(&bytes);
                c.data.push(b.as_bytes().to_vec());
                c.packets.push((rx_ts, bytes.clone()));
                assert!(
                    home.receive(rx_ts, bytes),
                    "capture: the lane took the packet"
                );
            }
            now = now.max(w.now());
            if (i + 1) % batch != 0 && i + 1 < n {
                continue;
            }
        } else {
            now += 1_000;
        }
        for &t in &tiles {
            home.poll(t, now);
        }
        for ev in home.drain_wire() {
            if let WireEvent::Frame { bytes, path: 0, .. } = ev {
                c.frames.push(bytes);
            }
        }
        let sent = [home.words().sent(0), home.words().sent(1)];
        let closed = home.closed_height();
        for v in 0..4 {
            home.on_ack(v, sent, now);
            for h in closed.saturating_sub(4)..=closed {
                home.on_vote(v, h);
            }
        }
    }
    c
}
