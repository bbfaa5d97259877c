//! The `Backend` trait on both implementations, and a drive that fails (07 §14: "NVMe drive
//! failure on a replica — I/O error — blocks on that drive are refetched from peers").

mod common;

use std::collections::HashSet;
use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use common::*;
use vyrn_replica::disk::journal::{
    AlignedBuf, Appended, Backend, BackendChoice, BlockJournal, FileId, JournalError, ReadError,
    StdBackend, PAGE,
};

fn backends_dyn() -> Vec<Box<dyn Backend>> {
    let mut v: Vec<Box<dyn Backend>> = vec![Box::new(StdBackend::new())];
    #[cfg(target_os = "linux")]
    if backends().contains(&BackendChoice::Uring) {
        v.push(Box::new(
            vyrn_replica::disk::journal::uring::UringBackend::new().expect("io_uring"),
        ));
    }
    v
}

fn page_of(b: u8, pages: usize) -> AlignedBuf {
    let mut p = AlignedBuf::zeroed(pages * PAGE);
    p.fill(b);
    p
}

#[test]
fn both_backends_write_batches_sync_read_back_and_truncate() {
    for mut be in backends_dyn() {
        let t = TestDir::new("trait");
        let a = be.open(&t.0.join("a"), true).unwrap();
        let b = be.open(&t.0.join("b"), true).unwrap();
        assert!(be.open(&t.0.join("a"), true).is_err(), "created once");
        for i in 0..40u8 {
            be.queue_write(a, i as u64 * PAGE as u64, page_of(i, 1))
                .unwrap();
        }
        be.queue_write(b, 2 * PAGE as u64, page_of(0xEE, 3))
            .unwrap();
        let failed = be.flush();
        assert!(failed.is_empty(), "{:?}: {failed:?}", be.kind());
        assert_eq!(be.file_len(a).unwrap(), 40 * PAGE as u64);
        assert_eq!(be.file_len(b).unwrap(), 5 * PAGE as u64);
        let mut r = AlignedBuf::zeroed(2 * PAGE);
        assert_eq!(be.read(a, 7 * PAGE as u64, &mut r).unwrap(), 2 * PAGE);
        assert!(r[..PAGE].iter().all(|&x| x == 7) && r[PAGE..].iter().all(|&x| x == 8));
        assert_eq!(
            be.read(a, 39 * PAGE as u64, &mut r).unwrap(),
            PAGE,
            "short at EOF"
        );
        assert_eq!(be.read(a, 40 * PAGE as u64, &mut r).unwrap(), 0);
        assert_eq!(be.read(b, 0, &mut r).unwrap(), 2 * PAGE);
        assert!(r.iter().all(|&x| x == 0), "hole before the write");
        be.truncate(a, 3 * PAGE as u64).unwrap();
        assert_eq!(be.file_len(a).unwrap(), 3 * PAGE as u64);
        be.close(a);
        assert!(be.read(a, 0, &mut r).is_err(), "closed");
        // Re-open and see the same bytes through a fresh handle.
        let a2 = be.open(&t.0.join("a"), false).unwrap();
        assert_eq!(be.read(a2, PAGE as u64, &mut r).unwrap(), 2 * PAGE);
        assert!(r[..PAGE].iter().all(|&x| x == 1));
        assert!(be.flush().is_empty(), "empty flush");
    }
}

/// A backend whose writes to files under a marked directory fail while `armed`.
#[derive(Debug)]
struct Faulty {
    inner: StdBackend,
    marker: String,
    armed: Arc<AtomicBool>,
    marked: HashSet<FileId>,
    queued_bad: Vec<FileId>,
}

impl Backend for Faulty {
    fn kind(&self) -> vyrn_replica::disk::journal::BackendKind {
        self.inner.kind()
    }
    fn open(&mut self, path: &Path, create_new: bool) -> io::Result<FileId> {
        let f = self.inner.open(path, create_new)?;
        if path.to_string_lossy().contains(&self.marker) {
            self.marked.insert(f);
        }
        Ok(f)
    }
    fn close(&mut self, f: FileId) {
        self.marked.remove(&f);
        self.inner.close(f)
    }
    fn file_len(&self, f: FileId) -> io::Result<u64> {
        self.inner.file_len(f)
    }
    fn truncate(&mut self, f: FileId, len: u64) -> io::Result<()> {
        self.inner.truncate(f, len)
    }
    fn queue_write(&mut self, f: FileId, offset: u64, buf: AlignedBuf) -> io::Result<()> {
        if self.armed.load(Ordering::Relaxed) && self.marked.contains(&f) {
            self.queued_bad.push(f);
            return Ok(()); // dropped; the flush reports it
        }
        self.inner.queue_write(f, offset, buf)
    }
    fn flush(&mut self) -> Vec<(FileId, io::Error)> {
        let mut v = self.inner.flush();
        for f in self.queued_bad.drain(..) {
            if !v.iter().any(|(x, _)| *x == f) {
                v.push((f, io::Error::from_raw_os_error(5)));
            }
        }
        v
    }
    fn read(&mut self, f: FileId, offset: u64, buf: &mut AlignedBuf) -> io::Result<usize> {
        self.inner.read(f, offset, buf)
    }
    fn punch(&mut self, f: FileId, offset: u64, len: u64) -> io::Result<()> {
        self.inner.punch(f, offset, len)
    }
    fn preallocate(&mut self, f: FileId, len: u64) -> io::Result<()> {
        self.inner.preallocate(f, len)
    }
}

#[test]
fn a_failed_drive_loses_only_its_own_blocks_and_refuses_further_appends() {
    let t = TestDir::new("faulty");
    let drives = t.drives(3);
    let armed = Arc::new(AtomicBool::new(false));
    let be = Faulty {
        inner: StdBackend::new(),
        marker: "nvme1".into(),
        armed: armed.clone(),
        marked: HashSet::new(),
        queued_bad: Vec::new(),
    };
    let (mut j, _) =
        BlockJournal::open_with(cfg(drives.clone(), BackendChoice::Std), Box::new(be)).unwrap();
    for h in 0..9 {
        j.append(&bytes(h)).unwrap();
    }
    j.sync().unwrap();
    armed.store(true, Ordering::Relaxed);
    for h in 9..15 {
        assert!(matches!(j.append(&bytes(h)), Ok(Appended::Queued)));
    }
    match j.sync() {
        Err(JournalError::Io { drive: 1, .. }) => {}
        other => panic!("expected drive 1's I/O error, got {other:?}"),
    }
    assert!(j.drive_failed(1) && !j.drive_failed(0) && !j.drive_failed(2));
    assert_eq!(j.counters().drives_failed, 1);
    for h in 0..15 {
        let lost = h >= 9 && h % 3 == 1;
        match j.read(h) {
            Ok(b) => assert!(!lost && b[..] == bytes(h)[..], "block {h}"),
            Err(ReadError::NotFound) => assert!(lost, "block {h} lost"),
            Err(e) => panic!("block {h}: {e}"),
        }
    }
    assert!(matches!(
        j.append(&bytes(16)),
        Err(JournalError::DriveFailed { drive: 1 })
    ));
    assert!(j.append(&bytes(15)).is_ok(), "other drives keep receiving");
    j.sync().unwrap();
    assert_eq!(j.counters().appends_drive_failed, 1);
    drop(j);
    // The drive is replaced (here: healthy again): recovery serves what reached it.
    let (mut j, rep) = open(cfg(drives, BackendChoice::Std));
    assert!(rep.refused.is_empty(), "{:?}", rep.refused);
    let want: Vec<u64> = (0..16).filter(|h| !(*h >= 9 && h % 3 == 1)).collect();
    assert_eq!(j.heights(), want);
    j.append(&bytes(10)).unwrap();
    j.sync().unwrap();
    assert!(j.contains(10), "backfilled from a peer");
}

/// Not a benchmark (B-REP-9 needs the REF box): a smoke figure for the dev VM.
/// `cargo test -p vyrn-replica --test backend -- --ignored --nocapture`
#[test]
#[ignore]
fn throughput_smoke() {
    for be in backends() {
        let t = TestDir::new("tput");
        let mut c = cfg(t.drives(3), be);
        c.segment_bytes = 256 << 20;
        c.verifying_key = None;
        let (mut j, _) = open(c);
        let recs: Vec<Vec<u8>> = (0..256u64)
            .map(|h| {
                let mut r = record(h);
                r.order = vec![h as u8; 1 << 20];
                r.to_bytes().unwrap()
            })
            .collect();
        let t0 = std::time::Instant::now();
        let mut in_sync = std::time::Duration::ZERO;
        for (i, r) in recs.iter().enumerate() {
            j.append(r).unwrap();
            if i % 32 == 31 {
                let s = std::time::Instant::now();
                j.sync().unwrap();
                in_sync += s.elapsed();
            }
        }
        j.sync().unwrap();
        let w = t0.elapsed();
        let bytes = j.counters().bytes_written as f64;
        let t1 = std::time::Instant::now();
        for h in 0..256 {
            j.read(h).unwrap();
        }
        let r = t1.elapsed();
        eprintln!(
            "{be:?}: write+sync {:.0} MB/s ({:.0}% in sync), verified read {:.0} MB/s ({} MiB, batches of 32)",
            bytes / w.as_secs_f64() / 1e6,
            100.0 * in_sync.as_secs_f64() / w.as_secs_f64(),
            bytes / r.as_secs_f64() / 1e6,
            bytes as u64 >> 20
        );
    }
}

/// The backend alone: 256 × 1 MiB writes in one flush. Compare with `throughput_smoke`.
#[test]
#[ignore]
fn raw_backend_smoke() {
    for mut be in backends_dyn() {
        let t = TestDir::new("raw");
        let f = be.open(&t.0.join("x"), true).unwrap();
        let t0 = std::time::Instant::now();
        for i in 0..256u64 {
            be.queue_write(f, i << 20, page_of(i as u8, 256)).unwrap();
        }
        assert!(be.flush().is_empty());
        let s = t0.elapsed().as_secs_f64();
        eprintln!(
            "{:?}: 256 MiB in one flush: {:.0} MB/s",
            be.kind(),
            268.4 / s
        );
    }
}
