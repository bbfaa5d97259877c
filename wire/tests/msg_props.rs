//! Property tests for `vyrn_wire::msg`: round trips of the variable-length codecs, an independent
//! SipHash-2-4-128, and, for every parser, "never panics on any bytes" plus "what parses
//! re-encodes to the same bytes" (canonical encodings) on random and mutated inputs.

mod msg {
    use ed25519_dalek::SigningKey;
    use proptest::collection::{btree_set, vec};
    use proptest::prelude::*;
    use vyrn_wire::msg::client::*;
    use vyrn_wire::msg::consensus::*;
    use vyrn_wire::msg::ctrl::*;
    use vyrn_wire::msg::data::*;
    use vyrn_wire::msg::journal::*;
    use vyrn_wire::msg::PktKey;
    use vyrn_wire::BlockHeader;

    fn cfg() -> ProptestConfig {
        ProptestConfig::with_cases(256)
    }

    // ---- an independent SipHash-2-4-128 (from the paper, not from siphasher) -----------------

    fn sip_round(v: &mut [u64; 4]) {
        v[0] = v[0].wrapping_add(v[1]);
        v[1] = v[1].rotate_left(13) ^ v[0];
        v[0] = v[0].rotate_left(32);
        v[2] = v[2].wrapping_add(v[3]);
        v[3] = v[3].rotate_left(16) ^ v[2];
        v[0] = v[0].wrapping_add(v[3]);
        v[3] = v[3].rotate_left(21) ^ v[0];
        v[2] = v[2].wrapping_add(v[1]);
        v[1] = v[1].rotate_left(17) ^ v[2];
        v[2] = v[2].rotate_left(32);
    }

    fn sip128_reference(key: &[u8; 16], m: &[u8]) -> [u8; 16] {
        let k0 = u64::from_le_bytes(key[..8].try_into().unwrap());
        let k1 = u64::from_le_bytes(key[8..].try_into().unwrap());
        let mut v = [
            k0 ^ 0x736f_6d65_7073_6575,
            k1 ^ 0x646f_7261_6e64_6f6d ^ 0xee,
            k0 ^ 0x6c79_6765_6e65_7261,
            k1 ^ 0x7465_6462_7974_6573,
        ];
        let mut last = [0u8; 8];
        let full = m.len() / 8 * 8;
        for c in m[..full].chunks_exact(8) {
            let w = u64::from_le_bytes(c.try_into().unwrap());
            v[3] ^= w;
            sip_round(&mut v);
            sip_round(&mut v);
            v[0] ^= w;
        }
        last[..m.len() - full].copy_from_slice(&m[full..]);
        last[7] = m.len() as u8;
        let b = u64::from_le_bytes(last);
        v[3] ^= b;
        sip_round(&mut v);
        sip_round(&mut v);
        v[0] ^= b;
        v[2] ^= 0xee;
        (0..4).for_each(|_| sip_round(&mut v));
        let h1 = v[0] ^ v[1] ^ v[2] ^ v[3];
        v[1] ^= 0xdd;
        (0..4).for_each(|_| sip_round(&mut v));
        let h2 = v[0] ^ v[1] ^ v[2] ^ v[3];
        let mut out = [0u8; 16];
        out[..8].copy_from_slice(&h1.to_le_bytes());
        out[8..].copy_from_slice(&h2.to_le_bytes());
        out
    }

    #[test]
    fn sip128_reference_matches_vectors() {
        let k: [u8; 16] = core::array::from_fn(|i| i as u8);
        let m: Vec<u8> = (0..15).collect();
        assert_eq!(
            sip128_reference(&k, &m),
            [
                0x54, 0x93, 0xe9, 0x99, 0x33, 0xb0, 0xa8, 0x11, 0x7e, 0x08, 0xec, 0x0f, 0x97, 0xcf,
                0xc3, 0xd9
            ]
        );
    }

    // ---- strategies --------------------------------------------------------------------------

    fn arb_msg() -> impl Strategy<Value = Msg> {
        (0u8..3, any::<bool>(), any::<i32>(), 1u32.., any::<u32>()).prop_map(
            |(k, sell, tick, qty, client_tag)| {
                let side = if sell { Side::Sell } else { Side::Buy };
                match k {
                    0 => Msg {
                        kind: MsgType::NewGtc,
                        side,
                        tick,
                        qty,
                        client_tag,
                    },
                    1 => Msg {
                        kind: MsgType::NewIoc,
                        side,
                        tick,
                        qty,
                        client_tag,
                    },
                    _ => Msg {
                        kind: MsgType::Cancel,
                        side,
                        tick: 0,
                        qty: 0,
                        client_tag,
                    },
                }
            },
        )
    }

    fn arb_request() -> impl Strategy<Value = RequestPacket> {
        (
            any::<u16>(),
            any::<bool>(),
            any::<u32>(),
            1u32..,
            vec(arb_msg(), 1..=10),
        )
            .prop_map(|(book, resend, session, pkt_seq, msgs)| RequestPacket {
                book,
                resend,
                session,
                pkt_seq,
                msgs,
            })
    }

    fn arb_code() -> impl Strategy<Value = RejectCode> {
        (1u16..=14).prop_map(|c| RejectCode::from_u16(c).unwrap())
    }

    fn arb_record() -> impl Strategy<Value = Record> {
        let idx = 0u8..10;
        prop_oneof![
            (idx.clone(), any::<u32>()).prop_map(|(msg_index, client_tag)| Record::Ack {
                msg_index,
                client_tag
            }),
            (
                prop_oneof![idx.clone(), Just(MSG_INDEX_NONE)],
                arb_code(),
                any::<u64>(),
                any::<u32>()
            )
                .prop_map(|(msg_index, code, detail, client_tag)| Record::Reject {
                    msg_index,
                    code,
                    detail,
                    client_tag
                }),
            (
                idx.clone(),
                any::<i32>(),
                any::<u32>(),
                any::<u32>(),
                any::<u64>(),
                any::<u32>()
            )
                .prop_map(|(msg_index, price, qty, leaves, step, client_tag)| {
                    Record::Fill {
                        msg_index,
                        price,
                        qty,
                        leaves,
                        step,
                        client_tag,
                    }
                }),
            (idx.clone(), any::<u32>()).prop_map(|(msg_index, client_tag)| Record::CancelAck {
                msg_index,
                client_tag
            }),
            (idx, any::<u32>(), any::<u32>()).prop_map(|(msg_index, qty, client_tag)| {
                Record::Out {
                    msg_index,
                    qty,
                    client_tag,
                }
            }),
            Just(Record::Busy),
            Just(Record::Halted),
            (any::<u64>(), any::<u64>())
                .prop_map(|(step, height)| Record::Durable { step, height }),
            (any::<u64>(), any::<u64>()).prop_map(|(height, view)| Record::Final { height, view }),
            (any::<u32>(), any::<u8>(), 0u8..0xFF, any::<[u8; 18]>()).prop_map(
                |(epoch, tenure, new_seq, addr)| Record::SeqChange {
                    epoch,
                    tenure,
                    new_seq,
                    addr
                }
            ),
            (any::<u32>(), any::<u8>(), any::<u64>(), any::<u64>()).prop_map(
                |(epoch, tenure, height, last_step)| Record::TenureEnd {
                    epoch,
                    tenure,
                    height,
                    last_step,
                }
            ),
            (any::<u32>(), any::<u8>()).prop_map(|(epoch, tenure)| Record::SeqChange {
                epoch,
                tenure,
                new_seq: 0xFF,
                addr: [0; 18]
            }),
            (any::<u8>(), any::<u8>(), any::<u32>()).prop_map(|(from, to, resend_from)| {
                Record::DataRedirect {
                    from,
                    to,
                    resend_from,
                }
            }),
        ]
    }

    fn arb_response() -> impl Strategy<Value = Response> {
        (
            any::<u32>(),
            1u32..,
            1u64..,
            any::<bool>(),
            vec(arb_record(), 1..=RESP_MAX_RECORDS),
        )
            .prop_map(
                |(session, echo_pkt_seq, resp_seq, resend, records)| Response {
                    session,
                    echo_pkt_seq,
                    resp_seq,
                    resend,
                    records,
                },
            )
    }

    /// Valid `extra` ranges above `f`: (gap ≥ 2, length) pairs.
    fn arb_ranges() -> impl Strategy<Value = (u64, Vec<(u64, u64)>)> {
        (
            0u64..1 << 40,
            vec((2u64..1000, 0u64..1000), 0..=TAIL_EXTRA_MAX),
        )
    }

    fn ranges(f: u64, steps: &[(u64, u64)]) -> Vec<FrameRange> {
        let mut next = f;
        steps
            .iter()
            .map(|&(gap, len)| {
                let a = next + gap;
                next = a + len;
                FrameRange { a, b: a + len }
            })
            .collect()
    }

    fn arb_tail_report() -> impl Strategy<Value = TailReport> {
        (
            (any::<u32>(), any::<u8>(), any::<u8>(), any::<u64>()),
            arb_ranges(),
            arb_ranges(),
            (vec(any::<u8>(), 0..64), vec(any::<u8>(), 0..64)),
            (any::<u64>(), any::<u32>(), any::<bool>(), any::<[u8; 32]>()),
        )
            .prop_map(
                |((epoch, tenure, reporter, h_i), (fa, ra), (fb, rb), (da, db), tail)| {
                    let (t_last_rx, replay_lag_us, promotable, s) = tail;
                    let mut sig = [0u8; 64];
                    sig[..32].copy_from_slice(&s);
                    TailReport {
                        epoch,
                        tenure,
                        reporter,
                        h_i,
                        f_i: [fa, fb],
                        extra: [ranges(fa, &ra), ranges(fb, &rb)],
                        direct: [da, db],
                        t_last_rx,
                        replay_lag_us,
                        promotable,
                        sig,
                    }
                },
            )
    }

    fn arb_entries(min: usize) -> impl Strategy<Value = Vec<CertEntry>> {
        btree_set(any::<u8>(), min..=vyrn_wire::msg::MAX_MEMBERS).prop_map(|s| {
            s.into_iter()
                .map(|index| CertEntry {
                    index,
                    sig: [index ^ 0x5A; 64],
                })
                .collect()
        })
    }

    fn arb_membership() -> impl Strategy<Value = RepMembership> {
        let voter = (
            any::<u8>(),
            any::<[u8; 32]>(),
            any::<bool>(),
            any::<u8>(),
            any::<[u8; 18]>(),
        )
            .prop_map(|(index, vote_key, vx, facility, addr)| Voter {
                index,
                vote_key,
                client: if vx { Client::Vx } else { Client::Rust },
                facility,
                data_addr: addr,
                repl_addr: addr,
            });
        let seq = (
            any::<u8>(),
            0u8..3,
            any::<[u8; 32]>(),
            any::<u8>(),
            any::<[u8; 18]>(),
        )
            .prop_map(|(index, role, seq_key, facility, addr)| SeqBox {
                index,
                role: [Role::Primary, Role::Standby, Role::Spare][role as usize],
                seq_key,
                facility,
                client_addr: addr,
                repl_addr: addr,
            });
        let dbox =
            (any::<u8>(), any::<u8>(), any::<[u8; 18]>()).prop_map(|(index, facility, addr)| {
                DataBox {
                    index,
                    facility,
                    addr,
                }
            });
        (
            (
                any::<u32>(),
                any::<[u8; 4]>(),
                any::<bool>(),
                any::<u8>(),
                any::<u8>(),
            ),
            vec(voter, 0..=6),
            vec(seq, 0..=6),
            vec(dbox, 0..=6),
            arb_entries(0),
        )
            .prop_map(
                |((epoch_from, home, chain, q, recovery), voters, seq_order, data_boxes, cert)| {
                    RepMembership {
                        epoch_from,
                        home,
                        mode: if chain { Mode::Chain } else { Mode::Base },
                        q,
                        voters,
                        seq_order,
                        recovery,
                        data_boxes,
                        cert,
                    }
                },
            )
    }

    fn arb_proposal() -> impl Strategy<Value = RepProposal> {
        (
            any::<bool>(),
            any::<u32>(),
            0u64..u64::MAX - 100,
            0u64..16,
            any::<[u8; 32]>(),
        )
            .prop_map(|(seal, epoch, first, span, h)| RepProposal {
                kind: if seal {
                    ProposalKind::Seal
                } else {
                    ProposalKind::Headers
                },
                epoch,
                first_height: first,
                last_height: first + span,
                last_hash: h,
                excl_root: [0; 32],
            })
    }

    fn arb_keys(max: usize) -> impl Strategy<Value = Vec<PktKey>> {
        btree_set((any::<u32>(), any::<u32>()), 0..max).prop_map(|s| {
            s.into_iter()
                .map(|(session, pkt_seq)| PktKey { session, pkt_seq })
                .collect()
        })
    }

    fn header(height: u64, seal: bool) -> BlockHeader {
        BlockHeader {
            height,
            epoch: 3,
            book: 1,
            first_step: 1,
            last_step: 0,
            prev: [1; 32],
            order_root: [2; 32],
            data_root: [3; 32],
            seq_sig: if seal { [0; 64] } else { [7; 64] },
        }
    }

    fn arb_block() -> impl Strategy<Value = RepBlockRecord> {
        (
            (any::<u64>(), any::<bool>(), any::<u8>()),
            vec(any::<u8>(), 0..300),
            vec(any::<u64>(), 0..40),
            vec((1u8..=10, any::<u8>()), 0..30),
            arb_keys(20),
        )
            .prop_map(
                |((height, seal, tenure), order, pkt_hashes, pkts, unavail)| {
                    let mut data = Vec::new();
                    for (count, fill) in pkts {
                        let start = data.len();
                        data.resize(start + 32 + 16 * count as usize, fill);
                        data[start + 2] = count;
                    }
                    RepBlockRecord {
                        tenure,
                        header: header(height, seal),
                        order,
                        pkt_hashes,
                        data,
                        unavail,
                    }
                },
            )
    }

    // ---- round trips -------------------------------------------------------------------------

    proptest! {
        #![proptest_config(cfg())]

        #[test]
        fn siphash_matches_independent_impl(key in any::<[u8; 16]>(), m in vec(any::<u8>(), 0..200)) {
            prop_assert_eq!(siphash128(&key, &m), sip128_reference(&key, &m));
        }

        #[test]
        fn data_frame_round_trip(
            pkts in vec(vec(any::<u8>(), 1..400), 0..80),
            cap in 24usize..=9000,
            hdr in (any::<u16>(), any::<u16>(), any::<u64>(), any::<u8>()),
        ) {
            let (book, epoch16, data_seq, src) = hdr;
            let mut b = DataFrameBuilder::with_cap(DataKind::Data, book, epoch16, data_seq, src, cap);
            let mut taken = Vec::new();
            for p in &pkts {
                match b.push(p) {
                    Ok(()) => taken.push(p.clone()),
                    Err(PushError::Full) | Err(PushError::TooLarge) => {
                        prop_assert!(!b.fits(p.len()));
                    }
                    Err(e) => prop_assert!(false, "{e:?}"),
                }
                prop_assert!(b.len() <= cap.max(24));
            }
            let f = DataFrame::parse(b.as_bytes()).unwrap();
            prop_assert_eq!(f.header.data_seq, data_seq);
            prop_assert_eq!(f.header.n_pkts as usize, taken.len());
            let got: Vec<Vec<u8>> = f.packets().map(<[u8]>::to_vec).collect();
            prop_assert_eq!(got, taken);
            let mut again = Vec::new();
            f.encode(&mut again);
            prop_assert_eq!(&again[..], b.as_bytes());
        }

        #[test]
        fn tail_report_round_trip(t in arb_tail_report(), standalone in any::<bool>()) {
            if standalone {
                let b = t.to_bytes().unwrap();
                prop_assert_eq!(TailReport::parse(&b).unwrap(), t);
            } else {
                let s = Silence {
                    epoch: t.epoch,
                    tenure: t.tenure,
                    seq: 1,
                    reason: SilenceReason::OrderRoot,
                    report: t,
                };
                let b = s.to_bytes().unwrap();
                prop_assert_eq!(CtrlMsg::parse(&b).unwrap(), CtrlMsg::Silence(Box::new(s)));
            }
        }

        #[test]
        fn membership_round_trip(m in arb_membership()) {
            let b = m.to_bytes().unwrap();
            prop_assert_eq!(b.len(), 1 + m.body_bytes().len() + 1 + 65 * m.cert.len());
            prop_assert_eq!(&b[1..1 + m.body_bytes().len()], &m.body_bytes()[..]);
            prop_assert_eq!(RepMembership::parse(&b).unwrap(), m);
        }

        #[test]
        fn request_round_trip(p in arb_request(), key in any::<[u8; 16]>()) {
            let b = p.to_bytes(&key).unwrap();
            prop_assert_eq!(b.len(), 32 + 16 * p.msgs.len());
            prop_assert_eq!(RequestPacket::parse(&b, &key).unwrap(), p.clone());
            let other = RequestPacket { resend: !p.resend, ..p }.to_bytes(&key).unwrap();
            prop_assert_eq!(full_hash(&b).unwrap(), full_hash(&other).unwrap());
            prop_assert_ne!(&b[b.len() - 16..], &other[other.len() - 16..]);
        }

        #[test]
        fn response_round_trip(r in arb_response(), key in any::<[u8; 16]>()) {
            let b = r.to_bytes(&key).unwrap();
            prop_assert_eq!(b.len(), Response::len_for(r.records.len()));
            prop_assert_eq!(Response::parse(&b, &key).unwrap(), r);
        }

        /// REP_RspEntry (07 §8.5): a session's responses kept as entries, delta-coded against
        /// one another, rebuild byte for byte (`flags.resend` set, the tag left to the sender),
        /// and every prefix of the entries is refused or decodes, never panics.
        #[test]
        fn rsp_entries_rebuild_their_packets(
            rs in vec(arb_response(), 1..8),
            session in any::<u32>(),
            first in 1u64..u64::MAX / 2,
        ) {
            use vyrn_wire::msg::rsp_entry::*;
            let key = [7u8; 16];
            let mut st = EntryState::default();
            let mut buf = vec![0u8; RSP_ENTRY_MAX];
            let mut entries = Vec::new();
            let mut want = Vec::new();
            for (i, r) in rs.into_iter().enumerate() {
                let r = Response { session, resp_seq: first + i as u64, ..r };
                let n = encode(&mut st, &r.to_bytes(&key).unwrap(), &mut buf).unwrap();
                prop_assert!(n <= RSP_ENTRY_MAX);
                entries.extend_from_slice(&buf[..n]);
                let mut w = Response { resend: true, ..r }.to_bytes(&key).unwrap();
                let k = w.len();
                w[k - 16..].fill(0);
                want.push(w);
            }
            let mut st = EntryState::default();
            let mut rd = vyrn_wire::leb::Reader::new(&entries);
            let mut out = [0u8; RSP_PACKET_MAX];
            for (i, w) in want.iter().enumerate() {
                let n = decode(&mut st, &mut rd, session, first + i as u64, &mut out).unwrap();
                prop_assert_eq!(&out[..n], &w[..]);
            }
            prop_assert!(rd.is_empty());
            for cut in 0..entries.len() {
                let mut st = EntryState::default();
                let mut rd = vyrn_wire::leb::Reader::new(&entries[..cut]);
                while !rd.is_empty() {
                    if decode(&mut st, &mut rd, session, 1, &mut out).is_err() {
                        break;
                    }
                }
            }
        }

        #[test]
        fn rsp_entry_decode_never_panics(b in vec(any::<u8>(), 0..400)) {
            use vyrn_wire::msg::rsp_entry::*;
            let mut st = EntryState::default();
            let mut rd = vyrn_wire::leb::Reader::new(&b);
            let mut out = [0u8; RSP_PACKET_MAX];
            while !rd.is_empty() {
                if decode(&mut st, &mut rd, 1, 1, &mut out).is_err() {
                    break;
                }
            }
        }

        #[test]
        fn seal_ext_and_certs_round_trip(
            p in arb_proposal(),
            unavail in arb_keys(50),
            ends in any::<[u64; 2]>(),
            e in arb_entries(3),
            view in 1u64..,
        ) {
            let x = RepSealExt { end_frame_seq: ends, next_seq: 0xFF, next_tenure: 1, unavail };
            prop_assert_eq!(RepSealExt::parse(&x.to_bytes().unwrap()).unwrap(), x);
            let c = RepFinalityCert { epoch: p.epoch, view, parent_view: view - 1, proposal: p, entries: e.clone() };
            prop_assert_eq!(RepFinalityCert::parse(&c.to_bytes().unwrap()).unwrap(), c);
            let r = RepRootCert { epoch: 1, view: 0, parent_view: 0, h: view, root: p.last_hash, entries: e };
            prop_assert_eq!(RepRootCert::parse(&r.to_bytes().unwrap()).unwrap(), r);
        }

        #[test]
        fn block_record_round_trip(r in arb_block()) {
            let b = r.to_bytes().unwrap();
            prop_assert_eq!(b.len() % 4096, 0);
            prop_assert!(b.len() - r.content_len() < 4096);
            prop_assert_eq!(RepBlockRecord::parse(&b).unwrap(), r);
        }
    }

    // ---- never panic, and canonical --------------------------------------------------------

    /// One valid encoding of every message type, the seeds of the mutation test.
    fn corpus() -> Vec<Vec<u8>> {
        let k = SigningKey::from_bytes(&[9; 32]);
        let mut out = Vec::new();
        let mut b = DataFrameBuilder::new(DataKind::Data, 1, 2, 3, 4);
        b.push(&[1; 48]).unwrap();
        b.push(&[2; 7]).unwrap();
        out.push(b.as_bytes().to_vec());
        let p = RepProposal {
            kind: ProposalKind::Headers,
            epoch: 3,
            first_height: 5,
            last_height: 6,
            last_hash: [4; 32],
            excl_root: [0; 32],
        };
        out.push(p.to_bytes().to_vec());
        let e = vec![
            CertEntry {
                index: 0,
                sig: [1; 64],
            },
            CertEntry {
                index: 1,
                sig: [2; 64],
            },
            CertEntry {
                index: 3,
                sig: [3; 64],
            },
        ];
        let s = RepSealExt {
            end_frame_seq: [9, 8],
            next_seq: 1,
            next_tenure: 2,
            unavail: vec![
                PktKey {
                    session: 1,
                    pkt_seq: 2,
                },
                PktKey {
                    session: 1,
                    pkt_seq: 3,
                },
            ],
        };
        out.push(s.to_bytes().unwrap());
        let c = RepFinalityCert {
            epoch: 3,
            view: 9,
            parent_view: 8,
            proposal: p,
            entries: e.clone(),
        };
        out.push(c.to_bytes().unwrap());
        out.push(
            RepRootCert {
                epoch: 3,
                view: 0,
                parent_view: 0,
                h: 999,
                root: [5; 32],
                entries: e,
            }
            .to_bytes()
            .unwrap(),
        );
        let mut data = vec![0x33; 48];
        data[2] = 1;
        let blk = RepBlockRecord {
            tenure: 1,
            header: header(5, false),
            order: vec![1, 2, 3],
            pkt_hashes: vec![7],
            data,
            unavail: vec![PktKey {
                session: 1,
                pkt_seq: 1,
            }],
        };
        out.push(blk.to_bytes().unwrap());
        let mut t = TailReport {
            epoch: 3,
            tenure: 1,
            reporter: 0,
            h_i: 5,
            f_i: [10, 20],
            extra: [vec![FrameRange { a: 12, b: 14 }], vec![]],
            direct: [vec![0xFF], vec![]],
            t_last_rx: 1,
            replay_lag_us: 2,
            promotable: false,
            sig: [0; 64],
        };
        t.sign(&k);
        let mut h2 = header(5, false);
        h2.order_root = [9; 32];
        let msgs = vec![
            CtrlMsg::RepAck(RepAck {
                epoch: 3,
                tenure: 1,
                contiguous_frame_seq: [1, 2],
                path_mask: 1,
            }),
            CtrlMsg::Nack(Nack {
                epoch: 3,
                tenure: 1,
                stream: 0,
                from_seq: 1,
                to_seq: 2,
            }),
            CtrlMsg::NackTooOld(NackTooOld {
                epoch: 3,
                tenure: 1,
                stream: 1,
                oldest_seq: 4,
                seq_sig: [7; 64],
            }),
            CtrlMsg::RepairReq(RepairReq {
                epoch: 3,
                tenure: 1,
                stream: 1,
                from_seq: 1,
                to_seq: 1,
            }),
            CtrlMsg::DataFetch(DataFetch::Range { from: 1, to: 2 }),
            CtrlMsg::DataFetch(DataFetch::Key(PktKey {
                session: 1,
                pkt_seq: 2,
            })),
            CtrlMsg::HashListReq(HashListReq { height: 5 }),
            CtrlMsg::HashList(HashList {
                height: 5,
                stream: 0,
                part: 0,
                parts: 1,
                first: 0,
                hashes: vec![[1; 32]],
            }),
            CtrlMsg::TailReport(Box::new(t.clone())),
            CtrlMsg::Silence(Box::new(Silence {
                epoch: 3,
                tenure: 1,
                seq: 0,
                reason: SilenceReason::HashLag,
                report: t,
            })),
            CtrlMsg::TailConflict(TailConflict {
                frame_seq: 4,
                stream: 0,
                bytes: vec![1, 2],
                direct: true,
            }),
            CtrlMsg::SeqEquivocation(Box::new(SeqEquivocation {
                epoch: 3,
                height: 5,
                header_a: header(5, false),
                header_b: h2,
            })),
            CtrlMsg::RepDurableMark(RepDurableMark {
                epoch: 3,
                tenure: 1,
                step: 2,
                height: 1,
            }),
            CtrlMsg::DataBadMac(DataBadMac {
                session: 1,
                pkt_seq: 2,
            }),
            CtrlMsg::CopyConflict(CopyConflict {
                session: 1,
                pkt_seq: 2,
                h1: [1; 32],
                h2: [2; 32],
            }),
            CtrlMsg::DataDown(DataDown { d: 1 }),
            CtrlMsg::DataRedirect(DataRedirect {
                from: 1,
                to: 2,
                session: 3,
                resend_from: 4,
            }),
            CtrlMsg::SeqChange(SeqChange {
                epoch: 3,
                tenure: 2,
                new_seq: 1,
                addr: [6; 18],
                seal_height: 9,
                seal_last_step: 99,
            }),
            CtrlMsg::RepMembership(Box::new(RepMembership {
                epoch_from: 4,
                home: *b"LD4\0",
                mode: Mode::Base,
                q: 3,
                voters: vec![Voter {
                    index: 0,
                    vote_key: [1; 32],
                    client: Client::Rust,
                    facility: 1,
                    data_addr: [2; 18],
                    repl_addr: [3; 18],
                }],
                seq_order: vec![SeqBox {
                    index: 0,
                    role: Role::Primary,
                    seq_key: [4; 32],
                    facility: 1,
                    client_addr: [5; 18],
                    repl_addr: [6; 18],
                }],
                recovery: 0,
                data_boxes: vec![DataBox {
                    index: 0,
                    facility: 2,
                    addr: [7; 18],
                }],
                cert: vec![CertEntry {
                    index: 0,
                    sig: [8; 64],
                }],
            })),
            CtrlMsg::FinalityCert(Box::new(c)),
            CtrlMsg::Diverge(Box::new(Diverge {
                epoch: 4,
                index: 9,
                reason: DivergeReason::Conflict,
                digests: vec![
                    DivergeDigest {
                        digest: [1; 32],
                        sigs: vec![
                            CertEntry {
                                index: 0,
                                sig: [2; 64],
                            },
                            CertEntry {
                                index: 2,
                                sig: [3; 64],
                            },
                        ],
                    },
                    DivergeDigest {
                        digest: [4; 32],
                        sigs: vec![],
                    },
                ],
            })),
        ];
        for m in msgs {
            out.push(m.to_bytes().unwrap());
        }
        let req = RequestPacket {
            book: 1,
            resend: true,
            session: 2,
            pkt_seq: 3,
            msgs: vec![Msg {
                kind: MsgType::NewIoc,
                side: Side::Sell,
                tick: -1,
                qty: 2,
                client_tag: 3,
            }],
        };
        out.push(req.to_bytes(&KEY).unwrap());
        let resp = Response {
            session: 2,
            echo_pkt_seq: 3,
            resp_seq: 4,
            resend: false,
            records: vec![
                Record::Reject {
                    msg_index: 0,
                    code: RejectCode::Busy,
                    detail: 0,
                    client_tag: 3,
                },
                Record::Final { height: 1, view: 1 },
            ],
        };
        out.push(resp.to_bytes(&KEY).unwrap());
        out
    }

    const KEY: SipKey = [0x42; 16];

    /// The corpus, built once.
    fn seeds() -> &'static [Vec<u8>] {
        static SEEDS: std::sync::OnceLock<Vec<Vec<u8>>> = std::sync::OnceLock::new();
        SEEDS.get_or_init(corpus)
    }

    /// Run every parser on `b`; whatever parses must re-encode to exactly `b`. Returns how
    /// many top-level parsers accepted it.
    fn parse_all(b: &[u8]) -> Result<usize, TestCaseError> {
        let mut ok = 0;
        if let Ok(f) = DataFrame::parse(b) {
            ok += 1;
            let mut v = Vec::new();
            f.encode(&mut v);
            prop_assert_eq!(&v[..], b);
            prop_assert!(f.packets().count() == f.header.n_pkts as usize);
        }
        let _ = DataHeader::parse_prefix(b);
        if let Ok(p) = RepProposal::parse(b) {
            ok += 1;
            prop_assert_eq!(&p.to_bytes()[..], b);
        }
        if let Ok(x) = RepSealExt::parse(b) {
            ok += 1;
            prop_assert_eq!(&x.to_bytes().unwrap()[..], b);
        }
        if let Ok(x) = RepFinalityCert::parse(b) {
            ok += 1;
            prop_assert_eq!(&x.to_bytes().unwrap()[..], b);
        }
        if let Ok(x) = RepRootCert::parse(b) {
            ok += 1;
            prop_assert_eq!(&x.to_bytes().unwrap()[..], b);
        }
        if let Ok(x) = BlockRecordRef::parse(b) {
            ok += 1;
            prop_assert_eq!(&x.to_record().to_bytes().unwrap()[..], b);
            let _ = x.packets().count() + x.pkt_hashes().count() + x.unavail().count();
        }
        if let Ok(m) = CtrlMsg::parse(b) {
            ok += 1;
            prop_assert_eq!(&m.to_bytes().unwrap()[..], b);
            if let CtrlMsg::RepMembership(m) = &m {
                let _ = m.validate();
                let _ = m.verify_cert(m);
            }
            if let CtrlMsg::SeqEquivocation(e) = &m {
                let _ = e.check(&SigningKey::from_bytes(&[9; 32]).verifying_key());
            }
        }
        // Each control struct on its own, too (most answer BadKind at byte 0).
        let _ = (
            RepAck::parse(b),
            Nack::parse(b),
            NackTooOld::parse(b),
            RepairReq::parse(b),
        );
        let _ = (
            DataFetch::parse(b),
            HashListReq::parse(b),
            HashList::parse(b),
            TailReport::parse(b),
        );
        let _ = (
            Silence::parse(b),
            TailConflict::parse(b),
            SeqEquivocation::parse(b),
        );
        let _ = (
            RepDurableMark::parse(b),
            DataBadMac::parse(b),
            CopyConflict::parse(b),
        );
        let _ = (
            DataDown::parse(b),
            DataRedirect::parse(b),
            SeqChange::parse(b),
        );
        let _ = RepMembership::parse(b);
        if let Ok(r) = Request::parse(b) {
            let _ = r.verify_tag(&KEY);
            let _ = (r.full_hash(), r.pkt_hash(), r.msgs().count());
        }
        if let Ok(p) = RequestPacket::parse(b, &KEY) {
            ok += 1;
            prop_assert_eq!(&p.to_bytes(&KEY).unwrap()[..], b);
        }
        let _ = (full_hash(b), pkt_hash(b), Msg::parse(b), Record::parse(b));
        if let Ok(r) = Response::parse(b, &KEY) {
            ok += 1;
            prop_assert_eq!(&r.to_bytes(&KEY).unwrap()[..], b);
        }
        Ok(ok)
    }

    #[test]
    fn corpus_entries_parse() {
        for (i, b) in seeds().iter().enumerate() {
            assert!(parse_all(b).unwrap() >= 1, "seed {i} parses nowhere");
        }
    }

    proptest! {
        #![proptest_config(cfg())]

        #[test]
        fn parsers_never_panic_on_random_bytes(b in vec(any::<u8>(), 0..600)) {
            parse_all(&b)?;
        }

        #[test]
        fn parsers_never_panic_on_mutations(
            seed in any::<prop::sample::Index>(),
            flips in vec((any::<prop::sample::Index>(), any::<u8>()), 0..4),
            cut in proptest::option::of(any::<prop::sample::Index>()),
            extra in vec(any::<u8>(), 0..3),
        ) {
            let corpus = seeds();
            let mut b = corpus[seed.index(corpus.len())].clone();
            for (at, v) in flips {
                let i = at.index(b.len());
                b[i] = v;
            }
            if let Some(c) = cut {
                b.truncate(c.index(b.len() + 1));
            }
            b.extend_from_slice(&extra);
            parse_all(&b)?;
        }
    }
}
