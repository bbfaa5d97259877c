//! A data box of a home (07 §5.1) from the home's file ([`HomeConfig`], the file every role of
//! the home reads): its [`DataConfig`] and its [`Driver`] on UDP sockets. Used by the `vyrn-data`
//! binary and by the whole-home tests.
//!
//! Sockets: the client port at the box's `client_addr` (copy 2), one socket per voter `i` at
//! `dest_base + i` whose default destination is voter `i`'s `data_addr` (DATA, DATA_HB,
//! FETCH_RESP out; that voter's DataFetch and DataDown in), one for the standby's replica where
//! the home has one (`standby_port`, to its `data_addr`: 07 §5.1's destinations are the voters
//! and the standby), and an unbound socket toward the sequencer's control port (DataBadMac,
//! CopyConflict).

use std::net::SocketAddr;
use std::os::fd::{AsRawFd, RawFd};

use vyrn_home::HomeConfig;
use vyrn_nic::udp::{UdpConfig, UdpPort};

use crate::config::{DataConfig, DestConfig, SessionConfig};
use crate::databox::DataBox;
use crate::driver::Driver;

/// Data box `index`'s config: the home's sessions (each with its data home,
/// [`HomeConfig::data_home`]), the voters as destinations in membership order, DATA_HB every
/// `hb_ns` when idle, open frames sent at `batch_ns` old.
pub fn config(h: &HomeConfig, index: u8, hb_ns: u64, batch_ns: u64) -> Result<DataConfig, String> {
    let n = h.databoxes.len();
    if h.databoxes.iter().all(|d| d.index != index) {
        return Err(format!("the home's file has no [databox.{index}]"));
    }
    if h.voters_members.iter().any(|v| v.data_addr.is_none()) {
        return Err("every [voter] needs data_addr in a home with data boxes".into());
    }
    let mut c = DataConfig::new(index, (0..n as u8).collect(), vec![h.engine.book]);
    c.epoch = h.epoch;
    // Q of the home's voters (07 §5.7: Q DataDowns make a box down).
    c.quorum = vyrn_home::quorum(h.voters_members.len()) as u8;
    c.hb_ns = hb_ns;
    c.batch_ns = batch_ns;
    c.sessions = h
        .engine
        .sessions
        .iter()
        .map(|s| SessionConfig {
            session: s.session,
            k_seq: s.k_seq,
            k_out: s.k_out,
            home: h.data_home(s.session),
            addr: h.session_addrs.get(&s.session).copied(),
        })
        .collect();
    c.dests = h
        .voters_members
        .iter()
        .map(|v| DestConfig {
            name: format!("R{}", v.index),
            voter: true,
        })
        .collect();
    // 07 §5.1: the destinations are the voters and the standby (its replica, 07 §9.5).
    if h.standby_member().is_some() {
        c.dests.push(DestConfig {
            name: "standby".into(),
            voter: false,
        });
    }
    c.validate()
        .map_err(|e| format!("data box config: {e:?}"))?;
    Ok(c)
}

/// The box for `cfg` on its sockets; `key` is its identity, whose public key must be its
/// `[databox.N] link_key` (each voter's messages come sealed under the link key agreed with
/// it).
pub fn open(
    h: &HomeConfig,
    cfg: &DataConfig,
    key: &ed25519_dalek::SigningKey,
) -> Result<Driver<UdpPort>, String> {
    let me = h
        .databoxes
        .get(cfg.index as usize)
        .ok_or_else(|| format!("the home's file has no [databox.{}]", cfg.index))?;
    if key.verifying_key() != me.link_key {
        return Err(format!(
            "the key is not [databox.{}] link_key's secret: the voters would seal to another box",
            cfg.index
        ));
    }
    let open = |c: UdpConfig, what: String| UdpPort::open(&c).map_err(|e| format!("{what}: {e}"));
    let mut cc = UdpConfig::new(me.client_addr).with_batch(64);
    cc.recv_buffer = Some(8 << 20);
    let clients = open(cc, format!("client port {}", me.client_addr))?;
    let seq_ctrl_addr = SocketAddr::new(std::net::IpAddr::V4(h.box_ip), h.ctrl_port);
    let seq_ctrl = open(
        UdpConfig::new(SocketAddr::new(me.client_addr.ip(), 0))
            .with_batch(16)
            .with_dest(seq_ctrl_addr),
        "sequencer control socket".into(),
    )?;
    let mut dests = Vec::new();
    for v in &h.voters_members {
        let at = me.dest_addr(v.index);
        let mut c = UdpConfig::new(at).with_batch(64);
        c.default_dest = v.data_addr;
        c.send_buffer = Some(4 << 20);
        dests.push(open(c, format!("socket for voter {} at {at}", v.index))?);
    }
    // The standby's replica is destination `voters` (07 §5.1).
    let standby = h.standby_member();
    if let (Some(sb), true) = (&standby, cfg.dests.len() > h.voters_members.len()) {
        let at = me.standby_addr(sb.index);
        let mut c = UdpConfig::new(at).with_batch(64);
        c.default_dest = sb.data_addr;
        c.send_buffer = Some(4 << 20);
        dests.push(open(c, format!("socket for the standby at {at}"))?);
    }
    let databox = DataBox::new(cfg).map_err(|e| format!("{e:?}"))?;
    let mut d = Driver::new(databox, clients, seq_ctrl, dests, 64).map_err(|e| format!("{e:?}"))?;
    // 07 §5.2's reports go to the sequencer sealed (security review F13: its control port takes
    // a data box's messages only under the data box's link key).
    let to_seq = vyrn_wire::msg::seal::LinkKey::agree(key, &h.seq_pub)
        .ok_or("seq_pub gives no link key (a weak key)")?;
    d.seal_to_seq(
        to_seq,
        vyrn_wire::msg::seal::Sealer::new(
            vyrn_wire::msg::seal::from::databox(cfg.index),
            h.epoch,
            vyrn_wire::msg::seal::start_seq(),
        ),
    );
    // Security review F4: each voter's socket takes that voter's messages only.
    for (i, v) in h.voters_members.iter().enumerate() {
        if let Some(a) = v.data_addr {
            d.expect_source(i, a);
        }
        let link = vyrn_wire::msg::seal::LinkKey::agree(key, &v.vote_key)
            .ok_or_else(|| format!("voter {}'s vote_key gives no link key", v.index))?;
        let mut o = vyrn_wire::msg::seal::Opener::new(h.epoch);
        o.add(vyrn_wire::msg::seal::from::voter(v.index), link);
        d.expect_sealed(i, o);
    }
    if let (Some(sb), true) = (&standby, cfg.dests.len() > h.voters_members.len()) {
        if let Some(a) = sb.data_addr {
            d.expect_source(sb.index, a);
        }
        let link = vyrn_wire::msg::seal::LinkKey::agree(key, &sb.vote_key)
            .ok_or("[standby] link_key gives no link key")?;
        let mut o = vyrn_wire::msg::seal::Opener::new(h.epoch);
        o.add(vyrn_wire::msg::seal::from::STANDBY, link.clone());
        d.expect_sealed(sb.index, o);
        // 07 §9.5: promoted, the standby is the box: this box's reports go to its control
        // port under the same link key, and its replica is fed no more.
        if let (Some(ctrl), Some((seq, _))) = (h.standby_ctrl, h.standby_seq()) {
            d.add_successor(seq, ctrl, link, Some(sb.index));
        }
    }
    Ok(d)
}

/// Data box `index`'s key file when the command line names none: `keys/databox-N.key` beside
/// the home's file (where `vyrn init` and the dev writers put it).
pub fn default_key_path(home_file: &std::path::Path, index: u8) -> std::path::PathBuf {
    home_file
        .parent()
        .unwrap_or(std::path::Path::new("."))
        .join(format!("keys/databox-{index}.key"))
}

/// The sockets a loop blocks on: the client port and every voter's socket.
pub fn fds(d: &mut Driver<UdpPort>) -> Vec<RawFd> {
    let mut fds = vec![d.clients().socket().as_raw_fd()];
    for i in 0..d.databox.n_dests() {
        fds.push(d.dest(i).socket().as_raw_fd());
    }
    fds
}
