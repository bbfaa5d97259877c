//! The box under failure and attack (07 §4.2, §4.8, §9.5, §14), on the production
//! tiles under the seeded scheduler (`testkit::SimBox`), with the replication paths made to fail:
//!
//! * one path refusing writes: REP_A_PATH raised, trading goes on on the other path, and the
//!   checker (which counts a frame as written only on both paths, or on one with the other
//!   down) finds no response ahead of its frame;
//! * both paths refusing: the box fences (INV-REP-6) and nothing leaves for an unwritten frame;
//! * backpressure on a path: nothing is released while a frame waits for it; it is retried at
//!   later polls; past the bound the path is declared down (the other path has the frames) or
//!   the box fences (no path has them);
//! * a forged packet (bad tag) or a replayed one naming a session never moves its address;
//! * a RepAck claiming frames the box never wrote is refused and keeps nobody alive;
//! * a tile that panics stops the box (and aborts the process in production).

use std::net::SocketAddr;
use vyrn_engine::workload::{Input, Mix, Workload};
use vyrn_engine::EngineConfig;
use vyrn_seq::runner::{self, Clock, OnPanic, Runner, Task};
use vyrn_seq::stream::WRITE_RETRY_NS;
use vyrn_seq::testkit::check::Checker;
use vyrn_seq::testkit::{PathMode, SimBox, WireEvent};
use vyrn_seq::SeqConfig;
use vyrn_wire::msg::client::{Msg, MsgType, RequestPacket, Side};

fn cfg() -> SeqConfig {
    SeqConfig {
        engine: EngineConfig::test_home(4, 4),
        epoch: 2,
        block_ns: 50_000,
        seq_key: [4; 32],
        voters: 4,
        rtx_ring_bytes: 8 << 20,
        tenure: vyrn_seq::shm::TenureId::FIRST,
    }
}

/// A box with the self-fence off (no voters here) and its checker.
fn sim(seed: u64) -> (SimBox, Checker) {
    (
        SimBox::build(cfg(), Some(1 << 40), seed),
        Checker::default(),
    )
}

/// Feed `n` workload packets at 1 µs steps, polling every tile round-robin and checking the
/// wire-order invariants after every poll; returns the clock.
fn drive(home: &mut SimBox, chk: &mut Checker, w: &mut Workload, n: usize, mut now: u64) -> u64 {
    let tiles = home.tiles();
    for _ in 0..n {
        if let Input::Packet { bytes, .. } = w.next_input() {
            home.receive(now, bytes);
        }
        now += 1_000;
        for &t in &tiles {
            home.poll(t, now);
            chk.check(home).unwrap_or_else(|e| panic!("{e}"));
        }
    }
    now
}

fn count(home: &SimBox, f: impl Fn(&WireEvent) -> bool) -> usize {
    home.log().iter().filter(|e| f(e)).count()
}

fn resps(home: &SimBox) -> usize {
    count(home, |e| matches!(e, WireEvent::Resp { .. }))
}

#[test]
fn one_path_down_raises_rep_a_path_and_trading_goes_on() {
    for path in 0..2u8 {
        let (mut home, mut chk) = sim(1);
        let e = home.config().engine.clone();
        let mut w = Workload::new(&e, 3, Mix::clean());
        let now = drive(&mut home, &mut chk, &mut w, 100, 1_000);
        let before = resps(&home);
        assert!(before > 50, "trading before the failure: {before}");
        // The path's link goes away on both substreams.
        for h in 0..2 {
            home.wire().set_path(h, path, PathMode::Failed);
        }
        drive(&mut home, &mut chk, &mut w, 200, now);
        let after = resps(&home) - before;
        assert!(
            after > 100,
            "path {path} down: trading goes on ({after} answers)"
        );
        assert!(!home.words().fenced());
        for h in 0..2usize {
            let g = &home.words().gate[h];
            let r = std::sync::atomic::Ordering::Relaxed;
            assert!(g.alarm[path as usize].load(r), "REP_A_PATH for path {path}");
            assert_eq!(g.path_down[path as usize].load(r), 1);
            assert!(!g.alarm[1 - path as usize].load(r));
        }
        assert_eq!(
            count(&home, |e| matches!(
                e,
                WireEvent::PathAlarm { down: true, .. }
            )),
            2
        );
    }
}

#[test]
fn no_path_takes_the_frame_the_box_fences_and_nothing_leaves() {
    let (mut home, mut chk) = sim(2);
    let e = home.config().engine.clone();
    let mut w = Workload::new(&e, 4, Mix::clean());
    let now = drive(&mut home, &mut chk, &mut w, 50, 1_000);
    let before = home.log().len();
    for h in 0..2 {
        for p in 0..2 {
            home.wire().set_path(h, p, PathMode::Failed);
        }
    }
    drive(&mut home, &mut chk, &mut w, 200, now);
    assert!(
        home.words().fenced(),
        "a frame no path takes fences the box"
    );
    let leaked = home.log()[before..]
        .iter()
        .filter(|e| matches!(e, WireEvent::Resp { .. } | WireEvent::Notice { .. }))
        .count();
    // Responses whose frames were already written before the failure may still be sent in the
    // poll that found the failure; none after the fence, and none whose frame is unwritten
    // (the checker ran after every poll).
    assert!(leaked < 40, "{leaked} answers after both paths failed");
    let released = [home.words().released(0), home.words().released(1)];
    let more = drive(&mut home, &mut chk, &mut w, 100, now + 300_000);
    assert_eq!(
        [home.words().released(0), home.words().released(1)],
        released,
        "nothing released after the fence"
    );
    let _ = more;
}

#[test]
fn backpressure_holds_the_release_then_the_path_is_declared_down() {
    let (mut home, mut chk) = sim(3);
    let e = home.config().engine.clone();
    let mut w = Workload::new(&e, 5, Mix::clean());
    let now = drive(&mut home, &mut chk, &mut w, 50, 1_000);
    let r0 = [home.words().released(0), home.words().released(1)];
    for h in 0..2 {
        home.wire().set_path(h, 1, PathMode::Busy);
    }
    // Within the bound: steps pile up, nothing past the last fully written frame is released.
    let tiles = home.tiles();
    let mut t = now;
    let a0 = resps(&home);
    for _ in 0..20 {
        if let Input::Packet { bytes, .. } = w.next_input() {
            home.receive(t, bytes);
        }
        t += 1_000;
        for &x in &tiles {
            home.poll(x, t);
            chk.check(&home).unwrap_or_else(|e| panic!("{e}"));
        }
    }
    assert!(t - now < WRITE_RETRY_NS);
    assert_eq!(
        [home.words().released(0), home.words().released(1)],
        r0,
        "a frame waiting for path B releases nothing"
    );
    assert!(
        home.words().step_done() > r0[0].max(r0[1]),
        "steps ran meanwhile"
    );
    let held = resps(&home) - a0;
    // Path B comes back before the bound: everything goes, no alarm.
    for h in 0..2 {
        home.wire().set_path(h, 1, PathMode::Up);
    }
    let t = drive(&mut home, &mut chk, &mut w, 20, t);
    assert!(home.words().released(0) > r0[0] || home.words().released(1) > r0[1]);
    assert_eq!(
        count(&home, |e| matches!(e, WireEvent::PathAlarm { .. })),
        0
    );
    assert!(resps(&home) - a0 > held);
    // Busy again, now past the bound: B is declared down, A carries on.
    for h in 0..2 {
        home.wire().set_path(h, 1, PathMode::Busy);
    }
    drive(&mut home, &mut chk, &mut w, 400, t);
    assert!(!home.words().fenced());
    assert!(
        count(&home, |e| matches!(
            e,
            WireEvent::PathAlarm {
                path: 1,
                down: true,
                ..
            }
        )) >= 1
    );
    let r = std::sync::atomic::Ordering::Relaxed;
    assert!(home.words().gate[0].busy[1].load(r) > 0);
}

#[test]
fn backpressure_on_both_paths_past_the_bound_fences() {
    let (mut home, mut chk) = sim(4);
    let e = home.config().engine.clone();
    let mut w = Workload::new(&e, 6, Mix::clean());
    let now = drive(&mut home, &mut chk, &mut w, 50, 1_000);
    for h in 0..2 {
        for p in 0..2 {
            home.wire().set_path(h, p, PathMode::Busy);
        }
    }
    drive(&mut home, &mut chk, &mut w, 400, now);
    assert!(home.words().fenced());
    let r = std::sync::atomic::Ordering::Relaxed;
    let fences: u64 = (0..2)
        .map(|h| home.words().gate[h].write_fences.load(r))
        .sum();
    assert!(fences >= 1);
}

fn order(e: &EngineConfig, session: u32, pkt_seq: u32, k: &[u8; 16]) -> Vec<u8> {
    RequestPacket {
        book: e.book,
        resend: false,
        session,
        pkt_seq,
        msgs: vec![Msg {
            kind: MsgType::NewGtc,
            side: Side::Buy,
            tick: 10,
            qty: 1,
            client_tag: pkt_seq,
        }],
    }
    .to_bytes(k)
    .unwrap()
}

#[test]
fn a_forged_or_replayed_packet_never_moves_a_sessions_address() {
    let (mut home, mut chk) = sim(5);
    let e = home.config().engine.clone();
    let s = e.sessions[0].clone();
    let client: SocketAddr = "127.0.0.1:40001".parse().unwrap();
    let attacker: SocketAddr = "127.0.0.1:40666".parse().unwrap();
    let learned = |home: &SimBox| -> Vec<SocketAddr> {
        home.log()
            .iter()
            .filter_map(|ev| match ev {
                WireEvent::Learn { session, src } if *session == s.session => Some(*src),
                _ => None,
            })
            .collect()
    };
    let settle = |home: &mut SimBox, chk: &mut Checker, now: u64| {
        for &t in &home.tiles() {
            home.poll(t, now);
        }
        chk.check(home).unwrap();
    };
    // The client's first packet: its address is learned.
    let good = order(&e, s.session, 1, &s.k_seq);
    assert!(home.receive_from(1_000, &good, Some(client)));
    settle(&mut home, &mut chk, 2_000);
    assert_eq!(learned(&home), vec![client]);
    // A forged packet naming the session (wrong key, so a wrong tag), from the attacker.
    let forged = order(&e, s.session, 2, &[0xAA; 16]);
    assert!(home.receive_from(3_000, &forged, Some(attacker)));
    settle(&mut home, &mut chk, 4_000);
    // The client's own packet replayed by the attacker (tag verifies, but it is a duplicate).
    assert!(home.receive_from(5_000, &good, Some(attacker)));
    settle(&mut home, &mut chk, 6_000);
    // A packet of the client's from ahead of sequence (BAD_SEQ) replayed by the attacker:
    // a tag that verifies, but it moves no address that is known (security review F12).
    let ahead = order(&e, s.session, 9, &s.k_seq);
    assert!(home.receive_from(5_500, &ahead, Some(attacker)));
    settle(&mut home, &mut chk, 5_800);
    assert_eq!(
        learned(&home),
        vec![client],
        "nothing the attacker sent moved it"
    );
    // The client goes on from a new port: a fresh packet with a good tag moves it.
    let moved: SocketAddr = "127.0.0.1:40002".parse().unwrap();
    let next = order(&e, s.session, 2, &s.k_seq);
    assert!(home.receive_from(7_000, &next, Some(moved)));
    settle(&mut home, &mut chk, 8_000);
    assert_eq!(learned(&home), vec![client, moved]);
}

#[test]
fn a_rep_ack_beyond_the_frames_written_is_refused() {
    let mut home = SimBox::build(cfg(), Some(250), 6);
    let e = home.config().engine.clone();
    let mut chk = Checker::default();
    let mut w = Workload::new(&e, 7, Mix::clean());
    let tiles = home.tiles();
    let mut now = 1_000;
    for _ in 0..400 {
        if let Input::Packet { bytes, .. } = w.next_input() {
            home.receive(now, bytes);
        }
        now += 1_000;
        // Three voters ack what the box wrote (the self-fence arms), then "ack" frames far
        // beyond anything it wrote: such acks must not keep it alive (INV-REP-6).
        let ack = if now < 100_000 {
            [home.words().sent(0), home.words().sent(1)]
        } else {
            [1 << 40, 1 << 40]
        };
        for v in 0..3 {
            home.on_ack(v, ack, now);
        }
        for &t in &tiles {
            home.poll(t, now);
        }
        chk.check(&home).unwrap();
    }
    let r = std::sync::atomic::Ordering::Relaxed;
    assert!(home.handles.control.acks_refused.load(r) > 100);
    assert!(
        home.words().fenced(),
        "bogus acks keep no box alive past the self-fence window"
    );
}

/// A tile that panics on its third poll.
struct Boom(u32);

impl Task for Boom {
    fn name(&self) -> String {
        "boom".into()
    }
    fn poll(&mut self, _now: u64) -> bool {
        self.0 += 1;
        assert!(self.0 < 3, "boom: tile invariant broken");
        true
    }
}

/// A tile that spins harmlessly.
struct Idle;

impl Task for Idle {
    fn name(&self) -> String {
        "idle".into()
    }
    fn poll(&mut self, _now: u64) -> bool {
        false
    }
}

#[test]
fn a_panicking_tile_stops_every_thread() {
    let tasks: Vec<Box<dyn Task>> = vec![Box::new(Idle), Box::new(Boom(0)), Box::new(Idle)];
    let r = Runner::start_with(
        runner::groups(tasks, &[], true, 0),
        Clock::new(),
        OnPanic::StopAll,
    );
    let t0 = std::time::Instant::now();
    while r.alive() && t0.elapsed() < std::time::Duration::from_secs(10) {
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    assert!(!r.alive(), "the box stopped");
    let p = r.panicked().expect("the runner saw the panic");
    assert!(
        p.contains("boom") && p.contains("tile invariant broken"),
        "{p}"
    );
    // Every thread ended and joined (each hands its tiles back).
    let back = r.stop();
    assert_eq!(back.len(), 3);
}

/// In production a tile panic aborts the process with a message naming the tile: run this test
/// binary again as a child that starts a box with [`OnPanic::Abort`], and look at how it ends.
#[test]
fn a_panicking_tile_aborts_the_process() {
    if std::env::var_os("VYRN_ABORT_CHILD").is_some() {
        let tasks: Vec<Box<dyn Task>> = vec![Box::new(Idle), Box::new(Boom(0))];
        let _r = Runner::start(runner::groups(tasks, &[], true, 0), Clock::new());
        std::thread::sleep(std::time::Duration::from_secs(10));
        // Not reached: the runner aborts first.
        std::process::exit(0);
    }
    let exe = std::env::current_exe().unwrap();
    let out = std::process::Command::new(exe)
        .args([
            "--exact",
            "a_panicking_tile_aborts_the_process",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("VYRN_ABORT_CHILD", "1")
        .output()
        .unwrap();
    assert!(!out.status.success(), "a non-zero exit");
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(out.status.signal(), Some(6), "SIGABRT: {:?}", out.status);
    }
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("tile boom panicked") && err.contains("aborting"),
        "{err}"
    );
}
