//! The decoder tile and the per-block verdict (07 §3.12, §6.4) on the frames the real box writes:
//! the production tiles under the seeded scheduler (`vyrn_seq::testkit::SimBox`), their frames on
//! two lossy, reordering paths into order RX (NACKs answered from the box's log), in order into
//! the decoder, and the verdict over every block — with this replica's own `data_root` computed
//! from the payloads it was given (each packet's full hash, in the O-order it decoded).

use std::collections::HashMap;

use vyrn_engine::workload::{Input, Mix, Workload};
use vyrn_engine::EngineConfig;
use vyrn_replica::front::decode::{DecodedOut, Decoder, Fault};
use vyrn_replica::front::order_rx::{OrderRx, RxAlarm, RxConfig, RxOut, RxTiming};
use vyrn_replica::front::verdict::{
    Anchor, PayloadView, Payloads, Pending, Refusal, Verdict, Verdicts, VerifyOutcome,
};
use vyrn_seq::testkit::{SimBox, WireEvent};
use vyrn_seq::SeqConfig;
use vyrn_wire::decoder::{BlockRoots, Pos};
use vyrn_wire::header::{data_root, BlockHeader, DataRootHasher, Hash};
use vyrn_wire::msg::ctrl::{Nack, RepAck, RepairReq};
use vyrn_wire::records::PacketRecord;

/// A record's join key (session, pkt_seq) and its place (lane, first_lane_seq).
type RecKey = ((u32, u32), (u8, u64));

/// What the replica learned, per block.
#[derive(Default)]
struct Book {
    /// Per height, per substream: each non-Advance record's (session, pkt_seq) and
    /// (lane, first_lane_seq), in order.
    recs: HashMap<u64, [Vec<RecKey>; 2]>,
    headers: Vec<BlockHeader>,
    blocks: Vec<BlockRoots>,
    faults: Vec<Fault>,
    /// `pkt_hash` of each record by (lane, first_lane_seq), from the HashRuns (what the join
    /// checks a payload against). Not by (session, pkt_seq): the box logs a packet that skipped
    /// ahead of its session's sequence (BAD_SEQ) and later the real one under the same key.
    pkt_hash: HashMap<(u8, u64), u64>,
}

impl DecodedOut for Book {
    fn record(&mut self, height: u64, at: Pos, r: &PacketRecord) {
        if !r.is_advance() {
            self.recs.entry(height).or_default()[at.stream as usize]
                .push(((r.session, r.pkt_seq), (r.lane, r.first_lane_seq)));
        }
    }
    fn block(&mut self, b: &BlockRoots) {
        self.blocks.push(*b);
    }
    fn hash(&mut self, _at: Pos, lane: u8, rec: &vyrn_wire::decoder::Awaiting, pkt_hash: u64) {
        self.pkt_hash.insert((lane, rec.first_lane_seq), pkt_hash);
    }
    fn header(&mut self, h: &BlockHeader) {
        self.headers.push(*h);
    }
    fn fault(&mut self, f: &Fault) {
        self.faults.push(*f);
    }
}

/// This replica's payload store: the full hash of every packet it was given (copy 2; every copy
/// of a (session, pkt_seq), forged ones too), joined to the records of each block as 07 §5.4
/// says — the payload whose 8-byte hash is the record's `pkt_hash` — and `data_root(h)` once
/// every record of `h` is resolved.
struct Payload<'a> {
    full: &'a HashMap<(u32, u32), Vec<Hash>>,
    book: &'a Book,
    /// Sessions whose payloads this replica "never got" (the data tier lost them).
    missing: Option<u32>,
}

impl PayloadView for Payload<'_> {
    fn payloads(&self, height: u64) -> Payloads {
        let Some(recs) = self.book.recs.get(&height) else {
            let e = DataRootHasher::default().clone().finish();
            return Payloads::Root(data_root(&e, &e));
        };
        let mut roots = [[0u8; 32]; 2];
        let mut unresolved = 0;
        for (st, list) in recs.iter().enumerate() {
            let mut h = DataRootHasher::default();
            for (k, at) in list {
                let want = self.book.pkt_hash.get(at);
                let hit = self
                    .full
                    .get(k)
                    .filter(|_| Some(k.0) != self.missing)
                    .and_then(|c| {
                        c.iter().find(|f| {
                            want.is_some_and(|w| {
                                u64::from_le_bytes(f[..8].try_into().unwrap()) == *w
                            })
                        })
                    });
                match hit {
                    Some(f) => h.push(f),
                    None => unresolved += 1,
                }
            }
            roots[st] = h.finish();
        }
        if unresolved > 0 {
            return Payloads::Pending { unresolved };
        }
        Payloads::Root(data_root(&roots[0], &roots[1]))
    }
}

struct Net {
    delivered: Vec<Vec<u8>>,
    nacks: Vec<Nack>,
}

impl RxOut for Net {
    fn deliver(&mut self, _s: u8, _fs: u64, frame: &[u8], _peer: bool) {
        self.delivered.push(frame.to_vec());
    }
    fn nack(&mut self, n: &Nack) {
        self.nacks.push(*n);
    }
    fn repair(&mut self, _peer: usize, _r: &RepairReq) {}
    fn ack(&mut self, _a: &RepAck) {}
    fn alarm(&mut self, _a: RxAlarm) {}
}

struct Run {
    book: Book,
    full: HashMap<(u32, u32), Vec<Hash>>,
    verdicts: Verdicts,
    /// Every frame the box wrote on path A, by (stream, frame_seq).
    frames: HashMap<(u8, u64), Vec<u8>>,
    now: u64,
}

/// Run the box for `rounds` with `seed`, every frame through order RX (path A loses 3%, path B
/// 3%, each path reorders) into the decoder, optionally corrupting one ORDER frame.
fn run(seed: u64, rounds: usize, corrupt: Option<u64>) -> Run {
    let e = EngineConfig::test_home(4, 4);
    let cfg = SeqConfig {
        engine: e.clone(),
        epoch: 3,
        block_ns: 30_000,
        seq_key: [9; 32],
        voters: 4,
        rtx_ring_bytes: 8 << 20,
        tenure: vyrn_seq::shm::TenureId::FIRST,
    };
    let mut home = SimBox::new(cfg);
    let key = home.seq_public();
    let mut w = Workload::new(&e, seed, Mix::everything());
    let mut rx = OrderRx::new(RxConfig {
        book: e.book,
        epoch: 3,
        tenure: 0,
        sender: 0,
        n_streams: 2,
        n_peers: 0,
        timing: RxTiming::default(),
    });
    let mut dec = Decoder::new(e.layout, 1).unwrap();
    let mut r = Run {
        book: Book::default(),
        full: HashMap::new(),
        verdicts: Verdicts::new(key, 3, Anchor::default()),
        frames: HashMap::new(),
        now: 0,
    };
    let mut net = Net {
        delivered: Vec::new(),
        nacks: Vec::new(),
    };
    let mut rng = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut next = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let tiles = home.tiles();
    let mut late: Vec<(u64, u8, Vec<u8>)> = Vec::new();
    let mut corrupted = false;
    for _ in 0..rounds {
        if let Input::Packet { rx_ts, bytes } = w.next_input() {
            if let Ok(f) = vyrn_wire::msg::client::full_hash(&bytes) {
                let s = u32::from_le_bytes(bytes[4..8].try_into().unwrap());
                let q = u32::from_le_bytes(bytes[8..12].try_into().unwrap());
                let c = r.full.entry((s, q)).or_default();
                if !c.contains(&f) {
                    c.push(f);
                }
            }
            home.receive(rx_ts, bytes);
        }
        r.now = r.now.max(w.now());
        for &t in &tiles {
            home.poll(t, r.now);
        }
        // Votes and acks so the box keeps closing blocks without halting (a stand-in finalizer).
        for ev in home.drain_wire() {
            if let WireEvent::Frame {
                mut bytes, path, ..
            } = ev
            {
                let (h, _) = vyrn_wire::frame::FrameHeader::parse(&bytes).unwrap();
                if path == 0 {
                    r.frames.insert((h.stream, h.frame_seq), bytes.clone());
                }
                if Some(h.frame_seq) == corrupt
                    && h.stream == 0
                    && h.kind == vyrn_wire::frame::FrameKind::Order
                    && !corrupted
                    && path == 0
                {
                    // A sequencer fault: a flipped byte in the first section's tag.
                    bytes[24] ^= 0x80;
                    corrupted = true;
                    r.frames.insert((h.stream, h.frame_seq), bytes.clone());
                } else if Some(h.frame_seq) == corrupt && h.stream == 0 && path == 1 {
                    continue; // path B's clean copy is lost, so the bad one is what arrives
                }
                if next() % 100 < 3 {
                    continue; // lost on this path
                }
                let delay = next() % 5_000;
                late.push((r.now + delay, path, bytes));
            }
        }
        for i in 0..4 {
            home.on_ack(i, rx.contiguous(), r.now);
        }
        late.sort_by_key(|x| x.0);
        while late.first().is_some_and(|x| x.0 <= r.now) {
            let (_, p, b) = late.remove(0);
            rx.on_frame(p, &b, r.now, &mut net);
        }
        rx.tick(r.now, &mut net);
        // The sequencer answers NACKs from its log (what it wrote on path A).
        for n in net.nacks.drain(..) {
            for fs in n.from_seq..=n.to_seq {
                if let Some(b) = r.frames.get(&(n.stream, fs)) {
                    let mut b = b.clone();
                    b[16] |= vyrn_wire::frame::FLAG_RETRANSMIT;
                    late.push((r.now + 2_000, 0, b));
                }
            }
        }
        for f in net.delivered.drain(..) {
            dec.on_frame(&f, r.now, &mut r.book);
        }
        for h in std::mem::take(&mut r.book.headers) {
            r.verdicts.on_header(&h);
            // The finalizer: every header is voted by all four voters.
            for v in 0..4 {
                home.on_vote(v, h.height);
            }
            r.book.headers.push(h);
        }
    }
    for b in &r.book.blocks {
        r.verdicts.on_block(b);
    }
    for f in &r.book.faults {
        r.verdicts.on_fault(f);
    }
    r
}

#[test]
fn every_block_of_the_box_is_ready_with_the_replicas_own_data_root() {
    for seed in 1..=3u64 {
        let r = run(seed, 4000, None);
        assert!(r.book.faults.is_empty(), "seed {seed}: {:?}", r.book.faults);
        let pv = Payload {
            full: &r.full,
            book: &r.book,
            missing: None,
        };
        let heights: Vec<u64> = r.book.headers.iter().map(|h| h.height).collect();
        assert!(heights.len() > 10, "seed {seed}: {} headers", heights.len());
        let mut with_records = 0;
        for &h in &heights {
            let v = r.verdicts.verdict(h, &pv);
            if r.book.blocks.iter().any(|b| b.height == h) {
                assert_eq!(v, Verdict::Ready, "seed {seed} height {h}");
                with_records += usize::from(r.book.recs.contains_key(&h));
            } else {
                assert_eq!(
                    v,
                    Verdict::Pending(Pending::Order),
                    "seed {seed} height {h}"
                );
            }
        }
        assert!(
            with_records > 5,
            "seed {seed}: {with_records} blocks with packets"
        );
    }
}

#[test]
fn missing_payloads_keep_a_block_pending_and_a_wrong_root_refuses_it() {
    let r = run(4, 3000, None);
    let h = r
        .book
        .recs
        .iter()
        .filter(|(h, l)| !l[0].is_empty() && r.book.blocks.iter().any(|b| b.height == **h))
        .map(|(h, _)| *h)
        .min()
        .expect("a block with packets");
    let session = r.book.recs[&h][0][0].0 .0;
    let pv = Payload {
        full: &r.full,
        book: &r.book,
        missing: Some(session),
    };
    assert!(matches!(
        r.verdicts.verdict(h, &pv),
        Verdict::Pending(Pending::Payloads { unresolved }) if unresolved >= 1
    ));
    // A data tier that fed other bytes for a packet: its own root differs → refused.
    // (Same first 8 bytes, so it joins; the rest differs: the 2^32-collision case of §5.6.)
    let mut wrong = r.full.clone();
    let (k, at) = r.book.recs[&h][0][0];
    let ph = r.book.pkt_hash[&at];
    let mut forged = [0xEE; 32];
    forged[..8].copy_from_slice(&ph.to_le_bytes());
    wrong.insert(k, vec![forged]);
    let pv = Payload {
        full: &wrong,
        book: &r.book,
        missing: None,
    };
    assert_eq!(
        r.verdicts.verdict(h, &pv),
        Verdict::Refused(Refusal::DataRoot)
    );
}

#[test]
fn a_decoder_fault_refuses_its_block_and_every_later_one() {
    let r = run(5, 4000, Some(40));
    assert_eq!(r.book.faults.len(), 1, "{:?}", r.book.faults);
    let f = r.book.faults[0];
    assert_eq!((f.err.stream, f.err.frame_seq, f.err.epoch), (0, 40, 3));
    let pv = Payload {
        full: &r.full,
        book: &r.book,
        missing: None,
    };
    for h in r.book.headers.iter().map(|h| h.height) {
        let v = r.verdicts.verdict(h, &pv);
        if h >= f.height {
            assert_eq!(v, Verdict::Refused(Refusal::Decoder(f)), "height {h}");
        } else {
            assert_eq!(v, Verdict::Ready, "height {h}");
        }
    }
}

#[test]
fn headers_that_lie_are_refused_and_verify_answers_the_range() {
    let mut r = run(6, 3000, None);
    let pv_full = r.full.clone();
    let book = std::mem::take(&mut r.book);
    let pv = Payload {
        full: &pv_full,
        book: &book,
        missing: None,
    };
    let ready: Vec<BlockHeader> = book
        .headers
        .iter()
        .filter(|h| book.blocks.iter().any(|b| b.height == h.height))
        .copied()
        .collect();
    assert!(ready.len() > 5);
    let (a, b) = (ready[1], ready[4]);
    // The range verifies; with another last hash it does not.
    assert_eq!(
        r.verdicts
            .verify(a.height, b.height, &b.header_hash(), 0, &pv),
        VerifyOutcome::True
    );
    assert!(matches!(
        r.verdicts.verify(a.height, b.height, &[7; 32], 0, &pv),
        VerifyOutcome::False(_, _)
    ));
    // A range reaching past what is held: pending, then false after REP_VERIFY_WAIT_MS.
    let far = book.headers.last().unwrap().height + 5;
    assert!(matches!(
        r.verdicts.verify(a.height, far, &[0; 32], 1_000, &pv),
        VerifyOutcome::Pending(_, _)
    ));
    assert!(matches!(
        r.verdicts
            .verify(a.height, far, &[0; 32], 1_000 + 5_000_000, &pv),
        VerifyOutcome::False(_, None)
    ));
    // A forged twin for a held height (its seq_sig does not check): no conflict, nothing
    // changes (security review F2: an unsigned header made one and blocked the vote).
    let box_key = ed25519_dalek::SigningKey::from_bytes(&[9; 32]);
    let mut forged = a;
    forged.data_root[0] ^= 1;
    assert!(!r.verdicts.on_header(&forged));
    assert_eq!(
        r.verdicts
            .verify(a.height, b.height, &b.header_hash(), 0, &pv),
        VerifyOutcome::True
    );
    // A second, different header the sequencer signed for a held height (equivocation, 07
    // §10.1): refused.
    let mut twin = forged;
    twin.sign(&box_key);
    assert!(twin.verify(&box_key.verifying_key()));
    r.verdicts.on_header(&twin);
    assert_eq!(
        r.verdicts.verdict(a.height, &pv),
        Verdict::Refused(Refusal::Conflict)
    );
    // A header with a bad signature, a broken chain, a step gap: each refused.
    let key = ed25519_dalek::SigningKey::from_bytes(&[9; 32]);
    let mut v2 = Verdicts::new(key.verifying_key(), 3, Anchor::default());
    let mut h1 = ready[0];
    h1.height = 1;
    let mut bad_sig = h1;
    bad_sig.seq_sig[0] ^= 1;
    v2.on_header(&bad_sig);
    assert_eq!(v2.verdict(1, &pv), Verdict::Refused(Refusal::SeqSig));
    let mut v3 = Verdicts::new(key.verifying_key(), 3, Anchor::default());
    let mut bad_prev = ready[0];
    bad_prev.height = 1;
    bad_prev.prev = [1; 32];
    bad_prev.sign(&key);
    v3.on_header(&bad_prev);
    assert_eq!(v3.verdict(1, &pv), Verdict::Refused(Refusal::Prev));
    // 07 §9.1: refused in a vote for what the sequencer's own signature vouches for, it is
    // handed to the node once, as a suspicion; a bad signature never is.
    assert_eq!(v3.take_contradiction(), None, "not asked in a vote yet");
    assert!(matches!(
        v3.verify(1, 1, &bad_prev.header_hash(), 0, &pv),
        VerifyOutcome::False(1, Some(Refusal::Prev))
    ));
    assert_eq!(v3.take_contradiction(), Some((1, Refusal::Prev)));
    assert_eq!(v3.take_contradiction(), None);
    assert!(matches!(
        v2.verify(1, 1, &bad_sig.header_hash(), 0, &pv),
        VerifyOutcome::False(1, Some(Refusal::SeqSig))
    ));
    assert_eq!(
        v2.take_contradiction(),
        None,
        "anyone can send a bad signature"
    );
    let mut v4 = Verdicts::new(key.verifying_key(), 3, Anchor::default());
    let mut gap = ready[0];
    gap.height = 1;
    gap.prev = [0; 32];
    gap.first_step = 5;
    gap.sign(&key);
    v4.on_header(&gap);
    assert_eq!(
        v4.verdict(1, &pv),
        Verdict::Refused(Refusal::StepGap { want: 1, got: 5 })
    );
}

/// Security review F2: an unsigned header is kept only near the newest signed one (it stands
/// for its height's `SeqSig` refusal), never far ahead; a signed header replaces an unsigned
/// one that came first, and only signed headers are reported as held.
#[test]
fn unsigned_headers_change_nothing_a_signed_one_decides() {
    use vyrn_replica::front::verdict::UNSIGNED_AHEAD_MAX;
    let mut r = run(7, 2000, None);
    let full = r.full.clone();
    let book = std::mem::take(&mut r.book);
    let pv = Payload {
        full: &full,
        book: &book,
        missing: None,
    };
    let key = ed25519_dalek::SigningKey::from_bytes(&[9; 32]);
    let h1 = *book
        .headers
        .iter()
        .find(|h| h.height == 1)
        .expect("height 1");
    assert!(
        h1.verify(&key.verifying_key()),
        "run's box signs with [9; 32]"
    );
    let mut v = Verdicts::new(key.verifying_key(), 3, Anchor::default());
    // A forgery of height 1 first: kept as unsigned (refused), not reported.
    let mut forged = h1;
    forged.data_root = [5; 32];
    assert!(!v.on_header(&forged));
    assert_eq!(v.verdict(1, &pv), Verdict::Refused(Refusal::SeqSig));
    // The sequencer's own header then replaces it: no conflict, no signature refusal.
    assert!(v.on_header(&h1));
    assert!(!matches!(
        v.verdict(1, &pv),
        Verdict::Refused(Refusal::Conflict | Refusal::SeqSig)
    ));
    assert_eq!(v.counters().conflicts, 0);
    // A forgery far ahead is not kept at all; one within the window is (its refusal).
    let mut far = h1;
    far.height = 1 << 40;
    assert!(!v.on_header(&far));
    assert_eq!(v.verdict(1 << 40, &pv), Verdict::Pending(Pending::Header));
    let mut near = h1;
    near.height = 1 + UNSIGNED_AHEAD_MAX;
    assert!(!v.on_header(&near));
    assert_eq!(
        v.verdict(near.height, &pv),
        Verdict::Refused(Refusal::SeqSig)
    );
}

/// 07 §10.1: a second header the sequencer signed for a height it already signed is
/// equivocation — its block is refused as a conflict and the two headers are taken out as
/// `SeqEquivocation`, self-verifying evidence (once; the same header again is nothing new).
#[test]
fn two_signed_headers_for_one_height_are_equivocation_evidence() {
    let r = run(7, 2000, None);
    let key = ed25519_dalek::SigningKey::from_bytes(&[9; 32]);
    let h1 = *r
        .book
        .headers
        .iter()
        .find(|h| h.height == 1)
        .expect("height 1");
    let mut v = Verdicts::new(key.verifying_key(), h1.epoch, Anchor::default());
    assert!(v.on_header(&h1));
    assert!(v.take_evidence().is_empty());
    let mut other = h1;
    other.data_root = [5; 32];
    other.sign(&key);
    assert!(!v.on_header(&other));
    assert!(!v.on_header(&h1), "the first again: nothing new");
    let ev = v.take_evidence();
    assert_eq!(ev.len(), 1);
    assert_eq!(
        (ev[0].height, ev[0].header_a, ev[0].header_b),
        (1, h1, other)
    );
    assert_eq!(ev[0].check(&key.verifying_key()), Ok(()));
    assert!(v.take_evidence().is_empty(), "taken once");
    assert_eq!(v.counters().conflicts, 1);
    // It survives the wire and still checks; under another key it does not.
    let mut b = Vec::new();
    vyrn_wire::msg::ctrl::CtrlMsg::SeqEquivocation(Box::new(ev[0]))
        .encode(&mut b)
        .unwrap();
    let Ok(vyrn_wire::msg::ctrl::CtrlMsg::SeqEquivocation(back)) =
        vyrn_wire::msg::ctrl::CtrlMsg::parse(&b)
    else {
        panic!("parses");
    };
    assert_eq!(back.check(&key.verifying_key()), Ok(()));
    let stranger = ed25519_dalek::SigningKey::from_bytes(&[1; 32]);
    assert!(back.check(&stranger.verifying_key()).is_err());
}
