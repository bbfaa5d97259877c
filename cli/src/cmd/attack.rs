//! `vyrn up --attack SECS`: the security review's single-datagram attacks (F1–F5 and
//! F17) sent at a running home on loopback, with spoofed source addresses through a raw socket
//! (root only; `IP_HDRINCL`), as an attacker on the facility network would — the home must keep
//! trading, finalizing and replaying the same responses (`cli/tests/up.rs`,
//! `docs/security.md`). A lab fault like `--cut-path`: nothing here runs in a role.
//!
//! Each burst, per replica `i` (and the box, the data box):
//! - F1: a 24-byte `DATA_HB` with `data_seq = u64::MAX` to voter `i`'s data port, from data
//!   box 0's socket for that voter (bounded gap walk);
//! - F2: a forged order frame of the tenure, far ahead, to voter `i`'s control port from a
//!   peer's control address (a "repair" nobody asked for: refused);
//! - F3: a 15-byte `Diverge` (timeout, no evidence) to the box from voter 0's address, and a
//!   conflict whose signatures are garbage (no halt);
//! - F4: a `DataFetch` of 64 frames and three `DataDown`s to data box 0's socket for voter `i`,
//!   from a stranger (answered to nobody);
//! - F5: a NACK for frames `1..=u64::MAX` to the box from voter 0's address (refused at parse);
//! - F17: an unsigned `NackTooOld` to voter `i` from the box's control address (ignored);
//! - F9: from voter `i`'s own addresses, a `[0, 0]` `RepAck` to the box (bare, and sealed under
//!   a made-up key) and a `DataDown` of data box 0 to that box (bare): before the member
//!   envelope, three of those marked the box down and kept a cut-off sequencer from fencing.

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};

use vyrn_home::HomeConfig;
use vyrn_wire::msg::consensus::CertEntry;
use vyrn_wire::msg::ctrl::{
    DataDown, DataFetch, Diverge, DivergeDigest, DivergeReason, Nack, NackTooOld, RepAck,
};
use vyrn_wire::msg::data::{DataFrameBuilder, DataKind};
use vyrn_wire::msg::seal::{from, LinkKey, Sealer};

/// A raw IPv4 socket that writes whole datagrams, headers included (`IPPROTO_RAW`).
pub struct Raw(libc::c_int);

impl Raw {
    /// Open one (root only).
    pub fn open() -> Result<Raw, String> {
        // SAFETY: a plain socket(2) call; the descriptor is owned by `Raw` and closed on drop.
        let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_RAW, libc::IPPROTO_RAW) };
        if fd < 0 {
            return Err(format!(
                "--attack needs a raw socket (root): {}",
                std::io::Error::last_os_error()
            ));
        }
        Ok(Raw(fd))
    }

    /// Send `payload` as a UDP datagram from `src` to `dst` (IPv4 only).
    pub fn send(&self, src: SocketAddr, dst: SocketAddr, payload: &[u8]) -> bool {
        let (SocketAddr::V4(s), SocketAddr::V4(d)) = (src, dst) else {
            return false;
        };
        let b = datagram(s, d, payload);
        let sa = libc::sockaddr_in {
            sin_family: libc::AF_INET as libc::sa_family_t,
            sin_port: 0,
            sin_addr: libc::in_addr {
                s_addr: u32::from(*d.ip()).to_be(),
            },
            sin_zero: [0; 8],
        };
        // SAFETY: `b` and `sa` outlive the call; the length arguments are theirs.
        let n = unsafe {
            libc::sendto(
                self.0,
                b.as_ptr().cast(),
                b.len(),
                0,
                (&sa as *const libc::sockaddr_in).cast(),
                std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
            )
        };
        n == b.len() as isize
    }
}

impl Drop for Raw {
    fn drop(&mut self) {
        // SAFETY: the descriptor was opened by `Raw::open` and is closed once.
        unsafe {
            libc::close(self.0);
        }
    }
}

/// An IPv4 + UDP datagram (the kernel fills the IP checksum and total length for
/// `IPPROTO_RAW`; a UDP checksum of 0 means none, allowed on IPv4).
fn datagram(s: SocketAddrV4, d: SocketAddrV4, payload: &[u8]) -> Vec<u8> {
    let udp_len = 8 + payload.len();
    let total = 20 + udp_len;
    let mut b = Vec::with_capacity(total);
    b.extend_from_slice(&[0x45, 0]);
    b.extend_from_slice(&(total as u16).to_be_bytes());
    b.extend_from_slice(&[0, 0, 0x40, 0, 64, 17, 0, 0]);
    b.extend_from_slice(&s.ip().octets());
    b.extend_from_slice(&d.ip().octets());
    b.extend_from_slice(&s.port().to_be_bytes());
    b.extend_from_slice(&d.port().to_be_bytes());
    b.extend_from_slice(&(udp_len as u16).to_be_bytes());
    b.extend_from_slice(&[0, 0]);
    b.extend_from_slice(payload);
    b
}

/// One burst of every attack at the home `h`; returns the datagrams sent.
pub fn burst(raw: &Raw, h: &HomeConfig) -> usize {
    let mut sent = 0;
    let mut send = |src: SocketAddr, dst: SocketAddr, b: &[u8]| {
        sent += usize::from(raw.send(src, dst, b));
    };
    let box_ctrl = SocketAddr::new(h.box_ip.into(), h.ctrl_port);
    let stranger = SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::new(127, 0, 0, 99), 40_666));
    let voters = &h.voters_members;
    let n = voters.len();
    let Some(v0) = voters.first() else {
        return 0;
    };
    for (i, v) in voters.iter().enumerate() {
        // F1: the data box's heartbeat at the end of data_seq, from its socket for voter i.
        if let (Some(d), Some(to)) = (h.databoxes.first(), v.data_addr) {
            let hb =
                DataFrameBuilder::new(DataKind::DataHb, h.engine.book, h.epoch as u16, u64::MAX, 0);
            send(d.dest_addr(i), to, hb.as_bytes());
            // F4: a stranger at the data box's socket for voter i.
            let to_box = d.dest_addr(i);
            if let Ok(f) = (DataFetch::Range { from: 1, to: 64 }).to_bytes() {
                send(stranger, to_box, &f);
            }
            if let Ok(dd) = (DataDown { d: 0 }).to_bytes() {
                for _ in 0..3 {
                    send(stranger, to_box, &dd);
                }
            }
        }
        // F9: voter i's messages, spoofed: refused by the member envelope.
        let ack = RepAck {
            epoch: h.epoch,
            tenure: 0,
            contiguous_frame_seq: [0, 0],
            path_mask: 0b11,
        };
        if let Ok(b) = ack.to_bytes() {
            send(v.ctrl_addr, box_ctrl, &b);
            let mut forged = Sealer::new(from::voter(i), h.epoch, u64::MAX / 2);
            send(
                v.ctrl_addr,
                box_ctrl,
                &forged.seal_bytes(&LinkKey::from_bytes([0xA5; 32]), &b),
            );
        }
        if let (Some(d), Some(at), Ok(dd)) = (
            h.databoxes.first(),
            v.data_addr,
            (DataDown { d: 0 }).to_bytes(),
        ) {
            send(at, d.dest_addr(i), &dd);
        }
        // F2: a forged frame far ahead, as a peer's "repair".
        let peer = voters[(i + 1) % n].ctrl_addr;
        send(peer, v.ctrl_addr, &forged_frame(h, 1 << 30));
        // F17: an unsigned NackTooOld from the box's address.
        let t = NackTooOld {
            epoch: h.epoch,
            tenure: 0,
            stream: 0,
            oldest_seq: u64::MAX,
            seq_sig: [0; 64],
        };
        if let Ok(b) = t.to_bytes() {
            send(box_ctrl, v.ctrl_addr, &b);
        }
    }
    // F3: a Diverge with no evidence (timeout) and one with garbage signatures (conflict).
    let bare = Diverge {
        epoch: h.epoch,
        index: 0,
        reason: DivergeReason::Timeout,
        digests: vec![],
    };
    let fake = |d: u8| DivergeDigest {
        digest: [d; 32],
        sigs: vec![
            CertEntry {
                index: 0,
                sig: [d; 64],
            },
            CertEntry {
                index: 1,
                sig: [d; 64],
            },
        ],
    };
    let conflict = Diverge {
        epoch: h.epoch,
        index: 0,
        reason: DivergeReason::Conflict,
        digests: vec![fake(1), fake(2)],
    };
    for d in [bare, conflict] {
        if let Ok(b) = d.to_bytes() {
            send(v0.ctrl_addr, box_ctrl, &b);
        }
    }
    // F5: a NACK for every frame there is (the codec's bound refuses it; the bytes are built
    // by hand since the encoder refuses it too).
    let mut nack = Nack {
        epoch: h.epoch,
        tenure: 0,
        stream: 0,
        from_seq: 1,
        to_seq: 1,
    }
    .to_bytes()
    .unwrap_or_default();
    if nack.len() >= 8 {
        let at = nack.len() - 8;
        nack[at..].copy_from_slice(&u64::MAX.to_le_bytes());
        send(v0.ctrl_addr, box_ctrl, &nack);
    }
    sent
}

/// A 48-byte order frame of the home's tenure (HEARTBEAT kind, zero body) at `frame_seq`.
fn forged_frame(h: &HomeConfig, frame_seq: u64) -> Vec<u8> {
    use vyrn_wire::frame::{build_frame, FrameHeader, FrameKind};
    let hdr = FrameHeader {
        kind: FrameKind::Heartbeat,
        book: h.engine.book,
        epoch16: h.epoch as u16,
        frame_seq,
        flags: vyrn_wire::frame::FLAG_PEER_REPAIRED,
        tenure: 0,
        body_len: 24,
        sender: 0,
        stream: 0,
    };
    let mut out = Vec::new();
    build_frame(&hdr, &[0u8; 24], &mut out);
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_datagram_has_the_ipv4_and_udp_headers_a_raw_socket_sends() {
        let s = "127.0.0.1:1000".parse().unwrap();
        let d = "127.0.0.2:2000".parse().unwrap();
        let b = super::datagram(s, d, &[9, 9, 9]);
        assert_eq!(b.len(), 20 + 8 + 3);
        assert_eq!(b[0], 0x45);
        assert_eq!(u16::from_be_bytes([b[2], b[3]]), 31);
        assert_eq!(b[9], 17, "UDP");
        assert_eq!(&b[12..16], &[127, 0, 0, 1]);
        assert_eq!(&b[16..20], &[127, 0, 0, 2]);
        assert_eq!(u16::from_be_bytes([b[20], b[21]]), 1000);
        assert_eq!(u16::from_be_bytes([b[22], b[23]]), 2000);
        assert_eq!(u16::from_be_bytes([b[24], b[25]]), 11);
        assert_eq!(&b[28..], &[9, 9, 9]);
    }
}
