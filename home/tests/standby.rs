//! The warm standby's non-voting replica in the home's file (07 §9.5): `[standby]
//! replica_addr`, `data_addr`, and each data box's `standby_port`.

mod common;

use common::{line_of, tmp};
use ed25519_dalek::SigningKey;
use vyrn_home::HomeConfig;

/// 07 §9.5: `[standby] replica_addr`, `data_addr` (its non-voting replica) and a data box's
/// `standby_port` are read; the replica is the membership's slot after the voters, with the
/// standby's `link_key`; data_addr without replica_addr, a replica_addr equal to ctrl_addr, and a
/// home with data boxes whose standby replica has no data_addr are refused at their lines.
#[test]
fn the_standby_replica_is_read_and_checked() {
    let d = tmp("standby_replica");
    let hp = vyrn_home::write_dev_home(&d.join("home"), 2, 2, 47_300).unwrap();
    let good = std::fs::read_to_string(&hp).unwrap();
    let h = HomeConfig::load(&hp).unwrap();
    let r = h
        .standby_replica
        .expect("a generated home names its standby's replica");
    assert_eq!(r.ctrl_addr, "127.0.0.1:47342".parse().unwrap());
    assert_eq!(r.data_addr, Some("127.0.0.1:47343".parse().unwrap()));
    assert_eq!(r.path_ips, [std::net::Ipv4Addr::LOCALHOST; 2]);
    // 07 §9.5: the membership's seq_order names it next after the primary, in F2, under its
    // link_key.
    assert_eq!(h.standby_seq(), Some((1, h.standby_key.unwrap())));
    assert_eq!(h.seq_boxes(), 2);
    let rec = h.membership.as_ref().unwrap();
    assert_eq!(rec.seq_order[1].facility, 2);
    assert_eq!(rec.seq_order[1].seq_key, h.standby_key.unwrap().to_bytes());
    let m = h.standby_member().unwrap();
    assert_eq!(m.index, h.voters_members.len());
    assert_eq!(Some(m.vote_key), h.standby_key);
    assert_eq!(m.ctrl_addr, r.ctrl_addr);
    assert_eq!(
        h.databoxes[0].standby_addr(m.index),
        "127.0.0.1:47344".parse().unwrap()
    );
    // Without `standby_port` the box's socket for it is the port above the last voter's.
    let no_port: String = good
        .lines()
        .filter(|l| !l.starts_with("standby_port"))
        .map(|l| format!("{l}\n"))
        .collect();
    let f = d.join("home/noport.toml");
    std::fs::write(&f, &no_port).unwrap();
    let h2 = HomeConfig::load(&f).unwrap();
    let db = &h2.databoxes[0];
    assert_eq!(db.standby_port, None);
    assert_eq!(db.standby_addr(4).port(), db.dest_base + 4);
    // A standby without its replica: the listener alone.
    let listener_only: String = good
        .lines()
        .filter(|l| {
            !l.starts_with("replica_addr") && !l.starts_with("data_addr = \"127.0.0.1:47343")
        })
        .map(|l| format!("{l}\n"))
        .collect();
    let f = d.join("home/listener.toml");
    std::fs::write(&f, &listener_only).unwrap();
    let h3 = HomeConfig::load(&f).unwrap();
    assert_eq!(h3.standby_replica, None);
    assert!(h3.standby_member().is_none());
    assert!(h3.standby_ctrl.is_some());
    let refused = |name: &str, text: &str, what: &str| {
        let f = d.join(format!("home/{name}.toml"));
        std::fs::write(&f, text).unwrap();
        let errs = HomeConfig::load(&f).unwrap_err();
        assert!(
            errs.iter().any(|e| e.what.contains(what)),
            "{name}: {errs:#?}"
        );
        errs
    };
    // data_addr alone.
    let data_only: String = good
        .lines()
        .filter(|l| !l.starts_with("replica_addr"))
        .map(|l| format!("{l}\n"))
        .collect();
    refused("data_only", &data_only, "replica_addr is needed");
    // The replica on the listener's port.
    let same = good.replace("127.0.0.1:47342", "127.0.0.1:47309");
    let errs = refused("same", &same, "is also its ctrl_addr");
    assert!(errs
        .iter()
        .any(|e| e.line == line_of(&same, "replica_addr")));
    // Data boxes, and a standby replica with nowhere to take DATA frames.
    let no_data: String = good
        .lines()
        .filter(|l| !l.starts_with("data_addr = \"127.0.0.1:47343"))
        .map(|l| format!("{l}\n"))
        .collect();
    refused("no_data", &no_data, "[standby] needs data_addr");
    // The replica on voter 0's control address: a voter could not tell it from its peer.
    let v0 = h.voters_members[0].ctrl_addr.to_string();
    let on_voter = good.replace("127.0.0.1:47342", &v0);
    refused("on_voter", &on_voter, "is also a voter's address");
    // The membership's standby is another key than [standby] link_key.
    let other = SigningKey::from_bytes(&[7; 32]).verifying_key();
    let hex: String = other
        .as_bytes()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let key_line = good
        .lines()
        .find(|l| l.starts_with("link_key") && l.contains("standby.key"))
        .unwrap();
    let swapped = good.replace(key_line, &format!("link_key = \"{hex}\""));
    refused(
        "other_key",
        &swapped,
        "the standby's seq_key is not [standby] link_key",
    );
    let _ = std::fs::remove_dir_all(&d);
}
