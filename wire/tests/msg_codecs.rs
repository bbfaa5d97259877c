//! Round trips and one crafted failure per error class for `vyrn_wire::msg::{data, consensus,
//! journal, ctrl}` (client packets: `msg_client.rs`; property tests: `msg_props.rs`).

mod msg {
    use ed25519_dalek::SigningKey;
    use vyrn_wire::consts::REP_DATA_FRAME_MAX;
    use vyrn_wire::msg::consensus::*;
    use vyrn_wire::msg::ctrl::*;
    use vyrn_wire::msg::data::*;
    use vyrn_wire::msg::journal::*;
    use vyrn_wire::msg::{addr_from_socket, PktKey, MAX_MEMBERS};
    use vyrn_wire::{BlockHeader, Malformed};

    fn key(seed: u8) -> SigningKey {
        SigningKey::from_bytes(&[seed; 32])
    }

    fn proposal(kind: ProposalKind, first: u64, last: u64) -> RepProposal {
        RepProposal {
            kind,
            epoch: 7,
            first_height: first,
            last_height: last,
            last_hash: [0x11; 32],
            excl_root: [0; 32],
        }
    }

    fn entries(idx: &[u8]) -> Vec<CertEntry> {
        idx.iter()
            .map(|&i| CertEntry {
                index: i,
                sig: [i.wrapping_add(1); 64],
            })
            .collect()
    }

    fn header(height: u64, sign: Option<&SigningKey>) -> BlockHeader {
        let mut h = BlockHeader {
            height,
            epoch: 7,
            book: 1,
            first_step: 100,
            last_step: 199,
            prev: [1; 32],
            order_root: [2; 32],
            data_root: [3; 32],
            seq_sig: [0; 64],
        };
        if let Some(k) = sign {
            h.sign(k);
        }
        h
    }

    /// A client packet of `count` messages (structure only; the tag is not checked here).
    fn pkt(count: u8, fill: u8) -> Vec<u8> {
        let mut p = vec![fill; 32 + 16 * count as usize];
        p[2] = count;
        p
    }

    // ---- data frame (07 §5.3) -------------------------------------------------------------

    #[test]
    fn data_frame_round_trip_and_layout() {
        let mut b = DataFrameBuilder::new(DataKind::Data, 0x0102, 0x0304, 0x0506_0708, 9);
        let p1 = pkt(1, 0xAA); // 48 B, even
        let p2 = [0x55u8; 7]; // odd: one pad byte
        b.push(&p1).unwrap();
        b.push(&p2).unwrap();
        let bytes = b.as_bytes().to_vec();
        assert_eq!(&bytes[0..4], &[0x50, 0x44, 1, 1]);
        assert_eq!(&bytes[4..8], &[0x02, 0x01, 0x04, 0x03]);
        assert_eq!(bytes[16], 9);
        assert_eq!(bytes[17], 2);
        let body_len = 2 + 48 + 2 + 7 + 1;
        assert_eq!(
            u16::from_le_bytes([bytes[18], bytes[19]]) as usize,
            body_len
        );
        assert_eq!(bytes.len(), DATA_HDR_BYTES + body_len);
        assert_eq!(*bytes.last().unwrap(), 0, "pad byte");
        let f = DataFrame::parse(&bytes).unwrap();
        assert_eq!(f.header.data_seq, 0x0506_0708);
        let got: Vec<&[u8]> = f.packets().collect();
        assert_eq!(got, vec![&p1[..], &p2[..]]);
        let mut again = Vec::new();
        f.encode(&mut again);
        assert_eq!(again, bytes);
        // A heartbeat: no packets.
        let hb = DataFrameBuilder::new(DataKind::DataHb, 1, 1, 1, 0);
        assert_eq!(hb.clone().push(&p1), Err(PushError::Heartbeat));
        assert_eq!(
            DataFrame::parse(hb.as_bytes()).unwrap().packets().count(),
            0
        );
    }

    #[test]
    fn data_frame_builder_limits() {
        let mut b = DataFrameBuilder::new(DataKind::FetchResp, 1, 1, 1, 0);
        assert_eq!(b.push(&[]), Err(PushError::Empty));
        assert_eq!(
            b.push(&vec![1u8; REP_DATA_FRAME_MAX]),
            Err(PushError::TooLarge)
        );
        // 255-packet cap: tiny packets.
        let mut n = 0;
        while b.push(&[1, 2]).is_ok() {
            n += 1;
        }
        assert_eq!(n, DATA_MAX_PKTS);
        assert!(b.is_full());
        assert!(DataFrame::parse(b.as_bytes()).is_ok());
        // The byte cap, exactly.
        let mut b = DataFrameBuilder::new(DataKind::Data, 1, 1, 1, 0);
        let big = vec![3u8; REP_DATA_FRAME_MAX - DATA_HDR_BYTES - 2];
        b.push(&big).unwrap();
        assert_eq!(b.len(), REP_DATA_FRAME_MAX);
        assert!(b.is_full());
        assert_eq!(b.push(&[1]), Err(PushError::Full));
        assert!(DataFrame::parse(b.as_bytes()).is_ok());
    }

    #[test]
    fn data_frame_errors() {
        let mut b = DataFrameBuilder::new(DataKind::Data, 1, 1, 1, 0);
        b.push(&[9u8; 5]).unwrap();
        let good = b.as_bytes().to_vec();
        let bad = |f: &dyn Fn(&mut Vec<u8>)| {
            let mut v = good.clone();
            f(&mut v);
            DataFrame::parse(&v).unwrap_err()
        };
        assert_eq!(bad(&|v| v.truncate(10)), Malformed::Truncated);
        assert_eq!(bad(&|v| v[0] = 0x51), Malformed::BadMagic);
        assert_eq!(bad(&|v| v[2] = 2), Malformed::BadVersion);
        assert_eq!(bad(&|v| v[3] = 4), Malformed::BadKind);
        assert_eq!(bad(&|v| v[21] = 1), Malformed::Reserved);
        assert_eq!(
            bad(&|v| *v.last_mut().unwrap() = 1),
            Malformed::Reserved,
            "pad"
        );
        assert_eq!(bad(&|v| v.push(0)), Malformed::BadLength, "trailing");
        // body_len and the bytes agree, but n_pkts claims one more packet than present.
        assert_eq!(bad(&|v| v[17] = 2), Malformed::Truncated);
        // n_pkts claims fewer: leftover body.
        assert_eq!(bad(&|v| v[17] = 0), Malformed::BadLength);
        // pkt_len 0.
        assert_eq!(bad(&|v| v[24] = 0), Malformed::BadValue);
        // DATA_HB with a packet.
        assert_eq!(bad(&|v| v[3] = 2), Malformed::BadValue);
        // Over the 9000-byte cap.
        let mut big = vec![0u8; REP_DATA_FRAME_MAX + 1];
        big[..24].copy_from_slice(&good[..24]);
        assert_eq!(DataFrame::parse(&big).unwrap_err(), Malformed::BadLength);
    }

    // ---- consensus (07 §6.3, §6.5, §7.4, §9.4) ---------------------------------------------

    #[test]
    fn proposal_round_trip_digest_and_rules() {
        let p = proposal(ProposalKind::Headers, 10, 25);
        let b = p.to_bytes();
        assert_eq!(b.len(), 85);
        assert_eq!(RepProposal::parse(&b).unwrap(), p);
        let mut d = blake3::Hasher::new();
        d.update(b"vyrn v1 proposal");
        d.update(&b);
        assert_eq!(p.digest(), *d.finalize().as_bytes());
        // 16 headers is the cap for kind 0, 64 for kind 1.
        assert_eq!(
            RepProposal::parse(&proposal(ProposalKind::Headers, 10, 26).to_bytes()),
            Err(Malformed::TooMany)
        );
        assert!(RepProposal::parse(&proposal(ProposalKind::Seal, 10, 73).to_bytes()).is_ok());
        assert_eq!(
            RepProposal::parse(&proposal(ProposalKind::Seal, 10, 74).to_bytes()),
            Err(Malformed::TooMany)
        );
        assert_eq!(
            RepProposal::parse(&proposal(ProposalKind::Headers, 10, 9).to_bytes()),
            Err(Malformed::BadValue)
        );
        assert!(RepProposal::parse_with(
            &proposal(ProposalKind::Headers, 10, 40).to_bytes(),
            32,
            64
        )
        .is_ok());
        let mut k = b;
        k[0] = 2;
        assert_eq!(RepProposal::parse(&k), Err(Malformed::BadKind));
        assert_eq!(RepProposal::parse(&b[..84]), Err(Malformed::Truncated));
        assert_eq!(
            RepProposal::parse(&[&b[..], &[0]].concat()),
            Err(Malformed::BadLength)
        );
    }

    #[test]
    fn seal_ext_round_trip_and_digest() {
        let p = proposal(ProposalKind::Seal, 10, 12);
        let e = RepSealExt {
            end_frame_seq: [500, 480],
            next_seq: 1,
            next_tenure: 3,
            unavail: vec![
                PktKey {
                    session: 5,
                    pkt_seq: 9,
                },
                PktKey {
                    session: 5,
                    pkt_seq: 10,
                },
                PktKey {
                    session: 6,
                    pkt_seq: 1,
                },
            ],
        };
        let b = e.to_bytes().unwrap();
        assert_eq!(b.len(), 22 + 3 * 8);
        assert_eq!(&b[18..22], &3u32.to_le_bytes());
        assert_eq!(RepSealExt::parse(&b).unwrap(), e);
        let want = *blake3::hash(&[&p.to_bytes()[..], &b[..]].concat()).as_bytes();
        assert_eq!(seal_digest(&p, &e).unwrap(), want);
        // Errors: truncated list, trailing bytes, unsorted list, count above the bound.
        assert_eq!(
            RepSealExt::parse(&b[..b.len() - 1]),
            Err(Malformed::Truncated)
        );
        assert_eq!(
            RepSealExt::parse(&[&b[..], &[0]].concat()),
            Err(Malformed::BadLength)
        );
        let mut u = e.clone();
        u.unavail.swap(0, 1);
        assert_eq!(u.to_bytes(), Err(Malformed::BadValue));
        let mut raw = b.clone();
        raw[22..30].copy_from_slice(&b[30..38]);
        raw[30..38].copy_from_slice(&b[22..30]);
        assert_eq!(RepSealExt::parse(&raw), Err(Malformed::BadValue));
        let mut many = b[..22].to_vec();
        many[18..22].copy_from_slice(&u32::MAX.to_le_bytes());
        assert_eq!(RepSealExt::parse(&many), Err(Malformed::TooMany));
    }

    #[test]
    fn finality_cert_round_trip_and_errors() {
        let c = RepFinalityCert {
            epoch: 7,
            view: 42,
            parent_view: 41,
            proposal: proposal(ProposalKind::Headers, 3, 3),
            entries: entries(&[0, 2, 3]),
        };
        let b = c.to_bytes().unwrap();
        assert_eq!(b.len(), 106 + 3 * 65);
        assert_eq!(b[105], 3);
        assert_eq!(RepFinalityCert::parse(&b).unwrap(), c);
        let mut x = b.clone();
        x[106 + 65] = 0; // second index 2 → 0: not ascending
        assert_eq!(RepFinalityCert::parse(&x), Err(Malformed::BadValue));
        let mut x = b.clone();
        x[106 + 65] = 0; // duplicate index
        x[106] = 0;
        assert_eq!(RepFinalityCert::parse(&x), Err(Malformed::BadValue));
        let mut x = b.clone();
        x[105] = 2; // below Q_BASE (and trailing)
        assert_eq!(
            RepFinalityCert::parse(&x[..106 + 130]),
            Err(Malformed::BadValue)
        );
        let mut x = b.clone();
        x[105] = (MAX_MEMBERS + 1) as u8;
        assert_eq!(RepFinalityCert::parse(&x), Err(Malformed::TooMany));
        let mut x = b.clone();
        x[105] = 4;
        assert_eq!(RepFinalityCert::parse(&x), Err(Malformed::Truncated));
        let mut x = b.clone();
        x.push(0);
        assert_eq!(RepFinalityCert::parse(&x), Err(Malformed::BadLength));
        let mut x = b.clone();
        x[20] = 9; // proposal kind
        assert_eq!(RepFinalityCert::parse(&x), Err(Malformed::BadKind));
        let mut w = c.clone();
        w.parent_view = 42;
        assert_eq!(w.to_bytes(), Err(Malformed::BadValue));
        let mut w = c.clone();
        w.epoch = 8;
        assert_eq!(w.to_bytes(), Err(Malformed::BadValue));
        let mut w = c.clone();
        w.entries.swap(0, 1);
        let mut out = vec![0xEE];
        assert_eq!(w.encode(&mut out), Err(Malformed::BadValue));
        assert_eq!(out, vec![0xEE], "a failed encode writes nothing");
    }

    #[test]
    fn root_cert_round_trip_and_vote_digest() {
        let c = RepRootCert {
            epoch: 7,
            view: 0,
            parent_view: 0,
            h: 1999,
            root: [9; 32],
            entries: entries(&[1, 2, 3, 4]),
        };
        let b = c.to_bytes().unwrap();
        assert_eq!(b.len(), 61 + 4 * 65);
        assert_eq!(&b[20..28], &1999u64.to_le_bytes());
        assert_eq!(RepRootCert::parse(&b).unwrap(), c);
        let mut m = b"vyrn v1 root".to_vec();
        m.extend_from_slice(&7u32.to_le_bytes());
        m.extend_from_slice(&1999u64.to_le_bytes());
        m.extend_from_slice(&[9; 32]);
        assert_eq!(
            root_vote_digest(7, 1999, &[9; 32]),
            *blake3::hash(&m).as_bytes()
        );
        assert_eq!(c.vote_digest(), root_vote_digest(7, 1999, &[9; 32]));
        assert_eq!(RepRootCert::parse(&b[..60]), Err(Malformed::Truncated));
        let mut x = b.clone();
        x[60] = 0;
        assert_eq!(RepRootCert::parse(&x[..61]), Err(Malformed::BadValue));
    }

    // ---- journal (07 §8.2) -------------------------------------------------------------------

    fn block(seal: bool) -> RepBlockRecord {
        let k = key(1);
        let mut data = pkt(1, 0x21);
        data.extend_from_slice(&pkt(10, 0x22));
        RepBlockRecord {
            tenure: 2,
            header: header(77, if seal { None } else { Some(&k) }),
            order: vec![0x07, 0x01, 0x0A, 0xAC, 0x02, 0x80, 0x08],
            pkt_hashes: vec![0x0102_0304_0506_0708, u64::MAX],
            data,
            unavail: vec![PktKey {
                session: 3,
                pkt_seq: 4,
            }],
        }
    }

    #[test]
    fn block_record_round_trip_and_layout() {
        for seal in [false, true] {
            let r = block(seal);
            let b = r.to_bytes().unwrap();
            assert_eq!(b.len(), 4096);
            assert_eq!(&b[0..8], b"PBBLK001");
            assert_eq!(&b[8..16], &77u64.to_le_bytes());
            assert_eq!(b[21], seal as u8);
            assert_eq!(&b[24..214], &r.header.to_bytes()[..]);
            assert_eq!(&b[214..218], &7u32.to_le_bytes());
            assert_eq!(&b[218..222], &16u32.to_le_bytes());
            assert_eq!(&b[222..226], &(48u32 + 192).to_le_bytes());
            assert_eq!(&b[226..230], &1u32.to_le_bytes());
            assert_eq!(&b[256..263], &r.order[..]);
            let v = BlockRecordRef::parse(&b).unwrap();
            assert_eq!(
                v.kind,
                if seal {
                    BlockKind::Seal
                } else {
                    BlockKind::Normal
                }
            );
            assert_eq!(
                v.packets().map(<[u8]>::len).collect::<Vec<_>>(),
                vec![48, 192]
            );
            assert_eq!(v.pkt_hashes().collect::<Vec<_>>(), r.pkt_hashes);
            assert_eq!(RepBlockRecord::parse(&b).unwrap(), r);
        }
        // Content of exactly 4096 bytes takes no padding; one more takes a second page.
        let mut r = block(false);
        r.order = vec![0xFF; 4096 - r.content_len() + r.order.len()];
        assert_eq!(r.to_bytes().unwrap().len(), 4096);
        r.order.push(0xFF);
        let b = r.to_bytes().unwrap();
        assert_eq!(b.len(), 8192);
        assert_eq!(RepBlockRecord::parse(&b).unwrap(), r);
    }

    #[test]
    fn block_record_errors() {
        let good = block(false).to_bytes().unwrap();
        let bad = |f: &dyn Fn(&mut Vec<u8>)| {
            let mut v = good.clone();
            f(&mut v);
            BlockRecordRef::parse(&v).unwrap_err()
        };
        let put32 = |v: &mut Vec<u8>, off: usize, x: u32| {
            v[off..off + 4].copy_from_slice(&x.to_le_bytes());
        };
        assert_eq!(bad(&|v| v[0] = b'X'), Malformed::BadMagic);
        assert_eq!(bad(&|v| v[21] = 2), Malformed::BadKind);
        assert_eq!(
            bad(&|v| v[21] = 1),
            Malformed::BadValue,
            "seal kind with a signed header"
        );
        assert_eq!(bad(&|v| v[22] = 1), Malformed::Reserved);
        assert_eq!(bad(&|v| v[240] = 1), Malformed::Reserved);
        assert_eq!(bad(&|v| v[4000] = 1), Malformed::Reserved, "padding");
        assert_eq!(bad(&|v| v[8] = 78), Malformed::BadValue, "height vs header");
        assert_eq!(
            bad(&|v| put32(v, 218, 12)),
            Malformed::BadLength,
            "hash_len % 8"
        );
        assert_eq!(bad(&|v| put32(v, 214, 5000)), Malformed::Truncated);
        assert_eq!(bad(&|v| put32(v, 214, u32::MAX)), Malformed::Truncated);
        assert_eq!(bad(&|v| put32(v, 226, u32::MAX)), Malformed::TooMany);
        assert_eq!(
            bad(&|v| v.extend_from_slice(&[0; 4096])),
            Malformed::BadLength
        );
        assert_eq!(bad(&|v| v.truncate(4095)), Malformed::BadLength);
        assert_eq!(bad(&|v| v.truncate(100)), Malformed::Truncated);
        // Data section: a count byte of 0, and a packet cut short.
        let data_off = 256 + 7 + 16;
        assert_eq!(bad(&|v| v[data_off + 2] = 0), Malformed::BadValue);
        assert_eq!(bad(&|v| v[data_off + 48 + 2] = 11), Malformed::BadValue);
        let mut short = block(false);
        short.data.truncate(48);
        let mut v = short.to_bytes().unwrap();
        v[data_off + 2] = 2; // claims 64 bytes, 48 present
        assert_eq!(BlockRecordRef::parse(&v).unwrap_err(), Malformed::Truncated);
        // Unsorted unavailable list, via the owned encoder.
        let mut r = block(false);
        r.unavail.push(PktKey {
            session: 1,
            pkt_seq: 1,
        });
        assert_eq!(r.to_bytes(), Err(Malformed::BadValue));
    }

    // ---- control messages (07 §4.8 – §13.1) -----------------------------------------------

    fn report(seed: u8) -> TailReport {
        let mut t = TailReport {
            epoch: 7,
            tenure: 1,
            reporter: 2,
            h_i: 1000,
            f_i: [500, 480],
            extra: [
                vec![FrameRange { a: 502, b: 510 }, FrameRange { a: 512, b: 512 }],
                vec![],
            ],
            direct: [vec![0xFF, 0x01], vec![0x0F]],
            t_last_rx: 123_456_789,
            replay_lag_us: 150,
            promotable: true,
            sig: [0; 64],
        };
        t.sign(&key(seed));
        t
    }

    fn membership() -> RepMembership {
        let addr = addr_from_socket("10.0.0.1:7402".parse().unwrap());
        let vk = |s: u8| key(s).verifying_key().to_bytes();
        let voters = (0..4u8)
            .map(|i| Voter {
                index: i,
                vote_key: vk(10 + i),
                client: if i % 2 == 0 { Client::Rust } else { Client::Vx },
                facility: i + 1,
                data_addr: addr,
                repl_addr: addr,
            })
            .collect();
        let seq = |i: u8, role: Role, facility: u8| SeqBox {
            index: i,
            role,
            seq_key: vk(20 + i),
            facility,
            client_addr: addr,
            repl_addr: addr,
        };
        RepMembership {
            epoch_from: 9,
            home: *b"NY4\0",
            mode: Mode::Base,
            q: 3,
            voters,
            seq_order: vec![
                seq(0, Role::Primary, 1),
                seq(1, Role::Standby, 2),
                seq(2, Role::Spare, 3),
            ],
            recovery: 2,
            data_boxes: (0..4u8)
                .map(|i| DataBox {
                    index: i,
                    facility: i + 1,
                    addr,
                })
                .collect(),
            cert: vec![],
        }
    }

    fn all_ctrl() -> Vec<CtrlMsg> {
        let k = key(3);
        let mut m = membership();
        m.cert = vec![m.sign_entry(0, &key(10)), m.sign_entry(1, &key(11))];
        vec![
            CtrlMsg::RepAck(RepAck {
                epoch: 7,
                tenure: 1,
                contiguous_frame_seq: [10, 20],
                path_mask: 3,
            }),
            CtrlMsg::Nack(Nack {
                epoch: 7,
                tenure: 1,
                stream: 1,
                from_seq: 5,
                to_seq: 5,
            }),
            CtrlMsg::NackTooOld(NackTooOld {
                epoch: 7,
                tenure: 1,
                stream: 0,
                oldest_seq: 99,
                seq_sig: [7; 64],
            }),
            CtrlMsg::RepairReq(RepairReq {
                epoch: 7,
                tenure: 1,
                stream: 0,
                from_seq: 1,
                to_seq: 9,
            }),
            CtrlMsg::DataFetch(DataFetch::Range { from: 3, to: 4 }),
            CtrlMsg::DataFetch(DataFetch::Key(PktKey {
                session: 5,
                pkt_seq: 6,
            })),
            CtrlMsg::HashListReq(HashListReq { height: 77 }),
            CtrlMsg::TailReport(Box::new(report(4))),
            CtrlMsg::Silence(Box::new(Silence {
                epoch: 7,
                tenure: 1,
                seq: 0,
                reason: SilenceReason::Silence,
                report: report(5),
            })),
            CtrlMsg::TailConflict(TailConflict {
                frame_seq: 501,
                stream: 1,
                bytes: vec![0x50, 0x42, 1, 1],
                direct: true,
            }),
            CtrlMsg::SeqEquivocation(Box::new(SeqEquivocation {
                epoch: 7,
                height: 77,
                header_a: header(77, Some(&k)),
                header_b: {
                    let mut h = header(77, None);
                    h.data_root = [4; 32];
                    h.sign(&k);
                    h
                },
            })),
            CtrlMsg::RepDurableMark(RepDurableMark {
                epoch: 7,
                tenure: 1,
                step: 5000,
                height: 76,
            }),
            CtrlMsg::DataBadMac(DataBadMac {
                session: 5,
                pkt_seq: 6,
            }),
            CtrlMsg::CopyConflict(CopyConflict {
                session: 5,
                pkt_seq: 6,
                h1: [1; 32],
                h2: [2; 32],
            }),
            CtrlMsg::DataDown(DataDown { d: 2 }),
            CtrlMsg::DataRedirect(DataRedirect {
                from: 2,
                to: 3,
                session: 5,
                resend_from: 17,
            }),
            CtrlMsg::SeqChange(SeqChange {
                epoch: 7,
                tenure: 2,
                new_seq: 1,
                addr: addr_from_socket("[2001:db8::1]:9000".parse().unwrap()),
                seal_height: 1_000,
                seal_last_step: u64::MAX,
            }),
            CtrlMsg::SeqChange(SeqChange {
                epoch: 7,
                tenure: 2,
                new_seq: 0xFF,
                addr: [0; 18],
                seal_height: 3,
                seal_last_step: 0,
            }),
            CtrlMsg::RepMembership(Box::new(m)),
            CtrlMsg::FinalityCert(Box::new(RepFinalityCert {
                epoch: 7,
                view: 3,
                parent_view: 1,
                proposal: proposal(ProposalKind::Headers, 1, 2),
                entries: entries(&[0, 1, 2]),
            })),
            CtrlMsg::HashList(HashList {
                height: 77,
                stream: 1,
                part: 1,
                parts: 3,
                first: 256,
                hashes: vec![[7; 32], [8; 32]],
            }),
        ]
    }

    #[test]
    fn ctrl_round_trip_every_type() {
        let sizes = [23, 23, 79, 23, 17, 9, 9];
        for (i, m) in all_ctrl().iter().enumerate() {
            let b = m.to_bytes().unwrap();
            assert_eq!(b[0], m.msg_type());
            if let Some(&s) = sizes.get(i) {
                assert_eq!(b.len(), s, "{m:?}");
            }
            assert_eq!(&CtrlMsg::parse(&b).unwrap(), m);
            // Every prefix is refused, and so is one trailing byte.
            for n in 0..b.len() {
                assert!(CtrlMsg::parse(&b[..n]).is_err(), "prefix {n} of {m:?}");
            }
            let mut t = b.clone();
            t.push(0);
            assert_eq!(CtrlMsg::parse(&t), Err(Malformed::BadLength), "{m:?}");
        }
        assert_eq!(CtrlMsg::parse(&[0x7F]), Err(Malformed::BadKind));
        assert_eq!(CtrlMsg::parse(&[]), Err(Malformed::Truncated));
        assert_eq!(
            Nack::parse(&RepAck::default().to_bytes().unwrap()),
            Err(Malformed::BadKind)
        );
    }

    #[test]
    fn ctrl_fixed_sizes() {
        let len = |m: CtrlMsg| m.to_bytes().unwrap().len();
        assert_eq!(len(CtrlMsg::RepDurableMark(RepDurableMark::default())), 22);
        assert_eq!(len(CtrlMsg::DataBadMac(DataBadMac::default())), 9);
        assert_eq!(
            len(CtrlMsg::CopyConflict(CopyConflict {
                h2: [1; 32],
                ..Default::default()
            })),
            73
        );
        assert_eq!(len(CtrlMsg::DataDown(DataDown::default())), 2);
        assert_eq!(
            len(CtrlMsg::DataRedirect(DataRedirect {
                from: 0,
                to: 1,
                session: 0,
                resend_from: 1
            })),
            11
        );
        assert_eq!(len(CtrlMsg::SeqChange(SeqChange::default())), 41);
        let e = &all_ctrl()[10];
        assert_eq!(len(e.clone()), 1 + 4 + 8 + 190 + 190);
    }

    #[test]
    fn ctrl_value_errors() {
        let enc = |m: &dyn Fn(&mut Vec<u8>)| {
            let mut v = Vec::new();
            m(&mut v);
            v
        };
        // RepAck: path_mask bit 2 is reserved.
        let mut b = RepAck::default().to_bytes().unwrap();
        b[22] = 4;
        assert_eq!(RepAck::parse(&b), Err(Malformed::Reserved));
        // Nack: stream 2, from > to, from 0.
        let n = Nack {
            epoch: 1,
            tenure: 0,
            stream: 0,
            from_seq: 2,
            to_seq: 3,
        };
        assert_eq!(Nack { stream: 2, ..n }.to_bytes(), Err(Malformed::BadValue));
        assert_eq!(
            Nack { from_seq: 4, ..n }.to_bytes(),
            Err(Malformed::BadValue)
        );
        assert_eq!(
            Nack { from_seq: 0, ..n }.to_bytes(),
            Err(Malformed::BadValue)
        );
        let mut b = n.to_bytes().unwrap();
        b[6] = 2;
        assert_eq!(Nack::parse(&b), Err(Malformed::BadValue));
        assert_eq!(
            RepairReq {
                epoch: 1,
                tenure: 0,
                stream: 0,
                from_seq: 9,
                to_seq: 3
            }
            .to_bytes(),
            Err(Malformed::BadValue)
        );
        // DataFetch: reversed range.
        let b = enc(&|v| {
            v.push(ty::DATA_FETCH_RANGE);
            v.extend_from_slice(&5u64.to_le_bytes());
            v.extend_from_slice(&4u64.to_le_bytes());
        });
        assert_eq!(DataFetch::parse(&b), Err(Malformed::BadValue));
        // CopyConflict: equal hashes are no conflict.
        assert_eq!(CopyConflict::default().to_bytes(), Err(Malformed::BadValue));
        // DataRedirect to itself.
        assert_eq!(
            DataRedirect {
                from: 1,
                to: 1,
                session: 1,
                resend_from: 1
            }
            .to_bytes(),
            Err(Malformed::BadValue)
        );
        // SeqChange: none with an address.
        let mut s = SeqChange {
            new_seq: 0xFF,
            ..SeqChange::default()
        };
        s.addr[0] = 1;
        assert_eq!(s.to_bytes(), Err(Malformed::Reserved));
        // TailConflict: too many bytes, direct not 0/1.
        let t = TailConflict {
            frame_seq: 1,
            stream: 0,
            bytes: vec![0; 9217],
            direct: false,
        };
        assert_eq!(t.to_bytes(), Err(Malformed::TooMany));
        let mut b = TailConflict { bytes: vec![], ..t }.to_bytes().unwrap();
        *b.last_mut().unwrap() = 2;
        assert_eq!(TailConflict::parse(&b), Err(Malformed::BadValue));
        let mut b = TailConflict {
            bytes: vec![],
            ..TailConflict::default()
        }
        .to_bytes()
        .unwrap();
        b[10..12].copy_from_slice(&9217u16.to_le_bytes());
        assert_eq!(TailConflict::parse(&b), Err(Malformed::TooMany));
    }

    #[test]
    fn tail_report_rules_and_signature() {
        let k = key(4);
        let t = report(4);
        assert!(t.verify(&k.verifying_key()));
        assert!(!t.verify(&key(5).verifying_key()));
        let b = t.to_bytes().unwrap();
        // signed_bytes = the message minus the type byte and the trailing signature.
        assert_eq!(t.signed_bytes(), b[1..b.len() - 64].to_vec());
        let mut t2 = t.clone();
        t2.replay_lag_us += 1;
        assert!(!t2.verify(&k.verifying_key()));
        // extra: must start ≥ F_i + 2, be ascending with gaps, a ≤ b, ≤ 64 per substream.
        let with = |s: usize, r: Vec<FrameRange>| {
            let mut x = t.clone();
            x.extra[s] = r;
            x.to_bytes()
        };
        let fr = |a, b| FrameRange { a, b };
        assert_eq!(with(0, vec![fr(501, 505)]), Err(Malformed::BadValue));
        assert_eq!(
            with(0, vec![fr(502, 505), fr(506, 507)]),
            Err(Malformed::BadValue)
        );
        assert_eq!(with(0, vec![fr(510, 505)]), Err(Malformed::BadValue));
        assert!(with(1, vec![fr(482, 482), fr(484, u64::MAX)]).is_ok());
        assert_eq!(
            with(1, vec![fr(482, u64::MAX), fr(1, 1)]),
            Err(Malformed::BadValue)
        );
        let many: Vec<_> = (0..65u64).map(|i| fr(1000 + 3 * i, 1000 + 3 * i)).collect();
        assert_eq!(with(1, many.clone()), Err(Malformed::TooMany));
        assert!(with(1, many[..64].to_vec()).is_ok());
        let mut x = t.clone();
        x.direct[0] = vec![0; TAIL_DIRECT_MAX_BYTES + 1];
        assert_eq!(x.to_bytes(), Err(Malformed::TooMany));
        // Wire: an extra count of 65, a direct length above the bound, promotable 2.
        let off_n0 = 1 + 4 + 1 + 1 + 8 + 16;
        let mut w = b.clone();
        w[off_n0] = 65;
        assert_eq!(TailReport::parse(&w), Err(Malformed::TooMany));
        let off_d0 = off_n0 + 1 + 32 + 1;
        let mut w = b.clone();
        w[off_d0..off_d0 + 4].copy_from_slice(&u32::MAX.to_le_bytes());
        assert_eq!(TailReport::parse(&w), Err(Malformed::TooMany));
        let mut w = b.clone();
        w[off_d0..off_d0 + 4].copy_from_slice(&100u32.to_le_bytes());
        assert_eq!(TailReport::parse(&w), Err(Malformed::Truncated));
        let mut w = b.clone();
        let p = w.len() - 65;
        w[p] = 2;
        assert_eq!(TailReport::parse(&w), Err(Malformed::BadValue));
        // Silence: the report must be for the same (epoch, tenure); unknown reason.
        let s = Silence {
            epoch: 7,
            tenure: 2,
            seq: 0,
            reason: SilenceReason::Equiv,
            report: t,
        };
        assert_eq!(s.to_bytes(), Err(Malformed::BadValue));
        let s = Silence { tenure: 1, ..s };
        let mut w = s.to_bytes().unwrap();
        assert_eq!(Silence::parse(&w).unwrap(), s);
        w[7] = 9;
        assert_eq!(Silence::parse(&w), Err(Malformed::BadValue));
    }

    #[test]
    fn seq_equivocation_check() {
        let k = key(3);
        let vk = k.verifying_key();
        let CtrlMsg::SeqEquivocation(e) = all_ctrl()[10].clone() else {
            unreachable!()
        };
        assert_eq!(e.check(&vk), Ok(()));
        assert_eq!(
            e.check(&key(9).verifying_key()),
            Err(EquivocationError::BadSigA)
        );
        let same = SeqEquivocation {
            header_b: e.header_a,
            ..*e
        };
        assert_eq!(same.check(&vk), Err(EquivocationError::Identical));
        let mut h = e.header_b;
        h.height = 78;
        h.sign(&k);
        assert_eq!(
            SeqEquivocation { header_b: h, ..*e }.check(&vk),
            Err(EquivocationError::WrongSlot)
        );
        let mut h = e.header_b;
        h.seq_sig[0] ^= 1;
        assert_eq!(
            SeqEquivocation { header_b: h, ..*e }.check(&vk),
            Err(EquivocationError::BadSigB)
        );
        let b = e.to_bytes().unwrap();
        assert_eq!(SeqEquivocation::parse(&b).unwrap(), *e);
        assert_eq!(SeqEquivocation::parse(&b[..200]), Err(Malformed::Truncated));
    }

    #[test]
    fn membership_round_trip_digest_and_cert() {
        let m = membership();
        assert_eq!(m.validate(), Ok(()));
        let mut want = b"vyrn v1 membership".to_vec();
        want.extend_from_slice(&m.body_bytes());
        assert_eq!(m.body_digest(), *blake3::hash(&want).as_bytes());
        // 4 + 4 + 3 + 4×71 + 1 + 3×71 + 1 + 1 + 4×20
        assert_eq!(m.body_bytes().len(), 11 + 284 + 1 + 213 + 1 + 1 + 80);
        // Certified by the current set (here: the same voters, keys 10..14).
        let mut next = m.clone();
        next.epoch_from = 10;
        next.cert = (0..3u8).map(|i| next.sign_entry(i, &key(10 + i))).collect();
        assert_eq!(next.verify_cert(&m), Ok(()));
        let b = next.to_bytes().unwrap();
        assert_eq!(b.len(), 1 + next.body_bytes().len() + 1 + 3 * 65);
        assert_eq!(RepMembership::parse(&b).unwrap(), next);
        let mut few = next.clone();
        few.cert.pop();
        assert_eq!(few.verify_cert(&m), Err(MembershipError::CertTooFew));
        let mut wrong = next.clone();
        wrong.cert[2] = next.sign_entry(2, &key(99));
        assert_eq!(wrong.verify_cert(&m), Err(MembershipError::CertSig));
        let mut idx = next.clone();
        idx.cert[2].index = 7;
        assert_eq!(idx.verify_cert(&m), Err(MembershipError::CertIndex));
        let mut changed = next.clone();
        changed.recovery = 0;
        assert_eq!(changed.verify_cert(&m), Err(MembershipError::CertSig));
        // Wire errors: mode, client, role, count bound, unsorted cert.
        let off_mode = 1 + 4 + 4;
        let mut w = b.clone();
        w[off_mode] = 2;
        assert_eq!(RepMembership::parse(&w), Err(Malformed::BadValue));
        let mut w = b.clone();
        w[off_mode + 1] = (MAX_MEMBERS + 1) as u8;
        assert_eq!(RepMembership::parse(&w), Err(Malformed::TooMany));
        let mut w = b.clone();
        w[off_mode + 1] = 15;
        assert_eq!(RepMembership::parse(&w), Err(Malformed::Truncated));
        let mut w = b.clone();
        w[off_mode + 3 + 33] = 2; // voter 0's client
        assert_eq!(RepMembership::parse(&w), Err(Malformed::BadValue));
        let mut w = b.clone();
        w[off_mode + 3 + 4 * 71 + 2] = 3; // seq_order[0].role
        assert_eq!(RepMembership::parse(&w), Err(Malformed::BadValue));
        let mut unsorted = next.clone();
        unsorted.cert.swap(0, 1);
        assert_eq!(unsorted.to_bytes(), Err(Malformed::BadValue));
    }

    #[test]
    fn membership_rules() {
        let ok = membership();
        let check = |f: &dyn Fn(&mut RepMembership)| {
            let mut m = ok.clone();
            f(&mut m);
            m.validate()
        };
        use MembershipError::*;
        assert_eq!(check(&|m| m.q = 4), Err(BadQuorum));
        assert_eq!(check(&|m| m.mode = Mode::Chain), Err(BadSize));
        assert_eq!(check(&|m| m.voters.truncate(3)), Err(BadSize));
        assert_eq!(
            check(&|m| m.voters[1].client = Client::Rust),
            Err(ClientSplit)
        );
        assert_eq!(check(&|m| m.voters.swap(0, 1)), Err(VoterIndex));
        assert_eq!(
            check(&|m| m.voters[1].vote_key = m.voters[0].vote_key),
            Err(DuplicateKey)
        );
        assert_eq!(
            check(&|m| m.seq_order[2].seq_key = m.seq_order[0].seq_key),
            Err(DuplicateKey)
        );
        assert_eq!(
            check(&|m| m.seq_order[2].seq_key = m.voters[3].vote_key),
            Err(KeyReuse)
        );
        assert_eq!(check(&|m| m.seq_order[1].index = 5), Err(SeqIndex));
        assert_eq!(
            check(&|m| m.seq_order[1].role = Role::Primary),
            Err(PrimaryCount)
        );
        assert_eq!(check(&|m| m.seq_order.clear()), Err(PrimaryCount));
        assert_eq!(
            check(&|m| {
                m.seq_order[0].role = Role::Spare;
                m.seq_order[2].role = Role::Primary;
            }),
            Err(SeqOrder)
        );
        assert_eq!(
            check(&|m| m.seq_order[2].role = Role::Standby),
            Err(SeqOrder)
        );
        assert_eq!(
            check(&|m| m.seq_order[1].facility = 3),
            Err(StandbyFacility)
        );
        assert_eq!(check(&|m| m.recovery = 1), Err(RecoveryNotRust));
        assert_eq!(check(&|m| m.recovery = 4), Err(RecoveryUnknown));
        assert_eq!(check(&|m| m.data_boxes[3].index = 0), Err(DataBoxIndex));
        // A valid CHAIN set: 5 voters, 3 Rust + 2 Vx, Q = 4.
        let chain = check(&|m| {
            m.mode = Mode::Chain;
            m.q = 4;
            let mut v = m.voters[0];
            v.index = 4;
            v.vote_key = key(30).verifying_key().to_bytes();
            m.voters.push(v);
        });
        assert_eq!(chain, Ok(()));
    }
}

/// `HashList` (the answer to `HashListReq`): golden bytes, the split of a long list into parts,
/// and refusals (a part past `parts`, too many hashes, a count longer than the bytes).
#[test]
fn hash_list_golden_split_and_refusals() {
    use vyrn_wire::msg::ctrl::{HashList, HASH_LIST_PART_MAX};
    use vyrn_wire::Malformed;
    let m = HashList {
        height: 0x0102,
        stream: 1,
        part: 0,
        parts: 1,
        first: 0,
        hashes: vec![[0xAB; 32]],
    };
    let b = m.to_bytes().unwrap();
    let mut want = vec![
        0x14, 0x02, 0x01, 0, 0, 0, 0, 0, 0, 1, 0, 0, 1, 0, 0, 0, 0, 0, 1, 0,
    ];
    want.extend_from_slice(&[0xAB; 32]);
    assert_eq!(b, want);
    assert_eq!(HashList::parse(&b).unwrap(), m);
    let list: Vec<[u8; 32]> = (0..600u32).map(|i| [i as u8; 32]).collect();
    let parts = HashList::split(9, 0, &list);
    assert_eq!(parts.len(), 3);
    assert_eq!(parts[2].first as usize, 2 * HASH_LIST_PART_MAX);
    let joined: Vec<[u8; 32]> = parts.iter().flat_map(|p| p.hashes.clone()).collect();
    assert_eq!(joined, list);
    assert_eq!(HashList::split(9, 0, &[]).len(), 1);
    let bad = HashList {
        part: 1,
        ..m.clone()
    };
    assert_eq!(bad.to_bytes(), Err(Malformed::BadValue));
    let mut short = b.clone();
    short.truncate(b.len() - 1);
    assert!(HashList::parse(&short).is_err());
    let mut big = b[..18].to_vec();
    big.extend_from_slice(&((HASH_LIST_PART_MAX + 1) as u16).to_le_bytes());
    assert_eq!(HashList::parse(&big), Err(Malformed::BadValue));
}

/// Security review F5: a NACK or RepairReq names at most NACK_SPAN_MAX frames; one for
/// `1..=u64::MAX` (or any longer span) is refused at parse, before a server walks it.
#[test]
fn frame_range_requests_are_bounded_at_parse() {
    use vyrn_wire::consts::NACK_SPAN_MAX;
    use vyrn_wire::msg::ctrl::{Nack, RepairReq};
    let n = |from, to| Nack {
        epoch: 1,
        tenure: 0,
        stream: 0,
        from_seq: from,
        to_seq: to,
    };
    let ok = n(10, 10 + NACK_SPAN_MAX - 1).to_bytes().unwrap();
    assert!(Nack::parse(&ok).is_ok());
    assert!(n(10, 10 + NACK_SPAN_MAX).to_bytes().is_err());
    assert!(n(1, u64::MAX).to_bytes().is_err());
    // The same bytes forged: refused on the way in.
    let mut forged = ok.clone();
    let at = forged.len() - 8;
    forged[at..].copy_from_slice(&u64::MAX.to_le_bytes());
    assert!(Nack::parse(&forged).is_err());
    let r = RepairReq {
        epoch: 1,
        tenure: 0,
        stream: 1,
        from_seq: 1,
        to_seq: 16_384,
    };
    assert!(r.to_bytes().is_err());
}

/// Security review F17: `NackTooOld` carries the box's signature; a replica takes only one
/// that verifies under `seq_key` (a forged one would stop its NACKs to the box).
#[test]
fn nack_too_old_is_signed_by_the_box() {
    use ed25519_dalek::SigningKey;
    use vyrn_wire::msg::ctrl::{CtrlMsg, NackTooOld};
    let key = SigningKey::from_bytes(&[9; 32]);
    let m = NackTooOld::sign(7, 0, 1, 1234, &key);
    let b = m.to_bytes().unwrap();
    assert_eq!(b.len(), 1 + 4 + 1 + 1 + 8 + 64);
    let Ok(CtrlMsg::NackTooOld(back)) = CtrlMsg::parse(&b) else {
        panic!("parses");
    };
    assert!(back.verify(&key.verifying_key()));
    // Another key, another oldest_seq, a flipped signature bit, or the unsigned form: refused.
    assert!(!back.verify(&SigningKey::from_bytes(&[8; 32]).verifying_key()));
    let mut moved = back;
    moved.oldest_seq = u64::MAX;
    assert!(!moved.verify(&key.verifying_key()));
    let mut flipped = back;
    flipped.seq_sig[3] ^= 1;
    assert!(!flipped.verify(&key.verifying_key()));
    assert!(NackTooOld::parse(&b[..15]).is_err(), "the old 15-byte form");
}

/// REP_RspEntry golden bytes (07 §8.5; `docs/wire-messages.md` "REP_RspEntry"): session 0x1001's
/// responses 1 (echo 1: Ack of message 0 with client_tag 42, then its Fill: price 1000, qty 5,
/// leaves 0, step 17) and 2 (echo 2: Ack of message 1, client_tag 43), each field against the
/// previous one. Both rebuild to the packets with `flags.resend` and a zero tag; a truncated
/// entry, an unknown record type and a non-canonical head are refused without touching the
/// state.
#[test]
fn rsp_entry_golden_and_refusals() {
    use vyrn_wire::leb::Reader;
    use vyrn_wire::msg::client::{Record, Response};
    use vyrn_wire::msg::rsp_entry::*;
    use vyrn_wire::Malformed;
    let key = [0x10u8; 16];
    let one = Response {
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
                qty: 5,
                leaves: 0,
                step: 17,
                client_tag: 42,
            },
        ],
    };
    let two = Response {
        echo_pkt_seq: 2,
        resp_seq: 2,
        records: vec![Record::Ack {
            msg_index: 1,
            client_tag: 43,
        }],
        ..one.clone()
    };
    let mut st = EntryState::default();
    let mut b = [0u8; 2 * RSP_ENTRY_MAX];
    let n = encode(&mut st, &one.to_bytes(&key).unwrap(), &mut b).unwrap();
    assert_eq!(
        b[..n],
        [0x02, 0x02, 0x01, 0x54, 0x03, 0xd0, 0x0f, 0x05, 0x00, 0x22, 0x00]
    );
    let m = encode(&mut st, &two.to_bytes(&key).unwrap(), &mut b[n..]).unwrap();
    assert_eq!(b[n..n + m], [0x02, 0x01, 0x11, 0x02]);
    assert_eq!(
        st,
        EntryState {
            echo: 2,
            tag: 43,
            price: 1000,
            step: 17
        }
    );
    // Rebuilt.
    let mut st = EntryState::default();
    let mut r = Reader::new(&b[..n + m]);
    let mut out = [0u8; RSP_PACKET_MAX];
    for (want, seq) in [(&one, 1u64), (&two, 2)] {
        let k = decode(&mut st, &mut r, 0x1001, seq, &mut out).unwrap();
        let mut w = Response {
            resend: true,
            ..want.clone()
        }
        .to_bytes(&key)
        .unwrap();
        let l = w.len();
        w[l - 16..].fill(0);
        assert_eq!(out[..k], w[..]);
    }
    // Refusals leave the state as it was.
    let mut refuse = |bytes: &[u8], why: Malformed| {
        let mut st = EntryState::default();
        let mut r = Reader::new(bytes);
        assert_eq!(
            decode(&mut st, &mut r, 1, 1, &mut out),
            Err(why),
            "{bytes:02x?}"
        );
        assert_eq!(st, EntryState::default());
    };
    refuse(&[0x02, 0x02, 0x01, 0x54, 0x03, 0xd0], Malformed::Truncated);
    refuse(&[0x02, 0x01, 0x0e], Malformed::BadValue);
    // Busy with msg_index 0 (its head must carry 15, 0xFF).
    refuse(&[0x02, 0x01, 0x06], Malformed::BadValue);
    refuse(&[0x02, 0x00], Malformed::TooMany);
    // A record with a reserved byte set cannot be kept exactly: refused at encode.
    let mut p = two.to_bytes(&key).unwrap();
    p[24 + 2] = 1;
    let mut st = EntryState::default();
    assert!(encode(&mut st, &p, &mut b).is_err());
    assert_eq!(st, EntryState::default());
}
