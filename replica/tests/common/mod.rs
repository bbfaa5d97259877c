//! Test support: temporary drive directories and valid, signed block records.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use ed25519_dalek::SigningKey;
use vyrn_replica::disk::journal::{BackendChoice, BlockJournal, JournalConfig, JournalError};
use vyrn_wire::msg::journal::RepBlockRecord;
use vyrn_wire::msg::PktKey;
use vyrn_wire::BlockHeader;

static N: AtomicU64 = AtomicU64::new(0);

/// A directory under `std::env::temp_dir()` removed on drop.
#[derive(Debug)]
pub struct TestDir(pub PathBuf);

impl TestDir {
    pub fn new(name: &str) -> TestDir {
        let p = std::env::temp_dir().join(format!(
            "vyrn-replica-{}-{}-{}",
            std::process::id(),
            name,
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).expect("temp dir");
        TestDir(p)
    }
    pub fn drives(&self, n: usize) -> Vec<PathBuf> {
        (0..n).map(|i| self.0.join(format!("nvme{i}"))).collect()
    }
}

impl Drop for TestDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

pub fn key() -> SigningKey {
    SigningKey::from_bytes(&[7u8; 32])
}

/// One client packet: book 0, `count` messages, session and pkt_seq at bytes 4 and 8.
pub fn packet(session: u32, pkt_seq: u32, count: u8) -> Vec<u8> {
    let mut p = vec![0u8; 32 + 16 * count as usize];
    p[2] = count;
    p[4..8].copy_from_slice(&session.to_le_bytes());
    p[8..12].copy_from_slice(&pkt_seq.to_le_bytes());
    for (i, b) in p.iter_mut().enumerate().skip(16) {
        *b = (i as u8) ^ (pkt_seq as u8);
    }
    p
}

/// The session of block `h`'s packets and their pkt_seqs.
pub fn pkts_of(h: u64) -> (u32, [u32; 2]) {
    ((h % 5) as u32 + 1, [2 * h as u32 + 1, 2 * h as u32 + 2])
}

/// A valid record for height `h`, signed by `key()`, of varying size (1..=4 pages).
pub fn record(h: u64) -> RepBlockRecord {
    record_with(h, 0)
}

/// As `record`, with `salt` changing the order bytes (same height, different bytes).
pub fn record_with(h: u64, salt: u8) -> RepBlockRecord {
    let (session, seqs) = pkts_of(h);
    let mut header = BlockHeader {
        height: h,
        epoch: 1,
        book: 0,
        first_step: h * 10,
        last_step: h * 10 + 9,
        prev: [h as u8; 32],
        order_root: [1; 32],
        data_root: [2; 32],
        seq_sig: [0; 64],
    };
    header.sign(&key());
    let order_len = (h % 4) as usize * 4096 + 100;
    RepBlockRecord {
        tenure: 0,
        header,
        order: (0..order_len)
            .map(|i| (i as u8) ^ (h as u8) ^ salt)
            .collect(),
        pkt_hashes: vec![h, h + 1],
        data: [packet(session, seqs[0], 1), packet(session, seqs[1], 3)].concat(),
        unavail: vec![PktKey {
            session: 999,
            pkt_seq: h as u32 + 1,
        }],
    }
}

pub fn bytes(h: u64) -> Vec<u8> {
    record(h).to_bytes().expect("encode")
}

pub fn cfg(drives: Vec<PathBuf>, backend: BackendChoice) -> JournalConfig {
    let mut c = JournalConfig::new(drives);
    c.backend = backend;
    c.verifying_key = Some(key().verifying_key());
    c.segment_bytes = 64 * 1024;
    c.pkt_index_granularity = 4;
    c
}

/// Both backends. The io_uring one is required on Linux unless the kernel disables io_uring.
pub fn backends() -> Vec<BackendChoice> {
    let mut v = vec![BackendChoice::Std];
    if uring_expected() {
        v.push(BackendChoice::Uring);
    } else {
        eprintln!("io_uring disabled on this kernel: testing the std backend only");
    }
    v
}

fn uring_expected() -> bool {
    if !cfg!(target_os = "linux") {
        return false;
    }
    match std::fs::read_to_string("/proc/sys/kernel/io_uring_disabled") {
        Ok(s) => s.trim() == "0",
        Err(_) => true,
    }
}

pub fn open(c: JournalConfig) -> (BlockJournal, vyrn_replica::disk::journal::RecoveryReport) {
    match BlockJournal::open(c) {
        Ok(x) => x,
        Err(e) => panic!("open: {e}"),
    }
}

pub fn seg_path(dir: &Path, seg: u64) -> PathBuf {
    dir.join(format!("seg-{seg:016x}.blk"))
}

pub fn must(r: Result<impl Sized, JournalError>) {
    if let Err(e) = r {
        panic!("{e}");
    }
}

/// An ORDER frame of book 1, epoch 7, tenure 0 with `body` (the peer frame store and order
/// journal tests).
pub fn order_frame(stream: u8, fs: u64, body: &[u8]) -> Vec<u8> {
    let h = vyrn_wire::frame::FrameHeader {
        kind: vyrn_wire::frame::FrameKind::Order,
        book: 1,
        epoch16: 7,
        frame_seq: fs,
        flags: 0,
        tenure: 0,
        body_len: body.len() as u16,
        sender: 0,
        stream,
    };
    let mut out = Vec::new();
    vyrn_wire::frame::build_frame(&h, body, &mut out);
    out
}
