//! The sequencer's gate on `Diverge` (07 §7.4, INV-REP-9; security review F3): a `Diverge` with
//! no evidence, with signatures that do not verify, with signatures of another index, or with
//! one heavy digest only never halts the book; a conflict with two digests of f + 1 valid
//! signatures each does; a timeout halts only once f + 1 distinct voters report it.

use ed25519_dalek::SigningKey;
use vyrn_consensus::roots::{
    root_signer, sign_root_bytes, DivergeErr, DivergeGate, DIVERGE_TIMEOUTS_MAX,
};
use vyrn_consensus::Voters;
use vyrn_wire::msg::consensus::CertEntry;
use vyrn_wire::msg::ctrl::{CtrlMsg, Diverge, DivergeDigest, DivergeReason};

const EPOCH: u32 = 5;

fn seed(i: u8) -> [u8; 32] {
    [0x60 + i; 32]
}

fn voters() -> Voters {
    let keys: Vec<[u8; 32]> = (0..4)
        .map(|i| SigningKey::from_bytes(&seed(i)).verifying_key().to_bytes())
        .collect();
    Voters::with_simplex_quorum(EPOCH, &keys).unwrap()
}

/// Voter `i`'s root signature over item `(index, digest)`.
fn sig(v: &Voters, i: u8, index: u64, digest: [u8; 32]) -> CertEntry {
    let s = root_signer(v, vyrn_consensus::private_key(&seed(i))).unwrap();
    let sig = sign_root_bytes(&s, EPOCH, index, &digest).unwrap();
    CertEntry { index: i, sig }
}

fn digest(v: &Voters, index: u64, d: [u8; 32], signers: &[u8]) -> DivergeDigest {
    DivergeDigest {
        digest: d,
        sigs: signers.iter().map(|&i| sig(v, i, index, d)).collect(),
    }
}

fn conflict(index: u64, digests: Vec<DivergeDigest>) -> Diverge {
    Diverge {
        epoch: EPOCH,
        index,
        reason: DivergeReason::Conflict,
        digests,
    }
}

#[test]
fn a_conflict_halts_only_with_two_digests_of_f_plus_one_valid_signatures() {
    let v = voters();
    let mut g = DivergeGate::new(v.clone());
    // The real thing: {0, 1} signed A, {2, 3} signed B for index 7.
    let good = conflict(
        7,
        vec![
            digest(&v, 7, [1; 32], &[0, 1]),
            digest(&v, 7, [2; 32], &[2, 3]),
        ],
    );
    assert_eq!(g.on_diverge(0, &good), Ok(7));
    // One heavy digest and one light: no conflict (one Byzantine root is a fault, not a halt).
    let light = conflict(
        7,
        vec![
            digest(&v, 7, [1; 32], &[0, 1, 2]),
            digest(&v, 7, [2; 32], &[3]),
        ],
    );
    assert_eq!(g.on_diverge(3, &light), Err(DivergeErr::NotAConflict));
    // A flipped signature byte.
    let mut bad = good.clone();
    bad.digests[1].sigs[0].sig[5] ^= 1;
    assert_eq!(g.on_diverge(0, &bad), Err(DivergeErr::BadSignature(2)));
    // Signatures of another index (real ones, replayed): the item binds the index.
    let replayed = conflict(8, good.digests.clone());
    assert!(matches!(
        g.on_diverge(0, &replayed),
        Err(DivergeErr::BadSignature(_))
    ));
    // The same digest twice is one digest.
    let twice = conflict(
        7,
        vec![
            digest(&v, 7, [1; 32], &[0, 1]),
            digest(&v, 7, [1; 32], &[2, 3]),
        ],
    );
    assert_eq!(g.on_diverge(0, &twice), Err(DivergeErr::NotAConflict));
    // A signer twice in one digest's entries.
    let mut dup = good.clone();
    dup.digests[0].sigs[1] = dup.digests[0].sigs[0];
    assert_eq!(g.on_diverge(0, &dup), Err(DivergeErr::Order));
    // Another epoch.
    let mut other = good.clone();
    other.epoch += 1;
    assert_eq!(g.on_diverge(0, &other), Err(DivergeErr::Epoch));
}

/// The 15-byte `Diverge` of the review: no digests at all. As a conflict the codec refuses it;
/// as a timeout one voter alone never halts the book.
#[test]
fn a_diverge_with_no_evidence_never_halts_alone() {
    let v = voters();
    let mut g = DivergeGate::new(v);
    let bare = Diverge {
        epoch: EPOCH,
        index: 3,
        reason: DivergeReason::Timeout,
        digests: vec![],
    };
    let bytes = bare.to_bytes().unwrap();
    assert_eq!(bytes.len(), 15);
    let Ok(CtrlMsg::Diverge(d)) = CtrlMsg::parse(&bytes) else {
        panic!("parses");
    };
    // One voter, however often: pending.
    for _ in 0..10 {
        assert_eq!(g.on_diverge(1, &d), Err(DivergeErr::TimeoutPending));
    }
    // Another voter for another index: still pending.
    let mut d4 = d.clone();
    d4.index = 4;
    assert_eq!(g.on_diverge(2, &d4), Err(DivergeErr::TimeoutPending));
    // A second voter (f + 1 = 2) for index 3: halt.
    assert_eq!(g.on_diverge(2, &d), Ok(3));
    // A voter index outside the set counts for nothing.
    let mut g = DivergeGate::new(voters());
    assert_eq!(g.on_diverge(9, &d), Err(DivergeErr::TimeoutPending));
    assert_eq!(g.on_diverge(63, &d), Err(DivergeErr::TimeoutPending));
    assert_eq!(g.on_diverge(1, &d), Err(DivergeErr::TimeoutPending));
    // Bounded memory: a flood of indexes from one voter forgets the oldest, never grows.
    for i in 100..100 + 4 * DIVERGE_TIMEOUTS_MAX as u64 {
        let mut di = d.clone();
        di.index = i;
        assert_eq!(g.on_diverge(0, &di), Err(DivergeErr::TimeoutPending));
    }
    let mut last = d.clone();
    last.index = 100 + 4 * DIVERGE_TIMEOUTS_MAX as u64 - 1;
    assert_eq!(g.on_diverge(3, &last), Ok(last.index));
}

/// A flood of timeout reports for ever new indexes from one (Byzantine) voter replaces only its
/// own report: an honest voter's pending report for the real index stays, and a second honest
/// voter's report for it halts the book (the gate once forgot the oldest index first).
#[test]
fn a_timeout_flood_from_one_voter_never_evicts_another_voters_report() {
    let mut g = DivergeGate::new(voters());
    let d = |index: u64| Diverge {
        epoch: EPOCH,
        index,
        reason: DivergeReason::Timeout,
        digests: vec![],
    };
    assert_eq!(g.on_diverge(1, &d(3)), Err(DivergeErr::TimeoutPending));
    for i in 1_000..1_000 + 8 * DIVERGE_TIMEOUTS_MAX as u64 {
        assert_eq!(g.on_diverge(0, &d(i)), Err(DivergeErr::TimeoutPending));
    }
    assert_eq!(g.on_diverge(2, &d(3)), Ok(3));
}
