//! `vyrn`: the operator's one command. `vyrn up` runs a whole home on this machine
//! with a live view and a report. Every role of a home runs from it — `vyrn seq`,
//! `vyrn data`, `vyrn replica`, `vyrn load` — from the home's TOML file, and so do the tools:
//! `vyrn config init|check|example`, `vyrn verify-cert`, `vyrn journal inspect`, and the
//! replication-path lab `vyrn paths`. `vyrn <command> --help` lists every option.
//!
//! Exit status: 0 all is well; 1 the command ran and found something wrong (a bad certificate,
//! a refused journal record, a box that fenced, nothing answered); 2 it could not start (a bad
//! argument or config, a missing file, a port in use) — with every problem on stderr.

mod cmd;

use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Debug, Parser)]
#[command(
    name = "vyrn",
    version,
    about = "vyrn: a low-latency sequencer appliance — every role of a home and the operator's tools",
    propagate_version = true
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Debug, Subcommand)]
enum Cmd {
    /// A whole home on this machine — replicas, data box, sequencer, load — with a live view
    /// and a report (Markdown + SVG plots) in the work directory.
    Up(cmd::up::Args),
    /// The sequencer box (07 §4) from its config file.
    Seq(cmd::seq::Args),
    /// One voting replica (07 §4.9–§8): receive, repair, decode, join, verify, vote, journal, replay.
    Replica(cmd::replica::Args),
    /// One data box (07 §5): copy 2 in, checked, hashed, kept, fanned out to the voters.
    Data(cmd::data::Args),
    /// The exchange clients' load generator (open loop or ping).
    Load(cmd::load::Args),
    /// The home's config file: write a dev home, check a file, print a commented example.
    #[command(subcommand)]
    Config(ConfigCmd),
    /// Check a REP_FinalityCert against a membership record (07 §6.5), or every certificate in
    /// a replica's cert journal against the home's membership.
    VerifyCert(VerifyCertArgs),
    /// The replica's block journal (07 §8.2).
    #[command(subcommand)]
    Journal(JournalCmd),
    /// Lab: the order stream on two lossy loopback paths with NACK repair (no box, no replica).
    Paths(cmd::paths::Args),
    /// The warm standby's finality listener (07 §6.8): the voters' finalize votes and
    /// certificates, batch-verified; its final height.
    Standby(cmd::standby::Args),
    /// Every metric family and alarm the roles render (the metric table), or what is generated
    /// from it: `--markdown` (docs/sre.md's reference), `--grafana` (deploy/grafana/vyrn.json).
    Metrics(MetricsArgs),
    /// Lab: an L2 delay line between two interfaces (the netns lab's metro link where the
    /// kernel has no `netem`; `deploy/lab/netns.sh`).
    LabDelay(cmd::lab::Args),
    /// Lab: the whole home on one thread in simulated time, under the faults a seed draws; one
    /// seed replayed exactly, or a campaign (docs/testing.md).
    #[cfg(feature = "lab")]
    Sim(cmd::sim::Args),
}

/// `vyrn metrics`.
#[derive(Debug, clap::Args)]
struct MetricsArgs {
    /// Print docs/sre.md's generated metric reference.
    #[arg(long, conflicts_with = "grafana")]
    markdown: bool,
    /// Print the Grafana dashboard.
    #[arg(long)]
    grafana: bool,
}

#[derive(Debug, Subcommand)]
enum ConfigCmd {
    /// Write a dev home into DIR: `home.toml`, fresh 0600 keys, the certified membership.
    Init {
        /// The directory (created).
        dir: PathBuf,
        /// Lanes.
        #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u8).range(1..))]
        lanes: u8,
        /// Sessions per lane.
        #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u16).range(1..))]
        sessions_per_lane: u16,
        /// Only the sequencer box's config: no voters, data box or membership.
        #[arg(long)]
        box_only: bool,
        /// The first of the home's loopback ports (the box's client port; the rest follow).
        #[arg(long, default_value_t = 27_400, value_parser = clap::value_parser!(u16).range(1024..=65_000))]
        base_port: u16,
    },
    /// Load a file and print every problem with its line, or a summary.
    Check {
        /// The file.
        file: PathBuf,
        /// Check it as a replica, data box or client reads it (no seed file).
        #[arg(long)]
        home_only: bool,
    },
    /// Print a commented example of every section and key.
    Example,
    /// Write a fresh Ed25519 seed to FILE (hex, mode 0600; refused if FILE exists) and print its
    /// public key: a voter's `vote_key`, a data box's or the standby's `link_key`.
    Keygen {
        /// The new key file.
        file: PathBuf,
    },
}

#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("what").required(true).args(["cert", "journal"])))]
struct VerifyCertArgs {
    /// A REP_Membership file (e.g. the home's `membership.bin`), checked first: its rules and
    /// its own certificate.
    #[arg(long, value_name = "FILE", requires = "cert")]
    membership: Option<PathBuf>,
    /// One REP_FinalityCert (wire bytes).
    #[arg(long, value_name = "FILE", requires = "membership")]
    cert: Option<PathBuf>,
    /// The home's file, whose membership the cert journal is checked against.
    #[arg(long, value_name = "FILE", requires = "journal")]
    home: Option<PathBuf>,
    /// A replica's cert journal: its first two drive directories.
    #[arg(
        long,
        value_name = "DIR[,DIR]",
        value_delimiter = ',',
        requires = "home"
    )]
    journal: Option<Vec<PathBuf>>,
}

#[derive(Debug, Subcommand)]
enum JournalCmd {
    /// List and verify every block, read-only (a running replica's journal is safe to inspect).
    Inspect {
        /// The journal's drive directories, in the replica's order.
        #[arg(
            long,
            value_name = "DIR[,DIR..]",
            value_delimiter = ',',
            required = true
        )]
        journal: Vec<PathBuf>,
        /// The home's file: check seq_sig under its seq_pub and the cert journal against its
        /// membership.
        #[arg(long, value_name = "FILE")]
        home: Option<PathBuf>,
        /// Write each finality certificate as DIR/cert-VIEW.bin.
        #[arg(long, value_name = "DIR")]
        certs_out: Option<PathBuf>,
        /// Only the summary and the problems, not a line per block.
        #[arg(long, short)]
        quiet: bool,
    },
}

/// Every thread of every role: a panic is logged as an alarm line and ends the process at once
/// (a role half running is worse than one down: its supervisor restarts it). The release
/// profile aborts on panic already; this makes dev builds do the same and names the thread
/// (security review: replica, data and consensus threads had no hook).
fn abort_on_panic(role: &'static str) {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let t = std::thread::current();
        eprintln!(
            "alarm=REP_A_PANIC role={role} thread={}: {info}",
            t.name().unwrap_or("?")
        );
        default(info);
        std::process::abort();
    }));
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let code = if e.use_stderr() { 2 } else { 0 };
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    let role = match &cli.cmd {
        Cmd::Seq(_) => Some("seq"),
        Cmd::Replica(_) => Some("replica"),
        Cmd::Data(_) => Some("data"),
        Cmd::Standby(_) => Some("standby"),
        _ => None,
    };
    if let Some(r) = role {
        abort_on_panic(r);
    }
    match cli.cmd {
        Cmd::Up(a) => cmd::up::run(a),
        Cmd::Seq(a) => cmd::seq::run(a),
        Cmd::Replica(a) => cmd::replica::run(a),
        Cmd::Data(a) => cmd::data::run(a),
        Cmd::Load(a) => cmd::load::run(a),
        Cmd::Paths(a) => cmd::paths::run(a),
        Cmd::LabDelay(a) => cmd::lab::run(a),
        #[cfg(feature = "lab")]
        Cmd::Sim(a) => cmd::sim::run_cmd(a),
        Cmd::Standby(a) => cmd::standby::run(a),
        Cmd::Metrics(a) => cmd::tools::metrics(a.markdown, a.grafana),
        Cmd::Config(ConfigCmd::Init {
            dir,
            lanes,
            sessions_per_lane,
            box_only,
            base_port,
        }) => cmd::seq::init(&dir, lanes, sessions_per_lane, box_only, base_port),
        Cmd::Config(ConfigCmd::Check { file, home_only }) => {
            cmd::tools::config_check(&file, home_only)
        }
        Cmd::Config(ConfigCmd::Keygen { file }) => cmd::tools::keygen(&file),
        Cmd::Config(ConfigCmd::Example) => {
            print!("{}", cmd::tools::EXAMPLE);
            ExitCode::SUCCESS
        }
        Cmd::VerifyCert(a) => match (a.membership, a.cert, a.home, a.journal) {
            (Some(m), Some(c), _, _) => cmd::tools::verify_cert(&m, &c),
            (_, _, Some(h), Some(j)) => cmd::replica::verify_cert_journal(&h, &j),
            _ => {
                eprintln!("vyrn verify-cert: --membership FILE --cert FILE, or --home FILE --journal DIR[,DIR]");
                ExitCode::from(2)
            }
        },
        Cmd::Journal(JournalCmd::Inspect {
            journal,
            home,
            certs_out,
            quiet,
        }) => cmd::tools::journal_inspect(&journal, home.as_deref(), certs_out.as_deref(), quiet),
    }
}
