//! `vyrn up`'s lab faults on the home's processes (07 §14): the data box and the sequencer box
//! killed, the sequencer box stalled; their arguments and checks.

use std::time::Duration;

use super::{Args, Proc};

/// Before a restarted replica starts again: its consensus directory removed
/// (`--lose-consensus`, a lost drive), or every directory of it (`--wipe`, an empty disk,
/// 07 §7.6).
pub(super) fn lose_files(a: &Args, run: &std::path::Path, i: usize) -> Result<(), String> {
    let dirs: &[String] = if a.wipe {
        &[
            format!("consensus-{i}"),
            format!("journal-{i}-0"),
            format!("journal-{i}-1"),
        ]
    } else if a.lose_consensus {
        &[format!("consensus-{i}")]
    } else {
        &[]
    };
    for d in dirs {
        let d = run.join(d);
        if d.exists() || a.lose_consensus {
            std::fs::remove_dir_all(&d).map_err(|e| format!("removing {}: {e}", d.display()))?;
        }
    }
    if a.wipe {
        println!(
            "vyrn up: replica {i} wiped: its journals, snapshots and consensus directory removed (an empty disk)"
        );
    } else if a.lose_consensus {
        println!("vyrn up: replica {i}'s consensus directory removed (a lost drive)");
    }
    Ok(())
}

/// The lab faults' arguments against a home of `n` replicas and `nd` data boxes.
pub(super) fn check_faults(a: &Args, n: usize, nd: usize) -> Result<(), String> {
    if let Some((i, _)) = a.restart_replica.filter(|r| r.0 >= n) {
        return Err(format!("--restart-replica {i}: the home has {n} replicas"));
    }
    if let Some((d, _)) = a.kill_data.filter(|k| nd < 2 || k.0 >= nd) {
        return Err(format!(
            "--kill-data {d}: the home has {nd} data box(es); killing one needs a live backup (--data-boxes 2)"
        ));
    }
    if let Some(s) = a.kill_seq.filter(|&s| s + 4 > a.duration) {
        return Err(format!(
            "--kill-seq {s}: the run must go on at least 4 s after it (--duration {} is too short): the voters depose the box after 1 s of silence and seal after that",
            a.duration
        ));
    }
    if let Some((s, ms)) = a
        .interrupted()
        .filter(|&(s, ms)| s + ms.div_ceil(1000) + 4 > a.duration)
    {
        return Err(format!(
            "--stall-seq/--isolate-seq {s}@{ms}: the run must go on at least 4 s after the box resumes (--duration {} is too short)",
            a.duration
        ));
    }
    Ok(())
}

pub(super) fn stall_at(s: &str) -> Result<(u64, u64), String> {
    let (t, ms) = s.split_once('@').ok_or("S@MS, e.g. 8@3000")?;
    let t = t.parse::<u64>().map_err(|e| format!("{t}: {e}"))?;
    let ms = ms.parse::<u64>().map_err(|e| format!("{ms}: {e}"))?;
    if ms == 0 {
        return Err("a stall of 0 ms is no stall".into());
    }
    Ok((t, ms))
}

/// The lab's kills, each once, when the run's clock `t` (s since the load started) reaches it:
/// SIGKILL, left down.
#[derive(Default)]
pub(super) struct Kills {
    data: bool,
    seq: bool,
    /// `--stall-seq`: stopped (a thread resumes it).
    stall: bool,
    /// `--isolate-seq`: cut off (a thread heals it).
    isolate: bool,
}

impl Kills {
    pub(super) fn on_time(&mut self, a: &Args, t: f64, procs: &mut [Proc]) {
        // 07 §14 "data box down".
        if let Some((d, at)) = a.kill_data.filter(|k| !self.data && t >= k.1 as f64) {
            self.data = true;
            kill(procs, &format!("data box {d}"));
            println!("vyrn up: data box {d} killed (SIGKILL) at {at} s; it stays down");
        }
        // 07 §14 "sequencer process crash".
        if let Some(at) = a.kill_seq.filter(|&s| !self.seq && t >= s as f64) {
            self.seq = true;
            kill(procs, "sequencer");
            println!(
                "vyrn up: the sequencer box killed (SIGKILL) at {at} s; it stays down: the voters must depose it and seal its prefix (07 §9)"
            );
        }
        // 07 §14 "sequencer stalls".
        if let Some((at, ms)) = a.stall_seq.filter(|s| !self.stall && t >= s.0 as f64) {
            self.stall = true;
            let Some(p) = procs
                .iter()
                .find(|p| p.name == "sequencer" && p.status.is_none())
            else {
                return;
            };
            let pid = p.child.id() as libc::pid_t;
            p.signal(libc::SIGSTOP);
            println!("vyrn up: the sequencer box stopped (SIGSTOP) at {at} s for {ms} ms");
            // Resumed to the millisecond, off the once-a-second loop.
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(ms));
                // SAFETY: kill(2) on our own child's pid (still ours: it was stopped, not
                // reaped); no memory is touched.
                unsafe {
                    libc::kill(pid, libc::SIGCONT);
                }
                println!(
                    "vyrn up: the sequencer box resumed (SIGCONT) after {ms} ms: deposed by then, the voters refuse its frames and it fences; else it trades on"
                );
            });
        }
        // 07 §14 "sequencer cut off from ≥ 2 voters": every replica and the standby's cut the
        // box off at once (SIGUSR1), and heal after MS ms (SIGUSR2).
        if let Some((at, ms)) = a
            .lab
            .isolate_seq()
            .filter(|s| !self.isolate && t >= s.0 as f64)
        {
            self.isolate = true;
            let pids: Vec<libc::pid_t> = procs
                .iter()
                .filter(|p| {
                    (p.name.starts_with("replica") || p.name == "standby") && p.status.is_none()
                })
                .map(|p| p.child.id() as libc::pid_t)
                .collect();
            let signal = move |sig: libc::c_int| {
                for &pid in &pids {
                    // SAFETY: kill(2) on our own children's pids (not reaped: their status is
                    // unknown yet); no memory is touched.
                    unsafe {
                        libc::kill(pid, sig);
                    }
                }
            };
            signal(libc::SIGUSR1);
            println!(
                "vyrn up: the sequencer box cut off from every replica and the standby at {at} s for {ms} ms (it keeps running and answering until its self-fence)"
            );
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(ms));
                signal(libc::SIGUSR2);
                println!(
                    "vyrn up: the sequencer box back in touch after {ms} ms: deposed by then, the voters refuse its frames and it stays fenced"
                );
            });
        }
    }
}

/// SIGKILL the process `name` and mark it killed on purpose.
fn kill(procs: &mut [Proc], name: &str) {
    if let Some(p) = procs.iter_mut().find(|p| p.name == name) {
        p.signal(libc::SIGKILL);
        p.status = p.child.wait().ok();
        p.lab_killed = true;
    }
}

pub(super) fn restart_at(s: &str) -> Result<(usize, u64), String> {
    let (i, t) = s.split_once('@').ok_or("I@SECS, e.g. 1@4")?;
    let i = i.parse::<usize>().map_err(|e| format!("{i}: {e}"))?;
    let t = t.parse::<u64>().map_err(|e| format!("{t}: {e}"))?;
    Ok((i, t))
}

#[cfg(feature = "lab")]
pub(super) fn cut_path(s: &str) -> Result<String, String> {
    let (p, t) = s.split_once('@').ok_or("PATH@SECS, e.g. B@2")?;
    if !matches!(p, "A" | "B" | "a" | "b") {
        return Err(format!("{p}: path A or B"));
    }
    t.parse::<u32>().map_err(|e| format!("{t}: {e}"))?;
    Ok(s.to_string())
}
