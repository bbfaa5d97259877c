//! The seal at the desk (07 §9.4) on a scripted ledger: offers checked for form and bounded,
//! verify asks the ledger's seal check under the parent rule, the leader proposes its ledger's
//! seal once and offers it.

use super::*;

struct L {
    top: u64,
    ask: SealAsk,
    answer: Check,
    seal_checks: u32,
}

fn hash(h: u64) -> Hash {
    *blake3::hash(&h.to_le_bytes()).as_bytes()
}

impl Ledger for L {
    fn header_hash(&self, h: u64) -> Option<Hash> {
        (h >= 1 && h <= self.top).then(|| hash(h))
    }
    fn top(&self) -> u64 {
        self.top
    }
    fn check(&mut self, _first: u64, last: u64, last_hash: &Hash, _now: u64) -> Check {
        if *last_hash == hash(last) {
            Check::True
        } else {
            Check::False {
                at: last,
                contradiction: true,
            }
        }
    }
    fn root(&mut self, _h: u64) -> Option<Hash> {
        None
    }
    fn seal(&mut self, _parent_last: u64, _now: u64) -> SealAsk {
        self.ask.clone()
    }
    fn check_seal(&mut self, _p: &RepProposal, _ext: &RepSealExt, _now: u64) -> Check {
        self.seal_checks += 1;
        self.answer
    }
}

fn desk() -> (Desk, L) {
    let voters = super::test_voters(0x50);
    let genesis = crate::genesis_digest(1, 0, &[0; 32]);
    let mut cfg = DeskConfig::new(0, 1, 0, genesis);
    cfg.verify_wait_ns = 1_000_000;
    let (d, _link) = Desk::new(cfg, voters);
    (
        d,
        L {
            top: 10,
            ask: SealAsk::No,
            answer: Check::True,
            seal_checks: 0,
        },
    )
}

fn seal(first: u64, last: u64) -> RepProposal {
    RepProposal {
        kind: ProposalKind::Seal,
        epoch: 1,
        first_height: first,
        last_height: last,
        last_hash: [0x5e; 32],
        excl_root: [0; 32],
    }
}

fn ext(next_seq: u8) -> RepSealExt {
    RepSealExt {
        end_frame_seq: [100, 90],
        next_seq,
        next_tenure: 1,
        unavail: Vec::new(),
    }
}

fn verify(
    d: &mut Desk,
    l: &mut L,
    parent: Digest,
    payload: Digest,
    now: u64,
) -> oneshot::Receiver<bool> {
    let (reply, rx) = oneshot::channel();
    d.take(
        Req::Verify {
            view: 3,
            parent,
            payload,
            reply,
        },
        now,
    );
    d.poll(now, l);
    rx
}

#[test]
fn offers_are_checked_for_form_and_kept_once() {
    let (mut d, _l) = desk();
    let mut h = seal(1, 11);
    h.kind = ProposalKind::Headers;
    assert_eq!(d.offer_seal(h, ext(1)), Err(OfferRefused::Kind));
    let mut e = seal(1, 11);
    e.epoch = 2;
    assert_eq!(d.offer_seal(e, ext(1)), Err(OfferRefused::Epoch));
    assert_eq!(
        d.offer_seal(seal(11, 1), ext(1)),
        Err(OfferRefused::Malformed)
    );
    let mut bad = ext(1);
    bad.unavail = vec![
        vyrn_wire::msg::PktKey {
            session: 2,
            pkt_seq: 1,
        },
        vyrn_wire::msg::PktKey {
            session: 1,
            pkt_seq: 1,
        },
    ];
    assert_eq!(d.offer_seal(seal(1, 11), bad), Err(OfferRefused::Malformed));
    let dg = d.offer_seal(seal(1, 11), ext(1)).unwrap();
    assert_eq!(Some(dg), crate::cert::seal_payload(&seal(1, 11), &ext(1)));
    assert_eq!(
        d.offer_seal(seal(1, 11), ext(1)),
        Err(OfferRefused::Duplicate)
    );
    let c = d.counters();
    assert_eq!((c.seal_offers, c.seal_offers_refused), (1, 4));
}

#[test]
fn verify_of_a_seal_waits_for_its_offer_then_asks_the_ledger() {
    let (mut d, mut l) = desk();
    let genesis = d.cfg.genesis;
    let payload = crate::cert::seal_payload(&seal(1, 11), &ext(1)).unwrap();
    let mut rx = verify(&mut d, &mut l, genesis, payload, 0);
    assert!(rx.try_recv().is_err(), "pending: no offer yet");
    assert_eq!(l.seal_checks, 0);
    d.offer_seal(seal(1, 11), ext(1)).unwrap();
    l.answer = Check::Pending { at: 11 };
    d.poll(10, &mut l);
    assert!(rx.try_recv().is_err(), "pending while the ledger is");
    assert!(l.seal_checks >= 1);
    l.answer = Check::True;
    d.poll(20, &mut l);
    assert_eq!(rx.try_recv().ok(), Some(true));
    // The same seal over another parent breaks the parent rule (07 §6.3): false, no ledger call.
    let before = l.seal_checks;
    let parent = crate::cert::payload_digest(&RepProposal {
        kind: ProposalKind::Headers,
        epoch: 1,
        first_height: 1,
        last_height: 3,
        last_hash: hash(3),
        excl_root: [0; 32],
    });
    let mut rx = verify(&mut d, &mut l, parent, payload, 30);
    assert_eq!(rx.try_recv().ok(), Some(false));
    assert_eq!(l.seal_checks, before);
    // A contradiction from the ledger (another next sequencer, 07 §9.5) is false at once.
    let p2 = crate::cert::seal_payload(&seal(1, 11), &ext(2)).unwrap();
    d.offer_seal(seal(1, 11), ext(2)).unwrap();
    l.answer = Check::False {
        at: 11,
        contradiction: true,
    };
    let mut rx = verify(&mut d, &mut l, genesis, p2, 40);
    assert_eq!(rx.try_recv().ok(), Some(false));
}

#[test]
fn the_leader_proposes_its_ledgers_seal_once_and_offers_it() {
    let (mut d, mut l) = desk();
    let genesis = d.cfg.genesis;
    let propose = |d: &mut Desk, l: &mut L, now: u64| {
        let (reply, rx) = oneshot::channel();
        d.take(
            Req::Propose {
                view: 5,
                parent: genesis,
                reply,
            },
            now,
        );
        d.poll(now, l);
        rx
    };
    l.ask = SealAsk::Wait;
    let mut rx = propose(&mut d, &mut l, 0);
    assert!(
        rx.try_recv().is_err(),
        "deposed but not ready: no headers, no seal"
    );
    l.ask = SealAsk::Ready(Box::new((seal(1, 11), ext(1))));
    d.poll(10, &mut l);
    let want = crate::cert::seal_payload(&seal(1, 11), &ext(1)).unwrap();
    assert_eq!(rx.try_recv().ok(), Some(want));
    let mut offers = Vec::new();
    d.drain_out(|o| offers.push(o));
    assert_eq!(
        offers,
        vec![DeskOut::SealOffer {
            proposal: seal(1, 11),
            ext: ext(1)
        }]
    );
    // Led again (a nullified view): the same digest, no second offer.
    let mut rx = propose(&mut d, &mut l, 20);
    assert_eq!(rx.try_recv().ok(), Some(want));
    let mut more = Vec::new();
    d.drain_out(|o| more.push(o));
    assert!(more.is_empty());
    assert_eq!(d.counters().seals_proposed, 1);
    // A seal built on another parent is not this view's.
    l.ask = SealAsk::Ready(Box::new((seal(4, 11), ext(1))));
    let mut rx = propose(&mut d, &mut l, 30);
    assert!(rx.try_recv().is_err());
}

#[test]
fn offers_past_the_bound_push_out_the_oldest() {
    let (mut d, mut l) = desk();
    let genesis = d.cfg.genesis;
    let first = crate::cert::seal_payload(&seal(1, 11), &ext(0)).unwrap();
    for k in 0..=SEALS_KEPT as u8 {
        d.offer_seal(seal(1, 11), ext(k)).unwrap();
    }
    // The oldest is gone: its verify stays pending (then times out), no ledger call.
    let mut rx = verify(&mut d, &mut l, genesis, first, 0);
    assert!(rx.try_recv().is_err());
    assert_eq!(l.seal_checks, 0);
    d.poll(2_000_000, &mut l);
    assert_eq!(rx.try_recv().ok(), Some(false));
    // The newest is held.
    let last = crate::cert::seal_payload(&seal(1, 11), &ext(SEALS_KEPT as u8)).unwrap();
    let mut rx = verify(&mut d, &mut l, genesis, last, 2_000_001);
    assert_eq!(rx.try_recv().ok(), Some(true));
}

#[test]
fn a_notarized_seal_not_final_is_proposed_again_on_itself_and_verified_so() {
    let (mut d, mut l) = desk();
    let sealed = crate::cert::seal_payload(&seal(1, 11), &ext(1)).unwrap();
    d.offer_seal(seal(1, 11), ext(1)).unwrap();
    let propose = |d: &mut Desk, l: &mut L, parent: Digest, now: u64| {
        let (reply, rx) = oneshot::channel();
        d.take(
            Req::Propose {
                view: 7,
                parent,
                reply,
            },
            now,
        );
        d.poll(now, l);
        rx
    };
    // The ledger's own seal no longer fits on the seal as parent (it would start at 12): the
    // leader proposes the seal's digest again, once its own check of the seal passes.
    l.ask = SealAsk::Wait;
    l.answer = Check::Pending { at: 11 };
    let mut rx = propose(&mut d, &mut l, sealed, 0);
    assert!(rx.try_recv().is_err(), "its own check pending: nothing yet");
    l.answer = Check::True;
    d.poll(10, &mut l);
    assert_eq!(rx.try_recv().ok(), Some(sealed));
    assert_eq!(d.counters().seals_reproposed, 1);
    // A voter takes the seal on itself as a parent (the parent rule does not apply to it) and
    // asks its ledger, which can still refuse it.
    let mut rx = verify(&mut d, &mut l, sealed, sealed, 20);
    assert_eq!(rx.try_recv().ok(), Some(true));
    let checks = l.seal_checks;
    l.answer = Check::False {
        at: 11,
        contradiction: true,
    };
    let mut rx = verify(&mut d, &mut l, sealed, sealed, 30);
    assert_eq!(rx.try_recv().ok(), Some(false));
    assert!(l.seal_checks > checks);
    // Another seal on the seal still breaks the parent rule.
    let other = crate::cert::seal_payload(&seal(1, 11), &ext(2)).unwrap();
    d.offer_seal(seal(1, 11), ext(2)).unwrap();
    l.answer = Check::True;
    let mut rx = verify(&mut d, &mut l, sealed, other, 40);
    assert_eq!(rx.try_recv().ok(), Some(false));
}

#[test]
fn a_final_seal_is_not_proposed_again() {
    let (mut d, mut l) = desk();
    let sealed = crate::cert::seal_payload(&seal(1, 11), &ext(1)).unwrap();
    d.offer_seal(seal(1, 11), ext(1)).unwrap();
    d.final_height = 11;
    l.ask = SealAsk::No;
    let (reply, mut rx) = oneshot::channel();
    d.take(
        Req::Propose {
            view: 9,
            parent: sealed,
            reply,
        },
        0,
    );
    d.poll(0, &mut l);
    // The next tenure's headers are not held yet: nothing is proposed (the view times out).
    assert!(rx.try_recv().is_err());
    assert_eq!(d.counters().seals_reproposed, 0);
}

/// A seal's finalization at `view` over `parent_view`, signed by voters 0..3 of `desk()`'s set.
fn seal_finalization(view: u64, parent_view: u64) -> crate::Finalization {
    let voters = super::test_voters(0x50);
    let entries = (0..3u8)
        .map(|i| vyrn_wire::msg::consensus::CertEntry {
            index: i,
            sig: crate::cert::FinalizeSigner::new(&voters, &[0x50 + i; 32])
                .expect("a voter")
                .sign_seal(1, view, parent_view, &seal(1, 11), &ext(1)),
        })
        .collect();
    let cert = vyrn_wire::msg::consensus::RepFinalityCert {
        epoch: 1,
        view,
        parent_view,
        proposal: seal(1, 11),
        entries,
    };
    crate::cert::to_finalization_of(&voters, &cert, Some(&ext(1))).expect("a valid seal cert")
}

#[test]
fn a_seal_final_in_its_view_and_in_its_re_proposal_exports_one_certificate() {
    let (mut d, mut l) = desk();
    d.offer_seal(seal(1, 11), ext(1)).unwrap();
    d.drain_out(|_| {});
    // The re-proposal's finalization first (view 6 on the seal's view 5), then the first's.
    d.take(Req::Finalized(Box::new(seal_finalization(6, 5))), 0);
    d.poll(0, &mut l);
    d.take(Req::Finalized(Box::new(seal_finalization(5, 4))), 1);
    d.poll(1, &mut l);
    let mut certs = Vec::new();
    d.drain_out(|o| {
        if let DeskOut::SealCert { cert, .. } = o {
            certs.push(cert.view);
        }
    });
    assert_eq!(certs, vec![6], "one certificate, the first finalization's");
    assert_eq!(d.counters().seals_final, 1);
    assert_eq!(d.final_height, 11);
    assert_eq!(d.finals.get(&11).map(|f| f.2), Some(6));
}
