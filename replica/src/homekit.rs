//! A whole home on loopback in one process (feature `homekit`): the sequencer box (`NetBox`,
//! its voters the membership of the home's file — no doubles), one data box
//! (`vyrn_data::home`), the replicas (`node::Node`, each with its Simplex voter or the interim
//! one) and the client library's open-loop load, each role on its own thread and its own UDP
//! sockets exactly as the binaries run them. The whole-home tests (`replica/tests/home.rs`) and
//! the loopback finality bench (`bench/benches/home_finality.rs`) share it.
//!
//! Lab knobs: a voter signing a wrong state root, a voter cut off from the data boxes, a
//! hostile client whose copy 2 differs from its copy 1, and loss on the replication paths (the
//! `nic` lossy wrapper on the box's path senders: every replica sees the same loss).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use vyrn_client::loadgen::run::{self, RunClock};
use vyrn_client::loadgen::{sessions_for, sessions_with, LoadConfig, LoadCounts, LoadGen};
use vyrn_home::{read_seed, write_dev_home, BoxConfig, HomeAddrs, HomeConfig};
use vyrn_nic::udp::{UdpConfig, UdpPort};
use vyrn_seq::ports::{CoreMap, NetBox, RunningBox};
use vyrn_tile::{Clock, Group, OnPanic, Runner, Seeded, Task, Wait};

use crate::front::core::Budgets;
use crate::node::{Node, NodeConfig};

/// A dev home written to a temporary directory, and the lab knobs of its next run.
#[derive(Debug)]
pub struct LoopbackHome {
    /// Replicas vote with Simplex (else the interim voter).
    pub simplex: bool,
    /// The home's directory (its file, keys, the engines' journals).
    pub dir: PathBuf,
    /// The home's file.
    pub file: PathBuf,
    /// The sequencer's view of the file.
    pub cfg: BoxConfig,
    /// The other roles' view of the file.
    pub home: HomeConfig,
    /// Voters that sign a wrong state root (the lab fault of `--lab-wrong-root`).
    pub wrong_root: Vec<usize>,
    /// Voters cut off from the data boxes from the start ([`Node::cut_data`]).
    pub cut_data: Vec<usize>,
    /// A hostile client on the home's first session (which the load then leaves alone): this
    /// many packets whose copy 2 differs from copy 1 (07 §14 "client sends two different
    /// copies").
    pub two_copies: u32,
    /// Loss on both replication paths, from the box's senders ([`PathLoss`]).
    pub path_loss: Option<PathLoss>,
    /// The replicas' budgets ([`Budgets::dev`] unless a test changes them).
    pub budgets: Budgets,
    /// The box dies this long after the load starts, under the load, which goes on
    /// ([`LoopbackHome::run_box_dies`] then waits its `after` once the load ends).
    pub kill_at: Option<std::time::Duration>,
    /// The promoted standby's box dies this long after its promotion (a second failover: no
    /// standby is left, so the seal names none and the book stays halted, 07 §9.5).
    pub kill_promoted_after: Option<std::time::Duration>,
    /// Replicas that journal (block, cert and order journal in `journal-I` of the home's
    /// directory).
    pub journal: Vec<usize>,
    /// Replicas whose replay runs on its own tile, polled in turn with the core
    /// (`replay_tile`).
    pub replay_tile: Vec<usize>,
    /// Replicas whose replay tile runs on its own thread.
    pub replay_thread: Vec<usize>,
    /// The data box's DATA_HB period and batch window (ns): the dev profile's 1 ms and 200 µs
    /// (the replicas' dev budgets call it silent after 20 ms), 07's 100 µs and REP_DATA_BATCH_US
    /// in the simulator's home.
    pub databox_timing: (u64, u64),
    /// Replicas that take 07 §7.5's snapshots, with their interval in blocks (a multiple of
    /// voters × REP_ROOT_BLOCKS; they need a journal and Simplex), and start their replay from
    /// the newest one on a restart (07 §7.6).
    pub snapshots: Vec<(usize, u64)>,
}

/// Seeded loss on each replication path as the box sends it (`vyrn_nic::lossy`): each frame
/// dropped with probability `drop`, held back past the next 3 with probability `reorder`;
/// independent per path and per stream core.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PathLoss {
    /// Drop probability per path.
    pub drop: f64,
    /// Reorder probability per path.
    pub reorder: f64,
    /// The generators' seed.
    pub seed: u64,
}

/// What a run of a [`LoopbackHome`] left.
#[derive(Debug)]
pub struct HomeRun {
    /// The load's counts.
    pub counts: LoadCounts,
    /// The replicas, stopped.
    pub nodes: Vec<Node>,
    /// The data box, stopped.
    pub databox: vyrn_data::databox::DataBox,
    /// The box's final height at the end of the load.
    pub fin: u64,
    /// Times the box halted the book for a divergence (07 §7.4).
    pub diverge_halts: u64,
    /// The box's block close → final (Q valid finalize votes at its listener): p50, p99, max
    /// (ns) and blocks measured.
    pub close_to_final: [u64; 4],
    /// The standby's box, where the seal named it and it took over (07 §9.5); the standby's
    /// replica is then not among `nodes`.
    pub promoted: Option<Promoted>,
}

/// What a promoted standby's box did (07 §9.5), from the seal to the end of the run.
#[derive(Debug, Clone)]
pub struct Promoted {
    /// The seal block's height: the tenure starts at the next.
    pub seal_height: u64,
    /// The tenure's first step.
    pub first_step: u64,
    /// From the promote flag (the seal final here, replay at its end) to the box's tiles
    /// started, ns.
    pub promote_ns: u64,
    /// The box's final height (its listener) at the end of the run.
    pub fin: u64,
    /// Frame writes its stream cores queued on path A.
    pub frames: u64,
    /// Client packets it took (the clients' resends and new orders after SeqChange).
    pub rx_client: u64,
    /// Responses and notices it sent.
    pub responses: u64,
    /// Its last step done (above `first_step - 1`: it stepped orders of its own tenure).
    pub step_done: u64,
    /// It was killed before the run ended ([`LoopbackHome::kill_promoted_after`]).
    pub killed: bool,
}

/// How the standby's thread ended: still a replica, or promoted.
enum StandbyEnd {
    Replica(Box<Node>),
    Promoted(Promoted),
}

/// A whole home's tiles on one thread ([`LoopbackHome::one_thread`]): the caller polls
/// `home` at the times it chooses (the wall clock, or a simulator's), then [`OneThread::finish`].
pub struct OneThread {
    /// Every tile: the replicas' fronts first (in voter order), then the data box, the box's
    /// tiles and the load.
    pub home: Seeded,
    /// The box's control figures (final height, divergence halts, close → final).
    pub control: Arc<vyrn_seq::tiles::ControlStats>,
    /// When the load stops sending (clock ns).
    pub end_ns: u64,
    /// The box's stream-core knobs.
    pub knobs: Arc<vyrn_seq::tiles::StreamKnobs>,
}

impl std::fmt::Debug for OneThread {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "OneThread({:?}, load until {} ns)",
            self.home, self.end_ns
        )
    }
}

impl OneThread {
    /// The load's counts so far.
    pub fn counts(&self) -> Option<&LoadCounts> {
        self.home.tasks.iter().find_map(|t| {
            let t: &dyn std::any::Any = t.as_ref();
            t.downcast_ref::<LoadTile>().map(|l| &l.load.counts)
        })
    }

    /// What the misbehaving client sent and got, when the home has one
    /// ([`LoopbackHome::one_thread_with`]).
    pub fn misbehaved(&self) -> Option<&MisbehaveStats> {
        self.home.tasks.iter().find_map(|t| {
            let t: &dyn std::any::Any = t.as_ref();
            t.downcast_ref::<MisbehaveTile>().map(|m| &m.stats)
        })
    }

    /// The replicas' fronts (voter order).
    pub fn nodes(&self) -> impl Iterator<Item = &Node> {
        self.home.tasks.iter().filter_map(|t| {
            let t: &dyn std::any::Any = t.as_ref();
            t.downcast_ref::<Node>()
        })
    }

    /// Stop: the replicas' replays drained, the figures of the run.
    pub fn finish(mut self) -> Result<HomeRun, String> {
        let figures = BoxFigures::of(&self.control);
        let mut tiles = std::mem::take(&mut self.home.tasks);
        let counts = vyrn_tile::take::<LoadTile>(&mut tiles)
            .ok_or("no load tile")?
            .load
            .counts;
        let databox = vyrn_tile::take::<vyrn_data::driver::Driver<UdpPort>>(&mut tiles)
            .ok_or("no data box tile")?
            .databox;
        // The replicas were built first, in voter order.
        let mut nodes = Vec::new();
        for t in tiles {
            let t: Box<dyn std::any::Any> = t;
            if let Ok(mut n) = t.downcast::<Node>() {
                n.finish().map_err(|e| format!("replay: {e:?}"))?;
                nodes.push(*n);
            }
        }
        Ok(figures.run(counts, nodes, databox))
    }
}

/// The box's figures at the end of the load (its control's watermarks).
struct BoxFigures {
    fin: u64,
    diverge_halts: u64,
    close_to_final: [u64; 4],
}

impl BoxFigures {
    fn of(c: &vyrn_seq::tiles::ControlStats) -> Self {
        let r = Ordering::Relaxed;
        BoxFigures {
            fin: c.final_height.load(r),
            diverge_halts: c.diverge_halts.load(r),
            close_to_final: [0, 1, 2, 3].map(|i| c.close_to_final[i].load(r)),
        }
    }

    fn run(
        self,
        counts: LoadCounts,
        nodes: Vec<Node>,
        databox: vyrn_data::databox::DataBox,
    ) -> HomeRun {
        HomeRun {
            counts,
            nodes,
            databox,
            fin: self.fin,
            diverge_halts: self.diverge_halts,
            close_to_final: self.close_to_final,
            promoted: None,
        }
    }
}

/// A home's directory goes with it: its journals (each drive preallocates a 256 MB segment)
/// would otherwise fill a test machine's disk over a few dozen runs.
impl Drop for LoopbackHome {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl LoopbackHome {
    /// A dev home of 2 lanes × 4 sessions in a fresh temporary directory named by `tag`, its
    /// ports from `base`. Blocks of 5 ms with the interim voter, 20 ms with Simplex (a view
    /// takes tens of ms among four engines on a loaded 2-core machine), a 2 s self-fence
    /// window: scheduling noise neither halts nor fences.
    pub fn new(tag: &str, base: u16, simplex: bool) -> Result<Self, String> {
        let dir = std::env::temp_dir().join(format!("vyrn-home-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let p = write_dev_home(&dir, 2, 4, base).map_err(|e| format!("dev home: {e}"))?;
        let mut cfg = BoxConfig::load(&p).map_err(|e| format!("{e:?}"))?;
        let home = HomeConfig::load(&p).map_err(|e| format!("{e:?}"))?;
        cfg.block_ns = if simplex { 20_000_000 } else { 5_000_000 };
        cfg.self_fence_us = Some(2_000_000);
        Ok(Self::with(
            dir,
            p,
            cfg,
            home,
            simplex,
            Budgets::dev(),
            (1_000_000, 200_000),
        ))
    }

    /// The simulator's home (`vyrn-sim`): 2 lanes × 4 sessions, every role at its own address of
    /// the netns lab ([`HomeAddrs::netns_lab`]: a partition can name a role), its keys drawn from
    /// `key_seed`, 07's own timings — 1 ms blocks (BLOCK_NS), the replicas' [`Budgets::default`],
    /// the profile's self-fence — not the dev overrides. Its sockets exist only on the
    /// simulator's network: build it with [`LoopbackHome::one_thread`] on a thread that
    /// installed one.
    pub fn simulated(tag: &str, key_seed: u64) -> Result<Self, String> {
        let dir = std::env::temp_dir().join(format!(
            "vyrn-sim-{tag}-{}-{key_seed:x}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        let p = vyrn_home::write_sim_home(&dir, 2, 4, 20_000, &HomeAddrs::netns_lab(), key_seed)
            .map_err(|e| format!("sim home: {e}"))?;
        let mut cfg = BoxConfig::load(&p).map_err(|e| format!("{e:?}"))?;
        let home = HomeConfig::load(&p).map_err(|e| format!("{e:?}"))?;
        cfg.block_ns = vyrn_wire::consts::BLOCK_NS;
        let data = (
            vyrn_data::config::DATA_HB_US * 1000,
            vyrn_wire::consts::REP_DATA_BATCH_US * 1000,
        );
        Ok(Self::with(
            dir,
            p,
            cfg,
            home,
            false,
            Budgets::default(),
            data,
        ))
    }

    /// A home of these files and timings, with no lab knob set.
    fn with(
        dir: PathBuf,
        file: PathBuf,
        cfg: BoxConfig,
        home: HomeConfig,
        simplex: bool,
        budgets: Budgets,
        databox_timing: (u64, u64),
    ) -> Self {
        LoopbackHome {
            simplex,
            dir,
            file,
            cfg,
            home,
            wrong_root: Vec::new(),
            replay_tile: Vec::new(),
            replay_thread: Vec::new(),
            cut_data: Vec::new(),
            two_copies: 0,
            path_loss: None,
            budgets,
            kill_at: None,
            kill_promoted_after: None,
            journal: Vec::new(),
            databox_timing,
            snapshots: Vec::new(),
        }
    }

    /// Run the home with replicas `up` for `secs` of load at `rate` msgs/s (then 1.5 s for the
    /// answers, durable and final still in flight).
    pub fn run(&self, up: &[usize], rate: u64, secs: u64) -> Result<HomeRun, String> {
        self.run_inner(up, rate, secs, None)
    }

    /// [`LoopbackHome::run`], then the box dies (its runner stopped: no frame, heartbeat or
    /// answer more) and the replicas and the data box go on for `after`: what a home does
    /// without its sequencer (07 §9: deposition, the seal).
    pub fn run_box_dies(
        &self,
        up: &[usize],
        rate: u64,
        secs: u64,
        after: std::time::Duration,
    ) -> Result<HomeRun, String> {
        self.run_inner(up, rate, secs, Some(after))
    }

    fn run_inner(
        &self,
        up: &[usize],
        rate: u64,
        secs: u64,
        box_dies: Option<std::time::Duration>,
    ) -> Result<HomeRun, String> {
        let stop = Arc::new(AtomicBool::new(false));
        // The replicas and the data box first: they are on the paths before the first frame.
        let mut reps = Vec::new();
        let n = self.home.voters_members.len();
        let mut standby = None;
        for &i in up {
            if i == n {
                standby = Some(self.spawn_standby(stop.clone())?);
            } else {
                reps.push(self.spawn_replica(i, stop.clone())?);
            }
        }
        let data = self.spawn_databox(stop.clone())?;
        if self.simplex {
            // The engines dial each other before the first block.
            std::thread::sleep(std::time::Duration::from_secs(2));
        }
        let (running, seq) = start_box_with(&self.cfg, self.path_loss)?;
        let hostile = (self.two_copies > 0).then(|| {
            let (home, n) = (self.home.clone(), self.two_copies);
            std::thread::spawn(move || two_copies(&home, seq, n))
        });
        let skip = usize::from(self.two_copies > 0);
        let load = {
            let home = self.home.clone();
            // A box killed under the load: the clients retain what they send across the dev
            // home's failover (seconds, not 07's 20 ms) to resend it to the promoted standby.
            let retain_ms = if self.kill_at.is_some() { 15_000 } else { 100 };
            std::thread::spawn(move || load_from(&home, seq, rate, secs, 7, skip, retain_ms))
        };
        // `kill_at`: the box dies under the load, which goes on (07 §9.5: the clients follow
        // the promoted standby when the data boxes relay the seal's SeqChange).
        let mut running = Some(running);
        let mut killed = None;
        if let Some(at) = self.kill_at {
            if let Some(r) = running.take() {
                std::thread::sleep(at);
                killed = Some(BoxFigures::of(&r.handles.control));
                r.runner.stop();
            }
        }
        let counts = load
            .join()
            .map_err(|_| "the load's thread panicked".to_string())??;
        if let Some(t) = hostile {
            let _ = t.join();
        }
        if killed.is_some() {
            std::thread::sleep(box_dies.unwrap_or_default());
        }
        let figures = killed
            .or_else(|| running.as_ref().map(|r| BoxFigures::of(&r.handles.control)))
            .ok_or("the box is neither killed nor running")?;
        let running = match (running, box_dies) {
            (Some(r), Some(after)) => {
                r.runner.stop();
                std::thread::sleep(after);
                None
            }
            (r, _) => r,
        };
        stop.store(true, Ordering::Relaxed);
        let mut nodes = Vec::new();
        for j in reps {
            nodes.push(
                j.join()
                    .map_err(|_| "a replica thread panicked".to_string())??,
            );
        }
        let mut promoted = None;
        if let Some(t) = standby {
            match t
                .join()
                .map_err(|_| "the standby's thread panicked".to_string())??
            {
                StandbyEnd::Replica(node) => nodes.push(*node),
                StandbyEnd::Promoted(p) => promoted = Some(p),
            }
        }
        let databox = data
            .join()
            .map_err(|_| "the data box thread panicked".to_string())??;
        if let Some(r) = running {
            r.runner.stop();
        }
        let mut run = figures.run(counts, nodes, databox);
        run.promoted = promoted;
        Ok(run)
    }

    /// The standby's replica until `stop`, and its promotion when the seal names it (07 §9.5):
    /// its engine, replayed to the seal, becomes the box of the next tenure
    /// (`vyrn_seq::takeover`), on the standby's addresses, until `stop`.
    fn spawn_standby(
        &self,
        stop: Arc<AtomicBool>,
    ) -> Result<JoinHandle<Result<StandbyEnd, String>>, String> {
        let node = self.open_replica(self.home.voters_members.len())?;
        let seed = read_seed(&self.dir.join("keys/standby.key"))?;
        let file = self.file.clone();
        let kill_after = self.kill_promoted_after;
        Ok(std::thread::spawn(move || {
            let clock = Clock::from_ns(1_000_000);
            let (halted, promote) = (node.halted(), node.promote_flag());
            let mut tiles = run_until(
                Box::new(node),
                crate::node::NODE_WAIT,
                clock,
                &stop,
                &[&halted, &promote],
            )?;
            let mut node =
                vyrn_tile::take::<Node>(&mut tiles).ok_or("the standby's tile was lost")?;
            if !promote.load(Ordering::Acquire) {
                node.finish().map_err(|e| format!("replay: {e:?}"))?;
                return Ok(StandbyEnd::Replica(node));
            }
            let t0 = std::time::Instant::now();
            let (running, p) = promote_standby(*node, &file, seed)?;
            let mut p = Promoted {
                promote_ns: t0.elapsed().as_nanos() as u64,
                ..p
            };
            while !stop.load(Ordering::Relaxed) && kill_after.is_none_or(|k| t0.elapsed() < k) {
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            p.fin = BoxFigures::of(&running.handles.control).fin;
            let st = &running.stats;
            p.frames = st.path_writes[0].load(Ordering::Relaxed);
            p.rx_client = st.rx_client.load(Ordering::Relaxed);
            p.responses = st.responses.load(Ordering::Relaxed);
            p.step_done = running.handles.words.step_done();
            running.runner.stop();
            p.killed = kill_after.is_some() && !stop.load(Ordering::Relaxed);
            Ok(StandbyEnd::Promoted(p))
        }))
    }

    /// The whole home on the calling thread: every tile of the box, the data box's, each
    /// replica's front (interim voter: Simplex runs on its own runtime's threads) and the
    /// client load, polled one at a time in an order drawn from `seed` ([`Seeded`]) — the same
    /// tiles the processes run, on their real loopback sockets, `secs` of load at `rate` then
    /// 1.5 s for the answers.
    pub fn run_one_thread(&self, seed: u64, rate: u64, secs: u64) -> Result<HomeRun, String> {
        let mut one = self.one_thread(seed, rate, secs * 1_000_000_000)?;
        let clock = Clock::from_ns(1_000_000);
        while clock.now() < one.end_ns + 1_500_000_000 {
            one.home.step(clock.now());
        }
        one.finish()
    }

    /// Every tile of the home built, not started, for one thread to poll ([`OneThread`]): the
    /// box's, the data box's, each replica's front (the interim voter) and a client load of
    /// `rate` msgs/s from 1 ms to `1 ms + load_ns`, in a [`Seeded`] scheduler drawing from
    /// `seed`.
    /// The ports are opened here: on a thread with the simulator's network installed
    /// (`vyrn_nic::sim`), they are simulated ones.
    pub fn one_thread(&self, seed: u64, rate: u64, load_ns: u64) -> Result<OneThread, String> {
        self.one_thread_with(seed, rate, load_ns, None)
    }

    /// [`LoopbackHome::one_thread`], with the home's last session driven by a misbehaving
    /// client ([`Misbehave`]) instead of the load.
    pub fn one_thread_with(
        &self,
        seed: u64,
        rate: u64,
        load_ns: u64,
        misbehave: Option<Misbehave>,
    ) -> Result<OneThread, String> {
        if self.simplex {
            return Err("one thread runs the interim voter: Simplex has threads of its own".into());
        }
        let mut tasks: Vec<Box<dyn Task>> = Vec::new();
        for i in 0..self.home.voters_members.len() {
            tasks.push(Box::new(self.open_replica(i)?));
        }
        let (hb, batch) = self.databox_timing;
        let dcfg = vyrn_data::home::config(&self.home, 0, hb, batch)?;
        let dseed = read_seed(&self.dir.join("keys/databox-0.key"))?;
        let dkey = ed25519_dalek::SigningKey::from_bytes(dseed.expose());
        tasks.push(Box::new(vyrn_data::home::open(&self.home, &dcfg, &dkey)?));
        let mut net = NetBox::open(&self.cfg, false).map_err(|e| format!("box sockets: {e}"))?;
        net.register_members(&self.cfg);
        let seq = net.client_addrs()[0];
        let (paths, _rx) = vyrn_seq::ports::open_paths_for(
            self.cfg.engine.layout.n_streams as usize,
            self.cfg.path_port,
            self.cfg.path_ips,
        )
        .map_err(|e| format!("paths: {e}"))?;
        let bx = net
            .tiles_on(&self.cfg, paths)
            .map_err(|e| format!("box tiles: {e}"))?;
        tasks.extend(bx.tasks);
        let end_ns = 1_000_000 + load_ns;
        let skip = match misbehave {
            Some(m) => {
                let t = MisbehaveTile::open(&self.home, seq, m)?;
                let session = t.session;
                tasks.push(Box::new(t));
                Some(session)
            }
            None => None,
        };
        tasks.push(Box::new(LoadTile::open(
            &self.home, seq, rate, end_ns, skip,
        )?));
        Ok(OneThread {
            home: Seeded::new(tasks, seed),
            control: bx.handles.control,
            end_ns,
            knobs: bx.knobs,
        })
    }

    /// Replica `i`'s node (Simplex or the interim voter, with this home's lab knobs), not
    /// started.
    ///
    /// `i` = the home's voter count opens the standby's non-voting replica (07 §9.5) instead,
    /// under `keys/standby.key`.
    pub fn open_replica(&self, i: usize) -> Result<Node, String> {
        let standby = i == self.home.voters_members.len();
        let key = match standby {
            true => "keys/standby.key".to_string(),
            false => format!("keys/voter-{i}.key"),
        };
        let seed = read_seed(&self.dir.join(key)).map_err(|e| format!("key: {e}"))?;
        let cfg = NodeConfig {
            home: self.home.clone(),
            index: i,
            vote_key: ed25519_dalek::SigningKey::from_bytes(seed.expose()),
            standby,
            budgets: self.budgets,
            journal: self
                .journal
                .contains(&i)
                .then(|| vec![self.dir.join(format!("journal-{i}"))]),
            journal_backend: Default::default(),
            journal_sync_ns: 0,
            journal_segment_bytes: 0,
            journal_cores: None,
            simplex: (self.simplex && !standby).then(|| {
                let mut s = crate::vote::SimplexCfg::new(
                    self.home.voters_members.iter().map(|m| m.p2p()).collect(),
                    self.dir.join(format!("consensus-{i}")),
                    "test".into(),
                )
                .dev(self.home.block_ns);
                s.lab_wrong_root = self.wrong_root.contains(&i);
                s
            }),
            replay_tile: self.replay_tile.contains(&i) || self.replay_thread.contains(&i),
            replay_lanes: 0,
            replay_lane_cores: Vec::new(),
            snapshot_blocks: self.snapshots.iter().find(|s| s.0 == i).map_or(0, |s| s.1),
        };
        let mut node = Node::open(&cfg)?;
        if self.cut_data.contains(&i) {
            node.cut_data(0);
        }
        Ok(node)
    }

    /// Replica `i` on its own thread until `stop` (Simplex or the interim voter, with this
    /// home's lab knobs); the thread returns the stopped node.
    pub fn spawn_replica(
        &self,
        i: usize,
        stop: Arc<AtomicBool>,
    ) -> Result<JoinHandle<Result<Node, String>>, String> {
        let mut node = self.open_replica(i)?;
        let clock = Clock::from_ns(1_000_000);
        if self.replay_thread.contains(&i) {
            node.start_replay_thread(move || clock.now(), None)
                .map_err(|e| format!("replay thread: {e}"))?;
        }
        Ok(std::thread::spawn(move || {
            let halted = node.halted();
            let mut tiles = run_until(
                Box::new(node),
                crate::node::NODE_WAIT,
                clock,
                &stop,
                &[&halted],
            )?;
            let mut node =
                vyrn_tile::take::<Node>(&mut tiles).ok_or("the replica's tile was lost")?;
            node.finish().map_err(|e| format!("replay: {e:?}"))?;
            Ok(*node)
        }))
    }

    /// Data box 0 until `stop`: its tile on a runner of its own, as `vyrn data` runs it; the
    /// thread returns the stopped box.
    pub fn spawn_databox(
        &self,
        stop: Arc<AtomicBool>,
    ) -> Result<JoinHandle<Result<vyrn_data::databox::DataBox, String>>, String> {
        let (hb, batch) = self.databox_timing;
        let cfg = vyrn_data::home::config(&self.home, 0, hb, batch)?;
        let seed = read_seed(&self.dir.join("keys/databox-0.key"))?;
        let key = ed25519_dalek::SigningKey::from_bytes(seed.expose());
        let d = vyrn_data::home::open(&self.home, &cfg, &key)?;
        let wait = Wait::Block {
            timeout_ns: 1_000_000,
        };
        Ok(std::thread::spawn(move || {
            let never = AtomicBool::new(false);
            let mut tiles = run_until(
                Box::new(d),
                wait,
                Clock::from_ns(1_000_000),
                &stop,
                &[&never],
            )?;
            vyrn_tile::take::<vyrn_data::driver::Driver<UdpPort>>(&mut tiles)
                .map(|d| d.databox)
                .ok_or_else(|| "the data box's tile was lost".to_string())
        }))
    }
}

/// The standby's replica `node`, named next by the final seal, promoted (07 §9.5): its engine
/// replayed to the seal handed to a box of the next tenure on the standby's addresses
/// (`BoxConfig::standby_box` of the home's `file`, under its `seed`), started on two threads.
pub fn promote_standby(
    node: Node,
    file: &std::path::Path,
    seed: vyrn_home::secret::Seed32,
) -> Result<(RunningBox, Promoted), String> {
    let (tenure, sender) = node
        .followed()
        .map(|f| (f.next.tenure, f.next.sender))
        .ok_or("the standby follows no seal")?;
    let cfg = BoxConfig::standby_box(file, seed)?;
    let (engine, seal) = node.into_handover()?;
    let map = CoreMap::Shared {
        threads: 2,
        cores: vec![],
    };
    let id = vyrn_seq::shm::TenureId { tenure, sender };
    let (running, _paths, first_step) =
        vyrn_seq::ports::start_promoted(&cfg, &map, Clock::new(), engine, &seal, (id, None, None))?;
    Ok((
        running,
        Promoted {
            seal_height: seal.height,
            first_step,
            promote_ns: 0,
            fin: 0,
            frames: 0,
            rx_client: 0,
            responses: 0,
            step_done: 0,
            killed: false,
        },
    ))
}

/// One tile on a runner thread of its own until `stop` or one of `halted` (or it panics: an
/// error).
fn run_until(
    tile: Box<dyn vyrn_tile::Task>,
    wait: Wait,
    clock: Clock,
    stop: &AtomicBool,
    halted: &[&AtomicBool],
) -> Result<Vec<Box<dyn vyrn_tile::Task>>, String> {
    let runner = Runner::start_with(
        vec![Group {
            core: None,
            wait,
            tasks: vec![tile],
        }],
        clock,
        OnPanic::StopAll,
    );
    while runner.alive()
        && !stop.load(Ordering::Relaxed)
        && !halted.iter().any(|h| h.load(Ordering::Relaxed))
    {
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    if let Some(p) = runner.panicked() {
        return Err(p);
    }
    Ok(runner.stop())
}

/// The box of `cfg`, its voters the file's membership (no doubles), on two threads; and the
/// address clients send to.
pub fn start_box(cfg: &BoxConfig) -> Result<(RunningBox, SocketAddr), String> {
    start_box_with(cfg, None)
}

/// [`start_box`] with `loss` on both replication paths (each stream core's senders wrapped in
/// the `nic` lossy wrapper, transmit side).
pub fn start_box_with(
    cfg: &BoxConfig,
    loss: Option<PathLoss>,
) -> Result<(RunningBox, SocketAddr), String> {
    let mut net = NetBox::open(cfg, false).map_err(|e| format!("box sockets: {e}"))?;
    net.register_members(cfg);
    let seq = net.client_addrs()[0];
    let map = CoreMap::Shared {
        threads: 2,
        cores: vec![],
    };
    let Some(l) = loss else {
        let (running, _paths) = net
            .start(cfg, &map, Clock::new())
            .map_err(|e| format!("box start: {e}"))?;
        return Ok((running, seq));
    };
    use vyrn_nic::lossy::{LossConfig, Lossy};
    use vyrn_nic::pair::{PathMark, PathPair};
    let mut pairs = Vec::new();
    for s in 0..cfg.engine.layout.n_streams as u64 {
        let side = |i: usize| -> Result<Lossy<UdpPort>, String> {
            let port = UdpPort::open(&UdpConfig::multicast_sender(
                vyrn_home::PATH_GROUPS[i],
                cfg.path_port + i as u16,
            ))
            .map_err(|e| format!("path sender: {e}"))?;
            Lossy::tx_only(
                port,
                LossConfig::seeded(l.seed.wrapping_mul(31).wrapping_add(2 * s + i as u64))
                    .with_drop(l.drop)
                    .with_reorder(l.reorder, 3),
            )
            .map_err(|e| format!("lossy: {e}"))
        };
        pairs.push(PathPair::new(side(0)?, side(1)?, PathMark::VYRN));
    }
    let running = net
        .start_on(cfg, &map, Clock::new(), pairs)
        .map_err(|e| format!("box start: {e}"))?;
    Ok((running, seq))
}

/// The home's sessions after the first `skip` (left to another client) at `rate` msgs/s open
/// loop for `secs`, copy 1 to `seq`, copy 2 to data box 0, then 1.5 s for answers, durable and
/// final still in flight; each session retains what it sends `retain_ms` (07 §5.7: at least
/// REP_CLIENT_RETAIN_MS).
pub fn load_from(
    home: &HomeConfig,
    seq: SocketAddr,
    rate: u64,
    secs: u64,
    seed: u64,
    skip: usize,
    retain_ms: u64,
) -> Result<LoadCounts, String> {
    // Answers in flight when the load stops still count.
    let drain_ms = 1500;
    let mut c = UdpConfig::loopback().with_batch(64);
    c.recv_buffer = Some(8 << 20);
    let port = UdpPort::open(&c).map_err(|e| format!("client socket: {e}"))?;
    let e = &home.engine;
    let keys = e
        .sessions
        .iter()
        .skip(skip)
        .map(|s| (s.session, s.k_seq, s.k_out));
    let data = home
        .databoxes
        .first()
        .ok_or("the home has no data box")?
        .client_addr;
    let keys = keys.map(|(s, a, b)| (s, a, b, 0));
    // 07 §5.7: at least REP_CLIENT_RETAIN_MS; longer where a failover must be resent over.
    let mut sessions = sessions_with(
        e.book,
        keys,
        |_| seq,
        vec![data],
        50_000_000,
        vyrn_client::loadgen::retention(retain_ms),
    )
    .map_err(|e| format!("{e:?}"))?;
    let mut driver = vyrn_client::Driver::new(port, &sessions);
    let mut load = LoadGen::new(
        LoadConfig {
            msgs_per_s: rate,
            seed,
            start_ns: 1_000_000,
            ..LoadConfig::default()
        },
        sessions.len(),
    );
    let clock = RunClock::new(1_000_000);
    run::open_loop(
        &mut driver,
        &mut sessions,
        &mut load,
        &clock,
        secs * 1_000_000_000 + 1_000_000,
        drain_ms * 1_000_000,
        None,
        |_| {},
    );
    Ok(load.counts)
}

/// A client that sends `n` packets on the home's first session whose copy 2 (to the data box)
/// differs from copy 1 (to the sequencer): another quantity, tagged with the session's own
/// `K_seq`, so both pass every MAC check (07 §5.6 row 1).
fn two_copies(home: &HomeConfig, seq: SocketAddr, n: u32) {
    use vyrn_nic::{Dest, Port, TxPacket};
    use vyrn_wire::msg::client::{Msg, MsgType, RequestPacket, Side};
    let (Some(s), Some(d)) = (home.engine.sessions.first(), home.databoxes.first()) else {
        return;
    };
    let Ok(mut port) = UdpPort::open(&UdpConfig::loopback().with_batch(16)) else {
        return;
    };
    let pkt = |seq_no: u32, qty: u32| {
        RequestPacket {
            book: home.engine.book,
            resend: false,
            session: s.session,
            pkt_seq: seq_no,
            msgs: vec![Msg {
                kind: MsgType::NewGtc,
                side: Side::Buy,
                tick: 10,
                qty,
                client_tag: seq_no,
            }],
        }
        .to_bytes(&s.k_seq)
    };
    std::thread::sleep(std::time::Duration::from_millis(300));
    for k in 1..=n {
        let (Ok(one), Ok(two)) = (pkt(k, 1), pkt(k, 2)) else {
            return;
        };
        let _ = port.send_batch(&[
            TxPacket::to(&one, Dest::Addr(seq)),
            TxPacket::to(&two, Dest::Addr(d.client_addr)),
        ]);
        let _ = port.flush();
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// The client load as a tile (the one-thread home): packets at their intended times until
/// `end_ns`, answers always; the same steps as the load's own loop (`loadgen::run`).
struct LoadTile {
    driver: vyrn_client::Driver<UdpPort>,
    sessions: Vec<vyrn_client::Session>,
    load: LoadGen,
    end_ns: u64,
}

impl LoadTile {
    /// The load on every session of the home but `skip`.
    fn open(
        home: &HomeConfig,
        seq: SocketAddr,
        rate: u64,
        end_ns: u64,
        skip: Option<u32>,
    ) -> Result<Self, String> {
        let mut c = UdpConfig::loopback().with_batch(64);
        c.recv_buffer = Some(8 << 20);
        let port = UdpPort::open(&c).map_err(|e| format!("client socket: {e}"))?;
        let e = &home.engine;
        let keys = e
            .sessions
            .iter()
            .filter(|s| Some(s.session) != skip)
            .map(|s| (s.session, s.k_seq, s.k_out));
        let data = home
            .databoxes
            .first()
            .ok_or("the home has no data box")?
            .client_addr;
        let sessions =
            sessions_for(e.book, keys, seq, data, 50_000_000).map_err(|e| format!("{e:?}"))?;
        let driver = vyrn_client::Driver::new(port, &sessions);
        let load = LoadGen::new(
            LoadConfig {
                msgs_per_s: rate,
                seed: 7,
                start_ns: 1_000_000,
                ..LoadConfig::default()
            },
            sessions.len(),
        );
        Ok(LoadTile {
            driver,
            sessions,
            load,
            end_ns,
        })
    }
}

/// A misbehaving client in the one-thread home (a Byzantine client, `docs/wire.md`
/// "What the box logs"): from `from_ns` to `to_ns` the home's last session sends, every
/// `period_ns`, a round of `vyrn_client::loadgen::misbehave`'s script (resends of 2- and
/// 10-message packets, packets ahead of sequence and their fill-ins, exact and conflicting
/// duplicates under one `pkt_seq`, refused messages, packets no lane logs) and one packet whose
/// two copies differ (07 §5.6 row 1), copy 1 to the box and copy 2 to the data box. Then its next
/// valid packet, every 10 ms until one is answered without a `Reject`. Like any client, it
/// resends its new packets from a `BAD_SEQ`'s `detail` on (a network that reorders a round's
/// datagrams leaves a fill-in behind the packet it fills).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Misbehave {
    /// From (clock ns).
    pub from_ns: u64,
    /// Until (clock ns, exclusive).
    pub to_ns: u64,
    /// Between two rounds (ns).
    pub period_ns: u64,
}

/// What the misbehaving client sent and got ([`OneThread::misbehaved`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MisbehaveStats {
    /// Script rounds sent.
    pub rounds: u64,
    /// Datagrams sent (each copy counted).
    pub sent: u64,
    /// Responses read (first copies and resends).
    pub answers: u64,
    /// Reject records in them.
    pub rejects: u64,
    /// The session's next valid packets sent after the script.
    pub valid_sent: u64,
    /// The first of them answered without a `Reject`, and the answer's records.
    pub valid_answered: Option<(u32, Vec<vyrn_wire::msg::client::Record>)>,
    /// The newest answer to one of them that carried a `Reject` (what the session was told).
    pub valid_refused: Option<(u32, Vec<vyrn_wire::msg::client::Record>)>,
    /// Datagrams resent after a `BAD_SEQ`.
    pub resent: u64,
}

/// The misbehaving client's tile ([`Misbehave`]).
struct MisbehaveTile {
    port: UdpPort,
    script: vyrn_client::loadgen::misbehave::Script,
    session: u32,
    k_out: [u8; 16],
    seq: SocketAddr,
    data: SocketAddr,
    m: Misbehave,
    next_ns: u64,
    valid: Vec<u32>,
    /// Every new packet sent (copy 1), by `pkt_seq`: resent from a `BAD_SEQ`'s `detail` on.
    new: std::collections::BTreeMap<u32, Vec<u8>>,
    /// The `detail` of the last resend pass and when it began (a pass at most every 1 ms, the
    /// same detail again after 5 ms).
    resent: (u32, u64),
    /// The pass's packets still to resend, one every [`MISBEHAVE_RESEND_PACE_NS`].
    outbox: std::collections::VecDeque<Vec<u8>>,
    next_resend_ns: u64,
    stats: MisbehaveStats,
}

/// Between two tries of the misbehaving session's next valid packet.
const MISBEHAVE_VALID_RETRY_NS: u64 = 10_000_000;
/// Between two resent packets: above the simulator's largest per-hop jitter (200 µs), so a
/// resend pass arrives in order.
const MISBEHAVE_RESEND_PACE_NS: u64 = 250_000;

impl MisbehaveTile {
    fn open(home: &HomeConfig, seq: SocketAddr, m: Misbehave) -> Result<Self, String> {
        let e = &home.engine;
        let s = e.sessions.last().ok_or("the home has no session")?;
        let data = home
            .databoxes
            .first()
            .ok_or("the home has no data box")?
            .client_addr;
        let port = UdpPort::open(&UdpConfig::loopback().with_batch(32))
            .map_err(|e| format!("misbehaving client socket: {e}"))?;
        Ok(MisbehaveTile {
            port,
            script: vyrn_client::loadgen::misbehave::Script::new(e.book, s.session, s.k_seq, 1),
            session: s.session,
            k_out: s.k_out,
            seq,
            data,
            m,
            next_ns: m.from_ns,
            valid: Vec::new(),
            new: std::collections::BTreeMap::new(),
            resent: (0, 0),
            outbox: std::collections::VecDeque::new(),
            next_resend_ns: 0,
            stats: MisbehaveStats::default(),
        })
    }

    /// `one` to the box and `two` to the data box.
    fn send(&mut self, one: &[u8], two: &[u8]) {
        use vyrn_nic::{Dest, Port, TxPacket};
        let _ = self.port.send_batch(&[
            TxPacket::to(one, Dest::Addr(self.seq)),
            TxPacket::to(two, Dest::Addr(self.data)),
        ]);
        let _ = self.port.flush();
        self.stats.sent += 2;
    }
}

impl Task for MisbehaveTile {
    fn name(&self) -> String {
        "misbehave".into()
    }
    fn poll(&mut self, now: u64) -> bool {
        use vyrn_nic::Port;
        use vyrn_wire::msg::client::Record;
        let mut busy = false;
        if now >= self.next_ns && now < self.m.to_ns {
            self.next_ns = now.saturating_add(self.m.period_ns.max(1));
            for p in self.script.round() {
                self.send(&p.bytes, &p.bytes);
                if p.expect == vyrn_client::loadgen::misbehave::Expect::New {
                    if let Some(k) = p.bytes.get(8..12) {
                        let k = u32::from_le_bytes([k[0], k[1], k[2], k[3]]);
                        self.new.entry(k).or_insert(p.bytes);
                    }
                }
            }
            let (one, two) = self.script.two_copies();
            self.send(&one, &two);
            self.new
                .insert(self.script.next_pkt_seq().wrapping_sub(1), one);
            self.stats.rounds += 1;
            busy = true;
        } else if now >= self.m.to_ns && now >= self.next_ns && self.stats.valid_answered.is_none()
        {
            self.next_ns = now.saturating_add(MISBEHAVE_VALID_RETRY_NS);
            let v = self.script.valid();
            let k = self.script.next_pkt_seq().wrapping_sub(1);
            self.valid.push(k);
            self.send(&v, &v);
            self.new.insert(k, v);
            self.stats.valid_sent += 1;
            busy = true;
        }
        let (session, k_out) = (self.session, self.k_out);
        let (valid, stats) = (&self.valid, &mut self.stats);
        let mut bad_seq = None;
        let _ = self.port.poll_recv(64, &mut |p| {
            busy = true;
            let Ok(v) = vyrn_client::packet::ResponseView::parse(p.data, &k_out, session) else {
                return;
            };
            stats.answers += 1;
            let recs = v.records();
            let rejects = recs
                .iter()
                .filter(|r| matches!(r, Record::Reject { .. }))
                .count();
            stats.rejects += rejects as u64;
            // A resent answer repeats an old BAD_SEQ: only a first copy says where the box is.
            for r in recs.iter().filter(|_| !v.resend) {
                if let Record::Reject {
                    code: vyrn_wire::msg::client::RejectCode::BadSeq,
                    detail,
                    ..
                } = *r
                {
                    bad_seq = Some(detail as u32);
                }
            }
            if stats.valid_answered.is_none() && !v.resend && valid.contains(&v.echo_pkt_seq) {
                let answer = Some((v.echo_pkt_seq, recs.to_vec()));
                if rejects == 0 {
                    stats.valid_answered = answer;
                } else {
                    stats.valid_refused = answer;
                }
            }
        });
        // BAD_SEQ{detail}: the box's next pkt_seq is `detail`; every new packet from there on
        // again, in order, paced so the network cannot reorder them (a duplicate of one the
        // box has is answered from its held responses). One pass at a time.
        if let Some(d) = bad_seq {
            let gap = if d != self.resent.0 {
                1_000_000
            } else {
                5_000_000
            };
            if self.outbox.is_empty() && now >= self.resent.1.saturating_add(gap) {
                self.resent = (d, now);
                self.outbox
                    .extend(self.new.range(d..).map(|(_, b)| b.clone()));
            }
        }
        if now >= self.next_resend_ns {
            if let Some(b) = self.outbox.pop_front() {
                use vyrn_nic::{Dest, TxPacket};
                let _ = self
                    .port
                    .send_batch(&[TxPacket::to(&b, Dest::Addr(self.seq))]);
                let _ = self.port.flush();
                self.stats.resent += 1;
                self.next_resend_ns = now.saturating_add(MISBEHAVE_RESEND_PACE_NS);
                busy = true;
            }
        }
        busy
    }
}

impl Task for LoadTile {
    fn name(&self) -> String {
        "load".into()
    }
    fn poll(&mut self, now: u64) -> bool {
        if now < self.end_ns {
            let _ = self.load.submit_due(now, &mut self.sessions);
        }
        let rx = self.driver.counters().rx;
        let _ = self.driver.recv(&mut self.sessions, now, usize::MAX);
        for s in self.sessions.iter_mut() {
            s.poll(now);
        }
        let sent = self.driver.send(&mut self.sessions);
        self.load.drain_events(now, &mut self.sessions);
        self.driver.counters().rx > rx || sent > 0
    }
}
