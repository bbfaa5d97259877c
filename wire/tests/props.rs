//! Property tests: encoder output always decodes to the records it encoded, LEB128 agrees with
//! an independent implementation, and no byte string panics the decoder.

use proptest::prelude::*;
use vyrn_wire::leb::{len_u64, put_u64, unzigzag, zigzag, Reader};
use vyrn_wire::records::*;
use vyrn_wire::*;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn leb_matches_the_leb128_crate(v in any::<u64>()) {
        let mut ours = [0u8; 10];
        let mut p = 0;
        put_u64(&mut ours, &mut p, v);
        let mut theirs = Vec::new();
        leb128::write::unsigned(&mut theirs, v).unwrap();
        prop_assert_eq!(&ours[..p], &theirs[..]);
        prop_assert_eq!(p, len_u64(v));
        prop_assert_eq!(Reader::new(&ours[..p]).leb_u64().unwrap(), v);
    }

    #[test]
    fn zigzag_round_trips(v in any::<i64>()) {
        prop_assert_eq!(unzigzag(zigzag(v)), v);
    }

    #[test]
    fn leb_reader_never_panics(b in proptest::collection::vec(any::<u8>(), 0..16)) {
        let mut r = Reader::new(&b);
        let _ = r.leb_u64();
        let _ = r.leb_u16();
        let _ = r.zigzag_i64();
    }
}

#[derive(Debug, Clone)]
enum Op {
    Pkt {
        slot: u16,
        count: u8,
        shed: bool,
        seq_jump: Option<u32>,
        dts: i32,
        lgap: u8,
        fa: u8,
    },
    Advance {
        dts: i32,
        fa: u8,
    },
    Bind {
        slot: u16,
        session: u32,
        next: u32,
    },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => (0u16..4096, 0u8..=10, any::<bool>(), proptest::option::weighted(0.2, any::<u32>()), any::<i32>(), prop_oneof![9 => Just(0u8), 1 => 1u8..5], prop_oneof![8 => Just(0u8), 2 => 1u8..50])
            .prop_map(|(slot, count, shed, seq_jump, dts, lgap, fa)| Op::Pkt { slot: slot % 8 * 511, count, shed, seq_jump, dts, lgap, fa }),
        1 => (any::<i32>(), 0u8..3).prop_map(|(dts, fa)| Op::Advance { dts, fa }),
        1 => (0u16..8, any::<u32>(), any::<u32>()).prop_map(|(s, session, next)| Op::Bind { slot: s * 511, session, next }),
    ]
}

#[derive(Default)]
struct Collect {
    pkts: Vec<PacketRecord>,
    steps: Vec<(Step, Vec<u64>, Vec<u8>)>,
}
impl Sink for Collect {
    fn pkt(&mut self, _: Pos, r: &PacketRecord) {
        self.pkts.push(*r);
    }
    fn step(&mut self, s: &Step, cut: &[u64], p: &[u8]) {
        self.steps.push((*s, cut.to_vec(), p.to_vec()));
    }
}

fn frame(stream: u8, seq: u64, body: &[u8]) -> Vec<u8> {
    let h = FrameHeader {
        kind: FrameKind::Order,
        book: 0,
        epoch16: 0,
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

fn tenure(layout: &Layout, stream: u8, next: u64, rx: u64) -> Vec<u8> {
    let n = layout.half_len(stream);
    let t = TenureStart {
        epoch: 0,
        tenure: 0,
        sender: 0,
        first_step: 1,
        first_height: 1,
        prev_header_hash: [0; 32],
        lanes: vec![
            LaneBase {
                next_lane_seq: next,
                rx_ts_base: rx,
                fills_applied_base: 0
            };
            n
        ],
        prev_cut: vec![next - 1; n],
    };
    let mut b = Vec::new();
    t.encode(&mut b);
    b
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Any valid sequence of lane records on lane 2 round-trips through encoder and decoder.
    #[test]
    fn packet_records_round_trip(ops in proptest::collection::vec(op(), 1..60)) {
        let layout = Layout::two_streams(8);
        let rx0 = 1u64 << 40;
        let mut st = LaneState { next_lane_seq: 10, prev_rx_ts: rx0, prev_fills_applied: 0 };
        let mut next = vec![0u32; 4096];
        let mut session = vec![0u32; 4096];
        let mut body = Vec::new();
        let mut expect = Vec::new();
        let (mut rx, mut fa) = (rx0, 0u64);
        for o in &ops {
            let mut out = [0u8; PKT_ENC_MAX];
            match *o {
                Op::Bind { slot, session: s, next: n } => {
                    encode_session_bind(&SessionBind { lane: 2, slot, session: s, next_pkt_seq: n }, &mut body);
                    next[slot as usize] = n;
                    session[slot as usize] = s;
                }
                Op::Advance { dts, fa: dfa } => {
                    rx = rx.wrapping_add_signed(dts as i64);
                    fa += dfa as u64;
                    let first = st.next_lane_seq;
                    let n = encode_lane_op(&mut st, &mut next, &LaneOp::Advance { rx_ts: rx, fills_applied: fa, first_lane_seq: first }, &mut out);
                    body.extend_from_slice(&[2, 1]);
                    body.extend_from_slice(&out[..n]);
                    expect.push(PacketRecord { lane: 2, count: 0, flags: PKT_ADVANCE, session: 0, slot: 4096, pkt_seq: 0, rx_ts: rx, first_lane_seq: first, fills_applied: fa });
                }
                Op::Pkt { slot, count, shed, seq_jump, dts, lgap, fa: dfa } => {
                    rx = rx.wrapping_add_signed(dts as i64);
                    fa += dfa as u64;
                    let first = st.next_lane_seq + lgap as u64;
                    let pkt_seq = seq_jump.unwrap_or(next[slot as usize]);
                    let n = encode_lane_op(&mut st, &mut next, &LaneOp::Pkt { slot, count, shed, pkt_seq, rx_ts: rx, first_lane_seq: first, fills_applied: fa }, &mut out);
                    prop_assert!(n <= PKT_ENC_MAX);
                    body.extend_from_slice(&[2, 1]);
                    body.extend_from_slice(&out[..n]);
                    expect.push(PacketRecord { lane: 2, count, flags: if shed { PKT_SHED } else { 0 }, session: session[slot as usize], slot, pkt_seq, rx_ts: rx, first_lane_seq: first, fills_applied: fa });
                }
            }
        }
        let mut d = DecState::new(layout).unwrap();
        let mut c = Collect::default();
        d.on_frame(&frame(0, 1, &tenure(&layout, 0, 10, rx0)), 0, &mut c).unwrap();
        d.on_frame(&frame(1, 1, &tenure(&layout, 1, 10, rx0)), 0, &mut c).unwrap();
        d.on_frame(&frame(0, 2, &body), 0, &mut c).unwrap();
        prop_assert_eq!(c.pkts, expect);
    }

    /// Any monotone sequence of half-cuts with valid sources round-trips, whichever of
    /// SAME/DENSE/SPARSE the encoder picks, including spanning steps merged across substreams.
    #[test]
    fn step_records_round_trip(
        moves in proptest::collection::vec((proptest::collection::vec(prop_oneof![6 => Just(0u64), 3 => 1u64..5, 1 => 100u64..100_000], 8), 0u8..9, any::<u16>(), 0u8..3), 1..40)
    ) {
        let layout = Layout::two_streams(8);
        let top = 1_000_000u64; // ops decoded on every lane: LaneSeqs 1..top
        let mut st = [StepState::new(1, &[0; 4]), StepState::new(1, &[0; 4])];
        let mut cut = [0u64; 8];
        let mut runs = [Vec::new(), Vec::new()];
        let mut expect = Vec::new();
        for (i, (mv, kind, src, _)) in moves.iter().enumerate() {
            let kind = StepKind::from_u8(*kind).unwrap();
            let step = i as u64 + 1; // StepId is gapless across the two substreams (07 §3.8)
            let old = cut;
            for l in 0..8 {
                cut[l] = (cut[l] + mv[l]).min(top - 1);
            }
            let moved = [old[..4] != cut[..4], old[4..] != cut[4..]];
            let (src_lane, src_seq) = if kind.has_src() { let l = (*src % 8) as u8; (l, 1 + *src as u64 % (top - 2)) } else { (0xFF, 0) };
            let home = layout.home_of(src_lane) as usize;
            let other = moved[1 - home];
            let payload: Vec<u8> = if kind.has_payload() && kind != StepKind::Seal { vec![kind as u8; (*src % 5) as usize] } else { vec![] };
            for (s, stt) in st.iter_mut().enumerate() {
                if s != home && !other { continue; }
                let half = &cut[s * 4..s * 4 + 4];
                let rec = HalfRecord { step, kind, home: s == home, other, src_lane: if s == home { src_lane } else { 0xFF }, src_lane_seq: src_seq, payload: &payload, cut: half };
                let ok = encode_step_half(stt, s * 4, &rec, &mut runs[s]);
                prop_assert!(ok);
            }
            expect.push((Step { step, kind, src_lane, src_lane_seq: src_seq, home: home as u8, spans: other }, cut.to_vec(), payload));
        }
        let mut d2 = DecState::new(layout).unwrap();
        let mut c2 = Collect::default();
        for s in 0..2u8 {
            let t = TenureStart { epoch: 0, tenure: 0, sender: 0, first_step: 1, first_height: 1, prev_header_hash: [0; 32],
                lanes: vec![LaneBase { next_lane_seq: top, rx_ts_base: 0, fills_applied_base: 0 }; 4], prev_cut: vec![0; 4] };
            let mut b = Vec::new();
            t.encode(&mut b);
            d2.on_frame(&frame(s, 1, &b), 0, &mut c2).unwrap();
        }
        let count = |s: usize| expect.iter().filter(|e| e.0.home as usize == s || e.0.spans).count() as u64;
        // B first, then A: the merge has to buffer.
        for s in [1usize, 0] {
            let mut b = vec![0x40];
            vyrn_wire::leb::push_u64(&mut b, count(s));
            b.extend_from_slice(&runs[s]);
            d2.on_frame(&frame(s as u8, 2, &b), 0, &mut c2).unwrap();
        }
        prop_assert_eq!(c2.steps, expect);
    }

    /// Whatever follows a valid TenureStart, the decoder returns Ok or a typed error: no panic,
    /// no hang.
    #[test]
    fn decoder_never_panics(bodies in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..200), 1..6), kinds in proptest::collection::vec(1u8..=4, 6)) {
        let layout = Layout::reference();
        let mut d = DecState::new(layout).unwrap();
        d.on_frame(&frame(0, 1, &tenure(&layout, 0, 5, 0)), 0, &mut NullSink).unwrap();
        d.on_frame(&frame(1, 1, &tenure(&layout, 1, 5, 0)), 0, &mut NullSink).unwrap();
        for (i, b) in bodies.iter().enumerate() {
            let mut f = frame((i % 2) as u8, 2 + (i / 2) as u64, b);
            f[3] = kinds[i];
            let _ = d.on_frame(&f, 0, &mut NullSink);
        }
        let _ = d.tick(u64::MAX);
    }
}
