//! Twins: voter 3's key runs
//! two production voters — desk, app, engine — whose network is split so each half talks to
//! its own subset of the honest voters. A compromised key can do no more than this (sign two
//! histories, each through an honest-looking voter), so the campaign below — every way to
//! split the three honest voters between the halves, overlapping or not, with and without the
//! split healing, over several seeds — checks that it never breaks safety (no two finalized
//! ranges disagree, anywhere: honest voters, either half, the sequencer's listener) and that
//! liveness holds with one such voter.
//!
//! Two campaigns. The first keeps leaders round-robin (the production elector) and enumerates
//! fixed splits. The second is commonware's own Twins generator (`mocks::twins::cases`): each
//! case scripts, view by view for a prefix of rounds, the leader and the recipient sets of
//! each half (the twin's key among the leaders), over the structurally distinct choices of
//! compromised voter; after the prefix, round-robin and all-to-all.

use std::collections::BTreeMap;
use std::time::Duration;

use vyrn_consensus::cert::verify_with;
use vyrn_consensus::Voters;
use vyrn_sim::voting::{run, Role, SimConfig, SimReport, TwinSplit, VoterReport};

fn voters() -> Voters {
    vyrn_sim::voting::sim_voters(4)
}

/// Every finalized range everywhere is the scripted chain's, and any two that end at one
/// height are the same range; every certificate anyone exported verifies against the set.
fn assert_safe(r: &SimReport, what: &str) {
    let vs = voters();
    let mut all: Vec<(String, &VoterReport)> = r
        .voters
        .iter()
        .enumerate()
        .filter_map(|(i, v)| Some((format!("voter {i}"), v.as_ref()?)))
        .collect();
    for (i, p, s) in &r.twins {
        all.push((format!("twin {i} primary"), p));
        all.push((format!("twin {i} secondary"), s));
    }
    let mut seen: BTreeMap<u64, (u64, [u8; 32], String)> = BTreeMap::new();
    for (who, v) in &all {
        for (&last, &(first, hash, _)) in &v.finals {
            assert_eq!(
                hash, r.chain[last as usize],
                "{what}: {who}: final ..={last}"
            );
            if let Some((f2, h2, w2)) = seen.get(&last) {
                assert_eq!(
                    (*f2, *h2),
                    (first, hash),
                    "{what}: {who} and {w2} disagree on the range ending at {last}"
                );
            }
            seen.insert(last, (first, hash, who.clone()));
        }
        for c in &v.certs {
            verify_with(c, &vs).unwrap_or_else(|e| panic!("{what}: {who}: certificate: {e}"));
            assert_eq!(
                c.proposal.last_hash,
                r.chain[c.proposal.last_height as usize]
            );
        }
        // Conflict evidence can name only the twin's key.
        let twin = r.twins.first().map_or(3, |t| t.0 as u8);
        for (kind, signer, view) in &v.faults {
            assert_eq!(
                *signer, twin,
                "{what}: {who} accuses voter {signer} ({kind:?} in view {view})"
            );
        }
    }
}

fn twins(seed: u64, primary: &[usize], secondary: &[usize], heal: Option<Duration>) -> SimReport {
    let mut cfg = SimConfig::metro(seed, 120);
    cfg.voters[3].role = Role::Twins;
    cfg.voters[3].twins = Some(TwinSplit {
        primary: primary.to_vec(),
        secondary: secondary.to_vec(),
        heal,
    });
    run(cfg)
}

/// Liveness with one Byzantine key: every honest voter and the sequencer's listener finalize
/// nearly all of the 120 blocks.
fn assert_live(r: &SimReport, what: &str) {
    for (i, v) in r.voters.iter().enumerate() {
        if let Some(v) = v {
            assert!(
                v.final_height >= 100,
                "{what}: voter {i} final at {}",
                v.final_height
            );
        }
    }
    assert!(
        r.seq.final_height >= 100,
        "{what}: sequencer final at {}",
        r.seq.final_height
    );
}

/// Both halves run and vote: the split is real (each half finalizes something on its side or
/// at least votes), so the test is not vacuous.
fn assert_twins_ran(r: &SimReport, what: &str) {
    let (_, p, s) = &r.twins[0];
    assert!(
        !p.votes.is_empty() || !s.votes.is_empty(),
        "{what}: neither twin half voted"
    );
}

#[test]
fn twins_never_break_safety_and_liveness_holds_in_every_split_of_the_honest_voters() {
    // Every (primary, secondary) pair of subsets of the honest {0, 1, 2} that gives each half
    // someone to talk to: disjoint and overlapping.
    let honest = [0usize, 1, 2];
    let subsets: Vec<Vec<usize>> = (1u8..8)
        .map(|m| {
            honest
                .iter()
                .copied()
                .filter(|&j| m >> j & 1 == 1)
                .collect()
        })
        .collect();
    let mut runs = 0;
    let mut evidence = 0;
    for (a, p) in subsets.iter().enumerate() {
        for s in subsets.iter().skip(a) {
            // Healing a third of the way in (eventual synchrony), or never.
            for (k, heal) in [Some(Duration::from_millis(40)), None]
                .into_iter()
                .enumerate()
            {
                let seed = 100 + runs;
                let what = format!("seed {seed}: primary {p:?} secondary {s:?} heal {heal:?}");
                let r = twins(seed, p, s, heal);
                assert_safe(&r, &what);
                assert_twins_ran(&r, &what);
                // Liveness with one Byzantine key.
                assert_live(&r, &what);
                let _ = k;
                evidence += (0..3)
                    .map(|i| r.voters[i].as_ref().unwrap().faults.len())
                    .sum::<usize>();
                runs += 1;
            }
        }
    }
    assert_eq!(runs, 56, "28 splits × heal or not");
    // The twins did equivocate: honest voters caught the key signing twice somewhere.
    println!("{runs} runs, {evidence} pieces of conflict evidence against the twin's key");
    assert!(
        evidence > 0,
        "no run produced evidence: the twins never conflicted"
    );
}

/// The sharpest split: each half holds one honest voter plus itself away from the other, and
/// the third honest voter hears both (it can count the twin's key twice in one view if anything
/// could): still one history, and the listener's final height is the honest voters'.
#[test]
fn twins_around_a_shared_voter_equivocate_without_effect() {
    for seed in [7, 8, 9] {
        let r = twins(seed, &[0, 2], &[1, 2], None);
        let what = format!("seed {seed}");
        assert_safe(&r, &what);
        let (_, p, s) = &r.twins[0];
        assert!(
            !p.votes.is_empty() && !s.votes.is_empty(),
            "{what}: both halves vote"
        );
        let fin: Vec<u64> = (0..3)
            .map(|i| r.voters[i].as_ref().unwrap().final_height)
            .collect();
        assert!(fin.iter().all(|&f| f >= 100), "{what}: {fin:?}");
        assert!(r.seq.final_height >= 100);
    }
}

/// commonware's Twins campaign (`mocks::twins::cases`, the Twins paper's generator with
/// Simplex's overlapping recipient sets): for each case, the compromised voter's key runs two
/// production voters, every engine elects the script's leader for each of the first rounds,
/// and each half exchanges votes and certificates only with the script's sets for the view a
/// message is in. Safety everywhere in every case; liveness after the prefix.
#[test]
fn scripted_twins_from_commonwares_generator_never_break_safety() {
    use commonware_consensus::simplex::mocks::twins::{cases, Framework, Mode};
    use commonware_cryptography::Signer as _;
    use rand::SeedableRng as _;
    let vs = voters();
    let parts: Vec<_> = vs.set().iter().cloned().collect();
    let mut rng = rand::rngs::StdRng::seed_from_u64(0x7715);
    let mut all = cases(
        &mut rng,
        Framework {
            participants: 4,
            faults: 1,
            rounds: 6,
            mode: Mode::Sampled,
            max_cases: 16,
        },
    );
    all.extend(cases(
        &mut rng,
        Framework {
            participants: 4,
            faults: 1,
            rounds: 6,
            mode: Mode::Sustained,
            max_cases: 8,
        },
    ));
    assert!(all.len() >= 16, "the generator gave {} cases", all.len());
    let mut twin_led = 0;
    let mut evidence = 0;
    let mut members = std::collections::BTreeSet::new();
    for (k, case) in all.iter().enumerate() {
        let c = case.compromised[0];
        let member = (0..4)
            .find(|&i| vyrn_sim::voting::voter_key(i).public_key() == parts[c])
            .expect("a voter of the set");
        members.insert(member);
        twin_led += case
            .scenario
            .rounds()
            .iter()
            .filter(|r| r.leader() == c)
            .count();
        let seed = 500 + k as u64;
        let mut cfg = SimConfig::metro(seed, 120);
        cfg.voters[member].role = Role::Twins;
        cfg.twins_script = Some(case.scenario.clone());
        let r = run(cfg);
        let what = format!("case {k} (seed {seed}): voter {member} compromised, {case:?}");
        assert_safe(&r, &what);
        assert_eq!(r.twins[0].0, member);
        assert_twins_ran(&r, &what);
        // Liveness once the scripted prefix is over.
        assert_live(&r, &what);
        evidence += r
            .voters
            .iter()
            .flatten()
            .map(|v| v.faults.len())
            .sum::<usize>();
    }
    println!(
        "{} scripted cases, compromised voters {members:?}, {twin_led} scripted rounds led by the twin's key, {evidence} pieces of conflict evidence",
        all.len()
    );
    assert!(twin_led > 0, "no case scripted the twin as a leader");
    // The halves did sign two histories somewhere: the honest voters caught the key.
    assert!(
        evidence > 0,
        "no case produced evidence: the script never split the twin"
    );
}
