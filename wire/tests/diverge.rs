//! `Diverge` (07 §7.4, control type 0x16): round trips, the layout, and every refusal.

use proptest::prelude::*;
use vyrn_wire::msg::consensus::CertEntry;
use vyrn_wire::msg::ctrl::{CtrlMsg, Diverge, DivergeDigest, DivergeReason};
use vyrn_wire::Malformed;

fn entries() -> impl Strategy<Value = Vec<CertEntry>> {
    proptest::collection::btree_set(0u8..64, 0..6).prop_map(|s| {
        s.into_iter()
            .map(|index| CertEntry {
                index,
                sig: [index ^ 0x5a; 64],
            })
            .collect()
    })
}

fn diverge() -> impl Strategy<Value = Diverge> {
    (
        any::<u32>(),
        any::<u64>(),
        any::<bool>(),
        proptest::collection::vec((any::<[u8; 32]>(), entries()), 2..5),
    )
        .prop_map(|(epoch, index, timeout, ds)| Diverge {
            epoch,
            index,
            reason: if timeout {
                DivergeReason::Timeout
            } else {
                DivergeReason::Conflict
            },
            digests: ds
                .into_iter()
                .map(|(digest, sigs)| DivergeDigest { digest, sigs })
                .collect(),
        })
}

proptest! {
    #[test]
    fn diverge_round_trips(d in diverge()) {
        let b = d.to_bytes().unwrap();
        let want = 1 + 4 + 8 + 1 + 1
            + d.digests.iter().map(|x| 32 + 1 + 65 * x.sigs.len()).sum::<usize>();
        prop_assert_eq!(b.len(), want);
        prop_assert_eq!(Diverge::parse(&b).unwrap(), d.clone());
        prop_assert_eq!(CtrlMsg::parse(&b).unwrap(), CtrlMsg::Diverge(Box::new(d)));
        // Every strict prefix is refused, never a panic.
        for n in 0..b.len() {
            prop_assert!(Diverge::parse(&b[..n]).is_err());
        }
    }
}

fn sample() -> Diverge {
    Diverge {
        epoch: 1,
        index: 2,
        reason: DivergeReason::Conflict,
        digests: vec![
            DivergeDigest {
                digest: [0xaa; 32],
                sigs: vec![CertEntry {
                    index: 1,
                    sig: [1; 64],
                }],
            },
            DivergeDigest {
                digest: [0xbb; 32],
                sigs: vec![],
            },
        ],
    }
}

#[test]
fn diverge_layout_is_pinned() {
    let b = sample().to_bytes().unwrap();
    assert_eq!(b[0], 0x16);
    assert_eq!(&b[1..5], &1u32.to_le_bytes());
    assert_eq!(&b[5..13], &2u64.to_le_bytes());
    assert_eq!(b[13], 0, "reason: conflict");
    assert_eq!(b[14], 2, "two digests");
    assert_eq!(&b[15..47], &[0xaa; 32]);
    assert_eq!(b[47], 1, "one signature");
    assert_eq!(b[48], 1, "voter 1");
    assert_eq!(&b[49..113], &[1; 64]);
    assert_eq!(&b[113..145], &[0xbb; 32]);
    assert_eq!(b[145], 0);
    assert_eq!(b.len(), 146);
}

#[test]
fn diverge_refusals() {
    // A conflict names two digests at least.
    let mut one = sample();
    one.digests.pop();
    assert_eq!(one.to_bytes(), Err(Malformed::BadValue));
    // A timeout may carry none.
    let t = Diverge {
        reason: DivergeReason::Timeout,
        digests: vec![],
        ..sample()
    };
    assert_eq!(Diverge::parse(&t.to_bytes().unwrap()).unwrap(), t);
    // Signers must ascend strictly (a duplicate signer is refused).
    let mut dup = sample();
    dup.digests[0].sigs.push(CertEntry {
        index: 1,
        sig: [2; 64],
    });
    assert_eq!(dup.to_bytes(), Err(Malformed::BadValue));
    let mut b = sample().to_bytes().unwrap();
    b[13] = 7;
    assert_eq!(
        Diverge::parse(&b),
        Err(Malformed::BadValue),
        "unknown reason"
    );
    let mut b = sample().to_bytes().unwrap();
    b[14] = 200;
    assert_eq!(Diverge::parse(&b), Err(Malformed::TooMany));
    let mut b = sample().to_bytes().unwrap();
    b.push(0);
    assert!(Diverge::parse(&b).is_err(), "trailing bytes");
}
