//! `SealOffer` (0x1B) and `SealCert` (0x1C), the seal's messages beside Simplex (07 §9.4):
//! golden bytes, round trips, and every refusal.

use proptest::prelude::*;
use vyrn_wire::msg::consensus::{
    seal_digest, CertEntry, ProposalKind, RepFinalityCert, RepProposal, RepSealExt,
};
use vyrn_wire::msg::ctrl::{CtrlMsg, SealCert, SealOffer, SEAL_MSG_UNAVAIL_MAX};
use vyrn_wire::msg::PktKey;
use vyrn_wire::Malformed;

fn seal(first: u64, last: u64) -> RepProposal {
    RepProposal {
        kind: ProposalKind::Seal,
        epoch: 1,
        first_height: first,
        last_height: last,
        last_hash: [0x11; 32],
        excl_root: [0; 32],
    }
}

fn ext(unavail: Vec<PktKey>) -> RepSealExt {
    RepSealExt {
        end_frame_seq: [7, 9],
        next_seq: 1,
        next_tenure: 1,
        unavail,
    }
}

fn key(session: u32, pkt_seq: u32) -> PktKey {
    PktKey { session, pkt_seq }
}

#[test]
fn golden_offer() {
    let m = SealOffer {
        proposal: seal(5, 6),
        ext: ext(vec![key(0x1001, 7)]),
    };
    let mut want = vec![0x1b, 1];
    want.extend_from_slice(&1u32.to_le_bytes()); // epoch
    want.extend_from_slice(&5u64.to_le_bytes()); // first_height
    want.extend_from_slice(&6u64.to_le_bytes()); // last_height
    want.extend_from_slice(&[0x11; 32]); // last_hash
    want.extend_from_slice(&[0; 32]); // excl_root
    want.extend_from_slice(&7u64.to_le_bytes()); // F*_A
    want.extend_from_slice(&9u64.to_le_bytes()); // F*_B
    want.extend_from_slice(&[1, 1]); // next_seq, next_tenure
    want.extend_from_slice(&1u32.to_le_bytes()); // n_unavail
    want.extend_from_slice(&[0x01, 0x10, 0, 0, 7, 0, 0, 0]); // (session, pkt_seq)
    let b = m.to_bytes().unwrap();
    assert_eq!(b, want, "type, the 85 proposal bytes, the ext bytes");
    assert_eq!(b.len(), 1 + 85 + 22 + 8);
    assert_eq!(SealOffer::parse(&b).unwrap(), m);
    match CtrlMsg::parse(&b).unwrap() {
        CtrlMsg::SealOffer(x) => assert_eq!(*x, m),
        other => panic!("parsed as {other:?}"),
    }
}

fn cert(p: RepProposal) -> RepFinalityCert {
    RepFinalityCert {
        epoch: 1,
        view: 9,
        parent_view: 8,
        proposal: p,
        entries: (0..3)
            .map(|i| CertEntry {
                index: i,
                sig: [i + 1; 64],
            })
            .collect(),
    }
}

#[test]
fn golden_cert() {
    let c = cert(seal(5, 6));
    let m = SealCert {
        cert: c.clone(),
        ext: ext(Vec::new()),
    };
    let cb = c.to_bytes().unwrap();
    let mut want = vec![0x1c];
    want.extend_from_slice(&(cb.len() as u16).to_le_bytes());
    want.extend_from_slice(&cb);
    want.extend_from_slice(&ext(Vec::new()).to_bytes().unwrap());
    let b = m.to_bytes().unwrap();
    assert_eq!(
        b, want,
        "type, cert_len u16, the certificate bytes of 0x13, the ext"
    );
    assert_eq!(b.len(), 1 + 2 + 106 + 3 * 65 + 22);
    assert_eq!(SealCert::parse(&b).unwrap(), m);
    assert_eq!(CtrlMsg::parse(&b).unwrap().msg_type(), 0x1c);
}

#[test]
fn refusals() {
    // A headers proposal is no seal.
    let mut p = seal(5, 6);
    p.kind = ProposalKind::Headers;
    let m = SealOffer {
        proposal: p,
        ext: ext(Vec::new()),
    };
    assert_eq!(m.to_bytes(), Err(Malformed::BadKind));
    // Past one datagram's keys.
    let many: Vec<PktKey> = (1..=SEAL_MSG_UNAVAIL_MAX as u32 + 1)
        .map(|i| key(1, i))
        .collect();
    let m = SealOffer {
        proposal: seal(5, 6),
        ext: ext(many),
    };
    assert_eq!(m.to_bytes(), Err(Malformed::TooMany));
    // Keys out of order do not encode (every voter must hash the same bytes).
    let m = SealOffer {
        proposal: seal(5, 6),
        ext: ext(vec![key(2, 1), key(1, 1)]),
    };
    assert!(m.to_bytes().is_err());
    // A reversed range.
    let m = SealOffer {
        proposal: seal(6, 5),
        ext: ext(Vec::new()),
    };
    assert!(m.to_bytes().is_err());
    // Trailing bytes, a truncated ext, a cert_len past the end.
    let good = SealOffer {
        proposal: seal(5, 6),
        ext: ext(vec![key(1, 1)]),
    }
    .to_bytes()
    .unwrap();
    let mut long = good.clone();
    long.push(0);
    assert!(SealOffer::parse(&long).is_err());
    for cut in 1..good.len() {
        assert!(SealOffer::parse(&good[..cut]).is_err(), "cut at {cut}");
    }
    let mut c = SealCert {
        cert: cert(seal(5, 6)),
        ext: ext(Vec::new()),
    }
    .to_bytes()
    .unwrap();
    c[1] = 0xff;
    c[2] = 0xff;
    assert!(SealCert::parse(&c).is_err());
    // A cert over a headers proposal is no seal cert.
    let mut hp = seal(5, 6);
    hp.kind = ProposalKind::Headers;
    let m = SealCert {
        cert: cert(hp),
        ext: ext(Vec::new()),
    };
    assert_eq!(m.to_bytes(), Err(Malformed::BadKind));
}

#[test]
fn the_seal_digest_covers_the_ext() {
    let p = seal(5, 6);
    let a = seal_digest(&p, &ext(Vec::new())).unwrap();
    let b = seal_digest(&p, &ext(vec![key(1, 1)])).unwrap();
    let mut e = ext(Vec::new());
    e.next_seq = 2;
    let c = seal_digest(&p, &e).unwrap();
    assert_ne!(a, b);
    assert_ne!(a, c);
    assert_ne!(
        a,
        p.digest(),
        "a seal's payload is not its proposal's headers digest"
    );
}

proptest! {
    #[test]
    fn offers_round_trip(
        first in 1u64..1_000_000,
        span in 0u64..64,
        fa in any::<u64>(),
        fb in any::<u64>(),
        next_seq in any::<u8>(),
        next_tenure in any::<u8>(),
        n in 0usize..40,
        hash in any::<[u8; 32]>(),
    ) {
        let mut p = seal(first, first + span);
        p.last_hash = hash;
        let e = RepSealExt {
            end_frame_seq: [fa, fb],
            next_seq,
            next_tenure,
            unavail: (0..n as u32).map(|i| key(i / 3, i + 1)).collect(),
        };
        let m = SealOffer { proposal: p, ext: e.clone() };
        let b = m.to_bytes().unwrap();
        prop_assert_eq!(SealOffer::parse(&b).unwrap(), m);
        let c = SealCert { cert: cert(p), ext: e };
        let b = c.to_bytes().unwrap();
        prop_assert_eq!(SealCert::parse(&b).unwrap(), c);
    }

    #[test]
    fn no_bytes_panic(b in proptest::collection::vec(any::<u8>(), 0..400), t in 0x1bu8..=0x1c) {
        let mut b = b;
        if !b.is_empty() {
            b[0] = t;
        }
        let _ = CtrlMsg::parse(&b);
    }
}
