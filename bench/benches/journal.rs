//! B-REP-9 on this machine's disk: the block journal's write rate with io_uring +
//! O_DIRECT against the portable backend (`pwrite` + `fdatasync`), in the same run, on the same
//! directory's file system. Each round writes fresh blocks of ~64 KiB (the size of a busy dev
//! block; REF blocks are MBs) across two drive directories in `max_batch` batches, each batch
//! synced, as the live replica does — MB/s of record bytes made durable. The directory is
//! `VYRN_JOURNAL_DIR` or `target/bench-journal` (not `/tmp`, which may be tmpfs and refuse
//! O_DIRECT). Read the ratio; the absolute figure is this VM's virtual disk.

use std::path::{Path, PathBuf};
use std::time::Instant;

use vyrn_bench::{quick, rounds};
use vyrn_replica::disk::journal::{BackendChoice, BlockJournal, JournalConfig};
use vyrn_wire::header::BlockHeader;
use vyrn_wire::msg::journal::RepBlockRecord;

const BLOCK_BYTES: usize = 64 << 10;

fn record(h: u64) -> RepBlockRecord {
    let mut order = vec![0u8; BLOCK_BYTES - 4096];
    for (i, b) in order.iter_mut().enumerate() {
        *b = (i as u64 ^ h).wrapping_mul(0x9E37) as u8;
    }
    RepBlockRecord {
        tenure: 0,
        header: BlockHeader {
            height: h,
            epoch: 1,
            book: 1,
            first_step: h,
            last_step: h,
            prev: [0; 32],
            order_root: [0; 32],
            data_root: [0; 32],
            seq_sig: [1; 64],
        },
        order,
        pkt_hashes: Vec::new(),
        data: Vec::new(),
        unavail: Vec::new(),
    }
}

/// MB/s of one round: `blocks` blocks written and synced on `backend` in a fresh directory.
fn round(base: &Path, backend: BackendChoice, tag: &str, blocks: u64) -> Option<f64> {
    let dir = base.join(tag);
    let _ = std::fs::remove_dir_all(&dir);
    let mut cfg = JournalConfig::new(vec![dir.join("d0"), dir.join("d1")]);
    cfg.backend = backend;
    let (mut j, _) = BlockJournal::open(cfg).ok()?;
    let recs: Vec<Vec<u8>> = (1..=blocks)
        .map(|h| {
            let mut v = Vec::new();
            record(h).encode(&mut v).expect("encodes");
            v
        })
        .collect();
    let bytes: usize = recs.iter().map(|r| r.len()).sum();
    let t = Instant::now();
    for r in &recs {
        j.append(r).ok()?;
    }
    j.sync().ok()?;
    let s = t.elapsed().as_secs_f64();
    drop(j);
    let _ = std::fs::remove_dir_all(&dir);
    Some(bytes as f64 / s / 1e6)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let base: PathBuf = std::env::var_os("VYRN_JOURNAL_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/bench-journal")
        });
    let blocks = if quick() { 64 } else { 1024 };
    let n = rounds(5);
    println!(
        "B-REP-9 on this disk ({}): {blocks} blocks of {} KiB over 2 drive directories, synced every 64, {n} rounds",
        base.display(),
        BLOCK_BYTES >> 10
    );
    let (mut u, mut s) = (Vec::new(), Vec::new());
    // Interleaved so that the disk's background state hits both alike.
    for _ in 0..n {
        match round(&base, BackendChoice::Uring, "uring", blocks) {
            Some(x) => u.push(x),
            None => {
                println!("  io_uring + O_DIRECT unavailable here (kernel or file system): only the portable backend measured");
            }
        }
        if let Some(x) = round(&base, BackendChoice::Std, "std", blocks) {
            s.push(x);
        }
    }
    if s.is_empty() {
        println!("  the portable backend failed to open {}", base.display());
        return;
    }
    let ms = median(s);
    println!("  pwrite + fdatasync (baseline): median {ms:.0} MB/s");
    if !u.is_empty() {
        let mu = median(u);
        println!("  io_uring + O_DIRECT:           median {mu:.0} MB/s");
        println!(
            "  ratio io_uring / portable = {:.2}x MB/s (median)",
            mu / ms
        );
    }
}
