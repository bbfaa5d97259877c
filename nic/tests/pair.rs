//! Two paths: every frame on A and B, the path bit set only on B, the gate's write-then-fence,
//! and path B covering path A's losses.

mod common;

use common::{frame, recv_n, seq_of, WAIT};
use std::collections::BTreeSet;
use vyrn_nic::lossy::{LossConfig, Lossy};
use vyrn_nic::mem::MemPort;
use vyrn_nic::pair::{Path, PathMark, PathPair};
use vyrn_nic::{Dest, NicError, Port, RxBatch, FRAME_FLAGS_OFFSET};

#[cfg(target_os = "linux")]
#[test]
fn two_udp_paths_carry_each_frame_with_the_path_bit_set_only_on_b() {
    use vyrn_nic::udp::{UdpConfig, UdpPort};
    let rx_a = UdpPort::open(&UdpConfig::loopback()).unwrap();
    let rx_b = UdpPort::open(&UdpConfig::loopback()).unwrap();
    let tx_a = UdpPort::open(&UdpConfig::loopback().with_dest(rx_a.local_addr().unwrap())).unwrap();
    let tx_b = UdpPort::open(&UdpConfig::loopback().with_dest(rx_b.local_addr().unwrap())).unwrap();
    let mut tx = PathPair::new(tx_a, tx_b, PathMark::VYRN);
    let mut rx = PathPair::new(rx_a, rx_b, PathMark::VYRN);
    let frames: Vec<Vec<u8>> = (0..50).map(|i| frame(i, 24 + 4 * i as usize)).collect();
    for f in &frames {
        assert!(tx.send_frame(f, Dest::Default).both());
        assert_eq!(tx.flush(), Ok(()));
        let [a, b] = tx.last_tx();
        assert!(a.after_ns <= b.before_ns, "A is written before B");
    }
    let mut got: [Vec<Vec<u8>>; 2] = [Vec::new(), Vec::new()];
    for _ in 0..100_000 {
        if got[0].len() + got[1].len() == 100 {
            break;
        }
        let n = rx
            .poll_recv(32, &mut |path, p| got[path.index()].push(p.data.to_vec()))
            .unwrap();
        if n == 0 {
            std::thread::sleep(std::time::Duration::from_micros(50));
        }
    }
    for path in Path::BOTH {
        let g = &got[path.index()];
        assert_eq!(g.len(), 50, "{path:?}");
        for (f, r) in frames.iter().zip(g) {
            let bit = r[FRAME_FLAGS_OFFSET] & 1;
            assert_eq!(bit, path.index() as u8, "{path:?} path bit");
            let mut unmarked = r.clone();
            unmarked[FRAME_FLAGS_OFFSET] &= !1;
            assert_eq!(&unmarked, f, "only the path bit differs");
        }
    }
    assert_eq!(tx.counters()[0].tx_packets, 50);
    assert_eq!(tx.counters()[1].tx_packets, 50);
    let mut ba = RxBatch::new(8, 512);
    let mut bb = RxBatch::new(8, 512);
    assert_eq!(
        rx.recv_both(&mut ba, &mut bb),
        Ok([0, 0]),
        "nothing left on either path"
    );
}

#[test]
fn write_and_fence_is_bounded_under_backpressure() {
    let (a_tx, mut a_rx) = MemPort::pair(4, 256);
    let (b_tx, mut b_rx) = MemPort::pair(4, 256);
    let mut tx = PathPair::new(a_tx, b_tx, PathMark::VYRN);
    for i in 0..4 {
        assert_eq!(tx.write_and_fence(&frame(i, 40), Dest::Default, 3), Ok(()));
    }
    assert_eq!(
        tx.write_and_fence(&frame(4, 40), Dest::Default, 3),
        Err(NicError::WouldBlock)
    );
    // Path B alone drained: the retry only sends where it is still missing.
    let mut batch = RxBatch::new(8, 256);
    assert_eq!(b_rx.recv_batch(&mut batch), Ok(4));
    assert!(tx.send_on(Path::B, &frame(4, 40), Dest::Default).unwrap());
    assert_eq!(a_rx.recv_batch(&mut batch), Ok(4));
    assert!(tx.send_on(Path::A, &frame(4, 40), Dest::Default).unwrap());
    assert_eq!(tx.flush(), Ok(()));
    assert_eq!(a_rx.recv_batch(&mut batch), Ok(1));
    assert_eq!(batch.get(0).unwrap().data[FRAME_FLAGS_OFFSET] & 1, 0);
    assert_eq!(b_rx.recv_batch(&mut batch), Ok(1));
    assert_eq!(batch.get(0).unwrap().data[FRAME_FLAGS_OFFSET] & 1, 1);
}

#[test]
fn path_b_covers_the_losses_of_a_lossy_path_a() {
    let (a_tx, mut a_rx) = MemPort::pair(1024, 256);
    let (b_tx, mut b_rx) = MemPort::pair(1024, 256);
    let lossy_a = Lossy::tx_only(a_tx, LossConfig::seeded(11).with_drop(0.3)).unwrap();
    let mut tx = PathPair::new(lossy_a, b_tx, PathMark::VYRN);
    for i in 0..500 {
        assert!(tx.send_frame(&frame(i, 60), Dest::Default).both());
    }
    assert_eq!(tx.flush(), Ok(()));
    let on_a: BTreeSet<u64> = recv_n(&mut a_rx, 500, std::time::Duration::from_millis(50))
        .iter()
        .map(|g| seq_of(&g.data))
        .collect();
    let on_b: BTreeSet<u64> = recv_n(&mut b_rx, 500, WAIT)
        .iter()
        .map(|g| seq_of(&g.data))
        .collect();
    let dropped = tx.a().tx_stats().dropped as usize;
    assert!((100..=200).contains(&dropped), "{dropped}");
    assert_eq!(on_a.len(), 500 - dropped);
    assert_eq!(on_b.len(), 500);
    assert_eq!(
        on_a.union(&on_b).count(),
        500,
        "the merge of both paths is complete"
    );
}

#[test]
fn a_frame_too_short_for_the_path_bit_is_a_typed_error_on_both_paths() {
    let (a, _ra) = MemPort::pair(4, 64);
    let (b, _rb) = MemPort::pair(4, 64);
    let mut tx = PathPair::new(a, b, PathMark::VYRN);
    let r = tx.send_frame(&[0u8; 10], Dest::Default);
    let e = Err(NicError::FrameTooShort { len: 10, need: 17 });
    assert_eq!((r.a, r.b), (e, e));
    assert!(!r.both());
    let big = [0u8; 65];
    assert_eq!(
        tx.send_frame(&big, Dest::Default).a,
        Err(NicError::Oversize { len: 65, max: 64 })
    );
    let mut plain = PathPair::new(
        MemPort::pair(4, 64).0,
        MemPort::pair(4, 64).0,
        PathMark::NONE,
    );
    assert!(
        plain.send_frame(&[1, 2, 3], Dest::Default).both(),
        "no mark, any length"
    );
}
