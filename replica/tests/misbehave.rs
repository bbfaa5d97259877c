//! `docs/wire.md` "What the box logs", as a property: the box's production tiles (`SimBox`) take a
//! valid order flow interleaved with a misbehaving client's packets in a random mix — resends of
//! multi-message packets, packets ahead of sequence and their fill-ins, exact and conflicting
//! duplicates under one `pkt_seq`, refused messages, packets no lane logs, held and sent again
//! at random later times, copy 2 sometimes never sent — and a replica core follows it with a data
//! tier that behaves as 07 §5.2 says (the first copy of a key forwarded, repeats and conflicting
//! copies not; a key fetch answered with the first copy) and a sequencer that serves every
//! packet it logged by key and hash (§5.5 source 3). Every record joins: every block verifies
//! (07 §6.4 item 3) and replay reproduces every response the box sent.

mod boxrun;

use std::collections::HashMap;

use boxrun::{as_sent, finalize, first_copy_key, Responses};
use proptest::prelude::*;

use vyrn_client::loadgen::misbehave::{Expect, Script};
use vyrn_engine::workload::{Input, Mix, Workload};
use vyrn_engine::EngineConfig;
use vyrn_replica::front::core::{CoreConfig, ReplicaCore, ReplicaOut};
use vyrn_replica::front::data::Source;
use vyrn_replica::front::decode::Fault;
use vyrn_replica::front::verdict::{Anchor, VerifyOutcome};
use vyrn_seq::testkit::{SimBox, WireEvent};
use vyrn_seq::SeqConfig;
use vyrn_wire::decoder::BlockRoots;
use vyrn_wire::header::BlockHeader;
use vyrn_wire::msg::client::{full_hash, pkt_hash, Request};
use vyrn_wire::msg::ctrl::{DataFetch, Nack, RepAck};
use vyrn_wire::msg::data::{DataFrameBuilder, DataKind};
use vyrn_wire::msg::PktKey;

#[derive(Default)]
struct Out {
    nacks: Vec<Nack>,
    fetches: Vec<DataFetch>,
    seq_asks: Vec<(PktKey, u64)>,
    faults: Vec<Fault>,
    blocks: Vec<BlockRoots>,
    headers: Vec<BlockHeader>,
    evidence: u64,
}

impl ReplicaOut for Out {
    fn nack(&mut self, n: &Nack) {
        self.nacks.push(*n);
    }
    fn ack(&mut self, _a: &RepAck) {}
    fn data_fetch(&mut self, _d: u8, f: &DataFetch) {
        self.fetches.push(*f);
    }
    fn seq_data_req(&mut self, k: PktKey, h: u64) {
        self.seq_asks.push((k, h));
    }
    fn copy_mismatch(
        &mut self,
        _m: &vyrn_replica::front::data::CopyMismatch,
        _s: &[u8],
        _d: &[u8],
    ) {
        self.evidence += 1;
    }
    fn fault(&mut self, f: &Fault) {
        self.faults.push(*f);
    }
    fn block(&mut self, b: &BlockRoots) {
        self.blocks.push(*b);
    }
    fn header(&mut self, h: &BlockHeader) {
        self.headers.push(*h);
    }
}

/// The random mix of one run.
#[derive(Debug, Clone, Copy)]
struct Mixing {
    seed: u64,
    /// Percent of inputs that are the misbehaving client's.
    bad_pct: u64,
    /// Percent of its packets held and sent again later (a second copy of the same bytes).
    again_pct: u64,
    /// Percent of its packets whose copy 2 is never sent.
    no_copy2_pct: u64,
    /// Percent of rounds with a hostile datagram into one of the core's handlers (
    /// arbitrary bytes and forgeries from members and strangers alike).
    hostile_pct: u64,
}

struct Xs(u64);
impl Xs {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn pct(&mut self, p: u64) -> bool {
        self.next() % 100 < p
    }
}

/// What a run saw.
struct Seen {
    dups: u64,
    gaps: u64,
    extra_copies: u64,
    blocks: u64,
}

fn run(m: Mixing) -> Seen {
    let e = EngineConfig::test_home(4, 4);
    let epoch = 4u32;
    let mut home = SimBox::new(SeqConfig {
        engine: e.clone(),
        epoch,
        block_ns: 40_000,
        seq_key: [2; 32],
        voters: 4,
        rtx_ring_bytes: 8 << 20,
        tenure: vyrn_seq::shm::TenureId::FIRST,
    });
    let cc = CoreConfig {
        engine: e.clone(),
        epoch,
        tenure: 0,
        sender: 0,
        seq_key: home.seq_public(),
        n_boxes: 1,
        n_peers: 0,
        anchor: Anchor::default(),
    };
    let mut core = ReplicaCore::new(cc).unwrap();
    for s in &e.sessions {
        core.data_mut().set_home(s.session, 0);
    }
    // The valid flow on every session but the last; the misbehaving client on the last.
    let mut we = e.clone();
    let bad = we.sessions.pop().unwrap();
    let mut w = Workload::new(&we, m.seed, Mix::clean());
    let mut script = Script::new(e.book, bad.session, bad.k_seq, 1);
    let mut queue: Vec<(Vec<u8>, bool)> = Vec::new();
    let mut again: Vec<(u64, Vec<u8>)> = Vec::new();
    let mut rng = Xs(m.seed | 1);
    let mut out = Out::default();
    let mut resp = Responses::default();
    let mut live: HashMap<(u32, u64), Vec<u8>> = HashMap::new();
    let mut frames: HashMap<(u8, u64), Vec<u8>> = HashMap::new();
    // The data box (07 §5.2): the first copy of each key, forwarded; DATA frames by data_seq.
    let mut data_first: HashMap<PktKey, Vec<u8>> = HashMap::new();
    let mut data_frames: HashMap<u64, Vec<u8>> = HashMap::new();
    let mut data_seq = 0u64;
    // The sequencer's lane retention: every packet it took, by key and 8-byte hash.
    let mut retained: HashMap<(PktKey, u64), Vec<u8>> = HashMap::new();
    let mut late: Vec<(u64, u8, Vec<u8>)> = Vec::new();
    let (mut dups, mut gaps) = (0u64, 0u64);
    let tiles = home.tiles();
    let mut now = 0u64;
    for round in 0..4000 {
        if round < 2500 {
            // One input: the valid flow's, or the misbehaving client's next packet.
            let (bytes, copy2) = if rng.pct(m.bad_pct) {
                if queue.is_empty() {
                    for p in script.round() {
                        match p.expect {
                            Expect::Duplicate => dups += 1,
                            Expect::Gap => gaps += 1,
                            _ => {}
                        }
                        queue.push((p.bytes, !rng.pct(m.no_copy2_pct)));
                    }
                    queue.reverse();
                }
                let (b, c2) = queue.pop().unwrap();
                if rng.pct(m.again_pct) {
                    again.push((now + rng.next() % 2_000_000, b.clone()));
                }
                (b, c2)
            } else if let Some(i) = again.iter().position(|x| x.0 <= now) {
                dups += 1;
                (again.swap_remove(i).1, true)
            } else {
                match w.next_input() {
                    Input::Packet { bytes, .. } => (bytes, true),
                    _ => continue,
                }
            };
            now = now.max(w.now()) + 1;
            if let Ok(r) = Request::parse(&bytes) {
                let key = PktKey {
                    session: r.session(),
                    pkt_seq: r.pkt_seq(),
                };
                retained
                    .entry((key, r.pkt_hash()))
                    .or_insert_with(|| bytes.clone());
                if copy2 && !data_first.contains_key(&key) {
                    data_first.insert(key, bytes.clone());
                    data_seq += 1;
                    let mut f =
                        DataFrameBuilder::new(DataKind::Data, e.book, epoch as u16, data_seq, 0);
                    f.push(&bytes).unwrap();
                    data_frames.insert(data_seq, f.as_bytes().to_vec());
                    core.on_data_frame(0, f.as_bytes(), now, &mut out);
                }
            }
            home.receive(now, bytes);
        } else {
            now += 1_000;
        }
        for &t in &tiles {
            home.poll(t, now);
        }
        for ev in home.drain_wire() {
            match ev {
                WireEvent::Frame { bytes, path, .. } => {
                    let (h, _) = vyrn_wire::frame::FrameHeader::parse(&bytes).unwrap();
                    if path == 0 {
                        frames.insert((h.stream, h.frame_seq), bytes.clone());
                    }
                    late.push((now + rng.next() % 3_000, path, bytes));
                }
                WireEvent::Resp { bytes, .. } => {
                    if let Some(k) = first_copy_key(&bytes) {
                        live.entry(k).or_insert(bytes);
                    }
                }
                _ => {}
            }
        }
        late.sort_by_key(|x| x.0);
        while late.first().is_some_and(|x| x.0 <= now) {
            let (_, p, b) = late.remove(0);
            core.on_path_frame(p, &b, now, &mut out);
        }
        if rng.pct(m.hostile_pct) {
            hostile(&mut core, &mut rng, &e, epoch, data_seq, now, &mut out);
        }
        core.tick(now, &mut out, &mut resp).expect("replay");
        for n in out.nacks.drain(..) {
            for fs in n.from_seq..=n.to_seq {
                if let Some(b) = frames.get(&(n.stream, fs)) {
                    late.push((now + 2_000, 0, b.clone()));
                }
            }
        }
        for f in std::mem::take(&mut out.fetches) {
            match f {
                DataFetch::Range { from, to } => {
                    for s in from..=to {
                        if let Some(b) = data_frames.get(&s) {
                            core.on_data_frame(0, b, now, &mut out);
                        }
                    }
                }
                // A key fetch: the data box's first copy of the key (07 §5.2).
                DataFetch::Key(k) => {
                    if let Some(b) = data_first.get(&k) {
                        let mut f =
                            DataFrameBuilder::new(DataKind::FetchResp, e.book, epoch as u16, 0, 0);
                        f.push(b).unwrap();
                        core.on_data_frame(0, f.as_bytes(), now, &mut out);
                    }
                }
            }
        }
        // 07 §5.5 source 3: the packet the box logged with that hash (or by the key alone).
        for (k, h) in std::mem::take(&mut out.seq_asks) {
            let b = retained.get(&(k, h)).or_else(|| {
                retained
                    .iter()
                    .find(|((kk, _), _)| *kk == k)
                    .map(|(_, b)| b)
            });
            if let Some(b) = b.cloned() {
                core.on_fetched(Source::Seq, &b, now, &mut out);
            }
        }
        finalize(&mut home, core.order_rx().contiguous(), now);
    }
    core.settle(&mut resp);
    assert!(out.faults.is_empty(), "{m:?}: {:?}", out.faults);
    // Every completed block's records joined and verify as one range (07 §6.4).
    // The newest block whose header came too.
    let last = out.blocks.iter().map(|b| b.height).max().unwrap();
    let last = last.min(out.headers.iter().map(|h| h.height).max().unwrap_or(0));
    assert!(last > 20, "{m:?}: {last} blocks");
    let hdr = out.headers.iter().find(|h| h.height == last).unwrap();
    assert_eq!(
        core.verify(1, last, &hdr.header_hash(), now, &mut out),
        VerifyOutcome::True,
        "{m:?}: every block verifies; data side {:?}",
        core.data().counters()
    );
    // Replay: every response of the box, byte for byte.
    let sent = as_sent(&e, &resp.by_key);
    for (k, b) in &live {
        assert_eq!(sent.get(k), Some(b), "{m:?}: response {k:?}");
    }
    assert_eq!(sent.len(), live.len(), "{m:?}");
    let c = core.data().counters();
    Seen {
        dups,
        gaps,
        extra_copies: c.copies_extra,
        blocks: last,
    }
}

/// One hostile datagram into one of the core's handlers: random bytes or a forged frame on any
/// path or repair channel (a frame far ahead: a repair nobody asked for), random bytes or a
/// heartbeat at an absurd `data_seq` as the data box, random bytes or a corrupted packet as a
/// fetched copy from the sequencer or a peer.
fn hostile(
    core: &mut ReplicaCore,
    rng: &mut Xs,
    e: &EngineConfig,
    epoch: u32,
    data_seq: u64,
    now: u64,
    out: &mut Out,
) {
    use vyrn_replica::front::order_rx::{PEER_CHANNEL, REPAIR_CHANNEL};
    let junk: Vec<u8> = (0..rng.next() % 300).map(|_| rng.next() as u8).collect();
    match rng.next() % 6 {
        0 => {
            let path = [0, 1, REPAIR_CHANNEL, PEER_CHANNEL][(rng.next() % 4) as usize];
            core.on_path_frame(path, &junk, now, out);
        }
        1 => {
            // A well-formed frame of the tenure, far ahead, as a repair.
            let h = vyrn_wire::frame::FrameHeader {
                kind: vyrn_wire::frame::FrameKind::Heartbeat,
                book: e.book,
                epoch16: epoch as u16,
                frame_seq: 1_000_000 + rng.next() % 1000,
                flags: vyrn_wire::frame::FLAG_PEER_REPAIRED,
                tenure: 0,
                body_len: 24,
                sender: 0,
                stream: (rng.next() % 2) as u8,
            };
            let mut f = Vec::new();
            vyrn_wire::frame::build_frame(&h, &[0u8; 24], &mut f);
            let path = [REPAIR_CHANNEL, PEER_CHANNEL][(rng.next() % 2) as usize];
            core.on_path_frame(path, &f, now, out);
        }
        2 => {
            core.on_data_frame((rng.next() % 3) as u8, &junk, now, out);
        }
        3 => {
            let s = [u64::MAX, data_seq + (1 << 21), data_seq.saturating_sub(5)]
                [(rng.next() % 3) as usize];
            let hb = DataFrameBuilder::new(DataKind::DataHb, e.book, epoch as u16, s, 0);
            core.on_data_frame(0, hb.as_bytes(), now, out);
        }
        4 => {
            let src = [Source::Seq, Source::Peer(0), Source::Box(0)][(rng.next() % 3) as usize];
            core.on_fetched(src, &junk, now, out);
        }
        _ => {
            // A validly shaped packet of a real session with a bad tag and random content.
            let s = &e.sessions[(rng.next() % e.sessions.len() as u64) as usize];
            let mut p = vec![0u8; 48];
            p[0..2].copy_from_slice(&e.book.to_le_bytes());
            p[2] = 1;
            p[4..8].copy_from_slice(&s.session.to_le_bytes());
            p[8..12].copy_from_slice(&(1 + (rng.next() % 50) as u32).to_le_bytes());
            p[16] = 2;
            p[24..28].copy_from_slice(&1u32.to_le_bytes());
            for b in &mut p[32..] {
                *b = rng.next() as u8; // a tag that will not verify, and no hash any record has
            }
            let src = [Source::Seq, Source::Peer(0)][(rng.next() % 2) as usize];
            core.on_fetched(src, &p, now, out);
        }
    }
}

/// A fixed mix with every misbehaviour at a high rate: the cases the issue names all happen.
#[test]
fn a_misbehaving_client_leaves_every_record_resolvable() {
    let s = run(Mixing {
        seed: 0x9e37_79b9,
        bad_pct: 30,
        again_pct: 20,
        no_copy2_pct: 20,
        hostile_pct: 0,
    });
    assert!(
        s.dups > 100 && s.gaps > 20,
        "dups {} gaps {}",
        s.dups,
        s.gaps
    );
    assert!(
        s.extra_copies > 10,
        "conflicting copies held: {}",
        s.extra_copies
    );
    assert!(s.blocks > 20);
    // The script's conflicting copies hash apart from their first.
    let mut sc = Script::new(1, 7, [1; 16], 1);
    let r = sc.round();
    assert_ne!(pkt_hash(&r[2].bytes), pkt_hash(&r[3].bytes));
    assert_ne!(full_hash(&r[0].bytes), full_hash(&r[3].bytes));
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 6, .. ProptestConfig::default() })]
    #[test]
    fn every_mix_of_misbehaviour_keeps_every_block_verifiable(
        seed in any::<u64>(),
        bad_pct in 1u64..60,
        again_pct in 0u64..50,
        no_copy2_pct in 0u64..50,
        hostile_pct in 0u64..40,
    ) {
        run(Mixing { seed, bad_pct, again_pct, no_copy2_pct, hostile_pct });
    }
}

/// Hostile datagrams into every handler of the core at a high rate, beside the
/// misbehaving client — random bytes on the paths and the repair channels, forged far-ahead
/// repairs, heartbeats at absurd `data_seq`s, junk and forged packets as fetched copies: no
/// panic, no sequencer fault raised, every block verifies, replay reproduces every response.
#[test]
fn hostile_datagrams_into_every_handler_change_nothing() {
    let s = run(Mixing {
        seed: 0x5eed_0bad,
        bad_pct: 20,
        again_pct: 10,
        no_copy2_pct: 10,
        hostile_pct: 50,
    });
    assert!(s.blocks > 20);
}
