//! The box's config file and its startup checks (missing-chapters §0 profiles,
//! §2 sessions and keys, §5 secret store).
//!
//! Format: [TOML](https://toml.io) (parsed by the `toml` crate into spanned tables; this module
//! maps them to its sections and checks every value). Tables: one `[box]`, one
//! `[account.ID]` per account, one `[session.ID]` per session, optionally one `[voter.N]` per
//! voter (the membership, 07 §13.1) and one `[databox.N]` per data box (07 §5.1). Values:
//! numbers are TOML integers; keys, addresses, paths and the profile are TOML strings;
//! `core_map` is an array of integers. A value of another kind (a float, a date, a table where
//! a value goes) is an error naming its key and line. Keys live in their own files (hex, one
//! line, mode 0600): `seq_key_file` (the 32-byte Ed25519 seed) and each session's `key_file`
//! (`K_seq ‖ K_out`, 32 bytes). [`write_dev_config`] and [`write_dev_home`] write a commented
//! example; in short:
//!
//! ```toml
//! [box]
//! profile = "dev"          # "ref" | "consumer" | "dev"
//! book = 1
//! epoch = 1
//! lanes = 2
//! voters = 4
//! client_port = 27400
//! ctrl_port = 27402
//! core_map = [1, 0]        # the hot core first
//! seq_key_file = "keys/seq.key"
//! seq_pub = "<64 hex>"     # required in a file every role reads (HomeConfig)
//!
//! [voter.0]                # one per voter, 0..voters
//! ctrl_addr = "127.0.0.1:27410"
//! vote_key = "<64 hex>"
//!
//! [account.1000000]
//! max_order_qty = 1000
//! max_open_orders = 65536
//! max_exposure = 1000000000
//!
//! [session.1]
//! account = 1000000
//! lane = 0
//! slot = 0
//! key_file = "keys/session-1.key"
//! client_addr = "127.0.0.1:27458"   # optional: its bound address (07 §5.7 DataRedirect)
//! ```
//!
//! A TOML syntax error (a duplicate key or table included) is one error at the line the parser
//! names; everything after parsing is checked in full.
//!
//! Every problem is a typed [`CfgError`] naming the file and line, so an operator sees all of
//! them at once ([`BoxConfig::load`] collects them); no input makes the loader panic. Every
//! number is range-checked; the limits are the `*_MIN` / `*_MAX` constants below, each with
//! its reason. [`startup_checks`] then looks at the machine: the cores named by the core map
//! are in this process's affinity mask, the exact UDP addresses the box binds are free, key
//! files are private.
//!
//! Secrets: the sequencer seed is a [`Seed32`] (redacted in `Debug`, zeroized on drop);
//! session keys are redacted by `SessionCfg`'s `Debug`. Key files are written by
//! [`write_secret_file`]: created 0600 under a temporary name, synced, renamed into place.

use crate::secret::Seed32;
use ed25519_dalek::{SigningKey, VerifyingKey};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use toml::de::{DeInteger, DeTable, DeValue};
use vyrn_engine::{AccountCfg, BookConfig, EngineConfig, SessionCfg};
use vyrn_wire::consts::{
    BLOCK_NS, FAILOVER_SILENCE_MS, MAX_SESSIONS_PER_LANE, N_LANES_MAX, REP_ACK_LIVE_US, REP_ACK_US,
    REP_RTX_RING_BYTES,
};
use vyrn_wire::layout::Layout;
use vyrn_wire::msg::ctrl::RepMembership;
use zeroize::Zeroize;

mod checks;
mod keys;
mod membership;
mod tables;
mod writer;

pub use checks::*;
pub use keys::*;
pub use membership::*;
use tables::*;
pub use writer::*;

/// Fewest voters: BASE needs n ≥ 4 so that f = 1 (07 §4.8, missing-chapters §0).
pub const VOTERS_MIN: usize = 4;
/// Most data boxes a home names (07 §5.1: one per facility; `DataSrc` is a u8). Project bound.
pub const DATABOXES_MAX: usize = 16;
/// Most voters: control keeps each height's votes in a `u64` bit mask, one bit per voter index
/// (`1 << voter`), so a 65th voter has no bit.
pub const VOTERS_MAX: usize = 64;
/// Shortest block period, ns: 100 µs = `REP_SEAL_US`, the budget from block close to its
/// HEADER (07 §6.2); closing faster than blocks can be sealed only queues seals.
pub const BLOCK_NS_MIN: u64 = 100_000;
/// Longest block period, ns: 1 s. Finality (07 §6.6: ≤ `FINALITY_MAX_MS`) is only met near
/// `BLOCK_NS` = 1 ms; a longer period is for test boxes, and beyond 1 s it is a typo.
pub const BLOCK_NS_MAX: u64 = 1_000_000_000;
/// Smallest frame ring per stream core, bytes: 64 KiB, several 9000-byte frames (07 §4.10).
pub const RTX_RING_BYTES_MIN: u64 = 64 << 10;
/// Largest frame ring per stream core, bytes: 4 GiB, because the ring indexes frames by `u32`
/// offsets (and each stream core allocates and prefaults its ring at start).
pub const RTX_RING_BYTES_MAX: u64 = 1 << 32;
/// Smallest hot response ring per lane, bytes (the engine's floor).
pub const HOT_RING_BYTES_MIN: u64 = 4096;
/// Largest hot response ring per lane, bytes: 1 GiB (allocated up front, per lane).
pub const HOT_RING_BYTES_MAX: u64 = 1 << 30;
/// Most resting orders of the book: 16 Mi (its slab is allocated up front).
pub const MAX_ORDERS_MAX: u64 = 1 << 24;
/// Working orders a lane tracks (`EngineConfig::lane_max_orders`); bounds `max_open_orders`.
pub const LANE_MAX_ORDERS: usize = 1 << 16;
/// Longest lane / BBO deadline, ns: 1 s (leave the key out for no deadline; 0 is refused: it
/// would shed everything).
pub const DEADLINE_NS_MAX: u64 = 1_000_000_000;
/// Shortest self-fence window, µs: two ack periods (`2 × REP_ACK_US`, 07 §4.8); shorter, one
/// late ack fences the box.
pub const SELF_FENCE_US_MIN: u64 = 2 * REP_ACK_US;
/// Longest self-fence window on a `dev` box, µs: 10 s (voter doubles on shared cores).
pub const SELF_FENCE_US_MAX_DEV: u64 = 10_000_000;
/// Shortest `hb_us` (the heartbeat period, a budget override of REP_HB_US).
pub const HB_US_MIN: u64 = 10;
/// Longest `hb_us` on profile dev (elsewhere REP_ACK_LIVE_US).
pub const HB_US_MAX_DEV: u64 = 10_000;
/// Longest self-fence window on `ref` and `consumer`, µs: `FAILOVER_SILENCE_MS`. Voters suspect
/// the sequencer after that much silence (07 §9.1); a sequencer cut off from its voters must
/// have stopped releasing by then (INV-REP-6).
pub const SELF_FENCE_US_MAX: u64 = FAILOVER_SILENCE_MS * 1000;
/// Highest core id in `core_map`: affinity masks (`cpu_set_t`) hold 1024 CPUs.
pub const CORE_ID_MAX: u64 = 1023;
/// Fill TX cores (07 §4.1: A, B, C); a session's `tx` is below this.
pub const N_TX: u64 = 3;
/// The box's address when `[box] ip` is not set (`NetBox::open` binds its ports there).
pub const BIND_IP: Ipv4Addr = Ipv4Addr::LOCALHOST;

/// A profile (missing-chapters §0).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Profile {
    /// One pinned thread per tile.
    Ref,
    /// 11 lanes, one substream.
    Consumer,
    /// A whole home on a 2-core machine: tiles multiplexed.
    Dev,
}

/// One config problem.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CfgError {
    /// File.
    pub file: PathBuf,
    /// Line (0: the file as a whole).
    pub line: usize,
    /// What is wrong.
    pub what: String,
}

impl fmt::Display for CfgError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line == 0 {
            write!(f, "{}: {}", self.file.display(), self.what)
        } else {
            write!(f, "{}:{}: {}", self.file.display(), self.line, self.what)
        }
    }
}

/// One voter of the membership (a `[voter.N]` section; 07 §13.1 `REP_Membership.voters`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VoterMember {
    /// Voter index, `0..voters`.
    pub index: usize,
    /// Where the voter's control traffic (RepAcks, votes) comes from and where
    /// `REP_DurableMark` goes.
    pub ctrl_addr: SocketAddr,
    /// The voter's Ed25519 vote key.
    pub vote_key: VerifyingKey,
    /// Where data boxes send this voter its DATA frames (copy 2, 07 §5.3); `None` in a file
    /// that runs no data box.
    pub data_addr: Option<SocketAddr>,
    /// Where the voter's consensus engine listens for its peers (authenticated p2p, 07 §6.3);
    /// `None` in a file written before consensus (the replica then takes `ctrl_addr`'s port
    /// + [`P2P_PORT_OFFSET`]).
    pub p2p_addr: Option<SocketAddr>,
    /// The voter's interface address on path A and on path B (`path_a_ip`, `path_b_ip`; default
    /// `ctrl_addr`'s IP): where it joins each path's multicast group (07 §3.1: two separate
    /// networks on a real home).
    pub path_ips: [Ipv4Addr; 2],
    /// MiB of order frames its replica holds behind holes per substream at most (`held_mib`,
    /// 1..=4096; `None`: the replica's default, 64). Security review F11: frames injected far
    /// ahead pinned ~1.2 GB before this bound.
    pub held_mib: Option<u64>,
    /// The block journal's retention ring (07 §8.3): blocks kept per drive (`retain_blocks`,
    /// 1..=10^12; `None`: unbounded). Past it the oldest block goes first.
    pub retain_blocks: Option<u64>,
    /// The block journal's retention ring (07 §8.3): GiB kept per drive (`retain_gib`,
    /// 1..=1,000,000; `None`: unbounded).
    pub retain_gib: Option<u64>,
}

/// A voter's p2p port when its `[voter.N]` section names none: its `ctrl_addr` port plus this.
pub const P2P_PORT_OFFSET: u16 = 100;

impl VoterMember {
    /// The voter's consensus p2p address ([`VoterMember::p2p_addr`], or the default).
    pub fn p2p(&self) -> SocketAddr {
        self.p2p_addr.unwrap_or_else(|| {
            let mut a = self.ctrl_addr;
            a.set_port(a.port().wrapping_add(P2P_PORT_OFFSET));
            a
        })
    }
}

/// One data box of the home (a `[databox.N]` section; 07 §5.1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DataBoxMember {
    /// Data box index (`DataSrc`), `0..n`.
    pub index: u8,
    /// Where clients send copy 2 of each request (`REP_UDP_DATA`).
    pub client_addr: SocketAddr,
    /// The box's socket for voter `i` is bound at `dest_base + i` on `client_addr`'s IP: its
    /// DATA frames leave from there, and the voter's DataFetch, DataDown go there.
    pub dest_base: u16,
    /// The box's Ed25519 identity (`link_key`): the voters agree the member envelope's link
    /// keys with it (`vyrn_wire::msg::seal`; its secret is `vyrn data --key`).
    pub link_key: VerifyingKey,
    /// `standby_port`: the port of its socket for the standby's replica
    /// ([`DataBoxMember::standby_addr`]); `None`: `dest_base + voters`.
    pub standby_port: Option<u16>,
}

impl DataBoxMember {
    /// The address of this box's socket for voter `i`.
    pub fn dest_addr(&self, i: usize) -> SocketAddr {
        SocketAddr::new(self.client_addr.ip(), self.dest_base.wrapping_add(i as u16))
    }

    /// The address of this box's socket for the warm standby's replica (07 §5.1: the
    /// destinations are the voters and the standby): `standby_port` on `client_addr`'s IP, else
    /// the port above the last voter's (`dest_base + voters`).
    pub fn standby_addr(&self, voters: usize) -> SocketAddr {
        let port = self
            .standby_port
            .unwrap_or(self.dest_base.wrapping_add(voters as u16));
        SocketAddr::new(self.client_addr.ip(), port)
    }
}

/// The warm standby's non-voting replica (07 §9.5, C-ONEBIN: `vyrn standby` runs a replica's
/// front and replay beside its finality listener): the `[standby]` keys `replica_addr`,
/// `data_addr`, `path_a_ip`, `path_b_ip`. It joins both paths' multicast groups like a voter, the
/// data boxes fan out to it, and it NACKs the box; it never votes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StandbyReplica {
    /// Its replica's control socket (`replica_addr`): NACKs to the box leave from here and the
    /// retransmissions come back to it.
    pub ctrl_addr: SocketAddr,
    /// Where data boxes send it DATA frames (`data_addr`); `None` in a home with no data box.
    pub data_addr: Option<SocketAddr>,
    /// Its interface address on path A and on path B (default `replica_addr`'s IP).
    pub path_ips: [Ipv4Addr; 2],
}

/// What every role of a home reads from the home's file (the replicas and the data boxes):
/// [`BoxConfig`] without the sequencer's secret seed — `seq_pub` instead (07 §13.1 `seq_key`).
#[derive(Debug, Clone)]
pub struct HomeConfig {
    /// Profile.
    pub profile: Profile,
    /// The engine's part (book, lanes, sessions with keys, accounts): replay runs it.
    pub engine: EngineConfig,
    /// Epoch.
    pub epoch: u32,
    /// Block period, ns.
    pub block_ns: u64,
    /// Voters.
    pub voters: usize,
    /// The membership's voters, by index.
    pub voters_members: Vec<VoterMember>,
    /// The home's data boxes, by index.
    pub databoxes: Vec<DataBoxMember>,
    /// The sequencer's public key (`seq_pub`).
    pub seq_pub: VerifyingKey,
    /// The box's address ([`BoxConfig::ip`]): its client and control ports are there.
    pub box_ip: Ipv4Addr,
    /// The box's client port.
    pub client_port: u16,
    /// The box's control port.
    pub ctrl_port: u16,
    /// The replication paths' port ([`BoxConfig::path_port`]).
    pub path_port: u16,
    /// The home's `REP_Membership` (07 §13.1), when the file names one.
    pub membership: Option<RepMembership>,
    /// Sessions' bound addresses known in advance (`[session.N] client_addr`): where a data
    /// box that never had a copy from a session relays 07 §5.7's `DataRedirect`.
    pub session_addrs: BTreeMap<u32, SocketAddr>,
    /// The warm standby's control port (`[standby] ctrl_addr`, 07 §6.8), if the home has one.
    pub standby_ctrl: Option<SocketAddr>,
    /// The standby's Ed25519 identity (`[standby] link_key`), for the member envelope.
    pub standby_key: Option<VerifyingKey>,
    /// The standby's non-voting replica, where `[standby]` names one (`replica_addr`).
    pub standby_replica: Option<StandbyReplica>,
}

impl HomeConfig {
    /// The warm standby's sequencer index and `seq_key` (07 §9.5; its TailReport's `reporter`
    /// and signing key): its `seq_order` entry in the membership, else index 1 under `[standby]
    /// link_key` in a file with no membership. `None` unless `[standby]` names its replica.
    pub fn standby_seq(&self) -> Option<(u8, VerifyingKey)> {
        self.standby_replica?;
        let key = self.standby_key?;
        let Some(m) = &self.membership else {
            return Some((1, key));
        };
        m.seq_order
            .iter()
            .find(|s| s.role == vyrn_wire::msg::ctrl::Role::Standby)
            .map(|s| (s.index, key))
    }

    /// The keys of the tenures after the epoch's first, as a journal checks them (07 §9.5):
    /// tenure 1 is the standby's, promoted by the first seal (BASE has one standby).
    pub fn later_tenure_keys(&self) -> Vec<(u8, VerifyingKey)> {
        self.standby_seq()
            .map(|(_, k)| (1, k))
            .into_iter()
            .collect()
    }

    /// How many sequencer boxes `seq_order` lists (07 §13.1): the membership's, else the primary
    /// and the standby's replica where the file names one.
    pub fn seq_boxes(&self) -> usize {
        match &self.membership {
            Some(m) => m.seq_order.len(),
            None => 1 + usize::from(self.standby_replica.is_some()),
        }
    }

    /// The standby's replica as a member of the data fan-out and the paths: voter slot
    /// `voters` (the data boxes' socket for it is [`DataBoxMember::standby_addr`]), its
    /// `link_key` in place of a vote key. `None` unless `[standby]` names its replica.
    pub fn standby_member(&self) -> Option<VoterMember> {
        let r = self.standby_replica?;
        Some(VoterMember {
            index: self.voters_members.len(),
            ctrl_addr: r.ctrl_addr,
            vote_key: self.standby_key?,
            data_addr: r.data_addr,
            p2p_addr: None,
            path_ips: r.path_ips,
            held_mib: None,
            retain_blocks: None,
            retain_gib: None,
        })
    }

    /// Session `session`'s data home (07 §5.1): box `session mod n` of the home's `n` data
    /// boxes. Every role uses this one rule (the data boxes, the replicas' fetch order).
    pub fn data_home(&self, session: u32) -> u8 {
        (session as usize % self.databoxes.len().max(1)) as u8
    }

    /// Load and validate the home's file `path` as a replica or data box reads it: the
    /// sequencer's seed file is not read; `[box] seq_pub` is required.
    pub fn load(path: &Path) -> Result<HomeConfig, Vec<CfgError>> {
        Self::from_text(path, &read_text(path)?)
    }

    /// [`HomeConfig::load`] for a role's `main`: every problem printed on stderr after `tool`'s
    /// name, `None` if there was any.
    pub fn load_for(tool: &str, path: &Path) -> Option<HomeConfig> {
        match Self::load(path) {
            Ok(h) => Some(h),
            Err(errs) => {
                for e in errs {
                    eprintln!("{tool}: {e}");
                }
                None
            }
        }
    }

    /// Validate `text` as if read from `path`.
    pub fn from_text(path: &Path, text: &str) -> Result<HomeConfig, Vec<CfgError>> {
        let base = path.parent().unwrap_or(Path::new("."));
        let c = parse(path, base, text, Mode::Home)?;
        Ok(HomeConfig {
            profile: c.profile,
            engine: c.engine,
            epoch: c.epoch,
            block_ns: c.block_ns,
            voters: c.voters,
            voters_members: c.voters_members,
            databoxes: c.databoxes,
            seq_pub: c.seq_pub,
            client_port: c.client_port,
            box_ip: c.ip,
            ctrl_port: c.ctrl_port,
            path_port: c.path_port,
            membership: c.membership,
            session_addrs: c.session_addrs,
            standby_ctrl: c.standby_ctrl,
            standby_key: c.standby_key,
            standby_replica: c.standby_replica,
        })
    }
}

/// Who reads the file: the sequencer (which reads its seed) or another role of the home.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Sequencer,
    Home,
}

/// The box's configuration, as loaded. Its `Debug` prints no secret: the seed is a [`Seed32`]
/// and `SessionCfg` redacts session keys.
#[derive(Debug, Clone)]
pub struct BoxConfig {
    /// Profile.
    pub profile: Profile,
    /// The engine's part (book, lanes, sessions with keys, accounts, deadlines).
    pub engine: EngineConfig,
    /// Epoch.
    pub epoch: u32,
    /// Block period, ns ([`BLOCK_NS_MIN`]..=[`BLOCK_NS_MAX`]).
    pub block_ns: u64,
    /// Voters ([`VOTERS_MIN`]..=[`VOTERS_MAX`]).
    pub voters: usize,
    /// The membership's voters, by index (the `[voter.N]` sections). Empty when the file has
    /// none: the box then runs only with dev voter doubles.
    pub voters_members: Vec<VoterMember>,
    /// The home's data boxes (`[databox.N]`), by index.
    pub databoxes: Vec<DataBoxMember>,
    /// The sequencer's public key: `seq_pub` when the file sets it (then it must match the
    /// seed), else derived from the seed.
    pub seq_pub: VerifyingKey,
    /// The sequencer key seed (from `seq_key_file`).
    pub seq_key: Seed32,
    /// Where the seq key came from.
    pub seq_key_file: PathBuf,
    /// Session key files, by session.
    pub session_key_files: BTreeMap<u32, PathBuf>,
    /// Sessions' bound addresses known in advance (`[session.N] client_addr`, optional).
    pub session_addrs: BTreeMap<u32, SocketAddr>,
    /// The warm standby's control port (`[standby] ctrl_addr`, 07 §6.8): voters send it their
    /// finalize votes and certificates too.
    pub standby_ctrl: Option<SocketAddr>,
    /// The standby's Ed25519 identity (`[standby] link_key`): the voters seal what they send
    /// it with the link key agreed with it (`vyrn_wire::msg::seal`).
    pub standby_key: Option<VerifyingKey>,
    /// The standby's non-voting replica (`[standby] replica_addr`, `data_addr`): the data boxes
    /// fan out to it and the box serves its NACKs.
    pub standby_replica: Option<StandbyReplica>,
    /// The box's client UDP port (`dev`, `consumer`: all lanes; `ref`: lane l listens on
    /// `client_port + l`, the flow filter of 07 §9.5). 0: any free port.
    pub client_port: u16,
    /// Control UDP port (RepAcks, NACKs, votes). 0: any free port.
    pub ctrl_port: u16,
    /// The box's address (`[box] ip`, default 127.0.0.1): its client and control ports bind
    /// here, and every other role of the home sends to it here.
    pub ip: Ipv4Addr,
    /// The box's interface address on path A and on path B (`path_a_ip`, `path_b_ip`; default
    /// `ip`): the stream cores send each path's multicast from it (`IP_MULTICAST_IF`).
    pub path_ips: [Ipv4Addr; 2],
    /// The replication paths' UDP port: path A on its multicast group at `path_port`, B at
    /// `path_port + 1` (07 §3.1). 0: ephemeral (a box whose voters share its process).
    pub path_port: u16,
    /// Cores for the tiles (`dev`: shared; `ref`: one per tile, in tile order).
    pub core_map: Vec<usize>,
    /// Frame ring bytes per stream core.
    pub rtx_ring_bytes: usize,
    /// Self-fence window override, µs (REP_SELF_FENCE_US is a budget; 250 when unset).
    pub self_fence_us: Option<u64>,
    /// Budget override of REP_HB_US (µs): the stream cores' heartbeat period.
    pub hb_us: Option<u64>,
    /// The home's `REP_Membership` (07 §13.1) from `[box] membership`, validated and checked
    /// against the file's `[voter.N]` sections and `seq_pub` ([`check_membership`]).
    pub membership: Option<RepMembership>,
}

impl BoxConfig {
    /// The sequencer's public key (`seq_key` in 07 §13.1), derived from the seed.
    pub fn seq_public(&self) -> VerifyingKey {
        self.seq_pub
    }

    /// Load and validate `path`. Returns every problem found, not just the first.
    pub fn load(path: &Path) -> Result<BoxConfig, Vec<CfgError>> {
        Self::from_text(path, &read_text(path)?)
    }

    /// Validate `text` as if read from `path` (key files are relative to `path`'s folder).
    pub fn from_text(path: &Path, text: &str) -> Result<BoxConfig, Vec<CfgError>> {
        let base = path.parent().unwrap_or(Path::new("."));
        parse(path, base, text, Mode::Sequencer)
    }
}

impl BoxConfig {
    /// The warm standby's box as it will run once promoted (07 §9.5), from the home's file
    /// `path` read as every role reads it and the standby's own seed (`[standby] link_key` is
    /// its public key, and its `seq_order` entry's `seq_key`): its control port is `[standby]
    /// ctrl_addr` (where its listener took votes until then), its client port the address its
    /// `seq_order` entry gives clients, its paths' interfaces `[standby] path_a_ip` and
    /// `path_b_ip`; it has no standby of its own. Everything else — the engine, the sessions,
    /// the voters, the data boxes, the budgets — is the home's.
    pub fn standby_box(path: &Path, seed: Seed32) -> Result<BoxConfig, String> {
        let text = read_text(path).map_err(|e| join_errs(&e))?;
        let base = path.parent().unwrap_or(Path::new("."));
        let mut c = parse(path, base, &text, Mode::Home).map_err(|e| join_errs(&e))?;
        let key = ed25519_dalek::SigningKey::from_bytes(seed.expose()).verifying_key();
        if c.standby_key != Some(key) {
            return Err("the standby's seed is not the secret of [standby] link_key".into());
        }
        let ctrl = c
            .standby_ctrl
            .ok_or("the home's file has no [standby] ctrl_addr")?;
        let r = c
            .standby_replica
            .ok_or("the home's file names no standby replica ([standby] replica_addr)")?;
        let entry = c
            .membership
            .as_ref()
            .and_then(|m| {
                m.seq_order
                    .iter()
                    .find(|s| s.role == vyrn_wire::msg::ctrl::Role::Standby)
            })
            .ok_or("the membership's seq_order names no standby: no client address to take")?;
        if entry.seq_key != key.to_bytes() {
            return Err("the membership's standby seq_key is not [standby] link_key".into());
        }
        let client = vyrn_wire::msg::addr_to_socket(&entry.client_addr);
        let (std::net::IpAddr::V4(ip), std::net::IpAddr::V4(client_ip)) = (ctrl.ip(), client.ip())
        else {
            return Err("the standby's addresses must be IPv4".into());
        };
        if ip != client_ip {
            return Err(format!(
                "the standby's client address {client} (seq_order) and ctrl_addr {ctrl} are on different hosts"
            ));
        }
        c.ip = ip;
        c.ctrl_port = ctrl.port();
        c.client_port = client.port();
        c.path_ips = r.path_ips;
        c.seq_pub = key;
        c.seq_key = seed;
        c.seq_key_file = PathBuf::new();
        c.standby_ctrl = None;
        c.standby_key = None;
        c.standby_replica = None;
        Ok(c)
    }
}

fn join_errs(e: &[CfgError]) -> String {
    e.iter()
        .map(|e| e.to_string())
        .collect::<Vec<_>>()
        .join("; ")
}

/// The file's text, or the one error saying why it cannot be read.
fn read_text(path: &Path) -> Result<String, Vec<CfgError>> {
    std::fs::read_to_string(path).map_err(|e| {
        vec![CfgError {
            file: path.to_path_buf(),
            line: 0,
            what: format!("cannot read: {e}"),
        }]
    })
}

/// One table of the file, as the checks read it: its name (`box`, or a kind and an id:
/// `voter 0` for `[voter.0]`), the line of its header, and its keys in file order, each with
/// its value as the text the checks parse (or, for a TOML value of a kind no key takes, that
/// kind) and its line.
type Section = (String, usize, Vec<(String, Result<String, String>, usize)>);

/// The tables that hold one table per id: `[account.ID]`, `[session.ID]`, `[voter.N]`,
/// `[databox.N]`.
const ID_SECTIONS: [&str; 4] = ["account", "session", "voter", "databox"];

/// Byte offsets of `text` to 1-based line numbers.
struct Lines {
    /// The offset of every `\n`.
    newlines: Vec<usize>,
    /// The last line an error may name (a span at the end of the text names the last line).
    last: usize,
}

impl Lines {
    fn new(text: &str) -> Self {
        Lines {
            newlines: text
                .bytes()
                .enumerate()
                .filter(|b| b.1 == b'\n')
                .map(|b| b.0)
                .collect(),
            last: text.lines().count().max(1),
        }
    }

    /// The line of byte `offset`: one more than the newlines before it.
    fn at(&self, offset: usize) -> usize {
        (1 + self.newlines.partition_point(|&n| n < offset)).min(self.last)
    }
}

/// The TOML front end: parse `text` and map its tables to [`Section`]s, in file order. On a
/// syntax error (duplicate keys and tables included) `None`, with that one error; a key outside
/// any table, a table of an unknown name and a `[voter]` entry that is not a table are errors
/// at their lines.
fn sections(file: &Path, text: &str, errs: &mut Vec<CfgError>) -> Option<Vec<Section>> {
    let lines = Lines::new(text);
    let root = match toml::de::DeTable::parse(text) {
        Ok(t) => t.into_inner(),
        Err(x) => {
            errs.push(toml_error(file, text, &lines, &x));
            return None;
        }
    };
    let mut out: Vec<Section> = Vec::new();
    for (k, v) in root.iter() {
        let name: &str = k.get_ref();
        match v.get_ref() {
            DeValue::Table(t) if name == "box" || name == "standby" => {
                out.push(section(name.into(), lines.at(v.span().start), t, &lines));
            }
            DeValue::Table(t) if ID_SECTIONS.contains(&name) => {
                for (id, s) in t.iter() {
                    let id: &str = id.get_ref();
                    match s.get_ref() {
                        DeValue::Table(st) => out.push(section(
                            format!("{name} {id}"),
                            lines.at(s.span().start),
                            st,
                            &lines,
                        )),
                        other => errs.push(err(
                            file,
                            lines.at(s.span().start),
                            format!(
                                "[{name}] {}: expected a table {}, found {}",
                                toml_key(id),
                                header(&format!("{name} {id}")),
                                kind(other)
                            ),
                        )),
                    }
                }
            }
            DeValue::Table(_) => errs.push(err(
                file,
                lines.at(v.span().start),
                format!("unknown section [{}]", toml_key(name)),
            )),
            other => errs.push(err(
                file,
                lines.at(k.span().start),
                format!(
                    "{}: a key before any [section] ({})",
                    toml_key(name),
                    kind(other)
                ),
            )),
        }
    }
    out.sort_by_key(|s| s.1);
    Some(out)
}

/// One table's keys, in file order, with their values as text ([`value_text`]).
fn section(name: String, line: usize, t: &DeTable<'_>, lines: &Lines) -> Section {
    let mut kv: Vec<(String, Result<String, String>, usize)> = t
        .iter()
        .map(|(k, v)| {
            let key: &str = k.get_ref();
            (
                key.to_string(),
                value_text(v.get_ref()),
                lines.at(k.span().start),
            )
        })
        .collect();
    kv.sort_by_key(|x| x.2);
    (name, line, kv)
}

/// A TOML value as the text the checks parse: a string's content, an integer in decimal, a
/// boolean as `true` / `false`, an array of integers as `1,0`. Any other kind is no key's:
/// `Err` says which kind it is.
fn value_text(v: &DeValue<'_>) -> Result<String, String> {
    match v {
        DeValue::String(s) => Ok(s.to_string()),
        DeValue::Integer(i) => Ok(int_text(i)),
        DeValue::Boolean(b) => Ok(b.to_string()),
        DeValue::Array(a) => a
            .iter()
            .map(|x| match x.get_ref() {
                DeValue::Integer(i) => Ok(int_text(i)),
                other => Err(format!("an array holding {}", kind(other))),
            })
            .collect::<Result<Vec<String>, String>>()
            .map(|x| x.join(",")),
        other => Err(kind(other).into()),
    }
}

/// A TOML integer in decimal (`0x10` → `16`, `1_000` → `1000`, `-1` stays `-1`). TOML's
/// range (i64) is not enforced here: the checks' own ranges apply, and a value past u64 keeps
/// its text, which then does not parse.
fn int_text(i: &DeInteger<'_>) -> String {
    if i.radix() == 10 {
        return i.as_str().to_string();
    }
    u64::from_str_radix(i.as_str(), i.radix()).map_or_else(|_| i.to_string(), |x| x.to_string())
}

/// A TOML value's kind, for messages.
fn kind(v: &DeValue<'_>) -> &'static str {
    match v {
        DeValue::String(_) => "a string",
        DeValue::Integer(_) => "an integer",
        DeValue::Float(_) => "a float",
        DeValue::Boolean(_) => "a boolean",
        DeValue::Datetime(_) => "a date-time",
        DeValue::Array(_) => "an array",
        DeValue::Table(_) => "a table",
    }
}

/// What a key's value must be, for the message when it is of a kind no key takes.
fn expected(k: &str) -> &'static str {
    match k {
        "profile" => "a string (\"ref\", \"consumer\" or \"dev\")",
        "seq_key_file" | "key_file" | "membership" => "a string (a file's path)",
        "seq_pub" | "vote_key" | "link_key" => "a string of 64 hex digits",
        "ctrl_addr" | "data_addr" | "p2p_addr" | "client_addr" => "a string \"IP:PORT\"",
        "ip" | "path_a_ip" | "path_b_ip" => "a string \"IPv4\"",
        "core_map" => "an array of core ids, such as [1, 0]",
        _ => "a whole number",
    }
}

/// A TOML key as written in a header: bare when it can be, else quoted.
fn toml_key(k: &str) -> String {
    if !k.is_empty()
        && k.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    {
        k.to_string()
    } else {
        format!("{k:?}")
    }
}

/// A section's header as the file writes it: `box` → `[box]`, `voter 0` → `[voter.0]`.
fn header(name: &str) -> String {
    match name.split_once(' ') {
        Some((kind, id)) => format!("[{kind}.{}]", toml_key(id)),
        None => format!("[{}]", toml_key(name)),
    }
}

/// A TOML syntax error as a [`CfgError`] at the line toml names. A duplicate key or table (TOML
/// sets each once) says which.
fn toml_error(file: &Path, text: &str, lines: &Lines, x: &toml::de::Error) -> CfgError {
    let span = x.span();
    let line = span.as_ref().map_or(0, |s| lines.at(s.start));
    let msg = x.message();
    if msg.starts_with("duplicate key") {
        // The header, when the duplicate is a table's; else the key as written.
        let l = text
            .lines()
            .nth(line.saturating_sub(1))
            .unwrap_or("")
            .split('#')
            .next()
            .unwrap_or("")
            .trim();
        let name = if l.starts_with('[') {
            l.chars().take(64).collect::<String>()
        } else {
            let k = span.and_then(|s| text.get(s)).unwrap_or("").trim();
            shown(k)
        };
        return err(file, line, format!("{name} twice (TOML: {msg})"));
    }
    err(file, line, format!("not TOML: {msg}"))
}

fn err(file: &Path, line: usize, what: impl Into<String>) -> CfgError {
    CfgError {
        file: file.to_path_buf(),
        line,
        what: what.into(),
    }
}

/// A value as an error message may show it: a long run of hex digits may be a key pasted in
/// the wrong place, so it is withheld.
fn shown(v: &str) -> String {
    if v.len() >= 32 && v.bytes().all(|b| b.is_ascii_hexdigit()) {
        format!("<{} hex digits withheld>", v.len())
    } else {
        format!("{v:?}")
    }
}

struct Keys<'a> {
    file: &'a Path,
    /// The section's header, for messages (`[voter.0]`).
    section: String,
    line: usize,
    kv: BTreeMap<&'a str, (Result<&'a str, &'a str>, usize)>,
}

impl<'a> Keys<'a> {
    fn new(file: &'a Path, s: &'a Section) -> Self {
        // TOML sets each key of a table once (a second is a syntax error).
        let kv =
            s.2.iter()
                .map(|(k, v, line)| (k.as_str(), (v.as_deref().map_err(String::as_str), *line)))
                .collect();
        Keys {
            file,
            section: header(&s.0),
            line: s.1,
            kv,
        }
    }

    /// The raw value of `k` and its line; an error if it is missing and `need`, or of a TOML
    /// kind no key takes (a float, a date, a table, an array of other than integers).
    fn take(&mut self, k: &str, need: bool, errs: &mut Vec<CfgError>) -> Option<(&'a str, usize)> {
        match self.kv.remove(k) {
            Some((Ok(v), line)) => Some((v, line)),
            Some((Err(found), line)) => {
                errs.push(err(
                    self.file,
                    line,
                    format!("{k}: expected {}, found {found}", expected(k)),
                ));
                None
            }
            None => {
                if need {
                    errs.push(err(
                        self.file,
                        self.line,
                        format!("{} needs {k}", self.section),
                    ));
                }
                None
            }
        }
    }

    /// `k` as a whole number in `lo..=hi` (`why` says why those bounds), with its line.
    fn num(
        &mut self,
        k: &str,
        need: bool,
        (lo, hi): (u64, u64),
        why: &str,
        errs: &mut Vec<CfgError>,
    ) -> Option<(u64, usize)> {
        let (v, line) = self.take(k, need, errs)?;
        let Ok(x) = v.parse::<u64>() else {
            errs.push(err(
                self.file,
                line,
                format!(
                    "{k} = {} does not parse: a whole number in {lo}..={hi}",
                    shown(v)
                ),
            ));
            return None;
        };
        if x < lo || x > hi {
            errs.push(err(
                self.file,
                line,
                format!("{k} = {x} is out of range {lo}..={hi}: {why}"),
            ));
            return None;
        }
        Some((x, line))
    }

    fn finish(self, errs: &mut Vec<CfgError>) {
        for (k, (_, line)) in self.kv {
            errs.push(err(
                self.file,
                line,
                format!("{} has no key {}", self.section, toml_key(k)),
            ));
        }
    }
}

/// A session as parsed, with the lines its cross-checks point at.
struct SessionAt {
    cfg: SessionCfg,
    line: usize,
    account_line: usize,
    lane_line: usize,
}

/// A `[voter.N]` section as parsed.
struct VoterAt {
    index: usize,
    line: usize,
    ctrl_addr: Option<(SocketAddr, usize)>,
    vote_key: Option<(VerifyingKey, usize)>,
    data_addr: Option<SocketAddr>,
    p2p_addr: Option<SocketAddr>,
    path_ips: [Option<Ipv4Addr>; 2],
    held_mib: Option<u64>,
    retain_blocks: Option<u64>,
    retain_gib: Option<u64>,
}

/// An IPv4 interface address (`[box] ip`, `path_a_ip`, `path_b_ip`): a host's own unicast
/// address — the replication paths are IPv4 multicast (07 §3.1), joined and sent on it.
fn take_ip(k: &mut Keys<'_>, key: &str, file: &Path, e: &mut Vec<CfgError>) -> Option<Ipv4Addr> {
    let (v, line) = k.take(key, false, e)?;
    match v.parse::<Ipv4Addr>() {
        Ok(a) if a.is_unspecified() || a.is_multicast() || a.is_broadcast() => {
            e.push(err(
                file,
                line,
                format!("{key} = {a}: needs one interface's own unicast IPv4 address"),
            ));
            None
        }
        Ok(a) => Some(a),
        Err(_) => {
            e.push(err(
                file,
                line,
                format!(
                    "{key} = {}: expected an IPv4 address such as \"10.0.1.1\"",
                    shown(v)
                ),
            ));
            None
        }
    }
}

/// An `IP:PORT` value with a real address and a nonzero port.
fn take_addr(
    k: &mut Keys<'_>,
    key: &str,
    need: bool,
    file: &Path,
    e: &mut Vec<CfgError>,
) -> Option<(SocketAddr, usize)> {
    let (v, line) = k.take(key, need, e)?;
    match v.parse::<SocketAddr>() {
        Ok(a) if a.port() == 0 || a.ip().is_unspecified() => {
            e.push(err(
                file,
                line,
                format!("{key} = {a}: needs a real address and a nonzero port"),
            ));
            None
        }
        Ok(a) => Some((a, line)),
        Err(_) => {
            e.push(err(
                file,
                line,
                format!("{key} = {}: expected IP:PORT", shown(v)),
            ));
            None
        }
    }
}

/// 07 §13.1: the membership record `[box] membership` names, loaded by every role at start and
/// checked against the file ([`check_membership`]); `None` when the file names none.
fn membership_of(
    file: &Path,
    base: &Path,
    membership_file: Option<(&str, usize)>,
    seq_public: Option<VerifyingKey>,
    epoch: u32,
    voters_members: &[VoterMember],
    standby_key: Option<VerifyingKey>,
) -> Result<Option<RepMembership>, CfgError> {
    let (Some((f, line)), Some(sp)) = (membership_file, seq_public) else {
        return Ok(None);
    };
    let at = base.join(f);
    std::fs::read(&at)
        .map_err(|e| format!("membership = {f}: cannot read {}: {e}", at.display()))
        .and_then(|b| {
            check_membership(&b, epoch, voters_members, &sp)
                .and_then(|m| check_standby_seq(m, standby_key))
                .map_err(|w| format!("membership = {f}: {w}"))
        })
        .map(Some)
        .map_err(|w| err(file, line, w))
}

fn parse(file: &Path, base: &Path, text: &str, mode: Mode) -> Result<BoxConfig, Vec<CfgError>> {
    let mut errs = Vec::new();
    // A file that is not TOML: its one syntax error, nothing checked past it.
    let Some(secs) = sections(file, text, &mut errs) else {
        return Err(errs);
    };
    let boxes: Vec<&Section> = secs.iter().filter(|s| s.0 == "box").collect();
    if boxes.len() != 1 {
        errs.push(err(
            file,
            0,
            format!("needs exactly one [box], has {}", boxes.len()),
        ));
        return Err(errs);
    }
    let e = &mut errs;
    let BoxTable {
        profile,
        book,
        epoch,
        lanes_min,
        lanes,
        block_ns,
        voters,
        voters_line,
        max_orders,
        lane_deadline_ns,
        bbo_deadline_ns,
        hot_ring_bytes,
        rtx_ring_bytes,
        client_port,
        ctrl_port,
        box_ip,
        box_path_ips,
        core_map,
        membership_file,
        path_port,
        self_fence_us,
        hb_us,
        seq_key_path,
        seq_key,
        seq_public,
    } = box_table(file, base, boxes[0], mode, e);
    let ctx = Ctx { file, base, lanes };
    let mut t = Tables::default();
    for s in &secs {
        if s.0 == "box" {
            continue;
        }
        let (kind, id) = s.0.split_once(' ').unwrap_or((s.0.as_str(), ""));
        let head = header(&s.0);
        match kind {
            "account" => account_table(&ctx, s, id, &head, &mut t, e),
            "session" => session_table(&ctx, s, id, &head, &mut t, e),
            "voter" => voter_table(&ctx, s, id, &head, &mut t, e),
            "databox" => databox_table(&ctx, s, id, &head, &mut t, e),
            "standby" => standby_table(&ctx, s, &mut t, e),
            _ => e.push(err(file, s.1, format!("unknown section {head}"))),
        }
    }
    let Tables {
        accounts,
        account_lines,
        sessions,
        session_key_files,
        session_addrs,
        voter_secs,
        mut databoxes,
        standby_ctrl,
        standby_key,
        standby_replica,
    } = t;

    check_sessions(file, &sessions, &account_lines, e);
    let voters_members = voter_members(file, (voters, voters_line), &voter_secs, seq_public, e);

    let n_lanes = lanes.unwrap_or(lanes_min as u8);
    let layout = match profile {
        Profile::Consumer => Layout {
            n_lanes,
            n_streams: 1,
            pool_mask: 0,
        },
        _ => Layout::two_streams(n_lanes),
    };
    let engine = EngineConfig {
        book: book.map_or(1, |x| x.0 as u16),
        layout,
        book_cfg: BookConfig { max_orders },
        sessions: sessions.into_iter().map(|s| s.cfg).collect(),
        accounts,
        lane_deadline_ns,
        bbo_deadline_ns,
        hot_ring_bytes,
        lane_max_orders: LANE_MAX_ORDERS,
    };
    // A backstop: everything it checks is checked above with a line.
    if e.is_empty() {
        if let Err(x) = engine.validate() {
            e.push(err(file, 0, format!("engine: {x}")));
        }
    }
    let (vm, sb) = (&voters_members, standby_replica.as_ref());
    check_databoxes(file, &mut databoxes, vm, sb, voters_line, e);
    let databoxes: Vec<DataBoxMember> = databoxes.into_iter().map(|d| d.0).collect();
    let epoch_n = epoch.map_or(1, |x| x.0 as u32);
    let membership = membership_of(
        file,
        base,
        membership_file,
        seq_public,
        epoch_n,
        &voters_members,
        standby_key,
    )
    .unwrap_or_else(|e| {
        errs.push(e);
        None
    });
    let (Some(seq_key), Some(seq_pub), true) = (seq_key, seq_public, errs.is_empty()) else {
        return Err(errs);
    };
    Ok(BoxConfig {
        profile,
        engine,
        epoch: epoch.map_or(1, |x| x.0 as u32),
        block_ns,
        voters,
        voters_members,
        databoxes,
        seq_pub,
        seq_key,
        seq_key_file: seq_key_path,
        session_key_files,
        session_addrs,
        standby_ctrl,
        standby_key,
        standby_replica,
        client_port: client_port.map_or(0, |x| x.0 as u16),
        ctrl_port: ctrl_port.map_or(0, |x| x.0 as u16),
        path_port,
        ip: box_ip,
        path_ips: box_path_ips,
        core_map,
        rtx_ring_bytes,
        self_fence_us,
        hb_us,
        membership,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The one value of `[box] v = <lit>` as the checks see it.
    fn one(lit: &str) -> Result<String, String> {
        let text = format!("[box]\nv = {lit}\n");
        let mut errs = Vec::new();
        let secs = sections(Path::new("t.conf"), &text, &mut errs).expect("TOML");
        assert!(errs.is_empty(), "{errs:?}");
        secs[0].2[0].1.clone()
    }

    #[test]
    fn toml_values_map_to_the_text_the_checks_parse() {
        assert_eq!(one("\"dev\""), Ok("dev".into()));
        assert_eq!(one("'keys/a.key'"), Ok("keys/a.key".into()));
        assert_eq!(one("42"), Ok("42".into()));
        assert_eq!(one("-1"), Ok("-1".into()));
        assert_eq!(one("1_000"), Ok("1000".into()));
        assert_eq!(one("0x10"), Ok("16".into()));
        assert_eq!(one("0o17"), Ok("15".into()));
        assert_eq!(one("0b101"), Ok("5".into()));
        // Past u64 (and TOML's i64) the text stays, and does not parse as a number.
        assert_eq!(
            one("18446744073709551616"),
            Ok("18446744073709551616".into())
        );
        assert_eq!(
            one("0x1_0000_0000_0000_0000"),
            Ok("0x10000000000000000".into())
        );
        assert_eq!(one("true"), Ok("true".into()));
        assert_eq!(one("[1, 0]"), Ok("1,0".into()));
        assert_eq!(one("[]"), Ok(String::new()));
        assert_eq!(one("1.5"), Err("a float".into()));
        assert_eq!(one("1979-05-27"), Err("a date-time".into()));
        assert_eq!(one("{ a = 1 }"), Err("a table".into()));
        assert_eq!(one("[1, \"x\"]"), Err("an array holding a string".into()));
        assert_eq!(one("[[1]]"), Err("an array holding an array".into()));
    }

    #[test]
    fn tables_map_to_sections_in_file_order_with_their_lines() {
        let text = "# c\n[session.2]\na = 1\n\n[box]\nb = 2\n[voter.\"0\"]\nc = 3\n";
        let mut errs = Vec::new();
        let secs = sections(Path::new("t.conf"), text, &mut errs).unwrap();
        assert!(errs.is_empty(), "{errs:?}");
        let names: Vec<(&str, usize)> = secs.iter().map(|s| (s.0.as_str(), s.1)).collect();
        assert_eq!(names, [("session 2", 2), ("box", 5), ("voter 0", 7)]);
        assert_eq!(secs[2].2, [("c".to_string(), Ok("3".to_string()), 8)]);
        assert_eq!(header("voter 0"), "[voter.0]");
        assert_eq!(header("session 1 2"), "[session.\"1 2\"]");
    }

    #[test]
    fn a_syntax_error_names_its_line_never_past_the_last() {
        let f = Path::new("t.conf");
        for (text, line) in [
            ("[box]\nx = 1\nx = 2\n", 3),
            ("[box]\nx = \"open\n", 2),
            ("[box]\nx = \"open", 2),
            ("[box\n", 1),
        ] {
            let mut errs = Vec::new();
            assert!(sections(f, text, &mut errs).is_none(), "{text:?}");
            assert_eq!(errs.len(), 1, "{errs:?}");
            assert_eq!(
                (errs[0].file.as_path(), errs[0].line),
                (f, line),
                "{errs:?}"
            );
        }
    }

    #[test]
    fn written_strings_read_back() {
        for s in [
            "keys/seq.key",
            "a \"b\" \\ c",
            "tab\there\nnl",
            "\u{7f}\u{1}é",
        ] {
            assert_eq!(one(&toml_str(s)), Ok(s.to_string()), "{s:?}");
        }
    }
}
