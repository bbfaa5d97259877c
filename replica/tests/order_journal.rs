//! The order journal (07 §4.10 "and then from their NVMe order journal"): frames appended byte
//! for byte, read back in ranges across segments, kept within a byte budget, recovered at open
//! with a torn tail cut off and a rotted entry skipped, and served by the frame store once
//! memory let them go.

mod common;

use common::TestDir;
use vyrn_replica::disk::frame_store::FrameStore;
use vyrn_replica::disk::order_journal::{OrderFault, OrderJournal, OrderJournalConfig, ENTRY_HDR};
use vyrn_wire::frame::{same_frame, FrameHeader, FLAG_PEER_REPAIRED};
use vyrn_wire::msg::ctrl::RepairReq;

fn frame(stream: u8, fs: u64) -> Vec<u8> {
    // Sizes vary, so entries straddle segment ends at different places.
    let body = 40 + (fs as usize * 37) % 300;
    common::order_frame(stream, fs, &vec![(fs as u8) ^ stream; body])
}

fn cfg(d: &TestDir, segment_bytes: u64, max_bytes: u64) -> OrderJournalConfig {
    OrderJournalConfig {
        dir: d.0.join("order"),
        segment_bytes,
        max_bytes,
    }
}

/// Every frame the journal serves in `from..=to`, each checked to be the frame written.
fn read_all(j: &mut OrderJournal, stream: u8, from: u64, to: u64) -> Vec<(u64, Vec<u8>)> {
    let mut got = Vec::new();
    j.read(stream, from, to, |s, f| got.push((s, f.to_vec())));
    for (s, f) in &got {
        assert_eq!(f, &frame(stream, *s), "frame {s} served as written");
    }
    got
}

fn segments(d: &TestDir, stream: u8) -> Vec<std::path::PathBuf> {
    let mut v: Vec<_> = std::fs::read_dir(d.0.join("order").join(format!("s{stream}")))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    v.sort();
    v
}

#[test]
fn frames_read_back_byte_for_byte_across_segments_and_both_substreams() {
    let d = TestDir::new("oj-rt");
    let mut j = OrderJournal::open(cfg(&d, 4096, 1 << 30)).unwrap();
    for fs in 1..=400u64 {
        assert!(j.append(0, fs, &frame(0, fs)));
        if fs <= 100 {
            assert!(j.append(1, fs, &frame(1, fs)));
        }
    }
    assert!(segments(&d, 0).len() > 10, "small segments roll");
    assert_eq!((j.span(0), j.span(1)), (Some((1, 400)), Some((1, 100))));
    // Unflushed frames are flushed by the read that needs them.
    let got = read_all(&mut j, 0, 90, 260);
    assert_eq!(got.len(), 171);
    for (s, f) in &got {
        assert_eq!(f, &frame(0, *s), "frame {s}");
    }
    assert_eq!(got.first().map(|g| g.0), Some(90));
    // Past the newest, before the oldest: only what is held.
    assert_eq!(read_all(&mut j, 1, 95, 500).len(), 6);
    assert_eq!(read_all(&mut j, 1, 0, 0).len(), 0);
    assert_eq!(read_all(&mut j, 9, 1, 5).len(), 0, "no such substream");
    assert_eq!(j.counters().read, 177);
}

#[test]
fn out_of_sequence_frames_are_refused_and_a_restart_skips_what_it_holds() {
    let d = TestDir::new("oj-seq");
    {
        let mut j = OrderJournal::open(cfg(&d, 8192, 1 << 30)).unwrap();
        for fs in 5..=50u64 {
            assert!(j.append(0, fs, &frame(0, fs)));
        }
        assert!(!j.append(0, 52, &frame(0, 52)), "a gap");
        assert!(!j.append(0, 3, &frame(0, 3)), "older than the first");
        assert!(!j.append(0, 51, &[]), "empty");
        assert_eq!(j.counters().refused, 3);
        j.flush();
    }
    // Reopened: the same frames, checked; the stream delivered again from frame 5 is skipped
    // and appends go on after the last.
    let mut j = OrderJournal::open(cfg(&d, 8192, 1 << 30)).unwrap();
    assert_eq!(j.counters().recovered, 46);
    assert_eq!(j.span(0), Some((5, 50)));
    for fs in 5..=50u64 {
        assert!(!j.append(0, fs, &frame(0, fs)));
    }
    assert_eq!(j.counters().already_held, 46);
    for fs in 51..=60u64 {
        assert!(j.append(0, fs, &frame(0, fs)));
    }
    let got = read_all(&mut j, 0, 1, 100);
    assert_eq!(got.len(), 56);
}

#[test]
fn the_byte_budget_drops_the_oldest_segments() {
    let d = TestDir::new("oj-ring");
    let mut j = OrderJournal::open(cfg(&d, 4096, 20_000)).unwrap();
    for fs in 1..=1_000u64 {
        assert!(j.append(0, fs, &frame(0, fs)));
    }
    let (first, last) = j.span(0).unwrap();
    assert_eq!(last, 1_000);
    assert!(first > 900, "only the newest ~20 kB kept, from {first}");
    assert!(j.bytes(0) <= 20_000 + 4096, "{}", j.bytes(0));
    assert!(j.counters().segments_dropped > 50);
    assert!(segments(&d, 0).len() <= 7, "{:?}", segments(&d, 0).len());
    assert!(
        read_all(&mut j, 0, 1, first - 1).is_empty(),
        "dropped frames are gone"
    );
    let got = read_all(&mut j, 0, first, last);
    assert_eq!(got.len() as u64, last - first + 1);
}

#[test]
fn a_torn_tail_is_cut_off_at_open_and_appends_continue_after_the_last_whole_frame() {
    let d = TestDir::new("oj-torn");
    {
        let mut j = OrderJournal::open(cfg(&d, 1 << 20, 1 << 30)).unwrap();
        for fs in 1..=30u64 {
            j.append(0, fs, &frame(0, fs));
        }
        j.flush();
    }
    // A crash mid-write: the last entry is half there.
    let seg = segments(&d, 0).pop().unwrap();
    let len = std::fs::metadata(&seg).unwrap().len();
    let last = (ENTRY_HDR + frame(0, 30).len()) as u64;
    let f = std::fs::OpenOptions::new().write(true).open(&seg).unwrap();
    f.set_len(len - last / 2).unwrap();
    drop(f);
    let mut j = OrderJournal::open(cfg(&d, 1 << 20, 1 << 30)).unwrap();
    let c = j.counters();
    assert_eq!(c.recovered, 29);
    assert_eq!(c.truncated_bytes, last - last / 2);
    assert_eq!(j.span(0), Some((1, 29)));
    assert_eq!(std::fs::metadata(&seg).unwrap().len(), len - last);
    assert!(j.append(0, 30, &frame(0, 30)));
    let got = read_all(&mut j, 0, 1, 30);
    assert_eq!(got.len(), 30);
}

#[test]
fn a_rotted_byte_is_never_served_and_at_open_is_skipped_not_the_end() {
    let d = TestDir::new("oj-rot");
    let mut j = OrderJournal::open(cfg(&d, 4096, 1 << 30)).unwrap();
    for fs in 1..=100u64 {
        j.append(0, fs, &frame(0, fs));
    }
    j.flush();
    let segs = segments(&d, 0);
    assert!(segs.len() > 3);
    // One byte of the second segment's third entry flips on the drive.
    let victim = &segs[1];
    let mut bytes = std::fs::read(victim).unwrap();
    let first_seq = u64::from_le_bytes(bytes[..8].try_into().unwrap());
    let mut off = 0usize;
    for _ in 0..2 {
        let len = u32::from_le_bytes(bytes[off + 8..off + 12].try_into().unwrap()) as usize;
        off += ENTRY_HDR + len;
    }
    bytes[off + ENTRY_HDR + 20] ^= 0x40;
    std::fs::write(victim, &bytes).unwrap();
    let bad = first_seq + 2;
    // Read while open: the run from the bad frame to its segment's end is not served.
    let got = read_all(&mut j, 0, 1, 100);
    assert!(got.iter().all(|(s, f)| f == &frame(0, *s)));
    assert!(
        got.iter().all(|(s, _)| *s != bad),
        "the rotted frame is not served"
    );
    assert!(j.counters().corrupt >= 1);
    assert!(
        got.iter().any(|(s, _)| *s > bad),
        "later segments still serve"
    );
    drop(j);
    // Reopened (07 §8, security review F15): the bad frame is a hole, skipped with its reason;
    // every frame after it is kept, and no segment is cut or deleted.
    let mut j = OrderJournal::open(cfg(&d, 4096, 1 << 30)).unwrap();
    assert_eq!(j.span(0), Some((1, 100)));
    assert_eq!(segments(&d, 0).len(), segs.len());
    let c = j.counters();
    assert_eq!((c.recovered, c.skipped, c.bad_entries), (99, 1, 1));
    assert_eq!((c.segments_dropped, c.truncated_bytes), (0, 0));
    assert_eq!(j.skips()[0].why, OrderFault::Crc);
    let got = read_all(&mut j, 0, 1, 100);
    assert_eq!(got.len(), 99);
    assert!(got.iter().all(|(s, _)| *s != bad));
}

#[test]
fn garbage_segment_files_never_panic_and_serve_nothing_unchecked() {
    let d = TestDir::new("oj-garbage");
    let dir = d.0.join("order").join("s1");
    std::fs::create_dir_all(&dir).unwrap();
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    for no in 0..4u64 {
        let mut b = vec![0u8; 300 + no as usize * 500];
        for v in b.iter_mut() {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            *v = x as u8;
        }
        std::fs::write(dir.join(format!("{no:012}.ord")), b).unwrap();
    }
    std::fs::write(dir.join("notes.txt"), b"not a segment").unwrap();
    let mut j = OrderJournal::open(cfg(&d, 4096, 1 << 30)).unwrap();
    assert_eq!(j.span(1), None);
    assert!(read_all(&mut j, 1, 0, u64::MAX).is_empty());
    // And it journals from scratch.
    assert!(j.append(1, 1, &frame(1, 1)));
    assert_eq!(read_all(&mut j, 1, 1, 1).len(), 1);
}

fn req(from: u64, to: u64) -> RepairReq {
    RepairReq {
        epoch: 7,
        tenure: 0,
        stream: 0,
        from_seq: from,
        to_seq: to,
    }
}

/// 07 §4.10: once the memory store let a frame go (REP_PEER_RING_MS), a peer serves it from
/// its order journal — flagged `peer_repaired`, every other byte as the stream core wrote it,
/// within the same rate cap.
#[test]
fn the_frame_store_serves_from_the_journal_what_memory_let_go() {
    let d = TestDir::new("oj-store");
    // Memory keeps 10 ms; frames come every 1 ms.
    let mut s = FrameStore::new(1 << 20, 10_000_000, 1_000_000);
    s.set_journal(OrderJournal::open(cfg(&d, 16 << 10, 1 << 30)).unwrap());
    for fs in 1..=200u64 {
        assert!(s.store(0, fs, &frame(0, fs), fs * 1_000_000));
    }
    s.flush();
    let (mem_first, _) = s.span(0).unwrap();
    assert!(
        mem_first > 180,
        "memory holds the last ~10 ms: from {mem_first}"
    );
    let mut got = Vec::new();
    let out = s.serve(&req(1, 200), 200_000_000, |b| got.push(b.to_vec()));
    assert_eq!((out.sent, out.capped, out.missing), (200, 0, 0));
    for (i, b) in got.iter().enumerate() {
        let (h, _) = FrameHeader::parse(b).unwrap();
        assert_eq!(h.frame_seq, i as u64 + 1, "in order");
        assert_ne!(h.flags & FLAG_PEER_REPAIRED, 0);
        assert!(same_frame(b, &frame(0, h.frame_seq)));
    }
    assert_eq!(s.counters().from_journal, mem_first - 1);
    // Without a journal the same request finds only memory's frames.
    let mut bare = FrameStore::new(1 << 20, 10_000_000, 1_000_000);
    for fs in 1..=200u64 {
        bare.store(0, fs, &frame(0, fs), fs * 1_000_000);
    }
    let out = bare.serve(&req(1, 200), 200_000_000, |_| {});
    assert_eq!(out.missing, mem_first - 1);
    // The rate cap counts journal frames as any other: a slow server sends what its tokens
    // allow and counts the rest.
    let d2 = TestDir::new("oj-slow");
    let mut slow = FrameStore::new(1 << 20, 10_000_000, 1);
    slow.set_journal(OrderJournal::open(cfg(&d2, 16 << 10, 1 << 30)).unwrap());
    for fs in 1..=6_000u64 {
        slow.store(0, fs, &frame(0, fs), fs * 1_000_000);
    }
    let out = slow.serve(&req(1, 6_000), 6_000_000_000, |_| {});
    assert_eq!(out.sent + out.capped, 6_000);
    assert!(out.capped > 0 && out.sent >= 4_000, "{out:?}");
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(32))]

    /// Any damage to any segment — bytes flipped, a tail cut — never panics, and whatever the
    /// journal still serves, open or reopened, is exactly what was appended.
    #[test]
    fn damaged_segments_serve_only_what_was_appended(
        flips in proptest::collection::vec((0usize..8, 0usize..8192, 1u8..=255), 0..6),
        cut in proptest::option::of((0usize..8, 0usize..8192)),
    ) {
        let d = TestDir::new("oj-prop");
        let mut j = OrderJournal::open(cfg(&d, 2048, 1 << 30)).unwrap();
        for fs in 1..=60u64 {
            j.append(0, fs, &frame(0, fs));
        }
        j.flush();
        let segs = segments(&d, 0);
        // Each frame's place before the damage: (segment, start, end).
        let mut place = std::collections::BTreeMap::new();
        for (k, p) in segs.iter().enumerate() {
            let b = std::fs::read(p).unwrap();
            let mut off = 0usize;
            while off + ENTRY_HDR <= b.len() {
                let seq = u64::from_le_bytes(b[off..off + 8].try_into().unwrap());
                let len = u32::from_le_bytes(b[off + 8..off + 12].try_into().unwrap()) as usize;
                place.insert(seq, (k, off, off + ENTRY_HDR + len));
                off += ENTRY_HDR + len;
            }
        }
        let touched = |seq: u64| {
            let (k, a, b) = place[&seq];
            flips.iter().any(|(s, at, _)| {
                let n = std::fs::metadata(&segs[s % segs.len()]).map_or(0, |m| m.len()) as usize;
                s % segs.len() == k && n > 0 && (a..b).contains(&(at % n))
            })
        };
        let mut touched: std::collections::BTreeSet<u64> =
            (1..=60u64).filter(|&s| touched(s)).collect();
        // A cut in the newest segment loses what follows it; one in an older segment loses more
        // bytes than the gap in `frame_seq` then shows, so only the newest is checked below.
        let mut cut_sealed = false;
        if let Some((s, at)) = cut {
            let k = s % segs.len();
            let n = std::fs::metadata(&segs[k]).unwrap().len() as usize;
            let at = at % n;
            cut_sealed = k + 1 < segs.len();
            touched.extend(place.iter().filter(|(_, p)| p.0 == k && p.2 > at).map(|(s, _)| *s));
        }
        for (s, at, x) in &flips {
            let p = &segs[s % segs.len()];
            let mut b = std::fs::read(p).unwrap();
            let n = b.len();
            b[at % n] ^= x;
            std::fs::write(p, b).unwrap();
        }
        if let Some((s, at)) = cut {
            let p = &segs[s % segs.len()];
            let n = std::fs::metadata(p).unwrap().len();
            let f = std::fs::OpenOptions::new().write(true).open(p).unwrap();
            f.set_len(at as u64 % n).unwrap();
        }
        for (s, f) in read_all(&mut j, 0, 0, 100) {
            proptest::prop_assert_eq!(f, frame(0, s));
        }
        drop(j);
        let mut j = OrderJournal::open(cfg(&d, 2048, 1 << 30)).unwrap();
        let got = read_all(&mut j, 0, 0, 100);
        for (s, f) in &got {
            proptest::prop_assert_eq!(f, &frame(0, *s));
        }
        // Reopened (07 §8): every frame whose bytes were not touched is held — a bad entry
        // costs only itself — what it holds between its first and last frame is each frame
        // either served or a hole counted in `skipped`, and appends go on after it.
        let c = j.counters();
        if !cut_sealed {
            let held: std::collections::BTreeSet<u64> = got.iter().map(|g| g.0).collect();
            for s in (1..=60u64).filter(|s| !touched.contains(s)) {
                proptest::prop_assert!(held.contains(&s), "frame {} lost: {:?}", s, j.skips());
            }
        }
        if let Some((first, last)) = j.span(0) {
            if !touched.contains(&1) && !cut_sealed {
                proptest::prop_assert_eq!(first, 1);
            }
            proptest::prop_assert_eq!(got.len() as u64, c.recovered);
            proptest::prop_assert_eq!(c.recovered + c.skipped, last - first + 1);
            proptest::prop_assert!(j.append(0, last + 1, &frame(0, last + 1)));
        }
    }
}
