//! The end of a `vyrn up` run: `report.md` with its verdict, the SVG plots and the latency
//! distribution, read from what the processes published.

use super::*;

/// 07 §14 "replica crash": what `--restart-replica I@SECS` did, and the catch-up the restarted
/// process measured (07 §7.6), from its log.
fn restart_lines(r: &mut String, run: &Path, i: usize, at: u64, a: &Args) {
    let files = if a.wipe {
        "on an empty disk (`--wipe`: its journals, snapshots and consensus directory removed; it catches up from its peers and the box)"
    } else if a.lose_consensus {
        "on the same files less its consensus directory (`--lose-consensus`)"
    } else {
        "on the same files"
    };
    let _ = writeln!(
        r,
        "Fault injected (07 §14, replica crash): replica {i} SIGKILLed {at} s into the load and started again 1 s later {files}; its row below is the restarted process (logs `replica-{i}.log` before, `replica-{i}-restarted.log` after), which must end with the others' replay digest.\n"
    );
    let log =
        std::fs::read_to_string(run.join(format!("replica-{i}-restarted.log"))).unwrap_or_default();
    let line = log
        .lines()
        .find(|l| l.contains("caught up (07 §7.6)"))
        .map_or("it never caught up (no `caught up` line in its log)", |l| {
            l.split_once("caught up (07 §7.6): ").map_or(l, |x| x.1)
        });
    let _ = writeln!(r, "Catch-up (07 §7.6): replica {i} {line}.\n");
}

/// Write `report.md` and the plots; print the verdict; `Ok(true)` when the home kept its
/// promises.
#[allow(clippy::too_many_arguments)]
pub(super) fn report(
    a: &Args,
    run: &Path,
    procs: &[Proc],
    journals: &[(usize, Vec<PathBuf>)],
    home: &HomeConfig,
    timeline: &[Tick],
    alarms_seen: &[String],
    load_last: &Samples,
) -> Result<bool, String> {
    let mut r = String::new();
    let mut problems: Vec<String> = Vec::new();
    let _ = writeln!(r, "# vyrn up — run report\n");
    let _ = writeln!(
        r,
        "Home: {} voters (Q {}), {} data box(es), profile {:?}, {} ms blocks; load {} msgs/s for {} s (seed {}). Logs: `{}`.\n",
        home.voters,
        home.membership.as_ref().map_or(0, |m| m.q),
        home.databoxes.len(),
        home.profile,
        home.block_ns / 1_000_000,
        a.rate,
        a.duration,
        a.seed,
        run.display()
    );
    if a.netns {
        let paths = std::fs::read_to_string(lab::PATHS_FILE).unwrap_or_default();
        let _ = writeln!(
            r,
            "Lab: every role in its own network namespace (`deploy/lab/netns.sh`): the box at {}, voters at 10.77.0.10–13, data boxes at 10.77.0.20+; path A on 10.77.1.0/24 and path B on 10.77.2.0/24, separate networks; path delay: {}.\n",
            home.box_ip,
            paths.trim().trim_start_matches("paths: ").trim_start_matches("paths:").trim()
        );
    }
    let load = procs
        .iter()
        .find(|p| p.name == "load")
        .map(|p| p.log_text())
        .unwrap_or_default();
    if let Some(p) = procs.iter().find(|p| p.name == "ping") {
        let _ = writeln!(
            r,
            "## Ping (`vyrn load --ping`: one request in flight)\n\n```"
        );
        for l in p.log_text().lines().filter(|l| l.starts_with("ping")) {
            let _ = writeln!(r, "{l}");
        }
        let _ = writeln!(r, "```\n");
    }
    if let Some(p) = procs.iter().find(|p| p.name == "misbehave") {
        let _ = writeln!(r, "## Misbehaving client (`vyrn load --misbehave`)\n\n```");
        for l in p.log_text().lines().filter(|l| l.starts_with("misbehave")) {
            let _ = writeln!(r, "{l}");
        }
        let _ = writeln!(r, "```\n");
    }
    let (promoted, fault_at, failed_over) = box_fault(a, procs);
    let faults = (
        failed_over && promoted.is_none(),
        a.lab.isolate_seq().is_some(),
    );
    clients_section(&mut r, &load, faults, &mut problems);
    let seq = procs
        .iter()
        .find(|p| p.name == "sequencer")
        .map(|p| p.log_text())
        .unwrap_or_default();
    let _ = writeln!(r, "## The sequencer box (`vyrn seq`)\n\n```");
    for l in seq.lines().filter(|l| {
        l.starts_with("control:")
            || l.starts_with("finality:")
            || l.starts_with("peak")
            || l.starts_with("alarm=")
    }) {
        let _ = writeln!(r, "{l}");
    }
    let _ = writeln!(r, "```\n");
    // A stalled box resumed after its deposition fences (07 §4.8: no voter acks it again).
    if seq.contains("seq_fenced true") && !(failed_over && a.interrupted().is_some()) {
        problems.push("the box fenced".into());
    }
    standby_section(&mut r, procs, &seq, !failed_over, &mut problems);
    if let Some((at, ms)) = a.interrupted() {
        let isolated = a.lab.isolate_seq().is_some();
        stall_section(&mut r, &seq, (at, ms, isolated), failed_over, &mut problems);
    }
    if let (Some(at), true) = (fault_at, failed_over || a.kill_seq.is_some()) {
        let how = how_failed(a, at);
        failover_section(
            &mut r,
            procs,
            (at, &how),
            promoted.as_deref(),
            &load,
            &mut problems,
        );
    }
    if let Some(at) = a.lab.attack() {
        let _ = writeln!(
            r,
            "Fault injected (docs/security.md): {at} s into the load, three bursts a second apart of the security review's single-datagram attacks with spoofed sources — F1 DATA_HB at data_seq u64::MAX to every replica, F2 forged far-ahead \"repairs\", F3 Diverge without evidence, F4 a stranger's DataFetch and DataDowns at the data box, F5 a NACK for 1..=u64::MAX, F17 unsigned NackTooOld, F9 RepAcks and DataDowns from every voter's own addresses (bare, and sealed under a made-up key); the home must keep trading, finalizing and replaying the same responses.\n"
        );
    }
    if let Some((d, at)) = a.kill_data {
        let _ = writeln!(
            r,
            "Fault injected (07 §14, data box down): data box {d} SIGKILLed {at} s into the load and left down; the replicas must gossip DataDown, redirect its sessions to the backup box (07 §5.7), and every replica still resolve every payload (the same replay digest), with nothing acked lost.\n"
        );
        for p in procs
            .iter()
            .filter(|p| p.name.starts_with("data box") && !p.lab_killed)
        {
            if let Some(l) = p.log_text().lines().rev().find(|l| l.contains("redirect")) {
                let _ = writeln!(r, "{}: `{}`\n", p.name, l.trim());
            }
        }
    }
    if let Some(c) = a.lab.cut_path() {
        let how = if a.netns {
            "its network taken down in the netns lab (the bridge), healed after the run"
        } else {
            "every replica stops reading it (`--lab-cut-path`)"
        };
        let _ = writeln!(
            r,
            "Fault injected (07 §14, path down): path {c} (PATH@SECS), {how}; every replica must raise REP_A_PATH for it and the home trade on the other path with nothing lost.\n"
        );
    }
    if let Some((i, at)) = a.restart_replica {
        restart_lines(&mut r, run, i, at, a);
    }
    replicas_section(&mut r, procs, promoted.is_some(), &mut problems);
    let _ = writeln!(
        r,
        "\n## Journals (opened read-only, every record checked)\n"
    );
    for (i, d) in journals {
        let mut cfg = vyrn_replica::disk::journal::JournalConfig::new(d.clone());
        cfg.read_only = true;
        cfg.verifying_key = Some(home.seq_pub);
        cfg.later_keys = home.later_tenure_keys();
        match vyrn_replica::disk::journal::BlockJournal::open(cfg) {
            Ok((mut j, rep)) => {
                let hs = j.heights();
                let unreadable = hs.iter().filter(|h| j.read(**h).is_err()).count();
                let certs = home.membership.as_ref().and_then(|m| {
                    vyrn_replica::vote::verify_cert_journal(
                        &d[..2.min(d.len())],
                        m,
                        crate::cmd::replica::root_blocks(home),
                    )
                    .ok()
                });
                let _ = writeln!(
                    r,
                    "- replica {i}: {} blocks (heights {}..={}), {} refused at recovery, {} unreadable; cert journal: {}",
                    hs.len(),
                    hs.first().unwrap_or(&0),
                    hs.last().unwrap_or(&0),
                    rep.refused.len(),
                    unreadable,
                    certs.as_ref().map_or("not checked".to_string(), |c| format!("{} finality and {} root certificates verify, {} bad", c.ok, c.roots_ok, c.bad.len()))
                );
                // 07 §7.5 "Loading": each snapshot against the roots the certificates above
                // certify (checked once, here).
                let area = d[0].join("snapshots");
                let snaps = area.exists().then(|| {
                    let roots = certs.as_ref().map(|c| c.roots.clone()).unwrap_or_default();
                    vyrn_replica::disk::snapshots::audit(&area, &home.engine, &roots)
                        .map_err(|e| e.to_string())
                });
                match &snaps {
                    Some(Ok(a)) => {
                        let _ = writeln!(r, "  - snapshots (07 §7.5): {}", a.line());
                    }
                    Some(Err(e)) => {
                        let _ = writeln!(r, "  - snapshots (07 §7.5): not checked: {e}");
                    }
                    None => {}
                }
                if snaps
                    .as_ref()
                    .is_some_and(|a| a.as_ref().map_or(true, |a| !a.bad.is_empty()))
                {
                    problems.push(format!("replica {i}'s snapshots do not verify"));
                }
                if !rep.refused.is_empty()
                    || unreadable > 0
                    || hs.is_empty()
                    || certs
                        .as_ref()
                        .is_some_and(|c| !c.bad.is_empty() || c.ok == 0)
                    // A run of three root periods certifies state roots (07 §7.4).
                    || certs.as_ref().is_some_and(|c| {
                        c.roots_ok == 0
                            && hs.len() as u64 > 3 * crate::cmd::replica::root_blocks(home)
                    })
                    || (home.membership.is_some() && certs.is_none())
                {
                    problems.push(format!("replica {i}'s journal does not verify"));
                }
            }
            Err(e) => problems.push(format!("replica {i}'s journal: {e:?}")),
        }
    }
    let _ = writeln!(r, "\n## Alarms\n");
    if alarms_seen.is_empty() {
        let _ = writeln!(r, "None raised.");
    }
    for al in alarms_seen {
        let _ = writeln!(r, "- {al}");
    }
    for p in procs {
        // Every role ends cleanly (exit 0) on SIGTERM; the load generator may be cut by Ctrl-C.
        let bad = match p.status {
            _ if p.lab_killed => false,
            None => true,
            Some(st) if p.name == "load" => st.code().is_some_and(|c| c != 0),
            Some(st) => !st.success(),
        };
        if bad {
            problems.push(format!("{} exited {:?}", p.name, p.status));
        }
    }
    let plots = plot(run, timeline).and_then(|mut f| {
        f.push(distribution(run, load_last)?);
        Ok(f)
    });
    let _ = writeln!(r, "\n## Over time\n");
    match &plots {
        Ok(files) => {
            for f in files {
                let _ = writeln!(r, "![{f}]({f})");
            }
        }
        Err(e) => {
            let _ = writeln!(r, "(plots not drawn: {e})");
        }
    }
    let ok = verdict(&mut r, a, &problems, failed_over, promoted.is_some());
    let path = run.join("report.md");
    std::fs::write(&path, &r).map_err(|e| format!("{}: {e}", path.display()))?;
    println!("\n{r}");
    println!("vyrn up: report written to {}", path.display());
    Ok(ok)
}

/// The replicas' table: each one's replay digest, responses, root certificates, replay lag and
/// exit; every digest must be the same (a `promoted` standby's is its replay up to the seal, not
/// compared).
fn replicas_section(r: &mut String, procs: &[Proc], promoted: bool, problems: &mut Vec<String>) {
    let _ = writeln!(
        r,
        "## Replicas\n\n| replica | replay digest | responses | state-root certs (07 §7.4) | replay lag p50 / p99 / max (07 §7.3, budget 2 ms) | exit |\n|---|---|---|---|---|---|"
    );
    let mut digests = Vec::new();
    // 07 §9.5: the standby's non-voting replica replays the same book; its digest must be the
    // voters'.
    let standby_replica =
        |p: &&Proc| p.name == "standby" && p.log_text().contains("standby: replica (non-voting");
    for p in procs
        .iter()
        .filter(|p| p.name.starts_with("replica") || standby_replica(p))
    {
        let text = p.log_text();
        let d = text
            .lines()
            .find(|l| l.contains("replay digest"))
            .map(|l| {
                let w: Vec<&str> = l.split_whitespace().collect();
                let i = w.iter().position(|x| *x == "digest").map_or(0, |i| i + 1);
                (
                    w.get(i).unwrap_or(&"?").to_string(),
                    w.get(i + 2).unwrap_or(&"?").to_string(),
                )
            })
            .unwrap_or(("none".into(), "0".into()));
        // The voter's newest line: "…, root certs N…".
        let roots = text
            .lines()
            .rev()
            .find_map(|l| {
                let i = l.find("root certs ")? + "root certs ".len();
                l[i..].split([',', ' ']).next().map(str::to_string)
            })
            .unwrap_or_else(|| "-".into());
        // The newest status line: "…, replay lag p50/p99/max A/B/C ms over N steps, …".
        let lag = text
            .lines()
            .rev()
            .find_map(|l| {
                let i = l.find("replay lag p50/p99/max ")? + "replay lag p50/p99/max ".len();
                let v = l[i..].split(' ').next()?;
                Some(format!("{} ms", v.replace('/', " / ")))
            })
            .unwrap_or_else(|| "-".into());
        if text.contains("REP_A_DIVERGE") {
            problems.push(format!("{} raised REP_A_DIVERGE", p.name));
        }
        let _ = writeln!(
            r,
            "| {} | `{}` | {} | {} | {} | {} |",
            p.name,
            d.0,
            d.1,
            roots,
            lag,
            p.status.map_or("killed".to_string(), |s| s.to_string())
        );
        // A promoted standby's replay ended at the seal, when its engine became the box:
        // its digest is the prefix's, not the voters' at the end.
        if p.name != "standby" || !promoted {
            digests.push(d.0);
        }
    }
    if promoted {
        let _ = writeln!(
            r,
            "
The standby's row is its replay up to the seal, when its engine became the box of the next tenure (07 §9.5); the voters' rows go on through that tenure."
        );
    }
    let mut distinct = digests.clone();
    distinct.sort();
    distinct.dedup();
    if distinct.len() != 1 || distinct[0] == "none" {
        problems.push(format!("replay digests differ or are missing: {digests:?}"));
    }
}

/// The report's verdict: OK with what was demanded (the fault's case), or every problem found.
fn verdict(
    r: &mut String,
    a: &Args,
    problems: &[String],
    failed_over: bool,
    promoted: bool,
) -> bool {
    let _ = writeln!(r, "\n## Verdict\n");
    let isolated = a.lab.isolate_seq().is_some();
    if problems.is_empty() && a.interrupted().is_some() && !failed_over {
        let _ = writeln!(r, "OK: the box was {} for less than the voters' detection: nobody deposed it, and the home traded on; every fill durable and final; every replica replayed the same responses; every journal verifies.", if isolated { "cut off" } else { "stalled" });
    } else if problems.is_empty() && isolated && promoted {
        let _ = writeln!(r, "OK: the box was cut off from the voters long enough to be deposed: every voter holds the final seal of the prefix it held, the standby was promoted and every voter follows its tenure; the clients switched to it and traded on; every fill is durable and final or was reported reverted to its client (07 §9.6 (b): answered by the cut-off box before its self-fence, held by no reporter); the box, back in touch, was refused (INV-REP-5) and stayed fenced; every replica replayed the same responses; every journal verifies.");
    } else if problems.is_empty() && a.stall_seq.is_some() && promoted {
        let _ = writeln!(r, "OK: the box stalled long enough to be deposed: every voter holds the final seal of its prefix, the standby was promoted and every voter follows its tenure; the clients switched to it and traded on, every fill durable and final; the stalled box, resumed, was refused (INV-REP-5) and fenced; every replica replayed the same responses; every journal verifies.");
    } else if problems.is_empty() && a.kill_seq.is_some() && promoted {
        let _ = writeln!(r, "OK: the home traded until its box was killed; every voter deposed the box and holds the final seal of its prefix (every response through F* final); the standby was promoted and every voter follows its tenure; the clients switched to it, resent what had no answer and traded on, every fill durable and final; every replica replayed the same responses; every journal verifies.");
    } else if problems.is_empty() && a.kill_seq.is_some() {
        let _ = writeln!(r, "OK: the home traded until its box was killed; every voter deposed the box and holds the final seal of its prefix (every response through F* final); every replica replayed the same responses; every journal verifies. No standby was promoted: the book stays halted, and the clients' last durable and final notices died with the box (not checked).");
    } else if problems.is_empty() {
        let _ = writeln!(r, "OK: the home traded; every fill durable and final; every replica replayed the same responses; every journal verifies.");
    } else {
        for p in problems {
            let _ = writeln!(r, "- FAILED: {p}");
        }
    }
    problems.is_empty()
}

/// What was done to the box at `at` s (`--stall-seq` or `--kill-seq`).
fn how_failed(a: &Args, at: u64) -> String {
    match (a.stall_seq, a.lab.isolate_seq()) {
        (Some((_, ms)), _) => format!("stopped (SIGSTOP) {at} s into the load for {ms} ms"),
        (_, Some((_, ms))) => format!(
            "cut off from every replica and the standby, both ways, {at} s into the load for {ms} ms (it kept running)"
        ),
        _ => format!("SIGKILLed {at} s into the load and left down"),
    }
}

/// The box's fault: the standby's promotion line (07 §9.5: it took over after a seal; its box
/// then ran to the end), when the fault came (`--kill-seq`, `--stall-seq`), and whether the
/// voters deposed the box (a stall shorter than their detection deposes nothing: a pause).
fn box_fault(a: &Args, procs: &[Proc]) -> (Option<String>, Option<u64>, bool) {
    // 07 §9.5: the standby took over after a `--kill-seq` seal (its box then ran to the end).
    let promoted = procs
        .iter()
        .find(|p| p.name == "standby")
        .map(|p| p.log_text())
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("standby: promoted"))
                .map(str::to_string)
        });
    // The box's fault (`--kill-seq`, `--stall-seq`) and whether the voters deposed it: a stall
    // shorter than their detection deposes nothing and is only a pause.
    let fault_at = a.kill_seq.or(a.interrupted().map(|s| s.0));
    let failed_over = fault_at.is_some()
        && procs
            .iter()
            .filter(|p| p.name.starts_with("replica"))
            .any(|p| p.log_text().contains("deposed (07 §9.2)"));
    (promoted, fault_at, failed_over)
}

/// A plotted line: its name and how to read it off a second of the timeline.
type Series<'a> = (&'a str, fn(&Tick) -> f64);

/// The run's SVG plots: rates, latency, final lag.
/// 07 §6.8: the standby hears every finalize vote the box hears; its final height must reach the
/// box's (within the finality gate's 8 blocks: it stops a moment later, or earlier, than the box).
/// The load generator's summary and its checks: answers, fills, every fill durable and final
/// (`box_killed`: not demanded, `--kill-seq`).
fn clients_section(
    r: &mut String,
    load: &str,
    (box_killed, isolated): (bool, bool),
    problems: &mut Vec<String>,
) {
    let _ = writeln!(r, "## Clients (`vyrn load`, open loop)\n\n```");
    let mut in_summary = false;
    for l in load.lines() {
        if l.starts_with("--- summary") {
            in_summary = true;
            continue;
        }
        if in_summary {
            let _ = writeln!(r, "{l}");
        }
    }
    let _ = writeln!(r, "```\n");
    // The generator's own end-of-run counts (its endpoint is gone once it exits): "sent N (…),
    // answered N, fills N, durable N, final N, …".
    let count = |key: &str| -> f64 {
        load.lines()
            .find(|l| l.starts_with("sent "))
            .and_then(|l| l.split(", ").find_map(|part| part.strip_prefix(key)))
            .and_then(|v| v.trim().parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    let summary = load.lines().any(|l| l.starts_with("sent "));
    if !summary {
        problems.push("the load generator printed no summary (killed?)".into());
    }
    let (answered, fills, not_durable, not_final) = (
        count("answered "),
        count("fills "),
        count("fills not yet durable "),
        count("not yet final "),
    );
    if answered < 1.0 {
        problems.push("no order was answered".into());
    }
    if fills < 1.0 {
        problems.push("no fill".into());
    }
    // 07 §9.6: a fill is reverted only when no reporter holds its frame. Cut off from every
    // replica, the box's answers until its self-fence are (case b, reported to each client);
    // a crash or a stall on whole paths reverts nothing.
    let reverted = count("reverted ");
    if reverted > 0.0 && !isolated {
        problems.push(format!(
            "{reverted:.0} fills reverted (07 §9.6): none may be with both paths whole"
        ));
    }
    // A killed box tells its clients nothing more (no REP_DurableMark, no final height): the seal
    // makes their last fills final at the voters (checked in the failover section), and the
    // clients learn it from the next sequencer's watermarks (07 §9.5) — demanded unless no
    // standby was promoted.
    let (not_durable, not_final) = if box_killed {
        (0.0, 0.0)
    } else {
        (not_durable, not_final)
    };
    if not_durable > 0.0 || not_final > 0.0 {
        problems.push(format!(
            "of {fills:.0} fills, {not_durable:.0} never became durable and {not_final:.0} never final"
        ));
    }
}

/// `box_lived`: the box ran to the end and printed its final height (not `--kill-seq`).
fn standby_section(
    r: &mut String,
    procs: &[Proc],
    seq: &str,
    box_lived: bool,
    problems: &mut Vec<String>,
) {
    if let Some(p) = procs.iter().find(|p| p.name == "standby") {
        let text = p.log_text();
        let sb = text
            .lines()
            .rev()
            .find(|l| l.starts_with("standby: final height"))
            .map(str::to_string);
        let height = |l: &str, key: &str| -> Option<u64> {
            l.split(key).nth(1)?.split_whitespace().next()?.parse().ok()
        };
        let box_final = seq
            .lines()
            .find(|l| l.starts_with("control:"))
            .and_then(|l| height(l, "final height "));
        let _ = writeln!(
            r,
            "## The standby (`vyrn standby`, 07 §6.8, §9.5)\n\nThe voters send their finalize votes and certificates to the standby's control port as to the box's; it batch-verifies them like the box's certificate tile. Its non-voting replica (where the home names one) replays the book: its row in the replicas' table below must show the voters' digest (up to the seal, when it was promoted: 07 §9.5).\n\n```\n{}\n```\n",
            sb.as_deref().unwrap_or("(no summary)")
        );
        match (
            sb.as_deref().and_then(|l| height(l, "final height ")),
            box_final,
        ) {
            (Some(s), Some(b)) if s + vyrn_wire::consts::FIN_GATE_BLOCKS >= b && s > 0 => {}
            (Some(s), _) if !box_lived && s > 0 => {}
            (s, b) => problems.push(format!(
                "the standby's final height {s:?} falls short of the box's {b:?}"
            )),
        }
    }
}

/// 07 §9.7's stages at each replica, from its `failover stages` line: ms after the box's last
/// frame there (each replica's own clock), for the first failover.
fn stages_table(r: &mut String, procs: &[Proc]) {
    const STAGES: [&str; 5] = ["detected", "deposed", "planned", "sealed", "followed"];
    let mut rows = Vec::new();
    for p in procs
        .iter()
        .filter(|p| p.name.starts_with("replica") || p.name == "standby")
    {
        let text = p.log_text();
        let Some(l) = text
            .lines()
            .find(|l| l.contains("failover stages (07 §9.7"))
        else {
            continue;
        };
        let tail = l.rsplit("): ").next().unwrap_or("");
        let cell = |stage: &str| {
            tail.split(", ")
                .find_map(|x| x.strip_prefix(stage))
                .map_or("-".to_string(), |v| v.trim().to_string())
        };
        let cells: Vec<String> = STAGES.iter().map(|s| cell(s)).collect();
        rows.push(format!("| {} | {} |", p.name, cells.join(" | ")));
    }
    if rows.is_empty() {
        return;
    }
    let _ = writeln!(
        r,
        "Stages at each replica, ms after the box's last frame there (07 §9.7's budget, REF: detection 2.8, reports 3.6, seal final 7.85; \"followed\" is the seal taken: replay at its end, the next tenure's frames taken from then):\n\n| replica | detected | deposed | planned | sealed | followed |\n|---|---|---|---|---|---|"
    );
    for row in rows {
        let _ = writeln!(r, "{row}");
    }
    let _ = writeln!(r);
}

/// 07 §14 "sequencer process crash" (`--kill-seq`): every voter deposed the tenure and holds
/// the final seal, all naming the same next sequencer — the standby when its replica was
/// promotable; then (07 §9.5) the standby promoted, every voter following its tenure, and the
/// clients trading on (`promoted`: the standby's promotion line).
fn failover_section(
    r: &mut String,
    procs: &[Proc],
    (at, how): (u64, &str),
    promoted: Option<&str>,
    load: &str,
    problems: &mut Vec<String>,
) {
    let _ = writeln!(
        r,
        "## Failover (07 §9)\n\nThe sequencer box was {how}. Each voter must find the silence, Q `Silence`s depose the tenure (INV-REP-5), and the seal (a kind-1 Simplex proposal) must finalize the prefix at every voter, naming the warm standby next when its replica reported promotable. The standby then replays to the seal and its engine becomes the box of tenure 1 (07 §9.5); every voter follows that tenure, tells the data boxes (`SeqChange`), which tell the clients; the clients resend what had no answer and trade on. A dev home's budgets are a shared machine's (silence 1 s, the wait for reports 1.5 s), so its outage is seconds, not 07's 20 ms.\n\n```"
    );
    let mut named = Vec::new();
    let mut following = 0;
    for p in procs.iter().filter(|p| p.name == "standby") {
        for l in p
            .log_text()
            .lines()
            .filter(|l| l.contains("standby replica: failover:") && !l.contains("failover stages"))
        {
            let _ = writeln!(r, "{}", l.trim());
        }
    }
    for p in procs.iter().filter(|p| p.name.starts_with("replica")) {
        let text = p.log_text();
        for l in text.lines().filter(|l| {
            l.contains("deposed (07 §9.2)")
                || l.contains("seal plan")
                || l.contains("the seal is final")
                || l.contains("failover: following tenure")
        }) {
            let _ = writeln!(r, "{}", l.trim());
        }
        following += usize::from(text.contains("failover: following tenure 1"));
        let fin = text
            .lines()
            .find(|l| l.contains("the seal is final"))
            .and_then(|l| l.split("next sequencer ").nth(1))
            .map(|x| x.split([' ', ':']).next().unwrap_or("").to_string());
        match fin {
            Some(x) => named.push(x),
            None => problems.push(format!(
                "{}: no final seal (07 §9.4){}",
                p.name,
                text.lines()
                    .rfind(|l| l.contains("failover: seal (07 §9.4)"))
                    .map(|l| format!(", last: {}", l.trim()))
                    .unwrap_or_default()
            )),
        }
    }
    if let Some(l) = promoted {
        let _ = writeln!(r, "{l}");
    }
    let _ = writeln!(r, "```\n");
    stages_table(r, procs);
    let standby_ready = procs
        .iter()
        .find(|p| p.name == "standby")
        .map(|p| p.log_text())
        .is_some_and(|t| {
            t.lines()
                .any(|l| l.contains("standby replica: checked to") && l.contains("promotable yes"))
        });
    named.sort();
    named.dedup();
    match named.as_slice() {
        [one] if standby_ready && one != "1" => problems.push(format!(
            "the seal names next sequencer {one}, not the promotable standby (1)"
        )),
        [_] | [] => {}
        more => problems.push(format!(
            "the voters' seals name different next sequencers: {more:?}"
        )),
    }
    if named.as_slice() != ["1"] {
        return;
    }
    // 07 §9.5: the standby named next is promoted, and every voter follows it.
    let voters = procs
        .iter()
        .filter(|p| p.name.starts_with("replica"))
        .count();
    if promoted.is_none() {
        // Why, as far as the standby's replica said (the verdict is what a CI log keeps).
        let why = procs
            .iter()
            .find(|p| p.name == "standby")
            .and_then(|p| {
                p.log_text()
                    .lines()
                    .rfind(|l| l.contains("standby replica: failover:"))
                    .map(|l| format!(" (its replica's last word: {})", l.trim()))
            })
            .unwrap_or_default();
        problems.push(format!(
            "the seal names the standby, which was not promoted{why}"
        ));
    }
    if following < voters {
        problems.push(format!(
            "{following} of {voters} replicas follow the promoted standby's tenure"
        ));
    }
    let (before, after) = client_outage(load, at);
    // The load generator's own measure: the longest time between two answers (any session).
    let gap = load
        .lines()
        .find_map(|l| l.strip_prefix("longest time with no answer: "))
        .unwrap_or("not reported");
    let _ = writeln!(
        r,
        "The clients (the load generator's one-second lines): {before} answered by the fault at {at} s, {after} by the end. The longest time with no answer at any client: {gap} — the outage the clients saw (a dev home's budgets; 07's target is 20 ms).\n"
    );
    if after <= before {
        problems.push(format!(
            "the clients got no answer after the failover ({before} answered by the kill, {after} at the end)"
        ));
    }
}

/// 07 §14 "sequencer stalls" (`--stall-seq S@MS`): what the box did once resumed. Deposed by
/// then (`failed_over`), it must fence (no voter acks a deposed tenure) and release nothing more;
/// else it trades on as before.
fn stall_section(
    r: &mut String,
    seq: &str,
    (at, ms, isolated): (u64, u64, bool),
    failed_over: bool,
    problems: &mut Vec<String>,
) {
    let head = if isolated {
        format!("## Isolation (07 §14 \"sequencer cut off\"; `--isolate-seq {at}@{ms}`)\n\nThe sequencer box was cut off from every replica and the standby's replica, both ways, {at} s into the load for {ms} ms; it kept running, answering its clients until its self-fence (no voter acked it). Its responses after the cut reached no reporter: the seal does not hold them, and the clients are told they were reverted (07 §9.6 (b); `TenureEnd`, the clients' `reverted` count above).")
    } else {
        format!("## Stall (07 §14; `--stall-seq {at}@{ms}`)\n\nThe sequencer box was stopped (SIGSTOP) {at} s into the load for {ms} ms, then resumed.")
    };
    let _ = writeln!(
        r,
        "{head} {}\n",
        if failed_over {
            "The voters deposed it meanwhile (below): resumed, it is a deposed tenure — every voter refuses its frames (INV-REP-5) and acks none, so it fences (07 §4.8) and its clients, told by the data boxes, trade at the promoted standby."
        } else {
            "That is shorter than the voters' detection: no voter deposed it, and it traded on."
        }
    );
    if failed_over && !seq.contains("seq_fenced true") {
        problems.push(format!(
            "the {} box, back after its deposition, did not fence (07 §4.8)",
            if isolated { "cut-off" } else { "stalled" }
        ));
    }
}

/// From the load generator's one-second lines (`t=  Ns … answered N …`): answered by second
/// `at`, and answered at the end.
fn client_outage(load: &str, at: u64) -> (u64, u64) {
    let mut pts: Vec<(u64, u64)> = Vec::new();
    for l in load.lines().filter(|l| l.starts_with("t=")) {
        let t = l[2..]
            .trim_start()
            .split('s')
            .next()
            .and_then(|x| x.parse::<u64>().ok());
        let n = l
            .split("answered ")
            .nth(1)
            .and_then(|x| x.split_whitespace().next())
            .and_then(|x| x.parse::<u64>().ok());
        if let (Some(t), Some(n)) = (t, n) {
            pts.push((t, n));
        }
    }
    let before = pts
        .iter()
        .filter(|p| p.0 <= at)
        .map(|p| p.1)
        .max()
        .unwrap_or(0);
    (before, pts.last().map_or(0, |p| p.1))
}

fn plot(run: &Path, tl: &[Tick]) -> Result<Vec<String>, String> {
    if tl.len() < 2 {
        return Err("fewer than two seconds recorded".into());
    }
    let charts: [(&str, &str, &[Series]); 3] = [
        (
            "rates.svg",
            "packets/s at the sequencer",
            &[
                ("client packets in", |t| t.in_ps),
                ("responses and notices out", |t| t.out_ps),
            ],
        ),
        (
            "latency.svg",
            "latency over the run so far (ms, open loop)",
            &[
                ("request->ack p50", |t| t.ack_p50_ms),
                ("request->ack p99", |t| t.ack_p99_ms),
                ("request->fill p99", |t| t.fill_p99_ms),
            ],
        ),
        (
            "final_lag.svg",
            "blocks closed but not yet final at the box",
            &[("closed - final", |t| t.final_lag)],
        ),
    ];
    let mut files = Vec::new();
    for (file, caption, series) in charts {
        line_chart(&run.join(file), caption, tl, series)?;
        files.push(file.to_string());
    }
    Ok(files)
}

/// The clients' request → ack and request → fill distributions (from the generator's last
/// published quantiles, ≤ 1 s before it ended): latency against the percentile.
fn distribution(run: &Path, load: &Samples) -> Result<String, String> {
    use plotters::prelude::*;
    const QS: [(&str, f64); 8] = [
        ("0.25", 0.25),
        ("0.5", 0.5),
        ("0.75", 0.75),
        ("0.9", 0.9),
        ("0.95", 0.95),
        ("0.99", 0.99),
        ("0.999", 0.999),
        ("1", 1.0),
    ];
    let f = "latency_distribution.svg";
    let path = run.join(f);
    let e = |x: &dyn std::fmt::Debug| format!("{}: {x:?}", path.display());
    let curve = |what: &str| -> Vec<(f64, f64)> {
        // x: -log10(1 - q), so p50 = 0.3, p90 = 1, p99 = 2, p99.9 = 3; the max is drawn at 4.
        QS.iter()
            .map(|(k, q)| {
                let x = if *q >= 1.0 { 4.0 } else { -(1.0 - q).log10() };
                (x, ms(load, what, k))
            })
            .collect()
    };
    let (ack, fill) = (curve("request_ack"), curve("request_fill"));
    let ymax = ack.iter().chain(&fill).map(|p| p.1).fold(1.0, f64::max) * 1.1;
    let root = SVGBackend::new(&path, (900, 340)).into_drawing_area();
    root.fill(&WHITE).map_err(|x| e(&x))?;
    let mut c = ChartBuilder::on(&root)
        .caption(
            "latency distribution (ms) by percentile",
            ("sans-serif", 18),
        )
        .margin(10)
        .x_label_area_size(30)
        .y_label_area_size(60)
        .build_cartesian_2d(0.0..4.2, 0.0..ymax)
        .map_err(|x| e(&x))?;
    c.configure_mesh()
        .x_desc("percentile, log scale: 0.3 = p50, 1 = p90, 2 = p99, 3 = p99.9, 4 = max")
        .draw()
        .map_err(|x| e(&x))?;
    for (k, (name, pts)) in [("request->ack", ack), ("request->fill", fill)]
        .into_iter()
        .enumerate()
    {
        let color = Palette99::pick(k).to_rgba();
        c.draw_series(LineSeries::new(pts, color))
            .map_err(|x| e(&x))?
            .label(name)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color));
    }
    c.configure_series_labels()
        .border_style(BLACK)
        .draw()
        .map_err(|x| e(&x))?;
    root.present().map_err(|x| e(&x))?;
    Ok(f.to_string())
}

/// One line chart of `series` over the timeline, into an SVG file.
fn line_chart(path: &Path, caption: &str, tl: &[Tick], series: &[Series]) -> Result<(), String> {
    use plotters::prelude::*;
    let e = |x: &dyn std::fmt::Debug| format!("{}: {x:?}", path.display());
    let tmax = tl.last().map_or(1.0, |t| t.t).max(1.0);
    let ymax = tl
        .iter()
        .flat_map(|t| series.iter().map(move |(_, g)| g(t)))
        .fold(1.0, f64::max)
        * 1.1;
    let root = SVGBackend::new(path, (900, 340)).into_drawing_area();
    root.fill(&WHITE).map_err(|x| e(&x))?;
    let mut c = ChartBuilder::on(&root)
        .caption(caption, ("sans-serif", 18))
        .margin(10)
        .x_label_area_size(30)
        .y_label_area_size(60)
        .build_cartesian_2d(0.0..tmax, 0.0..ymax)
        .map_err(|x| e(&x))?;
    c.configure_mesh().x_desc("s").draw().map_err(|x| e(&x))?;
    for (k, (name, get)) in series.iter().enumerate() {
        let color = Palette99::pick(k).to_rgba();
        c.draw_series(LineSeries::new(tl.iter().map(|t| (t.t, get(t))), color))
            .map_err(|x| e(&x))?
            .label(*name)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color));
    }
    c.configure_series_labels()
        .border_style(BLACK)
        .draw()
        .map_err(|x| e(&x))?;
    root.present().map_err(|x| e(&x))
}
