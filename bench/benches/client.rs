//! Client library benchmarks: what the client spends per packet.
//!
//! 1. Request build + tag: `vyrn_client::packet::build_request` (header, messages, SipHash-2-4-128
//!    tag under `K_seq`) against the bare `siphash128` of the same bytes, for 1 and 4 messages.
//! 2. Response parse + verify: `ResponseView::parse` (layout, tag under `K_out`, records into a
//!    fixed array) against the bare `siphash128` of the same signed bytes, and against the wire
//!    crate's allocating `Response::parse`; then the whole `Session::handle_packet` path (parse,
//!    resp_seq dedupe, per-order dedupe, events) on fresh responses.

use std::hint::black_box;

use vyrn_bench::{measure, measure_with_setup, quick, ratio, rounds};
use vyrn_client::packet::{build_request, ResponseView, REQ_BUF};
use vyrn_client::{OrderReq, Session, SessionConfig};
use vyrn_wire::msg::client::{
    siphash128, Msg, MsgType, Record, Response, Side, REQ_TAG_BYTES, RESP_TAG_BYTES,
};

const K_SEQ: [u8; 16] = [1; 16];
const K_OUT: [u8; 16] = [2; 16];
const SESSION: u32 = 0x1001;

fn main() {
    println!("# client: one shared 2-core machine; ratios are the figures to quote");
    if vyrn_bench::enabled("request") {
        request();
    }
    if vyrn_bench::enabled("response") {
        response();
    }
}

fn msgs(n: usize) -> Vec<Msg> {
    (0..n)
        .map(|i| Msg {
            kind: MsgType::NewGtc,
            side: if i % 2 == 0 { Side::Buy } else { Side::Sell },
            tick: 10_000 + i as i32,
            qty: 5,
            client_tag: 100 + i as u32,
        })
        .collect()
}

fn request() {
    let ops: u64 = if quick() { 20_000 } else { 1_000_000 };
    let r = rounds(30);
    for n in [1usize, 4] {
        let m = msgs(n);
        let mut buf = [0u8; REQ_BUF];
        let len = build_request(&mut buf, &K_SEQ, 7, SESSION, 1, false, &m);
        let signed = buf[..len - REQ_TAG_BYTES].to_vec();
        let cand = measure(
            &format!("client::request_build_tag/msgs={n}"),
            r,
            ops,
            || {
                let mut acc = 0u8;
                for k in 0..ops {
                    let l = build_request(&mut buf, &K_SEQ, 7, SESSION, 1 + k as u32, false, &m);
                    acc ^= buf[l - 1];
                }
                acc
            },
        );
        let base = measure(
            &format!("baseline::siphash128/bytes={}", signed.len()),
            r,
            ops,
            || {
                let mut acc = 0u8;
                for _ in 0..ops {
                    acc ^= siphash128(&K_SEQ, black_box(&signed))[0];
                }
                acc
            },
        );
        ratio(&cand, &base);
    }
}

fn response_bytes(resp_seq: u64) -> Vec<u8> {
    Response {
        session: SESSION,
        echo_pkt_seq: 1,
        resp_seq,
        resend: false,
        records: vec![
            Record::Fill {
                msg_index: 0,
                price: 10_000,
                qty: 1,
                leaves: 4,
                step: 7,
                client_tag: 1,
            },
            Record::Ack {
                msg_index: 0,
                client_tag: 1,
            },
        ],
    }
    .to_bytes(&K_OUT)
    .expect("valid")
}

fn response() {
    let ops: u64 = if quick() { 20_000 } else { 1_000_000 };
    let r = rounds(30);
    let b = response_bytes(1);
    let signed = b[..b.len() - RESP_TAG_BYTES].to_vec();
    let cand = measure("client::response_parse_verify/records=2", r, ops, || {
        let mut acc = 0u64;
        for _ in 0..ops {
            let v = ResponseView::parse(black_box(&b), &K_OUT, SESSION).expect("valid");
            acc = acc.wrapping_add(v.resp_seq);
        }
        acc
    });
    let base = measure(
        &format!("baseline::siphash128/bytes={}", signed.len()),
        r,
        ops,
        || {
            let mut acc = 0u8;
            for _ in 0..ops {
                acc ^= siphash128(&K_OUT, black_box(&signed))[0];
            }
            acc
        },
    );
    ratio(&cand, &base);
    let wire = measure("wire::Response::parse/records=2", r, ops, || {
        let mut acc = 0u64;
        for _ in 0..ops {
            acc = acc.wrapping_add(Response::parse(black_box(&b), &K_OUT).expect("ok").resp_seq);
        }
        acc
    });
    ratio(&cand, &wire);

    // The whole receive path: fresh responses (new resp_seq, a new fill each) into a session.
    let n = if quick() { 2_000 } else { 50_000 };
    let seq = "10.0.0.1:9000".parse().expect("addr");
    let data = vec!["10.0.1.1:7402".parse().expect("addr")];
    let pkts: Vec<Vec<u8>> = (0..n)
        .map(|k| {
            Response {
                session: SESSION,
                echo_pkt_seq: 1,
                resp_seq: k as u64 + 1,
                resend: false,
                records: vec![Record::Fill {
                    msg_index: 0,
                    price: 10_000,
                    qty: 1,
                    leaves: (n - 1 - k) as u32,
                    step: k as u64 + 1,
                    client_tag: 1,
                }],
            }
            .to_bytes(&K_OUT)
            .expect("valid")
        })
        .collect();
    let full = measure_with_setup(
        "client::session_handle_packet/fill",
        r,
        n as u64,
        || {
            let mut cfg = SessionConfig::new(7, SESSION, K_SEQ, K_OUT, seq, data.clone(), 0);
            cfg.pending_facts_max = 1 << 17;
            let mut s = Session::new(cfg, 0, 0).expect("config");
            s.submit(
                0,
                &[OrderReq::Gtc {
                    side: Side::Buy,
                    tick: 10_000,
                    qty: n as u32,
                }],
            )
            .expect("submit");
            s.consume_transmits(2);
            s
        },
        |mut s| {
            for p in &pkts {
                s.handle_packet(1, p);
                while s.poll_event().is_some() {}
            }
            s.counters().rx_ok
        },
    );
    ratio(&full, &cand);
}
