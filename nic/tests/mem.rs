//! The in-memory port pair: order, backpressure, typed errors, use from two threads.

mod common;

use common::{frame, seq_of};
use vyrn_nic::mem::MemPort;
use vyrn_nic::{NicError, Port, RxBatch, TxPacket};

#[test]
fn round_trip_with_backpressure_when_the_queue_is_full() {
    let (mut a, mut b) = MemPort::pair(4, 64);
    let frames: Vec<Vec<u8>> = (0..6).map(|i| frame(i, 30)).collect();
    let pkts: Vec<TxPacket<'_>> = frames.iter().map(|f| TxPacket::new(f)).collect();
    assert_eq!(a.send_batch(&pkts), Ok(4), "partial send, never a block");
    assert_eq!(a.send_batch(&pkts[4..]), Ok(0));
    assert_eq!(a.counters().tx_backpressure, 2);
    assert_eq!(b.pending(), 4);
    let mut batch = RxBatch::new(8, 64);
    assert_eq!(b.recv_batch(&mut batch), Ok(4));
    assert_eq!(a.send_batch(&pkts[4..]), Ok(2));
    assert_eq!(b.recv_batch(&mut batch), Ok(2));
    assert_eq!(
        batch.iter().map(|p| seq_of(p.data)).collect::<Vec<_>>(),
        vec![4, 5]
    );
    assert_eq!(a.counters().tx_packets, 6);
    assert_eq!(b.counters().rx_packets, 6);
    assert_eq!(a.last_tx().packets, 2);
    // The link is symmetric.
    assert_eq!(b.send_batch(&pkts[..1]), Ok(1));
    let mut seen = Vec::new();
    assert_eq!(a.poll_recv(8, &mut |p| seen.push(p.data.to_vec())), Ok(1));
    assert_eq!(seen, vec![frames[0].clone()]);
}

#[test]
fn empty_oversize_and_small_slots() {
    let (mut a, mut b) = MemPort::pair(4, 64);
    let mut batch = RxBatch::new(8, 16);
    assert_eq!(b.recv_batch(&mut batch), Ok(0));
    assert_eq!(
        a.send_batch(&[TxPacket::new(&[0u8; 65])]),
        Err(NicError::Oversize { len: 65, max: 64 })
    );
    assert_eq!(a.counters().tx_oversize, 1);
    assert_eq!(
        a.send_batch(&[TxPacket::new(&[1u8; 40]), TxPacket::new(&[2u8; 8])]),
        Ok(2)
    );
    assert_eq!(
        b.recv_batch(&mut batch),
        Ok(1),
        "the 40 B packet does not fit a 16 B slot"
    );
    assert_eq!(batch.get(0).unwrap().data, &[2u8; 8]);
    assert_eq!(b.counters().rx_truncated, 1);
}

#[test]
fn ends_work_from_two_threads() {
    let (mut a, mut b) = MemPort::pair(64, 64);
    let n = 2000u64;
    let sender = std::thread::spawn(move || {
        let frames: Vec<Vec<u8>> = (0..n).map(|i| frame(i, 32)).collect();
        common::send_all(
            &mut a,
            &frames.iter().map(|f| TxPacket::new(f)).collect::<Vec<_>>(),
        );
        a.counters().tx_packets
    });
    let got = common::recv_n(&mut b, n as usize, common::WAIT);
    assert_eq!(sender.join().unwrap(), n);
    assert_eq!(
        got.iter().map(|g| seq_of(&g.data)).collect::<Vec<_>>(),
        (0..n).collect::<Vec<_>>()
    );
}
