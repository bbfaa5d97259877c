//! Catch-up past the box's frame ring and the peers' memory (07 §4.10: peers serve a
//! `RepairReq` "from their in-memory frame store (REP_PEER_RING_MS) and then from their NVMe
//! order journal"). Whole homes on loopback whose box keeps a 64 KiB retransmit ring and whose
//! replicas keep frames 200 ms in memory: a replica started 2.5 s late repairs the whole stream
//! from its peers' order journals, and a journaling replica restarted takes back its own frames
//! from its own journal before asking anyone. Each ends with the others' replay, byte for byte.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use vyrn_client::loadgen::LoadCounts;
use vyrn_data::databox::DataBox;
use vyrn_replica::homekit::{load_from, start_box_with, LoopbackHome};
use vyrn_replica::node::Node;
use vyrn_seq::ports::RunningBox;

/// The homes of this file run one at a time (two whole homes at once on a 2-core machine
/// stretch a restart past the peers' memory).
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

type Replica = JoinHandle<Result<Node, String>>;

/// A dev home whose box keeps a 64 KiB retransmit ring and whose replicas keep frames in memory
/// 200 ms; replicas `journal` journal.
fn lab_home(tag: &str, base: u16, journal: Vec<usize>) -> LoopbackHome {
    let mut h = LoopbackHome::new(tag, base, false).expect("dev home");
    h.cfg.rtx_ring_bytes = 64 << 10;
    h.budgets.peer_ring_ns = 200_000_000;
    h.journal = journal;
    h
}

/// The box, the data box and seconds of load at 2,000 msgs/s (the replicas are the caller's).
struct Traffic {
    data: JoinHandle<Result<DataBox, String>>,
    running: RunningBox,
    load: JoinHandle<Result<LoadCounts, String>>,
}

impl Traffic {
    fn start(h: &LoopbackHome, stop: &Arc<AtomicBool>) -> Traffic {
        Self::start_for(h, stop, 4)
    }

    /// [`Traffic::start`] with `secs` of load.
    fn start_for(h: &LoopbackHome, stop: &Arc<AtomicBool>, secs: u64) -> Traffic {
        let data = h.spawn_databox(stop.clone()).expect("data box");
        let (running, seq) = start_box_with(&h.cfg, None).expect("box");
        let home = h.home.clone();
        let load = std::thread::spawn(move || load_from(&home, seq, 2000, secs, 7, 0, 100));
        Traffic {
            data,
            running,
            load,
        }
    }

    /// After the load, 1.5 s more for repairs; then everything stops. The replicas, stopped,
    /// in the order given.
    fn finish(self, stop: &AtomicBool, replicas: Vec<Replica>) -> Vec<Node> {
        let counts = self.load.join().expect("load thread").expect("load");
        std::thread::sleep(Duration::from_millis(1500));
        stop.store(true, Ordering::Relaxed);
        let nodes = replicas
            .into_iter()
            .map(|j| j.join().expect("replica thread").expect("replica"))
            .collect();
        let _ = self.data.join();
        self.running.runner.stop();
        assert!(counts.answered > 1000, "the home traded: {counts:?}");
        nodes
    }
}

/// `n` replayed the whole stream exactly as `first` did.
fn same_replay(n: &Node, first: &Node) {
    assert!(n.replay().responses > 1000);
    assert_eq!(n.replay().responses, first.replay().responses);
    assert_eq!(
        n.replay().digest(),
        first.replay().digest(),
        "replays differ"
    );
}

/// The fourth replica starts 2.5 s into the load. Every frame it missed is older than the
/// box's ring (`NackTooOld`) and the peers' memory, so only the three others' order journals
/// hold it: it must repair the whole stream from them. Without the journals it repairs nothing.
#[test]
fn a_replica_started_late_catches_up_from_its_peers_order_journals() {
    let _one = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let h = lab_home("catchup", 49_900, vec![0, 1, 2]);
    let stop = Arc::new(AtomicBool::new(false));
    let mut reps: Vec<Replica> = (0..3)
        .map(|i| h.spawn_replica(i, stop.clone()).expect("replica"))
        .collect();
    let t = Traffic::start(&h, &stop);
    std::thread::sleep(Duration::from_millis(2500));
    reps.push(h.spawn_replica(3, stop.clone()).expect("late replica"));
    let mut nodes = t.finish(&stop, reps);
    let late = nodes.pop().expect("the late replica");

    for n in &nodes[1..] {
        assert_eq!(n.replay().digest(), nodes[0].replay().digest());
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
    same_replay(&late, &nodes[0]);
}

/// A journaling replica stopped 2.5 s into the load and started again 100 ms later takes the
/// frames it had from its own order journal, not from the network: it asks its peers only for
/// what it lacks (its downtime, and whatever it had not received when it stopped), so they serve
/// fewer frames than it took back from its own journal — without the local feed they would
/// serve the whole stream from frame 1 (the box's ring is 64 KiB, so it cannot).
#[test]
fn a_restarted_replica_takes_its_own_frames_from_its_order_journal() {
    let _one = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let h = lab_home("ownjournal", 49_960, vec![0, 1, 2, 3]);
    let stop = Arc::new(AtomicBool::new(false));
    let stop3 = Arc::new(AtomicBool::new(false));
    let mut reps: Vec<Replica> = (0..3)
        .map(|i| h.spawn_replica(i, stop.clone()).expect("replica"))
        .collect();
    let first3 = h.spawn_replica(3, stop3.clone()).expect("replica 3");
    let t = Traffic::start(&h, &stop);
    std::thread::sleep(Duration::from_millis(2500));
    stop3.store(true, Ordering::Relaxed);
    let before = first3.join().expect("replica thread").expect("replica 3");
    let had = before.order_journal().expect("journaling").appended;
    drop(before);
    std::thread::sleep(Duration::from_millis(100));
    reps.push(h.spawn_replica(3, stop.clone()).expect("replica 3 again"));
    let mut nodes = t.finish(&stop, reps);
    let again = nodes.pop().expect("replica 3 again");

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
    // 07 §8.2: the blocks its block journal held at start gave back their payloads, and were
    // not written again.
    assert!(
        c.own_journal_payloads > 1000 && c.own_journal_unread == 0,
        "{c:?}"
    );
    let j = again.journal().expect("block journal");
    assert_eq!(j.identical(), 0, "blocks written twice");
    assert!(j.synced() > j.held_through, "it journals again: {j:?}");
    // The peers served only what it lacked.
    let served: u64 = nodes.iter().map(|n| n.store().sent).sum();
    assert!(
        served < had,
        "peers served {served} frames, it had {had}; {:?} {:?}",
        again.core().counters(),
        again.core().order_rx().counters()
    );
    same_replay(&again, &nodes[0]);
}

/// 07 §8.3: the block journal's retention ring from the home file (`[voter.N] retain_blocks`).
/// Replica 3 keeps 60 blocks per drive while the home makes hundreds: the oldest go first, the
/// journal read back holds a gap-free run up to its newest, and with no archive node in the
/// home that is the horizon, not an alarm (REP_A_ARCHIVE stays clear).
#[test]
fn the_journal_ring_keeps_the_newest_blocks_the_home_file_names() {
    let _one = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let mut h = lab_home("retain", 50_020, vec![3]);
    h.home.voters_members[3].retain_blocks = Some(60);
    let stop = Arc::new(AtomicBool::new(false));
    let reps: Vec<Replica> = (0..4)
        .map(|i| h.spawn_replica(i, stop.clone()).expect("replica"))
        .collect();
    let t = Traffic::start(&h, &stop);
    let nodes = t.finish(&stop, reps);
    let n3 = &nodes[3];
    let j = n3.journal().expect("replica 3 journals");
    let (evicted, oldest) = j.retention();
    assert!(j.synced() > 200, "the home made blocks: {}", j.synced());
    assert!(
        evicted > 100 && oldest > 100,
        "evicted {evicted}, oldest {oldest}"
    );
    assert!(
        !j.archive_alarm(),
        "no archive node: the budget is the horizon"
    );
    assert_eq!(n3.counters().archive_alarm, 0);
    let dir = h.dir.join("journal-3");
    let mut ro = vyrn_replica::disk::journal::JournalConfig::new(vec![dir]);
    ro.read_only = true;
    let (bj, _) = vyrn_replica::disk::journal::BlockJournal::open(ro).expect("read back");
    let held = bj.heights();
    assert!(
        !held.is_empty() && held.len() <= 60,
        "{} blocks held",
        held.len()
    );
    let (lo, hi) = (held[0], held[held.len() - 1]);
    assert_eq!(held, (lo..=hi).collect::<Vec<_>>(), "gap-free");
    assert!(
        hi + 5 >= j.synced(),
        "the newest kept: {hi} of {}",
        j.synced()
    );
    same_replay(n3, &nodes[0]);
}

/// 07 §7.6: a replica restarted after it took a snapshot starts its replay there, not at the
/// tenure's start. Replica 3 (Simplex, journaling, a snapshot every 200 blocks: heights 149,
/// 349, … with the dev home's roots every 50) stops once its snapshot of height 149 is on disk
/// and its root is certified, and starts again 100 ms later: the audit vouches for the file
/// against the root certificate in its cert journal, replay is restored from it and drops
/// every record and step the snapshot holds as the stream is decoded again from its start,
/// and its replay digest — carried across in the tally kept beside the file — still equals
/// the others'.
#[test]
fn a_restarted_replica_starts_its_replay_from_its_newest_snapshot() {
    restart_after_a_snapshot(false);
}

/// 07 §7.6: a snapshot that verifies but has no replay tally beside it (the digest could not go
/// on) is passed over — counted (`snapshots_skipped`, `vyrn_replica_snapshots_skipped`) and
/// said — and replay starts from the tenure's start with the same digest as the others.
#[test]
fn a_snapshot_without_its_replay_tally_is_passed_over_and_counted() {
    restart_after_a_snapshot(true);
}

fn restart_after_a_snapshot(drop_tally: bool) {
    let _one = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let (tag, port) = if drop_tally {
        ("snapskip", 50_140)
    } else {
        ("snapload", 50_080)
    };
    let mut h = LoopbackHome::new(tag, port, true).expect("dev home");
    h.journal = vec![0, 1, 2, 3];
    h.snapshots = vec![(3, 200)];
    let stop = Arc::new(AtomicBool::new(false));
    let stop3 = Arc::new(AtomicBool::new(false));
    let mut reps: Vec<Replica> = (0..3)
        .map(|i| h.spawn_replica(i, stop.clone()).expect("replica"))
        .collect();
    let first3 = h.spawn_replica(3, stop3.clone()).expect("replica 3");
    // The engines dial each other before the first block.
    std::thread::sleep(Duration::from_secs(2));
    let t = Traffic::start_for(&h, &stop, 7);
    let area = h.dir.join("journal-3").join("snapshots");
    let file = area.join(vyrn_replica::disk::snapshots::file_name(149));
    let waited = std::time::Instant::now();
    while !file.exists() && waited.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(file.exists(), "replica 3 wrote no snapshot of height 149");
    // Its root certificate: R(149) is voted within a few blocks.
    std::thread::sleep(Duration::from_millis(800));
    stop3.store(true, Ordering::Relaxed);
    let before = first3.join().expect("replica thread").expect("replica 3");
    assert!(before.counters().snapshots_written >= 1);
    drop(before);
    if drop_tally {
        // Every tally goes: each snapshot on disk is passed over.
        for e in std::fs::read_dir(&area).expect("snapshot area").flatten() {
            if e.path().extension().is_some_and(|x| x == "tally") {
                std::fs::remove_file(e.path()).expect("remove a tally");
            }
        }
    }
    std::thread::sleep(Duration::from_millis(100));
    reps.push(h.spawn_replica(3, stop.clone()).expect("replica 3 again"));
    let mut nodes = t.finish(&stop, reps);
    let again = nodes.pop().expect("replica 3 again");

    let c = again.counters();
    assert_eq!(c.snapshots_refused, 0, "{c:?}");
    let rc = again.core().replay_counters();
    if drop_tally {
        assert!(c.snapshots_skipped >= 1, "{c:?}");
        assert_eq!(c.snapshot_loaded, 0, "{c:?}");
        assert_eq!(rc.skipped, 0, "replay from the tenure's start: {rc:?}");
    } else {
        assert_eq!(c.snapshots_skipped, 0, "{c:?}");
        assert!(
            c.snapshot_loaded >= 149,
            "replay did not start from a snapshot: {c:?}"
        );
        assert!(rc.skipped > 1000, "the snapshot's prefix dropped: {rc:?}");
        if let Some(cu) = again.caught_up() {
            assert_eq!(cu.snapshot, Some(c.snapshot_loaded), "{cu:?}");
            assert_eq!(cu.first, c.snapshot_loaded + 1, "{cu:?}");
        }
    }
    for n in &nodes[1..] {
        assert_eq!(n.replay().digest(), nodes[0].replay().digest());
    }
    same_replay(&again, &nodes[0]);
}
