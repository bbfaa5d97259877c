//! The lossy wrapper: fault rates for a fixed seed, exact reproducibility, reorder distance,
//! and the same faults on transmit, on receive and over real sockets.

mod common;

use common::{frame, recv_n, recv_rest, seq_of, WAIT};
use std::time::Duration;
use vyrn_nic::lossy::{FaultStats, LossConfig, Lossy};
use vyrn_nic::mem::MemPort;
use vyrn_nic::{NicError, Port, RxBatch, TxPacket};

/// Send frames 0..n through a transmit-side lossy port in chunks of `chunk`, receive them on
/// the far end of a memory link, release what is still held, and return the sequence numbers
/// in arrival order.
fn run_tx(cfg: LossConfig, n: u64, chunk: usize) -> (Vec<u64>, FaultStats) {
    let (a, mut b) = MemPort::pair(256, 64);
    let mut lossy = Lossy::tx_only(a, cfg).unwrap();
    let frames: Vec<Vec<u8>> = (0..n).map(|i| frame(i, 24)).collect();
    let mut out = Vec::new();
    let mut batch = RxBatch::new(256, 64);
    let mut sent = 0usize;
    for _ in 0..1_000_000 {
        if sent == frames.len() {
            break;
        }
        let end = (sent + chunk).min(frames.len());
        let pkts: Vec<TxPacket<'_>> = frames[sent..end].iter().map(|f| TxPacket::new(f)).collect();
        sent += lossy.send_batch(&pkts).unwrap();
        b.recv_batch(&mut batch).unwrap();
        out.extend(batch.iter().map(|p| seq_of(p.data)));
    }
    assert_eq!(sent, frames.len());
    lossy.release_held();
    assert_eq!(lossy.flush(), Ok(()));
    assert_eq!(lossy.held(), (0, 0));
    for _ in 0..1000 {
        if b.recv_batch(&mut batch).unwrap() == 0 {
            break;
        }
        out.extend(batch.iter().map(|p| seq_of(p.data)));
    }
    (out, lossy.tx_stats())
}

/// The same through a receive-side lossy port.
fn run_rx(cfg: LossConfig, n: u64, chunk: usize) -> (Vec<u64>, FaultStats) {
    let (mut a, b) = MemPort::pair(256, 64);
    let mut lossy = Lossy::rx_only(b, cfg).unwrap();
    let frames: Vec<Vec<u8>> = (0..n).map(|i| frame(i, 24)).collect();
    let mut out = Vec::new();
    let mut batch = RxBatch::new(chunk, 64);
    let mut sent = 0usize;
    for _ in 0..1_000_000 {
        if sent == frames.len() && a.counters().tx_packets == lossy.inner().counters().rx_packets {
            break;
        }
        let end = (sent + chunk).min(frames.len());
        let pkts: Vec<TxPacket<'_>> = frames[sent..end].iter().map(|f| TxPacket::new(f)).collect();
        sent += a.send_batch(&pkts).unwrap();
        lossy.recv_batch(&mut batch).unwrap();
        out.extend(batch.iter().map(|p| seq_of(p.data)));
    }
    lossy.release_held();
    for _ in 0..1000 {
        if lossy.recv_batch(&mut batch).unwrap() == 0 {
            break;
        }
        out.extend(batch.iter().map(|p| seq_of(p.data)));
    }
    (out, lossy.rx_stats())
}

fn mixed(seed: u64) -> LossConfig {
    LossConfig::seeded(seed)
        .with_drop(0.10)
        .with_dup(0.05)
        .with_reorder(0.02, 3)
}

fn check_conservation(out: &[u64], s: &FaultStats, n: u64) {
    assert_eq!(s.seen, n);
    assert_eq!(s.released, s.reordered, "every held packet came back");
    assert_eq!(s.emitted, s.seen - s.dropped + s.duplicated);
    assert_eq!(
        out.len() as u64,
        s.emitted,
        "the far end got exactly what was emitted"
    );
    let mut count = vec![0u8; n as usize];
    for &q in out {
        count[q as usize] += 1;
    }
    let missing = count.iter().filter(|&&c| c == 0).count() as u64;
    let doubled = count.iter().filter(|&&c| c == 2).count() as u64;
    assert!(count.iter().all(|&c| c <= 2));
    assert_eq!((missing, doubled), (s.dropped, s.duplicated));
}

#[test]
fn drop_dup_reorder_rates_match_the_config_for_a_fixed_seed() {
    let n = 20_000;
    let (out, s) = run_tx(mixed(0x5EED), n, 16);
    check_conservation(&out, &s, n);
    let rate = |x: u64, of: u64| x as f64 / of as f64;
    let drop = rate(s.dropped, s.seen);
    let reorder = rate(s.reordered, s.seen - s.dropped);
    let dup = rate(s.duplicated, s.seen - s.dropped - s.reordered);
    assert!((0.09..=0.11).contains(&drop), "drop rate {drop}");
    assert!((0.015..=0.025).contains(&reorder), "reorder rate {reorder}");
    assert!((0.042..=0.058).contains(&dup), "dup rate {dup}");
    let inversions = out.windows(2).filter(|w| w[1] < w[0]).count();
    assert!(
        inversions as u64 >= s.reordered / 2,
        "held packets arrive out of order"
    );
}

#[test]
fn same_seed_reproduces_exactly_whatever_the_batching() {
    let n = 5_000;
    let (a, sa) = run_tx(mixed(42), n, 16);
    let (b, sb) = run_tx(mixed(42), n, 16);
    let (c, sc) = run_tx(mixed(42), n, 7);
    assert_eq!((&a, sa), (&b, sb), "same seed, same run");
    assert_eq!(
        (&a, sa),
        (&c, sc),
        "faults do not depend on batch boundaries"
    );
    let (d, _) = run_tx(mixed(43), n, 16);
    assert_ne!(a, d, "another seed, other faults");
}

#[test]
fn receive_side_faults_equal_transmit_side_faults_for_the_same_seed() {
    let n = 5_000;
    let (tx_out, tx_stats) = run_tx(mixed(9), n, 16);
    let (rx_out, rx_stats) = run_rx(mixed(9), n, 16);
    check_conservation(&rx_out, &rx_stats, n);
    assert_eq!(tx_stats, rx_stats);
    assert_eq!(tx_out, rx_out);
}

#[test]
fn a_held_packet_comes_back_exactly_k_packets_later() {
    let mut cfg = LossConfig::seeded(77).with_reorder(0.05, 3);
    cfg.max_held = 1;
    let n = 10_000;
    let (out, s) = run_tx(cfg, n, 32);
    check_conservation(&out, &s, n);
    assert!(s.reordered > 300, "{s:?}");
    let last = out.len() - 1;
    for (j, w) in out.windows(2).enumerate() {
        if w[1] < w[0] && j + 1 != last {
            assert_eq!(w[0] - w[1], 3, "at {j}: {} after {}", w[1], w[0]);
        }
    }
}

#[test]
fn a_clean_config_is_transparent() {
    let (out, s) = run_tx(LossConfig::NONE, 1000, 16);
    assert_eq!(out, (0..1000).collect::<Vec<_>>());
    assert_eq!(
        (s.dropped, s.duplicated, s.reordered, s.emitted),
        (0, 0, 0, 1000)
    );
}

#[test]
fn certain_drop_drops_everything() {
    let (out, s) = run_tx(LossConfig::seeded(1).with_drop(1.0), 100, 16);
    assert!(out.is_empty());
    assert_eq!(s.dropped, 100);
}

#[test]
fn oversize_through_the_wrapper_is_a_typed_error() {
    let (a, _b) = MemPort::pair(4, 64);
    let mut lossy = Lossy::tx_only(a, LossConfig::seeded(1).with_drop(0.5)).unwrap();
    let big = [0u8; 65];
    assert_eq!(
        lossy.send_batch(&[TxPacket::new(&big)]),
        Err(NicError::Oversize { len: 65, max: 64 })
    );
    assert_eq!(lossy.counters().tx_oversize, 1);
    assert_eq!(
        lossy.tx_stats().seen,
        0,
        "a refused packet draws no randomness"
    );
    let mut batch = RxBatch::new(4, 64);
    assert_eq!(lossy.recv_batch(&mut batch), Ok(0), "recv on empty is 0");
    assert!(matches!(
        Lossy::tx_only(MemPort::pair(1, 1).0, LossConfig::seeded(1).with_drop(2.0)),
        Err(NicError::Config(_))
    ));
}

#[cfg(target_os = "linux")]
#[test]
fn the_same_faults_happen_over_udp_loopback() {
    use vyrn_nic::udp::{UdpConfig, UdpPort};
    let cfg = LossConfig::seeded(2024)
        .with_drop(0.3)
        .with_dup(0.1)
        .with_reorder(0.05, 2);
    let n = 300;
    let (want, _) = run_tx(cfg, n, 16);
    let mut rx = UdpPort::open(&UdpConfig::loopback()).unwrap();
    let tx = UdpPort::open(&UdpConfig::loopback().with_dest(rx.local_addr().unwrap())).unwrap();
    let mut lossy = Lossy::tx_only(tx, cfg).unwrap();
    let frames: Vec<Vec<u8>> = (0..n).map(|i| frame(i, 24)).collect();
    for chunk in frames.chunks(16) {
        let pkts: Vec<TxPacket<'_>> = chunk.iter().map(|f| TxPacket::new(f)).collect();
        assert_eq!(lossy.send_batch(&pkts), Ok(pkts.len()));
    }
    lossy.release_held();
    assert_eq!(lossy.flush(), Ok(()));
    let mut got: Vec<u64> = recv_n(&mut rx, want.len(), WAIT)
        .iter()
        .map(|g| seq_of(&g.data))
        .collect();
    got.extend(
        recv_rest(&mut rx, Duration::from_millis(20))
            .iter()
            .map(|g| seq_of(&g.data)),
    );
    assert_eq!(
        got, want,
        "UDP delivers exactly what the memory link delivered"
    );
    assert_eq!(lossy.inner().counters().tx_packets, want.len() as u64);
}
