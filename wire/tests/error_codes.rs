//! One crafted case (at least) per `REP_E_*` code of 07 §3.12, each checked for its code and
//! position, and that the decoder neither panics nor carries on past the error.

use vyrn_wire::records::*;
use vyrn_wire::*;

const BASE: u64 = 100;
const RX0: u64 = 1_000_000;

fn layout() -> Layout {
    Layout::reference()
}

fn ts(stream: u8, tenure: u8) -> Vec<u8> {
    let l = layout();
    let n = l.half_len(stream);
    let t = TenureStart {
        epoch: 5,
        tenure,
        sender: 0,
        first_step: 1,
        first_height: 1,
        prev_header_hash: [0; 32],
        lanes: vec![
            LaneBase {
                next_lane_seq: BASE,
                rx_ts_base: RX0,
                fills_applied_base: 0
            };
            n
        ],
        prev_cut: vec![BASE - 1; n],
    };
    let mut b = Vec::new();
    t.encode(&mut b);
    b
}

fn frame(stream: u8, seq: u64, kind: FrameKind, body: &[u8]) -> Vec<u8> {
    let h = FrameHeader {
        kind,
        book: 1,
        epoch16: 5,
        frame_seq: seq,
        flags: 0,
        tenure: 0,
        body_len: body.len() as u16,
        sender: 0,
        stream,
    };
    let mut f = h.to_bytes().to_vec();
    f.extend_from_slice(body);
    f
}

/// A started decoder: TenureStart on both substreams, lane 3 (A) and lane 30 (B) each with one
/// 10-message packet (slot 0 bound to session 9), lane 4 with a SHED packet of 2 messages.
fn started(sink: &mut impl Sink) -> DecState {
    let mut d = DecState::new(layout()).unwrap();
    let mut a1 = ts(0, 0);
    encode_session_bind(
        &SessionBind {
            lane: 3,
            slot: 0,
            session: 9,
            next_pkt_seq: 1,
        },
        &mut a1,
    );
    encode_session_bind(
        &SessionBind {
            lane: 4,
            slot: 0,
            session: 8,
            next_pkt_seq: 1,
        },
        &mut a1,
    );
    // lane 3: h=10, slot 0, rx +0
    a1.extend_from_slice(&[3, 1, 0x0A, 0x00, 0x00]);
    // lane 4: h = SHED|2, slot 0, rx +0
    a1.extend_from_slice(&[4, 1, 0x82, 0x00, 0x00]);
    d.on_frame(&frame(0, 1, FrameKind::Order, &a1), 0, sink)
        .unwrap();
    let mut b1 = ts(1, 0);
    encode_session_bind(
        &SessionBind {
            lane: 30,
            slot: 0,
            session: 7,
            next_pkt_seq: 1,
        },
        &mut b1,
    );
    b1.extend_from_slice(&[30, 1, 0x0A, 0x00, 0x00]);
    d.on_frame(&frame(1, 1, FrameKind::Order, &b1), 0, sink)
        .unwrap();
    d
}

fn expect(stream: u8, body: &[u8], kind: FrameKind, code: RepE) -> RepErr {
    let mut d = started(&mut NullSink);
    let e = d
        .on_frame(&frame(stream, 2, kind, body), 0, &mut NullSink)
        .unwrap_err();
    assert_eq!(e.code, code, "{e}");
    assert_eq!(
        (e.stream, e.frame_seq, e.epoch, e.tenure),
        (stream, 2, 5, 0)
    );
    // The substream stays stopped with the same error.
    let again = d.on_frame(
        &frame(stream, 3, FrameKind::Heartbeat, &[0; 24]),
        0,
        &mut NullSink,
    );
    assert_eq!(again.unwrap_err(), e);
    assert_eq!(d.failed(stream), Some(e));
    e
}

fn order(stream: u8, body: &[u8], code: RepE) -> RepErr {
    expect(stream, body, FrameKind::Order, code)
}

#[test]
fn rep_e_tag() {
    order(0, &[0x45], RepE::Tag);
    order(0, &[0xFE], RepE::Tag);
    order(0, &[0x41, 3, 1, 0, 0, 0, 0, 0, 0, 0, 0], RepE::Tag); // HashRun in ORDER (wire-decisions 2)
    order(0, &[30, 1, 0x00, 0x00, 0x00], RepE::Tag); // lane of half B on A (wire-decisions 9)
    order(1, &[0x3F, 0], RepE::Tag); // lane 63 >= N_LANES
    expect(0, &[0x40, 0], FrameKind::Hash, RepE::Tag); // StepRun in HASH
    expect(1, &[0; 190], FrameKind::Header, RepE::Tag); // HEADER on B (wire-decisions 24)
    expect(0, &[0x41, 30, 0], FrameKind::Hash, RepE::Tag); // HashRun for the other half
}

#[test]
fn rep_e_count() {
    order(0, &[3, 1, 0x0B, 0x00, 0x00], RepE::Count); // count 11
    order(0, &[3, 1, 0x0F, 0x00, 0x00], RepE::Count); // count 15
    order(0, &[3, 1, 0x00, 0x81, 0x20, 1, 1], RepE::Count); // AcctTake (slot 4097) on a dedicated lane
    order(1, &[42, 1, 0x01, 0x81, 0x20, 1, 1], RepE::Count); // AcctTake with h != 0, pooled lane
    order(0, &[3, 1, 0x00, 0x82, 0x20, 0x00], RepE::Count); // slot 4098 > REP_SLOT_TAKE
    order(0, &[3, 1, 0x01, 0x80, 0x20, 0x00], RepE::Count); // Advance with count 1
    order(0, &[3, 1, 0x80, 0x80, 0x20, 0x00], RepE::Count); // Advance with SHED
    order(0, &[0x43, 3, 0x80, 0x20, 1, 0, 0, 0, 1], RepE::Count); // SessionBind slot 4096
}

#[test]
fn rep_e_ts() {
    // rx_ts − 2e6 below zero: zigzag(-2_000_000) = 3_999_999
    let mut b = vec![3, 1, 0x00, 0x00];
    vyrn_wire::leb::push_u64(&mut b, vyrn_wire::leb::zigzag(-2_000_000));
    order(0, &b, RepE::Ts);
}

#[test]
fn rep_e_kind() {
    order(0, &[0x40, 1, 0x19, 0x00, 0xFF], RepE::Kind); // kind 9
    order(0, &[0x40, 1, 0x10, 0x00, 0xFF], RepE::Kind); // Cross with src none
    order(0, &[0x40, 1, 0x14, 0x00, 3, 0], RepE::Kind); // Idle with a src
    order(0, &[0x40, 1, 0x17, 0x00, 0xFF, 1, 0xAA], RepE::Kind); // Seal with plen 1 (wire-decisions 4)
    order(
        0,
        &[0x40, 1, 0x24, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01],
        RepE::Kind,
    ); // cut-only without OTHER
       // Shed step whose src op (lane 4, LaneSeq 100) sits in a SHED packet: SAME cut, zigzag(100-99)=2
    order(0, &[0x40, 1, 0x15, 0x00, 4, 0x02], RepE::Kind);
    // Spanning step: home on A with OTHER, then B's next record is a later step.
    let e = a_then_b(
        &[0x40, 1, 0x94, 0x00, 0xFF],
        &[0x40, 1, 0xC4, 0x01, 0x20, 0x00, 0x00, 0x01],
    );
    assert_eq!(e.code, RepE::Kind, "{e}");
    // Kinds of a spanning step's two records differ.
    let e = a_then_b(
        &[0x40, 1, 0x94, 0x00, 0xFF],
        &[0x40, 1, 0xC1, 0x00, 0x20, 0x00, 0x00, 0x01],
    );
    assert_eq!(e.code, RepE::Kind, "{e}");
}

/// Frame 2 of substream A decodes cleanly; frame 2 of B then fails: the error.
fn a_then_b(a: &[u8], b: &[u8]) -> RepErr {
    let mut d = started(&mut NullSink);
    d.on_frame(&frame(0, 2, FrameKind::Order, a), 0, &mut NullSink)
        .unwrap();
    let e = d
        .on_frame(&frame(1, 2, FrameKind::Order, b), 0, &mut NullSink)
        .unwrap_err();
    assert_eq!((e.stream, e.frame_seq), (1, 2));
    e
}

#[test]
fn rep_e_cut() {
    order(0, &[0x40, 1, 0x74, 0x00, 0xFF], RepE::Cut); // mode 3
                                                       // DENSE moving lane 0 by 1: lane 0 has no op above 99.
    let mut dense = vec![0x40, 1, 0x34, 0x00, 0xFF, 1];
    dense.extend(std::iter::repeat_n(0u8, 24));
    order(0, &dense, RepE::Cut);
    order(
        0,
        &[0x40, 1, 0x54, 0x00, 0xFF, 0x08, 0, 0, 0, 0x00],
        RepE::Cut,
    ); // SPARSE delta 0
    order(0, &[0x40, 1, 0x54, 0x00, 0xFF, 0, 0, 0, 0x02], RepE::Cut); // bitmap bit 25 of 25 lanes
    order(1, &[0x40, 1, 0x84, 0x00], RepE::Cut); // cut-only with SAME
    order(0, &[0x40, 1, 0x10, 0x00, 3, 0x16], RepE::Cut); // src_lane_seq 110: no such op (cut 99 + 11)
    order(1, &[0x40, 1, 0x14, 0x00, 0xFF], RepE::Cut); // src none is homed on A, not B
    order(1, &[0x40, 1, 0x10, 0x00, 3, 0x00], RepE::Cut); // src lane 3 on substream B
    order(0, &[0x42, 2, 0, 0, 0, 0, 0], RepE::Cut); // BlockMark height 2, expected 1
    order(0, &[0x42, 1, 0, 0, 0, 0, 0], RepE::Cut); // lane_bounds: lane 3 decoded to 109
}

#[test]
fn rep_e_tenure() {
    let mut d = DecState::new(layout()).unwrap();
    let e = d
        .on_frame(&frame(0, 1, FrameKind::Order, &[0xFF]), 0, &mut NullSink)
        .unwrap_err();
    assert_eq!(e.code, RepE::Tenure);
    let mut d = DecState::new(layout()).unwrap();
    let e = d
        .on_frame(
            &frame(0, 1, FrameKind::Heartbeat, &[0; 24]),
            0,
            &mut NullSink,
        )
        .unwrap_err();
    assert_eq!(e.code, RepE::Tenure);
    order(0, &ts(0, 0), RepE::Tenure); // TenureStart in frame 2
                                       // The two substreams disagree on the tenure.
    let mut d = DecState::new(layout()).unwrap();
    d.on_frame(&frame(0, 1, FrameKind::Order, &ts(0, 0)), 0, &mut NullSink)
        .unwrap();
    let mut f = frame(1, 1, FrameKind::Order, &ts(1, 1));
    f[17] = 1; // the header's tenure agrees with its TenureStart, not with A's
    assert_eq!(
        d.on_frame(&f, 0, &mut NullSink).unwrap_err().code,
        RepE::Tenure
    );
    // A later frame under another tenure.
    let mut d = started(&mut NullSink);
    let mut f = frame(0, 2, FrameKind::Heartbeat, &[0; 24]);
    f[17] = 3;
    assert_eq!(
        d.on_frame(&f, 0, &mut NullSink).unwrap_err().code,
        RepE::Tenure
    );
}

#[test]
fn rep_e_hashlag() {
    // Lane 3 awaits one hash; a run of two is out of step.
    let mut b = vec![0x41, 3, 2];
    b.extend_from_slice(&[0; 16]);
    expect(0, &b, FrameKind::Hash, RepE::HashLag);
    // A record whose substream goes on delivering frames for more than 1 ms without its hash.
    let mut d = started(&mut NullSink);
    d.tick(REP_HASHLAG_NS_OK).unwrap();
    // Deliveries 0.6 ms apart (no stall): 1.2 ms of them without the hash.
    heartbeat(&mut d, 2, 600_000);
    d.tick(600_000).unwrap();
    heartbeat(&mut d, 3, 1_200_000);
    let e = d.tick(1_200_000).unwrap_err();
    assert_eq!(e.code, RepE::HashLag);
    assert_eq!(e.frame_seq, 1);
    // A substream that delivers nothing (a hole under repair, a catching-up replica) makes no
    // record late, however long the wall clock runs: the sequencer is not at fault.
    let mut d = started(&mut NullSink);
    d.tick(10_000_000_000).unwrap();
    heartbeat(&mut d, 2, 10_000_000_000);
    // The stall is not counted: the record has waited 0 s of deliveries so far.
    d.tick(10_000_000_000).unwrap();
    // Deliveries go on without the hash: past the budget it is the sequencer's fault.
    heartbeat(&mut d, 3, 10_000_500_000);
    d.tick(10_000_500_000).unwrap();
    heartbeat(&mut d, 4, 10_001_000_001);
    assert_eq!(d.tick(10_001_000_001).unwrap_err().code, RepE::HashLag);
}

const REP_HASHLAG_NS_OK: u64 = 999_999;

/// Substream 0's heartbeat frame `seq`, decoded at `t_ns`.
fn heartbeat(d: &mut DecState, seq: u64, t_ns: u64) {
    d.on_frame(
        &frame(0, seq, FrameKind::Heartbeat, &[0; 24]),
        t_ns,
        &mut NullSink,
    )
    .unwrap();
}

/// The hash-lag clock of a substream never runs back (07 §3.7): a frame stamped before one
/// already decoded (a live datagram that waited in the socket behind frames read back from
/// the order journal, stamped at their decode) dates its records no earlier than that frame.
/// Dated by its own stamp, the record looked 5 ms late at once.
#[test]
fn rep_e_hashlag_is_not_raised_by_a_frame_stamped_before_one_already_decoded() {
    let mut a1 = ts(0, 0);
    encode_session_bind(
        &SessionBind {
            lane: 3,
            slot: 0,
            session: 9,
            next_pkt_seq: 1,
        },
        &mut a1,
    );
    let mut d = DecState::new(layout()).unwrap();
    d.on_frame(
        &frame(0, 1, FrameKind::Order, &a1),
        5_000_000,
        &mut NullSink,
    )
    .unwrap();
    // lane 3: h=10, slot 0, rx +0 — in a frame stamped 0.
    d.on_frame(
        &frame(0, 2, FrameKind::Order, &[3, 1, 0x0A, 0x00, 0x00]),
        0,
        &mut NullSink,
    )
    .unwrap();
    d.tick(5_000_000).unwrap();
    // Deliveries go on without its hash: late 1 ms after the newer stamp, not before.
    heartbeat(&mut d, 3, 5_600_000);
    d.tick(5_000_000 + REP_HASHLAG_NS_OK).unwrap();
    heartbeat(&mut d, 4, 6_000_001);
    let e = d.tick(6_000_001).unwrap_err();
    assert_eq!((e.code, e.frame_seq), (RepE::HashLag, 2));
}

#[test]
fn rep_e_frame() {
    order(0, &[3, 1, 0x0A], RepE::Frame); // truncated record
    order(
        0,
        &[
            3, 1, 0x0A, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01,
        ],
        RepE::Frame,
    ); // LEB > 10 bytes
    order(0, &[3, 1, 0x0A, 0x80, 0x80, 0x04, 0x00], RepE::Frame); // slot 65536 too wide for u16
    let mut d = started(&mut NullSink);
    let mut f = frame(0, 2, FrameKind::Order, &[]);
    f[0] = 0;
    assert_eq!(
        d.on_frame(&f, 0, &mut NullSink).unwrap_err().code,
        RepE::Frame
    );
    let mut d = started(&mut NullSink);
    let f = frame(0, 3, FrameKind::Order, &[]);
    assert_eq!(
        d.on_frame(&f, 0, &mut NullSink).unwrap_err().code,
        RepE::Frame
    ); // gap
    let mut d = started(&mut NullSink);
    let mut f = frame(0, 2, FrameKind::Order, &[0xFF]);
    f.push(0); // body_len disagrees
    assert_eq!(
        d.on_frame(&f, 0, &mut NullSink).unwrap_err().code,
        RepE::Frame
    );
}

#[test]
fn records_before_an_error_are_delivered_and_duplicates_dropped() {
    struct Count(u32);
    impl Sink for Count {
        fn pkt(&mut self, _: Pos, _: &PacketRecord) {
            self.0 += 1;
        }
    }
    let mut d = started(&mut NullSink);
    let mut c = Count(0);
    let body = [3, 2, 0x01, 0x00, 0x00, 0x0B, 0x00, 0x00];
    let e = d
        .on_frame(&frame(0, 2, FrameKind::Order, &body), 0, &mut c)
        .unwrap_err();
    assert_eq!(e.code, RepE::Count);
    assert_eq!(c.0, 1, "wire-decisions 26");
    let mut d = started(&mut NullSink);
    let f = frame(1, 2, FrameKind::Heartbeat, &[0; 24]);
    d.on_frame(&f, 0, &mut NullSink).unwrap();
    d.on_frame(&f, 0, &mut NullSink).unwrap();
    assert_eq!(d.counters().dup_frames, 1);
}

#[test]
fn implied_exception_values_are_accepted() {
    // wire-decisions 16: SEQ_EXC with the expected pkt_seq, FA_NZ and LSEQ_EXC deltas of 0.
    let mut d = started(&mut NullSink);
    let body = [3, 1, 0x71, 0x00, 0x00, 0x00, 0x00, 0x02];
    d.on_frame(&frame(0, 2, FrameKind::Order, &body), 0, &mut NullSink)
        .unwrap();
}
