//! `PeerDataFetch` and `PeerData` (07 §5.5 source 2, control types 0x17 and 0x18), and
//! `SeqDataReq` and `SeqData` (source 3, 0x19 and 0x1A, the same layouts): golden bytes, round
//! trips, and every refusal.

use proptest::prelude::*;
use vyrn_wire::msg::client::REQ_MAX_LEN;
use vyrn_wire::msg::ctrl::{CtrlMsg, PeerData, PeerDataFetch, SeqData, SeqDataReq};
use vyrn_wire::Malformed;

#[test]
fn golden_bytes() {
    let f = PeerDataFetch {
        session: 0x1001,
        pkt_seq: 7,
        pkt_hash: 0x0807_0605_0403_0201,
    };
    assert_eq!(
        f.to_bytes().unwrap(),
        [0x17, 0x01, 0x10, 0, 0, 7, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8],
        "type, session u32 LE, pkt_seq u32 LE, pkt_hash u64 LE"
    );
    let d = PeerData {
        session: 0x1001,
        pkt_seq: 7,
        pkt: vec![0xaa, 0xbb, 0xcc],
    };
    assert_eq!(
        d.to_bytes().unwrap(),
        [0x18, 0x01, 0x10, 0, 0, 7, 0, 0, 0, 3, 0, 0xaa, 0xbb, 0xcc],
        "type, session, pkt_seq, pkt_len u16 LE, the packet"
    );
}

#[test]
fn refusals() {
    let bad = PeerDataFetch {
        session: 1,
        pkt_seq: 0,
        pkt_hash: 0,
    };
    assert_eq!(
        bad.to_bytes(),
        Err(Malformed::BadValue),
        "pkt_seq starts at 1"
    );
    assert_eq!(
        PeerDataFetch::parse(&[0x17, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]),
        Err(Malformed::BadValue)
    );
    // The layout before the hash (9 bytes) is short now.
    assert!(PeerDataFetch::parse(&[0x17, 1, 0, 0, 0, 1, 0, 0, 0]).is_err());
    let empty = PeerData {
        session: 1,
        pkt_seq: 1,
        pkt: Vec::new(),
    };
    assert_eq!(empty.to_bytes(), Err(Malformed::BadValue));
    let long = PeerData {
        session: 1,
        pkt_seq: 1,
        pkt: vec![0; REQ_MAX_LEN + 1],
    };
    assert_eq!(
        long.to_bytes(),
        Err(Malformed::BadValue),
        "longer than any request"
    );
    // A length past the bytes present, a length past REQ_MAX_LEN, trailing bytes, a wrong type.
    assert!(PeerData::parse(&[0x18, 1, 0, 0, 0, 1, 0, 0, 0, 9, 0, 1]).is_err());
    let n = (REQ_MAX_LEN + 1) as u16;
    let mut b = vec![0x18, 1, 0, 0, 0, 1, 0, 0, 0];
    b.extend_from_slice(&n.to_le_bytes());
    b.extend(std::iter::repeat_n(0u8, n as usize));
    assert_eq!(PeerData::parse(&b), Err(Malformed::BadValue));
    let mut ok = PeerData {
        session: 1,
        pkt_seq: 1,
        pkt: vec![5],
    }
    .to_bytes()
    .unwrap();
    ok.push(0);
    assert!(PeerData::parse(&ok).is_err(), "trailing bytes");
    assert_eq!(
        PeerDataFetch::parse(&[0x18, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]),
        Err(Malformed::BadKind)
    );
}

proptest! {
    #[test]
    fn round_trips(session in any::<u32>(), pkt_seq in 1u32.., pkt_hash in any::<u64>(), pkt in proptest::collection::vec(any::<u8>(), 1..=REQ_MAX_LEN)) {
        let f = PeerDataFetch { session, pkt_seq, pkt_hash };
        let b = f.to_bytes().unwrap();
        prop_assert_eq!(b.len(), 17);
        prop_assert_eq!(CtrlMsg::parse(&b).unwrap(), CtrlMsg::PeerDataFetch(f));
        let q = SeqDataReq { session, pkt_seq, pkt_hash };
        prop_assert_eq!(CtrlMsg::parse(&q.to_bytes().unwrap()).unwrap(), CtrlMsg::SeqDataReq(q));
        let d = PeerData { session, pkt_seq, pkt };
        let b = d.to_bytes().unwrap();
        prop_assert_eq!(b.len(), 11 + d.pkt.len());
        prop_assert_eq!(CtrlMsg::parse(&b).unwrap(), CtrlMsg::PeerData(d.clone()));
        prop_assert_eq!(CtrlMsg::PeerData(d).to_bytes().unwrap(), b.clone());
        for n in 0..b.len() {
            prop_assert!(PeerData::parse(&b[..n]).is_err());
        }
    }
}

#[test]
fn seq_data_golden_bytes_and_refusals() {
    let q = SeqDataReq {
        session: 0x1001,
        pkt_seq: 7,
        pkt_hash: 0x0807_0605_0403_0201,
    };
    assert_eq!(
        q.to_bytes().unwrap(),
        [0x19, 0x01, 0x10, 0, 0, 7, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8]
    );
    let d = SeqData {
        session: 0x1001,
        pkt_seq: 7,
        pkt: vec![0xaa, 0xbb, 0xcc],
    };
    let b = d.to_bytes().unwrap();
    assert_eq!(
        b,
        [0x1a, 0x01, 0x10, 0, 0, 7, 0, 0, 0, 3, 0, 0xaa, 0xbb, 0xcc]
    );
    let mut parts = Vec::new();
    assert!(SeqData::encode_parts(
        0x1001,
        7,
        &[0xaa, 0xbb, 0xcc],
        &mut parts
    ));
    assert_eq!(parts, b, "the lane's encoder writes the same bytes");
    assert!(!SeqData::encode_parts(1, 0, &[1], &mut parts));
    assert!(!SeqData::encode_parts(1, 1, &[], &mut parts));
    assert!(!SeqData::encode_parts(
        1,
        1,
        &[0; REQ_MAX_LEN + 1],
        &mut parts
    ));
    assert_eq!(parts, b, "a refused encode writes nothing");
    assert_eq!(
        SeqDataReq {
            session: 1,
            pkt_seq: 0,
            pkt_hash: 0
        }
        .to_bytes(),
        Err(Malformed::BadValue)
    );
    assert_eq!(
        CtrlMsg::parse(&b).unwrap(),
        CtrlMsg::SeqData(d.clone()),
        "dispatched on 0x1A"
    );
    assert_eq!(
        CtrlMsg::parse(&q.to_bytes().unwrap()).unwrap(),
        CtrlMsg::SeqDataReq(q)
    );
    for n in 0..b.len() {
        assert!(SeqData::parse(&b[..n]).is_err());
    }
}

/// `PktKey::peek` reads a request packet's join key from bytes 4..12 without parsing it (the one
/// reader every role's routing uses); short packets give `None`, never a panic.
#[test]
fn a_packets_key_is_peeked_from_bytes_4_to_12() {
    use vyrn_wire::msg::PktKey;
    let mut p = vec![0u8; 48];
    p[4..8].copy_from_slice(&0x1001u32.to_le_bytes());
    p[8..12].copy_from_slice(&7u32.to_le_bytes());
    assert_eq!(
        PktKey::peek(&p),
        Some(PktKey {
            session: 0x1001,
            pkt_seq: 7
        })
    );
    assert_eq!(PktKey::peek_session(&p[..8]), Some(0x1001));
    assert_eq!(PktKey::peek(&p[..11]), None);
    assert_eq!(PktKey::peek_session(&p[..7]), None);
    assert_eq!(PktKey::peek(&[]), None);
}
