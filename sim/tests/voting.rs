//! Simplex among four voters on the deterministic runtime: safety, liveness
//! within the fault model, the vote rule (INV-REP-4), the finality gate, determinism.

use std::time::Duration;

use vyrn_consensus::cert::verify_with;
use vyrn_consensus::Voters;
use vyrn_sim::voting::{run, Outage, Role, SimConfig, SimReport};
use vyrn_wire::consts::FIN_GATE_BLOCKS;

fn voters() -> Voters {
    vyrn_sim::voting::sim_voters(4)
}

/// Safety: every finalized proposal at every honest voter names the scripted chain's header
/// (`last_hash` = header_hash(last)), and two voters that finalized a proposal ending at the
/// same height agree on its range; every certificate verifies.
fn assert_safe(r: &SimReport) {
    let vs = voters();
    let mut seen = std::collections::BTreeMap::new();
    for (i, v) in r.voters.iter().enumerate() {
        let Some(v) = v else { continue };
        for (&last, &(first, hash, _view)) in &v.finals {
            assert_eq!(
                hash, r.chain[last as usize],
                "voter {i}: final {first}..={last} is not the chain"
            );
            assert!(
                first <= last && last - first < 16,
                "voter {i}: range {first}..={last}"
            );
            if let Some(&(f2, h2)) = seen.get(&last) {
                assert_eq!(
                    (f2, h2),
                    (first, hash),
                    "voters disagree on the proposal ending at {last}"
                );
            }
            seen.insert(last, (first, hash));
        }
        for c in &v.certs {
            verify_with(c, &vs).unwrap_or_else(|e| panic!("voter {i}: its certificate fails: {e}"));
            assert_eq!(
                c.proposal.last_hash,
                r.chain[c.proposal.last_height as usize]
            );
        }
    }
}

/// A voter that finalized from genesis without a gap holds contiguous ranges.
fn assert_contiguous(r: &SimReport, i: usize) {
    let v = r.voters[i].as_ref().unwrap();
    let mut next = 1;
    for (&last, &(first, _, _)) in &v.finals {
        assert_eq!(first, next, "voter {i}: ranges not contiguous at {first}");
        next = last + 1;
    }
}

#[test]
fn four_voters_finalize_identical_ranges_and_the_sequencer_learns_them() {
    let r = run(SimConfig::metro(1, 150));
    assert_safe(&r);
    for i in 0..4 {
        let v = r.voters[i].as_ref().unwrap();
        assert!(
            v.final_height >= 145,
            "voter {i} final at {} of 150",
            v.final_height
        );
        assert_contiguous(&r, i);
        assert!(!v.votes.is_empty() && !v.certs.is_empty());
        assert_eq!(v.counters.verify_false, 0);
    }
    assert!(
        r.seq.final_height >= 145,
        "sequencer final at {}",
        r.seq.final_height
    );
    assert!(
        r.seq.gate.is_empty(),
        "the gate never trips within the fault model"
    );
    assert!(r.seq.max_lag <= FIN_GATE_BLOCKS);
    assert_eq!(r.seq.counters.bad_sigs, 0);
}

#[test]
fn the_same_seed_gives_the_same_run() {
    let a = run(SimConfig::metro(7, 40));
    let b = run(SimConfig::metro(7, 40));
    let c = run(SimConfig::metro(8, 40));
    assert_eq!(a.auditor, b.auditor);
    assert_ne!(a.auditor, c.auditor);
    for i in 0..4 {
        let (x, y) = (a.voters[i].as_ref().unwrap(), b.voters[i].as_ref().unwrap());
        assert_eq!(x.finals, y.finals);
        assert_eq!(x.final_at, y.final_at);
    }
    assert_eq!(a.seq.final_at, b.seq.final_at);
}

#[test]
fn a_voter_missing_payloads_or_holding_a_bad_root_never_votes_for_that_block() {
    let mut cfg = SimConfig::metro(3, 80);
    cfg.voters[3].missing.insert(20);
    cfg.voters[3].bad_root.insert(40);
    let r = run(cfg);
    assert_safe(&r);
    let v3 = r.voters[3].as_ref().unwrap();
    for v in &v3.votes {
        let p = &v.proposal;
        assert!(
            !(p.first_height..=p.last_height).contains(&20)
                && !(p.first_height..=p.last_height).contains(&40),
            "voter 3 voted {}..={}",
            p.first_height,
            p.last_height
        );
    }
    assert!(
        v3.counters.verify_false > 0,
        "the bad root was answered false"
    );
    // The other three are Q: finality goes on past both heights.
    for i in 0..3 {
        assert!(r.voters[i].as_ref().unwrap().final_height >= 75);
    }
    assert!(r.seq.final_height >= 75);
}

fn byzantine(role: Role, seed: u64) {
    let mut cfg = SimConfig::metro(seed, 120);
    cfg.voters[3].role = role;
    let r = run(cfg);
    assert_safe(&r);
    for i in 0..3 {
        let v = r.voters[i].as_ref().unwrap();
        assert!(
            v.final_height >= 100,
            "{role:?}: voter {i} final at {}",
            v.final_height
        );
    }
    assert!(
        r.seq.final_height >= 100,
        "{role:?}: sequencer final at {}",
        r.seq.final_height
    );
}

#[test]
fn a_conflicter_cannot_break_safety_or_liveness() {
    byzantine(Role::Conflicter, 11);
}

#[test]
fn a_nuller_cannot_break_safety_or_liveness() {
    byzantine(Role::Nuller, 12);
}

#[test]
fn an_equivocator_cannot_break_safety_or_liveness() {
    byzantine(Role::Equivocator, 13);
}

#[test]
fn a_partitioned_voter_catches_up() {
    let mut cfg = SimConfig::metro(21, 150);
    cfg.outages.push(Outage {
        voter: 0,
        from: Duration::from_millis(20),
        to: Duration::from_millis(70),
    });
    let r = run(cfg);
    assert_safe(&r);
    let v0 = r.voters[0].as_ref().unwrap();
    let v1 = r.voters[1].as_ref().unwrap();
    assert!(v1.final_height >= 145);
    assert!(
        v0.final_height >= 145,
        "voter 0 caught up to {}",
        v0.final_height
    );
    // While it was away the others went on without it.
    let at_40ms = v1.final_at.iter().filter(|(_, &t)| t < 60_000_000).count() as u64;
    assert!(at_40ms > 30);
}

#[test]
fn with_two_voters_down_nothing_finalizes_and_the_gate_halts_then_resumes() {
    let mut cfg = SimConfig::metro(31, 160);
    for v in [2, 3] {
        cfg.outages.push(Outage {
            voter: v,
            from: Duration::from_millis(30),
            to: Duration::from_millis(90),
        });
    }
    let r = run(cfg);
    assert_safe(&r);
    // No height closed during the outage became final at the sequencer before it ended.
    let during = r
        .seq
        .final_at
        .iter()
        .filter(|(&h, &t)| h > 32 && t < 90_000_000)
        .count();
    assert_eq!(during, 0, "finality with only two voters");
    let halt = r.seq.gate.iter().find(|g| g.1).expect("the gate halted");
    assert!(
        halt.0 > 30_000_000 && halt.0 < 45_000_000,
        "halted at {} ns",
        halt.0
    );
    assert!(
        r.seq.gate.iter().any(|g| !g.1 && g.0 > halt.0),
        "the gate resumed"
    );
    assert!(
        r.seq.final_height >= 150,
        "finality caught up to {}",
        r.seq.final_height
    );
    for i in 0..4 {
        assert!(r.voters[i].as_ref().unwrap().final_height >= 150);
    }
}
