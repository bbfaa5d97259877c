//! The whole home on one thread, in simulated time, under the faults a seed draws (07 §15
//! "vyrn-sim"; docs/testing.md).
//!
//! What runs: every production tile of the box (RX, lanes, cut, BBO, stream cores, TX, control,
//! control RX, order hasher, cert), the data box's, the four replicas' fronts (order RX, repair,
//! data join, verdict, the interim voter, replay inline) and a client load — the tiles
//! `vyrn up`'s processes run, built by the same code ([`LoopbackHome::one_thread`]). Their
//! sockets are bound on [`vyrn_nic::sim::SimNet`] (installed on this thread), so every datagram
//! crosses a simulated network whose clock is the simulator's. One seed draws the fault
//! [`Schedule`] and the order in which tiles are polled; the same seed gives the same run, event
//! for event ([`Report::trace`]).
//!
//! Checked while it runs, after every poll (each a [`Violation`] citing 07):
//! - T-REP-2: every frame the stream cores emit, on each path, goes through both the oracle
//!   decoder ([`crate::oracle::decode`]) and `vyrn-wire`'s, which must agree.
//! - INV-FRAME-FIRST (07 §4.3, B-REP-2): every response a client is sent answers a packet whose
//!   PacketRecord already left on path A and on path B.
//!
//! Checked at the end: INV-DET (07 §6: every replica replays the same responses, the same
//! digest); no replica refused a block or saw a sequencer fault; the box finalized blocks; the
//! client saw fills, durable and final; liveness: after the last fault healed, the final height
//! still moved.
//!
//! Not simulated yet (docs/testing.md lists them): Simplex on commonware's deterministic runtime
//! (the interim voter votes here), the journal's disk, crash and restart, clock steps, the
//! Byzantine mocks beyond a misbehaving client (`FaultKinds::misbehave`); and the failure-matrix rows that need failover (§9) or catch-up (§7.6).

use std::collections::HashMap;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::atomic::Ordering;
use std::time::Instant;

use vyrn_home::PATH_GROUPS;
use vyrn_nic::lossy::SplitMix64;
use vyrn_nic::sim::{Fate, Hop, SimNet};
use vyrn_replica::homekit::{LoopbackHome, OneThread};

use crate::oracle::twin::Twins;

mod scenario;
pub use scenario::Scenario;

/// Simulated time the home starts at (ns): the roles' clocks start at 1 ms (0 is "never").
const T0: u64 = 1_000_000;
/// The least step of simulated time (ns).
const BUSY_STEP: u64 = 100;
/// The longest jump of simulated time (ns): timers the tiles do not announce fire at most this
/// late.
const IDLE_STEP: u64 = 10_000;
/// Rounds polled at one instant while some tile still has work.
const SETTLE_ROUNDS: u32 = 16;
/// Simulated time after the load stops for the last blocks to become final (ns).
const TAIL_NS: u64 = 150_000_000;

/// Fault kinds a campaign may draw (`vyrn sim --faults`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FaultKinds {
    /// Loss on path A, B or both (from the sender: every receiver of the path loses it).
    pub loss: bool,
    /// Duplicated datagrams on the paths.
    pub dup: bool,
    /// Latency jitter on every hop (reorders).
    pub jitter: bool,
    /// A voter cut from everyone for a while; the box cut from one voter.
    pub partition: bool,
    /// The data box down for a while.
    pub databox: bool,
    /// A tile or a whole replica not polled for 0.1–50 ms.
    pub stall: bool,
    /// A misbehaving client: resends, packets ahead of sequence, exact and conflicting
    /// duplicates, unloggable packets, and two different copies of one packet (07 §5.6).
    pub misbehave: bool,
}

impl FaultKinds {
    /// Every kind.
    pub const ALL: FaultKinds = FaultKinds {
        loss: true,
        dup: true,
        jitter: true,
        partition: true,
        databox: true,
        stall: true,
        misbehave: true,
    };
    /// None: a clean network.
    pub const NONE: FaultKinds = FaultKinds {
        loss: false,
        dup: false,
        jitter: false,
        partition: false,
        databox: false,
        stall: false,
        misbehave: false,
    };

    /// `all`, `none`, or a comma list of `loss,dup,jitter,partition,databox,stall,misbehave`.
    pub fn parse(s: &str) -> Result<Self, String> {
        match s {
            "all" => return Ok(Self::ALL),
            "none" => return Ok(Self::NONE),
            _ => {}
        }
        let mut k = Self::NONE;
        for w in s.split(',').map(str::trim) {
            match w {
                "loss" => k.loss = true,
                "dup" => k.dup = true,
                "jitter" => k.jitter = true,
                "partition" => k.partition = true,
                "databox" => k.databox = true,
                "stall" => k.stall = true,
                "misbehave" => k.misbehave = true,
                _ => return Err(format!("unknown fault kind {w:?}")),
            }
        }
        Ok(k)
    }
}

/// Who a network address is (the sim home sits on the netns lab's addresses).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    /// The sequencer box (client, control and path senders).
    Box,
    /// Voter `i`.
    Voter(u8),
    /// The data box.
    DataBox,
    /// A client (the load).
    Client,
}

/// The role at `ip` in the sim home (`HomeAddrs::netns_lab`).
pub fn role(ip: Ipv4Addr) -> Role {
    let o = ip.octets();
    if o[0] != 10 || o[1] != 77 {
        return Role::Client;
    }
    match o[3] {
        1 => Role::Box,
        10..=13 => Role::Voter(o[3] - 10),
        20 | 21 => Role::DataBox,
        _ => Role::Client,
    }
}

/// A fault that holds for a window of simulated time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cut {
    /// Voter `i` cut off from everyone (07 §14: a voter partitioned).
    Voter(u8),
    /// The box cut off from voter `i` (§14: sequencer from k voters, k = 1).
    BoxFrom(u8),
    /// The data box down (§14: data box down).
    DataBox,
    /// Replication path `p` (0 = A) down: every frame on it lost (§14: one order path down).
    PathDown(u8),
    /// Voter `i`'s tile not polled (a paused process).
    StallVoter(u8),
    /// The box's tile named here not polled (a stalled core).
    StallTile(&'static str),
    /// Every tile of the box not polled (a paused box: 07 §9.1's silence on both paths).
    BoxPause,
    /// The box signs two headers for one height and voter 0 holds both (07 §10.1), from the
    /// window's start.
    Equivocate,
    /// The home's last session is a misbehaving client ([`vyrn_replica::homekit::Misbehave`]),
    /// a round of its script every [`MISBEHAVE_PERIOD_NS`].
    Misbehave,
}

/// Between two rounds of the misbehaving client's script (13 packets and a pair of different
/// copies each).
pub const MISBEHAVE_PERIOD_NS: u64 = 2_000_000;

/// A fault's window, simulated ns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    /// What.
    pub cut: Cut,
    /// From (ns).
    pub from: u64,
    /// Until (ns, exclusive).
    pub to: u64,
}

impl Window {
    fn holds(&self, now: u64) -> bool {
        (self.from..self.to).contains(&now)
    }
}

/// Everything a seed draws about the network and the faults.
#[derive(Debug, Clone, PartialEq)]
pub struct Schedule {
    /// Latency of every hop, ns.
    pub base_ns: u64,
    /// Extra latency drawn per hop, 0..=jitter ns (reorders).
    pub jitter_ns: u64,
    /// Loss per path (A, B), from the sender.
    pub path_loss: [f64; 2],
    /// Duplicate probability per path hop.
    pub dup: f64,
    /// Loss on both paths as one voter receives them (§14: frame lost on both paths to one
    /// replica): the voter and the probability, drawn per hop.
    pub voter_path_loss: Option<(u8, f64)>,
    /// Windows of partitions, outages and stalls.
    pub windows: Vec<Window>,
}

/// The box tiles a stall may hit.
const STALL_TILES: [&str; 6] = ["cut", "bbo", "streamA", "streamB", "lane0", "control"];

impl Schedule {
    /// Draw a schedule from `seed` for a run whose load lasts `load_ns` from the start (1 ms).
    pub fn draw(seed: u64, kinds: FaultKinds, load_ns: u64) -> Self {
        let mut r = SplitMix64::new(seed ^ 0x5c4e_d01e);
        let mut below = |n: u64| r.next_u64() % n.max(1);
        let mut s = Schedule {
            base_ns: 5_000 + below(45_000),
            jitter_ns: 0,
            path_loss: [0.0; 2],
            dup: 0.0,
            voter_path_loss: None,
            windows: Vec::new(),
        };
        // Each kind is drawn in with probability 1/2, so a campaign mixes them.
        if kinds.jitter && below(2) == 0 {
            s.jitter_ns = below(200_000);
        }
        if kinds.loss && below(2) == 0 {
            // One path, the other, or both (07 §14: a path lossy or down).
            let p = below(300) as f64 / 1000.0;
            match below(3) {
                0 => s.path_loss[0] = p,
                1 => s.path_loss[1] = p,
                _ => s.path_loss = [p, below(300) as f64 / 1000.0],
            }
        }
        if kinds.dup && below(2) == 0 {
            s.dup = below(50) as f64 / 1000.0;
        }
        let window = |cut: Cut, max_ns: u64, below: &mut dyn FnMut(u64) -> u64| {
            let from = T0 + below(load_ns);
            let len = 100_000 + below(max_ns);
            Window {
                cut,
                from,
                to: from + len,
            }
        };
        if kinds.partition && below(2) == 0 {
            let v = below(4) as u8;
            let cut = if below(2) == 0 {
                Cut::Voter(v)
            } else {
                Cut::BoxFrom(v)
            };
            s.windows.push(window(cut, 50_000_000, &mut below));
        }
        if kinds.databox && below(2) == 0 {
            s.windows.push(window(Cut::DataBox, 50_000_000, &mut below));
        }
        if kinds.stall && below(2) == 0 {
            let cut = if below(2) == 0 {
                Cut::StallVoter(below(4) as u8)
            } else {
                Cut::StallTile(STALL_TILES[below(STALL_TILES.len() as u64) as usize])
            };
            s.windows.push(window(cut, 50_000_000, &mut below));
        }
        // Drawn last: a seed's other faults are as they were before this kind existed.
        if kinds.misbehave && below(2) == 0 {
            let mut w = window(Cut::Misbehave, load_ns, &mut below);
            w.to = w.to.min(T0 + load_ns);
            s.windows.push(w);
        }
        s
    }

    /// The misbehaving client this schedule draws, if any ([`Cut::Misbehave`]).
    pub fn misbehave(&self) -> Option<vyrn_replica::homekit::Misbehave> {
        self.windows
            .iter()
            .find(|w| w.cut == Cut::Misbehave)
            .map(|w| vyrn_replica::homekit::Misbehave {
                from_ns: w.from,
                to_ns: w.to,
                period_ns: MISBEHAVE_PERIOD_NS,
            })
    }

    /// When the last fault window ends (ns), if any.
    pub fn healed_at(&self) -> Option<u64> {
        self.windows.iter().map(|w| w.to).max()
    }

    /// The schedule, a line per fault, as `vyrn sim` prints it.
    pub fn describe(&self) -> Vec<String> {
        let ms = |ns: u64| ns as f64 / 1e6;
        let mut v = vec![format!(
            "latency {:.0} µs + jitter 0..{:.0} µs per hop",
            self.base_ns as f64 / 1e3,
            self.jitter_ns as f64 / 1e3
        )];
        if self.path_loss != [0.0; 2] {
            v.push(format!(
                "loss on path A {:.1} %, path B {:.1} %",
                self.path_loss[0] * 100.0,
                self.path_loss[1] * 100.0
            ));
        }
        if self.dup > 0.0 {
            v.push(format!("duplicates on the paths {:.1} %", self.dup * 100.0));
        }
        if let Some((i, q)) = self.voter_path_loss {
            v.push(format!(
                "loss on both paths to voter {i} {:.1} %",
                q * 100.0
            ));
        }
        for w in &self.windows {
            let what = match w.cut {
                Cut::Voter(i) => format!("voter {i} partitioned from everyone"),
                Cut::BoxFrom(i) => format!("the box cut from voter {i}"),
                Cut::DataBox => "the data box down".into(),
                Cut::PathDown(p) => format!("path {} down", if p == 0 { "A" } else { "B" }),
                Cut::StallVoter(i) => format!("voter {i} paused"),
                Cut::StallTile(t) => format!("the box's {t} tile stalled"),
                Cut::BoxPause => "the whole box paused".into(),
                Cut::Equivocate => "the box equivocates (two signed headers, one height)".into(),
                Cut::Misbehave => {
                    "a client misbehaves (resends, duplicates, gaps, two different copies)".into()
                }
            };
            if w.to == u64::MAX {
                v.push(format!("{what} from {:.3} ms to the end", ms(w.from)));
            } else {
                v.push(format!(
                    "{what} from {:.3} ms to {:.3} ms",
                    ms(w.from),
                    ms(w.to)
                ));
            }
        }
        v
    }

    /// The kinds this schedule exercises, by name (for the campaign's coverage).
    pub fn kinds(&self) -> Vec<&'static str> {
        let mut k = Vec::new();
        if self.jitter_ns > 0 {
            k.push("jitter");
        }
        if self.path_loss[0] > 0.0 && self.path_loss[1] > 0.0 {
            k.push("loss-both");
        } else if self.path_loss != [0.0; 2] {
            k.push("loss-one");
        }
        if self.dup > 0.0 {
            k.push("dup");
        }
        for w in &self.windows {
            k.push(match w.cut {
                Cut::Voter(_) => "partition-voter",
                Cut::BoxFrom(_) => "partition-box-voter",
                Cut::DataBox => "databox-down",
                Cut::PathDown(_) => "path-down",
                Cut::StallVoter(_) => "stall-voter",
                Cut::StallTile(_) => "stall-box-tile",
                Cut::BoxPause => "box-pause",
                Cut::Equivocate => "equivocate",
                Cut::Misbehave => "misbehave",
            });
        }
        k
    }

    /// The network's policy for this schedule: every hop's fate, drawn from `seed` in send
    /// order.
    fn policy(&self, seed: u64) -> vyrn_nic::sim::Policy {
        let s = self.clone();
        let mut r = SplitMix64::new(seed ^ 0x0e70_4b01);
        let path_of = |to: SocketAddrV4| PATH_GROUPS.iter().position(|g| g == to.ip());
        Box::new(move |h: &Hop<'_>| {
            // Draw the same numbers for every hop, whatever its fate: the stream of draws
            // depends on the sends alone.
            let (x, y, z) = (r.next_u64(), r.next_u64(), r.next_u64());
            let (src, dst) = (role(*h.src.ip()), role(*h.dst.ip()));
            let cut = s.windows.iter().any(|w| {
                w.holds(h.now)
                    && match w.cut {
                        Cut::Voter(i) => src == Role::Voter(i) || dst == Role::Voter(i),
                        Cut::BoxFrom(i) => {
                            (src, dst) == (Role::Box, Role::Voter(i))
                                || (src, dst) == (Role::Voter(i), Role::Box)
                        }
                        Cut::DataBox => src == Role::DataBox || dst == Role::DataBox,
                        Cut::PathDown(p) => path_of(h.to) == Some(usize::from(p)),
                        Cut::StallVoter(_)
                        | Cut::StallTile(_)
                        | Cut::BoxPause
                        | Cut::Equivocate
                        | Cut::Misbehave => false,
                    }
            });
            if cut {
                return Fate::Partitioned;
            }
            let delay = s.base_ns
                + if s.jitter_ns > 0 {
                    y % (s.jitter_ns + 1)
                } else {
                    0
                };
            if let Some(p) = path_of(h.to) {
                // Loss from the sender: one draw per datagram (its id), every receiver alike.
                let mut d = SplitMix64::new(h.id ^ seed);
                if unit(d.next_u64()) < s.path_loss[p] {
                    return Fate::Lost;
                }
                if let Some((v, q)) = s.voter_path_loss {
                    if dst == Role::Voter(v) && unit(z.rotate_left(32)) < q {
                        return Fate::Lost;
                    }
                }
                if unit(x) < s.dup {
                    return Fate::Deliver {
                        delay,
                        copies: 2,
                        dup_gap: z % 50_000,
                    };
                }
            }
            Fate::after(delay)
        })
    }
}

fn unit(x: u64) -> f64 {
    (x >> 11) as f64 / (1u64 << 53) as f64
}

/// A bug planted in the production code on purpose, which the simulator must find (its tests;
/// `vyrn sim --plant`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Plant {
    /// The stream cores release responses as a step's record is appended, before the frame is
    /// written (`GateMode::ReleaseOnAppend`): INV-FRAME-FIRST broken.
    Gate,
    /// `vyrn-wire`'s decoder gives one PacketRecord the next packet's `pkt_seq`
    /// (`decoder::planted`): one record mis-merged.
    Decoder,
    /// Replay folds a `HashSet`'s iteration order into its digest (`Node::plant_map_order`): a
    /// nondeterministic map iteration.
    Replay,
}

impl Plant {
    /// `gate`, `decoder` or `replay`.
    pub fn parse(s: &str) -> Result<Self, String> {
        match s {
            "gate" => Ok(Plant::Gate),
            "decoder" => Ok(Plant::Decoder),
            "replay" => Ok(Plant::Replay),
            _ => Err(format!("unknown planted bug {s:?} (gate, decoder, replay)")),
        }
    }
}

/// One run's settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SimConfig {
    /// The seed: schedule, poll order, keys.
    pub seed: u64,
    /// Fault kinds it may draw.
    pub kinds: FaultKinds,
    /// Simulated ms of client load (then 150 ms for the last answers).
    pub load_ms: u64,
    /// Client msgs/s.
    pub rate: u64,
    /// A planted bug, if any.
    pub plant: Option<Plant>,
    /// A row of the failure matrix instead of a drawn schedule.
    pub scenario: Option<Scenario>,
}

impl SimConfig {
    /// The campaign's run of `seed`: every fault kind, 300 ms of load at 4000 msgs/s.
    pub fn campaign(seed: u64) -> Self {
        SimConfig {
            seed,
            kinds: FaultKinds::ALL,
            load_ms: 300,
            rate: 4000,
            plant: None,
            scenario: None,
        }
    }
}

/// A broken promise, with where it was seen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// The invariant, as 07 names it.
    pub invariant: &'static str,
    /// Simulated time (ns).
    pub at: u64,
    /// The poll (step number) after which it was seen, and the tile polled.
    pub step: u64,
    /// The tile polled at that step.
    pub tile: String,
    /// What was seen.
    pub detail: String,
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} at {:.3} ms, step {} (tile {}): {}",
            self.invariant,
            self.at as f64 / 1e6,
            self.step,
            self.tile,
            self.detail
        )
    }
}

/// What one run did and found.
#[derive(Debug, Clone)]
pub struct Report {
    /// The seed.
    pub seed: u64,
    /// The fault schedule.
    pub schedule: Schedule,
    /// Broken invariants, first first (the run stops at the first found while running).
    pub violations: Vec<Violation>,
    /// The network's trace (hash of every event, events): equal for two runs of one seed.
    pub trace: (u64, u64),
    /// Simulated ns run.
    pub sim_ns: u64,
    /// Wall time, s.
    pub wall_s: f64,
    /// Of which building the home (its buffers, keys, sockets), s.
    pub setup_s: f64,
    /// Tile polls.
    pub polls: u64,
    /// The network's totals.
    pub net: vyrn_nic::sim::NetStats,
    /// Frames each path carried (as emitted) and the decoders checked.
    pub frames: [u64; 2],
    /// Responses checked against the gate.
    pub responses: u64,
    /// The box's final height at the end.
    pub final_height: u64,
    /// The replicas' replay digest (replica 0's; all equal when INV-DET holds).
    pub digest: [u8; 32],
    /// The client's answered News, fills, durable and final facts.
    pub client: [u64; 4],
    /// What the home did about the faults.
    pub figures: Figures,
}

/// What the home did about the faults, for the scenarios' expectations.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Figures {
    /// Times the box's finality gate halted the book, and resumed it (07 §6.8).
    pub gate_halts: u64,
    /// See `gate_halts`.
    pub gate_resumes: u64,
    /// Holes the replicas repaired by NACK (sum over replicas).
    pub repaired: u64,
    /// Payloads the replicas fetched (peers, the sequencer, a data box's answer).
    pub fetched: u64,
    /// Replicas whose REP_A_PATH was raised at the end, per path.
    pub path_alarms: [u64; 2],
    /// Voters at which the tenure was deposed (07 §9.2), and the longest time from the box's
    /// last frame (the newest any voter took) to a deposition.
    pub deposed: u64,
    /// See `deposed`.
    pub deposed_after_ns: u64,
    /// Failover suspicions (07 §9.1), over the voters.
    pub suspicions: u64,
    /// Frames the voters refused as a deposed tenure's (INV-REP-5).
    pub refused_deposed: u64,
}

/// 07 §9.7 stages 1–3: the last frame reaches every voter, FAILOVER_SILENCE_MS, Silence
/// all-to-all — 3.6 ms.
pub const DEPOSE_BUDGET_NS: u64 = 3_600_000;

impl Report {
    /// True when nothing was violated.
    pub fn ok(&self) -> bool {
        self.violations.is_empty()
    }
}

/// The running checks.
struct Checks {
    twins: [Twins; 2],
    /// (session, pkt_seq) → the datagram (send order: several leave at one simulated instant)
    /// whose frame first carried its PacketRecord on path A / B.
    on_path: [HashMap<(u32, u32), u64>; 2],
    seen_pkts: [usize; 2],
    /// The newest step whose records (every half) left on path A / B (decoded in StepId order).
    max_step: [u64; 2],
    k_out: HashMap<u32, [u8; 16]>,
    box_client: SocketAddrV4,
    frames: [u64; 2],
    responses: u64,
    /// Per session: what its responses said so far.
    sessions: HashMap<u32, Told>,
    found: Vec<Violation>,
}

/// What the box told one session so far (its first copies, not resends).
#[derive(Debug, Default, Clone)]
struct Told {
    /// Every numbered response's `resp_seq` (notices are outside the numbering).
    resp_seqs: std::collections::BTreeSet<u64>,
    durable: u64,
    fin: u64,
}

impl Checks {
    fn new(h: &LoopbackHome) -> Result<Self, String> {
        let layout = h.cfg.engine.layout;
        Ok(Checks {
            twins: [Twins::new(layout)?, Twins::new(layout)?],
            on_path: [HashMap::new(), HashMap::new()],
            seen_pkts: [0; 2],
            max_step: [0; 2],
            k_out: h
                .home
                .engine
                .sessions
                .iter()
                .map(|s| (s.session, s.k_out))
                .collect(),
            box_client: SocketAddrV4::new(h.cfg.ip, h.cfg.client_port),
            frames: [0; 2],
            responses: 0,
            sessions: HashMap::new(),
            found: Vec::new(),
        })
    }

    fn sent(&mut self, s: &vyrn_nic::sim::Sent, step: u64, tile: &str) {
        let v = |inv: &'static str, detail: String| Violation {
            invariant: inv,
            at: s.at,
            step,
            tile: tile.to_string(),
            detail,
        };
        if let Some(p) = PATH_GROUPS.iter().position(|g| g == s.to.ip()) {
            self.frames[p] += 1;
            if let Err(e) = self.twins[p].frame(&s.data) {
                let path = if p == 0 { "A" } else { "B" };
                self.found.push(v(
                    "T-REP-2 (07 §11)",
                    format!("path {path}: decoders differ: {e}"),
                ));
            }
            let pkts = &self.twins[p].decoded().pkts;
            for r in &pkts[self.seen_pkts[p]..] {
                self.on_path[p]
                    .entry((r.session, r.pkt_seq))
                    .or_insert(s.id);
            }
            self.seen_pkts[p] = pkts.len();
            if let Some(st) = self.twins[p].decoded().steps.last() {
                self.max_step[p] = self.max_step[p].max(st.step);
            }
            return;
        }
        if s.src != self.box_client || role(*s.to.ip()) != Role::Client {
            return;
        }
        // A response to a client: which packet it answers (07 §4.3).
        let Some(session) = s
            .data
            .get(..4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        else {
            return;
        };
        let Some(k) = self.k_out.get(&session) else {
            return;
        };
        let Ok(r) = vyrn_wire::msg::client::Response::parse(&s.data, k) else {
            return;
        };
        self.responses += 1;
        if let Err((inv, e)) = self.told(&r) {
            self.found.push(v(inv, e));
            return;
        }
        // Every fill's step was written to both paths (07 §4.3: the step that covers the op).
        for rec in &r.records {
            if let vyrn_wire::msg::client::Record::Fill { step, .. } = rec {
                if let Some(paths) = missing(self.max_step.map(|m| m >= *step)) {
                    self.found.push(v(
                        "INV-FRAME-FIRST (07 §4.3)",
                        format!(
                            "response {} to session {session} carries a fill of step {step} before that step was on path {paths}",
                            r.resp_seq,
                        ),
                    ));
                    return;
                }
            }
        }
        if r.echo_pkt_seq == 0 {
            return;
        }
        let key = (session, r.echo_pkt_seq);
        let on = [0, 1].map(|p| self.on_path[p].get(&key).is_some_and(|&id| id < s.id));
        if let Some(paths) = missing(on) {
            self.found.push(v(
                "INV-FRAME-FIRST (07 §4.3)",
                format!(
                    "response {} to session {session} pkt_seq {} left before its PacketRecord was on path {paths}",
                    r.resp_seq, r.echo_pkt_seq,
                ),
            ));
        }
    }
}

impl Checks {
    /// A session's responses in send order (first copies): no `resp_seq` numbers two packets
    /// (missing-chapters §2; the lanes' and the TX tile's packets may leave out of number order,
    /// the end check finds the gaps), and its watermarks (07 §6.9) never go back — DUR_QUORUM no
    /// further than the steps already on both paths, FINAL never below what it said.
    fn told(&mut self, r: &vyrn_wire::msg::client::Response) -> Result<(), (&'static str, String)> {
        use vyrn_wire::msg::client::{Record, NOTICE_RESP_SEQ};
        if r.resend {
            return Ok(());
        }
        let on_both = self.max_step[0].min(self.max_step[1]);
        let t = self.sessions.entry(r.session).or_default();
        if r.resp_seq != NOTICE_RESP_SEQ && !t.resp_seqs.insert(r.resp_seq) {
            return Err((
                "resp_seq (missing-chapters §2)",
                format!(
                    "session {}: resp_seq {} numbers a second packet",
                    r.session, r.resp_seq
                ),
            ));
        }
        for rec in &r.records {
            match *rec {
                Record::Durable { step, .. } => {
                    if step < t.durable || step > on_both {
                        return Err((
                            "DUR_QUORUM watermark (07 §6.9)",
                            format!(
                                "session {}: durable step {step} after {}, with steps to {on_both} on both paths",
                                r.session, t.durable
                            ),
                        ));
                    }
                    t.durable = step;
                }
                Record::Final { height, .. } => {
                    if height < t.fin {
                        return Err((
                            "FINAL watermark (07 §6.9)",
                            format!(
                                "session {}: final height {height} after {}",
                                r.session, t.fin
                            ),
                        ));
                    }
                    t.fin = height;
                }
                _ => {}
            }
        }
        Ok(())
    }
}

impl Checks {
    /// At the end: every session's numbered responses are 1..=n, no gap (missing-chapters §2).
    fn gapless(&self) -> Result<(), String> {
        for (session, t) in &self.sessions {
            let n = t.resp_seqs.len() as u64;
            if t.resp_seqs.last().is_some_and(|&m| m != n) {
                let hole = (1..=n).find(|i| !t.resp_seqs.contains(i));
                return Err(format!(
                    "session {session}: {n} responses numbered up to {:?}, first hole {hole:?}",
                    t.resp_seqs.last()
                ));
            }
        }
        Ok(())
    }
}

/// The paths (of A, B) not yet carrying what a response needs: `None` when both do.
fn missing(on: [bool; 2]) -> Option<&'static str> {
    match on {
        [true, true] => None,
        [false, true] => Some("A"),
        [true, false] => Some("B"),
        [false, false] => Some("A and B"),
    }
}

/// Run one seed.
pub fn run(cfg: &SimConfig) -> Result<Report, String> {
    let wall = Instant::now();
    let schedule = match cfg.scenario {
        Some(sc) => sc.schedule(cfg.load_ms * 1_000_000),
        None => Schedule::draw(cfg.seed, cfg.kinds, cfg.load_ms * 1_000_000),
    };
    let net = SimNet::new(schedule.policy(cfg.seed));
    let _net = vyrn_nic::sim::install(&net);
    vyrn_wire::msg::seal::set_sim_start_seq(Some(1 << 40));
    let _unset = Unset;
    net.set_now(T0);
    net.tap(true);
    let h = LoopbackHome::simulated(&format!("s{:x}", cfg.seed), cfg.seed)?;
    let mut checks = Checks::new(&h)?;
    let mut one = h.one_thread_with(
        cfg.seed,
        cfg.rate,
        cfg.load_ms * 1_000_000,
        schedule.misbehave(),
    )?;
    plant(&mut one, cfg.plant);
    let mut equivocate = schedule
        .windows
        .iter()
        .find(|w| w.cut == Cut::Equivocate)
        .map(|w| (w.from, evidence(&h)));
    let end = one.end_ns + TAIL_NS;
    let setup_s = wall.elapsed().as_secs_f64();
    let names: Vec<String> = one.home.tasks.iter().map(|t| t.name()).collect();
    let stalled = stall_sets(&schedule, &names);
    let mut rng = SplitMix64::new(cfg.seed ^ 0x5017);
    let mut order: Vec<usize> = (0..names.len()).collect();
    let (mut now, mut polls) = (T0, 0u64);
    let healed = schedule
        .healed_at()
        .unwrap_or(T0)
        .max(T0)
        .saturating_add(30_000_000);
    let mut final_at_heal = None;
    let mut sent = Vec::new();
    let trace_ip: Option<Ipv4Addr> = std::env::var("VYRN_SIM_TRACE")
        .ok()
        .and_then(|s| s.parse().ok());
    let mut settle = 0;
    while now < end && checks.found.is_empty() {
        net.set_now(now);
        for i in (1..order.len()).rev() {
            order.swap(i, (rng.next_u64() % (i as u64 + 1)) as usize);
        }
        if let Some((_, ev)) = equivocate.take_if(|(at, _)| now >= *at) {
            give_evidence(&mut one, ev);
        }
        let mut busy = false;
        for &i in &order {
            if stalled.iter().any(|(w, t)| *t == i && w.holds(now)) {
                continue;
            }
            busy |= one.home.poll(i, now);
            polls += 1;
            net.drain_tap(&mut sent);
            for s in sent.drain(..) {
                if let Some(ip) = &trace_ip {
                    if s.src.ip() == ip || s.to.ip() == ip {
                        eprintln!(
                            "{:>12} {} {} -> {} len {} {:02x?}",
                            now,
                            names[i],
                            s.src,
                            s.to,
                            s.data.len(),
                            &s.data[..s.data.len().min(24)]
                        );
                    }
                }
                checks.sent(&s, polls, &names[i]);
            }
        }
        if final_at_heal.is_none() && now >= healed {
            final_at_heal = Some(one.control.final_height.load(Ordering::Relaxed));
        }
        // Work passed between tiles at one instant is polled again at that instant (a few
        // rounds at most: a tile that is busy at every poll still lets time pass); then time
        // jumps to the next arrival, or IDLE_STEP, whichever is first.
        settle += 1;
        if busy && settle < SETTLE_ROUNDS {
            continue;
        }
        settle = 0;
        let next = net.next_arrival().unwrap_or(u64::MAX);
        now = next.clamp(now + BUSY_STEP, now + IDLE_STEP);
    }
    let sim_ns = now - T0;
    if checks.found.is_empty() {
        if let Err(e) = checks.gapless() {
            checks.found.push(Violation {
                invariant: "resp_seq gapless (missing-chapters §2)",
                at: now,
                step: polls,
                tile: "(end of run)".into(),
                detail: e,
            });
        }
    }
    let frames = checks.frames;
    let responses = checks.responses;
    let mut found = checks.found;
    let stopped_early = !found.is_empty();
    let final_height = one.control.final_height.load(Ordering::Relaxed);
    let mut r = Report {
        seed: cfg.seed,
        schedule,
        violations: Vec::new(),
        trace: net.trace(),
        sim_ns,
        wall_s: 0.0,
        setup_s,
        polls,
        net: net.stats(),
        frames,
        responses,
        final_height,
        digest: [0; 32],
        client: [0; 4],
        figures: Figures {
            gate_halts: one.control.gate_halts.load(Ordering::Relaxed),
            gate_resumes: one.control.gate_resumes.load(Ordering::Relaxed),
            ..Figures::default()
        },
    };
    if std::env::var_os("VYRN_SIM_DEBUG").is_some() {
        eprintln!("unread at the end: {:?} (now {now})", net.queued());
    }
    if !stopped_early {
        end_checks(one, final_at_heal, now, &mut r, &mut found);
    }
    if let (Some(sc), true) = (cfg.scenario, found.is_empty()) {
        if let Err(e) = sc.check(&r) {
            found.push(Violation {
                invariant: "07 §14 (the row's expected outcome)",
                at: now,
                step: r.polls,
                tile: "(end of run)".into(),
                detail: e,
            });
        }
    }
    r.violations = found;
    r.wall_s = wall.elapsed().as_secs_f64();
    Ok(r)
}

/// What went wrong for the misbehaving client, if anything: it sent no round, or its session's
/// next valid packet after them was never answered without a Reject.
fn misbehaved_wrong(m: &vyrn_replica::homekit::MisbehaveStats) -> Option<String> {
    (m.rounds == 0 || m.valid_answered.is_none()).then(|| {
        format!(
            "{} rounds, {} datagrams, {} answers ({} rejects); {} next valid packet(s) sent, none answered without a Reject (the last refusal: {:?})",
            m.rounds, m.sent, m.answers, m.rejects, m.valid_sent, m.valid_refused
        )
    })
}

/// The PacketRecord the planted decoder bug mis-merges (on the run's thread, counting every
/// decoder's).
const PLANT_AT_RECORD: u64 = 500;

/// Plant `p` in the home's production code (see [`Plant`]).
fn plant(one: &mut OneThread, p: Option<Plant>) {
    match p {
        Some(Plant::Gate) => one
            .knobs
            .set_gate_mode(vyrn_seq::stream::GateMode::ReleaseOnAppend),
        Some(Plant::Decoder) => vyrn_wire::decoder::planted::set_mismerge(PLANT_AT_RECORD),
        Some(Plant::Replay) => {
            for t in &mut one.home.tasks {
                let t: &mut dyn std::any::Any = t.as_mut();
                if let Some(n) = t.downcast_mut::<vyrn_replica::node::Node>() {
                    n.plant_map_order();
                }
            }
        }
        None => {}
    }
}

/// Two headers for height 1 that the home's box signed, with different bytes (07 §10.1).
fn evidence(h: &LoopbackHome) -> vyrn_wire::msg::ctrl::SeqEquivocation {
    let key = ed25519_dalek::SigningKey::from_bytes(h.cfg.seq_key.expose());
    let mut a = vyrn_wire::header::BlockHeader {
        height: 1,
        epoch: h.home.epoch,
        book: h.home.engine.book,
        first_step: 1,
        last_step: 0,
        prev: [0; 32],
        order_root: [1; 32],
        data_root: [2; 32],
        seq_sig: [0; 64],
    };
    let mut b = a;
    b.data_root = [3; 32];
    a.sign(&key);
    b.sign(&key);
    vyrn_wire::msg::ctrl::SeqEquivocation {
        epoch: h.home.epoch,
        height: 1,
        header_a: a,
        header_b: b,
    }
}

/// Voter 0 holds the evidence (as if it had found it).
fn give_evidence(one: &mut OneThread, ev: vyrn_wire::msg::ctrl::SeqEquivocation) {
    for t in &mut one.home.tasks {
        let t: &mut dyn std::any::Any = t.as_mut();
        if let Some(n) = t.downcast_mut::<vyrn_replica::node::Node>() {
            n.give_evidence(ev);
            return;
        }
    }
}

/// Restores the wall clock of the seal's start sequence, and clears a planted decoder bug,
/// when a run ends.
struct Unset;

impl Drop for Unset {
    fn drop(&mut self) {
        vyrn_wire::msg::seal::set_sim_start_seq(None);
        vyrn_wire::decoder::planted::set_mismerge(0);
    }
}

/// Each stall window and the tile index it holds back.
fn stall_sets(s: &Schedule, names: &[String]) -> Vec<(Window, usize)> {
    let mut out = Vec::new();
    for w in &s.windows {
        match w.cut {
            // The replicas' fronts are the first tiles, in voter order.
            Cut::StallVoter(v) => out.push((*w, usize::from(v))),
            Cut::StallTile(t) => {
                if let Some(i) = names.iter().position(|n| n == t) {
                    out.push((*w, i));
                }
            }
            // The box's tiles: after the four replicas and the data box, before the load.
            Cut::BoxPause => out.extend((5..names.len().saturating_sub(1)).map(|i| (*w, i))),
            _ => {}
        }
    }
    out
}

fn end_checks(
    one: OneThread,
    final_at_heal: Option<u64>,
    now: u64,
    r: &mut Report,
    found: &mut Vec<Violation>,
) {
    let mut v = |inv: &'static str, detail: String| {
        found.push(Violation {
            invariant: inv,
            at: now,
            step: r.polls,
            tile: "(end of run)".into(),
            detail,
        })
    };
    // A paused box is deposed and nothing takes over yet (07 §9.4–§9.5 not built): the book
    // stays halted after it.
    let paused = r
        .schedule
        .windows
        .iter()
        .find(|w| matches!(w.cut, Cut::BoxPause | Cut::Equivocate))
        .copied();
    if let (Some(f), None) = (final_at_heal, paused) {
        if r.final_height <= f {
            v(
                "liveness (07 §14)",
                format!("no block became final after the faults healed (final height {f})"),
            );
        }
    }
    // The misbehaving client (`docs/wire.md` "What the box logs"): it sent its rounds, and its
    // session's next valid packet after them was answered without a Reject.
    if let (Some(e), None) = (one.misbehaved().and_then(misbehaved_wrong), paused) {
        v(
            "a misbehaving client stops nothing (docs/wire.md, 07 §5.6)",
            e,
        );
    }
    let home = match one.finish() {
        Ok(h) => h,
        Err(e) => {
            v("INV-DET (07 §6)", format!("a replica's replay failed: {e}"));
            return;
        }
    };
    let c = &home.counts;
    r.client = [c.answered, c.fills, c.durable, c.fin];
    if c.answered == 0 || c.fin == 0 {
        v(
            "liveness (07 §14)",
            format!(
                "the client got {} answers and {} final facts",
                c.answered, c.fin
            ),
        );
    }
    if home.diverge_halts > 0 {
        v(
            "INV-DET (07 §7.4)",
            format!(
                "the box halted the book {} times for a divergence",
                home.diverge_halts
            ),
        );
    }
    let Some(first) = home.nodes.first() else {
        v("INV-DET (07 §6)", "no replica".into());
        return;
    };
    let d0 = first.replay().digest();
    r.digest = d0;
    // 07 §5.7: a replica marks a data box down only when it fell silent; with no fault window
    // it never does (the DATA_HB period under REP_DATA_SILENCE_MS).
    let quiet = r.schedule.windows.is_empty();
    // A voter cut off to the end (a scenario's crash) is behind, not wrong: it is left out.
    let gone = |i: usize| {
        r.schedule
            .windows
            .iter()
            .any(|w| w.cut == Cut::Voter(i as u8) && w.to > now)
    };
    let t_last = home
        .nodes
        .iter()
        .filter_map(|n| n.core().order_rx().last_rx())
        .max();
    for (i, n) in home.nodes.iter().enumerate() {
        r.figures.repaired += n.core().order_rx().counters().repaired;
        r.figures.fetched += n.core().data().counters().fetched_ok;
        for p in 0..2 {
            r.figures.path_alarms[p] += u64::from(n.core().order_rx().path_alarm(p as u8));
        }
        if let Some(e) = failover_figures(i, n, paused, t_last, &mut r.figures) {
            v("07 §9.1 (a live sequencer deposed)", e);
        }
        if gone(i) {
            continue;
        }
        let c = n.counters();
        let down = n.core().data().counters().box_down;
        if quiet && down > 0 {
            v(
                "07 §5.7 (data box down)",
                format!("replica {i} marked the data box down {down} times with no fault"),
            );
        }
        if n.voter().refused().is_some() {
            v("INV-QUORUM (07 §6)", format!("replica {i} refused a block"));
        }
        if c.seq_faults > 0 {
            v(
                "07 §3.12",
                format!("replica {i} saw {} sequencer faults", c.seq_faults),
            );
        }
        let (a, b) = (n.replay(), first.replay());
        if a.responses != b.responses || a.digest() != d0 {
            let at = |n: &vyrn_replica::node::Node| {
                let (dec, rep) = n.core().replay_lag();
                format!(
                    "{} responses, {} events, steps decoded {dec} replayed {rep}, voted {}, digest {}",
                    n.replay().responses,
                    n.replay().events,
                    n.voted(),
                    hex8(&n.replay().digest())
                )
            };
            if std::env::var_os("VYRN_SIM_DEBUG").is_some() {
                for (j, m) in [(i, n), (0, first)] {
                    eprintln!(
                        "replica {j}: data {:?}\nrx {:?}\ncore {:?}\nreplay backlog {:?}",
                        m.core().data().counters(),
                        m.core().order_rx().counters(),
                        m.core().counters(),
                        m.core().replay_lag_time(),
                    );
                }
            }
            v(
                "INV-DET (07 §6)",
                format!("replica {i}: {}; replica 0: {}", at(n), at(first)),
            );
        }
    }
}

/// Voter `i`'s failover figures; a deposition with no paused box is a violation (07 §9.1: one
/// isolated voter, a lossy path or a stalled tile never depose a live sequencer).
fn failover_figures(
    i: usize,
    n: &vyrn_replica::node::Node,
    paused: Option<Window>,
    t_last: Option<u64>,
    f: &mut Figures,
) -> Option<String> {
    use vyrn_replica::front::failover::depose::Phase;
    let c = n.failover_counters().unwrap_or_default();
    f.suspicions += c.suspects;
    f.refused_deposed += n.core().order_rx().counters().refused[7];
    let Some(Phase::Deposed { at }) = n.failover_phase() else {
        return None;
    };
    f.deposed += 1;
    let Some(w) = paused else {
        return Some(format!(
            "replica {i} deposed the tenure at {at} ns with no box fault ({c:?})"
        ));
    };
    // 07 §9.7's clock starts at the box's last frame: the newest any voter took; evidence's
    // at its arrival.
    let t = match w.cut {
        Cut::BoxPause => t_last.unwrap_or(w.from),
        _ => w.from,
    };
    f.deposed_after_ns = f.deposed_after_ns.max(at.saturating_sub(t));
    None
}

fn hex8(d: &[u8; 32]) -> String {
    d[..8].iter().map(|b| format!("{b:02x}")).collect()
}

/// A campaign's result.
#[derive(Debug, Clone, Default)]
pub struct Campaign {
    /// Seeds run.
    pub seeds: u64,
    /// Failing seeds and their first violation.
    pub failed: Vec<(u64, String)>,
    /// Seeds that exercised each fault kind.
    pub kinds: std::collections::BTreeMap<&'static str, u64>,
    /// Simulated ns, over every seed.
    pub sim_ns: u64,
    /// Wall s of the runs, summed (one thread each: core-seconds).
    pub cpu_s: f64,
    /// Wall s of the whole campaign.
    pub wall_s: f64,
}

/// Run every seed of `seeds`, each with `cfg(seed)`, on `threads` threads (each seed is one
/// thread's run, as reproducible on any thread); `each` sees every report, in seed order.
pub fn campaign(
    seeds: std::ops::Range<u64>,
    threads: usize,
    cfg: impl Fn(u64) -> SimConfig + Sync,
    mut each: impl FnMut(&Report),
) -> Campaign {
    let wall = Instant::now();
    let threads = threads.max(1) as u64;
    let start = seeds.start;
    let mut results: Vec<(u64, Result<Report, String>)> = std::thread::scope(|sc| {
        let cfg = &cfg;
        let seeds = &seeds;
        let hs: Vec<_> = (0..threads)
            .map(|t| {
                sc.spawn(move || {
                    (start + t..seeds.end)
                        .step_by(threads as usize)
                        .map(|seed| (seed, run(&cfg(seed))))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        hs.into_iter()
            .flat_map(|h| {
                h.join()
                    .unwrap_or_else(|_| vec![(u64::MAX, Err("a run panicked".into()))])
            })
            .collect()
    });
    results.sort_by_key(|r| r.0);
    let mut c = Campaign::default();
    for (seed, r) in results {
        c.seeds += 1;
        match r {
            Ok(r) => {
                for k in r.schedule.kinds() {
                    *c.kinds.entry(k).or_default() += 1;
                }
                c.sim_ns += r.sim_ns;
                c.cpu_s += r.wall_s;
                if let Some(v) = r.violations.first() {
                    c.failed.push((seed, v.to_string()));
                }
                each(&r);
            }
            Err(e) => c
                .failed
                .push((seed, format!("the home did not build: {e}"))),
        }
    }
    c.wall_s = wall.elapsed().as_secs_f64();
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The per-session checks fail where they should: a `resp_seq` numbering two packets, a
    /// DUR_QUORUM ahead of the paths, a FINAL going back, a gap at the end.
    #[test]
    fn the_session_checks_catch_what_they_name() {
        use vyrn_wire::msg::client::{Record, Response};
        let k = [9u8; 16];
        let fresh = || Checks {
            twins: [
                Twins::new(vyrn_wire::Layout::reference()).unwrap(),
                Twins::new(vyrn_wire::Layout::reference()).unwrap(),
            ],
            on_path: [HashMap::new(), HashMap::new()],
            seen_pkts: [0; 2],
            max_step: [10, 10],
            k_out: [(1, k)].into_iter().collect(),
            box_client: SocketAddrV4::new(Ipv4Addr::new(10, 77, 0, 1), 20_000),
            frames: [0; 2],
            responses: 0,
            sessions: HashMap::new(),
            found: Vec::new(),
        };
        let mut id = 0;
        let mut send = |c: &mut Checks, resp_seq: u64, rec: Record| {
            id += 1;
            let data = Response {
                session: 1,
                echo_pkt_seq: 0,
                resp_seq,
                resend: false,
                records: vec![rec],
            }
            .to_bytes(&k)
            .unwrap();
            let sent = vyrn_nic::sim::Sent {
                at: 5,
                src: c.box_client,
                to: SocketAddrV4::new(Ipv4Addr::LOCALHOST, 40_000),
                id,
                data,
            };
            c.sent(&sent, id, "test");
            c.found.last().map(|v| v.invariant)
        };
        let fin = |height| Record::Final { height, view: 1 };
        let dur = |step| Record::Durable { step, height: 1 };
        let mut c = fresh();
        assert_eq!(send(&mut c, 1, fin(3)), None);
        assert_eq!(send(&mut c, 2, dur(10)), None);
        assert!(c.gapless().is_ok());
        assert_eq!(
            send(&mut c, 2, fin(4)),
            Some("resp_seq (missing-chapters §2)")
        );
        let mut c = fresh();
        assert_eq!(
            send(&mut c, 1, dur(11)),
            Some("DUR_QUORUM watermark (07 §6.9)")
        );
        let mut c = fresh();
        assert_eq!(send(&mut c, 1, fin(5)), None);
        assert_eq!(
            send(&mut c, u64::MAX, fin(4)),
            Some("FINAL watermark (07 §6.9)")
        );
        let mut c = fresh();
        assert_eq!(send(&mut c, 1, fin(5)), None);
        assert_eq!(send(&mut c, 3, fin(5)), None);
        assert!(c.gapless().is_err());
    }

    #[test]
    fn roles_follow_the_lab_addresses() {
        assert_eq!(role(Ipv4Addr::new(10, 77, 0, 1)), Role::Box);
        assert_eq!(role(Ipv4Addr::new(10, 77, 1, 1)), Role::Box);
        assert_eq!(role(Ipv4Addr::new(10, 77, 2, 12)), Role::Voter(2));
        assert_eq!(role(Ipv4Addr::new(10, 77, 0, 20)), Role::DataBox);
        assert_eq!(role(Ipv4Addr::LOCALHOST), Role::Client);
    }

    #[test]
    fn a_seed_draws_one_schedule_and_kinds_parse() {
        let a = Schedule::draw(7, FaultKinds::ALL, 300_000_000);
        assert_eq!(a, Schedule::draw(7, FaultKinds::ALL, 300_000_000));
        let none = Schedule::draw(7, FaultKinds::NONE, 300_000_000);
        assert!(none.windows.is_empty() && none.path_loss == [0.0; 2] && none.jitter_ns == 0);
        assert!(FaultKinds::parse("loss,stall").unwrap().stall);
        assert!(FaultKinds::parse("misbehave").unwrap().misbehave);
        assert!(FaultKinds::parse("meteor").is_err());
        // Over many seeds every kind is drawn.
        let mut seen = std::collections::BTreeSet::new();
        for s in 0..200 {
            seen.extend(Schedule::draw(s, FaultKinds::ALL, 300_000_000).kinds());
        }
        assert_eq!(seen.len(), 10, "{seen:?}");
    }
}
