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
    let (mut net, mut paths) =
        BoxNet::open(SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 0)).expect("ports");
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
