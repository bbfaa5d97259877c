//! Data box failure at a replica (07 §5.7): `DataDown` gossip, the quorum that makes it
//! effective (its own silence included), the deterministic backup home, and the redirect
//! rounds.

use vyrn_replica::front::data_down::{DataDown, DownStep, GOSSIP_EVERY_NS, REDIRECT_REPEAT};

const MS: u64 = 1_000_000;

fn steps(d: &mut DataDown, now: u64) -> Vec<DownStep> {
    let mut v = Vec::new();
    d.tick(now, |s| v.push(s));
    v
}

#[test]
fn a_quorum_of_voters_with_this_replica_among_them_redirects_to_the_next_live_box() {
    // Voter 0 of 4 (Q = 3), three data boxes.
    let mut d = DataDown::new(3, 3, 0);
    // Peers alone never move this replica: it must see the silence itself.
    d.on_peer(1, 1, 0);
    d.on_peer(2, 1, 0);
    d.on_peer(3, 1, 0);
    assert!(!d.is_down(1));
    assert!(
        steps(&mut d, MS).is_empty(),
        "nothing to gossip or redirect"
    );
    // Its own silence: gossip at once; with the three peers' votes the box is down.
    d.on_own(1, 2 * MS);
    assert!(d.is_down(1));
    assert_eq!(
        steps(&mut d, 2 * MS),
        vec![DownStep::Gossip(1), DownStep::Redirect { from: 1, to: 2 }]
    );
    // Nothing more until the next round; then both again.
    assert!(steps(&mut d, 2 * MS + GOSSIP_EVERY_NS - 1).is_empty());
    assert_eq!(
        steps(&mut d, 2 * MS + GOSSIP_EVERY_NS),
        vec![DownStep::Gossip(1), DownStep::Redirect { from: 1, to: 2 }]
    );
    // The redirect is repeated REDIRECT_REPEAT rounds in all, the gossip while silent.
    let mut redirects = 2;
    let mut gossip = 2;
    for k in 2..(REDIRECT_REPEAT as u64 + 5) {
        for s in steps(&mut d, 2 * MS + k * GOSSIP_EVERY_NS) {
            match s {
                DownStep::Redirect { .. } => redirects += 1,
                DownStep::Gossip(_) => gossip += 1,
            }
        }
    }
    assert_eq!(redirects, REDIRECT_REPEAT);
    assert_eq!(gossip, REDIRECT_REPEAT + 5);
    let c = d.counters();
    assert_eq!((c.effective, c.peer_votes), (1, 3));
}

#[test]
fn fewer_than_q_votes_move_nothing_and_a_box_heard_again_withdraws_the_vote() {
    let mut d = DataDown::new(2, 3, 2);
    d.on_own(0, 0);
    d.on_peer(1, 0, 0);
    assert!(!d.is_down(0), "two votes of the three needed");
    assert_eq!(steps(&mut d, 0), vec![DownStep::Gossip(0)]);
    // It sends again: the votes are dropped, the gossip stops.
    d.on_own_up(0);
    assert!(!d.is_silent(0));
    d.on_peer(3, 0, MS);
    assert!(
        !d.is_down(0),
        "voter 3 only: the earlier votes were for a silence that ended"
    );
    assert!(steps(&mut d, GOSSIP_EVERY_NS).is_empty());
}

/// A box down by quorum that is heard again (a stall of its process, not a failure) is live
/// again for the backup rule: a later real failure of the other box still finds it.
#[test]
fn a_box_down_by_a_stall_is_live_again_when_heard_and_takes_the_next_failure() {
    let mut d = DataDown::new(2, 1, 0);
    d.on_own(1, 0);
    assert!(d.is_down(1));
    assert_eq!(
        steps(&mut d, 0),
        vec![DownStep::Gossip(1), DownStep::Redirect { from: 1, to: 0 }]
    );
    d.on_own_up(1);
    assert!(!d.is_down(1));
    assert_eq!(d.counters().recovered, 1);
    assert!(
        steps(&mut d, GOSSIP_EVERY_NS).is_empty(),
        "its redirect rounds end with the stall"
    );
    // Box 0 fails for real: box 1 is its backup.
    d.on_own(0, 2 * GOSSIP_EVERY_NS);
    assert_eq!(
        steps(&mut d, 2 * GOSSIP_EVERY_NS),
        vec![DownStep::Gossip(0), DownStep::Redirect { from: 0, to: 1 }]
    );
}

#[test]
fn the_backup_skips_down_boxes_and_a_home_with_none_left_redirects_nowhere() {
    let mut d = DataDown::new(3, 1, 0);
    assert_eq!(d.backup(2), Some(0), "cyclic, in facility order");
    d.on_own(0, 0);
    assert_eq!(d.backup(2), Some(1), "box 0 is down");
    assert_eq!(
        steps(&mut d, 0),
        vec![DownStep::Gossip(0), DownStep::Redirect { from: 0, to: 1 }]
    );
    d.on_own(1, MS);
    assert_eq!(d.backup(1), Some(2));
    d.on_own(2, MS);
    assert_eq!(d.backup(2), None);
    // Box 1's and 2's redirects find no live box: none is sent, counted once each.
    let got = steps(&mut d, MS);
    assert!(
        !got.iter()
            .any(|s| matches!(s, DownStep::Redirect { from: 1 | 2, .. })),
        "{got:?}"
    );
    assert_eq!(d.counters().no_backup, 2);
}

#[test]
fn votes_naming_no_box_of_the_home_are_counted_and_ignored() {
    let mut d = DataDown::new(2, 1, 0);
    d.on_peer(1, 9, 0);
    d.on_peer(70, 0, 0);
    d.on_own(7, 0);
    assert_eq!(d.counters().bad_votes, 2);
    assert!(!d.is_down(0) && !d.is_down(9));
    assert!(steps(&mut d, 0).is_empty());
}
