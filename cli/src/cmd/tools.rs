//! The operator's tools: `vyrn config {init,check,example}`, `vyrn verify-cert`, `vyrn journal
//! inspect`. Each exits 0 when all is well, 1 when it found something wrong (a bad certificate,
//! a refused record, an unreadable drive, a config problem — `config check` reports a missing
//! file as one) and 2 when it could not look (a missing membership or certificate file, a bad
//! argument).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use vyrn_home::{BoxConfig, HomeConfig};
use vyrn_replica::disk::journal::{BlockJournal, JournalConfig};
use vyrn_wire::msg::ctrl::{CtrlMsg, RepMembership};
use vyrn_wire::msg::journal::BlockRecordRef;

/// The commented example the `vyrn config example` prints: every section and key of a home's
/// file with what it means. (Tested: with its key files written, it loads.)
pub const EXAMPLE: &str = include_str!("../../example.toml");

/// `vyrn config check FILE`: load the file as the sequencer does (with its seed) or, with
/// `--home-only`, as every other role does; print every problem, or a summary.
pub fn config_check(file: &Path, home_only: bool) -> ExitCode {
    if home_only {
        let Some(h) = HomeConfig::load_for("vyrn config check", file) else {
            return ExitCode::from(1);
        };
        println!(
            "{}: ok (as a replica, data box or client reads it): profile {:?}, epoch {}, {} lanes, {} sessions, {} voters, {} data box(es){}",
            file.display(),
            h.profile,
            h.epoch,
            h.engine.layout.n_lanes,
            h.engine.sessions.len(),
            h.voters,
            h.databoxes.len(),
            match &h.membership {
                Some(m) => format!(", membership certified by {} voters", m.cert.len()),
                None => String::new(),
            }
        );
        return ExitCode::SUCCESS;
    }
    match BoxConfig::load(file) {
        Ok(c) => {
            println!(
                "{}: ok (as the sequencer reads it): profile {:?}, {} lanes, {} sessions, {} voters, block {} µs",
                file.display(),
                c.profile,
                c.engine.layout.n_lanes,
                c.engine.sessions.len(),
                c.voters,
                c.block_ns / 1000
            );
            ExitCode::SUCCESS
        }
        Err(errs) => {
            for e in errs {
                eprintln!("vyrn config check: {e}");
            }
            ExitCode::from(1)
        }
    }
}

/// A `REP_Membership` file checked as an outsider checks it (07 §13.1): it parses, keeps every
/// rule, and its certificate verifies under its own voters' keys.
pub fn load_membership(file: &Path) -> Result<RepMembership, String> {
    let b = std::fs::read(file).map_err(|e| format!("{}: {e}", file.display()))?;
    let m = match CtrlMsg::parse(&b) {
        Ok(CtrlMsg::RepMembership(m)) => *m,
        Ok(_) => return Err(format!("{}: not a REP_Membership record", file.display())),
        Err(e) => return Err(format!("{}: does not parse: {e:?}", file.display())),
    };
    m.validate()
        .map_err(|e| format!("{}: breaks 07 §13.1: {e:?}", file.display()))?;
    m.verify_cert(&m)
        .map_err(|e| format!("{}: its certificate does not verify: {e:?}", file.display()))?;
    Ok(m)
}

/// `vyrn verify-cert --membership FILE --cert FILE`: one `REP_FinalityCert` (its wire bytes,
/// as a control message or bare) against a membership record, with
/// `vyrn_consensus::cert::verify_finality_cert` — the one check (07 §6.5).
pub fn verify_cert(membership: &Path, cert: &Path) -> ExitCode {
    let m = match load_membership(membership) {
        Ok(m) => m,
        Err(e) => {
            eprintln!("vyrn verify-cert: {e}");
            return ExitCode::from(2);
        }
    };
    let b = match std::fs::read(cert) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("vyrn verify-cert: {}: {e}", cert.display());
            return ExitCode::from(2);
        }
    };
    let c = match CtrlMsg::parse(&b) {
        Ok(CtrlMsg::FinalityCert(c)) => *c,
        Ok(_) => {
            println!("{}: BAD: not a REP_FinalityCert", cert.display());
            return ExitCode::from(1);
        }
        Err(_) => match vyrn_wire::msg::consensus::RepFinalityCert::parse(&b) {
            Ok(c) => c,
            Err(e) => {
                println!("{}: BAD: does not parse: {e:?}", cert.display());
                return ExitCode::from(1);
            }
        },
    };
    match vyrn_consensus::cert::verify_finality_cert(&c, &m) {
        Ok(()) => {
            println!(
                "{}: ok: epoch {} view {} finalizes heights {}..={} (last hash {}), {} of {} voters signed (Q {})",
                cert.display(),
                c.epoch,
                c.view,
                c.proposal.first_height,
                c.proposal.last_height,
                hex8(&c.proposal.last_hash),
                c.entries.len(),
                m.voters.len(),
                m.q
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            println!("{}: BAD: {e}", cert.display());
            ExitCode::from(1)
        }
    }
}

/// Print what a cert-journal audit found; true when every certificate verified.
pub fn print_cert_audit(a: &vyrn_replica::vote::CertAudit) -> bool {
    println!(
        "cert journal: {} finality certificate(s) verify against the membership (final through height {}), {} state-root certificate(s) verify (through root height {}), {} bad, {} of other kinds",
        a.ok,
        a.final_height,
        a.roots_ok,
        a.root_height,
        a.bad.len(),
        a.other
    );
    for (i, why) in &a.bad {
        println!("  cert entry {i}: BAD: {why}");
    }
    a.bad.is_empty()
}

fn hex8(b: &[u8]) -> String {
    b.iter().take(8).map(|x| format!("{x:02x}")).collect()
}

/// `vyrn journal inspect --journal DIR[,DIR..]`: open the block journal read-only (nothing on
/// disk changes), list every block with its place and header, and every record recovery
/// refused; with `--home`, `seq_sig` is checked under the home's `seq_pub` and the cert journal
/// (on the first two drives) is verified against the membership. `--certs-out DIR` writes each
/// finality certificate as `cert-<view>.bin` for `vyrn verify-cert`.
pub fn journal_inspect(
    drives: &[PathBuf],
    home: Option<&Path>,
    certs_out: Option<&Path>,
    quiet: bool,
) -> ExitCode {
    let home = match home.map(|h| HomeConfig::load_for("vyrn journal inspect", h)) {
        Some(None) => return ExitCode::from(2),
        Some(Some(h)) => Some(h),
        None => None,
    };
    let mut cfg = JournalConfig::new(drives.to_vec());
    cfg.read_only = true;
    cfg.verifying_key = home.as_ref().map(|h| h.seq_pub);
    cfg.later_keys = home
        .as_ref()
        .map(|h| h.later_tenure_keys())
        .unwrap_or_default();
    let (mut j, rep) = match BlockJournal::open(cfg) {
        Ok(x) => x,
        Err(e) => {
            eprintln!("vyrn journal inspect: {e:?}");
            return ExitCode::from(2);
        }
    };
    let mut bad = false;
    let heights = j.heights();
    println!(
        "block journal on {} drive(s){}: {} blocks{}",
        drives.len(),
        if home.is_some() {
            ", seq_sig checked under the home's seq_pub"
        } else {
            " (no --home: seq_sig not checked)"
        },
        heights.len(),
        match (heights.first(), heights.last()) {
            (Some(a), Some(b)) => format!(", heights {a}..={b}"),
            _ => String::new(),
        }
    );
    if !quiet {
        println!("  height  drive  segment      offset       len  kind    steps                  header hash");
    }
    for h in &heights {
        let loc = j.locate(*h);
        match j.read(*h) {
            Ok(buf) => {
                if quiet {
                    continue;
                }
                match BlockRecordRef::parse(&buf) {
                    Ok(r) => {
                        let l = loc.unwrap_or(vyrn_replica::disk::journal::BlockLoc {
                            drive: 0,
                            segment: 0,
                            offset: 0,
                            len: 0,
                        });
                        println!(
                            "  {:>6}  {:>5}  {:>7}  {:>10}  {:>8}  {:<6}  {:<21}  {}",
                            h,
                            l.drive,
                            l.segment,
                            l.offset,
                            l.len,
                            format!("{:?}", r.kind),
                            format!("{}..={}", r.header.first_step, r.header.last_step),
                            hex8(&r.header.header_hash())
                        );
                    }
                    Err(e) => {
                        bad = true;
                        println!("  {h:>6}  does not parse: {e:?}");
                    }
                }
            }
            Err(e) => {
                bad = true;
                println!("  {h:>6}  REFUSED on read: {e:?}");
            }
        }
    }
    let gaps = heights.windows(2).filter(|w| w[1] != w[0] + 1).count();
    if gaps > 0 {
        println!("{gaps} gap(s) between held heights (retention deletes the oldest; a replica refetches the rest, 07 §14)");
    }
    for r in &rep.refused {
        bad = true;
        println!(
            "REFUSED at recovery: drive {} segment {} offset {} height {:?}: {:?}",
            r.drive, r.segment, r.offset, r.height, r.why
        );
    }
    for t in &rep.truncated {
        println!(
            "torn tail: drive {} segment {} from offset {} ({} bytes) — a writable open (the replica's restart) cuts it; left in place",
            t.drive, t.segment, t.offset, t.dropped
        );
    }
    for d in &rep.failed_drives {
        bad = true;
        println!("drive {d} ({}) unreadable", drives[*d].display());
    }
    for f in &rep.foreign {
        println!("foreign file left alone: {}", f.display());
    }
    if let Some(h) = &home {
        let certs = &drives[..drives.len().min(2)];
        match h.membership.as_ref() {
            Some(m) => match vyrn_replica::vote::verify_cert_journal(
                certs,
                m,
                super::replica::root_blocks(h),
            ) {
                Ok(a) => bad |= !print_cert_audit(&a),
                Err(e) => {
                    bad = true;
                    println!("cert journal: UNREADABLE: {e}");
                }
            },
            None => println!("cert journal: the home names no membership file; not checked"),
        }
    }
    if let Some(out) = certs_out {
        match export_certs(&drives[..drives.len().min(2)], out) {
            Ok(n) => println!("wrote {n} finality certificate(s) to {}", out.display()),
            Err(e) => {
                eprintln!("vyrn journal inspect: --certs-out: {e}");
                return ExitCode::from(2);
            }
        }
    }
    if bad {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

fn export_certs(dirs: &[PathBuf], out: &Path) -> Result<usize, String> {
    use vyrn_replica::disk::journal::cert::{CertJournal, CertKind};
    let mut j = CertJournal::open_read_only(dirs).map_err(|e| format!("cert journal: {e}"))?;
    std::fs::create_dir_all(out).map_err(|e| format!("{}: {e}", out.display()))?;
    let mut n = 0;
    for i in 0..j.len() {
        if let Ok((CertKind::Finality, b)) = j.get(i) {
            let view = match CtrlMsg::parse(&b) {
                Ok(CtrlMsg::FinalityCert(c)) => c.view,
                _ => continue,
            };
            let p = out.join(format!("cert-{view}.bin"));
            std::fs::write(&p, &b).map_err(|e| format!("{}: {e}", p.display()))?;
            n += 1;
        }
    }
    Ok(n)
}

/// `vyrn config keygen FILE`: a fresh seed from the OS, written 0600 (never over a file), and its
/// public key printed for the home file.
pub fn keygen(file: &std::path::Path) -> ExitCode {
    if file.exists() {
        eprintln!(
            "vyrn config keygen: {} exists; not overwritten",
            file.display()
        );
        return ExitCode::from(2);
    }
    let mut seed = [0u8; 32];
    let got = std::fs::File::open("/dev/urandom")
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut seed));
    if let Err(e) = got {
        eprintln!("vyrn config keygen: /dev/urandom: {e}");
        return ExitCode::from(2);
    }
    let mut hex: String = seed.iter().map(|b| format!("{b:02x}")).collect();
    hex.push('\n');
    let pubkey = ed25519_dalek::SigningKey::from_bytes(&seed).verifying_key();
    zeroize::Zeroize::zeroize(&mut seed);
    let r = vyrn_home::write_secret_file(file, hex.as_bytes());
    zeroize::Zeroize::zeroize(&mut hex);
    if let Err(e) = r {
        eprintln!("vyrn config keygen: {}: {e}", file.display());
        return ExitCode::from(2);
    }
    let p: String = pubkey
        .as_bytes()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    println!("{p}");
    ExitCode::SUCCESS
}

/// The metric table of every role of this binary (each declared beside the code that renders
/// it, in the crate that owns the values).
pub fn metric_table() -> Result<vyrn_metrics::Table, Vec<&'static str>> {
    vyrn_metrics::Table::new(
        &[
            vyrn_metrics::TABLE,
            vyrn_seq::metrics::METRICS,
            vyrn_seq::standby::METRICS,
            vyrn_replica::node::metrics::METRICS,
            vyrn_data::Counters::METRICS,
            vyrn_client::loadgen::metrics::METRICS,
        ],
        &[
            vyrn_seq::metrics::ALARMS,
            vyrn_replica::node::metrics::ALARMS,
        ],
    )
}

/// `vyrn metrics`: the metric table (every family and alarm the roles of this binary render),
/// or the docs and dashboard generated from it.
pub fn metrics(markdown: bool, grafana: bool) -> ExitCode {
    let t = match metric_table() {
        Ok(t) => t,
        Err(bad) => {
            eprintln!("vyrn metrics: families two roles declare differently: {bad:?}");
            return ExitCode::from(1);
        }
    };
    let text = if markdown {
        vyrn_metrics::reference_markdown(&t)
    } else if grafana {
        vyrn_metrics::grafana_dashboard(&t)
    } else {
        let mut o = String::new();
        for m in t.metrics() {
            o += &format!(
                "{} {:?} [{}] {}\n",
                m.name,
                m.kind,
                m.labels.join(","),
                m.help.split_whitespace().collect::<Vec<_>>().join(" ")
            );
        }
        for a in t.alarms() {
            o += &format!("alarm {} ({})\n", a.name, a.role);
        }
        o
    };
    // A closed pipe (`| head`) ends the output, not the process with a panic.
    let _ = std::io::Write::write_all(&mut std::io::stdout().lock(), text.as_bytes());
    ExitCode::SUCCESS
}
