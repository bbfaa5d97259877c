//! `vyrn up`: a whole home on this machine as separate processes — the
//! replicas, the data box(es), the sequencer and the load generator, each a `vyrn` subcommand
//! of this same binary — from a generated dev home in a work directory (or `--home FILE`), with
//! a live view once a second and, at the end, a Markdown report with SVG plots.
//!
//! The view and the report read only what the processes publish: each is started with
//! `--metrics` on a loopback port and scraped once a second (`vyrn-metrics`), its stdout and
//! stderr go to a log file in the run's directory, and its summary lines are read from there at
//! the end. `Ctrl-C` or the end of `--duration` stops the run: the roles run in their own
//! process group (a terminal's Ctrl-C reaches `vyrn up` alone), and `vyrn up` stops them in
//! order — the load (it stops sending, waits up to 5 s for every fill's Durable and Final, prints
//! its summary), then the box, then the replicas and data boxes, each with its summary. A role
//! dies with `vyrn up` whatever ends it (PR_SET_PDEATHSIG).
//!
//! Exit status: 0 when the home traded and kept its promises — orders answered, every fill
//! durable and final, every replica's replay digest equal, every journal verifying, no process
//! failing; 1 otherwise (the report says which); 2 when the home could not start.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::io::{IsTerminal, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use vyrn_home::{BoxConfig, HomeConfig};

mod faults;
mod report;
#[cfg(feature = "lab")]
use faults::cut_path;
use faults::{check_faults, restart_at, stall_at, Kills};
use report::report;

/// `vyrn up`: a BASE home on loopback with its load, a live view and a report.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Work directory: the generated home (once), then one `run-<time>` directory per run with
    /// every process's log, the journals and `report.md` (the newest three runs are kept).
    #[arg(long, default_value = "target/vyrn-up", value_name = "DIR")]
    pub dir: PathBuf,
    /// Seconds of load (0: until Ctrl-C).
    #[arg(long, default_value_t = 10)]
    pub duration: u64,
    /// Open-loop rate, msgs/s.
    #[arg(long, default_value_t = 5000)]
    pub rate: u64,
    /// The mix's seed.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// An existing home file (its keys under `keys/` next to it) instead of the generated dev
    /// home.
    #[arg(long, value_name = "FILE")]
    pub home: Option<PathBuf>,
    /// Journal on the last replica only. By default every voter journals (07 §8.2: a final
    /// block is on Q replicas' drives within 5 ms, and a restarted replica's peers serve what it
    /// lacks from their journals); this is the lighter load of a machine with too few cores.
    #[arg(long)]
    pub journal_last: bool,
    /// Every replica runs replay on its own thread (`vyrn replica --replay-thread`, 07 §7.2).
    #[arg(long)]
    pub replay_thread: bool,
    /// A line a second instead of the full-screen view (for logs and CI; the default when
    /// stdout is not a terminal).
    #[arg(long)]
    pub plain: bool,
    /// First of the metrics ports (box, data boxes, replicas, load follow).
    #[arg(long, default_value_t = 27_490, value_parser = clap::value_parser!(u16).range(1024..=65_000))]
    pub metrics_port: u16,
    /// Seconds of ping before the open loop: one request in flight, request -> answer round
    /// trips (0: none).
    #[arg(long, default_value_t = 2)]
    pub ping_secs: u64,
    /// Lab faults that need test code in the roles: only in a `vyrn` built with the `lab`
    /// feature (`--cut-path`, `--attack`, `--misbehave`).
    #[command(flatten)]
    pub lab: UpLab,
    /// Lab fault: SIGKILL replica I S seconds after the load starts and start it again a
    /// second later on the same files (`1@4`): 07 §14 "replica crash" — trading goes on with
    /// the other three, and the restarted replica must catch up (NACK, peer repair, data
    /// fetch) to the same replay digest as the others by the end.
    #[arg(long, value_name = "I@SECS", value_parser = restart_at)]
    pub restart_replica: Option<(usize, u64)>,
    /// With `--restart-replica`: remove the replica's consensus directory (its Simplex journal
    /// partition) before it starts again, as a replaced drive would. A replica with a block
    /// journal starts its engine from its cert journal's newest certificate (07 §8.2); every
    /// voter journals unless `--journal-last`.
    #[arg(long, requires = "restart_replica")]
    pub lose_consensus: bool,
    /// With `--restart-replica`: remove every directory of the replica (its block and cert
    /// journals, its snapshots and its consensus partition) before it starts again — a new box
    /// with an empty disk (07 §7.6). It catches up from its peers and the box alone.
    #[arg(long, requires = "restart_replica", conflicts_with = "lose_consensus")]
    pub wipe: bool,
    /// Data boxes of a generated home (1 or 2; with 2, sessions alternate between them and each
    /// is the other's backup home, 07 §5.7). Its own home directory (`home-2data`).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u8).range(1..=2))]
    pub data_boxes: u8,
    /// Lab fault: SIGKILL data box D S seconds after the load starts and leave it down (`0@3`):
    /// 07 §14 "data box down" — the replicas gossip DataDown, redirect its sessions to the
    /// backup box, the clients resend copy 2 there, and nothing acked is lost. Needs a home
    /// with two data boxes (`--data-boxes 2`).
    #[arg(long, value_name = "D@SECS", value_parser = restart_at)]
    pub kill_data: Option<(usize, u64)>,
    /// Lab fault: SIGKILL the sequencer box S seconds after the load starts and leave it down
    /// (07 §14 "sequencer process crash"): every voter must find the silence, Q of them depose
    /// the tenure, and the seal must finalize the prefix at every voter, naming the warm standby
    /// next when its replica is promotable (10 s of history: S ≥ 8 with the 2 s ping); the
    /// standby is then promoted (07 §9.5), the voters follow its tenure and the clients, told by
    /// the data boxes, resend and trade on. At least 4 s of the run must follow.
    #[arg(long, value_name = "SECS")]
    pub kill_seq: Option<u64>,
    /// Lab fault: stop the sequencer box (SIGSTOP) S seconds after the load starts for MS
    /// milliseconds, then let it go on (SIGCONT): a box that stalls (07 §14 "sequencer stalls").
    /// Shorter than the voters' detection (a dev home's 1 s of silence plus the Silence round)
    /// and nothing happens but a pause; longer, and the voters depose it, seal its prefix and
    /// promote the standby as for `--kill-seq`, and the box, resumed, is deposed for good: the
    /// voters refuse its frames (INV-REP-5), send it no acks, and it fences (07 §4.8).
    #[arg(long, value_name = "S@MS", value_parser = stall_at, conflicts_with = "kill_seq")]
    pub stall_seq: Option<(u64, u64)>,
    /// Run every role in its own network namespace of the netns lab (build it first, as root:
    /// `deploy/lab/netns.sh up`): the box, each voter and each data box on a facility network
    /// and — box and voters — on two separate path networks, the load from here. The home is
    /// generated with the lab's addresses (`home-netns`); `--cut-path` then takes the path's
    /// whole network down (its bridge) instead of a knob in the replicas.
    #[arg(long, conflicts_with = "home")]
    pub netns: bool,
    /// `dev` (default): a home that fits a 2-core machine — the box's hot path on one core,
    /// everything else sharing the other. `ref`: the REF core maps on a real box — the box with
    /// one pinned core per tile (8 lanes: 18 cores), each replica on 2 cores of its own, each data
    /// box and the load on one, the machine's first 2 cores left to the kernel (30 in all with one
    /// data box); refused, naming what is missing, where this process's affinity mask lacks them.
    #[arg(long, value_enum, default_value_t = UpProfile::Dev, conflicts_with = "home")]
    pub profile: UpProfile,
    /// First port of a generated home (its client port; the rest follow, up to +60).
    #[arg(long, default_value_t = 27_400, value_parser = clap::value_parser!(u16).range(1024..=65_000))]
    pub base_port: u16,
}

/// `vyrn up`'s lab faults that need test code in the roles (feature `lab`); the product build
/// refuses them.
#[cfg(feature = "lab")]
#[derive(Debug, Clone, Default, clap::Args)]
pub struct UpLab {
    /// Lab fault: cut replication path A or B at every replica from S seconds after they start
    /// (`B@5`): 07 §14 "path down" — REP_A_PATH at the replicas, trading goes on.
    #[arg(long, value_name = "PATH@SECS", value_parser = cut_path)]
    pub cut_path: Option<String>,
    /// Lab fault: SECS into the load, and every second for three seconds, send the security
    /// review's single-datagram attacks with spoofed sources (`cmd::attack`: F1–F5, F17) at the
    /// home through a raw socket (root only). The verdict is the same: the home must keep
    /// trading, finalizing and replaying the same responses.
    #[arg(long, value_name = "SECS")]
    pub attack: Option<u64>,
    /// Run a misbehaving client beside the load on the home's second session (`vyrn load
    /// --misbehave`: resends of multi-message packets, packets ahead of sequence, exact and
    /// conflicting duplicates, refused messages, packets no lane logs); the verdict then also
    /// needs its next valid packet answered (`docs/wire.md` "What the box logs").
    #[arg(long)]
    pub misbehave: bool,
    /// Lab fault: cut the sequencer box off from every replica and the standby's replica, both
    /// ways (its paths, its control port), S seconds after the load starts, for MS milliseconds
    /// (07 §14 "sequencer cut off from ≥ 2 voters"). The box keeps running and answering its
    /// clients until its self-fence stops it (no voter acks); the voters depose it, seal the
    /// prefix they hold and promote the standby as for `--kill-seq`. The responses the box sent
    /// after the cut and before its fence are held by no reporter: the clients are told they
    /// were reverted (07 §9.6 (b), `TenureEnd`), and the report counts them. Healed, the box is
    /// a deposed tenure: refused (INV-REP-5), fenced for good.
    #[arg(long, value_name = "S@MS", value_parser = stall_at, conflicts_with_all = ["kill_seq", "stall_seq"])]
    pub isolate_seq: Option<(u64, u64)>,
}

/// `vyrn up`'s lab faults: none in the product build.
#[cfg(not(feature = "lab"))]
#[derive(Debug, Clone, Default, clap::Args)]
pub struct UpLab {}

impl UpLab {
    /// `--cut-path`.
    pub fn cut_path(&self) -> Option<&String> {
        #[cfg(feature = "lab")]
        return self.cut_path.as_ref();
        #[cfg(not(feature = "lab"))]
        None
    }
    /// `--attack`.
    pub fn attack(&self) -> Option<u64> {
        #[cfg(feature = "lab")]
        return self.attack;
        #[cfg(not(feature = "lab"))]
        None
    }
    /// `--isolate-seq`.
    pub fn isolate_seq(&self) -> Option<(u64, u64)> {
        #[cfg(feature = "lab")]
        return self.isolate_seq;
        #[cfg(not(feature = "lab"))]
        None
    }
    /// `--misbehave`.
    pub fn misbehave(&self) -> bool {
        #[cfg(feature = "lab")]
        return self.misbehave;
        #[cfg(not(feature = "lab"))]
        false
    }
}

/// `--attack`: the raw socket, opened before the load (a refusal stops the run at once), and
/// the bursts sent.
struct Attacker {
    #[cfg(feature = "lab")]
    raw: Option<super::attack::Raw>,
    at: Option<u64>,
    /// (datagrams, bursts)
    sent: (usize, u64),
}

impl Attacker {
    fn open(a: &Args) -> Result<Attacker, String> {
        Ok(Attacker {
            #[cfg(feature = "lab")]
            raw: match a.lab.attack() {
                Some(_) => Some(super::attack::Raw::open()?),
                None => None,
            },
            at: a.lab.attack(),
            sent: (0, 0),
        })
    }

    /// Three bursts, a second apart, from `--attack`'s second on.
    fn tick(&mut self, t: f64, home: &HomeConfig) {
        let Some(at) = self.at else { return };
        if self.sent.1 >= 3 || t < (at + self.sent.1) as f64 {
            return;
        }
        #[cfg(feature = "lab")]
        if let Some(raw) = self.raw.as_ref() {
            self.sent.0 += super::attack::burst(raw, home);
        }
        #[cfg(not(feature = "lab"))]
        let _ = home;
        self.sent.1 += 1;
        println!(
            "vyrn up: attack burst {} at {t:.0} s ({} spoofed datagrams so far)",
            self.sent.1, self.sent.0
        );
    }
}

/// `vyrn up --profile`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum UpProfile {
    /// Fits a 2-core machine.
    Dev,
    /// One pinned core per tile (missing-chapters §0), on a machine with the cores for it.
    Ref,
}

/// Lanes of a `--profile ref` home (deploy/ref-home.toml's).
pub const REF_LANES: u8 = 8;
/// Cores each replica gets on `--profile ref`: its loop, and its Simplex engine and journal writer.
pub const REF_REPLICA_CORES: usize = 2;
/// The machine's first cores, left to the kernel, interrupts and `vyrn up` itself (the REF box's
/// housekeeping cores, `deploy/README.md`).
pub const REF_HOUSEKEEPING: usize = 2;

/// Where every role of a `--profile ref` home runs: disjoint cores of the affinity mask.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefPlacement {
    /// The box's `core_map`, one per tile in tile order.
    pub box_cores: Vec<usize>,
    /// Each replica's cores: its loop first, then its engine's and journal writer's.
    pub replicas: Vec<Vec<usize>>,
    /// Each data box's core.
    pub data: Vec<usize>,
    /// The load generator's core.
    pub load: usize,
}

/// Place a REF home of `lanes` lanes, `voters` replicas and `databoxes` data boxes on `mask`
/// (this process's CPUs) as `topo` lays them out: one CPU per physical core, SMT siblings left
/// idle, the lowest [`REF_HOUSEKEEPING`] cores to the kernel, the box first on the NUMA node and
/// L3 with the most cores (`vyrn_tile::topo`); or say how many cores are missing.
pub fn ref_placement(
    mask: &[usize],
    topo: &vyrn_tile::topo::Topology,
    lanes: u8,
    voters: usize,
    databoxes: usize,
) -> Result<RefPlacement, String> {
    let order = topo.place_order(mask);
    let mut low = order.cores.clone();
    low.sort_unstable();
    low.truncate(REF_HOUSEKEEPING);
    let mut cpus: Vec<usize> = low.clone();
    cpus.extend(order.cores.iter().filter(|c| !low.contains(c)));
    let box_n = vyrn_home::ref_box_tiles(lanes);
    let need = REF_HOUSEKEEPING + box_n + voters * REF_REPLICA_CORES + databoxes + 1;
    if cpus.len() < need {
        return Err(format!(
            "--profile ref needs {need} cores: {REF_HOUSEKEEPING} left to the kernel, the box's {box_n} tiles ({lanes} lanes + 10), {voters} replicas x {REF_REPLICA_CORES}, {databoxes} data box(es) and the load, 1 each; this process may run on {} ({}). Run it on a REF box, or use the default profile (dev)",
            cpus.len(),
            cpus.iter().map(|c| c.to_string()).collect::<Vec<_>>().join(",")
        ) + &if order.siblings.is_empty() {
            String::new()
        } else {
            format!(" physical cores; their SMT siblings {:?} are left idle", order.siblings)
        });
    }
    let mut it = cpus.into_iter().skip(REF_HOUSEKEEPING);
    let mut take = |k: usize| -> Vec<usize> { it.by_ref().take(k).collect() };
    let box_cores = take(box_n);
    let replicas = (0..voters).map(|_| take(REF_REPLICA_CORES)).collect();
    let data = take(databoxes);
    let load = take(1)[0];
    Ok(RefPlacement {
        box_cores,
        replicas,
        data,
        load,
    })
}

/// [`ref_placement`] on this process's CPUs and this machine's topology.
fn ref_placement_here(databoxes: usize) -> Result<RefPlacement, String> {
    let mask: Vec<usize> = core_affinity::get_core_ids()
        .unwrap_or_default()
        .iter()
        .map(|c| c.id)
        .collect();
    let topo = vyrn_tile::topo::Topology::detect();
    ref_placement(&mask, &topo, REF_LANES, 4, databoxes)
}

/// The box's samples — the standby's page once it was promoted (07 §9.5: its process is the
/// box, serving `vyrn_seq_*`) — and the live line's note of the tenure the replicas follow.
fn box_samples(last: &HashMap<String, Samples>, n: usize) -> (Samples, String) {
    let get = |name: &str| last.get(name).cloned().unwrap_or_default();
    let tenure = (0..n)
        .map(|i| get(&format!("replica {i}")).get("vyrn_replica_tenure"))
        .fold(0.0f64, f64::max);
    let promoted = get("standby").get("vyrn_seq_closed_height") > 0.0;
    let note = match (tenure > 0.0, promoted) {
        (false, _) => String::new(),
        (true, true) => format!(" tenure {tenure:.0} (the standby's box)"),
        (true, false) => format!(" tenure {tenure:.0}"),
    };
    let sq = get(if promoted { "standby" } else { "sequencer" });
    (sq, note)
}

/// Whether `name`'s page can be the box's: the sequencer's, or the promoted standby's (07 §9.5).
fn is_box_page(name: &str) -> bool {
    name == "sequencer" || name == "standby"
}

/// A journaling replica's arguments in a run: its two drive directories `d`, the portable
/// backend, 16 MiB segments (a run of seconds fills a fraction of the default 256 MiB, each
/// preallocated per drive and replica), 07 §7.5's snapshots every `snap` blocks (0: none; 60 s
/// of blocks would never come in a run of seconds), and its writer on the `cold` core where
/// there is one.
fn journal_args(d: &[PathBuf], snap: u64, cold: Option<usize>) -> Vec<String> {
    let mut v = vec![
        "--journal".to_string(),
        d.iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(","),
        "--journal-backend".into(),
        "std".into(),
        "--journal-segment-mb".into(),
        "16".into(),
        "--snapshot-blocks".into(),
        snap.to_string(),
    ];
    if let Some(c) = cold {
        v.extend(["--journal-cores".into(), c.to_string()]);
    }
    v
}

/// Run directories kept in the work directory (each holds its journals, ~0.5 GB with the
/// journal's 256 MiB segments); older ones are removed when a run starts.
const KEEP_RUNS: usize = 3;

/// Remove all but the newest `keep` `run-*` directories of `dir`.
fn prune_runs(dir: &Path, keep: usize) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    let mut runs: Vec<PathBuf> = rd
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.is_dir()
                && p.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with("run-"))
        })
        .collect();
    runs.sort();
    let n = runs.len().saturating_sub(keep);
    for old in &runs[..n] {
        let _ = std::fs::remove_dir_all(old);
    }
}

/// One scrape: series (`name{labels}`) → value.
#[derive(Debug, Default, Clone)]
struct Samples(HashMap<String, f64>);

impl Samples {
    fn parse(text: &str) -> Samples {
        let mut m = HashMap::new();
        for l in text.lines() {
            if l.starts_with('#') {
                continue;
            }
            if let Some((series, v)) = l.rsplit_once(' ') {
                if let Ok(x) = v.parse::<f64>() {
                    m.insert(series.to_string(), x);
                }
            }
        }
        Samples(m)
    }
    fn get(&self, series: &str) -> f64 {
        self.0.get(series).copied().unwrap_or(0.0)
    }
    /// Sum of every series of family `name`.
    fn sum(&self, name: &str) -> f64 {
        self.0
            .iter()
            .filter(|(k, _)| k.split('{').next() == Some(name))
            .map(|(_, v)| v)
            .sum()
    }
    /// Active alarms: the label sets of `vyrn_alarm_active` series at 1.
    fn alarms(&self) -> Vec<String> {
        let mut v: Vec<String> = self
            .0
            .iter()
            .filter(|(k, x)| k.starts_with("vyrn_alarm_active{") && **x >= 1.0)
            .map(|(k, _)| k.trim_start_matches("vyrn_alarm_active").to_string())
            .collect();
        v.sort();
        v
    }
}

fn scrape(addr: SocketAddr) -> Option<Samples> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_millis(100)).ok()?;
    let _ = s.set_read_timeout(Some(Duration::from_millis(500)));
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: vyrn\r\n\r\n")
        .ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    let body = out.split_once("\r\n\r\n")?.1;
    out.starts_with("HTTP/1.1 200")
        .then(|| Samples::parse(body))
}

/// A role's process.
/// A dev home's data box's nice value (`vyrn data --nice`).
const DEV_DATA_NICE: i32 = -10;

/// `vyrn data`'s arguments for box `d` of the home in `home_file`.
fn data_args(home_file: &str, d: u16, placement: Option<&RefPlacement>) -> Vec<String> {
    let mut args = vec![
        "data".to_string(),
        "--home".into(),
        home_file.into(),
        "--index".into(),
        d.to_string(),
    ];
    match placement {
        Some(pl) => args.extend(["--cores".into(), pl.data[d as usize].to_string()]),
        // dev: the data box shares the cold core with the replicas and the clients; its frames
        // waited up to 76 ms for that core at the load's start (measured), past the 20 ms the
        // replicas allow. It uses little CPU: a higher weight keeps it on time.
        None => args.extend(["--nice".into(), DEV_DATA_NICE.to_string()]),
    }
    args
}

#[derive(Debug)]
struct Proc {
    name: String,
    child: Child,
    log: PathBuf,
    metrics: Option<SocketAddr>,
    status: Option<std::process::ExitStatus>,
    /// Killed on purpose by a lab fault and left down (`--kill-data`): not a failure.
    lab_killed: bool,
}

/// A client process (the load generator, the misbehaving client): it ends by itself, so its exit
/// is not a role failing.
fn is_client(name: &str) -> bool {
    name == "load" || name == "misbehave"
}

/// The netns lab's namespaces (`deploy/lab/netns.sh`).
mod lab {
    /// The hub: the three networks' bridges.
    pub const HUB: &str = "vyrn-hub";
    /// What the lab's script says of its paths (`paths: <delay>`).
    pub const PATHS_FILE: &str = "/run/vyrn-lab/paths";
    /// The sequencer box.
    pub const BOX: &str = "vyrn-box";
    /// Voter `i`'s namespace.
    pub fn voter(i: usize) -> String {
        format!("vyrn-r{i}")
    }
    /// Data box `d`'s namespace.
    pub fn data(d: u16) -> String {
        format!("vyrn-d{d}")
    }
    /// Path `p`'s bridge in the hub.
    pub fn path_bridge(p: &str) -> &'static str {
        if p.eq_ignore_ascii_case("a") {
            "br1"
        } else {
            "br2"
        }
    }
    /// Is the lab up (every namespace there)?
    pub fn check(voters: usize, databoxes: u16) -> Result<(), String> {
        let out = std::process::Command::new("ip")
            .args(["netns", "list"])
            .output()
            .map_err(|e| format!("ip netns list: {e} (iproute2 is needed for --netns)"))?;
        let have = String::from_utf8_lossy(&out.stdout).to_string();
        let names: Vec<String> = [HUB.to_string(), BOX.to_string()]
            .into_iter()
            .chain((0..voters).map(voter))
            .chain((0..databoxes).map(data))
            .collect();
        let missing: Vec<&String> = names
            .iter()
            .filter(|n| !have.split_whitespace().any(|w| w == n.as_str()))
            .collect();
        if missing.is_empty() {
            Ok(())
        } else {
            Err(format!(
                "--netns: the lab is not up (no namespace {}): run `deploy/lab/netns.sh up` as root first",
                missing
                    .iter()
                    .map(|s| s.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
        }
    }
    /// Set path `p`'s bridge down (`up` false) or up.
    pub fn set_path(p: &str, up: bool) -> Result<(), String> {
        let st = std::process::Command::new("ip")
            .args(["-n", HUB, "link", "set", path_bridge(p)])
            .arg(if up { "up" } else { "down" })
            .status()
            .map_err(|e| format!("ip: {e}"))?;
        if st.success() {
            Ok(())
        } else {
            Err(format!("ip -n {HUB} link set {}: {st}", path_bridge(p)))
        }
    }
}

/// A role never outlives `vyrn up`: one still running when its `Proc` goes (an error midway,
/// a panic) is killed and reaped.
impl Drop for Proc {
    fn drop(&mut self) {
        if self.status.is_none() {
            let _ = self.child.kill();
            self.status = self.child.wait().ok();
        }
    }
}

impl Proc {
    fn spawn(
        name: &str,
        args: &[String],
        log: PathBuf,
        metrics: Option<SocketAddr>,
        ns: Option<&str>,
    ) -> Result<Proc, String> {
        let exe = std::env::current_exe().map_err(|e| format!("own binary: {e}"))?;
        let f = std::fs::File::create(&log).map_err(|e| format!("{}: {e}", log.display()))?;
        let f2 = f
            .try_clone()
            .map_err(|e| format!("{}: {e}", log.display()))?;
        // In a lab namespace: `ip netns exec NS` enters it and execs the role in the same
        // process (so the pid, the signals and PR_SET_PDEATHSIG below are the role's).
        let mut c = match ns {
            Some(ns) => {
                let mut c = Command::new("ip");
                c.args(["netns", "exec", ns]).arg(exe);
                c
            }
            None => Command::new(exe),
        };
        c.args(args).stdin(Stdio::null()).stdout(f).stderr(f2);
        // Its own process group: a terminal's Ctrl-C reaches `vyrn up` alone, which then stops
        // the roles in order (load, box, the rest). And it dies with `vyrn up`, whatever ends it
        // (an abort, SIGKILL): PR_SET_PDEATHSIG.
        c.process_group(0);
        let parent = std::process::id() as libc::pid_t;
        let hook = move || -> std::io::Result<()> {
            // SAFETY: PR_SET_PDEATHSIG with a signal number touches no memory of ours.
            unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) };
            // SAFETY: getppid has no preconditions.
            if unsafe { libc::getppid() } != parent {
                // SAFETY: _exit ends the forked child at once, running nothing of the parent's.
                unsafe { libc::_exit(1) };
            }
            Ok(())
        };
        // SAFETY: the hook runs in the forked child before exec and makes only
        // async-signal-safe calls (prctl, getppid, _exit); it allocates nothing.
        unsafe { c.pre_exec(hook) };
        if let Some(m) = metrics {
            c.arg("--metrics").arg(m.to_string());
        }
        let child = c.spawn().map_err(|e| format!("starting {name}: {e}"))?;
        Ok(Proc {
            name: name.to_string(),
            child,
            log,
            metrics,
            status: None,
            lab_killed: false,
        })
    }
    fn poll(&mut self) -> bool {
        if self.status.is_none() {
            if let Ok(Some(s)) = self.child.try_wait() {
                self.status = Some(s);
            }
        }
        self.status.is_some()
    }
    fn signal(&self, sig: libc::c_int) {
        if self.status.is_none() {
            // SAFETY: kill(2) on our own child's pid; no memory is touched.
            unsafe {
                libc::kill(self.child.id() as libc::pid_t, sig);
            }
        }
    }
    fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

/// One second of the timeline (what the report plots).
#[derive(Debug, Clone, Copy, Default)]
struct Tick {
    t: f64,
    in_ps: f64,
    out_ps: f64,
    ack_p50_ms: f64,
    ack_p99_ms: f64,
    fill_p99_ms: f64,
    final_lag: f64,
}

fn ms(s: &Samples, what: &str, q: &str) -> f64 {
    s.get(&format!(
        "vyrn_load_latency_seconds{{what=\"{what}\",quantile=\"{q}\"}}"
    )) * 1e3
}

/// Run the home; see the module docs.
pub fn run(a: Args) -> ExitCode {
    match up(a) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("vyrn up: {e}");
            ExitCode::from(2)
        }
    }
}

/// `vyrn load`'s arguments for the run: the home, the duration and rate, a 5 s drain, the
/// sessions after the ping's (and the misbehaving client's), its core, and under `--kill-seq`
/// a retention that covers a dev home's failover.
fn load_args(a: &Args, hs: &str, load_core: Option<usize>) -> Vec<String> {
    let mut load_args = vec![
        "load".to_string(),
        "--home".into(),
        hs.to_string(),
        "--secs".into(),
        (if a.duration == 0 {
            u32::MAX as u64
        } else {
            a.duration
        })
        .to_string(),
        "--rate".into(),
        a.rate.to_string(),
        "--seed".into(),
        a.seed.to_string(),
        // Up to 5 s after the last send for every fill's Durable and Final (ends as soon as
        // every fill has both): the verdict counts them.
        "--drain-ms".into(),
        "5000".into(),
        // The first session is the ping phase's (a session's pkt_seq is one client's), the
        // second the misbehaving client's with `--misbehave`.
        "--skip".into(),
        (if a.lab.misbehave() { "2" } else { "1" }).into(),
    ];
    if let Some(c) = load_core {
        load_args.extend(["--core".into(), c.to_string()]);
    }
    // `--kill-seq`: a dev home's failover takes seconds (its budgets are a shared machine's,
    // not 07's), so the clients retain what they send long enough to resend it to the promoted
    // standby (07 §9.5).
    if a.kill_seq.is_some() || a.interrupted().is_some() {
        load_args.extend(["--retain-ms".into(), "15000".into()]);
    }
    load_args
}

/// A replica's lab-fault flags: `--cut-path` (loopback; the netns lab cuts the bridge) and
/// `--isolate-seq` (SIGUSR1/SIGUSR2 from the fault loop).
fn lab_replica_args(a: &Args) -> Vec<String> {
    let mut args = Vec::new();
    if let Some(c) = a.lab.cut_path().filter(|_| !a.netns) {
        args.extend(["--lab-cut-path".into(), c.clone()]);
    }
    if a.lab.isolate_seq().is_some() {
        args.push("--lab-isolate-seq".into());
    }
    args
}

impl Args {
    /// The box stopped (`--stall-seq`) or cut off (`--isolate-seq`) S s into the load for MS ms,
    /// and still running after: `(S, MS)`.
    pub(super) fn interrupted(&self) -> Option<(u64, u64)> {
        self.stall_seq.or(self.lab.isolate_seq())
    }
}

fn up(a: Args) -> Result<bool, String> {
    // --profile ref: every role's cores, before anything is written or started.
    let placement = match a.profile {
        UpProfile::Dev => None,
        UpProfile::Ref => Some(ref_placement_here(a.data_boxes as usize)?),
    };
    std::fs::create_dir_all(&a.dir).map_err(|e| format!("{}: {e}", a.dir.display()))?;
    let home_file = match &a.home {
        Some(h) => h.clone(),
        None => {
            let mut name = String::from("home");
            if a.netns {
                name.push_str("-netns");
            }
            if a.profile == UpProfile::Ref {
                name.push_str("-ref");
            }
            if a.data_boxes > 1 {
                name.push_str("-2data");
            }
            let d = a.dir.join(name);
            let f = d.join("home.toml");
            if f.exists() && a.base_port != 27_400 {
                println!(
                    "vyrn up: {} exists: its ports stand (--base-port applies to a new home; remove {} to write one)",
                    f.display(),
                    d.display()
                );
            }
            // A generated home an older vyrn wrote (say, before the member envelope's
            // link keys) no longer loads: it is a generated artifact, so write a fresh one.
            if let Some(Err(errs)) = f.exists().then(|| BoxConfig::load(&f)) {
                println!(
                    "vyrn up: {} no longer loads ({}); writing a fresh home",
                    f.display(),
                    errs.first().map(|e| e.to_string()).unwrap_or_default()
                );
                let _ = std::fs::remove_dir_all(&d);
            }
            if !f.exists() {
                let addrs = if a.netns {
                    vyrn_home::HomeAddrs::netns_lab()
                } else {
                    vyrn_home::HomeAddrs::loopback()
                };
                let p = match &placement {
                    Some(pl) => vyrn_home::write_ref_home(
                        &d,
                        REF_LANES,
                        8,
                        a.base_port,
                        a.data_boxes,
                        &addrs,
                        &pl.box_cores,
                    ),
                    None => {
                        vyrn_home::write_dev_home_at(&d, 4, 8, a.base_port, a.data_boxes, &addrs)
                    }
                }
                .map_err(|e| format!("writing a home in {}: {e}", d.display()))?;
                println!(
                    "vyrn up: wrote a dev home {} (fresh 0600 keys)",
                    p.display()
                );
            }
            f
        }
    };
    let home_dir = home_file.parent().unwrap_or(Path::new(".")).to_path_buf();
    let bx = BoxConfig::load(&home_file).map_err(|errs| {
        errs.iter()
            .map(|e| e.to_string())
            .collect::<Vec<_>>()
            .join("\n")
    })?;
    let home = HomeConfig::load(&home_file).map_err(|errs| {
        errs.iter()
            .map(|e| e.to_string())
            .collect::<Vec<_>>()
            .join("\n")
    })?;
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    prune_runs(&a.dir, KEEP_RUNS - 1);
    // A fresh directory, never one of an earlier run (its journals belong to that run's home).
    let mut run = a.dir.join(format!("run-{stamp}"));
    let mut k = 1;
    while let Err(e) = std::fs::create_dir(&run) {
        if e.kind() != std::io::ErrorKind::AlreadyExists || k > 99 {
            return Err(format!("{}: {e}", run.display()));
        }
        run = a.dir.join(format!("run-{stamp}-{k}"));
        k += 1;
    }
    let s = |p: &Path| p.display().to_string();
    let hs = s(&home_file);
    // dev: the cold core for the journal writer and the load; ref: each role its own cores.
    let cold = match &placement {
        None => bx.core_map.get(1).copied(),
        Some(pl) => {
            if bx.core_map != pl.box_cores {
                return Err(format!(
                    "{}: its core_map {:?} is not this machine's REF placement {:?}: remove its directory to write a new one",
                    home_file.display(),
                    bx.core_map,
                    pl.box_cores
                ));
            }
            None
        }
    };
    let list = |v: &[usize]| {
        v.iter()
            .map(|c| c.to_string())
            .collect::<Vec<_>>()
            .join(",")
    };
    let load_core = placement.as_ref().map(|p| p.load).or(cold);
    let port = |k: u16| SocketAddr::from(([127, 0, 0, 1], a.metrics_port + k));
    let n = home.voters;
    let nd = home.databoxes.len() as u16;
    if a.netns {
        lab::check(n, nd)?;
    }
    // Where each role serves its metrics: loopback, or its own address in the lab (reached from
    // here over the facility network).
    let m_at = |ip: std::net::IpAddr, k: u16| {
        if a.netns {
            SocketAddr::new(ip, a.metrics_port + k)
        } else {
            port(k)
        }
    };
    let m_box = m_at(std::net::IpAddr::V4(home.box_ip), 0);
    let m_data = |d: u16| m_at(home.databoxes[d as usize].client_addr.ip(), 1 + d);
    let m_voter = |i: usize| m_at(home.voters_members[i].ctrl_addr.ip(), 1 + nd + i as u16);
    let ns_voter = |i: usize| a.netns.then(|| lab::voter(i));
    let ns_data = |d: u16| a.netns.then(|| lab::data(d));
    let stop = vyrn_nic::wait::stop_on_signals();

    let mut procs: Vec<Proc> = Vec::new();
    let mut journals: Vec<(usize, Vec<PathBuf>)> = Vec::new();
    check_faults(&a, n, nd as usize)?;
    let mut replica_args: Vec<Vec<String>> = Vec::new();
    // The replicas and data boxes first: they join the paths before the first frame.
    for i in 0..n {
        let mut args = vec![
            "replica".to_string(),
            "--home".into(),
            hs.clone(),
            "--index".into(),
            i.to_string(),
            "--key".into(),
            s(&home_dir.join(format!("keys/voter-{i}.key"))),
            "--consensus-dir".into(),
            s(&run.join(format!("consensus-{i}"))),
        ];
        if !a.journal_last || i + 1 == n {
            let d = vec![
                run.join(format!("journal-{i}-0")),
                run.join(format!("journal-{i}-1")),
            ];
            // 07 §7.5's snapshots on the last replica only: taking one pauses replay on the
            // replica's loop, and on two shared cores four voters taking them left two voters'
            // RepAcks late at once beside a restarted one, and the box fenced (a CI run).
            let snap = if i + 1 == n {
                2 * n as u64 * super::replica::root_blocks(&home)
            } else {
                0
            };
            args.extend(journal_args(&d, snap, cold));
            journals.push((i, d));
        }
        if let Some(pl) = &placement {
            let mine = &pl.replicas[i];
            args.extend(["--cores".into(), list(&mine[..1])]);
            args.extend(["--consensus-cores".into(), list(&mine[1..])]);
            if journals.last().is_some_and(|(j, _)| *j == i) {
                args.extend(["--journal-cores".into(), list(&mine[1..])]);
            }
        }
        if a.replay_thread {
            args.push("--replay-thread".into());
        }
        args.extend(lab_replica_args(&a));
        let m = m_voter(i);
        replica_args.push(args.clone());
        procs.push(Proc::spawn(
            &format!("replica {i}"),
            &args,
            run.join(format!("replica-{i}.log")),
            Some(m),
            ns_voter(i).as_deref(),
        )?);
    }
    for d in 0..nd {
        let args = data_args(&hs, d, placement.as_ref());
        procs.push(Proc::spawn(
            &format!("data box {d}"),
            &args,
            run.join(format!("data-{d}.log")),
            Some(m_data(d)),
            ns_data(d).as_deref(),
        )?);
    }
    // 07 §6.8: the warm standby's finality listener, where the home has one.
    if home.standby_ctrl.is_some() {
        let mut args = vec!["standby".to_string(), "--home".into(), hs.clone()];
        if let Some(pl) = &placement {
            args.extend(["--cores".into(), pl.load.to_string()]);
        }
        args.extend(a.lab.isolate_seq().map(|_| "--lab-isolate-seq".to_string()));
        procs.push(Proc::spawn(
            "standby",
            &args,
            run.join("standby.log"),
            Some(m_at(std::net::IpAddr::V4(home.box_ip), 2 + nd + n as u16)),
            a.netns.then_some(lab::BOX),
        )?);
    }
    println!(
        "vyrn up: {} replicas and {} data box(es) starting; their Simplex engines dial each other (3 s)",
        n, nd
    );
    std::thread::sleep(Duration::from_secs(3));
    let seq_args = vec!["seq".to_string(), "--config".into(), hs.clone()];
    procs.push(Proc::spawn(
        "sequencer",
        &seq_args,
        run.join("seq.log"),
        Some(m_box),
        a.netns.then_some(lab::BOX),
    )?);
    std::thread::sleep(Duration::from_secs(1));
    // The ping phase: one request in flight on the home's first session (request -> answer
    // round trips, the floor of what a client sees); the open loop then takes the others.
    let mut ping: Option<Proc> = None;
    if a.ping_secs > 0 {
        let mut args = vec![
            "load".to_string(),
            "--home".into(),
            hs.clone(),
            "--secs".into(),
            a.ping_secs.to_string(),
            "--ping".into(),
        ];
        if let Some(c) = load_core {
            args.extend(["--core".into(), c.to_string()]);
        }
        println!(
            "vyrn up: ping phase, {} s: one request in flight, request -> answer round trips",
            a.ping_secs
        );
        let mut p = Proc::spawn("ping", &args, run.join("ping.log"), None, None)?;
        let deadline = Instant::now() + Duration::from_secs(a.ping_secs + 10);
        while Instant::now() < deadline && !p.poll() && !stop.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(50));
        }
        if let Some(l) = p.log_text().lines().find(|l| l.starts_with("ping request")) {
            println!("vyrn up: {l}");
        }
        ping = Some(p);
    }
    let load_args = load_args(&a, &hs, load_core);
    let load_port = port(1 + nd + n as u16);
    procs.push(Proc::spawn(
        "load",
        &load_args,
        run.join("load.log"),
        Some(load_port),
        None,
    )?);
    let load_i = procs.len() - 1;
    let seq_i = procs.len() - 2;
    if a.lab.misbehave() {
        let secs = if a.duration == 0 {
            u32::MAX as u64
        } else {
            a.duration.saturating_sub(2).max(1)
        };
        let args = vec![
            "load".to_string(),
            "--home".into(),
            hs.clone(),
            "--misbehave".into(),
            "--skip".into(),
            "1".into(),
            "--secs".into(),
            secs.to_string(),
        ];
        println!("vyrn up: a misbehaving client on the home's second session for {secs} s");
        procs.push(Proc::spawn(
            "misbehave",
            &args,
            run.join("misbehave.log"),
            None,
            None,
        )?);
    }

    let view = !a.plain && std::io::stdout().is_terminal();
    let t0 = Instant::now();
    let mut prev: Option<(f64, Samples)> = None;
    let mut last_rates = (0.0, 0.0, 0.0, 0.0);
    // The journals' bytes at the previous scrape (the view's journal MB/s).
    let mut prev_journal: Option<(f64, f64)> = None;
    let mut timeline: Vec<Tick> = Vec::new();
    let mut alarms_seen: Vec<String> = Vec::new();
    let mut last: HashMap<String, Samples> = HashMap::new();
    let mut restarted = false;
    let mut kills = Kills::default();
    let mut attacker = Attacker::open(&a)?;
    // In the lab a path cut is the network's: the path's bridge goes down (healed at the end).
    let lab_cut: Option<(String, u64)> = a.lab.cut_path().filter(|_| a.netns).and_then(|c| {
        let (p, t) = c.split_once('@')?;
        Some((p.to_string(), t.parse().ok()?))
    });
    let mut lab_cut_done = false;
    loop {
        std::thread::sleep(Duration::from_secs(1));
        let t = t0.elapsed().as_secs_f64();
        let mut seq_fresh = false;
        for p in procs.iter_mut() {
            p.poll();
            if let Some(m) = p.metrics {
                if let Some(sm) = scrape(m) {
                    seq_fresh |= is_box_page(&p.name);
                    last.insert(p.name.clone(), sm);
                }
            }
        }
        let get = |name: &str| last.get(name).cloned().unwrap_or_default();
        let (sq, tenure_note) = box_samples(&last, n);
        let ld = get("load");
        let reps: Vec<Samples> = (0..n).map(|i| get(&format!("replica {i}"))).collect();
        let datas: Vec<Samples> = (0..nd).map(|d| get(&format!("data box {d}"))).collect();
        // Rates over the box's own rendering times (it renders once a second on its beat, this
        // loop scrapes on another): the same rendering twice gives the previous rates again.
        let t_box = sq.get("vyrn_uptime_seconds");
        let (in_ps, out_ps, fa, fb) = match &prev {
            Some((_, p)) if t_box <= p.get("vyrn_uptime_seconds") => last_rates,
            Some((_, p)) => {
                let dt = (t_box - p.get("vyrn_uptime_seconds")).max(1e-3);
                let r = |name: &str| (sq.sum(name) - p.sum(name)).max(0.0) / dt;
                let rp = |path: &str| {
                    let k = format!("vyrn_seq_path_writes_total{{path=\"{path}\"}}");
                    (sq.get(&k) - p.get(&k)).max(0.0) / dt
                };
                (
                    r("vyrn_seq_client_packets_total"),
                    r("vyrn_seq_responses_total"),
                    rp("A"),
                    rp("B"),
                )
            }
            None => (0.0, 0.0, 0.0, 0.0),
        };
        // Rates over the interval between two fresh scrapes of the box (a missed scrape must not
        // show as a second of zero and then one of double).
        if seq_fresh {
            prev = Some((t, sq.clone()));
        }
        last_rates = (in_ps, out_ps, fa, fb);
        let final_lag = sq.get("vyrn_seq_closed_height") - sq.get("vyrn_seq_final_height");
        let durable_lag = sq.get("vyrn_seq_step_done") - sq.get("vyrn_seq_durable_step");
        let tick = Tick {
            t,
            in_ps,
            out_ps,
            ack_p50_ms: ms(&ld, "request_ack", "0.5"),
            ack_p99_ms: ms(&ld, "request_ack", "0.99"),
            fill_p99_ms: ms(&ld, "request_fill", "0.99"),
            final_lag,
        };
        timeline.push(tick);
        let mut alarms: Vec<String> = Vec::new();
        for (name, sm) in &last {
            for al in sm.alarms() {
                alarms.push(format!("{name}: {al}"));
            }
        }
        alarms.sort();
        for al in &alarms {
            if !alarms_seen.contains(al) {
                alarms_seen.push(al.clone());
            }
        }
        let sumr = |name: &str| reps.iter().map(|r| r.sum(name)).sum::<f64>();
        let maxr = |name: &str| reps.iter().map(|r| r.sum(name)).fold(0.0f64, f64::max);
        let jb = sumr("vyrn_replica_journal_bytes_total");
        let journal_mbps = match prev_journal {
            Some((pt, pb)) if t > pt => (jb - pb).max(0.0) / (t - pt) / 1e6,
            _ => 0.0,
        };
        prev_journal = Some((t, jb));
        let mut v = String::new();
        let _ = writeln!(
            v,
            "vyrn up — {} — {:.0} s{}",
            s(&run),
            t,
            if a.duration > 0 {
                format!(" of {} s load", a.duration)
            } else {
                String::new()
            }
        );
        let _ = writeln!(v, "  packets/s in {in_ps:>8.0}   out {out_ps:>8.0}      frames/s path A {fa:>7.0}  B {fb:>7.0}");
        let _ = writeln!(
            v,
            "  request->ack  p50 {:>8.2} ms  p99 {:>8.2} ms  p99.9 {:>8.2} ms",
            ms(&ld, "request_ack", "0.5"),
            ms(&ld, "request_ack", "0.99"),
            ms(&ld, "request_ack", "0.999")
        );
        let _ = writeln!(
            v,
            "  request->fill p50 {:>8.2} ms  p99 {:>8.2} ms  p99.9 {:>8.2} ms",
            ms(&ld, "request_fill", "0.5"),
            ms(&ld, "request_fill", "0.99"),
            ms(&ld, "request_fill", "0.999")
        );
        let _ = writeln!(
            v,
            "  fill->durable p99 {:>8.2} ms   fill->final p99 {:>8.2} ms   durable lag {:.0} steps   final lag {:.0} blocks",
            ms(&ld, "fill_durable", "0.99"),
            ms(&ld, "fill_final", "0.99"),
            durable_lag,
            final_lag
        );
        let _ = writeln!(
            v,
            "  final height {:.0} of {:.0} closed (standby: final {:.0}, checked {:.0}, promotable {})   gate halts {:.0}   fenced {}",
            sq.get("vyrn_seq_final_height"),
            sq.get("vyrn_seq_closed_height"),
            get("standby").get("vyrn_standby_final_height"),
            get("standby").get("vyrn_replica_standby_checked_height"),
            if get("standby").get("vyrn_replica_standby_promotable") >= 1.0 {
                "yes"
            } else {
                "no"
            },
            sq.get("vyrn_seq_finality_gate_halts_total"),
            sq.get("vyrn_seq_fenced") >= 1.0
        );
        let _ = writeln!(
            v,
            "  replicas: holes {:.0}  NACKs {:.0}  repaired {:.0}  data fetch requests {:.0}  unavailable {:.0}  replay lag max {:.0} steps, p99 {:.2} ms  journal blocks {:.0}, {:.2} MB/s",
            sumr("vyrn_replica_holes_total"),
            sumr("vyrn_replica_nacks_total"),
            sumr("vyrn_replica_repaired_total"),
            datas.iter().map(|d| d.sum("vyrn_data_fetch_key_reqs_total") + d.sum("vyrn_data_fetch_range_reqs_total")).sum::<f64>(),
            sumr("vyrn_replica_payloads_unavailable_total"),
            maxr("vyrn_replica_replay_lag_steps"),
            reps.iter()
                .map(|r| r.get("vyrn_replica_replay_lag_seconds{quantile=\"0.99\"}"))
                .fold(0.0f64, f64::max)
                * 1e3,
            sumr("vyrn_replica_journal_appended_total"),
            journal_mbps
        );
        let fh: Vec<String> = reps
            .iter()
            .map(|r| format!("{:.0}", r.get("vyrn_replica_final_height")))
            .collect();
        let _ = writeln!(v, "  voters' final heights: {}", fh.join(" "));
        let rc: Vec<String> = reps
            .iter()
            .map(|r| format!("{:.0}", r.get("vyrn_replica_root_certs_total")))
            .collect();
        let _ = writeln!(
            v,
            "  state roots (07 §7.4): certificates per voter {}   RootFaults {:.0}   diverged {:.0}",
            rc.join(" "),
            sumr("vyrn_replica_root_faults_total"),
            sumr("vyrn_replica_diverged")
        );
        let _ = writeln!(
            v,
            "  load: sent {:.0}  answered {:.0}  fills {:.0}  durable {:.0}  final {:.0}",
            ld.sum("vyrn_load_sent_total"),
            ld.get("vyrn_load_answered_total"),
            ld.get("vyrn_load_fills_total"),
            ld.get("vyrn_load_durable_total"),
            ld.get("vyrn_load_final_total")
        );
        let _ = writeln!(
            v,
            "  alarms: {}",
            if alarms.is_empty() {
                "none".to_string()
            } else {
                alarms.join(", ")
            }
        );
        let down: Vec<&str> = procs
            .iter()
            .filter(|p| p.status.is_some() && !is_client(&p.name) && !p.lab_killed)
            .map(|p| p.name.as_str())
            .collect();
        if !down.is_empty() {
            let _ = writeln!(v, "  EXITED: {}", down.join(", "));
        }
        if view {
            println!("\x1b[H\x1b[2J{v}  (Ctrl-C stops the home and writes the report)");
        } else {
            println!(
                "[{t:>4.0}s] in {in_ps:.0}/s out {out_ps:.0}/s ack p50/p99 {:.2}/{:.2} ms final {:.0}/{:.0} lag {final_lag:.0} journal {journal_mbps:.2} MB/s alarms {}{tenure_note}",
                tick.ack_p50_ms,
                tick.ack_p99_ms,
                sq.get("vyrn_seq_final_height"),
                sq.get("vyrn_seq_closed_height"),
                alarms.len()
            );
        }
        let _ = std::io::stdout().flush();
        if procs[load_i].status.is_some() || stop.load(Ordering::Relaxed) {
            break;
        }
        // The lab's replica crash: SIGKILL, a second down, the same command on the same files.
        if let Some((i, at)) = a.restart_replica {
            if !restarted && t >= at as f64 {
                restarted = true;
                procs[i].signal(libc::SIGKILL);
                procs[i].status = procs[i].child.wait().ok();
                println!("vyrn up: replica {i} killed (SIGKILL) at {t:.0} s; restarting it in 1 s");
                faults::lose_files(&a, &run, i)?;
                std::thread::sleep(Duration::from_secs(1));
                let fresh = Proc::spawn(
                    &format!("replica {i}"),
                    &replica_args[i],
                    run.join(format!("replica-{i}-restarted.log")),
                    Some(m_voter(i)),
                    ns_voter(i).as_deref(),
                )?;
                procs[i] = fresh;
            }
        }
        if let Some((p, at)) = &lab_cut {
            if !lab_cut_done && t >= *at as f64 {
                lab_cut_done = true;
                lab::set_path(p, false)?;
                println!(
                    "vyrn up: path {p}'s network taken down at {t:.0} s (bridge {} in {})",
                    lab::path_bridge(p),
                    lab::HUB
                );
            }
        }
        attacker.tick(t, &home);
        kills.on_time(&a, t, &mut procs);
        if procs
            .iter()
            .any(|p| p.status.is_some() && !is_client(&p.name) && !p.lab_killed)
        {
            println!("vyrn up: a process exited early; stopping the home");
            break;
        }
    }
    // Let the last blocks become final, then stop the roles: load first, then the box, then
    // the replicas and data boxes (each prints its summary on SIGTERM).
    procs[load_i].signal(libc::SIGTERM);
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline && !procs[load_i].poll() {
        std::thread::sleep(Duration::from_millis(20));
    }
    // The misbehaving client ends by itself (its last valid packet answered or not).
    if let Some(m) = procs.iter_mut().find(|p| p.name == "misbehave") {
        m.signal(libc::SIGTERM);
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline && !m.poll() {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    std::thread::sleep(Duration::from_millis(1500));
    procs[seq_i].signal(libc::SIGTERM);
    std::thread::sleep(Duration::from_millis(500));
    for p in procs.iter() {
        p.signal(libc::SIGTERM);
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline && !procs.iter_mut().all(|p| p.poll()) {
        std::thread::sleep(Duration::from_millis(50));
    }
    for p in procs.iter_mut() {
        if !p.poll() {
            p.signal(libc::SIGKILL);
            p.status = p.child.wait().ok();
        }
    }
    if let Some((p, _)) = lab_cut.as_ref().filter(|_| lab_cut_done) {
        if let Err(e) = lab::set_path(p, true) {
            println!("vyrn up: healing path {p}: {e}");
        }
    }
    let load_last = last.get("load").cloned().unwrap_or_default();
    // The ping phase ended before the open loop; its exit and summary go into the report too.
    procs.extend(ping);
    report(
        &a,
        &run,
        &procs,
        &journals,
        &home,
        &timeline,
        &alarms_seen,
        &load_last,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `--profile ref` on a 64-CPU REF box: the kernel keeps CPUs 0–1, the box takes one per
    /// tile from 2 (18 with 8 lanes), each replica two, the data box and the load one each —
    /// all disjoint, from an unsorted mask with a duplicate.
    #[test]
    fn a_ref_box_places_every_role_on_its_own_cores() {
        let mut mask: Vec<usize> = (0..64).rev().collect();
        mask.push(5);
        let p = ref_placement(&mask, &flat(&mask), REF_LANES, 4, 1).unwrap();
        assert_eq!(p.box_cores, (2..20).collect::<Vec<_>>());
        assert_eq!(
            p.replicas,
            vec![vec![20, 21], vec![22, 23], vec![24, 25], vec![26, 27]]
        );
        assert_eq!((p.data.clone(), p.load), (vec![28], 29));
        let mut all: Vec<usize> = p.box_cores.clone();
        all.extend(p.replicas.concat());
        all.extend(&p.data);
        all.push(p.load);
        let n = all.len();
        all.sort_unstable();
        all.dedup();
        assert_eq!(all.len(), n, "a core given twice");
        assert!(all.iter().all(|&c| c >= REF_HOUSEKEEPING));
        // Two data boxes: one more core.
        let p2 = ref_placement(&mask, &flat(&mask), REF_LANES, 4, 2).unwrap();
        assert_eq!((p2.data, p2.load), (vec![28, 29], 30));
    }

    /// Too few CPUs (this 2-core machine, or 29 of the 30 needed): refused with the count
    /// needed, the count available and what to do.
    #[test]
    fn too_few_cores_for_ref_is_refused_with_what_is_missing() {
        let e = ref_placement(&[0, 1], &flat(&[0, 1]), REF_LANES, 4, 1).unwrap_err();
        assert!(e.contains("--profile ref needs 30 cores"), "{e}");
        assert!(e.contains("this process may run on 2 (0,1)"), "{e}");
        assert!(e.contains("Run it on a REF box"), "{e}");
        let m29: Vec<usize> = (0..29).collect();
        let e = ref_placement(&m29, &flat(&m29), REF_LANES, 4, 1).unwrap_err();
        assert!(
            e.contains("needs 30 cores") && e.contains("run on 29"),
            "{e}"
        );
        let m30: Vec<usize> = (0..30).collect();
        assert!(ref_placement(&m30, &flat(&m30), REF_LANES, 4, 1).is_ok());
    }

    fn flat(mask: &[usize]) -> vyrn_tile::topo::Topology {
        vyrn_tile::topo::Topology::flat(mask)
    }

    /// A REF box with SMT numbered as many are (CPUs 2c and 2c + 1 share core c) and two NUMA
    /// nodes of 24 cores: no role gets a hot core's sibling (the mask in order would give the
    /// box CPUs 2 and 3, one core), the kernel keeps the two lowest cores, and the box's 18
    /// tiles stay on one node.
    #[test]
    fn a_ref_box_with_smt_never_pins_two_roles_on_one_core() {
        use vyrn_tile::topo::{Cpu, Topology};
        let mut cpus = Vec::new();
        for core in 0..48 {
            for os in [2 * core, 2 * core + 1] {
                cpus.push(Cpu {
                    os,
                    core,
                    l3: core / 8,
                    numa: core / 24,
                });
            }
        }
        let topo = Topology::from_cpus(cpus);
        let mask: Vec<usize> = (0..96).collect();
        let p = ref_placement(&mask, &topo, REF_LANES, 4, 1).unwrap();
        let mut all: Vec<usize> = p.box_cores.clone();
        all.extend(p.replicas.concat());
        all.extend(&p.data);
        all.push(p.load);
        assert!(topo.shared_cores(&all).is_empty(), "SMT siblings: {all:?}");
        assert!(
            all.iter().all(|&c| c >= 2 * REF_HOUSEKEEPING && c % 2 == 0),
            "{all:?}"
        );
        assert_eq!(topo.numa_nodes(&p.box_cores).len(), 1, "{:?}", p.box_cores);
        // 58 CPUs but 29 physical cores: 30 are needed.
        let short: Vec<usize> = (0..58).collect();
        let e = ref_placement(&short, &topo, REF_LANES, 4, 1).unwrap_err();
        assert!(e.contains("run on 29") && e.contains("left idle"), "{e}");
    }
}
