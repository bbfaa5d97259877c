//! Bad packets of every kind are dropped with their own typed error and counter, never a
//! panic; arbitrary bytes into ingest and control keep the accounting identity.

mod common;

use common::*;
use proptest::prelude::*;
use vyrn_data::{Accepted, CtrlError, DataBox, IngestError};
use vyrn_wire::error::Malformed;
use vyrn_wire::msg::client::siphash128;

fn boxed() -> DataBox {
    DataBox::new(&config(8, 4096)).unwrap()
}

/// Re-tag a packet after editing it, so only the edit is wrong.
fn retag(p: &mut [u8], session: u32) {
    let n = p.len() - 16;
    let t = siphash128(&k_seq(session), &p[..n]);
    p[n..].copy_from_slice(&t);
}

#[test]
fn every_bad_kind_has_its_error_and_counter() {
    let mut b = boxed();
    let good = packet(101, 1, 2, 1, false);
    let mut cases: Vec<(Vec<u8>, IngestError)> = Vec::new();
    cases.push((vec![], IngestError::BadLen));
    cases.push((good[..47].to_vec(), IngestError::BadLen));
    cases.push((good[..good.len() - 1].to_vec(), IngestError::BadLen));
    let mut long = good.clone();
    long.push(0);
    cases.push((long, IngestError::BadLen));
    let mut c0 = good.clone();
    c0[2] = 0;
    cases.push((c0, IngestError::BadCount));
    let mut c11 = good.clone();
    c11[2] = 11;
    cases.push((c11, IngestError::BadCount));
    let mut c3 = good.clone();
    c3[2] = 3; // count 3 needs 80 bytes, the packet has 64
    cases.push((c3, IngestError::BadLen));
    let mut fl = good.clone();
    fl[3] = 2;
    retag(&mut fl, 101);
    cases.push((fl, IngestError::BadFlags));
    let mut rs = good.clone();
    rs[13] = 1;
    retag(&mut rs, 101);
    cases.push((rs, IngestError::BadReserved));
    let mut sq = good.clone();
    sq[8..12].copy_from_slice(&0u32.to_le_bytes());
    retag(&mut sq, 101);
    cases.push((sq, IngestError::BadSeq));
    let mut bk = good.clone();
    bk[0..2].copy_from_slice(&8u16.to_le_bytes());
    retag(&mut bk, 101);
    cases.push((bk, IngestError::BadBook));
    let mut us = good.clone();
    us[4..8].copy_from_slice(&999u32.to_le_bytes());
    retag(&mut us, 999);
    cases.push((us, IngestError::UnknownSession));
    let mut tg = good.clone();
    tg[20] ^= 1; // a message byte: the tag no longer verifies
    cases.push((tg, IngestError::BadMac));
    let mut wk = good.clone();
    retag(&mut wk, 102); // tagged under another session's key
    cases.push((wk, IngestError::BadMac));

    for (p, want) in &cases {
        assert_eq!(b.on_packet(p, None, 0), Err(*want), "{want:?}");
    }
    // The good packet, then its duplicate, its resend, and a late one.
    assert!(matches!(
        b.on_packet(&good, None, 0),
        Ok(Accepted::Stored { .. })
    ));
    assert_eq!(b.on_packet(&good, None, 0), Err(IngestError::Duplicate));
    let resend = packet(101, 1, 2, 1, true);
    assert_eq!(b.on_packet(&resend, None, 0), Err(IngestError::Duplicate));
    assert!(b.on_packet(&packet(101, 300, 1, 1, false), None, 0).is_ok());
    assert_eq!(
        b.on_packet(&packet(101, 2, 1, 1, false), None, 0),
        Err(IngestError::Late)
    );

    let c = *b.counters();
    assert!(c.balanced(), "{c}");
    let counted: Vec<(&str, u64)> = c.iter().filter(|(n, _)| n.starts_with("drop_")).collect();
    for (name, v) in counted {
        let want = cases.iter().filter(|(_, e)| e.counter() == name).count() as u64
            + match name {
                "drop_duplicate" => 2,
                "drop_late" => 1,
                _ => 0,
            };
        assert_eq!(v, want, "{name}");
    }
    assert_eq!(c.stored, 2);
    assert_eq!(c.bad_mac_reports, 2);
    // Nothing malformed reached the ring or a frame.
    b.flush(10_000);
    assert_eq!(c.rx_packets, cases.len() as u64 + 5);
}

/// A flood of bad tags under one claimed session makes at most `BAD_MAC_REPORTS_PER_S`
/// `DataBadMac` reports a second toward the sequencer; another session's are not affected,
/// and the next second has its share again. Every packet is still dropped and counted.
#[test]
fn a_bad_tag_flood_under_one_session_reports_only_its_share() {
    let mut b = boxed();
    let per_s = vyrn_data::BAD_MAC_REPORTS_PER_S as u64;
    let bad = |session: u32, seq: u32| {
        let mut p = packet(session, seq, 1, 1, false);
        let n = p.len() - 1;
        p[n] ^= 1;
        p
    };
    for i in 0..1000u32 {
        assert_eq!(
            b.on_packet(&bad(101, 1 + i), None, 1_000),
            Err(IngestError::BadMac)
        );
    }
    // The reports went out (the control share of the out buffers is free again).
    b.out().clear();
    assert_eq!(
        b.on_packet(&bad(102, 1), None, 2_000),
        Err(IngestError::BadMac)
    );
    let c = *b.counters();
    assert_eq!(c.drop_bad_mac, 1001);
    assert_eq!(c.bad_mac_reports, per_s + 1, "{c}");
    assert_eq!(c.bad_mac_over_share, 1000 - per_s);
    assert!(c.balanced(), "{c}");
    // The next second: the session's share again.
    b.out().clear();
    assert_eq!(
        b.on_packet(&bad(101, 5000), None, 1_000_000_000),
        Err(IngestError::BadMac)
    );
    assert_eq!(b.counters().bad_mac_reports, per_s + 2);
}

#[test]
fn control_messages_bad_and_unexpected() {
    let mut b = boxed();
    assert_eq!(
        b.on_ctrl(0, &[], 0),
        Err(CtrlError::Malformed(Malformed::Truncated))
    );
    assert_eq!(
        b.on_ctrl(0, &[0x05, 1, 2], 0),
        Err(CtrlError::Malformed(Malformed::Truncated))
    );
    // A reversed range.
    let mut r = vec![0x05];
    r.extend_from_slice(&9u64.to_le_bytes());
    r.extend_from_slice(&3u64.to_le_bytes());
    assert_eq!(
        b.on_ctrl(0, &r, 0),
        Err(CtrlError::Malformed(Malformed::BadValue))
    );
    // DataRedirect with from == to.
    assert_eq!(
        b.on_ctrl(0, &[0x10, 4, 4, 0, 0, 0, 0, 0, 0, 0, 0], 0),
        Err(CtrlError::Malformed(Malformed::BadValue))
    );
    // Trailing bytes after a DataDown.
    assert_eq!(
        b.on_ctrl(0, &[0x0F, 4, 0], 0),
        Err(CtrlError::Malformed(Malformed::BadLength))
    );
    assert_eq!(
        b.on_ctrl(0, &[0x01; 23], 0),
        Err(CtrlError::Unexpected(0x01))
    );
    let c = b.counters();
    assert_eq!((c.ctrl_rx, c.ctrl_malformed, c.ctrl_unexpected), (6, 5, 1));
}

/// Ring eviction seen from the outside: fetches of evicted packets and frames say so, and a
/// repeat of an evicted packet inside its window is dropped as such, never compared with
/// another packet.
#[test]
fn ring_eviction_fetch_and_repeat() {
    let mut cfg = config(2, 32);
    cfg.batch_ns = 1;
    let mut b = DataBox::new(&cfg).unwrap();
    let mut now = 0;
    for q in 1..=100u32 {
        now += 10;
        assert!(b.on_packet(&packet(100, q, 1, 1, false), None, now).is_ok());
        b.poll(now + 5); // one frame per packet: batch_ns = 1
    }
    b.out().clear();
    let c = *b.counters();
    assert_eq!(c.ring_evicted, 100 - 32);
    assert_eq!(c.frames_data, 100);
    // pkt_seq 60 is inside the window (hi 100) but left the ring (it keeps 69..=100).
    assert_eq!(
        b.on_packet(&packet(100, 60, 1, 1, false), None, now),
        Err(IngestError::RepeatEvicted)
    );
    assert!(b.store().by_key(100, 68).is_none());
    assert_eq!(b.store().by_key(100, 69).unwrap().pkt_seq, 69);
    // Key fetch: evicted → no answer; live → answered.
    let key = |q: u32| {
        vyrn_wire::msg::ctrl::DataFetch::Key(vyrn_wire::msg::PktKey {
            session: 100,
            pkt_seq: q,
        })
        .to_bytes()
        .unwrap()
    };
    b.on_ctrl(0, &key(10), now).unwrap();
    b.on_ctrl(0, &key(99), now).unwrap();
    // Range over frames 60..=75: 60..=68 are gone (empty), 69..=75 answered.
    let range = vyrn_wire::msg::ctrl::DataFetch::Range { from: 60, to: 75 }
        .to_bytes()
        .unwrap();
    b.on_ctrl(0, &range, now).unwrap();
    let c = *b.counters();
    assert_eq!((c.fetch_key_hits, c.fetch_key_misses), (1, 1));
    assert_eq!((c.fetch_range_gone, c.fetch_range_frames), (9, 7));
    let out = b.out();
    assert_eq!(out.len(), 1 + 16);
    for i in 1..out.len() {
        let (_, bytes, _) = out.get(i).unwrap();
        let f = vyrn_wire::msg::data::DataFrame::parse(bytes).unwrap();
        let seq = f.header.data_seq;
        let pk: Vec<&[u8]> = f.packets().collect();
        if seq < 69 {
            assert!(pk.is_empty());
        } else {
            assert_eq!(pk.len(), 1);
            assert_eq!(key_of(pk[0]), (100, seq as u32), "frame k holds packet k");
        }
    }
}

/// Dedupe window edges at the box: a jump over 256 makes everything older late; packets out
/// of order inside the window are stored.
#[test]
fn window_edges_at_the_box() {
    let mut b = boxed();
    for q in [5u32, 3, 4, 1, 2] {
        assert!(b.on_packet(&packet(100, q, 1, 1, false), None, 0).is_ok());
    }
    assert!(b
        .on_packet(&packet(100, 1000, 1, 1, false), None, 0)
        .is_ok());
    for q in [6u32, 744] {
        assert_eq!(
            b.on_packet(&packet(100, q, 1, 1, false), None, 0),
            Err(IngestError::Late),
            "{q}"
        );
    }
    assert!(b.on_packet(&packet(100, 745, 1, 1, false), None, 0).is_ok());
    assert!(b.on_packet(&packet(100, 999, 1, 1, false), None, 0).is_ok());
    assert_eq!(b.dedupe().window(0).hi(), 1000);
    // Another session's window is independent.
    assert!(b.on_packet(&packet(101, 6, 1, 1, false), None, 0).is_ok());
    let c = b.counters();
    assert_eq!((c.stored, c.drop_late), (9, 2));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Arbitrary bytes never panic ingest, are never stored, and are always counted.
    #[test]
    fn arbitrary_bytes_into_ingest(pkts in proptest::collection::vec(
        proptest::collection::vec(any::<u8>(), 0..260), 1..20))
    {
        let mut b = boxed();
        for p in &pkts {
            let r = b.on_packet(p, None, 0);
            prop_assert!(r.is_err(), "random bytes carry no valid tag");
        }
        prop_assert!(b.counters().balanced());
        prop_assert_eq!(b.counters().rx_packets, pkts.len() as u64);
    }

    /// A valid packet with any one byte changed is never stored: it fails a structural check
    /// or the MAC.
    #[test]
    fn mutated_packets_are_dropped(count in 1usize..=10, pos in any::<usize>(), x in 1u8..=255) {
        let mut b = boxed();
        let mut p = packet(103, 7, count, 3, false);
        let i = pos % p.len();
        p[i] ^= x;
        let r = b.on_packet(&p, None, 0);
        prop_assert!(r.is_err());
        prop_assert_eq!(b.counters().stored, 0);
        prop_assert!(b.counters().balanced());
    }

    /// Arbitrary control messages never panic.
    #[test]
    fn arbitrary_ctrl(msgs in proptest::collection::vec(
        proptest::collection::vec(any::<u8>(), 0..40), 1..20), from in 0usize..5)
    {
        let mut b = boxed();
        b.on_packet(&packet(100, 1, 1, 1, false), None, 0).unwrap();
        for m in &msgs {
            let _ = b.on_ctrl(from, m, 0);
        }
        let c = b.counters();
        prop_assert_eq!(c.ctrl_rx, msgs.len() as u64);
    }
}

#[test]
fn config_errors_are_typed() {
    use vyrn_data::ConfigError as E;
    let ok = config(4, 1024);
    assert_eq!(ok.validate(), Ok(()));
    let check = |f: &dyn Fn(&mut vyrn_data::DataConfig), want: E| {
        let mut c = config(4, 1024);
        f(&mut c);
        assert_eq!(c.validate(), Err(want.clone()));
        assert_eq!(DataBox::new(&c).err(), Some(want));
    };
    check(&|c| c.boxes.clear(), E::BoxCount(0));
    check(&|c| c.boxes.push(3), E::DuplicateBox(3));
    check(&|c| c.index = 9, E::IndexNotInBoxes(9));
    check(&|c| c.books.clear(), E::BookCount(0));
    check(&|c| c.books.push(BOOK), E::DuplicateBook(BOOK));
    check(&|c| c.sessions.clear(), E::SessionCount(0));
    check(
        &|c| {
            let s = c.sessions[0].clone();
            c.sessions.push(s)
        },
        E::DuplicateSession(100),
    );
    check(
        &|c| c.sessions[1].home = 7,
        E::UnknownHome {
            session: 101,
            home: 7,
        },
    );
    check(&|c| c.dests.clear(), E::DestCount(0));
    check(
        &|c| c.quorum = 5,
        E::Quorum {
            quorum: 5,
            voters: 4,
        },
    );
    check(
        &|c| c.quorum = 0,
        E::Quorum {
            quorum: 0,
            voters: 4,
        },
    );
    check(&|c| c.ring.seconds = 0, E::RingEmpty);
    check(
        &|c| c.ring.max_bytes = 1000,
        E::RingTooLarge {
            // 1024 × (232 + 32) + 2 × 4096 × 16
            bytes: 1024 * 264 + 131072,
            max_bytes: 1000,
        },
    );
    check(&|c| c.batch_ns = 0, E::BatchZero);
    check(&|c| c.hb_ns = 0, E::HeartbeatZero);
    check(&|c| c.out_slots = 2, E::OutSlots(2));
    assert!(E::RingEmpty.to_string().contains("ring"));
}

/// Regression (fuzz, fuzz/regressions/data_ingest): huge fetch ranges once overflowed a
/// counter. A range is clamped to FETCH_RANGE_MAX frames and counted once per request.
#[test]
fn huge_fetch_ranges_are_clamped() {
    let mut b = boxed();
    let mut now = 0;
    for q in 1..=3u32 {
        now += 10_000;
        b.on_packet(&packet(100, q, 1, 1, false), None, now)
            .unwrap();
        b.poll(now + 6_000);
    }
    let r = vyrn_wire::msg::ctrl::DataFetch::Range {
        from: 0,
        to: u64::MAX,
    }
    .to_bytes()
    .unwrap();
    for _ in 0..3 {
        b.on_ctrl(1, &r, now).unwrap();
    }
    let c = b.counters();
    assert_eq!(c.fetch_range_reqs, 3);
    assert_eq!(c.fetch_range_clamped, 3);
    assert_eq!(c.fetch_range_frames, 9, "frames 1..=3, three times");
}

/// A data box on UDP ports with a packet in its ring to fetch, its socket for voter 0 taking
/// that voter's address only; the voter's port and that socket's address.
fn voter_socket_box() -> (
    vyrn_data::Driver<vyrn_nic::udp::UdpPort>,
    vyrn_nic::udp::UdpPort,
    std::net::SocketAddr,
) {
    use vyrn_nic::udp::{UdpConfig, UdpPort};
    let open = || UdpPort::open(&UdpConfig::loopback().with_batch(16)).unwrap();
    let voter = open();
    let cfg = config(8, 4096);
    let mut dests: Vec<UdpPort> = (0..cfg.dests.len()).map(|_| open()).collect();
    let at = dests[0].local_addr().unwrap();
    let mut b = DataBox::new(&cfg).unwrap();
    assert!(b.on_packet(&packet(101, 1, 2, 1, false), None, 1).is_ok());
    b.flush(2);
    let mut d = vyrn_data::Driver::new(b, open(), open(), std::mem::take(&mut dests), 16).unwrap();
    d.expect_source(0, voter.local_addr().unwrap());
    (d, voter, at)
}

/// Security review F4: a voter's socket answers that voter only. A `DataFetch` from a stranger
/// (170 bytes of requests produced 1.1 MB to a voter) and forged `DataDown`s get no answer and
/// move nothing; the same fetch from the voter's own address is answered.
#[test]
fn a_voters_socket_answers_that_voter_only() {
    use vyrn_nic::udp::{UdpConfig, UdpPort};
    use vyrn_nic::{Dest, Port, RxBatch, TxPacket};
    use vyrn_wire::msg::ctrl::{DataDown, DataFetch};
    let (mut d, mut voter, at) = voter_socket_box();
    let mut stranger = UdpPort::open(&UdpConfig::loopback().with_batch(16)).unwrap();
    let fetch = DataFetch::Range { from: 1, to: 64 }.to_bytes().unwrap();
    let down = DataDown { d: 3 }.to_bytes().unwrap();
    for m in [&fetch, &down, &down, &down] {
        stranger
            .send_batch(&[TxPacket::to(m, Dest::Addr(at))])
            .unwrap();
    }
    stranger.flush().unwrap();
    let mut rx = RxBatch::new(16, 9216);
    let t = std::time::Instant::now();
    while d.databox.counters().ctrl_foreign < 4 && t.elapsed().as_secs() < 5 {
        d.poll(3);
    }
    assert_eq!(d.databox.counters().ctrl_foreign, 4);
    assert_eq!(d.databox.counters().fetch_range_reqs, 0);
    assert_eq!(d.databox.counters().data_down_votes, 0);
    std::thread::sleep(std::time::Duration::from_millis(20));
    assert_eq!(stranger.recv_batch(&mut rx).unwrap_or(0), 0, "no answer");
    // The voter's own fetch is answered.
    voter
        .send_batch(&[TxPacket::to(&fetch, Dest::Addr(at))])
        .unwrap();
    voter.flush().unwrap();
    let t = std::time::Instant::now();
    while d.databox.counters().fetch_range_reqs == 0 && t.elapsed().as_secs() < 5 {
        d.poll(4);
    }
    assert_eq!(d.databox.counters().fetch_range_reqs, 1);
}

/// With the member envelope required, a voter's socket takes only what
/// that voter sealed under its link key: from the voter's own address, a bare `DataDown` (what
/// a spoofer of the address sends), one sealed under another key, one naming another voter and
/// a replay of a sealed one are all refused before parsing; the voter's sealed fetch is served.
#[test]
fn a_voters_socket_takes_only_what_that_voter_sealed() {
    use ed25519_dalek::SigningKey;
    use vyrn_nic::udp::UdpPort;
    use vyrn_nic::{Dest, Port, TxPacket};
    use vyrn_wire::msg::ctrl::{DataDown, DataFetch};
    use vyrn_wire::msg::seal::{from, LinkKey, Opener, Sealer};
    let (mut d, mut voter, at) = voter_socket_box();
    let cfg = config(8, 4096);
    let (me, v0) = (
        SigningKey::from_bytes(&[3; 32]),
        SigningKey::from_bytes(&[4; 32]),
    );
    let link = LinkKey::agree(&me, &v0.verifying_key()).unwrap();
    assert_eq!(
        format!("{link:?}"),
        "LinkKey(..)",
        "a link key never prints its bytes"
    );
    let mut o = Opener::new(cfg.epoch);
    o.add(
        from::voter(0),
        LinkKey::agree(&v0, &me.verifying_key()).unwrap(),
    );
    d.expect_sealed(0, o);
    let fetch = DataFetch::Range { from: 1, to: 64 }.to_bytes().unwrap();
    let down = DataDown { d: 3 }.to_bytes().unwrap();
    let mut s0 = Sealer::new(from::voter(0), cfg.epoch, 100);
    let mut s1 = Sealer::new(from::voter(1), cfg.epoch, 100);
    let sealed_down = s0.seal_bytes(&link, &down);
    let wrong_key = s0.seal_bytes(&LinkKey::from_bytes([9; 32]), &down);
    let wrong_sender = s1.seal_bytes(&link, &down);
    let send = |p: &mut UdpPort, m: &[u8]| {
        p.send_batch(&[TxPacket::to(m, Dest::Addr(at))]).unwrap();
        p.flush().unwrap();
    };
    send(&mut voter, &down);
    send(&mut voter, &sealed_down);
    for m in [&wrong_key, &wrong_sender, &sealed_down] {
        send(&mut voter, m);
    }
    let t = std::time::Instant::now();
    while (d.databox.counters().ctrl_unsealed < 1 || d.databox.counters().ctrl_bad_seal < 3)
        && t.elapsed().as_secs() < 5
    {
        d.poll(3);
    }
    let c = d.databox.counters();
    assert_eq!((c.ctrl_unsealed, c.ctrl_bad_seal), (1, 3));
    assert_eq!(c.data_down_votes, 1, "only the one sealed DataDown counted");
    send(&mut voter, &s0.seal_bytes(&link, &fetch));
    let t = std::time::Instant::now();
    while d.databox.counters().fetch_range_reqs == 0 && t.elapsed().as_secs() < 5 {
        d.poll(4);
    }
    assert_eq!(d.databox.counters().fetch_range_reqs, 1);
}

/// Security review F6: the address a session's redirects go to is learned from its fresh
/// packets only: a replayed copy of an old one (a repeat), from another address, moves nothing;
/// the client's next fresh packet from a new port does.
#[test]
fn a_replayed_copy_never_moves_a_sessions_address() {
    let mut b = boxed();
    let client: std::net::SocketAddr = "127.0.0.1:40001".parse().unwrap();
    let attacker: std::net::SocketAddr = "127.0.0.1:40666".parse().unwrap();
    let p1 = packet(101, 1, 2, 1, false);
    assert!(b.on_packet(&p1, Some(client), 1).is_ok());
    assert_eq!(b.session_addr(101), Some(client));
    // The same packet replayed by the attacker, and its resend form: no move.
    let _ = b.on_packet(&p1, Some(attacker), 2);
    let _ = b.on_packet(&packet(101, 1, 2, 1, true), Some(attacker), 3);
    assert_eq!(b.session_addr(101), Some(client));
    // A fresh packet from a new port moves it.
    let moved: std::net::SocketAddr = "127.0.0.1:40002".parse().unwrap();
    assert!(b
        .on_packet(&packet(101, 2, 1, 1, false), Some(moved), 4)
        .is_ok());
    assert_eq!(b.session_addr(101), Some(moved));
}
