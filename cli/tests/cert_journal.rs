//! The cert journal's finality certificates checked against the home's REP_Membership
//! (07 §6.5, §8.2, §13.1): `verify_cert_journal` and `vyrn verify-cert --home --journal` pass a
//! journal of valid certificates and name each tampered or foreign one; `vyrn journal inspect
//! --certs-out` exports them and `vyrn verify-cert --membership --cert` checks one file as an
//! outsider would, with nothing but the membership record.

use std::process::Command;

use vyrn_consensus::cert::FinalizeSigner;
use vyrn_consensus::Voters;
use vyrn_home::{read_seed, write_dev_home, HomeConfig};
use vyrn_replica::disk::journal::cert::{CertJournal, CertKind};
use vyrn_replica::vote::verify_cert_journal;
use vyrn_wire::msg::consensus::{CertEntry, ProposalKind, RepFinalityCert, RepProposal};

fn cert(signers: &[(u8, FinalizeSigner)], epoch: u32, h: u64) -> Vec<u8> {
    let proposal = RepProposal {
        kind: ProposalKind::Headers,
        epoch,
        first_height: h,
        last_height: h,
        last_hash: [h as u8; 32],
        excl_root: [0; 32],
    };
    let c = RepFinalityCert {
        epoch,
        view: h + 1,
        parent_view: h,
        proposal,
        entries: signers
            .iter()
            .map(|(i, s)| CertEntry {
                index: *i,
                sig: s.sign(epoch, h + 1, h, &proposal),
            })
            .collect(),
    };
    let mut b = vec![vyrn_wire::msg::ctrl::ty::FINALITY_CERT];
    c.encode(&mut b).unwrap();
    b
}

#[test]
fn certificates_in_the_journal_verify_against_the_membership_and_bad_ones_are_named() {
    let dir = std::env::temp_dir().join(format!("vyrn-certj-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let conf = write_dev_home(&dir, 2, 2, 28_600).unwrap();
    let home = HomeConfig::load(&conf).unwrap();
    let m = home.membership.clone().expect("membership");
    let voters = Voters::from_membership(&m, home.epoch).unwrap();
    let signers: Vec<(u8, FinalizeSigner)> = [0u8, 2, 3]
        .iter()
        .map(|&i| {
            let s = read_seed(&dir.join(format!("keys/voter-{i}.key"))).unwrap();
            (i, FinalizeSigner::new(&voters, s.expose()).unwrap())
        })
        .collect();
    let drives = vec![dir.join("d0"), dir.join("d1")];
    {
        let mut j = CertJournal::open(&drives).unwrap();
        for h in 1..=5 {
            j.append(CertKind::Finality, &cert(&signers, home.epoch, h))
                .unwrap();
        }
        j.sync().unwrap();
    }
    let a = verify_cert_journal(&drives, &m, 200).unwrap();
    assert_eq!((a.ok, a.final_height, a.bad.len()), (5, 5, 0), "{a:?}");
    let bin = env!("CARGO_BIN_EXE_vyrn");
    let journal_arg = format!("{},{}", drives[0].display(), drives[1].display());
    let run = || {
        Command::new(bin)
            .arg("verify-cert")
            .arg("--home")
            .arg(&conf)
            .args(["--journal", &journal_arg])
            .output()
            .unwrap()
    };
    let out = run();
    assert!(out.status.success(), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("5 finality certificate(s) verify"));

    // A tampered signature, and a certificate of keys outside the membership.
    let mut bad = cert(&signers, home.epoch, 6);
    let n = bad.len();
    bad[n - 3] ^= 1;
    let foreign_set = Voters::new(
        home.epoch,
        &(0..4u8)
            .map(|i| {
                ed25519_dalek::SigningKey::from_bytes(&[i + 90; 32])
                    .verifying_key()
                    .to_bytes()
            })
            .collect::<Vec<_>>(),
        3,
    )
    .unwrap();
    let foreign: Vec<(u8, FinalizeSigner)> = (0..3u8)
        .map(|i| (i, FinalizeSigner::new(&foreign_set, &[i + 90; 32]).unwrap()))
        .collect();
    {
        let mut j = CertJournal::open(&drives).unwrap();
        j.append(CertKind::Finality, &bad).unwrap();
        j.append(CertKind::Finality, &cert(&foreign, home.epoch, 7))
            .unwrap();
        j.sync().unwrap();
    }
    let a = verify_cert_journal(&drives, &m, 200).unwrap();
    assert_eq!(a.ok, 5);
    assert_eq!(
        a.bad.iter().map(|b| b.0).collect::<Vec<_>>(),
        vec![5, 6],
        "{a:?}"
    );
    let out = run();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("entry 6:"));

    // `vyrn journal inspect` (no block journal here: empty drives) exports the certificates and
    // exits 1 for the two bad ones; each exported file is then checked on its own.
    let certs = dir.join("certs");
    let out = Command::new(bin)
        .args([
            "journal",
            "inspect",
            "--quiet",
            "--journal",
            &journal_arg,
            "--home",
        ])
        .arg(&conf)
        .arg("--certs-out")
        .arg(&certs)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("wrote 7 finality certificate(s)"),
        "{stdout}"
    );
    assert!(stdout.contains("cert entry 5: BAD"), "{stdout}");
    let verify = |view: u64| {
        Command::new(bin)
            .arg("verify-cert")
            .arg("--membership")
            .arg(dir.join("membership.bin"))
            .arg("--cert")
            .arg(certs.join(format!("cert-{view}.bin")))
            .output()
            .unwrap()
    };
    for view in 2..=6 {
        let out = verify(view);
        assert!(out.status.success(), "view {view}: {out:?}");
        assert!(String::from_utf8_lossy(&out.stdout).contains("3 of 4 voters signed"));
    }
    for view in [7, 8] {
        let out = verify(view);
        assert_eq!(out.status.code(), Some(1), "view {view}: {out:?}");
        assert!(String::from_utf8_lossy(&out.stdout).contains("BAD"));
    }
    // A membership file that is not one: refused before any certificate is looked at.
    let out = Command::new(bin)
        .arg("verify-cert")
        .arg("--membership")
        .arg(certs.join("cert-2.bin"))
        .arg("--cert")
        .arg(certs.join("cert-2.bin"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A `REP_RootCert` of the home's voters (07 §7.4) at root height `h` over `root`.
fn root_cert(
    dir: &std::path::Path,
    voters: &Voters,
    epoch: u32,
    h: u64,
    root: [u8; 32],
) -> Vec<u8> {
    use vyrn_consensus::roots::{root_digest, root_index, root_signer, sign_root};
    let index = root_index(h, RB).unwrap_or(0);
    let entries = [0u8, 1, 3]
        .iter()
        .map(|&i| {
            let s = read_seed(&dir.join(format!("keys/voter-{i}.key"))).unwrap();
            let rs = root_signer(voters, vyrn_consensus::private_key(s.expose())).unwrap();
            CertEntry {
                index: i,
                sig: sign_root(&rs, epoch, index, root_digest(epoch, h, &root)).unwrap(),
            }
        })
        .collect();
    let c = vyrn_wire::msg::consensus::RepRootCert {
        epoch,
        view: 0,
        parent_view: 0,
        h,
        root,
        entries,
    };
    let mut b = Vec::new();
    c.encode(&mut b).unwrap();
    b
}

/// The dev home's REP_ROOT_BLOCKS: a root a second of its 20 ms blocks.
const RB: u64 = 50;

/// State-root certificates in the cert journal (07 §7.4, §8.2) verify against the membership
/// at the profile's REP_ROOT_BLOCKS (a dev home: 50), and `vyrn verify-cert` names a tampered
/// one and one at a height that is no root height.
#[test]
fn root_certificates_in_the_journal_verify_and_bad_ones_are_named() {
    let dir = std::env::temp_dir().join(format!("vyrn-certj-roots-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let conf = write_dev_home(&dir, 2, 2, 28_640).unwrap();
    let home = HomeConfig::load(&conf).unwrap();
    assert_eq!(
        vyrn_replica::vote::RootSettings::dev(home.block_ns).root_blocks,
        RB
    );
    let m = home.membership.clone().expect("membership");
    let voters = Voters::from_membership(&m, home.epoch).unwrap();
    let drives = vec![dir.join("d0"), dir.join("d1")];
    {
        let mut j = CertJournal::open(&drives).unwrap();
        for h in [49, 99] {
            j.append(
                CertKind::Root,
                &root_cert(&dir, &voters, home.epoch, h, [h as u8; 32]),
            )
            .unwrap();
        }
        j.sync().unwrap();
    }
    let a = verify_cert_journal(&drives, &m, RB).unwrap();
    assert_eq!(
        (a.roots_ok, a.root_height, a.bad.len()),
        (2, 99, 0),
        "{a:?}"
    );
    // At 07's REP_ROOT_BLOCKS = 1000, 49 and 99 are no root heights: both refused.
    let a = verify_cert_journal(&drives, &m, 1000).unwrap();
    assert_eq!((a.roots_ok, a.bad.len()), (0, 2), "{a:?}");
    let bin = env!("CARGO_BIN_EXE_vyrn");
    let journal_arg = format!("{},{}", drives[0].display(), drives[1].display());
    let run = || {
        Command::new(bin)
            .arg("verify-cert")
            .arg("--home")
            .arg(&conf)
            .args(["--journal", &journal_arg])
            .output()
            .unwrap()
    };
    let out = run();
    assert!(out.status.success(), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("2 state-root certificate(s) verify"),
        "{out:?}"
    );
    // A tampered root (the signatures no longer cover it).
    let mut bad = root_cert(&dir, &voters, home.epoch, 149, [9; 32]);
    bad[28] ^= 1;
    {
        let mut j = CertJournal::open(&drives).unwrap();
        j.append(CertKind::Root, &bad).unwrap();
        j.sync().unwrap();
    }
    let a = verify_cert_journal(&drives, &m, RB).unwrap();
    assert_eq!(a.roots_ok, 2);
    assert_eq!(
        a.bad.iter().map(|b| b.0).collect::<Vec<_>>(),
        vec![2],
        "{a:?}"
    );
    let out = run();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("entry 2:"));
    let _ = std::fs::remove_dir_all(&dir);
}
