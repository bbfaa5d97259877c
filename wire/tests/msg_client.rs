//! Client packets (missing-chapters §2): SipHash-2-4-128 reference vectors, golden request and
//! response bytes (also printed in `docs/wire-messages.md`), round trips and one refusal per
//! reject code.

mod msg {
    use vyrn_wire::msg::addr_from_socket;
    use vyrn_wire::msg::client::*;
    use vyrn_wire::Malformed;

    fn unhex(s: &str) -> Vec<u8> {
        let s: String = s.split_whitespace().collect();
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    /// Key 00 01 … 0f, as in the SipHash paper and reference repository.
    fn k_seq() -> SipKey {
        core::array::from_fn(|i| i as u8)
    }

    fn k_out() -> SipKey {
        core::array::from_fn(|i| 0x10 + i as u8)
    }

    /// The golden request: book 7, session 0x1001, pkt_seq 1; a GTC buy 5 @ 1000 tagged 42 and
    /// a Cancel of tag 41.
    fn golden_request() -> RequestPacket {
        RequestPacket {
            book: 7,
            resend: false,
            session: 0x1001,
            pkt_seq: 1,
            msgs: vec![
                Msg {
                    kind: MsgType::NewGtc,
                    side: Side::Buy,
                    tick: 1000,
                    qty: 5,
                    client_tag: 42,
                },
                Msg {
                    kind: MsgType::Cancel,
                    side: Side::Buy,
                    tick: 0,
                    qty: 0,
                    client_tag: 41,
                },
            ],
        }
    }

    const GOLDEN_REQ: &str = "0700 02 00 01100000 01000000 00000000
        01 00 0000 e8030000 05000000 2a000000
        03 00 0000 00000000 00000000 29000000
        ecfe6ac03c7f90c6597c5ce23e276b6c";
    /// The same packet with flags.resend: only byte 3 and the tag change.
    const GOLDEN_REQ_RESEND_TAG: &str = "4d1889bf24bedc9737ccfe9608df6d25";
    const GOLDEN_FULL_HASH: &str =
        "4f7ee6ef1d324f8289bbdc29658efcc6bdd4aa3b79192836300a6a72bd80cead";
    const GOLDEN_PKT_HASH: u64 = 0x824f_321d_efe6_7e4f;

    #[test]
    fn siphash128_reference_vectors() {
        // veorq/SipHash vectors.h, vectors_sip128[i] = SipHash-2-4-128(key 00..0f, 00..i-1).
        // Also reproduced by an independent implementation of the paper (tests/msg_props.rs
        // cross-checks it against this crate on random inputs).
        let k = k_seq();
        let msg: Vec<u8> = (0..64u8).collect();
        let cases = [
            (0, "a3817f04ba25a8e66df67214c7550293"),
            (15, "5493e99933b0a8117e08ec0f97cfc3d9"),
            (63, "5150d1772f50834a503e069a973fbd7c"),
        ];
        for (n, want) in cases {
            assert_eq!(siphash128(&k, &msg[..n]).to_vec(), unhex(want), "len {n}");
        }
        // The byte order: h1 then h2, each little-endian = u128::to_le_bytes(as_u128()).
        let h = siphasher::sip128::SipHasher24::new_with_key(&k).hash(&msg[..15]);
        assert_eq!(siphash128(&k, &msg[..15]), h.as_u128().to_le_bytes());
        assert_eq!(siphash128(&k, &msg[..15]), h.as_bytes());
    }

    #[test]
    fn request_golden_bytes() {
        let p = golden_request();
        let b = p.to_bytes(&k_seq()).unwrap();
        assert_eq!(b, unhex(GOLDEN_REQ));
        assert_eq!(b.len(), 32 + 16 * 2);
        assert_eq!(b[48..], siphash128(&k_seq(), &b[..48]));
        let full = full_hash(&b).unwrap();
        assert_eq!(full.to_vec(), unhex(GOLDEN_FULL_HASH));
        assert_eq!(full, *blake3::hash(&b[..48]).as_bytes(), "flags already 0");
        assert_eq!(pkt_hash(&b).unwrap(), GOLDEN_PKT_HASH);
        assert_eq!(
            GOLDEN_PKT_HASH,
            u64::from_le_bytes(full[..8].try_into().unwrap())
        );
        // A resend: same full hash (byte 3 read as 0), different tag (the tag covers flags).
        let r = RequestPacket {
            resend: true,
            ..p.clone()
        }
        .to_bytes(&k_seq())
        .unwrap();
        assert_eq!(r[3], 1);
        assert_eq!(r[48..].to_vec(), unhex(GOLDEN_REQ_RESEND_TAG));
        assert_eq!(full_hash(&r).unwrap(), full);
        let view = Request::parse_verified(&r, &k_seq()).unwrap();
        assert!(view.resend());
        assert_eq!(view.full_hash(), full);
        assert_eq!(view.pkt_hash(), GOLDEN_PKT_HASH);
        assert_eq!(RequestPacket::parse(&b, &k_seq()).unwrap(), p);
    }

    #[test]
    fn request_view_accessors() {
        let b = golden_request().to_bytes(&k_seq()).unwrap();
        let v = Request::parse_verified(&b, &k_seq()).unwrap();
        assert_eq!(
            (v.book(), v.count(), v.session(), v.pkt_seq()),
            (7, 2, 0x1001, 1)
        );
        assert!(!v.resend());
        assert_eq!(v.signed_part(), &b[..48]);
        assert_eq!(v.tag().to_vec(), b[48..].to_vec());
        assert_eq!(v.msg(0).unwrap().unwrap().client_tag, 42);
        assert_eq!(v.msg(1).unwrap().unwrap().kind, MsgType::Cancel);
        assert!(v.msg(2).is_none());
        assert_eq!(v.msgs().count(), 2);
    }

    #[test]
    fn request_packet_rejects() {
        let k = k_seq();
        let good = golden_request().to_bytes(&k).unwrap();
        // Re-tag after an edit, so only the edited field is wrong.
        let edit = |f: &dyn Fn(&mut Vec<u8>)| {
            let mut v = good.clone();
            f(&mut v);
            let n = v.len().saturating_sub(16);
            if v.len() >= 48 {
                let t = siphash128(&k, &v[..n]);
                v[n..].copy_from_slice(&t);
            }
            v
        };
        let pkt_err = |v: &[u8]| Request::parse_verified(v, &k).unwrap_err();
        assert_eq!(pkt_err(&good[..47]), ReqReject::BadLen);
        assert_eq!(pkt_err(&edit(&|v| v.push(0))), ReqReject::BadLen);
        assert_eq!(pkt_err(&edit(&|v| v[2] = 3)), ReqReject::BadLen);
        assert_eq!(pkt_err(&edit(&|v| v[2] = 0)), ReqReject::BadCount);
        assert_eq!(pkt_err(&edit(&|v| v[2] = 11)), ReqReject::BadCount);
        assert_eq!(pkt_err(&edit(&|v| v[3] = 2)), ReqReject::BadFlags);
        assert_eq!(pkt_err(&edit(&|v| v[13] = 1)), ReqReject::BadReserved);
        assert_eq!(pkt_err(&edit(&|v| v[8] = 0)), ReqReject::BadSeq);
        let mut t = good.clone();
        t[63] ^= 1;
        assert_eq!(pkt_err(&t), ReqReject::BadTag);
        let mut t = good.clone();
        t[3] = 1; // resend bit set after tagging: the tag covers flags
        assert_eq!(pkt_err(&t), ReqReject::BadTag);
        assert_eq!(
            Request::parse_verified(&good, &k_out()).unwrap_err(),
            ReqReject::BadTag
        );
        // full_hash only needs the length structure.
        assert_eq!(full_hash(&good[..40]), Err(ReqReject::BadLen));
        assert_eq!(full_hash(&edit(&|v| v[2] = 0)), Err(ReqReject::BadCount));
        // Codes and details.
        assert!(ReqReject::BadTag.is_packet_level());
        assert!(!ReqReject::BadQty.is_packet_level());
        assert_eq!(ReqReject::BadSeq.code(), RejectCode::BadSeq);
        assert_eq!(ReqReject::BadTag.code(), RejectCode::BadTag);
        assert_eq!(ReqReject::BadCancel.code(), RejectCode::BadMsg);
        assert_eq!(ReqReject::BadCancel.detail(), 20);
    }

    #[test]
    fn message_rejects() {
        let good = golden_request().msgs[0].to_bytes();
        assert_eq!(
            good.to_vec(),
            unhex("01 00 0000 e8030000 05000000 2a000000")
        );
        let bad = |f: &dyn Fn(&mut [u8; 16])| {
            let mut m = good;
            f(&mut m);
            Msg::parse(&m).unwrap_err()
        };
        assert_eq!(bad(&|m| m[0] = 0), ReqReject::BadType);
        assert_eq!(bad(&|m| m[0] = 4), ReqReject::BadType);
        assert_eq!(bad(&|m| m[1] = 2), ReqReject::BadMsgFlags);
        assert_eq!(bad(&|m| m[3] = 1), ReqReject::BadMsgReserved);
        assert_eq!(bad(&|m| m[8] = 0), ReqReject::BadQty);
        assert_eq!(bad(&|m| m[0] = 3), ReqReject::BadCancel);
        assert_eq!(Msg::parse(&good[..15]), Err(ReqReject::BadLen));
        let sell = Msg {
            side: Side::Sell,
            kind: MsgType::NewIoc,
            tick: -3,
            ..golden_request().msgs[0]
        };
        assert_eq!(Msg::parse(&sell.to_bytes()), Ok(sell));
        assert_eq!(sell.to_bytes()[1], 1);
        // A bad message inside a well-formed, well-tagged packet: the packet parses, the
        // message is refused on its own.
        let mut p = golden_request();
        p.msgs[1].qty = 3; // a Cancel with qty: refused by the encoder …
        assert_eq!(p.to_bytes(&k_seq()), Err(ReqReject::BadCancel));
        let mut b = golden_request().to_bytes(&k_seq()).unwrap();
        b[16 + 16 + 8] = 3; // … and, written by hand, by the message parser
        let t = siphash128(&k_seq(), &b[..48]);
        b[48..].copy_from_slice(&t);
        let v = Request::parse_verified(&b, &k_seq()).unwrap();
        assert!(v.msg(0).unwrap().is_ok());
        assert_eq!(v.msg(1).unwrap(), Err(ReqReject::BadCancel));
        assert_eq!(
            RequestPacket::parse(&b, &k_seq()),
            Err(ReqReject::BadCancel)
        );
        // Encoder refusals.
        let mut p = golden_request();
        p.msgs.clear();
        assert_eq!(p.to_bytes(&k_seq()), Err(ReqReject::BadCount));
        p.msgs = vec![golden_request().msgs[0]; 11];
        assert_eq!(p.to_bytes(&k_seq()), Err(ReqReject::BadCount));
        p.msgs.truncate(10);
        assert_eq!(p.to_bytes(&k_seq()).unwrap().len(), 192);
        p.pkt_seq = 0;
        assert_eq!(p.to_bytes(&k_seq()), Err(ReqReject::BadSeq));
    }

    // ---- responses ---------------------------------------------------------------------------

    const GOLDEN_RESP: &str = "01100000 01000000 0100000000000000 03 00 000000000000
        01 00 0000 2a000000 000000000000000000000000000000000000000000000000
        03 00 0000 e8030000 02000000 03000000 3412000000000000 2a000000 00000000
        04 01 0000 29000000 000000000000000000000000000000000000000000000000
        d20e4168991857a087b79050c72176a4";

    fn golden_response() -> Response {
        Response {
            session: 0x1001,
            echo_pkt_seq: 1,
            resp_seq: 1,
            resend: false,
            records: vec![
                Record::Ack {
                    msg_index: 0,
                    client_tag: 42,
                },
                Record::Fill {
                    msg_index: 0,
                    price: 1000,
                    qty: 2,
                    leaves: 3,
                    step: 0x1234,
                    client_tag: 42,
                },
                Record::CancelAck {
                    msg_index: 1,
                    client_tag: 41,
                },
            ],
        }
    }

    fn every_record() -> Vec<Record> {
        vec![
            Record::Ack {
                msg_index: 0,
                client_tag: 1,
            },
            Record::Reject {
                msg_index: 9,
                code: RejectCode::RiskQty,
                detail: 1_000_000,
                client_tag: 2,
            },
            Record::Reject {
                msg_index: MSG_INDEX_NONE,
                code: RejectCode::BadSeq,
                detail: 17,
                client_tag: 0,
            },
            Record::Fill {
                msg_index: 3,
                price: -5,
                qty: 7,
                leaves: 0,
                step: u64::MAX,
                client_tag: 3,
            },
            Record::CancelAck {
                msg_index: 1,
                client_tag: 4,
            },
            Record::Out {
                msg_index: 2,
                qty: 9,
                client_tag: 5,
            },
            Record::Busy,
            Record::Halted,
            Record::Durable {
                step: 100,
                height: 7,
            },
            Record::Final {
                height: 6,
                view: 12,
            },
            Record::SeqChange {
                epoch: 3,
                tenure: 1,
                new_seq: 1,
                addr: addr_from_socket("10.9.8.7:7000".parse().unwrap()),
            },
            Record::SeqChange {
                epoch: 3,
                tenure: 1,
                new_seq: 0xFF,
                addr: [0; 18],
            },
            Record::DataRedirect {
                from: 1,
                to: 2,
                resend_from: 55,
            },
            Record::TenureEnd {
                epoch: 3,
                tenure: 0,
                height: 151,
                last_step: 2_991,
            },
        ]
    }

    /// The `TenureEnd` record byte for byte (docs/wire-messages.md's record table).
    #[test]
    fn tenure_end_golden_bytes() {
        let r = Record::TenureEnd {
            epoch: 3,
            tenure: 0,
            height: 151,
            last_step: 2_991,
        };
        let b = r.to_bytes().unwrap();
        assert_eq!(
            b.to_vec(),
            unhex("0cff0000 03000000 00000000 00000000 9700000000000000 af0b000000000000")
        );
        assert_eq!(Record::parse(&b), Ok(r));
        assert!(r.is_unsolicited());
        // A byte the record does not use, set: refused.
        let mut x = b;
        x[9] = 1;
        assert_eq!(Record::parse(&x), Err(Malformed::Reserved));
        // With a message index: refused.
        let mut x = b;
        x[1] = 0;
        assert_eq!(Record::parse(&x), Err(Malformed::BadValue));
    }

    #[test]
    fn response_golden_and_round_trip() {
        let r = golden_response();
        let b = r.to_bytes(&k_out()).unwrap();
        assert_eq!(b, unhex(GOLDEN_RESP));
        assert_eq!(b.len(), Response::len_for(3));
        assert_eq!(Response::parse(&b, &k_out()).unwrap(), r);
        let all = Response {
            session: 9,
            echo_pkt_seq: 4,
            resp_seq: 77,
            resend: true,
            records: every_record(),
        };
        let b = all.to_bytes(&k_out()).unwrap();
        assert_eq!(b[17], 1);
        assert_eq!(Response::parse(&b, &k_out()).unwrap(), all);
        for rec in every_record() {
            let x = rec.to_bytes().unwrap();
            assert_eq!(x[0], rec.rec_type());
            assert_eq!(Record::parse(&x), Ok(rec));
            // Written in place over any earlier bytes: the same 32 bytes, every one written.
            let mut slot = [0xA5u8; 32];
            rec.write_to(&mut slot).unwrap();
            assert_eq!(slot, x, "{rec:?}");
        }
        // A record `parse` would refuse is not written, and the slot keeps its bytes.
        let bad = Record::Ack {
            msg_index: 200,
            client_tag: 1,
        };
        let mut slot = [0x5Au8; 32];
        assert!(bad.write_to(&mut slot).is_err());
        assert_eq!(slot, [0x5A; 32]);
        // Unsolicited-only packets carry echo_pkt_seq 0.
        let w = Response {
            session: 9,
            echo_pkt_seq: 0,
            resp_seq: 78,
            resend: false,
            records: vec![
                Record::Durable { step: 1, height: 1 },
                Record::Final { height: 1, view: 2 },
            ],
        };
        assert_eq!(
            Response::parse(&w.to_bytes(&k_out()).unwrap(), &k_out()).unwrap(),
            w
        );
    }

    #[test]
    fn response_errors() {
        let k = k_out();
        let good = golden_response().to_bytes(&k).unwrap();
        let retag = |mut v: Vec<u8>| {
            let n = v.len() - 16;
            let t = siphash128(&k, &v[..n]);
            v[n..].copy_from_slice(&t);
            v
        };
        let err = |v: Vec<u8>| Response::parse(&retag(v), &k).unwrap_err();
        let mut t = good.clone();
        t[5] ^= 1;
        assert_eq!(Response::parse(&t, &k), Err(Malformed::BadTag));
        assert_eq!(Response::parse(&good, &k_seq()), Err(Malformed::BadTag));
        assert_eq!(Response::parse(&good[..20], &k), Err(Malformed::Truncated));
        assert_eq!(
            Response::parse(&good[..good.len() - 1], &k),
            Err(Malformed::Truncated)
        );
        let mut x = good.clone();
        x.push(0);
        assert_eq!(err(x), Malformed::BadLength);
        let mut x = good.clone();
        x[17] = 2;
        assert_eq!(err(x), Malformed::Reserved);
        let mut x = good.clone();
        x[20] = 1;
        assert_eq!(err(x), Malformed::Reserved);
        let mut x = good.clone();
        x[16] = 41;
        assert_eq!(err(x), Malformed::TooMany);
        let mut x = good.clone();
        x[24] = 13; // record type
        assert_eq!(err(x), Malformed::BadKind);
        let mut x = good.clone();
        x[25] = 10; // msg_index of an Ack
        assert_eq!(err(x), Malformed::BadValue);
        let mut x = good.clone();
        x[24 + 31] = 1; // an unused byte of the Ack
        assert_eq!(err(x), Malformed::Reserved);
        let mut x = good.clone();
        x[8] = 0; // resp_seq 0
        assert_eq!(err(x), Malformed::BadValue);
        let mut x = good.clone();
        x[4] = 0; // echo 0 with solicited records
        assert_eq!(err(x), Malformed::BadValue);
        // Records on their own.
        let rej = Record::Reject {
            msg_index: 0,
            code: RejectCode::Busy,
            detail: 0,
            client_tag: 0,
        };
        let mut x = rej.to_bytes().unwrap();
        x[4] = 99;
        assert_eq!(
            Record::parse(&x),
            Err(Malformed::BadValue),
            "unknown reject code"
        );
        let mut x = Record::Halted.to_bytes().unwrap();
        x[1] = 0;
        assert_eq!(
            Record::parse(&x),
            Err(Malformed::BadValue),
            "unsolicited with an index"
        );
        let mut x = Record::SeqChange {
            epoch: 1,
            tenure: 1,
            new_seq: 0xFF,
            addr: [0; 18],
        }
        .to_bytes()
        .unwrap();
        x[12] = 1;
        assert_eq!(
            Record::parse(&x),
            Err(Malformed::Reserved),
            "none with an address"
        );
        assert_eq!(
            Record::Ack {
                msg_index: 10,
                client_tag: 0
            }
            .to_bytes(),
            Err(Malformed::BadValue)
        );
        // Encoder refusals.
        let mut r = golden_response();
        r.records = vec![Record::Busy; RESP_MAX_RECORDS + 1];
        assert_eq!(r.to_bytes(&k), Err(Malformed::TooMany));
        r.records.clear();
        assert_eq!(r.to_bytes(&k), Err(Malformed::BadValue));
        r.records = vec![Record::Busy; RESP_MAX_RECORDS];
        assert_eq!(r.to_bytes(&k).unwrap().len(), 40 + 32 * 40);
        // Reject codes.
        for c in 1..=14u16 {
            let code = RejectCode::from_u16(c).unwrap();
            assert_eq!(code as u16, c);
            assert!(code
                .name()
                .chars()
                .all(|ch| ch.is_ascii_uppercase() || ch == '_'));
        }
        assert_eq!(RejectCode::from_u16(0), None);
        assert_eq!(RejectCode::from_u16(15), None);
    }
}
