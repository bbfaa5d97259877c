//! Tenures (07 §2.2): a box built for tenure 3 as sequencer index 1 (a promoted standby's
//! identity) names both in every frame header and in its TenureStart; a replica core that
//! follows that tenure verifies its blocks and acks and NACKs under it; a core that follows
//! tenure 0 of the primary takes none of its frames (INV-REP-5's refusal of another tenure).

mod boxrun;

use boxrun::finalize;

use vyrn_engine::workload::{Input, Mix, Workload};
use vyrn_engine::EngineConfig;
use vyrn_replica::front::core::{CoreConfig, ReplicaCore, ReplicaOut};
use vyrn_replica::front::verdict::Anchor;
use vyrn_seq::shm::TenureId;
use vyrn_seq::testkit::{SimBox, WireEvent};
use vyrn_seq::SeqConfig;
use vyrn_wire::decoder::BlockRoots;
use vyrn_wire::frame::FrameHeader;
use vyrn_wire::msg::ctrl::{Nack, RepAck};

#[derive(Default)]
struct Out {
    nacks: Vec<Nack>,
    acks: Vec<RepAck>,
    blocks: Vec<BlockRoots>,
    faults: u64,
}

impl ReplicaOut for Out {
    fn nack(&mut self, n: &Nack) {
        self.nacks.push(*n);
    }
    fn ack(&mut self, a: &RepAck) {
        self.acks.push(*a);
    }
    fn data_fetch(&mut self, _d: u8, _f: &vyrn_wire::msg::ctrl::DataFetch) {}
    fn seq_data_req(&mut self, _k: vyrn_wire::msg::PktKey, _h: u64) {}
    fn copy_mismatch(
        &mut self,
        _m: &vyrn_replica::front::data::CopyMismatch,
        _s: &[u8],
        _d: &[u8],
    ) {
    }
    fn fault(&mut self, _f: &vyrn_replica::front::decode::Fault) {
        self.faults += 1;
    }
    fn block(&mut self, b: &BlockRoots) {
        self.blocks.push(*b);
    }
    fn header(&mut self, _h: &vyrn_wire::header::BlockHeader) {}
}

fn core(
    e: &EngineConfig,
    epoch: u32,
    t: TenureId,
    seq_key: ed25519_dalek::VerifyingKey,
) -> ReplicaCore {
    let mut c = ReplicaCore::new(CoreConfig {
        engine: e.clone(),
        epoch,
        tenure: t.tenure,
        sender: t.sender,
        seq_key,
        n_boxes: 1,
        n_peers: 0,
        anchor: Anchor::default(),
    })
    .unwrap();
    for s in &e.sessions {
        c.data_mut().set_home(s.session, 0);
    }
    c
}

#[test]
fn a_tenure_is_named_in_every_frame_and_only_its_followers_take_them() {
    let e = EngineConfig::test_home(2, 2);
    let epoch = 5u32;
    let t = TenureId {
        tenure: 3,
        sender: 1,
    };
    let mut home = SimBox::new(SeqConfig {
        engine: e.clone(),
        epoch,
        block_ns: 40_000,
        seq_key: [6; 32],
        voters: 4,
        rtx_ring_bytes: 8 << 20,
        tenure: t,
    });
    let mut follower = core(&e, epoch, t, home.seq_public());
    let mut other = core(&e, epoch, TenureId::FIRST, home.seq_public());
    let (mut out, mut out_other) = (Out::default(), Out::default());
    let mut resp = boxrun::Responses::default();
    let mut resp_other = boxrun::Responses::default();
    let mut w = Workload::new(&e, 3, Mix::clean());
    let tiles = home.tiles();
    let (mut now, mut frames, mut starts) = (0u64, 0u64, 0u64);
    for round in 0..1500 {
        if round < 1000 {
            if let Input::Packet { rx_ts, bytes } = w.next_input() {
                // Copy 2 straight to both cores' data sides (DATA frames are not this test's).
                let mut b = vyrn_wire::msg::data::DataFrameBuilder::new(
                    vyrn_wire::msg::data::DataKind::Data,
                    e.book,
                    epoch as u16,
                    round + 1,
                    0,
                );
                b.push(&bytes).unwrap();
                follower.on_data_frame(0, b.as_bytes(), now, &mut out);
                other.on_data_frame(0, b.as_bytes(), now, &mut out_other);
                home.receive(rx_ts, bytes);
            }
            now = now.max(w.now());
        } else {
            now += 1_000;
        }
        for &tl in &tiles {
            home.poll(tl, now);
        }
        for ev in home.drain_wire() {
            if let WireEvent::Frame { bytes, path, .. } = ev {
                let (h, _) = FrameHeader::parse(&bytes).unwrap();
                assert_eq!((h.epoch16, h.tenure, h.sender), (epoch as u16, 3, 1));
                if h.frame_seq == 1 && path == 0 {
                    // Frame 1 of each substream opens with the TenureStart (07 §3.9).
                    let ts = tenure_start(&bytes, &e);
                    assert_eq!((ts.epoch, ts.tenure, ts.sender), (epoch, 3, 1));
                    starts += 1;
                }
                frames += 1;
                follower.on_path_frame(path, &bytes, now, &mut out);
                other.on_path_frame(path, &bytes, now, &mut out_other);
            }
        }
        follower.tick(now, &mut out, &mut resp).unwrap();
        other.tick(now, &mut out_other, &mut resp_other).unwrap();
        finalize(&mut home, follower.order_rx().contiguous(), now);
    }
    assert_eq!(starts, e.layout.n_streams as u64);
    assert!(frames > 100, "{frames} frames");
    // The follower took the tenure: blocks verified, no fault, acks and NACKs under tenure 3.
    assert_eq!(out.faults, 0);
    assert!(out.blocks.len() > 5, "{} blocks", out.blocks.len());
    assert!(!out.acks.is_empty() && out.acks.iter().all(|a| a.tenure == 3));
    assert!(out.nacks.iter().all(|n| n.tenure == 3));
    assert!(resp.by_key.len() > 50, "{} responses", resp.by_key.len());
    // The core of tenure 0 took nothing: every frame refused as another tenure's.
    let c = other.order_rx().counters();
    assert_eq!(c.refused[2], frames, "{c:?}");
    assert_eq!(c.delivered, [0, 0]);
    assert!(out_other.blocks.is_empty() && out_other.acks.is_empty());
    assert!(resp_other.by_key.is_empty());
}

/// The TenureStart record that opens frame 1's ORDER section.
fn tenure_start(frame: &[u8], e: &EngineConfig) -> vyrn_wire::records::TenureStart {
    use vyrn_wire::decoder::{DecState, Pos, Sink};
    struct Find(Option<vyrn_wire::records::TenureStart>);
    impl Sink for Find {
        fn tenure(&mut self, _at: Pos, t: &vyrn_wire::records::TenureStart) {
            self.0.get_or_insert_with(|| t.clone());
        }
    }
    let mut st = DecState::new(e.layout).unwrap();
    let mut f = Find(None);
    let _ = st.on_frame(frame, 0, &mut f);
    f.0.expect("frame 1 carries the TenureStart")
}
