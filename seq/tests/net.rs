//! The box on its ports: a client packet over loopback UDP reaches its lane, the Ack comes back
//! to the client's address, and every frame the box logged is received on both replication
//! paths before the Ack is sent (INV-FRAME-FIRST on the wire, in log order).

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};
use vyrn_engine::EngineConfig;
use vyrn_nic::pair::Path;
use vyrn_nic::udp::{UdpConfig, UdpPort};
use vyrn_nic::{Dest, Port, RxBatch, TxPacket};
use vyrn_seq::net::BoxNet;
use vyrn_seq::{SeqConfig, SeqHome};
use vyrn_wire::msg::client::{Msg, MsgType, Record, RequestPacket, Response, Side};

#[test]
fn a_packet_over_udp_is_acked_after_its_frames_are_on_both_paths() {
    let e = EngineConfig::test_home(2, 1);
    let mut home = SeqHome::new(SeqConfig {
        engine: e.clone(),
        epoch: 1,
        block_ns: u64::MAX,
        seq_key: [1; 32],
        voters: 4,
        rtx_ring_bytes: 1 << 20,
    });
    let (mut net, mut paths) = BoxNet::open(
        SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 0),
        SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 0),
        1,
    )
    .expect("ports");
    let mut client = UdpPort::open(&UdpConfig::loopback().with_batch(16)).unwrap();
    let s = &e.sessions[0];
    let pkt = RequestPacket {
        book: e.book,
        resend: false,
        session: s.session,
        pkt_seq: 1,
        msgs: vec![Msg {
            kind: MsgType::NewGtc,
            side: Side::Buy,
            tick: 10,
            qty: 1,
            client_tag: 5,
        }],
    }
    .to_bytes(&s.k_seq)
    .unwrap();
    let to = net.client_addr().unwrap();
    client
        .send_batch(&[TxPacket::to(&pkt, Dest::Addr(to))])
        .unwrap();
    client.flush().unwrap();
    let tiles = home.tiles();
    let t0 = Instant::now();
    let mut got_ack = None;
    let mut frames = [0usize; 2];
    let mut rx = RxBatch::new(16, 2048);
    let mut now = 1_000;
    while got_ack.is_none() && t0.elapsed() < Duration::from_secs(5) {
        now += 1_000;
        net.recv(&mut home, now).unwrap();
        for &t in &tiles {
            home.poll(t, now);
        }
        net.send(&mut home);
        paths
            .recv(|p, _| {
                frames[match p {
                    Path::A => 0,
                    Path::B => 1,
                }] += 1
            })
            .unwrap();
        if client.recv_batch(&mut rx).unwrap() > 0 {
            for p in rx.iter() {
                let r = Response::parse(p.data, &s.k_out).expect("tagged response");
                if r.records.contains(&Record::Ack {
                    msg_index: 0,
                    client_tag: 5,
                }) {
                    got_ack = Some(frames);
                }
            }
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    let at_ack = got_ack.expect("the Ack came back over UDP");
    // By the time the client held the Ack, the frames logged before it had been written to both
    // paths (TenureStart, SessionBinds, the record and the step that covers it).
    assert!(
        at_ack[0] >= 3 && at_ack[1] >= 3,
        "frames on the paths by then: {at_ack:?}"
    );
    let c = net.counters();
    assert_eq!(c.rx_client, 1);
    assert!(c.responses >= 1 && c.frame_errors == 0, "{c:?}");
}

/// The control port: RepAcks count only from registered voters, a finality certificate counts
/// only when its signatures check, and a NACK older than the frame ring gets NackTooOld back.
#[test]
fn control_port_acks_certs_and_nacks() {
    use ed25519_dalek::Signer;
    use vyrn_wire::msg::consensus::{CertEntry, ProposalKind, RepFinalityCert, RepProposal};
    use vyrn_wire::msg::ctrl::{ty, CtrlMsg, Nack, RepAck};
    let e = EngineConfig::test_home(2, 1);
    let mut home = SeqHome::new(SeqConfig {
        engine: e.clone(),
        epoch: 1,
        block_ns: u64::MAX,
        seq_key: [1; 32],
        voters: 4,
        rtx_ring_bytes: 4096,
    });
    let lo = |p| SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), p);
    let (mut net, _paths) = BoxNet::open(lo(0), lo(0), 1).expect("ports");
    let ctrl = net.ctrl_addr().unwrap();
    let mut socks = Vec::new();
    let mut keys = Vec::new();
    for i in 0..4u8 {
        let s = UdpPort::open(&UdpConfig::loopback().with_batch(16)).unwrap();
        let k = ed25519_dalek::SigningKey::from_bytes(&[i + 10; 32]);
        net.register_voter(s.local_addr().unwrap(), i as usize, k.verifying_key());
        socks.push(s);
        keys.push(k);
    }
    let stranger = UdpPort::open(&UdpConfig::loopback()).unwrap();
    let send = |s: &mut UdpPort, b: &[u8]| {
        s.send_batch(&[TxPacket::to(b, Dest::Addr(ctrl))]).unwrap();
        s.flush().unwrap();
    };
    let ack = RepAck {
        epoch: 1,
        tenure: 0,
        contiguous_frame_seq: [2, 2],
        path_mask: 3,
    }
    .to_bytes()
    .unwrap();
    send(&mut socks[0], &ack);
    let mut stranger = stranger;
    send(&mut stranger, &ack);
    // A certificate: 3 good signatures; then one with a forged entry.
    let p = RepProposal {
        kind: ProposalKind::Headers,
        epoch: 1,
        first_height: 1,
        last_height: 1,
        last_hash: [5; 32],
        excl_root: [0; 32],
    };
    let d = p.digest();
    let entries = |forge: bool| -> Vec<CertEntry> {
        (0..3u8)
            .map(|i| CertEntry {
                index: i,
                sig: if forge && i == 2 {
                    keys[3].sign(&d).to_bytes()
                } else {
                    keys[i as usize].sign(&d).to_bytes()
                },
            })
            .collect()
    };
    for forge in [false, true] {
        let c = RepFinalityCert {
            epoch: 1,
            view: 2,
            parent_view: 1,
            proposal: p,
            entries: entries(forge),
        };
        let mut b = vec![ty::FINALITY_CERT];
        c.encode(&mut b).unwrap();
        send(&mut socks[0], &b);
    }
    // Fill the 4 KiB frame ring past frame 1, then NACK frame 1.
    let tiles = home.tiles();
    for i in 0..200u64 {
        for &t in &tiles {
            home.poll(t, 1_000 + i * 100_000);
        }
        net.send(&mut home);
    }
    let nack = Nack {
        epoch: 1,
        tenure: 0,
        stream: 0,
        from_seq: 1,
        to_seq: 1,
    }
    .to_bytes()
    .unwrap();
    send(&mut socks[1], &nack);
    std::thread::sleep(Duration::from_millis(20));
    net.recv_ctrl(&mut home, 30_000_000).unwrap();
    let c = net.counters();
    assert_eq!(
        c.ctrl[0], 1,
        "only the registered voter's RepAck counts: {c:?}"
    );
    assert_eq!(c.ctrl[2], 1, "the good certificate: {c:?}");
    assert!(
        c.ctrl_bad >= 2,
        "the stranger's ack and the forged certificate: {c:?}"
    );
    assert_eq!(c.ctrl[1], 1);
    assert_eq!(c.too_old, 1, "{c:?}");
    let mut rx = RxBatch::new(4, 256);
    std::thread::sleep(Duration::from_millis(5));
    assert_eq!(socks[1].recv_batch(&mut rx).unwrap(), 1);
    assert!(matches!(
        CtrlMsg::parse(rx.iter().next().unwrap().data),
        Ok(CtrlMsg::NackTooOld(_))
    ));
}
