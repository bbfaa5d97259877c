//! Security review F15 (07 §8): recovery of the order journal and of the cert journal keeps
//! every entry that verifies. A bad entry in the middle — a rotted payload, a corrupt length
//! field — is skipped with its reason and counted, never trusted and never the end of the
//! journal; a torn tail (the last write, partly there) is still the end, cut off at open.

mod common;

use common::TestDir;
use std::path::{Path, PathBuf};
use vyrn_replica::disk::journal::cert::{
    CertFault, CertJournal, CertKind, CERT_FILE, CERT_HEAD_BYTES,
};
use vyrn_replica::disk::order_journal::{OrderFault, OrderJournal, OrderJournalConfig, ENTRY_HDR};

// ---- the order journal ----

fn frame(fs: u64) -> Vec<u8> {
    let body = 40 + (fs as usize * 37) % 300;
    common::order_frame(0, fs, &vec![fs as u8; body])
}

fn ocfg(d: &TestDir, segment_bytes: u64) -> OrderJournalConfig {
    OrderJournalConfig {
        dir: d.0.join("order"),
        segment_bytes,
        max_bytes: 1 << 30,
    }
}

fn segments(d: &TestDir) -> Vec<PathBuf> {
    let mut v: Vec<_> = std::fs::read_dir(d.0.join("order").join("s0"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    v.sort();
    v
}

/// `n` frames from 1, flushed, in segments of `segment_bytes`.
fn write_frames(d: &TestDir, segment_bytes: u64, n: u64) {
    let mut j = OrderJournal::open(ocfg(d, segment_bytes)).unwrap();
    for fs in 1..=n {
        assert!(j.append(0, fs, &frame(fs)));
    }
    j.flush();
}

/// Where frame `fs`'s entry starts in its segment: (segment path, offset).
fn entry_at(d: &TestDir, fs: u64) -> (PathBuf, usize) {
    for p in segments(d) {
        let b = std::fs::read(&p).unwrap();
        let mut off = 0;
        while off + ENTRY_HDR <= b.len() {
            let seq = u64::from_le_bytes(b[off..off + 8].try_into().unwrap());
            let len = u32::from_le_bytes(b[off + 8..off + 12].try_into().unwrap()) as usize;
            if seq == fs {
                return (p, off);
            }
            off += ENTRY_HDR + len;
        }
    }
    panic!("frame {fs} not on disk");
}

fn poke(path: &Path, f: impl FnOnce(&mut Vec<u8>)) {
    let mut b = std::fs::read(path).unwrap();
    f(&mut b);
    std::fs::write(path, b).unwrap();
}

/// Every frame the journal serves in `1..=to`, each checked to be the frame written.
fn served(j: &mut OrderJournal, to: u64) -> Vec<u64> {
    let mut got = Vec::new();
    j.read(0, 1, to, |s, f| {
        assert_eq!(f, &frame(s)[..], "frame {s} served as written");
        got.push(s);
    });
    got
}

fn all_but(n: u64, bad: &[u64]) -> Vec<u64> {
    (1..=n).filter(|s| !bad.contains(s)).collect()
}

#[test]
fn order_journal_a_rotted_payload_costs_only_its_own_frame() {
    let d = TestDir::new("f15-oj-payload");
    write_frames(&d, 1 << 20, 50);
    let (seg, off) = entry_at(&d, 20);
    poke(&seg, |b| b[off + ENTRY_HDR + 30] ^= 0x10);
    let mut j = OrderJournal::open(ocfg(&d, 1 << 20)).unwrap();
    let c = j.counters();
    assert_eq!((c.recovered, c.skipped, c.bad_entries), (49, 1, 1));
    assert_eq!((c.truncated_bytes, c.segments_dropped), (0, 0));
    assert_eq!(j.span(0), Some((1, 50)));
    assert_eq!(j.skips().len(), 1);
    assert_eq!(j.skips()[0].why, OrderFault::Crc);
    assert_eq!(j.skips()[0].offset, off as u64);
    assert_eq!(served(&mut j, 50), all_but(50, &[20]));
    assert_eq!(j.counters().corrupt, 0, "the hole is not read");
    // Appends go on after the last frame; a second open finds the same.
    assert!(j.append(0, 51, &frame(51)));
    j.flush();
    drop(j);
    let mut j = OrderJournal::open(ocfg(&d, 1 << 20)).unwrap();
    assert_eq!((j.counters().recovered, j.counters().skipped), (50, 1));
    assert_eq!(served(&mut j, 51), all_but(51, &[20]));
}

/// A corrupt length cannot be trusted to find the next entry: recovery resynchronises on the
/// next whole entry with a good CRC — whether the length grew a little (still in range: a
/// skip by it would land inside the next entry), is out of range, is zero, or runs past the
/// segment's end.
#[test]
fn order_journal_resyncs_past_a_corrupt_length_field() {
    // (name, the new length from the old one and the segment's length, why)
    type Case = (&'static str, fn(u32, usize) -> u32, OrderFault);
    let cases: [Case; 5] = [
        ("grown", |l, _| l + 5, OrderFault::Crc),
        ("shrunk", |l, _| l - 9, OrderFault::Crc),
        ("huge", |_, _| 0xFFFF_FF00, OrderFault::Length),
        ("zero", |_, _| 0, OrderFault::Length),
        ("past the end", |_, n| n as u32, OrderFault::Short),
    ];
    for (name, bad_len, why) in cases {
        let d = TestDir::new("f15-oj-len");
        write_frames(&d, 1 << 20, 50);
        let (seg, off) = entry_at(&d, 20);
        poke(&seg, |b| {
            let l = u32::from_le_bytes(b[off + 8..off + 12].try_into().unwrap());
            let n = b.len();
            b[off + 8..off + 12].copy_from_slice(&bad_len(l, n).to_le_bytes());
        });
        let mut j = OrderJournal::open(ocfg(&d, 1 << 20)).unwrap();
        let c = j.counters();
        assert_eq!(
            (c.recovered, c.skipped, c.bad_entries),
            (49, 1, 1),
            "{name}"
        );
        assert_eq!(c.truncated_bytes, 0, "{name}");
        assert_eq!(j.skips()[0].why, why, "{name}");
        assert_eq!(j.span(0), Some((1, 50)), "{name}");
        assert_eq!(served(&mut j, 50), all_but(50, &[20]), "{name}");
    }
}

/// The length of the last entry of an older segment rots: the segments after it are kept, and
/// so is a whole segment of garbage in the middle (its frames are the holes).
#[test]
fn order_journal_bad_bytes_in_an_older_segment_cost_nothing_after_them() {
    let d = TestDir::new("f15-oj-seg");
    write_frames(&d, 4096, 120);
    let segs = segments(&d);
    assert!(segs.len() > 6);
    // Segment 1's last entry: its length field.
    let b1 = std::fs::read(&segs[1]).unwrap();
    let mut off = 0;
    let mut last = (0u64, 0usize);
    while off < b1.len() {
        let seq = u64::from_le_bytes(b1[off..off + 8].try_into().unwrap());
        last = (seq, off);
        off += ENTRY_HDR + u32::from_le_bytes(b1[off + 8..off + 12].try_into().unwrap()) as usize;
    }
    poke(&segs[1], |b| b[last.1 + 9] ^= 0x01);
    // Segment 4: garbage throughout.
    let in_seg4: Vec<u64> = (1..=120u64)
        .filter(|&fs| entry_at(&d, fs).0 == segs[4])
        .collect();
    poke(&segs[4], |b| {
        for (i, x) in b.iter_mut().enumerate() {
            *x = (i as u8).wrapping_mul(151) ^ 0x5A;
        }
    });
    let mut j = OrderJournal::open(ocfg(&d, 4096)).unwrap();
    let mut bad = vec![last.0];
    bad.extend(&in_seg4);
    let c = j.counters();
    assert_eq!(c.recovered, 120 - bad.len() as u64);
    assert_eq!(c.skipped, bad.len() as u64);
    assert_eq!(c.bad_entries, 2);
    assert_eq!((c.truncated_bytes, c.segments_dropped), (0, 0));
    assert_eq!(segments(&d).len(), segs.len(), "nothing deleted");
    assert_eq!(j.span(0), Some((1, 120)));
    assert_eq!(served(&mut j, 120), all_but(120, &bad));
}

/// A whole entry whose `frame_seq` does not follow (here a stale copy of frame 3 spliced in) is
/// skipped for its sequence; the frames around it are all kept.
#[test]
fn order_journal_an_entry_out_of_sequence_is_skipped_not_the_end() {
    let d = TestDir::new("f15-oj-seq");
    write_frames(&d, 1 << 20, 40);
    let (seg, off3) = entry_at(&d, 3);
    let (_, off4) = entry_at(&d, 4);
    let (_, off20) = entry_at(&d, 20);
    poke(&seg, |b| {
        let stale = b[off3..off4].to_vec();
        b.splice(off20..off20, stale);
    });
    let mut j = OrderJournal::open(ocfg(&d, 1 << 20)).unwrap();
    let c = j.counters();
    assert_eq!((c.recovered, c.skipped, c.bad_entries), (40, 0, 1));
    assert_eq!(j.skips()[0].why, OrderFault::Sequence);
    assert_eq!(served(&mut j, 40), all_but(40, &[]));
}

/// A torn tail after a skipped entry is still the end: cut off, appends continue there.
#[test]
fn order_journal_a_torn_tail_after_a_skip_is_still_cut() {
    let d = TestDir::new("f15-oj-torn");
    write_frames(&d, 1 << 20, 30);
    let (seg, off) = entry_at(&d, 10);
    poke(&seg, |b| b[off + ENTRY_HDR + 5] ^= 0xFF);
    let len = std::fs::metadata(&seg).unwrap().len();
    let last = (ENTRY_HDR + frame(30).len()) as u64;
    let f = std::fs::OpenOptions::new().write(true).open(&seg).unwrap();
    f.set_len(len - last / 2).unwrap();
    drop(f);
    let mut j = OrderJournal::open(ocfg(&d, 1 << 20)).unwrap();
    let c = j.counters();
    assert_eq!((c.recovered, c.skipped, c.bad_entries), (28, 1, 1));
    assert_eq!(c.truncated_bytes, last - last / 2);
    assert_eq!(j.span(0), Some((1, 29)));
    assert_eq!(std::fs::metadata(&seg).unwrap().len(), len - last);
    assert!(j.append(0, 30, &frame(30)));
    assert_eq!(served(&mut j, 30), all_but(30, &[10]));
    j.flush();
    drop(j);
    let mut j = OrderJournal::open(ocfg(&d, 1 << 20)).unwrap();
    assert_eq!(j.counters().truncated_bytes, 0);
    assert_eq!(served(&mut j, 30), all_but(30, &[10]));
}

// ---- the cert journal ----

fn payload(i: usize) -> Vec<u8> {
    (0..(100 + 37 * i)).map(|k| ((k * 7) ^ i) as u8).collect()
}

fn kind(i: usize) -> CertKind {
    [CertKind::Finality, CertKind::Root, CertKind::SealExt][i % 3]
}

fn cert_fill(dirs: &[PathBuf], n: usize) {
    let mut c = CertJournal::open(dirs).unwrap();
    for i in 0..n {
        c.append(kind(i), &payload(i)).unwrap();
    }
    c.sync().unwrap();
}

/// Offset of entry `i` (every copy the same).
fn cert_off(i: usize) -> usize {
    (0..i).map(|k| CERT_HEAD_BYTES + payload(k).len()).sum()
}

/// The journal holds exactly the entries `0..n` but `bad`, each as written.
fn cert_check(c: &mut CertJournal, n: usize, bad: &[usize]) {
    let want: Vec<usize> = (0..n).filter(|i| !bad.contains(i)).collect();
    assert_eq!(c.len(), want.len(), "{:?}", c.counters());
    for (k, &i) in want.iter().enumerate() {
        assert_eq!(c.get(k).unwrap(), (kind(i), payload(i)), "entry {i}");
        assert_eq!(c.entries()[k].offset, cert_off(i) as u64);
    }
}

#[test]
fn cert_journal_a_rotted_payload_costs_only_its_own_entry() {
    let t = TestDir::new("f15-cj-payload");
    let dirs = t.drives(1);
    cert_fill(&dirs, 20);
    let p = dirs[0].join(CERT_FILE);
    let whole = std::fs::metadata(&p).unwrap().len();
    poke(&p, |b| b[cert_off(7) + CERT_HEAD_BYTES + 11] ^= 0x04);
    let mut c = CertJournal::open(&dirs).unwrap();
    cert_check(&mut c, 20, &[7]);
    assert_eq!((c.counters().skipped, c.counters().bad_entries), (1, 1));
    assert_eq!(c.counters().torn_tails, 0);
    assert_eq!(c.skips().len(), 1);
    assert_eq!(c.skips()[0].why, CertFault::Hash);
    assert_eq!(c.skips()[0].offset, cert_off(7) as u64);
    assert_eq!(c.skips()[0].len, (cert_off(8) - cert_off(7)) as u64);
    assert_eq!(std::fs::metadata(&p).unwrap().len(), whole, "nothing cut");
    // Appends go on after the last entry; a second open finds the same.
    c.append(kind(20), &payload(20)).unwrap();
    c.sync().unwrap();
    drop(c);
    let mut c = CertJournal::open(&dirs).unwrap();
    cert_check(&mut c, 21, &[7]);
    assert_eq!(c.counters().skipped, 1);
}

/// A corrupt length (or head) cannot be trusted to find the next entry: recovery resyncs on
/// the next entry that verifies.
#[test]
fn cert_journal_resyncs_past_a_corrupt_length_field() {
    // (name, what it does to the entry's head, why)
    type Case = (&'static str, fn(&mut [u8]), CertFault);
    let cases: [Case; 5] = [
        (
            "grown",
            |h| {
                let l = u32::from_le_bytes(h[..4].try_into().unwrap()) + 3;
                h[..4].copy_from_slice(&l.to_le_bytes());
            },
            CertFault::Hash,
        ),
        (
            "shrunk",
            |h| {
                let l = u32::from_le_bytes(h[..4].try_into().unwrap()) - 50;
                h[..4].copy_from_slice(&l.to_le_bytes());
            },
            CertFault::Hash,
        ),
        (
            "huge",
            |h| h[..4].copy_from_slice(&u32::MAX.to_le_bytes()),
            CertFault::Length,
        ),
        (
            "past the end",
            |h| h[..4].copy_from_slice(&900_000u32.to_le_bytes()),
            CertFault::Length,
        ),
        ("kind", |h| h[4] = 0x77, CertFault::Head),
    ];
    for (name, spoil, why) in cases {
        let t = TestDir::new("f15-cj-len");
        let dirs = t.drives(1);
        cert_fill(&dirs, 20);
        poke(&dirs[0].join(CERT_FILE), |b| spoil(&mut b[cert_off(7)..]));
        let mut c = CertJournal::open(&dirs).unwrap();
        cert_check(&mut c, 20, &[7]);
        assert_eq!(c.counters().skipped, 1, "{name}");
        assert_eq!(c.skips()[0].why, why, "{name}");
        assert_eq!(c.counters().torn_tails, 0, "{name}");
    }
}

/// Two copies, the same entry bad in both: it is skipped, the rest kept, and the copies are
/// left as they are (nothing to refill either from).
#[test]
fn cert_journal_an_entry_bad_in_both_copies_is_skipped() {
    let t = TestDir::new("f15-cj-both");
    let dirs = t.drives(2);
    cert_fill(&dirs, 20);
    poke(&dirs[0].join(CERT_FILE), |b| b[cert_off(9) + 2] ^= 0x80); // its length
    poke(&dirs[1].join(CERT_FILE), |b| {
        b[cert_off(9) + CERT_HEAD_BYTES + 40] ^= 0x01 // its payload
    });
    let before: Vec<Vec<u8>> = dirs
        .iter()
        .map(|d| std::fs::read(d.join(CERT_FILE)).unwrap())
        .collect();
    let mut c = CertJournal::open(&dirs).unwrap();
    cert_check(&mut c, 20, &[9]);
    let k = c.counters().clone();
    assert_eq!((k.skipped, k.bad_entries), (1, 2));
    assert_eq!(
        (k.copies_repaired, k.entries_restored, k.torn_tails),
        (0, 0, 0)
    );
    for (d, b) in dirs.iter().zip(&before) {
        assert_eq!(&std::fs::read(d.join(CERT_FILE)).unwrap(), b);
    }
}

/// A different entry rots in each copy: the journal is every entry, each copy is refilled from
/// the other, and both end as written.
#[test]
fn cert_journal_a_different_bad_entry_in_each_copy_loses_nothing() {
    let t = TestDir::new("f15-cj-each");
    let dirs = t.drives(2);
    cert_fill(&dirs, 20);
    let good = std::fs::read(dirs[0].join(CERT_FILE)).unwrap();
    poke(&dirs[0].join(CERT_FILE), |b| b[cert_off(5) + 1] ^= 0x02);
    poke(&dirs[1].join(CERT_FILE), |b| {
        b[cert_off(12) + CERT_HEAD_BYTES + 3] ^= 0x02
    });
    let mut c = CertJournal::open(&dirs).unwrap();
    cert_check(&mut c, 20, &[]);
    let k = c.counters().clone();
    assert_eq!((k.skipped, k.bad_entries, k.copies_repaired), (0, 2, 2));
    for d in &dirs {
        assert_eq!(std::fs::read(d.join(CERT_FILE)).unwrap(), good);
    }
    drop(c);
    let c = CertJournal::open(&dirs).unwrap();
    assert_eq!(c.len(), 20);
    assert_eq!(c.counters().bad_entries, 0);
}

/// A torn tail after a skipped entry is still the end: cut off at open, appends continue.
#[test]
fn cert_journal_a_torn_tail_after_a_skip_is_still_cut() {
    let t = TestDir::new("f15-cj-torn");
    let dirs = t.drives(1);
    cert_fill(&dirs, 20);
    let p = dirs[0].join(CERT_FILE);
    poke(&p, |b| b[cert_off(4) + CERT_HEAD_BYTES] ^= 0x01);
    let whole = std::fs::metadata(&p).unwrap().len();
    let last = (CERT_HEAD_BYTES + payload(19).len()) as u64;
    let f = std::fs::OpenOptions::new().write(true).open(&p).unwrap();
    f.set_len(whole - last / 3).unwrap();
    drop(f);
    let mut c = CertJournal::open(&dirs).unwrap();
    cert_check(&mut c, 19, &[4]);
    assert_eq!((c.counters().skipped, c.counters().torn_tails), (1, 1));
    assert_eq!(std::fs::metadata(&p).unwrap().len(), whole - last);
    c.append(kind(19), &payload(19)).unwrap();
    c.sync().unwrap();
    drop(c);
    let mut c = CertJournal::open(&dirs).unwrap();
    cert_check(&mut c, 20, &[4]);
    assert_eq!(c.counters().torn_tails, 0);
}

/// `open_read_only` (what `vyrn verify-cert` and the engine's floor use) serves every entry
/// that verifies past a bad one too, and writes nothing.
#[test]
fn cert_journal_a_read_only_open_serves_past_a_bad_entry() {
    let t = TestDir::new("f15-cj-ro");
    let dirs = t.drives(2);
    cert_fill(&dirs, 12);
    for d in &dirs {
        poke(&d.join(CERT_FILE), |b| b[cert_off(3) + 20] ^= 0x20);
    }
    let before: Vec<Vec<u8>> = dirs
        .iter()
        .map(|d| std::fs::read(d.join(CERT_FILE)).unwrap())
        .collect();
    let mut c = CertJournal::open_read_only(&dirs).unwrap();
    cert_check(&mut c, 12, &[3]);
    assert_eq!(c.counters().skipped, 1);
    drop(c);
    for (d, b) in dirs.iter().zip(&before) {
        assert_eq!(&std::fs::read(d.join(CERT_FILE)).unwrap(), b);
    }
}

/// xorshift64*, so the loop is reproducible.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// Random damage to one copy or both: bytes flipped, runs overwritten, a tail cut. Recovery
/// never panics, serves only what was written, and holds every entry whose bytes are untouched
/// in some copy; a second open finds both copies whole and nothing to cut or refill.
#[test]
fn cert_journal_random_damage_never_costs_an_untouched_entry() {
    let mut rng = Rng(0xF15_F15);
    for round in 0..150 {
        let t = TestDir::new("f15-cj-fuzz");
        let dirs = t.drives(1 + round % 2);
        let n = 25;
        cert_fill(&dirs, n);
        let len = cert_off(n);
        // Per copy, which bytes were touched.
        let mut hits = Vec::new();
        for d in &dirs {
            let p = d.join(CERT_FILE);
            let mut b = std::fs::read(&p).unwrap();
            let mut hit = vec![false; len];
            for _ in 0..rng.below(4) + (dirs.len() == 1) as u64 {
                let at = rng.below(len as u64) as usize;
                let long = rng.below(2) == 0;
                let run = (1 + rng.below(if long { 300 } else { 2 }) as usize).min(len - at);
                for k in at..at + run {
                    b[k] ^= 1 | rng.next() as u8;
                    hit[k] = true;
                }
            }
            if rng.below(3) == 0 {
                let cut = rng.below(len as u64) as usize;
                b.truncate(cut);
                hit.iter_mut().skip(cut).for_each(|h| *h = true);
            }
            std::fs::write(&p, &b).unwrap();
            hits.push(hit);
        }
        let mut c = CertJournal::open(&dirs).unwrap();
        let mut held = Vec::new();
        for k in 0..c.len() {
            let (kd, pl) = c.get(k).unwrap();
            let off = c.entries()[k].offset as usize;
            let i = (0..n)
                .find(|&i| cert_off(i) == off)
                .expect("an entry written");
            assert_eq!((kd, pl), (kind(i), payload(i)), "round {round}");
            held.push(i);
        }
        for i in 0..n {
            let (a, z) = (cert_off(i), cert_off(i + 1));
            if hits.iter().any(|hit| !hit[a..z].iter().any(|h| *h)) {
                assert!(
                    held.contains(&i),
                    "round {round}: entry {i} lost: {:?}",
                    c.skips()
                );
            }
        }
        drop(c);
        let mut c = CertJournal::open(&dirs).unwrap();
        assert_eq!(c.len(), held.len(), "round {round}");
        let k = c.counters().clone();
        assert_eq!((k.torn_tails, k.copies_repaired), (0, 0), "round {round}");
        for i in 0..c.len() {
            c.get(i).unwrap();
        }
        assert_eq!(c.counters().mirror_reads, 0, "round {round}: copy 0 whole");
    }
}
