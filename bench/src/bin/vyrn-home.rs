//! `vyrn-home`: the sequencer box's tiles (lanes, cut, BBO, stream-A, stream-B, TX) on one thread
//! with the exchange client library driving them from the open-loop load generator, on the
//! wall clock. Every second: the load generator's progress line and the box's own counters; at
//! the end: request → ack and request → fill percentiles, and a check that the replica decoder of
//! `wire` decodes every frame the box wrote.
//!
//! Four `VoterDouble`s (test doubles for voting replicas: decode, check each HEADER, RepAck,
//! finalize vote) feed the box's control tile, so the clients get `Durable` and `Final`
//! watermarks and the run reports fill → durable and fill → final too. What it is not yet
//! (issue 4): the box's ports (clients and replication paths over UDP), real replicas and
//! Simplex.
//!
//! Usage: `vyrn-home [--config FILE] [--udp] [--secs N] [--rate MSGS_PER_S] [--seed N]`
//! `--serve`: the box and its voter doubles only, on their UDP ports, for `--secs` (drive it
//! with `vyrn-load`).
//! `--udp`: clients, box and voters talk over loopback UDP — client packets to the box's client
//! port, responses back, frames on two replication paths (loopback multicast), and the voter
//! doubles' RepAcks, NACKs and finality certificates (Q Ed25519 signatures) to the box's control
//! port.
//! `vyrn-home --gen-dev-config DIR [--lanes N] [--sessions-per-lane N]` writes a dev home's
//! config and fresh keys (0600) into DIR. Without `--config`: a built-in test home
//! (`--lanes`, `--sessions-per-lane`).

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::process::ExitCode;
use std::time::Instant;
use vyrn_client::loadgen::{sessions_for, LoadConfig, LoadGen};
use vyrn_client::Driver;
use vyrn_client::Session;
use vyrn_engine::EngineConfig;
use vyrn_nic::udp::{UdpConfig, UdpPort};
use vyrn_nic::{Port, RxBatch};
use vyrn_seq::doubles::{VoterNet, VoterThread};
use vyrn_seq::net::{BoxNet, PathsRx};
use vyrn_seq::{SeqConfig, SeqHome, Tile, VoterDouble, WireEvent};
use vyrn_wire::decoder::{BlockRoots, DecState, Pos, Sink};
use vyrn_wire::header::BlockHeader;

/// Checks each HEADER against the block the decoder recomputed (order_root) and the
/// sequencer's key (seq_sig), as a replica does before voting.
struct HeaderCheck {
    key: ed25519_dalek::VerifyingKey,
    roots: std::collections::HashMap<u64, [u8; 32]>,
    ok: u64,
    bad_root: u64,
    bad_sig: u64,
}

impl Sink for HeaderCheck {
    fn block(&mut self, b: &BlockRoots) {
        self.roots.insert(b.height, b.order_root);
    }
    fn header(&mut self, _: Pos, h: &BlockHeader) {
        if self.roots.remove(&h.height) != Some(h.order_root) {
            self.bad_root += 1;
        } else if !h.verify(&self.key) {
            self.bad_sig += 1;
        } else {
            self.ok += 1;
        }
    }
}

/// The UDP mode's sockets. The voter doubles run on their own thread (they stand for other
/// boxes): `voter_side` is handed to it at start.
struct Udp {
    voter_side: Option<(VoterNet, PathsRx)>,
    voter_thread: Option<VoterThread>,
    net: BoxNet,
    client: Option<UdpPort>,
    sink: UdpPort,
    sink_rx: RxBatch,
}

/// What the box wrote so far, and the replica decoder that reads it.
struct Tally {
    frames: u64,
    frame_bytes: u64,
    resps: u64,
    decode_errors: u64,
    dec: DecState,
    hdr: HeaderCheck,
    voters: Vec<VoterDouble>,
    notices: u64,
    nacks: u64,
    resent: u64,
}

impl Tally {
    /// The voters' RepAcks, finalize votes and NACKs from what they decoded so far.
    fn report(&mut self, home: &mut SeqHome, now: u64) {
        for (i, v) in self.voters.iter_mut().enumerate() {
            if let Some(a) = v.ack() {
                home.on_ack(i, a, now);
            }
            for h in v.take_votes() {
                home.on_vote(i, h);
            }
            for (s, from, to) in v.holes() {
                self.nacks += 1;
                self.resent += home.on_nack(s, from, to, now).resent;
            }
        }
    }

    /// Take the box's wire log: frames to the decoder, responses to their sessions.
    fn drain(
        &mut self,
        home: &mut SeqHome,
        now: u64,
        sessions: &mut [Session],
        index: &std::collections::HashMap<u32, usize>,
    ) {
        self.report(home, now);
        for ev in home.drain_wire() {
            match ev {
                WireEvent::Frame { bytes, .. } => {
                    self.frames += 1;
                    self.frame_bytes += bytes.len() as u64;
                    if self.dec.on_frame(&bytes, now, &mut self.hdr).is_err() {
                        self.decode_errors += 1;
                    }
                    for v in self.voters.iter_mut() {
                        v.on_frame(&bytes, now);
                    }
                }
                WireEvent::Notice { session, bytes } => {
                    self.notices += 1;
                    if let Some(&i) = index.get(&session) {
                        sessions[i].handle_packet(now, &bytes);
                    }
                }
                WireEvent::Resp { session, bytes, .. } => {
                    self.resps += 1;
                    if let Some(&i) = index.get(&session) {
                        sessions[i].handle_packet(now, &bytes);
                    }
                }
            }
        }
    }
}

struct Opts {
    secs: u64,
    rate: u64,
    lanes: u8,
    per_lane: u16,
    seed: u64,
    config: Option<std::path::PathBuf>,
    gen: Option<std::path::PathBuf>,
    udp: bool,
    serve: bool,
}

fn opts() -> Result<Opts, String> {
    let mut o = Opts {
        secs: 5,
        rate: 10_000,
        lanes: 4,
        per_lane: 8,
        seed: 1,
        config: None,
        gen: None,
        udp: false,
        serve: false,
    };
    let mut a = std::env::args().skip(1);
    while let Some(k) = a.next() {
        let mut v = || -> Result<u64, String> {
            a.next()
                .ok_or(format!("{k} needs a value"))?
                .parse()
                .map_err(|e| format!("{k}: {e}"))
        };
        match k.as_str() {
            "--secs" => o.secs = v()?,
            "--rate" => o.rate = v()?,
            "--lanes" => o.lanes = v()?.clamp(2, 64) as u8,
            "--sessions-per-lane" => o.per_lane = v()?.clamp(1, 4096) as u16,
            "--seed" => o.seed = v()?,
            "--udp" => o.udp = true,
            "--serve" => {
                o.udp = true;
                o.serve = true
            }
            "--config" => o.config = Some(a.next().ok_or("--config needs a file")?.into()),
            "--gen-dev-config" => {
                o.gen = Some(a.next().ok_or("--gen-dev-config needs a folder")?.into())
            }
            "-h" | "--help" => return Err(String::new()),
            _ => return Err(format!("unknown argument {k}")),
        }
    }
    Ok(o)
}

fn main() -> ExitCode {
    let o = match opts() {
        Ok(o) => o,
        Err(e) => {
            if !e.is_empty() {
                eprintln!("vyrn-home: {e}");
            }
            eprintln!("usage: vyrn-home [--config FILE] [--secs N] [--rate MSGS_PER_S] [--seed N]");
            eprintln!("       vyrn-home --gen-dev-config DIR [--lanes N] [--sessions-per-lane N]");
            return ExitCode::from(2);
        }
    };
    if let Some(dir) = &o.gen {
        return match vyrn_seq::boxcfg::write_dev_config(dir, o.lanes, o.per_lane, 47_400) {
            Ok(p) => {
                println!(
                    "wrote {} (keys in {}, mode 0600)",
                    p.display(),
                    dir.join("keys").display()
                );
                ExitCode::SUCCESS
            }
            Err(err) => {
                eprintln!("vyrn-home: {}: {err}", dir.display());
                ExitCode::from(2)
            }
        };
    }
    let mut client_port = 0u16;
    let mut ctrl_port = 0u16;
    let mut self_fence_us = None;
    let seq_cfg = match &o.config {
        Some(path) => {
            let c = match vyrn_seq::boxcfg::BoxConfig::load(path) {
                Ok(c) => c,
                Err(errs) => {
                    for e in errs {
                        eprintln!("vyrn-home: config: {e}");
                    }
                    return ExitCode::from(2);
                }
            };
            let problems = vyrn_seq::boxcfg::startup_checks(&c);
            if !problems.is_empty() {
                for p in problems {
                    eprintln!("vyrn-home: startup check: {p}");
                }
                return ExitCode::from(2);
            }
            println!(
                "config {}: profile {:?}, {} lanes, {} sessions, {} accounts, core map {:?}; startup checks passed",
                path.display(),
                c.profile,
                c.engine.layout.n_lanes,
                c.engine.sessions.len(),
                c.engine.accounts.len(),
                c.core_map
            );
            client_port = c.client_port;
            ctrl_port = c.ctrl_port;
            self_fence_us = c.self_fence_us;
            c.seq_config()
        }
        None => {
            let mut e = EngineConfig::test_home(o.lanes, o.per_lane);
            for a in e.accounts.iter_mut() {
                a.max_order_qty = 1_000;
                a.max_open_orders = 1 << 16;
                a.max_exposure = 1 << 40;
            }
            e.book_cfg.max_orders = 1 << 20;
            e.lane_max_orders = 1 << 16;
            e.hot_ring_bytes = 4 << 20;
            SeqConfig {
                engine: e,
                epoch: 1,
                block_ns: vyrn_wire::consts::BLOCK_NS,
                // A fixed development key; a real box loads its key file (0600) once.
                seq_key: *blake3::hash(b"vyrn-home dev seq key").as_bytes(),
                voters: 4,
                rtx_ring_bytes: 8 << 20,
            }
        }
    };
    let e = seq_cfg.engine.clone();
    if let Err(err) = e.validate() {
        eprintln!("vyrn-home: config: {err}");
        return ExitCode::from(2);
    }
    // UDP mode: the box on its client port and two replication paths (loopback multicast), the
    // clients on their own socket, copy 2 to a data-tier stand-in socket.
    let mut udp = if o.udp {
        let open = || -> Result<Udp, vyrn_nic::NicError> {
            let (net, paths) = BoxNet::open(
                SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), client_port),
                SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), ctrl_port),
                1,
            )?;
            let mut net = net;
            let voter_net = VoterNet::open(4, net.ctrl_addr()?, b"vyrn-home dev voter ")?;
            for (addr, i, key) in voter_net.members() {
                net.register_voter(addr, i, key);
            }
            Ok(Udp {
                voter_side: Some((voter_net, paths)),
                voter_thread: None,
                net,
                client: Some(UdpPort::open(&{
                    let mut c = UdpConfig::loopback().with_batch(64);
                    c.recv_buffer = Some(8 << 20);
                    c
                })?),
                sink: UdpPort::open(&UdpConfig::loopback().with_batch(64))?,
                sink_rx: RxBatch::new(64, 512),
            })
        };
        match open() {
            Ok(u) => Some(u),
            Err(err) => {
                eprintln!("vyrn-home: opening the UDP ports: {err}");
                return ExitCode::from(2);
            }
        }
    } else {
        None
    };
    let (seq_addr, data_addr) = match &udp {
        Some(u) => (
            u.net.client_addr().expect("bound"),
            u.sink.local_addr().expect("bound"),
        ),
        None => (
            SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 7400),
            SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 7402),
        ),
    };
    // The whole home shares one thread of a shared VM here: answers can take milliseconds under
    // load, and the library's 5 ms resend timers would turn every stall into a storm of
    // duplicates and hole-driven resends (each logged and answered, 07 §9.5). 50 ms keeps resends
    // for real loss. `--serve`: no clients here (`vyrn-load` drives the box from outside).
    let keys = e.sessions.iter().map(|s| (s.session, s.k_seq, s.k_out));
    let mut sessions: Vec<Session> = if o.serve {
        Vec::new()
    } else {
        match sessions_for(e.book, keys, seq_addr, data_addr, 50_000_000) {
            Ok(v) => v,
            Err(err) => {
                eprintln!("vyrn-home: sessions: {err:?}");
                return ExitCode::from(2);
            }
        }
    };
    let index: std::collections::HashMap<u32, usize> = sessions
        .iter()
        .enumerate()
        .map(|(i, s)| (s.id(), i))
        .collect();
    let mut driver = udp
        .as_mut()
        .and_then(|u| u.client.take())
        .map(|p| Driver::new(p, &sessions));
    if let Some(u) = &udp {
        println!(
            "udp: box client port {seq_addr}, replication paths over {}, clients and copy-2 stand-in on loopback",
            u.voter_side.as_ref().map_or("?", |v| v.1.how)
        );
    }
    let mut home = SeqHome::new(seq_cfg);
    if let Some(us) = self_fence_us {
        home.set_self_fence_us(us);
        println!("self-fence window {us} µs (config override of REP_SELF_FENCE_US = 250)");
    }
    let mut tally = Tally {
        frames: 0,
        frame_bytes: 0,
        resps: 0,
        decode_errors: 0,
        dec: DecState::new(e.layout).expect("layout"),
        hdr: HeaderCheck {
            key: home.seq_public(),
            roots: Default::default(),
            ok: 0,
            bad_root: 0,
            bad_sig: 0,
        },
        voters: (0..4)
            .map(|_| VoterDouble::new(e.layout, home.seq_public()))
            .collect(),
        notices: 0,
        nacks: 0,
        resent: 0,
    };
    let mut load = LoadGen::new(
        LoadConfig {
            msgs_per_s: o.rate,
            seed: o.seed,
            start_ns: 1_000_000,
            ..LoadConfig::default()
        },
        sessions.len().max(1), // --serve: a generator that never submits
    );
    println!(
        "vyrn-home: {} lanes, {} sessions, {} msgs/s open loop for {} s, box tiles on one thread",
        e.layout.n_lanes,
        e.sessions.len(),
        o.rate,
        o.secs
    );
    let tiles = home.tiles();
    let t0 = Instant::now();
    if let Some(u) = udp.as_mut() {
        if let Some((net, paths)) = u.voter_side.take() {
            let voters = std::mem::take(&mut tally.voters);
            u.voter_thread = Some(VoterThread::start(voters, net, paths, t0));
        }
    }
    let end = o.secs * 1_000_000_000 + 1_000_000;
    let mut copy2 = 0u64;
    let mut next_report = 1_000_000_000 + 1_000_000;
    // UDP: packets and frames in flight when the load stops still get their answers.
    let grace = if udp.is_some() { 200_000_000 } else { 0 };
    loop {
        let now = t0.elapsed().as_nanos() as u64 + 1_000_000;
        if now >= end + grace && home.rx_backlog() == 0 {
            break;
        }
        if now < end && !o.serve {
            let _ = load.submit_due(now, &mut sessions);
        }
        if let (Some(u), Some(d)) = (udp.as_mut(), driver.as_mut()) {
            let _ = d.pump(&mut sessions, now);
            while let Ok(n) = u.sink.recv_batch(&mut u.sink_rx) {
                if n == 0 {
                    break;
                }
                copy2 += n as u64;
            }
            let _ = u.net.recv(&mut home, now);
        }
        for s in sessions.iter_mut().filter(|_| udp.is_none()) {
            s.poll(now);
            let n = s.transmits_len();
            for t in s.transmits() {
                if t.dest == seq_addr {
                    home.receive(now, t.bytes.to_vec());
                } else {
                    copy2 += 1; // copy 2 for the data tier (not in this process yet)
                }
            }
            s.consume_transmits(n);
        }
        for &t in &tiles {
            if t == Tile::Control {
                // The voters read what the box wrote and ack it just before control looks at
                // their acks: on one thread, acks are only as fresh as this loop is fast.
                if let Some(u) = udp.as_mut() {
                    let _ = u.net.recv_ctrl(&mut home, now);
                } else {
                    tally.drain(&mut home, now, &mut sessions, &index);
                }
            }
            home.poll(t, now);
        }
        match udp.as_mut() {
            Some(u) => u.net.send(&mut home),
            None => tally.drain(&mut home, now, &mut sessions, &index),
        }
        load.drain_events(now, &mut sessions);
        if now >= next_report {
            next_report += 1_000_000_000;
            if let Some(line) = load.progress(now, &sessions) {
                println!("{line}");
            }
            let (resps, hdr_ok, dec_err) = match &udp {
                Some(u) => {
                    let v = u
                        .voter_thread
                        .as_ref()
                        .and_then(|t| t.view.lock().ok().map(|g| *g))
                        .unwrap_or_default();
                    tally.frames = v.frames;
                    tally.frame_bytes = v.frame_bytes;
                    (u.net.counters().responses, v.headers_ok, v.faults.0)
                }
                None => (tally.resps, tally.hdr.ok, tally.decode_errors),
            };
            println!(
                "  box: steps {}  frames {} ({} KiB received, both paths)  responses {}  decoder errors {}  headers ok {} (order_root bad {}, seq_sig bad {})",
                home.bbo().done(),
                tally.frames,
                tally.frame_bytes / 1024,
                resps,
                dec_err,
                hdr_ok,
                tally.hdr.bad_root,
                tally.hdr.bad_sig + tally.voters.first().map_or(0, |v| v.faults().1)
            );
        }
    }
    // Let the box drain what is in flight.
    let now = t0.elapsed().as_nanos() as u64 + 1_000_000;
    home.settle(now + 10_000_000, 100_000);
    match (udp.as_mut(), driver.as_mut()) {
        (Some(u), Some(d)) => {
            u.net.send(&mut home);
            for _ in 0..200 {
                let _ = d.pump(&mut sessions, now);
                let _ = u.net.recv_ctrl(&mut home, now);
                std::thread::sleep(std::time::Duration::from_micros(100));
            }
            if let Some(t) = u.voter_thread.take() {
                t.stop.store(true, std::sync::atomic::Ordering::Relaxed);
                let v = *t.view.lock().expect("voter view");
                tally.frames = v.frames;
                tally.frame_bytes = v.frame_bytes;
                if let Ok(voters) = t.handle.join() {
                    tally.voters = voters;
                }
            }
        }
        _ => tally.drain(&mut home, now, &mut sessions, &index),
    }
    load.drain_events(now, &mut sessions);
    println!("--- summary");
    if !o.serve {
        for line in load.summary() {
            println!("{line}");
        }
    }
    // UDP mode: the operator's view is voter 0's (it took the frames off the paths).
    let c = if udp.is_some() {
        tally.hdr.ok = tally.voters[0].headers_ok();
        tally.decode_errors = tally.voters[0].faults().0;
        tally.voters[0].decoder_counters()
    } else {
        tally.dec.counters()
    };
    if let Some(u) = &udp {
        let n = u.net.counters();
        println!(
            "udp: client packets in {}, responses/notices out {} (no address yet {}), frames written to both paths {} (refused {}); control port: RepAcks {}, NACKs {}, finality certs {} (refused {}), NackTooOld {}",
            n.rx_client,
            n.responses,
            n.no_addr,
            n.frames,
            n.frame_errors,
            n.ctrl[0],
            n.ctrl[1],
            n.ctrl[2],
            n.ctrl_bad,
            n.too_old
        );
    }
    let (frames, frame_bytes, resps, decode_errors) = (
        tally.frames,
        tally.frame_bytes,
        udp.as_ref()
            .map_or(tally.resps, |u| u.net.counters().responses),
        tally.decode_errors,
    );
    println!(
        "box: {} steps, {} frames ({:.1} MiB), {} responses; decoder: {} frames, {} records, {} steps, {} hashes, {} errors; copy 2 packets for the data tier: {}",
        home.bbo().done(),
        frames,
        frame_bytes as f64 / (1 << 20) as f64,
        resps,
        c.frames,
        c.pkts,
        c.steps,
        c.hashes,
        decode_errors,
        copy2
    );
    let h = &tally.hdr;
    println!(
        "blocks: {} headers checked against the decoded order_root and seq_sig: ok {}, order_root bad {}, seq_sig bad {}",
        c.blocks, h.ok, h.bad_root, h.bad_sig
    );
    let (durable, fin, cc) = home.watermarks();
    println!(
        "control: durable step {durable}, final height {fin} of {} closed; watermark notices (durable {}, final {}); finality-gate halts {}, resumes {}; seq_fenced {}",
        home.closed_height(),
        cc.durable_notices,
        cc.final_notices,
        cc.gate_halts,
        cc.gate_resumes,
        home.sh.fenced
    );
    if decode_errors > 0 || c.steps != home.bbo().done() || h.bad_root + h.bad_sig > 0 || h.ok == 0
    {
        eprintln!("vyrn-home: the decoder does not agree with the box");
        return ExitCode::from(1);
    }
    ExitCode::SUCCESS
}
