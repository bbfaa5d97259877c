//! `vyrn up` end to end: a whole home on loopback as separate processes for a
//! bounded time — orders acked and filled, every fill durable and final, every replica's replay
//! digest equal, the journaling replica's journal and certificates verifying — and its report
//! (with the ping phase's round trips) and plots in the run's directory.

use std::path::PathBuf;
use std::process::Command;
use std::sync::Mutex;

/// One `vyrn up` at a time: each is a whole home (six processes) on this machine's cores.
static ONE_HOME: Mutex<()> = Mutex::new(());

/// A `vyrn up` run that must succeed: `args` after `up`, its ports from `base` (metrics at
/// `base + 90`), in a fresh work directory named by `tag`. Returns the work directory, the
/// run's directory and stdout; the caller removes the work directory.
fn up_ok(tag: &str, base: u16, args: &[&str]) -> (PathBuf, PathBuf, String) {
    let dir = std::env::temp_dir().join(format!("vyrn-up-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let out = Command::new(env!("CARGO_BIN_EXE_vyrn"))
        .arg("up")
        .args(args)
        .args(["--plain", "--base-port", &base.to_string()])
        .args(["--metrics-port", &(base + 90).to_string(), "--dir"])
        .arg(&dir)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{out:?}\n{stdout}");
    let run = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("run-"))
        })
        .expect("a run directory");
    (dir, run, stdout)
}

/// The number right after the last `key` in `s` (a counter in a status line).
fn num_after(s: &str, key: &str) -> Option<u64> {
    let tail = &s[s.rfind(key)? + key.len()..];
    tail.split(|c: char| !c.is_ascii_digit())
        .next()?
        .parse()
        .ok()
}

/// Column `col` of each replica's row of the report's Replicas table in `text` (the rows
/// after its `## Replicas` heading: the Failover section's stage table has rows per replica too).
fn replica_column(text: &str, col: usize) -> Vec<&str> {
    let table = text.find("## Replicas").map_or(text, |i| &text[i..]);
    table
        .lines()
        .take_while(|l| !l.starts_with("## Journals"))
        .filter(|l| l.starts_with("| replica ") && !l.contains("replay digest"))
        .map(|l| l.split('|').nth(col).unwrap().trim())
        .collect()
}

#[test]
fn vyrn_up_runs_a_home_that_keeps_its_promises_and_writes_a_report() {
    let _one = ONE_HOME.lock().unwrap_or_else(|e| e.into_inner());
    let (dir, run, stdout) = up_ok("main", 29_400, &["--duration", "3", "--rate", "1000"]);
    let report = std::fs::read_to_string(run.join("report.md")).unwrap();
    assert!(report.contains("OK: the home traded"), "{report}");
    assert!(report.contains("certificates verify, 0 bad"), "{report}");
    // 07 §8.2: every voter journals (a final block on Q replicas' drives), and each journal
    // verifies read-only with nothing refused.
    let journals = report
        .lines()
        .filter(|l| {
            l.starts_with("- replica ") && l.contains(" 0 refused at recovery, 0 unreadable")
        })
        .count();
    assert_eq!(journals, 4, "{report}");
    // State roots (07 §7.4) certify in the run: a dev home roots once a second, the run is
    // longer than 3 s, so each replica formed root certificates and the journal holds them.
    let roots: Vec<u64> = replica_column(&report, 4)
        .iter()
        .map(|c| c.parse().unwrap_or(0))
        .collect();
    assert_eq!(roots.len(), 4, "{report}");
    assert!(
        roots.iter().all(|&n| n >= 1),
        "root certs {roots:?}\n{report}"
    );
    // 07 §7.3: each replica's replay lag in time, from its status line.
    let lags = replica_column(&report, 5);
    assert!(
        lags.len() == 4
            && lags
                .iter()
                .all(|l| l.ends_with(" ms") && l.matches(" / ").count() == 2),
        "replay lag {lags:?}\n{report}"
    );
    assert!(!report.contains(" 0 root certificates verify"), "{report}");
    // 07 §7.5: the journaling replica's snapshot area is audited; nothing in it is refused.
    assert!(
        report.contains("snapshots (07 §7.5): ") && report.contains(", 0 refused"),
        "{report}"
    );
    // 07 §6.8: the standby's finality listener heard the voters too (the verdict demands its
    // final height reach the box's).
    assert!(
        report.contains("## The standby (") && !report.contains("standby: final height 0 "),
        "{report}"
    );
    // 07 §9.5: the standby's non-voting replica replayed the same responses as the voters.
    let digest = replica_column(&report, 2);
    let standby_row = report
        .lines()
        .find(|l| l.starts_with("| standby |"))
        .unwrap_or_else(|| panic!("no standby row\n{report}"));
    assert_eq!(
        standby_row.split('|').nth(2).map(str::trim),
        digest.first().copied(),
        "{report}"
    );
    // The ping phase first: one request in flight, its round trips reported.
    assert!(
        report.contains("## Ping") && report.contains("ping request -> answer p50"),
        "{report}"
    );
    for f in [
        "rates.svg",
        "latency.svg",
        "final_lag.svg",
        "latency_distribution.svg",
    ] {
        let svg = std::fs::read_to_string(run.join(f)).unwrap();
        assert!(svg.starts_with("<svg") && svg.contains("polyline"), "{f}");
    }
    for log in [
        "seq.log",
        "data-0.log",
        "load.log",
        "replica-0.log",
        "replica-3.log",
    ] {
        assert!(run.join(log).exists(), "{log}");
    }
    // The view's lines went out once a second.
    assert!(
        stdout.lines().filter(|l| l.starts_with('[')).count() >= 3,
        "{stdout}"
    );
    // ... with the journal's write rate (the journaling replica synced during the load).
    assert!(
        stdout
            .lines()
            .any(|l| l.starts_with('[') && l.contains(" MB/s") && !l.contains("journal 0.00 MB/s")),
        "{stdout}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// 07 §14 "path down": path B cut at every replica 2 s in — each raises REP_A_PATH for B (seen
/// by `vyrn up` in their metrics), and the home goes on trading on path A with nothing lost.
#[test]
fn with_one_replication_path_cut_trading_goes_on_and_the_replicas_raise_rep_a_path() {
    let _one = ONE_HOME.lock().unwrap_or_else(|e| e.into_inner());
    let (dir, _run, stdout) = up_ok(
        "cut",
        29_600,
        &["--duration", "4", "--rate", "1000", "--cut-path", "B@2"],
    );
    assert!(stdout.contains("OK: the home traded"), "{stdout}");
    let alarms = stdout
        .split("## Alarms")
        .nth(1)
        .and_then(|s| s.split("## Over time").next())
        .unwrap_or("");
    assert!(
        alarms.contains("REP_A_PATH") && alarms.contains("role=\"replica\",path=\"B\""),
        "{alarms}"
    );
    assert!(!alarms.contains("path=\"A\""), "{alarms}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A misbehaving client (`docs/wire.md` "What the box logs"): beside the load, one session sends
/// resends of 2- and 10-message packets, packets ahead of sequence (BAD_SEQ) and their fill-ins,
/// exact and conflicting duplicates under one `pkt_seq`, refused messages, and 16-message,
/// count-0 and reserved-bit packets no lane logs — every role stays up, every block is voted and
/// final (every fill of the load final, the box's final height with its closed one), the four
/// replicas replay the same responses, and the session's next valid packet is answered.
#[test]
fn a_misbehaving_client_does_not_stop_finality() {
    let _one = ONE_HOME.lock().unwrap_or_else(|e| e.into_inner());
    let (dir, run, stdout) = up_ok(
        "misbehave",
        29_850,
        &["--duration", "5", "--rate", "1000", "--misbehave"],
    );
    let report = std::fs::read_to_string(run.join("report.md")).unwrap();
    assert!(report.contains("OK: the home traded"), "{report}");
    assert!(
        report.contains("## Misbehaving client")
            && report.contains("misbehave: the session's next valid packet"),
        "{report}"
    );
    // It sent every kind, many times: "misbehave: N rounds, N packets sent (new N, duplicates
    // N, ahead of sequence N, unloggable N), …".
    let line = report
        .lines()
        .find(|l| l.starts_with("misbehave: ") && l.contains(" rounds, "))
        .unwrap_or_else(|| panic!("{report}"));
    let rounds = num_after(line.split(" rounds").next().unwrap(), "misbehave: ").unwrap_or(0);
    let dups = num_after(line.split(", ahead").next().unwrap(), "duplicates ").unwrap_or(0);
    let gaps = num_after(line.split(", unloggable").next().unwrap(), "sequence ").unwrap_or(0);
    assert!(rounds >= 20 && dups >= 100 && gaps >= 20, "{line}");
    // Equal replay digests: one value in the digest column for all four.
    let digests = replica_column(&report, 2);
    assert_eq!(digests.len(), 4, "{report}");
    assert!(digests.iter().all(|d| *d == digests[0]), "{digests:?}");
    assert!(stdout.contains("OK: the home traded"), "{stdout}");
    // Security review F13: the data box's CopyConflict reports for the conflicting duplicates
    // reach the box (sealed), each with its evidence frame.
    let seq_log = std::fs::read_to_string(run.join("seq.log")).unwrap();
    let conflicts = num_after(&seq_log, "copy conflicts ").unwrap_or(0);
    let evidence = num_after(&seq_log, "(evidence ").unwrap_or(0);
    assert!(conflicts >= 1 && evidence == conflicts, "{seq_log}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The security review's single-datagram attacks (`vyrn up --attack`, root: a raw
/// socket spoofs the sources): DATA_HB at data_seq u64::MAX to every replica from the data
/// box's address (F1), forged far-ahead "repairs" from peers' addresses (F2), a Diverge
/// without evidence and one with garbage signatures from a voter's address (F3), a stranger's
/// DataFetch and DataDowns at the data box (F4), a NACK for 1..=u64::MAX (F5), an unsigned
/// NackTooOld from the box's address (F17), spoofed `[0,0]` RepAcks (bare and sealed under a
/// made-up key) and `DataDown`s from every voter's own addresses (F9) — three bursts; the home
/// keeps trading, every fill durable and final, the four replicas replay the same responses, no
/// divergence halt, the box and the data box refused the spoofed voter messages unread, and no
/// data box was marked down.
#[test]
fn single_datagram_attacks_do_not_stop_the_home() {
    let _one = ONE_HOME.lock().unwrap_or_else(|e| e.into_inner());
    let (dir, run, stdout) = up_ok(
        "attack",
        29_880,
        &["--duration", "6", "--rate", "1000", "--attack", "2"],
    );
    let report = std::fs::read_to_string(run.join("report.md")).unwrap();
    assert!(report.contains("OK: the home traded"), "{report}");
    assert!(
        report.contains("Fault injected (docs/security.md)"),
        "{report}"
    );
    assert_eq!(
        stdout.matches("vyrn up: attack burst").count(),
        3,
        "{stdout}"
    );
    let digests = replica_column(&report, 2);
    assert_eq!(digests.len(), 4, "{report}");
    assert!(digests.iter().all(|d| *d == digests[0]), "{digests:?}");
    let seq_log = std::fs::read_to_string(run.join("seq.log")).unwrap();
    assert!(seq_log.contains("divergence halts 0"), "{seq_log}");
    // F9: 3 bursts × 4 voters: the bare acks and the sealed forgeries, refused unread.
    let refused = |what: &str| -> u64 {
        seq_log
            .split(what)
            .nth(1)
            .and_then(|r| {
                r.split(|c: char| !c.is_ascii_digit())
                    .find(|t| !t.is_empty())
            })
            .and_then(|t| t.parse().ok())
            .unwrap_or(0)
    };
    assert!(refused("control unsealed ") >= 12, "{seq_log}");
    assert!(refused("(bad seal ") >= 12, "{seq_log}");
    let data_log = std::fs::read_to_string(run.join("data-0.log")).unwrap();
    assert!(data_log.contains("ctrl_unsealed"), "{data_log}");
    assert!(!data_log.contains("boxes down 1"), "{data_log}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The netns lab: `deploy/lab/netns.sh` builds the home's boxes as network
/// namespaces on three separate networks — facility, path A, path B — each path with a metro
/// delay of 500 µs one way (`tc netem` where the kernel has it, else `vyrn lab-delay`), and
/// `vyrn up --netns` runs every role in its own. The home trades over real (virtual) links: the
/// box binds its facility address, sends each path's multicast from its own interface on that
/// path's network, every voter joins on its own, every frame crosses the delay; then path B's
/// whole network goes down (its bridge, 07 §14 "path down" as the wire sees it): every replica
/// raises REP_A_PATH for B, none for A, and the home trades on with nothing lost. The lab is
/// taken down at the end, whatever happens.
#[test]
fn in_the_netns_lab_a_home_trades_across_separate_networks_and_survives_a_path_network_down() {
    let _one = ONE_HOME.lock().unwrap_or_else(|e| e.into_inner());
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/lab/netns.sh");
    struct Lab(PathBuf);
    impl Drop for Lab {
        fn drop(&mut self) {
            let _ = Command::new(&self.0).arg("down").output();
        }
    }
    let _ = Command::new(&script).arg("down").output();
    let built = Command::new(&script)
        .arg("up")
        .env("DELAY_US", "500")
        .env("VYRN", env!("CARGO_BIN_EXE_vyrn"))
        .output()
        .unwrap();
    assert!(
        built.status.success(),
        "the lab needs root and iproute2 (ip netns, veth, bridge): {built:?}"
    );
    let lab = Lab(script.clone());
    let how = String::from_utf8_lossy(&built.stdout).into_owned();
    assert!(how.contains("paths: 500 µs one way"), "{how}");
    let (dir, run, stdout) = up_ok(
        "netns",
        29_300,
        &[
            "--netns",
            "--duration",
            "5",
            "--rate",
            "1000",
            "--cut-path",
            "B@2",
        ],
    );
    assert!(stdout.contains("OK: the home traded"), "{stdout}");
    assert!(stdout.contains("path B's network taken down"), "{stdout}");
    let seq = std::fs::read_to_string(run.join("seq.log")).unwrap();
    assert!(
        seq.contains("control port 10.77.0.1:") && seq.contains("on the paths' own interfaces"),
        "{seq}"
    );
    // Both paths carried frames to every voter before the cut (B's copies are mostly the
    // second to arrive: counted as duplicates of A's).
    for i in 0..4 {
        let log = std::fs::read_to_string(run.join(format!("replica-{i}.log"))).unwrap();
        let b_before_cut = log
            .lines()
            .filter_map(|l| l.split("frames A/B ").nth(1))
            .filter_map(|r| r.split(' ').next())
            .filter_map(|ab| ab.split_once('/'))
            .filter_map(|(a, b)| Some((a.parse::<u64>().ok()?, b.parse::<u64>().ok()?)))
            .any(|(a, b)| a > 0 && b > 0);
        let dups_b = log.lines().any(|l| {
            l.split("(dups ")
                .nth(1)
                .and_then(|r| r.split(',').next())
                .and_then(|d| d.split_once('/'))
                .is_some_and(|(_, b)| b.parse::<u64>().is_ok_and(|b| b > 0))
        });
        assert!(
            b_before_cut || dups_b,
            "replica {i} saw nothing on path B:\n{log}"
        );
    }
    let alarms = stdout
        .split("## Alarms")
        .nth(1)
        .and_then(|s| s.split("## Over time").next())
        .unwrap_or("");
    for i in 0..4 {
        assert!(
            alarms.contains(&format!(
                "replica {i}: {{alarm=\"REP_A_PATH\",role=\"replica\",path=\"B\"}}"
            )),
            "replica {i}: {alarms}"
        );
    }
    assert!(!alarms.contains("path=\"A\""), "{alarms}");
    // The bridge is back up after the run.
    let br = Command::new("ip")
        .args(["-n", "vyrn-hub", "-br", "link", "show", "br2"])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&br.stdout).contains("UP"), "{br:?}");
    let report = std::fs::read_to_string(run.join("report.md")).unwrap();
    assert!(report.contains("path delay: 500 µs one way"), "{report}");
    // Where the delay was the relay's, every path frame went through it and was held at least
    // the delay (its own measurement, printed when the lab goes down).
    drop(lab);
    if how.contains("vyrn lab-delay") {
        for net in [1, 2] {
            let log = std::fs::read_to_string(format!("/run/vyrn-lab/delay-{net}.log")).unwrap();
            let line = log
                .lines()
                .find(|l| l.contains(&format!("x{net}s -> x{net}v:")))
                .unwrap_or_else(|| panic!("{log}"));
            let num = |after: &str| -> u64 {
                line.split(after)
                    .nth(1)
                    .unwrap()
                    .split_whitespace()
                    .next()
                    .unwrap()
                    .parse()
                    .unwrap()
            };
            assert!(num(&format!("x{net}v: ")) > 1000, "{line}");
            assert!(num("held p50 ") >= 500, "{line}");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// `vyrn up --netns` with the lab down is refused before any role starts, naming the missing
/// namespaces and the command that builds them.
#[test]
fn netns_without_the_lab_is_refused_with_how_to_build_it() {
    let _one = ONE_HOME.lock().unwrap_or_else(|e| e.into_inner());
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/lab/netns.sh");
    let _ = Command::new(&script).arg("down").output();
    let dir = std::env::temp_dir().join(format!("vyrn-up-nolab-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let out = Command::new(env!("CARGO_BIN_EXE_vyrn"))
        .args(["up", "--netns", "--duration", "1", "--plain"])
        .args(["--base-port", "29300", "--metrics-port", "29390", "--dir"])
        .arg(&dir)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(
        err.contains("the lab is not up")
            && err.contains("vyrn-hub")
            && err.contains("deploy/lab/netns.sh up"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// `--profile ref`: the REF core maps — the box with one pinned core per
/// tile, each replica, data box and the load on cores of their own. On a machine with the cores
/// (a REF box) the home must trade and keep its promises; on one without (this 2-core machine,
/// CI) it is refused before anything starts or is written, naming the cores needed and those
/// this process may use.
#[test]
fn profile_ref_runs_on_a_box_with_the_cores_and_is_refused_clearly_elsewhere() {
    let _one = ONE_HOME.lock().unwrap_or_else(|e| e.into_inner());
    let cpus = core_affinity::get_core_ids().map_or(0, |v| v.len());
    if cpus >= 30 {
        let (dir, _run, stdout) = up_ok(
            "ref",
            29_000,
            &["--profile", "ref", "--duration", "5", "--rate", "5000"],
        );
        assert!(stdout.contains("OK: the home traded"), "{stdout}");
        let _ = std::fs::remove_dir_all(&dir);
        return;
    }
    let dir = std::env::temp_dir().join(format!("vyrn-up-ref-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let out = Command::new(env!("CARGO_BIN_EXE_vyrn"))
        .args(["up", "--profile", "ref", "--duration", "1", "--plain"])
        .args(["--base-port", "29000", "--metrics-port", "29090", "--dir"])
        .arg(&dir)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(
        err.contains("--profile ref needs 30 cores")
            && err.contains(&format!("this process may run on {cpus} ")),
        "{err}"
    );
    assert!(
        !dir.exists(),
        "nothing is written when the placement is refused"
    );
}

/// `--restart-replica` names a replica of the home and a time: a wrong index or a malformed
/// value is refused before any role starts, with a message that says what is wrong.
#[test]
fn a_restart_of_a_replica_the_home_lacks_is_refused() {
    let dir = std::env::temp_dir().join(format!("vyrn-up-bad-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let out = Command::new(env!("CARGO_BIN_EXE_vyrn"))
        .args([
            "up",
            "--duration",
            "1",
            "--plain",
            "--restart-replica",
            "9@1",
        ])
        .args(["--base-port", "29600", "--metrics-port", "29690", "--dir"])
        .arg(&dir)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--restart-replica 9: the home has 4 replicas"),
        "{err}"
    );
    // Killing a data box needs a backup: a one-box home refuses it.
    let out = Command::new(env!("CARGO_BIN_EXE_vyrn"))
        .args(["up", "--duration", "1", "--plain", "--kill-data", "0@1"])
        .args(["--base-port", "29600", "--metrics-port", "29690", "--dir"])
        .arg(&dir)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--kill-data 0: the home has 1 data box(es)"),
        "{out:?}"
    );
    let out = Command::new(env!("CARGO_BIN_EXE_vyrn"))
        .args(["up", "--restart-replica", "1-3"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("I@SECS"));
    let _ = std::fs::remove_dir_all(&dir);
}

/// 07 §14 "replica crash": replica 1 SIGKILLed 3 s into 8 s of load (3000 msgs/s: a margin for
/// slower CI machines) and started again a second later on the same files. The other three keep
/// Q and the home trades on; the restarted one repairs what it missed — the sequencer's
/// retransmissions unicast to it (07 §4.10), window by window, its data box's history by range —
/// and ends with the others' replay digest (the verdict demands it). The unicast and windowed
/// repair each have a test that fails without them (seq/tests/ports.rs, replica/tests/order_rx.rs);
/// the runs that failed without them are in docs/operator.md.
#[test]
fn a_replica_killed_and_restarted_catches_up_with_the_same_replay() {
    let _one = ONE_HOME.lock().unwrap_or_else(|e| e.into_inner());
    let (dir, run, stdout) = up_ok(
        "restart",
        29_700,
        &[
            "--duration",
            "8",
            "--rate",
            "3000",
            "--restart-replica",
            "1@3",
        ],
    );
    assert!(stdout.contains("OK: the home traded"), "{stdout}");
    let digests = replica_column(&stdout, 2);
    assert_eq!(digests.len(), 4, "{stdout}");
    assert!(digests.iter().all(|d| *d == digests[0]), "{digests:?}");
    assert!(run.join("replica-1-restarted.log").exists());
    // 07 §7.6: the restarted replica measured its catch-up: it replayed the stream from its
    // first block up to the home's final height faster than the home makes blocks.
    let report = std::fs::read_to_string(run.join("report.md")).unwrap();
    let line = report
        .lines()
        .find(|l| l.starts_with("Catch-up (07 §7.6): replica 1 replayed blocks "))
        .unwrap_or_else(|| panic!("no catch-up line\n{report}"));
    let ratio: f64 = line
        .split("blocks/s, ")
        .nth(1)
        .and_then(|s| s.split('x').next())
        .and_then(|x| x.parse().ok())
        .unwrap_or_else(|| panic!("{line}"));
    assert!(ratio > 1.0, "{line}");
    // The catch-up came unicast: the box counted its retransmissions to the NACK's sender,
    // and a healthy replica saw none of them.
    let seq = std::fs::read_to_string(run.join("seq.log")).unwrap();
    let unicast: u64 = seq
        .split("retransmissions unicast ")
        .nth(1)
        .and_then(|s| s.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    assert!(unicast > 1000, "retransmissions unicast {unicast}\n{seq}");
    let healthy = std::fs::read_to_string(run.join("replica-0.log")).unwrap();
    assert!(healthy.contains("repaired 0 (dups 0)"), "{healthy}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// 07 §7.6 "new box with an empty disk": replica 3 SIGKILLed 3 s into the load and started
/// again on an empty disk (`--wipe`: no block or cert journal, no snapshot, no consensus
/// partition). It takes the tenure's frames back from its peers' journals and the box, the
/// payloads from its peers and the box, votes again, journals afresh (the verdict opens its new
/// journal), and ends with the others' replay digest. No voter takes the load of serving it for
/// a sequencer fault (a voter's own loop lag is not REP_E_HASHLAG: the hash-lag wait runs on
/// frame arrivals).
#[test]
fn a_wiped_replica_catches_up_from_its_peers_and_votes_again() {
    let _one = ONE_HOME.lock().unwrap_or_else(|e| e.into_inner());
    let (dir, run, stdout) = up_ok(
        "wipe",
        29_720,
        &[
            "--duration",
            "8",
            "--rate",
            "1000",
            "--restart-replica",
            "3@3",
            "--wipe",
        ],
    );
    assert!(stdout.contains("OK: the home traded"), "{stdout}");
    assert!(stdout.contains("replica 3 wiped"), "{stdout}");
    let digests = replica_column(&stdout, 2);
    assert_eq!(digests.len(), 4, "{stdout}");
    assert!(digests.iter().all(|d| *d == digests[0]), "{digests:?}");
    let report = std::fs::read_to_string(run.join("report.md")).unwrap();
    assert!(report.contains("on an empty disk"), "{report}");
    assert!(
        report.contains("Catch-up (07 §7.6): replica 3 replayed blocks 1..="),
        "{report}"
    );
    let log = std::fs::read_to_string(run.join("replica-3-restarted.log")).unwrap();
    assert!(
        log.contains("recovered 0 blocks up to height 0"),
        "not an empty disk: {log}"
    );
    let last = log
        .lines()
        .rev()
        .find(|l| l.starts_with("frames A/B "))
        .unwrap_or("");
    assert!(num_after(last, "votes out ").unwrap_or(0) > 0, "{last}");
    assert!(num_after(last, "appended ").unwrap_or(0) > 100, "{last}");
    let mut served = 0;
    for i in 0..3 {
        let l = std::fs::read_to_string(run.join(format!("replica-{i}.log"))).unwrap();
        assert!(!l.contains("SEQ_FAULT"), "replica {i}:\n{l}");
        let last = l
            .lines()
            .rev()
            .find(|l| l.starts_with("frames A/B "))
            .unwrap_or("");
        served += last
            .split("peer repairs asked ")
            .nth(1)
            .and_then(|r| r.split("served ").nth(1))
            .and_then(|r| r.split(|c: char| !c.is_ascii_digit()).next())
            .and_then(|n| n.parse::<u64>().ok())
            .unwrap_or(0);
    }
    assert!(served > 0, "no peer served the wiped replica");
    let _ = std::fs::remove_dir_all(&dir);
}

/// 07 §8.2 + §6.3, a replaced drive: the journaling replica (3) SIGKILLed, its consensus
/// directory (the Simplex journal partition) removed, started again. Its engine starts from the
/// newest finality certificate its cert journal verifies (commonware's `Floor::Finalized`), it
/// votes again, finalizes past that floor, and ends with the others' replay digest.
#[test]
fn a_replica_that_lost_its_consensus_partition_starts_from_its_cert_journal() {
    let _one = ONE_HOME.lock().unwrap_or_else(|e| e.into_inner());
    let (dir, run, stdout) = up_ok(
        "lost-consensus",
        29_750,
        &[
            "--duration",
            "8",
            "--rate",
            "2000",
            "--restart-replica",
            "3@3",
            "--lose-consensus",
        ],
    );
    assert!(stdout.contains("OK: the home traded"), "{stdout}");
    assert!(stdout.contains("consensus directory removed"), "{stdout}");
    // 07 §7.5: the journaling replica wrote snapshots (each voter every two root periods, at
    // its own offset), before and after its restart, and each verifies against the state
    // root its root certificate certifies: loadable, none refused.
    let report = std::fs::read_to_string(run.join("report.md")).unwrap();
    let snaps = report
        .lines()
        .find(|l| l.contains("snapshots (07 §7.5): "))
        .unwrap_or_else(|| panic!("no snapshot audit\n{report}"));
    assert!(
        num_after(snaps, "snapshots (07 §7.5): ").is_some_and(|n| n >= 1)
            && snaps.contains(", 0 refused"),
        "{snaps}"
    );
    let digests = replica_column(&stdout, 2);
    assert_eq!(digests.len(), 4, "{stdout}");
    assert!(digests.iter().all(|d| *d == digests[0]), "{digests:?}");
    let log = std::fs::read_to_string(run.join("replica-3-restarted.log")).unwrap();
    let floor_line = log
        .lines()
        .find(|l| l.contains("consensus floor from the cert journal"))
        .unwrap_or_else(|| panic!("no floor taken\n{log}"));
    let floor = num_after(floor_line, "final height ").expect("the floor's height");
    assert!(floor > 10, "{floor_line}");
    // Its engine went on from there: the newest status line's final height is past the floor,
    // with finalize votes of its own.
    let last = log
        .lines()
        .rev()
        .find(|l| l.contains("votes out "))
        .unwrap_or_else(|| panic!("no voter status\n{log}"));
    let fin = num_after(last, ", final ").expect("final");
    let votes = num_after(last, "votes out ").expect("votes");
    assert!(
        fin > floor + 20,
        "final {fin} after a floor of {floor}: {last}"
    );
    assert!(votes > 0, "{last}");
    // 07 §8.2: its block journal goes on past what it recovered — every block it checks after
    // the restart is written, gap-free up to near the home's final height (a checked prefix that
    // restarted at 0 once left it at the recovered top for the rest of the run).
    let journal = report
        .lines()
        .find(|l| l.starts_with("- replica 3: ") && l.contains(" blocks (heights "))
        .unwrap_or_else(|| panic!("no journal line\n{report}"));
    let blocks = num_after(journal, "- replica 3: ").expect("blocks");
    let top = journal
        .split("..=")
        .nth(1)
        .and_then(|s| s.split(')').next())
        .and_then(|n| n.parse::<u64>().ok())
        .expect("top height");
    assert!(blocks == top && top + 40 > fin, "{journal} (final {fin})");
    let _ = std::fs::remove_dir_all(&dir);
}

/// 07 §14 "data box down": a home with two data boxes, box 0 SIGKILLed 2 s into the load and
/// left down. The replicas see it silent, gossip DataDown, and once Q agree redirect its
/// sessions to box 1 (07 §5.7); box 1 relays the DataRedirect to the clients' bound address,
/// the clients resend copy 2 there, and every fill still becomes durable and final, with every
/// replica replaying the same responses (the verdict demands all of it).
#[test]
fn a_data_box_killed_moves_its_sessions_to_the_backup_and_nothing_is_lost() {
    let _one = ONE_HOME.lock().unwrap_or_else(|e| e.into_inner());
    let (dir, run, stdout) = up_ok(
        "kill-data",
        29_800,
        &[
            "--duration",
            "6",
            "--rate",
            "3000",
            "--data-boxes",
            "2",
            "--kill-data",
            "0@2",
        ],
    );
    assert!(stdout.contains("OK: the home traded"), "{stdout}");
    assert!(stdout.contains("data box 0 killed"), "{stdout}");
    // Box 1 relayed the redirects of box 0's sessions (half of the home's 32).
    let data1 = std::fs::read_to_string(run.join("data-1.log")).unwrap();
    let relayed = num_after(&data1, "redirects relayed ").unwrap_or(0);
    // (More when a scheduling stall made box 1 down by quorum first and its own sessions
    // moved to box 0: they are redirected back here too.)
    assert!(relayed >= 16, "{data1}");
    for i in 0..4 {
        let log = std::fs::read_to_string(run.join(format!("replica-{i}.log"))).unwrap();
        assert!(
            log.contains("data box 0 down by quorum") && log.contains("redirected to data box 1"),
            "replica {i}: {log}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// 07 §14 "sequencer process crash", the whole path in processes: the box is SIGKILLed under
/// the load and left down; every voter finds the silence, Q `Silence`s depose the tenure, the
/// standby's replica sends its TailReport (promotable: 12 s of history, caught up), and the seal
/// finalizes the prefix at every voter naming the standby next. The standby replays to the seal
/// and is promoted (07 §9.5): its engine becomes the box of tenure 1; every voter follows it and
/// sends the data box `SeqChange`, which tells the clients; they resend what had no answer and
/// trade on, every fill durable and final. The voters replay the same responses through both
/// tenures, and the journal holds both without a gap.
#[test]
fn a_killed_box_is_sealed_and_the_standby_promoted_and_the_clients_trade_on() {
    let _one = ONE_HOME.lock().unwrap_or_else(|e| e.into_inner());
    let (dir, run, stdout) = up_ok(
        "kill-seq",
        29_900,
        &["--duration", "16", "--rate", "1000", "--kill-seq", "10"],
    );
    assert!(
        stdout.contains("the sequencer box killed (SIGKILL)"),
        "{stdout}"
    );
    let report = std::fs::read_to_string(run.join("report.md")).unwrap();
    assert!(
        report.contains("OK: the home traded until its box was killed")
            && report.contains("the standby was promoted"),
        "{report}"
    );
    for i in 0..4 {
        let log = std::fs::read_to_string(run.join(format!("replica-{i}.log"))).unwrap();
        assert!(log.contains("deposed (07 §9.2)"), "replica {i}: {log}");
        let fin = log
            .lines()
            .find(|l| l.contains("the seal is final"))
            .unwrap_or_else(|| panic!("replica {i}: no final seal\n{log}"));
        assert!(
            fin.contains("next sequencer 1 (the standby"),
            "replica {i}: {fin}"
        );
        assert!(
            log.contains("failover: following tenure 1 of sequencer 1"),
            "replica {i}: {log}"
        );
    }
    let standby = std::fs::read_to_string(run.join("standby.log")).unwrap();
    assert!(standby.contains("standby: promoted (07 §9.5)"), "{standby}");
    // The clients' resends did not flood the promoted box (07 §9.5): fewer client packets
    // reached it than the clients sent messages in the whole run (before the client's resend
    // timer, window and go-back-N, 3x more), the kernel dropped none on its client socket, and
    // BAD_SEQ stayed under 1 % of the messages (before: ~25 %).
    let load = std::fs::read_to_string(run.join("load.log")).unwrap();
    let sent = num_after(&load, "\nsent ").unwrap_or_else(|| panic!("{load}"));
    let bad_seq = num_after(&load, "BAD_SEQ ").unwrap_or_else(|| panic!("{load}"));
    let ports = standby
        .lines()
        .find(|l| l.starts_with("ports: client packets in"))
        .unwrap_or_else(|| panic!("no promoted box summary\n{standby}"));
    let got = num_after(ports, "client packets in ").unwrap();
    assert!(
        got < sent,
        "{got} client packets for {sent} messages: {ports}"
    );
    assert_eq!(num_after(ports, "socket full "), Some(0), "{ports}");
    assert!(bad_seq * 100 < sent, "BAD_SEQ {bad_seq} of {sent}\n{load}");
    // The clients were answered after the failover.
    let (before, after) = report
        .lines()
        .find(|l| l.starts_with("The clients (the load generator"))
        .and_then(|l| {
            let n = |k: &str| -> Option<u64> {
                l.split(k).next()?.split_whitespace().last()?.parse().ok()
            };
            Some((n(" answered by the fault")?, n(" by the end")?))
        })
        .unwrap_or_else(|| panic!("no clients line\n{report}"));
    assert!(after > before + 1000, "{before} -> {after}\n{report}");
    assert!(
        report.contains("The longest time with no answer at any client: ")
            && !report.contains("no answer at any client: not reported"),
        "{report}"
    );
    let digests = replica_column(&report, 2);
    assert_eq!(digests.len(), 4, "{report}");
    assert!(digests.iter().all(|d| *d == digests[0]), "{report}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// 07 §14 "sequencer stalls": the box is stopped (SIGSTOP) for 3 s under the load, longer than
/// the voters' detection, then resumed. The voters depose it, seal its prefix and promote the
/// standby as for a crash, and the clients trade on there; the box, resumed, is a deposed tenure
/// — the voters refuse its frames and ack none — so it fences (07 §4.8) and releases nothing
/// more.
#[test]
fn a_stalled_box_is_replaced_and_fences_when_it_resumes() {
    let _one = ONE_HOME.lock().unwrap_or_else(|e| e.into_inner());
    let (dir, run, stdout) = up_ok(
        "stall-seq",
        30_000,
        &[
            "--duration",
            "16",
            "--rate",
            "1000",
            "--stall-seq",
            "9@3000",
        ],
    );
    assert!(
        stdout.contains("the sequencer box stopped (SIGSTOP) at 9 s for 3000 ms"),
        "{stdout}"
    );
    let report = std::fs::read_to_string(run.join("report.md")).unwrap();
    assert!(
        report.contains("OK: the box stalled long enough to be deposed"),
        "{report}"
    );
    let seq = std::fs::read_to_string(run.join("seq.log")).unwrap();
    assert!(seq.contains("seq_fenced true"), "{seq}");
    let standby = std::fs::read_to_string(run.join("standby.log")).unwrap();
    assert!(standby.contains("standby: promoted (07 §9.5)"), "{standby}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// 07 §14 "sequencer cut off from ≥ 2 voters" (`--isolate-seq`): every replica and the
/// standby's cut the box off both ways at 9 s for 3 s, while it runs on. It answers its clients
/// until its self-fence; the voters depose it, seal the prefix they hold (fetching the tail
/// frames one of them lacks from its holders) and promote the standby. The clients switch, are
/// told which of their fills were reverted (07 §9.6 (b), `TenureEnd`), resend what the new box
/// never logged, and trade on; every other fill is durable and final. Back in touch, the box is
/// refused and stays fenced.
#[test]
fn a_box_cut_off_from_the_voters_is_replaced_and_its_unheld_fills_are_reported_reverted() {
    let _one = ONE_HOME.lock().unwrap_or_else(|e| e.into_inner());
    let (dir, run, stdout) = up_ok(
        "isolate-seq",
        30_100,
        &[
            "--duration",
            "16",
            "--rate",
            "1000",
            "--isolate-seq",
            "9@3000",
        ],
    );
    assert!(
        stdout.contains("the sequencer box cut off from every replica and the standby at 9 s"),
        "{stdout}"
    );
    let report = std::fs::read_to_string(run.join("report.md")).unwrap();
    assert!(
        report.contains("OK: the box was cut off from the voters long enough to be deposed"),
        "{report}"
    );
    assert!(report.contains("## Isolation (07 §14"), "{report}");
    // The clients' summary: every fill durable and final, or reported reverted.
    let load = std::fs::read_to_string(run.join("load.log")).unwrap();
    let line = load
        .lines()
        .find(|l| l.starts_with("sent "))
        .expect("the summary");
    let get = |k: &str| {
        line.split(", ")
            .find_map(|p| p.strip_prefix(k))
            .and_then(|v| v.trim().parse::<u64>().ok())
            .unwrap_or_else(|| panic!("{k}in {line}"))
    };
    let (fills, fin, reverted) = (get("fills "), get("final "), get("reverted "));
    assert_eq!(fin + reverted, fills, "{load}");
    eprintln!("isolate-seq: {fills} fills, {reverted} reverted (07 §9.6 (b))");
    let seq = std::fs::read_to_string(run.join("seq.log")).unwrap();
    assert!(seq.contains("seq_fenced true"), "{seq}");
    let standby = std::fs::read_to_string(run.join("standby.log")).unwrap();
    assert!(standby.contains("standby: promoted (07 §9.5)"), "{standby}");
    let _ = std::fs::remove_dir_all(&dir);
}
