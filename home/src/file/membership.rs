//! The membership record (07 §13.1): the dev home's, and the check of a home's record against
//! its file.

use super::*;

/// A dev home's `REP_Membership` (07 §13.1): four voters on loopback, the box as primary, one
/// data box, epoch 1, certified by all four voters. Voters 1 and 3 are labelled `Vx`: 07
/// forbids one client implementation holding Q votes (CLIENT_SPLIT), so the record says so even
/// where, on a dev box, every replica runs this build.
pub(super) fn dev_membership(
    voters: &[SigningKey],
    seq: &SigningKey,
    standby: Option<&SigningKey>,
    base_port: u16,
    n_data: u8,
    addrs: &HomeAddrs,
) -> RepMembership {
    use vyrn_wire::msg::addr_from_socket;
    use vyrn_wire::msg::ctrl::{Client, DataBox, Mode as MMode, Role, SeqBox, Voter};
    let at = |ip: Ipv4Addr, port: u16| addr_from_socket(SocketAddr::from((ip, port)));
    let mut m = RepMembership {
        epoch_from: 1,
        home: *b"DEV\0",
        mode: MMode::Base,
        q: 3,
        voters: voters
            .iter()
            .enumerate()
            .map(|(i, k)| Voter {
                index: i as u8,
                vote_key: k.verifying_key().to_bytes(),
                client: if i % 2 == 0 { Client::Rust } else { Client::Vx },
                facility: 1,
                data_addr: at(addrs.voters[i].0, base_port + DEV_VOTER_DATA + i as u16),
                repl_addr: at(addrs.voters[i].1[0], base_port + DEV_PATHS),
            })
            .collect(),
        seq_order: vec![SeqBox {
            index: 0,
            role: Role::Primary,
            seq_key: seq.verifying_key().to_bytes(),
            facility: 1,
            client_addr: at(addrs.box_ip, base_port),
            repl_addr: at(addrs.box_path_ips[0], base_port + DEV_PATHS),
        }]
        .into_iter()
        // 07 §9.5: the warm standby next, in F2; its client port is where it takes over.
        .chain(standby.map(|k| SeqBox {
            index: 1,
            role: Role::Standby,
            seq_key: k.verifying_key().to_bytes(),
            facility: vyrn_wire::msg::ctrl::STANDBY_FACILITY,
            client_addr: at(addrs.box_ip, base_port + DEV_STANDBY_CLIENT),
            repl_addr: at(addrs.box_path_ips[0], base_port + DEV_PATHS),
        }))
        .collect(),
        recovery: 0,
        data_boxes: (0..n_data)
            .map(|d| DataBox {
                index: d,
                facility: 1,
                addr: at(addrs.databoxes[d as usize], dev_databox_port(base_port, d)),
            })
            .collect(),
        cert: Vec::new(),
    };
    m.cert = voters
        .iter()
        .enumerate()
        .map(|(i, k)| m.sign_entry(i as u8, k))
        .collect();
    m
}

/// 07 §9.5: the record's warm standby (`seq_order`'s `Standby` entry) is the file's `[standby]`:
/// its `seq_key` is the standby's `link_key` (one identity per box, as the primary's `seq_pub`),
/// and a record that names a standby needs the file's `[standby]`.
pub(super) fn check_standby_seq(
    m: RepMembership,
    standby_key: Option<VerifyingKey>,
) -> Result<RepMembership, String> {
    let named = m
        .seq_order
        .iter()
        .find(|s| s.role == vyrn_wire::msg::ctrl::Role::Standby);
    match (named, standby_key) {
        (Some(s), Some(k)) if s.seq_key != k.to_bytes() => {
            Err("the standby's seq_key is not [standby] link_key".into())
        }
        (Some(_), None) => Err("it names a standby; the file has no [standby] link_key".into()),
        _ => Ok(m),
    }
}

/// Parse and check a `REP_Membership` file (07 §13.1) for a home of `epoch` whose file lists
/// `voters` and `seq_pub`: it parses; it keeps every rule of §13.1 (`validate`); its
/// certificate verifies against its own voters (a home's first record is certified by the set
/// it names; a later one by the set before it, checked where epochs change); it applies at
/// `epoch`; and its voters' keys, quorum and primary sequencer key are the file's.
pub fn check_membership(
    bytes: &[u8],
    epoch: u32,
    voters: &[VoterMember],
    seq_pub: &VerifyingKey,
) -> Result<RepMembership, String> {
    let m = match vyrn_wire::msg::ctrl::CtrlMsg::parse(bytes) {
        Ok(vyrn_wire::msg::ctrl::CtrlMsg::RepMembership(m)) => *m,
        Ok(_) => return Err("not a REP_Membership record".into()),
        Err(e) => return Err(format!("does not parse: {e:?}")),
    };
    m.validate()
        .map_err(|e| format!("breaks 07 §13.1: {e:?}"))?;
    m.verify_cert(&m)
        .map_err(|e| format!("its certificate does not verify: {e:?}"))?;
    if m.epoch_from > epoch {
        return Err(format!(
            "applies from epoch {}, the home is at epoch {epoch}",
            m.epoch_from
        ));
    }
    if m.voters.len() != voters.len() {
        return Err(format!(
            "{} voters, the file's [voter] sections list {}",
            m.voters.len(),
            voters.len()
        ));
    }
    for (a, b) in m.voters.iter().zip(voters) {
        if a.vote_key != b.vote_key.to_bytes() {
            return Err(format!(
                "voter {}'s vote_key differs from [voter.{}]'s",
                a.index, b.index
            ));
        }
    }
    let primary = m
        .seq_order
        .iter()
        .find(|s| s.role == vyrn_wire::msg::ctrl::Role::Primary)
        .map(|s| s.seq_key);
    if primary != Some(seq_pub.to_bytes()) {
        return Err("the primary sequencer's seq_key is not this box's key".into());
    }
    Ok(m)
}
