//! The finality listener charges what a message costs to the voter that sent it (07 §6.8;
//! security review F16): a Byzantine voter relaying certificates whose entries name honest
//! voters fills its own bound, never theirs, and evicts only what it sent; an entry it relays
//! for a voter never hides that voter's own vote; the per-voter token bucket the standby applies
//! is the sequencer control port's (2000/s, burst 64).

use vyrn_consensus::cert::FinalizeSigner;
use vyrn_consensus::listener::{CertTokens, CERT_BURST, CERT_PER_SEC, PER_VOTER_OPEN};
use vyrn_consensus::{FinalityListener, VoteOutcome, Voters};
use vyrn_wire::msg::consensus::{CertEntry, ProposalKind, RepFinalityCert, RepProposal};

const EPOCH: u32 = 3;

fn seed(i: u8) -> [u8; 32] {
    [i + 40; 32]
}

fn voters() -> Voters {
    let keys: Vec<[u8; 32]> = (0..4)
        .map(|i| {
            ed25519_dalek::SigningKey::from_bytes(&seed(i))
                .verifying_key()
                .to_bytes()
        })
        .collect();
    Voters::with_simplex_quorum(EPOCH, &keys).unwrap()
}

fn proposal(first: u64, last: u64, tag: u64) -> RepProposal {
    let mut last_hash = [9; 32];
    last_hash[..8].copy_from_slice(&tag.to_le_bytes());
    RepProposal {
        kind: ProposalKind::Headers,
        epoch: EPOCH,
        first_height: first,
        last_height: last,
        last_hash,
        excl_root: [0; 32],
    }
}

/// Voter `i`'s finalize vote, as a certificate of one entry.
fn vote(v: &Voters, i: u8, view: u64, p: &RepProposal) -> RepFinalityCert {
    let s = FinalizeSigner::new(v, &seed(i)).unwrap();
    RepFinalityCert {
        epoch: EPOCH,
        view,
        parent_view: view - 1,
        proposal: *p,
        entries: vec![CertEntry {
            index: i,
            sig: s.sign(EPOCH, view, view - 1, p),
        }],
    }
}

/// A "certificate" naming `who` with signatures that are no one's.
fn forged(who: &[u8], view: u64, p: &RepProposal, fill: u8) -> RepFinalityCert {
    RepFinalityCert {
        epoch: EPOCH,
        view,
        parent_view: view - 1,
        proposal: *p,
        entries: who
            .iter()
            .map(|&index| CertEntry {
                index,
                sig: [fill; 64],
            })
            .collect(),
    }
}

#[test]
fn a_relayed_certificate_is_charged_to_its_sender_not_to_the_voters_it_names() {
    let v = voters();
    let mut l = FinalityListener::new(v.clone(), 0);
    let target = proposal(1, 1, 0);
    assert_eq!(
        l.on_cert_from(0, &vote(&v, 0, 2, &target)),
        VoteOutcome::Held(1)
    );
    assert_eq!(
        l.on_cert_from(1, &vote(&v, 1, 2, &target)),
        VoteOutcome::Held(2)
    );
    // Voter 3 relays "certificates" naming voters 0 and 1 for ever new proposals: below Q, so
    // held unchecked — charged to voter 3, whose bound evicts only what it sent.
    for k in 1..=(PER_VOTER_OPEN as u64 * 2) {
        let p = proposal(1, 1, k);
        assert_eq!(
            l.on_cert_from(3, &forged(&[0, 1], 2, &p, 7)),
            VoteOutcome::Held(2)
        );
    }
    assert!(l.open() <= PER_VOTER_OPEN + 1, "open {}", l.open());
    assert_eq!(l.counters().evicted, PER_VOTER_OPEN as u64);
    // Voters 0's and 1's votes for the real proposal were never touched: a third vote
    // finalizes it.
    assert_eq!(
        l.on_cert_from(2, &vote(&v, 2, 2, &target)),
        VoteOutcome::Final { height: 1, view: 2 }
    );
    assert_eq!(l.counters().bad_sigs, 0);
}

#[test]
fn an_entry_relayed_for_a_voter_never_hides_that_voters_own_vote() {
    let v = voters();
    let mut l = FinalityListener::new(v.clone(), 0);
    let p = proposal(1, 4, 0);
    // Voter 3 gets a bad entry for voter 2 in first, then voter 2's own vote arrives.
    assert_eq!(
        l.on_cert_from(3, &forged(&[2], 2, &p, 5)),
        VoteOutcome::Held(1)
    );
    assert_eq!(l.on_cert_from(2, &vote(&v, 2, 2, &p)), VoteOutcome::Held(1));
    assert_eq!(l.on_cert_from(0, &vote(&v, 0, 2, &p)), VoteOutcome::Held(2));
    // Q distinct signers: voter 2's own vote is checked first and counts.
    assert_eq!(
        l.on_cert_from(1, &vote(&v, 1, 2, &p)),
        VoteOutcome::Final { height: 4, view: 2 }
    );
}

#[test]
fn a_sender_whose_entries_failed_is_not_heard_again_for_that_proposal() {
    let v = voters();
    let mut l = FinalityListener::new(v.clone(), 0);
    let p = proposal(1, 4, 0);
    // Q bad entries from voter 3: one batch, all refused.
    assert_eq!(
        l.on_cert_from(3, &forged(&[0, 1, 2], 2, &p, 5)),
        VoteOutcome::Held(0)
    );
    let c = l.counters();
    assert_eq!((c.batches, c.bad_sigs), (1, 3));
    // More from voter 3 for the same proposal costs no signature check.
    for fill in 6..40 {
        let _ = l.on_cert_from(3, &forged(&[0, 1, 2], 2, &p, fill));
    }
    assert_eq!(l.counters().batches, 1);
    // The voters' own votes still finalize it.
    for i in 0..2 {
        assert_eq!(
            l.on_cert_from(i as usize, &vote(&v, i, 2, &p)),
            VoteOutcome::Held(1 + i as usize)
        );
    }
    assert_eq!(
        l.on_cert_from(2, &vote(&v, 2, 2, &p)),
        VoteOutcome::Final { height: 4, view: 2 }
    );
}

#[test]
fn a_sender_outside_the_voters_is_refused() {
    let v = voters();
    let mut l = FinalityListener::new(v.clone(), 0);
    let p = proposal(1, 1, 0);
    assert_eq!(l.on_cert_from(4, &vote(&v, 0, 2, &p)), VoteOutcome::Bad);
    assert_eq!(l.on_cert_from(300, &vote(&v, 0, 2, &p)), VoteOutcome::Bad);
    assert_eq!(l.counters().refused, 2);
    assert_eq!(l.open(), 0);
}

/// Every sender flooding every kind of junk: at most n × PER_VOTER_OPEN proposals open, and an
/// honest quorum still finalizes.
#[test]
fn a_flood_from_every_sender_stays_bounded() {
    let v = voters();
    let mut l = FinalityListener::new(v.clone(), 0);
    for k in 0..(PER_VOTER_OPEN as u64 * 3) {
        for s in 0..4usize {
            let p = proposal(1, 2, k * 4 + s as u64 + 1);
            let _ = l.on_cert_from(s, &forged(&[0, 1], 2, &p, k as u8));
            let _ = l.on_cert_from(s, &forged(&[2, 3], 2, &p, k as u8));
        }
        assert!(l.open() <= 4 * PER_VOTER_OPEN, "open {}", l.open());
    }
    let p = proposal(1, 2, 0);
    for i in 0..2u8 {
        let _ = l.on_cert_from(i as usize, &vote(&v, i, 2, &p));
    }
    assert_eq!(
        l.on_cert_from(2, &vote(&v, 2, 2, &p)),
        VoteOutcome::Final { height: 2, view: 2 }
    );
}

#[test]
fn cert_tokens_allow_a_burst_then_the_rate_per_voter() {
    assert_eq!((CERT_PER_SEC, CERT_BURST), (2000, 64));
    let mut t = CertTokens::new(4);
    for _ in 0..CERT_BURST {
        assert!(t.take(1, 0));
    }
    assert!(!t.take(1, 0), "burst spent");
    assert!(t.take(2, 0), "another voter's bucket is its own");
    // One token per 1/2000 s.
    let per = 1_000_000_000 / CERT_PER_SEC;
    assert!(!t.take(1, per - 1));
    assert!(t.take(1, per));
    assert!(!t.take(1, per));
    // A second later: back to the burst, not more.
    let later = per + 1_000_000_000;
    for _ in 0..CERT_BURST {
        assert!(t.take(1, later));
    }
    assert!(!t.take(1, later));
    // No such voter.
    assert!(!t.take(4, later));
}
