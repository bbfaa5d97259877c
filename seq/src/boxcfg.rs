//! The box's config file and its startup checks (issue 4 item 6; missing-chapters §0 profiles,
//! §2 sessions and keys, §5 secret store).
//!
//! Format: `#` comments, `[section]` headers, `key = value` lines. Sections: one `[box]`, one
//! `[account ID]` per account, one `[session ID]` per session. Keys live in their own files
//! (hex, one line, mode 0600): `seq_key_file` (the 32-byte Ed25519 seed) and each session's
//! `key_file` (`K_seq ‖ K_out`, 32 bytes). Example: `deploy/dev.conf`.
//!
//! Every problem is a typed [`CfgError`] naming the file and line, so an operator sees all of
//! them at once ([`BoxConfig::load`] collects them); [`startup_checks`] then looks at the
//! machine: cores named by the core map exist, the UDP ports are free, key files are private.

use crate::shm::SeqConfig;
use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use vyrn_engine::{AccountCfg, BookConfig, EngineConfig, SessionCfg};
use vyrn_wire::layout::Layout;

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

/// The box's configuration, as loaded.
#[derive(Debug, Clone)]
pub struct BoxConfig {
    /// Profile.
    pub profile: Profile,
    /// The engine's part (book, lanes, sessions with keys, accounts, deadlines).
    pub engine: EngineConfig,
    /// Epoch.
    pub epoch: u32,
    /// Block period, ns.
    pub block_ns: u64,
    /// Voters.
    pub voters: usize,
    /// The sequencer key seed (from `seq_key_file`).
    pub seq_key: [u8; 32],
    /// Where the seq key came from.
    pub seq_key_file: PathBuf,
    /// Session key files, by session.
    pub session_key_files: BTreeMap<u32, PathBuf>,
    /// The box's client UDP port (all lanes today; `ref` will give lane l `client_port + l`,
    /// the flow filter of 07 §9.5, which is why the startup checks keep those ports free).
    pub client_port: u16,
    /// Control UDP port (RepAcks, NACKs, votes).
    pub ctrl_port: u16,
    /// Cores for the tiles (`dev`: shared; `ref`: one per tile, in tile order).
    pub core_map: Vec<usize>,
    /// Frame ring bytes per stream core.
    pub rtx_ring_bytes: usize,
    /// Self-fence window override, µs (REP_SELF_FENCE_US is a budget; 250 when unset).
    pub self_fence_us: Option<u64>,
}

impl BoxConfig {
    /// The box's `SeqConfig`.
    pub fn seq_config(&self) -> SeqConfig {
        SeqConfig {
            engine: self.engine.clone(),
            epoch: self.epoch,
            block_ns: self.block_ns,
            seq_key: self.seq_key,
            voters: self.voters,
            rtx_ring_bytes: self.rtx_ring_bytes,
        }
    }

    /// Load and validate `path`. Returns every problem found, not just the first.
    pub fn load(path: &Path) -> Result<BoxConfig, Vec<CfgError>> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            vec![CfgError {
                file: path.to_path_buf(),
                line: 0,
                what: format!("cannot read: {e}"),
            }]
        })?;
        let base = path.parent().unwrap_or(Path::new("."));
        parse(path, base, &text)
    }
}

type Section = (String, usize, Vec<(String, String, usize)>);

fn sections(file: &Path, text: &str, errs: &mut Vec<CfgError>) -> Vec<Section> {
    let mut out: Vec<Section> = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        let l = raw.split('#').next().unwrap_or("").trim();
        if l.is_empty() {
            continue;
        }
        if let Some(h) = l.strip_prefix('[') {
            match h.strip_suffix(']') {
                Some(name) => out.push((name.trim().to_string(), line, Vec::new())),
                None => errs.push(err(file, line, "a section header needs a closing ]")),
            }
            continue;
        }
        let Some((k, v)) = l.split_once('=') else {
            errs.push(err(file, line, "expected key = value"));
            continue;
        };
        match out.last_mut() {
            Some(s) => s.2.push((k.trim().to_string(), v.trim().to_string(), line)),
            None => errs.push(err(file, line, "a key before any [section]")),
        }
    }
    out
}

fn err(file: &Path, line: usize, what: impl Into<String>) -> CfgError {
    CfgError {
        file: file.to_path_buf(),
        line,
        what: what.into(),
    }
}

struct Keys<'a> {
    file: &'a Path,
    section: &'a str,
    line: usize,
    kv: BTreeMap<&'a str, (&'a str, usize)>,
}

impl<'a> Keys<'a> {
    fn new(file: &'a Path, s: &'a Section, errs: &mut Vec<CfgError>) -> Self {
        let mut kv = BTreeMap::new();
        for (k, v, line) in &s.2 {
            if kv.insert(k.as_str(), (v.as_str(), *line)).is_some() {
                errs.push(err(file, *line, format!("[{}] sets {k} twice", s.0)));
            }
        }
        Keys {
            file,
            section: &s.0,
            line: s.1,
            kv,
        }
    }

    fn get<T: std::str::FromStr>(&mut self, k: &str, errs: &mut Vec<CfgError>) -> Option<T> {
        match self.kv.remove(k) {
            Some((v, line)) => match v.parse() {
                Ok(x) => Some(x),
                Err(_) => {
                    errs.push(err(self.file, line, format!("{k} = {v:?} does not parse")));
                    None
                }
            },
            None => {
                errs.push(err(
                    self.file,
                    self.line,
                    format!("[{}] needs {k}", self.section),
                ));
                None
            }
        }
    }

    fn opt<T: std::str::FromStr>(&mut self, k: &str, errs: &mut Vec<CfgError>) -> Option<T> {
        if self.kv.contains_key(k) {
            self.get(k, errs)
        } else {
            None
        }
    }

    fn finish(self, errs: &mut Vec<CfgError>) {
        for (k, (_, line)) in self.kv {
            errs.push(err(
                self.file,
                line,
                format!("[{}] has no key {k}", self.section),
            ));
        }
    }
}

/// Read a hex key file of exactly `N` bytes.
pub fn read_key<const N: usize>(path: &Path) -> Result<[u8; N], String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let t = text.trim();
    if t.len() != 2 * N || !t.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(format!(
            "{}: expected {} hex digits ({} bytes)",
            path.display(),
            2 * N,
            N
        ));
    }
    let mut k = [0u8; N];
    for (i, b) in k.iter_mut().enumerate() {
        *b = u8::from_str_radix(&t[2 * i..2 * i + 2], 16).map_err(|e| e.to_string())?;
    }
    Ok(k)
}

fn parse(file: &Path, base: &Path, text: &str) -> Result<BoxConfig, Vec<CfgError>> {
    let mut errs = Vec::new();
    let secs = sections(file, text, &mut errs);
    let boxes: Vec<&Section> = secs.iter().filter(|s| s.0 == "box").collect();
    if boxes.len() != 1 {
        errs.push(err(
            file,
            0,
            format!("needs exactly one [box], has {}", boxes.len()),
        ));
        return Err(errs);
    }
    let mut b = Keys::new(file, boxes[0], &mut errs);
    let profile = match b.get::<String>("profile", &mut errs).as_deref() {
        Some("ref") => Profile::Ref,
        Some("consumer") => Profile::Consumer,
        Some("dev") => Profile::Dev,
        Some(p) => {
            errs.push(err(
                file,
                boxes[0].1,
                format!("profile {p:?}: ref, consumer or dev"),
            ));
            Profile::Dev
        }
        None => Profile::Dev,
    };
    let book: u16 = b.get("book", &mut errs).unwrap_or(1);
    let epoch: u32 = b.get("epoch", &mut errs).unwrap_or(1);
    let lanes: u8 = b.get("lanes", &mut errs).unwrap_or(2);
    let block_ns: u64 = b
        .opt("block_ns", &mut errs)
        .unwrap_or(vyrn_wire::consts::BLOCK_NS);
    let voters: usize = b.opt("voters", &mut errs).unwrap_or(4);
    let max_orders: u32 = b.opt("max_orders", &mut errs).unwrap_or(1 << 20);
    let lane_deadline_ns: Option<u64> = b.opt("lane_deadline_ns", &mut errs);
    let bbo_deadline_ns: Option<u64> = b.opt("bbo_deadline_ns", &mut errs);
    let hot_ring_bytes: usize = b.opt("hot_ring_bytes", &mut errs).unwrap_or(4 << 20);
    let rtx_ring_bytes: usize = b
        .opt("rtx_ring_bytes", &mut errs)
        .unwrap_or(vyrn_wire::consts::REP_RTX_RING_BYTES);
    let client_port: u16 = b.get("client_port", &mut errs).unwrap_or(0);
    let ctrl_port: u16 = b.get("ctrl_port", &mut errs).unwrap_or(0);
    let core_map: Vec<usize> = match b.get::<String>("core_map", &mut errs) {
        Some(v) => v
            .split(',')
            .filter_map(|c| match c.trim().parse() {
                Ok(x) => Some(x),
                Err(_) => {
                    errs.push(err(file, boxes[0].1, format!("core_map entry {c:?}")));
                    None
                }
            })
            .collect(),
        None => Vec::new(),
    };
    let seq_key_file: Option<String> = b.get("seq_key_file", &mut errs);
    let self_fence_us: Option<u64> = b.opt("self_fence_us", &mut errs);
    b.finish(&mut errs);
    if voters < 4 {
        errs.push(err(
            file,
            boxes[0].1,
            format!("voters = {voters}: BASE needs n ≥ 4 (f = 1)"),
        ));
    }
    let seq_key_file = base.join(seq_key_file.unwrap_or_default());
    let seq_key = match read_key::<32>(&seq_key_file) {
        Ok(k) => k,
        Err(e) => {
            errs.push(err(file, boxes[0].1, format!("seq_key_file: {e}")));
            [0; 32]
        }
    };
    let mut accounts = Vec::new();
    let mut sessions = Vec::new();
    let mut session_key_files = BTreeMap::new();
    for s in &secs {
        let (kind, id) = s.0.split_once(' ').unwrap_or((s.0.as_str(), ""));
        match kind {
            "box" => {}
            "account" => {
                let mut k = Keys::new(file, s, &mut errs);
                let Ok(account) = id.trim().parse::<u32>() else {
                    errs.push(err(file, s.1, format!("[account {id}]: a number")));
                    continue;
                };
                let a = AccountCfg {
                    account,
                    max_order_qty: k.get("max_order_qty", &mut errs).unwrap_or(0),
                    max_open_orders: k.get("max_open_orders", &mut errs).unwrap_or(0),
                    max_exposure: k.get("max_exposure", &mut errs).unwrap_or(0),
                };
                k.finish(&mut errs);
                accounts.push(a);
            }
            "session" => {
                let mut k = Keys::new(file, s, &mut errs);
                let Ok(session) = id.trim().parse::<u32>() else {
                    errs.push(err(file, s.1, format!("[session {id}]: a number")));
                    continue;
                };
                let account = k.get("account", &mut errs).unwrap_or(0);
                let lane = k.get("lane", &mut errs).unwrap_or(0);
                let slot = k.get("slot", &mut errs).unwrap_or(0);
                let tx = k.opt("tx", &mut errs).unwrap_or(0);
                let key_file =
                    base.join(k.get::<String>("key_file", &mut errs).unwrap_or_default());
                k.finish(&mut errs);
                let keys = match read_key::<32>(&key_file) {
                    Ok(x) => x,
                    Err(e) => {
                        errs.push(err(file, s.1, format!("[session {session}] key_file: {e}")));
                        [0; 32]
                    }
                };
                let mut k_seq = [0u8; 16];
                let mut k_out = [0u8; 16];
                k_seq.copy_from_slice(&keys[..16]);
                k_out.copy_from_slice(&keys[16..]);
                session_key_files.insert(session, key_file);
                sessions.push(SessionCfg {
                    session,
                    account,
                    lane,
                    slot,
                    k_seq,
                    k_out,
                    tx,
                });
            }
            other => errs.push(err(file, s.1, format!("unknown section [{other}]"))),
        }
    }
    let layout = match profile {
        Profile::Consumer => Layout {
            n_lanes: lanes,
            n_streams: 1,
            pool_mask: 0,
        },
        _ => Layout::two_streams(lanes),
    };
    let engine = EngineConfig {
        book,
        layout,
        book_cfg: BookConfig { max_orders },
        sessions,
        accounts,
        lane_deadline_ns,
        bbo_deadline_ns,
        hot_ring_bytes,
        lane_max_orders: 1 << 16,
    };
    if let Err(e) = engine.validate() {
        errs.push(err(file, 0, format!("engine: {e}")));
    }
    if !errs.is_empty() {
        return Err(errs);
    }
    Ok(BoxConfig {
        profile,
        engine,
        epoch,
        block_ns,
        voters,
        seq_key,
        seq_key_file,
        session_key_files,
        client_port,
        ctrl_port,
        core_map,
        rtx_ring_bytes,
        self_fence_us,
    })
}

/// Tiles a `ref` box pins one to a core, in this order: lanes, cut, BBO, stream cores, TX,
/// hasher, control, RX (the client ports), control RX (`seq::netbox`).
pub fn ref_tiles(cfg: &BoxConfig) -> usize {
    cfg.engine.layout.n_lanes as usize + 7 + cfg.engine.layout.n_streams as usize
}

/// What the machine must offer before the box starts. Every failure, not only the first.
pub fn startup_checks(cfg: &BoxConfig) -> Vec<String> {
    let mut out = Vec::new();
    // Cores.
    let cores: Vec<usize> = core_ids();
    if cfg.core_map.is_empty() {
        out.push("core_map is empty".into());
    }
    for c in &cfg.core_map {
        if !cores.contains(c) {
            out.push(format!(
                "core_map names core {c}, this machine has cores {cores:?}"
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
    // Ports.
    let lanes = cfg.engine.layout.n_lanes as u16;
    let mut ports: Vec<u16> = (0..lanes)
        .map(|l| cfg.client_port.wrapping_add(l))
        .collect();
    ports.push(cfg.ctrl_port);
    for p in ports {
        if p == 0 {
            out.push("a UDP port is 0".into());
        } else if let Err(e) = std::net::UdpSocket::bind(("0.0.0.0", p)) {
            out.push(format!("UDP port {p} is not free: {e}"));
        }
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

fn core_ids() -> Vec<usize> {
    std::thread::available_parallelism()
        .map(|n| (0..n.get()).collect())
        .unwrap_or_default()
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

/// Write a `dev` home's config and fresh random keys (mode 0600) into `dir`: `lanes` lanes,
/// `per_lane` sessions each (one account per two sessions), UDP ports from `base_port`.
/// Returns the config file's path. For development boxes only: production keys come from the
/// facility's secret store.
pub fn write_dev_config(
    dir: &Path,
    lanes: u8,
    per_lane: u16,
    base_port: u16,
) -> std::io::Result<PathBuf> {
    use std::fmt::Write as _;
    std::fs::create_dir_all(dir.join("keys"))?;
    let key = |name: &str| -> std::io::Result<String> {
        let mut b = [0u8; 32];
        use std::io::Read;
        std::fs::File::open("/dev/urandom")?.read_exact(&mut b)?;
        let rel = format!("keys/{name}.key");
        let p = dir.join(&rel);
        let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
        std::fs::write(&p, hex + "\n")?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600))?;
        }
        Ok(rel)
    };
    let cores = core_ids();
    let mut c = String::new();
    let _ = writeln!(
        c,
        "# A dev home (missing-chapters §0): tiles multiplexed on few cores."
    );
    let _ = writeln!(c, "[box]");
    let _ = writeln!(c, "profile = dev");
    let _ = writeln!(c, "book = 1\nepoch = 1\nlanes = {lanes}\nvoters = 4");
    let _ = writeln!(c, "block_ns = {}", vyrn_wire::consts::BLOCK_NS);
    let _ = writeln!(c, "client_port = {base_port}    # the box's client port");
    let _ = writeln!(c, "ctrl_port = {}", base_port.wrapping_add(lanes as u16));
    let _ = writeln!(
        c,
        "core_map = {}",
        cores
            .iter()
            .take(2)
            .map(|x| x.to_string())
            .collect::<Vec<_>>()
            .join(",")
    );
    let _ = writeln!(c, "hot_ring_bytes = {}", 4 << 20);
    let _ = writeln!(c, "rtx_ring_bytes = {}", 8 << 20);
    let _ = writeln!(
        c,
        "self_fence_us = 50000    # budget override: voter doubles share this box's 2 cores"
    );
    let _ = writeln!(c, "seq_key_file = {}", key("seq")?);
    for l in 0..lanes {
        for k in 0..per_lane {
            let session = 1 + l as u32 * 10_000 + k as u32;
            let account = 1_000_000 + l as u32 * 10_000 + (k / 2) as u32;
            if k % 2 == 0 {
                let _ = writeln!(c, "\n[account {account}]");
                let _ = writeln!(
                    c,
                    "max_order_qty = 1000\nmax_open_orders = 65536\nmax_exposure = 1000000000"
                );
            }
            let _ = writeln!(c, "\n[session {session}]");
            let _ = writeln!(
                c,
                "account = {account}\nlane = {l}\nslot = {k}\ntx = {}",
                l % 3
            );
            let _ = writeln!(c, "key_file = {}", key(&format!("session-{session}"))?);
        }
    }
    let p = dir.join("box.conf");
    std::fs::write(&p, c)?;
    Ok(p)
}
