//! One voter's FinalizeVote (07 §6.8) as the finality listener checks it: a vote signed by the
//! voter counts as that voter's vote for every height of its proposal; a vote signed by another
//! key, or for a tampered proposal, counts for nothing.

use ed25519_dalek::{Signer, SigningKey};
use vyrn_seq::ports::cert_votes;
use vyrn_wire::msg::consensus::{ProposalKind, RepProposal};
use vyrn_wire::msg::ctrl::{CtrlMsg, FinalizeVote};

fn vote(key: &SigningKey, index: u8, first: u64, last: u64) -> FinalizeVote {
    let proposal = RepProposal {
        kind: ProposalKind::Headers,
        epoch: 1,
        first_height: first,
        last_height: last,
        last_hash: [7; 32],
        excl_root: [0; 32],
    };
    FinalizeVote {
        epoch: 1,
        proposal,
        index,
        sig: key.sign(&proposal.digest()).to_bytes(),
    }
}

#[test]
fn a_vote_round_trips_and_counts_for_each_height_of_its_range() {
    let keys: Vec<SigningKey> = (0..4u8)
        .map(|i| SigningKey::from_bytes(&[i + 1; 32]))
        .collect();
    let pubs: Vec<_> = keys.iter().map(|k| Some(k.verifying_key())).collect();
    let v = vote(&keys[2], 2, 5, 9);
    let b = v.to_bytes().unwrap();
    let Ok(CtrlMsg::FinalizeVote(back)) = CtrlMsg::parse(&b) else {
        panic!("FinalizeVote does not parse back");
    };
    assert_eq!(*back, v);
    let mut got = Vec::new();
    assert!(cert_votes(&back.as_cert(), &pubs, |voter, h| got.push((voter, h))));
    assert_eq!(got, (5..=9).map(|h| (2, h)).collect::<Vec<_>>());
}

#[test]
fn a_vote_under_another_key_or_for_a_tampered_proposal_counts_for_nothing() {
    let keys: Vec<SigningKey> = (0..4u8)
        .map(|i| SigningKey::from_bytes(&[i + 1; 32]))
        .collect();
    let pubs: Vec<_> = keys.iter().map(|k| Some(k.verifying_key())).collect();
    // Signed by voter 1's key but claiming index 2.
    let forged = vote(&keys[1], 2, 5, 9);
    let mut n = 0;
    assert!(!cert_votes(&forged.as_cert(), &pubs, |_, _| n += 1));
    // A range widened after signing.
    let mut wide = vote(&keys[2], 2, 5, 9);
    wide.proposal.last_height = 12;
    assert!(!cert_votes(&wide.as_cert(), &pubs, |_, _| n += 1));
    assert_eq!(n, 0);
    // Truncated and garbage bytes never parse as a vote.
    let b = vote(&keys[0], 0, 1, 1).to_bytes().unwrap();
    for cut in 0..b.len() {
        assert!(CtrlMsg::parse(&b[..cut]).is_err(), "cut at {cut}");
    }
    let mut epoch_mismatch = vote(&keys[0], 0, 1, 1);
    epoch_mismatch.epoch = 2;
    assert!(epoch_mismatch.to_bytes().is_err());
}
