//! One parser per table of the home file (`[box]`, `[account.ID]`, `[session.ID]`, `[voter.N]`,
//! `[databox.N]`, `[standby]`) and the checks across tables (sessions against accounts, the
//! membership's voters, the data boxes).

use super::*;

/// The sessions against each other and the accounts (what `EngineConfig::validate` checks, with
/// the line of each mistake).
pub(super) fn check_sessions(
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
pub(super) fn voter_members(
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
                    retain_blocks: v.retain_blocks,
                    retain_gib: v.retain_gib,
                });
            }
        }
        voters_members.sort_by_key(|v| v.index);
    }

    voters_members
}

/// Data boxes: indices 0..n without a hole (a session's data home is an index), every voter
/// with a `data_addr` when there are any, and the standby's replica ([`check_standby_data`]).
pub(super) fn check_databoxes(
    file: &Path,
    databoxes: &mut [(DataBoxMember, usize)],
    voters_members: &[VoterMember],
    standby: Option<&StandbyReplica>,
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
    check_standby_data(file, databoxes, voters_members, standby, voters_line, e);
}

/// A home with data boxes fans out to the standby's replica too (07 §5.1): it needs `data_addr`.
/// Its addresses are no voter's: a voter tells the standby's messages from a peer's by the
/// source address (then by the seal).
fn check_standby_data(
    file: &Path,
    databoxes: &[(DataBoxMember, usize)],
    voters: &[VoterMember],
    standby: Option<&StandbyReplica>,
    line: usize,
    e: &mut Vec<CfgError>,
) {
    let Some(r) = standby else {
        return;
    };
    if !databoxes.is_empty() && r.data_addr.is_none() {
        e.push(err(
            file,
            line,
            "the file has [databox] sections and a [standby] replica_addr, so [standby] needs data_addr",
        ));
    }
    let taken = |a: SocketAddr| {
        voters
            .iter()
            .any(|v| v.ctrl_addr == a || v.data_addr == Some(a) || v.p2p() == a)
    };
    for a in std::iter::once(r.ctrl_addr).chain(r.data_addr) {
        if taken(a) {
            e.push(err(
                file,
                line,
                format!("[standby]: {a} is also a voter's address"),
            ));
        }
    }
}

/// What `[box]` says, checked (every mistake pushed with its line), for the rest of the parse.
pub(super) struct BoxTable<'a> {
    pub(super) profile: Profile,
    pub(super) book: Option<(u64, usize)>,
    pub(super) epoch: Option<(u64, usize)>,
    pub(super) lanes_min: u64,
    pub(super) lanes: Option<u8>,
    pub(super) block_ns: u64,
    pub(super) voters: usize,
    pub(super) voters_line: usize,
    pub(super) max_orders: u32,
    pub(super) lane_deadline_ns: Option<u64>,
    pub(super) bbo_deadline_ns: Option<u64>,
    pub(super) hot_ring_bytes: usize,
    pub(super) rtx_ring_bytes: usize,
    pub(super) client_port: Option<(u64, usize)>,
    pub(super) ctrl_port: Option<(u64, usize)>,
    pub(super) box_ip: Ipv4Addr,
    pub(super) box_path_ips: [Ipv4Addr; 2],
    pub(super) core_map: Vec<usize>,
    pub(super) membership_file: Option<(&'a str, usize)>,
    pub(super) path_port: u16,
    pub(super) self_fence_us: Option<u64>,
    pub(super) hb_us: Option<u64>,
    pub(super) seq_key_path: PathBuf,
    pub(super) seq_key: Option<Seed32>,
    pub(super) seq_public: Option<VerifyingKey>,
}

/// `[box]`: the profile, book, epoch, lanes, voters, block period, rings, ports, addresses, core
/// map, the sequencer key (the seed on the box, `seq_pub` everywhere else) and the budget
/// overrides.
pub(super) fn box_table<'a>(
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
pub(super) struct Tables {
    pub(super) accounts: Vec<AccountCfg>,
    pub(super) account_lines: BTreeMap<u32, usize>,
    pub(super) sessions: Vec<SessionAt>,
    pub(super) session_key_files: BTreeMap<u32, PathBuf>,
    pub(super) session_addrs: BTreeMap<u32, SocketAddr>,
    pub(super) voter_secs: Vec<VoterAt>,
    pub(super) databoxes: Vec<(DataBoxMember, usize)>,
    pub(super) standby_ctrl: Option<SocketAddr>,
    pub(super) standby_key: Option<VerifyingKey>,
    pub(super) standby_replica: Option<StandbyReplica>,
}

/// What every table's parser needs of the file: its path (for errors), its folder (key files
/// are relative to it) and `[box] lanes` (a session's lane is checked against it).
pub(super) struct Ctx<'a> {
    pub(super) file: &'a Path,
    pub(super) base: &'a Path,
    pub(super) lanes: Option<u8>,
}

/// `[account.ID]`: one account's risk limits (07 §9.5).
pub(super) fn account_table(
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
pub(super) fn session_table(
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
pub(super) fn voter_table(
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
    // 07 §8.3: the block journal's retention ring, per drive.
    let retain_blocks = k
        .num(
            "retain_blocks",
            false,
            (1, 1_000_000_000_000),
            "blocks the block journal keeps per drive",
            e,
        )
        .map(|x| x.0);
    let retain_gib = k
        .num(
            "retain_gib",
            false,
            (1, 1_000_000),
            "GiB the block journal keeps per drive",
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
            retain_blocks,
            retain_gib,
        });
    }
}

/// `[databox.N]`: one data box of the home (07 §5.1).
pub(super) fn databox_table(
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
    // Its socket for the standby's replica (07 §5.1); default `dest_base + voters`.
    let standby_port = k
        .num("standby_port", false, (1, u16::MAX as u64), "a UDP port", e)
        .map(|x| x.0 as u16);
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
                standby_port,
            },
            s.1,
        ));
    }
}

/// `[standby]`: the warm standby's control port, where voters also send their finalize votes and
/// certificates (07 §6.8), and its identity for the member envelope.
pub(super) fn standby_table(ctx: &Ctx<'_>, s: &Section, t: &mut Tables, e: &mut Vec<CfgError>) {
    let file = ctx.file;
    let mut k = Keys::new(file, s);
    t.standby_ctrl = take_addr(&mut k, "ctrl_addr", true, file, e).map(|x| x.0);
    // The member envelope's identity (its secret: `vyrn standby --key`).
    t.standby_key = take_pub(&mut k, "link_key", true, file, e).map(|x| x.0);
    // 07 §9.5: its non-voting replica, optional (a home without one has a listener only).
    let replica = take_addr(&mut k, "replica_addr", false, file, e);
    let data_addr = take_addr(&mut k, "data_addr", false, file, e).map(|x| x.0);
    let path_a_ip = take_ip(&mut k, "path_a_ip", file, e);
    let path_b_ip = take_ip(&mut k, "path_b_ip", file, e);
    k.finish(e);
    let Some((ctrl_addr, line)) = replica else {
        if data_addr.is_some() || path_a_ip.is_some() || path_b_ip.is_some() {
            e.push(err(
                file,
                s.1,
                "[standby]: data_addr and path_a_ip/path_b_ip are its replica's: replica_addr is needed with them".to_string(),
            ));
        }
        return;
    };
    let own = match ctrl_addr.ip() {
        IpAddr::V4(a) => Some(a),
        IpAddr::V6(_) => None,
    };
    let [Some(pa), Some(pb)] = [path_a_ip, path_b_ip].map(|p| p.or(own)) else {
        e.push(err(
            file,
            line,
            "[standby]: replica_addr is IPv6, so path_a_ip and path_b_ip are needed (the paths are IPv4 multicast, 07 §3.1)".to_string(),
        ));
        return;
    };
    if Some(ctrl_addr) == t.standby_ctrl || Some(ctrl_addr) == data_addr {
        e.push(err(
            file,
            line,
            format!("[standby]: replica_addr = {ctrl_addr} is also its ctrl_addr or data_addr"),
        ));
        return;
    }
    t.standby_replica = Some(StandbyReplica {
        ctrl_addr,
        data_addr,
        path_ips: [pa, pb],
    });
}

/// A required or optional Ed25519 public key `name` (64 hex digits), refusing small-order
/// points: a `vote_key` or a `link_key` (the member envelope's identity, `vyrn_wire::msg::seal`).
pub(super) fn take_pub(
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
