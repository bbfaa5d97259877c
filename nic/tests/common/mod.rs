//! Helpers shared by the integration tests: bounded receive loops and numbered frames.
#![allow(dead_code)]

use std::time::{Duration, Instant};
use vyrn_nic::{Port, RxBatch, RxMeta};

/// Upper bound on any wait for packets in these tests.
pub const WAIT: Duration = Duration::from_secs(3);

/// A received packet, copied out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Got {
    pub data: Vec<u8>,
    pub meta: RxMeta,
}

/// Receive until `want` packets arrived or `timeout` passed (bounded in time and iterations).
pub fn recv_n<P: Port>(port: &mut P, want: usize, timeout: Duration) -> Vec<Got> {
    let mut batch = RxBatch::new(64, 9216);
    let mut out = Vec::new();
    let deadline = Instant::now() + timeout;
    for _ in 0..200_000 {
        if out.len() >= want || Instant::now() > deadline {
            break;
        }
        let n = port.recv_batch(&mut batch).expect("recv_batch");
        out.extend(batch.iter().map(|p| Got {
            data: p.data.to_vec(),
            meta: p.meta,
        }));
        if n == 0 {
            std::thread::sleep(Duration::from_micros(50));
        }
    }
    out
}

/// Receive whatever arrives within `quiet` of silence (bounded), for "nothing more came" checks.
pub fn recv_rest<P: Port>(port: &mut P, quiet: Duration) -> Vec<Got> {
    let mut batch = RxBatch::new(64, 9216);
    let mut out = Vec::new();
    let mut last = Instant::now();
    for _ in 0..200_000 {
        if last.elapsed() > quiet {
            break;
        }
        let n = port.recv_batch(&mut batch).expect("recv_batch");
        if n > 0 {
            last = Instant::now();
            out.extend(batch.iter().map(|p| Got {
                data: p.data.to_vec(),
                meta: p.meta,
            }));
        } else {
            std::thread::sleep(Duration::from_micros(50));
        }
    }
    out
}

/// A frame of `len` bytes (≥ 24) shaped like vyrn's: a 24-byte header with `seq` at offset 8
/// and flags (path bit) 0 at offset 16, then a body of `seq`-derived bytes.
pub fn frame(seq: u64, len: usize) -> Vec<u8> {
    let mut f = vec![0u8; len.max(24)];
    f[0..2].copy_from_slice(&0x4250u16.to_le_bytes());
    f[2] = 1;
    f[3] = 1;
    f[8..16].copy_from_slice(&seq.to_le_bytes());
    for (i, b) in f[24..].iter_mut().enumerate() {
        *b = (seq as u8).wrapping_add(i as u8);
    }
    f
}

/// The `seq` of a [`frame`].
pub fn seq_of(f: &[u8]) -> u64 {
    u64::from_le_bytes(f[8..16].try_into().expect("frame too short"))
}

/// Send every packet, retrying backpressure a bounded number of times; panics if stuck.
pub fn send_all<P: Port>(port: &mut P, pkts: &[vyrn_nic::TxPacket<'_>]) {
    let mut done = 0;
    for _ in 0..10_000 {
        if done == pkts.len() {
            return;
        }
        done += port.send_batch(&pkts[done..]).expect("send_batch");
        if done < pkts.len() {
            std::thread::sleep(Duration::from_micros(50));
        }
    }
    panic!("send stuck at {done}/{}", pkts.len());
}
