//! The cert journal mirrored on drives 0 and 1 (07 §8.2).

mod common;

use common::TestDir;
use vyrn_replica::disk::journal::cert::{CertJournal, CertKind, CERT_FILE, CERT_HEAD_BYTES};

fn payload(i: usize) -> Vec<u8> {
    (0..(100 + 37 * i)).map(|k| (k ^ i) as u8).collect()
}

fn kind(i: usize) -> CertKind {
    [CertKind::Finality, CertKind::Root, CertKind::SealExt][i % 3]
}

fn open(dirs: &[std::path::PathBuf]) -> CertJournal {
    match CertJournal::open(dirs) {
        Ok(c) => c,
        Err(e) => panic!("open: {e}"),
    }
}

fn fill(dirs: &[std::path::PathBuf], n: usize) {
    let mut c = open(dirs);
    for i in 0..n {
        assert_eq!(c.append(kind(i), &payload(i)).unwrap(), i);
    }
    c.sync().unwrap();
}

/// Of a 10-entry journal: copy 0 torn inside entry 9, copy 1 torn inside entry 8's head.
/// Returns the whole length and entry 9's length.
fn tear_both(dirs: &[std::path::PathBuf]) -> (u64, u64) {
    let l0 = std::fs::metadata(dirs[0].join(CERT_FILE)).unwrap().len();
    let last = (CERT_HEAD_BYTES + payload(9).len()) as u64;
    for (d, len) in [(&dirs[0], l0 - last / 2), (&dirs[1], l0 - last - 10)] {
        std::fs::OpenOptions::new()
            .write(true)
            .open(d.join(CERT_FILE))
            .unwrap()
            .set_len(len)
            .unwrap();
    }
    (l0, last)
}

fn check_all(c: &mut CertJournal, n: usize) {
    assert_eq!(c.len(), n);
    for i in 0..n {
        let (k, p) = c.get(i).unwrap();
        assert_eq!((k, p), (kind(i), payload(i)), "entry {i}");
    }
}

#[test]
fn round_trip_and_both_copies_identical() {
    let t = TestDir::new("cert-rt");
    let dirs = t.drives(3);
    fill(&dirs, 20);
    let mut c = open(&dirs);
    check_all(&mut c, 20);
    assert_eq!(c.live_copies(), 2);
    assert_eq!(c.counters().copies_repaired, 0);
    let a = std::fs::read(dirs[0].join(CERT_FILE)).unwrap();
    let b = std::fs::read(dirs[1].join(CERT_FILE)).unwrap();
    assert_eq!(a, b);
    assert!(!dirs[2].join(CERT_FILE).exists(), "only drives 0 and 1");
}

#[test]
fn mirror_survives_the_loss_of_either_copy() {
    for lost in 0..2 {
        let t = TestDir::new("cert-loss");
        let dirs = t.drives(2);
        fill(&dirs, 20);
        let other = std::fs::read(dirs[1 - lost].join(CERT_FILE)).unwrap();
        std::fs::remove_file(dirs[lost].join(CERT_FILE)).unwrap();
        let mut c = open(&dirs);
        check_all(&mut c, 20);
        assert_eq!(c.counters().copies_repaired, 1);
        assert_eq!(c.counters().entries_restored, 20);
        assert_eq!(std::fs::read(dirs[lost].join(CERT_FILE)).unwrap(), other);
        // Appends continue on both copies.
        c.append(CertKind::Root, b"after").unwrap();
        c.sync().unwrap();
        drop(c);
        let mut c = open(&dirs);
        assert_eq!(c.len(), 21);
        assert_eq!(c.get(20).unwrap().1, b"after");
    }
}

#[test]
fn a_corrupt_middle_entry_in_one_copy_is_repaired_from_the_other() {
    let t = TestDir::new("cert-corrupt");
    let dirs = t.drives(2);
    fill(&dirs, 20);
    let p0 = dirs[0].join(CERT_FILE);
    let mut b = std::fs::read(&p0).unwrap();
    let good = b.clone();
    let off5: usize = (0..5).map(|i| CERT_HEAD_BYTES + payload(i).len()).sum();
    b[off5 + CERT_HEAD_BYTES + 3] ^= 1;
    std::fs::write(&p0, &b).unwrap();
    let mut c = open(&dirs);
    check_all(&mut c, 20);
    assert_eq!(c.counters().copies_repaired, 1);
    assert_eq!(c.counters().entries_restored, 15);
    assert_eq!(std::fs::read(&p0).unwrap(), good);
}

#[test]
fn torn_tails_are_cut_and_the_longer_copy_wins() {
    let t = TestDir::new("cert-torn");
    let dirs = t.drives(2);
    fill(&dirs, 10);
    let (l0, last) = tear_both(&dirs);
    let mut c = open(&dirs);
    check_all(&mut c, 9);
    assert_eq!(c.counters().torn_tails, 1);
    assert_eq!(c.counters().copies_repaired, 1);
    let a = std::fs::read(dirs[0].join(CERT_FILE)).unwrap();
    assert_eq!(a, std::fs::read(dirs[1].join(CERT_FILE)).unwrap());
    assert_eq!(a.len() as u64, l0 - last);
    c.append(kind(9), &payload(9)).unwrap();
    c.sync().unwrap();
    drop(c);
    let mut c = open(&dirs);
    check_all(&mut c, 10);
}

#[test]
fn a_read_falls_back_to_the_mirror_when_the_first_copy_rots() {
    let t = TestDir::new("cert-rot");
    let dirs = t.drives(2);
    fill(&dirs, 4);
    let mut c = open(&dirs);
    let p0 = dirs[0].join(CERT_FILE);
    let mut b = std::fs::read(&p0).unwrap();
    b[CERT_HEAD_BYTES + 1] ^= 0xFF;
    std::fs::write(&p0, &b).unwrap();
    check_all(&mut c, 4);
    assert_eq!(c.counters().mirror_reads, 1);
}

#[test]
fn one_drive_means_one_copy_and_oversized_entries_are_refused() {
    let t = TestDir::new("cert-one");
    let dirs = t.drives(1);
    let mut c = open(&dirs);
    assert_eq!(c.live_copies(), 1);
    assert!(c
        .append(CertKind::Finality, &vec![0u8; (1 << 20) + 1])
        .is_err());
    assert_eq!(c.counters().refused, 1);
    c.append(CertKind::Finality, b"x").unwrap();
    c.sync().unwrap();
    drop(c);
    assert_eq!(open(&dirs).len(), 1);
}

/// `open_read_only` (what `vyrn journal inspect` and `vyrn verify-cert` use, on a journal a
/// replica may be writing): the longer valid prefix is served, but a torn tail stays, the
/// shorter copy is not repaired, a missing copy is not created, and appends are refused.
#[test]
fn a_read_only_open_serves_the_longer_prefix_and_writes_nothing() {
    let t = TestDir::new("cert-ro");
    let dirs = t.drives(2);
    fill(&dirs, 10);
    tear_both(&dirs);
    let before = (
        std::fs::read(dirs[0].join(CERT_FILE)).unwrap(),
        std::fs::read(dirs[1].join(CERT_FILE)).unwrap(),
    );
    let mut c = match CertJournal::open_read_only(&dirs) {
        Ok(c) => c,
        Err(e) => panic!("open_read_only: {e}"),
    };
    check_all(&mut c, 9);
    assert!(c.append(kind(9), &payload(9)).is_err());
    assert!(c.sync().is_ok());
    drop(c);
    assert_eq!(
        std::fs::read(dirs[0].join(CERT_FILE)).unwrap(),
        before.0,
        "tail left"
    );
    assert_eq!(
        std::fs::read(dirs[1].join(CERT_FILE)).unwrap(),
        before.1,
        "not repaired"
    );
    // A directory with no cert journal: an error, and nothing created.
    let absent = t.0.join("absent");
    assert!(CertJournal::open_read_only(std::slice::from_ref(&absent)).is_err());
    assert!(!absent.exists());
}

/// 07 §8.2 + §6.3: a replica whose engine partition is gone starts its engine from the newest
/// certificate in its cert journal that verifies — root certificates, other epochs, unparsable
/// entries and certificates with a broken signature are passed over, never trusted.
#[test]
fn the_engines_floor_is_the_newest_verified_finality_certificate() {
    use vyrn_consensus::cert::FinalizeSigner;
    use vyrn_consensus::Voters;
    use vyrn_replica::vote::newest_floor;
    use vyrn_wire::msg::consensus::{CertEntry, ProposalKind, RepFinalityCert, RepProposal};
    const EPOCH: u32 = 3;
    let seeds: Vec<[u8; 32]> = (0..4u8).map(|i| [i + 40; 32]).collect();
    let keys: Vec<[u8; 32]> = seeds
        .iter()
        .map(|s| {
            ed25519_dalek::SigningKey::from_bytes(s)
                .verifying_key()
                .to_bytes()
        })
        .collect();
    let voters = Voters::with_simplex_quorum(EPOCH, &keys).expect("a voter set");
    let cert = |view: u64, last: u64, epoch: u32| {
        let p = RepProposal {
            kind: ProposalKind::Headers,
            epoch,
            first_height: last - 2,
            last_height: last,
            last_hash: [last as u8; 32],
            excl_root: [0; 32],
        };
        let entries = [0u8, 2, 3]
            .iter()
            .map(|&i| CertEntry {
                index: i,
                sig: FinalizeSigner::new(&voters, &seeds[i as usize])
                    .expect("a voter")
                    .sign(epoch, view, view - 1, &p),
            })
            .collect();
        let c = RepFinalityCert {
            epoch,
            view,
            parent_view: view - 1,
            proposal: p,
            entries,
        };
        let mut b = vec![vyrn_wire::msg::ctrl::ty::FINALITY_CERT];
        c.encode(&mut b).expect("encodes");
        b
    };
    let t = TestDir::new("cert-floor");
    let dirs = t.drives(2);
    assert!(
        newest_floor(&dirs, &voters).is_none(),
        "an empty journal has no floor"
    );
    {
        let mut c = open(&dirs);
        c.append(CertKind::Finality, &cert(5, 9, EPOCH)).unwrap();
        c.append(CertKind::Finality, &cert(8, 15, EPOCH)).unwrap();
        // Newer, but each refused: another epoch, a broken signature, not a certificate.
        c.append(CertKind::Finality, &cert(20, 40, EPOCH + 1))
            .unwrap();
        let mut bad = cert(21, 42, EPOCH);
        let n = bad.len();
        bad[n - 3] ^= 1;
        c.append(CertKind::Finality, &bad).unwrap();
        c.append(CertKind::Finality, &[0x13, 1, 2, 3]).unwrap();
        c.append(CertKind::Root, &payload(1)).unwrap();
        c.append(CertKind::Finality, &cert(7, 12, EPOCH)).unwrap();
        c.sync().unwrap();
    }
    let (f, p) = newest_floor(&dirs, &voters).expect("a floor");
    assert_eq!(f.proposal.round.view().get(), 8);
    assert_eq!((p.first_height, p.last_height), (13, 15));
    assert_eq!(f.proposal.payload, vyrn_consensus::payload_digest(&p));
}
