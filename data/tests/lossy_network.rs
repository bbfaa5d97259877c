//! The data box against a lossy, duplicating, reordering network (`nic::Lossy` over
//! `MemPort`, seeded): every packet stored once, conflicts detected with both packets as
//! evidence, bad MACs reported, gaps fetched and answered, counters exact.

mod common;

use std::collections::{HashMap, HashSet};

use common::*;
use vyrn_data::{DataBox, Driver};
use vyrn_nic::lossy::{LossConfig, Lossy};
use vyrn_nic::mem::MemPort;
use vyrn_nic::{Port, RxBatch};
use vyrn_wire::msg::client::{full_hash, Request};
use vyrn_wire::msg::ctrl::{CopyConflict, DataBadMac, DataFetch};
use vyrn_wire::msg::data::{DataFrame, DataKind};

const QCAP: usize = 1 << 14;
const MTU: usize = 9216;

struct Net {
    driver: Driver<Box<dyn Port>>,
    client: Lossy<MemPort>,
    seq: MemPort,
    replicas: Vec<Replica>,
}

fn net(seed: u64, n_sessions: u32, ring: u64, lossy: bool) -> Net {
    let cfg = config(n_sessions, ring);
    let databox = DataBox::new(&cfg).expect("valid config");
    // Client → box: duplicates and reordering, no loss (so the ground truth is known).
    let (client, box_clients) = MemPort::pair(QCAP, MTU);
    let client = Lossy::tx_only(
        client,
        LossConfig::seeded(seed).with_dup(0.25).with_reorder(0.2, 3),
    )
    .unwrap();
    let (box_seq, seq) = MemPort::pair(QCAP, MTU);
    let mut dests: Vec<Box<dyn Port>> = Vec::new();
    let mut replicas = Vec::new();
    for i in 0..cfg.dests.len() as u64 {
        let (b, r) = MemPort::pair(QCAP, MTU);
        // Box → replica: 10% loss, duplicates, reordering. Replica → box: 10% loss.
        let mut loss = LossConfig::seeded(seed ^ ((i + 1) * 0x1234));
        let mut back = LossConfig::seeded(seed ^ ((i + 1) * 0x9876));
        if lossy {
            loss = loss.with_drop(0.1).with_dup(0.1).with_reorder(0.1, 2);
            back = back.with_drop(0.1);
        }
        dests.push(Box::new(Lossy::tx_only(b, loss).unwrap()));
        replicas.push(Replica::new(Box::new(Lossy::tx_only(r, back).unwrap())));
    }
    let clients: Box<dyn Port> = Box::new(box_clients);
    let seq_ctrl: Box<dyn Port> = Box::new(box_seq);
    let driver = Driver::new(databox, clients, seq_ctrl, dests, 64).unwrap();
    Net {
        driver,
        client,
        seq,
        replicas,
    }
}

/// Drain what the box sent to the sequencer's control port: bad-MAC reports and conflicts with
/// their evidence frames.
/// A `CopyConflict` and the packets of its evidence frame.
type Conflict = (CopyConflict, Vec<Vec<u8>>);

fn seq_msgs(seq: &mut MemPort) -> (Vec<DataBadMac>, Vec<Conflict>) {
    let mut rx = RxBatch::new(64, MTU);
    let mut bad = Vec::new();
    let mut conflicts = Vec::new();
    let mut pending: Option<CopyConflict> = None;
    while seq.recv_batch(&mut rx).unwrap() > 0 {
        for p in rx.iter() {
            if let Ok(m) = DataBadMac::parse(p.data) {
                bad.push(m);
            } else if let Ok(c) = CopyConflict::parse(p.data) {
                assert!(pending.is_none(), "evidence follows each CopyConflict");
                pending = Some(c);
            } else {
                let f = DataFrame::parse(p.data).expect("evidence frame");
                assert_eq!(f.header.kind, DataKind::FetchResp);
                assert_eq!(f.header.data_seq, 0);
                let c = pending.take().expect("evidence after its CopyConflict");
                conflicts.push((c, f.packets().map(|b| b.to_vec()).collect()));
            }
        }
    }
    assert!(pending.is_none());
    (bad, conflicts)
}

#[test]
fn lossy_network_every_packet_stored_once() {
    for seed in [1u64, 2, 3] {
        run(seed);
    }
}

fn run(seed: u64) {
    let n_sessions = 40;
    let mut n = net(seed, n_sessions, 1 << 16, true);
    let mut now = 1_000u64;
    let mut originals: HashMap<(u32, u32), Vec<u8>> = HashMap::new();
    let mut alts: HashMap<(u32, u32), Vec<u8>> = HashMap::new();
    let mut resends = 0u64;
    let mut bad_mac = Vec::new();
    let per_session = 60u32;
    for round in 1..=per_session {
        let mut burst = Vec::new();
        for s in sessions(n_sessions) {
            let count = 1 + ((s + round) % 10) as usize;
            let p = packet(s, round, count, 1, false);
            originals.insert((s, round), p.clone());
            burst.push(p);
            // Every 7th packet is resent with flags.resend (same full hash).
            if (s + round) % 7 == 0 {
                burst.push(packet(s, round, count, 1, true));
                resends += 1;
            }
            // Every 23rd packet has an equivocating second copy (another client_tag).
            if (s * 3 + round) % 23 == 0 {
                let alt = packet(s, round, count, 2, false);
                alts.insert((s, round), alt.clone());
                burst.push(alt);
            }
        }
        send_all(&mut n.client, &burst);
        // A bad MAC now and then, sent past the fault injector so its count is exact.
        if round % 10 == 0 {
            let s = 100 + round % n_sessions;
            let mut p = packet(s, round, 2, 9, false);
            let last = p.len() - 1;
            p[last] ^= 0x80;
            send_all(n.client.inner_mut(), &[p]);
            bad_mac.push((s, round));
        }
        for _ in 0..4 {
            now += 2_000;
            n.driver.poll(now);
            for r in &mut n.replicas {
                r.recv();
                r.fetch_gaps(now, 50_000);
            }
        }
    }
    n.client.release_held();
    // Run until every replica holds every frame, bounded.
    let mut steps = 0;
    loop {
        now += 10_000;
        n.driver.poll(now);
        for r in &mut n.replicas {
            r.recv();
            r.fetch_gaps(now, 50_000);
        }
        let last = n.driver.databox.fanout().last_data_seq();
        if n.replicas
            .iter()
            .all(|r| r.max_seq == last && r.missing().is_empty())
            && n.driver.databox.out().is_empty()
        {
            break;
        }
        steps += 1;
        assert!(steps < 20_000, "seed {seed}: replicas did not converge");
    }
    // Idle for 500 µs: heartbeats every 100 µs (07 §5.3) carry the last data_seq.
    for _ in 0..50 {
        now += 10_000;
        n.driver.poll(now);
        for r in &mut n.replicas {
            r.recv();
        }
    }
    let last = n.driver.databox.fanout().last_data_seq();
    for r in &n.replicas {
        assert!(r.hb >= 1 && r.max_seq == last);
    }
    let c = *n.driver.databox.counters();
    let emitted = n.client.tx_stats().emitted;
    if std::env::var_os("VYRN_TEST_PRINT").is_some() {
        eprintln!("seed {seed}:\n{c}");
    }
    let unique = originals.len() as u64;
    let n_alts = alts.len() as u64;
    let n_bad = bad_mac.len() as u64;

    // Counters exact: every packet offered, stored once per key, one conflict per equivocation.
    assert!(c.balanced(), "{c}");
    assert_eq!(c.rx_packets, emitted + n_bad, "seed {seed}");
    assert_eq!(c.stored, unique);
    assert_eq!(c.conflicts, n_alts);
    assert_eq!(c.drop_bad_mac, n_bad);
    assert_eq!(c.bad_mac_reports, n_bad);
    assert_eq!(c.drop_duplicate, emitted - unique - n_alts);
    assert!(c.drop_duplicate >= resends);
    for z in [
        c.drop_late,
        c.drop_repeat_evicted,
        c.drop_bad_len,
        c.drop_bad_count,
        c.drop_bad_flags,
        c.drop_bad_reserved,
        c.drop_bad_seq,
        c.drop_bad_book,
        c.drop_unknown_session,
        c.ring_evicted,
        c.index_displaced_live,
        c.frames_unsent,
        c.fetch_range_gone,
        c.ctrl_malformed,
        c.tx_errors,
    ] {
        assert_eq!(z, 0, "seed {seed}: {c}");
    }
    // Loss on the replica links made the replicas fetch, and the box answered from the ring.
    assert!(c.fetch_range_reqs > 0 && c.fetch_range_frames > 0, "{c}");
    assert!(c.frames_hb >= 4, "{c}");
    assert_eq!(
        c.frames_data_pkts, unique,
        "each key forwarded in exactly one frame"
    );

    // The sequencer got every bad-MAC report and every conflict with both packets as evidence.
    let (bad, conflicts) = seq_msgs(&mut n.seq);
    let got: HashSet<_> = bad.iter().map(|m| (m.session, m.pkt_seq)).collect();
    assert_eq!(got, bad_mac.iter().copied().collect());
    assert_eq!(conflicts.len() as u64, n_alts);
    let mut forwarded_first: HashMap<(u32, u32), Vec<u8>> = HashMap::new();
    for (cc, ev) in &conflicts {
        let k = (cc.session, cc.pkt_seq);
        let (orig, alt) = (&originals[&k], &alts[&k]);
        assert_eq!(ev.len(), 2);
        // Both copies, first-stored first; either may have arrived first after reordering.
        let same = |a: &[u8], b: &[u8]| full_hash(a).unwrap() == full_hash(b).unwrap();
        assert!(
            (same(&ev[0], orig) && same(&ev[1], alt)) || (same(&ev[0], alt) && same(&ev[1], orig)),
            "evidence holds both copies"
        );
        assert_eq!(cc.h1, full_hash(&ev[0]).unwrap());
        assert_eq!(cc.h2, full_hash(&ev[1]).unwrap());
        assert_ne!(cc.h1, cc.h2);
        forwarded_first.insert(k, ev[0].clone());
    }

    // Every replica holds every stored key exactly once, with the first copy's content.
    for (i, r) in n.replicas.iter().enumerate() {
        let pk = r.packets();
        assert_eq!(pk.len() as u64, unique, "seed {seed} replica {i}");
        for (k, (_, p)) in &pk {
            let want = forwarded_first.get(k).unwrap_or(&originals[k]);
            assert_eq!(
                full_hash(p).unwrap(),
                full_hash(want).unwrap(),
                "replica {i} {k:?}"
            );
            // The copy forwarded may be the resend (same full hash) but it verifies.
            assert!(Request::parse_verified(p, &k_seq(k.0)).is_ok());
        }
        assert!(r.gone.is_empty());
    }
    let fetched: u64 = n.replicas.iter().map(|r| r.fetches_sent).sum();
    assert!(fetched > 0);
}

/// Key fetches (07 §5.5) are answered with the first copy; a key the box never stored is not.
#[test]
fn key_fetch_answered_from_ring() {
    let mut n = net(9, 4, 1 << 12, false);
    let pkts: Vec<Vec<u8>> = (1..=20).map(|q| packet(101, q, 3, 1, false)).collect();
    send_all(&mut n.client, &pkts);
    let mut now = 1_000;
    n.driver.poll(now);
    for q in [1u32, 7, 20, 21] {
        let m = DataFetch::Key(vyrn_wire::msg::PktKey {
            session: 101,
            pkt_seq: q,
        })
        .to_bytes()
        .unwrap();
        n.replicas[2].send(&m);
    }
    now += 1_000;
    n.driver.poll(now);
    let c = *n.driver.databox.counters();
    assert_eq!(c.fetch_key_reqs, 4);
    assert_eq!(c.fetch_key_hits, 3);
    assert_eq!(c.fetch_key_misses, 1, "pkt_seq 21 was never sent");
    n.replicas[2].recv();
    let got: Vec<(u32, u32)> = n.replicas[2]
        .key_answers
        .iter()
        .map(|p| key_of(p))
        .collect();
    assert_eq!(got, vec![(101, 1), (101, 7), (101, 20)]);
    for p in &n.replicas[2].key_answers {
        assert_eq!(p, &pkts[key_of(p).1 as usize - 1]);
    }
    // Only the asking replica got answers.
    n.replicas[1].recv();
    assert!(n.replicas[1].key_answers.is_empty());
}
