//! State roots among four voters on the deterministic runtime (07 §7.4): the
//! aggregation engine certifies `R(h)` at every root height; one wrong root is a recorded fault
//! and certificates still form; a two-two split or a root nobody certifies fires REP_A_DIVERGE
//! (INV-REP-9) and the voters stop voting; the root gate (INV-REP-7) stops finality when roots
//! stop certifying.

use std::time::Duration;

use vyrn_consensus::roots::verify_root_cert;
use vyrn_consensus::Voters;
use vyrn_sim::voting::{run, sim_root, RootsSim, SimConfig, SimReport};
use vyrn_wire::msg::ctrl::DivergeReason;

const RB: u64 = 20;

fn voters() -> Voters {
    vyrn_sim::voting::sim_voters(4)
}

fn cfg(seed: u64, blocks: u64) -> SimConfig {
    let mut c = SimConfig::metro(seed, blocks);
    c.roots = Some(RootsSim {
        root_blocks: RB,
        gate_blocks: 3 * RB,
        timeout: Duration::from_millis(60),
    });
    c
}

fn root_heights(r: &SimReport, i: usize) -> Vec<u64> {
    r.voters[i]
        .as_ref()
        .unwrap()
        .root_certs
        .iter()
        .map(|c| c.h)
        .collect()
}

#[test]
fn every_voter_certifies_every_root_and_finality_goes_on() {
    let r = run(cfg(3, 200));
    let vs = voters();
    for i in 0..4 {
        let v = r.voters[i].as_ref().unwrap();
        assert!(v.diverge.is_none(), "voter {i}: {:?}", v.diverge);
        assert!(
            v.final_height >= 190,
            "voter {i} final at {}",
            v.final_height
        );
        let hs = root_heights(&r, i);
        // Root heights 19, 39, …, 179 at least (199's replay may end with the run).
        for k in 0..9 {
            assert!(hs.contains(&(k * RB + RB - 1)), "voter {i}: roots {hs:?}");
        }
        for c in &v.root_certs {
            assert_eq!(c.root, sim_root(c.h, false));
            verify_root_cert(c, &vs, RB).unwrap_or_else(|e| panic!("voter {i}: {e}"));
        }
        assert!(v.root_faults.is_empty());
        assert!(v.counters.roots_proposed >= 9);
    }
    // An outsider refuses a tampered root, a wrong height and too few signatures.
    let c = r.voters[0].as_ref().unwrap().root_certs[0].clone();
    let mut bad = c.clone();
    bad.root[0] ^= 1;
    assert!(verify_root_cert(&bad, &vs, RB).is_err());
    let mut bad = c.clone();
    bad.h += 1;
    assert!(verify_root_cert(&bad, &vs, RB).is_err());
    let mut bad = c.clone();
    bad.entries.truncate(2);
    assert!(verify_root_cert(&bad, &vs, RB).is_err());
}

#[test]
fn one_wrong_root_is_a_recorded_fault_and_the_others_certify() {
    let mut c = cfg(5, 200);
    c.voters[3].wrong_root = (0..10).map(|k| k * RB + RB - 1).collect();
    let r = run(c);
    for i in 0..4 {
        let v = r.voters[i].as_ref().unwrap();
        assert!(
            v.diverge.is_none(),
            "voter {i}: one wrong root cannot diverge"
        );
        assert!(
            v.final_height >= 190,
            "voter {i} final at {}",
            v.final_height
        );
    }
    for i in 0..3 {
        assert!(root_heights(&r, i).len() >= 9, "voter {i}");
    }
    // Voter 3's replay is the odd one: it never exports a certificate over its own root and
    // records itself; at least one honest voter recorded voter 3's signature as a RootFault.
    let v3 = r.voters[3].as_ref().unwrap();
    assert!(v3.root_certs.is_empty());
    let seen: usize = (0..3)
        .map(|i| {
            r.voters[i]
                .as_ref()
                .unwrap()
                .root_faults
                .iter()
                .filter(|f| f.1 == 3)
                .count()
        })
        .sum();
    assert!(seen > 0, "RootFault{{signer 3}} recorded");
}

#[test]
fn a_two_two_split_fires_rep_a_diverge_and_stops_finality() {
    let mut c = cfg(7, 200);
    for i in [2, 3] {
        c.voters[i].wrong_root = [2 * RB - 1].into_iter().collect();
    }
    let r = run(c);
    for i in 0..4 {
        let v = r.voters[i].as_ref().unwrap();
        let (at, d) = v
            .diverge
            .clone()
            .unwrap_or_else(|| panic!("voter {i}: no divergence"));
        assert_eq!(d.index, 1, "voter {i}");
        assert!(
            d.reason == DivergeReason::Conflict || d.reason == DivergeReason::Timeout,
            "voter {i}: {:?}",
            d.reason
        );
        // INV-REP-9: nothing is finalized well after the divergence.
        assert!(
            v.final_height < 200,
            "voter {i} went on to {} after diverging at {at} ns",
            v.final_height
        );
    }
    // At least one voter saw both digests with f + 1 = 2 signatures each (case 1).
    assert!((0..4).any(|i| {
        let d = &r.voters[i].as_ref().unwrap().diverge.as_ref().unwrap().1;
        d.reason == DivergeReason::Conflict
            && d.digests.len() == 2
            && d.digests.iter().all(|x| x.sigs.len() >= 2)
    }));
    assert!(r.seq.final_height < 200);
}

#[test]
fn roots_nobody_certifies_time_out_into_divergence() {
    let mut c = cfg(9, 200);
    // Two voters' replays never reach a root: no digest can reach Q = 3.
    c.voters[2].root_delay = None;
    c.voters[3].root_delay = None;
    let r = run(c);
    for i in 0..2 {
        let v = r.voters[i].as_ref().unwrap();
        let (_, d) = v.diverge.clone().expect("REP_A_DIVERGE after the timeout");
        assert_eq!(
            (d.index, d.reason),
            (0, DivergeReason::Timeout),
            "voter {i}"
        );
        assert!(v.root_certs.is_empty());
    }
    // Finality stopped: at most the first root height plus the gate and the timeout's worth.
    assert!(r.seq.final_height < 200, "final {}", r.seq.final_height);
}

#[test]
fn the_same_seed_gives_the_same_roots() {
    let a = run(cfg(11, 60));
    let b = run(cfg(11, 60));
    assert_eq!(a.auditor, b.auditor);
    for i in 0..4 {
        assert_eq!(root_heights(&a, i), root_heights(&b, i));
    }
}
