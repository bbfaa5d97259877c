//! The replica's data side (07 §5.3–§5.6, §6.1): data_seq gaps, box silence, the join, the
//! fetch order, the copy mismatches, `data_root` and garbage.

use proptest::prelude::*;
use vyrn_replica::front::data::*;
use vyrn_wire::header::{data_root, empty_root, DataRootHasher, Hash};
use vyrn_wire::msg::client::{full_hash, pkt_hash, Msg, MsgType, RequestPacket, Side};
use vyrn_wire::msg::ctrl::{DataFetch, HashList, HashListReq};
use vyrn_wire::msg::data::{DataFrameBuilder, DataKind};
use vyrn_wire::msg::PktKey;
use vyrn_wire::records::{PacketRecord, PKT_ADVANCE};

const BOOK: u16 = 7;
const EPOCH16: u16 = 3;
const US: u64 = 1000;
const MS: u64 = 1_000_000;

#[derive(Debug, Clone, PartialEq)]
enum Ev {
    Fetch(u8, DataFetch),
    Peer(usize, PktKey),
    Seq(PktKey),
    HashList(u64),
    Mismatch(CopyMismatch, Vec<u8>, Vec<u8>),
    Alarm(DataAlarm),
}

#[derive(Debug, Default)]
struct Out(Vec<Ev>);

impl Out {
    fn take(&mut self) -> Vec<Ev> {
        std::mem::take(&mut self.0)
    }
    /// Everything but box up/down alarms.
    fn take_fetches(&mut self) -> Vec<Ev> {
        self.take()
            .into_iter()
            .filter(|e| {
                !matches!(
                    e,
                    Ev::Alarm(DataAlarm::BoxDown { .. } | DataAlarm::BoxUp { .. })
                )
            })
            .collect()
    }
}

impl DataOut for Out {
    fn data_fetch(&mut self, d: u8, f: &DataFetch) {
        self.0.push(Ev::Fetch(d, *f));
    }
    fn peer_data_fetch(&mut self, peer: usize, key: PktKey, _h: u64) {
        self.0.push(Ev::Peer(peer, key));
    }
    fn seq_data_req(&mut self, key: PktKey, _h: u64) {
        self.0.push(Ev::Seq(key));
    }
    fn hash_list_req(&mut self, r: &HashListReq) {
        self.0.push(Ev::HashList(r.height));
    }
    fn copy_mismatch(&mut self, e: &CopyMismatch, seq_pkt: &[u8], data_pkt: &[u8]) {
        self.0
            .push(Ev::Mismatch(*e, seq_pkt.to_vec(), data_pkt.to_vec()));
    }
    fn alarm(&mut self, a: DataAlarm) {
        self.0.push(Ev::Alarm(a));
    }
}

fn cfg(n_streams: u8) -> DataConfig {
    DataConfig::new(BOOK, EPOCH16, 3, 2, n_streams)
}

fn key(session: u32, pkt_seq: u32) -> PktKey {
    PktKey { session, pkt_seq }
}

/// A valid request packet; `salt` changes the bytes (and so the hash).
fn pkt(session: u32, pkt_seq: u32, count: usize, salt: u32) -> Vec<u8> {
    let msgs = (0..count)
        .map(|i| Msg {
            kind: MsgType::NewGtc,
            side: Side::Buy,
            tick: 100 + i as i32,
            qty: 1 + salt,
            client_tag: i as u32,
        })
        .collect();
    RequestPacket {
        book: BOOK,
        resend: false,
        session,
        pkt_seq,
        msgs,
    }
    .to_bytes(&[9; 16])
    .unwrap()
}

fn frame(kind: DataKind, data_seq: u64, src: u8, pkts: &[&[u8]]) -> Vec<u8> {
    let mut b = DataFrameBuilder::new(kind, BOOK, EPOCH16, data_seq, src);
    for p in pkts {
        b.push(p).unwrap();
    }
    b.as_bytes().to_vec()
}

fn rec(session: u32, pkt_seq: u32, count: u8) -> PacketRecord {
    PacketRecord {
        count,
        session,
        pkt_seq,
        ..PacketRecord::default()
    }
}

fn advance() -> PacketRecord {
    PacketRecord {
        flags: PKT_ADVANCE,
        ..PacketRecord::default()
    }
}

fn range(from: u64, to: u64) -> DataFetch {
    DataFetch::Range { from, to }
}

#[test]
fn data_seq_gap_is_fetched_from_that_box() {
    let mut d = DataSide::new(cfg(1));
    let mut o = Out::default();
    for s in [1, 2, 5] {
        d.on_data_frame(1, &frame(DataKind::Data, s, 1, &[]), 0, &mut o)
            .unwrap();
    }
    assert_eq!(o.take(), vec![Ev::Fetch(1, range(3, 4))]);
    assert_eq!(d.gaps(1), vec![(3, 4)]);
    // The range answer comes as FETCH_RESP under the original data_seq.
    let p = pkt(1, 1, 1, 0);
    let n = d
        .on_data_frame(1, &frame(DataKind::FetchResp, 3, 1, &[&p]), 0, &mut o)
        .unwrap();
    assert_eq!(n, 1);
    assert_eq!(d.gaps(1), vec![(4, 4)]);
    // A late DATA frame of the gap fills it too.
    d.on_data_frame(1, &frame(DataKind::Data, 4, 1, &[]), 0, &mut o)
        .unwrap();
    assert!(d.gaps(1).is_empty());
    // A heartbeat names the last DATA frame: 6 and 7 were lost.
    d.on_data_frame(1, &frame(DataKind::DataHb, 7, 1, &[]), 0, &mut o)
        .unwrap();
    assert_eq!(o.take(), vec![Ev::Fetch(1, range(6, 7))]);
    // A heartbeat that names what we have is quiet; the next DATA frame is no gap.
    d.on_data_frame(1, &frame(DataKind::DataHb, 7, 1, &[]), 0, &mut o)
        .unwrap();
    d.on_data_frame(1, &frame(DataKind::Data, 8, 1, &[]), 0, &mut o)
        .unwrap();
    assert!(o.take().is_empty());
    // A long gap is asked in 64-frame ranges.
    d.on_data_frame(1, &frame(DataKind::Data, 8 + 130, 1, &[]), 0, &mut o)
        .unwrap();
    assert_eq!(
        o.take(),
        vec![
            Ev::Fetch(1, range(9, 72)),
            Ev::Fetch(1, range(73, 136)),
            Ev::Fetch(1, range(137, 137)),
        ]
    );
    // Other boxes' sequences are their own. A box first seen at 500 (this replica started
    // after it): its history 1..=499 is a gap, fetched by range.
    d.on_data_frame(0, &frame(DataKind::Data, 500, 0, &[]), 0, &mut o)
        .unwrap();
    let h = o.take();
    assert_eq!(h.len(), 8, "{h:?}");
    assert_eq!(h[0], Ev::Fetch(0, range(1, 64)));
    assert_eq!(h[7], Ev::Fetch(0, range(449, 499)));
    // Too far ahead, another book, another epoch, a lying src: refused and counted.
    let far = frame(DataKind::Data, 600 + DATA_AHEAD_MAX, 0, &[]);
    assert_eq!(
        d.on_data_frame(0, &far, 0, &mut o),
        Err(DataRefused::TooFarAhead)
    );
    assert_eq!(
        d.on_data_frame(2, &frame(DataKind::Data, 1, 0, &[]), 0, &mut o),
        Err(DataRefused::BadSource)
    );
    assert_eq!(
        d.on_data_frame(9, &frame(DataKind::Data, 1, 9, &[]), 0, &mut o),
        Err(DataRefused::BadSource)
    );
    let other = DataFrameBuilder::new(DataKind::Data, BOOK + 1, EPOCH16, 1, 2);
    assert_eq!(
        d.on_data_frame(2, other.as_bytes(), 0, &mut o),
        Err(DataRefused::OtherBook)
    );
    let other = DataFrameBuilder::new(DataKind::Data, BOOK, EPOCH16 + 1, 1, 2);
    assert_eq!(
        d.on_data_frame(2, other.as_bytes(), 0, &mut o),
        Err(DataRefused::OtherEpoch)
    );
    let c = d.counters();
    assert_eq!(c.refused, [0, 1, 1, 2, 1]);
    assert_eq!(c.gaps, 4, "three gaps of box 1, box 0's history");
    assert_eq!(c.gap_fetches, 5 + 8);
    assert_eq!(c.history_gaps, 1);
    assert_eq!(c.gap_filled, 2);
    assert!(o.take().is_empty());
}

#[test]
fn silent_box_is_marked_down_and_comes_back() {
    let mut d = DataSide::new(cfg(1));
    let mut o = Out::default();
    let first = vyrn_replica::front::data::FIRST_CONTACT_NS;
    d.tick(0, &mut o); // the silence clocks start
    d.on_data_frame(0, &frame(DataKind::DataHb, 0, 0, &[]), 100 * US, &mut o)
        .unwrap();
    d.tick(100 * US + MS - 1, &mut o);
    assert!(o.take().is_empty());
    assert!(!d.box_down(0));
    // Box 0 was heard: down after REP_DATA_SILENCE_MS of silence.
    d.tick(100 * US + MS, &mut o);
    assert_eq!(
        o.take(),
        vec![Ev::Alarm(DataAlarm::BoxDown {
            d: 0,
            last_rx_ns: 100 * US
        })]
    );
    assert!(d.box_down(0));
    // Boxes 1 and 2 never sent since this replica started: down only after the first-contact
    // grace (the roles of a home start in any order).
    d.tick(first - 1, &mut o);
    assert!(
        o.take().is_empty(),
        "raised once, and not before first contact"
    );
    assert!(!d.box_down(1) && !d.box_down(2));
    d.tick(first, &mut o);
    assert_eq!(
        o.take(),
        vec![
            Ev::Alarm(DataAlarm::BoxDown {
                d: 1,
                last_rx_ns: 0
            }),
            Ev::Alarm(DataAlarm::BoxDown {
                d: 2,
                last_rx_ns: 0
            }),
        ]
    );
    // Refused datagrams are no sign of life.
    let _ = d.on_data_frame(0, &[0u8; 30], first + 11 * MS, &mut o);
    assert!(d.box_down(0));
    // Back, with a new data_seq baseline (a restart): no gap toward the old one.
    d.on_data_frame(
        0,
        &frame(DataKind::Data, 1, 0, &[]),
        first + 11 * MS,
        &mut o,
    )
    .unwrap();
    assert_eq!(o.take(), vec![Ev::Alarm(DataAlarm::BoxUp { d: 0 })]);
    assert!(!d.box_down(0));
    assert_eq!(d.counters().box_down, 3);
    assert_eq!(d.counters().box_up, 1);
}

#[test]
fn join_happy_path_in_both_orders() {
    let mut d = DataSide::new(cfg(1));
    let mut o = Out::default();
    let a = pkt(10, 1, 2, 0);
    let b = pkt(10, 2, 1, 0);
    // a: the record first, then its payload, then its hash.
    assert_eq!(
        d.on_record(0, &rec(10, 1, 2), 0, &mut o),
        Ok(RecState::Missing)
    );
    d.on_data_frame(0, &frame(DataKind::Data, 1, 0, &[&a]), 10, &mut o)
        .unwrap();
    assert_eq!(d.rec_state(key(10, 1)), Some(RecState::Unhashed));
    // An Advance record in between: never joined.
    assert_eq!(d.on_record(0, &advance(), 0, &mut o), Ok(RecState::Advance));
    assert_eq!(
        d.on_hash(0, key(10, 1), pkt_hash(&a).unwrap(), 20, &mut o),
        Ok(RecState::Resolved)
    );
    // b: the payload first (before its record), then the hash, then the join.
    d.on_data_frame(0, &frame(DataKind::Data, 2, 0, &[&b]), 30, &mut o)
        .unwrap();
    assert_eq!(d.rec_state(key(10, 2)), None);
    d.on_record(0, &rec(10, 2, 1), 40, &mut o).unwrap();
    assert_eq!(d.rec_state(key(10, 2)), Some(RecState::Unhashed));
    d.on_mark(0, 1).unwrap();
    assert_eq!(
        d.block_payloads(1),
        BlockPayloads::Pending {
            missing: 0,
            unhashed: 1,
            mismatch: 0
        }
    );
    assert_eq!(d.data_root(1), None);
    d.on_hash(0, key(10, 2), pkt_hash(&b).unwrap(), 50, &mut o)
        .unwrap();
    assert_eq!(d.block_payloads(1), BlockPayloads::Ready);
    assert!(o.take().is_empty(), "nothing fetched, nothing raised");
    // No fetch later either: resolved records are never fetched.
    d.tick(10 * MS, &mut o);
    assert!(o.take_fetches().is_empty());
    let c = d.counters();
    assert_eq!((c.resolved, c.records, c.records_advance), (2, 3, 1));
    // A second copy of a stored packet (a resend) is a duplicate.
    let _ = d.on_data_frame(0, &frame(DataKind::Data, 3, 0, &[&a]), 60, &mut o);
    assert_eq!(d.counters().pkts_refused[4], 1);
    // A hash for no record is refused.
    assert_eq!(
        d.on_hash(0, key(99, 1), 5, 0, &mut o),
        Err(RecordRefused::UnknownRecord)
    );
}

#[test]
fn unhashed_join_then_hash_mismatch_settled_by_the_sequencer() {
    let mut d = DataSide::new(cfg(1));
    let mut o = Out::default();
    let data_copy = pkt(5, 9, 1, 1); // the client's copy 2, at its data home
    let seq_copy = pkt(5, 9, 1, 2); // copy 1, the one the sequencer matched
    let other = pkt(5, 9, 1, 3);
    d.on_record(0, &rec(5, 9, 1), 0, &mut o).unwrap();
    d.on_data_frame(0, &frame(DataKind::Data, 1, 0, &[&data_copy]), 5, &mut o)
        .unwrap();
    assert_eq!(d.rec_state(key(5, 9)), Some(RecState::Unhashed));
    assert!(o.take().is_empty());
    // The HashRun: the 8-byte hashes differ → straight to the sequencer (07 §5.6 row 1).
    let h = pkt_hash(&seq_copy).unwrap();
    assert_eq!(
        d.on_hash(0, key(5, 9), h, 10, &mut o),
        Ok(RecState::Mismatch)
    );
    assert_eq!(o.take(), vec![Ev::Seq(key(5, 9))]);
    d.on_mark(0, 1).unwrap();
    assert_eq!(
        d.block_payloads(1),
        BlockPayloads::Pending {
            missing: 0,
            unhashed: 0,
            mismatch: 1
        }
    );
    // A peer's copy does not settle it (only the sequencer's, 07 §5.6); a wrong sequencer copy
    // is refused.
    assert_eq!(
        d.on_fetched(Source::Peer(0), &seq_copy, 12, &mut o),
        Err(PktRefused::Unsolicited)
    );
    assert_eq!(d.rec_state(key(5, 9)), Some(RecState::Mismatch));
    assert_eq!(
        d.on_fetched(Source::Seq, &other, 12, &mut o),
        Err(PktRefused::Wrong)
    );
    assert_eq!(d.rec_state(key(5, 9)), Some(RecState::Mismatch));
    // The sequencer's copy: canonical, evidence out.
    assert_eq!(
        d.on_fetched(Source::Seq, &seq_copy, 13, &mut o),
        Ok(RecState::Resolved)
    );
    let want = CopyMismatch {
        session: 5,
        pkt_seq: 9,
        seq_hash: full_hash(&seq_copy).unwrap(),
        data_hash: full_hash(&data_copy).unwrap(),
    };
    assert_eq!(
        o.take(),
        vec![Ev::Mismatch(want, seq_copy.clone(), data_copy.clone())]
    );
    // Both copies are held: the data box's first, the record reads the one with its hash.
    assert_eq!(d.payload_for(key(5, 9), h), Some(&seq_copy[..]));
    assert_eq!(d.payload(key(5, 9)), Some(&data_copy[..]));
    assert_eq!(d.block_payloads(1), BlockPayloads::Ready);
    let mut r = DataRootHasher::default();
    r.push(&full_hash(&seq_copy).unwrap());
    let a = r.finish();
    assert_eq!(
        d.data_root(1).unwrap().data_root,
        data_root(&a, &empty_root())
    );
    let c = d.counters();
    assert_eq!((c.mismatch_hash, c.copy_mismatch, c.fetch_seq), (1, 1, 1));
}

/// A second data-box copy whose 8-byte hash is the record's resolves a mismatch: the join's key
/// is `(session, pkt_seq)` and `pkt_hash` (07 §5.4), and a key can hold several copies
/// (`docs/wire.md` "What the box logs"). Not the client's evidence: no CopyMismatch.
#[test]
fn a_data_box_copy_with_the_records_hash_resolves_a_mismatch() {
    let mut d = DataSide::new(cfg(1));
    let mut o = Out::default();
    let first = pkt(5, 9, 1, 1);
    let second = pkt(5, 9, 1, 2);
    d.on_record(0, &rec(5, 9, 1), 0, &mut o).unwrap();
    d.on_data_frame(0, &frame(DataKind::Data, 1, 0, &[&first]), 5, &mut o)
        .unwrap();
    let h = pkt_hash(&second).unwrap();
    assert_eq!(
        d.on_hash(0, key(5, 9), h, 10, &mut o),
        Ok(RecState::Mismatch)
    );
    assert_eq!(o.take(), vec![Ev::Seq(key(5, 9))]);
    d.on_data_frame(0, &frame(DataKind::Data, 2, 0, &[&second]), 11, &mut o)
        .unwrap();
    assert_eq!(d.rec_state(key(5, 9)), Some(RecState::Resolved));
    assert!(
        o.take().is_empty(),
        "no evidence for a data box's own copies"
    );
    assert_eq!(d.payload_for(key(5, 9), h), Some(&second[..]));
    // The same copy again is a duplicate.
    let _ = d.on_data_frame(0, &frame(DataKind::Data, 3, 0, &[&second]), 12, &mut o);
    assert_eq!(d.counters().pkts_refused[4], 1);
    assert_eq!(d.counters().copies_extra, 1);
}

#[test]
fn count_mismatch_goes_to_the_sequencer() {
    let mut d = DataSide::new(cfg(1));
    let mut o = Out::default();
    let data_copy = pkt(5, 1, 1, 0);
    let seq_copy = pkt(5, 1, 2, 0);
    d.on_data_frame(0, &frame(DataKind::Data, 1, 0, &[&data_copy]), 0, &mut o)
        .unwrap();
    // The record says 2 messages; the data copy has 1: a mismatch at the join, before any hash.
    assert_eq!(
        d.on_record(0, &rec(5, 1, 2), 0, &mut o),
        Ok(RecState::Mismatch)
    );
    assert_eq!(o.take(), vec![Ev::Seq(key(5, 1))]);
    assert_eq!(d.counters().mismatch_count, 1);
    // Unanswered: the sequencer is asked again each fetch step, SEQ_TRIES in all, then the
    // packet is unavailable.
    let step = DataTiming::default().fetch_step_ns;
    d.tick(step, &mut o);
    assert_eq!(o.take_fetches(), vec![Ev::Seq(key(5, 1))]);
    // Its hash comes; the sequencer's copy then settles it (count and hash both match).
    d.on_hash(0, key(5, 1), pkt_hash(&seq_copy).unwrap(), step, &mut o)
        .unwrap();
    assert_eq!(
        d.on_fetched(Source::Seq, &seq_copy, step + 1, &mut o),
        Ok(RecState::Resolved)
    );
    let ev = o.take_fetches();
    assert!(matches!(&ev[..], [Ev::Mismatch(m, _, _)] if m.pkt_seq == 1));
    d.tick(10 * step, &mut o);
    assert!(o.take_fetches().is_empty(), "no fetch once resolved");
}

#[test]
fn fetch_order_escalates_with_time() {
    let mut c = cfg(1);
    c.n_peers = 3;
    let mut d = DataSide::new(c);
    let mut o = Out::default();
    d.set_home(1, 2);
    d.set_home(2, 2);
    d.tick(0, &mut o);
    // The home box is heard once, then silent.
    d.on_data_frame(2, &frame(DataKind::DataHb, 0, 2, &[]), 0, &mut o)
        .unwrap();
    let a = pkt(1, 1, 1, 0);
    d.on_record(0, &rec(1, 1, 1), 0, &mut o).unwrap();
    d.on_hash(0, key(1, 1), pkt_hash(&a).unwrap(), 0, &mut o)
        .unwrap();
    let w = DataTiming::default().wait_ns;
    d.tick(w - 1, &mut o);
    assert!(o.take().is_empty());
    // 07 §5.5: the data home, then one peer, then the sequencer.
    d.tick(w, &mut o);
    assert_eq!(o.take(), vec![Ev::Fetch(2, DataFetch::Key(key(1, 1)))]);
    d.tick(2 * w, &mut o);
    assert_eq!(o.take(), vec![Ev::Peer(0, key(1, 1))]);
    d.tick(3 * w - 1, &mut o);
    assert!(o.take_fetches().is_empty());
    d.tick(3 * w, &mut o);
    assert_eq!(o.take_fetches(), vec![Ev::Seq(key(1, 1))]);
    d.tick(4 * w, &mut o);
    d.tick(5 * w, &mut o);
    assert_eq!(
        o.take_fetches(),
        vec![Ev::Seq(key(1, 1)), Ev::Seq(key(1, 1))]
    );
    d.tick(6 * w, &mut o);
    assert_eq!(
        o.take_fetches(),
        vec![Ev::Alarm(DataAlarm::Unavailable { key: key(1, 1) })]
    );
    assert_eq!(d.rec_state(key(1, 1)), Some(RecState::Unavailable));
    d.tick(60 * w, &mut o);
    assert!(o.take_fetches().is_empty(), "unavailable: no more asking");
    // A matching copy that still comes resolves it.
    assert_eq!(
        d.on_fetched(Source::Seq, &a, 60 * w, &mut o),
        Ok(RecState::Resolved)
    );
    // The home is down now (silent 1 ms): the next record goes to a peer first, and the peers
    // go round robin.
    assert!(d.box_down(2));
    d.on_record(0, &rec(2, 1, 1), 60 * w, &mut o).unwrap();
    d.tick(61 * w, &mut o);
    assert_eq!(o.take_fetches(), vec![Ev::Peer(1, key(2, 1))]);
    // A record of a session with no home known also starts at a peer.
    d.on_record(0, &rec(3, 1, 1), 61 * w, &mut o).unwrap();
    d.tick(62 * w, &mut o);
    assert_eq!(
        o.take_fetches(),
        vec![Ev::Seq(key(2, 1)), Ev::Peer(2, key(3, 1))]
    );
    let c = d.counters();
    assert_eq!((c.fetch_home, c.fetch_peer, c.fetch_seq), (1, 3, 4));
    assert_eq!(c.unavailable, 1);
}

#[test]
fn a_wrong_fetched_packet_is_refused() {
    let mut d = DataSide::new(cfg(1));
    let mut o = Out::default();
    let good = pkt(4, 4, 1, 0);
    let bad = pkt(4, 4, 1, 1);
    d.on_record(0, &rec(4, 4, 1), 0, &mut o).unwrap();
    d.on_hash(0, key(4, 4), pkt_hash(&good).unwrap(), 0, &mut o)
        .unwrap();
    assert_eq!(
        d.on_fetched(Source::Peer(1), &bad, 1, &mut o),
        Err(PktRefused::Wrong)
    );
    assert_eq!(
        d.on_fetched(Source::Seq, &pkt(4, 4, 2, 0), 1, &mut o),
        Err(PktRefused::Wrong),
        "count differs"
    );
    assert_eq!(d.rec_state(key(4, 4)), Some(RecState::Missing));
    assert_eq!(d.payload(key(4, 4)), None, "a refused copy is not stored");
    // Nobody asked for this one.
    assert_eq!(
        d.on_fetched(Source::Peer(0), &pkt(8, 1, 1, 0), 1, &mut o),
        Err(PktRefused::Unsolicited)
    );
    assert_eq!(
        d.on_fetched(Source::Peer(0), &good[..good.len() - 1], 1, &mut o),
        Err(PktRefused::Malformed(
            vyrn_wire::msg::client::ReqReject::BadLen
        ))
    );
    assert_eq!(
        d.on_fetched(Source::Peer(1), &good, 2, &mut o),
        Ok(RecState::Resolved)
    );
    assert!(o.take().is_empty());
    let c = d.counters();
    assert_eq!(c.pkts_refused, [1, 0, 1, 2, 0]);
    assert_eq!(c.fetched_ok, 1);
}

#[test]
fn a_wrong_peer_copy_is_replaced_without_evidence() {
    // An unhashed record takes a peer's copy on the key alone; when the hash shows it wrong,
    // the sequencer's copy replaces it, but no CopyMismatch: it was not the client's copy.
    let mut d = DataSide::new(cfg(1));
    let mut o = Out::default();
    let good = pkt(4, 4, 1, 0);
    let bad = pkt(4, 4, 1, 1);
    d.on_record(0, &rec(4, 4, 1), 0, &mut o).unwrap();
    assert_eq!(
        d.on_fetched(Source::Peer(0), &bad, 1, &mut o),
        Ok(RecState::Unhashed)
    );
    d.on_hash(0, key(4, 4), pkt_hash(&good).unwrap(), 2, &mut o)
        .unwrap();
    assert_eq!(o.take(), vec![Ev::Seq(key(4, 4))]);
    assert_eq!(
        d.on_fetched(Source::Seq, &good, 3, &mut o),
        Ok(RecState::Resolved)
    );
    assert!(o.take().is_empty());
    assert_eq!(d.counters().peer_copy_replaced, 1);
}

/// The two substreams' records of one block, Advance records among them, in O-order.
fn two_stream_block(d: &mut DataSide, o: &mut Out) -> [Vec<Vec<u8>>; 2] {
    let mut pkts: [Vec<Vec<u8>>; 2] = Default::default();
    let mut seq = 1;
    for i in 0..40u32 {
        let s = (i % 3 == 0) as u8;
        if i % 7 == 3 {
            d.on_record(s, &advance(), 0, o).unwrap();
            continue;
        }
        let session = 100 + s as u32;
        let p = pkt(session, i + 1, 1 + (i as usize % 10), i);
        d.on_record(s, &rec(session, i + 1, 1 + (i % 10) as u8), 0, o)
            .unwrap();
        d.on_hash(s, key(session, i + 1), pkt_hash(&p).unwrap(), 0, o)
            .unwrap();
        pkts[s as usize].push(p);
    }
    // Payloads arrive in another order than O-order, from two boxes.
    for (s, ps) in pkts.iter().enumerate() {
        for p in ps.iter().rev() {
            d.on_data_frame(s as u8, &frame(DataKind::Data, seq, s as u8, &[p]), 0, o)
                .unwrap();
        }
        seq += ps.len() as u64;
    }
    pkts
}

#[test]
fn data_root_is_the_sequencers() {
    let mut d = DataSide::new(cfg(2));
    let mut o = Out::default();
    let pkts = two_stream_block(&mut d, &mut o);
    d.on_mark(0, 1).unwrap();
    assert_eq!(d.block_payloads(1), BlockPayloads::Unknown, "B not marked");
    d.on_mark(1, 1).unwrap();
    assert_eq!(d.block_payloads(1), BlockPayloads::Ready);
    // The sequencer's order hasher (seq/src/hasher.rs): wire's DataRootHasher over each
    // substream's full hashes in O-order, then header::data_root.
    let mut halves = [empty_root(); 2];
    for (s, ps) in pkts.iter().enumerate() {
        let mut h = DataRootHasher::default();
        for p in ps {
            h.push(&full_hash(p).unwrap());
        }
        halves[s] = h.finish();
    }
    let seq_root = data_root(&halves[0], &halves[1]);
    // And by the definition of 07 §6.1, with blake3 alone: BLAKE3 of the concatenated hashes.
    let by_def: Vec<Hash> = pkts
        .iter()
        .map(|ps| {
            let cat: Vec<u8> = ps.iter().flat_map(|p| full_hash(p).unwrap()).collect();
            *blake3::hash(&cat).as_bytes()
        })
        .collect();
    let mut both = by_def[0].to_vec();
    both.extend_from_slice(&by_def[1]);
    assert_eq!(*blake3::hash(&both).as_bytes(), seq_root);
    let r = d.data_root(1).unwrap();
    assert_eq!(r.halves, halves);
    assert_eq!(r.data_root, seq_root);
    assert_eq!(d.check_data_root(1, &seq_root, &mut o), RootCheck::Match);
    // Released: gone.
    d.release_through(1);
    assert_eq!(d.block_payloads(1), BlockPayloads::Unknown);
    assert_eq!(d.rec_state(key(100, 2)), None);
    // One substream: data_root_B is BLAKE3 of nothing; an empty block has the empty root.
    let mut d = DataSide::new(cfg(1));
    d.on_mark(0, 5).unwrap();
    let e = d.data_root(5).unwrap();
    assert_eq!(e.halves, [empty_root(), empty_root()]);
    assert_eq!(e.data_root, data_root(&empty_root(), &empty_root()));
    assert_eq!(d.on_mark(0, 5), Err(RecordRefused::HeightOrder));
}

#[test]
fn data_root_mismatch_asks_for_the_hash_list() {
    let mut d = DataSide::new(cfg(2));
    let mut o = Out::default();
    let pkts = two_stream_block(&mut d, &mut o);
    d.on_mark(0, 1).unwrap();
    d.on_mark(1, 1).unwrap();
    o.take();
    let mut lists: Vec<Vec<Hash>> = pkts
        .iter()
        .map(|ps| ps.iter().map(|p| full_hash(p).unwrap()).collect())
        .collect();
    // The sequencer's list differs in one entry of B (a birthday collision on the 8-byte
    // hash: same pkt_hash, other full hash); its header's root is the list's.
    lists[1][2] = [0xAB; 32];
    let root_of = |l: &[Vec<Hash>]| {
        let h: Vec<Hash> = l
            .iter()
            .map(|x| {
                let mut d = DataRootHasher::default();
                x.iter().for_each(|h| d.push(h));
                d.finish()
            })
            .collect();
        data_root(&h[0], &h[1])
    };
    let header_root = root_of(&lists);
    assert_eq!(
        d.check_data_root(1, &header_root, &mut o),
        RootCheck::Pending
    );
    assert_eq!(o.take(), vec![Ev::HashList(1)]);
    // Asked once.
    assert_eq!(
        d.check_data_root(1, &header_root, &mut o),
        RootCheck::Pending
    );
    assert!(o.take().is_empty());
    // A list for a height not asked for is refused.
    let stray = HashList::split(9, 0, &lists[0]);
    assert_eq!(
        d.on_hash_list(&stray[0], 0, &mut o),
        Err(PktRefused::Unsolicited)
    );
    for (s, l) in lists.iter().enumerate() {
        for part in HashList::split(1, s as u8, l) {
            d.on_hash_list(&part, 0, &mut o).unwrap();
        }
    }
    // Entry by entry: the one differing record waits for the sequencer's copy.
    let k = key(101, pkts_key(&pkts[1][2]));
    assert_eq!(o.take(), vec![Ev::Seq(k)]);
    assert_eq!(d.rec_state(k), Some(RecState::Mismatch));
    assert_eq!(
        d.block_payloads(1),
        BlockPayloads::Pending {
            missing: 0,
            unhashed: 0,
            mismatch: 1
        }
    );
    assert_eq!(
        d.check_data_root(1, &header_root, &mut o),
        RootCheck::Pending
    );
    // Our own copy again is no settlement; nor is a copy that misses the list's entry.
    assert_eq!(
        d.on_fetched(Source::Seq, &pkts[1][2], 1, &mut o),
        Err(PktRefused::Duplicate)
    );
    assert_eq!(d.counters().root_mismatch_entries, 1);
}

fn pkts_key(p: &[u8]) -> u32 {
    u32::from_le_bytes([p[8], p[9], p[10], p[11]])
}

#[test]
fn a_hash_list_that_contradicts_is_a_contradiction() {
    let mut d = DataSide::new(cfg(2));
    let mut o = Out::default();
    let pkts = two_stream_block(&mut d, &mut o);
    d.on_mark(0, 1).unwrap();
    d.on_mark(1, 1).unwrap();
    o.take();
    let lists: Vec<Vec<Hash>> = pkts
        .iter()
        .map(|ps| ps.iter().map(|p| full_hash(p).unwrap()).collect())
        .collect();
    // The header's root is not the list's: whatever the list says, the header is wrong.
    let header_root = [7u8; 32];
    assert_eq!(
        d.check_data_root(1, &header_root, &mut o),
        RootCheck::Pending
    );
    for (s, l) in lists.iter().enumerate() {
        for part in HashList::split(1, s as u8, l) {
            d.on_hash_list(&part, 0, &mut o).unwrap();
        }
    }
    assert_eq!(
        o.take(),
        vec![
            Ev::HashList(1),
            Ev::Alarm(DataAlarm::HashListBad { height: 1 })
        ]
    );
    assert_eq!(
        d.check_data_root(1, &header_root, &mut o),
        RootCheck::Contradiction
    );
    // A list of another length than the block's records: a contradiction too.
    let mut d = DataSide::new(cfg(2));
    let pkts = two_stream_block(&mut d, &mut o);
    d.on_mark(0, 1).unwrap();
    d.on_mark(1, 1).unwrap();
    d.check_data_root(1, &header_root, &mut o);
    let short: Vec<Hash> = pkts[0][1..].iter().map(|p| full_hash(p).unwrap()).collect();
    d.on_hash_list(&HashList::split(1, 0, &short)[0], 0, &mut o)
        .unwrap();
    assert_eq!(
        d.check_data_root(1, &header_root, &mut o),
        RootCheck::Contradiction
    );
    assert_eq!(d.counters().hash_list_bad, 1);
}

#[test]
fn store_is_bounded_by_count_and_age() {
    let mut c = cfg(1);
    c.store_max_pkts = 4;
    c.timing.store_age_ns = MS;
    let mut d = DataSide::new(c);
    let mut o = Out::default();
    for i in 1..=6u32 {
        let p = pkt(1, i, 1, 0);
        d.on_data_frame(
            0,
            &frame(DataKind::Data, i as u64, 0, &[&p]),
            i as u64,
            &mut o,
        )
        .unwrap();
    }
    assert_eq!(d.store_len().0, 4);
    assert_eq!(d.payload(key(1, 1)), None);
    assert!(d.payload(key(1, 6)).is_some());
    assert_eq!(d.counters().evicted_room, 2);
    d.tick(MS + 4, &mut o);
    assert_eq!(d.store_len().0, 2, "3 and 4 are 1 ms old");
    d.tick(MS + 6, &mut o);
    assert_eq!(d.store_len(), (0, 0));
    assert_eq!(d.counters().evicted_age, 4);
    // Records are bounded too.
    let mut c = cfg(1);
    c.records_max = 2;
    let mut d = DataSide::new(c);
    d.on_record(0, &rec(1, 1, 1), 0, &mut o).unwrap();
    d.on_record(0, &rec(1, 2, 1), 0, &mut o).unwrap();
    assert_eq!(
        d.on_record(0, &rec(1, 3, 1), 0, &mut o),
        Err(RecordRefused::Full)
    );
    assert_eq!(
        d.on_record(1, &rec(1, 3, 1), 0, &mut o),
        Err(RecordRefused::BadStream)
    );
    d.on_mark(0, 1).unwrap();
    d.release_through(1);
    d.on_record(0, &rec(1, 3, 1), 0, &mut o).unwrap();
}

#[derive(Debug, Clone)]
enum Op {
    Frame(u8, Vec<u8>),
    /// A valid frame with one byte changed.
    Mutated(u8, u64, usize, u8),
    Fetched(u8, Vec<u8>),
    Record(u8, u32, u32, u8, bool),
    Hash(u8, u32, u32, u64),
    Mark(u8, u64),
    Tick(u64),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (0u8..5, proptest::collection::vec(any::<u8>(), 0..300)).prop_map(|(b, v)| Op::Frame(b, v)),
        (0u8..4, 0u64..50, any::<usize>(), any::<u8>())
            .prop_map(|(b, s, i, x)| Op::Mutated(b, s, i, x)),
        (0u8..3, proptest::collection::vec(any::<u8>(), 0..200))
            .prop_map(|(s, v)| Op::Fetched(s, v)),
        (0u8..3, 0u32..4, 0u32..6, 0u8..12, any::<bool>())
            .prop_map(|(s, a, b, c, adv)| Op::Record(s, a, b, c, adv)),
        (0u8..3, 0u32..4, 0u32..6, any::<u64>()).prop_map(|(s, a, b, h)| Op::Hash(s, a, b, h)),
        (0u8..3, 0u64..20).prop_map(|(s, h)| Op::Mark(s, h)),
        (0u64..2_000_000).prop_map(Op::Tick),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Random frames, packets, records and times never panic, and every frame is either
    /// taken or refused and counted.
    #[test]
    fn garbage_never_panics(ops in proptest::collection::vec(op(), 1..80)) {
        let mut d = DataSide::new(cfg(2));
        let mut o = Out::default();
        let mut now = 0u64;
        let mut frames = 0u64;
        for op in ops {
            match op {
                Op::Frame(b, v) => {
                    frames += 1;
                    let _ = d.on_data_frame(b, &v, now, &mut o);
                }
                Op::Mutated(b, s, i, x) => {
                    let p = pkt(1 + (s % 3) as u32, 1 + (s % 5) as u32, 1 + (s % 10) as usize, 0);
                    let mut f = frame(DataKind::Data, s, b, &[&p]);
                    let n = f.len();
                    f[i % n] ^= x;
                    frames += 1;
                    let _ = d.on_data_frame(b, &f, now, &mut o);
                }
                Op::Fetched(s, v) => {
                    let src = match s { 0 => Source::Seq, 1 => Source::Peer(0), _ => Source::Box(1) };
                    let _ = d.on_fetched(src, &v, now, &mut o);
                }
                Op::Record(s, a, b, c, adv) => {
                    let r = if adv { advance() } else { rec(a, b, c) };
                    let _ = d.on_record(s, &r, now, &mut o);
                }
                Op::Hash(s, a, b, h) => {
                    let _ = d.on_hash(s, key(a, b), h, now, &mut o);
                }
                Op::Mark(s, h) => {
                    let _ = d.on_mark(s, h);
                    let _ = d.block_payloads(h);
                    let _ = d.data_root(h);
                    let _ = d.check_data_root(h, &[0; 32], &mut o);
                }
                Op::Tick(dt) => {
                    now += dt;
                    d.tick(now, &mut o);
                }
            }
        }
        let c = d.counters();
        prop_assert_eq!(c.frames.iter().sum::<u64>() + c.refused.iter().sum::<u64>(), frames);
    }
}

/// A replica that starts after its data box (a restart, a late join) fetches the frames before
/// the first one it sees by range, like any gap; a box that comes back after being down starts
/// a new baseline instead (its own restart).
#[test]
fn a_late_replica_fetches_the_boxs_history_by_range() {
    let mut d = DataSide::new(cfg(1));
    let mut o = Out::default();
    let p = pkt(1, 9, 1, 0);
    d.on_data_frame(0, &frame(DataKind::Data, 100, 0, &[&p]), 0, &mut o)
        .unwrap();
    assert_eq!(
        o.take_fetches(),
        vec![Ev::Fetch(0, range(1, 64)), Ev::Fetch(0, range(65, 99))]
    );
    assert_eq!(d.counters().history_gaps, 1);
    // The range answers fill the gap.
    let q = pkt(1, 3, 1, 0);
    d.on_data_frame(0, &frame(DataKind::FetchResp, 3, 0, &[&q]), 10, &mut o)
        .unwrap();
    assert!(d.payload(key(1, 3)).is_some());
    assert_eq!(d.counters().gap_filled, 1);
    // A second box whose first frame is its first: nothing to fetch.
    d.on_data_frame(
        1,
        &frame(DataKind::Data, 1, 1, &[&pkt(2, 1, 1, 0)]),
        20,
        &mut o,
    )
    .unwrap();
    assert!(o.take_fetches().is_empty());
}

/// 07 §5.5 at catch-up scale: key fetches to data homes are paced (FETCH_KEYS_PER_STEP per
/// fetch step) instead of one burst that overflows the box's answer queue; every record is
/// still asked, in order.
#[test]
fn key_fetches_are_paced() {
    let mut d = DataSide::new(cfg(1));
    let mut o = Out::default();
    d.set_home(1, 0);
    d.on_data_frame(0, &frame(DataKind::DataHb, 0, 0, &[]), 0, &mut o)
        .ok();
    d.tick(0, &mut o);
    o.take();
    let n = 3 * FETCH_KEYS_PER_STEP as u32 - 10;
    for i in 1..=n {
        d.on_record(0, &rec(1, i, 1), 0, &mut o).unwrap();
    }
    let w = DataTiming::default().wait_ns;
    let keys = |o: &mut Out| {
        o.take()
            .into_iter()
            .filter_map(|e| match e {
                Ev::Fetch(0, DataFetch::Key(k)) => Some(k.pkt_seq),
                _ => None,
            })
            .collect::<Vec<_>>()
    };
    let mut asked = Vec::new();
    for step in 1..=3u64 {
        // Keep the box alive (it must not be declared down while paced).
        d.on_data_frame(0, &frame(DataKind::DataHb, 0, 0, &[]), step * w, &mut o)
            .ok();
        d.tick(step * w, &mut o);
        let k = keys(&mut o);
        assert!(
            k.len() as u64 <= FETCH_KEYS_PER_STEP,
            "step {step}: {} fetches in one step",
            k.len()
        );
        asked.extend(k);
    }
    assert_eq!(
        asked,
        (1..=n).collect::<Vec<_>>(),
        "every record asked once, in order"
    );
    assert!(d.counters().fetch_paced > 0);
}

/// An unavailable record is not forgotten: every source asked, it is asked again after
/// UNAVAILABLE_RETRY_NS, and a box's late answer resolves it.
#[test]
fn an_unavailable_record_is_asked_again_and_resolves() {
    let mut c = cfg(1);
    c.n_peers = 1;
    let mut d = DataSide::new(c);
    let mut o = Out::default();
    let a = pkt(5, 1, 1, 0);
    d.on_record(0, &rec(5, 1, 1), 0, &mut o).unwrap();
    d.on_hash(0, key(5, 1), pkt_hash(&a).unwrap(), 0, &mut o)
        .unwrap();
    let w = DataTiming::default().wait_ns;
    // No data box heard from: a peer, then the sequencer three times, then unavailable at 5w.
    for k in 1..=5 {
        d.tick(k * w, &mut o);
    }
    assert_eq!(d.rec_state(key(5, 1)), Some(RecState::Unavailable));
    o.take();
    d.tick(5 * w + UNAVAILABLE_RETRY_NS - 1, &mut o);
    assert!(o.take_fetches().is_empty());
    d.tick(5 * w + UNAVAILABLE_RETRY_NS, &mut o);
    assert_eq!(
        o.take_fetches(),
        vec![Ev::Peer(0, key(5, 1))],
        "asked again"
    );
    // The answer comes late from a data box: resolved.
    d.on_data_frame(
        0,
        &frame(DataKind::FetchResp, 0, 0, &[&a]),
        7 * w + UNAVAILABLE_RETRY_NS,
        &mut o,
    )
    .unwrap();
    assert_eq!(d.rec_state(key(5, 1)), Some(RecState::Resolved));
}

/// A payload older than the store's age that a live record still needs (its block not yet
/// voted and replayed — a catching-up replica) stays until the block is released.
#[test]
fn a_payload_a_live_record_needs_outlives_the_ring() {
    let mut c = cfg(1);
    c.timing.store_age_ns = MS;
    let mut d = DataSide::new(c);
    let mut o = Out::default();
    let a = pkt(1, 1, 1, 0);
    let b = pkt(1, 2, 1, 0);
    d.on_data_frame(0, &frame(DataKind::Data, 1, 0, &[&a, &b]), 0, &mut o)
        .unwrap();
    d.on_record(0, &rec(1, 1, 1), 0, &mut o).unwrap();
    d.on_mark(0, 1).unwrap();
    d.tick(2 * MS, &mut o);
    assert!(d.payload(key(1, 1)).is_some(), "pinned by its record");
    assert_eq!(d.payload(key(1, 2)), None, "no record: aged out");
    assert_eq!(d.counters().age_pinned, 1);
    d.release_through(1);
    assert_eq!(d.payload(key(1, 1)), None, "released with its block");
    assert_eq!(d.store_len(), (0, 0));
}

/// 07 §5.7 `resend_from` as one replica sees a session: the lowest pkt_seq of a record it has
/// not resolved, else one past the highest payload it stored (packets sent to a failed box
/// after that never reached this replica).
#[test]
fn resend_from_is_the_lowest_unresolved_or_the_next_unseen() {
    let mut d = DataSide::new(cfg(1));
    let mut o = Out::default();
    assert_eq!(d.resend_from(10), 1, "nothing seen: from the first packet");
    d.set_home(10, 0);
    assert_eq!(d.home(10), Some(0));
    let p1 = pkt(10, 1, 1, 0);
    let p2 = pkt(10, 2, 1, 0);
    let p4 = pkt(10, 4, 1, 0);
    d.on_data_frame(0, &frame(DataKind::Data, 1, 0, &[&p1, &p2]), 10, &mut o)
        .unwrap();
    d.on_record(0, &rec(10, 1, 1), 20, &mut o).unwrap();
    d.on_hash(0, key(10, 1), pkt_hash(&p1).unwrap(), 30, &mut o)
        .unwrap();
    d.on_record(0, &rec(10, 2, 1), 20, &mut o).unwrap();
    assert_eq!(
        d.resend_from(10),
        3,
        "1 resolved, 2 joined: the next unseen"
    );
    // Record 3 ordered, its payload never came; 4's payload came.
    d.on_record(0, &rec(10, 3, 1), 40, &mut o).unwrap();
    d.on_data_frame(0, &frame(DataKind::Data, 2, 0, &[&p4]), 50, &mut o)
        .unwrap();
    assert_eq!(d.resend_from(10), 3, "the lowest unresolved record");
    assert_eq!(d.resend_from(11), 1, "another session is its own");
    d.set_home(10, 1);
    assert_eq!(d.home(10), Some(1), "moved to its backup home");
}

/// `docs/wire.md` "What the box logs": a packet answered at packet level (a resend, a
/// duplicate, BAD_SEQ) is logged with count 1 whatever its messages; its record joins the copy
/// with its own hash. Several records of one key — the new packet, its resend, a packet ahead
/// of sequence later filled in — resolve together, for 2- and 10-message packets.
#[test]
fn packet_level_records_of_multi_message_packets_resolve() {
    for n in [2usize, 10] {
        let mut d = DataSide::new(cfg(1));
        let mut o = Out::default();
        let p = pkt(3, 5, n, 0);
        let h = pkt_hash(&p).unwrap();
        d.on_data_frame(0, &frame(DataKind::Data, 1, 0, &[&p]), 0, &mut o)
            .unwrap();
        // BAD_SEQ first (count 1), then the packet new (count n), then its resend (count 1).
        for (i, count) in [1u8, n as u8, 1].into_iter().enumerate() {
            d.on_record(0, &rec(3, 5, count), 10 + i as u64, &mut o)
                .unwrap();
        }
        for i in 0..3 {
            assert_eq!(
                d.on_hash(0, key(3, 5), h, 20 + i, &mut o),
                Ok(RecState::Resolved),
                "{n} messages, record {i}"
            );
        }
        d.on_mark(0, 1).unwrap();
        assert_eq!(d.block_payloads(1), BlockPayloads::Ready, "{n} messages");
        assert!(o.take().is_empty(), "nothing fetched");
        let c = d.counters();
        assert_eq!((c.resolved, c.mismatch_count), (3, 0));
        // A record of another count that is not 1 still mismatches (07 §5.4).
        d.on_record(0, &rec(3, 5, 3), 30, &mut o).unwrap();
        assert_eq!(
            d.on_hash(0, key(3, 5), h, 31, &mut o),
            Ok(RecState::Mismatch)
        );
        assert_eq!(d.counters().mismatch_count, 1);
    }
}

/// A conflicting duplicate: the box logged two packets under one `(session, pkt_seq)`; the data
/// box forwarded the first only (07 §5.2). The second record's copy comes from the sequencer by
/// key and hash; both records resolve, each with its own copy, and `data_root` covers both.
#[test]
fn a_conflicting_duplicate_resolves_with_its_own_copy() {
    let mut d = DataSide::new(cfg(1));
    let mut o = Out::default();
    let first = pkt(6, 2, 3, 0);
    let second = pkt(6, 2, 2, 1);
    let (h1, h2) = (pkt_hash(&first).unwrap(), pkt_hash(&second).unwrap());
    d.on_data_frame(0, &frame(DataKind::Data, 1, 0, &[&first]), 0, &mut o)
        .unwrap();
    d.on_record(0, &rec(6, 2, 3), 1, &mut o).unwrap();
    d.on_record(0, &rec(6, 2, 1), 2, &mut o).unwrap();
    assert_eq!(
        d.on_hash(0, key(6, 2), h1, 3, &mut o),
        Ok(RecState::Resolved)
    );
    // The second record's hash: the held copy is not its own → the sequencer, named by hash.
    assert_eq!(
        d.on_hash(0, key(6, 2), h2, 4, &mut o),
        Ok(RecState::Mismatch)
    );
    assert_eq!(o.take(), vec![Ev::Seq(key(6, 2))]);
    d.on_mark(0, 1).unwrap();
    assert!(matches!(
        d.block_payloads(1),
        BlockPayloads::Pending { mismatch: 1, .. }
    ));
    // A third copy nobody logged, from the sequencer: refused.
    assert_eq!(
        d.on_fetched(Source::Seq, &pkt(6, 2, 1, 7), 5, &mut o),
        Err(PktRefused::Wrong)
    );
    assert_eq!(
        d.on_fetched(Source::Seq, &second, 6, &mut o),
        Ok(RecState::Resolved)
    );
    assert_eq!(d.block_payloads(1), BlockPayloads::Ready);
    // Each record reads its own copy; the key's first copy is still the data box's.
    assert_eq!(d.payload_for(key(6, 2), h1), Some(&first[..]));
    assert_eq!(d.payload_for(key(6, 2), h2), Some(&second[..]));
    assert_eq!(d.payload(key(6, 2)), Some(&first[..]));
    let mut r = DataRootHasher::default();
    r.push(&full_hash(&first).unwrap());
    r.push(&full_hash(&second).unwrap());
    assert_eq!(
        d.data_root(1).unwrap().data_root,
        data_root(&r.finish(), &empty_root())
    );
    // The block's packets for the journal: each record's own copy, in order.
    let mut got = Vec::new();
    assert!(d.block_packets(1, |h, b| got.push((h, b.to_vec()))));
    assert_eq!(got, vec![(h1, first.clone()), (h2, second.clone())]);
    // Unasked distinct copies from a data box are bounded per key.
    for salt in 10..20 {
        let _ = d.on_data_frame(
            0,
            &frame(DataKind::FetchResp, 0, 0, &[&pkt(6, 2, 1, salt)]),
            7,
            &mut o,
        );
    }
    let c = d.counters();
    assert_eq!(c.copies_refused, 10 - EXTRA_COPIES_MAX as u64 + 1);
    assert_eq!(d.store_len().0, 1 + EXTRA_COPIES_MAX);
}

/// Security review F1: one 24-byte DATA_HB with `data_seq = u64::MAX` — as the first frame of a
/// box, and after others — never loops on the sender's number: the first is a bounded history
/// gap (the newest GAP_FRAMES_MAX frames, in FETCH_RANGE_FRAMES requests), the second is refused
/// as too far ahead; nothing panics.
#[test]
fn a_heartbeat_at_the_end_of_data_seq_asks_a_bounded_range() {
    let mut d = DataSide::new(cfg(1));
    let mut o = Out::default();
    d.on_data_frame(0, &frame(DataKind::DataHb, u64::MAX, 0, &[]), 0, &mut o)
        .unwrap();
    let asks = o.take_fetches();
    assert_eq!(asks.len() as u64, GAP_FRAMES_MAX / FETCH_RANGE_FRAMES);
    assert_eq!(
        asks.last(),
        Some(&Ev::Fetch(
            0,
            range(u64::MAX - FETCH_RANGE_FRAMES + 1, u64::MAX)
        ))
    );
    assert_eq!(d.counters().gap_clamped, 1);
    // Box 1: some frames, then the heartbeat at u64::MAX — refused, nothing asked.
    for s in 1..=3 {
        d.on_data_frame(1, &frame(DataKind::Data, s, 1, &[]), 1, &mut o)
            .unwrap();
    }
    assert_eq!(
        d.on_data_frame(1, &frame(DataKind::DataHb, u64::MAX, 1, &[]), 2, &mut o),
        Err(DataRefused::TooFarAhead)
    );
    assert!(o.take_fetches().is_empty());
    // A heartbeat exactly at the bound is a gap of GAP_FRAMES_MAX frames at most.
    d.on_data_frame(
        1,
        &frame(DataKind::DataHb, 3 + DATA_AHEAD_MAX, 1, &[]),
        3,
        &mut o,
    )
    .unwrap();
    assert_eq!(
        o.take_fetches().len() as u64,
        GAP_FRAMES_MAX / FETCH_RANGE_FRAMES
    );
}

/// A replica far behind asks at most FETCH_IN_FLIGHT_MAX keys whose answers have not come,
/// and a source gets longer before the next one is asked while many are out (a restarted
/// replica's fetch storm overflowed its own sockets: cli/tests/up.rs's lost-consensus restart
/// never caught up). Answers free the window; the rest are asked then.
#[test]
fn key_fetches_in_flight_are_bounded_and_answers_free_the_window() {
    let mut d = DataSide::new(cfg(1));
    let mut o = Out::default();
    d.set_home(1, 0);
    let hb = |d: &mut DataSide, o: &mut Out, t| {
        d.on_data_frame(0, &frame(DataKind::DataHb, 0, 0, &[]), t, o)
            .ok();
    };
    hb(&mut d, &mut o, 0);
    d.tick(0, &mut o);
    o.take();
    let n = 3 * FETCH_IN_FLIGHT_MAX as u32;
    for i in 1..=n {
        d.on_record(0, &rec(1, i, 1), 0, &mut o).unwrap();
    }
    let w = DataTiming::default().wait_ns;
    let mut asked = 0u64;
    for step in 1..=40u64 {
        hb(&mut d, &mut o, step * w);
        d.tick(step * w, &mut o);
        asked += o
            .take()
            .iter()
            .filter(|e| {
                matches!(
                    e,
                    Ev::Fetch(0, DataFetch::Key(_)) | Ev::Peer(..) | Ev::Seq(..)
                )
            })
            .count() as u64;
    }
    // Nothing answered: the asks out never exceed the window (each ask of a record expires
    // before the next; the stretched steps keep the total far below one ask per record a step).
    assert!(asked >= FETCH_IN_FLIGHT_MAX, "{asked}");
    assert!(asked < 40 * FETCH_KEYS_PER_STEP, "a storm: {asked} asks");
    // The first records' payloads come: they resolve, and later records are asked.
    for i in 1..=64u32 {
        d.on_data_frame(
            0,
            &frame(DataKind::FetchResp, 0, 0, &[&pkt(1, i, 1, 0)]),
            41 * w,
            &mut o,
        )
        .unwrap();
    }
    assert_eq!(d.rec_state(key(1, 1)), Some(RecState::Unhashed));
}

/// The seal block (07 §9.4) is the records after each substream's last BlockMark: its
/// `data_root` is §6.1's over them, the same as the root a BlockMark there would have closed.
#[test]
fn the_open_blocks_data_root_is_the_root_its_mark_would_close() {
    let mut d = DataSide::new(cfg(2));
    let mut o = Out::default();
    // Block 1 marked, then block 2's records with no mark (the sequencer died).
    two_stream_block(&mut d, &mut o);
    d.on_mark(0, 1).unwrap();
    d.on_mark(1, 1).unwrap();
    let p = pkt(300, 1, 3, 9);
    d.on_record(0, &rec(300, 1, 3), 0, &mut o).unwrap();
    assert_eq!(d.open_data_root(2), None, "a record not resolved");
    d.on_hash(0, key(300, 1), pkt_hash(&p).unwrap(), 0, &mut o)
        .unwrap();
    d.on_data_frame(0, &frame(DataKind::Data, 100, 0, &[&p]), 0, &mut o)
        .unwrap();
    d.on_record(1, &advance(), 0, &mut o).unwrap();
    let open = d.open_data_root(2).expect("every record resolved");
    assert_eq!(
        d.open_data_root(3),
        None,
        "its last mark is not height 2's parent"
    );
    let mut a = DataRootHasher::default();
    a.push(&full_hash(&p).unwrap());
    assert_eq!(open.halves, [a.finish(), empty_root()]);
    // The mark, had it come, closes the same root.
    d.on_mark(0, 2).unwrap();
    d.on_mark(1, 2).unwrap();
    assert_eq!(d.data_root(2), Some(open));
}

/// 07 §9.3 item 4: at the seal a record with no HashRun takes its payload by key alone — the
/// one distinct copy held (copies differing only in `flags`, a client's resend, are one); none
/// held, or two different copies (a client that equivocated, 07 §9.6 case d), leave it waiting.
#[test]
fn a_payload_by_key_alone_is_the_one_distinct_copy_held() {
    use vyrn_engine::home::Payloads;
    use vyrn_engine::KeyOnly;
    let mut d = DataSide::new(cfg(1));
    let mut o = Out::default();
    let a = pkt(10, 1, 2, 0);
    let mut a_resend = a.clone();
    a_resend[3] |= vyrn_wire::msg::client::REQ_FLAG_RESEND;
    let (b, b_other) = (pkt(10, 2, 1, 0), pkt(10, 2, 1, 7));
    d.on_data_frame(0, &frame(DataKind::Data, 1, 0, &[&a, &b]), 10, &mut o)
        .unwrap();
    d.on_data_frame(
        1,
        &frame(DataKind::Data, 1, 1, &[&a_resend, &b_other]),
        20,
        &mut o,
    )
    .unwrap();
    assert_eq!(d.payload_by_key(10, 1), KeyOnly::Held(&a[..]));
    assert_eq!(d.payload_by_key(10, 2), KeyOnly::Ambiguous);
    assert_eq!(d.payload_by_key(10, 3), KeyOnly::NotHeld);
    assert_eq!(d.payload_by_key(11, 1), KeyOnly::NotHeld);
}

/// The seal's `data_root` (07 §9.4) over a tail that spans marks: every record after
/// `BlockMark(H*)`, whatever marks follow, as §6.1 — a record left unhashed with the one copy
/// its key holds (§9.3 item 4); none while its key holds two different copies, or once the
/// blocks after `H*` are released.
#[test]
fn the_seal_data_root_spans_the_blocks_after_h_star() {
    let mut d = DataSide::new(cfg(1));
    let mut o = Out::default();
    let p: Vec<Vec<u8>> = (1..=4).map(|q| pkt(10, q, 1, 0)).collect();
    let refs: Vec<&[u8]> = p.iter().map(|v| v.as_slice()).collect();
    d.on_data_frame(0, &frame(DataKind::Data, 1, 0, &refs), 10, &mut o)
        .unwrap();
    let hashed = |d: &mut DataSide, o: &mut Out, q: u32| {
        d.on_record(0, &rec(10, q, 1), 0, o).unwrap();
        d.on_hash(0, key(10, q), pkt_hash(&p[q as usize - 1]).unwrap(), 0, o)
            .unwrap();
    };
    // Block 1: packet 1. Block 2: packet 2. The tail after BlockMark(2): packet 3 hashed,
    // packet 4 never hashed (the box died before its HashRun).
    hashed(&mut d, &mut o, 1);
    d.on_mark(0, 1).unwrap();
    hashed(&mut d, &mut o, 2);
    d.on_mark(0, 2).unwrap();
    hashed(&mut d, &mut o, 3);
    d.on_record(0, &rec(10, 4, 1), 0, &mut o).unwrap();
    let root = |fulls: &[usize]| {
        let mut h = DataRootHasher::default();
        for &i in fulls {
            h.push(&full_hash(&p[i - 1]).unwrap());
        }
        data_root(&h.finish(), &empty_root())
    };
    let dr = |d: &DataSide, h| d.tail_data_root(h, &[]).map(|r| r.data_root);
    assert_eq!(dr(&d, 2), Some(root(&[3, 4])), "after the last mark");
    assert_eq!(dr(&d, 1), Some(root(&[2, 3, 4])), "spanning BlockMark(2)");
    assert_eq!(
        dr(&d, 0),
        Some(root(&[1, 2, 3, 4])),
        "from the tenure's start"
    );
    // A second, different copy of packet 4: ambiguous by key, no root.
    let other = pkt(10, 4, 1, 9);
    d.on_data_frame(1, &frame(DataKind::Data, 1, 1, &[&other]), 20, &mut o)
        .unwrap();
    assert_eq!(dr(&d, 2), None);
    // Blocks released past H*: the tail after it is gone.
    d.release_through(1);
    assert_eq!(dr(&d, 0), None);
}

/// 07 §9.3 item 4 after the seal: a record of the sealed prefix the dead box never hashed, whose
/// copy was not held when the seal became final (its data box late, a peer's answer on its way),
/// is resolved by key alone when the copy comes — before, it stayed `Unhashed` for ever and the
/// replay (a promoted standby's included) waited on it. A record of the next tenure, unhashed
/// with its copy in, still waits for its HashRun.
#[test]
fn a_sealed_records_copy_that_comes_after_the_seal_resolves_it_by_key() {
    /// [`Out`], and the records resolved.
    #[derive(Default)]
    struct Resolved(Vec<(u8, u64, Vec<u8>)>, Out);
    impl DataOut for Resolved {
        fn data_fetch(&mut self, d: u8, f: &DataFetch) {
            self.1.data_fetch(d, f)
        }
        fn peer_data_fetch(&mut self, peer: usize, key: PktKey, h: u64) {
            self.1.peer_data_fetch(peer, key, h)
        }
        fn seq_data_req(&mut self, key: PktKey, h: u64) {
            self.1.seq_data_req(key, h)
        }
        fn hash_list_req(&mut self, r: &HashListReq) {
            self.1.hash_list_req(r)
        }
        fn copy_mismatch(&mut self, e: &CopyMismatch, seq_pkt: &[u8], data_pkt: &[u8]) {
            self.1.copy_mismatch(e, seq_pkt, data_pkt)
        }
        fn alarm(&mut self, a: DataAlarm) {
            self.1.alarm(a)
        }
        fn resolved(&mut self, lane: u8, first_lane_seq: u64, bytes: &[u8]) {
            self.0.push((lane, first_lane_seq, bytes.to_vec()));
        }
    }
    let mut d = DataSide::new(cfg(1));
    let mut o = Resolved::default();
    let late = pkt(5, 9, 1, 1);
    let mut r = rec(5, 9, 1);
    r.first_lane_seq = 7;
    d.on_record(0, &r, 0, &mut o).unwrap();
    // The seal: no copy of (5, 9) held, nothing resolved by key.
    assert_eq!(d.seal(0, 1, &[], 0, &mut o), 0);
    assert_eq!(d.rec_state(key(5, 9)), Some(RecState::Missing));
    // The next tenure's record of another key, its copy in, no HashRun yet.
    let next = pkt(6, 1, 1, 1);
    d.on_record(0, &rec(6, 1, 1), 2, &mut o).unwrap();
    d.on_data_frame(0, &frame(DataKind::Data, 1, 0, &[&next, &late]), 3, &mut o)
        .unwrap();
    assert_eq!(d.rec_state(key(5, 9)), Some(RecState::Resolved));
    assert_eq!(d.rec_state(key(6, 1)), Some(RecState::Unhashed));
    assert_eq!(o.0, vec![(0, 7, late.clone())]);
    assert_eq!(d.counters().resolved_after_seal, 1);
}
