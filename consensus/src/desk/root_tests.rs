//! The root gate (INV-REP-7) and divergence (INV-REP-9) of 07 §7.4, on a scripted ledger.

use super::*;
use crate::roots::root_digest;
use std::collections::BTreeMap;

const RB: u64 = 4; // root heights 3, 7, 11, …
const GATE: u64 = 8;

struct L {
    top: u64,
    roots: BTreeMap<u64, Hash>,
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
    fn check(&mut self, first: u64, last: u64, last_hash: &Hash, _now: u64) -> Check {
        if last > self.top {
            return Check::Pending { at: self.top + 1 };
        }
        if *last_hash != hash(last) {
            return Check::False {
                at: last,
                contradiction: true,
            };
        }
        let _ = first;
        Check::True
    }
    fn root(&mut self, h: u64) -> Option<Hash> {
        self.roots.get(&h).copied()
    }
}

fn desk() -> (Desk, L) {
    let voters = super::test_voters(0x40);
    let genesis = crate::genesis_digest(1, 0, &[0; 32]);
    let mut cfg = DeskConfig::new(0, 1, 0, genesis);
    cfg.root_blocks = RB;
    cfg.root_gate_blocks = GATE;
    cfg.root_timeout_ns = 1_000;
    cfg.verify_wait_ns = 1_000_000;
    let (mut d, _link) = Desk::new(cfg, voters.clone());
    d.set_root_signer(crate::roots::root_signer(&voters, crate::private_key(&[0x40; 32])).unwrap());
    (
        d,
        L {
            top: 40,
            roots: BTreeMap::new(),
        },
    )
}

fn proposal_digest(first: u64, last: u64) -> Digest {
    crate::cert::payload_digest(&RepProposal {
        kind: ProposalKind::Headers,
        epoch: 1,
        first_height: first,
        last_height: last,
        last_hash: hash(last),
        excl_root: [0; 32],
    })
}

fn verify(d: &mut Desk, l: &mut L, first: u64, last: u64, now: u64) -> oneshot::Receiver<bool> {
    let (reply, rx) = oneshot::channel();
    let parent = if first == 1 {
        d.cfg.genesis
    } else {
        proposal_digest(1, first - 1)
    };
    d.take(
        Req::Verify {
            view: 1,
            parent,
            payload: proposal_digest(first, last),
            reply,
        },
        now,
    );
    d.poll(now, l);
    rx
}

fn outs(d: &mut Desk) -> Vec<DeskOut> {
    let mut v = Vec::new();
    d.drain_out(|o| v.push(o));
    v
}

#[test]
fn root_propose_waits_for_replay_then_answers_its_own_digest() {
    let (mut d, mut l) = desk();
    let (reply, mut rx) = oneshot::channel();
    d.take(Req::RootPropose { index: 0, reply }, 0);
    d.poll(1, &mut l);
    assert!(rx.try_recv().is_err(), "R(3) not replayed yet: no answer");
    l.roots.insert(3, [7; 32]);
    d.poll(2, &mut l);
    assert_eq!(rx.try_recv().unwrap(), root_digest(1, 3, &[7; 32]));
    assert_eq!(d.counters().roots_proposed, 1);
    // verify of the engine answers from the same root.
    let (reply, mut rx) = oneshot::channel();
    d.take(
        Req::RootVerify {
            index: 0,
            digest: root_digest(1, 3, &[8; 32]),
            reply,
        },
        3,
    );
    d.poll(3, &mut l);
    assert_eq!(rx.try_recv(), Ok(false));
}

#[test]
fn the_root_gate_holds_verify_until_the_root_is_certified() {
    let (mut d, mut l) = desk();
    // 1..=11: bound 11 − 8 = 3 is root height 3 (index 0), uncertified: pending.
    let mut rx = verify(&mut d, &mut l, 1, 11, 10);
    assert!(rx.try_recv().is_err(), "held by INV-REP-7");
    assert!(d.counters().root_gate_waits > 0);
    // 1..=10 ends before the gate needs index 0.
    let mut ok = verify(&mut d, &mut l, 1, 10, 11);
    assert_eq!(ok.try_recv(), Ok(true));
    d.take(
        Req::RootCertified {
            index: 0,
            digest: [1; 32],
            entries: vec![],
        },
        12,
    );
    d.poll(12, &mut l);
    assert_eq!(rx.try_recv(), Ok(true), "certified: the gate opens");
    // And a verify still held when the wait runs out is false.
    let mut late = verify(&mut d, &mut l, 1, 15, 20);
    assert!(late.try_recv().is_err());
    d.poll(20 + 2_000_000, &mut l);
    assert_eq!(late.try_recv(), Ok(false));
}

#[test]
fn the_engines_tip_past_an_index_counts_for_the_gate() {
    let (mut d, mut l) = desk();
    d.take(Req::RootTip { tip: 1 }, 0);
    let mut rx = verify(&mut d, &mut l, 1, 11, 1);
    assert_eq!(rx.try_recv(), Ok(true));
}

fn ack(d: &mut Desk, l: &mut L, index: u64, signer: u8, digest: u8) {
    d.take(
        Req::RootAck {
            index,
            signer,
            digest: [digest; 32],
            sig: [signer; 64],
        },
        5,
    );
    d.poll(5, l);
}

#[test]
fn two_digests_with_f_plus_1_signatures_each_diverge_and_stop_the_votes() {
    let (mut d, mut l) = desk();
    ack(&mut d, &mut l, 0, 1, 0xa);
    ack(&mut d, &mut l, 0, 2, 0xa);
    ack(&mut d, &mut l, 0, 3, 0xb);
    assert!(
        d.diverged().is_none(),
        "one signature for b: a fault at most"
    );
    ack(&mut d, &mut l, 0, 0, 0xb);
    let div = d.diverged().cloned().expect("REP_A_DIVERGE");
    assert_eq!(div.reason, DivergeReason::Conflict);
    assert_eq!(div.index, 0);
    assert_eq!(div.digests.len(), 2);
    assert!(div.digests.iter().all(|x| x.sigs.len() == 2));
    let o = outs(&mut d);
    assert_eq!(
        o.iter()
            .filter(|x| matches!(x, DeskOut::Diverge(_)))
            .count(),
        1,
        "sent once"
    );
    // The message is a valid control message.
    let b = div.to_bytes().unwrap();
    assert_eq!(Diverge::parse(&b).unwrap(), div);
    // INV-REP-9: verify is false at once, a proposal is never answered.
    let mut rx = verify(&mut d, &mut l, 1, 2, 6);
    assert_eq!(rx.try_recv(), Ok(false));
    let (reply, mut p) = oneshot::channel();
    d.take(
        Req::Propose {
            view: 2,
            parent: d.cfg.genesis,
            reply,
        },
        7,
    );
    d.poll(7, &mut l);
    assert!(p.try_recv().is_err());
    assert_eq!(d.counters().diverged, 1);
}

#[test]
fn one_odd_root_is_a_recorded_fault_not_divergence() {
    let (mut d, mut l) = desk();
    l.roots.insert(3, [7; 32]);
    let own = root_digest(1, 3, &[7; 32]).0;
    let (reply, _rx) = oneshot::channel();
    d.take(Req::RootPropose { index: 0, reply }, 0);
    d.poll(1, &mut l);
    d.take(
        Req::RootAck {
            index: 0,
            signer: 1,
            digest: own,
            sig: [1; 64],
        },
        2,
    );
    ack(&mut d, &mut l, 0, 3, 0xb);
    d.take(
        Req::RootCertified {
            index: 0,
            digest: own,
            entries: vec![
                CertEntry {
                    index: 0,
                    sig: [0; 64],
                },
                CertEntry {
                    index: 1,
                    sig: [1; 64],
                },
                CertEntry {
                    index: 2,
                    sig: [2; 64],
                },
            ],
        },
        6,
    );
    d.poll(6, &mut l);
    assert!(d.diverged().is_none());
    let o = outs(&mut d);
    let cert = o.iter().find_map(|x| match x {
        DeskOut::RootCert(c) => Some(c.clone()),
        _ => None,
    });
    let cert = cert.expect("a REP_RootCert over this voter's root");
    assert_eq!((cert.h, cert.root, cert.entries.len()), (3, [7; 32], 3));
    assert!(o.contains(&DeskOut::RootFault {
        index: 0,
        signer: 3,
        digest: [0xb; 32]
    }));
    assert_eq!(d.counters().root_faults, 1);
}

#[test]
fn a_voter_whose_own_root_differs_from_the_certified_one_records_itself() {
    let (mut d, mut l) = desk();
    l.roots.insert(3, [7; 32]);
    d.take(
        Req::RootCertified {
            index: 0,
            digest: [0xc; 32],
            entries: vec![],
        },
        1,
    );
    d.poll(1, &mut l);
    let o = outs(&mut d);
    assert!(o.iter().all(|x| !matches!(x, DeskOut::RootCert(_))));
    assert!(o
        .iter()
        .any(|x| matches!(x, DeskOut::RootFault { signer: 0, .. })));
}

#[test]
fn no_certificate_within_the_timeout_of_finality_is_divergence() {
    let (mut d, mut l) = desk();
    d.final_height = 3; // root height 3 (index 0) final
    d.poll(100, &mut l);
    assert!(d.diverged().is_none(), "the timeout runs from finality");
    d.poll(100 + 999, &mut l);
    assert!(d.diverged().is_none());
    d.poll(100 + 1_001, &mut l);
    let div = d
        .diverged()
        .expect("REP_A_DIVERGE: no root certified in time");
    assert_eq!((div.index, div.reason), (0, DivergeReason::Timeout));
}

#[test]
fn a_certificate_in_time_is_no_divergence() {
    let (mut d, mut l) = desk();
    d.final_height = 3;
    d.poll(100, &mut l);
    d.take(
        Req::RootCertified {
            index: 0,
            digest: [1; 32],
            entries: vec![],
        },
        500,
    );
    d.poll(5_000, &mut l);
    assert!(d.diverged().is_none());
}

#[test]
fn roots_off_changes_nothing() {
    let (mut d, mut l) = desk();
    d.cfg.root_blocks = 0;
    let mut rx = verify(&mut d, &mut l, 1, 16, 1);
    assert_eq!(rx.try_recv(), Ok(true));
    d.final_height = 3;
    d.poll(10_000_000, &mut l);
    assert!(d.diverged().is_none());
}

/// Security review F10: acks for far-future root indexes (a Byzantine or spoofed voter's)
/// are refused and counted, and evict none of the current slots — neither a certificate the
/// root gate needs (INV-REP-7) nor the finality time of an uncertified root (INV-REP-9 case
/// 2).
#[test]
fn far_future_root_acks_are_refused_and_evict_no_current_slot() {
    let (mut d, mut l) = desk();
    d.take(
        Req::RootCertified {
            index: 0,
            digest: [1; 32],
            entries: vec![],
        },
        1,
    );
    d.final_height = 7; // root heights 3 and 7 (indexes 0, 1) final
    d.poll(100, &mut l);
    let mut rx = verify(&mut d, &mut l, 1, 11, 101);
    assert_eq!(
        rx.try_recv(),
        Ok(true),
        "index 0 certified: the gate is open"
    );
    let flood = 2 * ROOTS_KEPT as u64;
    for i in 0..flood {
        d.take(
            Req::RootAck {
                index: 1_000 + i,
                signer: 3,
                digest: [0xe; 32],
                sig: [3; 64],
            },
            200,
        );
    }
    d.poll(200, &mut l);
    assert_eq!(d.counters().root_acks_refused, flood);
    assert_eq!(d.counters().root_acks, 0);
    assert!(
        d.roots.len() <= ROOT_ACK_WINDOW as usize + 1,
        "{}",
        d.roots.len()
    );
    // Index 0's certificate still opens the gate.
    let mut rx = verify(&mut d, &mut l, 1, 11, 300);
    assert_eq!(rx.try_recv(), Ok(true), "index 0's slot survived");
    // Index 1, final at 100 and never certified, still times out (INV-REP-9 case 2).
    d.poll(100 + 1_001, &mut l);
    let div = d.diverged().expect("REP_A_DIVERGE for index 1");
    assert_eq!((div.index, div.reason), (1, DivergeReason::Timeout));
}

/// Acks inside the window are taken, above it refused; below it only for a slot still held
/// (a certified root's late acks); and a table filled past ROOTS_KEPT by other paths never
/// loses a slot inside the window.
#[test]
fn root_acks_are_taken_only_inside_the_window_and_its_slots_are_never_evicted() {
    let (mut d, mut l) = desk();
    // Index 0 certified: the window is 1 ..= 8.
    d.take(
        Req::RootCertified {
            index: 0,
            digest: [1; 32],
            entries: vec![],
        },
        1,
    );
    d.poll(1, &mut l);
    for i in 1..=ROOT_ACK_WINDOW {
        ack(&mut d, &mut l, i, 2, 0xa);
    }
    assert_eq!(d.counters().root_acks, ROOT_ACK_WINDOW);
    ack(&mut d, &mut l, ROOT_ACK_WINDOW + 1, 2, 0xa);
    assert_eq!(d.counters().root_acks_refused, 1);
    // Index 0 still has its slot: a late ack for another digest is taken (a RootFault).
    ack(&mut d, &mut l, 0, 3, 0xb);
    assert_eq!(d.counters().root_acks, ROOT_ACK_WINDOW + 1);
    assert!(outs(&mut d).contains(&DeskOut::RootFault {
        index: 0,
        signer: 3,
        digest: [0xb; 32]
    }));
    // Slots far above the window (say, certificates the engine reported) past the bound:
    // the farthest go, the window's stay.
    for i in 0..2 * ROOTS_KEPT as u64 {
        d.roots.entry(10_000 + i).or_default();
    }
    d.poll(6, &mut l);
    assert_eq!(d.roots.len(), ROOTS_KEPT);
    for i in 1..=ROOT_ACK_WINDOW {
        assert!(
            d.roots.get(&i).is_some_and(|s| !s.acks.is_empty()),
            "slot {i} kept"
        );
    }
}

/// One signer adds at most ROOT_DIGESTS_PER_SIGNER digests to an index: a flood of signed
/// junk digests does not grow the slot, and the conflict it could count for still fires
/// with the heavy digests first in the evidence.
#[test]
fn one_signer_adds_at_most_two_digests_to_a_root_index() {
    let (mut d, mut l) = desk();
    ack(&mut d, &mut l, 0, 3, 0xa);
    ack(&mut d, &mut l, 0, 3, 0xb);
    for x in 0x20..0x52u8 {
        ack(&mut d, &mut l, 0, 3, x);
    }
    assert_eq!(d.counters().root_acks, 2);
    assert_eq!(d.counters().root_acks_refused, 50);
    assert_eq!(d.roots[&0].acks.len(), 2);
    // Its own digests again are no new ones.
    ack(&mut d, &mut l, 0, 3, 0xa);
    assert_eq!(d.counters().root_acks, 3);
    assert!(d.diverged().is_none());
    ack(&mut d, &mut l, 0, 1, 0xa);
    ack(&mut d, &mut l, 0, 2, 0xb);
    let div = d
        .diverged()
        .expect("two digests with f + 1 signatures each");
    assert!(div.digests[..2].iter().all(|x| x.sigs.len() == 2));
}

/// A leader's junk digests (verify false after the wait) do not grow the answers certify
/// reads: past ANSWERED_UNINDEXED_MAX the oldest go.
#[test]
fn verify_answers_for_digests_naming_no_range_are_bounded() {
    let (mut d, mut l) = desk();
    let n = ANSWERED_UNINDEXED_MAX + 100;
    for k in 0..n as u64 {
        let (reply, _rx) = oneshot::channel();
        let mut junk = [0u8; 32];
        junk[..8].copy_from_slice(&k.to_le_bytes());
        d.take(
            Req::Verify {
                view: k + 1,
                parent: d.cfg.genesis,
                payload: commonware_cryptography::blake3::Digest(junk),
                reply,
            },
            10,
        );
        std::mem::forget(_rx);
    }
    d.poll(10, &mut l);
    d.poll(10 + 2_000_000, &mut l);
    assert_eq!(d.counters().verify_timeout, n as u64);
    assert_eq!(d.answered.len(), ANSWERED_UNINDEXED_MAX);
    assert_eq!(d.counters().answers_forgotten, 100);
    // An indexed digest's answer is kept alongside.
    let mut rx = verify(&mut d, &mut l, 1, 2, 3_000_000);
    assert_eq!(rx.try_recv(), Ok(true));
    assert!(d.answered.contains_key(&proposal_digest(1, 2).0));
}

#[test]
fn root_index_and_height_are_inverse() {
    use crate::roots::{root_height, root_index};
    for rb in [1u64, 4, 1000] {
        for h in 0..3 * rb {
            if let Some(i) = root_index(h, rb) {
                assert_eq!(root_height(i, rb), h);
            }
        }
        assert_eq!(root_index(rb - 1, rb), Some(0));
    }
    assert_eq!(root_index(5, 0), None);
}

/// A replica whose journal failed withdraws its voter (`Desk::stop_votes`): every verify after
/// it answers false, a proposal it is asked for is never answered (the engine nullifies the
/// view), no `Diverge` goes out, and the counter says so. The same ranges verified true before.
#[test]
fn stopped_votes_answer_false_and_propose_nothing() {
    let (mut d, mut l) = desk();
    d.cfg.root_blocks = 0;
    let mut rx = verify(&mut d, &mut l, 1, 4, 1);
    assert_eq!(rx.try_recv(), Ok(true), "a voter that runs votes");
    assert!(!d.votes_stopped());
    d.stop_votes();
    assert!(d.votes_stopped());
    assert_eq!(d.counters().votes_stopped, 1);
    let mut rx = verify(&mut d, &mut l, 5, 8, 2);
    assert_eq!(rx.try_recv(), Ok(false), "stopped: false");
    let (reply, mut p) = oneshot::channel();
    d.take(
        Req::Propose {
            view: 3,
            parent: proposal_digest(1, 4),
            reply,
        },
        3,
    );
    d.poll(3, &mut l);
    d.poll(1_000_000_000, &mut l);
    assert!(p.try_recv().is_err(), "no proposal from a stopped voter");
    assert!(
        outs(&mut d)
            .iter()
            .all(|o| !matches!(o, DeskOut::Diverge(_))),
        "a failed journal is not a divergence"
    );
    assert!(d.diverged().is_none());
}
