//! What the file says about the machine: the tiles a `ref` box pins, the addresses the box binds,
//! and the startup checks (cores in the affinity mask, free addresses, private key files).

use super::*;

/// Tiles a `ref` box pins one to a core, in this order: lanes, cut, BBO, stream cores, TX,
/// hasher, control, RX (the client ports), control RX, cert (`seq::ports`).
pub fn ref_tiles(cfg: &BoxConfig) -> usize {
    tiles_for(cfg.engine.layout.n_lanes, cfg.engine.layout.n_streams)
}

/// Tiles of a box of `lanes` lanes and `streams` substreams: the lanes, one stream core per
/// substream, and eight more (cut, BBO, TX, hasher, control, RX, control RX, cert).
pub(super) fn tiles_for(lanes: u8, streams: u8) -> usize {
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
pub(super) fn core_ids() -> Vec<usize> {
    match core_affinity::get_core_ids() {
        Some(ids) if !ids.is_empty() => ids.into_iter().map(|c| c.id).collect(),
        _ => std::thread::available_parallelism()
            .map(|n| (0..n.get()).collect())
            .unwrap_or_default(),
    }
}
