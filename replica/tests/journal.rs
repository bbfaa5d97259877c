//! Block journal: round trips on both backends, written-once, torn tails and corruption,
//! the retention ring and REP_A_ARCHIVE (07 §8.2, §8.3).

mod common;

use common::*;
use vyrn_replica::disk::journal::slot::SlotError;
use vyrn_replica::disk::journal::{
    decide, Appended, BackendChoice, BackendKind, BlockJournal, Fallback, JournalError, ReadError,
    Refusal, PAGE,
};

fn append_all(j: &mut BlockJournal, hs: impl IntoIterator<Item = u64>, every: usize) {
    for (i, h) in hs.into_iter().enumerate() {
        match j.append(&bytes(h)) {
            Ok(Appended::Queued) => {}
            other => panic!("append {h}: {other:?}"),
        }
        if (i + 1) % every == 0 {
            must(j.sync());
        }
    }
    must(j.sync());
}

fn assert_serves(j: &mut BlockJournal, hs: impl IntoIterator<Item = u64>) {
    for h in hs {
        match j.read(h) {
            Ok(b) => assert_eq!(&b[..], &bytes(h)[..], "block {h} bytes"),
            Err(e) => panic!("block {h}: {e}"),
        }
    }
}

#[test]
fn round_trip_many_blocks_across_three_drives_on_both_backends() {
    for be in backends() {
        let t = TestDir::new("roundtrip");
        let drives = t.drives(3);
        let (mut j, rep) = open(cfg(drives.clone(), be));
        assert_eq!(rep.blocks, 0);
        let want = if be == BackendChoice::Uring {
            BackendKind::Uring
        } else {
            BackendKind::Std
        };
        assert_eq!(j.backend_kind(), want);
        // A queued block is not served before the sync that makes it durable.
        assert!(matches!(j.append(&bytes(0)), Ok(Appended::Queued)));
        assert!(matches!(j.read(0), Err(ReadError::NotFound)));
        must(j.sync());
        append_all(&mut j, 1..150, 7);
        assert_eq!(j.counters().blocks_written, 150);
        assert!(j.counters().segments_created > 3, "64 KiB segments roll");
        for h in 0..150 {
            let loc = j.locate(h).expect("indexed");
            assert_eq!(loc.drive, (h % 3) as usize, "h mod N (07 §8.2)");
            assert_eq!(loc.offset % PAGE as u64, 0);
            assert_eq!(loc.len, bytes(h).len() as u64);
        }
        assert_serves(&mut j, 0..150);
        // Each drive directory holds only its own heights.
        for (d, dir) in drives.iter().enumerate() {
            assert!(std::fs::read_dir(dir).unwrap().count() >= 1, "drive {d}");
        }
        let (s, seqs) = pkts_of(77);
        assert_eq!(j.locate_pkt(s, seqs[1]).unwrap(), Some(77));
        assert_eq!(
            j.locate_pkt(999, 78).unwrap(),
            Some(77),
            "unavailable entries"
        );
        assert_eq!(j.locate_pkt(s, 100_000).unwrap(), None);
        assert!(j.pkt_candidates(s, seqs[0]).iter().any(|r| r.contains(&77)));
        drop(j);

        let (mut j, rep) = open(cfg(drives.clone(), be));
        assert_eq!(rep.blocks, 150);
        assert!(rep.refused.is_empty(), "{:?}", rep.refused);
        assert!(rep.truncated.is_empty());
        assert_eq!(j.heights(), (0..150).collect::<Vec<_>>());
        assert_serves(&mut j, 0..150);
        assert_eq!(j.locate_pkt(s, seqs[0]).unwrap(), Some(77), "rebuilt index");
        // Appending continues after recovery.
        append_all(&mut j, 150..160, 3);
        drop(j);
        let (mut j, rep) = open(cfg(drives, be));
        assert_eq!(rep.blocks, 160);
        assert_serves(&mut j, 0..160);
    }
}

#[test]
fn a_height_is_written_once_identical_is_idempotent_different_is_a_conflict() {
    for be in backends() {
        let t = TestDir::new("once");
        let drives = t.drives(2);
        let (mut j, _) = open(cfg(drives.clone(), be));
        let other = record_with(5, 9).to_bytes().unwrap();
        assert_ne!(other, bytes(5));
        assert!(matches!(j.append(&bytes(5)), Ok(Appended::Queued)));
        assert!(
            matches!(j.append(&bytes(5)), Ok(Appended::Identical)),
            "queued"
        );
        assert!(matches!(
            j.append(&other),
            Err(JournalError::Conflict { height: 5 })
        ));
        must(j.sync());
        assert!(
            matches!(j.append(&bytes(5)), Ok(Appended::Identical)),
            "durable"
        );
        assert!(matches!(
            j.append(&other),
            Err(JournalError::Conflict { height: 5 })
        ));
        assert_eq!(j.counters().appends_identical, 2);
        assert_eq!(j.counters().appends_conflict, 2);
        assert_eq!(j.counters().blocks_written, 1);
        drop(j);
        let (mut j, _) = open(cfg(drives, be));
        assert!(matches!(
            j.append(&other),
            Err(JournalError::Conflict { height: 5 })
        ));
        assert!(
            matches!(j.append(&bytes(5)), Ok(Appended::Identical)),
            "recovered"
        );
        must(j.sync());
        assert_serves(&mut j, [5]);
    }
}

#[test]
fn bad_records_are_refused_at_append_with_a_typed_error_and_a_counter() {
    let t = TestDir::new("badappend");
    let (mut j, _) = open(cfg(t.drives(2), BackendChoice::Std));
    assert!(matches!(
        j.append(&[0u8; 4096]),
        Err(JournalError::Malformed(_))
    ));
    assert!(matches!(
        j.append(b"short"),
        Err(JournalError::Malformed(_))
    ));
    let mut b = bytes(3);
    b[24 + 126] ^= 1; // a seq_sig byte: parses, does not verify
    assert!(matches!(
        j.append(&b),
        Err(JournalError::BadSignature { height: 3 })
    ));
    let mut wrong = record(4);
    wrong
        .header
        .sign(&ed25519_dalek::SigningKey::from_bytes(&[8; 32]));
    assert!(matches!(
        j.append_record(&wrong),
        Err(JournalError::BadSignature { height: 4 })
    ));
    assert_eq!(j.counters().appends_refused, 4);
    must(j.sync());
    assert!(j.heights().is_empty());
}

/// Truncate the last record of a drive mid-way, flip a byte inside a middle record and one
/// inside a middle slot head: recovery truncates the tail, refuses the two, and serves every
/// other block; the refused heights can then be written again.
#[test]
fn torn_tail_and_corruption_are_truncated_or_refused_and_every_good_block_is_served() {
    for be in backends() {
        let t = TestDir::new("torn");
        let drives = t.drives(3);
        let (mut j, _) = open(cfg(drives.clone(), be));
        append_all(&mut j, 0..40, 5);
        let torn = j.locate(37).unwrap(); // drive 1's last block
        let body = j.locate(10).unwrap(); // drive 1, middle
        let head = j.locate(20).unwrap(); // drive 2, middle
        drop(j);
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(seg_path(&drives[1], torn.segment))
            .unwrap();
        f.set_len(torn.offset + torn.len / 2).unwrap();
        flip(&seg_path(&drives[1], body.segment), body.offset + 300);
        flip(
            &seg_path(&drives[2], head.segment),
            head.offset - PAGE as u64 + 20,
        );

        let (mut j, rep) = open(cfg(drives.clone(), be));
        assert_eq!(j.counters().torn_tails_truncated, 1, "{rep:?}");
        assert_eq!(rep.truncated[0].drive, 1);
        assert_eq!(rep.truncated[0].offset, torn.offset - PAGE as u64);
        let why: Vec<(Option<u64>, Refusal)> =
            rep.refused.iter().map(|r| (r.height, r.why)).collect();
        assert!(why.contains(&(Some(10), Refusal::Hash)), "{why:?}");
        assert!(
            why.contains(&(None, Refusal::SlotHead(SlotError::Hash))),
            "{why:?}"
        );
        assert_eq!(j.counters().records_refused, 2);
        let good: Vec<u64> = (0..40).filter(|h| ![10, 20, 37].contains(h)).collect();
        assert_eq!(j.heights(), good, "never serves what it cannot verify");
        assert_serves(&mut j, good.iter().copied());
        for h in [10, 20, 37] {
            assert!(matches!(j.read(h), Err(ReadError::NotFound)));
        }
        // Refetched from a peer (07 §14): the same heights are accepted again.
        append_all(&mut j, [37, 10, 20], 3);
        assert_serves(&mut j, 0..40);
        drop(j);
        let (mut j, rep) = open(cfg(drives, be));
        assert!(rep.truncated.is_empty());
        assert_eq!(rep.refused.len(), 2, "the damaged slots stay, refused");
        assert_serves(&mut j, 0..40);
    }
}

/// `read_only` (what `vyrn journal inspect` opens): recovery reports the torn tail and serves
/// every good block, but the file keeps its length, nothing is created, and `append` is
/// refused; the next writable open then cuts the tail as usual.
#[test]
fn a_read_only_open_reports_a_torn_tail_and_changes_nothing() {
    let t = TestDir::new("readonly");
    let drives = t.drives(2);
    let (mut j, _) = open(cfg(drives.clone(), BackendChoice::Std));
    append_all(&mut j, 0..10, 5);
    let torn = j.locate(9).unwrap();
    drop(j);
    let seg = seg_path(&drives[1], torn.segment);
    let f = std::fs::OpenOptions::new().write(true).open(&seg).unwrap();
    f.set_len(torn.offset + torn.len / 2).unwrap();
    let len = std::fs::metadata(&seg).unwrap().len();

    let mut c = cfg(drives.clone(), BackendChoice::Auto);
    c.read_only = true;
    let (mut j, rep) = BlockJournal::open(c).unwrap();
    assert_eq!(rep.truncated.len(), 1, "{rep:?}");
    assert_eq!(
        std::fs::metadata(&seg).unwrap().len(),
        len,
        "the tail stays"
    );
    assert_eq!(j.heights(), (0..9).collect::<Vec<u64>>());
    assert_serves(&mut j, 0..9);
    assert!(matches!(j.append(&bytes(9)), Err(JournalError::Config(_))));
    drop(j);
    let mut c = cfg(vec![t.0.join("absent")], BackendChoice::Std);
    c.read_only = true;
    let (_, rep) = BlockJournal::open(c).unwrap();
    assert_eq!(
        rep.failed_drives,
        vec![0],
        "a missing drive is reported, not created"
    );
    assert!(!t.0.join("absent").exists());

    let (_, rep) = open(cfg(drives, BackendChoice::Std));
    assert_eq!(rep.truncated.len(), 1);
    assert!(
        std::fs::metadata(&seg).unwrap().len() < len,
        "a writable open cuts it"
    );
}

fn flip(path: &std::path::Path, at: u64) {
    let mut b = std::fs::read(path).unwrap();
    b[at as usize] ^= 0x40;
    std::fs::write(path, b).unwrap();
}

/// Without a verifying key, records after a resync cannot be trusted and are refused.
#[test]
fn without_a_key_records_found_by_resync_are_refused_not_served() {
    let t = TestDir::new("unanchored");
    let drives = t.drives(1);
    let mut c = cfg(drives.clone(), BackendChoice::Std);
    c.verifying_key = None;
    c.segment_bytes = 1 << 20;
    let (mut j, _) = open(c.clone());
    append_all(&mut j, 0..10, 10);
    let l4 = j.locate(4).unwrap();
    assert_eq!(l4.segment, j.locate(9).unwrap().segment);
    drop(j);
    flip(
        &seg_path(&drives[0], l4.segment),
        l4.offset - PAGE as u64 + 70,
    );
    let (mut j, rep) = open(c.clone());
    assert_eq!(j.heights(), vec![0, 1, 2, 3]);
    assert!(rep
        .refused
        .iter()
        .any(|r| r.why == Refusal::Unanchored && r.height == Some(5)));
    assert!(
        rep.truncated.is_empty(),
        "good slots follow: not a torn tail"
    );
    assert_serves(&mut j, 0..4);
    drop(j);
    // With the key the same damage costs only block 4.
    c.verifying_key = Some(key().verifying_key());
    let (mut j, _) = open(c);
    assert_eq!(j.heights(), vec![0, 1, 2, 3, 5, 6, 7, 8, 9]);
    assert_serves(&mut j, [5, 6, 7, 8, 9]);
}

#[test]
fn retention_ring_wraps_deletes_the_oldest_and_raises_rep_a_archive() {
    for be in backends() {
        let t = TestDir::new("ring");
        let drives = t.drives(3);
        let mut c = cfg(drives.clone(), be);
        c.budget_blocks_per_drive = 4;
        let (mut j, _) = open(c.clone());
        assert!(!j.archive_alarm());
        append_all(&mut j, 0..30, 5);
        assert_eq!(j.heights(), (18..30).collect::<Vec<_>>());
        assert!(j.archive_alarm(), "REP_A_ARCHIVE (07 §8.3)");
        assert_eq!(j.counters().evicted_unarchived, 18);
        assert_eq!(j.counters().rep_a_archive_raised, 1);
        assert!(j.counters().segments_removed > 0, "empty segments unlinked");
        for h in 0..18 {
            assert!(matches!(j.read(h), Err(ReadError::NotFound)));
        }
        assert_serves(&mut j, 18..30);
        drop(j);
        // Tombstones survive recovery: deleted blocks stay deleted.
        let (mut j, rep) = open(c.clone());
        assert!(rep.refused.is_empty(), "{:?}", rep.refused);
        assert_eq!(j.heights(), (18..30).collect::<Vec<_>>());
        append_all(&mut j, 30..33, 1);
        assert_eq!(j.heights(), (21..33).collect::<Vec<_>>());
        for d in &drives {
            let n = std::fs::read_dir(d).unwrap().count();
            assert!(n <= 4, "segments bounded, got {n}");
        }
    }
}

#[test]
fn byte_budget_is_kept_per_drive_and_receiving_never_blocks() {
    let t = TestDir::new("bytes");
    let mut c = cfg(t.drives(2), BackendChoice::Std);
    c.budget_bytes_per_drive = 40 * 1024;
    let (mut j, _) = open(c);
    for h in 0..60 {
        assert!(
            j.append(&bytes(h)).is_ok(),
            "append {h} never refused for space"
        );
        must(j.sync());
        for d in 0..2 {
            assert!(
                j.drive_bytes(d) <= 40 * 1024,
                "drive {d}: {}",
                j.drive_bytes(d)
            );
        }
    }
    assert!(j.contains(59) && j.contains(58));
    assert!(!j.contains(0));
    assert_eq!(j.counters().over_budget, 0);
}

#[test]
fn archived_blocks_are_deleted_first_and_the_alarm_clears_when_the_archive_catches_up() {
    let t = TestDir::new("archived");
    let mut c = cfg(t.drives(1), BackendChoice::Std);
    c.budget_blocks_per_drive = 5;
    let (mut j, _) = open(c);
    append_all(&mut j, 0..5, 5);
    j.archived(3);
    j.archived(1); // out of order
    append_all(&mut j, [5], 1);
    assert!(!j.contains(1) && j.contains(0), "acked 1 before unacked 0");
    append_all(&mut j, [6], 1);
    assert!(!j.contains(3) && j.contains(0));
    assert!(!j.archive_alarm());
    assert_eq!(j.counters().evicted_archived, 2);
    append_all(&mut j, [7], 1);
    assert!(!j.contains(0));
    assert!(j.archive_alarm(), "unarchived block deleted");
    assert_eq!(j.counters().evicted_unarchived, 1);
    j.archived_up_to(1);
    assert!(
        j.archive_alarm(),
        "watermark below the oldest block held (2)"
    );
    j.archived_up_to(2);
    assert!(!j.archive_alarm(), "archive caught up with the ring");
    append_all(&mut j, [8], 1);
    assert!(!j.contains(2));
    assert_eq!(j.counters().evicted_archived, 3);
    assert!(!j.archive_alarm());
    assert_eq!(j.counters().rep_a_archive_raised, 1);
    assert_eq!(j.heights(), vec![4, 5, 6, 7, 8]);
}

#[test]
fn rep_a_archive_fires_early_on_archive_lag() {
    let t = TestDir::new("lag");
    let mut c = cfg(t.drives(1), BackendChoice::Std);
    c.archive_alarm_lag_blocks = 10;
    let (mut j, _) = open(c);
    append_all(&mut j, 0..5, 5);
    j.archived_up_to(0);
    append_all(&mut j, 5..10, 5);
    assert!(!j.archive_alarm());
    append_all(&mut j, [10], 1);
    assert!(j.archive_alarm(), "lag 10 blocks");
    assert_eq!(j.counters().evicted_unarchived, 0);
    j.archived_up_to(10);
    assert!(!j.archive_alarm());
}

#[test]
fn backend_fallback_rule() {
    let einval = || Err(std::io::Error::from_raw_os_error(libc_einval()));
    assert_eq!(
        decide(BackendChoice::Auto, true, &[Ok(()), einval()]).unwrap(),
        (BackendKind::Std, Some(Fallback::ODirectRefused))
    );
    assert_eq!(
        decide(BackendChoice::Auto, false, &[]).unwrap(),
        (BackendKind::Std, Some(Fallback::UringUnavailable))
    );
    assert_eq!(
        decide(BackendChoice::Auto, true, &[Ok(()), Ok(())]).unwrap(),
        (BackendKind::Uring, None)
    );
    assert!(decide(BackendChoice::Uring, true, &[einval()]).is_err());
    assert!(
        decide(
            BackendChoice::Auto,
            true,
            &[Err(std::io::Error::from(
                std::io::ErrorKind::PermissionDenied
            ))]
        )
        .is_err(),
        "a drive error is not a reason to fall back"
    );
    assert_eq!(
        decide(BackendChoice::Std, false, &[]).unwrap(),
        (BackendKind::Std, None)
    );
    // Auto on this machine: whichever it picks, the counters say so.
    let t = TestDir::new("auto");
    let (j, _) = open(cfg(t.drives(2), BackendChoice::Auto));
    let c = j.counters();
    match j.backend_kind() {
        BackendKind::Uring => assert_eq!(c.fallback_used, 0),
        BackendKind::Std => {
            assert_eq!(c.fallback_used, 1);
            assert_eq!(c.fallback_uring_unavailable + c.fallback_odirect_refused, 1);
        }
    }
}

fn libc_einval() -> i32 {
    22
}

#[test]
fn config_errors_are_typed() {
    let t = TestDir::new("cfgerr");
    let d = t.drives(1);
    let mut c = cfg(vec![], BackendChoice::Std);
    assert!(matches!(
        BlockJournal::open(c.clone()),
        Err(JournalError::Config(_))
    ));
    c.drives = vec![d[0].clone(), d[0].clone()];
    assert!(matches!(
        BlockJournal::open(c.clone()),
        Err(JournalError::Config(_))
    ));
    c.drives = d;
    c.segment_bytes = 100;
    assert!(matches!(
        BlockJournal::open(c.clone()),
        Err(JournalError::Config(_))
    ));
    c.segment_bytes = 1 << 20;
    c.max_record_bytes = 1 << 31;
    assert!(matches!(
        BlockJournal::open(c),
        Err(JournalError::Config(_))
    ));
}

/// A block that rots on disk after recovery is refused at read time, counted, and never
/// served again.
#[test]
fn a_block_that_rots_after_recovery_is_refused_on_read() {
    for be in backends() {
        let t = TestDir::new("rot");
        let drives = t.drives(2);
        let (mut j, _) = open(cfg(drives.clone(), be));
        append_all(&mut j, 0..6, 6);
        let l = j.locate(2).unwrap();
        flip(&seg_path(&drives[0], l.segment), l.offset + 5000);
        assert!(matches!(j.read(2), Err(ReadError::Refused(Refusal::Hash))));
        assert_eq!(j.counters().reads_refused, 1);
        assert!(matches!(j.read(2), Err(ReadError::NotFound)));
        assert_serves(&mut j, [0, 1, 3, 4, 5]);
    }
}
