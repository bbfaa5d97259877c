//! The peer frame store (07 §4.10): frames kept by age and bytes, served to `RepairReq`s with
//! `flags.peer_repaired`, at most REP_PEER_RTX_MAX_FPS.

mod common;

use vyrn_replica::disk::frame_store::FrameStore;
use vyrn_replica::disk::order_journal::{OrderJournal, OrderJournalConfig};
use vyrn_wire::frame::{FrameHeader, FLAG_PEER_REPAIRED};
use vyrn_wire::msg::ctrl::RepairReq;

fn frame(stream: u8, fs: u64, body: usize) -> Vec<u8> {
    common::order_frame(stream, fs, &vec![fs as u8; body])
}

fn req(stream: u8, from: u64, to: u64) -> RepairReq {
    RepairReq {
        epoch: 7,
        tenure: 0,
        stream,
        from_seq: from,
        to_seq: to,
    }
}

#[test]
fn serves_held_frames_flagged_peer_repaired_and_counts_the_rest() {
    let mut s = FrameStore::new(1 << 20, 2_000_000_000, 1_000_000);
    for fs in 1..=500u64 {
        assert!(s.store(0, fs, &frame(0, fs, 100), fs * 1000));
        assert!(s.store(1, fs, &frame(1, fs, 60), fs * 1000));
    }
    assert_eq!(s.span(0), Some((1, 500)));
    let mut got = Vec::new();
    let out = s.serve(&req(1, 10, 20), 600_000, |b| got.push(b.to_vec()));
    assert_eq!((out.sent, out.capped, out.missing), (11, 0, 0));
    for (i, b) in got.iter().enumerate() {
        let (h, body) = FrameHeader::parse(b).unwrap();
        assert_eq!((h.stream, h.frame_seq), (1, 10 + i as u64));
        assert_ne!(h.flags & FLAG_PEER_REPAIRED, 0);
        // Every byte but the flags is the frame as stored (INV-REP-3).
        assert!(vyrn_wire::frame::same_frame(b, &frame(1, h.frame_seq, 60)));
        assert_eq!(body.len(), 60);
    }
    // Past the newest: missing, nothing sent.
    let out = s.serve(&req(0, 499, 510), 600_000, |_| {});
    assert_eq!((out.sent, out.missing), (2, 10));
    // A substream that does not exist, or a reversed range: nothing breaks.
    let out = s.serve(&req(5, 1, 2), 600_000, |_| panic!("sent"));
    assert_eq!(out.sent, 0);
}

#[test]
fn the_log_wraps_keeping_the_newest_and_ages_out() {
    // 10 KiB per substream, frames of 124 bytes: ~82 fit.
    // (A rate cap that never bites here: this test is about the log.)
    let mut s = FrameStore::new(10 * 1024, 10_000_000_000, 1 << 40);
    for fs in 1..=1000u64 {
        assert!(s.store(0, fs, &frame(0, fs, 100), fs * 1000));
        let (lo, hi) = s.span(0).unwrap();
        assert_eq!(hi, fs);
        assert!(hi - lo < 83, "{lo}..{hi}");
        // Everything held is intact.
        let mut n = 0;
        s.serve(&req(0, lo, hi), fs * 1000, |b| {
            assert!(vyrn_wire::frame::same_frame(b, &frame(0, lo + n, 100)));
            n += 1;
        });
        assert_eq!(n, hi - lo + 1);
    }
    assert!(s.counters().evicted > 900);
    // Out of order, empty or larger than the log: refused.
    assert!(!s.store(0, 5, &frame(0, 5, 100), 0));
    assert!(!s.store(0, 1001, &[], 0));
    assert!(!s.store(0, 1001, &vec![0; 20 * 1024], 0));
    // Older than the keep time (10 s): gone.
    s.evict(20_000_000_000);
    assert_eq!(s.span(0), None);
}

#[test]
fn serving_is_rate_capped() {
    // 1000 frames a second, burst 4096: a request for 5000 frames sends the burst, caps the rest.
    let mut s = FrameStore::new(8 << 20, u64::MAX, 1000);
    for fs in 1..=6000u64 {
        s.store(0, fs, &frame(0, fs, 10), 0);
    }
    let out = s.serve(&req(0, 1, 5000), 0, |_| {});
    assert_eq!(out.sent, 4096);
    assert_eq!(out.capped, 904);
    // One second later: 1000 more tokens.
    let out = s.serve(&req(0, 1, 5000), 1_000_000_000, |_| {});
    assert_eq!(out.sent, 1000);
    assert_eq!(s.counters().capped, 904 + 4000);
}

/// Security review F7: a `RepairReq` with no tokens left reads nothing from the order journal
/// (it read ~16k frames to send none), and one with a few tokens reads only as many frames.
#[test]
fn a_repair_request_without_tokens_reads_nothing_from_the_journal() {
    let d = common::TestDir::new("fs-tokens");
    // Memory keeps 1 ms; frames come every 1 ms, so older ones are only in the journal. One
    // frame a second of tokens, burst 4096.
    let mut s = FrameStore::new(1 << 20, 1_000_000, 1);
    s.set_journal(
        OrderJournal::open(OrderJournalConfig {
            dir: d.0.join("order"),
            segment_bytes: 1 << 20,
            max_bytes: 1 << 30,
        })
        .unwrap(),
    );
    for fs in 1..=5_000u64 {
        s.store(0, fs, &frame(0, fs, 40), fs * 1_000_000);
    }
    s.flush();
    let now = 5_000_000_000;
    // The burst: 4096 frames served, from the journal.
    let out = s.serve(&req(0, 1, 4_096), now, |_| {});
    assert_eq!((out.sent, out.capped), (4_096, 0));
    let read = s.journal().unwrap().counters().read;
    assert_eq!(read, 4_096);
    // No tokens left: a request for 16k frames reads none and caps them all.
    let out = s.serve(&req(0, 1, 16_384), now, |_| panic!("sent"));
    assert_eq!(out.sent, 0);
    assert_eq!(out.capped + out.missing, 16_384);
    assert_eq!(s.journal().unwrap().counters().read, read, "nothing read");
    // Three seconds later, three tokens: three frames read.
    let out = s.serve(&req(0, 1, 100), now + 3_000_000_000, |_| {});
    assert_eq!((out.sent, out.capped), (3, 97));
    assert_eq!(s.journal().unwrap().counters().read, read + 3);
}
