//! The real client library (`vyrn-client`) against the real threaded box over loopback UDP
//!: no double on the client's side or the box's. Two sessions of different
//! lanes and accounts cross; each sees its order acked and filled, then a `Durable` and a
//! `Final` fact for its fill, from the box's own watermark notices (the voter doubles ack the
//! frames and certify the blocks over the control port).
//!
//! Then a bad-input battery from a stranger's socket against the client port (truncated, wrong
//! length, bad count, bad tag, other book, pkt_seq 0, unknown session, seeded random bytes,
//! oversize) and against the control port (from an unregistered address, and junk from a
//! registered one). After each input the box still answers a good order of the session the
//! input named, as a new packet; nothing is ever sent to the stranger; and the box's counters
//! account for every datagram exactly:
//!
//! * client port: `rx_client + rx_truncated` = every datagram sent there; `rx_unknown`,
//!   `rx_too_long`, `rx_truncated` exactly as the RX tile classifies them; the rest reached a
//!   lane. The lanes' drop counters (`drop_bad_tag`, …) are not exported by the threaded box,
//!   so a lane-level input is checked by its effect instead: it names the victim session's next
//!   `pkt_seq`, so had the lane taken it, the victim's real packet with that `pkt_seq` would be a
//!   duplicate (no fresh Ack) and the forged packet's answers would reach the victim's client
//!   (counted there as a bad echo or an inconsistent record).
//! * control port: `ctrl_unknown` counts each datagram from an unregistered address;
//!   `ctrl_bad` each junk message from a registered one (a test socket registered as an extra
//!   voter index, as `ports.rs` registers its hash-list fetcher).
//!   A control datagram longer than the control port's 2048-byte receive slot is dropped by
//!   the port and counted `ctrl_truncated`.

use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use vyrn_client::{Driver, Event, ExecKind, OrderId, OrderReq, Session, SessionConfig};
use vyrn_engine::config::SessionCfg;
use vyrn_nic::lossy::SplitMix64;
use vyrn_nic::udp::{UdpConfig, UdpPort};
use vyrn_nic::{Dest, NicError, Port, PortCounters, RxBatch, RxPacket, TxPacket, TxStamp};
use vyrn_seq::boxcfg::BoxConfig;
use vyrn_seq::ports::{CoreMap, NetBox, NetStats, RunningBox};
use vyrn_seq::runner::Clock;
use vyrn_seq::testkit::doubles::{VoterNet, VoterThread};
use vyrn_wire::msg::client::{
    siphash128, Msg, MsgType, RequestPacket, Side, SipKey, REQ_MAX_LEN, REQ_TAG_BYTES,
};
use vyrn_wire::msg::consensus::{CertEntry, ProposalKind, RepFinalityCert, RepProposal};
use vyrn_wire::msg::ctrl::{CtrlMsg, HashListReq, Nack, RepAck};
use vyrn_wire::msg::seal::{self, LinkKey};

/// The RX tile's receive slot (`ports.rs`: `RxBatch::new(64, 256)`): a longer datagram is
/// dropped by the port and counted as `rx_truncated`.
const RX_SLOT: usize = 256;
/// How long any one wait may take (a loaded 2-core machine).
const WAIT: Duration = Duration::from_secs(5);

fn config() -> BoxConfig {
    let dir = std::env::temp_dir().join(format!("vyrn-e2e-client-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let p = vyrn_seq::boxcfg::write_dev_config(&dir, 2, 2, 0).expect("dev config");
    let mut c = BoxConfig::load(&p).expect("loads");
    c.client_port = 0;
    c.ctrl_port = 0;
    // 10 ms blocks: the finality gate (FIN_GATE_BLOCKS = 8) then allows 80 ms of lag, enough
    // for the voter doubles sharing a loaded 2-core machine with the box's spinning tiles; at
    // 1 ms the book halts now and then and answers `BookHalted`.
    c.block_ns = 10_000_000;
    c.self_fence_us = Some(2_000_000);
    c
}

/// The client's port, counting the packets it sends to the sequencer (copy 1, resends
/// included), so the box's RX counters can be checked exactly.
struct Counting {
    inner: UdpPort,
    seq: SocketAddr,
    to_seq: u64,
}

impl Port for Counting {
    fn max_payload(&self) -> usize {
        self.inner.max_payload()
    }
    fn send_batch(&mut self, pkts: &[TxPacket<'_>]) -> Result<usize, NicError> {
        let k = self.inner.send_batch(pkts)?;
        let seq = self.seq;
        self.to_seq += pkts[..k]
            .iter()
            .filter(|p| matches!(p.dest, Dest::Addr(a) if a == seq))
            .count() as u64;
        Ok(k)
    }
    fn recv_batch(&mut self, batch: &mut RxBatch) -> Result<usize, NicError> {
        self.inner.recv_batch(batch)
    }
    fn poll_recv(
        &mut self,
        max: usize,
        f: &mut dyn FnMut(RxPacket<'_>),
    ) -> Result<usize, NicError> {
        self.inner.poll_recv(max, f)
    }
    fn flush(&mut self) -> Result<(), NicError> {
        self.inner.flush()
    }
    fn last_tx(&self) -> TxStamp {
        self.inner.last_tx()
    }
    fn counters(&self) -> PortCounters {
        self.inner.counters()
    }
}

/// Sessions of the real client library on one UDP socket, with every event they reported.
struct Client {
    driver: Driver<Counting>,
    sessions: Vec<Session>,
    events: Vec<Vec<Event>>,
    t0: Instant,
    /// Copy 2 goes here (no data box in this test); kept open so sends never fail.
    _data_sink: UdpSocket,
}

impl Client {
    fn new(c: &BoxConfig, which: &[&SessionCfg], seq: SocketAddr) -> Client {
        let data_sink = UdpSocket::bind("127.0.0.1:0").unwrap();
        let data = data_sink.local_addr().unwrap();
        let sessions: Vec<Session> = which
            .iter()
            .map(|s| {
                let mut sc = SessionConfig::new(
                    c.engine.book,
                    s.session,
                    s.k_seq,
                    s.k_out,
                    seq,
                    vec![data],
                    0,
                );
                // Resend only when something is really lost: the counts below stay readable.
                sc.resend_after_ns = 100_000_000;
                sc.resend_gap_ns = 50_000_000;
                sc.gap_resend_ns = 50_000_000;
                Session::new(sc, c.epoch, 0).unwrap()
            })
            .collect();
        let port = UdpPort::open(&UdpConfig::loopback().with_batch(32)).unwrap();
        let driver = Driver::new(
            Counting {
                inner: port,
                seq,
                to_seq: 0,
            },
            &sessions,
        );
        Client {
            driver,
            events: vec![Vec::new(); sessions.len()],
            sessions,
            t0: Instant::now(),
            _data_sink: data_sink,
        }
    }

    fn now(&self) -> u64 {
        self.t0.elapsed().as_nanos() as u64
    }

    fn pump(&mut self) {
        let now = self.now();
        self.driver.pump(&mut self.sessions, now).unwrap();
        for (s, ev) in self.sessions.iter_mut().zip(&mut self.events) {
            while let Some(e) = s.poll_event() {
                ev.push(e);
            }
        }
    }

    /// Pump until `done` holds or `WAIT` passes; whether it held.
    fn until(&mut self, mut done: impl FnMut(&Client) -> bool) -> bool {
        let t = Instant::now();
        loop {
            self.pump();
            if done(self) {
                return true;
            }
            if t.elapsed() > WAIT {
                return false;
            }
            std::thread::sleep(Duration::from_micros(200));
        }
    }

    fn submit(&mut self, ix: usize, r: OrderReq) -> OrderId {
        let now = self.now();
        let sub = self.sessions[ix].submit(now, &[r]).unwrap();
        self.pump();
        sub.orders()[0]
    }

    /// The first `Exec` of `order` on session `ix` of kind `pred`.
    fn exec(
        &self,
        ix: usize,
        order: OrderId,
        pred: impl Fn(&ExecKind) -> bool,
    ) -> Option<(usize, bool)> {
        self.events[ix]
            .iter()
            .enumerate()
            .find_map(|(i, e)| match e {
                Event::Exec(x) if x.order == order && pred(&x.kind) => Some((i, x.resent)),
                _ => None,
            })
    }

    /// Session `ix` places a resting GTC and the box acks it as a new packet (not a resend).
    fn good_order(&mut self, ix: usize, side: Side, tick: i32) -> bool {
        let o = self.submit(ix, OrderReq::Gtc { side, tick, qty: 1 });
        let acked = |c: &Client| c.exec(ix, o, |k| *k == ExecKind::Ack);
        self.until(|c| acked(c).is_some()) && acked(self).is_some_and(|(_, resent)| !resent)
    }
}

/// Where the box's RX tile puts a client datagram (`seq/src/ports.rs`, `RxTile::poll`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fate {
    /// Longer than the receive slot: dropped by the port.
    Truncated,
    /// Too short to name a session, or names none of this box's.
    Unknown,
    /// Names a session but is longer than any request.
    TooLong,
    /// Pushed to its session's lane.
    Lane,
}

fn fate(b: &[u8], known: &[u32]) -> Fate {
    if b.len() > RX_SLOT {
        return Fate::Truncated;
    }
    let Some(s) = b.get(4..8) else {
        return Fate::Unknown;
    };
    if !known.contains(&u32::from_le_bytes([s[0], s[1], s[2], s[3]])) {
        Fate::Unknown
    } else if b.len() > REQ_MAX_LEN {
        Fate::TooLong
    } else {
        Fate::Lane
    }
}

/// What the client-port battery sent, by fate.
#[derive(Debug, Default)]
struct Sent {
    truncated: u64,
    unknown: u64,
    too_long: u64,
    lane: u64,
}

impl Sent {
    fn add(&mut self, f: Fate) {
        match f {
            Fate::Truncated => self.truncated += 1,
            Fate::Unknown => self.unknown += 1,
            Fate::TooLong => self.too_long += 1,
            Fate::Lane => self.lane += 1,
        }
    }
}

fn msg(tag: u32) -> Msg {
    Msg {
        kind: MsgType::NewGtc,
        side: Side::Buy,
        tick: 3,
        qty: 1,
        client_tag: tag,
    }
}

/// A well-formed request of `s` with `n` messages, tagged under `key`.
fn request(book: u16, session: u32, pkt_seq: u32, n: usize, key: &SipKey) -> Vec<u8> {
    RequestPacket {
        book,
        resend: false,
        session,
        pkt_seq,
        msgs: (0..n).map(|i| msg(0xBAD0_0000 + i as u32)).collect(),
    }
    .to_bytes(key)
    .unwrap()
}

/// Recompute the trailing tag over everything before it (a packet whose tag verifies).
fn retag(mut b: Vec<u8>, key: &SipKey) -> Vec<u8> {
    let n = b.len() - REQ_TAG_BYTES;
    let t = siphash128(key, &b[..n]);
    b[n..].copy_from_slice(&t);
    b
}

fn random(rng: &mut SplitMix64, len: usize) -> Vec<u8> {
    (0..len).map(|_| rng.next_u64() as u8).collect()
}

fn load(a: &AtomicU64) -> u64 {
    a.load(Ordering::Relaxed)
}

/// Poll until `f` holds (or `WAIT`), then return whether it does.
fn settle(mut f: impl FnMut() -> bool) -> bool {
    let t = Instant::now();
    while !f() && t.elapsed() < WAIT {
        std::thread::sleep(Duration::from_millis(1));
    }
    f()
}

/// Everything waiting on `sock` (non-blocking).
fn drain(sock: &UdpSocket) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut buf = [0u8; 65536];
    loop {
        match sock.recv_from(&mut buf) {
            Ok((n, _)) => out.push(buf[..n].to_vec()),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return out,
            Err(e) => panic!("recv: {e}"),
        }
    }
}

fn stranger() -> UdpSocket {
    let s = UdpSocket::bind("127.0.0.1:0").unwrap();
    s.set_nonblocking(true).unwrap();
    s
}

fn rx_snapshot(st: &NetStats) -> [u64; 6] {
    [
        load(&st.rx_client),
        load(&st.rx_unknown),
        load(&st.rx_too_long),
        load(&st.rx_truncated),
        load(&st.rx_wrong_port),
        load(&st.rx_full),
    ]
}

#[test]
fn real_client_against_real_box_and_bad_input_battery() {
    let c = config();
    let mut net = NetBox::open(&c, false).expect("ports");
    let ctrl = net.ctrl_addr().unwrap();
    let seq = net.client_addrs()[0];
    let vn = VoterNet::open(c.voters, ctrl, c.seq_public()).unwrap();
    for (a, i, k) in vn.members() {
        net.register_voter(a, i, k);
    }
    // A socket registered as one more voter index, to send junk from a registered address.
    let insider = stranger();
    let ik = ed25519_dalek::SigningKey::from_bytes(&[91; 32]);
    net.register_voter(insider.local_addr().unwrap(), c.voters, ik.verifying_key());
    let t0 = Instant::now();
    let map = CoreMap::Shared {
        threads: 2,
        cores: Vec::new(),
    };
    let (running, paths) = net.start(&c, &map, Clock::new()).expect("starts");
    let voters = VoterThread::spawn(
        c.voters,
        c.engine.layout,
        running.handles.seq_public,
        vn,
        paths,
        t0,
    );
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        run(&c, &running, seq, ctrl, (&insider, &ik))
    }));
    running.runner.stop();
    voters.stop.store(true, Ordering::Relaxed);
    let doubles = voters.handle.join().unwrap();
    if let Err(p) = result {
        std::panic::resume_unwind(p);
    }
    for d in &doubles {
        assert_eq!(d.faults(), (0, 0), "a voter double saw a bad frame");
    }
}

fn run(
    c: &BoxConfig,
    running: &RunningBox,
    seq: SocketAddr,
    ctrl: SocketAddr,
    (insider, ik): (&UdpSocket, &ed25519_dalek::SigningKey),
) {
    let st = &running.stats;
    let h = &running.handles;
    // Two sessions of different lanes and accounts (session 1: lane 0; session 10001: lane 1).
    let a = c.engine.sessions.iter().find(|s| s.lane == 0).unwrap();
    let b = c.engine.sessions.iter().find(|s| s.lane == 1).unwrap();
    assert_ne!(a.account, b.account);
    let known: Vec<u32> = c.engine.sessions.iter().map(|s| s.session).collect();
    let mut cl = Client::new(c, &[a, b], seq);

    // 1. Orders acked and filled: A buys 1 at 10, B sells 1 at 10.
    let buy = cl.submit(
        0,
        OrderReq::Gtc {
            side: Side::Buy,
            tick: 10,
            qty: 1,
        },
    );
    assert!(
        cl.until(|c| c.exec(0, buy, |k| *k == ExecKind::Ack).is_some()),
        "the resting buy was not acked: {:?}",
        cl.events[0]
    );
    let sell = cl.submit(
        1,
        OrderReq::Gtc {
            side: Side::Sell,
            tick: 10,
            qty: 1,
        },
    );
    let filled = |c: &Client, ix: usize, o: OrderId| {
        c.exec(ix, o, |k| {
            matches!(
                k,
                ExecKind::Fill {
                    qty: 1,
                    leaves: 0,
                    price: 10,
                    ..
                }
            )
        })
        .is_some()
    };
    assert!(
        cl.until(|c| filled(c, 0, buy) && filled(c, 1, sell)),
        "no fill on both sides: {:?} / {:?}",
        cl.events[0],
        cl.events[1]
    );
    let steps: Vec<u64> = [(0, buy), (1, sell)]
        .iter()
        .map(|&(ix, o)| cl.sessions[ix].order(o).unwrap().last_fill_step.unwrap())
        .collect();
    assert_eq!(steps[0], steps[1], "maker and taker fills name one step");
    for (ix, o) in [(0, buy), (1, sell)] {
        let v = cl.sessions[ix].order(o).unwrap();
        // The maker rested first (acked); the taker filled on arrival.
        assert!(v.acked || o == sell, "{v:?}");
        assert_eq!((v.filled, v.done), (1, true), "{v:?}");
    }

    // 2. Durable, then final, for each fill: the box's own watermark notices.
    let fact = |c: &Client, ix: usize, o: OrderId, durable: bool| {
        c.events[ix].iter().position(|e| match *e {
            Event::Durable { order, .. } => durable && order == o,
            Event::Final { order, .. } => !durable && order == o,
            _ => false,
        })
    };
    assert!(
        cl.until(|c| [(0, buy), (1, sell)]
            .iter()
            .all(|&(ix, o)| fact(c, ix, o, true).is_some() && fact(c, ix, o, false).is_some())),
        "no durable and final facts for both fills: {:?} / {:?}",
        cl.events[0],
        cl.events[1]
    );
    for (ix, o) in [(0, buy), (1, sell)] {
        let fill = cl
            .exec(ix, o, |k| matches!(k, ExecKind::Fill { .. }))
            .unwrap()
            .0;
        let d = fact(&cl, ix, o, true).unwrap();
        let f = fact(&cl, ix, o, false).unwrap();
        assert!(
            fill < d && d < f,
            "executed, durable, final out of order: {fill} {d} {f}"
        );
        match (cl.events[ix][d], cl.events[ix][f]) {
            (
                Event::Durable { step: sd, .. },
                Event::Final {
                    step: sf, height, ..
                },
            ) => {
                assert_eq!((sd, sf), (steps[0], steps[0]));
                let (dw, fw) = cl.sessions[ix].watermarks();
                assert!(dw.unwrap() >= steps[0] && fw.unwrap() >= height);
                // The client never runs ahead of the box's own watermarks (control publishes
                // them just after sending the notices: poll).
                assert!(settle(|| load(&h.control.durable) >= dw.unwrap()));
                assert!(settle(|| load(&h.control.final_height) >= fw.unwrap()));
            }
            e => panic!("{e:?}"),
        }
        let v = cl.sessions[ix].order(o).unwrap();
        assert_eq!((v.fills_not_durable, v.fills_not_final), (0, 0), "{v:?}");
    }
    assert!(load(&st.responses) > 0);

    // 3. The client-port battery, from a stranger's socket.
    let evil = stranger();
    let mut sent = Sent::default();
    let rx0 = rx_snapshot(st);
    let good0 = cl.driver.port().to_seq;
    assert_eq!(
        rx0[0], good0,
        "RX saw other than the client's packets: {rx0:?}"
    );
    assert_eq!(rx0[1..], [0; 5], "{rx0:?}");
    let mut rng = SplitMix64::new(0x5EED_0008);
    let book = c.engine.book;
    // Each item names a victim session (0 = A, 1 = B) and its next pkt_seq where it has one.
    let mut items: Vec<(&str, usize, Vec<u8>)> = Vec::new();
    for (ix, s) in [(0usize, a), (1, b)] {
        let next = cl.sessions[ix].next_pkt_seq();
        let one = request(book, s.session, next, 1, &s.k_seq);
        let two = request(book, s.session, next, 2, &s.k_seq);
        // (a) truncated: cut inside the tag, inside the message, to the header, below a session.
        items.push(("truncated 47", ix, one[..47].to_vec()));
        items.push(("truncated 30", ix, one[..30].to_vec()));
        items.push(("truncated 8", ix, one[..8].to_vec()));
        items.push(("truncated 6", ix, one[..6].to_vec()));
        // (b) wrong length: trailing bytes, with the old tag and with a tag over them.
        let mut long = one.clone();
        long.extend_from_slice(&[0; 16]);
        items.push(("trailing 16", ix, long.clone()));
        items.push(("trailing 16, retagged", ix, retag(long, &s.k_seq)));
        // (c) bad count: 0, 11, and one that disagrees with the length; tagged or not.
        for n in [0u8, 11, 3] {
            let mut x = two.clone();
            x[2] = n;
            items.push(("bad count", ix, x.clone()));
            items.push(("bad count, retagged", ix, retag(x, &s.k_seq)));
        }
        // (d) bad tag: one bit of the tag, one bit of the signed bytes, another session's key.
        let mut x = one.clone();
        *x.last_mut().unwrap() ^= 1;
        items.push(("tag bit", ix, x));
        let mut x = one.clone();
        x[20] ^= 0x40;
        items.push(("body bit", ix, x));
        let other = if ix == 0 { b } else { a };
        items.push(("other key", ix, retag(one.clone(), &other.k_seq)));
        // Authenticated but refused: another book, pkt_seq 0, a reserved flag.
        let mut x = one.clone();
        x[0] ^= 1;
        items.push(("other book", ix, retag(x, &s.k_seq)));
        let mut x = one.clone();
        x[8..12].copy_from_slice(&0u32.to_le_bytes());
        items.push(("pkt_seq 0", ix, retag(x, &s.k_seq)));
        let mut x = one.clone();
        x[3] = 0x80;
        items.push(("flag bit 7", ix, retag(x, &s.k_seq)));
        // (f) random bytes naming this session, reaching its lane or not.
        for len in [48usize, 64, 100, 192, 200, 256, 257, 700] {
            let mut x = random(&mut rng, len);
            x[4..8].copy_from_slice(&s.session.to_le_bytes());
            items.push(("random, session", ix, x));
        }
        // (g) oversize: a real packet padded past any request, to the slot, past the slot.
        for len in [REQ_MAX_LEN + 1, RX_SLOT, RX_SLOT + 1, 2000, 9000] {
            let mut x = one.clone();
            x.resize(len, 0xEE);
            items.push(("oversize", ix, x));
        }
    }
    // (e) unknown session, well formed and tagged under a real key.
    items.push((
        "unknown session",
        0,
        request(book, 0xDEAD_BEEF, 1, 1, &a.k_seq),
    ));
    items.push(("session 0", 1, request(book, 0, 1, 1, &b.k_seq)));
    // (f) random bytes of several lengths.
    for len in [
        1usize, 3, 7, 8, 9, 31, 47, 48, 64, 96, 176, 192, 193, 255, 256, 257, 1000, 1472,
    ] {
        items.push(("random", 0, random(&mut rng, len)));
    }
    for (i, (what, victim, bytes)) in items.iter().enumerate() {
        let f = fate(bytes, &known);
        sent.add(f);
        evil.send_to(bytes, seq).unwrap();
        // The box still answers the victim session, as a new packet; alternate the sides so
        // nothing crosses and every good order rests.
        let (side, tick) = if *victim == 0 {
            (Side::Buy, 1)
        } else {
            (Side::Sell, 1000)
        };
        assert!(
            cl.good_order(*victim, side, tick),
            "item {i} ({what}, {} bytes, {f:?}): the box stopped answering session {victim}: {:?}",
            bytes.len(),
            &cl.events[*victim][cl.events[*victim].len().saturating_sub(6)..]
        );
    }
    // The battery covers every class (its inputs are fixed, the seed too).
    assert!(
        sent.lane >= 30 && sent.unknown >= 10 && sent.too_long >= 4 && sent.truncated >= 10,
        "{sent:?}"
    );
    // Every datagram counted exactly once, in the class the RX tile gives it: what reached the
    // lanes is the client's packets and the lane-level items, nothing else.
    let good = cl.driver.port().to_seq - good0;
    let expect = [
        good0 + good + sent.lane + sent.unknown + sent.too_long,
        sent.unknown,
        sent.too_long,
        sent.truncated,
        0,
        0,
    ];
    assert!(
        settle(|| rx_snapshot(st) == expect),
        "RX counters {:?}, expected {expect:?} ({sent:?}, {good} good packets)",
        rx_snapshot(st)
    );
    // Nothing went to the stranger, and no forged packet was answered to its session.
    assert_eq!(drain(&evil).len(), 0, "the box answered the stranger");
    for s in &cl.sessions {
        let k = s.counters();
        assert_eq!(
            (
                k.rx_bad_tag,
                k.rx_truncated,
                k.rx_wrong_session,
                k.rx_unknown_type,
                k.rx_malformed
            ),
            (0, 0, 0, 0, 0),
            "{k:?}"
        );
        assert_eq!(
            (
                k.rx_bad_echo,
                k.rec_inconsistent,
                k.rec_unknown_order,
                k.rec_unmatched,
                k.bad_seq
            ),
            (0, 0, 0, 0, 0),
            "a forged packet was answered: {k:?}"
        );
    }
    assert_eq!(cl.driver.counters().rx_unrouted, 0);

    // 4. The control-port battery. From an unregistered address: every datagram is counted
    // `ctrl_unknown` and none answered, however well formed.
    assert_eq!(load(&st.ctrl_unknown), 0);
    assert_eq!(load(&st.ctrl_bad), 0);
    let ack = RepAck {
        epoch: c.epoch,
        tenure: 0,
        contiguous_frame_seq: [1, 1],
        path_mask: 0b11,
    }
    .to_bytes()
    .unwrap();
    let mut unregistered: Vec<Vec<u8>> = vec![
        ack.clone(),
        ack[..ack.len() - 1].to_vec(),
        HashListReq { height: 1 }.to_bytes().unwrap(),
        Nack {
            epoch: c.epoch,
            tenure: 0,
            stream: 0,
            from_seq: 1,
            to_seq: 1,
        }
        .to_bytes()
        .unwrap(),
    ];
    for len in [1usize, 2, 16, 33, 64, 300, 1400, 2048] {
        unregistered.push(random(&mut rng, len));
    }
    let outsider = stranger();
    for m in &unregistered {
        outsider.send_to(m, ctrl).unwrap();
    }
    let n_unreg = unregistered.len() as u64;
    assert!(
        settle(|| load(&st.ctrl_unknown) == n_unreg),
        "ctrl_unknown {} of {n_unreg}",
        load(&st.ctrl_unknown)
    );
    // Datagrams over the control port's 2048-byte receive slot: dropped by the port, counted.
    assert_eq!(load(&st.ctrl_truncated), 0);
    for len in [2049usize, 9000] {
        outsider.send_to(&random(&mut rng, len), ctrl).unwrap();
    }
    assert!(
        settle(|| load(&st.ctrl_truncated) == 2),
        "ctrl_truncated {}",
        load(&st.ctrl_truncated)
    );
    assert_eq!(load(&st.ctrl_unknown), n_unreg);
    // From a registered address: junk is `ctrl_bad`, one each — random bytes that parse as
    // nothing, a truncated RepAck, a RepAck of another epoch, a certificate whose signatures
    // do not check (refused by the certificate tile).
    let mut junk: Vec<Vec<u8>> = Vec::new();
    for len in [1usize, 5, 40, 500] {
        let x = random(&mut rng, len);
        assert!(
            CtrlMsg::parse(&x).is_err(),
            "random bytes parse: pick another seed"
        );
        junk.push(x);
    }
    junk.push(ack[..ack.len() - 3].to_vec());
    junk.push(
        RepAck {
            epoch: c.epoch + 1,
            tenure: 0,
            contiguous_frame_seq: [1, 1],
            path_mask: 0b11,
        }
        .to_bytes()
        .unwrap(),
    );
    let cert = RepFinalityCert {
        epoch: c.epoch,
        view: 2,
        parent_view: 1,
        proposal: RepProposal {
            kind: ProposalKind::Headers,
            epoch: c.epoch,
            // Far ahead of the final height (a stale one is not even checked).
            first_height: 1_000_000,
            last_height: 1_000_000,
            last_hash: [7; 32],
            excl_root: [0; 32],
        },
        entries: (0..3)
            .map(|i| CertEntry {
                index: i,
                sig: [i + 1; 64],
            })
            .collect(),
    };
    let mut cb = vec![vyrn_wire::msg::ctrl::ty::FINALITY_CERT];
    cert.encode(&mut cb).unwrap();
    assert!(matches!(CtrlMsg::parse(&cb), Ok(CtrlMsg::FinalityCert(_))));
    junk.push(cb);
    // Bare, each is refused unread (`ctrl_unsealed`); sealed by the insider
    // under its link key, each is parsed and refused as junk (`ctrl_bad`); a replay of a sealed
    // one, one sealed under another key and one sealed in another epoch are `ctrl_bad_seal`.
    let link = LinkKey::agree(ik, &c.seq_public()).unwrap();
    let me = seal::from::voter(c.voters);
    let mut sealed = Vec::new();
    for (k, m) in junk.iter().enumerate() {
        insider.send_to(m, ctrl).unwrap();
        let mut b = Vec::new();
        assert!(seal::seal_into(
            &mut b,
            &link,
            c.epoch,
            me,
            10 + k as u64,
            |o| {
                o.extend_from_slice(m);
                true
            }
        ));
        sealed.push(b);
    }
    let n_junk = junk.len() as u64;
    assert!(
        settle(|| load(&st.ctrl_unsealed) == n_junk),
        "ctrl_unsealed {} of {n_junk}",
        load(&st.ctrl_unsealed)
    );
    assert_eq!(load(&st.ctrl_bad), 0, "a bare message was parsed");
    for m in &sealed {
        insider.send_to(m, ctrl).unwrap();
    }
    assert!(
        settle(|| load(&st.ctrl_bad) == n_junk),
        "ctrl_bad {} of {n_junk}",
        load(&st.ctrl_bad)
    );
    let mut forged = Vec::new();
    let other = LinkKey::from_bytes([5; 32]);
    seal::seal_into(&mut forged, &other, c.epoch, me, 1_000, |o| {
        o.extend_from_slice(&ack);
        true
    });
    let mut stale = Vec::new();
    seal::seal_into(&mut stale, &link, c.epoch + 1, me, 1_001, |o| {
        o.extend_from_slice(&ack);
        true
    });
    for m in [&sealed[0], &forged, &stale] {
        insider.send_to(m, ctrl).unwrap();
    }
    assert!(
        settle(|| load(&st.ctrl_bad_seal) == 3),
        "ctrl_bad_seal {} of 3",
        load(&st.ctrl_bad_seal)
    );
    // The box still answers, acks keep being taken, and finality still advances.
    let acks = load(&st.ctrl[0]);
    let fin = cl.sessions[0].watermarks().1.unwrap();
    assert!(
        cl.good_order(0, Side::Buy, 1),
        "no answer after the control battery"
    );
    assert!(
        cl.good_order(1, Side::Sell, 1000),
        "no answer after the control battery"
    );
    // A trade between the two sessions: watermarks go to sessions with something to attest
    // (fills), so both get new Durable and Final records.
    let _ = cl.submit(
        0,
        OrderReq::Gtc {
            side: Side::Buy,
            tick: 1000,
            qty: 1,
        },
    );
    assert!(
        cl.until(|c| c
            .sessions
            .iter()
            .all(|s| s.watermarks().1.unwrap_or(0) > fin)),
        "finality stopped after the control battery"
    );
    assert!(load(&st.ctrl[0]) > acks, "RepAcks no longer taken");
    // Still exact: nothing counted twice, nothing counted in the wrong class (the stranger's
    // NACK and HashListReq are in `ctrl_unknown`, not taken; the doubles send no HashListReq).
    assert_eq!(load(&st.ctrl_unknown), n_unreg);
    assert_eq!(load(&st.ctrl_bad), n_junk);
    assert_eq!(
        load(&st.hash_list_reqs),
        0,
        "a HashListReq from a stranger was taken"
    );
    assert_eq!(
        drain(&outsider).len(),
        0,
        "the control port answered a stranger"
    );
    // The registered socket hears REP_DurableMark (sent to every voter) and nothing else.
    for m in drain(insider) {
        assert!(
            matches!(CtrlMsg::parse(&m), Ok(CtrlMsg::RepDurableMark(_))),
            "the control port answered junk: {m:?}"
        );
    }
    assert!(!h.words.fenced());
}
