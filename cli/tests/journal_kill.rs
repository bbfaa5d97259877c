//! A kill -9 of a replica process mid-write (07 §14 NVMe row, §8.2): replica 3
//! runs as its own `vyrn replica` process with a two-drive journal in a home whose other roles
//! run in this test (the box, the data box, replicas 0–2, the client load); it is killed with
//! SIGKILL while it journals a block every few ms. Its journal, reopened as recovery opens it,
//! serves every block up to the highest height the process had reported durable and beyond —
//! contiguous from height 1, each record's `seq_sig` valid and its ORDER bytes hashing to its
//! header's `order_root` — and nothing it cannot verify. The process then restarts on the same
//! journal and reports what it recovered.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use vyrn_replica::disk::journal::{BlockJournal, JournalConfig};
use vyrn_replica::disk::record::order_matches;
use vyrn_replica::homekit::LoopbackHome;
use vyrn_wire::msg::journal::BlockRecordRef;

fn replica_proc(
    conf: &std::path::Path,
    dir: &std::path::Path,
    drives: &str,
    secs: u64,
) -> std::process::Child {
    Command::new(env!("CARGO_BIN_EXE_vyrn"))
        .arg("replica")
        .arg("--home")
        .arg(conf)
        .args(["--index", "3", "--key"])
        .arg(dir.join("keys/voter-3.key"))
        .args(["--journal", drives, "--secs", &secs.to_string()])
        // Its peers here are in-process interim voters (no consensus engines).
        .arg("--interim-voter")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("vyrn replica starts")
}

#[test]
fn a_replica_killed_mid_write_recovers_every_durable_block_and_serves_nothing_corrupt() {
    // The in-process home the replica crate's whole-home tests share (`homekit`): 5 ms blocks,
    // the interim voter.
    let h = LoopbackHome::new("kill", 28_400, false).expect("dev home");
    let (dir, conf, cfg, home) = (h.dir.clone(), h.file.clone(), &h.cfg, &h.home);
    let drives = [dir.join("j3-0"), dir.join("j3-1")];
    let drives_arg = format!("{},{}", drives[0].display(), drives[1].display());

    let stop = Arc::new(AtomicBool::new(false));
    // Replica 3 as a process, reporting "journal synced to N" once a second.
    let mut child = replica_proc(&conf, &dir, &drives_arg, 60);
    let synced = Arc::new(AtomicU64::new(0));
    let out = child.stdout.take().expect("stdout");
    let s2 = synced.clone();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            if let Some(x) = line.split("journal synced to ").nth(1) {
                if let Some(n) = x
                    .split_whitespace()
                    .next()
                    .and_then(|n| n.parse::<u64>().ok())
                {
                    s2.fetch_max(n, Ordering::Relaxed);
                }
            }
        }
    });
    // Replicas 0..=2 and the data box in this process.
    let replicas: Vec<_> = (0..3)
        .map(|i| h.spawn_replica(i, stop.clone()).expect("replica"))
        .collect();
    let databox = h.spawn_databox(stop.clone()).expect("data box");
    std::thread::sleep(Duration::from_millis(300));
    let (running, seq) = vyrn_replica::homekit::start_box(cfg).expect("box");
    let counts = vyrn_replica::homekit::load_from(home, seq, 2000, 2, 3, 0, 100).expect("load");
    assert!(counts.fin > 0, "nothing final: {:?}", counts.fin);

    // Mid-write: the box closes a block every 5 ms and the process journals each one.
    let reported = synced.load(Ordering::Relaxed);
    child.kill().expect("SIGKILL");
    let _ = child.wait();
    let _ = reader.join();
    // io_uring writes in flight at the kill may still land after the process is reaped (the
    // ring's teardown finishes them on a kernel worker): let them, so the recovery below and the
    // restarted process's see the same files (a restart that counted one block more failed
    // this test once).
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        reported > 50,
        "the process reported only {reported} durable blocks"
    );

    let mut jc = JournalConfig::new(drives.to_vec());
    jc.verifying_key = Some(home.seq_pub);
    let (mut j, report) = BlockJournal::open(jc.clone()).expect("recovery");
    let heights = j.heights();
    let top = *heights.last().expect("blocks recovered");
    assert!(
        top >= reported,
        "recovered to {top}, but {reported} was reported durable"
    );
    // Every height reported durable is there, with no hole. Above it, the kill may have cut
    // a batch of writes to the two drives out of order (io_uring completes a batch in any
    // order): a verified block past a missing one was never reported durable, and is kept.
    assert_eq!(
        heights
            .iter()
            .copied()
            .filter(|&h| h <= reported)
            .collect::<Vec<_>>(),
        (1..=reported).collect::<Vec<_>>(),
        "a hole among the heights reported durable"
    );
    assert_eq!(report.blocks, heights.len() as u64);
    let mut with_packets = 0;
    for &h in &heights {
        let buf = j.read(h).expect("a recovered block reads back");
        let rec = BlockRecordRef::parse(&buf).expect("parses").to_record();
        assert_eq!(rec.header.height, h);
        assert!(rec.header.verify(&home.seq_pub), "seq_sig of {h}");
        assert!(
            order_matches(&rec),
            "block {h}'s ORDER bytes do not hash to its order_root"
        );
        let packets = rec.data.len();
        with_packets += usize::from(packets > 0);
        assert!(
            rec.pkt_hashes.is_empty() == (packets == 0),
            "block {h}: hashes without packets or packets without hashes"
        );
    }
    assert!(
        with_packets > 10,
        "only {with_packets} recovered blocks carry packets"
    );
    drop(j);

    // The process restarts on the same journal and recovers it.
    let mut again = replica_proc(&conf, &dir, &drives_arg, 1);
    let out = again.stdout.take().expect("stdout");
    let lines: Vec<String> = BufReader::new(out).lines().map_while(Result::ok).collect();
    let _ = again.wait();
    let rec_line = lines
        .iter()
        .find(|l| l.contains("journal on 2 drive(s): recovered"))
        .expect("the restarted replica reports its recovery");
    assert!(
        rec_line.contains(&format!("recovered {} blocks", heights.len())),
        "{rec_line}"
    );

    stop.store(true, Ordering::Relaxed);
    for r in replicas {
        let _ = r.join();
    }
    let _ = databox.join();
    running.runner.stop();
    let _ = std::fs::remove_dir_all(&dir);
}
