//! `vyrn standby` (07 §6.8): the warm standby's finality listener. Voters send their finalize
//! votes to its control port as to the box's; it makes a height final only with Q valid votes
//! from the membership's voters, drops what comes from any other address unread, counts a bad
//! signature and anything that is not a vote — and says so in its summary.

use std::net::{SocketAddr, UdpSocket};
use std::process::{Command, Stdio};
use std::time::Duration;

use vyrn_consensus::cert::sign_finalize;
use vyrn_consensus::Voters;
use vyrn_home::{read_seed, write_dev_home, HomeConfig};
use vyrn_wire::msg::consensus::{ProposalKind, RepProposal};
use vyrn_wire::msg::ctrl::FinalizeVote;
use vyrn_wire::msg::seal::{from, seal_into, LinkKey};

#[test]
fn the_standby_finalizes_only_with_q_valid_votes_from_the_voters() {
    let dir = std::env::temp_dir().join(format!("vyrn-standby-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let file = write_dev_home(&dir, 2, 2, 29_100).unwrap();
    let home = HomeConfig::load(&file).unwrap();
    let at = home.standby_ctrl.expect("a dev home has a standby");
    let child = Command::new(env!("CARGO_BIN_EXE_vyrn"))
        .args(["standby", "--secs", "3", "--home"])
        .arg(&file)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let keys: Vec<[u8; 32]> = home
        .voters_members
        .iter()
        .map(|v| v.vote_key.to_bytes())
        .collect();
    let set = Voters::with_simplex_quorum(home.epoch, &keys).unwrap();
    let p = RepProposal {
        kind: ProposalKind::Headers,
        epoch: home.epoch,
        first_height: 1,
        last_height: 5,
        last_hash: [9; 32],
        excl_root: [0; 32],
    };
    let vote = |i: usize| -> Vec<u8> {
        let seed = read_seed(&dir.join(format!("keys/voter-{i}.key"))).unwrap();
        let sig = sign_finalize(&set, seed.expose(), home.epoch, 2, 1, &p).unwrap();
        let v = FinalizeVote {
            epoch: home.epoch,
            view: 2,
            parent_view: 1,
            proposal: p,
            index: i as u8,
            sig,
        };
        let mut b = Vec::new();
        v.encode(&mut b).unwrap();
        b
    };
    // Every voter's message goes sealed under its link key with the standby.
    let standby_key = home
        .standby_key
        .expect("a dev home names the standby's link_key");
    let mut seq_no = 1u64;
    let mut sealed = |i: usize, b: &[u8]| -> Vec<u8> {
        let seed = read_seed(&dir.join(format!("keys/voter-{i}.key"))).unwrap();
        let me = ed25519_dalek::SigningKey::from_bytes(seed.expose());
        let link = LinkKey::agree(&me, &standby_key).unwrap();
        seq_no += 1;
        let mut out = Vec::new();
        seal_into(&mut out, &link, home.epoch, from::voter(i), seq_no, |o| {
            o.extend_from_slice(b);
            true
        });
        out
    };
    let from = |i: usize| UdpSocket::bind(home.voters_members[i].ctrl_addr).unwrap();
    let send = |s: &UdpSocket, b: &[u8], to: SocketAddr| {
        s.send_to(b, to).unwrap();
        std::thread::sleep(Duration::from_millis(20));
    };
    // Voter 1's valid vote from an address that is no voter's: dropped unread.
    let stranger = UdpSocket::bind("127.0.0.1:0").unwrap();
    send(&stranger, &sealed(1, &vote(1)), at);
    // Voter 0's vote with a broken signature, and a datagram that is no vote.
    let v0 = from(0);
    let mut bad = vote(0);
    let n = bad.len();
    bad[n - 1] ^= 1;
    let bad = sealed(0, &bad);
    send(&v0, &bad, at);
    send(&v0, &sealed(0, b"not a control message"), at);
    // Voter 1's valid vote bare (what a spoofer of its address could send), then voter 2's
    // sealed as voter 1 (another sender's id), and a replay of the sealed bad vote.
    send(&v0, &vote(1), at);
    send(&v0, &bad, at);
    // Two valid votes: with the bad one, three distinct signers but two valid — not final.
    let (v1, v2, v3) = (from(1), from(2), from(3));
    send(&v1, &sealed(1, &vote(1)), at);
    send(&v2, &sealed(1, &vote(2)), at);
    send(&v2, &sealed(2, &vote(2)), at);
    // The third valid vote: Q = 3 valid, heights 1..=5 final.
    send(&v3, &sealed(3, &vote(3)), at);
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    let summary = text
        .lines()
        .find(|l| l.starts_with("standby: final height"))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(summary.contains("final height 5 (view 2)"), "{summary}");
    assert!(summary.contains("1 proposals finalized"), "{summary}");
    assert!(summary.contains("1 bad signatures"), "{summary}");
    assert!(summary.contains("1 from unknown sources"), "{summary}");
    assert!(summary.contains("1 other messages"), "{summary}");
    assert!(
        summary.contains("1 unsealed, 2 with a bad seal"),
        "{summary}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A home without a `[standby]` section: the standby refuses to start and says why.
#[test]
fn a_home_without_a_standby_is_refused() {
    let dir = std::env::temp_dir().join(format!("vyrn-standby-none-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let file = write_dev_home(&dir, 2, 2, 29_150).unwrap();
    let text = std::fs::read_to_string(&file).unwrap();
    let cut = text.split("\n[standby]").collect::<Vec<_>>();
    let rest = cut[1].split_once("\n\n").map_or("", |x| x.1);
    // Its membership record names the standby (07 §9.5): a file without `[standby]` has none.
    let head: String = cut[0]
        .lines()
        .filter(|l| !l.starts_with("membership ="))
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(&file, format!("{head}\n{rest}")).unwrap();
    assert!(HomeConfig::load(&file).unwrap().standby_ctrl.is_none());
    let out = Command::new(env!("CARGO_BIN_EXE_vyrn"))
        .args(["standby", "--secs", "1", "--home"])
        .arg(&file)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("no [standby] section"),
        "{out:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
