//! `REP_FinalityCert` (07 §6.5) and the finality listener (07 §6.8): `verify_finality_cert` is
//! the one check, and it refuses a wrong key set, a tampered proposal, too few or duplicate
//! signers; the listener makes a height final only with Q valid finalize votes.

use ed25519_dalek::SigningKey;
use vyrn_consensus::cert::{verify_finality_cert, verify_with, CertErr, FinalizeSigner};
use vyrn_consensus::listener::PER_VOTER_OPEN;
use vyrn_consensus::{FinalityListener, VoteOutcome, Voters};
use vyrn_wire::msg::addr_from_socket;
use vyrn_wire::msg::consensus::{CertEntry, ProposalKind, RepFinalityCert, RepProposal};
use vyrn_wire::msg::ctrl::{
    Client, CtrlMsg, DataBox, FinalizeVote, Mode, RepMembership, Role, SeqBox, Voter,
};

const EPOCH: u32 = 3;

fn seed(i: u8) -> [u8; 32] {
    [i + 40; 32]
}

fn pubkey(s: [u8; 32]) -> [u8; 32] {
    SigningKey::from_bytes(&s).verifying_key().to_bytes()
}

fn membership(seeds: &[[u8; 32]]) -> RepMembership {
    let addr = addr_from_socket("127.0.0.1:7402".parse().unwrap());
    let seq = |i: u8, role: Role, facility: u8| SeqBox {
        index: i,
        role,
        seq_key: pubkey([i + 200; 32]),
        facility,
        client_addr: addr,
        repl_addr: addr,
    };
    RepMembership {
        epoch_from: EPOCH,
        home: *b"DEV\0",
        mode: Mode::Base,
        q: 3,
        voters: seeds
            .iter()
            .enumerate()
            .map(|(i, s)| Voter {
                index: i as u8,
                vote_key: pubkey(*s),
                client: if i % 2 == 0 { Client::Rust } else { Client::Vx },
                facility: 1,
                data_addr: addr,
                repl_addr: addr,
            })
            .collect(),
        seq_order: vec![seq(0, Role::Primary, 1), seq(1, Role::Standby, 2)],
        recovery: 0,
        data_boxes: vec![DataBox {
            index: 0,
            facility: 1,
            addr,
        }],
        cert: vec![],
    }
}

fn seeds() -> Vec<[u8; 32]> {
    (0..4).map(seed).collect()
}

fn voters() -> Voters {
    Voters::from_membership(&membership(&seeds()), EPOCH).expect("valid membership")
}

fn proposal(first: u64, last: u64) -> RepProposal {
    RepProposal {
        kind: ProposalKind::Headers,
        epoch: EPOCH,
        first_height: first,
        last_height: last,
        last_hash: [9; 32],
        excl_root: [0; 32],
    }
}

fn vote(v: &Voters, i: u8, view: u64, p: &RepProposal) -> FinalizeVote {
    let s = FinalizeSigner::new(v, &seed(i)).expect("a voter");
    FinalizeVote {
        epoch: EPOCH,
        view,
        parent_view: view - 1,
        proposal: *p,
        index: i,
        sig: s.sign(EPOCH, view, view - 1, p),
    }
}

fn cert(v: &Voters, who: &[u8], view: u64, p: &RepProposal) -> RepFinalityCert {
    RepFinalityCert {
        epoch: EPOCH,
        view,
        parent_view: view - 1,
        proposal: *p,
        entries: who
            .iter()
            .map(|&i| CertEntry {
                index: i,
                sig: vote(v, i, view, p).sig,
            })
            .collect(),
    }
}

#[test]
fn a_quorum_certificate_verifies_against_the_membership() {
    let v = voters();
    let p = proposal(5, 9);
    let c = cert(&v, &[0, 1, 3], 7, &p);
    assert_eq!(verify_finality_cert(&c, &membership(&seeds())), Ok(()));
    // Round trip through the wire, then the same answer.
    let mut b = vec![vyrn_wire::msg::ctrl::ty::FINALITY_CERT];
    c.encode(&mut b).unwrap();
    let Ok(CtrlMsg::FinalityCert(back)) = CtrlMsg::parse(&b) else {
        panic!("certificate does not parse back");
    };
    assert_eq!(*back, c);
    assert_eq!(verify_with(&back, &v), Ok(()));
}

#[test]
fn a_wrong_key_set_a_tampered_proposal_too_few_or_duplicate_signers_are_refused() {
    let v = voters();
    let m = membership(&seeds());
    let p = proposal(5, 9);
    let good = cert(&v, &[0, 1, 2], 7, &p);
    // Another home's keys.
    let other: Vec<[u8; 32]> = (0..4).map(|i| [i + 90; 32]).collect();
    assert!(matches!(
        verify_finality_cert(&good, &membership(&other)),
        Err(CertErr::BadSignature(_))
    ));
    // The range widened after signing, the hash changed, the view moved.
    let mut t = good.clone();
    t.proposal.last_height = 10;
    assert!(matches!(
        verify_finality_cert(&t, &m),
        Err(CertErr::BadSignature(_))
    ));
    let mut t = good.clone();
    t.proposal.last_hash[0] ^= 1;
    assert!(matches!(
        verify_finality_cert(&t, &m),
        Err(CertErr::BadSignature(_))
    ));
    let mut t = good.clone();
    t.view += 1;
    assert!(matches!(
        verify_finality_cert(&t, &m),
        Err(CertErr::BadSignature(_))
    ));
    // Too few.
    let few = cert(&v, &[0, 1], 7, &p);
    assert_eq!(
        verify_finality_cert(&few, &m),
        Err(CertErr::TooFew { have: 2, need: 3 })
    );
    // A duplicate signer (one voter twice makes no quorum).
    let mut dup = few.clone();
    dup.entries.push(dup.entries[1]);
    assert_eq!(verify_finality_cert(&dup, &m), Err(CertErr::Order));
    // An index past n, a bad signature byte, a wrong epoch, view not after parent.
    let mut t = good.clone();
    t.entries[2].index = 7;
    assert_eq!(verify_finality_cert(&t, &m), Err(CertErr::UnknownSigner(7)));
    let mut t = good.clone();
    t.entries[1].sig[5] ^= 1;
    assert_eq!(verify_finality_cert(&t, &m), Err(CertErr::BadSignature(1)));
    let mut t = good.clone();
    t.parent_view = t.view;
    assert_eq!(verify_finality_cert(&t, &m), Err(CertErr::View));
    let mut bad_m = m.clone();
    bad_m.q = 2;
    assert!(matches!(
        verify_finality_cert(&good, &bad_m),
        Err(CertErr::Membership(_))
    ));
}

#[test]
fn the_listener_finalizes_only_with_q_valid_votes() {
    let v = voters();
    let p = proposal(1, 4);
    let mut l = FinalityListener::new(v.clone(), 0);
    // Two honest votes and one forged (voter 1's key claiming index 2): no finality.
    assert_eq!(
        l.on_cert(&vote(&v, 0, 2, &p).as_cert()),
        VoteOutcome::Held(1)
    );
    assert_eq!(
        l.on_cert(&vote(&v, 1, 2, &p).as_cert()),
        VoteOutcome::Held(2)
    );
    let mut forged = vote(&v, 1, 2, &p);
    forged.index = 2;
    assert_eq!(l.on_cert(&forged.as_cert()), VoteOutcome::Held(2));
    assert_eq!(l.final_height(), 0);
    assert_eq!(l.counters().bad_sigs, 1);
    // A vote for a tampered proposal counts for its own (different) proposal only.
    let mut wide = vote(&v, 3, 2, &p);
    wide.proposal.last_height = 6;
    assert_eq!(l.on_cert(&wide.as_cert()), VoteOutcome::Held(1));
    assert_eq!(l.final_height(), 0);
    // The third honest vote: final at the proposal's last height, in its view.
    assert_eq!(
        l.on_cert(&vote(&v, 3, 2, &p).as_cert()),
        VoteOutcome::Final { height: 4, view: 2 }
    );
    assert_eq!((l.final_height(), l.final_view()), (4, 2));
    // Later votes for it are stale; other epochs are refused.
    assert_eq!(l.on_cert(&vote(&v, 2, 2, &p).as_cert()), VoteOutcome::Stale);
    let mut other = vote(&v, 2, 3, &proposal(5, 5)).as_cert();
    other.epoch += 1;
    assert_eq!(l.on_cert(&other), VoteOutcome::Bad);
    // A whole certificate at once.
    let c = cert(&v, &[0, 2, 3], 3, &proposal(5, 8));
    assert_eq!(l.on_cert(&c), VoteOutcome::Final { height: 8, view: 3 });
}

#[test]
fn one_voter_signing_many_proposals_evicts_only_its_own() {
    let v = voters();
    let mut l = FinalityListener::new(v.clone(), 0);
    let target = proposal(1, 1);
    assert_eq!(
        l.on_cert(&vote(&v, 0, 2, &target).as_cert()),
        VoteOutcome::Held(1)
    );
    assert_eq!(
        l.on_cert(&vote(&v, 1, 2, &target).as_cert()),
        VoteOutcome::Held(2)
    );
    // Voter 3 floods distinct proposals far past the bound.
    for k in 0..(PER_VOTER_OPEN as u64 * 2) {
        let mut p = proposal(1, 1);
        p.last_hash = [k as u8; 32];
        p.last_hash[1] = (k >> 8) as u8;
        let _ = l.on_cert(&vote(&v, 3, 2, &p).as_cert());
    }
    assert!(l.open() <= PER_VOTER_OPEN + 1, "open {}", l.open());
    assert!(l.counters().evicted >= PER_VOTER_OPEN as u64);
    // The honest proposal survived and finalizes with a third vote.
    assert_eq!(
        l.on_cert(&vote(&v, 2, 2, &target).as_cert()),
        VoteOutcome::Final { height: 1, view: 2 }
    );
}

#[test]
fn a_finalize_vote_round_trips_and_no_prefix_of_it_parses() {
    let v = voters();
    let fv = vote(&v, 2, 9, &proposal(3, 3));
    let b = fv.to_bytes().unwrap();
    let Ok(CtrlMsg::FinalizeVote(back)) = CtrlMsg::parse(&b) else {
        panic!("FinalizeVote does not parse back");
    };
    assert_eq!(*back, fv);
    assert_eq!(
        verify_with(&back.as_cert(), &v),
        Err(CertErr::TooFew { have: 1, need: 3 })
    );
    assert_eq!(
        vyrn_consensus::cert::valid_entries(&v, &back.as_cert()),
        vec![2]
    );
    for cut in 0..b.len() {
        assert!(CtrlMsg::parse(&b[..cut]).is_err(), "cut at {cut}");
    }
    // A vote whose view is not after its parent's never encodes.
    let mut t = fv;
    t.parent_view = t.view;
    assert!(t.to_bytes().is_err());
}

mod props {
    use super::*;
    use proptest::prelude::*;

    fn any_cert() -> impl Strategy<Value = RepFinalityCert> {
        (
            any::<u32>(),
            any::<u64>(),
            any::<u64>(),
            any::<u64>(),
            0u64..40,
            any::<[u8; 32]>(),
            proptest::collection::vec((0u8..8, any::<u8>()), 0..8),
        )
            .prop_map(|(epoch, view, parent_view, first, span, hash, es)| {
                RepFinalityCert {
                    epoch,
                    view,
                    parent_view,
                    proposal: RepProposal {
                        kind: ProposalKind::Headers,
                        epoch,
                        first_height: first,
                        last_height: first.saturating_add(span),
                        last_hash: hash,
                        excl_root: [0; 32],
                    },
                    entries: es
                        .into_iter()
                        .map(|(index, b)| CertEntry {
                            index,
                            sig: [b; 64],
                        })
                        .collect(),
                }
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]
        /// Arbitrary certificates and votes never panic the listener or the check, never make
        /// anything final (no valid signature among them), and keep the tables bounded.
        #[test]
        fn arbitrary_certificates_never_finalize_or_panic(cs in proptest::collection::vec(any_cert(), 1..40)) {
            let v = voters();
            let m = membership(&seeds());
            let mut l = FinalityListener::new(v.clone(), 0);
            for mut c in cs {
                if c.epoch % 2 == 0 {
                    // Half of them in the right epoch, to reach the signature checks.
                    c.epoch = EPOCH;
                    c.proposal.epoch = EPOCH;
                }
                prop_assert!(verify_finality_cert(&c, &m).is_err());
                let o = l.on_cert(&c);
                prop_assert!(!matches!(o, VoteOutcome::Final { .. }), "{o:?}");
            }
            prop_assert_eq!(l.final_height(), 0);
            prop_assert!(l.open() <= PER_VOTER_OPEN * 4);
        }
    }
}

/// A verified `REP_FinalityCert` is the Simplex finalization an engine can start from
/// (`Floor::Finalized`): commonware's own check accepts it, and it converts back to the same
/// certificate; a certificate that does not verify gives no finalization.
#[test]
fn a_certificate_converts_to_the_finalization_commonware_verifies_and_back() {
    use vyrn_consensus::cert::{from_finalization, to_finalization};
    let v = voters();
    let p = proposal(5, 9);
    // Signers out of commonware's participant order on purpose (membership order differs).
    for who in [&[0u8, 1, 3][..], &[1, 2, 3], &[0, 1, 2, 3]] {
        let c = cert(&v, who, 7, &p);
        let f = to_finalization(&v, &c).expect("a verified certificate");
        assert!(
            f.verify(
                &mut rand::rng(),
                v.verifier(),
                &commonware_parallel::Sequential
            ),
            "commonware refuses the finalization of {who:?}"
        );
        assert_eq!(f.proposal.round.view().get(), 7);
        assert_eq!(f.proposal.parent.get(), 6);
        assert_eq!(from_finalization(&v, &f, &p), Some(c));
    }
    // Too few signers, a tampered proposal, a broken signature: refused, nothing built.
    let c = cert(&v, &[0, 1], 7, &p);
    assert!(matches!(
        to_finalization(&v, &c),
        Err(CertErr::TooFew { .. })
    ));
    let mut c = cert(&v, &[0, 1, 2], 7, &p);
    c.proposal.last_height = 10;
    assert!(to_finalization(&v, &c).is_err());
    let mut c = cert(&v, &[0, 1, 2], 7, &p);
    c.entries[1].sig[5] ^= 1;
    assert_eq!(
        to_finalization(&v, &c).err(),
        Some(CertErr::BadSignature(1))
    );
}
