//! A replica node's network inputs: the member envelope at its control socket (security review
//! F9) — a peer's control messages are taken only sealed by that peer under
//! their link key, fresh; a bare one (what a spoofer of the peer's address sends), one sealed
//! under another key or as another voter, and a replay are refused before parsing (order frames
//! stay bare: their block's `order_root` authenticates them); each peer's share of the repair
//! budget; the held-frames bound from the home file (F11).

use std::net::UdpSocket;
use std::time::{Duration, Instant};

use ed25519_dalek::SigningKey;
use vyrn_home::read_seed;
use vyrn_replica::homekit::LoopbackHome;
use vyrn_replica::node::{Node, NodeConfig, NodeCounters};
use vyrn_wire::msg::ctrl::RepairReq;
use vyrn_wire::msg::seal::{from, LinkKey, Sealer};

/// The secret key in `keys/{name}.key` of the home.
fn key_of(h: &LoopbackHome, name: &str) -> SigningKey {
    let seed = read_seed(&h.dir.join(format!("keys/{name}.key"))).unwrap();
    SigningKey::from_bytes(seed.expose())
}

/// A RepairReq for frames 1..=`to` of substream 0 of tenure 0.
fn repair_req(h: &LoopbackHome, to: u64) -> Vec<u8> {
    RepairReq {
        epoch: h.home.epoch,
        tenure: 0,
        stream: 0,
        from_seq: 1,
        to_seq: to,
    }
    .to_bytes()
    .unwrap()
}

fn config(h: &LoopbackHome, i: usize) -> NodeConfig {
    NodeConfig {
        budgets: h.budgets,
        ..NodeConfig::new(h.home.clone(), i, key_of(h, &format!("voter-{i}")))
    }
}

/// Security review F11: `[voter.N] held_mib` in the home file bounds the frames that replica
/// holds behind holes (64 MiB without it).
#[test]
fn the_held_frames_bound_comes_from_the_home_file() {
    let mut h = LoopbackHome::new("heldmib", 29_540, false).expect("dev home");
    let node = Node::open(&config(&h, 0)).expect("opens");
    assert_eq!(
        node.core().order_rx().held_bytes_max(),
        vyrn_replica::front::order_rx::HELD_BYTES_MAX
    );
    drop(node);
    h.home.voters_members[1].held_mib = Some(3);
    let node = Node::open(&config(&h, 1)).expect("opens");
    assert_eq!(node.core().order_rx().held_bytes_max(), 3 << 20);
}

fn poll_until(node: &mut Node, t0: Instant, done: impl Fn(&NodeCounters) -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(5) {
        let _ = node.poll(t0.elapsed().as_nanos() as u64 + 1_000_000);
        if done(&node.counters()) {
            return true;
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    false
}

#[test]
fn a_peer_is_heard_only_through_its_seal() {
    let h = LoopbackHome::new("seal", 29_300, false).expect("dev home");
    let key = |i: usize| key_of(&h, &format!("voter-{i}"));
    let mut node = Node::open(&config(&h, 0)).expect("replica 0 opens");
    let t0 = Instant::now();
    let me = h.home.voters_members[0].ctrl_addr;
    // Voter 1 is not running: this socket is its control address.
    let peer = UdpSocket::bind(h.home.voters_members[1].ctrl_addr).unwrap();
    let req = repair_req(&h, 4);
    let link = LinkKey::agree(&key(1), &key(0).verifying_key()).unwrap();
    let mut s1 = Sealer::new(from::voter(1), h.home.epoch, 1_000);
    let mut s2 = Sealer::new(from::voter(2), h.home.epoch, 1_000);
    let mut s_old_epoch = Sealer::new(from::voter(1), h.home.epoch + 1, 5_000);
    let good = s1.seal_bytes(&link, &req);
    let c0 = node.counters();
    assert_eq!((c0.unsealed, c0.bad_seal, c0.repairs_served.0), (0, 0, 0));
    // Bare, from the peer's own address: refused unread.
    peer.send_to(&req, me).unwrap();
    assert!(poll_until(&mut node, t0, |c| c.unsealed == 1));
    assert_eq!(node.counters().repairs_served.0, 0);
    // Sealed by voter 1: served.
    peer.send_to(&good, me).unwrap();
    assert!(poll_until(&mut node, t0, |c| c.repairs_served.0 == 1));
    // Its replay, one sealed under another key, one sealed as voter 2 and one of another
    // epoch: each refused.
    let forged = s1.seal_bytes(&LinkKey::from_bytes([1; 32]), &req);
    let other = s2.seal_bytes(&link, &req);
    let stale = s_old_epoch.seal_bytes(&link, &req);
    for m in [&good, &forged, &other, &stale] {
        peer.send_to(m, me).unwrap();
    }
    assert!(poll_until(&mut node, t0, |c| c.bad_seal == 4));
    let c = node.counters();
    assert_eq!((c.unsealed, c.bad_seal, c.repairs_served.0), (1, 4, 1));
    // A later sealed request is served again (the window moved on).
    peer.send_to(&s1.seal_bytes(&link, &req), me).unwrap();
    assert!(poll_until(&mut node, t0, |c| c.repairs_served.0 == 2));
}

/// Each peer gets its share (1/(n-1), or 1/n with the standby's replica served too, 07 §9.5) of
/// REP_PEER_RTX_MAX_FPS. A peer that
/// asks past its share's burst at one instant is refused (`repairs_over_share`); another peer is
/// still served at that same instant.
#[test]
fn one_peer_cannot_use_up_the_repair_budget_of_the_others() {
    let h = LoopbackHome::new("share", 29_500, false).expect("dev home");
    let key = |i: usize| key_of(&h, &format!("voter-{i}"));
    let mut node = Node::open(&config(&h, 0)).expect("replica 0 opens");
    let me = h.home.voters_members[0].ctrl_addr;
    let req = repair_req(&h, 1);
    // One instant: no refill while the requests are taken.
    let now = 1_000_000_000u64;
    let poll_at = |node: &mut Node, done: &dyn Fn(&NodeCounters) -> bool| {
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(5) && !done(&node.counters()) {
            let _ = node.poll(now);
            std::thread::sleep(Duration::from_micros(100));
        }
    };
    let p1 = UdpSocket::bind(h.home.voters_members[1].ctrl_addr).unwrap();
    let l1 = LinkKey::agree(&key(1), &key(0).verifying_key()).unwrap();
    let mut s1 = Sealer::new(from::voter(1), h.home.epoch, 1);
    // 4,096 / (3 peers + the standby) = 1,024 at once; each request that finds nothing held costs
    // one.
    let slots = 3 + u64::from(h.home.standby_replica.is_some());
    let share = 4_096 / slots;
    let asked = 1_400u64;
    for k in 0..asked {
        p1.send_to(&s1.seal_bytes(&l1, &req), me).unwrap();
        if k % 100 == 99 {
            let _ = node.poll(now);
        }
    }
    poll_at(&mut node, &|c| {
        c.repairs_served.0 + c.repairs_over_share == asked
    });
    let c = node.counters();
    assert_eq!(
        (c.repairs_served.0, c.repairs_over_share),
        (share, asked - share),
        "{c:?}"
    );
    let p2 = UdpSocket::bind(h.home.voters_members[2].ctrl_addr).unwrap();
    let l2 = LinkKey::agree(&key(2), &key(0).verifying_key()).unwrap();
    let mut s2 = Sealer::new(from::voter(2), h.home.epoch, 1);
    p2.send_to(&s2.seal_bytes(&l2, &req), me).unwrap();
    poll_at(&mut node, &|c| c.repairs_served.0 == share + 1);
    assert_eq!(node.counters().repairs_served.0, share + 1);
}

/// 07 §9.5: a voter serves the standby's replica like a peer — its RepairReq taken only from its
/// `replica_addr`, sealed `from::STANDBY` under the standby's link key; bare, or sealed as a
/// voter, refused.
#[test]
fn a_voter_serves_the_standby_replica_through_its_seal() {
    let h = LoopbackHome::new("standby-in", 29_560, false).expect("dev home");
    let r = h
        .home
        .standby_replica
        .expect("a dev home names its standby's replica");
    let seed = read_seed(&h.dir.join("keys/standby.key")).unwrap();
    let standby = SigningKey::from_bytes(seed.expose());
    let v0 = SigningKey::from_bytes(read_seed(&h.dir.join("keys/voter-0.key")).unwrap().expose());
    let mut node = Node::open(&config(&h, 0)).expect("replica 0 opens");
    let t0 = Instant::now();
    let me = h.home.voters_members[0].ctrl_addr;
    let sock = UdpSocket::bind(r.ctrl_addr).unwrap();
    let req = repair_req(&h, 4);
    let link = LinkKey::agree(&standby, &v0.verifying_key()).unwrap();
    sock.send_to(&req, me).unwrap();
    assert!(poll_until(&mut node, t0, |c| c.unsealed == 1));
    let mut as_voter = Sealer::new(from::voter(1), h.home.epoch, 1_000);
    sock.send_to(&as_voter.seal_bytes(&link, &req), me).unwrap();
    assert!(poll_until(&mut node, t0, |c| c.bad_seal == 1));
    assert_eq!(node.counters().repairs_served.0, 0);
    let mut s = Sealer::new(from::STANDBY, h.home.epoch, 1_000);
    sock.send_to(&s.seal_bytes(&link, &req), me).unwrap();
    assert!(poll_until(&mut node, t0, |c| c.repairs_served.0 == 1));
}
