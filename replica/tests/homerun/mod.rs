//! What the whole-home tests share: the sequencer box on its sockets with the home's
//! membership, and the client library's open-loop load against it.
#![allow(dead_code)] // each test file uses its own part

use std::net::SocketAddr;

use vyrn_client::loadgen::run::{self, RunClock};
use vyrn_client::loadgen::{sessions_for, LoadConfig, LoadCounts, LoadGen};
use vyrn_nic::udp::{UdpConfig, UdpPort};
use vyrn_seq::boxcfg::{BoxConfig, HomeConfig};
use vyrn_seq::ports::{CoreMap, NetBox, RunningBox};
use vyrn_seq::runner::Clock;

/// The box of `cfg`, its voters the file's membership (no doubles), on two threads; and the
/// address clients send to.
pub fn start_box(cfg: &BoxConfig) -> (RunningBox, SocketAddr) {
    let mut net = NetBox::open(cfg, false).expect("box sockets");
    for m in &cfg.voters_members {
        net.register_voter(m.ctrl_addr, m.index, m.vote_key);
    }
    let seq = net.client_addrs()[0];
    let map = CoreMap::Shared {
        threads: 2,
        cores: vec![],
    };
    let (running, _paths) = net.start(cfg, &map, Clock::new()).expect("box starts");
    (running, seq)
}

/// Every session of the home at `rate` msgs/s open loop for `secs`, copy 1 to `seq`, copy 2 to
/// data box 0, then `drain_ms` for answers, durable and final still in flight.
pub fn load(
    home: &HomeConfig,
    seq: SocketAddr,
    rate: u64,
    secs: u64,
    drain_ms: u64,
    seed: u64,
) -> LoadCounts {
    load_from(home, seq, rate, secs, drain_ms, seed, 0)
}

/// [`load`] on the home's sessions after the first `skip` (left to another client).
pub fn load_from(
    home: &HomeConfig,
    seq: SocketAddr,
    rate: u64,
    secs: u64,
    drain_ms: u64,
    seed: u64,
    skip: usize,
) -> LoadCounts {
    let mut c = UdpConfig::loopback().with_batch(64);
    c.recv_buffer = Some(8 << 20);
    let port = UdpPort::open(&c).expect("client socket");
    let e = &home.engine;
    let keys = e
        .sessions
        .iter()
        .skip(skip)
        .map(|s| (s.session, s.k_seq, s.k_out));
    let data = home.databoxes[0].client_addr;
    let mut sessions = sessions_for(e.book, keys, seq, data, 50_000_000).expect("sessions");
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
    load.counts
}
