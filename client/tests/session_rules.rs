//! One rule at a time, driving a session by hand: bad responses are dropped and counted,
//! retention is bounded and expires, `BAD_SEQ` resends from `detail`, `SeqChange` resends at
//! once, the facts stay separate.

use proptest::prelude::*;
use std::net::SocketAddr;

use vyrn_client::packet::ResponseView;
use vyrn_client::{
    Event, ExecKind, MsgRef, OrderReq, PktCopy, Session, SessionConfig, SubmitError, Uncertainty,
};
use vyrn_wire::msg::addr_from_socket;
use vyrn_wire::msg::client::{
    siphash128, Record, RejectCode, Request, Response, Side, MSG_INDEX_NONE, RESP_TAG_BYTES,
};

const MS: u64 = 1_000_000;
const SESSION: u32 = 0x1001;
const K_SEQ: [u8; 16] = [1; 16];
const K_OUT: [u8; 16] = [2; 16];

fn seq() -> SocketAddr {
    "10.0.0.1:9000".parse().unwrap()
}
fn data(i: u8) -> SocketAddr {
    format!("10.0.1.{}:7402", i + 1).parse().unwrap()
}

fn cfg() -> SessionConfig {
    let mut c = SessionConfig::new(7, SESSION, K_SEQ, K_OUT, seq(), vec![data(0), data(1)], 0);
    c.retain_max = 16;
    c
}

fn session() -> Session {
    Session::new(cfg(), 1, 0).unwrap()
}

fn gtc(qty: u32) -> OrderReq {
    OrderReq::Gtc {
        side: Side::Buy,
        tick: 100,
        qty,
    }
}

fn resp(echo: u32, resp_seq: u64, records: Vec<Record>) -> Vec<u8> {
    Response {
        session: SESSION,
        echo_pkt_seq: echo,
        resp_seq,
        resend: false,
        records,
    }
    .to_bytes(&K_OUT)
    .unwrap()
}

/// The `Ack` of packet `p`'s only message (its tag is `p`: one message per packet, tags from 1).
fn ack_of(p: u32, resp_seq: u64) -> Vec<u8> {
    resp(
        p,
        resp_seq,
        vec![Record::Ack {
            msg_index: 0,
            client_tag: p,
        }],
    )
}

/// A `SeqChange` notice to tenure `tenure` of epoch 1 at `to`.
fn seq_change(to: SocketAddr, tenure: u8) -> Vec<u8> {
    resp(
        0,
        1,
        vec![Record::SeqChange {
            epoch: 1,
            tenure,
            new_seq: 1,
            addr: addr_from_socket(to),
        }],
    )
}

fn events(s: &mut Session) -> Vec<Event> {
    std::iter::from_fn(|| s.poll_event()).collect()
}

fn drain(s: &mut Session) -> Vec<(SocketAddr, PktCopy, u32, bool)> {
    let v: Vec<_> = s
        .transmits()
        .map(|t| {
            let r = Request::parse_verified(t.bytes, &K_SEQ).expect("tagged under K_seq");
            assert_eq!(r.pkt_seq(), t.pkt_seq);
            (t.dest, t.copy, t.pkt_seq, r.resend())
        })
        .collect();
    s.consume_transmits(v.len());
    v
}

#[test]
fn copy1_to_sequencer_copy2_to_data_home_pkt_seq_from_one() {
    let mut s = session();
    for want in 1..=3u32 {
        let sub = s.submit(0, &[gtc(1), gtc(2)]).unwrap();
        assert_eq!(sub.pkt_seq, want);
    }
    let tx = drain(&mut s);
    assert_eq!(tx.len(), 6);
    for (k, t) in tx.iter().enumerate() {
        let p = 1 + k as u32 / 2;
        let (dest, copy) = if k % 2 == 0 {
            (seq(), PktCopy::Seq)
        } else {
            (data(0), PktCopy::Data)
        };
        assert_eq!(*t, (dest, copy, p, false));
    }
    assert_eq!(
        s.submit(0, &[]).unwrap_err(),
        SubmitError::BadCount,
        "an empty packet is refused"
    );
    assert_eq!(s.submit(0, &[gtc(0)]).unwrap_err(), SubmitError::BadQty);
}

#[test]
fn bad_responses_dropped_and_counted_never_a_panic() {
    let mut s = session();
    s.submit(0, &[gtc(5)]).unwrap();
    let good = resp(
        1,
        1,
        vec![Record::Ack {
            msg_index: 0,
            client_tag: 1,
        }],
    );

    let mut bad_tag = good.clone();
    let n = bad_tag.len();
    bad_tag[n - 1] ^= 1;
    s.handle_packet(1, &bad_tag);

    s.handle_packet(1, &good[..good.len() - 3]);
    s.handle_packet(1, &good[..10]);
    s.handle_packet(1, &[]);

    let other = Response {
        session: SESSION + 1,
        echo_pkt_seq: 1,
        resp_seq: 1,
        resend: false,
        records: vec![Record::Ack {
            msg_index: 0,
            client_tag: 1,
        }],
    }
    .to_bytes(&K_OUT)
    .unwrap();
    s.handle_packet(1, &other);

    // An unknown record type under a valid tag.
    let mut unknown = good.clone();
    unknown[24] = 99;
    let signed = unknown.len() - RESP_TAG_BYTES;
    let tag = siphash128(&K_OUT, &unknown[..signed]);
    unknown[signed..].copy_from_slice(&tag);
    s.handle_packet(1, &unknown);

    // Reserved bytes set under a valid tag.
    let mut reserved = good.clone();
    reserved[20] = 1;
    let tag = siphash128(&K_OUT, &reserved[..signed]);
    reserved[signed..].copy_from_slice(&tag);
    s.handle_packet(1, &reserved);

    // An echo of a packet never sent.
    s.handle_packet(
        1,
        &resp(
            9,
            1,
            vec![Record::Ack {
                msg_index: 0,
                client_tag: 1,
            }],
        ),
    );

    let c = s.counters();
    assert_eq!(c.rx_bad_tag, 1);
    assert_eq!(c.rx_truncated, 3);
    assert_eq!(c.rx_wrong_session, 1);
    assert_eq!(c.rx_unknown_type, 1);
    assert_eq!(c.rx_malformed, 1);
    assert_eq!(c.rx_bad_echo, 1);
    assert_eq!(c.rx_ok, 0);
    assert!(events(&mut s).is_empty(), "nothing reached the application");

    s.handle_packet(1, &good);
    s.handle_packet(1, &good); // network duplicate
    let mut resent = Response::parse(&good, &K_OUT).unwrap();
    resent.resend = true;
    s.handle_packet(1, &resent.to_bytes(&K_OUT).unwrap()); // a resend of the same response
    let ev = events(&mut s);
    assert_eq!(ev.len(), 1, "{ev:?}");
    assert_eq!(s.counters().rx_dup, 2);
}

#[test]
fn a_resent_response_under_a_new_resp_seq_is_still_one_fact() {
    let mut s = session();
    s.submit(0, &[gtc(5)]).unwrap();
    let fill = Record::Fill {
        msg_index: 0,
        price: 100,
        qty: 2,
        leaves: 3,
        step: 9,
        client_tag: 1,
    };
    s.handle_packet(
        1,
        &resp(
            1,
            1,
            vec![
                fill,
                Record::Ack {
                    msg_index: 0,
                    client_tag: 1,
                },
            ],
        ),
    );
    // The same records again under another resp_seq (a rebuilt resend after a failover).
    s.handle_packet(
        2,
        &resp(
            1,
            2,
            vec![
                fill,
                Record::Ack {
                    msg_index: 0,
                    client_tag: 1,
                },
            ],
        ),
    );
    let ev = events(&mut s);
    assert_eq!(ev.len(), 2, "{ev:?}");
    assert_eq!(s.counters().rec_dup, 2);
    // A second, different fill is new.
    let fill2 = Record::Fill {
        msg_index: 0,
        price: 100,
        qty: 2,
        leaves: 1,
        step: 11,
        client_tag: 1,
    };
    s.handle_packet(3, &resp(1, 3, vec![fill2]));
    assert_eq!(events(&mut s).len(), 1);
    assert_eq!(s.order(1).unwrap().filled, 4);
}

#[test]
fn executed_durable_final_are_three_separate_events() {
    let mut s = session();
    s.submit(0, &[gtc(5)]).unwrap();
    let fill = Record::Fill {
        msg_index: 0,
        price: 100,
        qty: 5,
        leaves: 0,
        step: 40,
        client_tag: 1,
    };
    s.handle_packet(1, &resp(1, 1, vec![fill]));
    let v = s.order(1).unwrap();
    assert!(v.done && v.fills_not_durable == 1 && v.fills_not_final == 1);
    // A Final watermark alone says nothing about the fill: no height is known for step 40.
    s.handle_packet(
        2,
        &resp(
            0,
            2,
            vec![Record::Final {
                height: 99,
                view: 1,
            }],
        ),
    );
    let ev = events(&mut s);
    assert!(matches!(ev[0], Event::Exec(e) if matches!(e.kind, ExecKind::Fill { step: 40, .. })));
    assert_eq!(ev.len(), 1);
    // A Durable mark below the step: nothing.
    s.handle_packet(
        3,
        &resp(
            0,
            3,
            vec![Record::Durable {
                step: 39,
                height: 5,
            }],
        ),
    );
    assert!(events(&mut s).is_empty());
    // Durable covering it: the durable fact, and (the Final at 99 ≥ 6) the final fact.
    s.handle_packet(
        4,
        &resp(
            0,
            4,
            vec![Record::Durable {
                step: 41,
                height: 6,
            }],
        ),
    );
    assert_eq!(
        events(&mut s),
        vec![
            Event::Durable { order: 1, step: 40 },
            Event::Final {
                order: 1,
                step: 40,
                height: 6
            }
        ]
    );
    assert_eq!(s.watermarks(), (Some(41), Some(99)));
}

#[test]
fn final_waits_for_the_final_watermark() {
    let mut s = session();
    s.submit(0, &[gtc(5)]).unwrap();
    let fill = Record::Fill {
        msg_index: 0,
        price: 100,
        qty: 1,
        leaves: 4,
        step: 40,
        client_tag: 1,
    };
    s.handle_packet(1, &resp(1, 1, vec![fill]));
    s.handle_packet(
        2,
        &resp(
            0,
            2,
            vec![Record::Durable {
                step: 45,
                height: 6,
            }],
        ),
    );
    let ev = events(&mut s);
    assert_eq!(ev.len(), 2);
    assert_eq!(ev[1], Event::Durable { order: 1, step: 40 });
    s.handle_packet(3, &resp(0, 3, vec![Record::Final { height: 5, view: 1 }]));
    assert!(events(&mut s).is_empty(), "height 6 is not final at 5");
    s.handle_packet(4, &resp(0, 4, vec![Record::Final { height: 6, view: 2 }]));
    assert_eq!(
        events(&mut s),
        vec![Event::Final {
            order: 1,
            step: 40,
            height: 6
        }]
    );
}

#[test]
fn retention_is_bounded_and_expires() {
    let mut s = session(); // retain_max 16, retain 100 ms
    for _ in 0..16 {
        s.submit(0, &[gtc(1)]).unwrap();
    }
    drain(&mut s);
    assert_eq!(
        s.submit(50 * MS, &[gtc(1)]).unwrap_err(),
        SubmitError::RetentionFull,
        "every retained packet is younger than REP_CLIENT_RETAIN_MS"
    );
    assert_eq!(s.retained(), (16, 1));
    // Answer packet 1 only; at 100 ms every packet may leave.
    s.handle_packet(
        1,
        &resp(
            1,
            1,
            vec![Record::Ack {
                msg_index: 0,
                client_tag: 1,
            }],
        ),
    );
    events(&mut s);
    s.poll(100 * MS - 1);
    drain(&mut s);
    assert_eq!(s.retained().0, 16);
    s.poll(100 * MS);
    assert_eq!(s.retained(), (0, 17));
    let ev = events(&mut s);
    let uncertain = ev
        .iter()
        .filter(|e| {
            matches!(
                e,
                Event::Uncertain {
                    why: Uncertainty::Expired,
                    ..
                }
            )
        })
        .count();
    assert_eq!(
        uncertain, 15,
        "every unanswered message is reported uncertain"
    );
    assert_eq!(s.counters().expired_unanswered, 15);
    assert!(s.order(2).unwrap().uncertain);
    assert_eq!(s.submit(100 * MS, &[gtc(1)]).unwrap().pkt_seq, 17);
    // A late answer for an expired packet is still a fact about its order.
    s.handle_packet(
        100 * MS,
        &resp(
            2,
            2,
            vec![Record::Ack {
                msg_index: 0,
                client_tag: 2,
            }],
        ),
    );
    assert_eq!(events(&mut s).len(), 1);
}

#[test]
fn unanswered_packets_are_resent_with_flags_resend() {
    let mut s = session();
    s.submit(0, &[gtc(1)]).unwrap();
    s.submit(0, &[gtc(1)]).unwrap();
    drain(&mut s);
    s.handle_packet(
        1,
        &resp(
            1,
            1,
            vec![Record::Ack {
                msg_index: 0,
                client_tag: 1,
            }],
        ),
    );
    s.poll(5 * MS - 1);
    assert!(drain(&mut s).is_empty());
    s.poll(5 * MS);
    assert_eq!(drain(&mut s), vec![(seq(), PktCopy::Seq, 2, true)]);
    s.poll(6 * MS);
    assert!(drain(&mut s).is_empty(), "not again before resend_after");
}

/// A sequencer that answers late is not flooded: the timeout follows the measured round trip
/// (RFC 6298: srtt + 4·rttvar, from packets answered without a resend).
#[test]
fn the_resend_timeout_follows_the_round_trip() {
    let mut s = session();
    // Ten packets answered 40 ms after they were sent: srtt 40 ms.
    for p in 1..=10u32 {
        let t = (p as u64 - 1) * 50 * MS;
        s.submit(t, &[gtc(1)]).unwrap();
        drain(&mut s);
        s.handle_packet(t + 40 * MS, &ack_of(p, p as u64));
    }
    let t0 = 500 * MS;
    s.submit(t0, &[gtc(1)]).unwrap();
    drain(&mut s);
    // 07's 5 ms (resend_after_ns) has long passed: the answer is still due, no resend.
    s.poll(t0 + 30 * MS);
    assert!(drain(&mut s).is_empty(), "resent before the round trip");
    // The timeout is capped at resend_after << resend_backoff_max (80 ms).
    s.poll(t0 + 80 * MS);
    assert_eq!(drain(&mut s), vec![(seq(), PktCopy::Seq, 11, true)]);
}

/// A silent sequencer: each time a resent packet times out again the timeout doubles (5, 10,
/// 20, 40 ms, then 80 ms at most), so a packet is resent a handful of times in its retention,
/// not every 5 ms; a new sequencer (`SeqChange`) gets every unanswered packet at once and the
/// backoff starts over.
#[test]
fn a_silent_sequencer_gets_resends_with_a_doubling_timeout() {
    let mut c = cfg();
    c.retain_ns = 10_000 * MS;
    let mut s = Session::new(c, 1, 0).unwrap();
    s.submit(0, &[gtc(1)]).unwrap();
    drain(&mut s);
    let mut at = Vec::new();
    for ms in 1..=400u64 {
        s.poll(ms * MS);
        if !drain(&mut s).is_empty() {
            at.push(ms);
        }
    }
    assert_eq!(at, vec![5, 10, 20, 40, 80, 160, 240, 320, 400]);
    let new: SocketAddr = "10.0.0.2:9000".parse().unwrap();
    s.handle_packet(401 * MS, &seq_change(new, 1));
    assert_eq!(drain(&mut s), vec![(new, PktCopy::Seq, 1, true)]);
    s.poll(405 * MS);
    assert!(drain(&mut s).is_empty());
    s.poll(406 * MS);
    assert_eq!(
        drain(&mut s),
        vec![(new, PktCopy::Seq, 1, true)],
        "backoff reset"
    );
}

/// A new sequencer asked for every unanswered packet gets them `resend_window` at a time,
/// lowest `pkt_seq` first, more as answers come back or the timeout frees the window — not as
/// one burst larger than its socket's receive buffer.
#[test]
fn resends_to_a_new_sequencer_go_a_window_at_a_time() {
    let mut c = cfg();
    c.retain_max = 64;
    c.resend_window = 8;
    let mut s = Session::new(c, 1, 0).unwrap();
    for _ in 0..20 {
        s.submit(0, &[gtc(1)]).unwrap();
    }
    drain(&mut s);
    let new: SocketAddr = "10.0.0.2:9000".parse().unwrap();
    s.handle_packet(MS, &seq_change(new, 1));
    let sent = |tx: Vec<(SocketAddr, PktCopy, u32, bool)>| -> Vec<u32> {
        tx.iter().map(|t| t.2).collect()
    };
    assert_eq!(sent(drain(&mut s)), (1..=8).collect::<Vec<_>>());
    s.poll(MS + 1);
    assert!(drain(&mut s).is_empty(), "the window is full");
    // A new packet waits behind the held ones (it would only draw a BAD_SEQ); copy 2 goes.
    s.submit(MS + 1, &[gtc(1)]).unwrap();
    assert_eq!(drain(&mut s), vec![(data(0), PktCopy::Data, 21, false)]);
    // Three answers open three places.
    for p in 1..=3u32 {
        s.handle_packet(2 * MS, &ack_of(p, p as u64));
    }
    s.poll(2 * MS);
    assert_eq!(sent(drain(&mut s)), vec![9, 10, 11]);
    // Nothing more is answered: the timeout frees the window and the oldest go again first.
    s.poll(7 * MS);
    assert_eq!(sent(drain(&mut s)), (4..=11).collect::<Vec<_>>());
    // Every older packet answered: the rest go in order, the new one last, as first built.
    for p in 4..=20u32 {
        s.handle_packet(8 * MS, &ack_of(p, p as u64));
        s.poll(8 * MS);
    }
    let tx = drain(&mut s);
    assert_eq!(sent(tx.clone()), (12..=21).collect::<Vec<_>>());
    assert_eq!(tx.last(), Some(&(new, PktCopy::Seq, 21, false)));
}

/// A `resp_seq` hole resends the packets that can still be answered — unanswered messages and
/// orders not both acked and ended — not every packet that ever placed an order.
#[test]
fn a_resp_seq_hole_resends_only_packets_with_responses_to_come() {
    let mut s = session();
    for _ in 0..3 {
        s.submit(0, &[gtc(1)]).unwrap();
    }
    drain(&mut s);
    let fill = |p: u32, r: u64| {
        resp(
            p,
            r,
            vec![Record::Fill {
                msg_index: 0,
                client_tag: p,
                price: 100,
                qty: 1,
                leaves: 0,
                step: 10 + r,
            }],
        )
    };
    // Packet 1: acked and filled (done). Packet 2: acked, resting. Packet 3: filled, its ack
    // missing (resp_seq 5 never came).
    s.handle_packet(MS, &ack_of(1, 1));
    s.handle_packet(MS, &fill(1, 2));
    s.handle_packet(MS, &ack_of(2, 3));
    s.handle_packet(MS, &fill(3, 4));
    s.handle_packet(MS, &ack_of(3, 6));
    assert_eq!(s.counters().gaps, 1);
    s.poll(MS + 5 * MS);
    let mut got: Vec<u32> = drain(&mut s).iter().map(|t| t.2).collect();
    got.sort();
    assert_eq!(
        got,
        vec![2],
        "packet 1 is settled, packet 3 acked and filled"
    );
}

#[test]
fn bad_seq_resends_from_detail() {
    let mut s = session();
    for _ in 0..5 {
        s.submit(0, &[gtc(1)]).unwrap();
    }
    drain(&mut s);
    let bad = |p: u32, expect: u64, r: u64| {
        resp(
            p,
            r,
            vec![Record::Reject {
                msg_index: 0xFF,
                code: RejectCode::BadSeq,
                detail: expect,
                client_tag: 0,
            }],
        )
    };
    s.handle_packet(
        MS,
        &resp(
            1,
            1,
            vec![Record::Ack {
                msg_index: 0,
                client_tag: 1,
            }],
        ),
    );
    // Packet 2 was lost: 3, 4 and 5 are refused with detail 2.
    s.handle_packet(MS, &bad(3, 2, 2));
    let tx = drain(&mut s);
    assert_eq!(
        tx.iter().map(|t| (t.2, t.3)).collect::<Vec<_>>(),
        vec![(2, true), (3, true), (4, true), (5, true)]
    );
    assert!(tx.iter().all(|t| t.0 == seq() && t.1 == PktCopy::Seq));
    s.handle_packet(MS, &bad(4, 2, 3));
    assert!(drain(&mut s).is_empty(), "a burst of BAD_SEQ resends once");
    // BAD_SEQ is not an answer and nothing reached the application but the Ack.
    assert_eq!(events(&mut s).len(), 1);
    // A detail no longer retained: the session is stuck.
    s.poll(200 * MS);
    events(&mut s);
    s.handle_packet(200 * MS, &bad(5, 3, 4));
    assert_eq!(events(&mut s), vec![Event::Stuck { expected: 3 }]);
}

#[test]
fn seq_change_switches_and_resends_unanswered_at_once() {
    let mut s = session();
    for _ in 0..3 {
        s.submit(0, &[gtc(1)]).unwrap();
    }
    drain(&mut s);
    s.handle_packet(
        1,
        &resp(
            2,
            1,
            vec![Record::Ack {
                msg_index: 0,
                client_tag: 2,
            }],
        ),
    );
    let new: SocketAddr = "10.0.0.2:9000".parse().unwrap();
    let notice = |tenure: u8| {
        resp(
            0,
            1,
            vec![Record::SeqChange {
                epoch: 1,
                tenure,
                new_seq: 1,
                addr: addr_from_socket(new),
            }],
        )
    };
    s.handle_packet(2, &notice(1));
    assert_eq!(s.seq_addr(), Some(new));
    assert_eq!(
        drain(&mut s),
        vec![(new, PktCopy::Seq, 1, true), (new, PktCopy::Seq, 3, true)]
    );
    s.handle_packet(2, &notice(1));
    s.handle_packet(2, &notice(0));
    assert!(drain(&mut s).is_empty());
    assert_eq!(s.counters().notice_stale, 2);
    // New packets go to the new sequencer.
    s.submit(3, &[gtc(1)]).unwrap();
    assert_eq!(drain(&mut s)[0].0, new);
}

/// 07 §9.4, §9.6: the data boxes' `TenureEnd` (beside `SeqChange`) settles every fill of the
/// ended tenure: at a step ≤ the seal's last step it is durable and final (the seal's height),
/// above it reverted — never durable or final, even once the next tenure's watermarks pass its
/// step. Taken once.
#[test]
fn a_tenure_end_makes_the_sealed_fills_final_and_reverts_the_rest() {
    let mut s = session();
    for _ in 0..3 {
        s.submit(0, &[gtc(5)]).unwrap();
    }
    drain(&mut s);
    let fill = |tag: u32, step: u64| Record::Fill {
        msg_index: 0,
        price: 100,
        qty: 5,
        leaves: 0,
        step,
        client_tag: tag,
    };
    s.handle_packet(1, &resp(1, 1, vec![fill(1, 40)]));
    s.handle_packet(1, &resp(2, 2, vec![fill(2, 50)]));
    s.handle_packet(1, &resp(3, 3, vec![fill(3, 60)]));
    s.handle_packet(
        2,
        &resp(
            0,
            4,
            vec![Record::Durable {
                step: 41,
                height: 6,
            }],
        ),
    );
    assert_eq!(events(&mut s).len(), 4, "three fills and one durable");
    let new: SocketAddr = "10.0.0.2:9000".parse().unwrap();
    let notice = resp(
        0,
        1,
        vec![
            Record::TenureEnd {
                epoch: 1,
                tenure: 0,
                height: 8,
                last_step: 55,
            },
            Record::SeqChange {
                epoch: 1,
                tenure: 1,
                new_seq: 1,
                addr: addr_from_socket(new),
            },
        ],
    );
    s.handle_packet(3, &notice);
    let ev = events(&mut s);
    assert_eq!(
        &ev[..4],
        &[
            Event::Final {
                order: 1,
                step: 40,
                height: 8
            },
            Event::Durable { order: 2, step: 50 },
            Event::Final {
                order: 2,
                step: 50,
                height: 8
            },
            Event::Reverted { order: 3, step: 60 },
        ]
    );
    assert!(matches!(ev[4], Event::SeqChanged { tenure: 1, .. }));
    assert_eq!(s.counters().fills_reverted, 1);
    assert_eq!(s.watermarks(), (Some(55), Some(8)));
    // Every data box sends it: taken once.
    s.handle_packet(4, &notice);
    assert!(events(&mut s)
        .iter()
        .all(|e| !matches!(e, Event::Reverted { .. } | Event::Final { .. })));
    // The next tenure's watermarks pass step 60: the reverted fill stays reverted.
    s.handle_packet(
        5,
        &resp(
            0,
            5,
            vec![
                Record::Durable {
                    step: 70,
                    height: 9,
                },
                Record::Final { height: 9, view: 3 },
            ],
        ),
    );
    assert!(events(&mut s).is_empty(), "nothing waits");
    // The new sequencer logged nothing from packet 3 on (BAD_SEQ{3}): packet 3 was answered by
    // the ended tenure (its fill reverted). Its answer is void, its order back to placed, and
    // it is resent ("the client resends from there", 07 §9.5), to execute anew.
    drain(&mut s);
    s.handle_packet(
        100 * MS,
        &resp(
            2,
            6,
            vec![Record::Reject {
                msg_index: MSG_INDEX_NONE,
                code: RejectCode::BadSeq,
                detail: 3,
                client_tag: 0,
            }],
        ),
    );
    let ev = events(&mut s);
    assert!(
        ev.contains(&Event::Uncertain {
            msg: MsgRef {
                pkt_seq: 3,
                msg_index: 0
            },
            order: 3,
            why: Uncertainty::Reverted
        }),
        "{ev:?}"
    );
    assert_eq!(s.counters().reverted_packets, 1);
    let v = s.order(3).expect("order 3");
    assert!(!v.done && v.filled == 0, "{v:?}");
    assert_eq!(drain(&mut s), vec![(new, PktCopy::Seq, 3, true)]);
    // Its new execution is taken as the order's answer.
    s.handle_packet(101 * MS, &resp(3, 7, vec![fill(3, 80)]));
    assert!(events(&mut s)
        .iter()
        .any(|e| matches!(e, Event::Exec(x) if x.order == 3)));
    assert!(s.order(3).unwrap().done);
    // A late BAD_SEQ{3}, overtaken by that answer: the new tenure's answer stands.
    s.handle_packet(
        200 * MS,
        &resp(
            2,
            8,
            vec![Record::Reject {
                msg_index: MSG_INDEX_NONE,
                code: RejectCode::BadSeq,
                detail: 3,
                client_tag: 0,
            }],
        ),
    );
    assert!(
        !events(&mut s)
            .iter()
            .any(|e| matches!(e, Event::Uncertain { .. })),
        "the current tenure's answer voided"
    );
    assert_eq!(s.counters().reverted_packets, 1);
    assert!(s.order(3).unwrap().done);
}

/// 07 §9.6: a maker fill the seal reverted, on an order whose placing packet stays in the log.
/// The order rests again with that quantity: the view's `filled`, `last_fill_step` and `done`
/// give it back, and the fill the next tenure makes of the same range (the same `leaves`) is a
/// new fill, not a repeat of the reverted one.
#[test]
fn a_reverted_maker_fill_gives_its_quantity_back_to_the_resting_order() {
    let mut s = session();
    s.submit(0, &[gtc(5)]).unwrap();
    drain(&mut s);
    let fill = |qty: u32, leaves: u32, step: u64| Record::Fill {
        msg_index: 0,
        price: 100,
        qty,
        leaves,
        step,
        client_tag: 1,
    };
    let ack = Record::Ack {
        msg_index: 0,
        client_tag: 1,
    };
    // Acked in tenure 0 (step ≤ the seal's), then two maker fills: 1 at step 50 (kept by the
    // seal) and 4 at step 60 (above it).
    s.handle_packet(1, &resp(1, 1, vec![ack]));
    s.handle_packet(1, &resp(1, 2, vec![fill(1, 4, 50)]));
    s.handle_packet(1, &resp(1, 3, vec![fill(4, 0, 60)]));
    let v = s.order(1).expect("order 1");
    assert_eq!((v.filled, v.done, v.last_fill_step), (5, true, Some(60)));
    events(&mut s);
    s.handle_packet(
        2,
        &resp(
            0,
            1,
            vec![Record::TenureEnd {
                epoch: 1,
                tenure: 0,
                height: 8,
                last_step: 55,
            }],
        ),
    );
    let ev = events(&mut s);
    assert!(
        ev.contains(&Event::Reverted { order: 1, step: 60 }),
        "{ev:?}"
    );
    let v = s.order(1).expect("the order rests again");
    assert_eq!(
        (v.filled, v.done, v.last_fill_step, v.fills_reverted),
        (1, false, Some(50), 1)
    );
    // Tenure 1 fills the same 4 (leaves 0 again): taken, and the order is done.
    s.handle_packet(3, &resp(1, 5, vec![fill(4, 0, 70)]));
    let ev = events(&mut s);
    assert!(
        ev.iter()
            .any(|e| matches!(e, Event::Exec(x) if x.order == 1)),
        "{ev:?}"
    );
    let v = s.order(1).expect("order 1");
    assert_eq!((v.filled, v.done, v.last_fill_step), (5, true, Some(70)));
    assert_eq!(s.counters().rec_dup, 0, "not taken for a repeat");
}

#[test]
fn data_redirect_moves_copy2_and_reports_what_is_gone() {
    let mut s = session();
    for _ in 0..4 {
        s.submit(0, &[gtc(1)]).unwrap();
    }
    drain(&mut s);
    let redirect = |from: u8, to: u8, rf: u32| {
        resp(
            0,
            1,
            vec![Record::DataRedirect {
                from,
                to,
                resend_from: rf,
            }],
        )
    };
    s.handle_packet(1, &redirect(0, 7, 1));
    assert_eq!(s.counters().notice_bad, 1, "no data box 7");
    s.handle_packet(1, &redirect(0, 1, 3));
    assert_eq!(
        drain(&mut s),
        vec![
            (data(1), PktCopy::Data, 3, true),
            (data(1), PktCopy::Data, 4, true)
        ]
    );
    // Another replica's redirect, relayed because it asks for more: the packets below the
    // first resend_from go too, once; a repeat asking for no more is stale.
    s.handle_packet(1, &redirect(0, 1, 2));
    assert_eq!(drain(&mut s), vec![(data(1), PktCopy::Data, 2, true)]);
    s.handle_packet(1, &redirect(0, 1, 3));
    assert!(drain(&mut s).is_empty());
    assert_eq!(s.counters().notice_stale, 1);
    s.submit(2, &[gtc(1)]).unwrap();
    assert_eq!(drain(&mut s)[1].0, data(1));
    // From the new home, resend_from below retention: the gap is reported.
    s.poll(150 * MS);
    s.handle_packet(150 * MS, &redirect(1, 0, 2));
    let ev = events(&mut s);
    assert!(
        ev.contains(&Event::DataLost { first: 2, last: 5 }),
        "{ev:?}"
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Arbitrary bytes into the response path: never a panic, each packet counted once.
    #[test]
    fn arbitrary_bytes_never_panic(pkts in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..1400), 1..8)) {
        let mut s = session();
        s.submit(0, &[gtc(3)]).unwrap();
        for (k, p) in pkts.iter().enumerate() {
            s.handle_packet(k as u64, p);
            s.poll(k as u64);
        }
        let c = s.counters();
        let total = c.rx_ok + c.rx_bad_tag + c.rx_truncated + c.rx_wrong_session
            + c.rx_unknown_type + c.rx_malformed + c.rx_bad_echo + c.rx_dup;
        prop_assert_eq!(total, pkts.len() as u64);
    }

    /// Valid, tagged responses with random records and random mutations: the session never
    /// panics, and the parser agrees with the wire crate's `Response::parse`.
    #[test]
    fn mutated_tagged_responses(
        echo in 0u32..4, resp_seq in 1u64..6, tags in prop::collection::vec(0u32..4, 1..6),
        flips in prop::collection::vec((0usize..400, any::<u8>()), 0..3), retag in any::<bool>(),
    ) {
        let mut s = session();
        s.submit(0, &[gtc(3), OrderReq::Cancel { order: 1 }]).unwrap();
        let records: Vec<Record> = tags.iter().enumerate().map(|(i, &t)| match i % 4 {
            0 => Record::Fill { msg_index: (t % 2) as u8, price: 1, qty: t + 1, leaves: t, step: t as u64, client_tag: t },
            1 => Record::Ack { msg_index: (t % 2) as u8, client_tag: t },
            2 => Record::CancelAck { msg_index: 1, client_tag: t },
            _ => Record::Durable { step: t as u64, height: 1 },
        }).collect();
        let mut b = Response { session: SESSION, echo_pkt_seq: echo.max(1), resp_seq, resend: false, records }
            .to_bytes(&K_OUT).unwrap();
        for (at, x) in flips {
            let n = b.len();
            b[at % n] ^= x;
        }
        if retag {
            let signed = b.len().saturating_sub(RESP_TAG_BYTES);
            let t = siphash128(&K_OUT, &b[..signed]);
            let n = b.len();
            b[signed..n].copy_from_slice(&t[..n - signed]);
        }
        let mine = ResponseView::parse(&b, &K_OUT, SESSION);
        let wire = Response::parse(&b, &K_OUT);
        prop_assert_eq!(mine.is_ok(), wire.as_ref().is_ok_and(|r| r.session == SESSION));
        if let (Ok(m), Ok(w)) = (&mine, &wire) {
            prop_assert_eq!(m.records(), &w.records[..]);
        }
        s.handle_packet(1, &b);
        s.handle_packet(2, &b);
        s.poll(3);
        while s.poll_event().is_some() {}
    }
}
