//! 07 §3.11 worked example, byte for byte, both ways.

use vyrn_wire::encoder::FrameWriter;
use vyrn_wire::records::*;
use vyrn_wire::*;

const GOLDEN: [u8; 20] = [
    0x07, 0x01, // LaneRun lane 7, k = 1
    0x0A, 0xAC, 0x02, 0x80, 0x08, // h = 10; slot 300; zigzag(512)
    0x40, 0x01, // StepRun, m = 1
    0x50, 0x00, 0x07, 0x00, // Cross|HOME|SPARSE, gap 0, src 7, zigzag(0)
    0x88, 0x10, 0x00, 0x00, // bitmap: lanes 3, 7, 12 of 25
    0x02, 0x0A, 0x01, // deltas
];

const BASE_SEQ: u64 = 100;
const RX0: u64 = 1_000_000;

fn tenure(stream: u8, layout: &Layout) -> TenureStart {
    let n = layout.half_len(stream);
    let mut prev_cut = vec![BASE_SEQ - 1; n];
    if stream == 0 {
        prev_cut[3] = 90;
        prev_cut[12] = 90;
    }
    TenureStart {
        epoch: 7,
        tenure: 0,
        sender: 0,
        first_step: 1,
        first_height: 1,
        prev_header_hash: [9; 32],
        lanes: vec![
            LaneBase {
                next_lane_seq: BASE_SEQ,
                rx_ts_base: RX0,
                fills_applied_base: 0
            };
            n
        ],
        prev_cut,
    }
}

fn encode_example() -> Vec<u8> {
    let layout = Layout::reference();
    let ts = tenure(0, &layout);
    // Lane 7's encoder mirror after TenureStart and SessionBind(slot 300, next_pkt_seq 5).
    let mut lane = LaneState::from_base(&ts.lanes[7]);
    let mut next = vec![0u32; 4096];
    next[300] = 5;
    let mut rec = [0u8; PKT_ENC_MAX];
    let n = encode_lane_op(
        &mut lane,
        &mut next,
        &LaneOp::Pkt {
            slot: 300,
            count: 10,
            shed: false,
            pkt_seq: 5,
            rx_ts: RX0 + 512,
            first_lane_seq: BASE_SEQ,
            fills_applied: 0,
        },
        &mut rec,
    );
    let mut body = vec![7u8, 1];
    body.extend_from_slice(&rec[..n]);
    // The step: half A's cut moves lanes 3, 7, 12 by +2, +10, +1; the op is inside the new cut.
    let mut st = StepState::new(1, &ts.prev_cut);
    let mut cut = ts.prev_cut.clone();
    cut[3] += 2;
    cut[7] += 10;
    cut[12] += 1;
    let mut steps = vec![tag::STEP_RUN, 1];
    assert!(encode_step_half(
        &mut st,
        0,
        &HalfRecord {
            step: 1,
            kind: StepKind::Cross,
            home: true,
            other: false,
            src_lane: 7,
            src_lane_seq: cut[7],
            payload: &[],
            cut: &cut,
        },
        &mut steps,
    ));
    body.extend_from_slice(&steps);
    body
}

#[test]
fn encoder_produces_the_worked_example() {
    assert_eq!(encode_example(), GOLDEN);
}

#[derive(Default)]
struct Rec {
    pkts: Vec<PacketRecord>,
    steps: Vec<(Step, Vec<u64>)>,
    binds: usize,
}

impl Sink for Rec {
    fn pkt(&mut self, _: Pos, r: &PacketRecord) {
        self.pkts.push(*r);
    }
    fn step(&mut self, s: &Step, cut: &[u64], _: &[u8]) {
        self.steps.push((*s, cut.to_vec()));
    }
    fn bind(&mut self, _: Pos, _: &SessionBind) {
        self.binds += 1;
    }
}

#[test]
fn decoder_reads_the_worked_example() {
    let layout = Layout::reference();
    let mut a = FrameWriter::new(1, 7, 0, 0, 0, 4096);
    let mut b = FrameWriter::new(1, 7, 0, 0, 1, 4096);
    let mut s = Vec::new();
    tenure(0, &layout).encode(&mut s);
    a.tenure_start(&s);
    let mut bind = Vec::new();
    encode_session_bind(
        &SessionBind {
            lane: 7,
            slot: 300,
            session: 77,
            next_pkt_seq: 5,
        },
        &mut bind,
    );
    a.section(&bind);
    a.flush();
    s.clear();
    tenure(1, &layout).encode(&mut s);
    b.tenure_start(&s);
    b.flush();
    a.section(&GOLDEN);
    a.flush();
    let mut dec = DecState::new(layout).unwrap();
    let mut sink = Rec::default();
    for f in b.take_frames().into_iter().chain(a.take_frames()) {
        dec.on_frame(&f, 0, &mut sink).unwrap();
    }
    assert_eq!(sink.binds, 1);
    assert_eq!(
        sink.pkts,
        vec![PacketRecord {
            lane: 7,
            count: 10,
            flags: 0,
            session: 77,
            slot: 300,
            pkt_seq: 5,
            rx_ts: RX0 + 512,
            first_lane_seq: BASE_SEQ,
            fills_applied: 0,
        }]
    );
    assert_eq!(sink.steps.len(), 1);
    let (st, cut) = &sink.steps[0];
    assert_eq!(st.step, 1);
    assert_eq!(st.kind, StepKind::Cross);
    assert_eq!(st.src_lane, 7);
    assert_eq!(st.src_lane_seq, BASE_SEQ + 9);
    assert!(!st.spans);
    assert_eq!(cut.len(), 49);
    assert_eq!(cut[3], 92);
    assert_eq!(cut[7], BASE_SEQ + 9);
    assert_eq!(cut[12], 91);
    assert_eq!(cut[0], BASE_SEQ - 1);
    assert_eq!(cut[30], BASE_SEQ - 1);
    assert_eq!(dec.awaiting_hash(7), 1);
}
