//! Lane, BBO and response behaviour, case by case (07 §3.6, §4.1, §4.11, §6.8, §9.5;
//! missing-chapters §2–§3).

use proptest::prelude::*;
use vyrn_engine::bbo::{control, Outcome};
use vyrn_engine::workload::{Input, Mix, Workload};
use vyrn_engine::{Capture, ControlReq, EngineConfig, Gate, LaneDrop, LiveEngine, Verdict};
use vyrn_wire::msg::client::{
    siphash128, Msg, MsgType, Record, RejectCode, RequestPacket, Response, Side,
};
use vyrn_wire::records::{StepKind, PKT_SHED};

fn cfg() -> EngineConfig {
    // 2 lanes × 2 sessions: sessions 1, 2 on lane 0 (account 1000000), 10001, 10002 on lane 1.
    EngineConfig::test_home(2, 2)
}

fn key(cfg: &EngineConfig, session: u32) -> ([u8; 16], [u8; 16]) {
    let s = cfg.sessions.iter().find(|s| s.session == session).unwrap();
    (s.k_seq, s.k_out)
}

fn pkt(cfg: &EngineConfig, session: u32, pkt_seq: u32, msgs: &[Msg]) -> Vec<u8> {
    RequestPacket {
        book: cfg.book,
        resend: false,
        session,
        pkt_seq,
        msgs: msgs.to_vec(),
    }
    .to_bytes(&key(cfg, session).0)
    .unwrap()
}

fn gtc(side: Side, tick: i32, qty: u32, tag: u32) -> Msg {
    Msg {
        kind: MsgType::NewGtc,
        side,
        tick,
        qty,
        client_tag: tag,
    }
}

fn cancel(tag: u32) -> Msg {
    Msg {
        kind: MsgType::Cancel,
        side: Side::Buy,
        tick: 0,
        qty: 0,
        client_tag: tag,
    }
}

/// A packet received and processed at time `t` (rx_ts = now = t); the lane must log it.
fn send(
    e: &mut LiveEngine,
    cap: &mut Capture,
    c: &EngineConfig,
    t: u64,
    session: u32,
    pkt_seq: u32,
    msgs: &[Msg],
) {
    e.submit(t, t, &pkt(c, session, pkt_seq, msgs), cap)
        .expect("the lane logs the packet");
}

/// Every response of `session` so far, parsed.
fn resps(cfg: &EngineConfig, cap: &Capture, session: u32) -> Vec<(Response, Gate)> {
    let k = key(cfg, session).1;
    cap.responses
        .get(&session)
        .map(|v| {
            v.iter()
                .map(|(b, g)| (Response::parse(b, &k).expect("valid response"), *g))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn dedupe_table_of_07_9_5() {
    let c = cfg();
    let mut e = LiveEngine::new(c.clone());
    let mut cap = Capture::default();
    let p1 = pkt(&c, 1, 1, &[gtc(Side::Buy, 100, 5, 7)]);
    assert_eq!(e.submit(10, 10, &p1, &mut cap), Ok(Verdict::New));
    e.poll(20, &mut cap).unwrap();
    // pkt_seq = last + 2: BAD_SEQ with the expected value, not executed.
    let p3 = pkt(&c, 1, 3, &[gtc(Side::Buy, 100, 5, 8)]);
    assert_eq!(e.submit(30, 30, &p3, &mut cap), Ok(Verdict::Gap));
    // pkt_seq ≤ last: a duplicate; the held responses come back with flags.resend.
    let mut again = p1.clone();
    again[3] = 1;
    let n = again.len() - 16;
    let t = siphash128(&key(&c, 1).0, &again[..n]);
    again[n..].copy_from_slice(&t);
    assert_eq!(e.submit(40, 40, &again, &mut cap), Ok(Verdict::Duplicate));
    e.poll(50, &mut cap).unwrap();
    let r = resps(&c, &cap, 1);
    assert_eq!(r.len(), 3, "{r:?}");
    assert_eq!(r[0].0.resp_seq, 1);
    assert_eq!(
        r[0].0.records,
        vec![Record::Ack {
            msg_index: 0,
            client_tag: 7
        }]
    );
    assert_eq!(
        r[1].0.records,
        vec![Record::Reject {
            msg_index: 0xFF,
            code: RejectCode::BadSeq,
            detail: 2,
            client_tag: 0
        }]
    );
    assert_eq!(r[1].0.resp_seq, 2);
    assert!(r[2].0.resend && r[2].0.resp_seq == 1 && r[2].0.records == r[0].0.records);
    // Only one order reached the book.
    assert_eq!(e.bbo().book().len(), 1);
    // Every logged packet took LaneSeqs; the gap and the duplicate one each.
    let recs: Vec<_> = cap
        .records
        .iter()
        .map(|(r, _)| (r.pkt_seq, r.first_lane_seq, r.count))
        .collect();
    assert_eq!(recs, vec![(1, 1, 1), (3, 2, 1), (1, 3, 1)]);
    // Lane answers are gated on their LaneSeq.
    assert_eq!(
        r[1].1,
        Gate::LaneCut {
            lane: 0,
            lane_seq: 2
        }
    );
}

#[test]
fn unauthenticated_or_unloggable_packets_are_dropped_and_counted() {
    let c = cfg();
    let mut e = LiveEngine::new(c.clone());
    let mut cap = Capture::default();
    let good = pkt(&c, 1, 1, &[gtc(Side::Buy, 100, 5, 7)]);
    let mut bad_tag = good.clone();
    *bad_tag.last_mut().unwrap() ^= 1;
    assert_eq!(e.submit(1, 1, &bad_tag, &mut cap), Err(LaneDrop::BadTag));
    assert_eq!(e.submit(1, 1, &good[..20], &mut cap), Err(LaneDrop::BadLen));
    let mut other_book = good.clone();
    other_book[0] ^= 1;
    let n = other_book.len() - 16;
    let t = siphash128(&key(&c, 1).0, &other_book[..n]);
    other_book[n..].copy_from_slice(&t);
    assert_eq!(
        e.submit(1, 1, &other_book, &mut cap),
        Err(LaneDrop::BadBook)
    );
    let mut reserved = good.clone();
    reserved[13] = 1;
    let t = siphash128(&key(&c, 1).0, &reserved[..n]);
    reserved[n..].copy_from_slice(&t);
    assert!(matches!(
        e.submit(1, 1, &reserved, &mut cap),
        Err(LaneDrop::Malformed(_))
    ));
    assert!(cap.records.is_empty() && cap.responses.is_empty());
    let k = e.lanes()[0].counters();
    assert_eq!(
        (k.drop_bad_tag, k.drop_bad_book, k.drop_malformed),
        (1, 1, 1)
    );
    // The session is not disturbed: pkt_seq 1 is still new.
    assert_eq!(e.submit(2, 2, &good, &mut cap), Ok(Verdict::New));
}

#[test]
fn risk_and_lane_local_rejects_carry_their_details() {
    let c = cfg(); // max qty 1000, max open 64, max exposure 20000
    let mut e = LiveEngine::new(c.clone());
    let mut cap = Capture::default();
    let mut p = pkt(
        &c,
        1,
        1,
        &[
            gtc(Side::Buy, 100, 1001, 1), // RISK_QTY
            gtc(Side::Buy, 100, 1000, 2), // ok
            gtc(Side::Buy, 100, 1000, 2), // DUPLICATE_TAG
            cancel(99),                   // UNKNOWN_ORDER
            Msg {
                kind: MsgType::NewIoc,
                side: Side::Sell,
                tick: 1,
                qty: 1,
                client_tag: 5,
            }, // BAD_MSG (qty 0, below)
        ],
    );
    // The client library refuses to build qty 0; a broken client sends it anyway.
    let q = 16 + 16 * 4 + 8;
    p[q..q + 4].copy_from_slice(&0u32.to_le_bytes());
    let n = p.len() - 16;
    let t = siphash128(&key(&c, 1).0, &p[..n]);
    p[n..].copy_from_slice(&t);
    e.submit(1, 1, &p, &mut cap).unwrap();
    let r = resps(&c, &cap, 1);
    let recs = &r[0].0.records;
    assert_eq!(
        recs[0],
        Record::Reject {
            msg_index: 0,
            code: RejectCode::RiskQty,
            detail: 1000,
            client_tag: 1
        }
    );
    assert_eq!(
        recs[1],
        Record::Ack {
            msg_index: 1,
            client_tag: 2
        }
    );
    // The second New with tag 2 is accepted by the lane (it keeps no per-order map) and
    // refused by the book; the Cancel of an unknown tag likewise.
    assert_eq!(
        recs[2],
        Record::Ack {
            msg_index: 2,
            client_tag: 2
        }
    );
    assert_eq!(recs.len(), 4, "{recs:?}");
    assert!(matches!(
        recs[3],
        Record::Reject {
            msg_index: 4,
            code: RejectCode::BadMsg,
            ..
        }
    ));
    e.poll(2, &mut cap).unwrap();
    let book_answers: Vec<Record> = resps(&c, &cap, 1)[1..]
        .iter()
        .flat_map(|(p, _)| p.records.clone())
        .collect();
    assert_eq!(
        book_answers,
        vec![
            Record::Reject {
                msg_index: 2,
                code: RejectCode::DuplicateTag,
                detail: 2,
                client_tag: 2
            },
            Record::Reject {
                msg_index: 3,
                code: RejectCode::UnknownOrder,
                detail: 99,
                client_tag: 99
            }
        ]
    );
    assert_eq!(
        r[0].1,
        Gate::LaneCut {
            lane: 0,
            lane_seq: 5
        },
        "gated on the packet's last LaneSeq"
    );
    // Exposure: 19 more buys of 1000 on the same account reach 20000; the next is refused.
    for (seq, tag) in (1..).zip(10..29) {
        send(
            &mut e,
            &mut cap,
            &c,
            2,
            2,
            seq,
            &[gtc(Side::Buy, 100, 1000, tag)],
        );
    }
    send(&mut e, &mut cap, &c, 3, 1, 2, &[gtc(Side::Buy, 100, 1, 50)]);
    let last = resps(&c, &cap, 1).pop().unwrap().0;
    assert_eq!(
        last.records,
        vec![Record::Reject {
            msg_index: 0,
            code: RejectCode::RiskExposure,
            detail: 20_000,
            client_tag: 50
        }]
    );
}

#[test]
fn open_order_limit_frees_on_fill_and_cancel() {
    let mut c = cfg();
    c.accounts.iter_mut().for_each(|a| a.max_open_orders = 2);
    let mut e = LiveEngine::new(c.clone());
    let mut cap = Capture::default();
    e.submit(
        1,
        1,
        &pkt(
            &c,
            1,
            1,
            &[
                gtc(Side::Buy, 100, 5, 1),
                gtc(Side::Buy, 99, 5, 2),
                gtc(Side::Buy, 98, 5, 3),
            ],
        ),
        &mut cap,
    )
    .unwrap();
    let r = resps(&c, &cap, 1);
    assert_eq!(
        r[0].0.records[2],
        Record::Reject {
            msg_index: 2,
            code: RejectCode::RiskOpen,
            detail: 2,
            client_tag: 3
        }
    );
    e.poll(2, &mut cap).unwrap();
    send(&mut e, &mut cap, &c, 3, 1, 2, &[cancel(1)]);
    e.poll(4, &mut cap).unwrap();
    send(&mut e, &mut cap, &c, 5, 1, 3, &[gtc(Side::Buy, 98, 5, 3)]);
    let r = resps(&c, &cap, 1);
    assert!(r
        .iter()
        .any(|(p, _)| p.records.contains(&Record::CancelAck {
            msg_index: 0,
            client_tag: 1
        })));
    assert_eq!(
        r.last().unwrap().0.records,
        vec![Record::Ack {
            msg_index: 0,
            client_tag: 3
        }]
    );
}

#[test]
fn a_cross_fills_both_sides_gated_on_the_step() {
    let c = cfg();
    let mut e = LiveEngine::new(c.clone());
    let mut cap = Capture::default();
    // Maker on lane 0 (session 1), taker on lane 1 (session 10001).
    send(
        &mut e,
        &mut cap,
        &c,
        1,
        1,
        1,
        &[gtc(Side::Sell, 100, 10, 7)],
    );
    e.poll(2, &mut cap).unwrap();
    send(
        &mut e,
        &mut cap,
        &c,
        3,
        10001,
        1,
        &[gtc(Side::Buy, 101, 4, 9)],
    );
    e.poll(4, &mut cap).unwrap();
    let cross = cap
        .steps
        .iter()
        .find(|s| s.kind == StepKind::Cross)
        .expect("a Cross");
    assert_eq!(cross.src_lane, 1);
    let taker = resps(&c, &cap, 10001);
    let fill = taker
        .iter()
        .find(|(p, _)| matches!(p.records[0], Record::Fill { .. }))
        .unwrap();
    assert_eq!(
        fill.0.records[0],
        Record::Fill {
            msg_index: 0,
            price: 100,
            qty: 4,
            leaves: 0,
            step: cross.step,
            client_tag: 9
        }
    );
    // 2 lanes on two substreams: lane 1 is half B; the step's home is B, A's cut did not move
    // at this step, so need_A stays at the last step that carried an A record.
    match fill.1 {
        Gate::Step {
            step,
            need_a,
            need_b,
        } => {
            assert_eq!(step, cross.step);
            assert_eq!(need_b, cross.step);
            assert!(need_a < cross.step);
        }
        g => panic!("fill gated by {g:?}"),
    }
    let maker = resps(&c, &cap, 1);
    let mf = maker
        .iter()
        .find(|(p, _)| matches!(p.records[0], Record::Fill { .. }))
        .unwrap();
    assert_eq!(
        mf.0.echo_pkt_seq, 1,
        "maker fill echoes the packet that placed the order"
    );
    assert_eq!(
        mf.0.records[0],
        Record::Fill {
            msg_index: 0,
            price: 100,
            qty: 4,
            leaves: 6,
            step: cross.step,
            client_tag: 7
        }
    );
}

#[test]
fn halt_refuses_new_ops_until_resume() {
    let c = cfg();
    let mut e = LiveEngine::new(c.clone());
    let mut cap = Capture::default();
    send(&mut e, &mut cap, &c, 1, 1, 1, &[gtc(Side::Buy, 100, 1, 1)]);
    e.control(ControlReq::Halt(control::REASON_FIN_GATE));
    e.poll(2, &mut cap).unwrap();
    let halt = cap
        .steps
        .iter()
        .find(|s| s.kind == StepKind::Control)
        .unwrap()
        .clone();
    assert_eq!(halt.payload, vec![control::HALT, control::REASON_FIN_GATE]);
    send(&mut e, &mut cap, &c, 3, 1, 2, &[gtc(Side::Buy, 100, 1, 2)]);
    let r = resps(&c, &cap, 1);
    assert!(r
        .iter()
        .any(|(p, _)| p.echo_pkt_seq == 0 && p.records == vec![Record::Halted]));
    assert_eq!(
        r.last().unwrap().0.records,
        vec![Record::Reject {
            msg_index: 0,
            code: RejectCode::BookHalted,
            detail: halt.step,
            client_tag: 2
        }]
    );
    e.control(ControlReq::Resume(control::REASON_FIN_GATE));
    e.poll(4, &mut cap).unwrap();
    send(&mut e, &mut cap, &c, 5, 1, 3, &[gtc(Side::Buy, 100, 1, 3)]);
    assert_eq!(
        resps(&c, &cap, 1).last().unwrap().0.records,
        vec![Record::Ack {
            msg_index: 0,
            client_tag: 3
        }]
    );
}

#[test]
fn deadline_admission_sheds_at_the_lane_and_at_the_bbo() {
    let mut c = cfg();
    c.lane_deadline_ns = Some(1_000);
    c.bbo_deadline_ns = Some(5_000);
    let mut e = LiveEngine::new(c.clone());
    let mut cap = Capture::default();
    // Lane: processed 2 µs after receipt → the whole packet is shed, its messages numbered.
    e.submit(
        2_100,
        100,
        &pkt(
            &c,
            1,
            1,
            &[gtc(Side::Buy, 100, 1, 1), gtc(Side::Buy, 100, 1, 2)],
        ),
        &mut cap,
    )
    .unwrap();
    let (rec, _) = &cap.records[0];
    assert_eq!((rec.count, rec.flags & PKT_SHED), (2, PKT_SHED));
    assert_eq!(resps(&c, &cap, 1)[0].0.records, vec![Record::Busy]);
    // BBO: admitted by the lane, stepped 10 µs after receipt → a Shed step, answered BUSY.
    send(
        &mut e,
        &mut cap,
        &c,
        3_000,
        1,
        2,
        &[gtc(Side::Buy, 100, 1, 3)],
    );
    e.poll(13_000, &mut cap).unwrap();
    assert!(cap.steps.iter().any(|s| s.kind == StepKind::Shed));
    let last = resps(&c, &cap, 1).pop().unwrap().0;
    assert_eq!(
        last.records,
        vec![Record::Reject {
            msg_index: 0,
            code: RejectCode::Busy,
            detail: 0,
            client_tag: 3
        }]
    );
    assert!(e.bbo().book().is_empty());
}

#[test]
fn idle_steps_log_cuts_that_nothing_else_logs() {
    let c = cfg();
    let mut e = LiveEngine::new(c.clone());
    let mut cap = Capture::default();
    // A packet whose only message is refused lane-locally forwards nothing; its answer still
    // needs a step whose cut covers it (07 §4.11).
    send(
        &mut e,
        &mut cap,
        &c,
        1,
        1,
        1,
        &[gtc(Side::Buy, 100, 5000, 5)],
    );
    e.poll(2, &mut cap).unwrap();
    assert_eq!(cap.steps.len(), 1);
    assert_eq!(cap.steps[0].kind, StepKind::Idle);
    assert_eq!(cap.steps[0].cut, vec![1, 0]);
    e.poll(3, &mut cap).unwrap();
    assert_eq!(cap.steps.len(), 1, "no Idle step without a new cut");
}

#[test]
fn events_flow_in_step_order_and_fills_applied_is_logged() {
    let c = cfg();
    let mut e = LiveEngine::new(c.clone());
    let mut cap = Capture::default();
    send(
        &mut e,
        &mut cap,
        &c,
        1,
        1,
        1,
        &[gtc(Side::Sell, 100, 10, 7)],
    );
    e.poll(2, &mut cap).unwrap();
    send(&mut e, &mut cap, &c, 3, 2, 1, &[gtc(Side::Buy, 100, 10, 8)]);
    e.poll(4, &mut cap).unwrap();
    send(&mut e, &mut cap, &c, 5, 1, 2, &[gtc(Side::Sell, 100, 1, 9)]);
    // The third packet was processed after the lane applied step 2's events.
    assert_eq!(cap.records[2].0.fills_applied, 2);
    let ends: Vec<u64> = cap.events[0]
        .iter()
        .filter(|e| e.what == Outcome::End)
        .map(|e| e.step)
        .collect();
    assert!(ends.windows(2).all(|w| w[0] < w[1]));
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, .. ProptestConfig::default() })]
    /// Arbitrary bytes, and valid packets with arbitrary damage, never panic the engine and
    /// never produce an unparseable response.
    #[test]
    fn bad_packets_never_panic(seed in any::<u64>(), junk in proptest::collection::vec(any::<u8>(), 0..200), flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 0..6)) {
        let c = cfg();
        let mut e = LiveEngine::new(c.clone());
        let mut cap = Capture::default();
        let _ = e.submit(1, 1, &junk, &mut cap);
        let mut w = Workload::new(&c, seed, Mix::everything());
        for _ in 0..20 {
            if let Input::Packet { rx_ts, mut bytes } = w.next_input() {
                for &(i, x) in &flips {
                    if !bytes.is_empty() {
                        let k = i % bytes.len();
                        bytes[k] ^= x;
                    }
                }
                let _ = e.submit(rx_ts, rx_ts, &bytes, &mut cap);
            }
            e.poll(w.now(), &mut cap).unwrap();
        }
        for (s, v) in &cap.responses {
            let k = key(&c, *s).1;
            for (b, _) in v {
                prop_assert!(Response::parse(b, &k).is_ok());
            }
        }
        e.bbo().book().check().unwrap();
    }
}
