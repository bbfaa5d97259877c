//! The threaded box on its UDP ports (`vyrn-seq`'s box): a client packet over loopback reaches
//! its lane, the Ack comes back; the voter doubles on their own thread decode the frames off both
//! paths, check every header, and their RepAcks and finality certificates reach control over the
//! control port (durable, final, `REP_DurableMark`). On `ref`, lane `l` listens on
//! `client_port + l` and a packet on another lane's port is dropped and counted.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};
use vyrn_nic::udp::{UdpConfig, UdpPort};
use vyrn_nic::{Dest, Port, RxBatch, TxPacket};
use vyrn_seq::boxcfg::BoxConfig;
use vyrn_seq::ports::{CoreMap, NetBox};
use vyrn_seq::runner::Clock;
use vyrn_seq::testkit::doubles::{VoterNet, VoterThread};
use vyrn_wire::msg::client::{Msg, MsgType, Record, RequestPacket, Response, Side};
use vyrn_wire::msg::seal;

/// One box at a time: each spins its hot tiles, and two on a 2-core machine starve each other's
/// gate (a box that halts its book under the other's load fails the first test's order).
static ONE_BOX: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn config(tag: &str) -> BoxConfig {
    let dir = std::env::temp_dir().join(format!("vyrn-netbox-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let p = vyrn_seq::boxcfg::write_dev_config(&dir, 2, 2, 0).expect("dev config");
    let mut c = BoxConfig::load(&p).expect("loads");
    c.client_port = 0;
    c.ctrl_port = 0;
    c.block_ns = 1_000_000;
    c.self_fence_us = Some(2_000_000);
    c
}

fn order(c: &BoxConfig, session_ix: usize, tag: u32) -> (Vec<u8>, u8) {
    order_at(c, session_ix, tag, 1)
}

fn order_at(c: &BoxConfig, session_ix: usize, tag: u32, pkt_seq: u32) -> (Vec<u8>, u8) {
    let s = &c.engine.sessions[session_ix];
    let b = RequestPacket {
        book: c.engine.book,
        resend: false,
        session: s.session,
        pkt_seq,
        msgs: vec![Msg {
            kind: MsgType::NewGtc,
            side: Side::Buy,
            tick: 10,
            qty: 1,
            client_tag: tag,
        }],
    }
    .to_bytes(&s.k_seq)
    .unwrap();
    (b, s.lane)
}

/// Send `pkt` to `to` and wait (up to 5 s) for the first Ack or Reject of `tag`.
fn answer_of(
    client: &mut UdpPort,
    to: std::net::SocketAddr,
    pkt: &[u8],
    k_out: &[u8; 16],
    tag: u32,
) -> Option<Record> {
    client
        .send_batch(&[TxPacket::to(pkt, Dest::Addr(to))])
        .unwrap();
    client.flush().unwrap();
    let mut rx = RxBatch::new(16, 2048);
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(5) {
        if client.recv_batch(&mut rx).unwrap() > 0 {
            for p in rx.iter() {
                let Ok(r) = Response::parse(p.data, k_out) else {
                    continue;
                };
                let found = r.records.into_iter().find(|x| {
                    matches!(x, Record::Ack { client_tag, .. } | Record::Reject { client_tag, .. }
                        if *client_tag == tag)
                });
                if found.is_some() {
                    return found;
                }
            }
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    None
}

/// True when `tag` is acked (message 0).
fn acked(
    client: &mut UdpPort,
    to: std::net::SocketAddr,
    pkt: &[u8],
    k_out: &[u8; 16],
    tag: u32,
) -> bool {
    answer_of(client, to, pkt, k_out, tag)
        == Some(Record::Ack {
            msg_index: 0,
            client_tag: tag,
        })
}

/// The reject code `tag` got, if it was rejected.
fn answer(
    client: &mut UdpPort,
    to: std::net::SocketAddr,
    pkt: &[u8],
    k_out: &[u8; 16],
    tag: u32,
) -> Option<vyrn_wire::msg::client::RejectCode> {
    match answer_of(client, to, pkt, k_out, tag)? {
        Record::Reject { code, .. } => Some(code),
        _ => None,
    }
}

/// Finality-gate resumes so far (halts == resumes: the book is open).
fn ch_resumes(r: &vyrn_seq::ports::RunningBox) -> u64 {
    r.handles.control.gate_resumes.load(Ordering::Relaxed)
}

#[test]
fn threaded_box_answers_over_udp_and_voters_finalize() {
    let _one = ONE_BOX.lock().unwrap_or_else(|e| e.into_inner());
    let c = config("dev");
    let mut net = NetBox::open(&c, false).expect("ports");
    let vn = VoterNet::open(c.voters, net.ctrl_addr().unwrap(), c.seq_public()).unwrap();
    for (a, i, k) in vn.members() {
        net.register_voter(a, i, k);
    }
    // A replica fetching a block's full-hash list (07 §5.6) from a registered address.
    let mut fetcher = UdpPort::open(&UdpConfig::loopback().with_batch(16)).unwrap();
    let fk = ed25519_dalek::SigningKey::from_bytes(&[77; 32]);
    net.register_voter(fetcher.local_addr().unwrap(), c.voters, fk.verifying_key());
    // Its messages go sealed under its link key with the box, and the box's HashList and
    // SeqData answers come back sealed.
    let flink = seal::LinkKey::agree(&fk, &c.seq_public()).unwrap();
    let mut fsealer = seal::Sealer::new(seal::from::voter(c.voters), c.epoch, 1);
    let mut fseal = |b: &[u8]| fsealer.seal_bytes(&flink, b);
    let mut fopen = seal::Opener::new(c.epoch);
    fopen.add(seal::from::BOX_HASHER, flink.clone());
    fopen.add(seal::from::BOX_CTRL, flink.clone());
    let ctrl = net.ctrl_addr().unwrap();
    let to = net.client_addrs()[0];
    let t0 = Instant::now();
    let map = CoreMap::Shared {
        threads: 2,
        cores: Vec::new(),
    };
    // 07 §7.4 case 1: evidence the doubles' root keys sign (checked by the box before a halt).
    let evidence = vn.conflict_evidence(c.epoch, 0).to_bytes().unwrap();
    let (running, paths) = net.start(&c, &map, Clock::new()).expect("starts");
    let voters = VoterThread::spawn(
        c.voters,
        c.engine.layout,
        running.handles.seq_public,
        vn,
        paths,
        t0,
    );
    let mut client = UdpPort::open(&UdpConfig::loopback().with_batch(16)).unwrap();
    // The box closes blocks before the doubles' first votes, so the finality gate may halt the
    // book at start: order once finality runs and the gate is open (final within
    // REP_GATE_RESUME_BLOCKS of the closed height), as a client would after a Halted notice.
    let ch = &running.handles.control;
    let tw = Instant::now();
    while tw.elapsed() < Duration::from_secs(10)
        && (ch.final_height.load(Ordering::Relaxed) < 2
            || ch.gate_halts.load(Ordering::Relaxed) != ch_resumes(&running))
    {
        std::thread::sleep(Duration::from_millis(2));
    }
    // The gate may still halt the book between that check and the order (a loaded CI machine,
    // the doubles' votes late): a client answered BOOK_HALTED or BUSY waits for the resume and
    // sends a new packet, as here (up to five packets).
    let mut placed_at = None;
    let mut answers = Vec::new();
    for seq in 1..=5u32 {
        let (pkt, _) = order_at(&c, 0, 5, seq);
        let a = answer_of(&mut client, to, &pkt, &c.engine.sessions[0].k_out, 5);
        if let Some(Record::Ack { msg_index: 0, .. }) = a {
            placed_at = Some((seq, pkt));
            break;
        }
        answers.push(a);
        let tr = Instant::now();
        while tr.elapsed() < Duration::from_secs(5)
            && ch.gate_halts.load(Ordering::Relaxed) != ch_resumes(&running)
        {
            std::thread::sleep(Duration::from_millis(2));
        }
    }
    let Some((placed_seq, placed)) = placed_at else {
        panic!("no Ack: {answers:?}");
    };
    // Durable and final advance from the doubles' acks and certificates over the control port.
    let h = &running.handles;
    let t1 = Instant::now();
    while t1.elapsed() < Duration::from_secs(5)
        && (h.control.durable.load(Ordering::Relaxed) == 0
            || h.control.final_height.load(Ordering::Relaxed) < 5)
    {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(h.control.durable.load(Ordering::Relaxed) >= 1);
    assert!(h.control.final_height.load(Ordering::Relaxed) >= 5);
    // HashListReq for a block closed just now (lists are kept REP_SEQ_HASHLIST_MS): the order
    // hasher answers HashList parts for both substreams.
    let want = h.control.final_height.load(Ordering::Relaxed);
    let req = vyrn_wire::msg::ctrl::HashListReq { height: want }
        .to_bytes()
        .unwrap();
    fetcher
        .send_batch(&[TxPacket::to(&fseal(&req), Dest::Addr(ctrl))])
        .unwrap();
    fetcher.flush().unwrap();
    let mut streams = [false; 2];
    let mut rx = RxBatch::new(16, 9216);
    let t2 = Instant::now();
    while streams != [true; 2] && t2.elapsed() < Duration::from_secs(5) {
        if fetcher.recv_batch(&mut rx).unwrap() > 0 {
            for p in rx.iter() {
                let Ok((_, body)) = fopen.open(p.data) else {
                    continue;
                };
                if let Ok(vyrn_wire::msg::ctrl::CtrlMsg::HashList(l)) =
                    vyrn_wire::msg::ctrl::CtrlMsg::parse(body)
                {
                    assert_eq!(l.height, want);
                    streams[l.stream as usize] = true;
                }
            }
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    assert_eq!(streams, [true; 2], "no HashList for both substreams");
    // 07 §2.2: a NACK and a RepAck of another tenure are refused (counted), never answered.
    let stale = [
        vyrn_wire::msg::ctrl::Nack {
            epoch: c.epoch,
            tenure: 1,
            stream: 0,
            from_seq: 5,
            to_seq: 8,
        }
        .to_bytes()
        .unwrap(),
        vyrn_wire::msg::ctrl::RepAck {
            epoch: c.epoch,
            tenure: 1,
            contiguous_frame_seq: [1 << 30, 1 << 30],
            path_mask: 0b11,
        }
        .to_bytes()
        .unwrap(),
    ];
    for m in &stale {
        fetcher
            .send_batch(&[TxPacket::to(&fseal(m), Dest::Addr(ctrl))])
            .unwrap();
    }
    // 07 §4.10: a NACK's frames come back unicast to the address that sent it, flagged
    // retransmit (multicast on the paths they would reach every replica, not this one).
    let nack = vyrn_wire::msg::ctrl::Nack {
        epoch: c.epoch,
        tenure: 0,
        stream: 0,
        from_seq: 1,
        to_seq: 4,
    }
    .to_bytes()
    .unwrap();
    fetcher
        .send_batch(&[TxPacket::to(&fseal(&nack), Dest::Addr(ctrl))])
        .unwrap();
    fetcher.flush().unwrap();
    let mut got = Vec::new();
    let t5 = Instant::now();
    while got.len() < 4 && t5.elapsed() < Duration::from_secs(5) {
        if fetcher.recv_batch(&mut rx).unwrap() > 0 {
            for p in rx.iter() {
                if let Ok((fh, _)) = vyrn_wire::frame::FrameHeader::parse(p.data) {
                    assert_eq!(
                        p.meta.src,
                        Some(ctrl),
                        "retransmitted from the control port"
                    );
                    assert_ne!(fh.flags & vyrn_wire::frame::FLAG_RETRANSMIT, 0);
                    assert_eq!(fh.stream, 0);
                    got.push(fh.frame_seq);
                }
            }
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    got.sort_unstable();
    assert_eq!(
        got,
        vec![1, 2, 3, 4],
        "the NACKed frames, unicast to the NACK's sender (none for the other tenure's NACK)"
    );
    // 07 §5.5 source 3: SeqDataReq for the order placed above gets back the very bytes the
    // lane matched (from its retention), from the control port; an unknown packet gets nothing.
    let s0 = c.engine.sessions[0].session;
    for (seq, want) in [(placed_seq + 8, None), (placed_seq, Some(placed.clone()))] {
        let q = vyrn_wire::msg::ctrl::SeqDataReq {
            session: s0,
            pkt_seq: seq,
            pkt_hash: vyrn_wire::msg::client::pkt_hash(&placed).unwrap_or(0),
        }
        .to_bytes()
        .unwrap();
        fetcher
            .send_batch(&[TxPacket::to(&fseal(&q), Dest::Addr(ctrl))])
            .unwrap();
        fetcher.flush().unwrap();
        let mut answer = None;
        let t6 = Instant::now();
        while answer.is_none() && t6.elapsed() < Duration::from_millis(500) {
            if fetcher.recv_batch(&mut rx).unwrap() > 0 {
                for p in rx.iter() {
                    let Ok((_, body)) = fopen.open(p.data) else {
                        continue;
                    };
                    if let Ok(vyrn_wire::msg::ctrl::CtrlMsg::SeqData(d)) =
                        vyrn_wire::msg::ctrl::CtrlMsg::parse(body)
                    {
                        assert_eq!(p.meta.src, Some(ctrl));
                        assert_eq!((d.session, d.pkt_seq), (s0, seq));
                        answer = Some(d.pkt);
                    }
                }
            }
            std::thread::sleep(Duration::from_micros(200));
        }
        assert_eq!(answer, want, "SeqData for pkt_seq {seq}");
    }
    assert_eq!(h.retain.hits.load(Ordering::Relaxed), 1);
    assert_eq!(h.retain.misses.load(Ordering::Relaxed), 1);
    assert_eq!(running.stats.seq_data_sent.load(Ordering::Relaxed), 1);
    let st = running.stats.clone();
    assert!(st.hash_list_parts.load(Ordering::Relaxed) >= 2);
    assert_eq!(st.rtx_unicast.load(Ordering::Relaxed), 4);
    assert_eq!(st.rtx_unicast_failed.load(Ordering::Relaxed), 0);
    assert!(st.durable_marks.load(Ordering::Relaxed) >= 1);
    assert!(st.ctrl[0].load(Ordering::Relaxed) > 0 && st.ctrl[2].load(Ordering::Relaxed) > 0);
    assert_eq!(
        st.ctrl_bad.load(Ordering::Relaxed),
        2,
        "the other tenure's NACK and RepAck"
    );
    assert_eq!(st.frame_errors.load(Ordering::Relaxed), 0);
    assert!(!h.words.fenced());
    let names: Vec<String> = running.runner.stats.iter().map(|s| s.0.clone()).collect();
    for t in [
        "lane0", "lane1", "cut", "bbo", "streamA", "streamB", "tx", "hasher", "control", "rx",
        "ctrl-rx",
    ] {
        assert!(
            names.iter().any(|n| n == t),
            "tile {t} missing from {names:?}"
        );
    }
    // 07 §7.4: a `Diverge` halts the book — from a registered voter's address only.
    let div = vyrn_wire::msg::ctrl::Diverge {
        epoch: c.epoch,
        index: 0,
        reason: vyrn_wire::msg::ctrl::DivergeReason::Timeout,
        digests: Vec::new(),
    }
    .to_bytes()
    .unwrap();
    let unknown_before = st.ctrl_unknown.load(Ordering::Relaxed);
    let mut stranger = UdpPort::open(&UdpConfig::loopback().with_batch(16)).unwrap();
    stranger
        .send_batch(&[TxPacket::to(&div, Dest::Addr(ctrl))])
        .unwrap();
    stranger.flush().unwrap();
    let t3 = Instant::now();
    while st.ctrl_unknown.load(Ordering::Relaxed) == unknown_before
        && t3.elapsed() < Duration::from_secs(5)
    {
        std::thread::sleep(Duration::from_millis(1));
    }
    assert!(st.ctrl_unknown.load(Ordering::Relaxed) > unknown_before);
    std::thread::sleep(Duration::from_millis(5));
    assert_eq!(h.control.diverge_halts.load(Ordering::Relaxed), 0);
    let (pkt, _) = order(&c, 1, 6);
    let got = answer_of(&mut client, to, &pkt, &c.engine.sessions[1].k_out, 6);
    // The book answers. Under CPU contention the voter doubles may finalize late and the
    // finality gate halt the book for a moment (07 §6.8, `gate_halts`): that halt is not the
    // Diverge's, which `diverge_halts` (0, above) rules out.
    let t5 = Instant::now();
    while got
        != Some(Record::Ack {
            msg_index: 0,
            client_tag: 6,
        })
        && h.control.gate_halts.load(Ordering::Relaxed) == 0
        && t5.elapsed() < Duration::from_millis(500)
    {
        std::thread::sleep(Duration::from_millis(1));
    }
    let gate_halted = h.control.gate_halts.load(Ordering::Relaxed) > 0;
    assert!(
        got == Some(Record::Ack {
            msg_index: 0,
            client_tag: 6
        }) || (gate_halted
            && matches!(
                got,
                Some(Record::Reject {
                    code: vyrn_wire::msg::client::RejectCode::BookHalted,
                    ..
                })
            )),
        "a stranger's Diverge halts nothing: {got:?} (fenced {}, finality gate halts {})",
        h.words.fenced(),
        h.control.gate_halts.load(Ordering::Relaxed)
    );
    // A registered address's Diverge with no evidence (the review's 15 bytes, a timeout from
    // one source): counted, no halt (security review F3).
    fetcher
        .send_batch(&[TxPacket::to(&fseal(&div), Dest::Addr(ctrl))])
        .unwrap();
    fetcher.flush().unwrap();
    let t35 = Instant::now();
    while st.diverge_pending.load(Ordering::Relaxed) == 0 && t35.elapsed() < Duration::from_secs(5)
    {
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(st.diverge_pending.load(Ordering::Relaxed), 1);
    std::thread::sleep(Duration::from_millis(5));
    assert_eq!(h.control.diverge_halts.load(Ordering::Relaxed), 0);
    // Evidence that checks halts the book.
    fetcher
        .send_batch(&[TxPacket::to(&fseal(&evidence), Dest::Addr(ctrl))])
        .unwrap();
    fetcher.flush().unwrap();
    let t4 = Instant::now();
    while h.control.diverge_halts.load(Ordering::Relaxed) == 0
        && t4.elapsed() < Duration::from_secs(5)
    {
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(h.control.diverge_halts.load(Ordering::Relaxed), 1);
    assert_eq!(st.diverge_msgs.load(Ordering::Relaxed), 2);
    assert_eq!(st.diverge_refused.load(Ordering::Relaxed), 0);
    let (pkt, _) = order(&c, 2, 7);
    assert_eq!(
        answer(&mut client, to, &pkt, &c.engine.sessions[2].k_out, 7),
        Some(vyrn_wire::msg::client::RejectCode::BookHalted),
        "a voter's Diverge halted the book"
    );
    running.runner.stop();
    voters.stop.store(true, Ordering::Relaxed);
    let doubles = voters.handle.join().unwrap();
    for d in &doubles {
        assert_eq!(d.faults(), (0, 0));
        assert!(d.headers_ok() >= 5);
    }
}

#[test]
fn ref_lanes_listen_on_their_own_ports() {
    let _one = ONE_BOX.lock().unwrap_or_else(|e| e.into_inner());
    let mut c = config("ref");
    // No voters here: no blocks, so the finality gate never halts the book.
    c.block_ns = u64::MAX;
    let net = NetBox::open(&c, true).expect("ports");
    let ports = net.client_addrs();
    assert_eq!(ports.len(), c.engine.layout.n_lanes as usize);
    let map = CoreMap::Shared {
        threads: 2,
        cores: Vec::new(),
    };
    let (running, _paths) = net.start(&c, &map, Clock::new()).expect("starts");
    let mut client = UdpPort::open(&UdpConfig::loopback().with_batch(16)).unwrap();
    // A session of lane 1: sent to lane 0's port it is dropped; to lane 1's port it is acked.
    let ix = c
        .engine
        .sessions
        .iter()
        .position(|s| s.lane == 1)
        .expect("a lane-1 session");
    let (pkt, lane) = order(&c, ix, 7);
    assert_eq!(lane, 1);
    let k_out = c.engine.sessions[ix].k_out;
    client
        .send_batch(&[TxPacket::to(&pkt, Dest::Addr(ports[0]))])
        .unwrap();
    client.flush().unwrap();
    let t0 = Instant::now();
    while running.stats.rx_wrong_port.load(Ordering::Relaxed) == 0
        && t0.elapsed() < Duration::from_secs(5)
    {
        std::thread::sleep(Duration::from_millis(1));
    }
    let wrong = running.stats.rx_wrong_port.load(Ordering::Relaxed);
    assert_eq!(wrong, 1, "the packet on lane 0's port was not counted");
    // Bad input is counted and dropped, and the box goes on answering.
    // Too short to name a session, longer than any request, longer than a receive slot, and a
    // session that does not exist.
    let mut long = pkt.clone();
    long.resize(240, 0);
    for junk in [vec![1u8, 2, 3], long, vec![0u8; 2000], vec![0xFF; 64]] {
        client
            .send_batch(&[TxPacket::to(&junk, Dest::Addr(ports[1]))])
            .unwrap();
    }
    client.flush().unwrap();
    let t1 = Instant::now();
    while (running.stats.rx_unknown.load(Ordering::Relaxed) < 2
        || running.stats.rx_too_long.load(Ordering::Relaxed) < 1
        || running.stats.rx_truncated.load(Ordering::Relaxed) < 1)
        && t1.elapsed() < Duration::from_secs(5)
    {
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(running.stats.rx_too_long.load(Ordering::Relaxed), 1);
    assert_eq!(running.stats.rx_truncated.load(Ordering::Relaxed), 1);
    assert_eq!(running.stats.rx_unknown.load(Ordering::Relaxed), 2);
    assert!(
        acked(&mut client, ports[1], &pkt, &k_out, 7),
        "no Ack on lane 1's port"
    );
    running.runner.stop();
}

/// Security review F13: a data box's 07 §5.2 reports (`DataBadMac`, `CopyConflict` and its
/// evidence frame) reach the box's control port, from the data box's ephemeral port, sealed under
/// its `link_key`; bare, forged or replayed ones are dropped as from an unknown source.
#[test]
fn a_data_boxs_sealed_reports_reach_the_box_and_nothing_else_does() {
    let _one = ONE_BOX.lock().unwrap_or_else(|e| e.into_inner());
    use vyrn_wire::msg::ctrl::{CopyConflict, DataBadMac};
    let dir = std::env::temp_dir().join(format!("vyrn-ports-f13-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let file = vyrn_seq::boxcfg::write_dev_home(&dir, 2, 2, 46_400).unwrap();
    let mut c = BoxConfig::load(&file).unwrap();
    // No voters registered and no blocks: the box only listens.
    c.block_ns = u64::MAX;
    let net = NetBox::open(&c, false).expect("ports");
    let ctrl = net.ctrl_addr().unwrap();
    let map = CoreMap::Shared {
        threads: 2,
        cores: Vec::new(),
    };
    let (running, _paths) = net.start(&c, &map, Clock::new()).expect("starts");
    let st = running.stats.clone();
    let seed = vyrn_seq::boxcfg::read_seed(&dir.join("keys/databox-0.key")).unwrap();
    let me = ed25519_dalek::SigningKey::from_bytes(seed.expose());
    let link = seal::LinkKey::agree(&me, &c.seq_public()).unwrap();
    let mut s = seal::Sealer::new(seal::from::databox(0), c.epoch, 1_000);
    let bad_mac = DataBadMac {
        session: 1,
        pkt_seq: 7,
    }
    .to_bytes()
    .unwrap();
    let conflict = CopyConflict {
        session: 1,
        pkt_seq: 8,
        h1: [1; 32],
        h2: [2; 32],
    }
    .to_bytes()
    .unwrap();
    let evidence = [0x50u8, 0x44, 1, 0, 0, 0];
    let sock = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let sealed_bad_mac = s.seal_bytes(&link, &bad_mac);
    for m in [
        sealed_bad_mac.clone(),
        s.seal_bytes(&link, &conflict),
        s.seal_bytes(&link, &evidence),
    ] {
        sock.send_to(&m, ctrl).unwrap();
    }
    // Bare, under another key, as data box 1 (the home has none), and a replay.
    let mut s1 = seal::Sealer::new(seal::from::databox(1), c.epoch, 1_000);
    for m in [
        bad_mac.clone(),
        s.seal_bytes(&seal::LinkKey::from_bytes([3; 32]), &bad_mac),
        s1.seal_bytes(&link, &bad_mac),
        sealed_bad_mac,
    ] {
        sock.send_to(&m, ctrl).unwrap();
    }
    let load = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed);
    let t = Instant::now();
    while load(&st.ctrl_unknown) < 4 && t.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(2));
    }
    running.runner.stop();
    assert_eq!(
        (
            load(&st.data_bad_mac),
            load(&st.copy_conflicts),
            load(&st.conflict_evidence)
        ),
        (1, 1, 1)
    );
    assert_eq!(load(&st.ctrl_unknown), 4);
    assert_eq!(load(&st.ctrl_bad), 0);
    let _ = std::fs::remove_dir_all(&dir);
}
