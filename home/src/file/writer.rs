//! The writers of generated homes: a `dev` box, a whole dev home on loopback or the netns lab,
//! and a REF home on one big machine.

use super::*;

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
        Opts::default(),
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
/// A dev home's standby replica (07 §9.5): its control socket at `base_port +
/// DEV_STANDBY_REPLICA`, its data socket one above, data box `d`'s socket for it at `+ 2 + d`.
pub const DEV_STANDBY_REPLICA: u16 = 42;
/// A dev home's standby's client port once promoted (07 §9.5; its `seq_order` entry's
/// `client_addr`): `base_port + DEV_STANDBY_CLIENT`.
pub const DEV_STANDBY_CLIENT: u16 = 46;
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
    write_home(
        dir,
        lanes,
        per_lane,
        base_port,
        n_data,
        addrs,
        Opts::default(),
    )
}

/// [`write_dev_home_at`] with every secret key drawn from `key_seed` instead of
/// `/dev/urandom`: the simulator's homes (`vyrn-sim`), where one seed must give one run, byte
/// for byte. Never a production home: anyone with the seed has the keys.
pub fn write_sim_home(
    dir: &Path,
    lanes: u8,
    per_lane: u16,
    base_port: u16,
    addrs: &HomeAddrs,
    key_seed: u64,
) -> std::io::Result<PathBuf> {
    write_home(
        dir,
        lanes,
        per_lane,
        base_port,
        1,
        addrs,
        Opts {
            ref_cores: None,
            key_seed: Some(key_seed),
        },
    )
}

/// Key `name`'s 32 secret bytes: from `/dev/urandom`, or drawn from a simulator's seed.
fn key_bytes(seed: Option<u64>, name: &str) -> std::io::Result<[u8; 32]> {
    let mut b = [0u8; 32];
    match seed {
        Some(seed) => b = seeded_key(seed, name),
        None => std::io::Read::read_exact(&mut std::fs::File::open("/dev/urandom")?, &mut b)?,
    }
    Ok(b)
}

/// Key `name`'s 32 bytes drawn from `seed` (SplitMix64 over the seed and the name).
fn seeded_key(seed: u64, name: &str) -> [u8; 32] {
    let mix = |mut z: u64| {
        z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    };
    let mut h = mix(seed);
    for &b in name.as_bytes() {
        h = mix(h ^ u64::from(b));
    }
    let mut out = [0u8; 32];
    for (i, c) in out.chunks_mut(8).enumerate() {
        h = mix(h ^ i as u64);
        c.copy_from_slice(&h.to_le_bytes());
    }
    out
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
        Opts {
            ref_cores: Some(core_map),
            key_seed: None,
        },
    )
}

/// What sets a generated home apart beyond its shape: a REF home's core map, a simulated
/// home's key seed.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Opts<'a> {
    pub(super) ref_cores: Option<&'a [usize]>,
    pub(super) key_seed: Option<u64>,
}

pub(super) fn write_home(
    dir: &Path,
    lanes: u8,
    per_lane: u16,
    base_port: u16,
    n_data: u8,
    addrs: &HomeAddrs,
    opts: Opts<'_>,
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
    write_dev(dir, lanes, per_lane, base_port, Some(n_data), addrs, opts)
}

/// `s` as a TOML basic string, quoted and escaped.
pub(super) fn toml_str(s: &str) -> String {
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

/// A dev home's `[standby]`: its finality listener and its non-voting replica (07 §6.8, §9.5)
/// on the box's address; `rel` is its key file, `public` its public key.
fn standby_section(c: &mut String, addrs: &HomeAddrs, base_port: u16, rel: &str, public: &str) {
    use std::fmt::Write as _;
    let ip = addrs.box_ip;
    let _ = writeln!(
        c,
        "\n[standby]    # the warm standby (07 §6.8, §9.5): voters send it their finalize votes and certificates too"
    );
    let _ = writeln!(c, "ctrl_addr = \"{ip}:{}\"", base_port + DEV_STANDBY);
    let _ = writeln!(
        c,
        "link_key = {}    # its identity for the member envelope; secret: {rel}",
        toml_str(public)
    );
    let _ = writeln!(
        c,
        "replica_addr = \"{ip}:{}\"    # its non-voting replica (07 §9.5): NACKs to the box, retransmissions back",
        base_port + DEV_STANDBY_REPLICA
    );
    let _ = writeln!(
        c,
        "data_addr = \"{ip}:{}\"    # where the data boxes send it DATA frames",
        base_port + DEV_STANDBY_REPLICA + 1
    );
    if addrs.box_path_ips != [ip; 2] {
        let _ = writeln!(
            c,
            "path_a_ip = \"{}\"\npath_b_ip = \"{}\"",
            addrs.box_path_ips[0], addrs.box_path_ips[1]
        );
    }
}

/// The key files of a dev home's members, relative to its folder.
struct DevKeys<'a> {
    voters: &'a [String],
    seq: &'a str,
    standby: Option<&'a str>,
}

/// A dev home's `membership.bin` ([`dev_membership`]), from its members' key files.
fn write_dev_membership(
    dir: &Path,
    keys: &DevKeys<'_>,
    base_port: u16,
    n_data: u8,
    addrs: &HomeAddrs,
) -> std::io::Result<()> {
    let seed_of = |rel: &str| -> std::io::Result<SigningKey> {
        let seed = read_seed(&dir.join(rel))
            .map_err(|x| std::io::Error::new(std::io::ErrorKind::InvalidData, x))?;
        Ok(SigningKey::from_bytes(seed.expose()))
    };
    let voter_keys: Vec<SigningKey> = keys
        .voters
        .iter()
        .map(|r| seed_of(r))
        .collect::<std::io::Result<_>>()?;
    let standby = keys.standby.map(seed_of).transpose()?;
    let m = dev_membership(
        &voter_keys,
        &seed_of(keys.seq)?,
        standby.as_ref(),
        base_port,
        n_data,
        addrs,
    );
    let mut mb = Vec::new();
    m.encode(&mut mb)
        .map_err(|x| std::io::Error::new(std::io::ErrorKind::InvalidData, format!("{x:?}")))?;
    std::fs::write(dir.join("membership.bin"), mb)
}

pub(super) fn write_dev(
    dir: &Path,
    lanes: u8,
    per_lane: u16,
    base_port: u16,
    data: Option<u8>,
    addrs: &HomeAddrs,
    opts: Opts<'_>,
) -> std::io::Result<PathBuf> {
    let ref_cores = opts.ref_cores;
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
        let mut b = key_bytes(opts.key_seed, name)?;
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
    // dev: core_map[0] is the hot core (the response path spins there), the rest
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
        // 07 §9.5: the standby is in seq_order where the home has one (the `[standby]` below).
        let standby_rel = match base_port + (lanes as u16) < base_port + DEV_STANDBY {
            true => Some(key("standby")?),
            false => None,
        };
        let keys = DevKeys {
            voters: &rels,
            seq: &seq_rel,
            standby: standby_rel.as_deref(),
        };
        write_dev_membership(dir, &keys, base_port, n_data, addrs)?;
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
        if let Some(rel) = &standby_rel {
            standby_section(&mut c, addrs, base_port, rel, &public(rel)?);
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
            if base_port + (lanes as u16) < base_port + DEV_STANDBY {
                let _ = writeln!(
                    c,
                    "standby_port = {}    # its socket for the standby's replica",
                    base_port + DEV_STANDBY_REPLICA + 2 + d as u16
                );
            }
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
