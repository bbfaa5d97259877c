//! Messages outside the order stream: data frames, consensus payloads and certificates, the
//! block journal record, control messages and client packets.
//!
//! Every codec here is a pure function of bytes: `parse` takes the whole message, rejects
//! trailing bytes, truncation, a bad magic or kind, a nonzero reserved field and any count above
//! its documented bound, checks every length against the bytes present before it allocates, and
//! never panics. Layouts, codes and golden vectors: `docs/wire-messages.md`.

pub mod client;
pub mod consensus;
pub mod ctrl;
pub mod data;
pub mod journal;
pub mod rsp_entry;
pub mod seal;

use core::net::{IpAddr, Ipv6Addr, SocketAddr, SocketAddrV6};

use crate::error::Malformed;
use crate::leb::Reader;

/// Voters of a BASE home (07 §1 box table: R1–R4).
pub const N_BASE: u8 = 4;
/// Voters of a CHAIN home (07 §1: 5 validators).
pub const N_CHAIN: u8 = 5;
/// Quorum of a BASE home (07 §9.2: 3 of 4).
pub const Q_BASE: u8 = 3;
/// Quorum of a CHAIN home (07 §9.2: 4 of 5).
pub const Q_CHAIN: u8 = 4;
/// Allocation bound on voters, certificate entries, `seq_order` and `data_boxes` entries
/// (project bound, far above N_CHAIN = 5; 07 §13.1 gives none).
pub const MAX_MEMBERS: usize = 16;
/// Allocation bound on `(session, pkt_seq)` lists: unavailable packets of a seal (07 §9.4) or
/// of one block record (07 §8.2). Project bound: 2^20 ≈ 10 ms of packets at the 100M/s peak.
pub const MAX_UNAVAIL: usize = 1 << 20;

/// An 18-byte network address of 07 §13.1 (`data_addr`, `repl_addr`, …): 16 bytes of IPv6
/// address in network byte order (IPv4 as v4-mapped `::ffff:a.b.c.d`), then the UDP port as a
/// little-endian u16 (missing-chapters §1: integers little-endian).
pub type Addr18 = [u8; 18];

/// Encode a socket address as [`Addr18`] (IPv4 becomes v4-mapped IPv6; scope and flow are dropped).
pub fn addr_from_socket(a: SocketAddr) -> Addr18 {
    let ip = match a.ip() {
        IpAddr::V4(v4) => v4.to_ipv6_mapped(),
        IpAddr::V6(v6) => v6,
    };
    let mut out = [0u8; 18];
    out[..16].copy_from_slice(&ip.octets());
    out[16..].copy_from_slice(&a.port().to_le_bytes());
    out
}

/// Decode an [`Addr18`]; a v4-mapped address comes back as IPv4.
pub fn addr_to_socket(a: &Addr18) -> SocketAddr {
    let mut ip = [0u8; 16];
    ip.copy_from_slice(&a[..16]);
    let ip = Ipv6Addr::from(ip);
    let port = u16::from_le_bytes([a[16], a[17]]);
    match ip.to_ipv4_mapped() {
        Some(v4) => SocketAddr::new(IpAddr::V4(v4), port),
        None => SocketAddr::V6(SocketAddrV6::new(ip, port, 0, 0)),
    }
}

/// A packet's join key `(session, pkt_seq)` (07 §2.1, §5.2). Ordered by session, then pkt_seq.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct PktKey {
    /// `SessionId`.
    pub session: u32,
    /// Per-session packet sequence number, from 1.
    pub pkt_seq: u32,
}

impl PktKey {
    /// Encoded length.
    pub const LEN: usize = 8;

    /// The key a client request packet names — session at bytes 4..8, pkt_seq at 8..12,
    /// little-endian (missing-chapters §2) — read without parsing or checking the packet, for
    /// routing before the full parse (the flow filter, a lane's session map, a join). `None` when
    /// the packet is shorter than 12 bytes.
    pub fn peek(pkt: &[u8]) -> Option<PktKey> {
        Some(PktKey {
            session: Self::peek_session(pkt)?,
            pkt_seq: u32::from_le_bytes(pkt.get(8..12)?.try_into().ok()?),
        })
    }

    /// The session alone ([`PktKey::peek`]); `None` when shorter than 8 bytes.
    pub fn peek_session(pkt: &[u8]) -> Option<u32> {
        Some(u32::from_le_bytes(pkt.get(4..8)?.try_into().ok()?))
    }

    /// Append `session u32, pkt_seq u32`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.session.to_le_bytes());
        out.extend_from_slice(&self.pkt_seq.to_le_bytes());
    }

    pub(crate) fn read(r: &mut Reader<'_>) -> Result<Self, Malformed> {
        Ok(PktKey {
            session: r.u32_le()?,
            pkt_seq: r.u32_le()?,
        })
    }
}

/// Read `n` [`PktKey`]s that must be strictly ascending (a canonical set), checking the length
/// against the bytes present before allocating.
pub(crate) fn read_keys(r: &mut Reader<'_>, n: usize) -> Result<Vec<PktKey>, Malformed> {
    if n > MAX_UNAVAIL {
        return Err(Malformed::TooMany);
    }
    if n.saturating_mul(PktKey::LEN) > r.remaining() {
        return Err(Malformed::Truncated);
    }
    let mut v = Vec::with_capacity(n);
    for _ in 0..n {
        let k = PktKey::read(r)?;
        if v.last().is_some_and(|p: &PktKey| *p >= k) {
            return Err(Malformed::BadValue);
        }
        v.push(k);
    }
    Ok(v)
}

/// True when `keys` is strictly ascending (the canonical order of every key list here).
pub(crate) fn keys_ascending(keys: &[PktKey]) -> bool {
    keys.windows(2).all(|w| w[0] < w[1])
}

/// Trailing bytes after a complete message are a length error.
#[inline]
pub(crate) fn finish(r: &Reader<'_>) -> Result<(), Malformed> {
    if r.is_empty() {
        Ok(())
    } else {
        Err(Malformed::BadLength)
    }
}

#[inline]
pub(crate) fn put_u16(out: &mut Vec<u8>, v: u16) {
    out.extend_from_slice(&v.to_le_bytes());
}

#[inline]
pub(crate) fn put_u32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_le_bytes());
}

#[inline]
pub(crate) fn put_u64(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(&v.to_le_bytes());
}

/// Constant-time equality of two 16-byte tags.
#[inline]
pub(crate) fn ct_eq16(a: &[u8; 16], b: &[u8; 16]) -> bool {
    let mut d = 0u8;
    for i in 0..16 {
        d |= a[i] ^ b[i];
    }
    d == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn msg_addr18_round_trip() {
        let v4: SocketAddr = "10.1.2.3:7402".parse().unwrap();
        let a = addr_from_socket(v4);
        assert_eq!(&a[..12], &[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF]);
        assert_eq!(&a[12..16], &[10, 1, 2, 3]);
        assert_eq!(&a[16..], &7402u16.to_le_bytes());
        assert_eq!(addr_to_socket(&a), v4);
        let v6: SocketAddr = "[2001:db8::7]:7401".parse().unwrap();
        assert_eq!(addr_to_socket(&addr_from_socket(v6)), v6);
    }
}
