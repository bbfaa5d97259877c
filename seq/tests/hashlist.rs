//! The order hasher's full-hash lists (07 §4.6, §5.6): each closed block's list per substream is
//! exactly the leaves of its header's `data_root`, it is kept REP_SEQ_HASHLIST_MS and then
//! dropped, and the control port serves it to a registered voter's HashListReq as `HashList`
//! parts (and to nobody else).

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};
use vyrn_engine::workload::{Input, Mix, Workload};
use vyrn_engine::EngineConfig;
use vyrn_nic::udp::{UdpConfig, UdpPort};
use vyrn_nic::{Dest, Port, RxBatch, TxPacket};
use vyrn_seq::net::BoxNet;
use vyrn_seq::{SeqConfig, SeqHome, WireEvent};
use vyrn_wire::consts::REP_SEQ_HASHLIST_MS;
use vyrn_wire::frame::{FrameHeader, FrameKind};
use vyrn_wire::header::{data_root, BlockHeader, DataRootHasher};
use vyrn_wire::msg::ctrl::{CtrlMsg, HashList, HashListReq};

fn home() -> (SeqHome, EngineConfig) {
    let e = EngineConfig::test_home(4, 4);
    let h = SeqHome::new(SeqConfig {
        engine: e.clone(),
        epoch: 1,
        block_ns: 50_000,
        seq_key: [5; 32],
        voters: 4,
        rtx_ring_bytes: 8 << 20,
    });
    (h, e)
}

fn headers(home: &mut SeqHome) -> Vec<BlockHeader> {
    home.drain_wire()
        .filter_map(|ev| match ev {
            WireEvent::Frame { bytes, .. } => {
                let (h, body) = FrameHeader::parse(&bytes).ok()?;
                (h.kind == FrameKind::Header).then(|| BlockHeader::parse(body).unwrap())
            }
            _ => None,
        })
        .collect()
}

fn root_of(lists: &[Vec<[u8; 32]>; 2]) -> [u8; 32] {
    let r: Vec<[u8; 32]> = lists
        .iter()
        .map(|l| {
            let mut d = DataRootHasher::default();
            for h in l {
                d.push(h);
            }
            d.finish()
        })
        .collect();
    data_root(&r[0], &r[1])
}

#[test]
fn hash_lists_are_the_data_root_leaves_and_expire() {
    let (mut home, e) = home();
    let mut w = Workload::new(&e, 21, Mix::everything());
    let tiles = home.tiles();
    let mut now = 0;
    let mut hdrs = Vec::new();
    for _ in 0..3000 {
        if let Input::Packet { rx_ts, bytes } = w.next_input() {
            home.receive(rx_ts, bytes);
        }
        now = now.max(w.now());
        for &t in &tiles {
            home.poll(t, now);
        }
        hdrs.extend(headers(&mut home));
    }
    let mut checked = 0;
    let mut nonempty = 0;
    for h in &hdrs {
        let lists = home
            .hash_list(h.height)
            .expect("kept within REP_SEQ_HASHLIST_MS");
        assert_eq!(root_of(lists), h.data_root, "height {}", h.height);
        checked += 1;
        nonempty += usize::from(!lists[0].is_empty() || !lists[1].is_empty());
    }
    assert!(
        checked > 5 && nonempty > 5,
        "{checked} headers, {nonempty} with packets"
    );
    // Past REP_SEQ_HASHLIST_MS the lists are gone (the hasher drops them as it runs).
    let later = now + (REP_SEQ_HASHLIST_MS + 1) * 1_000_000;
    home.settle(later, 100);
    assert!(home.hash_list(hdrs[0].height).is_none());
}

#[test]
fn control_port_serves_hash_lists_to_voters_only() {
    let (mut home, e) = home();
    let lo = |p| SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), p);
    let (mut net, _paths) = BoxNet::open(lo(0), lo(0), 1).expect("ports");
    let ctrl = net.ctrl_addr().unwrap();
    let mut voter = UdpPort::open(&UdpConfig::loopback().with_batch(16)).unwrap();
    let mut stranger = UdpPort::open(&UdpConfig::loopback().with_batch(16)).unwrap();
    let key = ed25519_dalek::SigningKey::from_bytes(&[8; 32]);
    net.register_voter(voter.local_addr().unwrap(), 0, key.verifying_key());
    let mut w = Workload::new(&e, 4, Mix::clean());
    let tiles = home.tiles();
    let mut now = 0;
    let mut hdrs = Vec::new();
    while hdrs.len() < 4 {
        if let Input::Packet { rx_ts, bytes } = w.next_input() {
            home.receive(rx_ts, bytes);
        }
        now = now.max(w.now());
        for &t in &tiles {
            home.poll(t, now);
        }
        hdrs.extend(headers(&mut home));
    }
    let target = hdrs
        .iter()
        .find(|h| {
            home.hash_list(h.height)
                .is_some_and(|l| l[0].len() + l[1].len() > 0)
        })
        .expect("a block with packets");
    let req = HashListReq {
        height: target.height,
    }
    .to_bytes()
    .unwrap();
    for s in [&mut voter, &mut stranger] {
        s.send_batch(&[TxPacket::to(&req, Dest::Addr(ctrl))])
            .unwrap();
        s.flush().unwrap();
    }
    let mut got: Vec<HashList> = Vec::new();
    let mut rx = RxBatch::new(16, 9216);
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(3) {
        net.recv_ctrl(&mut home, now).unwrap();
        if voter.recv_batch(&mut rx).unwrap() > 0 {
            for p in rx.iter() {
                if let Ok(CtrlMsg::HashList(l)) = CtrlMsg::parse(p.data) {
                    got.push(l);
                }
            }
        }
        let done = got.iter().filter(|l| l.part + 1 == l.parts).count();
        if done == 2 {
            break;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    let mut lists: [Vec<[u8; 32]>; 2] = Default::default();
    got.sort_by_key(|l| (l.stream, l.part));
    for l in &got {
        assert_eq!(l.height, target.height);
        lists[l.stream as usize].extend_from_slice(&l.hashes);
    }
    assert_eq!(root_of(&lists), target.data_root);
    // The stranger's request was not served.
    assert_eq!(stranger.recv_batch(&mut rx).unwrap_or(0), 0);
    let c = net.counters();
    assert_eq!(c.hash_list_reqs, 1);
    assert!(c.ctrl_bad >= 1);
}
