//! Catch-up past the box's frame ring and the peers' memory (07 §4.10: peers serve a
//! `RepairReq` "from their in-memory frame store (REP_PEER_RING_MS) and then from their NVMe
//! order journal"). A whole home on loopback — the box with a 64 KiB retransmit ring, three
//! journaling replicas whose memory keeps frames 200 ms — trades for 2.5 s before the fourth
//! replica starts. Every frame it missed is older than the box's ring (`NackTooOld`) and the
//! peers' memory, so only their order journals hold it: it must repair the whole stream from
//! them and end with the others' replay, byte for byte.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use vyrn_replica::homekit::{load_from, start_box_with, LoopbackHome};

/// The homes of this file run one at a time (two whole homes at once on a 2-core machine
/// stretch a restart past the peers' memory).
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[test]
fn a_replica_started_late_catches_up_from_its_peers_order_journals() {
    let _one = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let mut h = LoopbackHome::new("catchup", 49_900, false).expect("dev home");
    h.cfg.rtx_ring_bytes = 64 << 10;
    h.budgets.peer_ring_ns = 200_000_000;
    h.journal = vec![0, 1, 2];
    let stop = Arc::new(AtomicBool::new(false));
    let early: Vec<_> = (0..3)
        .map(|i| h.spawn_replica(i, stop.clone()).expect("replica"))
        .collect();
    let data = h.spawn_databox(stop.clone()).expect("data box");
    let (running, seq) = start_box_with(&h.cfg, None).expect("box");
    let load = {
        let home = h.home.clone();
        std::thread::spawn(move || load_from(&home, seq, 2000, 4, 1500, 7, 0))
    };
    std::thread::sleep(Duration::from_millis(2500));
    let late = h.spawn_replica(3, stop.clone()).expect("late replica");
    let counts = load.join().expect("load thread").expect("load");
    // Time for the late replica to finish what it repairs.
    std::thread::sleep(Duration::from_millis(1500));
    stop.store(true, Ordering::Relaxed);
    let nodes: Vec<_> = early
        .into_iter()
        .map(|j| j.join().expect("replica thread").expect("replica"))
        .collect();
    let late = late.join().expect("replica thread").expect("late replica");
    let _ = data.join();
    running.runner.stop();

    assert!(counts.answered > 1000, "the home traded: {counts:?}");
    let first = &nodes[0];
    for n in &nodes[1..] {
        assert_eq!(n.replay().digest(), first.replay().digest());
    }
    // The late replica was told its first frames had left the box's ring, and repaired them
    // from its peers.
    let c = late.counters();
    let rx = late.core().order_rx().counters();
    assert!(c.too_old > 0, "the box never said NackTooOld: {c:?}");
    assert!(rx.repaired > 100, "repaired {}", rx.repaired);
    // What the peers sent older than their memory came from their order journals.
    let from_journal: u64 = nodes.iter().map(|n| n.store().from_journal).sum();
    assert!(from_journal > 100, "served from journals: {from_journal}");
    for n in &nodes {
        let o = n.order_journal().expect("journaling");
        assert!(o.appended > 1000, "{o:?}");
        assert_eq!((o.corrupt, o.io_errors), (0, 0), "{o:?}");
    }
    // And it replayed the whole stream as the others did.
    assert!(late.replay().responses > 1000);
    assert_eq!(late.replay().responses, first.replay().responses);
    assert_eq!(
        late.replay().digest(),
        first.replay().digest(),
        "the late replica's replay differs"
    );
}

/// A journaling replica stopped 2.5 s into the load and started again 100 ms later takes the
/// frames it had from its own order journal, not from the network: it asks its peers only for
/// what it lacks (its downtime, and whatever it had not received when it stopped), so they serve
/// fewer frames than it took back from its own journal — without the local feed they would
/// serve the whole stream from frame 1 (the box's ring is 64 KiB, so it cannot). It ends with
/// the others' replay.
#[test]
fn a_restarted_replica_takes_its_own_frames_from_its_order_journal() {
    let _one = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let mut h = LoopbackHome::new("ownjournal", 49_960, false).expect("dev home");
    h.cfg.rtx_ring_bytes = 64 << 10;
    h.budgets.peer_ring_ns = 200_000_000;
    h.journal = vec![0, 1, 2, 3];
    let stop = Arc::new(AtomicBool::new(false));
    let stop3 = Arc::new(AtomicBool::new(false));
    let peers: Vec<_> = (0..3)
        .map(|i| h.spawn_replica(i, stop.clone()).expect("replica"))
        .collect();
    let first3 = h.spawn_replica(3, stop3.clone()).expect("replica 3");
    let data = h.spawn_databox(stop.clone()).expect("data box");
    let (running, seq) = start_box_with(&h.cfg, None).expect("box");
    let load = {
        let home = h.home.clone();
        std::thread::spawn(move || load_from(&home, seq, 2000, 4, 1500, 7, 0))
    };
    std::thread::sleep(Duration::from_millis(2500));
    stop3.store(true, Ordering::Relaxed);
    let before = first3.join().expect("replica thread").expect("replica 3");
    let had = before.order_journal().expect("journaling").appended;
    drop(before);
    std::thread::sleep(Duration::from_millis(100));
    let again = h.spawn_replica(3, stop.clone()).expect("replica 3 again");
    let counts = load.join().expect("load thread").expect("load");
    std::thread::sleep(Duration::from_millis(1500));
    stop.store(true, Ordering::Relaxed);
    let nodes: Vec<_> = peers
        .into_iter()
        .map(|j| j.join().expect("replica thread").expect("replica"))
        .collect();
    let again = again
        .join()
        .expect("replica thread")
        .expect("replica 3 again");
    let _ = data.join();
    running.runner.stop();

    assert!(counts.answered > 1000, "the home traded: {counts:?}");
    assert!(
        had > 1000,
        "replica 3 journaled {had} frames before it stopped"
    );
    let c = again.counters();
    let o = again.order_journal().expect("journaling");
    assert_eq!(
        c.own_journal_frames, had,
        "it took back every frame it had journaled: {o:?}"
    );
    assert_eq!(o.recovered, had);
    // The peers served only what it lacked.
    let served: u64 = nodes.iter().map(|n| n.store().sent).sum();
    assert!(served < had, "peers served {served} frames, it had {had}");
    let first = &nodes[0];
    assert!(again.replay().responses > 1000);
    assert_eq!(again.replay().responses, first.replay().responses);
    assert_eq!(
        again.replay().digest(),
        first.replay().digest(),
        "the restarted replica's replay differs"
    );
}
