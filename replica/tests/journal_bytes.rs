//! The journal's bytes as docs/wire-messages.md §3a documents them, read by an auditor's own
//! reader written from that text alone: a block written by `BlockJournal` and a
//! certificate written by `CertJournal` are read back from the raw files — segment name, slot
//! head, `REP_BlockRecord` with its `len_A` order section, cert entry — every hash recomputed
//! from its domain string, the block's `order_root` recomputed from its own order bytes, and the
//! bytes compared with the golden vectors the document prints.

use vyrn_replica::disk::journal::cert::{CertJournal, CertKind};
use vyrn_replica::disk::journal::{BlockJournal, JournalConfig};
use vyrn_wire::header::BlockHeader;
use vyrn_wire::msg::journal::RepBlockRecord;

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn b3(domain: &[u8], parts: &[&[u8]]) -> [u8; 32] {
    let mut h = blake3::Hasher::new();
    h.update(domain);
    for p in parts {
        h.update(p);
    }
    *h.finalize().as_bytes()
}

fn u32_at(b: &[u8], o: usize) -> u32 {
    u32::from_le_bytes(b[o..o + 4].try_into().unwrap())
}

fn u64_at(b: &[u8], o: usize) -> u64 {
    u64::from_le_bytes(b[o..o + 8].try_into().unwrap())
}

/// The golden block: height 7 of epoch 1, substream A `a1 a2 a3`, substream B `b1`, one
/// 48-byte packet (count 1) and its 8-byte hash, no unavailable packet.
fn golden_record() -> RepBlockRecord {
    let (a, b) = ([0xa1u8, 0xa2, 0xa3], [0xb1u8]);
    let order_root = *blake3::Hasher::new()
        .update(blake3::hash(&a).as_bytes())
        .update(blake3::hash(&b).as_bytes())
        .finalize()
        .as_bytes();
    let mut order = 3u32.to_le_bytes().to_vec();
    order.extend_from_slice(&a);
    order.extend_from_slice(&b);
    let mut pkt = vec![0u8; 48];
    pkt[2] = 1;
    pkt[0] = 0x5a;
    RepBlockRecord {
        tenure: 0,
        header: BlockHeader {
            height: 7,
            epoch: 1,
            book: 2,
            first_step: 100,
            last_step: 104,
            prev: [0x11; 32],
            order_root,
            data_root: [0x22; 32],
            seq_sig: [0x33; 64],
        },
        order,
        pkt_hashes: vec![0x0102_0304_0506_0708],
        data: pkt,
        unavail: Vec::new(),
    }
}

/// The record's bytes 0..54 and the slot head's 0..32, as docs/wire-messages.md §3a prints them.
const GOLDEN_RECORD_HEAD: &str = "5042424c4b30303107000000000000000100000000000000070000000000000001000000020064000000000000006800000000000000";
const GOLDEN_SLOT_HEAD_0_32: &str =
    "5659524e534c5431010000000000000007000000000000000010000000000000";

#[test]
fn an_auditors_reader_reads_the_block_and_cert_journals_from_the_documented_bytes() {
    let dir = std::env::temp_dir().join(format!("vyrn-journal-bytes-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let drive = dir.join("d0");
    let rec = golden_record();
    {
        let mut cfg = JournalConfig::new(vec![drive.clone()]);
        cfg.segment_bytes = 1 << 20;
        let (mut j, _) = BlockJournal::open(cfg).expect("journal");
        j.append_record(&rec).expect("append");
        j.sync().expect("sync");
        let mut c = CertJournal::open(std::slice::from_ref(&drive)).expect("cert journal");
        c.append(CertKind::Root, b"root certificate bytes")
            .expect("cert append");
        c.sync().expect("cert sync");
    }

    // Segment files: seg-{n:016x}.blk in each drive directory.
    let seg = std::fs::read(drive.join("seg-0000000000000000.blk")).expect("segment 0");
    // The slot head: one page.
    let head = &seg[..4096];
    assert_eq!(&head[..8], b"VYRNSLT1");
    assert_eq!(head[8], 1, "state live");
    assert_eq!(u64_at(head, 16), 7, "height");
    let rec_len = u64_at(head, 24) as usize;
    assert_eq!(rec_len, 4096, "one padded page");
    assert_eq!(
        head[64..96],
        b3(b"vyrn v1 journal slot", &[&head[..64]]),
        "head_hash"
    );
    assert!(head[96..].iter().all(|&x| x == 0));
    assert_eq!(hex(&head[..32]), GOLDEN_SLOT_HEAD_0_32);
    // The record follows its head.
    let r = &seg[4096..4096 + rec_len];
    assert_eq!(
        head[32..64],
        b3(b"vyrn v1 journal record", &[r]),
        "rec_hash"
    );
    assert_eq!(&r[..8], b"PBBLK001");
    assert_eq!(hex(&r[..54]), GOLDEN_RECORD_HEAD);
    assert_eq!(u64_at(r, 8), 7);
    assert_eq!(u32_at(r, 16), 1, "epoch");
    assert_eq!((r[20], r[21]), (0, 0), "tenure, kind normal");
    let hdr = &r[24..214];
    assert_eq!(u64_at(hdr, 0), 7, "header height");
    let (order_len, hash_len, data_len, n_unavail) = (
        u32_at(r, 214) as usize,
        u32_at(r, 218) as usize,
        u32_at(r, 222) as usize,
        u32_at(r, 226),
    );
    assert_eq!((order_len, hash_len, data_len, n_unavail), (8, 8, 48, 0));
    assert_eq!(hex(&r[214..230]), "08000000080000003000000000000000");
    assert_eq!(hex(&r[256..264]), "03000000a1a2a3b1");
    assert!(r[230..256].iter().all(|&x| x == 0), "reserved");
    // The order section: len_A u32 LE, substream A, substream B; order_root recomputed from it
    // alone equals the header's (bytes 62..94 of the header).
    let order = &r[256..256 + order_len];
    let la = u32_at(order, 0) as usize;
    let (a, b) = (&order[4..4 + la], &order[4 + la..]);
    assert_eq!((a, b), (&[0xa1, 0xa2, 0xa3][..], &[0xb1][..]));
    let root = *blake3::Hasher::new()
        .update(blake3::hash(a).as_bytes())
        .update(blake3::hash(b).as_bytes())
        .finalize()
        .as_bytes();
    assert_eq!(
        &hdr[62..94],
        &root,
        "order_root from the record's own bytes"
    );
    let hashes = &r[256 + order_len..256 + order_len + hash_len];
    assert_eq!(u64_at(hashes, 0), 0x0102_0304_0506_0708);
    let data = &r[256 + order_len + hash_len..256 + order_len + hash_len + data_len];
    assert_eq!((data[0], data[2], data.len()), (0x5a, 1, 32 + 16));
    let end = 256 + order_len + hash_len + data_len + 8 * n_unavail as usize;
    assert!(r[end..].iter().all(|&x| x == 0), "padding");

    // The cert journal: certs.vcj in drives 0 and 1 (one drive here), entries of
    // len u32 ‖ kind u8 ‖ reserved [3] ‖ hash [32] ‖ payload.
    let cj = std::fs::read(drive.join("certs.vcj")).expect("cert journal file");
    let len = u32_at(&cj, 0) as usize;
    assert_eq!((len, cj[4], &cj[5..8]), (22, 2, &[0u8, 0, 0][..]));
    let payload = &cj[40..40 + len];
    assert_eq!(payload, b"root certificate bytes");
    assert_eq!(
        cj[8..40],
        b3(b"vyrn v1 cert entry", &[&cj[0..4], &cj[4..8], payload]),
        "entry hash"
    );
    assert_eq!(cj.len(), 40 + len, "nothing after the entry");
    let _ = std::fs::remove_dir_all(&dir);
}
