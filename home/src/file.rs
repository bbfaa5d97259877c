//! The box's config file and its startup checks (issue 4 item 6; missing-chapters §0 profiles,
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
}

impl DataBoxMember {
    /// The address of this box's socket for voter `i`.
    pub fn dest_addr(&self, i: usize) -> SocketAddr {
        SocketAddr::new(self.client_addr.ip(), self.dest_base.wrapping_add(i as u16))
    }
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
}

impl HomeConfig {
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

fn hex_bytes<const N: usize>(t: &str) -> Option<[u8; N]> {
    if t.len() != 2 * N || !t.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let mut k = [0u8; N];
    for (i, b) in k.iter_mut().enumerate() {
        *b = u8::from_str_radix(t.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(k)
}

/// Read a hex key file of exactly `N` bytes. The text read is wiped before returning; the
/// returned array is the caller's to wipe (see [`read_seed`]). Every role reads its keys here,
/// so every role refuses a key file that group or others can read or write (missing-chapters
/// §5: key files 0600; security review F14 — only the sequencer checked before).
pub fn read_key<const N: usize>(path: &Path) -> Result<[u8; N], String> {
    if let Some(m) = mode(path) {
        if m & 0o077 != 0 {
            return Err(format!(
                "{} is mode {:o}: keys must be 0600 (chmod 600)",
                path.display(),
                m & 0o777
            ));
        }
    }
    let mut text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let k = hex_bytes::<N>(text.trim());
    text.zeroize();
    k.ok_or_else(|| {
        format!(
            "{}: expected {} hex digits ({} bytes)",
            path.display(),
            2 * N,
            N
        )
    })
}

/// Read a 32-byte hex key file into a [`Seed32`] (no other copy survives).
pub fn read_seed(path: &Path) -> Result<Seed32, String> {
    let mut k = read_key::<32>(path)?;
    Ok(Seed32::from_mut(&mut k))
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
    check_databoxes(file, &mut databoxes, &voters_members, voters_line, e);
    let databoxes: Vec<DataBoxMember> = databoxes.into_iter().map(|d| d.0).collect();
    // 07 §13.1: the membership record, loaded by every role at start.
    let membership = match (membership_file, seq_public) {
        (Some((f, line)), Some(sp)) => {
            let at = base.join(f);
            match std::fs::read(&at)
                .map_err(|e| format!("membership = {f}: cannot read {}: {e}", at.display()))
                .and_then(|b| {
                    check_membership(&b, epoch.map_or(1, |x| x.0 as u32), &voters_members, &sp)
                        .map_err(|w| format!("membership = {f}: {w}"))
                }) {
                Ok(m) => Some(m),
                Err(w) => {
                    errs.push(err(file, line, w));
                    None
                }
            }
        }
        _ => None,
    };
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

/// The sessions against each other and the accounts (what `EngineConfig::validate` checks, with
/// the line of each mistake).
fn check_sessions(
    file: &Path,
    sessions: &[SessionAt],
    account_lines: &BTreeMap<u32, usize>,
    e: &mut Vec<CfgError>,
) {
    let mut seen_session: BTreeMap<u32, usize> = BTreeMap::new();
    let mut seen_slot: BTreeMap<(u8, u16), usize> = BTreeMap::new();
    let mut account_lane: BTreeMap<u32, (u8, usize)> = BTreeMap::new();
    for s in sessions {
        let c = &s.cfg;
        if let Some(first) = seen_session.insert(c.session, s.line) {
            e.push(err(
                file,
                s.line,
                format!("[session.{}] twice (first at line {first})", c.session),
            ));
        }
        if let Some(first) = seen_slot.insert((c.lane, c.slot), s.line) {
            e.push(err(
                file,
                s.line,
                format!(
                    "[session.{}]: lane {} slot {} is taken by the session at line {first}",
                    c.session, c.lane, c.slot
                ),
            ));
        }
        if !account_lines.contains_key(&c.account) {
            e.push(err(
                file,
                s.account_line,
                format!(
                    "account = {}: no [account.{}] section",
                    c.account, c.account
                ),
            ));
        }
        match account_lane.get(&c.account) {
            Some(&(l, line)) if l != c.lane => e.push(err(
                file,
                s.lane_line,
                format!(
                    "lane = {}: account {} already trades on lane {l} (line {line}); an \
                     account's risk state has one writer, its lane",
                    c.lane, c.account
                ),
            )),
            Some(_) => {}
            None => {
                account_lane.insert(c.account, (c.lane, s.lane_line));
            }
        }
    }
}

/// The membership's voters (07 §13.1) from the `[voter.N]` tables: every index 0..voters once,
/// no key or address twice, no vote key that is the sequencer's.
fn voter_members(
    file: &Path,
    (voters, voters_line): (usize, usize),
    voter_secs: &[VoterAt],
    seq_public: Option<VerifyingKey>,
    e: &mut Vec<CfgError>,
) -> Vec<VoterMember> {
    let mut voters_members = Vec::new();
    if !voter_secs.is_empty() {
        if voter_secs.len() != voters {
            let have: BTreeSet<usize> = voter_secs.iter().map(|v| v.index).collect();
            let missing: Vec<usize> = (0..voters).filter(|i| !have.contains(i)).collect();
            e.push(err(
                file,
                voters_line,
                format!(
                    "voters = {voters} but the file has {} [voter] sections (missing: {missing:?}): \
                     the membership lists every voter",
                    voter_secs.len()
                ),
            ));
        }
        let mut by_index: BTreeMap<usize, usize> = BTreeMap::new();
        let mut keys: BTreeMap<[u8; 32], usize> = BTreeMap::new();
        let mut addrs: BTreeMap<SocketAddr, usize> = BTreeMap::new();
        for v in voter_secs {
            if v.index >= voters {
                e.push(err(
                    file,
                    v.line,
                    format!(
                        "[voter.{}]: voters = {voters}, so indices are 0..={}",
                        v.index,
                        voters - 1
                    ),
                ));
            }
            if let Some(first) = by_index.insert(v.index, v.line) {
                e.push(err(
                    file,
                    v.line,
                    format!("[voter.{}] twice (first at line {first})", v.index),
                ));
            }
            if let Some((k, line)) = v.vote_key {
                if seq_public == Some(k) {
                    e.push(err(
                        file,
                        line,
                        "vote_key is the sequencer's own public key: a key must not be both a \
                         vote_key and a seq_key (07 §13.1)",
                    ));
                }
                if let Some(first) = keys.insert(k.to_bytes(), line) {
                    e.push(err(
                        file,
                        line,
                        format!("vote_key is also the vote_key at line {first}"),
                    ));
                }
            }
            if let Some((a, line)) = v.ctrl_addr {
                if let Some(first) = addrs.insert(a, line) {
                    e.push(err(
                        file,
                        line,
                        format!("ctrl_addr = {a} is also the ctrl_addr at line {first}"),
                    ));
                }
            }
        }
        for v in voter_secs {
            if let (Some((ctrl_addr, _)), Some((vote_key, _))) = (v.ctrl_addr, v.vote_key) {
                let own = match ctrl_addr.ip() {
                    IpAddr::V4(a) => Some(a),
                    IpAddr::V6(_) => None,
                };
                let [Some(pa), Some(pb)] = v.path_ips.map(|p| p.or(own)) else {
                    e.push(err(
                        file,
                        v.line,
                        format!(
                            "[voter.{}]: ctrl_addr is IPv6, so path_a_ip and path_b_ip are needed (the paths are IPv4 multicast, 07 §3.1)",
                            v.index
                        ),
                    ));
                    continue;
                };
                voters_members.push(VoterMember {
                    index: v.index,
                    ctrl_addr,
                    vote_key,
                    data_addr: v.data_addr,
                    p2p_addr: v.p2p_addr,
                    path_ips: [pa, pb],
                    held_mib: v.held_mib,
                });
            }
        }
        voters_members.sort_by_key(|v| v.index);
    }

    voters_members
}

/// Data boxes: indices 0..n without a hole (a session's data home is an index), and every voter
/// with a `data_addr` when there are any.
fn check_databoxes(
    file: &Path,
    databoxes: &mut [(DataBoxMember, usize)],
    voters_members: &[VoterMember],
    voters_line: usize,
    e: &mut Vec<CfgError>,
) {
    databoxes.sort_by_key(|d| d.0.index);
    for (i, (d, line)) in databoxes.iter().enumerate() {
        if d.index as usize != i {
            e.push(err(
                file,
                *line,
                format!(
                    "[databox.{}]: data boxes are numbered 0..n without a gap",
                    d.index
                ),
            ));
        }
    }
    if !databoxes.is_empty() && voters_members.iter().any(|v| v.data_addr.is_none()) {
        e.push(err(
            file,
            voters_line,
            "the file has [databox] sections, so every [voter] needs data_addr",
        ));
    }
}

/// What `[box]` says, checked (every mistake pushed with its line), for the rest of the parse.
struct BoxTable<'a> {
    profile: Profile,
    book: Option<(u64, usize)>,
    epoch: Option<(u64, usize)>,
    lanes_min: u64,
    lanes: Option<u8>,
    block_ns: u64,
    voters: usize,
    voters_line: usize,
    max_orders: u32,
    lane_deadline_ns: Option<u64>,
    bbo_deadline_ns: Option<u64>,
    hot_ring_bytes: usize,
    rtx_ring_bytes: usize,
    client_port: Option<(u64, usize)>,
    ctrl_port: Option<(u64, usize)>,
    box_ip: Ipv4Addr,
    box_path_ips: [Ipv4Addr; 2],
    core_map: Vec<usize>,
    membership_file: Option<(&'a str, usize)>,
    path_port: u16,
    self_fence_us: Option<u64>,
    hb_us: Option<u64>,
    seq_key_path: PathBuf,
    seq_key: Option<Seed32>,
    seq_public: Option<VerifyingKey>,
}

/// `[box]`: the profile, book, epoch, lanes, voters, block period, rings, ports, addresses, core
/// map, the sequencer key (the seed on the box, `seq_pub` everywhere else) and the budget
/// overrides.
fn box_table<'a>(
    file: &'a Path,
    base: &Path,
    sec: &'a Section,
    mode: Mode,
    e: &mut Vec<CfgError>,
) -> BoxTable<'a> {
    let box_line = sec.1;
    let mut b = Keys::new(file, sec);
    let profile = match b.take("profile", true, e) {
        Some(("ref", _)) => Profile::Ref,
        Some(("consumer", _)) => Profile::Consumer,
        Some(("dev", _)) => Profile::Dev,
        Some((p, line)) => {
            e.push(err(
                file,
                line,
                format!("profile {}: ref, consumer or dev", shown(p)),
            ));
            Profile::Dev
        }
        None => Profile::Dev,
    };
    let book = b.num("book", true, (0, u16::MAX.into()), "BookId is a u16", e);
    let epoch = b.num("epoch", true, (0, u32::MAX.into()), "Epoch is a u32", e);
    // 07 §3.4: the LaneRun tag has 6 bits; two substreams need a lane each.
    let lanes_min = if profile == Profile::Consumer { 1 } else { 2 };
    let lanes = b
        .num(
            "lanes",
            true,
            (lanes_min, N_LANES_MAX as u64),
            "at most N_LANES_MAX (the LaneRun tag has 6 bits, 07 §3.4); ref and dev run two \
             substreams, one lane each at least",
            e,
        )
        .map(|(x, _)| x as u8);
    let block_ns = b
        .num(
            "block_ns",
            false,
            (BLOCK_NS_MIN, BLOCK_NS_MAX),
            "no shorter than REP_SEAL_US (07 §6.2), no longer than 1 s",
            e,
        )
        .map_or(BLOCK_NS, |x| x.0);
    let voters_kv = b.num(
        "voters",
        false,
        (VOTERS_MIN as u64, VOTERS_MAX as u64),
        "BASE needs n ≥ 4 (f = 1); at most 64 because control keeps each height's votes in a \
         u64 bit mask, one bit per voter",
        e,
    );
    let (voters, voters_line) = voters_kv.map_or((4, box_line), |(x, l)| (x as usize, l));
    let max_orders = b
        .num(
            "max_orders",
            false,
            (1, MAX_ORDERS_MAX),
            "the book's order slab is allocated up front",
            e,
        )
        .map_or(1 << 20, |x| x.0 as u32);
    let deadline_why = "0 would shed every packet; leave the key out for no deadline";
    let lane_deadline_ns = b
        .num(
            "lane_deadline_ns",
            false,
            (1, DEADLINE_NS_MAX),
            deadline_why,
            e,
        )
        .map(|x| x.0);
    let bbo_deadline_ns = b
        .num(
            "bbo_deadline_ns",
            false,
            (1, DEADLINE_NS_MAX),
            deadline_why,
            e,
        )
        .map(|x| x.0);
    let hot_ring_bytes = b
        .num(
            "hot_ring_bytes",
            false,
            (HOT_RING_BYTES_MIN, HOT_RING_BYTES_MAX),
            "one per lane, allocated up front",
            e,
        )
        .map_or(4 << 20, |x| x.0 as usize);
    let rtx_ring_bytes = b
        .num(
            "rtx_ring_bytes",
            false,
            (
                RTX_RING_BYTES_MIN,
                RTX_RING_BYTES_MAX.min(usize::MAX as u64),
            ),
            "the ring holds several 9000-byte frames and indexes them by u32 offsets",
            e,
        )
        .map_or(REP_RTX_RING_BYTES, |x| x.0 as usize);
    let port_why = "a UDP port (0: any free port)";
    let client_port = b.num("client_port", true, (0, u16::MAX.into()), port_why, e);
    let ctrl_port = b.num("ctrl_port", true, (0, u16::MAX.into()), port_why, e);
    let box_ip = take_ip(&mut b, "ip", file, e).unwrap_or(BIND_IP);
    let box_path_ips = [
        take_ip(&mut b, "path_a_ip", file, e).unwrap_or(box_ip),
        take_ip(&mut b, "path_b_ip", file, e).unwrap_or(box_ip),
    ];
    let mut core_map: Vec<usize> = Vec::new();
    if let Some((v, line)) = b.take("core_map", true, e) {
        for c in v.split(',') {
            match c.trim().parse::<u64>() {
                Ok(x) if x <= CORE_ID_MAX => {
                    if core_map.contains(&(x as usize)) {
                        e.push(err(file, line, format!("core_map names core {x} twice")));
                    } else {
                        core_map.push(x as usize);
                    }
                }
                Ok(x) => e.push(err(
                    file,
                    line,
                    format!("core_map entry {x}: core ids are 0..={CORE_ID_MAX} (cpu_set_t)"),
                )),
                Err(_) => e.push(err(
                    file,
                    line,
                    format!("core_map entry {}: a core id", shown(c.trim())),
                )),
            }
        }
    }
    let seq_key_file = b.take("seq_key_file", true, e);
    let seq_pub_raw = b.take("seq_pub", mode == Mode::Home, e);
    let membership_file = b.take("membership", false, e);
    let path_port = b
        .num(
            "path_port",
            false,
            (0, u16::MAX as u64 - 1),
            "path A listens on it, path B on the next port",
            e,
        )
        .map_or(0, |x| x.0 as u16);
    let self_fence_us = match b.num(
        "self_fence_us",
        false,
        (SELF_FENCE_US_MIN, SELF_FENCE_US_MAX_DEV),
        "at least two ack periods (07 §4.8), at most 10 s",
        e,
    ) {
        Some((us, line)) if profile != Profile::Dev && us > SELF_FENCE_US_MAX => {
            e.push(err(
                file,
                line,
                format!(
                    "self_fence_us = {us}: above {SELF_FENCE_US_MAX} µs only on profile dev — voters \
                     suspect after FAILOVER_SILENCE_MS of silence (07 §9.1), and the sequencer \
                     must have fenced by then (INV-REP-6)"
                ),
            ));
            None
        }
        x => x.map(|x| x.0),
    };
    // REP_HB_US is a budget (07 §15): a dev box that shares two cores with its voters may send
    // heartbeats less often; elsewhere at most REP_ACK_LIVE_US apart, or voters that ack only
    // while frames arrive (07 §4.8) would fall silent between heartbeats.
    let hb_us = match b.num(
        "hb_us",
        false,
        (HB_US_MIN, HB_US_MAX_DEV),
        "10 µs to 10 ms",
        e,
    ) {
        Some((us, line)) if profile != Profile::Dev && us > REP_ACK_LIVE_US => {
            e.push(err(
                file,
                line,
                format!(
                    "hb_us = {us}: above REP_ACK_LIVE_US = {REP_ACK_LIVE_US} µs only on profile dev — \
                     a voter acks only while it receives frames (07 §4.8)"
                ),
            ));
            None
        }
        x => x.map(|x| x.0),
    };
    b.finish(e);

    // Ports. On `ref` lane l listens on client_port + l (07 §9.5), so the lane ports must fit
    // in a u16 and must not take the control port.
    let n_client = if profile == Profile::Ref {
        lanes.unwrap_or(1).max(1) as u32
    } else {
        1
    };
    if let Some((cp, cl)) = client_port {
        let last = cp as u32 + n_client - 1;
        if cp != 0 && last > u16::MAX as u32 {
            e.push(err(
                file,
                cl,
                format!(
                    "client_port = {cp} with {n_client} lanes on profile ref: lane l listens \
                     on client_port + l, so the last port would be {last} > 65535"
                ),
            ));
        }
        if let Some((tp, tl)) = ctrl_port {
            if cp != 0 && tp != 0 && (cp as u32..=last).contains(&(tp as u32)) {
                e.push(err(
                    file,
                    tl,
                    format!("ctrl_port = {tp} is also a client port ({cp}..={last})"),
                ));
            }
        }
    }

    // The sequencer key (missing-chapters §5): the sequencer reads its seed; every other role
    // of the home reads only `seq_pub` (07 §13.1 `seq_key`), never the seed file.
    let seq_key_path = base.join(seq_key_file.map_or("", |x| x.0));
    let seq_key = match mode {
        Mode::Sequencer => match read_seed(&seq_key_path) {
            Ok(k) => Some(k),
            Err(x) => {
                let line = seq_key_file.map_or(box_line, |x| x.1);
                e.push(err(file, line, format!("seq_key_file: {x}")));
                None
            }
        },
        // A placeholder that never leaves this function: HomeConfig has no seed.
        Mode::Home => Some(Seed32::new([0; 32])),
    };
    let seq_pub_kv = seq_pub_raw.and_then(|(v, line)| {
        match hex_bytes::<32>(v).map(|k| VerifyingKey::from_bytes(&k)) {
            Some(Ok(k)) if !k.is_weak() => Some((k, line)),
            _ => {
                e.push(err(
                    file,
                    line,
                    "seq_pub: expected 64 hex digits of a valid Ed25519 public key",
                ));
                None
            }
        }
    });
    let seq_public = match mode {
        Mode::Sequencer => seq_key.as_ref().map(|k| {
            let sk = SigningKey::from_bytes(k.expose());
            sk.verifying_key()
        }),
        Mode::Home => seq_pub_kv.map(|x| x.0),
    };
    if let (Mode::Sequencer, Some(derived), Some((set, line))) = (mode, seq_public, seq_pub_kv) {
        if derived != set {
            e.push(err(
                file,
                line,
                "seq_pub is not the public key of seq_key_file's seed: the replicas would refuse \
                 every header",
            ));
        }
    }

    BoxTable {
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
    }
}

/// What one parse of a home file takes from every table but `[box]`.
#[derive(Default)]
struct Tables {
    accounts: Vec<AccountCfg>,
    account_lines: BTreeMap<u32, usize>,
    sessions: Vec<SessionAt>,
    session_key_files: BTreeMap<u32, PathBuf>,
    session_addrs: BTreeMap<u32, SocketAddr>,
    voter_secs: Vec<VoterAt>,
    databoxes: Vec<(DataBoxMember, usize)>,
    standby_ctrl: Option<SocketAddr>,
    standby_key: Option<VerifyingKey>,
}

/// What every table's parser needs of the file: its path (for errors), its folder (key files
/// are relative to it) and `[box] lanes` (a session's lane is checked against it).
struct Ctx<'a> {
    file: &'a Path,
    base: &'a Path,
    lanes: Option<u8>,
}

/// `[account.ID]`: one account's risk limits (07 §9.5).
fn account_table(
    ctx: &Ctx<'_>,
    s: &Section,
    id: &str,
    head: &str,
    t: &mut Tables,
    e: &mut Vec<CfgError>,
) {
    let file = ctx.file;
    let mut k = Keys::new(file, s);
    let Ok(account) = id.parse::<u32>() else {
        e.push(err(
            file,
            s.1,
            format!("{head}: the id is a number 0..={}", u32::MAX),
        ));
        return;
    };
    let none = "0 would refuse every New";
    let a = AccountCfg {
        account,
        max_order_qty: k
            .num("max_order_qty", true, (1, u32::MAX.into()), none, e)
            .map_or(0, |x| x.0 as u32),
        max_open_orders: k
            .num(
                "max_open_orders",
                true,
                (1, LANE_MAX_ORDERS as u64),
                "a lane tracks at most 65536 working orders; 0 would refuse every New",
                e,
            )
            .map_or(0, |x| x.0 as u32),
        max_exposure: k
            .num("max_exposure", true, (1, u64::MAX), none, e)
            .map_or(0, |x| x.0),
    };
    k.finish(e);
    if let Some(first) = t.account_lines.insert(account, s.1) {
        e.push(err(
            file,
            s.1,
            format!("[account.{account}] twice (first at line {first})"),
        ));
        return;
    }
    t.accounts.push(a);
}

/// `[session.ID]`: a session's account, lane, slot, fill TX core, key file and bound address (missing-chapters §2).
fn session_table(
    ctx: &Ctx<'_>,
    s: &Section,
    id: &str,
    head: &str,
    t: &mut Tables,
    e: &mut Vec<CfgError>,
) {
    let file = ctx.file;
    let mut k = Keys::new(file, s);
    let session = match id.parse::<u32>() {
        Ok(0) => {
            e.push(err(file, s.1, format!("{head}: session 0 is reserved")));
            None
        }
        Ok(x) => Some(x),
        Err(_) => {
            e.push(err(
                file,
                s.1,
                format!("{head}: the id is a number 1..={}", u32::MAX),
            ));
            None
        }
    };
    let account = k.num("account", true, (0, u32::MAX.into()), "an AccountId", e);
    let lane_hi = ctx.lanes.map_or(N_LANES_MAX as u64 - 1, |n| n as u64 - 1);
    let lane = k.num(
        "lane",
        true,
        (0, lane_hi),
        "a lane of this box (lanes 0..lanes)",
        e,
    );
    let slot = k.num(
        "slot",
        true,
        (0, MAX_SESSIONS_PER_LANE as u64 - 1),
        "below MAX_SESSIONS_PER_LANE (07 §3.5)",
        e,
    );
    let tx = k.num(
        "tx",
        false,
        (0, N_TX - 1),
        "one of the three fill TX cores A, B, C (07 §4.1)",
        e,
    );
    let key_file = k.take("key_file", true, e);
    // The session's bound address, when known in advance (07 §5.7).
    let client_addr = take_addr(&mut k, "client_addr", false, file, e);
    k.finish(e);
    let key_path = ctx.base.join(key_file.map_or("", |x| x.0));
    let keys = match read_seed(&key_path) {
        Ok(x) => Some(x),
        Err(x) => {
            let line = key_file.map_or(s.1, |x| x.1);
            e.push(err(file, line, format!("{head} key_file: {x}")));
            None
        }
    };
    let (Some(session), Some(account), Some(lane), Some(slot), Some(keys)) =
        (session, account, lane, slot, keys)
    else {
        return;
    };
    let mut k_seq = [0u8; 16];
    let mut k_out = [0u8; 16];
    k_seq.copy_from_slice(&keys.expose()[..16]);
    k_out.copy_from_slice(&keys.expose()[16..]);
    t.session_key_files.insert(session, key_path);
    if let Some((a, _)) = client_addr {
        t.session_addrs.insert(session, a);
    }
    t.sessions.push(SessionAt {
        cfg: SessionCfg {
            session,
            account: account.0 as u32,
            lane: lane.0 as u8,
            slot: slot.0 as u16,
            k_seq,
            k_out,
            tx: tx.map_or(0, |x| x.0 as u8),
        },
        line: s.1,
        account_line: account.1,
        lane_line: lane.1,
    });
    k_seq.zeroize();
    k_out.zeroize();
}

/// `[voter.N]`: one voter of the membership (07 §13.1), from config, never derived.
fn voter_table(
    ctx: &Ctx<'_>,
    s: &Section,
    id: &str,
    head: &str,
    t: &mut Tables,
    e: &mut Vec<CfgError>,
) {
    let file = ctx.file;
    let mut k = Keys::new(file, s);
    let index = match id.parse::<usize>() {
        Ok(i) if i < VOTERS_MAX => Some(i),
        _ => {
            e.push(err(
                file,
                s.1,
                format!("{head}: the index is a number 0..voters"),
            ));
            None
        }
    };
    let ctrl_addr = take_addr(&mut k, "ctrl_addr", true, file, e);
    let data_addr = take_addr(&mut k, "data_addr", false, file, e).map(|x| x.0);
    let p2p_addr = take_addr(&mut k, "p2p_addr", false, file, e).map(|x| x.0);
    let path_a_ip = take_ip(&mut k, "path_a_ip", file, e);
    let path_b_ip = take_ip(&mut k, "path_b_ip", file, e);
    let vote_key = take_pub(&mut k, "vote_key", true, file, e);
    let held_mib = k
        .num(
            "held_mib",
            false,
            (1, 4096),
            "MiB of order frames held behind holes per substream",
            e,
        )
        .map(|x| x.0);
    k.finish(e);
    if let Some(index) = index {
        t.voter_secs.push(VoterAt {
            index,
            line: s.1,
            ctrl_addr,
            vote_key,
            data_addr,
            p2p_addr,
            path_ips: [path_a_ip, path_b_ip],
            held_mib,
        });
    }
}

/// `[databox.N]`: one data box of the home (07 §5.1).
fn databox_table(
    ctx: &Ctx<'_>,
    s: &Section,
    id: &str,
    head: &str,
    t: &mut Tables,
    e: &mut Vec<CfgError>,
) {
    let file = ctx.file;
    let mut k = Keys::new(file, s);
    let index = match id.parse::<u8>() {
        Ok(i) if (i as usize) < DATABOXES_MAX => Some(i),
        _ => {
            e.push(err(
                file,
                s.1,
                format!("{head}: the index is a number 0..{DATABOXES_MAX}"),
            ));
            None
        }
    };
    let client_addr = take_addr(&mut k, "client_addr", true, file, e);
    let dest_base = k.num(
        "dest_base",
        true,
        (1, u16::MAX as u64 - VOTERS_MAX as u64),
        "a UDP port with room for one port per voter above it",
        e,
    );
    // The member envelope's identity (its secret: `vyrn data --key`).
    let link_key = take_pub(&mut k, "link_key", true, file, e);
    k.finish(e);
    if let (Some(index), Some((client_addr, _)), Some((dest_base, _)), Some((link_key, _))) =
        (index, client_addr, dest_base, link_key)
    {
        if t.databoxes.iter().any(|d| d.0.index == index) {
            e.push(err(file, s.1, format!("[databox.{index}] twice")));
        }
        t.databoxes.push((
            DataBoxMember {
                index,
                client_addr,
                dest_base: dest_base as u16,
                link_key,
            },
            s.1,
        ));
    }
}

/// `[standby]`: the warm standby's control port, where voters also send their finalize votes and
/// certificates (07 §6.8), and its identity for the member envelope.
fn standby_table(ctx: &Ctx<'_>, s: &Section, t: &mut Tables, e: &mut Vec<CfgError>) {
    let file = ctx.file;
    let mut k = Keys::new(file, s);
    t.standby_ctrl = take_addr(&mut k, "ctrl_addr", true, file, e).map(|x| x.0);
    // Issue 28 item 4: the member envelope's identity (its secret: `vyrn standby --key`).
    t.standby_key = take_pub(&mut k, "link_key", true, file, e).map(|x| x.0);
    k.finish(e);
}

/// A required or optional Ed25519 public key `name` (64 hex digits), refusing small-order
/// points: a `vote_key` or a `link_key` (the member envelope's identity, `vyrn_wire::msg::seal`).
fn take_pub(
    k: &mut Keys<'_>,
    name: &str,
    required: bool,
    file: &Path,
    e: &mut Vec<CfgError>,
) -> Option<(VerifyingKey, usize)> {
    k.take(name, required, e).and_then(|(v, line)| {
        let Some(bytes) = hex_bytes::<32>(v) else {
            e.push(err(
                file,
                line,
                format!("{name}: expected 64 hex digits (an Ed25519 public key)"),
            ));
            return None;
        };
        match VerifyingKey::from_bytes(&bytes) {
            Ok(vk) if vk.is_weak() => {
                e.push(err(
                    file,
                    line,
                    format!("{name} is a small-order (weak) point"),
                ));
                None
            }
            Ok(vk) => Some((vk, line)),
            Err(_) => {
                e.push(err(
                    file,
                    line,
                    format!("{name} is not a valid Ed25519 point"),
                ));
                None
            }
        }
    })
}

/// A dev home's `REP_Membership` (07 §13.1): four voters on loopback, the box as primary, one
/// data box, epoch 1, certified by all four voters. Voters 1 and 3 are labelled `Vx`: 07
/// forbids one client implementation holding Q votes (CLIENT_SPLIT), so the record says so even
/// where, on a dev box, every replica runs this build.
fn dev_membership(
    voters: &[SigningKey],
    seq: &SigningKey,
    base_port: u16,
    n_data: u8,
    addrs: &HomeAddrs,
) -> RepMembership {
    use vyrn_wire::msg::addr_from_socket;
    use vyrn_wire::msg::ctrl::{Client, DataBox, Mode as MMode, Role, SeqBox, Voter};
    let at = |ip: Ipv4Addr, port: u16| addr_from_socket(SocketAddr::from((ip, port)));
    let mut m = RepMembership {
        epoch_from: 1,
        home: *b"DEV\0",
        mode: MMode::Base,
        q: 3,
        voters: voters
            .iter()
            .enumerate()
            .map(|(i, k)| Voter {
                index: i as u8,
                vote_key: k.verifying_key().to_bytes(),
                client: if i % 2 == 0 { Client::Rust } else { Client::Vx },
                facility: 1,
                data_addr: at(addrs.voters[i].0, base_port + DEV_VOTER_DATA + i as u16),
                repl_addr: at(addrs.voters[i].1[0], base_port + DEV_PATHS),
            })
            .collect(),
        seq_order: vec![SeqBox {
            index: 0,
            role: Role::Primary,
            seq_key: seq.verifying_key().to_bytes(),
            facility: 1,
            client_addr: at(addrs.box_ip, base_port),
            repl_addr: at(addrs.box_path_ips[0], base_port + DEV_PATHS),
        }],
        recovery: 0,
        data_boxes: (0..n_data)
            .map(|d| DataBox {
                index: d,
                facility: 1,
                addr: at(addrs.databoxes[d as usize], dev_databox_port(base_port, d)),
            })
            .collect(),
        cert: Vec::new(),
    };
    m.cert = voters
        .iter()
        .enumerate()
        .map(|(i, k)| m.sign_entry(i as u8, k))
        .collect();
    m
}

/// Parse and check a `REP_Membership` file (07 §13.1) for a home of `epoch` whose file lists
/// `voters` and `seq_pub`: it parses; it keeps every rule of §13.1 (`validate`); its
/// certificate verifies against its own voters (a home's first record is certified by the set
/// it names; a later one by the set before it, checked where epochs change); it applies at
/// `epoch`; and its voters' keys, quorum and primary sequencer key are the file's.
pub fn check_membership(
    bytes: &[u8],
    epoch: u32,
    voters: &[VoterMember],
    seq_pub: &VerifyingKey,
) -> Result<RepMembership, String> {
    let m = match vyrn_wire::msg::ctrl::CtrlMsg::parse(bytes) {
        Ok(vyrn_wire::msg::ctrl::CtrlMsg::RepMembership(m)) => *m,
        Ok(_) => return Err("not a REP_Membership record".into()),
        Err(e) => return Err(format!("does not parse: {e:?}")),
    };
    m.validate()
        .map_err(|e| format!("breaks 07 §13.1: {e:?}"))?;
    m.verify_cert(&m)
        .map_err(|e| format!("its certificate does not verify: {e:?}"))?;
    if m.epoch_from > epoch {
        return Err(format!(
            "applies from epoch {}, the home is at epoch {epoch}",
            m.epoch_from
        ));
    }
    if m.voters.len() != voters.len() {
        return Err(format!(
            "{} voters, the file's [voter] sections list {}",
            m.voters.len(),
            voters.len()
        ));
    }
    for (a, b) in m.voters.iter().zip(voters) {
        if a.vote_key != b.vote_key.to_bytes() {
            return Err(format!(
                "voter {}'s vote_key differs from [voter.{}]'s",
                a.index, b.index
            ));
        }
    }
    let primary = m
        .seq_order
        .iter()
        .find(|s| s.role == vyrn_wire::msg::ctrl::Role::Primary)
        .map(|s| s.seq_key);
    if primary != Some(seq_pub.to_bytes()) {
        return Err("the primary sequencer's seq_key is not this box's key".into());
    }
    Ok(m)
}

/// Tiles a `ref` box pins one to a core, in this order: lanes, cut, BBO, stream cores, TX,
/// hasher, control, RX (the client ports), control RX, cert (`seq::ports`).
pub fn ref_tiles(cfg: &BoxConfig) -> usize {
    tiles_for(cfg.engine.layout.n_lanes, cfg.engine.layout.n_streams)
}

/// Tiles of a box of `lanes` lanes and `streams` substreams: the lanes, one stream core per
/// substream, and eight more (cut, BBO, TX, hasher, control, RX, control RX, cert).
fn tiles_for(lanes: u8, streams: u8) -> usize {
    lanes as usize + streams as usize + 8
}

/// The UDP addresses the box binds, as `NetBox::open` binds them: on `[box] ip`, the client
/// port (on `ref`, `client_port + l` for every lane l) then the control port. A port past
/// 65535 (a config changed after loading) is left out; [`startup_checks`] reports it.
pub fn bind_addrs(cfg: &BoxConfig) -> Vec<SocketAddr> {
    let mut out = Vec::new();
    if cfg.profile == Profile::Ref {
        for l in 0..cfg.engine.layout.n_lanes as u16 {
            let p = if cfg.client_port == 0 {
                Some(0)
            } else {
                cfg.client_port.checked_add(l)
            };
            if let Some(p) = p {
                out.push(SocketAddr::new(IpAddr::V4(cfg.ip), p));
            }
        }
    } else {
        out.push(SocketAddr::new(IpAddr::V4(cfg.ip), cfg.client_port));
    }
    out.push(SocketAddr::new(IpAddr::V4(cfg.ip), cfg.ctrl_port));
    out
}

/// What the machine must offer before the box starts. Every failure, not only the first.
pub fn startup_checks(cfg: &BoxConfig) -> Vec<String> {
    let mut out = Vec::new();
    // Cores: those this process may run on (its affinity mask), not merely how many exist.
    let cores: Vec<usize> = core_ids();
    if cfg.core_map.is_empty() {
        out.push("core_map is empty".into());
    }
    for c in &cfg.core_map {
        if !cores.contains(c) {
            out.push(format!(
                "core_map names core {c}, not in this process's affinity mask {cores:?}"
            ));
        }
    }
    if cfg.profile == Profile::Ref && cfg.core_map.len() < ref_tiles(cfg) {
        out.push(format!(
            "profile ref pins one tile per core: {} tiles, core_map has {} cores",
            ref_tiles(cfg),
            cfg.core_map.len()
        ));
    }
    // Ports: exactly the addresses the box will bind.
    let addrs = bind_addrs(cfg);
    let want = if cfg.profile == Profile::Ref {
        cfg.engine.layout.n_lanes as usize + 1
    } else {
        2
    };
    if addrs.len() < want {
        out.push(format!(
            "client_port {} + lane runs past 65535",
            cfg.client_port
        ));
    }
    let mut zero = false;
    for a in addrs {
        if a.port() == 0 {
            zero = true;
        } else if let Err(e) = std::net::UdpSocket::bind(a) {
            out.push(format!("UDP port {a} is not free: {e}"));
        }
    }
    if zero {
        out.push("a UDP port is 0".into());
    }
    // Secrets are private (missing-chapters §5: key files 0600).
    let mut files: Vec<&PathBuf> = vec![&cfg.seq_key_file];
    files.extend(cfg.session_key_files.values());
    for f in files {
        if let Some(m) = mode(f) {
            if m & 0o077 != 0 {
                out.push(format!(
                    "{} is mode {:o}: keys must be 0600 (chmod 600)",
                    f.display(),
                    m & 0o777
                ));
            }
        }
    }
    out
}

/// The CPUs of this process's affinity mask (`sched_getaffinity` through `core_affinity`),
/// or `0..available_parallelism` where the mask cannot be read.
fn core_ids() -> Vec<usize> {
    match core_affinity::get_core_ids() {
        Some(ids) if !ids.is_empty() => ids.into_iter().map(|c| c.id).collect(),
        _ => std::thread::available_parallelism()
            .map(|n| (0..n.get()).collect())
            .unwrap_or_default(),
    }
}

#[cfg(unix)]
fn mode(p: &Path) -> Option<u32> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).ok().map(|m| m.permissions().mode())
}

#[cfg(not(unix))]
fn mode(_: &Path) -> Option<u32> {
    None
}

/// Write a secret file atomically and private (missing-chapters §5): created mode 0600 under a
/// fresh temporary name in the same folder (`create_new`: never an existing file or a link),
/// written, synced, renamed over `path`, and the folder synced. No moment exists at which the
/// secret is readable by others or `path` holds a partial file; a link planted at `path` is
/// replaced, never followed.
pub fn write_secret_file(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write as _;
    use std::sync::atomic::{AtomicU64, Ordering};
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let name = path.file_name().ok_or_else(|| {
        std::io::Error::new(std::io::ErrorKind::InvalidInput, "a key file needs a name")
    })?;
    let tmp = dir.join(format!(
        ".{}.tmp-{}-{}",
        name.to_string_lossy(),
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    ));
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.mode(0o600);
    }
    let done = opts.open(&tmp).and_then(|mut f| {
        let r = f
            .write_all(bytes)
            .and_then(|()| f.sync_all())
            .and_then(|()| std::fs::rename(&tmp, path));
        if r.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        r
    });
    done?;
    #[cfg(unix)]
    std::fs::File::open(dir)?.sync_all()?;
    Ok(())
}

/// Write a `dev` home's config and fresh random keys (mode 0600, [`write_secret_file`]) into
/// `dir`: `lanes` lanes, `per_lane` sessions each (one account per two sessions), UDP ports
/// from `base_port` (0: any free port, for both). Returns the config file's path. For
/// development boxes only: production keys come from the facility's secret store.
pub fn write_dev_config(
    dir: &Path,
    lanes: u8,
    per_lane: u16,
    base_port: u16,
) -> std::io::Result<PathBuf> {
    write_dev(
        dir,
        lanes,
        per_lane,
        base_port,
        None,
        &HomeAddrs::loopback(),
        None,
    )
}

/// Offsets from `base_port` of a dev home's fixed ports ([`write_dev_home`]): voter `i`'s
/// control socket at `+ DEV_VOTER_CTRL + i`, its data socket at `+ DEV_VOTER_DATA + i`, the
/// data box's client port at `+ DEV_DATABOX`, its per-voter sockets from `+ DEV_DATABOX + 1`.
pub const DEV_VOTER_CTRL: u16 = 10;
/// A dev home's standby control port: `base_port + DEV_STANDBY` (below the voters', above the
/// box's control port for up to 8 lanes).
pub const DEV_STANDBY: u16 = 9;
/// See [`DEV_VOTER_CTRL`].
pub const DEV_VOTER_DATA: u16 = 20;
/// See [`DEV_VOTER_CTRL`].
pub const DEV_DATABOX: u16 = 30;
/// The paths' port offset: A at `base_port + DEV_PATHS`, B one above.
pub const DEV_PATHS: u16 = 40;
/// Voter `i`'s consensus p2p port: `base_port + DEV_VOTER_P2P + i`.
pub const DEV_VOTER_P2P: u16 = 50;
/// The load generator's client port in a dev home with two data boxes (every session's
/// `client_addr`).
pub const DEV_LOAD_CLIENT: u16 = 58;

/// [`write_dev_config`] for a whole home on loopback: also the membership — four `[voter.N]`
/// sections with `ctrl_addr`, `data_addr` and the public `vote_key` of a fresh seed in
/// `keys/voter-N.key` (the replica's own secret) — one `[databox.0]`, and `seq_pub`. The
/// replicas and the data box read the same file ([`HomeConfig`]). `base_port` must be
/// nonzero: the members' addresses are fixed ([`DEV_VOTER_CTRL`]).
pub fn write_dev_home(
    dir: &Path,
    lanes: u8,
    per_lane: u16,
    base_port: u16,
) -> std::io::Result<PathBuf> {
    write_dev_home_with(dir, lanes, per_lane, base_port, 1)
}

/// Most data boxes a dev home has: their ports fit between [`DEV_DATABOX`] and [`DEV_PATHS`].
pub const DEV_DATABOXES_MAX: u8 = 2;

/// Data box `d`'s client port in a dev home: `base_port + DEV_DATABOX + 5 d`, its per-voter
/// sockets on the four ports above it.
pub fn dev_databox_port(base_port: u16, d: u8) -> u16 {
    base_port + DEV_DATABOX + 5 * d as u16
}

/// Where the roles of a generated home sit: every one on loopback ([`HomeAddrs::loopback`]), or
/// each in its own network namespace of the lab (`deploy/lab/netns.sh`, [`HomeAddrs::netns_lab`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HomeAddrs {
    /// The box's address (`[box] ip`): client and control ports.
    pub box_ip: Ipv4Addr,
    /// The box's interfaces on path A and path B.
    pub box_path_ips: [Ipv4Addr; 2],
    /// Voter i's address (its ctrl, data and p2p sockets) and its path A / B interfaces.
    pub voters: [(Ipv4Addr, [Ipv4Addr; 2]); 4],
    /// Data box d's address.
    pub databoxes: [Ipv4Addr; DEV_DATABOXES_MAX as usize],
    /// Where the load generator binds a session that names its address (two data boxes).
    pub load_ip: Ipv4Addr,
}

/// The lab's facility network (control, consensus p2p, clients, data): `10.77.0.0/24`.
pub const LAB_NET_F: [u8; 3] = [10, 77, 0];
/// The lab's path A network: `10.77.1.0/24`.
pub const LAB_NET_A: [u8; 3] = [10, 77, 1];
/// The lab's path B network: `10.77.2.0/24`.
pub const LAB_NET_B: [u8; 3] = [10, 77, 2];

impl HomeAddrs {
    /// Every role on 127.0.0.1; both paths loopback multicast.
    pub fn loopback() -> HomeAddrs {
        let lo = Ipv4Addr::LOCALHOST;
        HomeAddrs {
            box_ip: lo,
            box_path_ips: [lo, lo],
            voters: [(lo, [lo, lo]); 4],
            databoxes: [lo; DEV_DATABOXES_MAX as usize],
            load_ip: lo,
        }
    }

    /// The netns lab of `deploy/lab/netns.sh`: host `.1` is the box, `.10 + i` voter i, `.20 + d`
    /// data box d, `.254` the lab's own end (where `vyrn up` and the load generator run), on the
    /// facility network and — box and voters only — on two separate path networks.
    pub fn netns_lab() -> HomeAddrs {
        let at = |n: [u8; 3], h: u8| Ipv4Addr::new(n[0], n[1], n[2], h);
        let v = |i: u8| {
            (
                at(LAB_NET_F, 10 + i),
                [at(LAB_NET_A, 10 + i), at(LAB_NET_B, 10 + i)],
            )
        };
        HomeAddrs {
            box_ip: at(LAB_NET_F, 1),
            box_path_ips: [at(LAB_NET_A, 1), at(LAB_NET_B, 1)],
            voters: [v(0), v(1), v(2), v(3)],
            databoxes: [at(LAB_NET_F, 20), at(LAB_NET_F, 21)],
            load_ip: at(LAB_NET_F, 254),
        }
    }
}

/// [`write_dev_home`] with `n_data` data boxes (1..=[`DEV_DATABOXES_MAX`]) in facility order;
/// session `s` is homed on box `s mod n_data` (07 §5.1, [`HomeConfig::data_home`]). Two boxes
/// give each session a backup home (07 §5.7).
pub fn write_dev_home_with(
    dir: &Path,
    lanes: u8,
    per_lane: u16,
    base_port: u16,
    n_data: u8,
) -> std::io::Result<PathBuf> {
    write_dev_home_at(
        dir,
        lanes,
        per_lane,
        base_port,
        n_data,
        &HomeAddrs::loopback(),
    )
}

/// [`write_dev_home_with`] with the roles at `addrs`.
pub fn write_dev_home_at(
    dir: &Path,
    lanes: u8,
    per_lane: u16,
    base_port: u16,
    n_data: u8,
    addrs: &HomeAddrs,
) -> std::io::Result<PathBuf> {
    write_home(dir, lanes, per_lane, base_port, n_data, addrs, None)
}

/// Tiles a REF box of `lanes` lanes pins, one core each (two substreams): [`ref_tiles`].
pub fn ref_box_tiles(lanes: u8) -> usize {
    tiles_for(lanes, 2)
}

/// A REF home on one big machine (`vyrn up --profile ref`): [`write_dev_home_at`]'s home with
/// `profile = "ref"` — one pinned core per tile from `core_map` (at least
/// [`ref_box_tiles`]), 1 ms blocks (BLOCK_NS), 07's heartbeat and rings, lane `l` on
/// `client_port + l` — and one budget override: `self_fence_us` at its `ref` ceiling, since the
/// voters' RepAcks cross the kernel's loopback sockets, not REF NICs.
pub fn write_ref_home(
    dir: &Path,
    lanes: u8,
    per_lane: u16,
    base_port: u16,
    n_data: u8,
    addrs: &HomeAddrs,
    core_map: &[usize],
) -> std::io::Result<PathBuf> {
    let need = ref_box_tiles(lanes);
    if core_map.len() < need {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!(
                "a REF box with {lanes} lanes pins {need} tiles, one core each; {} given",
                core_map.len()
            ),
        ));
    }
    write_home(
        dir,
        lanes,
        per_lane,
        base_port,
        n_data,
        addrs,
        Some(core_map),
    )
}

fn write_home(
    dir: &Path,
    lanes: u8,
    per_lane: u16,
    base_port: u16,
    n_data: u8,
    addrs: &HomeAddrs,
    ref_cores: Option<&[usize]>,
) -> std::io::Result<PathBuf> {
    if base_port == 0 || base_port > u16::MAX - 64 {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "a dev home needs a fixed base port (1..=65471): the membership names addresses",
        ));
    }
    if !(1..=DEV_DATABOXES_MAX).contains(&n_data) {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("a dev home has 1 or {DEV_DATABOXES_MAX} data boxes, not {n_data}"),
        ));
    }
    write_dev(
        dir,
        lanes,
        per_lane,
        base_port,
        Some(n_data),
        addrs,
        ref_cores,
    )
}

/// `s` as a TOML basic string, quoted and escaped.
fn toml_str(s: &str) -> String {
    use std::fmt::Write as _;
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for ch in s.chars() {
        match ch {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() => {
                let _ = write!(out, "\\u{:04X}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn write_dev(
    dir: &Path,
    lanes: u8,
    per_lane: u16,
    base_port: u16,
    data: Option<u8>,
    addrs: &HomeAddrs,
    ref_cores: Option<&[usize]>,
) -> std::io::Result<PathBuf> {
    let home = data.is_some();
    let n_data = data.unwrap_or(1);
    use std::fmt::Write as _;
    let ctrl_port = if base_port == 0 {
        0
    } else {
        base_port.checked_add(lanes as u16).ok_or_else(|| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("base_port {base_port} + {lanes} lanes runs past 65535"),
            )
        })?
    };
    std::fs::create_dir_all(dir.join("keys"))?;
    let key = |name: &str| -> std::io::Result<String> {
        let mut b = [0u8; 32];
        use std::io::Read;
        std::fs::File::open("/dev/urandom")?.read_exact(&mut b)?;
        let rel = format!("keys/{name}.key");
        let mut hex = String::with_capacity(65);
        for x in &b {
            let _ = write!(hex, "{x:02x}");
        }
        hex.push('\n');
        b.zeroize();
        let r = write_secret_file(&dir.join(&rel), hex.as_bytes());
        hex.zeroize();
        r.map(|()| rel)
    };
    let cores = core_ids();
    let mut c = String::new();
    if ref_cores.is_some() {
        let _ = writeln!(
            c,
            "# A REF home on one machine (missing-chapters §0): one pinned core per tile.\n\
             # TOML, read by vyrn_home (the format: docs/operator.md)."
        );
    } else {
        let _ = writeln!(
            c,
            "# A dev home (missing-chapters §0): tiles multiplexed on few cores.\n\
             # TOML, read by vyrn_home (the format: docs/operator.md)."
        );
    }
    let _ = writeln!(c, "[box]");
    let profile = if ref_cores.is_some() { "ref" } else { "dev" };
    let _ = writeln!(c, "profile = \"{profile}\"");
    let _ = writeln!(c, "book = 1\nepoch = 1\nlanes = {lanes}\nvoters = 4");
    // Blocks of 2 ms on a dev box (BLOCK_NS is 1 ms): each block costs a signature, its
    // verification at every voter and Q signatures checked by the box — on the one core a dev
    // box leaves for everything but the hot path, 1 kHz of that starves finality.
    if ref_cores.is_some() {
        let _ = writeln!(c, "block_ns = {BLOCK_NS}    # BLOCK_NS (07 §6.2)");
    } else if home {
        // A dev home: four replicas verify, replay and vote every block on that same core;
        // at 2 ms the finality gate (8 blocks = 16 ms of lag) halted the book ~80 times in a
        // 7 s run of the main command; with Simplex among the four (a view of ~50 ms on two
        // shared cores) it stayed halted at 5 ms (docs/benchmarks.md).
        let _ = writeln!(
            c,
            "block_ns = {}    # dev home: 20 ms (BLOCK_NS = 1 ms); 4 replicas and their Simplex engines share one core",
            20 * BLOCK_NS
        );
    } else {
        let _ = writeln!(
            c,
            "block_ns = {}    # dev: 2 ms (BLOCK_NS = 1 ms); the crypto per block shares one core",
            2 * BLOCK_NS
        );
    }
    if addrs.box_ip != BIND_IP {
        let _ = writeln!(
            c,
            "ip = \"{}\"    # the box's client and control ports",
            addrs.box_ip
        );
    }
    if addrs.box_path_ips != [addrs.box_ip; 2] {
        let _ = writeln!(
            c,
            "path_a_ip = \"{}\"    # the box's interface on path A (its own network)",
            addrs.box_path_ips[0]
        );
        let _ = writeln!(
            c,
            "path_b_ip = \"{}\"    # and on path B",
            addrs.box_path_ips[1]
        );
    }
    let _ = writeln!(c, "client_port = {base_port}    # the box's client port");
    let _ = writeln!(c, "ctrl_port = {ctrl_port}");
    // dev (issue 11): core_map[0] is the hot core (the response path spins there), the rest
    // hold the cold tiles; the second core of the mask is hot, the first (where the kernel
    // tends to run interrupts and timers) cold.
    let list = |v: &[usize]| {
        v.iter()
            .map(|x| x.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    };
    if let Some(rc) = ref_cores {
        let _ = writeln!(
            c,
            "core_map = [{}]    # ref: one pinned core per tile, in tile order (lanes, cut, BBO, stream-A, stream-B, TX, hasher, control, RX, control RX, cert)",
            list(rc)
        );
        let _ = writeln!(
            c,
            "self_fence_us = {}    # budget override at the ref ceiling: RepAcks cross loopback sockets, not REF NICs",
            SELF_FENCE_US_MAX
        );
    } else {
        let mut two: Vec<usize> = cores.iter().take(2).copied().collect();
        two.reverse();
        let _ = writeln!(
            c,
            "core_map = [{}]    # dev: first core hot (response path, spinning), the rest cold",
            list(&two)
        );
        let _ = writeln!(c, "hot_ring_bytes = {}", 4 << 20);
        let _ = writeln!(c, "rtx_ring_bytes = {}", 8 << 20);
    }
    if ref_cores.is_some() {
        // 07's heartbeat and rings.
    } else if home {
        // Measured (docs/benchmarks.md): with four replica processes, the data box and the
        // clients on the one core the hot path leaves, RepAck gaps above 50 ms happened under
        // the open loop and fenced the box for good.
        let _ = writeln!(
            c,
            "self_fence_us = 500000    # budget override: 4 replicas, a data box and the clients share this box's 2 cores"
        );
    } else {
        let _ = writeln!(
            c,
            "self_fence_us = 50000    # budget override: voter doubles share this box's 2 cores"
        );
    }
    if ref_cores.is_none() {
        let _ = writeln!(
            c,
            "hb_us = 1000    # budget override of REP_HB_US (50): fewer idle frames on 2 shared cores"
        );
    }
    let seq_rel = key("seq")?;
    let _ = writeln!(c, "seq_key_file = {}", toml_str(&seq_rel));
    let hex = |b: &[u8]| b.iter().map(|x| format!("{x:02x}")).collect::<String>();
    let public = |rel: &str| -> std::io::Result<String> {
        let seed = read_seed(&dir.join(rel))
            .map_err(|x| std::io::Error::new(std::io::ErrorKind::InvalidData, x))?;
        Ok(hex(SigningKey::from_bytes(seed.expose())
            .verifying_key()
            .as_bytes()))
    };
    let _ = writeln!(
        c,
        "seq_pub = {}    # the sequencer's public key: what replicas and data boxes check",
        toml_str(&public(&seq_rel)?)
    );
    if home {
        let _ = writeln!(
            c,
            "path_port = {}    # path A on 239.255.75.1 at this port, B on 239.255.75.2 at +1",
            base_port + DEV_PATHS
        );
        let rels: Vec<String> = (0..4u16)
            .map(|i| key(&format!("voter-{i}")))
            .collect::<std::io::Result<_>>()?;
        let _ = writeln!(
            c,
            "membership = \"membership.bin\"    # REP_Membership (07 §13.1), certified by its voters; every role checks it against this file"
        );
        let seed_of = |rel: &str| -> std::io::Result<SigningKey> {
            let seed = read_seed(&dir.join(rel))
                .map_err(|x| std::io::Error::new(std::io::ErrorKind::InvalidData, x))?;
            Ok(SigningKey::from_bytes(seed.expose()))
        };
        let voter_keys: Vec<SigningKey> = rels
            .iter()
            .map(|r| seed_of(r))
            .collect::<std::io::Result<_>>()?;
        let m = dev_membership(&voter_keys, &seed_of(&seq_rel)?, base_port, n_data, addrs);
        let mut mb = Vec::new();
        m.encode(&mut mb)
            .map_err(|x| std::io::Error::new(std::io::ErrorKind::InvalidData, format!("{x:?}")))?;
        std::fs::write(dir.join("membership.bin"), mb)?;
        for i in 0..4u16 {
            let rel = rels[i as usize].clone();
            let _ = writeln!(
                c,
                "\n[voter.{i}]    # its secret seed: {rel} (the replica's own)"
            );
            let (ip, paths) = addrs.voters[i as usize];
            let _ = writeln!(c, "ctrl_addr = \"{ip}:{}\"", base_port + DEV_VOTER_CTRL + i);
            let _ = writeln!(c, "data_addr = \"{ip}:{}\"", base_port + DEV_VOTER_DATA + i);
            let _ = writeln!(
                c,
                "p2p_addr = \"{ip}:{}\"    # its consensus engine's authenticated p2p",
                base_port + DEV_VOTER_P2P + i
            );
            if paths != [ip; 2] {
                let _ = writeln!(
                    c,
                    "path_a_ip = \"{}\"    # where it joins path A\npath_b_ip = \"{}\"    # and path B",
                    paths[0], paths[1]
                );
            }
            let _ = writeln!(c, "vote_key = {}", toml_str(&public(&rel)?));
        }
        if base_port + (lanes as u16) < base_port + DEV_STANDBY {
            let _ = writeln!(
                c,
                "\n[standby]    # the warm standby's finality listener (07 §6.8): voters send it their finalize votes and certificates too"
            );
            let _ = writeln!(
                c,
                "ctrl_addr = \"{}:{}\"",
                addrs.box_ip,
                base_port + DEV_STANDBY
            );
            let rel = key("standby")?;
            let _ = writeln!(
                c,
                "link_key = {}    # its identity for the member envelope; secret: {rel}",
                toml_str(&public(&rel)?)
            );
        }
        for d in 0..n_data {
            let port = dev_databox_port(base_port, d);
            let _ = writeln!(c, "\n[databox.{d}]");
            let _ = writeln!(
                c,
                "client_addr = \"{}:{port}\"",
                addrs.databoxes[d as usize]
            );
            let _ = writeln!(
                c,
                "dest_base = {}    # its socket for voter i: dest_base + i",
                port + 1
            );
            let rel = key(&format!("databox-{d}"))?;
            let _ = writeln!(
                c,
                "link_key = {}    # its identity for the member envelope; secret: {rel}",
                toml_str(&public(&rel)?)
            );
        }
    }
    for l in 0..lanes {
        for k in 0..per_lane {
            let session = 1 + l as u32 * 10_000 + k as u32;
            let account = 1_000_000 + l as u32 * 10_000 + (k / 2) as u32;
            if k % 2 == 0 {
                let _ = writeln!(c, "\n[account.{account}]");
                let _ = writeln!(
                    c,
                    "max_order_qty = 1000\nmax_open_orders = 65536\nmax_exposure = 1000000000"
                );
            }
            let _ = writeln!(c, "\n[session.{session}]");
            let _ = writeln!(
                c,
                "account = {account}\nlane = {l}\nslot = {k}\ntx = {}",
                l % 3
            );
            let _ = writeln!(
                c,
                "key_file = {}",
                toml_str(&key(&format!("session-{session}"))?)
            );
            if n_data > 1 {
                // Where the load generator binds: a backup data box relays 07 §5.7's
                // DataRedirect here for a session it never had a copy from.
                let _ = writeln!(
                    c,
                    "client_addr = \"{}:{}\"    # the session's bound address (07 §5.7)",
                    addrs.load_ip,
                    base_port + DEV_LOAD_CLIENT
                );
            }
        }
    }
    let p = dir.join("home.toml");
    std::fs::write(&p, c)?;
    Ok(p)
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
